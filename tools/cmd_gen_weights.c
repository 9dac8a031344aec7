/*
 * cmd_gen_weights.c - `tpmoe gen-weights`: write random MoE weights of a
 * preset to a safetensors file (names in docs/weights.md), streamed tensor by
 * tensor so the full-size presets work without holding a layer in memory.
 */
#include "cli.h"
#include "internal.h"
#include "model/moe_weights.h"
#include "model/presets.h"

#include <stdio.h>
#include <string.h>

static const char *const help_text =
    "usage: tpmoe gen-weights --preset P -o FILE [--seed S] [--layers N] [--dtype bf16|fp16|fp32|fp8] [--quiet]\n"
    "\n"
    "Write random weights for N MoE layers (layer indices 0..N-1, default 1) of preset P to FILE\n"
    "(safetensors). Deterministic for a seed (default 0). Expert weights ~ N(0, 1/fan_in) rounded to\n"
    "bf16, router ~ N(0, 1/hidden) fp32, e_score_correction_bias ~ N(0, 0.01^2) fp32, gpt-oss expert\n"
    "biases ~ N(0, 0.02^2) bf16. --dtype sets the expert weight dtype (default: the preset's, bf16);\n"
    "fp8 writes E4M3 weights + E8M0 scales per 1x32 block (<name>_scale, U8). Tensor names: see\n"
    "docs/weights.md. A progress line goes to stderr for files over 256 MiB (--quiet: none).\n"
    "Exit codes: 0 written, 1 write failed, 2 bad usage.\n";

typedef struct progress_state {
    double t0;
    uint64_t next;
    int quiet;
} progress_state;

static void on_progress(uint64_t done, uint64_t total, void *user) {
    progress_state *ps = user;
    if (ps->quiet || total < (256ull << 20) || (done < ps->next && done < total)) return;
    double dt = tpm_now_s() - ps->t0;
    fprintf(stderr, "tpmoe gen-weights: %.2f / %.2f GB (%.0f%%), %.1f s, %.0f MB/s\n", (double)done / 1e9,
            (double)total / 1e9, 100.0 * (double)done / (double)total, dt, dt > 0 ? (double)done / 1e6 / dt : 0.0);
    ps->next = done + total / 20;
}

static void list_presets(char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    for (const tpm_preset *const *p = tpm_preset_list(); *p && k < len; p++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? ", " : "", (*p)->name);
}

int cmd_gen_weights(int argc, char **argv) {
    const char *cmd = "gen-weights", *preset_name = NULL, *out = NULL, *dtype = NULL;
    long long seed = 0, layers = 1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help_text, stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (!v) return cli_usage_error(cmd, "option '%s' needs a value", a);
        if (!strcmp(a, "--preset")) {
            preset_name = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, INT64_MAX, &seed)) return cli_usage_error(cmd, "bad --seed '%s'", v);
        } else if (!strcmp(a, "--layers")) {
            if (cli_parse_int(v, 1, 100000, &layers)) return cli_usage_error(cmd, "bad --layers '%s'", v);
        } else if (!strcmp(a, "--dtype")) {
            dtype = v;
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
        i++;
    }
    if (!preset_name) return cli_usage_error(cmd, "--preset is required");
    const tpm_preset *p = tpm_preset_find(preset_name);
    if (!p) {
        char names[256];
        list_presets(names, sizeof names);
        return cli_usage_error(cmd, "unknown preset '%s' (known: %s)", preset_name, names);
    }
    if (!out) return cli_usage_error(cmd, "-o FILE is required");
    tpm_weight_format fmt = p->routed_format;
    if (dtype) {
        if (!strcmp(dtype, "bf16"))
            fmt = TPM_WFMT_BF16;
        else if (!strcmp(dtype, "fp16"))
            fmt = TPM_WFMT_FP16;
        else if (!strcmp(dtype, "fp32"))
            fmt = TPM_WFMT_FP32;
        else if (!strcmp(dtype, "fp8"))
            fmt = TPM_WFMT_FP8_E4M3;
        else
            return cli_usage_error(cmd, "bad --dtype '%s' (bf16, fp16, fp32 or fp8)", dtype);
    }
    progress_state ps = {tpm_now_s(), 0, quiet};
    tpm_status st = tpm_moe_weights_generate(p, (uint64_t)seed, (int)layers, fmt, out, on_progress, &ps);
    if (st != TPM_OK) return cli_fail(cmd, "writing weights", st, tpm_last_error());
    double dt = tpm_now_s() - ps.t0;
    uint64_t bytes = tpm_moe_layer_bytes(p, fmt) * (uint64_t)layers;
    printf("wrote %s: preset %s, %lld layer%s, seed %lld, %s, %.1f MB in %.2f s\n", out, p->name, layers,
           layers == 1 ? "" : "s", seed, dtype ? dtype : "bf16", (double)bytes / 1e6, dt);
    return 0;
}
