"""Lower copies to TMA (sm_90+): which ``T.copy`` statements between global and shared
memory the Tensor Memory Accelerator moves.

- **Loads.** ``T.copy(A[origin], s)`` (a global region origin into a whole shared
  buffer) becomes a ``TmaCopy`` with no barrier yet — a load waiting for the
  scheduling passes (:mod:`.warp_specialize`, :mod:`.software_pipeline`) to give it an
  mbarrier and a stage — when TMA can do it (:func:`tma_box`) and the copy stands at the
  top level of the kernel, or at the top level of a ``T.Pipelined`` body (or of its one
  ``if`` whose condition each step decides alone, after the step's Lets: ``if
  BlockMask[by, bx, k]:``, read again by a producer warpgroup for each step;
  :meth:`_Kernel.step_guard`) with an origin that depends only on the loop variable, values from outside the loop and the body's
  Lets before it that read no buffer the kernel writes (inlined into the origin: a
  paged load's ``page = block_table[b, k]``), into a
  buffer touched neither before it in the body, nor outside the loop, nor by an earlier
  pipelined loop.  Anything else keeps the cp.async / vector path.
- **Pieces.** A load may also fill a range of a 2-D tile's rows (:func:`row_slice`:
  constant rows starting on the swizzle's 1024-byte period), so a tile can be filled
  piece by piece, each piece from its own origin: a small constant ``T.serial`` loop of
  Lets and copies in a pipelined body (a paged tile, page by page) is unrolled when each
  of its copies then becomes a TMA load (:meth:`_Kernel.unroll_loads`); all the pieces
  of a tile arrive on its stage's mbarrier.
- **Views** (``Allocate.view_of``): a global view has no descriptor of its own and a
  shared view no layout of its own, so copies of views keep the cp.async / vector path;
  a shared buffer that has views is copied by TMA only where its layout is one its views
  can share (:func:`view_layout`), and never multi-buffered (no loads in pipelined loops).
- **Stores.** ``T.copy(s, A[origin])`` becomes ``TmaCopy(s, A[origin])`` anywhere.
- **Column walks.** A shared buffer some ``T.Parallel`` nest reads down a column (or
  that ``T.reduce`` reduces over another dim than its last, which the tile-op lowering
  reads by column) keeps the cp.async / vector path unless TMA-swizzled: the layout pass
  swizzles it, and TMA moves rows as they are.
- A copy the program marked ``T.copy(..., disable_tma=True)`` (``Copy.disable_tma``), or
  ``prefer_instruction="cp_async"`` / ``"sync"`` (``Copy.instruction``), is never one of
  these: it keeps the cp.async / vector path.  One marked ``prefer_instruction="tma"``
  becomes a TMA copy by these same rules (``TmaCopy.required``); where they leave it a
  copy, the tile-op lowering fails naming it (TileLang: "could not be honored").

- A copy from a tensor with a ``T.annotate_safe_value`` is never a TMA load either: TMA
  fills a box's elements past the tensor's end with zeros, the bounds-checked path with
  the safe value.

``auto=False`` (the ``disable_tma`` option) turns nothing into TMA.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import (StmtMutator, fold_constants, linear_form, substitute, var_names,
                          walk_nodes, walk_stmts)
from ..runtime.dtypes import DTYPES
from ..target import arch_at_least
from .analysis import (accesses, aliased, all_names, fresh_name, guarded_body, matrix_of, matrix_slice,  # noqa: F401
                       mentions, nested_pipelined, parallel_nest, row_slice, thread_dependent,
                       tma_allowed, tma_box, tma_swizzle, view_bases, view_layout, whole, without_body,
                       written_globals)


class TmaError(ValueError):
    pass


MAX_UNROLLED_LOADS = 8  # a pipelined body's T.serial loop of loads unrolled into TMA copies


def is_pending_load(s, func: N.PrimFunc) -> bool:
    """Is ``s`` a TMA load this pass made, still waiting for its mbarrier and stage?"""
    return isinstance(s, N.TmaCopy) and s.barrier is None and func.buffer(s.src.buffer) is not None


def read_start_may_misalign(start: N.Expr, esize: int, lets: dict, scalars=frozenset()) -> bool:
    """May innermost start ``start`` (elements of ``esize`` bytes) be off a multiple of 16
    bytes because of a value read from memory (``X[Off[b]:Off[b] + 128]``, also through Lets
    naming it) or a scalar parameter (``scalars``: ``X[off:off + 128]``)?  TMA's innermost
    coordinate must be a multiple of 16 bytes (a float32 box at an odd run-time offset
    stopped the kernel with an illegal instruction on an H200), so such a copy keeps the
    cp.async / vector path unless each such value's coefficient is a multiple of 16 bytes
    (``block_table[b, k] * 64``, a page).  Starts of indices and shape symbols alone are not
    asked about here (:func:`tma_box` refuses the provably misaligned ones; the others are
    the launch's to align, as before)."""
    for _ in range(8):  # (Lets naming Lets)
        names = {n.name for n in walk_nodes(start) if isinstance(n, N.Var)} & set(lets)
        if not names:
            break
        start = substitute(start, {k: lets[k] for k in names})
    if not any(isinstance(n, N.Load) or isinstance(n, N.Var) and n.name in scalars
               for n in walk_nodes(start)):
        return False
    # each load an opaque term of its own
    form = linear_form(start, lambda x: ("read", x) if isinstance(x, N.Load) else None)
    if form is None:
        return True
    return any(c * esize % 16 for k, c in form.items() if isinstance(k, tuple) or k in scalars)


def tma_of(s: N.Copy, src: N.Region | None = None) -> N.TmaCopy:
    """The TMA copy of ``s`` (from ``src``, the origin a pipelined load is issued at);
    ``required`` where the program asked for TMA."""
    return N.TmaCopy(s.src if src is None else src, s.dst, loc=s.loc,
                     required=s.instruction == "tma")


def buffer_names(body) -> set[str]:
    """Every buffer a statement list names (loads, stores, regions, tile-op operands)."""
    out: set[str] = set()
    for x in walk_nodes(tuple(body)):
        if isinstance(x, (N.Load, N.Store, N.Region)):
            out.add(x.buffer)
        elif isinstance(x, N.Gemm):
            out.update((x.a, x.b, x.c))
        elif isinstance(x, N.Reduce):
            out.update((x.src, x.dst))
        elif isinstance(x, N.Clear):
            out.add(x.buffer)
    return out


def let_names(body) -> set[str]:
    """Names bound inside ``body`` (Lets and loop variables, nested ones included)."""
    return {s.var.name for s in walk_stmts(body) if isinstance(s, (N.Let, N.For))}


def column_walked(body) -> set[str]:
    """Shared buffers some ``T.Parallel`` nest walks down a column (its innermost loop
    variable in an index other than the last): the layout pass swizzles those."""
    out: set[str] = set()
    for s in walk_stmts(body):
        if isinstance(s, N.For) and s.kind == "parallel":
            loops = parallel_nest(s)
            inner = loops[-1].var.name
            for b, idx, _ in accesses(loops[-1].body):
                if len(idx) >= 2 and any(mentions(i, inner) for i in idx[:-1]):
                    out.add(b)
    return out


class _Kernel(StmtMutator):
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, arch: str):
        self.func, self.scope, self.arch = func, scope, arch
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
        self.buffers.update({n: a.buffer for n, a in self.allocs.items()})
        self.column_walked = column_walked(scope.body) | {
            r.src for r in walk_stmts(scope.body) if isinstance(r, N.Reduce)
            and r.src in self.allocs and self.allocs[r.src].buffer.scope == "shared"
            and r.dim != self.allocs[r.src].buffer.ndim - 1}
        # (the tile-op lowering reads a shared source reduced over another dim than its last
        # by column, into a fragment with that dim last)
        self.pipelined: set[str] = set()  # buffers an earlier pipelined loop loads
        self.bases = view_bases(scope.body)  # view -> the buffer it views
        self.aliased = aliased(scope.body)
        self.names: set[str] | None = None  # every name of the function (fresh names)
        self.unrolled_lets: set[str] = set()  # the Lets of loops unroll_loads unrolled
        # tensors with a T.annotate_safe_value (and views of them): copies from them stay
        # on the cp.async / vector path, which reads the safe value out of bounds
        self.safe = {n for n, _ in scope.safe_values}
        self.safe |= {v for v, b in self.bases.items() if b in self.safe}
        # the kernel's Lets: a start named by one is read through its value
        self.lets = {t.var.name: t.value for t in walk_stmts(scope.body) if isinstance(t, N.Let)}
        # the scalar parameters: values the launch passes, as unknown as a value read
        self.scalars = {p.name for p in func.params if isinstance(p, N.Var)}

    def tma_ok(self, glob_r: N.Region, shared_r: N.Region) -> bool:
        """Can TMA copy between global region ``glob_r`` and shared ``shared_r``?"""
        glob, shared = self.buffers.get(glob_r.buffer), self.buffers.get(shared_r.buffer)
        if glob is None or shared is None or glob.scope != "global" or shared.scope != "shared":
            return False
        if DTYPES[glob.dtype].pack > 1 or DTYPES[shared.dtype].pack > 1:
            return False  # (float4_e2m1fn: TMA's 4-bit types are sm_100's; cp.async moves it)
        if "bool" in (glob.dtype, shared.dtype):
            return False  # CuTe DSL's tensor maps have no Boolean element; the plain copy moves it
        if shared.name not in self.allocs:
            return False
        swizzle = tma_swizzle(self.allocs[shared.name])
        sliced = row_slice(shared_r, shared, swizzle)
        matrix = matrix_slice(shared_r, shared, swizzle)  # A_s[s, :, :]
        if not whole(shared_r, shared) and sliced is None and matrix is None:
            return False
        if self.func.buffer(glob.name) is None or shared.name in self.bases:
            return False  # a view: no descriptor (global), no layout of its own (shared)
        alloc = self.allocs[shared.name]
        if any(isinstance(view_layout(shared, alloc.layout, self.buffers[v]), str)
               for v, b in self.bases.items() if b == shared.name):
            return False  # its views could not share the layout TMA writes
        if alloc.layout is not None and alloc.layout.kind not in ("row_major", "tma_swizzled"):
            return False  # a layout the program chose (T.annotate_layout) that TMA can't write
        if shared.name in self.column_walked and not swizzle:
            return False  # the layout pass swizzles it for the column walk; TMA rows can't
        if (sliced is not None or matrix is not None) and shared.name in self.bases.values():
            return False  # (a slice of a buffer with views: keep it simple)
        if glob_r.starts and len(glob_r.starts) == glob.ndim and \
                read_start_may_misalign(glob_r.starts[-1], DTYPES[glob.dtype].bytes, self.lets,
                                        self.scalars):
            return False
        return isinstance(tma_box(glob, glob_r, shared if matrix is None else matrix_of(shared),
                                  swizzle, sliced[1] if sliced else None), tuple)

    def load_ok(self, s) -> bool:
        if isinstance(s, N.Copy) and s.src.buffer in self.safe:
            return False  # (TMA would fill the box's elements out of bounds with zeros)
        return isinstance(s, N.Copy) and tma_allowed(s) and self.tma_ok(s.src, s.dst)

    def visit_copy(self, s: N.Copy):
        """Stores at any depth (loads only where :meth:`top` takes them)."""
        if not tma_allowed(s) or not self.tma_ok(s.dst, s.src):
            return s
        return tma_of(s)

    def top(self) -> N.KernelScope:
        out = []
        for s in self.scope.body:
            if self.load_ok(s):
                out.append(tma_of(s))
            elif isinstance(s, N.For) and s.kind == "pipelined":
                out.append(self.pipelined_loop(s))
            elif (path := nested_pipelined(s)) is not None and not thread_dependent(
                    tuple(t.cond for t in path if isinstance(t, N.If)), self.scope.body):
                # a persistent kernel's tiles, or a loop under a block-uniform ``if`` (one
                # some threads skip keeps its copies: the TMA issuer may be among them)
                out.append(self.nest(s, path))
            else:
                out.append(self.visit(s))
        return dataclasses.replace(self.scope, body=tuple(out))

    def nest(self, s, path: list):
        """``s`` with the pipelined loop at the end of ``path`` (:func:`nested_pipelined`)
        lowered as a top-level one (its loads run again for each tile; the
        warp-specialization pass carries the stages across the runs, or puts them back)."""
        if s is path[-1]:
            return self.pipelined_loop(s)
        inner = path[path.index(s) + 1]
        direct = s is path[-2]  # the loop's own container: its loads before the loop are
        # the tile's (attention's Q), issued once per run by the producer

        def each(body):
            out, before = [], True
            for t in body:
                if t is inner:
                    out.append(self.nest(t, path))
                    before = False
                elif direct and before and self.run_load_ok(t, path):
                    out.append(tma_of(t))
                else:
                    out.append(self.visit(t))
            return tuple(out)
        if isinstance(s, N.For):
            return dataclasses.replace(s, body=each(s.body))
        return dataclasses.replace(s, then=each(s.then), orelse=each(s.orelse))

    def run_load_ok(self, t, path: list) -> bool:
        """A load before a nested pipelined loop that TMA can do into a buffer that only it
        writes and only that loop's T.gemms read (the tile's own operand)."""
        if not self.load_ok(t) or t.dst.buffer in self.aliased or \
                t.dst.buffer in self.pipelined:
            return False
        name = t.dst.buffer
        others = [u for u in walk_stmts(self.scope.body) if u is not t and not isinstance(
            u, (N.For, N.If, N.While, N.KernelScope, N.Allocate)) and name in buffer_names([u])]
        loop_stmts = {id(u) for u in walk_stmts(path[-1].body)}
        return all(isinstance(u, N.Gemm) and id(u) in loop_stmts for u in others)

    def pipelined_loop(self, loop: N.For) -> N.For:
        cond, prefix, then = guarded_body(loop.body)
        if cond is not None and self.step_guard(loop, cond, prefix) is not None:
            # a body under one ``if`` each step decides alone (``if BlockMask[by, bx, k]:``):
            # its branch's loads too, for a producer warpgroup to issue under the step's
            # guard (:mod:`.warp_specialize`, which puts them back as copies otherwise)
            (guard,) = loop.body[len(prefix):]
            body = self.pipelined_body(loop, prefix + then)
            return dataclasses.replace(loop, body=body[:len(prefix)] + (
                dataclasses.replace(guard, then=body[len(prefix):]),))
        return dataclasses.replace(loop, body=self.pipelined_body(loop, loop.body))

    def pipelined_body(self, loop: N.For, stmts) -> tuple:
        """``stmts`` (``loop``'s body, or its guarded branch after the Lets before it) with
        the loads a pipeline can issue steps ahead made pending TMA loads."""
        steps = self.unroll_loads(stmts)
        inner = let_names(loop.body) | let_names(steps)
        outside = buffer_names(
            [t for t in without_body(self.scope.body, loop) if not isinstance(t, N.Allocate)])
        written = self.written()
        body, before, loaded = [], [], set()
        lets: dict[str, N.Expr] = {}  # the body's top-level Lets, each of the step alone
        for s in steps:
            src = self.step_origin(s, lets, inner, written) if self.load_ok(s) else None
            if src is not None and s.dst.buffer not in buffer_names(before) \
                    and not var_names(s.dst.starts) & (inner | {loop.var.name}) \
                    and s.dst.buffer not in self.aliased \
                    and s.dst.buffer not in outside and s.dst.buffer not in self.pipelined:
                body.append(tma_of(s, src))
                loaded.add(s.dst.buffer)
            else:
                if isinstance(s, N.Let) and not self.reads_mutable(s.value, written):
                    lets[s.var.name] = substitute(s.value, lets)
                before.append(s)
                body.append(self.visit(s))
        self.pipelined |= loaded
        # the Lets of unrolled loads that only their (now TMA) copies read
        read = {x.name for t in body if not (isinstance(t, N.Let) and t.var.name in self.unrolled_lets)
                for x in walk_nodes(t) if isinstance(x, N.Var)}
        return tuple(t for t in body if not (isinstance(t, N.Let) and t.var.name in self.unrolled_lets
                                             and t.var.name not in read))

    def unroll_loads(self, body) -> list:
        """``body`` with each small constant ``T.serial`` / ``T.unroll`` loop of Lets and
        loads unrolled, when every load of it then becomes a TMA copy of its own (a paged
        tile filled page by page: ``for p in T.serial(4): page = block_table[b, 4 * k +
        p]; T.copy(K_pages[page, ...], K_s[p * 16:(p + 1) * 16, :])``); the Lets of each
        copy of the body get fresh names."""
        out = []
        for s in body:
            unrolled = self.unrolled(s) if isinstance(s, N.For) else None
            out += unrolled if unrolled is not None else [s]
        return out

    def unrolled(self, loop: N.For) -> list | None:
        if loop.kind not in ("serial", "unrolled") or not (
                isinstance(loop.start, N.Const) and isinstance(loop.extent, N.Const)) or \
                not 1 <= loop.extent.value <= MAX_UNROLLED_LOADS or \
                not all(isinstance(t, (N.Let, N.Copy)) for t in loop.body) or \
                not any(isinstance(t, N.Copy) for t in loop.body):
            return None
        out = []
        for i in range(loop.extent.value):
            names = {loop.var.name: N.Const(loop.start.value + i, loop.var.dtype)}
            for t in loop.body:
                t = fold_constants(substitute(t, names))
                if isinstance(t, N.Let):
                    fresh = self.fresh(f"{t.var.name}_{i}")
                    self.unrolled_lets.add(fresh)
                    var = dataclasses.replace(t.var, name=fresh)
                    names[t.var.name] = var
                    t = dataclasses.replace(t, var=var)
                elif not self.load_ok(t):
                    return None
                out.append(t)
        return out

    def fresh(self, stem: str) -> str:
        if self.names is None:
            self.names = all_names(self.func)
        return fresh_name(self.names, stem, first=2)

    def step_guard(self, loop: N.For, cond: N.Expr, prefix: tuple) -> N.Expr | None:
        """The guard of a guarded pipelined body (:func:`guarded_body`) as its step alone
        decides it: the prefix Lets it names inlined, reading the loop variable, values
        from outside the loop and global tensors the kernel never writes, and not the
        thread index; None when it reads anything else (a producer warpgroup could not
        decide it for another step)."""
        written = self.written()
        lets: dict = {}
        for t in prefix:
            if not self.reads_mutable(t.value, written):
                lets[t.var.name] = substitute(t.value, lets)
        cond = substitute(cond, lets) if lets else cond
        if var_names(cond) & let_names(loop.body) or self.reads_mutable(cond, written) or any(
                isinstance(c, N.Call) and c.name in ("thread_idx", "shuffle_elect")
                for c in walk_nodes(cond)):
            return None
        return cond

    def reads_mutable(self, e, written: set[str]) -> bool:
        """Does ``e`` read a buffer other than a global one the kernel never writes (a
        local variable, shared memory, a written global): a value of this step only?"""
        return any(isinstance(x, N.Load) and (x.buffer in written or self.func.buffer(x.buffer) is None)
                   for x in walk_nodes(e))

    def step_origin(self, s: N.Copy, lets: dict, inner: set, written: set[str]) -> N.Region | None:
        """The copy's source with the body's Lets it names inlined (a paged load's
        ``page = block_table[b, k]``), so that the load can be issued steps ahead; None
        when it names another name bound in the body or reads a buffer other than a
        global one the kernel never writes."""
        src = substitute(s.src, lets) if lets else s.src
        if any(mentions(e, n) for e in src.starts for n in inner):
            return None
        if self.reads_mutable(src.starts, written):
            # an origin read from a local variable or a shared / written buffer
            # (`idx = T.alloc_var(...)`, `idx = Ids[k]`) holds this step's value only
            return None
        return src

    def written(self) -> set[str]:
        """Global buffers some statement of the kernel writes."""
        return written_globals(self.func, self.scope.body)


def lower_copies_to_tma(func: N.PrimFunc, arch: str, auto: bool = True) -> N.PrimFunc:
    if not auto or not arch_at_least(arch, 90):
        for s in walk_stmts(tuple(k for k in func.kernels)):
            if isinstance(s, N.Copy) and s.instruction == "tma":  # TileLang refuses both
                from ..ir.printer import stmt_str

                why = ("conflicts with the option disable_tma (tl.disable_tma_lower)" if not auto
                       else f"could not be honored: TMA is sm_90+, the target is {arch}")
                where = f"{s.loc}: " if s.loc else ""
                raise TmaError(f"{where}prim_func '{func.name}': {stmt_str(s)} {why}")
        return func
    kernels = tuple(_Kernel(func, k, arch).top() for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
