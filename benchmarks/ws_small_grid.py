"""An fp8 GEMM that scales its accumulator every K step (DeepSeek-style block scales: one
per row and 128 of K for A, one per 128 x 128 block for B, applied to a fresh fp32
accumulator each step and added to a running one; TileLang's deepgemm example's form) at
grids of 128, 256 and 1024 blocks, with and without a producer warpgroup
(``T.Pipelined(warp_specialize=True / False)``), against ``torch._scaled_mm`` (fp8, per-tensor
scales: less work, no per-step promotion) and a bf16 ``torch.matmul`` of the same shape in
the same run.  It measures the trade-off behind the warp-specialization pass's default
(``alone_on_sm``): a producer warpgroup pays where each block has an SM of its own, and costs
where two blocks would share one.  The default takes one only for grids of at most the
architecture's smallest GPU's SMs (the H20's 78 on Hopper), so a 128-block grid runs without
one.  Each number is the median of ``--reps`` CUDA-event timings after warm-up
(benchmarks/cuda_timing.py).  Prints one JSON line per shape and variant: microseconds,
TFLOP/s and the speed-up over the kernel without a producer warpgroup.

    python benchmarks/ws_small_grid.py [--reps 50]
"""

from __future__ import annotations

import argparse
import json

import torch

import tilecute
import tilecute.language as T
from cuda_timing import time_us  # (benchmarks/: the script's own folder)

GROUP = 128


def scaled_fp8_gemm(M: int, N: int, K: int, block_N: int, stages: int = 4, ws=None):
    block_M, block_K = 64, GROUP
    nk = K // block_K

    @T.prim_func
    def scaled_fp8_gemm(A: T.Tensor((M, K), "float8_e4m3"), B: T.Tensor((N, K), "float8_e4m3"),
                        SA: T.Tensor((M, nk), "float32"), SB: T.Tensor((N // GROUP, nk), "float32"),
                        C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float8_e4m3")
            b_s = T.alloc_shared((block_N, block_K), "float8_e4m3")
            step = T.alloc_fragment((block_M, block_N), "float32")
            total = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(step)
            T.clear(total)
            for k in T.Pipelined(nk, num_stages=stages, warp_specialize=ws):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b_s)
                sb = SB[bx * block_N // GROUP, k]
                T.gemm(a_s, b_s, step, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    total[i, j] += step[i, j] * (SA[by * block_M + i, k] * sb)
                T.clear(step)
            T.copy(total, C[by * block_M, bx * block_N])

    return scaled_fp8_gemm


def reference(a, b, sa, sb):
    """fp32 math of the same block scaling."""
    M, K = a.shape
    N = b.shape[0]
    af = a.float() * sa.repeat_interleave(GROUP, dim=1)[:, :K]
    bf = b.float() * sb.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)[:N, :K]
    return af @ bf.t()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    for M, N, K, block_N in ((1024, 1024, 8192, 128), (1024, 1024, 8192, 64),
                             (4096, 4096, 4096, 128)):
        a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
        sa = torch.rand(M, K // GROUP, device="cuda") + 0.5
        sb = torch.rand(N // GROUP, K // GROUP, device="cuda") + 0.5
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = reference(a, b, sa, sb)
        cases = {}
        for variant, ws in (("no producer warpgroup", False), ("producer warpgroup", True),
                            ("default", None)):
            kernel = tilecute.compile(scaled_fp8_gemm(M, N, K, block_N, ws=ws))
            kernel(a, b, sa, sb, c)
            torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)
            cases[variant] = lambda k=kernel: k(a, b, sa, sb, c)
        one = torch.ones(1, device="cuda")
        try:
            torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            cases["torch._scaled_mm (per-tensor)"] = lambda: torch._scaled_mm(
                a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        except (RuntimeError, TypeError):
            pass
        a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
        cases["torch.matmul bf16"] = lambda: a16 @ b16.t()
        times = {name: time_us(fn, args.reps, inner=1) for name, fn in cases.items()}
        for name, us in times.items():
            print(json.dumps({"kernel": "scaled_fp8_gemm", "shape": [M, N, K],
                              "block_N": block_N, "variant": name, "us": round(us, 2),
                              "TFLOP/s": round(2 * M * N * K / us / 1e6, 1),
                              "blocks": (M // 64) * (N // block_N),
                              "speedup_over_no_producer": round(times["no producer warpgroup"] / us, 3)}))


if __name__ == "__main__":
    main()
