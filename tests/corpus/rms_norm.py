"""RMSNorm over whole rows held in a fragment: B = A * rsqrt(mean(A^2) + eps), blk_m rows
per block (TileLang's rms_norm example)."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-4, 1e-4
SM80 = True
MISSING = None


def program(M=256, N=1024, blk_m=2, eps=1e-6):
    dtype = "float"

    @T.prim_func
    def rms_norm(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_local = T.alloc_fragment((blk_m, N), dtype)
            A_pow_local = T.alloc_fragment((blk_m, N), dtype)
            A_powsum = T.alloc_fragment((blk_m,), dtype)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return rms_norm


def make_args(device):
    import torch

    a = torch.randn(256, 1024, device=device)
    return [a, torch.empty_like(a)]


def reference(a, b):
    import torch

    return (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6),)
