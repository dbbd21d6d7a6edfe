"""The ``tilecute`` command line (also ``python -m tilecute``).

    tilecute cache ls                          list entries: key, function, arch, size, age
    tilecute cache clear [--older-than 7d]     remove entries (all, or those older than that)
    tilecute cache verify                      check every entry against its manifest
    tilecute cache path KEY                    print an entry's folder (a unique key prefix does)
    tilecute show KEY [--kind cute|host|launcher|launcher-header|launcher-runtime|abi|ir|script]   print a compiled kernel's sources
    tilecute tune ls | show KEY | clear        the autotuner's stored results
    tilecute export FILE.py[:ATTR] -o OUTDIR --arch sm_90a,sm_80 [--name PKG] [--wheel]
                                               kernels as a package that needs only TVM FFI
    tilecute verify PKG_DIR                    check an exported package against its manifest

Exit codes: 0 success, 1 failure (a damaged entry, no such entry, an unsafe cache
folder, a lock held too long), 2 usage error (also a KEY that is not hex digits or is a
prefix of several keys).  Expected failures print one line to stderr, no traceback (an
export whose module raises on import: also that module's own frames, none of tilecute's).

Imports only ``tilecute.cache`` and ``tilecute.runtime.kernel``'s table of sources.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from . import cache
from .runtime.kernel import SOURCE_KINDS

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in ``"3600"``, ``"3600s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: a number with a unit s, m, h, d or w (e.g. 7d, 12h, "
            "30m, 3600s)")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]


def _human_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


# --- cache subcommands: each takes the parsed arguments and returns the exit code ---------


def _cache_ls(args: argparse.Namespace) -> int:
    entries = cache.list_entries()
    if not entries:
        print(f"no entries in {cache.cache_root()}", file=sys.stderr)
        return 0
    rows = [("KEY", "FUNCTION", "ARCH", "SIZE", "AGE")]
    rows += [(e.key[:12], e.function, e.arch, _human_size(e.size), _human_age(e.age))
             for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    total = sum(e.size for e in entries)
    print(f"{_count(len(entries), 'entry', 'entries')}, {_human_size(total)} in "
          f"{cache.cache_root()}")
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    removed = cache.clear(args.older_than)
    print(f"removed {_count(len(removed), 'entry', 'entries')}")
    return 0


def _cache_verify(args: argparse.Namespace) -> int:
    results = cache.verify_all()
    bad = {key: problems for key, problems in results.items() if problems}
    for key, problems in bad.items():
        for problem in problems:
            print(f"{key[:12]}: {problem}")
    print(f"{_count(len(results), 'entry', 'entries')} checked, {len(bad)} damaged"
          + (" (each is rebuilt on its next use; `tilecute cache clear` removes all)" if bad else ""))
    return 1 if bad else 0


def _cache_path(args: argparse.Namespace) -> int:
    print(cache.entry_path(args.key))
    return 0


def _show(args: argparse.Namespace) -> int:
    folder = Path(args.kernel)
    if not (folder / "manifest.json").is_file():
        if os.sep in args.kernel or (folder.exists()
                                     and not re.fullmatch(r"[0-9a-f]+", args.kernel)):
            print(f"tilecute: error: {args.kernel} is not a cache entry folder (no "
                  "manifest.json)", file=sys.stderr)
            return 1
        folder = cache.entry_path(args.kernel)
    source = folder / SOURCE_KINDS[args.kind]
    if not source.is_file():
        print(f"tilecute: error: {folder} has no {source.name} (--kind {args.kind})",
              file=sys.stderr)
        return 1
    print(source.read_text(), end="")
    return 0


# --- tune subcommands: the autotuner's stored results ------------------------------------


def _tune_ls(args: argparse.Namespace) -> int:
    from .autotuner import list_results, store_dir

    results = list_results()
    if not results:
        print(f"no tuning results in {store_dir()}", file=sys.stderr)
        return 0
    rows = [("KEY", "FUNCTION", "BEST", "DEVICE", "AGE")]
    now = time.time()
    rows += [(r["key"][:12], r.get("function", "?"),
              json.dumps(r.get("best"), sort_keys=True), r.get("device", "?"),
              _human_age(now - r.get("created", now))) for r in results]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _tune_show(args: argparse.Namespace) -> int:
    from .autotuner import list_results

    found = [r for r in list_results() if r["key"].startswith(args.key)]
    if len(found) != 1:
        print(f"tilecute: error: {len(found)} tuning results match {args.key!r}",
              file=sys.stderr)
        return 1 if not found else 2
    print(json.dumps(found[0], indent=1))
    return 0


def _tune_clear(args: argparse.Namespace) -> int:
    from .autotuner import clear_results

    n = clear_results()
    print(f"removed {n} tuning result{'' if n == 1 else 's'}")
    return 0


# --- the parser ------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from .export import ExportError, ModuleImportError, export

    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    log = None if args.quiet else (lambda line: print(f"tilecute export: {line}", file=sys.stderr))
    try:
        root = export(args.target, args.output, archs, name=args.name, wheel=args.wheel,
                      version=args.pkg_version, log=log)
    except (ExportError, ValueError, ModuleImportError) as e:  # TargetError: a ValueError
        print(f"tilecute: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ExportError) else 1
    print(root)
    if args.wheel:
        print(next(root.parent.glob(f"{root.name}-{args.pkg_version}-*.whl")))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from .export import verify_package

    root = Path(args.package)
    if not (root / "manifest.json").is_file():
        print(f"tilecute: error: {root} is not an exported package (no manifest.json)",
              file=sys.stderr)
        return 1
    problems = verify_package(root)
    for p in problems:
        print(f"{root}: {p}")
    if not problems:
        print(f"{root}: ok")
    return 1 if problems else 0


def _command(subparsers, name: str, run: Callable[[argparse.Namespace], int], help: str,
             *arguments: tuple) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` running ``run(args)``; ``arguments``: one
    ``(flags, add_argument keywords)`` pair per argument."""
    parser = subparsers.add_parser(name, help=help, description=help)
    for flags, kwargs in arguments:
        parser.add_argument(*((flags,) if isinstance(flags, str) else flags), **kwargs)
    parser.set_defaults(run=run)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilecute", description="tilecute: a TileLang-style compiler for NVIDIA's CuTe DSL.",
        epilog="`tilecute COMMAND --help` describes a command. Exit status: 0 success, 1 "
               f"failure, 2 usage error. The cache: ${cache.ENV_DIR} (default "
               "~/.cache/tilecute); other settings: docs/cache.md, \"Environment\".")
    parser.add_argument("--version", action="version", version=f"tilecute {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    cache_parser = commands.add_parser(
        "cache", help="inspect and manage the kernel cache",
        description=f"The kernel cache (${cache.ENV_DIR}, default ~/.cache/tilecute).")
    cache_commands = cache_parser.add_subparsers(dest="cache_command", metavar="COMMAND",
                                                 required=True)
    _command(cache_commands, "ls", _cache_ls, "list entries: key, function, arch, size, age")
    _command(cache_commands, "clear", _cache_clear,
             "remove entries (all, or those older than --older-than)",
             ("--older-than", dict(type=parse_duration, metavar="DURATION", default=None,
                                   help="only entries built longer ago than this (7d, 12h, "
                                        "30m, 3600s)")))
    _command(cache_commands, "verify", _cache_verify,
             "check every entry's files against its manifest (exit 1 if one is damaged)")
    _command(cache_commands, "path", _cache_path, "print the folder of an entry",
             ("key", dict(metavar="KEY", help="the entry's key or a unique prefix of it")))

    _command(commands, "show", _show,
             "print a compiled kernel's CuTe DSL source, host module, launcher C++, launch ABI "
             "or IR",
             ("kernel", dict(metavar="KERNEL", help="a cache key (or unique prefix) or an entry "
                                                    "folder")),
             ("--kind", dict(choices=sorted(SOURCE_KINDS), default="cute",
                             help="what to print (default: cute)")))
    tune_parser = commands.add_parser(
        "tune", help="inspect and clear the autotuner's stored results",
        description="The autotuner's results (<cache root>/autotune): one per key.")
    tune_commands = tune_parser.add_subparsers(dest="tune_command", metavar="COMMAND",
                                               required=True)
    _command(tune_commands, "ls", _tune_ls, "list results: key, function, best config, device, age")
    _command(tune_commands, "show", _tune_show, "print one result (every config and its time)",
             ("key", dict(metavar="KEY", help="the result's key or a unique prefix of it")))
    _command(tune_commands, "clear", _tune_clear, "remove every stored result")
    _command(commands, "export", _export,
             "compile kernels for several archs into a package that imports with only "
             "apache-tvm-ffi (and a C++ header)",
             ("target", dict(metavar="FILE.py[:ATTR]",
                             help="a Python file, and optionally the attribute to export (a "
                                  "prim_func, a compiled or @tilecute.jit kernel, a list or "
                                  "dict of them); default: every kernel it defines")),
             (("-o", "--output"), dict(required=True, metavar="OUTDIR",
                                       help="where the package folder (and wheel) goes")),
             ("--arch", dict(required=True, metavar="ARCHS",
                             help="comma-separated targets, e.g. sm_90a,sm_80")),
             ("--name", dict(default=None, metavar="PKG",
                             help="the package's name (default: the file's stem)")),
             ("--pkg-version", dict(default="0.1.0", metavar="VERSION",
                                    help="the package's version (default 0.1.0)")),
             ("--wheel", dict(action="store_true", help="also write an installable wheel")),
             (("-q", "--quiet"), dict(action="store_true", help="no progress on stderr")))
    _command(commands, "verify", _verify,
             "check an exported package's files against its manifest (exit 1 if damaged)",
             ("package", dict(metavar="PKG_DIR", help="the package folder (holds manifest.json)")))
    # Further commands: one _command(...) line each, here for top-level ones
    # or above for cache ones (`tilecute cache ...`).
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: message to stderr, SystemExit(2)
    try:
        return args.run(args)
    except BrokenPipeError:  # `tilecute cache ls | head`: the reader left, nothing to report
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except cache.CacheKeyError as e:  # the KEY argument names no single entry by its form
        print(f"tilecute: error: {e}", file=sys.stderr)
        return 2
    except (cache.CacheError, OSError) as e:  # UnsafeCacheError, CacheLockTimeout: OSErrors
        print(f"tilecute: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
