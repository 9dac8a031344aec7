/*
 * router.c - the MoE router on the CPU: fp32 logits, then per token either
 *   sigmoid scoring + e_score_correction_bias (selection only), optionally
 *   grouped (DeepSeek-V3), top-k, renormalize, routed scaling folded in; or
 *   top-k on the logits + softmax over the k selected (gpt-oss).
 *
 * Every comparison goes through one strict total order on (score, index):
 * a higher score wins, equal scores go to the lower index. NaN scores are
 * replaced by -Inf before any comparison, so the order is total, the
 * selection is always k distinct in-range experts, and an expert with a NaN
 * score is chosen only when fewer than k experts have a number (then the
 * lowest-index ones). The exact rules are in docs/moe.md.
 */
#include "moe/moe_math.h"

#include "internal.h"
#include "numeric.h"

#include <math.h>
#include <string.h>

tpm_status tpm_router_params_check(const tpm_router_params *rp) {
    TPM_ARG_CHECK(rp != NULL, "router params are NULL");
    TPM_ARG_CHECK(rp->kind == TPM_ROUTER_SIGMOID_BIAS || rp->kind == TPM_ROUTER_GROUPED_SIGMOID ||
                      rp->kind == TPM_ROUTER_SOFTMAX_TOPK,
                  "router kind %d is not a known router", (int)rp->kind);
    TPM_ARG_CHECK(rp->n_experts >= 1 && rp->n_experts <= TPM_MOE_MAX_EXPERTS,
                  "router: n_experts %d outside [1, %d]", rp->n_experts, TPM_MOE_MAX_EXPERTS);
    TPM_ARG_CHECK(rp->top_k >= 1 && rp->top_k <= rp->n_experts && rp->top_k <= TPM_MOE_MAX_TOPK,
                  "router: top_k %d outside [1, min(n_experts %d, %d)]", rp->top_k, rp->n_experts,
                  TPM_MOE_MAX_TOPK);
    TPM_ARG_CHECK(isfinite(rp->routed_scaling_factor) && rp->routed_scaling_factor > 0.0f,
                  "router: routed_scaling_factor %g must be finite and > 0",
                  (double)rp->routed_scaling_factor);
    if (rp->kind == TPM_ROUTER_GROUPED_SIGMOID) {
        TPM_ARG_CHECK(rp->n_groups >= 1 && rp->n_experts % rp->n_groups == 0,
                      "router: n_groups %d must divide n_experts %d", rp->n_groups, rp->n_experts);
        TPM_ARG_CHECK(rp->topk_groups >= 1 && rp->topk_groups <= rp->n_groups,
                      "router: topk_groups %d outside [1, n_groups %d]", rp->topk_groups,
                      rp->n_groups);
        TPM_ARG_CHECK(rp->topk_groups * (rp->n_experts / rp->n_groups) >= rp->top_k,
                      "router: %d kept groups of %d experts cannot hold top_k %d", rp->topk_groups,
                      rp->n_experts / rp->n_groups, rp->top_k);
    }
    return TPM_OK;
}

tpm_status tpm_router_params_from_preset(const tpm_preset *p, tpm_router_params *rp) {
    TPM_ARG_CHECK(p != NULL && rp != NULL, "router params from preset: NULL argument");
    memset(rp, 0, sizeof *rp);
    rp->kind = p->router;
    rp->n_experts = p->n_experts;
    rp->top_k = p->top_k;
    rp->n_groups = p->router == TPM_ROUTER_GROUPED_SIGMOID ? p->n_groups : 1;
    rp->topk_groups = p->router == TPM_ROUTER_GROUPED_SIGMOID ? p->topk_groups : 1;
    rp->routed_scaling_factor = p->routed_scaling_factor;
    tpm_status st = tpm_router_params_check(rp);
    if (st != TPM_OK) return tpm_err(st, "preset %s: %s", p->name ? p->name : "?", tpm_err_msg());
    return TPM_OK;
}

void tpm_router_logits(const float *x, const float *wr, int hidden, int n_experts, float *logits) {
    for (int e = 0; e < n_experts; e++)
        logits[e] = tpm_dot_f32(x, wr + (size_t)e * (size_t)hidden, (size_t)hidden);
}

/* MARK: top-k under the (score desc, index asc) order */

static inline float sanitize(float v) {
    return isnan(v) ? -INFINITY : v;
}

/* Insert (id, v) into the sorted list ids/vals of length *n (capacity k).
 * Candidates must arrive in increasing id order: an equal score then never
 * displaces an earlier (lower) id. */
static void topk_insert(int32_t *ids, float *vals, int *n, int k, int32_t id, float v) {
    int j;
    if (*n == k) {
        if (!(v > vals[k - 1])) return;
        j = k - 1;
    } else {
        j = (*n)++;
    }
    while (j > 0 && vals[j - 1] < v) {
        vals[j] = vals[j - 1];
        ids[j] = ids[j - 1];
        j--;
    }
    vals[j] = v;
    ids[j] = id;
}

static float sigmoid_f32(float l) {
    return 1.0f / (1.0f + expf(-l));
}

/* Grouped selection: mark kept groups in keep[] (1/0). q: sanitized keys. */
static void keep_groups(const tpm_router_params *rp, const float *q, float *gscore, char *keep) {
    int gs = rp->n_experts / rp->n_groups;
    int top2 = gs < 2 ? gs : 2;
    for (int g = 0; g < rp->n_groups; g++) {
        int32_t bid[2] = {0, 0};
        float bv[2] = {-INFINITY, -INFINITY};
        int nb = 0;
        for (int i = 0; i < gs; i++)
            topk_insert(bid, bv, &nb, top2, g * gs + i, q[g * gs + i]);
        float s = bv[0];
        if (top2 == 2) s = bv[0] + bv[1];
        gscore[g] = sanitize(s); /* +Inf + -Inf */
    }
    int32_t gid[TPM_MOE_MAX_EXPERTS];
    float gv[TPM_MOE_MAX_EXPERTS];
    int ng = 0;
    for (int g = 0; g < rp->n_groups; g++)
        topk_insert(gid, gv, &ng, rp->topk_groups, g, gscore[g]);
    for (int g = 0; g < rp->n_groups; g++)
        keep[g] = 0;
    for (int i = 0; i < ng; i++)
        keep[gid[i]] = 1;
}

void tpm_router_select(const tpm_router_params *rp, const float *logits, const float *bias,
                       int32_t *ids, float *weights, float *scratch) {
    const int E = rp->n_experts, k = rp->top_k;
    float *q = scratch;          /* [E] selection keys */
    float *gscore = scratch + E; /* [n_groups] */
    float vals[TPM_MOE_MAX_TOPK];
    int n = 0;

    if (rp->kind == TPM_ROUTER_SOFTMAX_TOPK) {
        for (int e = 0; e < E; e++)
            q[e] = sanitize(bias ? logits[e] + bias[e] : logits[e]);
        for (int e = 0; e < E; e++)
            topk_insert(ids, vals, &n, k, e, q[e]);
        float m = vals[0], sum = 0.0f;
        for (int j = 0; j < k; j++) {
            float w;
            if (m == -INFINITY)
                w = 1.0f; /* nothing has a number: uniform */
            else if (m == INFINITY)
                w = vals[j] == INFINITY ? 1.0f : 0.0f;
            else
                w = expf(vals[j] - m);
            weights[j] = w;
            sum += w;
        }
        for (int j = 0; j < k; j++)
            weights[j] = (weights[j] / sum) * rp->routed_scaling_factor;
        return;
    }

    /* Sigmoid kinds: c = s + bias for selection, s for the weights. A NaN
     * logit counts as -Inf (s = 0, key = its bias), as on the GPU. */
    for (int e = 0; e < E; e++) {
        float s = sigmoid_f32(sanitize(logits[e]));
        q[e] = sanitize(bias ? s + bias[e] : s);
    }
    if (rp->kind == TPM_ROUTER_GROUPED_SIGMOID && rp->topk_groups < rp->n_groups) {
        char keep[TPM_MOE_MAX_EXPERTS];
        int gs = E / rp->n_groups;
        keep_groups(rp, q, gscore, keep);
        for (int e = 0; e < E; e++)
            if (keep[e / gs]) topk_insert(ids, vals, &n, k, e, q[e]);
    } else {
        for (int e = 0; e < E; e++)
            topk_insert(ids, vals, &n, k, e, q[e]);
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) {
        weights[j] = sigmoid_f32(sanitize(logits[ids[j]])); /* NaN logit: 0 */
        sum += weights[j];
    }
    for (int j = 0; j < k; j++) {
        float w = sum > 0.0f ? weights[j] / sum : 1.0f / (float)k;
        weights[j] = w * rp->routed_scaling_factor;
    }
}

void tpm_router_route(const tpm_router_params *rp, const void *x, tpm_dtype dt, size_t ntokens,
                      int hidden, const float *wr, const float *bias, int32_t *ids, float *weights,
                      float *scratch) {
    const int E = rp->n_experts, k = rp->top_k;
    float *xf = scratch;               /* [hidden] */
    float *logits = scratch + hidden;  /* [E] */
    float *sel = scratch + hidden + E; /* [2E] */
    for (size_t t = 0; t < ntokens; t++) {
        for (int i = 0; i < hidden; i++)
            xf[i] = tpm_load_f32(x, (int)dt, t * (size_t)hidden + (size_t)i);
        tpm_router_logits(xf, wr, hidden, E, logits);
        tpm_router_select(rp, logits, bias, ids + t * (size_t)k, weights + t * (size_t)k, sel);
    }
}
