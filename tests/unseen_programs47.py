"""A forty-seventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): chunked linear-attention and state-space kernels -- Mamba-2's chunk state with the
cumulative log-decay taken by T.cumsum in a fragment (B shared by a group of heads, a
T.dynamic sequence length with a ragged last chunk), the inter-chunk state passing (a serial
loop over chunks carrying the state in a fragment, an initial state in and the final one out),
the chunk output (C @ state scaled by the decay plus the causal (C B^T * L) @ x whose scores
stay in registers as the second GEMM's A operand, plus D * x), RetNet's parallel retention
(a per-head gamma computed in the kernel, the decay mask built in a T.Parallel, the row
normaliser by |scores| summed across the pipelined key blocks), GLA's intra-chunk output with
gates cumulated in log space, a causal linear attention whose running KV state lives in
registers across a T.Pipelined loop over chunks, DeltaNet's WY representation (the unit
lower-triangular inverse by forward substitution in shared memory), a width-4 causal short
convolution's decode step with its carried state updated in place, and Mamba-2's selective
scan decode step (one token, the state updated in place, T.reduce_sum over the state dim).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs47.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- Mamba-2: the chunk's state, the log-decay cumulated in a fragment -------------------------
@tilelang.jit(out_idx=[4, 5])
def ssd_chunk_state_frag_cumsum(B=1, H=4, G=2, P=64, N=64, chunk=64, threads=128):
    """dA_cs = cumsum(dt * A[h]) within the chunk (T.cumsum on a fragment; A = -exp(A_log));
    states[p, n] = sum_l x[l, p] * exp(dA_cs[last] - dA_cs[l]) * dt[l] * B[l, n].  Positions
    past the T.dynamic sequence end count as dt = 0 and x = B = 0 (the last chunk is ragged);
    the chunk total is a T.reduce_sum of the increments.  Head h reads B of group h // (H // G)."""
    S = T.dynamic("seqlen")
    nchunks = T.ceildiv(S, chunk)
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(x: T.Tensor((B, S, H, P), dtype), Bm: T.Tensor((B, S, G, N), dtype),
             dt: T.Tensor((B, S, H), accum), A_log: T.Tensor((H,), accum),
             dA_cs: T.Tensor((B, H, nchunks, chunk), accum),
             states: T.Tensor((B, nchunks, H, P, N), accum)):
        with T.Kernel(nchunks, H, B, threads=threads) as (c, h, b):
            x_s = T.alloc_shared((chunk, P), dtype)
            b_s = T.alloc_shared((chunk, N), dtype)
            cs_s = T.alloc_shared((chunk,), accum)
            dt_s = T.alloc_shared((chunk,), accum)
            inc = T.alloc_fragment((chunk,), accum)
            cs = T.alloc_fragment((chunk,), accum)
            tot = T.alloc_fragment((1,), accum)
            st = T.alloc_fragment((P, N), accum)
            a = -T.exp(A_log[h])
            for l in T.Parallel(chunk):
                dt_s[l] = T.if_then_else(c * chunk + l < S, dt[b, c * chunk + l, h], 0.0)
            for l in T.Parallel(chunk):
                inc[l] = dt_s[l] * a
                cs[l] = dt_s[l] * a
            T.reduce_sum(inc, tot, dim=0)
            T.cumsum(cs, dim=0)
            T.copy(cs, cs_s)
            for l in T.Parallel(chunk):
                if c * chunk + l < S:
                    dA_cs[b, h, c, l] = cs_s[l]
            # the chunk's rows as slices: a point start (`x[b, c * chunk, h, 0]`) would take
            # the tile from the trailing dims (heads x P), as TileLang aligns extents
            T.copy(Bm[b, c * chunk:(c + 1) * chunk, h // (H // G), :], b_s)
            T.copy(x[b, c * chunk:(c + 1) * chunk, h, :], x_s)
            for l, p in T.Parallel(chunk, P):
                x_s[l, p] = x_s[l, p] * T.exp(tot[0] - cs_s[l]) * dt_s[l]
            T.gemm(x_s, b_s, st, transpose_A=True, clear_accum=True)
            T.copy(st, states[b, c, h, 0, 0])

    return main


# ---- Mamba-2: state passing, a serial loop over chunks carrying the state ----------------------
@tilelang.jit(out_idx=[3, 4])
def ssd_state_passing_carry(B=2, H=3, P=64, N=32, bp=32, threads=128):
    """prev[c] = the state entering chunk c; state = state * exp(dA_last[c]) + chunk_states[c];
    the initial state comes in, the final one goes out.  T.dynamic number of chunks."""
    NC = T.dynamic("nchunks")
    accum = T.float32

    @T.prim_func
    def main(chunk_states: T.Tensor((B, NC, H, P, N), accum), dA_last: T.Tensor((B, H, NC), accum),
             init: T.Tensor((B, H, P, N), accum), prev: T.Tensor((B, NC, H, P, N), accum),
             final: T.Tensor((B, H, P, N), accum)):
        with T.Kernel(P // bp, H, B, threads=threads) as (pb, h, b):
            st = T.alloc_fragment((bp, N), accum)
            new = T.alloc_fragment((bp, N), accum)
            T.copy(init[b, h, pb * bp, 0], st)
            for c in T.serial(NC):
                T.copy(st, prev[b, c, h, pb * bp, 0])
                T.copy(chunk_states[b, c, h, pb * bp, 0], new)
                scale = T.exp(dA_last[b, h, c])
                for i, j in T.Parallel(bp, N):
                    st[i, j] = st[i, j] * scale + new[i, j]
            T.copy(st, final[b, h, pb * bp, 0])

    return main


# ---- Mamba-2: the chunk output, the masked scores kept in registers as the GEMM's A ------------
@tilelang.jit(out_idx=[7])
def ssd_chunk_output_regs_a(B=1, H=4, G=1, P=64, N=64, chunk=64, threads=128):
    """y[l] = exp(cs[l]) * (C[l] @ prev^T) + sum_{s<=l} (C[l].B[s]) exp(cs[l]-cs[s]) dt[s] x[s]
    + D[h] x[l]; the masked scores are cast to a float16 fragment and are the A operand of
    the second GEMM.  The sequence is nchunks * chunk long."""
    NC = T.dynamic("nchunks")
    S = NC * chunk
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(x: T.Tensor((B, S, H, P), dtype), Cm: T.Tensor((B, S, G, N), dtype),
             Bm: T.Tensor((B, S, G, N), dtype), dt: T.Tensor((B, H, S), accum),
             cs: T.Tensor((B, H, S), accum), prev: T.Tensor((B, NC, H, P, N), dtype),
             Dp: T.Tensor((H,), accum), y: T.Tensor((B, S, H, P), dtype)):
        with T.Kernel(NC, H, B, threads=threads) as (c, h, b):
            g = h // (H // G)
            c_s = T.alloc_shared((chunk, N), dtype)
            b_s = T.alloc_shared((chunk, N), dtype)
            x_s = T.alloc_shared((chunk, P), dtype)
            st_s = T.alloc_shared((P, N), dtype)
            cs_s = T.alloc_shared((chunk,), accum)
            dt_s = T.alloc_shared((chunk,), accum)
            acc = T.alloc_fragment((chunk, P), accum)
            sc = T.alloc_fragment((chunk, chunk), accum)
            sc16 = T.alloc_fragment((chunk, chunk), dtype)
            y_s = T.alloc_shared((chunk, P), dtype)
            T.copy(Cm[b, c * chunk:(c + 1) * chunk, g, :], c_s)
            T.copy(Bm[b, c * chunk:(c + 1) * chunk, g, :], b_s)
            T.copy(x[b, c * chunk:(c + 1) * chunk, h, :], x_s)
            T.copy(prev[b, c, h, :, :], st_s)
            T.copy(cs[b, h, c * chunk:(c + 1) * chunk], cs_s)
            T.copy(dt[b, h, c * chunk:(c + 1) * chunk], dt_s)
            T.gemm(c_s, st_s, acc, transpose_B=True, clear_accum=True)
            for l, p in T.Parallel(chunk, P):
                acc[l, p] *= T.exp(cs_s[l])
            T.gemm(c_s, b_s, sc, transpose_B=True, clear_accum=True)
            for l, s in T.Parallel(chunk, chunk):
                sc16[l, s] = T.if_then_else(l >= s, sc[l, s] * T.exp(cs_s[l] - cs_s[s]) * dt_s[s],
                                            0.0)
            T.gemm(sc16, x_s, acc)
            for l, p in T.Parallel(chunk, P):
                y_s[l, p] = acc[l, p] + Dp[h] * x_s[l, p]
            T.copy(y_s, y[b, c * chunk:(c + 1) * chunk, h, :])

    return main


# ---- RetNet: parallel retention, per-head gamma, normaliser across key blocks ------------------
@tilelang.jit(out_idx=[3])
def retnet_gamma_mask_normalised(B=1, H=4, D=64, DV=64, bm=64, bn=64, threads=128):
    """gamma_h = 1 - 2^(-5 - h); o_i = sum_{j<=i} (q_i.k_j / sqrt(D)) gamma^(i-j) v_j divided by
    max(|sum_j (q_i.k_j / sqrt(D)) gamma^(i-j)|, 1) (RetNet's normaliser).  T.dynamic length,
    a T.Pipelined loop over the causal key blocks."""
    S = T.dynamic("seqlen")
    dtype, accum = T.float16, T.float32
    scale = D ** -0.5

    @T.prim_func
    def main(q: T.Tensor((B, H, S, D), dtype), k: T.Tensor((B, H, S, D), dtype),
             v: T.Tensor((B, H, S, DV), dtype), o: T.Tensor((B, H, S, DV), dtype)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((bm, D), dtype)
            k_s = T.alloc_shared((bn, D), dtype)
            v_s = T.alloc_shared((bn, DV), dtype)
            sc = T.alloc_fragment((bm, bn), accum)
            sc16 = T.alloc_fragment((bm, bn), dtype)
            acc = T.alloc_fragment((bm, DV), accum)
            rs = T.alloc_fragment((bm,), accum)
            den = T.alloc_fragment((bm,), accum)
            lg = T.log2(1.0 - T.exp2(-5.0 - T.cast(h, accum)))
            T.copy(q[b, h, bx * bm:(bx + 1) * bm, :], q_s)
            T.clear(acc)
            T.clear(den)
            for kb in T.Pipelined(T.ceildiv((bx + 1) * bm, bn), num_stages=2):
                T.copy(k[b, h, kb * bn:(kb + 1) * bn, :], k_s)
                T.copy(v[b, h, kb * bn:(kb + 1) * bn, :], v_s)
                T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(bm, bn):
                    sc[i, j] = T.if_then_else(
                        (bx * bm + i >= kb * bn + j) and (kb * bn + j < S),
                        sc[i, j] * scale * T.exp2(T.cast(bx * bm + i - kb * bn - j, accum) * lg),
                        0.0)
                T.reduce_sum(sc, rs, dim=1)
                for i in T.Parallel(bm):
                    den[i] += rs[i]
                T.copy(sc, sc16)
                T.gemm(sc16, v_s, acc)
            for i, j in T.Parallel(bm, DV):
                acc[i, j] = acc[i, j] / T.max(T.abs(den[i]), 1.0)
            T.copy(acc, o[b, h, bx * bm:(bx + 1) * bm, :])

    return main


# ---- GLA: the intra-chunk output with gates cumulated in log space -----------------------------
@tilelang.jit(out_idx=[5])
def gla_chunk_output_log_gates(B=1, H=2, DK=64, DV=64, chunk=64, threads=128):
    """gc = cumsum_l g (g are log gates <= 0, T.cumsum along dim 0 of a shared tile);
    o[i] = (q[i] * exp(gc[i])) @ h0 * scale + sum_{j<=i} A[i, j] v[j], with
    A[i, j] = scale * sum_k q[i,k] exp(gc[i,k] - gc[j,k]) k[j,k], taken as
    (q * exp(gc - gc[0])) @ (k * exp(gc[0] - gc))^T.  h0 [B, NC, H, DK, DV] is the state
    entering each chunk (float16)."""
    NC = T.dynamic("nchunks")
    S = NC * chunk
    dtype, accum = T.float16, T.float32
    scale = DK ** -0.5

    @T.prim_func
    def main(q: T.Tensor((B, S, H, DK), dtype), k: T.Tensor((B, S, H, DK), dtype),
             v: T.Tensor((B, S, H, DV), dtype), g: T.Tensor((B, S, H, DK), accum),
             h0: T.Tensor((B, NC, H, DK, DV), dtype), o: T.Tensor((B, S, H, DV), dtype)):
        with T.Kernel(NC, H, B, threads=threads) as (c, h, b):
            gc = T.alloc_shared((chunk, DK), accum)
            q_s = T.alloc_shared((chunk, DK), dtype)
            k_s = T.alloc_shared((chunk, DK), dtype)
            qg_s = T.alloc_shared((chunk, DK), dtype)
            v_s = T.alloc_shared((chunk, DV), dtype)
            h_s = T.alloc_shared((DK, DV), dtype)
            A = T.alloc_fragment((chunk, chunk), accum)
            A16 = T.alloc_fragment((chunk, chunk), dtype)
            acc = T.alloc_fragment((chunk, DV), accum)
            T.copy(g[b, c * chunk:(c + 1) * chunk, h, :], gc)
            T.cumsum(gc, dim=0)
            T.copy(q[b, c * chunk:(c + 1) * chunk, h, :], q_s)
            T.copy(k[b, c * chunk:(c + 1) * chunk, h, :], k_s)
            T.copy(v[b, c * chunk:(c + 1) * chunk, h, :], v_s)
            T.copy(h0[b, c, h, :, :], h_s)
            for i, d in T.Parallel(chunk, DK):
                qg_s[i, d] = q_s[i, d] * T.exp(gc[i, d]) * scale
            T.gemm(qg_s, h_s, acc, clear_accum=True)
            for i, d in T.Parallel(chunk, DK):
                qg_s[i, d] = q_s[i, d] * T.exp(gc[i, d] - gc[0, d])
                k_s[i, d] = k_s[i, d] * T.exp(gc[0, d] - gc[i, d])
            T.gemm(qg_s, k_s, A, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(chunk, chunk):
                A16[i, j] = T.if_then_else(i >= j, A[i, j] * scale, 0.0)
            T.gemm(A16, v_s, acc)
            T.copy(acc, o[b, c * chunk:(c + 1) * chunk, h, :])

    return main


# ---- causal linear attention: the running KV state in registers --------------------------------
@tilelang.jit(out_idx=[3, 4])
def linear_attn_running_state(B=1, H=2, HK=1, DK=64, DV=64, chunk=64, threads=128):
    """o_c = q_c @ S_{c} + tril(q_c k_c^T) @ v_c; S_{c+1} = S_c + k_c^T v_c, the state a float32
    fragment carried across a T.Pipelined loop over the chunks (staged to shared as float16
    for the GEMM); K / V heads shared by H // HK query heads; the final state goes out.
    T.dynamic sequence length (a whole number of chunks)."""
    NC = T.dynamic("nchunks")
    S = NC * chunk
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(q: T.Tensor((B, S, H, DK), dtype), k: T.Tensor((B, S, HK, DK), dtype),
             v: T.Tensor((B, S, HK, DV), dtype), o: T.Tensor((B, S, H, DV), dtype),
             final: T.Tensor((B, H, DK, DV), accum)):
        with T.Kernel(H, B, threads=threads) as (h, b):
            hk = h // (H // HK)
            q_s = T.alloc_shared((chunk, DK), dtype)
            k_s = T.alloc_shared((chunk, DK), dtype)
            v_s = T.alloc_shared((chunk, DV), dtype)
            st_s = T.alloc_shared((DK, DV), dtype)
            o_s = T.alloc_shared((chunk, DV), dtype)
            st = T.alloc_fragment((DK, DV), accum)
            sc = T.alloc_fragment((chunk, chunk), accum)
            sc16 = T.alloc_fragment((chunk, chunk), dtype)
            acc = T.alloc_fragment((chunk, DV), accum)
            T.clear(st)
            for c in T.Pipelined(NC, num_stages=2):
                T.copy(q[b, c * chunk:(c + 1) * chunk, h, :], q_s)
                T.copy(k[b, c * chunk:(c + 1) * chunk, hk, :], k_s)
                T.copy(v[b, c * chunk:(c + 1) * chunk, hk, :], v_s)
                T.copy(st, st_s)
                T.gemm(q_s, st_s, acc, clear_accum=True)
                T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(chunk, chunk):
                    sc16[i, j] = T.if_then_else(i >= j, sc[i, j], 0.0)
                T.gemm(sc16, v_s, acc)
                T.gemm(k_s, v_s, st, transpose_A=True)
                T.copy(acc, o_s)
                T.copy(o_s, o[b, c * chunk:(c + 1) * chunk, h, :])
            T.copy(st, final[b, h, :, :])

    return main


# ---- DeltaNet: the WY representation, a forward substitution in shared memory -----------------
@tilelang.jit(out_idx=[3, 4])
def deltanet_wy_forward_subst(B=1, H=2, DK=64, DV=64, chunk=32, threads=128):
    """A = -tril(diag(beta) K K^T, -1); Tm = (I - A)^-1 ... taken row by row:
    for i: Tm[i, j<i] = A[i, j] + sum_{j<m<i} A[i, m] Tm[m, j]; Tm += I;
    w = Tm @ (beta * k), u = Tm @ (beta * v).  One block per (chunk, head, batch)."""
    NC = T.dynamic("nchunks")
    S = NC * chunk
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(k: T.Tensor((B, S, H, DK), dtype), v: T.Tensor((B, S, H, DV), dtype),
             beta: T.Tensor((B, S, H), accum), w: T.Tensor((B, S, H, DK), dtype),
             u: T.Tensor((B, S, H, DV), dtype)):
        with T.Kernel(NC, H, B, threads=threads) as (c, h, b):
            k_s = T.alloc_shared((chunk, DK), dtype)
            kb_s = T.alloc_shared((chunk, DK), dtype)
            vb_s = T.alloc_shared((chunk, DV), dtype)
            beta_s = T.alloc_shared((chunk,), accum)
            A_s = T.alloc_shared((chunk, chunk), accum)
            row = T.alloc_shared((chunk,), accum)
            Tm = T.alloc_shared((chunk, chunk), dtype)
            kk = T.alloc_fragment((chunk, chunk), accum)
            wf = T.alloc_fragment((chunk, DK), accum)
            uf = T.alloc_fragment((chunk, DV), accum)
            T.copy(k[b, c * chunk:(c + 1) * chunk, h, :], k_s)
            T.copy(beta[b, c * chunk:(c + 1) * chunk, h], beta_s)
            for i, d in T.Parallel(chunk, DK):
                kb_s[i, d] = k_s[i, d] * beta_s[i]
            for i, d in T.Parallel(chunk, DV):
                vb_s[i, d] = v[b, c * chunk + i, h, d] * beta_s[i]
            T.gemm(kb_s, k_s, kk, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(chunk, chunk):
                A_s[i, j] = T.if_then_else(i > j, -kk[i, j], 0.0)
            for i in T.serial(1, chunk):
                for j in T.Parallel(chunk):
                    row[j] = A_s[i, j]
                    for m in T.serial(chunk):
                        if m > j and m < i:
                            row[j] += A_s[i, m] * A_s[m, j]
                for j in T.Parallel(chunk):
                    A_s[i, j] = row[j]
            for i, j in T.Parallel(chunk, chunk):
                Tm[i, j] = A_s[i, j] + T.if_then_else(i == j, 1.0, 0.0)
            T.gemm(Tm, kb_s, wf, clear_accum=True)
            T.gemm(Tm, vb_s, uf, clear_accum=True)
            T.copy(wf, w[b, c * chunk:(c + 1) * chunk, h, :])
            T.copy(uf, u[b, c * chunk:(c + 1) * chunk, h, :])

    return main


# ---- a width-4 causal short convolution, decode step, carried state ----------------------------
@tilelang.jit(out_idx=[4])
def short_conv_decode_step(D=512, W=4, block_D=128, threads=128):
    """y = silu(bias + sum_w window[w] * weight[d, w]) with window = (state[.., 0:W-1], x); the
    state then shifts left by one and takes x (updated in place).  T.dynamic batch."""
    Bt = T.dynamic("batch")
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(x: T.Tensor((Bt, D), dtype), state: T.Tensor((Bt, D, W - 1), dtype),
             weight: T.Tensor((D, W), dtype), bias: T.Tensor((D,), dtype),
             y: T.Tensor((Bt, D), dtype)):
        with T.Kernel(T.ceildiv(D, block_D), Bt, threads=threads) as (bd, b):
            win = T.alloc_shared((block_D, W), dtype)
            prod = T.alloc_fragment((block_D, W), accum)
            acc = T.alloc_fragment((block_D,), accum)
            for i, t in T.Parallel(block_D, W):
                win[i, t] = T.if_then_else(t < W - 1, state[b, bd * block_D + i, t],
                                           x[b, bd * block_D + i])
            for i, t in T.Parallel(block_D, W):
                prod[i, t] = T.cast(win[i, t], accum) * weight[bd * block_D + i, t]
            T.reduce_sum(prod, acc, dim=1)
            for i in T.Parallel(block_D):
                acc[i] += bias[bd * block_D + i]
                y[b, bd * block_D + i] = acc[i] * T.sigmoid(acc[i])
            for i, t in T.Parallel(block_D, W - 1):
                state[b, bd * block_D + i, t] = win[i, t + 1]

    return main


# ---- Mamba-2: the selective-scan decode step, the state updated in place -----------------------
@tilelang.jit(out_idx=[8])
def selective_scan_decode_step(H=8, G=2, P=64, N=128, bp=16, threads=128):
    """dA = exp(softplus(dt + dt_bias[h]) * A[h]); state = state * dA + dt' x[p] B[n] (in
    place); y[p] = (sum_n state[p, n] C[n] + D[h] x[p]) * silu(z[p]).  B / C per group of
    H // G heads.  T.dynamic batch."""
    Bt = T.dynamic("batch")
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(state: T.Tensor((Bt, H, P, N), accum), x: T.Tensor((Bt, H, P), dtype),
             dt: T.Tensor((Bt, H), accum), dt_bias: T.Tensor((H,), accum),
             A: T.Tensor((H,), accum), Bm: T.Tensor((Bt, G, N), dtype),
             Cm: T.Tensor((Bt, G, N), dtype), z: T.Tensor((Bt, H, P), dtype),
             y: T.Tensor((Bt, H, P), dtype), Dp: T.Tensor((H,), accum)):
        with T.Kernel(P // bp, H, Bt, threads=threads) as (pb, h, b):
            g = h // (H // G)
            st = T.alloc_fragment((bp, N), accum)
            yc = T.alloc_fragment((bp,), accum)
            dtv = T.alloc_var(accum)
            dA = T.alloc_var(accum)
            t = dt[b, h] + dt_bias[h]
            dtv = T.if_then_else(t > 20.0, t, T.log(1.0 + T.exp(t)))
            dA = T.exp(dtv * A[h])
            T.copy(state[b, h, pb * bp, 0], st)
            for i, n in T.Parallel(bp, N):
                st[i, n] = st[i, n] * dA + dtv * x[b, h, pb * bp + i] * Bm[b, g, n]
            T.copy(st, state[b, h, pb * bp, 0])
            for i, n in T.Parallel(bp, N):
                st[i, n] = st[i, n] * Cm[b, g, n]
            T.reduce_sum(st, yc, dim=1)
            for i in T.Parallel(bp):
                zi = T.cast(z[b, h, pb * bp + i], accum)
                y[b, h, pb * bp + i] = (yc[i] + Dp[h] * x[b, h, pb * bp + i]) * zi * T.sigmoid(zi)

    return main
