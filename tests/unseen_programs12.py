"""A twelfth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at the forms whose TileLang tests assert on TileLang's CUDA text before
(or instead of) checking a number, so that tilecute's answer for them is checked here:
warp votes and matches (``T.any_sync`` / ``all_sync`` / ``ballot_sync`` / ``ballot`` /
``activemask`` / ``match_any_sync`` / ``match_all_sync``, ``T.syncthreads_count`` / ``_and``
/ ``_or``, ``T.__ffs`` / ``T.popcount`` / ``T.__fns`` on ballots), the shuffles
(``T.shfl_sync`` with a width, ``shfl_xor`` / ``shfl_down`` / ``shfl_up``), wide global
loads and stores (``T.ldg32..256`` with and without ``pred``, ``T.stg32..256``,
``T.__ldg``), atomics (``T.atomic_add`` over ``T.Parallel`` that TileLang vectorizes,
mixed dtypes, ``T.atomic_addx2`` / ``x4`` with ``return_prev``, sliced destinations,
``T.atomic_or`` / max / min with memory orders, a tile ``atomic_add`` with a memory order,
the TMA reduction ``use_tma=True``, tile atomics of an expression), ``T.alloc_var``
initializers (``init=`` another var, several vars), ``T.unroll`` with ``step`` /
``unroll_factor`` / a run-time extent, ``T.assume``, ``T.sync_grid``, PDL, named barriers
(``T.named_barrier_arrive`` with ``T.sync_threads(id, n)``), TMA stores (``T.tma_copy``
shared -> global with ``T.tma_store_wait``, a plain copy that becomes one, in a 2- and a
3-stage GEMM), ``T.tma_copy`` with a per-warp leader scope, the fast-math and IEEE
intrinsics (``T.tan`` on halves, ``T.__exp10`` ..., ``T.fast_rcp``, ``T.exp10``,
``T.fmod``, ``T.abs``, ``T.nearbyint``, ``T.round`` with its two modes, ``T.ieee_*`` with
rounding modes), fp8 casts, reducers (``T.alloc_reducer`` / ``T.finalize_reducer``,
``reduce_*(batch=)``), the NaN-propagating reductions on halves, ``T.cumsum`` on
fragments, ``T.rng_*`` statistics, ``T.Broadcast`` of int8 to 32 lanes and negative
indices.  ``tests/test_unseen_programs12.py`` builds each to a cubin on the CPU and, on a
GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func`` (or a list of them, launched in order)."""

import tilecute.language as T


# ---- warp votes, matches and shuffles ---------------------------------------------------
def warp_votes_on_data(n=256):
    """Per thread, from its element x = X[tx]: any / all / ballot over ``x > 0`` in its
    warp, the block's count / and / or of ``x > -2``, and the ballot's lowest set lane
    (``__ffs``, one-based) and population."""

    @T.prim_func
    def votes(X: T.Tensor((n,), T.float32), O: T.Tensor((n, 8), T.int64)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            x = X[tx]
            b = T.ballot_sync(x > 0)
            O[tx, 0] = T.cast(T.any_sync(x > 2.0), T.int64)
            O[tx, 1] = T.cast(T.all_sync(x > -3.0), T.int64)
            O[tx, 2] = T.cast(b, T.int64)
            O[tx, 3] = T.cast(T.__ffs(b), T.int64)
            O[tx, 4] = T.cast(T.popcount(T.cast(b, T.uint32)), T.int64)
            O[tx, 5] = T.cast(T.syncthreads_count(x > -0.5), T.int64)
            O[tx, 6] = T.cast(T.syncthreads_and(x > -4.5), T.int64)
            O[tx, 7] = T.cast(T.syncthreads_or(x > 2.5), T.int64)
    return votes


def warp_match_groups(n=128):
    """Lanes with equal keys: ``match_any_sync`` gives each lane the mask of its peers;
    the leader (lowest peer, from ``__ffs``) writes the group's size.  ``match_all_sync``
    over a warp-uniform value returns the full mask, over the key 0 unless all agree."""

    @T.prim_func
    def match(K: T.Tensor((n,), T.int32), O: T.Tensor((n, 4), T.int64)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            key = K[tx]
            peers = T.match_any_sync(key)
            O[tx, 0] = T.cast(peers, T.int64)
            O[tx, 1] = T.cast(T.__ffs(peers) - 1 == tx % 32, T.int64)
            O[tx, 2] = T.cast(T.match_all_sync(tx // 32), T.int64)
            O[tx, 3] = T.cast(T.match_all_sync(key), T.int64)
    return match


def warp_fns_and_ballot_mask(n=64):
    """``T.__fns(mask, base, offset)``: the position of the offset-th set bit from base
    (0xFFFFFFFF when none); a ballot under an explicit half-warp mask in a branch only
    those lanes take; ``T.activemask`` of the full warp."""

    @T.prim_func
    def fns(X: T.Tensor((n,), T.int32), O: T.Tensor((n, 4), T.int64)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            lane = tx % 32
            m = T.cast(T.ballot_sync(X[tx] % 3 == 0), T.uint32)
            O[tx, 0] = T.cast(T.__fns(m, 0, 1), T.int64)
            O[tx, 1] = T.cast(T.__fns(m, lane, 2), T.int64)
            O[tx, 2] = T.cast(T.activemask(), T.int64)
            O[tx, 3] = -1
            if lane < 16:
                O[tx, 3] = T.cast(T.ballot_sync(X[tx] > 0, 0x0000FFFF), T.int64)
    return fns


def shuffle_family(n=128):
    """A float row per warp: ``shfl_xor`` butterfly sum (every lane gets the warp sum),
    ``shfl_down`` tree (lane 0 gets it), ``shfl_up`` inclusive scan (Hillis-Steele),
    ``shfl_sync`` broadcast from lane 5 of each 16-lane segment (width 16), and an int
    rotation by ``shfl_sync`` with a per-lane source."""

    @T.prim_func
    def shfl(X: T.Tensor((n,), T.float32), I: T.Tensor((n,), T.int32), O: T.Tensor((n, 4), T.float32),
             R: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            lane = tx % 32
            s = T.alloc_var(T.float32, init=X[tx])
            d = T.alloc_var(T.float32, init=X[tx])
            c = T.alloc_var(T.float32, init=X[tx])
            for k in T.unroll(5):
                s = s + T.shfl_xor(s, 1 << k)
            for k in T.unroll(5):
                d = d + T.shfl_down(d, 16 >> k)
            for k in T.unroll(5):
                up = T.shfl_up(c, 1 << k)
                if lane >= (1 << k):
                    c = c + up
            O[tx, 0] = s
            O[tx, 1] = T.if_then_else(lane == 0, d, 0.0)
            O[tx, 2] = c
            O[tx, 3] = T.shfl_sync(X[tx], 5, width=16)
            R[tx] = T.shfl_sync(I[tx], (lane + 3) % 32)
    return shfl


# ---- wide global loads and stores -------------------------------------------------------
def ldg_widths(n=256):
    """Y32[i] = X[i] through ``ldg32`` + ``T.reinterpret``; Y64 / Y128 / Y256 copy 2 / 4 /
    8 floats per thread through ``ldg64`` / ``ldg128`` / ``ldg256``; the ``pred`` forms
    load only the first half (the others write what TileLang's predicated load gives:
    zeros)."""

    @T.prim_func
    def ldg(X: T.Tensor((n,), T.float32), Y32: T.Tensor((n,), T.float32), Y64: T.Tensor((n,), T.float32),
            Y128: T.Tensor((n,), T.float32), Y256: T.Tensor((n,), T.float32),
            P32: T.Tensor((n,), T.float32), P128: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 32, threads=32) as bx:
            tx = T.get_thread_binding()
            i = bx * 32 + tx
            Y32[i] = T.reinterpret(T.ldg32(X[i]), T.float32)
            P32[i] = T.reinterpret(T.ldg32(X[i], pred=i < n // 2), T.float32)
            if i < n // 2:
                Y64[i * 2:i * 2 + 2] = T.reinterpret(T.ldg64(X[i * 2:i * 2 + 2]), T.float32x2)
            if i < n // 4:
                Y128[i * 4:i * 4 + 4] = T.reinterpret(T.ldg128(X[i * 4:i * 4 + 4]), T.float32x4)
                P128[i * 4:i * 4 + 4] = T.reinterpret(T.ldg128(X[i * 4:i * 4 + 4], pred=i < n // 8),
                                                      T.float32x4)
            if i < n // 8:
                Y256[i * 8:i * 8 + 8] = T.reinterpret(T.ldg256(X[i * 8:i * 8 + 8]), T.float32x8)
    return ldg


def stg_widths(n=256):
    """``T.stg32(Y[i], bits)`` of a float's bits, ``stg64`` / ``stg128`` / ``stg256`` of the
    matching ``ldg``; ``stg128`` with a ``pred`` that stores only the first quarter."""

    @T.prim_func
    def stg(X: T.Tensor((n,), T.float32), Y32: T.Tensor((n,), T.float32), Y64: T.Tensor((n,), T.float32),
            Y128: T.Tensor((n,), T.float32), Y256: T.Tensor((n,), T.float32), P128: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n):
            i = T.get_thread_binding()
            T.stg32(Y32[i], T.reinterpret(X[i], T.uint32))
            if i < n // 2:
                T.stg64(Y64[i * 2:i * 2 + 2], T.ldg64(X[i * 2:i * 2 + 2]))
            if i < n // 4:
                T.stg128(Y128[i * 4:i * 4 + 4], T.ldg128(X[i * 4:i * 4 + 4]))
                T.stg128(P128[i * 4:i * 4 + 4], T.ldg128(X[i * 4:i * 4 + 4]), pred=i < n // 16)
            if i < n // 8:
                T.stg256(Y256[i * 8:i * 8 + 8], T.ldg256(X[i * 8:i * 8 + 8]))
    return stg


def ldg_readonly_gather(n=1000, m=300):
    """out[i] = T.__ldg(table[idx[i]]) * 2 + T.__ldg(table, idx[i] // 2): the read-only
    cache load in its element and (buffer, index) forms."""

    @T.prim_func
    def gather(table: T.Tensor((m,), T.float32), idx: T.Tensor((n,), T.int32), out: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for t in T.Parallel(128):
                i = bx * 128 + t
                if i < n:
                    out[i] = T.__ldg(table[idx[i]]) * 2.0 + T.__ldg(table, idx[i] // 2)
    return gather


# ---- atomics ----------------------------------------------------------------------------
def atomic_add_slices_vectorized(K=4, M=128, N=128, bm=32, bn=64):
    """B += sum over k of A[k] (B starts non-zero): each of K blocks stages its slice in
    shared and adds it element by element over ``T.Parallel`` (TileLang vectorizes this
    into AtomicAddx4); a second form adds ``value = 2 * A_shared[i, j] - 1`` bound to a
    name first (the 'complicated parallel' form)."""

    @T.prim_func
    def add(A: T.Tensor((K, M, N), T.float32), B: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), K, threads=32) as (bx, by, bz):
            A_shared = T.alloc_shared((bm, bn), T.float32)
            T.copy(A[bz, bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn], A_shared)
            for i, j in T.Parallel(bm, bn):
                T.atomic_add(B[bx * bm + i, by * bn + j], A_shared[i, j])
            for i, j in T.Parallel(bm, bn):
                value = A_shared[i, j] * 2.0 - 1.0
                T.atomic_add(C[bx * bm + i, by * bn + j], value, memory_order="relaxed")
    return add


def atomic_add_mixed_dtypes(N=256):
    """Out (fp16) += a float32 fragment and Out2 (bf16) += a float32 fragment, element
    atomics over ``T.Parallel`` in a one-thread kernel (TileLang converts the value to the
    destination's type, then AtomicAddx2); Out3 (float32) += an fp16 fragment."""

    @T.prim_func
    def mixed(Src: T.Tensor((N,), T.float32), H: T.Tensor((N,), T.float16), Out: T.Tensor((N,), T.float16),
              Out2: T.Tensor((N,), T.bfloat16), Out3: T.Tensor((N,), T.float32)):
        with T.Kernel(threads=1):
            frag = T.alloc_fragment((N,), T.float32)
            hf = T.alloc_fragment((N,), T.float16)
            for i in T.Parallel(N):
                frag[i] = Src[i]
                hf[i] = H[i]
            for i in T.Parallel(N):
                T.atomic_add(Out[i], frag[i])
            for i in T.Parallel(N):
                T.atomic_add(Out2[i], frag[i])
            for i in T.Parallel(N):
                T.atomic_add(Out3[i], hf[i])
    return mixed


def atomic_addx2_x4_grid(M=64, N=128, bm=16, bn=32, reps=3):
    """Bh (fp16) += reps * Ah by ``T.atomic_addx2`` over pairs, Bf (fp32) += reps * Af by
    ``T.atomic_addx4`` over quads, Bm (fp16) += reps * Af by ``atomic_addx2`` of a float32
    source (mixed); ``reps`` blocks along z add the same tile."""

    @T.prim_func
    def addx(Ah: T.Tensor((M, N), T.float16), Bh: T.Tensor((M, N), T.float16),
             Af: T.Tensor((M, N), T.float32), Bf: T.Tensor((M, N), T.float32), Bm: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), reps, threads=32) as (bx, by, bz):
            for i, j in T.Parallel(bm, bn // 2):
                ii = bx * bm + i
                jj = by * bn + j * 2
                T.atomic_addx2(Bh[ii, jj], Ah[ii, jj])
                T.atomic_addx2(Bm[ii, jj], Af[ii, jj])
            for i, j in T.Parallel(bm, bn // 4):
                ii = bx * bm + i
                jj = by * bn + j * 4
                T.atomic_addx4(Bf[ii, jj], Af[ii, jj])
    return addx


def atomic_addx4_scatter_rows(n=96, m=10):
    """dst[idx[t], 0:4] += val[t, 0:4] for each of n threads (rows collide) by
    ``T.atomic_addx4`` on sliced regions; an fp16 and a bf16 quad at an offset of 4 added
    by every thread of a 64-thread block (``T.atomic_addx4(B[4], A[4])``)."""

    @T.prim_func
    def scatter(idx: T.Tensor((n,), T.int32), val: T.Tensor((n, 4), T.float32), dst: T.Tensor((m, 4), T.float32),
                Ah: T.Tensor((16,), T.float16), Bh: T.Tensor((16,), T.float16),
                Ab: T.Tensor((16,), T.bfloat16), Bb: T.Tensor((16,), T.bfloat16)):
        with T.Kernel(1, threads=n):
            t = T.get_thread_binding()
            T.atomic_addx4(dst[idx[t], 0:4], val[t, 0:4])
            if t < 64:
                T.atomic_addx4(Bh[4], Ah[4])
                T.atomic_addx4(Bb[8], Ab[8])
    return scatter


def atomic_return_prev_forms():
    """One thread: Prev2[0:2] = atomic_addx2(Dst2[0:2], Val2[0:2], return_prev) (fp32 and
    fp16), Prev4[0:4] = atomic_addx4(Dst4[0:4], ...) through let-bound slices, scalar
    atomic_max / atomic_min with return_prev."""

    @T.prim_func
    def prev(Dst2: T.Tensor((2,), T.float32), Val2: T.Tensor((2,), T.float32), Prev2: T.Tensor((2,), T.float32),
             Dh: T.Tensor((2,), T.float16), Vh: T.Tensor((2,), T.float16), Ph: T.Tensor((2,), T.float16),
             Dst4: T.Tensor((4,), T.float32), Val4: T.Tensor((4,), T.float32), Prev4: T.Tensor((4,), T.float32),
             Db: T.Tensor((4,), T.bfloat16), Vb: T.Tensor((4,), T.bfloat16), Pb: T.Tensor((4,), T.bfloat16),
             S: T.Tensor((2,), T.float32), SP: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            Prev2[0:2] = T.atomic_addx2(Dst2[0:2], Val2[0:2], return_prev=True)
            Ph[0:2] = T.atomic_addx2(Dh[0:2], Vh[0:2], return_prev=True)
            d4 = Dst4[0:4]
            v4 = Val4[0:4]
            Prev4[0:4] = T.atomic_addx4(d4, v4, return_prev=True)
            Pb[0:4] = T.atomic_addx4(Db[0:4], Vb[0:4], return_prev=True)
            SP[0] = T.atomic_max(S[0], 5.0, return_prev=True)
            SP[1] = T.atomic_min(S[1], 1.0, return_prev=True)
    return prev


def atomic_return_prev_tickets(n=512):
    """Each thread takes a ticket old = atomic_add(counter[0], 1, return_prev) and writes
    its id at out[old]: a permutation of 0..n-1; a parallel loop also stores the previous
    values of B's elements (B += A, old_vals = B before)."""

    @T.prim_func
    def tickets(counter: T.Tensor((1,), T.int32), out: T.Tensor((n,), T.int32),
                A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), old: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            k = T.atomic_add(counter[0], 1, return_prev=True)
            out[k] = bx * 128 + tx
            for i in T.Parallel(128):
                old[bx * 128 + i] = T.atomic_add(B[bx * 128 + i], A[bx * 128 + i], return_prev=True)
    return tickets


def atomic_bitwise_and_orders(n=256):
    """Bits[w] |= 1 << (tx % 32) for lanes whose x > 0 (``T.atomic_or`` with a release
    order) gives each warp's ballot; Mx / Mn / Sm: atomic_max / atomic_min / atomic_add
    with relaxed / release orders; a scalar parameter ``mask`` OR-ed into Flag."""

    @T.prim_func
    def bits(X: T.Tensor((n,), T.float32), Bits: T.Tensor((n // 32,), T.int32), Flag: T.Tensor((1,), T.int32),
             Mx: T.Tensor((1,), T.float32), Mn: T.Tensor((1,), T.float32), Sm: T.Tensor((1,), T.float32),
             mask: T.int32):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            if X[tx] > 0:
                T.atomic_or(Bits[tx // 32], T.shift_left(1, tx % 32), memory_order="release")
            T.atomic_or(Flag[0], mask)
            T.atomic_max(Mx[0], X[tx], memory_order="relaxed")
            T.atomic_min(Mn[0], X[tx], memory_order="relaxed")
            T.atomic_add(Sm[0], X[tx], memory_order="release")
    return bits


def atomic_tile_orders_and_exprs(N=256, M=64, bm=16, bn=32):
    """Tile atomics: Out[0:N] += X[0:N] (fp16, acquire / release / acq_rel in three
    kernels), A[tile] += 1.0 and A[tile] = max(A[tile], 0.5) over slices of a 2-D tensor;
    B += the (1,) local buffer and then += 1 (scalar tile forms)."""

    def tile(order):
        @T.prim_func
        def tile_add(X: T.Tensor((N,), T.float16), Out: T.Tensor((N,), T.float16)):
            with T.Kernel(1, threads=128):
                T.atomic_add(Out[0:N], X[0:N], memory_order=order)
        return tile_add

    @T.prim_func
    def exprs(A: T.Tensor((M, M), T.float32), C: T.Tensor((M, M), T.float32), S: T.Tensor((1,), T.float32),
              B: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(M, bn), threads=32) as (bx, by):
            T.atomic_add(A[bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn], 1.0)
            T.atomic_max(C[bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn], 0.5)
            loc = T.alloc_local([1], T.float32)
            loc[0] = S[0]
            T.atomic_add(B, loc)
            T.atomic_add(B, 1)
    return [tile("acquire"), tile("release"), tile("acq_rel"), exprs]


def tma_atomic_add_reduce(M=64, N=64):
    """out += 16 * ones (TMA reduction, ``use_tma=True``, from a 16 x 16 shared tile filled
    with 1 in one block), and a (M, N) tensor += a per-block tile (each of 4 blocks adds
    its A tile into the same destination tile by a TMA reduce-add)."""

    @T.prim_func
    def reps(out: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((16, 16), T.float32)
            T.fill(s, 1)
            for _ in range(16):
                T.atomic_add(out, s, use_tma=True)

    @T.prim_func
    def tiles(A: T.Tensor((4, M, N), T.float32), D: T.Tensor((M, N), T.float32)):
        with T.Kernel(4, threads=128) as bz:
            s = T.alloc_shared((M, N), T.float32)
            T.copy(A[bz, 0:M, 0:N], s)
            T.atomic_add(D[0:M, 0:N], s, use_tma=True)
    return [reps, tiles]


# ---- scalars, loops, assumptions ---------------------------------------------------------
def alloc_var_initializers(n=128):
    """``T.alloc_var`` with ``init=``: another var's value at that point (b = a's 1, then
    a = 2 and d = a's 2), a global element, a float64 beyond float32's range
    (1e300 / 1e290 = 1e10), and several vars of one dtype; ``T.alloc_local((k,), init)``
    not being a TileLang form, the local buffer is filled by a loop."""

    @T.prim_func
    def init(X: T.Tensor((n,), T.float32), I: T.Tensor((n, 4), T.int32), F: T.Tensor((n, 2), T.float64)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            a = T.alloc_var(T.int32, init=1)
            b = T.alloc_var(T.int32, init=a)
            a = 2
            d = T.alloc_var(T.int32, init=a)
            e = T.alloc_var(T.int32, init=tx * 3)
            big = T.alloc_var(T.float64, init=1e300)
            x = T.alloc_var(T.float32, init=X[tx])
            for _ in T.serial(3):
                x = x * 0.5 + 1.0
                e += 1
            I[tx, 0] = b
            I[tx, 1] = d
            I[tx, 2] = e
            I[tx, 3] = a + b + d
            F[tx, 0] = big / 1e290
            F[tx, 1] = T.cast(x, T.float64)
    return init


def unroll_forms(n=512):
    """``T.unroll(0, 16, step=4)`` (i = 0, 4, 8, 12), ``T.unroll(0, 16, unroll_factor=4)``
    (every i), and ``T.unroll(tid % 32)`` (a run-time extent): Cnt[t] = 0 + 1 + ... +
    (t % 32 - 1); ``T.unroll(2, 11, step=3)`` gives i = 2, 5, 8."""

    @T.prim_func
    def unroll(A: T.Tensor((16, 16), T.float32), B: T.Tensor((16, 16), T.float32), Cnt: T.Tensor((n,), T.int32),
               S: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            tid = T.get_thread_binding()
            if tid < 16:
                for i in T.unroll(0, 16, step=4):
                    A[tid, i] = A[tid, i] + 1.0
                for i in T.unroll(0, 16, unroll_factor=4):
                    B[i, tid] = B[i, tid] * 2.0
            c = T.alloc_var(T.int32, init=0)
            for i in T.unroll(tid % 32):
                c += i
            Cnt[tid] = c
            s = T.alloc_var(T.int32, init=0)
            for i in T.unroll(2, 11, step=3):
                s = s * 10 + i
            S[tid] = s + tid
    return unroll


def assume_forms():
    """``T.assume`` inside a loop (bounds of a computed index), before a vectorized loop
    (``N % 4 == 0``) and on an alloc_var: assumptions the program keeps true, so the
    answer is the plain one."""
    N = T.dynamic("N")

    @T.prim_func
    def assume(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), lr: T.Tensor((2,), T.int32)):
        with T.Kernel(T.ceildiv(N, 512), threads=128) as bx:
            tid = T.get_thread_binding()
            T.assume(N % 4 == 0)
            base = bx * 512 + tid * 4
            if base < N:
                for i in T.vectorized(4):
                    T.assume(base + i < N)
                    B[base + i] = A[base + i] * 3.0
            if bx == 0 and tid == 0:  # B[0:4] is this thread's: lr within it
                l = lr[0]
                r = lr[1]
                for i in T.serial(r - l + 1):
                    T.assume(l + i >= 0 and l + i < N)
                    B[l + i] = -1.0
                x = T.alloc_var(T.int32)
                x = lr[0]
                T.assume(x >= 0 and x < N)
                B[x] = B[x] - 1.0
    return assume


def grid_sync_reverse(N=1024, block=128):
    """A[i] = i in every block, ``T.sync_grid()``, then A[i] += A[N - 1 - i] read before a
    second grid barrier (cooperative launch): A = N - 1 everywhere; then a grid-wide sum by
    partials, a barrier and one block's final add."""

    @T.prim_func
    def gsync(A: T.Tensor((N,), T.float32), P: T.Tensor((N // block,), T.float32), S: T.Tensor((1,), T.float32)):
        with T.Kernel(N // block, threads=block) as bx:
            loc = T.alloc_fragment((block,), T.float32)
            part = T.alloc_fragment((1,), T.float32)
            base = bx * block
            for i in T.Parallel(block):
                A[base + i] = T.cast(base + i, T.float32)
            T.sync_grid()
            for i in T.Parallel(block):
                loc[i] = A[N - base - i - 1]
            T.sync_grid()
            for i in T.Parallel(block):
                A[base + i] = A[base + i] + loc[i]
            T.reduce_sum(loc, part, dim=0)
            P[bx] = part[0]
            T.sync_grid()
            if bx == 0:
                tot = T.alloc_fragment((N // block,), T.float32)
                one = T.alloc_fragment((1,), T.float32)
                T.copy(P, tot)
                T.reduce_sum(tot, one, dim=0)
                S[0] = one[0]
    return gsync


def grid_sync_inside_parallel(N=1024, block=64):
    """TileLang's own grid-barrier form: 128 threads, a 64-element fragment, and
    ``T.sync_grid()`` inside the ``T.Parallel`` body between a read of A[N - 1 - i] and the
    write of A[i] (each iteration reads before any iteration of any block writes, as one
    iteration per thread gives): A = N - 1 everywhere."""

    @T.prim_func
    def gsync_loop(A: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            loc = T.alloc_fragment((block,), T.float32)
            base = bx * block
            for i in T.Parallel(block):
                A[base + i] = base + i
            T.sync_grid()
            for i in T.Parallel(block):
                loc[i] = A[N - base - i - 1]
                T.sync_grid()
                A[base + i] = A[base + i] + loc[i]
    return gsync_loop


def pdl_two_kernels(N=10000, block=256, iters=20):
    """Kernel 1 writes B = A + 1 and triggers its dependents (``T.pdl_trigger``), then keeps
    doing unrelated work into D; kernel 2 waits (``T.pdl_sync``) and writes C = 2 B."""

    @T.prim_func
    def pdl(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32),
            D: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < N:
                    B[idx] = A[idx] + 1.0
            T.pdl_trigger()
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < N:
                    x = T.alloc_var(T.float32, init=A[idx])
                    for _ in T.serial(iters):
                        x = x * 0.5 + 0.25
                    D[idx] = x
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx2:
            T.pdl_sync()
            for i in T.Parallel(block):
                idx = bx2 * block + i
                if idx < N:
                    C[idx] = B[idx] * 2.0
    return pdl


def named_barrier_handoff(rounds=8):
    """Warp 0 produces a value in shared and ``T.named_barrier_arrive``s barrier 10; warp
    1 waits on it (``T.sync_threads(10, 64)``), reads, and arrives barrier 11 to hand the
    slot back, ``rounds`` times; out[r] = inp[0] + r * r."""

    @T.prim_func
    def handoff(inp: T.Tensor((1,), T.int32), out: T.Tensor((rounds,), T.int32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), T.int32)
            for r in T.serial(rounds):
                if tx < 32:
                    if tx == 0:
                        slot[0] = inp[0] + r * r
                    T.named_barrier_arrive(10, 64)
                    T.sync_threads(11, 64)
                else:
                    T.sync_threads(10, 64)
                    if tx == 32:
                        out[r] = slot[0]
                    T.named_barrier_arrive(11, 64)
    return handoff


# ---- TMA stores and leader scopes --------------------------------------------------------
def gemm_tma_store(M=512, N=512, K=512, bm=128, bn=128, bk=32, stages=2, explicit=True):
    """C = A @ B (fp16 in, fp32 accumulate, fp16 out) staged through a shared C tile and
    stored by ``T.tma_copy(C_shared, C[...])`` + ``T.tma_store_wait()`` (``explicit``) or by
    a plain ``T.copy(C_shared, C[...])`` that becomes a TMA store."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            if explicit:
                T.tma_copy(C_s, C[by * bm, bx * bn])
                T.tma_store_wait()
            else:
                T.copy(C_s, C[by * bm, bx * bn])
    return gemm


def gemm_tma_store_3_stages_plain():
    return gemm_tma_store(stages=3, explicit=False)


def tma_store_batched_rows(M=256, N=128, bm=32):
    """Each block writes two row tiles of Y = 2 X and Z = X + 1 from shared by two
    ``T.tma_copy`` stores, waits once with ``T.tma_store_wait(read=False)``; then a whole
    1-D tensor staged in shared is stored by a plain copy (the full-shape store)."""

    @T.prim_func
    def rows(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.float32),
             V: T.Tensor((N,), T.float32), W: T.Tensor((N,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            xs = T.alloc_shared((bm, N), T.float32)
            ys = T.alloc_shared((bm, N), T.float32)
            zs = T.alloc_shared((bm, N), T.float32)
            vs = T.alloc_shared((N,), T.float32)
            T.copy(X[bx * bm, 0], xs)
            for i, j in T.Parallel(bm, N):
                ys[i, j] = xs[i, j] * 2.0
                zs[i, j] = xs[i, j] + 1.0
            T.tma_copy(ys, Y[bx * bm:(bx + 1) * bm, 0:N])
            T.tma_copy(zs, Z[bx * bm:(bx + 1) * bm, 0:N])
            T.tma_store_wait(read=False)
            if bx == 0:
                T.copy(V, vs)
                for j in T.Parallel(N):
                    vs[j] = vs[j] * vs[j]
                T.copy(vs, W)
    return rows


def tma_copy_per_warp_leader(M=64, K=512, warps=8):
    """Each warp loads its own row of A into shared with ``T.tma_copy(...,
    barrier=mbars[w], leader_scope_threads=32)`` (one leader per warp), arrives and waits
    on its own barrier, and sums the row (B[row] = sum A[row, :]); a second kernel loads a
    row per block with the default (block-wide) leader scope and stores its first and last
    elements."""

    @T.prim_func
    def per_warp(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, warps), threads=warps * 32) as pid:
            tid = T.get_thread_binding()
            w = tid // 32
            lane = tid % 32
            row = pid * warps + w
            a_s = T.alloc_shared((warps, K), T.float32)
            mbars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[row, 0:K], a_s[w, 0:K], barrier=mbars[w], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[w])
            T.mbarrier_wait_parity(mbarrier=mbars[w], parity=0)
            s = T.alloc_var(T.float32, init=0.0)
            for k in T.serial(K // 32):
                s += a_s[w, k * 32 + lane]
            for k in T.unroll(5):
                s = s + T.shfl_xor(s, 1 << k)
            if lane == 0:
                B[row] = s

    @T.prim_func
    def block(A: T.Tensor((M, K), T.float32), E: T.Tensor((M, 2), T.float32)):
        with T.Kernel(M, threads=256) as pid:
            tid = T.get_thread_binding()
            a_s = T.alloc_shared((1, K), T.float32)
            mbar = T.alloc_barrier([256])
            T.tma_copy(A[pid, 0:K], a_s[0, 0:K], barrier=mbar)
            T.mbarrier_arrive(mbarrier=mbar)
            T.mbarrier_wait_parity(mbarrier=mbar, parity=0)
            if tid == 0:
                E[pid, 0] = a_s[0, 0]
                E[pid, 1] = a_s[0, K - 1]
    return [per_warp, block]


# ---- math intrinsics --------------------------------------------------------------------
def tan_halves(n=1024):
    """T.tan and T.__tan on fp16 and bf16 elements (TileLang: htan / its fast form; the
    value is tan computed at the element's type)."""

    @T.prim_func
    def tan(H: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.bfloat16), OH: T.Tensor((n, 2), T.float16),
            OB: T.Tensor((n, 2), T.bfloat16)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                OH[k, 0] = T.tan(H[k])
                OH[k, 1] = T.__tan(H[k])
                OB[k, 0] = T.tan(B[k])
                OB[k, 1] = T.__tan(B[k])
    return tan


def fast_math_family(n=1024):
    """The fast-math forms on float32: T.__exp / __exp10 / __log / __log2 / __log10 /
    __tan / __cos / __sin and T.fast_rcp, beside their precise forms T.exp10 / T.log10."""

    @T.prim_func
    def fm(X: T.Tensor((n,), T.float32), P: T.Tensor((n,), T.float32), O: T.Tensor((n, 11), T.float32)):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            for i in T.Parallel(256):
                k = bx * 256 + i
                x = X[k]
                p = P[k]
                O[k, 0] = T.__exp(x)
                O[k, 1] = T.__exp10(x)
                O[k, 2] = T.__log(p)
                O[k, 3] = T.__log2(p)
                O[k, 4] = T.__log10(p)
                O[k, 5] = T.__tan(x)
                O[k, 6] = T.__cos(x)
                O[k, 7] = T.__sin(x)
                O[k, 8] = T.fast_rcp(p)
                O[k, 9] = T.exp10(x)
                O[k, 10] = T.log10(p)
    return fm


def rounding_and_fmod(n=1024):
    """T.fmod (sign of the dividend, as C's fmod), T.abs on floats (fabs) and ints,
    T.nearbyint (ties to even), T.round in its two modes (ties-to-even, the default, and
    ties-away-from-zero), T.floor / T.ceil / T.trunc, on fp32 and fp16."""

    @T.prim_func
    def rnd(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16),
            I: T.Tensor((n,), T.int32), O: T.Tensor((n, 8), T.float32), OH: T.Tensor((n, 3), T.float16),
            OI: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                x = X[k]
                O[k, 0] = T.fmod(x, Y[k])
                O[k, 1] = T.abs(x)
                O[k, 2] = T.nearbyint(x)
                O[k, 3] = T.round(x)
                O[k, 4] = T.round(x, rounding_mode="ties-away-from-zero")
                O[k, 5] = T.floor(x)
                O[k, 6] = T.ceil(x)
                O[k, 7] = T.trunc(x)
                OH[k, 0] = T.nearbyint(H[k])
                OH[k, 1] = T.round(H[k], rounding_mode="ties-away-from-zero")
                OH[k, 2] = T.abs(H[k])
                OI[k] = T.abs(I[k])
    return rnd


def ieee_rounding_modes(n=1024):
    """T.ieee_add / ieee_mul / ieee_fmaf / ieee_fdiv / ieee_frcp / ieee_fsqrt with
    rounding modes rn / rz / ru / rd, and ieee_frsqrt, on float32: each direction bounds
    the exact result (rd <= exact <= ru, rz toward zero)."""

    def mode(m, rm):
        @T.prim_func
        def ieee(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32),
                 O: T.Tensor((n, 4, 6), T.float32), R: T.Tensor((n,), T.float32)):
            with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    k = bx * 128 + i
                    a = A[k]
                    b = B[k]
                    O[k, m, 0] = T.ieee_add(a, b, rm)
                    O[k, m, 1] = T.ieee_mul(a, b, rm)
                    O[k, m, 2] = T.ieee_fmaf(a, b, C[k], rm)
                    O[k, m, 3] = T.ieee_fdiv(a, b, rm)
                    O[k, m, 4] = T.ieee_frcp(b, rm)
                    O[k, m, 5] = T.ieee_fsqrt(T.abs(a), rm)
                    R[k] = T.ieee_frsqrt(T.abs(b))
        return ieee
    return [mode(m, rm) for m, rm in enumerate(["rn", "rz", "ru", "rd"])]


# ---- casts ------------------------------------------------------------------------------
def fp8_casts_saturating(n=1024):
    """float32 -> e4m3 / e5m2 by ``T.cast`` (TileLang's default: round to nearest even,
    saturating to the largest finite value, as its ``__NV_SATFINITE`` conversions do),
    with ``round="rn"`` spelled out; fp16 -> e4m3 and e4m3 -> fp16 / float32 back;
    a vectorized loop writing the constant 0 into an e4m3 tensor (a broadcast var)."""

    @T.prim_func
    def cast8(X: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16), E4: T.Tensor((n,), T.float8_e4m3fn),
              E5: T.Tensor((n,), T.float8_e5m2), E4r: T.Tensor((n,), T.float8_e4m3fn),
              EH: T.Tensor((n,), T.float8_e4m3fn), BH: T.Tensor((n,), T.float16), BF: T.Tensor((n,), T.float32),
              Z: T.Tensor((8,), T.float8_e4m3fn)):
        with T.Kernel(T.ceildiv(n, 256), threads=64) as bx:
            xs = T.alloc_fragment((256,), T.float32)
            e4 = T.alloc_fragment((256,), T.float8_e4m3fn)
            T.copy(X[bx * 256], xs)
            for i in T.Parallel(256):
                e4[i] = T.cast(xs[i], T.float8_e4m3fn)
                E5[bx * 256 + i] = T.cast(xs[i], T.float8_e5m2)
                E4r[bx * 256 + i] = T.cast(xs[i], T.float8_e4m3fn, round="rn")
                EH[bx * 256 + i] = T.cast(H[bx * 256 + i], T.float8_e4m3fn)
            T.copy(e4, E4[bx * 256])
            for i in T.Parallel(256):
                BH[bx * 256 + i] = T.cast(e4[i], T.float16)
                BF[bx * 256 + i] = T.cast(e4[i], T.float32)
            if bx == 0:
                for i in T.vectorized(8):
                    Z[i] = 0
    return cast8


def int8_broadcast_32_lanes():
    """``packed[0:32] = T.Broadcast(src[0], 32)`` for int8 and uint8 (a run-time value) and
    ``T.Broadcast(T.cast(-37, int8), 32)`` (a constant), copied out element by element."""

    def one(dtype, const):
        @T.prim_func
        def bcast(src: T.Tensor((1,), dtype), out: T.Tensor((32,), dtype), out2: T.Tensor((32,), dtype)):
            with T.Kernel(1, threads=1):
                packed = T.alloc_local((32,), dtype)
                packed[0:32] = T.Broadcast(src[0], 32)
                for i in T.serial(32):
                    out[i] = packed[i]
                packed2 = T.alloc_local((32,), dtype)
                packed2[0:32] = T.Broadcast(T.cast(const, dtype), 32)
                for i in T.serial(32):
                    out2[i] = packed2[i]
        return bcast
    return [one(T.int8, -37), one(T.uint8, 213)]


def negative_indices():
    """B[0] = A[-1] (a constant negative index counts from the end, as TileLang's
    LegalizeNegativeIndex makes it), B[1 + i] = A[-i - 1] for i < 4 (an affine index that
    is always negative), and C[i] = A[shift + i] (a symbolic index left as it is)."""

    @T.prim_func
    def neg(A: T.Tensor((16,), T.float32), B: T.Tensor((5,), T.float32), C: T.Tensor((8,), T.float32),
            shift: T.int32):
        with T.Kernel(1, threads=1):
            B[0] = A[-1]
            for i in T.serial(4):
                B[1 + i] = A[-i - 1]
            for i in T.serial(8):
                C[i] = A[shift + i]
    return neg


# ---- reductions, reducers, scans ---------------------------------------------------------
def reducer_epochs(M=32, K=512, bk=128):
    """``T.alloc_reducer`` epochs: a row sum accumulated over serial K tiles
    (``T.reducer_init`` / ``T.reducer_update`` / ``T.finalize_reducer(acc, result, batch=4)``), a row
    max, a transposed (N, M) reducer (acc[j, i] += src[i, j]), an int32 count and a (1,)
    scalar sum over a 2x extent loop."""

    @T.prim_func
    def red(A: T.Tensor((M, K), T.float32), S: T.Tensor((M,), T.float32), Mx: T.Tensor((M,), T.float32),
            Tr: T.Tensor((16, M), T.float32), Cnt: T.Tensor((M,), T.int32), Tot: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_reducer((M,), T.float32, op="sum")
            mx = T.alloc_reducer((M,), T.float32, op="max")
            cnt = T.alloc_reducer((M,), T.int32, op="sum")
            T.reducer_init(s)
            T.reducer_init(mx)
            T.reducer_init(cnt)
            a = T.alloc_fragment((M, bk), T.float32)
            for kt in T.serial(K // bk):
                T.copy(A[0, kt * bk], a)
                for i, k in T.Parallel(M, bk):
                    T.reducer_update(s[i], a[i, k])
                    T.reducer_update(mx[i], a[i, k])
                    T.reducer_update(cnt[i], T.if_then_else(a[i, k] > 0, 1, 0))
            rs = T.alloc_fragment((M,), T.float32)
            rm = T.alloc_fragment((M,), T.float32)
            rc = T.alloc_fragment((M,), T.int32)
            T.finalize_reducer(s, rs, batch=4)
            T.finalize_reducer(mx, rm, batch=2)
            T.finalize_reducer(cnt, rc)
            T.copy(rs, S)
            T.copy(rm, Mx)
            T.copy(rc, Cnt)
            src = T.alloc_fragment((M, 16), T.float32)
            T.copy(A[0:M, 0:16], src)
            tr = T.alloc_reducer((16, M), T.float32, op="sum")
            T.reducer_init(tr)
            for i, j in T.Parallel(M, 16):
                T.reducer_update(tr[j, i], src[i, j])
            rt = T.alloc_fragment((16, M), T.float32)
            T.finalize_reducer(tr, rt)
            T.copy(rt, Tr)
            one = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(one)
            for i in T.Parallel(16):
                T.reducer_update(one[0], src[0, i])
            for j in T.Parallel(32):
                T.reducer_update(one[0], src[1, j % 16] * 0.5)
            r1 = T.alloc_fragment((1,), T.float32)
            T.finalize_reducer(one, r1)
            Tot[0] = r1[0]
    return red


def reduce_batch_and_nan(M=64, N=128):
    """Row sums / maxes with ``batch=`` (several outputs per all-reduce call), and the
    NaN-propagating max / min / absmax on fp16 and bf16 rows (a row holding a NaN gives
    NaN; with the default, TileLang's plain max skips NaN the way fmax does)."""

    @T.prim_func
    def red(A: T.Tensor((M, N), T.float32), H: T.Tensor((M, N), T.float16), Bf: T.Tensor((M, N), T.bfloat16),
            S: T.Tensor((M,), T.float32), Mx: T.Tensor((M,), T.float32), HN: T.Tensor((M, 3), T.float16),
            BN: T.Tensor((M, 2), T.bfloat16)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((M, N), T.float32)
            h = T.alloc_fragment((M, N), T.float16)
            b = T.alloc_fragment((M, N), T.bfloat16)
            s = T.alloc_fragment((M,), T.float32)
            mx = T.alloc_fragment((M,), T.float32)
            h1 = T.alloc_fragment((M,), T.float16)
            h2 = T.alloc_fragment((M,), T.float16)
            h3 = T.alloc_fragment((M,), T.float16)
            b1 = T.alloc_fragment((M,), T.bfloat16)
            b2 = T.alloc_fragment((M,), T.bfloat16)
            T.copy(A, a)
            T.copy(H, h)
            T.copy(Bf, b)
            T.reduce_sum(a, s, dim=1, batch=2)
            T.reduce_max(a, mx, dim=1, batch=4)
            T.reduce_max(h, h1, dim=1, nan_propagate=True)
            T.reduce_min(h, h2, dim=1, nan_propagate=True)
            T.reduce_absmax(h, h3, dim=1, nan_propagate=True)
            T.reduce_max(b, b1, dim=1, nan_propagate=True)
            T.reduce_min(b, b2, dim=1)
            T.copy(s, S)
            T.copy(mx, Mx)
            for i in T.Parallel(M):
                HN[i, 0] = h1[i]
                HN[i, 1] = h2[i]
                HN[i, 2] = h3[i]
                BN[i, 0] = b1[i]
                BN[i, 1] = b2[i]
    return red


def fragment_cumsums(M=32, N=64):
    """``T.cumsum`` on fragments: along dim 1, along dim 0 reversed, and on a 1-D fragment,
    each from a copy of the input; the results go out through T.copy."""

    @T.prim_func
    def scan(A: T.Tensor((M, N), T.float32), R: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32),
             V: T.Tensor((N,), T.float32), VO: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((M, N), T.float32)
            v = T.alloc_fragment((N,), T.float32)
            T.copy(A, f)
            T.copy(A, g)
            T.copy(V, v)
            T.cumsum(f, dim=1)
            T.cumsum(g, dim=0, reverse=True)
            T.cumsum(v, dim=0)
            T.copy(f, R)
            T.copy(g, C)
            T.copy(v, VO)
    return scan


def rng_statistics(M=8192, seed=42, per=64):
    """cuRAND Philox draws per thread (``T.rng_init(seed, 0, offset)``): uint32 words,
    uniform float32 / float64 in (0, 1] and standard normals (32- and 64-bit)."""

    @T.prim_func
    def rng(A: T.Tensor((M,), T.uint32), B: T.Tensor((M,), T.float32), C: T.Tensor((M,), T.float64),
            D: T.Tensor((M,), T.float32), E: T.Tensor((M,), T.float64)):
        with T.Kernel(M // (per * 32), threads=32) as bx:
            tx = T.get_thread_binding()
            base = (bx * 32 + tx) * per
            T.rng_init(seed, 0, base)
            for j in T.serial(per):
                A[base + j] = T.rng_rand()
            for j in T.serial(per):
                B[base + j] = T.rng_rand_float()
            for j in T.serial(per):
                C[base + j] = T.rng_rand_float(bit=64)
            for j in T.serial(per):
                D[base + j] = T.rng_rand_float(dist="normal")
            for j in T.serial(per):
                E[base + j] = T.rng_rand_float(bit=64, dist="normal")
    return rng


# ---- more edges of the same forms ---------------------------------------------------------
def gemm_tma_store_ragged(M=500, N=456, K=256, bm=128, bn=128, bk=64):
    """C = A @ B with M and N not multiples of the tile: the last row / column tiles' TMA
    stores (``T.copy(C_shared, C[...])``) clip at the tensor's end (the rows past M and
    columns past N are not written: C keeps its sentinel there in a larger buffer view
    test)."""

    @T.prim_func
    def ragged(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bk, bn), T.bfloat16)
            C_s = T.alloc_shared((bm, bn), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.copy(C_s, C[by * bm, bx * bn])
    return ragged


def tma_atomic_add_layouts():
    """TMA reduce-adds whose shared tile holds different values per element (a layout
    slip shows): a (64, 64) float32 tile with an explicit swizzled layout, a (16, 24)
    float32 tile (a 32-byte swizzle box, split in TileLang), an int32 and a uint64 tile
    (linear), and a bf16 tile; each added ``reps`` times."""
    import tilecute.layout as L

    def one(shape, dtype, reps, swizzle=False):
        @T.prim_func
        def tma_add(S: T.Tensor(shape, dtype), D: T.Tensor(shape, dtype)):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared(shape, dtype)
                if swizzle:
                    T.annotate_layout({s: L.make_swizzled_layout(s)})
                for i, j in T.Parallel(*shape):
                    s[i, j] = S[i, j]
                for _ in range(reps):
                    T.atomic_add(D, s, use_tma=True)
        return tma_add
    return [one((64, 64), T.float32, 2, swizzle=True), one((16, 24), T.float32, 3),
            one((16, 16), T.int32, 4), one((16, 16), T.uint64, 4), one((32, 64), T.bfloat16, 2)]


def atomic_tile_ragged_orders(N=200):
    """A tile atomic add of 200 fp16 elements by 128 threads with a release order, then
    of 200 bf16 with seq_cst (the tail of a vectorized pair), and a tile atomic_max over a
    float32 slice with an acquire order."""

    @T.prim_func
    def ragged(X: T.Tensor((N,), T.float16), O: T.Tensor((N,), T.float16), Y: T.Tensor((N,), T.bfloat16),
               P: T.Tensor((N,), T.bfloat16), Z: T.Tensor((N,), T.float32), Q: T.Tensor((N,), T.float32)):
        with T.Kernel(2, threads=128):
            T.atomic_add(O[0:N], X[0:N], memory_order="release")
            T.atomic_add(P[0:N], Y[0:N], memory_order="seq_cst")
            T.atomic_max(Q[3:N], Z[3:N], memory_order="acquire")
    return ragged


def shuffle_widths(n=64):
    """``shfl_down`` / ``shfl_up`` within 8-lane segments (a lane whose source falls
    outside its segment keeps its own value), ``shfl_xor`` within 4-lane segments, and
    ``shfl_sync`` from lane 3 of each 8-lane segment under the lower half-warp's mask in
    a branch only those lanes take."""

    @T.prim_func
    def widths(X: T.Tensor((n,), T.float32), O: T.Tensor((n, 4), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            x = X[tx]
            O[tx, 0] = T.shfl_down(x, 3, width=8)
            O[tx, 1] = T.shfl_up(x, 2, width=8)
            O[tx, 2] = T.shfl_xor(x, 2, width=4)
            O[tx, 3] = -1.0
            if tx % 32 < 16:
                O[tx, 3] = T.shfl_sync(x, 3, width=8, mask=0x0000FFFF)
    return widths


def cumsum_more(M=16, N=128):
    """``T.cumsum`` along dim 1 reversed on a fragment, along dim 0 on a shared tile,
    ``dst=`` another fragment (the source kept), and an int32 fragment scan."""

    @T.prim_func
    def scans(A: T.Tensor((M, N), T.float32), I: T.Tensor((M, N), T.int32), R: T.Tensor((M, N), T.float32),
              S: T.Tensor((M, N), T.float32), D: T.Tensor((M, N), T.float32), K: T.Tensor((M, N), T.float32),
              IS: T.Tensor((M, N), T.int32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((M, N), T.float32)
            sh = T.alloc_shared((M, N), T.float32)
            it = T.alloc_fragment((M, N), T.int32)
            T.copy(A, f)
            T.copy(A, sh)
            T.copy(I, it)
            T.cumsum(f, g, dim=1)
            T.copy(g, D)
            T.copy(f, K)
            T.cumsum(f, dim=1, reverse=True)
            T.cumsum(sh, dim=0)
            T.cumsum(it, dim=1)
            T.copy(f, R)
            T.copy(sh, S)
            T.copy(it, IS)
    return scans


def rng_default_sequence(M=4096, seed=7):
    """``T.rng_init(seed)`` with the default subsequence (threadIdx.x + blockIdx.x *
    blockDim.x) and offset 0, inside a run-time guard; each thread's first draws."""

    @T.prim_func
    def rng_seq(A: T.Tensor((M,), T.uint32), U: T.Tensor((M,), T.float32)):
        with T.Kernel(M // 256, threads=128) as bx:
            tx = T.get_thread_binding()
            g = bx * 128 + tx
            if g < M // 2:
                T.rng_init(seed)
                A[g * 2] = T.rng_rand()
                A[g * 2 + 1] = T.rng_rand()
                U[g * 2] = T.rng_rand_float()
                U[g * 2 + 1] = T.rng_rand_float()
    return rng_seq


def ieee_halves_and_fp16_fast(n=512):
    """IEEE forms on fp16 / bf16 (round to nearest only, as CUDA's half intrinsics) and
    fp16 fast-math (T.__exp, T.__log, T.__sin on halves)."""

    @T.prim_func
    def halves(H: T.Tensor((n,), T.float16), G: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.bfloat16),
               C: T.Tensor((n,), T.bfloat16), OH: T.Tensor((n, 7), T.float16), OB: T.Tensor((n, 4), T.bfloat16)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                k = bx * 128 + i
                OH[k, 0] = T.ieee_add(H[k], G[k], "rn")
                OH[k, 1] = T.ieee_mul(H[k], G[k], "rn")
                OH[k, 2] = T.ieee_fmaf(H[k], G[k], H[k], "rn")
                OH[k, 3] = T.ieee_fdiv(H[k], G[k], "rn")
                OH[k, 4] = T.__exp(H[k])
                OH[k, 5] = T.__log(T.abs(G[k]))
                OH[k, 6] = T.__sin(H[k])
                OB[k, 0] = T.ieee_add(B[k], C[k], "rn")
                OB[k, 1] = T.ieee_mul(B[k], C[k], "rn")
                OB[k, 2] = T.ieee_fmaf(B[k], C[k], B[k], "rn")
                OB[k, 3] = T.ieee_fdiv(B[k], C[k], "rn")
    return halves


def alloc_var_positional_forms():
    """TileLang's other ``T.alloc_var`` spellings: ``('int32', 3)`` (a positional init),
    ``('int32', 'local.var')`` (a scope: zero), ``('int32', 4, 'local.var')``,
    ``('int32', 'local.var', init=5)``, a float ``2.5`` and ``init=`` another var."""

    @T.prim_func
    def spellings(O: T.Tensor((6,), T.int32), F: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            a = T.alloc_var("int32", 3)
            b = T.alloc_var("int32", "local.var")
            c = T.alloc_var("int32", 4, "local.var")
            d = T.alloc_var("int32", "local.var", init=5)
            f = T.alloc_var(T.float32, 2.5)
            g = T.alloc_var(T.float32, init=a)
            b += a
            O[0] = a
            O[1] = b
            O[2] = c
            O[3] = d
            O[4] = T.cast(f * 2.0, T.int32)
            O[5] = a + c + d
            F[0] = f
            F[1] = g
    return spellings


def vectorized_casts(n=1024):
    """Element casts in ``T.Parallel`` loops that TileLang vectorizes into pair
    conversions: float32 <-> float16 / bfloat16, e4m3 / e5m2 -> float32 / float16 /
    bfloat16 and float16 / bfloat16 -> e4m3 (round to nearest even, saturating)."""

    @T.prim_func
    def casts(X: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.bfloat16),
              E4: T.Tensor((n,), T.float8_e4m3fn), E5: T.Tensor((n,), T.float8_e5m2),
              XH: T.Tensor((n,), T.float16), XB: T.Tensor((n,), T.bfloat16), HX: T.Tensor((n,), T.float32),
              BX: T.Tensor((n,), T.float32), E4X: T.Tensor((n, 3), T.float32), E5X: T.Tensor((n, 3), T.float32),
              HE: T.Tensor((n,), T.float8_e4m3fn), BE: T.Tensor((n,), T.float8_e4m3fn)):
        with T.Kernel(T.ceildiv(n, 256), threads=64) as bx:
            for i in T.Parallel(256):
                k = bx * 256 + i
                XH[k] = T.cast(X[k], T.float16)
                XB[k] = T.cast(X[k], T.bfloat16)
                HX[k] = T.cast(H[k], T.float32)
                BX[k] = T.cast(B[k], T.float32)
                E4X[k, 0] = T.cast(E4[k], T.float32)
                E4X[k, 1] = T.cast(T.cast(E4[k], T.float16), T.float32)
                E4X[k, 2] = T.cast(T.cast(E4[k], T.bfloat16), T.float32)
                E5X[k, 0] = T.cast(E5[k], T.float32)
                E5X[k, 1] = T.cast(T.cast(E5[k], T.float16), T.float32)
                E5X[k, 2] = T.cast(T.cast(E5[k], T.bfloat16), T.float32)
                HE[k] = T.cast(H[k], T.float8_e4m3fn)
                BE[k] = T.cast(B[k], T.float8_e4m3fn)
    return casts


def shuffle_dtypes(n=64):
    """Shuffles of fp16 / bf16 (TileLang's __shfl_*_sync half overloads), int64 and float64
    (two 32-bit shuffles) and uint8 values."""

    @T.prim_func
    def shfl_types(H: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.bfloat16), L: T.Tensor((n,), T.int64),
                   D: T.Tensor((n,), T.float64), OH: T.Tensor((n,), T.float16), OB: T.Tensor((n,), T.bfloat16),
                   OL: T.Tensor((n,), T.int64), OD: T.Tensor((n,), T.float64), OU: T.Tensor((n,), T.uint8)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            OH[tx] = T.shfl_xor(H[tx], 1)
            OB[tx] = T.shfl_down(B[tx], 1)
            OL[tx] = T.shfl_sync(L[tx], 7)
            OD[tx] = T.shfl_up(D[tx], 1)
            OU[tx] = T.shfl_xor(T.cast(tx * 5, T.uint8), 3)
    return shfl_types


def shared_memory_atomics(n=4096, bins=64):
    """Atomics on shared memory: a histogram (``T.atomic_add(hist[b], 1)``), a per-bin max
    and a float sum in shared, tickets from ``return_prev`` on a shared counter, and an
    fp16 ``atomic_addx2`` into shared pairs; the block's results copied out after them."""

    @T.prim_func
    def shared_atomics(keys: T.Tensor((n,), T.int32), vals: T.Tensor((n,), T.float32),
                       H: T.Tensor((bins,), T.int32), Mx: T.Tensor((bins,), T.float32),
                       Sm: T.Tensor((bins,), T.float32), Tk: T.Tensor((256,), T.int32),
                       Pair: T.Tensor((2,), T.float16)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            hist = T.alloc_shared((bins,), T.int32)
            mx = T.alloc_shared((bins,), T.float32)
            sm = T.alloc_shared((bins,), T.float32)
            cnt = T.alloc_shared((1,), T.int32)
            pair = T.alloc_shared((2,), T.float16)
            T.clear(hist)
            T.fill(mx, -T.infinity(T.float32))
            T.clear(sm)
            if tx == 0:
                cnt[0] = 0
                pair[0] = 0
                pair[1] = 0
            T.sync_threads()
            for c in T.serial(n // 256):
                k = keys[c * 256 + tx]
                v = vals[c * 256 + tx]
                T.atomic_add(hist[k], 1)
                T.atomic_max(mx[k], v)
                T.atomic_add(sm[k], v)
            Tk[tx] = T.atomic_add(cnt[0], 1, return_prev=True)
            if tx < 100:
                T.atomic_addx2(pair[0], Pair[0])
            T.sync_threads()
            T.copy(hist, H)
            T.copy(mx, Mx)
            T.copy(sm, Sm)
            if tx == 0:
                Pair[0] = pair[0]
                Pair[1] = pair[1]
    return shared_atomics


def ldg_packed_narrow(n=256):
    """Wide loads of narrow elements reinterpreted back: four fp16 through ``ldg64`` as
    ``float16x4``, eight bf16 through ``ldg128`` as ``bfloat16x8``, four int8 through
    ``ldg32`` as ``int8x4`` (element 0 in the word's low bits)."""

    @T.prim_func
    def narrow(H: T.Tensor((n,), T.float16), B: T.Tensor((n,), T.bfloat16), I: T.Tensor((n,), T.int8),
               YH: T.Tensor((n,), T.float16), YB: T.Tensor((n,), T.bfloat16), YI: T.Tensor((n,), T.int8)):
        with T.Kernel(1, threads=64):
            i = T.get_thread_binding()
            YH[i * 4:i * 4 + 4] = T.reinterpret(T.ldg64(H[i * 4:i * 4 + 4]), T.float16x4)
            YI[i * 4:i * 4 + 4] = T.reinterpret(T.ldg32(I[i * 4:i * 4 + 4]), T.int8x4)
            if i < n // 8:
                YB[i * 8:i * 8 + 8] = T.reinterpret(T.ldg128(B[i * 8:i * 8 + 8]), T.bfloat16x8)
    return narrow


def reduce_shared_and_batched(M=128, N=64):
    """Row reductions with ``batch=`` from a shared tile (TileLang's s2f) and from
    fragments (f2f) on 256 threads: sum / abssum / absmax of float32, min of bfloat16 from
    shared, and an fp16 sum (accumulated in fp16, as TileLang's is)."""

    @T.prim_func
    def red_batched(A: T.Tensor((M, N), T.float32), Bf: T.Tensor((M, N), T.bfloat16), H: T.Tensor((M, N), T.float16),
                    O: T.Tensor((M, 3), T.float32), OB: T.Tensor((M,), T.bfloat16), OH: T.Tensor((M,), T.float16)):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((M, N), T.float32)
            sb = T.alloc_shared((M, N), T.bfloat16)
            f = T.alloc_fragment((M, N), T.float32)
            h = T.alloc_fragment((M, N), T.float16)
            d0 = T.alloc_fragment((M,), T.float32)
            d1 = T.alloc_fragment((M,), T.float32)
            d2 = T.alloc_fragment((M,), T.float32)
            db = T.alloc_fragment((M,), T.bfloat16)
            dh = T.alloc_fragment((M,), T.float16)
            T.copy(A, s)
            T.copy(Bf, sb)
            T.copy(A, f)
            T.copy(H, h)
            T.reduce_sum(s, d0, dim=1, batch=2)
            T.reduce_abssum(f, d1, dim=1, batch=4)
            T.reduce_absmax(f, d2, dim=1, batch=4)
            T.reduce_min(sb, db, dim=1, batch=2)
            T.reduce_sum(h, dh, dim=1, batch=8)
            for i in T.Parallel(M):
                O[i, 0] = d0[i]
                O[i, 1] = d1[i]
                O[i, 2] = d2[i]
                OB[i] = db[i]
                OH[i] = dh[i]
    return red_batched
