"""Per-thread random numbers for generated kernels (TileLang's ``T.rng_init``,
``T.rng_rand`` and ``T.rng_rand_float``).

The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC'11) with cuRAND's state and seeding semantics for
``curandStatePhilox4_32_10_t``, which is what TileLang's CUDA backend calls:

* the key is the 64-bit seed (low word, high word);
* the 128-bit counter starts at 0; ``subsequence`` is added to its high 64 bits
  (cuRAND's ``skipahead_sequence``) and ``offset // 4`` to its low 64 bits, carrying
  into the high ones; ``offset % 4`` draws of the first block are skipped (cuRAND's
  ``skipahead``);
* each Philox block (10 rounds of the counter under the key, the key bumped by the Weyl
  constants between rounds) gives four 32-bit draws, in order; after the fourth the
  counter is incremented (128-bit) and the next block computed.

``uniform`` is ``x * 2**-32 + 2**-33`` of one draw (a float32 in (0, 1]);
``uniform_double`` is ``z * 2**-53 + 2**-54`` of the 53-bit ``z = x ^ (y << 21)`` of two
draws; ``normal`` is the Box-Muller transform of two draws (``u`` as ``uniform``,
``v = y * 2pi * 2**-32 + pi * 2**-32``, ``sqrt(-2 log u)`` times ``sin v``, and
``cos v`` on the next call, which draws nothing); ``normal_double`` the same over four
draws (``u`` as ``uniform_double`` of the first two, ``v`` in (0, 2] from the last two,
times ``sin(pi v)`` / ``cos(pi v)``).  These are cuRAND's formulas; the integer draws
match cuRAND's bit for bit, the floats up to the last bits of the transcendental
functions (CuTe DSL's ``sin``/``cos``/``log``, not CUDA's ``sinpi``/``__sinf``).

The state is one thread's ``WORDS`` 32-bit registers (a register tensor the kernel
allocates once, ``tc_rng``)::

    0..3  counter   4..5 key   6..9 the current block   10 draws taken from it
    11    a float32 normal is pending (the raw draws in 12..13)
    14    a float64 normal is pending (the raw draws in 15..18)

Usage in generated code::

    from tilecute.runtime.cute import rng as tcrng
    tc_rng = cute.make_rmem_tensor((tcrng.WORDS,), cutlass.Uint32)
    tcrng.init(tc_rng, seed, subsequence, offset)   # Int64 (or Int32) values
    r = tcrng.rand(tc_rng)                          # Uint32
    f = tcrng.uniform(tc_rng)                       # Float32; uniform_double: Float64
    g = tcrng.normal(tc_rng)                        # Float32; normal_double: Float64
"""

import math
import struct

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import arith
from cutlass.cutlass_dsl import dsl_user_op

WORDS = 19
CTR, KEY, OUT, IDX, NFLAG, NRAW, DFLAG, DRAW = 0, 4, 6, 10, 11, 12, 14, 15

# Philox4x32's multipliers and Weyl key increments
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


INV_2POW32 = 2.0 ** -32
INV_2POW32_2PI = _f32(_f32(2.3283064e-10) * _f32(6.2831855))  # cuRAND's float constant
INV_2POW53 = 2.0 ** -53


def _u32(x):
    return cutlass.Uint32(x)


def _bit(cond):
    """1 where ``cond`` holds, else 0 (a Uint32)."""
    return cutlass.Uint32(cutlass.select_(cond, _u32(1), _u32(0)))


@dsl_user_op
def _mulhilo(a: int, b, *, loc=None, ip=None):
    """The low and high words of the 64-bit product of the 32-bit ``a`` and ``b``."""
    op = arith.MulUIExtendedOp(_u32(a).ir_value(loc=loc, ip=ip), _u32(b).ir_value(loc=loc, ip=ip),
                               loc=loc, ip=ip)
    return cutlass.Uint32(op.results[0]), cutlass.Uint32(op.results[1])


def _philox(c, k):
    """The Philox4x32-10 block of counter ``c`` (4 words) under key ``k`` (2 words)."""
    c0, c1, c2, c3 = c
    k0, k1 = k
    for r in range(ROUNDS):
        lo0, hi0 = _mulhilo(M0, c0)
        lo1, hi1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        if r < ROUNDS - 1:
            k0, k1 = k0 + _u32(W0), k1 + _u32(W1)
    return c0, c1, c2, c3


def _generate(s):
    block = _philox(tuple(s[CTR + i] for i in range(4)), (s[KEY], s[KEY + 1]))
    for i in range(4):
        s[OUT + i] = block[i]


def _increment(s):
    """The counter plus 1 (128-bit)."""
    x = s[CTR] + _u32(1)
    carry = _bit(x == _u32(0))
    y = s[CTR + 1] + carry
    carry = carry & _bit(y == _u32(0))
    z = s[CTR + 2] + carry
    carry = carry & _bit(z == _u32(0))
    s[CTR], s[CTR + 1], s[CTR + 2] = x, y, z
    s[CTR + 3] = s[CTR + 3] + carry


def _add_low(s, lo, hi):
    """The counter plus the 64-bit ``hi:lo``, carrying into its high half."""
    x = s[CTR] + lo
    hi = hi + _bit(x < lo)
    y = s[CTR + 1] + hi
    carry = _bit(y < hi)
    z = s[CTR + 2] + carry
    carry = carry & _bit(z == _u32(0))
    s[CTR], s[CTR + 1], s[CTR + 2] = x, y, z
    s[CTR + 3] = s[CTR + 3] + carry


def _add_high(s, lo, hi):
    """The counter's high 64 bits plus ``hi:lo`` (a subsequence)."""
    z = s[CTR + 2] + lo
    s[CTR + 2] = z
    s[CTR + 3] = s[CTR + 3] + hi + _bit(z < lo)


def _halves(v):
    v = cutlass.Int64(v)
    return cutlass.Uint32(v & 0xFFFFFFFF), cutlass.Uint32((v >> 32) & 0xFFFFFFFF)


@cute.jit
def init(s: cute.Tensor, seed, subsequence, offset):
    """cuRAND's ``curand_init(seed, subsequence, offset, &state)`` for Philox4x32-10."""
    k0, k1 = _halves(seed)
    q0, q1 = _halves(subsequence)
    n0, n1 = _halves(offset)
    for i in cutlass.range_constexpr(4):
        s[CTR + i] = _u32(0)
    s[KEY] = k0
    s[KEY + 1] = k1
    s[NFLAG] = _u32(0)
    s[DFLAG] = _u32(0)
    _add_high(s, q0, q1)
    # skip `offset` draws: offset // 4 blocks, then offset % 4 draws of the block
    idx = n0 & _u32(3)
    lo = (n0 >> _u32(2)) | (n1 << _u32(30))
    hi = n1 >> _u32(2)
    _add_low(s, lo, hi)
    s[IDX] = idx
    _generate(s)


@cute.jit
def rand(s: cute.Tensor):
    """The next 32-bit draw (cuRAND's ``curand(&state)``)."""
    i = cutlass.Int32(s[IDX])
    value = s[OUT + i]
    s[IDX] = _u32(i + 1)
    if i == 3:
        _increment(s)
        _generate(s)
        s[IDX] = _u32(0)
    return value


def _unit_float(x):
    return cutlass.Float32(x) * cutlass.Float32(INV_2POW32) + cutlass.Float32(INV_2POW32 / 2)


def _unit_double(x, y, scale):
    """``(x ^ (y << 21)) * scale + scale / 2`` over the 53-bit value, in float64."""
    lo = x ^ (y << _u32(21))
    hi = y >> _u32(11)
    z = cutlass.Float64(hi) * cutlass.Float64(4294967296.0) + cutlass.Float64(lo)
    return z * cutlass.Float64(scale) + cutlass.Float64(scale / 2)


@cute.jit
def uniform(s: cute.Tensor):
    """A float32 in (0, 1] (cuRAND's ``curand_uniform``)."""
    return _unit_float(rand(s))


@cute.jit
def uniform_double(s: cute.Tensor):
    """A float64 in (0, 1] of 53 random bits (cuRAND's ``curand_uniform_double``)."""
    x = rand(s)
    y = rand(s)
    return _unit_double(x, y, INV_2POW53)


@cute.jit
def normal(s: cute.Tensor):
    """A standard normal float32 (cuRAND's ``curand_normal``: Box-Muller, two values per
    pair of draws)."""
    first = s[NFLAG] == _u32(0)
    if first:
        s[NRAW] = rand(s)
        s[NRAW + 1] = rand(s)
    u = _unit_float(s[NRAW])
    v = cutlass.Float32(s[NRAW + 1]) * cutlass.Float32(INV_2POW32_2PI) + \
        cutlass.Float32(INV_2POW32_2PI / 2)
    r = cute.math.sqrt(cutlass.Float32(-2.0) * cute.math.log(u))
    s[NFLAG] = _u32(1) - s[NFLAG]
    return cutlass.Float32(cutlass.select_(first, r * cute.math.sin(v), r * cute.math.cos(v)))


@cute.jit
def normal_double(s: cute.Tensor):
    """A standard normal float64 (cuRAND's ``curand_normal_double``: Box-Muller over four
    draws, two values per four)."""
    first = s[DFLAG] == _u32(0)
    if first:
        for i in cutlass.range_constexpr(4):
            s[DRAW + i] = rand(s)
    u = _unit_double(s[DRAW], s[DRAW + 1], INV_2POW53)
    v = _unit_double(s[DRAW + 2], s[DRAW + 3], 2 * INV_2POW53) * cutlass.Float64(math.pi)
    r = cute.math.sqrt(cutlass.Float64(-2.0) * cute.math.log(u))
    s[DFLAG] = _u32(1) - s[DFLAG]
    return cutlass.Float64(cutlass.select_(first, r * cute.math.sin(v), r * cute.math.cos(v)))
