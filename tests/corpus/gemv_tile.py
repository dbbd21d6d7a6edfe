"""GEMV at tile level: o = a @ x for a (M, N) matrix, block_M rows per block; each
N-step multiplies a tile into a fragment and reduces it along the row into a running sum
(TileLang's tile-level GEMV, without the reducer)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=512, N=1024, block_M=64, block_N=128, threads=128, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemv_tile(a: T.Tensor((M, N), dtype), x: T.Tensor((N,), dtype), o: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as i0_m:
            a_smem = T.alloc_shared((block_M, block_N), dtype)
            x_frag = T.alloc_fragment((block_N,), dtype)
            prod = T.alloc_fragment((block_M, block_N), accum_dtype)
            o_acc = T.alloc_fragment((block_M,), accum_dtype)
            T.clear(o_acc)
            for i0_n in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(a[i0_m * block_M, i0_n * block_N], a_smem)
                T.copy(x[i0_n * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    prod[i, j] = T.Cast(accum_dtype, a_smem[i, j]) * T.Cast(accum_dtype, x_frag[j])
                T.reduce_sum(prod, o_acc, dim=1, clear=False)
            T.copy(o_acc, o[i0_m * block_M])

    return gemv_tile


def make_args(device):
    import torch

    a = torch.randn(512, 1024, device=device, dtype=torch.float16)
    x = torch.randn(1024, device=device, dtype=torch.float16)
    return [a, x, torch.empty(512, device=device, dtype=torch.float16)]


def reference(a, x, o):
    return ((a.float() @ x.float()).half(),)
