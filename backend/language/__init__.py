"""The ``T.*`` frontend: TileLang's surface over tilecute's IR.

    import tilecute.language as T

    @T.prim_func
    def add(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16"), C: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

``@T.prim_func`` parses the function's AST (native ``if``/``for``/``with``; closure
values evaluated at parse time) into a ``tilecute.ir.PrimFunc``.  The functions below
that take expressions build IR nodes; the statement-level ones (``T.copy``, ``T.gemm``,
``T.alloc_*``, loop ranges, ``T.Kernel``) are recognised by the parser and raise when
called outside a ``@T.prim_func`` body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..ir import nodes as _N
from ..runtime.dtypes import DTYPES, canonical_dtype


class DType(str):
    """A dtype name usable as annotation (``n: T.int32``) and as a constant maker
    (``T.float32(0)``)."""

    def __call__(self, value) -> _N.Expr:
        if isinstance(value, _N.Expr):
            return _N.cast(value, str(self))
        return _N.const(value, str(self))


float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
float8_e4m3 = DType("float8_e4m3")
float8_e5m2 = DType("float8_e5m2")
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
boolean = DType("bool")
half, float, double = float16, float32, float64  # noqa: A001 (TileLang spellings)
bool = boolean  # noqa: A001
float8_e4m3fn = float8_e4m3


def dtype_name(d) -> str:
    """Canonical dtype name of a ``T.*`` dtype, a string, or a torch dtype."""
    text = str(d)
    if text.startswith("torch."):
        text = text[len("torch."):]
    return canonical_dtype(text)


# ---- parameter annotations ---------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: str
    strides: Optional[tuple] = None


def Tensor(shape, dtype="float32") -> TensorSpec:  # noqa: N802
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return TensorSpec(shape, dtype_name(dtype))


def StridedTensor(shape, strides, dtype="float32") -> TensorSpec:  # noqa: N802
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
    return TensorSpec(shape, dtype_name(dtype), strides)


Buffer = Tensor


def symbolic(name: str, dtype: str = "int32", multiple_of: int = 1) -> _N.Var:
    """A symbolic extent, bound at launch from the tensors that use it.  ``multiple_of``
    promises a divisor (checked at launch: a ValueError names the argument), which lets
    rows strided by the symbol be read with 16-byte vector instructions."""
    if not isinstance(multiple_of, int) or multiple_of < 1:
        raise ValueError(f"T.symbolic('{name}'): multiple_of must be a positive int, got {multiple_of!r}")
    return _N.Var(name, dtype_name(dtype), multiple_of)


dynamic = symbolic
dyn = symbolic


# ---- expression helpers (work on IR expressions and Python numbers) -----------------------
def ceildiv(a, b):
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        return -(-a // b)
    return _N.ceildiv(a, b)


def _unary(name):
    def f(x):
        x = _N.as_expr(x)
        if name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos",
                    "floor", "ceil") and not _N.is_float(x.dtype):
            x = _N.cast(x, "float32")
        return _N.Call(name, (x,), x.dtype)

    f.__name__ = name
    f.__doc__ = f"``{name}(x)`` elementwise."
    return f


exp, exp2, log, log2 = _unary("exp"), _unary("exp2"), _unary("log"), _unary("log2")
sqrt, rsqrt, tanh = _unary("sqrt"), _unary("rsqrt"), _unary("tanh")
sin, cos, floor, ceil = _unary("sin"), _unary("cos"), _unary("floor"), _unary("ceil")


def abs(x):  # noqa: A001
    x = _N.as_expr(x)
    return _N.Call("abs", (x,), x.dtype)


def max(a, b):  # noqa: A001
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        return a if a >= b else b
    return _N.binop("max", a, b)


def min(a, b):  # noqa: A001
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        return a if a <= b else b
    return _N.binop("min", a, b)


def fma(a, b, c):
    a, b, t = _N._coerce(a, b)
    a, c, t = _N._coerce(a, c)
    return _N.Call("fma", (_N.cast(a, t), _N.cast(b, t), _N.cast(c, t)), t)


def Cast(dtype, value):  # noqa: N802
    return _N.cast(_N.as_expr(value), dtype_name(dtype))


cast = Cast


def if_then_else(cond, a, b):
    a, b, t = _N._coerce(a, b)
    return _N.Select(_N.as_expr(cond), a, b, t)


def get_thread_binding(dim: int = 0):
    return _N.Call("thread_idx", (_N.Const(int(dim), "int32"),), "int32")


def floordiv(a, b):
    return _N.binop("floordiv", a, b)


def floormod(a, b):
    return _N.binop("mod", a, b)


def Layout(kind: str, threads: int = 0, vector: int = 0, swizzle: int = 0, mma: str = "",  # noqa: N802
           warps: tuple = (), operand: str = "") -> _N.Layout:
    """A buffer layout, as the layout pass prints it (``T.alloc_fragment(..., layout=...)``);
    see ``tilecute.ir.nodes.Layout``."""
    if kind not in _N.LAYOUT_KINDS:
        raise ValueError(f"T.Layout: kind must be one of {_N.LAYOUT_KINDS}, got {kind!r}")
    return _N.Layout(kind, threads, vector, swizzle, mma, tuple(warps), operand)


# ---- statements: recognised by the parser inside a @T.prim_func body --------------------
class _ParserOnly:
    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"T.{self.__name__} can only be used inside a @T.prim_func body "
            "(the frontend parses it; it is not a Python function)"
        )

    def __repr__(self) -> str:
        return f"<T.{self.__name__}>"


_STATEMENT_FORMS = (
    "Kernel", "Parallel", "serial", "unroll", "Pipelined", "alloc_shared",
    "alloc_fragment", "alloc_local", "copy", "fill", "clear", "gemm", "reduce_sum",
    "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "atomic_add", "evaluate",
    "sync_threads", "alloc_barrier", "tma_copy", "mbarrier_arrive", "mbarrier_wait_parity",
    "use_swizzle", "set_max_nreg",
)
for _name in _STATEMENT_FORMS:
    globals()[_name] = _ParserOnly(_name)
del _name

from .parser import prim_func, from_script, FrontendError  # noqa: E402,F401

__all__ = [
    "prim_func", "from_script", "FrontendError", "Tensor", "StridedTensor", "Buffer",
    "symbolic", "dynamic", "ceildiv", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
    "tanh", "sin", "cos", "abs", "max", "min", "fma", "floor", "ceil", "Cast",
    "if_then_else", "get_thread_binding", "Layout", *_STATEMENT_FORMS, *sorted(DTYPES),
]
