"""Tile-level GEMV with TileLang's reducer: ``T.alloc_reducer(block_M, accum, replication=
"all")`` is a per-thread partial sum that T.Parallel loops add into and
``T.finalize_reducer`` combines across threads (TileLang's gemv_alloc_reducer)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=512, N=1024, block_M=64, block_N=128, num_stages=2, threads=128, dtype="float16",
            accum_dtype="float"):
    @T.prim_func
    def gemv_reducer(a: T.Tensor((M, N), dtype), x: T.Tensor((N,), dtype), o: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as i0_m:
            o_reducer = T.alloc_reducer(block_M, accum_dtype, replication="all")
            T.clear(o_reducer)
            for i0_n in T.Pipelined(T.ceildiv(N, block_N), num_stages=num_stages):
                a_smem = T.alloc_shared((block_M, block_N), dtype)
                T.copy(a[i0_m * block_M, i0_n * block_N], a_smem)
                a_frag = T.alloc_fragment((block_M, block_N), dtype)
                T.copy(a_smem, a_frag)
                x_frag = T.alloc_fragment(block_N, dtype)
                T.copy(x[i0_n * block_N], x_frag)
                for i1_m, i1_n in T.Parallel(block_M, block_N):
                    o_reducer[i1_m] += a_frag[i1_m, i1_n] * x_frag[i1_n]
            T.finalize_reducer(o_reducer)
            T.copy(o_reducer, o[i0_m * block_M])

    return gemv_reducer


from .gemv_tile import make_args  # noqa: E402,F401  (the same problem)


def reference(a, x, o):
    # TileLang's meaning of `o_reducer[i] += a_frag[i, j] * x_frag[j]`: the float16 product
    # (rounded to float16), added in float32
    return ((a * x).float().sum(-1).half(),)
