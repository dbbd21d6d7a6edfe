"""Programs for forms TileLang's programming guides document as working (control_flow.md,
language_basics.md, python_compatibility.md, instructions.md), each written anew: Python
``range`` with a start and a step, ``while`` with ``break`` over a scalar var, ``continue``,
ternaries and ``elif`` chains, negative indices, torch dtypes in annotations, a var's initial
value, ``buffer.shape[dim]`` in a body."""

import torch

import tilecute as tilelang
import tilecute.language as T


def strided_range(N=96):
    """``for i in range(a, b, s)`` is ``T.serial(a, b, s)``: every third element from 1."""
    @T.prim_func
    def strided(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            for i in range(1 + tx * 3, N, 96):
                B[i] = A[i] + 1.0
    return strided


def first_negative(R=64, C=40):
    """``while`` over a var with ``break``: the column of each row's first negative (C if none)."""
    @T.prim_func
    def first_neg(A: T.Tensor((R, C), T.float32), Out: T.Tensor((R,), T.int32)):
        with T.Kernel(R // 32, threads=32) as bx:
            tx = T.get_thread_binding()
            j = T.alloc_var(T.int32, 0)
            while j < C:
                if A[bx * 32 + tx, j] < 0:
                    break
                j += 1
            Out[bx * 32 + tx] = j
    return first_neg


def skip_sum(R=64, C=48):
    """``continue`` in ``T.serial``: a row sum that skips every column where the mask is 0."""
    @T.prim_func
    def skip(A: T.Tensor((R, C), T.float32), Mask: T.Tensor((C,), T.int32),
             Out: T.Tensor((R,), T.float32)):
        with T.Kernel(1, threads=R) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            for j in T.serial(C):
                if Mask[j] == 0:
                    continue
                acc += A[tx, j]
            Out[tx] = acc
    return skip


def banded(N=100, BLOCK=64):
    """A ternary and an ``if``/``elif``/``else`` chain on a tail (N is not a multiple)."""
    @T.prim_func
    def band(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                x = A[g] if g < N else 0.0
                if x > 1.0:
                    x = 1.0
                elif x < -1.0:
                    x = -1.0
                else:
                    x = x * 0.5
                if g < N:
                    B[g] = x
    return band


def banded_var(N=100, BLOCK=64):
    """The same chain over a ``T.alloc_var`` (the form the guide's rebinding needs)."""
    @T.prim_func
    def band_var(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            tx = T.get_thread_binding()
            g = bx * BLOCK + tx
            x = T.alloc_var(T.float32, A[g] if g < N else 0.0)
            if x > 1.0:
                x = 1.0
            elif x < -1.0:
                x = -1.0
            else:
                x = x * 0.5
            if g < N:
                B[g] = x
    return band_var


def last_element(N=128):
    """``a[-1]``: TileLang reads a negative constant index from the end of the dimension."""
    @T.prim_func
    def last(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(N):
                B[i] = A[i] - A[-1]
    return last


def torch_dtyped(N=256):
    """Framework dtypes in the annotations (``torch.float16``, ``torch.float32``) and a shape
    read in the body (``A.shape[0]``)."""
    @T.prim_func
    def cast_up(A: T.Tensor((N,), torch.float16), B: T.Tensor((N,), torch.float32)):
        with T.Kernel(T.ceildiv(A.shape[0], 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = T.Cast(torch.float32, A[bx * 128 + i]) * 3.0
    return cast_up


def var_init_positional(N=128):
    """``T.alloc_var(dtype, init)`` with the init positional, then a running max loop."""
    @T.prim_func
    def rmax(A: T.Tensor((N, 16), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N) as _:
            tx = T.get_thread_binding()
            m = T.alloc_var(T.float32, -T.infinity(T.float32))
            for j in T.unroll(16):
                m = T.max(m, A[tx, j])
            B[tx] = m
    return rmax


@tilelang.jit(out_idx=[-1])
def slice_copy(N=256, BLOCK=64):
    """``a[i:j]`` slices as T.copy regions, the output made by the jit factory."""
    @T.prim_func
    def halves(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(N // BLOCK, threads=BLOCK) as bx:
            s = T.alloc_shared((BLOCK,), T.float32)
            T.copy(A[bx * BLOCK:(bx + 1) * BLOCK], s)
            for i in T.Parallel(BLOCK):
                s[i] = s[i] * 2.0
            T.copy(s, B[bx * BLOCK:(bx + 1) * BLOCK])
    return halves


def lane_and_warp_ids():
    """``T.get_lane_idx(16)`` / ``T.get_warp_idx_sync(16)`` with a warp size given, and
    ``T.get_warp_group_idx()``: tid % 16, tid // 16, tid // 128 (TileLang's helpers)."""
    @T.prim_func
    def ids(L: T.Tensor((256,), T.int32), W: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=256) as _:
            tx = T.get_thread_binding()
            L[tx] = T.get_lane_idx(16)
            W[tx] = T.get_warp_idx_sync(16) * 100 + T.get_warp_group_idx()
    return ids


def reverse_decay(N=32):
    """``range(N - 1, -1, -1)``: a descending loop carrying a decayed suffix sum."""
    @T.prim_func
    def decay(A: T.Tensor((4, N), T.float32), B: T.Tensor((4, N), T.float32)):
        with T.Kernel(1, threads=4) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            for i in range(N - 1, -1, -1):
                acc = acc * 0.5 + A[tx, i]
                B[tx, i] = acc
    return decay


def corner_reads(R=8, C=32):
    """Negative constants in a 2-D index: ``A[r, -1]`` and ``A[-1, r]``; and ``a = b = expr``."""
    @T.prim_func
    def corners(A: T.Tensor((R, C), T.float32), B: T.Tensor((R,), T.float32)):
        with T.Kernel(1, threads=R) as _:
            tx = T.get_thread_binding()
            u = v = A[tx, -1]
            B[tx] = u + v + A[-1, tx]
    return corners


def dynamic_doubling():
    """``T.dynamic('K', 'int32')`` as a term-level symbol in the annotations and the grid."""
    K = T.dynamic('K', 'int32')

    @T.prim_func
    def double(A: T.Tensor((K,), T.float32), B: T.Tensor((K,), T.float32)):
        with T.Kernel(T.ceildiv(K, 64), threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * 2.0
    return double


def unroll_with_step():
    """``T.unroll(start, stop, step)``: the odd columns' sum, unrolled."""
    @T.prim_func
    def odd_sum(A: T.Tensor((32, 16), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            for j in T.unroll(1, 16, 2):
                acc += A[tx, j]
            B[tx] = acc
    return odd_sum


def python_int_while():
    """control_flow.md's ``i = 0; while i < N: ... i += 1``: ``i`` is a Python int, so the
    condition is True at parse time; TileLang raises "Infinite while loop detected"."""
    @T.prim_func
    def counting(A: T.Tensor((64, 16), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            i = 0
            while i < 16:
                acc += A[tx, i]
                i += 1
            B[tx] = acc
    return counting


def coalesced_tail(R=100, C=70):
    """``T.Parallel(..., coalesced_width=4)`` on rows of 70 floats: no 4-wide access is
    aligned, so TileLang (vector size not divisible by coalesced width) and tilecute refuse."""
    @T.prim_func
    def plus_one(A: T.Tensor((R, C), T.float32), B: T.Tensor((R, C), T.float32)):
        with T.Kernel(T.ceildiv(C, 32), T.ceildiv(R, 16), threads=128) as (bx, by):
            for i, j in T.Parallel(16, 32, coalesced_width=4):
                B[by * 16 + i, bx * 32 + j] = A[by * 16 + i, bx * 32 + j] + 1.0
    return plus_one


def split_k_matvec(N=200, K=512, BLOCK_N=32, SPLIT=4, TILE=8):
    """gemv.md's pattern with its own shapes: 2-D threads ``threads=(BLOCK_N, SPLIT)``, read
    as ``T.get_thread_binding(0/1)``, ``T.vectorized`` loads into ``T.alloc_local``, partial
    sums ``T.atomic_add``-ed into a shared slot that one thread zeroed; N=200 leaves a tail
    block that the rows past N must not touch."""
    CHUNK = SPLIT * TILE

    @T.prim_func
    def matvec(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16),
               y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, SPLIT)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            w_loc = T.alloc_local((TILE,), T.float16)
            x_loc = T.alloc_local((TILE,), T.float16)
            part = T.alloc_local((1,), T.float32)
            total = T.alloc_shared((BLOCK_N,), T.float32)
            if tk == 0:
                total[tn] = 0
            T.clear(part)
            for kc in T.serial(K // CHUNK):
                for v in T.vectorized(TILE):
                    w_loc[v] = W[bn * BLOCK_N + tn, kc * CHUNK + tk * TILE + v]
                    x_loc[v] = x[kc * CHUNK + tk * TILE + v]
                for v in T.serial(TILE):
                    part[0] += w_loc[v].astype(T.float32) * x_loc[v].astype(T.float32)
            T.atomic_add(total[tn], part[0])
            if tk == 0:
                y[bn * BLOCK_N + tn] = total[tn]
    return matvec


def bare_int_shapes(N, per_thread=4, threads=128, dtype=T.bfloat16):
    """elementwise.md's spellings: ``T.Tensor((N), dtype)`` and ``T.alloc_fragment((n), dtype)``
    with a bare int (not a tuple) as the shape, ``as (b_x)`` with parentheses, T.copy of a
    global point into a 1-D register fragment and back, T.Parallel(threads, per_thread)."""
    TILE = threads * per_thread

    @T.prim_func
    def leaky(A: T.Tensor((N), dtype), C: T.Tensor((N), dtype)):
        with T.Kernel(T.ceildiv(N, TILE), threads=threads) as (b_x):
            regs = T.alloc_fragment((TILE), dtype)
            T.copy(A[b_x * TILE], regs)
            for t, e in T.Parallel(threads, per_thread):
                v = regs[t * per_thread + e]
                regs[t * per_thread + e] = T.if_then_else(v > 0, v, v * 0.125)
            T.copy(regs, C[b_x * TILE])
    return leaky


def widen(dtype):
    """type_system.md: any listed dtype, as a string, cast to float32 (plus one)."""
    @T.prim_func
    def up(A: T.Tensor((256,), dtype), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = T.Cast("float32", A[bx * 128 + i]) + 1.0
    return up


def python_operators():
    """python_compatibility.md's operators on a loaded value: ``abs``, ``min``, ``max``,
    unary minus, ``/``, integer ``//`` and ``%`` (TVM's floor division and modulo)."""
    @T.prim_func
    def ops(A: T.Tensor((64,), T.float32), I: T.Tensor((64,), T.int32),
            F: T.Tensor((64, 4), T.float32), Q: T.Tensor((64, 2), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            a = A[tx]
            F[tx, 0] = abs(a)
            F[tx, 1] = min(a, 0.5)
            F[tx, 2] = max(a, -0.5)
            F[tx, 3] = -a / 4
            n = I[tx]
            Q[tx, 0] = n // 3
            Q[tx, 1] = n % 3
    return ops


def power_of_a_value():
    """``a ** 2`` on a device value: TVM's PrimExpr has no ``**`` (TileLang raises); T.pow is
    the form."""
    @T.prim_func
    def sq(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            B[tx] = A[tx] ** 2
    return sq


def unroll_break(R=32, C=8):
    """``break`` in ``T.unroll``: each row's prefix sum up to its first value above 5."""
    @T.prim_func
    def prefix(A: T.Tensor((R, C), T.float32), B: T.Tensor((R,), T.float32)):
        with T.Kernel(1, threads=R) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            for j in T.unroll(C):
                if A[tx, j] > 5.0:
                    break
                acc += A[tx, j]
            B[tx] = acc
    return prefix


def parallel_continue():
    """control_flow.md lists ``continue`` in ``T.Parallel``: the element's rest is skipped."""
    @T.prim_func
    def skip_neg(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                if A[i] < 0:
                    continue
                B[i] = A[i] * 2.0
    return skip_neg


def named_barriers():
    """instructions.md: ``T.sync_warp(mask)`` and ``T.sync_threads(barrier_id, arrive_count)``."""
    @T.prim_func
    def neighbours(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            s = T.alloc_shared((64,), T.float32)
            s[tx] = A[tx]
            T.sync_warp(0xFFFFFFFF)
            B[tx] = s[tx ^ 1]
            T.sync_threads(1, 64)
            B[tx] = B[tx] + s[63 - tx]
    return neighbours
