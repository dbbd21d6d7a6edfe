"""Panel block order, as IR: the Lets that remap a grid's first two block indices so the
blocks walk the grid in panels of ``panel`` rows (down each panel's rows before moving a
column), and blocks running together share operand tiles in L2.  ``T.use_swizzle`` (the
frontend) and the rasterize pass (the compiler's default for GEMM grids) both build them
here."""

from __future__ import annotations

from typing import Callable

from . import nodes as N


def panel_order(x: N.Expr, y: N.Expr, nx: N.Expr, ny: N.Expr, panel: int,
                let: Callable[[str, N.Expr], N.Var]) -> tuple[N.Expr, N.Expr]:
    """The new ``(x, y)`` block indices of a ``(nx, ny)`` grid walked in panels of
    ``panel`` rows; ``let(stem, value)`` binds each intermediate and returns its variable."""
    i32 = lambda v: N.Const(v, "int32")  # noqa: E731
    flat = let("block_flat", N.binop("add", x, N.binop("mul", y, nx)))
    size = N.binop("mul", i32(panel), nx)
    first = let("panel_first", N.binop("mul", N.binop("floordiv", flat, size), i32(panel)))
    offset = let("panel_offset", N.binop("mod", flat, size))
    rows = let("panel_rows", N.Select(N.Cmp("le", N.binop("add", first, i32(panel)), ny),
                                      i32(panel), N.binop("sub", ny, first), "int32"))
    return (N.binop("floordiv", offset, rows),
            N.binop("add", N.binop("mod", offset, rows), first))
