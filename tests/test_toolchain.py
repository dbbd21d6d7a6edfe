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
