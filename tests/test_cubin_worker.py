"""The lazy cubin step runs in a worker process (tilecute.runtime.cubin_worker), so the
process that launches kernels never holds its interpreter through ``cute.compile``."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilecute.runtime import cubin_worker

EXAMPLES = str(Path(__file__).resolve().parent.parent / "examples")

CHILD = """
    import json, sys
    sys.path.insert(0, {examples!r})
    import elementwise as E
    import tilecute
    k = tilecute.compile(E.vector_add("float32"))
    path = k.ensure_cubin()
    print(json.dumps({{"cubin": path, "cutlass": "cutlass" in sys.modules}}))
"""


def _child(tmp_path, worker: str) -> dict:
    env = {**os.environ, "TILECUTE_CACHE_DIR": str(tmp_path / "cache"), "TILECUTE_ARCH": "sm_90a",
           "TILECUTE_CUBIN_WORKER": worker}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD.format(examples=EXAMPLES))],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_first_call_compiles_the_cubin_out_of_process(tmp_path):
    got = _child(tmp_path, "1")
    assert Path(got["cubin"]).stat().st_size > 0
    assert got["cutlass"] is False  # CUTLASS was imported by the worker only
    here = _child(tmp_path / "inproc", "0")
    assert Path(here["cubin"]).stat().st_size > 0 and here["cutlass"] is True


def test_a_failing_compile_is_raised_with_the_workers_error(tmp_path):
    import tilecute
    sys.path.insert(0, EXAMPLES)
    import elementwise as E

    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    k = tilecute.compile(E.vector_add("float16"))
    bad = tmp_path / "kernel_cute.py"
    bad.write_text((k.path / "kernel_cute.py").read_text().replace("@cute.jit", "@cute.jit\n"
                                                                    "def _broken(:\n    pass\n@cute.jit", 1))
    with pytest.raises(cubin_worker.CubinCompileError, match="SyntaxError"):
        cubin_worker.produce_cubin(str(bad), str(k.path / "abi.json"), "sm_90a", str(tmp_path))
    # the worker that reported it is still usable
    good = cubin_worker.produce_cubin(str(k.path / "kernel_cute.py"), str(k.path / "abi.json"),
                                      "sm_90a", str(tmp_path), "again.cubin")
    assert Path(good).name == "again.cubin" and Path(good).stat().st_size > 0


def test_prestart_leaves_warm_workers_that_serve_compiles(tmp_path, monkeypatch):
    """The autotuner's prestart: workers started ahead (CUTLASS imported at their start) wait
    idle, a second prestart adds none, and a compile takes one of them."""
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECUTE_CUBIN_WORKER", "1")
    cubin_worker._shutdown()
    try:
        assert cubin_worker.prestart(2) == 2
        started = {w.proc.pid for w in cubin_worker._idle}
        assert len(started) == 2 and all(w.alive() for w in cubin_worker._idle)
        assert cubin_worker.prestart(2) == 0
        sys.path.insert(0, EXAMPLES)
        import elementwise as E

        import tilecute

        path = tilecute.compile(E.vector_add("float16"), target="sm_90a").ensure_cubin()
        assert Path(path).stat().st_size > 0
        assert {w.proc.pid for w in cubin_worker._idle} == started  # served by one, returned
    finally:
        cubin_worker._shutdown()
