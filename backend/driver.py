"""The compile driver: one program from the IR to the files of a cache entry, or to a cubin
ahead of time.

``lower`` (the pass pipeline) -> ``emit_cute`` (CuTe DSL source) -> the host module and
launcher templates -> the toolchain (``launcher.so``).  :func:`build_entry` is the build
function that ``tilecute.compile`` hands to the cache; :func:`build_cubin` is
``tilecute.build_cubin``.

Imports ``tilecute.toolchain`` at load time and the compiler stages inside the functions,
so that importing this module stays cheap; never imports ``tilecute.cache`` (the cache
calls the driver through the build function it is given, not the other way round).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .toolchain import build_launcher, tool_versions


def write_sources(func, arch: str, folder: Path, options: dict | None = None):
    """Lower ``func`` and write its generated sources into ``folder``: ``ir.json``,
    ``abi.json``, ``kernel_cute.py``, ``launcher.cpp`` with the launcher runtime beside it
    (``tilecute_launcher.h``, ``tilecute_launcher_runtime.cpp``), and ``host.py``.  Returns the plan."""
    from . import __version__
    from .codegen.cute import emit_cute
    from .host.host_module import render_host_module
    from .host.launcher import write_launcher
    from .ir.serialize import to_json
    from .transform.pipeline import lower

    plan = lower(func, arch, options)
    folder = Path(folder)
    files = {
        "ir.json": to_json(plan.func),
        "ir_script.txt": plan.func.script(),  # the lowered IR as the printer shows it
        "abi.json": plan.abi.to_json(),
        "kernel_cute.py": emit_cute(plan),
        "host.py": render_host_module(plan.abi, arch=arch, tilecute_version=__version__,
                                      ptxas_options=(options or {}).get("ptxas_options", "")),
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    write_launcher(plan.abi, folder, tilecute_version=__version__)
    return plan


def build_entry(func, arch: str, options: dict, folder: Path,
                published_as: Path | None = None, runtime_folder: Path | None = None) -> dict:
    """Build every artifact of a cache entry except the cubin (made on first use) into
    ``folder``; return the manifest fields the cache records.  ``published_as``: where the
    folder will live (the cache renames it); the launcher records its source under that
    path, so a launcher error's traceback names a file that exists.  ``runtime_folder``:
    where the launcher runtime is compiled once and linked from (the cache's
    ``.launcher-runtime``); None compiles it into the launcher."""
    from .ir.serialize import canonical_json

    plan = write_sources(func, arch, folder, options)
    folder = Path(folder)
    remap = (f"-ffile-prefix-map={folder}={published_as}",) if published_as else ()
    build_launcher(folder / "launcher.cpp", folder, extra_cflags=remap, runtime_folder=runtime_folder)
    return {"function": func.name, "arch": arch, "options": options,
            "versions": tool_versions(), "ir": json.loads(canonical_json(func)),
            "abi": plan.abi.to_dict()}


def build_cubin(func, arch: str | None = None, out_dir: str | None = None,
                options: dict | None = None):
    """Generate ``func``'s CuTe DSL source and compile it to a cubin for ``arch`` (default:
    the GPU's, else ``TILECUTE_ARCH``), without a GPU if need be.  The cubin's kernels and
    parameter tables are checked against the launch ABI (``ABIMismatch`` on disagreement).
    Returns a :class:`tilecute.runtime.cubin.CubinInfo` (path, kernel names, parameter
    tables)."""
    from .codegen.cute import emit_cute
    from .runtime.arch import check_arch
    from .runtime.cubingen import default_arch, produce_cubin
    from .transform.pipeline import lower

    arch = check_arch(arch, f"build_cubin({func.name})") if arch else default_arch()
    if func.pass_configs or func.compile_flags:  # T.annotate_*: the function's options
        from .options import check_options, from_compile_flags, from_pass_configs, \
            function_attrs, merge_options

        func, _, pass_configs, compile_flags = function_attrs(func)
        options = check_options(merge_options(from_pass_configs(pass_configs, func.name),
                                              from_compile_flags(compile_flags, func.name),
                                              options))
    folder = Path(out_dir or tempfile.mkdtemp(prefix=f"tilecute-{func.name}-"))
    folder.mkdir(parents=True, exist_ok=True)
    plan = lower(func, arch, options)
    source = folder / "kernel_cute.py"
    source.write_text(emit_cute(plan))
    return produce_cubin(str(source), plan.abi, arch, str(folder),
                         ptxas_options=(options or {}).get("ptxas_options", ""))
