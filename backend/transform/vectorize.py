"""Choose lanes per thread step for ``T.Parallel`` nests, and which of their accesses
become 128-bit loads and stores.

A nest runs ``V`` consecutive iterations of its innermost loop ``j`` per thread step
(lanes).  Each access that is straight-line, to a global or row-major shared buffer,
contiguous in ``j`` (last index ``j + c``, ``c`` and the other strides known multiples of
the chunk), becomes one vector instruction per chunk of at most 16 bytes; every other
access runs per lane.  For nests over fragments the layout pass has fixed ``V``; for the
others ``V`` is the widest at which every global access is a full vector (16 bytes of the
narrowest dtype, dividing the innermost extent) or a read one value across each aligned
group of ``V`` lanes (a group scale ``s[row, j // 128]``, read per lane), else 1.  The tensors accessed by vector
instructions are returned with the alignment they need, which the launcher checks.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.visitor import StmtMutator, walk_nodes, walk_stmts
from ..runtime.dtypes import DTYPES, storage_bytes
from ..target import ASYNC_COPY_BYTES, VECTOR_BYTES, arch_at_least
from .analysis import (accesses, affine_in, known_multiple, let_values, loads as _loads,
                       mentions, parallel_nest, plain_statements, row_major_strides,
                       substitute, top_loads)


class VectorizeError(ValueError):
    pass


def vector_elements(dtype: str) -> int:
    """Elements of ``dtype`` in one 16-byte vector (32 of the 4-bit float4_e2m1fn)."""
    return VECTOR_BYTES * 8 // DTYPES[dtype].bits


def legal_width(inner: N.For, buffers: dict[str, N.Buffer],
                layouts: dict[str, N.Layout] | None = None, arch: str | None = None) -> int:
    """The widest lane count for the innermost parallel loop ``inner`` at which every global
    access of its body is a full-width vector access; for a body that touches no global
    memory, every shared access (as TileLang's loop vectorizer plans over all the buffers
    a loop touches: an update of a shared tile in place, ``v[i, j] = v[i, j] * d[i]``, runs
    16 bytes a thread step), where the body is plain stores and Lets calling nothing that
    meets other threads; 1 if none."""
    if not isinstance(inner.extent, N.Const) or not (isinstance(inner.start, N.Const)
                                                     and inner.start.value == 0):
        return 1
    lets = let_values(inner.body)
    j = inner.var.name
    # a read at an index free of the loop variable (a gather's row ``idx[r]``, a scale
    # ``s[0]``) is one value for every lane: it does not limit the width (TileLang's
    # planner skips an access independent of the loop variable)
    touched = [(b, i, w) for b, i, w in accesses(inner.body)
               if w or mentions(substitute(i, lets) if lets else i, j)]
    glob = [(b, tuple(i), w) for b, i, w in touched if buffers.get(b) is not None
            and buffers[b].scope == "global"]
    if not glob and plain_statements(inner.body):
        glob = [(b, tuple(i), w) for b, i, w in touched if buffers.get(b) is not None
                and buffers[b].scope == "shared"]
    if not glob:
        return 1
    width = max(vector_elements(buffers[b].dtype) for b, _, _ in glob)
    extent = int(inner.extent.value)
    while width > 1:
        if extent % width == 0:
            vec = vector_accesses(inner, buffers, layouts or {}, width, arch)
            # a read whose index is one value across each aligned group of ``width`` lanes
            # (a group scale ``s[row, j // 128]``) is read per lane and does not limit the
            # width, as TileLang's planner takes an access invariant within the vector
            if all(vec.get((b, i)) == min(width, vector_elements(buffers[b].dtype)) or
                   not w and all(_group_invariant(substitute(x, lets) if lets else x, j, width)
                                 for x in i)
                   for b, i, w in glob):
                return width
        width //= 2
    return 1


def _group_invariant(e, j: str, width: int) -> bool:
    """Is index ``e`` the same at the ``width`` lanes ``j = width * q + l`` of an aligned
    group: every use of ``j`` inside a ``(j + c) // m`` with ``m`` and ``c`` multiples of
    ``width`` (the lanes' start is one, so the group never crosses a multiple of ``m``)?"""
    if not mentions(e, j):
        return True
    if isinstance(e, N.BinOp) and e.op == "floordiv" and isinstance(e.b, N.Const):
        c = affine_in(e.a, j)
        if c is not None and int(e.b.value) % width == 0 and known_multiple(c) % width == 0:
            return True
    if isinstance(e, N.Var):
        return False
    if isinstance(e, N.BinOp):
        return _group_invariant(e.a, j, width) and _group_invariant(e.b, j, width)
    if isinstance(e, N.Cast):
        return _group_invariant(e.value, j, width)
    return False


def vector_accesses(inner: N.For, buffers: dict[str, N.Buffer], layouts: dict[str, N.Layout],
                    width: int, arch: str | None = None, outer: dict | None = None,
                    any_dim: bool = False) -> dict[tuple, int]:
    """The accesses of the innermost parallel loop ``inner`` (running ``width`` lanes per
    thread step) that become vector loads/stores: ``(buffer, indices) -> chunk`` elements
    per instruction (at most 16 bytes).  Only straight-line accesses at the top of the
    body, to global, row-major or TMA-swizzled shared buffers, contiguous in the loop variable, at
    offsets known to be multiples of the chunk, and of buffers the body does not both
    read and write, unless every access of the buffer in the body is at the same index
    (an update in place, ``v[i, j] = v[i, j] * d``: each lane reads and writes its own
    element, so one vector load before the lanes and one vector store after them do the
    same).  With ``arch``, a relaxed ``T.atomic_add`` of a float32 / float16 / bfloat16
    global element (its value reading only registers and the nest's vector loads) becomes
    vector ``red`` instructions where the arch has them (sm_90: ``.v2`` / ``.v4.f32``,
    up to ``.v8`` for 16-bit floats; sm_80: ``f16x2``), as TileLang's ``AtomicAddx2`` /
    ``x4``; each element is still added atomically on its own.  The vectorizer and the
    codegen both call this, so the alignment the launcher checks is exactly what the kernel
    assumes.  ``outer``: the values of the Lets bound before the loop (``base = tx * 4``),
    through which an offset's divisibility is read (``B[base + i]`` starts at a multiple of
    4); ``any_dim``: a global tensor's unit-stride dim need not be its last (a
    ``T.StridedTensor`` with ``strides=(1, s)``, the loop running down its rows)."""
    if width < 2:
        return {}
    j = inner.var.name
    atomics = [s for s in inner.body if isinstance(s, N.AtomicAdd) and isinstance(s.value, N.Expr)]
    stored = {s.buffer for s in inner.body if isinstance(s, N.Store)} | \
        {s.dst.buffer for s in atomics}
    loaded = {ld.buffer for s in inner.body for ld in _loads(getattr(s, "value", ()))}
    # the indices each buffer is stored at and loaded at in the body
    at = {}
    for s in inner.body:
        for ld in _loads(getattr(s, "value", ())):
            at.setdefault(ld.buffer, set()).add(ld.indices)
        if isinstance(s, N.Store):
            at.setdefault(s.buffer, set()).add(s.indices)
        elif isinstance(s, N.AtomicAdd):
            at.setdefault(s.dst.buffer, set()).add(None)  # (never in place)
    in_place = {b for b, idx in at.items() if len(idx) == 1 and None not in idx}
    candidates = []
    unconditional = set()  # loads read whatever the conditions of T.if_then_else's are
    vector_atomics = []
    for s in inner.body:
        if isinstance(s, N.Store):
            candidates.append((s.buffer, s.indices))
            unconditional.add((s.buffer, s.indices))
        if isinstance(s, (N.Store, N.Let)) or s in atomics:
            candidates.extend((ld.buffer, ld.indices) for ld in top_loads(s.value))
            unconditional |= {(ld.buffer, ld.indices) for ld in top_loads(_taken(s.value))}
        if s in atomics and _atomic_chunk(buffers.get(s.dst.buffer), s, arch, width) > 1:
            key = (s.dst.buffer, s.dst.starts)
            candidates.append(key)
            unconditional.add(key)
            vector_atomics.append((s, key))
    lets = let_values(inner.body)
    written = {t.buffer for t in walk_stmts(inner.body) if isinstance(t, N.Store)}
    out = {}
    for key in candidates:
        name, indices = key
        indices = substitute(indices, lets) if lets else indices  # (a Let bound in the body)
        buf = buffers.get(name)
        if buf is None or (name in stored and name in loaded and name not in in_place) or \
                buf.dtype == "bool":
            continue  # (bool is a byte in memory and a bit in registers: element by element)
        kind = getattr(layouts.get(name), "kind", "row_major")
        if buf.scope == "shared":
            if kind not in ("row_major", "tma_swizzled"):
                continue
            if key not in unconditional:
                continue  # read in a branch only where it is taken, or after an and / or's
                # first operand only where it is reached (codegen/bounds.py): the element
                # may lie outside the buffer elsewhere (s[i, j - 1] at j == 0)
        elif buf.scope != "global":
            continue
        dim = len(indices) - 1  # the dim the lanes run along
        if any_dim and buf.scope == "global" and DTYPES[buf.dtype].pack == 1:
            along = [d for d, i in enumerate(indices) if mentions(i, j)]
            dim = along[0] if len(along) == 1 else dim
        if any(not _lane_invariant(ld, j, written | stored, buffers) for ld in _loads(indices)) or \
                any(mentions(i, j) for d, i in enumerate(indices) if d != dim) \
                or _draws(indices):
            continue  # (a Let's T.rng_rand() substituted into an index would draw again)
        c = affine_in(indices[dim], j)
        strides = row_major_strides(buf)
        if c is None or not (isinstance(strides[dim], N.Const) and strides[dim].value == 1):
            continue
        chunk = min(width, vector_elements(buf.dtype))
        multiple = known_multiple(substitute(c, outer) if outer else c)
        if buf.scope == "shared" and kind == "tma_swizzled" and not layouts[name].flat:
            # rows of swizzle bytes, whose 16-byte pieces the swizzle only permutes: a
            # vector inside one piece stays contiguous
            multiple = math.gcd(multiple, layouts[name].swizzle // DTYPES[buf.dtype].bytes)
        else:
            for d, stride in enumerate(strides):
                if d != dim:
                    multiple = math.gcd(multiple, known_multiple(stride))
        while chunk > 1 and multiple and multiple % chunk:
            chunk //= 2
        if chunk > 1:
            out[key] = chunk
    for s, key in vector_atomics:
        if key not in out:
            continue
        out[key] = min(out[key], _atomic_chunk(buffers[s.dst.buffer], s, arch, width))
        # its value and index read registers and vector loads only: the vector runs where
        # the nest's vectors are in bounds, the lanes one by one (each skipped out of
        # bounds, as TileLang's atomics) elsewhere
        reads = _loads((s.value, s.dst.starts))
        if any(buffers.get(ld.buffer) is None or buffers[ld.buffer].scope in ("global", "shared")
               and (ld.buffer, ld.indices) not in out for ld in reads) or _draws((s.value, s.dst.starts)):
            del out[key]
    return out


def _atomic_chunk(buf, s: N.AtomicAdd, arch: str | None, width: int) -> int:
    """The most elements one vector ``red`` adds for atomic ``s`` into ``buf`` on ``arch``
    (1: none; ``tilecute.runtime.cute.atomic.vector_chunk``)."""
    if arch is None or buf is None or buf.scope != "global" or s.op != "add" or \
            s.order != "relaxed" or not arch_at_least(arch, 80):
        return 1
    if arch_at_least(arch, 90) and buf.dtype in ("float32", "float16", "bfloat16"):
        return min(width, 4 if buf.dtype == "float32" else 8)
    return min(width, 2) if buf.dtype == "float16" else 1


def _lane_invariant(ld: N.Load, j: str, written: set, buffers: dict) -> bool:
    """Is ``ld``, read in an index, one value for every lane: a thread's own register
    (``T.alloc_var`` / ``T.alloc_local``: a row offset summed into a ``T.alloc_var``) or a
    global or shared element (a gather's or scatter's row, ``E[idx[r], j]``) that the
    body does not write, at an index free of the lane variable ``j`` (and reading only
    such values)?  The vector access reads it once, before the body, as TileLang's
    vectorizer reads ``idx[r]`` once for the 16 bytes of the row."""
    buf = buffers.get(ld.buffer)
    return buf is not None and buf.scope in ("local", "global", "shared") and \
        ld.buffer not in written and not mentions(ld.indices, j) and not _draws(ld.indices) and \
        all(_lane_invariant(inner, j, written, buffers) for inner in _loads(ld.indices))


def _taken(e):
    """``e`` with every ``Select``'s branches dropped (its condition kept) and every
    ``and`` / ``or`` cut to its first operand: what is read whichever branch is taken and
    however the operands short-circuit (``r < rows and s[r, j] == 1`` reads ``s`` only
    where ``r < rows``, as C's ``&&`` in TileLang's CUDA)."""
    if isinstance(e, N.Select):
        return _taken(e.cond)
    if isinstance(e, N.Logic):
        return _taken(e.args[0])
    if isinstance(e, N.Load):
        return e
    if isinstance(e, N.Expr):
        return tuple(_taken(v) for v in vars(e).values() if isinstance(v, (N.Expr, tuple)))
    if isinstance(e, tuple):
        return tuple(_taken(v) for v in e)
    return ()


def _draws(x) -> bool:
    """Does ``x`` call a random number draw (T.rng_rand / T.rng_rand_float) or access
    memory atomically (T.atomic_load, T.atomic_add(..., return_prev=True): each is its own
    access)?"""
    return any(isinstance(n, N.Call) and n.name in N.RNG_DRAWS + N.ATOMIC_RETURNS + ("atomic_load",)
               for n in walk_nodes(x))


def async_copy_ok(inner: N.For, buffers, layouts, arch: str) -> bool:
    """Is this nest a plain global -> row-major shared copy whose vector chunks cp.async
    (sm_80+) can move?"""
    if not arch_at_least(arch, 80) or len(inner.body) != 1 or not isinstance(inner.body[0], N.Store):
        return False
    s = inner.body[0]
    if not isinstance(s.value, N.Load):
        return False
    dst, src = buffers.get(s.buffer), buffers.get(s.value.buffer)
    if dst is None or src is None or dst.scope != "shared" or src.scope != "global" \
            or dst.dtype != src.dtype:
        return False
    vec = {(v.buffer, v.indices): v.chunk for v in inner.vectors}
    chunks = {vec.get((s.buffer, s.indices)), vec.get((src.name, s.value.indices))}
    return len(chunks) == 1 and None not in chunks and \
        storage_bytes(dst.dtype, chunks.pop()) in ASYNC_COPY_BYTES


def min_padding_width(width: int, loops: list, threads: int) -> int:
    """TileLang's choice of lanes for a nest over no fragment (``SelectMinPaddingVectorSize``
    in its parallel op): the nest is covered in steps of ``threads * width`` iterations with
    every thread of the block (or ``T.ws`` region) taking part, so of the legal widths
    ``width``, ``width / 2``, ..., 1 the one that leaves the fewest iterations of the last
    step idle wins, the wider on a tie.  128 iterations over 128 threads run one each (not
    4 lanes on 32 threads): which thread runs which iteration is the program's business
    (a warp shuffle or match in the nest sees its lanes' values).  A nest whose extents are
    not all constants never gets here (one lane a step, ``parallel``)."""
    if width <= 1 or threads <= 0:
        return width
    total = math.prod(int(lp.extent.value) for lp in loops)
    best, best_pad, cand = width, None, width
    while cand >= 1:
        step = threads * cand
        pad = -(-total // step) * step - total
        if best_pad is None or pad < best_pad:
            best, best_pad = cand, pad
        cand //= 2
    return best


class _Vectorizer(StmtMutator):
    def __init__(self, func: N.PrimFunc, arch: str, auto_async: bool = True, verbose: bool = False):
        self.func, self.arch, self.auto_async, self.verbose = func, arch, auto_async, verbose
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.layouts: dict[str, N.Layout] = {}
        self.threads = 0  # the threads a nest spreads over: the block's or a T.ws region's
        # the values of the Lets visited so far (names are unique in a function), in terms
        # of no other Let: what a T.vectorized loop's offsets are multiples of
        self.lets: dict[str, N.Expr] = {}

    def visit_let(self, s: N.Let) -> N.Let:
        if N.is_int(s.var.dtype):
            self.lets[s.var.name] = substitute(s.value, self.lets) if self.lets else s.value
        return s

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        self.threads = scope.num_threads
        return super().visit_kernel(scope)

    def visit_warp_groups(self, s: N.WarpGroups) -> N.WarpGroups:
        saved, self.threads = self.threads, s.num_threads
        try:
            return self.generic(s)
        finally:
            self.threads = saved

    def visit_allocate(self, s: N.Allocate) -> N.Allocate:
        self.buffers[s.buffer.name] = s.buffer
        if s.layout is not None:
            self.layouts[s.buffer.name] = s.layout
        return s

    def visit_for(self, loop: N.For) -> N.For:
        if loop.kind == "parallel":
            return self.parallel(loop)
        loop = self.generic(loop)
        return self.per_thread(loop) if loop.vectorized else loop

    def per_thread(self, loop: N.For) -> N.For:
        """A ``T.vectorized`` loop (every iteration on this thread): ``W`` iterations a
        step, its contiguous global and shared accesses one vector instruction per chunk
        (:func:`vector_accesses`), as TileLang vectorizes the loop.  ``W``: 16 bytes of the
        narrowest dtype of those buffers, halved until it divides the extent.  Only a
        straight-line body (stores, lets and ``T.assume``s) is vectorized: its vector loads
        run before the step's stores, which in a branch or an inner loop they might not."""
        if not (isinstance(loop.start, N.Const) and loop.start.value == 0 and
                isinstance(loop.extent, N.Const)) or loop.unroll_factor or \
                not all(isinstance(t, (N.Store, N.Let)) or N.is_assume(t) for t in loop.body):
            return loop
        memory = [self.buffers[b] for b, _, _ in accesses(loop.body)
                  if b in self.buffers and self.buffers[b].scope in ("global", "shared")]
        if not memory:
            return loop
        width = min(vector_elements(b.dtype) for b in memory)
        while width > 1 and int(loop.extent.value) % width:
            width //= 2
        if width < 2:
            return loop
        vec = vector_accesses(dataclasses.replace(loop, vector_width=width), self.buffers,
                              self.layouts, width, outer=self.lets, any_dim=True)
        if not vec:
            return loop
        return dataclasses.replace(loop, vector_width=width, vectors=tuple(
            N.VectorAccess(name, indices, chunk) for (name, indices), chunk in vec.items()))

    def check_cp_async(self, inner: N.For) -> None:
        """A T.copy the program asked to be cp.async (``prefer_instruction="cp_async"``,
        ``For.copy_instruction``) that this pass could not make so: TileLang's "could not be
        honored" error, naming the copy."""
        if inner.copy_instruction not in ("cp_async", N.ASYNC_COPY) or inner.async_copy:
            return
        if not arch_at_least(self.arch, 80):
            why = f"cp.async is sm_80+, the target is {self.arch}"
        else:
            why = ("cp.async moves 4, 8 or 16 contiguous bytes per thread from a global tensor "
                   "into a row-major or TMA-swizzled shared buffer of the same dtype, and this "
                   f"copy's elements (vector width {inner.vector_width or 1}) do not move so")
        form = "T.async_copy" if inner.copy_instruction == N.ASYNC_COPY else \
            'T.copy(..., prefer_instruction="cp_async")'
        raise VectorizeError(
            f"{str(inner.loc) + ': ' if inner.loc else ''}prim_func '{self.func.name}': "
            f'{form} could not be honored: {why}')

    def report(self, loops, inner: N.For) -> None:
        """Option ``vectorize_verbose`` (TileLang's tl.enable_vectorize_planner_verbose): one
        line per parallel nest on stderr, the lanes per thread step chosen and which accesses
        move as vectors of how many elements."""
        import sys

        from ..ir.printer import expr_str

        where = f"{inner.loc}: " if inner.loc else ""
        extents = ", ".join(expr_str(lp.extent) for lp in loops)
        moves = "; ".join(f"{v.buffer}[{', '.join(expr_str(i) for i in v.indices)}] x{v.chunk}"
                          for v in inner.vectors) or "none"
        print(f"[tilecute vectorize] {where}prim_func '{self.func.name}': T.Parallel({extents}): "
              f"vector width {inner.vector_width or 1}, vector accesses: {moves}"
              f"{', cp.async' if inner.async_copy else ''}", file=sys.stderr)

    def record(self, inner: N.For) -> N.For:
        vec = vector_accesses(inner, self.buffers, self.layouts, inner.vector_width, self.arch)
        return dataclasses.replace(inner, vectors=tuple(
            N.VectorAccess(name, indices, chunk) for (name, indices), chunk in vec.items()))

    def parallel(self, loop: N.For) -> N.For:
        loops = parallel_nest(loop)
        inner = loops[-1]
        if inner.replicated:  # every thread runs every iteration: no lanes
            self.check_cp_async(inner)
            return loop
        if any(self.buffers[b].scope == "fragment" and
               getattr(self.layouts.get(b), "kind", None) != "replicated"
               for b, _, _ in accesses(inner.body)):
            # (a nest reading only fragments every thread holds whole -- a row statistic
            # after its reduction -- runs distributed like one over memory alone: its
            # lanes are chosen below)
            inner = self.record(inner)  # lanes chosen by the layout pass
            self.check_cp_async(inner)
            for outer in reversed(loops[:-1]):
                inner = dataclasses.replace(outer, body=(inner,))
            return inner
        if not all(isinstance(lp.extent, N.Const) and isinstance(lp.start, N.Const)
                   for lp in loops):
            # extents known only at run time: codegen spreads the nest one iteration a
            # thread step (nests.spread_dynamic), so its vectors are one element wide
            # (a (T.min(m, n), 32) copy got 4-element cp.async chunks at every element)
            width = 1
        elif inner.loop_layout is not None:
            # the program's loop layout (set by the layout pass): its lanes per thread step
            # are which thread runs which iteration, whatever vector instructions they allow
            width = inner.vector_width
        elif inner.vector_width:  # the program asked for a width (1 turns vectorization off)
            width = legal_width(inner, self.buffers, self.layouts, self.arch)
            if width % inner.vector_width and inner.vector_width > 1:
                raise VectorizeError(
                    f"{str(inner.loc) + ': ' if inner.loc else ''}prim_func '{self.func.name}': "
                    f"T.Parallel(..., vector_width={inner.vector_width}) is not legal here (the "
                    f"widest legal width is {width}; TileLang's coalesced_width= sets this "
                    f"width too and refuses it alike)")
            width = inner.vector_width
        else:
            width = min_padding_width(legal_width(inner, self.buffers, self.layouts, self.arch),
                                      loops, self.threads)
        inner = self.record(dataclasses.replace(inner, vector_width=width))
        if inner.copy_instruction == "cp_async" and not self.auto_async:
            raise VectorizeError(
                f"{str(inner.loc) + ': ' if inner.loc else ''}prim_func '{self.func.name}': "
                'T.copy(..., prefer_instruction="cp_async") conflicts with pass config '
                "tl.enable_async_copy=False (option disable_async_copy)")
        # implicit cp.async only where the option allows; T.async_copy and prefer_instruction=
        # "cp_async" ask for it (TileLang's tl.enable_async_copy turns off the implicit kind)
        wanted = self.auto_async or inner.copy_instruction in ("cp_async", N.ASYNC_COPY)
        if inner.copy_instruction != "sync" and wanted and \
                async_copy_ok(inner, self.buffers, self.layouts, self.arch):
            inner = dataclasses.replace(inner, async_copy=True)
        self.check_cp_async(inner)
        if self.verbose:
            self.report(loops, inner)
        for outer in reversed(loops[:-1]):
            inner = dataclasses.replace(outer, vector_width=1, body=(inner,))
        return inner


def vectorize(func: N.PrimFunc, arch: str = "sm_90a", auto_async: bool = True,
              verbose: bool = False) -> N.PrimFunc:
    """Choose lanes per thread step for the parallel nests the layout pass left open,
    record on each nest's innermost loop which accesses become vector instructions
    (``For.vectors``), and mark global -> shared copies for cp.async (with ``auto_async``
    false, option ``disable_async_copy``, only those the program asked to be cp.async);
    ``verbose`` (option ``vectorize_verbose``) prints each nest's choice."""
    return _Vectorizer(func, arch, auto_async, verbose).run(func)
