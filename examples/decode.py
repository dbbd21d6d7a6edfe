"""Decode attention over a paged KV cache, written the TileLang way: split-KV flash decoding
for grouped-query attention.

One query token per sequence attends to that sequence's cached keys and values, which
live in fixed-size pages (vLLM's layout): ``K_pages[page, slot, kv_head, dim]``, the page of
key ``t`` of sequence ``b`` being ``block_table[b, t // page_size]``, and sequence ``b``
holding ``cache_seqlens[b]`` keys.  Decode is memory-bound, so the kernel is built to read
the cache once at full bandwidth:

- ``split``: grid (num_split, kv_heads, batch).  Each block takes one KV head with all the
  query heads of its group (padded to a 64-row wgmma tile) and one contiguous slice of the
  sequence, walks it in ``block_N``-key steps with the online softmax, and writes its
  partial output and log-sum-exp (base 2) to two ``T.alloc_global`` workspaces;
- ``combine``: grid (heads, batch).  Rescales the partials by their log-sum-exps and sums.

Both kernels are one prim_func, so one call runs both, in order, on the caller's stream:
no host sync, no allocation that depends on data (safe under CUDA-graph capture).

    kernel = paged_decode_kernel(heads, kv_heads, dim, page_size, num_split)
    out = kernel(q, k_pages, v_pages, block_table, cache_seqlens)          # q: (B, H, D)
    out = paged_decode(q, k_pages, v_pages, block_table, cache_seqlens)    # picks num_split

``num_split`` heuristic (``choose_num_split``): enough blocks for two waves of the GPU's
SMs, ``ceil(2 * SMs / (batch * kv_heads))`` rounded up to a power of two, at most 64 and
at most one ``block_N`` step per split at the longest sequence the block table can hold
(its pages x ``page_size``: a host-side bound, so no device value is read).

Run on a GPU: ``python3 examples/decode.py`` (checks against a torch reference).
"""

import math

import tilecute
import tilecute.language as T

LOG2E = 1.4426950408889634
BLOCK_H = 64  # query rows per block: one wgmma tile


def paged_decode(heads, kv_heads, dim, page_size, num_split, block_N=None, num_stages=2,
                 dtype="float16", sm_scale=None, threads=128):
    """The prim_func: Q (B, heads, dim), K/V pages (P, page_size, kv_heads, dim),
    block_table (B, max_pages) int32, cache_seqlens (B,) int32 -> O (B, heads, dim).

    ``block_N`` (keys per step) defaults to 64.  A step may span pages: with pages of 16
    keys it copies four pages, each its own TMA copy into its rows of the K/V tile, all
    pipelined together.  (H200, page 16, fraction of copy bandwidth, 64-key steps vs
    16-key steps: B1 x 64k 0.82 vs 0.62, B8 x 16k 0.93 vs 0.90, B128 x 2k 0.96 vs
    0.89.)"""
    if block_N is None:
        block_N = 64
    groups = heads // kv_heads
    assert heads % kv_heads == 0 and groups <= BLOCK_H, "kv_heads must divide heads, groups <= 64"
    assert page_size % block_N == 0 or block_N % page_size == 0
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E
    accum = "float32"
    batch, num_pages, max_pages = T.symbolic("batch"), T.symbolic("num_pages"), T.symbolic("max_pages")
    pages_per_step = max(block_N // page_size, 1)
    rows_per_copy = min(block_N, page_size)

    @T.prim_func
    def paged_decode(Q: T.Tensor((batch, heads, dim), dtype),
                     K_pages: T.Tensor((num_pages, page_size, kv_heads, dim), dtype),
                     V_pages: T.Tensor((num_pages, page_size, kv_heads, dim), dtype),
                     block_table: T.Tensor((batch, max_pages), T.int32),
                     cache_seqlens: T.Tensor((batch,), T.int32),
                     O: T.Tensor((batch, heads, dim), dtype)):
        lse_partial = T.alloc_global((batch, heads, num_split), accum)
        o_partial = T.alloc_global((batch, heads, num_split, dim), accum)

        with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bs, hk, b):
            Q_s = T.alloc_shared((BLOCK_H, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((BLOCK_H, block_N), accum)
            P = T.alloc_fragment((BLOCK_H, block_N), dtype)
            acc_o = T.alloc_fragment((BLOCK_H, dim), accum)
            m = T.alloc_fragment((BLOCK_H,), accum)
            m_prev = T.alloc_fragment((BLOCK_H,), accum)
            alpha = T.alloc_fragment((BLOCK_H,), accum)
            l = T.alloc_fragment((BLOCK_H,), accum)
            l_step = T.alloc_fragment((BLOCK_H,), accum)

            seqlen = cache_seqlens[b]
            steps = T.ceildiv(seqlen, block_N)
            per_split = T.ceildiv(steps, num_split)
            first = bs * per_split
            count = T.max(T.min(per_split, steps - first), 0)
            last_page = (seqlen - 1) // page_size

            T.copy(Q[b, hk * groups:hk * groups + BLOCK_H, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(count, num_stages=num_stages):
                start = (first + k) * block_N
                for p in T.serial(pages_per_step):
                    page = block_table[b, T.min(start // page_size + p, last_page)]
                    T.copy(K_pages[page, start % page_size:start % page_size + rows_per_copy, hk, :],
                           K_s[p * rows_per_copy:(p + 1) * rows_per_copy, :])
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                if start + block_N > seqlen:
                    for i, j in T.Parallel(BLOCK_H, block_N):
                        S[i, j] = T.if_then_else(start + j < seqlen, S[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(BLOCK_H):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, l_step, dim=1)
                for i in T.Parallel(BLOCK_H):
                    l[i] = l[i] * alpha[i] + l_step[i]
                for i, j in T.Parallel(BLOCK_H, dim):
                    acc_o[i, j] *= alpha[i]
                T.copy(S, P)
                for p in T.serial(pages_per_step):
                    page = block_table[b, T.min(start // page_size + p, last_page)]
                    T.copy(V_pages[page, start % page_size:start % page_size + rows_per_copy, hk, :],
                           V_s[p * rows_per_copy:(p + 1) * rows_per_copy, :])
                T.gemm(P, V_s, acc_o)
            # an empty split (count == 0) leaves l == 0: its partial is 0 with weight 0
            for i, j in T.Parallel(BLOCK_H, dim):
                if i < groups:
                    o_partial[b, hk * groups + i, bs, j] = T.if_then_else(
                        l[i] > 0, acc_o[i, j] / l[i], 0)
            for i in T.Parallel(BLOCK_H):
                if i < groups:
                    lse_partial[b, hk * groups + i, bs] = T.if_then_else(
                        l[i] > 0, m[i] * scale + T.log2(l[i]), -T.infinity(accum))

        with T.Kernel(heads, batch, threads=dim) as (h, b):
            lse_s = T.alloc_shared((num_split,), accum)
            acc = T.alloc_fragment((dim,), accum)
            lse_max = T.alloc_var(accum, -T.infinity(accum))
            lse_total = T.alloc_var(accum, 0)
            T.copy(lse_partial[b, h, :], lse_s)
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, lse_s[s])
            for s in T.serial(num_split):
                lse_total += T.exp2(lse_s[s] - lse_max)
            T.fill(acc, 0)
            # unrolled: every split's partial is loaded before the sum needs it
            for s in T.unroll(num_split):
                for d in T.Parallel(dim):
                    acc[d] += T.exp2(lse_s[s] - lse_max) / lse_total * o_partial[b, h, s, d]
            T.copy(acc, O[b, h, :])

    return paged_decode


@tilecute.jit(out_idx=[-1], options={"pdl": True})
def paged_decode_kernel(heads, kv_heads, dim, page_size, num_split, block_N=None, num_stages=2,
                        dtype="float16", sm_scale=None, threads=128):
    """``O = paged_decode_kernel(heads, kv_heads, dim, page_size, num_split)(q, k_pages,
    v_pages, block_table, cache_seqlens)``.  Both kernels launch with Programmatic
    Dependent Launch (option ``pdl``, sm_90+): the combine kernel is launched while the
    split kernel runs and waits for its partials (H100, B1 x 64k, fraction of copy
    bandwidth: page 16 0.83 -> 0.88, page 256 0.83 -> 0.88)."""
    return paged_decode(heads, kv_heads, dim, page_size, num_split, block_N, num_stages,
                        dtype, sm_scale, threads)


def choose_num_split(batch, kv_heads, max_seqlen, block_N=64, num_sms=132):
    """Blocks for two waves of ``num_sms`` SMs, a power of two in 1..32, at least one
    ``block_N`` step per split at ``max_seqlen``.  The cap: the combine kernel reads every
    split's partial, so its cost grows with the split count (H100, batch 1, 64k keys,
    page 64: split 32 ran at 2632 GB/s, split 64 at 2361 GB/s, the combine taking 7 vs
    17 us)."""
    want = math.ceil(2 * num_sms / max(batch * kv_heads, 1))
    split = 1 << max(want - 1, 0).bit_length()
    return max(1, min(split, 32, math.ceil(max_seqlen / block_N)))


def paged_decode_op(q, k_pages, v_pages, block_table, cache_seqlens, num_split=None, **schedule):
    """``O`` for q (B, H, D); ``num_split`` from ``choose_num_split`` when not given."""
    import torch

    batch, heads, dim = q.shape
    page_size, kv_heads = k_pages.shape[1], k_pages.shape[2]
    if num_split is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        num_split = choose_num_split(batch, kv_heads, block_table.shape[1] * page_size,
                                     schedule.get("block_N") or 64, sms)
    kernel = paged_decode_kernel(heads, kv_heads, dim, page_size, num_split,
                                 dtype=str(q.dtype).replace("torch.", ""), **schedule)
    return kernel(q, k_pages, v_pages, block_table, cache_seqlens)


def make_cache(batch, kv_heads, dim, page_size, seqlens, dtype, device, extra_pages=3):
    """A shuffled paged cache holding ``seqlens[b]`` keys per sequence: (k_pages, v_pages,
    block_table, cache_seqlens).  Unused block-table entries are -1 (never read)."""
    import torch

    pages = [math.ceil(s / page_size) for s in seqlens]
    max_pages = max(max(pages), 1)
    total = sum(pages) + extra_pages
    order = torch.randperm(total, device=device).to(torch.int32)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32, device=device)
    at = 0
    for b, n in enumerate(pages):
        table[b, :n] = order[at:at + n]
        at += n
    k = torch.randn(total, page_size, kv_heads, dim, dtype=dtype, device=device)
    v = torch.randn_like(k)
    lens = torch.tensor(seqlens, dtype=torch.int32, device=device)
    return k, v, table, lens


def reference(q, k_pages, v_pages, block_table, cache_seqlens, sm_scale=None):
    """O by torch in float32, one sequence at a time (gathers the pages)."""
    import torch

    batch, heads, dim = q.shape
    page_size, kv_heads = k_pages.shape[1], k_pages.shape[2]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)
    out = torch.empty(batch, heads, dim, dtype=torch.float32, device=q.device)
    for b in range(batch):
        n = int(cache_seqlens[b])
        pages = block_table[b, :math.ceil(n / page_size)].long()
        k = k_pages[pages].reshape(-1, kv_heads, dim)[:n].float()  # (n, KV, D)
        v = v_pages[pages].reshape(-1, kv_heads, dim)[:n].float()
        k = k.repeat_interleave(heads // kv_heads, 1)  # (n, H, D)
        v = v.repeat_interleave(heads // kv_heads, 1)
        s = torch.einsum("hd,nhd->hn", q[b].float(), k) * scale
        out[b] = torch.einsum("hn,nhd->hd", s.softmax(-1), v)
    return out


def _main():
    import torch

    torch.manual_seed(0)
    for heads, kv_heads, page_size, seqlens in ((32, 8, 16, [1, 77, 1000]),
                                                (64, 8, 64, [4096, 33]),
                                                (16, 2, 256, [70000 // 7])):
        q = torch.randn(len(seqlens), heads, 128, dtype=torch.float16, device="cuda")
        cache = make_cache(len(seqlens), kv_heads, 128, page_size, seqlens, torch.float16, "cuda")
        out = paged_decode_op(q, *cache)
        err = (out.float() - reference(q, *cache)).abs().max().item()
        print(f"H={heads} KV={kv_heads} page={page_size} seqlens={seqlens}: max |O - ref| = {err:.2e}")


if __name__ == "__main__":
    _main()
