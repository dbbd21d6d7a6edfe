"""Start cp.async copies early: a ``T.copy`` from global into shared that runs as cp.async
(the vectorize pass's ``For.async_copy``) moves up, within its statement list, past the
``T.Parallel`` nests and Lets just before it that it does not depend on, so its loads are
in flight while they run.

A cp.async issues its loads and returns; a synchronous nest (``q[i, j] = Q[...] * scale``)
waits for its own loads at its first use of them (the shared store).  In program order
the copies after such a nest start only once its loads have landed: two memory latencies
a step where TileLang's plain copies (all loads issued together by ptxas) pay one
(TileLang's ``linear_attention`` forward and retention examples: ``q`` scaled, then ``k``
and ``v`` copied, every chunk).  Moved first, the copies' loads and the nest's are in
flight together; the barrier that waits for the copies (``Barrier(wait_async=True)``,
placed by the barrier pass before their first reader) stays where it was.

Runs after the barrier pass, over every statement list: a copy passes a statement only
when nothing orders the two, that is when the statement is

- a ``Let`` whose name the copy does not read, or
- a ``T.Parallel`` nest that is not itself a cp.async copy, whose body is plain stores and
  Lets calling only pure math (no barrier, shuffle, vote, atomic, draw), that touches no
  shared bytes the copy writes (its buffer, views of it, buffers placed on its bytes),
  writes no global memory (a tensor at a run-time address may alias the copy's source)
  and writes nothing the copy reads (a buffer read in its indices).

Barriers, TMA copies, branches, loops, waits and other copies stop it, so the copy keeps
its place among the barriers (every barrier before it and after it stays so) and among
the other cp.async commit groups.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, var_names, walk_stmts
from .analysis import accesses, parallel_nest, plain_statements, view_bases, view_family
from .shared_memory import overlapping


def _async_copy(s) -> bool:
    if not (isinstance(s, N.For) and s.kind == "parallel"):
        return False
    inner = parallel_nest(s)[-1]
    return inner.async_copy and inner.copy_instruction != N.ASYNC_COPY


class _Mover:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope):
        self.aliases = overlapping(scope)
        self.bases = view_bases(scope.body)
        # global tensors (a tensor at a run-time address may alias another: a nest that
        # writes global memory is never passed)
        self.globals = {p.name for p in func.params if isinstance(p, N.Buffer)} | {
            a.buffer.name for a in walk_stmts(scope.body)
            if isinstance(a, N.Allocate) and a.buffer.scope == "global"}

    def storage(self, name: str) -> set[str]:
        """``name``, its view base and the views of that base, and every shared buffer on
        some of their bytes."""
        names = view_family(self.bases, name)
        for n in list(names):
            names |= self.aliases.get(n, set())
        return names

    def passes(self, t, copy) -> bool:
        """May ``copy`` move up past ``t`` (the statement just before it)?"""
        if isinstance(t, N.Let):
            return t.var.name not in var_names(copy)
        if not (isinstance(t, N.For) and t.kind == "parallel") or _async_copy(t):
            return False
        loops = parallel_nest(t)
        if not plain_statements(loops[-1].body):
            return False
        writes, reads = set(), set()
        for b, _, w in accesses([copy]):
            (writes if w else reads).add(b)
        written = set().union(*(self.storage(b) for b in writes)) if writes else set()
        read = set().union(*(self.storage(b) for b in reads)) if reads else set()
        for b, _, w in accesses([t]):
            if b in written or w and (b in read or b in self.globals):
                return False
        return True

    def block(self, body) -> tuple:
        out: list = []
        for s in body:
            names = BODY_FIELDS.get(type(s))
            if names:
                s = dataclasses.replace(s, **{n: self.block(getattr(s, n)) for n in names})
            at = len(out)
            if _async_copy(s):
                while at > 0 and self.passes(out[at - 1], s):
                    at -= 1
            out.insert(at, s)
        return tuple(out)


def start_async_copies_early(func: N.PrimFunc) -> N.PrimFunc:
    """Each cp.async copy moved up past the independent nests and Lets before it."""
    kernels = []
    for scope in func.kernels:
        if not any(_async_copy(s) for s in walk_stmts(scope.body)):
            kernels.append(scope)
            continue
        kernels.append(dataclasses.replace(scope, body=_Mover(func, scope).block(scope.body)))
    return dataclasses.replace(func, kernels=tuple(kernels))

