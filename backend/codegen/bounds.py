"""Bounds predication: the conditions under which a global access is in bounds (those
the known value ranges cannot prove), and bounds-checked loads read into temporaries
that stay 0 out of bounds; the memory loads of a ``T.if_then_else`` branch read only
where the branch is taken.  Imports no CUTLASS.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..ir import nodes as N
from ..transform.analysis import top_loads, value_range
from .expr import PREC, ExprPrinter, chain, cute_type, flatten_logic
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
                self.out.line(depth, f"if {chain('and', conds)}:")
                # (an unsigned element is read as its type: the code generator's load)
                self.out.line(depth + 1, f"{t} = {self.exprs.expr(ld)}")
                self.hoisted[key] = t

    def hoist_branches(self, e, depth: int, registers, checked: bool) -> None:
        """Read each shared or global load inside a branch of a ``Select`` (TileLang's
        ``T.if_then_else``) into a temporary, under the branch's condition: TVM's
        ``if_then_else`` evaluates only the branch taken, and programs guard reads that
        would be out of bounds with it (``T.if_then_else(j > 0, s[i, j - 1], 0)``); CuTe's
        ``select_`` evaluates both.  (A load has no effect but its read, so TVM's ``Select``
        may take it alike.)  A load also read outside any branch, or held in ``registers``
        (vector accesses, read whole), is left as it is; ``checked``: the temporaries also
        take the bounds checks of :meth:`hoist`."""
        guards: dict[tuple, list] = {}  # load -> the guards it is read under (None: none)
        found: dict[tuple, N.Load] = {}

        def visit(x, guard: tuple) -> None:
            if isinstance(x, N.Select) and not isinstance(x.cond, N.Const):
                visit(x.cond, guard)
                visit(x.a, guard + (x.cond,))
                visit(x.b, guard + (N.Not(x.cond),))
            elif isinstance(x, N.Load):
                visit(x.indices, guard)
                key = load_key(x)
                if key in registers or self.buffers[x.buffer].scope not in ("shared", "global"):
                    return
                found.setdefault(key, x)
                guards.setdefault(key, []).append(guard or None)
            elif isinstance(x, (N.Expr, tuple)):
                for v in (vars(x).values() if isinstance(x, N.Expr) else x):
                    visit(v, guard)
        visit(e, ())
        expr = self.exprs.expr
        for key, ld in found.items():
            if key in self.hoisted or None in guards[key]:
                continue
            alts = list(dict.fromkeys(guards[key]))
            if len(alts) == 1:  # one branch: its conditions (and theirs) are terms of the chain
                terms = [t for c in alts[0] for t in (
                    flatten_logic(c) if isinstance(c, N.Logic) and c.op == "and" else (c,))]
                conds = [self.exprs.operand(c, PREC["and"] + 1) for c in terms]
            else:
                taken = [chain("and", (self.exprs.operand(c, PREC["and"] + 1) for c in g))
                         for g in alts]
                conds = [chain("or", (f"({t})" for t in taken))]
            conds += self.predicate(ld.buffer, ld.indices) if checked else []
            t = self.out.fresh("ld")
            self.out.line(depth, f"{t} = {cute_type(ld.dtype)}(0)")
            self.out.line(depth, f"if {chain('and', conds)}:")
            value = expr(ld)
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
