"""Lower the data-movement tile ops to ``T.Parallel`` loops.

``T.copy(src, dst)``, ``T.fill(dst, v)``, ``T.clear(buf)`` and the tile form of
``T.atomic_add(dst, src)`` become one parallel nest over the tile's shape whose body is a
single element statement.  Every later pass (layouts, vectorization, barriers) and the
codegen then handle one construct: a parallel nest.  ``T.reduce_*`` and ``T.gemm`` stay
tile ops.

Tile shapes: a region with explicit extents (``A[0:16, k:k+32]``) has them; a whole
shared/fragment/local buffer has its shape; a global region given by its origin
(``A[by * 64, k * 32]``) takes the other side's shape.  When the two sides differ in rank,
the lower-rank tile lines up with the trailing dims of the other (leading extents 1).
"""

from __future__ import annotations

from ..ir import nodes as N
from ..ir.visitor import StmtMutator
from .analysis import all_names, is_unit, squeeze


class TileOpError(ValueError):
    pass


def _static(extents) -> tuple | None:
    if all(isinstance(e, N.Const) for e in extents):
        return tuple(int(e.value) for e in extents)
    return None


class _Lowerer(StmtMutator):
    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.buffers: dict[str, N.Buffer] = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.names = all_names(func)
        self.counter = 0

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise TileOpError(f"{where}prim_func '{self.func.name}': {msg}")

    def fresh(self, stem: str) -> N.Var:
        while True:
            self.counter += 1
            name = f"{stem}{self.counter}"
            if name not in self.names:
                self.names.add(name)
                return N.Var(name, "int32")

    # ---- shapes ------------------------------------------------------------------------
    def tile_shape(self, r: N.Region):
        """The region's extents when it states them (explicitly, or as a whole
        non-global buffer); None for a global origin."""
        if r.extents is not None:
            return tuple(r.extents)
        buf = self.buffers[r.buffer]
        if buf.scope != "global" and all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
            return tuple(buf.shape)
        return None

    def loop_shape(self, s, a: N.Region, b: N.Region, what: str):
        """The parallel nest's extents for a tile op between regions ``a`` and ``b``."""
        sa, sb = self.tile_shape(a), self.tile_shape(b)
        if sa is None and sb is None:
            self.fail(s, f"{what}: neither '{a.buffer}' nor '{b.buffer}' gives the tile's shape; "
                         "give one side explicit extents (A[i:i+16, 0:64])")
        if sa is None or sb is None:
            shape = squeeze(sa if sa is not None else sb)
            other = b if sa is not None else a
            if len(shape) > len(other.starts):
                self.fail(s, f"{what}: the tile has {len(shape)} dims but '{other.buffer}' only "
                             f"{len(other.starts)}")
            return squeeze(shape)
        qa, qb = squeeze(sa), squeeze(sb)
        if len(qa) != len(qb) or any(
                not (isinstance(x, N.Const) and isinstance(y, N.Const) and x.value == y.value)
                and x != y for x, y in zip(qa, qb)):
            fmt = lambda t: "(" + ", ".join(str(getattr(x, "value", getattr(x, "name", x))) for x in t) + ")"  # noqa: E731
            self.fail(s, f"{what}: the shapes of '{a.buffer}' {fmt(sa)} and '{b.buffer}' "
                         f"{fmt(sb)} differ")
        # prefer the side whose own shape is the tile (a whole fragment/shared buffer), so
        # the nest indexes it with exactly the loop variables
        return qa

    def indices(self, r: N.Region, shape, loop_vars) -> tuple[N.Expr, ...]:
        """Element indices of region ``r`` at the nest's iteration ``loop_vars``."""
        rank = len(r.starts)
        extents = self.tile_shape(r)
        if extents is not None and len(squeeze(extents)) == len(shape):
            # map loop dims onto the region's non-unit dims, in order
            out, d = [], 0
            ext = list(extents)
            keep = _kept_dims(ext, len(shape))
            for axis in range(rank):
                if axis in keep:
                    out.append(N.binop("add", r.starts[axis], loop_vars[d]) if not _zero(r.starts[axis])
                               else loop_vars[d])
                    d += 1
                else:
                    out.append(r.starts[axis])
            return tuple(out)
        # a global origin: the nest's dims line up with the trailing dims
        lead = rank - len(shape)
        out = list(r.starts[:lead])
        for st, v in zip(r.starts[lead:], loop_vars):
            out.append(v if _zero(st) else N.binop("add", st, v))
        return tuple(out)

    # ---- the nest ----------------------------------------------------------------------
    def nest(self, s, shape, make_body) -> N.For:
        loop_vars = [self.fresh("i") for _ in shape]
        body = make_body(loop_vars)
        for d in reversed(range(len(shape))):
            body = (N.For(loop_vars[d], N.Const(0, "int32"), shape[d], "parallel", body, loc=s.loc),)
        return body[0]

    def copy(self, s: N.Copy) -> N.Stmt:
        shape = self.loop_shape(s, s.src, s.dst, "T.copy")
        sbuf, dbuf = self.buffers[s.src.buffer], self.buffers[s.dst.buffer]

        def body(vs):
            value = N.Load(sbuf.name, self.indices(s.src, shape, vs), sbuf.dtype)
            return (N.Store(dbuf.name, self.indices(s.dst, shape, vs), N.cast(value, dbuf.dtype),
                            loc=s.loc),)
        return self.nest(s, shape, body)

    def fill(self, s, dst: N.Region, value: N.Expr) -> N.Stmt:
        shape = self.tile_shape(dst)
        if shape is None:
            self.fail(s, f"T.fill of '{dst.buffer}' needs explicit extents (A[i:i+16, 0:64])")
        shape = squeeze(shape)
        buf = self.buffers[dst.buffer]
        return self.nest(s, shape, lambda vs: (
            N.Store(buf.name, self.indices(dst, shape, vs), N.cast(value, buf.dtype), loc=s.loc),))

    def atomic_tile(self, s: N.AtomicAdd) -> N.Stmt:
        shape = self.loop_shape(s, s.value, s.dst, "T.atomic_add")
        sbuf, dbuf = self.buffers[s.value.buffer], self.buffers[s.dst.buffer]

        def body(vs):
            value = N.Load(sbuf.name, self.indices(s.value, shape, vs), sbuf.dtype)
            dst = N.Region(dbuf.name, self.indices(s.dst, shape, vs))
            return (N.AtomicAdd(dst, N.cast(value, dbuf.dtype), loc=s.loc, op=s.op),)
        return self.nest(s, shape, body)

    def visit_allocate(self, s: N.Allocate) -> N.Allocate:
        self.buffers[s.buffer.name] = s.buffer
        return s

    def visit_copy(self, s: N.Copy) -> N.Stmt:
        return self.copy(s)

    def visit_fill(self, s: N.Fill) -> N.Stmt:
        return self.fill(s, s.dst, s.value)

    def visit_clear(self, s: N.Clear) -> N.Stmt:
        buf = self.buffers[s.buffer]
        region = N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape), tuple(buf.shape))
        return self.fill(s, region, N.const(0, buf.dtype))

    def visit_atomic_add(self, s: N.AtomicAdd) -> N.Stmt:
        return self.atomic_tile(s) if isinstance(s.value, N.Region) else s


def _zero(e) -> bool:
    return isinstance(e, N.Const) and e.value == 0


def _kept_dims(extents, rank: int) -> list[int]:
    """Which axes of a region with ``extents`` the ``rank`` loop dims walk: its non-unit
    axes, in order (the trailing ``rank`` axes when there are fewer)."""
    kept = [d for d, x in enumerate(extents) if not is_unit(x)]
    return kept if len(kept) == rank else list(range(len(extents) - rank, len(extents)))


def lower_tile_ops(func: N.PrimFunc) -> N.PrimFunc:
    """``func`` with copies, fills, clears and tile atomics turned into parallel nests."""
    return _Lowerer(func).run(func)
