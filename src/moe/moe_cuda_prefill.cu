/*
 * moe_cuda_prefill.cu - the compute-bound expert path (many tokens per
 * expert) on tensor cores through cuBLAS.
 *
 * The permuted rows (grouped by expert, moe_cuda_route.cu) are gathered into
 * xp, then for every touched expert e with n_e rows at offset o_e:
 *   h13[o_e..] = xp[o_e..] . w13[e]^T   (bf16 in, fp32 accumulate, bf16 out)
 * the activation kernel turns h13 into act_bf (fp32 math, biases first), and
 *   rows_bf[o_e..] = act_bf[o_e..] . w2[e]^T
 * which the combine kernel weights and sums per token. cuBLAS needs the
 * sizes on the host, so the layer reads the offsets back once per call (one
 * stream sync): this path is not capturable in a CUDA graph; at the sizes
 * that take it (>= hundreds of tokens, milliseconds of GEMMs) the sync is
 * noise. Row-major X [n x K] . W^T with W [N x K] row-major is, for cuBLAS's
 * column-major view, C^T [N x n] = op_T(W) [N x K] . X^T [K x n].
 */
#include "moe_cuda_kernels.h"

#include <cublas_v2.h>

namespace {

tpm_status gemm_xwT(cublasHandle_t h, const uint16_t *X, const uint16_t *W, uint16_t *C, int n, int N,
                    int K) {
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st =
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, n, K, &one, W, CUDA_R_16BF, K, X, CUDA_R_16BF, K,
                     &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return tpm_err(TPM_ERR_CUDA, "cublasGemmEx (%d x %d x %d): %s", n, N, K, cublasGetStatusString(st));
    return TPM_OK;
}

} // namespace

tpm_status tpm_moe_prefill_experts(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T,
                                   const int32_t *h_offsets, cudaStream_t s) {
    cublasHandle_t h = static_cast<cublasHandle_t>(blas);
    const size_t w13_stride = (size_t)2 * d.Il * d.H, w2_stride = (size_t)d.H * d.Il;
    TPM_TRY(tpm_moe_launch_gather(d, x, T, s));
    for (int e = 0; e < d.E1; e++) {
        const int off = h_offsets[e], n = h_offsets[e + 1] - off;
        if (n <= 0) continue;
        TPM_TRY(gemm_xwT(h, d.xp + (size_t)off * d.H, d.w13 + e * w13_stride, d.h13 + (size_t)off * 2 * d.Il,
                         n, 2 * d.Il, d.H));
    }
    TPM_TRY(tpm_moe_launch_act(d, d.h13, d.act_bf, T * d.K, -1, s));
    for (int e = 0; e < d.E1; e++) {
        const int off = h_offsets[e], n = h_offsets[e + 1] - off;
        if (n <= 0) continue;
        TPM_TRY(gemm_xwT(h, d.act_bf + (size_t)off * d.Il, d.w2 + e * w2_stride, d.rows_bf + (size_t)off * d.H,
                         n, d.H, d.Il));
    }
    return TPM_OK;
}

tpm_status tpm_moe_shared_dense(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T, cudaStream_t s) {
    cublasHandle_t h = static_cast<cublasHandle_t>(blas);
    const int e = d.E; /* the shared expert's slot */
    TPM_TRY(gemm_xwT(h, x, d.w13 + (size_t)e * 2 * d.Il * d.H, d.sh_h13, T, 2 * d.Il, d.H));
    TPM_TRY(tpm_moe_launch_act(d, d.sh_h13, d.sh_act, T, e, s));
    TPM_TRY(gemm_xwT(h, d.sh_act, d.w2 + (size_t)e * d.H * d.Il, d.sh_out, T, d.H, d.Il));
    return TPM_OK;
}
