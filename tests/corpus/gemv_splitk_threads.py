"""GEMV at thread level: C = B @ A with a 2-D thread block (BLOCK_N, reduce_threads);
thread (tn, tk) takes every reduce_threads-th chunk of row tn in registers, the partial
sums meet in shared memory through atomic adds (TileLang's split-K GEMV)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(N=1024, K=1024, BLOCK_N=32, reduce_threads=4, TILE_K=8, dtype="float16",
            accum_dtype="float"):
    BLOCK_K = reduce_threads * TILE_K

    @T.prim_func
    def gemv_splitk_threads(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype),
                            C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
            C_accum = T.alloc_local((1,), accum_dtype)
            if tk == 0:
                C_shared[tn] = 0
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.serial(TILE_K):
                    A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                    B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
                for k in T.serial(TILE_K):
                    C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
            T.atomic_add(C_shared[tn], C_accum[0])
            C[bn * BLOCK_N + tn] = C_shared[tn]

    return gemv_splitk_threads


def make_args(device):
    import torch

    a = torch.randn(1024, device=device, dtype=torch.float16)
    b = torch.randn(1024, 1024, device=device, dtype=torch.float16)
    return [a, b, torch.empty(1024, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((b.float() @ a.float()).half(),)
