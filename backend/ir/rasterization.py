"""Panel block order, as IR: the Lets that remap a grid's first two block indices so the
blocks walk the grid in panels of ``panel`` rows (down each panel's rows before moving a
column), and blocks running together share operand tiles in L2.  ``T.use_swizzle`` (the
frontend) and the rasterize pass (the compiler's default for GEMM grids) both build them
here."""

from __future__ import annotations

from typing import Callable

from . import nodes as N


def panel_order(x: N.Expr, y: N.Expr, nx: N.Expr, ny: N.Expr, panel: int,
                let: Callable[[str, N.Expr], N.Var],
                cluster: tuple[int, int] = (1, 1), *, order: str = "row",
                serpentine: bool = False) -> tuple[N.Expr, N.Expr]:
    """The new ``(x, y)`` block indices of a ``(nx, ny)`` grid walked in panels of
    ``panel`` rows; ``let(stem, value)`` binds each intermediate and returns its variable.

    The blocks are taken in their launch order (``x + y * nx``) and handed out panel by
    panel, down each panel's ``panel`` rows before moving a column.  ``order="column"``:
    panels of ``panel`` columns, along each panel's columns before moving a row.
    ``serpentine``: every other panel walks its columns (rows, for ``"column"``) from the
    far end, so consecutive blocks stay neighbours across a panel boundary.  With
    ``order`` and ``serpentine`` this is TileLang's ``rasterization2DRow`` /
    ``rasterization2DColumn`` (``T.use_swizzle``); the rasterize pass walks rows, not
    serpentine.

    A grid launched in clusters of ``(cx, cy)`` blocks walks its clusters in this order
    (panels of ``panel`` block rows), each block keeping its place in its cluster: the
    blocks of a cluster stay neighbours and share the tiles they would without the order
    (what the multicast pass needs), and the order is still a permutation of the blocks."""
    i32 = lambda v: N.Const(v, "int32")  # noqa: E731
    cx, cy = cluster
    if (cx, cy) != (1, 1):
        def split(b, c):  # (the cluster's index, the block's place in it)
            return (b, i32(0)) if c == 1 else (N.binop("floordiv", b, i32(c)),
                                                N.binop("mod", b, i32(c)))
        (qx, rx), (qy, ry) = split(x, cx), split(y, cy)
        shrink = lambda n, c: n if c == 1 else N.binop("floordiv", n, i32(c))  # noqa: E731
        new_qx, new_qy = panel_order(qx, qy, shrink(nx, cx), shrink(ny, cy),
                                     max(1, panel // (cx if order == "column" else cy)), let,
                                     order=order, serpentine=serpentine)
        grow = lambda q, r, c: q if c == 1 else N.binop(  # noqa: E731
            "add", N.binop("mul", q, i32(c)), r)
        return grow(new_qx, rx, cx), grow(new_qy, ry, cy)
    # `across`: the dim a panel spans whole; `along`: the dim split into panels
    across, along = (nx, ny) if order == "row" else (ny, nx)
    flat = let("block_flat", N.binop("add", x, N.binop("mul", y, nx)))
    size = N.binop("mul", i32(panel), across)
    if serpentine:
        index = let("panel_index", N.binop("floordiv", flat, size))
        first = let("panel_first", N.binop("mul", index, i32(panel)))
    else:
        first = let("panel_first", N.binop("mul", N.binop("floordiv", flat, size), i32(panel)))
    offset = let("panel_offset", N.binop("mod", flat, size))
    rows = let("panel_rows", _select(N.cmp("le", N.binop("add", first, i32(panel)), along),
                                     i32(panel), N.binop("sub", along, first)))
    walk = N.binop("floordiv", offset, rows)
    if serpentine:  # odd panels from the far end
        walk = _select(N.cmp("eq", N.binop("mod", index, i32(2)), i32(1)),
                       N.binop("sub", N.binop("sub", across, i32(1)), walk), walk)
    step = N.binop("add", N.binop("mod", offset, rows), first)
    return (walk, step) if order == "row" else (step, walk)


def _select(cond: N.Expr, a: N.Expr, b: N.Expr) -> N.Select:
    """``cond ? a : b`` at the operands' promoted dtype (int64 over an int64 grid)."""
    t = N.promote(a.dtype, b.dtype)
    return N.Select(cond, N.cast(a, t), N.cast(b, t), t)
