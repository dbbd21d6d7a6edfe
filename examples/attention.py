"""FlashAttention forward, written the TileLang way: ``O = softmax(Q K^T * scale) V`` over
BSHD tensors, one block of ``block_M`` queries per program, the keys and values walked
in ``block_N`` steps with a running row max and row sum (the online softmax), fp32
accumulation in registers, P fed to the second ``T.gemm`` from registers.

    flash_attention(batch, heads, seq_len, dim, ...)  -> a prim_func (factory)
        kv_heads < heads: grouped-query attention (heads share K/V by groups)
        causal: query i sees keys j <= i (the loop stops at the diagonal block)
        writes O (B, S, H, D) and the log-sum-exp LSE (B, H, S) in natural log, as
        FlashAttention's softmax_lse

Run on a GPU: ``python3 examples/attention.py`` (checks against
torch.nn.functional.scaled_dot_product_attention).
"""

import math

import tilecute
import tilecute.language as T

LOG2E = 1.4426950408889634
LAZY_RESCALE_LOG2 = 8.0  # lazy_rescale: P may reach 2^8 (fp16 holds it), l and O in fp32


def resolve_schedule(dim, causal, block_M=None, block_N=None, threads=None, num_stages=None,
                     warp_specialize=None, persistent=None, planned=False) -> dict:
    """The schedule :func:`flash_attention` runs, its defaults filled in (what
    :func:`plan_tiles` plans for too)."""
    small = dim <= 64 and block_M in (None, 192) and threads in (None, 384)
    block_M = block_M or (192 if small else 128)  # head dim 64: three compute warpgroups
    threads = threads or (384 if small else 256)
    if warp_specialize is None and (dim >= 128 or small):
        warp_specialize = True
    if persistent is None:  # (causal at head dim 64: the grouped longest-first walk; head
        # dim 128: a block per tile, FA4's sm90 choice, measured below)
        persistent = planned or bool(warp_specialize) and (not causal or small) and \
            not (dim == 128 and block_N in (None, 128))
    if block_N is None:  # head dim 128: 128-key steps, 2 stages, a block per tile (FA4's
        # sm90 tile). H200, TFLOP/s, B8 H32 S4096 non-causal / causal, 6 runs (2026-11-28):
        # 584-591 / 524-541 against 563-586 / 495-529 for the earlier default (176-key steps,
        # persistent non-causal), 128 keys with 3 stages 551-573 / 504-514
        block_N = 80 if dim == 256 else 128 if dim == 128 or small else 64
    # K and V get a pipeline each, so 2 stages keep them ahead
    num_stages = num_stages or 2
    return dict(block_M=block_M, block_N=block_N, threads=threads, num_stages=num_stages,
                warp_specialize=warp_specialize, persistent=persistent)


def flash_attention(heads=32, dim=128, kv_heads=None, causal=False, dtype="float16",
                    block_M=None, block_N=None, threads=None, num_stages=None, sm_scale=None,
                    warp_specialize=None, lpt=False, regs=None, persistent=None, sms=132,
                    planned=False, lazy_rescale=None):
    """The forward kernel for Q (B, S, heads, dim), K and V (B, S, kv_heads, dim) in
    ``dtype``; writes O like Q and LSE (B, heads, S) in float32.  ``sm_scale`` defaults
    to 1 / sqrt(dim).  The default schedule is the one measured best on an H100 / H200
    (benchmarks/attention.py), FlashAttention's sm90 tiles: a producer warpgroup loading K
    and V (a pipeline each, 2 stages) for 128 queries a block and 128-key steps at head
    dim 128 (a block per tile), 192 queries over three compute warpgroups and 128-key
    steps at 64, 80-key steps at 256; :func:`resolve_schedule`.
    The compiler overlaps each step's softmax with the MMAs (``overlap_mma``: the next
    Q K^T and this P V run during it; at head dim 128 the two compute warpgroups also take
    turns issuing them).
    ``lpt``: the query blocks run last to first (causal: the longest first, FlashAttention's
    LPT order); ``regs``: (producer, compute) registers per thread of the warp-specialized
    roles (``T.annotate_producer_reg_dealloc`` / ``T.annotate_consumer_reg_alloc``).
    ``persistent``: ``sms`` blocks walk the (query block, head, batch) tiles, query blocks
    fastest; the producer warpgroup loads the next tile's Q, K and V while the compute
    warpgroups finish a tile.  By default on when not causal at head dims 64 and 256:
    measured on an H100 (TFLOP/s, persistent vs a block per tile, two runs) D256 616 vs
    590, D64 410 / 444 vs 397 / 443; at 128 (176-key steps then) B8 H32 S4096 580 / 550 vs
    546 / 533, S8192 592 vs 592, and 128-key steps a block per tile beat both on an H200
    (:func:`resolve_schedule`).  Causal
    tiles differ in length: a causal persistent kernel walks groups of (head, batch) pairs
    in turn, each group's query blocks longest first, dealt to the blocks in a snake
    (:func:`plan_tiles`' order without a plan; balanced to 3-4% at the shapes below).  On
    by default for causal at head dim 64 only: H100, TFLOP/s, per tile / persistent /
    planned / cuDNN, one run: B16 H16 S2048 D64 314.5 / 339.1 / 340.0 / 334.6, B8 H32 S4096
    D64 383.4 / 402.3 / 408.0 / 398.9; at D128 it lost (B8 H32 S4096 518.3 / 457.5 / 493.8,
    B4 H16 S8192 585.1 / 476.5 / 577.6, B16 H32 S1024 316.1 / 293.7 / 346.1).
    ``lazy_rescale`` (FlashAttention-4's): a row's running max moves only when a step's max
    exceeds it by more than ``LAZY_RESCALE_LOG2`` (log2 units), so most steps rescale no
    row and the compiler skips ``acc_o *= alpha`` where a thread's alphas are all 1.  By
    default on at head dims of 128 and more: measured on an H100 (TFLOP/s, lazy vs not,
    one run) causal B8 H32 S4096 D128 544 vs 516, B4 H16 S8192 D128 583 vs 567, D256 606
    vs 565; non-causal within 2% either way; D64 causal 298 vs 309.
    ``planned`` (persistent): the kernel takes a sixth tensor, ``Sched`` (sms, slots) int32,
    the tiles each block runs in order (-1: none), planned on the host by
    :func:`plan_tiles` (longest first within groups of heads, each to the least loaded
    block)."""
    tiles = resolve_schedule(dim, causal, block_M, block_N, threads, num_stages,
                             warp_specialize, persistent, planned)
    lazy_rescale = dim >= 128 if lazy_rescale is None else lazy_rescale
    block_M, block_N, threads, num_stages = (tiles[k] for k in (
        "block_M", "block_N", "threads", "num_stages"))
    warp_specialize, persistent = tiles["warp_specialize"], tiles["persistent"]
    kv_heads = kv_heads or heads
    assert heads % kv_heads == 0, "kv_heads must divide heads"
    groups = heads // kv_heads
    scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)) * LOG2E  # exp -> exp2
    batch, seq_len = T.symbolic("batch"), T.symbolic("seq_len")
    q_shape = (batch, seq_len, heads, dim)
    kv_shape = (batch, seq_len, kv_heads, dim)

    @T.macro
    def one_tile(Q, K, V, O, LSE, Q_s, K_s, V_s, S, P, acc_o, m, m_prev, alpha, l, l_step,
                 bx, by, bz):
        """Query block ``bx`` of head ``by`` of batch entry ``bz``."""
        kv_head = by // groups
        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
        T.fill(acc_o, 0)
        T.fill(l, 0)
        T.fill(m, -T.infinity("float32"))

        loop_range = (
            T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            if causal else T.ceildiv(seq_len, block_N))
        for k in T.Pipelined(loop_range, num_stages=num_stages, warp_specialize=warp_specialize):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, kv_head, :], K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullRow)
            # keys past the end, and (causal) keys after the query, do not count: only
            # the last block and (causal) the blocks on the diagonal need the mask
            if causal:
                if (k + 1) * block_N > bx * block_M or (k + 1) * block_N > seq_len:
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.if_then_else(
                            (bx * block_M + i >= k * block_N + j)
                            and (k * block_N + j < seq_len), S[i, j], -T.infinity("float32"))
            else:
                if (k + 1) * block_N > seq_len:
                    for i, j in T.Parallel(block_M, block_N):
                        S[i, j] = T.if_then_else(k * block_N + j < seq_len, S[i, j],
                                                 -T.infinity("float32"))
            T.copy(m, m_prev)
            T.reduce_max(S, m, dim=1, clear=False)
            if lazy_rescale:  # the exponents' base moves only once the max outgrows it
                for i in T.Parallel(block_M):
                    m[i] = T.if_then_else((m[i] - m_prev[i]) * scale > LAZY_RESCALE_LOG2,
                                          m[i], m_prev[i])
                    alpha[i] = T.if_then_else(m[i] == m_prev[i], 1.0,
                                              T.exp2((m_prev[i] - m[i]) * scale))
            else:
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
            for i, j in T.Parallel(block_M, block_N):
                S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
            T.reduce_sum(S, l_step, dim=1)
            for i in T.Parallel(block_M):
                l[i] = l[i] * alpha[i] + l_step[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] *= alpha[i]
            T.copy(S, P)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, kv_head, :], V_s)
            T.gemm(P, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] /= l[i]
        T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
        for i in T.Parallel(block_M):
            if bx * block_M + i < seq_len:
                LSE[bz, by, bx * block_M + i] = m[i] * (scale / LOG2E) + T.log(l[i])

    @T.macro
    def blocks(Q, K, V, O, LSE, Sched, b0, by, bz):
        """The kernel's body: one tile (query block ``b0`` of head ``by``, batch ``bz``),
        or, persistent, the tiles block ``b0`` walks."""
        if regs is not None:
            T.annotate_producer_reg_dealloc(regs[0])
            T.annotate_consumer_reg_alloc(regs[1])
        Q_s = T.alloc_shared((block_M, dim), dtype)
        K_s = T.alloc_shared((block_N, dim), dtype)
        V_s = T.alloc_shared((block_N, dim), dtype)
        S = T.alloc_fragment((block_M, block_N), "float32")
        P = T.alloc_fragment((block_M, block_N), dtype)
        acc_o = T.alloc_fragment((block_M, dim), "float32")
        m = T.alloc_fragment((block_M,), "float32")
        m_prev = T.alloc_fragment((block_M,), "float32")
        alpha = T.alloc_fragment((block_M,), "float32")
        l = T.alloc_fragment((block_M,), "float32")
        l_step = T.alloc_fragment((block_M,), "float32")
        blocks_m = T.ceildiv(seq_len, block_M)
        if planned:  # the host's plan: tile pair * blocks_m + query block, -1 for none
            for w in T.serial(slots):
                tile = Sched[b0, w]
                if tile >= 0:
                    hi = tile // blocks_m % heads
                    one_tile(Q, K, V, O, LSE, Q_s, K_s, V_s, S, P, acc_o, m, m_prev, alpha, l,
                             l_step, tile % blocks_m, hi, tile // blocks_m // heads)
        elif persistent and causal:  # plan_tiles' order without a plan: groups of
            # (head, batch) pairs in turn, a group's query blocks longest first, dealt to
            # the blocks in a snake (every other wave from the last block), so each block
            # pairs a long tile with a short one
            pairs = heads * batch
            group = T.max(8, sms // blocks_m)
            for w in T.serial(T.ceildiv(blocks_m * pairs, sms)):
                tile = w * sms + T.if_then_else(w % 2 == 0, b0, sms - 1 - b0)
                g0 = tile // (group * blocks_m) * group
                size = T.min(group, pairs - g0)
                r = tile - g0 * blocks_m
                pair = g0 + r % size
                if tile < blocks_m * pairs:
                    one_tile(Q, K, V, O, LSE, Q_s, K_s, V_s, S, P, acc_o, m, m_prev, alpha, l,
                             l_step, blocks_m - 1 - r // size, pair % heads, pair // heads)
        elif persistent:  # query blocks fastest: a head's K and V stay in L2 while its blocks run
            for w in T.serial(T.ceildiv(blocks_m * heads * batch, sms)):
                tile = w * sms + b0
                bi = tile % blocks_m
                hi = tile // blocks_m % heads
                bi_z = tile // blocks_m // heads
                if bi_z < batch:
                    one_tile(Q, K, V, O, LSE, Q_s, K_s, V_s, S, P, acc_o, m, m_prev, alpha, l,
                             l_step, blocks_m - 1 - bi if lpt else bi, hi, bi_z)
        else:
            one_tile(Q, K, V, O, LSE, Q_s, K_s, V_s, S, P, acc_o, m, m_prev, alpha, l, l_step,
                     blocks_m - 1 - b0 if lpt else b0, by, bz)

    # persistent: a block per SM (the other two grid dims 1)
    grid = (sms, 1, 1) if persistent else (T.ceildiv(seq_len, block_M), heads, batch)

    slots = T.symbolic("slots")
    if planned:
        @T.prim_func
        def flash_attention(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                            V: T.Tensor(kv_shape, dtype), O: T.Tensor(q_shape, dtype),
                            LSE: T.Tensor((batch, heads, seq_len), "float32"),
                            Sched: T.Tensor((sms, slots), "int32")):
            with T.Kernel(*grid, threads=threads) as (b0, by, bz):
                blocks(Q, K, V, O, LSE, Sched, b0, by, bz)
    else:
        @T.prim_func
        def flash_attention(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
                            V: T.Tensor(kv_shape, dtype), O: T.Tensor(q_shape, dtype),
                            LSE: T.Tensor((batch, heads, seq_len), "float32")):
            with T.Kernel(*grid, threads=threads) as (b0, by, bz):
                blocks(Q, K, V, O, LSE, None, b0, by, bz)

    return flash_attention


def plan_tiles(batch, heads, seq_len, dim=128, causal=True, sms=132, group=None,
               **schedule):
    """The tiles each of ``sms`` persistent blocks runs, in order (``Sched`` of
    ``flash_attention(planned=True)``): a list of ``sms`` lists of tile ids (``pair *
    blocks_m + query block``, ``pair = batch entry * heads + head``), padded with -1.
    Groups of ``group`` (head, batch) pairs in turn (their K and V stay in L2 while their
    tiles run); within a group the longest tiles first (causal: the last query blocks),
    each to the block with the least work so far (steps of its tiles, plus one for each
    tile's fixed cost).  Balanced to within a few percent where a static walk was not.
    ``schedule``: :func:`flash_attention`'s keywords (``block_M``, ``block_N``, ...), as
    the kernel was built with them."""
    import heapq

    tiles = resolve_schedule(dim, causal, planned=True, **schedule)
    block_M, block_N = tiles["block_M"], tiles["block_N"]
    blocks_m = -(-seq_len // block_M)
    total = -(-seq_len // block_N)

    def steps(bx):
        return min(total, -(-(bx + 1) * block_M // block_N)) if causal else total
    pairs = batch * heads
    group = group or max(8, sms // blocks_m)
    heap = [(0, b) for b in range(sms)]
    lists = [[] for _ in range(sms)]
    for g0 in range(0, pairs, group):
        tiles = sorted(((steps(bx) + 1, p * blocks_m + bx)
                        for p in range(g0, min(g0 + group, pairs)) for bx in range(blocks_m)),
                       key=lambda x: -x[0])
        for cost, tile in tiles:
            load, b = heapq.heappop(heap)
            lists[b].append(tile)
            heapq.heappush(heap, (load + cost, b))
    slots = max(len(x) for x in lists)
    return [x + [-1] * (slots - len(x)) for x in lists]


# exp2 without the subnormal fix-up (ex2.approx.ftz, as FlashAttention's kernels use):
# measured on an H100, +3-7% (benchmarks/attention.py, variant suffix -precise to compare)
OPTIONS = {"fast_math": True}


@tilecute.jit(out_idx=[3, 4], options=OPTIONS)
def flash_attention_kernel(heads=32, dim=128, kv_heads=None, causal=False, dtype="float16",
                           block_M=None, block_N=None, threads=None, num_stages=None,
                           sm_scale=None, warp_specialize=None, lpt=False, regs=None,
                           persistent=None, sms=132, planned=False, lazy_rescale=None):
    """``O, LSE = flash_attention_kernel(heads, dim, ...)(Q, K, V)`` (``planned``:
    ``(Q, K, V, Sched)``, Sched from :func:`plan_tiles`)."""
    return flash_attention(heads, dim, kv_heads, causal, dtype, block_M, block_N, threads,
                           num_stages, sm_scale, warp_specialize, lpt, regs, persistent, sms,
                           planned, lazy_rescale)


def attention_op(heads=32, dim=128, kv_heads=None, causal=False, dtype="float16", **schedule):
    """The kernel as a ``torch.library`` custom op (``tilecute_examples::flash_attention_...``)
    with a fake implementation from the launch ABI: ``O, LSE = op(q, k, v)`` runs under
    ``torch.compile(fullgraph=True)`` and CUDA graphs."""
    import torch
    import tilecute.torch

    if torch.cuda.is_available():  # (a persistent kernel: a block per SM of this GPU)
        schedule.setdefault("sms", torch.cuda.get_device_properties(0).multi_processor_count)
    kernel = flash_attention_kernel(heads, dim, kv_heads, causal, dtype, **schedule)
    name = (f"tilecute_examples::flash_attention_h{heads}_kv{kv_heads or heads}_d{dim}"
            f"_{'causal' if causal else 'full'}_{dtype}")
    if name not in _OPS:
        _OPS[name] = tilecute.torch.register(kernel, name)
    return _OPS[name]


_OPS = {}


def reference(q, k, v, causal, sm_scale=None):
    """O and LSE by torch, in float32 (BSHD in, BSHD / BHS out)."""
    import torch

    groups = q.shape[2] // k.shape[2]
    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # BHSD
    kf, vf = kf.repeat_interleave(groups, 1), vf.repeat_interleave(groups, 1)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = qf @ kf.transpose(-1, -2) * scale
    if causal:
        n = q.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return (torch.softmax(s, dim=-1) @ vf).transpose(1, 2), lse


def _main():
    import torch

    for heads, kv_heads, dim, causal in ((8, 8, 128, False), (8, 2, 64, True)):
        kernel = flash_attention_kernel(heads, dim, kv_heads, causal)
        for seq in (1, 127, 1000):
            q = torch.randn(2, seq, heads, dim, device="cuda", dtype=torch.float16)
            k = torch.randn(2, seq, kv_heads, dim, device="cuda", dtype=torch.float16)
            v = torch.randn_like(k)
            o, lse = kernel(q, k, v)
            ro, rlse = reference(q, k, v, causal)
            err = (o.float() - ro).abs().max().item()
            lerr = (lse - rlse).abs().max().item()
            print(f"H={heads} KV={kv_heads} D={dim} causal={causal} S={seq}: "
                  f"max |O - ref| = {err:.2e}, max |LSE - ref| = {lerr:.2e}")


if __name__ == "__main__":
    _main()
