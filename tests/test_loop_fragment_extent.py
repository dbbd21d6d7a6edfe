"""A fragment that a ``T.Parallel`` nest indexes at exactly the nest's variables takes the
nest's layout in TileLang (``CompleteBufferFragment``: a common access returns the loop
layout), so its declared shape bounds nothing there: ``s = T.alloc_fragment([heads])``
written ``s[i] = Sinks[by]`` in ``T.Parallel(block_M)`` holds ``block_M`` values when
``heads < block_M`` (TileLang's attention-sink backward examples run at fewer heads than
``block_M``; TileLang 0.1.15 lowers them as at ``heads == block_M``).  tilecute widens such
a dim to the nest's extent in the frontend; an index that is not the nest's own variable
keeps the declared extent, and the bounds check still refuses it."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.validate import ValidationError
from tilecute.ir.visitor import walk_stmts

ROWS, COLS, BLOCK = 128, 32, 64


def _row_bias(heads: int, index: str = "i"):
    """out[h, r, c] = x[h, r, c] + bias[h]; the bias goes through a fragment declared with
    ``heads`` entries and filled over the block's ``BLOCK`` rows."""
    text = f'''
import tilecute.language as T


@T.prim_func
def row_bias(X: T.Tensor(({heads}, {ROWS}, {COLS}), T.float32), Bias: T.Tensor(({heads},), T.float32),
             Out: T.Tensor(({heads}, {ROWS}, {COLS}), T.float32)):
    with T.Kernel(T.ceildiv({ROWS}, {BLOCK}), {heads}, threads=128) as (bx, by):
        tile = T.alloc_fragment(({BLOCK}, {COLS}), T.float32)
        bias = T.alloc_fragment(({heads},), T.float32)
        T.copy(X[by, bx * {BLOCK}, 0], tile)
        for i in T.Parallel({BLOCK}):
            bias[{index}] = Bias[by]
        for i, j in T.Parallel({BLOCK}, {COLS}):
            tile[i, j] = tile[i, j] + bias[i]
        T.copy(tile, Out[by, bx * {BLOCK}, 0])
'''
    return T.from_script(text)


def _grid_scale(rows_declared: int):
    """out[r, c] = x[r, c] * 2 through a 2-D fragment declared with fewer rows than the
    nest that writes and reads it."""
    text = f'''
import tilecute.language as T


@T.prim_func
def grid_scale(X: T.Tensor(({BLOCK}, {COLS}), T.float16), Out: T.Tensor(({BLOCK}, {COLS}), T.float16)):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment(({rows_declared}, {COLS}), T.float32)
        for i, j in T.Parallel({BLOCK}, {COLS}):
            f[i, j] = T.cast(X[i, j], T.float32) * 2.0
        for i, j in T.Parallel({BLOCK}, {COLS}):
            Out[i, j] = T.cast(f[i, j], T.float16)
'''
    return T.from_script(text)


def _shape(func, name):
    return next(tuple(d.value for d in s.buffer.shape) for k in func.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.Allocate) and s.buffer.name == name)


@pytest.mark.parametrize("heads", [1, 2, 8])
def test_a_fragment_indexed_by_the_nest_takes_its_extent(heads):
    assert _shape(_row_bias(heads), "bias") == (BLOCK,)


def test_a_larger_declared_fragment_keeps_its_shape():
    assert _shape(_row_bias(128), "bias") == (128,)


def test_two_dims_widen_each_to_its_loop():
    assert _shape(_grid_scale(8), "f") == (BLOCK, COLS)


def test_an_index_that_is_not_the_nests_variable_is_still_checked():
    with pytest.raises(ValidationError, match=r"fragment buffer 'bias' takes values 1\.\.64"):
        _row_bias(2, index="i + 1")


@pytest.mark.parametrize("heads", [2, 64])
def test_builds_for_sm90a(heads, cache_dir):
    kernel = tilecute.compile(_row_bias(heads), target="sm_90a")
    assert kernel.ensure_cubin()
    assert "make_rmem_tensor((64,)" in kernel.get_kernel_source()


def test_two_dim_builds_for_sm90a(cache_dir):
    assert tilecute.compile(_grid_scale(8), target="sm_90a").ensure_cubin()


@pytest.mark.gpu
@pytest.mark.parametrize("heads", [1, 2, 8])
def test_row_bias_matches_torch(heads, cache_dir):
    import torch

    x = torch.randn(heads, ROWS, COLS, device="cuda")
    bias = torch.randn(heads, device="cuda")
    out = torch.empty_like(x)
    tilecute.compile(_row_bias(heads))(x, bias, out)
    torch.testing.assert_close(out, x + bias[:, None, None])


@pytest.mark.gpu
def test_grid_scale_matches_torch(cache_dir):
    import torch

    x = torch.randn(BLOCK, COLS, device="cuda", dtype=torch.float16)
    out = torch.empty_like(x)
    tilecute.compile(_grid_scale(8))(x, out)
    torch.testing.assert_close(out, x * 2)
