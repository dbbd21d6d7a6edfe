"""The ``T.*`` expression helpers: math, casts, selects and dtype constants.

Each is an ordinary function over IR expressions and Python numbers (on two Python
numbers the arithmetic ones compute the number).  The parser calls them with a
call's arguments bound to the signature below, which is TileLang's (TVM's ``tir`` ops
for the math), so ``T.exp2(x)``, ``T.if_then_else(c, a, b)``, ``T.cast(x, "float16")``
mean what they mean there.  Every helper builds only existing IR nodes.

Imports the IR nodes and the values module; nothing imports back.
"""

from __future__ import annotations

import builtins
import inspect
import math

from ..ir import nodes as _N
from ..runtime.dtypes import DTYPES
from . import bits as _bits
from . import lanes as _lanes
from .values import dtype_name



def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def ceildiv(lhs, rhs):
    """``(lhs + rhs - 1) // rhs`` (TileLang's parameter names).  Two Python ints fold; TVM types its literals int32, or
    int64 past int32, so ``T.ceildiv(2**32, 512)`` is an int64 constant (a grid over it
    binds an int64 block index, as TileLang's does)."""
    a, b = lhs, rhs
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        q = -(-a // b)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)) and \
                not all(-2 ** 31 <= x < 2 ** 31 for x in (a, b)):
            return _N.Const(q, "int64")
        return q
    return _N.ceildiv(a, b)


cdiv = ceildiv


def align_up(x, y):
    """TileLang's ``T.align_up(x, y)``: ``x`` rounded up to a multiple of ``y``,
    ``ceildiv(x, y) * y`` (Python ints fold)."""
    q = ceildiv(x, y)
    if not isinstance(q, _N.Expr) and not isinstance(y, _N.Expr):
        return q * y
    return _N.as_expr(q) * _N.as_expr(y)


def _unary(name):
    def f(x):
        x = _N.as_expr(x)
        if not _N.is_float(x.dtype):
            x = _N.cast(x, "float32")
        return _N.Call(name, (x,), x.dtype)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"``T.{name}(x)`` elementwise (an integer ``x`` is converted to float32)."
    return f


exp, exp2, log, log2 = _unary("exp"), _unary("exp2"), _unary("log"), _unary("log2")
sqrt, rsqrt, tanh = _unary("sqrt"), _unary("rsqrt"), _unary("tanh")
sin, cos, floor, ceil = _unary("sin"), _unary("cos"), _unary("floor"), _unary("ceil")


# TVM's tir math as TileLang exports it (``T.tan`` ... ``T.exp10``): the argument's float
# dtype (an integer argument is converted to float32, as for ``T.exp``)
tan, atan, acos, asin = _unary("tan"), _unary("atan"), _unary("acos"), _unary("asin")
sinh, cosh, erf = _unary("sinh"), _unary("cosh"), _unary("erf")
log10, log1p, exp10 = _unary("log10"), _unary("log1p"), _unary("exp10")


def _float_pair(name: str, a, b) -> tuple:
    """``a`` and ``b`` in one float dtype (TVM's ``BinaryOpMatchTypes``); two integers are
    refused, as TVM refuses them ("power only applies to float")."""
    a, b, t = _N._coerce(a, b)
    if not _N.is_float(t):
        raise TypeError(f"T.{name} takes floats, got {a.dtype} and {b.dtype}")
    return a, b, t


def pow(x, y):  # noqa: A001 (TileLang's name)
    """``x ** y`` on floats (``powf``).  An integer exponent (a Python int or an integer
    constant) is TileLang's: 0 is ``1`` of ``x``'s dtype, ``n >= 1`` is ``tl::pow_of_int<n>``,
    ``x`` multiplied ``n - 1`` times in ``x``'s own dtype (a float16 ``x`` rounds at each
    product; an integer ``x`` is allowed), and a negative one ``powf``."""
    n = y.value if isinstance(y, _N.Const) and _N.is_int(y.dtype) else y
    if isinstance(x, _N.Expr) and isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        if n == 0:
            return _N.const(1, x.dtype)
        result = x
        for _ in range(n - 1):
            result = _N.BinOp("mul", result, x, x.dtype)
        return result
    x, y, t = _float_pair("pow", x, y)
    return _N.Call("pow", (x, y), t)


def fmod(x, y):
    """C's ``fmod``: the remainder of ``x / y`` truncated, with the sign of ``x``."""
    x, y, t = _float_pair("fmod", x, y)
    return _N.Call("fmod", (x, y), t)


def atan2(x1, x2):
    """``atan(x1 / x2)`` in the quadrant of ``(x2, x1)``, C's ``atan2f(x1, x2)``."""
    x1, x2, t = _float_pair("atan2", x1, x2)
    return _N.Call("atan2", (x1, x2), t)


_ROUNDING = {"ties-to-even": "round", "ties-away-from-zero": "round_ties_away_from_zero"}


def round(x, rounding_mode="ties-to-even"):  # noqa: A001 (TileLang's name)
    """The nearest integral value, halfway cases to even (TVM's ``round``) or, with
    ``rounding_mode="ties-away-from-zero"``, away from zero (C's ``roundf``).  An integer
    is returned as it is, as in TVM."""
    if rounding_mode is None:
        rounding_mode = "ties-to-even"
    if rounding_mode not in _ROUNDING:
        raise ValueError(f"T.round: rounding_mode={rounding_mode!r}; expected 'ties-to-even' "
                         "or 'ties-away-from-zero'")
    x = _N.as_expr(x)
    if not _N.is_float(x.dtype):
        return x
    return _N.Call(_ROUNDING[rounding_mode], (x,), x.dtype)


def trunc(x):
    """The integral part of ``x`` (rounded toward zero); an integer as it is, as in TVM."""
    x = _N.as_expr(x)
    return _N.Call("trunc", (x,), x.dtype) if _N.is_float(x.dtype) else x


def _predicate(name: str, on_int: bool, fold):
    def f(x):
        x = _N.as_expr(x)
        if not _N.is_float(x.dtype):  # TVM: an integer is never NaN nor infinite
            return _N.Const(on_int, "bool")
        if isinstance(x, _N.Const):
            return _N.Const(bool(fold(float(x.value))), "bool")
        return _N.Call(name, (x,), "bool")

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``T.{name}(x)``: a ``bool`` (an integer ``x`` gives ``{on_int}``)."
    return f


isnan = _predicate("isnan", False, math.isnan)
isinf = _predicate("isinf", False, math.isinf)
isfinite = _predicate("isfinite", True, math.isfinite)


# ---- TVM's libm forms (T.copysign, T.hypot, T.ldexp, T.nextafter, T.nearbyint, T.asinh ...) --
asinh, acosh, atanh = _unary("asinh"), _unary("acosh"), _unary("atanh")


def _first_float(name: str, x1, x2):
    """TVM's ``call_intrin(x1.dtype, ...)``: the result has ``x1``'s dtype, a float (a Python
    float is a float32, as ``tir.convert`` makes it); ``x2`` is converted to it, as C
    converts the second argument of ``copysignf`` ..."""
    x1 = _N.as_expr(x1, "float32") if _is_number(x1) else _N.as_expr(x1)
    if not _N.is_float(x1.dtype):
        raise TypeError(f"T.{name} takes a float first argument (its result's dtype), got "
                        f"{x1.dtype}; CUDA has no integer {name}")
    x2 = _N.const(x2, x1.dtype) if _is_number(x2) else _N.cast(_N.as_expr(x2), x1.dtype)
    return x1, x2


def copysign(x1, x2):
    """The magnitude of ``x1`` with the sign bit of ``x2`` (C's ``copysignf``; NaNs and
    zeros keep their payload and take the sign)."""
    x1, x2 = _first_float("copysign", x1, x2)
    return _N.Call("copysign", (x1, x2), x1.dtype)


def hypot(x1, x2):
    """``sqrt(x1**2 + x2**2)`` without overflow or underflow on the way (C's ``hypotf``:
    +inf if either is infinite, even when the other is NaN)."""
    x1, x2 = _first_float("hypot", x1, x2)
    return _N.Call("hypot", (x1, x2), x1.dtype)


def nextafter(x1, x2):
    """The next representable value after ``x1`` toward ``x2`` in ``x1``'s dtype (C's
    ``nextafterf``: ``x2`` if they are equal, NaN if either is NaN, the smallest subnormal
    with ``x2``'s sign after a zero).  float32 and float64: CUDA has no 16-bit one."""
    x1, x2 = _first_float("nextafter", x1, x2)
    if x1.dtype not in ("float32", "float64"):
        raise TypeError(f"T.nextafter takes float32 or float64, got {x1.dtype} (CUDA has no "
                        "16-bit nextafter; TileLang's lowering names none)")
    return _N.Call("nextafter", (x1, x2), x1.dtype)


def ldexp(x1, x2):
    """``x1 * 2**x2``, exactly, rounded once where it leaves ``x1``'s dtype's range (C's
    ``ldexpf(x1, int)``: ``x2`` is converted to an int32, a float truncated)."""
    x1 = _N.as_expr(x1, "float32") if _is_number(x1) else _N.as_expr(x1)
    if not _N.is_float(x1.dtype):
        raise TypeError(f"T.ldexp takes a float first argument (its result's dtype), got "
                        f"{x1.dtype}")
    if _is_number(x2):
        x2 = _N.Const(int(x2), "int32")
    else:
        x2 = _N.cast(_N.as_expr(x2), "int32")
    return _N.Call("ldexp", (x1, x2), x1.dtype)


def nearbyint(x):
    """The nearest integral value in the default rounding mode, halfway cases to even
    (C's ``nearbyintf``): :func:`round`'s meaning; an integer as it is."""
    return round(x)


def _int_pair(name: str, a, b) -> tuple:
    a, b, t = _N._coerce(a, b)
    if not _N.is_int(t):
        raise TypeError(f"T.{name} takes integers, got {a.dtype} and {b.dtype}")
    return a, b, t


def _is_py_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _c_div(x: int, y: int) -> int:
    q = builtins.abs(x) // builtins.abs(y)
    return q if (x < 0) == (y < 0) else -q


def truncdiv(a, b):
    """C's integer ``a / b``: the quotient rounded toward zero (``-7 / 2 == -3``), where
    ``//`` and ``T.floordiv`` floor (``-7 // 2 == -4``)."""
    if _is_py_int(a) and _is_py_int(b):
        if b == 0:
            raise ValueError("T.truncdiv: division by zero")
        return _c_div(a, b)
    a, b, t = _int_pair("truncdiv", a, b)
    if isinstance(a, _N.Const) and isinstance(b, _N.Const) and b.value != 0:
        return _N.Const(_c_div(int(a.value), int(b.value)), t)
    return _N.Call("truncdiv", (a, b), t)


def truncmod(a, b):
    """C's integer ``a % b``: ``a - truncdiv(a, b) * b``, with the sign of ``a``
    (``-7 % 2 == -1``), where ``%`` and ``T.floormod`` take the sign of ``b``."""
    if _is_py_int(a) and _is_py_int(b):
        if b == 0:
            raise ValueError("T.truncmod: division by zero")
        return a - _c_div(a, b) * b
    a, b, t = _int_pair("truncmod", a, b)
    if isinstance(a, _N.Const) and isinstance(b, _N.Const) and b.value != 0:
        x, y = int(a.value), int(b.value)
        return _N.Const(x - _c_div(x, y) * y, t)
    return _N.Call("truncmod", (a, b), t)


def _integer(name: str, x) -> _N.Expr:
    x = _N.as_expr(x)
    if not _N.is_int(x.dtype):
        raise TypeError(f"T.{name} takes an integer, got {x.dtype}")
    return x


def popcount(x):
    """The number of set bits of ``x`` (its two's complement bits), in ``x``'s dtype."""
    x = _integer("popcount", x)
    if isinstance(x, _N.Const):
        return _N.Const(bin(int(x.value) & ((1 << DTYPES[x.dtype].bits) - 1)).count("1"), x.dtype)
    return _N.Call("popcount", (x,), x.dtype)


def clz(x):
    """The number of leading zero bits of a 32- or 64-bit integer, an ``int32`` (CUDA's
    ``__clz``/``__clzll``: 32 or 64 for 0)."""
    x = _integer("clz", x)
    bits = DTYPES[x.dtype].bits
    if bits not in (32, 64):
        raise TypeError(f"T.clz takes a 32- or 64-bit integer, got {x.dtype}")
    if isinstance(x, _N.Const):
        return _N.Const(bits - (int(x.value) & ((1 << bits) - 1)).bit_length(), "int32")
    return _N.Call("clz", (x,), "int32")


def likely(cond):
    """TVM's branch hint: the condition itself (tilecute passes no hint on)."""
    return cond


def reinterpret(value, dtype):
    """``T.reinterpret(value, dtype)``: the bits of ``value`` read as ``dtype``, of the same
    width (TileLang's order; TVM's older ``T.reinterpret(dtype, value)`` is accepted too, as
    TileLang accepts it)."""
    if isinstance(value, str):  # a dtype first: TVM's order
        value, dtype = dtype, value
    if isinstance(value, _bits.Words):  # T.ldg64/128/256's words read as float32x2 ...
        name = getattr(dtype, "__name__", str(dtype))
        bits = _bits.vector_bits(name)
        if bits is None and name in DTYPES:
            bits = DTYPES[name].bits
        if bits != value.bits:
            raise TypeError(f"T.reinterpret: a {value.bits}-bit value cannot be reinterpreted "
                            f"as {name} ({bits} bits); the widths must agree")
        if name in DTYPES:  # one scalar as wide as the words (uint64 from T.ldg64)
            return _bits.unpack(value.words, name)[0]
        return _bits.Words(value.words, name)
    name = getattr(dtype, "__name__", str(dtype))
    vec = _lanes.vector_dtype(name)
    if isinstance(value, _lanes.LaneVector) or vec is not None:
        return _reinterpret_vector(value, name, vec)
    value = _N.as_expr(value)
    dtype = dtype_name(dtype)
    if DTYPES[dtype].bits != DTYPES[value.dtype].bits or "bool" in (dtype, value.dtype):
        raise TypeError(f"T.reinterpret: {value.dtype} ({DTYPES[value.dtype].bits} bits) cannot "
                        f"be reinterpreted as {dtype} ({DTYPES[dtype].bits} bits); the widths "
                        "must agree")
    if dtype == value.dtype:
        return value
    return _N.Call("reinterpret", (value,), dtype)


def _reinterpret_vector(value, name: str, vec):
    """``T.reinterpret`` of a vector or into a vector dtype (``vec``: its scalar and lanes):
    lane by lane where the lane counts agree, else the bits repacked (``T.reinterpret(v,
    "uint32")`` of a float16x2, ``T.reinterpret(u, T.float16x2)`` of a uint32), the lowest
    lane in the lowest bits as the GPU lays a vector out."""
    src = value if isinstance(value, _lanes.LaneVector) else _N.as_expr(value)
    src_lanes = src.lanes if isinstance(src, _lanes.LaneVector) else (src,)
    scalar, count = vec if vec is not None else (dtype_name(name), 1)
    if "bool" in (scalar, src_lanes[0].dtype):
        raise TypeError("T.reinterpret: bool vectors have no bit layout to reinterpret")
    if count == len(src_lanes):
        lanes = tuple(reinterpret(x, scalar) for x in src_lanes)
    else:
        bits = DTYPES[src_lanes[0].dtype].bits * len(src_lanes)
        if bits != DTYPES[scalar].bits * count or bits % 32:
            raise TypeError(f"T.reinterpret: {src.dtype} ({bits} bits) cannot be reinterpreted "
                            f"as {name} ({DTYPES[scalar].bits * count} bits); the widths must "
                            "agree (in whole 32-bit words where the lane counts differ)")
        lanes = tuple(_bits.unpack(_bits.pack(list(src_lanes), src_lanes[0].dtype), scalar))
    return _lanes.LaneVector(lanes) if count > 1 else lanes[0]


def _access(bits: int, space: str, name: str, signature):
    """``T.ldg<bits>`` / ``T.lds<bits>``: the parser reads the access (``wide_load``)."""

    def access(*args, **kwargs):
        raise RuntimeError(f"T.{name} can only be used inside a @T.prim_func body")

    access.__name__ = name
    access.__signature__ = signature
    access.__doc__ = (f"``T.{name}(src{', pred=None' if space == 'global' else ''})``: "
                      f"{bits} bits from {space} memory at ``src`` (an element or a region of "
                      "a buffer), as TileLang's uint32 words; with ``pred`` false nothing is "
                      "read and the value is 0.")
    access.wide_load = (bits, space)
    return access


_P = inspect.Parameter
_GLOBAL_LOAD = inspect.Signature([_P("src", _P.POSITIONAL_OR_KEYWORD),
                                  _P("pred", _P.POSITIONAL_OR_KEYWORD, default=None)])
_SHARED_LOAD = inspect.Signature([_P("src", _P.POSITIONAL_OR_KEYWORD)])
ldg32, ldg64, ldg128, ldg256 = (_access(b, "global", f"ldg{b}", _GLOBAL_LOAD)
                                for b in _bits.ACCESS_BITS)
lds32, lds64, lds128 = (_access(b, "shared", f"lds{b}", _SHARED_LOAD) for b in (32, 64, 128))


def _fast(name: str, intrinsic: str, what: str):
    def fast(x):
        x = _N.as_expr(x, "float32") if not isinstance(x, _N.Expr) else x
        if not _N.is_float(x.dtype) or x.dtype not in ("float32", "float16", "bfloat16"):
            raise TypeError(f"T.{name} takes a float32 (or 16-bit float) value, got {x.dtype}")
        return _N.Call(intrinsic, (x,), x.dtype)

    fast.__name__ = name
    fast.__doc__ = (f"``T.{name}(x)``: TileLang's fast {what} (CUDA's {name}f), the "
                    f"``{intrinsic}`` intrinsic, computed in float32.")
    return fast


__exp = _fast("__exp", "exp_approx", "e**x")
__exp10 = _fast("__exp10", "exp10_approx", "10**x")
__log = _fast("__log", "log_approx", "natural log")
__log2 = _fast("__log2", "log2_approx", "log2")
__log10 = _fast("__log10", "log10_approx", "log10")
__sin = _fast("__sin", "sin_approx", "sine")
__cos = _fast("__cos", "cos_approx", "cosine")
__tan = _fast("__tan", "tan_approx", "tangent")
FAST_MATH = ("__exp", "__exp10", "__log", "__log2", "__log10", "__sin", "__cos", "__tan")


# ---- TileLang's IEEE forms (T.ieee_add ... with a rounding mode) and T.fast_rcp ------------------
def _ieee(name: str, arity: int, rounding: bool):
    def ieee(*args, **kwargs):
        bound = ieee.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        xs = [bound.arguments[n] for n in ("x", "y", "z")[:arity]]
        mode = bound.arguments.get("rounding_mode", "rn")
        if not isinstance(mode, str) or mode not in _N.IEEE_ROUNDINGS:
            raise ValueError(f"Invalid rounding mode {mode!r} for T.{name}. Must be one of: "
                             f"{set(_N.IEEE_ROUNDINGS)}")
        x = _N.as_expr(xs[0], "float32") if _is_number(xs[0]) else _N.as_expr(xs[0])
        if not _N.is_float(x.dtype) or x.dtype not in _N.IEEE_DTYPES:
            raise TypeError(f"T.{name} takes {', '.join(_N.IEEE_DTYPES)} (its first argument's "
                            f"dtype is the result's), got {x.dtype}")
        if x.dtype in ("float16", "bfloat16") and mode != "rn":
            raise ValueError(f"T.{name}: rounding_mode={mode!r} on {x.dtype}: Only rounding "
                             "mode 'rn' is available for half precision (TileLang's words: "
                             "CUDA's half-precision IEEE intrinsics round to nearest only)")
        if name == "ieee_frsqrt" and x.dtype == "float64":
            raise TypeError("T.ieee_frsqrt is not supported for float64 (CUDA has no float64 "
                            "reciprocal square root intrinsic); use T.ieee_frcp(T.ieee_fsqrt(x))")
        rest = tuple(_N.const(y, x.dtype) if _is_number(y) else _N.cast(_N.as_expr(y), x.dtype)
                     for y in xs[1:])
        mode_id = (_N.Const(_N.IEEE_ROUNDINGS.index(mode), "int32"),) if rounding else ()
        return _N.Call(name, (x, *rest, *mode_id), x.dtype)

    params = [_P(n, _P.POSITIONAL_OR_KEYWORD) for n in ("x", "y", "z")[:arity]]
    if rounding:
        params.append(_P("rounding_mode", _P.POSITIONAL_OR_KEYWORD, default="rn"))
    ieee.__signature__ = inspect.Signature(params)
    ieee.__name__ = ieee.__qualname__ = name
    ieee.__doc__ = (f"``T.{name}``: TileLang's IEEE {name[5:]} (CUDA's ``__{name[5:]}_<mode>``), "
                    "rounded " + ("as ``rounding_mode`` says: 'rn' to nearest even, 'rz' toward "
                                  "zero, 'ru' up, 'rd' down (16-bit floats: 'rn' only)"
                                  if rounding else "to nearest even") + "; never contracted "
                    "with its neighbours.")
    return ieee


ieee_add = _ieee("ieee_add", 2, True)
ieee_sub = _ieee("ieee_sub", 2, True)
ieee_mul = _ieee("ieee_mul", 2, True)
ieee_fmaf = _ieee("ieee_fmaf", 3, True)
ieee_fdiv = _ieee("ieee_fdiv", 2, True)
ieee_frcp = _ieee("ieee_frcp", 1, True)
ieee_fsqrt = _ieee("ieee_fsqrt", 1, True)
ieee_frsqrt = _ieee("ieee_frsqrt", 1, False)


def fmul(x, y):
    """TileLang 0.1.15's ``T.fmul(x, y)``: ``x * y`` rounded to nearest and kept a multiply
    (never contracted into an FMA with a neighbouring add): ``T.ieee_mul(x, y, "rn")``;
    floats only, as TileLang's."""
    x = _N.as_expr(x, "float32") if _is_number(x) else _N.as_expr(x)
    if not _N.is_float(x.dtype):
        raise TypeError(f"T.fmul only supports floating-point inputs, but got {x.dtype}")
    return ieee_mul(x, y, "rn")


def fast_rcp(x):
    """``T.fast_rcp(x)``: TileLang's approximate reciprocal of a float32 (``rcp.approx.ftz.f32``:
    ~1 ulp, subnormal arguments and results flushed to zero)."""
    x = _N.as_expr(x, "float32") if _is_number(x) else _N.as_expr(x)
    if x.dtype != "float32":
        raise TypeError(f"T.fast_rcp takes a float32 (TileLang's tl.fast_rcp supports scalar "
                        f"float32 only), got {x.dtype}")
    return _N.Call("fast_rcp", (x,), "float32")


def __ffs(value):  # noqa: N807 (TileLang's name)
    """``T.__ffs(x)``: the one-based position of the least significant set bit of a 32- or
    64-bit integer, 0 for 0 (CUDA's ``__ffs`` / ``__ffsll``); an int32."""
    x = _integer("__ffs", value)
    bits = DTYPES[x.dtype].bits
    if bits not in (32, 64):
        raise TypeError(f"T.__ffs expects a 32-bit or 64-bit integer argument, but got {x.dtype}")
    if isinstance(x, _N.Const):
        v = int(x.value) & ((1 << bits) - 1)
        return _N.Const((v & -v).bit_length(), "int32")
    return _N.Call("ffs", (x,), "int32")


def __fns(mask, base, offset):  # noqa: N807 (TileLang's name)
    """``T.__fns(mask, base, offset)``: the position of the ``offset``-th set bit of the 32-bit
    ``mask`` counting from bit ``base`` (upward for a positive ``offset``, downward for a
    negative one; ``offset`` 0: ``base`` itself if set), or 0xFFFFFFFF where there is none
    (CUDA's ``__fns``, PTX ``fns.b32``); a uint32."""
    mask = _integer("__fns", mask)
    if DTYPES[mask.dtype].bits != 32:
        raise TypeError(f"T.__fns expects a 32-bit integer mask argument, but got {mask.dtype}")
    base, offset = (_N.cast(_integer("__fns", v), "int32") for v in (base, offset))
    return _N.Call("fns", (_N.cast(mask, "uint32"), base, offset), "uint32")


def __ldg(load_or_buf, index=None):  # noqa: N807 (TileLang's name)
    """``T.__ldg(x[i])`` / ``T.__ldg(x, i)``: TileLang's load through the read-only data
    cache; the parser makes it the element load ``x[i]`` (the same value)."""
    raise RuntimeError("T.__ldg can only be used inside a @T.prim_func body")


__ldg.wide_load = (0, "global")


def any_of(buffer):
    """``T.any_of(buf)`` / ``T.any_of(buf[i, 0:n])``: whether any element is true (nonzero):
    every element of a buffer in row-major order, or a region's elements along its last
    dim (TileLang's; the parser reads the elements, see :func:`region_truths`)."""
    return _N.Logic("or", tuple(buffer)) if len(buffer) > 1 else buffer[0]


def all_of(buffer):
    """``T.all_of(buf)``: whether every element is true (nonzero); as :func:`any_of`."""
    return _N.Logic("and", tuple(buffer)) if len(buffer) > 1 else buffer[0]


any_of.reads_elements = all_of.reads_elements = True  # the parser passes the elements' truths


def sigmoid(x):
    """``1 / (1 + exp(-x))``."""
    x = _N.as_expr(x)
    if not _N.is_float(x.dtype):
        x = _N.cast(x, "float32")
    one = _N.const(1, x.dtype)
    return _N.binop("div", one, _N.binop("add", one, exp(_N.binop("sub", _N.const(0, x.dtype), x))))


def abs(x):  # noqa: A001
    """``|x|``."""
    if _is_number(x):
        return -x if x < 0 else x
    x = _N.as_expr(x)
    if x.dtype.startswith("uint"):  # TVM's abs of an unsigned value is the value
        return x
    return _N.Call("abs", (x,), x.dtype)


fabs = abs  # TileLang's T.fabs (TVM's tir.abs)


def max(a, b):  # noqa: A001
    """The larger of ``a`` and ``b`` (a ``BinOp``; of vectors, lane by lane)."""
    if isinstance(a, _lanes.LaneVector) or isinstance(b, _lanes.LaneVector):
        return _lanes.lanewise("T.max", "max", max, a, b)
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        return a if a >= b else b
    return _N.binop("max", a, b)


def min(a, b):  # noqa: A001
    """The smaller of ``a`` and ``b`` (a ``BinOp``; of vectors, lane by lane)."""
    if isinstance(a, _lanes.LaneVector) or isinstance(b, _lanes.LaneVector):
        return _lanes.lanewise("T.min", "min", min, a, b)
    if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
        return a if a <= b else b
    return _N.binop("min", a, b)


def clamp(dst, min_val, max_val):
    """``T.min(T.max(dst, min_val), max_val)``; of floats TileLang's ``tl::clamp``, which
    gives a NaN operand (``dst`` first, then ``min_val``, then ``max_val``) where the
    NaN-quiet ``fmaxf``/``fminf`` would give a bound: a NaN ``dst`` stays NaN."""
    value = min(max(dst, min_val), max_val)
    if not isinstance(value, _N.Expr) or not _N.is_float(value.dtype):
        return value
    for v in (max_val, min_val, dst):
        v = _N.cast(_N.as_expr(v, value.dtype if not isinstance(v, _N.Expr) else None), value.dtype)
        if isinstance(v, _N.Const) and v.value == v.value:
            continue  # a constant that is not NaN
        value = _N.Select(isnan(v), v, value, value.dtype)
    return value


def fma(x, y, z):
    """``x * y + z`` (TileLang's parameter names)."""
    a, b, c = x, y, z
    a, b, t = _N._coerce(a, b)
    a, c, t = _N._coerce(a, c)
    return _N.Call("fma", (_N.cast(a, t), _N.cast(b, t), _N.cast(c, t)), t)


# TVM's vector forms and TileLang's packed x2 math (``tl::add2`` ...) over them: parse-time
# vectors of scalar lanes (lanes.py); each x2 op is its scalar op on the two lanes, in the
# lanes' dtype (``fma2`` as ``T.fma``, ``max2``/``min2`` NaN-quiet as ``T.max``/``T.min``,
# as ``fmaxf``/``__hmax2``)
def Ramp(base, stride, lanes):  # noqa: N802
    """``T.Ramp(base, stride, lanes)`` (TVM's): the index vector ``base + k * stride``."""
    return _lanes.ramp(base, stride, lanes)


def Shuffle(vectors, indices):  # noqa: N802
    """TVM's ``T.Shuffle(vectors, indices)``: the lanes of ``vectors`` picked by ``indices``."""
    return _lanes.shuffle(vectors, indices)


def extract_lane(vector, lane):
    """``T.extract_lane(v, k)``: lane ``k`` of a vector."""
    return _lanes.extract_lane(vector, lane)


def add2(x, y):
    """``T.add2(x, y)``: TileLang's packed x2 ``x + y``."""
    return _lanes.packed_x2("add2", lambda a, b: _N.binop("add", a, b), x, y)


def sub2(x, y):
    """``T.sub2(x, y)``: TileLang's packed x2 ``x - y``."""
    return _lanes.packed_x2("sub2", lambda a, b: _N.binop("sub", a, b), x, y)


def mul2(x, y):
    """``T.mul2(x, y)``: TileLang's packed x2 ``x * y``."""
    return _lanes.packed_x2("mul2", lambda a, b: _N.binop("mul", a, b), x, y)


def fma2(x, y, z):
    """``T.fma2(x, y, z)``: TileLang's packed x2 ``x * y + z`` (``T.fma`` a lane)."""
    return _lanes.packed_x2("fma2", fma, x, y, z)


def max2(x, y):
    """``T.max2(x, y)``: TileLang's packed x2 maximum (``T.max`` a lane: NaN-quiet)."""
    return _lanes.packed_x2("max2", lambda a, b: _N.binop("max", a, b), x, y)


def min2(x, y):
    """``T.min2(x, y)``: TileLang's packed x2 minimum (``T.min`` a lane: NaN-quiet)."""
    return _lanes.packed_x2("min2", lambda a, b: _N.binop("min", a, b), x, y)


def abs2(x):
    """``T.abs2(x)``: TileLang's packed x2 absolute value."""
    return _lanes.packed_x2("abs2", abs, x)


def atomic_load(src, memory_order="seq_cst", *, buffer_of=None):
    """``T.atomic_load(flag[i], memory_order="acquire")``: the element read atomically at
    device scope (TileLang's ``cuda::atomic_ref<T, thread_scope_device>::load``); one
    32- or 64-bit element of a global tensor or a shared buffer (a flag one warp raises
    and another spins on); orders relaxed, consume, acquire, seq_cst."""
    if memory_order not in _N.ATOMIC_LOAD_ORDERS:
        raise ValueError(f"T.atomic_load does not support memory_order={memory_order!r}; "
                         f"expected one of {sorted(_N.ATOMIC_LOAD_ORDERS)}")
    if not isinstance(src, _N.Load):
        raise ValueError(f"T.atomic_load: src must be one element of a global tensor or a "
                         f"shared buffer (`flag[i]`), got {src!r}")
    buf = buffer_of(src.buffer)
    if buf.scope not in ("global", "shared"):
        raise ValueError(f"T.atomic_load: '{buf.name}' is a {buf.scope} buffer; tilecute's "
                         "atomic loads read an element of a global tensor or a shared buffer")
    if DTYPES[buf.dtype].bits not in (32, 64) or buf.dtype == "bool":
        raise ValueError(f"T.atomic_load: '{buf.name}' is {buf.dtype}; atomic loads read 32- "
                         "or 64-bit elements")
    order = _N.Const(_N.MEMORY_ORDERS.index(memory_order), "int32")
    return _N.Call("atomic_load", (src, order), src.dtype)


atomic_load.buffer_lookup = True  # the parser passes its buffer lookup as buffer_of


def index_to_coordinates(index, shape):
    """``T.index_to_coordinates(i, (a, b, c))``: the row-major coordinates of the flat
    index ``i`` in ``shape``, one expression per dim (a tuple: TileLang's list, indexed
    and unpacked alike) (TileLang's: the last dim's
    ``i % c``, then ``(i // c) % b`` ... down to the first, ``(i // (b * c)) % a``).  Plain
    arithmetic: ints give ints, expressions floor ``//`` and ``%`` (TVM's ``//`` / ``%``)."""
    if isinstance(shape, _N.Expr) or not hasattr(shape, "__len__") or len(shape) == 0:
        raise ValueError(f"T.index_to_coordinates: shape must be a non-empty sequence of "
                         f"extents, got {shape!r}")
    coords = []
    for extent in reversed(tuple(shape)):
        coords.append(index % extent)
        index = index // extent
    return tuple(coords[::-1])


def floordiv(a, b):
    return _N.binop("floordiv", a, b)


def floormod(a, b):
    return _N.binop("mod", a, b)


# ---- bitwise (integers only) ----------------------------------------------------------------
def _bitwise(op: str, name: str):
    def f(x, y):  # TileLang's parameter names (TVM's tirx.bitwise_and(x, y) ...)
        a, b = x, y
        if not isinstance(a, _N.Expr) and not isinstance(b, _N.Expr):
            return {"bitand": a & b, "bitor": a | b, "bitxor": a ^ b, "shl": a << b,
                    "shr": a >> b}[op]
        e = _N.binop(op, a, b)
        if not _N.is_int(e.dtype):
            raise TypeError(f"T.{name} takes integers, got {e.dtype}")
        return e

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``T.{name}(x, y)`` on integers."
    return f


bitwise_and, bitwise_or = _bitwise("bitand", "bitwise_and"), _bitwise("bitor", "bitwise_or")
bitwise_xor = _bitwise("bitxor", "bitwise_xor")
shift_left, shift_right = _bitwise("shl", "shift_left"), _bitwise("shr", "shift_right")


def bitwise_not(x):
    """``~x`` on integers (``x ^ -1``: every bit flipped)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return ~x
    x = _N.as_expr(x)
    if not _N.is_int(x.dtype):
        raise TypeError(f"T.bitwise_not takes an integer, got {x.dtype}")
    return _N.bitwise_not(x)


# ---- casts and selects ---------------------------------------------------------------------
def Cast(dtype, value, annotations=None):  # noqa: N802
    """TVM's ``T.Cast(dtype, value)`` (of a vector: each lane, TVM's cast keeping the
    lanes).  ``annotations`` (TileLang 0.1.15's TVM): the PTX hints ``T.cast`` records
    there, ``{"round": "rs", "sat": False, "rbits": bits}``, read as ``T.cast``'s
    ``round`` / ``sat`` / ``rbits`` arguments (with its checks and refusals)."""
    if annotations:
        if not isinstance(annotations, dict):
            raise TypeError(f"T.Cast: annotations is a dict, got {annotations!r}")
        unknown = sorted(set(annotations) - {"round", "sat", "rbits"})
        if unknown:
            raise ValueError(f"T.Cast: annotations key {unknown[0]!r} is not one of the "
                             "keys TileLang's casts record (round, sat, rbits)")
        sat = annotations.get("sat", True)
        if isinstance(sat, _N.Const):
            sat = bool(sat.value)
        elif isinstance(sat, int):
            sat = bool(sat)
        try:
            return cast(value, dtype, round=annotations.get("round", ""), sat=sat,
                        rbits=annotations.get("rbits"))
        except ValueError as e:
            raise ValueError(f"annotations: {str(e).removeprefix('T.cast: ')}") from None
    if isinstance(value, _lanes.LaneVector):
        return _lanes.cast(value, dtype, dtype_name)
    return _N.cast(_N.as_expr(value), dtype_name(dtype))


CAST_ROUNDING_MODES = frozenset({"", "rn", "rz", "rp", "rm", "rs"})  # TileLang's PTX hints


def cast(value, dtype, round: str = "", sat: bool = True, rbits=None):  # noqa: A002
    """TileLang's ``T.cast(value, dtype)`` (value first), with TileLang's checks of its
    PTX hints.  ``round=""`` or ``"rn"`` is tilecute's conversion (round to nearest
    even); ``"rz"``/``"rp"``/``"rm"`` (TileLang reserves them) and ``"rs"`` (stochastic,
    with ``rbits``) are refused.  ``sat`` (a bool) changes nothing: TileLang's CUDA code
    generator reads it only for stochastic rounding (where ``sat=False`` is its error), so
    every other cast converts the same with either value, as tilecute's does."""
    if isinstance(value, str) and isinstance(dtype, _N.Expr):
        raise ValueError("T.cast takes (value, dtype), as in TileLang; T.Cast takes "
                         "(dtype, value)")
    if round not in CAST_ROUNDING_MODES:
        raise ValueError(f"Invalid round '{round}'. Must be one of: {sorted(CAST_ROUNDING_MODES)}")
    if not isinstance(sat, bool):
        raise ValueError(f"Invalid sat '{sat}'. Must be a bool (True for satfinite, False for "
                         "no saturation)")
    if round == "rs" and rbits is None:
        raise ValueError("rbits is required when round='rs' (stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise ValueError("rbits is only valid with round='rs' (stochastic rounding)")
    if round not in ("", "rn"):
        raise ValueError(f"T.cast: round={round!r} is not supported (tilecute's casts round to "
                         "nearest even: round='' or 'rn')")
    return Cast(dtype, value)


def if_then_else(cond, t, f):
    """``cond ? t : f`` (a ``Select``), TVM's ``if_then_else``: a shared or global element
    read in a branch is read only where that branch is taken (the code generator reads it
    into a temporary under the condition), so the branch may guard a read past a buffer's
    end, as TileLang programs do.  A branch that updates something (an atomic's old value,
    a random draw) would run whichever branch is taken: refused."""
    if any(isinstance(x, _lanes.LaneVector) for x in (cond, t, f)):  # vectors: each lane's
        return _lanes.lanewise("T.if_then_else", "select", if_then_else, cond, t, f)
    a, b, ty = _N._coerce(t, f)
    cond = _truth(cond)
    if isinstance(cond, _N.Const):  # known at parse time: the chosen side (TVM folds it too)
        return a if cond.value else b
    effects = sorted({x.name for x in _walk(a, b) if isinstance(x, _N.Call)
                      and x.name in _N.ATOMIC_RETURNS + _N.RNG_DRAWS})
    if effects:
        raise ValueError(f"T.if_then_else: a branch calls {', '.join(effects)}, which TVM's "
                         "if_then_else runs only where that branch is taken; tilecute would run "
                         "it either way: write an if statement around it")
    return _N.Select(cond, a, b, ty)


def Select(condition, true_value, false_value):  # noqa: N802
    """TVM's ``T.Select(cond, a, b)``: both sides are evaluated (its reads of memory
    happen only in the branch taken, which a load, having no other effect, allows)."""
    if any(isinstance(x, _lanes.LaneVector) for x in (condition, true_value, false_value)):
        return _lanes.lanewise("T.Select", "select", Select, condition, true_value, false_value)
    a, b, ty = _N._coerce(true_value, false_value)
    cond = _truth(condition)
    if isinstance(cond, _N.Const):
        return a if cond.value else b
    return _N.Select(cond, a, b, ty)


def _logic_operand(form: str, x) -> _N.Expr:
    x = _N.as_expr(x)
    if x.dtype != "bool":
        raise TypeError(f"T.{form}: TVM's tir.{form} takes boolean operands, got {x.dtype} "
                        "(compare it first, e.g. x != 0)")
    return x


def And(a, b):  # noqa: N802
    """TVM's ``tir.And(a, b)`` node (``T.And``): the logical and of two booleans, as
    ``a and b`` in a kernel."""
    a, b = _logic_operand("And", a), _logic_operand("And", b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, _N.Const):
            return y if x.value else x
    return _N.Logic("and", (a, b))


def Or(a, b):  # noqa: N802
    """TVM's ``tir.Or(a, b)`` node (``T.Or``): the logical or of two booleans."""
    a, b = _logic_operand("Or", a), _logic_operand("Or", b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, _N.Const):
            return x if x.value else y
    return _N.Logic("or", (a, b))


def Not(a):  # noqa: N802
    """TVM's ``tir.Not(a)`` node (``T.Not``): the negation of a boolean."""
    a = _logic_operand("Not", a)
    return _N.Const(not a.value, "bool") if isinstance(a, _N.Const) else _N.Not(a)


def _comparison_node(op: str, form: str):
    def node(a, b):
        """TVM's ``tir.{form}(a, b)`` node: ``a {sym} b``."""
        return _N.cmp(op, a, b)

    sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
    node.__name__ = node.__qualname__ = form
    node.__doc__ = f"TVM's ``tir.{form}(a, b)`` node (``T.{form}``): ``a {sym} b``."
    return node


EQ, NE, LT, LE, GT, GE = (_comparison_node(op, op.upper())
                          for op in ("eq", "ne", "lt", "le", "gt", "ge"))


def _walk(*xs):
    for x in xs:
        yield x
        if isinstance(x, _N.Expr):
            yield from _walk(*(v for v in vars(x).values() if isinstance(v, (_N.Expr, tuple))))
        elif isinstance(x, tuple):
            yield from _walk(*x)


def _truth(x) -> _N.Expr:
    x = _N.as_expr(x)
    return x if x.dtype == "bool" else _N.cmp("ne", x, 0)


# ---- dtype constants --------------------------------------------------------------------------
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308,
              "float8_e4m3": 448.0, "float8_e5m2": 57344.0}


def infinity(dtype):
    """``+inf`` of a float dtype (``-T.infinity(dtype)`` is ``-inf``)."""
    dt = dtype_name(dtype)
    if not _N.is_float(dt):
        raise ValueError(f"T.infinity({dt!r}): only float dtypes have an infinity")
    if dt == "float8_e4m3":
        raise ValueError("T.infinity('float8_e4m3'): e4m3 has no infinity; use "
                         "T.max_value('float8_e4m3')")
    return _N.Const(math.inf, dt)


def max_value(dtype):
    """The largest finite value of ``dtype``."""
    dt = dtype_name(dtype)
    info = DTYPES[dt]
    if info.kind == "float":
        return _N.Const(_FLOAT_MAX[dt], dt)
    if info.kind == "bool":
        return _N.Const(True, dt)
    bits = info.bits - (1 if info.kind == "int" else 0)
    return _N.Const((1 << bits) - 1, dt)


def min_value(dtype):
    """The lowest finite value of ``dtype`` (``-max_value`` for floats)."""
    dt = dtype_name(dtype)
    info = DTYPES[dt]
    if info.kind == "float":
        return _N.Const(-_FLOAT_MAX[dt], dt)
    if info.kind == "bool":
        return _N.Const(False, dt)
    return _N.Const(-(1 << (info.bits - 1)) if info.kind == "int" else 0, dt)


def get_thread_binding(dim: int = 0):
    """``threadIdx.x`` (``dim`` 0), ``.y`` (1) or ``.z`` (2)."""
    if dim not in (0, 1, 2) or isinstance(dim, bool):
        raise ValueError(f"T.get_thread_binding: dim must be 0, 1 or 2, got {dim!r}")
    return _N.Call("thread_idx", (_N.Const(int(dim), "int32"),), "int32")


# ---- lanes, warps and warp groups (TileLang's T.get_lane_idx ...; its tl::get_lane_idx) -------
# TileLang's defaults on NVIDIA GPUs: 32 lanes a warp, 4 warps a warp group
_WARP_SIZE, _WARPS_PER_GROUP = 32, 4


def _linear_thread_idx(threads: tuple) -> _N.Expr:
    """TileLang's ``threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)``
    over the kernel's ``threads``."""
    tid, stride = get_thread_binding(0), 1
    for d in range(1, len(threads)):
        stride *= threads[d - 1]
        tid = _N.binop("add", tid, _N.binop("mul", get_thread_binding(d), stride))
    return tid


def _count(name: str, arg: str, value, default: int) -> _N.Expr:
    """A warp size or warps-per-group argument: ``default`` where it is None or not
    positive (as tl::get_lane_idx falls back at run time)."""
    if value is None:
        return _N.Const(default, "int32")
    if isinstance(value, bool) or not isinstance(value, (int, _N.Expr)) or \
            (isinstance(value, _N.Expr) and not _N.is_int(value.dtype)):
        raise TypeError(f"T.{name}: {arg} must be an integer, got {value!r}")
    if isinstance(value, int):
        return _N.Const(value if value > 0 else default, "int32")
    value = _N.cast(value, "int32")
    return _N.Select(_N.cmp("gt", value, 0), value, _N.Const(default, "int32"), "int32")


def _thread_form(fn):
    """A helper of the kernel's thread index: the parser passes the enclosing T.Kernel's
    ``threads`` (keyword ``threads``, not part of TileLang's signature shown to programs)."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                               if p.name != "threads"])
    fn.kernel_threads = True
    return fn


@_thread_form
def get_lane_idx(warp_size=None, *, threads=(128,)):
    """The thread's lane in its warp: the linear thread index ``% warp_size`` (32)."""
    return _N.binop("mod", _linear_thread_idx(threads),
                    _count("get_lane_idx", "warp_size", warp_size, _WARP_SIZE))


@_thread_form
def get_warp_idx(warp_size=None, *, threads=(128,)):
    """The thread's warp in the block: the linear thread index ``// warp_size`` (32)."""
    return _N.binop("floordiv", _linear_thread_idx(threads),
                    _count("get_warp_idx", "warp_size", warp_size, _WARP_SIZE))


@_thread_form
def get_warp_idx_sync(warp_size=None, *, threads=(128,)):
    """As :func:`get_warp_idx` (TileLang's variant for converged warps; the same value)."""
    return _N.binop("floordiv", _linear_thread_idx(threads),
                    _count("get_warp_idx_sync", "warp_size", warp_size, _WARP_SIZE))


@_thread_form
def get_warp_group_idx(warp_size=None, warps_per_group=None, *, threads=(128,)):
    """The thread's warp group: the linear thread index ``// (warp_size *
    warps_per_group)`` (32 * 4 = 128)."""
    if warps_per_group is not None and warp_size is None:
        raise ValueError("T.get_warp_group_idx expects `warp_size` when specifying "
                         "`warps_per_group`")
    size = _N.binop("mul", _count("get_warp_group_idx", "warp_size", warp_size, _WARP_SIZE),
                    _count("get_warp_group_idx", "warps_per_group", warps_per_group,
                           _WARPS_PER_GROUP))
    return _N.binop("floordiv", _linear_thread_idx(threads), size)


# ---- warp shuffles (TileLang's T.shfl_*; CUDA's __shfl_*_sync) --------------------------------
_FULL_MASK = 0xFFFFFFFF


def _shuffle(name: str, what: str):
    def f(value, delta, width=32, mask=_FULL_MASK):
        value = _N.as_expr(value)
        if _is_number(width) and (width < 1 or width > 32 or width & (width - 1)):
            raise ValueError(f"T.{name}: width={width} must be a power of two from 1 to 32")
        if _is_number(mask) and not 0 < mask <= _FULL_MASK:
            raise ValueError(f"T.{name}: mask={mask:#x} must be a nonzero 32-bit lane mask")
        if DTYPES[value.dtype].bits > 64 or value.dtype == "bool":
            raise ValueError(f"T.{name}: a {value.dtype} value cannot be shuffled (32 or 64 bits, "
                             "narrower ones widened)")
        mask = _N.Const(mask, "uint32") if _is_number(mask) else _N.as_expr(mask)
        args = (value, _N.as_expr(delta), _N.as_expr(width), mask)
        for x, arg in zip(args[1:3], ("delta" if name != "shfl_sync" else "srcLane", "width")):
            if not _N.is_int(x.dtype):
                raise TypeError(f"T.{name}: {arg} must be an integer, got {x.dtype}")
        return _N.Call(name, args, value.dtype)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``T.{name}(value, {'srcLane' if name == 'shfl_sync' else 'delta'}, width=32, "
                 f"mask=0xFFFFFFFF)``: {what} within groups of ``width`` lanes; every lane of "
                 "``mask`` must run it.")
    return f


shfl_xor = _shuffle("shfl_xor", "the value of lane ``lane ^ delta``")
shfl_down = _shuffle("shfl_down", "the value of lane ``lane + delta`` (its own past the group)")
shfl_up = _shuffle("shfl_up", "the value of lane ``lane - delta`` (its own before the group)")
_shfl_sync = _shuffle("shfl_sync", "the value of lane ``srcLane``")


def shfl_sync(value, srcLane, width=32, mask=_FULL_MASK):  # noqa: N803 (TileLang's name)
    return _shfl_sync(value, srcLane, width, mask)


shfl_sync.__doc__ = _shfl_sync.__doc__


def _tvm_shuffle(name: str, shuffle, operand: str):
    """TVM's ``T.{name}(mask, value, {operand}, width, warp_size)`` (TileLang exports it): on
    CUDA ``__shfl{_}_sync(mask, value, {operand}, width)``, i.e. tilecute's shuffle with the
    arguments reordered; ``warp_size`` is the target's warp, 32."""

    def f(mask, value, lane, width, warp_size):
        if not (_is_number(warp_size) and warp_size == 32):
            raise ValueError(f"T.{name}: warp_size={warp_size!r}; a CUDA warp has 32 lanes")
        try:
            return shuffle(value, lane, width, mask)
        except (ValueError, TypeError) as e:
            raise type(e)(str(e).replace(f"T.{shuffle.__name__}", f"T.{name}")) from None

    f.__name__ = f.__qualname__ = name
    sig = inspect.signature(f)  # the third parameter under TVM's name (warp_id, offset)
    f.__signature__ = sig.replace(parameters=[
        p.replace(name=operand) if p.name == "lane" else p for p in sig.parameters.values()])
    f.__doc__ = (f"``T.{name}(mask, value, {operand}, width, warp_size)``: TVM's warp shuffle, "
                 f"``T.{shuffle.__name__}(value, {operand}, width, mask)`` with ``warp_size`` 32.")
    return f


tvm_warp_shuffle = _tvm_shuffle("tvm_warp_shuffle", _shfl_sync, "warp_id")
tvm_warp_shuffle_down = _tvm_shuffle("tvm_warp_shuffle_down", shfl_down, "offset")
tvm_warp_shuffle_up = _tvm_shuffle("tvm_warp_shuffle_up", shfl_up, "offset")


# ---- warp all-reductions (TileLang's T.warp_reduce_*) -------------------------------------------
def _warp_reduction(kind: str, what: str):
    name = f"warp_reduce_{kind}"

    def f(value):
        value = _N.as_expr(value)
        if value.dtype == "bool" or DTYPES[value.dtype].bits > 64:
            raise ValueError(f"T.{name}: a {value.dtype} value cannot be reduced across the warp "
                             "(numbers of 64 bits at most)")
        if kind in ("bitand", "bitor") and not _N.is_int(value.dtype):
            raise TypeError(f"T.{name} takes an integer, got {value.dtype}")
        return _N.Call(name, (value,), value.dtype)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``T.{name}(value)``: the {what} of ``value`` over the 32 lanes of the warp, "
                 "in every lane (shuffle butterflies; all 32 lanes must run it).")
    return f


warp_reduce_sum = _warp_reduction("sum", "sum")
warp_reduce_max = _warp_reduction("max", "maximum")
warp_reduce_min = _warp_reduction("min", "minimum")
warp_reduce_bitand = _warp_reduction("bitand", "bitwise and")
warp_reduce_bitor = _warp_reduction("bitor", "bitwise or")


# ---- warp votes, elections and block barriers on a predicate (TileLang's T.any_sync ...) -----
def _predicate(name: str, predicate) -> _N.Expr:
    """An integer or bool predicate as a bool (nonzero: true); floats refused as TileLang."""
    p = _N.as_expr(predicate)
    if p.dtype == "bool":
        return p
    if not _N.is_int(p.dtype):
        raise TypeError(f"T.{name} requires an integer or boolean predicate, but got {p.dtype}")
    if isinstance(p, _N.Const):
        return _N.Const(bool(p.value), "bool")
    return _N.cmp("ne", p, _N.Const(0, p.dtype))


def _lane_mask(name: str, mask) -> _N.Expr:
    if _is_number(mask):
        if not 0 < mask <= _FULL_MASK:
            raise ValueError(f"T.{name}: mask={mask:#x} must be a nonzero 32-bit lane mask")
        return _N.Const(int(mask), "uint32")
    mask = _N.as_expr(mask)
    if not _N.is_int(mask.dtype):
        raise TypeError(f"T.{name}: mask must be an integer lane mask, got {mask.dtype}")
    return _N.cast(mask, "uint32")


def any_sync(predicate, mask=_FULL_MASK):
    """``T.any_sync(predicate, mask=0xFFFFFFFF)``: an int32, 1 if any lane of ``mask`` has a
    nonzero ``predicate``, else 0 (CUDA's ``__any_sync``; every lane of ``mask`` runs it)."""
    return _N.Call("vote_any", (_lane_mask("any_sync", mask), _predicate("any_sync", predicate)),
                   "int32")


def all_sync(predicate, mask=_FULL_MASK):
    """``T.all_sync(predicate, mask=0xFFFFFFFF)``: an int32, 1 if every lane of ``mask`` has a
    nonzero ``predicate``, else 0 (CUDA's ``__all_sync``)."""
    return _N.Call("vote_all", (_lane_mask("all_sync", mask), _predicate("all_sync", predicate)),
                   "int32")


def ballot_sync(predicate, mask=_FULL_MASK):
    """``T.ballot_sync(predicate, mask=0xFFFFFFFF)``: a uint64 whose bit N is set where lane N
    (of ``mask``) has a nonzero ``predicate``; the upper 32 bits are zero (CUDA's
    ``__ballot_sync``, widened as TileLang does)."""
    return _N.Call("vote_ballot", (_lane_mask("ballot_sync", mask),
                                   _predicate("ballot_sync", predicate)), "uint64")


def ballot(predicate):
    """``T.ballot(predicate)``: :func:`ballot_sync` over the full warp."""
    return _N.Call("vote_ballot", (_N.Const(_FULL_MASK, "uint32"), _predicate("ballot", predicate)),
                   "uint64")


def activemask():
    """``T.activemask()``: a uint64 whose bit N is set where lane N of the warp is active
    (CUDA's ``__activemask``, widened)."""
    return _N.Call("activemask", (), "uint64")


def block_rank_in_cluster():
    """``T.block_rank_in_cluster()``: the block's rank in its cluster (``%cluster_ctarank``,
    int32; 0 in a kernel not launched in clusters)."""
    return _N.Call("block_rank_in_cluster", (), "int32")


def tvm_warp_activemask():
    """TVM's ``T.tvm_warp_activemask()``: the warp's active lanes, a uint32 (CUDA's
    ``__activemask``)."""
    return _N.Call("warp_activemask", (), "uint32")


def _match_value(name: str, value) -> _N.Expr:
    """CUDA's ``__match_*_sync`` overloads: 32- and 64-bit integers and floats (a float's
    bits are compared); narrower integers are promoted to int, as C promotes them."""
    v = _N.as_expr(value)
    if v.dtype == "bool" or (_N.is_float(v.dtype) and v.dtype not in ("float32", "float64")) \
            or (not _N.is_float(v.dtype) and not _N.is_int(v.dtype)):
        raise TypeError(f"T.{name} compares 32- or 64-bit integers or floats (CUDA's "
                        f"__{name} overloads), got {v.dtype}")
    if _N.is_int(v.dtype) and DTYPES[v.dtype].bits < 32:
        v = _N.cast(v, "int32")
    return v


def match_any_sync(value, mask=_FULL_MASK):
    """``T.match_any_sync(value, mask=0xFFFFFFFF)``: a uint32 of the lanes of ``mask`` whose
    ``value`` equals this lane's (CUDA's ``__match_any_sync``; every lane of ``mask`` runs
    it; sm_70+)."""
    return _N.Call("match_any", (_match_value("match_any_sync", value),
                                 _lane_mask("match_any_sync", mask)), "uint32")


def match_all_sync(value, mask=_FULL_MASK):
    """``T.match_all_sync(value, mask=0xFFFFFFFF)``: ``mask`` if every lane of it has the same
    ``value``, else 0 (CUDA's ``__match_all_sync``, its predicate dropped as TileLang drops
    it)."""
    return _N.Call("match_all", (_match_value("match_all_sync", value),
                                 _lane_mask("match_all_sync", mask)), "uint32")


def _block_vote(name: str, what: str):
    def f(predicate):
        return _N.Call(name, (_predicate(name, predicate),), "int32")

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``T.{name}(predicate)``: a barrier of the block's threads that returns, in "
                 f"each, {what} (CUDA's ``__{name}``; ``bar.red``).  In a warp-specialized "
                 "kernel or a ``T.ws`` region, the barrier of the threads the body runs on.")
    return f


syncthreads_count = _block_vote("syncthreads_count",
                                "the number of threads with a nonzero ``predicate`` (an int32)")
syncthreads_and = _block_vote("syncthreads_and", "1 if every thread's ``predicate`` is nonzero, "
                              "else 0 (an int32)")
syncthreads_or = _block_vote("syncthreads_or", "1 if any thread's ``predicate`` is nonzero, "
                             "else 0 (an int32)")


@_thread_form
def shuffle_elect(thread_extent, *, threads=(128,)):
    """``T.shuffle_elect(thread_extent)``: a bool, true in one thread of each group of
    ``thread_extent`` threads: the ``elect.sync`` lane of the first warp of each group of
    ``ceil(thread_extent / 32)`` warps; 0 elects one thread of the whole block (in warp 0).
    Every lane of the warp must run it (sm_90+)."""
    if isinstance(thread_extent, bool) or not isinstance(thread_extent, int) or thread_extent < 0:
        raise TypeError(f"T.shuffle_elect: thread_extent must be a constant integer >= 0, "
                        f"got {thread_extent!r}")
    if thread_extent == 32:
        return _N.Call("elect_one_sync", (_N.Const(True, "bool"),), "bool")
    warp = _N.binop("floordiv", _linear_thread_idx(threads), _N.Const(_WARP_SIZE, "int32"))
    if thread_extent:
        warp = _N.binop("mod", warp, _N.Const((thread_extent + 31) // 32, "int32"))
    return _N.Call("elect_one_sync", (_N.cmp("eq", warp, _N.Const(0, "int32")),), "bool")


# ---- the block's and the grid's indices and extents (TileLang's T.get_block_binding ...) ------
def _kernel_form(fn):
    """A helper of the enclosing T.Kernel: the parser passes ``kernel`` (keyword, not part of
    TileLang's signature), a tuple (block index variables, grid extents, thread extents)."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                               if p.name != "kernel"])
    fn.kernel_scope = True
    return fn


def _dim(name: str, dim) -> int:
    if isinstance(dim, bool) or dim not in (0, 1, 2):
        raise ValueError(f"T.{name}: dim must be 0, 1 or 2, got {dim!r}")
    return int(dim)


@_kernel_form
def get_thread_bindings(*, kernel=None):
    """``[threadIdx.x, threadIdx.y, threadIdx.z]``."""
    return [get_thread_binding(d) for d in range(3)]


@_kernel_form
def get_block_binding(dim: int = 0, *, kernel=None):
    """``blockIdx.x`` (``dim`` 0), ``.y`` or ``.z``: the T.Kernel's block variable (0 for a
    dim its grid does not have)."""
    blocks = kernel[0]
    d = _dim("get_block_binding", dim)
    return blocks[d] if d < len(blocks) else _N.Const(0, "int32")


@_kernel_form
def get_block_bindings(*, kernel=None):
    """``[blockIdx.x, blockIdx.y, blockIdx.z]``."""
    return [get_block_binding(d, kernel=kernel) for d in range(3)]


@_kernel_form
def get_thread_extent(dim: int = 0, *, kernel=None):
    """``blockDim.x`` (``dim`` 0), ``.y`` or ``.z``: the T.Kernel's ``threads``."""
    threads = kernel[2]
    d = _dim("get_thread_extent", dim)
    return _N.Const(int(threads[d]), "int32") if d < len(threads) else _N.Const(1, "int32")


@_kernel_form
def thread_binding(start, stop=None, thread=None, *, annotations=None, kernel=None):
    """TVM's ``T.thread_binding(start, stop=None, thread=None, *, annotations=None)`` as
    TileLang programs use it inside a T.Kernel (``tx = T.thread_binding(0, 128,
    "threadIdx.x")``, ``T.thread_binding(128, thread="threadIdx.x")``: one bound is the
    extent): the thread index of that dim, whose range must be the T.Kernel's threads."""
    dims = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
    if thread is None and isinstance(stop, str):  # TVM's T.thread_binding(128, "threadIdx.x")
        thread, stop = stop, None
    if thread is None:
        raise ValueError("T.thread_binding: thread= is required (TVM's rule): which of "
                         "threadIdx.x/y/z it binds")
    if thread not in dims:
        raise ValueError(f"T.thread_binding: thread={thread!r} is not supported: tilecute binds "
                         "threadIdx.x/y/z (blockIdx comes from the T.Kernel's variables)")
    if annotations:
        raise ValueError("T.thread_binding: annotations are not supported")
    begin, end = (0, start) if stop is None else (start, stop)
    d = dims[thread]
    threads = kernel[2]
    extent = int(threads[d]) if d < len(threads) else 1
    if not (isinstance(begin, int) and begin == 0 and isinstance(end, int) and end == extent):
        raise ValueError(f"T.thread_binding({begin}, {end}, {thread!r}): the range must be "
                         f"0..{extent}, the T.Kernel's threads along {thread} (TVM binds a "
                         "thread variable to the whole launched extent)")
    return get_thread_binding(d)


def _shown(e: _N.Expr) -> str:
    from ..ir.printer import expr_str

    return expr_str(e)


_LAUNCH_TAGS = {f"{k}.{c}": (k, d) for k in ("blockIdx", "threadIdx") for d, c in enumerate("xyz")}


@_kernel_form
def launch_thread(thread, extent, *, kernel=None):
    """TVM's ``T.launch_thread(tag, extent)`` inside a T.Kernel (TileLang's T.Kernel is
    printed as these; ``tx = T.launch_thread("threadIdx.x", 256)`` in a kernel of 256
    threads): the index of that thread or block dim.  TVM launches one extent per tag, so
    ``extent`` must be the T.Kernel's (its threads, or its grid extent, 1 for a dim it does
    not have); an ``IterVar`` (``T.env_thread``) or another tag is refused."""
    if not isinstance(thread, str):
        raise ValueError(f"T.launch_thread: thread={thread!r}; tilecute takes the tag as a string "
                         "(\"threadIdx.x\", \"blockIdx.y\", ...), not a T.env_thread variable")
    if thread not in _LAUNCH_TAGS:
        raise ValueError(f"T.launch_thread: thread={thread!r} is not supported: tilecute launches "
                         "blockIdx.x/y/z and threadIdx.x/y/z (a T.Kernel's grid and threads)")
    kind, d = _LAUNCH_TAGS[thread]
    blocks, grid, threads = kernel
    if kind == "threadIdx":
        have = _N.Const(int(threads[d]) if d < len(threads) else 1, "int32")
    else:
        have = _N.as_expr(grid[d]) if d < len(grid) else _N.Const(1, "int32")
    want = extent if isinstance(extent, _N.Expr) else _N.as_expr(extent) \
        if isinstance(extent, int) and not isinstance(extent, bool) else None
    same = want is not None and (
        want == have if not (isinstance(want, _N.Const) and isinstance(have, _N.Const))
        else want.value == have.value)
    if not same:
        what = "threads" if kind == "threadIdx" else "grid extent"
        raise ValueError(f"T.launch_thread({thread!r}, {extent!r}): the extent must be the "
                         f"T.Kernel's {what} along {thread[-1]}, {_shown(have)} (TVM launches one extent "
                         "per thread tag; a different one would not be this kernel's)")
    if kind == "threadIdx":
        return get_thread_binding(d)
    return blocks[d] if d < len(blocks) else _N.Const(0, "int32")


@_kernel_form
def get_thread_extents(*, kernel=None):
    """``[blockDim.x, blockDim.y, blockDim.z]``."""
    return [get_thread_extent(d, kernel=kernel) for d in range(3)]


@_kernel_form
def get_block_extent(dim: int = 0, *, kernel=None):
    """``gridDim.x`` (``dim`` 0), ``.y`` or ``.z``: the T.Kernel's grid extent."""
    grid = kernel[1]
    d = _dim("get_block_extent", dim)
    return _N.as_expr(grid[d]) if d < len(grid) else _N.Const(1, "int32")


@_kernel_form
def get_block_extents(*, kernel=None):
    """``[gridDim.x, gridDim.y, gridDim.z]``."""
    return [get_block_extent(d, kernel=kernel) for d in range(3)]


def _cluster_form(fn):
    """A cluster helper of the enclosing T.Kernel (TileLang 0.1.15's ``T.get_cluster_*``):
    the parser passes ``kernel`` and ``cluster`` (the T.Kernel's cluster dims, (1, 1, 1)
    for a launch without clusters)."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                               if p.name not in ("kernel", "cluster")])
    fn.kernel_scope = fn.kernel_cluster = True
    return fn


@_cluster_form
def get_cluster_dims(*, kernel=None, cluster=None):
    """``[x, y, z]``: the T.Kernel's blocks per cluster (``[1, 1, 1]`` without clusters)."""
    return [int(c) for c in cluster]


@_cluster_form
def get_cluster_size(*, kernel=None, cluster=None):
    """The blocks per cluster (the product of :func:`get_cluster_dims`)."""
    n = 1
    for c in cluster:
        n *= int(c)
    return n


@_cluster_form
def get_cluster_id(dim: int = 0, *, kernel=None, cluster=None):
    """The index of this block's cluster along ``dim``: ``block_id // cluster_dims[dim]``
    (TileLang's program-space arithmetic; 0 for a dim the grid does not have)."""
    d = _dim("get_cluster_id", dim)
    blocks = kernel[0]
    if d >= len(blocks):
        return _N.Const(0, "int32")
    c = int(cluster[d])
    return blocks[d] if c == 1 else _N.binop("floordiv", blocks[d], _N.Const(c, blocks[d].dtype))


@_cluster_form
def get_cluster_ids(*, kernel=None, cluster=None):
    """The cluster index along every grid dim of the T.Kernel."""
    return [get_cluster_id(d, kernel=kernel, cluster=cluster) for d in range(len(kernel[0]))]


@_cluster_form
def get_cluster_extent(dim: int = 0, *, kernel=None, cluster=None):
    """The clusters along ``dim``: ``ceildiv(grid extent, cluster_dims[dim])``."""
    d = _dim("get_cluster_extent", dim)
    extent = get_block_extent(d, kernel=kernel)
    c = int(cluster[d])
    return extent if c == 1 else ceildiv(extent, c)


@_cluster_form
def get_cluster_extents(*, kernel=None, cluster=None):
    """The clusters along x, y and z."""
    return [get_cluster_extent(d, kernel=kernel, cluster=cluster) for d in range(3)]


def ignore_loop_partition(predicate):
    """TVM's ``T.ignore_loop_partition(cond)``: ``cond`` (a hint to TVM's loop partitioner,
    which tilecute does not have)."""
    p = _N.as_expr(predicate)
    if p.dtype != "bool":
        raise TypeError(f"T.ignore_loop_partition takes a boolean condition, got {p.dtype}")
    return p


def Broadcast(value, lanes):  # noqa: N802
    """``T.Broadcast(value, lanes)`` (TVM's): a vector of ``lanes`` copies of ``value``
    (``lanes.LaneVector``)."""
    if isinstance(value, _bits.Words):
        raise TypeError(f"T.Broadcast: the value is a scalar, got {value!r}")
    return _lanes.broadcast(value, lanes)


# ---- random numbers (TileLang's T.rng_rand / T.rng_rand_float; T.rng_init is a statement) ----
def rng_rand():
    """The next 32-bit draw (a uint32) of this thread's generator (``T.rng_init``)."""
    return _N.Call("rng_rand", (), "uint32")


def rng_rand_float(bit=32, dist="uniform"):
    """A float of ``bit`` (32 or 64) bits drawn from this thread's generator: uniform in
    (0, 1] (``dist="uniform"``) or standard normal (``dist="normal"``)."""
    if isinstance(bit, bool) or bit not in (32, 64):
        raise ValueError(f"T.rng_rand_float: bit must be 32 or 64, got {bit!r}")
    if dist not in ("uniform", "normal"):
        raise ValueError(f"T.rng_rand_float: dist must be \"uniform\" or \"normal\", got {dist!r}")
    return _N.Call(f"rng_{dist}", (), f"float{bit}")


EXPRESSION_HELPERS = (
    "ceildiv", "cdiv", "align_up", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos",
    "floor", "ceil", "sigmoid", "abs", "max", "min", "clamp", "fma", "floordiv", "floormod",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right",
    "Cast", "cast", "if_then_else", "Select", "infinity", "max_value", "min_value",
    "get_thread_binding", "rng_rand", "rng_rand_float", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync",
    "tvm_warp_shuffle", "tvm_warp_shuffle_down", "tvm_warp_shuffle_up",
    "warp_reduce_sum", "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand",
    "warp_reduce_bitor", "any_sync", "all_sync", "ballot_sync", "ballot", "activemask",
    "syncthreads_count", "syncthreads_and", "syncthreads_or", "shuffle_elect",
    "tan", "atan", "acos", "asin", "sinh", "cosh", "erf", "log10", "log1p", "exp10", "pow",
    "fmod", "atan2", "round", "trunc", "isnan", "isinf", "isfinite", "truncdiv", "truncmod",
    "popcount", "clz", "likely", "get_lane_idx", "get_warp_idx", "get_warp_idx_sync",
    "get_warp_group_idx", "get_thread_bindings", "get_block_binding", "get_block_bindings",
    "get_thread_extent", "get_thread_extents", "get_block_extent", "get_block_extents",
    "reinterpret", "any_of", "all_of", "thread_binding", "launch_thread", "Broadcast",
    "index_to_coordinates", "Ramp", "Shuffle", "extract_lane", "add2", "sub2", "mul2", "fma2",
    "max2", "min2", "abs2",
    "atomic_load", "And", "Or", "Not", "EQ", "NE", "LT", "LE", "GT", "GE",
    *FAST_MATH,
    # TVM's libm forms, TileLang's IEEE forms, bit and warp-match intrinsics
    "asinh", "acosh", "atanh", "copysign", "hypot", "nextafter", "ldexp", "nearbyint", "fabs",
    *_N.IEEE_FORMS, "fast_rcp", "__ffs", "__fns", "match_any_sync", "match_all_sync",
    "tvm_warp_activemask", "block_rank_in_cluster",
    # TileLang 0.1.15's
    "fmul", "get_cluster_dims", "get_cluster_size", "get_cluster_id", "get_cluster_ids",
    "get_cluster_extent", "get_cluster_extents", "ignore_loop_partition",
)

# The helpers whose TileLang 0.1.15 (TVM) signature ends in ``span=None``: TVM's source
# location of the node it builds, debug metadata with no effect on the value.  The parser
# takes ``span=None`` (by keyword or as that last positional argument) on these and
# refuses any other value by name: tilecute's nodes carry the program's own lines.
TVM_SPAN = frozenset("""
    And Or Not EQ NE LT LE GT GE Broadcast Ramp Shuffle Select Cast cast abs fabs ceil floor
    trunc nearbyint round isfinite isinf isnan likely bitwise_and bitwise_or bitwise_xor
    bitwise_not shift_left shift_right ceildiv cdiv floordiv floormod truncdiv truncmod pow
    infinity max_value min_value reinterpret if_then_else extract_lane
""".split())
