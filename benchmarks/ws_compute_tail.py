"""Grouped-query attention backward (dK, dV, and dQ by atomics) with and without a
producer warpgroup for a loop whose last wgmma on its loaded tiles is followed by compute
work on tiles of its own (``disable_warp_specialize_tail``), and torch's backward of the
same attention, in one run.

The kernel (a TileLang-style program) is the main kernel of TileLang's GQA backward
example at its command line's sizes: batch 8, 32 query heads in groups of 16, 1024
tokens, head dims 192 (Q, K) and 128 (V); a block takes 128 keys, walks the queries 32 at
a time in a 2-stage pipeline, and per step computes P^T and dP^T (wgmma), dV and dK
(wgmma, A from registers), then dS^T into shared memory, dQ = dS K by mma.sync and its
atomics into a permuted fp32 dQ.  Without the producer the loop runs on the block's 256
threads, a block barrier per step before the next stage's TMA loads; with it a producer
warpgroup issues them and the compute threads only wait and release (TileLang's schedule).
Each timed call zeroes dQ, dK and dV first (a row times that alone).  Each number is the
median of ``--reps`` CUDA-event timings (benchmarks/cuda_timing.py).  Prints one JSON line
per variant: microseconds, TFLOP/s, and the producer variant's speed-up over the other;
the outputs are checked against torch first.

    python benchmarks/ws_compute_tail.py [--reps 50]
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)

LOG2E = 1.4426950408889634


def dq_place(b, l, h, d):
    """Where dQ[b, l, h, d] lives: the mma.sync accumulator's quads write 32 consecutive
    floats, so the atomics coalesce."""
    return [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]


def gqa_bwd(batch, heads, seq, dqk, dv, groups, bm=128, bn=32, stages=2, threads=256):
    kv_heads = heads // groups
    scale = dqk ** -0.5
    f16, f32 = "float16", "float32"
    q_shape, k_shape = (batch, seq, heads, dqk), (batch, seq, kv_heads, dqk)
    v_shape, o_shape = (batch, seq, kv_heads, dv), (batch, seq, heads, dv)

    @T.prim_func
    def gqa_bwd(Q: T.Tensor(q_shape, f16), K: T.Tensor(k_shape, f16), V: T.Tensor(v_shape, f16),
                dO: T.Tensor(o_shape, f16), LSE: T.Tensor((batch, heads, seq), f32),
                Dlt: T.Tensor((batch, heads, seq), f32), dQ: T.Tensor(q_shape, f32),
                dK: T.Tensor(k_shape, f32), dV: T.Tensor(v_shape, f32)):
        with T.Kernel(heads, T.ceildiv(seq, bm), batch, threads=threads) as (h, mb, b):
            k_s = T.alloc_shared((bm, dqk), f16)
            v_s = T.alloc_shared((bm, dv), f16)
            q_s = T.alloc_shared((bn, dqk), f16)
            do_s = T.alloc_shared((bn, dv), f16)
            lse_s = T.alloc_shared((bn,), f32)
            dl_s = T.alloc_shared((bn,), f32)
            ds_s = T.alloc_shared((bm, bn), f16)
            pt = T.alloc_fragment((bm, bn), f32)
            dpt = T.alloc_fragment((bm, bn), f32)
            pt_h = T.alloc_fragment((bm, bn), f16)
            dst_h = T.alloc_fragment((bm, bn), f16)
            dk_acc = T.alloc_fragment((bm, dqk), f32)
            dv_acc = T.alloc_fragment((bm, dv), f32)
            dq_acc = T.alloc_fragment((bn, dqk), f32)
            dk_s = T.alloc_shared((bm, dqk), f32)
            dv_s = T.alloc_shared((bm, dv), f32)
            T.annotate_layout({dQ: T.Layout(q_shape, dq_place)})
            kv = h // groups
            T.copy(K[b, mb * bm:(mb + 1) * bm, kv, :], k_s)
            T.copy(V[b, mb * bm:(mb + 1) * bm, kv, :], v_s)
            T.clear(dk_acc)
            T.clear(dv_acc)
            for t in T.Pipelined(T.ceildiv(seq, bn), num_stages=stages):
                T.copy(Q[b, t * bn:(t + 1) * bn, h, :], q_s)
                T.copy(LSE[b, h, t * bn:(t + 1) * bn], lse_s)
                T.clear(pt)
                T.gemm(k_s, q_s, pt, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(bm, bn):
                    pt[i, j] = T.exp2(pt[i, j] * (scale * LOG2E) - lse_s[j])
                T.copy(dO[b, t * bn:(t + 1) * bn, h, :], do_s)
                T.clear(dpt)
                T.gemm(v_s, do_s, dpt, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pt, pt_h)
                T.gemm(pt_h, do_s, dv_acc, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Dlt[b, h, t * bn:(t + 1) * bn], dl_s)
                for i, j in T.Parallel(bm, bn):
                    dst_h[i, j] = pt[i, j] * (dpt[i, j] - dl_s[j]) * scale
                T.gemm(dst_h, q_s, dk_acc, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dst_h, ds_s)
                T.clear(dq_acc)
                T.gemm(ds_s, k_s, dq_acc, transpose_A=True)
                for i, j in T.Parallel(bn, dqk):
                    T.atomic_add(dQ[b, t * bn + i, h, j], dq_acc[i, j])
            T.copy(dv_acc, dv_s)
            T.atomic_add(dV[b, mb * bm:(mb + 1) * bm, kv, :], dv_s)
            T.copy(dk_acc, dk_s)
            T.atomic_add(dK[b, mb * bm:(mb + 1) * bm, kv, :], dk_s)

    return gqa_bwd


def unpermute(dq_raw, shape):
    """dQ in (batch, seq, heads, dim) order from the permuted buffer (:func:`dq_place`)."""
    b, s, h, d = shape
    l = torch.arange(s, device=dq_raw.device)[:, None]
    c = torch.arange(d, device=dq_raw.device)[None, :]
    phys = dq_raw.view(b, s // 8, h, d // 8, 2, 32)
    out = phys[:, l // 8, :, c // 8, c % 2, 4 * (l % 8) + (c % 8) // 2]  # (s, d, b, h)
    return out.permute(2, 0, 3, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=50)
    a = p.parse_args()
    B, H, S, DQK, DV, G = 8, 32, 1024, 192, 128, 16
    HK = H // G
    g = torch.Generator(device="cpu").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).half().cuda().requires_grad_()

    q, k, v, do = rnd(B, S, H, DQK), rnd(B, S, HK, DQK), rnd(B, S, HK, DV), rnd(B, S, H, DV)
    do = do.detach()

    def forward():
        qh = q.transpose(1, 2)
        kh = k.repeat_interleave(G, dim=2).transpose(1, 2)
        vh = v.repeat_interleave(G, dim=2).transpose(1, 2)
        return F.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2)

    o = forward()
    dq_ref, dk_ref, dv_ref = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    with torch.no_grad():
        kf = k.float().repeat_interleave(G, dim=2)
        s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kf) / math.sqrt(DQK)
        lse = (torch.logsumexp(s, dim=-1) * LOG2E).contiguous()  # (B, H, S), base 2
        delta = (o.float() * do.float()).sum(-1).transpose(1, 2).contiguous()
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    dq = torch.zeros(B, S, H, DQK, device="cuda")
    dk = torch.zeros(B, S, HK, DQK, device="cuda")
    dv = torch.zeros(B, S, HK, DV, device="cuda")

    def zero():
        dq.zero_()
        dk.zero_()
        dv.zero_()

    flops = 2.0 * B * H * S * S * (3 * DQK + 2 * DV)
    func = gqa_bwd(B, H, S, DQK, DV, G)
    times = {}
    for variant, options in (("no_producer", {"disable_warp_specialize_tail": True}),
                             ("producer", {})):
        kern = tilecute.compile(func, options=options)
        zero()
        kern(qd, kd, vd, do, lse, delta, dq, dk, dv)
        torch.cuda.synchronize()
        for name, got, want in (("dQ", unpermute(dq, (B, S, H, DQK)), dq_ref),
                                ("dK", dk, dk_ref), ("dV", dv, dv_ref)):
            torch.testing.assert_close(got, want.float(), atol=3e-2, rtol=2e-2,
                                       msg=lambda m: f"{variant} {name}: {m}")

        def run(kern=kern):
            zero()
            kern(qd, kd, vd, do, lse, delta, dq, dk, dv)

        times[variant] = time_us(run, a.reps, inner=1)
    times["zeroing_only"] = time_us(zero, a.reps, inner=1)
    times["torch_backward"] = time_us(
        lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), a.reps, inner=1)
    for variant, us in times.items():
        row = {"kernel": f"gqa_bwd b{B} h{H}/{HK} s{S} d{DQK}/{DV}", "variant": variant,
               "us": round(us, 2)}
        if variant != "zeroing_only":
            row["TFLOPs"] = round(flops / us / 1e6, 1)
        if variant == "producer":
            row["speedup_over_no_producer"] = round(times["no_producer"] / us, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
