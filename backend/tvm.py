"""What TileLang programs use of the TVM that TileLang bundles (``from tilelang import
tvm``; ``from tvm import DataType``), under tilecute's name.

tilecute is standalone: it has no TVM.  It serves ``DataType`` (a dtype's bit width and
lanes, what kernel factories compute tile sizes from); TVM's IR modules (``tvm.tir``,
``tvm.tirx``, ``tvm.target`` ...) import, and using one is an error naming it.

Like ``import tilelang``, ``import tilecute`` makes ``import tvm`` find this module where
no real TVM is installed (a finder placed after every other one: an installed TVM always
wins); ``tvm.<sub>`` then is a module whose every name is refused.  Imports nothing.
"""

from __future__ import annotations

import re

from .refusals import Refused

__path__: list = []  # a package, so that `import tvm.tirx` / `from tvm.target import Target` resolve

NO_TVM = ("it is TVM's; tilecute is standalone (no TVM): write the kernel with tilecute.language "
           "(T.*) forms, which build tilecute's own IR")
_MODULES = ("tir", "tirx", "target", "runtime", "te", "ir", "arith", "script", "transform",
            "testing", "contrib", "tl", "relax", "driver", "topi")
_NAMES = ("IRModule", "Target", "PrimFunc", "build", "lower", "cuda", "device", "nd", "const",
          "get_global_func", "register_func")

# TileLang dtype names beyond tilecute's own (bit widths for DataType; not tensor dtypes)
_BITS = {"bool": 1, "boolean": 1, "handle": 64, "void": 0, "tfloat32": 32,
         "float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6, "float8_e8m0fnu": 8,
         "float8_e4m3fnuz": 8, "float8_e5m2fnuz": 8, "float8_e4m3b11fnuz": 8}


class DataType:
    """TVM's ``DataType`` for what TileLang programs ask of it: ``DataType("float16").bits``
    (16), ``.lanes`` (``"int8x4"``: 4), ``.itemsize`` (bytes of all lanes), ``str()`` and
    ``==``.  Takes a name (tilecute's, TileLang's: ``"int4"``, ``"float4_e2m1fn"`` ...),
    ``T.float16`` or a torch dtype."""

    def __init__(self, dtype):
        from .runtime.dtypes import ALIASES, DTYPES

        text = str(dtype)
        text = text[6:] if text.startswith("torch.") else text
        m = re.fullmatch(r"(.+?)(?:x(\d+))?", text)
        name, lanes = m.group(1), int(m.group(2) or 1)
        name = ALIASES.get(name, name)
        name = {"float8_e4m3fn": "float8_e4m3", "half": "float16"}.get(name, name)
        if name in DTYPES and name != "bool":
            bits = DTYPES[name].bits
        elif name in _BITS:
            bits = _BITS[name]
        elif re.fullmatch(r"u?int(1|2|4|8|16|32|64)|float(16|32|64)|bfloat16", name):
            bits = int(re.findall(r"\d+", name)[0])
        else:
            raise ValueError(f"DataType: unknown dtype {dtype!r}")
        self.name, self.bits, self.lanes = name, bits, lanes

    @property
    def itemsize(self) -> int:
        return self.bits * self.lanes // 8

    def with_lanes(self, lanes: int) -> "DataType":
        return DataType(f"{self.name}x{lanes}" if lanes != 1 else self.name)

    def is_float(self) -> bool:
        return self.name.startswith(("float", "bfloat", "tfloat"))

    def is_int(self) -> bool:
        return self.name.startswith("int")

    def is_uint(self) -> bool:
        return self.name.startswith("uint") or self.name == "bool"

    def __str__(self) -> str:
        return self.name if self.lanes == 1 else f"{self.name}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"

    def __eq__(self, other) -> bool:
        try:
            other = other if isinstance(other, DataType) else DataType(other)
        except ValueError:
            return False
        return (self.name, self.lanes) == (other.name, other.lanes)

    def __hash__(self) -> int:
        return hash((self.name, self.lanes))


def __getattr__(name: str):
    if name in _MODULES:  # the same refusing module `import tvm.<name>` gives
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        return Refused(f"tvm.{name}", NO_TVM)
    raise AttributeError(f"module 'tilecute.tvm' has no attribute {name!r}")
