"""Programmatic Dependent Launch on a chain of small dependent kernels: 8 kernels, each
reading the previous one's output (x_{i+1} = x_i * 1.0001 + 1, 64K fp32 elements, one
wave), timed with CUDA events over many chains, with and without the ``pdl`` option, in
one run; the results are checked against torch.  Prints JSON lines.

    python3 benchmarks/pdl.py [--n 65536] [--chains 200]
"""

import argparse
import json
import statistics

import tilecute
import tilecute.language as T


def step(n, block=1024):
    @T.prim_func
    def step(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=256) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * 1.0001 + 1.0
    return step


def main():
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--chains", type=int, default=200)
    p.add_argument("--length", type=int, default=8)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU"}))
        return
    kernels = {"plain": tilecute.compile(step(args.n)),
               "pdl": tilecute.compile(step(args.n), options={"pdl": True})}
    bufs = [torch.zeros(args.n, device="cuda") for _ in range(args.length + 1)]
    ref = bufs[0].clone()
    for _ in range(args.length):
        ref = ref * 1.0001 + 1.0

    def chain(k):
        for i in range(args.length):
            k(bufs[i], bufs[i + 1])

    times = {name: [] for name in kernels}
    for r in range(5):
        for name, k in (list(kernels.items()) if r % 2 == 0 else list(kernels.items())[::-1]):
            chain(k)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.chains):
                chain(k)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e3 / args.chains)
            torch.testing.assert_close(bufs[-1], ref)
    base = statistics.median(times["plain"])
    for name in kernels:
        t = statistics.median(times[name])
        print(json.dumps({"case": f"{args.length} dependent kernels", "launch": name,
                          "us_per_chain": round(t, 2), "speedup_over_plain": round(base / t, 3),
                          "n": args.n, "device": torch.cuda.get_device_name()}), flush=True)


if __name__ == "__main__":
    main()
