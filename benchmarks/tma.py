"""TMA: copy bandwidth against a device-to-device copy, and the host cost of a launch with
0, 2 and 4 TMA descriptors (encoded by tilecute's launcher per launch) against the same
TMA copy through CuTe DSL's own TVM-FFI path (descriptors built in the DSL's host code).
Prints JSON lines; the last lines are summaries with ratios.

    python3 benchmarks/tma.py            # on a GPU (sm_90), CuTe DSL installed for the peer
"""

import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

from launch_overhead import measure  # noqa: E402


def gpu_time(fn, reps=20):
    """Median milliseconds of ``fn`` (CUDA events)."""
    from memory_bound import time_us

    return time_us(fn, reps) / 1e3


def bandwidth(rows, cols, reps):
    import tilecute
    import tma_ops as E

    a = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    moved = 2 * a.numel() * a.element_size()  # read + write
    out = []
    d2d = gpu_time(lambda: b.copy_(a), reps)
    out.append({"bench": "bandwidth", "peer": "D2D copy (b.copy_(a))", "shape": [rows, cols],
                "ms": round(d2d, 4), "GB/s": round(moved / d2d / 1e6, 1)})
    variants = {
        "tilecute TMA load+store, box 64x128": E.tma_copy((64, 128)),
        "tilecute TMA load+store, box 128x128": E.tma_copy((128, 128)),
        "tilecute T.Pipelined TMA loads (3 stages) + vector stores, B = A + 1":
            E.pipelined_copy(bm=64, bn=128, stages=3, splits=16),
    }
    for name, f in variants.items():
        kernel = tilecute.compile(f)
        b.zero_()
        kernel(a, b)
        want = a + 1 if "A + 1" in name else a
        assert torch.equal(b, want), f"{name}: wrong result"
        ms = gpu_time(lambda: kernel(a, b), reps)
        out.append({"bench": "bandwidth", "peer": name, "shape": [rows, cols], "ms": round(ms, 4),
                    "GB/s": round(moved / ms / 1e6, 1), "ratio_to_d2d": round(d2d / ms, 3)})
    for r in out:
        print(json.dumps(r), flush=True)
    return out


def copy_pair():
    """Two tensor pairs copied in one kernel: 4 descriptors."""
    import tilecute.language as T

    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)

    @T.prim_func
    def copy_pair(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"),
                  C: T.Tensor((M, N), "float16"), D: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float16")
            t = T.alloc_shared((64, 64), "float16")
            T.copy(A[by * 64, bx * 64], s)
            T.copy(C[by * 64, bx * 64], t)
            T.copy(s, B[by * 64, bx * 64])
            T.copy(t, D[by * 64, bx * 64])

    return copy_pair


def plain_copy():
    """The same copy without TMA (N not known to be a multiple of 8: cp.async and vector
    stores): 0 descriptors."""
    import tilecute.language as T

    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def plain_copy(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A[by * 64, bx * 64], s)
            T.copy(s, B[by * 64, bx * 64])

    return plain_copy


def host_cost(iters, burst):
    import tilecute
    import tma_ops as E

    x = [torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(4)]
    y = [torch.empty_like(t) for t in x]
    rows = []
    cases = [("0 descriptors", plain_copy(), 1), ("2 descriptors", E.tma_copy((64, 64)), 1),
             ("4 descriptors", copy_pair(), 2)]
    for case, f, pairs in cases:
        kernel = tilecute.compile(f)
        ndesc = sum(p.kind == "tma_desc" for p in kernel.abi.kernels[0].params)
        assert case.startswith(str(ndesc)), f"{case}: the kernel has {ndesc} descriptors"
        args = [x[0], y[0]] if pairs == 1 else [x[0], y[0], x[1], y[1]]
        kernel(*args)
        torch.cuda.synchronize()
        assert torch.equal(y[0], x[0]) and (pairs == 1 or torch.equal(y[1], x[1])), case
        rows += measure("tilecute", lambda: kernel(*args), iters, burst, case)
        if case == "0 descriptors":
            continue
        try:
            import cute_dsl_tma_peer as P

            peer = P.build(pairs)
        except ImportError as e:
            print(json.dumps({"peer": "CuTe DSL --enable-tvm-ffi", "skipped": str(e)}))
            continue
        for t in y:
            t.zero_()
        peer(*args)
        torch.cuda.synchronize()
        assert torch.equal(y[0], x[0]) and (pairs == 1 or torch.equal(y[1], x[1])), f"peer {case}"
        rows += measure("CuTe DSL --enable-tvm-ffi (descriptors built in the DSL)",
                        lambda: peer(*args), iters, burst, case)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--burst", type=int, default=200)
    args = ap.parse_args()
    bw = bandwidth(args.rows, args.cols, args.reps)
    rows = host_cost(args.iters, args.burst)
    device = torch.cuda.get_device_name()
    print(json.dumps({"summary": "TMA copy bandwidth / D2D copy", "device": device,
                      **{r["peer"]: r["ratio_to_d2d"] for r in bw if "ratio_to_d2d" in r}}))
    for mode in ("loop", f"burst{args.burst}"):
        base = next(r["us_per_call"] for r in rows
                    if r["case"] == "0 descriptors" and r["mode"] == mode)
        print(json.dumps({"summary": f"us per launch ({mode}); ratio to tilecute with 0 descriptors",
                          "device": device,
                          **{f"{r['peer']} / {r['case']}": [r["us_per_call"], round(r["us_per_call"] / base, 2)]
                             for r in rows if r["mode"] == mode}}))


if __name__ == "__main__":
    main()
