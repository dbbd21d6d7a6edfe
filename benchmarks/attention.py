"""Attention forward throughput: tilecute's examples/attention.py next to torch's SDPA
(cuDNN and FlashAttention-2 backends), and FlashAttention-4's CuTe DSL kernel when the
``flash_attn`` package is importable, all in one process, in rotated rounds.  Prints one
JSON line per (shape, causal, kernel): median TFLOP/s (4 * B * H * S^2 * D, halved when
causal) and the median per-round ratios to cuDNN and (when it ran) to FA4.

    python3 benchmarks/attention.py [--shapes 8x32x4096x128,...] [--rounds 5]
"""

import argparse
import json
import os
import statistics
import sys

import torch

import tilecute

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention as A  # noqa: E402


# variant suffixes: schedule choices turned off or on (compile options)
OFF = {"serial": ("disable_mma_overlap", True), "pp": ("warpgroup_pingpong", True),
       "nopp": ("disable_warpgroup_pingpong", True),
       "precise": ("fast_math", False), "early": ("rescale_before_gemm", True),
       "late": ("rescale_before_gemm", False), "direct": ("disable_shared_epilogue", True),
       "whole": ("disable_deferred_row_sums", True), "noanchor": ("disable_wait_anchor", True),
       "lateanchor": ("late_wait_anchor", True)}


def bench(fn, reps: int = 20) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` launches timed with CUDA events."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def peers(q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA takes BHSD
    groups = q.shape[2] // k.shape[2]
    out = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa-fa2", SDPBackend.FLASH_ATTENTION)):
        def run(backend=backend):
            with sdpa_kernel(backend):
                return sdpa(qt, kt, vt, is_causal=causal, enable_gqa=groups > 1)
        try:
            run()
            out[name] = run
        except Exception as e:  # a backend that does not take this shape
            print(json.dumps({"peer": name, "skipped": str(e)[:200]}), flush=True)
    try:
        from flash_attn.cute.interface import flash_attn_func

        out["fa4"] = lambda: flash_attn_func(q, k, v, causal=causal)
        out["fa4"]()
    except Exception as e:
        out.pop("fa4", None)
        print(json.dumps({"peer": "fa4", "skipped": str(e)[:200]}), flush=True)
    return out


def variant_program(variant: str, heads: int, dim: int, causal: bool, dtype: str):
    """The prim_func and compile options of a ``--variants`` entry, and for a planned one
    ``plan(batch, seq_len)``: its ``Sched`` (examples/attention.plan_tiles), else None."""
    spec, *offs = variant.split("-")  # 128ws-serial: no MMA overlap
    spec, *extras = spec.split("+")  # +lpt, +m192t384, +r24/240
    base, _, stages = spec.partition("@")  # 128ws@3: 3 stages
    ws = base.endswith("ws")
    bn = None if base == "default" else int(base[:-2] if ws else base)
    schedule = {}
    for e in extras:
        if e == "lpt":
            schedule["lpt"] = True
        elif e in ("lazy", "eager"):  # lazy rescale on / off (the example's lazy_rescale)
            schedule["lazy_rescale"] = e == "lazy"
        elif e in ("persistent", "planned"):  # a block per SM walks the tiles (planned:
            # in the order plan_tiles gives each)
            import torch

            schedule["persistent"] = True
            schedule["planned"] = e == "planned"
            schedule["sms"] = torch.cuda.get_device_properties(0).multi_processor_count \
                if torch.cuda.is_available() else 132
        elif e == "pertile":  # a block per tile (persistent off)
            schedule["persistent"] = False
        elif e.startswith("m"):  # m192t384: block_M 192, 384 compute threads
            bm, _, t = e[1:].partition("t")
            schedule.update(block_M=int(bm), threads=int(t))
        elif e.startswith("r"):  # r24/240: producer / compute registers
            schedule["regs"] = tuple(int(x) for x in e[1:].split("/"))
        else:
            raise SystemExit(f"variant {variant!r}: unknown extra +{e}")
    tiles = dict(block_N=bn, warp_specialize=None if bn is None else ws,
                 num_stages=int(stages) if stages else None)
    func = A.flash_attention(heads, dim, heads, causal, dtype, **tiles, **schedule)
    options = dict(A.OPTIONS)  # the example's own (fast_math)
    options.update(OFF[o] for o in offs)
    plan = None
    if schedule.get("planned"):
        tiles.update((k, schedule[k]) for k in ("block_M", "threads") if k in schedule)

        def plan(batch, seq_len):
            return A.plan_tiles(batch, heads, seq_len, dim, causal, schedule["sms"], **tiles)
    return func, options, plan


def _causal(args) -> tuple:
    return {"both": (False, True), "0": (False,), "1": (True,)}[args.causal]


TARGET = os.environ.get("TILECUTE_ARCH")  # set: build here without a GPU (--prebuild only)


def prebuild(args):
    """Compile every (shape, causal, variant) kernel at once, in threads (the cubin and the
    launcher build in worker processes): the timing loop then finds them in the cache."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(v, int(shape.split("x")[1]), int(shape.split("x")[3]), causal)
            for shape in args.shapes.split(",") for causal in _causal(args)
            for v in args.variants.split(",")]
    with ThreadPoolExecutor(max(1, min(len(jobs), (os.cpu_count() or 2) - 1))) as pool:
        def build(job):
            func, options, _ = variant_program(*job, args.dtype)
            return tilecute.compile(func, out_idx=[3, 4], options=options, target=TARGET)

        for f in [pool.submit(build, j) for j in jobs]:
            f.result()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="8x32x4096x128,4x16x8192x128,16x16x2048x64")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--variants", default="default",
                   help="tilecute schedules: block_N [ws] [@stages] [-serial], comma-separated "
                        "(e.g. 64,128ws,128ws@3,default-serial); default: the example's own "
                        "choice; +lpt: query blocks last to first, +lazy / +eager: lazy rescale on / off, +persistent: a block per SM "
                        "walks the tiles, +pertile: a block per tile, +planned: persistent, in the order plan_tiles gives "
                        "each block, +m192t384: block_M and "
                        "compute threads, +r24/240: producer / compute registers per thread; "
                        "-serial: without the MMA overlap (disable_mma_overlap), -pp: "
                        "with the warpgroup ping-pong (warpgroup_pingpong), -nopp: without it, -precise: without the "
                        "example's fast_math, -early / -late: O's rescale before the next step's "
                        "second GEMM / right after it (rescale_before_gemm), -direct: O stored from registers "
                        "(disable_shared_epilogue), -lateanchor: the wait for P V kept after the row sums "
                        "(late_wait_anchor), -noanchor: not kept anywhere (disable_wait_anchor)")
    p.add_argument("--causal", choices=("both", "0", "1"), default="both",
                   help="non-causal (0), causal (1) or both (default)")
    p.add_argument("--prebuild", action="store_true",
                   help="compile all kernels first, in parallel threads")
    args = p.parse_args()
    if args.prebuild:
        prebuild(args)
        if args.rounds == 0:  # --prebuild --rounds 0: fill the cache only
            return
    dtype = getattr(torch, args.dtype)
    for shape in args.shapes.split(","):
        b, h, s, d = (int(x) for x in shape.split("x"))
        for causal in _causal(args):
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
            kernels, errors = {}, {}
            # each variant's max |error| against torch's SDPA (whichever backend it picks)
            ref = torch.nn.functional.scaled_dot_product_attention(
                *(x.transpose(1, 2) for x in (q, k, v)), is_causal=causal).transpose(1, 2)
            for variant in args.variants.split(","):
                func, options, plan = variant_program(variant, h, d, causal, args.dtype)
                kernel = tilecute.compile(func, out_idx=[3, 4], options=options)
                extra = () if plan is None else (  # the host's plan, made once per shape
                    torch.tensor(plan(b, s), dtype=torch.int32, device="cuda"),)
                errors[f"tilecute-{variant}"] = (kernel(q, k, v, *extra)[0] - ref).abs().max().item()
                kernels[f"tilecute-{variant}"] = lambda kernel=kernel, e=extra: kernel(q, k, v, *e)
            kernels.update(peers(q, k, v, causal))
            times = {n: [] for n in kernels}
            names = list(kernels)
            for r in range(args.rounds):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    times[n].append(bench(kernels[n], args.reps))
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            for n in names:
                ratios = [c / t for t, c in zip(times[n], times.get("cudnn", times[n]))]
                print(json.dumps({
                    "shape": shape, "causal": causal, "dtype": args.dtype, "kernel": n,
                    "tflops": round(flops / statistics.median(times[n]) / 1e9, 1),
                    "ratio_to_cudnn": round(statistics.median(ratios), 3),
                    **({"ratio_to_fa4": round(statistics.median(
                        f / t for t, f in zip(times[n], times["fa4"])), 3)}
                       if "fa4" in times else {}),
                    **({"max_err": round(errors[n], 4)} if n in errors else {}),
                    "device": torch.cuda.get_device_name()}), flush=True)


if __name__ == "__main__":
    main()
