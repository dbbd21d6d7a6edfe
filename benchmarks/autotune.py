"""Autotuner wall time: N GEMM configs compiled (entry + cubin) serially vs on the
default executor (a thread per core, each driving one config's build process and its
cubin worker: backend/buildproc.py), each in a new cache folder, first as it is (its
launcher runtime not built yet), then with the runtime built (a cache root in use), with
each config's entry and cubin seconds; on a GPU also the tuned GEMM's time beside
torch.matmul, in the same run (``--shapes``: tuned per shape, with three more block orders,
two persistent kernels among the configs, and with ``--streamk`` two stream-K ones).
Prints JSON lines.

    python3 benchmarks/autotune.py [--configs 4] [--size 4096] [--shapes MxNxK,...] [--dtype float16]
"""

import argparse
import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import tilecute  # noqa: E402
import gemm as G  # noqa: E402

CONFIGS = [dict(tm=128, tn=256, tk=64, stages=3), dict(tm=128, tn=128, tk=64, stages=4),
           dict(tm=128, tn=256, tk=64, stages=4), dict(tm=128, tn=128, tk=64, stages=3),
           dict(tm=128, tn=256, tk=32, stages=4), dict(tm=64, tn=256, tk=64, stages=4),
           dict(tm=128, tn=128, tk=32, stages=5), dict(tm=128, tn=64, tk=64, stages=4)]
# block orders (T.use_swizzle panel rows; 0: the compiler's default, 16) for the GPU part
PANELS = [dict(tm=128, tn=256, tk=64, stages=3, panel=8),
          dict(tm=128, tn=256, tk=64, stages=3, panel=32),
          dict(tm=128, tn=256, tk=64, stages=4, panel=8)]
# persistent kernels (one block per SM walks the tiles, T.Persistent; group: tile columns
# per group) for the GPU part
PERSISTENT = [dict(tm=128, tn=256, tk=64, stages=3, persistent=True, group=8),
              dict(tm=128, tn=256, tk=64, stages=3, persistent=True, group=4)]
# persistent, the last waves' K steps split over the blocks (examples/gemm.py
# matmul_streamk: two more inputs, a float32 workspace and counters, zero at the start)
# (--streamk: measured slower than the persistent kernel on an H100, docs/performance.md)
STREAMK = [dict(tm=128, tn=256, tk=64, stages=3, streamk=True, group=8, sk_waves=0),
           dict(tm=128, tn=256, tk=64, stages=3, streamk=True, group=8)]


def factory(size, tm=128, tn=128, tk=64, stages=3, panel=0, dtype="float16", persistent=False,
            group=8, sms=132, streamk=False, sk_waves=1):
    if streamk:
        return G.matmul_streamk(tm=tm, tn=tn, tk=tk, stages=stages, dtype=dtype, sms=sms,
                                group=group, sk_waves=sk_waves)
    if persistent:
        return G.matmul_persistent(tm=tm, tn=tn, tk=tk, stages=stages, dtype=dtype, sms=sms,
                                   group=group)
    return G.matmul(tm=tm, tn=tn, tk=tk, stages=stages, panel=panel, dtype=dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", type=int, default=4)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--shapes", default=None,
                   help="MxNxK,... tuned on the GPU and timed beside cuBLAS (default: "
                        "size^3); the configs add --panels' block orders")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--streamk", action="store_true",
                   help="also tune the two stream-K kernels (examples/gemm.py matmul_streamk)")
    args = p.parse_args()
    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    configs = CONFIGS[:args.configs]
    # warm-up (imports, the first cubin worker's CUTLASS import) outside both timings
    os.environ["TILECUTE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tune-warm-")
    tilecute.autotune(configs=[CONFIGS[-1]])(tilecute.jit(out_idx=[-1])(factory)).compile_all(
        args.size)
    walls = {}
    for root in ("fresh", "warm"):
        for mode, executor in (("serial", cf.ThreadPoolExecutor(1)), ("parallel", None)):
            os.environ["TILECUTE_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"tune-{mode}-")
            if root == "warm":  # the cache root's launcher runtime built (by another kernel)
                tilecute.compile(factory(256, **CONFIGS[-1]), out_idx=[-1])
            tuned = tilecute.autotune(configs=configs, executor=executor)(
                tilecute.jit(out_idx=[-1])(factory))
            t = time.perf_counter()
            results = tuned.compile_all(args.size)
            walls[root, mode] = time.perf_counter() - t
            done = [r for r in results if r.kernel is not None]
            print(json.dumps({"mode": mode, "cache_root": root, "configs": len(configs),
                              "cores": os.cpu_count(), "compiled": len(done),
                              "wall_s": round(walls[root, mode], 2),
                              # per config: building its entry (front end .. g++) / its cubin
                              "entry_s": [round(r.entry_s, 2) for r in done],
                              "cubin_s": [round(r.cubin_s, 2) for r in done],
                              "failed": {json.dumps(r.config, sort_keys=True): r.error
                                         for r in results if r.kernel is None}}), flush=True)
        print(json.dumps({"cache_root": root, "cores": os.cpu_count(),
                          "speedup_parallel_over_serial":
                              round(walls[root, "serial"] / walls[root, "parallel"], 2)}),
              flush=True)
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    from tilecute.profiler import do_bench

    dt = getattr(torch, args.dtype)
    shapes = args.shapes.split(",") if args.shapes else [f"{args.size}x{args.size}x{args.size}"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gpu_configs = [dict(c, dtype=args.dtype) for c in configs + PANELS] + \
        [dict(c, dtype=args.dtype, sms=sms) for c in PERSISTENT + (STREAMK if args.streamk else [])]

    def workspace(params):
        """A stream-K kernel's workspace and counters (zero; each call leaves them so)."""
        return [torch.zeros([int(d) for d in a.shape], device="cuda",
                            dtype=torch.float32 if a.name == "Ws" else torch.int32)
                for a in params if a.name in ("Ws", "Cnt")]

    for shape in shapes:
        m, n, k = (int(v) for v in shape.split("x"))

        def supply(params, m=m, n=n, k=k):
            """X, W as the profiler makes them (uniform in [-1, 1)); a stream-K kernel's
            workspace zero."""
            return [torch.empty(m, k, device="cuda", dtype=dt).uniform_(-1.0, 1.0),
                    torch.empty(k, n, device="cuda", dtype=dt).uniform_(-1.0, 1.0),
                    *workspace(params)]

        tuned = tilecute.autotune(configs=gpu_configs, ref_prog=lambda x, w, *ws: x @ w,
                                  supply_prog=supply, warmup=25, rep=100, atol=1e-1, rtol=1e-2,
                                  shapes={"M": m, "N": n, "K": k})(
            tilecute.jit(out_idx=[-1])(factory))
        kernel = tuned(shape)
        x = torch.randn(m, k, device="cuda", dtype=dt)
        w = torch.randn(k, n, device="cuda", dtype=dt)
        extra = workspace(kernel.args)  # the winner's params (none but for stream-K)
        # the tuned kernel and cuBLAS alternately, 3 rounds: the median ratio
        ratios, tk, tt = [], [], []
        for _ in range(3):
            tk.append(do_bench(lambda: kernel(x, w, *extra)))
            tt.append(do_bench(lambda: torch.matmul(x, w)))
            ratios.append(tt[-1] / tk[-1])
        flops = 2 * m * n * k
        print(json.dumps({"shape": shape, "dtype": args.dtype, "best": tuned.result.best,
                          "tilecute_tflops": round(flops / sorted(tk)[1] / 1e9, 1),
                          "cublas_tflops": round(flops / sorted(tt)[1] / 1e9, 1),
                          "ratio": round(sorted(ratios)[1], 3),
                          "ratios": [round(r, 3) for r in ratios],
                          "device": torch.cuda.get_device_name()}), flush=True)

if __name__ == "__main__":
    main()
