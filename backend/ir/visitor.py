"""Walking and rebuilding the IR: the one visitor module every pass and the code
generator use, so that a pass shows only its rule.

- :func:`walk_stmts` yields every statement of a body, nested ones included;
- :func:`walk_nodes` yields every node (statements, expressions, regions) under a value;
- :class:`StmtMutator` rebuilds a function, calling ``visit_<node>`` (``visit_for``,
  ``visit_copy``...) where a subclass defines one; every other statement is rebuilt
  with its bodies visited.  A visit may return a statement, a sequence of statements
  (spliced in place) or ``None`` (dropped);
- :func:`substitute` replaces variables by expressions anywhere in a value;
  :func:`replace_exprs` replaces whole expressions; both are :func:`rebuild` with a rule.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterator, Optional

from . import nodes as N

# statement fields that hold statement lists
BODY_FIELDS = {N.For: ("body",), N.If: ("then", "orelse"), N.While: ("body",),
               N.KernelScope: ("body",), N.WarpGroups: ("body",), N.SafeValueScope: ("body",)}


def walk_stmts(body) -> Iterator[N.Stmt]:
    """Every statement of ``body``, nested ones (loop and if bodies) included, in program
    order."""
    for s in body:
        yield s
        for name in BODY_FIELDS.get(type(s), ()):
            yield from walk_stmts(getattr(s, name))


def replace_stmt(body: tuple, old: N.Stmt, new) -> tuple:
    """``body`` with statement ``old`` (found by identity, at any depth) replaced by the
    statements ``new``.  Statements that do not hold ``old`` stay the same objects (and
    ``body`` itself where nothing changed), so later edits still find them by identity."""
    out, changed = [], False
    for s in body:
        if s is old:
            out += list(new)
            changed = True
            continue
        kids = {}
        for name in BODY_FIELDS.get(type(s), ()):
            before = getattr(s, name)
            after = replace_stmt(before, old, new)
            if after is not before:
                kids[name] = after
        if kids:
            s = dataclasses.replace(s, **kids)
            changed = True
        out.append(s)
    return tuple(out) if changed else body


def walk_nodes(x) -> Iterator:
    """Every IR node (dataclass instance) in ``x`` (a node, or nested tuples of them),
    parents before children; source locations excluded."""
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from walk_nodes(y)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, N.Loc):
        yield x
        for f in dataclasses.fields(x):
            if f.name != "loc":
                yield from walk_nodes(getattr(x, f.name))


def var_names(x) -> set[str]:
    """Every variable name mentioned in ``x``."""
    return {n.name for n in walk_nodes(x) if isinstance(n, N.Var)}


def rebuild(x, leaf):
    """``x`` (a node or nested tuples of them) rebuilt bottom-up, except where ``leaf(node)``
    returns a replacement (not None): that replaces the node and its subtree."""
    y = leaf(x)
    if y is not None:
        return y
    if isinstance(x, tuple):
        return tuple(rebuild(v, leaf) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, N.Loc):
        changes = {f.name: rebuild(getattr(x, f.name), leaf)
                   for f in dataclasses.fields(x) if f.name != "loc"}
        return dataclasses.replace(x, **changes)
    return x


def substitute(x, mapping: dict[str, N.Expr]):
    """``x`` (a node or nested tuples of them) with each variable named in ``mapping``
    replaced by its expression."""
    return rebuild(x, lambda n: mapping.get(n.name, n) if isinstance(n, N.Var) else None)


def replace_exprs(x, mapping: dict):
    """``x`` (a node or nested tuples of them) with each expression that equals a key of
    ``mapping`` replaced by its value (outermost match first)."""
    return rebuild(x, lambda n: mapping.get(n) if isinstance(n, N.Expr) else None)


def fold_constants(x):
    """``x`` (a node or nested tuples of them) with integer arithmetic on constants folded
    and ``e + 0``, ``e - 0``, ``e * 1`` simplified (what substituting a constant for a
    loop variable leaves: ``(0 + 1) * 128`` becomes ``128``)."""
    if isinstance(x, tuple):
        return tuple(fold_constants(y) for y in x)
    if not dataclasses.is_dataclass(x) or isinstance(x, type) or isinstance(x, N.Loc):
        return x
    changes = {f.name: fold_constants(getattr(x, f.name))
               for f in dataclasses.fields(x) if f.name != "loc"}
    x = dataclasses.replace(x, **changes)
    if isinstance(x, N.BinOp) and N.is_int(x.dtype):
        a, b = x.a, x.b
        zero_b = isinstance(b, N.Const) and b.value == 0
        if isinstance(a, N.Const) and isinstance(b, N.Const):
            bitwise = {"bitand": int.__and__, "bitor": int.__or__, "bitxor": int.__xor__}
            if x.op in bitwise:
                return N.Const(bitwise[x.op](int(a.value), int(b.value)), x.dtype)
            return N.binop(x.op, a, b)
        if x.op in ("add", "sub") and zero_b and a.dtype == x.dtype:
            return a
        if x.op == "add" and isinstance(a, N.Const) and a.value == 0 and b.dtype == x.dtype:
            return b
        if x.op == "mul" and isinstance(b, N.Const) and b.value == 1 and a.dtype == x.dtype:
            return a
    return x


Range = tuple[Optional[int], Optional[int]]  # inclusive bounds, None = unknown


def value_range(e: N.Expr, env: dict[str, Range]) -> Range:
    """Inclusive [lo, hi] of an integer expression given ranges of variables."""
    if isinstance(e, N.Const):
        v = int(e.value)
        return v, v
    if isinstance(e, N.Var):
        return env.get(e.name, (None, None))
    if isinstance(e, N.Cast) and N.is_int(e.dtype):
        return value_range(e.value, env)
    if isinstance(e, N.Call) and e.name == "thread_idx":
        return env.get(f"thread_idx{e.args[0].value}", (0, None))
    if isinstance(e, N.BinOp):
        (al, ah), (bl, bh) = value_range(e.a, env), value_range(e.b, env)
        if e.op == "add":
            return _opt(al, bl, lambda x, y: x + y), _opt(ah, bh, lambda x, y: x + y)
        if e.op == "sub":
            return _opt(al, bh, lambda x, y: x - y), _opt(ah, bl, lambda x, y: x - y)
        if e.op == "mul" and al is not None and bl is not None and al >= 0 and bl >= 0:
            return al * bl, _opt(ah, bh, lambda x, y: x * y)
        if e.op == "floordiv" and al is not None and al >= 0 and bl is not None and bl > 0:
            return (al // bh if bh is not None else 0), (ah // bl if ah is not None else None)
        if e.op == "mod" and al is not None and al >= 0 and bl is not None and bl > 0:
            return 0, (bh - 1 if bh is not None else None)
        if e.op == "min":
            his = [h for h in (ah, bh) if h is not None]
            return _opt(al, bl, min), (min(his) if his else None)
        if e.op == "max":
            los = [lo for lo in (al, bl) if lo is not None]
            return (max(los) if los else None), _opt(ah, bh, max)
    return None, None


def decided(cond: N.Expr, env: dict[str, Range]) -> Optional[bool]:
    """The value of an integer comparison that the ranges of its variables decide (for every
    value in them), or None.  ``k * 128 + j >= 4096`` with k in [0, 31] and j in [0, 127]
    is False.  A constant condition is its own value."""
    if isinstance(cond, N.Const):
        return bool(cond.value)
    if not (isinstance(cond, N.Cmp) and N.is_int(cond.a.dtype) and N.is_int(cond.b.dtype)):
        return None
    lo, hi = value_range(N.BinOp("sub", cond.a, cond.b, "int64"), env)
    tests = {"lt": (hi is not None and hi < 0, lo is not None and lo >= 0),
             "le": (hi is not None and hi <= 0, lo is not None and lo > 0),
             "gt": (lo is not None and lo > 0, hi is not None and hi <= 0),
             "ge": (lo is not None and lo >= 0, hi is not None and hi < 0),
             "eq": (lo == hi == 0, (lo is not None and lo > 0) or (hi is not None and hi < 0))}
    tests["ne"] = tests["eq"][::-1]
    true, false = tests[cond.op]
    return True if true else False if false else None


def _opt(x, y, f):
    return None if x is None or y is None else f(x, y)


def linear_form(e: N.Expr, atom=None) -> Optional[dict]:
    """``e`` as an integer linear combination of variables: {var name: coefficient, None:
    constant term}; None when it is not one (a product of variables, a division ...).
    ``atom(x)``, when given, names a sub-expression taken as one opaque term (a key), or
    returns None to read ``x`` as usual."""
    key = atom(e) if atom is not None else None
    if key is not None:
        return {key: 1}
    if isinstance(e, N.Const) and N.is_int(e.dtype):
        return {None: int(e.value)}
    if isinstance(e, N.Var):
        return {e.name: 1}
    if isinstance(e, N.Cast) and N.is_int(e.dtype):
        return linear_form(e.value, atom)
    if isinstance(e, N.BinOp) and e.op in ("add", "sub", "mul"):
        a, b = linear_form(e.a, atom), linear_form(e.b, atom)
        if a is None or b is None:
            return None
        if e.op == "mul":
            if set(a) <= {None}:
                a, b = b, a
            if not set(b) <= {None}:
                return None
            k = b.get(None, 0)
            return {v: c * k for v, c in a.items()}
        sign = 1 if e.op == "add" else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return out
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class StmtMutator:
    """Rebuild statements.  Subclasses define ``visit_<snake_case node name>(s)`` for the
    nodes their rule concerns and call :meth:`generic` (or ``super()``) to recurse."""

    def run(self, func: N.PrimFunc) -> N.PrimFunc:
        kernels = tuple(self.visit_kernel(k) for k in func.kernels)
        return dataclasses.replace(func, kernels=kernels)

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        return dataclasses.replace(scope, body=self.visit_block(scope.body))

    def visit_block(self, body) -> tuple:
        out: list[N.Stmt] = []
        for s in body:
            r = self.visit(s)
            if r is None:
                continue
            if isinstance(r, (list, tuple)):
                out.extend(r)
            else:
                out.append(r)
        return tuple(out)

    def visit(self, s: N.Stmt):
        method = getattr(self, "visit_" + _snake(type(s).__name__), None)
        return method(s) if method is not None else self.generic(s)

    def generic(self, s: N.Stmt) -> N.Stmt:
        """``s`` with its statement lists visited (the node itself kept)."""
        names = BODY_FIELDS.get(type(s))
        if not names:
            return s
        return dataclasses.replace(s, **{n: self.visit_block(getattr(s, n)) for n in names})
