/*
 * dispatch.c - which algorithm and codec one all-reduce call uses.
 *
 * One static table of thresholds per (backend, world, dtype, codec); the
 * first row that matches wins, so specific rows come before general ones.
 * Each row names the measurement it comes from. Rules, in order:
 *  1. codec: the explicit argument, else the resolved config's. A lossy
 *     codec applies only when quant_min_bytes <= bytes <= quant_max_bytes,
 *     else the call is exact (NONE) -- unless both codec and algo were given
 *     explicitly as arguments.
 *  2. algo: the explicit argument, else the config's (TPMOE_ALGO). One-shot
 *     is exact only: an explicit one-shot with an explicit lossy codec is
 *     TPM_ERR_UNSUPPORTED; otherwise the explicit argument wins over the
 *     config value (lossy codec argument -> two-shot; config codec under an
 *     explicit/configured one-shot -> NONE). An explicit NCCL argument needs
 *     nccl_available; a configured NCCL algo without NCCL (CPU) is the plain
 *     exact two-shot.
 *  3. AUTO: a lossy codec always takes the custom two-shot (quantization is
 *     an opt-in for its size window). Exact calls: allreduce mode NCCL ->
 *     NCCL where available (the CPU backend has no NCCL: the plain two-shot
 *     exact path); mode AUTO -> NCCL above custom_max_bytes where available;
 *     else one-shot up to oneshot_max_bytes, two-shot above. Mode CUSTOM
 *     ignores custom_max_bytes.
 * The thresholds come from the table unless the resolved config carries
 * TPMOE_ONESHOT_MAX_BYTES / TPMOE_CUSTOM_MAX_BYTES (cfg->oneshot_max_bytes,
 * cfg->custom_max_bytes >= 0); the environment is read by src/core/config.c
 * only.
 */
#include "comm_internal.h"

#include <stdio.h>
#include <string.h>

#define KB (1024ll)
#define ANY_DTYPE TPM_DTYPE_COUNT_
#define ANY_CODEC TPM_CODEC_DEFAULT

/* CPU rows: measured on the 2-core development machine (shared, load ~3-4),
 * ranks as threads, bf16, best median of 3 runs per point. With W ranks on
 * 2 cores the reduction is compute-bound: one-shot does W times the
 * conversion and summation work of the two-shot, so it only wins on tiny
 * messages where one barrier less matters. Measured (us, one-shot/two-shot):
 *   W=2: 64B 4.0/0.9-3.9, 1K 2.4/1.9, 4K 8.2/5.9, 64K 143/80, 1M 9.6e3/7.7e3
 *   W=4: 256B 12.6/19.7, 1K 25.7/32.0, 4K 68/56, 64K 4.2e3/856
 *   W=8: 256B 38/51, 1K 88/68, 4K 205/111, 64K 7.6e3/3.5e3
 * The thresholds sit at the measured crossovers. */
#define CPU_SRC(w, pts)                                                                            \
    "cpu threads, 2 cores, bf16, best of 3 medians: for a in oneshot twoshot; do tpmoe allreduce " \
    "--backend cpu --ranks " #w " --algo $a --bytes B --iters 1000; done, B = " pts

static const tpm_dispatch_entry dispatch_table[] = {
    {TPM_BACKEND_CPU, 2, ANY_DTYPE, ANY_CODEC, 1 * KB, -1,
     CPU_SRC(2, "64,1K,4K,16K,64K (equal <= 1K)")},
    {TPM_BACKEND_CPU, 4, ANY_DTYPE, ANY_CODEC, 2 * KB, -1,
     CPU_SRC(4, "256,1K,4K,16K (crossover 1K-4K)")},
    {TPM_BACKEND_CPU, 8, ANY_DTYPE, ANY_CODEC, 512, -1, CPU_SRC(8, "256,1K,4K (crossover 256-1K)")},
    {TPM_BACKEND_CPU, 0, ANY_DTYPE, ANY_CODEC, 1 * KB, -1,
     "cpu, worlds 1/3/5/6/7: between the measured world 2/4/8 crossovers"},
    {TPM_BACKEND_CUDA, 2, ANY_DTYPE, ANY_CODEC, 8192 * KB, TPM_DISPATCH_PEER_BUFFER,
     "H200 x2, bf16, bench/results/allreduce_h200x2.json + allreduce_h200x2_quad.json (tpmoe bench "
     "allreduce --tp 2): one-shot wins up to 8 MB (33.1 vs 35.1 us two-shot), two-shot from 16 MB "
     "(59.5 vs 63.4); the custom kernels beat NCCL at every size up to 128 MB (1.18x there); "
     "round 3 (allreduce_h200x2_r3_v1.json, per-CTA-epoch one-shot): one-shot 33.0 vs two-shot "
     "35.0 us at 8 MB, two-shot 111.4 vs 132.5 at 32 MB: same threshold; round 4 "
     "(allreduce_h200x2_r4_vars.json): one-shot 17.7 vs two-shot 20.7 us at 4 MB, 33.4 vs 32.2-32.8 "
     "at 8 MB (2-4%, crossover 4-8 MB, 4-8 MB not measured): kept"},
    {TPM_BACKEND_CUDA, 0, ANY_DTYPE, ANY_CODEC, 512 * KB, TPM_DISPATCH_PEER_BUFFER,
     "worlds 3-8: not measured (one-shot traffic grows with W-1), provisional"},
};
#define DISPATCH_ROWS (sizeof dispatch_table / sizeof dispatch_table[0])

static const tpm_dispatch_entry *lookup(tpm_backend b, int world, tpm_dtype dt, tpm_codec c) {
    for (size_t i = 0; i < DISPATCH_ROWS; i++) {
        const tpm_dispatch_entry *e = &dispatch_table[i];
        if (e->backend != b) continue;
        if (e->world != 0 && e->world != world) continue;
        if (e->dtype != ANY_DTYPE && e->dtype != dt) continue;
        if (e->codec != ANY_CODEC && e->codec != c) continue;
        return e;
    }
    return NULL;
}

/* Thresholds after the config overrides. */
static void thresholds(const tpm_resolved_config *cfg, const tpm_dispatch_entry *e,
                       int64_t *oneshot_max, int64_t *custom_max) {
    *oneshot_max = cfg->oneshot_max_bytes >= 0 ? cfg->oneshot_max_bytes
                   : e                         ? e->oneshot_max_bytes
                                               : 0;
    int64_t cm = cfg->custom_max_bytes >= 0 ? cfg->custom_max_bytes : e ? e->custom_max_bytes : -1;
    if (cm == TPM_DISPATCH_PEER_BUFFER) cm = cfg->buffer_bytes;
    *custom_max = cm;
}

tpm_status tpm_dispatch_plan(const tpm_resolved_config *cfg, tpm_backend backend, int world,
                             size_t bytes, tpm_dtype dt, tpm_codec codec_req, tpm_algo algo_req,
                             int nccl_available, tpm_algo *algo, tpm_codec *codec) {
    TPM_ARG_CHECK(cfg && algo && codec, "tpm_dispatch_plan: null argument");
    TPM_ARG_CHECK(codec_req == TPM_CODEC_DEFAULT || (unsigned)codec_req < TPM_CODEC_COUNT_,
                  "codec %d is out of range", (int)codec_req);
    TPM_ARG_CHECK((unsigned)algo_req < TPM_ALGO_COUNT_, "algo %d is out of range", (int)algo_req);
    TPM_ARG_CHECK((unsigned)dt < TPM_DTYPE_COUNT_, "dtype %d is out of range", (int)dt);

    const int codec_arg = codec_req != TPM_CODEC_DEFAULT;
    const int algo_arg = algo_req != TPM_ALGO_AUTO;
    tpm_codec c = codec_arg ? codec_req : cfg->codec;
    tpm_algo a = algo_arg ? algo_req : cfg->algo;
    if ((unsigned)c >= TPM_CODEC_COUNT_) c = TPM_CODEC_NONE;
    if ((unsigned)a >= TPM_ALGO_COUNT_) a = TPM_ALGO_AUTO;

    /* 1. the size window of the lossy codecs */
    if (c != TPM_CODEC_NONE && !(codec_arg && algo_arg)) {
        int64_t b = (int64_t)bytes;
        if (b < cfg->quant_min_bytes || b > cfg->quant_max_bytes) c = TPM_CODEC_NONE;
    }

    /* 2. explicit (argument or config) algorithms */
    if (a == TPM_ALGO_NCCL && !nccl_available) {
        if (algo_arg)
            return tpm_err(TPM_ERR_UNSUPPORTED,
                           "algo nccl: NCCL is not available on the %s backend",
                           backend == TPM_BACKEND_CPU ? "cpu" : "this");
        /* configured (TPMOE_ALGO=nccl) without NCCL: the plain exact two-shot */
        a = TPM_ALGO_TWOSHOT;
        if (!codec_arg) c = TPM_CODEC_NONE;
    } else if (a == TPM_ALGO_NCCL) {
        if (c != TPM_CODEC_NONE) {
            if (codec_arg && algo_arg)
                return tpm_err(TPM_ERR_UNSUPPORTED,
                               "algo nccl is exact only: codec %s needs the two-shot",
                               tpm_codec_name(c));
            if (codec_arg)
                a = TPM_ALGO_TWOSHOT;
            else
                c = TPM_CODEC_NONE;
        }
    }
    if (a == TPM_ALGO_ONESHOT && c != TPM_CODEC_NONE) {
        if (codec_arg && algo_arg)
            return tpm_err(TPM_ERR_UNSUPPORTED,
                           "one-shot is exact only: codec %s needs the two-shot (or codec none)",
                           tpm_codec_name(c));
        if (codec_arg)
            a = TPM_ALGO_TWOSHOT;
        else
            c = TPM_CODEC_NONE;
    }
    if (a != TPM_ALGO_AUTO) {
        *algo = a;
        *codec = c;
        return TPM_OK;
    }

    /* 3. the table */
    if (c != TPM_CODEC_NONE) {
        *algo = TPM_ALGO_TWOSHOT;
        *codec = c;
        return TPM_OK;
    }
    *codec = TPM_CODEC_NONE;
    if (cfg->allreduce == TPM_AR_NCCL) {
        *algo = nccl_available ? TPM_ALGO_NCCL : TPM_ALGO_TWOSHOT;
        return TPM_OK;
    }
    int64_t oneshot_max, custom_max;
    thresholds(cfg, lookup(backend, world, dt, c), &oneshot_max, &custom_max);
    if (cfg->allreduce != TPM_AR_CUSTOM && nccl_available && custom_max >= 0 &&
        (int64_t)bytes > custom_max) {
        *algo = TPM_ALGO_NCCL;
        return TPM_OK;
    }
    *algo = (int64_t)bytes <= oneshot_max ? TPM_ALGO_ONESHOT : TPM_ALGO_TWOSHOT;
    return TPM_OK;
}

static void fmt_bytes(char *buf, size_t len, int64_t v) {
    if (v < 0)
        snprintf(buf, len, "none");
    else if (v == TPM_BYTES_UNLIMITED)
        snprintf(buf, len, "unlimited");
    else if (v >= KB * KB && v % (KB * KB) == 0)
        snprintf(buf, len, "%lldM", (long long)(v / (KB * KB)));
    else if (v >= KB && v % KB == 0)
        snprintf(buf, len, "%lldK", (long long)(v / KB));
    else
        snprintf(buf, len, "%lld", (long long)v);
}

#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (used < len) {                                                                          \
            int k_ = snprintf(buf + used, len - used, __VA_ARGS__);                                \
            if (k_ > 0) used += (size_t)k_;                                                        \
        }                                                                                          \
    } while (0)

void tpm_dispatch_describe(const tpm_resolved_config *cfg, char *buf, size_t len) {
    if (!buf || !len) return;
    buf[0] = '\0';
    if (!cfg) return;
    size_t used = 0;
    char a[32], b[32];
    APPEND("dispatch table (first matching row wins; * = applies to world %d):\n", cfg->world_size);
    APPEND("  %-1s %-7s %-5s %-5s %-6s %-10s %-11s %s\n", "", "backend", "world", "dtype", "codec",
           "oneshot<=", "custom<=", "source");
    int matched[TPM_BACKEND_COUNT_] = {0};
    for (size_t i = 0; i < DISPATCH_ROWS; i++) {
        const tpm_dispatch_entry *e = &dispatch_table[i];
        int applies = !matched[e->backend] && (e->world == 0 || e->world == cfg->world_size);
        if (applies) matched[e->backend] = 1;
        fmt_bytes(a, sizeof a, e->oneshot_max_bytes);
        if (e->custom_max_bytes == TPM_DISPATCH_PEER_BUFFER)
            snprintf(b, sizeof b, "peer-buffer");
        else
            fmt_bytes(b, sizeof b, e->custom_max_bytes);
        char w[8];
        snprintf(w, sizeof w, "%d", e->world);
        APPEND("  %-1s %-7s %-5s %-5s %-6s %-10s %-11s %s\n", applies ? "*" : "",
               e->backend == TPM_BACKEND_CPU ? "cpu" : "cuda", e->world ? w : "any",
               e->dtype == ANY_DTYPE ? "any" : tpm_dtype_name(e->dtype),
               e->codec == ANY_CODEC ? "any" : tpm_codec_name(e->codec), a, b, e->source);
    }
    if (cfg->oneshot_max_bytes >= 0) {
        fmt_bytes(a, sizeof a, cfg->oneshot_max_bytes);
        APPEND("  override: one-shot up to %s (TPMOE_ONESHOT_MAX_BYTES / cfg.oneshot_max_bytes)\n",
               a);
    }
    if (cfg->custom_max_bytes >= 0) {
        fmt_bytes(a, sizeof a, cfg->custom_max_bytes);
        APPEND(
            "  override: custom kernels up to %s (TPMOE_CUSTOM_MAX_BYTES / cfg.custom_max_bytes)\n",
            a);
    }
    fmt_bytes(a, sizeof a, cfg->quant_min_bytes);
    fmt_bytes(b, sizeof b, cfg->quant_max_bytes);
    if (cfg->codec == TPM_CODEC_NONE)
        APPEND("  codec none: every call is exact (a lossy codec, opt-in, would apply from %s to %s "
               "bytes); one-shot is exact only\n",
               a, b);
    else
        APPEND("  codec %s applies from %s to %s bytes (exact outside); lossy codecs always use the "
               "two-shot; one-shot is exact only\n",
               tpm_codec_name(cfg->codec), a, b);
    APPEND("  cpu backend: no NCCL (allreduce mode nccl = the plain exact two-shot)\n");
}
