"""Run the statements over a fragment held by part of the block on those threads.

TileLang lets a ``T.Fragment`` lay a fragment over some of the block's threads (threads
0..63 of 128, or 32..95): a ``T.Parallel`` loop over it takes its layout, so only those
threads run its iterations, and ``T.reduce_*`` over it meets on a barrier of those threads
alone (its "partial thread barrier", a named barrier).  The frontend keeps such a layout
as ``blocked`` or ``replicated`` with ``first_thread`` / ``threads`` (a contiguous,
warp-aligned range, :func:`~tilecute.language.custom_layouts.match_fragment`).  Here each
statement (a nest, a reduction) that names such a fragment goes into a thread region of
those threads (``WarpGroups`` with ``span``, as the frontend makes of ``if tx < 64:``), a
run of consecutive ones into one region; the layout pass then lays the fragment out over
the region's threads, its loops run there, and its reductions sync on the region's named
barrier.  The other threads skip the statements.  The regions are ``synced``: the barrier
pass orders them against their neighbours (another such region on other threads
included) with block barriers, as it orders any statement (TileLang's sync pass does).

A fragment without a layout of the program's that such a statement names (a reduction's
output, a temporary) takes the range too, so that a later loop over it alone runs there
(TileLang infers its layout from the statement; the other threads hold no value of it).
A statement naming fragments of two different ranges is refused; one naming a fragment
of the whole block as well is refused by the layout pass (a fragment lives on one set of
threads).  So does a ``T.Parallel`` loop whose ``loop_layout`` lies on part of the block.
Statements in a ``T.ws`` region are the program's region's already.  Runs
after ``lower_tile_ops`` (copies and fills are nests), before ``infer_layouts``.

Imports the IR and the analysis helpers only.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, walk_stmts
from .analysis import buffers_used


class RegionError(ValueError):
    pass


def _part(layout, threads: int):
    """``(first, end)`` of the threads a fragment layout from the program lies on, where
    they are not the whole block."""
    if layout is None or layout.kind not in ("blocked", "replicated") or not layout.threads:
        return None
    span = (layout.first_thread, layout.first_thread + layout.threads)
    return None if span == (0, threads) else span


class _Regions:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope):
        self.func, self.threads = func, scope.num_threads
        allocs = {s.buffer.name: s for s in walk_stmts(scope.body)
                  if isinstance(s, N.Allocate) and s.buffer.scope == "fragment"}
        self.parts = {b: p for b, s in allocs.items()
                      if (p := _part(s.layout, self.threads)) is not None}
        # where a statement meets a fragment of a range with another fragment, that one
        # takes the range: one without a layout of the program's; one laid out over the
        # whole block whose elements all lie on threads 0..n-1 (fewer chunks than threads:
        # the same placement over a range 0..n-1)
        self.relaid: dict[str, N.Layout] = {}
        self.any = bool(self.parts or self.loop_spans(scope.body))
        changed = self.any
        while changed:
            changed = False
            for t in walk_stmts(scope.body):
                if isinstance(t, (N.For, N.Reduce)) and not (
                        isinstance(t, N.For) and t.kind != "parallel"):
                    used = buffers_used(t)
                    spans = {self.parts[b] for b in used if b in self.parts} | \
                        self.loop_spans(t)
                    if len(spans) != 1:
                        continue
                    span = spans.pop()
                    for b in used - set(self.parts):
                        if b not in allocs or allocs[b].reducer:
                            continue
                        lay = allocs[b].layout
                        if lay is None:
                            # a fragment without a layout of the program's (a reduction's
                            # output, a loop's temporary) lives where it is made, as
                            # TileLang infers its layout from the statement: a loop
                            # elsewhere over it runs on those threads too (the others
                            # hold no value of it)
                            self.parts[b] = span
                            changed = True
                        elif lay.kind == "blocked" and span[0] == 0 and \
                                lay.threads == self.threads and not lay.first_thread and \
                                _elements(allocs[b].buffer) // lay.vector <= span[1]:
                            self.parts[b] = span
                            self.relaid[b] = dataclasses.replace(lay, threads=span[1])
                            changed = True

    def loop_spans(self, s) -> set:
        """The ranges of the ``loop_layout`` s of the ``T.Parallel`` loops in ``s`` that lie
        on part of the block (such a loop runs there too)."""
        return {p for t in walk_stmts(s if isinstance(s, tuple) else [s])
                if isinstance(t, N.For) and t.kind == "parallel"
                and (p := _part(t.loop_layout, self.threads)) is not None}

    def span(self, s):
        named = sorted(b for b in buffers_used(s) if b in self.parts)
        spans = {self.parts[b] for b in named}
        loops = self.loop_spans(s)
        if loops - spans:
            named.append("a T.Parallel loop_layout")
        spans |= loops
        if len(spans) > 1:
            where = f"{s.loc}: " if getattr(s, "loc", None) else ""
            raise RegionError(
                f"{where}prim_func '{self.func.name}': this statement uses "
                + ", ".join(f"'{b}' (threads {self.parts[b][0]}..{self.parts[b][1] - 1})"
                            if b in self.parts else b for b in named)
                + (f" (threads {', '.join(f'{a}..{b - 1}' for a, b in sorted(loops))})"
                   if loops - {self.parts[b] for b in named if b in self.parts} else "")
                + " that T.Fragment layouts put on different threads; a statement over "
                  "fragments of part of the block runs on one range of threads")
        return spans.pop() if spans else None

    def block(self, body) -> tuple:
        out: list = []
        for s in body:
            if isinstance(s, (N.WarpGroups, N.Allocate)):
                out.append(s)
                continue
            span = self.span(s)
            if span is None:
                out.append(s)
                continue
            names = BODY_FIELDS.get(type(s))
            if names and not (isinstance(s, N.For) and s.kind == "parallel"):
                # a serial loop or a branch: its statements, each on the threads it needs
                out.append(dataclasses.replace(s, **{n: self.block(getattr(s, n)) for n in names}))
                continue
            last = out[-1] if out else None
            if isinstance(last, N.WarpGroups) and last.synced and last.span == span:
                out[-1] = dataclasses.replace(last, body=last.body + (s,))  # (one region)
                continue
            out.append(N.WarpGroups((), (s,), loc=s.loc, span=span, synced=True))
        return tuple(out)

    def run(self, scope: N.KernelScope) -> N.KernelScope:
        if not self.any:
            return scope
        body = self.block(scope.body)
        # (a replicated fragment's layout from the program has served: the layout pass
        # lays it out as any replicated fragment of its region)
        return dataclasses.replace(scope, body=tuple(_relay(body, self.relaid)))


def _elements(buf: N.Buffer) -> int:
    n = 1
    for d in buf.shape:
        n *= int(d.value)
    return n


def _relay(body, relaid: dict):
    """``body`` with the layouts of ``relaid`` (and a replicated fragment's layout from the
    program plain: the layout pass lays it out as any replicated fragment of its region)."""
    for s in body:
        if isinstance(s, N.Allocate) and s.buffer.name in relaid:
            yield dataclasses.replace(s, layout=relaid[s.buffer.name])
            continue
        if isinstance(s, N.Allocate) and s.layout is not None and s.layout.kind == "replicated":
            yield dataclasses.replace(s, layout=N.Layout("replicated"))
            continue
        names = BODY_FIELDS.get(type(s))
        if names:
            s = dataclasses.replace(s, **{n: tuple(_relay(getattr(s, n), relaid)) for n in names})
        yield s


def fragment_thread_regions(func: N.PrimFunc) -> N.PrimFunc:
    return dataclasses.replace(func, kernels=tuple(_Regions(func, k).run(k) for k in func.kernels))
