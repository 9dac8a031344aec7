/* cuda_check.h - CK(call): the standalone device probes' (bench/*.cu, not the
 * library) check of a CUDA runtime call: print file, line, call and error,
 * and exit. The library itself never exits; it returns a tpm_status. */
#ifndef TPM_BENCH_CUDA_CHECK_H
#define TPM_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#endif
