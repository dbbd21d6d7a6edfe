"""An MoE-style expert GEMM whose K loop stands under a block-uniform ``if rows[e] > 0:``
(fp16 in, fp32 accumulate, 128 x 128 x 64 tiles, 3 stages, 128 threads): its loads as TMA
(the default since the loop under the ``if`` keeps TMA: a producer warpgroup on a grid
small enough to leave each block alone on its SM, else the TMA software pipeline) against
the cp.async pipeline it had before (``disable_tma``, the same path), the same GEMM
without the ``if`` (its loop at the kernel's top level) and torch's matmul, in the same
run.  Every expert has rows, so every variant does the whole GEMM.  Each number is the
median of ``--reps`` CUDA-event timings after warm-up (benchmarks/cuda_timing.py).
Prints one JSON line per shape and variant: microseconds, TFLOP/s and the speed-up over
the cp.async variant.

    python benchmarks/guarded_pipeline.py [--reps 50] [--shapes 1024x1024x1024,4096x4096x4096]
"""

from __future__ import annotations

import argparse
import json

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)

EXPERTS = 8


def expert_gemm(M: int, N: int, K: int, guarded: bool = True):
    @T.prim_func
    def expert_gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                    rows: T.Tensor((EXPERTS,), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            if guarded:
                if rows[by % EXPERTS] > 0:
                    for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                        T.copy(A[by * 128, k * 64], A_s)
                        T.copy(B[k * 64, bx * 128], B_s)
                        T.gemm(A_s, B_s, acc)
            else:
                for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                    T.copy(A[by * 128, k * 64], A_s)
                    T.copy(B[k * 64, bx * 128], B_s)
                    T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 128, bx * 128])

    return expert_gemm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--shapes", default="1024x1024x1024,4096x4096x4096")
    args = ap.parse_args()
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        rows = torch.ones(EXPERTS, device="cuda", dtype=torch.int32)
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        cases = {}
        for variant, guarded, options in (("cp_async (disable_tma)", True, {"disable_tma": True}),
                                          ("tma (default)", True, {}),
                                          ("no if (top-level loop)", False, {})):
            kernel = tilecute.compile(expert_gemm(M, N, K, guarded), options=options)
            kernel(a, b, rows, c)
            torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=5e-3)
            cases[variant] = lambda k=kernel: k(a, b, rows, c)
        cases["torch.matmul"] = lambda: torch.matmul(a, b)
        times = {name: time_us(fn, args.reps, inner=1) for name, fn in cases.items()}
        for name, us in times.items():
            print(json.dumps({"kernel": "expert_gemm", "variant": name, "shape": [M, N, K],
                              "us": round(us, 2), "TFLOP/s": round(2 * M * N * K / us / 1e6, 1),
                              "speedup_over_cp_async": round(times["cp_async (disable_tma)"] / us, 3)}))


if __name__ == "__main__":
    main()
