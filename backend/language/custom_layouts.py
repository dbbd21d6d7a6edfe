"""TileLang's user-defined layouts: ``T.Fragment(shape, forward_fn=..., replicate=...)`` (which
thread holds each element of a fragment, or runs each iteration of a ``T.Parallel`` loop,
and in which of its registers) and ``T.Layout(shape, forward_fn)`` on a shared buffer (the
element's place in the buffer's storage).

The shapes of the programs that use them are static, so tilecute evaluates a map over its
whole input (and its replication index) at parse time:

- a ``T.Fragment`` is honored where the thread of every element equals the one in one of
  tilecute's own fragment layouts (:func:`match_fragment`): ``blocked`` over the block's
  threads with some ``vector``, or ``replicated`` (every thread of the block holds every
  element), or one of them over a contiguous, warp-aligned range of the block's threads
  (the statements over the fragment then run on that range).  The program then means
  exactly what TileLang's does: the same thread holds (or runs) the same element
  (iteration); a replicated one may be held by more threads than TileLang's map gives
  (the same values: a reduction's output on the threads of each row is held by all the
  threads of the rows).  Which register of its thread holds an element
  changes no value a program computes, so tilecute keeps its own register order (the map
  must still give two elements of one thread different registers, as TileLang requires);
  any other map is refused, saying what tilecute takes;
- a ``T.Layout`` on a shared buffer (:func:`resolve_shared`): the identity is tilecute's
  ``row_major``; any other injective map with non-negative outputs makes the buffer a
  row-major buffer of the map's output shape read and written element by element at
  ``forward(idx)`` (:mod:`.global_layouts` writes the accesses); a map sending two
  elements to one place is refused, as TileLang refuses it (its issue 2632).

Imports only the IR nodes, and numpy when a map is evaluated (not at import).
"""

from __future__ import annotations

import math

from ..ir import nodes as N
from .global_layouts import GlobalMap


class MapError(ValueError):
    """A user layout tilecute cannot take, with the reason."""


# ---- evaluating a map ---------------------------------------------------------------------
_BIN = {"add": "add", "sub": "subtract", "mul": "multiply", "min": "minimum", "max": "maximum",
        "bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor",
        "shl": "left_shift", "shr": "right_shift"}  # numpy's names
_CMP = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
        "eq": "equal", "ne": "not_equal"}


def evaluate(e: N.Expr, env: dict):
    """The integer values of index expression ``e`` over numpy arrays ``env`` (var name ->
    int64 array); ``MapError`` for what an index map cannot hold."""
    import numpy as np

    if isinstance(e, N.Const):
        if isinstance(e.value, float):
            raise MapError(f"it computes a {e.dtype} value ({e.value}); a layout's outputs "
                           "are integers")
        return np.int64(e.value)
    if isinstance(e, N.Var):
        if e.name not in env:
            raise MapError(f"it reads '{e.name}', which is not one of its indices")
        return env[e.name]
    if isinstance(e, N.BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op in ("floordiv", "div", "mod"):
            if np.any(np.asarray(b) == 0):
                raise MapError("it divides by zero")
            return np.floor_divide(a, b) if e.op != "mod" else np.mod(a, b)
        return getattr(np, _BIN[e.op])(a, b)
    if isinstance(e, N.Cmp):
        return getattr(np, _CMP[e.op])(evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, N.Logic):
        vals = [evaluate(x, env) for x in e.args]
        out = vals[0]
        for v in vals[1:]:
            out = np.logical_and(out, v) if e.op == "and" else np.logical_or(out, v)
        return out
    if isinstance(e, N.Not):
        return np.logical_not(evaluate(e.a, env))
    if isinstance(e, N.Select):
        return np.where(evaluate(e.cond, env), evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, N.Cast):
        if N.is_float(e.dtype):
            raise MapError(f"it casts to {e.dtype}; a layout's outputs are integers")
        return evaluate(e.value, env)
    what = type(e).__name__ if not isinstance(e, N.Call) else f"T.{e.name}"
    raise MapError(f"it uses {what}, which tilecute does not evaluate in a layout (+, -, *, "
                   "//, %, min, max, bit operations, comparisons and T.if_then_else of the "
                   "indices and ints)")


def _int_shape(shape, what: str) -> tuple:
    try:
        out = tuple(int(d.value) if isinstance(d, N.Const) else int(d) for d in shape)
    except (TypeError, ValueError, AttributeError):
        raise MapError(f"{what}: the shape {tuple(shape)} is not a tuple of ints (tilecute "
                       "evaluates a layout over its static shape)") from None
    if not out or any(d < 1 for d in out):
        raise MapError(f"{what}: the shape {out} needs positive dims")
    return out


def _outputs(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _grid(shape, extra: int = 0):
    """Index arrays over ``shape`` (row-major flat order), plus a trailing axis of ``extra``
    values (the replication index) when ``extra``: each array of shape (elements, extra)."""
    import numpy as np

    grids = np.indices(shape).reshape(len(shape), -1).astype(np.int64)
    reps = max(extra, 1)
    cols = [np.repeat(g[:, None], reps, axis=1) for g in grids]
    rep = np.repeat(np.arange(reps, dtype=np.int64)[None, :], grids.shape[1], axis=0)
    return cols, rep


def _check_python(fn, args_at, got, what: str, count: int) -> None:
    """TileLang runs ``fn`` on TVM expressions, where a Python ``if`` on an index is an
    error; tilecute's expressions are true in an ``if``, so the map is also run on Python
    ints at some points and must agree (else it branched on an index in Python)."""
    step = max(1, count // 512)
    for k in list(range(0, count, step)) + [count - 1]:
        try:
            out = _outputs(fn(*args_at(k)))
            vals = [int(v.value) if isinstance(v, N.Const) else int(v) for v in out]
        except Exception:  # noqa: BLE001  (T.* helpers on ints, say: nothing to compare)
            return
        if vals != [int(g[k]) for g in got]:
            raise MapError(f"{what} gives {vals} at point {k} when run on ints but {[int(g[k]) for g in got]} "
                           "on index expressions: it branches on an index in Python (`if i < "
                           "n:`), which TileLang refuses; write T.if_then_else(cond, a, b)")


# ---- T.Fragment ---------------------------------------------------------------------------
_FRAGMENT_UNSUPPORTED = {
    "map_forward_thread": "it returns a TVM expression",
    "map_forward_index": "it returns a TVM expression",
    "get_forward_vars": "it returns TVM iteration variables",
    "get_forward_index": "it returns TVM expressions",
    "get_linearized_forward_index": "it returns a TVM expression",
    "thread": "it is a TVM expression",
    "index": "it is a list of TVM expressions",
    "inverse": "tilecute does not invert layouts",
    "reshape": "tilecute does not reshape layouts",
    "expand": "tilecute does not expand layouts",
    "plot": "tilecute has no layout plots",
}


class Fragment:
    """TileLang's ``T.Fragment(shape, forward_fn=None, forward_thread_fn=None, replicate=1,
    forward_index_fn=None)``: ``forward_fn(*indices[, rep])`` returns ``(thread, local)``;
    or ``forward_thread_fn(*indices[, rep])`` the thread and ``forward_index_fn(*indices)``
    the register.  ``rep`` (with ``replicate > 1``) ranges over ``replicate`` values: the
    element is held by each of the threads it gives.  Used as ``T.annotate_layout({frag:
    T.Fragment(...)})`` and ``T.Parallel(..., loop_layout=T.Fragment(...))``."""

    _SIGNATURE = ("shape", "forward_fn", "forward_thread_fn", "replicate", "forward_index_fn")

    def __init__(self, *args, **kwargs):
        names = self._SIGNATURE
        if len(args) > len(names):
            raise MapError(f"T.Fragment: unexpected positional argument {len(names) + 1} "
                           f"(`{args[len(names)]!r}`); T.Fragment takes {len(names)} positional "
                           f"argument(s) (the signature is T.Fragment(shape, forward_fn=None, "
                           "forward_thread_fn=None, replicate=1, forward_index_fn=None))")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise MapError(f"T.Fragment: {'unexpected' if k not in names else 'repeated'} "
                               f"argument {k!r} (the signature is T.Fragment(shape, "
                               "forward_fn=None, forward_thread_fn=None, replicate=1, "
                               "forward_index_fn=None))")
            bound[k] = v
        if "shape" not in bound:
            raise MapError("T.Fragment: missing argument 'shape'")
        self._init(bound["shape"], bound.get("forward_fn"), bound.get("forward_thread_fn"),
                   bound.get("replicate", 1), bound.get("forward_index_fn"))

    def _init(self, shape, forward_fn, forward_thread_fn, replicate, forward_index_fn):
        self.shape = _int_shape(shape, "T.Fragment")
        if not isinstance(replicate, int) or isinstance(replicate, bool) or replicate < 1:
            raise MapError(f"T.Fragment: replicate must be an int >= 1, got {replicate!r}")
        if forward_fn is None and forward_thread_fn is None:
            raise MapError("T.Fragment needs forward_fn (indices -> (thread, local)) or "
                           "forward_thread_fn")
        for name, fn in (("forward_fn", forward_fn), ("forward_thread_fn", forward_thread_fn),
                         ("forward_index_fn", forward_index_fn)):
            if fn is not None and not callable(fn):
                raise MapError(f"T.Fragment: {name} must be a function, got {fn!r}")
        self.replicate_extent = replicate
        self.forward_fn, self.forward_thread_fn = forward_fn, forward_thread_fn
        self.forward_index_fn = forward_index_fn
        self._table = None

    # the map as functions of (indices, rep), which repeat/replicate compose
    def _thread_at(self, idx, rep):
        if self.forward_fn is not None:
            return self._pair(idx, rep)[0]
        extra = (rep,) if self.replicate_extent > 1 else ()
        return self.forward_thread_fn(*idx, *extra)

    def _index_at(self, idx, rep):
        if self.forward_fn is not None:
            return _outputs(self._pair(idx, rep)[1])
        return _outputs(self.forward_index_fn(*idx)) if self.forward_index_fn else []

    def _pair(self, idx, rep):
        extra = (rep,) if self.replicate_extent > 1 else ()
        out = self.forward_fn(*idx, *extra)
        if not isinstance(out, (list, tuple)) or len(out) != 2:
            raise MapError(f"T.Fragment: forward_fn returns (thread, local), got {out!r}")
        return out

    def table(self):
        """``(thread, local)``: int arrays of shape (elements, replicate), element ``f`` the
        row-major flat index; ``local`` linearizes the register indices row-major over
        their extents (TileLang's output shape)."""
        import numpy as np

        if self._table is not None:
            return self._table
        vars_ = [N.Var(f"i{k}", "int32") for k in range(len(self.shape))]
        rep = N.Var("rep", "int32")
        thread = N.as_expr(self._thread_at(vars_, rep))
        index = [N.as_expr(x) for x in self._index_at(vars_, rep)] or [N.Const(0, "int32")]
        cols, reps = _grid(self.shape, self.replicate_extent)
        env = {v.name: c for v, c in zip(vars_, cols)}
        env["rep"] = reps
        n = cols[0].shape[0]
        full = lambda x: np.broadcast_to(np.asarray(x, dtype=np.int64), (n, reps.shape[1]))  # noqa: E731
        t = full(evaluate(thread, env))
        ix = [full(evaluate(x, env)) for x in index]
        if np.any(t < 0):
            raise MapError("T.Fragment: the thread it gives is negative for some element")
        if any(np.any(x < 0) for x in ix):
            raise MapError("T.Fragment: a register index it gives is negative for some element")
        flat_k = lambda k: (tuple(int(c[k // reps.shape[1], k % reps.shape[1]]) for c in cols),  # noqa: E731
                            int(reps[k // reps.shape[1], k % reps.shape[1]]))
        count = t.size
        if self.forward_fn is not None:
            def run(*a):
                th, ix_ = self._pair(a[:-1] if self.replicate_extent > 1 else a,
                                     a[-1] if self.replicate_extent > 1 else None)
                return [th] + _outputs(ix_)
            got = [t.reshape(-1)] + [x.reshape(-1) for x in ix]
            _check_python(run, lambda k: flat_k(k)[0] + ((flat_k(k)[1],) if self.replicate_extent > 1 else ()),
                          got, "T.Fragment's forward_fn", count)
        else:
            extra = lambda k: (flat_k(k)[1],) if self.replicate_extent > 1 else ()  # noqa: E731
            _check_python(self.forward_thread_fn, lambda k: flat_k(k)[0] + extra(k),
                          [t.reshape(-1)], "T.Fragment's forward_thread_fn", count)
        extents = [int(x.max()) + 1 for x in ix]
        local = np.zeros_like(t)
        for x, e in zip(ix, extents):
            local = local * e + x
        if self.forward_fn is None and self.forward_index_fn is None:
            local = self._inferred_index(t)
        self._table = (t, local)
        return self._table

    @staticmethod
    def _inferred_index(t):
        """TileLang's register index for a T.Fragment given only its thread map
        (``infer_fragment_index``: the parts of the indices the thread map leaves unused,
        flattened in index order, the replica not counted): each element's rank among the
        elements its thread holds, in row-major order (elements of one thread differ only
        in those unused parts, whose flattening orders them row-major); the same for
        every replica, as TileLang drops the replica from the inference."""
        import numpy as np

        first = t[:, 0]
        order = np.lexsort((np.arange(first.shape[0]), first))  # by thread, then element
        rank = np.empty_like(first)
        starts = np.r_[0, np.flatnonzero(np.diff(first[order])) + 1]
        counts = np.diff(np.r_[starts, first.shape[0]])
        rank[order] = np.arange(first.shape[0]) - np.repeat(starts, counts)
        return np.broadcast_to(rank[:, None], t.shape).copy()

    # ---- TileLang's methods ----
    def get_thread_size(self) -> int:
        return int(self.table()[0].max()) + 1

    def get_input_shape(self) -> list:
        return list(self.shape)

    def _composable(self, what: str) -> None:
        """A map built from this one reads its register index as an expression: one
        inferred from the thread map alone (several elements per thread) has none."""
        if self.forward_fn is None and self.forward_index_fn is None and \
                self.table()[1].max() > 0:
            raise MapError(f"T.Fragment.{what}: this T.Fragment gives only its thread map and "
                           "its threads hold several elements; tilecute builds no map on "
                           "TileLang's inferred register index (give forward_index_fn)")

    def get_output_shape(self) -> list:
        import numpy as np

        if self.forward_fn is None and self.forward_index_fn is None:
            return [int(self.table()[1].max()) + 1]
        vars_ = [N.Var(f"i{k}", "int32") for k in range(len(self.shape))]
        index = [N.as_expr(x) for x in self._index_at(vars_, N.Var("rep", "int32"))]
        cols, reps = _grid(self.shape, self.replicate_extent)
        env = {v.name: c for v, c in zip(vars_, cols)}
        env["rep"] = reps
        return [int(np.max(evaluate(x, env))) + 1 for x in index]

    def replicate(self, replicate: int) -> "Fragment":
        """TileLang's ``Fragment.replicate(n)``: ``n`` times the threads, the copies of
        element ``x`` on threads ``thread(x, rep % R) + extent * (rep // R)``."""
        if not isinstance(replicate, int) or isinstance(replicate, bool) or replicate < 1:
            raise MapError(f"T.Fragment.replicate: replicate must be an int >= 1, got {replicate!r}")
        base, R, extent = self, self.replicate_extent, self.get_thread_size()
        if R * replicate == 1:
            return self
        self._composable("replicate")

        def pair(*a):
            idx, rep = a[:-1], a[-1]
            return (base._thread_at(idx, rep % R) + extent * (rep // R),
                    base._index_at(idx, rep % R))
        return Fragment(self.shape, forward_fn=pair, replicate=R * replicate)

    def repeat(self, repeats, repeat_on_thread: bool = False, lower_dim_first: bool = True) -> "Fragment":
        """TileLang's ``Fragment.repeat``: the shape times ``repeats`` per dim, each copy of
        the map on further threads (``repeat_on_thread``) or further registers."""
        reps = [repeats] * len(self.shape) if isinstance(repeats, int) else list(repeats)
        if len(reps) != len(self.shape) or any(not isinstance(r, int) or r < 1 for r in reps):
            raise MapError(f"T.Fragment.repeat: repeats must be one int >= 1 per dim of "
                           f"{self.shape}, got {repeats!r}")
        shape, base = self.shape, self
        self._composable("repeat")
        order = list(reversed(range(len(shape)))) if lower_dim_first else list(range(len(shape)))

        def split(idx):
            inner = [i % s for i, s in zip(idx, shape)]
            which, stride = 0, 1
            for d in order:
                which = which + (idx[d] // shape[d]) * stride
                stride *= reps[d]
            return inner, which
        rep_var = self.replicate_extent > 1
        out = None if repeat_on_thread else self.get_output_shape()
        if out is not None and len(out) != 1:
            raise MapError("T.Fragment.repeat: repeating on registers needs one register "
                           "index (TileLang's check)")
        extent = self.get_thread_size() if repeat_on_thread else 0

        def pair(*a):
            idx, r = (a[:-1], a[-1]) if rep_var else (a, None)
            inner, which = split(idx)
            thread, index = base._thread_at(inner, r), base._index_at(inner, r)
            if repeat_on_thread:
                return thread + extent * which, index
            return thread, [index[0] + out[0] * which]
        return Fragment(tuple(s * r for s, r in zip(shape, reps)), forward_fn=pair,
                        replicate=self.replicate_extent)

    def condense_rep_var(self) -> "Fragment":
        """TileLang's ``condense_rep_var``: renumbers the replication index; every element
        keeps its threads and registers, which is all tilecute reads of a map."""
        return self

    def is_equal(self, other: "Fragment") -> bool:
        import numpy as np

        if not isinstance(other, Fragment) or other.shape != self.shape:
            return False
        (t1, l1), (t2, l2) = self.table(), other.table()
        sets = lambda t, loc: [set(zip(a, b)) for a, b in zip(t.tolist(), loc.tolist())]  # noqa: E731
        return sets(t1, l1) == sets(t2, l2)

    def __getattr__(self, name):
        if name in _FRAGMENT_UNSUPPORTED:
            raise NotImplementedError(f"T.Fragment.{name} is not supported by tilecute: "
                                      f"{_FRAGMENT_UNSUPPORTED[name]}")
        raise AttributeError(f"'Fragment' object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"T.Fragment({self.shape}, replicate={self.replicate_extent})"


def match_fragment(frag: Fragment, shape, threads: int, what: str) -> N.Layout:
    """tilecute's layout giving every element of ``shape`` (a fragment's, or a
    ``T.Parallel`` nest's extents) the threads ``frag`` gives it, over a block of
    ``threads`` threads: ``blocked`` (one thread per element, element ``f`` on thread ``(f
    // vector) % threads``) or ``replicated`` (every thread holds every element).

    Or over part of the block (TileLang's fragments on some of its threads, reduced with
    its partial thread barriers): ``blocked`` over threads ``lo .. lo + n - 1`` (element
    ``f`` on ``lo + (f // vector) % n``: ``threads=n, first_thread=lo``), or ``replicated``
    over them where each element lies on some of the threads of that range (every thread
    of the range then holds every element; the values are the same); ``n`` whole warps,
    a power of two, from a multiple of 32 (TileLang's partial barriers' rule).  The pass
    ``fragment_thread_regions`` runs the statements over such a fragment on its threads.
    Elements on some threads of the whole block are ``replicated`` alike.
    ``MapError`` naming ``what`` and saying why not."""
    import numpy as np

    shape = _int_shape(shape, what)
    if frag.shape != shape:
        raise MapError(f"{what}: the T.Fragment's shape {frag.shape} is not {shape}")
    t, local = frag.table()
    n = t.shape[0]
    hi = int(t.max())
    if hi >= threads:
        raise MapError(f"{what}: the T.Fragment puts an element on thread {hi}, but the block "
                       f"has {threads} threads")
    # two elements of one thread in one register: TileLang refuses such a map too
    pairs = np.stack([t.reshape(-1), local.reshape(-1),
                      np.repeat(np.arange(n), t.shape[1])], axis=1)
    pairs = np.unique(pairs, axis=0)
    keys = pairs[:, 0] * (int(local.max()) + 1) + pairs[:, 1]
    if np.unique(keys).size != keys.size:
        k = np.flatnonzero(np.diff(np.sort(keys)) == 0)[0]
        key = np.sort(keys)[k]
        raise MapError(f"{what}: the T.Fragment puts two elements in register "
                       f"{key % (int(local.max()) + 1)} of thread {key // (int(local.max()) + 1)}")
    held = [np.unique(row) for row in t]
    if all(h.size == 1 for h in held):
        owner = np.array([h[0] for h in held])
        v = 1
        while v < n and owner[v] == owner[0]:
            v += 1
        f = np.arange(n)
        if owner[0] == 0 and np.array_equal(owner, (f // v) % threads):
            return N.Layout("blocked", threads=threads, vector=v)
        used = np.unique(owner)
        if used.size < threads and owner[0] == used[0] and \
                np.array_equal(owner, used[0] + (f // v) % used.size):
            # TileLang's fragment over part of the block: its loops run on those threads,
            # its reductions meet on a barrier of theirs (the layout pass's thread region)
            lo, n = int(used[0]), int(used.size)
            _check_part(what, lo, n, threads, f"spreads it over threads {lo}..{lo + n - 1}")
            return N.Layout("blocked", threads=n, vector=v, first_thread=lo)
        if used.size and used[-1] - used[0] + 1 != used.size:
            raise MapError(f"{what}: the T.Fragment spreads it over threads "
                           f"{_show_ranges(used)}, which are not one contiguous thread range; "
                           "tilecute lays a fragment over the block's threads or over one "
                           "contiguous, warp-aligned range of them")
        raise MapError(f"{what}: the T.Fragment puts element f (row-major) on threads "
                       f"{_show_threads(owner)}; tilecute takes a map whose thread is "
                       f"(f // v) % {threads} for some v (its blocked layout over the block's "
                       f"{threads} threads) or one holding every element on every thread "
                       "(replicate = the block's threads)")
    used = np.unique(np.concatenate(held))
    if used.size == threads:
        # (each element on all the block's threads; or on some of them, say the threads of
        # its row in a reduction's output: every thread then holds it, with the same value)
        return N.Layout("replicated")
    if used[-1] - used[0] + 1 == used.size:
        # every element on some threads of one contiguous range (a reduction's output on
        # the threads of its rows, TileLang's partial thread barrier): replicated over that
        # range, whose every thread then holds every element (the same values)
        lo, n = int(used[0]), int(used.size)
        _check_part(what, lo, n, threads, f"holds its elements on threads {lo}..{lo + n - 1}")
        return N.Layout("replicated", threads=n, first_thread=lo)
    raise MapError(f"{what}: the T.Fragment holds its elements on threads "
                   f"{_show_ranges(used)}, which are not one contiguous thread range; "
                   "tilecute lays a fragment over the block's threads or over one "
                   "contiguous, warp-aligned range of them")


def _check_part(what: str, lo: int, n: int, threads: int, how: str) -> None:
    """A fragment on threads ``lo .. lo + n - 1`` of a block of ``threads``: its loops run
    on them (a thread region of whole warps) and its reductions meet on a named barrier of
    theirs; TileLang's partial thread barriers take a warp-aligned range whose width is a
    positive power of two."""
    if lo % 32 or n % 32:
        raise MapError(f"{what}: the T.Fragment {how}: not a warp-aligned participating thread "
                       f"range of whole warps whose width is a positive power of two (TileLang's "
                       "rule for the reductions over such fragments; tilecute runs a fragment's "
                       "loops on the whole warps holding it)")
    if n & (n - 1):
        raise MapError(f"{what}: the T.Fragment {how}: {n} threads, not a positive power of two "
                       "(TileLang's partial thread barriers take a power-of-two width of whole "
                       "warps)")


def _show_ranges(used) -> str:
    runs, start = [], int(used[0])
    for a, b in zip(used[:-1], used[1:]):
        if b != a + 1:
            runs.append((start, int(a)))
            start = int(b)
    runs.append((start, int(used[-1])))
    return ", ".join(f"{a}..{b}" for a, b in runs)


def _show_threads(owner) -> str:
    shown = ", ".join(str(int(x)) for x in owner[:8])
    return f"[{shown}{', ...' if owner.size > 8 else ''}] for f = 0, 1, ..."


# ---- T.Layout on a shared buffer ----------------------------------------------------------
class SharedMap(GlobalMap):
    """A shared buffer's index map (a global tensor's :class:`GlobalMap`, the same
    ``vars`` / ``outputs`` / ``shape`` and ``forward``): element ``idx`` of the buffer
    lives at ``forward(idx)`` of a row-major buffer of ``shape``."""


def resolve_shared(buffer: N.Buffer, shape, forward_fn):
    """``T.Layout(shape, forward_fn)`` on shared ``buffer``: ``N.Layout("row_major")`` for
    the identity, else a :class:`SharedMap`; ``MapError`` for a shape other than the
    buffer's, a negative output, or two elements mapped to one place."""
    import numpy as np

    dims = _int_shape(buffer.shape, f"'{buffer.name}'")
    got = _int_shape(shape, "T.Layout")
    if got != dims:
        raise MapError(f"the layout's shape {got} is not the shape of '{buffer.name}' {dims}")
    vars_ = [N.Var(f"{buffer.name}_i{k}", "int32") for k in range(len(dims))]
    outs = [N.as_expr(x) for x in _outputs(forward_fn(*vars_))]
    if not outs:
        raise MapError("the layout's forward_fn returns no index")
    for k, e in enumerate(outs):
        if not N.is_int(e.dtype):
            raise MapError(f"output index {k} of the layout has dtype {e.dtype}")
    cols, _ = _grid(dims)
    env = {v.name: c[:, 0] for v, c in zip(vars_, cols)}
    n = cols[0].shape[0]
    vals = [np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), (n,)) for e in outs]
    _check_python(forward_fn, lambda k: tuple(int(c[k, 0]) for c in cols), vals,
                  "the layout's forward_fn", n)
    for k, x in enumerate(vals):
        if np.any(x < 0):
            raise MapError(f"output index {k} of the layout is negative for some element of "
                           f"'{buffer.name}'")
    out_shape = [int(x.max()) + 1 for x in vals]
    flat = np.zeros(n, dtype=np.int64)
    for x, e in zip(vals, out_shape):
        flat = flat * e + x
    order = np.argsort(flat, kind="stable")
    same = np.flatnonzero(np.diff(flat[order]) == 0)
    if same.size:
        a, b = sorted((int(order[same[0]]), int(order[same[0] + 1])))
        ia, ib = np.unravel_index(a, dims), np.unravel_index(b, dims)
        at = tuple(int(x[a]) for x in vals)
        raise MapError(f"T.Layout on shared buffer `{buffer.name}` must be injective: elements "
                       f"{tuple(int(x) for x in ia)} and {tuple(int(x) for x in ib)} both map to "
                       f"physical coordinates {at}")
    if out_shape == list(dims) and np.array_equal(flat, np.arange(n)):
        return N.Layout("row_major")
    if math.prod(out_shape) >= 2 ** 31:
        raise MapError(f"the layout's output shape {tuple(out_shape)} is too large")
    return SharedMap(buffer, vars_, [N.cast(e, "int32") if e.dtype != "int32" else e for e in outs],
                     out_shape)
