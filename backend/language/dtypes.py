"""TileLang's ``tilelang.language.dtypes`` under tilecute's name: ``dtype`` (``T.dtype``),
the dtype constants (``float16``, ...), and the tables programs' helpers read
(``_TORCH_DTYPE_TO_STR``: torch dtype -> dtype name, as TileLang's; ``_all_dtypes``)."""

from __future__ import annotations

import sys as _sys

from .values import DType as dtype  # noqa: F401  (T.dtype)

_T = _sys.modules[__package__]  # tilecute.language, imported before its submodules
_all_dtypes = sorted(name for name in dir(_T) if not name.startswith("_")
                     and isinstance(getattr(_T, name), dtype))
globals().update({name: getattr(_T, name) for name in _all_dtypes})


def _torch_table() -> dict:
    try:
        import torch
    except ImportError:  # (no torch: an empty table, as there is nothing to map)
        return {}
    table = {torch.bool: "bool", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
             torch.int64: "int64", torch.uint8: "uint8", torch.float16: "float16",
             torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16"}
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                 "float8_e5m2fnuz", "float8_e8m0fnu"):
        if getattr(torch, name, None) is not None:
            table[getattr(torch, name)] = name
    return table


_TORCH_DTYPE_TO_STR = _torch_table()
