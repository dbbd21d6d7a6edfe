"""A grid extent of 0 (TileLang's issue 1993): a dynamic extent that is 0 at run time, or a
static ``T.Kernel(0)``, compiles, and every call raises a ValueError naming the kernel and
the extent instead of launching (TileLang raises too; a launch would run no block, or on a
clamped grid one block past the data).  The launcher checks the grid before it touches the
driver, so memory-less "CUDA" tensors reach the check on the CPU."""

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import FakeTensor, raises
from tilecute.ir.validate import ValidationError


def _dynamic():
    n = T.dynamic("num_tokens")

    @T.prim_func
    def fill_ones(out: T.Tensor((n,), "float32")):
        with T.Kernel(n, threads=1) as pid:
            out[pid] = T.float32(1.0)
    return fill_ones


def _static():
    @T.prim_func
    def fill_none(out: T.Tensor((4,), "float32")):
        with T.Kernel(0, threads=1) as pid:
            out[pid] = T.float32(1.0)
    return fill_none


def _ceildiv():
    m = T.dynamic("M")

    @T.prim_func
    def tiles(out: T.Tensor((m, 8), "float32")):
        with T.Kernel(2, T.ceildiv(m, 64), threads=32) as (bx, by):
            out[by * 64, bx] = T.float32(1.0)
    return tiles


def test_dynamic_extent_of_zero_raises(cache_dir):
    kernel = tilecute.compile(_dynamic())
    raises(ValueError, ["fill_ones: kernel '", "grid (0, 1, 1) has an empty dimension: its extent "
                        "along x, `num_tokens`, is 0"], kernel, FakeTensor((0,)))


def test_static_kernel_of_zero_compiles_and_every_call_raises(cache_dir):
    kernel = tilecute.compile(_static())
    for _ in range(2):
        raises(ValueError, ["fill_none: kernel '", "grid (0, 1, 1) has an empty dimension: its "
                            "extent along x, `0`, is 0"], kernel, FakeTensor((4,)))


def test_the_extent_is_named_as_the_program_writes_it(cache_dir):
    kernel = tilecute.compile(_ceildiv())
    raises(ValueError, ["grid (2, 0, 1) has an empty dimension: its extent along y, "
                        "`ceildiv(M, 64)`, is 0"], kernel, FakeTensor((0, 8)))


def test_negative_static_extent_is_still_refused():
    with pytest.raises(ValidationError, match="grid extent -1 along x"):
        @T.prim_func
        def negative(out: T.Tensor((4,), "float32")):
            with T.Kernel(-1, threads=1) as pid:
                out[pid] = T.float32(1.0)


@pytest.mark.gpu
def test_zero_grids_on_gpu():
    import torch

    dynamic = tilecute.compile(_dynamic())
    out = torch.zeros(4, device="cuda")
    dynamic(out)
    torch.cuda.synchronize()
    assert out.eq(1.0).all()
    with pytest.raises(ValueError, match="`num_tokens`, is 0"):
        dynamic(torch.zeros(0, device="cuda"))
    static = tilecute.compile(_static())
    out = torch.zeros(4, device="cuda")
    with pytest.raises(ValueError, match="empty dimension"):
        static(out)
    torch.cuda.synchronize()
    assert out.eq(0.0).all()  # nothing ran
