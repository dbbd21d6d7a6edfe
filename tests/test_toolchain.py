"""The host-side module graph: the toolchain, the compile driver and the cache import
each other in one direction only (toolchain <- cache, toolchain <- driver), and the
public names stay where users find them."""

import json
import subprocess
import sys

import pytest

import tilecute

IMPORTED_BY = """
import json, sys
import {module}
print(json.dumps(sorted(m for m in sys.modules if m.startswith("tilecute."))))
"""


def tilecute_modules_after_import(module: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", IMPORTED_BY.format(module=module)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_toolchain_imports_neither_cache_nor_driver():
    loaded = tilecute_modules_after_import("tilecute.toolchain")
    assert "tilecute.toolchain" in loaded
    assert not {"tilecute.cache", "tilecute.driver", "tilecute.api"} & set(loaded), loaded
    assert not [m for m in loaded if m.startswith(("tilecute.codegen", "tilecute.transform",
                                                   "tilecute.host"))], loaded


def test_cache_imports_the_toolchain_not_the_driver():
    loaded = tilecute_modules_after_import("tilecute.cache")
    assert "tilecute.toolchain" in loaded and "tilecute.driver" not in loaded, loaded


def test_public_names_come_from_the_driver_and_the_toolchain():
    from tilecute import cache, driver, toolchain

    assert tilecute.build_cubin is driver.build_cubin
    assert cache.tool_versions is toolchain.tool_versions


@pytest.mark.parametrize("name", ["tilecute_launcher.h", "tilecute_launcher_runtime.cpp"])
def test_source_fingerprint_follows_the_launcher_runtime(name, tmp_path, monkeypatch):
    """The launcher runtime is copied into every entry and linked into its launcher, so a
    changed header or runtime source must change the key."""
    from pathlib import Path

    from tilecute import templates, toolchain

    before = toolchain.source_fingerprint()
    fake = tmp_path / "templates"
    fake.mkdir()
    for f in Path(templates.__file__).parent.iterdir():
        if f.is_file():
            (fake / f.name).write_bytes(f.read_bytes())
    changed = fake / name
    changed.write_bytes(changed.read_bytes() + b"// changed\n")
    monkeypatch.setattr(templates, "__file__", str(fake / "__init__.py"))
    assert toolchain.source_fingerprint() != before


# ---- the launcher runtime, compiled once ---------------------------------------------------
def test_launcher_header_includes_only_c_headers():
    """A launcher compiles its own lines and the C headers of the CUDA driver API and TVM FFI:
    the C++ library and TVM FFI's C++ headers (most of a build's time) are the runtime's."""
    import re

    from tilecute.toolchain import RUNTIME_HEADER
    from tilecute.host.launcher import templates_dir

    folder = templates_dir()
    used = set()
    for f in [folder / RUNTIME_HEADER, folder / "launcher.cpp.j2", *(folder / "partials").glob("*.j2")]:
        text = re.sub(r"#ifdef TILECUTE_PHASE_TIMING.*?#endif", "", f.read_text(), flags=re.S)
        used |= set(re.findall(r"#include <([^>]+)>", text))
    assert used == {"cuda.h", "stdint.h", "string.h", "tvm/ffi/c_api.h", "tvm/ffi/extra/c_env_api.h"}, used


def _copy_program():
    import tilecute.language as T

    @T.prim_func
    def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = A[i]

    return copy


def test_runtime_object_is_built_once_linked_and_optional(tmp_path, monkeypatch):
    import os

    from tilecute import toolchain
    from tilecute.driver import write_sources

    monkeypatch.delenv("TILECUTE_SHARED_RUNTIME", raising=False)
    entry = tmp_path / "entry"
    entry.mkdir()
    write_sources(_copy_program(), "sm_90a", entry)
    folder = tmp_path / "runtime"
    obj = toolchain.launcher_runtime_object(folder, entry)
    assert obj is not None and obj.name == "tilecute_launcher_runtime.o" and obj.is_file()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    # published with the sources it was compiled from
    assert (obj.parent / "tilecute_launcher_runtime.cpp").read_bytes() == \
        (entry / "tilecute_launcher_runtime.cpp").read_bytes()
    stamp = obj.stat().st_mtime_ns
    assert toolchain.launcher_runtime_object(folder, entry) == obj and obj.stat().st_mtime_ns == stamp
    # an entry's own path remap does not change the object; a define does
    remap = (f"-ffile-prefix-map={entry}=/somewhere/else",)
    assert toolchain.launcher_runtime_object(folder, entry, remap) == obj
    timed = toolchain.launcher_runtime_object(folder, entry, ("-DTILECUTE_PHASE_TIMING",))
    assert timed is not None and timed != obj
    # a launcher built with the folder links the object (and compiles no runtime of its own)
    commands = []
    real_run = toolchain.subprocess.run
    monkeypatch.setattr(toolchain.subprocess, "run", lambda cmd, **kw: commands.append(cmd) or real_run(cmd, **kw))
    library = toolchain.build_launcher(entry / "launcher.cpp", entry, runtime_folder=folder)
    assert library.is_file()
    assert [c for c in commands if str(obj) in c] == commands and len(commands) == 1
    assert str(entry / "tilecute_launcher_runtime.cpp") not in commands[0]
    # off by the environment: the launcher compiles the runtime along with itself
    for off in ("false", "Off", "no"):  # the false values every tilecute switch takes
        monkeypatch.setenv("TILECUTE_SHARED_RUNTIME", off)
        assert toolchain.launcher_runtime_object(folder, entry) is None, off
    monkeypatch.setenv("TILECUTE_SHARED_RUNTIME", "0")
    assert toolchain.launcher_runtime_object(folder, entry) is None
    commands.clear()
    toolchain.build_launcher(entry / "launcher.cpp", entry, runtime_folder=folder)
    assert str(entry / "tilecute_launcher_runtime.cpp") in commands[0]
    monkeypatch.delenv("TILECUTE_SHARED_RUNTIME")
    # a folder others may write is not trusted: no object from it
    os.chmod(folder, 0o777)
    try:
        assert toolchain.launcher_runtime_object(folder, entry) is None
    finally:
        os.chmod(folder, 0o700)


def test_compile_uses_the_shared_runtime_folder(cache_dir, tmp_path, monkeypatch):
    import tilecute

    monkeypatch.delenv("TILECUTE_SHARED_RUNTIME", raising=False)
    monkeypatch.setenv("TILECUTE_LAUNCHER_RUNTIME_DIR", str(tmp_path / "shared-runtime"))
    kernel = tilecute.compile(_copy_program())
    assert list((tmp_path / "shared-runtime").glob("*/tilecute_launcher_runtime.o"))
    assert kernel.path.parent == cache_dir  # the cache root holds no runtime of its own
    assert not (cache_dir / ".launcher-runtime").exists()
    # the entry keeps the runtime's sources, so it builds on its own
    for name in ("launcher.cpp", "tilecute_launcher.h", "tilecute_launcher_runtime.cpp"):
        assert (kernel.path / name).is_file()
