"""A thirty-third set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): ``T.assume`` inside a kernel.  TileLang's LegalizeSafeMemoryAccess trusts an
assume over the rest of its scope, so a global access the assume proves in bounds gets no
bounds check; an assume's fact does not reach past the body it stands in.

``tests/test_unseen_programs33.py`` builds each to a cubin on the CPU, checks the bounds
checks in the generated source, and on a GPU compares it with a torch reference."""

import tilecute.language as T


def assume_window_zero():
    """Zeroes ``A[l : r + 1]`` of a dynamic-length vector; ``T.assume(0 <= l + i < N)``
    promises the window lies inside ``A``."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), l: T.int32, r: T.int32):
        with T.Kernel(1, threads=32):
            for i in T.serial(r - l + 1):
                T.assume(l + i >= 0 and l + i < N)
                A[l + i] = 0
    return main


def assume_thread_row_copy(threads=64):
    """Each thread copies one row of an (M, N) tensor, ``M`` and ``N`` dynamic; the kernel
    assumes ``tid < M`` once, before the column loop (M >= threads)."""
    M = T.dynamic("M")
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, threads=threads):
            row = T.get_thread_binding()
            T.assume(row < M)
            for j in T.serial(N):
                B[row, j] = A[row, j] * T.float16(2)
    return main


def assume_parallel_tail(block=128):
    """A scale over blocks of a dynamic-length vector whose length the caller promises is a
    multiple of the block: ``T.assume(bx * block + i < N)`` in the ``T.Parallel`` body."""
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.assume(bx * block + i < N)
                Y[bx * block + i] = X[bx * block + i] * 3.0
    return main


def assume_in_branch_only():
    """An assume inside an ``if`` proves the access in that branch only: the store after
    the branch keeps its check."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), B: T.Tensor((N,), T.int32), k: T.int32):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            if k > 0:
                T.assume(t + k < N)
                B[t + k] = 1
            A[t] = 2
    return main


def assume_either_keeps_checks():
    """``T.assume(k < 0 or t + k < N)``: a disjunction states no bound by itself, so the
    store keeps its check (TileLang's analyzer takes no fact from an ``or`` either)."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), k: T.int32):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            T.assume(k < 0 or t + k < N)
            A[t + k] = 7
    return main


def assume_offset_load(n_idx=64):
    """A gather whose offsets come from memory through a ``T.alloc_var``:
    ``T.assume(0 <= off < N)`` reads the variable, which a later store may change, so
    tilecute keeps the load's check (TileLang's git HEAD trusts an assume on a
    ``local.var`` too; keeping the check gives the same answer when the assume holds)."""
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Idx: T.Tensor((n_idx,), T.int32),
             Y: T.Tensor((n_idx,), T.float32)):
        with T.Kernel(1, threads=n_idx):
            t = T.get_thread_binding()
            off = T.alloc_var(T.int32)
            off = Idx[t]
            T.assume(off >= 0 and off < N)
            Y[t] = X[off]
    return main


def assume_pipelined_gemm(block_M=64, block_N=64, block_K=32, N=256, K=256):
    """A GEMM over a dynamic number of rows, pipelined over K, whose kernel assumes the
    rows come in whole blocks (``T.assume(by * block_M + i < M)`` where it stores C)."""
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                T.assume(by * block_M + i < M)
                C[by * block_M + i, bx * block_N + j] = acc[i, j]
    return main


def assume_vectorized_row_chunk(M=128):
    """Each thread copies 4 consecutive elements of its row of an (M, N) tensor (``N``
    dynamic) with ``T.vectorized(4)``; ``T.assume(N % 4 == 0)`` makes the row stride a
    multiple of 4, ``base = t * 4`` is bound before the loop and ``T.assume(base + i < N)``
    opens its body: one unchecked 16-byte vector load and store."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=M):
            t = T.get_thread_binding()
            T.assume(N % 4 == 0)
            base = t * 4
            for i in T.vectorized(4):
                T.assume(base + i < N)
                B[t, base + i] = A[t, base + i] + 1.0
    return main


# ---- raw cp.async widened over a T.vectorized loop -----------------------------------------
def cp_async_lanes_half(n=4096, threads=32, per=8):
    """Each thread stages ``per`` consecutive float16 elements of its block's 256-element
    tile with ``for i in T.vectorized(per): T.ptx_cp_async(..., 1)`` (2 bytes a lane): the
    lanes widen to one 16-byte cp.async; then the tile is doubled into B."""
    tile = threads * per

    @T.prim_func
    def main(A: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.float16)):
        with T.Kernel(n // tile, threads=threads) as bx:
            S = T.alloc_shared((tile,), T.float16)
            t = T.get_thread_binding()
            for i in T.vectorized(per):
                T.ptx_cp_async(T.access_ptr(S[t * per + i], "w", 1),
                               T.access_ptr(A[bx * tile + t * per + i], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for j in T.Parallel(tile):
                B[bx * tile + j] = S[j] * T.float16(2)
    return main


def cp_async_lanes_int8_pairs(n=2048, threads=64):
    """int8 pairs (``num_elems=2``, 2 bytes) over ``T.vectorized(4)``: the pairs are
    contiguous (``S[t * 8 + i * 2]``), one 8-byte cp.async per thread."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.int8), B: T.Tensor((n,), T.int8)):
        with T.Kernel(n // (threads * 8), threads=threads) as bx:
            S = T.alloc_shared((threads * 8,), T.int8)
            t = T.get_thread_binding()
            for i in T.vectorized(4):
                T.ptx_cp_async(T.access_ptr(S[t * 8 + i * 2], "w", 2),
                               T.access_ptr(A[bx * threads * 8 + t * 8 + i * 2], "r", 2), 2)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for j in T.Parallel(threads * 8):
                B[bx * threads * 8 + j] = S[j] + T.int8(1)
    return main


def cp_async_lanes_uint8_quad(n=1024, threads=64):
    """Four uint8 lanes of one byte: one 4-byte cp.async (cp.async's narrowest)."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.uint8), B: T.Tensor((n,), T.uint8)):
        with T.Kernel(n // (threads * 4), threads=threads) as bx:
            S = T.alloc_shared((threads * 4,), T.uint8)
            t = T.get_thread_binding()
            for i in T.vectorized(4):
                T.ptx_cp_async(T.access_ptr(S[t * 4 + i], "w", 1),
                               T.access_ptr(A[bx * threads * 4 + t * 4 + i], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for j in T.Parallel(threads * 4):
                B[bx * threads * 4 + j] = S[(j + 4) % (threads * 4)]
    return main


def cp_async_lanes_bf16_two_steps(n=4096, threads=16):
    """16 bfloat16 lanes of 1 element (32 bytes) from a non-zero loop start: two 16-byte
    cp.async steps, at lanes 0 and 8 of the loop's range."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.bfloat16), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // (threads * 16), threads=threads) as bx:
            S = T.alloc_shared((threads * 16,), T.bfloat16)
            t = T.get_thread_binding()
            for i in T.vectorized(16, 32):
                T.ptx_cp_async(T.access_ptr(S[t * 16 + i - 16], "w", 1),
                               T.access_ptr(A[bx * threads * 16 + t * 16 + i - 16], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for j in T.Parallel(threads * 16):
                B[bx * threads * 16 + j] = T.cast(S[j], T.float32)
    return main


def assume_top_level_window(N_rows=256):
    """``T.assume(l >= 0 and l + 256 <= N)`` at the top of the body, before the kernel: a
    host assume (the launcher checks it at every call) that TileLang also moves into the
    device function, so the window read ``A[l + bx * 128 + i]`` needs no check."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N_rows,), T.float32), l: T.int32):
        T.assume(l >= 0 and l + N_rows <= N)
        with T.Kernel(N_rows // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[l + bx * 128 + i] * 2.0
    return main


# ---- T.vectorized over an offset bound before the loop ------------------------------------
def vectorized_let_base(n=4096):
    """``base = bx * 512 + tx * 4`` bound before ``for i in T.vectorized(4)``: the offset is
    a multiple of 4 (TileLang's vectorizer reads it through the binding), so the accesses
    are 16-byte vectors."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 512, threads=128) as bx:
            tx = T.get_thread_binding()
            base = bx * 512 + tx * 4
            for i in T.vectorized(4):
                B[base + i] = A[base + i] * 2.0
    return main


def vectorized_let_base_pairs(n=768 * 4):
    """``base = bx * 768 + tx * 6`` and ``T.vectorized(6)``: the offset is only even, so
    the float32 accesses move as 8-byte pairs."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 768, threads=128) as bx:
            tx = T.get_thread_binding()
            base = bx * 768 + tx * 6
            for i in T.vectorized(6):
                B[base + i] = A[base + i] + 1.0
    return main


def vectorized_column_major_copy(N=128, M=256, stride_a=132, stride_b=128):
    """A copy between two column-major ``T.StridedTensor``s (``strides=(1, s)``), one
    column a thread, ``T.vectorized`` down its rows: the rows are the unit-stride dim, so
    the lanes are contiguous; with both column strides multiples of 4, 16-byte vectors
    (``stride_a=130``: the source's columns start only at even offsets, 8-byte pairs)."""

    @T.prim_func
    def main(A: T.StridedTensor((N, M), (1, stride_a), T.float32),
             B: T.StridedTensor((N, M), (1, stride_b), T.float32)):
        with T.Kernel(M // 128, threads=128) as bx:
            col = bx * 128 + T.get_thread_binding()
            for row in T.vectorized(N):
                B[row, col] = A[row, col] * 0.5
    return main
