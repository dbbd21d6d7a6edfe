"""GEMM with a manually scheduled pipeline: ``T.Pipelined(n, stage=[0, 0, 2],
order=[0, 1, 2])`` puts both tile copies in stage 0 and the MMA in stage 2, so loads run
two K steps ahead (TileLang's software-pipeline guide)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=256, N=256, K=512, block_M=128, block_N=128, block_K=32, dtype="float16",
            accum_dtype="float"):
    @T.prim_func
    def gemm_manual_pipeline(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), stage=[0, 0, 2], order=[0, 1, 2]):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_manual_pipeline


def make_args(device):
    import torch

    a = torch.randn(256, 512, device=device, dtype=torch.float16)
    b = torch.randn(512, 256, device=device, dtype=torch.float16)
    return [a, b, torch.empty(256, 256, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((a.float() @ b.float()).half(),)
