"""Launch throughput of several threads, alone and while another thread compiles new
kernels (issue 20 item 3: "compiling never stalls launching").

Each of ``--threads`` threads launches a tiny fp16 vector add (1024 elements) on its own
CUDA stream for ``--seconds``; the launches of all threads are counted.  Cases, one run:

* ``torch.add``: the same load with ``torch.add(a, b, out=c)`` (the peer);
* ``tilecute``: the tilecute kernel, nothing else running (its default call path:
  torch tensors handed to the launcher as DLTensor pointers, ``runtime/fastcall.py``);
* ``tilecute (TVM FFI binding)``: the kernel's TVM FFI function called directly, as
  every call was before the fast call path (TVM FFI converts each torch tensor);
* ``tilecute (release_gil=False)``: the same kernel compiled with ``release_gil=False``
  (each call holds the GIL through the launch; docs/performance.md, "Launching from
  several threads");
* ``tilecute (ffi.Tensor args, stream handle)``: the kernel called with its static
  buffers converted once (``tvm_ffi.from_dlpack``) and a stream handle: what a call costs
  without TVM FFI's per-call conversion of torch tensors (docs/performance.md);
* ``tilecute+compile``: the same while one more thread compiles ``--kernels`` new
  kernels (tilecute.compile of fresh programs and their first call, which produces the
  cubin), with the cubin step out of process (tilecute.runtime.cubin_worker, the default);
* ``tilecute+compile-inproc``: the same with ``TILECUTE_CUBIN_WORKER=0`` (cute.compile in
  the launching process, holding its interpreter).

The five steady cases run ``--rounds`` times, interleaved, each reported as its median
with the per-round rates and the median of its per-round ratios to ``torch.add``.
Prints one JSON line per case (launches/s, and for the compile cases the ratio to the
``tilecute`` case: the goal is >= 0.8) and the compile thread's wall time.

    python3 benchmarks/launch_while_compiling.py [--threads 8] [--seconds 3] [--kernels 3] [--rounds 3]
"""


import argparse
import json
import os
import statistics
import sys
import threading
import time

import torch

import tilecute

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import elementwise as E  # noqa: E402


def _launch_loop(fn, stop: threading.Event, counts: list, i: int):
    stream = torch.cuda.Stream()
    n = 0
    with torch.cuda.stream(stream):
        while not stop.is_set():
            for _ in range(64):
                fn()
            n += 64
    stream.synchronize()
    counts[i] = n


def _rate(make_fn, threads: int, seconds: float, background=None):
    fns = [make_fn() for _ in range(threads)]
    for f in fns:
        f()
    torch.cuda.synchronize()
    stop, counts = threading.Event(), [0] * threads
    workers = [threading.Thread(target=_launch_loop, args=(fns[i], stop, counts, i))
               for i in range(threads)]
    bg_time = [0.0]

    def run_background():
        t = time.perf_counter()
        background()
        bg_time[0] = time.perf_counter() - t

    bg = threading.Thread(target=run_background) if background else None
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    if bg:
        bg.start()
    time.sleep(seconds)
    if bg:
        bg.join()  # the window covers the whole compile
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    return sum(counts) / elapsed, bg_time[0]


def _fresh_program(scale: float):
    """A program no cache holds: a scaled copy with ``scale`` baked in."""
    import tilecute.language as T

    N = T.symbolic("N")

    @T.prim_func
    def fresh_scale(x: T.Tensor((N,), "float16"), y: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            for i in T.Parallel(256):
                y[bx * 256 + i] = x[bx * 256 + i] * scale

    return fresh_scale


def _compile_new(kernels: int):
    """Compile ``kernels`` new programs and call each once (the first call produces the
    cubin)."""
    for _ in range(kernels):
        k = tilecute.compile(_fresh_program(1.0 + (time.time_ns() % 10**9) * 1e-9))
        x = torch.randn(1024, device="cuda", dtype=torch.float16)
        k(x, torch.empty_like(x))
        torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--kernels", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of the steady cases, interleaved")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU"}))
        return
    kernel = tilecute.compile(E.vector_add("float16"))
    holding = tilecute.compile(E.vector_add("float16"), release_gil=False)  # same entry

    def tilecute_fn(k=kernel):
        a = torch.randn(1024, device="cuda", dtype=torch.float16)
        c = torch.empty_like(a)
        return lambda: k(a, a, c)

    def binding_fn():
        a = torch.randn(1024, device="cuda", dtype=torch.float16)
        c = torch.empty_like(a)
        kernel(a, a, c)  # (loaded)
        f = kernel._func
        return lambda: f(a, a, c)

    def torch_fn():
        a = torch.randn(1024, device="cuda", dtype=torch.float16)
        c = torch.empty_like(a)
        return lambda: torch.add(a, a, out=c)

    def prepared_fn():
        """Static buffers converted once (``tvm_ffi.from_dlpack``) and the stream passed as
        a handle: no DLPack conversion and no stream lookup per call (a stream of the
        thread's own, made here)."""
        import tvm_ffi

        a = torch.randn(1024, device="cuda", dtype=torch.float16)
        c = torch.empty_like(a)
        kernel(a, a, c)
        ta, tc, stream = tvm_ffi.from_dlpack(a), tvm_ffi.from_dlpack(c), torch.cuda.Stream()
        return lambda h=stream.cuda_stream: kernel(ta, ta, tc, h)

    device = torch.cuda.get_device_name()
    # the steady cases, interleaved over --rounds (the rate drifts between runs by more
    # than the cases differ): the median of each, and of its per-round ratio to torch.add
    steady = {"torch.add": torch_fn, "tilecute": tilecute_fn,
              "tilecute (TVM FFI binding)": binding_fn,
              "tilecute (release_gil=False)": lambda: tilecute_fn(holding),
              "tilecute (ffi.Tensor args, stream handle)": prepared_fn}
    rates = {name: [] for name in steady}
    for r in range(args.rounds):
        names = list(steady)[r % len(steady):] + list(steady)[:r % len(steady)]
        for name in names:
            rates[name].append(_rate(steady[name], args.threads, args.seconds)[0])
    base = statistics.median(rates["tilecute"])
    cases = [(name, statistics.median(rates[name]), 0.0) for name in steady]
    cases.append(("tilecute+compile",
                  *_rate(tilecute_fn, args.threads, args.seconds, lambda: _compile_new(args.kernels))))
    os.environ["TILECUTE_CUBIN_WORKER"] = "0"
    cases.append(("tilecute+compile-inproc",
                  *_rate(tilecute_fn, args.threads, args.seconds, lambda: _compile_new(args.kernels))))
    os.environ.pop("TILECUTE_CUBIN_WORKER")
    for name, rate, compile_s in cases:
        line = {"case": name, "threads": args.threads, "launches_per_s": round(rate),
                "ratio_to_tilecute_alone": round(rate / base, 3), "device": device,
                "fast_call": kernel._call is not kernel._func}
        if name in rates:
            line["rounds"] = [round(x) for x in rates[name]]
            line["ratio_to_torch_add"] = round(statistics.median(
                x / t for x, t in zip(rates[name], rates["torch.add"])), 3)
        if compile_s:
            line["compile_thread_s"] = round(compile_s, 2)
            line["kernels_compiled"] = args.kernels
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
