"""Decode attention bandwidth: examples/decode.py's paged split-KV kernel next to a
device-to-device copy measured in the same run, torch SDPA on the same (dense, unpaged)
K/V, and FlashAttention-4's paged path when its wheel is importable and takes the shape.

Bytes counted: the K and V the keys of every sequence need (``sum(seqlens) x kv_heads x
dim x 2 tensors x element size``), plus Q and O; achieved bandwidth = bytes / time.  The
copy peer moves a buffer as large as the cache (read + write counted).  Each number is the
median of ``--reps`` CUDA-event timings (each of 10 back-to-back calls) after warm-up.  One JSON line per measurement,
with ``of_copy`` (the ratio to the copy bandwidth) where it applies.

With ``--graph`` each tilecute row also has ``us_graph`` / ``of_copy_graph``: the same calls
replayed from a CUDA graph (how serving runs decode steps), the kernels without the host's
per-call work.

    python benchmarks/decode.py [--reps 30] [--quick] [--sweep] [--graph]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import decode as D  # noqa: E402
from cuda_timing import time_us, time_us_graph  # noqa: E402

SHAPES = [  # batch, heads, kv_heads, dim, seqlen, page sizes
    (1, 32, 8, 128, 65536, (16, 64, 256)),
    (1, 64, 8, 128, 65536, (64, 256)),
    (8, 32, 8, 128, 16384, (16, 64, 256)),
    (32, 32, 8, 128, 4096, (64,)),
    (128, 32, 8, 128, 2048, (16, 64)),
]


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def fa4_paged(q, k_pages, v_pages, table, lens):
    """FlashAttention-4's call on the paged cache, or raise (import, signature, arch)."""
    from flash_attn.cute.interface import flash_attn_func

    q4 = q.unsqueeze(1)  # (B, 1, H, D)
    return lambda: flash_attn_func(q4, k_pages, v_pages, page_table=table, seqused_k=lens)


def _variants(split: int, page: int) -> list[dict]:
    """Schedules next to the default one (``--sweep``)."""
    out = [{"num_split": max(1, split // 2)}, {"num_split": split * 2},
           {"num_split": split, "num_stages": 3}, {"num_split": split, "num_stages": 4}]
    if page < 64:  # 16-key steps: one TMA copy per step
        out.append({"num_split": split, "block_N": page})
    out.append({"num_split": split, "pdl": False})  # the combine kernel launched after
    return out


def _call(q, cache, variant: dict):
    """The kernel call of a schedule variant; ``pdl``: whether both kernels launch with
    Programmatic Dependent Launch (compile option ``pdl``; the example's default: on)."""
    if "pdl" not in variant:
        return lambda: D.paged_decode_op(q, *cache, **variant)
    import tilecute

    rest = {k: v for k, v in variant.items() if k not in ("pdl", "num_split")}
    func = D.paged_decode(q.shape[1], cache[0].shape[2], q.shape[2], cache[0].shape[1],
                          variant["num_split"], dtype=str(q.dtype).replace("torch.", ""), **rest)
    kernel = tilecute.compile(func, out_idx=[-1], options={"pdl": variant["pdl"]})
    return lambda: kernel(q, *cache)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="the first shape only")
    ap.add_argument("--graph", action="store_true",
                    help="also time tilecute's calls replayed from a CUDA graph (us_graph)")
    ap.add_argument("--sweep", action="store_true",
                    help="also time schedule variants: num_split (half, twice the heuristic's), "
                         "num_stages 3 and 4, one page per step (page < 64), and without PDL")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    emit({"device": props.name, "sms": props.multi_processor_count})
    torch.manual_seed(0)
    for batch, heads, kv_heads, dim, seqlen, pages in SHAPES[:1] if args.quick else SHAPES:
        dt = torch.float16
        esize = 2
        kv_bytes = batch * seqlen * kv_heads * dim * 2 * esize
        qo_bytes = 2 * batch * heads * dim * esize
        nbytes = kv_bytes + qo_bytes
        src = torch.empty(kv_bytes // 2, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_us = time_us(lambda: dst.copy_(src), args.reps)
        copy_gbps = 2 * src.numel() / copy_us / 1e3
        del src, dst
        base = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "dim": dim, "seqlen": seqlen}
        emit({**base, "peer": "d2d_copy", "us": round(copy_us, 2), "GBps": round(copy_gbps, 1)})
        q = torch.randn(batch, heads, dim, dtype=dt, device="cuda")
        for page in pages:
            cache = D.make_cache(batch, kv_heads, dim, page, [seqlen] * batch, dt, "cuda",
                                 extra_pages=0)
            out = D.paged_decode_op(q, *cache)
            err = (out.float() - D.reference(q, *cache)).abs().max().item() if batch <= 8 else None
            split = D.choose_num_split(batch, kv_heads, cache[2].shape[1] * page,
                                       num_sms=props.multi_processor_count)
            us = time_us(lambda: D.paged_decode_op(q, *cache, num_split=split), args.reps)
            gbps = nbytes / us / 1e3
            graphed = {}
            if args.graph:
                us_g = time_us_graph(lambda: D.paged_decode_op(q, *cache, num_split=split),
                                     args.reps)
                graphed = {"us_graph": round(us_g, 2),
                           "of_copy_graph": round(nbytes / us_g / 1e3 / copy_gbps, 3)}
            emit({**base, "page": page, "peer": "tilecute", "num_split": split, "us": round(us, 2),
                  "GBps": round(gbps, 1), "of_copy": round(gbps / copy_gbps, 3), **graphed,
                  **({"max_err": err} if err is not None else {})})
            for variant in _variants(split, page) if args.sweep else ():
                fn = _call(q, cache, variant)
                out = fn()
                err = (out.float() - D.reference(q, *cache)).abs().max().item() if batch <= 8 else None
                us = time_us(fn, args.reps)
                emit({**base, "page": page, "peer": "tilecute", **variant, "us": round(us, 2),
                      "GBps": round(nbytes / us / 1e3, 1),
                      "of_copy": round(nbytes / us / 1e3 / copy_gbps, 3),
                      **({"max_err": err} if err is not None else {})})
            try:
                fa4 = fa4_paged(q, *cache)
                fa4()
                us = time_us(fa4, args.reps)
                emit({**base, "page": page, "peer": "fa4", "us": round(us, 2),
                      "GBps": round(nbytes / us / 1e3, 1),
                      "of_copy": round(nbytes / us / 1e3 / copy_gbps, 3)})
            except Exception as e:  # not installed, or not this shape / arch
                emit({**base, "page": page, "peer": "fa4", "skipped": str(e).splitlines()[0][:160]
                      if str(e) else type(e).__name__})
            del cache
        # SDPA on dense K/V (it has no paged cache): the same bytes, one query per sequence
        k = torch.randn(batch, kv_heads, seqlen, dim, dtype=dt, device="cuda")
        v = torch.randn_like(k)
        qs = q.unsqueeze(2)  # (B, H, 1, D)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        try:
            fn = lambda: sdpa(qs, k, v, enable_gqa=heads != kv_heads)  # noqa: E731
            fn()
            us = time_us(fn, args.reps)
            emit({**base, "peer": "torch_sdpa_dense", "us": round(us, 2),
                  "GBps": round(nbytes / us / 1e3, 1),
                  "of_copy": round(nbytes / us / 1e3 / copy_gbps, 3)})
        except Exception as e:
            emit({**base, "peer": "torch_sdpa_dense", "skipped": str(e)[:160]})
        del k, v


if __name__ == "__main__":
    main()
