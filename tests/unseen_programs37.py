"""A thirty-seventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), most on TileLang's 4-bit integers: an AWQ-style w4a16 GEMM (uint4 weights with a
float16 scale and a uint4 zero point per group of 64, dequantized in registers), a GPTQ-style
one reading its weights as packed uint8 bytes and unpacking nibbles by shifts and masks, two
w4a8 GEMMs (int4 weights cast to int8 through a register-tile T.copy, or decoded from uint8
bytes by a T.macro returning ``T.reinterpret(...) >> 4``), an int4 x int4 GEMM with per-row /
per-column scales applied to the int32 accumulator, int4 KV-cache quantization on write (a
per-token absmax scale) with two decode attentions reading an int4 / uint4 cache back (one by
register reductions, one GQA by T.gemm on dequantized tiles with a length mask), uint4 nibble
shuffles (neighbour swap, T.if_then_else on codes, T.fill), an early-exit requantizer by
``T.thread_return`` under bounds tests, a uint4 GEMV, an int4 GEMM over a ``T.dynamic`` M whose
T.Pipelined loop names order / stage / group, an eager quantizer with ``T.empty`` int4 outputs,
a split-K int4 GEMM with a ragged K step and int32 atomics, and a w4afp8 GEMM (int4 weights
cast to float8_e4m3).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs37.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- AWQ-style w4a16: uint4 weights, per-group float16 scales and uint4 zero points -----------
@tilelang.jit(out_idx=[4])
def awq_w4a16_group_gemm(M=128, N=256, K=512, group=64, block_M=64, block_N=64, block_K=64,
                         threads=128):
    """C = A @ dequant(W)^T with W[n, k] = (q[n, k] - z[n, k // group]) * s[n, k // group]:
    the uint4 tile lands in shared memory as bytes, is copied to a uint4 register tile,
    dequantized there to float16 and staged for a float16 T.gemm."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Wq: T.Tensor((N, K), T.uint4),
             S: T.Tensor((N, K // group), T.float16), Z: T.Tensor((N, K // group), T.uint4),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            Wq_s = T.alloc_shared((block_N, block_K), T.uint4)
            Wq_l = T.alloc_fragment((block_N, block_K), T.uint4)
            W_l = T.alloc_fragment((block_N, block_K), T.float16)
            W_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Wq[bx * block_N, k * block_K], Wq_s)
                T.copy(Wq_s, Wq_l)
                for i, j in T.Parallel(block_N, block_K):
                    g = (k * block_K + j) // group
                    W_l[i, j] = (T.cast(Wq_l[i, j], T.float16)
                                 - T.cast(Z[bx * block_N + i, g], T.float16)) * S[bx * block_N + i, g]
                T.copy(W_l, W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- GPTQ-style: weights as packed uint8 bytes, nibbles by shift and mask ----------------------
@tilelang.jit(out_idx=[3])
def gptq_packed_u8_gemm(M=128, N=128, K=256, group=128, block_M=64, block_N=64, block_K=64,
                        threads=128):
    """The same GEMM with the weights bound as uint8 (N, K // 2) and decoded by hand, as older
    TileLang programs do: element j of a row is byte j // 2 shifted by 4 * (j % 2), masked to
    four bits, minus a symmetric zero point of 8, times a per-group float16 scale."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K // 2), T.uint8),
             S: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            Bq_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            Bq_l = T.alloc_fragment((block_N, block_K // 2), T.uint8)
            B_l = T.alloc_fragment((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], Bq_s)
                T.copy(Bq_s, Bq_l)
                for i, j in T.Parallel(block_N, block_K):
                    code = (Bq_l[i, j // 2] >> (T.cast(j % 2, T.uint8) * T.uint8(4))) & T.uint8(0xF)
                    B_l[i, j] = ((T.cast(code, T.float16) - T.float16(8))
                                 * S[bx * block_N + i, (k * block_K + j) // group])
                T.gemm(A_s, B_l, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- w4a8: int8 activations x int4 weights (int4 -> int8 in registers), int8 T.gemm ------------
@tilelang.jit(out_idx=[4])
def w4a8_gemm_dequant_epilogue(M=128, N=128, K=256, block_M=64, block_N=64, block_K=128,
                               threads=128):
    """int8 A times int4 W (bound as packed int8), the weight tile cast to int8 in registers and
    staged in shared memory for an int8 x int8 -> int32 T.gemm; the epilogue scales by a per-row
    activation scale and a per-channel weight scale into bfloat16."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), W: T.Tensor((N, K), T.int4),
             sa: T.Tensor((M,), T.float32), sw: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            W_s4 = T.alloc_shared((block_N, block_K), T.int4)
            W_l4 = T.alloc_fragment((block_N, block_K), T.int4)
            W_l8 = T.alloc_fragment((block_N, block_K), T.int8)
            W_s8 = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(W[bx * block_N, k * block_K], W_s4)
                T.copy(W_s4, W_l4)
                T.copy(W_l4, W_l8)  # a register tile copied between dtypes: int4 -> int8
                T.copy(W_l8, W_s8)
                T.gemm(A_s, W_s8, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = T.cast(
                    T.cast(acc[i, j], T.float32) * sa[by * block_M + i] * sw[bx * block_N + j],
                    T.bfloat16)

    return main


# ---- int4 x int4 GEMM with a per-row / per-column scale epilogue -------------------------------
@tilelang.jit(out_idx=[4])
def int4_gemm_scaled_fp16(M=256, N=256, K=512, block_M=128, block_N=128, block_K=128,
                          threads=256):
    """int4 A (M, K) and int4 B (N, K) into int32 on mma.sync m16n8k64, then
    C = acc * row_scale[m] * col_scale[n] in float16 through a shared tile."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4),
             rs: T.Tensor((M,), T.float16), cs: T.Tensor((N,), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int4)
            B_s = T.alloc_shared((block_N, block_K), T.int4)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            out = T.alloc_fragment((block_M, block_N), T.float16)
            C_s = T.alloc_shared((block_M, block_N), T.float16)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                out[i, j] = T.cast(T.cast(acc[i, j], T.float32)
                                   * T.cast(rs[by * block_M + i], T.float32)
                                   * T.cast(cs[bx * block_N + j], T.float32), T.float16)
            T.copy(out, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


# ---- int4 KV cache: quantize on write ------------------------------------------------------------
@tilelang.jit(out_idx=[-2, -1])
def kv_int4_quant_write(T_tok=200, H=4, D=128, block_T=32, threads=128):
    """Per token and head: scale = absmax / 7 (1 where the row is all zeros), q = round(x /
    scale) clamped to -8 .. 7, stored as int4 (two a byte) beside the float32 scale; the token
    count is ragged against the 32-token block."""

    @T.prim_func
    def main(K: T.Tensor((T_tok, H, D), T.float16), Kq: T.Tensor((T_tok, H, D), T.int4),
             Ks: T.Tensor((T_tok, H), T.float32)):
        with T.Kernel(T.ceildiv(T_tok, block_T), H, threads=threads) as (bt, h):
            x = T.alloc_fragment((block_T, D), T.float32)
            amax = T.alloc_fragment((block_T,), T.float32)
            q = T.alloc_fragment((block_T, D), T.int4)
            for t, d in T.Parallel(block_T, D):
                x[t, d] = T.if_then_else(bt * block_T + t < T_tok,
                                         T.cast(K[bt * block_T + t, h, d], T.float32), 0.0)
            T.reduce_absmax(x, amax, dim=1)
            for t in T.Parallel(block_T):
                amax[t] = T.if_then_else(amax[t] > 0.0, amax[t] / 7.0, 1.0)
            for t, d in T.Parallel(block_T, D):
                q[t, d] = T.cast(T.clamp(T.round(x[t, d] / amax[t]), -8.0, 7.0), T.int4)
            for t, d in T.Parallel(block_T, D):
                if bt * block_T + t < T_tok:
                    Kq[bt * block_T + t, h, d] = q[t, d]
            for t in T.Parallel(block_T):
                if bt * block_T + t < T_tok:
                    Ks[bt * block_T + t, h] = amax[t]

    return main


# ---- decode attention over an int4 KV cache -----------------------------------------------------
@tilelang.jit(out_idx=[5])
def decode_attn_int4_kv(B=2, H=8, S=512, D=128, block_S=64, threads=128):
    """One query token per (batch, head): K and V stored int4 (B, S, H, D) with a float32 scale
    per (token, head); each 64-token block is read element by element, dequantized in
    registers and multiplied with the query row (scores by a dim=1 reduction, the weighted V
    by a dim=0 one), an online softmax over the blocks, the output normalized at the end."""

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), T.float16), Kq: T.Tensor((B, S, H, D), T.int4),
             Ks: T.Tensor((B, S, H), T.float32), Vq: T.Tensor((B, S, H, D), T.int4),
             Vs: T.Tensor((B, S, H), T.float32), O: T.Tensor((B, H, D), T.float16)):
        with T.Kernel(H, B, threads=threads) as (h, b):
            q = T.alloc_fragment((D,), T.float32)
            k_l = T.alloc_fragment((block_S, D), T.float32)
            v_l = T.alloc_fragment((block_S, D), T.float32)
            s = T.alloc_fragment((block_S,), T.float32)
            m_prev = T.alloc_var(T.float32)
            m_new = T.alloc_var(T.float32)
            l_sum = T.alloc_var(T.float32)
            blk_max = T.alloc_fragment((1,), T.float32)
            blk_sum = T.alloc_fragment((1,), T.float32)
            s2 = T.alloc_fragment((1, block_S), T.float32)
            pv = T.alloc_fragment((D,), T.float32)
            o = T.alloc_fragment((D,), T.float32)
            scale = 1.44269504 / (D ** 0.5)
            for d in T.Parallel(D):
                q[d] = T.cast(Q[b, h, d], T.float32)
            T.clear(o)
            m_prev = -T.infinity(T.float32)
            l_sum = 0.0
            for sb in T.serial(S // block_S):
                for t, d in T.Parallel(block_S, D):
                    k_l[t, d] = (T.cast(Kq[b, sb * block_S + t, h, d], T.float32)
                                 * Ks[b, sb * block_S + t, h] * q[d])
                T.reduce_sum(k_l, s, dim=1)
                for t in T.Parallel(block_S):
                    s2[0, t] = s[t] * scale
                T.reduce_max(s2, blk_max, dim=1)
                m_new = T.max(m_prev, blk_max[0])
                for t in T.Parallel(block_S):
                    s2[0, t] = T.exp2(s2[0, t] - m_new)
                T.reduce_sum(s2, blk_sum, dim=1)
                for t, d in T.Parallel(block_S, D):
                    v_l[t, d] = (T.cast(Vq[b, sb * block_S + t, h, d], T.float32)
                                 * Vs[b, sb * block_S + t, h] * s2[0, t])
                T.reduce_sum(v_l, pv, dim=0)
                for d in T.Parallel(D):
                    o[d] = o[d] * T.exp2(m_prev - m_new) + pv[d]
                l_sum = l_sum * T.exp2(m_prev - m_new) + blk_sum[0]
                m_prev = m_new
            for d in T.Parallel(D):
                O[b, h, d] = T.cast(o[d] / l_sum, T.float16)

    return main


# ---- uint4 nibble shuffles ------------------------------------------------------------------------
@tilelang.jit(out_idx=[1, 2])
def uint4_nibble_shuffle(M=64, N=256, threads=128):
    """From uint4 codes X: Y swaps each pair of neighbouring codes (element 2k <-> 2k + 1, i.e.
    the two nibbles of every byte) and clamps codes above 12 to 12 by T.if_then_else; Z is a
    uint4 tile filled with 15 where X's code is even and X's code otherwise, copied out whole."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.uint4), Y: T.Tensor((M, N), T.uint4),
             Z: T.Tensor((M, N), T.uint4)):
        with T.Kernel(M // 16, threads=threads) as bx:
            x = T.alloc_fragment((16, N), T.uint4)
            z = T.alloc_fragment((16, N), T.uint4)
            T.copy(X[bx * 16, 0], x)
            T.fill(z, 15)
            for i, j in T.Parallel(16, N):
                c = T.cast(x[i, j ^ 1], T.int32)
                Y[bx * 16 + i, j] = T.if_then_else(c > 12, T.cast(12, T.uint4), x[i, j ^ 1])
            for i, j in T.Parallel(16, N):
                if T.cast(x[i, j], T.int32) % 2 == 1:
                    z[i, j] = x[i, j]
            T.copy(z, Z[bx * 16, 0])

    return main


# ---- early exit: T.thread_return under bounds tests, int4 in and out --------------------------------
@tilelang.jit
def int4_requant_thread_return(R=1000, N=64, threads=128):
    """One thread a row of int4 codes: threads past R return; a row whose scale is zero writes
    zeros and returns; the others requantize q * scale_in / scale_out (round, clamp) back to int4."""

    @T.prim_func
    def main(X: T.Tensor((R, N), T.int4), s_in: T.Tensor((R,), T.float32),
             s_out: T.Tensor((R,), T.float32), Y: T.Tensor((R, N), T.int4)):
        with T.Kernel(T.ceildiv(R, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            r = bx * threads + tx
            if r >= R:
                T.thread_return()
            if s_out[r] == 0.0:
                for j in T.serial(N):
                    Y[r, j] = T.cast(0, T.int4)
                T.thread_return()
            f = s_in[r] / s_out[r]
            for j in T.serial(N):
                v = T.round(T.cast(X[r, j], T.float32) * f)
                Y[r, j] = T.cast(T.clamp(v, -8.0, 7.0), T.int4)

    return main


# ---- w4a8 with the weights decoded by hand: T.reinterpret + arithmetic shift, a T.macro ----------
@T.macro
def _u8_nibble_to_i8(byte, pos):
    """The signed 4-bit value in nibble ``pos`` of a uint8 ``byte``: moved to the top of the
    byte, reinterpreted as int8 and shifted back arithmetically (sign-extending)."""
    nib = (byte >> (T.cast(pos, T.uint8) * T.uint8(4))) & T.uint8(0xF)
    return T.reinterpret(nib << T.uint8(4), T.int8) >> T.int8(4)


@tilelang.jit(out_idx=[2])
def w4a8_u8_macro_gemm(M=128, N=128, K=256, block_M=64, block_N=64, block_K=128, threads=128):
    """int8 A times int4 weights stored as uint8 bytes (N, K // 2), the nibbles decoded to int8
    by a T.macro returning a value, into an int8 x int8 -> int32 T.gemm whose B is a register
    tile copied to shared memory (the register tile copied from a second one first)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), Bq: T.Tensor((N, K // 2), T.uint8),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            Bq_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            Bq_l = T.alloc_fragment((block_N, block_K // 2), T.uint8)
            B_l = T.alloc_fragment((block_N, block_K), T.int8)
            B_s = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], Bq_s)
                T.copy(Bq_s, Bq_l)
                for i, j in T.Parallel(block_N, block_K):
                    B_l[i, j] = _u8_nibble_to_i8(Bq_l[i, j // 2], j % 2)
                T.copy(B_l, B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- w4a16 GEMV: uint4 weights, a per-group scale, threads split K --------------------------------
@tilelang.jit(out_idx=[3])
def gemv_w4a16_uint4(N=1024, K=2048, group=128, block_N=8, threads=128):
    """y = W x with uint4 weights (N, K), zero point 8 and a float16 scale per group of 128:
    each block takes 8 rows, its 128 threads 16 columns each per step (a serial loop over
    K), the partial sums reduced over a (8, 128) register tile along dim 1."""
    per = K // threads

    @T.prim_func
    def main(x: T.Tensor((K,), T.float16), W: T.Tensor((N, K), T.uint4),
             S: T.Tensor((N, K // group), T.float16), y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bn:
            part = T.alloc_fragment((block_N, threads), T.float32)
            tot = T.alloc_fragment((block_N,), T.float32)
            T.clear(part)
            for n, t in T.Parallel(block_N, threads):
                for kk in T.serial(per):
                    kc = t * per + kk
                    w = (T.cast(W[bn * block_N + n, kc], T.float32) - 8.0) \
                        * T.cast(S[bn * block_N + n, kc // group], T.float32)
                    part[n, t] += w * T.cast(x[kc], T.float32)
            T.reduce_sum(part, tot, dim=1)
            for n in T.Parallel(block_N):
                y[bn * block_N + n] = T.cast(tot[n], T.float16)

    return main


# ---- int4 GEMM over a symbolic M with a ragged tail, an explicit pipeline schedule -----------------
@tilelang.jit(out_idx=[2])
def int4_gemm_dynamic_m_pipelined(N=256, K=512, block_M=64, block_N=128, block_K=128, threads=128):
    """C = A @ B^T, int4 into int32, M a T.dynamic (the last tile ragged: its rows past M are
    neither read from nor written to global memory); the T.Pipelined loop names its order,
    stages and groups, and the epilogue adds a per-column int32 bias after a ReLU-style clamp."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4),
             C: T.Tensor((M, N), T.int32), bias: T.Tensor((N,), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int4)
            B_s = T.alloc_shared((block_N, block_K), T.int4)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2, order=[0, 1, 2], stage=[0, 0, 1],
                                  group=[[0], [1], [2]]):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.max(acc[i, j], 0) + bias[bx * block_N + j]
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- eager style: an int4 output from T.empty, shapes from T.const ---------------------------------
@tilelang.jit
def eager_int4_row_quant(X, block_M=16):
    """Symmetric per-row int4 quantization, TileLang's newest @jit style: the row count and
    width come from X's shape (T.const), the codes and scales are T.empty outputs returned."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Q = T.empty((M, N), T.int4)
    S = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        x = T.alloc_fragment((block_M, N), T.float32)
        q = T.alloc_fragment((block_M, N), T.int4)
        amax = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bm * block_M, 0], x)
        T.reduce_absmax(x, amax, dim=1)
        for i in T.Parallel(block_M):
            amax[i] = T.max(amax[i], 1e-6) / 7.0
        for i, j in T.Parallel(block_M, N):
            q[i, j] = T.cast(T.round(x[i, j] / amax[i]), T.int4)
        T.copy(q, Q[bm * block_M, 0])
        T.copy(amax, S[bm * block_M])
    return Q, S


# ---- split-K int4 GEMM: a ragged K, int32 atomics into C ----------------------------------------
@tilelang.jit
def int4_gemm_splitk_atomic(M=128, N=128, K=576, block_M=64, block_N=64, block_K=128, split=2,
                            threads=128):
    """C += A @ B^T over int4 operands with K split over blockIdx.z: each split takes
    ceil(ceil(K / block_K) / split) steps (K = 576: four and a half 128-wide steps, three for
    the first split, two for the second, whose last is ragged), the loads past K zero-filled; partial int32 tiles are
    added into C by T.atomic_add of the whole fragment."""
    steps = (K + block_K - 1) // block_K
    per = (steps + split - 1) // split

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.int4)
            B_s = T.alloc_shared((block_N, block_K), T.int4)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for ko in T.Pipelined(T.min(per, steps - bz * per), num_stages=2):
                T.copy(A[by * block_M, (bz * per + ko) * block_K], A_s)
                T.copy(B[bx * block_N, (bz * per + ko) * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.atomic_add(C[by * block_M, bx * block_N], acc)

    return main


# ---- GQA decode over a uint4 KV cache: dequantized tiles, T.gemm, an online softmax ---------------
@tilelang.jit(out_idx=[6])
def gqa_decode_uint4_kv_gemm(B=2, H=32, G=8, S=1024, D=128, block_S=64, threads=128):
    """Each block takes the 4 query heads of one KV head (padded to 16 rows for the MMA) and
    walks the cache: the uint4 K / V tiles (zero point 8, a float16 scale per token and KV head)
    are dequantized from shared memory into float16 shared tiles, S = Q K^T and O += P V run as
    T.gemm, an online softmax in between, masked past the sequence length ``L[b]``."""
    rep = H // G
    pad = 16

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), T.float16), Kq: T.Tensor((B, G, S, D), T.uint4),
             Ks: T.Tensor((B, G, S), T.float16), Vq: T.Tensor((B, G, S, D), T.uint4),
             Vs: T.Tensor((B, G, S), T.float16), L: T.Tensor((B,), T.int32),
             O: T.Tensor((B, H, D), T.float16)):
        with T.Kernel(G, B, threads=threads) as (g, b):
            Q_s = T.alloc_shared((pad, D), T.float16)
            Kq_s = T.alloc_shared((block_S, D), T.uint4)
            Vq_s = T.alloc_shared((block_S, D), T.uint4)
            K_s = T.alloc_shared((block_S, D), T.float16)
            V_s = T.alloc_shared((block_S, D), T.float16)
            P_s = T.alloc_shared((pad, block_S), T.float16)
            s = T.alloc_fragment((pad, block_S), T.float32)
            o = T.alloc_fragment((pad, D), T.float32)
            m = T.alloc_fragment((pad,), T.float32)
            m_old = T.alloc_fragment((pad,), T.float32)
            l = T.alloc_fragment((pad,), T.float32)
            rs = T.alloc_fragment((pad,), T.float32)
            sm_scale = 1.44269504 / (D ** 0.5)
            n = L[b]
            for i, d in T.Parallel(pad, D):
                Q_s[i, d] = T.if_then_else(i < rep, Q[b, g * rep + T.min(i, rep - 1), d], 0.0)
            T.clear(o)
            T.clear(l)
            T.fill(m, -T.infinity(T.float32))
            for sb in T.Pipelined(T.ceildiv(n, block_S), num_stages=2):
                T.copy(Kq[b, g, sb * block_S, 0], Kq_s)
                T.copy(Vq[b, g, sb * block_S, 0], Vq_s)
                for t, d in T.Parallel(block_S, D):
                    K_s[t, d] = (T.cast(Kq_s[t, d], T.float16) - T.float16(8)) * Ks[b, g, sb * block_S + t]
                    V_s[t, d] = (T.cast(Vq_s[t, d], T.float16) - T.float16(8)) * Vs[b, g, sb * block_S + t]
                T.gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
                for i, t in T.Parallel(pad, block_S):
                    s[i, t] = T.if_then_else(sb * block_S + t < n, s[i, t] * sm_scale,
                                             -T.infinity(T.float32))
                T.copy(m, m_old)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, t in T.Parallel(pad, block_S):
                    s[i, t] = T.exp2(s[i, t] - m[i])
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(pad):
                    l[i] = l[i] * T.exp2(m_old[i] - m[i]) + rs[i]
                for i, d in T.Parallel(pad, D):
                    o[i, d] *= T.exp2(m_old[i] - m[i])
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o)
            for i, d in T.Parallel(pad, D):
                if i < rep:
                    O[b, g * rep + i, d] = T.cast(o[i, d] / l[i], T.float16)

    return main


# ---- w4afp8: int4 weights cast to float8_e4m3 in registers for an fp8 T.gemm ----------------------
@tilelang.jit(out_idx=[3])
def w4afp8_gemm(M=128, N=128, K=256, block_M=64, block_N=64, block_K=128, threads=128):
    """float8_e4m3 activations times int4 weights: the int4 tile is cast to float8_e4m3 in
    registers (exact: -8 .. 7 are e4m3 values), staged in shared memory, multiplied by an fp8
    T.gemm into float32 and scaled per output channel into bfloat16."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), W: T.Tensor((N, K), T.int4),
             sw: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            W_s4 = T.alloc_shared((block_N, block_K), T.int4)
            W_l = T.alloc_fragment((block_N, block_K), T.float8_e4m3)
            W_s = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(W[bx * block_N, k * block_K], W_s4)
                for i, j in T.Parallel(block_N, block_K):
                    W_l[i, j] = T.cast(W_s4[i, j], T.float8_e4m3)
                T.copy(W_l, W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = T.cast(acc[i, j] * sw[bx * block_N + j],
                                                               T.bfloat16)

    return main


# ---- a hand double-buffered int4 GEMM: stage-indexed operands read in 64-wide K parts --------------
@tilelang.jit(out_idx=[2])
def int4_gemm_hand_stages_kparts(M=256, N=128, K=1024, block_M=128, block_N=128, block_K=256,
                                 threads=128):
    """C = A @ B^T (uint4 A, int4 B) double-buffered by hand: the next K block is copied into
    ``A_s[(k + 1) % 2, :, :]`` while the T.gemm runs on ``A_s[k % 2, :, kk * 64:(kk + 1) * 64]``,
    four 64-wide K parts (one m16n8k64 step each) of the current stage."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.uint4), B: T.Tensor((N, K), T.int4),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((2, block_M, block_K), T.uint4)
            B_s = T.alloc_shared((2, block_N, block_K), T.int4)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            T.copy(A[by * block_M, 0], A_s[0, :, :])
            T.copy(B[bx * block_N, 0], B_s[0, :, :])
            for k in T.serial(K // block_K):
                if k + 1 < K // block_K:
                    T.copy(A[by * block_M, (k + 1) * block_K], A_s[(k + 1) % 2, :, :])
                    T.copy(B[bx * block_N, (k + 1) * block_K], B_s[(k + 1) % 2, :, :])
                for kk in T.unroll(block_K // 64):
                    T.gemm(A_s[k % 2, :, kk * 64:(kk + 1) * 64], B_s[k % 2, :, kk * 64:(kk + 1) * 64],
                           acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main
