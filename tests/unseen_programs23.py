"""A twenty-third set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), all aimed at the cp.async software pipeline (``pipeline_async_copies``): on
sm_80, or sm_90a with TMA / wgmma / warp specialization off, a ``T.Pipelined(n,
num_stages=S)`` loop's global-to-shared ``T.copy`` tiles are multi-buffered and issued
``S - 1`` steps ahead.  The programs stress what that rewrite must keep: several copies a
step at different places (before and after GEMMs), tiles of different sizes and element
types (fp16, bf16, fp8, int8, float32), ragged tails (constant, ``T.dynamic``, ``T.min``
bounds), loops starting past 0 (``T.Pipelined(lo, hi)``) and trip counts below ``S - 1``
or 0, pipelined loops inside serial or persistent loops and two in sequence, copies read
through fragments, reductions and ``T.Parallel`` nests, indices from an outer loop or a
page table in global memory, a loop that updates its own source tensor, a manual
``order``/``stage`` schedule, ``num_stages=1`` and stage counts past shared memory, the
program's own ``T.sync_threads`` and ``T.async_copy``, and swizzled shared layouts.

``tests/test_unseen_programs23.py`` builds each to sm_80 and sm_90a (no TMA) cubins on the
CPU, checks the pass's rewrite in the IR, and on a GPU compares each with torch.

Each factory is a ``@tilecute.jit`` function returning the kernel; ``.get_tir(...)`` gives
the ``prim_func`` (what the tests compile for each target)."""

import tilecute
import tilecute.language as T


# ---- GEMMs ----------------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def gemm_ragged_every_dim(M=200, N=136, K=100, bm=64, bn=64, bk=32, stages=3):
    """C = A @ B with every dim ragged: K = 100 in 32-wide steps (the last step 4 columns,
    rows 200 bytes apart: 8-byte cp.async with zero-filled tails), M and N past the tiles."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_bf16_nt_dynamic_mnk(bm=64, bn=64, bk=64, stages=4):
    """C = A @ B^T in bfloat16 with M, N and K all known at run time (B stored N x K):
    rows K elements apart are of unknown alignment, so the tiles copy element by element
    (no cp.async: the loop keeps one buffer)."""
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "bfloat16")
            B_s = T.alloc_shared((bn, bk), "bfloat16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[bx * bn, ko * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit
def gemm_split_k_lo_hi(M=128, N=128, K=1000, bm=64, bn=64, bk=32, splits=3, stages=3):
    """Split-K: block ``bz`` runs K steps ``lo .. hi`` (``T.Pipelined(lo, hi)``, hi cut by
    ``T.min`` at the last step) and adds its partial product into C with atomics.  K = 1000
    is 32 steps (the last one 8 wide): splits of 11, 11 and 10 steps."""
    steps = (K + bk - 1) // bk
    per = (steps + splits - 1) // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            lo = bz * per
            hi = T.min(lo + per, steps)
            for ko in T.Pipelined(lo, hi, num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):
                T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j])
    return main


@tilecute.jit(out_idx=[2])
def gemm_fewer_steps_than_stages(M=128, N=128, K=64, bm=64, bn=64, bk=32, stages=4):
    """Two K steps under ``num_stages=4``: the prologue's third step is past the end (an
    empty group), the loop's refills all empty."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[3])
def gemm_second_copy_after_first_gemm(M=128, N=64, K=256, bm=64, bn=64, bk=32, stages=3):
    """D = A @ B + A @ E: the E tile is copied after the first GEMM (the pass issues it
    with A's and B's at the step's top), the second GEMM reads it."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             E: T.Tensor((K, N), "float16"), D: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            E_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
                T.copy(E[ko * bk, bx * bn], E_s)
                T.gemm(A_s, E_s, acc)
            T.copy(acc, D[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_int8_i32(M=128, N=128, K=320, bm=64, bn=64, bk=64, stages=3):
    """C = A @ B^T in int8 with an int32 accumulator (1-byte tiles, 16-byte cp.async)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"),
             C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "int8")
            B_s = T.alloc_shared((bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[bx * bn, ko * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_swizzle_annotated(M=256, N=256, K=256, bm=128, bn=128, bk=32, stages=3):
    """The GEMM with its shared tiles' layouts given by ``T.annotate_layout`` (a swizzled
    layout) and block rasterization by ``T.use_swizzle``."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.annotate_layout({A_s: tilecute.layout.make_swizzled_layout(A_s),
                               B_s: tilecute.layout.make_swizzled_layout(B_s)})
            T.use_swizzle(panel_size=2)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_stages_past_shared_memory(M=256, N=256, K=512, bm=128, bn=256, bk=64, stages=6):
    """Six stages of 128x64 + 64x256 fp16 tiles (48 KiB a stage) do not fit a block's
    shared memory: the loop gets the most that do."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_one_stage(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """``num_stages=1``: TileLang's pipeline of one stage is the loop as written (copy,
    wait, compute); nothing is issued ahead."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=1):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_program_sync_in_body(M=128, N=128, K=256, bm=64, bn=64, bk=32, stages=3):
    """The program's own ``T.sync_threads()`` after the copies and after the GEMM (as
    hand-written kernels put them): kept, the pass's barriers added where needed."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.sync_threads()
                T.gemm(A_s, B_s, acc)
                T.sync_threads()
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_manual_order_loads_last(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """``T.Pipelined(n, order=[1, 2, 0], stage=[0, 0, 1])``: the GEMM issued first in a
    step, the next step's copies after it (TileLang's manual schedule)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), order=[1, 2, 0], stage=[0, 0, 1]):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def gemm_persistent_tiles(M=256, N=192, K=160, bm=64, bn=64, bk=32, sms=5, stages=3):
    """A persistent GEMM: ``sms`` blocks walk the output tiles (a serial loop; the tile
    from its variable), each running the pipelined K loop: the prologue of a tile's loop
    refills stages the last tile's final steps read."""
    tiles_n = (N + bn - 1) // bn
    tiles = ((M + bm - 1) // bm) * tiles_n

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(sms, threads=128) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            for t in T.serial(T.ceildiv(tiles - bx, sms)):
                tile = bx + t * sms
                tm = tile // tiles_n
                tn = tile % tiles_n
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                    T.copy(A[tm * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, tn * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[tm * bm, tn * bn])
    return main


@tilecute.jit(out_idx=[3])
def two_loops_one_tile(M=128, N=64, K1=192, K2=96, bm=64, bn=64, bk=32, stages=3):
    """C = A1 @ B1 + A2 @ B2 in two pipelined loops that copy into the same shared tiles
    (the second loop's prologue overwrites what the first loop's last steps read)."""
    @T.prim_func
    def main(A1: T.Tensor((M, K1), "float16"), B1: T.Tensor((K1, N), "float16"),
             AB2: T.Tensor((M + K2, K2), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K1 // bk, num_stages=stages):
                T.copy(A1[by * bm, ko * bk], A_s)
                T.copy(B1[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for ko in T.Pipelined(K2 // bk, num_stages=stages):
                T.copy(AB2[by * bm, ko * bk], A_s)
                T.copy(AB2[M + ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[4])
def two_loops_own_tiles(M=128, N=64, K1=192, K2=160, bm=64, bn=64, bk=32, stages=3):
    """The same sum with each loop's own tiles (both loops pipelined; shared memory may put
    the second loop's stages on the first's bytes)."""
    @T.prim_func
    def main(A1: T.Tensor((M, K1), "float16"), B1: T.Tensor((K1, N), "float16"),
             A2: T.Tensor((M, K2), "float16"), B2: T.Tensor((K2, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A1_s = T.alloc_shared((bm, bk), "float16")
            B1_s = T.alloc_shared((bk, bn), "float16")
            A2_s = T.alloc_shared((bm, bk), "float16")
            B2_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K1 // bk, num_stages=stages):
                T.copy(A1[by * bm, ko * bk], A1_s)
                T.copy(B1[ko * bk, bx * bn], B1_s)
                T.gemm(A1_s, B1_s, acc)
            for ko in T.Pipelined(K2 // bk, num_stages=stages):
                T.copy(A2[by * bm, ko * bk], A2_s)
                T.copy(B2[ko * bk, bx * bn], B2_s)
                T.gemm(A2_s, B2_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[2])
def batched_gemm_serial_batches(Bt=3, M=64, N=64, K=128, bk=32, stages=3):
    """One block per output tile walks the batches in a serial loop; the pipelined loop's
    copies index the batch by the outer loop's variable."""
    @T.prim_func
    def main(A: T.Tensor((Bt, M, K), "float16"), B: T.Tensor((Bt, K, N), "float16"),
             C: T.Tensor((Bt, M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            for b in T.serial(Bt):
                T.clear(acc)
                for ko in T.Pipelined(K // bk, num_stages=stages):
                    T.copy(A[b, 0, ko * bk], A_s)
                    T.copy(B[b, ko * bk, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[b, 0, 0])
    return main


# ---- attention --------------------------------------------------------------------------------
@tilecute.jit(out_idx=[3])
def attention_causal_fwd(S=320, D=64, bm=64, bn=64, stages=2, causal=True):
    """Single-head causal attention forward with an online softmax: K at the step's top, V
    between the GEMMs; the trip count ``ceildiv((bx + 1) * bm, bn)`` differs by block."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"),
             V: T.Tensor((S, D), "float16"), O: T.Tensor((S, D), "float16")):
        with T.Kernel(T.ceildiv(S, bm), threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), "float16")
            K_s = T.alloc_shared((bn, D), "float16")
            V_s = T.alloc_shared((bn, D), "float16")
            s = T.alloc_fragment((bm, bn), "float32")
            p = T.alloc_fragment((bm, bn), "float16")
            o = T.alloc_fragment((bm, D), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            rs = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bx * bm, 0], Q_s)
            T.clear(o)
            T.clear(l)
            T.fill(m, -T.infinity("float32"))
            n = T.ceildiv((bx + 1) * bm, bn) if causal else T.ceildiv(S, bn)
            for k in T.Pipelined(n, num_stages=stages):
                T.copy(K[k * bn, 0], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                if causal:
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.if_then_else(
                            (bx * bm + i >= k * bn + j) and (k * bn + j < S), s[i, j],
                            -T.infinity("float32"))
                else:  # (the keys past S of the last tile only)
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.if_then_else(k * bn + j < S, s[i, j], -T.infinity("float32"))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                for i in T.Parallel(bm):
                    rs[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, D):
                    o[i, j] *= rs[i]
                T.reduce_sum(s, m_prev, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rs[i] + m_prev[i]
                T.copy(s, p)
                T.copy(V[k * bn, 0], V_s)
                T.gemm(p, V_s, o)
            for i, j in T.Parallel(bm, D):
                o[i, j] /= l[i]
            T.copy(o, O[bx * bm, 0])
    return main


@tilecute.jit(out_idx=[4])
def paged_decode_page_table(H=4, D=64, page=32, pages=6, max_pages=4, stages=3):
    """Decode attention scores over a paged KV cache: the page of step ``k`` is looked up
    in the global page table inside the copy's index (``Kc[Tbl[h, k], 0, 0]``), so it can
    be issued steps ahead.  Scores are q . k for each key (no softmax: the lookup is what
    is tested), written per page."""
    @T.prim_func
    def main(Qd: T.Tensor((H, D), "float16"), Kc: T.Tensor((pages, page, D), "float16"),
             Tbl: T.Tensor((H, max_pages), "int32"), Lens: T.Tensor((H,), "int32"),
             Out: T.Tensor((H, max_pages * page), "float32")):
        with T.Kernel(H, threads=128) as h:
            K_s = T.alloc_shared((page, D), "float16")
            q = T.alloc_fragment((D,), "float32")
            sc = T.alloc_fragment((page, D), "float32")
            r = T.alloc_fragment((page,), "float32")
            for d in T.Parallel(D):
                q[d] = Qd[h, d]
            for k in T.Pipelined(T.ceildiv(Lens[h], page), num_stages=stages):
                T.copy(Kc[Tbl[h, k], 0, 0], K_s)
                for j, d in T.Parallel(page, D):
                    sc[j, d] = K_s[j, d] * q[d]
                T.reduce_sum(sc, r, dim=1)
                for j in T.Parallel(page):
                    Out[h, k * page + j] = T.if_then_else(k * page + j < Lens[h], r[j], 0.0)
    return main


@tilecute.jit(out_idx=[3])
def paged_rows_page_in_var(H=4, D=64, page=32, pages=6, max_pages=4, stages=3):
    """The same lookup through a ``T.alloc_var`` the body sets each step (``pg =
    Tbl[h, k]``): the copy's index reads the step's own work, so it cannot run ahead (one
    buffer).  Out holds each page's column sums."""
    @T.prim_func
    def main(Kc: T.Tensor((pages, page, D), "float16"), Tbl: T.Tensor((H, max_pages), "int32"),
             Lens: T.Tensor((H,), "int32"), Out: T.Tensor((H, max_pages, D), "float32")):
        with T.Kernel(H, threads=128) as h:
            K_s = T.alloc_shared((page, D), "float16")
            f = T.alloc_fragment((page, D), "float32")
            cs = T.alloc_fragment((D,), "float32")
            pg = T.alloc_var("int32")
            for k in T.Pipelined(T.ceildiv(Lens[h], page), num_stages=stages):
                pg = Tbl[h, k]
                T.copy(Kc[pg, 0, 0], K_s)
                T.copy(K_s, f)
                T.reduce_sum(f, cs, dim=0)
                T.copy(cs, Out[h, k, 0])
    return main


# ---- reductions and elementwise over pipelined tiles -------------------------------------------
@tilecute.jit(out_idx=[1])
def column_sums_dynamic_rows(D=128, bm=32, stages=3):
    """Column sums of an (N, D) float32 matrix with N known at run time (0 allowed: the
    loop runs no step): each step's tile read by a ``T.Parallel`` nest into a fragment."""
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((N, D), "float32"), Y: T.Tensor((D,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((bm, D), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, bm), num_stages=stages):
                T.copy(X[k * bm, 0], X_s)
                for j in T.Parallel(D):
                    for i in T.serial(bm):
                        acc[j] += X_s[i, j]
            T.copy(acc, Y)
    return main


@tilecute.jit(out_idx=[1])
def row_max_via_fragment(M=256, N=1000, bm=64, bn=128, stages=3):
    """Row maxima over N = 1000 columns in 128-wide steps: each step's tile goes shared ->
    fragment (``T.copy``) and ``T.reduce_max(clear=False)`` folds it in; the ragged last
    step's missing columns (zero-filled by the copy) are masked to -inf by a ``T.Parallel``
    nest."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            X_s = T.alloc_shared((bm, bn), "float16")
            f = T.alloc_fragment((bm, bn), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            T.fill(mx, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(N, bn), num_stages=stages):
                T.copy(X[bx * bm, k * bn], X_s)
                T.copy(X_s, f)
                for i, j in T.Parallel(bm, bn):
                    f[i, j] = T.if_then_else(k * bn + j < N, f[i, j], -T.infinity("float32"))
                T.reduce_max(f, mx, dim=1, clear=False)
            T.copy(mx, Y[bx * bm])
    return main


@tilecute.jit(out_idx=[2])
def fp8_dequant_rows_with_scales(M=128, N=512, bm=32, bn=128, stages=3):
    """Row sums of an fp8 (e4m3) matrix times per-column float32 scales: two copies a step
    of different sizes and element types (a 32x128 fp8 tile, a 128-float scale vector)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float8_e4m3"), Sc: T.Tensor((N,), "float32"),
             Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            X_s = T.alloc_shared((bm, bn), "float8_e4m3")
            S_s = T.alloc_shared((bn,), "float32")
            f = T.alloc_fragment((bm, bn), "float32")
            part = T.alloc_fragment((bm,), "float32")
            acc = T.alloc_fragment((bm,), "float32")
            T.clear(acc)
            for k in T.Pipelined(N // bn, num_stages=stages):
                T.copy(X[bx * bm, k * bn], X_s)
                T.copy(Sc[k * bn], S_s)
                for i, j in T.Parallel(bm, bn):
                    f[i, j] = T.cast(X_s[i, j], "float32") * S_s[j]
                T.reduce_sum(f, part, dim=1)
                for i in T.Parallel(bm):
                    acc[i] += part[i]
            T.copy(acc, Y[bx * bm])
    return main


@tilecute.jit(out_idx=[1])
def int8_tile_abs_sum(M=64, N=768, bm=64, bn=256, stages=2):
    """Sum of |x| per row of an int8 matrix, accumulated in int32 through shared tiles
    (the tile scaled in place in shared memory after it lands: x * 1, a write of the stage
    the step reads)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            X_s = T.alloc_shared((bm, bn), "int8")
            f = T.alloc_fragment((bm, bn), "int32")
            part = T.alloc_fragment((bm,), "int32")
            acc = T.alloc_fragment((bm,), "int32")
            T.clear(acc)
            for k in T.Pipelined(N // bn, num_stages=stages):
                T.copy(X[bx * bm, k * bn], X_s)
                for i, j in T.Parallel(bm, bn):
                    X_s[i, j] = T.if_then_else(X_s[i, j] < 0, -X_s[i, j], X_s[i, j])
                for i, j in T.Parallel(bm, bn):
                    f[i, j] = T.cast(X_s[i, j], "int32")
                T.reduce_sum(f, part, dim=1)
                for i in T.Parallel(bm):
                    acc[i] += part[i]
            T.copy(acc, Y[bx * bm])
    return main


@tilecute.jit
def prefix_carry_in_place(N=4096, b=512, stages=3):
    """X[k + 1 tile] += X[k tile] for k in order: each step copies the tile the previous
    step wrote back to global memory (the loop updates its own source), so copies cannot
    run ahead: a running prefix sum over tiles."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((b,), "float32")
            f = T.alloc_fragment((b,), "float32")
            for k in T.Pipelined(N // b - 1, num_stages=stages):
                T.copy(X[k * b], X_s)
                for i in T.Parallel(b):
                    f[i] = X_s[i] + X[(k + 1) * b + i]
                T.copy(f, X[(k + 1) * b])
    return main


@tilecute.jit(out_idx=[2])
def async_copy_program_mixed(N=4096, b=512, stages=3):
    """The program's own ``T.async_copy`` with its ``T.ptx_wait_group`` beside a plain
    ``T.copy`` in a pipelined loop: left as the program orders it."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"),
             Z: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((b,), "float32")
            Y_s = T.alloc_shared((b,), "float32")
            for k in T.Pipelined(N // b, num_stages=stages):
                T.async_copy(X[k * b:(k + 1) * b], X_s)
                T.copy(Y[k * b], Y_s)
                T.ptx_wait_group(0)
                T.sync_threads()
                for i in T.Parallel(b):
                    Z[k * b + i] = X_s[i] * Y_s[i]
    return main


@tilecute.jit(out_idx=[2])
def bias_tile_and_vector_sizes(M=128, N=256, K=192, bm=64, bn=128, bk=64, stages=3):
    """Y[i, j] = sum_k (X[i, k] + bias[k]) * W[k, j]: a matrix tile and a 64-element bias
    vector a step (different sizes), the bias added to the tile in shared memory by a
    ``T.Parallel`` nest before the GEMM reads it."""
    @T.prim_func
    def main(X: T.Tensor((M, K), "float16"), W: T.Tensor((K, N), "float16"),
             Y: T.Tensor((M, N), "float32"), bias: T.Tensor((K,), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            X_s = T.alloc_shared((bm, bk), "float16")
            W_s = T.alloc_shared((bk, bn), "float16")
            b_s = T.alloc_shared((bk,), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                T.copy(X[by * bm, ko * bk], X_s)
                T.copy(bias[ko * bk], b_s)
                T.copy(W[ko * bk, bx * bn], W_s)
                for i, j in T.Parallel(bm, bk):
                    X_s[i, j] = X_s[i, j] + b_s[j]
                T.gemm(X_s, W_s, acc)
            T.copy(acc, Y[by * bm, bx * bn])
    return main


# ---- values the step computes before its copies ----------------------------------------------
@tilecute.jit(out_idx=[2])
def gemm_k_offset_in_a_let(M=128, N=128, K=288, bm=64, bn=64, bk=32, stages=3):
    """The step's K offset bound first (``k0 = ko * bk``) and the copies indexed by it, as
    TileLang programs often write: the copies may still run ahead (the offset of step ko +
    2 is (ko + 2) * bk)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                k0 = ko * bk
                T.copy(A[by * bm, k0], A_s)
                T.copy(B[k0, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilecute.jit(out_idx=[3])
def paged_page_in_a_let(H=4, D=64, page=32, pages=6, max_pages=4, stages=3):
    """Per-page column sums of a paged cache with the page looked up into a plain
    binding (``pg = Tbl[h, k]``): the table is not written in the loop, so step k + 2's
    copy reads ``Tbl[h, k + 2]``."""
    @T.prim_func
    def main(Kc: T.Tensor((pages, page, D), "float16"), Tbl: T.Tensor((H, max_pages), "int32"),
             Lens: T.Tensor((H,), "int32"), Out: T.Tensor((H, max_pages, D), "float32")):
        with T.Kernel(H, threads=128) as h:
            K_s = T.alloc_shared((page, D), "float16")
            f = T.alloc_fragment((page, D), "float32")
            cs = T.alloc_fragment((D,), "float32")
            for k in T.Pipelined(T.ceildiv(Lens[h], page), num_stages=stages):
                pg = Tbl[h, k]
                T.copy(Kc[pg, 0, 0], K_s)
                T.copy(K_s, f)
                T.reduce_sum(f, cs, dim=0)
                T.copy(cs, Out[h, k, 0])
    return main


@tilecute.jit(out_idx=[2])
def consume_counted_tiles(Bq=3, D=64, bm=16, cap=8, stages=3):
    """Each block sums the first ``Cnt[b]`` row tiles of its queue and marks the queue
    consumed (``Cnt[b] = 0``) at the first step: the trip count is read once, when the
    loop starts, so the later steps still run (a refill guard reading ``Cnt[b]`` again
    would see 0 and skip their copies)."""
    @T.prim_func
    def main(X: T.Tensor((Bq, cap * bm, D), "float32"), Cnt: T.Tensor((Bq,), "int32"),
             Y: T.Tensor((Bq, D), "float32")):
        with T.Kernel(Bq, threads=128) as b:
            X_s = T.alloc_shared((bm, D), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for k in T.Pipelined(Cnt[b], num_stages=stages):
                T.copy(X[b, k * bm, 0], X_s)
                for j in T.Parallel(D):
                    for i in T.serial(bm):
                        acc[j] += X_s[i, j]
                if k == 0:
                    Cnt[b] = 0
            T.copy(acc, Y[b, 0])
    return main
