"""A ``T.copy`` that loads into a fragment the tile it already holds is dropped.

TileLang's two-pass kernels load the same tile twice: online softmax copies a row of ``X``
into fragment ``x`` for its statistics, then copies the same row into ``x`` again for the
output.  TileLang's CUDA marks ``X`` ``const __restrict__``, so nvcc proves the second
copy loads what ``x`` holds and removes it: the kernel reads ``X`` once.  CuTe DSL has no
such mark, and the block barriers of the reductions in between keep LLVM from reusing the
loads, so tilecute read the row again (7.8M L2 sectors against TileLang's 4.2M; 0.90 of
TileLang's time on an H200).

In a statement list (a kernel's body, a loop's ...), the second of two equal ``T.copy``
statements from a global tensor into a whole fragment is dropped when nothing between them
can change what the first one left there:

- the source is a tensor parameter that no statement of the kernel writes (nor a view of
  it, nor any atomic), and the copy's indices read no memory (block, thread, loop and
  ``Let`` variables are fixed within one statement list);
- no statement between them writes the fragment (or a view of it) or any global tensor
  (two tensor parameters may be the same memory), and each is a kind whose writes are known
  (stores, copies, fills, reductions, GEMMs, loops and ``if`` of those, ``Let``);
  anything else (a call, a barrier, an async copy, a ``T.ws`` region) ends the match.

Option ``disable_repeated_load_reuse`` keeps every copy.  Imports the IR only.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import StmtMutator, walk_nodes, walk_stmts
from .analysis import loads, view_bases, view_family, written_buffers, written_globals

# statements whose writes _writes names (nested lists are walked); any other kind of
# statement between two copies ends the match
_KNOWN = (N.Store, N.Copy, N.Fill, N.Clear, N.Reduce, N.Gemm, N.For, N.If, N.Let, N.Allocate)


def _atomic(body) -> bool:
    """``body`` (nested statements included) holds an atomic: a ``T.atomic_add`` tile op or
    an atomic call in an expression."""
    return any(isinstance(s, N.AtomicAdd) for s in walk_stmts(body)) or \
        any(isinstance(c, N.Call) and c.name in N.ATOMIC_RETURNS for c in walk_nodes(body))


def _writes(s: N.Stmt) -> set[str] | None:
    """The buffers ``s`` (nested statements included) writes, or None where it holds a
    statement of a kind not in ``_KNOWN`` (or an atomic)."""
    if _atomic((s,)) or not all(isinstance(x, _KNOWN) for x in walk_stmts((s,))):
        return None
    return written_buffers((s,))


class _Reuse(StmtMutator):
    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.params = {p.name for p in func.params if isinstance(p, N.Buffer)}
        self.fragments: set[str] = set()
        self.bases: dict[str, str] = {}
        self.read_only: set[str] = set()

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        self.fragments = {s.buffer.name for s in walk_stmts(scope.body)
                          if isinstance(s, N.Allocate) and s.buffer.scope == "fragment"}
        self.bases = view_bases(scope.body)
        written = written_globals(self.func, scope.body)
        self.read_only = set() if _atomic(scope.body) else {
            p for p in self.params
            if not view_family(self.bases, p) & (written | set(self.bases))}
        return dataclasses.replace(scope, body=self.visit_block(scope.body))

    def _reusable(self, s: N.Stmt) -> bool:
        """A copy of a whole fragment from a read-only tensor at indices that read no
        memory."""
        return isinstance(s, N.Copy) and s.src.buffer in self.read_only and \
            s.dst.buffer in self.fragments and s.dst.buffer not in self.bases and \
            not any(loads(s.src.starts)) and \
            all(isinstance(e, N.Const) and e.value == 0 for e in s.dst.starts) and \
            s.instruction != N.ASYNC_COPY

    def visit_block(self, body) -> tuple:
        body = super().visit_block(body)
        held: dict[str, N.Copy] = {}  # fragment -> the copy whose tile it holds
        out: list[N.Stmt] = []
        for s in body:
            reusable = self._reusable(s)
            if reusable and held.get(s.dst.buffer) == s:
                continue
            writes = _writes(s)
            if writes is None or any(self.func.buffer(b) is not None for b in writes):
                held.clear()
            else:
                touched = set().union(*(view_family(self.bases, b) for b in writes))
                held = {f: c for f, c in held.items() if f not in touched}
            if reusable:
                held[s.dst.buffer] = s
            out.append(s)
        return tuple(out)


def reuse_repeated_loads(func: N.PrimFunc, options: dict | None = None) -> N.PrimFunc:
    """``func`` without the copies that reload the tile a fragment holds (module doc)."""
    if (options or {}).get("disable_repeated_load_reuse"):
        return func
    return _Reuse(func).run(func)
