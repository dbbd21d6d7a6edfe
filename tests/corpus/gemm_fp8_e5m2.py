"""The FP8 GEMM with float8_e5m2 operands (wider range, fewer mantissa bits) and an fp32
output written through shared memory."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = False
MISSING = None


def program(M=256, N=256, K=512, block_M=128, block_N=64, block_K=128):
    dtype, accum_dtype = "float8_e5m2", "float32"

    @T.prim_func
    def gemm_fp8_e5m2(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                      C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return gemm_fp8_e5m2


def make_args(device):
    import torch

    a = torch.randn(256, 512, device=device, dtype=torch.float16).to(torch.float8_e5m2)
    b = torch.randn(256, 512, device=device, dtype=torch.float16).to(torch.float8_e5m2)
    return [a, b, torch.empty(256, 256, device=device)]


def reference(a, b, c):
    return (a.float() @ b.float().T,)
