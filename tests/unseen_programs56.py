"""A fifty-sixth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): weight and activation quantisation formats as inference engines ship them --
an NVFP4 weight GEMM (e2m1 pairs in uint8, an e4m3 scale per 16 K elements and one global
float32 scale read from a tensor), GPTQ int4 with act-order (qweight int32 packed eight along
K, the group of each K row taken from g_idx, packed int32 zero points), AWQ int4 with its
interleaved nibble order (column j of eight sits in nibble 0,4,1,5,2,6,3,7), per-tensor dynamic
fp8 quantisation in two launches (a block abs-max reduced into one float32 by T.atomic_max,
then x * 448 / amax cast to e4m3), and the inverse of the NVFP4 GEMM: a quantize-and-pack
kernel (per 16-group e4m3 scales under the global scale, nearest e2m1 code, two nibbles to a
byte); MXFP4 again on TileLang's own float4_e2m1fn / float8_e8m0fnu dtypes (T.cast does the
decoding), and SmoothQuant W8A8 in two launches (activations divided by the smoothing factors
and quantized per token with T.round, then an int8 GEMM into int32 with the per-token and
per-channel scales in its epilogue).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs56.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


def _e2m1(nib):
    """The float32 value of an fp4 e2m1 code (a uint8 0..15): sign bit 3, exponent bits 2..1
    (bias 1), mantissa bit 0; exponent 0 is the subnormal 0 / 0.5."""
    e = T.cast((nib >> 1) & T.uint8(3), T.float32)
    m = T.cast(nib & T.uint8(1), T.float32)
    mag = T.if_then_else(e == 0.0, m * 0.5, T.exp2(e - 1.0) * (1.0 + m * 0.5))
    return T.if_then_else((nib & T.uint8(8)) != T.uint8(0), -mag, mag)


# ---- NVFP4: e2m1 x e4m3 block scale (16) x a global fp32 scale --------------------------------
@tilelang.jit(out_idx=[4])
def nvfp4_dequant_gemm(M=256, N=256, K=512, block_M=128, block_N=128, block_K=128, threads=256):
    """C = A @ dequant(Bq)^T: Bq (N, K/2) holds two e2m1 codes per byte (the even K element in
    the low nibble), Bs (N, K/16) one float8_e4m3 scale per 16 K elements, G (1,) the global
    float32 scale; each weight is e2m1 * float(e4m3) * G, dequantized tile by tile into shared
    bfloat16 before a wgmma."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), Bq: T.Tensor((N, K // 2), T.uint8),
             Bs: T.Tensor((N, K // 16), T.float8_e4m3), G: T.Tensor((1,), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            q_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            s_s = T.alloc_shared((block_N, block_K // 16), T.float8_e4m3)
            b_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            g = T.alloc_var(T.float32)
            g = G[0]
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], q_s)
                T.copy(Bs[bx * block_N, k * block_K // 16], s_s)
                for n, j in T.Parallel(block_N, block_K):
                    nib = (q_s[n, j // 2] >> T.cast((j % 2) * 4, T.uint8)) & T.uint8(0xF)
                    b_s[n, j] = T.cast(_e2m1(nib) * T.cast(s_s[n, j // 16], T.float32) * g, T.bfloat16)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


# ---- GPTQ int4 with act-order: the group of each K row comes from g_idx ------------------------
@tilelang.jit(out_idx=[5])
def gptq_act_order_gemm(M=128, N=256, K=512, group=128, block_M=64, block_N=128, block_K=64,
                        threads=128):
    """GPTQ's layout: qweight (K/8, N) int32, K row k in nibble k % 8 of row k // 8; qzeros
    (K/group, N/8) int32 with column n in nibble n % 8 (stored minus one, as GPTQ writes them);
    scales (K/group, N) half; g_idx (K,) int32 the group of each K row (act-order permutes them,
    so a K tile mixes groups).  W[k, n] = (q - (z + 1)) * scale[g_idx[k], n]; C = A @ W."""
    G = K // group

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Qw: T.Tensor((K // 8, N), T.int32),
             Qz: T.Tensor((G, N // 8), T.int32), Sc: T.Tensor((G, N), T.float16),
             gidx: T.Tensor((K,), T.int32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            q_s = T.alloc_shared((block_K // 8, block_N), T.int32)
            g_s = T.alloc_shared((block_K,), T.int32)
            b_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Qw[k * block_K // 8, bx * block_N], q_s)
                T.copy(gidx[k * block_K], g_s)
                for kk, n in T.Parallel(block_K, block_N):
                    gi = g_s[kk]
                    col = bx * block_N + n
                    q = (q_s[kk // 8, n] >> ((kk % 8) * 4)) & 0xF
                    z = ((Qz[gi, col // 8] >> ((col % 8) * 4)) & 0xF) + 1
                    b_s[kk, n] = T.cast(q - z, T.float16) * Sc[gi, col]
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


# ---- AWQ int4: eight columns per int32 in the interleaved order 0,2,4,6,1,3,5,7 ----------------
@tilelang.jit(out_idx=[4])
def awq_interleaved_gemm(M=128, N=256, K=512, group=128, block_M=64, block_N=64, block_K=64,
                         threads=128):
    """AWQ's layout: qweight (K, N/8) int32 and qzeros (K/group, N/8) int32, each packing
    eight columns with column 8c + j in nibble (j % 2) * 4 + j // 2 (the pack order
    0,2,4,6,1,3,5,7); scales (K/group, N) half.  W[k, n] = (q - z) * s; C = A @ W, the
    dequantized tile kept in a fragment and copied to shared."""
    G = K // group

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Qw: T.Tensor((K, N // 8), T.int32),
             Qz: T.Tensor((G, N // 8), T.int32), Sc: T.Tensor((G, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            q_s = T.alloc_shared((block_K, block_N // 8), T.int32)
            z_s = T.alloc_shared((block_N // 8,), T.int32)
            s_s = T.alloc_shared((block_N,), T.float16)
            w_l = T.alloc_fragment((block_K, block_N), T.float16)
            b_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Qw[k * block_K, bx * block_N // 8], q_s)
                T.copy(Qz[k * block_K // group, bx * block_N // 8], z_s)
                T.copy(Sc[k * block_K // group, bx * block_N], s_s)
                for kk, n in T.Parallel(block_K, block_N):
                    shift = ((n % 8) % 2 * 4 + (n % 8) // 2) * 4
                    q = (q_s[kk, n // 8] >> shift) & 0xF
                    z = (z_s[n // 8] >> shift) & 0xF
                    w_l[kk, n] = T.cast(q - z, T.float16) * s_s[n]
                T.copy(w_l, b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


# ---- per-tensor dynamic fp8: abs-max by T.atomic_max, then scale and cast ----------------------
@tilelang.jit
def tensor_amax(M=1000, N=1024, block_M=8, threads=256):
    """Amax[0] = max |X| over the whole tensor: each block reduces its rows' |x| to one value
    (T.reduce_absmax, then T.reduce_max over the rows) and one T.atomic_max into Amax, which the
    caller zeroes first."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), Amax: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_l = T.alloc_fragment((block_M, N), T.float32)
            row = T.alloc_fragment((block_M,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            for i, j in T.Parallel(block_M, N):
                x_l[i, j] = T.if_then_else(bm * block_M + i < M, T.cast(X[bm * block_M + i, j], T.float32), 0.0)
            T.reduce_absmax(x_l, row, dim=1)
            T.reduce_max(row, tot, dim=0)
            T.atomic_max(Amax[0], tot[0])
    return main


@tilelang.jit(out_idx=[2, 3])
def tensor_fp8_quant(M=1000, N=1024, block_M=8, block_N=256, threads=128):
    """Xq = saturate(X * 448 / amax) as e4m3 and Scale[0] = amax / 448 (what dequantization
    multiplies by); an all-zero tensor gets scale 1 (amax clamped to 1e-12 before the divide
    keeps the codes 0)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), Amax: T.Tensor((1,), T.float32),
             Xq: T.Tensor((M, N), T.float8_e4m3), Scale: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            inv = T.alloc_var(T.float32)
            amax = T.max(Amax[0], 1e-12)
            inv = 448.0 / amax
            if bx == 0 and by == 0:
                Scale[0] = amax / 448.0
            q = T.alloc_fragment((block_M, block_N), T.float8_e4m3)
            for i, j in T.Parallel(block_M, block_N):
                v = T.cast(X[by * block_M + i, bx * block_N + j], T.float32) * inv
                q[i, j] = T.cast(T.clamp(v, -448.0, 448.0), T.float8_e4m3)
            T.copy(q, Xq[by * block_M, bx * block_N])
    return main


# ---- NVFP4 quantize-and-pack: the inverse of nvfp4_dequant_gemm -------------------------------
@tilelang.jit(out_idx=[2, 3])
def nvfp4_quantize_pack(M=300, K=512, block_M=4, threads=128):
    """Per 16-element group of a row: s = amax / 6 / G as e4m3 (G the global scale), each
    x / (float(s) * G) rounded to the nearest e2m1 magnitude (0, .5, 1, 1.5, 2, 3, 4, 6; ties
    by the midpoint test below), sign in bit 3; the even element in the low nibble."""
    @T.prim_func
    def main(X: T.Tensor((M, K), T.bfloat16), G: T.Tensor((1,), T.float32),
             Q: T.Tensor((M, K // 2), T.uint8), S: T.Tensor((M, K // 16), T.float8_e4m3)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_l = T.alloc_fragment((block_M, K // 16, 16), T.float32)
            amax = T.alloc_fragment((block_M, K // 16), T.float32)
            s_l = T.alloc_fragment((block_M, K // 16), T.float8_e4m3)
            inv = T.alloc_fragment((block_M, K // 16), T.float32)
            code = T.alloc_shared((block_M, K), T.uint8)
            g = G[0]
            for i, c, e in T.Parallel(block_M, K // 16, 16):
                x_l[i, c, e] = T.cast(X[bm * block_M + i, c * 16 + e], T.float32)
            T.reduce_absmax(x_l, amax, dim=2)
            for i, c in T.Parallel(block_M, K // 16):
                s_l[i, c] = T.cast(T.min(amax[i, c] / 6.0 / g, 448.0), T.float8_e4m3)
                sf = T.cast(s_l[i, c], T.float32) * g
                inv[i, c] = T.if_then_else(sf > 0.0, 1.0 / sf, 0.0)
            for i, c, e in T.Parallel(block_M, K // 16, 16):
                a = T.abs(x_l[i, c, e] * inv[i, c])
                mag = T.if_then_else(a <= 0.25, 0, T.if_then_else(a < 0.75, 1, T.if_then_else(
                    a <= 1.25, 2, T.if_then_else(a < 1.75, 3, T.if_then_else(a <= 2.5, 4, T.if_then_else(
                        a < 3.5, 5, T.if_then_else(a <= 5.0, 6, 7)))))))
                sign = T.if_then_else(x_l[i, c, e] < 0.0, 8, 0)
                code[i, c * 16 + e] = T.cast(mag + sign, T.uint8)
            for i, j in T.Parallel(block_M, K // 2):
                if bm * block_M + i < M:
                    Q[bm * block_M + i, j] = code[i, 2 * j] | (code[i, 2 * j + 1] << T.uint8(4))
            for i, c in T.Parallel(block_M, K // 16):
                if bm * block_M + i < M:
                    S[bm * block_M + i, c] = s_l[i, c]
    return main


# ---- MXFP4 with TileLang's own dtypes: float4_e2m1fn values, float8_e8m0fnu scales ------------
@tilelang.jit(out_idx=[3])
def mxfp4_native_dtypes_gemm(M=128, N=256, K=512, block_M=64, block_N=128, block_K=128,
                             threads=128):
    """C = A @ (B * 2^(S - 127))^T with B a float4_e2m1fn tensor (two codes a byte, as torch's
    float4_e2m1fn_x2) and S (N, K/32) float8_e8m0fnu: both cast by T.cast, no bit tricks; the
    scaled weight tile goes through a fragment to shared bfloat16."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.float4_e2m1fn),
             S: T.Tensor((N, K // 32), T.float8_e8m0fnu), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            b4_s = T.alloc_shared((block_N, block_K), T.float4_e2m1fn)
            s_s = T.alloc_shared((block_N, block_K // 32), T.float8_e8m0fnu)
            w_l = T.alloc_fragment((block_N, block_K), T.bfloat16)
            b_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b4_s)
                T.copy(S[bx * block_N, k * block_K // 32], s_s)
                for n, j in T.Parallel(block_N, block_K):
                    w_l[n, j] = T.cast(T.cast(b4_s[n, j], T.float32) * T.cast(s_s[n, j // 32], T.float32),
                                       T.bfloat16)
                T.copy(w_l, b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


# ---- SmoothQuant W8A8: smoothing + per-token int8 quant, then int8 GEMM with both scales -------
@tilelang.jit(out_idx=[2, 3])
def smoothquant_act_quant(M=200, K=1024, block_M=4, threads=128):
    """Xq[m, k] = round(X[m, k] / smooth[k] * 127 / amax_m) as int8 (round half to even, by
    T.round), amax_m = max_k |X[m, k] / smooth[k]| (at least 1e-8); Sx[m] = amax_m / 127."""
    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), smooth: T.Tensor((K,), T.float32),
             Xq: T.Tensor((M, K), T.int8), Sx: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            sm_s = T.alloc_shared((K,), T.float32)
            x_l = T.alloc_fragment((block_M, K), T.float32)
            amax = T.alloc_fragment((block_M,), T.float32)
            q_l = T.alloc_fragment((block_M, K), T.int8)
            T.copy(smooth, sm_s)
            for i, k in T.Parallel(block_M, K):
                x_l[i, k] = T.cast(X[bm * block_M + i, k], T.float32) / sm_s[k]
            T.reduce_absmax(x_l, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-8)
            for i, k in T.Parallel(block_M, K):
                q_l[i, k] = T.cast(T.clamp(T.round(x_l[i, k] * 127.0 / amax[i]), -127.0, 127.0), T.int8)
            T.copy(q_l, Xq[bm * block_M, 0])
            for i in T.Parallel(block_M):
                if bm * block_M + i < M:
                    Sx[bm * block_M + i] = amax[i] / 127.0
    return main


@tilelang.jit(out_idx=[4])
def smoothquant_int8_gemm(M=200, N=256, K=1024, block_M=64, block_N=128, block_K=128, threads=128):
    """C = (Xq @ Wq^T) * Sx[m] * Sw[n] as float16: int8 x int8 into an int32 accumulator
    (T.Pipelined, wgmma), the per-token and per-channel scales in the epilogue; M ragged."""
    @T.prim_func
    def main(Xq: T.Tensor((M, K), T.int8), Wq: T.Tensor((N, K), T.int8),
             Sx: T.Tensor((M,), T.float32), Sw: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.int8)
            b_s = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            c_l = T.alloc_fragment((block_M, block_N), T.float16)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(Xq[by * block_M, k * block_K], a_s)
                T.copy(Wq[bx * block_N, k * block_K], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                c_l[i, j] = T.cast(T.cast(acc[i, j], T.float32) * Sx[by * block_M + i] * Sw[bx * block_N + j],
                                   T.float16)
            T.copy(c_l, C[by * block_M, bx * block_N])
    return main


# ---- MXFP4 quantization on the native dtypes: e8m0 scale = 2^ceil(log2(amax / 6)) ---------------
@tilelang.jit(out_idx=[1, 2])
def mxfp4_native_quantize(M=256, K=1024, block_M=8, threads=256):
    """Per 32-element group of a row: the power of two p = 2^ceil(log2(amax / 6)) (so
    |x| / p <= 6), stored as float8_e8m0fnu; each x / p cast to float4_e2m1fn (nearest even
    code, saturating at 6).  An all-zero group gets p = 2^-126 (the smallest normal float)."""
    @T.prim_func
    def main(X: T.Tensor((M, K), T.bfloat16), Q: T.Tensor((M, K), T.float4_e2m1fn),
             S: T.Tensor((M, K // 32), T.float8_e8m0fnu)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_l = T.alloc_fragment((block_M, K // 32, 32), T.float32)
            amax = T.alloc_fragment((block_M, K // 32), T.float32)
            p_l = T.alloc_fragment((block_M, K // 32), T.float32)
            q_l = T.alloc_fragment((block_M, K // 32, 32), T.float4_e2m1fn)
            for i, g, e in T.Parallel(block_M, K // 32, 32):
                x_l[i, g, e] = T.cast(X[bm * block_M + i, g * 32 + e], T.float32)
            T.reduce_absmax(x_l, amax, dim=2)
            for i, g in T.Parallel(block_M, K // 32):
                p_l[i, g] = T.exp2(T.max(T.ceil(T.log2(amax[i, g] / 6.0)), -126.0))
                S[bm * block_M + i, g] = T.cast(p_l[i, g], T.float8_e8m0fnu)
            for i, g, e in T.Parallel(block_M, K // 32, 32):
                q_l[i, g, e] = T.cast(x_l[i, g, e] / p_l[i, g], T.float4_e2m1fn)
            for i, g, e in T.Parallel(block_M, K // 32, 32):
                Q[bm * block_M + i, g * 32 + e] = q_l[i, g, e]
    return main


# ---- BitNet b1.58: ternary weights, four 2-bit codes a byte, int8 activations -----------------
@tilelang.jit(out_idx=[3])
def bitnet_ternary_gemm(M=128, N=256, K=512, block_M=64, block_N=128, block_K=128, threads=128):
    """C = (Xq @ W^T) * sx[m] * sw as bfloat16: W (N, K) ternary {-1, 0, 1} stored as 2-bit
    codes w + 1, four per int8 along K (element k in bits 2 (k % 4)); decoded into shared int8
    tile by tile, int8 x int8 into an int32 accumulator; sw the weight's one scale (a
    T.Tensor of one element), sx per token."""
    @T.prim_func
    def main(Xq: T.Tensor((M, K), T.int8), Wp: T.Tensor((N, K // 4), T.int8),
             Sx: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.bfloat16),
             Sw: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.int8)
            p_s = T.alloc_shared((block_N, block_K // 4), T.int8)
            b_s = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(Xq[by * block_M, k * block_K], a_s)
                T.copy(Wp[bx * block_N, k * block_K // 4], p_s)
                for n, j in T.Parallel(block_N, block_K):
                    b_s[n, j] = ((p_s[n, j // 4] >> T.cast((j % 4) * 2, T.int8)) & T.int8(3)) - T.int8(1)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = T.cast(
                    T.cast(acc[i, j], T.float32) * Sx[by * block_M + i] * Sw[0], T.bfloat16)
    return main


# ---- uint4 weights decoded by hand-distributed threads: T.serial x T.vectorized into locals ----
@tilelang.jit(out_idx=[3])
def uint4_fine_grained_dequant_gemm(M=128, N=256, K=512, group=64, block_M=64, block_N=128,
                                    block_K=64, threads=128, local_size=8):
    """C = A @ ((q - 8) * s)^T, q uint4 two a byte along K (the even element low), s (N, K/group)
    half: each thread decodes local_size weights at a time by hand -- the bytes copied into a
    T.alloc_local by a T.vectorized loop, decoded into a second local, written to shared by
    another T.vectorized loop at index (i * threads + tx) * local_size."""
    steps = block_N * block_K // (threads * local_size)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K // 2), T.uint8),
             Sc: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            q_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            b_s = T.alloc_shared((block_N, block_K), T.float16)
            q_loc = T.alloc_local((local_size // 2,), T.uint8)
            w_loc = T.alloc_local((local_size,), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            tx = T.get_thread_binding()
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], q_s)
                for i in T.serial(steps):
                    base = (i * threads + tx) * local_size
                    n = base // block_K
                    j0 = base % block_K
                    for v in T.vectorized(local_size // 2):
                        q_loc[v] = q_s[n, j0 // 2 + v]
                    s = Sc[bx * block_N + n, (k * block_K + j0) // group]
                    for v in T.serial(local_size):
                        nib = (q_loc[v // 2] >> T.cast((v % 2) * 4, T.uint8)) & T.uint8(0xF)
                        w_loc[v] = (T.cast(nib, T.float16) - T.float16(8)) * s
                    for v in T.vectorized(local_size):
                        b_s[n, j0 + v] = w_loc[v]
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main
