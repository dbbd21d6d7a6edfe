"""A module with ``from __future__ import annotations`` keeps every annotation as its text;
a kernel factory's ``T.Tensor((M, K), "float16")`` parameters (closure values in the shape)
and scalar annotations are evaluated as TileLang evaluates them, not read as dtype names."""

from __future__ import annotations

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N


def scaled_rows(rows, cols):
    @T.prim_func
    def scale(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float32"),
              alpha: T.float32, n: "int32"):
        with T.Kernel(T.ceildiv(rows, 4), threads=128) as bx:
            for i, j in T.Parallel(4, cols):
                if bx * 4 + i < n:
                    Y[bx * 4 + i, j] = T.Cast("float32", X[bx * 4 + i, j]) * alpha
    return scale


def test_postponed_annotations_are_evaluated():
    func = scaled_rows(64, 256)
    X, Y, alpha, n = func.params
    assert isinstance(X, N.Buffer) and X.dtype == "float16"
    assert tuple(d.value for d in X.shape) == (64, 256)
    assert Y.dtype == "float32" and alpha.dtype == "float32" and n.dtype == "int32"
    tilecute.compile(func, target="sm_90a").ensure_cubin()


def typed_copy(n, dtype):
    """``dtype`` appears only in the annotations: no free variable of ``copy``, so its
    closure lacks it; TileLang's parser evaluates annotations in the defining frame."""
    @T.prim_func
    def copy(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                B[i] = A[i]
    return copy


def test_names_used_only_in_postponed_annotations():
    func = typed_copy(256, "bfloat16")
    assert [p.dtype for p in func.params] == ["bfloat16", "bfloat16"]
    assert tuple(d.value for d in func.params[0].shape) == (256,)
