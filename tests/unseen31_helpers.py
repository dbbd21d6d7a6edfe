"""Helpers imported by tests/unseen_programs31.py: T.macro and T.prim_func builders defined in
another module, as repositories keep them in a ``kernels/common.py`` (with postponed
annotations, ``from __future__ import annotations``, as many such modules have)."""

from __future__ import annotations

import tilecute
import tilecute.language as T

ROWS = T.dynamic("ROWS")


@T.macro
def row_reduce_max_sum(frag, row_max, row_sum, scale):
    """row_max = max over the row of frag * scale; frag <- exp(frag * scale - row_max);
    row_sum = the row's sum."""
    T.reduce_max(frag, row_max, dim=1)
    for i, j in T.Parallel(frag.shape[0], frag.shape[1]):
        frag[i, j] = T.exp(frag[i, j] * scale - row_max[i] * scale)
    T.reduce_sum(frag, row_sum, dim=1)


@T.macro
def load_tile(src, dst, row0, col0):
    T.copy(src[row0, col0], dst)


def make_rowscale(M, N, block_M=32, dtype=T.float16):
    """A prim_func builder in another module: Y[i, :] = X[i, :] * s[i]."""

    @T.prim_func
    def rowscale(X: T.Tensor((M, N), dtype), s: T.Tensor((M,), T.float32), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.cast(T.cast(X[bx * block_M + i, j], T.float32) * s[bx * block_M + i], dtype)

    return rowscale


@T.prim_func
def fixed_axpby(X: T.Tensor((4096,), T.float32), Y: T.Tensor((4096,), T.float32), alpha: T.float32,
                Z: T.Tensor((4096,), T.float32)):
    """A module-level prim_func with fixed shapes (compiled by the tests with tilecute.compile)."""
    with T.Kernel(32, threads=128) as bx:
        for i in T.Parallel(128):
            Z[bx * 128 + i] = alpha * X[bx * 128 + i] + Y[bx * 128 + i]


LOG2E = 1.4426950408889634


@T.macro
def exp2_scaled(frag, row_max, scale):
    """frag <- 2^((frag - row_max) * scale * log2 e): a macro using a module constant."""
    for i, j in T.Parallel(frag.shape[0], frag.shape[1]):
        frag[i, j] = T.exp2((frag[i, j] - row_max[i]) * (scale * LOG2E))


@T.macro
def online_softmax_step(scores, row_max, row_max_prev, row_sum, rescale, scale):
    """One online-softmax step: a helper macro calling another of this module."""
    T.copy(row_max, row_max_prev)
    T.reduce_max(scores, row_max, dim=1, clear=False)
    for i in T.Parallel(scores.shape[0]):
        rescale[i] = T.exp2((row_max_prev[i] - row_max[i]) * (scale * LOG2E))
    exp2_scaled(scores, row_max, scale)
    for i in T.Parallel(scores.shape[0]):
        row_sum[i] = row_sum[i] * rescale[i]
    T.reduce_sum(scores, row_sum, dim=1, clear=False)


@tilecute.jit
def eager_rowscale_sig(X: T.Tensor((ROWS, 128), T.float32), s: T.float32, block_M: int = 8):
    """Y = s * X, an eager kernel whose signature annotations are strings (postponed)."""
    rows, cols = X.shape
    Y = T.empty((rows, cols), T.float32)
    with T.Kernel(T.ceildiv(rows, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, cols):
            Y[bx * block_M + i, j] = X[bx * block_M + i, j] * s
    return Y
