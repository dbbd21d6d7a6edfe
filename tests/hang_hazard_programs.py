"""Attention- and GEMM-like programs in TileLang's idioms that mix the MMA overlap's
warpgroup turns (two or three compute warpgroups, FullRow, 2 stages) or a producer
warpgroup on a small grid with statements that need barriers: shared tiles the threads
write, reductions and atomics into shared memory, prints, T.sync_threads, a second
pipelined loop, LSE through shared memory (tests/test_hang_hazards.py)."""

import tilecute
import tilecute.language as T

LOG2E = 1.4426950408889634


@tilecute.jit(out_idx=[3])
def fa_scale_in_shared(batch=1, heads=2, seq_len=256, dim=128, block_M=128, block_N=128,
                       threads=256, num_stages=2, shared_scale=True, print_step=False,
                       count_steps=False):
    """Attention whose rescale factors (and, optionally, a step counter bumped with an
    atomic) live in shared memory: the threads of one row stat write alpha, the threads
    holding acc_o's rows read it."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
             V: T.Tensor(shape, "float16"), O: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            V_s = T.alloc_shared((block_N, dim), "float16")
            alpha_s = T.alloc_shared((block_M,), "float32")
            steps = T.alloc_shared((1,), "int32")
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), "float16")
            acc_o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            l_step = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            if count_steps:
                steps[0] = 0
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha_s[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, l_step, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha_s[i] + l_step[i]
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= alpha_s[i]
                if count_steps:
                    T.atomic_add(steps[0], 1)
                if print_step:
                    T.print(k, msg="step")
                T.copy(S, P)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
                T.gemm(P, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


@tilecute.jit(out_idx=[2, 3])
def gemm_rowsum_epilogue(M=512, N=512, K=256, block_M=128, block_N=128, block_K=64,
                         threads=256, num_stages=2):
    """C = A B and the row sums of C, on a small grid (a producer warpgroup is added): the
    tile goes to shared memory, the block syncs, a shared reduction and an atomic count in
    shared memory, then the store."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16"), R: T.Tensor((M, N // block_N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_s = T.alloc_shared((block_M, block_N), "float32")
            rows = T.alloc_shared((block_M,), "float32")
            done = T.alloc_shared((1,), "int32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            if T.get_thread_binding() == 0:
                done[0] = 0
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.sync_threads()
            T.reduce_sum(C_s, rows, dim=1)
            T.atomic_add(done[0], 1)
            for i in T.Parallel(block_M):
                R[by * block_M + i, bx] = rows[i]
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[5])
def fa_two_sources(batch=1, heads=2, seq_q=256, seq_old=256, seq_new=128, dim=128,
                   block_M=128, block_N=128, threads=256, num_stages=2):
    """Attention over a cache and the new keys (two pipelined loops, one online softmax),
    the final LSE written through shared memory by the row owners."""
    scale = (1.0 / dim) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((batch, seq_q, heads, dim), "float16"),
             Kc: T.Tensor((batch, seq_old, heads, dim), "float16"),
             Vc: T.Tensor((batch, seq_old, heads, dim), "float16"),
             Kn: T.Tensor((batch, seq_new, heads, dim), "float16"),
             Vn: T.Tensor((batch, seq_new, heads, dim), "float16"),
             O: T.Tensor((batch, seq_q, heads, dim), "float16"),
             LSE: T.Tensor((batch, heads, seq_q), "float32")):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            V_s = T.alloc_shared((block_N, dim), "float16")
            lse_s = T.alloc_shared((block_M,), "float32")
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), "float16")
            acc_o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            l_step = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(seq_old, block_N), num_stages=num_stages):
                T.copy(Kc[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
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
                T.copy(Vc[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
                T.gemm(P, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for k in T.Pipelined(T.ceildiv(seq_new, block_N), num_stages=num_stages):
                T.copy(Kn[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
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
                T.copy(Vn[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
                T.gemm(P, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                lse_s[i] = m[i] * (scale / LOG2E) + T.log(l[i])
            T.copy(lse_s, LSE[bz, by, bx * block_M:(bx + 1) * block_M])

    return main
