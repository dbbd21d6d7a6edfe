"""A twenty-eighth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): TileLang's newest surface and feature mixes the earlier rounds did not combine.

Newest surface: ``T.unroll(explicit=True)`` (TileLang's early explicit unrolling),
``T.reduce_sum(..., annotations={"enable_fadd2": False})`` (a per-reduction FP32x2 control),
``T.pow`` with a constant integer exponent <= 0, ``T.__exp`` (e ** x), an ``T.alloc_var`` whose
initializer has another dtype than the variable, a scalar ``T.copy`` between dtypes (a cast
to the destination's dtype) and ``T.atomic_max(..., return_prev=True)`` on a scalar.

Mixes: a ``T.macro`` called inside ``T.Pipelined`` that loads one stage of a 3-D shared
buffer (``A_s[k % 2, :, :]``); ``T.Parallel`` nested in ``T.serial`` nested in
``T.Pipelined``; two ``T.Kernel`` launches in one prim_func (a workspace written by the first
and read by the second); a ``T.symbolic`` length used in the grid and in a loop bound with a
tail; one accumulator fragment fed by two ``T.gemm`` of different K; a ``T.copy`` from a
float32 shared tile into a float16 shared tile feeding a GEMM; a reduction into a (1,)
fragment broadcast back over a row; an ``out_idx`` output whose shape has a ``T.dynamic``
dimension.

``tests/test_unseen_programs28.py`` builds each to a cubin on the CPU, checks what matters in
the generated source, and on a GPU compares it with a torch reference."""

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- newest surface ------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def explicit_unroll_poly(N=4096, block=256, deg=4):
    """y = sum_{d<deg} (d + 1) * x ** d by Horner's rule, the degree loop unrolled early and
    explicitly."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            x = X[bx * block + tx]
            for d in T.unroll(deg, explicit=True):
                acc = acc * x + T.cast(deg - d, T.float32)
            Y[bx * block + tx] = acc

    return main


@tilecute.jit(out_idx=[1])
def rowsum_scalar_fadd(M=128, N=512, bm=4):
    """Row sums in float32 with the packed FP32x2 accumulation turned off for this
    reduction (TileLang's per-reduce ``enable_fadd2`` annotation)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_f = T.alloc_fragment((bm, N), T.float32)
            s_f = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x_f)
            T.reduce_sum(x_f, s_f, dim=1, annotations={"enable_fadd2": False})
            T.copy(s_f, S[bx * bm])

    return main


@tilecute.jit(out_idx=[1])
def pow_negative_exp(N=2048, block=128):
    """y = x ** -2 + x ** 0 + exp(x) * 0.5 through T.pow with constant integer exponents
    (TileLang's -2 is 1 / (x * x), 0 is one) and T.__exp (e ** x, not 2 ** x)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                x = X[bx * block + i]
                Y[bx * block + i] = T.pow(x, -2) + T.pow(x, 0) + T.__exp(x) * 0.5

    return main


@tilecute.jit(out_idx=[1])
def var_init_dtype_cast_copy(N=1024, block=128):
    """An int32 T.alloc_var started from a float literal (the variable's dtype wins), a
    scalar T.copy from a float32 global element into a float16 local (cast to the
    destination's dtype) and back out to a float16 output."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            base = T.alloc_var(T.int32, init=3)
            h = T.alloc_local((1,), T.float16)
            T.copy(X[bx * block + tx], h[0])
            Y[bx * block + tx] = h[0] + T.cast(base, T.float16)

    return main


@tilecute.jit(out_idx=[2])
def atomic_max_prev(N=1024, block=128):
    """Each thread raises M[0] to its element with a scalar T.atomic_max and records the
    value it saw before (return_prev=True)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), M: T.Tensor((1,), T.int32), P: T.Tensor((N,), T.int32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            prev = T.atomic_max(M[0], X[bx * block + tx], return_prev=True)
            P[bx * block + tx] = prev

    return main


# ---- feature mixes -------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def gemm_macro_stage_slices(M=256, N=256, K=512, bm=64, bn=64, bk=32):
    """C = A @ B with the operand loads written as a T.macro that fills one stage of 3-D
    shared buffers indexed by k % 2, called inside T.Pipelined."""

    @T.macro
    def load(A, B, A_s, B_s, k, bx, by):
        T.copy(A[by * bm, k * bk], A_s)
        T.copy(B[k * bk, bx * bn], B_s)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((2, bm, bk), T.float16)
            B_s = T.alloc_shared((2, bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=1):
                load(A, B, A_s[k % 2, :, :], B_s[k % 2, :, :], k, bx, by)
                T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[1])
def parallel_in_serial_in_pipelined(M=64, N=1024, bm=16, bn=128, sub=4):
    """Row sums of x * x computed in column tiles under T.Pipelined; each tile's sub-rows
    walked by T.serial, each sub-row's elements by T.Parallel."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_s = T.alloc_shared((bm, bn), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            s_f = T.alloc_fragment((bm,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, k * bn], x_s)
                for r in T.serial(bm // sub):
                    for i, j in T.Parallel(sub, bn):
                        acc[r * sub + i, j] += x_s[r * sub + i, j] * x_s[r * sub + i, j]
            T.reduce_sum(acc, s_f, dim=1)
            T.copy(s_f, S[bx * bm])

    return main


@tilecute.jit(out_idx=[1])
def two_launch_normalize(M=96, N=384, bm=8):
    """Two T.Kernel launches in one prim_func: the first writes each row's max into a global
    workspace, the second divides the row by it."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), W: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_f = T.alloc_fragment((bm, N), T.float32)
            m_f = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x_f)
            for i, j in T.Parallel(bm, N):
                x_f[i, j] = T.abs(x_f[i, j])
            T.reduce_max(x_f, m_f, dim=1)
            T.copy(m_f, W[bx * bm])
        with T.Kernel(M, threads=128) as row:
            for j in T.Parallel(N):
                Y[row, j] = X[row, j] / W[row]

    return main


@tilecute.jit(out_idx=[1])
def symbolic_grid_and_tail_loop(block=128, chunk=32):
    """y[i] = sum_{t < 4} x[i + t * 37] over a T.symbolic length L (past the end reads 0):
    L sizes both the grid (ceildiv) and a guarded inner loop whose last chunk is partial."""
    L = T.symbolic("L")

    @T.prim_func
    def main(X: T.Tensor((L,), T.float32), Y: T.Tensor((L,), T.float32)):
        with T.Kernel(T.ceildiv(L, block), threads=block) as bx:
            for c in T.serial(T.ceildiv(block, chunk)):
                for i in T.Parallel(chunk):
                    g = bx * block + c * chunk + i
                    if g < L:
                        s = T.alloc_var(T.float32, init=0.0)
                        for t in T.serial(4):
                            if g + t * 37 < L:
                                s += X[g + t * 37]
                        Y[g] = s

    return main


@tilecute.jit(out_idx=[4])
def two_gemms_one_accumulator(M=128, N=128, K1=64, K2=96, bm=64, bn=64, bk1=64, bk2=32):
    """C = A1 @ B1 + A2 @ B2 into one accumulator fragment: the first GEMM's K tile is 64,
    the second's 32 (different gemm shapes on the same C)."""

    @T.prim_func
    def main(A1: T.Tensor((M, K1), T.float16), B1: T.Tensor((K1, N), T.float16),
             A2: T.Tensor((M, K2), T.float16), B2: T.Tensor((K2, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A1_s = T.alloc_shared((bm, bk1), T.float16)
            B1_s = T.alloc_shared((bk1, bn), T.float16)
            A2_s = T.alloc_shared((bm, bk2), T.float16)
            B2_s = T.alloc_shared((bk2, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K1 // bk1, num_stages=1):
                T.copy(A1[by * bm, k * bk1], A1_s)
                T.copy(B1[k * bk1, bx * bn], B1_s)
                T.gemm(A1_s, B1_s, C_l)
            for k in T.Pipelined(K2 // bk2, num_stages=2):
                T.copy(A2[by * bm, k * bk2], A2_s)
                T.copy(B2[k * bk2, bx * bn], B2_s)
                T.gemm(A2_s, B2_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2])
def gemm_f32_shared_to_f16(M=128, N=128, K=128, bm=64, bn=64, bk=32):
    """C = half(A) @ B where A arrives in float32: each A tile is copied global -> float32
    shared -> float16 shared (a shared-to-shared T.copy across dtypes) before the GEMM."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A32 = T.alloc_shared((bm, bk), T.float32)
            A16 = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A32)
                T.copy(B[k * bk, bx * bn], B_s)
                T.copy(A32, A16)
                T.gemm(A16, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[1])
def reduce_to_scalar_broadcast(N=1024, threads=128):
    """One block per row: the row's max reduced into a (1,) fragment, its sum of exp(x - max)
    into another, both broadcast back over the row (a softmax of one long row)."""

    @T.prim_func
    def main(X: T.Tensor((8, N), T.float32), Y: T.Tensor((8, N), T.float32)):
        with T.Kernel(8, threads=threads) as bx:
            x_f = T.alloc_fragment((N,), T.float32)
            m = T.alloc_fragment((1,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx, 0:N], x_f)
            T.reduce_max(x_f, m, dim=0)
            for j in T.Parallel(N):
                x_f[j] = T.exp(x_f[j] - m[0])
            T.reduce_sum(x_f, s, dim=0)
            for j in T.Parallel(N):
                x_f[j] = x_f[j] / s[0]
            T.copy(x_f, Y[bx, 0:N])

    return main


@tilecute.jit(out_idx=[-1])
def dynamic_rows_output(N=256, bm=32):
    """An out_idx output whose row count is T.dynamic: Y = 2 * X + 1 for any number of rows,
    the last block partial."""
    M = T.dynamic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            t = T.alloc_fragment((bm, N), T.float16)
            T.copy(X[bx * bm, 0], t)
            for i, j in T.Parallel(bm, N):
                t[i, j] = t[i, j] * T.float16(2) + T.float16(1)
            T.copy(t, Y[bx * bm, 0])

    return main


# ---- per-thread (local) reductions and TileLang's newer CUDA intrinsics ---------------------
@tilecute.jit(out_idx=[1])
def local_softmax_per_thread(N=1024, v=8, threads=128):
    """Each thread owns v consecutive elements in a T.alloc_local and takes their softmax on
    its own: T.reduce_max into a (1,) local, T.reduce_sum into a T.alloc_var (TileLang's
    local-buffer reductions), both broadcast back over the thread's elements."""

    @T.prim_func
    def main(X: T.Tensor((N * v,), T.float32), Y: T.Tensor((N * v,), T.float32)):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            src = T.alloc_local((v,), T.float32)
            mx = T.alloc_local((1,), T.float32)
            sm = T.alloc_var(T.float32)
            for i in T.serial(v):
                src[i] = X[(bx * threads + tx) * v + i]
            T.reduce_max(src, mx, dim=0)
            for i in T.serial(v):
                src[i] = T.exp(src[i] - mx[0])
            T.reduce_sum(src, sm, dim=0)
            for i in T.serial(v):
                Y[(bx * threads + tx) * v + i] = src[i] / sm

    return main


@tilecute.jit(out_idx=[1])
def local_colmin_per_thread(N=256, threads=128):
    """Each thread reduces its own (8, 4) float16 local tile over its first axis with
    T.reduce_min (a local reduction along a non-contiguous dim)."""

    @T.prim_func
    def main(X: T.Tensor((N, 8, 4), T.float16), Y: T.Tensor((N, 4), T.float16)):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            src = T.alloc_local((8, 4), T.float16)
            dst = T.alloc_local((4,), T.float16)
            for i, j in T.grid(8, 4):
                src[i, j] = X[bx * threads + tx, i, j]
            T.reduce_min(src, dst, dim=0)
            for j in T.serial(4):
                Y[bx * threads + tx, j] = dst[j]

    return main


@tilecute.jit(out_idx=[2, 3])
def bit_intrinsics_mix(N=256, threads=128):
    """T.atomic_or of every word into one (a scalar integer atomic), and per element
    fast_rcp(f) + __fns(x, 0, 1) (the lowest set bit's position) + align_up(g, 16)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.uint32), F: T.Tensor((N,), T.float32), O: T.Tensor((1,), T.uint32),
             R: T.Tensor((N,), T.float32)):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            g = bx * threads + tx
            T.atomic_or(O[0], X[g])
            R[g] = T.fast_rcp(F[g]) + T.cast(T.__fns(X[g], 0, 1), T.float32) + T.cast(T.align_up(g, 16), T.float32)

    return main


@tilecute.jit(out_idx=[1])
def lds64_sts64_reverse(N=1024, threads=128):
    """Pairs of words reversed through shared memory with T.lds64 / T.sts64: thread tx reads
    pair tx of one tile and writes it as pair (threads - 1 - tx) of another."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.uint32), Y: T.Tensor((N,), T.uint32)):
        with T.Kernel(N // (threads * 2), threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((threads * 2,), T.uint32)
            t = T.alloc_shared((threads * 2,), T.uint32)
            for i in T.Parallel(threads * 2):
                s[i] = X[bx * threads * 2 + i]
            v = T.lds64(s[tx * 2])
            T.sts64(t[(threads - 1 - tx) * 2], v)
            for i in T.Parallel(threads * 2):
                Y[bx * threads * 2 + i] = t[i]

    return main


# ---- reducers: epochs inside a pipelined loop, the legacy form -----------------------------

@tilecute.jit(out_idx=[1])
def row_lse_reducer_epochs(M=64, N=1000, bm=8, bn=128):
    """Per-row logsumexp over column tiles of a ragged row (N = 1000): each tile opens two
    reducer epochs (T.alloc_reducer + T.reducer_init / T.reducer_update / T.finalize_reducer(acc,
    dst)) inside T.Pipelined, merged into running max / sum fragments."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_s = T.alloc_shared((bm, bn), T.float32)
            x_f = T.alloc_fragment((bm, bn), T.float32)
            run_m = T.alloc_fragment((bm,), T.float32)
            run_s = T.alloc_fragment((bm,), T.float32)
            tile_m = T.alloc_fragment((bm,), T.float32)
            tile_s = T.alloc_fragment((bm,), T.float32)
            T.fill(run_m, -T.infinity(T.float32))
            T.fill(run_s, 0.0)
            for k in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
                T.copy(X[bx * bm, k * bn], x_s)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = T.if_then_else(k * bn + j < N, x_s[i, j], -T.infinity(T.float32))
                mr = T.alloc_reducer((bm,), T.float32, op="max")
                T.reducer_init(mr)
                for i, j in T.Parallel(bm, bn):
                    T.reducer_update(mr[i], x_f[i, j])
                T.finalize_reducer(mr, tile_m)
                for i in T.Parallel(bm):
                    tile_m[i] = T.max(tile_m[i], run_m[i])
                sr = T.alloc_reducer((bm,), T.float32, op="sum")
                T.reducer_init(sr)
                for i, j in T.Parallel(bm, bn):
                    T.reducer_update(sr[i], T.exp(x_f[i, j] - tile_m[i]))
                T.finalize_reducer(sr, tile_s)
                for i in T.Parallel(bm):
                    run_s[i] = run_s[i] * T.exp(run_m[i] - tile_m[i]) + tile_s[i]
                    run_m[i] = tile_m[i]
            for i in T.Parallel(bm):
                Y[bx * bm + i] = T.log(run_s[i]) + run_m[i]
    return main

@tilecute.jit(out_idx=[2])
def legacy_reducer_rowdot(M=64, K=8):
    """O = G - rowsum(G * Y) through TileLang's legacy reducer: T.alloc_reducer without
    replication, T.clear, ``r[i] +=`` in T.Parallel, in-place T.finalize_reducer, direct reads."""

    @T.prim_func
    def main(G: T.Tensor((M, K), T.float32), Yt: T.Tensor((M, K), T.float32), O: T.Tensor((M, K), T.float32)):
        with T.Kernel(1, threads=128):
            g = T.alloc_fragment((M, K), T.float32)
            y = T.alloc_fragment((M, K), T.float32)
            r = T.alloc_reducer((M,), T.float32)
            T.copy(G, g)
            T.copy(Yt, y)
            T.clear(r)
            for i, j in T.Parallel(M, K):
                r[i] += g[i, j] * y[i, j]
            T.finalize_reducer(r)
            for i, j in T.Parallel(M, K):
                g[i, j] = g[i, j] - r[i]
            T.copy(g, O)
    return main


# ---- a symbolic K with a shared-to-shared copy between layouts; a reversed serial loop -------

@tilecute.jit(out_idx=[2])
def gemm_symbolic_k_swz_copy(M=128, N=128, bm=64, bn=64, bk=32):
    """C = A @ B for a T.symbolic K that needs no multiple of the tile: A's tile arrives in a
    plain shared buffer and is T.copy'd into a second one T.annotate_layout made swizzled
    (a shared-to-shared copy between layouts) before the GEMM; K bounds the pipelined loop."""
    K = T.symbolic("K")
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_in = T.alloc_shared((bm, bk), T.float16)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.annotate_layout({A_s: make_swizzled_layout(A_s)})
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_in)
                T.copy(B[k * bk, bx * bn], B_s)
                T.copy(A_in, A_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main

@tilecute.jit(out_idx=[1])
def reverse_serial_suffix(N=1024, block=128, v=8):
    """Each thread's suffix sums over its v elements by a T.serial(v - 1, -1, -1) loop into a
    T.alloc_var."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // (block * v), threads=block) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            base = (bx * block + tx) * v
            for i in T.serial(v - 1, -1, -1):
                acc += X[base + i]
                Y[base + i] = acc
    return main


# ---- integer T.pow forms; atomics with a memory order and returned previous pairs -----------
@tilecute.jit(out_idx=[2, 3])
def pow_integer_forms(N=256):
    """T.pow with constant integer exponents over an int32 base (x ** 3 + x ** 0: products and
    a one of the base's dtype) and a float16 base (x ** 2 + x ** -1)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), H: T.Tensor((N,), T.float16), Y: T.Tensor((N,), T.int32),
             Z: T.Tensor((N,), T.float16)):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            Y[tx] = T.pow(X[tx], 3) + T.pow(X[tx], 0)
            Z[tx] = T.pow(H[tx], 2) + T.pow(H[tx], -1)

    return main


@tilecute.jit(out_idx=[])
def atomic_tile_release(M=128, N=128, bm=32):
    """S += the sum of X's row blocks: each block adds its (bm, N) fragment into S by a tile
    T.atomic_add with memory_order="release"."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((bm, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            t = T.alloc_fragment((bm, N), T.float32)
            T.copy(X[bx * bm, 0], t)
            T.atomic_add(S, t, memory_order="release")

    return main


@tilecute.jit(out_idx=[2])
def atomic_addx2_prev_pairs(N=256):
    """Every thread adds its float16 pair into A[0:2] with T.atomic_addx2 and stores the pair
    it replaced (return_prev=True) into P."""

    @T.prim_func
    def main(X: T.Tensor((N * 2,), T.float16), A: T.Tensor((2,), T.float16), P: T.Tensor((N * 2,), T.float16)):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            P[tx * 2:tx * 2 + 2] = T.atomic_addx2(A[0:2], X[tx * 2:tx * 2 + 2], return_prev=True)

    return main


@tilecute.jit(out_idx=[2])
def atomic_addx2_prev_named(N=256):
    """The same pair adds with the old pair bound to a name (TileLang's vector let) and read
    lane by lane with T.extract_lane: P gets old[0] and old[0] + old[1], in float32."""

    @T.prim_func
    def main(X: T.Tensor((N * 2,), T.float16), A: T.Tensor((2,), T.float16), P: T.Tensor((N * 2,), T.float32)):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            old = T.atomic_addx2(A[0:2], X[tx * 2:tx * 2 + 2], return_prev=True)
            P[tx * 2] = T.cast(T.extract_lane(old, 0), T.float32)
            P[tx * 2 + 1] = T.cast(T.extract_lane(old, 0), T.float32) + T.cast(T.extract_lane(old, 1), T.float32)

    return main


# ---- a macro of T.Parallel in T.serial inside a T.Pipelined with order / stage -------------

@tilecute.jit(out_idx=[2])
def gemm_order_stage_scaled(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """C = A @ (B / 2): each B tile is scaled in shared memory by a T.macro whose body is
    T.Parallel in T.serial, called inside a T.Pipelined with an explicit order / stage."""

    @T.macro
    def scale_tile(B_s, s):
        for r in T.serial(bk // 8):
            for i, j in T.Parallel(8, bn):
                B_s[r * 8 + i, j] = B_s[r * 8 + i, j] * s

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2, order=[0, 1, 2, 3], stage=[0, 0, 1, 1]):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                scale_tile(B_s, T.float16(0.5))
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


# ---- unary minus of a float (TVM's x * -1: the sign of zero flips) --------------------------
@tilecute.jit(out_idx=[1])
def negate_reciprocal(N=256, block=128):
    """Y = 1 / -X, elementwise; a +0.0 in X gives -inf (TVM's -x is x * -1, so -(+0.0) is
    -0.0), lane by lane through 2-lane T.Ramp vector accesses."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block, threads=block // 2) as bx:
            tx = T.get_thread_binding()
            base = bx * block + tx * 2
            Y[T.Ramp(base, 1, 2)] = 1.0 / -X[T.Ramp(base, 1, 2)]

    return main


@tilecute.jit(out_idx=[1])
def slice_name_arithmetic(N=256, block=128):
    """A name bound to a 2-element slice (TileLang's vector let) used in arithmetic, lane by
    lane: Y = 1 / -v + 2 * v."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block, threads=block // 2) as bx:
            tx = T.get_thread_binding()
            base = bx * block + tx * 2
            v = X[base:base + 2]
            Y[base:base + 2] = 1.0 / -v + v * 2.0

    return main
