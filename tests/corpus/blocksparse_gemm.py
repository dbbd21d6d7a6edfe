"""Block-sparse GEMM: C = A @ B over only the K blocks a boolean BlockMask[m, n, k]
enables for each output tile; the mask is read inside the pipelined K loop (TileLang's
block-sparse GEMM example), bf16 operands and 256 threads."""

import tilecute.language as T

OUTPUTS = (3,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None


def program(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64, num_stages=2,
            threads=256, dtype="bfloat16", accum_dtype="float"):
    @T.prim_func
    def blocksparse_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                         BlockMask: T.Tensor((M // block_M, N // block_N, K // block_K), "bool"),
                         C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                if BlockMask[by, bx, k]:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return blocksparse_gemm


def make_args(device):
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(256, 512, device=device, dtype=torch.bfloat16)
    b = torch.randn(512, 256, device=device, dtype=torch.bfloat16)
    mask = (torch.rand(2, 2, 8, generator=g) > 0.4).to(device)
    return [a, b, mask, torch.empty(256, 256, device=device, dtype=torch.bfloat16)]


def reference(a, b, mask, c):
    import torch

    bm, bn, bk = 128, 128, 64
    ref = torch.zeros(256, 256, device=a.device)
    for i in range(2):
        for j in range(2):
            for k in range(8):
                if mask[i, j, k]:
                    ref[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (
                        a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk].float()
                        @ b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn].float())
    return (ref.bfloat16(),)
