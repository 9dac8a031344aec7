/*
 * gpu_preload.c - tpmoe's kernels are all loaded before the first collective
 * (src/core/cuda_preload.cu), so a kernel's first launch never waits for a
 * spinning all-reduce (ctest label gpu; exit 77 without CUDA or a GPU).
 *
 * Runs with CUDA_MODULE_LOADING=LAZY (CUDA's default; set here unless the
 * caller set it), the mode in which a first launch may synchronize the
 * context. Checked:
 *  - preload_counts: the loader found the library's kernels (far more than
 *    the one anchor per file) and a second call loads nothing new;
 *  - first_launch_beside_spin: two ranks share GPU 0 (TPMOE_CUDA_SHARE_GPU,
 *    one process, one thread). Rank 0's all-reduce is enqueued first and
 *    spins for rank 1; then a kernel this process never launched (the GPU
 *    codec's FP8 quantizer) goes out on a third stream; then rank 1's
 *    all-reduce. If that first launch waited for the context to drain, it
 *    would wait for rank 0's spin, which waits for rank 1's call, which
 *    this thread makes only after the launch returns: rank 0 gives up after
 *    its timeout (2 s here) and tpm_comm_get_async_error says so. With the
 *    preload: no error, and the sums are right on both ranks.
 *
 * `gpu_preload --no-preload` (not a ctest) runs the second case with the
 * preload switched off before any CUDA call, to show what it guards
 * against: it prints what happened and exits 0 either way.
 */
#include <stdio.h>

#ifndef TPMOE_HAVE_CUDA
int main(void) {
    printf("gpu_preload: skipped: this build has no CUDA (TPMOE_CUDA=OFF or no nvcc)\n");
    return 77;
}
#else

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "codec/codec.h"
#include "codec/codec_cuda.h"
#include "comm/comm_internal.h"
#include "core/cuda_preload.h"
#include "numeric.h"

#define N 8192 /* bf16 elements per rank: the one-shot */

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t ck_ = (x);                                                                     \
        if (ck_ != cudaSuccess) fail_msg("%s: %s", #x, cudaGetErrorString(ck_));                   \
    } while (0)

static void test_preload_counts(void **state) {
    (void)state;
    int n1 = -1, n2 = -1;
    assert_int_equal(tpm_cuda_preload_kernels(0, &n1), TPM_OK);
    assert_int_equal(tpm_cuda_preload_kernels(0, &n2), TPM_OK);
    assert_int_equal(n1, n2);
    printf("gpu_preload: %d kernels loaded on GPU 0\n", n1);
    assert_true(n1 >= 100); /* the all-reduce's dtype x codec x variant instantiations alone */
    assert_int_equal(tpm_cuda_preload_kernels(-1, &n1), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_preload_kernels(64, &n1), TPM_ERR_INVALID_ARG);
}

/* 0: both ranks right and no error; 1: the async error the ranks reported (message printed). */
static int first_launch_beside_spin(void) {
    setenv("TPMOE_CUDA_SHARE_GPU", "1", 1);
    setenv("TPMOE_TIMEOUT_MS", "2000", 1);
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CUDA;
    cfg.algo = TPM_ALGO_ONESHOT;
    tpm_comm_t c[2] = {0};
    const int devs[2] = {0, 0};
    if (tpm_comm_init_all(c, 2, devs, &cfg) != TPM_OK) fail_msg("init_all: %s", tpm_last_error());
    uint16_t *h[2], *d_in[2], *d_out[2];
    cudaStream_t s[3];
    CK(cudaSetDevice(0));
    for (int r = 0; r < 2; r++) {
        h[r] = malloc(N * sizeof(uint16_t));
        assert_non_null(h[r]);
        for (int i = 0; i < N; i++)
            h[r][i] = tpm_f32_to_bf16((float)((i * 7 + r * 13) % 97) * 0.03125f - 1.5f);
        CK(cudaMalloc((void **)&d_in[r], N * sizeof(uint16_t)));
        CK(cudaMalloc((void **)&d_out[r], N * sizeof(uint16_t)));
        CK(cudaMemcpy(d_in[r], h[r], N * sizeof(uint16_t), cudaMemcpyHostToDevice));
        CK(cudaMemset(d_out[r], 0xff, N * sizeof(uint16_t))); /* poison: NaN */
    }
    for (int i = 0; i < 3; i++)
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    const size_t nblk = 1 << 12;
    float *dom = NULL;
    uint8_t *wire = NULL;
    CK(cudaMalloc((void **)&dom, nblk * 32 * sizeof(float)));
    CK(cudaMalloc((void **)&wire, tpm_codec_wire_bytes(TPM_CODEC_FP8, nblk)));
    CK(cudaMemset(dom, 0, nblk * 32 * sizeof(float)));
    CK(cudaDeviceSynchronize());

    assert_int_equal(tpm_allreduce(c[0], d_in[0], d_out[0], N, TPM_DTYPE_BF16, s[0]), TPM_OK);
    double t0 = (double)tpm_now_ns();
    assert_int_equal(tpm_cuda_codec_quantize(TPM_CODEC_FP8, dom, nblk, wire, s[2]), 0);
    double launch_ms = ((double)tpm_now_ns() - t0) * 1e-6;
    assert_int_equal(tpm_allreduce(c[1], d_in[1], d_out[1], N, TPM_DTYPE_BF16, s[1]), TPM_OK);
    CK(cudaDeviceSynchronize());
    printf("gpu_preload: the first FP8 quantizer launch took %.3f ms on the host\n", launch_ms);

    int bad = 0;
    for (int r = 0; r < 2; r++)
        if (tpm_comm_get_async_error(c[r]) != TPM_OK) {
            printf("gpu_preload: rank %d: %s\n", r, tpm_comm_last_error(c[r]));
            bad = 1;
        }
    if (!bad) {
        uint16_t *y = malloc(N * sizeof(uint16_t));
        assert_non_null(y);
        for (int r = 0; r < 2; r++) {
            CK(cudaMemcpy(y, d_out[r], N * sizeof(uint16_t), cudaMemcpyDeviceToHost));
            for (int i = 0; i < N; i++) {
                uint16_t want = tpm_f32_to_bf16(tpm_bf16_to_f32(h[0][i]) + tpm_bf16_to_f32(h[1][i]));
                if (y[i] != want) fail_msg("rank %d element %d: 0x%04x, want 0x%04x", r, i, y[i], want);
            }
        }
        free(y);
    }
    for (int i = 0; i < 3; i++)
        cudaStreamDestroy(s[i]);
    for (int r = 0; r < 2; r++) {
        cudaFree(d_in[r]);
        cudaFree(d_out[r]);
        free(h[r]);
        tpm_comm_destroy(c[r]);
    }
    cudaFree(dom);
    cudaFree(wire);
    return bad;
}

static void test_first_launch_beside_spin(void **state) {
    (void)state;
    assert_int_equal(first_launch_beside_spin(), 0);
}

int main(int argc, char **argv) {
    if (!getenv("CUDA_MODULE_LOADING")) setenv("CUDA_MODULE_LOADING", "LAZY", 1);
    const int no_preload = argc > 1 && !strcmp(argv[1], "--no-preload");
    if (no_preload) tpm_cuda_preload_skip_for_test(0); /* before any CUDA call loads anything */
    if (tpm_cuda_device_count() < 1) {
        printf("gpu_preload: skipped: no CUDA device is visible\n");
        return 77;
    }
    if (no_preload) {
        int r = first_launch_beside_spin();
        printf("gpu_preload --no-preload (CUDA_MODULE_LOADING=%s): %s\n", getenv("CUDA_MODULE_LOADING"),
               r ? "the all-reduce gave up: the hazard the preload guards against"
                 : "no error (the first launch did not wait this time)");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preload_counts),
        cmocka_unit_test(test_first_launch_beside_spin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
