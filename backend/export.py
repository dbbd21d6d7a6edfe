"""``tilecute export``: compiled kernels as a self-contained package for several archs.

    tilecute export kernels.py[:ATTR] -o dist --arch sm_90a,sm_80 [--name PKG] [--wheel]

What is exported (``ATTR``, or without it every kernel the module defines at top level):
a ``@T.prim_func``; a compiled kernel (``tilecute.compile(...)``, a ``@tilecute.jit``
factory's result, an eager kernel's ``.compile(...)``); a ``@tilecute.jit`` factory or
eager kernel, meaning every specialization the module compiled; a list of these (one
package kernel per function name, its items the specializations) or a dict (one package
kernel per key).  Each is compiled again, from its IR and options, for every ``--arch``
(through the cache: one entry per kernel, variant and arch), its cubin produced, and
copied into ``OUTDIR/PKG/``:

    PKG/__init__.py                 PKG.<kernel>(...), from _runtime (stdlib + tvm_ffi)
    PKG/_runtime.py                 a copy of tilecute/runtime/package.py
    PKG/manifest.json               kernels, launch ABIs, archs, versions, sha256 of every file
    PKG/include/PKG.h               C++ API over TVM FFI's C ABI (DLTensor*, a stream)
    PKG/kernels/<kernel>/<variant>/<arch>/{launcher.so, kernel.cubin, abi.json, ...}

One launcher per (kernel, variant, arch): a launch ABI may differ by arch (TMA descriptor
parameters on sm_90a only), and each launcher is the one the cache built and checked
against its cubin.  docs/export.md has the details.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import sysconfig
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any, Optional

from .ir import nodes as N
from .runtime.entry import MANIFEST, SCHEMA, file_record, load_manifest, verify_entry, write_manifest

# what each (kernel, variant, arch) folder holds, from the cache entry
ENTRY_FILES = ("launcher.so", "kernel.cubin", "abi.json", "launcher.cpp", "tilecute_launcher.h",
               "tilecute_launcher_runtime.cpp", "kernel_cute.py")
_RESERVED = {"PackageError", "kernels", "manifest"}


class ExportError(ValueError):
    """What ``tilecute export`` cannot export, named with the module attribute."""


class ModuleImportError(Exception):
    """Importing the module to export raised: the message is the exception with only the
    module's own frames of its traceback (none of tilecute's or importlib's)."""

    def __init__(self, path: Path, error: BaseException):
        from . import runtime

        # tilecute's folders: the package's and its runtime's (apart in an editable install)
        own = [Path(p).resolve() for p in (*sys.modules[__package__].__path__,
                                           *runtime.__path__)]
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if not f.filename.startswith("<frozen")
                  and not any(Path(f.filename).resolve().is_relative_to(o) for o in own)]
        super().__init__(f"importing {path} raised:\n"
                         + "".join(traceback.format_list(frames))
                         + "".join(traceback.format_exception_only(type(error), error)).rstrip())


@dataclasses.dataclass
class Variant:
    func: N.PrimFunc
    options: dict
    checks: list  # (position, axis, divisor): when this variant serves a call


@dataclasses.dataclass
class ExportKernel:
    name: str
    out_idx: list
    returns: Optional[list]
    variants: list


# ---- what a module attribute holds -----------------------------------------------------
def _source_variant(kernel, checks=()) -> Variant:
    """A compiled Kernel's source IR and options, from its cache entry's manifest."""
    from .ir.serialize import from_dict

    manifest = load_manifest(kernel.path)
    return Variant(from_dict(manifest["ir"]), dict(manifest.get("options") or {}), list(checks))


def _compiled(obj, what: str) -> Optional[ExportKernel]:
    """An ExportKernel for a compiled object (Kernel, aligned/general pair, eager result)."""
    from .language.eager import _Returning
    from .runtime.kernel import Kernel
    from .variants import AlignedOrGeneral

    returns = None
    if isinstance(obj, _Returning):
        returns, obj = list(obj.order), obj.kernel
    kernel = obj.general if isinstance(obj, AlignedOrGeneral) else obj
    if returns is None and getattr(kernel, "_return_order", None) is not None:
        returns = list(kernel._return_order)  # out_idx=[3, 2]: the call returns them so
    if isinstance(obj, AlignedOrGeneral):
        variants = [_source_variant(obj.aligned, obj.checks), _source_variant(obj.general)]
        return ExportKernel(obj.general.name, list(obj.general.out_idx), returns, variants)
    if isinstance(obj, Kernel):
        return ExportKernel(obj.name, list(obj.out_idx), returns, [_source_variant(obj)])
    return None


def _split_variants(func: N.PrimFunc, out_idx: list, options: dict) -> list:
    """What ``tilecute.compile`` would build for a prim_func: the aligned variant first
    where plain dynamic extents decide a stride's alignment, then the program."""
    if not options.get("disable_dynamic_variants"):
        from .variants import aligned_variant, alignment_divisors, checks_for

        divisors = alignment_divisors(func)
        checks = checks_for(func, divisors, out_idx) if divisors else None
        if checks:
            return [Variant(aligned_variant(func, divisors), options, list(checks)),
                    Variant(func, options, [])]
    return [Variant(func, options, [])]


def _kernels_of(obj, what: str, name: Optional[str]) -> list:
    """The ExportKernels ``obj`` stands for (``what``: where it came from, for errors)."""
    from .language.eager import EagerKernel

    if isinstance(obj, N.PrimFunc):
        return [ExportKernel(name or obj.name, [], None, _split_variants(obj, [], {}))]
    found = _compiled(obj, what)
    if found is not None:
        if name:
            found.name = name
        return [found]
    if isinstance(obj, EagerKernel) or hasattr(obj, "specializations"):
        compiled = list(obj._kernels.values() if isinstance(obj, EagerKernel)
                        else obj.specializations.values())
        if not compiled:
            attr = what.rsplit(":", 1)[-1]
            example = f"{attr}.compile(M=..., ...)" if isinstance(obj, EagerKernel) else f"{attr}(...)"
            raise ExportError(f"{what}: a @tilecute.jit kernel with no specialization compiled; "
                              f"compile the ones to export at the module's top level, e.g. "
                              f"{attr}_kernels = [{example}, ...]")
        out = [k for c in compiled for k in _kernels_of(c, what, None)]
        for k in out:
            k.name = name or getattr(obj, "__name__", k.name)
        return out
    if isinstance(obj, (list, tuple)):
        return [k for i, item in enumerate(obj) for k in _kernels_of(item, f"{what}[{i}]", None)]
    if isinstance(obj, dict):
        return [k for key, item in obj.items()
                for k in _kernels_of(item, f"{what}[{key!r}]", str(key))]
    raise ExportError(f"{what}: a {type(obj).__name__} is not a kernel (export takes a "
                      "@T.prim_func, a compiled kernel, a @tilecute.jit kernel, or a list or "
                      "dict of them)")


def _is_kernel(obj) -> bool:
    from .language.eager import EagerKernel

    if isinstance(obj, (N.PrimFunc, EagerKernel)) or hasattr(obj, "specializations"):
        return True
    if isinstance(obj, (list, tuple, dict)):
        items = list(obj.values() if isinstance(obj, dict) else obj)
        return bool(items) and all(_is_kernel(i) for i in items)
    try:
        return _compiled(obj, "") is not None
    except Exception:
        return False


def _merge(kernels: list) -> list:
    """One ExportKernel per name: the specializations of a name become its variants (in
    order), which must agree on ``out_idx``, the returned order and the parameter count."""
    merged: dict[str, ExportKernel] = {}
    for k in kernels:
        if not k.name.isidentifier() or k.name.startswith("_") or k.name in _RESERVED:
            raise ExportError(f"kernel name {k.name!r} is not a public Python identifier; name "
                              "it with a dict key")
        first = merged.get(k.name)
        if first is None:
            merged[k.name] = ExportKernel(k.name, k.out_idx, k.returns, list(k.variants))
            continue
        n_first = len(first.variants[0].func.params)
        if (k.out_idx, k.returns) != (first.out_idx, first.returns) or \
                len(k.variants[0].func.params) != n_first:
            raise ExportError(f"{k.name}: its specializations differ in parameters, out_idx or "
                              "returned outputs; export them under different names (a dict)")
        for v in k.variants:
            if not any(_same(v, w) for w in first.variants):
                first.variants.append(v)
    return list(merged.values())


def _same(a: Variant, b: Variant) -> bool:
    from .ir.serialize import canonical_json

    return a.options == b.options and a.checks == b.checks and \
        canonical_json(a.func) == canonical_json(b.func)


def load_module(path: str, archs: list):
    """Import the module file ``path`` (its folder first on ``sys.path``, ``TILECUTE_ARCH``
    set to the first arch when unset, so that top-level compiles work without a GPU)."""
    file = Path(path).resolve()
    if not file.is_file():
        raise ExportError(f"{path}: no such file")
    name = f"_tilecute_export_{re.sub(r'[^0-9A-Za-z_]', '_', file.stem)}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None:  # no importer for the suffix: not a Python module
        raise ExportError(f"{path}: not a Python file (.py); a tilecute IR JSON document is "
                          "exported from a .py file that reads it (tilecute.ir.from_json)")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent))
    os.environ.setdefault("TILECUTE_ARCH", archs[0])
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the module's own error: shown as `python FILE` would, less tilecute
        raise ModuleImportError(file, e) from e
    finally:
        sys.path.remove(str(file.parent))
    return module


def collect(module, attr: Optional[str]) -> list:
    """The ExportKernels of ``module`` (``attr``: a dotted attribute, or None for every
    kernel defined at top level)."""
    stem = Path(getattr(module, "__file__", "module")).stem
    if attr:
        obj = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ExportError(f"{stem}: no attribute {attr!r}")
            obj = getattr(obj, part)
        single = isinstance(obj, N.PrimFunc) or _compiled(obj, attr) is not None
        return _merge(_kernels_of(obj, f"{stem}:{attr}", attr.rsplit(".", 1)[-1] if single else None))
    found, funcs, skipped = [], [], []
    for key, obj in vars(module).items():
        if key.startswith("_") or not _is_kernel(obj):
            continue
        if isinstance(obj, N.PrimFunc):
            funcs.append((key, obj))
            continue
        try:
            found += _kernels_of(obj, f"{stem}:{key}", key if _compiled(obj, key) else None)
        except ExportError as e:
            skipped.append(str(e))
    # a prim_func that one of the module's compiled kernels was built from is that kernel
    built_from = {v.func.name for k in found for v in k.variants}
    for key, func in funcs:
        if func.name not in built_from:
            found += _kernels_of(func, f"{stem}:{key}", key)
    for message in skipped:
        print(f"tilecute export: skipped {message}", file=sys.stderr)
    if not found:
        raise ExportError(f"{stem}: defines no kernel at top level" +
                          (f" ({'; '.join(skipped)})" if skipped else ""))
    return _merge(found)


# ---- building ------------------------------------------------------------------------------
def _build(kernel: ExportKernel, archs: list, root: Path) -> dict:
    """Compile every variant of ``kernel`` for every arch (through the cache), produce the
    cubins, copy the entries' files into ``root``; return its manifest record."""
    from .api import _compile_one

    record = {"function": kernel.variants[0].func.name, "out_idx": kernel.out_idx,
              "returns": kernel.returns, "archs": archs, "variants": []}
    for index, variant in enumerate(kernel.variants):
        entry = {"checks": [list(c) for c in variant.checks], "archs": {}}
        for arch in archs:
            compiled = _compile_one(variant.func, kernel.out_idx, arch, variant.options)
            compiled.ensure_cubin()
            rel = f"kernels/{kernel.name}/{index}/{arch}"
            folder = root / rel
            folder.mkdir(parents=True)
            for name in ENTRY_FILES:
                shutil.copyfile(compiled.path / name, folder / name)
            entry["archs"][arch] = {"dir": rel, "abi": compiled.abi.to_dict(),
                                    "cache_key": compiled.path.name}
        record["variants"].append(entry)
    return record


def export(target: str, outdir, archs: list, name: Optional[str] = None, wheel: bool = False,
           version: str = "0.1.0", log=None) -> Path:
    """Export the kernels ``target`` (``FILE.py[:ATTR]``) names into ``outdir/<name>``
    for ``archs``; return the package folder (and write a wheel beside it if ``wheel``)."""
    from . import __version__
    from .runtime.arch import check_arch
    from .toolchain import tool_versions

    archs = list(dict.fromkeys(check_arch(a, "--arch") for a in archs))
    if not archs:
        raise ExportError("--arch: give at least one arch (sm_90a, sm_80, ...)")
    path, _, attr = target.partition(":") if not os.path.exists(target) else (target, "", "")
    package = name or re.sub(r"[^0-9A-Za-z_]", "_", Path(path).stem)
    if not package.isidentifier():
        raise ExportError(f"--name {package!r} is not a Python identifier")
    module = load_module(path, archs)
    kernels = collect(module, attr or None)
    outdir = Path(outdir)
    root = outdir / package
    if root.exists():
        shutil.rmtree(root)  # an export replaces the package it wrote before
    staging = outdir / f".{package}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        records = {}
        for k in kernels:
            started = time.perf_counter()
            records[k.name] = _build(k, archs, staging)
            if log:
                log(f"{k.name}: {len(k.variants)} variant(s) x {len(archs)} arch(s) in "
                    f"{time.perf_counter() - started:.1f} s")
        _write_package(staging, package, kernels, records, archs, version)
        manifest = {"schema": SCHEMA, "package": package, "version": version, "archs": archs,
                    "kernels": records, "versions": tool_versions(),
                    "tilecute": __version__, "created": time.time()}
        manifest["files"] = {p.relative_to(staging).as_posix(): file_record(p)
                             for p in sorted(staging.rglob("*")) if p.is_file()}
        write_manifest(staging, manifest)
        os.replace(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if wheel:
        write_wheel(root, outdir, version)
    return root


def _write_package(root: Path, package: str, kernels: list, records: dict, archs: list,
                   version: str) -> None:
    from . import __version__
    from .host.launcher import template_environment

    env = template_environment()
    docs = {k.name: " | ".join(_signature(k.name, v["archs"][archs[0]]["abi"], k.out_idx)
                               for v in records[k.name]["variants"]) for k in kernels}
    (root / "__init__.py").write_text(env.get_template("package_init.py.j2").render(
        package=package, version=version, tilecute_version=__version__, archs=archs,
        kernels=docs))
    from .runtime import package as runtime

    shutil.copyfile(runtime.__file__, root / "_runtime.py")
    (root / "include").mkdir()
    (root / "include" / f"{package}.h").write_text(env.get_template("package_header.h.j2").render(
        package=package, tilecute_version=__version__, archs=archs,
        kernels=[_header_kernel(k, records[k.name], archs) for k in kernels]))


def _signature(name: str, abi: dict, out_idx: list) -> str:
    ins, outs = [], []
    for i, a in enumerate(abi["args"]):
        if a.get("workspace"):
            continue
        text = (f"{a['name']}: {a['dtype']}[{', '.join(map(str, a['shape']))}]"
                if a["kind"] == "tensor" else f"{a['name']}: {a['dtype']}")
        (outs if i in out_idx else ins).append(text)
    return f"{name}({', '.join(ins)})" + (f" -> {', '.join(outs)}" if outs else "")


_CXX_SCALARS = {"bool": "bool", "float32": "double", "float64": "double"}


def _header_kernel(kernel: ExportKernel, record: dict, archs: list) -> dict:
    """What the header template needs of one kernel: its C++ parameters (every ABI arg,
    outputs and workspaces included: a C++ caller allocates them) and its variants."""
    abi = record["variants"][0]["archs"][archs[0]]["abi"]
    params = []
    for i, a in enumerate(abi["args"]):
        role = "workspace" if a.get("workspace") else "output" if i in kernel.out_idx else "input"
        if a["kind"] == "tensor":
            params.append({"name": a["name"], "type": "DLTensor*", "role": role,
                           "doc": f"{a['dtype']}[{', '.join(map(str, a['shape']))}]"})
        else:
            ctype = _CXX_SCALARS.get(a["dtype"], "int64_t" if "int" in a["dtype"] else "double")
            params.append({"name": a["name"], "type": ctype, "role": role, "doc": a["dtype"]})
    variants = []
    for index, v in enumerate(record["variants"]):
        shapes = ", ".join(
            f"{a['name']}[{', '.join(map(str, a['shape']))}]"
            for a in v["archs"][archs[0]]["abi"]["args"] if a["kind"] == "tensor")
        when = "".join(f"; arg {p} dim {ax} a multiple of {d}" for p, ax, d in v["checks"])
        variants.append(f"{index}: {shapes}{when}")
    return {"name": kernel.name, "function": record["function"], "params": params,
            "variants": variants}


# ---- verification ----------------------------------------------------------------------------
def verify_package(root) -> list:
    """Problems in the package folder ``root`` (its files against its manifest; each kernel
    folder complete); an empty list means whole.  ``__pycache__`` folders (Python's,
    written when the package is imported) are not problems."""
    root = Path(root)
    problems = [p for p in verify_entry(root) if "__pycache__/" not in p.split(":")[0]]
    try:
        manifest = load_manifest(root)
    except (OSError, ValueError):
        return problems
    files = manifest["files"]
    for name, spec in manifest.get("kernels", {}).items():
        for variant in spec["variants"]:
            for arch, entry in variant["archs"].items():
                for f in ("launcher.so", "kernel.cubin", "abi.json"):
                    if f"{entry['dir']}/{f}" not in files:
                        problems.append(f"{entry['dir']}/{f}: kernel {name} ({arch}) lacks it")
                abi_file = root / entry["dir"] / "abi.json"
                if abi_file.is_file() and json.loads(abi_file.read_text()) != entry["abi"]:
                    problems.append(f"{entry['dir']}/abi.json: differs from the manifest's ABI")
    return problems


# ---- wheel -----------------------------------------------------------------------------------
def _tvm_ffi_requirement() -> str:
    from .toolchain import tool_versions

    release = re.match(r"\d+(\.\d+)*", tool_versions().get("apache-tvm-ffi", ""))
    return f"apache-tvm-ffi>={release.group(0)}" if release else "apache-tvm-ffi"


def write_wheel(root: Path, outdir: Path, version: str) -> Path:
    """``root`` (a package folder) as ``outdir/<pkg>-<version>-py3-none-<platform>.whl``.
    Written directly (a wheel is a zip with three metadata files, PEP 427/491): no build
    backend runs, and the tag says what the launchers are, platform code for any Python 3."""
    package = root.name
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"py3-none-{platform}"
    dist = f"{package}-{version}.dist-info"
    wheel = outdir / f"{package}-{version}-{tag}.whl"
    metadata = (f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
                f"Summary: tilecute kernels exported for {', '.join(load_manifest(root)['archs'])}\n"
                f"Requires-Dist: {_tvm_ffi_requirement()}\n")
    wheel_text = f"Wheel-Version: 1.0\nGenerator: tilecute export\nRoot-Is-Purelib: false\nTag: {tag}\n"
    records = []

    def add(zf, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{arcname},sha256={digest},{len(data)}")

    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for file in sorted(root.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                add(zf, f"{package}/{file.relative_to(root).as_posix()}", file.read_bytes())
        add(zf, f"{dist}/METADATA", metadata.encode())
        add(zf, f"{dist}/WHEEL", wheel_text.encode())
        records.append(f"{dist}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        zf.writestr(info, "\n".join(records) + "\n")
    os.replace(tmp, wheel)
    return wheel
