/*
 * test_util.h - helpers shared by the cmocka tests (every .c file in tests/util is linked
 * into every test program): a seeded RNG for fresh test data, output
 * poisoning, tensor comparison and temporary file paths. splitmix.h (header
 * only) is the generator on a bare uint64_t state that tu_next steps.
 */
#ifndef TPM_TEST_UTIL_H
#define TPM_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64; Box-Muller normals. Seed with tu_seed() for a per-run seed
 * (TPMOE_TEST_SEED overrides; the seed is printed so a failure can be
 * replayed) or a constant. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;

uint64_t tu_seed(void);
uint64_t tu_next(tu_rng *r);
double tu_uniform(tu_rng *r);            /* [0, 1) */
double tu_normal(tu_rng *r);
uint32_t tu_below(tu_rng *r, uint32_t n); /* [0, n) */
void tu_fill_normal(tu_rng *r, float *x, size_t n, float sd);
void tu_fill_bytes(tu_rng *r, void *p, size_t n);

/* Fill with NaN (a signalling pattern 0xFFC0DEAD). */
void tu_poison_f32(float *x, size_t n);

/* Compare n floats: count of elements with |a-b| > atol + rtol*|b| (a NaN
 * on either side counts unless both are NaN); the worst index goes to
 * *worst (may be NULL). Prints up to 5 mismatches with label. */
size_t tu_compare_f32(const char *label, const float *a, const float *b, size_t n, float atol, float rtol,
                      size_t *worst);
/* Bitwise equality of n floats (NaN payloads included); prints the first
 * difference. Returns 1 if equal. */
int tu_equal_bits_f32(const char *label, const float *a, const float *b, size_t n);

/* A fresh path "<tmpdir>/tpmoe_<tag>_<pid>_<counter>" (caller frees);
 * TMPDIR or /tmp. */
char *tu_tmp_path(const char *tag);

/* Read a whole file (caller frees); NULL on error. */
void *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *p, size_t len);

#endif /* TPM_TEST_UTIL_H */
