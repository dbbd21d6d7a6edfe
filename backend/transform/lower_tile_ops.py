"""Lower the data-movement tile ops to ``T.Parallel`` loops.

``T.copy(src, dst)``, ``T.fill(dst, v)``, ``T.clear(buf)`` and the tile form of
``T.atomic_add(dst, src)`` become one parallel nest over the tile's shape whose body is a
single element statement.  Every later pass (layouts, vectorization, barriers) and the
codegen then handle one construct: a parallel nest.  ``T.reduce_*`` and ``T.gemm`` stay
tile ops.

Tile shapes: a region with explicit extents (``A[0:16, k:k+32]``) has them; a whole
shared/fragment/local buffer has its shape; a global region given by its origin
(``A[by * 64, k * 32]``, or a whole global buffer) takes the other side's shape.  When
the two sides differ in rank, the lower-rank tile lines up with the trailing dims of the
other (leading extents 1), as TileLang's ``legalize_pairwise_extents`` does; the nest's
loops walk each side's non-unit dims in order (``T.copy(Y, y)`` with ``y`` of shape
``(32, 1)`` walks ``Y[i, 0]``).  A ``T.copy`` whose sides' static non-unit extents differ
runs over the lower memory level's side (``copy_base_shape``, TileLang's rule).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.printer import expr_str
from ..ir.visitor import StmtMutator, fold_constants
from ..runtime.dtypes import DTYPES
from .analysis import (LoopVars, is_unit, no_tma_coordinates, parallel_nest, squeeze,
                       with_innermost)


class TileOpError(ValueError):
    pass


def copy_text(s: N.Stmt) -> str:
    """``T.copy(src, dst, prefer_instruction="...")`` (or another tile op) as the program
    wrote it, for errors."""
    from ..ir.printer import stmt_str

    return stmt_str(s)


def _static(extents) -> tuple | None:
    if all(isinstance(e, N.Const) for e in extents):
        return tuple(int(e.value) for e in extents)
    return None


class _Lowerer(StmtMutator):
    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.buffers: dict[str, N.Buffer] = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.fresh = LoopVars(func)

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise TileOpError(f"{where}prim_func '{self.func.name}': {msg}")

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
        if what == "T.copy" and len(qa) == len(qb) and qa != qb and \
                _static(qa) is not None and _static(qb) is not None:
            return self.copy_base_shape(s, a, b, qa, qb)
        if len(qa) != len(qb) or any(
                not (isinstance(x, N.Const) and isinstance(y, N.Const) and x.value == y.value)
                and x != y for x, y in zip(qa, qb)):
            fmt = lambda t: "(" + ", ".join(str(getattr(x, "value", getattr(x, "name", x))) for x in t) + ")"  # noqa: E731
            self.fail(s, f"{what}: the shapes of '{a.buffer}' {fmt(sa)} and '{b.buffer}' "
                         f"{fmt(sb)} differ")
        # prefer the side whose own shape is the tile (a whole fragment/shared buffer), so
        # the nest indexes it with exactly the loop variables
        return qa

    def copy_base_shape(self, s, src: N.Region, dst: N.Region, qs, qd):
        """TileLang's loop domain for a ``T.copy`` whose sides' static non-unit extents differ
        (``copy.cc`` MakeIterVars): the extents of the side in the lower memory level
        (fragment/local below shared below global; the source on a tie), each at least the
        source's, else an error.  ``T.copy(A[:, 0:2], B[:, 0:3])`` copies two columns; into a
        wider shared or fragment tile, it reads as far past the source's slice as the tile
        is wide."""
        level = {"global": 0, "shared": 1}
        ls, ld = (level.get(self.buffers[r.buffer].scope, 2) for r in (src, dst))
        base, side = (qs, src) if ls >= ld else (qd, dst)
        for d, (x, y) in enumerate(zip(_static(base), _static(qs))):
            if x < y:
                self.fail(s, f"T.copy: the loop runs over '{side.buffer}' (the side in the lower "
                             f"memory level), whose extent {x} at its non-unit dim {d} is smaller "
                             f"than the source '{src.buffer}''s {y} (TileLang's \"selected loop "
                             f"range is smaller than original src range\")")
        return base

    def indices(self, r: N.Region, shape, loop_vars, other=None) -> tuple[N.Expr, ...]:
        """Element indices of region ``r`` at the nest's iteration ``loop_vars``; ``other``:
        the other side's region, whose extents a global origin takes."""
        rank = len(r.starts)
        extents = self.tile_shape(r)
        if extents is None and other is not None:
            extents = _aligned(self.tile_shape(other), rank)
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
        # the nest's loops remember the tile op (Loc.form), which later errors name
        loc = dataclasses.replace(s.loc, form=copy_text(s)) if s.loc is not None else None
        for d in reversed(range(len(shape))):
            body = (N.For(loop_vars[d], N.Const(0, "int32"), shape[d], "parallel", body, loc=loc),)
        return body[0]

    def whole(self, r: N.Region) -> N.Region:
        """A global buffer named whole (``T.copy(A, B)``: origin 0, no extents) as the
        region of all of it, TileLang's meaning of a buffer argument."""
        buf = self.buffers[r.buffer]
        if r.extents is None and buf.scope == "global" and all(_zero(x) for x in r.starts):
            return N.Region(r.buffer, r.starts, tuple(buf.shape))
        return r

    def copy(self, s: N.Copy) -> N.Stmt:
        if s.instruction == "tma":  # the TMA pass made it a TMA copy where it could
            self.fail(s, f"{copy_text(s)} could not be honored: {self.no_tma_reason(s)}")
        if s.instruction in ("cp_async", N.ASYNC_COPY):
            scopes = [self.buffers[r.buffer].scope for r in (s.src, s.dst)]
            if scopes != ["global", "shared"]:
                self.fail(s, f"{copy_text(s)} could not be honored: cp.async copies global -> "
                             f"shared memory; this copy is {scopes[0]} -> {scopes[1]}")
            if s.instruction == N.ASYNC_COPY and \
                    self.buffers[s.src.buffer].dtype != self.buffers[s.dst.buffer].dtype:
                self.fail(s, f"{copy_text(s)} could not be honored: cp.async copies bytes, and "
                             f"'{s.src.buffer}' is {self.buffers[s.src.buffer].dtype} while "
                             f"'{s.dst.buffer}' is {self.buffers[s.dst.buffer].dtype}")
        nest = self.copy_nest(s)
        scopes = {self.buffers[s.src.buffer].scope, self.buffers[s.dst.buffer].scope}
        if s.loop_layout is not None:  # the program's map of the loop (T.copy(loop_layout=))
            extents = [lp.extent for lp in parallel_nest(nest)]
            if s.loop_shape and _static(extents) != s.loop_shape:
                shown = ", ".join(expr_str(e) for e in extents)
                self.fail(s, f"{copy_text(s)}: loop_layout is a T.Fragment of shape "
                             f"{s.loop_shape}, but the copy's loop runs over ({shown}) (its "
                             "non-unit extents, as TileLang's)")
            nest = with_innermost(nest, loop_layout=s.loop_layout)
        elif "local" in scopes and "fragment" not in scopes:
            # a thread's own buffer: every thread copies all of it (TileLang lowers a copy
            # with a local side to a plain per-thread loop, never partitioned over threads)
            nest = with_innermost(nest, loop_layout=N.Layout("replicated"))
        if s.instruction:
            nest = with_innermost(nest, copy_instruction=s.instruction)
        if s.vector_width:  # (coalesced_width: the loop's lanes, as T.Parallel's)
            nest = _with_lanes(nest, s.vector_width)
        return nest

    def no_tma_reason(self, s: N.Copy) -> str:
        scopes = [self.buffers[r.buffer].scope for r in (s.src, s.dst)]
        if sorted(scopes) != ["global", "shared"]:
            return f"TMA copies between global and shared memory; this copy is {scopes[0]} -> {scopes[1]}"
        why = no_tma_coordinates(self.buffers[s.src.buffer if scopes[0] == "global" else s.dst.buffer])
        if why:
            return why
        return ("tilecute moves a copy by TMA only into or out of a whole shared buffer (or a "
                "range of its rows, or one matrix of it) TMA can address, a load only at the "
                "kernel's top level or the top level of a T.Pipelined body, and only where the "
                "shared buffer has no layout or views TMA cannot write (docs/tile-ops.md, "
                "\"TMA\"); leave prefer_instruction unset to let tilecute choose")

    def copy_nest(self, s: N.Copy) -> N.Stmt:
        if self.tile_shape(s.src) is None and self.tile_shape(s.dst) is None:
            # global to global, neither side a tile: a whole buffer gives the shape
            s = dataclasses.replace(s, src=self.whole(s.src), dst=self.whole(s.dst))
        shape = self.loop_shape(s, s.src, s.dst, "T.copy")
        sbuf, dbuf = self.buffers[s.src.buffer], self.buffers[s.dst.buffer]

        def body(vs):
            value = N.Load(sbuf.name, self.indices(s.src, shape, vs, s.dst), sbuf.dtype)
            return (N.Store(dbuf.name, self.indices(s.dst, shape, vs, s.src), N.cast(value, dbuf.dtype),
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
            value = N.Load(sbuf.name, self.indices(s.value, shape, vs, s.dst), sbuf.dtype)
            dst = N.Region(dbuf.name, self.indices(s.dst, shape, vs, s.value))
            return (N.AtomicAdd(dst, N.cast(value, dbuf.dtype), loc=s.loc, op=s.op, order=s.order),)
        return self.nest(s, shape, body)

    def visit_allocate(self, s: N.Allocate) -> N.Allocate:
        self.buffers[s.buffer.name] = s.buffer
        return s

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        self.staging: list[N.Allocate] = []  # shared tiles a fragment scan goes through
        self.threads = scope.num_threads
        self.safe_values = {name for name, _ in scope.safe_values}
        scope = super().visit_kernel(scope)
        return dataclasses.replace(scope, body=tuple(self.staging) + scope.body)

    def visit_scan(self, s: N.Scan):
        """A scan of fragments goes through a shared tile, as in TileLang: copy in, scan
        there, copy out (the copies are parallel nests)."""
        src, dst = self.buffers[s.src], self.buffers[s.dst]
        if src.scope == "shared" and dst.scope == "shared":
            return s
        tile = N.Buffer(self.fresh(f"{s.src}_scan_").name, src.dtype, src.shape, "shared")
        self.buffers[tile.name] = tile
        self.staging.append(N.Allocate(tile, loc=s.loc))
        whole = lambda b: N.Region(b.name, tuple(N.Const(0, "int32") for _ in b.shape))  # noqa: E731
        return [self.copy(N.Copy(whole(src), whole(tile), loc=s.loc)),
                dataclasses.replace(s, src=tile.name, dst=tile.name),
                self.copy(N.Copy(whole(tile), whole(dst), loc=s.loc))]

    # ---- reductions ---------------------------------------------------------------------
    def visit_reduce(self, s: N.Reduce):
        """The reductions the code generator takes are of a fragment over its last dim (or
        of a T.gemm accumulator over either dim) into a fragment of the reduced shape.
        Every other one is brought to that form here, as
        TileLang's ``T.reduce`` macro does: a shared source is copied into a fragment, a
        shared (or keepdim ``(X, 1, Y)``) destination receives the result from a fresh
        fragment, and a reduction over another dim first moves that dim last (a fragment
        through a shared tile, since the move crosses threads).  ``clear=False`` then
        combines the result into the destination as TileLang does (``dst + r``,
        ``max(dst, r)`` ...).  A local source reduces into a local destination thread by
        thread (TileLang's local reduction)."""
        src, dst = self.buffers[s.src], self.buffers[s.dst]
        if src.scope == "local" or dst.scope == "local":
            return self.local_reduce(s, src, dst)
        last = src.ndim - 1
        out_shape = tuple(src.shape[:s.dim] + src.shape[s.dim + 1:]) or (N.Const(1, "int32"),)
        # the columns (dim 0) of a 2-D fragment stay: the layout pass reduces them in a
        # T.gemm register layout (tcrow.reduce_cols, as TileLang reduces any fragment in its
        # own layout) or, for a fragment without one, moves them last (move_columns_last)
        in_place = src.scope == "fragment" and (s.dim == last or src.ndim == 2 and s.dim == 0)
        if in_place and dst.scope == "fragment" and tuple(dst.shape) == out_shape:
            return s
        stmts: list[N.Stmt] = []
        if in_place:
            frag = src
        else:
            stmts, frag = self.move_last(s, src)
        dim = s.dim if in_place else frag.ndim - 1
        if dst.scope == "fragment" and tuple(dst.shape) == out_shape:
            stmts.append(dataclasses.replace(s, src=frag.name, dim=dim))
            return stmts
        res = self.staging_buffer(f"{s.dst}_frag", dst.dtype, out_shape, "fragment", s)
        stmts.append(dataclasses.replace(s, src=frag.name, dst=res.name, dim=dim, clear=True))
        shape = squeeze(out_shape)
        zero = tuple(N.Const(0, "int32") for _ in dst.shape)

        def update(vs):
            target = self.indices(N.Region(dst.name, zero, tuple(dst.shape)), shape, vs)
            value = N.Load(res.name, self.indices(N.Region(res.name, tuple(
                N.Const(0, "int32") for _ in out_shape), out_shape), shape, vs), res.dtype)
            if not s.clear:
                value = reduce_update(s.kind, N.Load(dst.name, target, dst.dtype), value,
                                      nan=s.nan_propagate)
            return (N.Store(dst.name, target, value, loc=s.loc),)
        stmts.append(self.nest(s, shape or (N.Const(1, "int32"),), update))
        return stmts

    def move_last(self, s: N.Reduce, src: N.Buffer) -> tuple[list, N.Buffer]:
        """The statements that copy ``src`` into a new fragment with the reduced dim last,
        and that fragment: a shared source by the copy's indexing, a fragment one through a
        new shared tile written transposed (the move crosses threads)."""
        stmts: list[N.Stmt] = []
        moved = tuple(src.shape[:s.dim] + src.shape[s.dim + 1:]) + (src.shape[s.dim],)
        length = src.shape[s.dim]
        padded = moved
        if isinstance(length, N.Const) and length.value & (length.value - 1) and length.value % self.threads:
            # rows of 3 or 96 (the columns of a [3, 64] or [96, 64] fragment, 128
            # threads): a row held by a power-of-two lane group (or by whole rounds of
            # the block's threads) needs such a length, so the fresh fragment's rows are
            # padded with the reduction's identity (TileLang keeps each column in its
            # threads; tilecute's blocked layout cannot split rows of 3 over its threads)
            padded = moved[:-1] + (N.Const(1 << (length.value - 1).bit_length(), "int32"),)

        def to_src(vs):  # indices of src at the moved-dim iteration vs
            return tuple(vs[:s.dim]) + (vs[-1],) + tuple(vs[s.dim:-1])

        frag = self.staging_buffer(f"{s.src}_frag", src.dtype, padded, "fragment", s)
        if src.scope == "fragment":
            tile = self.staging_buffer(f"{s.src}_moved", src.dtype, moved, "shared", s)
            stmts.append(self.nest(s, tuple(src.shape), lambda vs: (
                N.Store(tile.name, tuple(vs[:s.dim]) + tuple(vs[s.dim + 1:]) + (vs[s.dim],),
                        N.Load(src.name, tuple(vs), src.dtype), loc=s.loc),)))
            src_of = lambda vs: (tile.name, tuple(vs))  # noqa: E731
        else:
            src_of = lambda vs: (src.name, to_src(vs))  # noqa: E731

        def fill(vs):
            value = N.Load(*src_of(vs), src.dtype)
            if padded is not moved:
                value = N.Select(N.cmp("lt", vs[-1], length), value,
                                 reduce_identity(s.kind, src.dtype), src.dtype)
            return (N.Store(frag.name, tuple(vs), value, loc=s.loc),)
        stmts.append(self.nest(s, padded, fill))
        return stmts, frag

    def local_reduce(self, s: N.Reduce, src: N.Buffer, dst: N.Buffer):
        """TileLang's reduction of a local buffer into a local one: each thread folds its
        own elements, in order, into ``dst`` (first set to the reduction's identity when
        ``clear``)."""
        if src.scope != "local" or dst.scope != "local":
            self.fail(s, f"T.reduce_{s.kind}: invalid buffer scopes: '{src.name}' is {src.scope} "
                         f"and '{dst.name}' is {dst.scope} (TileLang reduces a local buffer "
                         "only into a local one, and shared or fragment buffers into shared "
                         "or fragment ones)")
        out_vars = [self.fresh("r") for _ in dst.shape]
        p = self.fresh("rv")
        keep = dst.ndim == src.ndim  # (X, 1, Y)
        idx = tuple(out_vars[:s.dim]) + (p,) + tuple(out_vars[s.dim + (1 if keep else 0):])
        target = tuple(out_vars)
        body: tuple = ()
        if s.clear:
            body += (N.Store(dst.name, target, reduce_identity(s.kind, dst.dtype), loc=s.loc),)
        value = N.cast(N.Load(src.name, idx, src.dtype), dst.dtype)
        fold = N.Store(dst.name, target, reduce_update(
            s.kind, N.Load(dst.name, target, dst.dtype), value, absolute=True,
            nan=s.nan_propagate), loc=s.loc)
        body += (N.For(p, N.Const(0, "int32"), src.shape[s.dim], "unrolled", (fold,), loc=s.loc),)
        for v, extent in reversed(list(zip(out_vars, dst.shape))):
            body = (N.For(v, N.Const(0, "int32"), extent, "unrolled", body, loc=s.loc),)
        return list(body)

    def staging_buffer(self, stem: str, dtype: str, shape, scope: str, s) -> N.Buffer:
        buf = N.Buffer(self.fresh(stem).name, dtype, tuple(shape), scope)
        self.buffers[buf.name] = buf
        self.staging.append(N.Allocate(buf, loc=s.loc))
        return buf

    def visit_im2col(self, s: N.Im2Col) -> N.Stmt:
        """``col[i, j]`` = the image element under filter tap ``c_step * BK + j`` of output
        pixel ``nhw_step * BM + i``, 0 in the padding and past the matrix.

        Where the ``BK`` columns lie in one filter tap (``C`` a multiple of ``BK``), column
        ``j`` is channel ``c0 + j`` of that tap, so the image is read at ``[n, h, w, c0 + j]``
        with ``n, h, w, c0`` the same for the whole row: a copy (one store of one load, which
        the vectorizer moves 16 bytes at a time, by cp.async where it can).  The padding and
        the rows past the matrix are the image read out of bounds, which reads 0 (the
        kernel's safe memory access; a tensor with a safe value of its own keeps the general
        form, a select per element)."""
        img, col = self.buffers[s.img], self.buffers[s.col]
        n_, h_, w_, c_ = img.shape
        bm, bk = col.shape
        i32 = lambda v: N.Const(v, "int32")  # noqa: E731
        K, S, D, P = s.kernel, s.stride, s.dilation, s.pad
        b = N.binop
        oh = b("add", b("floordiv", b("sub", b("add", h_, i32(2 * P)), i32(D * (K - 1) + 1)), i32(S)), i32(1))
        ow = b("add", b("floordiv", b("sub", b("add", w_, i32(2 * P)), i32(D * (K - 1) + 1)), i32(S)), i32(1))
        kc = b("mul", i32(K), c_)
        taps = b("mul", i32(K), kc)  # the matrix's columns: K * K * C

        def pixel(m, q) -> tuple:
            """The image row and column of output pixel ``m`` under filter tap ``q``."""
            h = b("sub", b("add", b("mul", b("floordiv", b("mod", m, b("mul", oh, ow)), ow), i32(S)),
                                  b("mul", b("floordiv", q, kc), i32(D))), i32(P))
            w = b("sub", b("add", b("mul", b("mod", m, ow), i32(S)),
                                  b("mul", b("mod", b("floordiv", q, c_), i32(K)), i32(D))), i32(P))
            return h, w

        if isinstance(c_, N.Const) and isinstance(bk, N.Const) and c_.value % bk.value == 0 \
                and img.name not in self.safe_values:
            def rows(vs):
                i, j = vs
                m = b("add", b("mul", s.nhw_step, bm), i)  # the output pixel
                q = b("mul", s.c_step, bk)  # the tile's first column
                h, w = pixel(m, q)
                # a column tile past the last tap reads 0: image n out of bounds
                n = N.Select(N.cmp("lt", q, taps), b("floordiv", m, b("mul", oh, ow)),
                             n_, "int32")
                value = N.Load(img.name, fold_constants((n, h, w, b("add", b("mod", q, c_), j))), img.dtype)
                return (N.Store(col.name, (i, j), value, loc=s.loc),)
            return self.nest(s, (bm, bk), rows)

        def body(vs):
            i, j = vs
            m, q = self.fresh("im2col_m"), self.fresh("im2col_k")
            h, w = self.fresh("im2col_h"), self.fresh("im2col_w")
            lets = [N.Let(m, b("add", b("mul", s.nhw_step, bm), i), loc=s.loc),
                    N.Let(q, b("add", b("mul", s.c_step, bk), j), loc=s.loc)]
            h_at, w_at = pixel(m, q)
            lets += [N.Let(h, h_at, loc=s.loc), N.Let(w, w_at, loc=s.loc)]
            inside = N.Logic("and", (N.cmp("lt", m, b("mul", n_, b("mul", oh, ow))),
                                     N.cmp("lt", q, taps),
                                     N.cmp("ge", h, 0), N.cmp("lt", h, h_),
                                     N.cmp("ge", w, 0), N.cmp("lt", w, w_)))
            value = N.Load(img.name, (b("floordiv", m, b("mul", oh, ow)), h, w, b("mod", q, c_)), img.dtype)
            store = N.Store(col.name, (i, j), N.Select(inside, value, N.const(0, img.dtype), img.dtype),
                            loc=s.loc)
            return fold_constants(tuple(lets)) + (store,)
        return self.nest(s, (bm, bk), body)

    visit_im2_col = visit_im2col  # (the visitor's snake_case of "Im2Col")

    def visit_copy(self, s: N.Copy) -> N.Stmt:
        return self.copy(s)

    def visit_fill(self, s: N.Fill) -> N.Stmt:
        return self.fill(s, s.dst, s.value)

    def visit_clear(self, s: N.Clear) -> N.Stmt:
        buf = self.buffers[s.buffer]
        region = N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape), tuple(buf.shape))
        return self.fill(s, region, N.const(0, buf.dtype))

    def visit_atomic_add(self, s: N.AtomicAdd) -> N.Stmt:
        if isinstance(s.value, N.Region):
            return self.atomic_tile(s)
        if s.dst.extents is not None:  # one value into every element of a region (TileLang's src_value)
            shape = squeeze(tuple(s.dst.extents))
            return self.nest(s, shape, lambda vs: (dataclasses.replace(
                s, dst=N.Region(s.dst.buffer, self.indices(s.dst, shape, vs))),))
        return s


class _MoveColumnsLast(_Lowerer):
    """The column reductions ``ids`` (``Reduce`` of a 2-D fragment over dim 0 into a
    fragment) moved to a fragment with the columns last, through a transposed shared
    tile; nothing else changes."""

    def __init__(self, func: N.PrimFunc, ids: set):
        super().__init__(func)
        self.ids = ids

    def generic_tile_op(self, s):
        return s

    visit_copy = visit_fill = visit_clear = visit_atomic_add = visit_scan = generic_tile_op
    visit_im2col = visit_im2_col = generic_tile_op

    def visit_reduce(self, s: N.Reduce):
        if id(s) not in self.ids:
            return s
        stmts, frag = self.move_last(s, self.buffers[s.src])
        return stmts + [dataclasses.replace(s, src=frag.name, dim=frag.ndim - 1)]


def move_columns_last(func: N.PrimFunc, scope: N.KernelScope, ids: set) -> N.KernelScope:
    """``scope`` with its column reductions ``ids`` (``id`` of each ``Reduce``) of
    fragments the layout pass lays out without a T.gemm register layout moved, as the
    tile-op lowering moves any other reduced dim last (the fresh names avoid ``func``'s)."""
    return _MoveColumnsLast(func, ids).visit_kernel(scope)


def reduce_identity(kind: str, dtype: str) -> N.Const:
    """The value a ``kind`` reduction starts from (TileLang's): 0 for sums, ``-inf`` / the
    least integer for max, ``+inf`` / the greatest for min, 0 for absmax (|x| >= 0), all
    ones for bitand, 0 for bitor / bitxor."""
    info = DTYPES[dtype]
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return N.const(0, dtype)
    if N.is_float(dtype):
        return N.const(float("-inf") if kind == "max" else float("inf"), dtype)
    signed = info.kind == "int"
    lo = -(1 << (info.bits - 1)) if signed else 0
    hi = (1 << (info.bits - 1)) - 1 if signed else (1 << info.bits) - 1
    if kind == "max":
        return N.Const(lo, dtype)
    return N.Const(hi if kind == "min" else (-1 if signed else hi), dtype)  # min, bitand


def reduce_update(kind: str, acc: N.Expr, value: N.Expr, absolute: bool = False,
                  nan: bool = False) -> N.Expr:
    """``acc`` combined with ``value`` by reduction ``kind`` (TileLang's update of the
    destination: ``dst + r``, ``max(dst, r)`` ...); with ``absolute`` the abs kinds take
    ``|value|`` (folding source elements rather than a reduced result).  ``nan``
    (TileLang's ``nan_propagate``): a NaN on either side is the result (``__hmax_nan``),
    ``value != value ? value : acc != acc ? acc : max(acc, value)``."""
    if absolute and kind in ("abssum", "absmax") and DTYPES[value.dtype].kind != "uint":
        value = N.Call("abs", (value,), value.dtype)
    op = {"sum": "add", "abssum": "add", "max": "max", "absmax": "max", "min": "min",
          "bitand": "bitand", "bitor": "bitor", "bitxor": "bitxor"}[kind]
    out = N.BinOp(op, acc, value, acc.dtype)
    if nan and op in ("max", "min") and N.is_float(acc.dtype):
        out = N.Select(N.cmp("ne", acc, acc), acc, out, acc.dtype)
        out = N.Select(N.cmp("ne", value, value), N.cast(value, acc.dtype), out, acc.dtype)
    return out


def _zero(e) -> bool:
    return isinstance(e, N.Const) and e.value == 0


def _aligned(extents, rank: int):
    """The extents of a region origin of ``rank`` dims copied with a tile of ``extents``:
    TileLang's right-aligned extents (``legalize_pairwise_extents``), leading dims 1, so
    ``T.copy(Y[0, 0], y)`` with ``y`` of shape ``(32, 1)`` walks ``Y[i, 0]``."""
    if extents is None:
        return None
    extents = tuple(extents)
    return (N.Const(1, "int32"),) * (rank - len(extents)) + extents[max(len(extents) - rank, 0):]


def _kept_dims(extents, rank: int) -> list[int]:
    """Which axes of a region with ``extents`` the ``rank`` loop dims walk: its non-unit
    axes, in order (the trailing ``rank`` axes when there are fewer)."""
    kept = [d for d, x in enumerate(extents) if not is_unit(x)]
    return kept if len(kept) == rank else list(range(len(extents) - rank, len(extents)))


def lower_tile_ops(func: N.PrimFunc) -> N.PrimFunc:
    """``func`` with copies, fills, clears and tile atomics turned into parallel nests."""
    return _Lowerer(func).run(func)


def _with_lanes(nest: N.For, width: int) -> N.For:
    """``nest`` running ``width`` lanes a thread step: its innermost loop's ``vector_width``,
    1 on the others (as the frontend marks ``T.Parallel(..., coalesced_width=width)``)."""
    if len(nest.body) == 1 and isinstance(nest.body[0], N.For) and nest.body[0].kind == "parallel":
        return dataclasses.replace(nest, vector_width=1, body=(_with_lanes(nest.body[0], width),))
    return dataclasses.replace(nest, vector_width=width)
