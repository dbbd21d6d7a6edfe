"""T.use_swizzle in TileLang's idioms: the panel walk of a 2-D grid, TileLang's order names,
and a 1-D grid, where TileLang's rasterization maps every block to itself (a no-op)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


def _rows_scaled(n=4096, block=256, swizzle=True, order="row"):
    @T.prim_func
    def rows_scaled(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            if swizzle:
                T.use_swizzle(10, order=order)
            x = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], x)
            for i in T.Parallel(block):
                x[i] = x[i] * 2.0 + 1.0
            T.copy(x, B[bx * block])

    return rows_scaled


def _grid2d(order):
    @T.prim_func
    def tiles(A: T.Tensor((512, 512), "float32"), B: T.Tensor((512, 512), "float32")):
        with T.Kernel(8, 4, threads=128) as (bx, by):
            T.use_swizzle(2, order=order)
            x = T.alloc_fragment((128, 64), "float32")
            T.copy(A[by * 128, bx * 64], x)
            T.copy(x, B[by * 128, bx * 64])

    return tiles


def _ir(func, arch="sm_90a"):
    return print_func(lower(func, arch).func)


@pytest.mark.parametrize("order", ["row", "column"])
def test_use_swizzle_in_a_1d_grid_keeps_the_block_index(order):
    # TileLang's rasterization2DRow/Column of a grid one block high: (x, 0) -> (x, 0)
    assert _ir(_rows_scaled(order=order)) == _ir(_rows_scaled(swizzle=False))


def test_use_swizzle_in_a_1d_grid_builds(tmp_path):
    assert tilecute.build_cubin(_rows_scaled(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_use_swizzle_column_is_tilelangs_name_for_columns():
    text = _ir(_grid2d("column"))
    assert "panel_offset" in text and text == _ir(_grid2d("col"))
    assert text != _ir(_grid2d("row"))


@pytest.mark.parametrize("order, needle", [
    ("mlx", "T.use_swizzle(order='mlx') is TileLang's Metal rasterization"),
    ("diagonal", "T.use_swizzle(order='diagonal'): order is 'row' or 'column'"),
])
def test_use_swizzle_orders_tilecute_refuses(order, needle):
    with pytest.raises(FrontendError) as e:
        _rows_scaled(order=order)
    assert needle in str(e.value)
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1)
                if "T.use_swizzle(10, order=order)" in t)
    assert f"test_use_swizzle.py:{line}:" in str(e.value), str(e.value)


@pytest.mark.gpu
def test_use_swizzle_1d_grid_on_gpu():
    import torch

    a = torch.randn(4096, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(_rows_scaled())(a, b)
    torch.testing.assert_close(b, a * 2.0 + 1.0)
