"""GEMM throughput: tilecute's examples/gemm.py next to torch.matmul (cuBLAS) in the same
run, on the same randn inputs; optionally CUTLASS's own CuTe DSL Hopper GEMM example
(``--cutlass-example PATH``: a dense_gemm_persistent.py fetched from NVIDIA/cutlass,
never committed here).  Prints one JSON line per (shape, dtype, kernel).

    python3 benchmarks/gemm.py [--shapes 4096x4096x4096,...] [--dtypes bfloat16,float16]
                               [--schedules 128x256x64x4x256,...]

A schedule is tm x tn x tk x stages x threads [x panel] [x ws] (panel: T.use_swizzle rows;
ws: a warp-specialized main loop, a producer warpgroup issuing the TMA loads; a schedule
without it is explicitly not warp-specialized).  ``plain`` is the program as TileLang users
write it (``T.copy(acc, Y[...])``, no T.use_swizzle, no warp_specialize): what the
compiler's defaults make of it; ``plain`` with ``off`` turns those defaults off
(``disable_shared_epilogue``, ``disable_rasterization``).  ``persistent``: a block per SM
walking the tiles in groups of ``panel`` tile columns (``matmul_persistent``); ``pingpong``:
the same walk with two compute warpgroups taking whole tiles in turn (``matmul_pingpong``,
384 threads); ``streamk``: persistent, the last one to two waves' K steps split evenly over
the blocks (``matmul_streamk``; with ``sk0`` only the partial last wave's; its float32 workspace and counters allocated once per
shape and dtype).
TFLOP/s = 2 M N K / time.  Per shape, every kernel is timed in ``--rounds`` rounds (each
round in a rotated order, as the GPU's clock drifts with its temperature); a round's time
is the median over ``--reps`` CUDA-event samples of ``--inner`` back-to-back launches.  A
row gives the median time over rounds and the median (and range) of its per-round ratio
to cuBLAS.
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import tilecute  # noqa: E402
import gemm as G  # noqa: E402
from cuda_timing import time_us  # noqa: E402

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}
SHAPES = "4096x4096x4096,8192x8192x8192,4096x11008x4096,4096x14336x4096"
SCHEDULES = ("128x256x64x3x256x16xws,128x256x64x3x256x16,128x256x64x3x256xplain,"
             "128x256x64x3x256x8xpersistent")


def time_ms(fn, reps: int, inner: int) -> float:
    return time_us(fn, reps, inner) / 1e3


def emit(**row):
    print(json.dumps(row), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="MxNxK,... (default: %(default)s)")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--schedules", default=SCHEDULES,
                    help="tm x tn x tk x stages x threads [x panel] "
                         "[x ws|plain|off|persistent|pingpong|streamk[xsk0]] "
                         "[x mN|nN: clusters of N blocks along M or N, TMA multicast],...")
    ap.add_argument("--epilogues", default="shared,direct",
                    help="direct (registers -> global), shared (-> swizzled shared -> TMA store)")
    ap.add_argument("--reps", type=int, default=5, help="CUDA-event samples per kernel and round")
    ap.add_argument("--inner", type=int, default=10, help="launches per sample")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds over all kernels of a shape, each in a rotated order (the GPU's "
                         "clock drifts as it heats: every kernel sees the same conditions)")
    ap.add_argument("--cutlass-example", action="append", default=[],
                    help="path of CUTLASS's CuTe DSL Hopper dense_gemm_persistent.py or "
                         "dense_gemm.py to run as a peer (repeatable)")
    ap.add_argument("--cutlass-clusters", default="1x1",
                    help="cluster shapes to run the CUTLASS example with, e.g. 1x1,2x1 (2x1: "
                         "B tiles multicast by TMA to the two blocks of a cluster)")
    args = ap.parse_args(argv)
    emit(device=torch.cuda.get_device_name(), torch=torch.__version__)
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        flops = 2 * M * N * K
        for dtype in args.dtypes.split(","):
            torch.manual_seed(0)
            x = torch.randn(M, K, device="cuda", dtype=TORCH[dtype])
            w = torch.randn(K, N, device="cuda", dtype=TORCH[dtype])
            y = torch.empty(M, N, device="cuda", dtype=TORCH[dtype])
            ref = torch.matmul(x, w)
            # (row fields, launch, max error vs cuBLAS); cuBLAS first
            runs = [(dict(kernel="torch.matmul (cuBLAS)"), lambda: torch.matmul(x, w, out=y), None)]
            for sched, epi in ((s, e) for s in args.schedules.split(",")
                               for e in args.epilogues.split(",")):
                parts = sched.split("x")
                plain = "plain" in parts  # the program as TileLang users write it
                # persistent: one block per SM walks the tiles (T.Persistent, groups of
                # `panel` tile columns), through a shared epilogue
                persistent = "persistent" in parts
                # pingpong: persistent too, two compute warpgroups taking tiles in turn
                # (examples/gemm.py matmul_pingpong; threads are 384)
                pingpong = "pingpong" in parts
                # streamk: persistent, the last waves' K steps split over the blocks
                # (examples/gemm.py matmul_streamk)
                streamk = "streamk" in parts
                # sk0: only the partial last wave's tiles split (else one whole wave too)
                sk_waves = 0 if "sk0" in parts else 1
                if (plain and epi != "direct") or \
                        ((persistent or pingpong or streamk) and epi != "shared"):
                    continue
                row = dict(kernel="tilecute", schedule=sched, epilogue=epi)
                # without ws, explicitly not warp-specialized; plain: the compiler decides
                ws = None if plain else "ws" in parts
                options = {"disable_shared_epilogue": True, "disable_rasterization": True} \
                    if "off" in parts else None
                if not plain and epi == "direct":  # a hand schedule's direct epilogue stays so
                    options = {"disable_shared_epilogue": True}
                # mN / nN: clusters of N blocks along M (sharing W tiles) / along N
                cluster = next(((1, int(v[1:]), 1) if v[0] == "m" else (int(v[1:]), 1, 1)
                                for v in parts if v[0] in "mn" and v[1:].isdigit()), None)
                tm, tn, tk, stages, threads, *panel = (
                    int(v) for v in parts if v not in ("ws", "plain", "off", "persistent",
                                                       "pingpong", "streamk", "sk0")
                    and not (v[0] in "mn" and v[1:].isdigit()))
                extra_args = ()
                try:
                    if streamk:
                        sms = torch.cuda.get_device_properties(0).multi_processor_count
                        func = G.matmul_streamk(tm, tn, tk, stages, threads, dtype, sms=sms,
                                                group=panel[0] if panel else 8,
                                                sk_waves=sk_waves)
                        # zero at the first call; each call leaves them zero
                        extra_args = (torch.zeros(2 * sms, tm, tn, device="cuda",
                                                  dtype=torch.float32),
                                      torch.zeros(2 * sms, device="cuda", dtype=torch.int32))
                    elif pingpong:
                        sms = torch.cuda.get_device_properties(0).multi_processor_count
                        func = G.matmul_pingpong(tm, tn, tk, stages, dtype, sms=sms,
                                                 group=panel[0] if panel else 8)
                    elif persistent:
                        sms = torch.cuda.get_device_properties(0).multi_processor_count
                        func = G.matmul_persistent(tm, tn, tk, stages, threads, dtype, sms=sms,
                                                   group=panel[0] if panel else 8)
                    else:
                        func = G.matmul(tm, tn, tk, stages, threads, dtype,
                                        panel=panel[0] if panel else 0, epilogue=epi,
                                        warp_specialize=ws, cluster=cluster)
                    kernel = tilecute.compile(func, options=options)
                except ValueError as e:  # e.g. more shared memory than a block can have
                    emit(shape=shape, dtype=dtype, **row, skipped=str(e)[:200])
                    continue
                out = torch.empty_like(y)
                kernel(x, w, *extra_args, out)
                err = (out.float() - ref.float()).abs().max().item()
                runs.append((row, lambda k=kernel, o=out, a=extra_args: k(x, w, *a, o), err))
            for path in args.cutlass_example:
                for cluster in args.cutlass_clusters.split(","):
                    peer = cutlass_peer(path, x, w, ref, shape, dtype,
                                        tuple(int(c) for c in cluster.split("x")))
                    if peer is not None:
                        runs.append(peer)
            times = [[] for _ in runs]
            for r in range(args.rounds):
                for i in [(r + j) % len(runs) for j in range(len(runs))]:
                    times[i].append(time_ms(runs[i][1], args.reps, args.inner))
            for (row, _, err), ts in zip(runs, times):
                ms = statistics.median(ts)
                # the ratio to cuBLAS per round (both timed in it), then the median
                ratios = [c / t for c, t in zip(times[0], ts)]
                extra = {} if err is None else dict(
                    of_cublas=round(statistics.median(ratios), 3),
                    of_cublas_range=[round(min(ratios), 3), round(max(ratios), 3)],
                    max_err_vs_cublas=round(err, 4))
                emit(shape=shape, dtype=dtype, **row, ms=round(ms, 4),
                     tflops=round(flops / ms / 1e9, 1), **extra)


def cutlass_peer(path, x, w, ref, shape, dtype, cluster=(1, 1)):
    """CUTLASS's CuTe DSL Hopper GEMM example (persistent warp-specialized, or the plain
    dense_gemm.py; 128x256 tiles, the given cluster) on the same inputs: A (M, K) K-major,
    B = W viewed (N, K) N-major, C (M, N); its own host code builds the TMA descriptors.
    Compiled once per shape and dtype; returns (row fields, launch, max error) or None."""
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        import importlib.util

        import cuda.bindings.driver as cuda_drv
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import from_dlpack

        spec = importlib.util.spec_from_file_location("cutlass_dense_gemm_persistent", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        M, N = x.shape[0], w.shape[1]
        c = torch.empty(M, N, 1, device="cuda", dtype=x.dtype)
        ta = from_dlpack(x.unsqueeze(-1), assumed_align=16).mark_layout_dynamic(leading_dim=1)
        tb = from_dlpack(w.t().unsqueeze(-1), assumed_align=16).mark_layout_dynamic(leading_dim=0)
        tc = from_dlpack(c, assumed_align=16).mark_layout_dynamic(leading_dim=1)
        stream = cuda_drv.CUstream(torch.cuda.current_stream().cuda_stream)
        if hasattr(mod, "HopperWgmmaGemmPersistentKernel"):
            gemm = mod.HopperWgmmaGemmPersistentKernel(cutlass.Float32, (128, 256), cluster, 1, True)
            clusters = cutlass.utils.HardwareInfo().get_max_active_clusters(cluster[0] * cluster[1])
            compiled = cute.compile(gemm, ta, tb, tc, clusters, stream)
        else:
            gemm = mod.HopperWgmmaGemmKernel(cutlass.Float32, (128, 256), cluster)
            compiled = cute.compile(gemm, ta, tb, tc, stream)
        compiled(ta, tb, tc, stream)
        err = (c[..., 0].float() - ref.float()).abs().max().item()
        return (dict(kernel=f"CUTLASS CuTe DSL {name}",
                     schedule=f"128x256 tile, cluster {cluster[0]}x{cluster[1]}"),
                lambda: compiled(ta, tb, tc, stream), err)
    except Exception as e:  # the peer is optional; say why it did not run
        emit(shape=shape, dtype=dtype, kernel=f"CUTLASS CuTe DSL {path}",
             error=f"{type(e).__name__}: {str(e)[:300]}")
        return None


if __name__ == "__main__":
    main()
