/*
 * cuda_preload.h - load every tpmoe kernel into a GPU's context up front
 * (src/core/cuda_preload.cu; not installed).
 */
#ifndef TPM_CUDA_PRELOAD_H
#define TPM_CUDA_PRELOAD_H

#include "tpmoe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load every kernel of the library into device dev's primary context (once
 * per device and process; later calls return at once). n_loaded (may be
 * NULL): how many kernels the loading call loaded on that device (kernels
 * with no image for it not counted). The caller's current device is kept. */
tpm_status tpm_cuda_preload_kernels(int dev, int *n_loaded);
/* Tests only (tests/gpu_preload.c --no-preload): mark device dev as done
 * without loading anything, so kernels load lazily there as without tpmoe's
 * preload. Call before anything creates a communicator or a layer. */
void tpm_cuda_preload_skip_for_test(int dev);

#ifdef __cplusplus
}
/* In each .cu file with kernels, at file scope: names one kernel of the file
 * (any instantiation), through which the preloader finds the file's
 * fatbinary and from it every other kernel of the file. Declare it and list
 * it in cuda_preload.cu's anchors[] too: a file without an anchor is not
 * preloaded (its kernels then load at their first launch). */
#define TPM_CUDA_ANCHOR(name, kernel)                                                              \
    extern "C" const void *tpm_cuda_anchor_##name(void) { return (const void *)(kernel); }
#endif

#endif
