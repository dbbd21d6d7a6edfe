"""GEMM on tensor cores, written the TileLang way: ``Y = X @ W`` (and its transposed
forms) with TMA loads into swizzled shared tiles, ``T.Pipelined`` multi-buffering, and
``T.gemm`` on wgmma (sm_90a) or mma.sync (sm_80).

    matmul(tm, tn, tk, stages, threads, dtype, transpose_A, transpose_B, out_dtype)
        a kernel factory: block sizes and stages are the knobs an autotuner turns
    matmul_bias_relu(...)
        the same main loop with an epilogue fused on the accumulator fragment
    matmul_a_registers(...), matmul_chain(...)
        A read from registers (wgmma's RS form): scaled on the way, or the accumulator
        of a first T.gemm

Run on a GPU: ``python3 examples/gemm.py`` (checks against torch.matmul).
"""

import tilecute
import tilecute.language as T

ESIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3": 1, "float8_e5m2": 1}


def _dims(dtype, out_dtype):
    # TMA strides must be multiples of 16 bytes: row lengths are declared so
    inner = max(1, 16 // ESIZE[dtype])
    out = max(1, 16 // ESIZE[out_dtype])
    return T.symbolic("M"), T.symbolic("N", multiple_of=max(inner, out)), \
        T.symbolic("K", multiple_of=inner)


def matmul(tm=128, tn=128, tk=64, stages=3, threads=256, dtype="float16",
           transpose_A=False, transpose_B=False, out_dtype=None, panel=0, epilogue="direct",
           warp_specialize=None, cluster=None):
    """Y (M, N) = A @ B with A = X (M, K), or X^T for X (K, M) when ``transpose_A``, and
    B = W (K, N), or W^T for W (N, K) when ``transpose_B``; fp32 accumulation, ``Y`` in
    ``out_dtype`` (the input dtype by default).  One (tm, tn) tile per block; with
    ``panel`` > 0 the blocks walk the tiles in panels of that many rows
    (``T.use_swizzle``), so blocks running at once share tiles of W in L2.
    ``epilogue="shared"`` writes the tile through a swizzled shared buffer and TMA
    stores instead of straight from registers.  ``warp_specialize`` (sm_90a) adds a
    producer warpgroup that issues the TMA loads, so the ``threads`` only compute; ``None``
    lets the TMA pass decide (on when the tile's shared memory keeps one block per SM).
    ``cluster``: the blocks launch in clusters of this shape, e.g. ``(1, 2, 1)``: two
    blocks of one column of tiles, which share their W tiles (TMA multicast: each W tile
    leaves L2 once for both)."""
    out_dtype = out_dtype or ("float16" if dtype.startswith("float8") else dtype)
    M, N, K = _dims(dtype, out_dtype)
    xshape, xtile = ((K, M), (tk, tm)) if transpose_A else ((M, K), (tm, tk))
    wshape, wtile = ((N, K), (tn, tk)) if transpose_B else ((K, N), (tk, tn))

    @T.prim_func
    def matmul(X: T.Tensor(xshape, dtype), W: T.Tensor(wshape, dtype),
               Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), threads=threads,
                      cluster=cluster) as (col, row):
            if panel:
                T.use_swizzle(panel)
            xs = T.alloc_shared(xtile, dtype)
            ws = T.alloc_shared(wtile, dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            if epilogue == "shared":
                ys = T.alloc_shared((tm, tn), out_dtype,
                                    layout=T.Layout("tma_swizzled", swizzle=128))
            T.clear(acc)
            for step in T.Pipelined(T.ceildiv(K, tk), num_stages=stages,
                                    warp_specialize=warp_specialize):
                if transpose_A:
                    T.copy(X[step * tk, row * tm], xs)
                else:
                    T.copy(X[row * tm, step * tk], xs)
                if transpose_B:
                    T.copy(W[col * tn, step * tk], ws)
                else:
                    T.copy(W[step * tk, col * tn], ws)
                T.gemm(xs, ws, acc, transpose_A=transpose_A, transpose_B=transpose_B)
            if epilogue == "shared":
                T.copy(acc, ys)
                T.copy(ys, Y[row * tm, col * tn])
            else:
                T.copy(acc, Y[row * tm, col * tn])

    return matmul


def matmul_bias_relu(tm=128, tn=128, tk=64, stages=3, threads=256, dtype="float16",
                     warp_specialize=None):
    """Y = relu(X @ W + bias) with the bias and relu applied to the accumulator in the
    same kernel (a T.Parallel loop over the fragment)."""
    M, N, K = _dims(dtype, dtype)

    @T.prim_func
    def matmul_bias_relu(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype),
                         bias: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), threads=threads) as (col, row):
            xs = T.alloc_shared((tm, tk), dtype)
            ws = T.alloc_shared((tk, tn), dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            T.clear(acc)
            for step in T.Pipelined(T.ceildiv(K, tk), num_stages=stages,
                                    warp_specialize=warp_specialize):
                T.copy(X[row * tm, step * tk], xs)
                T.copy(W[step * tk, col * tn], ws)
                T.gemm(xs, ws, acc)
            for i, j in T.Parallel(tm, tn):
                Y[row * tm + i, col * tn + j] = T.max(
                    acc[i, j] + T.Cast("float32", bias[col * tn + j]), 0.0)

    return matmul_bias_relu


def matmul_a_registers(tm=128, tn=128, tk=64, stages=3, threads=256, dtype="float16",
                       warp_specialize=None):
    """Y = (X * scale[k]) @ W: each A tile goes from shared memory to registers with its
    columns scaled there, and wgmma reads A from registers (its RS form)."""
    M, N, K = _dims(dtype, dtype)

    @T.prim_func
    def matmul_a_registers(X: T.Tensor((M, K), dtype), scale: T.Tensor((K,), dtype),
                           W: T.Tensor((K, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), threads=threads) as (col, row):
            # swizzled like an MMA operand, so the threads' reads into registers spread
            # over the banks (TMA writes it so)
            xs = T.alloc_shared((tm, tk), dtype, layout=T.Layout("tma_swizzled", swizzle=128))
            ss = T.alloc_shared((tk,), dtype)
            ws = T.alloc_shared((tk, tn), dtype)
            xr = T.alloc_fragment((tm, tk), dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            T.clear(acc)
            for step in T.Pipelined(T.ceildiv(K, tk), num_stages=stages,
                                    warp_specialize=warp_specialize):
                T.copy(X[row * tm, step * tk], xs)
                T.copy(scale[step * tk], ss)  # the step's scales arrive with its tiles
                T.copy(W[step * tk, col * tn], ws)
                for i, k in T.Parallel(tm, tk):
                    xr[i, k] = xs[i, k] * ss[k]
                T.gemm(xr, ws, acc)
            T.copy(acc, Y[row * tm, col * tn])

    return matmul_a_registers


def matmul_chain(tm=64, n1=64, tn=128, tk=64, threads=128, dtype="float16"):
    """Y = (X @ W1) @ W2 with the (tm, n1) intermediate never leaving registers: the first
    T.gemm's accumulator is cast into an A fragment of the second (the way attention
    kernels feed P = softmax(S) to P @ V).  X (M, K), W1 (K, n1), W2 (n1, N)."""
    M, N, K = _dims(dtype, dtype)

    @T.prim_func
    def matmul_chain(X: T.Tensor((M, K), dtype), W1: T.Tensor((K, n1), dtype),
                     W2: T.Tensor((n1, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, tm), threads=threads) as (col, row):
            xs = T.alloc_shared((tm, tk), dtype)
            w1s = T.alloc_shared((tk, n1), dtype)
            w2s = T.alloc_shared((n1, tn), dtype)
            s = T.alloc_fragment((tm, n1), "float32")
            p = T.alloc_fragment((tm, n1), dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            T.clear(s)
            for step in T.Pipelined(T.ceildiv(K, tk), num_stages=2):
                T.copy(X[row * tm, step * tk], xs)
                T.copy(W1[step * tk, 0], w1s)
                T.gemm(xs, w1s, s)
            T.copy(W2[0, col * tn], w2s)
            for i, j in T.Parallel(tm, n1):
                p[i, j] = T.Cast(dtype, s[i, j])
            T.gemm(p, w2s, acc, clear_accum=True)
            T.copy(acc, Y[row * tm, col * tn])

    return matmul_chain


def matmul_persistent(tm=128, tn=256, tk=64, stages=3, threads=256, dtype="float16",
                      sms=132, group=8, swizzled_epilogue=True, warp_specialize=None):
    """Y = X @ W by a persistent kernel, as TileLang writes one: ``sms`` blocks (one per
    SM) walk the output tiles with ``T.Persistent`` (groups of ``group`` tile columns),
    each tile's K loop pipelined.  The producer warpgroup loads the next tile's first
    stages while the compute warpgroups store the last tile (through ``Y_s`` and a TMA
    store).  ``swizzled_epilogue``: ``Y_s`` in the 128-byte swizzle (fewer bank
    conflicts as the accumulator's rows are written)."""
    M, N, K = _dims(dtype, dtype)

    @T.prim_func
    def matmul_persistent(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype),
                          Y: T.Tensor((M, N), dtype)):
        with T.Kernel(sms, threads=threads) as block_id:
            xs = T.alloc_shared((tm, tk), dtype)
            ws = T.alloc_shared((tk, tn), dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            if swizzled_epilogue:
                ys = T.alloc_shared((tm, tn), dtype, layout=T.Layout("tma_swizzled", swizzle=128))
            else:
                ys = T.alloc_shared((tm, tn), dtype)
            for row, col in T.Persistent([T.ceildiv(M, tm), T.ceildiv(N, tn)], sms, block_id,
                                         group):
                T.clear(acc)
                for step in T.Pipelined(T.ceildiv(K, tk), num_stages=stages,
                                        warp_specialize=warp_specialize):
                    T.copy(X[row * tm, step * tk], xs)
                    T.copy(W[step * tk, col * tn], ws)
                    T.gemm(xs, ws, acc)
                T.copy(acc, ys)
                T.copy(ys, Y[row * tm, col * tn])

    return matmul_persistent


def streamk_plan(M, N, K, tm=128, tn=256, tk=64, sms=132, group=8, sk_waves=1):
    """What :func:`matmul_streamk`'s blocks do, computed on the host as the kernel computes
    it: ``plan[b]`` is block ``b``'s units in order, each ``(tile, row, col, k_lo, k_hi,
    s)``: output tile ``tile`` at tile coordinates ``(row, col)``, its K steps ``[k_lo,
    k_hi)``, and ``s = tile - full`` its stream-K slot (negative in the data-parallel
    waves).  For tests and for reading the split."""
    m_tiles, n_tiles, ipt = -(-M // tm), -(-N // tn), -(-K // tk)
    tiles = m_tiles * n_tiles
    dp_waves = max(tiles // sms - sk_waves, 0)
    full = dp_waves * sms
    q, r = divmod((tiles - full) * ipt, sms)
    plan = []
    for b in range(sms):
        lo = b * q + min(b, r)
        hi = lo + q + (1 if b < r else 0)
        segs = (hi - 1) // ipt - lo // ipt + 1 if hi > lo else 0
        units = []
        for u in range(dp_waves + segs):
            sk = u >= dp_waves
            s = lo // ipt + u - dp_waves
            t = full + s if sk else b + u * sms
            k_lo, k_hi = (max(lo - s * ipt, 0), min(hi - s * ipt, ipt)) if sk else (0, ipt)
            g = t // (m_tiles * group)
            width = min(group, n_tiles - g * group)
            w = t % (m_tiles * group)
            units.append((t, w // width, g * group + w % width, k_lo, k_hi, t - full))
        plan.append(units)
    return plan


def matmul_streamk(tm=128, tn=256, tk=64, stages=3, threads=256, dtype="float16", sms=132,
                   group=8, sk_waves=1):
    """Y = X @ W by a persistent kernel that splits the last waves' K loops over the
    blocks (CUTLASS's "data-parallel + stream-K" hybrid), against wave quantization.  Of
    the ``tiles`` output tiles, the first ``full = (tiles // sms - sk_waves) * sms`` are
    walked whole, wave by wave, as :func:`matmul_persistent` walks them (tile ``block_id +
    u * sms``, columns in groups of ``group``); the K steps of the ``rest = tiles - full``
    tiles left (with ``sk_waves=1``, CUTLASS's choice, ``sms`` to ``2 * sms - 1`` of them;
    with 0 only the partial wave's ``tiles % sms``; all tiles where ``tiles < sms``) are
    dealt out evenly: concatenated tile after tile (``rest * ceildiv(K, tk)`` steps), block
    ``b`` takes steps ``[b * q + min(b, r), ...)`` (``q, r = divmod(steps, sms)``), which
    span a few tiles.  Both phases are one loop over the block's units (a tile and a K
    range) around one ``T.Pipelined(k_lo, k_hi)`` with run-time bounds: the producer
    warpgroup's TMA loads and the wgmma main loop are the persistent kernel's, and the
    producer runs on from the data-parallel tiles into the stream-K units without a break.

    A unit that is a whole tile stores it (shared tile, TMA store).  A part of a tile is
    added into the tile's float32 workspace slot ``Ws[s]`` (``s = tile - full``, at most
    ``2 * sms`` slots: the workspace does not grow with M and N, and a slot is a whole
    tile, so the adds need no bounds test: ``red.global.add.v2.f32``, a pair of
    accumulator registers each); then, after a block barrier, one thread adds the unit's
    step count to ``Cnt[s]`` with an ``acq_rel`` atomic that returns the old count (its
    release publishes the block's adds, which the barrier ordered before it; its acquire
    sees every earlier contributor's) and shares the new count through shared memory.  The
    block whose count reaches ``ceildiv(K, tk)`` -- the tile's last contributor to finish,
    whichever it is -- reads the slot back, stores the tile as above, and zeroes the slot
    and its counter, so the next call finds them clean.  Counting steps rather than
    contributors needs no formula for how many blocks share a tile.  Atomics rather than
    a slot per contributor (CUTLASS's separate reduction): no block waits for another (no
    spinning on a flag, nothing assumes all blocks are resident), and the reduction is one
    vector ``red`` per register pair, issued as the tile finishes.

    ``kernel(X, W, Ws, Cnt, Y)`` (``Y`` last: ``out_idx=[-1]`` makes it the result).  ``Ws``
    (``(2 * sms, tm, tn)`` float32) and ``Cnt`` (``(2 * sms,)`` int32) must be zero at the
    first call (``torch.zeros``); each call leaves them zero.  Calls running at the same
    time (other streams) need workspaces of their own."""
    M, N, K = _dims(dtype, dtype)

    @T.macro
    def tile_of(t, m_tiles, n_tiles):
        """Tile ``t``'s (row, col): tile columns in groups of ``group``, a group's columns
        fastest, so the blocks running at once share X rows and W columns in L2."""
        g = t // (m_tiles * group)
        width = T.min(group, n_tiles - g * group)
        w = t % (m_tiles * group)
        return w // width, g * group + w % width

    @T.prim_func
    def matmul_streamk(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype),
                       Ws: T.Tensor((2 * sms, tm, tn), "float32"),
                       Cnt: T.Tensor((2 * sms,), "int32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(sms, threads=threads) as block_id:
            xs = T.alloc_shared((tm, tk), dtype)
            ws = T.alloc_shared((tk, tn), dtype)
            acc = T.alloc_fragment((tm, tn), "float32")
            ys = T.alloc_shared((tm, tn), dtype, layout=T.Layout("tma_swizzled", swizzle=128))
            done = T.alloc_shared((1,), "int32")  # the tile's K steps added so far
            tx = T.get_thread_binding()
            m_tiles, n_tiles, ipt = T.ceildiv(M, tm), T.ceildiv(N, tn), T.ceildiv(K, tk)
            tiles = m_tiles * n_tiles
            dp_waves = T.max(tiles // sms - sk_waves, 0)  # whole waves, walked tile by tile
            full = dp_waves * sms
            q = (tiles - full) * ipt // sms  # stream-K steps per block ...
            r = (tiles - full) * ipt % sms  # ... and one more for the first r blocks
            lo = block_id * q + T.min(block_id, r)
            hi = lo + q + T.if_then_else(block_id < r, 1, 0)
            segs = T.if_then_else(hi > lo, (hi - 1) // ipt - lo // ipt + 1, 0)
            for u in T.serial(dp_waves + segs):
                sk = u >= dp_waves
                s = lo // ipt + u - dp_waves  # the stream-K slot
                t = T.if_then_else(sk, full + s, block_id + u * sms)
                k_lo = T.if_then_else(sk, T.max(lo - s * ipt, 0), 0)
                k_hi = T.if_then_else(sk, T.min(hi - s * ipt, ipt), ipt)
                row, col = tile_of(t, m_tiles, n_tiles)
                T.clear(acc)
                for k in T.Pipelined(k_lo, k_hi, num_stages=stages):
                    T.copy(X[row * tm, k * tk], xs)
                    T.copy(W[k * tk, col * tn], ws)
                    T.gemm(xs, ws, acc)
                if k_hi - k_lo == ipt:
                    T.copy(acc, ys)
                    T.copy(ys, Y[row * tm, col * tn])
                else:
                    T.atomic_add(Ws[s, :, :], acc)
                    T.sync_threads()  # every thread's adds before the count
                    if tx == 0:
                        done[0] = T.atomic_add(Cnt[s], k_hi - k_lo, memory_order="acq_rel",
                                               return_prev=True) + (k_hi - k_lo)
                    T.sync_threads()
                    if done[0] == ipt:  # the tile's last contributor
                        T.copy(Ws[s, :, :], acc)
                        T.copy(acc, ys)
                        T.copy(ys, Y[row * tm, col * tn])
                        T.clear(acc)
                        T.copy(acc, Ws[s, :, :])
                        if tx == 0:
                            Cnt[s] = 0

    return matmul_streamk


def matmul_pingpong(tm=128, tn=128, tk=64, stages=4, dtype="float16", sms=132, group=8):
    """Y = X @ W by CUTLASS's ping-pong schedule, written out with warpgroup regions and
    mbarriers: ``sms`` blocks of three warpgroups walk the output tiles (groups of
    ``group`` tile columns).  Warpgroup 0 loads every tile's K steps, in order, into a ring
    of ``stages`` (``full`` / ``empty`` mbarriers); warpgroups 1 and 2 take the block's
    tiles in turn, each a whole ``tm`` x ``tn`` tile in its registers, so one stores its
    tile (through its own shared tile and a TMA store) while the other's MMAs run.
    ``order`` keeps their K loops in turn: a warpgroup starts waiting on the ring for its
    tile only once the other has issued its whole K loop, so each ``full`` wait is for the
    phase in progress (an mbarrier's parity tells two phases apart, not more)."""
    M, N, K = _dims(dtype, dtype)
    swizzled = T.Layout("tma_swizzled", swizzle=128)

    @T.macro
    def tile_of(i, block_id, m_tiles, n_tiles):
        """The (row, col) of the block's ``i``-th tile: tile ``block_id + i * sms``, tile
        columns in groups of ``group``, rows fastest within a group."""
        t = block_id + i * sms
        g = t // (m_tiles * group)
        width = T.min(group, n_tiles - g * group)
        w = t % (m_tiles * group)
        return w // width, g * group + w % width

    @T.macro
    def consume(X_s, W_s, acc, Y_s, Y, full, empty, order, me, block_id, count, m_tiles,
                n_tiles, k_steps):
        """Warpgroup ``me + 1``: tiles ``me``, ``me + 2``, ... of the block's ``count``."""
        for i in T.serial(me, count, 2):
            if me == 1 or i > 0:  # the other warpgroup has issued its K loop
                T.mbarrier_wait_parity(order[1 - me], (i // 2 - 1 + me) & 1)
            row, col = tile_of(i, block_id, m_tiles, n_tiles)
            for k in T.serial(k_steps):
                n = i * k_steps + k
                T.mbarrier_wait_parity(full[n % stages], (n // stages) & 1)
                T.gemm(X_s[n % stages, :, :], W_s[n % stages, :, :], acc,
                       clear_accum=(k == 0), wg_wait=1)
                if k > 0:  # the step before is done: its stage goes back
                    T.mbarrier_arrive(empty[(n - 1) % stages])
            T.mbarrier_arrive(order[me])
            T.wait_wgmma(0)
            T.mbarrier_arrive(empty[(i * k_steps + k_steps - 1) % stages])
            T.copy(acc, Y_s)
            T.copy(Y_s, Y[row * tm, col * tn])

    @T.prim_func
    def matmul_pingpong(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype),
                        Y: T.Tensor((M, N), dtype)):
        with T.Kernel(sms, threads=384) as block_id:
            X_s = T.alloc_shared((stages, tm, tk), dtype)
            W_s = T.alloc_shared((stages, tk, tn), dtype)
            Y_s0 = T.alloc_shared((tm, tn), dtype, layout=swizzled)
            Y_s1 = T.alloc_shared((tm, tn), dtype, layout=swizzled)
            acc0 = T.alloc_fragment((tm, tn), "float32")
            acc1 = T.alloc_fragment((tm, tn), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            order = T.alloc_barrier([128, 128])
            m_tiles, n_tiles, k_steps = T.ceildiv(M, tm), T.ceildiv(N, tn), T.ceildiv(K, tk)
            count = T.ceildiv(m_tiles * n_tiles - block_id, sms)  # this block's tiles
            with T.ws(0):
                T.set_max_nreg(40, 0)
                for i in T.serial(count):
                    row, col = tile_of(i, block_id, m_tiles, n_tiles)
                    for k in T.serial(k_steps):
                        n = i * k_steps + k
                        T.mbarrier_wait_parity(empty[n % stages], ((n // stages) & 1) ^ 1)
                        T.tma_copy(X[row * tm:(row + 1) * tm, k * tk:(k + 1) * tk],
                                   X_s[n % stages, :, :], barrier=full[n % stages])
                        T.tma_copy(W[k * tk:(k + 1) * tk, col * tn:(col + 1) * tn],
                                   W_s[n % stages, :, :], barrier=full[n % stages])
                        T.mbarrier_arrive(full[n % stages])
            with T.ws(1):
                T.set_max_nreg(232, 1)
                consume(X_s, W_s, acc0, Y_s0, Y, full, empty, order, 0, block_id, count,
                        m_tiles, n_tiles, k_steps)
            with T.ws(2):
                T.set_max_nreg(232, 1)
                consume(X_s, W_s, acc1, Y_s1, Y, full, empty, order, 1, block_id, count,
                        m_tiles, n_tiles, k_steps)

    return matmul_pingpong


@tilecute.jit(out_idx=[-1])
def matmul_kernel(tm=128, tn=128, tk=64, stages=3, threads=256, dtype="float16",
                  warp_specialize=None):
    """``Y = matmul_kernel(tm, tn, ...)(X, W)``: the autotune-ready form (the knobs are
    the factory's arguments; each setting compiles and caches once)."""
    return matmul(tm, tn, tk, stages, threads, dtype, warp_specialize=warp_specialize)


def _main():
    import torch

    torch.manual_seed(0)
    for dtype, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        for ta in (False, True):
            for tb in (False, True):
                M, N, K = 1000, 776, 520
                x = torch.randn(M, K, device="cuda", dtype=tdt)
                w = torch.randn(K, N, device="cuda", dtype=tdt)
                y = torch.empty(M, N, device="cuda", dtype=tdt)
                kernel = tilecute.compile(matmul(dtype=dtype, transpose_A=ta, transpose_B=tb))
                kernel(x.t().contiguous() if ta else x, w.t().contiguous() if tb else w, y)
                ref = (x.float() @ w.float()).to(tdt)
                err = (y.float() - ref.float()).abs().max().item()
                print(f"{dtype} transpose_A={ta} transpose_B={tb}: max |err| {err:.3g}")


if __name__ == "__main__":
    _main()
