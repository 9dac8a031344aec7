/*
 * splitmix.h - the fixed-seed data generator several tests share on a bare
 * uint64_t state: splitmix64, a uniform on the open interval (0, 1), Box-Muller
 * normals and Student-t with 3 degrees of freedom.
 *
 * Header-only (static inline) so that tests/golden/gen_codec_golden.c, which is
 * built by hand against the library alone, can include it too: the golden
 * inputs depend on these exact sequences, change nothing here without
 * regenerating them (tests/golden/README.md).
 */
#ifndef TPM_TEST_SPLITMIX_H
#define TPM_TEST_SPLITMIX_H

#include <math.h>
#include <stdint.h>

static inline uint64_t tu_sm_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* (0, 1): never 0, so log() below is finite. */
static inline double tu_sm_unif(uint64_t *s) {
    return ((double)(tu_sm_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static inline double tu_sm_gauss(uint64_t *s) {
    double u = tu_sm_unif(s), v = tu_sm_unif(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Student-t, 3 degrees of freedom (heavy-tailed). */
static inline double tu_sm_t3(uint64_t *s) {
    double chi = 0;
    for (int k = 0; k < 3; k++) {
        double z = tu_sm_gauss(s);
        chi += z * z;
    }
    return tu_sm_gauss(s) / sqrt(chi / 3.0);
}

#endif /* TPM_TEST_SPLITMIX_H */
