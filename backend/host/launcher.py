"""Render the C++ launcher of a compiled function from its :class:`LaunchABI`.

All decisions are made here, in Python: which checks each argument gets and in which
order, where each symbol is bound and where it is compared, the C++ type and value of
every kernel parameter.  The result is a plain context of strings, ints, lists and dicts;
``templates/launcher.cpp.j2`` only prints it (``StrictUndefined``: a missing value is an
error, never an empty string).  The C++ that is the same in every launcher is the launcher
runtime: ``templates/tilecute_launcher.h`` (the table types, the inline fast paths of the
checks, the declarations), which the rendered source includes, and
``templates/tilecute_launcher_runtime.cpp`` (everything else), which the toolchain compiles
once per toolchain and links into every launcher; :func:`write_launcher` copies both next
to the source.  ``docs/launch-abi.md`` describes what the generated code does.

Imports jinja2, the runtime's ABI and dtype tables and the templates' names of the runtime
files; no CUTLASS, no torch.
"""

from __future__ import annotations

import re
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..runtime.abi import (
    DIM_OPS,
    TMA_INTERLEAVES,
    TMA_L2_PROMOTIONS,
    TMA_MODES,
    TMA_OOB_FILLS,
    TMA_SWIZZLES,
    KernelLaunch,
    KernelParam,
    LaunchABI,
    PointerArg,
    ScalarArg,
    TensorArg,
    TmaSpec,
    affine_in,
    dim_symbols,
    dim_text,
)
from ..runtime.dtypes import DTYPES
from ..target import MAX_THREADS, TMA_MAX_BOX, TMA_MAX_RANK
from ..templates import RUNTIME_HEADER, RUNTIME_SOURCE

TEMPLATE = "launcher.cpp.j2"
LAUNCHER_SOURCE = "launcher.cpp"
# the launcher runtime under templates/, copied next to every rendered launcher: the header it
# includes and the code every launcher links (the toolchain compiles it once), named by
# tilecute.templates (RUNTIME_HEADER, RUNTIME_SOURCE, imported above)

# Names the launcher exports besides the function itself.
EXPORT_SET_CUBIN = "__tilecute_set_cubin"
EXPORT_ENSURE_DEVICE = "__tilecute_ensure_device"
EXPORT_CLEANUP = "cleanup"
# exported only by launchers built with -DTILECUTE_PHASE_TIMING (docs/performance.md)
EXPORT_PHASE_TIMES = "__tilecute_phase_times"
EXPORT_PHASE_RESET = "__tilecute_phase_reset"
RESERVED_EXPORTS = (EXPORT_SET_CUBIN, EXPORT_ENSURE_DEVICE, EXPORT_CLEANUP, EXPORT_PHASE_TIMES,
                    EXPORT_PHASE_RESET)

# CUDA limits the launcher relies on.
MAX_THREADS_PER_BLOCK = MAX_THREADS
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in per function
PORTABLE_CLUSTER_SIZE = 8  # above this a kernel must allow non-portable cluster sizes

# TMA descriptors (cuda.h, cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col): the rules that
# depend only on the launch ABI are checked here; those that depend on the tensor, at launch.
TMA_MAX_ELEMENT_STRIDE = 8
TMA_INNER_BOX_BYTES = 16  # without interleave, the inner box is a multiple of 16 bytes
TMA_MAX_CHANNELS_PER_PIXEL = 256
TMA_MAX_PIXELS_PER_COLUMN = 1024
# im2col corner offsets by tensor rank: R means each offset lies in [-R, R - 1]
TMA_IM2COL_CORNER_RANGE = {3: 32768, 4: 128, 5: 16}
# tilecute dtype -> CUtensorMapDataType.  TMA moves bytes, so 1-byte types (float8 too)
# travel as UINT8 and 2-byte integers as UINT16.
TMA_DATA_TYPES = {
    "float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "tfloat32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",  # (float32 in memory; TMA moves it as is)
    "float64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "int32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "uint32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "int64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
    "uint64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
    "uint8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "int8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "bool": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "float8_e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "float8_e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "float8_e8m0fnu": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "int16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "uint16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
}
# The driver fills out-of-bounds elements with NaN only for a floating-point tensor map type
# (float8 travels as UINT8, so it cannot).
TMA_NAN_FILL_DATA_TYPES = ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
                           "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "CU_TENSOR_MAP_DATA_TYPE_FLOAT64")
_TMA_SWIZZLE_ENUMS = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
                      64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
_TMA_INTERLEAVE_ENUMS = {0: "CU_TENSOR_MAP_INTERLEAVE_NONE", 16: "CU_TENSOR_MAP_INTERLEAVE_16B",
                         32: "CU_TENSOR_MAP_INTERLEAVE_32B"}
_TMA_L2_PROMOTION_ENUMS = {0: "CU_TENSOR_MAP_L2_PROMOTION_NONE", 64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                           128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
                           256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
_TMA_OOB_FILL_ENUMS = {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
                       "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SYMBOL_USE = re.compile(r"\bsym_([A-Za-z0-9_]+)")
_SCALAR_USE = re.compile(r"\barg_([A-Za-z0-9_]+)")


class LauncherABIError(ValueError):
    """The launch ABI cannot be rendered into a launcher; the message says which rule failed."""


# -- environment ----------------------------------------------------------------------------


def templates_dir() -> Path:
    """The folder of the ``tilecute.templates`` package."""
    from .. import templates  # the package that holds the .j2 files, mapped from templates/

    return Path(templates.__file__).parent


@lru_cache(maxsize=1)
def template_environment() -> jinja2.Environment:
    """The Jinja2 environment every launcher is rendered with."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_launcher(abi: LaunchABI, *, tilecute_version: str) -> str:
    """The C++ source of the launcher for ``abi``; it includes :data:`RUNTIME_HEADER` and
    links :data:`RUNTIME_SOURCE`'s code, which must lie next to it when it is built
    (:func:`write_launcher` puts them there)."""
    context = launcher_context(abi, tilecute_version=tilecute_version)
    return template_environment().get_template(TEMPLATE).render(**context)


def runtime_header() -> Path:
    """The launcher runtime header shipped with tilecute (``templates/tilecute_launcher.h``)."""
    return templates_dir() / RUNTIME_HEADER


def runtime_source() -> Path:
    """The launcher runtime's code (``templates/tilecute_launcher_runtime.cpp``)."""
    return templates_dir() / RUNTIME_SOURCE


def write_launcher(abi: LaunchABI, folder: Path, *, tilecute_version: str) -> Path:
    """Render the launcher for ``abi`` into ``folder/launcher.cpp`` and copy the launcher
    runtime (header and code) next to it, so the folder builds on its own; returns the
    source's path."""
    folder = Path(folder)
    source = folder / LAUNCHER_SOURCE
    source.write_text(render_launcher(abi, tilecute_version=tilecute_version))
    shutil.copyfile(runtime_header(), folder / RUNTIME_HEADER)
    shutil.copyfile(runtime_source(), folder / RUNTIME_SOURCE)
    return source


# -- context --------------------------------------------------------------------------------


def launcher_context(abi: LaunchABI, *, tilecute_version: str) -> dict[str, Any]:
    """The plain values ``launcher.cpp.j2`` renders; raises :class:`LauncherABIError` for an
    ABI the launcher cannot serve."""
    _check_names(abi)
    tensor_indices = [i for i, a in enumerate(abi.args) if isinstance(a, TensorArg)]
    binding = _symbol_binding_sites(abi)
    args, resolved = _arg_contexts(abi, binding)
    # the launch device: the first tensor's that the caller must give; or (none) the first
    # tensor given, a nullable one or a pointer argument's (given_devices); or the current
    # device's
    first = next((abi.args[i] for i in tensor_indices if not abi.args[i].nullable), None)
    kernels = [_kernel_context(abi, k, i) for i, k in enumerate(abi.kernels)]
    descriptors = [p["tma"] for k in kernels for p in k["params"] if p["tma"] is not None]
    for n, d in enumerate(descriptors):
        d["index"] = n
    return {
        "function": abi.function,
        "tilecute_version": tilecute_version,
        "abi_version": abi.version,
        "runtime_header": RUNTIME_HEADER,
        "runtime_source": RUNTIME_SOURCE,
        "exports": {
            "set_cubin": EXPORT_SET_CUBIN,
            "ensure_device": EXPORT_ENSURE_DEVICE,
            "cleanup": EXPORT_CLEANUP,
        },
        "signature": f"{abi.function}({', '.join(a.name for a in abi.args)}[, stream])",
        "num_args": len(abi.args),
        "arg_names": ", ".join(a.name for a in abi.args),
        "args": args,
        "device_tensors": [a for a in args if a["kind"] == "tensor"],
        "device_source": {"name": first.name, "var": f"t_{first.name}"} if first else None,
        "pointer_args": [a for a in args if a["kind"] == "pointer"],
        # no tensor the caller must give: the first tensor (or pointer argument's tensor)
        # given fixes the device
        "given_devices": [{"name": a["name"], "var": a["var"] if a["kind"] == "tensor" else a["tensor_var"]}
                          for a in args if a["kind"] == "pointer" or a["kind"] == "tensor" and a["nullable"]],
        "cascades": _cascade_contexts(abi),
        "resolved_checks": resolved,
        "dtype_names": [  # (one name per DLPack type: tfloat32 tensors are float32 ones;
            # the names of one-lane types: torch's float4_e2m1fn_x2 is 4 bits x 2 lanes)
            {"name": d.name, "code": d.dl_code, "bits": d.bits} for d in DTYPES.values()
            if d.name != "tfloat32" and d.pack == 1
        ],
        "dynamic_smem_limit": DEFAULT_DYNAMIC_SMEM_LIMIT,
        "num_kernels": len(abi.kernels),
        "kernels": kernels,
        "tma_descriptors": descriptors,
        "encodes_tiled_tma": _cpp_bool(any(d["mode"] == "tiled" for d in descriptors)),
        "encodes_im2col_tma": _cpp_bool(any(d["mode"] == "im2col" for d in descriptors)),
        "grid_barrier": _cpp_bool(any(k.cooperative for k in abi.kernels)),
        "l2_window": _l2_window_context(abi),
        "assumes": _assume_contexts(abi),
    }


def _cascade_contexts(abi: LaunchABI) -> list[dict]:
    """The symbols bound from the first of their carriers given (``SymbolSpec.carriers``):
    each a mutable ``sym_<name>`` (0 until bound) and ``sym_<name>_at`` (the place that
    bound it; null while none has), declared before the arguments are read."""
    def place(i: int, field: str, d: int) -> str:
        return f"{abi.args[i].name}.{_where(field, d)}"
    return [{"symbol": s.name, "var": f"sym_{s.name}", "at_var": f"sym_{s.name}_at",
             "required": s.required,
             "carriers": ", ".join(place(*c) for c in s.carriers)}
            for s in abi.symbols if s.carriers]


def _assume_contexts(abi: LaunchABI) -> list[dict]:
    """TileLang's host-evaluable ``T.assume``s (``LaunchABI.assumes``): each a C++
    condition over the symbols and the integer / bool scalar arguments, checked after the
    arguments are read."""
    symbols = {s.name for s in abi.symbols}
    scalars = {a.name for a in abi.args if isinstance(a, ScalarArg)
               and DTYPES[a.dtype].kind in ("int", "uint", "bool")}
    out = []
    for a in abi.assumes:
        unknown = sorted(set(_SYMBOL_USE.findall(a.cpp)) - symbols) + \
            sorted(set(_SCALAR_USE.findall(a.cpp)) - scalars)
        if unknown or not a.text.isprintable():
            raise _fail(abi, f"assume {a.text!r}: its condition {a.cpp!r} reads {unknown}, not "
                             "symbols or integer / bool scalar arguments")
        out.append({"cpp": a.cpp, "text": cpp_string_literal(a.text),
                    "comment": _comment_text(a.text)})
    return out


def _l2_window_context(abi: LaunchABI) -> dict | None:
    """TileLang's ``T.annotate_l2_hit_ratio``: the window's tensor, its bytes as C++ (TVM's
    ``dtype.bytes()``, whole bytes, times the declared shape, as TileLang sizes it) and the
    hit ratio (a double literal the runtime takes as float, as TileLang's host call does)."""
    w = abi.l2_window
    if w is None:
        return None
    arg = next((a for a in abi.args if a.name == w.arg), None)
    if not isinstance(arg, TensorArg):
        raise _fail(abi, f"the L2 window names '{w.arg}', which is no tensor argument")
    if not (isinstance(w.hit_ratio, float) and 0.0 <= w.hit_ratio <= 1.0):
        raise _fail(abi, f"the L2 window's hit ratio {w.hit_ratio!r} is not a fraction in [0, 1]")
    element_bytes = (DTYPES[arg.dtype].bits + 7) // 8
    return {
        "text": f"T.annotate_l2_hit_ratio({{{arg.name}: {w.hit_ratio!r}}})",
        "ptr": f"ptr_{arg.name}",
        "bytes": " * ".join([f"INT64_C({element_bytes})"] + [dim_cpp(d) for d in arg.shape]),
        "hit_ratio": repr(w.hit_ratio),
    }


def _fail(abi: LaunchABI, message: str) -> LauncherABIError:
    return LauncherABIError(f"{abi.function}: {message}")


def _check_names(abi: LaunchABI) -> None:
    if not _IDENTIFIER.match(abi.function):
        raise LauncherABIError(
            f"launch ABI function name {abi.function!r} is not a C identifier"
        )
    if abi.function in RESERVED_EXPORTS:
        raise _fail(abi, f"the name is reserved for a launcher export ({', '.join(RESERVED_EXPORTS)})")
    seen: set[str] = set()
    for a in abi.args:
        if not _IDENTIFIER.match(a.name):
            raise _fail(abi, f"argument name {a.name!r} is not a C identifier")
        if a.name in seen:
            raise _fail(abi, f"two arguments are named {a.name!r}")
        seen.add(a.name)
        if a.dtype not in DTYPES:
            raise _fail(abi, f"argument {a.name!r}: unknown dtype {a.dtype!r}")
    names = [s.name for s in abi.symbols]
    for s in abi.symbols:
        if not _IDENTIFIER.match(s.name):
            raise _fail(abi, f"symbol name {s.name!r} is not a C identifier")
        if names.count(s.name) > 1:
            raise _fail(abi, f"symbol {s.name!r} is declared twice")
    if not abi.kernels:
        raise _fail(abi, "the launch ABI has no kernels")


def _dim_sites(abi: LaunchABI):
    """Every shape and stride entry of every tensor, in check order:
    (arg index, field, dim, entry)."""
    for i, a in enumerate(abi.args):
        if not isinstance(a, TensorArg):
            continue
        for d, x in enumerate(a.shape):
            yield i, "shape", d, x
        for d, x in enumerate(a.strides or ()):
            yield i, "stride", d, x


def _symbol_binding_sites(abi: LaunchABI) -> dict[str, tuple[int, str, int]]:
    """symbol name -> (arg index, field, dim) of the place that binds it, checked against
    the tensors' declared shapes and strides."""
    declared = {s.name: s for s in abi.symbols}
    scalars = _dim_scalars(abi)
    for i, field, d, x in _dim_sites(abi):
        for name in dim_symbols(x):
            if name in scalars and name not in declared:
                if scalars[name] > i:
                    raise _fail(abi, f"argument {abi.args[i].name!r} {field}[{d}] names scalar "
                                f"argument {name!r}, which comes after it")
                continue
            if not _IDENTIFIER.match(name) or name not in declared:
                raise _fail(
                    abi, f"argument {abi.args[i].name!r} {field}[{d}] names symbol {name!r}, "
                    "which the launch ABI does not declare"
                )
        if isinstance(x, (tuple, list)) and not _is_dim_expr(x):
            raise _fail(abi, f"argument {abi.args[i].name!r} {field}[{d}]: {x!r} is not a dim "
                        f"expression ((op, dim, dim) with op one of {sorted(DIM_OPS)})")
        if isinstance(x, int) and field == "shape" and x < 0:
            raise _fail(abi, f"argument {abi.args[i].name!r} shape[{d}] is negative ({x})")
    sites = {}
    for s in abi.symbols:
        if not 0 <= s.arg < len(abi.args) or not isinstance(abi.args[s.arg], TensorArg):
            raise _fail(abi, f"symbol {s.name!r} is bound by argument #{s.arg}, which is not a tensor")
        a = abi.args[s.arg]
        if s.field == "shape":
            dims = a.shape
        elif s.field == "stride":
            dims = a.strides or ()
        else:
            raise _fail(abi, f"symbol {s.name!r}: field must be 'shape' or 'stride', got {s.field!r}")
        if s.scale == 0:
            raise _fail(abi, f"symbol {s.name!r}: scale must not be 0")
        if 0 <= s.dim < len(dims) and (s.scale, s.offset) != (1, 0) and \
                affine_in(dims[s.dim], s.name) != (s.scale, s.offset):
            raise _fail(
                abi, f"symbol {s.name!r} is solved from argument {a.name!r} {s.field}[{s.dim}] "
                f"as {s.scale} * {s.name} + {s.offset}, which is {dim_text(dims[s.dim])!r}"
            )
        if not 0 <= s.dim < len(dims) or ((s.scale, s.offset) == (1, 0) and dims[s.dim] != s.name):
            raise _fail(
                abi, f"symbol {s.name!r} is bound by argument {a.name!r} {s.field}[{s.dim}], "
                f"which is {dims[s.dim] if 0 <= s.dim < len(dims) else 'out of range'!r}"
            )
        if s.divisibility < 1:
            raise _fail(abi, f"symbol {s.name!r}: divisibility must be >= 1, got {s.divisibility}")
        if s.dtype not in ("int32", "int64"):
            raise _fail(abi, f"symbol {s.name!r}: dtype must be int32 or int64, got {s.dtype!r}")
        sites[s.name] = (s.arg, s.field, s.dim)
        if s.carriers:
            _check_carriers(abi, s)
    for name, i in scalars.items():  # read (and so bound) before any tensor that names it
        sites.setdefault(name, (i, "scalar", 0))
    return sites


def _check_carriers(abi: LaunchABI, s) -> None:
    """A symbol bound from the first of several tensors given (``SymbolSpec.carriers``):
    its binding place first, then places where the symbol is the plain dim, each on a
    tensor the caller may pass as None."""
    if s.carriers[0] != (s.arg, s.field, s.dim):
        raise _fail(abi, f"symbol {s.name!r}: its carriers {list(s.carriers)} do not start "
                         "at its binding place")
    for n, (i, field, d) in enumerate(s.carriers):
        a = abi.args[i] if 0 <= i < len(abi.args) else None
        dims = (a.shape if field == "shape" else a.strides or ()) if isinstance(a, TensorArg) else ()
        if not (isinstance(a, TensorArg) and a.nullable and 0 <= d < len(dims)) or \
                (n and dims[d] != s.name):
            raise _fail(abi, f"symbol {s.name!r}: carrier #{n} ({i}, {field!r}, {d}) is not "
                             f"{'a dim' if not n else 'the plain symbol'} of a tensor the "
                             "caller may pass as None")


def _dim_scalars(abi: LaunchABI) -> dict[str, int]:
    """Integer scalar arguments a tensor's dims may name (TileLang's ``T.empty([m + 1])``
    over a scalar parameter ``m``): name -> argument index.  The launcher reads each into
    ``sym_<name>`` and checks those dims against it."""
    return {a.name: i for i, a in enumerate(abi.args)
            if isinstance(a, ScalarArg) and DTYPES[a.dtype].kind not in ("bool", "float")
            and not a.dtype.startswith("float")}


def _is_dim_expr(x) -> bool:
    if isinstance(x, (tuple, list)):
        return len(x) == 3 and x[0] in DIM_OPS and _is_dim_expr(x[1]) and _is_dim_expr(x[2])
    return isinstance(x, (int, str)) and not isinstance(x, bool)


def dim_cpp(x) -> str:
    """A dim expression as C++ over the launcher's ``sym_<name>`` locals (int64)."""
    if isinstance(x, (tuple, list)):
        a, b = dim_cpp(x[1]), dim_cpp(x[2])
        if x[0] in ("floordiv", "mod"):
            return f"tc_{x[0]}({a}, {b})"
        return f"({a} {DIM_OPS[x[0]]} {b})"
    return f"sym_{x}" if isinstance(x, str) else f"INT64_C({int(x)})"


def _where(field: str, d: int) -> str:
    return f"shape[{d}]" if field == "shape" else f"strides[{d}]"


def _value_expr(name: str, field: str, d: int) -> str:
    return f"t_{name}->shape[{d}]" if field == "shape" else f"strides_{name}[{d}]"


def _tma_sources(abi: LaunchABI) -> dict[str, list[KernelParam]]:
    """tensor argument name -> the TMA descriptor parameters over it, in kernel order."""
    sources: dict[str, list[KernelParam]] = {}
    for k in abi.kernels:
        for p in k.params:
            if p.kind == "tma_desc" and p.tma is not None:
                sources.setdefault(p.source, []).append(p)
    return sources


def _arg_contexts(abi: LaunchABI, binding: dict[str, tuple[int, str, int]]) -> tuple[list[dict], list[dict]]:
    """Each argument's checks, and the checks that wait for every argument (``resolved``:
    the dims naming a symbol bound from the first of its carriers given)."""
    divisibility = {s.name: s.divisibility for s in abi.symbols}
    solved = {s.name: (s.scale, s.offset) for s in abi.symbols}
    int64 = {s.name: s.dtype == "int64" for s in abi.symbols}
    named = {n for _, _, _, x in _dim_sites(abi) for n in dim_symbols(x)}
    scalar_syms = {n: i for n, i in _dim_scalars(abi).items() if n in named and n not in int64}
    int64.update({n: abi.args[i].dtype in ("int64", "uint32", "uint64") for n, i in scalar_syms.items()})

    def int64_dim(x) -> bool:
        """The kernel computes dim ``x`` in int64: it names an int64 symbol or holds a
        literal past int32 (the frontend's promotion)."""
        if isinstance(x, (tuple, list)):
            return int64_dim(x[1]) or int64_dim(x[2])
        return int64[x] if isinstance(x, str) else not -2 ** 31 <= x < 2 ** 31
    tma_sources = _tma_sources(abi)
    # Occurrences of a symbol that come before its binding site in check order are
    # compared right after the binding.
    order = {site: n for n, site in enumerate((i, f, d) for i, f, d, _ in _dim_sites(abi))}
    order.update({(i, "scalar", 0): -1 for i in scalar_syms.values()})  # read before the tensors
    deferred: dict[str, list[dict]] = {}
    dim_checks: dict[tuple[int, str], list[dict]] = {}
    # symbols bound from the first carrier given: every other dim naming one is checked once
    # all the arguments are read (``resolved``), a nullable tensor's only where it is given
    cascaded = {s.name: s for s in abi.symbols if s.carriers}
    carrier_of = {c: s for s in cascaded.values() for c in s.carriers}
    resolved: list[dict] = []
    for i, field, d, x in _dim_sites(abi):
        name = abi.args[i].name
        common = {"arg": name, "where": _where(field, d), "value": _value_expr(name, field, d),
                  "guard": f"t_{name}" if abi.args[i].nullable else None}
        pack, last = DTYPES[abi.args[i].dtype].pack, len(abi.args[i].shape) - 1
        if pack > 1 and (d == last) == (field == "shape"):
            # a packed tensor (float4_e2m1fn): its last dim and its other strides count
            # bytes, the declared ones elements (TileLang's binding of a "subtype")
            common["value"] = f"({common['value']} * {pack})"
            common["where"] += f" x {pack} ({abi.args[i].dtype} elements)"
        checks = dim_checks.setdefault((i, field), [])
        # a stride compared with symbols bound elsewhere passes on an extent-1 dim and where
        # it is 0, as TileLang's binder relaxes it (tc_check_stride_symbol)
        stride_extent = {"extent": f"t_{name}->shape[{d}]" if field == "stride" else None}
        if isinstance(x, int):
            op = "static_dim" if field == "shape" else "static_stride"
            checks.append({"op": op, "expected": x, "extent": f"t_{name}->shape[{d}]", **common})
            continue
        if (i, field, d) in carrier_of:  # bind from the first carrier given, check the rest
            sym = carrier_of[(i, field, d)]
            first = (i, field, d) == sym.carriers[0]
            checks.append({
                "op": "cascade", "symbol": sym.name, "var": f"sym_{sym.name}",
                "at_var": f"sym_{sym.name}_at", "int64": int64[sym.name] or int64_dim(x),
                "divisibility": divisibility[sym.name], "place": f"argument '{name}' {common['where']}",
                "text": dim_text(x), "scale": solved[sym.name][0] if first else 1,
                "offset": solved[sym.name][1] if first else 0, **common, **stride_extent,
            })
            continue
        if any(n in cascaded for n in dim_symbols(x)):  # (its plain dims are all carriers)
            resolved.append({"op": "expr", "expected": dim_cpp(x), "text": dim_text(x),
                             "int64": int64_dim(x), **common, **stride_extent})
            continue
        if isinstance(x, (tuple, list)):
            binds = [n for n in dim_symbols(x) if binding[n] == (i, field, d)]
            if binds:  # the symbol solved from this dim: `scale * n + offset`
                n = binds[0]
                checks.append({
                    "op": "solve", "symbol": n, "var": f"sym_{n}", "text": dim_text(x),
                    "scale": solved[n][0], "offset": solved[n][1], "int64": int64_dim(x),
                    "divisibility": divisibility[n], "deferred": deferred.setdefault(n, []),
                    **common,
                })
                continue
            # an expression checked once its last symbol is bound
            last = max(dim_symbols(x), key=lambda n: order[binding[n]])
            compare = {"op": "expr", "expected": dim_cpp(x), "text": dim_text(x),
                       "int64": int64_dim(x), **common, **stride_extent}
            if order[binding[last]] < order[(i, field, d)]:
                checks.append(compare)
            else:
                deferred.setdefault(last, []).append(compare)
            continue
        site = binding[x]
        bound_at = f"argument '{abi.args[site[0]].name}' " + (
            "(a scalar)" if site[1] == "scalar" else _where(site[1], site[2]))
        if site == (i, field, d):
            checks.append({
                "op": "bind", "symbol": x, "var": f"sym_{x}", "int64": int64[x],
                "divisibility": divisibility[x], "deferred": deferred.setdefault(x, []),
                **common,
            })
            continue
        compare = {"op": "match", "symbol": x, "var": f"sym_{x}", "bound_at": bound_at, **common,
                   **stride_extent}
        if order[site] < order[(i, field, d)]:
            checks.append(compare)
        else:
            deferred.setdefault(x, []).append(compare)

    out = []
    for i, a in enumerate(abi.args):
        if isinstance(a, ScalarArg):
            out.append(_scalar_context(abi, i, a))
            if a.name in scalar_syms:  # a dim names it: the dims' checks read sym_<name>
                out[-1]["symbol_var"] = f"sym_{a.name}"
            continue
        if isinstance(a, PointerArg):
            out.append(_pointer_context(abi, i, a))
            continue
        if a.strides is not None and len(a.strides) != len(a.shape):
            raise _fail(abi, f"argument {a.name!r}: {len(a.strides)} strides for rank {len(a.shape)}")
        _check_align(abi, a)
        dtype = DTYPES[a.dtype]
        dims = ", ".join(dim_text(x) for x in a.shape)
        layout = "contiguous" if a.strides is None else "strides (" + ", ".join(dim_text(x) for x in a.strides) + ")"
        summary = f"tensor {a.dtype}[{dims}], {layout}"
        if a.nullable:
            summary += ", or None (no kernel uses it: the null address, unchecked)"
        if dtype.pack > 1:
            summary += (f" ({dtype.pack} elements to a byte: the tensor's last dim and other "
                        f"strides count bytes)")
        if a.align > 1:
            summary += f", data aligned to {a.align} bytes"
        tma = None
        if a.name in tma_sources:
            # One global layout per tensor serves all its descriptors; interleave 32 asks for
            # 32-byte alignment of the address and strides, everything else for 16.
            granule = max(32 if p.tma.interleave == 32 else 16 for p in tma_sources[a.name])
            tma = {
                "var": f"tma_{a.name}",
                "strides": "nullptr" if a.strides is None else f"strides_{a.name}",
                "element_bytes": dtype.bytes,
                "granule": granule,
                "params": ", ".join(_comment_text(n) for n in sorted({p.name for p in tma_sources[a.name]})),
            }
        out.append({
            "kind": "tensor",
            "index": i,
            "name": a.name,
            "var": f"t_{a.name}",
            "ptr": f"ptr_{a.name}",
            "strides_var": f"strides_{a.name}",
            "summary": summary,
            "dtype": {"name": a.dtype, "code": dtype.dl_code, "bits": dtype.bits, "pack": dtype.pack},
            "rank": len(a.shape),
            "shape_checks": dim_checks.get((i, "shape"), []),
            "contiguous": a.strides is None,
            "stride_checks": dim_checks.get((i, "stride"), []),
            "align": a.align,
            "offsets_int32": a.offsets_int32,
            "offsets_int64": a.offsets_int64,
            "tma": tma,
            "nullable": a.nullable,
        })
    return out, resolved


_INT_RANGES = {
    "int8": ("INT64_C(-128)", "INT64_C(127)"),
    "int16": ("INT64_C(-32768)", "INT64_C(32767)"),
    "int32": ("INT64_C(-2147483648)", "INT64_C(2147483647)"),
    "int64": ("INT64_MIN", "INT64_MAX"),
    "uint8": ("INT64_C(0)", "INT64_C(255)"),
    "uint16": ("INT64_C(0)", "INT64_C(65535)"),
    "uint32": ("INT64_C(0)", "INT64_C(4294967295)"),
    # Python ints reach the launcher as int64 (TVM FFI), so uint64 values stop at 2**63 - 1.
    "uint64": ("INT64_C(0)", "INT64_MAX"),
}


def _scalar_context(abi: LaunchABI, i: int, a: ScalarArg) -> dict:
    info = DTYPES[a.dtype]
    if a.dtype.startswith("float8"):
        raise _fail(abi, f"scalar argument {a.name!r}: {a.dtype} scalars are not supported")
    common = {"kind": "scalar", "index": i, "name": a.name, "var": f"arg_{a.name}",
              "dtype_name": a.dtype, "summary": f"scalar {a.dtype}", "symbol_var": None}
    if info.kind == "bool":
        return {**common, "reader": "bool", "value_type": "bool"}
    if info.kind == "float":
        return {**common, "reader": "float", "value_type": "double"}
    lo, hi = _INT_RANGES[a.dtype]
    return {**common, "reader": "int", "value_type": "int64_t", "lo": lo, "hi": hi}


def _check_align(abi: LaunchABI, a) -> None:
    """A tensor's or pointer's assumed alignment is a power of two."""
    if a.align < 1 or a.align & (a.align - 1):
        raise _fail(abi, f"argument {a.name!r}: align must be a power of two, got {a.align}")


def _pointer_context(abi: LaunchABI, i: int, a: PointerArg) -> dict:
    """A pointer argument (TileLang's ``p: T.ptr``): a tensor's data pointer or an int,
    read into an int64 address."""
    if a.dtype != "int64":
        raise _fail(abi, f"pointer argument {a.name!r}: an address is int64, got {a.dtype!r}")
    _check_align(abi, a)
    summary = "pointer: a tensor (its data pointer) or an int address"
    if a.align > 1:
        summary += f", aligned to {a.align} bytes"
    return {"kind": "pointer", "index": i, "name": a.name, "var": f"arg_{a.name}",
            "tensor_var": f"t_{a.name}", "align": a.align, "summary": summary}


def _convert(value: str, dtype: str) -> str:
    """C++ expression converting ``value`` (int64_t, double or bool) to a parameter of ``dtype``."""
    if dtype == "float16":
        return f"tc_float16_bits(static_cast<double>({value}))"
    if dtype == "bfloat16":
        return f"tc_bfloat16_bits(static_cast<double>({value}))"
    return f"static_cast<{DTYPES[dtype].cpp}>({value})"


def _param_context(abi: LaunchABI, k: KernelLaunch, p: KernelParam, var: str) -> dict:
    where = f"kernel {k.symbol!r} parameter {p.name!r}"
    if p.dtype not in DTYPES:
        raise _fail(abi, f"{where}: unknown dtype {p.dtype!r}")
    if p.kind == "pointer":
        arg = next((a for a in abi.args if a.name == p.source), None)
        if not isinstance(arg, TensorArg):
            raise _fail(abi, f"{where}: a pointer parameter needs a tensor argument, got {p.source!r}")
        if arg.dtype != p.dtype:
            raise _fail(abi, f"{where}: points to {p.dtype} but argument {arg.name!r} is {arg.dtype}")
        return {"var": var, "cpp_type": "void*", "init": f"ptr_{arg.name}",
                "comment": f"data pointer of {arg.name} ({arg.dtype})", "tma": None}
    if p.kind == "scalar":
        if p.dtype.startswith("float8"):
            raise _fail(abi, f"{where}: {p.dtype} scalar parameters are not supported")
        cpp = DTYPES[p.dtype].cpp
        if p.from_symbol:
            symbol = next((s for s in abi.symbols if s.name == p.source), None)
            if symbol is None:
                raise _fail(abi, f"{where}: symbol {p.source!r} is not declared")
            if symbol.dtype == "int64" and p.dtype not in ("int64", "uint64"):
                raise _fail(abi, f"{where}: int64 symbol {p.source!r} as {p.dtype} would be "
                                 "truncated")
            return {"var": var, "cpp_type": cpp, "init": _convert(f"sym_{p.source}", p.dtype),
                    "comment": f"symbol {p.source} as {p.dtype}", "tma": None}
        arg = next((a for a in abi.args if a.name == p.source), None)
        if isinstance(arg, PointerArg):
            if p.dtype != "int64":
                raise _fail(abi, f"{where}: the address of pointer argument {arg.name!r} is "
                                 f"int64, the parameter {p.dtype}")
            return {"var": var, "cpp_type": "int64_t", "init": f"arg_{arg.name}",
                    "comment": f"address of pointer argument {arg.name}", "tma": None}
        if not isinstance(arg, ScalarArg):
            raise _fail(abi, f"{where}: a scalar parameter needs a scalar argument, got {p.source!r}")
        if arg.dtype != p.dtype:
            raise _fail(abi, f"{where}: is {p.dtype} but argument {arg.name!r} is {arg.dtype}")
        return {"var": var, "cpp_type": cpp, "init": _convert(f"arg_{arg.name}", p.dtype),
                "comment": f"scalar argument {arg.name} ({arg.dtype})", "tma": None}
    if p.kind == "grid_barrier":
        if not any(x.cooperative for x in abi.kernels):
            raise _fail(abi, f"{where}: a grid barrier parameter but no kernel calls T.sync_grid()")
        return {"var": var, "cpp_type": "CUdeviceptr", "init": "tc_grid_barrier(tc_launcher, device_id)",
                "comment": "T.sync_grid()'s barrier word (the launcher's, per device)", "tma": None}
    if p.kind == "tma_desc":
        tma = _tma_context(abi, k, p, var, where)
        return {"var": var, "cpp_type": "CUtensorMap", "init": None,
                "comment": f"TMA descriptor over {p.source}, encoded below", "tma": tma}
    raise _fail(abi, f"{where}: unknown parameter kind {p.kind!r}")


def _tma_context(abi: LaunchABI, k: KernelLaunch, p: KernelParam, var: str, where: str) -> dict:
    """Check one TMA descriptor parameter against the rules of cuda.h that the launch ABI
    alone decides, and describe it for the template.  Everything stays in tensor axis order;
    the launcher's encode helpers reverse it into TMA order."""
    spec = p.tma
    if spec is None:
        raise _fail(abi, f"{where}: a TMA descriptor parameter needs its TmaSpec (KernelParam.tma is None)")
    arg = next((a for a in abi.args if a.name == p.source), None)
    if not isinstance(arg, TensorArg):
        raise _fail(abi, f"{where}: a TMA descriptor needs a tensor argument, got {p.source!r}")
    where = f"{where} (TMA descriptor over argument {arg.name!r})"

    def bad(rule: str) -> LauncherABIError:
        return _fail(abi, f"{where}: {rule}")

    if arg.dtype != p.dtype:
        raise bad(f"the descriptor is {p.dtype} but the argument is {arg.dtype}; they must match")
    if spec.mode not in TMA_MODES:
        raise bad(f"mode must be one of {TMA_MODES}, got {spec.mode!r}")
    data_type = TMA_DATA_TYPES.get(arg.dtype)
    if data_type is None:
        raise bad(f"{arg.dtype} has no TMA data type")
    element_bytes = DTYPES[arg.dtype].bytes
    rank = len(arg.shape)
    im2col = spec.mode == "im2col"
    lowest_rank = 3 if im2col else 1
    if not lowest_rank <= rank <= TMA_MAX_RANK:
        raise bad(f"{spec.mode} mode needs a tensor of rank {lowest_rank} to {TMA_MAX_RANK}, "
                  f"the argument has rank {rank}")

    if spec.swizzle not in TMA_SWIZZLES:
        raise bad(f"swizzle must be one of {TMA_SWIZZLES} (bytes), got {spec.swizzle!r}")
    if spec.interleave not in TMA_INTERLEAVES:
        raise bad(f"interleave must be one of {TMA_INTERLEAVES} (bytes), got {spec.interleave!r}")
    if spec.l2_promotion not in TMA_L2_PROMOTIONS:
        raise bad(f"l2_promotion must be one of {TMA_L2_PROMOTIONS} (bytes), got {spec.l2_promotion!r}")
    if spec.oob_fill not in TMA_OOB_FILLS:
        raise bad(f"oob_fill must be one of {TMA_OOB_FILLS}, got {spec.oob_fill!r}")
    if spec.oob_fill == "nan" and data_type not in TMA_NAN_FILL_DATA_TYPES:
        raise bad(f"oob_fill 'nan' needs a floating-point TMA data type, {arg.dtype} travels as "
                  f"{data_type.removeprefix('CU_TENSOR_MAP_DATA_TYPE_')}")
    if spec.interleave != 0 and rank < 3:
        raise bad(f"interleave {spec.interleave} needs a tensor of rank 3 or more, the argument has rank {rank}")
    if spec.interleave == 32 and spec.swizzle != 32:
        raise bad(f"interleave 32 needs swizzle 32, got swizzle {spec.swizzle}")

    if spec.element_strides is not None:
        if len(spec.element_strides) != rank:
            raise bad(f"element_strides has {len(spec.element_strides)} entries for rank {rank}; "
                      "it needs one per tensor axis (or None)")
        for d, e in enumerate(spec.element_strides):
            if not 1 <= e <= TMA_MAX_ELEMENT_STRIDE:
                raise bad(f"element_strides[{d}] must be in 1..{TMA_MAX_ELEMENT_STRIDE}, got {e}")
    element_strides = list(spec.element_strides or (1,) * rank)

    if im2col:
        spatial = rank - 2
        if spec.box:
            raise bad(f"im2col mode takes its box from channels_per_pixel and pixels_per_column; "
                      f"box must be empty, got {list(spec.box)}")
        limit = TMA_IM2COL_CORNER_RANGE[rank]
        for field in ("lower_corner", "upper_corner"):
            corner = getattr(spec, field)
            if len(corner) != spatial:
                raise bad(f"{field} has {len(corner)} entries; rank {rank} im2col needs one per "
                          f"spatial axis ({spatial})")
            for d, c in enumerate(corner):
                if not -limit <= c <= limit - 1:
                    raise bad(f"{field}[{d}] must be in [{-limit}, {limit - 1}] for rank {rank}, got {c}")
        if not 1 <= spec.channels_per_pixel <= TMA_MAX_CHANNELS_PER_PIXEL:
            raise bad(f"channels_per_pixel must be in 1..{TMA_MAX_CHANNELS_PER_PIXEL}, "
                      f"got {spec.channels_per_pixel}")
        if not 1 <= spec.pixels_per_column <= TMA_MAX_PIXELS_PER_COLUMN:
            raise bad(f"pixels_per_column must be in 1..{TMA_MAX_PIXELS_PER_COLUMN}, "
                      f"got {spec.pixels_per_column}")
        inner, inner_name = spec.channels_per_pixel, "channels_per_pixel"
        box = [0] * rank
    else:
        if spec.lower_corner or spec.upper_corner or spec.channels_per_pixel or spec.pixels_per_column:
            raise bad("lower_corner, upper_corner, channels_per_pixel and pixels_per_column are "
                      "im2col fields; a tiled descriptor leaves them unset")
        if len(spec.box) != rank:
            raise bad(f"box has {len(spec.box)} entries for rank {rank}; tiled mode needs one per tensor axis")
        for d, b in enumerate(spec.box):
            if not 1 <= b <= TMA_MAX_BOX:
                raise bad(f"box[{d}] must be in 1..{TMA_MAX_BOX}, got {b}")
        inner, inner_name = spec.box[-1], f"box[{rank - 1}]"
        box = list(spec.box)
    inner_bytes = inner * element_bytes
    if spec.interleave == 0:
        if not im2col and inner_bytes % TMA_INNER_BOX_BYTES != 0:
            raise bad(f"without interleave the inner box ({inner_name} * {element_bytes} bytes = "
                      f"{inner_bytes} bytes) must be a multiple of {TMA_INNER_BOX_BYTES} bytes")
        if spec.swizzle != 0 and inner_bytes > spec.swizzle:
            raise bad(f"with swizzle {spec.swizzle} the inner box ({inner_name} * {element_bytes} bytes = "
                      f"{inner_bytes} bytes) must be at most {spec.swizzle} bytes")

    pad = TMA_MAX_RANK - rank
    corner_pad = 3 - max(rank - 2, 0)
    return {
        "index": None,  # set by launcher_context: the row of kTmaDescriptors
        "var": var,
        "mode": spec.mode,
        "global_var": f"tma_{arg.name}",
        "kernel_literal": cpp_string_literal(k.symbol),
        "param_literal": cpp_string_literal(p.name),
        "arg": arg.name,
        "data_type": data_type,
        "rank": rank,
        "box": box + [0] * pad,
        "element_strides": element_strides + [0] * pad,
        "interleave": _TMA_INTERLEAVE_ENUMS[spec.interleave],
        "swizzle": _TMA_SWIZZLE_ENUMS[spec.swizzle],
        "l2_promotion": _TMA_L2_PROMOTION_ENUMS[spec.l2_promotion],
        "oob_fill": _TMA_OOB_FILL_ENUMS[spec.oob_fill],
        "lower_corner": list(spec.lower_corner) + [0] * corner_pad if im2col else [0, 0, 0],
        "upper_corner": list(spec.upper_corner) + [0] * corner_pad if im2col else [0, 0, 0],
        "channels_per_pixel": spec.channels_per_pixel,
        "pixels_per_column": spec.pixels_per_column,
        "summary": _tma_summary(k, p, arg, spec),
    }


def _tma_summary(k: KernelLaunch, p: KernelParam, arg: TensorArg, spec: TmaSpec) -> str:
    """One line for the generated code: which argument, mode, box, swizzle and the rest."""
    dims = ", ".join(dim_text(x) for x in arg.shape)
    parts = [f"kernel '{_comment_text(k.symbol)}' parameter '{_comment_text(p.name)}': "
             f"{arg.name} {arg.dtype}[{dims}]", spec.mode]
    if spec.mode == "im2col":
        parts += [f"lower corner {list(spec.lower_corner)}", f"upper corner {list(spec.upper_corner)}",
                  f"{spec.channels_per_pixel} channels per pixel",
                  f"{spec.pixels_per_column} pixels per column"]
    else:
        parts.append(f"box {list(spec.box)}")
    if spec.element_strides is not None:
        parts.append(f"element strides {list(spec.element_strides)}")
    parts.append(f"swizzle {spec.swizzle}B" if spec.swizzle else "no swizzle")
    if spec.interleave:
        parts.append(f"interleave {spec.interleave}B")
    if spec.l2_promotion:
        parts.append(f"L2 promotion {spec.l2_promotion}B")
    parts.append(f"out-of-bounds {'NaN' if spec.oob_fill == 'nan' else 'zero'}")
    return ", ".join(parts)


def grid_text(expr: str) -> str:
    """A grid expression of the ABI as the program reads (``tc_ceildiv(sym_M, 64)`` is
    ``ceildiv(M, 64)``), for the launcher's messages."""
    return re.sub(r"\b(?:sym_|arg_|tc_)", "", expr)


def _kernel_context(abi: LaunchABI, k: KernelLaunch, index: int) -> dict:
    label = f"kernel {k.symbol!r}"
    if not k.symbol:
        raise _fail(abi, f"kernel #{index} has an empty symbol")
    if len(k.grid) != 3 or len(k.block) != 3:
        raise _fail(abi, f"{label}: grid and block need three entries each")
    symbols = {s.name for s in abi.symbols}
    int_scalars = {a.name for a in abi.args if isinstance(a, ScalarArg)
                   and DTYPES[a.dtype].kind not in ("bool", "float")}
    for what, expr in [("grid", g) for g in k.grid] + \
            ([("shared memory", k.launch_smem)] if k.launch_smem else []):
        unknown = sorted(set(_SYMBOL_USE.findall(expr)) - symbols)
        if unknown:
            raise _fail(abi, f"{label}: {what} expression {expr!r} uses undeclared symbols "
                             f"{unknown}")
        unknown = sorted(set(_SCALAR_USE.findall(expr)) - int_scalars)
        if unknown:
            raise _fail(abi, f"{label}: {what} expression {expr!r} uses {unknown}, not integer "
                             "scalar arguments")
    if any(b < 1 for b in k.block) or k.block[0] * k.block[1] * k.block[2] > MAX_THREADS_PER_BLOCK:
        raise _fail(abi, f"{label}: block {tuple(k.block)} is not a valid CUDA block "
                         f"(1 to {MAX_THREADS_PER_BLOCK} threads)")
    if k.dynamic_smem < 0:
        raise _fail(abi, f"{label}: dynamic shared memory is negative ({k.dynamic_smem})")
    cluster = None
    if k.cluster is not None:
        if len(k.cluster) != 3 or any(c < 1 for c in k.cluster):
            raise _fail(abi, f"{label}: cluster {k.cluster} needs three positive entries")
        cluster = list(k.cluster)
    params = []
    grid_vars = [f"k{index}_grid_{c}" for c in "xyz"]
    params_var = f"k{index}_params"
    smem_var = f"k{index}_smem"
    used: set[str] = {*grid_vars, params_var, smem_var}  # locals a parameter must not shadow
    for p in k.params:
        base = f"k{index}_" + re.sub(r"\W", "_", p.name)
        var, n = base, 1
        while var in used:
            n += 1
            var = f"{base}_{n}"
        used.add(var)
        params.append(_param_context(abi, k, p, var))
    cluster_size = 1 if cluster is None else cluster[0] * cluster[1] * cluster[2]
    return {
        "index": index,
        "symbol": k.symbol,
        "symbol_literal": cpp_string_literal(k.symbol),
        "grid": list(k.grid),
        "grid_text": [cpp_string_literal(grid_text(g)) for g in k.grid],
        "grid_vars": grid_vars,
        "block": list(k.block),
        "dynamic_smem": k.dynamic_smem,
        "raise_dynamic_smem_limit": _cpp_bool(k.dynamic_smem > DEFAULT_DYNAMIC_SMEM_LIMIT),
        "launch_smem": k.launch_smem,
        "launch_sized_smem": _cpp_bool(bool(k.launch_smem)),
        "smem_var": smem_var,
        "cluster": cluster if cluster is not None else [0, 0, 0],
        "non_portable_cluster": _cpp_bool(cluster_size > PORTABLE_CLUSTER_SIZE),
        "pdl": _cpp_bool(k.pdl),
        "cooperative": _cpp_bool(k.cooperative),
        "params": params,
        "params_var": params_var,
        "param_addresses": [f"&{p['var']}" for p in params],
    }


def _comment_text(text: str) -> str:
    """``text`` safe inside a ``//`` comment: printable ASCII, no backslash."""
    return "".join(c if 0x20 <= ord(c) < 0x7F and c != "\\" else "?" for c in text)


def _cpp_bool(value: bool) -> str:
    return "true" if value else "false"


def cpp_string_literal(text: str) -> str:
    """``text`` as a C++ string literal (octal escapes for anything unprintable)."""
    out = []
    for ch in text.encode("utf-8"):
        c = chr(ch)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= ch < 0x7F and c != "?":  # '?' avoids trigraphs
            out.append(c)
        else:
            out.append(f"\\{ch:03o}")
    return '"' + "".join(out) + '"'
