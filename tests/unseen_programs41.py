"""A forty-first set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): classic GPU algorithms in TileLang's lower-level forms -- thread bindings,
T.alloc_local / T.alloc_var / T.alloc_shared scratch, explicit T.sync_threads, warp shuffles,
atomics (with memory orders), while loops, T.serial / T.unroll / T.vectorized loops and bit
operations, mixed with T.Parallel.  A shared-memory tree reduction (sequential addressing,
then shuffles), a Kogge-Stone block scan and a two-pass multi-block scan, a Blelloch
work-efficient exclusive scan, a single-pass scan with decoupled look-back (flags in global
memory, acquire / release atomics, a spin loop), a histogram privatized in shared memory, CSR
SpMV with one warp per row over a T.dynamic nnz, a radix-sort digit pass (counts, then a
stable scatter), a bitonic sort of 1024 key / value pairs in shared memory, a register-blocked
SGEMM on CUDA cores, a matrix transpose through a padded shared tile, a separable Gaussian
blur with a halo, n-body force accumulation with shared tiles, a Julia set by a capped while
loop, a grid-stride loop over a T.dynamic length, a warp-level argmax with ties broken low, a
persistent work queue on an atomic ticket, label propagation until a round changes nothing
(a while loop on a shared flag) and a producer warp handing rows to a consumer warp through
a ring of shared slots with acquire / release flags.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs41.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- tree reduction: shared memory, sequential addressing, then a warp of shuffles ----------
@tilelang.jit
def tree_reduce_then_shuffle(threads=256, items=4):
    """Sum of a T.dynamic-length vector: each thread adds `items` elements of a grid-stride
    sweep, the block halves its shared partials while more than a warp remains (stride s,
    threads below s add s away, a barrier after each step), the last warp finishes with
    shfl_down and lane 0 adds the block's sum to Out by an atomic (Out zeroed by the
    caller, so it is an argument, not an out_idx output)."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Out: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads * items), threads=threads) as bx:
            tx = T.get_thread_binding(0)
            part = T.alloc_shared((threads,), T.float32)
            acc = T.alloc_var(T.float32, init=0.0)
            for k in T.unroll(items):
                g = bx * threads * items + k * threads + tx
                if g < n:
                    acc += X[g]
            part[tx] = acc
            T.sync_threads()
            s = T.alloc_var(T.int32, init=threads // 2)
            while s >= 32:
                if tx < s:
                    part[tx] = part[tx] + part[tx + s]
                T.sync_threads()
                s = s >> 1
            if tx < 32:
                v = T.alloc_var(T.float32)
                v = part[tx]
                off = T.alloc_var(T.int32, init=16)
                while off > 0:
                    v = v + T.shfl_down(v, off)
                    off = off // 2
                if tx == 0:
                    T.atomic_add(Out[0], v)

    return main


# ---- Kogge-Stone inclusive scan of a block, ping-pong shared buffers -------------------------
@tilelang.jit(out_idx=[1, 2])
def kogge_stone_block_scan(n=4096, block=512):
    """Per block of `block` elements an inclusive prefix sum (Hillis-Steele / Kogge-Stone):
    log2(block) steps, step d adding the value 2^d below, two shared buffers swapped each step;
    the block's total goes to Sums (the second pass adds the scanned totals)."""
    steps = block.bit_length() - 1

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), Y: T.Tensor((n,), T.int32),
             Sums: T.Tensor((n // block,), T.int32)):
        with T.Kernel(n // block, threads=block) as bx:
            tx = T.get_thread_binding()
            buf = T.alloc_shared((2, block), T.int32)
            buf[0, tx] = X[bx * block + tx]
            T.sync_threads()
            for d in T.serial(steps):
                src = d % 2
                off = 1 << d
                if tx >= off:
                    buf[1 - src, tx] = buf[src, tx] + buf[src, tx - off]
                else:
                    buf[1 - src, tx] = buf[src, tx]
                T.sync_threads()
            Y[bx * block + tx] = buf[steps % 2, tx]
            if tx == block - 1:
                Sums[bx] = buf[steps % 2, tx]

    return main


@tilelang.jit(out_idx=[2])
def scan_add_block_offsets(n=4096, block=512):
    """The second pass of a multi-block scan: one block scans the block totals in registers
    (a serial loop of thread 0 into a shared array), then every element adds the sum of the
    blocks before its own."""
    nb = n // block

    @T.prim_func
    def main(Y: T.Tensor((n,), T.int32), Sums: T.Tensor((nb,), T.int32),
             Z: T.Tensor((n,), T.int32)):
        with T.Kernel(nb, threads=256) as bx:
            tx = T.get_thread_binding()
            base = T.alloc_shared((1,), T.int32)
            if tx == 0:
                run = T.alloc_var(T.int32, init=0)
                for b in T.serial(bx):
                    run += Sums[b]
                base[0] = run
            T.sync_threads()
            for i in T.Parallel(block):
                Z[bx * block + i] = Y[bx * block + i] + base[0]

    return main


# ---- Blelloch work-efficient exclusive scan (up-sweep, clear, down-sweep) --------------------
@tilelang.jit(out_idx=[1])
def blelloch_exclusive_scan(rows=8, n=1024):
    """Exclusive prefix sums of each row of `n` floats, n/2 threads, two elements a thread:
    the up-sweep builds partial sums in a tree (offset doubling by shifts), the root is
    cleared, the down-sweep swaps and adds back down."""
    threads = n // 2
    levels = n.bit_length() - 1

    @T.prim_func
    def main(X: T.Tensor((rows, n), T.float32), Y: T.Tensor((rows, n), T.float32)):
        with T.Kernel(rows, threads=threads) as r:
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), T.float32)
            s[2 * tx] = X[r, 2 * tx]
            s[2 * tx + 1] = X[r, 2 * tx + 1]
            for lv in T.serial(levels):
                T.sync_threads()
                d = threads >> lv
                off = 1 << lv
                if tx < d:
                    ai = off * (2 * tx + 1) - 1
                    bi = off * (2 * tx + 2) - 1
                    s[bi] += s[ai]
            if tx == 0:
                s[n - 1] = 0.0
            for lv in T.serial(levels):
                T.sync_threads()
                d = 1 << lv
                off = n >> (lv + 1)
                if tx < d:
                    ai = off * (2 * tx + 1) - 1
                    bi = off * (2 * tx + 2) - 1
                    t = T.alloc_var(T.float32)
                    t = s[ai]
                    s[ai] = s[bi]
                    s[bi] += t
            T.sync_threads()
            Y[r, 2 * tx] = s[2 * tx]
            Y[r, 2 * tx + 1] = s[2 * tx + 1]

    return main


# ---- single-pass scan with decoupled look-back -----------------------------------------------
@tilelang.jit(out_idx=[1])
def decoupled_lookback_scan(n=8192, block=256):
    """Inclusive prefix sum in one pass: a block takes its tile by a ticket (atomic on
    Ticket[0], so tiles are taken in launch order), scans it in shared memory, publishes its
    aggregate with flag 1 (release), then thread 0 walks back over the predecessors' flags
    (acquire loads, spinning while a flag is 0), adding aggregates until it meets an inclusive
    prefix (flag 2); the block publishes its own inclusive prefix and adds the exclusive one.
    Flags and values are separate int32 words in global memory (State[t, 0] flag,
    State[t, 1] aggregate, State[t, 2] inclusive prefix), initialised to zero by the caller:
    the aggregate and the prefix need words of their own, since a successor that saw flag 1
    may read the value after the predecessor has moved on to flag 2."""
    tiles = n // block

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), Y: T.Tensor((n,), T.int32),
             State: T.Tensor((tiles, 3), T.int32), Ticket: T.Tensor((1,), T.int32)):
        with T.Kernel(tiles, threads=block) as bx:
            tx = T.get_thread_binding()
            tile_s = T.alloc_shared((1,), T.int32)
            excl_s = T.alloc_shared((1,), T.int32)
            buf = T.alloc_shared((block,), T.int32)
            if tx == 0:
                tile_s[0] = T.atomic_add(Ticket[0], 1, return_prev=True)
            T.sync_threads()
            tile = tile_s[0]
            buf[tx] = X[tile * block + tx]
            T.sync_threads()
            off = T.alloc_var(T.int32, init=1)
            while off < block:
                v = T.alloc_var(T.int32)
                v = buf[tx]
                if tx >= off:
                    v += buf[tx - off]
                T.sync_threads()
                buf[tx] = v
                T.sync_threads()
                off = off * 2
            if tx == 0:
                agg = buf[block - 1]
                if tile == 0:
                    State[tile, 2] = agg
                    T.atomic_store(State[tile, 0], 2, memory_order="release")
                    excl_s[0] = 0
                else:
                    State[tile, 1] = agg
                    T.atomic_store(State[tile, 0], 1, memory_order="release")
                    run = T.alloc_var(T.int32, init=0)
                    p = T.alloc_var(T.int32, init=tile - 1)
                    while p >= 0:
                        f = T.alloc_var(T.int32, init=0)
                        while f == 0:
                            f = T.atomic_load(State[p, 0], memory_order="acquire")
                        run += State[p, f]  # flag 1: the aggregate (word 1), flag 2: the prefix (word 2)
                        if f == 2:
                            p = -1
                        else:
                            p = p - 1
                    State[tile, 2] = run + agg
                    T.atomic_store(State[tile, 0], 2, memory_order="release")
                    excl_s[0] = run
            T.sync_threads()
            Y[tile * block + tx] = buf[tx] + excl_s[0]

    return main


# ---- histogram: privatized in shared memory, merged by atomics ------------------------------
@tilelang.jit
def histogram_shared_private(bins=256, threads=512, blocks=16):
    """Byte histogram of a T.dynamic-length uint8 array: each block zeroes a shared histogram,
    sweeps the input with a grid-stride loop (a T.serial with a run-time step), counts by
    shared atomics, then adds its non-zero bins to the global histogram (zeroed by the
    caller) by atomics."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), T.uint8), H: T.Tensor((bins,), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            h = T.alloc_shared((bins,), T.int32)
            for b in T.Parallel(bins):
                h[b] = 0
            T.sync_threads()
            for i in T.serial(bx * threads + tx, n, blocks * threads):
                T.atomic_add(h[T.cast(X[i], T.int32)], 1)
            T.sync_threads()
            for b in T.serial(tx, bins, threads):
                if h[b] != 0:
                    T.atomic_add(H[b], h[b])

    return main


# ---- CSR SpMV, one warp per row, shuffle reduction, T.dynamic nnz ----------------------------
@tilelang.jit(out_idx=[4])
def csr_spmv_warp_per_row(rows=1000, cols=777, threads=128):
    """y = A @ x for A in CSR (RowPtr, ColIdx, Val with a T.dynamic nnz): warp w of a block
    takes one row, its lanes stride the row's entries by 32 and the lanes' partial sums meet
    by a shfl_xor butterfly; lane 0 writes the row."""
    nnz = T.dynamic("nnz")
    warps = threads // 32

    @T.prim_func
    def main(RowPtr: T.Tensor((rows + 1,), T.int32), ColIdx: T.Tensor((nnz,), T.int32),
             Val: T.Tensor((nnz,), T.float32), Xv: T.Tensor((cols,), T.float32),
             Yv: T.Tensor((rows,), T.float32)):
        with T.Kernel(T.ceildiv(rows, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = bx * warps + tx // 32
            acc = T.alloc_local((1,), T.float32)
            acc[0] = 0.0
            if row < rows:
                start = RowPtr[row]
                end = RowPtr[row + 1]
                for e in T.serial(start + lane, end, 32):
                    acc[0] += Val[e] * Xv[ColIdx[e]]
            for s in T.unroll(5):
                acc[0] += T.shfl_xor(acc[0], 16 >> s)
            if row < rows and lane == 0:
                Yv[row] = acc[0]

    return main


# ---- radix sort: one 4-bit digit pass (block counts, then a stable scatter) ------------------
@tilelang.jit(out_idx=[1])
def radix_digit_counts_pass(n=4096, shift=4, block=256):
    """The counting half of an LSD radix pass over uint32 keys: per block, a shared count of
    each 16-value digit ((key >> shift) & 15) by shared atomics, stored to Counts[digit,
    block] (digit-major, so an exclusive scan of the flattened table gives every block's
    first slot for each digit)."""
    nb = n // block

    @T.prim_func
    def main(K: T.Tensor((n,), T.uint32), Counts: T.Tensor((16, nb), T.int32)):
        with T.Kernel(nb, threads=block) as bx:
            tx = T.get_thread_binding()
            c = T.alloc_shared((16,), T.int32)
            if tx < 16:
                c[tx] = 0
            T.sync_threads()
            d = T.cast((K[bx * block + tx] >> shift) & T.uint32(15), T.int32)
            T.atomic_add(c[d], 1)
            T.sync_threads()
            if tx < 16:
                Counts[tx, bx] = c[tx]

    return main


@tilelang.jit(out_idx=[2])
def radix_digit_scatter_pass(n=4096, shift=4, block=256):
    """The scatter half: Offsets[digit, block] is the exclusive scan of the counts table; a
    thread's rank among the block's equal digits below it comes from a ballot per warp
    (popcount of the lanes below with the same digit, matched bit by bit) plus the shared
    per-warp digit counts of the warps before, so the scatter is stable."""
    nb = n // block
    warps = block // 32

    @T.prim_func
    def main(K: T.Tensor((n,), T.uint32), Offsets: T.Tensor((16, nb), T.int32),
             Out: T.Tensor((n,), T.uint32)):
        with T.Kernel(nb, threads=block) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            w = tx // 32
            wc = T.alloc_shared((warps, 16), T.int32)
            key = K[bx * block + tx]
            d = T.cast((key >> shift) & T.uint32(15), T.int32)
            same = T.alloc_var(T.uint32, init=T.uint32(0xFFFFFFFF))
            for b in T.unroll(4):
                bit = (d >> b) & 1
                votes = T.ballot(bit == 1)
                same = same & T.if_then_else(bit == 1, T.cast(votes, T.uint32),
                                              ~T.cast(votes, T.uint32))
            below = same & ((T.uint32(1) << T.cast(lane, T.uint32)) - T.uint32(1))
            rank = T.popcount(below)
            if tx < warps * 16:
                wc[tx // 16, tx % 16] = 0
            T.sync_threads()
            if rank == 0:
                wc[w, d] = T.popcount(same)
            T.sync_threads()
            before = T.alloc_var(T.int32, init=0)
            for v in T.serial(w):
                before += wc[v, d]
            Out[Offsets[d, bx] + before + rank] = key

    return main


# ---- bitonic sort of 1024 key / value pairs in shared memory ---------------------------------
@tilelang.jit(out_idx=[2, 3])
def bitonic_sort_pairs_1024(rows=4, n=1024):
    """Each row's n float keys sorted ascending with their int32 values: n/2 threads, each
    comparing one pair per step; the stages k = 2, 4, .., n and strides j = k/2, .., 1 are
    while loops over T.alloc_var; the pair is (i, i ^ j) with i the thread's lower index
    (bit j cleared), the direction set by bit k of i; both elements are read, then both written
through selects (no divergent branch around the stores)."""
    threads = n // 2

    @T.prim_func
    def main(Kin: T.Tensor((rows, n), T.float32), Vin: T.Tensor((rows, n), T.int32),
             Kout: T.Tensor((rows, n), T.float32), Vout: T.Tensor((rows, n), T.int32)):
        with T.Kernel(rows, threads=threads) as r:
            tx = T.get_thread_binding()
            ks = T.alloc_shared((n,), T.float32)
            vs = T.alloc_shared((n,), T.int32)
            for i in T.Parallel(n):
                ks[i] = Kin[r, i]
                vs[i] = Vin[r, i]
            T.sync_threads()
            k = T.alloc_var(T.int32, init=2)
            while k <= n:
                j = T.alloc_var(T.int32, init=k >> 1)
                while j > 0:
                    lo = ((tx & ~(j - 1)) << 1) | (tx & (j - 1))
                    hi = lo | j
                    up = (lo & k) == 0
                    a = ks[lo]
                    b = ks[hi]
                    va = vs[lo]
                    vb = vs[hi]
                    swap = (a > b) == up
                    T.sync_threads()
                    ks[lo] = T.if_then_else(swap, b, a)
                    ks[hi] = T.if_then_else(swap, a, b)
                    vs[lo] = T.if_then_else(swap, vb, va)
                    vs[hi] = T.if_then_else(swap, va, vb)
                    T.sync_threads()
                    j = j >> 1
                k = k << 1
            for i in T.Parallel(n):
                Kout[r, i] = ks[i]
                Vout[r, i] = vs[i]

    return main


# ---- SGEMM on CUDA cores: shared tiles, 8x8 register blocking -------------------------------
@tilelang.jit(out_idx=[2])
def sgemm_register_blocked(M=256, N=256, K=256, BM=64, BN=64, BK=8, TM=4, TN=4):
    """C = A @ B in float32 without T.gemm: per K step a BM x BK tile of A (stored transposed,
    As[k, m]) and a BK x BN tile of B go to shared memory; each of (BM/TM)*(BN/TN) threads
    keeps a TM x TN block of C in T.alloc_local, loads a column of As and a row of Bs into
    local fragments and does the outer product under T.unroll."""
    threads = (BM // TM) * (BN // TN)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // BN, M // BM, threads=threads) as (bx, by):
            tx = T.get_thread_binding()
            tr = tx // (BN // TN)
            tc = tx % (BN // TN)
            As = T.alloc_shared((BK, BM), T.float32)
            Bs = T.alloc_shared((BK, BN), T.float32)
            c = T.alloc_local((TM, TN), T.float32)
            a = T.alloc_local((TM,), T.float32)
            b = T.alloc_local((TN,), T.float32)
            for i, j in T.grid(TM, TN):
                c[i, j] = 0.0
            for ko in T.serial(K // BK):
                for m, k in T.Parallel(BM, BK):
                    As[k, m] = A[by * BM + m, ko * BK + k]
                for k, n in T.Parallel(BK, BN):
                    Bs[k, n] = B[ko * BK + k, bx * BN + n]
                T.sync_threads()
                for k in T.unroll(BK):
                    for i in T.vectorized(TM):
                        a[i] = As[k, tr * TM + i]
                    for j in T.vectorized(TN):
                        b[j] = Bs[k, tc * TN + j]
                    for i in T.unroll(TM):
                        for j in T.unroll(TN):
                            c[i, j] += a[i] * b[j]
                T.sync_threads()
            for i in T.unroll(TM):
                for j in T.vectorized(TN):
                    C[by * BM + tr * TM + i, bx * BN + tc * TN + j] = c[i, j]

    return main


# ---- transpose through a padded shared tile (32 x 33), 2-D threads --------------------------
@tilelang.jit(out_idx=[1])
def transpose_padded_tile(M=1000, N=700, TILE=32, ROWS=8):
    """B = A^T for ragged sizes: threads (TILE, ROWS); each thread moves TILE/ROWS elements of
    a tile into a (TILE, TILE + 1) shared tile (the pad column keeps the column reads free of
    bank conflicts), then writes the transposed tile with the roles of x and y swapped."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((N, M), T.float16)):
        with T.Kernel(T.ceildiv(N, TILE), T.ceildiv(M, TILE), threads=(TILE, ROWS)) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tile = T.alloc_shared((TILE, TILE + 1), T.float16)
            for r in T.serial(0, TILE, ROWS):
                y = by * TILE + r + ty
                x = bx * TILE + tx
                if y < M and x < N:
                    tile[r + ty, tx] = A[y, x]
            T.sync_threads()
            for r in T.serial(0, TILE, ROWS):
                y = bx * TILE + r + ty
                x = by * TILE + tx
                if y < N and x < M:
                    B[y, x] = tile[tx, r + ty]

    return main


# ---- separable Gaussian blur with a halo ------------------------------------------------------
@tilelang.jit(out_idx=[2])
def gaussian_blur_separable(H=200, W=300, R=3, TH=16, TW=32):
    """A (2R+1)-tap separable blur (weights in a tensor) with clamp-to-edge borders: a block
    loads its (TH + 2R) x (TW + 2R) input window into shared memory, blurs rows into a second
    shared tile of TH + 2R rows, syncs, blurs columns and stores its TH x TW tile."""
    taps = 2 * R + 1

    @T.prim_func
    def main(Img: T.Tensor((H, W), T.float32), Wt: T.Tensor((taps,), T.float32),
             Out: T.Tensor((H, W), T.float32)):
        with T.Kernel(T.ceildiv(W, TW), T.ceildiv(H, TH), threads=256) as (bx, by):
            win = T.alloc_shared((TH + 2 * R, TW + 2 * R), T.float32)
            rows = T.alloc_shared((TH + 2 * R, TW), T.float32)
            w = T.alloc_local((taps,), T.float32)
            for t in T.unroll(taps):
                w[t] = Wt[t]
            for i, j in T.Parallel(TH + 2 * R, TW + 2 * R):
                y = T.clamp(by * TH + i - R, 0, H - 1)
                x = T.clamp(bx * TW + j - R, 0, W - 1)
                win[i, j] = Img[y, x]
            T.sync_threads()
            for i, j in T.Parallel(TH + 2 * R, TW):
                s = T.alloc_var(T.float32, init=0.0)
                for t in T.unroll(taps):
                    s += w[t] * win[i, j + t]
                rows[i, j] = s
            T.sync_threads()
            for i, j in T.Parallel(TH, TW):
                s = T.alloc_var(T.float32, init=0.0)
                for t in T.unroll(taps):
                    s += w[t] * rows[i + t, j]
                if by * TH + i < H and bx * TW + j < W:
                    Out[by * TH + i, bx * TW + j] = s

    return main


# ---- n-body: forces accumulated over shared tiles of bodies ---------------------------------
@tilelang.jit(out_idx=[1])
def nbody_forces_shared_tiles(n=1024, tile=128, eps2=1e-2):
    """Acceleration of each body from all n bodies (softened gravity, masses in column 3 of
    Pos): one thread per body, the bodies staged tile by tile into shared memory (each thread
    loads one), a T.unroll(4) inner loop over the tile with rsqrt, barriers around the tile."""

    @T.prim_func
    def main(Pos: T.Tensor((n, 4), T.float32), Acc: T.Tensor((n, 3), T.float32)):
        with T.Kernel(n // tile, threads=tile) as bx:
            tx = T.get_thread_binding()
            me = bx * tile + tx
            sh = T.alloc_shared((tile, 4), T.float32)
            p = T.alloc_local((3,), T.float32)
            f = T.alloc_local((3,), T.float32)
            for d in T.serial(3):
                p[d] = Pos[me, d]
                f[d] = 0.0
            for t in T.serial(n // tile):
                for d in T.vectorized(4):
                    sh[tx, d] = Pos[t * tile + tx, d]
                T.sync_threads()
                for j in T.unroll(tile, unroll_factor=4):
                    dx = sh[j, 0] - p[0]
                    dy = sh[j, 1] - p[1]
                    dz = sh[j, 2] - p[2]
                    inv = T.rsqrt(dx * dx + dy * dy + dz * dz + eps2)
                    s = sh[j, 3] * inv * inv * inv
                    f[0] += dx * s
                    f[1] += dy * s
                    f[2] += dz * s
                T.sync_threads()
            for d in T.serial(3):
                Acc[me, d] = f[d]

    return main


# ---- Julia set escape counts: a while loop with an iteration cap -----------------------------
@tilelang.jit(out_idx=[0])
def julia_escape_counts(H=300, W=400, cap=256, cr=-0.8, ci=0.156):
    """Iterations until |z| > 2 of z <- z^2 + c from the pixel's point of [-1.6, 1.6] x
    [-1.2, 1.2], capped at `cap`: a while loop whose condition joins the cap and the escape
    test by `and`, over T.alloc_var state; T.Parallel over the pixels of a 16 x 32 tile."""

    @T.prim_func
    def main(Cnt: T.Tensor((H, W), T.int32)):
        with T.Kernel(T.ceildiv(W, 32), T.ceildiv(H, 16), threads=128) as (bx, by):
            for i, j in T.Parallel(16, 32):
                y = by * 16 + i
                x = bx * 32 + j
                zr = T.alloc_var(T.float32)
                zi = T.alloc_var(T.float32)
                it = T.alloc_var(T.int32, init=0)
                zr = -1.6 + 3.2 * T.cast(x, T.float32) / (W - 1)
                zi = -1.2 + 2.4 * T.cast(y, T.float32) / (H - 1)
                while it < cap and zr * zr + zi * zi <= 4.0:
                    t = zr * zr - zi * zi + cr
                    zi = 2.0 * zr * zi + ci
                    zr = t
                    it += 1
                if y < H and x < W:
                    Cnt[y, x] = it

    return main


# ---- grid-stride loop over a T.dynamic length (a while loop and a stepped T.serial) ----------
@tilelang.jit(out_idx=[2])
def grid_stride_axpy_and_norm(blocks=8, threads=128, alpha=2.5):
    """Y = alpha * X + Y2 over a T.dynamic length by a grid-stride while loop (a thread's
    index moves by blocks * threads), and the squared norm of the result by a second,
    T.serial-stepped sweep whose per-thread partials meet by warp shuffles and one atomic per
    warp into Norm2 (zeroed by the caller)."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y2: T.Tensor((n,), T.float32),
             Y: T.Tensor((n,), T.float32), Norm2: T.Tensor((1,), T.float32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            i = T.alloc_var(T.int32, init=bx * threads + tx)
            while i < n:
                Y[i] = alpha * X[i] + Y2[i]
                i += blocks * threads
            part = T.alloc_var(T.float32, init=0.0)
            for g in T.serial(bx * threads + tx, n, blocks * threads):
                v = alpha * X[g] + Y2[g]
                part += v * v
            for s in T.unroll(5):
                part += T.shfl_down(part, 16 >> s)
            if tx % 32 == 0:
                T.atomic_add(Norm2[0], part)

    return main


# ---- warp-level argmax, ties broken toward the lower index -----------------------------------
@tilelang.jit(out_idx=[1, 2])
def warp_argmax_ties_low(rows=64, n=1000):
    """Per row the maximum and its first index: one warp per row (4 rows a block), lanes
    stride the row keeping (value, index) with ties to the lower index, then a shfl_xor
    butterfly exchanges both and keeps the larger value, the lower index on a tie."""

    @T.prim_func
    def main(X: T.Tensor((rows, n), T.float32), Mx: T.Tensor((rows,), T.float32),
             Ix: T.Tensor((rows,), T.int32)):
        with T.Kernel(rows // 4, threads=128) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            r = bx * 4 + tx // 32
            bv = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            bi = T.alloc_var(T.int32, init=n)
            for c in T.serial(lane, n, 32):
                v = X[r, c]
                if v > bv:
                    bv = v
                    bi = c
            off = T.alloc_var(T.int32, init=16)
            while off >= 1:
                ov = T.shfl_xor(bv, off)
                oi = T.shfl_xor(bi, off)
                if ov > bv or (ov == bv and oi < bi):
                    bv = ov
                    bi = oi
                off = off >> 1
            if lane == 0:
                Mx[r] = bv
                Ix[r] = bi

    return main


# ---- a persistent work queue: blocks take chunks by an atomic ticket until none is left --------
@tilelang.jit(out_idx=[2])
def persistent_ticket_queue(n=10000, blocks=8, threads=128):
    """Y = 2 X + 1 by a few persistent blocks: thread 0 takes the next chunk of `threads`
    elements from a global counter (atomic add, previous value), the block reads the chunk's
    start from shared memory and stops once it passes n (TileLang refuses `while True`, so the
    loop runs on a T.alloc_var flag)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Ctr: T.Tensor((1,), T.int32),
             Y: T.Tensor((n,), T.float32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            start = T.alloc_shared((1,), T.int32)
            go = T.alloc_var(T.int32, init=1)
            while go == 1:
                if tx == 0:
                    start[0] = T.atomic_add(Ctr[0], threads, return_prev=True)
                T.sync_threads()
                b = start[0]
                T.sync_threads()
                if b >= n:
                    go = 0
                elif b + tx < n:
                    Y[b + tx] = X[b + tx] * 2.0 + 1.0

    return main


# ---- label propagation until stable: a while loop on a shared "changed" flag -----------------
@tilelang.jit(out_idx=[2])
def label_propagation_until_stable(n=512):
    """Connected components of a graph on n vertices given as neighbour lists (Nbr[v, k], -1 for
    none, up to 4 each): every vertex takes the minimum label among itself and its neighbours,
    one round per iteration (read all, barrier, write), until a round changes nothing -- the
    loop's T.alloc_var reads a shared flag the round's writers set."""

    @T.prim_func
    def main(L0: T.Tensor((n,), T.int32), Nbr: T.Tensor((n, 4), T.int32),
             L: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n) as bx:
            tx = T.get_thread_binding()
            lab = T.alloc_shared((n,), T.int32)
            changed = T.alloc_shared((1,), T.int32)
            nb = T.alloc_local((4,), T.int32)
            for k in T.unroll(4):
                nb[k] = Nbr[tx, k]
            lab[tx] = L0[tx]
            go = T.alloc_var(T.int32, init=1)
            while go != 0:
                if tx == 0:
                    changed[0] = 0
                T.sync_threads()
                m = T.alloc_var(T.int32)
                m = lab[tx]
                for k in T.unroll(4):
                    if nb[k] >= 0:
                        m = T.min(m, lab[nb[k]])
                T.sync_threads()
                if m < lab[tx]:
                    lab[tx] = m
                    changed[0] = 1
                T.sync_threads()
                go = changed[0]
                T.sync_threads()
            L[tx] = lab[tx]

    return main


# ---- a producer warp hands chunks to a consumer warp through shared flags --------------------
@tilelang.jit(out_idx=[1])
def warp_handoff_shared_flags(chunks=16, slots=2):
    """Row sums of `chunks` rows of 32 floats by two warps of one block with no block barrier
    in the loop: warp 0 writes row c into ring slot c % slots once the consumer has released
    the slot (acquire loads of Done[s]), then publishes Full[s] = c + 1 (a release store on a
    shared flag); warp 1 spins on Full[s] (acquire), reduces the slot by shuffles and releases
    it (Done[s] = c + 1)."""

    @T.prim_func
    def main(X: T.Tensor((chunks, 32), T.float32), S: T.Tensor((chunks,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            ring = T.alloc_shared((slots, 32), T.float32)
            full = T.alloc_shared((slots,), T.int32)
            done = T.alloc_shared((slots,), T.int32)
            if tx < slots:
                full[tx] = 0
                done[tx] = 0
            T.sync_threads()
            if tx < 32:
                for c in T.serial(chunks):
                    s = c % slots
                    if c >= slots:
                        while T.atomic_load(done[s], memory_order="acquire") != c - slots + 1:
                            pass
                    ring[s, lane] = X[c, lane]
                    T.sync_warp()
                    if lane == 0:
                        T.atomic_store(full[s], c + 1, memory_order="release")
            else:
                for c in T.serial(chunks):
                    s = c % slots
                    while T.atomic_load(full[s], memory_order="acquire") != c + 1:
                        pass
                    v = T.alloc_var(T.float32)
                    v = ring[s, lane]
                    for o in T.unroll(5):
                        v += T.shfl_xor(v, 16 >> o)
                    T.sync_warp()
                    if lane == 0:
                        S[c] = v
                        T.atomic_store(done[s], c + 1, memory_order="release")

    return main
