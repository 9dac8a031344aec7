/*
 * reference.c - an fp64 evaluation of one MoE layer (unsharded weights), the
 * yardstick of `tpmoe moe --check` and the layer tests.
 *
 * The expert ids are given (the fp32 router's selection): re-selecting in
 * fp64 could flip a near-tie and turn a rounding difference into a
 * different expert. Everything else (logits, scores, weights, both
 * projections, the activation, the combine) is recomputed in fp64 from the
 * same fp32 weights and the widened input.
 */
#include "moe/moe_math.h"

#include "internal.h"
#include "numeric.h"

#include <math.h>
#include <stdlib.h>

static double act_f64(const tpm_act_params *ap, double g, double u) {
    if (ap->kind == TPM_ACT_SILU_GLU) return tpm_act_silu_glu_f64(g, u);
    return tpm_act_swiglu_oai_f64(g, u, ap->alpha, ap->limit, ap->beta);
}

/* acc[o] += w * E(x)[o] in fp64. h: [2*inter] doubles of scratch. */
static void expert_f64(const tpm_act_params *ap, const tpm_expert_view *e, int hidden, int inter,
                       const double *x, double w, double *h, double *acc) {
    const size_t H = (size_t)hidden, I = (size_t)inter;
    for (size_t r = 0; r < 2 * I; r++) {
        double s = 0.0;
        for (size_t i = 0; i < H; i++)
            s += (double)e->gate_up[r * H + i] * x[i];
        h[r] = s + (e->gate_up_bias ? (double)e->gate_up_bias[r] : 0.0);
    }
    int il = ap->kind == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    for (size_t i = 0; i < I; i++) { /* in place: a[i] reads h[i]/h[2i] at or after i */
        double g = il ? h[2 * i] : h[i], u = il ? h[2 * i + 1] : h[I + i];
        h[i] = act_f64(ap, g, u);
    }
    for (size_t o = 0; o < H; o++) {
        double s = 0.0;
        for (size_t i = 0; i < I; i++)
            s += (double)e->down[o * I + i] * h[i];
        s += e->down_bias ? (double)e->down_bias[o] : 0.0;
        acc[o] += w * s;
    }
}

/* The routing weights of one token in fp64 for the given ids. */
static void weights_f64(const tpm_router_params *rp, const tpm_moe_ref_layer *L, const double *x,
                        const int32_t *ids, double *w) {
    const int k = rp->top_k;
    const size_t H = (size_t)L->hidden;
    double l[TPM_MOE_MAX_TOPK], sum = 0.0, m = -INFINITY;
    for (int j = 0; j < k; j++) {
        double s = 0.0;
        for (size_t i = 0; i < H; i++)
            s += (double)L->router[(size_t)ids[j] * H + i] * x[i];
        l[j] = s;
    }
    if (rp->kind == TPM_ROUTER_SOFTMAX_TOPK) {
        for (int j = 0; j < k; j++) {
            if (L->router_bias) l[j] += (double)L->router_bias[ids[j]];
            if (l[j] > m) m = l[j];
        }
        for (int j = 0; j < k; j++)
            sum += (w[j] = isfinite(m) ? exp(l[j] - m) : 1.0);
    } else {
        for (int j = 0; j < k; j++) {
            w[j] = 1.0 / (1.0 + exp(-l[j]));
            if (isnan(w[j])) w[j] = 0.0;
            sum += w[j];
        }
    }
    for (int j = 0; j < k; j++)
        w[j] = (sum > 0.0 ? w[j] / sum : 1.0 / k) * (double)rp->routed_scaling_factor;
}

tpm_status tpm_moe_reference_f64(const tpm_router_params *rp, const tpm_act_params *ap,
                                 const tpm_moe_ref_layer *L, const void *x, tpm_dtype dt,
                                 size_t ntokens, const int32_t *ids, double *y,
                                 double *weights_out) {
    TPM_ARG_CHECK(rp && ap && L && x && ids && y, "fp64 reference: NULL argument");
    TPM_ARG_CHECK(L->hidden > 0 && L->router && L->experts, "fp64 reference: empty layer");
    const int k = rp->top_k;
    const size_t H = (size_t)L->hidden;
    int maxi = L->inter > L->shared_inter ? L->inter : L->shared_inter;
    double *xd = malloc(H * sizeof *xd);
    double *h = malloc(2 * (size_t)maxi * sizeof *h);
    if (!xd || !h) {
        free(xd);
        free(h);
        return tpm_err(TPM_ERR_NO_MEMORY, "fp64 reference: out of memory");
    }
    for (size_t t = 0; t < ntokens; t++) {
        const int32_t *id = ids + t * (size_t)k;
        double w[TPM_MOE_MAX_TOPK];
        double *acc = y + t * H;
        for (size_t i = 0; i < H; i++)
            xd[i] = (double)tpm_load_f32(x, (int)dt, t * H + i);
        for (size_t i = 0; i < H; i++)
            acc[i] = 0.0;
        weights_f64(rp, L, xd, id, w);
        for (int j = 0; j < k; j++) {
            if (id[j] < 0 || id[j] >= L->n_experts) {
                free(xd);
                free(h);
                return tpm_err(TPM_ERR_INVALID_ARG,
                               "fp64 reference: token %zu slot %d: expert %d "
                               "out of range",
                               t, j, (int)id[j]);
            }
            expert_f64(ap, &L->experts[id[j]], L->hidden, L->inter, xd, w[j], h, acc);
            if (weights_out) weights_out[t * (size_t)k + (size_t)j] = w[j];
        }
        for (int s = 0; s < L->n_shared; s++)
            expert_f64(ap, &L->shared[s], L->hidden, L->shared_inter, xd, 1.0, h, acc);
    }
    free(xd);
    free(h);
    return TPM_OK;
}

/* MARK: fp64 routing of one token (the GPU checks' reference) */
double tpm_act_f64_preset(const tpm_preset *p, double g, double u) {
    tpm_act_params ap;
    tpm_act_params_from_preset(p, &ap);
    return act_f64(&ap, g, u);
}

tpm_status tpm_router_route_f64(const tpm_preset *p, const float *router, const float *bias,
                                const uint16_t *x, int *sel, double *w, double *c_out) {
    TPM_ARG_CHECK(p && router && x && sel && w, "fp64 routing: NULL argument");
    const int E = p->n_experts, H = p->hidden, k = p->top_k;
    /* scores, selection scores, group scores; then the eligibility flags */
    double *buf = malloc((size_t)E * (3 * sizeof(double) + 2));
    if (!buf) return tpm_err(TPM_ERR_NO_MEMORY, "fp64 routing: out of memory");
    double *s = buf, *c = buf + E, *gsc = buf + 2 * E;
    char *ok = (char *)(buf + 3 * E), *keep = ok + E;
    for (int e = 0; e < E; e++) {
        double l = 0;
        for (int h = 0; h < H; h++) l += (double)router[(size_t)e * H + h] * tpm_bf16_to_f32(x[h]);
        if (isnan(l)) l = -INFINITY;
        if (p->router == TPM_ROUTER_SOFTMAX_TOPK) {
            s[e] = fmax(fmin(l, 3.4e38), -3.4e38);
            c[e] = s[e];
        } else {
            s[e] = 1.0 / (1.0 + exp(-l));
            c[e] = s[e] + (bias ? bias[e] : 0.0);
        }
        ok[e] = 1;
    }
    if (p->router == TPM_ROUTER_GROUPED_SIGMOID && p->n_groups > 1) {
        const int G = p->n_groups, gs = E / G;
        for (int g = 0; g < G; g++) keep[g] = 0;
        for (int g = 0; g < G; g++) {
            double b1 = -INFINITY, b2 = -INFINITY;
            for (int i = 0; i < gs; i++) {
                const double v = c[g * gs + i];
                if (v > b1) {
                    b2 = b1;
                    b1 = v;
                } else if (v > b2)
                    b2 = v;
            }
            gsc[g] = gs >= 2 ? b1 + b2 : b1; /* the top min(2, group size), as the router */
        }
        for (int r = 0; r < p->topk_groups; r++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!keep[g] && (best < 0 || gsc[g] > gsc[best])) best = g;
            keep[best] = 1;
        }
        for (int e = 0; e < E; e++) ok[e] = keep[e / gs];
    }
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (ok[e] && (best < 0 || c[e] > c[best])) best = e;
        ok[best] = 0;
        sel[r] = best;
    }
    double sum = 0;
    const double rsf = p->routed_scaling_factor;
    if (p->router == TPM_ROUTER_SOFTMAX_TOPK) {
        for (int r = 0; r < k; r++) sum += exp(s[sel[r]] - s[sel[0]]);
        for (int r = 0; r < k; r++) w[r] = exp(s[sel[r]] - s[sel[0]]) / sum * rsf;
    } else {
        for (int r = 0; r < k; r++) sum += s[sel[r]];
        for (int r = 0; r < k; r++) w[r] = sum > 0 ? s[sel[r]] / sum * rsf : rsf / k;
    }
    if (c_out)
        for (int e = 0; e < E; e++) c_out[e] = c[e];
    free(buf);
    return TPM_OK;
}
