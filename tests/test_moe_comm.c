/* test_moe_comm.c - the MoE layer through real CPU thread communicators:
 * ranks derived from the comm, every rank's output bitwise equal, TP 2 and
 * TP 2 x EP 2 (fused and unfused) == the single-rank layer, a lossy codec
 * within its bound, and a comm that does not match the layer. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "moe/moe_internal.h"
#include "test_moe_common.h"

#define T_TOKENS 5

typedef struct job {
    const char *preset;
    const tpm_moe_weights *w;
    tpm_comm_t comm;
    int ep, fuse;
    tpm_codec codec;
    tpm_algo algo;
    const void *x;
    void *y;
    tpm_status st;
    tpm_moe_info info;
} job;

static void *rank_main(void *arg) {
    job *j = arg;
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = j->preset;
    c.ep_size = j->ep; /* tp_size, ranks: from the comm */
    c.fuse_shared = j->fuse;
    c.backend = TPM_BACKEND_CPU;
    tpm_moe_t m = NULL;
    j->st = tpm_moe_create_from_weights(&m, &c, j->comm, j->w);
    if (j->st != TPM_OK) return NULL;
    tpm_moe_get_info(m, &j->info);
    j->st = tpm_moe_set_allreduce(m, j->codec, j->algo);
    if (j->st == TPM_OK)
        j->st = tpm_moe_forward(m, j->comm, j->x, j->y, T_TOKENS, TPM_DTYPE_BF16, NULL);
    tpm_moe_destroy(m);
    return NULL;
}

/* Run the layer on `world` thread ranks; y of every rank into ys. */
static void run_threads(const char *preset, const tpm_moe_weights *w, int world, int ep, int fuse,
                        tpm_codec codec, tpm_algo algo, const void *x, void **ys, job *jobs) {
    tpm_comm_t comms[8];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.dtype = TPM_DTYPE_BF16;
    assert_int_equal(tpm_comm_init_all(comms, world, NULL, &cfg), TPM_OK);
    pthread_t th[8];
    for (int r = 0; r < world; r++) {
        jobs[r] = (job){.preset = preset,
                        .w = w,
                        .comm = comms[r],
                        .ep = ep,
                        .fuse = fuse,
                        .codec = codec,
                        .algo = algo,
                        .x = x,
                        .y = ys[r],
                        .st = TPM_OK};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < world; r++)
        tpm_comm_destroy(comms[r]);
}

static void *bf16_buf(size_t n) {
    uint16_t *p = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        p[i] = 0x7fc1; /* NaN poison */
    return p;
}

static void threads_match_single_rank(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    tmake_weights(p, 81, &w);
    const size_t n = T_TOKENS * (size_t)p->hidden;
    void *x = trand_input(82, n, TPM_DTYPE_BF16), *y1 = bf16_buf(n);
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = p->name;
    c.backend = TPM_BACKEND_CPU;
    tpm_moe_t m = NULL;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, &w), TPM_OK);
    assert_int_equal(tpm_moe_forward(m, NULL, x, y1, T_TOKENS, TPM_DTYPE_BF16, NULL), TPM_OK);
    tpm_moe_destroy(m);

    const struct { int world, ep, fuse; } shapes[] = {{2, 1, -1}, {4, 2, 0}, {4, 2, 1}, {2, 2, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        void *ys[8] = {0};
        job jobs[8];
        int world = shapes[s].world;
        for (int r = 0; r < world; r++)
            ys[r] = bf16_buf(n);
        run_threads(p->name, &w, world, shapes[s].ep, shapes[s].fuse, TPM_CODEC_NONE, TPM_ALGO_AUTO,
                    x, ys, jobs);
        for (int r = 0; r < world; r++) {
            assert_int_equal(jobs[r].st, TPM_OK);
            /* layout derived from the comm: rank = ep_rank * tp + tp_rank */
            assert_int_equal(jobs[r].info.tp_size, world / shapes[s].ep);
            assert_int_equal(jobs[r].info.tp_rank, r % (world / shapes[s].ep));
            assert_int_equal(jobs[r].info.ep_rank, r / (world / shapes[s].ep));
            assert_memory_equal(ys[r], ys[0], n * 2); /* all ranks bitwise equal */
        }
        double e = trel_rms(ys[0], y1, TPM_DTYPE_BF16, n);
        print_message("  world %d ep %d fuse %d vs 1 rank: rel rms %.3g\n", world, shapes[s].ep,
                      shapes[s].fuse, e);
        assert_true(e < 8e-3);
        for (int r = 0; r < world; r++)
            free(ys[r]);
    }
    /* a lossy codec, forced by the explicit algorithm */
    const tpm_codec codecs[] = {TPM_CODEC_INT8, TPM_CODEC_INT4};
    const double bound[] = {2e-2, 2e-1};
    for (int ci = 0; ci < 2; ci++) {
        void *ys[2] = {bf16_buf(n), bf16_buf(n)};
        job jobs[2];
        run_threads(p->name, &w, 2, 1, -1, codecs[ci], TPM_ALGO_TWOSHOT, x, ys, jobs);
        assert_int_equal(jobs[0].st, TPM_OK);
        assert_int_equal(jobs[1].st, TPM_OK);
        assert_memory_equal(ys[0], ys[1], n * 2);
        double e = trel_rms(ys[0], y1, TPM_DTYPE_BF16, n);
        print_message("  tp 2 codec %s vs 1 rank: rel rms %.3g\n", tpm_codec_name(codecs[ci]), e);
        assert_true(e < bound[ci]);
        assert_true(e > 1e-4); /* the codec did run */
        free(ys[0]);
        free(ys[1]);
    }
    free(x);
    free(y1);
    tfree_weights(&w);
}

static void comm_mismatch(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    tmake_weights(p, 91, &w);
    tpm_comm_t comms[2];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    assert_int_equal(tpm_comm_init_all(comms, 2, NULL, &cfg), TPM_OK);
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = p->name;
    c.backend = TPM_BACKEND_CPU;
    c.tp_size = 4;
    tpm_moe_t m = NULL;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, comms[1], &w), TPM_ERR_MISMATCH);
    assert_non_null(strstr(tpm_last_error(), "world 2"));
    c.tp_size = 2;
    c.tp_rank = 0; /* comm says rank 1 */
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, comms[1], &w), TPM_ERR_MISMATCH);
    c.tp_size = -1;
    c.tp_rank = -1;
    c.ep_size = 3;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, comms[0], &w), TPM_ERR_INVALID_ARG);
    /* a single-rank layer driven with a 2-rank comm */
    tpm_moe_config c1 = TPM_MOE_CONFIG_INIT;
    c1.preset = p->name;
    c1.backend = TPM_BACKEND_CPU;
    c1.tp_size = 1;
    c1.tp_rank = 0;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c1, NULL, &w), TPM_OK);
    void *x = trand_input(1, (size_t)p->hidden, TPM_DTYPE_BF16), *y = bf16_buf((size_t)p->hidden);
    assert_int_equal(tpm_moe_forward(m, comms[0], x, y, 1, TPM_DTYPE_BF16, NULL), TPM_ERR_MISMATCH);
    tpm_moe_destroy(m);
    free(x);
    free(y);
    tpm_comm_destroy(comms[0]);
    tpm_comm_destroy(comms[1]);
    tfree_weights(&w);
}

int main(void) {
    unsetenv("TPMOE_FUSE_SHARED_EXPERTS");
    unsetenv("TPMOE_QUICK_REDUCE_QUANTIZATION");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_match_single_rank),
        cmocka_unit_test(comm_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
