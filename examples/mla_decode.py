"""DeepSeek-style MLA decode (multi-head latent attention) over a paged latent cache,
written the TileLang way.

DeepSeek-V2/V3 decode attends with 128 query heads to one shared latent KV head: each
cached token holds a compressed vector ``c`` (``dim`` = 512) that serves as both key and
value, plus a rotary part ``k_pe`` (``pe_dim`` = 64) for the key.  For query ``q`` (its
latent part, 512) and ``q_pe`` (64):

    s_t = (q . c_t + q_pe . k_pe_t) * sm_scale,    o = softmax(s) @ C

Cache layout (FlashMLA's): pages of ``page_size`` tokens, ``KV[page, slot, 0, :]`` and
``K_pe[page, slot, 0, :]``, token ``t`` of sequence ``b`` in page
``block_table[b, t // page_size]``; ``cache_seqlens[b]`` tokens per sequence.

- ``split``: grid (num_split, heads / 64, batch), 256 threads.  A block takes 64 query
  heads and one slice of the sequence.  The score tile ``S = Q C^T + Q_pe K_pe^T``
  (64 x 64) and the output ``O`` (64 x 512) are split over two consumer warpgroups along
  N (``T.GemmWarpPolicy.FullCol``): 256 output columns each, 128 accumulator registers
  per thread, which one warpgroup could not hold.  The row max and sum therefore combine
  both warpgroups' halves (through shared memory), and ``P`` goes through shared memory
  (``S_s``) because each warpgroup needs all 64 of its columns as the A operand of
  ``P @ C``.  A producer warp loads the pages with TMA.  Partial outputs and log-sum-exps
  (base 2) go to ``T.alloc_global`` workspaces;
- ``split`` warp-specialized (:func:`mla_decode_ws`, ``mla_decode_op``'s default, 3-10%
  faster on an H100): one warpgroup owns the whole score tile and its softmax (no
  cross-warpgroup row max) and accumulates O's left half, another accumulates the right
  half from the P it publishes, a third loads the pages with TMA;
- ``combine``: grid (heads, batch), as in examples/decode.py.

``mla_decode_op`` picks the split count by shape (``choose_schedule``: 64-key steps, 2
stages, one wave of blocks).

    kernel = mla_decode_kernel(heads=128, num_split=4)
    out = kernel(q, q_pe, kv_pages, k_pe_pages, block_table, cache_seqlens)   # (B, 128, 512)

Run on a GPU: ``python3 examples/mla_decode.py`` (checks against a torch reference).
"""

import math

import tilecute
import tilecute.language as T

LOG2E = 1.4426950408889634
BLOCK_H = 64  # query heads per block: one wgmma tile of rows
LAZY_RESCALE_LOG2 = 8.0  # lazy rescale: P may reach 2^8 (fp16 holds it), l and O in fp32



@T.macro
def combine(lse_partial, o_partial, O, heads, batch, num_split, dim):
    """The combine kernel: each (head, batch) row's splits weighted by their log-sum-exps
    (base 2); a sequence with no key (every split empty, ``cache_seqlens`` 0) is 0."""
    with T.Kernel(heads, batch, threads=dim) as (h, b):
        lse_s = T.alloc_shared((num_split,), "float32")
        acc = T.alloc_fragment((dim,), "float32")
        lse_max = T.alloc_var("float32", -T.infinity("float32"))
        lse_total = T.alloc_var("float32", 0)
        T.copy(lse_partial[b, h, :], lse_s)
        for s in T.serial(num_split):
            lse_max = T.max(lse_max, lse_s[s])
        if lse_max == -T.infinity("float32"):
            lse_max = 0.0  # (no key: every weight below is 0)
        for s in T.serial(num_split):
            lse_total += T.exp2(lse_s[s] - lse_max)
        T.fill(acc, 0)
        for s in T.unroll(num_split):
            for d in T.Parallel(dim):
                acc[d] += T.if_then_else(lse_total > 0, T.exp2(lse_s[s] - lse_max) / lse_total,
                                         0.0) * o_partial[b, h, s, d]
        T.copy(acc, O[b, h, :])



@T.macro
def split_steps(seqlen, block_N, num_split, bs):
    """The first of split ``bs``'s ``block_N``-key steps and their count (0 for an empty
    split): the sequence's steps in ``num_split`` even runs."""
    steps = T.ceildiv(seqlen, block_N)
    per_split = T.ceildiv(steps, num_split)
    return bs * per_split, T.max(T.min(per_split, steps - bs * per_split), 0)


@T.macro
def online_softmax(S, m, m_prev, alpha, l, l_step, start, seqlen, scale, lazy_rescale, block_N):
    """One step of the online softmax over the scores ``S`` (keys from ``start``; those at
    or past ``seqlen`` masked): the running max ``m`` (lazy: its base moves only once the
    step's max outgrows it by ``LAZY_RESCALE_LOG2``), the rescale ``alpha`` of what came
    before, ``S`` made P in place (base 2, ``scale`` with log2 e folded in), and the running
    sum ``l``."""
    if start + block_N > seqlen:
        for i, j in T.Parallel(BLOCK_H, block_N):
            S[i, j] = T.if_then_else(start + j < seqlen, S[i, j], -T.infinity("float32"))
    T.copy(m, m_prev)
    T.reduce_max(S, m, dim=1, clear=False)
    if lazy_rescale:  # the exponents' base moves only once the max outgrows it
        for i in T.Parallel(BLOCK_H):
            m[i] = T.if_then_else((m[i] - m_prev[i]) * scale > LAZY_RESCALE_LOG2, m[i], m_prev[i])
            alpha[i] = T.if_then_else(m[i] == m_prev[i], 1.0, T.exp2((m_prev[i] - m[i]) * scale))
    else:
        for i in T.Parallel(BLOCK_H):
            alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
    for i, j in T.Parallel(BLOCK_H, block_N):
        S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
    T.reduce_sum(S, l_step, dim=1)
    for i in T.Parallel(BLOCK_H):
        l[i] = l[i] * alpha[i] + l_step[i]


def mla_decode(heads=128, dim=512, pe_dim=64, page_size=64, num_split=4, block_N=64,
               num_stages=2, dtype="float16", sm_scale=None, cluster=False, lazy_rescale=True):
    """The prim_func: Q (B, heads, dim), Q_pe (B, heads, pe_dim), KV pages (P, page_size, 1,
    dim), K_pe pages (P, page_size, 1, pe_dim), block_table (B, max_pages) int32,
    cache_seqlens (B,) int32 -> O (B, heads, dim).  ``cluster``: the head blocks of one
    split launch in clusters of two, which share each KV tile (TMA multicast: it leaves L2
    once for both).  ``lazy_rescale`` (FlashAttention-4's): a row's running max, the base
    of its exponents, moves only when the step's max exceeds it by more than
    ``LAZY_RESCALE_LOG2`` (in log2 units), so P stays below 2^8 and most steps rescale
    nothing (the compiler skips ``acc_o *= alpha`` in a thread whose rows' alpha are 1);
    the result is the same softmax, the base cancels in ``O / l``."""
    assert heads % BLOCK_H == 0 and page_size % block_N == 0
    assert not cluster or heads // BLOCK_H % 2 == 0
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim + pe_dim)) * LOG2E
    accum = "float32"
    batch, num_pages, max_pages = T.symbolic("batch"), T.symbolic("num_pages"), T.symbolic("max_pages")

    @T.prim_func
    def mla_decode(Q: T.Tensor((batch, heads, dim), dtype),
                   Q_pe: T.Tensor((batch, heads, pe_dim), dtype),
                   KV: T.Tensor((num_pages, page_size, 1, dim), dtype),
                   K_pe: T.Tensor((num_pages, page_size, 1, pe_dim), dtype),
                   block_table: T.Tensor((batch, max_pages), T.int32),
                   cache_seqlens: T.Tensor((batch,), T.int32),
                   O: T.Tensor((batch, heads, dim), dtype)):
        lse_partial = T.alloc_global((batch, heads, num_split), accum)
        o_partial = T.alloc_global((batch, heads, num_split, dim), accum)

        with T.Kernel(num_split, heads // BLOCK_H, batch, threads=256,
                      cluster=(1, 2, 1) if cluster else None) as (bs, hb, b):
            Q_s = T.alloc_shared((BLOCK_H, dim), dtype)
            Qpe_s = T.alloc_shared((BLOCK_H, pe_dim), dtype)
            KV_s = T.alloc_shared((block_N, dim), dtype)
            Kpe_s = T.alloc_shared((block_N, pe_dim), dtype)
            S_s = T.alloc_shared((BLOCK_H, block_N), dtype)
            S = T.alloc_fragment((BLOCK_H, block_N), accum)
            acc_o = T.alloc_fragment((BLOCK_H, dim), accum)
            m = T.alloc_fragment((BLOCK_H,), accum)
            m_prev = T.alloc_fragment((BLOCK_H,), accum)
            alpha = T.alloc_fragment((BLOCK_H,), accum)
            l = T.alloc_fragment((BLOCK_H,), accum)
            l_step = T.alloc_fragment((BLOCK_H,), accum)

            seqlen = cache_seqlens[b]
            first, count = split_steps(seqlen, block_N, num_split, bs)

            T.copy(Q[b, hb * BLOCK_H:(hb + 1) * BLOCK_H, :], Q_s)
            T.copy(Q_pe[b, hb * BLOCK_H:(hb + 1) * BLOCK_H, :], Qpe_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(count, num_stages=num_stages):
                start = (first + k) * block_N
                page = block_table[b, start // page_size]
                T.copy(KV[page, start % page_size:start % page_size + block_N, 0, :], KV_s)
                T.copy(K_pe[page, start % page_size:start % page_size + block_N, 0, :], Kpe_s)
                T.gemm(Q_s, KV_s, S, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Qpe_s, Kpe_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                online_softmax(S, m, m_prev, alpha, l, l_step, start, seqlen, scale, lazy_rescale,
                               block_N)
                T.copy(S, S_s)  # each warpgroup holds half of P's columns; P @ C needs all
                for i, j in T.Parallel(BLOCK_H, dim):
                    acc_o[i, j] *= alpha[i]
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            # an empty split (count == 0) leaves l == 0: its partial is 0 with weight 0
            for i, j in T.Parallel(BLOCK_H, dim):
                o_partial[b, hb * BLOCK_H + i, bs, j] = T.if_then_else(l[i] > 0, acc_o[i, j] / l[i], 0)
            for i in T.Parallel(BLOCK_H):
                lse_partial[b, hb * BLOCK_H + i, bs] = T.if_then_else(
                    l[i] > 0, m[i] * scale + T.log2(l[i]), -T.infinity(accum))

        combine(lse_partial, o_partial, O, heads, batch, num_split, dim)

    return mla_decode


def mla_decode_ws(heads=128, dim=512, pe_dim=64, page_size=64, num_split=1, dtype="float16",
                  sm_scale=None, lazy_rescale=True):
    """The split kernel warp-specialized, the score tile owned by one warpgroup: 384
    threads, 64-key steps, two KV stages.  Warpgroup 0 loads the pages with TMA;
    warpgroup 1 computes the whole score tile ``S`` (64 x 64, no cross-warpgroup row max),
    its softmax, publishes ``P`` and the rescale factors in shared memory, and accumulates
    the left half of ``O``; warpgroup 2 accumulates the right half from the published
    ``P`` while warpgroup 1 goes on to the next step's scores.  mbarriers: ``full`` /
    ``empty`` per KV stage (producer / both consumers), ``p_full`` / ``p_empty`` for
    ``P`` (one buffer: warpgroup 1 publishes step k once warpgroup 2 has read step k - 1).
    Same arguments, outputs and combine kernel as :func:`mla_decode`."""
    assert heads % BLOCK_H == 0 and page_size % 64 == 0 and dim % 2 == 0
    block_N, stages, half = 64, 2, dim // 2
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim + pe_dim)) * LOG2E
    accum = "float32"
    batch, num_pages, max_pages = T.symbolic("batch"), T.symbolic("num_pages"), T.symbolic("max_pages")

    @T.prim_func
    def mla_decode_ws(Q: T.Tensor((batch, heads, dim), dtype),
                      Q_pe: T.Tensor((batch, heads, pe_dim), dtype),
                      KV: T.Tensor((num_pages, page_size, 1, dim), dtype),
                      K_pe: T.Tensor((num_pages, page_size, 1, pe_dim), dtype),
                      block_table: T.Tensor((batch, max_pages), T.int32),
                      cache_seqlens: T.Tensor((batch,), T.int32),
                      O: T.Tensor((batch, heads, dim), dtype)):
        lse_partial = T.alloc_global((batch, heads, num_split), accum)
        o_partial = T.alloc_global((batch, heads, num_split, dim), accum)

        with T.Kernel(num_split, heads // BLOCK_H, batch, threads=384) as (bs, hb, b):
            Q_s = T.alloc_shared((BLOCK_H, dim), dtype)
            Qpe_s = T.alloc_shared((BLOCK_H, pe_dim), dtype)
            KV_s = T.alloc_shared((stages, block_N, dim), dtype)
            Kpe_s = T.alloc_shared((stages, block_N, pe_dim), dtype)
            P_s = T.alloc_shared((BLOCK_H, block_N), dtype)
            alpha_s = T.alloc_shared((BLOCK_H,), accum)
            l_s = T.alloc_shared((BLOCK_H,), accum)
            S = T.alloc_fragment((BLOCK_H, block_N), accum)
            acc_l = T.alloc_fragment((BLOCK_H, half), accum)
            acc_r = T.alloc_fragment((BLOCK_H, half), accum)
            m = T.alloc_fragment((BLOCK_H,), accum)
            m_prev = T.alloc_fragment((BLOCK_H,), accum)
            alpha = T.alloc_fragment((BLOCK_H,), accum)
            l = T.alloc_fragment((BLOCK_H,), accum)
            l_step = T.alloc_fragment((BLOCK_H,), accum)
            alpha_r = T.alloc_fragment((BLOCK_H,), accum)
            l_r = T.alloc_fragment((BLOCK_H,), accum)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([256] * stages)
            p_full = T.alloc_barrier([128])
            p_empty = T.alloc_barrier([128])

            seqlen = cache_seqlens[b]
            first, count = split_steps(seqlen, block_N, num_split, bs)

            T.copy(Q[b, hb * BLOCK_H:(hb + 1) * BLOCK_H, :], Q_s)
            T.copy(Q_pe[b, hb * BLOCK_H:(hb + 1) * BLOCK_H, :], Qpe_s)
            with T.ws(0):  # the producer: the KV pages by TMA
                T.set_max_nreg(40, 0)
                for k in T.serial(count):
                    start = (first + k) * block_N
                    page = block_table[b, start // page_size]
                    slot = start % page_size
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    T.tma_copy(KV[page, slot:slot + block_N, 0, :], KV_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.tma_copy(K_pe[page, slot:slot + block_N, 0, :], Kpe_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.mbarrier_arrive(full[k % stages])
            with T.ws(1):  # the scores, the softmax, the left half of O
                T.set_max_nreg(232, 1)
                T.fill(acc_l, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(accum))
                for k in T.serial(count):
                    start = (first + k) * block_N
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    T.gemm(Q_s, KV_s[k % stages, :, :], S, transpose_B=True, clear_accum=True)
                    T.gemm(Qpe_s, Kpe_s[k % stages, :, :], S, transpose_B=True)
                    online_softmax(S, m, m_prev, alpha, l, l_step, start, seqlen, scale,
                                   lazy_rescale, block_N)
                    if k > 0:  # warpgroup 2 has read step k - 1's P
                        T.mbarrier_wait_parity(p_empty[0], (k - 1) & 1)
                    T.copy(S, P_s)
                    T.copy(alpha, alpha_s)
                    T.fence_proxy_async()  # P_s is read by warpgroup 2's wgmma
                    T.mbarrier_arrive(p_full[0])
                    for i, j in T.Parallel(BLOCK_H, half):
                        acc_l[i, j] *= alpha[i]
                    T.gemm(P_s, KV_s[k % stages, :, 0:half], acc_l)
                    T.mbarrier_arrive(empty[k % stages])
                if count > 0:
                    T.mbarrier_wait_parity(p_empty[0], (count - 1) & 1)
                T.copy(l, l_s)
                T.mbarrier_arrive(p_full[0])  # one more phase: l is published
                for i, j in T.Parallel(BLOCK_H, half):
                    o_partial[b, hb * BLOCK_H + i, bs, j] = T.if_then_else(l[i] > 0, acc_l[i, j] / l[i], 0)
                for i in T.Parallel(BLOCK_H):
                    lse_partial[b, hb * BLOCK_H + i, bs] = T.if_then_else(
                        l[i] > 0, m[i] * scale + T.log2(l[i]), -T.infinity(accum))
            with T.ws(2):  # the right half of O from the published P
                T.set_max_nreg(232, 1)
                T.fill(acc_r, 0)
                for k in T.serial(count):
                    T.mbarrier_wait_parity(p_full[0], k & 1)
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    for i in T.Parallel(BLOCK_H):
                        alpha_r[i] = alpha_s[i]
                    for i, j in T.Parallel(BLOCK_H, half):
                        acc_r[i, j] *= alpha_r[i]
                    T.gemm(P_s, KV_s[k % stages, :, half:dim], acc_r)
                    T.mbarrier_arrive(p_empty[0])
                    T.mbarrier_arrive(empty[k % stages])
                T.mbarrier_wait_parity(p_full[0], count & 1)
                for i in T.Parallel(BLOCK_H):
                    l_r[i] = l_s[i]
                for i, j in T.Parallel(BLOCK_H, half):
                    o_partial[b, hb * BLOCK_H + i, bs, half + j] = T.if_then_else(
                        l_r[i] > 0, acc_r[i, j] / l_r[i], 0)

        combine(lse_partial, o_partial, O, heads, batch, num_split, dim)

    return mla_decode_ws


@tilecute.jit(out_idx=[-1], options={"fast_math": True})
def mla_decode_ws_kernel(heads=128, dim=512, pe_dim=64, page_size=64, num_split=1,
                         dtype="float16", sm_scale=None, lazy_rescale=True):
    """:func:`mla_decode_ws` compiled as :func:`mla_decode_kernel` is."""
    return mla_decode_ws(heads, dim, pe_dim, page_size, num_split, dtype, sm_scale, lazy_rescale)


@tilecute.jit(out_idx=[-1], options={"fast_math": True})
def mla_decode_kernel(heads=128, dim=512, pe_dim=64, page_size=64, num_split=4, block_N=64,
                      num_stages=2, dtype="float16", sm_scale=None, cluster=False,
                      lazy_rescale=True):
    """``O = mla_decode_kernel(...)(q, q_pe, kv_pages, k_pe_pages, block_table,
    cache_seqlens)``.  Compiled with ``fast_math`` (TileLang's ``tl.enable_fast_math``:
    ``ex2.approx.ftz``, division by a reciprocal; H100, batch 128 x 8k, 6 interleaved
    rounds: 407 vs 399 TFLOP/s, 64 x 4k 391 vs 386; outputs within 6e-5 of the precise
    kernel's)."""
    return mla_decode(heads, dim, pe_dim, page_size, num_split, block_N, num_stages, dtype,
                      sm_scale, cluster, lazy_rescale)


def choose_schedule(batch, heads, max_seqlen, num_sms=132, block_N=64):
    """``num_split``, ``block_N`` and ``num_stages`` for a shape: 64-key steps, 2 stages, and
    splits for one wave of blocks (the largest power of two, up to 16, that keeps
    ``batch x heads / 64 x num_split`` at most ``num_sms``; each split at least one step).
    Measured on an H100 (fp16, TFLOP/s; ``benchmarks/mla_decode.py --tune``): batch 128 x 8k
    432 with one split against 387 with two (two waves); batch 128 x 4k 386 vs 349; batch
    64 x 4k 392 vs 299 (32-key steps, 3 stages); batch 16 x 4k 221 vs 154; batch 1 x 8k
    27.7 vs 15.9."""
    blocks = batch * (heads // BLOCK_H)
    split = 1
    while split < 16 and blocks * split * 2 <= num_sms and split * block_N < max_seqlen:
        split *= 2
    return dict(num_split=split, block_N=block_N, num_stages=2)


FULLCOL_ONLY = ("block_N", "num_stages", "cluster")  # mla_decode's knobs that mla_decode_ws lacks


def mla_decode_op(q, q_pe, kv_pages, k_pe_pages, block_table, cache_seqlens, num_split=None,
                  kernel=None, **schedule):
    """``O`` (B, heads, dim); what ``num_split`` and ``schedule`` do not give, from
    ``choose_schedule``.  ``kernel``: ``"ws"`` (:func:`mla_decode_ws`, the default) or
    ``"fullcol"`` (:func:`mla_decode`, TileLang's example's split of both accumulators,
    whose ``block_N`` / ``num_stages`` / ``cluster`` a schedule may set; giving one of them
    chooses it).  H100, fp16, TFLOP/s from CUDA-graph replay, 4 interleaved rounds: batch
    128 x 8k ws 481 / 480 / 444 / 471 vs fullcol 458 / 442 / 445 / 433; 64 x 4k 471 / 460
    / 474 / 474 vs 425 / 426 / 438 / 425; 128 x 4k 450 / 449 / 424 / 440 vs 419 / 390 /
    392 / 400; 16 x 4k (4 splits) 351-354 either."""
    import torch

    if kernel is None:
        kernel = "fullcol" if any(k in schedule for k in FULLCOL_ONLY) else "ws"
    if kernel not in ("ws", "fullcol"):
        raise ValueError(f"mla_decode_op: kernel={kernel!r}: 'ws' or 'fullcol'")
    if kernel == "ws" and any(k in schedule for k in FULLCOL_ONLY):
        raise ValueError(f"mla_decode_op: {', '.join(k for k in FULLCOL_ONLY if k in schedule)} "
                         "set the 'fullcol' kernel's schedule; the 'ws' kernel takes 64-key "
                         "steps in two stages")
    batch, heads, dim = q.shape
    page_size = kv_pages.shape[1]
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    chosen = choose_schedule(batch, heads, block_table.shape[1] * page_size, sms,
                             schedule.get("block_N", 64))
    chosen_split = chosen.pop("num_split")
    split = chosen_split if num_split is None else num_split
    dtype = str(q.dtype).replace("torch.", "")
    if kernel == "ws":
        compiled = mla_decode_ws_kernel(heads, dim, q_pe.shape[-1], page_size, split, dtype=dtype,
                                        **schedule)
    else:
        compiled = mla_decode_kernel(heads, dim, q_pe.shape[-1], page_size, split, dtype=dtype,
                                     **{**chosen, **schedule})
    return compiled(q, q_pe, kv_pages, k_pe_pages, block_table, cache_seqlens)


def make_cache(batch, dim, pe_dim, page_size, seqlens, dtype, device, extra_pages=2):
    """A shuffled paged latent cache: (kv_pages, k_pe_pages, block_table, cache_seqlens)."""
    import torch

    pages_per_seq = [max(1, -(-int(s) // page_size)) for s in seqlens]
    total = sum(pages_per_seq) + extra_pages
    kv = torch.randn(total, page_size, 1, dim, dtype=dtype, device=device)
    k_pe = torch.randn(total, page_size, 1, pe_dim, dtype=dtype, device=device)
    order = torch.randperm(total, device=device).to(torch.int32)
    table = torch.full((batch, max(pages_per_seq)), -1, dtype=torch.int32, device=device)
    used = 0
    for b, n in enumerate(pages_per_seq):
        table[b, :n] = order[used:used + n]
        used += n
    lens = torch.tensor([int(s) for s in seqlens], dtype=torch.int32, device=device)
    return kv, k_pe, table, lens


def reference(q, q_pe, kv_pages, k_pe_pages, block_table, cache_seqlens, sm_scale=None):
    """fp32 torch: each sequence's tokens gathered from its pages, softmax attention."""
    import torch

    batch, heads, dim = q.shape
    pe_dim = q_pe.shape[-1]
    page_size = kv_pages.shape[1]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim + pe_dim)
    out = torch.empty(batch, heads, dim, dtype=torch.float32, device=q.device)
    for b in range(batch):
        n = int(cache_seqlens[b])
        pages = block_table[b, :-(-n // page_size)].long()
        c = kv_pages[pages].reshape(-1, dim)[:n].float()
        kpe = k_pe_pages[pages].reshape(-1, pe_dim)[:n].float()
        s = (q[b].float() @ c.T + q_pe[b].float() @ kpe.T) * scale
        out[b] = torch.softmax(s, dim=-1) @ c
    return out


if __name__ == "__main__":
    import torch

    torch.manual_seed(0)
    for batch, lens in ((1, [1]), (2, [1000, 4097]), (4, [64, 127, 8192, 33])):
        q = torch.randn(batch, 128, 512, dtype=torch.float16, device="cuda")
        q_pe = torch.randn(batch, 128, 64, dtype=torch.float16, device="cuda")
        cache = make_cache(batch, 512, 64, 64, lens, torch.float16, "cuda")
        ref = reference(q, q_pe, *cache)
        for kernel in ("ws", "fullcol"):
            out = mla_decode_op(q, q_pe, *cache, kernel=kernel)
            err = (out.float() - ref).abs().max().item()
            print(f"batch {batch} lens {lens} {kernel}: max abs error {err:.2e}")
            assert err < 2e-2, err
    print("ok")
