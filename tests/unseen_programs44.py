"""A forty-fourth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): the language surface TileLang's git HEAD (August 2026) uses in the examples and
tests written since March 2026 -- eager kernels (``T.const`` / ``T.empty`` / a returned
tuple) with ``T.annotate_pass_configs`` in the body, reducer v2 (``T.alloc_reducer`` /
``T.reducer_init`` / ``T.reducer_update`` / an out-of-place ``T.finalize_reducer``), multi-staged
shared buffers sliced per stage and fed by ``T.tma_copy(..., barrier=)`` under ``T.ws``, the
scan operators ``T.cumsum`` / ``T.cummax(reverse=True)``, block votes
(``T.syncthreads_count`` / ``T.syncthreads_or``) with ``T.ballot_sync`` and ``T.__ffs``, a
``T.alloc_global`` workspace shared by two launches, ``T.named_barrier_arrive`` with
``T.sync_threads(id, count)``, ``T.extract_lane`` on a two-lane load, ``T.copy(...,
prefer_instruction="cp_async")`` with ``T.annotate_min_blocks_per_sm``, ``T.unroll(explicit=
True)`` / ``T.unroll(unroll_factor=)`` with ``T.pow`` of a negative constant exponent and
``T.__exp``, ``T.annotate_safe_value`` on a ragged tile copy, and a dtype-changing ``T.view``
with ``T.transpose``.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs44.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- layer norm forward: two-pass statistics, Mean and Rstd saved for the backward ----------
@tilelang.jit(out_idx=[-3, -2, -1])
def layernorm_rows_with_stats(N=300, D=1024, blk_m=2, threads=256, eps=1e-5):
    """Y = (X - mean) * rstd * gamma + beta per row, the mean taken first and the variance
    from the centred values (not E[x^2] - mean^2); Mean and Rstd are outputs too."""
    accum = "float"

    @T.prim_func
    def main(X: T.Tensor((N, D), T.float16), gamma: T.Tensor((D,), T.float16),
             beta: T.Tensor((D,), T.float16), Y: T.Tensor((N, D), T.float16),
             Mean: T.Tensor((N,), accum), Rstd: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as bx:
            xs = T.alloc_shared((blk_m, D), T.float16)
            x = T.alloc_fragment((blk_m, D), accum)
            cen = T.alloc_fragment((blk_m, D), accum)
            tot = T.alloc_fragment((blk_m,), accum)
            var = T.alloc_fragment((blk_m,), accum)
            T.copy(X[bx * blk_m, 0], xs)
            for i, j in T.Parallel(blk_m, D):
                x[i, j] = T.Cast(accum, xs[i, j])
            T.reduce_sum(x, tot, dim=1)
            for i in T.Parallel(blk_m):
                tot[i] = tot[i] / T.Cast(accum, D)
            for i, j in T.Parallel(blk_m, D):
                cen[i, j] = (x[i, j] - tot[i]) * (x[i, j] - tot[i])
            T.reduce_sum(cen, var, dim=1)
            for i in T.Parallel(blk_m):
                var[i] = T.rsqrt(var[i] / T.Cast(accum, D) + T.Cast(accum, eps))
                if bx * blk_m + i < N:
                    Mean[bx * blk_m + i] = tot[i]
                    Rstd[bx * blk_m + i] = var[i]
            for i, j in T.Parallel(blk_m, D):
                xs[i, j] = T.Cast(T.float16, (x[i, j] - tot[i]) * var[i] * T.Cast(accum, gamma[j])
                                  + T.Cast(accum, beta[j]))
            T.copy(xs, Y[bx * blk_m, 0])

    return main


# ---- activation quantization to fp8 per 128-column group, eager, pass configs in the body ----
@tilelang.jit
def act_quant_fp8_groups(X, group=128, block_M=32):
    """Y = X / s rounded to float8_e4m3fn and s = max(amax, 1e-4) / 448 per row and group of
    ``group`` columns; the kernel asks for fast math itself (T.annotate_pass_configs)."""
    M, N = T.const("M, N")
    T.annotate_pass_configs({tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
    X: T.Tensor((M, N), T.bfloat16)
    Y = T.empty((M, N), T.float8_e4m3fn)
    S = T.empty((M, N // group), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), N // group, threads=128) as (bm, g):
        x = T.alloc_fragment((block_M, group), T.float32)
        amax = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bm * block_M, g * group], x)
        T.reduce_absmax(x, amax, dim=1)
        for i in T.Parallel(block_M):
            amax[i] = T.max(amax[i], 1e-4) / 448.0
            if bm * block_M + i < M:
                S[bm * block_M + i, g] = amax[i]
        for i, j in T.Parallel(block_M, group):
            if bm * block_M + i < M:
                Y[bm * block_M + i, g * group + j] = T.clamp(x[i, j] / amax[i], -448.0, 448.0)
    return Y, S


# ---- GEMV through reducer v2: per-row partials combined once, out of place --------------------
@tilelang.jit(out_idx=[2])
def gemv_reducer_v2(N=1024, K=2048, block_N=64, block_K=128):
    """y = A @ x with A (N, K) fp16: every (row, k) product of a tile goes to the row's
    reducer through T.reducer_update inside T.Parallel; T.finalize_reducer writes the sums
    to a separate fragment that is stored."""

    @T.prim_func
    def main(A: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16),
             y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block_N, threads=128) as bn:
            a_s = T.alloc_shared((block_N, block_K), T.float16)
            x_s = T.alloc_shared((block_K,), T.float16)
            acc = T.alloc_reducer((block_N,), T.float32, op="sum")
            out = T.alloc_fragment((block_N,), T.float32)
            T.reducer_init(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[bn * block_N, ko * block_K], a_s)
                T.copy(x[ko * block_K], x_s)
                for i, k in T.Parallel(block_N, block_K):
                    T.reducer_update(acc[i], T.Cast(T.float32, a_s[i, k]) * T.Cast(T.float32, x_s[k]))
            T.finalize_reducer(acc, out)
            T.copy(out, y[bn * block_N])

    return main


# ---- warp-specialized GEMM: 3-stage shared ring, TMA producer, mbarrier full / empty ----------
@tilelang.jit
def ws_gemm_staged_ring(A, B, block_M=128, block_N=128, block_K=64, num_stages=3):
    """C = A @ B^T (B stored N x K): warpgroup 1 issues T.tma_copy into stage ko % num_stages
    of 3-D shared buffers and arrives on that stage's full barrier; warpgroup 0 waits on it,
    runs T.gemm on the stage's slices and arrives on the stage's empty barrier.  Parities
    flip once per trip round the ring ((ko // num_stages) & 1)."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_s = T.alloc_shared((num_stages, block_M, block_K), T.float16)
        B_s = T.alloc_shared((num_stages, block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        bars = T.alloc_barrier([128] * num_stages + [128] * num_stages)  # full..., empty...
        with T.ws(0):
            T.clear(acc)
        for ko in range(T.ceildiv(K, block_K)):
            st = ko % num_stages
            with T.ws(1):
                T.mbarrier_wait_parity(bars[st + num_stages], ((ko // num_stages) & 1) ^ 1)
                T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                           A_s[st, :, :], barrier=bars[st])
                T.tma_copy(B[bx * block_N:(bx + 1) * block_N, ko * block_K:(ko + 1) * block_K],
                           B_s[st, :, :], barrier=bars[st])
                T.mbarrier_arrive(bars[st])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[st], (ko // num_stages) & 1)
                T.gemm(A_s[st, :, :], B_s[st, :, :], acc, transpose_B=True)
                T.mbarrier_arrive(bars[st + num_stages])
        with T.ws(0):
            T.copy(acc, C[by * block_M, bx * block_N])
    return C



# ---- multi-staged buffers walked by an unrolled stage loop, the last trip partly empty -------
@tilelang.jit(out_idx=[2])
def staged_unrolled_wgmma(M=256, N=256, K=448, block_M=64, block_N=128, block_K=64, num_stages=2):
    """C = A @ B^T with 3-D shared buffers indexed by stage: trip ``it`` of a serial loop
    runs ``for stage in T.unroll(num_stages)`` over blocks ``it * num_stages + stage``, each
    an explicit T.wgmma_gemm on the stage's slices waited for by T.wait_wgmma; K holds 7
    blocks, so the last trip's second stage is skipped by its ``if``."""
    k_blocks = K // block_K

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((num_stages, block_M, block_K), T.float16)
            B_s = T.alloc_shared((num_stages, block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for it in T.serial(T.ceildiv(k_blocks, num_stages)):
                for stage in T.unroll(num_stages):
                    ko = it * num_stages + stage
                    if ko < k_blocks:
                        T.copy(A[by * block_M, ko * block_K], A_s[stage, :, :])
                        T.copy(B[bx * block_N, ko * block_K], B_s[stage, :, :])
                        T.wgmma_gemm(A_s[stage, :, :], B_s[stage, :, :], acc, transpose_B=True)
                        T.wait_wgmma(0)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- persistent GEMM driven by the tile scheduler (stateful: init / valid / next_tile) -------
@tilelang.jit(out_idx=[2])
def persistent_scheduler_gemm(M=512, N=384, K=256, block_M=128, block_N=128, block_K=64,
                              workers=5):
    """C = A @ B on ``workers`` blocks (fewer than the 12 tiles): each block walks the tiles
    T.PersistentTileScheduler hands it -- m fastest, in panels of 2 n-columns -- with
    ``while sched.valid():`` ... ``sched.next_tile()``, reading ``sched.m_idx`` /
    ``sched.n_idx``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(workers, threads=128) as block_id:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            sched = T.PersistentTileScheduler(M // block_M, N // block_N, num_workers=workers,
                                              swizzle_size=2)
            sched.init(block_id)
            while sched.valid():
                tm = sched.m_idx
                tn = sched.n_idx
                T.clear(acc)
                for ko in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[tm * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, tn * block_N], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[tm * block_M, tn * block_N])
                sched.next_tile()

    return main

# ---- scans: an inclusive prefix sum and a suffix max per row ---------------------------------
@tilelang.jit(out_idx=[1, 2])
def row_prefix_sum_suffix_max(M=96, N=256, block_M=8):
    """C[i, j] = sum(X[i, :j + 1]) through T.cumsum and R[i, j] = max(X[i, j:]) through
    T.cummax(..., reverse=True), both on shared tiles."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32),
             R: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // block_M, threads=128) as bm:
            xs = T.alloc_shared((block_M, N), T.float32)
            cs = T.alloc_shared((block_M, N), T.float32)
            rs = T.alloc_shared((block_M, N), T.float32)
            T.copy(X[bm * block_M, 0], xs)
            T.cumsum(xs, cs, dim=1)
            T.cummax(xs, rs, dim=1, reverse=True)
            T.copy(cs, C[bm * block_M, 0])
            T.copy(rs, R[bm * block_M, 0])

    return main


# ---- block votes: counts and flags by barrier votes, a warp's first negative lane ------------
@tilelang.jit(out_idx=[1, 2, 3])
def block_vote_stats(blocks=40, threads=256):
    """Per block: how many values are positive (T.syncthreads_count), whether any is NaN
    (T.syncthreads_or on T.isnan); per warp: the lane of the first negative value plus one,
    0 when none (T.__ffs of T.ballot_sync)."""
    warps = threads // 32

    @T.prim_func
    def main(X: T.Tensor((blocks * threads,), T.float32), Pos: T.Tensor((blocks,), T.int32),
             HasNan: T.Tensor((blocks,), T.int32), FirstNeg: T.Tensor((blocks * warps,), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = X[bx * threads + tx]
            npos = T.syncthreads_count(v > 0)
            nan = T.syncthreads_or(T.isnan(v))
            neg = T.ballot_sync(v < 0)
            if tx % 32 == 0:
                FirstNeg[bx * warps + tx // 32] = T.__ffs(T.Cast(T.int32, neg))
            if tx == 0:
                Pos[bx] = npos
                HasNan[bx] = T.if_then_else(nan != 0, 1, 0)

    return main


# ---- split-KV decode: a global workspace written by one launch, combined by the next ---------
@tilelang.jit(out_idx=[3])
def split_kv_decode_workspace(batch=2, heads=4, seqlen=1024, dim=64, num_split=4, block_N=64):
    """One query per (batch, head) against seqlen keys: the first launch gives each split of
    the keys its own online softmax and writes the split's output and log-sum-exp to
    T.alloc_global buffers; the second launch weighs the splits by their lse."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): exp2 below
    chunk = seqlen // num_split

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), T.float16),
             Kc: T.Tensor((batch, seqlen, heads, dim), T.float16),
             Vc: T.Tensor((batch, seqlen, heads, dim), T.float16),
             Out: T.Tensor((batch, heads, dim), T.float16)):
        part = T.alloc_global((batch, heads, num_split, dim), T.float32)
        lse = T.alloc_global((batch, heads, num_split), T.float32)
        with T.Kernel(num_split, heads, batch, threads=128) as (sp, h, b):
            q = T.alloc_fragment((dim,), T.float32)
            k = T.alloc_fragment((block_N, dim), T.float32)
            s = T.alloc_fragment((block_N,), T.float32)
            pv = T.alloc_fragment((block_N, dim), T.float32)
            o_blk = T.alloc_fragment((dim,), T.float32)
            o = T.alloc_fragment((dim,), T.float32)
            m = T.alloc_fragment((1,), T.float32)
            m_new = T.alloc_fragment((1,), T.float32)
            l = T.alloc_fragment((1,), T.float32)
            l_blk = T.alloc_fragment((1,), T.float32)
            for d in T.Parallel(dim):
                q[d] = T.Cast(T.float32, Q[b, h, d])
            T.clear(o)
            T.fill(m, -T.infinity(T.float32))
            T.clear(l)
            for t in T.serial(chunk // block_N):
                base = sp * chunk + t * block_N
                for j, d in T.Parallel(block_N, dim):
                    k[j, d] = q[d] * T.Cast(T.float32, Kc[b, base + j, h, d])
                T.reduce_sum(k, s, dim=1)
                T.reduce_max(s, m_new, dim=0, clear=True)
                m_new[0] = T.max(m_new[0], m[0])
                for j in T.Parallel(block_N):
                    s[j] = T.exp2(s[j] * scale - m_new[0] * scale)
                T.reduce_sum(s, l_blk, dim=0)
                for d in T.Parallel(dim):
                    o[d] = o[d] * T.exp2(m[0] * scale - m_new[0] * scale)
                l[0] = l[0] * T.exp2(m[0] * scale - m_new[0] * scale) + l_blk[0]
                m[0] = m_new[0]
                for j, d in T.Parallel(block_N, dim):
                    pv[j, d] = s[j] * T.Cast(T.float32, Vc[b, base + j, h, d])
                T.reduce_sum(pv, o_blk, dim=0)
                for d in T.Parallel(dim):
                    o[d] = o[d] + o_blk[d]
            for d in T.Parallel(dim):
                part[b, h, sp, d] = o[d] / l[0]
            lse[b, h, sp] = T.log2(l[0]) + m[0] * scale
        with T.Kernel(heads, batch, threads=64) as (h, b):
            w = T.alloc_fragment((num_split,), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            acc = T.alloc_fragment((num_split, dim), T.float32)
            res = T.alloc_fragment((dim,), T.float32)
            for i in T.Parallel(num_split):
                w[i] = lse[b, h, i]
            T.reduce_max(w, mx, dim=0)
            for i in T.Parallel(num_split):
                w[i] = T.exp2(w[i] - mx[0])
            T.reduce_sum(w, tot, dim=0)
            for i, d in T.Parallel(num_split, dim):
                acc[i, d] = part[b, h, i, d] * w[i]
            T.reduce_sum(acc, res, dim=0)
            for d in T.Parallel(dim):
                Out[b, h, d] = T.Cast(T.float16, res[d] / tot[0])

    return main


# ---- named barriers: a producer warpgroup hands tiles to a consumer warpgroup -----------------
@tilelang.jit(out_idx=[1])
def named_barrier_tile_handoff(tiles=6, width=512):
    """Warpgroup 0 writes tile t (4 values a thread, squared) into one shared slot and
    arrives on named barrier 1; warpgroup 1 syncs on barrier 1, adds its neighbour's value,
    stores, and arrives on barrier 2, which the producer syncs on before reusing the slot."""

    @T.prim_func
    def main(X: T.Tensor((tiles, width), T.float32), Y: T.Tensor((tiles, width), T.float32)):
        with T.Kernel(1, threads=256) as _:
            tx = T.get_thread_binding()
            slot = T.alloc_shared((width,), T.float32)
            if tx < 128:
                for t in T.serial(tiles):
                    if t > 0:
                        T.sync_threads(2, 256)
                    for r in T.unroll(4):
                        v = X[t, r * 128 + tx]
                        slot[r * 128 + tx] = v * v
                    T.named_barrier_arrive(1, 256)
            else:
                for t in T.serial(tiles):
                    T.sync_threads(1, 256)
                    for r in T.unroll(4):
                        c = r * 128 + tx - 128
                        Y[t, c] = slot[c] + slot[(c + 1) % width]
                    if t < tiles - 1:
                        T.named_barrier_arrive(2, 256)

    return main


# ---- complex multiply on interleaved pairs: a two-lane load, lanes by T.extract_lane ---------
@tilelang.jit(out_idx=[2])
def complex_mul_lanes(n=4096, threads=128):
    """C = A * B for complex numbers stored (re, im) interleaved in float32: each thread
    loads both lanes of a number as one 2-lane vector and takes its parts with
    T.extract_lane."""

    @T.prim_func
    def main(A: T.Tensor((2 * n,), T.float32), B: T.Tensor((2 * n,), T.float32),
             C: T.Tensor((2 * n,), T.float32)):
        with T.Kernel(n // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            i = bx * threads + tx
            va = A[T.Ramp(2 * i, 1, 2)]
            vb = B[T.Ramp(2 * i, 1, 2)]
            ar = T.extract_lane(va, 0)
            ai = T.extract_lane(va, 1)
            br = T.extract_lane(vb, 0)
            bi = T.extract_lane(vb, 1)
            C[2 * i] = ar * br - ai * bi
            C[2 * i + 1] = ar * bi + ai * br

    return main


# ---- row scaling through cp.async stages, two blocks an SM asked for --------------------------
@tilelang.jit(out_idx=[2])
def row_scale_cp_async(M=512, N=1024, block_M=32, block_N=128):
    """Y = X * s[:, None] in fp16, the tiles staged through shared memory by cp.async
    (T.copy(..., prefer_instruction="cp_async")) in a 3-stage T.Pipelined loop, with
    T.annotate_min_blocks_per_sm(2)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), s: T.Tensor((M,), T.float32),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // block_M, threads=128) as bm:
            T.annotate_min_blocks_per_sm(2)
            xs = T.alloc_shared((block_M, block_N), T.float16)
            y = T.alloc_fragment((block_M, block_N), T.float16)
            for jo in T.Pipelined(N // block_N, num_stages=3):
                T.copy(X[bm * block_M, jo * block_N], xs, prefer_instruction="cp_async")
                for i, j in T.Parallel(block_M, block_N):
                    y[i, j] = T.Cast(T.float16, T.Cast(T.float32, xs[i, j]) * s[bm * block_M + i])
                T.copy(y, Y[bm * block_M, jo * block_N])

    return main


# ---- a polynomial by Horner, unrolled explicitly; a rational term by T.pow(x, -2) ------------
@tilelang.jit(out_idx=[2])
def horner_rational(n=8192, degree=5, threads=256):
    """Y = p(x) + 0.25 / x^2 + exp(-x^2) / 2 with p's coefficients (highest first) in a
    tensor: Horner's steps in T.unroll(degree + 1, explicit=True), x^-2 as T.pow(x, -2),
    the Gaussian by T.__exp, and the 4 elements of a thread in T.unroll(4, unroll_factor=2)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Cf: T.Tensor((degree + 1,), T.float32),
             Y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // (4 * threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            for e in T.unroll(4, unroll_factor=2):
                x = X[(bx * 4 + e) * threads + tx]
                acc = T.alloc_var(T.float32, init=0.0)
                for c in T.unroll(degree + 1, explicit=True):
                    acc = acc * x + Cf[c]
                Y[(bx * 4 + e) * threads + tx] = acc + 0.25 * T.pow(x, -2) + 0.5 * T.__exp(-x * x)

    return main


# ---- 1-D max pool reading past the end: the tail is -inf by T.annotate_safe_value ------------
@tilelang.jit(out_idx=[1])
def maxpool_right_window_safe_tail(n=1000, window=3, block=128):
    """Y[i] = max(X[i], ..., X[i + window - 1]); each block copies block + window - 1 values
    into shared memory, the copy's elements past X's end read as -inf."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            T.annotate_safe_value({X: -T.infinity(T.float32)})
            xs = T.alloc_shared((block + window - 1,), T.float32)
            T.copy(X[bx * block:bx * block + block + window - 1], xs)
            for i in T.Parallel(block):
                best = T.alloc_var(T.float32, init=xs[i])
                for w in T.serial(1, window):
                    best = T.max(best, xs[i + w])
                if bx * block + i < n:
                    Y[bx * block + i] = best

    return main


# ---- float32 exponents through a reinterpreting view, written transposed ---------------------
@tilelang.jit(out_idx=[1])
def exponent_bits_transposed(M=128, N=64, tile=64):
    """E[j, i] = unbiased exponent of X[i, j]: the shared tile is read through an int32
    T.view of the same storage ((bits >> 23) & 255) - 127, and the tile of exponents is
    transposed in shared memory by T.transpose before the store."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), E: T.Tensor((N, M), T.int32)):
        with T.Kernel(N // tile, M // tile, threads=128) as (bx, by):
            xs = T.alloc_shared((tile, tile), T.float32)
            es = T.alloc_shared((tile, tile), T.int32)
            et = T.alloc_shared((tile, tile), T.int32)
            T.copy(X[by * tile, bx * tile], xs)
            bits = T.view(xs, dtype=T.int32)
            for i, j in T.Parallel(tile, tile):
                es[i, j] = ((bits[i, j] >> 23) & 255) - 127
            T.transpose(es, et)
            T.copy(et, E[bx * tile, by * tile])

    return main
