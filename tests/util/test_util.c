/* test_util.c - see test_util.h. */
#include "util/test_util.h"
#include "util/splitmix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t tu_seed(void) {
    const char *e = getenv("TPMOE_TEST_SEED");
    uint64_t s = e && *e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "test seed %llu (TPMOE_TEST_SEED to replay)\n", (unsigned long long)s);
    return s;
}

uint64_t tu_next(tu_rng *r) { return tu_sm_next(&r->s); }

double tu_uniform(tu_rng *r) { return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double tu_normal(tu_rng *r) {
    double u1 = tu_uniform(r), u2 = tu_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t tu_below(tu_rng *r, uint32_t n) { return n ? (uint32_t)(tu_next(r) % n) : 0; }

void tu_fill_normal(tu_rng *r, float *x, size_t n, float sd) {
    for (size_t i = 0; i < n; i++) x[i] = (float)tu_normal(r) * sd;
}

void tu_fill_bytes(tu_rng *r, void *p, size_t n) {
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)tu_next(r);
}

void tu_poison_f32(float *x, size_t n) {
    uint32_t u = 0xFFC0DEADu;
    for (size_t i = 0; i < n; i++) memcpy(&x[i], &u, 4);
}

size_t tu_compare_f32(const char *label, const float *a, const float *b, size_t n, float atol, float rtol,
                      size_t *worst) {
    size_t bad = 0, wi = 0;
    double wd = -1.0;
    for (size_t i = 0; i < n; i++) {
        int na = isnan(a[i]), nb = isnan(b[i]);
        double d = (na || nb) ? (na && nb ? 0.0 : INFINITY) : fabs((double)a[i] - (double)b[i]);
        if (d > wd) {
            wd = d;
            wi = i;
        }
        if (d > atol + rtol * fabs((double)b[i]) || (na != nb)) {
            if (bad < 5)
                fprintf(stderr, "%s: [%zu] got %.9g want %.9g (|diff| %.3g)\n", label ? label : "compare", i,
                        (double)a[i], (double)b[i], d);
            bad++;
        }
    }
    if (worst) *worst = wi;
    return bad;
}

int tu_equal_bits_f32(const char *label, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], 4)) {
            fprintf(stderr, "%s: [%zu] %.9g != %.9g (bits differ)\n", label ? label : "equal", i, (double)a[i],
                    (double)b[i]);
            return 0;
        }
    }
    return 1;
}

char *tu_tmp_path(const char *tag) {
    static unsigned counter;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t len = strlen(dir) + strlen(tag) + 64;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/tpmoe_%s_%d_%u", dir, tag, (int)getpid(), counter++);
    return p;
}

void *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)n + 1);
            if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            }
            if (buf) *len = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

int tu_write_file(const char *path, const void *p, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}
