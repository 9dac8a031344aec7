/*
 * cmd_allreduce.c - `tpmoe allreduce`: run the CPU all-reduce across N ranks
 * (threads, or forked processes over shared memory), validate every rank's
 * output against an fp64 sum of the inputs, check that all ranks hold the same
 * bits, and time it.
 *
 *   tpmoe allreduce --backend cpu --ranks 8 [--processes] --codec int4 \
 *       --dtype bf16 --bytes 1M [--algo auto|oneshot|twoshot] [--iters K]
 *       [--seed S] [--data gaussian|heavy|outlier|all]
 *
 * --codec takes a comma list; --data all prints the relative RMS error of
 * every codec on Gaussian, heavy-tailed (Student-t, 3 dof) and outlier-
 * channel (every 97th channel x30) inputs side by side. Exit 1 when ranks
 * disagree, a call fails or an error exceeds the codec's bound.
 */
#include "cli.h"
#include "codec/codec.h"
#include "internal.h"
#include "numeric.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define AR_MAX_RANKS 8
#define AR_MAX_CODECS 8
#define AR_MAX_ITERS 10000
#define AR_ERRLEN 256

enum { DATA_GAUSSIAN, DATA_HEAVY, DATA_OUTLIER, DATA_COUNT };
static const char *const data_names[DATA_COUNT] = {"gaussian", "heavy", "outlier"};

/* Relative RMS error bound of one run: the codec's two-shot bound from
 * docs/codecs.md (tpm_codec_allreduce_error_bound: the worst of Gaussian,
 * Student-t(3) and outlier data up to 8 ranks, with margin) plus one
 * rounding of the output to the dtype. */
static double dtype_bound(tpm_dtype dt) {
    return dt == TPM_DTYPE_BF16 ? 0x1p-8 : dt == TPM_DTYPE_FP16 ? 0x1p-11 : 1e-6;
}

static double run_bound(tpm_codec c, tpm_dtype dt) {
    return (c == TPM_CODEC_NONE ? 0.0 : tpm_codec_allreduce_error_bound(c)) + dtype_bound(dt);
}

typedef struct ar_opts {
    int ranks, processes, iters, ncodecs, data_mask;
    tpm_codec codecs[AR_MAX_CODECS]; /* TPM_CODEC_DEFAULT: from the config */
    tpm_dtype dtype;
    tpm_algo algo;
    int64_t bytes;
    uint64_t seed;
} ar_opts;

/* Results of one run, in memory shared with forked ranks. */
typedef struct ar_shared {
    int32_t done[AR_MAX_RANKS];
    int32_t status[AR_MAX_RANKS];
    int32_t stable[AR_MAX_RANKS]; /* every iteration gave the same bits */
    uint64_t hash[AR_MAX_RANKS];
    int32_t plan_algo, plan_codec;
    char err[AR_MAX_RANKS][AR_ERRLEN];
    /* then: double time[ranks][iters]; uint8_t out0[bytes] */
} ar_shared;

typedef struct ar_run {
    const ar_opts *o;
    tpm_codec codec;
    int data;
    size_t count;
    ar_shared *sh;
    double *times;
    uint8_t *out0;
    tpm_comm_t comm[AR_MAX_RANKS];
} ar_run;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: tpmoe allreduce [options]\n"
        "  Run the CPU all-reduce on N ranks, validate against an fp64 sum, check that\n"
        "  every rank holds the same bits, and time it (median over iterations).\n\n"
        "  --backend cpu          backend (only cpu here)\n"
        "  --ranks N              ranks, 1..8 (default 2)\n"
        "  --processes            ranks are forked processes over shared memory\n"
        "                         (default: threads of this process)\n"
        "  --codec X[,Y..]        none|int8|int6|int4|fp8|int4_h|int6_h (default: the\n"
        "                         resolved config, TPMOE_QUICK_REDUCE_QUANTIZATION, which\n"
        "                         applies inside the quant window only; a codec named\n"
        "                         here applies at every size)\n"
        "  --dtype T              bf16|fp16|fp32 (default bf16)\n"
        "  --bytes S              message bytes per rank, K/M/G suffixes (default 1M)\n"
        "  --algo A               auto|oneshot|twoshot (default auto: dispatch table)\n"
        "  --iters K              timed calls (default 10)\n"
        "  --seed S               input seed (default 1)\n"
        "  --data D               gaussian|heavy|outlier|all (default gaussian)\n"
        "exit: 0 ok, 1 ranks disagree / error above the codec's bound / a call failed, 2 usage\n");
}

/* MARK: data */
static double gen_value(cli_rng *r, int data, size_t i) {
    double z = cli_rng_normal(r);
    if (data == DATA_HEAVY) {
        double a = cli_rng_normal(r), b = cli_rng_normal(r), c = cli_rng_normal(r);
        double chi = (a * a + b * b + c * c) / 3.0;
        return z / sqrt(chi > 1e-12 ? chi : 1e-12);
    }
    if (data == DATA_OUTLIER && i % 97 == 0) return 30.0 * z;
    return z;
}

static void gen_input(const ar_run *run, int rank, void *buf) {
    cli_rng r = {run->o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 7919u +
                 (uint64_t)run->data * 104729u};
    for (size_t i = 0; i < run->count; i++)
        tpm_store_f32(buf, (int)run->o->dtype, i, (float)gen_value(&r, run->data, i));
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* MARK: one rank */
static void rank_work(ar_run *run, int rank, tpm_comm_t comm) {
    const ar_opts *o = run->o;
    ar_shared *sh = run->sh;
    size_t bytes = (size_t)o->bytes;
    uint8_t *in = malloc(bytes), *out = malloc(bytes);
    sh->stable[rank] = 1;
    if (!in || !out) {
        sh->status[rank] = TPM_ERR_NO_MEMORY;
        snprintf(sh->err[rank], AR_ERRLEN, "out of memory");
        goto done;
    }
    gen_input(run, rank, in);
    if (rank == 0) {
        tpm_algo a;
        tpm_codec c;
        if (tpm_allreduce_plan(comm, run->count, o->dtype, TPM_CODEC_DEFAULT, &a, &c) == TPM_OK) {
            sh->plan_algo = o->algo != TPM_ALGO_AUTO ? (int)o->algo : (int)a;
            sh->plan_codec = c;
        }
    }
    for (int it = 0; it < o->iters; it++) {
        memset(out, 0xff, bytes); /* poison: NaN in every dtype */
        double t0 = tpm_now_s();
        tpm_status st =
            tpm_allreduce_ex(comm, in, out, run->count, o->dtype, TPM_CODEC_DEFAULT, o->algo, NULL);
        double t1 = tpm_now_s();
        if (st != TPM_OK) {
            sh->status[rank] = st;
            snprintf(sh->err[rank], AR_ERRLEN, "%s", tpm_comm_last_error(comm));
            break;
        }
        run->times[(size_t)rank * (size_t)o->iters + (size_t)it] = t1 - t0;
        uint64_t h = hash_bytes(out, bytes);
        if (it == 0) {
            sh->hash[rank] = h;
            if (rank == 0) memcpy(run->out0, out, bytes);
        } else if (h != sh->hash[rank]) {
            sh->stable[rank] = 0;
        }
    }
done:
    free(in);
    free(out);
    sh->done[rank] = 1;
}

typedef struct thread_arg {
    ar_run *run;
    int rank;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = (thread_arg *)p;
    rank_work(a->run, a->rank, a->run->comm[a->rank]);
    return NULL;
}

static tpm_config run_config(const ar_run *run) {
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.codec = run->codec;
    /* A codec named on the command line applies at every size: the policy's
     * quant window (TPMOE_QUICK_REDUCE_MIN/MAX_BYTES) governs the default. */
    if (run->codec != TPM_CODEC_DEFAULT) cfg.quant_min_bytes = 0;
    cfg.dtype = run->o->dtype;
    return cfg;
}

static int run_threads(ar_run *run) {
    const int n = run->o->ranks;
    tpm_config cfg = run_config(run);
    tpm_status st = tpm_comm_init_all(run->comm, n, NULL, &cfg);
    if (st != TPM_OK) return cli_fail("allreduce", "tpm_comm_init_all", st, tpm_last_error());
    pthread_t th[AR_MAX_RANKS];
    thread_arg args[AR_MAX_RANKS];
    int started = 0;
    for (int r = 0; r < n; r++) {
        args[r].run = run;
        args[r].rank = r;
        if (pthread_create(&th[r], NULL, thread_main, &args[r]) != 0) break;
        started++;
    }
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < n; r++)
        tpm_comm_destroy(run->comm[r]);
    if (started < n) {
        fprintf(stderr, "tpmoe allreduce: could not start %d threads\n", n);
        return 1;
    }
    return 0;
}

static int run_processes(ar_run *run) {
    const int n = run->o->ranks;
    char dir[] = "/tmp/tpmoe-ar-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("tpmoe allreduce: mkdtemp");
        return 1;
    }
    pid_t pids[AR_MAX_RANKS];
    int forked = 0;
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) break;
        if (pid == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("TPMOE_RANK", v, 1);
            snprintf(v, sizeof v, "%d", n);
            setenv("TPMOE_WORLD_SIZE", v, 1);
            setenv("TPMOE_RENDEZVOUS", dir, 1);
            tpm_config cfg = run_config(run);
            tpm_comm_t c = NULL;
            tpm_status st = tpm_comm_init(&c, &cfg);
            if (st != TPM_OK) {
                run->sh->status[r] = st;
                snprintf(run->sh->err[r], AR_ERRLEN, "init: %s", tpm_last_error());
                run->sh->done[r] = 1;
                _exit(1);
            }
            rank_work(run, r, c);
            tpm_comm_destroy(c);
            _exit(0);
        }
        pids[forked++] = pid;
    }
    int failed = forked < n;
    for (int k = 0; k < forked; k++) {
        int ws = 0;
        if (waitpid(pids[k], &ws, 0) < 0 || (WIFSIGNALED(ws))) {
            fprintf(stderr, "tpmoe allreduce: rank %d process ended by signal %d\n", k,
                    WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
            failed = 1;
        }
    }
    rmdir(dir);
    if (forked < n) fprintf(stderr, "tpmoe allreduce: could only fork %d of %d ranks\n", forked, n);
    return failed;
}

/* MARK: one run = (codec, data) */
typedef struct ar_result {
    double rel_rms, max_abs, bound, time_s;
    int identical, ok, ran;
    tpm_algo algo;
    tpm_codec codec;
} ar_result;

static int execute(const ar_opts *o, tpm_codec codec, int data, ar_result *res) {
    memset(res, 0, sizeof *res);
    size_t es = tpm_dtype_size(o->dtype);
    size_t bytes = (size_t)o->bytes;
    size_t hdr = (sizeof(ar_shared) + 63) / 64 * 64;
    size_t tbytes = (size_t)o->ranks * (size_t)o->iters * sizeof(double);
    size_t total = hdr + tbytes + bytes;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("tpmoe allreduce: mmap");
        return 1;
    }
    ar_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.codec = codec;
    run.data = data;
    run.count = bytes / es;
    run.sh = (ar_shared *)mem;
    run.times = (double *)((uint8_t *)mem + hdr);
    run.out0 = (uint8_t *)mem + hdr + tbytes;
    run.sh->plan_algo = -1;
    run.sh->plan_codec = -1;
    int rc = o->processes ? run_processes(&run) : run_threads(&run);

    int all_ok = rc == 0;
    for (int r = 0; r < o->ranks; r++) {
        if (run.sh->status[r] != TPM_OK || !run.sh->done[r]) {
            fprintf(stderr, "tpmoe allreduce: rank %d: %s: %s\n", r,
                    run.sh->done[r] ? tpm_status_string((tpm_status)run.sh->status[r])
                                    : "did not finish",
                    run.sh->err[r]);
            all_ok = 0;
        }
    }
    res->algo = (tpm_algo)run.sh->plan_algo;
    res->codec = (tpm_codec)run.sh->plan_codec;
    if (all_ok) {
        res->ran = 1;
        res->identical = 1;
        for (int r = 0; r < o->ranks; r++)
            if (run.sh->hash[r] != run.sh->hash[0] || !run.sh->stable[r]) res->identical = 0;
        /* fp64 reference from regenerated inputs */
        double *ref = calloc(run.count, sizeof *ref);
        void *tmp = malloc(bytes);
        if (!ref || !tmp) {
            free(ref);
            free(tmp);
            munmap(mem, total);
            fprintf(stderr, "tpmoe allreduce: out of memory\n");
            return 1;
        }
        for (int r = 0; r < o->ranks; r++) {
            gen_input(&run, r, tmp);
            for (size_t i = 0; i < run.count; i++)
                ref[i] += (double)tpm_load_f32(tmp, (int)o->dtype, i);
        }
        double se = 0, sr = 0, ma = 0;
        for (size_t i = 0; i < run.count; i++) {
            double e = (double)tpm_load_f32(run.out0, (int)o->dtype, i) - ref[i];
            se += e * e;
            sr += ref[i] * ref[i];
            if (!(fabs(e) <= ma)) ma = fabs(e); /* NaN propagates */
        }
        free(ref);
        free(tmp);
        res->rel_rms = sr > 0 ? sqrt(se / sr) : sqrt(se);
        res->max_abs = ma;
        double *per_iter = malloc((size_t)o->iters * sizeof *per_iter);
        if (per_iter) {
            for (int it = 0; it < o->iters; it++) {
                double m = 0;
                for (int r = 0; r < o->ranks; r++) {
                    double t = run.times[(size_t)r * (size_t)o->iters + (size_t)it];
                    if (t > m) m = t;
                }
                per_iter[it] = m;
            }
            res->time_s = cli_median(per_iter, o->iters);
            free(per_iter);
        }
        tpm_codec applied = res->codec == (tpm_codec)-1 ? TPM_CODEC_NONE : res->codec;
        res->bound = run_bound(applied, o->dtype);
        res->ok = res->identical && isfinite(res->rel_rms) && res->rel_rms <= res->bound;
    }
    munmap(mem, total);
    return all_ok ? 0 : 1;
}

/* MARK: options */
static int parse_codecs(const char *s, ar_opts *o) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    o->ncodecs = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->ncodecs >= AR_MAX_CODECS || tpm_codec_parse(t, &o->codecs[o->ncodecs]) != TPM_OK)
            return -1;
        o->ncodecs++;
    }
    return o->ncodecs ? 0 : -1;
}

static int parse_opts(int argc, char **argv, ar_opts *o) {
    const char *cmd = "allreduce";
    memset(o, 0, sizeof *o);
    o->ranks = 2;
    o->iters = 10;
    o->dtype = TPM_DTYPE_BF16;
    o->algo = TPM_ALGO_AUTO;
    o->bytes = 1 << 20;
    o->seed = 1;
    o->ncodecs = 1;
    o->codecs[0] = TPM_CODEC_DEFAULT;
    o->data_mask = 1 << DATA_GAUSSIAN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--processes")) {
            o->processes = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error(cmd, "unexpected argument '%s'", a);
        if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++i];
        long long x;
        if (!strcmp(a, "--backend")) {
            if (strcmp(v, "cpu") != 0)
                return cli_usage_error(cmd, "--backend %s: this command runs the cpu backend only",
                                       v);
        } else if (!strcmp(a, "--ranks")) {
            if (cli_parse_int(v, 1, AR_MAX_RANKS, &x))
                return cli_usage_error(cmd, "--ranks %s: want 1..8", v);
            o->ranks = (int)x;
        } else if (!strcmp(a, "--codec")) {
            if (parse_codecs(v, o))
                return cli_usage_error(
                    cmd,
                    "--codec %s: want a comma list of none, int8, int6, int4, fp8, "
                    "int4_h, int6_h (at most %d)",
                    v, AR_MAX_CODECS);
        } else if (!strcmp(a, "--dtype")) {
            if (tpm_dtype_parse(v, &o->dtype) != TPM_OK)
                return cli_usage_error(cmd, "--dtype %s: want bf16, fp16 or fp32", v);
        } else if (!strcmp(a, "--bytes")) {
            if (cli_parse_size(v, &o->bytes) || o->bytes <= 0 || o->bytes > ((int64_t)1 << 32))
                return cli_usage_error(cmd, "--bytes %s: want a size from 1 to 4G (K/M/G suffixes)",
                                       v);
        } else if (!strcmp(a, "--algo")) {
            if (cli_parse_algo(v, &o->algo))
                return cli_usage_error(cmd, "--algo %s: want auto, oneshot or twoshot", v);
        } else if (!strcmp(a, "--iters")) {
            if (cli_parse_int(v, 1, AR_MAX_ITERS, &x))
                return cli_usage_error(cmd, "--iters %s: want 1..%d", v, AR_MAX_ITERS);
            o->iters = (int)x;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, INT64_MAX, &x))
                return cli_usage_error(cmd, "--seed %s: want an integer >= 0", v);
            o->seed = (uint64_t)x;
        } else if (!strcmp(a, "--data")) {
            o->data_mask = 0;
            if (!strcmp(v, "all")) o->data_mask = (1 << DATA_COUNT) - 1;
            for (int d = 0; d < DATA_COUNT; d++)
                if (!strcmp(v, data_names[d])) o->data_mask = 1 << d;
            if (!o->data_mask)
                return cli_usage_error(cmd, "--data %s: want gaussian, heavy, outlier or all", v);
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    if (o->bytes % (int64_t)tpm_dtype_size(o->dtype))
        return cli_usage_error(cmd, "--bytes %lld is not a multiple of the %s element size (%zu)",
                               (long long)o->bytes, tpm_dtype_name(o->dtype),
                               tpm_dtype_size(o->dtype));
    if (o->algo == TPM_ALGO_ONESHOT)
        for (int k = 0; k < o->ncodecs; k++)
            if (o->codecs[k] != TPM_CODEC_DEFAULT && o->codecs[k] != TPM_CODEC_NONE)
                return cli_usage_error(
                    cmd, "--algo oneshot is exact only: codec %s needs twoshot or auto",
                    tpm_codec_name(o->codecs[k]));
    return 0;
}

static void fmt_time(char *buf, size_t len, double s) {
    if (s < 1e-3)
        snprintf(buf, len, "%.1f us", s * 1e6);
    else
        snprintf(buf, len, "%.3f ms", s * 1e3);
}

int cmd_allreduce(int argc, char **argv) {
    ar_opts o;
    int pr = parse_opts(argc, argv, &o);
    if (pr < 0) return 0; /* --help */
    if (pr) return pr;
    size_t count = (size_t)o.bytes / tpm_dtype_size(o.dtype);
    printf("tpmoe allreduce: cpu %s, %d ranks, %s, %lld bytes (%zu values) per rank, %d iters, "
           "seed %llu\n",
           o.processes ? "processes (shared memory)" : "threads", o.ranks, tpm_dtype_name(o.dtype),
           (long long)o.bytes, count, o.iters, (unsigned long long)o.seed);
    printf("%-8s %-8s %-9s %-10s %-10s %-9s %-10s %-11s %s\n", "codec", "algo", "data", "rel_rms",
           "max_abs", "bound", "ranks", "time/call", "algbw");
    ar_result res[AR_MAX_CODECS][DATA_COUNT];
    int fail = 0;
    for (int k = 0; k < o.ncodecs; k++) {
        for (int d = 0; d < DATA_COUNT; d++) {
            if (!(o.data_mask & (1 << d))) continue;
            ar_result *r = &res[k][d];
            if (execute(&o, o.codecs[k], d, r)) {
                fail = 1;
                printf("%-8s %-8s %-9s FAILED (see above)\n", tpm_codec_name(o.codecs[k]), "-",
                       data_names[d]);
                continue;
            }
            char t[32];
            fmt_time(t, sizeof t, r->time_s);
            printf("%-8s %-8s %-9s %-10.3e %-10.3e %-9.2e %-10s %-11s %.2f GB/s%s\n",
                   tpm_codec_name(r->codec), tpm_algo_name(r->algo), data_names[d], r->rel_rms,
                   r->max_abs, r->bound, r->identical ? "identical" : "DIFFER", t,
                   r->time_s > 0 ? (double)o.bytes / r->time_s / 1e9 : 0.0,
                   r->ok ? "" : "  <- FAIL");
            if (o.codecs[k] != TPM_CODEC_DEFAULT && r->codec != o.codecs[k])
                printf("  note: codec %s requested, %s applied (outside the "
                       "TPMOE_QUICK_REDUCE_MIN/MAX_BYTES "
                       "window or not allowed with this algo)\n",
                       tpm_codec_name(o.codecs[k]), tpm_codec_name(r->codec));
            if (!r->ok) fail = 1;
        }
    }
    if (o.data_mask == (1 << DATA_COUNT) - 1) {
        printf("\nrelative RMS error, side by side:\n%-8s %-10s %-10s %-10s\n", "codec", "gaussian",
               "heavy(t3)", "outlier");
        for (int k = 0; k < o.ncodecs; k++) {
            printf("%-8s", tpm_codec_name(res[k][0].ran ? res[k][0].codec : o.codecs[k]));
            for (int d = 0; d < DATA_COUNT; d++)
                if (res[k][d].ran)
                    printf(" %-10.3e", res[k][d].rel_rms);
                else
                    printf(" %-10s", "failed");
            printf("\n");
        }
    }
    printf("%s\n", fail ? "FAIL" : "PASS");
    return fail ? 1 : 0;
}
