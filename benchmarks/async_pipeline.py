"""cp.async software pipelining: the plain TileLang GEMM and a chunked row reduction whose
``T.Pipelined`` copies run as cp.async (the code sm_80 gets; on an sm_90 GPU the same code
is compiled with TMA, wgmma and warp specialization off), at ``num_stages`` 1 (one buffer:
copy, wait, compute, what every stage count ran as before the pass) and 2-4, against
cuBLAS (GEMM) and torch (the reduction) in the same process.  Prints one JSON line per
case.

    python benchmarks/async_pipeline.py [--shapes 4096x4096x4096] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us

NO_TMA = {"disable_tma": True, "disable_wgmma": True, "disable_warp_specialize": True}


def matmul(M, N, K, bm, bn, bk, stages, threads):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
           C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return mm


def row_sums(rows, cols, chunk, stages, block_rows=8):
    """Each block sums ``block_rows`` rows, ``chunk`` columns a step through shared memory."""
    @T.prim_func
    def sums(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows,), "float32")):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
            X_s = T.alloc_shared((block_rows, chunk), "float16")
            part = T.alloc_fragment((block_rows, chunk), "float32")
            total = T.alloc_fragment((block_rows,), "float32")
            T.clear(part)
            for c in T.Pipelined(cols // chunk, num_stages=stages):
                T.copy(X[bx * block_rows, c * chunk], X_s)
                for i, j in T.Parallel(block_rows, chunk):
                    part[i, j] += X_s[i, j]
            T.reduce_sum(part, total, dim=1)
            T.copy(total, Y[bx * block_rows])
    return sums


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stages", default="1,2,3,4")
    args = ap.parse_args()
    stage_list = [int(s) for s in args.stages.split(",")]
    dev = torch.cuda.get_device_name()
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        B = torch.randn(K, N, device="cuda", dtype=torch.float16)
        C = torch.empty(M, N, device="cuda", dtype=torch.float16)
        want = A @ B
        kernels = {}
        for S in stage_list:
            k = tilecute.compile(matmul(M, N, K, 128, 128, 32, S, 128), options=NO_TMA)
            k(A, B, C)
            torch.testing.assert_close(C, want, atol=1.0, rtol=2e-2)
            kernels[S] = k
        ratios = {S: [] for S in stage_list}
        times = {S: [] for S in stage_list}
        for _ in range(args.rounds):  # rotated: cuBLAS and every stage count each round
            ref = time_us(lambda: torch.matmul(A, B, out=C), 20)
            for S, k in kernels.items():
                t = time_us(lambda: k(A, B, C), 20)
                times[S].append(t)
                ratios[S].append(ref / t)
        flops = 2 * M * N * K
        for S in stage_list:
            t = statistics.median(times[S])
            print(json.dumps({"case": "gemm_cp_async", "device": dev, "shape": shape, "tile": "128x128x32",
                              "num_stages": S, "us": round(t, 1), "tflops": round(flops / t / 1e6, 1),
                              "of_cublas": round(statistics.median(ratios[S]), 3)}), flush=True)
    rows, cols = 16384, 8192
    X = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    Y = torch.empty(rows, device="cuda")
    want = X.float().sum(1)
    for S in stage_list:
        k = tilecute.compile(row_sums(rows, cols, 512, S), options=NO_TMA)
        k(X, Y)
        torch.testing.assert_close(Y, want, atol=0.5, rtol=1e-3)
        t = statistics.median(time_us(lambda: k(X, Y), 20) for _ in range(args.rounds))
        ref = statistics.median(time_us(lambda: torch.sum(X, 1, dtype=torch.float32), 20)
                                for _ in range(args.rounds))
        print(json.dumps({"case": "row_sums_cp_async", "device": dev, "shape": f"{rows}x{cols}",
                          "chunk": 512, "num_stages": S, "us": round(t, 1),
                          "gb_s": round(rows * cols * 2 / t / 1e3, 1), "of_torch_sum": round(ref / t, 3)}),
              flush=True)


if __name__ == "__main__":
    main()
