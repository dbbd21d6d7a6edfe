"""TileLang's ``tilelang.transform.simplify``: ``simplify_prim_func`` (a decorator of a
function that returns a prim_func) and ``apply_simplify(func)``.  TileLang runs TVM's
Simplify there, which rewrites a program's index arithmetic without changing what it
computes; tilecute's frontend and passes fold expressions themselves, so both give the
prim_func back as it is (``kernel.get_source('script')`` shows the folded IR).  TVM's
passes themselves (``Simplify``, ``LetInline``: ``tvm.transform.Pass`` objects over an
IRModule) are refused by name."""

from __future__ import annotations

import functools

from ..ir.nodes import PrimFunc
from ..refusals import refusing_getattr


def _checked(value, what: str):
    if not isinstance(value, PrimFunc):
        raise ValueError(f"tilelang.transform.simplify.{what}: expected a prim_func "
                         f"(T.prim_func), got {type(value).__name__}; tilecute has no IRModule")
    return value


def apply_simplify(stmt, inline_let: bool = False):
    """``stmt`` (a prim_func), as TileLang's simplified form of it computes the same;
    ``inline_let`` (TVM's LetInline first) changes nothing that tilecute keeps."""
    if not isinstance(inline_let, bool):
        raise TypeError(f"tilelang.transform.simplify.apply_simplify: inline_let must be a "
                        f"bool, got {inline_let!r}")
    return _checked(stmt, "apply_simplify")


def simplify_prim_func(func):
    """Decorate a function that returns a prim_func: the call returns that prim_func."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _checked(func(*args, **kwargs), "simplify_prim_func")
    return wrapper


__getattr__ = refusing_getattr(__name__, {n: "it is a TVM pass over an IRModule; tilecute has "
                                             "no TVM (its passes: tilecute.transform.pipeline)"
                                          for n in ("Simplify", "LetInline", "_Simplify")})
