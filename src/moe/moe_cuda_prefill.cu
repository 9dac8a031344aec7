/*
 * moe_cuda_prefill.cu - the compute-bound expert path (many tokens per
 * expert) on tensor cores through cuBLAS, and the dense shared-expert MLPs.
 * (On a 9.0 device the default prefill path is tpmoe's own grouped GEMM,
 * moe_cuda_gemm_sm90a.cu; these are its fallback and comparison.)
 *
 * The permuted rows (grouped by expert, moe_cuda_route.cu) are gathered into
 * xp, then for every touched expert e with n_e rows at offset o_e:
 *   h13[o_e..] = xp[o_e..] . w13[e]^T   (bf16 in, fp32 accumulate, bf16 out)
 * the activation kernel turns h13 into act_bf (fp32 math, biases first), and
 *   rows_bf[o_e..] = act_bf[o_e..] . w2[e]^T
 * which the combine kernel weights and sums per token. Three ways to issue
 * the per-expert GEMMs (tuning.prefill_gemm):
 *   LOOP    one cublasGemmEx per touched expert on the caller's stream;
 *   GROUPED one cublasGemmGroupedBatchedEx per matrix (gate_up, down): one
 *           group per touched expert (group size 1, its own n); the A/B/C
 *           pointer arrays are written on the host and copied to the device
 *           in one async copy per call;
 *   STREAMS the loop spread round-robin (largest expert, the shared slot,
 *           first) over TPM_MOE_GEMM_NSTREAMS streams, each with its own
 *           cuBLAS handle and workspace, forked from and joined back to the
 *           caller's stream by events (fork after the gather, join before
 *           the activation; again for down).
 * cuBLAS needs the sizes on the host, so the layer reads the offsets back
 * once per call (one stream sync): this path is not capturable in a CUDA
 * graph. The pinned pointer array is rewritten only after the event
 * recorded behind the previous call's copy of it has completed.
 * Row-major X [n x K] . W^T with W [N x K] row-major is, for cuBLAS's
 * column-major view, C^T [N x n] = op_T(W) [N x K] . X^T [K x n].
 */
#include "moe_cuda_kernels.h"

#include <cublas_v2.h>

namespace {

tpm_status gemm_xwT(cublasHandle_t h, const uint16_t *X, const uint16_t *W, void *C, cudaDataType_t ctype, int n,
                    int N, int K) {
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, n, K, &one, W, CUDA_R_16BF, K, X,
                                           CUDA_R_16BF, K, &zero, C, ctype, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return tpm_err(TPM_ERR_CUDA, "cublasGemmEx (%d x %d x %d): %s", n, N, K, cublasGetStatusString(st));
    return TPM_OK;
}

/* One grouped GEMM over ng experts: C_g [n_g x N] = X_g . W_g^T. */
tpm_status gemm_grouped(cublasHandle_t h, int ng, const int *rows, int N, int K, void **dA, void **dB, void **dC) {
    cublasOperation_t ta[TPM_MOE_MAX_SLOTS], tb[TPM_MOE_MAX_SLOTS];
    int mm[TPM_MOE_MAX_SLOTS], kk[TPM_MOE_MAX_SLOTS], ldk[TPM_MOE_MAX_SLOTS], ldn[TPM_MOE_MAX_SLOTS],
        gs[TPM_MOE_MAX_SLOTS];
    float one[TPM_MOE_MAX_SLOTS], zero[TPM_MOE_MAX_SLOTS];
    for (int g = 0; g < ng; g++) {
        ta[g] = CUBLAS_OP_T;
        tb[g] = CUBLAS_OP_N;
        mm[g] = N;
        kk[g] = K;
        ldk[g] = K;
        ldn[g] = N;
        gs[g] = 1;
        one[g] = 1.0f;
        zero[g] = 0.0f;
    }
    const cublasStatus_t st =
        cublasGemmGroupedBatchedEx(h, ta, tb, mm, rows, kk, one, (const void *const *)dA, CUDA_R_16BF, ldk,
                                   (const void *const *)dB, CUDA_R_16BF, ldk, zero, dC, CUDA_R_16BF, ldn, ng, gs,
                                   CUBLAS_COMPUTE_32F);
    if (st != CUBLAS_STATUS_SUCCESS)
        return tpm_err(TPM_ERR_CUDA, "cublasGemmGroupedBatchedEx (%d groups, %d x %d): %s", ng, N, K,
                       cublasGetStatusString(st));
    return TPM_OK;
}

/* The caller's stream s forks to the aux streams (they wait for everything queued on s). */
tpm_status fork(const tpm_moe_prefill_ctx &c, cudaStream_t s) {
    TPM_CUDA_TRY(cudaEventRecord(c.ev_fork, s));
    for (int i = 0; i < TPM_MOE_GEMM_NSTREAMS; i++) TPM_CUDA_TRY(cudaStreamWaitEvent(c.aux[i], c.ev_fork, 0));
    return TPM_OK;
}

tpm_status join(const tpm_moe_prefill_ctx &c, cudaStream_t s) {
    for (int i = 0; i < TPM_MOE_GEMM_NSTREAMS; i++) {
        TPM_CUDA_TRY(cudaEventRecord(c.ev_join[i], c.aux[i]));
        TPM_CUDA_TRY(cudaStreamWaitEvent(s, c.ev_join[i], 0));
    }
    return TPM_OK;
}

} // namespace

tpm_status tpm_moe_prefill_experts(const tpm_moe_dev &d, void *blas, const tpm_moe_prefill_ctx &c,
                                   const uint16_t *x, int T, const int32_t *h_offsets, cudaStream_t s) {
    cublasHandle_t h = static_cast<cublasHandle_t>(blas);
    const size_t w13_stride = (size_t)2 * d.Il * d.H, w2_stride = (size_t)d.H * d.Il;
    TPM_TRY(tpm_moe_launch_gather(d, x, T, T * d.K, 0, s));
    if (c.mode == TPM_MOE_GEMM_GROUPED) {
        /* touched experts, largest first (the shared slot): pointer arrays [6][E1] */
        int ng = 0, rows[TPM_MOE_MAX_SLOTS];
        void **P = c.h_ptrs;
        TPM_CUDA_TRY(cudaEventSynchronize(c.ev_ptrs)); /* the previous call's copy of P is done */
        const int E1 = d.E1;
        for (int e = E1 - 1; e >= 0; e--) {
            const int off = h_offsets[e], n = h_offsets[e + 1] - off;
            if (n <= 0) continue;
            rows[ng] = n;
            P[0 * E1 + ng] = d.w13 + e * w13_stride;
            P[1 * E1 + ng] = d.xp + (size_t)off * d.H;
            P[2 * E1 + ng] = d.h13 + (size_t)off * 2 * d.Il;
            P[3 * E1 + ng] = d.w2 + e * w2_stride;
            P[4 * E1 + ng] = d.act_bf + (size_t)off * d.Il;
            P[5 * E1 + ng] = d.rows_bf + (size_t)off * d.H;
            ng++;
        }
        if (ng == 0) return TPM_OK;
        TPM_CUDA_TRY(cudaMemcpyAsync(c.d_ptrs, P, sizeof(void *) * 6 * (size_t)E1, cudaMemcpyHostToDevice, s));
        TPM_CUDA_TRY(cudaEventRecord(c.ev_ptrs, s));
        void **D = c.d_ptrs;
        TPM_TRY(gemm_grouped(h, ng, rows, 2 * d.Il, d.H, D, D + E1, D + 2 * E1));
        TPM_TRY(tpm_moe_launch_act(d, d.h13, d.act_bf, T * d.K, -1, s));
        return gemm_grouped(h, ng, rows, d.H, d.Il, D + 3 * E1, D + 4 * E1, D + 5 * E1);
    }
    const int ns = c.mode == TPM_MOE_GEMM_STREAMS ? TPM_MOE_GEMM_NSTREAMS : 0;
    if (ns) TPM_TRY(fork(c, s));
    for (int e = d.E1 - 1, i = 0; e >= 0; e--) {
        const int off = h_offsets[e], n = h_offsets[e + 1] - off;
        if (n <= 0) continue;
        cublasHandle_t hh = ns ? static_cast<cublasHandle_t>(c.blas_aux[i++ % ns]) : h;
        TPM_TRY(gemm_xwT(hh, d.xp + (size_t)off * d.H, d.w13 + e * w13_stride, d.h13 + (size_t)off * 2 * d.Il,
                         CUDA_R_16BF, n, 2 * d.Il, d.H));
    }
    if (ns) TPM_TRY(join(c, s));
    TPM_TRY(tpm_moe_launch_act(d, d.h13, d.act_bf, T * d.K, -1, s));
    if (ns) TPM_TRY(fork(c, s));
    for (int e = d.E1 - 1, i = 0; e >= 0; e--) {
        const int off = h_offsets[e], n = h_offsets[e + 1] - off;
        if (n <= 0) continue;
        cublasHandle_t hh = ns ? static_cast<cublasHandle_t>(c.blas_aux[i++ % ns]) : h;
        TPM_TRY(gemm_xwT(hh, d.act_bf + (size_t)off * d.Il, d.w2 + e * w2_stride, d.rows_bf + (size_t)off * d.H,
                         CUDA_R_16BF, n, d.H, d.Il));
    }
    if (ns) TPM_TRY(join(c, s));
    return TPM_OK;
}

tpm_status tpm_moe_shared_dense(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T, cudaStream_t s) {
    cublasHandle_t h = static_cast<cublasHandle_t>(blas);
    const int e = d.Es; /* the shared expert's slot */
    TPM_TRY(gemm_xwT(h, x, d.w13 + (size_t)e * 2 * d.Il * d.H, d.sh_h13, CUDA_R_16BF, T, 2 * d.Il, d.H));
    TPM_TRY(tpm_moe_launch_act(d, d.sh_h13, d.sh_act, T, e, s));
    TPM_TRY(gemm_xwT(h, d.sh_act, d.w2 + (size_t)e * d.H * d.Il, d.sh_out, CUDA_R_16BF, T, d.H, d.Il));
    return TPM_OK;
}

tpm_status tpm_moe_shared_split_prefill(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T, cudaStream_t s) {
    TPM_ASSERT(d.fused && d.ep == 1);
    cublasHandle_t h = static_cast<cublasHandle_t>(blas);
    const int e = d.Es;
    const size_t r0 = (size_t)T * d.k; /* slot E's permuted rows: after the T*k routed ones, tokens in order */
    uint16_t *h13 = d.h13 + r0 * 2 * d.Il, *act = d.act_bf + r0 * d.Il, *rows = d.rows_bf + r0 * d.H;
    TPM_TRY(gemm_xwT(h, x, d.w13 + (size_t)e * 2 * d.Il * d.H, h13, CUDA_R_16BF, T, 2 * d.Il, d.H));
    TPM_TRY(tpm_moe_launch_act(d, h13, act, T, e, s));
    TPM_TRY(gemm_xwT(h, act, d.w2 + (size_t)e * d.H * d.Il, rows, CUDA_R_16BF, T, d.H, d.Il));
    return TPM_OK;
}
