"""GEMV with 128-bit loads: as the split-K GEMV, but each thread reads its chunk of A and
B with ``T.vectorized`` loops (8 fp16 per load) and accumulates in a ``T.alloc_var``."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(N=512, K=2048, BLOCK_N=16, reduce_threads=8, dtype="float16", accum_dtype="float"):
    TILE_K = 128 // 16  # one 128-bit transaction of fp16
    BLOCK_K = reduce_threads * TILE_K

    @T.prim_func
    def gemv_vectorized(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
            acc = T.alloc_var(accum_dtype, init=0)
            if tk == 0:
                C_shared[tn] = 0
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.vectorized(TILE_K):
                    A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                    B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
                for k in T.serial(TILE_K):
                    acc += T.Cast(accum_dtype, A_local[k]) * T.Cast(accum_dtype, B_local[k])
            T.atomic_add(C_shared[tn], acc)
            C[bn * BLOCK_N + tn] = C_shared[tn]

    return gemv_vectorized


def make_args(device):
    import torch

    a = torch.randn(2048, device=device, dtype=torch.float16)
    b = torch.randn(512, 2048, device=device, dtype=torch.float16)
    return [a, b, torch.empty(512, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((b.float() @ a.float()).half(),)
