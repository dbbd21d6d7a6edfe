"""A ``T.vectorized`` loop around one raw ``T.ptx_cp_async`` whose copy is narrower than
cp.async's 4 bytes (``for i in T.vectorized(4): T.ptx_cp_async(T.access_ptr(S[i], "w", 1),
T.access_ptr(A[i], "r", 1), 1)`` of float16): TileLang counts ``num_elems`` in elements and
its vectorizer widens the call over the loop's lanes, so that it lands on a legal width
(4, 8 or 16 bytes).  :func:`fold` does the same at parse time: the lanes' contiguous
elements become one cp.async a step of as many lanes as make 16 bytes (fewer where the
loop has fewer), the loop runs the steps.  A narrow cp.async that does not fold so is
refused by name (:func:`narrow_error`), as tilecute refuses it outside such a loop."""

from __future__ import annotations

from typing import Optional

from ..ir import nodes as N
from ..ir.visitor import fold_constants, linear_form, substitute, var_names, walk_stmts
from ..runtime.dtypes import DTYPES

CP_ASYNC_BYTES = (4, 8, 16)


def copy_bytes(call: N.Call, dtype: str) -> int:
    return int(call.args[2].value) * DTYPES[dtype].bytes


def narrow(body, dtypes: dict) -> list[N.Evaluate]:
    """The raw cp.async statements of ``body`` (nested ones too) whose copy is not 4, 8 or 16
    bytes (``dtypes``: buffer name -> dtype)."""
    return [s for s in walk_stmts(body) if isinstance(s, N.Evaluate) and
            isinstance(s.value, N.Call) and s.value.name == "ptx_cp_async" and
            copy_bytes(s.value, dtypes[s.value.args[0].buffer]) not in CP_ASYNC_BYTES]


def narrow_error(s: N.Evaluate, dtype: str) -> str:
    n = int(s.value.args[2].value)
    return (f"T.ptx_cp_async: {n} {dtype} elements are {copy_bytes(s.value, dtype)} bytes; "
            "cp.async copies 4, 8 or 16 (a T.vectorized loop whose body is this one call, "
            "at elements contiguous over the loop, widens it to that)")


def _step(idx: N.Expr, var: N.Var) -> Optional[int]:
    """How far ``idx`` moves when ``var`` grows by one, where it is linear in ``var``."""
    def atom(x):
        if isinstance(x, (N.Const, N.Var)) or var.name in var_names(x):
            return None
        return ("opaque", x)
    form = linear_form(idx, atom)
    return None if form is None else form.get(var.name, 0)


def fold(var: N.Var, start: N.Expr, extent: N.Expr, body: tuple, dtype: str
         ) -> Optional[tuple[N.Expr, N.Stmt]]:
    """``for var in T.vectorized(start, start + extent): body`` with ``body`` one narrow
    cp.async of ``dtype`` elements whose last indices advance by its ``num_elems`` with
    ``var`` (its other indices free of ``var``): the steps' extent and the one cp.async a
    step copies (``var`` then counts steps: lane ``start + var * lanes``).  None when it
    does not fold: a run-time extent, a body of more, elements apart, a width that no
    number of whole lanes dividing the extent makes 4, 8 or 16 bytes."""
    if len(body) != 1 or not isinstance(extent, N.Const):
        return None
    (s,) = body
    if not (isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and
            s.value.name == "ptx_cp_async"):
        return None
    dst, src, n = s.value.args
    n = int(n.value)
    for ld in (dst, src):
        if var.name in var_names(ld.indices[:-1]) or _step(ld.indices[-1], var) != n:
            return None
    size = DTYPES[dtype].bytes
    total = int(extent.value)
    lanes = next((k for k in range(total, 0, -1)
                  if total % k == 0 and k * n * size in CP_ASYNC_BYTES and k * n * size <= 16), None)
    if lanes is None or lanes == 1:
        return None
    lane = N.binop("add", start, N.binop("mul", var, N.Const(lanes, var.dtype)))
    dst, src = fold_constants(substitute((dst, src), {var.name: lane}))
    call = N.Call("ptx_cp_async", (dst, src, N.Const(n * lanes, "int32")), "int32")
    return N.Const(total // lanes, extent.dtype), N.Evaluate(call, loc=s.loc)
