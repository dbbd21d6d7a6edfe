"""An eighteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), all attention-family kernels as a TileLang user writes them:
``@tilecute.jit(out_idx=...)`` factories returning a ``@T.prim_func``.  They aim at forms the
earlier attention rounds leave out: causal masks applied only on the boundary tiles (a
runtime ``if`` around the mask inside the pipelined loop), query and key tiles of different
sizes (128 x 32, 32 x 128, 64 x 128), loop ranges cut with ``T.max`` / ``T.min`` into
``T.alloc_var`` bounds, rows that see no key at all (prefix-causal with more queries than
keys, an additive mask with whole rows of -inf, windows past the sequence's end) guarded
as a user guards them, soft-capping with GQA in BHSD, ALiBi slopes computed in the kernel,
variable-length attention whose loads are padded with ``T.if_then_else``, paged prefill
through a block table, MQA decode with the whole head group in one block, split-KV decode
whose empty splits write -inf and the combine that reads them, a user's MMA-overlap
schedule through ``order`` / ``stage`` / ``group``, a plain-order schedule with one stage,
and a backward (preprocess, dQ by ``T.atomic_add``, dK / dV per key block) over natural-log
LSEs.

``tests/test_unseen_programs18.py`` builds each to a cubin on the CPU and, on a GPU,
compares it with a float32 torch reference written to TileLang's meaning, at lengths that
are not tile multiples."""

import tilecute
import tilecute.language as T

LOG2E = 1.44269504
LN2 = 0.69314718


# ---- causal forward, tiles of different sizes, masks on the boundary tiles only ----------------
@tilecute.jit(out_idx=[3, 4])
def fa_causal_boundary_only(batch=1, heads=2, seq_len=300, dim=64, block_M=128, block_N=32,
                            threads=256, num_stages=1, dynamic=False):
    """Causal BHSD attention (float16) whose mask runs only on the tiles that need it: a key
    tile that crosses the diagonal or the sequence's end (a runtime ``if`` on the tile index
    around the ``T.Parallel`` mask).  The scale is folded into ``T.exp2`` (log2(e) / sqrt(D)).
    O float16; LSE float32 [B, H, S] natural log.  ``dynamic``: the batch and the sequence
    length are ``T.dynamic`` (taken from the tensors at each call)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    if dynamic:
        batch, seq_len = T.dynamic("batch"), T.dynamic("seq_len")
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def causal(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
               O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n_tiles = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                if (k + 1) * block_N > bx * block_M or (k + 1) * block_N > seq_len:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            (bx * block_M + i >= k * block_N + j) and (k * block_N + j < seq_len),
                            acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_len:
                    LSE[bz, by, bx * block_M + i] = (T.log2(l[i]) + m[i] * scale) * LN2
    return causal


@tilecute.jit(out_idx=[3])
def fa_causal_wide_keys_bshd(batch=2, heads=2, seq_len=201, dim=64, block_M=32, block_N=128,
                             threads=128, num_stages=2):
    """Causal BSHD attention (bfloat16) with query tiles narrower than key tiles (32 x 128):
    every key tile but the diagonal one is whole; the mask is one ``T.if_then_else`` on all
    tiles.  The probabilities go to bfloat16 through ``T.copy(acc_s, acc_s_cast)`` and the
    output leaves through shared memory."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def wide(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            o_s = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv((bx + 1) * block_M, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m[i]) * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, o_s)
            T.copy(o_s, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return wide


@tilecute.jit(out_idx=[3])
def fa_window_alloc_var_bounds(batch=1, heads=2, seq_len=280, dim=64, window_left=50,
                               window_right=20, block_M=64, block_N=64, threads=128):
    """Banded attention (float16, BHSD), query i sees keys i - window_left .. i + window_right:
    the key-tile range is cut with ``T.max`` / ``T.min`` into ``T.alloc_var`` bounds and the
    mask runs only on tiles the band's edges (or the end) cross, a runtime ``if`` on the
    tile's first and last key.  A row whose first tile in the range lies wholly left of its
    band (the range starts at the block's first row's band) keeps a max of -inf through that
    tile: the program guards the max (read as 0 while -inf), else 2^(-inf - -inf) is NaN, as
    TileLang computes it."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def band(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lo = T.alloc_var("int32")
            hi = T.alloc_var("int32")

            lo = T.max(bx * block_M - window_left, 0) // block_N
            hi = T.min(T.ceildiv(T.min((bx + 1) * block_M + window_right, seq_len), block_N),
                       T.ceildiv(seq_len, block_N))
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                first_key = k * block_N
                last_key = k * block_N + block_N - 1
                if first_key < bx * block_M + block_M - 1 - window_left or \
                        last_key > bx * block_M + window_right or last_key >= seq_len:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            (k * block_N + j >= bx * block_M + i - window_left)
                            and (k * block_N + j <= bx * block_M + i + window_right)
                            and (k * block_N + j < seq_len),
                            acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return band


# ---- rows with no key: the program's guards ---------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def fa_prefix_causal_more_queries(batch=1, heads=2, seq_q=200, seq_k=130, dim=64, block_M=64,
                                  block_N=64, threads=128, guard=True):
    """Causal attention aligned to the bottom right with more queries than keys (BSHD,
    float16): query i sees keys j <= i + seq_k - seq_q, so the first seq_q - seq_k rows see
    none.  The program guards them as a user does: the running max read as 0 while it is
    -inf, the output 0 where the row sum is 0, and the LSE -inf there.  Whole blocks of such
    rows run no key tile (the loop's extent is 0).  ``guard=False`` is the same program
    without those guards (TileLang's arithmetic then gives those rows NaN: 2^(-inf - -inf),
    or 0 / 0 where no tile ran)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    off = seq_k - seq_q

    @T.prim_func
    def prefix(Q: T.Tensor([batch, seq_q, heads, dim], dtype), K: T.Tensor([batch, seq_k, heads, dim], dtype),
               V: T.Tensor([batch, seq_k, heads, dim], dtype), O: T.Tensor([batch, seq_q, heads, dim], dtype),
               LSE: T.Tensor([batch, heads, seq_q], accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            hi = T.max(0, T.min(T.ceildiv(seq_k, block_N), T.ceildiv((bx + 1) * block_M + off, block_N)))
            for k in T.Pipelined(hi, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j <= bx * block_M + i + off) and (k * block_N + j < seq_k),
                        acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    if guard:
                        m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                    else:
                        m_safe[i] = m[i]
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                if guard:
                    acc_o[i, j] = T.if_then_else(l[i] > 0, acc_o[i, j] / l[i], 0)
                else:
                    acc_o[i, j] = acc_o[i, j] / l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_q:
                    if guard:
                        LSE[bz, by, bx * block_M + i] = T.if_then_else(
                            l[i] > 0, (T.log2(l[i]) + m[i] * scale) * LN2, -T.infinity(accum))
                    else:
                        LSE[bz, by, bx * block_M + i] = (T.log2(l[i]) + m[i] * scale) * LN2
    return prefix


@tilecute.jit(out_idx=[4])
def fa_additive_mask_rows_of_inf(batch=2, heads=2, seq_q=150, seq_k=190, dim=64, block_M=64,
                                 block_N=64, threads=128):
    """Cross attention (BHSD, float16) with an additive float32 mask [B, 1, Sq, Sk] shared by
    the heads (rows of it may be all -inf), the mask tile staged through shared memory with
    ``T.copy`` and added after the GEMM in log2 units.  Rows with no key give 0 (the max
    guarded, the division guarded)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def masked(Q: T.Tensor([batch, heads, seq_q, dim], dtype), K: T.Tensor([batch, heads, seq_k, dim], dtype),
               V: T.Tensor([batch, heads, seq_k, dim], dtype), Mask: T.Tensor([batch, 1, seq_q, seq_k], accum),
               O: T.Tensor([batch, heads, seq_q, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            mask_s = T.alloc_shared([block_M, block_N], accum)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_k, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.copy(Mask[bz, 0, bx * block_M:(bx + 1) * block_M, k * block_N:(k + 1) * block_N], mask_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_k,
                                                 acc_s[i, j] * scale + mask_s[i, j] * LOG2E,
                                                 -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m_safe[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m_safe[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] = T.if_then_else(l[i] == 0, 0, acc_o[i, j] / l[i])
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return masked


# ---- soft-capping with GQA in BHSD; ALiBi slopes computed in the kernel -------------------------
@tilecute.jit(out_idx=[3, 4])
def fa_softcap_gqa_bhsd(batch=1, heads=8, kv_heads=2, seq_len=257, dim=128, softcap=15.0,
                        block_M=64, block_N=64, threads=128):
    """Non-causal GQA (BHSD, bfloat16): query head h reads key / value head h // (heads //
    kv_heads); the scores are soft-capped, s = softcap * tanh(q.k / sqrt(D) / softcap), then
    the key tail masked.  O bfloat16; LSE float32 [B, H, S] in log2 units."""
    sm_scale = (1.0 / dim) ** 0.5
    groups = heads // kv_heads
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def capped(Q: T.Tensor([batch, heads, seq_len, dim], dtype), K: T.Tensor([batch, kv_heads, seq_len, dim], dtype),
               V: T.Tensor([batch, kv_heads, seq_len, dim], dtype), O: T.Tensor([batch, heads, seq_len, dim], dtype),
               LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            kvh = by // groups
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, kvh, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.tanh(acc_s[i, j] * (sm_scale / softcap)) * (softcap * LOG2E)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, kvh, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log2(l[i]) + m[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return capped


@tilecute.jit(out_idx=[3])
def fa_alibi_symmetric_cross(batch=1, heads=4, seq_q=100, seq_k=230, dim=64, block_M=64,
                             block_N=64, threads=128):
    """Non-causal cross attention (BSHD, float16) with a symmetric ALiBi bias whose slope is
    computed in the kernel from the head index, slope = 2^(-8 (h + 1) / H); the bias is
    -slope * |i - j| (``T.abs`` of an int difference, cast to float).  O float32."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"

    @T.prim_func
    def alibi(Q: T.Tensor([batch, seq_q, heads, dim], dtype), K: T.Tensor([batch, seq_k, heads, dim], dtype),
              V: T.Tensor([batch, seq_k, heads, dim], dtype), O: T.Tensor([batch, seq_q, heads, dim], accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            slope = T.alloc_var(accum)

            slope = T.exp2(-8.0 * T.cast(by + 1, accum) / heads)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_k, block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        k * block_N + j < seq_k,
                        (acc_s[i, j] * sm_scale
                         - slope * T.cast(T.abs(bx * block_M + i - k * block_N - j), accum)) * LOG2E,
                        -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return alibi


# ---- variable length, paged prefill, decode -----------------------------------------------------
@tilecute.jit(out_idx=[5])
def varlen_padded_loads(batch=3, heads=2, total_q=190, total_k=260, max_q=100, dim=64, block_M=64,
                        block_N=64, threads=128):
    """Packed variable-length, non-causal attention (float16, [tokens, H, D]) whose tiles
    are loaded element by element into shared memory with ``T.if_then_else`` padding (zeros
    past the sequence's end: the other sequence's rows are never read); the sequence bounds
    are ``T.alloc_var`` scalars read from cu_seqlens; keys past the end are masked.  O
    float16, rows past the end not written."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def varlen(Q: T.Tensor([total_q, heads, dim], dtype), K: T.Tensor([total_k, heads, dim], dtype),
               V: T.Tensor([total_k, heads, dim], dtype), cu_q: T.Tensor([batch + 1], "int32"),
               cu_k: T.Tensor([batch + 1], "int32"), O: T.Tensor([total_q, heads, dim], dtype)):
        with T.Kernel(T.ceildiv(max_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            q_start = T.alloc_var("int32")
            q_end = T.alloc_var("int32")
            k_start = T.alloc_var("int32")
            k_end = T.alloc_var("int32")

            q_start = cu_q[bz]
            q_end = cu_q[bz + 1]
            k_start = cu_k[bz]
            k_end = cu_k[bz + 1]
            q_len = q_end - q_start
            k_len = k_end - k_start

            if bx * block_M < q_len:
                for i, d in T.Parallel(block_M, dim):
                    q_s[i, d] = T.if_then_else(q_start + bx * block_M + i < q_end,
                                               Q[q_start + bx * block_M + i, by, d], 0)
                T.fill(acc_o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(accum))
                for k in T.Pipelined(T.ceildiv(k_len, block_N), num_stages=1):
                    for j, d in T.Parallel(block_N, dim):
                        k_s[j, d] = T.if_then_else(k_start + k * block_N + j < k_end,
                                                   K[k_start + k * block_N + j, by, d], 0)
                        v_s[j, d] = T.if_then_else(k_start + k * block_N + j < k_end,
                                                   V[k_start + k * block_N + j, by, d], 0)
                    T.clear(acc_s)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < k_len, acc_s[i, j] * scale,
                                                     -T.infinity(accum))
                    T.copy(m, m_prev)
                    T.reduce_max(acc_s, m, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        r_scale[i] = T.exp2(m_prev[i] - m[i])
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                    T.reduce_sum(acc_s, r_sum, dim=1)
                    for i in T.Parallel(block_M):
                        l[i] = l[i] * r_scale[i] + r_sum[i]
                    T.copy(acc_s, acc_s_cast)
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] *= r_scale[i]
                    T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
                for i, d in T.Parallel(block_M, dim):
                    if q_start + bx * block_M + i < q_end:
                        O[q_start + bx * block_M + i, by, d] = acc_o[i, d] / l[i]
    return varlen


@tilecute.jit(out_idx=[5])
def paged_prefill_block_table(batch=2, seq_q=70, heads=4, kv_heads=2, dim=64, page=64, num_pages=16,
                              max_pages=5, block_M=64, threads=128):
    """Chunked prefill over a paged KV cache (float16): sequence b holds ctx_lens[b] tokens
    in the pages block_table[b, :], the last seq_q of them being this chunk's queries (BSHD
    Q).  Causal with the offset ctx_len - seq_q; a key tile is one page (block_N = page),
    copied with ``T.copy(Kc[page_id, :, kv_head, :], k_s)``; GQA (heads // kv_heads query
    heads a KV head).  O float16."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    block_N = page
    groups = heads // kv_heads

    @T.prim_func
    def prefill(Q: T.Tensor([batch, seq_q, heads, dim], dtype),
                Kc: T.Tensor([num_pages, page, kv_heads, dim], dtype),
                Vc: T.Tensor([num_pages, page, kv_heads, dim], dtype),
                block_table: T.Tensor([batch, max_pages], "int32"), ctx_lens: T.Tensor([batch], "int32"),
                O: T.Tensor([batch, seq_q, heads, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            ctx = ctx_lens[bz]
            off = ctx - seq_q
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n_pages = T.min(T.ceildiv(ctx, block_N), T.ceildiv((bx + 1) * block_M + off, block_N))
            for k in T.Pipelined(n_pages, num_stages=2):
                page_id = block_table[bz, k]
                T.copy(Kc[page_id, :, by // groups, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j <= bx * block_M + i + off) and (k * block_N + j < ctx),
                        acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(Vc[page_id, :, by // groups, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return prefill


@tilecute.jit(out_idx=[4])
def mqa_decode_head_group(batch=3, heads=12, max_len=300, dim=128, block_H=16, block_N=64, threads=128):
    """MQA decode (bfloat16): one query per head, one key / value head for all of them
    ([B, S, D]), the whole head group in one block (heads padded to block_H: the padded
    rows read past Q's heads as zeros through ``T.copy``'s bounds and are never written),
    per-sequence lengths from a tensor.  O bfloat16 [B, H, D]."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def mqa(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, max_len, dim], dtype),
            V: T.Tensor([batch, max_len, dim], dtype), seqlens: T.Tensor([batch], "int32"),
            O: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(batch, threads=threads) as bz:
            q_s = T.alloc_shared([block_H, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum)
            m = T.alloc_fragment([block_H], accum)
            m_prev = T.alloc_fragment([block_H], accum)
            r_scale = T.alloc_fragment([block_H], accum)
            r_sum = T.alloc_fragment([block_H], accum)
            l = T.alloc_fragment([block_H], accum)

            seqlen = seqlens[bz]
            T.copy(Q[bz, 0:block_H, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for h, j in T.Parallel(block_H, block_N):
                    acc_s[h, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[h, j] * scale, -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for h in T.Parallel(block_H):
                    r_scale[h] = T.exp2(m_prev[h] - m[h])
                for h, j in T.Parallel(block_H, block_N):
                    acc_s[h, j] = T.exp2(acc_s[h, j] - m[h])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for h in T.Parallel(block_H):
                    l[h] = l[h] * r_scale[h] + r_sum[h]
                T.copy(acc_s, acc_s_cast)
                for h, d in T.Parallel(block_H, dim):
                    acc_o[h, d] *= r_scale[h]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for h, d in T.Parallel(block_H, dim):
                if h < heads:
                    O[bz, h, d] = acc_o[h, d] / l[h]
    return mqa


@tilecute.jit(out_idx=[4, 5])
def split_kv_decode_empty_splits(batch=3, heads=8, kv_heads=2, max_len=300, dim=64, num_split=4,
                                 block_H=16, block_N=32, threads=128):
    """Split-KV GQA decode, first pass (float16 in, float32 partials): block (split s, KV head
    g, batch b) covers keys [s * split_len, (s + 1) * split_len) of the sequence's
    seqlens[b]; a split past the sequence's end runs no tile and writes O 0 and LSE -inf
    (the program's guard).  Opart [B, H, splits, D]; LSEpart [B, H, splits] in log2 units."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    groups = heads // kv_heads
    split_len = block_N * (((max_len + block_N - 1) // block_N + num_split - 1) // num_split)

    @T.prim_func
    def partial(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, max_len, kv_heads, dim], dtype),
                V: T.Tensor([batch, max_len, kv_heads, dim], dtype), seqlens: T.Tensor([batch], "int32"),
                Opart: T.Tensor([batch, heads, num_split, dim], accum),
                LSEpart: T.Tensor([batch, heads, num_split], accum)):
        with T.Kernel(num_split, kv_heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_H, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum)
            m = T.alloc_fragment([block_H], accum)
            m_prev = T.alloc_fragment([block_H], accum)
            r_scale = T.alloc_fragment([block_H], accum)
            r_sum = T.alloc_fragment([block_H], accum)
            l = T.alloc_fragment([block_H], accum)

            seqlen = seqlens[bz]
            start = bx * split_len
            n_keys = T.max(0, T.min(seqlen - start, split_len))
            for h, d in T.Parallel(block_H, dim):
                q_s[h, d] = T.if_then_else(h < groups, Q[bz, by * groups + h, d], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(n_keys, block_N), num_stages=2):
                T.copy(K[bz, start + k * block_N:start + (k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True)
                for h, j in T.Parallel(block_H, block_N):
                    acc_s[h, j] = T.if_then_else(k * block_N + j < n_keys, acc_s[h, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for h in T.Parallel(block_H):
                    r_scale[h] = T.exp2(m_prev[h] * scale - m[h] * scale)
                for h, j in T.Parallel(block_H, block_N):
                    acc_s[h, j] = T.exp2(acc_s[h, j] * scale - m[h] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for h in T.Parallel(block_H):
                    l[h] = l[h] * r_scale[h] + r_sum[h]
                T.copy(acc_s, acc_s_cast)
                for h, d in T.Parallel(block_H, dim):
                    acc_o[h, d] *= r_scale[h]
                T.copy(V[bz, start + k * block_N:start + (k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for h, d in T.Parallel(block_H, dim):
                if h < groups:
                    Opart[bz, by * groups + h, bx, d] = T.if_then_else(l[h] > 0, acc_o[h, d] / l[h], 0)
            for h in T.Parallel(block_H):
                if h < groups:
                    LSEpart[bz, by * groups + h, bx] = T.if_then_else(
                        l[h] > 0, T.log2(l[h]) + m[h] * scale, -T.infinity(accum))
    return partial


@tilecute.jit(out_idx=[2])
def split_kv_combine_local(batch=3, heads=8, num_split=4, dim=64):
    """The split-KV combine (float32 in, float16 out): one block a (head, batch), one thread
    a dim element; the splits' log2 LSEs are reduced in ``T.alloc_local`` scalars (their
    max, then the sum of 2^(lse - max)), splits with LSE -inf weigh 0."""
    accum = "float"

    @T.prim_func
    def combine(Opart: T.Tensor([batch, heads, num_split, dim], accum),
                LSEpart: T.Tensor([batch, heads, num_split], accum),
                O: T.Tensor([batch, heads, dim], "float16")):
        with T.Kernel(heads, batch, threads=dim) as (bx, by):
            lse_max = T.alloc_local([1], accum)
            denom = T.alloc_local([1], accum)
            acc = T.alloc_local([1], accum)
            d = T.get_thread_binding()
            lse_max[0] = -T.infinity(accum)
            for s in T.serial(num_split):
                lse_max[0] = T.max(lse_max[0], LSEpart[by, bx, s])
            denom[0] = 0
            acc[0] = 0
            for s in T.serial(num_split):
                w = T.exp2(LSEpart[by, bx, s] - lse_max[0])
                denom[0] += w
                acc[0] += w * Opart[by, bx, s, d]
            O[by, bx, d] = T.cast(acc[0] / denom[0], "float16")
    return combine


# ---- schedules a user writes: the MMA overlap through order / stage / group; a plain order -------
@tilecute.jit(out_idx=[3])
def fa_user_overlap_groups(batch=1, heads=2, seq_len=300, dim=128, block_M=128, block_N=128,
                           threads=256, causal=False, extent_var=False):
    """Attention (BSHD, float16) with the user's own MMA-overlap schedule: five groups (the K
    copy; clear + QK GEMM; the whole softmax with the output rescale; the V copy; the PV
    GEMM), the QK GEMM of step k issued first, then the PV GEMM of step k - 1 (stage 1), then
    step k's softmax.  Causal or not; the key tail masked.  ``extent_var``: the step count
    kept in a ``T.alloc_var`` (which a producer warpgroup cannot read: refused by name)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def overlap(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            n_var = T.alloc_var("int32")

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if causal \
                else T.ceildiv(seq_len, block_N)
            if extent_var:
                n_var = n
            for k in T.Pipelined(n_var if extent_var else n, num_stages=2, group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10], [11], [12]],
                                 stage=[-1, 0, 0, -1, 1], order=[-1, 0, 2, -1, 1]):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    if causal:
                        acc_s[i, j] = T.if_then_else(
                            (bx * block_M + i >= k * block_N + j) and (k * block_N + j < seq_len),
                            0, -T.infinity(accum))
                    else:
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return overlap


@tilecute.jit(out_idx=[3])
def fa_one_stage_plain_order(batch=1, heads=2, seq_len=200, dim=64, block_M=64, block_N=64,
                             threads=128):
    """Attention (BHSD, bfloat16) through ``T.Pipelined(n, num_stages=1, stage=[0] * 15,
    order=[...])``: one stage, the statements issued in a user's order that moves the
    output rescale and the V copy ahead of the row-sum bookkeeping (a legal reordering: they
    read nothing it writes)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def plain(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
              O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=1, stage=[0] * 15,
                                 order=[0, 1, 2, 3, 4, 5, 6, 10, 11, 7, 8, 9, 12, 13, 14]):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)  # 0
                T.clear(acc_s)  # 1
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)  # 2
                for i, j in T.Parallel(block_M, block_N):  # 3
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)  # 4
                T.reduce_max(acc_s, m, dim=1, clear=False)  # 5
                for i in T.Parallel(block_M):  # 6
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):  # 7 (issued 10th)
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)  # 8 (issued 11th)
                for i, j in T.Parallel(block_M, dim):  # 9 (issued 7th)
                    acc_o[i, j] *= r_scale[i]
                for i in T.Parallel(block_M):  # 10 (issued 8th)
                    l[i] = l[i] * r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)  # 11 (issued 9th)
                T.copy(acc_s, acc_s_cast)  # 12
                for i in T.Parallel(block_M):
                    l[i] += r_sum[i]
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return plain


# ---- backward over natural-log LSEs ------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def bwd_delta_rowsum(batch=2, seq_len=300, heads=2, dim=64, block_M=64):
    """Backward preprocessing (BSHD, float16 in): Delta[b, h, i] = sum_d dO[b, i, h, d] *
    O[b, i, h, d] in float32, a fragment product reduced with ``T.reduce_sum``; the tail rows
    not written."""
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def prep(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype), Delta: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            o = T.alloc_fragment([block_M, dim], accum)
            do = T.alloc_fragment([block_M, dim], accum)
            prod = T.alloc_fragment([block_M, dim], accum)
            delta = T.alloc_fragment([block_M], accum)
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, d in T.Parallel(block_M, dim):
                prod[i, d] = o[i, d] * do[i, d]
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block_M:(bx + 1) * block_M])
    return prep


@tilecute.jit(out_idx=[7, 8])
def bwd_kv_blocks_atomic_dq(batch=1, heads=2, seq_len=200, dim=64, block_M=64, block_N=64, threads=128):
    """FlashAttention backward, one block a key tile (BHSD, float16, non-causal): P^T is
    recomputed from the natural-log LSE with ``T.exp`` (scores kept transposed, K Q^T),
    dS^T = P^T (dP^T - Delta); dV and dK accumulate over the query tiles and are written
    per block (float16); dQ = dS K goes out by ``T.atomic_add`` of the tile into a float32
    dQ the caller zeroes (an input: out_idx outputs start uninitialised).  Query and key
    tails are masked in P^T."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            dO: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum),
            Delta: T.Tensor([batch, heads, seq_len], accum), dQ: T.Tensor(shape, accum),
            dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_N), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            q_s = T.alloc_shared([block_M, dim], dtype)
            do_s = T.alloc_shared([block_M, dim], dtype)
            lse_s = T.alloc_shared([block_M], accum)
            delta_s = T.alloc_shared([block_M], accum)
            ds_s = T.alloc_shared([block_N, block_M], dtype)
            s_t = T.alloc_fragment([block_N, block_M], accum)
            dp_t = T.alloc_fragment([block_N, block_M], accum)
            p_cast = T.alloc_fragment([block_N, block_M], dtype)
            ds_cast = T.alloc_fragment([block_N, block_M], dtype)
            dq = T.alloc_fragment([block_M, dim], accum)
            dk = T.alloc_fragment([block_N, dim], accum)
            dv = T.alloc_fragment([block_N, dim], accum)

            T.copy(K[bz, by, bx * block_N:(bx + 1) * block_N, :], k_s)
            T.copy(V[bz, by, bx * block_N:(bx + 1) * block_N, :], v_s)
            T.clear(dk)
            T.clear(dv)
            for t in T.Pipelined(T.ceildiv(seq_len, block_M), num_stages=2):
                T.copy(Q[bz, by, t * block_M:(t + 1) * block_M, :], q_s)
                T.copy(dO[bz, by, t * block_M:(t + 1) * block_M, :], do_s)
                T.copy(LSE[bz, by, t * block_M:(t + 1) * block_M], lse_s)
                T.copy(Delta[bz, by, t * block_M:(t + 1) * block_M], delta_s)
                T.clear(s_t)
                T.gemm(k_s, q_s, s_t, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for j, i in T.Parallel(block_N, block_M):
                    s_t[j, i] = T.if_then_else(
                        (t * block_M + i < seq_len) and (bx * block_N + j < seq_len),
                        T.exp(s_t[j, i] * sm_scale - lse_s[i]), 0)
                T.clear(dp_t)
                T.gemm(v_s, do_s, dp_t, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(s_t, p_cast)
                T.gemm(p_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                for j, i in T.Parallel(block_N, block_M):
                    ds_cast[j, i] = s_t[j, i] * (dp_t[j, i] - delta_s[i]) * sm_scale
                T.gemm(ds_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(ds_cast, ds_s)
                T.clear(dq)
                T.gemm(ds_s, k_s, dq, transpose_A=True)
                T.atomic_add(dQ[bz, by, t * block_M:(t + 1) * block_M, :], dq)
            T.copy(dk, dK[bz, by, bx * block_N:(bx + 1) * block_N, :])
            T.copy(dv, dV[bz, by, bx * block_N:(bx + 1) * block_N, :])
    return bwd


# ---- more forward shapes: look-ahead windows, two query tiles a block, packed GQA heads ----------
@tilecute.jit(out_idx=[3, 4])
def fa_lookahead_window_empty_rows(batch=1, heads=2, seq_len=230, dim=64, ahead=40, block_M=64,
                                   block_N=64, threads=128):
    """Look-ahead attention (BHSD, float16): query i sees keys i + 1 .. i + ahead only (strictly
    after it), so the last row sees none.  The key-tile range is cut with ``T.max`` /
    ``T.min`` (empty for no block here, but the last block's last rows have no key); the
    program guards those rows: O 0 and LSE -inf (natural log)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def ahead_attn(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                   O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            o_s = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            lo = T.min((bx * block_M + 1) // block_N, T.ceildiv(seq_len, block_N))
            hi = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M + ahead, block_N))
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j > bx * block_M + i) and (k * block_N + j <= bx * block_M + i + ahead)
                        and (k * block_N + j < seq_len), acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] = T.if_then_else(l[i] == 0, 0, acc_o[i, j] / l[i])
            T.copy(acc_o, o_s)
            T.copy(o_s, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_len:
                    LSE[bz, by, bx * block_M + i] = T.if_then_else(
                        l[i] == 0, -T.infinity(accum), (T.log2(l[i]) + m[i] * scale) * LN2)
    return ahead_attn


@tilecute.jit(out_idx=[3])
def fa_causal_two_tiles_a_block(batch=1, heads=2, seq_len=300, dim=64, block_M=64, block_N=64,
                                threads=128, tiles=2):
    """Causal attention (BSHD, float16) where each block runs ``tiles`` query tiles one after
    the other (``for t in T.serial(tiles)`` around the pipelined loop), the block's tiles
    taken as bx and bx + grid (a light tile paired with a heavy one); the fragments are
    re-initialised per tile, and a tile past the end runs no key tile."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]
    n_q = (seq_len + block_M - 1) // block_M
    grid = (n_q + tiles - 1) // tiles

    @T.prim_func
    def two(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            O: T.Tensor(shape, dtype)):
        with T.Kernel(grid, heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            for t in T.serial(tiles):
                qt = bx + t * grid
                if qt < n_q:
                    T.copy(Q[bz, qt * block_M:(qt + 1) * block_M, by, :], q_s)
                    T.fill(acc_o, 0)
                    T.fill(l, 0)
                    T.fill(m, -T.infinity(accum))
                    for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((qt + 1) * block_M, block_N)),
                                         num_stages=2):
                        T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                        T.clear(acc_s)
                        T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(
                                (qt * block_M + i >= k * block_N + j) and (k * block_N + j < seq_len),
                                acc_s[i, j], -T.infinity(accum))
                        T.copy(m, m_prev)
                        T.reduce_max(acc_s, m, dim=1, clear=False)
                        for i in T.Parallel(block_M):
                            r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                        T.reduce_sum(acc_s, r_sum, dim=1)
                        for i in T.Parallel(block_M):
                            l[i] = l[i] * r_scale[i] + r_sum[i]
                        T.copy(acc_s, acc_s_cast)
                        for i, j in T.Parallel(block_M, dim):
                            acc_o[i, j] *= r_scale[i]
                        T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                        T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] /= l[i]
                    T.copy(acc_o, O[bz, qt * block_M:(qt + 1) * block_M, by, :])
    return two


@tilecute.jit(out_idx=[3])
def fa_gqa_packed_group_rows(batch=1, seq_len=100, heads=8, kv_heads=2, dim=64, block_N=64,
                             rows=16, threads=128):
    """Causal GQA (BSHD, bfloat16) with a KV head's whole query group packed into one tile:
    tile row r is (position bx * rows + r // groups, head g * groups + r % groups), so the
    K / V tiles are loaded once for the group.  Q is gathered into shared memory with a
    ``T.Parallel`` (zeros past the end), the causal mask uses the row's position, and the
    output is scattered back with a guard."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    groups = heads // kv_heads
    block_M = rows * groups

    @T.prim_func
    def packed(Q: T.Tensor([batch, seq_len, heads, dim], dtype), K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
               V: T.Tensor([batch, seq_len, kv_heads, dim], dtype), O: T.Tensor([batch, seq_len, heads, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_len, rows), kv_heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            for r, d in T.Parallel(block_M, dim):
                q_s[r, d] = T.if_then_else(bx * rows + r // groups < seq_len,
                                           Q[bz, bx * rows + r // groups, by * groups + r % groups, d], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(T.min((bx + 1) * rows, seq_len), block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for r, j in T.Parallel(block_M, block_N):
                    acc_s[r, j] = T.if_then_else(k * block_N + j <= bx * rows + r // groups, acc_s[r, j],
                                                 -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for r in T.Parallel(block_M):
                    r_scale[r] = T.exp2(m_prev[r] * scale - m[r] * scale)
                for r, j in T.Parallel(block_M, block_N):
                    acc_s[r, j] = T.exp2(acc_s[r, j] * scale - m[r] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for r in T.Parallel(block_M):
                    l[r] = l[r] * r_scale[r] + r_sum[r]
                T.copy(acc_s, acc_s_cast)
                for r, d in T.Parallel(block_M, dim):
                    acc_o[r, d] *= r_scale[r]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for r, d in T.Parallel(block_M, dim):
                if bx * rows + r // groups < seq_len:
                    O[bz, bx * rows + r // groups, by * groups + r % groups, d] = acc_o[r, d] / l[r]
    return packed


@tilecute.jit(out_idx=[4])
def fa_causal_heavy_first_swizzled(batch=2, heads=3, seq_len=260, dim=64, block_M=64, block_N=64,
                                   threads=128):
    """Causal attention (BHSD, float16) that runs the heavy query tiles first (tile index
    ceildiv(S, bm) - 1 - bx) under ``T.use_swizzle``; a per-key additive bias vector
    [B, S] (float32, natural units) is staged in a one-dimensional shared tile and added to
    each row (a broadcast along the rows)."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]
    n_q = (seq_len + block_M - 1) // block_M

    @T.prim_func
    def heavy(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
              KeyBias: T.Tensor([batch, seq_len], accum), O: T.Tensor(shape, dtype)):
        with T.Kernel(n_q, heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            bias_s = T.alloc_shared([block_N], accum)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.use_swizzle(panel_size=4)
            qt = n_q - 1 - bx
            T.copy(Q[bz, by, qt * block_M:(qt + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((qt + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.copy(KeyBias[bz, k * block_N:(k + 1) * block_N], bias_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (qt * block_M + i >= k * block_N + j) and (k * block_N + j < seq_len),
                        (acc_s[i, j] * sm_scale + bias_s[j]) * LOG2E, -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, qt * block_M:(qt + 1) * block_M, :])
    return heavy


# ---- K stored transposed, Q in registers, prefix-LM masks, a causal backward from the diagonal ---
@tilecute.jit(out_idx=[3])
def fa_k_transposed_bhds(batch=1, heads=2, seq_len=200, dim=64, block_M=64, block_N=64, threads=128,
                         num_stages=3, policy="FullRow"):
    """Non-causal attention (float16) whose keys are stored transposed, K [B, H, D, S] (as a
    KV cache laid out for the QK GEMM): the key tile is ``K[b, h, :, k*bn:(k+1)*bn]`` and the
    GEMM runs without transpose_B; the key tail is masked.  Three stages.  ``policy``: the
    GEMMs' warp policy (FullCol / Square split the key and value columns over warps, so the
    row statistics meet across them)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def kt(Q: T.Tensor([batch, heads, seq_len, dim], dtype), K: T.Tensor([batch, heads, dim, seq_len], dtype),
           V: T.Tensor([batch, heads, seq_len, dim], dtype), O: T.Tensor([batch, heads, seq_len, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            kt_s = T.alloc_shared([dim, block_N], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(K[bz, by, :, k * block_N:(k + 1) * block_N], kt_s)
                T.gemm(q_s, kt_s, acc_s, clear_accum=True, policy=getattr(T.GemmWarpPolicy, policy))
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=getattr(T.GemmWarpPolicy, policy))
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return kt


@tilecute.jit(out_idx=[4])
def fa_prefix_lm_q_registers(batch=2, heads=2, seq_len=190, dim=64, block_M=64, block_N=64, threads=128):
    """Prefix-LM attention (BSHD, bfloat16): the first prefix_len[b] positions see each other
    (bidirectional), later ones are causal; the prefix length is read per sequence, the loop
    runs to the larger of the causal range and the prefix's tiles.  Q is held in registers
    (``T.copy`` into a fragment, the QK GEMM's A operand) and pre-scaled there."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def plm(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            prefix_len: T.Tensor([batch], "int32"), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_f = T.alloc_fragment([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            plen = prefix_len[bz]
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_f)
            for i, d in T.Parallel(block_M, dim):
                q_f[i, d] = q_f[i, d] * scale
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n = T.min(T.ceildiv(seq_len, block_N),
                      T.max(T.ceildiv((bx + 1) * block_M, block_N), T.ceildiv(plen, block_N)))
            for k in T.Pipelined(n, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_f, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        ((k * block_N + j <= bx * block_M + i) or (k * block_N + j < plen))
                        and (k * block_N + j < seq_len), acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return plm


@tilecute.jit(out_idx=[7, 8])
def bwd_causal_from_diagonal(batch=1, heads=2, seq_len=160, dim=64, block_M=32, block_N=64, threads=128):
    """Causal FlashAttention backward (BSHD, float16), one block a key tile of block_N keys,
    its query tiles (block_M rows, a different size) starting at the diagonal:
    ``T.Pipelined(bx * block_N // block_M, ceildiv(S, block_M))``.  Log2-unit LSE
    (P = 2^(s * scale * log2 e - lse)); dV, dK per block, dQ by ``T.atomic_add`` of the
    tile into a float32 dQ the caller zeroes.  The Delta / LSE tiles are read straight from global memory in the
    ``T.Parallel`` (no shared staging), guarded by the sequence's end."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            dO: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum),
            Delta: T.Tensor([batch, heads, seq_len], accum), dQ: T.Tensor(shape, accum),
            dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_N), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            q_s = T.alloc_shared([block_M, dim], dtype)
            do_s = T.alloc_shared([block_M, dim], dtype)
            ds_s = T.alloc_shared([block_N, block_M], dtype)
            s_t = T.alloc_fragment([block_N, block_M], accum)
            dp_t = T.alloc_fragment([block_N, block_M], accum)
            p_cast = T.alloc_fragment([block_N, block_M], dtype)
            ds_cast = T.alloc_fragment([block_N, block_M], dtype)
            dq = T.alloc_fragment([block_M, dim], accum)
            dk = T.alloc_fragment([block_N, dim], accum)
            dv = T.alloc_fragment([block_N, dim], accum)
            dk_s = T.alloc_shared([block_N, dim], dtype)

            T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], k_s)
            T.copy(V[bz, bx * block_N:(bx + 1) * block_N, by, :], v_s)
            T.clear(dk)
            T.clear(dv)
            for t in T.Pipelined(bx * block_N // block_M, T.ceildiv(seq_len, block_M), num_stages=2):
                T.copy(Q[bz, t * block_M:(t + 1) * block_M, by, :], q_s)
                T.copy(dO[bz, t * block_M:(t + 1) * block_M, by, :], do_s)
                T.gemm(k_s, q_s, s_t, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for j, i in T.Parallel(block_N, block_M):
                    s_t[j, i] = T.if_then_else(
                        (t * block_M + i >= bx * block_N + j) and (t * block_M + i < seq_len),
                        T.exp2(s_t[j, i] * scale - LSE[bz, by, t * block_M + i]), 0)
                T.gemm(v_s, do_s, dp_t, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(s_t, p_cast)
                T.gemm(p_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                for j, i in T.Parallel(block_N, block_M):
                    ds_cast[j, i] = T.if_then_else(
                        t * block_M + i < seq_len,
                        s_t[j, i] * (dp_t[j, i] - Delta[bz, by, t * block_M + i]) * sm_scale, 0)
                T.gemm(ds_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(ds_cast, ds_s)
                T.gemm(ds_s, k_s, dq, transpose_A=True, clear_accum=True)
                T.atomic_add(dQ[bz, t * block_M:(t + 1) * block_M, by, :], dq)
            T.copy(dv, dV[bz, bx * block_N:(bx + 1) * block_N, by, :])
            T.copy(dk, dk_s)
            T.copy(dk_s, dK[bz, bx * block_N:(bx + 1) * block_N, by, :])
    return bwd


@tilecute.jit(out_idx=[7, 8])
def bwd_row_scores_fragment_stats(batch=1, heads=2, seq_len=180, dim=64, block_M=64, block_N=64,
                                  threads=128, causal=True):
    """FlashAttention backward (BHSD, bfloat16), one block a key tile, the scores kept in
    the forward's orientation (S = Q K^T, [block_M, block_N]); the LSE (natural) and Delta
    rows are copied into row fragments (``T.copy`` global -> fragment) and indexed by the
    score rows; P and dS go through shared memory for the ``transpose_A`` GEMMs
    (dV += P^T dO, dK += dS^T Q) and dQ = dS K leaves by ``T.atomic_add``."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "bfloat16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            dO: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum),
            Delta: T.Tensor([batch, heads, seq_len], accum), dQ: T.Tensor(shape, accum),
            dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_N), heads, batch, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            q_s = T.alloc_shared([block_M, dim], dtype)
            do_s = T.alloc_shared([block_M, dim], dtype)
            p_s = T.alloc_shared([block_M, block_N], dtype)
            ds_s = T.alloc_shared([block_M, block_N], dtype)
            s = T.alloc_fragment([block_M, block_N], accum)
            dp = T.alloc_fragment([block_M, block_N], accum)
            lse_f = T.alloc_fragment([block_M], accum)
            delta_f = T.alloc_fragment([block_M], accum)
            dq = T.alloc_fragment([block_M, dim], accum)
            dk = T.alloc_fragment([block_N, dim], accum)
            dv = T.alloc_fragment([block_N, dim], accum)

            T.copy(K[bz, by, bx * block_N:(bx + 1) * block_N, :], k_s)
            T.copy(V[bz, by, bx * block_N:(bx + 1) * block_N, :], v_s)
            T.clear(dk)
            T.clear(dv)
            start = (bx * block_N) // block_M if causal else 0
            for t in T.Pipelined(start, T.ceildiv(seq_len, block_M), num_stages=2):
                T.copy(Q[bz, by, t * block_M:(t + 1) * block_M, :], q_s)
                T.copy(dO[bz, by, t * block_M:(t + 1) * block_M, :], do_s)
                T.copy(LSE[bz, by, t * block_M:(t + 1) * block_M], lse_f)
                T.copy(Delta[bz, by, t * block_M:(t + 1) * block_M], delta_f)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(do_s, v_s, dp, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    if causal:
                        s[i, j] = T.if_then_else(
                            (t * block_M + i >= bx * block_N + j) and (t * block_M + i < seq_len)
                            and (bx * block_N + j < seq_len), T.exp(s[i, j] * sm_scale - lse_f[i]), 0)
                    else:
                        s[i, j] = T.if_then_else(
                            (t * block_M + i < seq_len) and (bx * block_N + j < seq_len),
                            T.exp(s[i, j] * sm_scale - lse_f[i]), 0)
                T.copy(s, p_s)
                for i, j in T.Parallel(block_M, block_N):
                    dp[i, j] = s[i, j] * (dp[i, j] - delta_f[i]) * sm_scale
                T.copy(dp, ds_s)
                T.gemm(p_s, do_s, dv, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(ds_s, q_s, dk, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(ds_s, k_s, dq, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.atomic_add(dQ[bz, by, t * block_M:(t + 1) * block_M, :], dq)
            T.copy(dv, dV[bz, by, bx * block_N:(bx + 1) * block_N, :])
            T.copy(dk, dK[bz, by, bx * block_N:(bx + 1) * block_N, :])
    return bwd


# ---- FlexAttention-like score / mask modifiers as module-level macros ---------------------------
@T.macro
def _score_mod(acc_s, slopes, bz, head, q0, k0, softcap: float, sm_scale: float):
    """softcap * tanh(s * sm_scale / softcap) + slope[head] * (k - q), in log2 units."""
    for i, j in T.Parallel(acc_s.shape[0], acc_s.shape[1]):
        acc_s[i, j] = (T.tanh(acc_s[i, j] * (sm_scale / softcap)) * softcap
                       + slopes[head] * T.cast(k0 + j - q0 - i, "float32")) * LOG2E


@T.macro
def _mask_mod(acc_s, doc, bz, q0, k0, seq_len: int):
    """Causal within a document (doc ids per position); keys past the end masked."""
    for i, j in T.Parallel(acc_s.shape[0], acc_s.shape[1]):
        acc_s[i, j] = T.if_then_else(
            (k0 + j <= q0 + i) and (k0 + j < seq_len) and (q0 + i < seq_len)
            and (doc[bz, T.min(k0 + j, seq_len - 1)] == doc[bz, T.min(q0 + i, seq_len - 1)]),
            acc_s[i, j], -T.infinity("float32"))


@tilecute.jit(out_idx=[5, 6])
def fa_flex_macros(batch=2, heads=2, seq_len=220, dim=64, softcap=20.0, block_M=64, block_N=64, threads=128):
    """FlexAttention-like forward (BSHD, float16) whose score modifier (soft-cap plus a
    per-head linear position bias from a slopes tensor) and mask modifier (causal within a
    document, doc ids per position read from global memory) are ``T.macro``s defined at
    module level, called with buffers, indices and Python floats.  Every row sees itself,
    but a row of a later document sees no key of the earlier tiles: its running max stays
    -inf there, so it is guarded (a max of -inf counts as 0, as TileLang's flex examples
    guard it; unguarded, exp2(-inf - -inf) is NaN, in TileLang too).  O float16; LSE
    float32 natural log."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def flex(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Slopes: T.Tensor([heads], accum), Doc: T.Tensor([batch, seq_len], "int32"),
             O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                _score_mod(acc_s, Slopes, bz, by, bx * block_M, k * block_N, softcap, sm_scale)
                _mask_mod(acc_s, Doc, bz, bx * block_M, k * block_N, seq_len)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m[i] = T.if_then_else(m[i] == -T.infinity(accum), 0.0, m[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = (m[i] + T.log2(l[i])) * LN2
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return flex


@tilecute.jit(out_idx=[3])
def fa_window_inplace_guard(batch=1, heads=2, seq_len=260, dim=64, window=70, block_M=64, block_N=32,
                            threads=128):
    """Causal sliding-window attention (BHSD, float16): query i sees keys i - window + 1 .. i.
    The running max is kept in TileLang's newer form (the previous max saved, the max filled
    with -inf, ``T.reduce_max(..., clear=False)``, then ``T.max`` with the previous one) and
    guarded in place (a max of -inf set to 0 and kept: a row whose first tiles are all
    masked).  ``T.Pipelined`` with no ``num_stages`` (a serial loop, TileLang's default)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def swa(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            start = T.max(0, bx * block_M - window + 1) // block_N
            end = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(start, end):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j <= bx * block_M + i) and (k * block_N + j > bx * block_M + i - window),
                        acc_s[i, j], -T.infinity(accum))
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_max[i] = T.if_then_else(scores_max[i] == -T.infinity(accum), 0, scores_max[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return swa


# ---- decode without a GEMM: dot products and reductions over plain fragments ---------------------
@tilecute.jit(out_idx=[4, 5])
def gqa_decode_no_gemm(batch=2, heads=8, kv_heads=2, max_len=300, dim=128, block_N=64, threads=128):
    """GQA decode (bfloat16) without ``T.gemm``: one block a (query head, sequence); the
    scores of a key tile are a ``T.Parallel`` product q[d] * K[j, d] reduced over d
    (``T.reduce_sum(..., dim=1)``), their max and sum reduced over j into one-element
    fragments (``dim=0`` of a 1-D fragment); the running max and sum are ``T.alloc_var``
    scalars and P V is another product reduced over j (``dim=0``).  Keys past the
    sequence's length (seqlens[b], at least 1) are masked.  O float32 [B, H, D]; LSE log2
    [B, H]."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    groups = heads // kv_heads

    @T.prim_func
    def decode(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, max_len, kv_heads, dim], dtype),
               V: T.Tensor([batch, max_len, kv_heads, dim], dtype), seqlens: T.Tensor([batch], "int32"),
               O: T.Tensor([batch, heads, dim], accum), LSE: T.Tensor([batch, heads], accum)):
        with T.Kernel(heads, batch, threads=threads) as (bx, by):
            q_f = T.alloc_fragment([dim], accum)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            prod = T.alloc_fragment([block_N, dim], accum)
            s = T.alloc_fragment([block_N], accum)
            mx = T.alloc_fragment([1], accum)
            ps = T.alloc_fragment([1], accum)
            o_part = T.alloc_fragment([dim], accum)
            acc_o = T.alloc_fragment([dim], accum)
            m = T.alloc_var(accum)
            m_new = T.alloc_var(accum)
            l = T.alloc_var(accum)

            seqlen = seqlens[by]
            for d in T.Parallel(dim):
                q_f[d] = T.cast(Q[by, bx, d], accum) * scale
            T.fill(acc_o, 0)
            m = -T.infinity(accum)
            l = 0
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[by, k * block_N:(k + 1) * block_N, bx // groups, :], k_s)
                T.copy(V[by, k * block_N:(k + 1) * block_N, bx // groups, :], v_s)
                for j, d in T.Parallel(block_N, dim):
                    prod[j, d] = q_f[d] * k_s[j, d]
                T.reduce_sum(prod, s, dim=1)
                for j in T.Parallel(block_N):
                    s[j] = T.if_then_else(k * block_N + j < seqlen, s[j], -T.infinity(accum))
                T.reduce_max(s, mx, dim=0)
                m_new = T.max(m, mx[0])
                for j in T.Parallel(block_N):
                    s[j] = T.exp2(s[j] - m_new)
                T.reduce_sum(s, ps, dim=0)
                l = l * T.exp2(m - m_new) + ps[0]
                for j, d in T.Parallel(block_N, dim):
                    prod[j, d] = s[j] * v_s[j, d]
                T.reduce_sum(prod, o_part, dim=0)
                for d in T.Parallel(dim):
                    acc_o[d] = acc_o[d] * T.exp2(m - m_new) + o_part[d]
                m = m_new
            for d in T.Parallel(dim):
                O[by, bx, d] = acc_o[d] / l
            LSE[by, bx] = T.log2(l) + m
    return decode


@tilecute.jit(out_idx=[2, 3])
def split_kv_combine_tile_reduce(batch=3, heads=8, num_split=4, dim=64, threads=128):
    """The split-KV combine written with tile reductions: the splits' log2 LSEs copied into a
    fragment, their max and the sum of 2^(lse - max) reduced over dim 0 into one-element
    fragments, the partial outputs weighted in a [splits, dim] fragment and reduced over the
    splits (dim 0).  O float16 [B, H, D]; LSE float32 [B, H] (log2)."""
    accum = "float"

    @T.prim_func
    def combine(Opart: T.Tensor([batch, heads, num_split, dim], accum),
                LSEpart: T.Tensor([batch, heads, num_split], accum),
                O: T.Tensor([batch, heads, dim], "float16"), LSE: T.Tensor([batch, heads], accum)):
        with T.Kernel(heads, batch, threads=threads) as (bx, by):
            lse_f = T.alloc_fragment([num_split], accum)
            w = T.alloc_fragment([num_split], accum)
            mx = T.alloc_fragment([1], accum)
            den = T.alloc_fragment([1], accum)
            o_f = T.alloc_fragment([num_split, dim], accum)
            o_sum = T.alloc_fragment([dim], accum)
            T.copy(LSEpart[by, bx, :], lse_f)
            T.reduce_max(lse_f, mx, dim=0)
            for s in T.Parallel(num_split):
                w[s] = T.exp2(lse_f[s] - mx[0])
            T.reduce_sum(w, den, dim=0)
            T.copy(Opart[by, bx, :, :], o_f)
            for s, d in T.Parallel(num_split, dim):
                o_f[s, d] *= w[s]
            T.reduce_sum(o_f, o_sum, dim=0)
            for d in T.Parallel(dim):
                O[by, bx, d] = o_sum[d] / den[0]
            LSE[by, bx] = T.log2(den[0]) + mx[0]
    return combine


@tilecute.jit(out_idx=[3, 4])
def fa_causal_reverse_key_order(batch=1, heads=2, seq_len=300, dim=64, block_M=64, block_N=64,
                                threads=128):
    """Causal attention (BSHD, float16) that walks the key tiles from the diagonal back to the
    first (tile n - 1 - k at step k, FlashAttention-3's order: the masked tiles first), the
    scores started at their mask (``T.if_then_else(c, 0, -inf)``, then an accumulating
    GEMM).  O float16; LSE float32 natural log."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def rev(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(n, num_stages=2):
                kt = n - 1 - k
                T.copy(K[bz, kt * block_N:(kt + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (bx * block_M + i >= kt * block_N + j) and (kt * block_N + j < seq_len),
                        0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, kt * block_N:(kt + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_len:
                    LSE[bz, by, bx * block_M + i] = (T.log2(l[i]) + m[i] * scale) * LN2
    return rev
