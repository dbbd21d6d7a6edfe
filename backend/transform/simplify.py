"""TileLang's ``tilelang.transform.simplify``: ``simplify_prim_func`` (a decorator of a
function that returns a prim_func) and ``apply_simplify(func)``.  TileLang runs its
Simplify pass there with ``simplify_arguments=True``, which does two things:

- it rewrites the index arithmetic without changing what it computes: tilecute's frontend
  and passes fold expressions themselves, so nothing to do here
  (``kernel.get_source('script')`` shows the folded IR);
- it **drops the tensor parameters the body never touches** (scalars stay), so the
  compiled kernel takes fewer arguments: a ``Bias`` that only a ``with_bias=True`` variant
  reads is not an argument of the other.  tilecute drops them the same way, except a
  ``T.empty`` output, a ``T.alloc_global`` workspace, and a tensor whose shape alone binds
  a symbol the body uses (TileLang cannot compile that function).

TVM's passes themselves (``Simplify``, ``LetInline``: ``tvm.transform.Pass`` objects over
an IRModule) are refused by name."""

from __future__ import annotations

import dataclasses
import functools

from ..ir import nodes as N
from ..ir.nodes import PrimFunc
from ..ir.visitor import var_names, walk_nodes
from ..refusals import refusing_getattr


def _checked(value, what: str):
    if not isinstance(value, PrimFunc):
        raise ValueError(f"tilelang.transform.simplify.{what}: expected a prim_func "
                         f"(T.prim_func), got {type(value).__name__}; tilecute has no IRModule")
    return _without_unused_tensors(value)


def _names_in(x) -> set[str]:
    """Every name (string field) the nodes under ``x`` hold: the buffers they read, write,
    view or alias, by any node kind."""
    out: set[str] = set()
    for node in walk_nodes(x):
        for f in dataclasses.fields(node):
            v = getattr(node, f.name)
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, tuple):
                out.update(y for y in v if isinstance(y, str))
    return out


def _shape_vars(b: N.Buffer) -> set[str]:
    return var_names(b.shape) | var_names(b.strides or ())


def _without_unused_tensors(func: PrimFunc) -> PrimFunc:
    """``func`` without the tensor parameters its body never names (TileLang's
    ``Simplify(simplify_arguments=True)``)."""
    body = (func.kernels, func.assumes)
    named = _names_in(body)
    used_vars = var_names(body)
    n = len(func.params)
    outputs = {n + i if i < 0 else i for i in (func.out_idx or ())}
    keep = [not isinstance(p, N.Buffer) or p.name in named or p.name in func.workspaces
            or k in outputs for k, p in enumerate(func.params)]
    for k, p in enumerate(func.params):
        if keep[k]:
            continue
        bound = set()
        for j, q in enumerate(func.params):
            if keep[j] and j != k:
                bound |= _shape_vars(q) if isinstance(q, N.Buffer) else {q.name}
        # a symbol the body uses that only this tensor's shape binds: keep the tensor
        keep[k] = bool((_shape_vars(p) & used_vars) - bound)
    if all(keep):
        return func
    params = tuple(p for k, p in enumerate(func.params) if keep[k])
    left = set().union(*(_shape_vars(p) for p in params if isinstance(p, N.Buffer))) | used_vars
    new_pos = {k: j for j, k in enumerate(k for k in range(n) if keep[k])}
    out_idx = None if func.out_idx is None else tuple(
        new_pos[n + i if i < 0 else i] - len(params) for i in func.out_idx)
    names = {p.name for p in params}
    return dataclasses.replace(
        func, params=params, out_idx=out_idx,
        symbols=tuple(s for s in func.symbols if s.name in left),
        wide_tensors=tuple(t for t in func.wide_tensors if t in names))


def apply_simplify(stmt, inline_let: bool = False):
    """``stmt`` (a prim_func) without the tensor parameters its body never touches, as
    TileLang's Simplify leaves it; ``inline_let`` (TVM's LetInline first) changes nothing
    that tilecute keeps."""
    if not isinstance(inline_let, bool):
        raise TypeError(f"tilelang.transform.simplify.apply_simplify: inline_let must be a "
                        f"bool, got {inline_let!r}")
    return _checked(stmt, "apply_simplify")


def simplify_prim_func(func):
    """Decorate a function that returns a prim_func: the call returns that prim_func
    as :func:`apply_simplify` leaves it."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _checked(func(*args, **kwargs), "simplify_prim_func")
    return wrapper


__getattr__ = refusing_getattr(__name__, {n: "it is a TVM pass over an IRModule; tilecute has "
                                             "no TVM (its passes: tilecute.transform.pipeline)"
                                          for n in ("Simplify", "LetInline", "_Simplify")})
