"""MLA decode (examples/mla_decode.py) in TFLOP/s and GB/s, DeepSeek-V2/V3 shapes: 128
query heads, latent 512 + rope 64, one latent KV head, paged (64-token pages), fp16.

FLOPs: ``batch x heads x seqlen x 2 x (576 + 512)`` (Q.K over latent + rope, P.V over the
latent).  Bytes: the latent cache read once (``batch x seqlen x 576 x 2``) plus Q and O.
A device-to-device copy of a cache-sized buffer runs in the same process for the
bandwidth roof.  Anchors (published, not measured here): FlashMLA up to 3000 GB/s and 660
TFLOP/s on H800; TileLang's MLA decode ~470 TFLOP/s at batch 64-128 on H100 (fp16).
Each number: median of ``--reps`` samples, each 10 back-to-back calls.  Kernels: ``ws``
(``mla_decode_op``'s default, examples/mla_decode.py ``mla_decode_ws``) and ``fullcol``
(TileLang's example's schedule, ``mla_decode``; the one ``--tune`` and ``--cluster`` sweep).

    python benchmarks/mla_decode.py [--reps 20] [--tune] [--cluster] [--graph]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import mla_decode as M  # noqa: E402
from cuda_timing import time_us, time_us_graph  # noqa: E402

SHAPES = [(1, 8192), (16, 4096), (64, 4096), (128, 4096), (128, 8192)]  # batch, seqlen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--tune", action="store_true",
                    help="also sweep num_split and num_stages (default: choose_schedule's pick)")
    ap.add_argument("--block-n", type=int, default=64,
                    help="keys per step of the swept configs (--tune); 32 fits 4 stages")
    ap.add_argument("--cluster", action="store_true",
                    help="also run each config with the two head blocks in a cluster (their KV "
                         "tiles multicast)")
    ap.add_argument("--graph", action="store_true",
                    help="also time each config replayed from a CUDA graph (us_graph, "
                         "TFLOPs_graph): the kernels without the host's per-call work")
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    print(json.dumps({"device": dev.name, "sms": dev.multi_processor_count}), flush=True)
    heads, dim, pe = 128, 512, 64
    for batch, seqlen in SHAPES:
        torch.manual_seed(0)
        q = torch.randn(batch, heads, dim, dtype=torch.float16, device="cuda")
        q_pe = torch.randn(batch, heads, pe, dtype=torch.float16, device="cuda")
        cache = M.make_cache(batch, dim, pe, 64, [seqlen] * batch, torch.float16, "cuda")
        flops = batch * heads * seqlen * 2 * (dim + pe + dim)
        nbytes = batch * seqlen * (dim + pe) * 2 + 2 * q.numel() * 2
        src = torch.empty(batch * seqlen * (dim + pe), dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        copy_us = time_us(lambda: dst.copy_(src), args.reps)
        copy_gbps = 2 * src.numel() * 2 / copy_us / 1e3
        print(json.dumps({"batch": batch, "seqlen": seqlen, "peer": "d2d_copy", "us": round(copy_us, 2),
                          "GBps": round(copy_gbps, 1)}), flush=True)
        chosen = M.choose_schedule(batch, heads, seqlen, dev.multi_processor_count)
        default = (chosen["num_split"], chosen["num_stages"], chosen["block_N"])
        configs = [default]
        if args.tune:
            stages = (1, 2) if args.block_n == 64 else (2, 3, 4)
            configs += [(s, st, args.block_n) for s in (1, 2, 4, 8, 16) for st in stages
                        if (s, st, args.block_n) != default]
        ref = M.reference(q[:1], q_pe[:1], cache[0], cache[1], cache[2][:1], cache[3][:1])
        runs = [("ws", dict(num_split=chosen["num_split"]), default)]  # mla_decode_op's default
        runs += [("fullcol", dict(num_split=split, num_stages=stages, block_N=bn, cluster=cluster),
                  (split, stages, bn))
                 for split, stages, bn in configs
                 for cluster in ((False, True) if args.cluster else (False,))]
        for kernel, run, (split, stages, bn) in runs:
            run = dict(run, kernel=kernel)
            cluster = run.get("cluster", False)
            try:
                out = M.mla_decode_op(q, q_pe, *cache, **run)
                err = (out[:1].float() - ref).abs().max().item()
                us = time_us(lambda: M.mla_decode_op(q, q_pe, *cache, **run), args.reps)
            except Exception as e:  # a config that does not build or launch is reported
                print(json.dumps({"batch": batch, "seqlen": seqlen, **run, "error": str(e)[:300]}),
                      flush=True)
                continue
            graphed = {}
            if args.graph:
                us_g = time_us_graph(lambda: M.mla_decode_op(q, q_pe, *cache, **run), args.reps)
                graphed = {"us_graph": round(us_g, 2), "TFLOPs_graph": round(flops / us_g / 1e6, 1)}
            print(json.dumps({"batch": batch, "seqlen": seqlen, "peer": "tilecute", "kernel": kernel,
                              "num_split": split, "num_stages": stages, "block_N": bn,
                              "cluster": cluster, "default": kernel == "ws",
                              "us": round(us, 2), "TFLOPs": round(flops / us / 1e6, 1),
                              "GBps": round(nbytes / us / 1e3, 1),
                              "of_copy": round(nbytes / us / 1e3 / copy_gbps, 3),
                              "max_err_b0": err, **graphed}), flush=True)


if __name__ == "__main__":
    main()
