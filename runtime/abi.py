"""The launch ABI: one description of what a compiled function takes and what each
kernel parameter is.

The compiler produces a :class:`LaunchABI` when it lowers a ``PrimFunc``; the CuTe DSL
codegen, the host-module template and the C++ launcher template all render from it, and
the cubin check (``tilecute.runtime.cubin``) compares it with the cubin's own parameter
table.  It lives in the runtime because a cache entry carries it as JSON and the lazy
cubin step reads it back without the compiler.

Pure data: no CUTLASS, no torch, no compiler imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional, Union

from .dtypes import DTYPES

ABI_VERSION = 1

# A static extent, the name of a symbol, or an expression ``(op, Dim, Dim)`` over them, op
# one of DIM_OPS (TileLang's ``T.Tensor((n * 4 + 1,), dtype)``); JSON holds it as a list.
Dim = Union[int, str, tuple]
DIM_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}


def dim_symbols(d) -> list[str]:
    """The symbol names in dim ``d``, in order of appearance, each once."""
    if isinstance(d, str):
        return [d]
    if isinstance(d, (tuple, list)):
        out = dim_symbols(d[1])
        return out + [x for x in dim_symbols(d[2]) if x not in out]
    return []


def dim_text(d, outer: int = 0) -> str:
    """``d`` as Python-style text for messages and comments: ``n * 4 + 1``."""
    if isinstance(d, (tuple, list)):
        tight = 1 if d[0] in ("add", "sub") else 2
        text = f"{dim_text(d[1], tight)} {DIM_OPS[d[0]]} {dim_text(d[2], tight + 1)}"
        return f"({text})" if tight < outer else text
    return str(d)


def eval_dim(d, symbols) -> int:
    """The value of dim ``d`` once ``symbols`` (name -> int) are bound (floor division and
    modulo, as Python and the launcher's ``tc_floordiv``/``tc_mod`` compute them)."""
    if isinstance(d, (tuple, list)):
        a, b = eval_dim(d[1], symbols), eval_dim(d[2], symbols)
        op = d[0]
        if op in ("floordiv", "mod") and b == 0:
            raise ZeroDivisionError(f"dim {dim_text(d)} divides by zero")
        return {"add": a + b, "sub": a - b, "mul": a * b,
                "floordiv": a // b if b else 0, "mod": a % b if b else 0}[op]
    return int(symbols[d]) if isinstance(d, str) else int(d)


def affine_in(d, name: str):
    """``(scale, offset)`` when dim ``d`` is ``scale * name + offset`` with ints (scale not
    0) and names no other symbol, else None."""
    if d == name:
        return 1, 0
    if not isinstance(d, (tuple, list)) or dim_symbols(d) != [name]:
        return None

    def lin(x):
        if isinstance(x, int):
            return 0, x
        if x == name:
            return 1, 0
        if not isinstance(x, (tuple, list)):
            return None
        a, b = lin(x[1]), lin(x[2])
        if a is None or b is None:
            return None
        if x[0] == "add":
            return a[0] + b[0], a[1] + b[1]
        if x[0] == "sub":
            return a[0] - b[0], a[1] - b[1]
        if x[0] == "mul" and (a[0] == 0 or b[0] == 0):
            return a[0] * b[1] + b[0] * a[1], a[1] * b[1]
        return None

    r = lin(d)
    return r if r is not None and r[0] != 0 else None


def solve_symbol(value: int, scale: int, offset: int):
    """The symbol ``n`` with ``scale * n + offset == value`` and ``n >= 0``, or None."""
    q, r = divmod(value - offset, scale)
    return q if r == 0 and q >= 0 else None


def bind_dims(pairs) -> dict:
    """Symbol values from ``(declared dim, actual extent)`` pairs in argument order, as
    the launcher binds them: a plain symbol binds from its first dim; a symbol that
    appears in no plain dim is solved from the first affine dim it alone appears in.
    Unsolvable or inconsistent extents leave the symbol unbound (the launcher checks)."""
    pairs = list(pairs)
    symbols: dict = {}
    for want, got in pairs:
        if isinstance(want, str):
            symbols.setdefault(want, int(got))
    for want, got in pairs:
        for name in dim_symbols(want):
            if name not in symbols and (ab := affine_in(want, name)) is not None:
                n = solve_symbol(int(got), *ab)
                if n is not None:
                    symbols[name] = n
    return symbols


@dataclass(frozen=True)
class TensorArg:
    """A tensor the caller passes (any DLPack tensor).

    ``strides`` is ``None`` for a tensor that must be contiguous (row-major); otherwise
    each stride is a static int or a symbol bound at launch.  ``align`` is the byte
    alignment of the data pointer that the kernel assumes (vectorized access needs 16).
    ``offsets_int32``: the launcher checks that the largest element offset fits int32;
    ``offsets_int64``: the kernel indexes it in 64 bits, its strides are not checked
    against int32.
    """

    name: str
    dtype: str
    shape: tuple[Dim, ...]
    strides: tuple[Dim, ...] | None = None
    align: int = 1
    kind: str = field(default="tensor", init=False)
    # the kernel computes this tensor's offsets in 32 bits though its symbolic shape could
    # pass int32: the launcher refuses a tensor whose largest offset does
    offsets_int32: bool = False
    # the kernel computes this tensor's offsets and strides in 64 bits (an int64 dim, a
    # static shape past int32, the option wide_offsets): the launcher leaves its strides
    # unchecked against int32
    offsets_int64: bool = False
    # a workspace (``T.alloc_global``): each call allocates it; the caller neither passes
    # nor gets it
    workspace: bool = False
    # no kernel reads or writes it: the caller may pass None (the kernels get the null
    # address; nothing of it is checked), as TileLang lets an unused buffer argument be
    # NULL; a symbol that only such tensors carry is bound from the first one given
    # (``SymbolSpec.carriers``)
    nullable: bool = False


@dataclass(frozen=True)
class ScalarArg:
    """A scalar the caller passes (Python int, float or bool)."""

    name: str
    dtype: str
    kind: str = field(default="scalar", init=False)


@dataclass(frozen=True)
class PointerArg:
    """A device address the caller passes (TileLang's ``p: T.ptr``): a tensor, whose data
    pointer (data + byte_offset) it is, on the launch device; or an int.  The kernels take
    it as an int64 scalar parameter.  ``align``: the bytes the kernels assume it is a
    multiple of (their vector accesses through ``T.make_tensor`` views of it), which the
    launcher checks."""

    name: str
    dtype: str = "int64"
    align: int = 1
    kind: str = field(default="pointer", init=False)


Arg = Union[TensorArg, ScalarArg, PointerArg]


def _dim_from_json(x) -> Dim:
    return tuple(_dim_from_json(y) if i else y for i, y in enumerate(x)) \
        if isinstance(x, list) else x


@dataclass(frozen=True)
class SymbolSpec:
    """A symbolic extent or stride, bound from the first place it appears.

    ``arg`` is the index of the argument that binds it, ``field`` is ``"shape"`` or
    ``"stride"`` and ``dim`` the axis.  Every other place that names the symbol must
    agree at launch; ``divisibility`` is a promise the launcher checks.
    """

    name: str
    arg: int
    field: str
    dim: int
    divisibility: int = 1
    # the binding dim is ``scale * name + offset`` (TileLang's ``T.Tensor((n * 4 + 1,),
    # ...)``): the launcher solves for the symbol, refusing an extent that no integer
    # ``n >= 0`` gives
    scale: int = 1
    offset: int = 0
    # "int64" (TileLang's T.dynamic("n", "int64")): the launcher binds any extent and the
    # kernel takes it as an int64 parameter; "int32": the extent must fit int32
    dtype: str = "int32"
    # a symbol that only tensors the caller may pass as None carry (``TensorArg.nullable``):
    # ``carriers`` are the (arg, field, dim) places that may bind it, in order, the binding
    # one first; the launcher binds it from the first carrier given and checks the others
    # given against it, as TileLang's binder cascades over them.  None given: the symbol is
    # 0, or (``required``: several carriers and a kernel uses it) the call is an error
    carriers: tuple[tuple[int, str, int], ...] = ()
    required: bool = False


TMA_MODES = ("tiled", "im2col")
TMA_SWIZZLES = (0, 32, 64, 128)  # bytes; 0 = none
TMA_INTERLEAVES = (0, 16, 32)  # bytes; 0 = none
TMA_L2_PROMOTIONS = (0, 64, 128, 256)  # bytes; 0 = none
TMA_OOB_FILLS = ("zero", "nan")  # "nan": NaN_REQUEST_ZERO_FMA (floating-point dtypes only)


@dataclass(frozen=True)
class TmaSpec:
    """What the launcher needs to encode one TMA descriptor per launch.

    The descriptor covers the whole tensor argument ``KernelParam.source``: its rank,
    global dims and strides come from the tensor at launch (dims in TMA order, i.e. the
    last tensor axis is TMA dimension 0; the last axis must have stride 1).  Everything
    here is in *tensor axis order* (the order of ``TensorArg.shape``), the launcher
    reverses it.

    ``box``: elements per axis copied by one TMA instruction (tiled mode);
    ``element_strides``: traversal stride per axis (``None``: all 1);
    ``swizzle`` / ``interleave`` / ``l2_promotion``: bytes (0 = none);
    ``oob_fill``: what out-of-bounds elements read as.  Im2col mode (rank 3..5, tensor
    axes ``(N, spatial..., C)``): ``lower_corner`` and ``upper_corner`` hold one offset
    per spatial axis, ``channels_per_pixel`` and ``pixels_per_column`` the box.
    """

    mode: str = "tiled"
    box: tuple[int, ...] = ()
    element_strides: tuple[int, ...] | None = None
    swizzle: int = 0
    interleave: int = 0
    l2_promotion: int = 0
    oob_fill: str = "zero"
    lower_corner: tuple[int, ...] = ()
    upper_corner: tuple[int, ...] = ()
    channels_per_pixel: int = 0
    pixels_per_column: int = 0

    def to_dict(self) -> dict:
        d = {"mode": self.mode, "box": list(self.box),
             "element_strides": None if self.element_strides is None else list(self.element_strides),
             "swizzle": self.swizzle, "interleave": self.interleave,
             "l2_promotion": self.l2_promotion, "oob_fill": self.oob_fill}
        if self.mode == "im2col":
            d.update(lower_corner=list(self.lower_corner), upper_corner=list(self.upper_corner),
                     channels_per_pixel=self.channels_per_pixel,
                     pixels_per_column=self.pixels_per_column)
        return d

    @staticmethod
    def from_dict(d: dict) -> "TmaSpec":
        d = dict(d)
        for key in ("box", "lower_corner", "upper_corner"):
            if key in d:
                d[key] = tuple(d[key])
        if d.get("element_strides") is not None:
            d["element_strides"] = tuple(d["element_strides"])
        return TmaSpec(**d)

    def box_bytes(self, dtype: str) -> int:
        """Bytes one copy moves into shared memory (what an mbarrier expects)."""
        n = 1
        if self.mode == "im2col":
            n = self.channels_per_pixel * self.pixels_per_column
        else:
            for i, b in enumerate(self.box):
                e = 1 if self.element_strides is None else self.element_strides[i]
                n *= -(-b // e)
        return n * DTYPES[dtype].bytes


@dataclass(frozen=True)
class KernelParam:
    """One parameter of one ``@cute.kernel``, in cubin order.

    ``kind``: ``"pointer"`` (the data pointer of tensor argument ``source``),
    ``"scalar"`` (scalar argument ``source``, the int64 address of pointer argument
    ``source``, or symbol ``source`` when ``from_symbol``), ``"tma_desc"`` (a TMA descriptor over tensor argument
    ``source``, 128 bytes passed by value, encoded per launch from ``tma``), or
    ``"grid_barrier"`` (the pointer to the 32-bit word of ``T.sync_grid()``'s barrier,
    which the launcher owns per device; ``source`` empty).
    ``dtype`` is the pointee type of a pointer or descriptor and the value type of a
    scalar.
    """

    name: str
    kind: str
    dtype: str
    source: str
    from_symbol: bool = False
    tma: TmaSpec | None = None

    @property
    def size(self) -> int:
        if self.kind in ("pointer", "grid_barrier"):
            return 8
        if self.kind == "tma_desc":
            return 128
        return DTYPES[self.dtype].bytes

    @property
    def align(self) -> int:
        return 64 if self.kind == "tma_desc" else self.size


# where kernel parameters start in constant bank 0 on sm_90 (Hopper); parameter alignment
# is absolute there.  Only 64-byte aligned parameters (TMA descriptors, sm_90+) notice.
PARAM_BANK_OFFSET = 0x210


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of the function, launched in order on one stream.

    ``symbol`` is the exact name of the kernel in the cubin.  ``grid`` holds three C++
    expressions over the launcher's symbol variables (``sym_<name>``), rendered by the
    compiler, never computed by a template.  ``launch_smem``: a C++ expression of the same
    kind, the bytes of the kernel's shared buffer sized at launch (TileLang's dynamic shared
    memory; all of them, where there are several), which the launch takes after the
    ``dynamic_smem`` static bytes; "" for none.
    """

    symbol: str
    grid: tuple[str, str, str]
    block: tuple[int, int, int]
    params: tuple[KernelParam, ...]
    dynamic_smem: int = 0
    cluster: tuple[int, int, int] | None = None
    pdl: bool = False  # launched with programmatic stream serialization (option pdl)
    # launched cooperatively (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): the kernel calls
    # T.sync_grid(), so every block must be resident at once
    cooperative: bool = False
    launch_smem: str = ""

    def param_offsets(self) -> list[int]:
        """Byte offset of each parameter in the kernel's parameter buffer, as the cubin
        lays it out: C layout, with alignment counted from where the parameters start in
        constant bank 0 (:data:`PARAM_BANK_OFFSET`), so a 64-byte aligned TMA descriptor
        after two pointers sits at offset 48.  The launcher passes parameter addresses
        (``kernelParams``) and the driver places them; the cubin check compares these."""
        offsets, cursor = [], PARAM_BANK_OFFSET
        for p in self.params:
            cursor = (cursor + p.align - 1) // p.align * p.align
            offsets.append(cursor - PARAM_BANK_OFFSET)
            cursor += p.size
        return offsets


@dataclass(frozen=True)
class L2Window:
    """TileLang's ``T.annotate_l2_hit_ratio({arg: hit_ratio})``: every kernel of the call
    launches with an L2 access policy window (``CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW``)
    over tensor argument ``arg``: from its data pointer, ``min(bytes, the device's
    persisting-L2 maximum)`` bytes, where ``bytes`` is the element size (whole bytes, as
    TVM's ``dtype.bytes()``) times the product of its shape; hits persist with probability
    ``hit_ratio``, misses stream.  Around the launches the context's persisting-L2 limit is
    set to the window's bytes, then the persisting lines are reset and the limit restored,
    as TileLang's host code does."""

    arg: str
    hit_ratio: float


@dataclass(frozen=True)
class HostAssume:
    """TileLang's host-evaluable ``T.assume(cond)``, checked by the launcher at every call
    before any launch: ``cpp`` the condition in C++ over the launcher's ``sym_<name>`` /
    ``arg_<name>`` locals (int64, bool), ``text`` as the program's IR prints it."""

    cpp: str
    text: str


@dataclass(frozen=True)
class LaunchABI:
    """What a compiled function takes (``args``, ``symbols``) and launches (``kernels``);
    ``l2_window``: the L2 access policy window its kernels launch with (TileLang's
    ``T.annotate_l2_hit_ratio``), or None; ``assumes``: the conditions every call must meet
    (a RuntimeError "Assume: ..." otherwise)."""

    function: str
    args: tuple[Arg, ...]
    symbols: tuple[SymbolSpec, ...]
    kernels: tuple[KernelLaunch, ...]
    version: int = ABI_VERSION
    l2_window: Optional["L2Window"] = None
    assumes: tuple[HostAssume, ...] = ()

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"{self.function}: no argument named {name!r}")

    def arg_index(self, name: str) -> int:
        return [a.name for a in self.args].index(name)

    # -- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        def arg_dict(a: Arg) -> dict:
            if isinstance(a, TensorArg):
                return {
                    "kind": "tensor",
                    "name": a.name,
                    "dtype": a.dtype,
                    "shape": list(a.shape),
                    "strides": None if a.strides is None else list(a.strides),
                    "align": a.align,
                    "offsets_int32": a.offsets_int32,
                    **({"offsets_int64": True} if a.offsets_int64 else {}),
                    **({"workspace": True} if a.workspace else {}),
                    **({"nullable": True} if a.nullable else {}),
                }
            if isinstance(a, PointerArg):
                return {"kind": "pointer", "name": a.name, "dtype": a.dtype, "align": a.align}
            return {"kind": "scalar", "name": a.name, "dtype": a.dtype}

        def param_dict(p: KernelParam) -> dict:
            d = {"name": p.name, "kind": p.kind, "dtype": p.dtype, "source": p.source,
                 "from_symbol": p.from_symbol}
            if p.tma is not None:
                d["tma"] = p.tma.to_dict()
            return d

        return {
            "version": self.version,
            "function": self.function,
            "args": [arg_dict(a) for a in self.args],
            "symbols": [
                {"name": s.name, "arg": s.arg, "field": s.field, "dim": s.dim,
                 "divisibility": s.divisibility,
                 **({"scale": s.scale, "offset": s.offset}
                    if (s.scale, s.offset) != (1, 0) else {}),
                 **({"dtype": s.dtype} if s.dtype != "int32" else {}),
                 **({"carriers": [list(c) for c in s.carriers], "required": s.required}
                    if s.carriers else {})}
                for s in self.symbols
            ],
            "kernels": [
                {
                    "symbol": k.symbol,
                    "grid": list(k.grid),
                    "block": list(k.block),
                    "dynamic_smem": k.dynamic_smem,
                    "cluster": None if k.cluster is None else list(k.cluster),
                    "params": [param_dict(p) for p in k.params],
                    **({"pdl": True} if k.pdl else {}),
                    **({"cooperative": True} if k.cooperative else {}),
                    **({"launch_smem": k.launch_smem} if k.launch_smem else {}),
                }
                for k in self.kernels
            ],
            **({"l2_window": {"arg": self.l2_window.arg, "hit_ratio": self.l2_window.hit_ratio}}
               if self.l2_window is not None else {}),
            **({"assumes": [{"cpp": a.cpp, "text": a.text} for a in self.assumes]}
               if self.assumes else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @staticmethod
    def from_dict(d: dict) -> "LaunchABI":
        if d.get("version") != ABI_VERSION:
            raise ValueError(
                f"launch ABI version {d.get('version')!r} is not supported "
                f"(this tilecute reads version {ABI_VERSION})"
            )

        def arg(a: dict) -> Arg:
            if a["kind"] == "tensor":
                return TensorArg(
                    a["name"], a["dtype"], tuple(_dim_from_json(x) for x in a["shape"]),
                    None if a["strides"] is None else tuple(_dim_from_json(x) for x in a["strides"]),
                    a["align"],
                    offsets_int32=a.get("offsets_int32", False),
                    offsets_int64=a.get("offsets_int64", False),
                    workspace=a.get("workspace", False),
                    nullable=a.get("nullable", False),
                )
            if a["kind"] == "pointer":
                return PointerArg(a["name"], a["dtype"], a["align"])
            return ScalarArg(a["name"], a["dtype"])

        def param(p: dict) -> KernelParam:
            p = dict(p)
            if p.get("tma") is not None:
                p["tma"] = TmaSpec.from_dict(p["tma"])
            return KernelParam(**p)

        return LaunchABI(
            function=d["function"],
            args=tuple(arg(a) for a in d["args"]),
            symbols=tuple(SymbolSpec(**{**s, "carriers": tuple(tuple(c) for c in s.get("carriers", ()))})
                          for s in d["symbols"]),
            kernels=tuple(
                KernelLaunch(
                    symbol=k["symbol"],
                    grid=tuple(k["grid"]),
                    block=tuple(k["block"]),
                    params=tuple(param(p) for p in k["params"]),
                    dynamic_smem=k["dynamic_smem"],
                    cluster=None if k["cluster"] is None else tuple(k["cluster"]),
                    pdl=k.get("pdl", False),
                    cooperative=k.get("cooperative", False),
                    launch_smem=k.get("launch_smem", ""),
                )
                for k in d["kernels"]
            ),
            l2_window=None if d.get("l2_window") is None else L2Window(**d["l2_window"]),
            assumes=tuple(HostAssume(**a) for a in d.get("assumes", ())),
        )

    @staticmethod
    def from_json(text: str) -> "LaunchABI":
        return LaunchABI.from_dict(json.loads(text))
