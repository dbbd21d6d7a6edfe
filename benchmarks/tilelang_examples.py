"""TileLang's own example programs, timed as compiled by TileLang and as compiled by tilecute,
in one run on one GPU: the peer for "a plain TileLang program gets fast code".

Each example runs unchanged, twice per round (once per compiler, in a separate process each,
the order alternating): ``import tilelang`` is TileLang itself (installed apart from tilecute,
``--tilelang-path``, since the two pin different apache-tvm-ffi releases) or tilecute under
that name (``.ci/tilelang_gpu/tlalias.py``).  Every ``do_bench`` the example calls (the
module's and ``Profiler.do_bench``) is replaced, in both processes alike, by one timer of this
file's (CUDA events around each call, a 256 MB L2 flush before it, ~25 ms warm-up and ~100 ms of
calls, the median), so both compilers' kernels are timed the same way; the call site (the
example's line) names each time.  A site that times a torch reference times the same code in
both processes and shows the noise of the run (ratio ~1).

    python3 benchmarks/tilelang_examples.py --tilelang-src TILELANG_CHECKOUT \\
        --tilelang-path SITE_DIR_WITH_TILELANG [--list FILE | EXAMPLE ...] [--rounds 2] \\
        [--warm-jobs 8] [--timeout 600] [--out results.jsonl]

EXAMPLE: a path under the checkout's ``examples/`` (``gemm/example_gemm.py``).  Before the timed
rounds, a warm-up pass runs every example under both compilers ``--warm-jobs`` at a time with
``do_bench`` calling its function once, so the timed rounds find every kernel compiled
(TileLang's cache in ``~/.tilelang``, tilecute's in its cache root).  Prints one JSON line per
example and call site: ``tilelang_ms`` / ``tilecute_ms`` (medians over the rounds) and
``speedup`` (TileLang's time over tilecute's: above 1, tilecute is faster), and a line per
example and compiler that failed (its last error line).  No TileLang code is part of tilecute:
the checkout and TileLang's wheel come from the user.
"""

import argparse
import concurrent.futures as cf
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TLGPU = os.path.join(ROOT, ".ci", "tilelang_gpu")
COMPILERS = ("tilelang", "tilecute")


# ---------------------------------------------------------------- the child: one example, one compiler

def _timer(warm: bool):
    """The one ``do_bench`` both compilers' processes use."""
    import torch

    def bench(fn, *_, quantiles=None, **__):
        _IN_BENCH.append(fn)
        try:
            return _bench(fn, quantiles)
        finally:
            _IN_BENCH.pop()

    def _bench(fn, quantiles):
        fn()
        if torch.cuda.is_available():  # (the warm-up pass also runs on a CPU machine)
            torch.cuda.synchronize()
        ms = 1.0
        if not warm:
            flush = torch.empty(256 << 18, dtype=torch.int32, device="cuda")
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(1000)]

            def run(n):
                for s, e in ev[:n]:
                    flush.zero_()
                    s.record()
                    fn()
                    e.record()
                torch.cuda.synchronize()
                return [s.elapsed_time(e) for s, e in ev[:n]]

            est = statistics.median(run(5))
            run(max(1, min(1000, int(25 / max(est, 1e-3)))))
            ms = statistics.median(run(max(5, min(1000, int(100 / max(est, 1e-3))))))
        site = _site()
        with open(os.environ["TLBENCH_RESULTS"], "a") as f:
            f.write(json.dumps({"site": site, "ms": ms}) + "\n")
        return [ms] * len(quantiles) if quantiles else ms

    return bench


_IN_BENCH: list = []  # the functions being timed now (a kernel call inside one is not timed again)


def _time_kernel_calls(compiler: str, bench) -> None:
    """``--kernel-calls``: every compiled kernel's first call from each line of the example is
    timed too (the same timer, calling it again with the same arguments), for the examples
    whose ``main()`` times nothing.  The kernel objects of both compilers are wrapped alike:
    TileLang's ``JITKernel.__call__``; tilecute's ``Kernel`` (a class per instance, whose
    ``__call__`` the first call replaces by the loaded function: the wrapper keeps its place)."""
    timed = set()

    def timing(call):
        def wrapper(self, *args, **kwargs):
            out = call(self, *args, **kwargs)
            if not _IN_BENCH and os.environ.get("TLBENCH_WARM") != "1":
                site = _site()
                if site not in timed:
                    timed.add(site)
                    bench(lambda: call(self, *args, **kwargs))
            return out
        return wrapper

    if compiler == "tilelang":
        from tilelang.jit.kernel import JITKernel
        JITKernel.__call__ = timing(JITKernel.__call__)
        return
    from tilecute.runtime.kernel import Kernel

    class _KeepCall(type):
        def __setattr__(cls, name, value):
            if name != "__call__":
                super().__setattr__(name, value)

    init = Kernel.__init__

    def patched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        cls = type(self)
        self.__class__ = _KeepCall(cls.__name__, (cls,), {"__call__": timing(cls.__call__)})

    Kernel.__init__ = patched_init


def _site() -> str:
    """The example's line that called (``N: source``); else the nearest line of a module
    beside it (``file.py:N: source``, the example's own helpers); else ``?``."""
    import linecache
    example = os.path.abspath(os.environ["TLBENCH_EXAMPLE"])
    folder = os.path.dirname(example)
    near = None
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path == example:
            return f"{frame.f_lineno}: {linecache.getline(example, frame.f_lineno).strip()[:80]}"
        if near is None and os.path.dirname(path) == folder:
            near = (path, frame.f_lineno)
        frame = frame.f_back
    if near is None:
        return "?"
    path, line = near
    return f"{os.path.basename(path)}:{line}: {linecache.getline(path, line).strip()[:80]}"


def child(compiler: str, example: str) -> None:
    warm = os.environ.get("TLBENCH_WARM") == "1"
    sys.path.insert(0, TLGPU)
    if compiler == "tilecute":
        import tlalias  # noqa: F401  -- `tilelang` is tilecute from here on
    import importlib.util
    if any(importlib.util.find_spec(n) is None for n in ("flash_attn", "fla")):
        sys.path.append(os.path.join(TLGPU, "shims"))  # the references some examples import
    bench = _timer(warm)
    if compiler == "tilecute":
        import tilecute.runtime.profiling as prof
        import tilecute.profiler as pub
        prof.do_bench = pub.do_bench = bench
    else:
        import tilelang.profiler as pub
        import tilelang.profiler.bench as prof
        prof.do_bench = pub.do_bench = bench
    if os.environ.get("TLBENCH_KERNELS") == "1":
        _time_kernel_calls(compiler, bench)
    sys.argv = [example]
    sys.path.insert(0, os.path.dirname(os.path.abspath(example)))
    os.chdir(os.path.dirname(os.path.abspath(example)))
    try:
        runpy.run_path(os.path.basename(example), run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise


# ---------------------------------------------------------------- the parent

def _run(compiler: str, example: str, args, warm: bool) -> tuple:
    """(records, error or None) of one child process."""
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as f:
        results = f.name
    env = dict(os.environ, TLBENCH_RESULTS=results, TLBENCH_WARM="1" if warm else "0",
               TLBENCH_EXAMPLE=os.path.join(args.tilelang_src, "examples", example),
               TLBENCH_KERNELS="1" if args.kernel_calls else "0",
               PYTHONUNBUFFERED="1")
    path = env.get("PYTHONPATH", "")
    if compiler == "tilelang":  # TileLang's site first: its apache-tvm-ffi, not tilecute's
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.tilelang_path, path) if p)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", compiler, env["TLBENCH_EXAMPLE"]]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        err = None if p.returncode == 0 else (
            (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["exit %d" % p.returncode])[-1][:400])
        if args.logs:
            name = f"{example.replace('/', '_')}.{compiler}.{'warm' if warm else 'timed'}.log"
            with open(os.path.join(args.logs, name), "w") as log:
                log.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    except subprocess.TimeoutExpired:
        err = f"timeout after {args.timeout} s"
    with open(results) as f:
        records = [json.loads(line) for line in f if line.strip()]
    os.unlink(results)
    return records, err


def parent(args) -> None:
    examples = list(args.examples)
    if args.list:
        with open(args.list) as f:
            examples += [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    out = open(args.out, "a") if args.out else None

    def emit(obj):
        line = json.dumps(obj)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    failed = {}
    if args.warm_jobs:
        with cf.ThreadPoolExecutor(args.warm_jobs) as pool:
            jobs = {pool.submit(_run, c, e, args, True): (c, e) for e in examples for c in COMPILERS}
            for job in cf.as_completed(jobs):
                c, e = jobs[job]
                err = job.result()[1]
                if err:
                    failed[(c, e)] = err
                    emit({"example": e, "compiler": c, "phase": "warm-up", "error": err})
    times = {}  # (example, site) -> {compiler: [ms per round]}
    for r in range(args.rounds):
        for i, e in enumerate(examples):
            order = COMPILERS if (r + i) % 2 == 0 else COMPILERS[::-1]
            for c in order:
                if (c, e) in failed:
                    continue
                records, err = _run(c, e, args, False)
                if err:
                    failed[(c, e)] = err
                    emit({"example": e, "compiler": c, "phase": f"round {r + 1}", "error": err})
                seen = {}
                for rec in records:
                    k = seen[rec["site"]] = seen.get(rec["site"], 0) + 1
                    site = rec["site"] if k == 1 else f"{rec['site']} (#{k})"
                    times.setdefault((e, site), {}).setdefault(c, []).append(rec["ms"])
                    if args.each:
                        emit({"example": e, "site": site, "compiler": c, "round": r + 1,
                              "ms": rec["ms"]})
    ratios = []
    for (e, site), by in times.items():
        row = {"example": e, "site": site}
        for c in COMPILERS:
            if by.get(c):
                row[f"{c}_ms"] = round(statistics.median(by[c]), 5)
        if all(f"{c}_ms" in row for c in COMPILERS):
            row["speedup"] = round(row["tilelang_ms"] / row["tilecute_ms"], 3)
            ratios.append(row["speedup"])
        emit(row)
    if ratios:
        emit({"summary": "speedup (TileLang ms / tilecute ms) over every site timed under both",
              "sites": len(ratios), "geomean": round(statistics.geometric_mean(ratios), 3),
              "min": min(ratios), "max": max(ratios)})


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", nargs="*", help="paths under the checkout's examples/")
    ap.add_argument("--tilelang-src", required=True, help="a TileLang checkout (its examples/)")
    ap.add_argument("--tilelang-path", required=True,
                    help="a folder where `import tilelang` finds TileLang (pip install --target)")
    ap.add_argument("--list", help="a file of example paths, one a line")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm-jobs", type=int, default=8, help="0: no warm-up pass")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per example and compiler")
    ap.add_argument("--out", help="append the JSON lines here too")
    ap.add_argument("--logs", help="a folder for each process's output")
    ap.add_argument("--each", action="store_true",
                    help="also print each time as it is measured (a run cut short keeps them)")
    ap.add_argument("--kernel-calls", action="store_true",
                    help="also time each kernel's first call from each line of the example "
                         "(for examples whose main() times nothing)")
    args = ap.parse_args()
    args.tilelang_src = os.path.abspath(args.tilelang_src)
    parent(args)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # the child's error goes to its stderr's last line, where the parent reads it
        traceback.print_exc()
        last = traceback.format_exc().strip().splitlines()[-1]
        print(last, file=sys.stderr)
        sys.exit(1)
