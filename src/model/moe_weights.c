/*
 * moe_weights.c - one MoE layer's weights: tensor names, the loader from a
 * safetensors file, the seeded generator (tpm_moe_weights_random) and the
 * streaming file generator behind `tpmoe gen-weights`.
 *
 * The loader and the generator share one routine (fill_layer) that walks
 * the layer's tensors and asks a source for each one as fp32: the file
 * source checks name, dtype and shape and converts; the random source
 * computes the same values gen-weights writes. Random values depend only on
 * (seed, full tensor name): each tensor has its own splitmix64 stream, so
 * any tensor can be regenerated alone, in any order.
 *
 * Value distributions: expert weights N(0, 1/fan_in) rounded to bf16; router
 * N(0, 1/H) in fp32; e_score_correction_bias N(0, 0.01^2) fp32; gpt-oss expert
 * biases N(0, 0.02^2) rounded to bf16. The file format then applies: bf16 and
 * fp32 hold the bf16 values exactly, fp16 rounds them to fp16, fp8 stores
 * E4M3 codes with E8M0 scales per 1x32 block (biases stay bf16, router and
 * correction bias stay fp32 in every format).
 */
#include "model/moe_weights.h"

#include "internal.h"
#include "numeric.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 256

tpm_status tpm_moe_tensor_name(char *buf, size_t len, int layer, const char *part) {
    TPM_ARG_CHECK(buf && part && layer >= 0, "tpm_moe_tensor_name: bad argument");
    int n = snprintf(buf, len, "model.layers.%d.block_sparse_moe.%s", layer, part);
    TPM_ARG_CHECK(n >= 0 && (size_t)n < len, "tpm_moe_tensor_name: buffer of %zu bytes too small", len);
    return TPM_OK;
}

static int has_corr_bias(const tpm_preset *p) {
    return p->router == TPM_ROUTER_SIGMOID_BIAS || p->router == TPM_ROUTER_GROUPED_SIGMOID;
}

static tpm_status check_preset(const tpm_preset *p) {
    TPM_ARG_CHECK(p, "null preset");
    TPM_ARG_CHECK(p->hidden > 0 && p->n_experts > 0 && p->inter > 0 && p->n_shared >= 0 &&
                      (p->n_shared == 0 || p->shared_inter > 0),
                  "preset '%s': bad shapes", p->name ? p->name : "?");
    if (p->n_shared > 1)
        return tpm_err(TPM_ERR_UNSUPPORTED, "preset '%s': %d shared experts (at most 1 supported)", p->name,
                       p->n_shared);
    return TPM_OK;
}

/* MARK: random values */
typedef enum gen_kind { GEN_WEIGHT, GEN_ROUTER, GEN_CORR_BIAS, GEN_EXPERT_BIAS } gen_kind;

typedef struct gen_rng {
    uint64_t s;
    int have_spare;
    double spare;
} gen_rng;

static uint64_t rng_next(gen_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(gen_rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Marsaglia's polar method: two normals per accepted pair, no trig. */
static double rng_normal(gen_rng *r) {
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    double u, v, q;
    do { /* accepts with probability pi/4: bounded in practice (p(100 rejections) < 1e-67) */
        u = 2.0 * rng_uniform(r) - 1.0;
        v = 2.0 * rng_uniform(r) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    double m = sqrt(-2.0 * log(q) / q);
    r->spare = v * m;
    r->have_spare = 1;
    return u * m;
}

static float bf16_round(float v) { return tpm_bf16_to_f32(tpm_f32_to_bf16(v)); }

/* The generator's values (before the file format), n = rows * cols. */
static void gen_values(uint64_t seed, const char *name, gen_kind kind, size_t rows, size_t cols, float *out) {
    gen_rng r = {seed ^ tpm_hash64(TPM_HASH_SEED, name, strlen(name)), 0, 0.0};
    (void)rng_next(&r);
    double sd = kind == GEN_WEIGHT ? 1.0 / sqrt((double)cols)
              : kind == GEN_ROUTER ? 1.0 / sqrt((double)cols)
              : kind == GEN_CORR_BIAS ? 0.01 : 0.02;
    size_t n = rows * cols;
    for (size_t i = 0; i < n; i++) {
        float v = (float)(rng_normal(&r) * sd);
        out[i] = (kind == GEN_WEIGHT || kind == GEN_EXPERT_BIAS) ? bf16_round(v) : v;
    }
}

/* The dtype a tensor of this kind has in a file of format fmt. */
static tpm_st_dtype file_dtype(gen_kind kind, tpm_weight_format fmt) {
    if (kind == GEN_ROUTER || kind == GEN_CORR_BIAS) return TPM_ST_F32;
    switch (fmt) {
    case TPM_WFMT_FP16: return TPM_ST_F16;
    case TPM_WFMT_FP32: return TPM_ST_F32;
    case TPM_WFMT_FP8_E4M3: return kind == GEN_WEIGHT ? TPM_ST_F8_E4M3 : TPM_ST_BF16;
    default: return TPM_ST_BF16;
    }
}

/* Encode n values (rows of `cols`) as dtype dt into bytes (+ E8M0 scales
 * for F8_E4M3), and replace vals by what a reader decodes. */
static void encode(tpm_st_dtype dt, float *vals, size_t rows, size_t cols, void *bytes, uint8_t *scales) {
    size_t n = rows * cols;
    if (dt == TPM_ST_F32) {
        if (bytes) memcpy(bytes, vals, n * 4);
    } else if (dt == TPM_ST_BF16 || dt == TPM_ST_F16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = dt == TPM_ST_BF16 ? tpm_f32_to_bf16(vals[i]) : tpm_f32_to_fp16(vals[i]);
            if (bytes) memcpy((uint8_t *)bytes + 2 * i, &h, 2);
            vals[i] = dt == TPM_ST_BF16 ? tpm_bf16_to_f32(h) : tpm_fp16_to_f32(h);
        }
    } else { /* F8_E4M3, one row at a time */
        uint8_t rs[64], rc[32 * 64];
        for (size_t r = 0; r < rows; r++) {
            for (size_t c0 = 0; c0 < cols; c0 += 32 * 64) {
                size_t m = cols - c0 < 32 * 64 ? cols - c0 : 32 * 64;
                float *v = vals + r * cols + c0;
                tpm_st_quantize_mx_e4m3(v, m, rc, rs);
                for (size_t i = 0; i < m; i++) v[i] = tpm_st_e4m3_to_f32(rc[i]) * tpm_st_e8m0_to_f32(rs[i / 32]);
                if (bytes) memcpy((uint8_t *)bytes + r * cols + c0, rc, m);
                if (scales) memcpy(scales + (r * cols + c0) / 32, rs, m / 32);
            }
        }
    }
}

/* MARK: one layer, from a source */
typedef struct source {
    const tpm_st_file *f;   /* file source, or NULL: random */
    uint64_t seed;
    tpm_weight_format fmt;
} source;

/* Fetch tensor `part` of `layer` as rows x cols floats (cols 0: 1-D). */
static tpm_status fetch(const source *s, int layer, const char *part, gen_kind kind, int64_t rows, int64_t cols,
                        float *out) {
    char name[NAME_LEN];
    TPM_TRY(tpm_moe_tensor_name(name, sizeof name, layer, part));
    int64_t shape[2] = {rows, cols};
    if (s->f) {
        /* Raw E4M3 without its block scales would load silently wrong values. */
        const tpm_st_tensor *t = tpm_st_find(s->f, name);
        char sname[NAME_LEN + 8];
        snprintf(sname, sizeof sname, "%s_scale", name);
        if (t && t->dtype == TPM_ST_F8_E4M3 && !tpm_st_find(s->f, sname))
            return tpm_err(TPM_ERR_IO, "MoE weights: tensor '%s' is F8_E4M3 but '%s' (U8 E8M0 1x32 block scales) "
                                       "is missing", name, sname);
        return tpm_st_load_f32(s->f, name, cols ? 2 : 1, shape, out);
    }
    size_t c = cols ? (size_t)cols : (size_t)rows, r = cols ? (size_t)rows : 1;
    gen_values(s->seed, name, kind, r, c, out);
    encode(file_dtype(kind, s->fmt), out, r, c, NULL, NULL);
    return TPM_OK;
}

static float *alloc_f(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

/* One expert (prefix "experts.7" or "shared_experts"). */
static tpm_status fill_expert(const source *s, const tpm_preset *p, int layer, const char *prefix, int inter,
                              tpm_expert_weights *x) {
    const size_t H = (size_t)p->hidden, I = (size_t)inter;
    const int il = p->act == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    char part[NAME_LEN];
    tpm_status st = TPM_OK;
    float *tmp = NULL;
    x->gate_up = alloc_f(2 * I * H);
    x->down = alloc_f(H * I);
    if (p->expert_bias) {
        x->gate_up_bias = alloc_f(2 * I);
        x->down_bias = alloc_f(H);
    }
    if (il) tmp = alloc_f(2 * I * H + 2 * I);
    if (!x->gate_up || !x->down || (p->expert_bias && (!x->gate_up_bias || !x->down_bias)) || (il && !tmp)) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "MoE weights: out of memory for %s (layer %d)", prefix, layer);
        goto fail;
    }
    /* gate_up: w1 then w3, as [gate | up] directly or through tmp to interleave. */
    float *gu = il ? tmp : x->gate_up;
    snprintf(part, sizeof part, "%s.w1.weight", prefix);
    TPM_TRY_GOTO(fetch(s, layer, part, GEN_WEIGHT, (int64_t)I, (int64_t)H, gu));
    snprintf(part, sizeof part, "%s.w3.weight", prefix);
    TPM_TRY_GOTO(fetch(s, layer, part, GEN_WEIGHT, (int64_t)I, (int64_t)H, gu + I * H));
    if (il)
        for (size_t i = 0; i < I; i++) {
            memcpy(x->gate_up + (2 * i) * H, tmp + i * H, H * sizeof(float));
            memcpy(x->gate_up + (2 * i + 1) * H, tmp + (I + i) * H, H * sizeof(float));
        }
    snprintf(part, sizeof part, "%s.w2.weight", prefix);
    TPM_TRY_GOTO(fetch(s, layer, part, GEN_WEIGHT, (int64_t)H, (int64_t)I, x->down));
    if (p->expert_bias) {
        float *gb = il ? tmp : x->gate_up_bias;
        snprintf(part, sizeof part, "%s.w1.bias", prefix);
        TPM_TRY_GOTO(fetch(s, layer, part, GEN_EXPERT_BIAS, (int64_t)I, 0, gb));
        snprintf(part, sizeof part, "%s.w3.bias", prefix);
        TPM_TRY_GOTO(fetch(s, layer, part, GEN_EXPERT_BIAS, (int64_t)I, 0, gb + I));
        if (il)
            for (size_t i = 0; i < I; i++) {
                x->gate_up_bias[2 * i] = tmp[i];
                x->gate_up_bias[2 * i + 1] = tmp[I + i];
            }
        snprintf(part, sizeof part, "%s.w2.bias", prefix);
        TPM_TRY_GOTO(fetch(s, layer, part, GEN_EXPERT_BIAS, (int64_t)H, 0, x->down_bias));
    }
fail:
    free(tmp);
    return st;
}

static tpm_status fill_layer(const source *s, const tpm_preset *p, int layer, tpm_moe_weights *w) {
    memset(w, 0, sizeof *w);
    TPM_TRY(check_preset(p));
    TPM_ARG_CHECK(layer >= 0, "MoE weights: negative layer %d", layer);
    tpm_status st = TPM_OK;
    const size_t E = (size_t)p->n_experts, H = (size_t)p->hidden;
    w->preset = p;
    w->layer = layer;
    w->hidden = p->hidden;
    w->n_experts = p->n_experts;
    w->inter = p->inter;
    w->n_shared = p->n_shared;
    w->shared_inter = p->n_shared ? p->shared_inter : 0;
    w->interleaved = p->act == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    w->router = alloc_f(E * H);
    w->experts = calloc(E, sizeof *w->experts);
    if (p->n_shared) w->shared = calloc((size_t)p->n_shared, sizeof *w->shared);
    if (has_corr_bias(p)) w->router_bias = alloc_f(E);
    if (!w->router || !w->experts || (p->n_shared && !w->shared) || (has_corr_bias(p) && !w->router_bias)) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "MoE weights: out of memory (layer %d)", layer);
        goto fail;
    }
    TPM_TRY_GOTO(fetch(s, layer, "gate.weight", GEN_ROUTER, (int64_t)E, (int64_t)H, w->router));
    if (w->router_bias)
        TPM_TRY_GOTO(fetch(s, layer, "e_score_correction_bias", GEN_CORR_BIAS, (int64_t)E, 0, w->router_bias));
    for (size_t e = 0; e < E; e++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "experts.%zu", e);
        TPM_TRY_GOTO(fill_expert(s, p, layer, prefix, p->inter, &w->experts[e]));
    }
    if (p->n_shared) TPM_TRY_GOTO(fill_expert(s, p, layer, "shared_experts", p->shared_inter, &w->shared[0]));
    return TPM_OK;
fail:
    tpm_moe_weights_free(w);
    return st;
}

tpm_status tpm_moe_weights_load(const tpm_st_file *f, const tpm_preset *p, int layer, tpm_moe_weights *w) {
    TPM_ARG_CHECK(f && p && w, "tpm_moe_weights_load: null argument");
    source s = {f, 0, p->routed_format};
    return fill_layer(&s, p, layer, w);
}

tpm_status tpm_moe_weights_random_layer(const tpm_preset *p, uint64_t seed, int layer, tpm_weight_format fmt,
                                        tpm_moe_weights *w) {
    TPM_ARG_CHECK(p && w, "tpm_moe_weights_random: null argument");
    TPM_ARG_CHECK((unsigned)fmt <= TPM_WFMT_FP8_E4M3, "tpm_moe_weights_random: bad format %d", (int)fmt);
    /* MX fp8 scales cover whole blocks of 32 along a row (as the writer checks) */
    if (fmt == TPM_WFMT_FP8_E4M3 && (p->hidden % 32 || p->inter % 32 || (p->n_shared && p->shared_inter % 32)))
        return tpm_err(TPM_ERR_UNSUPPORTED, "preset '%s': fp8 weights need dimensions that are multiples of 32",
                       p->name);
    source s = {NULL, seed, fmt};
    return fill_layer(&s, p, layer, w);
}

tpm_status tpm_moe_weights_random(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w) {
    TPM_ARG_CHECK(p && w, "tpm_moe_weights_random: null argument");
    return tpm_moe_weights_random_layer(p, seed, 0, p->routed_format, w);
}

static void free_expert(tpm_expert_weights *x) {
    free(x->gate_up);
    free(x->gate_up_bias);
    free(x->down);
    free(x->down_bias);
}

void tpm_moe_weights_free(tpm_moe_weights *w) {
    if (!w) return;
    if (w->experts)
        for (int e = 0; e < w->n_experts; e++) free_expert(&w->experts[e]);
    if (w->shared)
        for (int e = 0; e < w->n_shared; e++) free_expert(&w->shared[e]);
    free(w->experts);
    free(w->shared);
    free(w->router);
    free(w->router_bias);
    memset(w, 0, sizeof *w);
}

/* MARK: the file generator */
/* The layer's tensors in file order (one spec per stored tensor). */
typedef struct gen_spec {
    char part[64];
    gen_kind kind;
    int64_t rows, cols; /* cols 0: 1-D */
} gen_spec;

static size_t layer_specs(const tpm_preset *p, gen_spec *out) {
    size_t n = 0;
#define SPEC(k, r, c, ...)                                                                                 \
    do {                                                                                               \
        if (out) {                                                                                     \
            snprintf(out[n].part, sizeof out[n].part, __VA_ARGS__);                                    \
            out[n].kind = (k);                                                                         \
            out[n].rows = (r);                                                                         \
            out[n].cols = (c);                                                                         \
        }                                                                                              \
        n++;                                                                                           \
    } while (0)
    const int64_t E = p->n_experts, H = p->hidden;
    SPEC(GEN_ROUTER, E, H, "gate.weight");
    if (has_corr_bias(p)) SPEC(GEN_CORR_BIAS, E, 0, "e_score_correction_bias");
    for (int e = 0; e <= p->n_experts; e++) {
        char pre[32];
        int64_t I = p->inter;
        if (e == p->n_experts) {
            if (!p->n_shared) break;
            snprintf(pre, sizeof pre, "shared_experts");
            I = p->shared_inter;
        } else {
            snprintf(pre, sizeof pre, "experts.%d", e);
        }
        SPEC(GEN_WEIGHT, I, H, "%s.w1.weight", pre);
        SPEC(GEN_WEIGHT, I, H, "%s.w3.weight", pre);
        SPEC(GEN_WEIGHT, H, I, "%s.w2.weight", pre);
        if (p->expert_bias) {
            SPEC(GEN_EXPERT_BIAS, I, 0, "%s.w1.bias", pre);
            SPEC(GEN_EXPERT_BIAS, I, 0, "%s.w3.bias", pre);
            SPEC(GEN_EXPERT_BIAS, H, 0, "%s.w2.bias", pre);
        }
    }
#undef SPEC
    return n;
}

static uint64_t spec_bytes(const gen_spec *g, tpm_weight_format fmt) {
    uint64_t numel = (uint64_t)g->rows * (uint64_t)(g->cols ? g->cols : 1);
    tpm_st_dtype dt = file_dtype(g->kind, fmt);
    return numel * tpm_st_dtype_size(dt) + (dt == TPM_ST_F8_E4M3 ? numel / 32 : 0);
}

uint64_t tpm_moe_layer_bytes(const tpm_preset *p, tpm_weight_format fmt) {
    if (!p || check_preset(p) != TPM_OK) return 0;
    size_t n = layer_specs(p, NULL);
    gen_spec *g = malloc(n * sizeof *g);
    if (!g) return 0;
    layer_specs(p, g);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += spec_bytes(&g[i], fmt);
    free(g);
    return total;
}

tpm_status tpm_moe_weights_generate(const tpm_preset *p, uint64_t seed, int n_layers, tpm_weight_format fmt,
                                    const char *path, tpm_progress_fn progress, void *user) {
    TPM_ARG_CHECK(p && path, "tpm_moe_weights_generate: null argument");
    TPM_ARG_CHECK(n_layers >= 1, "tpm_moe_weights_generate: layers %d < 1", n_layers);
    TPM_ARG_CHECK((unsigned)fmt <= TPM_WFMT_FP8_E4M3, "tpm_moe_weights_generate: bad format %d", (int)fmt);
    TPM_TRY(check_preset(p));
    if (fmt == TPM_WFMT_FP8_E4M3 && (p->hidden % 32 || p->inter % 32 || (p->n_shared && p->shared_inter % 32)))
        return tpm_err(TPM_ERR_UNSUPPORTED, "preset '%s': fp8 needs dimensions that are multiples of 32", p->name);
    static const char *const fmt_names[] = {"bf16", "fp16", "fp32", "fp8"};
    tpm_status st = TPM_OK;
    size_t ns = layer_specs(p, NULL), max_numel = 0;
    gen_spec *g = malloc(ns * sizeof *g);
    tpm_st_writer *w = NULL;
    float *vals = NULL;
    uint8_t *bytes = NULL, *scales = NULL;
    if (!g) return tpm_err(TPM_ERR_NO_MEMORY, "gen-weights: out of memory");
    layer_specs(p, g);
    TPM_TRY_GOTO(tpm_st_writer_create(&w));
    char buf[64];
    TPM_TRY_GOTO(tpm_st_writer_metadata(w, "format", "pt"));
    TPM_TRY_GOTO(tpm_st_writer_metadata(w, "tpmoe_preset", p->name));
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    TPM_TRY_GOTO(tpm_st_writer_metadata(w, "tpmoe_seed", buf));
    TPM_TRY_GOTO(tpm_st_writer_metadata(w, "tpmoe_dtype", fmt_names[fmt]));
    snprintf(buf, sizeof buf, "%d", n_layers);
    TPM_TRY_GOTO(tpm_st_writer_metadata(w, "tpmoe_layers", buf));
    uint64_t total = 0, done = 0;
    for (int l = 0; l < n_layers; l++) {
        for (size_t i = 0; i < ns; i++) {
            char name[NAME_LEN + 8];
            TPM_TRY_GOTO(tpm_moe_tensor_name(name, NAME_LEN, l, g[i].part));
            tpm_st_dtype dt = file_dtype(g[i].kind, fmt);
            int64_t shape[2] = {g[i].rows, g[i].cols};
            TPM_TRY_GOTO(tpm_st_writer_add(w, name, dt, g[i].cols ? 2 : 1, shape, NULL));
            if (dt == TPM_ST_F8_E4M3) {
                int64_t sshape[2] = {g[i].rows, g[i].cols / 32};
                strcat(name, "_scale");
                TPM_TRY_GOTO(tpm_st_writer_add(w, name, TPM_ST_U8, 2, sshape, NULL));
            }
            size_t numel = (size_t)g[i].rows * (size_t)(g[i].cols ? g[i].cols : 1);
            if (numel > max_numel) max_numel = numel;
            total += spec_bytes(&g[i], fmt);
        }
    }
    vals = alloc_f(max_numel);
    bytes = malloc(max_numel * 4);
    scales = malloc(max_numel / 32 + 1);
    if (!vals || !bytes || !scales) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "gen-weights: out of memory");
        goto fail;
    }
    TPM_TRY_GOTO(tpm_st_writer_begin(w, path));
    for (int l = 0; l < n_layers; l++) {
        for (size_t i = 0; i < ns; i++) {
            char name[NAME_LEN];
            TPM_TRY_GOTO(tpm_moe_tensor_name(name, sizeof name, l, g[i].part));
            size_t c = g[i].cols ? (size_t)g[i].cols : (size_t)g[i].rows, r = g[i].cols ? (size_t)g[i].rows : 1;
            tpm_st_dtype dt = file_dtype(g[i].kind, fmt);
            gen_values(seed, name, g[i].kind, r, c, vals);
            encode(dt, vals, r, c, bytes, scales);
            TPM_TRY_GOTO(tpm_st_writer_put(w, bytes, r * c * tpm_st_dtype_size(dt)));
            if (dt == TPM_ST_F8_E4M3) TPM_TRY_GOTO(tpm_st_writer_put(w, scales, r * c / 32));
            done += spec_bytes(&g[i], fmt);
            if (progress) progress(done, total, user);
        }
    }
    TPM_TRY_GOTO(tpm_st_writer_end(w));
fail:
    tpm_st_writer_destroy(w); /* removes a partial file */
    free(vals);
    free(bytes);
    free(scales);
    free(g);
    return st;
}
