"""What TileLang programs use of the TVM that TileLang bundles (``from tilelang import
tvm``; ``from tvm import DataType``), under tilecute's name.

tilecute is standalone: it has no TVM.  It serves ``DataType`` (a dtype's bit width and
lanes, what kernel factories compute tile sizes from) and, in ``tvm.tirx`` (and
``tvm.tir``), the expression builders that TileLang programs' Python helpers call on the
values a kernel passes them (``tirx.const``, ``tirx.reinterpret``, ``tirx.Select``,
``tirx.Cast``, ``tirx.Min``, ``tirx.PrimExpr``), over tilecute's own IR expressions, and
``tvm.testing.requires_package`` (a test's skip mark);
TVM's other IR modules and names (``tvm.target``, ``tvm.tirx.IndexMap`` ...) import, and
using one is an error naming it.

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


# ---- tvm.tirx / tvm.tir: TVM's expression builders over tilecute's IR ---------------------
def _dtype(dtype) -> str:
    from .language.values import dtype_name

    return dtype_name(dtype)


def _is_expr(x) -> bool:
    from .ir import nodes as N

    return isinstance(x, N.Expr)


def _tir_const(value, dtype=None):
    """TVM's ``tirx.const(value, dtype)``: a constant of ``dtype`` (an int's default is
    int32, a float's float32, a bool's bool); an integer outside ``dtype``'s range is an
    error, as in TVM."""
    from .ir import nodes as N
    from .runtime.dtypes import DTYPES

    if isinstance(value, N.Const):
        value = value.value
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else \
            "float32" if isinstance(value, float) else None
        if dtype is None:
            raise TypeError(f"tirx.const: {value!r} is not a number")
    dtype = _dtype(dtype)
    info = DTYPES[dtype]
    if info.kind in ("int", "uint") and not isinstance(value, float):
        value = int(value)
        lo, hi = (0, 1 << info.bits) if info.kind == "uint" else \
            (-(1 << (info.bits - 1)), 1 << (info.bits - 1))
        if not lo <= value < hi:
            raise ValueError(f"tirx.const({value}, {dtype!r}): the value is outside {dtype}'s "
                             f"range [{lo}, {hi - 1}]")
    return N.const(value, dtype)


def _tir_reinterpret(dtype, value):
    """TVM's ``tirx.reinterpret(dtype, value)``: ``value``'s bits read as ``dtype`` (of the
    same width; no conversion)."""
    from .language import ops

    return ops.reinterpret(value, _dtype(dtype))


def _tir_Cast(dtype, value):  # noqa: N802
    """TVM's ``tirx.Cast(dtype, value)``: a value conversion."""
    from .language import ops

    return ops.Cast(dtype, value)


def _same_dtype(what: str, a, b):
    """TVM's Select / Min operands: one dtype (a Python number takes the other's)."""
    from .ir import nodes as N

    if _is_expr(a) and _is_expr(b) and a.dtype != b.dtype:
        raise TypeError(f"tirx.{what}: mismatched types {a.dtype} and {b.dtype} (TVM's "
                        f"{what} takes operands of one dtype; cast one with tirx.Cast)")
    a, b, _ = N._coerce(a, b)
    return a, b


def _tir_Select(condition, true_value, false_value):  # noqa: N802
    """TVM's ``tirx.Select(cond, a, b)``: ``a`` where the bool ``cond`` holds, else ``b``
    (both evaluated; one dtype)."""
    from .ir import nodes as N

    if isinstance(condition, bool):
        raise TypeError(
            f"tirx.Select: the condition is the Python bool {condition}; `==` and `!=` between "
            "expressions build a condition (TVM's EqualOp) in the kernel body, a T.macro and a "
            "Python helper the kernel calls, but compare them as Python values elsewhere "
            "(a helper called outside a kernel)")
    if not _is_expr(condition) or condition.dtype != "bool":
        what = condition.dtype if _is_expr(condition) else type(condition).__name__
        raise TypeError(f"tirx.Select: the condition must be a bool expression, got {what}")
    a, b = _same_dtype("Select", true_value, false_value)
    return N.Select(condition, a, b, a.dtype)


def _tir_Min(a, b):  # noqa: N802
    """TVM's ``tirx.Min(a, b)``: the smaller (operands of one dtype)."""
    from .ir import nodes as N

    a, b = _same_dtype("Min", a, b)
    return N.binop("min", a, b)


_TIR_SERVED = ("const", "reinterpret", "Select", "Cast", "Min", "PrimExpr")


def tir_module(name: str):
    """The module ``tvm.tir`` / ``tvm.tirx`` (``name``): the expression builders above,
    ``PrimExpr`` (tilecute's expression class: annotations, ``isinstance``), and every other
    name refused by name."""
    import types

    from .ir import nodes as N

    module = types.ModuleType(name)
    module.__path__ = []  # its submodules (tvm.tirx.transform ...) are refused modules
    served = {n: globals()[f"_tir_{n}"] for n in _TIR_SERVED if n != "PrimExpr"}
    served["PrimExpr"] = N.Expr
    module.__dict__.update(served)

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Refused(f"{name}.{attr}", NO_TVM + f" (tilecute's {name} serves only "
                                                  f"{', '.join(_TIR_SERVED)})")

    module.__getattr__ = __getattr__
    return module


def testing_module(name: str = "tvm.testing"):
    """The module ``tvm.testing``: ``requires_package`` (tilecute.testing's: skip a pytest
    test unless the packages import), every other name refused by name."""
    import types

    from .testing import requires_package

    module = types.ModuleType(name)
    module.__path__ = []
    module.requires_package = requires_package

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Refused(f"{name}.{attr}", NO_TVM + f" (tilecute's {name} serves only "
                                                  "requires_package)")

    module.__getattr__ = __getattr__
    return module
