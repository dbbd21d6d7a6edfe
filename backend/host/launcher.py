"""Render the C++ launcher of a compiled function from its :class:`LaunchABI`.

All decisions are made here, in Python: which checks each argument gets and in which
order, where each symbol is bound and where it is compared, the C++ type and value of
every kernel parameter.  The result is a plain context of strings, ints, lists and dicts;
``templates/launcher.cpp.j2`` only prints it (``StrictUndefined``: a missing value is an
error, never an empty string).  ``docs/launch-abi.md`` describes what the generated code
does.

Imports jinja2 and the runtime's ABI and dtype tables; no CUTLASS, no torch.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..runtime.abi import KernelLaunch, KernelParam, LaunchABI, ScalarArg, TensorArg
from ..runtime.dtypes import DTYPES

TEMPLATE = "launcher.cpp.j2"

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
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in per function
PORTABLE_CLUSTER_SIZE = 8  # above this a kernel must allow non-portable cluster sizes

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SYMBOL_USE = re.compile(r"\bsym_([A-Za-z0-9_]+)")


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
    """The C++ source of the launcher for ``abi``."""
    context = launcher_context(abi, tilecute_version=tilecute_version)
    return template_environment().get_template(TEMPLATE).render(**context)


# -- context --------------------------------------------------------------------------------


def launcher_context(abi: LaunchABI, *, tilecute_version: str) -> dict[str, Any]:
    """The plain values ``launcher.cpp.j2`` renders; raises :class:`LauncherABIError` for an
    ABI the launcher cannot serve."""
    _check_names(abi)
    tensor_indices = [i for i, a in enumerate(abi.args) if isinstance(a, TensorArg)]
    if not tensor_indices:
        raise LauncherABIError(
            f"{abi.function}: the launcher needs at least one tensor argument "
            "(the launch device is the device of the first tensor)"
        )
    binding = _symbol_binding_sites(abi)
    args = _arg_contexts(abi, binding)
    first = abi.args[tensor_indices[0]]
    return {
        "function": abi.function,
        "tilecute_version": tilecute_version,
        "abi_version": abi.version,
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
        "device_source": {"name": first.name, "var": f"t_{first.name}"},
        "dtype_names": [
            {"name": d.name, "code": d.dl_code, "bits": d.bits} for d in DTYPES.values()
        ],
        "dynamic_smem_limit": DEFAULT_DYNAMIC_SMEM_LIMIT,
        "num_kernels": len(abi.kernels),
        "kernels": [_kernel_context(abi, k, i) for i, k in enumerate(abi.kernels)],
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
    for i, field, d, x in _dim_sites(abi):
        if isinstance(x, str) and x not in declared:
            raise _fail(
                abi, f"argument {abi.args[i].name!r} {field}[{d}] names symbol {x!r}, "
                "which the launch ABI does not declare"
            )
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
        if not 0 <= s.dim < len(dims) or dims[s.dim] != s.name:
            raise _fail(
                abi, f"symbol {s.name!r} is bound by argument {a.name!r} {s.field}[{s.dim}], "
                f"which is {dims[s.dim] if 0 <= s.dim < len(dims) else 'out of range'!r}"
            )
        if s.divisibility < 1:
            raise _fail(abi, f"symbol {s.name!r}: divisibility must be >= 1, got {s.divisibility}")
        sites[s.name] = (s.arg, s.field, s.dim)
    return sites


def _where(field: str, d: int) -> str:
    return f"shape[{d}]" if field == "shape" else f"strides[{d}]"


def _value_expr(name: str, field: str, d: int) -> str:
    return f"t_{name}->shape[{d}]" if field == "shape" else f"strides_{name}[{d}]"


def _arg_contexts(abi: LaunchABI, binding: dict[str, tuple[int, str, int]]) -> list[dict]:
    divisibility = {s.name: s.divisibility for s in abi.symbols}
    # Occurrences of a symbol that come before its binding site in check order are
    # compared right after the binding.
    order = {site: n for n, site in enumerate((i, f, d) for i, f, d, _ in _dim_sites(abi))}
    deferred: dict[str, list[dict]] = {}
    dim_checks: dict[tuple[int, str], list[dict]] = {}
    for i, field, d, x in _dim_sites(abi):
        name = abi.args[i].name
        common = {"arg": name, "where": _where(field, d), "value": _value_expr(name, field, d)}
        checks = dim_checks.setdefault((i, field), [])
        if isinstance(x, int):
            op = "static_dim" if field == "shape" else "static_stride"
            checks.append({"op": op, "expected": x, "extent": f"t_{name}->shape[{d}]", **common})
            continue
        site = binding[x]
        bound_at = f"argument '{abi.args[site[0]].name}' {_where(site[1], site[2])}"
        if site == (i, field, d):
            checks.append({
                "op": "bind", "symbol": x, "var": f"sym_{x}",
                "divisibility": divisibility[x], "deferred": deferred.setdefault(x, []),
                **common,
            })
            continue
        compare = {"op": "match", "symbol": x, "var": f"sym_{x}", "bound_at": bound_at, **common}
        if order[site] < order[(i, field, d)]:
            checks.append(compare)
        else:
            deferred.setdefault(x, []).append(compare)

    out = []
    for i, a in enumerate(abi.args):
        if isinstance(a, ScalarArg):
            out.append(_scalar_context(abi, i, a))
            continue
        if a.strides is not None and len(a.strides) != len(a.shape):
            raise _fail(abi, f"argument {a.name!r}: {len(a.strides)} strides for rank {len(a.shape)}")
        if a.align < 1 or a.align & (a.align - 1):
            raise _fail(abi, f"argument {a.name!r}: align must be a power of two, got {a.align}")
        dtype = DTYPES[a.dtype]
        dims = ", ".join(str(x) for x in a.shape)
        layout = "contiguous" if a.strides is None else "strides (" + ", ".join(str(x) for x in a.strides) + ")"
        summary = f"tensor {a.dtype}[{dims}], {layout}"
        if a.align > 1:
            summary += f", data aligned to {a.align} bytes"
        out.append({
            "kind": "tensor",
            "index": i,
            "name": a.name,
            "var": f"t_{a.name}",
            "ptr": f"ptr_{a.name}",
            "strides_var": f"strides_{a.name}",
            "summary": summary,
            "dtype": {"name": a.dtype, "code": dtype.dl_code, "bits": dtype.bits},
            "rank": len(a.shape),
            "shape_checks": dim_checks.get((i, "shape"), []),
            "contiguous": a.strides is None,
            "stride_checks": dim_checks.get((i, "stride"), []),
            "align": a.align,
        })
    return out


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
              "dtype_name": a.dtype, "summary": f"scalar {a.dtype}"}
    if info.kind == "bool":
        return {**common, "reader": "bool", "value_type": "bool"}
    if info.kind == "float":
        return {**common, "reader": "float", "value_type": "double"}
    lo, hi = _INT_RANGES[a.dtype]
    return {**common, "reader": "int", "value_type": "int64_t", "lo": lo, "hi": hi}


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
                "comment": f"data pointer of {arg.name} ({arg.dtype})"}
    if p.kind == "scalar":
        if p.dtype.startswith("float8"):
            raise _fail(abi, f"{where}: {p.dtype} scalar parameters are not supported")
        cpp = DTYPES[p.dtype].cpp
        if p.from_symbol:
            if p.source not in {s.name for s in abi.symbols}:
                raise _fail(abi, f"{where}: symbol {p.source!r} is not declared")
            return {"var": var, "cpp_type": cpp, "init": _convert(f"sym_{p.source}", p.dtype),
                    "comment": f"symbol {p.source} as {p.dtype}"}
        arg = next((a for a in abi.args if a.name == p.source), None)
        if not isinstance(arg, ScalarArg):
            raise _fail(abi, f"{where}: a scalar parameter needs a scalar argument, got {p.source!r}")
        if arg.dtype != p.dtype:
            raise _fail(abi, f"{where}: is {p.dtype} but argument {arg.name!r} is {arg.dtype}")
        return {"var": var, "cpp_type": cpp, "init": _convert(f"arg_{arg.name}", p.dtype),
                "comment": f"scalar argument {arg.name} ({arg.dtype})"}
    if p.kind == "tma_desc":
        raise _fail(abi, f"{where}: TMA descriptor parameters are not supported by the launcher yet")
    raise _fail(abi, f"{where}: unknown parameter kind {p.kind!r}")


def _kernel_context(abi: LaunchABI, k: KernelLaunch, index: int) -> dict:
    label = f"kernel {k.symbol!r}"
    if not k.symbol:
        raise _fail(abi, f"kernel #{index} has an empty symbol")
    if len(k.grid) != 3 or len(k.block) != 3:
        raise _fail(abi, f"{label}: grid and block need three entries each")
    symbols = {s.name for s in abi.symbols}
    for expr in k.grid:
        unknown = sorted(set(_SYMBOL_USE.findall(expr)) - symbols)
        if unknown:
            raise _fail(abi, f"{label}: grid expression {expr!r} uses undeclared symbols {unknown}")
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
    used: set[str] = {*grid_vars, params_var}  # locals a parameter must not shadow
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
        "grid_vars": grid_vars,
        "block": list(k.block),
        "dynamic_smem": k.dynamic_smem,
        "raise_dynamic_smem_limit": _cpp_bool(k.dynamic_smem > DEFAULT_DYNAMIC_SMEM_LIMIT),
        "cluster": cluster if cluster is not None else [0, 0, 0],
        "non_portable_cluster": _cpp_bool(cluster_size > PORTABLE_CLUSTER_SIZE),
        "params": params,
        "params_var": params_var,
        "param_addresses": [f"&{p['var']}" for p in params],
    }


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
