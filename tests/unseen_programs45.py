"""A forty-fifth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): a whole mixture-of-experts forward as separate kernels, the way inference engines
port MoE layers to tile languages -- routers (top-k of the logits then a softmax over the
chosen, Mixtral-style; DeepSeek's group-limited sigmoid routing with a selection bias and a
scaling factor), moe_align_block_size (per-expert counts by shared-memory atomics, T.cumsum of
the padded counts, expert ids per block and sorted token ids written at positions taken by
T.atomic_add(return_prev=True)), the fused-MoE grouped GEMM (A rows gathered through
sorted_token_ids, the weight chosen by the block's expert id read from a tensor, padded ids
masked, the top-k weight multiplied in the epilogue, T.Pipelined over K), SiLU-and-mul over the
gate / up halves fused with per-token-group fp8 quantisation (power-of-two scales), the
down-projection grouped GEMM on fp8 with 1x128 activation and 128x128 weight block scales, a
combine by float32 atomics scattered from the expert rows, a shared expert's down projection
whose epilogue gathers the routed outputs, a gated shared expert added at the combine
(Qwen2-MoE), the expert-parallel dispatch layout (tokens per rank / per expert, the token-rank
mask), a persistent grouped GEMM walking a tile schedule a first launch computed on the device
into a T.alloc_global workspace, and a decode GEMV per (token, expert) slot over a T.dynamic
number of active slots; and the fused-MoE GEMM again with SGLang's early exit of a padding
block (T.thread_return() under the block's expert id), row-slice copies and T.use_swizzle;
the all-to-all offsets by T.cumsum along both dims of a shared tile (one reversed); and one
expert's whole MLP with its intermediate kept in registers (the down GEMM's A from a fragment).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs45.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


@T.macro
def _insert_topk(best, arg, v: T.Ref, vi: T.Ref, tmp: T.Ref, tmpi: T.Ref, topk):
    """One thread's top-k lists in registers, best first: (v, vi) goes in at its place and the
    entries after it move down one (an equal value stays behind the earlier entry);
    v / vi / tmp / tmpi are the caller's T.alloc_var scratch, passed by reference (T.Ref)."""
    for r in T.unroll(topk):
        if v > best[r]:
            tmp = best[r]
            tmpi = arg[r]
            best[r] = v
            arg[r] = vi
            v = tmp
            vi = tmpi


# ---- router: gate GEMM, top-k of the logits by insertion per token, softmax over the k --------
@tilelang.jit(out_idx=[2, 3])
def router_topk_then_softmax(D=512, E=8, topk=2, block_M=64, block_K=128, threads=128):
    """Mixtral's routing: logits = x @ Wg^T; each of the first block_M threads keeps its
    token's top-k logits in registers by insertion (ties keep the lower expert id), then the
    weights are a softmax over those k logits only.  T.dynamic tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(x: T.Tensor((M, D), T.bfloat16), Wg: T.Tensor((E, D), T.bfloat16),
             w: T.Tensor((M, topk), T.float32), ids: T.Tensor((M, topk), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((E, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, E), T.float32)
            L = T.alloc_shared((block_M, E), T.float32)
            best = T.alloc_local((topk,), T.float32)
            arg = T.alloc_local((topk,), T.int32)
            v = T.alloc_var(T.float32)
            vi = T.alloc_var(T.int32)
            tmp = T.alloc_var(T.float32)
            tmpi = T.alloc_var(T.int32)
            tot = T.alloc_var(T.float32)
            T.clear(acc)
            for k in T.Pipelined(D // block_K, num_stages=2):
                T.copy(x[bm * block_M, k * block_K], x_s)
                T.copy(Wg[0, k * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            T.copy(acc, L)
            tx = T.get_thread_binding()
            row = bm * block_M + tx
            if tx < block_M and row < M:
                for r in T.unroll(topk):
                    best[r] = -T.infinity(T.float32)
                    arg[r] = -1
                for e in T.serial(E):
                    v = L[tx, e]
                    vi = e
                    _insert_topk(best, arg, v, vi, tmp, tmpi, topk)
                top = best[0]
                tot = 0.0
                for r in T.unroll(topk):
                    best[r] = T.exp(best[r] - top)
                    tot += best[r]
                for r in T.unroll(topk):
                    w[row, r] = best[r] / tot
                    ids[row, r] = arg[r]

    return main


# ---- router: DeepSeek's group-limited routing (sigmoid scores, selection bias, scaling) -------
@tilelang.jit(out_idx=[3, 4])
def router_grouped_topk_sigmoid(D=256, E=64, n_group=8, topk_group=4, topk=6, block_M=64,
                                block_K=64, threads=128, scale=2.5):
    """scores = sigmoid(x @ Wg^T); experts are chosen on scores + bias: a group's score is the
    sum of its two best biased scores, the topk_group best groups are kept, and the top-k
    biased scores among the kept groups' experts chosen; the weights are the unbiased scores of
    the chosen experts, renormalised to sum to one, times the routed scaling factor."""
    M = T.dynamic("tokens")
    gsz = E // n_group

    @T.prim_func
    def main(x: T.Tensor((M, D), T.bfloat16), Wg: T.Tensor((E, D), T.bfloat16),
             bias: T.Tensor((E,), T.float32), w: T.Tensor((M, topk), T.float32),
             ids: T.Tensor((M, topk), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((E, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, E), T.float32)
            S = T.alloc_shared((block_M, E), T.float32)
            gs = T.alloc_local((n_group,), T.float32)
            keep = T.alloc_local((n_group,), T.int32)
            best = T.alloc_local((topk,), T.float32)
            arg = T.alloc_local((topk,), T.int32)
            a = T.alloc_var(T.float32)
            b = T.alloc_var(T.float32)
            v = T.alloc_var(T.float32)
            vi = T.alloc_var(T.int32)
            tmp = T.alloc_var(T.float32)
            tmpi = T.alloc_var(T.int32)
            gbest = T.alloc_var(T.float32)
            gi = T.alloc_var(T.int32)
            tot = T.alloc_var(T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(D, block_K), num_stages=2):
                T.copy(x[bm * block_M, k * block_K], x_s)
                T.copy(Wg[0, k * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            for i, e in T.Parallel(block_M, E):
                S[i, e] = T.sigmoid(acc[i, e]) + bias[e]
            tx = T.get_thread_binding()
            row = bm * block_M + tx
            if tx < block_M and row < M:
                for g in T.serial(n_group):
                    a = -T.infinity(T.float32)
                    b = -T.infinity(T.float32)
                    for j in T.serial(gsz):
                        v = S[tx, g * gsz + j]
                        if v > a:
                            b = a
                            a = v
                        elif v > b:
                            b = v
                    gs[g] = a + b
                    keep[g] = 0
                for r in T.serial(topk_group):
                    gbest = -T.infinity(T.float32)
                    gi = 0
                    for g in T.serial(n_group):
                        if keep[g] == 0 and gs[g] > gbest:
                            gbest = gs[g]
                            gi = g
                    keep[gi] = 1
                for r in T.unroll(topk):
                    best[r] = -T.infinity(T.float32)
                    arg[r] = 0
                for e in T.serial(E):
                    if keep[e // gsz] != 0:
                        v = S[tx, e]
                        vi = e
                        _insert_topk(best, arg, v, vi, tmp, tmpi, topk)
                tot = 0.0
                for r in T.unroll(topk):
                    best[r] = best[r] - bias[arg[r]]
                    tot += best[r]
                for r in T.unroll(topk):
                    w[row, r] = best[r] / tot * scale
                    ids[row, r] = arg[r]

    return main


# ---- moe_align_block_size: counts by atomics, a scan of padded counts, sorted ids -------------
@tilelang.jit
def moe_align_block_size(E=16, topk=2, block=64, threads=256):
    """One block: per-expert counts of the (token, slot) pairs by shared atomics, each rounded
    up to a multiple of `block` and scanned (T.cumsum) into padded offsets; expert_ids gets
    each padded block's expert (-1 past the end), sorted_ids gets each pair's flat index at a
    position taken by an atomic add returning the previous value, padding slots hold
    tokens * topk.  T.dynamic tokens; sorted_ids / expert_ids sized by the caller for the
    worst case."""
    M = T.dynamic("tokens")
    P = T.dynamic("padded")
    NB = T.dynamic("blocks")

    @T.prim_func
    def main(topk_ids: T.Tensor((M, topk), T.int32), sorted_ids: T.Tensor((P,), T.int32),
             expert_ids: T.Tensor((NB,), T.int32), total: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=threads) as _:
            cnt = T.alloc_shared((E,), T.int32)
            ends = T.alloc_shared((E,), T.int32)
            pos = T.alloc_shared((E,), T.int32)
            tx = T.get_thread_binding()
            for e in T.Parallel(E):
                cnt[e] = 0
            for it in T.serial(T.ceildiv(P, threads)):
                idx = it * threads + tx
                if idx < P:
                    sorted_ids[idx] = M * topk
            for it in T.serial(T.ceildiv(NB, threads)):
                idx = it * threads + tx
                if idx < NB:
                    expert_ids[idx] = -1
            T.sync_threads()
            for it in T.serial(T.ceildiv(M * topk, threads)):
                idx = it * threads + tx
                if idx < M * topk:
                    T.atomic_add(cnt[topk_ids[idx // topk, idx % topk]], 1)
            T.sync_threads()
            for e in T.Parallel(E):
                ends[e] = T.ceildiv(cnt[e], block) * block
            T.cumsum(ends, dim=0)
            if tx == 0:
                total[0] = ends[E - 1]
            if tx < E:
                start = ends[tx] - T.ceildiv(cnt[tx], block) * block
                pos[tx] = start
                for b in T.serial(start // block, ends[tx] // block):
                    expert_ids[b] = tx
            T.sync_threads()
            for it in T.serial(T.ceildiv(M * topk, threads)):
                idx = it * threads + tx
                if idx < M * topk:
                    p = T.atomic_add(pos[topk_ids[idx // topk, idx % topk]], 1, return_prev=True)
                    sorted_ids[p] = idx

    return main


# ---- the fused-MoE grouped GEMM: gathered rows, the block's expert, the routed weight ---------
@tilelang.jit(out_idx=[-1])
def fused_moe_gemm(E=8, N=512, K=256, topk=2, block_M=64, block_N=128, block_K=64,
                   num_stages=3, threads=128, mul_routed_weight=True):
    """C[t, :] = A[t // topk, :] @ W[e]^T (times topk_w[t]) for every (token, slot) pair t in
    sorted order: a block takes block_M sorted ids, its expert id from expert_ids, gathers its
    A rows into shared memory (a padding id, >= tokens * topk, reads zeros and stores nothing)
    and pipelines its weight tiles over K; blocks past the padded total return at once."""
    M = T.dynamic("tokens")
    NB = T.dynamic("blocks")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), W: T.Tensor((E, N, K), T.float16),
             sorted_ids: T.Tensor((NB * block_M,), T.int32), expert_ids: T.Tensor((NB,), T.int32),
             topk_w: T.Tensor((M * topk,), T.float32), total: T.Tensor((1,), T.int32),
             C: T.Tensor((M * topk, N), T.float16)):
        with T.Kernel(NB, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            ids_s = T.alloc_shared((block_M,), T.int32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            expert = expert_ids[bx]
            if bx * block_M < total[0]:
                for i in T.Parallel(block_M):
                    ids_s[i] = sorted_ids[bx * block_M + i]
                T.clear(acc)
                for k in T.Pipelined(K // block_K, num_stages=num_stages):
                    for i, j in T.Parallel(block_M, block_K):
                        A_s[i, j] = T.if_then_else(ids_s[i] < M * topk,
                                                   A[ids_s[i] // topk, k * block_K + j], 0)
                    T.copy(W[expert, by * block_N, k * block_K], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if ids_s[i] < M * topk:
                        if mul_routed_weight:
                            C[ids_s[i], by * block_N + j] = T.cast(acc[i, j] * topk_w[ids_s[i]],
                                                                   T.float16)
                        else:
                            C[ids_s[i], by * block_N + j] = T.cast(acc[i, j], T.float16)

    return main


# ---- SiLU-and-mul of the gate / up halves fused with per-token-group fp8 quantisation ---------
@tilelang.jit(out_idx=[1, 2])
def silu_mul_fp8_group_quant(I=512, group=128, block_M=32, threads=128, pow2_scale=True):
    """h = silu(X[:, :I]) * X[:, I:], quantised per (row, 128-column group) to float8_e4m3:
    scale = amax / 448 (floor 1e-10), rounded up to a power of two (UE8M0, DeepSeek-V3's
    activation scales) when pow2_scale; T.dynamic rows, ragged last block."""
    R = T.dynamic("rows")

    @T.prim_func
    def main(X: T.Tensor((R, 2 * I), T.bfloat16), Y: T.Tensor((R, I), T.float8_e4m3),
             S: T.Tensor((R, I // group), T.float32)):
        with T.Kernel(T.ceildiv(R, block_M), I // group, threads=threads) as (bm, g):
            gate_s = T.alloc_shared((block_M, group), T.bfloat16)
            up_s = T.alloc_shared((block_M, group), T.bfloat16)
            h = T.alloc_fragment((block_M, group), T.float32)
            q = T.alloc_fragment((block_M, group), T.float8_e4m3)
            amax = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bm * block_M, g * group], gate_s)
            T.copy(X[bm * block_M, I + g * group], up_s)
            for i, j in T.Parallel(block_M, group):
                gv = T.cast(gate_s[i, j], T.float32)
                h[i, j] = gv / (1.0 + T.exp(-gv)) * T.cast(up_s[i, j], T.float32)
            T.reduce_absmax(h, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-10) / 448.0
                if pow2_scale:
                    amax[i] = T.exp2(T.ceil(T.log2(amax[i])))
            for i, j in T.Parallel(block_M, group):
                q[i, j] = T.cast(T.clamp(h[i, j] / amax[i], -448.0, 448.0), T.float8_e4m3)
            T.copy(q, Y[bm * block_M, g * group])
            for i in T.Parallel(block_M):
                if bm * block_M + i < R:
                    S[bm * block_M + i, g] = amax[i]

    return main


# ---- the down projection on fp8: 1x128 activation scales, 128x128 weight block scales ---------
@tilelang.jit(out_idx=[-1])
def moe_down_fp8_blockscale(E=4, H=256, I=512, topk=2, block_M=64, block_N=128, block_K=128,
                            threads=128):
    """C[t, :] = topk_w[t] * sum_kb (A[t, kb] @ W[e, :, kb]^T) * As[t, kb] * Ws[e, n // 128, kb]
    over the sorted (token, slot) rows t of a block with expert e: each K block's fp8 product
    lands in its own float32 fragment (clear_accum) and is scaled into the accumulator."""
    R = T.dynamic("rows")  # tokens * topk
    NB = T.dynamic("blocks")

    @T.prim_func
    def main(A: T.Tensor((R, I), T.float8_e4m3), As: T.Tensor((R, I // 128), T.float32),
             W: T.Tensor((E, H, I), T.float8_e4m3), Ws: T.Tensor((E, H // 128, I // 128), T.float32),
             sorted_ids: T.Tensor((NB * block_M,), T.int32), expert_ids: T.Tensor((NB,), T.int32),
             topk_w: T.Tensor((R,), T.float32), C: T.Tensor((R, H), T.bfloat16)):
        with T.Kernel(NB, H // block_N, threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            B_s = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            ids_s = T.alloc_shared((block_M,), T.int32)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            sa = T.alloc_fragment((block_M,), T.float32)
            expert = expert_ids[bx]
            if expert >= 0:
                for i in T.Parallel(block_M):
                    ids_s[i] = sorted_ids[bx * block_M + i]
                T.clear(acc)
                for k in T.Pipelined(I // block_K, num_stages=2):
                    for i, j in T.Parallel(block_M, block_K):
                        A_s[i, j] = A[T.min(ids_s[i], R - 1), k * block_K + j]
                    T.copy(W[expert, by * block_N, k * block_K], B_s)
                    for i in T.Parallel(block_M):
                        sa[i] = As[T.min(ids_s[i], R - 1), k]
                    T.gemm(A_s, B_s, part, transpose_B=True, clear_accum=True)
                    sw = Ws[expert, by * block_N // 128, k]
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] += part[i, j] * sa[i] * sw
                for i, j in T.Parallel(block_M, block_N):
                    if ids_s[i] < R:
                        C[ids_s[i], by * block_N + j] = T.cast(acc[i, j] * topk_w[ids_s[i]],
                                                               T.bfloat16)

    return main


# ---- combine: scatter-add the expert rows back to their tokens by float32 atomics -------------
@tilelang.jit
def moe_combine_scatter_atomic(hidden=512, topk=4, block_R=16, block_H=256, threads=128):
    """out[t // topk, :] += Y[t, :] for every expert row t (its routed weight already applied
    by the down projection); `out` starts at zero (the caller's), float32 atomics per element,
    a row whose slot was dropped (slot_mask 0) adds nothing."""
    R = T.dynamic("rows")
    M = T.dynamic("tokens")

    @T.prim_func
    def main(Y: T.Tensor((R, hidden), T.bfloat16), slot_mask: T.Tensor((R,), T.int8),
             out: T.Tensor((M, hidden), T.float32)):
        with T.Kernel(T.ceildiv(R, block_R), hidden // block_H, threads=threads) as (br, bh):
            y = T.alloc_fragment((block_R, block_H), T.float32)
            T.copy(Y[br * block_R, bh * block_H], y)
            for i, j in T.Parallel(block_R, block_H):
                t = br * block_R + i
                if t < R and slot_mask[t] != 0:
                    T.atomic_add(out[t // topk, bh * block_H + j], y[i, j])

    return main


# ---- a shared expert's down projection, the routed outputs gathered in its epilogue -----------
@tilelang.jit(out_idx=[-1])
def shared_expert_down_plus_routed(N=256, K=512, topk=2, block_M=64, block_N=128, block_K=64,
                                   threads=128):
    """out = Hs @ Wd^T + sum_k Y[inv[m, k], :]: the shared expert's GEMM over T.Pipelined K,
    and the epilogue adds each token's routed rows (weighted already) through the inverse
    permutation inv (-1: a dropped slot); T.dynamic tokens and expert rows."""
    M = T.dynamic("tokens")
    R = T.dynamic("rows")

    @T.prim_func
    def main(Hs: T.Tensor((M, K), T.bfloat16), Wd: T.Tensor((N, K), T.bfloat16),
             Y: T.Tensor((R, N), T.bfloat16), inv: T.Tensor((M, topk), T.int32),
             out: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            o_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(Hs[by * block_M, k * block_K], A_s)
                T.copy(Wd[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for s in T.serial(topk):
                for i, j in T.Parallel(block_M, block_N):
                    m = by * block_M + i
                    if m < M:
                        r = inv[m, s]
                        if r >= 0:
                            acc[i, j] += T.cast(Y[r, bx * block_N + j], T.float32)
            T.copy(acc, o_s)
            T.copy(o_s, out[by * block_M, bx * block_N])

    return main


# ---- a gated shared expert added at the combine (Qwen2-MoE) -----------------------------------
@tilelang.jit(out_idx=[-1])
def gated_shared_expert_combine(hidden=512, topk=4, block_T=8, threads=256):
    """out[m] = sum_k w[m, k] * Y[m * topk + k] + sigmoid(x[m] . g) * Sh[m]: the gate a row dot
    product reduced across the block (T.reduce_sum over a (block_T, hidden) fragment), the
    routed rows read from the expert outputs in slot order, float32 sums, a bfloat16 result;
    T.dynamic tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(x: T.Tensor((M, hidden), T.bfloat16), g: T.Tensor((hidden,), T.bfloat16),
             Y: T.Tensor((M * topk, hidden), T.bfloat16), w: T.Tensor((M, topk), T.float32),
             Sh: T.Tensor((M, hidden), T.bfloat16), out: T.Tensor((M, hidden), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_T), threads=threads) as bt:
            xg = T.alloc_fragment((block_T, hidden), T.float32)
            acc = T.alloc_fragment((block_T, hidden), T.float32)
            gate = T.alloc_fragment((block_T,), T.float32)
            o = T.alloc_fragment((block_T, hidden), T.bfloat16)
            for i, j in T.Parallel(block_T, hidden):
                xg[i, j] = T.cast(x[T.min(bt * block_T + i, M - 1), j], T.float32) * T.cast(g[j], T.float32)
            T.reduce_sum(xg, gate, dim=1)
            for i in T.Parallel(block_T):
                gate[i] = T.sigmoid(gate[i])
            for i, j in T.Parallel(block_T, hidden):
                m = T.min(bt * block_T + i, M - 1)
                acc[i, j] = gate[i] * T.cast(Sh[m, j], T.float32)
            for k in T.serial(topk):
                for i, j in T.Parallel(block_T, hidden):
                    m = T.min(bt * block_T + i, M - 1)
                    acc[i, j] += w[m, k] * T.cast(Y[m * topk + k, j], T.float32)
            T.copy(acc, o)
            T.copy(o, out[bt * block_T, 0])

    return main


# ---- expert parallelism: the dispatch layout (no communication) --------------------------------
@tilelang.jit
def ep_dispatch_layout(E=64, ranks=8, topk=6, block_T=64, threads=128):
    """From topk_ids (-1: no expert) computes is_in_rank[m, r] (a token sends to rank r when
    any of its experts lives there, experts split evenly over ranks), the number of tokens per
    rank and per expert: block-local counts by shared atomics, then one global atomic per
    counter and block.  The counters start at zero (the caller's); T.dynamic tokens."""
    M = T.dynamic("tokens")
    per_rank = E // ranks

    @T.prim_func
    def main(topk_ids: T.Tensor((M, topk), T.int32), is_in_rank: T.Tensor((M, ranks), T.bool),
             tokens_per_rank: T.Tensor((ranks,), T.int32),
             tokens_per_expert: T.Tensor((E,), T.int32)):
        with T.Kernel(T.ceildiv(M, block_T), threads=threads) as bt:
            cnt_r = T.alloc_shared((ranks,), T.int32)
            cnt_e = T.alloc_shared((E,), T.int32)
            hit = T.alloc_fragment((block_T, ranks), T.int32)
            for r in T.Parallel(ranks):
                cnt_r[r] = 0
            for e in T.Parallel(E):
                cnt_e[e] = 0
            T.sync_threads()
            for i, r in T.Parallel(block_T, ranks):
                m = bt * block_T + i
                hit[i, r] = 0
                if m < M:
                    for k in T.serial(topk):
                        e = topk_ids[m, k]
                        if e >= 0 and e // per_rank == r:
                            hit[i, r] = 1
                    is_in_rank[m, r] = hit[i, r] != 0
                    if hit[i, r] != 0:
                        T.atomic_add(cnt_r[r], 1)
            for i, k in T.Parallel(block_T, topk):
                m = bt * block_T + i
                if m < M and topk_ids[m, k] >= 0:
                    T.atomic_add(cnt_e[topk_ids[m, k]], 1)
            T.sync_threads()
            for r in T.Parallel(ranks):
                if cnt_r[r] > 0:
                    T.atomic_add(tokens_per_rank[r], cnt_r[r])
            for e in T.Parallel(E):
                if cnt_e[e] > 0:
                    T.atomic_add(tokens_per_expert[e], cnt_e[e])

    return main


# ---- a persistent grouped GEMM over a tile schedule computed on the device --------------------
@tilelang.jit(out_idx=[-1])
def persistent_grouped_gemm(G=4, N=256, K=256, block_M=64, block_N=64, block_K=64, workers=16,
                            threads=128):
    """Groups of rows of A (offsets[g] .. offsets[g + 1]) times their own W[g]^T: a first
    launch scans the groups' tile counts into a T.alloc_global schedule (first tile of each
    group, the total at the end); the second, persistent launch has `workers` blocks walk the
    tiles by a while loop, find each tile's group in the schedule, and store only the group's
    rows.  T.dynamic total rows."""
    R = T.dynamic("rows")
    nN = N // block_N

    @T.prim_func
    def main(A: T.Tensor((R, K), T.float16), W: T.Tensor((G, N, K), T.float16),
             offsets: T.Tensor((G + 1,), T.int32), C: T.Tensor((R, N), T.float16)):
        sched = T.alloc_global((G + 1,), T.int32)
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            if tx == 0:
                sched[0] = 0
                for g in T.serial(G):
                    sched[g + 1] = sched[g] + T.ceildiv(offsets[g + 1] - offsets[g], block_M) * nN
        with T.Kernel(workers, threads=threads) as bid:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            tile = T.alloc_var(T.int32)
            grp = T.alloc_var(T.int32)
            tile = bid
            while tile < sched[G]:
                grp = 0
                for g in T.serial(1, G):
                    if tile >= sched[g]:
                        grp = g
                local = tile - sched[grp]
                row0 = offsets[grp] + local // nN * block_M
                col0 = local % nN * block_N
                T.clear(acc)
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[row0, k * block_K], A_s)
                    T.copy(W[grp, col0, k * block_K], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if row0 + i < offsets[grp + 1]:
                        C[row0 + i, col0 + j] = T.cast(acc[i, j], T.float16)
                tile += workers

    return main


# ---- decode: a GEMV per active (token, expert) slot, T.dynamic slot count ---------------------
@tilelang.jit(out_idx=[-1])
def moe_decode_gemv(E=8, N=512, K=1024, block_N=64, block_K=128, threads=128):
    """Y[s, :] = slot_w[s] * W[slot_exp[s]] @ x[slot_tok[s]] for each of a T.dynamic number of
    active slots (a small decode batch): one block per slot and N block, the products of a
    (block_N, block_K) weight tile with the token's K chunk summed by T.reduce_sum(clear=False)
    into a float32 accumulator."""
    S = T.dynamic("slots")
    M = T.dynamic("tokens")

    @T.prim_func
    def main(x: T.Tensor((M, K), T.float16), W: T.Tensor((E, N, K), T.float16),
             slot_tok: T.Tensor((S,), T.int32), slot_exp: T.Tensor((S,), T.int32),
             slot_w: T.Tensor((S,), T.float32), Y: T.Tensor((S, N), T.float32)):
        with T.Kernel(S, N // block_N, threads=threads) as (s, bn):
            W_s = T.alloc_shared((block_N, block_K), T.float16)
            x_s = T.alloc_shared((block_K,), T.float16)
            prod = T.alloc_fragment((block_N, block_K), T.float32)
            acc = T.alloc_fragment((block_N,), T.float32)
            e = slot_exp[s]
            t = slot_tok[s]
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(W[e, bn * block_N, k * block_K], W_s)
                T.copy(x[t, k * block_K], x_s)
                for n, kk in T.Parallel(block_N, block_K):
                    prod[n, kk] = T.cast(W_s[n, kk], T.float32) * T.cast(x_s[kk], T.float32)
                T.reduce_sum(prod, acc, dim=1, clear=False)
            for n in T.Parallel(block_N):
                Y[s, bn * block_N + n] = acc[n] * slot_w[s]

    return main


# ---- moe_sum: the top-k expert outputs of each token summed over a 3-d fragment ---------------
@tilelang.jit(out_idx=[-1])
def moe_sum_reduce(topk=4, H=512, block_T=8, block_H=128, threads=128):
    """out[m, :] = sum_k X[m, k, :] (vLLM's moe_sum): a (block_T, topk, block_H) tile copied
    ragged into a float32 fragment and reduced over its middle dim by T.reduce_sum;
    T.dynamic tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(X: T.Tensor((M, topk, H), T.bfloat16), out: T.Tensor((M, H), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_T), H // block_H, threads=threads) as (bt, bh):
            x3 = T.alloc_fragment((block_T, topk, block_H), T.float32)
            y = T.alloc_fragment((block_T, block_H), T.float32)
            y16 = T.alloc_fragment((block_T, block_H), T.bfloat16)
            T.copy(X[bt * block_T, 0, bh * block_H], x3)
            T.reduce_sum(x3, y, dim=1)
            T.copy(y, y16)
            T.copy(y16, out[bt * block_T, bh * block_H])

    return main


# ---- router: one warp per token, warp reductions, int64 expert ids ----------------------------
@tilelang.jit(out_idx=[1, 2])
def router_warp_softmax_topk(E=128, topk=8, warps=4, renormalize=True):
    """Given router logits (M, E), each warp routes one token: its 32 lanes hold E / 32 logits
    each, the softmax's max and sum by T.warp_reduce_max / T.warp_reduce_sum, then topk rounds
    of the best (T.warp_reduce_max) and its lowest expert id (T.warp_reduce_min over the lanes'
    candidates), the chosen logit masked away; ids written as int64 (torch.topk's), weights
    renormalised over the chosen when `renormalize`.  T.dynamic tokens."""
    M = T.dynamic("tokens")
    per = E // 32

    @T.prim_func
    def main(logits: T.Tensor((M, E), T.float32), w: T.Tensor((M, topk), T.float32),
             ids: T.Tensor((M, topk), T.int64)):
        with T.Kernel(T.ceildiv(M, warps), threads=warps * 32) as bx:
            p = T.alloc_local((per,), T.float32)
            lm = T.alloc_var(T.float32)
            li = T.alloc_var(T.int32)
            tot = T.alloc_var(T.float32, init=0.0)
            mine = T.alloc_var(T.float32)
            tx = T.get_thread_binding()
            lane = tx % 32
            m = bx * warps + tx // 32
            if m < M:
                for j in T.unroll(per):
                    p[j] = logits[m, lane * per + j]
                lm = p[0]
                for j in T.unroll(1, per):
                    lm = T.max(lm, p[j])
                mx = T.warp_reduce_max(lm)
                lm = 0.0
                for j in T.unroll(per):
                    p[j] = T.exp(p[j] - mx)
                    lm += p[j]
                s = T.warp_reduce_sum(lm)
                for r in T.serial(topk):
                    lm = -1.0
                    li = E
                    for j in T.unroll(per):
                        if p[j] > lm:
                            lm = p[j]
                            li = lane * per + j
                    best = T.warp_reduce_max(lm)
                    win = T.warp_reduce_min(T.if_then_else(lm == best, li, E))
                    for j in T.unroll(per):
                        if lane * per + j == win:
                            p[j] = -1.0
                    tot += best
                    if lane == r:
                        mine = best
                        ids[m, r] = T.cast(win, T.int64)
                if lane < topk:
                    w[m, lane] = mine / tot if renormalize else mine / s

    return main


# ---- small-batch fused MoE with swapped operands: experts' rows on M, a few tokens on N -------
@tilelang.jit(out_idx=[-1])
def fused_moe_swap_ab(E=8, N=512, K=512, topk=2, block_T=16, block_N=64, block_K=64,
                      num_stages=2, threads=128):
    """The decode-sized fused MoE: a block holds block_T (16) sorted (token, slot) ids of one
    expert; C^T = W[e] @ A^T puts the weight tile on the MMA's M and the gathered tokens on its
    N (T.gemm(W_s, A_s, accT, transpose_B=True)), the epilogue stores the transposed
    accumulator through the ids, times the routed weight; T.dynamic tokens and blocks."""
    M = T.dynamic("tokens")
    NB = T.dynamic("blocks")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), W: T.Tensor((E, N, K), T.bfloat16),
             sorted_ids: T.Tensor((NB * block_T,), T.int32), expert_ids: T.Tensor((NB,), T.int32),
             topk_w: T.Tensor((M * topk,), T.float32), C: T.Tensor((M * topk, N), T.bfloat16)):
        with T.Kernel(NB, N // block_N, threads=threads) as (bx, by):
            W_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            A_s = T.alloc_shared((block_T, block_K), T.bfloat16)
            ids_s = T.alloc_shared((block_T,), T.int32)
            accT = T.alloc_fragment((block_N, block_T), T.float32)
            expert = expert_ids[bx]
            if expert >= 0:
                for i in T.Parallel(block_T):
                    ids_s[i] = sorted_ids[bx * block_T + i]
                T.clear(accT)
                for k in T.Pipelined(K // block_K, num_stages=num_stages):
                    T.copy(W[expert, by * block_N, k * block_K], W_s)
                    for i, j in T.Parallel(block_T, block_K):
                        A_s[i, j] = A[T.min(ids_s[i] // topk, M - 1), k * block_K + j]
                    T.gemm(W_s, A_s, accT, transpose_B=True)
                for n, i in T.Parallel(block_N, block_T):
                    if ids_s[i] < M * topk:
                        C[ids_s[i], by * block_N + n] = T.cast(accT[n, i] * topk_w[ids_s[i]],
                                                               T.bfloat16)

    return main


# ---- expert parallelism: each token's slot in the send buffer of every rank it goes to --------
@tilelang.jit
def ep_send_index(E=32, ranks=4, topk=4, threads=128):
    """For int64 topk_ids (a slot of -1 ends the token's list: later slots are -1 too), each
    thread takes a token, walks its slots until the first -1 (T.loop_break), and for each
    rank not yet seen (a bit mask in a T.alloc_var) takes a position in that rank's send list
    by a global T.atomic_add(return_prev=True) and writes the token there; send_pos[m, r] is
    that position, -1 where the token does not go.  T.dynamic tokens."""
    M = T.dynamic("tokens")
    per_rank = E // ranks

    @T.prim_func
    def main(topk_ids: T.Tensor((M, topk), T.int64), counts: T.Tensor((ranks,), T.int32),
             send_tok: T.Tensor((ranks, M), T.int32), send_pos: T.Tensor((M, ranks), T.int32)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            seen = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            m = bx * threads + tx
            if m < M:
                seen = 0
                for r in T.serial(ranks):
                    send_pos[m, r] = -1
                for k in T.serial(topk):
                    e = T.cast(topk_ids[m, k], T.int32)
                    if e < 0:
                        T.loop_break()
                    r = e // per_rank
                    if (seen >> r) & 1 == 0:
                        seen = seen | T.shift_left(1, r)
                        slot = T.atomic_add(counts[r], 1, return_prev=True)
                        send_tok[r, slot] = m
                        send_pos[m, r] = slot

    return main


# ---- combine in half precision by paired atomics -----------------------------------------------
@tilelang.jit
def moe_combine_atomic_x2(hidden=256, topk=2, block_R=32, block_H=128, threads=128):
    """out[t // topk, :] += w[t] * Y[t, :] in float16 by T.atomic_addx2 on adjacent column
    pairs (half2 atomics), the weighted rows held in a float16 fragment; `out` starts at zero
    (the caller's); T.dynamic rows and tokens."""
    R = T.dynamic("rows")
    M = T.dynamic("tokens")

    @T.prim_func
    def main(Y: T.Tensor((R, hidden), T.float16), w: T.Tensor((R,), T.float32),
             out: T.Tensor((M, hidden), T.float16)):
        with T.Kernel(T.ceildiv(R, block_R), hidden // block_H, threads=threads) as (br, bh):
            y = T.alloc_fragment((block_R, block_H), T.float16)
            for i, j in T.Parallel(block_R, block_H):
                t = T.min(br * block_R + i, R - 1)
                y[i, j] = T.cast(T.cast(Y[t, bh * block_H + j], T.float32) * w[t], T.float16)
            for i, j in T.Parallel(block_R, block_H // 2):
                t = br * block_R + i
                if t < R:
                    T.atomic_addx2(out[t // topk, bh * block_H + j * 2], y[i, j * 2])

    return main


# ---- align and permute as two launches, the second waiting by programmatic dependent launch ----
@tilelang.jit
def moe_align_then_permute_pdl(E=8, topk=2, hidden=256, block=16, threads=128):
    """Launch 1 (one block) counts tokens per expert with shared atomics, pads each count to
    `block`, scans (one thread), writes each pair's destination row dst[m, k] (positions taken
    by atomics) and the padded total, then T.pdl_trigger(); launch 2 starts early, waits in
    T.pdl_sync() and copies each token's row to its destination rows.  Xp is sized for the
    worst case by the caller (padding rows left alone).  T.dynamic tokens and rows."""
    M = T.dynamic("tokens")
    P = T.dynamic("padded")

    @T.prim_func
    def main(topk_ids: T.Tensor((M, topk), T.int32), X: T.Tensor((M, hidden), T.float16),
             dst: T.Tensor((M, topk), T.int32), total: T.Tensor((1,), T.int32),
             Xp: T.Tensor((P, hidden), T.float16)):
        with T.Kernel(1, threads=threads) as _:
            cnt = T.alloc_shared((E,), T.int32)
            pos = T.alloc_shared((E,), T.int32)
            tx = T.get_thread_binding()
            for e in T.Parallel(E):
                cnt[e] = 0
            T.sync_threads()
            for it in T.serial(T.ceildiv(M * topk, threads)):
                idx = it * threads + tx
                if idx < M * topk:
                    T.atomic_add(cnt[topk_ids[idx // topk, idx % topk]], 1)
            T.sync_threads()
            if tx == 0:
                run = T.alloc_var(T.int32, init=0)
                for e in T.serial(E):
                    pos[e] = run
                    run += T.ceildiv(cnt[e], block) * block
                total[0] = run
            T.sync_threads()
            for it in T.serial(T.ceildiv(M * topk, threads)):
                idx = it * threads + tx
                if idx < M * topk:
                    dst[idx // topk, idx % topk] = T.atomic_add(
                        pos[topk_ids[idx // topk, idx % topk]], 1, return_prev=True)
            T.pdl_trigger()
        with T.Kernel(M, threads=hidden // 8) as m:
            row = T.alloc_fragment((hidden,), T.float16)
            T.pdl_sync()
            T.copy(X[m, 0], row)
            for k in T.serial(topk):
                T.copy(row, Xp[dst[m, k], 0])

    return main


# ---- DeepSeek-V2's group-limited greedy routing on fragments: a 3-d group maximum -------------
@tilelang.jit(out_idx=[1, 2])
def router_group_max_fragments(E=64, n_group=8, topk_group=3, topk=6, block_M=32, threads=128):
    """Given router logits, softmax scores in a (block_M, E) fragment; a group's score is its
    maximum, by T.reduce_max over the last dim of a (block_M, n_group, E / n_group) fragment;
    topk_group rounds pick the best groups (lowest index on ties) into a shared keep mask,
    the other groups' scores are zeroed, and top-k rounds over the fragment pick the experts
    (weights not renormalised, as DeepSeek-V2's greedy routing).  T.dynamic tokens."""
    M = T.dynamic("tokens")
    gsz = E // n_group

    @T.prim_func
    def main(logits: T.Tensor((M, E), T.float32), w: T.Tensor((M, topk), T.float32),
             ids: T.Tensor((M, topk), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            p = T.alloc_fragment((block_M, E), T.float32)
            p3 = T.alloc_fragment((block_M, n_group, gsz), T.float32)
            gmax = T.alloc_fragment((block_M, n_group), T.float32)
            gcol = T.alloc_fragment((block_M, n_group), T.int32)
            col = T.alloc_fragment((block_M, E), T.int32)
            mx = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            arg = T.alloc_fragment((block_M,), T.int32)
            keep = T.alloc_shared((block_M, n_group), T.int32)
            T.copy(logits[bm * block_M, 0], p)
            T.reduce_max(p, mx, dim=1)
            for i, e in T.Parallel(block_M, E):
                p[i, e] = T.exp(p[i, e] - mx[i])
            T.reduce_sum(p, sm, dim=1)
            for i, e in T.Parallel(block_M, E):
                p[i, e] = p[i, e] / sm[i]
            for i, g, j in T.Parallel(block_M, n_group, gsz):
                p3[i, g, j] = p[i, g * gsz + j]
            T.reduce_max(p3, gmax, dim=2)
            for i, g in T.Parallel(block_M, n_group):
                keep[i, g] = 0
            for r in T.serial(topk_group):
                T.reduce_max(gmax, mx, dim=1)
                for i, g in T.Parallel(block_M, n_group):
                    gcol[i, g] = T.if_then_else(gmax[i, g] == mx[i], g, n_group)
                T.reduce_min(gcol, arg, dim=1)
                for i, g in T.Parallel(block_M, n_group):
                    if g == arg[i]:
                        keep[i, g] = 1
                        gmax[i, g] = -1.0
            for i, e in T.Parallel(block_M, E):
                p[i, e] = T.if_then_else(keep[i, e // gsz] != 0, p[i, e], 0.0)
            for r in T.serial(topk):
                T.reduce_max(p, mx, dim=1)
                for i, e in T.Parallel(block_M, E):
                    col[i, e] = T.if_then_else(p[i, e] == mx[i], e, E)
                T.reduce_min(col, arg, dim=1)
                for i, e in T.Parallel(block_M, E):
                    if e == arg[i]:
                        p[i, e] = -1.0
                for i in T.Parallel(block_M):
                    if bm * block_M + i < M:
                        w[bm * block_M + i, r] = mx[i]
                        ids[bm * block_M + i, r] = arg[i]

    return main


# ---- fused MoE, padding blocks leave early; rows copied slice by slice; a rasterized grid ------
@tilelang.jit(out_idx=[-1])
def fused_moe_padding_exit(E=8, N=512, K=256, topk=2, block_M=64, block_N=128, block_K=64,
                           num_stages=3, threads=256):
    """The fused-MoE GEMM as SGLang's kernels exit a padding block: the expert id read into a
    local (T.alloc_local), ``if eid[0] < 0: T.thread_return()`` before any tile work; each
    gathered A row copied as a row slice (``T.copy(A[t, k0:k1], A_s[i, :])`` in a serial loop
    over the block's rows); GemmWarpPolicy.FullRow over two warpgroups (64 rows are one
    warpgroup's, so they split N, as TileLang's partition falls back); T.use_swizzle on the grid; the bfloat16 routed weight multiplied into the tile read back from shared."""
    M = T.dynamic("tokens")
    NB = T.dynamic("blocks")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), W: T.Tensor((E, N, K), T.bfloat16),
             sorted_ids: T.Tensor((NB * block_M,), T.int32), expert_ids: T.Tensor((NB,), T.int32),
             topk_w: T.Tensor((M * topk,), T.bfloat16), C: T.Tensor((M * topk, N), T.bfloat16)):
        with T.Kernel(NB, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            ids = T.alloc_shared((block_M,), T.int32)
            eid = T.alloc_local((1,), T.int32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            T.use_swizzle(8)
            eid[0] = expert_ids[bx]
            if eid[0] < 0:
                T.thread_return()
            for i in T.Parallel(block_M):
                ids[i] = sorted_ids[bx * block_M + i]
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                for i in T.serial(block_M):
                    T.copy(A[T.min(ids[i] // topk, M - 1), k * block_K:(k + 1) * block_K], A_s[i, :])
                T.copy(W[eid[0], by * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C_s)
            for i, j in T.Parallel(block_M, block_N):
                if ids[i] < M * topk:
                    C[ids[i], by * block_N + j] = T.cast(
                        T.cast(C_s[i, j], T.float32) * T.cast(topk_w[ids[i]], T.float32), T.bfloat16)

    return main


# ---- expert parallelism: the all-to-all offsets by scans along both dims ------------------------
@tilelang.jit
def ep_recv_offsets(ranks=4, E=16, threads=128):
    """The all-to-all offsets from counts[r, e] (tokens rank r sends to expert e): recv_off[r, e]
    where rank r's tokens start in expert e's receive buffer (an exclusive prefix over the
    ranks: T.cumsum along dim 0, minus the count), send_off[r, e] where expert e's tokens start
    in rank r's send buffer (along dim 1), tail[r, e] the tokens rank r sends to experts e and
    after (T.cumsum(dim=1, reverse=True)); one block, shared tiles."""

    @T.prim_func
    def main(counts: T.Tensor((ranks, E), T.int32), recv_off: T.Tensor((ranks, E), T.int32),
             send_off: T.Tensor((ranks, E), T.int32), tail: T.Tensor((ranks, E), T.int32)):
        with T.Kernel(1, threads=threads) as _:
            c = T.alloc_shared((ranks, E), T.int32)
            a = T.alloc_shared((ranks, E), T.int32)
            b = T.alloc_shared((ranks, E), T.int32)
            d = T.alloc_shared((ranks, E), T.int32)
            T.copy(counts, c)
            T.copy(c, a)
            T.copy(c, b)
            T.copy(c, d)
            T.cumsum(a, dim=0)
            T.cumsum(b, dim=1)
            T.cumsum(d, dim=1, reverse=True)
            for r, e in T.Parallel(ranks, E):
                recv_off[r, e] = a[r, e] - c[r, e]
                send_off[r, e] = b[r, e] - c[r, e]
                tail[r, e] = d[r, e]

    return main


# ---- one expert's MLP in registers: gate/up GEMMs, SiLU-and-mul, the down GEMM from registers --
@tilelang.jit(out_idx=[-1])
def fused_expert_mlp(H=256, I=128, block_M=64, block_K=64, threads=128):
    """One expert's whole MLP for a block of its (already permuted) rows, the intermediate never
    leaving the registers: gate and up GEMMs pipelined over H, h = silu(gate) * up cast into a
    float16 fragment, then the down GEMM with h as the register A operand (wgmma RS):
    out = h @ Wd^T.  T.dynamic rows."""
    R = T.dynamic("rows")

    @T.prim_func
    def main(X: T.Tensor((R, H), T.float16), Wg: T.Tensor((I, H), T.float16), Wu: T.Tensor((I, H), T.float16),
             Wd: T.Tensor((H, I), T.float16), out: T.Tensor((R, H), T.float16)):
        with T.Kernel(T.ceildiv(R, block_M), threads=threads) as bm:
            X_s = T.alloc_shared((block_M, block_K), T.float16)
            G_s = T.alloc_shared((I, block_K), T.float16)
            U_s = T.alloc_shared((I, block_K), T.float16)
            D_s = T.alloc_shared((H, I), T.float16)
            g = T.alloc_fragment((block_M, I), T.float32)
            u = T.alloc_fragment((block_M, I), T.float32)
            h = T.alloc_fragment((block_M, I), T.float16)
            o = T.alloc_fragment((block_M, H), T.float32)
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(H // block_K, num_stages=2):
                T.copy(X[bm * block_M, k * block_K], X_s)
                T.copy(Wg[0, k * block_K], G_s)
                T.copy(Wu[0, k * block_K], U_s)
                T.gemm(X_s, G_s, g, transpose_B=True)
                T.gemm(X_s, U_s, u, transpose_B=True)
            for i, j in T.Parallel(block_M, I):
                h[i, j] = T.cast(g[i, j] * T.sigmoid(g[i, j]) * u[i, j], T.float16)
            T.copy(Wd, D_s)
            T.gemm(h, D_s, o, transpose_B=True, clear_accum=True)
            T.copy(o, out[bm * block_M, 0])

    return main
