/*
 * moe_cuda_layer.cu - the CUDA MoE layer object: allocation, weight upload,
 * path choice and the forward orchestration (route -> experts -> combine ->
 * all-reduce), all on the caller's stream.
 *
 * Paths: decode (moe_cuda_decode.cu, two scalar GEMV launches: set 2, default,
 * chained to the routing and the combine by programmatic dependent launch, or
 * set 0; moe_cuda_decode_mma.cu, one persistent tensor-core launch) up to
 * tune.decode_max_tokens tokens, prefill (moe_cuda_prefill.cu) above.
 * Per-call shared-expert plan of a fused layer (tpm_cuda_moe_shared_plan):
 * on the decode path from tune.shared_split_min tokens the shared slot runs
 * as dense cuBLAS GEMMs over the slot's own weights, exactly as the unfused
 * layer's shared MLP: into sh_out (bf16), added by the combine after the
 * routed slots, the slot's own rows neither computed nor summed (same
 * stream or beside the routing, still one graph; d.shared_dense). The fused
 * layer then gives the unfused one's bits and work at those sizes (round 14:
 * its fp32-row form was 0.3-1.2% behind the unfused layer at 8 tokens in five
 * release runs). With EP the routing also drops the shared slots and the
 * dense MLP runs on EP rank 0. The prefill's split plan (up to 16 tokens and from 8193)
 * writes the slot's bf16 rows instead.
 * The decode path never touches the host, so route -> experts -> combine -> all-reduce captures into one
 * CUDA graph; so does the prefill path on the own wgmma GEMM (moe_cuda_gemm_sm90a.cu, the default on a
 * 9.0 device), while its cuBLAS variants read the per-expert offsets back (one sync).
 * tune.shared_overlap: the split / unfused shared MLP is issued by the routing call on a side stream
 * (aux[0], its own cuBLAS handle) beside the routing launch, joined right after it (the decode path
 * since round 6, the prefill path since round 17). shared_overlap 2 (round 35), on the decode path:
 * the experts call issues it on aux[0] beside the routed decode kernels instead (forked after the
 * routing, joined before the experts call returns), so the routed weight stream need not wait for
 * it; the prefill path treats 2 as 1.
 * TP: each rank holds an Il = inter/tp slice of every expert (shared
 * included); the partial bf16 outputs are summed by ncclAllReduce on the
 * same stream. The unfused baseline runs the shared expert as a dense cuBLAS
 * MLP beside the routed launch and the combine adds it.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_defaults.h"
#include "moe_cuda_kernels.h"

#include <cublas_v2.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

struct tpm_cuda_moe {
    tpm_cuda_moe_desc desc;
    const tpm_preset *p;
    tpm_moe_dev d;
    cublasHandle_t blas;
    void *blas_ws;
    int32_t *h_offsets; /* pinned [E1 + 1] */
    tpm_moe_path path;
    tpm_cuda_moe_tuning tune;
    int max_tokens, decode_rows;
    tpm_moe_prefill_ctx pf; /* aux streams, handles, events, pointer arrays of the prefill GEMMs */
    tpm_moe_wg_ctx wg;      /* the own grouped GEMM (ready = 0 where it cannot run) */
    int shared_issued;      /* the routing call issued the shared MLP for this T (0: not) */
    /* EP rank 0's dense shared MLP (no other rank calls cuBLAS there): x staged into sh_x and the
     * GEMMs run over shared_rows(T) >= T rows, a bucket the warm-up ran (tpm_cuda_moe_warm) */
    uint16_t *sh_x;
    int sh_rows; /* rows of sh_x and of the sh_* buffers */
};

#define NCCL_TRY(expr)                                                                          \
    do {                                                                                        \
        ncclResult_t r_ = (expr);                                                               \
        if (r_ != ncclSuccess) return tpm_err(TPM_ERR_NCCL, "%s: %s", #expr, ncclGetErrorString(r_)); \
    } while (0)

static tpm_status dev_alloc(void **p, size_t bytes) {
    *p = NULL;
    if (bytes == 0) return TPM_OK;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return tpm_err(TPM_ERR_NO_MEMORY, "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    }
    return TPM_OK;
}
#define DALLOC(ptr, bytes) TPM_TRY_GOTO(dev_alloc((void **)&(ptr), (bytes)))

tpm_status tpm_cuda_moe_create(const tpm_cuda_moe_desc *desc, tpm_cuda_moe **out) {
    TPM_ARG_CHECK(desc && out, "tpm_cuda_moe_create: null argument");
    *out = NULL;
    const tpm_preset *p = desc->preset;
    TPM_ARG_CHECK(p, "tpm_cuda_moe_create: no preset");
    TPM_ARG_CHECK(desc->tp >= 1 && desc->rank >= 0 && desc->rank < desc->tp, "bad tp %d / rank %d",
                  desc->tp, desc->rank);
    TPM_ARG_CHECK(desc->max_tokens >= 1 && desc->max_tokens <= (1 << 20), "bad max_tokens %d",
                  desc->max_tokens);
    const int ep = desc->ep > 1 ? desc->ep : 1;
    TPM_ARG_CHECK(desc->ep >= 0 && desc->ep <= 8 && desc->ep_rank >= 0 && desc->ep_rank < ep,
                  "bad ep %d / ep_rank %d (ep 0..8)", desc->ep, desc->ep_rank);
    TPM_ARG_CHECK(p->n_experts % ep == 0, "preset %s: %d routed experts cannot be split over ep %d", p->name,
                  p->n_experts, ep);
    TPM_ARG_CHECK(desc->tp * ep == 1 || desc->nccl_comm, "tp %d x ep %d needs an NCCL communicator", desc->tp, ep);
    TPM_ARG_CHECK(p->inter % (8 * desc->tp) == 0 && p->hidden % 8 == 0,
                  "preset %s: inter %d / hidden %d not divisible for tp %d", p->name, p->inter, p->hidden,
                  desc->tp);
    TPM_ARG_CHECK(p->n_shared <= 1, "preset %s: %d shared experts (at most 1 supported)", p->name, p->n_shared);
    if (p->n_shared == 1 && p->shared_inter != p->inter)
        return tpm_err(TPM_ERR_UNSUPPORTED, "preset %s: shared inter %d != routed inter %d", p->name,
                       p->shared_inter, p->inter);
    TPM_ARG_CHECK(p->n_experts <= 256 && p->top_k <= 16, "preset %s: at most 256 experts top-16", p->name);
    if (p->router == TPM_ROUTER_GROUPED_SIGMOID)
        TPM_ARG_CHECK(p->n_groups >= 1 && p->n_groups <= 32 && p->n_experts % p->n_groups == 0 &&
                          p->topk_groups * (p->n_experts / p->n_groups) >= p->top_k,
                      "preset %s: bad expert groups", p->name);
    TPM_CUDA_TRY(cudaSetDevice(desc->device));
    /* every kernel loaded now, not at a first launch beside a spinning all-reduce */
    TPM_TRY(tpm_cuda_preload_kernels(desc->device, NULL));
    tpm_status st = TPM_OK;
    tpm_cuda_moe *m = (tpm_cuda_moe *)calloc(1, sizeof *m);
    if (!m) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cuda_moe_create: out of host memory");
    m->desc = *desc;
    m->p = p;
    m->max_tokens = desc->max_tokens;
    tpm_moe_dev &d = m->d;
    d.H = p->hidden;
    d.E = p->n_experts;
    d.ep = ep;
    d.ep_rank = ep > 1 ? desc->ep_rank : 0;
    d.Eloc = p->n_experts / ep;
    d.e0 = d.ep_rank * d.Eloc;
    d.Es = d.Eloc;
    d.E1 = d.Eloc + p->n_shared;
    d.k = p->top_k;
    d.fused = desc->fuse_shared && p->n_shared == 1;
    d.K = d.k + (d.fused ? 1 : 0);
    d.tp = desc->tp;
    d.rank = desc->rank;
    d.Il = p->inter / desc->tp;
    d.router = p->router;
    d.n_groups = p->n_groups;
    d.topk_groups = p->topk_groups;
    d.act = p->act == TPM_ACT_SWIGLU_OAI_INTERLEAVED ? TPM_ACT_SWIGLU_OAI : p->act;
    d.rsf = p->routed_scaling_factor;
    d.alpha = p->act_alpha;
    d.limit = p->act_limit;
    d.beta = p->act_beta;
    {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev);
    }
    if ((st = tpm_moe_route_tc_setup(d, desc->device)) != TPM_OK) goto fail;
    if ((st = tpm_moe_route_cl_setup(d, desc->device)) != TPM_OK) goto fail;
    {
        const size_t T = (size_t)desc->max_tokens, R = T * d.K, H = d.H, Il = d.Il, E1 = d.E1;
        const size_t Wt = (T + 31) / 32;
        const size_t Rd = (size_t)(T < TPM_MOE_DECODE_MAX_NT ? T : TPM_MOE_DECODE_MAX_NT) * d.K;
        m->decode_rows = (int)Rd;
        d.tile_cap = (int)((T < 1024 ? T : 1024) + 7) / 8;
        DALLOC(d.w13, E1 * 2 * Il * H * 2);
        DALLOC(d.w2, E1 * H * Il * 2);
        if (p->expert_bias) {
            DALLOC(d.b13, E1 * 2 * Il * 4);
            DALLOC(d.b2, E1 * H * 4);
        }
        DALLOC(d.wr, (size_t)d.E * H * 4);
        DALLOC(d.wr3, (size_t)3 * d.E * H * 2);
        if (H % 32 == 0 && d.E <= 256) { /* routing mode 3 can run: its operand-order copies */
            DALLOC(d.wr3f, (size_t)3 * ((d.E + 15) / 16 * 16) * H * 2);
            DALLOC(d.wrf, (size_t)((d.E + 15) / 16 * 16) * H * 4);
        }
        DALLOC(d.done, E1 * 4);
        DALLOC(d.tile_ctr, (size_t)d.tile_cap * 4);
        if (p->router != TPM_ROUTER_SOFTMAX_TOPK) DALLOC(d.br, (size_t)d.E * 4);
        d.logit_rows = (int)(T > 4096 ? T : (16 * T < 4096 ? 16 * T : 4096)); /* H slices x tokens */
        if ((size_t)d.logit_rows < 3 * T) d.logit_rows = (int)(3 * T);      /* router GEMM: [T][3E] */
        DALLOC(d.logits, (size_t)d.logit_rows * d.E * 4);
        DALLOC(d.pl, (size_t)2 * TPM_MOE_POLL_S * TPM_MOE_POLL_T * d.E * 4);
        if (d.wr3f) { /* mode 3's polled cluster partials: at most 16 clusters x 256 tokens */
            d.pl3_rows = d.logit_rows < 4096 ? d.logit_rows : 4096;
            DALLOC(d.pl3, (size_t)d.pl3_rows * d.E * 4);
        }
        DALLOC(d.sel, R * 4);
        DALLOC(d.wts, R * 4);
        DALLOC(d.counts, E1 * 4);
        DALLOC(d.offsets, (E1 + 1) * 4);
        DALLOC(d.perm_tok, R * 4);
        DALLOC(d.perm_exp, R * 4);
        DALLOC(d.inv, R * 4);
        DALLOC(d.active, E1 * 4);
        DALLOC(d.n_active, 4);
        DALLOC(d.bits, (E1 + 1) * Wt * 4);
        DALLOC(d.bitpre, (E1 + 1) * Wt * 4);
        DALLOC(d.ctr, 64);
        DALLOC(d.act_f32, Rd * Il * 4);
        DALLOC(d.rows_f32, Rd * H * 4);
        DALLOC(d.xp, R * H * 2); /* prefill buffers (the path can be forced at any T) */
        DALLOC(d.h13, R * 2 * Il * 2);
        DALLOC(d.act_bf, R * Il * 2);
        DALLOC(d.rows_bf, R * H * 2);
        if (p->n_shared == 1 && !d.fused && d.ep_rank != 0) {
            /* EP rank > 0, unfused: the dense shared MLP runs on EP rank 0 only */
        } else if (p->n_shared == 1 && !d.fused) {
            DALLOC(d.sh_h13, T * 2 * Il * 2);
            DALLOC(d.sh_act, T * Il * 2);
            DALLOC(d.sh_out, T * H * 2);
            m->sh_rows = (int)T;
        } else if (p->n_shared == 1) { /* split plan: decode-sized dense shared MLP */
            const size_t Td = T < TPM_MOE_DECODE_MAX_NT ? T : TPM_MOE_DECODE_MAX_NT;
            DALLOC(d.sh_h13, Td * 2 * Il * 2);
            DALLOC(d.sh_act, Td * Il * 2);
            if (ep == 1 || d.ep_rank == 0) DALLOC(d.sh_out, Td * H * 2); /* EP: dense on EP rank 0 */
            m->sh_rows = (int)Td;
        }
        if (p->n_shared == 1 && ep > 1 && d.ep_rank == 0) {
            DALLOC(m->sh_x, (size_t)m->sh_rows * H * 2);
            if (cudaMemset(m->sh_x, 0, (size_t)m->sh_rows * H * 2) != cudaSuccess) {
                st = tpm_err(TPM_ERR_CUDA, "cudaMemset failed");
                goto fail;
            }
        }
        DALLOC(m->pf.d_ptrs, sizeof(void *) * 6 * E1);
        /* tiles, or pairs and odd tails; two item counters; the early gate_up launch's item and exit
         * counters (it resets them); gate_up's tiles per expert and down's CTAs (down resets them) */
        DALLOC(m->wg.rtp, (2 * (E1 + 1) + 4 + E1 + 1) * 4);
        if (cudaMemset(m->wg.rtp, 0, (2 * (E1 + 1) + 4 + E1 + 1) * 4) != cudaSuccess ||
            cudaMemset(d.ctr, 0, 64) != cudaSuccess || cudaMemset(d.done, 0, E1 * 4) != cudaSuccess ||
            cudaMemset(d.pl, 0xff, (size_t)2 * TPM_MOE_POLL_S * TPM_MOE_POLL_T * d.E * 4) != cudaSuccess ||
            (d.pl3 && cudaMemset(d.pl3, 0xff, (size_t)d.pl3_rows * d.E * 4) != cudaSuccess) ||
            cudaMemset(d.tile_ctr, 0, (size_t)d.tile_cap * 4) != cudaSuccess || cudaMemset(d.w13, 0, E1 * 2 * Il * H * 2) != cudaSuccess ||
            cudaMemset(d.w2, 0, E1 * H * Il * 2) != cudaSuccess) {
            st = tpm_err(TPM_ERR_CUDA, "cudaMemset failed");
            goto fail;
        }
    }
    if (cublasCreate(&m->blas) != CUBLAS_STATUS_SUCCESS) {
        st = tpm_err(TPM_ERR_CUDA, "cublasCreate failed");
        goto fail;
    }
    DALLOC(m->blas_ws, (size_t)32 << 20);
    cublasSetWorkspace(m->blas, m->blas_ws, (size_t)32 << 20);
    if (cudaMallocHost((void **)&m->h_offsets, (size_t)(d.E1 + 1) * 4) != cudaSuccess ||
        cudaMallocHost((void **)&m->pf.h_ptrs, sizeof(void *) * 6 * (size_t)d.E1) != cudaSuccess) {
        st = tpm_err(TPM_ERR_CUDA, "cudaMallocHost failed");
        goto fail;
    }
    if (cudaEventCreateWithFlags(&m->pf.ev_fork, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&m->pf.ev_ptrs, cudaEventDisableTiming) != cudaSuccess) {
        st = tpm_err(TPM_ERR_CUDA, "cudaEventCreate failed");
        goto fail;
    }
    for (int i = 0; i < TPM_MOE_GEMM_NSTREAMS; i++) {
        cublasHandle_t hb = NULL;
        if (cudaStreamCreateWithFlags(&m->pf.aux[i], cudaStreamNonBlocking) != cudaSuccess ||
            cudaEventCreateWithFlags(&m->pf.ev_join[i], cudaEventDisableTiming) != cudaSuccess ||
            cublasCreate(&hb) != CUBLAS_STATUS_SUCCESS) {
            st = tpm_err(TPM_ERR_CUDA, "prefill stream %d: create failed", i);
            goto fail;
        }
        m->pf.blas_aux[i] = hb;
        DALLOC(m->pf.ws_aux[i], (size_t)32 << 20);
        if (cublasSetStream(hb, m->pf.aux[i]) != CUBLAS_STATUS_SUCCESS ||
            cublasSetWorkspace(hb, m->pf.ws_aux[i], (size_t)32 << 20) != CUBLAS_STATUS_SUCCESS) {
            st = tpm_err(TPM_ERR_CUDA, "prefill stream %d: cuBLAS setup failed", i);
            goto fail;
        }
    }
    /* the own prefill GEMM where it can run; if its setup fails the cuBLAS paths remain (ready = 0) */
    if (tpm_moe_wgmma_ok(d, desc->device) &&
        tpm_moe_wgmma_setup(d, (int)((size_t)desc->max_tokens * d.K), &m->wg) != TPM_OK)
        m->wg.ready = 0;
    m->path = TPM_MOE_PATH_AUTO;
    m->tune.decode_kernel = TPM_MOE_DECODE_KERNEL == 1 && !tpm_moe_decode_mma_ok(d) ? 0 : TPM_MOE_DECODE_KERNEL;
    m->tune.decode_max_tokens = TPM_MOE_DECODE_MAX_TOKENS;
    m->tune.route_legacy = 0;
    m->tune.route_gemm_min = TPM_MOE_ROUTE_GEMM_MIN;
    m->tune.shared_split_min = TPM_MOE_SHARED_SPLIT_MIN;
    m->tune.prefill_gemm = TPM_MOE_PREFILL_WGMMA && m->wg.ready ? TPM_MOE_GEMM_WGMMA : TPM_MOE_PREFILL_GEMM;
    m->tune.shared_overlap = TPM_MOE_SHARED_OVERLAP;
    m->tune.prefill_cluster = TPM_MOE_PREFILL_CLUSTER;
    m->tune.prefill_band = TPM_MOE_PREFILL_BAND;
    m->tune.prefill_split_min = TPM_MOE_PREFILL_SPLIT_MIN;
    m->tune.prefill_split_max = TPM_MOE_PREFILL_SPLIT_MAX;
    m->tune.pdl = TPM_MOE_PDL;
    m->tune.down_kernel = TPM_MOE_DOWN_KERNEL;
    m->tune.route_stop = 0;
    m->tune.route_experts = TPM_MOE_ROUTE_EXPERTS;
    m->tune.route_wide = TPM_MOE_ROUTE_WIDE;
    m->tune.route_perm_min = TPM_MOE_ROUTE_PERM_MIN;
    m->tune.route_poll = TPM_MOE_ROUTE_POLL;
    m->tune.shared_mma = TPM_MOE_SHARED_MMA;
    m->tune.route_tc_min = TPM_MOE_ROUTE_TC_MIN;
    m->tune.route_tc_max = TPM_MOE_ROUTE_TC_MAX;
    m->tune.route_tc_clusters = 0;
    m->tune.route_tc_loads = TPM_MOE_ROUTE_TC_LOADS;
    m->tune.route_cl_min = TPM_MOE_ROUTE_CL_MIN;
    m->tune.route_cl_max = TPM_MOE_ROUTE_CL_MAX;
    m->tune.route_cl_size = 0;
    m->tune.route_cluster_meet = TPM_MOE_ROUTE_CLUSTER_MEET;
    m->tune.route_tc_wide = TPM_MOE_ROUTE_TC_WIDE;
    m->tune.route_tc_fit = TPM_MOE_ROUTE_TC_FIT;
    m->tune.route_tc_split = TPM_MOE_ROUTE_TC_SPLIT;
    m->tune.prefill_early = TPM_MOE_PREFILL_EARLY;
    m->tune.prefill_down_early = TPM_MOE_PREFILL_DOWN_EARLY;
    m->tune.expert_wait = TPM_MOE_EXPERT_WAIT;
    m->tune.route_fence = TPM_MOE_ROUTE_FENCE;
    m->tune.gate_up_pipe = TPM_MOE_GATE_UP_PIPE;
    m->tune.gate_up_pairs = TPM_MOE_GATE_UP_PAIRS;
    *out = m;
    return TPM_OK;
fail:
    tpm_cuda_moe_destroy(m);
    return st;
}

void tpm_cuda_moe_destroy(tpm_cuda_moe *m) {
    if (!m) return;
    cudaSetDevice(m->desc.device);
    tpm_moe_dev &d = m->d;
    void *bufs[] = {d.w13,     d.w2,     d.b13,    d.b2,      d.wr,      d.br,       d.logits, d.sel,
                    d.wts,     d.counts, d.offsets, d.perm_tok, d.perm_exp, d.inv,     d.active, d.n_active,
                    d.bits,    d.bitpre, d.ctr,    d.act_f32, d.rows_f32, d.xp,      d.h13,    d.act_bf,
                    d.rows_bf, d.sh_h13, d.sh_act, d.sh_out,  m->blas_ws, d.wr3,     d.done,     d.tile_ctr,
                    m->wg.rtp, d.trace, m->sh_x, d.wr3f,    d.pl,       d.pl3,    d.wrf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    if (m->blas) cublasDestroy(m->blas);
    if (m->h_offsets) cudaFreeHost(m->h_offsets);
    if (m->pf.h_ptrs) cudaFreeHost(m->pf.h_ptrs);
    if (m->pf.d_ptrs) cudaFree(m->pf.d_ptrs);
    if (m->pf.ev_fork) cudaEventDestroy(m->pf.ev_fork);
    if (m->pf.ev_ptrs) cudaEventDestroy(m->pf.ev_ptrs);
    for (int i = 0; i < TPM_MOE_GEMM_NSTREAMS; i++) {
        if (m->pf.blas_aux[i]) cublasDestroy((cublasHandle_t)m->pf.blas_aux[i]);
        if (m->pf.ws_aux[i]) cudaFree(m->pf.ws_aux[i]);
        if (m->pf.ev_join[i]) cudaEventDestroy(m->pf.ev_join[i]);
        if (m->pf.aux[i]) cudaStreamDestroy(m->pf.aux[i]);
    }
    free(m);
}

/* MARK: weights */
static uint16_t bf16_of(float f) { return tpm_f32_to_bf16(f); }

tpm_status tpm_cuda_moe_upload(tpm_cuda_moe *m, const tpm_moe_weights *w) {
    TPM_ARG_CHECK(m && w, "tpm_cuda_moe_upload: null argument");
    const tpm_moe_dev &d = m->d;
    const tpm_preset *p = m->p;
    TPM_ARG_CHECK(w->hidden == d.H && w->n_experts == d.E && w->inter == p->inter && w->n_shared == p->n_shared,
                  "tpm_cuda_moe_upload: weights do not match preset %s", p->name);
    TPM_ARG_CHECK(w->router && w->experts && (p->n_shared == 0 || w->shared), "tpm_cuda_moe_upload: missing arrays");
    TPM_ARG_CHECK(!p->expert_bias || (w->experts[0].gate_up_bias && w->experts[0].down_bias),
                  "tpm_cuda_moe_upload: preset %s needs expert biases", p->name);
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    const int H = d.H, Il = d.Il, I = p->inter, r0 = m->desc.rank * Il;
    const int il = w->interleaved;
    tpm_status st = TPM_OK;
    uint16_t *g13 = (uint16_t *)malloc((size_t)2 * Il * H * 2), *g2 = (uint16_t *)malloc((size_t)H * Il * 2);
    float *f13 = (float *)malloc((size_t)2 * Il * 4), *f2 = (float *)malloc((size_t)H * 4);
    if (!g13 || !g2 || !f13 || !f2) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "tpm_cuda_moe_upload: out of host memory");
        goto done;
    }
    for (int e = 0; e < d.E1; e++) {
        const tpm_expert_weights *x = e < d.Eloc ? &w->experts[d.e0 + e] : &w->shared[0];
        for (int i = 0; i < Il; i++) {
            const int gi = il ? 2 * (r0 + i) : r0 + i, ui = il ? 2 * (r0 + i) + 1 : I + r0 + i;
            for (int h = 0; h < H; h++) {
                g13[(size_t)i * H + h] = bf16_of(x->gate_up[(size_t)gi * H + h]);
                g13[(size_t)(Il + i) * H + h] = bf16_of(x->gate_up[(size_t)ui * H + h]);
            }
            if (d.b13) {
                f13[i] = x->gate_up_bias ? x->gate_up_bias[gi] : 0.0f;
                f13[Il + i] = x->gate_up_bias ? x->gate_up_bias[ui] : 0.0f;
            }
        }
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Il; i++) g2[(size_t)h * Il + i] = bf16_of(x->down[(size_t)h * I + r0 + i]);
        if (d.b2)
            for (int h = 0; h < H; h++) f2[h] = x->down_bias ? x->down_bias[h] : 0.0f;
        if (cudaMemcpy(d.w13 + (size_t)e * 2 * Il * H, g13, (size_t)2 * Il * H * 2, cudaMemcpyHostToDevice) ||
            cudaMemcpy(d.w2 + (size_t)e * H * Il, g2, (size_t)H * Il * 2, cudaMemcpyHostToDevice) ||
            (d.b13 && cudaMemcpy(d.b13 + (size_t)e * 2 * Il, f13, (size_t)2 * Il * 4, cudaMemcpyHostToDevice)) ||
            (d.b2 && cudaMemcpy(d.b2 + (size_t)e * H, f2, (size_t)H * 4, cudaMemcpyHostToDevice))) {
            st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_upload: cudaMemcpy failed");
            goto done;
        }
    }
    if (cudaMemcpy(d.wr, w->router, (size_t)d.E * H * 4, cudaMemcpyHostToDevice) ||
        (d.br && cudaMemcpy(d.br, w->router_bias, (size_t)d.E * 4, cudaMemcpyHostToDevice)))
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_upload: router cudaMemcpy failed");
    if (d.br && !w->router_bias) st = tpm_err(TPM_ERR_INVALID_ARG, "tpm_cuda_moe_upload: router bias missing");
    if (st == TPM_OK) {
        st = tpm_moe_launch_split_router(d, 0);
        /* the legacy stream only: not the other ranks' streams where ranks share a GPU */
        if (st == TPM_OK && cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess)
            st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_upload: router split failed");
    }
done:
    free(g13);
    free(g2);
    free(f13);
    free(f2);
    return st;
}

tpm_status tpm_cuda_moe_generate(tpm_cuda_moe *m, uint64_t seed) {
    TPM_ARG_CHECK(m, "tpm_cuda_moe_generate: null argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    const tpm_moe_dev &d = m->d;
    TPM_TRY(tpm_moe_launch_generate(d, m->p, seed, 0));
    float *r = (float *)malloc((size_t)d.E * d.H * 4), *b = (float *)malloc((size_t)d.E * 4);
    if (!r || !b) {
        free(r);
        free(b);
        return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cuda_moe_generate: out of host memory");
    }
    tpm_cuda_moe_gen_router(m->p, seed, r, b);
    tpm_status st = TPM_OK;
    if (cudaMemcpy(d.wr, r, (size_t)d.E * d.H * 4, cudaMemcpyHostToDevice) ||
        (d.br && cudaMemcpy(d.br, b, (size_t)d.E * 4, cudaMemcpyHostToDevice)))
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_generate: %s", cudaGetErrorString(cudaGetLastError()));
    if (st == TPM_OK) st = tpm_moe_launch_split_router(d, 0);
    if (st == TPM_OK && cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess)
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_generate: %s", cudaGetErrorString(cudaGetLastError()));
    free(r);
    free(b);
    return st;
}

/* MARK: forward */
tpm_status tpm_cuda_moe_set_path(tpm_cuda_moe *m, tpm_moe_path path) {
    TPM_ARG_CHECK(m && path >= TPM_MOE_PATH_AUTO && path <= TPM_MOE_PATH_PREFILL, "tpm_cuda_moe_set_path: bad argument");
    m->path = path;
    return TPM_OK;
}

tpm_status tpm_cuda_moe_set_tuning(tpm_cuda_moe *m, const tpm_cuda_moe_tuning *t) {
    TPM_ARG_CHECK(m && t, "tpm_cuda_moe_set_tuning: null argument");
    TPM_ARG_CHECK(t->decode_kernel >= 0 && t->decode_kernel <= 2, "decode_kernel %d is not 0, 1 or 2",
                  t->decode_kernel);
    TPM_ARG_CHECK(t->decode_kernel != 1 || tpm_moe_decode_mma_ok(m->d),
                  "decode_kernel 1 needs hidden and inter/tp divisible by 32");
    TPM_ARG_CHECK(t->decode_max_tokens >= 0 && t->decode_max_tokens <= TPM_MOE_DECODE_MAX_NT,
                  "decode_max_tokens %d outside 0..%d", t->decode_max_tokens, TPM_MOE_DECODE_MAX_NT);
    TPM_ARG_CHECK(t->route_gemm_min >= 1, "route_gemm_min %d < 1", t->route_gemm_min);
    TPM_ARG_CHECK(t->shared_split_min >= 1, "shared_split_min %d < 1", t->shared_split_min);
    TPM_ARG_CHECK(t->prefill_gemm >= TPM_MOE_GEMM_LOOP && t->prefill_gemm <= TPM_MOE_GEMM_WGMMA,
                  "prefill_gemm %d is not 0, 1, 2 or 3", t->prefill_gemm);
    if (t->prefill_gemm == TPM_MOE_GEMM_WGMMA && !m->wg.ready)
        return tpm_err(TPM_ERR_UNSUPPORTED, "prefill_gemm 3 (own wgmma GEMM) needs a 9.0 device, hidden %% 256 == 0 "
                                            "and inter/tp %% 128 == 0 (hidden %d, inter/tp %d)", m->d.H, m->d.Il);
    TPM_ARG_CHECK(t->shared_overlap >= 0 && t->shared_overlap <= 2, "shared_overlap %d is not 0, 1 or 2",
                  t->shared_overlap);
    TPM_ARG_CHECK(t->prefill_cluster >= -1 && t->prefill_cluster <= 3, "prefill_cluster %d is not -1, 0, 1, 2 or 3",
                  t->prefill_cluster);
    TPM_ARG_CHECK(t->prefill_split_min >= 1, "prefill_split_min %d < 1", t->prefill_split_min);
    TPM_ARG_CHECK(t->prefill_split_max >= 0, "prefill_split_max %d < 0", t->prefill_split_max);
    TPM_ARG_CHECK(t->prefill_band >= 0, "prefill_band %d < 0", t->prefill_band);
    TPM_ARG_CHECK(t->pdl == 0 || t->pdl == 1, "pdl %d is not 0 or 1", t->pdl);
    TPM_ARG_CHECK(t->down_kernel >= 0 && t->down_kernel <= 4, "down_kernel %d is not 0..4", t->down_kernel);
    TPM_ARG_CHECK(t->gate_up_pairs >= 0 && t->gate_up_pairs <= 2, "gate_up_pairs %d is not 0 (by size), 1 or 2",
                  t->gate_up_pairs);
#ifdef TPM_MOE_TRACE
    /* 5, 6: trace-build diagnostics of mode 1's one-tile tail (the selection / permutation twice) */
    TPM_ARG_CHECK(t->route_stop >= 0 && t->route_stop <= 6 && t->route_stop != 4, "route_stop %d is not 0..3, 5, 6",
                  t->route_stop);
#else
    TPM_ARG_CHECK(t->route_stop >= 0 && t->route_stop <= 3, "route_stop %d is not 0..3", t->route_stop);
#endif
    TPM_ARG_CHECK(t->route_experts == 0 || t->route_experts == 8 || t->route_experts == 16 || t->route_experts == 32,
                  "route_experts %d is not 0 (by size), 8, 16 or 32", t->route_experts);
    TPM_ARG_CHECK(t->route_wide == 0 || (t->route_wide >= 9 && t->route_wide <= 16),
                  "route_wide %d is not 0 (never) or 9..16", t->route_wide);
    TPM_ARG_CHECK(t->route_perm_min >= 0, "route_perm_min %d < 0", t->route_perm_min);
    TPM_ARG_CHECK(t->route_poll >= 0 && t->route_poll <= 63, "route_poll %d is not 0..63", t->route_poll);
    TPM_ARG_CHECK(t->shared_mma >= 0, "shared_mma %d < 0", t->shared_mma);
    TPM_ARG_CHECK(t->route_tc_min >= 1 && t->route_tc_max >= 0, "route_tc_min %d < 1 or route_tc_max %d < 0",
                  t->route_tc_min, t->route_tc_max);
    TPM_ARG_CHECK(t->route_tc_loads >= 0 && t->route_tc_loads <= 3, "route_tc_loads %d is not 0..3",
                  t->route_tc_loads);
    TPM_ARG_CHECK(t->expert_wait == 0 || t->expert_wait == 1, "expert_wait %d is not 0 or 1", t->expert_wait);
    TPM_ARG_CHECK(t->route_fence == 0 || t->route_fence == 1, "route_fence %d is not 0 or 1", t->route_fence);
    TPM_ARG_CHECK(t->gate_up_pipe == 0 || t->gate_up_pipe == 1, "gate_up_pipe %d is not 0 or 1", t->gate_up_pipe);
    TPM_ARG_CHECK(t->prefill_early >= 0, "prefill_early %d < 0", t->prefill_early);
    TPM_ARG_CHECK(t->prefill_down_early >= 0, "prefill_down_early %d < 0", t->prefill_down_early);
    TPM_ARG_CHECK(t->route_tc_clusters >= 0 && t->route_tc_clusters <= 64, "route_tc_clusters %d outside 0..64",
                  t->route_tc_clusters);
    TPM_ARG_CHECK(t->route_cl_min >= 1 && t->route_cl_max >= 0, "route_cl_min %d < 1 or route_cl_max %d < 0",
                  t->route_cl_min, t->route_cl_max);
    TPM_ARG_CHECK(t->route_cl_size == 0 || t->route_cl_size == 8 || t->route_cl_size == 16,
                  "route_cl_size %d is not 0 (the largest that fits), 8 or 16", t->route_cl_size);
    TPM_ARG_CHECK(t->route_cluster_meet >= 0, "route_cluster_meet %d < 0", t->route_cluster_meet);
    TPM_ARG_CHECK(t->route_tc_wide >= 0, "route_tc_wide %d < 0", t->route_tc_wide);
    TPM_ARG_CHECK(t->route_tc_fit == 0 || t->route_tc_fit == 1, "route_tc_fit %d is not 0 or 1", t->route_tc_fit);
    TPM_ARG_CHECK(t->route_tc_split == 1 || t->route_tc_split == 2 || t->route_tc_split == 4,
                  "route_tc_split %d is not 1, 2 or 4", t->route_tc_split);
    m->tune = *t;
    return TPM_OK;
}

tpm_status tpm_cuda_moe_get_tuning(const tpm_cuda_moe *m, tpm_cuda_moe_tuning *t) {
    TPM_ARG_CHECK(m && t, "tpm_cuda_moe_get_tuning: null argument");
    *t = m->tune;
    return TPM_OK;
}

tpm_moe_path tpm_cuda_moe_path_for(const tpm_cuda_moe *m, int T) {
    if (m->path == TPM_MOE_PATH_DECODE && T <= TPM_MOE_DECODE_MAX_NT) return TPM_MOE_PATH_DECODE;
    if (m->path == TPM_MOE_PATH_PREFILL) return TPM_MOE_PATH_PREFILL;
    return T <= m->tune.decode_max_tokens ? TPM_MOE_PATH_DECODE : TPM_MOE_PATH_PREFILL;
}

int tpm_cuda_moe_capturable(const tpm_cuda_moe *m, int T) {
    return tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_DECODE || m->tune.prefill_gemm == TPM_MOE_GEMM_WGMMA;
}

int tpm_cuda_moe_shared_plan(const tpm_cuda_moe *m, int T) {
    if (!m || m->p->n_shared == 0) return TPM_MOE_SHARED_NONE;
    if (!m->d.fused) return m->d.ep_rank == 0 ? TPM_MOE_SHARED_DENSE : TPM_MOE_SHARED_NONE;
    if (tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_DECODE && m->tune.decode_kernel != 1 &&
        T >= m->tune.shared_split_min)
        return TPM_MOE_SHARED_SPLIT; /* EP: the dense MLP on EP rank 0 (d.shared_dense), every rank */
    /* EP prefill: the slot holds only this rank's tokens (t % ep), not rows T*k .. T*k+T-1 */
    if (m->d.ep > 1) return TPM_MOE_SHARED_SLOT;
    if (tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_PREFILL && m->tune.prefill_gemm == TPM_MOE_GEMM_WGMMA &&
        (T >= m->tune.prefill_split_min || T <= m->tune.prefill_split_max))
        return TPM_MOE_SHARED_SPLIT;
    return TPM_MOE_SHARED_SLOT;
}

int tpm_cuda_moe_route_experts_for(const tpm_cuda_moe *m, int T) {
    if (m && m->tune.route_experts) return m->tune.route_experts;
    if (m && T <= 2 && m->d.tp >= 2 && m->d.ep == 1) return 16; /* a rank of TP >= 2: r252-r254 */
    return !m || T <= 2 ? 32 : T <= 8 ? 8 : T <= 24 ? 16 : 32; /* see TPM_MOE_ROUTE_EXPERTS */
}

int tpm_cuda_moe_gate_up_pairs_for(const tpm_cuda_moe *m, int T) {
    if (!m) return 2;
    if (m->tune.gate_up_pairs) return m->tune.gate_up_pairs;
    return m->d.Il <= TPM_MOE_GUP1_MAX_ROWS && T >= 2 && T <= 4 ? 1 : 2;
}

/* cuBLAS on stream s; cublasSetStream resets the workspace to the default
 * pool, so the layer's own workspace is set again (graph capture needs it). */
static tpm_status bind_blas(tpm_cuda_moe *m, cudaStream_t s) {
    if (cublasSetStream(m->blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(m->blas, m->blas_ws, (size_t)32 << 20) != CUBLAS_STATUS_SUCCESS)
        return tpm_err(TPM_ERR_CUDA, "cublasSetStream / cublasSetWorkspace failed");
    return TPM_OK;
}

/* Programmatic dependent launch for decode kernel set 2: asked for, and not on
 * the legacy NULL stream (whose implicit synchronisation it would cut across). */
static int use_pdl(const tpm_cuda_moe *m, cudaStream_t s) {
    return m->tune.pdl && s != NULL && s != cudaStreamLegacy;
}

static tpm_status check_call(const tpm_cuda_moe *m, const void *ptr, int T) {
    TPM_ARG_CHECK(m && ptr, "tpm_cuda_moe: null argument");
    TPM_ARG_CHECK(T >= 1 && T <= m->max_tokens, "tpm_cuda_moe: T = %d outside 1..%d", T, m->max_tokens);
    return TPM_OK;
}

/* The rows EP rank 0's dense shared MLP runs for T tokens: T below 16, else T rounded up to a
 * multiple of 2^(floor(log2 T) - 3) (eight buckets per octave: at most 12.5% more rows), at most
 * sh_rows; 88 buckets up to 8192 tokens for the warm-up. */
static int shared_rows(const tpm_cuda_moe *m, int T) {
    int q = 1;
    while (q * 16 <= T) q *= 2;
    const int P = (T + q - 1) / q * q;
    return P < m->sh_rows ? P : m->sh_rows;
}

/* The decode-path shared MLP (the split plan, or the unfused layer; with EP on EP rank 0 only)
 * on the handle h, stream s: the dense MLP into sh_out, which the combine adds. */
static tpm_status shared_mlp(tpm_cuda_moe *m, void *h, const void *x, int T, cudaStream_t s) {
    if (!m->sh_x) return tpm_moe_shared_dense(m->d, h, (const uint16_t *)x, T, s);
    /* EP rank 0: the one rank calling cuBLAS here, so only shapes (and an x alignment) that the
     * warm-up ran: cuBLAS picks its kernel by M, and a kernel of a library not yet loaded would
     * load it beside the other ranks' all-reduces (bench/results/r120: 300 tokens, after 256 and
     * 384 had run). Rows T..P-1 of sh_x hold earlier tokens; their outputs are never read. */
    TPM_CUDA_TRY(cudaMemcpyAsync(m->sh_x, x, (size_t)T * m->d.H * 2, cudaMemcpyDeviceToDevice, s));
    return tpm_moe_shared_dense(m->d, h, m->sh_x, shared_rows(m, T), s);
}

/* Whether this rank runs a dense shared MLP in this call (unfused on EP rank 0, or a fused
 * layer's split plan: on every rank without EP, on EP rank 0 with EP). */
static int runs_shared_mlp(const tpm_cuda_moe *m, int plan) {
    if (plan == TPM_MOE_SHARED_DENSE) return 1;
    return plan == TPM_MOE_SHARED_SPLIT && (m->d.ep == 1 || m->d.ep_rank == 0);
}

int tpm_cuda_moe_shared_mma(const tpm_cuda_moe *m, int T) {
    if (!m || !m->d.fused || m->d.ep != 1 || m->tune.shared_mma <= 0 || T < 3 || T < m->tune.shared_mma) return 0;
    if (tpm_cuda_moe_path_for(m, T) != TPM_MOE_PATH_DECODE || m->tune.decode_kernel != 2) return 0;
    if (m->tune.down_kernel == 1 && T <= 8) return 0; /* k_down4 has no tensor-core items */
    if (m->d.H % 32 || m->d.Il % 32) return 0;
    return tpm_cuda_moe_shared_plan(m, T) == TPM_MOE_SHARED_SLOT;
}

/* Mode 3's wide tiles for a call of T tokens (d.route_tc_wide): 0 = the 64-token tiles, else their
 * expert groups (tuning.route_tc_wide, route_tc_split). */
static int call_route_wide(const tpm_cuda_moe *m, int T) {
    return m->tune.route_tc_wide > 0 && T >= m->tune.route_tc_wide ? m->tune.route_tc_split : 0;
}

/* The routing's polled forms for a call of T tokens (d.route_poll; tuning.route_poll). */
static int call_route_poll(const tpm_cuda_moe *m, int T) {
    return m->d.E % 4 == 0 ? (m->tune.route_poll & (T <= TPM_MOE_POLL_T ? 63 : 58)) : 0;
}

/* The per-call state of the dev struct (every launch of a forward copies it): the split plan
 * with the shared MLP dense into sh_out (decode path; with EP on either path); the shared slot
 * on tensor cores (decode path, slot plan). */
static void set_call(tpm_cuda_moe *m, int T) {
    m->d.shared_mma = tpm_cuda_moe_shared_mma(m, T);
    m->d.shared_dense = m->d.fused && tpm_cuda_moe_shared_plan(m, T) == TPM_MOE_SHARED_SPLIT &&
                        (m->d.ep > 1 || tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_DECODE);
    m->d.route_fence = m->tune.route_fence;
    m->d.route_perm = m->tune.route_perm_min > 0 && T >= m->tune.route_perm_min && T <= TPM_MOE_ROUTE_PERM_MAX_T
                          ? (T <= m->tune.route_cluster_meet ? 2 : 1)
                          : 0;
    m->d.route_poll = call_route_poll(m, T);
    m->d.gate_up_pipe = m->tune.gate_up_pipe;
    m->d.route_tc_wide = call_route_wide(m, T);
    m->d.route_tc_fit = m->tune.route_tc_fit;
}

/* The routing mode of a call (tpm_cuda_moe_route_mode). */
static int route_mode_x(const tpm_cuda_moe *m, const void *x, int T) {
    if (m->tune.route_legacy) return 0;
    if (T >= m->tune.route_cl_min && T <= m->tune.route_cl_max &&
        tpm_moe_route_cl_ok(m->d, x, T, m->tune.route_cl_size))
        return 4;
    if (T >= m->tune.route_tc_min && T <= m->tune.route_tc_max && tpm_moe_route_tc_ok(m->d, x, T)) return 3;
    return T >= m->tune.route_gemm_min ? 2 : 1;
}

/* The diagnostic timeline (moe_cuda_trace.cu holds the marks' buffer and its reduction). */
tpm_status tpm_cuda_moe_set_trace(tpm_cuda_moe *m, int on) {
    TPM_ARG_CHECK(m, "tpm_cuda_moe_set_trace: null argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    return tpm_moe_trace_set(&m->d.trace, on);
}

tpm_status tpm_cuda_moe_trace_reset(tpm_cuda_moe *m, void *stream) {
    TPM_ARG_CHECK(m && m->d.trace, "tpm_cuda_moe_trace_reset: null argument or tracing off");
    return tpm_moe_trace_zero(m->d.trace, (cudaStream_t)stream);
}

tpm_status tpm_cuda_moe_trace_events(tpm_cuda_moe *m, double ev[TPM_MOE_TRACE_EVENTS]) {
    TPM_ARG_CHECK(m && m->d.trace && ev, "tpm_cuda_moe_trace_events: null argument or tracing off");
    return tpm_moe_trace_read(m->d.trace, ev);
}

tpm_status tpm_cuda_moe_check(tpm_cuda_moe *m) {
    TPM_ARG_CHECK(m, "tpm_cuda_moe_check: null argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    int32_t flag = 0;
    TPM_CUDA_TRY(cudaMemcpy(&flag, m->d.ctr + 5, sizeof flag, cudaMemcpyDeviceToHost));
    if (!flag) return TPM_OK;
    const int32_t zero = 0;
    TPM_CUDA_TRY(cudaMemcpy(m->d.ctr + 5, &zero, sizeof zero, cudaMemcpyHostToDevice));
    /* the polled routing's partials: every plane back to the sentinel, so that the next call
     * starts clean whatever the timed-out launch left (the waits keep the counters consistent) */
    TPM_CUDA_TRY(cudaMemset(m->d.pl, 0xff, (size_t)2 * TPM_MOE_POLL_S * TPM_MOE_POLL_T * m->d.E * 4));
    if (m->d.pl3) TPM_CUDA_TRY(cudaMemset(m->d.pl3, 0xff, (size_t)m->d.pl3_rows * m->d.E * 4));
    return tpm_err(TPM_ERR_TIMEOUT, "tpm_cuda_moe: a bounded wait inside a kernel (a decode kernel's for its "
                                    "gate_up tiles, or the routing's for its other token groups or its "
                                    "partial logits) ran past its bound; the outputs since the last check are "
                                    "invalid");
}

int tpm_cuda_moe_route_tc_shape(const tpm_cuda_moe *m, int T, int shape[4]) {
    if (!m || !shape) return 0;
    /* the call's state that the shape depends on (the wide tile needs the polled sums) */
    tpm_moe_dev d = m->d;
    d.route_poll = call_route_poll(m, T);
    d.route_tc_fit = m->tune.route_tc_fit;
    return tpm_moe_route_tc_shape(d, T, m->tune.route_tc_clusters, m->tune.route_tc_loads, call_route_wide(m, T),
                                  shape);
}

int tpm_cuda_moe_route_cl_shape(const tpm_cuda_moe *m, int T, int shape[4]) {
    return m && shape ? tpm_moe_route_cl_shape(m->d, T, m->tune.route_cl_size, shape) : 0;
}

int tpm_cuda_moe_route_mode(const tpm_cuda_moe *m, int T) {
    static const uint4 aligned_probe = {0, 0, 0, 0}; /* any 16-byte aligned address */
    return m ? route_mode_x(m, &aligned_probe, T) : -1;
}

int tpm_cuda_moe_prefill_form(const tpm_cuda_moe *m, int T) {
    if (!m || tpm_cuda_moe_path_for(m, T) != TPM_MOE_PATH_PREFILL || m->tune.prefill_gemm != TPM_MOE_GEMM_WGMMA)
        return -1;
    if (m->tune.prefill_cluster >= 0) return m->tune.prefill_cluster;
    return T >= TPM_MOE_PREFILL_CLUSTER_MIN ? 2 : 3;
}

int tpm_cuda_moe_overlaps_shared(const tpm_cuda_moe *m, int T) {
    if (!m || !m->tune.shared_overlap || !runs_shared_mlp(m, tpm_cuda_moe_shared_plan(m, T))) return 0;
    if (tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_PREFILL) return 1;
    return m->tune.decode_kernel != 1 && m->tune.shared_overlap == 1;
}

/* Whether the decode path's experts call issues the shared MLP beside the routed kernels
 * (shared_overlap 2; not on the legacy NULL stream, whose implicit synchronisation would
 * serialize the fork). */
static int shared_beside_experts(const tpm_cuda_moe *m, int T, cudaStream_t s) {
    return s != NULL && s != cudaStreamLegacy && m->tune.shared_overlap == 2 && m->tune.decode_kernel != 1 &&
           tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_DECODE;
}

/* Whether this call's shared MLP overlaps the routing (tune.shared_overlap): not on the legacy
 * NULL stream, whose implicit synchronisation would serialize the fork. */
static int overlap_shared(const tpm_cuda_moe *m, int T, cudaStream_t s) {
    return s != NULL && s != cudaStreamLegacy && tpm_cuda_moe_overlaps_shared(m, T);
}

/* The shared MLP a call runs beside or before its routed experts, on handle h, stream s: the
 * prefill's split plan writes the slot's bf16 rows (fused, no EP), else the dense MLP into sh_out. */
static tpm_status shared_mlp_for(tpm_cuda_moe *m, void *h, const void *x, int T, cudaStream_t s) {
    if (m->d.fused && m->d.ep == 1 && tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_PREFILL)
        return tpm_moe_shared_split_prefill(m->d, h, (const uint16_t *)x, T, s);
    return shared_mlp(m, h, x, T, s);
}

/* Fork aux stream 0 off s (it runs what is queued on it after what s has queued so far). */
static tpm_status aux_fork(tpm_cuda_moe *m, cudaStream_t s) {
    TPM_CUDA_TRY(cudaEventRecord(m->pf.ev_fork, s));
    TPM_CUDA_TRY(cudaStreamWaitEvent(m->pf.aux[0], m->pf.ev_fork, 0));
    return TPM_OK;
}

/* Join aux stream 0 back into s, also after a failed launch (a stream capture must not be left
 * forked); returns st, or the join's error where st is TPM_OK. */
static tpm_status aux_join(tpm_cuda_moe *m, cudaStream_t s, tpm_status st, const char *fn) {
    const cudaError_t e1 = cudaEventRecord(m->pf.ev_join[0], m->pf.aux[0]);
    const cudaError_t e2 = e1 == cudaSuccess ? cudaStreamWaitEvent(s, m->pf.ev_join[0], 0) : e1;
    if (st == TPM_OK && e2 != cudaSuccess)
        return tpm_err(TPM_ERR_CUDA, "%s: shared MLP join: %s", fn, cudaGetErrorString(e2));
    return st;
}

tpm_status tpm_cuda_moe_route(tpm_cuda_moe *m, const void *x, int T, void *stream) {
    TPM_TRY(check_call(m, x, T));
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    cudaStream_t s = (cudaStream_t)stream;
    set_call(m, T);
    const int mode = route_mode_x(m, x, T);
    m->shared_issued = 0;
    const int ovl = overlap_shared(m, T, s);
    tpm_status st = TPM_OK;
    if (ovl) { /* fork: the shared MLP on aux stream 0 beside the routing launch */
        TPM_TRY(aux_fork(m, s));
        st = shared_mlp_for(m, m->pf.blas_aux[0], x, T, m->pf.aux[0]);
    }
    if (st == TPM_OK && mode == 2) st = bind_blas(m, s);
    if (st == TPM_OK && mode == 4)
        st = tpm_moe_launch_route_cl(m->d, (const uint16_t *)x, T, m->tune.route_cl_size, m->tune.route_stop, s);
    else if (st == TPM_OK && mode == 3)
        st = tpm_moe_launch_route_tc(m->d, (const uint16_t *)x, T, m->tune.route_tc_clusters, m->tune.route_tc_loads,
                                     m->tune.route_stop, s);
    else if (st == TPM_OK)
        st = tpm_moe_launch_route(m->d, m->blas, (const uint16_t *)x, T, mode, m->tune.route_stop,
                                  tpm_cuda_moe_route_experts_for(m, T) / 8, m->tune.route_wide, s);
    if (ovl) { /* join before the experts (which do not read the shared rows, but a phase must join) */
        st = aux_join(m, s, st, "tpm_cuda_moe_route");
        if (st == TPM_OK) m->shared_issued = T;
    }
    return st;
}

tpm_status tpm_cuda_moe_experts(tpm_cuda_moe *m, const void *x, int T, void *stream) {
    TPM_TRY(check_call(m, x, T));
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    cudaStream_t s = (cudaStream_t)stream;
    set_call(m, T);
    const tpm_moe_dev &d = m->d;
    const int issued = m->shared_issued == T; /* by the routing call, beside it */
    m->shared_issued = 0;
    const int beside = shared_beside_experts(m, T, s);
    if (!d.fused && m->p->n_shared == 1 && d.ep_rank == 0 && !issued && !beside) {
        TPM_TRY(bind_blas(m, s));
        TPM_TRY(shared_mlp(m, m->blas, x, T, s));
    }
    if (tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_DECODE) {
        if (m->tune.decode_kernel == 1) return tpm_moe_launch_decode_mma(d, (const uint16_t *)x, T, s);
        const int plan = tpm_cuda_moe_shared_plan(m, T);
        /* without EP the shared slot is the last touched expert, left out of the GEMV items; with
         * EP (d.shared_dense) the routing already dropped it */
        const int split = plan == TPM_MOE_SHARED_SPLIT && d.ep == 1;
        const int mlp = !issued && (d.fused ? runs_shared_mlp(m, plan) : m->p->n_shared == 1 && d.ep_rank == 0);
        tpm_status st = TPM_OK;
        if (mlp && beside) { /* fork: the dense shared MLP on aux stream 0 beside the routed kernels */
            TPM_TRY(aux_fork(m, s));
            st = shared_mlp(m, m->pf.blas_aux[0], x, T, m->pf.aux[0]);
        } else if (d.fused && mlp) { /* the shared expert's dense GEMMs first */
            TPM_TRY(bind_blas(m, s));
            TPM_TRY(shared_mlp(m, m->blas, x, T, s));
        }
        if (st == TPM_OK && m->tune.decode_kernel == 2)
            st = tpm_moe_launch_decode2(d, (const uint16_t *)x, T, split, use_pdl(m, s), m->tune.down_kernel,
                                        tpm_cuda_moe_gate_up_pairs_for(m, T), m->tune.expert_wait, s);
        else if (st == TPM_OK)
            st = tpm_moe_launch_decode(d, (const uint16_t *)x, T, split, s);
        /* join before the call returns: the combine reads the shared rows */
        if (mlp && beside) st = aux_join(m, s, st, "tpm_cuda_moe_experts");
        return st;
    }
    if (m->tune.prefill_gemm == TPM_MOE_GEMM_WGMMA) {
        const int split = tpm_cuda_moe_shared_plan(m, T) == TPM_MOE_SHARED_SPLIT;
        if (split && !issued) { /* the shared slot's rows from dense cuBLAS GEMMs, then the routed experts */
            TPM_TRY(bind_blas(m, s));
            TPM_TRY(shared_mlp_for(m, m->blas, x, T, s));
        }
        return tpm_moe_prefill_wgmma(d, m->wg, (const uint16_t *)x, T, tpm_cuda_moe_prefill_form(m, T),
                                     m->tune.prefill_band, split, T <= m->tune.prefill_early && use_pdl(m, s),
                                     T <= m->tune.prefill_down_early && use_pdl(m, s), s);
    }
    TPM_CUDA_TRY(cudaMemcpyAsync(m->h_offsets, d.offsets, (size_t)(d.E1 + 1) * 4, cudaMemcpyDeviceToHost, s));
    TPM_CUDA_TRY(cudaStreamSynchronize(s));
    TPM_TRY(bind_blas(m, s));
    m->pf.mode = m->tune.prefill_gemm;
    return tpm_moe_prefill_experts(d, m->blas, m->pf, (const uint16_t *)x, T, m->h_offsets, s);
}

tpm_status tpm_cuda_moe_combine(tpm_cuda_moe *m, int T, void *y, void *stream) {
    TPM_TRY(check_call(m, y, T));
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    set_call(m, T);
    const int bf = tpm_cuda_moe_path_for(m, T) == TPM_MOE_PATH_PREFILL;
    const int pdl = !bf && m->tune.decode_kernel == 2 && use_pdl(m, (cudaStream_t)stream);
    return tpm_moe_launch_combine(m->d, T, bf, pdl, (uint16_t *)y, (cudaStream_t)stream);
}

tpm_status tpm_cuda_moe_allreduce(tpm_cuda_moe *m, void *y, int T, void *stream) {
    TPM_TRY(check_call(m, y, T));
    if (m->desc.tp * m->d.ep == 1) return TPM_OK;
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    NCCL_TRY(ncclAllReduce(y, y, (size_t)T * m->d.H, ncclBfloat16, ncclSum, (ncclComm_t)m->desc.nccl_comm,
                           (cudaStream_t)stream));
    return TPM_OK;
}

tpm_status tpm_cuda_moe_forward(tpm_cuda_moe *m, const void *x, int T, void *y, void *stream) {
    TPM_TRY(check_call(m, x, T));
    TPM_ARG_CHECK(y, "tpm_cuda_moe_forward: null output");
    TPM_TRY(tpm_cuda_moe_route(m, x, T, stream));
    TPM_TRY(tpm_cuda_moe_experts(m, x, T, stream));
    TPM_TRY(tpm_cuda_moe_combine(m, T, y, stream));
    return tpm_cuda_moe_allreduce(m, y, T, stream);
}

/* MARK: warm-up */
/* Where one process drives several GPUs (tpm_comm_init_all), a library's first use in a forward
 * can deadlock: cuBLASLt loads a kernel library (cuLibraryLoadData) on its first GEMM of a kind,
 * and the load waits for the device to drain while another rank's all-reduce kernel already spins
 * there for this rank (bench/results/r117: EP rank 0's dense shared MLP, the only rank calling
 * cuBLAS, held the driver's lock while EP rank 1's all-reduce waited for it). So the layer runs
 * its own compute phases once per token-count bucket before any forward: every cuBLAS call site
 * (router GEMM, dense / split shared MLP, the grouped cuBLAS prefill) and every own kernel of the
 * default paths has been used once, with the M of its bucket. x is a constant pattern (all tokens
 * route alike); the weights may still be zero. The record of the last routing is overwritten. */
tpm_status tpm_cuda_moe_warm(tpm_cuda_moe *m) {
    TPM_ARG_CHECK(m, "tpm_cuda_moe_warm: null argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    const size_t bytes = (size_t)m->max_tokens * m->d.H * 2;
    void *x = NULL, *y = NULL;
    cudaStream_t s = NULL;
    tpm_status st = TPM_OK;
    if (cudaMalloc(&x, bytes) != cudaSuccess || cudaMalloc(&y, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMemsetAsync(x, 0x3c, bytes, s) != cudaSuccess) { /* bf16 0x3c3c = 0.0115 */
        (void)cudaGetLastError();
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_warm: %zu-byte buffers or a stream: out of device memory",
                     2 * bytes);
    }
    /* the sizes: 1..8 one by one (the decode path), the first sizes past the decode and
     * decode-kernel limits, then 12 16 24 32 48 64 ... (steps of 1.33-1.5x) and max_tokens */
    int sizes[64], ns = 0;
    for (int t = 1; t <= 8; t++) sizes[ns++] = t;
    sizes[ns++] = m->tune.decode_max_tokens + 1;
    sizes[ns++] = TPM_MOE_DECODE_MAX_NT + 1;
    for (int t = 12; t < m->max_tokens && ns < 63; t = t & (t - 1) ? t / 3 * 4 : t / 2 * 3) sizes[ns++] = t;
    sizes[ns++] = m->max_tokens;
    for (int i = 0; i < ns && st == TPM_OK; i++) {
        const int T = sizes[i];
        if (T > m->max_tokens) continue;
        st = tpm_cuda_moe_route(m, x, T, s);
        if (st == TPM_OK) st = tpm_cuda_moe_experts(m, x, T, s);
        if (st == TPM_OK) st = tpm_cuda_moe_combine(m, T, y, s);
    }
    /* EP rank 0's dense shared MLP: every bucket of shared_rows, on both handles it may use
     * (the forward's, and aux stream 0's where a call overlaps it with the routing) */
    if (st == TPM_OK && m->sh_x && cudaStreamSynchronize(s) != cudaSuccess)
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_warm: %s", cudaGetErrorString(cudaGetLastError()));
    for (int T = 1, last = 0; m->sh_x && st == TPM_OK && T <= m->sh_rows; T++) {
        const int P = shared_rows(m, T);
        if (P == last) continue;
        last = P;
        st = bind_blas(m, s);
        if (st == TPM_OK) st = shared_mlp(m, m->blas, x, P, s);
        if (st == TPM_OK && m->tune.shared_overlap) st = shared_mlp(m, m->pf.blas_aux[0], x, P, m->pf.aux[0]);
    }
    if (m->sh_x && cudaStreamSynchronize(m->pf.aux[0]) != cudaSuccess && st == TPM_OK)
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_warm: %s", cudaGetErrorString(cudaGetLastError()));
    if (s && cudaStreamSynchronize(s) != cudaSuccess && st == TPM_OK)
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_moe_warm: %s", cudaGetErrorString(cudaGetLastError()));
    if (st == TPM_OK) st = tpm_cuda_moe_check(m);
    if (s) cudaStreamDestroy(s);
    if (x) cudaFree(x);
    if (y) cudaFree(y);
    return st;
}

/* MARK: inspection */
int tpm_cuda_moe_slots(const tpm_cuda_moe *m) { return m ? m->d.K : 0; }
int tpm_cuda_moe_local_inter(const tpm_cuda_moe *m) { return m ? m->d.Il : 0; }
uint64_t tpm_cuda_moe_expert_bytes(const tpm_cuda_moe *m) {
    return m ? (uint64_t)3 * m->d.Il * m->d.H * 2 : 0;
}

tpm_status tpm_cuda_moe_get_routing(tpm_cuda_moe *m, int T, int32_t *sel, float *wts, int32_t *counts) {
    TPM_ARG_CHECK(m && T >= 1 && T <= m->max_tokens, "tpm_cuda_moe_get_routing: bad argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    TPM_CUDA_TRY(cudaDeviceSynchronize());
    return tpm_cuda_moe_read_routing(m, T, sel, wts, counts);
}

tpm_status tpm_cuda_moe_read_routing(tpm_cuda_moe *m, int T, int32_t *sel, float *wts, int32_t *counts) {
    TPM_ARG_CHECK(m && T >= 1 && T <= m->max_tokens, "tpm_cuda_moe_read_routing: bad argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    const size_t R = (size_t)T * m->d.K;
    if (sel) TPM_CUDA_TRY(cudaMemcpy(sel, m->d.sel, R * 4, cudaMemcpyDeviceToHost));
    if (wts) TPM_CUDA_TRY(cudaMemcpy(wts, m->d.wts, R * 4, cudaMemcpyDeviceToHost));
    if (counts) TPM_CUDA_TRY(cudaMemcpy(counts, m->d.counts, (size_t)m->d.E1 * 4, cudaMemcpyDeviceToHost));
    return TPM_OK;
}

tpm_status tpm_cuda_moe_get_expert(tpm_cuda_moe *m, int slot, uint16_t *gate_up, uint16_t *down) {
    TPM_ARG_CHECK(m && slot >= 0 && slot < m->d.E1, "tpm_cuda_moe_get_expert: bad argument");
    TPM_CUDA_TRY(cudaSetDevice(m->desc.device));
    const size_t n13 = (size_t)2 * m->d.Il * m->d.H, n2 = (size_t)m->d.H * m->d.Il;
    if (gate_up) TPM_CUDA_TRY(cudaMemcpy(gate_up, m->d.w13 + slot * n13, n13 * 2, cudaMemcpyDeviceToHost));
    if (down) TPM_CUDA_TRY(cudaMemcpy(down, m->d.w2 + slot * n2, n2 * 2, cudaMemcpyDeviceToHost));
    return TPM_OK;
}

/* MARK: NCCL */
tpm_status tpm_cuda_nccl_init_all(int n, const int *devices, void **comms) {
    TPM_ARG_CHECK(n >= 1 && n <= 64 && comms, "tpm_cuda_nccl_init_all: bad argument");
    NCCL_TRY(ncclCommInitAll((ncclComm_t *)comms, n, devices));
    return TPM_OK;
}

void tpm_cuda_nccl_destroy(void *comm) {
    if (comm) ncclCommDestroy((ncclComm_t)comm);
}

tpm_status tpm_cuda_nccl_group(int begin) {
    if (begin) NCCL_TRY(ncclGroupStart());
    else NCCL_TRY(ncclGroupEnd());
    return TPM_OK;
}
