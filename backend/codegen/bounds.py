"""Bounds predication: the conditions under which a global access is in bounds (those
the known value ranges cannot prove), and bounds-checked loads read into temporaries
that stay 0 out of bounds.  Imports no CUTLASS.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..ir import nodes as N
from ..transform.analysis import top_loads, value_range
from .expr import ExprPrinter, cute_type
from .source import Writer


def load_key(e: N.Load) -> tuple:
    return (e.buffer, e.indices)


class Bounds:
    """``buffers`` and ``ranges`` are the kernel emitter's (filled as it goes); ``hoisted``
    maps a bounds-checked load to the temporary that holds it in the current statement."""

    def __init__(self, out: Writer, exprs: ExprPrinter, buffers: dict[str, N.Buffer],
                 ranges: dict[str, tuple]):
        self.out, self.exprs, self.buffers, self.ranges = out, exprs, buffers, ranges
        self.grid_bound: dict[str, str] = {}  # block variable -> the symbol its grid extent is
        self.hoisted: dict[tuple, str] = {}

    def predicate(self, buffer: str, indices, lower: bool = True, upper: bool = True) -> list[str]:
        """Conditions for ``buffer[indices]`` to be in bounds that cannot be proved."""
        buf = self.buffers.get(buffer)
        if buf is None or buf.scope != "global":
            return []
        expr = self.exprs.expr
        conds = []
        for idx, dim in zip(indices, buf.shape):
            lo, hi = value_range(idx, self.ranges)
            if lower and (lo is None or lo < 0):
                conds.append(f"{expr(idx)} >= 0")
            if not upper:
                continue
            if isinstance(idx, N.Var) and isinstance(dim, N.Var) and self.grid_bound.get(idx.name) == dim.name:
                continue  # a block index over a grid of exactly `dim` blocks
            if not (isinstance(dim, N.Const) and hi is not None and hi < dim.value):
                conds.append(f"{expr(idx)} < {expr(dim)}")
        return conds

    def of_loads(self, loads) -> list[str]:
        conds: list[str] = []
        for ld in loads:
            conds += self.predicate(ld.buffer, ld.indices)
        return list(dict.fromkeys(conds))

    def hoist(self, e, depth: int, registers) -> None:
        """Read each global load of ``e`` whose bounds cannot be proved into a temporary
        that stays 0 out of bounds (out-of-bounds loads read 0); loads already in
        ``registers`` (vector accesses) are checked with their vector."""
        for ld in top_loads(e):
            self.hoist(ld.indices, depth, registers)
            key = load_key(ld)
            if key in registers or key in self.hoisted:
                continue
            conds = self.predicate(ld.buffer, ld.indices)
            if conds:
                t = self.out.fresh("ld")
                self.out.line(depth, f"{t} = {cute_type(ld.dtype)}(0)")
                self.out.line(depth, f"if {' and '.join(conds)}:")
                value = self.exprs.expr(ld)
                if ld.dtype.startswith("uint"):
                    # CuTe reads an unsigned element as its signless (signed) type: the
                    # temporary keeps the buffer's type on both paths
                    value = f"{cute_type(ld.dtype)}({value})"
                self.out.line(depth + 1, f"{t} = {value}")
                self.hoisted[key] = t

    @contextmanager
    def statement(self):
        """Temporaries hoisted inside a statement are not visible after it."""
        saved = dict(self.hoisted)
        try:
            yield
        finally:
            self.hoisted = saved
