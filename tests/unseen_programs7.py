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
