"""``T.reshape`` / ``T.view`` of a ``T.gemm`` accumulator: the view's accesses become
accesses of the accumulator itself, and reductions over the view's last dim (its last
row dim) become reductions over runs of the accumulator's columns (rows) (runs after
``select_mma``, which gives the accumulator its ``mma`` register layout, and before the
tile-op lowering).  Imports the IR and the passes' shared helpers only.

DeepSeek's indexers compute logits ``s`` of shape ``(block_N, block_Q * heads)`` with a
T.gemm, read them as ``s3 = T.reshape(s, (block_N, block_Q, heads))``, scale each head
and sum the heads of each query (``T.reduce_sum(s3, logits, dim=-1)``).  As in TileLang
(a reshaped fragment's layout is its base's, through the row-major flat index), the view
and the accumulator are one set of registers.  Here, with ``s`` ``(M, N)`` and the view
``(m1, ..., mi, n1, ..., nk)`` (``m1 * ... * mi == M``, ``n1 * ... * nk == N``: a split
of the rows and of the columns, the only reshapes of an MMA register layout this pass
honors; others are refused naming the view):

- a ``T.Parallel`` nest that walks the view at its own loop variables
  (``s3[n, q, h]`` under ``T.Parallel(block_N, block_Q, heads)``) becomes a nest over
  ``(M, N)`` that walks ``s[i, j]``, its loops over the row dims fused into ``i`` and
  those over the column dims into ``j`` (``q = j // heads``, ``h = j % heads`` elsewhere
  in its body), so it runs on the accumulator's registers; any other access of the view
  in a nest is refused;
- ``T.fill`` / ``T.clear`` of the whole view are of the accumulator;
- ``T.reduce_<kind>(view, dst, dim=-1)``: the runs of ``nk`` consecutive columns are
  reduced in two steps.  A ``SegmentReduce`` reduces runs of ``width`` columns (``width``
  divides ``nk`` and the columns each warp(group) holds: a run never spans warps) within
  the threads holding each (their registers, then shuffles) into a shared buffer
  ``<view>_runs`` of ``M * N / width`` values of ``dst``'s dtype, and meets at a
  barrier; then a ``T.Parallel`` nest over ``dst`` combines the ``nk / width`` runs of
  each group (and, without ``clear``, ``dst``'s value), so ``dst`` is an ordinary
  fragment laid out by the layout pass;
- ``T.reduce_<kind>(view, dst, dim=i - 1)`` (a pool of ``mi`` consecutive rows): the
  same with runs of ``gcd(mi, 16)`` rows (``SegmentReduce.axis`` 0).

Reductions over another dim of the view, and every other use of the view (a T.copy, a
T.gemm operand, an access outside a nest), are refused naming it.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, StmtMutator, fold_constants, rebuild, substitute, walk_nodes, walk_stmts
from .analysis import all_names, fresh_name, parallel_nest
from .lower_tile_ops import reduce_update


class AccumulatorViewError(ValueError):
    pass


def _ints(shape) -> tuple | None:
    return tuple(int(d.value) for d in shape) if all(isinstance(d, N.Const) for d in shape) \
        else None


def run_width(h: int, n: int, layout: N.Layout) -> int:
    """The widest run of columns, dividing ``h``, that a warp(group) of the ``(M, n)``
    accumulator ``layout`` holds whole at every offset of a run: within one 8-column group
    (``h`` not a multiple of 8: the lanes of a quad hold 2 columns each), else within the
    ``n / warps along N`` columns of a wgmma warpgroup (a warp's 8-column groups of
    mma.sync lie ``8 * warps along N`` apart: runs of 8)."""
    small = math.gcd(h, 8)
    if small < 8:
        return small
    period = n // layout.warps[1] if layout.mma == "wgmma" else 8
    return math.gcd(h, period)


def run_height(h: int) -> int:
    """The tallest run of rows, dividing ``h``, that one warp holds whole: the rows of an
    MMA accumulator come in 16-row blocks per warp (two rows 8 apart per thread, 8 lanes
    down), the blocks of a warpgroup's or the tile's warps 16 rows apart."""
    return math.gcd(h, 16)


def _splits(vs: tuple, m: int, n: int) -> tuple:
    """Each number of leading dims of the view shape ``vs`` that make up the accumulator's
    ``m`` rows, the rest its ``n`` columns (several where dims of extent 1 sit between)."""
    return tuple(a for a in range(1, len(vs))
                 if math.prod(vs[:a]) == m and math.prod(vs[a:]) == n)


def _flat(idx, dims) -> N.Expr:
    """The row-major flat index of ``idx`` in ``dims``."""
    out = N.Const(0, "int32")
    for v, d in zip(idx, dims):
        out = N.binop("add", N.binop("mul", out, N.Const(d, "int32")), v)
    return fold_constants(fold_constants(out))


class _Views(StmtMutator):
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope):
        self.func, self.names = func, all_names(func)
        allocs = {s.buffer.name: s for s in walk_stmts(scope.body) if isinstance(s, N.Allocate)}
        # view -> (view, base, layout, the numbers of the view's leading dims that can be
        # the rows' split, as :func:`_splits`)
        self.views: dict[str, tuple[N.Buffer, N.Buffer, N.Layout, tuple]] = {}
        for a in allocs.values():
            base = allocs.get(a.view_of) if a.view_of else None
            lay = base.layout if base is not None else None
            if a.buffer.scope != "fragment" or lay is None or lay.kind != "mma" or lay.operand:
                continue
            self.views[a.buffer.name] = (a.buffer, base.buffer, lay, self.check_split(a, base.buffer))
        self.scratch: list[N.Allocate] = []
        self.scope_body = scope.body

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise AccumulatorViewError(f"{where}prim_func '{self.func.name}': {msg}")

    def fresh(self, name: str) -> str:
        return fresh_name(self.names, name, sep="")

    def check_split(self, a: N.Allocate, base: N.Buffer) -> tuple:
        view = a.buffer
        vs, bs = _ints(view.shape), _ints(base.shape)
        rows = _splits(vs, *bs) if vs is not None and bs is not None and len(bs) == 2 and \
            view.dtype == base.dtype else ()
        if not rows:
            self.fail(a, f"T.reshape/T.view '{view.name}' {tuple(vs or view.shape)} "
                         f"{view.dtype} of T.gemm accumulator '{base.name}' "
                         f"{tuple(bs or base.shape)} {base.dtype}: tilecute honors a view of an "
                         "accumulator (its MMA register layout) only as a split of its rows and "
                         "of its columns, (M, N) -> (m1, ..., mi, n1, ..., nk) with m1 * ... * mi "
                         "== M, n1 * ... * nk == N and the same dtype (copy the accumulator into "
                         "a fragment of its own, or through shared memory, to view it otherwise)")
        return rows

    # ---- statements ---------------------------------------------------------------------
    def visit_allocate(self, s: N.Allocate):
        return None if s.buffer.name in self.views else s

    def visit_for(self, s: N.For):
        if s.kind != "parallel" or not self.touches(s):
            return self.generic(s)
        return self.fuse(s)

    def visit_reduce(self, s: N.Reduce):
        if s.src not in self.views:
            if s.dst in self.views:
                self.fail(s, f"T.reduce_{s.kind}(..., {s.dst}): '{s.dst}' is a view of T.gemm "
                             f"accumulator '{self.views[s.dst][1].name}', which tilecute does "
                             "not take as a reduction's output")
            return s
        view, base, lay, splits = self.views[s.src]
        vs, (m, n) = _ints(view.shape), _ints(base.shape)
        what = f"T.reduce_{s.kind}({s.src}, {s.dst}, dim={s.dim})"
        if s.dim != len(vs) - 1 and s.dim + 1 not in splits:
            self.fail(s, f"{what}: '{s.src}' is a view {vs} of T.gemm accumulator '{base.name}' "
                         f"({m}, {n}); tilecute reduces such a view over its last dim (runs of "
                         "consecutive columns) or over its last dim of rows, dim "
                         f"{' or '.join(str(a - 1) for a in splits)} (runs of consecutive rows) "
                         "only")
        h = vs[s.dim]
        dst = self.func_buffer(s.dst)
        ds = _ints(dst.shape)
        want = vs[:s.dim] + vs[s.dim + 1:]
        if ds is None or math.prod(ds) != math.prod(want) or dst.scope != "fragment":
            self.fail(s, f"{what}: '{s.dst}' must be a fragment of shape {want} (the view's shape "
                         f"without dim {s.dim})")
        loops = [N.Var(self.fresh(f"{s.src}_r{k}"), "int32") for k in range(len(ds))]
        flat = _flat(loops, ds)  # the element of dst (row-major over the view's other dims)
        if s.dim == len(vs) - 1:  # runs of columns: dst holds (rows, groups)
            width, axis = run_width(h, n, lay), 1
            per = n // width  # runs per row
            first = lambda k: N.binop("add", N.binop("mul", flat, N.Const(h // width, "int32")),  # noqa: E731
                                      N.Const(k, "int32"))
        else:  # runs of rows: dst holds (row groups, columns)
            width, axis = run_height(h), 0
            per = n
            if ds == want:  # (row groups..., columns...): dst's own indices
                group, col = _flat(loops[:s.dim], ds[:s.dim]), _flat(loops[s.dim:], ds[s.dim:])
            else:
                group, col = N.binop("floordiv", flat, N.Const(n, "int32")), \
                    N.binop("mod", flat, N.Const(n, "int32"))
            first = lambda k: N.binop("add", N.binop("mul", N.binop(  # noqa: E731
                "add", N.binop("mul", group, N.Const(h // width, "int32")), N.Const(k, "int32")),
                N.Const(n, "int32")), col)
        size = m * n // width
        runs = N.Buffer(self.fresh(f"{s.src}_runs"), dst.dtype, (N.Const(size, "int32"),), "shared")
        self.scratch.append(N.Allocate(runs, loc=s.loc))
        base_kind = {"abssum": "sum", "absmax": "max"}.get(s.kind, s.kind)
        total = None
        for k in range(h // width):
            x = N.Load(runs.name, (fold_constants(fold_constants(first(k))),), dst.dtype)
            total = x if total is None else reduce_update(base_kind, total, x, nan=s.nan_propagate)
        here = N.Load(dst.name, tuple(loops), dst.dtype)
        if not s.clear:
            total = reduce_update(s.kind, here, total, nan=s.nan_propagate)
        body: tuple = (N.Store(dst.name, tuple(loops), total, loc=s.loc),)
        for v, d in reversed(list(zip(loops, ds))):
            body = (N.For(v, N.Const(0, "int32"), N.Const(d, "int32"), "parallel", body, loc=s.loc),)
        seg = N.SegmentReduce(s.kind, base.name, runs.name, width, s.nan_propagate, axis=axis,
                              loc=s.loc)
        assert per * (m if axis else m // width) == size
        return [seg, *body]

    def visit_fill(self, s: N.Fill):
        if s.dst.buffer not in self.views:
            return s
        view, base, _, _ = self.views[s.dst.buffer]
        if not self.whole(s.dst, view):
            self.fail(s, f"T.fill of part of '{view.name}', a view of T.gemm accumulator "
                         f"'{base.name}': tilecute fills such a view whole only")
        return dataclasses.replace(s, dst=N.Region(base.name, tuple(N.Const(0, "int32")
                                                                    for _ in base.shape)))

    def visit_clear(self, s: N.Clear):
        if s.buffer in self.views:
            return dataclasses.replace(s, buffer=self.views[s.buffer][1].name)
        return s

    def generic(self, s):
        names = BODY_FIELDS.get(type(s), ())
        used = self.touches(dataclasses.replace(s, **{n: () for n in names}) if names else s)
        if used:
            view, base, _, _ = self.views[sorted(used)[0]]
            self.fail(s, f"'{view.name}', a view of T.gemm accumulator '{base.name}', is used "
                         f"by a {type(s).__name__} statement; tilecute honors such a view in "
                         "T.Parallel loops that walk it at their own loop variables, "
                         "T.reduce_* over its last dim, T.fill and T.clear")
        return super().generic(s)

    # ---- helpers ------------------------------------------------------------------------
    def func_buffer(self, name: str) -> N.Buffer:
        for x in walk_nodes(self.scope_body):
            if isinstance(x, N.Allocate) and x.buffer.name == name:
                return x.buffer
        return next(p for p in self.func.params if isinstance(p, N.Buffer) and p.name == name)

    @staticmethod
    def whole(r: N.Region, buf: N.Buffer) -> bool:
        zero = all(isinstance(o, N.Const) and o.value == 0 for o in r.origin)
        return zero and (r.extents is None or tuple(r.extents) == tuple(buf.shape))

    def touches(self, s) -> set[str]:
        names = set()
        for x in walk_nodes(s):
            if isinstance(x, (N.Load, N.Store, N.Region)) and x.buffer in self.views:
                names.add(x.buffer)
            elif isinstance(x, (N.Gemm,)) and {x.a, x.b, x.c} & set(self.views):
                names |= {x.a, x.b, x.c} & set(self.views)
            elif isinstance(x, (N.Reduce, N.Scan)) and {x.src, x.dst} & set(self.views):
                names |= {x.src, x.dst} & set(self.views)
            elif isinstance(x, N.Clear) and x.buffer in self.views:
                names.add(x.buffer)
        return names

    def fuse(self, s: N.For):
        """The nest headed by ``s`` over the accumulator: the loops that walk the view's
        split dims fused into one over its columns."""
        loops = parallel_nest(s)
        names = [lp.var.name for lp in loops]
        inner = loops[-1].body
        pattern = None
        for x in walk_nodes(inner):
            if isinstance(x, (N.Load, N.Store)) and x.buffer in self.views:
                idx = tuple(getattr(e, "name", None) for e in x.indices)
                if pattern is None:
                    pattern = (x.buffer, idx)
                if (x.buffer, idx) != pattern or None in idx or \
                        any(i not in names for i in idx):
                    self.fail(x if isinstance(x, N.Store) else s,
                              f"'{x.buffer}', a view of T.gemm accumulator "
                              f"'{self.views[x.buffer][1].name}', is accessed at "
                              f"[{', '.join(str(getattr(e, 'name', e)) for e in x.indices)}] "
                              f"in a T.Parallel loop over ({', '.join(names)}); tilecute honors "
                              "such a view in loops that walk it at their own loop variables "
                              "(one index tuple per loop)")
            elif isinstance(x, (N.Region, N.Gemm, N.Reduce)) and self.touches(x):
                self.fail(s, f"a view of a T.gemm accumulator is used by a tile op inside "
                             f"a T.Parallel loop over ({', '.join(names)})")
        if pattern is None:
            self.fail(s, "a view of a T.gemm accumulator is touched in a T.Parallel loop "
                         f"over ({', '.join(names)}) other than by loads and stores")
        vname, idx = pattern
        view, base, _, splits = self.views[vname]
        a = splits[0]
        vs = _ints(view.shape)
        pos = [names.index(i) for i in idx]
        groups = [pos[:a], pos[a:]]  # the loops over the view's row dims, its column dims
        if pos != sorted(pos) or any(g != list(range(g[0], g[0] + len(g))) for g in groups) or \
                any(int(loops[p].extent.value) != d if isinstance(loops[p].extent, N.Const)
                    else True for p, d in zip(pos, vs)) or \
                any(not (isinstance(loops[p].start, N.Const) and loops[p].start.value == 0)
                    for p in pos):
            self.fail(s, f"'{vname}', a view {vs} of T.gemm accumulator '{base.name}', is "
                         f"walked at [{', '.join(idx)}] by a T.Parallel loop over "
                         f"({', '.join(names)}); tilecute honors a loop over such a view that "
                         "walks its dims in order with loops of their extents (from 0), the "
                         "loops over the dims that split the rows consecutive, and those over "
                         "the dims that split the columns")
        sub, fused = {}, {}  # split loop -> its expression of the fused one; first -> fused
        for g, dims in zip(groups, (vs[:a], vs[a:])):
            if len(g) == 1:
                continue
            total = math.prod(dims)
            v = N.Var(self.fresh("_".join(idx[p] for p in range(len(idx)) if pos[p] in g)),
                      loops[g[0]].var.dtype)
            fused[g[0]] = dataclasses.replace(loops[g[0]], var=v, extent=N.Const(total, "int32"))
            stride = 1
            for p, d in reversed(list(zip(g, dims))):
                e = v if stride == 1 else N.binop("floordiv", v, N.Const(stride, "int32"))
                if stride * d != total:
                    e = N.binop("mod", e, N.Const(d, "int32"))
                sub[loops[p].var.name] = e
                stride *= d
        ij = tuple(fused[g[0]].var if g[0] in fused else loops[g[0]].var for g in groups)

        def leaf(x):
            if isinstance(x, N.Load) and x.buffer == vname:
                return N.Load(base.name, ij, x.dtype)
            if isinstance(x, N.Store) and x.buffer == vname:
                value = rebuild(x.value, leaf)
                return dataclasses.replace(x, buffer=base.name, indices=ij, value=value)
            return None
        body = substitute(rebuild(inner, leaf), sub)
        dropped = {p for g in groups for p in g[1:]}
        kept = [fused.get(k, lp) for k, lp in enumerate(loops) if k not in dropped]
        out = self.visit_block(body)
        for lp in reversed(kept):
            out = (dataclasses.replace(lp, body=out),)
        return out[0]


def split_accumulator_views(func: N.PrimFunc) -> N.PrimFunc:
    """``func`` with its views of T.gemm accumulators lowered onto the accumulators."""
    kernels = []
    changed = False
    for scope in func.kernels:
        v = _Views(func, scope)
        if not v.views:
            kernels.append(scope)
            continue
        new = v.visit_kernel(scope)
        new = dataclasses.replace(new, body=tuple(v.scratch) + tuple(new.body))
        kernels.append(new)
        changed = True
    return dataclasses.replace(func, kernels=tuple(kernels)) if changed else func
