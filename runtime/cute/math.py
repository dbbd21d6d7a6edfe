"""Math for generated kernels that CuTe DSL's operators and ``cute.math`` do not spell.

``truncdiv`` / ``truncmod`` are C's integer ``/`` and ``%`` (TVM's ``truncdiv`` /
``truncmod``, TileLang's ``T.truncdiv`` / ``T.truncmod``): the quotient rounded toward
zero and the remainder with the dividend's sign.  CuTe DSL's ``//`` floors (it is the
IR's ``floordiv``), so these go to ``arith.divsi`` / ``arith.remsi`` directly
(``divui`` / ``remui`` for unsigned types, where the two roundings agree).

TVM's libm forms CUDA has as functions (``hypot``, ``ldexp``, ``nextafter``), TileLang's
IEEE forms with a rounding mode (``ieee_add`` ... ``ieee_frsqrt``: CUDA's ``__fadd_rz``
..., PTX ``add.rz`` ..., and CUDA's half intrinsics for 16-bit floats), ``ffs`` / ``fns``
(CUDA's ``__ffs`` / ``__fns``) and ``match_sync`` (``__match_any_sync`` /
``__match_all_sync``, floats compared by their bits).

Usage in generated code::

    from tilecute.runtime.cute import math as tcmath
    q = tcmath.truncdiv(a, b)
    r = tcmath.truncmod(a, b)
    f = tcmath.reinterpret(i, cutlass.Float32)  # the bits of Int32 i as a Float32
    s = tcmath.ieee_add(x, y, "rz")             # x + y rounded toward zero
    h = tcmath.hypot(x, y)
    m = tcmath.match_sync(v, cutlass.Uint32(0xFFFFFFFF), "any")
    y = tcmath.select(i > 4, a, b)              # cutlass.select_, or i a Python int: a or b
    h = tcmath.as_float(i, cutlass.Float16)     # a runtime Float16, i a Python int rounded

For truncdiv / truncmod either operand may be a Python int; the other's type is the
result's (both ints of one type otherwise); with two Python ints (a constant-unrolled loop
index and a constant) the result is a Python int, C's quotient or remainder.
"""

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import arith
from cutlass._mlir.dialects import llvm as _llvm
from cutlass.cutlass_dsl import dsl_user_op


def _operands(a, b, loc, ip):
    kind = type(a) if isinstance(a, cutlass.Numeric) else type(b)
    return kind, kind(a).ir_value(loc=loc, ip=ip), kind(b).ir_value(loc=loc, ip=ip)


def _both_python(a, b) -> bool:
    return not isinstance(a, cutlass.Numeric) and not isinstance(b, cutlass.Numeric)


def _c_quotient(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@dsl_user_op
def truncdiv(a, b, *, loc=None, ip=None):
    """``a / b`` rounded toward zero (``-7 / 2 == -3``)."""
    if _both_python(a, b):
        return _c_quotient(int(a), int(b))
    kind, x, y = _operands(a, b, loc, ip)
    op = arith.divsi if kind.signed else arith.divui
    return kind(op(x, y, loc=loc, ip=ip))


@dsl_user_op
def truncmod(a, b, *, loc=None, ip=None):
    """``a - truncdiv(a, b) * b``: the sign of ``a`` (``-7 % 2 == -1``)."""
    if _both_python(a, b):
        return int(a) - _c_quotient(int(a), int(b)) * int(b)
    kind, x, y = _operands(a, b, loc, ip)
    op = arith.remsi if kind.signed else arith.remui
    return kind(op(x, y, loc=loc, ip=ip))


def select(cond, a, b):
    """``cutlass.select_(cond, a, b)`` where ``cond`` is a runtime value; a Python bool (a
    condition of constant-unrolled loop indices only, which CuTe DSL's ``select_`` refuses)
    picks ``a`` or ``b`` while the kernel is traced."""
    if not isinstance(cond, cutlass.Numeric):
        return a if cond else b
    return cutlass.select_(cond, a, b)


@dsl_user_op
def as_float(value, kind, *, loc=None, ip=None):
    """``kind(value)`` (a cutlass float type) as a runtime value where ``value`` is a Python
    one -- a constant-unrolled loop's index, or a cutlass value holding a Python number:
    CuTe DSL keeps a Python number unrounded (``Float16(2049)`` holds 2049.0, and arithmetic
    of such values runs in Python's double), where the cast rounds to ``kind`` (2048, as
    ``arith.constant`` makes it) and the arithmetic on it rounds at ``kind``'s width."""
    x = kind(value)
    if isinstance(x.value, (bool, int, float)):
        return kind(x.ir_value(loc=loc, ip=ip))
    return x


@dsl_user_op
def reinterpret(value, target, *, loc=None, ip=None):
    """The bits of ``value`` read as cutlass type ``target`` of the same width
    (``arith.bitcast``: TileLang's ``T.reinterpret``)."""
    return target(arith.bitcast(target.mlir_type, value.ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def fp8_from_int(value, kind, *, loc=None, ip=None):
    """An integer (or bool) ``value`` as fp8 ``kind`` through float32, as CUDA's
    ``__nv_fp8_e4m3(int)`` converts: MLIR folds ``truncf(sitofp(x))`` into one ``sitofp`` to
    the 8-bit float, which LLVM's NVPTX backend refuses, so the float32 passes through an
    opaque ``mov`` first."""
    wide = _asm_f32("mov.b32 $0, $1;", cutlass.Float32(value), loc=loc, ip=ip)
    return kind(wide)


# ---- float forms that CuTe DSL's math does not spell (TVM's libm forms, TileLang's IEEE
# forms): each takes and returns cutlass values of one float type ---------------------------
F16, BF16, F32, F64 = cutlass.Float16, cutlass.BFloat16, cutlass.Float32, cutlass.Float64
_HALF = (F16, BF16)
# TileLang's rounding modes -> CuTe DSL's (PTX .rn .rz .rp .rm)
_ROUNDING = {"rn": cute.math.RoundingMode.NEAREST_EVEN, "rz": cute.math.RoundingMode.ZERO,
             "ru": cute.math.RoundingMode.UP, "rd": cute.math.RoundingMode.DOWN}
_RN = _ROUNDING["rn"]
# (largest exponent, smallest normal exponent, precision) of float32 / float64
_FORMAT = {F32: (127, -126, 24, cutlass.Int32, 23), F64: (1023, -1022, 53, cutlass.Int64, 52)}


def _asm_f32(text: str, *args, loc=None, ip=None):
    """A float32 result of an inline PTX instruction on float32 operands (``$1`` ...)."""
    constraints = ",".join(["=f"] + ["f"] * len(args))
    return F32(_llvm.inline_asm(F32.mlir_type, [F32(a).ir_value(loc=loc, ip=ip) for a in args],
                                text, constraints, has_side_effects=False, is_align_stack=False,
                                asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


def _asm_b16(text: str, kind, *args, loc=None, ip=None):
    """A ``kind`` (Float16 / BFloat16) result of an inline PTX instruction on ``kind``
    operands, passed as their 16 bits."""
    bits = [reinterpret(kind(a), cutlass.Int16, loc=loc, ip=ip).ir_value(loc=loc, ip=ip)
            for a in args]
    constraints = ",".join(["=h"] + ["h"] * len(args))
    out = cutlass.Int16(_llvm.inline_asm(cutlass.Int16.mlir_type, bits, text, constraints,
                                         has_side_effects=False, is_align_stack=False,
                                         asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))
    return reinterpret(out, kind, loc=loc, ip=ip)


@dsl_user_op
def ieee_add(x, y, mode="rn", *, loc=None, ip=None):
    """``x + y`` rounded as ``mode`` says (CUDA's ``__fadd_<mode>`` / ``__dadd_<mode>``;
    ``add.<mode>``, which is never contracted into an fma).  16-bit: ``__hadd_rn``, the sum
    rounded once to nearest (the float32 sum of two 16-bit values is exact enough that
    rounding it again to 16 bits is the correctly rounded sum: 24 >= 2 * 11 + 2)."""
    kind = type(x)
    if kind in _HALF:
        return kind(cute.math.add(F32(x), F32(y), rounding=_RN, loc=loc, ip=ip))
    return cute.math.add(x, kind(y), rounding=_ROUNDING[mode], loc=loc, ip=ip)


@dsl_user_op
def ieee_sub(x, y, mode="rn", *, loc=None, ip=None):
    """``x - y`` as :func:`ieee_add` of ``x`` and ``-y`` (IEEE 754 defines the difference
    so: the same value, the same signed zeros in every rounding mode)."""
    return ieee_add(x, -type(x)(y), mode, loc=loc, ip=ip)


@dsl_user_op
def ieee_mul(x, y, mode="rn", *, loc=None, ip=None):
    """``x * y`` rounded as ``mode`` says (``mul.<mode>``); 16-bit: ``__hmul_rn`` (the
    float32 product of two 16-bit values is exact, rounded once)."""
    kind = type(x)
    if kind in _HALF:
        return kind(cute.math.mul(F32(x), F32(y), rounding=_RN, loc=loc, ip=ip))
    return cute.math.mul(x, kind(y), rounding=_ROUNDING[mode], loc=loc, ip=ip)


@dsl_user_op
def ieee_fmaf(x, y, z, mode="rn", *, loc=None, ip=None):
    """``x * y + z`` rounded once as ``mode`` says (``fma.<mode>``; CUDA's ``__fmaf_<mode>``
    / ``__fma_<mode>``); 16-bit: ``__hfma``, PTX ``fma.rn.f16`` / ``fma.rn.bf16``."""
    kind = type(x)
    if kind in _HALF:
        ptx = "fma.rn.f16 $0, $1, $2, $3;" if kind is F16 else "fma.rn.bf16 $0, $1, $2, $3;"
        return _asm_b16(ptx, kind, x, y, z, loc=loc, ip=ip)
    return cute.math.fma(x, kind(y), kind(z), rounding=_ROUNDING[mode], loc=loc, ip=ip)


@dsl_user_op
def ieee_fdiv(x, y, mode="rn", *, loc=None, ip=None):
    """``x / y`` rounded as ``mode`` says (``div.<mode>``).  16-bit: CUDA's ``__hdiv``
    as its headers compute it: float16, the float32 ``rcp.approx.ftz`` of ``y`` times
    ``x``, refined by one fma step where the rounded quotient is a nonzero value below
    0x008F; bfloat16, ``div.approx.f32`` (``y`` of magnitude 2**126 or more scaled by
    1/4 first, the quotient by 1/4 after); then rounded to 16 bits."""
    kind = type(x)
    if kind is F16:
        fa, fb = F32(x), F32(y)
        rcp = cute.arch.rcp_approx(fb, loc=loc, ip=ip)
        fv = rcp * fa
        v = F16(fv)
        magnitude = cute.math.abs(F32(v), loc=loc, ip=ip)
        refine = (magnitude < F32(143 * 2.0 ** -24)) & (magnitude > F32(0.0))
        err = cute.math.fma(-fb, fv, fa, rounding=_RN, loc=loc, ip=ip)
        refined = F16(cute.math.fma(rcp, err, fv, rounding=_RN, loc=loc, ip=ip))
        return cutlass.select_(refine, refined, v)
    if kind is BF16:
        fa, fb = F32(x), F32(y)
        big = cute.math.abs(fb, loc=loc, ip=ip) >= F32(2.0 ** 126)
        fb = cutlass.select_(big, fb * F32(0.25), fb)
        q = _asm_f32("div.approx.f32 $0, $1, $2;", fa, fb, loc=loc, ip=ip)
        scaled = cute.math.fma(q, F32(0.25), F32(-0.0), rounding=_RN, loc=loc, ip=ip)
        return BF16(cutlass.select_(big, scaled, q))
    return cute.math.div(x, kind(y), rounding=_ROUNDING[mode], loc=loc, ip=ip)


def _half_approx(fn: str, x, loc, ip):
    """CUDA's ``hrcp`` / ``hsqrt`` / ``hrsqrt``: the float32 ``<fn>.approx`` of the widened
    value (``.ftz`` for float16, as ``cuda_fp16.hpp``; none for bfloat16, whose values
    include float32's subnormals), rounded to the 16-bit dtype."""
    kind = type(x)
    ftz = ".ftz" if kind is F16 else ""
    return kind(_asm_f32(f"{fn}.approx{ftz}.f32 $0, $1;", F32(x), loc=loc, ip=ip))


@dsl_user_op
def ieee_frcp(x, mode="rn", *, loc=None, ip=None):
    """``1 / x`` rounded as ``mode`` says (``rcp.<mode>``); 16-bit: CUDA's ``hrcp``."""
    if type(x) in _HALF:
        return _half_approx("rcp", x, loc, ip)
    return cute.math.rcp(x, rounding=_ROUNDING[mode], loc=loc, ip=ip)


@dsl_user_op
def ieee_fsqrt(x, mode="rn", *, loc=None, ip=None):
    """``sqrt(x)`` rounded as ``mode`` says (``sqrt.<mode>``); 16-bit: CUDA's ``hsqrt``."""
    if type(x) in _HALF:
        return _half_approx("sqrt", x, loc, ip)
    return cute.math.sqrt(x, rounding=_ROUNDING[mode], loc=loc, ip=ip)


@dsl_user_op
def ieee_frsqrt(x, *, loc=None, ip=None):
    """``1 / sqrt(x)`` of a float32 rounded to nearest (CUDA's ``__frsqrt_rn``): the
    float64 ``1 / sqrt(x)`` (both rounded to nearest) rounded to float32; 16-bit: CUDA's
    ``hrsqrt``."""
    if type(x) in _HALF:
        return _half_approx("rsqrt", x, loc, ip)
    root = cute.math.sqrt(F64(x), rounding=_RN, loc=loc, ip=ip)
    return F32(cute.math.div(F64(1.0), root, rounding=_RN, loc=loc, ip=ip))


@dsl_user_op
def hypot(x, y, *, loc=None, ip=None):
    """``sqrt(x*x + y*y)`` without intermediate overflow (C's ``hypot``): +inf where either
    is infinite (even if the other is NaN), NaN where either is NaN.  float32: computed in
    float64 (exact squares, no overflow), rounded once more; float64: the larger magnitude
    times ``sqrt(1 + r*r)``, ``r`` the smaller over the larger; 16-bit: float32's."""
    kind = type(x)
    if kind in _HALF:
        return kind(hypot(F32(x), F32(y), loc=loc, ip=ip))
    y = kind(y)
    either_inf = cute.math.isinf(x) | cute.math.isinf(y)
    if kind is F32:
        a, b = F64(x), F64(y)
        h = F32(cute.math.sqrt(a * a + b * b, loc=loc, ip=ip))
    else:
        a, b = cute.math.abs(x, loc=loc, ip=ip), cute.math.abs(y, loc=loc, ip=ip)
        big, small = cutlass.select_(a > b, a, b), cutlass.select_(a > b, b, a)
        r = small / cutlass.select_(big > F64(0.0), big, F64(1.0))
        h = big * cute.math.sqrt(F64(1.0) + r * r, loc=loc, ip=ip)
        h = cutlass.select_(cute.math.isnan(x) | cute.math.isnan(y), x + y, h)
    return cutlass.select_(either_inf, kind(float("inf")), h)


@dsl_user_op
def ldexp(x, n, *, loc=None, ip=None):
    """``x * 2**n`` (C's ``ldexp``; ``n`` an Int32), exact where it stays normal and rounded
    once where it underflows or overflows: ``x`` is scaled by at most two extreme powers
    of two first and ``n`` clamped (musl's ``scalbn``), then multiplied by ``2**n`` built
    from its bits.  16-bit: float32's, rounded once more (exact in float32 first)."""
    kind = type(x)
    if kind in _HALF:
        return kind(ldexp(F32(x), n, loc=loc, ip=ip))
    emax, emin, prec, bits_type, shift = _FORMAT[kind]
    n = cutlass.Int32(n)
    y = x
    for _ in range(2):  # at most twice toward either end, as scalbn
        up, down = n > emax, n < emin
        y = cutlass.select_(up, y * kind(2.0 ** emax), y)
        n = cutlass.select_(up, n - emax, n)
        y = cutlass.select_(down, y * kind(2.0 ** (emin + prec)), y)
        n = cutlass.select_(down, n - (emin + prec), n)
    n = cutlass.max(cutlass.min(n, cutlass.Int32(emax)), cutlass.Int32(emin))
    scale = reinterpret(bits_type(n + (emax)) << (shift), kind, loc=loc, ip=ip)
    return y * scale


@dsl_user_op
def nextafter(x, y, *, loc=None, ip=None):
    """The representable value after ``x`` toward ``y`` (C's ``nextafter``): ``x + y``
    (a NaN) where either is NaN, ``y`` where they are equal, the smallest subnormal with
    ``y``'s sign after a zero, else ``x``'s bits one up (away from zero) or one down."""
    kind = type(x)
    y = kind(y)
    _, _, _, bits_type, shift = _FORMAT[kind]
    sign = bits_type(1) << (shift + (11 if kind is F64 else 8))
    ux, uy = reinterpret(x, bits_type, loc=loc, ip=ip), reinterpret(y, bits_type, loc=loc, ip=ip)
    away = (y > x) == (x > kind(0.0))
    step = cutlass.select_(away, ux + bits_type(1), ux - bits_type(1))
    step = cutlass.select_(x == kind(0.0), (uy & sign) | bits_type(1), step)
    out = reinterpret(step, kind, loc=loc, ip=ip)
    out = cutlass.select_(x == y, y, out)
    return cutlass.select_(cute.math.isnan(x) | cute.math.isnan(y), x + y, out)


# ---- bits and warp matches --------------------------------------------------------------
_SIGNED = {cutlass.Uint32: cutlass.Int32, cutlass.Uint64: cutlass.Int64}


@dsl_user_op
def ffs(x, *, loc=None, ip=None):
    """CUDA's ``__ffs`` / ``__ffsll``: the one-based position of the lowest set bit of a
    32/64-bit integer, 0 for 0 (the width minus the leading zeros of ``x & -x``); an Int32."""
    kind = _SIGNED.get(type(x), type(x))
    v = reinterpret(x, kind, loc=loc, ip=ip) if kind is not type(x) else x
    lowest = v & (kind(0) - v)
    width = 64 if kind is cutlass.Int64 else 32
    return cutlass.Int32(width) - cutlass.Int32(cute.arch.clz(lowest, loc=loc, ip=ip))


@dsl_user_op
def fns(mask, base, offset, *, loc=None, ip=None):
    """CUDA's ``__fns`` (PTX ``fns.b32``): the position of the ``offset``-th set bit of
    ``mask`` from bit ``base`` (downward for a negative ``offset``), 0xFFFFFFFF if none."""
    args = [cutlass.Int32(reinterpret(cutlass.Uint32(mask), cutlass.Int32, loc=loc, ip=ip)),
            cutlass.Int32(base), cutlass.Int32(offset)]
    out = _llvm.inline_asm(cutlass.Int32.mlir_type, [a.ir_value(loc=loc, ip=ip) for a in args],
                           "fns.b32 $0, $1, $2, $3;", "=r,r,r,r", has_side_effects=False,
                           is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT,
                           loc=loc, ip=ip)
    return reinterpret(cutlass.Int32(out), cutlass.Uint32, loc=loc, ip=ip)


@dsl_user_op
def match_sync(value, mask, kind: str, *, loc=None, ip=None):
    """CUDA's ``__match_any_sync`` / ``__match_all_sync`` (``match.{any,all}.sync``): a
    float compared by its bits (``b32`` / ``b64``), as CUDA's float overloads; a Uint32."""
    if type(value) in (F32, F64):
        value = reinterpret(value, cutlass.Int32 if type(value) is F32 else cutlass.Int64,
                            loc=loc, ip=ip)
    mask = reinterpret(cutlass.Uint32(mask), cutlass.Int32, loc=loc, ip=ip)
    return cute.arch.match_sync(mask, value, kind, loc=loc, ip=ip)
