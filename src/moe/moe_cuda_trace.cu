/*
 * moe_cuda_trace.cu - the diagnostic timeline's buffer and its reduction (host side; the marks
 * themselves are TPM_TRACE_MARK / TPM_TRACE_MARK_CLK in moe_cuda_kernels.h, compiled in with
 * -DTPM_MOE_TRACE only). No kernels: thread 0 of a block writes %globaltimer (or %clock64) to
 * trace[(k * TPM_MOE_TRACE_SLOTS + slot) * TPM_MOE_TRACE_BLOCKS + block] during the launches;
 * the host reads the buffer back after the stream's work (a synchronous copy) and reduces each
 * (kernel, slot) over the blocks that wrote it.
 */
#include "moe_cuda_kernels.h"

#include <stdlib.h>

static size_t trace_words(void) {
    return (size_t)TPM_MOE_TRACE_KERNELS * TPM_MOE_TRACE_SLOTS * TPM_MOE_TRACE_BLOCKS;
}

tpm_status tpm_moe_trace_set(unsigned long long **trace, int on) {
#ifndef TPM_MOE_TRACE
    if (on) return tpm_err(TPM_ERR_UNSUPPORTED, "tpm_cuda_moe_set_trace: built without -DTPM_MOE_TRACE");
#endif
    const size_t bytes = sizeof(unsigned long long) * trace_words();
    if (on && !*trace) {
        TPM_CUDA_TRY(cudaMalloc((void **)trace, bytes));
        TPM_CUDA_TRY(cudaMemset(*trace, 0, bytes));
    } else if (!on && *trace) {
        cudaFree(*trace);
        *trace = NULL;
    }
    return TPM_OK;
}

tpm_status tpm_moe_trace_zero(unsigned long long *trace, cudaStream_t s) {
    TPM_CUDA_TRY(cudaMemsetAsync(trace, 0, sizeof(unsigned long long) * trace_words(), s));
    return TPM_OK;
}

static_assert(TPM_MOE_TRACE_EVENTS == TPM_MOE_TRACE_KERNELS * TPM_MOE_TRACE_SLOTS, "trace events");

/* ev: us from the routing's first block start per (kernel, slot): the first start, slot 1 (the
 * routing: its last block's logits; others: the first block past its wait), the last end, and
 * the routing's tail slots 3-6 (the latest block); kernel 4: the routing's slots in SM cycles
 * after slot 3; kernels 1 / 2 slots 3-6 (unused by the decode kernels): mode 3's extra marks
 * (moe_cuda_route_tc.cu), the latest block (kernel 1) and the earliest (kernel 2). -1 where
 * nothing was recorded. */
tpm_status tpm_moe_trace_read(const unsigned long long *trace, double *ev) {
    const size_t n = trace_words();
    unsigned long long *h = (unsigned long long *)malloc(n * sizeof *h);
    if (!h) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cuda_moe_trace_events: out of host memory");
    if (cudaMemcpy(h, trace, n * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        return tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_trace_events: copy failed");
    }
    unsigned long long t0 = 0;
    for (int b = 0; b < TPM_MOE_TRACE_BLOCKS; b++) /* the routing's first block start */
        if (h[b] && (!t0 || h[b] < t0)) t0 = h[b];
    for (int k = 0; k < TPM_MOE_TRACE_KERNELS; k++) {
        for (int sl = 0; sl < TPM_MOE_TRACE_SLOTS; sl++) {
            const int want_max = sl == 2 || ((k == 0 || k == 4) && sl >= 1) || (k == 1 && sl >= 3);
            unsigned long long v = 0;
            const unsigned long long *a = h + ((size_t)k * TPM_MOE_TRACE_SLOTS + sl) * TPM_MOE_TRACE_BLOCKS;
            for (int b = 0; b < TPM_MOE_TRACE_BLOCKS; b++)
                if (a[b] && (!v || (want_max ? a[b] > v : a[b] < v))) v = a[b];
            if (k == 4) ev[k * TPM_MOE_TRACE_SLOTS + sl] = v ? (double)v : -1.0; /* cycles, below */
            else ev[k * TPM_MOE_TRACE_SLOTS + sl] = v && t0 ? ((double)v - (double)t0) * 1e-3 : -1.0;
        }
    }
    double *cy = ev + 4 * TPM_MOE_TRACE_SLOTS; /* cycles after slot 3 */
    const double c3 = cy[3];
    for (int sl = 0; sl < TPM_MOE_TRACE_SLOTS; sl++) cy[sl] = cy[sl] >= 0 && c3 >= 0 ? cy[sl] - c3 : -1.0;
    free(h);
    return TPM_OK;
}
