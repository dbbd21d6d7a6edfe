"""A fifty-seventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): scans, sorts, histograms and stencils -- a 3-d 7-point stencil that marches in z
with the column below / at / above held in registers and the xy plane in a haloed shared
tile; a 3-d stencil that copies the three haloed planes of each step into a 3-d shared tile
under T.Pipelined and computes on a T.Parallel tile; CSR SpMM with a warp per row (the row's
nonzeros walked by a serial loop whose bounds are read from the row pointers); a bfloat16
CSR SpMV with a warp per row (a while loop over a cursor) reduced by T.shfl_down; one stable
block-local radix pass (a one-hot (16, block) shared matrix scanned by T.cumsum along dim 1
gives each key its rank among keys of its digit); a segmented inclusive scan across blocks,
chained by tickets, release stores and an acquire-polling loop; a decoupled look-back scan
whose flag and value share one int64 status word (64-bit release stores and acquire loads)
and its form with a warp-wide look-back window (T.ballot masks, T.__ffs, T.shfl_xor); and a
warp-aggregated histogram (T.match_any_sync peers, the lowest adds T.popcount of them); and
a radix pass's digit counts and scatter offsets in one launch (the block that takes the last
ticket of an acq_rel T.atomic_add scans every block's counts, read by relaxed atomic loads).

``tests/test_unseen_programs57.py`` builds each to a cubin on the CPU, checks what decides
the result in the generated source, and on a GPU compares it with torch.  The file reads as
TileLang after swapping its two import lines."""

import tilecute as tilelang
import tilecute.language as T


@tilelang.jit(out_idx=[1])
def stencil3d_7pt_zmarch(D=12, H=40, W=70, bh=8, bw=32, c0=-6.0, c1=1.0):
    """Y = c0 * X + c1 * (sum of the six face neighbours), zero outside the volume.  A block
    owns a (bh, bw) column of the volume and marches k from 0 to D - 1: the thread's own
    column below / at / above k lives in registers, the plane k with a one-point halo is
    loaded into shared memory for the four in-plane neighbours."""
    threads = bh * bw
    PH, PW = bh + 2, bw + 2
    loads = T.ceildiv(PH * PW, threads)

    @T.prim_func
    def main(X: T.Tensor((D, H, W), T.float32), Y: T.Tensor((D, H, W), T.float32)):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=threads) as (bx, by):
            tx = T.get_thread_binding()
            r = tx // bw
            c = tx % bw
            i = by * bh + r
            j = bx * bw + c
            plane = T.alloc_shared((PH, PW), T.float32)
            below = T.alloc_var(T.float32, init=0.0)
            center = T.alloc_var(T.float32, init=0.0)
            above = T.alloc_var(T.float32, init=0.0)
            if i < H and j < W:
                center = X[0, i, j]
            for k in T.serial(D):
                for e in T.serial(loads):
                    idx = e * threads + tx
                    if idx < PH * PW:
                        gi = by * bh + idx // PW - 1
                        gj = bx * bw + idx % PW - 1
                        if gi >= 0 and gi < H and gj >= 0 and gj < W:
                            plane[idx // PW, idx % PW] = X[k, gi, gj]
                        else:
                            plane[idx // PW, idx % PW] = 0.0
                T.sync_threads()
                above = 0.0
                if k + 1 < D and i < H and j < W:
                    above = X[k + 1, i, j]
                if i < H and j < W:
                    Y[k, i, j] = c0 * center + c1 * (below + above + plane[r, c + 1] + plane[r + 2, c + 1]
                                                     + plane[r + 1, c] + plane[r + 1, c + 2])
                T.sync_threads()
                below = center
                center = above

    return main


@tilelang.jit(out_idx=[4])
def csr_spmm_warp_per_row(M=300, K=200, N=64, nnz=2400, threads=128):
    """C = A @ B, A in CSR (RowPtr, Col, Val), B dense (K, N).  A warp per row: lane l owns
    columns l, l + 32, ... of the row's output; the row's nonzeros are walked by T.serial
    between RowPtr[row] and RowPtr[row + 1]."""
    warps = threads // 32
    per = N // 32

    @T.prim_func
    def main(RowPtr: T.Tensor((M + 1,), T.int32), Col: T.Tensor((nnz,), T.int32),
             Val: T.Tensor((nnz,), T.float32), B: T.Tensor((K, N), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = bx * warps + tx // 32
            acc = T.alloc_local((per,), T.float32)
            if row < M:
                for q in T.unroll(per):
                    acc[q] = 0.0
                for p in T.serial(RowPtr[row], RowPtr[row + 1]):
                    col = Col[p]
                    v = Val[p]
                    for q in T.unroll(per):
                        acc[q] += v * B[col, lane + 32 * q]
                for q in T.unroll(per):
                    C[row, lane + 32 * q] = acc[q]

    return main


@tilelang.jit(out_idx=[4])
def csr_spmv_warp_shfl(M=500, K=300, nnz=6000, threads=256):
    """y = A @ x, A in CSR with bfloat16 values, x bfloat16, y float32.  A warp per row (the
    row index clamped by T.min so every lane of a spare warp still shuffles): lane l sums
    nonzeros l, l + 32, ... of the row in float32 by a while loop over a T.alloc_var
    cursor, then the warp's 32 partial sums are folded by T.shfl_down (16, 8, 4, 2, 1) and
    lane 0 writes the row."""
    warps = threads // 32

    @T.prim_func
    def main(RowPtr: T.Tensor((M + 1,), T.int32), Col: T.Tensor((nnz,), T.int32),
             Val: T.Tensor((nnz,), T.bfloat16), Xv: T.Tensor((K,), T.bfloat16),
             Yv: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = T.min(bx * warps + tx // 32, M - 1)
            s = T.alloc_var(T.float32, init=0.0)
            start = RowPtr[row]
            end = RowPtr[row + 1]
            p = T.alloc_var(T.int32, init=start + lane)
            while p < end:
                s += T.cast(Val[p], T.float32) * T.cast(Xv[Col[p]], T.float32)
                p += 32
            for t in T.unroll(5):
                s += T.shfl_down(s, 16 >> t)
            if lane == 0 and bx * warps + tx // 32 < M:
                Yv[row] = s

    return main


@tilelang.jit(out_idx=[1, 2])
def radix_pass_onehot_cumsum(n=1024, block=256, shift=4):
    """One stable radix pass over 4-bit digits, block-local: block b reorders its `block`
    keys by digit (key >> shift) & 15, keeping equal digits in input order, and writes its
    16 digit counts.  Each key's rank among keys of its digit is read from a one-hot (16,
    block) shared matrix scanned by T.cumsum along dim 1; the digits' starts are an
    exclusive scan of the counts by thread 0."""
    tiles = n // block

    @T.prim_func
    def main(Keys: T.Tensor((n,), T.int32), Out: T.Tensor((n,), T.int32),
             Counts: T.Tensor((tiles, 16), T.int32)):
        with T.Kernel(tiles, threads=block) as bx:
            tx = T.get_thread_binding()
            onehot = T.alloc_shared((16, block), T.int32)
            start = T.alloc_shared((16,), T.int32)
            key = Keys[bx * block + tx]
            d = (key >> shift) & 15
            for q in T.serial(16):
                onehot[q, tx] = T.if_then_else(q == d, 1, 0)
            T.sync_threads()
            T.cumsum(onehot, dim=1)
            T.sync_threads()
            if tx == 0:
                run = T.alloc_var(T.int32, init=0)
                for q in T.serial(16):
                    start[q] = run
                    Counts[bx, q] = onehot[q, block - 1]
                    run += onehot[q, block - 1]
            T.sync_threads()
            Out[bx * block + start[d] + onehot[d, tx] - 1] = key

    return main


@tilelang.jit(out_idx=[2])
def chained_segmented_scan(n=4096, block=256):
    """Inclusive segmented sum of X (a segment starts where Head is 1) in one pass over all
    blocks.  A block takes its tile by a ticket (T.atomic_add returning the old count),
    scans it in shared memory with the segmented operator
    (a, fa) + (b, fb) = (fb ? b : a + b, fa | fb), then thread 0 polls its predecessor's
    flag with acquire loads, takes its inclusive value as the carry, publishes its own
    inclusive last value with a release store, and the carry is added to the elements
    before the block's first head.  Flags and the ticket start at zero (the caller)."""
    tiles = n // block

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Head: T.Tensor((n,), T.int32),
             Y: T.Tensor((n,), T.float32), Flag: T.Tensor((tiles,), T.int32),
             Last: T.Tensor((tiles,), T.float32), Ticket: T.Tensor((1,), T.int32)):
        with T.Kernel(tiles, threads=block) as bx:
            tx = T.get_thread_binding()
            tile_s = T.alloc_shared((1,), T.int32)
            carry_s = T.alloc_shared((1,), T.float32)
            val = T.alloc_shared((block,), T.float32)
            flg = T.alloc_shared((block,), T.int32)
            if tx == 0:
                tile_s[0] = T.atomic_add(Ticket[0], 1, return_prev=True)
            T.sync_threads()
            tile = tile_s[0]
            val[tx] = X[tile * block + tx]
            flg[tx] = Head[tile * block + tx]
            T.sync_threads()
            off = T.alloc_var(T.int32, init=1)
            while off < block:
                v = T.alloc_var(T.float32)
                f = T.alloc_var(T.int32)
                v = val[tx]
                f = flg[tx]
                if tx >= off:
                    if f == 0:
                        v = v + val[tx - off]
                    f = f | flg[tx - off]
                T.sync_threads()
                val[tx] = v
                flg[tx] = f
                T.sync_threads()
                off = off * 2
            if tx == 0:
                carry = T.alloc_var(T.float32, init=0.0)
                if tile > 0:
                    ready = T.alloc_var(T.int32, init=0)
                    while ready == 0:
                        ready = T.atomic_load(Flag[tile - 1], memory_order="acquire")
                    carry = Last[tile - 1]
                carry_s[0] = carry
                Last[tile] = val[block - 1] + T.if_then_else(flg[block - 1] == 0, carry, 0.0)
                T.atomic_store(Flag[tile], 1, memory_order="release")
            T.sync_threads()
            Y[tile * block + tx] = val[tx] + T.if_then_else(flg[tx] == 0, carry_s[0], 0.0)

    return main


@T.macro
def _scan_next_tile(X, Ticket, tile_s, buf, tx, block):
    """Take the next tile by a ticket (T.atomic_add returning the old count, so tiles are
    taken in launch order) into tile_s[0], load it into buf and scan it in place."""
    if tx == 0:
        tile_s[0] = T.atomic_add(Ticket[0], 1, return_prev=True)
    T.sync_threads()
    buf[tx] = X[tile_s[0] * block + tx]
    T.sync_threads()
    T.cumsum(buf, dim=0)
    T.sync_threads()


@tilelang.jit(out_idx=[1])
def lookback_scan_packed_status(n=8192, block=256):
    """Inclusive prefix sum of int32 in one pass with decoupled look-back, each tile's status
    one int64 word: flag in the high half (1 aggregate, 2 inclusive prefix), the value's 32
    bits in the low half, so a flag and its value are published and read together by one
    64-bit release store / acquire load.  Thread 0 walks back over the predecessors, waiting
    while a word is 0.  Status and the ticket start at zero (the caller)."""
    tiles = n // block

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), Y: T.Tensor((n,), T.int32),
             Status: T.Tensor((tiles,), T.int64), Ticket: T.Tensor((1,), T.int32)):
        with T.Kernel(tiles, threads=block) as bx:
            tx = T.get_thread_binding()
            tile_s = T.alloc_shared((1,), T.int32)
            excl_s = T.alloc_shared((1,), T.int32)
            buf = T.alloc_shared((block,), T.int32)
            _scan_next_tile(X, Ticket, tile_s, buf, tx, block)
            tile = tile_s[0]
            if tx == 0:
                agg = buf[block - 1]
                low = T.cast(agg, T.int64) & 0xFFFFFFFF
                excl = T.alloc_var(T.int32, init=0)
                if tile == 0:
                    T.atomic_store(Status[tile], (T.int64(2) << 32) | low, memory_order="release")
                else:
                    T.atomic_store(Status[tile], (T.int64(1) << 32) | low, memory_order="release")
                    p = T.alloc_var(T.int32, init=tile - 1)
                    going = T.alloc_var(T.int32, init=1)
                    while going == 1:
                        word = T.alloc_var(T.int64)
                        word = T.atomic_load(Status[p], memory_order="acquire")
                        flag = T.cast(word >> 32, T.int32)
                        if flag != 0:
                            excl += T.cast(word & 0xFFFFFFFF, T.int32)
                            if flag == 2:
                                going = 0
                            else:
                                p -= 1
                    incl = T.cast(excl + agg, T.int64) & 0xFFFFFFFF
                    T.atomic_store(Status[tile], (T.int64(2) << 32) | incl, memory_order="release")
                excl_s[0] = excl
            T.sync_threads()
            Y[tile * block + tx] = buf[tx] + excl_s[0]

    return main


@tilelang.jit(out_idx=[1])
def stencil3d_pipelined_planes(D=16, H=64, W=96, bh=16, bw=32, threads=128, stages=2):
    """Y[k, i, j] = 7-point Laplacian of X at (k + 1, i + 1, j + 1), X padded by one point on
    every side ((D + 2, H + 2, W + 2)), so no copy leaves the tensor.  A block owns a (bh, bw)
    column and walks k under T.Pipelined, copying the three haloed planes k .. k + 2 into a
    3-d shared tile per step; T.Parallel over the (bh, bw) tile does the arithmetic."""

    @T.prim_func
    def main(X: T.Tensor((D + 2, H + 2, W + 2), T.float32), Y: T.Tensor((D, H, W), T.float32)):
        with T.Kernel(W // bw, H // bh, threads=threads) as (bx, by):
            planes = T.alloc_shared((3, bh + 2, bw + 2), T.float32)
            out = T.alloc_fragment((bh, bw), T.float32)
            for k in T.Pipelined(D, num_stages=stages):
                T.copy(X[k:k + 3, by * bh:by * bh + bh + 2, bx * bw:bx * bw + bw + 2], planes)
                for i, j in T.Parallel(bh, bw):
                    out[i, j] = (planes[0, i + 1, j + 1] + planes[2, i + 1, j + 1] + planes[1, i, j + 1]
                                 + planes[1, i + 2, j + 1] + planes[1, i + 1, j] + planes[1, i + 1, j + 2]
                                 - 6.0 * planes[1, i + 1, j + 1])
                T.copy(out, Y[k, by * bh, bx * bw])

    return main


@tilelang.jit(out_idx=[1])
def warp_aggregated_histogram(n=20000, bins=64, threads=256, per_block=2048):
    """Counts of X (values in [0, 1)) over `bins` equal bins.  Each step a warp's lanes find
    the lanes holding the same bin by T.match_any_sync; only the lowest of them (T.__ffs of
    the peer mask) adds the group's size (T.popcount) to the block's shared histogram, which
    is then added to the global one by atomics.  Lanes past n take bin -1 and still join the
    match (it needs the whole warp)."""

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), H: T.Tensor((bins,), T.int32)):
        with T.Kernel(T.ceildiv(n, per_block), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            hist = T.alloc_shared((bins,), T.int32)
            for q in T.serial(T.ceildiv(bins, threads)):
                if q * threads + tx < bins:
                    hist[q * threads + tx] = 0
            T.sync_threads()
            for it in T.serial(per_block // threads):
                idx = bx * per_block + it * threads + tx
                b = T.alloc_var(T.int32, init=-1)
                if idx < n:
                    b = T.min(T.cast(X[idx] * bins, T.int32), bins - 1)
                peers = T.match_any_sync(b)
                if b >= 0 and T.__ffs(peers) - 1 == lane:
                    T.atomic_add(hist[b], T.cast(T.popcount(peers), T.int32))
            T.sync_threads()
            for q in T.serial(T.ceildiv(bins, threads)):
                if q * threads + tx < bins:
                    if hist[q * threads + tx] > 0:
                        T.atomic_add(H[q * threads + tx], hist[q * threads + tx])

    return main


@tilelang.jit(out_idx=[1])
def warp_window_lookback_scan(n=16384, block=256):
    """Inclusive int32 prefix sum in one pass with a look-back done by a whole warp: lane l
    reads (acquire) the int64 status word of tile base - l (flag << 32 | value bits; before
    tile 0 counts as an inclusive 0), T.ballot of "inclusive" and of "not yet published"
    (uint64 masks) decide whether the window is usable: the nearest inclusive lane is
    T.__ffs of the first mask, and every lane up to it (all 32 when none) must be published.
    A usable window's values up to that lane are summed by T.shfl_xor; with no inclusive
    lane the window moves 32 tiles back, else the walk ends; an unusable one is read again."""
    tiles = n // block

    @T.prim_func
    def main(X: T.Tensor((n,), T.int32), Y: T.Tensor((n,), T.int32),
             Status: T.Tensor((tiles,), T.int64), Ticket: T.Tensor((1,), T.int32)):
        with T.Kernel(tiles, threads=block) as bx:
            tx = T.get_thread_binding()
            tile_s = T.alloc_shared((1,), T.int32)
            excl_s = T.alloc_shared((1,), T.int32)
            buf = T.alloc_shared((block,), T.int32)
            _scan_next_tile(X, Ticket, tile_s, buf, tx, block)
            tile = tile_s[0]
            if tx < 32:
                agg = buf[block - 1]
                excl = T.alloc_var(T.int32, init=0)
                if tile > 0:
                    if tx == 0:
                        T.atomic_store(Status[tile], (T.int64(1) << 32) | (T.cast(agg, T.int64) & 0xFFFFFFFF),
                                       memory_order="release")
                    base = T.alloc_var(T.int32, init=tile - 1)
                    going = T.alloc_var(T.int32, init=1)
                    while going == 1:
                        word = T.alloc_var(T.int64)
                        word = T.int64(2) << 32
                        if base - tx >= 0:
                            word = T.atomic_load(Status[base - tx], memory_order="acquire")
                        flag = T.cast(word >> 32, T.int32)
                        incl = T.ballot(flag == 2)
                        unset = T.ballot(flag == 0)
                        stop = T.__ffs(incl)
                        upto = T.if_then_else(stop == 0, T.uint64(0xFFFFFFFF),
                                              (T.uint64(1) << T.cast(stop, T.uint64)) - T.uint64(1))
                        if (unset & upto) == T.uint64(0):
                            part = T.alloc_var(T.int32)
                            part = 0
                            if stop == 0 or tx < stop:
                                part = T.cast(word & 0xFFFFFFFF, T.int32)
                            for t in T.unroll(5):
                                part += T.shfl_xor(part, 16 >> t)
                            excl += part
                            if stop != 0:
                                going = 0
                            else:
                                base -= 32
                if tx == 0:
                    T.atomic_store(Status[tile],
                                   (T.int64(2) << 32) | (T.cast(excl + agg, T.int64) & 0xFFFFFFFF),
                                   memory_order="release")
                    excl_s[0] = excl
            T.sync_threads()
            Y[tile * block + tx] = buf[tx] + excl_s[0]

    return main


@tilelang.jit(out_idx=[1, 2])
def radix_offsets_last_block(n=16384, block=256, per_thread=4, shift=4):
    """One radix pass's digit counts and scatter offsets in one launch: block b counts the 4-bit
    digits (key >> shift) & 15 of its block * per_thread keys with shared atomics and writes
    Counts[b, :]; thread 0 then takes a ticket with an acq_rel T.atomic_add (after a barrier,
    so the block's count stores come before it) and the block that takes the last ticket
    computes Offsets[b, d] = (keys of digits below d) + (keys of digit d in blocks below b),
    where a stable scatter of block b's keys of digit d starts.  Done starts at zero."""
    per_block = block * per_thread
    blocks = n // per_block

    @T.prim_func
    def main(Keys: T.Tensor((n,), T.int32), Counts: T.Tensor((blocks, 16), T.int32),
             Offsets: T.Tensor((blocks, 16), T.int32), Done: T.Tensor((1,), T.int32)):
        with T.Kernel(blocks, threads=block) as bx:
            tx = T.get_thread_binding()
            cnt = T.alloc_shared((16,), T.int32)
            tot = T.alloc_shared((16,), T.int32)
            last = T.alloc_shared((1,), T.int32)
            if tx < 16:
                cnt[tx] = 0
            T.sync_threads()
            for e in T.unroll(per_thread):
                key = Keys[bx * per_block + e * block + tx]
                T.atomic_add(cnt[(key >> shift) & 15], 1)
            T.sync_threads()
            if tx < 16:
                Counts[bx, tx] = cnt[tx]
            T.sync_threads()
            if tx == 0:
                ticket = T.atomic_add(Done[0], 1, memory_order="acq_rel", return_prev=True)
                last[0] = T.if_then_else(ticket == blocks - 1, 1, 0)
            T.sync_threads()
            if last[0] == 1:
                if tx < 16:
                    run = T.alloc_var(T.int32, init=0)
                    for b in T.serial(blocks):
                        c = T.atomic_load(Counts[b, tx], memory_order="relaxed")
                        Offsets[b, tx] = run
                        run += c
                    tot[tx] = run
                T.sync_threads()
                if tx < 16:
                    below = T.alloc_var(T.int32, init=0)
                    for d in T.serial(tx):
                        below += tot[d]
                    for b in T.serial(blocks):
                        Offsets[b, tx] += below

    return main
