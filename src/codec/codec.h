/*
 * codec.h - internal interface of the block codecs (CPU reference).
 *
 * The wire format is declared once in codec_format.h (C and CUDA). The CPU
 * functions below are the ground truth; the CUDA encoders must write the
 * same bytes (tests/golden/ holds vectors for that).
 *
 * Two levels:
 *  - "domain" arrays: nblk*32 floats, the tail block zero-padded, rotated by
 *    the 32-point Walsh-Hadamard transform for the *_H codecs. The two-shot
 *    all-reduce sums in this domain.
 *  - the wire: quantize / dequantize whole blocks of a domain array.
 * tpm_codec_encode/decode (public) = to_domain + quantize / dequantize +
 * from_domain. TPM_CODEC_NONE has no wire format here (the all-reduce sends
 * raw dtype elements).
 */
#ifndef TPM_CODEC_H
#define TPM_CODEC_H

#include "tpmoe.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks of 32 covering n values. */
static inline size_t tpm_codec_nblocks(size_t n) { return (n + 31) / 32; }
/* Bytes on the wire for nblk blocks (codes + scales, padded to 16 bytes).
 * 0 for NONE or an invalid codec. */
size_t tpm_codec_wire_bytes(tpm_codec c, size_t nblk);
int tpm_codec_is_lossy(tpm_codec c);
int tpm_codec_rotates(tpm_codec c);

/* Load n values of dtype into nblk*32 floats (zero tail), rotating if the
 * codec rotates. */
void tpm_codec_to_domain(tpm_codec c, const void *in, tpm_dtype dt, size_t n, float *dom);
/* Inverse: rotate back if needed and store the first n values as dtype. */
void tpm_codec_from_domain(tpm_codec c, const float *dom, size_t n, void *out, tpm_dtype dt);
/* Quantize nblk blocks of a domain array into the wire format. */
void tpm_codec_quantize(tpm_codec c, const float *dom, size_t nblk, uint8_t *wire);
/* Dequantize nblk blocks of the wire format into a domain array. */
void tpm_codec_dequantize(tpm_codec c, const uint8_t *wire, size_t nblk, float *dom);

/* Bound on the relative RMS error (||out - exact|| / ||exact||) of a
 * two-shot all-reduce with this codec, up to 8 ranks, on Gaussian,
 * heavy-tailed (Student-t 3) or outlier-channel data (docs/codecs.md, which
 * gives the measured values). One-shot quantizes once and stays below it.
 * 0 for NONE (exact up to fp32 summation), 1 for an invalid codec. */
double tpm_codec_allreduce_error_bound(tpm_codec c);

#ifdef __cplusplus
}
#endif
#endif /* TPM_CODEC_H */
