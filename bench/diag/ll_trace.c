/*
 * ll_trace.c - a diagnostic, not a benchmark: the timeline of the flag-free
 * two-shot's world-2 pipeline (cuda_twoshot_ll.cu, Ll::run2) on 2 GPUs.
 * Built by hand, outside the tool (whose sources are tools/*.c bench/*.c).
 *
 * Needs a library whose cuda_twoshot_ll.cu was built with -DTPM_LL_TRACE
 * (thread 0 of every CTA writes %globaltimer at its entry, after its begin,
 * at every pipeline step's start and after its A, B and C, and at its end;
 * tpm_ll_trace_read copies them). Build (in a CUDA build tree, the traced
 * object linked ahead of libtpmoe.a; bench/results/r75/COMMAND.txt has the lines):
 *   nvcc <the library's flags> -DTPM_LL_TRACE -c src/comm/cuda_twoshot_ll.cu -o ll_tr.o
 *   gcc -O2 -I include bench/diag/ll_trace.c ll_tr.o libtpmoe.a <its link libraries> -o ll_trace
 *
 * Run: ll_trace OUTDIR [sizes in MiB ...] (default 32 96). For each size and
 * codec (INT4, INT8; bf16, explicit two-shot): 51 calls queued back to back
 * on both ranks (the mean of calls 30..49 printed, us per call; outside
 * graphs, so a little above the benchmark's), the last one's trace written
 * to OUTDIR/trace_<codec>_<MiB>_r<rank>.csv:
 * one line per CTA and step, times in ns from the earliest CTA entry on that
 * GPU (the two GPUs' timers are not aligned).
 */
#include "tpmoe.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tpm_ll_trace_read(unsigned long long *host, int *ctas, int *steps);

#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                              \
        }                                                                          \
    } while (0)
#define TK(x)                                                                      \
    do {                                                                           \
        tpm_status s_ = (x);                                                       \
        if (s_ != TPM_OK) {                                                        \
            fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

static int dump(const char *dir, const char *codec, int mib, int rank) {
    int ctas = 0, steps = 0;
    unsigned long long *h = malloc(sizeof(unsigned long long) * 512 * 41 * 4);
    if (!h || tpm_ll_trace_read(h, &ctas, &steps) != 0) return 1;
    const int row = (steps + 1) * 4;
    unsigned long long t0 = ~0ull;
    int n = 0;
    for (int b = 0; b < ctas; b++) {
        const unsigned long long *r = h + (size_t)b * row;
        if (r[0] == 0) break;
        if (r[0] < t0) t0 = r[0];
        n++;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/trace_%s_%d_r%d.csv", dir, codec, mib, rank);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "cta,cols,entry,begun,end,step,start,after_a,after_b,after_c\n");
    for (int b = 0; b < n; b++) {
        const unsigned long long *r = h + (size_t)b * row;
        const int cols = (int)r[3];
        for (int j = 0; j < cols + 2 && j < steps; j++) {
            const unsigned long long *s = r + 4 * (1 + j);
            fprintf(f, "%d,%d,%lld,%lld,%lld,%d,%lld,%lld,%lld,%lld\n", b, cols, (long long)(r[0] - t0),
                    (long long)(r[1] - t0), (long long)(r[2] - t0), j, (long long)(s[0] - t0),
                    (long long)(s[1] - t0), (long long)(s[2] - t0), (long long)(s[3] - t0));
        }
    }
    fclose(f);
    free(h);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ll_trace OUTDIR [MiB ...]\n");
        return 2;
    }
    int sizes[8] = {32, 96}, ns = 2;
    if (argc > 2) {
        ns = 0;
        for (int i = 2; i < argc && ns < 8; i++) sizes[ns++] = atoi(argv[i]);
    }
    int maxmib = 0;
    for (int i = 0; i < ns; i++)
        if (sizes[i] > maxmib) maxmib = sizes[i];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CUDA;
    cfg.world_size = 2;
    /* the release table's peer buffer (its largest size, 128 MiB): INT8 at 96 MiB in one launch */
    cfg.buffer_bytes = (int64_t)(maxmib > 128 ? maxmib : 128) << 20;
    tpm_comm_t comms[2];
    TK(tpm_comm_init_all(comms, 2, NULL, &cfg));
    void *in[2], *out[2];
    cudaStream_t st[2];
    cudaEvent_t ev[2][2];
    const size_t maxb = (size_t)maxmib << 20;
    uint16_t *hx = malloc(maxb);
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaMalloc(&in[r], maxb));
        CK(cudaMalloc(&out[r], maxb));
        srand(7 + r);
        for (size_t i = 0; i < maxb / 2; i++) { /* bf16 in [-2, 2) */
            float v = (float)rand() / RAND_MAX * 4.0f - 2.0f;
            uint32_t u;
            memcpy(&u, &v, 4);
            hx[i] = (uint16_t)(u >> 16);
        }
        CK(cudaMemcpy(in[r], hx, maxb, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
        CK(cudaEventCreate(&ev[r][0]));
        CK(cudaEventCreate(&ev[r][1]));
    }
    const tpm_codec codecs[2] = {TPM_CODEC_INT4, TPM_CODEC_INT8};
    const char *cname[2] = {"int4", "int8"};
    printf("%-6s %6s %10s %10s\n", "codec", "MiB", "r0_us", "r1_us");
    for (int si = 0; si < ns; si++) {
        const size_t count = ((size_t)sizes[si] << 20) / 2;
        for (int ci = 0; ci < 2; ci++) {
            /* 51 calls per rank queued back to back (no host wait between), so every call
             * after the first starts when the previous one ended on both GPUs; events around
             * calls 30..49: the mean per call; the trace is call 50's */
            for (int it = 0; it < 51; it++) {
                for (int r = 0; r < 2; r++) {
                    CK(cudaSetDevice(r));
                    if (it == 30) CK(cudaEventRecord(ev[r][0], st[r]));
                    TK(tpm_allreduce_ex(comms[r], in[r], out[r], count, TPM_DTYPE_BF16, codecs[ci],
                                        TPM_ALGO_TWOSHOT, st[r]));
                    if (it == 49) CK(cudaEventRecord(ev[r][1], st[r]));
                }
            }
            double t[2];
            for (int r = 0; r < 2; r++) {
                CK(cudaSetDevice(r));
                CK(cudaStreamSynchronize(st[r]));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, ev[r][0], ev[r][1]));
                t[r] = ms * 1e3 / 20;
            }
            printf("%-6s %6d %10.2f %10.2f\n", cname[ci], sizes[si], t[0], t[1]);
            for (int r = 0; r < 2; r++) {
                CK(cudaSetDevice(r));
                if (dump(argv[1], cname[ci], sizes[si], r)) {
                    fprintf(stderr, "trace dump failed\n");
                    return 1;
                }
            }
        }
    }
    for (int r = 0; r < 2; r++) tpm_comm_destroy(comms[r]);
    free(hx);
    return 0;
}
