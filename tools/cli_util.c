/* cli_util.c - small helpers shared by the tool's subcommands. */
#include "cli.h"
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tpmoe %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'tpmoe %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

int cli_fail(const char *cmd, const char *what, tpm_status st, const char *detail) {
    fprintf(stderr, "tpmoe %s: %s failed: %s%s%s\n", cmd, what, tpm_status_string(st),
            (detail && *detail) ? ": " : "", detail ? detail : "");
    return 1;
}

int cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
    int64_t v;
    if (tpm_parse_i64(s, &v) || v < lo || v > hi) return -1;
    *out = (long long)v;
    return 0;
}

int cli_parse_size(const char *s, int64_t *out) { return tpm_parse_size(s, out); }

int cli_parse_size_list(const char *s, int64_t *out, int max) {
    const char *colon = strchr(s, ':');
    if (colon) {
        char a[64];
        size_t n = (size_t)(colon - s);
        if (n == 0 || n >= sizeof a) return -1;
        memcpy(a, s, n);
        a[n] = '\0';
        int64_t lo, hi;
        if (tpm_parse_size(a, &lo) || tpm_parse_size(colon + 1, &hi) || lo <= 0 || hi < lo) return -1;
        int k = 0;
        for (int64_t v = lo; v <= hi && k < max; v *= 2) out[k++] = v;
        return k;
    }
    int k = 0;
    char buf[1024];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (k >= max || tpm_parse_size(tok, &out[k])) return -1;
        k++;
    }
    return k;
}

int cli_parse_choice(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

int cli_parse_algo(const char *s, tpm_algo *out) {
    /* indexed by tpm_algo */
    static const char *const names[] = {"auto", "oneshot", "twoshot"};
    int k = cli_parse_choice(s, names, 3);
    if (k < 0) return -1;
    *out = (tpm_algo)k;
    return 0;
}

uint64_t cli_rng_next(cli_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double cli_rng_uniform(cli_rng *r) { return (double)(cli_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double cli_rng_normal(cli_rng *r) {
    double u1 = cli_rng_uniform(r), u2 = cli_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(const double *v, int n) {
    if (n <= 0) return NAN;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = (n & 1) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

int cli_run_plot(const char *cmd, const char *script, const char *json, const char *png,
                 int png_first) {
    char exe[1024], rel[1200], local[600], line[4096];
    const char *cands[3] = {getenv("TPMOE_PLOT_SCRIPT"), local, NULL};
    snprintf(local, sizeof local, "bench/%s", script);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(rel, sizeof rel, "%s/../bench/%s", exe, script);
        cands[2] = rel;
    }
    for (int i = 0; i < 3; i++) {
        if (!cands[i] || !*cands[i] || access(cands[i], R_OK)) continue;
        if (strchr(cands[i], '\'') || strchr(json, '\'') || strchr(png, '\'')) {
            fprintf(stderr, "tpmoe %s: plot skipped: a path holds a quote character\n", cmd);
            return 1;
        }
        int len = snprintf(line, sizeof line, "python3 '%s' '%s' '%s'", cands[i],
                           png_first ? png : json, png_first ? json : png);
        if (len < 0 || (size_t)len >= sizeof line) {
            fprintf(stderr, "tpmoe %s: plot skipped: the paths are too long\n", cmd);
            return 1;
        }
        int rc = system(line);
        if (rc != 0) {
            fprintf(stderr, "tpmoe %s: plot failed (exit status %d): %s\n", cmd, rc, line);
            return 1;
        }
        return 0;
    }
    fprintf(stderr, "tpmoe %s: bench/%s not found (set TPMOE_PLOT_SCRIPT); no plot\n", cmd, script);
    return 1;
}
