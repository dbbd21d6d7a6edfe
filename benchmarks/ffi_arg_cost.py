"""What TVM FFI's Python call costs per argument: a do-nothing packed C++ function (the
launcher's export form, built like a launcher) called with 0-10 torch tensors, ints,
floats, pre-converted ``tvm_ffi.Tensor`` objects, and through the call forms tilecute uses
(``kernel(...)`` with ``__call__`` replaced by the function).  Runs on CPU (CPU tensors) and
on a GPU (CUDA tensors as well, which add TVM FFI's stream query and environment-stream
set/restore).  Prints one JSON line per measurement (ns per call, fastest sample) and
summary lines with the per-argument slopes.

    python3 benchmarks/ffi_arg_cost.py [--samples 100] [--device cpu|cuda|both]

The numbers are Python -> TVM FFI -> C++ -> back, without any launch: the part of a
tilecute call that docs/performance.md calls "outside the launcher".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOOP_SOURCE = r"""
#include <tvm/ffi/c_api.h>

// The launcher's export form: a packed safe-call symbol that reads the TVMFFIAny array.
// `noop` does nothing; `touch` reads each tensor's data pointer, as a launcher would.
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_noop(void*, const TVMFFIAny*, int32_t, TVMFFIAny*) {
  return 0;
}

extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_touch(void*, const TVMFFIAny* args, int32_t num_args,
                                                  TVMFFIAny* result) {
  uintptr_t sum = 0;
  for (int32_t i = 0; i < num_args; ++i) {
    if (args[i].type_index == kTVMFFITensor) {
      const DLTensor* t = reinterpret_cast<const DLTensor*>(
          reinterpret_cast<const char*>(args[i].v_obj) + sizeof(TVMFFIObject));
      sum += reinterpret_cast<uintptr_t>(t->data);
    }
  }
  result->type_index = kTVMFFINone;
  result->v_int64 = 0;
  return sum == 1 ? 1 : 0;  // never 1; keeps the loop
}
"""


def build_noop(folder: Path):
    """Build the do-nothing library with tilecute's launcher build; return the module."""
    import tvm_ffi
    from tilecute.toolchain import build_launcher

    (folder / "noop.cpp").write_text(NOOP_SOURCE)
    lib = build_launcher(folder / "noop.cpp", folder)
    return tvm_ffi.load_module(str(lib))


def fastest_ns(calls: dict, samples: int, chunk: int = 2000) -> dict:
    """For each ``name: call``, the fastest of ``samples`` samples of ``chunk`` calls, in mean
    ns per call (the benchmark's own loop and lambda included; see the 'empty lambda' line).
    The samples of all calls are interleaved (round robin) and short, and the minimum is
    kept, so other processes on a shared machine, or a slow phase of the CPU, do not land
    on one measurement only."""
    for call in calls.values():
        for _ in range(chunk):
            call()
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(samples):
        for name, call in calls.items():
            t0 = time.perf_counter_ns()
            for _ in range(chunk):
                call()
            best[name] = min(best[name], (time.perf_counter_ns() - t0) / chunk)
    return best


def run(device: str, samples: int) -> list[dict]:
    import torch
    import tvm_ffi

    folder = Path(tempfile.mkdtemp(prefix="tilecute_ffi_cost_"))
    mod = build_noop(folder)
    noop, touch = mod["noop"], mod["touch"]
    tensors = [torch.zeros(1024, dtype=torch.float16, device=device) for _ in range(10)]
    # tensors converted once: TVM FFI passes an ffi.Tensor by pointer (no torch export, no
    # allocation), but it then records no device and sets no environment stream
    ffi = [tvm_ffi.from_dlpack(t) for t in tensors]
    keep = mod["noop"]
    keep.release_gil = False  # TVM FFI releases the GIL around the C call by default

    class K:  # tilecute's form: the kernel's class __call__ is the TVM FFI function
        pass

    K.__call__ = staticmethod(noop)
    k = K()

    class P:  # a Python method in between (what a kernel with out_idx has, minus allocation)
        def __call__(self, *args):
            return noop(*args)

    p = P()
    a, b, c = tensors[:3]
    many = [*tensors, 0.5, 1.0, 3, 1]  # launch_overhead.py's many_args: 10 tensors + 4 scalars
    calls = {("empty lambda (the loop itself)", 0): lambda: None,
             ("noop()", 0): lambda: noop()}
    for n in (1, 3, 10):
        ts, fs = tensors[:n], ffi[:n]
        calls[("noop(*torch tensors)", n)] = lambda ts=ts: noop(*ts)
        calls[("touch(*torch tensors)", n)] = lambda ts=ts: touch(*ts)
        calls[("noop(*tvm_ffi.Tensor, converted once)", n)] = lambda fs=fs: noop(*fs)
    # tilecute's call path (runtime/fastcall.py): the same function, torch tensors handed
    # over as DLTensor pointers filled on the stack, the current stream as an argument
    from tilecute.runtime.fastcall import wrap

    fast = {n: wrap(noop, n) for n in (1, 3, 10, 14)}
    if all(fast.values()):
        for n in (1, 3, 10):
            calls[("fast call (*torch tensors)", n)] = lambda ts=tensors[:n], f=fast[n]: f(*ts)
        calls[("fast call (10 torch tensors, 2 floats, 2 ints)", 14)] = lambda f=fast[14]: f(*many)
        KF = type("KF", (), {"__call__": staticmethod(fast[3])})
        kf = KF()
        calls[("kernel(a, b, c), __call__ = staticmethod(fast call) (tilecute's form)", 3)] = lambda: kf(a, b, c)
    else:
        print(json.dumps({"fast call": "not available", "why": _fast_call_missing()}), flush=True)
    for n in (1, 4, 10):
        ints, floats = [1] * n, [1.0] * n
        calls[("noop(*ints)", n)] = lambda ints=ints: noop(*ints)
        calls[("noop(*floats)", n)] = lambda floats=floats: noop(*floats)
    calls[("noop(10 torch tensors, 2 floats, 2 ints)", 14)] = lambda: noop(*many)
    calls[("noop(), release_gil=False", 0)] = lambda: keep()
    calls[("noop(a, b, c), release_gil=False", 3)] = lambda: keep(a, b, c)
    calls[("noop(a, b, c) (the function through a local name)", 3)] = lambda: noop(a, b, c)
    calls[("kernel(a, b, c), __call__ = staticmethod(function) (tilecute's form)", 3)] = lambda: k(a, b, c)
    calls[("kernel(a, b, c), a Python __call__ forwarding *args", 3)] = lambda: p(a, b, c)
    rows = []
    for (what, n), ns in fastest_ns(calls, samples).items():
        row = {"device": device, "what": what, "args": n, "ns_per_call": round(ns, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _fast_call_missing() -> str:
    from tilecute.runtime.fastcall import build_error

    return build_error() or "no Python headers, TILECUTE_FAST_CALL=0, or torch lacks the exchange API"


def slopes(rows: list[dict]) -> dict:
    """ns per extra argument, from the 1- and 10-argument lines of each kind."""
    by = {(r["what"], r["args"]): r["ns_per_call"] for r in rows}
    out = {}
    for what in ("noop(*torch tensors)", "touch(*torch tensors)", "noop(*ints)", "noop(*floats)",
                 "noop(*tvm_ffi.Tensor, converted once)", "fast call (*torch tensors)"):
        if (what, 1) in by and (what, 10) in by:
            out[what] = round((by[(what, 10)] - by[(what, 1)]) / 9, 1)
    if ("noop(*torch tensors)", 10) in by and ("noop(*ints)", 10) in by:
        out["torch tensor minus int, per argument (10 of each)"] = round(
            (by[("noop(*torch tensors)", 10)] - by[("noop(*ints)", 10)]) / 10, 1)
    out["noop() base (one call, no arguments, loop included)"] = by.get(("noop()", 0))
    out["empty lambda (loop)"] = by.get(("empty lambda (the loop itself)", 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100, help="samples of 2000 calls per measurement")
    ap.add_argument("--device", choices=("cpu", "cuda", "both"), default="both")
    ap.add_argument("--no-subprocess", action="store_true",
                    help="skip the TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API=1 comparison run")
    args = ap.parse_args()

    import torch
    import tvm_ffi

    has_api = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    print(json.dumps({
        "env": "versions", "python": sys.version.split()[0], "torch": torch.__version__,
        "tvm_ffi": tvm_ffi.__version__,
        "torch.Tensor.__dlpack_c_exchange_api__": has_api,
        "tvm_ffi optional torch addon library loaded": tvm_ffi._optional_torch_c_dlpack._LIB is not None,
        "TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API": os.environ.get("TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API"),
        "TVM_FFI_RELEASE_GIL_BY_DEFAULT": os.environ.get("TVM_FFI_RELEASE_GIL_BY_DEFAULT"),
    }), flush=True)
    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        print(json.dumps({"device": "cuda", "skipped": "no CUDA device"}), flush=True)
        devices.remove("cuda")
    for device in devices:
        rows = run(device, args.samples)
        print(json.dumps({"summary": f"ns per extra argument ({device}, TVM FFI {tvm_ffi.__version__}, "
                                     f"torch {torch.__version__})", **slopes(rows)}), flush=True)
    if not args.no_subprocess and os.environ.get("TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API") != "1":
        # the slow path for comparison: torch tensors through torch.utils.dlpack.to_dlpack
        env = dict(os.environ, TVM_FFI_SKIP_DLPACK_C_EXCHANGE_API="1")
        subprocess.run([sys.executable, __file__, "--samples", str(max(args.samples // 4, 5)),
                        "--device", args.device, "--no-subprocess"],
                       env=env, check=True)


if __name__ == "__main__":
    main()
