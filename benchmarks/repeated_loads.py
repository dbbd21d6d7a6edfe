"""A two-pass row softmax that copies its row into the same fragment twice (TileLang's
online_softmax example, 8192 x 8192 fp16, a row a block of 128 threads), with the repeated
load dropped (the default, pass ``reuse_repeated_loads``) and kept
(``disable_repeated_load_reuse``), against torch's softmax and a device copy of X in the
same run.  Each number is the median of ``--reps`` CUDA-event timings after warm-up
(benchmarks/cuda_timing.py).  Prints one JSON line per variant: microseconds, GB/s counted
as one read of X and one write of Y, and the speed-up over the kept-load kernel.

    python benchmarks/repeated_loads.py [--reps 50] [--rows 8192] [--cols 8192]
"""

from __future__ import annotations

import argparse
import json

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)


def online_softmax(rows: int, cols: int):
    scale = 1.44269504  # log2(e)

    @T.prim_func
    def online_softmax(X: T.Tensor((rows, cols), "float16"),
                       Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(rows, threads=128) as bx:
            x = T.alloc_fragment((1, cols), "float16")
            y = T.alloc_fragment((1, cols), "float16")
            lse = T.alloc_fragment((1,), "float32")
            max_x = T.alloc_fragment((1,), "float16")
            exp_x = T.alloc_fragment((1, cols), "float32")
            sum_exp_x = T.alloc_fragment((1,), "float32")
            T.fill(lse, -T.infinity("float32"))
            T.copy(X[bx, 0], x)
            T.reduce_max(x, max_x, dim=1, clear=True)
            for i, j in T.Parallel(1, cols):
                exp_x[i, j] = T.exp2(x[i, j] * scale - max_x[i] * scale)
            T.reduce_sum(exp_x, sum_exp_x, dim=1, clear=True)
            for i in T.Parallel(1):
                lse[i] = max_x[i] * scale + T.log2(T.exp2(lse[i] - max_x[i] * scale) + sum_exp_x[i])
            T.copy(X[bx, 0], x)
            for i, j in T.Parallel(1, cols):
                y[i, j] = T.exp2(x[i, j] * scale - lse[i])
            T.copy(y, Y[bx, 0])

    return online_softmax


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=8192)
    args = ap.parse_args()
    x = torch.randn(args.rows, args.cols, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    ref = torch.softmax(x.float(), dim=1)
    cases = {}
    for variant, options in (("kept", {"disable_repeated_load_reuse": True}), ("reused", {})):
        kernel = tilecute.compile(online_softmax(args.rows, args.cols), options=options)
        kernel(x, y)
        torch.testing.assert_close(y.float(), ref, atol=2e-3, rtol=1e-2)
        cases[variant] = lambda k=kernel: k(x, y)
    cases["torch.softmax"] = lambda: torch.softmax(x, dim=1)
    cases["copy_ (X -> Y)"] = lambda: y.copy_(x)
    times = {name: time_us(fn, args.reps, inner=1) for name, fn in cases.items()}
    for name, us in times.items():
        print(json.dumps({"kernel": "online_softmax", "variant": name,
                          "shape": [args.rows, args.cols], "us": round(us, 2),
                          "GB/s": round(nbytes / us / 1e3, 1),
                          "speedup_over_kept": round(times["kept"] / us, 3)}))


if __name__ == "__main__":
    main()
