#!/usr/bin/env python3
"""moe_peers.py - the issue's two peers of `tpmoe bench moe`, on the same shapes and timed the
same way, so the committed figures set tpmoe beside them from one device call.

Peers (both with the shared expert fused in as expert slot E, weight 1.0, like tpmoe's fused
layer; routing by torch ops: fp32 logits, sigmoid + bias top-k, renormalized, x rsf):
  grouped_mm  PyTorch's torch._grouped_mm (CUTLASS grouped GEMM on sm_90): sort the (token,
              slot) pairs by expert, gather x, grouped gate_up, swiglu-oai (torch ops, fp32),
              grouped down, the routing weight and an index_add_ combine (fp32).
  triton      the fused-MoE algorithm that vLLM and SGLang run, written here in Triton (not
              their code): the pairs sorted by expert and padded to BLOCK_M per expert
              (moe_align, torch ops), one GEMM kernel whose rows are gathered through the
              sorted ids (gate_up: A rows = token, down: A rows = pair, routing weight in the
              epilogue), a Triton swiglu-oai kernel between them, and the per-token sum over
              the slots. Best of a config sweep per token count (the tuned deployment).
  ideal       (prefill sizes only) not a layer: the layer's GEMM FLOPs as cuBLAS runs them at
              best, every routed expert given exactly T*k/E rows (torch.bmm over the 128
              experts' own weights: the same weight bytes) plus the shared expert as two dense
              GEMMs; no routing, activation, gather or combine. A bound for a layer built on
              cuBLAS, timed both like the layers and held back to back (--hold-s).

Timing, as bench moe's (bench/bench_moe.c, time_graph): each peer captured in one CUDA graph;
per replay: synchronize, read 256 MB (the L2 flush, bench moe's default 'read'), start event,
replay, end event; 2 warm-up replays, the median of --reps. Each layer's glue (what precedes its
first GEMM: the routing, then the sort and gather or moe_align) is also captured and timed alone.
Correctness: on --check sampled tokens each layer's output against an fp64 reference of the same
routing (rel. RMS error, bound TOL). --profile-ideal names the kernels cuBLAS runs for 'ideal'.

Usage: python3 bench/peers/moe_peers.py --tokens 1,8,32,128,1024,8192 --json peers.json
       (CPU self-check at tiny shapes: --cpu-selftest; Triton then runs in its interpreter)
"""
import argparse
import copy
import json
import os
import sys
import time

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the grouped_mm peer still runs
    triton = None

ALPHA, LIMIT, RSF = 1.702, 7.0, 2.0

if triton is not None:

    @triton.jit
    def k_moe_gemm(a_ptr, b_ptr, c_ptr, w_ptr, sid_ptr, eid_ptr, ntpp_ptr, N, K, EM, num_valid,
                   stride_am, stride_be, stride_bn, stride_cm,
                   A_DIV: tl.constexpr, MUL_W: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, GROUP_M: tl.constexpr):
        # One BM x BN tile of C rows sid[pid_m*BM ..] (pairs sorted by expert, padded with
        # num_valid) against expert eid[pid_m]'s weight rows [pid_n*BN ..). A row = pair // A_DIV.
        pid = tl.program_id(0)
        num_m = tl.cdiv(EM, BM)
        num_n = tl.cdiv(N, BN)
        in_group = GROUP_M * num_n
        first_m = (pid // in_group) * GROUP_M
        gsz = min(num_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % in_group) % gsz)
        pid_n = (pid % in_group) // gsz
        if pid_m * BM >= tl.load(ntpp_ptr):
            return
        offs_m = pid_m * BM + tl.arange(0, BM)
        pair = tl.load(sid_ptr + offs_m)
        valid = pair < num_valid
        e = tl.load(eid_ptr + pid_m).to(tl.int64)
        offs_n = (pid_n * BN + tl.arange(0, BN)) % N
        offs_k = tl.arange(0, BK)
        a_ptrs = a_ptr + (pair // A_DIV).to(tl.int64)[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + e * stride_be + offs_n.to(tl.int64)[None, :] * stride_bn + offs_k[:, None]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, tl.cdiv(K, BK)):  # K % BK == 0 (checked on the host)
            a = tl.load(a_ptrs, mask=valid[:, None], other=0.0)
            b = tl.load(b_ptrs)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK
        if MUL_W:
            acc = acc * tl.load(w_ptr + pair, mask=valid, other=0.0)[:, None]
        offs_cn = pid_n * BN + tl.arange(0, BN)
        c_ptrs = c_ptr + pair.to(tl.int64)[:, None] * stride_cm + offs_cn[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=valid[:, None] & (offs_cn[None, :] < N))

    @triton.jit
    def k_swiglu_oai(h_ptr, o_ptr, I, BLOCK: tl.constexpr):
        # row r: o[r, j] = min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1), fp32
        r = tl.program_id(0).to(tl.int64)
        j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = j < I
        g = tl.load(h_ptr + r * 2 * I + j, mask=m, other=0.0).to(tl.float32)
        u = tl.load(h_ptr + r * 2 * I + I + j, mask=m, other=0.0).to(tl.float32)
        g = tl.minimum(g, 7.0)
        u = tl.minimum(tl.maximum(u, -7.0), 7.0)
        o = g * tl.sigmoid(1.702 * g) * (u + 1.0)
        tl.store(o_ptr + r * I + j, o.to(tl.bfloat16), mask=m)


def swiglu_oai_torch(h, inter):
    g = h[:, :inter].float().clamp(max=LIMIT)
    u = h[:, inter:].float().clamp(-LIMIT, LIMIT)
    return (g * torch.sigmoid(ALPHA * g) * (u + 1.0)).to(torch.bfloat16)


class Layer:
    """M3-shaped weights (bf16, the shared expert stacked as slot E) and the routing."""

    def __init__(self, H, I, E, k, dev, seed):
        g = torch.Generator(device=dev).manual_seed(seed)
        self.H, self.I, self.E, self.k, self.dev = H, I, E, k, dev
        # The distributions of bench moe's synthetic layer (src/moe/moe_cuda_gen.h): weights and
        # router uniform in [-1, 1) x the power of two nearest 1/sqrt(fan-in), the score bias
        # uniform x 1/32, x normal: so the routing touches as many experts as there.
        def uni(*shape, dtype, scale):
            return torch.rand(*shape, generator=g, device=dev, dtype=dtype).mul_(2.0).sub_(1.0).mul_(scale)

        def pow2_scale(n):
            s = 1.0
            while s * s * n > 2.0:
                s *= 0.5
            return s

        # w13[e] = [gate; up] (2I x H), w2[e] = down (H x I)
        self.w13 = uni(E + 1, 2 * I, H, dtype=torch.bfloat16, scale=pow2_scale(H))
        self.w2 = uni(E + 1, H, I, dtype=torch.bfloat16, scale=pow2_scale(I))
        self.wr = uni(E, H, dtype=torch.float32, scale=pow2_scale(H))
        self.bias = uni(E, dtype=torch.float32, scale=1.0 / 32)
        self.gen = g

    def inputs(self, T):
        return torch.randn(T, self.H, generator=self.gen, device=self.dev, dtype=torch.bfloat16)

    def route(self, x):
        """(ids [T, k+1] int64, weights [T, k+1] fp32): top-k of sigmoid + bias, renormalized,
        x rsf; slot k is the shared expert (id E, weight 1.0)."""
        s = torch.sigmoid(x.float() @ self.wr.t())
        s = torch.nan_to_num(s, nan=0.0)
        _, idx = torch.topk(s + self.bias, self.k, dim=1)
        w = s.gather(1, idx)
        w = w / w.sum(1, keepdim=True) * RSF
        T = x.shape[0]
        ids = torch.cat([idx, torch.full((T, 1), self.E, device=x.device, dtype=idx.dtype)], 1)
        ws = torch.cat([w, torch.ones(T, 1, device=x.device, dtype=w.dtype)], 1)
        return ids, ws

    def reference(self, x, ids, ws, rows):
        """fp64 output of tokens `rows` for the given routing (the bf16 weights, fp64 math)."""
        out = torch.zeros(len(rows), self.H, dtype=torch.float64, device=x.device)
        for i, t in enumerate(rows):
            xt = x[t].double()
            for j in range(ids.shape[1]):
                e = int(ids[t, j])
                h = self.w13[e].double() @ xt
                g = h[: self.I].clamp(max=LIMIT)
                u = h[self.I:].clamp(-LIMIT, LIMIT)
                a = g * torch.sigmoid(ALPHA * g) * (u + 1.0)
                out[i] += float(ws[t, j]) * (self.w2[e].double() @ a)
        return out


def grouped_mm_forward(L, x, glue_only=False):
    T, S = x.shape[0], L.k + 1
    ids, ws = L.route(x)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    ends = torch.searchsorted(flat[order], torch.arange(1, L.E + 2, device=x.device)).to(torch.int32)
    xs = x[order // S]
    if glue_only:  # the routing, the sort and the gather: what precedes the first GEMM
        return xs, ids, ws
    if hasattr(torch, "_grouped_mm"):
        h = torch._grouped_mm(xs, L.w13.transpose(-2, -1), offs=ends)
        a = swiglu_oai_torch(h, L.I)
        o = torch._grouped_mm(a, L.w2.transpose(-2, -1), offs=ends)
    else:  # a torch without _grouped_mm: the same grouping by a loop
        o = torch.empty(xs.shape[0], L.H, dtype=torch.bfloat16, device=x.device)
        lo = 0
        for e, hi in enumerate(ends.tolist()):
            if hi > lo:
                h = (xs[lo:hi].float() @ L.w13[e].float().t()).to(torch.bfloat16)
                o[lo:hi] = (swiglu_oai_torch(h, L.I).float() @ L.w2[e].float().t()).to(torch.bfloat16)
            lo = hi
    y = torch.zeros(T, L.H, dtype=torch.float32, device=x.device)
    y.index_add_(0, order // S, o.float() * ws.reshape(-1)[order, None])
    return y.to(torch.bfloat16), ids, ws


def moe_align(flat, n_exp, bm):
    """vLLM's moe_align_block_size in torch ops (no host sync, static sizes): the pairs sorted
    by expert, each expert's run padded to a multiple of bm with the sentinel len(flat)."""
    n = flat.numel()
    em = n + n_exp * (bm - 1)
    em = (em + bm - 1) // bm * bm
    order = torch.argsort(flat, stable=True)
    sf = flat[order]
    counts = torch.zeros(n_exp, dtype=torch.int64, device=flat.device)
    counts.index_add_(0, flat, torch.ones_like(flat))
    padded = (counts + bm - 1) // bm * bm
    pend = torch.cumsum(padded, 0)
    pstart = pend - padded
    cstart = torch.cumsum(counts, 0) - counts
    dest = pstart[sf] + torch.arange(n, device=flat.device) - cstart[sf]
    sid = torch.full((em,), n, dtype=torch.int32, device=flat.device)
    sid[dest] = order.to(torch.int32)
    blk = torch.arange(em // bm, device=flat.device) * bm
    eid = torch.searchsorted(pend, blk, right=True).clamp_(max=n_exp - 1).to(torch.int32)
    return sid, eid, pend[-1:].to(torch.int32), em


def triton_forward(L, x, cfg, glue_only=False):
    T, S = x.shape[0], L.k + 1
    bm, bn, bk, gm, nw, ns = cfg
    assert L.H % bk == 0 and L.I % bk == 0
    ids, ws = L.route(x)
    flat = ids.reshape(-1)
    sid, eid, ntpp, em = moe_align(flat, L.E + 1, bm)
    if glue_only:  # the routing and moe_align: what precedes the first GEMM
        return sid, ids, ws
    n = flat.numel()
    dt = x.dtype  # bf16; fp32 holding bf16 values in the CPU self-check (the interpreter's bf16 is not torch's)
    h = torch.empty(n, 2 * L.I, dtype=dt, device=x.device)
    a = torch.empty(n, L.I, dtype=dt, device=x.device)
    o = torch.empty(n, L.H, dtype=dt, device=x.device)
    wflat = ws.reshape(-1).contiguous()

    def gemm(A, W, C, N, K, a_div, mul_w):
        grid = (triton.cdiv(em, bm) * triton.cdiv(N, bn),)
        k_moe_gemm[grid](A, W, C, wflat, sid, eid, ntpp, N, K, em, n, A.stride(0), W.stride(0), W.stride(1),
                         C.stride(0), A_DIV=a_div, MUL_W=mul_w, BM=bm, BN=bn, BK=bk, GROUP_M=gm,
                         num_warps=nw, num_stages=ns)

    gemm(x, L.w13, h, 2 * L.I, L.H, S, False)
    k_swiglu_oai[(n, triton.cdiv(L.I, 1024))](h, a, L.I, BLOCK=1024)
    gemm(a, L.w2, o, L.H, L.I, 1, True)
    y = o.view(T, S, L.H).float().sum(1).to(torch.bfloat16)
    return y, ids, ws


def triton_configs(T, quick):
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages): the sweep per size class, the
    shapes the tuned fused-MoE tables of serving engines hold for these sizes on Hopper
    (small BLOCK_M and deep K at decode, 64-128 x 128-256 tiles with GROUP_M swizzle at prefill)."""
    if quick:
        return [(16, 64, 64, 1, 4, 2)]
    if T <= 32:
        return [(16, 64, 128, 1, 4, 3), (16, 64, 128, 1, 4, 4), (16, 128, 128, 1, 4, 3),
                (16, 64, 256, 1, 4, 3), (16, 128, 64, 1, 4, 4), (16, 64, 64, 1, 4, 5),
                (16, 64, 256, 1, 4, 4), (16, 128, 256, 1, 4, 3), (32, 64, 128, 1, 4, 4)]
    if T <= 256:
        return [(16, 64, 128, 1, 4, 3), (16, 128, 128, 1, 4, 3), (32, 64, 128, 1, 4, 3),
                (32, 128, 64, 1, 4, 4), (64, 128, 64, 1, 4, 4), (64, 64, 64, 1, 4, 4),
                (16, 64, 256, 1, 4, 3), (32, 64, 256, 1, 4, 3), (64, 128, 128, 1, 4, 3), (32, 128, 128, 1, 4, 4)]
    if T <= 2048:  # ~T*5/129 rows per expert: still weight-streaming bound
        return [(64, 128, 64, 8, 4, 4), (64, 256, 64, 8, 8, 3), (128, 128, 64, 8, 4, 3),
                (32, 64, 128, 1, 4, 4), (32, 128, 128, 1, 4, 3), (64, 64, 128, 1, 4, 4),
                (64, 128, 128, 1, 4, 3), (64, 128, 128, 1, 4, 4), (64, 128, 128, 16, 4, 3),
                (16, 128, 128, 1, 4, 4), (64, 64, 256, 1, 4, 3), (128, 128, 128, 1, 8, 3)]
    return [(64, 128, 64, 1, 4, 4), (64, 128, 64, 8, 4, 4), (64, 256, 64, 8, 8, 3), (128, 128, 64, 16, 8, 4),
            (128, 256, 64, 16, 8, 3), (128, 256, 64, 16, 8, 4), (128, 128, 64, 8, 4, 3), (128, 256, 64, 8, 8, 4),
            (128, 128, 128, 16, 8, 3), (256, 128, 64, 16, 8, 3)]


class Timer:
    def __init__(self, dev, reps):
        self.reps = reps
        self.flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
        self.flush_out = torch.empty((), dtype=torch.int64, device=dev)
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def flush(self):  # read 256 MB: clean lines, as bench moe's default
        torch.sum(self.flush_buf.view(torch.int64), dim=0, out=self.flush_out)

    def capture(self, fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn()
        torch.cuda.synchronize()
        return g, out

    def time(self, g, reps=None):
        v = []
        for r in range(-2, reps or self.reps):
            torch.cuda.synchronize()
            self.flush()
            self.a.record()
            g.replay()
            self.b.record()
            self.b.synchronize()
            if r >= 0:
                v.append(self.a.elapsed_time(self.b) * 1e3)
        v.sort()
        return v[len(v) // 2]

    def held(self, g, seconds):
        """replayed back to back for `seconds` (no flush): the median us of the second half."""
        v, t0 = [], time.time()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        while time.time() - t0 < seconds:
            ev[0].record()
            g.replay()
            ev[1].record()
            ev[1].synchronize()
            v.append(ev[0].elapsed_time(ev[1]) * 1e3)
        v = sorted(v[len(v) // 2:])
        return v[len(v) // 2], len(v) * 2


TOL = 2e-2  # rel. RMS bound of a sampled check (bf16 intermediates; the CPU interpreter truncates to bf16)


def rel_rms(y, ref):
    d = y.double() - ref
    return float(torch.sqrt((d * d).mean() / (ref * ref).mean()))


def check(L, x, y, ids, ws, nsample):
    T = x.shape[0]
    rows = sorted(set([0, T - 1] + [int(i) for i in torch.randperm(T)[:max(0, nsample - 2)]]))[:max(1, nsample)]
    ref = L.reference(x, ids, ws, rows)
    return rel_rms(y[rows], ref)


def selftest():
    """CPU: both peers against the fp32 reference at tiny shapes (Triton in its interpreter)."""
    torch.manual_seed(0)
    L = Layer(H=128, I=64, E=8, k=2, dev="cpu", seed=1)
    fails = 0
    for T in (1, 5, 33):
        x = L.inputs(T)
        y, ids, ws = grouped_mm_forward(L, x)
        e = check(L, x, y, ids, ws, T)
        ok = e < 2e-2 and not torch.isnan(y).any()
        fails += not ok
        print(f"selftest grouped_mm T={T} rel_rms={e:.2e} {'ok' if ok else 'FAIL'}")
        xs, _, _ = grouped_mm_forward(L, x, glue_only=True)  # the timed glue: the rows the GEMMs get
        fails += xs.shape[0] != T * (L.k + 1)
        if triton is not None and os.environ.get("TRITON_INTERPRET") == "1":
            Lf = copy.copy(L)  # fp32 storage of the same bf16 values (the kernels round to bf16 as on the GPU)
            Lf.w13, Lf.w2 = L.w13.float(), L.w2.float()
            for cfg in ((16, 32, 32, 1, 4, 2), (32, 64, 64, 4, 4, 2)):
                y2, ids2, ws2 = triton_forward(Lf, x.float(), cfg)
                e2 = check(L, x, y2, ids2, ws2, T)
                ok = e2 < 2e-2 and bool(torch.equal(ids, ids2)) and not torch.isnan(y2).any()
                fails += not ok
                print(f"selftest triton {cfg} T={T} rel_rms={e2:.2e} {'ok' if ok else 'FAIL'}")
                sid, _, _ = triton_forward(Lf, x.float(), cfg, glue_only=True)
                fails += int((sid < T * (L.k + 1)).sum()) != T * (L.k + 1)  # every pair once
    print(f"{'FAILED' if fails else 'passed'}: {fails} failures")
    return 1 if fails else 0


def touched(L, ids):
    """experts the batch touched (the shared slot included) and their weight bytes (bf16)."""
    n = int(torch.unique(ids).numel())
    return {"touched": n, "touched_bytes": n * 3 * L.H * L.I * 2}


def ideal_graphs(L, T, dev):
    """torch.bmm over the routed experts at T*k/E rows each + the shared MLP as dense GEMMs."""
    rows = T * L.k // L.E
    xa = torch.randn(L.E, rows, L.H, device=dev, dtype=torch.bfloat16)
    xb = torch.randn(L.E, rows, L.I, device=dev, dtype=torch.bfloat16)
    xs = torch.randn(T, L.H, device=dev, dtype=torch.bfloat16)
    xs2 = torch.randn(T, L.I, device=dev, dtype=torch.bfloat16)

    def fn():
        h = torch.bmm(xa, L.w13[: L.E].transpose(1, 2))
        o = torch.bmm(xb, L.w2[: L.E].transpose(1, 2))
        hs = xs @ L.w13[L.E].t()
        os_ = xs2 @ L.w2[L.E].t()
        return h, o, hs, os_

    flops = 2.0 * (L.E * rows + T) * (2 * L.I * L.H + L.H * L.I)
    return fn, flops


def profile_kernels(fn, runs=5):
    """the CUDA kernels of fn (eager) by torch.profiler: name, calls per run, us per run."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    ks = []
    for ev in prof.key_averages():
        if not str(getattr(ev, "device_type", "CUDA")).endswith("CUDA"):
            continue  # aten ops (CPU events) carry their kernels' time too
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t > 0 and ev.count >= runs:
            ks.append({"name": ev.key, "calls": ev.count // runs, "us": t / runs})
    return sorted(ks, key=lambda k: -k["us"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1,8,32,128,1024,8192")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--check", type=int, default=4, help="sampled tokens per size checked (0: none)")
    ap.add_argument("--peers", default="grouped_mm,triton,ideal")
    ap.add_argument("--quick", action="store_true", help="one Triton config (a smoke run)")
    ap.add_argument("--sweep-budget-s", type=float, default=120.0,
                    help="per token count: try no further config after this many seconds")
    ap.add_argument("--hold-s", type=float, default=3.0, help="ideal: also replayed back to back this long")
    ap.add_argument("--profile-ideal", action="store_true",
                    help="ideal: also name cuBLAS's kernels and their times (torch.profiler, eager)")
    ap.add_argument("--json", default="")
    ap.add_argument("--cpu-selftest", action="store_true")
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--inter", type=int, default=3072)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--topk", type=int, default=4)
    o = ap.parse_args()
    if o.cpu_selftest:
        return selftest()
    if not torch.cuda.is_available():
        print("moe_peers: no GPU (use --cpu-selftest)")
        return 2
    dev = "cuda"
    peers = o.peers.split(",")
    props = torch.cuda.get_device_properties(0)
    L = Layer(o.hidden, o.inter, o.experts, o.topk, dev, seed=7)
    torch.cuda.synchronize()
    tm = Timer(dev, o.reps)
    print(f"# device {props.name}, torch {torch.__version__}, triton {triton.__version__ if triton else None}")
    print(f"# m3 shapes: hidden {L.H}, inter {L.I}, {L.E} experts top-{L.k} + 1 shared fused as slot {L.E}")
    print(f"# timing: CUDA graph, read flush 256 MB before each replay, median of {o.reps}")
    res = {"device": props.name, "torch": torch.__version__, "triton": triton.__version__ if triton else None,
           "shapes": {"hidden": L.H, "inter": L.I, "experts": L.E, "topk": L.k, "shared": 1},
           "timing": f"CUDA graph replay, read flush of 256 MB before each, median of {o.reps}", "rows": []}
    fails = 0

    def verdict(err):
        nonlocal fails
        bad = err is not None and not (err < TOL)
        fails += bad
        return "FAIL" if bad else ""

    print(f"{'tokens':>6} {'peer':<11} {'us':>9} {'rel_err':>9}  config / note")
    for T in [int(t) for t in o.tokens.split(",")]:
        x = L.inputs(T)
        if "grouped_mm" in peers:
            try:
                g, out = tm.capture(lambda: grouped_mm_forward(L, x))
                us = tm.time(g)
                err = check(L, x, *out, o.check) if o.check else None
                row = {"tokens": T, "peer": "grouped_mm", "us": us, "rel_err": err, **touched(L, out[1])}
                del g, out
                g, out = tm.capture(lambda: grouped_mm_forward(L, x, glue_only=True))
                row["glue_us"] = tm.time(g)
                print(f"{T:>6} {'grouped_mm':<11} {us:>9.1f} {err if err is not None else float('nan'):>9.2e}  "
                      f"{row['touched']} experts touched (shared incl.); routing + sort + gather alone "
                      f"{row['glue_us']:.1f} us {verdict(err)}")
                del g, out
            except Exception as ex:  # report, go on
                row = {"tokens": T, "peer": "grouped_mm", "error": repr(ex)[:300]}
                fails += 1
                print(f"{T:>6} grouped_mm  error {repr(ex)[:200]}")
            res["rows"].append(row)
        if "triton" in peers and triton is not None:
            best, sweep, t_sweep0 = None, [], time.time()
            for cfg in triton_configs(T, o.quick):
                if best is not None and time.time() - t_sweep0 > o.sweep_budget_s:
                    break
                try:
                    g, out = tm.capture(lambda: triton_forward(L, x, cfg))
                    us = tm.time(g, reps=max(5, o.reps // 2))
                    sweep.append({"config": cfg, "us": us})
                    if best is None or us < best[1]:
                        best = (cfg, us, g, out)
                    else:
                        del g, out
                except Exception as ex:
                    sweep.append({"config": cfg, "error": repr(ex)[:300]})
            if best is None:
                row = {"tokens": T, "peer": "triton", "error": "no config ran", "sweep": sweep}
                fails += 1
                print(f"{T:>6} triton      no config ran: {sweep[:1]}")
            else:
                cfg, _, g, out = best
                us = tm.time(g)
                err = check(L, x, *out, o.check) if o.check else None
                row = {"tokens": T, "peer": "triton", "us": us, "rel_err": err, **touched(L, out[1]), "config": cfg,
                       "config_keys": "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages",
                       "configs_tried": len(sweep), "sweep": sweep}
                del g, out, best
                g, out = tm.capture(lambda: triton_forward(L, x, cfg, glue_only=True))
                row["glue_us"] = tm.time(g)
                print(f"{T:>6} {'triton':<11} {us:>9.1f} {err if err is not None else float('nan'):>9.2e}  "
                      f"{row['touched']} experts touched, {cfg} best of {len(sweep)}; routing + moe_align alone "
                      f"{row['glue_us']:.1f} us {verdict(err)}")
                print("#   sweep: " + "; ".join(f"{c['config']} {c['us']:.1f}" if "us" in c else
                                             f"{c['config']} error" for c in sweep))
                del g, out
            res["rows"].append(row)
        if "ideal" in peers and T * L.k >= L.E * 8 and T * L.k % L.E == 0:
            fn, flops = ideal_graphs(L, T, dev)
            g, out = tm.capture(fn)
            us = tm.time(g)
            hus, n = tm.held(g, o.hold_s) if o.hold_s > 0 else (None, 0)
            row = {"tokens": T, "peer": "ideal", "us": us, "tflops": flops / us * 1e-6, "held_us": hus,
                   "held_replays": n, "held_tflops": flops / hus * 1e-6 if hus else None, "flops": flops}
            print(f"{T:>6} {'ideal':<11} {us:>9.1f} {'':>9}  {flops / us * 1e-6:.0f} TFLOP/s; held {hus:.1f} us "
                  f"({flops / hus * 1e-6:.0f} TFLOP/s, {n} replays)" if hus else "")
            if o.profile_ideal:
                row["kernels"] = profile_kernels(fn)
                for k in row["kernels"]:
                    print(f"#   {k['us']:9.1f} us x{k['calls']}  {k['name'][:150]}")
            res["rows"].append(row)
            del g, out
        torch.cuda.empty_cache()
        if o.json:
            with open(o.json, "w") as f:
                json.dump(res, f, indent=1)
    print(f"# peers: {fails} failed checks or errors (bound {TOL})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
