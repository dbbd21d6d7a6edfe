"""Sweep the program corpus on the sm_80 path (Ampere: mma.sync, cp.async, no TMA / wgmma).

A helper script, not a CI test (it builds hundreds of cubins).  For every program factory in
tests/*programs*.py and examples/*.py -- a ``@tilecute.jit`` factory or a plain function that
returns a ``T.prim_func``, called with its default arguments -- it lowers the program for sm_80,
emits the CuTe DSL source and (unless ``--emit-only``) compiles the sm_80 cubin, then sorts the
result into

  built     the cubin (or, with --emit-only, the source) was produced
  refused   a tilecute error naming the form and the program's line (fp8 before sm_89, wgmma,
            TMA-only forms...): fine
  bug       any other exception (KeyError, AttributeError, AssertionError, a CuTe DSL or ptxas
            error, a refusal that names no form or line)
  skipped   the factory needs arguments, is eager, or raised before returning a program

Results are cached (by the program's canonical IR, the options and the mode) under
``$TMPDIR/sm80_sweep``; ``--fresh`` ignores the cache.

    nice -n 10 python tests/sm80_sweep.py [--emit-only] [--fresh] [-k SUBSTR] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCH = "sm_80"

# tilecute's own errors: a refusal when its message names a T.* form (or a tilecute
# option / intrinsic) and the program's source line
REFUSAL_TYPES = ("FrontendError", "FrontendValueError", "FrontendTypeError", "TileOpError",
                 "LayoutError", "GemmError",
                 "TmaError", "WarpSpecializeError", "SharedMemoryError", "LoweringError",
                 "BarrierError", "RegionError", "VectorizeError", "OverlapError", "ValidationError",
                 "AccumulatorViewError", "CodegenError", "OptionError", "TargetError", "MapError",
                 "VectorValueError", "HangError", "ArchError", "NotImplementedError")
_FORM = re.compile(r"\bT\.\w+|\btl\.\w+|\bsm_\d+|wgmma|TMA|cp\.async|mma\.sync|float8|fp8|"
                   r"disable_\w+|\bT\.|tilecute\.\w+|`[^`]+`")
_LINE = re.compile(r"\.py[:\", ]+(line )?\d+|line \d+")


def modules(only=""):
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "examples")]
    files = sorted((ROOT / "tests").glob("*programs*.py")) + sorted((ROOT / "examples").glob("*.py"))
    if only:
        order = only.split(",")
        files = sorted((f for f in files if f.stem in order), key=lambda f: order.index(f.stem))
    for f in files:
        if f.name.startswith("test_"):
            continue
        yield f


def factories(mod):
    """(name, build) pairs: build() -> (PrimFunc, options) or raises."""
    from tilecute.ir import nodes as N

    out = []
    for name, obj in sorted(vars(mod).items()):
        if name.startswith("_") or not callable(obj):
            continue
        if getattr(obj, "__module__", None) != mod.__name__:
            continue
        if isinstance(obj, N.PrimFunc):
            out.append((name, lambda obj=obj: (obj, {})))
            continue
        jit = getattr(obj, "__tilecute_jit__", None)
        raw = getattr(obj, "get_tir", None) if jit else obj
        if not inspect.isfunction(raw):
            continue
        try:
            sig = inspect.signature(raw)
        except (TypeError, ValueError):
            continue
        if any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                               p.KEYWORD_ONLY)
               for p in sig.parameters.values()):
            out.append((name, None))  # needs arguments
            continue
        opts = dict(jit[2] or {}) if jit else {}
        out.append((name, lambda raw=raw, opts=opts: (raw(), opts)))
    return out


def classify(exc: BaseException, src_file: str) -> str:
    kind = type(exc).__name__
    msg = str(exc)
    if kind in REFUSAL_TYPES and _FORM.search(msg) and (Path(src_file).name in msg or _LINE.search(msg)):
        return "refused"
    return "bug"


def run_one(func, opts, emit_only: bool, folder: str):
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    if emit_only:
        if func.pass_configs or func.compile_flags:
            from tilecute.options import check_options, from_compile_flags, from_pass_configs, \
                function_attrs, merge_options

            func, _, pc, cf = function_attrs(func)
            opts = check_options(merge_options(from_pass_configs(pc, func.name),
                                               from_compile_flags(cf, func.name), opts or None))
        emit_cute(lower(func, ARCH, opts or None))
        return
    import tilecute

    tilecute.build_cubin(func, ARCH, out_dir=folder, options=opts or None)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--emit-only", action="store_true")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("-k", default="")
    ap.add_argument("--only", default="", help="comma-separated module names, in this order")
    ap.add_argument("--json", default="")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from tilecute.ir.serialize import canonical_json

    cache = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "sm80_sweep"
    cache.mkdir(parents=True, exist_ok=True)
    mode = "emit" if args.emit_only else "cubin"
    results = []
    for f in modules(args.only):
        try:
            mod = importlib.import_module(f.stem)
        except Exception as e:  # noqa: BLE001
            results.append(dict(file=f.name, name="<import>", status="skipped", error=repr(e)[:300]))
            continue
        for name, build in factories(mod):
            ident = f"{f.name}:{name}"
            if args.k and args.k not in ident:
                continue
            if build is None:
                results.append(dict(file=f.name, name=name, status="skipped", error="needs arguments"))
                continue
            try:
                func, opts = build()
            except Exception as e:  # noqa: BLE001
                results.append(dict(file=f.name, name=name, status="skipped",
                                    error=f"factory: {type(e).__name__}: {str(e)[:200]}"))
                continue
            from tilecute.ir import nodes as N

            if not isinstance(func, N.PrimFunc):
                results.append(dict(file=f.name, name=name, status="skipped", error="not a program"))
                continue
            key = hashlib.sha256((canonical_json(func) + json.dumps(opts, sort_keys=True, default=str)
                                  + mode).encode()).hexdigest()[:24]
            hit = cache / f"{key}.json"
            hit_was = hit.exists() and not args.fresh
            if hit_was:
                rec = json.loads(hit.read_text())
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    try:
                        run_one(func, opts, args.emit_only, tmp)
                        rec = dict(status="built")
                    except Exception as e:  # noqa: BLE001
                        rec = dict(status=classify(e, str(f)),
                                   error=f"{type(e).__name__}: {str(e)[:600]}",
                                   where="".join(traceback.format_tb(e.__traceback__)[-2:])[-600:])
                hit.write_text(json.dumps(rec))
            rec = dict(file=f.name, name=name, **rec)
            results.append(rec)
            if args.v or rec["status"] == "bug" or not hit_was:
                print(f"{rec['status']:8s} {ident}  {rec.get('error', '')[:300]}", flush=True)
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(json.dumps(counts))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
