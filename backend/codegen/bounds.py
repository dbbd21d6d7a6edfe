"""Bounds predication, TileLang's LegalizeSafeMemoryAccess over the whole kernel: the
conditions under which a global access is in bounds (those :class:`Knowledge` cannot
prove), bounds-checked loads read into temporaries that stay 0 out of bounds (or the
tensor's T.annotate_safe_value), and atomics with a result run only in bounds; the memory
loads of a ``T.if_then_else`` branch read only where the branch is taken.  Imports no
CUTLASS.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from ..ir import nodes as N
from ..ir.validate import _range
from ..ir.visitor import substitute
from ..transform.analysis import value_range
from ..runtime.dtypes import DTYPES
from .expr import PREC, ExprPrinter, chain, const, cute_type, flatten_logic, register_type
from .source import Writer


def load_key(e: N.Load) -> tuple:
    return (e.buffer, e.indices)


# the value range of an integer loaded from memory, by dtype (TileLang's analyzer bounds a
# BufferLoad by its dtype); wider ones are unknown
_LOADED = {"bool": (0, 1), "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
           "uint16": (0, 65535), "uint32": (0, None), "uint64": (0, None)}
_PURE_CALLS = ("thread_idx", "ceildiv")
_ATOMIC_READS = N.ATOMIC_RETURNS + ("atomic_load",)  # calls whose first argument names the
# element they update or read (a Load that is not a plain read)
_DEPTH = 8  # substitutions tried before an index is left unproved


def _pure(e) -> bool:
    """Whether ``e`` reads no memory and calls nothing with an effect or a changing value:
    evaluated again later it gives the same value (its variables never change)."""
    if isinstance(e, N.Load):
        return False
    if isinstance(e, N.Call) and e.name not in _PURE_CALLS:
        return False
    if isinstance(e, N.Expr):
        return all(_pure(v) for v in vars(e).values() if isinstance(v, (N.Expr, tuple)))
    if isinstance(e, tuple):
        return all(_pure(v) for v in e)
    return True


def _constant(e) -> bool:
    """No variable, thread index or load in ``e``: TileLang's LegalizeSafeMemoryAccess
    leaves such an index unchecked."""
    if isinstance(e, (N.Var, N.Load, N.Call)):
        return False
    if isinstance(e, N.Expr):
        return all(_constant(v) for v in vars(e).values() if isinstance(v, (N.Expr, tuple)))
    if isinstance(e, tuple):
        return all(_constant(v) for v in e)
    return True


def _plus(a: dict, b: dict, k: int = 1) -> dict:
    out = dict(a)
    for atom, c in b.items():
        out[atom] = out.get(atom, 0) + k * c
        if out[atom] == 0 and atom is not None:
            del out[atom]
    return out


def _reads(e, safe=()):
    """The loads of ``e`` not inside another load's indices, and its atomic calls with a
    result, whose element is not a plain read (their arguments' loads are not listed); a
    cast of a load of a tensor in ``safe`` (one with a T.annotate_safe_value) to another
    dtype is listed whole: out of bounds it gives the value cast to the cast's dtype, as
    TileLang's T.copy stores the value cast to its destination's."""
    if isinstance(e, N.Load) or isinstance(e, N.Call) and e.name in _ATOMIC_READS:
        yield e
    elif isinstance(e, N.Cast) and isinstance(e.value, N.Load) and e.value.buffer in safe:
        yield e
    elif isinstance(e, N.Expr):
        for v in vars(e).values():
            yield from _reads(v, safe)
    elif isinstance(e, tuple):
        for v in e:
            yield from _reads(v, safe)


def safe_const(v: N.Const, dtype: str) -> N.Const:
    """Constant ``v`` converted to ``dtype`` as C (and TVM's Cast) converts it: an integer
    wraps to the width, a float to an integer truncates toward zero, anything to bool is
    ``!= 0``; a float stays the Python float the CuTe type rounds."""
    if dtype == "bool":
        return N.Const(bool(v.value), dtype)
    if N.is_float(dtype):
        return N.Const(float(v.value), dtype)
    x = v.value
    if isinstance(x, float):
        x = math.trunc(x) if math.isfinite(x) else 0
    bits = DTYPES[dtype].bits
    x = int(x) % (1 << bits)
    if not dtype.startswith("uint") and x >= 1 << (bits - 1):
        x -= 1 << bits
    return N.Const(x, dtype)


class Knowledge:
    """What is known where a statement is emitted, to prove an index in bounds as
    TileLang's LegalizeSafeMemoryAccess asks its arithmetic analyzer (symbolic bounds,
    then constant bounds): ``ranges``, the emitter's numeric (lo, hi) of loop, block and
    thread indices; ``bounds``, the symbolic inclusive (lo, hi) of serial-loop, block and
    dynamic-nest variables whose extent is an expression (``k`` of ``T.serial(n)`` is at
    most ``n - 1``); ``lets``, the values of load-free lets (the variable stands for its
    value) and ``let_ranges`` the numeric range of the others; ``facts``, linear forms the
    enclosing ``if`` conditions make nonnegative (``if c + w < N``: ``N - c - w - 1``).

    A proof is linear: an index is a sum of ``coefficient * atom`` (a variable, or an
    expression it cannot split: ``x // 4``, a load, ``min``), and ``e >= 0`` holds when
    the atoms' numeric ranges bound it below by 0, or it minus a fact does, or after a
    variable is replaced by the bound on the side that lowers ``e`` (``min(a, b)`` by
    ``a`` or ``b``).  Only load-free bounds and facts are kept: a variable never changes,
    memory may."""

    def __init__(self, ranges: dict[str, tuple]):
        self.ranges = ranges
        self.bounds: dict[str, tuple] = {}
        self.lets: dict[str, N.Expr] = {}
        self.written: dict[str, N.Expr] = {}  # those Lets' values as written (not expanded)
        self.let_ranges: dict[str, tuple] = {}
        self.facts: list[dict] = []

    # ---- what the emitter tells it ------------------------------------------------------
    def let(self, var: N.Var, value: N.Expr, within: N.Expr | None = None) -> None:
        """``within``: the Let's bound (``0 <= var < within``, a remapped block index
        below its grid extent), which the value's form may not show: the variable then
        stays an atom bounded as a block index is, rather than standing for its value."""
        if not N.is_int(var.dtype):
            return
        written, value = value, self.expand(value)
        if within is not None:
            top = N.binop("sub", self.expand(within), N.Const(1, within.dtype))
            self.let_ranges[var.name] = (0, self.highest(self.linear(top)))
            if not isinstance(within, N.Const) and _pure(top):
                self.bounds[var.name] = (N.Const(0, within.dtype), top)
        elif _pure(value):
            self.lets[var.name] = value
            self.written[var.name] = written
        else:
            self.let_ranges[var.name] = self.span(self.linear(value))

    def loop(self, var: N.Var, start: N.Expr, extent: N.Expr) -> None:
        """``var`` runs from ``start`` for ``extent`` iterations (kept when it is not a
        constant range, which ``ranges`` holds, and reads no memory)."""
        if isinstance(start, N.Const) and isinstance(extent, N.Const):
            return
        start, extent = self.expand(start), self.expand(extent)
        if _pure((start, extent)):
            last = N.binop("sub", N.binop("add", start, extent), N.Const(1, extent.dtype))
            self.bounds[var.name] = (start, last)

    def assume(self, cond: N.Expr, holds: bool) -> None:
        """Inside the branch of ``if cond`` where it ``holds`` (or not): its comparisons
        (``and``-ed ones in the then branch; a single one's negation in the else)."""
        terms = [cond]
        if holds and isinstance(cond, N.Logic) and cond.op == "and":
            terms = list(cond.args)
        if not holds and isinstance(cond, N.Not):
            terms, holds = [cond.a], True
        elif holds and isinstance(cond, N.Not):
            terms, holds = [cond.a], False
        for c in terms:
            if not isinstance(c, N.Cmp) or not (N.is_int(c.a.dtype) and N.is_int(c.b.dtype)):
                continue
            op = c.op if holds else _NEGATE[c.op]
            a, b = self.expand(c.a), self.expand(c.b)
            if not _pure((a, b)):
                continue
            la, lb = self.linear(a), self.linear(b)
            if op in ("lt", "le", "eq"):  # b - a (- 1) >= 0
                self.facts.append(_plus(_plus(lb, la, -1), {None: -1 if op == "lt" else 0}))
            if op in ("gt", "ge", "eq"):
                self.facts.append(_plus(_plus(la, lb, -1), {None: -1 if op == "gt" else 0}))

    @contextmanager
    def scope(self):
        """Lets, bounds and facts of a nested body are not known after it."""
        saved = (dict(self.lets), dict(self.written), dict(self.let_ranges), dict(self.bounds),
                 list(self.facts))
        try:
            yield
        finally:
            self.lets, self.written, self.let_ranges, self.bounds, self.facts = saved

    # ---- proofs -----------------------------------------------------------------------------
    def below(self, idx: N.Expr, dim: N.Expr) -> bool:
        """Whether ``idx < dim`` is proved."""
        form = _plus(self.linear(self.expand(dim)), self.linear(self.expand(idx)), -1)
        return self.nonneg(_plus(form, {None: -1}))

    def nonnegative(self, idx: N.Expr) -> bool:
        return self.nonneg(self.linear(self.expand(idx)))

    def expand(self, e: N.Expr) -> N.Expr:
        return substitute(e, self.lets) if self.lets else e

    def linear(self, e: N.Expr) -> dict:
        """``e`` as {atom: coefficient, None: constant}.  An atom is a variable's name, or
        for what is not linear a tuple: ("div" | "mod", form, d) for ``x // d`` and
        ``x % d`` (``d`` a positive constant; ``T.ceildiv(x, d)`` is ``(x + d - 1) // d``),
        ("min" | "max", form, form), ("expr", e) for anything else."""
        if isinstance(e, N.Const) and N.is_int(e.dtype):
            return {None: int(e.value)}
        if isinstance(e, N.Var):
            return {e.name: 1}
        if isinstance(e, N.Call) and e.name == "thread_idx" and isinstance(e.args[0], N.Const):
            return {f"thread_idx{e.args[0].value}": 1}
        if isinstance(e, N.Cast) and N.is_int(e.dtype) and N.is_int(e.value.dtype) and \
                e.dtype in ("int32", "int64"):
            return self.linear(e.value)
        if isinstance(e, N.BinOp) and e.op in ("add", "sub"):
            return _plus(self.linear(e.a), self.linear(e.b), 1 if e.op == "add" else -1)
        if isinstance(e, N.BinOp) and e.op == "mul":
            a, b = self.linear(e.a), self.linear(e.b)
            if set(a) <= {None}:
                a, b = b, a
            if set(b) <= {None}:
                k = b.get(None, 0)
                return {atom: c * k for atom, c in a.items() if c * k or atom is None}
        if isinstance(e, N.Call) and e.name == "ceildiv" and isinstance(e.args[1], N.Const) \
                and e.args[1].value > 0:
            d = int(e.args[1].value)
            return {("div", _frozen(_plus(self.linear(e.args[0]), {None: d - 1})), d): 1}
        if isinstance(e, N.BinOp) and N.is_int(e.dtype) and e.op in ("floordiv", "mod") and \
                isinstance(e.b, N.Const) and e.b.value > 0:
            return {("div" if e.op == "floordiv" else "mod", _frozen(self.linear(e.a)),
                     int(e.b.value)): 1}
        if isinstance(e, N.BinOp) and N.is_int(e.dtype) and e.op in ("min", "max"):
            return {(e.op, _frozen(self.linear(e.a)), _frozen(self.linear(e.b))): 1}
        return {("expr", e): 1}

    def numeric(self, atom) -> tuple:
        """The numeric (lo, hi) of an atom (None: unknown)."""
        if isinstance(atom, str):
            return self.ranges.get(atom) or self.let_ranges.get(atom) or (None, None)
        kind = atom[0]
        if kind in ("div", "mod"):
            f, d = dict(atom[1]), atom[2]
            lo, hi = self.lowest(f), self.highest(f)
            if kind == "div":
                return (None if lo is None else lo // d), (None if hi is None else hi // d)
            if lo is not None and hi is not None and 0 <= lo and hi < d:
                return lo, hi
            return 0, d - 1  # (a floor modulo)
        if kind in ("min", "max"):
            (alo, ahi), (blo, bhi) = (self.span(dict(f)) for f in atom[1:])
            pick = min if kind == "min" else max
            if kind == "min":  # below both lows; above either high
                lo = None if alo is None or blo is None else pick(alo, blo)
                hi = pick([h for h in (ahi, bhi) if h is not None], default=None)
            else:
                lo = pick([x for x in (alo, blo) if x is not None], default=None)
                hi = None if ahi is None or bhi is None else pick(ahi, bhi)
            return lo, hi
        e = atom[1]
        if isinstance(e, N.Load):
            return _LOADED.get(e.dtype, (None, None))
        if isinstance(e, N.Select) and N.is_int(e.dtype):
            (alo, ahi), (blo, bhi) = self.span(self.linear(e.a)), self.span(self.linear(e.b))
            return (None if alo is None or blo is None else min(alo, blo),
                    None if ahi is None or bhi is None else max(ahi, bhi))
        env = {**self.let_ranges, **self.ranges}
        (a, b), (c, d) = value_range(e, env), _range(e, env)
        los, his = [x for x in (a, c) if x is not None], [x for x in (b, d) if x is not None]
        return (max(los) if los else None), (min(his) if his else None)

    def span(self, form: dict) -> tuple:
        return self.lowest(form), self.highest(form)

    def lowest(self, form: dict, sign: int = 1):
        """A numeric lower bound of ``form`` (``sign`` -1: an upper bound), or None."""
        total = form.get(None, 0)
        for atom, c in form.items():
            if atom is None:
                continue
            lo, hi = self.numeric(atom)
            x = lo if c * sign > 0 else hi
            if x is None:
                return None
            total += c * x
        return total

    def highest(self, form: dict):
        return self.lowest(form, -1)

    def nonneg(self, form: dict, depth: int = 0) -> bool:
        """Whether ``form >= 0`` is proved."""
        for f in [None] + self.facts:
            lo = self.lowest(form if f is None else _plus(form, f, -1))
            if lo is not None and lo >= 0:
                return True
        for f in self.facts:  # form - k * fact for a k > 0 that cancels an atom
            # (``if k + 2 < n``: ``(k + 2) * 32 + i < 32 * n`` for i < 32)
            for atom, c in f.items():
                k = form.get(atom, 0) // c if atom is not None and c else 0
                if k > 1 and k * c == form[atom]:
                    lo = self.lowest(_plus(form, f, -k))
                    if lo is not None and lo >= 0:
                        return True
        if depth >= _DEPTH:
            return False
        # variables first (their bounds may cancel a quotient against a dim), then min/max,
        # then quotients
        order = {str: 0, "min": 1, "max": 1, "div": 2}
        steps = sorted((order.get(type(a) if isinstance(a, str) else a[0], 3), n, a)
                       for n, a in enumerate(form) if a is not None)
        for _, _, atom in steps:
            c = form[atom]
            rest = {a: k for a, k in form.items() if a != atom}
            if isinstance(atom, str) and atom in self.bounds:
                # the variable's bound on the side that lowers the form
                bound = self.bounds[atom][0 if c > 0 else 1]
                return self.nonneg(_plus(rest, self.linear(bound), c), depth + 1)
            if isinstance(atom, tuple) and atom[0] in ("min", "max"):
                a, b = (_plus(rest, dict(f), c) for f in atom[1:])
                if (atom[0] == "min") == (c < 0):  # bounded on the needed side by either
                    return self.nonneg(a, depth + 1) or self.nonneg(b, depth + 1)
                return self.nonneg(a, depth + 1) and self.nonneg(b, depth + 1)
            if isinstance(atom, tuple) and atom[0] == "div":
                # d * (x // d) lies in [x - d + 1, x]: the form times d, the term replaced
                f, d = dict(atom[1]), atom[2]
                scaled = {a: k * d for a, k in rest.items()}
                return self.nonneg(_plus(_plus(scaled, f, c), {None: -c * (d - 1) if c > 0 else 0}),
                                   depth + 1)
        return False


def _frozen(form: dict) -> tuple:
    return tuple(sorted(form.items(), key=repr))


_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


class Bounds:
    """``buffers`` and ``ranges`` are the kernel emitter's (filled as it goes); ``known``
    what the emitter tells of loops, lets and branches; ``hoisted`` maps a bounds-checked
    load (or atomic with a result) to the temporary that holds it in the current
    statement."""

    def __init__(self, out: Writer, exprs: ExprPrinter, buffers: dict[str, N.Buffer],
                 ranges: dict[str, tuple]):
        self.out, self.exprs, self.buffers, self.ranges = out, exprs, buffers, ranges
        self.known = Knowledge(ranges)
        self.hoisted: dict = {}
        # global tensor (a view too) -> its T.annotate_safe_value (what an out-of-bounds
        # read gives instead of 0); the kernel emitter sets it
        self.safe: dict[str, N.Expr] = {}
        # bounds checks of which at least one is false where code is being emitted (the
        # per-lane path of a vector nest whose checks do not depend on the lane): a guard
        # holding all of them never passes (:meth:`never`)
        self.failed: frozenset[str] = frozenset()

    def never(self, conds) -> bool:
        """Whether the ``and`` of ``conds`` is known false here: it holds every one of the
        :attr:`failed` checks, of which one at least is false."""
        return bool(self.failed) and self.failed <= set(conds)

    def unchecked(self, t: str, buffer: str, dtype: str, depth: int) -> None:
        """A guarded read that never passes (:meth:`never`): ``t`` is what it gives out
        of bounds."""
        self.out.line(depth, f"{t} = {self.fallback(buffer, dtype)}", "out of bounds")

    def fallback(self, buffer: str, dtype: str) -> str:
        """Source text of what an out-of-bounds read of ``buffer`` gives as ``dtype``: 0,
        or the kernel's T.annotate_safe_value for it converted to ``dtype``, always of
        ``dtype``'s CuTe type (the temporary it starts keeps its type in the ``if``)."""
        v = self.safe.get(buffer)
        if v is None:
            return f"{register_type(dtype)}(0)"
        if not isinstance(v, N.Const):
            return self.exprs.expr(N.Cast(dtype, v) if v.dtype != dtype else v)
        text = const(safe_const(v, dtype))
        return f"{cute_type(dtype)}({text})" if dtype in ("int32", "bool") else text

    def predicate(self, buffer: str, indices, lower: bool = True, upper: bool = True) -> list[str]:
        """Conditions for ``buffer[indices]`` to be in bounds that cannot be proved.  As in
        TileLang, an index with no variable in it is not checked."""
        return [text for _, text in self.checks(buffer, indices, lower, upper)]

    def checks(self, buffer: str, indices, lower: bool = True, upper: bool = True) -> list[tuple]:
        """:meth:`predicate`'s conditions, each with the index it checks."""
        buf = self.buffers.get(buffer)
        if buf is None or buf.scope != "global":
            return []
        expr = self.exprs.expr
        conds = []
        for idx, dim in zip(indices, buf.shape):
            if _constant(idx):
                continue
            if lower and not self.known.nonnegative(idx):
                conds.append((idx, f"{expr(idx)} >= 0"))
            if upper and not self.known.below(idx, dim):
                conds.append((idx, f"{expr(idx)} < {expr(dim)}"))
        return conds

    def within(self, buffer: str, indices) -> bool:
        """Whether every index of a load of a shared or register buffer (``T.alloc_local``, a
        fragment) is proved inside its dim (a constant index is taken as it is)."""
        buf = self.buffers[buffer]
        return all(_constant(idx) or (self.known.nonnegative(idx) and self.known.below(idx, dim))
                   for idx, dim in zip(indices, buf.shape))

    def of_loads(self, loads) -> list[str]:
        conds: list[str] = []
        for ld in loads:
            conds += self.predicate(ld.buffer, ld.indices)
        return list(dict.fromkeys(conds))

    def hoist(self, e, depth: int, registers) -> None:
        """Read each global load of ``e`` whose bounds cannot be proved into a temporary
        that stays 0 out of bounds (out-of-bounds loads read 0, or the tensor's
        T.annotate_safe_value: :meth:`fallback`), and run each atomic with a result
        (``T.atomic_add(..., return_prev=True)``, ``T.atomic_load``) on an element not
        proved in bounds only in bounds (TileLang's ``if_then_else(in_bounds, atomic,
        safe value)``); accesses already in ``registers`` (vector accesses) are checked
        with their vector."""
        for x in _reads(e, self.safe):
            if isinstance(x, N.Call):
                dst = x.args[0]
                self.hoist((dst.indices, x.args[1:]), depth, registers)
                key = x
            elif isinstance(x, N.Cast):  # (a cast of a load of a tensor with a safe value)
                dst = x.value
                self.hoist(dst.indices, depth, registers)
                key = x
            else:
                dst = x
                self.hoist(x.indices, depth, registers)
                key = load_key(x)
            if load_key(dst) in registers or key in self.hoisted:
                continue
            conds = self.predicate(dst.buffer, dst.indices)
            if conds and self.never(conds):  # (its read, or atomic, never runs here)
                t = self.out.fresh("at" if isinstance(x, N.Call) else "ld")
                self.unchecked(t, dst.buffer, x.dtype, depth)
                self.hoisted[key] = t
            elif conds:
                t = self.out.fresh("at" if isinstance(x, N.Call) else "ld")
                self.out.line(depth, f"{t} = {self.fallback(dst.buffer, x.dtype)}")
                self.out.line(depth, f"if {chain('and', conds)}:")
                # (an unsigned element is read as its type: the code generator's load)
                self.out.line(depth + 1, f"{t} = {self.exprs.expr(x)}")
                self.hoisted[key] = t

    def hoist_branches(self, e, depth: int, registers) -> None:
        """Read each shared or global load inside a branch of a ``Select`` (TileLang's
        ``T.if_then_else``) into a temporary, under the branch's condition: TVM's
        ``if_then_else`` evaluates only the branch taken, and programs guard reads that
        would be out of bounds with it (``T.if_then_else(j > 0, s[i, j - 1], 0)``); CuTe's
        ``select_`` evaluates both.  So also a load of a register buffer (``T.alloc_local``,
        a fragment) whose index is not proved inside its dim (``T.if_then_else(v < 16,
        lut[v], 0)`` of a loaded ``v``: the array sits in local memory, and an index far
        outside it faults there).  A shared or register read at an index not proved inside
        its buffer, after the first operand of an ``and`` / ``or`` (``v < 128 and s[v] >
        0``), is read only where the operands before it let C's ``&&`` / ``||`` reach it.  (A load has no effect but its read, so TVM's ``Select``
        may take it alike.)  A load also read outside any branch, or held in ``registers``
        (vector accesses, read whole), is left as it is; a global one also takes the bounds
        checks of :meth:`hoist`, with what its branch's condition proves."""
        guards: dict[tuple, list] = {}  # load -> the guards it is read under (None: none)
        found: dict[tuple, N.Load] = {}

        def visit(x, guard: tuple, terms: tuple = ()) -> None:
            # (terms: the operands of ``and`` / ``or`` before x that C's && / || evaluate
            # first, a guard for a shared or register read at an index not proved inside
            # its buffer; a global read past its bounds is already kept from being read by
            # :meth:`hoist`, and stays as it was)
            if isinstance(x, N.Select) and not isinstance(x.cond, N.Const):
                visit(x.cond, guard, terms)
                visit(x.a, guard + (x.cond,), terms)
                visit(x.b, guard + (N.Not(x.cond),), terms)
            elif isinstance(x, N.Logic):
                before = terms
                for a in x.args:
                    visit(a, guard, before)
                    before = before + ((a,) if x.op == "and" else (N.Not(a),))
            elif isinstance(x, N.Call) and x.name in _ATOMIC_READS:
                visit(x.args[0].indices, guard, terms)  # (the atomic's element: not a plain read)
                visit(x.args[1:], guard, terms)
            elif isinstance(x, N.Load):
                visit(x.indices, guard, terms)
                key = load_key(x)
                scope = self.buffers[x.buffer].scope
                if key in registers or scope not in ("shared", "global") and (
                        scope not in ("local", "fragment") or self.within(x.buffer, x.indices)):
                    return
                g = guard if scope == "global" or self.within(x.buffer, x.indices) else guard + terms
                found.setdefault(key, x)
                guards.setdefault(key, []).append(g or None)
            elif isinstance(x, (N.Expr, tuple)):
                for v in (vars(x).values() if isinstance(x, N.Expr) else x):
                    visit(v, guard, terms)
        visit(e, ())
        expr = self.exprs.expr
        for key, ld in found.items():
            if key in self.hoisted or None in guards[key]:
                continue
            alts = list(dict.fromkeys(guards[key]))
            if len(alts) == 1:  # one branch: its conditions (and theirs) are terms of the chain
                terms = [t for c in alts[0] for t in (
                    flatten_logic(c) if isinstance(c, N.Logic) and c.op == "and" else (c,))]
                conds = [self.exprs.operand(c, PREC["and"] + 1) for c in terms]
                with self.known.scope():  # (what the branch taken knows)
                    for c in alts[0]:
                        self.known.assume(c, True)
                    conds += self.predicate(ld.buffer, ld.indices)
                t = self.out.fresh("ld")
                if self.never(conds):
                    self.unchecked(t, ld.buffer, ld.dtype, depth)
                else:
                    self.out.line(depth, f"{t} = {self.fallback(ld.buffer, ld.dtype)}")
                    self.out.line(depth, f"if {chain('and', conds)}:")
                    value = expr(ld)
                    self.out.line(depth + 1, f"{t} = {value}")
                self.hoisted[key] = t
            else:
                self.hoist_ways(key, ld, alts, depth)

    def hoist_ways(self, key, ld: N.Load, ways: list, depth: int) -> None:
        """A load the program reaches by several ways (each a tuple of conditions): read into a
        temporary by one ``if`` per way, in order.  A later way's conditions may read the
        load itself -- ``v < 64 and ((up and s[v] > 0) or (not up and s[v] < 0))`` reaches its
        second ``s[v]`` past ``not (up and s[v] > 0)`` -- and CuTe evaluates a condition whole,
        so they read the temporary the earlier ways filled: where C's ``&&`` / ``||`` reached
        the load inside such a condition, an earlier way had reached it, and elsewhere its
        value does not decide the condition."""
        value = self.exprs.expr(ld)
        bounds = self.predicate(ld.buffer, ld.indices)
        t = self.out.fresh("ld")
        self.out.line(depth, f"{t} = {self.fallback(ld.buffer, ld.dtype)}")
        for way in ways:
            conds = [self.exprs.operand(c, PREC["and"] + 1) for c in way] + bounds
            if not self.never(conds):
                self.out.line(depth, f"if {chain('and', conds)}:")
                self.out.line(depth + 1, f"{t} = {value}")
            self.hoisted[key] = t  # (the next way's conditions read it)

    @contextmanager
    def statement(self):
        """Temporaries hoisted inside a statement are not visible after it."""
        saved = dict(self.hoisted)
        try:
            yield
        finally:
            self.hoisted = saved
