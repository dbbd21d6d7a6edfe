"""A twenty-fourth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), from irregular, sparse, scan / sort and stencil workloads: CSR SpMV with a warp per
row (``T.alloc_var`` row bounds, a lane-strided ``T.serial`` over the nonzeros,
``T.warp_reduce_sum``) and with an 8-thread group per row (a fragment reduced by
``T.reduce_sum``), COO SpMV by ``T.atomic_add``, ELL SpMV in column-major storage with padded
slots, CSR SpMM against a dense B tile held in shared memory, SDDMM (a dense sample mask times
A B^T) skipping empty tiles, a block-sparse weight GEMM driven by a per-column-block index list
(``T.Pipelined`` over a run-time count), a bitonic top-k of rows in shared memory, argmin with
ties (first index), a segmented inclusive scan with head flags (Hillis-Steele, ping-pong shared
buffers), run-length encoding of a sorted array with per-run sums, stream compaction across
blocks (``T.cumsum`` in a block, a base from ``T.atomic_add(..., return_prev=True)``), masked
scatter with a carry across tiles, a causal sliding-window max, depthwise 1-D convolution with a
halo ``T.copy`` starting before the row, a separable 2-D blur with a 2-D halo copy at negative
starts, a 1-D heat equation over time steps with a ping-pong shared buffer, bilinear resize
(half-pixel centres), a row gather skipping out-of-range indices, warp compaction by
``T.ballot`` / ``T.popcount`` / ``T.shfl_sync``, a stable split by one key bit (a radix pass), a
merge of two sorted arrays by binary search, a softmax over each CSR row, and COO -> CSR row
pointers (shared-memory counts and an exclusive scan); then an LSD radix sort over a (2, P)
shared ping-pong buffer, COO -> CSC through shared cursors handed out by
``T.atomic_add(..., return_prev=True)``, a ``T.cummax`` drawdown (forward and reverse), a warp
segmented scan by ``T.shfl_up``, a warp argmax by ``T.ballot`` / ``T.__ffs`` /
``T.shfl_sync``, 5-point sweeps alternating between two named shared buffers, a segment walk
with a shared cursor under ``while`` and CSR row sums looping over bounds staged in shared
memory (the last two: barrier placement around a loop's condition and range).

``tests/test_unseen_programs24.py`` builds each to a cubin on the CPU, checks what each means
in the generated source, and on a GPU compares it with a torch reference."""

import math

import tilecute
import tilecute.language as T


# ---- sparse matrix-vector ------------------------------------------------------------------
@tilecute.jit(out_idx=[4])
def csr_spmv_warp_per_row(M=200, N=300, threads=128):
    """y = A x for A in CSR: one warp per row; lane l adds nonzeros start + l, start + l + 32,
    ... (a stepped ``T.serial`` from run-time bounds held in ``T.alloc_var``s), then the
    warp's partial sums meet in ``T.warp_reduce_sum`` and lane 0 stores the row."""
    warps = threads // 32
    nnz = T.dynamic("nnz")

    @T.prim_func
    def spmv(RowPtr: T.Tensor((M + 1,), "int32"), Col: T.Tensor((nnz,), "int32"),
             Val: T.Tensor((nnz,), "float32"), X: T.Tensor((N,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = bx * warps + tx // 32
            start = T.alloc_var("int32")
            end = T.alloc_var("int32")
            acc = T.alloc_var("float32", init=0.0)
            if row < M:
                start = RowPtr[row]
                end = RowPtr[row + 1]
                for k in T.serial(start + lane, end, 32):
                    acc += Val[k] * X[Col[k]]
            acc = T.warp_reduce_sum(acc)
            if row < M and lane == 0:
                Y[row] = acc
    return spmv


@tilecute.jit(out_idx=[4])
def csr_spmv_group_fragment(M=100, N=64, rows=16, G=8, threads=128):
    """y = A x with G threads per row: a (rows, G) fragment of partial sums, each (r, g) adding
    every G-th nonzero of its row (a ``T.serial`` over ceil(len / G) steps, guarded), reduced
    along the group by ``T.reduce_sum(dim=1)``; the last block's rows past M skipped."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def spmv(RowPtr: T.Tensor((M + 1,), "int32"), Col: T.Tensor((nnz,), "int32"),
             Val: T.Tensor((nnz,), "float32"), X: T.Tensor((N,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            part = T.alloc_fragment((rows, G), "float32")
            y = T.alloc_fragment((rows,), "float32")
            for r, g in T.Parallel(rows, G):
                part[r, g] = 0.0
                row = bx * rows + r
                if row < M:
                    s = RowPtr[row]
                    e = RowPtr[row + 1]
                    for k in T.serial(T.ceildiv(e - s, G)):
                        idx = s + k * G + g
                        if idx < e:
                            part[r, g] += Val[idx] * X[Col[idx]]
            T.reduce_sum(part, y, dim=1)
            for r in T.Parallel(rows):
                if bx * rows + r < M:
                    Y[bx * rows + r] = y[r]
    return spmv


@tilecute.jit
def coo_spmv_atomic(M=90, N=70, block=128):
    """y += A x for A in COO (unsorted triples): one thread per nonzero adds its product into
    y[row] by ``T.atomic_add`` (Y comes in zeroed)."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def spmv(Row: T.Tensor((nnz,), "int32"), Col: T.Tensor((nnz,), "int32"), Val: T.Tensor((nnz,), "float32"),
             X: T.Tensor((N,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(nnz, block), threads=block) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                if k < nnz:
                    T.atomic_add(Y[Row[k]], Val[k] * X[Col[k]])
    return spmv


@tilecute.jit(out_idx=[3])
def ell_spmv_colmajor(M=150, N=80, W=6, block=64):
    """y = A x for A in ELL stored column-major ((W, M) slots: slot w of every row adjacent, so
    a warp's loads coalesce); a slot with column -1 is padding and adds nothing."""

    @T.prim_func
    def spmv(EllCol: T.Tensor((W, M), "int32"), EllVal: T.Tensor((W, M), "float32"),
             X: T.Tensor((N,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            acc = T.alloc_fragment((block,), "float32")
            T.clear(acc)
            for i in T.Parallel(block):
                row = bx * block + i
                if row < M:
                    for w in T.serial(W):
                        c = EllCol[w, row]
                        if c >= 0:
                            acc[i] += EllVal[w, row] * X[c]
            for i in T.Parallel(block):
                if bx * block + i < M:
                    Y[bx * block + i] = acc[i]
    return spmv


# ---- sparse matrix-matrix ------------------------------------------------------------------
@tilecute.jit(out_idx=[4])
def csr_spmm_shared_b(M=50, K=64, N=96, bm=16, bn=64, threads=128):
    """C = A B for A (M, K) in CSR and B dense: the block's (K, bn) panel of B copied to shared
    memory once (ragged N: zero columns past N), each (r, j) of the (bm, bn) tile walking its
    row's nonzeros (``T.serial`` from run-time RowPtr bounds) against the shared panel."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def spmm(RowPtr: T.Tensor((M + 1,), "int32"), Col: T.Tensor((nnz,), "int32"), Val: T.Tensor((nnz,), "float32"),
             B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            b_s = T.alloc_shared((K, bn), "float32")
            c_f = T.alloc_fragment((bm, bn), "float32")
            T.copy(B[0, bx * bn], b_s)
            for r, j in T.Parallel(bm, bn):
                c_f[r, j] = 0.0
                row = by * bm + r
                if row < M:
                    for k in T.serial(RowPtr[row], RowPtr[row + 1]):
                        c_f[r, j] += Val[k] * b_s[Col[k], j]
            T.copy(c_f, C[by * bm, bx * bn])
    return spmm


@tilecute.jit(out_idx=[3])
def sddmm_tile_skip(M=192, N=128, K=128, bm=64, bn=64, bk=32, threads=128):
    """SDDMM: C = S * (A B^T) for a dense sample mask S (M, N); a tile whose TileNnz count is 0
    skips its GEMM (the accumulator stays cleared, the zeros stored)."""

    @T.prim_func
    def sddmm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), S: T.Tensor((M, N), "float32"),
              C: T.Tensor((M, N), "float32"), TileNnz: T.Tensor((M // bm, N // bn), "int32")):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            if TileNnz[by, bx] > 0:
                for k in T.Pipelined(K // bk, num_stages=2):
                    T.copy(A[by * bm, k * bk], a_s)
                    T.copy(B[bx * bn, k * bk], b_s)
                    T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = acc[i, j] * S[by * bm + i, bx * bn + j]
            T.copy(acc, C[by * bm, bx * bn])
    return sddmm


@tilecute.jit(out_idx=[4])
def bsr_weight_gemm_index_list(M=128, N=192, K=256, bm=64, bn=64, bk=64, max_blocks=4, threads=128):
    """C = A W^T with W (N, K) block-sparse: column block bx lists its nonzero K blocks in
    KIdx[bx, :KCnt[bx]]; the K loop is a ``T.Pipelined`` over that run-time count, each step
    copying the listed K block of A and of W."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K), "float16"),
             KIdx: T.Tensor((N // bn, max_blocks), "int32"), KCnt: T.Tensor((N // bn,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            w_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(KCnt[bx], num_stages=2):
                kb = KIdx[bx, k]
                T.copy(A[by * bm, kb * bk], a_s)
                T.copy(W[bx * bn, kb * bk], w_s)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return gemm


# ---- sort, top-k, argmin -------------------------------------------------------------------
@tilecute.jit(out_idx=[1, 2])
def bitonic_topk_rows(R=6, N=200, k=10, threads=128):
    """Top-k of each row by a bitonic sort (descending, ties by the smaller index) of the row
    padded to P = 256 with -inf in shared memory: ``T.serial`` stages and strides around a
    ``T.Parallel`` compare-exchange of P / 2 pairs (shared keys and indices), then the first k
    values and indices stored."""
    P = 1 << (N - 1).bit_length()
    LOG = P.bit_length() - 1

    @T.prim_func
    def topk(X: T.Tensor((R, N), "float32"), Vals: T.Tensor((R, k), "float32"), Idx: T.Tensor((R, k), "int32")):
        with T.Kernel(R, threads=threads) as bx:
            key = T.alloc_shared((P,), "float32")
            idx = T.alloc_shared((P,), "int32")
            for i in T.Parallel(P):
                key[i] = T.if_then_else(i < N, X[bx, i], -T.infinity("float32"))
                idx[i] = i
            for s in T.serial(LOG):
                for t in T.serial(s + 1):
                    for p in T.Parallel(P // 2):
                        stride = 1 << (s - t)
                        i = (p // stride) * (2 * stride) + p % stride
                        j = i + stride
                        ka = key[i]
                        kb = key[j]
                        ia = idx[i]
                        ib = idx[j]
                        b_first = kb > ka or (kb == ka and ib < ia)
                        a_first = ka > kb or (ka == kb and ia < ib)
                        down = ((i >> (s + 1)) & 1) == 0
                        if (down and b_first) or ((not down) and a_first):
                            key[i] = kb
                            key[j] = ka
                            idx[i] = ib
                            idx[j] = ia
                    T.sync_threads()
            for i in T.Parallel(k):
                Vals[bx, i] = key[i]
                Idx[bx, i] = idx[i]
    return topk


@tilecute.jit(out_idx=[1, 2])
def argmin_first_index_ties(M=40, N=300, bm=8, bn=128, threads=128):
    """Row argmin of small integers (many ties) returning the first index of the minimum, over
    column chunks: a chunk's minimum by ``T.reduce_min``, the first column holding it by a second
    ``T.reduce_min`` over candidate indices, and the running pair replaced only on a strictly
    smaller value (so an earlier chunk wins a tie)."""
    big = 2147483647

    @T.prim_func
    def argmin(X: T.Tensor((M, N), "int32"), Vmin: T.Tensor((M,), "int32"), Imin: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            v = T.alloc_fragment((bm, bn), "int32")
            cand = T.alloc_fragment((bm, bn), "int32")
            cmin = T.alloc_fragment((bm,), "int32")
            cidx = T.alloc_fragment((bm,), "int32")
            best = T.alloc_fragment((bm,), "int32")
            bidx = T.alloc_fragment((bm,), "int32")
            T.fill(best, big)
            T.fill(bidx, 0)
            for c in T.serial(T.ceildiv(N, bn)):
                for i, j in T.Parallel(bm, bn):
                    col = c * bn + j
                    v[i, j] = T.if_then_else(col < N and bx * bm + i < M, X[bx * bm + i, col], big)
                T.reduce_min(v, cmin, dim=1)
                for i, j in T.Parallel(bm, bn):
                    cand[i, j] = T.if_then_else(v[i, j] == cmin[i] and c * bn + j < N, c * bn + j, big)
                T.reduce_min(cand, cidx, dim=1)
                for i in T.Parallel(bm):
                    if cmin[i] < best[i]:
                        best[i] = cmin[i]
                        bidx[i] = cidx[i]
            for i in T.Parallel(bm):
                if bx * bm + i < M:
                    Vmin[bx * bm + i] = best[i]
                    Imin[bx * bm + i] = bidx[i]
    return argmin


# ---- scans ---------------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def segmented_scan_head_flags(R=5, N=256, threads=256):
    """Inclusive scan within segments marked by head flags (Flags[r, i] = 1 starts a segment;
    position 0 always does): Hillis-Steele doubling over log2(N) steps between two halves of a
    (2, N) shared value buffer and a (2, N) shared flag buffer, step s reading half s % 2."""
    LOG = N.bit_length() - 1

    @T.prim_func
    def scan(X: T.Tensor((R, N), "float32"), Flags: T.Tensor((R, N), "int32"), Y: T.Tensor((R, N), "float32")):
        with T.Kernel(R, threads=threads) as bx:
            v = T.alloc_shared((2, N), "float32")
            f = T.alloc_shared((2, N), "int32")
            for i in T.Parallel(N):
                v[0, i] = X[bx, i]
                f[0, i] = T.if_then_else(i == 0, 1, Flags[bx, i])
            for s in T.serial(LOG):
                for i in T.Parallel(N):
                    d = 1 << s
                    src = s % 2
                    if i >= d:
                        v[1 - src, i] = T.if_then_else(f[src, i] != 0, v[src, i], v[src, i - d] + v[src, i])
                        f[1 - src, i] = f[src, i] | f[src, i - d]
                    else:
                        v[1 - src, i] = v[src, i]
                        f[1 - src, i] = f[src, i]
            for i in T.Parallel(N):
                Y[bx, i] = v[LOG % 2, i]
    return scan


@tilecute.jit
def rle_sorted_counts(B=128, threads=128):
    """Run-length encoding of a sorted int array with a per-run sum of weights, one block over
    tiles: head[i] = (i == 0 or x[i] != x[i - 1]), a ``T.cumsum`` of the heads gives each
    element's run (plus the runs of earlier tiles, carried in a ``T.alloc_var``); heads write the
    run's value, every element adds 1 and its weight into its run by ``T.atomic_add``. Counts
    and Sums come in zeroed; NumRuns[0] gets the number of runs."""
    n = T.dynamic("n")

    @T.prim_func
    def rle(Xs: T.Tensor((n,), "int32"), Wt: T.Tensor((n,), "float32"), Values: T.Tensor((n,), "int32"),
            Counts: T.Tensor((n,), "int32"), Sums: T.Tensor((n,), "float32"), NumRuns: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            head = T.alloc_shared((B,), "int32")
            carry = T.alloc_var("int32", init=0)
            for t in T.serial(T.ceildiv(n, B)):
                for i in T.Parallel(B):
                    g = t * B + i
                    head[i] = T.if_then_else(g < n and (g == 0 or Xs[g] != Xs[g - 1]), 1, 0)
                T.cumsum(head, dim=0)
                for i in T.Parallel(B):
                    g = t * B + i
                    if g < n:
                        run = carry + head[i] - 1
                        if g == 0 or Xs[g] != Xs[g - 1]:
                            Values[run] = Xs[g]
                        T.atomic_add(Counts[run], 1)
                        T.atomic_add(Sums[run], Wt[g])
                carry = carry + head[B - 1]
            NumRuns[0] = carry
    return rle


@tilecute.jit
def compact_blocks_ticket(thr=0.25, B=256):
    """Stream compaction across blocks: a block's keep flags scanned in shared memory
    (``T.cumsum``), thread 0 reserving the block's slots with
    ``T.atomic_add(Count[0], kept, return_prev=True)``, and every kept element scattered to
    base + rank with its position (blocks land in any order; inside a block order is kept)."""
    n = T.dynamic("n")

    @T.prim_func
    def compact(X: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32"), Pos: T.Tensor((n,), "int32"),
                Count: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(n, B), threads=B) as bx:
            keep = T.alloc_shared((B,), "int32")
            base = T.alloc_shared((1,), "int32")
            for i in T.Parallel(B):
                g = bx * B + i
                keep[i] = T.if_then_else(g < n and X[g] > thr, 1, 0)
            T.cumsum(keep, dim=0)
            tx = T.get_thread_binding()
            if tx == 0:
                base[0] = T.atomic_add(Count[0], keep[B - 1], return_prev=True)
            for i in T.Parallel(B):
                g = bx * B + i
                if g < n and X[g] > thr:
                    Out[base[0] + keep[i] - 1] = X[g]
                    Pos[base[0] + keep[i] - 1] = g
    return compact


@tilecute.jit(out_idx=[3])
def masked_scatter_carry(B=128, threads=128):
    """torch.masked_scatter: Out[i] = Src[j] for the j-th set position i of Mask, else In[i];
    one block over tiles, each tile's mask scanned (``T.cumsum`` of a shared tile) and the
    count of set positions before the tile carried in a ``T.alloc_var``."""
    n = T.dynamic("n")
    m = T.dynamic("m")

    @T.prim_func
    def scatter(In: T.Tensor((n,), "float32"), Mask: T.Tensor((n,), "int8"), Src: T.Tensor((m,), "float32"),
                Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            c = T.alloc_shared((B,), "int32")
            carry = T.alloc_var("int32", init=0)
            for t in T.serial(T.ceildiv(n, B)):
                for i in T.Parallel(B):
                    g = t * B + i
                    c[i] = T.if_then_else(g < n, T.Cast("int32", Mask[g]), 0)
                T.cumsum(c, dim=0)
                for i in T.Parallel(B):
                    g = t * B + i
                    if g < n:
                        Out[g] = T.if_then_else(Mask[g] != 0, Src[carry + c[i] - 1], In[g])
                carry += c[B - 1]
    return scatter


@tilecute.jit(out_idx=[1])
def split_by_bit_stable(n=1000, bit=3, P=1024, threads=256):
    """One stable radix pass in one block: keys whose bit is 0 first, then those whose bit is
    1, each group in input order; ranks from a ``T.cumsum`` of the zero flags in shared memory
    (the zeros' count read from the scan's last element)."""

    @T.prim_func
    def split(K: T.Tensor((n,), "int32"), Out: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            z = T.alloc_shared((P,), "int32")
            for i in T.Parallel(P):
                z[i] = T.if_then_else(i < n and ((K[i] >> bit) & 1) == 0, 1, 0)
            T.cumsum(z, dim=0)
            for i in T.Parallel(P):
                if i < n:
                    if ((K[i] >> bit) & 1) == 0:
                        Out[z[i] - 1] = K[i]
                    else:
                        Out[z[P - 1] + i - z[i]] = K[i]
    return split


@tilecute.jit(out_idx=[1])
def coo_rows_to_csr_rowptr(M=200, threads=256):
    """CSR row pointers from COO row indices (any order): counts per row by ``T.atomic_add`` on
    a shared array, an inclusive ``T.cumsum``, and RowPtr[0] = 0, RowPtr[r + 1] = scan[r]."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def rowptr(Row: T.Tensor((nnz,), "int32"), RowPtr: T.Tensor((M + 1,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            cnt = T.alloc_shared((M,), "int32")
            T.clear(cnt)
            for t in T.serial(T.ceildiv(nnz, threads)):
                for i in T.Parallel(threads):
                    k = t * threads + i
                    if k < nnz:
                        T.atomic_add(cnt[Row[k]], 1)
            T.cumsum(cnt, dim=0)
            for r in T.Parallel(M + 1):
                RowPtr[r] = T.if_then_else(r == 0, 0, cnt[r - 1])
    return rowptr


# ---- stencils, windows, convolution --------------------------------------------------------
@tilecute.jit(out_idx=[1])
def sliding_window_max_causal(n=1000, W=16, B=128):
    """y[i] = max(x[i - W + 1 .. i]) (positions before 0 ignored): a tile of B outputs with its
    W - 1 halo in shared memory (-inf outside the array), a (B, W) fragment of windows and
    ``T.reduce_max(dim=1)``."""

    @T.prim_func
    def wmax(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, B), threads=B) as bx:
            s = T.alloc_shared((B + W - 1,), "float32")
            win = T.alloc_fragment((B, W), "float32")
            y = T.alloc_fragment((B,), "float32")
            for i in T.Parallel(B + W - 1):
                g = bx * B + i - (W - 1)
                s[i] = T.if_then_else(g >= 0 and g < n, X[g], -T.infinity("float32"))
            for i, k in T.Parallel(B, W):
                win[i, k] = s[i + k]
            T.reduce_max(win, y, dim=1)
            T.copy(y, Y[bx * B:(bx + 1) * B])
    return wmax


@tilecute.jit(out_idx=[2])
def depthwise_conv1d_copy_halo(C=4, L=500, Kw=7, B=128, threads=128):
    """Depthwise 1-D convolution with 'same' zero padding: each (channel, tile) copies its
    B + Kw - 1 inputs starting Kw // 2 before the tile with one ``T.copy`` (the start negative
    on the first tile and the end past L on the last: those elements read as 0)."""
    r = Kw // 2

    @T.prim_func
    def conv(X: T.Tensor((C, L), "float32"), Wt: T.Tensor((C, Kw), "float32"), Y: T.Tensor((C, L), "float32")):
        with T.Kernel(T.ceildiv(L, B), C, threads=threads) as (bx, c):
            s = T.alloc_shared((B + Kw - 1,), "float32")
            w = T.alloc_fragment((Kw,), "float32")
            y = T.alloc_fragment((B,), "float32")
            T.copy(X[c, bx * B - r:bx * B + B + r], s)
            T.copy(Wt[c, :], w)
            for i in T.Parallel(B):
                y[i] = 0.0
                for k in T.serial(Kw):
                    y[i] += s[i + k] * w[k]
            T.copy(y, Y[c, bx * B:(bx + 1) * B])
    return conv


@tilecute.jit(out_idx=[1])
def separable_blur_5tap(H=70, W=100, bh=16, bw=32, threads=128):
    """A 5x5 binomial blur (1 4 6 4 1)/16 in each direction, zero outside the image: a 2-D halo
    tile copied at (by*bh - 2, bx*bw - 2) with one ``T.copy`` (negative starts on the first row
    and column of tiles), a horizontal pass into a second shared tile, then the vertical pass."""
    taps = [1.0 / 16, 4.0 / 16, 6.0 / 16, 4.0 / 16, 1.0 / 16]

    @T.prim_func
    def blur(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), "float32")):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=threads) as (bx, by):
            a = T.alloc_shared((bh + 4, bw + 4), "float32")
            h = T.alloc_shared((bh + 4, bw), "float32")
            out = T.alloc_fragment((bh, bw), "float32")
            T.copy(X[by * bh - 2, bx * bw - 2], a)
            for i, j in T.Parallel(bh + 4, bw):
                h[i, j] = (taps[0] * a[i, j] + taps[1] * a[i, j + 1] + taps[2] * a[i, j + 2]
                           + taps[3] * a[i, j + 3] + taps[4] * a[i, j + 4])
            for i, j in T.Parallel(bh, bw):
                out[i, j] = (taps[0] * h[i, j] + taps[1] * h[i + 1, j] + taps[2] * h[i + 2, j]
                             + taps[3] * h[i + 3, j] + taps[4] * h[i + 4, j])
            T.copy(out, Y[by * bh, bx * bw])
    return blur


@tilecute.jit(out_idx=[1])
def heat1d_pingpong_steps(n=900, steps=4, alpha=0.2, B=128, threads=128):
    """`steps` explicit heat-equation steps u += alpha (u[i-1] - 2u[i] + u[i+1]) (u = 0 outside
    the rod) fused in one kernel: a tile with a halo of `steps` on each side in row 0 of a
    (2, B + 2 steps) shared buffer, step t reading row t % 2 and writing row 1 - t % 2; the
    centre B of the last row stored."""
    E = B + 2 * steps

    @T.prim_func
    def heat(U: T.Tensor((n,), "float32"), V: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, B), threads=threads) as bx:
            buf = T.alloc_shared((2, E), "float32")
            T.copy(U[bx * B - steps:bx * B + B + steps], buf[0, :])
            for t in T.serial(steps):
                for i in T.Parallel(E):
                    g = bx * B + i - steps
                    src = t % 2
                    if i >= 1 and i < E - 1 and g >= 0 and g < n:
                        buf[1 - src, i] = buf[src, i] + alpha * (buf[src, i - 1] - 2.0 * buf[src, i] + buf[src, i + 1])
                    else:
                        buf[1 - src, i] = buf[src, i]
            T.copy(buf[steps % 2, steps:steps + B], V[bx * B:(bx + 1) * B])
    return heat


@tilecute.jit(out_idx=[1])
def bilinear_resize_half_pixel(C=3, H=20, W=30, OH=45, OW=17, bh=8, bw=16, threads=128):
    """Bilinear resize with half-pixel centres (torch's align_corners=False): source
    coordinate (o + 0.5) * in / out - 0.5 clamped at 0, its floor and the next pixel (clamped
    to the last), weights from the fraction; a gather from global memory per output."""
    sh = H / OH
    sw = W / OW

    @T.prim_func
    def resize(X: T.Tensor((C, H, W), "float32"), Y: T.Tensor((C, OH, OW), "float32")):
        with T.Kernel(T.ceildiv(OW, bw), T.ceildiv(OH, bh), C, threads=threads) as (bx, by, c):
            for i, j in T.Parallel(bh, bw):
                oy = by * bh + i
                ox = bx * bw + j
                if oy < OH and ox < OW:
                    fy = T.max((oy + 0.5) * sh - 0.5, 0.0)
                    fx = T.max((ox + 0.5) * sw - 0.5, 0.0)
                    y0 = T.Cast("int32", T.floor(fy))
                    x0 = T.Cast("int32", T.floor(fx))
                    y1 = T.min(y0 + 1, H - 1)
                    x1 = T.min(x0 + 1, W - 1)
                    ly = fy - y0
                    lx = fx - x0
                    top = X[c, y0, x0] * (1.0 - lx) + X[c, y0, x1] * lx
                    bot = X[c, y1, x0] * (1.0 - lx) + X[c, y1, x1] * lx
                    Y[c, oy, ox] = top * (1.0 - ly) + bot * ly
    return resize


# ---- gathers, scatters, merges ---------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def gather_rows_skip_oob(R=50, D=96, n_idx=40, threads=128):
    """Out[i, :] = Src[Idx[i], :] for an index in [0, R), zeros for one outside (negative or
    too large): a block per output row, the source row copied into shared memory by a
    ``T.copy`` under the bounds test, the zero row by ``T.fill`` otherwise."""

    @T.prim_func
    def gather(Src: T.Tensor((R, D), "float16"), Idx: T.Tensor((n_idx,), "int64"), Out: T.Tensor((n_idx, D), "float16")):
        with T.Kernel(n_idx, threads=threads) as bx:
            row = T.alloc_shared((D,), "float16")
            r = Idx[bx]
            if r >= 0 and r < R:
                T.copy(Src[r, :], row)
            else:
                T.fill(row, 0)
            T.copy(row, Out[bx, :])
    return gather


@tilecute.jit
def warp_ballot_compaction(thr=0.0, threads=128):
    """Warp-level stream compaction: each lane's keep flag into ``T.ballot``, its rank the
    ``T.popcount`` of the lanes below it, lane 0 reserving the warp's slots with
    ``T.atomic_add(..., return_prev=True)`` and ``T.shfl_sync`` broadcasting the base."""
    n = T.dynamic("n")

    @T.prim_func
    def compact(X: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32"), Count: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            g = bx * threads + tx
            v = T.alloc_var("float32")
            base = T.alloc_var("int32", init=0)
            v = T.if_then_else(g < n, X[g], 0.0)
            keep = g < n and v > thr
            mask = T.ballot(keep)
            below = mask & ((T.uint64(1) << T.Cast("uint64", lane)) - T.uint64(1))
            rank = T.popcount(below)
            total = T.popcount(mask)
            if lane == 0:
                base = T.atomic_add(Count[0], T.Cast("int32", total), return_prev=True)
            base = T.shfl_sync(base, 0)
            if keep:
                Out[base + T.Cast("int32", rank)] = v
    return compact


@tilecute.jit(out_idx=[2])
def merge_sorted_binary_search(na=300, nb=250, threads=128):
    """Merge of two sorted float arrays (A before B on ties): A[i] lands at i + #(B < A[i]),
    B[j] at j + #(A <= B[j]); one thread per element, the count by a binary search in a
    ``while`` loop over ``T.alloc_var`` bounds."""
    blocks_a = (na + threads - 1) // threads
    blocks_b = (nb + threads - 1) // threads

    @T.prim_func
    def merge(A: T.Tensor((na,), "float32"), Bv: T.Tensor((nb,), "float32"), Out: T.Tensor((na + nb,), "float32")):
        with T.Kernel(blocks_a + blocks_b, threads=threads) as bx:
            tx = T.get_thread_binding()
            lo = T.alloc_var("int32", init=0)
            hi = T.alloc_var("int32")
            key = T.alloc_var("float32")
            if bx < blocks_a:
                i = bx * threads + tx
                if i < na:
                    key = A[i]
                    hi = nb
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if Bv[mid] < key:
                            lo = mid + 1
                        else:
                            hi = mid
                    Out[i + lo] = key
            else:
                j = (bx - blocks_a) * threads + tx
                if j < nb:
                    key = Bv[j]
                    hi = na
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if A[mid] <= key:
                            lo = mid + 1
                        else:
                            hi = mid
                    Out[j + lo] = key
    return merge


@tilecute.jit(out_idx=[2])
def csr_row_softmax_warp(M=100, threads=128):
    """Softmax over the stored values of each CSR row (empty rows untouched): a warp per row,
    lane-strided passes over the row for the maximum and the sum of exponentials combined by
    ``T.warp_reduce_max`` / ``T.warp_reduce_sum``, then the normalised values written."""
    warps = threads // 32
    nnz = T.dynamic("nnz")

    @T.prim_func
    def softmax(RowPtr: T.Tensor((M + 1,), "int32"), Val: T.Tensor((nnz,), "float32"), Out: T.Tensor((nnz,), "float32")):
        with T.Kernel(T.ceildiv(M, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = T.min(bx * warps + tx // 32, M - 1)
            valid = bx * warps + tx // 32 < M
            s = RowPtr[row]
            e = RowPtr[row + 1]
            mx = T.alloc_var("float32", init=-T.infinity("float32"))
            sm = T.alloc_var("float32", init=0.0)
            for k in T.serial(s + lane, e, 32):
                mx = T.max(mx, Val[k])
            mx = T.warp_reduce_max(mx)
            for k in T.serial(s + lane, e, 32):
                sm += T.exp(Val[k] - mx)
            sm = T.warp_reduce_sum(sm)
            if valid:
                for k in T.serial(s + lane, e, 32):
                    Out[k] = T.exp(Val[k] - mx) / sm
    return softmax


# ---- a second set: multi-pass sorts, shared-memory cursors, warp scans ---------------------
@tilecute.jit(out_idx=[1])
def radix_sort_block_bits(n=500, bits=8, P=512, threads=256):
    """An LSD radix sort of n non-negative keys below 2**bits in one block: `bits` stable
    1-bit split passes between the two halves of a (2, P) shared key buffer, each pass's zero
    flags scanned by ``T.cumsum`` inside the ``T.serial`` pass loop (padding keys 2**bits - 1
    sort last and stay past n)."""
    pad = (1 << bits) - 1

    @T.prim_func
    def rsort(K: T.Tensor((n,), "int32"), Out: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            keys = T.alloc_shared((2, P), "int32")
            z = T.alloc_shared((P,), "int32")
            for i in T.Parallel(P):
                keys[0, i] = T.if_then_else(i < n, K[i], pad)
            for b in T.serial(bits):
                for i in T.Parallel(P):
                    z[i] = 1 - ((keys[b % 2, i] >> b) & 1)
                T.cumsum(z, dim=0)
                for i in T.Parallel(P):
                    kv = keys[b % 2, i]
                    if ((kv >> b) & 1) == 0:
                        keys[1 - b % 2, z[i] - 1] = kv
                    else:
                        keys[1 - b % 2, z[P - 1] + i - z[i]] = kv
            for i in T.Parallel(P):
                if i < n:
                    Out[i] = keys[bits % 2, i]
    return rsort


@tilecute.jit
def coo_to_csc_cursor(N=96, threads=256):
    """COO -> CSC in one block: column counts by ``T.atomic_add`` on a shared array, an
    inclusive ``T.cumsum`` giving ColPtr, a shared cursor per column started at the column's
    first slot, and each nonzero placed at the slot ``T.atomic_add(cursor[c], 1,
    return_prev=True)`` hands it (order inside a column left to the atomics)."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def csc(Row: T.Tensor((nnz,), "int32"), Col: T.Tensor((nnz,), "int32"), Val: T.Tensor((nnz,), "float32"),
            ColPtr: T.Tensor((N + 1,), "int32"), RowIdx: T.Tensor((nnz,), "int32"), ValT: T.Tensor((nnz,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            cnt = T.alloc_shared((N,), "int32")
            cursor = T.alloc_shared((N,), "int32")
            T.clear(cnt)
            for t in T.serial(T.ceildiv(nnz, threads)):
                for i in T.Parallel(threads):
                    k = t * threads + i
                    if k < nnz:
                        T.atomic_add(cnt[Col[k]], 1)
            T.cumsum(cnt, dim=0)
            for c in T.Parallel(N):
                cursor[c] = T.if_then_else(c == 0, 0, cnt[c - 1])
            for c in T.Parallel(N + 1):
                ColPtr[c] = T.if_then_else(c == 0, 0, cnt[c - 1])
            for t in T.serial(T.ceildiv(nnz, threads)):
                for i in T.Parallel(threads):
                    k = t * threads + i
                    if k < nnz:
                        slot = T.atomic_add(cursor[Col[k]], 1, return_prev=True)
                        RowIdx[slot] = Row[k]
                        ValT[slot] = Val[k]
    return csc


@tilecute.jit(out_idx=[1, 2])
def drawdown_cummax(R=4, N=256, threads=128):
    """Running maximum and drawdown of each row (a price series): ``T.cummax`` of a shared row
    gives the peak so far, the drawdown x / peak - 1; and a reverse ``T.cummax`` of the row
    gives each point's best future value."""

    @T.prim_func
    def dd(X: T.Tensor((R, N), "float32"), Draw: T.Tensor((R, N), "float32"), Future: T.Tensor((R, N), "float32")):
        with T.Kernel(R, threads=threads) as bx:
            x = T.alloc_shared((N,), "float32")
            peak = T.alloc_shared((N,), "float32")
            fut = T.alloc_shared((N,), "float32")
            T.copy(X[bx, :], x)
            T.cummax(x, peak, dim=0)
            T.cummax(x, fut, dim=0, reverse=True)
            for i in T.Parallel(N):
                Draw[bx, i] = x[i] / peak[i] - 1.0
                Future[bx, i] = fut[i]
    return dd


@tilecute.jit(out_idx=[2])
def warp_segmented_scan_shfl(n=1000, threads=128):
    """Inclusive segmented scan inside each warp of 32 elements (a head flag starts a segment;
    lane 0 always does) with ``T.shfl_up`` of the value and the flag over an unrolled
    1, 2, 4, 8, 16 ladder; each warp's run is independent."""

    @T.prim_func
    def scan(X: T.Tensor((n,), "float32"), Head: T.Tensor((n,), "int32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            g = bx * threads + tx
            v = T.alloc_var("float32")
            f = T.alloc_var("int32")
            v = T.if_then_else(g < n, X[g], 0.0)
            f = T.if_then_else(g < n and Head[g] == 0 and lane != 0, 0, 1)
            for s in T.unroll(5):
                up_v = T.shfl_up(v, 1 << s)
                up_f = T.shfl_up(f, 1 << s)
                if lane >= (1 << s) and f == 0:
                    v = v + up_v
                    f = f | up_f
            if g < n:
                Y[g] = v
    return scan


@tilecute.jit(out_idx=[1, 2])
def warp_argmax_ballot_ffs(R=50, N=256, threads=128):
    """Row argmax (first index on ties) with a warp per row, each lane holding a contiguous
    chunk of N / 32: a lane's first maximum, the row maximum by ``T.warp_reduce_max``, the
    lowest lane holding it by ``T.__ffs(T.ballot(...)) - 1`` and its index broadcast by
    ``T.shfl_sync``."""
    C = N // 32
    warps = threads // 32

    @T.prim_func
    def argmax(X: T.Tensor((R, N), "float32"), Vmax: T.Tensor((R,), "float32"), Imax: T.Tensor((R,), "int32")):
        with T.Kernel(T.ceildiv(R, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = T.min(bx * warps + tx // 32, R - 1)
            best = T.alloc_var("float32", init=-T.infinity("float32"))
            bidx = T.alloc_var("int32", init=0)
            for c in T.serial(C):
                val = X[row, lane * C + c]
                if val > best:
                    best = val
                    bidx = lane * C + c
            m = T.warp_reduce_max(best)
            winner = T.__ffs(T.Cast("int32", T.ballot(best == m))) - 1
            idx = T.shfl_sync(bidx, winner)
            if bx * warps + tx // 32 < R and lane == 0:
                Vmax[row] = m
                Imax[row] = idx
    return argmax


@tilecute.jit(out_idx=[1])
def stencil5_steps_two_buffers(H=50, W=70, steps=3, bh=16, bw=32, threads=256):
    """`steps` 5-point Jacobi sweeps fused over a tile with a halo of `steps`, the sweeps
    alternating between two named shared buffers (``if t % 2 == 0: b <- a else a <- b``, with
    ``T.sync_threads()`` after each), points outside the grid held at 0."""
    E_h, E_w = bh + 2 * steps, bw + 2 * steps

    @T.prim_func
    def jac(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), "float32")):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=threads) as (bx, by):
            a = T.alloc_shared((E_h, E_w), "float32")
            b = T.alloc_shared((E_h, E_w), "float32")
            T.copy(X[by * bh - steps, bx * bw - steps], a)
            T.copy(X[by * bh - steps, bx * bw - steps], b)
            for t in T.serial(steps):
                if t % 2 == 0:
                    for i, j in T.Parallel(E_h - 2, E_w - 2):
                        r = by * bh - steps + i + 1
                        c = bx * bw - steps + j + 1
                        if r >= 0 and r < H and c >= 0 and c < W:
                            b[i + 1, j + 1] = 0.25 * (a[i, j + 1] + a[i + 2, j + 1] + a[i + 1, j] + a[i + 1, j + 2])
                else:
                    for i, j in T.Parallel(E_h - 2, E_w - 2):
                        r = by * bh - steps + i + 1
                        c = bx * bw - steps + j + 1
                        if r >= 0 and r < H and c >= 0 and c < W:
                            a[i + 1, j + 1] = 0.25 * (b[i, j + 1] + b[i + 2, j + 1] + b[i + 1, j] + b[i + 1, j + 2])
                T.sync_threads()
            if steps % 2 == 1:
                T.copy(b[steps:steps + bh, steps:steps + bw], Y[by * bh, bx * bw])
            else:
                T.copy(a[steps:steps + bh, steps:steps + bw], Y[by * bh, bx * bw])
    return jac


@tilecute.jit(out_idx=[2])
def segment_scale_shared_cursor(n_seg=6, threads=128):
    """Each block walks its segment [Off[s], Off[s + 1]) in steps of the block's threads with
    a cursor in shared memory: ``while head[0] < end:`` every thread scales one element, then
    thread 0 advances the cursor (the write the next test of the condition reads: a barrier
    at the body's end orders them)."""
    n = T.dynamic("n")

    @T.prim_func
    def walk(X: T.Tensor((n,), "float32"), Off: T.Tensor((n_seg + 1,), "int32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n_seg, threads=threads) as s:
            tx = T.get_thread_binding()
            head = T.alloc_shared((1,), "int32")
            end = Off[s + 1]
            if tx == 0:
                head[0] = Off[s]
            while head[0] < end:
                g = head[0] + tx
                if g < end:
                    Y[g] = X[g] * (s + 1)
                if tx == 0:
                    head[0] = head[0] + threads
    return walk


@tilecute.jit(out_idx=[3])
def csr_row_sums_shared_bounds(M=64, threads=128):
    """Row sums of a CSR matrix, a block per row: thread 0 stages the row's bounds in shared
    memory, every thread loops ``T.serial(T.ceildiv(bounds[1] - bounds[0], threads))`` over
    them (the range read from shared memory right after thread 0's write: a barrier before
    the loop), the partial sums meeting in a shared array reduced by ``T.reduce_sum``.
    (TileLang 0.1.15's sync pass stops on this loop's range with an internal check,
    ``allow_append_``; tilecute orders the range after thread 0's write.)"""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def rowsum(RowPtr: T.Tensor((M + 1,), "int32"), Val: T.Tensor((nnz,), "float32"),
               Scale: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as row:
            tx = T.get_thread_binding()
            bounds = T.alloc_shared((2,), "int32")
            part = T.alloc_shared((threads,), "float32")
            total = T.alloc_fragment((1,), "float32")
            acc = T.alloc_var("float32", init=0.0)
            if tx == 0:
                bounds[0] = RowPtr[row]
                bounds[1] = RowPtr[row + 1]
            for k in T.serial(T.ceildiv(bounds[1] - bounds[0], threads)):
                q = bounds[0] + k * threads + tx
                if q < bounds[1]:
                    acc += Val[q]
            part[tx] = acc
            T.reduce_sum(part, total, dim=0)
            Y[row] = total[0] * Scale[row]
    return rowsum
