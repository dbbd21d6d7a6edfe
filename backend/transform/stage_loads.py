"""Global -> global nests load everything before they store anything.

``for i, j in T.Parallel(a, b): dst[...] = f(src[...])`` with both sides in global memory
(a ``T.copy`` between global tensors, an elementwise kernel, a gather) runs each thread's
iterations one after another.  TileLang's CUDA declares every tensor parameter
``__restrict__``, so nvcc issues a thread's loads together and its stores after them;
CuTe DSL has no such mark, and a load after a store to another tensor stays after it
(the two may alias), so a thread had one load in flight at a time: TileLang's dQ
post-processing copy (a layout-annotated fp32 tensor to fp16, 32 scalar loads a thread)
ran at 0.77 of TileLang's speed.

The nest is split in two over a fragment of its shape (the fragment gets the nests'
own thread layout, so every thread reads back the registers it wrote)::

    dst_staged = T.alloc_fragment((a, b), dst.dtype)
    for i, j in T.Parallel(a, b): dst_staged[i, j] = f(src[...])
    for i, j in T.Parallel(a, b): dst[...] = dst_staged[i, j]

so a thread's loads issue back to back. T.Parallel's iterations have no order, so reading
all before writing any is one of its orders. Only where it pays and cannot change what a
thread sees: constant extents; one store (under an ``if`` whose condition reads no memory)
into a global tensor that the nest does not read (nor a view of it); every load from a
global tensor, none packed (fp4 / int4 nests keep their own vector widths), none in the
store's indices or condition; pure math; at least two results per thread, at most 128 bytes,
more than 16 unless the nest gathers (one 16-byte vector a thread is one load already); not
inside an ``if``, a ``T.ws`` or warp-group region, or another nest; not a nest whose
``loop_layout`` runs every iteration on every thread (a replicated map: each thread's part
is the whole nest, and a fragment walked by such a loop must be replicated, which the staged
one is not). Option ``disable_load_staging`` keeps nests as written.

The fill names the store that reads it back (``Store.feeds``): where that store's bounds
check cannot pass (a row tail), nothing reads the element and the code generator leaves the
fill out.

Imports the IR only.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.visitor import StmtMutator, walk_stmts
from .analysis import (all_names, fresh_name, loads, parallel_nest, plain_statements, view_bases,
                       view_family)

MAX_STAGED_BYTES = 128  # per thread: 32 registers
MIN_STAGED_BYTES = 17  # one 16-byte vector a thread needs no staging


class _Stage(StmtMutator):
    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.names = all_names(func)
        self.buffers: dict[str, N.Buffer] = {}
        self.bases: dict[str, str] = {}
        self.allocs: list[N.Allocate] = []
        self.threads = 0

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        self.threads = math.prod(scope.threads)
        self.buffers = {p.name: p for p in self.func.params if isinstance(p, N.Buffer)}
        self.buffers.update({s.buffer.name: s.buffer for s in walk_stmts(scope.body)
                             if isinstance(s, N.Allocate)})
        self.bases = view_bases(scope.body)
        self.allocs = []
        body = self.visit_block(scope.body)
        return dataclasses.replace(scope, body=tuple(self.allocs) + body)

    # regions where not every thread runs the nest the same way: left as written
    def visit_if(self, s: N.If):
        return s

    def visit_warp_groups(self, s: N.WarpGroups):
        return s

    def visit_for(self, s: N.For):
        if s.kind != "parallel":
            return self.generic(s)
        staged = self.stage(s)
        return staged if staged is not None else s

    def stage(self, s: N.For):
        loops = parallel_nest(s)
        if any(not isinstance(lp.extent, N.Const) or not isinstance(lp.start, N.Const)
               or lp.vector_width or lp.replicated or lp.async_copy or lp.copy_instruction
               or (lp.loop_layout is not None and lp.loop_layout.kind == "replicated")
               for lp in loops):
            return None
        body = loops[-1].body
        guard = None
        if len(body) == 1 and isinstance(body[0], N.If) and not body[0].orelse \
                and len(body[0].then) == 1 and not any(loads(body[0].cond)):
            guard, body = body[0].cond, body[0].then
        if len(body) != 1 or not isinstance(body[0], N.Store) or not plain_statements(body):
            return None
        store = body[0]
        dst = self.buffers.get(store.buffer)
        if dst is None or dst.scope != "global" or any(loads(store.indices)):
            return None
        read = list(loads(store.value))
        same = view_family(self.bases, store.buffer)  # (a T.view of it is the same storage)
        if not read or any(getattr(self.buffers.get(ld.buffer), "scope", None) != "global"
                           or ld.buffer in same for ld in read):
            return None
        if any(N.DTYPES[self.buffers[b].dtype].bits < 8 for b in {store.buffer} | {
                ld.buffer for ld in read}):  # packed (fp4, int4): their own vector widths
            return None
        total = math.prod(int(lp.extent.value) for lp in loops)
        if self.threads <= 0 or total % self.threads:
            return None
        elements = total // self.threads
        per_thread = elements * max(1, N.DTYPES[dst.dtype].bits // 8)
        gather = any(any(loads(ld.indices)) for ld in read)  # scalar loads, whatever the width
        if elements < 2 or per_thread > MAX_STAGED_BYTES or \
                (per_thread < MIN_STAGED_BYTES and not gather):
            return None
        name = fresh_name(self.names, f"{store.buffer}_staged")
        shape = tuple(lp.extent for lp in loops)
        frag = N.Buffer(name, dst.dtype, shape, "fragment")
        self.allocs.append(N.Allocate(frag, loc=s.loc))
        at = tuple(lp.var if lp.start.value == 0 else
                   N.BinOp("sub", lp.var, lp.start, lp.var.dtype) for lp in loops)
        fill = N.Store(name, at, store.value, loc=store.loc, feeds=(store.buffer, store.indices))
        drain = dataclasses.replace(store, value=N.Load(name, at, dst.dtype))
        if guard is not None:
            fill = N.If(guard, (fill,), loc=store.loc)
            drain = N.If(guard, (drain,), loc=store.loc)
        return [_rebuild(loops, fill), _rebuild(loops, drain)]


def _rebuild(loops: list, inner: N.Stmt) -> N.For:
    body = (inner,)
    for lp in reversed(loops):
        body = (dataclasses.replace(lp, body=body),)
    return body[0]


def stage_global_loads(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if options.get("disable_load_staging", False):
        return func
    return _Stage(func).run(func)
