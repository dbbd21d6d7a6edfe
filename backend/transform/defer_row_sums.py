"""Deferred row sums (FlashAttention-3's running sum): a loop that keeps the running sum
of the rows of an MMA accumulator,

    T.fill(l, 0)
    for k in ...:
        ...
        T.reduce_sum(S, l_step, dim=1)          # S: a T.gemm accumulator
        for i in T.Parallel(M):
            l[i] = l[i] * alpha[i] + l_step[i]  # (or l[i] += l_step[i])
        ...
    ... l[i] ...                                # read after the loop

adds each step's row up only within each thread: every thread holding a row keeps its
own partial of ``l`` (``Reduce.partial``: its registers of the row, no shuffle, and with
``GemmWarpPolicy.FullCol`` no exchange through shared memory and no block barrier), and
one ``CombineRows`` adds the partials up where ``l`` is first read otherwise.  The sum is
linear and ``alpha`` is the same in every thread holding a row (a row statistic, as every
``mma_rows`` fragment), so the threads' partials add up to the same totals.

The pass takes a running sum only when nothing else touches ``l`` or ``l_step`` between
the zero fill and that read: ``l_step`` is written only by such row sums and read only by
the updates, ``l`` only filled, updated, and read after.  Runs after the layout pass
(the rows must be ``mma_rows`` of an ``mma`` accumulator).  Option
``disable_deferred_row_sums`` keeps every row sum whole.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, walk_stmts
from .analysis import buffers_used


def defer_row_sums(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if options.get("disable_deferred_row_sums"):
        return func
    return dataclasses.replace(func, kernels=tuple(_Kernel(k).run() for k in func.kernels))


class _Kernel:
    def __init__(self, scope: N.KernelScope):
        self.scope = scope
        allocs = [s for s in walk_stmts(scope.body) if isinstance(s, N.Allocate)]
        self.layouts = {a.buffer.name: a.layout for a in allocs}
        self.rows = {n for n, lay in self.layouts.items()
                     if lay is not None and lay.kind == "mma_rows"}
        self.reduces = [s for s in walk_stmts(scope.body) if isinstance(s, N.Reduce)]
        self.partial: set[int] = set()  # ids of the row sums made partial
        self.combine: dict[int, list] = {}  # id(statement) -> CombineRows to put before it
        self.tail: dict[int, list] = {}  # id(statement list's owner) -> CombineRows at its end

    def run(self) -> N.KernelScope:
        self.scan(self.scope.body)
        if not self.partial:
            return self.scope
        return dataclasses.replace(self.scope, body=self.rewrite(self.scope.body))

    # ---- finding running sums -------------------------------------------------------------
    def scan(self, body) -> None:
        body = tuple(body)
        for f, s in enumerate(body):
            lname = self.zero_fill(s)
            if lname is not None:
                self.try_defer(body, f, lname)
            for name in BODY_FIELDS.get(type(s), ()):
                self.scan(getattr(s, name))

    def zero_fill(self, s) -> str | None:
        """The rows fragment a ``T.Parallel`` loop fills with 0 (``T.fill(l, 0)``), else None."""
        if not (isinstance(s, N.For) and s.kind == "parallel" and len(s.body) == 1):
            return None
        st = s.body[0]
        if isinstance(st, N.Store) and st.buffer in self.rows and \
                isinstance(st.value, N.Const) and st.value.value == 0 and \
                st.indices == (s.var,):
            return st.buffer
        return None

    def update(self, s, lname: str) -> str | None:
        """``l_step`` of ``s`` when it is ``for i in T.Parallel(M): l[i] = l[i] * alpha +
        l_step[i]`` (or ``l[i] + l_step[i]``, either order; ``alpha`` an expression of row
        statistics at ``i``, the same in every thread holding the row), else None."""
        if not (isinstance(s, N.For) and s.kind == "parallel" and len(s.body) == 1):
            return None
        st, i = s.body[0], s.var
        if not (isinstance(st, N.Store) and st.buffer == lname and st.indices == (i,)):
            return None

        def row(e):
            return e.buffer if isinstance(e, N.Load) and e.indices == (i,) and \
                e.buffer in self.rows else None

        def uniform(e, avoid) -> bool:  # row statistics at i, constants, float math
            if isinstance(e, N.Load):
                return row(e) is not None and e.buffer not in avoid
            if isinstance(e, N.Call):
                return e.name in N.FLOAT_MATH and all(uniform(a, avoid) for a in e.args)
            if isinstance(e, (N.BinOp, N.Cast, N.Const)):
                return all(uniform(v, avoid) for v in vars(e).values() if isinstance(v, N.Expr))
            return False
        v = st.value
        if not (isinstance(v, N.BinOp) and v.op == "add"):
            return None
        for kept, added in ((v.a, v.b), (v.b, v.a)):
            step = row(added)
            if step is None or step == lname:
                continue
            if row(kept) == lname:
                return step
            if isinstance(kept, N.BinOp) and kept.op == "mul":
                for x, a in ((kept.a, kept.b), (kept.b, kept.a)):
                    if row(x) == lname and uniform(a, {lname, step}):
                        return step
        return None

    def try_defer(self, body: tuple, f: int, lname: str) -> None:
        lay = self.layouts[lname]
        steps, stop = set(), len(body)
        for j in range(f + 1, len(body)):
            uses = [t for t in _units([body[j]]) if lname in buffers_used(t)]
            if not uses:
                continue
            found = [self.update(t, lname) for t in uses]
            if all(u is not None for u in found):
                steps.update(found)
                continue
            stop = j
            break
        if not steps:
            return
        sums = [r for r in self.reduces if r.dst in steps]
        in_region = {id(t) for t in walk_stmts(body[f + 1:stop])}
        for step in steps:
            if self.layouts[step] != lay:
                return
            mine = [r for r in sums if r.dst == step]
            if not mine or any(id(r) not in in_region or r.kind != "sum" or not r.clear or
                               r.dim != 1 or self.layouts.get(r.src) is None or
                               self.layouts[r.src].kind != "mma" for r in mine):
                return
            # l_step: written by those sums, read by the updates, nothing else anywhere
            for t in _units(self.scope.body):
                if step not in buffers_used(t) or isinstance(t, N.Allocate) or \
                        any(t is r for r in mine) or self.update(t, lname) is not None:
                    continue
                return
        scratch = next((r.scratch for r in sums if r.scratch), "")
        self.partial |= {id(r) for r in sums}
        combine = N.CombineRows(lname, "sum", scratch, loc=body[f].loc)
        if stop < len(body):
            self.combine.setdefault(id(body[stop]), []).append(combine)
        else:
            self.tail.setdefault(id(body), []).append(combine)

    # ---- rewriting ------------------------------------------------------------------------
    def rewrite(self, body) -> tuple:
        out = []
        for s in body:
            out.extend(self.combine.get(id(s), ()))
            if isinstance(s, N.Reduce) and id(s) in self.partial:
                out.append(dataclasses.replace(s, partial=True, scratch=""))
                continue
            names = BODY_FIELDS.get(type(s), ())
            if names:
                s = dataclasses.replace(s, **{n: self.rewrite(getattr(s, n)) for n in names})
            out.append(s)
        out.extend(self.tail.get(id(body), ()))
        return tuple(out)


def _units(stmts):
    """The statements of ``stmts`` as units that name buffers themselves: a ``T.Parallel``
    nest whole, a plain statement, and a compound statement's own part (its condition or
    bounds, the bodies left out) followed by the units of its bodies."""
    for s in stmts:
        names = BODY_FIELDS.get(type(s), ())
        if not names or isinstance(s, N.For) and s.kind == "parallel":
            yield s
            continue
        yield dataclasses.replace(s, **{n: () for n in names})
        for n in names:
            yield from _units(getattr(s, n))
