"""Choose layouts: which thread holds which element of each fragment, how each shared
buffer is laid out, and how each ``T.Parallel`` nest maps onto threads.

Runs after ``lower_tile_ops`` (every copy/fill is a parallel nest by then).

Fragments
  A fragment is *replicated* (every thread holds all of it) when it is a reduction's
  output, or when some nest reads it at indices other than the nest's own loop variables
  (``mx[i]`` inside a loop over ``(i, j)``), or when a nest that writes a replicated
  fragment at its own loop variables reads it (that nest runs whole on every thread, so
  every thread needs all of what it reads: ``scale[i] = f(a[i])`` with ``scale``
  replicated makes ``a`` replicated, and so the ``T.copy`` filling ``a``; TileLang gives
  such a loop the replicated fragment's layout and the fragments it reads the loop's).
  Code outside a nest may not index fragments.  A replicated fragment that a nest over
  the rows of a T.gemm accumulator writes (``top[i, k] = arg[i]``, ``k`` a serial loop's:
  only the threads holding row ``i`` run it) moves to shared memory and the kernel is laid
  out again (``replicated_written_by_rows``).
  An ``(N,)`` fragment read as ``v[j]`` in a nest over ``(i, j)`` of a T.gemm register
  fragment, and otherwise only at ``[j]`` in ``T.Parallel(N)`` nests that fill it or
  store it (``col_fragments``), is *mma_cols*: each thread holds the columns its
  registers of that fragment cover, as TileLang lays it out by that loop.
  A ``(K, J)`` fragment read at ``[k, j]`` in a nest over ``(..., j)`` of last extent ``J``,
  ``k`` free of the nest's variables (``x[i, j] += a[k, i] * b[k, j]`` under a serial ``k``),
  is blocked with that nest's ``V`` when ``J`` is whole rounds of the threads' ``V``-element
  pieces: each thread then holds every row of the columns it meets (:meth:`fit_columns`).
  A fragment replicated by a read no layout here serves (``x[i, jj * 4 + j]`` in a nest
  over ``(i, j)``) and larger than a thread's registers (``REPLICATED_BYTES``) moves to
  shared memory when the kernel's shared memory has room (``large_replicated``): the
  nests writing it spread over the threads, and every thread reads it after a barrier.
  TileLang lays such a fragment out by the loop that reads it (or as a T.gemm register
  operand); tilecute has no layout for that, and local memory is far slower.
  A fragment read packed, ``b[i, j // c]`` in a nest over ``(i, j)`` (a dequantization's
  bytes), is blocked with ``V / c`` lanes where that nest runs ``V`` (:meth:`fit_packed`);
  where the nest walks a T.gemm register operand it moves to shared memory (small ones)
  or stays replicated.
  Every other fragment is *blocked*: the nests that touch it walk exactly its shape
  (``x[i, j]`` under ``T.Parallel(I, J)``), or walk it in row-major order through a linear
  combination of their loop variables (``b[i * J + j]``, ``b`` of shape ``(I * J,)``), and
  iteration ``f`` (row-major flat index) runs
  on thread ``(f // V) % threads`` with ``f`` in register ``(f // (V * threads)) * V + f % V``,
  so each thread touches only its own registers.  Fragments that share a nest share
  ``V``: 16 bytes of the narrowest dtype the nests touch, halved until it divides every
  nest's innermost extent and, for a fragment that is reduced, until either every row of
  ``threads * V``-element steps is whole (each thread then holds part of every row) or
  each row is held by a lane group (``row // V`` consecutive threads: a power of two up
  to 32, or whole warps), whichever comes at the wider ``V``.

  A nest whose fragment accesses all index with one permutation of its loop variables
  (``for j, i in T.Parallel(N, M): acc[i, j]``) is first reordered to walk them in their
  dims' order, as TileLang lays a loop out by the fragment it walks.  A nest that walks
  fragments at two permutations (``t[j, i] = acc[i, j]``, ``T.transpose(f, g)``) first
  routes those at the permutation other than the loop's own through a shared tile each
  (``<frag>_staged<n>``: copied in before the nest where it reads them, back after it
  where it writes them), since no layout here pairs ``(i, j)`` of one with ``(j, i)`` of
  the other on one thread; TileLang gives the other the first's layout permuted.  So too
  a T.gemm register fragment whose MMA layout is not the nest's (a tf32 GEMM's
  accumulator, on mma.sync, beside a 16-bit one's, on wgmma).
  A nest over the leading part of a T.gemm register fragment (``acc[:h, :]``) first grows
  to the fragment's shape, its body guarded by its own extents (TileLang's predicated
  loop), so that it walks the fragment's registers.

Nests
  A nest touching a blocked fragment runs with the fragment's ``V`` lanes per thread step;
  a nest writing only replicated fragments and locals runs whole on every thread
  (``replicated=True``); any other nest is distributed and left to the vectorizer.

Shared buffers
  ``swizzled`` (column ``c`` of row ``r`` stored at ``c ^ (r % 32)``) when a nest walks a
  column (its innermost loop variable indexes a dim other than the last) and the rows
  are a power of two long; ``row_major`` otherwise, and always for a buffer a TMA copy
  writes or reads without a swizzle (its descriptor, assigned earlier, moves rows as
  they are).  The TMA pass leaves the copies of buffers column-walked by its time to the
  nests, so this is for walks made later: the transposing copy of
  ``T.reduce(shared, ..., dim=0)``.

Views (``Allocate.view_of``: T.view / T.reshape)
  A fragment view and its base are one set of registers: they are replicated together or
  blocked together with one ``V`` (a blocked layout places element ``f``, the row-major
  flat index, which a reshape keeps), and never a T.gemm register layout.  A shared view
  takes the layout under which it reads the same bytes as its base
  (:func:`~.analysis.view_layout`); where there is none, a layout of its own when no
  value passes between it and its base (:func:`~.analysis.independent_view`: scratch
  reuse of the bytes), else the pass says why; a shared buffer with views is not
  swizzled for column walks.

A reduction of a replicated fragment is folded by every thread itself (a nest over its
output, replicated; the kernel is then laid out again).  The others get a shared scratch
buffer (one value per row and warp) when the block has more than one warp; a row
reduction of a T.gemm accumulator whose warps split N (``GemmWarpPolicy.FullCol``) gets
one of M x warps-along-N values, where the warps' partial rows meet; a column reduction
(dim=0, which the tile-op lowering leaves in place for a 2-D fragment) of a source in a
T.gemm register layout (an accumulator, or a fragment sharing its loops) one of N x
warps-along-M values (a wgmma warpgroup counting its 4 warps), and its output is
replicated.  A column reduction of a ``(K, J)`` fragment laid out otherwise reduces in
place where its blocked rounds are whole rows of ``J // V`` lanes (a power of two up to
a warp: :func:`_columns_in_place`, :meth:`_Kernel.column_rounds`): its output shares the
source's group (one ``V``) and is blocked, not replicated, each thread holding its ``V``
columns as TileLang lays it out; its scratch holds J x warps values.  Other column
reductions (the output replicated by other reads, no ``V`` fits, or option
``disable_in_place_column_reduce``) are first moved to a fragment with the columns last,
through a transposed shared tile (:func:`~.lower_tile_ops.move_columns_last`), and the
kernel is laid out again.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.printer import expr_str, layout_str
from ..ir.visitor import (BODY_FIELDS, StmtMutator, rebuild, replace_exprs, substitute, var_names, walk_nodes,
                          walk_stmts)
from ..runtime.dtypes import DTYPES
from ..target import VECTOR_BYTES, WARP, target
from .analysis import (LoopVars, accesses, allreduce_steps, buffers_used, independent_view,
                       is_unit, launch_sized, linear_form, mentions, parallel_nest,
                       plain_statements, squeeze, stage_bytes, tainted_lets, value_range,
                       view_bases, view_layout)
from .lower_tile_ops import move_columns_last, reduce_identity, reduce_update

def _merge_split_dims(shape, idx) -> list:
    """(extent, index) of each dim of a fragment of constant ``shape`` indexed at ``idx``,
    two adjacent dims indexed ``[e // c, e % c]`` with the second of extent ``c`` taken as
    one dim indexed ``e`` (their row-major flat index is ``e``'s)."""
    out: list = []
    dims = [(int(d.value), i) for d, i in zip(shape, idx)]
    k = 0
    while k < len(dims):
        (d, i), nxt = dims[k], dims[k + 1] if k + 1 < len(dims) else None
        if nxt is not None and isinstance(i, N.BinOp) and i.op == "floordiv" and \
                isinstance(nxt[1], N.BinOp) and nxt[1].op == "mod" and nxt[1].a == i.a and \
                isinstance(i.b, N.Const) and i.b == nxt[1].b and int(i.b.value) == nxt[0]:
            out.append((d * nxt[0], i.a))
            k += 2
            continue
        out.append((d, i))
        k += 1
    return out


# the calls through which a thread meets other threads (their partition across threads
# matters: see _Kernel.barrier_in_strided_nest)
_MEETS_THREADS = frozenset(("sync_grid",) + N.BLOCK_VOTES + N.SHUFFLES + N.WARP_VOTES +
                           N.WARP_MATCHES + N.WARP_REDUCTIONS)
MMA_LANES = 2  # MMA accumulators hold pairs of adjacent columns in adjacent registers
# a fragment replicated by reads no layout serves moves to shared memory above this size
# (256 32-bit registers a thread: past what a thread can hold, so local memory)
REPLICATED_BYTES = 1024


def packed_divisor(loops, buf: N.Buffer, idx) -> int:
    """``c`` when ``buf[idx]`` reads fragment ``buf`` packed under the nest ``loops``
    (``b[i, j // c]`` over ``(i, j)`` from 0, ``b`` of shape ``(I, J / c)``, ``c`` >= 2),
    else 0."""
    if len(idx) != buf.ndim or len(loops) != buf.ndim or not all(
            isinstance(lp.start, N.Const) and lp.start.value == 0 and
            isinstance(lp.extent, N.Const) for lp in loops):
        return 0
    last = idx[-1]
    if not (isinstance(last, N.BinOp) and last.op == "floordiv" and isinstance(last.a, N.Var)
            and last.a.name == loops[-1].var.name and isinstance(last.b, N.Const)):
        return 0
    c, extent = int(last.b.value), int(loops[-1].extent.value)
    if c < 2 or extent % c or buf.shape[-1] != N.Const(extent // c, "int32"):
        return 0
    if not all(isinstance(x, N.Var) and x.name == lp.var.name and d == lp.extent
               for x, lp, d in zip(idx[:-1], loops[:-1], buf.shape[:-1])):
        return 0
    return c


# the most iterations of a nest over which :func:`owned_registers` checks each read
OWNED_CHECK_LIMIT = 1 << 16


def int_value(e: N.Expr, env: dict):
    """The integer value of ``e`` with the variables of ``env`` bound, or None where it
    reads anything else (a load, a let, an enclosing loop's variable)."""
    if isinstance(e, N.Const):
        return int(e.value) if N.is_int(e.dtype) else None
    if isinstance(e, N.Var):
        return env.get(e.name)
    if isinstance(e, N.Cast) and N.is_int(e.dtype):
        return int_value(e.value, env)
    if isinstance(e, N.BinOp) and e.op in _INT_OPS:
        a, b = int_value(e.a, env), int_value(e.b, env)
        if a is None or b is None or e.op in ("floordiv", "mod") and b == 0:
            return None
        return _INT_OPS[e.op](a, b)
    return None


_INT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "min": min, "max": max,
            "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b}


def owned_registers(loops, buf: N.Buffer, layout: N.Layout, idx, width: int = 0) -> tuple | None:
    """The registers that ``buf[idx]`` reads, a fragment laid out ``blocked`` (``layout``,
    the program's T.Fragment), under the nest ``loops`` spread with ``width`` lanes a
    thread step (the layout's ``V`` unless given; iteration ``F = (step * threads + tid) *
    width + lane``, row-major over the loops), one per ``step * width + lane``; or None
    unless every iteration reads an
    element its own thread holds (element ``e`` lives on thread ``(e // V) % threads`` in
    register ``(e // (threads V)) V + e % V``) at a register that does not depend on the
    thread.  ``acc[i, 63 - j]`` under ``T.Parallel(64, 64)`` with ``acc`` one row a thread
    (TileLang's ``T.Fragment(..., forward_thread_fn=lambda i, j: i)``) reads register
    ``63 - lane`` of its own row.  Checked by running every iteration (constant extents,
    an index of the nest's variables and constants alone)."""
    if layout.kind != "blocked" or len(idx) != buf.ndim or \
            not all(isinstance(d, N.Const) for d in buf.shape) or \
            not all(isinstance(lp.start, N.Const) and isinstance(lp.extent, N.Const) for lp in loops):
        return None
    extents = [int(lp.extent.value) for lp in loops]
    total, v, threads = math.prod(extents), layout.vector, layout.threads
    w = width or v
    if total > OWNED_CHECK_LIMIT or total % w:
        return None
    shape = [int(d.value) for d in buf.shape]
    regs: dict[int, int] = {}
    for f in range(total):
        env, rest = {}, total
        for lp, extent in zip(loops, extents):
            rest //= extent
            env[lp.var.name] = f // rest % extent + int(lp.start.value)
        e = 0
        for d, i in zip(shape, idx):
            x = int_value(i, env)
            if x is None or not 0 <= x < d:
                return None
            e = e * d + x
        if (e // v) % threads != (f // w) % threads:
            return None  # another thread's element
        slot, reg = f // (w * threads) * w + f % w, e // (v * threads) * v + e % v
        if regs.setdefault(slot, reg) != reg:
            return None  # a register that depends on the thread
    return tuple(regs[s] for s in sorted(regs))


# the largest fragment read packed in a nest over a T.gemm operand that moves to shared
# memory (fit_packed); a larger one stays replicated
PACKED_TO_SHARED_BYTES = 16384


class _NoOwnerLayout(Exception):
    """The special accesses of a kernel cannot take TileLang's owner layouts: lay it out
    again with those fragments replicated (``cols``: a column factor's failed, else one of
    the others: first only those of that kind)."""

    def __init__(self, msg: str, cols: bool = False, packed: bool = False, demote=None):
        super().__init__(msg)
        self.cols, self.packed, self.demote = cols, packed, demote


class _NoColumnLayout(Exception):
    """A column reduction kept in place (:func:`_columns_in_place`) finds no layout that
    serves it: lay the kernel out again with it moved (``move_columns_last``)."""


class LayoutError(ValueError):
    pass


def row_index(idx):
    """The row index of an access ``m[i]`` or ``m[i, 0]`` to a row fragment (``(M,)`` or
    keepdim ``(M, 1)``), else None."""
    if len(idx) == 2 and isinstance(idx[1], N.Const) and idx[1].value == 0:
        return idx[0]
    return idx[0] if len(idx) == 1 else None


@dataclasses.dataclass
class _Nest:
    loops: list
    accesses: list
    region: tuple = ()  # the threads it maps onto: (first thread, count)
    # the `if` on the thread index it runs under that selects threads other than its
    # region's (`if tx < 16:`, `if tx == 0:`), if any (see _Kernel.narrowing)
    narrowed: object = None

    @property
    def vars(self):
        return tuple(lp.var.name for lp in self.loops)

    @property
    def extents(self):
        return tuple(lp.extent for lp in self.loops)

    @property
    def lets(self):
        """The variables its body binds by ``Let`` (they may stand for its own)."""
        return tuple(s.var.name for s in walk_stmts(self.loops[-1].body) if isinstance(s, N.Let))

    def identity(self, indices) -> bool:
        return len(indices) == len(self.loops) and all(
            isinstance(i, N.Var) and i.name == v for i, v in zip(indices, self.vars))


def _form(nest: _Nest) -> str:
    """The tile op a nest was made from (``T.copy(row[0:64], tile[3:4, 0:64])``, from its
    ``Loc.form``), or ``""`` for the program's own T.Parallel loop."""
    loc = nest.loops[0].loc
    return loc.form if loc is not None else ""


def _this(nest: _Nest) -> str:
    """``this T.Parallel loop``, or ``this T.copy(...)`` for a nest made from one, as errors
    name it."""
    return f"this {_form(nest) or 'T.Parallel loop'}"


class _Kernel:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, specials=True, packed=True,
                 columns: frozenset = frozenset()):
        self.func, self.scope = func, scope
        # ids of the column reductions reduced in place (:func:`_columns_in_place`): their
        # output is blocked with their source's V, not replicated
        self.columns_in_place = columns
        self.allow_packed = packed  # fragments read packed (fit_packed)
        self.threads = scope.num_threads
        # fragments read at an element another thread's layout gives this thread (a row's
        # value ``x[i]`` in a nest over ``(i, j)``, ``b[k, j]`` at an outer ``k``): with
        # ``specials``, such accesses are laid out as TileLang lays them (:meth:`owner_vectors`)
        # instead of making the fragment replicated (``"rows"``: all but the column
        # factors, ``col``; ``"cols"``: those alone); (nest, buffer, kind) each
        self.allow_specials = specials
        self.specials: list[tuple] = []
        self.special_ids: set[tuple] = set()
        # (nest id, fragment): the nest reads the program-laid-out fragment at elements its
        # own threads hold, not at its own (``acc[i, 63 - j]``: :func:`owned_registers`);
        # the fragment is walked by the nest (one layout), the code generator picks the
        # registers
        self.owned: set[tuple] = set()
        # nest id -> its lanes a thread step, for a nest whose only fragment accesses are
        # such reads at another width than the fragments' (``acc[i, j + 8]`` under
        # ``T.Parallel(64, 56)``, ``acc`` a row a thread: 56 lanes, a row a thread too)
        self.owned_nests: dict[int, int] = {}
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs: dict[str, N.Allocate] = {}
        self.nests: list[_Nest] = []
        self.reduces: list[N.Reduce] = []
        # the fragments some T.reduce_* reduces (anywhere in the kernel: special_access)
        self.folded_srcs = {r.src for r in walk_stmts(scope.body) if isinstance(r, N.Reduce)}
        self.replicated: set[str] = set()
        self.why: dict[str, N.Stmt] = {}  # fragment -> a statement that makes it replicated
        # fragment -> the replicated fragment written by the nest (``why``) that reads it
        self.spread: dict[str, str] = {}
        self.column_walked: set[str] = set()
        self.scanned: set[str] = set()  # shared buffers a T.cumsum scans: row-major
        # shared buffers a TMA copy writes or reads: laid out as its descriptor says
        # (row-major unless TMA-swizzled), whatever nests walk them
        self.tma_copied = {r.buffer for s in walk_stmts(scope.body) if isinstance(s, N.TmaCopy)
                           for r in (s.src, s.dst)}
        # and those the program's raw cp.async (T.ptx_cp_async) write: n contiguous
        # elements from one address, which the column swizzle would scatter
        self.tma_copied |= {s.value.args[0].buffer for s in walk_stmts(scope.body)
                            if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call)
                            and s.value.name == "ptx_cp_async"}
        # and those a copy must fill by cp.async (T.async_copy, T.copy(...,
        # prefer_instruction="cp_async")): 4-16 contiguous bytes per piece, likewise
        self.tma_copied |= {b for s in walk_stmts(scope.body) if isinstance(s, N.For)
                            and s.kind == "parallel" and parallel_nest(s)[-1].copy_instruction
                            in ("cp_async", N.ASYNC_COPY)
                            for b, _, w in accesses(parallel_nest(s)[-1].body) if w}
        self.reducers: set[str] = set()  # T.alloc_reducer fragments
        # fragments whose layout the program gave (T.annotate_layout with a T.Fragment the
        # frontend matched, or layout=): blocked or replicated
        self.given: dict[str, N.Layout] = {}
        self.rows = self.row_fragments()  # fragment -> its mma_rows layout
        # the threads the statements being collected map onto: (first thread, count), the
        # block's or a T.ws region's
        self.region = (0, self.threads)
        self.frag_region: dict[str, tuple] = {}  # fragment -> the T.ws region its nests run in
        self.thread_vars: set[str] = set()  # Let names bound to the thread index
        self.direct_writes: set[str] = set()  # buffers written outside any nest
        self.per_thread: set[str] | None = None  # (thread_dependent)
        self.narrowed = None  # the enclosing `if` that selects some of the region's threads
        self.bases = view_bases(scope.body)  # view -> the buffer it views
        self.cols = self.col_fragments()  # fragment -> its mma_cols layout
        # accumulator -> the T.gemm that runs it on SIMT (select_mma): no MMA layout
        self.simt_c = {s.c: s for s in walk_stmts(scope.body)
                       if isinstance(s, N.Gemm) and s.family == "simt"}

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise LayoutError(f"{where}prim_func '{self.func.name}': {msg}")

    def scope_of(self, name: str) -> str:
        return self.buffers[name].scope

    # ---- row statistics of accumulators -------------------------------------------------
    def row_fragments(self) -> dict[str, N.Layout]:
        """The ``(M,)`` fragments that live with the rows of an ``(M, N)`` T.gemm
        accumulator: a row reduction's output, a fragment read as ``m[i]`` in a nest over
        the accumulator's ``(i, j)``, and (transitively) a fragment of that shape that
        shares a ``T.Parallel(M)`` nest with one."""
        allocs = {s.buffer.name: s for s in walk_stmts(self.scope.body) if isinstance(s, N.Allocate)}

        def frag(name):
            a = allocs.get(name)
            return a.buffer if a is not None and a.buffer.scope == "fragment" else None

        def acc_layout(name):
            a = allocs.get(name)
            lay = a.layout if a is not None else None
            return lay if lay is not None and lay.kind == "mma" and lay.operand == "" else None

        def rows_of(layout: N.Layout) -> N.Layout:
            return N.Layout("mma_rows", threads=layout.threads, mma=layout.mma, warps=layout.warps,
                            first_thread=layout.first_thread)

        rows: dict[str, N.Layout] = {}
        extent: dict[str, int] = {}

        def add(name, layout, m, s):
            buf = frag(name)  # (m,), or keepdim (m, 1) (a row reduction's (X, 1) output)
            if buf is None or buf.shape[0] != N.Const(m, "int32") or \
                    buf.shape[1:] not in ((), (N.Const(1, "int32"),)):
                return False
            if name in rows and rows[name] != layout:
                self.fail(s, f"fragment '{name}' holds row statistics of two T.gemm accumulators "
                             f"with different register layouts ({_partition(rows[name])} and "
                             f"{_partition(layout)}): a thread holds other rows of each.  Give "
                             "the T.gemms one family and arrangement (the same policy, tiles the "
                             "block's warps cut alike; a T.gemm runs on mma.sync where wgmma "
                             "cannot tile it or read its operands: docs/tile-ops.md, \"T.gemm\")")
            new = name not in rows
            rows[name], extent[name] = layout, m
            return new

        nests = [parallel_nest(s) for s in walk_stmts(self.scope.body)
                 if isinstance(s, N.For) and s.kind == "parallel"]
        nests = [n for i, n in enumerate(nests) if not any(n[0] in m[1:] for m in nests)]
        # 2-D fragments a nest walks at the same (i, j) as an accumulator (``tmp[i, j] =
        # acc[i, j] * k[i, j]``) take its register layout (decide's groups): reducing their
        # rows gives row statistics too, as TileLang lays out a reduction's output by its
        # source's fragment layout
        like: dict[str, N.Layout] = {}
        for a in allocs:
            if acc_layout(a) is not None:
                like[a] = acc_layout(a)
        grown = True
        while grown:
            grown = False
            for loops in nests:
                if len(loops) != 2:
                    continue
                names = [lp.var.name for lp in loops]
                walked = [b for b, idx, _ in accesses(loops[-1].body)
                          if frag(b) is not None and frag(b).ndim == 2
                          and [getattr(x, "name", None) for x in idx] == names]
                lay = next((like[b] for b in walked if b in like), None)
                for b in walked:
                    if lay is not None and b not in like and allocs[b].layout is None:
                        like[b], grown = lay, True
        for r in walk_stmts(self.scope.body):
            if isinstance(r, N.Reduce) and like.get(r.src) is not None:
                src = allocs[r.src].buffer
                if src.ndim == 2 and r.dim in (1, -1):
                    add(r.dst, rows_of(like[r.src]), int(src.shape[0].value), r)
        changed = True
        while changed:
            changed = False
            for loops in nests:
                names = [lp.var.name for lp in loops]
                accs = accesses(loops[-1].body)
                if len(loops) == 2:  # over an accumulator (i, j): m[i] reads its row
                    lay = next((like[b] for b, idx, _ in accs if b in like
                                and [getattr(x, "name", None) for x in idx] == names), None)
                    if lay is not None:
                        m = int(loops[0].extent.value)
                        for b, idx, _ in accs:
                            if getattr(row_index(idx), "name", None) == names[0]:
                                changed |= add(b, rows_of(lay), m, loops[0])
                elif len(loops) == 1:  # T.Parallel(M) over row fragments
                    known = [rows[b] for b, idx, _ in accs if b in rows]
                    if known:
                        m = int(loops[0].extent.value)
                        for b, idx, _ in accs:
                            if getattr(row_index(idx), "name", None) == names[0]:
                                changed |= add(b, known[0], m, loops[0])
        return rows

    # ---- column values of MMA register fragments ---------------------------------------
    def col_fragments(self) -> dict[str, N.Layout]:
        """The ``(N,)`` fragments that live with the columns of an ``(M, N)`` fragment in a
        T.gemm register layout (an accumulator or an A operand), each thread holding the
        columns its registers cover (``mma_cols``), as TileLang lays out a fragment read
        as ``v[j]`` in a loop over ``(i, j)`` of one (a per-column decay or scale:
        ``cb[i, j] *= dt[j]``).  Replicated instead, every thread would hold all ``N`` and
        a loop over the MMA's registers would index them at the register's column, known
        only at run time: local memory.

        A fragment qualifies when every access of it is in a ``T.Parallel`` nest from 0 of
        one of two forms: a read ``v[j]`` in a nest over ``(i, j)`` that walks a T.gemm
        register fragment of extent ``N`` in ``j`` at ``(i, j)`` (its layout gives ``v``'s),
        or ``v[j]`` in a ``T.Parallel(N)`` nest (a ``T.copy`` filling it) whose other
        fragment accesses are other such fragments at ``[j]`` or reads at constant
        indices, which writes nothing else but shared or global memory, holds only
        stores and Lets, and calls nothing with an effect (each column's holders then run
        its iteration alike: the same values, the same stores).  Fragments meeting in such
        a 1-D nest need one layout; one with no 2-D read, or two layouts, or any other
        use (outside a nest, a reduction, a view, a layout of the program's) stays as
        before (blocked or replicated)."""
        body = self.scope.body
        allocs = {s.buffer.name: s for s in walk_stmts(body) if isinstance(s, N.Allocate)}
        views = set(self.bases) | set(self.bases.values())
        cand = {n for n, a in allocs.items() if a.buffer.scope == "fragment"
                and a.buffer.ndim == 1 and isinstance(a.buffer.shape[0], N.Const)
                and not a.reducer and a.layout is None and not a.view_of and n not in views
                and n not in self.rows}
        if not cand:
            return {}
        total: dict[str, int] = {}  # candidate -> its loads and stores anywhere
        for node in walk_nodes(body):
            if isinstance(node, (N.Load, N.Store)):
                total[node.buffer] = total.get(node.buffer, 0) + 1
                continue
            if isinstance(node, N.Buffer):
                continue
            for f in dataclasses.fields(node):  # named otherwise (a tile op, a region ...)
                v = getattr(node, f.name)
                for x in (v if isinstance(v, tuple) else (v,)):
                    if isinstance(x, str):
                        cand.discard(x)
        def mma_of(name):
            a = allocs.get(name)
            lay = a.layout if a is not None else None
            return lay if lay is not None and lay.kind == "mma" else None

        nests = [parallel_nest(s) for s in walk_stmts(body)
                 if isinstance(s, N.For) and s.kind == "parallel"]
        nests = [n for n in nests if not any(n[0] in m[1:] for m in nests)]
        while cand:
            # a candidate at another index, or of another extent, is out on its own (a
            # (1,) fragment read at [0] beside the others stays replicated); the nests
            # are then judged without it
            odd = set()
            for loops in nests:
                j = loops[-1].var.name
                odd |= {b for b, idx, _ in accesses(loops[-1].body) if b in cand and not (
                    len(idx) == 1 and isinstance(idx[0], N.Var) and idx[0].name == j
                    and allocs[b].buffer.shape[0] == loops[-1].extent)}
            if odd:
                cand -= odd
                continue
            seen: dict[str, int] = {}  # candidate -> its accesses in qualifying nests
            source: dict[str, set] = {}  # candidate -> the layouts its 2-D reads give
            links: list[list[str]] = []  # candidates sharing a 1-D nest
            dropped: set[str] = set()
            for loops in nests:
                accs = accesses(loops[-1].body)
                mine = [(b, idx, w) for b, idx, w in accs if b in cand]
                if not mine:
                    continue
                names = [lp.var.name for lp in loops]
                j = names[-1]
                ok = all(isinstance(lp.start, N.Const) and lp.start.value == 0 and
                         isinstance(lp.extent, N.Const) for lp in loops) and \
                    loops[-1].loop_layout is None and plain_statements(loops[-1].body)
                if ok and len(loops) == 2:
                    walked = [mma_of(b) for b, idx, _ in accs if mma_of(b) is not None
                              and [getattr(x, "name", None) for x in idx] == names]
                    ok = bool(walked) and not any(w for _, _, w in mine)
                    if ok:
                        lay = walked[0]
                        cols = N.Layout("mma_cols", threads=lay.threads, mma=lay.mma,
                                        warps=lay.warps, first_thread=lay.first_thread)
                        for b, _, _ in mine:
                            source.setdefault(b, set()).add(cols)
                elif ok and len(loops) == 1:
                    for b, idx, w in accs:
                        if b in cand:
                            continue
                        scope = allocs[b].buffer.scope if b in allocs else self.scope_of(b)
                        if scope == "fragment" and (w or not all(isinstance(x, N.Const) for x in idx)) \
                                or scope not in ("fragment", "shared", "global") and w:
                            ok = False
                    if ok:
                        links.append(sorted({b for b, _, _ in mine}))
                else:
                    ok = False
                if ok:
                    for b, _, _ in mine:
                        seen[b] = seen.get(b, 0) + 1
                else:
                    dropped |= {b for b, _, _ in mine}
            dropped |= {b for b in cand if seen.get(b, 0) != total.get(b, 0)}
            # the 1-D nests join fragments into groups of one layout
            group = {b: b for b in cand}

            def find(x):
                while group[x] != x:
                    x = group[x]
                return x
            for names in links:
                for b in names[1:]:
                    group[find(b)] = find(names[0])
            layouts: dict[str, set] = {}
            for b in cand:
                layouts.setdefault(find(b), set()).update(source.get(b, ()))
            dropped |= {b for b in cand if len(layouts[find(b)]) != 1}
            # a group loses every member when one goes (its 1-D nests then write a
            # replicated fragment from a column one, or the reverse)
            dropped |= {b for b in cand if find(b) in {find(d) for d in dropped if d in cand}}
            if not dropped & cand:
                return {b: next(iter(layouts[find(b)])) for b in cand}
            cand -= dropped
        return {}

    # ---- collect ------------------------------------------------------------------------
    def collect(self, body, top: bool = True) -> None:
        for s in body:
            if isinstance(s, N.Allocate):
                self.buffers[s.buffer.name] = s.buffer
                self.allocs[s.buffer.name] = s
                if s.reducer:  # every thread holds a copy of every element
                    self.reducers.add(s.buffer.name)
                    self.make_replicated(s.buffer.name, s)
                if s.buffer.scope == "fragment" and not s.view_of and s.layout is not None \
                        and s.layout.kind in ("blocked", "replicated"):
                    self.given[s.buffer.name] = s.layout
                    if s.layout.kind == "replicated":
                        self.make_replicated(s.buffer.name, s)
                if s.buffer.scope == "shared" and not top:
                    self.fail(s, f"shared buffer '{s.buffer.name}' must be allocated at the top "
                                 "level of its T.Kernel block, not inside a loop or if")
            elif isinstance(s, N.For) and s.kind == "parallel":
                loops = parallel_nest(s)
                for a in walk_stmts(loops[-1].body):
                    if isinstance(a, N.Allocate):  # (the passes lay out and vectorize a nest
                        # from the buffers allocated outside it; this one was a KeyError)
                        self.fail(a, f"{a.buffer.scope} buffer '{a.buffer.name}' (T.alloc_*) "
                                     "allocated inside a T.Parallel loop is not supported by "
                                     "tilecute: allocate it before the loop")
                nest = _Nest(loops, accesses(loops[-1].body), self.region, self.narrowed)
                self.nests.append(nest)
                self.note_region(nest, s)
                for lp in loops:
                    if not (isinstance(lp.extent, N.Const) and isinstance(lp.start, N.Const)):
                        if any(self.scope_of(b) == "fragment" for b, _, _ in nest.accesses):
                            self.fail(lp, "a T.Parallel loop over fragments needs constant "
                                          "extents, or a run-time one whose variable indexes "
                                          "a fragment dim as it is (f[i]: the loop then walks "
                                          "that dim, guarded, as TileLang's)")
                for b, idx, write in nest.accesses:
                    if b in self.rows:
                        self.check_row_access(nest, b, idx, write, s)
                    elif b in self.cols:
                        pass  # read at the column of the MMA fragment walked (col_fragments)
                    elif self.scope_of(b) == "fragment" and not self.identity_shape(nest, b, idx):
                        kind = self.special_access(nest, b, idx, write)
                        width = self.owned_read(nest, b, idx) if kind is None and not write else 0
                        if width and width == self.given[b].vector:
                            self.owned.add((id(nest), b))
                        elif width:  # (the nest runs its own lanes: owned_width)
                            self.owned_nests[id(nest)] = width
                            self.specials.append((nest, b, "owned"))
                            self.special_ids.add((id(nest), b))
                        elif kind is None:
                            self.make_replicated(b, s)
                        else:
                            self.specials.append((nest, b, kind))
                            self.special_ids.add((id(nest), b))
                    if self.scope_of(b) == "shared" and len(idx) >= 2 and \
                            any(mentions(i, nest.vars[-1]) for i in idx[:-1]):
                        self.column_walked.add(b)
            elif isinstance(s, N.For):
                self.collect(s.body, top=False)
            elif isinstance(s, N.WarpGroups):
                self.region = (s.first_thread, s.num_threads)
                try:
                    self.collect(s.body, top=False)
                finally:
                    self.region = (0, self.threads)
            elif isinstance(s, N.While):
                self.direct(accesses([dataclasses.replace(s, body=())]), s)
                self.collect(s.body, top=False)
            elif isinstance(s, N.Scan):
                self.scanned |= {s.src, s.dst}
            elif isinstance(s, N.If):
                self.direct(accesses([dataclasses.replace(s, then=(), orelse=())]), s)
                saved = self.narrowed
                for branch, negate in ((s.then, False), (s.orelse, True)):
                    if saved is None and self.narrowing(s.cond, negate):
                        self.narrowed = s
                    try:
                        self.collect(branch, top=False)
                    finally:
                        self.narrowed = saved
            elif isinstance(s, (N.FinalizeReducer, N.Scan)) and self.region != (0, self.threads):
                what = "T.finalize_reducer" if isinstance(s, N.FinalizeReducer) else \
                    f"T.cum{s.kind}"
                self.fail(s, f"{what} inside a thread region (T.ws, or an `if` on the thread "
                             f"index, threads {self.region[0]}..{sum(self.region) - 1}) is not "
                             "supported: tilecute's cross-warp step of it synchronises the "
                             "whole block")
            elif isinstance(s, N.Reduce):
                # in a region the source's rows reduce within the region's threads (its
                # warps meet on the region's named barrier, codegen)
                if self.narrowed is not None and s.dst not in self.rows:
                    self.fail(s, f"T.reduce_{s.kind} runs under {self.narrowed_text()}, "
                                 f"{self.narrowed_why()}")
                self.reduces.append(s)
                if id(s) in self.columns_in_place:
                    self.note_fragment_region(s.src, s)
                    self.note_fragment_region(s.dst, s)
                elif s.dst not in self.rows:
                    self.make_replicated(s.dst, s)
                    self.note_fragment_region(s.src, s)
            elif isinstance(s, (N.Gemm, N.SegmentReduce)):
                pass  # its fragment has the MMA layout (gemm pass); a segment reduce's
                # output is shared
            elif isinstance(s, N.Let):
                if self.is_thread_index(s.value):
                    self.thread_vars.add(s.var.name)
                self.direct(accesses([s]), s)
            else:
                self.direct(accesses([s]), s)

    def is_thread_index(self, e) -> bool:
        """``T.get_thread_binding()`` or a Let name bound to it (through integer casts)."""
        while isinstance(e, N.Cast) and N.is_int(e.dtype):
            e = e.value
        return isinstance(e, N.Var) and e.name in self.thread_vars or \
            isinstance(e, N.Call) and e.name == "thread_idx" and e.args == (N.Const(0, "int32"),)

    def narrowing(self, cond, negate: bool) -> bool:
        """Does the branch of ``cond`` (its ``else``: ``negate``) select some of the
        region's threads by comparing the thread index with constants (``tx < 16``, ``tx ==
        0``, ``and`` of such; the ``else`` of one order comparison)?  TileLang's layout
        inference plans the tile ops of such a branch for the threads it selects (its
        analyzer bounds the thread index there); the frontend makes the branches that
        select whole warps of the block regions, so what is left selects part of a warp,
        or sits inside a region or inside a branch some threads take."""
        first, n = self.region
        flip = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}

        def rng(e, neg):
            if isinstance(e, N.Logic) and e.op == "and" and not neg:
                lo, hi = first, first + n
                for x in e.args:
                    a, b = rng(x, False)
                    lo, hi = max(lo, a), min(hi, b)
                return lo, hi
            if not isinstance(e, N.Cmp) or e.op == "ne" or neg and e.op == "eq":
                return first, first + n
            op, a, b = e.op, e.a, e.b
            if self.is_thread_index(b) and isinstance(a, N.Const):
                op, a, b = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}.get(op, op), b, a
            if not (self.is_thread_index(a) and isinstance(b, N.Const) and
                    isinstance(b.value, int) and not isinstance(b.value, bool)):
                return first, first + n
            op, c = (flip[op] if neg else op), int(b.value)
            lo, hi = {"lt": (first, c), "le": (first, c + 1), "gt": (c + 1, first + n),
                      "ge": (c, first + n), "eq": (c, c + 1)}[op]
            return max(lo, first), min(hi, first + n)
        return rng(cond, negate) != (first, first + n)

    def narrowed_text(self) -> str:
        s = self.narrowed
        return f"`if {expr_str(s.cond)}:` ({s.loc or 'a condition on the thread index'})"

    def narrowed_why(self) -> str:
        lo, n = self.region
        where = "the block's" if self.region == (0, self.threads) else \
            f"the region's ({lo}..{lo + n - 1})"
        return (f"which selects some of {where} threads by the thread index: TileLang plans "
                "the tile ops of such a branch for the threads it selects, tilecute only for "
                "a branch that selects whole warps of the block (a thread region); write the "
                "branch over whole warps (`if tx < 32:`), or its loop as a T.serial loop "
                "each selected thread runs")

    def note_region(self, nest: _Nest, s) -> None:
        """The fragments a nest walks live in the threads of the nest's T.ws region (or
        the block's): one thread set per fragment, a T.gemm register layout's own."""
        for b, _, _ in nest.accesses:
            if self.scope_of(b) != "fragment" or b in self.reducers:
                continue
            self.note_fragment_region(b, s)

    def note_fragment_region(self, b: str, s) -> None:
        """Fragment ``b`` is used by the statement ``s`` of the region being collected."""
        have = self.frag_region.setdefault(b, self.region)
        layout = self.allocs[b].layout if b in self.allocs else None
        if layout is not None and layout.kind == "mma":
            have = (layout.first_thread, layout.threads)
        if have != self.region:
            def text(r):
                return "the whole block" if r == (0, self.threads) else \
                    f"the thread region of threads {r[0]}..{r[0] + r[1] - 1}"
            self.fail(s, f"fragment '{b}' is used by {text(self.region)} here and by "
                         f"{text(have)} elsewhere; a fragment lives in the registers of one "
                         "set of threads")

    def region_threads(self, frag: str) -> int:
        """The threads fragment ``frag`` is laid out over: its region's, else the block's."""
        return self.frag_region.get(frag, (0, self.threads))[1]

    def check_row_access(self, nest: _Nest, b: str, idx, write: bool, s) -> None:
        """A row fragment is walked by ``T.Parallel(M)`` at ``i`` or read at ``i`` in a
        nest over its accumulator's ``(i, j)`` (a keepdim ``(M, 1)`` one at ``[i, 0]``)."""
        i = row_index(idx) if len(idx) == self.buffers[b].ndim else None
        ok = isinstance(i, N.Var) and i.name == nest.vars[0] and \
            isinstance(nest.loops[0].start, N.Const) and nest.loops[0].start.value == 0
        if ok and len(nest.loops) == 2 and write:
            self.fail(s, f"fragment '{b}' holds one value per row of a T.gemm accumulator; a "
                         f"T.Parallel loop over the accumulator's (i, j) may read '{b}[i]' but not "
                         f"write it (reduce the rows with T.reduce_*)")
        if not ok or len(nest.loops) > 2:
            self.fail(s, f"fragment '{b}' holds one value per row of a T.gemm accumulator, so it "
                         f"is indexed by the row variable of a T.Parallel loop: "
                         f"`for i in T.Parallel({self.buffers[b].shape[0]})` or `for i, j in "
                         f"T.Parallel(M, N)` over the accumulator")

    def direct(self, accs, s) -> None:
        """Accesses outside any nest: every thread runs them, so a fragment indexed there
        is replicated (every thread holds all of it; a reduction's output already is)."""
        for b, _, w in accs:
            if w:
                self.direct_writes.add(b)
            if b in self.rows:
                self.fail(s, f"fragment '{b}' holds one value per row of a T.gemm accumulator; "
                             "index it inside a T.Parallel loop over its rows")
            if self.scope_of(b) == "fragment":
                self.make_replicated(b, s)

    def identity_shape(self, nest: _Nest, b: str, idx) -> bool:
        """Does the nest walk fragment ``b`` element by element, in its row-major order?
        Unit dims of ``b`` indexed by 0 or by a unit loop's variable do not count, nor do
        the nest's unit loops (a (1, 256) fragment walked by ``T.Parallel(256)`` at
        ``[0, i]``; a (256,) one walked by ``T.Parallel(1, 256)`` at ``[j]``): the
        element's row-major flat index is then the iteration's."""
        if not all(isinstance(lp.start, N.Const) and lp.start.value == 0 for lp in nest.loops):
            return False
        unit_vars = {lp.var.name for lp in nest.loops if is_unit(lp.extent)}
        loops = [lp for lp in nest.loops if not is_unit(lp.extent)]
        buf = self.buffers[b]
        if len(idx) != len(buf.shape):
            return False
        kept = [(d, i) for d, i in zip(buf.shape, idx)
                if not (is_unit(d) and (isinstance(i, N.Const) and i.value == 0 or
                                        isinstance(i, N.Var) and i.name in unit_vars))]
        if len(kept) == len(loops) and all(
                isinstance(i, N.Var) and i.name == lp.var.name and d == lp.extent
                for (d, i), lp in zip(kept, loops)):
            return True
        return self.flat_identity(nest, b, idx)

    def walks_slice(self, nest: _Nest, b: str, idx) -> bool:
        """Does the nest write one element of ``b`` per iteration, each of its non-unit loop
        variables indexing its own dim of ``b`` (of the loop's extent) and the other dims at
        an index the nest does not change (``scale[h, k]`` under ``T.Parallel(H)`` inside a
        serial loop over ``k``)?  Run whole on every thread, such a nest writes a slice of a
        replicated fragment without conflicts (TileLang 0.1.15 lays the loop out by the
        fragment's layout and replicates the fragments it reads)."""
        if not all(isinstance(lp.start, N.Const) and lp.start.value == 0 for lp in nest.loops):
            return False
        buf = self.buffers[b]
        if len(idx) != len(buf.shape):
            return False
        loops = {lp.var.name: lp for lp in nest.loops if not is_unit(lp.extent)}
        bound = {s.var.name for s in walk_stmts(nest.loops[-1].body) if isinstance(s, N.Let)}
        seen = set()
        for d, i in zip(buf.shape, idx):
            if isinstance(i, N.Var) and i.name in loops:
                if i.name in seen or d != loops[i.name].extent:
                    return False
                seen.add(i.name)
            elif any(mentions(i, v) for v in (*(lp.var.name for lp in nest.loops), *bound)):
                return False
        return len(seen) == len(loops) and len(seen) < len(idx)

    def flat_identity(self, nest: _Nest, b: str, idx) -> bool:
        """Does the nest walk fragment ``b`` in its row-major order through an index that
        is a linear combination of the loop variables (``b[i * N + j]`` under
        ``T.Parallel(M, N)`` with ``b`` of shape ``(M * N,)``; TileLang infers such a
        fragment's layout from the loop's index map)?  Two adjacent dims indexed
        ``[e // c, e % c]``, the second of extent ``c``, count as one index ``e`` over both
        (``x[i, j // C, j % C]`` of an ``(I, G, C)`` fragment under ``T.Parallel(I, G * C)``:
        a reshaped walk).  The element's row-major flat index is then the iteration's, so
        the blocked layout places it in the iteration's register.  Not for T.gemm register
        fragments (their nests walk (i, j))."""
        buf = self.buffers[b]
        if self.mma_layout(b) is not None or \
                not all(isinstance(d, N.Const) for d in buf.shape) or \
                not all(isinstance(lp.extent, N.Const) for lp in nest.loops):
            return False
        if math.prod(int(d.value) for d in buf.shape) != \
                math.prod(int(lp.extent.value) for lp in nest.loops):
            return False
        flat: dict = {}
        stride = 1
        for d, i in reversed(_merge_split_dims(buf.shape, idx)):
            form = linear_form(i)
            if form is None:
                return False
            for v, c in form.items():
                flat[v] = flat.get(v, 0) + c * stride
            stride *= d
        want: dict = {}
        stride = 1
        for lp in reversed(nest.loops):
            if not is_unit(lp.extent):
                want[lp.var.name] = stride
            stride *= int(lp.extent.value)
        return {v: c for v, c in flat.items() if c} == want

    def owned_read(self, nest: _Nest, b: str, idx) -> int:
        """The lanes a thread step (``width``) at which the nest reads fragment ``b``, which
        the program laid out blocked over the threads (T.annotate_layout's T.Fragment), at
        elements each iteration's own thread holds under that layout
        (:func:`owned_registers`), or 0.  TileLang proves the same through the layout's
        thread map and reads the thread's own registers.  The fragment's ``V`` first (the
        nest then walks it as its own); else the nest's innermost extent where every
        fragment the nest touches is so read (TileLang lays the loop out by the fragment:
        one row of iterations a thread)."""
        lay = self.given.get(b)
        if lay is None or lay.kind != "blocked" or b in self.bases or b in self.bases.values():
            return 0
        if owned_registers(nest.loops, self.buffers[b], lay, idx) is not None:
            return lay.vector
        width = int(nest.loops[-1].extent.value) if isinstance(nest.loops[-1].extent, N.Const) else 0
        frags = [(x, i, w) for x, i, w in nest.accesses if self.scope_of(x) == "fragment"]
        if not width or nest.loops[-1].loop_layout is not None or nest.region != \
                (lay.first_thread, lay.threads) or any(
                w or x not in self.given or self.given[x].kind != "blocked" or
                owned_registers(nest.loops, self.buffers[x], self.given[x], i, width) is None
                for x, i, w in frags):
            return 0
        return width

    def walked(self, nest: _Nest, among, special: bool = False) -> list[str]:
        """The fragments of ``among`` the nest walks at its own elements (sorted), or with
        ``special`` those it reads at elements the owner layouts give it
        (:meth:`special_access`)."""
        return sorted({b for b, _, _ in nest.accesses if b in among
                       and ((id(nest), b) in self.special_ids) == special})

    def special_access(self, nest: _Nest, b: str, idx, write: bool):
        """``"row"``: an ``(I,)`` fragment read at ``[i]`` in a nest over ``(i, j)`` with
        extents ``(I, J)`` (a row's factor: ``o[i, j] += p[i, j] * scale[i]``); ``"outer"``:
        a ``(K, J)`` fragment at ``[k, j]`` in a nest over ``j`` (extent ``J``), ``k`` not a
        variable of the nest (an enclosing loop's: ``lse[k, j]`` for the split ``k``);
        ``"col"``: a ``(J,)`` fragment read at ``[j]`` in a nest over ``(..., j)`` whose
        last extent is ``J`` (a column's factor: ``y[i, j] = x[i, j] * w[j]``), or a
        ``(K, J)`` one read at ``[k, j]`` there, ``k`` free of the nest's variables (an
        inner serial loop's: ``x[i, j] += a[k, i] * b[k, j]``), also in a nest over ``j``
        alone, ``k`` an enclosing loop's (mHC pre's ``for k in T.serial(4): ... ol[j] += pre
        * xl[k, j]``: TileLang lays ``xl`` out by the copy that fills it, 4 columns a thread,
        and the nest reads them in place) unless ``T.reduce`` reduces it (``"outer"`` then,
        as where the columns are not whole rounds of the threads' pieces).
        TileLang lays them out by their loops: thread ``i`` of the block holds row ``i``
        (the nest's ``(I, J)`` fragments whole rows a thread, ``x`` one element), column
        ``j`` of ``b``, and of ``w`` the columns the thread meets in every row of ``w``
        (:meth:`fit_columns`).
        None for any other access, or without ``specials``."""
        if not self.allow_specials or self.mma_layout(b) is not None or b in self.reducers \
                or b in self.bases or b in self.bases.values() or \
                not all(isinstance(lp.start, N.Const) and lp.start.value == 0 and
                        isinstance(lp.extent, N.Const) for lp in nest.loops):
            return None
        buf = self.buffers[b]
        if len(idx) != buf.ndim or not all(isinstance(d, N.Const) for d in buf.shape):
            return None
        owners, cols = self.allow_specials in (True, "rows"), self.allow_specials in (True, "cols")
        if buf.ndim == 1 and len(nest.loops) == 2 and not write and owners and \
                isinstance(idx[0], N.Var) and idx[0].name == nest.vars[0] and \
                buf.shape[0] == nest.loops[0].extent:
            return "row"
        if buf.ndim == 2 and len(nest.loops) == 1 and isinstance(idx[1], N.Var) and \
                idx[1].name == nest.vars[0] and buf.shape[1] == nest.loops[0].extent and \
                not mentions(idx[0], nest.vars[0]):
            inner = {t.var.name for t in walk_stmts(nest.loops[0].body) if isinstance(t, N.For)}
            if cols and not write and b not in self.folded_srcs and \
                    not any(mentions(idx[0], v) for v in inner):
                # (k an enclosing loop's: its columns blocked with the nest's V, every row
                # of them a thread, as a 2-D nest's b[k, j]; where that fails, or for a k
                # of a loop inside the nest (a column fold), one column a thread: "outer")
                return "col"
            return "outer" if owners else None
        if buf.ndim == 1 and len(nest.loops) >= 2 and not write and cols \
                and isinstance(idx[0], N.Var) and idx[0].name == nest.vars[-1] and \
                buf.shape[0] == nest.loops[-1].extent:
            return "col"
        if buf.ndim == 2 and len(nest.loops) >= 2 and not write and cols and \
                isinstance(idx[1], N.Var) and idx[1].name == nest.vars[-1] and \
                buf.shape[1] == nest.loops[-1].extent and \
                not any(mentions(idx[0], v) for v in nest.vars + nest.lets):
            return "col"  # (b[k, j]: every row of the columns the thread meets)
        if owners and self.allow_packed and not write and packed_divisor(nest.loops, buf, idx):
            return "packed"
        return None

    def owner_vectors(self, find, parent) -> dict:
        """The vector width each group with a special access must take (``row``: the
        nest's ``(I, J)`` fragments ``J``, the read fragment's 1; ``outer``: the read
        fragment's and the nest's 1), or raises :class:`_NoOwnerLayout` when they cannot
        (widths that disagree, extents that are not whole rounds of the threads, a group
        with a T.gemm layout, a given layout or a row reduction its width cannot take:
        :meth:`reduces_one_lane`)."""
        forced: dict[str, int] = {}

        def force(root, v):
            if forced.setdefault(root, v) != v:
                raise _NoOwnerLayout(f"'{root}' would need {forced[root]} and {v} lanes")

        for nest, b, kind in self.specials:
            if b in self.replicated or kind in ("packed", "owned"):  # (packed: fit_packed)
                continue  # (read whole by a nest every thread runs whole)
            t = self.region_threads(b)
            if self.frag_region.get(b, (0, self.threads)) != nest.region:
                raise _NoOwnerLayout(f"'{b}' lives in other threads than the nest's")
            touched = self.walked(nest, parent)
            if kind == "col":  # (its group takes the nest's V: fit_columns)
                members = [m for m in parent if find(m) == find(b)]
                if any(self.mma_layout(m) is not None or m in self.given for m in members) or \
                        any(r.src in members for r in self.reduces):
                    raise _NoOwnerLayout(f"the group of '{b}' has its own layout", cols=True)
                continue
            if kind == "row":
                rows, row = (int(lp.extent.value) for lp in nest.loops)
                if rows % t or not touched:
                    raise _NoOwnerLayout(f"rows of '{b}' are not whole rounds of {t} threads")
                force(find(touched[0]), row)
                force(find(b), 1)
            else:
                cols = int(nest.loops[0].extent.value)
                if cols % t:
                    raise _NoOwnerLayout(f"columns of '{b}' are not whole rounds of {t} threads")
                force(find(b), 1)
                if touched:
                    force(find(touched[0]), 1)
        for root in forced:
            members = [m for m in parent if find(m) == root]
            if any(self.mma_layout(m) is not None or m in self.given for m in members) or \
                    any(r.src in members and not self.reduces_one_lane(r, forced[root])
                        for r in self.reduces):
                raise _NoOwnerLayout(f"the group of '{root}' has its own layout")
        return forced

    def reduces_one_lane(self, r: N.Reduce, v: int) -> bool:
        """Can the row reduction ``r`` of a group the owner layouts set to ``v`` lanes run
        on that layout?  With ``v == 1`` (a ``(K, J)`` fragment read at ``[k, j]`` under a
        nest over ``j``, and the fragments sharing its other nests: ``sq[i, j] = x[i, j] *
        x[i, j]`` reduced over ``j``) it is the blocked layout of one lane, which the
        reduction takes as any other: each row over all the threads (whole rounds of them,
        whole warps) or over a lane group (:meth:`grouped_rows`).  A group of whole rows a
        thread (``v = J``) keeps its rows' reductions off the owner layouts."""
        shape = self.buffers[r.src].shape
        if v != 1 or r.dim != len(shape) - 1 or not all(isinstance(d, N.Const) for d in shape):
            return False
        row, t = int(self.buffers[r.src].shape[-1].value), self.region_threads(r.src)
        if row % t == 0:
            return t % WARP == 0 or t <= WARP and t & (t - 1) == 0
        return self.grouped_rows(r, row, 1)

    def make_replicated(self, name: str, s) -> None:
        self.replicated.add(name)
        self.why.setdefault(name, s)

    # ---- decide -------------------------------------------------------------------------
    def simt_text(self, names) -> str:
        """Why a fragment among ``names`` accumulating a T.gemm has no MMA rows: that
        T.gemm runs on SIMT (its C lives in whatever layout the loops give it)."""
        g = next((self.simt_c[b] for b in names if b in self.simt_c), None)
        if g is None:
            return ""
        where = f" at {g.loc}" if getattr(g, "loc", None) else ""
        return (f"; '{g.c}' accumulates the T.gemm{where}, which no tensor-core MMA serves "
                f"({self.buffers[g.a].dtype} operands, transpose_A={g.transpose_a}, "
                f"transpose_B={g.transpose_b}: docs/tile-ops.md, T.gemm), so it runs as SIMT "
                "multiply-adds and has no MMA rows")

    def mma_layout(self, name: str):
        a = self.allocs.get(name)
        return a.layout if a is not None and a.layout is not None and a.layout.kind == "mma" else None

    def replicated_written_by_rows(self) -> dict[str, N.Stmt]:
        """Replicated fragments that a nest over the rows of a T.gemm accumulator writes
        (``out[i, k] = arg[i]`` in a ``T.Parallel(M)`` loop, ``k`` a serial loop's): only
        the threads holding a row run its iterations, so every other thread's copy would
        miss that row (a fragment of more than the rows' one dim cannot live with them).
        TileLang lays it out by the loop; here it moves to shared memory (``infer_layouts``),
        where each row's holders write it and every thread reads it after a barrier."""
        self.spread_replication()
        found: dict[str, N.Stmt] = {}
        for nest in self.nests:
            if not any(b in self.rows for b, _, _ in nest.accesses):
                continue
            if any(self.scope_of(b) == "fragment" and b not in self.replicated and
                   b not in self.rows for b, _, _ in nest.accesses):
                continue  # it walks a blocked fragment: decide's rules
            for b, _, w in nest.accesses:
                if w and b in self.replicated and self.scope_of(b) == "fragment" and \
                        b not in self.reducers:
                    found.setdefault(b, nest.loops[0])
        return found

    def large_replicated(self) -> dict[str, N.Stmt]:
        """Fragments replicated by a read at elements other threads' iterations give them
        (``x[i, jj * 4 + j]`` in a nest over ``(i, j)``: no layout here holds them where
        that nest runs), too large for registers (over ``REPLICATED_BYTES``: each thread
        would keep all of it in local memory, and every nest writing it would run whole on
        every thread).  They move to shared memory (``infer_layouts``), where the nests
        writing them spread over the threads and every thread reads them after a barrier.
        Not moved: reducers, reductions' operands, views and their bases, fragments a
        program laid out, those replicated only because a replicated nest reads them (their
        cause moves instead) and those some thread may write with its own value (outside
        a nest, or from the thread index)."""
        self.spread_replication()
        found: dict[str, N.Stmt] = {}
        for name in sorted(self.replicated):
            a = self.allocs.get(name)
            if a is None or a.buffer.scope != "fragment" or name in self.reducers or \
                    name in self.given or name in self.spread or name in self.bases or \
                    name in self.bases.values() or name in self.direct_writes or \
                    any(name in (r.src, r.dst) for r in self.reduces) or \
                    not all(isinstance(d, N.Const) for d in a.buffer.shape):
                continue
            size = math.prod(int(d.value) for d in a.buffer.shape) * DTYPES[a.buffer.dtype].bytes
            if size <= REPLICATED_BYTES:
                continue
            writers = [nest for nest in self.nests if any(w and b == name for b, _, w in nest.accesses)]
            if any(self.thread_dependent(nest) for nest in writers):
                continue
            if any(self.mma_layout(b) is not None for nest in writers for b, _, _ in nest.accesses):
                continue  # (a nest over a T.gemm register fragment: its own rules)
            found[name] = self.why[name]
        return found

    def thread_dependent(self, nest: _Nest) -> bool:
        """May the nest's body compute a value each thread has its own of: does it read the
        thread index (or a ``Let`` computed from it), a thread's local buffer, or a
        shuffle, vote or warp reduction?"""
        if self.per_thread is None:  # the Lets whose values may differ between threads
            self.per_thread = tainted_lets(self.scope.body, self.thread_vars, self.varies)
        body = nest.loops[-1].body
        return self.varies(body) or bool(var_names(body) & self.per_thread)

    def varies(self, x) -> bool:
        """Does ``x`` call the thread index (or a shuffle, vote, warp reduction), or read a
        thread's local buffer?"""
        return any(isinstance(n, N.Call) and (n.name in _MEETS_THREADS or "thread" in n.name or
                                              "lane" in n.name or "warp" in n.name) or
                   isinstance(n, N.Load) and self.scope_of(n.buffer) == "local"
                   for n in walk_nodes(x))

    def spread_replication(self) -> None:
        """A nest that writes a replicated fragment at its own loop variables runs whole
        on every thread (every thread needs every element), so the fragments it reads at
        its own loop variables must be whole on every thread too: they become replicated,
        and so, in turn, do the fragments read by the nests (a ``T.copy`` included) that
        write them.  TileLang's layout inference gives such a loop the replicated
        fragment's layout and the fragments it reads the loop's (``ParallelOp``'s source
        buffer and ``CompleteBufferFragment``).  A nest writing a replicated fragment at
        other indices (``s[0] = x[i]``) spreads nothing: its iterations conflict and the
        mixed-nest error stays."""
        changed = True
        while changed:
            changed = False
            for nest in self.nests:
                reads = {b for b, _, w in nest.accesses if not w}
                writes = [(b, idx) for b, idx, w in nest.accesses
                          if w and not (b in self.reducers and b in reads)]
                rep = [(b, idx) for b, idx in writes if b in self.replicated]
                if not rep or not all(self.identity_shape(nest, b, idx) or self.walks_slice(nest, b, idx)
                                      for b, idx in rep):
                    continue
                for b, idx, w in nest.accesses:
                    if w or b in self.replicated or b in self.rows or b in self.cols or \
                            self.scope_of(b) != "fragment":
                        continue
                    self.replicated.add(b)
                    self.why[b] = nest.loops[0]
                    self.spread[b] = rep[0][0]
                    changed = True
            for v, b in self.bases.items():  # a view and its base: one set of registers
                if self.buffers[b].scope == "fragment" and \
                        (v in self.replicated) != (b in self.replicated):
                    x, y = (v, b) if v in self.replicated else (b, v)
                    self.make_replicated(y, self.why[x])
                    if x in self.spread:
                        self.spread.setdefault(y, self.spread[x])
                    changed = True

    def decide(self):
        self.spread_replication()
        for r in self.reduces:
            if id(r) in self.columns_in_place and (
                    {r.src, r.dst} & self.replicated or
                    self.frag_region.get(r.dst) != self.frag_region.get(r.src)):
                raise _NoColumnLayout(f"'{r.dst}' or '{r.src}' is replicated")
        frags = [n for n, a in self.allocs.items()
                 if a.buffer.scope == "fragment" and n not in self.rows and n not in self.cols]
        self.check_fragment_views()
        for f in frags:
            if self.mma_layout(f) is not None and f in self.replicated:
                self.fail(self.why[f], f"fragment '{f}' has a T.gemm register layout (an "
                                       f"accumulator or an A operand: each thread holds the MMA's "
                                       f"part of it) but {self.why_text(f)}; "
                                       "index it in T.Parallel loops with their own loop variables "
                                       "(a row's sum or max over it is T.reduce_sum / T.reduce_max)")
        self.check_given()
        blocked = [f for f in frags if f not in self.replicated]
        for r in self.reduces:
            if r.src in self.replicated:
                self.fail(r, f"T.reduce_{r.kind} reads fragment '{r.src}', but '{r.src}' is "
                             f"replicated ({self.why_text(r.src)}); reduce a fragment that "
                             "T.Parallel loops walk with their own loop variables")
        find = self.fragment_groups(blocked)
        parent = set(blocked)
        # groups holding a T.gemm register fragment: each member takes the MMA's layout
        # below, so a nest walking any member walks the accumulator's rows
        mma_groups = {find(f) for f in blocked if self.mma_layout(f) is not None}
        nest_mode = []
        forced: dict[str, list] = {}  # group -> [(blocked layout, the stmt giving it)]
        for f, lay in self.given.items():
            if lay.kind == "blocked" and f in parent:
                forced.setdefault(find(f), []).append((lay, self.allocs[f]))
        owner = self.owner_vectors(find, parent)
        for nest in self.nests:
            if id(nest) in self.owned_nests:  # (its own lanes: owned_read)
                nest_mode.append(("owned", self.owned_nests[id(nest)]))
                continue
            touched, special = self.walked(nest, parent), self.walked(nest, parent, special=True)
            if special and not touched:  # (runs on the threads holding what it reads)
                if any(w and self.scope_of(b) in ("local", "fragment") for b, _, w in nest.accesses):
                    raise _NoOwnerLayout("a nest writes registers beside its special reads alone")
                nest_mode.append(("blocked", special[0]))
                continue
            given = nest.loops[-1].loop_layout
            if given is not None:
                self.check_loop_layout(nest, given, touched)
                if touched and given.kind == "blocked":
                    forced.setdefault(find(touched[0]), []).append((given, nest.loops[-1]))
            # a nest combining contributions into a reducer (``r[i] += x``) runs each
            # iteration once, on one thread, into that thread's copy: not a replicated write
            reads = {b for b, _, w in nest.accesses if not w}
            writes = {b for b, _, w in nest.accesses if w and not (b in self.reducers and b in reads)}
            row_frags = {b for b, _, _ in nest.accesses if b in self.rows}
            if not touched and not row_frags and any(b in self.cols for b, _, _ in nest.accesses):
                nest_mode.append(("cols", None))  # each thread walks the columns it holds
                continue
            if row_frags and not touched:  # each thread walks the rows it holds
                nest_mode.append(("rows", None))
                continue
            if row_frags and not any(find(b) in mma_groups for b in touched):
                self.fail(nest.loops[0], f"{_this(nest)} walks fragment '{touched[0]}' and "
                                         f"reads '{sorted(row_frags)[0]}', which holds one value per "
                                         "row of a T.gemm accumulator: read it in loops over the "
                                         f"accumulator or over its rows{self.simt_text(touched)}")
            if touched:
                for b in touched:
                    if squeeze(tuple(self.buffers[b].shape)) != squeeze(nest.extents) and \
                            (id(nest), b) not in self.owned and not all(
                            self.flat_identity(nest, b, idx) for x, idx, _ in nest.accesses if x == b):
                        self.fail(nest.loops[0], f"fragment '{b}' is walked by a T.Parallel "
                                                 "loop whose extents differ from its shape")
                bad = sorted(w for w in writes if w in self.replicated)
                if bad:
                    self.fail(nest.loops[0], self.mixed_text(bad[0], touched[0], nest))
                nest_mode.append(("blocked", touched[0]))
            elif writes and any(w in self.replicated for w in writes) or writes and \
                    all(self.scope_of(w) == "local" for w in writes):
                combined = sorted({b for b, _, w in nest.accesses if w} - writes)
                if combined:  # every thread would add every contribution
                    self.fail(nest.loops[0], f"{_this(nest)} combines into the reducer "
                                             f"'{combined[0]}' and also writes "
                                             f"'{sorted(writes)[0]}', which every thread holds "
                                             "whole; write it in a separate T.Parallel loop")
                # it writes a replicated fragment (maybe memory too): every thread runs every
                # iteration, so each holds the whole fragment; memory gets the same values
                # from every thread
                nest_mode.append(("replicated", None))
            elif given is not None and given.kind == "replicated":
                nest_mode.append(("replicated", None))  # every thread runs every iteration
            else:
                nest_mode.append(("distributed", None))
        # one V per group; a group with a T.gemm accumulator takes the MMA's layout
        groups: dict[str, list] = {}
        for f in blocked:
            groups.setdefault(find(f), []).append(f)
        vector: dict[str, int] = {}
        self.mma: dict[str, N.Layout] = {}
        for root, members in groups.items():
            mma = {self.mma_layout(m) for m in members} - {None}
            # an A operand and an accumulator of one shape hold the same (i, j) per register
            if len({dataclasses.replace(x, operand="") for x in mma}) > 1:
                hint = ""
                if any(x.operand == "A" and x.mma == "mma" for x in mma):
                    hint = ("; mma.sync reads an A fragment with every warp along M: give the "
                            "T.gemm that accumulates into the other policy="
                            "T.GemmWarpPolicy.FullRow")
                self.fail(self.allocs[members[0]], f"fragments {sorted(members)} share T.Parallel "
                                                   f"loops but accumulate different T.gemm layouts"
                                                   f"{hint}")
            if mma:
                layout = min(mma, key=lambda x: x.operand)  # the accumulator's, if any
                shapes = {tuple(self.buffers[m].shape) for m in members}
                if len(shapes) > 1:
                    self.fail(self.allocs[members[0]], f"fragments {sorted(members)} share T.Parallel "
                                                       "loops with a T.gemm accumulator, so they need "
                                                       "its shape")
                for r in self.reduces:
                    if r.src in members:
                        self.check_accumulator_reduce(r, layout)
                for m in members:
                    self.mma[m] = self.mma_layout(m) or layout
                    vector[m] = MMA_LANES
                continue
            nests = [n for n, (m, r) in zip(self.nests, nest_mode) if m == "blocked" and find(r) == root]
            if root in owner:  # laid out by its special accesses (owner_vectors)
                if any(self.barrier_in_strided_nest(n) for n in nests) or \
                        any(int(n.extents[-1].value) % owner[root] for n in nests):
                    raise _NoOwnerLayout(f"the nests of '{root}' cannot run {owner[root]} lanes")
                for m in members:
                    vector[m] = owner[root]
                continue
            if root in forced:  # the program's layout (T.Fragment) fixes V
                for m in members:
                    vector[m] = self.forced_vector(members, forced[root], nests)
                continue
            dtypes = {self.buffers[b].dtype for n in nests for b, _, _ in n.accesses}
            dtypes |= {self.buffers[m].dtype for m in members}
            v = VECTOR_BYTES // min(DTYPES[d].bytes for d in dtypes)
            while v > 1 and any(int(n.extents[-1].value) % v for n in nests):
                v //= 2
            if v > 1 and any(self.barrier_in_strided_nest(n) for n in nests):
                v = 1  # TileLang's: one iteration per thread step (see the method)
            for r in self.reduces:
                if r.src in members and id(r) in self.columns_in_place:
                    while v > 1 and not self.column_rounds(r, v):
                        v //= 2
                    if not self.column_rounds(r, v):
                        raise _NoColumnLayout(f"no V gives '{r.src}' whole rounds of columns")
                elif r.src in members:
                    row = int(self.buffers[r.src].shape[-1].value)
                    if r.dim != self.buffers[r.src].ndim - 1:
                        self.fail(r, f"internal: T.reduce_{r.kind} over dim {r.dim} of '{r.src}' "
                                     "reached the layout pass (the tile-op lowering moves the "
                                     "reduced dim last)")
                    t = self.region_threads(r.src)
                    widest = v
                    # the widest V at which each thread holds part of every row, or rows
                    # are held by lane groups: TileLang lays the fragment out by its
                    # loops' vector width and reduces whatever rows that gives, so a row of
                    # 128 in 128 threads is 16 threads x 8 registers (one 16-byte access
                    # each, a 4-step shuffle), not 128 threads x 1 (scalar accesses, a
                    # shuffle per row and a shared-memory exchange across the warps)
                    while v > 1 and row % (t * v) and not self.grouped_rows(r, row, v):
                        v //= 2
                    if row % (t * v) and not self.grouped_rows(r, row, v):
                        v = widest     # a fragment short of whole rounds (of one, its first threads)
                        while v > 1 and not self.grouped_rows(r, row, v, partial=True):
                            v //= 2
                    if row % (t * v) and not self.grouped_rows(r, row, v, partial=True):
                        whose = "the block's" if t == self.threads else "its thread region's"
                        self.fail(r, f"T.reduce_{r.kind}: rows of '{r.src}' have {row} elements, "
                                     f"neither a multiple of {whose} {t} threads "
                                     f"nor a power-of-two number (<= 32) or a multiple of 32 of "
                                     f"{v}-element pieces that whole rows of those threads "
                                     "cover (the threads holding a row, TileLang's "
                                     "logical_width, must be a positive power of two up to 32 "
                                     "or whole warps)")
                    if row % (t * v) == 0 and not (t % WARP == 0 or t <= WARP and t & (t - 1) == 0):
                        # a row over every thread: shuffles need whole warps (or one
                        # power-of-two group); a partial warp would be read past its end
                        self.fail(r, f"T.reduce_{r.kind}: each row of '{r.src}' spreads over all "
                                     f"{t} threads of the block (logical_width {t}), which must "
                                     "be a positive power of two up to 32 or whole warps "
                                     "(tilecute's all-reduce shuffles whole warps)")
            for m in members:
                vector[m] = v
        for nest, (mode, _) in zip(self.nests, nest_mode):
            if nest.narrowed is not None and mode != "replicated":
                # (a replicated nest runs whole on each thread that gets there, as on the
                # threads TileLang would plan it for)
                self.narrowed, self.region = nest.narrowed, nest.region
                self.fail(nest.loops[0], f"{_this(nest)} is spread over the threads and runs under "
                                         f"{self.narrowed_text()}, {self.narrowed_why()}")
        self.fit_columns(nest_mode, vector, find, groups, fixed=set(owner) | set(forced))
        self.fit_packed(nest_mode, vector, find, groups, fixed=set(owner) | set(forced))
        for r in self.reduces:  # (the lanes the special layouts and fits set, checked too)
            if id(r) in self.columns_in_place and (
                    r.src not in vector or vector.get(r.dst) != vector[r.src] or
                    r.src in self.mma or not self.column_rounds(r, vector[r.src])):
                raise _NoColumnLayout(f"'{r.src}' has no layout of whole rounds of columns")
        return nest_mode, vector

    def fit_packed(self, nest_mode, vector, find, groups, fixed=frozenset()) -> None:
        """A fragment read packed (``b[i, j // c]`` in a nest over ``(i, j)``: ``c``
        elements of the nest per element of ``b``, a dequantization's packed bytes) takes
        ``V / c`` lanes where the nest runs ``V``: element ``f // c`` of ``b`` (``f`` the
        nest's row-major iteration) then sits on the thread running iteration ``f``, in
        register ``step * V / c + lane // c``, as TileLang lays such a fragment out by the
        loop that reads it.  Raises :class:`_NoOwnerLayout` where it cannot (the nest's V
        not a multiple of ``c``, ``b``'s group with a layout of its own, or read packed by
        two widths)."""
        want: dict[str, int] = {}
        for nest, b, kind in self.specials:
            if kind != "packed" or b in self.replicated:
                continue
            touched = self.walked(nest, vector)
            idx = next(i for x, i, _ in nest.accesses if x == b)
            c = packed_divisor(nest.loops, self.buffers[b], idx)
            root = find(b)
            if touched and touched[0] in self.mma:
                # a nest over a T.gemm register operand (an RS GEMM's unpacked A tile): no
                # register layout here pairs its registers with the packed elements, so the
                # packed fragment moves to shared memory, where each thread reads its own
                # (small ones: it adds to the block's shared memory)
                small = math.prod(int(d.value) for d in self.buffers[b].shape) * \
                    DTYPES[self.buffers[b].dtype].bytes <= PACKED_TO_SHARED_BYTES
                raise _NoOwnerLayout(f"'{b}' is read packed in a nest over a T.gemm operand",
                                     packed=True, demote=(b, nest.loops[0]) if small else None)
            if not touched or find(touched[0]) == root or \
                    self.frag_region.get(b, (0, self.threads)) != nest.region:
                raise _NoOwnerLayout(f"'{b}' is read packed by a nest it does not lay out",
                                     packed=True)
            v = vector[touched[0]]
            if v % c or root in fixed or find(touched[0]) in want or \
                    any(self.mma_layout(m) is not None or m in self.given for m in groups[root]) or \
                    any(r.src in groups[root] for r in self.reduces) or \
                    want.setdefault(root, v // c) != v // c:
                raise _NoOwnerLayout(f"'{b}' cannot take {v} / {c} lanes", packed=True)
        for root, w in want.items():
            nests = [n for n, (m, r) in zip(self.nests, nest_mode)
                     if m == "blocked" and r is not None and find(r) == root]
            if any(int(n.extents[-1].value) % w for n in nests):
                raise _NoOwnerLayout(f"the nests of '{root}' cannot run {w} lanes", packed=True)
            for m in groups[root]:
                vector[m] = w

    def fit_columns(self, nest_mode, vector, find, groups, fixed=frozenset()) -> None:
        """Each ``(J,)`` fragment ``w`` read at ``[j]`` in a blocked nest over ``(..., j)``
        (``col``, :meth:`special_access`) whose rows are whole rounds of its threads'
        ``V``-element pieces: every thread meets the same columns in every row, those a
        blocked layout of ``w`` with the nest's ``V`` gives it (register ``(step %
        (J / (threads V))) * V + lane``), so ``w``'s group takes that ``V``; TileLang lays
        ``w`` out by the loop the same way (each thread holds the columns it reads, not
        all ``J``).  Where ``J`` is whole rounds of the threads but not of their pieces
        (384 columns, 128 threads, V = 4), the nest's group takes the widest V that is
        (1 here): narrower accesses cost less than every thread holding all of ``w``.
        Groups whose V is ``fixed`` (owner layouts, the program's) keep it.  Raises
        :class:`_NoOwnerLayout` where that cannot hold."""
        cols_of = [(nest, b) for nest, b, kind in self.specials
                   if kind == "col" and b not in self.replicated]
        narrow: dict[str, int] = {}
        for nest, b in cols_of:
            mode, root = next(m for n, m in zip(self.nests, nest_mode) if n is nest)
            if mode != "blocked" or root is None:
                raise _NoOwnerLayout(f"'{b}' is read by a nest not spread over the threads", cols=True)
            v, t = vector[root], self.region_threads(b)
            cols = int(self.buffers[b].shape[-1].value)
            while v > 1 and cols % (t * v):
                v //= 2
            if v < vector[root]:
                narrow[find(root)] = min(narrow.get(find(root), v), v)
        for group, v in narrow.items():
            members = groups[group]
            if group in fixed or any(self.mma_layout(m) is not None or m in self.given
                                     for m in members):
                raise _NoOwnerLayout(f"the group of '{group}' keeps its lanes", cols=True)
            for r in self.reduces:
                if r.src in members:
                    row = int(self.buffers[r.src].shape[-1].value)
                    if row % (self.region_threads(r.src) * v) and not self.grouped_rows(r, row, v):
                        raise _NoOwnerLayout(f"the rows of '{r.src}' need their lanes", cols=True)
            for m in members:
                vector[m] = v
        taken: dict[str, int] = {}
        for nest, b in cols_of:
            mode, root = next(m for n, m in zip(self.nests, nest_mode) if n is nest)
            v, t = vector[root], self.region_threads(b)
            cols = int(self.buffers[b].shape[-1].value)
            if self.frag_region.get(b, (0, self.threads)) != nest.region or cols % (t * v):
                raise _NoOwnerLayout(f"columns of '{b}' are not whole rounds of {t} x {v}", cols=True)
            group = find(b)
            if taken.setdefault(group, v) != v:
                raise _NoOwnerLayout(f"'{b}' would need {taken[group]} and {v} lanes", cols=True)
            members = groups[group]
            if any(vector[m] != v for m in members):
                nests = [n for n, (m, r) in zip(self.nests, nest_mode)
                         if m == "blocked" and r is not None and find(r) == group]
                if any(self.mma_layout(m) is not None or m in self.given for m in members) or \
                        any(r.src in members for r in self.reduces) or \
                        any(int(n.extents[-1].value) % v or self.barrier_in_strided_nest(n)
                            for n in nests):
                    raise _NoOwnerLayout(f"the group of '{b}' cannot take {v} lanes", cols=True)
                for m in members:
                    vector[m] = v

    def barrier_in_strided_nest(self, nest: _Nest) -> bool:
        """Does the nest's body meet another thread (a block or grid barrier:
        ``T.sync_threads``, ``T.sync_grid``, ``T.syncthreads_count`` ...; a shuffle, vote or
        match of the warp) and read or write memory (global or shared) at an index that
        does not step by 1 with the innermost loop variable (``A[N - 1 - i]``)?  TileLang
        vectorizes a T.Parallel loop only over such unit steps, so it runs that loop one
        iteration per thread step; a thread holding V > 1 iterations would meet the barrier
        once per iteration, between its other iterations' reads and writes (and a shuffle
        would pair other iterations), which changes what the program computes (TileLang's
        own T.sync_grid test reads A[N - 1 - i] before the barrier and writes A[i] after
        it).  Elsewhere V changes only who does what."""
        body = nest.loops[-1].body
        if not any(isinstance(x, N.Barrier) or isinstance(x, N.Call) and x.name in _MEETS_THREADS
                   for x in walk_nodes(body)):
            return False
        inner = nest.vars[-1]
        for b, idx, _ in nest.accesses:
            if self.scope_of(b) == "fragment" or not idx:
                continue
            if any(mentions(i, inner) for i in idx[:-1]):
                return True
            form = linear_form(idx[-1])
            if form is None and mentions(idx[-1], inner) or form is not None and form.get(inner, 0) not in (0, 1):
                return True
        return False

    # ---- the program's layouts (T.Fragment) -------------------------------------------
    def check_given(self) -> None:
        """A fragment the program laid out (``T.annotate_layout`` with a ``T.Fragment``)
        keeps that layout: one spread over the threads must not be one tilecute needs
        whole on every thread, and neither may hold a T.gemm register layout or its rows."""
        for f, lay in self.given.items():
            a = self.allocs[f]
            if self.mma_layout(f) is not None or f in self.rows:
                what = "holds one value per row of a T.gemm accumulator" if f in self.rows \
                    else "is a T.gemm operand or accumulator in registers"
                self.fail(a, f"T.annotate_layout gives fragment '{f}' the T.Fragment layout "
                             f"{layout_str(lay)}, but '{f}' {what}, whose layout is the MMA's: "
                             "tilecute takes no T.Fragment for it")
            if lay.kind == "blocked" and f in self.replicated:
                self.fail(a, f"T.annotate_layout gives fragment '{f}' a T.Fragment layout that "
                             f"spreads it over the threads ({layout_str(lay)}), but "
                             f"{self.why_text(f)}, so tilecute needs it whole on every thread; "
                             "give it a T.Fragment holding every element on every thread "
                             "(replicate = the block's threads), or walk it only at the "
                             "T.Parallel loops' own indices")

    def check_loop_layout(self, nest: _Nest, given: N.Layout, touched) -> None:
        """``T.Parallel(loop_layout=...)`` must agree with the fragments the nest walks."""
        first, count = nest.region
        if given.kind == "blocked" and (given.threads, given.first_thread) != (count, first):
            self.fail(nest.loops[0], f"{_this(nest)} has loop_layout {layout_str(given)}, but it "
                                     f"runs on threads {first}..{first + count - 1}; a loop "
                                     "layout spreads the loop over all of them")
        writes = {b for b, _, w in nest.accesses if w}
        if any(b in self.rows for b, _, _ in nest.accesses) or \
                any(self.mma_layout(b) is not None for b in touched):
            self.fail(nest.loops[0], f"{_this(nest)} walks a T.gemm accumulator (or its rows), "
                                     f"whose register layout places its iterations; its "
                                     f"loop_layout {layout_str(given)} is not that layout")
        if given.kind == "replicated" and touched:
            self.fail(nest.loops[0], f"{_this(nest)} has a loop_layout running every iteration "
                                     f"on every thread, but it walks fragment '{touched[0]}', "
                                     "which each thread holds only its part of")
        if given.kind == "blocked" and any(w in self.replicated for w in writes
                                           if self.scope_of(w) == "fragment"):
            w = sorted(w for w in writes if w in self.replicated)[0]
            self.fail(nest.loops[0], f"{_this(nest)} has loop_layout {layout_str(given)}, which "
                                     f"spreads it over the threads, but it writes '{w}', "
                                     f"which every thread holds whole ({self.why_text(w)})")

    def forced_vector(self, members, forced: list, nests) -> int:
        """The ``V`` the program's layouts give a group of fragments (and the T.Parallel
        loops over them): they must agree, span the fragments' threads, divide the loops'
        innermost extents, and let each reduced row meet as tilecute's reductions need."""
        lay, where = forced[0]
        for other, at in forced[1:]:
            if other != lay:
                self.fail(at, f"the layouts {layout_str(lay)} (at {where.loc}) and "
                              f"{layout_str(other)} (here) meet on fragments "
                              f"{sorted(members)}, which share T.Parallel loops and so one "
                              "layout (TileLang: a layout conflict)")
        v = lay.vector
        for m in members:
            first, count = self.frag_region.get(m, (0, self.threads))
            if (lay.threads, lay.first_thread) != (count, first):
                self.fail(where, f"{layout_str(lay)} spreads fragment '{m}' over "
                                 f"{lay.threads} threads, but it is used by threads "
                                 f"{first}..{first + count - 1}")
        for n in nests:
            if int(n.extents[-1].value) % v:
                self.fail(n.loops[0], f"{_this(n)} walks fragments laid out {layout_str(lay)} "
                                      f"(T.Fragment: {v} consecutive elements per thread), but "
                                      f"its innermost extent {expr_str(n.extents[-1])} is not a multiple "
                                      f"of {v}; tilecute runs those {v} iterations of the "
                                      "innermost loop together on a thread")
        for r in self.reduces:
            if r.src not in members:
                continue
            row = int(self.buffers[r.src].shape[-1].value)
            t = self.region_threads(r.src)
            whole = row % (t * v) == 0
            if whole and not (t % WARP == 0 or t <= WARP and t & (t - 1) == 0) or \
                    not whole and not self.grouped_rows(r, row, v, partial=True):
                self.fail(r, f"T.reduce_{r.kind} reads '{r.src}', laid out {layout_str(lay)} "
                             f"by the program (T.Fragment): each row of {row} elements lies on "
                             f"threads tilecute's reduction cannot combine (a power-of-two "
                             f"number up to 32 of them, whole warps, or all {t})")
        return v

    def fragment_groups(self, blocked):
        """``find``: the blocked fragments that share a nest (or are views of one base), one
        group each (one vector width; a group holding a T.gemm fragment takes its MMA
        layout); ``find(f)`` names ``f``'s group."""
        parent = {f: f for f in blocked}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x
        for v, b in self.bases.items():  # a view and its base: one set of registers
            if v in parent and b in parent:
                parent[find(v)] = find(b)
        for nest in self.nests:
            touched = self.walked(nest, parent)
            for b in touched[1:]:
                parent[find(b)] = find(touched[0])
        for r in self.reduces:  # a column reduced in place: its output takes its source's V
            if id(r) in self.columns_in_place and r.src in parent and r.dst in parent:
                parent[find(r.dst)] = find(r.src)
        return find

    def columns_off_mma(self) -> set:
        """The column reductions (``dim=0`` of a 2-D fragment, which the tile-op lowering
        leaves in place) whose source will not be laid out as a T.gemm accumulator (it
        shares no T.Parallel loop, transitively, with one): ids of those ``Reduce``s,
        which go through a transposed shared tile (:func:`~.lower_tile_ops.move_columns_last`).
        The others reduce in the register layout (``tcrow.reduce_cols``)."""
        self.spread_replication()
        blocked = [n for n, a in self.allocs.items() if a.buffer.scope == "fragment"
                   and n not in self.rows and n not in self.cols and n not in self.replicated]
        find = self.fragment_groups(blocked)
        mma = {find(f) for f in blocked if self.mma_layout(f) is not None}
        return {id(r) for r in self.reduces if r.dim == 0 and self.buffers[r.src].ndim == 2
                and not (r.src in blocked and find(r.src) in mma)}

    def check_fragment_views(self) -> None:
        """A fragment view and its base hold the same registers: one replicated makes both
        replicated; neither may have a T.gemm register layout or hold rows of one."""
        for v, b in self.bases.items():
            if self.buffers[b].scope != "fragment":
                continue
            for x, other in ((v, b), (b, v)):
                if self.mma_layout(x) is not None or x in self.rows:
                    what = "holds rows of a T.gemm accumulator" if x in self.rows else \
                        "has a T.gemm register layout (each thread holds the MMA's part of it)"
                    self.fail(self.allocs[v], f"fragment '{x}' {what}, and '{v}' is a view of "
                                              f"'{b}'; tilecute keeps a view's registers only "
                                              "for fragments laid out by element (copy the "
                                              "accumulator into a fragment of its own first)")
            if (v in self.replicated) != (b in self.replicated):
                x = v if v in self.replicated else b
                self.make_replicated(v if x == b else b, self.why[x])

    def grouped_rows(self, r: N.Reduce, row: int, v: int, partial: bool = False) -> bool:
        """Whether rows shorter than the block's threads x ``v`` reduce within thread groups:
        under the blocked layout each row is then ``row // v`` consecutive threads' ``v``
        registers (a power of two up to a warp: a lane group; or whole warps, e.g. rows of
        64 in a block of 128 threads), and each round of ``threads x v`` elements holds
        whole rows; the fragment is whole rounds, or (``partial``, where no ``v`` gives
        whole rounds) its last round is partial: a fragment smaller than a round lives in
        its first threads (tilecute.runtime.cute.reduce: ``grouped_rows``, after
        ``block_allreduce`` across the warps of a group)."""
        total = math.prod(int(d.value) for d in self.buffers[r.src].shape)
        per = self.region_threads(r.src) * v
        groups = row // v
        if row % v or per % row or groups < 1 or total % per and not partial:
            return False
        return groups % WARP == 0 if groups > WARP else groups & (groups - 1) == 0

    def column_rounds(self, r: N.Reduce, v: int) -> bool:
        """Can the column reduction ``r`` (``(K, J)`` into ``(J,)``, :func:`_columns_in_place`)
        run in place with ``v`` lanes?  Each round of ``threads x v`` elements is then whole
        rows of ``J // v`` threads' ``v`` registers, that group a power of two up to a warp:
        thread ``t`` holds columns ``(t % g) * v ..`` of rows ``t // g`` + rounds, and its
        output, blocked with the same ``v``, lives in threads ``t < g`` (TileLang's layout:
        each thread keeps its columns; the threads sharing them meet by shuffles and, across
        warps, shared memory)."""
        row = int(self.buffers[r.src].shape[-1].value)
        return self.grouped_rows(r, row, v) and row // v <= WARP

    def check_accumulator_reduce(self, r: N.Reduce, layout: N.Layout) -> None:
        """A reduction of a fragment in a T.gemm register layout: its rows (dim=1) into a
        row fragment, or (the tile-op lowering leaves it so only for an accumulator) its
        columns (dim=0) into a replicated ``(N,)`` fragment (``tcrow.reduce_cols``)."""
        src = self.buffers[r.src]
        if src.ndim == 2 and r.dim == 0 and layout.operand == "":
            if r.dst in self.rows:
                self.fail(r, f"T.reduce_{r.kind}({r.src}, {r.dst}, dim=0) gives one value per "
                             f"column of the T.gemm accumulator '{r.src}', but '{r.dst}' is also "
                             "used as one value per row of an accumulator (read as "
                             f"'{r.dst}[i]' in a loop over its (i, j)); use two fragments")
            return
        if r.dst not in self.rows or src.ndim != 2 or r.dim not in (1, -1):
            self.fail(r, f"T.reduce_{r.kind} of the T.gemm accumulator '{r.src}' reduces its "
                         f"rows (dim=1) into a fragment of shape ({src.shape[0]},) or its "
                         f"columns (dim=0) into one of shape ({src.shape[1]},)")

    def why_text(self, name: str) -> str:
        s = self.why.get(name)
        where = f" at {s.loc}" if getattr(s, "loc", None) else ""
        if isinstance(s, N.Allocate):
            return (f"its layout{where} (T.annotate_layout's T.Fragment, or layout=) holds it "
                    "whole on every thread")
        if isinstance(s, N.Reduce):
            return f"it is the output of T.reduce_{s.kind}{where}"
        form = getattr(getattr(s, "loc", None), "form", "") or "T.Parallel loop"
        if name in self.spread:
            w = self.spread[name]
            return (f"it is read by the {form}{where}, which writes the replicated "
                    f"fragment '{w}' ({self.why_text(w)}) and so runs whole on every thread")
        return f"it is read across threads{where}"

    def mixed_text(self, frag: str, blocked, nest: _Nest) -> str:
        other = (f"walks the distributed fragment '{blocked}'" if blocked
                 else "writes global or shared memory")
        if _form(nest).startswith("T.copy") and blocked:
            return (f"{_this(nest)} writes the replicated fragment '{frag}' "
                    f"({self.why_text(frag)}), which every thread holds whole, from the "
                    f"distributed fragment '{blocked}', of which each thread holds only its "
                    f"part; copy '{blocked}' through a shared buffer instead (T.copy it into a "
                    f"T.alloc_shared tile, then that tile into '{frag}'), which every thread "
                    "reads whole")
        return (f"{_this(nest)} writes the replicated fragment '{frag}' ({self.why_text(frag)}) "
                f"and also {other}; every thread would need every element of '{frag}' but each "
                "thread runs only its own iterations; write it in a separate T.Parallel loop")

    # ---- rewrite ------------------------------------------------------------------------
    def rewrite(self, nest_mode, vector) -> N.KernelScope:
        nest_iter = iter(zip(self.nests, nest_mode))
        warps = self.threads // WARP if self.threads % WARP == 0 else 1
        scratch_allocs = []

        def layout_of(name: str):
            buf = self.buffers[name]
            if name in self.rows:
                return self.rows[name]
            if name in self.cols:
                return self.cols[name]
            if buf.scope == "fragment":
                if name in self.mma:
                    return self.mma[name]
                if name in self.replicated:
                    return N.Layout("replicated")
                # held by the threads its nests run on: the block's, or a T.ws region's
                first, count = self.frag_region.get(name, (0, self.threads))
                return N.Layout("blocked", threads=count, vector=vector[name], first_thread=first)
            if buf.scope == "shared" and launch_sized(buf):
                return N.Layout("row_major")  # (sized at launch: no swizzle)
            if buf.scope == "shared":
                row = int(buf.shape[-1].value)
                if name in self.column_walked and name not in self.scanned | self.tma_copied \
                        and buf.ndim >= 2 and row >= 2 and row & (row - 1) == 0:
                    return N.Layout("swizzled", swizzle=min(WARP, row))
                return N.Layout("row_major")
            return None

        kernel = self

        def base_layout(name: str):
            a = kernel.allocs[name]
            if a.layout is not None:
                return a.layout
            if kernel.buffers[name].scope == "shared" and name in kernel.bases.values():
                # a view laid out already (a T.gemm operand, T.annotate_layout) lays out its
                # base when it can; else the base is row-major (no column swizzle)
                for v, b in kernel.bases.items():
                    given = kernel.allocs[v].layout
                    if b == name and given is not None:
                        derived = view_layout(kernel.buffers[v], given, a.buffer)
                        if not isinstance(derived, str):
                            return derived
                return N.Layout("row_major")
            return layout_of(name)

        def own_layout(s: N.Allocate) -> bool:
            """A shared view whose layout cannot read its base's bytes as the base lays
            them out may have its own (as every TileLang view has) when no value passes
            between the two (:func:`~.analysis.independent_view`) and the base is one
            stage."""
            base = s.view_of  # (no view of a view: a view names the first one's base)
            others = {base} | {v for v, b in kernel.bases.items() if b == base and v != s.buffer.name}
            return kernel.allocs[base].stages == 1 and independent_view(
                kernel.scope.body, s.buffer.name, others, kernel.buffers)

        def view_layout_of(s: N.Allocate):
            base = kernel.buffers[s.view_of]
            if base.scope in ("fragment", "local", "global"):
                layout = base_layout(s.view_of) if base.scope == "fragment" else None
            else:
                layout = view_layout(base, base_layout(s.view_of), s.buffer)
                if (isinstance(layout, str) or s.layout is not None and s.layout != layout) \
                        and own_layout(s):
                    # no data passes between the view and its base: TileLang's own layout
                    return s.layout if s.layout is not None else layout_of(s.buffer.name)
                if isinstance(layout, str):
                    kernel.fail(s, f"shared view '{s.buffer.name}' of '{base.name}': {layout}; "
                                   f"tilecute cannot lay it out over the same bytes (view a "
                                   "buffer of its own layout, or one whose rows match, or "
                                   "write all of the view before reading it and all of "
                                   f"'{base.name}' before reading that, each in its own "
                                   "statements)")
            if s.layout is not None and s.layout != layout:
                kernel.fail(s, f"view '{s.buffer.name}' of '{base.name}' needs layout "
                               f"{layout_str(s.layout)} (a T.gemm operand's or T.annotate_layout's), "
                               f"but over the bytes of '{base.name}' (laid out "
                               f"{layout_str(base_layout(s.view_of))}) it reads as "
                               f"{layout_str(layout) if layout else 'its registers'}; tilecute "
                               "cannot lay both out over the same bytes (give the view's user a "
                               "buffer of its own)")
            return layout

        class _Rewrite(StmtMutator):
            def visit_allocate(self, s: N.Allocate) -> N.Allocate:
                if s.view_of:
                    return dataclasses.replace(s, layout=view_layout_of(s))
                return dataclasses.replace(s, layout=base_layout(s.buffer.name))

            def visit_for(self, s: N.For) -> N.For:
                if s.kind != "parallel":
                    return self.generic(s)
                nest, (mode, root) = next(nest_iter)
                if mode == "owned":  # (root: the nest's own lanes)
                    return kernel.rewrite_nest(nest, "blocked", root)
                return kernel.rewrite_nest(nest, mode, vector.get(root, 0))

            def visit_reduce(self, s: N.Reduce) -> N.Reduce:
                if s.dst in kernel.rows and not s.scratch:
                    # rows of an accumulator reduce within the quad holding them; with warps
                    # along N (GemmWarpPolicy.FullCol) the warps' partials meet in shared
                    if s.src not in kernel.mma:  # (TileLang finds no layout for it either)
                        kernel.fail(s, f"T.reduce_{s.kind}({s.src}, {s.dst}): '{s.dst}' lives with "
                                       "the rows of a T.gemm accumulator (read as "
                                       f"'{s.dst}[i]' in a loop over its (i, j), or sharing a "
                                       "T.Parallel loop with such a fragment), but no T.Parallel "
                                       f"loop walks '{s.src}' at the (i, j) of a T.gemm "
                                       "accumulator or A fragment, so its rows are not laid out "
                                       "as those (TileLang: no available layout); write "
                                       f"'{s.src}' in a loop that walks such a fragment")
                    acc = kernel.mma[s.src]
                    if acc.warps[1] == 1:
                        return s
                    m = int(kernel.buffers[s.src].shape[0].value)
                    name = f"{s.dst}_rows_scratch"
                    if name not in {a.buffer.name for a in scratch_allocs}:
                        buf = N.Buffer(name, kernel.buffers[s.dst].dtype,
                                       (N.Const(m * acc.warps[1], "int32"),), "shared")
                        scratch_allocs.append(N.Allocate(buf, N.Layout("row_major"), loc=s.loc))
                    return dataclasses.replace(s, scratch=name)
                src = kernel.buffers[s.src]
                if s.src in kernel.mma and s.dim == 0 and not s.scratch:
                    # the columns of an accumulator: each warp's partials of its columns meet
                    # in shared, one slot per warp holding the same columns (those along M)
                    acc = kernel.mma[s.src]
                    slots = acc.warps[0] * (4 if acc.mma == "wgmma" else 1)
                    size = int(src.shape[1].value) * slots
                    name = f"{s.dst}_cols_scratch{size}"
                    if name not in {a.buffer.name for a in scratch_allocs}:
                        buf = N.Buffer(name, kernel.buffers[s.dst].dtype,
                                       (N.Const(size, "int32"),), "shared")
                        scratch_allocs.append(N.Allocate(buf, N.Layout("row_major"), loc=s.loc))
                    return dataclasses.replace(s, scratch=name)
                if id(s) in kernel.columns_in_place:
                    # the warps' partials of each column meet in shared: a row a warp
                    held = kernel.threads // WARP
                    if held <= 1 or s.scratch:
                        return s
                    name = f"{s.dst}_cols_scratch"
                    buf = N.Buffer(name, kernel.buffers[s.dst].dtype,
                                   (N.Const(int(src.shape[1].value) * held, "int32"),), "shared")
                    if name not in {a.buffer.name for a in scratch_allocs}:
                        scratch_allocs.append(N.Allocate(buf, N.Layout("row_major"), loc=s.loc))
                    return dataclasses.replace(s, scratch=name)
                rows = math.prod(int(d.value) for d in src.shape[:-1])
                v = vector.get(s.src)  # (blocked sources only)
                threads = kernel.region_threads(s.src)  # (a region's warps meet in shared)
                held = threads // WARP if threads % WARP == 0 else 1
                grouped = bool(v) and int(src.shape[-1].value) % (threads * v) != 0
                if (held <= 1 and not grouped) or s.scratch or s.dst in kernel.rows:
                    return s  # (rows held by lane groups meet in shared; rows of an accumulator too)
                name = f"{s.dst}_scratch"  # (the reduction runs in dst's dtype, as TileLang's)
                size = rows * max(held, 1)
                # reductions into one dst share its scratch (one allocation, the largest size)
                known = next((n for n, a in enumerate(scratch_allocs) if a.buffer.name == name), None)
                if known is None or int(scratch_allocs[known].buffer.shape[0].value) < size:
                    buf = N.Buffer(name, kernel.buffers[s.dst].dtype, (N.Const(size, "int32"),),
                                   "shared")
                    alloc = N.Allocate(buf, N.Layout("row_major"), loc=s.loc)
                    if known is None:
                        scratch_allocs.append(alloc)
                    else:
                        scratch_allocs[known] = alloc
                return dataclasses.replace(s, scratch=name)

            def visit_finalize_reducer(self, s: N.FinalizeReducer) -> N.FinalizeReducer:
                if warps <= 1 or s.scratch:
                    return s
                buf = kernel.buffers[s.buffer]
                size = math.prod(int(d.value) for d in buf.shape) * warps
                name = f"{s.buffer}_scratch"
                scratch = N.Buffer(name, buf.dtype, (N.Const(size, "int32"),), "shared")
                scratch_allocs.append(N.Allocate(scratch, N.Layout("row_major"), loc=s.loc))
                return dataclasses.replace(s, scratch=name)

            def visit_thread_all_reduce(self, s: N.ThreadAllReduce) -> N.ThreadAllReduce:
                # one element per thread and value, where a group's partials meet in shared
                threads = kernel.scope.threads
                if s.scratch or not any(st.crosses for st in allreduce_steps(threads, s.dims)):
                    return s
                names = []
                taken = {n.name for n in walk_nodes(kernel.scope) if isinstance(n, (N.Var, N.Buffer))}
                taken |= {a.buffer.name for a in scratch_allocs}
                for v in s.values:
                    k = 0
                    while f"allreduce_scratch{k}" in taken:
                        k += 1
                    name = f"allreduce_scratch{k}"
                    taken.add(name)
                    buf = N.Buffer(name, v.dtype, (N.Const(kernel.threads, "int32"),), "shared")
                    scratch_allocs.append(N.Allocate(buf, N.Layout("row_major"), loc=s.loc))
                    names.append(name)
                return dataclasses.replace(s, scratch=tuple(names))

        body = _Rewrite().visit_block(self.scope.body)
        return dataclasses.replace(self.scope, body=tuple(scratch_allocs) + body)

    @staticmethod
    def rewrite_nest(nest: _Nest, mode: str, v: int) -> N.For:
        loops = nest.loops
        body = loops[-1].body
        given = loops[-1].loop_layout
        if mode == "distributed" and given is not None and given.kind == "blocked":
            mode, v = "blocked", given.vector  # the program's lanes per thread step
        for d in reversed(range(len(loops))):
            lp = loops[d]
            if mode == "blocked":
                lp = dataclasses.replace(lp, vector_width=v if d == len(loops) - 1 else 1)
            elif mode == "cols":  # a thread's columns come in adjacent pairs
                lp = dataclasses.replace(lp, vector_width=MMA_LANES)
            elif mode == "replicated":
                lp = dataclasses.replace(lp, replicated=True, vector_width=1)
            body = (dataclasses.replace(lp, body=body),)
        return body[0]


class _StageUnpairedFragments(StmtMutator):
    """A ``T.Parallel`` nest that walks one fragment at a permutation of the indices it
    walks another with (``for i, j in T.Parallel(M, N): t[j, i] = acc[i, j]``, and
    ``T.transpose(f, g)``, which the frontend writes so) pairs element ``(i, j)`` of one
    with ``(j, i)`` of the other: no layout of tilecute's (blocked, replicated, a T.gemm
    register layout) holds both on one thread.  TileLang gives the fragment it has no
    layout for yet the other's layout composed with the permutation
    (``ParallelOp::CompleteBufferFragment``), so the loop stays thread-local; tilecute
    routes the fragments at the other order through a shared tile of their own, as the
    tile-op lowering routes a fragment reduced over dim 0 (``<src>_moved``).  The values
    are the same either way.  So too for two T.gemm register fragments of different MMA
    layouts walked together (``h[i, j] += a[i, j] - b[i, j]`` with ``a`` the accumulator
    of a tf32 GEMM, which runs on mma.sync, and ``b`` of a 16-bit one on wgmma: in
    TileLang both are wgmma's, one layout).

    The nest keeps the order of its own loop variables when some fragment is walked in it
    (else that of the fragment it writes, else of the first one it walks), and the MMA
    layout of the fragment it writes at that order, if it has one (else of the first it
    walks there that has one); each fragment walked at another permutation, or holding
    another MMA layout, becomes a new shared tile ``<frag>_staged<n>`` of its shape and
    dtype in the nest, a nest copying the fragment into the tile goes before it when the
    nest reads the fragment (or writes it only under a condition), and one copying the
    tile back after it when the nest writes it.  The copies walk the fragment in its own
    order (a T.gemm register fragment keeps its MMA layout); the barrier pass orders the
    tile's writes and reads.  Only whole fragments at full-rank permutations of the nest's
    loop variables are staged (unit dims at 0 aside); a fragment walked at two
    permutations in one nest, or at other indices as well, is left to the layout pass as
    before, and so are MMA layouts that meet only through a fragment two nests share."""

    def __init__(self, func: N.PrimFunc, scope: N.KernelScope):
        self.frags = {a.buffer.name: a.buffer for a in walk_stmts(scope.body)
                      if isinstance(a, N.Allocate) and a.buffer.scope == "fragment"
                      and not a.reducer and not a.view_of}
        # the T.gemm register layouts (select_mma's), an A operand's as its accumulator's
        self.mma = {a.buffer.name: dataclasses.replace(a.layout, operand="")
                    for a in walk_stmts(scope.body) if isinstance(a, N.Allocate)
                    and a.layout is not None and a.layout.kind == "mma"}
        self.fresh = LoopVars(func)
        self.tiles: list[N.Allocate] = []

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        scope = super().visit_kernel(scope)
        return dataclasses.replace(scope, body=tuple(self.tiles) + scope.body)

    @staticmethod
    def order(idx, buf: N.Buffer, loops) -> tuple | None:
        """The loop variables ``idx`` indexes fragment ``buf`` with, in its dims' order,
        when it walks the whole fragment at a permutation of the nest's non-unit loop
        variables (unit dims indexed by 0 or a unit loop's variable), else None."""
        by_name = {lp.var.name: lp for lp in loops}
        walked = [lp.var.name for lp in loops if not is_unit(lp.extent)]
        if len(idx) != buf.ndim:
            return None
        out = []
        for i, d in zip(idx, buf.shape):
            if isinstance(i, N.Var) and i.name in by_name and not is_unit(by_name[i.name].extent):
                e = by_name[i.name].extent
                if not (isinstance(d, N.Const) and d.value == e.value):
                    return None
                out.append(i.name)
            elif not (is_unit(d) and (isinstance(i, N.Const) and i.value == 0 or
                                      isinstance(i, N.Var) and i.name in by_name)):
                return None
        return tuple(out) if sorted(out) == sorted(walked) else None

    def copy_nest(self, src: N.Buffer, dst: N.Buffer, loc) -> N.For:
        vs = tuple(self.fresh("i") for _ in src.shape)
        body: tuple = (N.Store(dst.name, vs, N.Load(src.name, vs, src.dtype), loc=loc),)
        for v, d in reversed(list(zip(vs, src.shape))):
            body = (N.For(v, N.Const(0, "int32"), d, "parallel", body, loc=loc),)
        return body[0]

    def visit_for(self, s: N.For):
        if s.kind != "parallel":
            return self.generic(s)
        loops = parallel_nest(s)
        if any(lp.vector_width or lp.replicated for lp in loops) or not all(
                isinstance(lp.start, N.Const) and lp.start.value == 0 and
                isinstance(lp.extent, N.Const) for lp in loops):
            return s
        accs = accesses(loops[-1].body)
        orders: dict[str, set] = {}
        for b, idx, _ in accs:
            if b in self.frags:
                orders.setdefault(b, set()).add(self.order(idx, self.frags[b], loops))
        whole = {b: next(iter(o)) for b, o in orders.items() if len(o) == 1 and None not in o}
        keys = {(o, self.mma.get(b)) for b, o in whole.items()}
        if len({o for o, _ in keys}) < 2 and len({m for _, m in keys} - {None}) < 2 or any(
                len(o) > 1 and None not in o for o in orders.values()):
            return s
        own = tuple(lp.var.name for lp in loops if not is_unit(lp.extent))
        walked = list(dict.fromkeys(b for b, _, w in sorted(accs, key=lambda a: not a[2])
                                    if b in whole))  # (written ones first)
        home = own if own in whole.values() else whole[walked[0]]
        mma = next((self.mma[b] for b in walked if whole[b] == home and b in self.mma), None)
        staged: dict[str, N.Buffer] = {}
        before, after = [], []
        for b in dict.fromkeys(b for b, _, _ in accs if b in whole and (
                whole[b] != home or self.mma.get(b, mma) != mma)):
            frag = self.frags[b]
            tile = N.Buffer(self.fresh(f"{b}_staged").name, frag.dtype, frag.shape, "shared")
            self.tiles.append(N.Allocate(tile, loc=s.loc))
            staged[b] = tile
            reads = any(not w for x, _, w in accs if x == b)
            writes = any(w for x, _, w in accs if x == b)
            every = any(isinstance(t, N.Store) and t.buffer == b for t in loops[-1].body)
            if reads or writes and not every:  # (a conditional write keeps the rest)
                before.append(self.copy_nest(frag, tile, s.loc))
            if writes:
                after.append(self.copy_nest(tile, frag, s.loc))

        def leaf(n):
            if isinstance(n, (N.Load, N.Store, N.Region)) and n.buffer in staged:
                kids = {f.name: rebuild(getattr(n, f.name), leaf) for f in dataclasses.fields(n)
                        if f.name not in ("loc", "buffer")}
                return dataclasses.replace(n, buffer=staged[n.buffer].name, **kids)
            return None
        return before + [rebuild(s, leaf)] + after


class _OrderNestByFragments(StmtMutator):
    """TileLang lays a ``T.Parallel`` loop out by the fragments it walks, in whatever order
    its loop variables come (``for j, i in T.Parallel(N, M): acc[i, j] *= s[j]``).  A nest
    whose fragment accesses of full rank all index with one permutation of its loop
    variables becomes the nest over the fragments' dims in order (a parallel nest's
    iterations are independent, so the order of its loops is free); the layout pass then
    lays it out as any nest that walks its fragments element by element."""

    def __init__(self, scope: N.KernelScope):
        self.frags = {a.buffer.name for a in walk_stmts(scope.body)
                      if isinstance(a, N.Allocate) and a.buffer.scope == "fragment"
                      and not a.reducer}

    def visit_for(self, s: N.For):
        if s.kind != "parallel":
            return self.generic(s)
        loops = parallel_nest(s)
        names = [lp.var.name for lp in loops]
        if len(loops) < 2 or any(lp.vector_width for lp in loops) or \
                any(mentions(e, v) for lp in loops for e in (lp.start, lp.extent) for v in names):
            return s
        orders = set()
        for b, idx, _ in accesses(loops[-1].body):
            if b not in self.frags or len(idx) != len(loops):
                continue
            order = tuple(i.name if isinstance(i, N.Var) else None for i in idx)
            if None not in order and sorted(order) == sorted(names):
                orders.add(order)
        if len(orders) != 1 or list(next(iter(orders))) == names:
            return s
        by_name = {lp.var.name: lp for lp in loops}
        body = loops[-1].body
        for name in reversed(next(iter(orders))):
            body = (dataclasses.replace(by_name[name], body=body),)
        return body[0]


class _PadToMmaFragment(StmtMutator):
    """A ``T.Parallel`` nest over a window of a T.gemm register fragment walks the whole
    fragment, its body guarded by the window, as TileLang predicates a loop laid out by a
    larger fragment: each thread then walks its own registers, and the elements outside
    the window run nothing.  The window is the leading part (``T.copy(acc[:h, :], s)``,
    ``for i, j in T.Parallel(h, n): ... acc[i, j]`` with ``h`` below the fragment's rows)
    or starts at offsets (``T.copy(acc[16:48, :], C[r + 16, c])``: the nest reads
    ``acc[16 + i, j]``, TileLang's fragment read at a shifted index; ``T.copy(acc[:, k *
    64:(k + 1) * 64], C_s)`` in a loop over ``k``, a chunked epilogue): the nest's variable
    ``i`` becomes ``v - 16`` for the fragment's row ``v`` in the rest of the body.  An
    offset is a constant or an expression of the block indices, the variables of the
    loops around the nest and Let names of those, whose ranges keep the window inside the
    fragment; any other stays an error (the layout pass names the read)."""

    def __init__(self, func: N.PrimFunc, scope: N.KernelScope):
        self.mma = {a.buffer.name: a.buffer for a in walk_stmts(scope.body)
                    if isinstance(a, N.Allocate) and a.layout is not None
                    and a.layout.kind == "mma"}
        self.fresh = LoopVars(func)
        self.ranges: dict = {}  # the block indices, serial loops and Lets around the statement

    def offset(self, index: N.Expr, name: str, names: list):
        """``c`` where ``index`` is the variable ``name`` plus ``c``, an expression of
        neither the nest's variables nor memory (``N.Const(0)`` for the variable alone),
        else None."""
        if isinstance(index, N.Var):
            return N.Const(0, "int32") if index.name == name else None
        if isinstance(index, N.BinOp) and index.op == "add":
            for v, c in ((index.a, index.b), (index.b, index.a)):
                if isinstance(v, N.Var) and v.name == name and self.invariant(c, names):
                    return c
        return None

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        self.ranges = {v.name: (0, int(g.value) - 1) for v, g in zip(scope.block_vars, scope.grid)
                       if isinstance(g, N.Const)}
        return super().visit_kernel(scope)

    def visit_let(self, s: N.Let):
        """A Let's range, from its value's (``c0 = k * 64``: a window may start at it)."""
        if N.is_int(s.var.dtype):
            self.ranges[s.var.name] = value_range(s.value, self.ranges)
        return s

    @staticmethod
    def invariant(e: N.Expr, names: list) -> bool:
        return all(isinstance(x, (N.Const, N.Var, N.BinOp)) for x in walk_nodes(e)) and \
            not any(mentions(e, n) for n in names)

    def window(self, body, names: list, extents: list):
        """(shape, offsets, shifted reads, offset ranges) of the T.gemm register fragment
        ``body`` reads at the nest's variables plus offsets, the same for every access;
        ``"leaves"`` where some window may leave the fragment; None where ``body`` reads
        none, or reads one otherwise (across threads: the layout pass says so)."""
        shapes, offsets, shifted = set(), set(), set()
        for b, idx, _ in accesses(body):
            if b not in self.mma:
                continue
            if len(idx) != len(names):
                return None
            offs = tuple(self.offset(i, n, names) for i, n in zip(idx, names))
            if None in offs:
                return None
            shapes.add(tuple(int(d.value) for d in self.mma[b].shape))
            offsets.add(offs)
            shifted.update(i for i, c in zip(idx, offs) if c != N.Const(0, "int32"))
        if len(shapes) != 1 or len(offsets) != 1:
            return None
        (shape,), (offs,) = shapes, offsets
        spans = [value_range(c, self.ranges) for c in offs]
        if any(lo is None or hi is None or lo < 0 or hi + e > d
               for (lo, hi), e, d in zip(spans, extents, shape)):
            return "leaves"
        return shape, offs, shifted, spans

    @staticmethod
    def guarded(body, names: list, extents: list):
        """``body`` without the bounds its guard puts on the nest's variables, and the
        extents those bounds leave: ``if i < 32 and x > 0: S`` under ``T.Parallel(64, n)``
        runs ``if x > 0: S`` over ``(32, n)``, the same iterations (an ``if`` with no
        ``else`` making the whole body); ``(None, extents)`` where there is no such bound."""
        if len(body) != 1 or not isinstance(body[0], N.If) or body[0].orelse:
            return None, extents

        def terms(e):
            if isinstance(e, N.Logic) and e.op == "and":
                return [t for a in e.args for t in terms(a)]
            return [e]

        def bound(t):  # (variable, exclusive bound) of ``v < c``, ``v <= c``, ``c > v``...
            if not isinstance(t, N.Cmp):
                return None
            a, op, b = t.a, t.op, t.b
            if isinstance(b, N.Var) and isinstance(a, N.Const):
                a, b, op = b, a, {"gt": "lt", "ge": "le"}.get(op)
            if isinstance(a, N.Var) and a.name in names and isinstance(b, N.Const) \
                    and isinstance(b.value, int) and op in ("lt", "le"):
                return a.name, int(b.value) + (op == "le")
            return None
        new, rest = list(extents), []
        for t in terms(body[0].cond):
            vb = bound(t)
            if vb is None or vb[1] <= 0:
                rest.append(t)
                continue
            k = names.index(vb[0])
            new[k] = min(new[k], vb[1])
        if new == list(extents):
            return None, extents
        then = body[0].then
        if rest:
            then = (N.If(rest[0] if len(rest) == 1 else N.Logic("and", tuple(rest)), then,
                         loc=body[0].loc),)
        return then, new

    def visit_for(self, s: N.For):
        if s.kind != "parallel":
            known = isinstance(s.start, N.Const) and isinstance(s.extent, N.Const)
            if known:
                lo = int(s.start.value)
                self.ranges[s.var.name] = (lo, lo + int(s.extent.value) - 1)
            out = self.generic(s)
            self.ranges.pop(s.var.name, None)
            return out
        loops = parallel_nest(s)
        if not all(isinstance(lp.start, N.Const) and lp.start.value == 0
                   and isinstance(lp.extent, N.Const) for lp in loops):
            return s
        names = [lp.var.name for lp in loops]
        extents = [int(lp.extent.value) for lp in loops]
        body = loops[-1].body
        window = self.window(body, names, extents)
        if window is None:
            return s
        trimmed = False
        if window == "leaves":
            # ``for i, j in T.Parallel(64, n): if i < 32: ... acc[i + s * 32, j]``: the
            # nest's guard bounds its variables, so the window is the guarded iterations'
            body, extents = self.guarded(body, names, extents)
            window = self.window(body, names, extents) if body is not None else None
            if window is None or window == "leaves":
                return s  # a window that may leave the fragment: the layout pass refuses it
            trimmed = True
        shape, offs, shifted, spans = window
        if extents == list(shape) and not trimmed:
            return s
        moved = [c != N.Const(0, "int32") for c in offs]
        if any(moved):  # the fragment's index is the new loop variable, i is v - c
            new = [self.fresh(lp.var.name) if m else lp.var for lp, m in zip(loops, moved)]
            by_var = {lp.var.name: v for lp, v in zip(loops, new)}
            body = replace_exprs(body, {e: by_var[next(x.name for x in (e.a, e.b)
                                                      if isinstance(x, N.Var) and x.name in by_var)]
                                        for e in shifted})
            body = substitute(body, {lp.var.name: N.BinOp("sub", v, c, "int32")
                                     for lp, v, c, m in zip(loops, new, offs, moved) if m})
        else:
            new = [lp.var for lp in loops]
        cond = []
        for v, c, m, (lo, hi), e, d in zip(new, offs, moved, spans, extents, shape):
            if m:
                cond.append(N.Cmp("ge", v, c))
            if lo + e < d:  # some window ends before the fragment does
                end = N.BinOp("add", c, N.Const(e, "int32"), "int32") if m and \
                    not isinstance(c, N.Const) else N.Const(lo + e, "int32")
                cond.append(N.Cmp("lt", v, end))
        if cond:
            body = (N.If(cond[0] if len(cond) == 1 else N.Logic("and", tuple(cond)),
                         body, loc=loops[-1].loc),)
        for lp, v, d in zip(reversed(loops), reversed(new), reversed(shape)):
            body = (dataclasses.replace(lp, var=v, extent=N.Const(d, "int32"), body=body),)
        return body[0]


class _FoldReplicatedReduces(StmtMutator):
    """A reduction of a replicated fragment (the output of an earlier reduction:
    ``T.reduce_sum(row_sums, total, dim=0)``) needs no thread to combine with another:
    every thread holds every element, so each folds them itself.  The ``Reduce`` becomes a
    nest over the output, ``dst[o] = combine(dst[o], src[o, k])`` over ``k`` in an unrolled
    loop (from the identity when ``clear``), which runs whole on every thread as the nests
    writing a replicated fragment do; the result is the same on every thread.

    With ``columns`` (ids of ``T.reduce_<op>(b, out, dim=0)`` of a ``(K, J)`` fragment
    whose columns each thread holds whole: :func:`_columns_per_thread`) the same nest over
    ``j`` folds ``b[k, j]``; the layout pass gives ``b`` and ``out`` one column / element
    a thread (``"outer"`` accesses)."""

    def __init__(self, func: N.PrimFunc, buffers: dict, folded: set, columns: bool = False):
        self.buffers, self.folded, self.columns = buffers, folded, columns
        self.fresh = LoopVars(func)

    def visit_reduce(self, s: N.Reduce):
        if id(s) not in self.folded:
            return s
        src, dst = self.buffers[s.src], self.buffers[s.dst]
        # a column fold: over src's first dim into (J,) -- the per-thread columns, or a
        # column reduction the layout pass kept in place (``s.dim == 0`` of a 2-D src) whose
        # src turned out replicated; else the lowered form: src reduced over its last dim
        # into dst of the leading dims, or of shape (1,) for a 1-D src
        columns = self.columns or (s.dim == 0 and src.ndim == 2)
        outs = [self.fresh("j" if columns else "i") for _ in dst.shape]
        k = self.fresh("k")
        target = tuple(outs)
        idx = (k, *outs) if columns else (tuple(outs) if src.ndim > 1 else ()) + (k,)
        value = N.cast(N.Load(src.name, idx, src.dtype), dst.dtype)
        fold = N.Store(dst.name, target, reduce_update(
            s.kind, N.Load(dst.name, target, dst.dtype), value, absolute=True,
            nan=s.nan_propagate), loc=s.loc)
        body: tuple = (N.For(k, N.Const(0, "int32"), src.shape[0 if columns else -1],
                             "unrolled", (fold,), loc=s.loc),)
        if s.clear:
            body = (N.Store(dst.name, target, reduce_identity(s.kind, dst.dtype), loc=s.loc),) + body
        for v, extent in reversed(list(zip(outs, dst.shape))):
            body = (N.For(v, N.Const(0, "int32"), extent, "parallel", body, loc=s.loc),)
        return body[0]


def _fold_replicated_reduces(func: N.PrimFunc, scope: N.KernelScope, k: _Kernel):
    """``scope`` with its reductions of replicated fragments folded thread by thread
    (:class:`_FoldReplicatedReduces`) and those reductions, or None when it has none."""
    k.spread_replication()
    folded = [r for r in k.reduces if r.src in k.replicated and r.src not in k.rows]
    if not folded:
        return None
    return _FoldReplicatedReduces(func, k.buffers, {id(r) for r in folded}).visit_kernel(scope), folded


def infer_layouts(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None) -> N.PrimFunc:
    """Option ``disable_in_place_column_reduce``: every column reduction of a fragment laid
    out by element moves its columns last through a shared tile (its output replicated)."""
    shared = target(arch).shared_per_block
    columns = not (options or {}).get("disable_in_place_column_reduce", False)
    return dataclasses.replace(func, kernels=tuple(
        _infer_kernel(func, scope, shared=shared, columns=columns) for scope in func.kernels))


def _shared_estimate(scope: N.KernelScope) -> int:
    """The bytes of the kernel's shared buffers, each counted with as many stages as it
    has or as the kernel's deepest T.Pipelined loop may give it later (the cp.async
    pipelining), whichever is more: above what the shared-memory pass will need (it also
    reuses the bytes of buffers whose lifetimes do not overlap)."""
    deepest = max([s.num_stages for s in walk_stmts(scope.body) if isinstance(s, N.For)] + [1])
    total = 0
    for s in walk_stmts(scope.body):
        if isinstance(s, N.Allocate) and s.buffer.scope == "shared" and not s.view_of and \
                all(isinstance(d, N.Const) for d in s.buffer.shape):
            size = stage_bytes(s.buffer)
            total += size * max(s.stages, deepest)
    return total


def _to_shared(func: N.PrimFunc, scope: N.KernelScope, names: dict) -> N.KernelScope:
    """``scope`` with the fragments ``names`` (name -> the nest that needs it) allocated in
    shared memory; one that another statement needs in registers (a reduction, scan or
    T.gemm operand), or that shares its registers with a view, is refused, naming the
    nest."""
    views = view_bases(scope.body)
    for s in walk_stmts(scope.body):
        ops, why = (), ""
        if isinstance(s, (N.Reduce, N.Scan)):
            ops, why = (s.src, s.dst), f"{type(s).__name__} needs it in registers"
        elif isinstance(s, N.Gemm):
            ops, why = (s.a, s.b, s.c), "Gemm needs it in registers"
        elif isinstance(s, N.Allocate) and (s.buffer.name in views or
                                            s.buffer.name in views.values()):
            ops, why = (s.buffer.name,), "it shares its registers with a view"
        bad = [n for n in ops if n in names]
        if bad:
            nest = names[bad[0]]
            where = f"{nest.loc}: " if getattr(nest, "loc", None) else ""
            raise LayoutError(f"{where}prim_func '{func.name}': fragment '{bad[0]}' is written "
                              "in a loop over the rows of a T.gemm accumulator (each row by the "
                              "threads holding it) at indices other than the rows', and "
                              f"{why}; write it in a loop over the accumulator's (i, j), or "
                              "keep it one value per row")

    hoisted = []  # (a shared buffer lives at the top level of its kernel)

    class _Demote(StmtMutator):
        depth = 0

        def visit_allocate(self, a):
            if a.buffer.name in names:
                a = dataclasses.replace(a, buffer=dataclasses.replace(a.buffer, scope="shared"),
                                        layout=None)
                if self.depth:
                    hoisted.append(a)
                    return None
            return a

        def generic(self, s):
            self.depth += 1
            try:
                return super().generic(s)
            finally:
                self.depth -= 1

    scope = _Demote().visit_kernel(scope)
    return dataclasses.replace(scope, body=tuple(hoisted) + scope.body)


def _unstage(scope: N.KernelScope, names: set) -> N.KernelScope:
    """``scope`` with the T.gemm operands staged from the fragments ``names`` (now shared
    buffers: ``large_replicated``) read from those buffers themselves: ``select_mma``
    copied each such fragment into a shared tile of the operand's layout just before the
    T.gemm; the buffer takes that layout (its other accesses go through it), the copy and
    the tile go.  Only where the tile is named by that copy and that T.gemm alone."""
    allocs = {s.buffer.name: s for s in walk_stmts(scope.body) if isinstance(s, N.Allocate)}
    found: dict[str, str] = {}  # staging tile -> the buffer it copies
    copies: set = set()

    def staging_copy(t, tile: str):
        """The fragment ``t`` copies whole into ``tile`` (a nest of one plain store)."""
        if not (isinstance(t, N.For) and t.kind == "parallel"):
            return None
        loops = parallel_nest(t)
        body = loops[-1].body
        if len(body) != 1 or not isinstance(body[0], N.Store) or body[0].buffer != tile or \
                not isinstance(body[0].value, N.Load):
            return None
        st, ld = body[0], body[0].value
        if ld.buffer not in names or st.indices != ld.indices or \
                tuple(getattr(i, "name", None) for i in st.indices) != tuple(lp.var.name for lp in loops):
            return None
        return ld.buffer

    def scan(stmts):
        for at, b in enumerate(stmts):
            if not isinstance(b, N.Gemm):
                continue
            for tile in (b.a, b.b):
                for back in range(at - 1, -1, -1):  # (past statements naming neither)
                    a = stmts[back]
                    src = staging_copy(a, tile)
                    if src is not None:
                        break
                    if buffers_used(a) & ({tile} | names):
                        break
                if src is not None and tile in allocs and src in allocs and \
                        allocs[tile].buffer.dtype == allocs[src].buffer.dtype and \
                        allocs[tile].buffer.shape == allocs[src].buffer.shape:
                    found[tile] = src
                    copies.add(id(a))
        for t in stmts:
            for field in BODY_FIELDS.get(type(t), ()):
                scan(getattr(t, field))

    scan(scope.body)
    for tile in list(found):  # named anywhere else: kept
        uses = [n for n in walk_nodes(scope.body) if n is not allocs[tile]
                and getattr(n, "buffer", None) == tile or isinstance(n, N.Gemm) and tile in (n.a, n.b)]
        if len(uses) != 2:  # (the copy's store and the T.gemm)
            del found[tile]
    if not found:
        return scope
    layout = {src: allocs[tile].layout for tile, src in found.items()}

    class _Unstage(StmtMutator):
        def visit_allocate(self, a):
            if a.buffer.name in found:
                return None
            if a.buffer.name in layout:
                return dataclasses.replace(a, layout=layout[a.buffer.name])
            return a

        def visit_for(self, t):
            if id(t) in copies and any(staging_copy(t, tile) for tile in found):
                return None
            return self.generic(t)

        def visit_gemm(self, g):
            return dataclasses.replace(g, a=found.get(g.a, g.a), b=found.get(g.b, g.b))

    return _Unstage().visit_kernel(scope)


def _infer_kernel(func: N.PrimFunc, scope: N.KernelScope, again: bool = True,
                  specials=True, packed: bool = True, shared: int = 0,
                  columns: bool = True) -> N.KernelScope:
    """One kernel's layouts (the module docstring)."""
    given = scope
    scope = _StageUnpairedFragments(func, scope).visit_kernel(scope)
    named = dataclasses.replace(func, kernels=func.kernels + (scope,))  # (fresh names
    # of the passes below avoid the staging's too)
    scope = _OrderNestByFragments(scope).visit_kernel(scope)
    scope = _PadToMmaFragment(named, scope).visit_kernel(scope)
    k = _Kernel(func, scope, specials, packed)
    k.collect(scope.body)
    off = k.columns_off_mma()
    # (the fold reads b[k, j] at an outer k: an owner access, off with "cols" alone)
    per_thread = _columns_per_thread(k, off) if specials in (True, "rows") else set()
    if per_thread:  # each thread folds the columns it holds (TileLang's column layout)
        scope = _FoldReplicatedReduces(named, k.buffers, per_thread, columns=True).visit_kernel(scope)
        named = dataclasses.replace(func, kernels=func.kernels + (scope,))
        off -= per_thread
    # the others reduce in their blocked layout where its rounds are whole rows of lane
    # groups (TileLang's layout: each thread keeps its columns), else move
    in_place = _columns_in_place(k, off, scope) if columns else frozenset()
    off -= in_place
    if off:  # lay out the kernel with those columns moved last
        scope = move_columns_last(named, scope, off)
        named = dataclasses.replace(func, kernels=func.kernels + (scope,))
    if per_thread or off or in_place:
        k = _Kernel(func, scope, specials, packed, columns=in_place)
        k.collect(scope.body)
    folded = _fold_replicated_reduces(named, scope, k)
    if folded is not None:  # lay out the kernel with the folds in place of the reduces
        scope, reduces = folded
        k = _Kernel(func, scope, specials, packed, columns=in_place)
        k.collect(scope.body)
        for r in reduces:  # a reduction's output is replicated, folded or not
            k.make_replicated(r.dst, r)
    demote = k.replicated_written_by_rows() if again else {}
    if demote:  # (see replicated_written_by_rows) laid out again with them in shared
        return _infer_kernel(func, _to_shared(func, scope, demote), again=False,
                             specials=specials, packed=packed, shared=shared, columns=columns)
    try:
        nest_mode, vector = k.decide()
    except _NoColumnLayout:  # (laid out again with those columns moved last)
        return _infer_kernel(func, given, again, specials=specials, packed=packed, shared=shared,
                             columns=False)
    except _NoOwnerLayout as e:  # laid out again with the special accesses' fragments
        # replicated: first those of the kind that failed (the packed reads, the column
        # factors, ``col``, or the others), then all
        if not k.specials:
            raise
        if e.demote is not None:
            try:
                moved = _to_shared(func, given, dict([e.demote]))
            except LayoutError:  # (needed in registers too: replicated instead)
                moved = None
            if moved is not None:
                return _infer_kernel(func, moved, again, specials=specials, packed=packed, shared=shared,
                                     columns=columns)
        if e.packed:
            return _infer_kernel(func, given, again, specials=specials, packed=False, shared=shared,
                                 columns=columns)
        fewer = ("rows" if e.cols else "cols") if specials is True else False
        return _infer_kernel(func, given, again, specials=fewer, packed=packed, shared=shared,
                             columns=columns)
    except LayoutError:  # a packed read's fragment, not replicated, met a replicated nest:
        # laid out as before the packed layouts (replicated)
        if packed and any(kind == "packed" for _, _, kind in k.specials):
            return _infer_kernel(func, given, again, specials=specials, packed=False, shared=shared,
                                 columns=columns)
        raise
    # (only where the layouts hold: a program refused by name stays refused)
    large = k.large_replicated() if again else {}
    moved = scope
    for name, why in large.items():  # (see large_replicated) laid out again in shared
        buf = k.buffers[name]
        size = stage_bytes(buf)
        if _shared_estimate(moved) + size > shared:
            continue  # (no room: stays)
        try:
            moved = _to_shared(func, moved, {name: why})
        except LayoutError:  # (needed in registers: stays)
            pass
    if moved is not scope:
        moved = _unstage(moved, set(large))
        return _infer_kernel(func, moved, again=False, specials=specials, packed=packed, shared=shared,
                             columns=columns)
    return k.rewrite(nest_mode, vector)


def _columns_per_thread(k: _Kernel, off: set) -> set:
    """Of the column reductions ``off`` (``dim=0`` of a 2-D fragment not laid out as a
    T.gemm accumulator), those whose columns are whole rounds of the block's threads
    (``(K, J)`` with ``J`` a multiple of them, into a ``(J,)`` fragment): each thread can
    hold whole columns (TileLang's layout of such a fragment: thread ``j`` holds column
    ``j``), so each folds its own."""
    out = set()
    for r in k.reduces:
        src, dst = k.buffers[r.src], k.buffers[r.dst]
        if id(r) not in off or src.ndim != 2 or dst.ndim != 1 or r.src in k.bases or \
                r.src in k.bases.values() or k.frag_region.get(r.src, (0, k.threads))[1] != k.threads:
            continue
        if all(isinstance(d, N.Const) for d in src.shape) and dst.shape[0] == src.shape[1] \
                and int(src.shape[1].value) % k.threads == 0:
            out.add(id(r))
    return out


def _columns_in_place(k: _Kernel, off: set, scope: N.KernelScope) -> frozenset:
    """Of the column reductions ``off`` (``dim=0`` of a 2-D fragment laid out by element,
    columns not whole rounds of the threads), those that may reduce in the source's
    blocked layout (:meth:`_Kernel.column_rounds` decides it once ``V`` is known): a
    ``(K, J)`` fragment of the block's threads, constant shape, into a ``(J,)`` fragment,
    neither a view nor viewed, the output no T.gemm row or column fragment, and the
    reduction not inside a nest or under a thread-selecting ``if`` (its shuffles and
    barrier need every thread of the block)."""
    top = {id(s) for s in _unconditional(scope.body)}
    out = set()
    for r in k.reduces:
        src, dst = k.buffers[r.src], k.buffers[r.dst]
        if id(r) not in off or id(r) not in top or src.ndim != 2 or dst.ndim != 1 or \
                dst.scope != "fragment" or {r.src, r.dst} & (set(k.bases) | set(k.bases.values())) or \
                r.dst in k.rows or r.dst in k.cols or \
                k.frag_region.get(r.src, (0, k.threads)) != (0, k.threads):
            continue
        if not (k.threads % WARP == 0 or k.threads <= WARP and k.threads & (k.threads - 1) == 0):
            continue
        if all(isinstance(d, N.Const) for d in src.shape) and dst.shape[0] == src.shape[1]:
            out.add(id(r))
    return frozenset(out)


def _unconditional(body) -> list:
    """The statements of ``body`` that every thread of the block reaches: at its top level
    and in the bodies of serial / pipelined loops and of ``if``s not on the thread index
    below it (an ``if`` selecting threads by a Let of it the layout pass refuses for a
    reduction: ``narrowed``)."""
    out = []
    for s in body:
        out.append(s)
        if isinstance(s, N.For) and s.kind in ("serial", "pipelined", "unrolled"):
            out += _unconditional(s.body)
        elif isinstance(s, N.If) and not any(isinstance(c, N.Call) and c.name == "thread_idx"
                                             for c in walk_nodes(s.cond)):
            out += _unconditional(s.then) + _unconditional(s.orelse)
    return out


def _partition(layout: N.Layout) -> str:
    """An accumulator's partition in words: ``wgmma, 1 x 2 warpgroups`` (along M x N)."""
    if layout.mma == "wgmma":
        return f"wgmma, {layout.warps[0]} x {layout.warps[1]} warpgroups"
    return f"mma.sync, {layout.warps[0]} x {layout.warps[1]} warps"
