"""RMSNorm for long rows in column chunks: the sum of squares accumulates over
``T.Serial`` steps through a shared tile, then a second pass scales the chunks, walking
them backwards for cache reuse (TileLang's rms_norm_splitk), with a weight vector."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-4, 1e-4
SM80 = True
MISSING = None


def program(M=128, N=4096, blk_m=4, blk_k=512, eps=1e-6):
    dtype = "float"
    num_k_step = T.ceildiv(N, blk_k)

    @T.prim_func
    def rms_norm_splitk(A: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_shared = T.alloc_shared((blk_m, blk_k), dtype)
            A_local = T.alloc_fragment((blk_m, blk_k), dtype)
            A_powsum = T.alloc_fragment((blk_m,), dtype)
            T.clear(A_local)
            for k in T.Serial(num_k_step):
                T.copy(A[bx * blk_m, k * blk_k], A_shared)
                for i, j in T.Parallel(blk_m, blk_k):
                    A_local[i, j] += A_shared[i, j] * A_shared[i, j]
            T.reduce_sum(A_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + eps)
            for k in T.Serial(num_k_step):
                kk = num_k_step - 1 - k
                T.copy(A[bx * blk_m, kk * blk_k], A_shared)
                for i, j in T.Parallel(blk_m, blk_k):
                    A_shared[i, j] *= A_powsum[i] * W[kk * blk_k + j]
                T.copy(A_shared, B[bx * blk_m, kk * blk_k])

    return rms_norm_splitk


def make_args(device):
    import torch

    a = torch.randn(128, 4096, device=device)
    w = torch.rand(4096, device=device) + 0.5
    return [a, w, torch.empty_like(a)]


def reference(a, w, b):
    import torch

    return (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w,)
