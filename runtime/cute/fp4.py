"""FP4 E2M1 (TileLang's ``float4_e2m1fn``) for generated kernels, on every arch.

In memory two values share a byte: element ``i`` of a row is the low nibble of byte
``i // 2`` when ``i`` is even, the high nibble when odd (TileLang's and torch's
``float4_e2m1fn_x2`` order).  Generated code keeps global and shared fp4 buffers as
``Uint8`` tensors of those bytes, and an fp4 value in registers as a ``Uint8`` holding
its 4-bit code (bit 3 the sign, bits 2-1 the exponent of bias 1, bit 0 the mantissa:
codes 0-7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6).  CuTe DSL's own E2M1 conversions use
``cvt ... e2m1x2`` (sm_100+), so these do the arithmetic themselves.

Usage in generated code::

    from tilecute.runtime.cute import fp4 as tcfp4
    x = tcfp4.decode(code)                   # Float32 (exact)
    c = tcfp4.encode(x)                      # Uint8 code, round to nearest even, satfinite
    c = tcfp4.nibble(A[i, j >> 1], j)        # element j of a row from its byte
    tcfp4.store(A, (i, j >> 1), j, c)        # one element, atomically beside its neighbour
    tcfp4.unpack(bytes_view, regs, first, n) # n codes from n // 2 bytes
    tcfp4.pack(regs, first, n, bytes_view)   # n codes into n // 2 bytes

The same bytes, nibbles and codes serve TileLang's ``int4`` (two's complement, -8 .. 7)
and ``uint4`` (0 .. 15)::

    v = tcfp4.decode_int4(code)              # Int32, sign-extended (decode_uint4: zero-)
    c = tcfp4.encode_int4(v)                 # Uint8 code: the low 4 bits of the Int32 value
                                             # (int4 and uint4 alike)
"""

import cutlass
import cutlass.cute as cute

from .atomic import element_ptr
from .math import reinterpret


def decode(code):
    """The Float32 value of the fp4 ``code`` (its low 4 bits): exact."""
    c = cutlass.Uint32(code) & 0xF
    e = (c >> 1) & 0x3
    m = c & 0x1
    # exponent e > 0: 2^(e - 1) * (1 + m / 2), float32 exponent e + 126, mantissa bit 22;
    # e == 0: 0 or the subnormal 0.5 (m * 0x3F000000)
    normal = ((e + cutlass.Uint32(126)) << 23) | (m << 22)
    bits = cutlass.select_(e == 0, m * cutlass.Uint32(0x3F000000), normal)
    return reinterpret(bits | ((c & 0x8) << 28), cutlass.Float32)


def encode(x):
    """The fp4 code (a ``Uint8``) nearest to the float ``x``, ties to the even code, as
    CUDA's ``__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)`` (TileLang's cast):
    magnitudes past 6 saturate to 6, NaN gives +6, the sign (of -0 too) is kept.  Float64
    values are compared as float64 (no double rounding through float32); others are
    widened to Float32 first (exact)."""
    kind = cutlass.Float64 if isinstance(x, cutlass.Float64) else cutlass.Float32
    v = kind(x)
    a = cute.math.absf(v) if kind is cutlass.Float32 else cutlass.select_(v < 0, -v, v)
    # the code counts the midpoints below |x|; a midpoint itself goes to the even code
    # (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4)
    code = cutlass.Uint32(0)
    for mid, up_at_tie in ((0.25, False), (0.75, True), (1.25, False), (1.75, True),
                           (2.5, False), (3.5, True), (5.0, False)):
        above = (a >= kind(mid)) if up_at_tie else (a > kind(mid))
        code = code + cutlass.select_(above, cutlass.Uint32(1), cutlass.Uint32(0))
    nan = v != v
    negative = cutlass.select_(nan, cutlass.Uint32(0), _sign_bit(v))
    code = cutlass.select_(nan, cutlass.Uint32(7), code) | (negative << 3)
    return cutlass.Uint8(code)


def decode_int4(code):
    """The Int32 value of the int4 ``code`` (its low 4 bits, two's complement)."""
    return (cutlass.Int32(cutlass.Uint8(code)) << 28) >> 28


def decode_uint4(code):
    """The Int32 value of the uint4 ``code`` (its low 4 bits, 0 .. 15)."""
    return cutlass.Int32(cutlass.Uint8(code)) & 0xF


def encode_int4(x):
    """The int4 code (a ``Uint8``) of the Int32 ``x``: its low 4 bits (the value wraps at
    4 bits, as a narrowing integer conversion does)."""
    return cutlass.Uint8(cutlass.Int32(x) & 0xF)


def _sign_bit(v):
    """The IEEE sign bit of ``v`` (1 for -0.0 too) as a Uint32."""
    if isinstance(v, cutlass.Float64):
        return cutlass.Uint32(reinterpret(v, cutlass.Uint64) >> 63)
    return reinterpret(v, cutlass.Uint32) >> 31


def nibble(byte, index):
    """Element ``index`` (its parity picks the nibble) of a packed ``byte``: a Uint8 code."""
    b = cutlass.Uint32(cutlass.Uint8(byte))
    shift = (cutlass.Uint32(index) & 1) << 2
    return cutlass.Uint8((b >> shift) & 0xF)


def store(tensor, coord, index, code) -> None:
    """``tensor[coord]``'s nibble of element ``index`` (by its parity) becomes ``code``,
    the other nibble untouched even where another thread writes it at the same time:
    the byte's aligned 32-bit word is updated by ``red.and`` (clear the nibble) then
    ``red.or`` (set it), ``.gpu`` scope in global memory, ``.cta`` in shared.  (TileLang
    writes a lone nibble with a plain read-modify-write of its byte, which loses one of
    two neighbours written at once.)"""
    ptr = element_ptr(tensor, coord)
    space = ptr.memspace
    addr = ptr.toint()
    word_addr = addr - (addr & 3)
    shift = cutlass.Uint32(((addr & 3) << 3) + ((cutlass.Int32(index) & 1) << 2))
    word = cute.make_ptr(cutlass.Uint32, word_addr, space, assumed_align=4)
    scope = "cta" if space == cute.AddressSpace.smem else "gpu"
    mask = ~(cutlass.Uint32(0xF) << shift)
    value = (cutlass.Uint32(cutlass.Uint8(code)) & 0xF) << shift
    cute.arch.red(word, mask, op="and", dtype="b32", sem="relaxed", scope=scope)
    cute.arch.red(word, value, op="or", dtype="b32", sem="relaxed", scope=scope)


def unpack(packed, regs, first: int, count: int) -> None:
    """``regs[first + l]`` = code ``l`` of the ``count // 2`` bytes of the tensor view
    ``packed`` (global or shared), for ``l`` in ``0 .. count - 1`` (``count`` even)."""
    data = cute.make_rmem_tensor((count // 2,), cutlass.Uint8)
    data.store(packed.load())
    for b in range(count // 2):
        byte = cutlass.Uint32(data[b])
        regs[first + 2 * b] = cutlass.Uint8(byte & 0xF)
        regs[first + 2 * b + 1] = cutlass.Uint8((byte >> 4) & 0xF)


def pack(regs, first: int, count: int, packed) -> None:
    """The codes ``regs[first .. first + count - 1]`` into the ``count // 2`` bytes of the
    tensor view ``packed`` (whole bytes: no neighbour to keep)."""
    data = cute.make_rmem_tensor((count // 2,), cutlass.Uint8)
    for b in range(count // 2):
        lo = cutlass.Uint32(regs[first + 2 * b]) & 0xF
        hi = cutlass.Uint32(regs[first + 2 * b + 1]) & 0xF
        data[b] = cutlass.Uint8(lo | (hi << 4))
    packed.store(data.load())
