"""benchmarks/tilelang_examples.py without a GPU: its warm-up pass runs an example under both
compilers in their own processes (a stand-in `tilelang` package for TileLang), names each
do_bench by the example's line, and reports a failing example per compiler."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "tilelang_examples.py"

EXAMPLE = textwrap.dedent("""\
    import tilelang
    from tilelang.profiler import do_bench
    print("compiler:", tilelang.__name__ if tilelang.__name__ != "tilelang" else tilelang.NAME)
    do_bench(lambda: None)
    do_bench(lambda: None, warmup=5)
    if {fail!r}:
        raise RuntimeError("the example's own check failed")
""")


def _tree(tmp_path, fail=False):
    ex = tmp_path / "tl" / "examples" / "demo"
    ex.mkdir(parents=True)
    (ex / "example_demo.py").write_text(EXAMPLE.format(fail=fail))
    site = tmp_path / "site" / "tilelang"  # the stand-in for TileLang's own wheel
    (site / "profiler").mkdir(parents=True)
    (site / "__init__.py").write_text("NAME = 'stand-in TileLang'\n")
    (site / "profiler" / "__init__.py").write_text("def do_bench(fn, **kw):\n    return 99.0\n")
    (site / "profiler" / "bench.py").write_text("from . import do_bench\n")
    return tmp_path / "tl", tmp_path / "site"


def _parent(tmp_path, src, site):
    env = dict(os.environ, TILECUTE_ARCH="sm_90a", CUTE_DSL_ARCH="sm_90a")
    p = subprocess.run([sys.executable, str(BENCH), "--tilelang-src", str(src), "--tilelang-path",
                        str(site), "demo/example_demo.py", "--rounds", "0", "--warm-jobs", "2",
                        "--logs", str(tmp_path / "logs")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")], \
        {f.name: f.read_text() for f in (tmp_path / "logs").iterdir()}


def test_warm_up_runs_each_compiler_and_names_the_sites(tmp_path):
    src, site = _tree(tmp_path)
    rows, logs = _parent(tmp_path, src, site)
    assert rows == []  # no failure
    assert "compiler: stand-in TileLang" in logs["demo_example_demo.py.tilelang.warm.log"]
    assert "compiler: tilecute" in logs["demo_example_demo.py.tilecute.warm.log"]
    # the child's records: one per do_bench, named by the example's line
    results = tmp_path / "r.jsonl"
    env = dict(os.environ, TLBENCH_RESULTS=str(results), TLBENCH_WARM="1",
               TLBENCH_EXAMPLE=str(src / "examples" / "demo" / "example_demo.py"),
               TILECUTE_ARCH="sm_90a", CUTE_DSL_ARCH="sm_90a")
    subprocess.run([sys.executable, str(BENCH), "--child", "tilecute", env["TLBENCH_EXAMPLE"]],
                   env=env, check=True, capture_output=True, timeout=600)
    sites = [json.loads(line)["site"] for line in results.read_text().splitlines()]
    assert sites == ["4: do_bench(lambda: None)", "5: do_bench(lambda: None, warmup=5)"]


def test_a_failing_example_is_reported_per_compiler(tmp_path):
    src, site = _tree(tmp_path, fail=True)
    rows, _ = _parent(tmp_path, src, site)
    assert sorted(r["compiler"] for r in rows) == ["tilecute", "tilelang"]
    assert all("the example's own check failed" in r["error"] and r["phase"] == "warm-up"
               for r in rows)
