"""``B = T.empty([m + 1], T.float32)`` whose dims name integer scalar parameters (TileLang's
eager / ``T.empty`` outputs evaluate the scalar arguments when they allocate): the output
is allocated from the scalars' values at the call, and the launcher checks the output's dims
against them (``sym_m`` read from the scalar argument), as it checks dims bound by tensors.
Was refused naming the scalar.  A float scalar in a dim stays refused."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


@T.prim_func
def iota(m: T.int32):
    B = T.empty([m + 1], T.float32)
    with T.Kernel(1, threads=1):
        for i in T.serial(m + 1):
            B[i] = T.cast(i, T.float32)
    return B


@tilecute.jit
def eager_iota(m: T.int32):
    B = T.empty([m + 1], T.float32)
    with T.Kernel(1, threads=1):
        for i in T.serial(m + 1):
            B[i] = T.cast(i, T.float32)
    return B


@tilecute.jit
def tiled_rows(A, n: T.int32):
    k = T.dynamic("k")
    A: T.Tensor[[k], T.float32]
    C = T.empty((2, k * n), T.float32)
    with T.Kernel(1, threads=32):
        for i in T.serial(k * n):
            C[0, i] = A[i % k]
            C[1, i] = T.cast(n, T.float32)
    return C


def test_prim_func_output_from_a_scalar(cache_dir):
    assert not iota.symbols  # m stays the scalar parameter, no symbol of its own
    kernel = tilecute.compile(iota, target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    launcher = kernel.get_source("launcher")
    assert "const int64_t sym_m = arg_m;" in launcher
    assert 'tc_check_dim_expr(t_B->shape[0], (sym_m + INT64_C(1)), "B", "shape[0]", "m + 1");' in launcher
    (b,) = kernel._allocate([23], kernel.out_idx)
    assert tuple(b.shape) == (24,)


def test_launcher_checks_the_output_against_the_scalar(cache_dir):
    import tvm_ffi

    kernel = tilecute.compile(iota, target="sm_90a")
    f = tvm_ffi.load_module(str(kernel.path / "launcher.so"))[kernel.name]
    with pytest.raises(ValueError, match=r"argument 'B'.*shape\[0\].*m \+ 1.*got 7"):
        f(5, torch.zeros(7))  # (checked before any device is looked at)


@pytest.mark.parametrize("fn,args,shape", [(eager_iota, (23,), (24,)),
                                           (tiled_rows, (torch.zeros(7), 3), (2, 21))])
def test_eager_outputs_from_scalars(fn, args, shape, cache_dir):
    kernel = fn.compile(*args)
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    (out,) = kernel._allocate(list(args), kernel.out_idx)
    assert tuple(out.shape) == shape


def test_float_scalar_dim_stays_refused():
    with pytest.raises(FrontendError, match="x is float32"):
        @T.prim_func
        def bad(x: T.float32):
            B = T.empty([T.cast(x, T.int32)], T.float32)
            with T.Kernel(1, threads=1):
                B[0] = x
            return B


@pytest.mark.gpu
def test_scalar_sized_outputs_match_torch():
    b = tilecute.compile(iota)(23)
    torch.testing.assert_close(b, torch.arange(24, dtype=torch.float32, device="cuda"))
    b = eager_iota(9)
    torch.testing.assert_close(b, torch.arange(10, dtype=torch.float32, device="cuda"))
    a = torch.arange(7, dtype=torch.float32, device="cuda")
    c = tiled_rows(a, 3)
    assert c.shape == (2, 21)
    torch.testing.assert_close(c[0], a.repeat(3))
    torch.testing.assert_close(c[1], torch.full((21,), 3.0, device="cuda"))
