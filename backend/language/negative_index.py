"""TileLang's meaning of a negative index: counted from the end of the dim.

TileLang's LegalizeNegativeIndex pass rewrites a buffer load or store index that its
analyzer *proves* negative to ``shape[dim] + index`` (``A[-1]`` of a (64,) tensor reads
``A[63]``; ``s[i - 4]`` with ``i`` in 0..3 over a (16,) buffer reads ``s[i + 12]``), on
every buffer scope.  An index that is only possibly negative it leaves as written (a scalar
one), and so does tilecute: the IR validator then refuses one that is known to leave an
on-chip buffer.  A lane of a ``T.Ramp`` index (a vector access, written per lane by the
parser) is wrapped at run time where its sign is unknown (``lane_wrap``; TileLang's
TryRewriteMixedRamp), the branch the ranges decide kept here.  A tile op's region
(``T.copy``, ``T.fill``/``T.clear``, ``T.atomic_add`` of a tile) is rewritten dim by dim
where every element index of the dim is proved negative (``_region``: TileLang rewrites
the loads and stores its lowering makes); a start only possibly negative, or one whose
region reaches 0 (``T.copy(s[i - 4:i + 4], ...)``), stays as written.

The proof uses the ranges of block indices (constant grid), thread indices, loops with a
known start and extent, and lets, with interval arithmetic (sound: a bound it gives holds).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.validate import _range
from ..ir.visitor import BODY_FIELDS, rebuild, value_range


def legalize_negative_indices(func: N.PrimFunc) -> N.PrimFunc:
    """``func`` with every load/store index proved negative replaced by ``shape + index``."""
    bufs = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    kernels = tuple(_stmt(k, {}, bufs) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)


def _hi(e: N.Expr, env: dict) -> int | None:
    """An upper bound of ``e`` over ``env``'s ranges, or None."""
    his = [h for h in (value_range(e, env)[1], _range(e, env)[1]) if h is not None]
    return min(his) if his else None


def _lo(e: N.Expr, env: dict) -> int | None:
    los = [lo for lo in (value_range(e, env)[0], _range(e, env)[0]) if lo is not None]
    return max(los) if los else None


def from_end(idx: N.Expr, extent: N.Expr) -> N.Expr:
    """``extent + idx``, a constant term folded in (``16 + (i - 4)`` is ``i + 12``)."""
    if isinstance(idx, N.BinOp) and idx.op in ("add", "sub") and isinstance(idx.b, N.Const) \
            and isinstance(extent, N.Const):
        c = extent.value + (idx.b.value if idx.op == "add" else -idx.b.value)
        return N.binop("add", idx.a, N.Const(c, idx.b.dtype)) if c else idx.a
    if isinstance(idx, N.Const):  # A[-1] of (n,): n - 1
        return N.binop("sub", extent, N.Const(-idx.value, idx.dtype))
    return N.binop("add", extent, idx)


def lane_wrap(idx: N.Expr, extent: N.Expr) -> N.Expr:
    """A lane of a ``T.Ramp`` index as TileLang's LegalizeNegativeIndex leaves it (its
    TryRewriteMixedRamp): counted from the end where negative, at run time where its sign
    is unknown: ``Select(idx < 0, extent + idx, idx)`` (a constant decided here; the pass
    below keeps the branch its ranges decide)."""
    if isinstance(idx, N.Const):
        return from_end(idx, extent) if idx.value < 0 else idx
    wrapped = from_end(idx, extent)
    t = N.promote(idx.dtype, wrapped.dtype)
    return N.Select(N.cmp("lt", idx, N.Const(0, idx.dtype)), N.cast(wrapped, t), N.cast(idx, t), t)


def _decided_wrap(idx: N.Expr, env: dict) -> N.Expr:
    """A ``lane_wrap`` select whose lane the ranges prove non-negative (its lane) or
    negative (its wrapped lane)."""
    if not (isinstance(idx, N.Select) and isinstance(idx.cond, N.Cmp) and idx.cond.op == "lt"
            and idx.cond.b == N.Const(0, idx.cond.a.dtype) and N.is_int(idx.cond.a.dtype)):
        return idx
    lo, hi = _lo(idx.cond.a, env), _hi(idx.cond.a, env)
    if lo is not None and lo >= 0:
        return idx.b
    if hi is not None and hi < 0:
        return idx.a
    return idx


def _indices(name: str, indices: tuple, env: dict, bufs: dict) -> tuple:
    buf = bufs.get(name)
    if buf is None or len(indices) != buf.ndim:
        return indices
    out = []
    for idx, extent in zip(indices, buf.shape):
        idx = _decided_wrap(idx, env)
        hi = _hi(idx, env) if N.is_int(idx.dtype) else None
        out.append(from_end(idx, extent) if hi is not None and hi < 0 else idx)
    return tuple(out)


def _exprs(x, env: dict, bufs: dict):
    """``x`` (an expression, region, or tuples of them) with its loads' indices rewritten."""
    def leaf(n):
        if isinstance(n, N.Load):
            inner = tuple(_exprs(i, env, bufs) for i in n.indices)
            return dataclasses.replace(n, indices=_indices(n.buffer, inner, env, bufs))
        return None
    return rebuild(x, leaf)


def _body(stmts: tuple, env: dict, bufs: dict) -> tuple:
    env = dict(env)
    return tuple(_stmt(s, env, bufs) for s in stmts)


def _stmt(s: N.Stmt, env: dict, bufs: dict) -> N.Stmt:
    """``s`` rewritten; a let or an allocation updates ``env`` / ``bufs`` for the statements
    after it."""
    if isinstance(s, N.Allocate):
        bufs[s.buffer.name] = s.buffer
        return s
    if isinstance(s, N.Let):
        value = _exprs(s.value, env, bufs)
        env[s.var.name] = (_lo(value, env), _hi(value, env)) if N.is_int(value.dtype) \
            else (None, None)
        return dataclasses.replace(s, value=value)
    inner = dict(env)
    if isinstance(s, N.KernelScope):
        for var, g in zip(s.block_vars, s.grid):
            inner[var.name] = (0, g.value - 1) if isinstance(g, N.Const) else (0, None)
        for axis, t in enumerate(s.threads):
            inner[f"thread_idx{axis}"] = (0, t - 1 + (s.producer_threads if axis == 0 else 0))
    elif isinstance(s, N.For):
        last = N.binop("sub", N.binop("add", s.start, s.extent), N.Const(1, s.extent.dtype))
        inner[s.var.name] = (_lo(s.start, env), _hi(last, env))
    changes = {}
    for f in dataclasses.fields(s):
        if f.name == "loc":
            continue
        x = getattr(s, f.name)
        if isinstance(s, N.If) and f.name in ("then", "orelse"):
            changes[f.name] = _body(x, _assume(s.cond, f.name == "then", env), bufs)
        elif f.name in BODY_FIELDS.get(type(s), ()):
            changes[f.name] = _body(x, inner, bufs)
        elif not (isinstance(s, N.For) and f.name == "var"):
            changes[f.name] = _exprs(x, env, bufs)
    s = dataclasses.replace(s, **changes)
    if isinstance(s, N.Store):
        s = dataclasses.replace(s, indices=_indices(s.buffer, s.indices, env, bufs))
    if isinstance(s, N.Copy):
        s = dataclasses.replace(s, src=_region(s.src, s.dst, env, bufs),
                                dst=_region(s.dst, s.src, env, bufs))
    elif isinstance(s, N.Fill):
        s = dataclasses.replace(s, dst=_region(s.dst, None, env, bufs))
    elif isinstance(s, N.AtomicAdd) and isinstance(s.value, N.Region):
        s = dataclasses.replace(s, dst=_region(s.dst, s.value, env, bufs),
                                value=_region(s.value, s.dst, env, bufs))
    return s


def _tile_extents(r: N.Region, bufs: dict):
    """A region's extents where it states them (or is a whole on-chip buffer), else None."""
    if r.extents is not None:
        return tuple(r.extents)
    buf = bufs.get(r.buffer)
    if buf is not None and buf.scope != "global" and \
            all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
        return tuple(buf.shape)
    return None


def _region(r: N.Region, other, env: dict, bufs: dict) -> N.Region:
    """A tile op's region with each dim whose every element index is proved negative
    counted from the end: TileLang lowers the op to loads and stores at ``start + i`` and
    its LegalizeNegativeIndex then rewrites those (``T.copy(A[-1, 0:64], s)`` reads the
    last row, ``T.copy(A[-16, 0], s)`` of a 16-row ``s`` the last 16).  A dim whose
    elements are only partly negative stays as written (its loads are bounds-checked).
    An origin with no extents takes the other side's, right-aligned (as the lowering)."""
    buf = bufs.get(r.buffer)
    if buf is None or len(r.starts) != buf.ndim:
        return r
    extents = _tile_extents(r, bufs)
    if extents is None and other is not None:
        theirs = _tile_extents(other, bufs)
        if theirs is not None:
            rank = len(r.starts)
            extents = (N.Const(1, "int32"),) * (rank - len(theirs)) + theirs[max(len(theirs) - rank, 0):]
    if extents is None or len(extents) != len(r.starts):
        return r
    starts = []
    for st, ext, dim in zip(r.starts, extents, buf.shape):
        hi = _hi(st, env) if N.is_int(st.dtype) else None
        ext_hi = _hi(ext, env) if N.is_int(ext.dtype) else None
        if hi is not None and ext_hi is not None and hi + ext_hi - 1 < 0:
            st = from_end(st, dim)
        starts.append(st)
    return dataclasses.replace(r, starts=tuple(starts)) if tuple(starts) != r.starts else r


_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def _assume(cond: N.Expr, holds: bool, env: dict) -> dict:
    """``env`` narrowed by what an ``if`` branch knows (TileLang's analyzer binds the
    condition likewise): ``var < e``, ``var >= e`` ... (``and``-ed in the then branch),
    a single comparison's negation in the else branch."""
    env = dict(env)
    conds = [cond]
    if holds and isinstance(cond, N.Logic) and cond.op == "and":
        conds = list(cond.args)
    for c in conds:
        if not isinstance(c, N.Cmp):
            continue
        op = c.op if holds else _NEGATE[c.op]
        for var, other, o in ((c.a, c.b, op), (c.b, c.a, _FLIP[op])):
            if not isinstance(var, N.Var) or not N.is_int(var.dtype):
                continue
            lo, hi = env.get(var.name, (None, None))
            olo, ohi = _lo(other, env), _hi(other, env)
            if o in ("lt", "le", "eq") and ohi is not None:
                bound = ohi - (o == "lt")
                hi = bound if hi is None else min(hi, bound)
            if o in ("gt", "ge", "eq") and olo is not None:
                bound = olo + (o == "gt")
                lo = bound if lo is None else max(lo, bound)
            env[var.name] = (lo, hi)
    return env
