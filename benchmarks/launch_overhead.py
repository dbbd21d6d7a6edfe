"""Per-call host cost of launching a tiny kernel: tilecute vs its peers, in one run.

Case "3 tensors" (fp16 vector add): tilecute vs torch.add(out=), CuTe DSL's own
--enable-tvm-ffi function, Triton (if installed), and a C++ loop of raw cuLaunchKernel on
tilecute's own cubin (built with nvcc here).  Case "10 tensors + 4 scalars": tilecute vs
the raw loop.  Two modes: a long loop (throughput; the GPU queue may push back) and
200-launch bursts with the queue drained between bursts (host latency).
Prints one JSON line per (peer, mode), then a summary line with ratios to the raw loop.

    python benchmarks/launch_overhead.py [--iters 20000] [--burst 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))
N = 1024  # one block: the kernel itself is ~2 us of GPU time


def measure(name, call, iters, burst, case, rounds=50):
    for _ in range(2000):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    torch.cuda.synchronize()
    loop = (time.perf_counter() - t0) / iters * 1e6
    total = 0.0
    for _ in range(rounds):
        s = time.perf_counter()
        for _ in range(burst):
            call()
        total += (time.perf_counter() - s) / burst * 1e6
        torch.cuda.synchronize()
    rows = [{"case": case, "peer": name, "mode": "loop", "us_per_call": round(loop, 3)},
            {"case": case, "peer": name, "mode": f"burst{burst}", "us_per_call": round(total / rounds, 3)}]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def cute_dsl_peer():
    from cute_dsl_peer import build_add

    return build_add()


def triton_peer():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

    return lambda a, b, c: add_kernel[(1,)](a, b, c, N, BLOCK=1024)


def raw_peer(kernel, iters: int, burst: int, case: str):
    """raw_launch.cpp on tilecute's own cubin, parameters described from the launch ABI."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    exe = Path(tempfile.gettempdir()) / "tilecute_raw_launch"
    if not exe.exists():
        subprocess.run([nvcc, "-O2", "-o", str(exe), str(HERE / "raw_launch.cpp"), "-lcuda"], check=True)
    launch = kernel.abi.kernels[0]
    letters = []
    for p in launch.params:
        if p.kind == "pointer":
            letters.append("p")
        elif p.from_symbol:
            letters.append("n")
        else:
            letters.append("f" if p.dtype.startswith("float") else "i")
    grid = -(-N // 1024)
    out = subprocess.run([str(exe), str(kernel.path / "kernel.cubin"), launch.symbol, str(N), str(iters),
                          str(burst), str(grid), str(launch.block[0]), "".join(letters)],
                         check=True, capture_output=True, text=True).stdout
    rows = [dict(json.loads(line), case=case) for line in out.splitlines() if line.startswith("{")]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--burst", type=int, default=200)
    args = ap.parse_args()

    import tilecute
    import elementwise as E

    rows = []
    # case 1: 3 tensors, every peer
    case = "3 tensors"
    kernel = tilecute.compile(E.vector_add("float16"))
    a = torch.randn(N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    kernel(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b), "tilecute result is wrong"
    rows += measure("tilecute", lambda: kernel(a, b, c), args.iters, args.burst, case)
    rows += measure("torch.add(out=)", lambda: torch.add(a, b, out=c), args.iters, args.burst, case)
    try:
        f = cute_dsl_peer()
        f(a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b)
        rows += measure("CuTe DSL --enable-tvm-ffi", lambda: f(a, b, c), args.iters, args.burst, case)
    except ImportError as e:
        print(json.dumps({"peer": "CuTe DSL --enable-tvm-ffi", "skipped": str(e)}))
    try:
        t = triton_peer()
        rows += measure("triton", lambda: t(a, b, c), args.iters, args.burst, case)
    except ImportError as e:
        print(json.dumps({"peer": "triton", "skipped": str(e)}))
    rows += raw_peer(kernel, args.iters, args.burst, case)

    # case 2: 10 tensors + 4 scalars, tilecute vs the raw loop
    case = "10 tensors + 4 scalars"
    wide = tilecute.compile(E.many_args("float16"))
    xs = [torch.randn(N, device="cuda", dtype=torch.float16) for _ in range(9)]
    y = torch.empty_like(xs[0])
    wide(*xs, y, 0.5, 1.0, 3, 1)
    torch.cuda.synchronize()
    ref = (sum(x.float() for x in xs) * 0.5 + 1.0 + 2).half()
    assert torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-1), "many_args result is wrong"
    rows += measure("tilecute", lambda: wide(*xs, y, 0.5, 1.0, 3, 1), args.iters, args.burst, case)
    rows += raw_peer(wide, args.iters, args.burst, case)

    for case in ("3 tensors", "10 tensors + 4 scalars"):
        raw = {r["mode"]: r["us_per_call"] for r in rows if r["case"] == case and r["peer"].startswith("raw")}
        summary = {r["peer"] + " / " + r["mode"]: round(r["us_per_call"] / raw[r["mode"]], 2)
                   for r in rows if r["case"] == case and r["mode"] in raw}
        print(json.dumps({"summary": f"ratio to raw cuLaunchKernel, {case}",
                          "device": torch.cuda.get_device_name(), **summary}))


if __name__ == "__main__":
    main()
