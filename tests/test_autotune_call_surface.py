"""TileLang's autotune call surface: ``tuned(*args, __return_kernel=True)`` returns the tuned
kernel itself (TileLang's ``__call__`` pops the keyword; tilecute passed it on to the kernel
factory, a TypeError); a kernel with a scalar input and no ``set_autotune_inputs`` /
``supply_prog`` is TileLang's ValueError naming ``set_autotune_inputs``, before timing."""

import tilecute
import tilecute.language as T


@tilecute.autotune(configs=[{"block": 64}, {"block": 128}])
@tilecute.jit(out_idx=[-1])
def _double(n: int = 1024, block: int = 128):
    @T.prim_func
    def double(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 2.0

    return double


def test_return_kernel_keyword_is_taken_not_passed_on():
    # a call that gives the tuned parameter compiles it untuned (no GPU needed)
    kernel = _double(1024, block=64, __return_kernel=True)
    assert isinstance(kernel, tilecute.JITKernel)
    assert "double" in kernel.get_kernel_source()
    assert kernel.ensure_cubin()


@tilecute.autotune(configs=[{"block": 64}, {"block": 128}])
@tilecute.jit
def _shift(n: int = 1024, block: int = 128):
    @T.prim_func
    def shift(X: T.Tensor((n,), "float32"), s: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                X[bx * block + i] = X[bx * block + i] + s

    return shift


def test_scalar_input_without_supplied_inputs_is_refused_before_timing():
    # TileLang's ValueError: generated inputs are tensors only (refused before any timing,
    # so on a machine without a GPU too)
    import pytest

    with pytest.raises(ValueError, match=r"scalar input parameter 's'.*set_autotune_inputs"):
        _shift(1024)
