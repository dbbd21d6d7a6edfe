"""Choose a vector width for each ``T.Parallel`` nest whose global accesses allow
128-bit loads and stores.

A nest is vectorized by ``V`` elements when its innermost loop ``j`` has an extent that
``V`` divides, its body is straight-line stores and lets, and every global access is
contiguous in ``j``: the last index is ``j + c`` with ``c`` a known multiple of ``V``, the
other indices do not mention ``j``, and every other stride is a known multiple of ``V``.
``V`` is 16 bytes of the narrowest-aligned dtype touched.  The tensors accessed that way
are returned so the launcher checks their data pointers are aligned.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..runtime.dtypes import DTYPES
from .analysis import affine_in, known_multiple, loads as _loads, mentions, row_major_strides

VECTOR_BYTES = 16


class VectorizeError(ValueError):
    pass


def _accesses(body):
    """(buffer, indices) of every load and store in a straight-line body, or None."""
    out = []
    for s in body:
        if isinstance(s, N.Store):
            out.append((s.buffer, s.indices))
            out.extend((ld.buffer, ld.indices) for ld in _loads(s.value))
            if any(True for _ in _loads(s.indices)):
                return None
        elif isinstance(s, N.Let):
            out.extend((ld.buffer, ld.indices) for ld in _loads(s.value))
        else:
            return None
    return out


# expressions with a TensorSSA form that keeps every lane's dtype (CuTe DSL's min/max,
# select and fma on TensorSSA need tensor operands on both sides; they stay scalar)
_VECTOR_CALLS = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos"}


def _has_vector_form(e) -> bool:
    if isinstance(e, (N.Var, N.Const, N.Load)):
        return True
    if isinstance(e, N.BinOp):
        return e.op in ("add", "sub", "mul", "div") and _has_vector_form(e.a) and _has_vector_form(e.b)
    if isinstance(e, N.Cast):
        return _has_vector_form(e.value)
    if isinstance(e, N.Call):
        return e.name in _VECTOR_CALLS and all(_has_vector_form(a) for a in e.args)
    return False


def _uses_outside_index(e, j: str) -> bool:
    """Does ``j`` appear other than inside a load's indices?"""
    if isinstance(e, N.Load):
        return False
    if isinstance(e, N.Var):
        return e.name == j
    if isinstance(e, N.Call) and e.name == "thread_idx":
        return True  # per-thread values have no vector form
    if isinstance(e, N.Expr):
        return any(_uses_outside_index(v, j) for v in vars(e).values())
    if isinstance(e, tuple):
        return any(_uses_outside_index(v, j) for v in e)
    return False


def legal_width(inner: N.For, buffers: dict[str, N.Buffer]) -> tuple[int, dict[str, int]]:
    """The widest legal vector width for the innermost parallel loop ``inner`` (1 if
    none), and the byte alignment each accessed tensor then needs."""
    j = inner.var.name
    if not isinstance(inner.extent, N.Const) or not (isinstance(inner.start, N.Const)
                                                     and inner.start.value == 0):
        return 1, {}
    accesses = _accesses(inner.body)
    if not accesses:
        return 1, {}
    for s in inner.body:
        if _uses_outside_index(s.value, j) or not _has_vector_form(s.value):
            return 1, {}
    width = VECTOR_BYTES
    multiple = 0
    for name, indices in accesses:
        buf = buffers.get(name)
        if buf is None or buf.scope != "global":
            return 1, {}
        if any(mentions(i, j) for i in indices[:-1]):
            return 1, {}
        c = affine_in(indices[-1], j)
        if c is None:
            return 1, {}
        strides = row_major_strides(buf)
        if not (isinstance(strides[-1], N.Const) and strides[-1].value == 1):
            return 1, {}
        width = min(width, VECTOR_BYTES // DTYPES[buf.dtype].bytes)
        multiple = math.gcd(multiple, known_multiple(c))
        for idx, stride in zip(indices[:-1], strides[:-1]):
            multiple = math.gcd(multiple, known_multiple(stride))
    extent = int(inner.extent.value)
    while width > 1 and (extent % width or (multiple and multiple % width)):
        width //= 2
    if width < 2:
        return 1, {}
    align = {}
    for name, _ in accesses:
        need = width * DTYPES[buffers[name].dtype].bytes
        align[name] = max(align.get(name, 1), need)
    return width, align


def plan_vectorization(func: N.PrimFunc) -> tuple[N.PrimFunc, dict[str, int]]:
    buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    aligned: dict[str, int] = {}

    def visit(body):
        out = []
        for s in body:
            if isinstance(s, N.Allocate):
                buffers[s.buffer.name] = s.buffer
            if isinstance(s, N.For) and s.kind == "parallel":
                out.append(visit_parallel(s))
            elif isinstance(s, N.For):
                out.append(dataclasses.replace(s, body=visit(s.body)))
            elif isinstance(s, N.If):
                out.append(dataclasses.replace(s, then=visit(s.then), orelse=visit(s.orelse)))
            else:
                out.append(s)
        return tuple(out)

    def visit_parallel(loop: N.For) -> N.For:
        if len(loop.body) == 1 and isinstance(loop.body[0], N.For) and loop.body[0].kind == "parallel":
            return dataclasses.replace(loop, vector_width=1, body=(visit_parallel(loop.body[0]),))
        width, align = legal_width(loop, buffers)
        if loop.vector_width:  # the program asked for a width (1 turns vectorization off)
            if width % loop.vector_width and loop.vector_width > 1:
                raise VectorizeError(
                    f"{str(loop.loc) + ': ' if loop.loc else ''}prim_func '{func.name}': T.Parallel(..., "
                    f"vector_width={loop.vector_width}) is not legal here (the widest legal "
                    f"width is {width})")
            width = loop.vector_width
            align = {k: width * DTYPES[buffers[k].dtype].bytes for k in align}
        if width > 1:
            for k, v in align.items():
                aligned[k] = max(aligned.get(k, 1), v)
        return dataclasses.replace(loop, vector_width=width, body=visit(loop.body))

    kernels = tuple(dataclasses.replace(k, body=visit(k.body)) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels), aligned
