"""Programs in TileLang's idioms (written for tilecute, not taken from TileLang) that each
exercise one semantic corner TileLang's own issue tracker reports as silently miscomputed
(most of them fuzzer-found ``[wrong-code]`` reports on tile-ai/tilelang): fragments written
or read through serial loops, loops of different extents and rotated indices; a
``T.Pipelined`` body that reads a shared tile and then overwrites it (write-after-read) or
reads after a ``T.atomic_add``; ``clear=False`` reductions with ``nan_propagate``, reducers
(``replication="all"``, epochs with ``batch``); ``T.annotate_safe_value`` on an
out-of-bounds tile, column-padded shared tiles, 1-D stores of odd byte sizes and partial
tiles, ``T.cumsum`` over a shared sub-region, ``T.fill`` of a row-offset fragment region;
control flow (an integer element as an ``if`` condition, two guards of one form on two
buffers, a guard its own body invalidates, a cast-store under nested ``if``s, ``break`` in
``T.vectorized`` and in ``T.unroll(explicit=True)``, a loop-carried temporary read after its
source is overwritten); ``T.gemm`` with both operands in registers or A shared / B in
registers under ``clear_accum=True``; ``T.Persistent`` over a tile count that is no multiple
of 8; shared exchanges inside a branch on the thread index (a block barrier is needed
between the write and the read); integer division and modulo of negative numbers; views and
``T.any_of`` / ``T.all_of`` over a swizzled shared tile; a stepped ``T.serial`` from a
``uint64`` variable; and forms TileLang takes but tilecute refuses by name.

``tests/test_issue_corners.py`` builds each to cubins on the CPU and checks what each means
in the generated source; on a GPU it compares them with torch."""

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- fragments: serial loops, mixed extents, rotated reads --------------------------------
@tilecute.jit(out_idx=[1])
def serial_fragment_store(M=16, N=16):
    """B = 2 A, the fragment written out element by element through two ``T.serial`` loops
    (TileLang #2396: each element stored once, with its own value)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((M, N), T.float32)
            T.copy(A, f)
            for i in T.serial(M):
                for j in T.serial(N):
                    B[i, j] = f[i, j] * 2.0
    return main


@tilecute.jit(out_idx=[1])
def parallel_extents_share_fragment(n=256, head=100):
    """C = A + 1 except C[:head] = 6: a (n,) fragment filled whole, then its first ``head``
    elements overwritten by a smaller ``T.Parallel``, then read whole (TileLang #2957: the
    larger loops run their full extent)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((n,), T.float32)
            for i in T.Parallel(n):
                f[i] = A[i]
            for i in T.Parallel(head):
                f[i] = 5.0
            for i in T.Parallel(n):
                C[i] = f[i] + 1.0
    return main


@tilecute.jit(out_idx=[2])
def column_table_mod(M=16, N=64, K=7):
    """C[i, j] = A[i, j] + B[j % K] with K not dividing N (TileLang #2955)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((K,), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j] + B[j % K]
    return main


@tilecute.jit(out_idx=[1])
def fragment_rotate(n=128, off=1):
    """B[i] = A[(i + off) % n] through a fragment read at the rotated index (TileLang
    #2948: the index is not dropped)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            buf = T.alloc_fragment((n,), T.int32)
            for i in T.Parallel(n):
                buf[i] = A[i]
            for i in T.Parallel(n):
                B[i] = buf[(i + off) % n]
    return main


@tilecute.jit(out_idx=[1])
def rowsum_rotate(M=64, N=64, off=3):
    """B[i] = sum(A[(i + off) % M, :]): a row-sum fragment from ``T.reduce_sum`` read at a
    rotated row."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), T.float32)
            rs = T.alloc_fragment((M,), T.float32)
            T.copy(A, x)
            T.reduce_sum(x, rs, dim=1)
            for i in T.Parallel(M):
                B[i] = rs[(i + off) % M]
    return main


# ---- software pipelining ------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def pipelined_consume_then_overwrite(W=32, NK=8, stages=2):
    """Out = sum_k (k + 1) * tile_k where tile_0 = S0 and tile_k = A[k - 1]: each step reads
    the shared tile, then ``T.copy`` overwrites it with the next (write-after-read across the
    back edge; TileLang #2668: ``num_stages=2`` computes what ``num_stages=0`` does)."""

    @T.prim_func
    def main(A: T.Tensor((NK, W), T.int32), S0: T.Tensor((W,), T.int32), Out: T.Tensor((W,), T.int32)):
        with T.Kernel(1, threads=W) as bx:
            s = T.alloc_shared((W,), T.int32)
            acc = T.alloc_fragment((W,), T.int32)
            T.clear(acc)
            for i in T.Parallel(W):
                s[i] = S0[i]
            for k in T.Pipelined(NK, num_stages=stages):
                for i in T.Parallel(W):
                    acc[i] += s[i] * (k + 1)
                T.copy(A[k, :], s)
            for i in T.Parallel(W):
                Out[i] = acc[i]
    return main


@tilecute.jit(out_idx=[1])
def pipelined_atomic_then_read(NK=8, W=32, stages=2):
    """Out[k] = sum(A[:k + 1]): each step's threads ``T.atomic_add`` their element into a
    shared total, which thread 0 then reads (TileLang #2595: the read is not hoisted above
    the atomics)."""

    @T.prim_func
    def main(A: T.Tensor((NK, W), T.float32), Out: T.Tensor((NK,), T.float32)):
        with T.Kernel(1, threads=W) as bx:
            a_s = T.alloc_shared((W,), T.float32)
            tot = T.alloc_shared((1,), T.float32)
            tx = T.get_thread_binding()
            if tx == 0:
                tot[0] = 0.0
            for k in T.Pipelined(NK, num_stages=stages):
                T.copy(A[k, :], a_s)
                T.atomic_add(tot[0], a_s[tx])
                if tx == 0:
                    Out[k] = tot[0]
    return main


# ---- reductions and reducers --------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def reduce_max_keep_nan(M=8, N=64, dt=T.float16):
    """Out[i] = max(-1, max(A[i, :])) with a NaN anywhere giving NaN: ``T.reduce_max`` with
    ``clear=False, nan_propagate=True`` (TileLang #2697: the merge with the old value keeps
    the NaN too)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dt), Out: T.Tensor((M,), dt)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), dt)
            m = T.alloc_fragment((M,), dt)
            T.copy(A, x)
            T.fill(m, -1.0)
            T.reduce_max(x, m, dim=1, clear=False, nan_propagate=True)
            T.copy(m, Out)
    return main


@tilecute.jit(out_idx=[1])
def reduce_48_lanes(M=4, N=48, threads=192):
    """Row sums of a (4, 48) fragment over 192 threads: 48 threads a row, no power of two
    (TileLang #2542 dropped 16 of them); tilecute refuses it by name."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_fragment((M,), T.float32)
            T.copy(A, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, Out)
    return main


@tilecute.jit(out_idx=[2])
def gemv_reducer_all(M=96, N=256, bM=32, bN=48, threads=128):
    """y = A x through ``T.alloc_reducer(replication="all")`` and ``T.finalize_reducer``,
    the tile width 48 not dividing the 128 threads (TileLang #2408: not a multiple of the
    sum)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), x: T.Tensor((N,), T.float32), y: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bM, threads=threads) as bx:
            r = T.alloc_reducer((bM,), T.float32, op="sum", replication="all")
            T.fill(r, 0.0)
            for kn in T.serial(T.ceildiv(N, bN)):
                for i, j in T.Parallel(bM, bN):
                    if kn * bN + j < N:
                        r[i] += A[bx * bM + i, kn * bN + j] * x[kn * bN + j]
            T.finalize_reducer(r)
            for i in T.Parallel(bM):
                y[bx * bM + i] = r[i]
    return main


@tilecute.jit(out_idx=[1])
def reducer_epoch_batch(M=64, N=128, batch=4):
    """y = A.max(1) through a reducer epoch (``T.reducer_init`` / ``T.reducer_update`` /
    ``T.finalize_reducer(acc, d, batch=4)``; TileLang #2623: every row reduced, not the first
    ``batch``)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), y: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_reducer((M,), T.float32, op="max")
            T.reducer_init(acc)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc[i], A[i, j])
            d = T.alloc_fragment((M,), T.float32)
            T.finalize_reducer(acc, d, batch=batch)
            T.copy(d, y)
    return main


# ---- atomics --------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def ticket_used_twice(n=256, cap=256):
    """Stream compaction: each positive A[i] takes a slot ``pos = T.atomic_add(cnt[0], 1,
    return_prev=True)`` and writes i there; ``pos`` is read twice (TileLang #2650: the
    atomic runs once).  ``cnt`` comes in zeroed."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Out: T.Tensor((cap,), T.int32), cnt: T.Tensor((1,), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            i = bx * 128 + tx
            if A[i] > 0:
                pos = T.atomic_add(cnt[0], 1, return_prev=True)
                if pos < cap:
                    Out[pos] = i
    return main


# ---- copies: safe values, padded tiles, odd sizes, sub-regions ------------------------------
@tilecute.jit(out_idx=[1])
def safe_value_tail_tile(M=60, N=60, blk=64):
    """Out = the (64, 64) tile of a (60, 60) tensor, -99 past its edges
    (``T.annotate_safe_value``; TileLang #2543: not 0)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.int32), Out: T.Tensor((blk, blk), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((blk, blk), T.int32)
            T.annotate_safe_value({A: -99})
            T.copy(A[0:blk, 0:blk], s)
            T.copy(s, Out)
    return main


@tilecute.jit(out_idx=[1])
def padded_shared_columns(M=64, N=64, BM=16, BN=32, SBN=40):
    """B = A through a column-padded shared tile (BM, 40) of which BN = 32 columns are used
    (TileLang #2581: the declared pitch, not a packed one)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // BN, M // BM, threads=128) as (bx, by):
            s = T.alloc_shared((BM, SBN), T.float16)
            T.copy(A[by * BM, bx * BN], s[:, :BN])
            T.copy(s[:, :BN], B[by * BM, bx * BN])
    return main


@tilecute.jit(out_idx=[1])
def store_1d_unaligned(n=250, blk=50):
    """B = A through 1-D shared tiles of 50 float16 (100 bytes, no multiple of 16; TileLang
    #2525 dropped the tail of the store)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.float16)):
        with T.Kernel(n // blk, threads=64) as bx:
            s = T.alloc_shared((blk,), T.float16)
            T.copy(A[bx * blk], s)
            T.copy(s, B[bx * blk])
    return main


@tilecute.jit(out_idx=[1])
def store_1d_partial_tile(n=1000, blk=256):
    """B = A through 1-D shared tiles of 256, the last tile partial (TileLang #2529)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.float16)):
        with T.Kernel(T.ceildiv(n, blk), threads=128) as bx:
            s = T.alloc_shared((blk,), T.float16)
            T.copy(A[bx * blk], s)
            T.copy(s, B[bx * blk])
    return main


@tilecute.jit(out_idx=[1])
def cumsum_shared_subregion(M=16, N=32, NBIG=48):
    """B = A.cumsum(1) scanned in place in the (16, 32) corner of a (16, 48) shared buffer
    (TileLang #2523: the sub-region's pitch is 48)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            big = T.alloc_shared((M, NBIG), T.float32)
            T.fill(big, 0.0)
            T.copy(A, big[0:M, 0:N])
            T.cumsum(big[0:M, 0:N], dim=1)
            T.copy(big[0:M, 0:N], B)
    return main


@tilecute.jit(out_idx=[0])
def fill_row_offset_fragment(M=32, N=64, off=3, h=8):
    """Out = 0 with rows [3, 11) = 7: ``T.fill`` of a fragment region at a row offset that
    is no multiple of 8 (TileLang #2942 filled other rows)."""

    @T.prim_func
    def main(Out: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((M, N), T.float32)
            T.fill(f, 0.0)
            T.fill(f[off:off + h, :], 7.0)
            T.copy(f, Out)
    return main


@tilecute.jit(out_idx=[1])
def copy_then_offset_fill(n=128, off=96):
    """B = A with B[96:] = -1: a shared tile copied in, then a sub-region at an offset
    filled (TileLang #2698: the fill is ordered after the copy's writes)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((n,), T.float32)
            T.copy(A, s)
            T.fill(s[off:n], -1.0)
            T.copy(s, B)
    return main


# ---- control flow ---------------------------------------------------------------------------
def for_else():
    """A ``for ... else:`` (TileLang #2946 drops the else silently); tilecute refuses it."""

    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(16):
                B[i] = A[i] + 1.0
            else:
                B[0] = 100.0
    return main


def rebind_constant_in_if():
    """``val = A[tx]; if val < 0: val = 0.0`` then ``val`` read after the ``if`` (TileLang
    #2977: with a constant on the right it stores the constant unconditionally); tilecute
    refuses the rebinding as TileLang does with an expression."""

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            val = A[tx]
            if val < 0.0:
                val = 0.0
            B[tx] = val
    return main


@tilecute.jit(out_idx=[1])
def int_element_condition(n=128):
    """B[i] = 1 where M[i] != 0: an int32 element as a bare ``if`` condition (TileLang
    #3009)."""

    @T.prim_func
    def main(M: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n) as bx:
            tx = T.get_thread_binding()
            B[tx] = 0.0
            if M[tx]:
                B[tx] = 1.0
    return main


@tilecute.jit(out_idx=[1])
def same_guard_twice(n=4):
    """Two ``if A[0] == 0`` in a row, the first setting A[0] = 7: the second is false then
    (TileLang #2538 merged them): Out[0] = 1 where A[0] was 0."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Out: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=1) as bx:
            Out[0] = 0
            if A[0] == 0:
                A[0] = 7
                Out[0] = Out[0] + 1
            if A[0] == 0:
                Out[0] = Out[0] + 10
    return main


@tilecute.jit(out_idx=[3])
def same_form_guards_two_buffers(n=8, m=64):
    """O[b] = A[b] (P[b] < 2) + 2 A[b] (Q[b] < 2): two guards of one form on two buffers
    (TileLang #2539 ran Q's body under P's condition)."""

    @T.prim_func
    def main(P: T.Tensor((n,), T.int32), Q: T.Tensor((n,), T.int32), A: T.Tensor((n, m), T.float32),
             O: T.Tensor((n, m), T.float32)):
        with T.Kernel(n, threads=m) as bx:
            for j in T.Parallel(m):
                O[bx, j] = 0.0
                if P[bx] < 2:
                    O[bx, j] = O[bx, j] + A[bx, j]
                if Q[bx] < 2:
                    O[bx, j] = O[bx, j] + 2.0 * A[bx, j]
    return main


@tilecute.jit
def cast_store_nested_if(n=256):
    """O[i] = half(2 A[i]) where i % 3 != 0 and A[i] > 0, every other O[i] left as it came
    (TileLang #2616 clobbered them)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), O: T.Tensor((n,), T.float16)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                if i % 3 != 0:
                    if A[i] > 0.0:
                        O[i] = T.cast(A[i] * 2.0, T.float16)
    return main


@tilecute.jit(out_idx=[1])
def break_in_vectorized(n=16, stop=5):
    """Out[:5] = A[:5] + 1, the rest -99: a ``break`` inside ``T.vectorized`` (TileLang
    #2608 ran every iteration)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Out: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                Out[i] = -99
            for i in T.vectorized(n):
                if i == stop:
                    break
                Out[i] = A[i] + 1
    return main


@tilecute.jit(out_idx=[1])
def unroll_explicit_break(n=16):
    """Out[0] = the sum of A up to its first negative element: ``break`` in
    ``T.unroll(explicit=True)`` (TileLang #3026 emitted a bare break)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var(T.int32)
            acc = 0
            for i in T.unroll(n, explicit=True):
                if A[i] < 0:
                    break
                acc = acc + A[i]
            Out[0] = acc
    return main


@tilecute.jit(out_idx=[1])
def vectorized_from_start(n=16, lo=2, hi=10):
    """B[2:10] = 3 A[2:10], the rest 0: ``T.vectorized(2, 10)`` (TileLang #2669)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                B[i] = 0.0
            for i in T.vectorized(lo, hi):
                B[i] = A[i] * 3.0
    return main


@tilecute.jit(out_idx=[1])
def temp_read_before_write(n=128):
    """B = max(A, 1) / 2 and A := max(A, 1) * 2: a temporary bound from A[i] and read after
    A[i] is overwritten (TileLang #814 re-read A[i])."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                tmp = T.max(A[i], 1.0)
                A[i] = tmp * 2.0
                B[i] = tmp / 2.0
    return main


@tilecute.jit(out_idx=[1])
def serial_from_u64_var(n=64):
    """t[start : start + 3] = 1 from a ``uint64`` ``T.alloc_var`` bound (TileLang #1310)."""

    @T.prim_func
    def main(start: T.Tensor((1,), T.uint64), t: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_var(T.uint64)
            a = start[0]
            for idx in T.serial(a, a + 3):
                t[idx] = 1
    return main


# ---- shared exchanges inside a branch on the thread index -----------------------------------
@tilecute.jit(out_idx=[1])
def exchange_in_branch(n=48, threads=64):
    """B[t] = 2 A[n - 1 - t] for t < 48 of 64 threads: inside ``if tx < n`` each thread
    writes its shared slot and reads another thread's (TileLang #2556, #2612: the write and
    the read need a barrier, which threads 48..63 must reach too)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((n,), T.float32)
            tx = T.get_thread_binding()
            if tx < n:
                s[tx] = A[tx] * 2.0
                B[tx] = s[n - 1 - tx]
    return main


@tilecute.jit(out_idx=[1])
def exchange_in_branch_with_else(n=48, threads=64, rounds=3):
    """B[t] = the value at t after ``rounds`` reversals of 2 A, every round an exchange
    inside ``if tx < n`` (with an ``else``): the branch splits into one ``if`` per exchange
    (the else in the first), barriers between them."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((n,), T.float32)
            t = T.alloc_shared((n,), T.float32)
            u = T.alloc_shared((threads - n,), T.float32)
            tx = T.get_thread_binding()
            if tx < n:
                s[tx] = A[tx] * 2.0
                t[tx] = s[n - 1 - tx]
                s[tx] = t[n - 1 - tx] + 1.0
                B[tx] = s[n - 1 - tx]
            else:
                u[tx - n] = A[0]
    return main


@tilecute.jit(out_idx=[1])
def own_slot_in_branch(n=48, threads=64):
    """B[t] = 2 A[t] + 1, each thread reading back its own shared slot inside ``if tx < n``:
    no barrier needed, none placed."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((n,), T.float32)
            tx = T.get_thread_binding()
            if tx < n:
                s[tx] = A[tx] * 2.0
                B[tx] = s[tx] + 1.0
    return main


def exchange_after_loaded_bound():
    """An exchange inside ``if tx < n`` whose second part reads a name the first binds from
    shared memory: the branch cannot be split; tilecute refuses it by name."""

    @T.prim_func
    def main(A: T.Tensor((48,), T.float32), B: T.Tensor((48,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((48,), T.float32)
            tx = T.get_thread_binding()
            if tx < 48:
                s[tx] = A[tx]
                v = s[tx] * 2.0
                s[47 - tx] = v
                B[tx] = v
    return main


# ---- GEMM -----------------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def gemm_rr_clear(M=64, N=64, K=64, reps=2):
    """C = A B with both operands in fragments and ``clear_accum=True`` twice over an
    accumulator filled with 1000 (TileLang #2617 kept the stale accumulator)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_f = T.alloc_fragment((M, K), T.float16)
            b_f = T.alloc_fragment((K, N), T.float16)
            c_f = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a_f)
            T.copy(B, b_f)
            T.fill(c_f, 1000.0)
            for r in T.serial(reps):
                T.gemm(a_f, b_f, c_f, clear_accum=True)
            T.copy(c_f, C)
    return main


@tilecute.jit(out_idx=[2])
def gemm_sr_clear(M=64, N=64, K=64):
    """C = A B, A in shared, B in a fragment, ``clear_accum=True`` (TileLang #2627 kept only
    the last K step)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K), T.float16)
            b_f = T.alloc_fragment((K, N), T.float16)
            c_f = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_f)
            T.fill(c_f, 1000.0)
            T.gemm(a_s, b_f, c_f, clear_accum=True)
            T.copy(c_f, C)
    return main


@tilecute.jit(out_idx=[2])
def gemm_tile(M=64, N=64, K=48, bK=24):
    """C = A B over K tiles of ``bK``: with bK = 24 (no multiple of the float16 MMA's K of
    16; TileLang #2381 dropped the last 8 of each) tilecute refuses it by name; ``N=24``
    (TileLang #2593 on WGMMA) is built with mma.sync on sm_80 and sm_90a."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, bK), T.float16)
            b_s = T.alloc_shared((bK, N), T.float16)
            c_f = T.alloc_fragment((M, N), T.float32)
            T.clear(c_f)
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[0, k * bK], a_s)
                T.copy(B[k * bK, 0], b_s)
                T.gemm(a_s, b_s, c_f)
            T.copy(c_f, C)
    return main


# ---- persistent loops -----------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def persistent_ragged(M=10 * 16, N=3 * 16, blk=16, sms=4):
    """B = A + 1 over 30 tiles (10 x 3, no multiple of 8) walked by 4 blocks with
    ``T.Persistent`` (TileLang #2433 dropped a band of tiles)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(sms, threads=128) as pid:
            for bx, by in T.Persistent([T.ceildiv(M, blk), T.ceildiv(N, blk)], sms, pid):
                for i, j in T.Parallel(blk, blk):
                    B[bx * blk + i, by * blk + j] = A[bx * blk + i, by * blk + j] + 1.0
    return main


# ---- integer arithmetic ---------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def int_div_family(n=64, d=3):
    """truncdiv, floordiv, truncmod, floormod, ``//`` and ``%`` of signed values by 3
    (TileLang #2973: its CuTe DSL backend floored a truncdiv)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), O: T.Tensor((n, 6), T.int32)):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                O[i, 0] = T.truncdiv(A[i], d)
                O[i, 1] = T.floordiv(A[i], d)
                O[i, 2] = T.truncmod(A[i], d)
                O[i, 3] = T.floormod(A[i], d)
                O[i, 4] = A[i] // d
                O[i, 5] = A[i] % d
    return main


# ---- swizzled shared tiles ------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def view_swizzled_as_wider(M=16, N=64):
    """B = A's bytes as float32: a swizzled float16 shared tile read through a float32
    ``T.view`` (TileLang #2609 read the wrong slots)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N // 2), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), T.float16)
            T.annotate_layout({s: make_swizzled_layout(s)})
            T.copy(A, s)
            w = T.view(s, (M, N // 2), T.float32)
            T.copy(w, B)
    return main


@tilecute.jit(out_idx=[1])
def any_all_rows_swizzled(M=16, N=64):
    """Out[r] = any(A[r] != 0) + 2 all(A[r] != 0) over rows of a swizzled shared tile
    (TileLang #2714 scanned unswizzled addresses)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), Out: T.Tensor((M,), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), T.float16)
            T.annotate_layout({s: make_swizzled_layout(s)})
            T.copy(A, s)
            tx = T.get_thread_binding()
            if tx < M:
                Out[tx] = T.if_then_else(T.any_of(s[tx, :]), 1, 0) + T.if_then_else(T.all_of(s[tx, :]), 2, 0)
    return main


# ---- more: regions past the end, large constant indices, vector and tile atomics -------------
def fill_past_end():
    """``T.fill(s[100:140], 1.0)`` of a (128,) shared buffer (TileLang #2979 writes past its
    end); tilecute refuses the region by name."""

    @T.prim_func
    def main(B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((128,), T.float32)
            T.fill(s, 0.0)
            T.fill(s[100:140], 1.0)
            T.copy(s, B)
    return main


@tilecute.jit(out_idx=[1])
def big_const_index(n=2**31 + 64):
    """B[0] = A[2**31 + 5]: a constant index past int32 (TileLang #2560 wrapped it)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int8), B: T.Tensor((4,), T.int8)):
        with T.Kernel(1, threads=1) as bx:
            B[0] = A[2**31 + 5]
            B[1] = A[2**31 - 1]
    return main


def addx4_int32():
    """``T.atomic_addx4`` into int32 elements (TileLang #2561 added their bits as floats);
    tilecute refuses the dtype by name."""

    @T.prim_func
    def main(A: T.Tensor((64,), T.int32), Out: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=16) as bx:
            tx = T.get_thread_binding()
            T.atomic_addx4(Out[0:4], A[tx * 4:tx * 4 + 4])
    return main


@tilecute.jit
def tile_atomic_acq_rel(M=16, N=64):
    """Out += Src from 4 blocks, a tile ``T.atomic_add`` of a float16 fragment with
    ``memory_order="acq_rel"`` (TileLang #2688 relaxed it where it vectorised)."""

    @T.prim_func
    def main(Src: T.Tensor((M, N), T.float16), Out: T.Tensor((M, N), T.float16)):
        with T.Kernel(4, threads=128) as bx:
            f = T.alloc_fragment((M, N), T.float16)
            T.copy(Src, f)
            T.atomic_add(Out, f, memory_order="acq_rel")
    return main
