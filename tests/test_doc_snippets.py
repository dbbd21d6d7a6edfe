"""The code a reader copies from the docs works as written: each runnable ```python block of
docs/ir.md and docs/tile-ops.md runs as a file and prints what the ```text block after it
shows (its lines in order, `...` standing for lines left out); every `@T.prim_func` of
README.md builds an sm_90a cubin."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tilecute

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"```python\n(.*?)```\n(?:\s*\n)?(?:```(?:text)?\n(.*?)```)?", re.S)


def _blocks(doc: str):
    text = (ROOT / doc).read_text()
    for m in _BLOCK.finditer(text):
        yield text[:m.start()].count("\n") + 1, m.group(1), m.group(2)


SNIPPETS = [(doc, line, code, want) for doc in ("docs/ir.md", "docs/tile-ops.md")
            for line, code, want in _blocks(doc)]


def _missing(want: str, got: str) -> list:
    """The chunks of ``want`` (split at lines that are ``...``) not found in ``got`` in
    order."""
    chunks = [c.strip("\n") for c in re.split(r"^\s*\.\.\.\s*$", want, flags=re.M) if c.strip()]
    pos, missing = 0, []
    for chunk in chunks:
        i = got.find(chunk, pos)
        if i < 0:
            missing.append(chunk)
        else:
            pos = i + len(chunk)
    return missing


@pytest.mark.parametrize("doc, line, code, want", SNIPPETS,
                         ids=[f"{d}:{n}" for d, n, _, _ in SNIPPETS])
def test_doc_snippet_runs_and_prints_what_the_doc_shows(doc, line, code, want, tmp_path):
    file = tmp_path / f"snippet_{line}.py"  # @T.prim_func reads its source from a file
    file.write_text(code)
    done = subprocess.run([sys.executable, str(file)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "examples")},
                          timeout=600)
    assert done.returncode == 0, f"{doc}:{line} raised:\n{done.stderr[-3000:]}"
    if want is not None:
        missing = _missing(want, done.stdout)
        assert not missing, f"{doc}:{line} printed\n{done.stdout}\nnot:\n" + "\n".join(missing)


def test_snippets_found():
    assert len(SNIPPETS) >= 8 and sum(w is not None for *_, w in SNIPPETS) >= 7


def _readme_prim_funcs():
    """README's blocks reduced to their imports, module-level assignments of T.* values
    (symbols) and @T.prim_func definitions: the kernels, without the calls that need a
    GPU."""
    text = (ROOT / "README.md").read_text()
    keep = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for node in ast.parse(block).body:
            src = ast.get_source_segment(block, node)
            if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                    isinstance(node, ast.Assign) and "T.symbolic" in src):
                keep.append(src)
            elif isinstance(node, ast.FunctionDef) and any(
                    ast.unparse(d) == "T.prim_func" for d in node.decorator_list):
                keep.append("\n".join(f"@{ast.unparse(d)}" for d in node.decorator_list)
                            + "\n" + src)
    return "\n\n".join(keep)


def test_readme_kernels_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    file = tmp_path / "readme_kernels.py"
    file.write_text("import tilecute\nimport tilecute.language as T\n\n" + _readme_prim_funcs())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        namespace = vars(importlib.import_module("readme_kernels"))
    finally:
        sys.modules.pop("readme_kernels", None)
    names = [n for n, v in namespace.items() if type(v).__name__ == "PrimFunc"]
    assert names == ["vector_add", "rmsnorm", "add_one", "matmul"]
    for name in names:
        kernel = tilecute.compile(namespace[name], out_idx=[2] if name == "vector_add" else None)
        assert Path(kernel.ensure_cubin()).stat().st_size > 0, name
        assert f"def {name}(" in kernel.get_source("cute"), name
