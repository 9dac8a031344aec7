/*
 * config.c - policy: the one place that reads the environment, applies the
 * per-model override rules and produces a resolved configuration with the
 * source of every value and the reason for every rule that fired.
 *
 * Precedence, per field: API field (set in tpm_config) > environment >
 * default. Then the rules run over the merged values; a rule never silently
 * changes a value: it records a reason, which the report shows and comm init
 * logs once at INFO.
 *
 * Rules:
 *  - world 1: nothing to reduce, the codec is NONE.
 *  - a lossy codec applies only to messages within [quant_min, quant_max]
 *    bytes (enforced per call by the dispatcher; recorded here).
 *  - fused shared experts (auto): on when the model has a shared expert of
 *    the routed experts' intermediate size and weight format and EP is 1;
 *    off otherwise, with the reason. Explicit 1 is refused (off, reason) when
 *    the shapes or formats differ; under EP > 1 an explicit 1 selects the
 *    token-partitioned EP scheme (each token's shared slot on one EP rank).
 *  - per-model rules from the table below.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "model/presets.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_BUFFER_BYTES (64ll << 20)
/* CUDA all-reduce kernel set (TPMOE_CUDA_AR_VARIANT): the fastest measured
 * per size; the sets are listed in src/comm/cuda_sync.h. 10 since round 6 of
 * docs/allreduce_cuda_rounds.md
 * (bench/results/r40: set 5, with the world-2 warp-specialized two-shot for
 * exact and INT8 / INT6 from 16 MB: exact 32 MB 104.6 vs 110.7 us, 96 MB
 * 293.2 vs 303.6, INT8 32 MB 71.5 vs 77.7); 5 before (round 5,
 * bench/results/r5/bench_allreduce_vars.log). */
#define DEFAULT_CUDA_KERNELS 10
/* Lossy codecs apply from 8 MiB. Measured on H200 x2, bf16
 * (bench/results/allreduce_h200x2.json, tpmoe bench allreduce --tp 2), the
 * CUDA codecs first beat exact at 8 MB for INT8/INT6 (27.3 / 24.9 vs 33.1
 * us; at 4 MB 20.0 / 18.7 vs 18.5) and at 4 MB for INT4 (17.4 vs 18.5);
 * below that exact is faster, so a quantized pass there loses accuracy for
 * nothing. (`tpmoe allreduce --codec X` names a codec explicitly and applies
 * it at every size.) */
#define DEFAULT_QUANT_MIN_BYTES (8ll << 20)

/* MARK: report buffer */
typedef struct report {
    char *buf;
    size_t len, used;
} report;

static void rep(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rep(report *r, const char *fmt, ...) {
    if (!r->buf || r->used + 1 >= r->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->buf + r->used, r->len - r->used, fmt, ap);
    va_end(ap);
    if (n > 0) r->used = (r->used + (size_t)n < r->len) ? r->used + (size_t)n : r->len - 1;
}

/* MARK: environment (read only here) */
typedef struct env_src {
    const char *name;
    const char *value; /* NULL when unset or empty */
} env_src;

static env_src env_get(const char *name) {
    env_src e = {name, getenv(name)};
    if (e.value && !*e.value) e.value = NULL;
    return e;
}

static tpm_status bad_env(const env_src *e, const char *accepted) {
    return tpm_err(TPM_ERR_CONFIG, "%s='%s' is invalid (accepted: %s)", e->name, e->value, accepted);
}

static tpm_status env_int(const char *name, int64_t lo, int64_t hi, int64_t *out, int *set) {
    env_src e = env_get(name);
    *set = 0;
    if (!e.value) return TPM_OK;
    int64_t v;
    if (tpm_parse_i64(e.value, &v) || v < lo || v > hi) {
        char acc[96];
        snprintf(acc, sizeof acc, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return bad_env(&e, acc);
    }
    *out = v;
    *set = 1;
    return TPM_OK;
}

static tpm_status env_size(const char *name, int64_t *out, int *set) {
    env_src e = env_get(name);
    *set = 0;
    if (!e.value) return TPM_OK;
    if (!strcasecmp(e.value, "unlimited") || !strcasecmp(e.value, "inf")) {
        *out = TPM_BYTES_UNLIMITED;
        *set = 1;
        return TPM_OK;
    }
    if (tpm_parse_size(e.value, out))
        return bad_env(&e, "a byte count with optional K/M/G suffix, or 'unlimited'");
    *set = 1;
    return TPM_OK;
}

/* An integer setting: the API value when set (>= 0), else the environment
 * variable name (in [lo, hi]), else def; *from_env says whether it was the
 * environment. */
static tpm_status pick_int(int32_t api, const char *name, int64_t lo, int64_t hi, int32_t def,
                           int32_t *out, int *from_env) {
    int64_t v = 0;
    *out = api;
    *from_env = 0;
    if (api >= 0) return TPM_OK;
    TPM_TRY(env_int(name, lo, hi, &v, from_env));
    *out = *from_env ? (int32_t)v : def;
    return TPM_OK;
}

/* A byte-size setting, likewise (env_size syntax). */
static tpm_status pick_size(int64_t api, const char *name, int64_t def, int64_t *out,
                            int *from_env) {
    int64_t v = 0;
    *out = api;
    *from_env = 0;
    if (api >= 0) return TPM_OK;
    TPM_TRY(env_size(name, &v, from_env));
    *out = *from_env ? v : def;
    return TPM_OK;
}

/* Match a value against names[0..n); returns the index or -1 (error set). */
static tpm_status env_enum(const char *name, const char *const *names, int n, const char *accepted,
                           int *out, int *set) {
    env_src e = env_get(name);
    *set = 0;
    if (!e.value) return TPM_OK;
    for (int i = 0; i < n; i++)
        if (names[i] && !strcasecmp(e.value, names[i])) {
            *out = i;
            *set = 1;
            return TPM_OK;
        }
    return bad_env(&e, accepted);
}

/* MARK: per-model rules */
typedef struct model_rule {
    const char *pattern; /* fnmatch glob on the model (preset) name */
    const char *field;   /* "quant_max_codec" */
    int value;
    const char *reason;
} model_rule;

/* Per-model overrides. Each one names its evidence. */
static const model_rule model_rules[] = {
    /* gpt-oss routes with softmax over 4 experts and has no shared expert:
     * every layer's output is dominated by few experts, and INT4 is the codec
     * QuickReduce reports "can cause serious accuracy problems on some
     * models". Keep gpt-oss at INT6 or better. */
    {"gpt-oss*", "quant_max_codec", TPM_CODEC_INT6,
     "gpt-oss: INT4 codecs are capped to INT6 (softmax top-4 routing without a shared expert; "
     "INT4 is known to hurt some models)"},
};

static int codec_bits(tpm_codec c) {
    switch (c) {
    case TPM_CODEC_INT4:
    case TPM_CODEC_INT4_H: return 4;
    case TPM_CODEC_INT6:
    case TPM_CODEC_INT6_H: return 6;
    case TPM_CODEC_INT8:
    case TPM_CODEC_FP8: return 8;
    default: return 16;
    }
}

/* MARK: resolve */
static const char *const codec_env_names[] = {"NONE", "INT8", "INT6", "INT4", "FP8", "INT4_H", "INT6_H"};
static const char *const ar_names[] = {"auto", "custom", "nccl"};
static const char *const algo_names_env[] = {"auto", "oneshot", "twoshot", "nccl"};
static const char *const backend_names[] = {"auto", "cpu", "cuda"};

static const char *src_name(int api, int env) { return api ? "api" : env ? "env" : "default"; }

static void fmt_bytes(char *b, size_t n, int64_t v) {
    if (v == TPM_BYTES_UNLIMITED)
        snprintf(b, n, "unlimited");
    else if (v < 0)
        snprintf(b, n, "table");
    else if (v >= (1ll << 20) && v % (1ll << 20) == 0)
        snprintf(b, n, "%lld MiB", (long long)(v >> 20));
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(b, n, "%lld KiB", (long long)(v >> 10));
    else
        snprintf(b, n, "%lld B", (long long)v);
}

tpm_status tpm_config_resolve(const tpm_config *cfg_in, tpm_resolved_config *out, char *report_buf,
                              size_t report_len) {
    TPM_ARG_CHECK(out, "tpm_config_resolve: out is NULL");
    tpm_config defaults = TPM_CONFIG_INIT;
    const tpm_config *cfg = cfg_in ? cfg_in : &defaults;
    TPM_ARG_CHECK(cfg->struct_size == sizeof(tpm_config) && cfg->version == TPM_CONFIG_VERSION,
                  "tpm_config: struct_size %u / version %u do not match this library (%zu / %u): "
                  "initialise it with TPM_CONFIG_INIT",
                  cfg->struct_size, cfg->version, sizeof(tpm_config), TPM_CONFIG_VERSION);
    TPM_ARG_CHECK((unsigned)cfg->backend < TPM_BACKEND_COUNT_, "tpm_config.backend %d is invalid",
                  (int)cfg->backend);
    TPM_ARG_CHECK(cfg->allreduce >= TPM_AR_UNSET && cfg->allreduce <= TPM_AR_NCCL,
                  "tpm_config.allreduce %d is invalid", (int)cfg->allreduce);
    TPM_ARG_CHECK(cfg->codec >= TPM_CODEC_DEFAULT && cfg->codec < TPM_CODEC_COUNT_,
                  "tpm_config.codec %d is invalid", (int)cfg->codec);
    TPM_ARG_CHECK((unsigned)cfg->algo < TPM_ALGO_COUNT_, "tpm_config.algo %d is invalid", (int)cfg->algo);
    TPM_ARG_CHECK((unsigned)cfg->dtype < TPM_DTYPE_COUNT_, "tpm_config.dtype %d is invalid",
                  (int)cfg->dtype);
    TPM_ARG_CHECK(cfg->fuse_shared >= -1 && cfg->fuse_shared <= 1,
                  "tpm_config.fuse_shared %d is invalid (accepted: -1 auto, 0, 1)", cfg->fuse_shared);

    tpm_resolved_config r;
    memset(&r, 0, sizeof r);
    report rp = {report_buf, report_len, 0};
    if (report_buf && report_len) report_buf[0] = '\0';
    int set, iv;

    /* backend */
    r.backend = cfg->backend;
    int b_env = 0;
    if (cfg->backend == TPM_BACKEND_AUTO) {
        TPM_TRY(env_enum("TPMOE_BACKEND", backend_names, 3, "auto, cpu, cuda", &iv, &set));
        if (set) r.backend = (tpm_backend)iv;
        b_env = set;
    }
    rep(&rp, "backend            = %-10s (%s)\n", backend_names[r.backend],
        src_name(cfg->backend != TPM_BACKEND_AUTO, b_env));

    /* rank / world / rendezvous */
    int w_env, r_env;
    TPM_TRY(pick_int(cfg->world_size, "TPMOE_WORLD_SIZE", 1, TPM_MAX_WORLD, 1, &r.world_size, &w_env));
    TPM_ARG_CHECK(r.world_size >= 1 && r.world_size <= TPM_MAX_WORLD,
                  "world size %d is invalid (accepted: 1..%d, more than %d only across nodes)", r.world_size,
                  TPM_MAX_WORLD, TPM_MAX_LOCAL_WORLD);
    TPM_TRY(pick_int(cfg->rank, "TPMOE_RANK", 0, TPM_MAX_WORLD - 1, 0, &r.rank, &r_env));
    TPM_ARG_CHECK(r.rank < r.world_size, "rank %d is invalid for world size %d", r.rank, r.world_size);
    rep(&rp, "rank / world       = %d / %d (%s / %s)\n", r.rank, r.world_size,
        src_name(cfg->rank >= 0, r_env), src_name(cfg->world_size >= 0, w_env));
    const char *rdv = cfg->rendezvous;
    int rdv_env = 0;
    if (!rdv) {
        env_src e = env_get("TPMOE_RENDEZVOUS");
        rdv = e.value;
        rdv_env = rdv != NULL;
    }
    if (rdv) {
        TPM_ARG_CHECK(strlen(rdv) < sizeof r.rendezvous - 8,
                      "rendezvous path is too long (%zu bytes, at most %zu)", strlen(rdv),
                      sizeof r.rendezvous - 9);
        strcpy(r.rendezvous, rdv);
        rep(&rp, "rendezvous         = %s (%s)\n", r.rendezvous, src_name(cfg->rendezvous != NULL, rdv_env));
    }
    const int rdv_tcp = !strncmp(r.rendezvous, "tcp://", 6);
    if (r.world_size > TPM_MAX_LOCAL_WORLD && !(rdv_tcp && r.backend != TPM_BACKEND_CPU))
        return tpm_err(w_env ? TPM_ERR_CONFIG : TPM_ERR_INVALID_ARG,
                       "%sworld size %d spans nodes (one node holds at most %d ranks): it needs a tcp://HOST:PORT "
                       "rendezvous and the CUDA backend (got rendezvous '%s', backend %s)",
                       w_env ? "TPMOE_WORLD_SIZE: " : "", r.world_size, TPM_MAX_LOCAL_WORLD, r.rendezvous,
                       backend_names[r.backend]);
    TPM_ARG_CHECK(!rdv_tcp || r.backend != TPM_BACKEND_CPU,
                  "rendezvous %s: the CPU backend runs on one node and needs a rendezvous directory",
                  r.rendezvous);
    {   /* the node this rank runs on (not hashed: it differs between nodes) */
        env_src e = env_get("TPMOE_NODE_ID");
        if (e.value) {
            if (strlen(e.value) >= sizeof r.node) return bad_env(&e, "a name of at most 63 bytes");
            strcpy(r.node, e.value);
        } else if (gethostname(r.node, sizeof r.node - 1) != 0 || !r.node[0]) {
            strcpy(r.node, "localhost");
        }
        r.node[sizeof r.node - 1] = '\0';
        rep(&rp, "node               = %s (%s)\n", r.node, e.value ? "env TPMOE_NODE_ID" : "host name");
    }
    r.device = cfg->device;

    /* all-reduce mode */
    r.allreduce = cfg->allreduce;
    int ar_env = 0;
    if (r.allreduce == TPM_AR_UNSET) {
        TPM_TRY(env_enum("TPMOE_ALLREDUCE", ar_names, 3, "auto, custom, nccl", &iv, &set));
        r.allreduce = set ? (tpm_allreduce_mode)iv : TPM_AR_AUTO;
        ar_env = set;
    }
    rep(&rp, "allreduce          = %-10s (%s)\n", ar_names[r.allreduce],
        src_name(cfg->allreduce != TPM_AR_UNSET, ar_env));

    /* codec */
    r.codec = cfg->codec;
    int c_env = 0;
    if (r.codec == TPM_CODEC_DEFAULT) {
        TPM_TRY(env_enum("TPMOE_QUICK_REDUCE_QUANTIZATION", codec_env_names, TPM_CODEC_COUNT_,
                         "NONE, INT8, INT6, INT4, FP8, INT4_H, INT6_H", &iv, &set));
        r.codec = set ? (tpm_codec)iv : TPM_CODEC_NONE;
        c_env = set;
    }
    rep(&rp, "codec              = %-10s (%s%s)\n", tpm_codec_name(r.codec),
        src_name(cfg->codec != TPM_CODEC_DEFAULT, c_env),
        (cfg->codec == TPM_CODEC_DEFAULT && !c_env) ? ": lossy codecs are opt-in" : "");

    /* quantization window */
    char b1[32], b2[32];
    int qmin_env, qmax_env;
    TPM_TRY(pick_size(cfg->quant_min_bytes, "TPMOE_QUICK_REDUCE_MIN_BYTES", DEFAULT_QUANT_MIN_BYTES,
                      &r.quant_min_bytes, &qmin_env));
    TPM_TRY(pick_size(cfg->quant_max_bytes, "TPMOE_QUICK_REDUCE_MAX_BYTES", TPM_BYTES_UNLIMITED,
                      &r.quant_max_bytes, &qmax_env));
    if (r.quant_max_bytes < r.quant_min_bytes)
        return tpm_err(TPM_ERR_CONFIG,
                       "quick-reduce max bytes (%lld) is below min bytes (%lld): "
                       "check TPMOE_QUICK_REDUCE_MIN_BYTES / TPMOE_QUICK_REDUCE_MAX_BYTES",
                       (long long)r.quant_max_bytes, (long long)r.quant_min_bytes);
    fmt_bytes(b1, sizeof b1, r.quant_min_bytes);
    fmt_bytes(b2, sizeof b2, r.quant_max_bytes);
    rep(&rp, "quant window       = [%s, %s] (%s / %s): a lossy codec applies only inside it, "
             "exact elsewhere\n",
        b1, b2, src_name(cfg->quant_min_bytes >= 0, qmin_env),
        src_name(cfg->quant_max_bytes >= 0, qmax_env));

    /* algorithm and dispatch overrides */
    r.algo = cfg->algo;
    int a_env = 0;
    if (r.algo == TPM_ALGO_AUTO) {
        TPM_TRY(env_enum("TPMOE_ALGO", algo_names_env, 4, "auto, oneshot, twoshot, nccl", &iv, &set));
        if (set) r.algo = (tpm_algo)iv;
        a_env = set;
    }
    rep(&rp, "algo               = %-10s (%s)\n", tpm_algo_name(r.algo),
        src_name(cfg->algo != TPM_ALGO_AUTO, a_env));
    int o_env, cm_env;
    TPM_TRY(pick_size(cfg->oneshot_max_bytes, "TPMOE_ONESHOT_MAX_BYTES", -1, &r.oneshot_max_bytes,
                      &o_env));
    TPM_TRY(pick_size(cfg->custom_max_bytes, "TPMOE_CUSTOM_MAX_BYTES", -1, &r.custom_max_bytes,
                      &cm_env));
    fmt_bytes(b1, sizeof b1, r.oneshot_max_bytes);
    fmt_bytes(b2, sizeof b2, r.custom_max_bytes);
    rep(&rp, "oneshot max bytes  = %-10s (%s)\n", b1, src_name(cfg->oneshot_max_bytes >= 0, o_env));
    rep(&rp, "custom max bytes   = %-10s (%s)\n", b2, src_name(cfg->custom_max_bytes >= 0, cm_env));

    /* buffer and timeout */
    int bb_env, t_env;
    TPM_TRY(pick_size(cfg->buffer_bytes, "TPMOE_BUFFER_BYTES", DEFAULT_BUFFER_BYTES, &r.buffer_bytes,
                      &bb_env));
    if (r.buffer_bytes < 4096 || r.buffer_bytes > (16ll << 30))
        return tpm_err(TPM_ERR_CONFIG, "peer buffer size %lld is invalid (accepted: 4 KiB .. 16 GiB%s)",
                       (long long)r.buffer_bytes, bb_env ? ", from TPMOE_BUFFER_BYTES" : "");
    fmt_bytes(b1, sizeof b1, r.buffer_bytes);
    rep(&rp, "buffer bytes       = %-10s (%s)\n", b1, src_name(cfg->buffer_bytes >= 0, bb_env));
    TPM_TRY(pick_int(cfg->timeout_ms, "TPMOE_TIMEOUT_MS", 1, 24ll * 3600 * 1000, DEFAULT_TIMEOUT_MS,
                     &r.timeout_ms, &t_env));
    TPM_ARG_CHECK(r.timeout_ms >= 1, "tpm_config.timeout_ms %d is invalid", r.timeout_ms);
    rep(&rp, "timeout            = %d ms (%s)\n", r.timeout_ms, src_name(cfg->timeout_ms >= 0, t_env));
    r.dtype = cfg->dtype;
    rep(&rp, "dtype              = %s\n", tpm_dtype_name(r.dtype));
    int kv_env;
    TPM_TRY(pick_int(-1, "TPMOE_CUDA_AR_VARIANT", 0, 19, DEFAULT_CUDA_KERNELS, &r.cuda_kernels, &kv_env));
    rep(&rp, "cuda kernels       = %d (%s)\n", r.cuda_kernels, src_name(0, kv_env));
    int sg_env;
    TPM_TRY(pick_int(-1, "TPMOE_CUDA_SHARE_GPU", 0, 1, 0, &r.cuda_share_gpu, &sg_env));
    if (r.cuda_share_gpu)
        rep(&rp, "cuda share gpu     = 1 (%s: ranks may share a GPU, no NCCL)\n", src_name(0, sg_env));

    /* parallelism */
    r.tp = cfg->tp >= 1 ? cfg->tp : -1;
    r.ep = cfg->ep >= 1 ? cfg->ep : 1;
    TPM_ARG_CHECK(cfg->tp == -1 || (cfg->tp >= 1 && cfg->tp <= 8), "tp %d is invalid (1..8)", cfg->tp);
    TPM_ARG_CHECK(cfg->ep == -1 || (cfg->ep >= 1 && cfg->ep <= 8), "ep %d is invalid (1..8)", cfg->ep);
    /* default: the whole communicator is one TP group; a communicator spanning nodes (more
     * ranks than one node holds) leaves the MoE layer at the node's width, TP 8 / ep */
    if (r.tp < 0) {
        const int w = r.world_size <= TPM_MAX_LOCAL_WORLD ? r.world_size : TPM_MAX_LOCAL_WORLD;
        r.tp = w / r.ep > 0 ? w / r.ep : 1;
    }
    TPM_ARG_CHECK(r.tp * r.ep <= 8, "tp %d x ep %d = %d ranks exceeds one node (8)", r.tp, r.ep, r.tp * r.ep);
    rep(&rp, "tp / ep            = %d / %d\n", r.tp, r.ep);

    /* model */
    const tpm_preset *preset = NULL;
    if (cfg->model) {
        preset = tpm_preset_find(cfg->model);
        if (!preset) {
            char names[256] = "";
            size_t used = 0;
            for (const tpm_preset *const *p = tpm_preset_list(); p && *p; p++) {
                int n = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", (*p)->name);
                if (n < 0 || (size_t)n >= sizeof names - used) break;
                used += (size_t)n;
            }
            return tpm_err(TPM_ERR_CONFIG, "unknown model preset '%s' (known: %s)", cfg->model, names);
        }
        snprintf(r.model, sizeof r.model, "%s", preset->name);
        rep(&rp, "model              = %s\n", r.model);
    }

    /* fused shared experts */
    int fs = cfg->fuse_shared, fs_env = 0;
    if (fs < 0) {
        static const char *const fs_names[] = {"0", "1", "auto"};
        TPM_TRY(env_enum("TPMOE_FUSE_SHARED_EXPERTS", fs_names, 3, "auto, 0, 1", &iv, &set));
        if (set) fs = iv == 2 ? -1 : iv;
        fs_env = set;
    }
    const char *fs_src = src_name(cfg->fuse_shared >= 0, fs_env);
    const char *fs_reason = NULL;
    char fs_buf[512];
    if (preset && preset->n_shared == 0) {
        r.fuse_shared = 0;
        fs_reason = "the model has no shared expert";
    } else if (preset && (preset->shared_inter != preset->inter ||
                          preset->shared_format != preset->routed_format)) {
        r.fuse_shared = 0;
        snprintf(fs_buf, sizeof fs_buf,
                 "rule: shared expert (inter %d) and routed experts (inter %d) differ in size or weight "
                 "format, so they cannot share one grouped launch%s",
                 preset->shared_inter, preset->inter, fs == 1 ? " (explicit 1 refused)" : "");
        fs_reason = fs_buf;
    } else if (fs == 0) {
        r.fuse_shared = 0;
        fs_reason = "disabled explicitly";
    } else if (r.ep > 1 && fs < 0) {
        r.fuse_shared = 0;
        snprintf(fs_buf, sizeof fs_buf,
                 "rule: expert parallelism %d > 1: a replicated shared slot would be summed %d times "
                 "by the all-reduce combine; auto keeps the shared expert unfused (sharded over all "
                 "ranks, balanced). Set TPMOE_FUSE_SHARED_EXPERTS=1 for tpmoe's token-partitioned "
                 "EP scheme (each token's shared slot on exactly one EP rank)",
                 r.ep, r.ep);
        fs_reason = fs_buf;
    } else if (r.ep > 1) {
        r.fuse_shared = 1;
        fs_reason = "explicit 1 under EP: token-partitioned shared slot (token t on EP rank t % ep)";
    } else {
        r.fuse_shared = 1;
        fs_reason = fs < 0 ? "auto: shared expert has the routed shape and format; one grouped launch "
                             "runs routed and shared work"
                           : "enabled explicitly";
    }
    rep(&rp, "fuse shared        = %-10s (%s: %s)\n", r.fuse_shared ? "on" : "off", fs_src, fs_reason);

    /* world 1 */
    if (r.world_size == 1 && r.tp * r.ep == 1 && r.codec != TPM_CODEC_NONE) {
        rep(&rp, "rule: world 1: nothing to reduce, codec %s -> none\n", tpm_codec_name(r.codec));
        r.codec = TPM_CODEC_NONE;
    }
    /* per-model rules */
    for (size_t i = 0; preset && i < sizeof model_rules / sizeof model_rules[0]; i++) {
        const model_rule *m = &model_rules[i];
        if (fnmatch(m->pattern, preset->name, 0) != 0) continue;
        if (!strcmp(m->field, "quant_max_codec") && codec_bits(r.codec) < codec_bits((tpm_codec)m->value)) {
            rep(&rp, "rule: %s: codec %s -> %s\n", m->reason, tpm_codec_name(r.codec),
                tpm_codec_name((tpm_codec)m->value));
            r.codec = (tpm_codec)m->value;
        }
    }

    /* the hash covers what every rank must agree on */
    uint64_t h = TPM_HASH_SEED;
#define H(x) h = tpm_hash64(h, &(x), sizeof(x))
    H(r.backend);
    H(r.world_size);
    H(r.allreduce);
    H(r.codec);
    H(r.quant_min_bytes);
    H(r.quant_max_bytes);
    H(r.algo);
    H(r.oneshot_max_bytes);
    H(r.custom_max_bytes);
    H(r.buffer_bytes);
    H(r.dtype);
    H(r.fuse_shared);
    H(r.tp);
    H(r.ep);
    H(r.cuda_kernels); /* kernel sets 0 and 1-6 keep their epochs in different words */
    H(r.cuda_share_gpu);
#undef H
    r.hash = h;
    rep(&rp, "config hash        = %016llx\n", (unsigned long long)r.hash);
    *out = r;
    return TPM_OK;
}
