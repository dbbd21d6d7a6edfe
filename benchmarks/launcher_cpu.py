"""The launcher's own CPU cost per call, measurable without a GPU: tilecute's launchers for the
cases of benchmarks/launch_overhead.py, called in a C++ loop (benchmarks/launcher_call_loop.cpp:
the exported TVM FFI symbol straight, no Python) against a driver that does nothing
(benchmarks/null_libcuda.cpp).  What is left is the launcher: argument checks, parameter
packing, TMA encodes (the driver's part free), the stream, the device slot, the context check
and the launch call.  Issue 20 asks that the shared launcher runtime leave this unchanged.

Cases: "3 tensors" (vector_add, fp16), "10 tensors + 4 scalars" (many_args), "3 TMA
descriptors" (the 128x256x64 GEMM of benchmarks/compile_time.py on sm_90a: three tiled
descriptors encoded per call).  Each with the TVM FFI environment stream and with an explicit
stream argument.  ns per call: the fastest of --rounds rounds of --calls calls, the best of
--repeats processes (run pinned to one core: ``taskset -c 1 python ...``).  With --callgrind
(valgrind installed): instructions per call too, which do not depend on the machine's load.

    python benchmarks/launcher_cpu.py [--calls 200000] [--rounds 5] [--repeats 3] [--callgrind]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

# case -> (program factory, function, loop arguments)
_TENSOR = "t2.16:1048576"  # float16 (DLPack code 2, 16 bits), 2^20 elements
CASES = {
    "3 tensors": ("vector_add", [_TENSOR] * 3),
    "10 tensors + 4 scalars": ("many_args", [_TENSOR] * 10 + ["f1.5", "f0.5", "i3", "i1"]),
    "3 TMA descriptors": ("matmul", ["t2.16:4096x4096"] * 3),
}


def _programs():
    import elementwise as E
    import gemm as G

    return {"3 tensors": E.vector_add("float16"), "10 tensors + 4 scalars": E.many_args(),
            "3 TMA descriptors": G.matmul(tm=128, tn=256, tk=64, stages=3)}


def build(folder: Path) -> dict:
    """The null driver, the loop, and each case's launcher (with the launcher runtime object
    of the cache's runtime folder, as tilecute.compile builds them); returns case -> launcher."""
    from tilecute import cache
    from tilecute.driver import write_sources
    from tilecute.toolchain import _include_dirs, _tvm_ffi_libinfo, build_launcher, cxx_compiler

    includes = [f"-I{d}" for d in _include_dirs()]
    lib = Path(_tvm_ffi_libinfo().find_libtvm_ffi()).parent
    (folder / "driver").mkdir()
    subprocess.run([cxx_compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", *includes, str(HERE / "null_libcuda.cpp"),
                    "-Wl,-soname,libcuda.so.1", "-o", str(folder / "driver" / "libcuda.so.1")], check=True)
    subprocess.run([cxx_compiler(), "-std=c++17", "-O2", *includes, str(HERE / "launcher_call_loop.cpp"),
                    "-o", str(folder / "loop"), f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltvm_ffi", "-ldl"], check=True)
    (folder / "kernel.cubin").write_text("the null driver loads anything\n")
    launchers = {}
    for case, func in _programs().items():
        entry = folder / case.replace(" ", "_").replace("+", "")
        entry.mkdir()
        write_sources(func, "sm_90a", entry)
        launchers[case] = build_launcher(entry / "launcher.cpp", entry, runtime_folder=cache.launcher_runtime_folder())
    return launchers


def _loop(folder: Path, launcher: Path, function: str, args: list, calls: int, rounds: int,
          prefix: tuple = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, LD_LIBRARY_PATH=f"{folder / 'driver'}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    cmd = [*prefix, str(folder / "loop"), str(launcher), function, str(folder / "kernel.cubin"), str(calls),
           str(rounds), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)


def instructions_per_call(folder: Path, launcher: Path, function: str, args: list) -> int:
    """Instructions per call under callgrind: the difference of a 1000- and a 3000-call run."""
    counts = []
    for calls in (1000, 3000):
        out = _loop(folder, launcher, function, args, calls, 1,
                    ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"))
        line = next(l for l in out.stderr.splitlines() if "Collected" in l)
        counts.append(int(line.split()[-1]))
    return round((counts[1] - counts[0]) / 2000)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--callgrind", action="store_true", help="instructions per call too (valgrind)")
    args = p.parse_args()
    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    folder = Path(tempfile.mkdtemp(prefix="launcher-cpu-"))
    try:
        launchers = build(folder)
        rows = {(case, stream): [] for case in CASES for stream in ("env", "explicit")}
        for _ in range(args.repeats):  # interleaved, so a slow phase of the machine hits every case
            for case, (function, loop_args) in CASES.items():
                for stream in ("env", "explicit"):
                    extra = ["s"] if stream == "explicit" else []
                    out = _loop(folder, launchers[case], function, loop_args + extra, args.calls, args.rounds)
                    rows[(case, stream)].append(float(out.stdout))
        cores = len(os.sched_getaffinity(0))
        for (case, stream), times in rows.items():
            row = {"case": case, "stream": stream, "ns_per_call": round(min(times), 2), "cores": cores}
            if args.callgrind and shutil.which("valgrind"):
                function, loop_args = CASES[case]
                row["instructions_per_call"] = instructions_per_call(
                    folder, launchers[case], function, loop_args + (["s"] if stream == "explicit" else []))
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
