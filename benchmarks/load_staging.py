"""Global -> global nests with and without load staging (``disable_load_staging``), and
torch doing the same work, in one run.

Kernels, each over 2**26 elements (TileLang-style programs): a layout-annotated fp32 ->
fp16 copy (TileLang's FlashAttention-backward dQ post-processing: scalar loads), a gather
``out[i] = x[idx[i]]``, a 2-D add (fp32 and bf16, 32 x 32 tiles on 128 threads and 32 x
128 tiles on 256), and a strided column copy.  Each number is the median of ``--reps``
CUDA-event timings after warm-up (benchmarks/cuda_timing.py; no L2 flush: each kernel
moves 3-6 times the L2).
Prints one JSON line per (kernel, variant): microseconds, GB/s, and the staged kernel's
speed-up over the unstaged one.

    python benchmarks/load_staging.py [--reps 50]
"""

from __future__ import annotations

import argparse
import json

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)

ELEMENTS = 1 << 26


def dq_post(batch=8, seq=4096, heads=32, dim=64):
    shape = (batch, seq, heads, dim)

    def layout(b, l, h, d):
        return [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]

    @T.prim_func
    def dq_post(dQ: T.Tensor(shape, "float32"), dQ_out: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq, 64), heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: T.Layout(shape, layout)})
            T.copy(dQ[bz, bx * 64:(bx + 1) * 64, by, :], dQ_out[bz, bx * 64:(bx + 1) * 64, by, :])

    return dq_post, shape


def gather(n=ELEMENTS, block=1024):
    @T.prim_func
    def gather(x: T.Tensor((n,), "float32"), idx: T.Tensor((n,), "int32"),
               out: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):
                out[bx * block + i] = x[idx[bx * block + i]]

    return gather


def add_2d(dtype, bm, bn, threads, m=8192, n=ELEMENTS // 8192):
    @T.prim_func
    def add_2d(a: T.Tensor((m, n), dtype), b: T.Tensor((m, n), dtype), c: T.Tensor((m, n), dtype)):
        with T.Kernel(n // bn, m // bm, threads=threads) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                c[by * bm + i, bx * bn + j] = a[by * bm + i, bx * bn + j] + b[by * bm + i, bx * bn + j]

    return add_2d


def column_copy(m=8192, n=ELEMENTS // 8192, block=64):
    @T.prim_func
    def column_copy(a: T.Tensor((m, n), "float32"), b: T.Tensor((n, m), "float32")):
        with T.Kernel(n // block, m // block, threads=128) as (bx, by):
            for j, i in T.Parallel(block, block):
                b[bx * block + j, by * block + i] = a[by * block + i, bx * block + j]

    return column_copy


def both(func, reps, name, nbytes, args, peer=None):
    times = {}
    for variant, options in (("unstaged", {"disable_load_staging": True}), ("staged", {})):
        k = tilecute.compile(func, options=options)
        times[variant] = time_us(lambda: k(*args), reps, inner=1)
    if peer is not None:
        times["torch"] = time_us(peer, reps, inner=1)
    for variant, us in times.items():
        row = {"kernel": name, "variant": variant, "us": round(us, 2),
               "GBps": round(nbytes / us / 1e3, 1)}
        if variant == "staged":
            row["speedup_over_unstaged"] = round(times["unstaged"] / us, 3)
        print(json.dumps(row), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=50)
    a = p.parse_args()
    dev = "cuda"
    func, shape = dq_post()
    dq = torch.randn(shape, device=dev)
    dq_out = torch.empty(shape, device=dev, dtype=torch.float16)
    n = dq.numel()
    both(func, a.reps, "dq_post fp32->fp16", n * 6, (dq, dq_out), lambda: dq_out.copy_(dq))
    x = torch.randn(ELEMENTS, device=dev)
    idx = torch.randperm(ELEMENTS, device=dev, dtype=torch.int64).to(torch.int32)
    out = torch.empty_like(x)
    both(gather(), a.reps, "gather fp32", ELEMENTS * 12, (x, idx, out),
         lambda: torch.index_select(x, 0, idx, out=out))
    for dtype, tdt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        a2 = torch.randn(8192, ELEMENTS // 8192, device=dev, dtype=tdt)
        b2, c2 = torch.randn_like(a2), torch.empty_like(a2)
        for bm, bn, threads in ((32, 32, 128), (32, 128, 256)):
            both(add_2d(dtype, bm, bn, threads), a.reps, f"add_2d {dtype} {bm}x{bn}/{threads}",
                 a2.numel() * a2.element_size() * 3, (a2, b2, c2),
                 lambda: torch.add(a2, b2, out=c2))
    a3 = torch.randn(8192, ELEMENTS // 8192, device=dev)
    b3 = torch.empty(ELEMENTS // 8192, 8192, device=dev)
    both(column_copy(), a.reps, "column_copy fp32", a3.numel() * 8, (a3, b3),
         lambda: b3.copy_(a3.t()))


if __name__ == "__main__":
    main()
