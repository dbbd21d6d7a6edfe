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


# ---- the block map is TileLang's rasterization2DRow / rasterization2DColumn -----------------
def _tilelang_map(x, y, nx, ny, panel, order):
    """Where TileLang's rasterization sends block (x, y): the launch order's blocks handed
    out panel by panel (panels of `panel` rows spanning every column, or for "column" of
    `panel` columns spanning every row), down the panel's short side first, every odd
    panel walked from the far end."""
    row = order == "row"
    span, split = (nx, ny) if row else (ny, nx)
    p, off = divmod(x + y * nx, panel * span)
    width = min(panel, split - p * panel)
    walk, k = divmod(off, width)
    if p % 2:
        walk = span - 1 - walk
    return (walk, p * panel + k) if row else (p * panel + k, walk)


def _evaluate(lets, new, x, y):
    import itertools  # noqa: F401

    def ev(e, env):
        from tilecute.ir import nodes as N
        if isinstance(e, N.Const):
            return e.value
        if isinstance(e, N.Var):
            return env[e.name]
        if isinstance(e, N.Select):
            return ev(e.a, env) if ev(e.cond, env) else ev(e.b, env)
        a, b = ev(e.a, env), ev(e.b, env)
        return {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0,
                "mod": a % b if b else 0, "le": a <= b, "eq": a == b}[e.op]
    env = {"x": x, "y": y}
    for name, value in lets:
        env[name] = ev(value, env)
    return ev(new[0], env), ev(new[1], env)


@pytest.mark.parametrize("order", ["row", "column"])
@pytest.mark.parametrize("nx, ny, panel", [(8, 4, 2), (5, 7, 3), (6, 9, 4), (3, 10, 16), (7, 7, 1)])
def test_use_swizzle_block_map_is_tilelangs(order, nx, ny, panel):
    from tilecute.ir import nodes as N
    from tilecute.ir.rasterization import panel_order

    lets = []

    def let(stem, value):
        var = N.Var(f"{stem}{len(lets)}", "int32")
        lets.append((var.name, value))
        return var
    new = panel_order(N.Var("x", "int32"), N.Var("y", "int32"), N.Const(nx, "int32"),
                      N.Const(ny, "int32"), panel, let, order=order, serpentine=True)
    seen = {}
    for x in range(nx):
        for y in range(ny):
            seen[x, y] = _evaluate(lets, new, x, y)
            assert seen[x, y] == _tilelang_map(x, y, nx, ny, panel, order), (x, y)
    assert sorted(seen.values()) == sorted(seen)  # a permutation of the blocks


def test_use_swizzle_walks_odd_panels_from_the_far_end():
    text = _ir(_grid2d("row"))
    assert "panel_index" in text and "% 2 == 1" in text


def _block_map(nx=6, ny=7, panel=2, order="row"):
    @T.prim_func
    def block_map(Out: T.Tensor((ny, nx), "int32")):
        with T.Kernel(nx, ny, threads=32) as (bx, by):
            T.use_swizzle(panel, order=order)
            launched = T.get_block_binding(0) + T.get_block_binding(1) * nx
            if T.get_thread_binding() == 0:
                Out[by, bx] = launched

    return block_map


def test_use_swizzle_block_map_builds(tmp_path):
    assert tilecute.build_cubin(_block_map(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["row", "column"])
def test_use_swizzle_block_map_on_gpu(order):
    import torch

    nx, ny, panel = 6, 7, 2
    out = torch.full((ny, nx), -1, dtype=torch.int32, device="cuda")
    tilecute.compile(_block_map(nx, ny, panel, order))(out)
    want = torch.full((ny, nx), -1, dtype=torch.int32)
    for x in range(nx):
        for y in range(ny):
            tx, ty = _tilelang_map(x, y, nx, ny, panel, order)
            want[ty, tx] = x + y * nx
    assert torch.equal(out.cpu(), want)


# ---- names derived from a block index before T.use_swizzle read the swizzled index ---------
# gdn's kernels (example_wy_fast_bwd_split, example_chunk_delta_bwd) write
# `bb, bh = bbh // H, bbh % H` and then T.use_swizzle(10): TileLang's Simplify inlines those
# integer lets and its `const dim3 blockIdx = tl::rasterization2DRow<10>()` shadows the block
# index for all that follows, so bh is the swizzled block's.  Read with the launch index, the
# blocks cover some (bs, bh) tiles several times and others never (a silent wrong answer).
def _heads(derived_before, nx=6, ny=8, panel=2, order="row"):
    @T.prim_func
    def heads(Out: T.Tensor((ny, nx), "int32")):
        with T.Kernel(nx, ny, threads=32) as (bx, bbh):
            if derived_before:
                bb, bh = bbh // 4, bbh % 4
                T.use_swizzle(panel, order=order)
            else:
                T.use_swizzle(panel, order=order)
                bb, bh = bbh // 4, bbh % 4
            if T.get_thread_binding() == 0:
                Out[bb * 4 + bh, bx] = T.get_block_binding(0) + T.get_block_binding(1) * nx

    return heads


@pytest.mark.parametrize("order", ["row", "column"])
def test_use_swizzle_rebinds_names_derived_from_the_block_index(order):
    import re

    before = _ir(_heads(True, order=order)).splitlines()
    after = _ir(_heads(False, order=order)).splitlines()
    unused = ("        bb = bbh // 4", "        bh = bbh % 4")  # the launch index's, now dead
    assert all(ln in before for ln in unused)
    before = [re.sub(r"\b(bb|bh)_1\b", r"\1", ln) for ln in before if ln not in unused]
    assert before == after


def test_use_swizzle_rebound_names_build(tmp_path):
    assert tilecute.build_cubin(_heads(True), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["row", "column"])
def test_use_swizzle_names_derived_before_on_gpu(order):
    import torch

    nx, ny, panel = 6, 8, 2
    out = torch.full((ny, nx), -1, dtype=torch.int32, device="cuda")
    tilecute.compile(_heads(True, nx, ny, panel, order))(out)
    want = torch.full((ny, nx), -1, dtype=torch.int32)
    for x in range(nx):
        for y in range(ny):
            tx, ty = _tilelang_map(x, y, nx, ny, panel, order)
            want[ty, tx] = x + y * nx
    assert torch.equal(out.cpu(), want)  # every tile once, each by TileLang's block
