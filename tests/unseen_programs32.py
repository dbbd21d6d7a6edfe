"""A thirty-second set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): kernels whose results hinge on numerics and integer widths as TileLang's CUDA C
defines them -- 64-bit index arithmetic over tensors with more than 2^31 elements, float
special values through reductions and softmax, integer wraparound / shifts / floor vs trunc
division, and the accumulation dtypes of fragments.

``tests/test_unseen_programs32.py`` builds each to a cubin on the CPU, checks what matters in
the generated source, and on a GPU compares it with a torch reference computed in TileLang's
semantics."""

import tilecute
import tilecute.language as T


# ---- index widths ------------------------------------------------------------------------
def big_rows_scale(M=65536, N=65536, bm=1, bn=256):
    """Scales a (65536, 65536) fp16 tensor (2^32 elements): the flat offset ``row * N + col``
    passes 2^31 and must be computed in 64 bits (compile-only)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * T.float16(2.0)
    return main


def cast_int64_flat_copy(n=4096, blk=256):
    """A flat copy whose offset is computed as ``T.cast(bx, "int64") * blk + tx``."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            tx = T.get_thread_binding()
            off = T.cast(bx, "int64") * blk + tx
            B[off] = A[off] + 1.0
    return main


def int64_serial_rowsum(M=64, N=512):
    """A row sum whose column loop is ``T.serial(T.int64(N))`` (an int64 loop variable)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=32) as bx:
            acc = T.alloc_local((1,), T.float32)
            tx = T.get_thread_binding()
            if tx == 0:
                acc[0] = 0.0
                for j in T.serial(T.int64(N)):
                    acc[0] += A[bx, j]
                S[bx] = acc[0]
    return main


# ---- float special values ---------------------------------------------------------------
def masked_softmax_neg_inf(M=64, N=128):
    """Row softmax where masked entries (mask == 0) are ``-T.infinity``; a fully masked row's
    max is -inf and ``exp2(-inf - -inf)`` is NaN as in TileLang's CUDA; rows with one live entry
    give 1."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Mask: T.Tensor((M, N), T.int8),
             Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=128) as bx:
            s = T.alloc_fragment((1, N), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            sm = T.alloc_fragment((1,), T.float32)
            for i, j in T.Parallel(1, N):
                s[i, j] = T.if_then_else(Mask[bx, j] != 0, X[bx, j], -T.infinity(T.float32))
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(1, N):
                s[i, j] = T.exp2((s[i, j] - mx[i]) * 1.44269504)
            T.reduce_sum(s, sm, dim=1)
            for i, j in T.Parallel(1, N):
                Y[bx, j] = s[i, j] / sm[i]
    return main


def nan_count_and_clean(M=32, N=256):
    """Counts the NaN and inf entries per row (``T.isnan`` / ``T.isinf``) and writes the row
    with them replaced by 0."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
             C: T.Tensor((M, 2), T.int32)):
        with T.Kernel(M, threads=128) as bx:
            nn = T.alloc_fragment((1, N), T.int32)
            ni = T.alloc_fragment((1, N), T.int32)
            cn = T.alloc_fragment((1,), T.int32)
            ci = T.alloc_fragment((1,), T.int32)
            for i, j in T.Parallel(1, N):
                nn[i, j] = T.if_then_else(T.isnan(X[bx, j]), 1, 0)
                ni[i, j] = T.if_then_else(T.isinf(X[bx, j]), 1, 0)
                Y[bx, j] = T.if_then_else(T.isnan(X[bx, j]) or T.isinf(X[bx, j]), T.float32(0), X[bx, j])
            T.reduce_sum(nn, cn, dim=1)
            T.reduce_sum(ni, ci, dim=1)
            C[bx, 0] = cn[0]
            C[bx, 1] = ci[0]
    return main


def log_div_specials(n=1024, blk=128):
    """Elementwise ``log(x)``, ``1 / x`` and ``exp2(-x * inf)``-style specials: log(0) = -inf,
    1/0 = inf, 1/-0 = -inf, exp2(-inf) = 0."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), L: T.Tensor((n,), T.float32),
             R: T.Tensor((n,), T.float32), E: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                L[bx * blk + i] = T.log(X[bx * blk + i])
                R[bx * blk + i] = 1.0 / X[bx * blk + i]
                E[bx * blk + i] = T.exp2(T.if_then_else(X[bx * blk + i] == 0.0,
                                                       -T.infinity(T.float32), X[bx * blk + i]))
    return main


def fp16_overflow_cast(n=1024, blk=256):
    """Casts fp32 to fp16 and bf16: 70000 overflows fp16 to inf (round-to-nearest), bf16 keeps
    it."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16),
             Bf: T.Tensor((n,), T.bfloat16)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                H[bx * blk + i] = T.cast(X[bx * blk + i], T.float16)
                Bf[bx * blk + i] = T.cast(X[bx * blk + i], T.bfloat16)
    return main


def fp8_saturating_quant(M=64, N=128):
    """Per-row absmax quantization to float8_e4m3 with an explicit clamp to +-448 before the
    cast (the saturating idiom), and the scale written out."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float8_e4m3),
             S: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=128) as bx:
            a = T.alloc_fragment((1, N), T.float32)
            amax = T.alloc_fragment((1,), T.float32)
            for i, j in T.Parallel(1, N):
                a[i, j] = T.abs(X[bx, j])
            T.reduce_max(a, amax, dim=1)
            for i, j in T.Parallel(1, N):
                Q[bx, j] = T.cast(T.clamp(X[bx, j] * (448.0 / amax[i]) * 1.25, -448.0, 448.0),
                                  T.float8_e4m3)
            S[bx] = amax[0] / 448.0
    return main


def max_min_with_nan(n=512, blk=128):
    """Elementwise ``T.max`` / ``T.min`` of two tensors holding NaNs: CUDA's fmaxf / fminf
    return the other operand when one is NaN."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32),
             Mx: T.Tensor((n,), T.float32), Mn: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                Mx[bx * blk + i] = T.max(A[bx * blk + i], B[bx * blk + i])
                Mn[bx * blk + i] = T.min(A[bx * blk + i], B[bx * blk + i])
    return main


# ---- integer semantics ----------------------------------------------------------------------
def floor_vs_trunc_div(n=256, blk=128):
    """``//`` and ``%`` of negative int32 values (TileLang: floordiv / floormod) beside
    ``T.truncdiv`` / ``T.truncmod`` (C's / and %)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), D: T.Tensor((n, 4), T.int32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                D[bx * blk + i, 0] = A[bx * blk + i] // 7
                D[bx * blk + i, 1] = A[bx * blk + i] % 7
                D[bx * blk + i, 2] = T.truncdiv(A[bx * blk + i], 7)
                D[bx * blk + i, 3] = T.truncmod(A[bx * blk + i], 7)
    return main


def uint32_hash_wraparound(n=1024, blk=256):
    """An FNV-style uint32 hash: multiplications wrap modulo 2^32, shifts are logical."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.uint32), H: T.Tensor((n,), T.uint32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                h = A[bx * blk + i] * T.uint32(2654435761)
                h = h ^ (h >> T.uint32(16))
                H[bx * blk + i] = h * T.uint32(2246822519) + T.uint32(4294967295)
    return main


def int8_promoted_dot(M=64, K=256):
    """Row dot products of int8 vectors: each product is promoted and summed in an int32
    fragment (no int8 overflow)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((M, K), T.int8), C: T.Tensor((M,), T.int32)):
        with T.Kernel(M, threads=128) as bx:
            p = T.alloc_fragment((1, K), T.int32)
            s = T.alloc_fragment((1,), T.int32)
            for i, j in T.Parallel(1, K):
                p[i, j] = T.cast(A[bx, j], T.int32) * T.cast(B[bx, j], T.int32)
            T.reduce_sum(p, s, dim=1)
            C[bx] = s[0]
    return main


def int16_wrap_add(n=512, blk=128):
    """int16 + int16 stored to int16 wraps (30000 + 30000 = -5536)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int16), B: T.Tensor((n,), T.int16), C: T.Tensor((n,), T.int16)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                C[bx * blk + i] = A[bx * blk + i] + B[bx * blk + i]
    return main


def int_clamp_quant(n=1024, blk=256):
    """Requantizes int32 accumulators to int8: ``(x * mult) >> shift`` clamped with
    ``T.clamp`` to [-128, 127]."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Q: T.Tensor((n,), T.int8)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                Q[bx * blk + i] = T.cast(T.clamp((A[bx * blk + i] * 3) >> 4, -128, 127), T.int8)
    return main


def unsigned_compare_select(n=512, blk=128):
    """``T.if_then_else`` on a uint32 comparison (0xFFFFFFFF > 1 as unsigned) choosing between
    an int32 and a float32 branch (the result is float32)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.uint32), X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                Y[bx * blk + i] = T.if_then_else(A[bx * blk + i] > T.uint32(1),
                                                 X[bx * blk + i], T.float32(-1))
    return main


# ---- accumulation dtypes --------------------------------------------------------------------
def gemm_fp16_accum(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """A GEMM whose accumulator fragment is float16 (``accum_dtype="float16"``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), T.float16)
            Bs = T.alloc_shared((bk, bn), T.float16)
            Cf = T.alloc_fragment((bm, bn), T.float16)
            T.clear(Cf)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C[by * bm, bx * bn])
    return main


def bf16_reduce_sum_rows(M=64, N=256):
    """``T.reduce_sum`` into a bfloat16 fragment of bfloat16 data."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), S: T.Tensor((M,), T.bfloat16)):
        with T.Kernel(M, threads=128) as bx:
            x = T.alloc_fragment((1, N), T.bfloat16)
            s = T.alloc_fragment((1,), T.bfloat16)
            T.copy(X[bx:bx + 1, :], x)
            T.reduce_sum(x, s, dim=1)
            S[bx] = s[0]
    return main


def half_fragment_accumulate(M=64, N=128, K=8):
    """A float16 fragment accumulated with ``+=`` in ``T.Parallel`` over K slices, each term a
    half times a Python float constant."""

    @T.prim_func
    def main(X: T.Tensor((K, M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // 64, threads=128) as bx:
            acc = T.alloc_fragment((64, N), T.float16)
            T.clear(acc)
            for k in T.serial(K):
                for i, j in T.Parallel(64, N):
                    acc[i, j] += X[k, bx * 64 + i, j] * 0.5
            T.copy(acc, Y[bx * 64, 0])
    return main


def mixed_half_float_scale(n=1024, blk=256):
    """``half * float`` (a float16 tensor times a float32 tensor): TVM promotes to float32;
    the product is stored to a float32 output and rounded once."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float16), S: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                Y[bx * blk + i] = A[bx * blk + i] * S[bx * blk + i]
    return main


def big_flat_axpy(n=2**32, blk=1024):
    """``Y = a * X + Y`` over a flat 2^32-element float16 tensor: ``bx * blk`` passes 2^31
    for the upper half of the grid, so the offset must be 64-bit (compile-only)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.float16)):
        with T.Kernel(n // blk, threads=256) as bx:
            for i in T.Parallel(blk):
                Y[bx * blk + i] = X[bx * blk + i] * T.float16(0.5) + Y[bx * blk + i]
    return main


def int64_shape_rows_copy(M=2**20, N=4096, bm=4):
    """A copy with ``T.int64`` shapes (M * N = 2^32 elements) through a shared tile, rows
    addressed ``by * bm`` (compile-only)."""

    @T.prim_func
    def main(A: T.Tensor((T.int64(M), T.int64(N)), T.float16),
             B: T.Tensor((T.int64(M), T.int64(N)), T.float16)):
        with T.Kernel(M // bm, threads=128) as by:
            s = T.alloc_shared((bm, N), T.float16)
            T.copy(A[by * bm, 0], s)
            T.copy(s, B[by * bm, 0])
    return main


def big_flat_even_gather(n=2**32, blk=256):
    """``Y[k] = X[2 * k]`` over a 2^32-element X: the strided read is a scalar access whose
    index ``(bx * blk + i) * 2`` passes 2^31 (compile-only)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n // 2,), T.float32)):
        with T.Kernel(n // 2 // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                Y[bx * blk + i] = X[(bx * blk + i) * 2] + X[(bx * blk + i) * 2 + 1]
    return main


def big_flat_atomic_add(n=2**32, blk=256):
    """``Y += X`` with ``T.atomic_add`` over 2^32-element tensors (the atomic's coordinate
    passes 2^31; compile-only)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                T.atomic_add(Y[bx * blk + i], X[bx * blk + i])
    return main


def select_mixed_dtypes(n=512, blk=128):
    """``T.if_then_else`` whose branches differ in dtype: an int8 beside a Python int (int32:
    1000 is not wrapped), a float16 beside a Python float (float32, as TVM types the float),
    and int8 arithmetic in both branches (C's promotions: ``a * a`` is the whole int product,
    ``a - 100`` is not wrapped)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int8), H: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.int32),
             Z: T.Tensor((n,), T.float32), W: T.Tensor((n,), T.int32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                k = bx * blk + i
                Y[k] = T.if_then_else(A[k] > 0, A[k], 1000)
                Z[k] = T.if_then_else(H[k] > T.float16(0), H[k], 0.1)
                W[k] = T.if_then_else(A[k] > 0, A[k] * A[k], A[k] - 100)
    return main


def int64_page_offsets(B=64, pages=16, page_bytes=2**22):
    """A paged-cache offset table: ``Offs[b, p] = (b * pages + p) * page_bytes`` over
    ``T.serial(T.int64(pages))``; the int64 loop variable carries the product past 2^31
    (int32 would wrap from page 512 on)."""

    @T.prim_func
    def main(Offs: T.Tensor((B, pages), T.int64)):
        with T.Kernel(B, threads=32) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                for p in T.serial(T.int64(pages)):
                    Offs[bx, p] = (bx * pages + p) * page_bytes
    return main


def unsigned_underflow_compare(n=512, blk=128):
    """Unsigned arithmetic compared and widened as TileLang's CUDA C does it: a uint16
    ``u - 1`` is promoted to int (0 - 1 is -1, below 10), a uint32 ``v - 1`` wraps (0 - 1 is
    4294967295, not below 10); ``u * u`` of uint16s is an int product, ``v * v`` of uint32s
    wraps modulo 2^32."""

    @T.prim_func
    def main(U: T.Tensor((n,), T.uint16), V: T.Tensor((n,), T.uint32), Y: T.Tensor((n, 4), T.int32)):
        with T.Kernel(n // blk, threads=blk) as bx:
            for i in T.Parallel(blk):
                k = bx * blk + i
                Y[k, 0] = T.if_then_else(U[k] - T.uint16(1) < T.uint16(10), 1, 0)
                Y[k, 1] = T.if_then_else(V[k] - T.uint32(1) < T.uint32(10), 1, 0)
                Y[k, 2] = T.cast(U[k] * U[k], "int32")
                Y[k, 3] = T.cast(V[k] * V[k], "int32")
    return main
