"""How a small fragment is spread over a block's threads, measured: tilecute's default plan
against TileLang's, on the same elementwise program (both compiled by tilecute).

A ``T.Parallel`` loop over a fragment of ``block`` elements in a block of ``threads``:
tilecute's layout pass gives each thread ``V`` consecutive elements, ``V`` the widest
16-byte vector the loop's innermost extent allows, so a 128-element fp32 tile on 128 threads
runs on 32 threads (4 each) and leaves 96 idle.  TileLang 0.1.15 narrows ``V`` until every
thread gets whole steps (``ParallelOpNode::ComputePlanCandidate``: 1 element on each of 128
threads).  The second variant forces TileLang's plan with ``T.annotate_layout`` and a
``T.Fragment`` (thread ``(i // V) % threads``, register ``i % V + V * (i // (V * threads))``).

Cases: fp32 / fp16, a light body (``a * 2``: memory-bound) and a heavy one (``exp * sigmoid +
sin``), block / thread shapes where the two plans differ, and one where they agree (a
control).  Prints one JSON line per case: ms (median of CUDA-event timings over 50 launches
after warm-up, benchmarks/cuda_timing.py), GB/s, and the ratio default / TileLang's plan (above 1: TileLang's plan is
faster).

    python3 benchmarks/fragment_vector.py [--n 67108864] [--rounds 5]
"""

import argparse
import json
import statistics

import tilecute
import tilecute.language as T

VECTOR_BYTES = 16


def tilelang_vector(block: int, threads: int, dtype: str) -> int:
    v = VECTOR_BYTES // (4 if dtype == "float32" else 2)
    while v > 1 and block % (threads * v):
        v //= 2
    return v


def program(n: int, block: int, threads: int, dtype: str, heavy: bool, plan_v=None):
    @T.prim_func
    def ew(A: T.Tensor((n,), dtype), O: T.Tensor((n,), dtype)):
        with T.Kernel(n // block, threads=threads) as bx:
            a = T.alloc_fragment((block,), dtype)
            if plan_v is not None:
                T.annotate_layout({a: T.Fragment(
                    (block,), forward_thread_fn=lambda i: (i // plan_v) % threads,
                    forward_index_fn=lambda i: i % plan_v + plan_v * (i // (plan_v * threads)))})
            T.copy(A[bx * block], a)
            for i in T.Parallel(block):
                if heavy:
                    O[bx * block + i] = T.exp(a[i]) * T.sigmoid(a[i]) + T.sin(a[i])
                else:
                    O[bx * block + i] = a[i] * 2.0
    return ew


CASES = [  # (dtype, block, threads)
    ("float32", 128, 128), ("float16", 128, 128), ("float16", 512, 128),
    ("float32", 256, 256), ("float32", 1024, 256),  # the last: both plans agree (control)
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 26)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    import torch

    from cuda_timing import time_us

    if not torch.cuda.is_available():
        for dtype, block, threads in CASES:  # (CPU: the programs build)
            for v in (None, tilelang_vector(block, threads, dtype)):
                tilecute.compile(program(1 << 16, block, threads, dtype, False, v)).ensure_cubin()
        print(json.dumps({"skipped": "no GPU; the programs built"}))
        return
    for heavy in (False, True):
        for dtype, block, threads in CASES:
            v = tilelang_vector(block, threads, dtype)
            kernels = {"default": tilecute.compile(program(args.n, block, threads, dtype, heavy)),
                       "tilelang_plan": tilecute.compile(program(args.n, block, threads, dtype, heavy, v))}
            a = torch.randn(args.n, device="cuda").to(getattr(torch, dtype))
            outs = {name: torch.empty_like(a) for name in kernels}
            for name, k in kernels.items():
                k(a, outs[name])
            torch.testing.assert_close(outs["default"], outs["tilelang_plan"], rtol=0, atol=0)
            ms = {name: [] for name in kernels}
            for r in range(args.rounds):
                for name in (list(kernels) if r % 2 == 0 else list(kernels)[::-1]):
                    k, o = kernels[name], outs[name]
                    ms[name].append(time_us(lambda: k(a, o), reps=50, inner=1) / 1e3)
            med = {name: statistics.median(x) for name, x in ms.items()}
            gbs = {name: 2 * a.numel() * a.element_size() / (t * 1e6) for name, t in med.items()}
            print(json.dumps({"dtype": dtype, "block": block, "threads": threads,
                              "body": "heavy" if heavy else "light", "tilelang_v": v,
                              "ms": {k: round(t, 4) for k, t in med.items()},
                              "GB_per_s": {k: round(g, 1) for k, g in gbs.items()},
                              "default_over_tilelang_plan": round(med["default"] / med["tilelang_plan"], 3),
                              "device": torch.cuda.get_device_name()}), flush=True)


if __name__ == "__main__":
    main()
