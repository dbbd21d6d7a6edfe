"""A fifth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at *numeric semantics*, where a wrong answer is silent: integer ``//``
and ``%`` on negative operands (TVM's ``floordiv``/``floormod``) beside ``T.truncdiv`` /
``T.truncmod``, division by constants, shifts and bitwise operators on signed and
unsigned integers of 8 to 64 bits, 8- and 16-bit arithmetic under C's integer
promotions, int32 wrap-around against int64 arithmetic, float -> int casts (toward zero),
int -> float and fp32 -> fp16 / bf16 / fp8 rounding (nearest even; fp8 saturating to its
largest finite value, as TileLang's ``__NV_SATFINITE`` conversions), ``T.max`` /
``T.min`` / ``T.abs`` / ``T.clamp`` on integers (unsigned compares), halves and bf16,
NaN in ``T.max`` and ``T.reduce_max`` (NaN-quiet unless ``nan_propagate``), math on
halves (computed in float32 and rounded once), Python scalars mixed into typed
expressions (TVM's promotion), ``T.if_then_else`` with mixed branches and bool tensors,
reductions of int8 / int16 / uint8 (accumulated in the output's dtype), ``T.cumsum`` on
integers, atomics on float16 / bfloat16 / int32.
``tests/test_unseen_programs5.py`` builds each to an sm_90a cubin on the CPU and, on a
GPU, compares it with torch / numpy written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T

N = 256


# ---- integer division ----------------------------------------------------------------------
def int_div_mod(dtype=T.int32, n=N):
    """``a // b`` and ``a % b`` of integer expressions are TVM's floordiv / floormod (the
    quotient rounded toward minus infinity, the remainder with the divisor's sign:
    ``-7 // 2 == -4``, ``-7 % 2 == 1``, ``7 % -2 == -1``); ``T.floordiv`` / ``T.floormod``
    are the same; ``T.truncdiv`` / ``T.truncmod`` are C's ``/`` and ``%`` (toward zero, the
    dividend's sign).  Rows 0..5 of O in that order."""

    @T.prim_func
    def div_mod(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((6, n), dtype)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            a = T.alloc_fragment((128,), dtype)
            b = T.alloc_fragment((128,), dtype)
            T.copy(A[bx * 128], a)
            T.copy(B[bx * 128], b)
            for i in T.Parallel(128):
                O[0, bx * 128 + i] = a[i] // b[i]
                O[1, bx * 128 + i] = a[i] % b[i]
                O[2, bx * 128 + i] = T.truncdiv(a[i], b[i])
                O[3, bx * 128 + i] = T.truncmod(a[i], b[i])
                O[4, bx * 128 + i] = T.floordiv(a[i], b[i])
                O[5, bx * 128 + i] = T.floormod(a[i], b[i])
    return div_mod


DIVISORS = (1, 2, 3, 7, 8, 64, -3, -8)


def int_div_by_constants(dtype=T.int32, n=N):
    """Division by Python constants (the constant takes the dividend's dtype): row 2k is
    ``a // DIVISORS[k]``, row 2k+1 ``a % DIVISORS[k]`` (floor semantics, also for powers
    of two and negative divisors); the last two rows ``T.truncdiv(a, 8)`` and
    ``T.truncmod(a, 8)``."""
    rows = 2 * len(DIVISORS) + 2

    @T.prim_func
    def div_const(A: T.Tensor((n,), dtype), O: T.Tensor((rows, n), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            t = T.get_thread_binding()
            x = A[bx * 128 + t]
            O[0, bx * 128 + t] = x // 1
            O[1, bx * 128 + t] = x % 1
            O[2, bx * 128 + t] = x // 2
            O[3, bx * 128 + t] = x % 2
            O[4, bx * 128 + t] = x // 3
            O[5, bx * 128 + t] = x % 3
            O[6, bx * 128 + t] = x // 7
            O[7, bx * 128 + t] = x % 7
            O[8, bx * 128 + t] = x // 8
            O[9, bx * 128 + t] = x % 8
            O[10, bx * 128 + t] = x // 64
            O[11, bx * 128 + t] = x % 64
            O[12, bx * 128 + t] = x // -3
            O[13, bx * 128 + t] = x % -3
            O[14, bx * 128 + t] = x // -8
            O[15, bx * 128 + t] = x % -8
            O[16, bx * 128 + t] = T.truncdiv(x, 8)
            O[17, bx * 128 + t] = T.truncmod(x, 8)
    return div_const


def unsigned_div_mod(dtype=T.uint32, n=N):
    """Unsigned ``//`` and ``%`` (floor and trunc agree), on values with the top bit set
    (a uint32 of 3e9 is not negative), and by the constants 7 and 16."""

    @T.prim_func
    def udiv(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((4, n), dtype)):
        with T.Kernel(n // 64, threads=64) as bx:
            for i in T.Parallel(64):
                O[0, bx * 64 + i] = A[bx * 64 + i] // B[bx * 64 + i]
                O[1, bx * 64 + i] = A[bx * 64 + i] % B[bx * 64 + i]
                O[2, bx * 64 + i] = A[bx * 64 + i] // 7
                O[3, bx * 64 + i] = A[bx * 64 + i] % 16
    return udiv


# ---- bits ---------------------------------------------------------------------------------
def shifts_and_bits(dtype=T.int32, n=N):
    """Shifts and bitwise operators at the operand's width (the int32 shift amount
    converts to it, as TVM's binary-op type matching): ``>>`` is arithmetic on signed
    types and logical on unsigned; ``<<`` wraps at the stored width; ``~`` flips every
    bit.  Rows: a >> s, a << s, a & m, a | m, a ^ m, ~a, a >> 3, a << 1."""

    @T.prim_func
    def bits(A: T.Tensor((n,), dtype), S: T.Tensor((n,), T.int32), M: T.Tensor((n,), dtype),
             O: T.Tensor((8, n), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            a_s = T.alloc_shared((128,), dtype)
            T.copy(A[bx * 128], a_s)
            for i in T.Parallel(128):
                g = bx * 128 + i
                O[0, g] = a_s[i] >> S[g]
                O[1, g] = a_s[i] << S[g]
                O[2, g] = a_s[i] & M[g]
                O[3, g] = a_s[i] | M[g]
                O[4, g] = a_s[i] ^ M[g]
                O[5, g] = ~a_s[i]
                O[6, g] = a_s[i] >> 3
                O[7, g] = a_s[i] << 1
    return bits


def narrow_promotion(dtype=T.uint8, n=N):
    """8- and 16-bit arithmetic as TileLang's CUDA C computes it, in int (C's integer
    promotions), wrapping only where the value is stored or converted at its own width:
    ``(a + b) >> 1`` is the average of two uint8 pixels (200 and 100 give 150, not the
    wrapped 44 >> 1); ``(a * b) // 7`` divides the whole product; ``T.max(a + b, c)``
    compares the whole sum; ``(a * c) >> 8`` is the high byte of the whole product (an
    alpha blend); the stores then keep the low bits.  Rows of O (dtype) and of W
    (int32): the same expressions, W's converted whole."""

    @T.prim_func
    def promote(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype),
                O: T.Tensor((4, n), dtype), W: T.Tensor((4, n), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                O[0, g] = (A[g] + B[g]) >> 1
                O[1, g] = (A[g] * B[g]) // 7
                O[2, g] = T.max(A[g] + B[g], C[g])
                O[3, g] = (A[g] * C[g]) >> 8
                W[0, g] = T.Cast(T.int32, (A[g] + B[g]) >> 1)
                W[1, g] = T.Cast(T.int32, (A[g] * B[g]) // 7)
                W[2, g] = T.Cast(T.int32, T.max(A[g] + B[g], C[g]))
                W[3, g] = T.Cast(T.int32, (A[g] * C[g]) >> 8)
    return promote


# ---- overflow ----------------------------------------------------------------------------
def int32_wrap_int64_exact(n=N):
    """int32 arithmetic wraps (two's complement: ``a * b`` and ``a + b`` of large values
    keep the low 32 bits), the same values widened first (``T.Cast("int64", a) * b``, a
    ``T.int64`` local) are exact; int64 shifts past bit 31; a uint32 sum wraps at 2**32."""

    @T.prim_func
    def wrap(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32), U: T.Tensor((n,), T.uint32),
             O32: T.Tensor((3, n), T.int32), O64: T.Tensor((4, n), T.int64),
             OU: T.Tensor((n,), T.uint32)):
        with T.Kernel(n // 128, threads=128) as bx:
            t = T.get_thread_binding()
            g = bx * 128 + t
            w = T.alloc_var(T.int64)
            O32[0, g] = A[g] * B[g]
            O32[1, g] = A[g] + B[g]
            O32[2, g] = A[g] * 65536
            O64[0, g] = T.Cast(T.int64, A[g]) * B[g]
            w = T.Cast(T.int64, A[g])
            w = w * 3 + B[g]
            O64[1, g] = w
            O64[2, g] = T.Cast(T.int64, A[g]) << 20
            O64[3, g] = (T.Cast(T.int64, B[g]) * 1000003) // -977
            OU[g] = U[g] + U[g]
    return wrap


# ---- casts --------------------------------------------------------------------------------
def float_to_int_casts(n=N):
    """float -> integer conversions round toward zero (C's conversion: ``-2.7`` is -2,
    ``2.5`` is 2), for float32 into int32 / int16 / int8 / int64 / uint8 and float16 /
    bfloat16 into int32; values in range (out-of-range is C's undefined behaviour)."""

    @T.prim_func
    def f2i(F: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16),
            Bf: T.Tensor((n,), T.bfloat16), O32: T.Tensor((4, n), T.int32),
            O16: T.Tensor((n,), T.int16), O8: T.Tensor((n,), T.int8), O64: T.Tensor((n,), T.int64),
            OU8: T.Tensor((n,), T.uint8)):
        with T.Kernel(n // 128, threads=128) as bx:
            f = T.alloc_fragment((128,), T.float32)
            T.copy(F[bx * 128], f)
            for i in T.Parallel(128):
                g = bx * 128 + i
                O32[0, g] = T.Cast(T.int32, f[i])
                O32[1, g] = T.Cast(T.int32, H[g])
                O32[2, g] = T.Cast(T.int32, Bf[g])
                O32[3, g] = T.Cast(T.int32, f[i] * 1000.0)
                O16[g] = T.Cast(T.int16, f[i] * 100.0)
                O8[g] = T.Cast(T.int8, f[i])
                O64[g] = T.Cast(T.int64, f[i] * 1.0e7)
                OU8[g] = T.Cast(T.uint8, T.abs(f[i]) * 2.0)
    return f2i


def int_to_float_casts(n=N):
    """integer -> float conversions round to nearest even: int32 16777217 is float32
    16777216; int64 and uint32 values past 2**31 convert as the unsigned / wide value (a
    uint32 of 3e9 is 3e9, not negative); int32 into float16 / bfloat16 rounds once."""

    @T.prim_func
    def i2f(I: T.Tensor((n,), T.int32), L: T.Tensor((n,), T.int64), U: T.Tensor((n,), T.uint32),
            S: T.Tensor((n,), T.int32), OF: T.Tensor((3, n), T.float32),
            OH: T.Tensor((n,), T.float16), OB: T.Tensor((n,), T.bfloat16)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                OF[0, g] = T.Cast(T.float32, I[g])
                OF[1, g] = T.Cast(T.float32, L[g])
                OF[2, g] = T.Cast(T.float32, U[g])
                OH[g] = T.Cast(T.float16, S[g])
                OB[g] = T.Cast(T.bfloat16, S[g])
    return i2f


def half_rounding(n=N):
    """float32 -> float16 and -> bfloat16 round to nearest, ties to even; float16 past
    65504 + half an ulp is inf, subnormals are kept; NaN stays NaN; float16 -> bfloat16
    goes through float32 (one rounding)."""

    @T.prim_func
    def rnd(F: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16),
            OH: T.Tensor((n,), T.float16), OB: T.Tensor((n,), T.bfloat16),
            OHB: T.Tensor((n,), T.bfloat16)):
        with T.Kernel(n // 128, threads=128) as bx:
            f = T.alloc_fragment((128,), T.float32)
            h = T.alloc_fragment((128,), T.float16)
            T.copy(F[bx * 128], f)
            for i in T.Parallel(128):
                h[i] = f[i]
            T.copy(h, OH[bx * 128])
            for i in T.Parallel(128):
                OB[bx * 128 + i] = T.Cast(T.bfloat16, f[i])
                OHB[bx * 128 + i] = T.Cast(T.bfloat16, H[bx * 128 + i])
    return rnd


def fp8_casts(n=N):
    """float32 -> float8_e4m3 / float8_e5m2 round to nearest even and saturate to the
    largest finite value (TileLang's conversions are ``__NV_SATFINITE``: 1000 is 448 in
    e4m3, 1e6 is 57344 in e5m2; NaN stays NaN); fp8 -> float32 / float16 are exact; a
    float16 -> e4m3 cast rounds once."""

    @T.prim_func
    def f8(F: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16),
           E4: T.Tensor((n,), T.float8_e4m3), E5: T.Tensor((n,), T.float8_e5m2),
           E4h: T.Tensor((n,), T.float8_e4m3), Back: T.Tensor((2, n), T.float32),
           BackH: T.Tensor((n,), T.float16)):
        with T.Kernel(n // 128, threads=128) as bx:
            f = T.alloc_fragment((128,), T.float32)
            e4 = T.alloc_fragment((128,), T.float8_e4m3)
            T.copy(F[bx * 128], f)
            for i in T.Parallel(128):
                e4[i] = f[i]
            T.copy(e4, E4[bx * 128])
            for i in T.Parallel(128):
                g = bx * 128 + i
                E5[g] = T.Cast(T.float8_e5m2, f[i])
                E4h[g] = T.Cast(T.float8_e4m3, H[g])
                Back[0, g] = T.Cast(T.float32, e4[i])
                Back[1, g] = T.Cast(T.float32, E5[g])
                BackH[g] = T.Cast(T.float16, e4[i])
    return f8


# ---- min / max / abs / clamp --------------------------------------------------------------
def int_minmax_abs_clamp(dtype=T.int8, lo=-5, hi=7, n=N):
    """``T.max`` / ``T.min`` on integers compare as the dtype (unsigned: a uint8 200 is
    greater than 100; a uint32 3e9 than 5); ``T.abs`` is C's ``abs`` of the promoted value
    stored at the width (int8 -128 stays -128); ``T.clamp(x, lo, hi)`` is ``min(max(x, lo),
    hi)``.  Rows: max, min, abs, clamp, max(a, 0)."""

    @T.prim_func
    def mm(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((5, n), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            a = T.alloc_fragment((128,), dtype)
            T.copy(A[bx * 128], a)
            for i in T.Parallel(128):
                g = bx * 128 + i
                O[0, g] = T.max(a[i], B[g])
                O[1, g] = T.min(a[i], B[g])
                O[2, g] = T.abs(a[i])
                O[3, g] = T.clamp(a[i], lo, hi)
                O[4, g] = T.max(a[i], 0)
    return mm


def float_minmax_nan(dtype=T.float32, n=N):
    """``T.max`` / ``T.min`` on floats are C's ``fmaxf`` / ``fminf`` (CUDA's ``__hmax`` /
    ``__hmin`` on halves): NaN-quiet, a NaN operand gives the other; ``T.clamp(nan, -1, 1)``
    is NaN (TileLang 0.1.15's ``tl::clamp`` keeps a NaN ``x``, as ``torch.clamp``);
    ``T.abs(-0.0)`` is +0.0.  Rows: max, min, clamp, abs."""

    @T.prim_func
    def fmm(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((4, n), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            a = T.alloc_fragment((128,), dtype)
            b = T.alloc_fragment((128,), dtype)
            T.copy(A[bx * 128], a)
            T.copy(B[bx * 128], b)
            for i in T.Parallel(128):
                O[0, bx * 128 + i] = T.max(a[i], b[i])
                O[1, bx * 128 + i] = T.min(a[i], b[i])
                O[2, bx * 128 + i] = T.clamp(a[i], -1.0, 1.0)
                O[3, bx * 128 + i] = T.abs(a[i])
    return fmm


def reduce_nan(dtype=T.float32, rows=8, cols=64, nan_propagate=False):
    """``T.reduce_max`` / ``T.reduce_min`` / ``T.reduce_absmax`` of rows holding NaNs:
    NaN-quiet by default (the row's largest number), NaN when ``nan_propagate=True``
    (float16 / bfloat16 only, TileLang's ``__hmax_nan``); ``clear=False`` folds the
    result into what the output held."""
    kw = {"nan_propagate": True} if nan_propagate else {}

    @T.prim_func
    def rnan(A: T.Tensor((rows, cols), dtype), O: T.Tensor((4, rows), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((rows, cols), dtype)
            mx = T.alloc_fragment((rows,), dtype)
            mn = T.alloc_fragment((rows,), dtype)
            am = T.alloc_fragment((rows,), dtype)
            acc = T.alloc_fragment((rows,), dtype)
            T.copy(A, a)
            T.reduce_max(a, mx, dim=1, **kw)
            T.reduce_min(a, mn, dim=1, **kw)
            T.reduce_absmax(a, am, dim=1, **kw)
            for i in T.Parallel(rows):
                acc[i] = 2.0
            T.reduce_max(a, acc, dim=1, clear=False, **kw)
            for i in T.Parallel(rows):
                O[0, i] = mx[i]
                O[1, i] = mn[i]
                O[2, i] = am[i]
                O[3, i] = acc[i]
    return rnan


# ---- float math on halves -----------------------------------------------------------------
def half_math(dtype=T.float16, n=N):
    """TileLang's math on float16 / bfloat16 (``hexp``, ``hlog`` ... or the float
    function of the widened value) is the float32 function rounded once to the dtype.
    Rows: exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, x * rsqrt(x * x + 1)."""

    @T.prim_func
    def hm(X: T.Tensor((n,), dtype), P: T.Tensor((n,), dtype), O: T.Tensor((9, n), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            x = T.alloc_fragment((128,), dtype)
            p = T.alloc_fragment((128,), dtype)
            T.copy(X[bx * 128], x)
            T.copy(P[bx * 128], p)
            for i in T.Parallel(128):
                g = bx * 128 + i
                O[0, g] = T.exp(x[i])
                O[1, g] = T.exp2(x[i])
                O[2, g] = T.log(p[i])
                O[3, g] = T.log2(p[i])
                O[4, g] = T.sqrt(p[i])
                O[5, g] = T.rsqrt(p[i])
                O[6, g] = T.tanh(x[i])
                O[7, g] = T.sigmoid(x[i])
                O[8, g] = x[i] * T.rsqrt(x[i] * x[i] + T.cast(1, dtype))
    return hm


# ---- mixed dtypes --------------------------------------------------------------------------
def mixed_promotion(n=N):
    """TVM's promotion with Python scalars: an int32 against a Python float is float32
    (``i + 0.5``, ``i * 0.25``); a float16 against a Python float is float32 too (TileLang
    0.1.15: ``h + 0.1`` is ``(half_t)((float)h + 0.1f)``); a float16 against an int32
    expression converts the int to float16; int8 against a Python float is float32; an
    int32 expression divided by a float is a float division."""

    @T.prim_func
    def mix(I: T.Tensor((n,), T.int32), H: T.Tensor((n,), T.float16), C: T.Tensor((n,), T.int8),
            OF: T.Tensor((4, n), T.float32), OH: T.Tensor((3, n), T.float16)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                OF[0, g] = I[g] + 0.5
                OF[1, g] = I[g] * 0.25
                OF[2, g] = C[g] * 0.5
                OF[3, g] = (I[g] - 3) / 4.0
                OH[0, g] = H[g] * 2
                OH[1, g] = H[g] + 0.1
                OH[2, g] = H[g] + I[g]
    return mix


def if_then_else_mixed(n=N):
    """``T.if_then_else`` with branches of different dtypes promotes them as a binary
    operator (int32 and a Python float: float32; float16 and a Python int: float16); a
    bool tensor element is a condition; a bool store holds a comparison."""

    @T.prim_func
    def ite(I: T.Tensor((n,), T.int32), H: T.Tensor((n,), T.float16), Mk: T.Tensor((n,), T.bool),
            OF: T.Tensor((n,), T.float32), OH: T.Tensor((n,), T.float16),
            OI: T.Tensor((n,), T.int8), OB: T.Tensor((n,), T.bool)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                OF[g] = T.if_then_else(I[g] > 0, I[g], -0.5)
                OH[g] = T.if_then_else(Mk[g], H[g], 3)
                OI[g] = T.if_then_else(Mk[g] and I[g] < 0, T.Cast(T.int8, I[g]), T.int8(-1))
                OB[g] = (I[g] % 3 == 0) != Mk[g]
    return ite


# ---- reductions, scans, atomics on narrow types ---------------------------------------------
def int_reductions(rows=8, cols=128):
    """Reductions accumulate in the output's dtype (each element converted to it):
    int8 rows summed into int32 are exact, into int8 they wrap; int16 summed into int32;
    uint8 summed into int32 zero-extends (200 counts 200); ``T.reduce_max`` of int8 and
    ``T.reduce_min`` of uint8 compare as their types; ``T.reduce_absmax`` of int8; bitwise
    or / xor of int32 rows.  Rows of O (int32) and O8 (int8) as listed."""

    @T.prim_func
    def ired(A: T.Tensor((rows, cols), T.int8), B: T.Tensor((rows, cols), T.int16),
             U: T.Tensor((rows, cols), T.uint8), W: T.Tensor((rows, cols), T.int32),
             O: T.Tensor((6, rows), T.int32), O8: T.Tensor((3, rows), T.int8),
             OU: T.Tensor((rows,), T.uint8)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((rows, cols), T.int8)
            b = T.alloc_fragment((rows, cols), T.int16)
            u = T.alloc_fragment((rows, cols), T.uint8)
            w = T.alloc_fragment((rows, cols), T.int32)
            s32 = T.alloc_fragment((rows,), T.int32)
            s16 = T.alloc_fragment((rows,), T.int32)
            su = T.alloc_fragment((rows,), T.int32)
            bor = T.alloc_fragment((rows,), T.int32)
            bxor = T.alloc_fragment((rows,), T.int32)
            s8 = T.alloc_fragment((rows,), T.int8)
            mx8 = T.alloc_fragment((rows,), T.int8)
            am8 = T.alloc_fragment((rows,), T.int8)
            mnu = T.alloc_fragment((rows,), T.uint8)
            T.copy(A, a)
            T.copy(B, b)
            T.copy(U, u)
            T.copy(W, w)
            T.reduce_sum(a, s32, dim=1)
            T.reduce_sum(b, s16, dim=1)
            T.reduce_sum(u, su, dim=1)
            T.reduce_bitor(w, bor, dim=1)
            T.reduce_bitxor(w, bxor, dim=1)
            T.reduce_sum(a, s8, dim=1)
            T.reduce_max(a, mx8, dim=1)
            T.reduce_absmax(a, am8, dim=1)
            T.reduce_min(u, mnu, dim=1)
            for i in T.Parallel(rows):
                O[0, i] = s32[i]
                O[1, i] = s16[i]
                O[2, i] = su[i]
                O[3, i] = bor[i]
                O[4, i] = bxor[i]
                O[5, i] = T.Cast(T.int32, mx8[i])
                O8[0, i] = s8[i]
                O8[1, i] = mx8[i]
                O8[2, i] = am8[i]
                OU[i] = mnu[i]
    return ired


def int_cumsum(rows=4, cols=64):
    """``T.cumsum`` of int32 tiles is exact (a shared tile along dim 1 forwards, a fragment
    along dim 1 reversed), negative values included."""

    @T.prim_func
    def icum(A: T.Tensor((rows, cols), T.int32), F: T.Tensor((rows, cols), T.int32),
             R: T.Tensor((rows, cols), T.int32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), T.int32)
            f = T.alloc_fragment((rows, cols), T.int32)
            T.copy(A, s)
            T.cumsum(s, dim=1)
            T.copy(s, F)
            T.copy(A, f)
            T.cumsum(f, dim=1, reverse=True)
            T.copy(f, R)
    return icum


def narrow_atomics(n=1024, bins=16):
    """``T.atomic_add`` of float16, bfloat16, float32 and int32 values into bins (the
    values are small integers, so every order of the adds gives the same exact sums);
    ``T.atomic_max`` / ``T.atomic_min`` of int32 and float32 (negative values)."""

    @T.prim_func
    def atom(Idx: T.Tensor((n,), T.int32), V: T.Tensor((n,), T.int32),
             SH: T.Tensor((bins,), T.float16), SB: T.Tensor((bins,), T.bfloat16),
             SF: T.Tensor((bins,), T.float32), SI: T.Tensor((bins,), T.int32),
             MX: T.Tensor((bins,), T.int32), MN: T.Tensor((bins,), T.int32),
             MXF: T.Tensor((bins,), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                k = Idx[g]
                T.atomic_add(SH[k], T.Cast(T.float16, V[g]))
                T.atomic_add(SB[k], T.Cast(T.bfloat16, V[g]))
                T.atomic_add(SF[k], T.Cast(T.float32, V[g]))
                T.atomic_add(SI[k], V[g])
                T.atomic_max(MX[k], V[g])
                T.atomic_min(MN[k], V[g])
                T.atomic_max(MXF[k], T.Cast(T.float32, V[g]) * 0.5)
    return atom


PROGRAMS = {
    "int_div_mod": int_div_mod, "int_div_by_constants": int_div_by_constants,
    "unsigned_div_mod": unsigned_div_mod, "shifts_and_bits": shifts_and_bits,
    "narrow_promotion": narrow_promotion, "int32_wrap_int64_exact": int32_wrap_int64_exact,
    "float_to_int_casts": float_to_int_casts, "int_to_float_casts": int_to_float_casts,
    "half_rounding": half_rounding, "fp8_casts": fp8_casts,
    "int_minmax_abs_clamp": int_minmax_abs_clamp, "float_minmax_nan": float_minmax_nan,
    "reduce_nan": reduce_nan, "half_math": half_math, "mixed_promotion": mixed_promotion,
    "if_then_else_mixed": if_then_else_mixed, "int_reductions": int_reductions,
    "int_cumsum": int_cumsum, "narrow_atomics": narrow_atomics,
}
