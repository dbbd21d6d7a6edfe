"""A program with plain T.dynamic extents (tests/test_variants.py)."""

import tilecute.language as T

def copy2d(block_M=64, block_K=64):
    M, K = T.dynamic("M, K")

    @T.prim_func
    def copy2d(A: T.Tensor((M, K), "float16"), B: T.Tensor((M, K), "float16")):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(M, block_M), threads=128) as (bx, by):
            s = T.alloc_shared((block_M, block_K), "float16")
            T.copy(A[by * block_M, bx * block_K], s)
            T.copy(s, B[by * block_M, bx * block_K])
    return copy2d
