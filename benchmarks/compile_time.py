"""Compile time of one new kernel config, by phase, on this machine (issue 20's goal: a new
GEMM config in <= 0.6 s on one core): the Python side (passes, codegen, rendering), the
launcher's C++ build, and the cubin (CuTe DSL, in the cubin worker), for N distinct GEMM
configs, each in a fresh cache folder; then the same with the shared launcher runtime off
(``TILECUTE_SHARED_RUNTIME=0``: every launcher compiles the runtime along with itself).  Run pinned to one core for the goal
(``taskset -c 0 python benchmarks/compile_time.py``).  JSON lines; medians.

    python3 benchmarks/compile_time.py [--configs 4]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import tilecute  # noqa: E402
import gemm as G  # noqa: E402
from tilecute import toolchain  # noqa: E402

CONFIGS = [dict(tm=128, tn=256, tk=64, stages=3), dict(tm=128, tn=128, tk=64, stages=4),
           dict(tm=128, tn=256, tk=64, stages=4), dict(tm=128, tn=128, tk=64, stages=3),
           dict(tm=128, tn=256, tk=32, stages=4), dict(tm=64, tn=256, tk=64, stages=4)]


def measure(configs, shared_runtime: bool) -> dict:
    os.environ["TILECUTE_SHARED_RUNTIME"] = "1" if shared_runtime else "0"
    os.environ["TILECUTE_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile-time-")
    os.environ["TILECUTE_LAUNCHER_RUNTIME_DIR"] = os.path.join(
        tempfile.mkdtemp(prefix="compile-time-runtime-"), "runtime")
    launcher_s = []
    real_build = toolchain.build_launcher

    def timed_build(*a, **k):
        t = time.perf_counter()
        try:
            return real_build(*a, **k)
        finally:
            launcher_s.append(time.perf_counter() - t)

    toolchain.build_launcher = timed_build
    import tilecute.driver as driver
    driver.build_launcher = timed_build
    rows = []
    try:
        # the first build compiles the launcher runtime (once per toolchain): timed apart
        t = time.perf_counter()
        tilecute.compile(G.matmul(tm=64, tn=64, tk=64, stages=2)).ensure_cubin()
        first = time.perf_counter() - t
        launcher_s.clear()
        for c in configs:
            t0 = time.perf_counter()
            kernel = tilecute.compile(G.matmul(**c))
            t1 = time.perf_counter()
            kernel.ensure_cubin()
            t2 = time.perf_counter()
            rows.append({"entry_s": t1 - t0, "launcher_s": launcher_s[-1], "cubin_s": t2 - t1})
    finally:
        toolchain.build_launcher = real_build
        driver.build_launcher = real_build
    med = {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
    med["python_s"] = round(med["entry_s"] - med["launcher_s"], 3)
    med["total_s"] = round(med["entry_s"] + med["cubin_s"], 3)
    return {"shared_runtime": shared_runtime, "configs": len(rows), "first_build_s": round(first, 2), **med}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", type=int, default=4)
    args = p.parse_args()
    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    os.environ.setdefault("CUTE_DSL_ARCH", os.environ["TILECUTE_ARCH"])
    tilecute.compile(G.matmul(tm=64, tn=128, tk=64, stages=2)).ensure_cubin()  # warm the worker
    configs = CONFIGS[:args.configs]
    cores = len(os.sched_getaffinity(0))
    for shared_runtime in (True, False):
        print(json.dumps({"cores": cores, **measure(configs, shared_runtime)}), flush=True)


if __name__ == "__main__":
    main()
