"""An eighth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at *tile shapes and thread counts*: code that is right for the common
shapes (64 rows per warpgroup, 128 threads) and wrong for less common ones is the silent
wrong answer these sweep for.  Flash-attention loops at block_M 64..256, block_N 32..128,
128..384 threads, FullRow / Square policies, 1..3 stages, causal or not; GEMMs whose A
operand is a register fragment (``T.copy(acc, frag16)`` then ``T.gemm(frag16, B_s, acc2)``)
at 64..256 rows per warpgroup, on wgmma and on mma.sync; row / column reductions,
row-statistic broadcasts and ``T.cumsum`` over accumulators of those shapes; epilogues
through swizzled shared tiles and straight to global with ragged edges; blocks of 96 / 160 /
224 threads.  ``tests/test_unseen_programs8.py`` builds each to an sm_90a cubin on the CPU
and, on a GPU, compares it with torch.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T
import tilecute.layout as L

POLICIES = {"FullRow": T.GemmWarpPolicy.FullRow, "Square": T.GemmWarpPolicy.Square,
            "FullCol": T.GemmWarpPolicy.FullCol}


# ---- flash attention -------------------------------------------------------------------------
def flash_fwd(heads=2, seq=256, dim=64, block_M=128, block_N=64, threads=256, policy="FullRow",
              stages=2, causal=False):
    """O = softmax(Q K^T / sqrt(dim)) V per head (Q, K, V, O of shape (heads, seq, dim)), the
    key loop a T.Pipelined over block_N keys; the causal variant masks with T.if_then_else
    and stops the loop at the diagonal.  Both gemms take ``policy``; the row max / sum are
    T.reduce_max / T.reduce_sum over the (block_M, block_N) accumulator; the probabilities
    are cast to fp16 with T.copy(S, P) and P is the A operand (a register fragment) of P @ V.
    Also writes the log-sum-exp (natural log) of each row to L."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    pol = POLICIES[policy]

    @T.prim_func
    def fwd(Q: T.Tensor((heads, seq, dim), T.float16), K: T.Tensor((heads, seq, dim), T.float16),
            V: T.Tensor((heads, seq, dim), T.float16), O: T.Tensor((heads, seq, dim), T.float16),
            Lse: T.Tensor((heads, seq), T.float32)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, threads=threads) as (bx, h):
            q_s = T.alloc_shared((block_M, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.float16)
            o = T.alloc_fragment((block_M, dim), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            alpha = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            l_step = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[h, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.clear(o)
            T.clear(l)
            T.fill(m, -T.infinity(T.float32))
            steps = T.min(T.ceildiv(seq, block_N), T.ceildiv((bx + 1) * block_M, block_N)) \
                if causal else T.ceildiv(seq, block_N)
            for t in T.Pipelined(steps, num_stages=stages):
                T.copy(K[h, t * block_N:(t + 1) * block_N, :], k_s)
                T.copy(V[h, t * block_N:(t + 1) * block_N, :], v_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True, policy=pol)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(bx * block_M + i >= t * block_N + j, s[i, j],
                                                 -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_step[i]
                T.copy(s, p)
                for i, d in T.Parallel(block_M, dim):
                    o[i, d] *= alpha[i]
                T.gemm(p, v_s, o, policy=pol)
            for i, d in T.Parallel(block_M, dim):
                o[i, d] /= l[i]
            for i in T.Parallel(block_M):
                l[i] = T.log(l[i]) + m[i] * scale * 0.6931471805599453
            T.copy(o, O[h, bx * block_M:(bx + 1) * block_M, :])
            T.copy(l, Lse[h, bx * block_M:(bx + 1) * block_M])
    return fwd


# ---- register A operands ---------------------------------------------------------------------
def register_a_gemm(M=128, N=64, K=64, threads=128, transpose_B=False, policy="FullRow",
                    transpose_A=False):
    """acc = A @ B (A (M, K), or A^T stored (K, M) with transpose_A; B (K, N) fp16, one
    block), frag16 = T.copy(acc) (fp16, a
    register fragment), then acc2 = frag16 @ C (C (N, N), or C^T stored (N, N) with
    transpose_B) and D = acc2 (float32).  With FullRow each warpgroup holds M / (threads/128)
    rows: 64, 128, 192, 256 rows are 1..4 wgmma M steps (mma.sync: 1..4 16-row steps per warp
    times 4)."""
    pol = POLICIES[policy]
    c_shape = (N, N)
    a_shape = (K, M) if transpose_A else (M, K)

    @T.prim_func
    def rs(A: T.Tensor(a_shape, T.float16), B: T.Tensor((K, N), T.float16),
           C: T.Tensor(c_shape, T.float16), D: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared(a_shape, T.float16)
            b_s = T.alloc_shared((K, N), T.float16)
            c_s = T.alloc_shared(c_shape, T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            frag = T.alloc_fragment((M, N), T.float16)
            acc2 = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(C, c_s)
            T.gemm(a_s, b_s, acc, transpose_A=transpose_A, clear_accum=True, policy=pol)
            T.copy(acc, frag)
            T.gemm(frag, c_s, acc2, transpose_B=transpose_B, clear_accum=True, policy=pol)
            T.copy(acc2, D)
    return rs


# ---- reductions, broadcasts, scans over accumulators ----------------------------------------
def accumulator_statistics(M=128, N=64, K=32, threads=128, policy="FullRow", column_sums=True,
                           scan_dim=1):
    """acc = A @ B (one block); row max (dim=1) and column sums (dim=0, unless not
    ``column_sums``: ColSum is then left alone) of acc; Z = acc -
    rowmax broadcast over the row (a T.Parallel over the accumulator); R = T.reduce_sum of Z
    along dim=1 and the running sum of Z along ``scan_dim`` (T.cumsum of the accumulator in
    place) into W."""
    pol = POLICIES[policy]

    @T.prim_func
    def stats(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              RowMax: T.Tensor((M,), T.float32), ColSum: T.Tensor((N,), T.float32),
              Z: T.Tensor((M, N), T.float32), R: T.Tensor((M,), T.float32),
              W: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), T.float16)
            b_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            mx = T.alloc_fragment((M,), T.float32)
            cs = T.alloc_fragment((N,), T.float32)
            rs = T.alloc_fragment((M,), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            T.reduce_max(acc, mx, dim=1)
            if column_sums:
                T.reduce_sum(acc, cs, dim=0)
                T.copy(cs, ColSum)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] - mx[i]
            T.reduce_sum(acc, rs, dim=1)
            T.copy(mx, RowMax)
            T.copy(rs, R)
            T.copy(acc, Z)
            T.cumsum(acc, dim=scan_dim)
            T.copy(acc, W)
    return stats


# ---- epilogues -----------------------------------------------------------------------------
SWIZZLES = {"none": None, "default": L.make_swizzled_layout,
            "full_bank": L.make_full_bank_swizzled_layout,
            "half_bank": L.make_half_bank_swizzled_layout,
            "quarter_bank": L.make_quarter_bank_swizzled_layout}


def epilogue_through_shared(M=200, N=136, K=64, bm=128, bn=64, threads=128, swizzle="default",
                            out_dtype="float16", policy="FullRow"):
    """C = A @ B in (bm, bn) tiles with M, N not multiples of the tile: acc -> a shared
    (bm, bn) tile of out_dtype (annotated with ``swizzle``) -> C (the copy skips rows and
    columns past the end); the loads past the end read 0."""
    make = SWIZZLES[swizzle]
    pol = POLICIES[policy]

    @T.prim_func
    def epi(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
            C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, K), T.float16)
            b_s = T.alloc_shared((K, bn), T.float16)
            c_s = T.alloc_shared((bm, bn), out_dtype)
            acc = T.alloc_fragment((bm, bn), T.float32)
            if make is not None:
                T.annotate_layout({c_s: make(c_s)})
            T.copy(A[by * bm, 0], a_s)
            T.copy(B[0, bx * bn], b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            T.copy(acc, c_s)
            T.copy(c_s, C[by * bm, bx * bn])
    return epi


def epilogue_direct(M=200, N=136, K=96, bm=128, bn=64, bk=32, threads=128, stages=2,
                    policy="FullRow", out_dtype="float32"):
    """C = A @ B with a K loop (T.Pipelined) and the accumulator copied straight to C with
    ragged edges (T.copy(acc, C[by*bm, bx*bn]) skips elements past the end), plus the row
    sums of each tile into S[row, bx] (rows past M not written)."""
    pol = POLICIES[policy]

    @T.prim_func
    def direct(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), out_dtype), S: T.Tensor((M, T.ceildiv(N, bn)), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            r = T.alloc_fragment((bm,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, policy=pol)
            T.reduce_sum(acc, r, dim=1)
            T.copy(acc, C[by * bm, bx * bn])
            for i in T.Parallel(bm):
                if by * bm + i < M:
                    S[by * bm + i, bx] = r[i]
    return direct


# ---- blocks of 96 / 160 / 224 threads ----------------------------------------------------------
def odd_thread_block(M=100, N=80, bm=32, bn=48, threads=96):
    """Blocks of ``threads`` (not a multiple of 128, nor of the tile): X (M, N) tiles into a
    fragment (T.copy, ragged), Y = 3 X + 1 (T.Parallel), row max (dim=1) and column sums
    (dim=0) of the tile (the padding reads 0), the tile also through shared and back out
    negated to Z."""

    @T.prim_func
    def odd(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
            Z: T.Tensor((M, N), T.float32),
            RM: T.Tensor((M, T.ceildiv(N, bn)), T.float32),
            CS: T.Tensor((T.ceildiv(M, bm), N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            f = T.alloc_fragment((bm, bn), T.float32)
            s = T.alloc_shared((bm, bn), T.float32)
            rm = T.alloc_fragment((bm,), T.float32)
            cs = T.alloc_fragment((bn,), T.float32)
            T.copy(X[by * bm, bx * bn], f)
            T.reduce_max(f, rm, dim=1)
            T.reduce_sum(f, cs, dim=0)
            for i in T.Parallel(bm):
                if by * bm + i < M:
                    RM[by * bm + i, bx] = rm[i]
            for j in T.Parallel(bn):
                if bx * bn + j < N:
                    CS[by, bx * bn + j] = cs[j]
            T.copy(f, s)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 3.0 + 1.0
            T.copy(f, Y[by * bm, bx * bn])
            for i, j in T.Parallel(bm, bn):
                s[i, j] = -s[i, j]
            T.copy(s, Z[by * bm, bx * bn])
    return odd


def odd_thread_gemm(M=64, N=64, K=64, threads=160, policy="Square"):
    """A GEMM in a block of ``threads`` threads (not a multiple of 128: wgmma needs whole
    warpgroups, so tilecute runs it on mma.sync warps (M = 16 x warps with FullRow) or
    refuses it)."""
    pol = POLICIES[policy]

    @T.prim_func
    def g(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
          C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), T.float16)
            b_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            T.copy(acc, C)
    return g
