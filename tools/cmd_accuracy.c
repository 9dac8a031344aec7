/*
 * cmd_accuracy.c - `tpmoe accuracy`: how much a lossy all-reduce codec moves
 * the hidden state of a residual MoE stack. L blocks of
 *   h <- h + AllReduce_codec(MoE_l(RMSNorm(h)))      (RMSNorm weight 1, eps 1e-6)
 * run over tp x ep rank threads with random weights (layer l of the weights
 * `gen-weights --seed S` writes), once exactly (codec none) and once per
 * codec, on the same input. Prints each layer's relative error of h against
 * the exact run and the final hidden state's cosine similarity and relative
 * error, for Gaussian, heavy-tailed (Student-t, 3 dof) and outlier-channel
 * (every 97th channel x30) inputs, and how often a token's set of experts
 * changed (a flipped expert turns a small codec error into a large one). docs/accuracy.md records a
 * run.
 */
#include "cli.h"
#include "internal.h"
#include "model/moe_weights.h"
#include "moe/moe_internal.h"
#include "numeric.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "accuracy"
#define MAX_RANKS 64
#define MAX_LAYERS 64
#define MAX_CODECS 16

static void help(void) {
    printf("usage: tpmoe accuracy [options]\n"
           "Residual stack of L MoE blocks (RMSNorm -> MoE -> all-reduce with a codec -> residual "
           "add),\n"
           "run exactly and once per codec; per-layer relative error of the hidden state, final "
           "cosine\n"
           "similarity and relative error against the exact run.\n\n"
           "  --preset P     model preset (default m3-mini)\n"
           "  --layers L     blocks (default 4, at most %d)\n"
           "  --tp N --ep M  ranks as threads (default 2, 1; at least 2 ranks in all)\n"
           "  --codecs LIST  comma list (default none,int8,int6,int4,fp8,int4_h,int6_h)\n"
           "  --tokens B     tokens (default 32)\n"
           "  --data D       gaussian (default) | heavy | outlier | all\n"
           "  --dtype D      bf16 (default) | fp16 | fp32\n"
           "  --fuse-shared F auto (default) | 0 | 1\n"
           "  --seed S       weights and input seed (default 1)\n",
           MAX_LAYERS);
}

enum { DATA_GAUSS = 0, DATA_HEAVY = 1, DATA_OUTLIER = 2, DATA_N = 3 };
static const char *const data_names[DATA_N] = {"gaussian", "heavy", "outlier"};
static const char *const data_desc[DATA_N] = {"N(0,1)", "Student-t 3 dof",
                                              "N(0,1), every 97th channel x30"};

typedef struct stack_job {
    tpm_moe_t *moe; /* [layers] of this rank */
    tpm_comm_t comm;
    int layers, hidden, record;
    size_t T;
    tpm_dtype dt;
    tpm_codec codec;
    tpm_algo algo;
    const void *h0;
    float *rec;   /* rank 0: [layers x T x H] hidden state after each block */
    int32_t *ids; /* rank 0: [layers x T x k] expert ids of each block */
    int top_k;
    tpm_status st;
    char err[TPM_ERRMSG_LEN];
} stack_job;

/* xn = h / sqrt(mean(h^2) + eps) per token (fp32, weight 1). */
static void rmsnorm(const void *h, void *xn, size_t T, int H, tpm_dtype dt) {
    for (size_t t = 0; t < T; t++) {
        float ss = 0.0f;
        for (int i = 0; i < H; i++) {
            float v = tpm_load_f32(h, (int)dt, t * (size_t)H + (size_t)i);
            ss += v * v;
        }
        float r = 1.0f / sqrtf(ss / (float)H + 1e-6f);
        for (int i = 0; i < H; i++) {
            size_t k = t * (size_t)H + (size_t)i;
            tpm_store_f32(xn, (int)dt, k, tpm_load_f32(h, (int)dt, k) * r);
        }
    }
}

static void *stack_main(void *arg) {
    stack_job *j = arg;
    const size_t n = j->T * (size_t)j->hidden, bytes = n * tpm_dtype_size(j->dt);
    void *h = malloc(bytes), *xn = malloc(bytes), *y = malloc(bytes);
    j->st = TPM_OK;
    if (!h || !xn || !y) {
        j->st = TPM_ERR_NO_MEMORY;
        snprintf(j->err, sizeof j->err, "out of memory");
        goto out;
    }
    memcpy(h, j->h0, bytes);
    for (int l = 0; l < j->layers; l++) {
        rmsnorm(h, xn, j->T, j->hidden, j->dt);
        j->st = tpm_moe_set_allreduce(j->moe[l], j->codec, j->algo);
        if (j->st == TPM_OK) j->st = tpm_moe_forward(j->moe[l], j->comm, xn, y, j->T, j->dt, NULL);
        if (j->st != TPM_OK) {
            snprintf(j->err, sizeof j->err, "layer %d: %s", l, tpm_moe_last_error(j->moe[l]));
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            tpm_store_f32(h, (int)j->dt, i,
                          tpm_load_f32(h, (int)j->dt, i) + tpm_load_f32(y, (int)j->dt, i));
        if (j->record) {
            for (size_t i = 0; i < n; i++)
                j->rec[(size_t)l * n + i] = tpm_load_f32(h, (int)j->dt, i);
            tpm_moe_last_routing(j->moe[l], j->ids + (size_t)l * j->T * (size_t)j->top_k, NULL,
                                 NULL, j->T);
        }
    }
out:
    free(h);
    free(xn);
    free(y);
    return NULL;
}

static void gen_input(int kind, uint64_t seed, size_t T, int H, tpm_dtype dt, void *h) {
    cli_rng r = {seed ^ (0xacc0ull + (uint64_t)kind)};
    for (size_t t = 0; t < T; t++)
        for (int i = 0; i < H; i++) {
            double v = cli_rng_normal(&r);
            if (kind == DATA_HEAVY) {
                double c = 0;
                for (int d = 0; d < 3; d++) {
                    double z = cli_rng_normal(&r);
                    c += z * z;
                }
                v = v / sqrt(c / 3.0);
            } else if (kind == DATA_OUTLIER && i % 97 == 0) {
                v *= 30.0;
            }
            tpm_store_f32(h, (int)dt, t * (size_t)H + (size_t)i, (float)v);
        }
}

/* Run the whole stack once on every rank with one codec. */
static int run_stack(tpm_moe_t (*moes)[MAX_LAYERS], tpm_comm_t *comms, int world, int layers, int H,
                     int k, size_t T, tpm_dtype dt, tpm_codec codec, const void *h0, float *rec,
                     int32_t *ids) {
    stack_job jobs[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        jobs[r] = (stack_job){.moe = moes[r],
                              .comm = comms[r],
                              .layers = layers,
                              .hidden = H,
                              .record = r == 0,
                              .T = T,
                              .dt = dt,
                              .codec = codec,
                              .algo = codec == TPM_CODEC_NONE ? TPM_ALGO_AUTO : TPM_ALGO_TWOSHOT,
                              .h0 = h0,
                              .rec = rec,
                              .ids = ids,
                              .top_k = k,
                              .st = TPM_OK};
        pthread_create(&th[r], NULL, stack_main, &jobs[r]);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < world; r++)
        if (jobs[r].st != TPM_OK)
            return cli_fail(CMD, tpm_codec_name(codec), jobs[r].st, jobs[r].err);
    return 0;
}

/* Per-layer relative error of a vs b ([L x n]), then the final cosine
 * similarity and relative error. */
static void print_errors(const float *run, const float *exact, int L, size_t n) {
    double cs = 0, rel = 0;
    for (int l = 0; l < L; l++) {
        const float *a = run + (size_t)l * n, *b = exact + (size_t)l * n;
        double num = 0, den = 0, ab = 0, aa = 0;
        for (size_t i = 0; i < n; i++) {
            double da = a[i], db = b[i];
            num += (da - db) * (da - db);
            den += db * db;
            ab += da * db;
            aa += da * da;
        }
        rel = sqrt(num / (den > 0 ? den : 1));
        cs = ab / sqrt((aa > 0 ? aa : 1) * (den > 0 ? den : 1));
        printf("   %9.3e", rel);
    }
    printf("  %13.9f  %13.3e", cs, rel);
}

/* Fraction of (layer, token) whose set of experts differs between runs. */
static double route_diff(const int32_t *a, const int32_t *b, int L, size_t T, int k) {
    size_t diff = 0;
    for (size_t lt = 0; lt < (size_t)L * T; lt++) {
        const int32_t *x = a + lt * (size_t)k, *y = b + lt * (size_t)k;
        int same = 1;
        for (int i = 0; i < k && same; i++) {
            int found = 0;
            for (int j = 0; j < k; j++)
                found |= x[i] == y[j];
            same = found;
        }
        diff += !same;
    }
    return (double)diff / (double)((size_t)L * T);
}

int cmd_accuracy(int argc, char **argv) {
    const char *preset = "m3-mini", *codec_list = "none,int8,int6,int4,fp8,int4_h,int6_h";
    long long layers = 4, tp = 2, ep = 1, tokens = 32, seed = 1;
    int data = DATA_GAUSS, all_data = 0, fuse = -1;
    tpm_dtype dt = TPM_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return 0;
        }
        if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--preset"))
            preset = v;
        else if (!strcmp(a, "--codecs"))
            codec_list = v;
        else if (!strcmp(a, "--layers")) {
            if (cli_parse_int(v, 1, MAX_LAYERS, &layers))
                return cli_usage_error(CMD, "--layers '%s': want 1..%d", v, MAX_LAYERS);
        } else if (!strcmp(a, "--tp")) {
            if (cli_parse_int(v, 1, MAX_RANKS, &tp))
                return cli_usage_error(CMD, "--tp '%s': want 1..%d", v, MAX_RANKS);
        } else if (!strcmp(a, "--ep")) {
            if (cli_parse_int(v, 1, MAX_RANKS, &ep))
                return cli_usage_error(CMD, "--ep '%s': want 1..%d", v, MAX_RANKS);
        } else if (!strcmp(a, "--tokens")) {
            if (cli_parse_int(v, 1, 1 << 16, &tokens))
                return cli_usage_error(CMD, "--tokens '%s': want 1..65536", v);
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, INT64_MAX, &seed))
                return cli_usage_error(CMD, "--seed '%s': want >= 0", v);
        } else if (!strcmp(a, "--dtype")) {
            if (tpm_dtype_parse(v, &dt) != TPM_OK)
                return cli_usage_error(CMD, "--dtype '%s': want bf16, fp16 or fp32", v);
        } else if (!strcmp(a, "--fuse-shared")) {
            if (!strcmp(v, "auto"))
                fuse = -1;
            else if (!strcmp(v, "0") || !strcmp(v, "1"))
                fuse = v[0] - '0';
            else
                return cli_usage_error(CMD, "--fuse-shared '%s': want auto, 0 or 1", v);
        } else if (!strcmp(a, "--data")) {
            int k;
            for (k = 0; k < DATA_N && strcmp(v, data_names[k]); k++) {
            }
            if (!strcmp(v, "all"))
                all_data = 1;
            else if (k == DATA_N)
                return cli_usage_error(CMD, "--data '%s': want gaussian, heavy, outlier or all", v);
            else
                data = k;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    const tpm_preset *p = tpm_preset_find(preset);
    if (!p) return cli_usage_error(CMD, "--preset '%s': unknown", preset);
    const int world = (int)(tp * ep);
    if (world < 2)
        return cli_usage_error(CMD, "--tp x --ep must be >= 2: one rank has no all-reduce");
    if (world > MAX_RANKS)
        return cli_usage_error(CMD, "--tp x --ep = %d ranks > %d", world, MAX_RANKS);
    if (p->inter % tp)
        return cli_usage_error(CMD, "--tp %lld does not divide the intermediate %d", tp, p->inter);
    if (p->n_experts % ep)
        return cli_usage_error(CMD, "--ep %lld does not divide the %d experts", ep, p->n_experts);
    tpm_codec codecs[MAX_CODECS];
    int nc = 0;
    {
        char buf[256];
        if (strlen(codec_list) >= sizeof buf)
            return cli_usage_error(CMD, "--codecs: list too long");
        strcpy(buf, codec_list);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            if (nc == MAX_CODECS || tpm_codec_parse(tok, &codecs[nc]) != TPM_OK)
                return cli_usage_error(
                    CMD,
                    "--codecs: '%s' is not a codec (none, int8, int6, int4, fp8, int4_h, int6_h)",
                    tok);
            nc++;
        }
        if (nc == 0) return cli_usage_error(CMD, "--codecs: empty list");
    }

    const int L = (int)layers, H = p->hidden;
    const size_t T = (size_t)tokens, n = T * (size_t)H;
    tpm_comm_t comms[MAX_RANKS] = {0};
    tpm_moe_t moes[MAX_RANKS][MAX_LAYERS], moes32[MAX_RANKS][MAX_LAYERS];
    memset(moes, 0, sizeof moes);
    memset(moes32, 0, sizeof moes32);
    const int base = dt != TPM_DTYPE_FP32; /* also run fp32 activations as a baseline */
    float *exact = malloc((size_t)L * n * sizeof *exact),
          *run = malloc((size_t)L * n * sizeof *run);
    void *h0 = malloc(n * tpm_dtype_size(dt));
    float *h0_32 = malloc(n * sizeof(float));
    const size_t nk = (size_t)L * T * (size_t)p->top_k;
    int32_t *ids_exact = malloc(nk * sizeof(int32_t)), *ids_run = malloc(nk * sizeof(int32_t));
    int ret = 1;
    tpm_status st;
    if (!exact || !run || !h0 || !h0_32 || !ids_exact || !ids_run) goto done;

    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.dtype = dt;
    cfg.model = p->name;
    cfg.tp = (int32_t)tp;
    cfg.ep = (int32_t)ep;
    st = tpm_comm_init_all(comms, world, NULL, &cfg);
    if (st != TPM_OK) {
        ret = cli_fail(CMD, "communicator init", st, tpm_last_error());
        goto done;
    }
    double t0 = tpm_now_s();
    for (int l = 0; l < L; l++) {
        tpm_moe_weights w;
        st = tpm_moe_weights_random_layer(p, (uint64_t)seed, l, p->routed_format, &w);
        if (st != TPM_OK) {
            ret = cli_fail(CMD, "random weights", st, tpm_last_error());
            goto done;
        }
        for (int r = 0; r < world && st == TPM_OK; r++) {
            tpm_moe_config mc = TPM_MOE_CONFIG_INIT;
            mc.preset = p->name;
            mc.layer = l;
            mc.tp_size = (int32_t)tp;
            mc.ep_size = (int32_t)ep;
            mc.fuse_shared = fuse;
            mc.backend = TPM_BACKEND_CPU;
            mc.dtype = dt;
            st = tpm_moe_create_from_weights(&moes[r][l], &mc, comms[r], &w);
            mc.dtype = TPM_DTYPE_FP32;
            if (st == TPM_OK && base)
                st = tpm_moe_create_from_weights(&moes32[r][l], &mc, comms[r], &w);
        }
        tpm_moe_weights_free(&w);
        if (st != TPM_OK) {
            ret = cli_fail(CMD, "MoE layer create", st, tpm_last_error());
            goto done;
        }
    }
    printf(
        "accuracy: preset %s, %d layers (weights: seed %lld, layer l), tp %lld x ep %lld ranks, "
        "%zu "
        "tokens %s, RMSNorm(w=1, eps=1e-6) -> MoE -> all-reduce(codec, two-shot) -> residual add "
        "(setup %.1f s)\n",
        p->name, L, seed, tp, ep, T, tpm_dtype_name(dt), tpm_now_s() - t0);
    for (int d = 0; d < DATA_N; d++) {
        if (!all_data && d != data) continue;
        gen_input(d, (uint64_t)seed, T, H, dt, h0);
        if (run_stack(moes, comms, world, L, H, p->top_k, T, dt, TPM_CODEC_NONE, h0, exact,
                      ids_exact))
            goto done;
        printf("\ndata %s (%s): relative error of the hidden state vs the exact run\n",
               data_names[d], data_desc[d]);
        printf("  %-7s", "codec");
        for (int l = 0; l < L; l++)
            printf("   layer %-3d", l + 1);
        printf("  final cos sim  final rel err  routing changed\n");
        if (base)
            printf(
                "  (fp32*: the same stack with fp32 activations, exact: the %s rounding itself)\n",
                tpm_dtype_name(dt));
        if (base) {
            for (size_t i = 0; i < n; i++)
                h0_32[i] = tpm_load_f32(h0, (int)dt, i);
            if (run_stack(moes32, comms, world, L, H, p->top_k, T, TPM_DTYPE_FP32, TPM_CODEC_NONE,
                          h0_32, run, ids_run))
                goto done;
            printf("  %-7s", "fp32*");
            print_errors(run, exact, L, n);
            printf("  %14.1f%%\n", 100.0 * route_diff(ids_run, ids_exact, L, T, p->top_k));
        }
        for (int c = 0; c < nc; c++) {
            if (run_stack(moes, comms, world, L, H, p->top_k, T, dt, codecs[c], h0, run, ids_run))
                goto done;
            printf("  %-7s", tpm_codec_name(codecs[c]));
            print_errors(run, exact, L, n);
            printf("  %14.1f%%\n", 100.0 * route_diff(ids_run, ids_exact, L, T, p->top_k));
        }
    }
    ret = 0;
done:
    for (int r = 0; r < world; r++)
        for (int l = 0; l < L; l++) {
            tpm_moe_destroy(moes[r][l]);
            tpm_moe_destroy(moes32[r][l]);
        }
    for (int r = 0; r < world; r++)
        if (comms[r]) tpm_comm_destroy(comms[r]);
    free(exact);
    free(run);
    free(h0);
    free(h0_32);
    free(ids_exact);
    free(ids_run);
    return ret;
}
