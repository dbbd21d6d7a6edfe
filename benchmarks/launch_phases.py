"""Where the launcher's time goes: each phase of a call, in ns per call, from a launcher
built with -DTILECUTE_PHASE_TIMING (docs/performance.md).

For each case the entry's launcher.cpp (and its runtime header) is copied into a temporary
folder, built with the define (tilecute.toolchain.build_launcher), loaded with
tvm_ffi.load_module and given the entry's cubin. On a GPU it then runs --iters calls with
torch CUDA tensors, twice: one long loop (throughput: the GPU queue may push back) and
bursts of --burst calls with the queue drained between bursts (host latency). It prints
one JSON line per phase (mean ns per call), the launcher's total, the wall time per call
of the Python loop around it, what lies outside the launcher (wall - total: Python, TVM
FFI's argument conversion, the loop), and the same loop on the same launcher.cpp built
without the define (as the entry's own launcher.so is) for the cost of the timing itself.
Without a GPU it builds, loads and checks the exports, says so and exits 0.

    python benchmarks/launch_phases.py                      # vector_add (float16), many_args if the example exists
    python benchmarks/launch_phases.py --entry ~/.cache/tilecute/<key>   # any cache entry

Arguments for --entry come from the entry's launch ABI: every shape symbol is --n rounded
up to its divisibility, strides are row-major unless declared, scalars are 1 / 1.0 / True,
tensors are zeros.  Use it with kernels for which such arguments are valid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

DEFINE = "-DTILECUTE_PHASE_TIMING"
PHASES = ("checks", "pack", "stream", "slot", "context", "launch")  # the order a call runs them
EXPORTS = ("__tilecute_phase_times", "__tilecute_phase_reset")


def emit(**row):
    print(json.dumps(row), flush=True)


def has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# -- entries ---------------------------------------------------------------------------------


def example_entries(target):
    """(case name, entry folder) for vector_add (float16) and, when the example exists,
    many_args; compiled into the kernel cache, cubins produced."""
    import elementwise as E
    import tilecute

    cases = [("vector_add float16 (3 tensors)", E.vector_add("float16"))]
    if hasattr(E, "many_args"):
        cases.append(("many_args float16 (10 tensors + 4 scalars)", E.many_args("float16")))
    else:
        emit(case="many_args", skipped="examples/elementwise.py has no many_args")
    out = []
    for name, func in cases:
        kernel = tilecute.compile(func, target=target)
        kernel.ensure_cubin()
        out.append((name, kernel.path))
    return out


def given_entry(path: Path):
    import tilecute

    path = path.expanduser().resolve()
    if not (path / "kernel.cubin").is_file():
        tilecute.load(path).ensure_cubin()
    return [(path.name, path)]


def build_both(entry: Path, folder: Path) -> tuple[Path, Path, Path]:
    """The entry's launcher.cpp built three times, at once: with the define (``folder/timed``),
    without it (``folder/plain``, as the entry's own launcher.so is built; rebuilt here so
    that all come from the same compiler and an entry copied from another machine works),
    and without it at -O1 (``folder/o1``)."""
    from concurrent.futures import ThreadPoolExecutor

    from tilecute.host.launcher import LAUNCHER_SOURCE, RUNTIME_HEADER, write_launcher
    from tilecute.toolchain import build_launcher

    source = folder / LAUNCHER_SOURCE
    if (entry / RUNTIME_HEADER).is_file() and "TC_PHASE_MARK" in (entry / LAUNCHER_SOURCE).read_text():
        for name in (LAUNCHER_SOURCE, RUNTIME_HEADER):
            shutil.copyfile(entry / name, folder / name)
    else:
        # made by an older tilecute (before phase timing, or before the launcher runtime
        # became a header): render it again from the entry's ABI with the current templates
        from tilecute import __version__
        from tilecute.runtime.abi import LaunchABI

        abi = LaunchABI.from_json((entry / "abi.json").read_text())
        write_launcher(abi, folder, tilecute_version=__version__)
        emit(entry=str(entry), note="launcher.cpp predates phase timing or the runtime header; "
                                    "rendered again from abi.json")
    with ThreadPoolExecutor(3) as pool:
        timed = pool.submit(build_launcher, source, folder / "timed", extra_cflags=(DEFINE,))
        plain = pool.submit(build_launcher, source, folder / "plain")
        # the same launcher at -O1 (the later -O wins): is the slower-to-build -O2 worth it?
        o1 = pool.submit(build_launcher, source, folder / "o1", extra_cflags=("-O1",))
        return timed.result(), plain.result(), o1.result()


def load(library: Path, cubin: Path):
    import tvm_ffi

    module = tvm_ffi.load_module(str(library))
    module["__tilecute_set_cubin"](str(cubin))
    return module


# -- arguments from the launch ABI --------------------------------------------------------------


def make_args(abi, n: int, device: str = "cuda"):
    import torch

    from tilecute.runtime.abi import TensorArg
    from tilecute.runtime.kernel import _torch_dtype

    divisibility = {s.name: s.divisibility for s in abi.symbols}
    values: dict[str, int] = {}

    def symbol(name, natural):
        if name not in values:
            d = divisibility.get(name, 1)
            values[name] = -(-natural // d) * d
        return values[name]

    args = []
    for spec in abi.args:
        if not isinstance(spec, TensorArg):
            args.append({"bool": True}.get(spec.dtype, 1.0 if spec.dtype.startswith(("float", "bfloat")) else 1))
            continue
        shape = [d if isinstance(d, int) else symbol(d, n) for d in spec.shape]
        dtype = _torch_dtype(spec.dtype)
        if spec.strides is None:
            args.append(torch.zeros(shape, dtype=dtype, device=device))
            continue
        strides, running = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            s = spec.strides[d]
            strides[d] = s if isinstance(s, int) else symbol(s, running)
            running = max(running, strides[d] * max(shape[d], 1))
        t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        args.append(t.zero_() if t.numel() else t)
    return args


# -- measuring -----------------------------------------------------------------------------------


def run_calls(fn, args, iters: int, burst: int) -> float:
    """Seconds spent in the calls: one loop (burst == 0) or bursts with the queue drained
    between them (the drain is not counted)."""
    import torch

    torch.cuda.synchronize()
    if burst <= 0:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(*args)
        elapsed = time.perf_counter() - t0
        torch.cuda.synchronize()
        return elapsed
    elapsed = 0.0
    for _ in range(max(1, iters // burst)):
        t0 = time.perf_counter()
        for _ in range(burst):
            fn(*args)
        elapsed += time.perf_counter() - t0
        torch.cuda.synchronize()
    return elapsed


def measure(case, timed, plain, o1, function, args, iters, burst, warmup):
    fn, plain_fn, o1_fn = timed[function], plain[function], o1[function]
    run_calls(fn, args, warmup, 0)  # first use: driver, module load; then steady state
    run_calls(plain_fn, args, warmup, 0)
    run_calls(o1_fn, args, warmup, 0)
    modes = [("loop", 0)] + ([(f"burst{burst}", burst)] if burst > 0 else [])
    for mode, b in modes:
        timed["__tilecute_phase_reset"]()
        wall = run_calls(fn, args, iters, b)
        times = dict(timed["__tilecute_phase_times"]())
        calls = times["calls"]
        plain_wall = run_calls(plain_fn, args, iters, b)
        assert calls == (iters if b <= 0 else max(1, iters // b) * b), times
        total = 0.0
        for phase in PHASES:
            ns = times[phase] / calls
            total += ns
            emit(case=case, mode=mode, phase=phase, ns_per_call=round(ns, 1))
        wall_ns = wall / calls * 1e9
        emit(case=case, mode=mode, phase="launcher total", ns_per_call=round(total, 1), calls=calls,
             clock_read_ns=round(times["clock_read_ps"] / 1000, 1),
             note="each mark includes about one clock read (context has two marks)")
        emit(case=case, mode=mode, phase="wall per call (timed launcher)", ns_per_call=round(wall_ns, 1))
        emit(case=case, mode=mode, phase="outside the launcher (wall - launcher total)",
             ns_per_call=round(wall_ns - total, 1), note="Python loop, TVM FFI call and argument conversion")
        emit(case=case, mode=mode, phase="wall per call (launcher without the define)",
             ns_per_call=round(plain_wall / calls * 1e9, 1))
        # -O2 vs -O1, interleaved three times each so that drift hits both alike
        o2_walls, o1_walls = [], []
        for _ in range(3):
            o2_walls.append(run_calls(plain_fn, args, iters, b))
            o1_walls.append(run_calls(o1_fn, args, iters, b))
        emit(case=case, mode=mode, phase="wall per call, -O2 launcher (min of 3)",
             ns_per_call=round(min(o2_walls) / calls * 1e9, 1))
        emit(case=case, mode=mode, phase="wall per call, -O1 launcher (min of 3)",
             ns_per_call=round(min(o1_walls) / calls * 1e9, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", type=Path, help="a cache entry folder (default: compile the examples)")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--burst", type=int, default=200, help="calls per burst (0: the loop only)")
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--n", type=int, default=1024, help="value of each shape symbol (default 1024: one block)")
    ap.add_argument("--target", help="arch to compile the examples for (default: the GPU's, else "
                                     "TILECUTE_ARCH, else sm_90a without a GPU)")
    args = ap.parse_args()

    gpu = has_gpu()
    target = args.target or (None if gpu else os.environ.get("TILECUTE_ARCH") or "sm_90a")
    entries = given_entry(args.entry) if args.entry else example_entries(target)

    from tilecute.runtime.abi import LaunchABI

    with tempfile.TemporaryDirectory(prefix="tilecute-phases-") as tmp:
        for i, (case, entry) in enumerate(entries):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            t0 = time.perf_counter()
            library, plain_library, o1_library = build_both(entry, folder)
            build_s = time.perf_counter() - t0
            timed = load(library, entry / "kernel.cubin")
            missing = [e for e in EXPORTS if not timed.implements_function(e)]
            if missing:
                raise SystemExit(f"{library}: built with {DEFINE} but does not export {missing}")
            abi = LaunchABI.from_json((entry / "abi.json").read_text())
            if not gpu:
                emit(case=case, entry=str(entry), built_s=round(build_s, 1), exports=list(EXPORTS),
                     phase_times=dict(timed["__tilecute_phase_times"]()),
                     skipped="no CUDA GPU: the timed launcher builds and loads; nothing measured")
                continue
            plain = load(plain_library, entry / "kernel.cubin")
            o1 = load(o1_library, entry / "kernel.cubin")
            call_args = make_args(abi, args.n)
            measure(case, timed, plain, o1, abi.function, call_args, args.iters, args.burst,
                    args.warmup)
    if gpu:
        import torch

        emit(device=torch.cuda.get_device_name(), iters=args.iters, burst=args.burst)


if __name__ == "__main__":
    main()
