#!/usr/bin/env python3
"""moe_ref.py - an independent fp64 implementation of one tpmoe MoE layer, and the check that
`tpmoe moe` matches it on the same weights and inputs.

Written from the written specification only (docs/moe.md, docs/weights.md, README.md,
shared/reference/minimax-m3.md), never from tpmoe's C code: safetensors parsed with json + struct,
the math in NumPy float64. Per case: weights (`tpmoe gen-weights`, or written here), a fresh seeded
input x (BF16 or F32 safetensors), `tpmoe moe --weights W --input X --output Y`, then router,
experts, shared expert and combine recomputed in fp64 and compared:

  topk_ids      equal, except at near-ties (below): at most MAX_NEAR_TIE_MISMATCH tokens a case
  topk_weights  |w - w_ref| <= 1e-5 |w_ref|, w_ref the fp64 weights of the ids the tool chose
                (CUDA backend: 5e-5)
  y (BF16)      relative RMS vs the unrounded fp64 layer <= 2e-3 at TP 1, 3e-3 at TP 2 (docs/moe.md:
                "~2e-3 at TP 1 (the output rounding), ~3e-3 at TP 2"); and vs the fp64 layer with
                the spec's rounding points applied (TP 1: round(acc); TP 2: each rank's partial
                rounded to bf16, the rounded partials summed, the sum rounded): no element more than
                one rounding step off (1 ulp of y, 1 ulp of each partial, 2e-6 x the token's RMS
                for fp32's error near 0), at most 0.5% of the elements different at all (CPU
                backend; other backends: printed only). CUDA backend: relative RMS <= 5e-3 at
                TP 1, 6e-3 at TP 2 (bf16 intermediates on its tensor-core paths, see W_REL_GPU)
  y (F32)       relative RMS vs the fp64 layer <= 2e-6 (tighter than `--check`'s 1e-5: fp32
                arithmetic measures 2.3e-7 .. 5.3e-7 here, and 2e-6 still catches a swiglu gate
                that is also clamped from below, 4.3e-6 .. 4.7e-6, which bf16 outputs cannot see)

Near-tie: in the fp64 ranking of a token's candidate keys (descending), two neighbours among the
first k+1 with |a - b| <= 1e-5 * max(1, |a|, |b|), or, for grouped routers, the group scores at
the topk_groups boundary likewise. Only such a token may get other ids (or another order) than
the fp64 selection; its reference then uses the tool's ids.

usage: python3 tests/indep/moe_ref.py [--tool PATH] [--backend cpu|cuda] [--full] [--workdir DIR]
       python3 tests/indep/moe_ref.py --check-file WEIGHTS OUTPUT   (one existing output file)
Tool: --tool, else $TPMOE_TOOL, else build/tpmoe. Exit 0: all passed; 1: a failure. Needs numpy
(Debian: python3-numpy); without it this fails, it does not skip.
"""
import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:
    print("moe_ref: FAIL: numpy is missing (apt-get install python3-numpy)", file=sys.stderr)
    sys.exit(1)

# MARK: presets (docs/moe.md "Presets")
# H hidden, E routed experts, I routed / Is shared intermediate (0: no shared expert), k top-k,
# rsf routed scaling factor; kind: sigmoid (+ e_score_correction_bias) or softmax; groups:
# (n_groups, topk_groups); act: swiglu-oai (alpha 1.702, limit 7, beta 1) or silu-glu; biases:
# w1/w3/w2 biases (gpt-oss).
PRESETS = {
    "m3-mini": dict(H=512, E=32, I=256, Is=256, k=4, rsf=2.0, kind="sigmoid", groups=None,
                    act="swiglu-oai"),
    "deepseek-v3-mini": dict(H=512, E=64, I=128, Is=128, k=8, rsf=2.5, kind="sigmoid",
                             groups=(8, 4), act="silu-glu"),
    "gpt-oss-mini": dict(H=512, E=32, I=512, Is=0, k=4, rsf=1.0, kind="softmax", groups=None,
                         act="swiglu-oai", biases=True),
}
SWIGLU_ALPHA, SWIGLU_LIMIT, SWIGLU_BETA = 1.702, 7.0, 1.0

# MARK: cases and bounds
TOKENS = 11   # odd, not a multiple of 4 tokens or 8 lanes; some experts get no token
# Weights per seed: 1 `tpmoe gen-weights` (bf16), 2 written by write_weights() below (an
# independent writer; expert weights in PY_WEIGHTS_DTYPE), 3 `tpmoe gen-weights --dtype fp8`.
PY_WEIGHTS_DTYPE = {"m3-mini": "BF16", "deepseek-v3-mini": "F32", "gpt-oss-mini": "F16"}
# Cases (seed, tp, fuse_shared, input dtype). QUICK, the ctest (~25 s of CPU in the Debug+ASan
# build): two seeds a preset; bf16 at TP 1 and 2 for each; F32 at TP 1 and 2, fused and not;
# fusion on and off at TP 1 and 2; a fused / unfused twin (m3-mini TP 2) for the bitwise check
# (docs/moe.md, combine order); weights from gen-weights (fp8, bf16) and from write_weights()
# (BF16, F32, F16). FULL (--full): every seed x TP x fusion x dtype.
QUICK = {
    "m3-mini": ((3, 1, 1, "bf16"), (3, 2, 1, "f32"), (2, 2, 0, "bf16"), (2, 2, 1, "bf16")),
    "deepseek-v3-mini": ((1, 1, 0, "bf16"), (2, 2, 1, "bf16"), (2, 1, 0, "f32")),
    "gpt-oss-mini": ((1, 1, 1, "bf16"), (2, 2, 1, "bf16"), (1, 2, 1, "f32")),
}
FULL = tuple((s, t, f, d) for s in (1, 2, 3) for t in (1, 2) for f in (1, 0)
             for d in ("bf16", "f32"))
TIE_REL = 1e-5              # near-tie: fp64 keys within 1e-5 * max(1, |a|, |b|)
MAX_NEAR_TIE_MISMATCH = 2   # tokens per case whose ids may differ (near-ties only)
W_REL = 1e-5                # topk_weights, relative
Y_BF16_BOUND = {1: 2e-3, 2: 3e-3}   # y relative RMS vs the unrounded fp64 layer (docs/moe.md)
# The CUDA backend (docs/moe_cuda.md, Conventions): the router's logits summed in another order
# (tensor cores on the exact 3-way bf16 split) and CUDA's expf, and bf16 intermediates where its
# GEMMs run on tensor cores (prefill: gate_up output, activation, expert rows; the shared expert's
# dense MLP of the split / unfused plans): measured 2.2e-3 .. 3.9e-3 on the mini presets
# (final20_moe), weights to 1.2e-5. Its fused and unfused layers are not bitwise equal.
W_REL_GPU = 5e-5
Y_BF16_BOUND_GPU = {1: 5e-3, 2: 6e-3}
Y_F32_BOUND = 2e-6          # y relative RMS, fp32 activations (measured <= 5.3e-7)
DIFF_MAX_SHARE = 0.005      # bf16: share of elements not equal to the rounding model (CPU)

# MARK: safetensors (8-byte little-endian header length, JSON header, data section)

ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I32": "<i4",
             "I64": "<i8", "U8": "u1", "F8_E4M3": "u1"}


def st_read(path):
    """Returns (tensors {name: (dtype, ndarray raw)}, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=ST_DTYPES[t["dtype"]]).reshape(t["shape"])
        out[name] = (t["dtype"], arr)
    return out, meta


def st_write(path, tensors, meta):
    """tensors: list of (name, dtype string, ndarray already in that dtype's storage)."""
    header = {"__metadata__": meta}
    off = 0
    blobs = []
    for name, dt, arr in tensors:
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_to_f64(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_to_f64(codes):
    """e4m3fn: bias 7, no infinities, 0x7F / 0xFF NaN (docs/weights.md, fp8)."""
    c = codes.astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> 3) & 0xF
    m = (c & 7).astype(np.float64)
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * 2.0 ** (e - 7))
    v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    return s * v


def st_f64(tensors, name):
    if name not in tensors:
        raise KeyError(f"tensor '{name}' missing")
    dt, a = tensors[name]
    if dt == "BF16":
        v = bf16_to_f64(a)
    elif dt in ("F32", "F16", "F64"):
        v = a.astype(np.float64)
    elif dt == "F8_E4M3":
        _, sc = tensors[name + "_scale"]
        v = e4m3_to_f64(a)
        scale = np.where(sc == 0xFF, np.nan, 2.0 ** (sc.astype(np.float64) - 127))
        v = v * np.repeat(scale, 32, axis=-1)[..., :v.shape[-1]]
    else:
        raise ValueError(f"tensor '{name}': dtype {dt} is not a float")
    return v


def round_bf16(v):
    """float64 -> nearest bf16 value (ties to even), exact (no double rounding through fp32)."""
    m, e = np.frexp(v)                        # v = m * 2^e, 0.5 <= |m| < 1
    return np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)   # 8 significant bits; rint: ties to even


def f64_to_bf16_bits(v):
    r = round_bf16(v).astype(np.float32)      # exact: a bf16 value is an fp32 value
    return (r.view(np.uint32) >> 16).astype(np.uint16)


def write_weights(path, preset, seed, dtype):
    """Random weights of a preset in the layout of docs/weights.md, written here (not by tpmoe):
    expert matrices N(0, 1/fan_in) rounded to bf16, then stored as `dtype` (BF16, F16 or F32);
    router N(0, 1/H) F32; correction bias N(0, 0.01^2) F32; gpt-oss biases N(0, 0.02^2)."""
    P = PRESETS[preset]
    H, E, I, Is = P["H"], P["E"], P["I"], P["Is"]
    rng = np.random.default_rng(7000 + seed)
    p = "model.layers.0.block_sparse_moe."

    def enc(v):
        v = round_bf16(v)
        if dtype == "BF16":
            return f64_to_bf16_bits(v)
        return v.astype(np.float16 if dtype == "F16" else np.float32)

    t = [(p + "gate.weight", "F32", (rng.standard_normal((E, H)) / np.sqrt(H)).astype(np.float32))]
    if P["kind"] == "sigmoid":
        bias = (0.01 * rng.standard_normal(E)).astype(np.float32)
        t.append((p + "e_score_correction_bias", "F32", bias))
    mlps = [(f"experts.{e}.", I) for e in range(E)] + ([("shared_experts.", Is)] if Is else [])
    for q, n in mlps:
        for wn, shape, fan in (("w1", (n, H), H), ("w3", (n, H), H), ("w2", (H, n), n)):
            v = rng.standard_normal(shape) / np.sqrt(fan)
            t.append((p + q + wn + ".weight", dtype, enc(v)))
        if P.get("biases"):
            for wn, m in (("w1", n), ("w3", n), ("w2", H)):
                t.append((p + q + wn + ".bias", dtype, enc(0.02 * rng.standard_normal(m))))
    st_write(path, t, {"format": "pt"})


def bf16_ulp(v):
    _, e = np.frexp(np.where(v == 0, 1.0, v))
    return np.ldexp(1.0, e - 8)

# MARK: the layer in fp64


class Weights:
    def __init__(self, path, layer):
        t, self.meta = st_read(path)
        p = f"model.layers.{layer}.block_sparse_moe."
        self.router = st_f64(t, p + "gate.weight")                      # [E, H]
        bname = p + "e_score_correction_bias"
        self.bias = st_f64(t, bname) if bname in t else None
        self.E, self.H = self.router.shape
        self.experts = [self._mlp(t, p + f"experts.{e}.") for e in range(self.E)]
        self.shared = []
        if p + "shared_experts.w1.weight" in t:
            self.shared.append(self._mlp(t, p + "shared_experts."))

    @staticmethod
    def _mlp(t, q):
        m = {w: st_f64(t, q + w + ".weight") for w in ("w1", "w3", "w2")}
        for w in ("w1", "w3", "w2"):
            m[w + "b"] = st_f64(t, q + w + ".bias") if q + w + ".bias" in t else None
        return m


def sigmoid(z):
    ez = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + ez), ez / (1.0 + ez))


def near(a, b):
    return abs(a - b) <= TIE_REL * max(1.0, abs(a), abs(b))


def route(x, w, P):
    """fp64 router per docs/moe.md "Router". Returns ids [B, k] (selection order), the logits
    [B, E] (for route_weights) and, per token, whether it is a near-tie."""
    B, k = x.shape[0], P["k"]
    logits = x @ w.router.T
    ids = np.zeros((B, k), dtype=np.int64)
    ties = np.zeros(B, dtype=bool)
    for t in range(B):
        if P["kind"] == "sigmoid":
            key = sigmoid(logits[t]) + (w.bias if w.bias is not None else 0.0)
        else:
            key = logits[t] + 0.0
        cand = np.arange(w.E)
        if P["groups"]:
            ng, kg = P["groups"]
            per = w.E // ng
            gs = np.array([np.sort(key[g * per:(g + 1) * per])[-2:].sum() for g in range(ng)])
            gord = np.lexsort((np.arange(ng), -gs))
            ties[t] |= near(gs[gord[kg - 1]], gs[gord[kg]])
            cand = np.concatenate([np.arange(g * per, (g + 1) * per) for g in sorted(gord[:kg])])
        order = cand[np.lexsort((cand, -key[cand]))]
        ids[t] = order[:k]
        ties[t] |= any(near(key[order[i]], key[order[i + 1]])
                       for i in range(min(k, len(order) - 1)))
    return ids, logits, ties


def route_weights(logits, ids, P):
    """fp64 weights of the given ids: sigmoid scores renormalized (or softmax of the selected
    logits), routed scaling factor folded in."""
    sel = np.take_along_axis(logits, ids, axis=1)
    if P["kind"] == "sigmoid":
        s = sigmoid(sel)
        return s / s.sum(axis=1, keepdims=True) * P["rsf"]
    e = np.exp(sel - sel[:, :1])
    return e / e.sum(axis=1, keepdims=True) * P["rsf"]


def act(g, u, P):
    if P["act"] == "swiglu-oai":
        g = np.minimum(g, SWIGLU_LIMIT)
        u = np.clip(u, -SWIGLU_LIMIT, SWIGLU_LIMIT)
        return g * sigmoid(SWIGLU_ALPHA * g) * (u + SWIGLU_BETA)
    return g * sigmoid(g) * u


def mlp_partials(x, m, P, tp):
    """One expert on tokens x, split into tp partial outputs (rows of w1/w3 and columns of w2
    sharded on the intermediate; the down bias on TP rank 0 only)."""
    g = x @ m["w1"].T + (m["w1b"] if m["w1b"] is not None else 0.0)
    u = x @ m["w3"].T + (m["w3b"] if m["w3b"] is not None else 0.0)
    a = act(g, u, P)
    I = a.shape[1]
    parts = []
    for r in range(tp):
        sl = slice(r * I // tp, (r + 1) * I // tp)
        o = a[:, sl] @ m["w2"][:, sl].T
        if r == 0 and m["w2b"] is not None:
            o = o + m["w2b"]
        parts.append(o)
    return parts


def layer(x, w, P, ids, wts, tp):
    """Partial outputs [tp, B, H] (fp64) for the given routing."""
    B = x.shape[0]
    part = np.zeros((tp, B, w.H))
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        for r, o in enumerate(mlp_partials(x[tok], w.experts[e], P, tp)):
            np.add.at(part[r], tok, wts[tok, slot][:, None] * o)
    for m in w.shared:
        for r, o in enumerate(mlp_partials(x, m, P, tp)):
            part[r] += o                           # weight exactly 1.0 (rsf folded into routed)
    return part

# MARK: cases


def rel_rms(a, ref):
    return float(np.sqrt(np.sum((a - ref) ** 2) / np.sum(ref ** 2)))


def make_input(seed, B, H):
    """Seeded N(0,1) rows; every 4th token x6 so that swiglu's clamps (limit 7) are exercised."""
    rng = np.random.default_rng(1000 + seed)
    x = rng.standard_normal((B, H))
    x[::4] *= 6.0
    return x


TOOL_SECONDS = [0.0]


def cpu_seconds():
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def run_tool(tool, args, log):
    t0 = time.time()
    r = subprocess.run([tool] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    TOOL_SECONDS[0] += time.time() - t0
    if r.returncode != 0:
        log(f"  `{' '.join([tool] + args)}` exited {r.returncode}:\n{r.stdout}")
        return False
    return True


def check_case(c, tool, backend, wdir, weights_cache, fused_outputs):
    preset, seed, tp, fuse, dt, ntok = c
    P = PRESETS[preset]
    wsrc = {1: "gen bf16", 2: PY_WEIGHTS_DTYPE[preset].lower() + " (py)", 3: "gen fp8"}[seed]
    name = f"{preset:<16} seed {seed} w {wsrc:<9} tp {tp} fuse {fuse} x {dt:<4} B {ntok}"
    msgs = []
    wpath = os.path.join(wdir, f"w_{preset}_s{seed}.safetensors")
    if wpath not in weights_cache:
        if seed == 2:
            write_weights(wpath, preset, seed, PY_WEIGHTS_DTYPE[preset])
        else:
            gen = ["gen-weights", "--preset", preset, "--seed", str(seed), "-o", wpath, "--quiet"]
            if not run_tool(tool, gen + (["--dtype", "fp8"] if seed == 3 else []), msgs.append):
                return False, name + ": gen-weights failed", msgs, None
        w = Weights(wpath, 0)
        shapes = (w.H, w.E, w.experts[0]["w1"].shape[0],
                  w.shared[0]["w1"].shape[0] if w.shared else 0)
        if shapes != (P["H"], P["E"], P["I"], P["Is"]):
            return False, f"{name}: weights H, E, I, Is = {shapes}, the preset table says " \
                f"{(P['H'], P['E'], P['I'], P['Is'])}", msgs, None
        weights_cache[wpath] = w
    w = weights_cache[wpath]
    x = make_input(seed, ntok, w.H)
    xin = os.path.join(wdir, f"x_{preset}_s{seed}_{dt}.safetensors")
    if dt == "bf16":
        st_write(xin, [("x", "BF16", f64_to_bf16_bits(x))], {"format": "pt"})
        x = round_bf16(x)
    else:
        x32 = x.astype(np.float32)
        st_write(xin, [("x", "F32", x32)], {"format": "pt"})
        x = x32.astype(np.float64)
    yout = os.path.join(wdir, f"y_{preset}_s{seed}_tp{tp}_f{fuse}_{dt}.safetensors")
    if os.path.exists(yout):
        os.remove(yout)
    t0 = time.time()
    if not run_tool(tool, ["moe", "--preset", preset, "--weights", wpath, "--layer", "0",
                           "--input", xin, "--output", yout, "--backend", backend, "--tp", str(tp),
                           "--fuse-shared", str(fuse), "--iters", "1"], msgs.append):
        return False, name + ": tpmoe moe failed", msgs, None
    name += f" ({time.time() - t0:.1f} s)"
    return compare(name, P, w, x, dt, tp, fuse, preset, backend, yout, msgs, fused_outputs,
                   (preset, seed, tp, dt))


def compare(name, P, w, x, dt, tp, fuse, preset, backend, yout, msgs, fused_outputs, key):
    out, meta = st_read(yout)
    ok = True

    def fail(m):
        nonlocal ok
        ok = False
        msgs.append("  " + m)

    want = {"tpmoe_preset": preset, "tpmoe_tp": str(tp), "tpmoe_ep": "1"}
    for mk, mv in want.items():
        if meta.get(mk) != mv:
            fail(f"metadata {mk} = {meta.get(mk)!r}, want {mv!r}")
    B, H, k = x.shape[0], w.H, P["k"]
    ydt = "BF16" if dt == "bf16" else "F32"
    for tn, tdt, shape in (("x", ydt, [B, H]), ("y", ydt, [B, H]), ("topk_ids", "I32", [B, k]),
                           ("topk_weights", "F32", [B, k])):
        if tn not in out or out[tn][0] != tdt or list(out[tn][1].shape) != shape:
            got = (out[tn][0], list(out[tn][1].shape)) if tn in out else "missing"
            fail(f"tensor {tn}: {got}, want {tdt} {shape}")
    if not ok:
        return ok, name + ": bad output file", msgs, None
    xo = st_f64(out, "x")
    if not np.array_equal(xo, x):
        fail("x in the output differs from the input")

    # routing
    ids_ref, logits, ties = route(x, w, P)
    ids = out["topk_ids"][1].astype(np.int64)
    if ids.min() < 0 or ids.max() >= w.E or any(len(set(r)) != k for r in ids):
        fail("topk_ids: out of range or repeated")
        return ok, name + ": bad ids", msgs, None
    diff = np.any(ids != ids_ref, axis=1)
    bad = diff & ~ties
    ntie_mis = int(np.sum(diff & ties))
    if bad.any():
        t = int(np.nonzero(bad)[0][0])
        fail(f"topk_ids differ at {int(bad.sum())} tokens that are no near-tie, first token {t}: "
             f"{ids[t].tolist()} vs fp64 {ids_ref[t].tolist()}")
    if ntie_mis > MAX_NEAR_TIE_MISMATCH:
        fail(f"{ntie_mis} near-tie tokens with other ids (allowed {MAX_NEAR_TIE_MISMATCH})")
    use = np.where(diff[:, None], ids, ids_ref)     # near-tie tokens: the tool's choice
    wts = route_weights(logits, use, P)
    wt = out["topk_weights"][1].astype(np.float64)
    werr = float(np.max(np.abs(wt - wts) / np.abs(wts)))
    wrel = W_REL if backend == "cpu" else W_REL_GPU
    if not werr <= wrel:
        fail(f"topk_weights: max relative error {werr:.2e} > {wrel:g}")

    # output
    part = layer(x, w, P, use, wts, tp)
    ref = part.sum(axis=0)
    y = st_f64(out, "y")
    if not np.all(np.isfinite(y)):
        fail("y: non-finite values")
    err = rel_rms(y, ref)
    line = (f"ids {'ok' if not diff.any() else 'diff'} (near-ties {int(ties.sum())}, mismatched "
            f"{int(diff.sum())}), w max rel {werr:.1e}, y rel RMS {err:.3e}")
    if dt == "bf16":
        bound = (Y_BF16_BOUND if backend == "cpu" else Y_BF16_BOUND_GPU)[tp]
        # the spec's rounding points; the tool rounds its fp32 values, which may sit on the other
        # side of a rounding boundary: allow one step of every rounding (output and partials),
        # plus fp32's own error (Y_F32_BOUND x the token's RMS) where y is near 0 by cancellation
        fp32_err = Y_F32_BOUND * np.sqrt(np.mean(ref ** 2, axis=1, keepdims=True))
        if tp > 1:
            model = round_bf16(round_bf16(part).sum(axis=0))
            step = bf16_ulp(model) + bf16_ulp(part).sum(axis=0) + fp32_err
        else:
            model = round_bf16(ref)
            step = bf16_ulp(model) + fp32_err
        d = np.abs(y - model)
        nbig = int(np.sum(d > step * 1.0000001))
        share = float(np.mean(d > 0))
        merr = rel_rms(y, model)
        line += (f" (bound {bound:g}); vs rounding model {merr:.1e}, {share * 100:.2f}% differ, "
                 f"{nbig} beyond a rounding step")
        if not err <= bound:
            fail(f"y: relative RMS {err:.3e} > {bound:g}")
        if backend == "cpu" and (nbig > 0 or share > DIFF_MAX_SHARE):
            fail(f"y vs the rounding model: {nbig} elements beyond a rounding step, "
                 f"{share * 100:.2f}% differ (allowed 0, {DIFF_MAX_SHARE * 100:g}%)")
    else:
        line += f" (bound {Y_F32_BOUND:g})"
        if not err <= Y_F32_BOUND:
            fail(f"y: relative RMS {err:.3e} > {Y_F32_BOUND:g}")
    # fused and unfused give bitwise-equal outputs without EP (docs/moe.md, combine order; the
    # CPU backend's property)
    if w.shared and backend == "cpu":
        prev = fused_outputs.setdefault(key, (fuse, out["y"][1]))
        if prev[0] != fuse:
            same = np.array_equal(prev[1], out["y"][1])
            line += f"; == fuse {prev[0]}: {'bitwise' if same else 'NO'}"
            if not same:
                fail(f"y differs from the fuse-shared {prev[0]} output (should be bitwise equal)")
    return ok, name + ": " + line, msgs, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", default=os.environ.get("TPMOE_TOOL", "build/tpmoe"))
    ap.add_argument("--backend", default="cpu", help="passed to `tpmoe moe` (cpu, cuda, auto)")
    ap.add_argument("--workdir", default="moe_ref.tmp",
                    help="temporary files (default ./moe_ref.tmp; removed when all pass)")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--tp", default="1,2")
    ap.add_argument("--dtypes", default=None, help="bf16,f32 (default; cuda: bf16 only)")
    ap.add_argument("--tokens", type=int, default=TOKENS)
    ap.add_argument("--keep", action="store_true", help="keep the files of a passing run")
    ap.add_argument("--full", action="store_true",
                    help="every combination of seed, TP, fusion and dtype (default: a covering "
                         "set)")
    ap.add_argument("--check-file", nargs=2, metavar=("WEIGHTS", "OUTPUT"),
                    help="only compare an existing output file of `tpmoe moe --input` "
                         "(the input is the output's x); preset from its metadata")
    a = ap.parse_args()
    t0 = time.time()
    if a.check_file:
        wp, yp = a.check_file
        _, meta = st_read(yp)
        preset, tp = meta["tpmoe_preset"], int(meta["tpmoe_tp"])
        out, _ = st_read(yp)
        dt = "bf16" if out["x"][0] == "BF16" else "f32"
        msgs = []
        ok, line, msgs, _ = compare(os.path.basename(yp), PRESETS[preset], Weights(wp, 0),
                                    st_f64(out, "x"), dt, tp, meta.get("tpmoe_fuse_shared"),
                                    preset, a.backend, yp, msgs, {}, None)
        print(("ok   " if ok else "FAIL ") + line)
        for m in msgs:
            print(m)
        return 0 if ok else 1
    if not os.path.exists(a.tool):
        print(f"moe_ref: FAIL: tool '{a.tool}' not found (set TPMOE_TOOL or --tool)",
              file=sys.stderr)
        return 1
    tps = [int(v) for v in a.tp.split(",")]
    dtypes = (a.dtypes or ("bf16,f32" if a.backend == "cpu" else "bf16")).split(",")
    os.makedirs(a.workdir, exist_ok=True)
    cases = []
    for preset in a.presets.split(","):
        todo = FULL if a.full else QUICK[preset]
        for seed, tp, fuse, dt in todo:
            if tp not in tps or dt not in dtypes:
                continue
            if PRESETS[preset]["Is"] == 0:     # no shared expert: fusion is ignored, run once
                if any(c[0] == preset and c[1:3] == (seed, tp) and c[4] == dt for c in cases):
                    continue
            cases.append((preset, seed, tp, fuse, dt, a.tokens))
    nfail = 0
    worst = {}
    wcache, fused = {}, {}
    for c in cases:
        ok, line, msgs, err = check_case(c, a.tool, a.backend, a.workdir, wcache, fused)
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        for m in msgs:
            print(m, flush=True)
        nfail += not ok
        if err is not None:
            cls = f"{c[4]} tp {c[2]}"
            worst[cls] = max(worst.get(cls, 0.0), err)
    summary = ", ".join(f"{cls} {v:.2e}" for cls, v in sorted(worst.items()))
    print(f"moe_ref: {len(cases) - nfail} of {len(cases)} cases passed, {nfail} failed "
          f"(backend {a.backend}, {time.time() - t0:.1f} s, {TOOL_SECONDS[0]:.1f} s of them in tpmoe, "
          f"cpu {cpu_seconds():.1f} s); "
          f"worst y rel RMS: {summary}")
    if not nfail and not a.keep:      # keep the files of a failure for a look
        for f in os.listdir(a.workdir):
            if f[:2] in ("w_", "x_", "y_") and f.endswith(".safetensors"):
                os.remove(os.path.join(a.workdir, f))
        if not os.listdir(a.workdir):
            os.rmdir(a.workdir)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
