"""A thirtieth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), in two halves.

Schedules users write by hand on Hopper: producer / consumer warp specialization with
``T.ws(...)`` and with ``tx`` ranges, rings of ``T.alloc_barrier`` mbarriers driven by
``T.mbarrier_wait_parity`` / ``T.mbarrier_arrive`` and ``T.tma_copy(..., barrier=)``, the
register budgets ``T.dec_max_nreg`` / ``T.inc_max_nreg`` / ``T.annotate_producer_reg_dealloc``,
``T.Persistent``, ``T.wgmma_gemm`` + ``T.wait_wgmma`` overlapping other work,
``T.fence_proxy_async`` after thread-written operands, ``T.sync_threads(id, count)`` inside a
role, ``T.gemm(..., wg_wait=, clear_accum=, k_pack=)`` and ``T.Pipelined(order=, stage=,
group=)`` -- each a whole kernel (GEMM, attention, reduction).

The sm_80 target: kernels built with ``target="cuda -arch=sm_80"`` (and sm_86 / sm_89),
mma.sync GEMMs in fp16 / bf16 / tf32 / int8 / fp8, cp.async pipelines, register-A GEMMs
(ldmatrix), transposes through shared memory, attention forward and a dequantizing GEMM.

``tests/test_unseen_programs30.py`` builds each to a cubin on the CPU, checks what matters in
the generated source, and on a GPU compares it with a torch reference."""

import tilecute
import tilecute.language as T


# ======================================================================================
# Hopper: hand-written schedules
# ======================================================================================
def ws_attention_tma_ring(stages=2, B=1, H=2, S=256, D=64, bm=64, bn=64):
    """Non-causal attention forward, warp-specialized by hand: warpgroup 1 (the producer,
    ``T.dec_max_nreg(40)``) loads the K and V tiles with ``T.tma_copy`` into a ring of
    ``stages`` buffers on ``k_full`` / ``v_full``; warpgroup 0 (``T.inc_max_nreg(232)``)
    keeps the online softmax and releases each stage on ``k_free`` / ``v_free``."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((B, S, H, D), T.float16), K: T.Tensor((B, S, H, D), T.float16),
             V: T.Tensor((B, S, H, D), T.float16), O: T.Tensor((B, S, H, D), T.float16)):
        with T.Kernel(S // bm, H, B, threads=256) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((stages, bn, D), T.float16)
            V_s = T.alloc_shared((stages, bn, D), T.float16)
            P_s = T.alloc_shared((bm, bn), T.float16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            k_full = T.alloc_barrier([128] * stages)
            v_full = T.alloc_barrier([128] * stages)
            k_free = T.alloc_barrier([128] * stages)
            v_free = T.alloc_barrier([128] * stages)
            q_bar = T.alloc_barrier(128)
            nk = S // bn
            with T.ws(1):
                T.dec_max_nreg(40)
                T.tma_copy(Q[bz, bx * bm:(bx + 1) * bm, by, :], Q_s, barrier=q_bar)
                T.mbarrier_arrive(q_bar)
                for t in T.serial(nk):
                    T.mbarrier_wait_parity(k_free[t % stages], ((t // stages) & 1) ^ 1)
                    T.tma_copy(K[bz, t * bn:(t + 1) * bn, by, :], K_s[t % stages, :, :],
                               barrier=k_full[t % stages])
                    T.mbarrier_arrive(k_full[t % stages])
                    T.mbarrier_wait_parity(v_free[t % stages], ((t // stages) & 1) ^ 1)
                    T.tma_copy(V[bz, t * bn:(t + 1) * bn, by, :], V_s[t % stages, :, :],
                               barrier=v_full[t % stages])
                    T.mbarrier_arrive(v_full[t % stages])
            with T.ws(0):
                T.inc_max_nreg(232)
                T.fill(acc_o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(T.float32))
                T.mbarrier_wait_parity(q_bar, 0)
                for t in T.serial(nk):
                    T.mbarrier_wait_parity(k_full[t % stages], (t // stages) & 1)
                    T.gemm(Q_s, K_s[t % stages, :, :], acc_s, transpose_B=True, clear_accum=True)
                    T.mbarrier_arrive(k_free[t % stages])
                    T.copy(m, m_prev)
                    T.reduce_max(acc_s, m, dim=1, clear=False)
                    for i in T.Parallel(bm):
                        rs[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                    for i, j in T.Parallel(bm, bn):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                    for i, j in T.Parallel(bm, D):
                        acc_o[i, j] *= rs[i]
                    T.reduce_sum(acc_s, m_prev, dim=1)
                    for i in T.Parallel(bm):
                        l[i] = l[i] * rs[i] + m_prev[i]
                    T.copy(acc_s, P_s)
                    T.mbarrier_wait_parity(v_full[t % stages], (t // stages) & 1)
                    T.gemm(P_s, V_s[t % stages, :, :], acc_o)
                    T.mbarrier_arrive(v_free[t % stages])
                for i, j in T.Parallel(bm, D):
                    acc_o[i, j] /= l[i]
                T.copy(acc_o, O[bz, bx * bm:(bx + 1) * bm, by, :])

    return main


def ws_rowsum_tma_ring(stages=3, M=256, N=2048, bm=64, bn=256):
    """A reduction pipelined by hand: the last warp group (``tx >= 128``, lowering its
    registers) streams column tiles of X into a ring by TMA; threads 0..127 wait, add each
    tile's squares into a fragment and release the stage.  Y[i] = sum_j X[i, j] ** 2."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=256) as bx:
            X_s = T.alloc_shared((stages, bm, bn), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            full = T.alloc_barrier([1] * stages)
            empty = T.alloc_barrier([128] * stages)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.set_max_nreg(40, 0)
                for k in T.serial(N // bn):
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    if tx == 128:
                        T.tma_copy(X[bx * bm:(bx + 1) * bm, k * bn:(k + 1) * bn], X_s[k % stages, :, :],
                                   barrier=full[k % stages])
                        T.mbarrier_arrive(full[k % stages])
            else:
                T.set_max_nreg(232, 1)
                T.clear(acc)
                for k in T.serial(N // bn):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] += X_s[k % stages, i, j] * X_s[k % stages, i, j]
                    T.mbarrier_arrive(empty[k % stages])
                T.reduce_sum(acc, s, dim=1)
                T.copy(s, Y[bx * bm])

    return main


def persistent_gemm_primitive(M=384, N=320, K=256, bm=128, bn=64, bk=64, workers=7, group=4):
    """C = A @ B by ``workers`` blocks that walk the output tiles with ``T.Persistent``
    (tiles grouped ``group`` wide along N), each tile a pipelined GEMM into a cleared
    accumulator and a copy out through shared memory."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(workers, threads=128) as wid:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            for tm, tn in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], workers, wid, group_size=group):
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[tm * bm, k * bk], A_s)
                    T.copy(B[k * bk, tn * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C_s)
                T.copy(C_s, C[tm * bm, tn * bn])

    return main


def persistent_serial_swizzled_gemm(M=320, N=384, K=128, bm=64, bn=128, bk=64, workers=5, group=3):
    """The hand-written persistent walk TileLang's GEMM example writes next to
    ``T.Persistent``: ``for w in T.serial(waves)``, a tile id ``workers * w + wid`` mapped to
    (m, n) in groups of ``group`` N tiles, the body guarded to tiles inside C; B stored
    (N, K)."""
    m_tiles = T.ceildiv(M, bm)
    n_tiles = T.ceildiv(N, bn)
    waves = T.ceildiv(m_tiles * n_tiles, workers)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(workers, threads=128) as wid:
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            for w in T.serial(waves):
                tile = workers * w + wid
                tm = (tile // group) % m_tiles
                tn = tile % group + (tile // group) // m_tiles * group
                if tm * bm < M and tn * bn < N:
                    for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                        T.copy(A[tm * bm, k * bk], A_s)
                        T.copy(B[tn * bn, k * bk], B_s)
                        T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=k == 0)
                    T.copy(acc, C[tm * bm, tn * bn])

    return main


def wgmma_scores_overlap_rowmax(M=128, N=256, D=64, bm=64):
    """Scores S = Q K^T issued with ``T.wgmma_gemm`` (no wait) while the block loads and
    scales a bias row; ``T.wait_wgmma(0)`` before the scores are read; then a row softmax of
    S + bias: O = softmax(Q K^T * 0.125 + bias)."""

    @T.prim_func
    def main(Q: T.Tensor((M, D), T.float16), Kt: T.Tensor((N, D), T.float16), bias: T.Tensor((N,), T.float32),
             O: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((N, D), T.float16)
            S_f = T.alloc_fragment((bm, N), T.float32)
            b_f = T.alloc_fragment((bm, N), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm, 0], Q_s)
            T.copy(Kt[0, 0], K_s)
            T.wgmma_gemm(Q_s, K_s, S_f, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(bm, N):
                b_f[i, j] = bias[j] * 0.5
            T.wait_wgmma(0)
            for i, j in T.Parallel(bm, N):
                S_f[i, j] = S_f[i, j] * 0.125 + b_f[i, j]
            T.reduce_max(S_f, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                S_f[i, j] = T.exp(S_f[i, j] - mx[i])
            T.reduce_sum(S_f, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                S_f[i, j] = S_f[i, j] / sm[i]
            T.copy(S_f, O[bx * bm, 0])

    return main


def fence_thread_scaled_operand(M=256, N=128, K=256, bm=64, bn=128, bk=64):
    """C = A @ (diag(s) B): each step's B tile is written by the threads (scaled by the row
    scale s[k]), then ``T.fence_proxy_async()`` and a block barrier make the generic writes
    visible to the async proxy before ``T.wgmma_gemm`` reads them; ``T.wait_wgmma(0)``
    before the tile is overwritten."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), s: T.Tensor((K,), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.serial(K // bk):
                T.copy(A[bx * bm, k * bk], A_s)
                for i, j in T.Parallel(bk, bn):
                    B_s[i, j] = B[k * bk + i, j] * s[k * bk + i]
                T.fence_proxy_async()
                T.sync_threads()
                T.wgmma_gemm(A_s, B_s, acc)
                T.wait_wgmma(0)
                T.sync_threads()
            T.copy(acc, C[bx * bm, 0])

    return main


def ws_named_barrier_colmax(M=256, N=256, bm=32):
    """Two warp groups, each its own half of the columns: each stages its half in shared
    memory, meets its own 128 threads at named barrier ``T.sync_threads(1 + g, 128)`` and
    reads the half transposed (column maxima of |X| per row tile)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M // bm, N), T.float32)):
        with T.Kernel(M // bm, threads=256) as bx:
            S = T.alloc_shared((bm, N), T.float32)
            with T.ws(0):
                for i, j in T.Parallel(bm, N // 2):
                    S[i, j] = T.abs(X[bx * bm + i, j])
                T.sync_threads(1, 128)
                for j in T.Parallel(N // 2):
                    mx = T.alloc_var(T.float32, init=0.0)
                    for i in T.serial(bm):
                        mx = T.max(mx, S[i, j])
                    Y[bx, j] = mx
            with T.ws(1):
                for i, j in T.Parallel(bm, N // 2):
                    S[i, N // 2 + j] = T.abs(X[bx * bm + i, N // 2 + j])
                T.sync_threads(2, 128)
                for j in T.Parallel(N // 2):
                    mx = T.alloc_var(T.float32, init=0.0)
                    for i in T.serial(bm):
                        mx = T.max(mx, S[i, N // 2 + j])
                    Y[bx, N // 2 + j] = mx

    return main


def gemm_wg_wait_two_accumulators(M=256, N=128, K=512, bm=64, bn=128, bk=64):
    """Gate and up projections in one loop: ``T.gemm(..., wg_wait=-1)`` leaves the gate GEMM
    in flight while the up GEMM is issued, ``wg_wait=0`` on the second waits for both;
    then SiLU(gate) * up."""

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), Wg: T.Tensor((K, N), T.float16), Wu: T.Tensor((K, N), T.float16),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            X_s = T.alloc_shared((bm, bk), T.float16)
            G_s = T.alloc_shared((bk, bn), T.float16)
            U_s = T.alloc_shared((bk, bn), T.float16)
            g = T.alloc_fragment((bm, bn), T.float32)
            u = T.alloc_fragment((bm, bn), T.float32)
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(X[bx * bm, k * bk], X_s)
                T.copy(Wg[k * bk, 0], G_s)
                T.copy(Wu[k * bk, 0], U_s)
                T.gemm(X_s, G_s, g, wg_wait=-1)
                T.gemm(X_s, U_s, u, wg_wait=0)
            for i, j in T.Parallel(bm, bn):
                g[i, j] = g[i, j] / (1.0 + T.exp(-g[i, j])) * u[i, j]
            T.copy(g, Y[bx * bm, 0])

    return main


def gemm_order_stage_group_epilogue(M=256, N=256, K=512, bm=128, bn=128, bk=32):
    """A GEMM whose loop is scheduled by hand: ``order``/``stage`` put the two loads a stage
    ahead of the GEMM and ``group`` keeps them together, with a per-step row scale read into
    a fragment in the GEMM's stage: C = diag(r) (A @ B) accumulated as sum_k r * A_k B_k."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), r: T.Tensor((M,), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            rf = T.alloc_fragment((bm,), T.float32)
            T.clear(acc)
            for i in T.Parallel(bm):
                rf[i] = r[by * bm + i]
            for k in T.Pipelined(K // bk, order=[0, 1, 2], stage=[0, 0, 1], group=[[0], [1], [2]]):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] *= rf[i]
            T.copy(acc, C[by * bm, bx * bn])

    return main


def gemm_kpack_clear_accum_fullcol(M=256, N=256, K=256, bm=64, bn=256, bk=64):
    """bf16 C = A^T B (A stored (K, M)) on two warpgroups side by side along N
    (``policy=FullCol``), ``k_pack=2``, the accumulator cleared by the first step's GEMM
    (``clear_accum=k == 0``)."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bk, bm), T.bfloat16)
            B_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[k * bk, by * bm], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=True, clear_accum=k == 0, k_pack=2,
                       policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def ws_annotated_regs_gemm_bias(M=256, N=256, K=384, bm=128, bn=128, bk=64):
    """A T.Pipelined GEMM whose producer warpgroup the compiler makes, with the register
    budgets set by annotation (``T.annotate_producer_reg_dealloc(24)``,
    ``T.annotate_consumer_reg_alloc(240)``) and a column bias in the epilogue."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), bias: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            T.annotate_producer_reg_dealloc(24)
            T.annotate_consumer_reg_alloc(240)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] += bias[bx * bn + j]
            T.copy(acc, C[by * bm, bx * bn])

    return main


def ws_producer_thread_copies_split_gemm(M=128, N=256, K=256, bm=128, bn=256, bk=64):
    """TileLang's split warp specialization: A's tile is loaded by every thread, then each
    warp group (``T.ws(0)`` / ``T.ws(1)``) loads and multiplies its own half of B's columns
    into its own accumulator and stores its own half of C."""
    hn = bn // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B0 = T.alloc_shared((bk, hn), T.float16)
            B1 = T.alloc_shared((bk, hn), T.float16)
            c0 = T.alloc_fragment((bm, hn), T.float32)
            c1 = T.alloc_fragment((bm, hn), T.float32)
            with T.ws(0):
                T.clear(c0)
            with T.ws(1):
                T.clear(c1)
            for k in T.Pipelined(K // bk, num_stages=0):
                T.copy(A[by * bm, k * bk], A_s)
                with T.ws(0):
                    T.copy(B[k * bk, bx * bn], B0)
                    T.gemm(A_s, B0, c0)
                with T.ws(1):
                    T.copy(B[k * bk, bx * bn + hn], B1)
                    T.gemm(A_s, B1, c1)
            with T.ws(0):
                T.copy(c0, C[by * bm, bx * bn])
            with T.ws(1):
                T.copy(c1, C[by * bm, bx * bn + hn])

    return main


def ws_tma_store_epilogue_ring(stages=2, M=256, N=256, K=256, bm=128, bn=128, bk=64):
    """A hand ring (warp group 1 loads by TMA, warp group 0 multiplies), whose consumer
    writes the tile back by ``T.tma_copy`` from shared memory and waits for the bulk store
    with ``T.tma_store_wait()`` before leaving."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bk, bn), T.float16)
            C_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            with T.ws(1):
                for k in T.serial(K // bk):
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], A_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.tma_copy(B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], B_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.mbarrier_arrive(full[k % stages])
            with T.ws(0):
                T.clear(acc)
                for k in T.serial(K // bk):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    T.gemm(A_s[k % stages, :, :], B_s[k % stages, :, :], acc)
                    T.mbarrier_arrive(empty[k % stages])
                T.copy(acc, C_s)
                T.fence_proxy_async()
                T.sync_threads(1, 128)
                T.tma_copy(C_s, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
                T.tma_store_arrive()
                T.tma_store_wait()

    return main


# ======================================================================================
# The sm_80 target (sm_80 / sm_86 / sm_89 GPUs: mma.sync, cp.async, ldmatrix; no TMA/wgmma)
# ======================================================================================
SM80 = "cuda -arch=sm_80"


@tilecute.jit(out_idx=[2], target=SM80)
def sm80_gemm_fp16_swizzled(M=512, N=384, K=512, bm=128, bn=128, bk=32, stages=4):
    """fp16 C = A @ B for an sm_80 target (TVM's target string): a 4-stage cp.async
    pipeline, rasterized blocks (``T.use_swizzle(4)``), mma.sync with ldmatrix loads."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(4)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2], target="sm_86")
def sm86_gemm_bf16_nt_ragged(M=200, N=136, K=328, bm=64, bn=64, bk=64):
    """bf16 C = A @ B^T (B stored (N, K)) with ragged M, N and K on sm_86 (100 KB of shared
    memory), three stages, float32 output."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm80_gemm_tf32(M=256, N=256, K=256, bm=64, bn=64, bk=32):
    """float32 operands multiplied as tf32 on mma.sync (both K-major: B stored (N, K))."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((N, K), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float32)
            B_s = T.alloc_shared((bn, bk), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm80_gemm_int8_tn(M=256, N=256, K=512, bm=64, bn=64, bk=64):
    """int8 x int8 -> int32 (TN: B stored (N, K)) on sm_80."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.int8)
            B_s = T.alloc_shared((bn, bk), T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm89_gemm_fp8_e4m3(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """float8_e4m3 x float8_e4m3 -> float32 (TN) with a per-tensor scale, for sm_89 (fp8
    converts exist there, not on sm_80)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3), scale: T.float32,
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float8_e4m3)
            B_s = T.alloc_shared((bn, bk), T.float8_e4m3)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] *= scale
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm80_transpose_pipelined(M=512, N=384, bm=64, bn=64):
    """Y = X^T for float16 through shared memory, a row panel of X walked by a 2-stage
    cp.async ``T.Pipelined`` loop and written out transposed."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Y: T.Tensor((N, M), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            S = T.alloc_shared((bm, bn), T.float16)
            for j in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, j * bn], S)
                for c, r in T.Parallel(bn, bm):
                    Y[j * bn + c, bx * bm + r] = S[r, c]

    return main


def sm80_flash_fwd_causal(B=1, H=4, S=256, D=64, bm=64, bn=64):
    """Causal attention forward (BHSD) on sm_80: mma.sync for both GEMMs, a one-stage
    cp.async pipeline over key tiles that stops at the diagonal."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), T.float16), K: T.Tensor((B, H, S, D), T.float16),
             V: T.Tensor((B, H, S, D), T.float16), O: T.Tensor((B, H, S, D), T.float16)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((bn, D), T.float16)
            V_s = T.alloc_shared((bn, D), T.float16)
            P_s = T.alloc_shared((bm, bn), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm, 0], Q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for t in T.Pipelined(bx + 1, num_stages=1):
                T.copy(K[bz, by, t * bn, 0], K_s)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.if_then_else(bx * bm + i >= t * bn + j, 0, -T.infinity(T.float32))
                T.gemm(Q_s, K_s, s, transpose_B=True)
                T.copy(m, mp)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    rs[i] = T.exp2(mp[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, mp, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rs[i] + mp[i]
                for i, j in T.Parallel(bm, D):
                    o[i, j] *= rs[i]
                T.copy(s, P_s)
                T.copy(V[bz, by, t * bn, 0], V_s)
                T.gemm(P_s, V_s, o)
            for i, j in T.Parallel(bm, D):
                o[i, j] /= l[i]
            T.copy(o, O[bz, by, bx * bm, 0])

    return main


def sm80_dequant_uint4_gemm(M=128, N=256, K=512, bm=64, bn=64, bk=64, group=128):
    """C = A @ dequant(W)^T on sm_80: W holds two unsigned 4-bit values a byte along K
    (low nibble first), per-(n, group) scales; each step unpacks its tile in registers into
    a float16 shared tile that mma.sync reads."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), W: T.Tensor((N, K // 2), T.uint8),
             Sc: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            W_s = T.alloc_shared((bn, bk // 2), T.uint8)
            B_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(W[bx * bn, k * bk // 2], W_s)
                for n, j in T.Parallel(bn, bk):
                    B_s[n, j] = T.cast((W_s[n, j // 2] >> T.cast((j % 2) * 4, T.uint8)) & T.uint8(15), T.float16) - \
                        T.float16(8)
                for n, j in T.Parallel(bn, bk):
                    B_s[n, j] = B_s[n, j] * Sc[bx * bn + n, (k * bk + j) // group]
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm80_gemm_register_a_gelu(M=256, N=128, K=256, bm=64, bn=128, bk=32):
    """C = gelu_tanh(A) @ B on sm_80: each A tile is read from shared memory into a float16
    register fragment, transformed there, and fed to T.gemm as the A operand (mma.sync's
    register operand)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            A_f = T.alloc_fragment((bm, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.copy(A_s, A_f)
                for i, j in T.Parallel(bm, bk):
                    x = T.cast(A_f[i, j], T.float32)
                    A_f[i, j] = T.cast(0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x))),
                                       T.float16)
                T.gemm(A_f, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def sm80_layernorm_pipelined(M=256, N=1024, bm=8, bn=256, eps=1e-5):
    """Layer norm of float16 rows on sm_80: two passes over the row, each a cp.async
    ``T.Pipelined`` loop of column tiles (sums and sums of squares, then normalize)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), G: T.Tensor((N,), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            X_s = T.alloc_shared((bm, bn), T.float16)
            xf = T.alloc_fragment((bm, bn), T.float32)
            s1 = T.alloc_fragment((bm,), T.float32)
            s2 = T.alloc_fragment((bm,), T.float32)
            t1 = T.alloc_fragment((bm,), T.float32)
            t2 = T.alloc_fragment((bm,), T.float32)
            T.clear(s1)
            T.clear(s2)
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], X_s)
                T.copy(X_s, xf)
                T.reduce_sum(xf, t1, dim=1)
                for i, j in T.Parallel(bm, bn):
                    xf[i, j] = xf[i, j] * xf[i, j]
                T.reduce_sum(xf, t2, dim=1)
                for i in T.Parallel(bm):
                    s1[i] += t1[i]
                    s2[i] += t2[i]
            for i in T.Parallel(bm):
                s1[i] = s1[i] / N
                s2[i] = T.rsqrt(s2[i] / N - s1[i] * s1[i] + eps)
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], X_s)
                for i, j in T.Parallel(bm, bn):
                    Y[bx * bm + i, k * bn + j] = T.cast((T.cast(X_s[i, j], T.float32) - s1[i]) * s2[i] *
                                                        T.cast(G[k * bn + j], T.float32), T.float16)

    return main


def sm80_splitk_atomic_gemm(M=128, N=128, K=1024, bm=64, bn=64, bk=32, splits=4):
    """Split-K on sm_80: blockIdx.z takes a K range, a 3-stage cp.async GEMM over it and a
    tile ``T.atomic_add`` of the float32 partial into C (zeroed by the caller)."""
    kk = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kk // bk, num_stages=3):
                T.copy(A[by * bm, bz * kk + k * bk], A_s)
                T.copy(B[bz * kk + k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.atomic_add(C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], acc)

    return main


def sm80_ws_mbarrier_handoff(M=256, N=512, bm=64, bn=128):
    """Warp specialization without TMA, as a program for sm_80 writes it: warp group 1
    copies column tiles of X into a 2-slot shared ring with thread copies and arrives on
    ``full``; warp group 0 waits, accumulates the tile's column sums and frees the slot on
    ``empty`` (mbarriers are sm_80's; the waits test the phase in a loop).  Y[j] = sum over
    the block's rows."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M // bm, N), T.float32)):
        with T.Kernel(M // bm, threads=256) as bx:
            R = T.alloc_shared((2, bm, bn), T.float32)
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            with T.ws(1):
                for k in T.serial(N // bn):
                    T.mbarrier_wait_parity(empty[k % 2], ((k // 2) & 1) ^ 1)
                    for i, j in T.Parallel(bm, bn):
                        R[k % 2, i, j] = X[bx * bm + i, k * bn + j]
                    T.mbarrier_arrive(full[k % 2])
            with T.ws(0):
                for k in T.serial(N // bn):
                    T.mbarrier_wait_parity(full[k % 2], (k // 2) & 1)
                    for j in T.Parallel(bn):
                        c = T.alloc_var(T.float32, init=0.0)
                        for i in T.serial(bm):
                            c += R[k % 2, i, j]
                        Y[bx, k * bn + j] = c
                    T.mbarrier_arrive(empty[k % 2])

    return main


# ---- more Hopper schedules (appended) ----------------------------------------------------------
def ws_ring_release_previous_stage(stages=3, M=256, N=256, K=1024, bm=128, bn=128, bk=64):
    """The consumer keeps one wgmma batch in flight (``T.gemm(..., wg_wait=1)``), so it may
    free only the stage the batch before read: ``empty[(k - 1) % stages]`` after each GEMM,
    the last stage after ``T.wait_wgmma(0)``.  The producer (``T.ws(1)``) loads by TMA."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            nk = K // bk
            with T.ws(1):
                for k in T.serial(nk):
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], A_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.tma_copy(B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], B_s[k % stages, :, :],
                               barrier=full[k % stages])
                    T.mbarrier_arrive(full[k % stages])
            with T.ws(0):
                T.clear(acc)
                for k in T.serial(nk):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    T.gemm(A_s[k % stages, :, :], B_s[k % stages, :, :], acc, wg_wait=1)
                    if k > 0:
                        T.mbarrier_arrive(empty[(k - 1) % stages])
                T.wait_wgmma(0)
                T.mbarrier_arrive(empty[(nk - 1) % stages])
                T.copy(acc, C[by * bm, bx * bn])

    return main


def wgmma_register_p_attention(S=256, D=64, bm=64):
    """One head of non-causal attention with both GEMMs issued by ``T.wgmma_gemm``: the
    scores waited for with ``T.wait_wgmma(0)``, the probabilities cast into a float16
    register fragment that is the A operand of the second ``T.wgmma_gemm`` (register A),
    waited for before the output is normalised."""
    scale = (1.0 / D) ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16), V: T.Tensor((S, D), T.float16),
             O: T.Tensor((S, D), T.float32)):
        with T.Kernel(S // bm, threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((S, D), T.float16)
            V_s = T.alloc_shared((S, D), T.float16)
            s = T.alloc_fragment((bm, S), T.float32)
            p = T.alloc_fragment((bm, S), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm, 0], Q_s)
            T.copy(K[0, 0], K_s)
            T.copy(V[0, 0], V_s)
            T.wgmma_gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
            T.wait_wgmma(0)
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(bm, S):
                s[i, j] = T.exp((s[i, j] - mx[i]) * scale)
            T.reduce_sum(s, sm, dim=1)
            T.copy(s, p)
            T.wgmma_gemm(p, V_s, o, clear_accum=True)
            T.wait_wgmma(0)
            for i, j in T.Parallel(bm, D):
                o[i, j] = o[i, j] / sm[i]
            T.copy(o, O[bx * bm, 0])

    return main


def ws_pingpong_consumers_gemm(stages=2, M=256, N=256, K=512, bm=128, bn=128, bk=64):
    """Two consumer warp groups in ping-pong (each its own 64 rows of the tile, its own
    accumulator) and a producer warp group (``T.ws(2)``, one elected thread issuing the TMA
    loads): the consumers take turns to issue their GEMMs through the named barriers 5 and
    6 (``T.sync_threads(id, 256)`` waits for the other's ``T.named_barrier_arrive(id,
    256)``), warp group 1 letting warp group 0 go first; both release each stage."""
    h = bm // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=384) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bk, bn), T.float16)
            c0 = T.alloc_fragment((h, bn), T.float32)
            c1 = T.alloc_fragment((h, bn), T.float32)
            full = T.alloc_barrier([1] * stages)
            empty = T.alloc_barrier([256] * stages)
            nk = K // bk
            with T.ws(2):
                T.dec_max_nreg(24)
                for k in T.serial(nk):
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    if T.shuffle_elect(128):
                        T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], A_s[k % stages, :, :],
                                   barrier=full[k % stages])
                        T.tma_copy(B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], B_s[k % stages, :, :],
                                   barrier=full[k % stages])
                        T.mbarrier_arrive(full[k % stages])
            with T.ws(0):
                T.inc_max_nreg(240)
                T.clear(c0)
                for k in T.serial(nk):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    T.sync_threads(5, 256)
                    T.gemm(A_s[k % stages, 0:h, :], B_s[k % stages, :, :], c0)
                    T.named_barrier_arrive(6, 256)
                    T.mbarrier_arrive(empty[k % stages])
                T.copy(c0, C[by * bm, bx * bn])
            with T.ws(1):
                T.inc_max_nreg(240)
                T.clear(c1)
                T.named_barrier_arrive(5, 256)
                for k in T.serial(nk):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    T.sync_threads(6, 256)
                    T.gemm(A_s[k % stages, h:bm, :], B_s[k % stages, :, :], c1)
                    if k < nk - 1:
                        T.named_barrier_arrive(5, 256)
                    T.mbarrier_arrive(empty[k % stages])
                T.copy(c1, C[by * bm + h, bx * bn])

    return main


@tilecute.jit(out_idx=[1], target="nvidia/nvidia-a100")
def a100_tag_softmax_rows(M=256, N=2048, bm=4, bn=512):
    """Row softmax for a target given as TVM's CUDA tag of the A100 (sm_80): a max pass and
    a sum pass over column tiles loaded by cp.async ``T.Pipelined`` loops, then a third
    normalising pass."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            X_s = T.alloc_shared((bm, bn), T.float16)
            xf = T.alloc_fragment((bm, bn), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            t = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.fill(mx, -T.infinity(T.float32))
            T.clear(sm)
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], X_s)
                T.copy(X_s, xf)
                T.reduce_max(xf, mx, dim=1, clear=False)
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], X_s)
                for i, j in T.Parallel(bm, bn):
                    xf[i, j] = T.exp(T.cast(X_s[i, j], T.float32) - mx[i])
                T.reduce_sum(xf, t, dim=1)
                for i in T.Parallel(bm):
                    sm[i] += t[i]
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], X_s)
                for i, j in T.Parallel(bm, bn):
                    Y[bx * bm + i, k * bn + j] = T.cast(T.exp(T.cast(X_s[i, j], T.float32) - mx[i]) / sm[i], T.float16)

    return main


def wgmma_split_d_scores_wait_one(S=128, D=128, bm=64):
    """Attention of one head whose score GEMM is split along the head dim into two
    ``T.wgmma_gemm`` into one filled accumulator (``Q_s[:, :64]`` / ``Q_s[:, 64:]``) with
    the row-max copy issued before ``T.wait_wgmma(0)``; then O = P V as two
    ``T.wgmma_gemm`` over the two halves of the keys.  ``T.wait_wgmma(1)`` means the first of
    those is done, so the program overwrites the first half of P's tile (zeros) while the
    second may still be reading the other half; ``T.wait_wgmma(0)`` before O is read."""
    h = S // 2

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16), V: T.Tensor((S, D), T.float16),
             O: T.Tensor((S, D), T.float32)):
        with T.Kernel(S // bm, threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((S, D), T.float16)
            V_s = T.alloc_shared((S, D), T.float16)
            P_s = T.alloc_shared((bm, S), T.float16)
            s = T.alloc_fragment((bm, S), T.float32)
            o = T.alloc_fragment((bm, D), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm, 0], Q_s)
            T.copy(K[0, 0], K_s)
            T.copy(V[0, 0], V_s)
            T.fill(mx, -T.infinity(T.float32))
            T.fill(s, 0)
            T.wgmma_gemm(Q_s[:, :D // 2], K_s[:, :D // 2], s, transpose_B=True)
            T.wgmma_gemm(Q_s[:, D // 2:], K_s[:, D // 2:], s, transpose_B=True)
            T.copy(mx, mp)
            T.wait_wgmma(0)
            T.reduce_max(s, mx, dim=1, clear=False)
            for i, j in T.Parallel(bm, S):
                s[i, j] = T.exp2((s[i, j] - mx[i]) * 0.1275)
            T.reduce_sum(s, sm, dim=1)
            T.copy(s, P_s)
            T.fill(o, 0)
            T.wgmma_gemm(P_s[:, 0:h], V_s[0:h, :], o)
            T.wgmma_gemm(P_s[:, h:S], V_s[h:S, :], o)
            T.wait_wgmma(1)
            for i, j in T.Parallel(bm, h):
                P_s[i, j] = T.float16(0)
            T.wait_wgmma(0)
            for i, j in T.Parallel(bm, D):
                o[i, j] = o[i, j] / sm[i]
            T.copy(o, O[bx * bm, 0])

    return main


def gemm_annotation_waits_0115(M=128, N=256, K=256, bm=64, bn=128, bk=64):
    """TileLang 0.1.15's spelling of the GEMM knobs, in ``annotations`` (its T.gemm has no
    ``wg_wait`` / ``k_pack`` keywords): x @ W1 issued with ``{"wg_wait": -1}`` (left in
    flight) while x @ W2 is issued with ``{"wg_wait": 0, "k_pack": 2}``; bf16 operands,
    out = (x W1) * sigmoid(x W2) in bf16."""

    @T.prim_func
    def main(X: T.Tensor((M, K), T.bfloat16), W1: T.Tensor((K, N), T.bfloat16), W2: T.Tensor((K, N), T.bfloat16),
             Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            X_s = T.alloc_shared((bm, bk), T.bfloat16)
            A_s = T.alloc_shared((bk, bn), T.bfloat16)
            B_s = T.alloc_shared((bk, bn), T.bfloat16)
            a = T.alloc_fragment((bm, bn), T.float32)
            b = T.alloc_fragment((bm, bn), T.float32)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(X[by * bm, k * bk], X_s)
                T.copy(W1[k * bk, bx * bn], A_s)
                T.copy(W2[k * bk, bx * bn], B_s)
                T.gemm(X_s, A_s, a, clear_accum=k == 0, annotations={"wg_wait": -1})
                T.gemm(X_s, B_s, b, clear_accum=k == 0, annotations={"wg_wait": 0, "k_pack": 2})
            for i, j in T.Parallel(bm, bn):
                a[i, j] = a[i, j] * T.sigmoid(b[i, j])
            T.copy(a, Y[by * bm, bx * bn])

    return main


@tilecute.jit
def eager_ws_one_barrier_array(A, B, s, block_M=128, block_N=128, block_K=64, stages=3):
    """TileLang's newest @jit style (shapes from ``T.const``, the output from ``T.empty``) around
    a hand ring whose full and empty mbarriers share one ``T.alloc_barrier`` array of
    ``2 * stages`` (``mbars[k % stages]`` full, ``mbars[k % stages + stages]`` empty), called
    by keyword: C = (A @ B^T) * s[None, :] with B stored (N, K)."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    s: T.Tensor((N,), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_s = T.alloc_shared((stages, block_M, block_K), T.float16)
        B_s = T.alloc_shared((stages, block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        mbars = T.alloc_barrier([128] * (2 * stages))
        with T.ws(0):
            T.clear(acc)
        for k in range(T.ceildiv(K, block_K)):
            with T.ws(1):
                T.mbarrier_wait_parity(mbarrier=mbars[k % stages + stages], parity=((k // stages) & 1) ^ 1)
                T.tma_copy(A[by * block_M:(by + 1) * block_M, k * block_K:(k + 1) * block_K],
                           A_s[k % stages, :, :], barrier=mbars[k % stages])
                T.tma_copy(B[bx * block_N:(bx + 1) * block_N, k * block_K:(k + 1) * block_K],
                           B_s[k % stages, :, :], barrier=mbars[k % stages])
                T.mbarrier_arrive(mbarrier=mbars[k % stages])
            with T.ws(0):
                T.mbarrier_wait_parity(mbarrier=mbars[k % stages], parity=(k // stages) & 1)
                T.gemm(A_s[k % stages, :, :], B_s[k % stages, :, :], acc, transpose_B=True)
                T.mbarrier_arrive(mbarrier=mbars[k % stages + stages])
        with T.ws(0):
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] *= s[bx * block_N + j]
            T.copy(acc, C[by * block_M, bx * block_N])
    return C


EAGER_SHAPES = {"eager_ws_one_barrier_array": dict(M=256, N=256, K=512)}


def sm80_flash_order_stage_group(S=256, D=64, bm=64, bn=64):
    """Attention forward (one head) for sm_80 written with the pipelined attention schedule
    (``order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1]`` over six groups: K load,
    QK^T, softmax, rescale, V load, PV), P kept in a float16 register fragment as the PV
    GEMM's A operand; before sm_90 the statements run in source order."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16), V: T.Tensor((S, D), T.float16),
             O: T.Tensor((S, D), T.float16)):
        with T.Kernel(S // bm, threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((bn, D), T.float16)
            V_s = T.alloc_shared((bn, D), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm, 0], Q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for t in T.Pipelined(S // bn, num_stages=2, order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1],
                                 group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9], [10], [11], [12]]):
                T.copy(K[t * bn, 0], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                T.copy(m, mp)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    rs[i] = T.exp2(mp[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, mp, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rs[i] + mp[i]
                T.copy(s, p)
                for i, j in T.Parallel(bm, D):
                    o[i, j] *= rs[i]
                T.copy(V[t * bn, 0], V_s)
                T.gemm(p, V_s, o)
            for i, j in T.Parallel(bm, D):
                o[i, j] /= l[i]
            T.copy(o, O[bx * bm, 0])

    return main
