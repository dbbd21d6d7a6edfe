"""Kernels to ship with `tilecute export` (see README.md beside this file).

    tilecute export examples/export/kernels.py -o dist --arch sm_90a,sm_80 --name tcdemo

exports `vector_add` (one kernel for every length: `N` is symbolic) and `scale`, whose
factory compiled two specializations below: the package picks one by the argument's
shape and refuses any other (a package never compiles).
"""

import tilecute
import tilecute.language as T

N = T.symbolic("N")


@T.prim_func
def vector_add(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
               C: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, 1024), threads=256) as bx:
        for i in T.Parallel(1024):
            if bx * 1024 + i < N:
                C[bx * 1024 + i] = A[bx * 1024 + i] + B[bx * 1024 + i]


@tilecute.jit(out_idx=[-1])
def scale(rows, cols, factor=2.0, dtype="float16"):
    @T.prim_func
    def scale_rows(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(rows, threads=128) as r:
            for j in T.Parallel(cols):
                Y[r, j] = X[r, j] * T.cast(factor, dtype)

    return scale_rows


# the specializations the package serves (compiled here for the first --arch; `tilecute
# export` compiles each again for every arch)
scale(128, 256)
scale(64, 1024)
