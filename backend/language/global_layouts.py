"""TileLang's index-map layout on a global tensor: ``T.annotate_layout({G: T.Layout(G.shape,
lambda b, l, d: [...])})`` (its flash-attention backward lays the dQ accumulator out this
way, so that a thread's atomic adds land next to each other).

TileLang's meaning (its ``LowerTileOp``): the kernel reads and writes ``G`` through the map
everywhere in the kernel: element ``G[idx]`` is element ``forward(idx)`` of a row-major
buffer of the map's output shape over ``G``'s storage, from its first element, whatever the
strides of the caller's tensor (its remapped buffer has none).  The output shape is one
past the largest value of each output index over the input shape.

tilecute writes the same program with the IR it has: a global view ``G_layout`` of that
shape over ``G`` (an ``Allocate`` with ``view_of``, a row-major tensor over the parameter's
pointer) at the kernel's start, every tile op on ``G`` (``T.copy``, ``T.fill``,
``T.clear``, the tile ``T.atomic_add``) written as the ``T.Parallel`` nest of its element
statements, and every element access of ``G`` (a load, a store, an element atomic) made at
``forward(idx)`` of the view.  Any other statement naming
``G`` (``T.gemm``, ``T.reduce_*``, ``T.im2col``, TMA forms ...) is a ``FrontendError``.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N


class IndexMapLayout:
    """TileLang's ``T.Layout(shape, forward_fn)``: ``forward_fn`` takes one index per dim
    of ``shape`` and returns the output indices (a list, or one expression).  tilecute
    honors it on a global tensor in ``T.annotate_layout`` only."""

    def __init__(self, shape, forward_fn):
        if not callable(forward_fn):
            raise TypeError(f"T.Layout(shape, forward_fn): forward_fn must be callable, got "
                            f"{forward_fn!r}")
        self.shape = tuple(shape)
        self.forward_fn = forward_fn

    def __repr__(self) -> str:
        return f"T.Layout({self.shape}, {getattr(self.forward_fn, '__name__', 'fn')})"

    # ---- TileLang's methods (host side: what a program asks of a layout it builds) ----
    def _values(self) -> list:
        """The map's output indices at every input index: one int64 array per output, over
        the input shape's elements in row-major order (``MapError`` for what an index map
        cannot hold, a symbolic shape included)."""
        import numpy as np

        from .custom_layouts import _grid, _int_shape, _outputs, evaluate

        shape = _int_shape(self.shape, "T.Layout")
        vars_ = [N.Var(f"i{k}", "int32") for k in range(len(shape))]
        cols, _ = _grid(shape)
        env = {v.name: c[:, 0] for v, c in zip(vars_, cols)}
        n = cols[0].shape[0]
        return [np.broadcast_to(np.asarray(evaluate(N.as_expr(e), env), dtype=np.int64), (n,))
                for e in _outputs(self.forward_fn(*vars_))]

    def get_input_shape(self) -> list:
        return list(self.shape)

    def get_output_shape(self) -> list:
        """One past the largest value of each output index over the input shape."""
        return [int(v.max()) + 1 for v in self._values()]

    def is_equal(self, other) -> bool:
        """TileLang's ``Layout.is_equal``: the same input shape and the same output indices
        at every input index (tilecute compares the maps' values, so ``i * 8 + j`` and
        ``j + i * 8`` are equal)."""
        import numpy as np

        if not isinstance(other, IndexMapLayout) or list(other.shape) != list(self.shape):
            return False
        a, b = self._values(), other._values()
        return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))

    def __getattr__(self, name):
        """TileLang's other Layout methods (TVM expressions, layouts tilecute does not
        build): ``NotImplementedError`` naming the method, as ``T.Fragment``'s."""
        from .custom_layouts import _FRAGMENT_UNSUPPORTED

        if name in _FRAGMENT_UNSUPPORTED and name not in ("map_forward_thread", "thread"):
            raise NotImplementedError(f"T.Layout.{name} is not supported by tilecute: "
                                      f"{_FRAGMENT_UNSUPPORTED[name]}")
        raise AttributeError(f"'T.Layout' object has no attribute {name!r}")


class BufferProxy:
    """What a Python helper that builds a layout (``make_dq_layout(dQ)``) sees for a buffer
    of the prim_func: its ``shape`` (ints where constant, else IR expressions), ``dtype``
    and ``name``."""

    def __init__(self, buffer: N.Buffer):
        self.name, self.dtype = buffer.name, buffer.dtype
        self.shape = [int(d.value) if isinstance(d, N.Const) else d for d in buffer.shape]

    def __repr__(self) -> str:
        return f"<buffer {self.name} {tuple(self.shape)} {self.dtype}>"


class GlobalMap:
    """A resolved map of global buffer ``buffer``: index variables ``vars`` (one per dim),
    output index expressions ``outputs`` of them, output shape ``shape`` (ints)."""

    def __init__(self, buffer: N.Buffer, vars_, outputs, shape):
        self.buffer, self.vars, self.outputs, self.shape = buffer, vars_, outputs, shape

    def forward(self, indices) -> tuple:
        from ..ir.visitor import fold_constants, substitute

        if len(indices) != len(self.vars):
            raise ValueError(f"'{self.buffer.name}' is indexed with {len(indices)} indices, "
                             f"its layout takes {len(self.vars)}")
        mapping = {v.name: N.cast(i, "int32") if i.dtype != "int32" else i
                   for v, i in zip(self.vars, indices)}
        return tuple(fold_constants(substitute(e, mapping)) for e in self.outputs)


def resolve(buffer: N.Buffer, layout: IndexMapLayout) -> GlobalMap:
    """The map of ``layout`` on global ``buffer``; ``ValueError`` saying what does not fit
    (a shape other than the buffer's, symbolic dims, an output index that can be negative
    or whose bound is unknown, a map reaching past the tensor's elements)."""
    from ..ir.visitor import value_range

    dims = []
    for d in buffer.shape:
        if not isinstance(d, N.Const):
            raise ValueError(f"'{buffer.name}' has a symbolic dim; tilecute needs the dims of a "
                             "global tensor with an index-map layout known at compile time")
        dims.append(int(d.value))
    try:
        shape = [int(x.value) if isinstance(x, N.Const) else int(x) for x in layout.shape]
    except (TypeError, ValueError):
        raise ValueError(f"the layout's shape {layout.shape} is not a tuple of ints") from None
    if shape != dims:
        raise ValueError(f"the layout's shape {tuple(shape)} is not the shape of "
                         f"'{buffer.name}' {tuple(dims)}")
    vars_ = [N.Var(f"{buffer.name}_i{k}", "int32") for k in range(len(dims))]
    out = layout.forward_fn(*vars_)
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    outputs, out_shape = [], []
    env = {v.name: (0, n - 1) for v, n in zip(vars_, dims)}
    for k, e in enumerate(out):
        e = N.as_expr(e)
        if not N.is_int(e.dtype):
            raise ValueError(f"output index {k} of the layout has dtype {e.dtype}")
        lo, hi = value_range(e, env)
        if lo is None or hi is None or lo < 0:
            raise ValueError(f"output index {k} of the layout ranges over [{lo}, {hi}] on "
                             f"'{buffer.name}'; tilecute needs non-negative indices with a "
                             "bound it can compute (+, -, *, //, % of the indices and ints)")
        outputs.append(N.cast(e, "int32") if e.dtype != "int32" else e)
        out_shape.append(hi + 1)
    if math.prod(out_shape) > math.prod(dims):
        raise ValueError(f"the layout's output shape {tuple(out_shape)} holds "
                         f"{math.prod(out_shape)} elements, more than '{buffer.name}' has "
                         f"({math.prod(dims)}): the kernel would reach past the tensor")
    return GlobalMap(buffer, vars_, outputs, out_shape)


def apply(body: tuple, maps: dict, buffers: dict, fresh, error) -> tuple:
    """The kernel ``body`` reading and writing each global buffer of ``maps`` (name ->
    (:class:`GlobalMap`, loc of its annotation)) through its view.  ``buffers``: name ->
    Buffer of the parameters; ``fresh``: stem -> unique name; ``error(loc, msg)``: the
    FrontendError to raise."""
    views = {name: N.Buffer(fresh(f"{name}_layout"), m.buffer.dtype,
                            tuple(N.Const(n, "int32") for n in m.shape), "global")
             for name, (m, _) in maps.items()}
    body = _remap(body, maps, views, buffers, fresh, error, "such a global tensor")
    allocs = tuple(N.Allocate(views[name], loc=loc, view_of=name)
                   for name, (_, loc) in maps.items())
    return allocs + body


def apply_shared(body: tuple, maps: dict, buffers: dict, fresh, error) -> tuple:
    """The kernel ``body`` with each shared buffer of ``maps`` (name -> (a
    :class:`~.custom_layouts.SharedMap`, loc of its annotation)) allocated as a row-major
    buffer of the map's output shape, under its own name, and read and written element by
    element at ``forward(idx)`` (TileLang's ``T.annotate_layout({s: T.Layout(s.shape,
    fn)})``: the buffer's elements at the places its map gives)."""
    from ..ir.visitor import StmtMutator

    views = {name: N.Buffer(name, m.buffer.dtype, tuple(N.Const(n, "int32") for n in m.shape),
                            "shared") for name, (m, _) in maps.items()}
    body = _remap(body, maps, views, buffers, fresh, error,
                  "a shared buffer with an index map of the program's (T.Layout)")

    class _Realloc(StmtMutator):
        def visit_allocate(self, s):
            if s.buffer.name in views and not s.view_of:
                return dataclasses.replace(s, buffer=views[s.buffer.name],
                                           layout=N.Layout("row_major"))
            return s
    return _Realloc().visit_block(body)


def _remap(body: tuple, maps: dict, views: dict, buffers: dict, fresh, error, what: str) -> tuple:
    """``body`` with the tile ops on the buffers of ``maps`` written as element nests and
    every element access of one made at its map's ``forward(idx)`` of ``views[name]``; a
    statement taking such a buffer otherwise is ``error``'s FrontendError."""
    from ..ir.visitor import BODY_FIELDS, StmtMutator, rebuild, walk_nodes, walk_stmts

    # the tile ops on a mapped buffer, as the parallel nests of their element statements
    nests = _Nests(buffers, fresh, error)

    def names_mapped(s) -> bool:
        return (isinstance(s, N.Clear) and s.buffer in maps) or any(
            isinstance(x, (N.Region, N.Load, N.Store)) and x.buffer in maps
            for x in walk_nodes(s))

    class _Tiles(StmtMutator):
        def visit_allocate(self, s):
            nests.buffers[s.buffer.name] = s.buffer
            return s

        def visit_copy(self, s):
            return nests.copy(s) if names_mapped(s) else s

        def visit_fill(self, s):
            return nests.fill(s, s.dst, s.value) if names_mapped(s) else s

        def visit_clear(self, s):
            if s.buffer not in maps:
                return s
            buf = nests.buffers[s.buffer]
            return nests.fill(s, N.Region(s.buffer, tuple(N.Const(0, "int32") for _ in buf.shape),
                                          tuple(buf.shape)), N.const(0, buf.dtype))

        def visit_atomic_add(self, s):
            if isinstance(s.value, N.Region) and names_mapped(s):
                return nests.atomic(s)
            return s

    body = _Tiles().visit_block(body)

    def element(region: N.Region) -> bool:
        return region.extents is None or all(isinstance(e, N.Const) and e.value == 1
                                             for e in region.extents)

    # every element access of a mapped buffer, at its forward indices in the view
    def leaf(x):
        if isinstance(x, N.Load) and x.buffer in maps:
            idx = rebuild(x.indices, leaf)
            return N.Load(views[x.buffer].name, maps[x.buffer][0].forward(idx), x.dtype)
        if isinstance(x, N.Store) and x.buffer in maps:
            idx, value = rebuild(x.indices, leaf), rebuild(x.value, leaf)
            return N.Store(views[x.buffer].name, maps[x.buffer][0].forward(idx), value,
                           loc=x.loc)
        if isinstance(x, N.AtomicAdd) and x.dst.buffer in maps and element(x.dst) \
                and not isinstance(x.value, N.Region):
            m = maps[x.dst.buffer][0]
            dst = N.Region(views[x.dst.buffer].name, m.forward(rebuild(x.dst.starts, leaf)))
            return dataclasses.replace(x, dst=dst, value=rebuild(x.value, leaf))
        return None

    # a statement naming a mapped buffer other than element by element takes it some
    # other way (as a tile, a view, or n elements from one address: T.ptx_cp_async)
    for s in walk_stmts(body):
        own = dataclasses.replace(s, **{n: () for n in BODY_FIELDS.get(type(s), ())})
        elementwise = {id(s.dst)} if isinstance(s, N.AtomicAdd) and element(s.dst) \
            and not isinstance(s.value, N.Region) else set()
        for x in walk_nodes(own):
            if isinstance(x, (N.Load, N.Store)) or id(x) in elementwise:
                named = []  # (leaf maps it)
            else:
                named = [v for f in ("buffer", "a", "b", "c", "src", "dst", "view_of")
                         for v in [getattr(x, f, None)] if isinstance(v, str) and v in maps]
            if isinstance(x, N.Call) and x.name == "ptx_cp_async":
                named += [a.buffer for a in x.args[:2] if isinstance(a, N.Load) and a.buffer in maps]
            if named:
                form = "T.view" if isinstance(s, N.Allocate) else \
                    "T.ptx_cp_async" if isinstance(x, N.Call) else type(s).__name__
                raise error(s.loc, f"T.annotate_layout gives '{named[0]}' an index-map layout "
                                   "(T.Layout(shape, forward_fn)); tilecute reads and writes "
                                   f"{what} element by element (element loads "
                                   "and stores, T.copy, T.fill, T.clear, T.atomic_add), not "
                                   f"in {form}")
    return tuple(rebuild(s, leaf) for s in body)


class _Nests:
    """The element nests of tile ops on a mapped buffer: ``T.Parallel`` loops over the
    tile's non-unit extents.  Both sides must state their tile (a region with extents, or
    a whole shared/fragment/local buffer) with the same non-unit extents in order, as
    TileLang's examples write them (``T.copy(dQ[b, h, i:i + 64, :], dQ_out[b, h, i:i + 64,
    :])``, ``T.atomic_add(dQ[b, i:i + 64, h, :], dq)``); other pairs are refused."""

    def __init__(self, buffers: dict, fresh, error):
        self.buffers, self.fresh, self.error = dict(buffers), fresh, error

    def extents(self, s, r: N.Region, form: str, like=None):
        buf = self.buffers[r.buffer]
        if r.extents is not None:
            return tuple(r.extents)
        if buf.scope != "global" and all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
            return tuple(buf.shape)
        if like is not None and len(like) <= len(r.starts) and buf.scope == "global":
            # a global tile named by its origin takes the other side's extents, lined up
            # with its trailing dims (as the tile-op lowering reads T.copy(A[by * 64, 0], s))
            return (N.Const(1, "int32"),) * (len(r.starts) - len(like)) + tuple(like)
        raise self.error(s.loc, f"{form}: '{r.buffer}' is named by its origin; a tile op on a "
                                "global tensor with an index-map layout needs both sides' "
                                "extents (A[i:i + 64, 0:32], or a whole shared/fragment buffer)")

    def _stated(self, r: N.Region) -> bool:
        """Does ``r`` state its tile (extents, or a whole non-global buffer)?"""
        return r.extents is not None or self.buffers[r.buffer].scope != "global" and all(
            isinstance(x, N.Const) and x.value == 0 for x in r.starts)

    @staticmethod
    def kept(extents) -> list[int]:
        return [d for d, e in enumerate(extents) if not (isinstance(e, N.Const) and e.value == 1)]

    def indices(self, r: N.Region, extents, loop_vars) -> tuple:
        keep, out, k = self.kept(extents), [], 0
        for d, start in enumerate(r.starts):
            if d in keep:
                v = loop_vars[k]
                k += 1
                out.append(v if isinstance(start, N.Const) and start.value == 0
                           else N.binop("add", start, v))
            else:
                out.append(start)
        return tuple(out)

    def nest(self, s, shape, make_body) -> N.For:
        loop_vars = [N.Var(self.fresh("i"), "int32") for _ in shape]
        body = make_body(loop_vars)
        for d in reversed(range(len(shape))):
            body = (N.For(loop_vars[d], N.Const(0, "int32"), shape[d], "parallel", body,
                          loc=s.loc),)
        return body[0]

    def pair(self, s, a: N.Region, b: N.Region, form: str):
        known = [self.extents(s, r, form) for r in (a, b) if self._stated(r)]
        like = known[0] if known else None
        ea, eb = self.extents(s, a, form, like), self.extents(s, b, form, like)
        qa = [ea[d] for d in self.kept(ea)]
        qb = [eb[d] for d in self.kept(eb)]
        same = len(qa) == len(qb) and all(
            x == y or (isinstance(x, N.Const) and isinstance(y, N.Const) and x.value == y.value)
            for x, y in zip(qa, qb))
        if not same:
            from ..ir.printer import expr_str

            show = lambda t: "(" + ", ".join(expr_str(x) for x in t) + ")"  # noqa: E731
            raise self.error(s.loc, f"{form}: the tiles of '{a.buffer}' {show(ea)} and "
                                    f"'{b.buffer}' {show(eb)} differ in their non-unit extents; "
                                    "a tile op on a global tensor with an index-map layout "
                                    "takes two tiles of one shape")
        return ea, eb, qa

    def copy(self, s: N.Copy) -> N.Stmt:
        ea, eb, shape = self.pair(s, s.src, s.dst, "T.copy")
        src, dst = self.buffers[s.src.buffer], self.buffers[s.dst.buffer]
        return self.nest(s, shape, lambda vs: (N.Store(
            dst.name, self.indices(s.dst, eb, vs),
            N.cast(N.Load(src.name, self.indices(s.src, ea, vs), src.dtype), dst.dtype),
            loc=s.loc),))

    def fill(self, s, dst: N.Region, value: N.Expr) -> N.Stmt:
        ext = self.extents(s, dst, "T.fill")
        buf = self.buffers[dst.buffer]
        shape = [ext[d] for d in self.kept(ext)]
        return self.nest(s, shape, lambda vs: (N.Store(
            buf.name, self.indices(dst, ext, vs), N.cast(value, buf.dtype), loc=s.loc),))

    def atomic(self, s: N.AtomicAdd) -> N.Stmt:
        ev, ed, shape = self.pair(s, s.value, s.dst, "T.atomic_add")
        src, dst = self.buffers[s.value.buffer], self.buffers[s.dst.buffer]
        return self.nest(s, shape, lambda vs: (dataclasses.replace(
            s, dst=N.Region(dst.name, self.indices(s.dst, ed, vs)),
            value=N.cast(N.Load(src.name, self.indices(s.value, ev, vs), src.dtype),
                         dst.dtype)),))
