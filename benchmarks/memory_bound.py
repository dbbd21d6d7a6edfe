"""Achieved bandwidth of tilecute's memory-bound tile kernels vs torch and vs a
device-to-device copy of the same bytes, measured in one run.

Row-wise kernels (softmax, layernorm, rmsnorm; fp16 in and out, fp32 math) over
2**26-element matrices with rows of 4096..32768 elements, and an fp32 transpose through
shared memory.  Bytes counted: what the kernel must read and write (the weights of the
norms once).  Each number is the median of ``--reps`` timed runs (CUDA events) after
warm-up.  Prints one JSON line per (kernel, width, peer), each with its bandwidth and its
ratio to the copy of the same bytes measured right before.

    python benchmarks/memory_bound.py [--reps 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import tile_ops as E  # noqa: E402
import tilecute  # noqa: E402

F = torch.nn.functional
ELEMENTS = 1 << 26


def time_us(fn, reps: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def report(kernel, width, peer, us, nbytes, copy_gbps=None):
    gbps = nbytes / us / 1e3
    row = {"kernel": kernel, "width": width, "peer": peer, "us": round(us, 2),
           "GBps": round(gbps, 1)}
    if copy_gbps:
        row["of_copy"] = round(gbps / copy_gbps, 3)
    print(json.dumps(row), flush=True)
    return gbps


def copy_peer(kernel, width, nbytes_each_way, reps):
    src = torch.empty(nbytes_each_way, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return report(kernel, width, "d2d_copy", time_us(lambda: dst.copy_(src), reps), 2 * nbytes_each_way)


def rowwise(reps: int) -> None:
    for n in (4096, 8192, 16384, 32768):
        m = ELEMENTS // n
        x = torch.randn(m, n, device="cuda", dtype=torch.float16)
        w = torch.randn(n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * 2
        cfg = E.row_config(n)
        cases = {
            "softmax": (tilecute.compile(E.softmax(**cfg)), (x, y), lambda: torch.softmax(x, -1), 0),
            "layernorm": (tilecute.compile(E.layernorm(**cfg)), (x, w, b, y),
                          lambda: F.layer_norm(x, (n,), w, b, 1e-5), 2 * n * 2),
            "rmsnorm": (tilecute.compile(E.rmsnorm(**cfg)), (x, w, y),
                        lambda: F.rms_norm(x, (n,), w, 1e-6), n * 2),
        }
        for name, (kernel, args, ref, extra) in cases.items():
            copy = copy_peer(name, n, nbytes // 2, reps)
            report(name, n, "tilecute", time_us(lambda: kernel(*args), reps), nbytes + extra, copy)
            report(name, n, "torch", time_us(ref, reps), nbytes + extra, copy)


def transpose(reps: int) -> None:
    m = n = 8192
    a = torch.randn(m, n, device="cuda")
    b = torch.empty(n, m, device="cuda")
    nbytes = 2 * a.numel() * 4
    kernel = tilecute.compile(E.transpose(M=m, N=n))
    copy = copy_peer("transpose", n, nbytes // 2, reps)
    report("transpose", n, "tilecute", time_us(lambda: kernel(a, b), reps), nbytes, copy)
    report("transpose", n, "torch", time_us(lambda: b.copy_(a.t()), reps), nbytes, copy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    rowwise(args.reps)
    transpose(args.reps)


if __name__ == "__main__":
    main()
