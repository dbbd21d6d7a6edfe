"""A ``T.Parallel`` nest over fragments with a run-time extent runs over the fragment's
extent, its body guarded by the program's bounds.

TileLang lays out a parallel loop that indexes a fragment at exactly its loop variable
(``f[i]`` in ``T.Parallel(n)``) with the fragment's own layout, and its loop partition
walks that layout's input shape (the fragment's, constant) with a guard that keeps each
iteration inside the loop's range (``loop_partition.cc``: "loop extent differs from
layout input shape"): every thread visits its elements of the fragment and runs the body
where ``start <= i < start + extent``.  So here: each loop of the nest whose start or
extent is not constant, and whose variable indexes some fragment dim of constant extent
``E`` as it is, becomes ``T.Parallel(E)`` (the largest such extent), and the innermost
body runs under ``if start <= i < start + extent`` (one condition per such loop).  A loop
whose variable indexes no fragment dim so is left as written (the layout pass refuses it,
naming the loop).

Imports the IR and the analysis helpers only.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import StmtMutator
from .analysis import accesses, parallel_nest


def _constant(e: N.Expr) -> bool:
    return isinstance(e, N.Const)


class _Bound(StmtMutator):
    def __init__(self):
        self.fragments: dict[str, N.Buffer] = {}

    def visit_allocate(self, s: N.Allocate):
        if s.buffer.scope == "fragment":
            self.fragments[s.buffer.name] = s.buffer
        return self.generic(s)

    def visit_for(self, s: N.For):
        if s.kind != "parallel":
            return self.generic(s)
        loops = parallel_nest(s)
        if all(_constant(lp.start) and _constant(lp.extent) for lp in loops):
            return self.generic(s)
        extents = {}  # loop variable -> the largest fragment extent it indexes as it is
        for buf, idx, _ in accesses(loops[-1].body):
            frag = self.fragments.get(buf)
            if frag is None:
                continue
            for i, d in zip(idx, frag.shape):
                if isinstance(i, N.Var) and _constant(d):
                    extents[i.name] = max(extents.get(i.name, 0), int(d.value))
        guards, rebuilt = [], []
        for lp in loops:
            if (_constant(lp.start) and _constant(lp.extent)) or lp.var.name not in extents:
                rebuilt.append(lp)
                continue
            v, zero = lp.var, N.Const(0, lp.var.dtype)
            if not (_constant(lp.start) and lp.start.value == 0):
                guards.append(N.cmp("ge", v, lp.start))
            guards.append(N.cmp("lt", v, N.binop("add", lp.start, lp.extent)
                                if not (_constant(lp.start) and lp.start.value == 0)
                                else lp.extent))
            rebuilt.append(dataclasses.replace(lp, start=zero,
                                               extent=N.Const(extents[v.name], lp.var.dtype)))
        if not guards:
            return self.generic(s)
        body = self.visit_block(loops[-1].body)
        cond = guards[0] if len(guards) == 1 else N.Logic("and", tuple(guards))
        body = (N.If(cond, body, loc=loops[-1].loc),)
        for lp in reversed(rebuilt):
            body = (dataclasses.replace(lp, body=body),)
        return body[0]


def fragment_loop_bounds(func: N.PrimFunc) -> N.PrimFunc:
    """``func`` with its run-time-extent parallel nests over fragments run over the
    fragments' extents, guarded (module docstring)."""
    return _Bound().run(func)
