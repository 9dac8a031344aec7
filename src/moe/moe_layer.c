/*
 * moe_layer.c - the public MoE API (tpm_moe_*): config validation, the rank
 * layout (global rank = ep_rank * tp_size + tp_rank), the shared-expert
 * fusion decision, loading the weights and cutting this rank's shard
 * (layout in moe_internal.h), and dispatch to the backend's ops.
 */
#include "moe/moe_internal.h"

#include "model/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORLD 64

/* Record the thread's message in the handle and return st. */
static tpm_status fail_on(struct tpm_moe *m, tpm_status st) {
    if (m && st != TPM_OK) snprintf(m->last_error, sizeof m->last_error, "%s", tpm_err_msg());
    return st;
}

/* MARK: config */

static tpm_status check_config(const tpm_moe_config *cfg) {
    TPM_ARG_CHECK(cfg != NULL, "tpm_moe_create: config is NULL");
    TPM_ARG_CHECK(cfg->struct_size == sizeof(tpm_moe_config) &&
                      cfg->version == TPM_MOE_CONFIG_VERSION,
                  "tpm_moe_create: config struct_size %u / version %u do not match this library "
                  "(%zu / %u): start from TPM_MOE_CONFIG_INIT",
                  cfg->struct_size, cfg->version, sizeof(tpm_moe_config), TPM_MOE_CONFIG_VERSION);
    TPM_ARG_CHECK(cfg->preset != NULL, "tpm_moe_create: config.preset is NULL");
    TPM_ARG_CHECK(cfg->layer >= 0, "tpm_moe_create: config.layer %d is negative", (int)cfg->layer);
    TPM_ARG_CHECK(cfg->fuse_shared >= -1 && cfg->fuse_shared <= 1,
                  "tpm_moe_create: config.fuse_shared %d is not -1 (auto), 0 or 1",
                  (int)cfg->fuse_shared);
    TPM_ARG_CHECK((int)cfg->backend >= 0 && cfg->backend < TPM_BACKEND_COUNT_,
                  "tpm_moe_create: config.backend %d is not a backend", (int)cfg->backend);
    TPM_ARG_CHECK((int)cfg->dtype >= 0 && cfg->dtype < TPM_DTYPE_COUNT_,
                  "tpm_moe_create: config.dtype %d is not a dtype", (int)cfg->dtype);
    TPM_ARG_CHECK((int)cfg->codec >= -1 && cfg->codec < TPM_CODEC_COUNT_,
                  "tpm_moe_create: config.codec %d is not a codec", (int)cfg->codec);
    TPM_ARG_CHECK((int)cfg->algo >= 0 && cfg->algo < TPM_ALGO_COUNT_,
                  "tpm_moe_create: config.algo %d is not an algorithm", (int)cfg->algo);
    TPM_ARG_CHECK(cfg->tp_size == -1 || (cfg->tp_size >= 1 && cfg->tp_size <= MAX_WORLD),
                  "tpm_moe_create: config.tp_size %d outside [1, %d]", (int)cfg->tp_size,
                  MAX_WORLD);
    TPM_ARG_CHECK(cfg->ep_size == -1 || (cfg->ep_size >= 1 && cfg->ep_size <= MAX_WORLD),
                  "tpm_moe_create: config.ep_size %d outside [1, %d]", (int)cfg->ep_size,
                  MAX_WORLD);
    return TPM_OK;
}

/* Fill the rank layout from the config and the communicator. */
static tpm_status resolve_ranks(struct tpm_moe *m, const tpm_moe_config *cfg, tpm_comm_t comm) {
    int crank = 0, cworld = 1;
    if (comm) {
        TPM_TRY(tpm_comm_rank(comm, &crank));
        TPM_TRY(tpm_comm_world_size(comm, &cworld));
    }
    m->ep_size = cfg->ep_size > 0 ? cfg->ep_size : 1;
    if (cfg->tp_size > 0) {
        m->tp_size = cfg->tp_size;
    } else {
        TPM_ARG_CHECK(cworld % m->ep_size == 0,
                      "tpm_moe_create: comm world %d is not a multiple of ep_size %d", cworld,
                      m->ep_size);
        m->tp_size = cworld / m->ep_size;
    }
    m->world = m->tp_size * m->ep_size;
    TPM_ARG_CHECK(m->world <= MAX_WORLD, "tpm_moe_create: tp_size %d x ep_size %d > %d ranks",
                  m->tp_size, m->ep_size, MAX_WORLD);
    m->tp_rank = cfg->tp_rank >= 0 ? cfg->tp_rank : crank % m->tp_size;
    m->ep_rank = cfg->ep_rank >= 0 ? cfg->ep_rank : crank / m->tp_size;
    TPM_ARG_CHECK(m->tp_rank < m->tp_size, "tpm_moe_create: tp_rank %d outside [0, tp_size %d)",
                  m->tp_rank, m->tp_size);
    TPM_ARG_CHECK(m->ep_rank < m->ep_size, "tpm_moe_create: ep_rank %d outside [0, ep_size %d)",
                  m->ep_rank, m->ep_size);
    m->rank = m->ep_rank * m->tp_size + m->tp_rank;
    if (comm) {
        if (cworld != m->world)
            return tpm_err(TPM_ERR_MISMATCH,
                           "tpm_moe_create: comm world %d != tp_size %d x ep_size %d", cworld,
                           m->tp_size, m->ep_size);
        if (crank != m->rank)
            return tpm_err(TPM_ERR_MISMATCH,
                           "tpm_moe_create: comm rank %d != ep_rank %d * tp_size %d + tp_rank %d",
                           crank, m->ep_rank, m->tp_size, m->tp_rank);
    }
    return TPM_OK;
}

static tpm_status check_shapes(const struct tpm_moe *m) {
    const char *pn = m->preset->name;
    TPM_ARG_CHECK(m->hidden >= 1 && m->inter >= 1, "preset %s: hidden %d / inter %d must be >= 1",
                  pn, m->hidden, m->inter);
    TPM_ARG_CHECK(m->n_experts % m->ep_size == 0,
                  "preset %s: %d routed experts cannot be split over ep_size %d", pn, m->n_experts,
                  m->ep_size);
    TPM_ARG_CHECK(m->inter % m->tp_size == 0,
                  "preset %s: expert intermediate %d is not divisible by tp_size %d", pn, m->inter,
                  m->tp_size);
    TPM_ARG_CHECK(m->ap.kind == TPM_ACT_SWIGLU_OAI ||
                      m->ap.kind == TPM_ACT_SWIGLU_OAI_INTERLEAVED ||
                      m->ap.kind == TPM_ACT_SILU_GLU,
                  "preset %s: activation kind %d unknown", pn, (int)m->ap.kind);
    if (m->n_shared > 0) {
        int parts = m->fuse ? m->tp_size : m->world;
        TPM_ARG_CHECK(m->shared_inter % parts == 0,
                      "preset %s: shared expert intermediate %d is not divisible by %d %s", pn,
                      m->shared_inter, parts,
                      m->fuse ? "TP ranks" : "ranks (unfused: sharded over tp_size x ep_size)");
    }
    return TPM_OK;
}

/* The shared-expert fusion decision (docs/moe.md). */
static tpm_status resolve_fusion(struct tpm_moe *m, int requested) {
    const tpm_preset *p = m->preset;
    char *why = m->fuse_reason;
    size_t wl = sizeof m->fuse_reason;
    m->fuse = 0;
    if (m->n_shared == 0) {
        snprintf(why, wl, "off: preset %s has no shared expert", p->name);
        if (requested == 1)
            TPM_LOG_I("moe: fuse_shared=1 ignored: preset %s has no shared expert", p->name);
        return TPM_OK;
    }
    int same_size = m->shared_inter == m->inter, same_fmt = p->shared_format == p->routed_format;
    if (requested == 1) {
        if (!same_size || !same_fmt)
            return tpm_err(TPM_ERR_UNSUPPORTED,
                           "fuse_shared=1: preset %s's shared expert (inter %d, format %d) differs "
                           "from its routed experts (inter %d, format %d)",
                           p->name, m->shared_inter, (int)p->shared_format, m->inter,
                           (int)p->routed_format);
        m->fuse = 1;
        if (m->ep_size > 1)
            snprintf(why, wl,
                     "on (requested); EP %d: token t's shared slot runs on EP rank t %% %d",
                     m->ep_size, m->ep_size);
        else
            snprintf(why, wl, "on (requested)");
        return TPM_OK;
    }
    if (requested == 0) {
        snprintf(why, wl, "off (requested)");
        return TPM_OK;
    }
    /* auto: the policy (TPMOE_FUSE_SHARED_EXPERTS + model rules) decides;
     * its reason is the report's "fuse shared" line. */
    tpm_config c = TPM_CONFIG_INIT;
    tpm_resolved_config rc;
    char report[4096];
    c.backend = TPM_BACKEND_CPU;
    c.rank = 0;
    c.world_size = m->world;
    c.model = p->name;
    c.tp = m->tp_size;
    c.ep = m->ep_size;
    c.dtype = m->dtype;
    TPM_TRY(tpm_config_resolve(&c, &rc, report, sizeof report));
    m->fuse = rc.fuse_shared && same_size && same_fmt;
    const char *line = strstr(report, "fuse shared");
    const char *paren = line ? strchr(line, '(') : NULL;
    if (paren) {
        size_t n = strcspn(paren, "\n");
        snprintf(why, wl, "%s (auto, policy %.*s)", m->fuse ? "on" : "off",
                 (int)(n > 1 ? n - 2 : 0), paren + 1);
    } else {
        snprintf(why, wl, "%s (auto, policy)", m->fuse ? "on" : "off");
    }
    return TPM_OK;
}

/* MARK: shards */

static void free_stack(tpm_moe_stack *s) {
    free(s->gate_up);
    free(s->gate_up_bias);
    free(s->down);
    free(s->down_bias);
    memset(s, 0, sizeof *s);
}

static tpm_status alloc_stack(tpm_moe_stack *s, int n, int inter, int hidden, int gu_bias,
                              int dn_bias) {
    size_t N = (size_t)n, I = (size_t)inter, H = (size_t)hidden;
    s->n = n;
    s->inter = inter;
    if (n == 0) return TPM_OK;
    s->gate_up = malloc(N * 2 * I * H * sizeof(float));
    s->down = malloc(N * H * I * sizeof(float));
    s->gate_up_bias = gu_bias ? calloc(N * 2 * I, sizeof(float)) : NULL;
    s->down_bias = dn_bias ? calloc(N * H, sizeof(float)) : NULL;
    if (!s->gate_up || !s->down || (gu_bias && !s->gate_up_bias) || (dn_bias && !s->down_bias)) {
        free_stack(s);
        return tpm_err(TPM_ERR_NO_MEMORY, "moe: out of memory for %d expert slots (%zu MB)", n,
                       (N * 3 * I * H * sizeof(float)) >> 20);
    }
    return TPM_OK;
}

/* Copy shard `part` of `parts` of expert src (full intermediate I) into slot
 * i of s. The down bias is copied where s has room for it: only the stack of
 * the rank that adds it (alloc_stack's dn_bias), so the sum over ranks has it
 * once. */
static void copy_shard(tpm_moe_stack *s, int i, const tpm_expert_weights *src, int hidden,
                       int full_inter, int part, int parts, int interleaved) {
    const size_t H = (size_t)hidden, I = (size_t)full_inter, Il = I / (size_t)parts;
    const size_t r0 = (size_t)part * Il;
    tpm_expert_view v = tpm_moe_stack_view(s, hidden, i);
    float *gu = (float *)(uintptr_t)v.gate_up, *gub = (float *)(uintptr_t)v.gate_up_bias;
    float *dn = (float *)(uintptr_t)v.down, *dnb = (float *)(uintptr_t)v.down_bias;
    for (size_t l = 0; l < 2 * Il; l++) {
        /* local row l <- full row: interleaved pairs stay pairs */
        size_t fr = interleaved ? 2 * r0 + l : (l < Il ? r0 + l : I + r0 + (l - Il));
        memcpy(gu + l * H, src->gate_up + fr * H, H * sizeof(float));
        if (gub && src->gate_up_bias) gub[l] = src->gate_up_bias[fr];
    }
    for (size_t o = 0; o < H; o++)
        memcpy(dn + o * Il, src->down + o * I + r0, Il * sizeof(float));
    if (dnb && src->down_bias) memcpy(dnb, src->down_bias, H * sizeof(float));
}

static int any_bias(const tpm_expert_weights *e, int n, int down) {
    for (int i = 0; i < n; i++)
        if (down ? e[i].down_bias != NULL : e[i].gate_up_bias != NULL) return 1;
    return 0;
}

static tpm_status check_weights(const struct tpm_moe *m, const tpm_moe_weights *w) {
    TPM_ARG_CHECK(w->router && w->experts, "moe weights: router or experts missing");
    TPM_ARG_CHECK(w->hidden == m->hidden && w->n_experts == m->n_experts && w->inter == m->inter &&
                      w->n_shared == m->n_shared &&
                      (m->n_shared == 0 || w->shared_inter == m->shared_inter),
                  "moe weights (hidden %d, experts %d, inter %d, shared %d x %d) do not match "
                  "preset %s (hidden %d, experts %d, inter %d, shared %d x %d)",
                  w->hidden, w->n_experts, w->inter, w->n_shared, w->shared_inter, m->preset->name,
                  m->hidden, m->n_experts, m->inter, m->n_shared, m->shared_inter);
    TPM_ARG_CHECK(w->interleaved == (m->ap.kind == TPM_ACT_SWIGLU_OAI_INTERLEAVED),
                  "moe weights: gate_up layout (interleaved %d) does not match preset %s",
                  w->interleaved, m->preset->name);
    TPM_ARG_CHECK(m->n_shared == 0 || w->shared, "moe weights: shared experts missing");
    for (int e = 0; e < m->n_experts; e++)
        TPM_ARG_CHECK(w->experts[e].gate_up && w->experts[e].down,
                      "moe weights: expert %d has no gate_up/down", e);
    for (int e = 0; e < m->n_shared; e++)
        TPM_ARG_CHECK(w->shared[e].gate_up && w->shared[e].down,
                      "moe weights: shared expert %d has no gate_up/down", e);
    return TPM_OK;
}

static tpm_status build_shard(struct tpm_moe *m, const tpm_moe_weights *w) {
    const int H = m->hidden, E = m->n_experts, il = m->ap.kind == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    const size_t EH = (size_t)E * (size_t)H;
    m->router = malloc(EH * sizeof(float));
    if (!m->router) return tpm_err(TPM_ERR_NO_MEMORY, "moe: out of memory for the router");
    memcpy(m->router, w->router, EH * sizeof(float));
    if (w->router_bias) {
        m->router_bias = malloc((size_t)E * sizeof(float));
        if (!m->router_bias) return tpm_err(TPM_ERR_NO_MEMORY, "moe: out of memory for the router");
        memcpy(m->router_bias, w->router_bias, (size_t)E * sizeof(float));
    }
    int per = E / m->ep_size, nfs = m->fuse ? m->n_shared : 0;
    m->expert_begin = m->ep_rank * per;
    m->expert_end = m->expert_begin + per;
    const tpm_expert_weights *mine = w->experts + m->expert_begin;
    int gub = any_bias(mine, per, 0) || (nfs && any_bias(w->shared, nfs, 0));
    int dnb = m->tp_rank == 0 && (any_bias(mine, per, 1) || (nfs && any_bias(w->shared, nfs, 1)));
    TPM_TRY(alloc_stack(&m->experts, per + nfs, m->inter / m->tp_size, H, gub, dnb));
    for (int i = 0; i < per; i++)
        copy_shard(&m->experts, i, &mine[i], H, m->inter, m->tp_rank, m->tp_size, il);
    for (int s = 0; s < nfs; s++)
        copy_shard(&m->experts, per + s, &w->shared[s], H, m->shared_inter, m->tp_rank, m->tp_size, il);
    if (!m->fuse && m->n_shared > 0) {
        int ns = m->n_shared;
        TPM_TRY(alloc_stack(&m->shared, ns, m->shared_inter / m->world, H,
                            any_bias(w->shared, ns, 0),
                            m->rank == 0 && any_bias(w->shared, ns, 1)));
        for (int s = 0; s < ns; s++)
            copy_shard(&m->shared, s, &w->shared[s], H, m->shared_inter, m->rank, m->world, il);
    }
    return TPM_OK;
}

void tpm_moe_ref_layer_from_weights(const tpm_moe_weights *w, tpm_expert_view *experts,
                                    tpm_expert_view *shared, tpm_moe_ref_layer *L) {
    for (int e = 0; e < w->n_experts; e++) {
        experts[e].gate_up = w->experts[e].gate_up;
        experts[e].gate_up_bias = w->experts[e].gate_up_bias;
        experts[e].down = w->experts[e].down;
        experts[e].down_bias = w->experts[e].down_bias;
    }
    for (int s = 0; s < w->n_shared; s++) {
        shared[s].gate_up = w->shared[s].gate_up;
        shared[s].gate_up_bias = w->shared[s].gate_up_bias;
        shared[s].down = w->shared[s].down;
        shared[s].down_bias = w->shared[s].down_bias;
    }
    L->hidden = w->hidden;
    L->n_experts = w->n_experts;
    L->inter = w->inter;
    L->n_shared = w->n_shared;
    L->shared_inter = w->shared_inter;
    L->router = w->router;
    L->router_bias = w->router_bias;
    L->experts = experts;
    L->shared = w->n_shared ? shared : NULL;
}

/* MARK: create / destroy */

static void moe_free(struct tpm_moe *m) {
    if (!m) return;
    if (m->ops && m->ops->destroy) m->ops->destroy(m);
    free(m->router);
    free(m->router_bias);
    free_stack(&m->experts);
    free_stack(&m->shared);
    free(m->last_ids);
    free(m->last_weights);
    free(m->counts);
    free(m);
}

tpm_status tpm_moe_reserve_routing(struct tpm_moe *m, size_t ntokens) {
    if (ntokens <= m->routing_cap) return TPM_OK;
    size_t k = (size_t)m->top_k;
    int32_t *ids = realloc(m->last_ids, ntokens * k * sizeof *ids);
    if (ids) m->last_ids = ids;
    float *w = realloc(m->last_weights, ntokens * k * sizeof *w);
    if (w) m->last_weights = w;
    if (!ids || !w) return tpm_err(TPM_ERR_NO_MEMORY, "moe: out of memory for %zu tokens", ntokens);
    m->routing_cap = ntokens;
    return TPM_OK;
}

static tpm_status create_common(struct tpm_moe **out, const tpm_moe_config *cfg, tpm_comm_t comm,
                                const tpm_preset **preset) {
    TPM_ARG_CHECK(out != NULL, "tpm_moe_create: moe out-pointer is NULL");
    *out = NULL;
    TPM_TRY(check_config(cfg));
    const tpm_preset *p = tpm_preset_find(cfg->preset);
    if (!p) {
        char names[256] = "";
        for (const tpm_preset *const *q = tpm_preset_list(); *q; q++) {
            strncat(names, (*q)->name, sizeof names - strlen(names) - 1);
            if (q[1]) strncat(names, ", ", sizeof names - strlen(names) - 1);
        }
        return tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_create: unknown preset '%s' (known: %s)",
                       cfg->preset, names);
    }
    *preset = p;
    struct tpm_moe *m = calloc(1, sizeof *m);
    if (!m) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_moe_create: out of memory");
    *out = m;
    m->preset = p;
    m->hidden = p->hidden;
    m->n_experts = p->n_experts;
    m->top_k = p->top_k;
    m->inter = p->inter;
    m->n_shared = p->n_shared;
    m->shared_inter = p->n_shared ? p->shared_inter : 0;
    m->dtype = cfg->dtype;
    m->codec = cfg->codec;
    m->algo = cfg->algo;
    m->device = cfg->device;
    TPM_TRY(tpm_router_params_from_preset(p, &m->rp));
    tpm_act_params_from_preset(p, &m->ap);
    TPM_TRY(resolve_ranks(m, cfg, comm));
    TPM_TRY(resolve_fusion(m, cfg->fuse_shared));
    TPM_TRY(check_shapes(m));
    m->counts = calloc((size_t)(m->n_experts + m->n_shared), sizeof *m->counts);
    if (!m->counts) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_moe_create: out of memory");
    tpm_backend b = cfg->backend;
#ifdef TPMOE_HAVE_CUDA
    if (b == TPM_BACKEND_AUTO) b = tpm_moe_cuda_auto_backend(comm);
    m->backend = b;
    if (b == TPM_BACKEND_CUDA) TPM_TRY(tpm_moe_cuda_check(m, comm));
#else
    if (b == TPM_BACKEND_AUTO) b = TPM_BACKEND_CPU;
    if (b == TPM_BACKEND_CUDA)
        return tpm_err(TPM_ERR_UNSUPPORTED, "tpm_moe_create: backend cuda: this build has no CUDA "
                                            "(TPMOE_CUDA=OFF); use backend cpu");
    m->backend = b;
#endif
    return TPM_OK;
}

static tpm_status finish_create(struct tpm_moe *m, const tpm_moe_weights *w) {
    TPM_TRY(check_weights(m, w));
#ifdef TPMOE_HAVE_CUDA
    if (m->backend == TPM_BACKEND_CUDA) {
        TPM_TRY(tpm_moe_cuda_init(m, w));
    } else
#endif
    {
        TPM_TRY(build_shard(m, w));
        TPM_TRY(tpm_moe_cpu_init(m));
    }
    TPM_LOG_I("moe: %s rank %d (tp %d/%d, ep %d/%d): experts [%d, %d), inter %d/rank, shared %s",
              m->preset->name, m->rank, m->tp_rank, m->tp_size, m->ep_rank, m->ep_size,
              m->expert_begin, m->expert_end, m->experts.inter, m->fuse_reason);
    return TPM_OK;
}

tpm_status tpm_moe_create_from_weights(tpm_moe_t *moe, const tpm_moe_config *cfg, tpm_comm_t comm,
                                       const tpm_moe_weights *w) {
    TPM_ARG_CHECK(moe != NULL, "tpm_moe_create: moe out-pointer is NULL");
    struct tpm_moe *m = NULL;
    const tpm_preset *p = NULL;
    tpm_status st = create_common(&m, cfg, comm, &p);
    if (st == TPM_OK && !w) st = tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_create: weights are NULL");
    if (st == TPM_OK) st = finish_create(m, w);
    if (st != TPM_OK) {
        moe_free(m);
        *moe = NULL;
        return st;
    }
    *moe = m;
    return TPM_OK;
}

tpm_status tpm_moe_create(tpm_moe_t *moe, const tpm_moe_config *cfg, tpm_comm_t comm) {
    TPM_ARG_CHECK(moe != NULL, "tpm_moe_create: moe out-pointer is NULL");
    struct tpm_moe *m = NULL;
    const tpm_preset *p = NULL;
    tpm_moe_weights w;
    memset(&w, 0, sizeof w);
    tpm_status st = create_common(&m, cfg, comm, &p);
    if (st == TPM_OK) {
        if (cfg->weights) {
            tpm_st_file *f = NULL;
            st = tpm_st_open(cfg->weights, &f);
            if (st == TPM_OK) st = tpm_moe_weights_load(f, p, cfg->layer, &w);
            tpm_st_close(f);
        } else {
            st = tpm_moe_weights_random_layer(p, cfg->seed, cfg->layer, p->routed_format, &w);
        }
    }
    if (st == TPM_OK) st = finish_create(m, &w);
    tpm_moe_weights_free(&w);
    if (st != TPM_OK) {
        moe_free(m);
        *moe = NULL;
        return st;
    }
    *moe = m;
    return TPM_OK;
}

tpm_status tpm_moe_destroy(tpm_moe_t moe) {
    moe_free(moe);
    return TPM_OK;
}

/* MARK: forward and queries */

tpm_status tpm_moe_forward(tpm_moe_t m, tpm_comm_t comm, const void *x, void *y, size_t ntokens,
                           tpm_dtype dtype, void *stream) {
    TPM_ARG_CHECK(m != NULL, "tpm_moe_forward: moe is NULL");
    m->last_error[0] = '\0';
    tpm_status st = TPM_OK;
    if (ntokens > 0 && (!x || !y))
        st = tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_forward: x or y is NULL");
    else if (dtype != m->dtype)
        st = tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_forward: dtype %s != the layer's dtype %s",
                     tpm_dtype_name(dtype), tpm_dtype_name(m->dtype));
    else if (ntokens > ((size_t)1 << 31) / (size_t)m->hidden)
        st = tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_forward: ntokens %zu too large", ntokens);
    else if (m->world > 1 && !comm)
        st = tpm_err(TPM_ERR_INVALID_ARG,
                     "tpm_moe_forward: comm is NULL but the layer spans %d ranks", m->world);
    if (st == TPM_OK && comm) {
        int r = -1, wsz = -1;
        st = tpm_comm_rank(comm, &r);
        if (st == TPM_OK) st = tpm_comm_world_size(comm, &wsz);
        if (st == TPM_OK && (r != m->rank || wsz != m->world))
            st = tpm_err(TPM_ERR_MISMATCH,
                         "tpm_moe_forward: comm is rank %d of %d, the layer is rank %d of %d", r,
                         wsz, m->rank, m->world);
    }
    if (st == TPM_OK) st = m->ops->forward(m, comm, x, y, ntokens, stream);
    return fail_on(m, st);
}

tpm_status tpm_moe_set_allreduce(tpm_moe_t m, tpm_codec codec, tpm_algo algo) {
    TPM_ARG_CHECK(m != NULL, "tpm_moe_set_allreduce: moe is NULL");
    if ((int)codec < -1 || codec >= TPM_CODEC_COUNT_ || (int)algo < 0 || algo >= TPM_ALGO_COUNT_)
        return fail_on(m, tpm_err(TPM_ERR_INVALID_ARG,
                                  "tpm_moe_set_allreduce: codec %d / algo %d out of range",
                                  (int)codec, (int)algo));
    m->codec = codec;
    m->algo = algo;
    return TPM_OK;
}

tpm_status tpm_moe_get_info(tpm_moe_t m, tpm_moe_info *info) {
    TPM_ARG_CHECK(m != NULL && info != NULL, "tpm_moe_get_info: NULL argument");
    memset(info, 0, sizeof *info);
    snprintf(info->preset, sizeof info->preset, "%s", m->preset->name);
    info->backend = m->backend;
    info->dtype = m->dtype;
    info->codec = m->codec;
    info->algo = m->algo;
    info->hidden = m->hidden;
    info->n_experts = m->n_experts;
    info->top_k = m->top_k;
    info->inter = m->inter;
    info->n_shared = m->n_shared;
    info->shared_inter = m->shared_inter;
    info->tp_rank = m->tp_rank;
    info->tp_size = m->tp_size;
    info->ep_rank = m->ep_rank;
    info->ep_size = m->ep_size;
    info->fuse_shared = m->fuse;
    info->slots_per_token = m->top_k + (m->fuse ? m->n_shared : 0);
    info->expert_begin = m->expert_begin;
    info->expert_end = m->expert_end;
    info->local_experts = m->experts.n;
    info->inter_local = m->experts.inter;
    snprintf(info->fuse_reason, sizeof info->fuse_reason, "%s", m->fuse_reason);
    return TPM_OK;
}

tpm_status tpm_moe_last_stats(tpm_moe_t m, tpm_moe_stats *stats) {
    TPM_ARG_CHECK(m != NULL && stats != NULL, "tpm_moe_last_stats: NULL argument");
    if (m->ops->collect) TPM_TRY(fail_on(m, m->ops->collect(m)));
    *stats = m->stats;
    return TPM_OK;
}

tpm_status tpm_moe_last_routing(tpm_moe_t m, int32_t *topk_ids, float *topk_weights,
                                int32_t *tokens_per_expert, size_t ntokens) {
    TPM_ARG_CHECK(m != NULL, "tpm_moe_last_routing: moe is NULL");
    if (m->ops->collect) TPM_TRY(fail_on(m, m->ops->collect(m)));
    if (ntokens != m->last_ntokens)
        return fail_on(m, tpm_err(TPM_ERR_INVALID_ARG,
                                  "tpm_moe_last_routing: ntokens %zu != the last forward's %zu",
                                  ntokens, m->last_ntokens));
    size_t nk = ntokens * (size_t)m->top_k;
    if (topk_ids && nk) memcpy(topk_ids, m->last_ids, nk * sizeof *topk_ids);
    if (topk_weights && nk) memcpy(topk_weights, m->last_weights, nk * sizeof *topk_weights);
    if (tokens_per_expert)
        memcpy(tokens_per_expert, m->counts,
               (size_t)(m->n_experts + m->n_shared) * sizeof *tokens_per_expert);
    return TPM_OK;
}

const char *tpm_moe_last_error(tpm_moe_t m) {
    return m ? m->last_error : tpm_last_error();
}
