"""Element types shared by the compiler, the launcher and the runtime.

One row per tilecute dtype: its size, its DLPack code (what the launcher compares
against a tensor's ``DLDataType``), the CuTe DSL numeric class name and the C++
scalar type.  Pure data: this module must not import CUTLASS, torch or the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

# DLPack type codes (dlpack.h DLDataTypeCode)
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2 = 10, 12


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
    DTypeInfo("int8", 8, DL_INT, "Int8", "int8_t", "int"),
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
TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn", "tfloat32": "float32"}


def torch_name(dtype: str) -> str:
    """The name of the torch dtype of ``dtype`` tensors (``torch.<name>``)."""
    return TORCH_NAMES.get(dtype, dtype)


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
