/*
 * moe_cpu.c - the CPU backend of the MoE layer: this rank's partial output
 * and the all-reduce that sums the partials of all ranks.
 *
 * Per forward (every rank sees all tokens):
 *  1. widen x to fp32; route every token (replicated router, router.c).
 *  2. group the (token, slot) pairs by local expert slot, tokens ascending:
 *     routed slot j of token t goes to the EP rank owning expert ids[t][j];
 *     a fused shared slot (j = k + s) of token t goes to EP rank t % ep.
 *  3. run each local expert slot on its gathered tokens (experts.c), the
 *     outputs land in a [token x slot x hidden] buffer.
 *  4. combine, per token, in slot order: acc = 0; acc += w_j * out_j for the
 *     routed slots j = 0..k-1 that ran here (selection order), then += 1.0 *
 *     out for the fused shared slots; an unfused shared MLP (sharded over all
 *     ranks) is run on every token afterwards and added the same way.
 *  5. world 1: y = round(acc). Otherwise the partial is rounded to the
 *     activation dtype and summed over the ranks by tpm_allreduce_ex (the
 *     layer's codec and algorithm).
 * The GPU combine reproduces step 4's order (docs/moe.md).
 */
#include "moe/moe_internal.h"

#include "numeric.h"

#include <stdlib.h>
#include <string.h>

typedef struct cpu_state {
    size_t cap;          /* tokens the buffers hold */
    int slots;           /* per token: k (+ fused shared) */
    float *xf;           /* [cap x H] widened input */
    float *slot_out;     /* [cap x slots x H] */
    char *present;       /* [cap x slots] slot ran on this rank */
    float *xg, *og;      /* [cap x H] gathered input / expert output */
    float *h;            /* [cap x 3 * max inter] */
    int32_t *pair_tok;   /* [cap x slots] grouped by local slot */
    int32_t *pair_slot;  /* [cap x slots] */
    int32_t *pair_start; /* [local slots + 1] */
    float *partial;      /* [cap x H] fp32 partial */
    void *pbuf;          /* [cap x H] partial in the activation dtype */
    float *rscratch;     /* router scratch: H + 3E */
} cpu_state;

static void state_free(cpu_state *s) {
    if (!s) return;
    free(s->xf);
    free(s->slot_out);
    free(s->present);
    free(s->xg);
    free(s->og);
    free(s->h);
    free(s->pair_tok);
    free(s->pair_slot);
    free(s->pair_start);
    free(s->partial);
    free(s->pbuf);
    free(s->rscratch);
    free(s);
}

static tpm_status reserve(struct tpm_moe *m, cpu_state *s, size_t n) {
    if (n <= s->cap) return TPM_OK;
    const size_t H = (size_t)m->hidden, S = (size_t)s->slots;
    size_t maxi = (size_t)(m->experts.inter > m->shared.inter ? m->experts.inter : m->shared.inter);
    void *p[9];
    p[0] = realloc(s->xf, n * H * sizeof(float));
    if (p[0]) s->xf = p[0];
    p[1] = realloc(s->slot_out, n * S * H * sizeof(float));
    if (p[1]) s->slot_out = p[1];
    p[2] = realloc(s->present, n * S);
    if (p[2]) s->present = p[2];
    p[3] = realloc(s->xg, n * H * sizeof(float));
    if (p[3]) s->xg = p[3];
    p[4] = realloc(s->og, n * H * sizeof(float));
    if (p[4]) s->og = p[4];
    p[5] = realloc(s->h, n * 3 * maxi * sizeof(float));
    if (p[5]) s->h = p[5];
    p[6] = realloc(s->pair_tok, n * S * sizeof(int32_t));
    if (p[6]) s->pair_tok = p[6];
    p[7] = realloc(s->pair_slot, n * S * sizeof(int32_t));
    if (p[7]) s->pair_slot = p[7];
    p[8] = realloc(s->partial, n * H * sizeof(float));
    if (p[8]) s->partial = p[8];
    void *pb = realloc(s->pbuf, n * H * tpm_dtype_size(m->dtype));
    if (pb) s->pbuf = pb;
    for (int i = 0; i < 9; i++)
        if (!p[i]) pb = NULL;
    if (!pb) return tpm_err(TPM_ERR_NO_MEMORY, "moe cpu: out of memory for %zu tokens", n);
    s->cap = n;
    return tpm_moe_reserve_routing(m, n);
}

static tpm_status cpu_init_state(struct tpm_moe *m) {
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return tpm_err(TPM_ERR_NO_MEMORY, "moe cpu: out of memory");
    m->impl = s;
    s->slots = m->top_k + (m->fuse ? m->n_shared : 0);
    s->pair_start = calloc((size_t)m->experts.n + 1, sizeof *s->pair_start);
    s->rscratch = malloc(((size_t)m->hidden + 3 * (size_t)m->n_experts) * sizeof(float));
    if (!s->pair_start || !s->rscratch) return tpm_err(TPM_ERR_NO_MEMORY, "moe cpu: out of memory");
    return TPM_OK;
}

/* Step 2: pairs grouped by local slot (counting sort, tokens ascending). */
static void group_pairs(const struct tpm_moe *m, cpu_state *s, size_t T) {
    const int k = m->top_k, S = s->slots, nloc = m->experts.n;
    const int per = m->expert_end - m->expert_begin;
    int32_t *start = s->pair_start;
    memset(start, 0, ((size_t)nloc + 1) * sizeof *start);
    memset(s->present, 0, T * (size_t)S);
    /* pass 0 counts into start[slot + 1], pass 1 places */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t t = 0; t < T; t++) {
            for (int j = 0; j < S; j++) {
                int slot;
                if (j < k) {
                    int e = m->last_ids[t * (size_t)k + (size_t)j];
                    if (e < m->expert_begin || e >= m->expert_end) continue;
                    slot = e - m->expert_begin;
                } else {
                    if ((int)(t % (size_t)m->ep_size) != m->ep_rank) continue;
                    slot = per + (j - k);
                }
                if (pass == 0) {
                    start[slot + 1]++;
                } else {
                    int32_t at = start[slot]++;
                    s->pair_tok[at] = (int32_t)t;
                    s->pair_slot[at] = j;
                }
            }
        }
        if (pass == 0)
            for (int i = 0; i < nloc; i++)
                start[i + 1] += start[i];
    }
    /* pass 1 advanced start[i] to the end of slot i: shift back */
    for (int i = nloc; i > 0; i--)
        start[i] = start[i - 1];
    start[0] = 0;
}

tpm_status tpm_moe_cpu_partial(struct tpm_moe *m, const void *x, size_t T, float *partial) {
    cpu_state *s = m->impl;
    TPM_TRY(reserve(m, s, T));
    const size_t H = (size_t)m->hidden, S = (size_t)s->slots, k = (size_t)m->top_k;
    const int E = m->n_experts;
    double t0 = tpm_now_s();

    /* 1. widen + route */
    for (size_t i = 0; i < T * H; i++)
        s->xf[i] = tpm_load_f32(x, (int)m->dtype, i);
    float *logits = s->rscratch, *sel = s->rscratch + E;
    for (size_t t = 0; t < T; t++) {
        tpm_router_logits(s->xf + t * H, m->router, m->hidden, E, logits);
        tpm_router_select(&m->rp, logits, m->router_bias, m->last_ids + t * k,
                          m->last_weights + t * k, sel);
    }
    m->last_ntokens = T;
    memset(m->counts, 0, (size_t)(E + m->n_shared) * sizeof *m->counts);
    for (size_t i = 0; i < T * k; i++)
        m->counts[m->last_ids[i]]++;
    for (int sh = 0; sh < m->n_shared; sh++)
        m->counts[E + sh] = (int32_t)T;
    int distinct = 0;
    for (int e = 0; e < E; e++)
        distinct += m->counts[e] > 0;
    double t1 = tpm_now_s();

    /* 2-3. grouped expert runs */
    group_pairs(m, s, T);
    int active = 0;
    for (int slot = 0; slot < m->experts.n; slot++) {
        int32_t b = s->pair_start[slot], e = s->pair_start[slot + 1];
        if (b == e) continue; /* no token routed here: skipped */
        active++;
        size_t n = (size_t)(e - b);
        for (size_t i = 0; i < n; i++)
            memcpy(s->xg + i * H, s->xf + (size_t)s->pair_tok[b + (int32_t)i] * H,
                   H * sizeof(float));
        tpm_expert_view v = tpm_moe_stack_view(&m->experts, m->hidden, slot);
        tpm_expert_forward(&m->ap, &v, m->hidden, m->experts.inter, s->xg, n, s->h, s->og);
        for (size_t i = 0; i < n; i++) {
            size_t at =
                (size_t)s->pair_tok[b + (int32_t)i] * S + (size_t)s->pair_slot[b + (int32_t)i];
            memcpy(s->slot_out + at * H, s->og + i * H, H * sizeof(float));
            s->present[at] = 1;
        }
    }
    double t2 = tpm_now_s();

    /* 4. combine in slot order */
    for (size_t t = 0; t < T; t++) {
        float *acc = partial + t * H;
        for (size_t o = 0; o < H; o++)
            acc[o] = 0.0f;
        for (size_t j = 0; j < S; j++) {
            if (!s->present[t * S + j]) continue;
            float w = j < k ? m->last_weights[t * k + j] : 1.0f;
            const float *v = s->slot_out + (t * S + j) * H;
            for (size_t o = 0; o < H; o++)
                acc[o] += w * v[o];
        }
    }
    double t3 = tpm_now_s();
    /* unfused shared experts: a dense MLP on every token (our shard) */
    double t_sh = 0.0;
    for (int sh = 0; sh < m->shared.n; sh++) {
        tpm_expert_view v = tpm_moe_stack_view(&m->shared, m->hidden, sh);
        tpm_expert_forward(&m->ap, &v, m->hidden, m->shared.inter, s->xf, T, s->h, s->og);
        double ta = tpm_now_s();
        for (size_t i = 0; i < T * H; i++)
            partial[i] += s->og[i];
        t_sh += tpm_now_s() - ta;
        active++;
    }
    double t4 = tpm_now_s();

    int64_t pairs = s->pair_start[m->experts.n] + (int64_t)m->shared.n * (int64_t)T;
    memset(&m->stats, 0, sizeof m->stats);
    m->stats.ntokens = T;
    m->stats.distinct_experts = distinct;
    m->stats.local_active_experts = active;
    m->stats.local_pairs = pairs;
    m->stats.t_router = t1 - t0;
    m->stats.t_experts = (t2 - t1) + (t4 - t3 - t_sh);
    m->stats.t_combine = (t3 - t2) + t_sh;
    return TPM_OK;
}

static tpm_status cpu_forward(struct tpm_moe *m, tpm_comm_t comm, const void *x, void *y, size_t T,
                              void *stream) {
    cpu_state *s = m->impl;
    double t0 = tpm_now_s();
    if (T == 0) {
        memset(&m->stats, 0, sizeof m->stats);
        m->last_ntokens = 0;
        memset(m->counts, 0, (size_t)(m->n_experts + m->n_shared) * sizeof *m->counts);
        return TPM_OK;
    }
    TPM_TRY(reserve(m, s, T));
    TPM_TRY(tpm_moe_cpu_partial(m, x, T, s->partial));
    const size_t n = T * (size_t)m->hidden;
    double ta = tpm_now_s();
    if (m->world == 1) {
        for (size_t i = 0; i < n; i++)
            tpm_store_f32(y, (int)m->dtype, i, s->partial[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            tpm_store_f32(s->pbuf, (int)m->dtype, i, s->partial[i]);
        TPM_TRY(tpm_allreduce_ex(comm, s->pbuf, y, n, m->dtype, m->codec, m->algo, stream));
    }
    double tb = tpm_now_s();
    m->stats.t_allreduce = tb - ta;
    m->stats.t_total = tb - t0;
    return TPM_OK;
}

static void cpu_destroy(struct tpm_moe *m) {
    state_free(m->impl);
    m->impl = NULL;
}

static const tpm_moe_ops cpu_ops = {"cpu", cpu_forward, cpu_destroy, NULL};

tpm_status tpm_moe_cpu_init(struct tpm_moe *m) {
    m->ops = &cpu_ops;
    return cpu_init_state(m);
}
