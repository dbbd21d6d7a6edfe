"""Analyses several passes and the code generator share; they never change the IR.
Integer facts about expressions (value ranges, known divisors, affine forms, whether an
expression mentions a variable), the loads of an expression, the accesses of a
statement list, parallel nests, names in use, and sizes of buffers."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Optional

from ..ir import nodes as N
from ..ir.nodes import known_multiple  # noqa: F401  (the passes read it here)
from ..ir.printer import expr_str
from ..ir.visitor import (Range, linear_form, replace_stmt, substitute, value_range, var_names,  # noqa: F401
                          walk_nodes, walk_stmts)
from ..runtime.dtypes import DTYPES, storage_bytes
from ..target import TMA_MAX_BOX, TMA_MAX_RANK, WARP, arch_at_least  # noqa: F401


def loads(e, nested: bool = True):
    """Every ``Load`` in an expression (or tuple of them); with ``nested=False`` not the
    loads inside another load's indices (gathers)."""
    if isinstance(e, N.Load):
        yield e
        if nested:
            yield from loads(e.indices)
    elif isinstance(e, N.Expr):
        for v in vars(e).values():
            yield from loads(v, nested)
    elif isinstance(e, tuple):
        for v in e:
            yield from loads(v, nested)


def top_loads(e):
    """Loads in ``e`` that are not inside another load's indices."""
    return loads(e, nested=False)


def let_values(body) -> dict[str, N.Expr]:
    """The top-level ``Let`` bindings of a statement list, each with the earlier ones
    substituted into its value (what a variable bound in a loop body stands for in terms
    of the loop's own variables)."""
    out: dict[str, N.Expr] = {}
    for s in body:
        if isinstance(s, N.Let):
            out[s.var.name] = substitute(s.value, out) if out else s.value
    return out


def names_in(x) -> set[str]:
    """Every name in ``x`` (statements, expressions, nested tuples): the buffers it may
    touch, and more (a conservative superset; source locations excluded)."""
    out: set[str] = set()

    def visit(v):
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, (tuple, list)):
            for y in v:
                visit(y)
        elif dataclasses.is_dataclass(v) and not isinstance(v, (type, N.Loc)):
            for f in dataclasses.fields(v):
                if f.name != "loc":
                    visit(getattr(v, f.name))
    visit(x)
    return out


def tainted_lets(body, seed=(), taints=lambda value: False) -> set[str]:
    """The names in ``seed`` and those of ``body``'s Lets (in program order) whose values
    read such a name or satisfy ``taints``: the values that may differ where ``taints``
    says a value does (the thread index: each thread's own)."""
    out = set(seed)
    for t in walk_stmts(body):
        if isinstance(t, N.Let) and (var_names(t.value) & out or taints(t.value)):
            out.add(t.var.name)
    return out


def reads_thread_index(e) -> bool:
    """Does ``e`` call the thread index itself?"""
    return any(isinstance(c, N.Call) and c.name in ("thread_idx", "shuffle_elect")
               for c in walk_nodes(e))


def buffer_scope(allocs: dict, name: str) -> str:
    """The scope of buffer ``name``: its allocation's (``allocs``: name -> Allocate), else
    ``"global"`` (a parameter)."""
    a = allocs.get(name)
    return a.buffer.scope if a is not None else "global"


def thread_dependent(exprs, body) -> bool:
    """Do ``exprs`` read the thread index, directly or through ``body``'s Lets (a
    kernel's ``tx = T.get_thread_binding()``)?"""
    return bool(var_names(exprs) & tainted_lets(body, taints=reads_thread_index)) or \
        reads_thread_index(exprs)


def mentions(e, name: str) -> bool:
    if isinstance(e, N.Var):
        return e.name == name
    if isinstance(e, N.Expr):
        return any(mentions(v, name) for v in vars(e).values())
    if isinstance(e, tuple):
        return any(mentions(v, name) for v in e)
    return False


def affine_in(e: N.Expr, name: str) -> Optional[N.Expr]:
    """If ``e == name + c`` with ``c`` free of ``name``, return ``c``; else None."""
    if isinstance(e, N.Var) and e.name == name:
        return N.Const(0, "int32")
    if isinstance(e, N.BinOp) and e.op == "add":
        if not mentions(e.b, name):
            c = affine_in(e.a, name)
            return None if c is None else N.binop("add", c, e.b)
        if not mentions(e.a, name):
            c = affine_in(e.b, name)
            return None if c is None else N.binop("add", e.a, c)
    if isinstance(e, N.BinOp) and e.op == "sub" and not mentions(e.b, name):
        c = affine_in(e.a, name)
        return None if c is None else N.binop("sub", c, e.b)
    if isinstance(e, N.Cast) and e.dtype == "int64" and e.value.dtype == "int32":
        # an int32 index widened into int64 index arithmetic (x[bx * 512 + i] over an int64
        # bx): its value is the int32 value's, so the offset widens with it
        c = affine_in(e.value, name)
        return None if c is None else N.cast(c, "int64")
    return None


def launch_sized(buf: N.Buffer) -> bool:
    """Is ``buf`` a shared buffer sized at launch (TileLang's dynamic shared memory: a dim
    of the function's symbols or scalar parameters)?"""
    return buf.scope == "shared" and not all(isinstance(x, N.Const) for x in buf.shape)


def stage_bytes(buf: N.Buffer) -> int:
    """Bytes of one stage of a shared buffer of static shape; 0 for one sized at launch
    (:func:`launch_sized`: its bytes follow the static ones, counted by the launcher)."""
    if launch_sized(buf):
        return 0
    return storage_bytes(buf.dtype, math.prod(int(x.value) for x in buf.shape))


def is_unit(e) -> bool:
    """Is extent ``e`` (an int or a ``Const``) 1?"""
    return e == 1 or (isinstance(e, N.Const) and e.value == 1)


def squeeze(shape) -> tuple:
    """Drop the unit extents of a tile (a (1, 64) or (64, 1) tile copies like a (64,)
    one, ``Q[b, s:s + 64, h, :]`` like a (64, D) one); keep at least one."""
    kept = tuple(x for x in shape if not is_unit(x))
    return kept or tuple(shape)[-1:]


INT32_MAX = 2**31 - 1


def max_offset(buf: N.Buffer) -> int | None:
    """The largest element offset of ``buf`` (sum of (extent - 1) * stride), or None when
    its shape or strides hold symbols."""
    total = 0
    for d, st in zip(buf.shape, row_major_strides(buf)):
        if not (isinstance(d, N.Const) and isinstance(st, N.Const)):
            return None
        total += (int(d.value) - 1) * int(st.value)
    return total


def int64_dims(buf: N.Buffer) -> bool:
    """Does ``buf`` have an int64 dim or stride (an int64 symbol, an extent past int32)?"""
    return any(d.dtype == "int64" for d in buf.shape + (buf.strides or ()))


def may_pass_int32(buf: N.Buffer) -> bool:
    """May an element offset of global tensor ``buf`` pass int32?  A 1-D contiguous tensor
    never does (its extent is a symbol the launcher checks, or a constant); one whose shape
    or strides multiply symbols may."""
    bound = max_offset(buf)
    if bound is not None:
        return bound > INT32_MAX
    if int64_dims(buf):
        return True
    strides = row_major_strides(buf)
    return not (buf.ndim == 1 and isinstance(strides[0], N.Const) and strides[0].value == 1)


def row_major_strides(buf: N.Buffer, wide: bool = False) -> tuple[N.Expr, ...]:
    """Element strides of ``buf``: its declared strides, or row-major from its shape;
    ``wide``: each stride but the last 1 int64, its product computed in int64 (a
    64-bit-offset tensor's strides never wrap)."""
    if buf.strides is not None:
        if wide:
            return tuple(s if isinstance(s, N.Const) and s.value == 1 else N.cast(s, "int64")
                         for s in buf.strides)
        return buf.strides
    strides: list[N.Expr] = [N.Const(1, "int32")]
    for d in reversed(buf.shape[1:]):
        one = isinstance(strides[0], N.Const) and strides[0].value == 1
        if wide:
            d = N.cast(d, "int64")
        strides.insert(0, d if one else N.binop("mul", strides[0], d))
    return tuple(strides)


def with_innermost(nest: N.For, **changes) -> N.For:
    """``nest`` with ``changes`` made to the innermost loop of its parallel nest
    (:func:`parallel_nest`)."""
    if len(nest.body) == 1 and isinstance(nest.body[0], N.For) and nest.body[0].kind == "parallel":
        return dataclasses.replace(nest, body=(with_innermost(nest.body[0], **changes),))
    return dataclasses.replace(nest, **changes)


def parallel_nest(loop: N.For) -> list[N.For]:
    """The loops of the parallel nest headed by ``loop`` (``for i, j in T.Parallel(a, b)``)."""
    loops = [loop]
    while len(loops[-1].body) == 1 and isinstance(loops[-1].body[0], N.For) \
            and loops[-1].body[0].kind == "parallel":
        loops.append(loops[-1].body[0])
    return loops


# the intrinsics without effects and without thread state (pure in TVM's sense)
PURE_CALLS = frozenset(N.FLOAT_MATH + N.FLOAT_PREDICATES + N.IEEE_FORMS + (
    "abs", "fma", "ceildiv", "truncdiv", "truncmod", "popcount", "clz", "reinterpret", "ffs",
    "bitwise_not", "min", "max"))


def plain_statements(body) -> bool:
    """Stores and Lets only, calling only pure math (no barrier, shuffle, vote, atomic,
    draw): which thread runs which iteration, and when, does not show."""
    return all(isinstance(t, (N.Store, N.Let)) for t in body) and \
        all(c.name in PURE_CALLS for c in walk_nodes(body) if isinstance(c, N.Call))


def accesses(body):
    """(buffer, indices, is_write) of every buffer access in ``body``, nested statements
    included."""
    out = []

    def expr(e):
        for ld in loads(e):
            out.append((ld.buffer, ld.indices, False))
        for c in walk_nodes(e):  # an atomic returning the old value writes its element too
            if isinstance(c, N.Call) and c.name in N.ATOMIC_RETURNS:
                out.append((c.args[0].buffer, c.args[0].indices, True))

    def visit(s):
        if isinstance(s, N.Store):
            out.append((s.buffer, s.indices, True))
            expr(s.indices)
            expr(s.value)
        elif isinstance(s, N.AtomicAdd):
            out.append((s.dst.buffer, s.dst.starts, True))
            expr(s.dst.starts)
            if isinstance(s.value, N.Expr):
                expr(s.value)
        elif isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
                s.value.name == "ptx_cp_async":  # writes its shared element (and the next)
            dst, src, _ = s.value.args
            out.append((dst.buffer, dst.indices, True))
            expr(dst.indices)
            expr(src)
        elif isinstance(s, (N.Let, N.Evaluate)):
            expr(s.value)
        elif isinstance(s, N.Gemm):
            out.extend([(s.a, (), False), (s.b, (), False), (s.c, (), False), (s.c, (), True)])
        elif isinstance(s, N.ClusterCopy):  # its stores land in another block's memory
            out.append((s.src.buffer, s.src.starts, False))
            expr(s.src.starts + s.dst.starts + (s.block,))
        elif isinstance(s, N.TmaCopy):  # TMA's own accesses are ordered by the sync pass
            expr(s.src.starts + s.dst.starts)
        elif isinstance(s, N.If):
            expr(s.cond)
            for t in s.then + s.orelse:
                visit(t)
        elif isinstance(s, N.For):
            expr((s.start, s.extent))
            for t in s.body:
                visit(t)
        elif isinstance(s, N.While):
            expr(s.cond)
            for t in s.body:
                visit(t)
        elif isinstance(s, N.WarpGroups):
            for t in s.body:
                visit(t)
        elif isinstance(s, N.Scan):
            out.extend([(s.src, (), False), (s.dst, (), True)])
        elif isinstance(s, N.Im2Col):
            out.extend([(s.img, (), False), (s.col, (), True)])
            expr((s.nhw_step, s.c_step))
        elif isinstance(s, (N.FinalizeReducer, N.CombineRows)):
            out.extend([(s.buffer, (), False), (s.buffer, (), True)])
        elif isinstance(s, N.SegmentReduce):
            out.extend([(s.src, (), False), (s.dst, (), True)])
        elif isinstance(s, N.ThreadAllReduce):  # (its scratch: the barrier pass's reduction)
            expr(s.values)
            out.extend((d, (N.Const(0, "int32"),), True) for d in s.dsts)
    for s in body:
        visit(s)
    return out


@dataclasses.dataclass(frozen=True)
class AllReduceStep:
    """One step of a thread all-reduce (``ThreadAllReduce``): the reduced thread dims that
    lie next to each other in the linear thread index (dims of extent 1 between them do
    not count) are one run, whose ``extent`` threads of a group stand ``stride`` apart
    (the product of the extents of the dims below).  Shuffles combine ``lanes`` of them
    within each warp (butterflies over lanes ``stride`` apart; 1: none, when the stride
    or the extent is not a power of two or the stride spans a warp); the ``extent //
    lanes`` partials left, ``stride * lanes`` threads apart, meet through shared memory
    (``crosses``)."""

    stride: int
    extent: int
    lanes: int

    @property
    def crosses(self) -> bool:
        return self.extent > self.lanes


def allreduce_steps(threads, dims) -> list[AllReduceStep]:
    """The steps of an all-reduce over thread dims ``dims`` of a block of ``threads``
    (``(x, y, z)``, fewer dims meaning 1), one per run of reduced dims."""
    runs: list[list[int]] = []  # [stride, extent]
    below, last_reduced = 1, False
    for d, ext in enumerate(threads):
        if ext == 1:
            continue
        if d in dims:
            if last_reduced:
                runs[-1][1] *= ext
            else:
                runs.append([below, ext])
        last_reduced = d in dims
        below *= ext
    out = []
    for stride, extent in runs:
        pow2 = not stride & (stride - 1) and not extent & (extent - 1)
        lanes = min(extent, WARP // stride) if pow2 and stride < WARP else 1
        out.append(AllReduceStep(stride, extent, lanes))
    return out


def written_buffers(body) -> set[str]:
    """The buffers some statement of ``body`` (nested ones included) names as its write
    target (a store's, a tile op's ``dst``, a clear's, a GEMM's ``c``)."""
    out = set()
    for x in walk_stmts(body):
        for field in ("dst", "buffer", "c"):  # every statement's write target
            v = getattr(x, field, None)
            out.update([v.buffer] if isinstance(v, N.Region) else [v] if isinstance(v, str) else [])
    return out


def written_globals(func: N.PrimFunc, body) -> set[str]:
    """The global buffers (parameters and workspaces) some statement of ``body`` writes."""
    return {b for b in written_buffers(body) if func.buffer(b) is not None}


def fresh_name(taken: set[str], stem: str, sep: str = "_", first: int = 1, bare: bool = True) -> str:
    """The first of ``stem`` (unless ``bare`` is False), ``stem{sep}{first}``,
    ``stem{sep}{first + 1}``... that is not in ``taken``; it is added to ``taken``. Passes
    pass the spelling their names have always had (``x_1``, ``x1``, ``tc_bar0``)."""
    numbered = (f"{stem}{sep}{n}" for n in itertools.count(first))
    name = next(c for c in itertools.chain([stem] if bare else [], numbered) if c not in taken)
    taken.add(name)
    return name


class LoopVars:
    """Fresh int32 loop variables for the nests a pass builds: ``stem`` and a counter the
    whole pass shares (``i1``, ``i2``...), skipping every name the function uses."""

    def __init__(self, func: N.PrimFunc):
        self.names = all_names(func)
        self.counter = 0

    def __call__(self, stem: str) -> N.Var:
        while True:
            self.counter += 1
            name = f"{stem}{self.counter}"
            if name not in self.names:
                self.names.add(name)
                return N.Var(name, "int32")


def all_names(func: N.PrimFunc) -> set[str]:
    """Every variable and buffer name in ``func`` (fresh names avoid them)."""
    return {n.name for n in walk_nodes(func) if isinstance(n, (N.Var, N.Buffer))}


def buffers_used(s) -> set[str]:
    """Every buffer statement ``s`` names (nested statements included)."""
    out: set[str] = set()
    for x in walk_nodes(s):
        if isinstance(x, (N.Load, N.Store, N.Region)):
            out.add(x.buffer)
        elif isinstance(x, N.Gemm):
            out.update((x.a, x.b, x.c))
        elif isinstance(x, N.Reduce):
            out.update(b for b in (x.src, x.dst, x.scratch) if b)
        elif isinstance(x, N.Clear):
            out.add(x.buffer)
        elif isinstance(x, N.Scan):
            out.update((x.src, x.dst))
        elif isinstance(x, N.Im2Col):
            out.update((x.img, x.col))
        elif isinstance(x, (N.FinalizeReducer, N.CombineRows)):
            out.update(b for b in (x.buffer, x.scratch) if b)
        elif isinstance(x, N.SegmentReduce):
            out.update((x.src, x.dst))
        elif isinstance(x, N.ThreadAllReduce):
            out.update(x.dsts + x.scratch)
    return out


def lifetimes(scope: N.KernelScope) -> dict[str, tuple[int, int]]:
    """First and last top-level statement of the kernel that uses each buffer."""
    out: dict[str, tuple[int, int]] = {}
    for i, s in enumerate(scope.body):
        if isinstance(s, N.Allocate):
            continue
        for b in buffers_used(s):
            lo, _ = out.get(b, (i, i))
            out[b] = (lo, i)
    return out


# ---- TMA ---------------------------------------------------------------------------------
def no_tma_coordinates(glob: N.Buffer) -> str:
    """Why TMA cannot address global tensor ``glob`` ("" when it can): an int64 dim.  The
    driver takes extents up to 2**32, but a TMA copy's coordinates are 32-bit signed."""
    wide = [d for d, x in enumerate(glob.shape) if x.dtype == "int64"]
    if not wide:
        return ""
    return (f"'{glob.name}' has an int64 dim (shape[{wide[0]}]); TMA coordinates are 32-bit "
            "signed (cp.async.bulk.tensor), so they cannot reach its elements past 2**31 - 1")


def tma_box(glob: N.Buffer, region: N.Region, shared: N.Buffer, swizzle: int,
            rows: int | None = None, split: bool = False) -> tuple | str:
    """The box (tensor axis order) of a TMA copy between ``region`` of global ``glob``
    and the whole shared buffer ``shared`` (or, with ``rows``, its first ``rows`` rows:
    a :func:`row_slice`), or why TMA cannot do it.  With a swizzle the box is one
    ``swizzle``-byte chunk of the tile's last dim; the copy moves the tile as
    consecutive boxes (the ``tma_swizzled`` layout stores the chunks one after another).
    ``split`` (the program's ``T.tma_copy``): an unswizzled box of one row (every dim but
    the last 1) longer than TMA's 256 is cut, as TileLang moves it in several copies, into
    consecutive boxes of the widest length up to 256 that divides it (a multiple of 16
    bytes): the chunks of one row lie one after another in shared memory too."""
    if glob.dtype != shared.dtype:
        return f"the dtypes differ ({glob.dtype} and {shared.dtype}); TMA does not convert"
    if no_tma_coordinates(glob):
        return no_tma_coordinates(glob)
    if not 1 <= glob.ndim <= TMA_MAX_RANK:
        return f"'{glob.name}' has {glob.ndim} dims; TMA tensors have 1 to {TMA_MAX_RANK}"
    if launch_sized(shared):
        return (f"'{shared.name}' is sized at launch; a TMA box is fixed when the descriptor "
                "is built")
    tile = [int(d.value) for d in shared.shape]
    if rows is not None:
        tile[0] = rows
    if region.extents is not None:  # the region's unit dims may stand anywhere
        ext = [int(e.value) if isinstance(e, N.Const) else None for e in region.extents]
        if None in ext or squeeze(ext) != squeeze(tile):
            return f"the region's extents {ext} are not the shared tile's {tile}"
        box = tuple(ext)
    else:  # a region origin: the tile's dims are the tensor's last ones
        while len(tile) > glob.ndim and tile[0] == 1:
            tile.pop(0)
        if len(tile) > glob.ndim:
            return f"the shared tile has more dims than '{glob.name}'"
        box = (1,) * (glob.ndim - len(tile)) + tuple(tile)
    esize = DTYPES[glob.dtype].bytes
    if swizzle and box[-1] * esize % swizzle:
        return (f"a {swizzle}-byte TMA swizzle copies rows in {swizzle}-byte chunks; the box's "
                f"rows have {box[-1] * esize} bytes")
    if swizzle and box[-1] * esize > swizzle and math.prod(tile[:-2]) > 1:
        return (f"the shared tile {tile} holds {math.prod(tile[:-2])} matrices, each cut into "
                f"{swizzle}-byte chunks of its own; one box per chunk cannot fill them")
    if swizzle:  # one box per chunk of the last dim
        box = box[:-1] + (swizzle // esize,)
    elif split and box[-1] > TMA_MAX_BOX and math.prod(box[:-1]) == 1:
        step = next((w for w in range(TMA_MAX_BOX, 0, -1)
                     if box[-1] % w == 0 and w * esize % 16 == 0), None)
        if step is None:
            return (f"box {list(box)}: its {box[-1]} elements do not cut into boxes of at most "
                    f"{TMA_MAX_BOX} elements and a multiple of 16 bytes")
        box = box[:-1] + (step,)
    if any(b > TMA_MAX_BOX for b in box):
        return f"box {list(box)} has a dim above {TMA_MAX_BOX}"
    strides = row_major_strides(glob)
    if not (isinstance(strides[-1], N.Const) and strides[-1].value == 1):
        return f"the last dim of '{glob.name}' is not contiguous (stride 1)"
    for d, st in enumerate(strides[:-1]):
        if known_multiple(st) * esize % 16:
            return (f"stride {d} of '{glob.name}' is not known to be a multiple of 16 bytes "
                    "(declare the extents with T.symbolic(..., multiple_of=...))")
    inner = box[-1] * esize
    if inner % 16:
        return f"the box's inner dim is {inner} bytes, not a multiple of 16"
    if region.starts and len(region.starts) == glob.ndim and \
            _misaligned(region.starts[-1], esize):
        # TMA's innermost coordinate must be a multiple of 16 bytes (measured on an H100:
        # a float32 halo box at column bx * 32 - 2 stopped the kernel with an illegal
        # instruction; rows at any offset, columns at multiples of 4 floats loaded right)
        return (f"the box starts at column {expr_str(region.starts[-1])} of '{glob.name}', "
                "off a multiple of 16 bytes (TMA's innermost coordinate must be one)")
    return box


def _misaligned(start: N.Expr, esize: int) -> bool:
    """Is ``start`` (elements of ``esize`` bytes) provably off a multiple of 16 bytes: its
    variable terms multiples of 16 bytes and its constant not (``bx * 32 - 2`` of float32)?
    A start whose terms say nothing (a Let's name, a select, a division) is not refused:
    the launch is the program's to align, as before."""
    form = linear_form(start)
    if form is None:
        return False
    const = form.get(None, 0)
    return all(c * esize % 16 == 0 for v, c in form.items() if v is not None) and \
        const * esize % 16 != 0


def batch_may_stay_in_flight(acc_dtype: str) -> bool:
    """May a wgmma batch accumulating in ``acc_dtype`` stay in flight past its T.gemm?
    Only with a 32-bit accumulator: CuTe DSL repacks 16-bit accumulator registers (two per
    register) around each wgmma, which is wrong while the batch runs (measured on an H100:
    float16 accumulators of 128-row tiles came out wrong with 2 pipeline stages)."""
    return DTYPES[acc_dtype].bits == 32


def row_slice(r: N.Region, buf: N.Buffer, swizzle: int,
              symbolic: bool = False) -> tuple[int | N.Expr, int] | None:
    """``(first row, rows)`` when region ``r`` of shared ``buf`` is whole but for a
    constant range of its first dim that TMA can fill on its own (``K_s[16:32, :]`` of a 2-D
    tile, one page of a paged tile): the range starts at a multiple of 1024 bytes within each
    ``swizzle``-byte chunk (the swizzle pattern's period, so the slice's pattern is the
    tile's) or, unswizzled, of 128 bytes (TMA's shared-memory alignment).  None
    otherwise (a whole buffer included).  ``symbolic`` (the program's ``T.tma_copy``): an
    unswizzled range of a constant count may start at a row computed at run time
    (``a_s[warp, 0:K]``: one warp's row) where every row it can be starts at a multiple of
    128 bytes; ``first`` is then that expression."""
    if r.extents is None or buf.ndim != 2 or len(r.starts) != 2:
        return None
    starts, exts = r.starts, r.extents
    if symbolic and not swizzle and not isinstance(starts[0], N.Const) and \
            isinstance(exts[0], N.Const) and \
            all(isinstance(x, N.Const) and x.value == 0 for x in starts[1:]) and \
            tuple(exts[1:]) == tuple(buf.shape[1:]) and 0 < exts[0].value < int(buf.shape[0].value):
        row_bytes = DTYPES[buf.dtype].bytes * int(buf.shape[1].value)
        if known_multiple(starts[0]) * row_bytes % 128 == 0:
            return starts[0], int(exts[0].value)
        return None
    if not (isinstance(starts[0], N.Const) and isinstance(exts[0], N.Const)):
        return None
    if any(not (isinstance(x, N.Const) and x.value == 0) for x in starts[1:]) or \
            tuple(exts[1:]) != tuple(buf.shape[1:]):
        return None
    first, rows, total = starts[0].value, exts[0].value, int(buf.shape[0].value)
    if (first, rows) == (0, total) or rows <= 0 or first + rows > total:
        return None
    row_bytes = swizzle or DTYPES[buf.dtype].bytes * int(buf.shape[1].value)
    if first * row_bytes % (1024 if swizzle else 128):
        return None
    return first, rows


def column_slice(r: N.Region, buf: N.Buffer, swizzle: int) -> tuple[N.Expr, int] | None:
    """``(first column, columns)`` when region ``r`` of the 2-D ``tma_swizzled`` shared
    ``buf`` is whole but for a range of its last dim of whole ``swizzle``-byte chunks
    (``KV_s[:, j * 64:(j + 1) * 64]``: the first column a known multiple of a chunk, the
    count a constant multiple): those chunks lie one after another from chunk ``first /
    width``, so TMA fills them as it fills a whole tile.  None otherwise (a whole buffer
    included)."""
    if not swizzle or r.extents is None or buf.ndim != 2 or len(r.starts) != 2:
        return None
    (r0, c0), (rows, cols) = r.starts, r.extents
    if not (isinstance(r0, N.Const) and r0.value == 0 and rows == buf.shape[0]) or \
            not isinstance(cols, N.Const) or cols == buf.shape[1]:
        return None
    width = swizzle // DTYPES[buf.dtype].bytes
    if known_multiple(c0) % width or cols.value % width or cols.value <= 0:
        return None
    return c0, int(cols.value)


def whole(r: N.Region, buf: N.Buffer) -> bool:
    """Does region ``r`` cover all of ``buf``?"""
    if not all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
        return False
    return r.extents is None or tuple(r.extents) == tuple(buf.shape)


def matrix_slice(r: N.Region, buf: N.Buffer, swizzle: int = 0) -> tuple[N.Expr, ...] | None:
    """The leading indices when region ``r`` of shared ``buf`` (of more than 2 dims) is
    one whole matrix of its last two dims, ``A_s[s, :, :]`` (scalar, possibly run-time
    leading indices), whose bytes are a multiple of what a TMA copy into it needs (1024
    bytes with a swizzle: the pattern's period; else 128); None otherwise."""
    if buf.ndim <= 2 or r.extents is None or len(r.starts) != buf.ndim:
        return None
    lead, starts, exts = r.starts[:-2], r.starts[-2:], r.extents
    if any(not (isinstance(e, N.Const) and e.value == 1) for e in exts[:-2]) or \
            any(not (isinstance(x, N.Const) and x.value == 0) for x in starts) or \
            tuple(exts[-2:]) != tuple(buf.shape[-2:]):
        return None
    size = math.prod(int(d.value) for d in buf.shape[-2:]) * DTYPES[buf.dtype].bytes
    if size % (1024 if swizzle else 128):
        return None
    return tuple(lead)


def matrix_of(buf: N.Buffer) -> N.Buffer:
    """One matrix of ``buf`` (its last two dims) as a buffer of its own."""
    return dataclasses.replace(buf, shape=buf.shape[-2:], strides=None)


def tma_swizzle(alloc: N.Allocate | None) -> int:
    """The TMA swizzle (bytes) of a shared allocation, 0 for none."""
    layout = alloc.layout if alloc is not None else None
    return layout.swizzle if layout is not None and layout.kind == "tma_swizzled" else 0


# ---- views (T.view / T.reshape / T.Tensor(shape, dtype, buf.data)) -------------------------
def view_bases(body) -> dict[str, str]:
    """Each view allocated in ``body`` (nested statements included) -> the buffer whose
    storage it views (``Allocate.view_of``)."""
    return {s.buffer.name: s.view_of for s in walk_stmts(body)
            if isinstance(s, N.Allocate) and s.view_of}


def view_family(bases: dict[str, str], name: str) -> set[str]:
    """``name``, the buffer it views and every view of that buffer (``bases``: from
    :func:`view_bases`): the names one storage goes by."""
    root = bases.get(name, name)
    return {root, name} | {v for v, b in bases.items() if b == root}


def aliased(body) -> set[str]:
    """The buffers of ``body`` that share storage with another: views and their bases."""
    bases = view_bases(body)
    return set(bases) | set(bases.values())


def view_layout(base: N.Buffer, layout: Optional[N.Layout], view: N.Buffer) -> N.Layout | str:
    """The layout of shared ``view`` under which each of its elements is the bytes it
    views of ``base`` laid out by ``layout`` (None: row-major), or why there is none.
    Row-major bases give row-major views; a TMA-swizzled base gives its swizzle to views
    whose rows have the base's bytes (the chunks and the XOR pattern are on bytes of rows),
    and, when its rows fit one chunk (the pattern is then on its flat byte offset), to any
    view of whole-byte elements as the same pattern on the view's flat offset (``flat``);
    a column-swizzled base (``c ^ (r % s)``) gives its swizzle to views of its dtype, its
    row length and 2 or more dims, when both have whole ``s``-row groups per matrix."""
    if layout is None or layout.kind == "row_major":
        return N.Layout("row_major")
    esize, vsize = DTYPES[base.dtype].bytes, DTYPES[view.dtype].bytes
    if layout.kind == "tma_swizzled":
        rows, vrows = int(base.shape[-1].value) * esize, int(view.shape[-1].value) * vsize
        if rows == vrows:
            return layout
        if rows <= layout.swizzle and DTYPES[base.dtype].pack == DTYPES[view.dtype].pack == 1:
            # the base's rows fit one chunk: the pattern is on its flat (byte) offset, which
            # is the view's (TileLang's T.reshape of a swizzled tile)
            return dataclasses.replace(layout, flat=True)
        return (f"its rows have {vrows} bytes and the rows of '{base.name}' {rows}; the "
                f"{layout.swizzle}-byte TMA swizzle of '{base.name}' cuts its rows into "
                f"{layout.swizzle}-byte chunks")
    if layout.kind == "swizzled":
        s = layout.swizzle
        if view.dtype != base.dtype or view.ndim < 2 or view.shape[-1] != base.shape[-1]:
            return (f"'{base.name}' is column-swizzled (column c of row r at c ^ (r % {s})); a "
                    "view keeps that only with its dtype, its row length and 2 or more dims")
        for b in (base, view):
            if b.ndim > 2 and int(b.shape[-2].value) % s:
                return (f"'{b.name}' has {int(b.shape[-2].value)} rows per matrix, not a "
                        f"multiple of the swizzle's {s}")
        return layout
    return f"'{base.name}' has layout {layout.kind}, which a view cannot share"


def syncs_grid(body) -> bool:
    """Does ``body`` call ``T.sync_grid()`` (its kernel launches cooperatively)?"""
    return any(isinstance(x, N.Call) and x.name == "sync_grid" for x in walk_nodes(body))


def has_pdl_calls(body) -> bool:
    """Does ``body`` call ``T.pdl_sync`` / ``T.pdl_trigger`` (the program places the PDL
    wait and trigger itself)?"""
    return any(isinstance(x, N.Call) and x.name in N.PDL_CALLS for x in walk_nodes(body))


def nested_pipelined(s) -> list | None:
    """The statements from ``s`` (a top-level ``T.serial`` loop: a persistent kernel's loop
    over its tiles, as ``T.Persistent`` builds it; or a top-level ``if`` the block decides
    as one, not on the thread index: an MoE expert's ``if rows > 0:`` around its GEMM)
    down to the one ``T.Pipelined`` loop inside it, through serial loops and ifs only
    (``[s, ..., loop]``); None when there is no such loop, or more than one."""
    if isinstance(s, N.If):
        if reads_thread_index(s.cond):
            return None
    elif not (isinstance(s, N.For) and s.kind == "serial"):
        return None
    found = []

    def visit(t, path):
        if isinstance(t, N.For) and t.kind == "pipelined":
            found.append(path + [t])
        elif isinstance(t, N.For) and t.kind == "serial":
            for u in t.body:
                visit(u, path + [t])
        elif isinstance(t, N.If):
            for u in t.then + t.orelse:
                visit(u, path + [t])
    visit(s, [])
    return found[0] if len(found) == 1 else None


def under_ifs(path: list) -> bool:
    """Is the pipelined loop at the end of ``path`` (:func:`nested_pipelined`) under
    ``if``s alone, with no outer loop?  It runs at most once then, as a top-level loop
    does, so the software pipeline takes it as one."""
    return all(isinstance(s, N.If) for s in path[:-1])


def guarded_body(body) -> tuple:
    """``(cond, lets, then)`` of a pipelined loop's body that is one ``if cond:`` with no
    ``else``, after ``Let``s: the callers pipeline it (the cp.async pipeline, the TMA loads
    of a producer warpgroup) when the condition each step decides alone (through
    the step's Lets it reads the loop variable, values from outside the loop and buffers
    the loop does not write, calling only pure math: a block-sparse mask, ``if Mask[by, bx,
    k]:``, ``i_s = Idx[b, h, k]; if i_s >= 0:``), so a later step's copies can be guarded
    by it; else ``(None, (), body)``.  TileLang pipelines such a body too, each statement
    under the step's guard."""
    n = 0
    while n < len(body) and isinstance(body[n], N.Let):
        n += 1
    if len(body) == n + 1 and isinstance(body[n], N.If) and not body[n].orelse:
        # (Lets before it, ``i_s = Idx[b, k]; if i_s >= 0:``: the caller resolves the
        # condition through the step's Lets, or gives up)
        return body[n].cond, tuple(body[:n]), body[n].then
    return None, (), body


def without_body(body, loop) -> tuple:
    """``body`` with ``loop``'s body emptied (what the statements around a nested loop
    touch)."""
    return replace_stmt(tuple(body), loop, [dataclasses.replace(loop, body=())])


def _stmt_lists(s) -> list[tuple]:
    """The statement lists nested directly in ``s`` (loop, if and region bodies)."""
    out = []
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if isinstance(v, tuple) and v and all(isinstance(x, N.Stmt) for x in v):
            out.append(v)
    return out


def _guard_bounds(cond, lo: dict, hi: dict) -> bool:
    """``cond`` as a conjunction of ``v >= e`` and ``v < e`` (``v`` a variable): the
    bounds' linear forms into ``lo`` / ``hi``; False for any other condition."""
    if isinstance(cond, N.Logic) and cond.op == "and":
        return all(_guard_bounds(a, lo, hi) for a in cond.args)
    if isinstance(cond, N.Cmp) and cond.op in ("ge", "lt") and isinstance(cond.a, N.Var):
        form = linear_form(cond.b)
        if form is None or cond.a.name in (lo if cond.op == "ge" else hi):
            return False
        (lo if cond.op == "ge" else hi)[cond.a.name] = form
        return True
    return False


def _same_form(a: dict, b: dict) -> bool:
    return {k: v for k, v in a.items() if v} == {k: v for k, v in b.items() if v}


def _writes_whole(s, group: set, buffers: dict, nbytes: int, env: dict) -> bool:
    """Whether statement ``s`` writes every byte of the storage ``group`` shares
    (``nbytes``) before it reads any: a TMA load into a whole buffer of the group; a
    parallel nest reading none of the group and storing ``buf[i - e, ...]`` at its own
    loop variables over every element of such a buffer (loops from 0; guards ``i >= e``
    and ``i < e + dim`` where a variable's range passes the dim, ``env`` giving the
    enclosing loops' ranges); or a serial loop whose first statement on the group does
    (each iteration starts by it)."""
    def covers(name):
        b = buffers[name]
        return all(isinstance(d, N.Const) for d in b.shape) and \
            math.prod(int(d.value) for d in b.shape) * DTYPES[b.dtype].bytes == nbytes
    if isinstance(s, N.TmaCopy):
        b = s.dst.buffer
        return b in group and covers(b) and whole(s.dst, buffers[b])
    if not isinstance(s, N.For):
        return False
    if s.kind != "parallel":
        first = next((t for t in s.body if buffers_used(t) & group), None)
        rng = value_range(s.extent, env)
        inner = dict(env, **{s.var.name: (0, rng[1] - 1 if rng[1] is not None else None)})
        return first is not None and isinstance(s.start, N.Const) and s.start.value == 0 \
            and _writes_whole(first, group, buffers, nbytes, inner)
    if any(b in group and not w for b, _, w in accesses([s])):
        return False
    loops = parallel_nest(s)
    extent = {}
    for lp in loops:
        if not (isinstance(lp.start, N.Const) and lp.start.value == 0
                and isinstance(lp.extent, N.Const)):
            return False
        extent[lp.var.name] = int(lp.extent.value)
    body, lo, hi = loops[-1].body, {}, {}
    if len(body) == 1 and isinstance(body[0], N.If) and not body[0].orelse:
        if not _guard_bounds(body[0].cond, lo, hi) or not (set(lo) | set(hi)) <= set(extent):
            return False
        body = body[0].then
    for st in body:
        if not (isinstance(st, N.Store) and st.buffer in group and covers(st.buffer)):
            continue
        dims, used, ok = buffers[st.buffer].shape, set(), True
        for index, d in zip(st.indices, dims):
            form = linear_form(index)
            v = next((k for k in (form or {}) if k in extent and form[k] == 1), None)
            if v is None or v in used or any(k in extent for k in form if k != v and form[k]):
                ok = False
                break
            used.add(v)
            start = {k: -c for k, c in form.items() if k != v}  # v runs from here
            stop = dict(start)
            stop[None] = stop.get(None, 0) + int(d.value)
            first, last = lo.get(v, {None: 0}), hi.get(v, {None: extent[v]})
            if not _same_form(first, start) or not (_same_form(last, stop) or (
                    v not in hi and not any(k for k in start if start[k]) and
                    extent[v] >= int(d.value))):
                ok = False
                break
            low = value_range(_from_form(start), env)[0]
            high = value_range(_from_form(stop), env)[1]
            if low is None or high is None or low < 0 or high > extent[v]:
                ok = False
                break
        if ok and len(used) == len(dims) == len(st.indices):
            return True
    return False


def _from_form(form: dict) -> N.Expr:
    """The integer expression of a linear form (:func:`linear_form`)."""
    e = N.Const(form.get(None, 0), "int32")
    for k, c in form.items():
        if k is not None and c:
            e = N.BinOp("add", e, N.BinOp("mul", N.Var(k, "int32"), N.Const(c, "int32"), "int32"),
                        "int32")
    return e


def independent_view(body, view: str, others: set, buffers: dict) -> bool:
    """Whether no value written through shared ``view`` is ever read through ``others``
    (the other buffers on its bytes: its base and the base's other views), nor the other
    way: then the view may have a layout of its own over the same bytes (TileLang gives
    every view its own).  Conservative: in the innermost statement list holding all their
    accesses, the statements touch one side each, and every run of statements of one side
    starts by writing all the bytes (:func:`_writes_whole`), so what a read sees was
    written by its own side (loops around the list repeat the runs, each starting
    afresh)."""
    sides = ({view}, set(others))
    nbytes = stage_bytes(buffers[view])

    def touched(stmts) -> set:
        return buffers_used(tuple(stmts)) & (sides[0] | sides[1])

    lst = tuple(body)
    while True:
        hits = [s for s in lst if touched([s])]
        if len(hits) != 1:
            break
        kids = [k for k in _stmt_lists(hits[0]) if touched(k)]
        if len(kids) != 1 or touched([hits[0]]) != touched(kids[0]):
            return not (touched([hits[0]]) & sides[0] and touched([hits[0]]) & sides[1])
        lst = kids[0]
    prev = None
    for s in (s for s in lst if touched([s])):
        t = touched([s])
        side = 0 if t <= sides[0] else 1 if t <= sides[1] else None
        if side is None:
            return False
        if side != prev and not _writes_whole(s, sides[side], buffers, nbytes, {}):
            return False
        prev = side
    return True


def tma_allowed(s: N.Copy) -> bool:
    """May the TMA pass move copy ``s`` by TMA: not ``disable_tma``, no ``loop_layout``
    (a map of the threads' loop, TileLang's SIMT copy), and the program did not ask for
    another instruction (``prefer_instruction="cp_async"`` / ``"sync"``)?"""
    return not s.disable_tma and s.loop_layout is None and s.instruction in ("", "tma")
