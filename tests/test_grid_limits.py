"""A grid past CUDA's gridDim limits (y or z above 65535, x at 2^31 or more), as TileLang's
``examples/analyze/example_conv_analyze.py`` writes one (``T.Kernel(T.ceildiv(F, 128),
T.ceildiv(N * OH * OW, 64))``: 262144 blocks along y): TileLang compiles it as written (its
lowered launch is ``(4, 262144, 1)`` over ``blockIdx.y``, no dimension remapped) and the CUDA
launch fails.  tilecute does the same: such a grid, static or dynamic, compiles (its cubin
builds) and every call raises a ValueError naming the kernel and the dimension past its limit,
before anything launches.  A negative static extent stays refused."""

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import FakeTensor, raises


def _rows_along_y(rows: int, block_rows: int = 64):
    @T.prim_func
    def row_tiles(A: T.Tensor((rows, 32), "float16"), B: T.Tensor((rows, 32), "float16")):
        with T.Kernel(1, T.ceildiv(rows, block_rows), threads=128) as (bx, by):
            tile = T.alloc_shared((block_rows, 32), "float16")
            T.copy(A[by * block_rows, 0], tile)
            T.copy(tile, B[by * block_rows, 0])
    return row_tiles


def _dynamic_heads_along_z():
    n = T.dynamic("n")

    @T.prim_func
    def per_head(x: T.Tensor((n, 64), "float32"), y: T.Tensor((n, 64), "float32")):
        with T.Kernel(1, 1, n, threads=64) as (bx, by, bz):
            for j in T.Parallel(64):
                y[bz, j] = x[bz, j] * 2.0
    return per_head


def test_static_grid_past_y_limit_compiles_and_every_call_raises(cache_dir):
    rows = 262144 * 64  # 262144 blocks along y, TileLang's conv example's grid
    kernel = tilecute.compile(_rows_along_y(rows))
    kernel.ensure_cubin()
    a, b = FakeTensor((rows, 32), "float16"), FakeTensor((rows, 32), "float16")
    for _ in range(2):
        raises(ValueError, ["row_tiles: kernel '", "grid (1, 262144, 1) is outside the CUDA "
                            "limits (grid.y = 262144 is above 65535", "1 <= y, z < 65536"],
               kernel, a, b)


def test_dynamic_grid_past_z_limit_raises_and_within_it_passes_the_check(cache_dir):
    kernel = tilecute.compile(_dynamic_heads_along_z())
    raises(ValueError, ["per_head: kernel '", "grid (1, 1, 65536) is outside the CUDA limits "
                        "(grid.z = 65536 is above 65535"],
           kernel, FakeTensor((65536, 64)), FakeTensor((65536, 64)))


def test_the_launch_keeps_the_program_s_dimensions(cache_dir):
    """No remapping onto blockIdx.x: the grid is the program's, blockIdx.y the row tile."""
    src = tilecute.compile(_rows_along_y(70000 * 64)).get_kernel_source()
    assert "bx, by, _ = cute.arch.block_idx()" in src
    assert ".launch(grid=[1, 70000, 1], block=[128, 1, 1]" in src


def test_a_negative_static_extent_is_still_refused():
    from tilecute.ir.validate import ValidationError

    with pytest.raises(ValidationError, match=r"grid extent -2 along y is negative \(CUDA's "
                                              r"range is 1..65535; 0 and extents past it compile"):
        @T.prim_func
        def negative(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, -2, threads=32) as (bx, by):
                A[bx] = T.float32(1.0)


@pytest.mark.gpu
def test_grids_past_the_limits_on_gpu():
    """On the GPU the call raises before launching (no CUDA error left on the context), and
    the same program within the limits runs."""
    import torch

    big = tilecute.compile(_rows_along_y(70000 * 64))
    a = torch.randn(70000 * 64, 32, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="grid.y = 70000 is above 65535"):
        big(a, torch.empty_like(a))
    small = tilecute.compile(_rows_along_y(65535 * 64))
    a = torch.randn(65535 * 64, 32, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    small(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    heads = tilecute.compile(_dynamic_heads_along_z())
    x = torch.randn(65536, 64, device="cuda")
    with pytest.raises(ValueError, match="grid.z = 65536 is above 65535"):
        heads(x, torch.empty_like(x))
    x = x[:65535].contiguous()
    y = torch.empty_like(x)
    heads(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 2.0)
