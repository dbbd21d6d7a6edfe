"""Element types shared by the compiler, the launcher and the runtime.

One row per tilecute dtype: its size, its DLPack code (what the launcher compares
against a tensor's ``DLDataType``), the CuTe DSL numeric class name and the C++
scalar type.  Pure data: this module must not import CUTLASS, torch or the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

# DLPack type codes (dlpack.h DLDataTypeCode)
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2, DL_FLOAT8_E8M0FNU = 10, 12, 14
DL_FLOAT4_E2M1FN = 17


@dataclass(frozen=True)
class DTypeInfo:
    name: str  # tilecute name, as in T.Tensor(shape, "float16")
    bits: int
    dl_code: int
    cute: str  # class in the `cutlass` namespace: cutlass.Float16
    cpp: str  # C++ type of a scalar of this dtype on the host
    kind: str  # "float", "int", "uint", "bool"

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def pack(self) -> int:
        """Elements per byte in memory: 2 for the 4-bit float4_e2m1fn and int4 (TileLang's
        "subtype": element ``i`` of a row is the low nibble of byte ``i // 2`` when ``i`` is
        even, the high nibble when odd), 1 for every other dtype."""
        return 8 // self.bits if self.bits < 8 else 1


_ROWS = [
    DTypeInfo("float16", 16, DL_FLOAT, "Float16", "uint16_t", "float"),
    DTypeInfo("bfloat16", 16, DL_BFLOAT, "BFloat16", "uint16_t", "float"),
    DTypeInfo("float32", 32, DL_FLOAT, "Float32", "float", "float"),
    # TileLang's tfloat32: float32 in memory (a float32 tensor binds it) and in arithmetic
    # (as TileLang's CuTe DSL backend computes it); T.gemm multiplies it as tf32
    DTypeInfo("tfloat32", 32, DL_FLOAT, "Float32", "float", "float"),
    DTypeInfo("float64", 64, DL_FLOAT, "Float64", "double", "float"),
    DTypeInfo("float8_e4m3", 8, DL_FLOAT8_E4M3FN, "Float8E4M3FN", "uint8_t", "float"),
    DTypeInfo("float8_e5m2", 8, DL_FLOAT8_E5M2, "Float8E5M2", "uint8_t", "float"),
    # FP4 E2M1 (1 sign, 2 exponent bits of bias 1, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4,
    # 6 and their negatives; no inf or NaN), two to a byte in memory (DTypeInfo.pack).  A
    # tensor argument is any tensor of 8-bit elements whose last dim counts bytes (torch's
    # float4_e2m1fn_x2, uint8, int8), as TileLang binds it; in registers one code a byte
    DTypeInfo("float4_e2m1fn", 4, DL_FLOAT4_E2M1FN, "Float4E2M1FN", "uint8_t", "float"),
    # FP8 E8M0 (TileLang's float8_e8m0fnu, MX scale factors): an unsigned exponent of bias
    # 127, the value 2^(e - 127); 0xFF is NaN; no sign, zero or infinity.  A storage dtype:
    # loaded, stored, copied, selected and cast (runtime.cute.e8m0); in CuTe code its bytes
    # (Uint8), as CUDA's __nv_fp8_e8m0 (TileLang's fp8_e8_t) has no arithmetic
    DTypeInfo("float8_e8m0fnu", 8, DL_FLOAT8_E8M0FNU, "Uint8", "uint8_t", "float"),
    DTypeInfo("int8", 8, DL_INT, "Int8", "int8_t", "int"),
    # 4-bit signed integers (-8 .. 7; TileLang's T.int4), two to a byte in memory as
    # float4_e2m1fn is (DTypeInfo.pack; a tensor argument is any tensor of 8-bit elements
    # whose last dim counts bytes: TileLang packs them into int8 tensors); in registers
    # one 4-bit code a byte: loaded, stored, copied, selected, cast and multiplied (T.gemm
    # on mma.sync), nothing else computed on them
    DTypeInfo("int4", 4, DL_INT, "Int4", "uint8_t", "int"),
    # 4-bit unsigned integers (0 .. 15; T.uint4), as int4 is (CuTe DSL has no Uint4 class:
    # generated code names runtime.cute.mma's Uint4 where an MMA operand type is printed)
    DTypeInfo("uint4", 4, DL_UINT, "Uint4", "uint8_t", "uint"),
    DTypeInfo("int16", 16, DL_INT, "Int16", "int16_t", "int"),
    DTypeInfo("int32", 32, DL_INT, "Int32", "int32_t", "int"),
    DTypeInfo("int64", 64, DL_INT, "Int64", "int64_t", "int"),
    DTypeInfo("uint8", 8, DL_UINT, "Uint8", "uint8_t", "uint"),
    DTypeInfo("uint16", 16, DL_UINT, "Uint16", "uint16_t", "uint"),
    DTypeInfo("uint32", 32, DL_UINT, "Uint32", "uint32_t", "uint"),
    DTypeInfo("uint64", 64, DL_UINT, "Uint64", "uint64_t", "uint"),
    DTypeInfo("bool", 8, DL_BOOL, "Boolean", "bool", "bool"),
]

DTYPES: dict[str, DTypeInfo] = {row.name: row for row in _ROWS}

# Spellings users bring from TileLang / torch; each maps onto one canonical name.
ALIASES = {
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "float": "float32", "fp32": "float32", "f32": "float32",
    "double": "float64", "fp64": "float64",
    "float8_e4m3fn": "float8_e4m3", "e4m3": "float8_e4m3", "fp8_e4m3": "float8_e4m3",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
    "int": "int32", "uint": "uint32",
    "short": "int16", "long": "int64", "ulong": "uint64",  # TileLang's C spellings
}


# torch's name of each dtype's tensors where it differs from tilecute's
TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn", "tfloat32": "float32",
               "float4_e2m1fn": "float4_e2m1fn_x2",  # (a pair of fp4 per torch element)
               "int4": "int8", "uint4": "uint8"}  # (a pair of 4-bit ints per byte, as TileLang packs them)


def element_dims(dtype: str, dims, strides: bool = False) -> tuple:
    """A tensor's shape (or with ``strides``, its strides) counted in ``dtype`` elements:
    a packed dtype's (float4_e2m1fn) tensor is its bytes, so its last dim (and its other
    strides) hold ``pack`` elements per tensor element, as TileLang binds a "subtype"."""
    dims = [int(x) for x in dims]
    pack = DTYPES[dtype].pack if dtype in DTYPES else 1
    if pack > 1 and dims:
        if strides:
            dims[:-1] = [x * pack for x in dims[:-1]]
        else:
            dims[-1] *= pack
    return tuple(dims)


def storage_bytes(dtype: str, elements: int) -> int:
    """Bytes that ``elements`` elements of ``dtype`` take in memory (packed sub-byte
    dtypes: rounded up to whole bytes)."""
    pack = DTYPES[dtype].pack
    return -(-elements // pack) if pack > 1 else elements * DTYPES[dtype].bytes


def torch_name(dtype: str) -> str:
    """The name of the torch dtype of ``dtype`` tensors (``torch.<name>``)."""
    return TORCH_NAMES.get(dtype, dtype)


# FP4 E2M1's magnitudes by code (codes 8-15: the same, negative)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_value(code: int) -> float:
    """The value of the FP4 E2M1 ``code`` (its low 4 bits)."""
    v = E2M1_VALUES[code & 7]
    return -v if code & 8 else v


def e2m1_code(x: float) -> int:
    """The FP4 E2M1 code nearest ``x``: ties to the even code, magnitudes past 6 saturate
    to 6, NaN gives +6, the sign of -0.0 is kept (CUDA's ``__nv_cvt_float_to_fp4`` with
    ``cudaRoundNearest``, as TileLang casts; ``runtime.cute.fp4.encode`` on the device)."""
    if x != x:
        return 7
    a = abs(x)
    code = 0
    for mid, up_at_tie in ((0.25, False), (0.75, True), (1.25, False), (1.75, True),
                           (2.5, False), (3.5, True), (5.0, False)):
        code += a >= mid if up_at_tie else a > mid
    negative = x < 0 or (x == 0 and str(float(x)).startswith("-"))
    return code | (8 if negative else 0)


def e8m0_code(x: float) -> int:
    """The FP8 E8M0 code of ``x`` as CUDA's ``__nv_fp8_e8m0(float)`` (TileLang's cast)
    rounds it: the magnitude rounded up to a power of two (``cudaRoundPosInf``, the sign
    dropped), saturating to 2^127 (0xFE; infinities too), at least 2^-127 (0x00: zero and
    the tiniest values), NaN 0xFF (``runtime.cute.e8m0.encode`` on the device)."""
    import math
    if x != x:
        return 0xFF
    a = abs(float(x))
    if a == math.inf or a > 2.0 ** 127:
        return 0xFE
    if a <= 2.0 ** -127:
        return 0
    m, e = math.frexp(a)  # a = m * 2^e, 0.5 <= m < 1: 2^(e - 1) exactly when m == 0.5
    return min(0xFE, (e - 1 if m == 0.5 else e) + 127)


def e8m0_value(code: int) -> float:
    """The value of the FP8 E8M0 ``code``: 2^(code - 127), NaN for 0xFF."""
    return float("nan") if code == 0xFF else 2.0 ** (code - 127)


class UnknownDTypeError(KeyError, ValueError):
    """A dtype name tilecute does not know.  A ``KeyError`` (a lookup that failed) and a
    ``ValueError`` (a bad value from the user); its message names the dtype and lists
    the valid ones, which a bare ``KeyError`` would not."""

    def __init__(self, name):
        self.name = name
        super().__init__(f"unknown dtype {name!r}; {valid_dtypes_text()}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


def valid_dtypes_text() -> str:
    return (f"tilecute dtypes are {', '.join(DTYPES)} "
            f"(or an alias of one: {', '.join(ALIASES)})")


def canonical_dtype(name: str) -> str:
    """The canonical tilecute dtype name for ``name``; :class:`UnknownDTypeError` (a
    ``KeyError`` and a ``ValueError``) naming the valid ones when unknown."""
    if not isinstance(name, str):
        raise UnknownDTypeError(name)
    name = ALIASES.get(name, name)
    if name not in DTYPES:
        raise UnknownDTypeError(name)
    return name
