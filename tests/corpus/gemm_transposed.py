"""C = A^T @ B^T with A stored (K, M) and B stored (N, K), bf16 in, fp32 out written
straight from the accumulator fragment; the K loop's shared tiles are transposed
operands of T.gemm, and warps split the tile along M (GemmWarpPolicy.FullRow)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None


def program(M=256, N=384, K=512, block_M=64, block_N=128, block_K=64, num_stages=2):
    dtype, accum_dtype = "bfloat16", "float32"

    @T.prim_func
    def gemm_transposed(A: T.Tensor((K, M), dtype), B: T.Tensor((N, K), dtype),
                        C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_K, block_M), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[k * block_K, by * block_M], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=True, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_transposed


def make_args(device):
    import torch

    a = torch.randn(512, 256, device=device, dtype=torch.bfloat16)
    b = torch.randn(384, 512, device=device, dtype=torch.bfloat16)
    return [a, b, torch.empty(256, 384, device=device)]


def reference(a, b, c):
    return (a.float().T @ b.float().T,)
