"""A fourth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at kernel *structure* and *layout* forms, where bugs hide between passes:
``T.macro`` kernels (macros calling macros, with fragment and shared arguments, one
macro in two kernels), several ``T.Kernel`` blocks of one prim_func sharing a
``T.alloc_global`` workspace, symbolic shapes tied across tensors and used in loop bounds
and ``T.ceildiv`` grids; loops around ``T.Pipelined`` (a serial loop over heads with a
pipelined loop inside, two pipelined loops sharing shared tiles, an ``if`` on the
pipelined variable); ``T.gemm`` in its operand placements (shared / fragment,
transposes, policies, ``clear_accum``, two GEMMs into one accumulator, tiles of 64x64 to
256x128 with 128/256/384 threads, fp16/bf16/fp8/int8/tf32) with epilogues through
shared; ``T.annotate_layout`` and ``T.use_swizzle`` in both orders; fragment-to-fragment
copies of different layouts, a slice of an accumulator copied to global at an offset,
``T.reduce`` of an accumulator along both dims.
``tests/test_unseen_programs4.py`` builds each to an sm_90a cubin on the CPU and, on a
GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T
import tilecute.layout as L


# ---- macros -----------------------------------------------------------------------------
@T.macro
def _scale_tile(frag, factor):
    for i, j in T.Parallel(*frag.shape):
        frag[i, j] = frag[i, j] * factor


@T.macro
def _load_scale(src, row0, col0, shared, frag, factor):
    T.copy(src[row0, col0], shared)
    T.copy(shared, frag)
    _scale_tile(frag, factor)


@T.macro
def _row_stats(frag, mx, sm):
    T.reduce_max(frag, mx, dim=1)
    T.reduce_sum(frag, sm, dim=1)


def macro_composed(M=128, N=128, bm=32, bn=64):
    """Macros calling macros with shared, fragment and expression arguments: each block
    loads its (bm, bn) tile scaled by 3 through a shared tile, then a second macro takes
    row max and sum of it; the tile plus 1 is written back."""

    @T.prim_func
    def composed(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
                 Mx: T.Tensor((M, N // bn), T.float32), Sm: T.Tensor((M, N // bn), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            _load_scale(A, by * bm, bx * bn, s, f, 3.0)
            _row_stats(f, mx, sm)
            for i in T.Parallel(bm):
                Mx[by * bm + i, bx] = mx[i]
                Sm[by * bm + i, bx] = sm[i]
            _scale_tile(f, 0.5)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, B[by * bm, bx * bn])
    return composed


def macro_second_kernel(M=64, N=256, bm=16, bn=128):
    """The same macros in another kernel with other shapes and thread count (64): the
    macro's loop extents come from the fragment it is given."""

    @T.prim_func
    def second(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16),
               Mx: T.Tensor((M, N // bn), T.float32), Sm: T.Tensor((M, N // bn), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=64) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float16)
            f = T.alloc_fragment((bm, bn), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            _load_scale(A, by * bm, bx * bn, s, f, -2.0)
            _row_stats(f, mx, sm)
            for i in T.Parallel(bm):
                Mx[by * bm + i, bx] = mx[i]
                Sm[by * bm + i, bx] = sm[i]
            T.copy(f, B[by * bm, bx * bn])
    return second


# ---- several kernels, one workspace -------------------------------------------------------
def two_kernels_workspace(M=256, N=512, bm=32, bn=128):
    """Kernel 1 writes each (row, column block) partial row sum into a T.alloc_global
    workspace; kernel 2 adds the partials of each row and normalizes the row by its sum;
    a third kernel writes the sums out."""
    nb = N // bn

    @T.prim_func
    def two(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
            S: T.Tensor((M,), T.float32)):
        ws = T.alloc_global((M, nb), T.float32)
        with T.Kernel(nb, M // bm, threads=128) as (bx, by):
            f = T.alloc_fragment((bm, bn), T.float32)
            r = T.alloc_fragment((bm,), T.float32)
            T.copy(A[by * bm, bx * bn], f)
            T.reduce_sum(f, r, dim=1)
            for i in T.Parallel(bm):
                ws[by * bm + i, bx] = r[i]
        with T.Kernel(nb, M // bm, threads=128) as (bx, by):
            w = T.alloc_fragment((bm, nb), T.float32)
            tot = T.alloc_fragment((bm,), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            T.copy(ws[by * bm, 0], w)
            T.reduce_sum(w, tot, dim=1)
            T.copy(A[by * bm, bx * bn], f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] / tot[i]
            T.copy(f, B[by * bm, bx * bn])
        with T.Kernel(M // bm, threads=bm) as by:
            t = T.get_thread_binding()
            acc = T.alloc_var(T.float32)
            acc = 0.0
            for c in T.serial(nb):
                acc += ws[by * bm + t, c]
            S[by * bm + t] = acc
    return two


# ---- symbolic shapes --------------------------------------------------------------------
def symbolic_tied_gemm(block_M=64, block_N=64, block_K=32):
    """A (M, K) x B (K, N) -> C (M, N) with M, N, K dynamic: the K dim of A and B one
    symbol, grids T.ceildiv of them, the pipelined K loop T.ceildiv(K, block_K) with ragged
    last tiles (zeros read, nothing written), and a row bias of length M."""
    M, N, K = T.dynamic("M, N, K")

    @T.prim_func
    def tied(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             bias: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M:
                    C_l[i, j] = C_l[i, j] + bias[by * block_M + i]
            T.copy(C_l, C[by * block_M, bx * block_N])
    return tied


def symbolic_batched_rows(block_S=32):
    """X (B, S, D) with B and S dynamic and D static: one block per (batch, row block),
    rows past S skipped; a serial loop over D chunks; Y = X - mean over D; and a per-batch
    count of S written by block (0, 0) of each batch."""
    Bn, S = T.dynamic("B, S")
    D = 128

    @T.prim_func
    def batched(X: T.Tensor((Bn, S, D), T.float32), Y: T.Tensor((Bn, S, D), T.float32),
                Cnt: T.Tensor((Bn,), T.int32)):
        with T.Kernel(T.ceildiv(S, block_S), Bn, threads=128) as (bs, b):
            x = T.alloc_fragment((block_S, D), T.float32)
            mean = T.alloc_fragment((block_S,), T.float32)
            T.copy(X[b, bs * block_S:(bs + 1) * block_S, :], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_S):
                mean[i] = mean[i] / D
            for i, j in T.Parallel(block_S, D):
                x[i, j] = x[i, j] - mean[i]
            T.copy(x, Y[b, bs * block_S:(bs + 1) * block_S, :])
            if bs == 0:
                tx = T.get_thread_binding()
                if tx == 0:
                    Cnt[b] = S
    return batched


# ---- loops around T.Pipelined -------------------------------------------------------------
def heads_loop_pipelined(heads=4, M=128, N=64, K=256, block_M=64, block_K=32):
    """Per block a serial loop over heads, each with its own pipelined K loop (gemm of
    A[h] and B[h]) into an accumulator cleared per head, written to C[h]; and the sum over
    heads accumulated in a second fragment."""

    @T.prim_func
    def heads_loop(A: T.Tensor((heads, M, K), T.float16), B: T.Tensor((heads, K, N), T.float16),
                   C: T.Tensor((heads, M, N), T.float32), Tot: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // block_M, threads=128) as bm:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, N), T.float16)
            acc = T.alloc_fragment((block_M, N), T.float32)
            tot = T.alloc_fragment((block_M, N), T.float32)
            T.clear(tot)
            for h in T.serial(heads):
                T.clear(acc)
                for k in T.Pipelined(K // block_K, num_stages=3):
                    T.copy(A[h, bm * block_M, k * block_K], A_s)
                    T.copy(B[h, k * block_K, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[h, bm * block_M, 0])
                for i, j in T.Parallel(block_M, N):
                    tot[i, j] += acc[i, j]
            T.copy(tot, Tot[bm * block_M, 0])
    return heads_loop


def two_pipelined_shared(M=128, N=128, K1=128, K2=192, block_M=64, block_N=64, block_K=64):
    """Two pipelined K loops one after the other through the same shared tiles: C =
    A1 @ B1 + A2 @ B2 (the second accumulates into the first's fragment, clear_accum
    False), then a second accumulator for A2 @ B2 alone from a loop again sharing them."""

    @T.prim_func
    def two_loops(A1: T.Tensor((M, K1), T.float16), B1: T.Tensor((K1, N), T.float16),
                  A2: T.Tensor((M, K2), T.float16), B2: T.Tensor((K2, N), T.float16),
                  C: T.Tensor((M, N), T.float32), D: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            acc2 = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K1 // block_K, num_stages=2):
                T.copy(A1[by * block_M, k * block_K], A_s)
                T.copy(B1[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for k in T.Pipelined(K2 // block_K, num_stages=3):
                T.copy(A2[by * block_M, k * block_K], A_s)
                T.copy(B2[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for k in T.Pipelined(K2 // block_K, num_stages=2):
                T.copy(A2[by * block_M, k * block_K], A_s)
                T.copy(B2[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc2, clear_accum=(k == 0))
            T.copy(acc, C[by * block_M, bx * block_N])
            T.copy(acc2, D[by * block_M, bx * block_N])
    return two_loops


def pipelined_if_on_k(M=128, N=64, K=512, block_M=64, block_K=64):
    """A pipelined loop whose body branches on the loop variable: even steps add
    A_k @ B_k, odd ones subtract (B's tile negated in shared first), and the last step
    also records the running accumulator's row sums."""

    @T.prim_func
    def if_on_k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float32), R: T.Tensor((M,), T.float32)):
        with T.Kernel(M // block_M, threads=128) as bm:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, N), T.float16)
            acc = T.alloc_fragment((block_M, N), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[bm * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, 0], B_s)
                if k % 2 == 1:
                    for i, j in T.Parallel(block_K, N):
                        B_s[i, j] = -B_s[i, j]
                T.gemm(A_s, B_s, acc)
                if k == K // block_K - 1:
                    T.reduce_sum(acc, rs, dim=1)
                    for i in T.Parallel(block_M):
                        R[bm * block_M + i] = rs[i]
            T.copy(acc, C[bm * block_M, 0])
    return if_on_k


# ---- T.gemm operand placements ------------------------------------------------------------
def gemm_placement(M=128, N=128, K=128, block_M=64, block_N=64, block_K=32, trans_A=False,
                   trans_B=False, a_frag=False, b_frag=False, policy=T.GemmWarpPolicy.Square,
                   threads=128, in_dtype=T.float16, acc_dtype=T.float32, out_dtype=T.float32,
                   stages=2):
    """C = op(A) @ op(B) with A and/or B staged through a fragment (T.copy shared ->
    fragment, as TileLang's rs / sr forms), transposes, a policy and a thread count; the
    epilogue scales by 0.5 in T.Parallel and goes through a shared tile to global."""
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    as_shape = (block_K, block_M) if trans_A else (block_M, block_K)
    bs_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def placed(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
               C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_shape, in_dtype)
            B_s = T.alloc_shared(bs_shape, in_dtype)
            A_f = T.alloc_fragment(as_shape, in_dtype)
            B_f = T.alloc_fragment(bs_shape, in_dtype)
            C_l = T.alloc_fragment((block_M, block_N), acc_dtype)
            C_s = T.alloc_shared((block_M, block_N), out_dtype)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                if a_frag and b_frag:
                    T.copy(A_s, A_f)
                    T.copy(B_s, B_f)
                    T.gemm(A_f, B_f, C_l, trans_A, trans_B, policy=policy)
                elif a_frag:
                    T.copy(A_s, A_f)
                    T.gemm(A_f, B_s, C_l, trans_A, trans_B, policy=policy)
                elif b_frag:
                    T.copy(B_s, B_f)
                    T.gemm(A_s, B_f, C_l, trans_A, trans_B, policy=policy)
                else:
                    T.gemm(A_s, B_s, C_l, trans_A, trans_B, policy=policy)
            for i, j in T.Parallel(block_M, block_N):
                C_s[i, j] = C_l[i, j] * 0.5
            T.copy(C_s, C[by * block_M, bx * block_N])
    return placed


def gemm_two_into_one(M=128, N=128, K=128, block_M=128, block_N=128, block_K=64, threads=256):
    """Two GEMMs per step into one accumulator (A @ B + A2 @ B2^T), the first step's
    first GEMM clearing it (clear_accum=(k == 0)); the epilogue subtracts a column bias
    read from global and writes bf16."""

    @T.prim_func
    def two_into_one(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
                     A2: T.Tensor((M, K), T.bfloat16), B2: T.Tensor((N, K), T.bfloat16),
                     cb: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // block_N, M // block_M, threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_K, block_N), T.bfloat16)
            A2_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B2_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.copy(A2[by * block_M, k * block_K], A2_s)
                T.copy(B2[bx * block_N, k * block_K], B2_s)
                T.gemm(A_s, B_s, acc, clear_accum=(k == 0))
                T.gemm(A2_s, B2_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] - cb[bx * block_N + j]
            T.copy(acc, C[by * block_M, bx * block_N])
    return two_into_one


def gemm_big_tile_384(M=256, N=256, K=128, block_M=192, block_N=128, block_K=64):
    """A 192x128 tile over 384 threads (three warpgroups along M), M ragged (256 = 192 +
    64: the second row block half empty), fp16 out through shared."""

    @T.prim_func
    def big384(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=384) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.float16)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])
    return big384


def gemm_256x128(M=512, N=256, K=256, block_M=256, block_N=128, block_K=32, policy=None):
    """A 256x128 tile with 256 threads; the accumulator's rows then reduced (max) and its
    columns summed, both written out with the product."""
    policy = T.GemmWarpPolicy.Square if policy is None else policy

    @T.prim_func
    def big(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
            C: T.Tensor((M, N), T.float32), RowMax: T.Tensor((M, N // block_N), T.float32),
            ColSum: T.Tensor((M // block_M, N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            rmax = T.alloc_fragment((block_M,), T.float32)
            csum = T.alloc_fragment((block_N,), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True, policy=policy)
            T.reduce_max(C_l, rmax, dim=1)
            T.reduce_sum(C_l, csum, dim=0)
            T.copy(C_l, C[by * block_M, bx * block_N])
            for i in T.Parallel(block_M):
                RowMax[by * block_M + i, bx] = rmax[i]
            for j in T.Parallel(block_N):
                ColSum[by, bx * block_N + j] = csum[j]
    return big


def gemm_tf32(M=128, N=128, K=128, block_M=64, block_N=64, block_K=32):
    """tf32 GEMM with B as N x K (TileLang's tf32 is K-major), fp32 accumulation."""

    @T.prim_func
    def tf32(A: T.Tensor((M, K), T.float32), B: T.Tensor((N, K), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.tfloat32)
            B_s = T.alloc_shared((block_N, block_K), T.tfloat32)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return tf32


def gemm_fp8_e5m2(M=128, N=128, K=256, block_M=64, block_N=64, block_K=64):
    """fp8 e5m2 x e5m2 (B as N x K) -> fp32 with the accumulator's slices copied to global
    at an offset: rows 16..48 of the tile to C[.. + 16], and the whole tile to D."""

    @T.prim_func
    def e5m2(A: T.Tensor((M, K), T.float8_e5m2), B: T.Tensor((N, K), T.float8_e5m2),
             C: T.Tensor((M, N), T.float32), D: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e5m2)
            B_s = T.alloc_shared((block_N, block_K), T.float8_e5m2)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l[16:48, 0:block_N], C[by * block_M + 16, bx * block_N])
            T.copy(C_l, D[by * block_M, bx * block_N])
    return e5m2


# ---- layouts ------------------------------------------------------------------------------
def annotated_swizzle_epilogue(M=256, N=256, K=256, block_M=128, block_N=128, block_K=64,
                               order="row", panel=2):
    """make_swizzled_layout on the A/B tiles and on the output tile of the epilogue (which
    a T.Parallel writes and reads transposed: C[i, j] + Cs[j, i]), with T.use_swizzle(panel,
    order)."""

    @T.prim_func
    def annotated(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.float16)
            T.annotate_layout({A_s: L.make_swizzled_layout(A_s),
                               B_s: L.make_swizzled_layout(B_s),
                               C_s: L.make_swizzled_layout(C_s)})
            T.use_swizzle(panel, order=order)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = C_l[i, j] + C_s[j, i]
            T.copy(C_l, C[by * block_M, bx * block_N])
    return annotated


def accumulator_relayout(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32):
    """The accumulator copied into a plain fragment (a different layout), the copy
    transformed (x * 2 - row index), then to shared and out; and the plain fragment's
    column max (dim=0) and the accumulator's row sums (dim=1)."""

    @T.prim_func
    def relayout(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                 C: T.Tensor((M, N), T.float32), CM: T.Tensor((M // block_M, N), T.float32),
                 RS: T.Tensor((M, N // block_N), T.float32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            blk = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.float32)
            cm = T.alloc_fragment((block_N,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=1):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, blk)
            for i, j in T.Parallel(block_M, block_N):
                blk[i, j] = blk[i, j] * 2.0 - i
            T.reduce_max(blk, cm, dim=0)
            T.reduce_sum(acc, rs, dim=1)
            T.copy(blk, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])
            for j in T.Parallel(block_N):
                CM[by, bx * block_N + j] = cm[j]
            for i in T.Parallel(block_M):
                RS[by * block_M + i, bx] = rs[i]
    return relayout


def int8_gemm_colreduce(M=128, N=128, K=256, block_M=64, block_N=128, block_K=64):
    """int8 GEMM (B as N x K), FullCol policy, the int32 accumulator's column sums
    (dim=0) and row maxima (dim=1), and the tile through shared to global."""

    @T.prim_func
    def icol(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8),
             C: T.Tensor((M, N), T.int32), CS: T.Tensor((M // block_M, N), T.int32),
             RM: T.Tensor((M,), T.int32)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            B_s = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            cs = T.alloc_fragment((block_N,), T.int32)
            rm = T.alloc_fragment((block_M,), T.int32)
            C_s = T.alloc_shared((block_M, block_N), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_sum(acc, cs, dim=0)
            T.reduce_max(acc, rm, dim=1)
            T.copy(acc, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])
            for j in T.Parallel(block_N):
                CS[by, bx * block_N + j] = cs[j]
            for i in T.Parallel(block_M):
                RM[by * block_M + i] = rm[i]
    return icol


# ---- macros holding pipelined loops ------------------------------------------------------
@T.macro
def _gemm_tiles(A, B, A_s, B_s, acc, row0, col0, k_tiles, block_K):
    for k in T.Pipelined(k_tiles, num_stages=2):
        T.copy(A[row0, k * block_K], A_s)
        T.copy(B[k * block_K, col0], B_s)
        T.gemm(A_s, B_s, acc)


@T.macro
def _store_scaled(acc, out_s, Out, row0, col0, factor):
    for i, j in T.Parallel(*acc.shape):
        out_s[i, j] = acc[i, j] * factor
    T.copy(out_s, Out[row0, col0])


def macro_pipelined_twice(M=128, N=128, K=128, bm=64, bn=64, bk=32):
    """A macro holding a pipelined GEMM loop called twice in one kernel (A @ B, then
    A2 @ B accumulated on top: C = A @ B + A2 @ B, and D = 2 * (A2 @ B) from a second
    accumulator), through the same shared tiles; a second macro stores through shared."""

    @T.prim_func
    def twice(A: T.Tensor((M, K), T.float16), A2: T.Tensor((M, K), T.float16),
              B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32),
              D: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            acc2 = T.alloc_fragment((bm, bn), T.float32)
            out_s = T.alloc_shared((bm, bn), T.float32)
            T.clear(acc)
            T.clear(acc2)
            _gemm_tiles(A, B, A_s, B_s, acc, by * bm, bx * bn, K // bk, bk)
            _gemm_tiles(A2, B, A_s, B_s, acc2, by * bm, bx * bn, K // bk, bk)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] += acc2[i, j]
            _store_scaled(acc, out_s, C, by * bm, bx * bn, 1.0)
            _store_scaled(acc2, out_s, D, by * bm, bx * bn, 2.0)
    return twice


# ---- the accumulator loaded before the GEMM ------------------------------------------------
def gemm_accumulate_onto(M=128, N=128, K=128, bm=64, bn=64, bk=32):
    """C = Cin + A @ B with the accumulator loaded from global (T.copy(Cin[...], acc), as
    TileLang's beta=1 GEMMs) and E = R + A @ B with it loaded from a blocked fragment that
    a T.Parallel filled (R + 0 * i); both without clearing."""

    @T.prim_func
    def onto(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Cin: T.Tensor((M, N), T.float32), R: T.Tensor((M, N), T.float32),
             C: T.Tensor((M, N), T.float32), E: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            acc2 = T.alloc_fragment((bm, bn), T.float32)
            blk = T.alloc_fragment((bm, bn), T.float32)
            T.copy(Cin[by * bm, bx * bn], acc)
            T.copy(R[by * bm, bx * bn], blk)
            for i, j in T.Parallel(bm, bn):
                blk[i, j] = blk[i, j] + i * 0.0
            T.copy(blk, acc2)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
                T.gemm(A_s, B_s, acc2)
            T.copy(acc, C[by * bm, bx * bn])
            T.copy(acc2, E[by * bm, bx * bn])
    return onto


# ---- T.use_swizzle on ragged grids -----------------------------------------------------------
def swizzle_ragged_grid(M=7 * 32, N=5 * 32, K=64, bm=32, bn=32, bk=32, panel=3, order="column"):
    """A GEMM over a 5 x 7 grid of 32 x 32 tiles with T.use_swizzle(3, order): the
    rasterization permutes which block computes which tile, never the result; each tile
    also records the block that computed it (Who[row tile, col tile] = the swizzled
    index's flat value)."""

    @T.prim_func
    def ragged(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32), Who: T.Tensor((M // bm, N // bn), T.int32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(panel, order=order)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=1):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
            tx = T.get_thread_binding()
            if tx == 0:
                Who[by, bx] = by * 1000 + bx
    return ragged


# ---- column reductions of an accumulator across steps ------------------------------------------
def accumulator_colsum_steps(M=128, N=64, K=256, bm=128, bk=64):
    """Per K step a GEMM with clear_accum=True (each step's own product A_k @ B_k), its
    column sums added up over the steps with T.reduce_sum(acc, cs, dim=0, clear=False)
    and its row maxima kept as a running max (T.reduce_max(..., dim=1, clear=False)):
    cs = colsum(A @ B), rm[i] = max over k of max_j (A_k @ B_k)[i, j]."""

    @T.prim_func
    def colsteps(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                 CS: T.Tensor((N,), T.float32), RM: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, N), T.float16)
            acc = T.alloc_fragment((bm, N), T.float32)
            cs = T.alloc_fragment((N,), T.float32)
            rm = T.alloc_fragment((bm,), T.float32)
            T.clear(cs)
            T.fill(rm, -T.infinity(T.float32))
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[0, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, acc, clear_accum=True)
                T.reduce_sum(acc, cs, dim=0, clear=False)
                T.reduce_max(acc, rm, dim=1, clear=False)
            T.copy(cs, CS)
            T.copy(rm, RM)
    return colsteps


# ---- symbolic shapes tied across tensors ------------------------------------------------------
def symbolic_segments(block=64, D=64):
    """X (S, D) and a ragged segment table Off (G + 1,) with S and G dynamic: block g sums
    the rows Off[g]..Off[g + 1] (a run-time serial loop of T.ceildiv(len, block) chunks,
    each chunk copied with a guard at the segment's end), Y (G, D); and Z = X * 2 over
    T.ceildiv(S, block) blocks of a second kernel sharing S."""
    S, G = T.dynamic("S, G")

    @T.prim_func
    def segments(X: T.Tensor((S, D), T.float32), Off: T.Tensor((G + 1,), T.int32),
                 Y: T.Tensor((G, D), T.float32), Z: T.Tensor((S, D), T.float32)):
        with T.Kernel(G, threads=128) as g:
            x = T.alloc_fragment((block, D), T.float32)
            acc = T.alloc_fragment((D,), T.float32)
            part = T.alloc_fragment((D,), T.float32)
            start = Off[g]
            stop = Off[g + 1]
            T.clear(acc)
            for c in T.serial(T.ceildiv(stop - start, block)):
                for i, j in T.Parallel(block, D):
                    x[i, j] = T.if_then_else(start + c * block + i < stop,
                                             X[start + c * block + i, j], 0.0)
                T.reduce_sum(x, part, dim=0)
                for j in T.Parallel(D):
                    acc[j] += part[j]
            T.copy(acc, Y[g, :])
        with T.Kernel(T.ceildiv(S, block), threads=128) as b:
            x = T.alloc_fragment((block, D), T.float32)
            T.copy(X[b * block, 0], x)
            for i, j in T.Parallel(block, D):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, Z[b * block, 0])
    return segments


def splitk_workspace_tma(M=128, N=128, K=256, bm=64, bn=64, bk=32, splits=4):
    """Split-K through a T.alloc_global workspace of shape (splits, M, N): kernel 1's
    block (bx, by, s) writes its partial product through a shared tile (a TMA store into
    the workspace), kernel 2 reads the partials back through shared tiles (TMA loads of
    the workspace) and adds them; C = A @ B."""
    kps = K // splits

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32)):
        ws = T.alloc_global((splits, M, N), T.float32)
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, s):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            out_s = T.alloc_shared((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kps // bk, num_stages=2):
                T.copy(A[by * bm, s * kps + k * bk], A_s)
                T.copy(B[s * kps + k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, out_s)
            T.copy(out_s, ws[s, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            part_s = T.alloc_shared((bm, bn), T.float32)
            tot = T.alloc_fragment((bm, bn), T.float32)
            T.clear(tot)
            for s in T.serial(splits):
                T.copy(ws[s, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], part_s)
                for i, j in T.Parallel(bm, bn):
                    tot[i, j] += part_s[i, j]
            T.copy(tot, C[by * bm, bx * bn])
    return splitk


def symbolic_transpose_tied(block=32):
    """B (N, M) = A (M, N)^T + bias (N,) with M and N dynamic, tied across the three
    tensors: tiles through shared read off both ragged edges (zeros), written back only
    inside; a second output counts the tiles (T.atomic_add) to check the grid
    T.ceildiv(N, block) x T.ceildiv(M, block)."""
    M, N = T.dynamic("M, N")

    @T.prim_func
    def transpose(A: T.Tensor((M, N), T.float32), bias: T.Tensor((N,), T.float32),
                  B: T.Tensor((N, M), T.float32), Tiles: T.Tensor((1,), T.int32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            s = T.alloc_shared((block, block), T.float32)
            t = T.alloc_fragment((block, block), T.float32)
            T.copy(A[by * block, bx * block], s)
            for j, i in T.Parallel(block, block):
                t[j, i] = s[i, j] + T.if_then_else(bx * block + j < N, bias[bx * block + j], 0.0)
            T.copy(t, B[bx * block, by * block])
            tx = T.get_thread_binding()
            if tx == 0:
                T.atomic_add(Tiles[0], 1)
    return transpose


def pipelined_conditional_load(M=128, N=64, K=512, bm=64, bk=64, stages=2):
    """A pipelined loop that loads B's tile only on even steps (odd steps reuse the tile
    the even step before loaded: the program sees one B_s) and A's on every step:
    C = sum over k of A_k @ B_(k - k % 2)."""

    @T.prim_func
    def cond_load(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as b:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, N), T.float16)
            acc = T.alloc_fragment((bm, N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[b * bm, k * bk], A_s)
                if k % 2 == 0:
                    T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[b * bm, 0])
    return cond_load


def manual_double_buffer(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """A hand-written double buffer in a plain serial loop: tiles live in (2, ...) shared
    buffers, step k prefetches tile k + 1 into slot (k + 1) % 2 and multiplies slot
    k % 2 (T.gemm of A_s[k % 2, :, :] and B_s[k % 2, :, :]); the whole is synchronous in
    TileLang's meaning, so C = A @ B."""
    steps = K // bk

    @T.prim_func
    def manual(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((2, bm, bk), T.float16)
            B_s = T.alloc_shared((2, bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            T.copy(A[by * bm, 0], A_s[0, :, :])
            T.copy(B[0, bx * bn], B_s[0, :, :])
            for k in T.serial(steps):
                if k + 1 < steps:
                    T.copy(A[by * bm, (k + 1) * bk], A_s[(k + 1) % 2, :, :])
                    T.copy(B[(k + 1) * bk, bx * bn], B_s[(k + 1) % 2, :, :])
                T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], acc)
            T.copy(acc, C[by * bm, bx * bn])
    return manual


def chunked_epilogue(M=256, N=512, K=128, bm=128, bn=256, bk=64, chunk=64):
    """A 128x256 accumulator over 256 threads written out a column chunk at a time through
    one small shared tile (for c in T.unroll: T.copy(acc[:, c * 64:(c + 1) * 64], C_s) and
    the tile to C), after a row bias added in T.Parallel; fp16 out."""

    @T.prim_func
    def chunked(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                bias: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            C_s = T.alloc_shared((bm, chunk), T.float16)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] += bias[by * bm + i]
            for c in T.unroll(bn // chunk):
                T.copy(acc[:, c * chunk:(c + 1) * chunk], C_s)
                T.copy(C_s, C[by * bm, bx * bn + c * chunk])
    return chunked


def swizzle_before_after(gx=5, gy=7, panel=2, order="row"):
    """T.use_swizzle rebinds the block indices from where it stands on (TileLang's attr
    over the rest of the kernel: a `const dim3 blockIdx` shadowing the launch's): a block
    records its launch index (held in a T.alloc_var: an integer Let of the block index
    would be inlined and read the rasterized index after the call, as TileLang 0.1.15's
    Simplify inlines it) before the call, writes it at the rasterized index after, and
    copies its tile of A at the rasterized index."""

    @T.prim_func
    def before_after(A: T.Tensor((gy * 16, gx * 16), T.float32),
                     B: T.Tensor((gy * 16, gx * 16), T.float32),
                     Before: T.Tensor((gy, gx), T.int32), After: T.Tensor((gy, gx), T.int32)):
        with T.Kernel(gx, gy, threads=64) as (bx, by):
            tx = T.get_thread_binding()
            launch = T.alloc_var(T.int32)
            launch = by * gx + bx
            if tx == 0:
                Before[by, bx] = launch
            T.use_swizzle(panel, order=order)
            f = T.alloc_fragment((16, 16), T.float32)
            T.copy(A[by * 16, bx * 16], f)
            T.copy(f, B[by * 16, bx * 16])
            if tx == 0:
                After[by, bx] = launch
    return before_after


def heads_loop_tma_odd(heads=3, M=128, N=64, K=192, block_M=64, block_K=64, stages=2):
    """A serial loop over heads around a pipelined K loop of an odd number of steps (3)
    over 2-D tensors (heads stacked along rows), so TMA tiles and their barriers carry
    their phase from one head to the next: C[h] = A[h] @ B[h]."""

    @T.prim_func
    def heads_odd(A: T.Tensor((heads * M, K), T.float16), B: T.Tensor((heads * K, N), T.float16),
                  C: T.Tensor((heads * M, N), T.float32)):
        with T.Kernel(M // block_M, threads=128) as bm:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, N), T.float16)
            acc = T.alloc_fragment((block_M, N), T.float32)
            for h in T.serial(heads):
                T.clear(acc)
                for k in T.Pipelined(K // block_K, num_stages=stages):
                    T.copy(A[h * M + bm * block_M, k * block_K], A_s)
                    T.copy(B[h * K + k * block_K, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[h * M + bm * block_M, 0])
    return heads_odd


def symbolic_workspace(N=256, bm=32, bn=64):
    """A T.alloc_global workspace of shape (M, N // bn) with M dynamic (bound by A's
    rows): kernel 1 writes each row block's partial row sums under a guard at M, kernel 2
    (a different grid, T.ceildiv(M, 128) blocks of one thread per row) adds them up."""
    M = T.dynamic("M")
    nb = N // bn

    @T.prim_func
    def ws_rows(A: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        ws = T.alloc_global((M, nb), T.float32)
        with T.Kernel(nb, T.ceildiv(M, bm), threads=128) as (bx, by):
            x = T.alloc_fragment((bm, bn), T.float32)
            r = T.alloc_fragment((bm,), T.float32)
            T.copy(A[by * bm, bx * bn], x)
            T.reduce_sum(x, r, dim=1)
            for i in T.Parallel(bm):
                if by * bm + i < M:
                    ws[by * bm + i, bx] = r[i]
        with T.Kernel(T.ceildiv(M, 128), threads=128) as b:
            t = T.get_thread_binding()
            if b * 128 + t < M:
                acc = T.alloc_var(T.float32)
                acc = 0.0
                for c in T.serial(nb):
                    acc += ws[b * 128 + t, c]
                S[b * 128 + t] = acc
    return ws_rows


def symbolic_gated_gemm(block_M=64, block_N=64, block_K=32):
    """C = (A @ W[:, :N]) * (A @ W[:, N:]) with W of shape (K, 2 * N) and M, N dynamic
    (K static): a dim that is an expression of a symbol, two GEMMs per step into two
    accumulators from tiles of one tensor N columns apart, a product epilogue; rows
    past M read as zeros and are not written."""
    M, N = T.dynamic("M, N")
    K = 128

    @T.prim_func
    def gated(A: T.Tensor((M, K), T.float16), Wt: T.Tensor((K, 2 * N), T.float16),
              C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            G_s = T.alloc_shared((block_K, block_N), T.float16)
            U_s = T.alloc_shared((block_K, block_N), T.float16)
            g = T.alloc_fragment((block_M, block_N), T.float32)
            u = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Wt[k * block_K, bx * block_N], G_s)
                T.copy(Wt[k * block_K, N + bx * block_N], U_s)
                T.gemm(A_s, G_s, g)
                T.gemm(A_s, U_s, u)
            for i, j in T.Parallel(block_M, block_N):
                g[i, j] = g[i, j] * u[i, j]
            T.copy(g, C[by * block_M, bx * block_N])
    return gated


def transposed_epilogue(M=256, N=128, K=128, bm=128, bn=64, bk=64):
    """Ct = (A @ B)^T written through a shared tile the epilogue fills transposed
    (C_s[j, i] = acc[i, j] + col bias[j]), then copied whole to Ct's (bn, bm) tile; and
    the accumulator's row maxima through a 1-D shared tile."""

    @T.prim_func
    def trans_epi(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  bias: T.Tensor((N,), T.float32), Ct: T.Tensor((N, M), T.float16),
                  RM: T.Tensor((N // bn, M), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            C_s = T.alloc_shared((bn, bm), T.float16)
            rm = T.alloc_fragment((bm,), T.float32)
            rm_s = T.alloc_shared((bm,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                C_s[j, i] = acc[i, j] + bias[bx * bn + j]
            T.copy(C_s, Ct[bx * bn, by * bm])
            T.reduce_max(acc, rm, dim=1)
            T.copy(rm, rm_s)
            T.copy(rm_s, RM[bx, by * bm:(by + 1) * bm])
    return trans_epi


@T.macro
def _tile_rowsum(src, dst, r0, scale):
    tmp = T.alloc_fragment((32, 64), T.float32)
    sh = T.alloc_shared((32, 64), T.float32)
    T.copy(src[r0, 0], sh)
    T.copy(sh, tmp)
    for i, j in T.Parallel(32, 64):
        tmp[i, j] = tmp[i, j] * scale
    T.reduce_sum(tmp, dst, dim=1)


def macro_allocates_twice(M=64, N=64):
    """A macro that allocates its own shared and fragment tiles, called twice in one kernel
    (each call its own buffers, hygienic): R[0] = rowsum(A[:32]), R[1] = 2 * rowsum(A[32:])."""

    @T.prim_func
    def twice_alloc(A: T.Tensor((M, N), T.float32), R: T.Tensor((2, 32), T.float32)):
        with T.Kernel(1, threads=128) as _:
            r1 = T.alloc_fragment((32,), T.float32)
            r2 = T.alloc_fragment((32,), T.float32)
            _tile_rowsum(A, r1, 0, 1.0)
            _tile_rowsum(A, r2, 32, 2.0)
            for i in T.Parallel(32):
                R[0, i] = r1[i]
                R[1, i] = r2[i]
    return twice_alloc
