"""FP8 E8M0 (TileLang's ``float8_e8m0fnu``, the MX formats' scale factors) for generated
kernels, on every arch.

A code ``e`` (one byte) is the value 2^(e - 127); 0xFF is NaN; there is no sign, zero or
infinity.  Generated code keeps e8m0 buffers and values as their bytes (``Uint8``): CUDA's
``__nv_fp8_e8m0`` (TileLang's ``fp8_e8_t``) is loaded, stored and converted, with no
arithmetic, and its conversions on sm_80 / sm_90 are CUDA's software ones, which these
follow bit for bit.

Usage in generated code::

    from tilecute.runtime.cute import e8m0 as tce8m0
    x = tce8m0.decode(code)      # Float32: 2^(code - 127) (code 0: 2^-127, a subnormal); NaN for 0xFF
    c = tce8m0.encode(x)         # Uint8: |x| rounded up to a power of two, as
                                 # __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)
"""

import cutlass

from .math import reinterpret


def decode(code):
    """The Float32 value of the e8m0 ``code``: exact (2^-127, code 0, is a float32
    subnormal), a quiet NaN for 0xFF."""
    c = cutlass.Uint32(cutlass.Uint8(code))
    bits = cutlass.select_(c == 0, cutlass.Uint32(0x00400000), c << 23)
    bits = cutlass.select_(c == 0xFF, cutlass.Uint32(0x7FC00000), bits)
    return reinterpret(cutlass.Uint32(bits), cutlass.Float32)


def encode(x):
    """The e8m0 code (a ``Uint8``) of ``x`` as CUDA's ``__nv_fp8_e8m0(x)`` rounds it
    (TileLang's cast): the magnitude rounded up to a power of two, the sign dropped, at
    least 2^-127 (code 0, for zero too), saturating to 2^127 (0xFE, infinities too); NaN
    gives 0xFF.  A Float64 is rounded from its own bits; any other value is widened to
    Float32 first (exact for the 16- and 8-bit floats)."""
    if isinstance(x, cutlass.Float64):
        u = reinterpret(x, cutlass.Uint64) & cutlass.Uint64(0x7FFFFFFFFFFFFFFF)
        e = cutlass.Int64(u >> 52)
        m = u & cutlass.Uint64(0xFFFFFFFFFFFFF)
        # 2^(e - 1023) (1 + m / 2^52): code e - 1023 + 127, one more where m != 0
        c = e - 896 + cutlass.select_(m != 0, cutlass.Int64(1), cutlass.Int64(0))
        c = cutlass.select_(c < 0, cutlass.Int64(0), c)
        c = cutlass.select_(c > 0xFE, cutlass.Int64(0xFE), c)
        c = cutlass.select_(u > cutlass.Uint64(0x7FF0000000000000), cutlass.Int64(0xFF), c)
        return cutlass.Uint8(c)
    u = reinterpret(cutlass.Float32(x), cutlass.Uint32) & cutlass.Uint32(0x7FFFFFFF)
    e = u >> 23
    m = u & cutlass.Uint32(0x7FFFFF)
    normal = e + cutlass.select_(m != 0, cutlass.Uint32(1), cutlass.Uint32(0))
    # a subnormal: up to 2^-127 (0x00400000) code 0, above it 2^-126
    tiny = cutlass.select_(u > cutlass.Uint32(0x00400000), cutlass.Uint32(1), cutlass.Uint32(0))
    c = cutlass.select_(e == 0, tiny, normal)
    c = cutlass.select_(c > 0xFE, cutlass.Uint32(0xFE), c)
    c = cutlass.select_(u > cutlass.Uint32(0x7F800000), cutlass.Uint32(0xFF), c)
    return cutlass.Uint8(c)
