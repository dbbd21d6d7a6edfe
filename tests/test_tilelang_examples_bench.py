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


def test_kernel_calls_are_timed_once_per_line(monkeypatch):
    """``--kernel-calls``: a tilecute kernel's first call from each line of the example is timed
    (the benchmark's timer calls it again); later calls from that line, and calls inside a
    do_bench-timed function, are not."""
    import importlib.util

    import torch

    import tilecute
    import tilecute.language as T
    from tilecute.runtime.kernel import Kernel

    spec = importlib.util.spec_from_file_location("tlbench", BENCH)
    bench_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_mod)
    monkeypatch.setattr(Kernel, "__init__", Kernel.__init__)  # restored after the test
    monkeypatch.setenv("TLBENCH_EXAMPLE", __file__)
    monkeypatch.setenv("TLBENCH_WARM", "0")
    timed = []

    def bench(fn):
        bench_mod._IN_BENCH.append(fn)
        try:
            timed.append(fn())
        finally:
            bench_mod._IN_BENCH.pop()

    bench_mod._time_kernel_calls("tilecute", bench)

    @T.prim_func
    def scale(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = A[i] * 2.0

    kernel = tilecute.compile(scale)
    launched = []
    kernel._func = lambda *args: launched.append(args) or len(launched)
    a, b = torch.zeros(128), torch.zeros(128)
    for _ in range(3):
        kernel(a, b)  # one line: timed on its first call only
    kernel(a, b)  # another line
    assert len(timed) == 2 and len(launched) == 4 + 2
    bench(lambda: kernel(a, b))  # inside the timer: not timed again
    assert len(timed) == 3 and len(launched) == 7
