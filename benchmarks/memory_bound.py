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
ONLY: set = set()


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


def rmsnorm_plain(M, N, block_m=2, threads=256, eps=1e-6):
    """RMSNorm as TileLang users write it first: a block of rows and the weight copied into
    fragments (the weight read at the nest's column: each thread holds the columns it meets)."""
    import tilecute.language as T

    @T.prim_func
    def rms(X: T.Tensor((M, N), "float16"), W: T.Tensor((N,), "float16"),
            Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, N), "float32")
            sq = T.alloc_fragment((block_m, N), "float32")
            w = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((block_m,), "float32")
            T.copy(X[bx * block_m, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_m, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_m):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_m, N):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * block_m, 0])
    return rms


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
            "softmax": (lambda: E.softmax(**cfg), (x, y), lambda: torch.softmax(x, -1), 0),
            "layernorm": (lambda: E.layernorm(**cfg), (x, w, b, y),
                          lambda: F.layer_norm(x, (n,), w, b, 1e-5), 2 * n * 2),
            "rmsnorm": (lambda: E.rmsnorm(**cfg), (x, w, y),
                        lambda: F.rms_norm(x, (n,), w, 1e-6), n * 2),
        }
        if n <= 8192:  # (a row block of fp32 fragments in registers)
            cases["rmsnorm_plain"] = (lambda: rmsnorm_plain(m, n), (x, w, y),
                                      lambda: F.rms_norm(x, (n,), w, 1e-6), n * 2)
        for name, (program, args, ref, extra) in cases.items():
            if ONLY and name not in ONLY:
                continue
            kernel = tilecute.compile(program())
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
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    args = ap.parse_args()
    global ONLY
    ONLY = set(filter(None, args.only.split(",")))
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "tilecute": tilecute.__file__}))
    rowwise(args.reps)
    if not ONLY or "transpose" in ONLY:
        transpose(args.reps)


if __name__ == "__main__":
    main()
