"""Column sums of a tall matrix (``Y[j] = sum_i X[i, j]``), a block per ``bn`` columns of
128 threads running ``T.reduce_sum(x, acc, dim=0, clear=False)`` over ``bm x bn`` row
tiles: the columns reduced in the tile's own layout (the default, each thread keeping its
columns of ``acc``) against the columns moved last through a transposed shared tile with
``acc`` replicated in every thread (``disable_in_place_column_reduce``, what tilecute did
before), torch's ``X.sum(0)`` and a device copy of X, in the same run.  Each number is the
median of ``--reps`` CUDA-event timings after warm-up (benchmarks/cuda_timing.py).
Prints one JSON line per configuration and variant: microseconds, GB/s counted as one
read of X, and the speed-up over the moved variant.

    python benchmarks/column_reduce.py [--reps 50] [--rows 16384] [--cols 4096]
"""

from __future__ import annotations

import argparse
import json

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)

CONFIGS = [  # (dtype, bm, bn): 32 or 64 columns a block, fewer than the 128 threads
    ("float32", 64, 32),
    ("float16", 64, 64),
    ("float32", 32, 64),
]


def column_sum(M: int, N: int, dtype: str, bm: int, bn: int):
    @T.prim_func
    def column_sum(X: T.Tensor((M, N), dtype), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), threads=128) as bx:
            x = T.alloc_fragment((bm, bn), dtype)
            acc = T.alloc_fragment((bn,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(M, bm), num_stages=2):
                T.copy(X[k * bm, bx * bn], x)
                T.reduce_sum(x, acc, dim=0, clear=False)
            T.copy(acc, Y[bx * bn])

    return column_sum


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=4096)
    args = ap.parse_args()
    M, N = args.rows, args.cols
    for dtype, bm, bn in CONFIGS:
        x = torch.randn(M, N, device="cuda", dtype=getattr(torch, dtype))
        y = torch.empty(N, device="cuda")
        ref = x.float().sum(0)
        cases = {}
        for variant, options in (("moved", {"disable_in_place_column_reduce": True}),
                                 ("in_place", {})):
            kernel = tilecute.compile(column_sum(M, N, dtype, bm, bn), options=options)
            kernel(x, y)
            torch.testing.assert_close(y, ref, atol=1e-2, rtol=1e-3)
            cases[variant] = lambda k=kernel: k(x, y)
        cases["torch.sum(0)"] = lambda: x.sum(0)
        copy = torch.empty_like(x)
        cases["copy_ (X)"] = lambda: copy.copy_(x)
        times = {name: time_us(fn, args.reps, inner=1) for name, fn in cases.items()}
        nbytes = x.numel() * x.element_size()
        for name, us in times.items():
            print(json.dumps({"kernel": "column_sum", "variant": name, "dtype": dtype,
                              "tile": [bm, bn], "shape": [M, N], "us": round(us, 2),
                              "GB/s": round(nbytes / us / 1e3, 1),
                              "speedup_over_moved": round(times["moved"] / us, 3)}))


if __name__ == "__main__":
    main()
