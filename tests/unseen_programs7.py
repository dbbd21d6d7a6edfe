"""A seventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at the forms programs use to *schedule and synchronise by hand* and at
*GEMM forms*, where a dropped argument or a missing wait is a silent wrong answer:
explicit warp specialization (``with T.ws(g):`` producer / consumer regions and TileLang's
``if tx >= 128: ... else: ...`` branches, rings of ``T.alloc_barrier`` mbarriers with
``T.mbarrier_wait_parity`` / ``T.barrier_wait`` / ``T.mbarrier_arrive`` /
``T.barrier_arrive``, ``T.set_max_nreg``, ``T.shuffle_elect``, ``T.fence_proxy_async``, a
producer whose loads are thread copies, the program's partial barrier
``T.sync_threads(id, n)``), ``T.Pipelined`` with ``order`` / ``stage`` / ``group`` and over
run-time ranges that may be empty, every ``transpose_A`` / ``transpose_B`` pair on the
wgmma and mma.sync paths, ``policy``, ``k_pack``, a run-time ``clear_accum``, fragment
operands, 8-bit and tf32 inputs, ``T.use_swizzle`` in both orders, ``T.annotate_layout``
with TileLang's swizzle constructors, and ``T.Kernel`` with 2-D / 3-D thread blocks and
TileLang's binding helpers.  ``tests/test_unseen_programs7.py`` builds each to a cubin on
the CPU (sm_90a; the mma.sync ones also sm_80) and, on a GPU, compares it with torch
written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T
import tilecute.layout as L


# ---- explicit warp specialization --------------------------------------------------------
def ws_ring_gemm(stages=3, M=256, N=256, K=512, bm=128, bn=128, bk=64):
    """C = A @ B with warpgroup 1 loading (``T.tma_copy`` into stage ``ko % stages`` of
    3-D shared buffers, its 128 threads arriving on ``full``) and warpgroup 0 multiplying
    (waiting on ``full``, releasing the stage on ``empty``): a ring of ``stages`` mbarrier
    pairs whose phases are ``(ko // stages) & 1`` (the producer's first pass waits on the
    phase before the first, which has completed)."""

    @T.prim_func
    def ring(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            with T.ws(0):
                T.clear(acc)
            for ko in range(K // bk):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[ko % stages], ((ko // stages) & 1) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk],
                               A_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.tma_copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn],
                               B_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.mbarrier_arrive(full[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[ko % stages], (ko // stages) & 1)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], acc)
                    T.mbarrier_arrive(empty[ko % stages])
            with T.ws(0):
                T.copy(acc, C[by * bm, bx * bn])
    return ring


def ws_single_buffer_nt(M=256, N=256, K=512, bm=128, bn=128, bk=64):
    """bf16 C = A @ B^T (B stored (N, K)) with one shared tile per operand handed back and
    forth between warpgroup 0 (loads, ``T.barrier_wait(done, (ko + 1) % 2)``) and
    warpgroup 1 (``T.barrier_wait(ready, ko % 2)``, ``transpose_B=True``), inside a
    ``T.Pipelined(..., num_stages=2)`` loop as TileLang's examples write it (the regions
    order the loop themselves)."""

    @T.prim_func
    def single(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                with T.ws(0):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[bx * bn, ko * bk], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(1):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                    T.barrier_arrive(done)
            with T.ws(1):
                T.copy(acc, C[by * bm, bx * bn])
    return single


def ws_branch_thread_copies(stages=2, M=256, N=128, K=256, bm=64, bn=128, bk=64):
    """TileLang's hand warp specialization by thread index: ``tx >= 128`` (the producer,
    ``T.set_max_nreg(40, 0)``) loads both operands with thread copies (``disable_tma``),
    ``T.fence_proxy_async()`` (its generic writes visible to wgmma), and arrives on
    ``full``; the rest (``T.set_max_nreg(232, 1)``) multiply and release.  The copies are
    synchronous in TileLang: the arrive publishes a finished tile (tilecute runs them as
    cp.async and must wait for them before the fence and the arrive)."""

    @T.prim_func
    def branchy(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            tx = T.get_thread_binding()
            if tx >= 128:
                T.set_max_nreg(40, 0)
                for ko in range(K // bk):
                    T.mbarrier_wait_parity(empty[ko % stages], ((ko // stages) % 2) ^ 1)
                    T.copy(A[by * bm, ko * bk], A_s[ko % stages, :, :], disable_tma=True)
                    T.copy(B[ko * bk, bx * bn], B_s[ko % stages, :, :], disable_tma=True)
                    T.fence_proxy_async()
                    T.mbarrier_arrive(full[ko % stages])
            else:
                T.set_max_nreg(232, 1)
                T.clear(acc)
                for ko in range(K // bk):
                    T.mbarrier_wait_parity(full[ko % stages], (ko // stages) % 2)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], acc)
                    T.mbarrier_arrive(empty[ko % stages])
                T.copy(acc, C[by * bm, bx * bn])
    return branchy


def copy_then_tma_store(M=256, N=128, bm=64):
    """A tile loaded by thread copies (``disable_tma``: cp.async in tilecute) and stored
    at once with ``T.copy`` (a TMA store): the store must see the loaded values."""

    @T.prim_func
    def roundtrip(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            s = T.alloc_shared((bm, N), T.float16)
            T.copy(A[bx * bm, 0], s, disable_tma=True)
            T.copy(s, B[bx * bm, 0])
    return roundtrip


def partial_barrier_after_copies(M=256, N=128, bm=64):
    """The program's own partial barrier over the whole block, ``T.sync_threads(1, 256)``,
    orders a thread-copied tile (cp.async in tilecute) before other threads read its rows
    in reverse order: B's tile is A's upside down."""

    @T.prim_func
    def partial(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=256) as bx:
            s = T.alloc_shared((bm, N), T.float16)
            T.copy(A[bx * bm, 0], s, disable_tma=True)
            T.sync_threads(1, 256)
            for i, j in T.Parallel(bm, N):
                B[bx * bm + i, j] = s[bm - 1 - i, j]
    return partial


def ws_two_consumers_elected(stages=2, M=256, N=256, K=256, bm=128, bn=256, bk=64):
    """Two compute warpgroups (``T.ws(0, 1)``, ``policy=FullCol``: one warpgroup along M,
    two along N) and a producer warpgroup (``T.ws(2)``); one elected thread
    (``T.shuffle_elect(128)``: lane one of the first warp of each warpgroup) issues the
    loads and is the one arrival ``full`` expects, and each compute warpgroup's elected
    thread releases the stage (``empty`` expects 2).  B is stored (N, K)."""

    @T.prim_func
    def two(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
            C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=384) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), T.float16)
            B_s = T.alloc_shared((stages, bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            full = T.alloc_barrier([1] * stages)
            empty = T.alloc_barrier([2] * stages)
            with T.ws(2):
                T.set_max_nreg(40, 0)
                for ko in range(K // bk):
                    T.barrier_wait(empty[ko % stages], ((ko // stages) & 1) ^ 1)
                    if T.shuffle_elect(128):
                        T.tma_copy(A[by * bm, ko * bk], A_s[ko % stages, :, :],
                                   barrier=full[ko % stages])
                        T.tma_copy(B[bx * bn, ko * bk], B_s[ko % stages, :, :],
                                   barrier=full[ko % stages])
                        T.barrier_arrive(full[ko % stages])
            with T.ws(0, 1):
                T.set_max_nreg(232, 1)
                T.clear(acc)
                for ko in range(K // bk):
                    T.barrier_wait(full[ko % stages], (ko // stages) & 1)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], acc, transpose_B=True,
                           policy=T.GemmWarpPolicy.FullCol)
                    if T.shuffle_elect(128):
                        T.barrier_arrive(empty[ko % stages])
                T.copy(acc, C[by * bm, bx * bn])
    return two


# ---- T.gemm forms --------------------------------------------------------------------------
_DT = {"float16": T.float16, "bfloat16": T.bfloat16, "float32": T.float32,
       "float8_e4m3": T.float8_e4m3, "float8_e5m2": T.float8_e5m2, "int8": T.int8,
       "int32": T.int32}


def gemm_forms(ta=False, tb=False, dtype="float16", accum="float32", out=None, M=128, N=128,
               K=256, bm=64, bn=64, bk=32, threads=128, stages=2, policy="Square", k_pack=1,
               clear="first_step"):
    """C = op(A) @ op(B): A stored (K, M) when ``ta`` (``transpose_A=True``), B stored (N, K)
    when ``tb``; a ``T.Pipelined`` K loop of ``stages``; ``policy``, ``k_pack`` passed on;
    the accumulator cleared by ``T.clear`` (``clear="clear"``) or by the first step's
    ``clear_accum=(ko == 0)`` (``"first_step"``), or (``"every_step"``) by
    ``clear_accum=True`` at every step, which leaves only the last K block's product."""
    dt, acc_t = _DT[dtype], _DT[accum]
    out_t = _DT[out or accum]
    a_shape, a_tile = ((K, M), (bk, bm)) if ta else ((M, K), (bm, bk))
    b_shape, b_tile = ((N, K), (bn, bk)) if tb else ((K, N), (bk, bn))
    pol = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def forms(A: T.Tensor(a_shape, dt), B: T.Tensor(b_shape, dt), C: T.Tensor((M, N), out_t)):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, dt)
            B_s = T.alloc_shared(b_tile, dt)
            acc = T.alloc_fragment((bm, bn), acc_t)
            if clear == "clear":
                T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                if ta:
                    T.copy(A[ko * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * bk], A_s)
                if tb:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                if clear == "every_step":
                    T.gemm(A_s, B_s, acc, ta, tb, pol, True, k_pack)
                elif clear == "first_step":
                    T.gemm(A_s, B_s, acc, ta, tb, pol, ko == 0, k_pack)
                else:
                    T.gemm(A_s, B_s, acc, transpose_A=ta, transpose_B=tb, policy=pol,
                           k_pack=k_pack)
            T.copy(acc, C[by * bm, bx * bn])
    return forms


def gemm_fragment_operands(M=128, N=128, K=128, bm=64, bn=64, bk=32):
    """TileLang's ``rs`` and ``sr`` forms: P = relu(A) computed in a fragment and
    multiplied from registers with shared B (``T.gemm(A_frag, B_s, C1)``), and shared A
    times a fragment Bf = 2 B (``T.gemm(A_s, B_frag, C2)``, staged through shared memory)."""

    @T.prim_func
    def frags(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              C1: T.Tensor((M, N), T.float32), C2: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            A_f = T.alloc_fragment((bm, bk), T.float16)
            B_f = T.alloc_fragment((bk, bn), T.float16)
            c1 = T.alloc_fragment((bm, bn), T.float32)
            c2 = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c1)
            T.clear(c2)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.copy(A_s, A_f)
                for i, j in T.Parallel(bm, bk):
                    A_f[i, j] = T.max(A_f[i, j], T.float16(0))
                T.gemm(A_f, B_s, c1)
                T.copy(B_s, B_f)
                for i, j in T.Parallel(bk, bn):
                    B_f[i, j] = B_f[i, j] * T.float16(2)
                T.gemm(A_s, B_f, c2)
            T.copy(c1, C1[by * bm, bx * bn])
            T.copy(c2, C2[by * bm, bx * bn])
    return frags


def gemm_accumulator_window(M=64, N=128, K=64):
    """A GEMM into a window of a larger accumulator, ``T.gemm(A_s, B_s, acc[0:64, 0:64])``
    (TileLang passes C as a region): tilecute refuses it naming C."""

    @T.prim_func
    def window(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, 64), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.clear(acc)
            T.copy(A, A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, acc[0:64, 0:64])
            T.copy(acc, C)
    return window


# ---- T.Pipelined ---------------------------------------------------------------------------
def split_k_ranges(stages=3, M=128, N=128, K=512, bm=64, bn=64, bk=32, splits=4):
    """Split-K with each split's K-block range read from tensors: ``T.Pipelined(lo, hi,
    num_stages=stages)`` over a run-time range that may be empty (``lo == hi``) or reversed
    (``hi < lo``: no steps, as ``range``); C[z] = A[:, lo*bk:hi*bk] @ B[lo*bk:hi*bk, :]."""

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               Lo: T.Tensor((splits,), T.int32), Hi: T.Tensor((splits,), T.int32),
               C: T.Tensor((splits, M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            lo = Lo[bz]
            hi = Hi[bz]
            T.clear(acc)
            for ko in T.Pipelined(lo, hi, num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[bz, by * bm, bx * bn])
    return splitk


def pipelined_explicit_schedule(stages=2, M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """``T.Pipelined(..., order=[0, 1, 2], stage=[0, 0, stages - 1], group=[[0], [1],
    [2]])``: TileLang's spelling of the default schedule (loads in stage 0, the GEMM in
    the last stage, source order)."""

    @T.prim_func
    def scheduled(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=stages, order=[0, 1, 2],
                                  stage=[0, 0, stages - 1], group=[[0], [1], [2]]):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return scheduled


def pipelined_reordered(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """``order=[1, 0, 2]`` (B's load issued before A's): the two loads of a step issue
    together (one mbarrier, one wait), so their order is not observable; tilecute keeps
    source order for them."""

    @T.prim_func
    def reordered(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=3, order=[1, 0, 2], stage=[0, 0, 2]):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return reordered


# ---- block order and shared layouts ---------------------------------------------------------
def swizzled_gemm(order="row", panel=2, M=320, N=192, K=128, bm=64, bn=64, bk=32):
    """A GEMM over a 3 x 5 grid with ``T.use_swizzle(panel, order=order)`` (TileLang's
    rasterization: the block indices rebound, panels walked from alternate ends; the
    grid not a multiple of the panel), its A tile annotated with TileLang's
    ``make_mma_swizzle_layout`` and B's with ``make_swizzled_layout``; each block also
    records which (bx, by) it became in Who."""
    from tilecute.cuda.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def swz(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
            C: T.Tensor((M, N), T.float32), Who: T.Tensor((M // bm, N // bn), T.int32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            T.use_swizzle(panel, order=order)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.annotate_layout({A_s: make_mma_swizzle_layout(A_s),
                               B_s: L.make_swizzled_layout(B_s)})
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
            if T.get_thread_binding() == 0:
                Who[by, bx] = Who[by, bx] + 1
    return swz


# ---- T.Kernel's thread forms ----------------------------------------------------------------
def kernel_thread_forms(M=64, N=128):
    """A 2-D block (32, 4) over a 2 x 3 grid: ``T.get_thread_binding(0/1)``,
    ``T.thread_binding(0, 4, "threadIdx.y")``, ``T.get_block_binding(0/1)``; a T.Parallel
    copy of a shared tile read upside down (spread over all 128 threads), and each thread
    writing its own coordinates into W."""

    @T.prim_func
    def forms(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
              W: T.Tensor((2, 3, 4, 32), T.int32)):
        with T.Kernel(2, 3, threads=(32, 4)) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            ty2 = T.thread_binding(0, 4, "threadIdx.y")
            s = T.alloc_shared((M // 2, N), T.float32)
            T.copy(A[bx * (M // 2), 0], s)
            if by == 0:
                for i, j in T.Parallel(M // 2, N):
                    B[bx * (M // 2) + i, j] = s[M // 2 - 1 - i, j] + 0.5
            W[T.get_block_binding(0), T.get_block_binding(1), ty, tx] = \
                tx + 100 * ty2 + 10000 * by + 100000 * bx
    return forms
