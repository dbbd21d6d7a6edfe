"""The host-side module graph: the toolchain, the compile driver and the cache import
each other in one direction only (toolchain <- cache, toolchain <- driver), and the
public names stay where users find them."""

import json
import subprocess
import sys

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


def test_source_fingerprint_follows_the_launcher_runtime_header(tmp_path, monkeypatch):
    """The header is copied into every entry, so a changed header must change the key."""
    from pathlib import Path

    from tilecute import templates, toolchain

    before = toolchain.source_fingerprint()
    fake = tmp_path / "templates"
    fake.mkdir()
    for f in Path(templates.__file__).parent.iterdir():
        if f.is_file():
            (fake / f.name).write_bytes(f.read_bytes())
    header = fake / "tilecute_launcher.h"
    header.write_bytes(header.read_bytes() + b"// changed\n")
    monkeypatch.setattr(templates, "__file__", str(fake / "__init__.py"))
    assert toolchain.source_fingerprint() != before


# ---- the launcher's precompiled header ------------------------------------------------------
def test_pch_header_covers_every_external_include_of_the_launcher():
    import re

    from tilecute.toolchain import PCH_HEADER, _templates_folder

    folder = _templates_folder()
    listed = set(re.findall(r"#include <([^>]+)>", (folder / PCH_HEADER).read_text()))
    used = set()
    for f in [folder / "tilecute_launcher.h", folder / "launcher.cpp.j2", *(folder / "partials").glob("*.j2")]:
        used |= set(re.findall(r"#include <([^>]+)>", f.read_text()))
    assert used and used <= listed, sorted(used - listed)


def test_precompiled_header_is_built_once_used_and_optional(tmp_path, monkeypatch):
    import os
    import subprocess

    from tilecute import toolchain

    monkeypatch.delenv("TILECUTE_LAUNCHER_PCH", raising=False)
    folder = tmp_path / "pch"
    header = toolchain.precompiled_header(folder)
    assert header is not None and header.name == "launcher_pch.h"
    gch = header.with_name("launcher_pch.h.gch")
    assert gch.is_file() and oct(folder.stat().st_mode & 0o777) == "0o700"
    stamp = gch.stat().st_mtime_ns
    assert toolchain.precompiled_header(folder) == header and gch.stat().st_mtime_ns == stamp
    # a launcher built with it: the compiler takes the header (no invalid-PCH warning)
    entry = tmp_path / "entry"
    entry.mkdir()
    import tilecute.language as T
    from tilecute.driver import write_sources

    @T.prim_func
    def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = A[i]

    write_sources(copy, "sm_90a", entry)
    cmd = toolchain.launcher_build_command(entry / "launcher.cpp", entry / "l.so", (), header)
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0 and "pch" not in out.stderr.lower(), out.stderr
    assert "-include" in cmd and str(header) in cmd
    # off by the environment
    monkeypatch.setenv("TILECUTE_LAUNCHER_PCH", "0")
    assert toolchain.precompiled_header(folder) is None
    monkeypatch.delenv("TILECUTE_LAUNCHER_PCH")
    # a folder others may write is not trusted: no header from it
    os.chmod(folder, 0o777)
    try:
        assert toolchain.precompiled_header(folder) is None
    finally:
        os.chmod(folder, 0o700)


def test_compile_uses_the_shared_pch_folder(cache_dir, tmp_path, monkeypatch):
    import tilecute
    import tilecute.language as T

    monkeypatch.delenv("TILECUTE_LAUNCHER_PCH", raising=False)
    monkeypatch.setenv("TILECUTE_PCH_DIR", str(tmp_path / "shared-pch"))

    @T.prim_func
    def neg(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            for i in T.Parallel(256):
                B[i] = -A[i]

    kernel = tilecute.compile(neg)
    assert list((tmp_path / "shared-pch").glob("*/launcher_pch.h.gch"))
    assert kernel.path.parent == cache_dir  # the cache root holds no header of its own
    assert not (cache_dir / ".pch").exists()
