"""Hoist a local buffer allocated inside a ``T.Parallel`` nest to just before the nest.

TileLang takes ``d = T.alloc_var(T.float32)`` (or ``T.alloc_local``) inside a
``T.Parallel`` body: each iteration's own scalar, which the thread running the iteration
keeps in a register.  tilecute's passes lay out and vectorize a nest from the buffers
allocated outside it, and a thread runs its iterations (and the lanes of a vectorized
one) one after another, so a per-thread buffer declared before the nest and re-set where
the program sets it (``T.alloc_var``'s init stays a store in place, in the body) is each
iteration's own.  Fragments and shared buffers allocated in a nest stay refused (by the
layout pass): they are the block's, not an iteration's.

Imports the IR only.
"""

from __future__ import annotations

from ..ir import nodes as N
from ..ir.visitor import StmtMutator


class _Hoist(StmtMutator):
    def __init__(self):
        self.hoisted: list[N.Allocate] | None = None  # inside a nest: its locals

    def visit_for(self, s: N.For):
        if s.kind != "parallel" or self.hoisted is not None:
            return self.generic(s)
        self.hoisted = []
        try:
            loop = self.generic(s)
            return [*self.hoisted, loop] if self.hoisted else loop
        finally:
            self.hoisted = None

    def visit_allocate(self, s: N.Allocate):
        if self.hoisted is not None and s.buffer.scope == "local" and not s.view_of:
            self.hoisted.append(s)
            return None
        return self.generic(s)


def hoist_parallel_locals(func: N.PrimFunc) -> N.PrimFunc:
    return _Hoist().run(func)
