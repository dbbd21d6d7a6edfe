"""An eager kernel (or a prim_func) that returns a T.macro's output, TileLang's
``return copy_impl(A)`` where the macro declares ``B = T.empty(...)``, launches its kernels
and returns ``B``: the macro is inlined at the top level, its T.empty outputs are the
function's (after the tensor and scalar arguments), in the macro's return order."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


@T.macro
def scaled_copy(X, scale):
    """Y = X * scale, one 64 x 64 tile per block (ragged edges guarded)."""
    rows, cols = X.shape
    Y = T.empty(rows, cols, dtype=X.dtype)
    with T.Kernel(T.ceildiv(cols, 64), T.ceildiv(rows, 64), threads=128) as (bx, by):
        for i, j in T.Parallel(64, 64):
            if by * 64 + i < rows and bx * 64 + j < cols:
                Y[by * 64 + i, bx * 64 + j] = X[by * 64 + i, bx * 64 + j] * scale
    return Y


@T.macro
def split_sign(X):
    """Two outputs: the positive and the negative parts of a vector."""
    (n,) = X.shape
    P = T.empty((n,), X.dtype)
    Q = T.empty((n,), X.dtype)
    with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
        for i in T.Parallel(256):
            if bx * 256 + i < n:
                P[bx * 256 + i] = T.max(X[bx * 256 + i], 0.0)
                Q[bx * 256 + i] = T.min(X[bx * 256 + i], 0.0)
    return P, Q


@tilecute.jit
def doubled(A):
    M, N = T.const("M, N")
    A: T.Tensor[[M, N], T.float32]
    return scaled_copy(A, 2.0)


@tilecute.jit
def doubled_rows(A, cols: int = 192):
    R = T.dynamic("R")
    A: T.Tensor((R, cols), T.float16)
    return scaled_copy(A, 3.0)


@tilecute.jit
def signs(X):
    n = T.const("n")
    X: T.Tensor((n,), T.float32)
    return split_sign(X)


def test_prim_func_returning_a_macro_output():
    m = T.dynamic("m")

    @T.prim_func
    def f(A: T.Tensor((m, 100), T.float32)):
        return scaled_copy(A, 0.5)

    text = f.script()
    assert 'Y = T.empty((m, 100), "float32")' in text and text.rstrip().endswith("return Y"), text
    assert f.out_idx == (-1,)


def test_eager_outputs_follow_the_arguments():
    func = doubled.get_tir(M=100, N=130)
    assert [p.name for p in func.params] == ["A", "Y"] and func.out_idx == (-1,)
    assert "Y = T.empty((100, 130), \"float32\")" in func.script(), func.script()


def test_two_outputs_in_the_macros_order():
    text = signs.get_tir(n=1000).script()
    assert text.index("P = T.empty") < text.index("Q = T.empty")
    assert text.rstrip().endswith("return P, Q"), text


@pytest.mark.parametrize("build", [lambda: doubled.get_tir(M=100, N=130),
                                   lambda: doubled_rows.get_tir(cols=192),
                                   lambda: signs.get_tir(n=1000)],
                         ids=["const", "dynamic", "two"])
def test_builds_sm90a_cubins(build, tmp_path):
    assert tilecute.build_cubin(build(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_macro_output_beside_the_bodys_own_is_refused():
    with pytest.raises(FrontendError, match="returns a T.macro's output beside the body's own"):
        @tilecute.jit
        def both(A):
            n = T.const("n")
            A: T.Tensor((n,), T.float32)
            C = T.empty((n,), T.float32)
            with T.Kernel(1, threads=32):
                pass
            return C, split_sign(A)


def test_a_macro_returning_no_output_is_refused():
    @T.macro
    def just_value(A):
        (n,) = A.shape
        return n

    with pytest.raises(FrontendError, match="returns .*; a prim_func returns the tensors T.empty"):
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            return just_value(A)


@pytest.mark.gpu
def test_gpu_eager_macro_outputs_match_torch(cache_dir):
    import torch

    a = torch.randn(100, 130, device="cuda")
    torch.testing.assert_close(doubled(a), a * 2)
    h = torch.randn(77, 192, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(doubled_rows(h), h * 3)
    x = torch.randn(1000, device="cuda")
    p, q = signs(x)
    torch.testing.assert_close(p, x.clamp(min=0))
    torch.testing.assert_close(q, x.clamp(max=0))
