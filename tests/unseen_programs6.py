"""A sixth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at *memory movement* and *control flow*, where silent wrong answers hide:
``T.copy`` tiles running past a tensor's end (TileLang's copy reads 0 where a source index
is out of bounds, below 0 or past the end, and skips the element where a destination index
is), slices of 3-D/4-D tensors with unit dims in different places, a row or a column into a
1-D shared buffer, copies from a fragment slice, ``T.reshape`` / ``T.view`` of shared and
fragment buffers, one shared buffer reused by two phases, ``T.alloc_var`` /
``T.alloc_local`` scalars carried across iterations, stepped and reversed ``T.serial``,
``T.unroll`` and ``T.vectorized`` with tails, a serial loop inside ``T.Parallel``, ``while``
loops with a data-dependent exit, per-block branches and blocks doing nothing,
``T.Pipelined`` over 0, 1, 2 iterations at 1..4 stages and over loads that are not TMA
copies, atomics returning the old value, ``T.sync_threads`` in a branch the whole block
takes, an annotated swizzle on a tile written transposed, ``T.fill`` / ``T.clear`` of slices.
``tests/test_unseen_programs6.py`` builds each to an sm_90a cubin on the CPU and, on a GPU,
compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T
import tilecute.layout as L


# ---- copies past a tensor's end ----------------------------------------------------------
def ragged_copy_roundtrip(M=100, N=72, bm=32, bn=32):
    """A (M, N) in (bm, bn) tiles, M and N not multiples of the tile: global -> shared ->
    fragment (the padding reads 0), and global -> a fragment first filled with 7 (the copy
    overwrites the padding with 0: TileLang's copy stores ``if_then_else(in_bounds, A[..],
    0)``, it does not skip the read); row sums of both fragments (the padding adds 0);
    B = 2 * tile + 1 copied back (elements past the end skipped: a column past N would land
    in the next row of B)."""

    @T.prim_func
    def ragged(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
               S1: T.Tensor((M, T.ceildiv(N, bn)), T.float32),
               S2: T.Tensor((M, T.ceildiv(N, bn)), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            g = T.alloc_fragment((bm, bn), T.float32)
            r1 = T.alloc_fragment((bm,), T.float32)
            r2 = T.alloc_fragment((bm,), T.float32)
            T.fill(g, 7.0)
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, f)
            T.copy(A[by * bm, bx * bn], g)
            T.reduce_sum(f, r1, dim=1)
            T.reduce_sum(g, r2, dim=1)
            for i in T.Parallel(bm):
                if by * bm + i < M:
                    S1[by * bm + i, bx] = r1[i]
                    S2[by * bm + i, bx] = r2[i]
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, B[by * bm, bx * bn])
    return ragged


def halo_negative_start(M=256, N=64, bm=64, halo=2):
    """A vertical stencil: each block loads rows by*bm - halo .. by*bm + bm + halo of A
    into one shared tile (the first block's window starts below row 0, the last one's ends
    past M: those rows read 0), and B[r] = A[r - halo] + 2 A[r] + A[r + halo]."""

    @T.prim_func
    def halo(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as by:
            s = T.alloc_shared((bm + 2 * halo, N), T.float32)
            o = T.alloc_fragment((bm, N), T.float32)
            T.copy(A[by * bm - halo, 0], s)
            for i, j in T.Parallel(bm, N):
                o[i, j] = s[i, j] + 2.0 * s[i + halo, j] + s[i + 2 * halo, j]
            T.copy(o, B[by * bm, 0])
    return halo


def ragged_store_from_shared(M=70, N=40, bm=32, bn=32):
    """The other direction: a full (bm, bn) shared tile (each element a code of its block
    and tile-local index) copied to C at (by*bm, bx*bn) with M, N not multiples of the
    tile: only the elements inside C are written (an element written past column N would
    land in the next row, one past row M outside C)."""

    @T.prim_func
    def store(C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            for i, j in T.Parallel(bm, bn):
                s[i, j] = T.cast(i * 1000 + j + (by * 16 + bx) * 100000, T.float32)
            T.copy(s, C[by * bm, bx * bn])
    return store


# ---- slices with unit dims ---------------------------------------------------------------
def unit_dim_slices(Bn=2, S=64, H=3, D=32):
    """X (B, S, H, D): per (b, h) block the (S, D) slice X[b, :, h, :] (a unit dim between
    two tile dims) into a 2-D shared tile and out to Y (B, H, S, D); the same slice into a
    (1, S, D) shared tile (a leading unit dim) and out doubled through Y2[b, h]; column
    X[b, :, h, 5] into a 1-D shared buffer and row X[b, 7, h, :] into a 1-D fragment."""

    @T.prim_func
    def unit(X: T.Tensor((Bn, S, H, D), T.float32), Y: T.Tensor((Bn, H, S, D), T.float32),
             Y2: T.Tensor((Bn, H, S, D), T.float32), Col: T.Tensor((Bn, H, S), T.float32),
             Row: T.Tensor((Bn, H, D), T.float32)):
        with T.Kernel(H, Bn, threads=128) as (h, b):
            s = T.alloc_shared((S, D), T.float32)
            s3 = T.alloc_shared((1, S, D), T.float32)
            col = T.alloc_shared((S,), T.float32)
            row = T.alloc_fragment((D,), T.float32)
            T.copy(X[b, 0:S, h, 0:D], s)
            T.copy(s, Y[b, h, 0:S, 0:D])
            T.copy(X[b, 0:S, h, 0:D], s3)
            for i, j in T.Parallel(S, D):
                s3[0, i, j] = s3[0, i, j] * 2.0
            T.copy(s3, Y2[b, h, 0:S, 0:D])
            T.copy(X[b, 0:S, h, 5], col)
            T.copy(col, Col[b, h, 0:S])
            T.copy(X[b, 7, h, 0:D], row)
            for j in T.Parallel(D):
                row[j] = row[j] + 1.0
            T.copy(row, Row[b, h, 0:D])
    return unit


def row_and_column_1d(M=64, N=96):
    """Block c: column c of A (M, N) into a 1-D shared buffer (a strided gather) and out as
    row c of At (N, M) times 2; row c % M of A into a 1-D shared buffer and out to R[c]."""

    @T.prim_func
    def rowcol(A: T.Tensor((M, N), T.float16), At: T.Tensor((N, M), T.float16),
               R: T.Tensor((N, N), T.float16)):
        with T.Kernel(N, threads=64) as c:
            col = T.alloc_shared((M,), T.float16)
            row = T.alloc_shared((N,), T.float16)
            T.copy(A[0:M, c], col)
            for i in T.Parallel(M):
                col[i] = col[i] * T.float16(2)
            T.copy(col, At[c, 0:M])
            T.copy(A[c % M, 0:N], row)
            T.copy(row, R[c, 0:N])
    return rowcol


def fragment_slice_copies(M=128, N=128, bm=64, bn=64):
    """A fragment (bm, bn) = 3 A: its top half copied to B's rows, its bottom-left quarter
    through a (bm/2, bn/2) shared tile to C, its column 5 into a 1-D shared buffer and out
    to D; B's bottom half is the fragment's bottom half plus 1 (a second slice copy)."""
    h, q = bm // 2, bn // 2

    @T.prim_func
    def fslice(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
               C: T.Tensor((M // 2, N // 2), T.float32), D: T.Tensor((N // bn, M), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            f = T.alloc_fragment((bm, bn), T.float32)
            cs = T.alloc_shared((h, q), T.float32)
            c1 = T.alloc_shared((bm,), T.float32)
            T.copy(A[by * bm, bx * bn], f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 3.0
            T.copy(f[0:h, 0:bn], B[by * bm, bx * bn])
            T.copy(f[h:bm, 0:q], cs)
            T.copy(cs, C[by * h, bx * q])
            T.copy(f[0:bm, 5], c1)
            T.copy(c1, D[bx, by * bm:(by + 1) * bm])
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] + 1.0
            T.copy(f[h:bm, 0:bn], B[by * bm + h, bx * bn])
    return fslice


# ---- reshape / view -----------------------------------------------------------------------
def reshape_view_shared(M=64, N=64):
    """A (M, N) float32 tile in shared seen as (M*N/128, 128) (T.reshape: the same bytes in
    row-major order) copied to B2, as a flat (M*N,) buffer read at 4095 - k into Rev, and
    T.view'd as int32 (the bits) copied to Bits."""

    @T.prim_func
    def rv(A: T.Tensor((M, N), T.float32), B2: T.Tensor((M * N // 128, 128), T.float32),
           Rev: T.Tensor((M * N,), T.float32), Bits: T.Tensor((M, N), T.int32)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((M, N), T.float32)
            T.copy(A, s)
            s2 = T.reshape(s, (M * N // 128, 128))
            flat = T.reshape(s, (M * N,))
            si = T.view(s, dtype=T.int32)
            T.copy(s2, B2)
            for k in T.Parallel(M * N):
                Rev[k] = flat[M * N - 1 - k]
            T.copy(si, Bits)
    return rv


def reshape_fragment(M=32, N=64):
    """A (M, N) fragment reshaped to (M * 2, N // 2) (TileLang: the same elements in
    row-major order) and written through it, plus 1, to B (2M, N/2)."""

    @T.prim_func
    def rf(A: T.Tensor((M, N), T.float32), B: T.Tensor((M * 2, N // 2), T.float32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), T.float32)
            T.copy(A, f)
            g = T.reshape(f, (M * 2, N // 2))
            for i, j in T.Parallel(M * 2, N // 2):
                g[i, j] = g[i, j] + 1.0
            T.copy(g, B)
    return rf


# ---- one shared buffer, two phases ----------------------------------------------------------
def shared_two_phases(M=128, N=64, bm=32):
    """s holds A's tile for phase 1 (column sums of the tile, each thread walking a column
    serially in a T.alloc_var allocated before the T.Parallel loop), then B's tile for phase 2 (out = B + the column sums): the phase-2 copy into
    s must wait for every phase-1 read."""

    @T.prim_func
    def two(A: T.Tensor((M, N), T.float32), Bt: T.Tensor((M, N), T.float32),
            O: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as by:
            s = T.alloc_shared((bm, N), T.float32)
            cs = T.alloc_shared((N,), T.float32)
            o = T.alloc_fragment((bm, N), T.float32)
            acc = T.alloc_var(T.float32)
            T.copy(A[by * bm, 0], s)
            for j in T.Parallel(N):
                acc = 0.0
                for i in T.serial(bm):
                    acc += s[i, j]
                cs[j] = acc
            T.copy(Bt[by * bm, 0], s)
            for i, j in T.Parallel(bm, N):
                o[i, j] = s[i, j] + cs[j]
            T.copy(o, O[by * bm, 0])
    return two


# ---- scalars carried across iterations -------------------------------------------------------
def carried_scalars(M=128, N=50):
    """One row per thread: a running prefix sum in a T.alloc_var written at every step, and
    the running maximum with its first index in a T.alloc_local((2,)) pair; the last
    values out."""

    @T.prim_func
    def carried(A: T.Tensor((M, N), T.float32), P: T.Tensor((M, N), T.float32),
                Mx: T.Tensor((M,), T.float32), Arg: T.Tensor((M,), T.int32)):
        with T.Kernel(M // 64, threads=64) as b:
            tx = T.get_thread_binding()
            r = b * 64 + tx
            run = T.alloc_var(T.float32)
            best = T.alloc_local((2,), T.float32)
            run = 0.0
            best[0] = -T.infinity(T.float32)
            best[1] = 0.0
            for j in T.serial(N):
                run = run + A[r, j]
                P[r, j] = run
                if A[r, j] > best[0]:
                    best[0] = A[r, j]
                    best[1] = T.cast(j, T.float32)
            Mx[r] = best[0]
            Arg[r] = T.cast(best[1], T.int32)
    return carried


# ---- stepped, reversed, unrolled, vectorized loops -------------------------------------------
def stepped_loops(M=64, N=22):
    """One row per thread: T.serial(3, N, 4) sums columns 3, 7, ..; T.serial(N - 1, -1, -1)
    writes the suffix sums (a reversed loop); T.serial(N - 2, 0, -3) sums columns N-2, N-5,
    .. > 0; T.unroll(0, N, 5) sums columns 0, 5, ..; T.unroll(7) sums columns 0..6."""

    @T.prim_func
    def stepped(A: T.Tensor((M, N), T.float32), Suf: T.Tensor((M, N), T.float32),
                O: T.Tensor((M, 4), T.float32)):
        with T.Kernel(1, threads=M) as _:
            r = T.get_thread_binding()
            a = T.alloc_var(T.float32)
            a = 0.0
            for j in T.serial(3, N, 4):
                a += A[r, j]
            O[r, 0] = a
            a = 0.0
            for j in T.serial(N - 1, -1, -1):
                a += A[r, j]
                Suf[r, j] = a
            a = 0.0
            for j in T.serial(N - 2, 0, -3):
                a += A[r, j]
            O[r, 1] = a
            a = 0.0
            for j in T.unroll(0, N, 5):
                a += A[r, j]
            O[r, 2] = a
            a = 0.0
            for j in T.unroll(7):
                a += A[r, j]
            O[r, 3] = a
    return stepped


def vectorized_tail(M=64, N=22, vec=4):
    """One row per thread: the first N // vec * vec columns in T.vectorized(vec) groups,
    the remaining N % vec in a T.vectorized(N % vec) tail; B = A * 3 - 1."""
    main = N // vec

    @T.prim_func
    def vt(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=M) as _:
            r = T.get_thread_binding()
            for g in T.serial(main):
                for v in T.vectorized(vec):
                    B[r, g * vec + v] = A[r, g * vec + v] * 3.0 - 1.0
            for v in T.vectorized(N - main * vec):
                B[r, main * vec + v] = A[r, main * vec + v] * 3.0 - 1.0
    return vt


def parallel_with_serial(M=128, N=64, K=48, bm=32, bn=32):
    """A naive tile product in a fragment: each (i, j) of T.Parallel(bm, bn) walks k in a
    serial loop over shared tiles of A and B; and per row i a serial loop over the tile's
    columns for its running maximum (a 1-D T.Parallel with a serial loop)."""

    @T.prim_func
    def ps(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32),
           C: T.Tensor((M, N), T.float32), Rm: T.Tensor((N // bn, M), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, K), T.float32)
            b = T.alloc_shared((K, bn), T.float32)
            c = T.alloc_fragment((bm, bn), T.float32)
            cs = T.alloc_shared((bm, bn), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            T.copy(A[by * bm, 0], a)
            T.copy(B[0, bx * bn], b)
            for i, j in T.Parallel(bm, bn):
                c[i, j] = 0.0
                for k in T.serial(K):
                    c[i, j] += a[i, k] * b[k, j]
            T.copy(c, C[by * bm, bx * bn])
            T.copy(c, cs)
            for i in T.Parallel(bm):
                m[i] = -T.infinity(T.float32)
                for j in T.serial(bn):
                    m[i] = T.max(m[i], cs[i, j])
            for i in T.Parallel(bm):
                Rm[bx, by * bm + i] = m[i]
    return ps


# ---- while loops -------------------------------------------------------------------------
def while_first_above(M=128, N=100):
    """Per thread (row): the first column whose value exceeds Th[row], by a while loop
    whose exit depends on the data (N when none does); and per block a while loop whose
    count comes from a tensor (Lim[b]) halving a fragment toward 2 each round."""

    @T.prim_func
    def wh(A: T.Tensor((M, N), T.float32), Th: T.Tensor((M,), T.float32),
           First: T.Tensor((M,), T.int32), Lim: T.Tensor((M // 64,), T.int32),
           X: T.Tensor((M, 8), T.float32)):
        with T.Kernel(M // 64, threads=64) as b:
            tx = T.get_thread_binding()
            r = b * 64 + tx
            p = T.alloc_var(T.int32)
            p = 0
            while p < N and A[r, p] <= Th[r]:
                p += 1
            First[r] = p
            x = T.alloc_fragment((64, 8), T.float32)
            T.copy(X[b * 64, 0], x)
            k = T.alloc_var(T.int32)
            k = 0
            while k < Lim[b]:
                for i, j in T.Parallel(64, 8):
                    x[i, j] = x[i, j] * 0.5 + 1.0
                k += 1
            T.copy(x, X[b * 64, 0])
    return wh


# ---- per-block branches ---------------------------------------------------------------------
def block_branches(M=256, N=64, bm=32):
    """Different work per block: block 0 writes the column sums of all of A (a serial walk
    over row tiles through shared), blocks 1..3 copy their row tile doubled, the others
    fill theirs with -1; each branch has its own shared tile."""

    @T.prim_func
    def bb(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
           Cs: T.Tensor((N,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            if bx == 0:
                s = T.alloc_shared((bm, N), T.float32)
                acc = T.alloc_fragment((N,), T.float32)
                part = T.alloc_fragment((N,), T.float32)
                T.clear(acc)
                for t in T.serial(M // bm):
                    T.copy(A[t * bm, 0], s)
                    T.reduce_sum(s, part, dim=0)
                    for j in T.Parallel(N):
                        acc[j] += part[j]
                T.copy(acc, Cs)
            elif bx < 4:
                s2 = T.alloc_shared((bm, N), T.float32)
                T.copy(A[bx * bm, 0], s2)
                for i, j in T.Parallel(bm, N):
                    s2[i, j] = s2[i, j] * 2.0
                T.copy(s2, B[bx * bm, 0])
            else:
                f = T.alloc_fragment((bm, N), T.float32)
                T.fill(f, -1.0)
                T.copy(f, B[bx * bm, 0])
    return bb


def early_out_gemm(M=256, N=128, K=128, bm=64, bn=64, bk=32, stages=2):
    """Blocks whose row tile starts at or past Valid[0] do nothing at all (C keeps what it
    held there); the others run a pipelined GEMM and write their tile."""

    @T.prim_func
    def early(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              Valid: T.Tensor((1,), T.int32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            if by * bm < Valid[0]:
                A_s = T.alloc_shared((bm, bk), T.float16)
                B_s = T.alloc_shared((bk, bn), T.float16)
                acc = T.alloc_fragment((bm, bn), T.float32)
                T.clear(acc)
                for k in T.Pipelined(K // bk, num_stages=stages):
                    T.copy(A[by * bm, k * bk], A_s)
                    T.copy(B[k * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[by * bm, bx * bn])
    return early


# ---- short pipelines -------------------------------------------------------------------------
def pipelined_short(stages=2, M=128, N=64, Kmax=128, bm=64, bk=32):
    """A GEMM over the first ``steps`` K tiles (a scalar argument: 0, 1, 2, .. tiles, fewer
    than the stages), C = A[:, :steps*bk] @ B[:steps*bk]; with 0 steps C is 0."""

    @T.prim_func
    def short(A: T.Tensor((M, Kmax), T.float16), B: T.Tensor((Kmax, N), T.float16),
              C: T.Tensor((M, N), T.float32), steps: T.int32):
        with T.Kernel(M // bm, threads=128) as by:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, N), T.float16)
            acc = T.alloc_fragment((bm, N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, 0])
    return short


def pipelined_short_symbolic(stages=3, M=128, N=64, bm=64, bk=32):
    """The K loop's count T.ceildiv(K, bk) of a dynamic K (a ragged last tile reads 0);
    K of 16, 32, 48, 64 gives 1 or 2 steps, fewer than the stages; plus a row-sum loop
    pipelined over the same K tiles without a GEMM (a copy then a reduction per step)."""
    K = T.dynamic("K")

    @T.prim_func
    def shortk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32), Rs: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as by:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, N), T.float16)
            acc = T.alloc_fragment((bm, N), T.float32)
            R_s = T.alloc_shared((bm, bk), T.float16)
            part = T.alloc_fragment((bm,), T.float32)
            tot = T.alloc_fragment((bm,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, 0])
            T.clear(tot)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], R_s)
                T.reduce_sum(R_s, part, dim=1)
                for i in T.Parallel(bm):
                    tot[i] += part[i]
            T.copy(tot, Rs[by * bm:(by + 1) * bm])
    return shortk


def pipelined_gather(stages=2, M=128, N=64, K=128, R=256, bm=64, bk=32):
    """Rows of A gathered by Idx (A_s[i, k] = A[Idx[m0 + i], k0 + k], a T.Parallel load,
    not a TMA copy) and B loaded transposed (Bt_s[n, k] = B[k0 + k, n]) into shared, both
    in a pipelined K loop feeding T.gemm(A_s, Bt_s, acc, transpose_B=True)."""

    @T.prim_func
    def gather(A: T.Tensor((R, K), T.float16), Idx: T.Tensor((M,), T.int32),
               B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as by:
            A_s = T.alloc_shared((bm, bk), T.float16)
            Bt_s = T.alloc_shared((N, bk), T.float16)
            acc = T.alloc_fragment((bm, N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                for i, kk in T.Parallel(bm, bk):
                    A_s[i, kk] = A[Idx[by * bm + i], k * bk + kk]
                for n, kk in T.Parallel(N, bk):
                    Bt_s[n, kk] = B[k * bk + kk, n]
                T.gemm(A_s, Bt_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, 0])
    return gather


# ---- atomics with their old value --------------------------------------------------------------
def atomic_old_values(n=512):
    """Every thread takes a slot with old = T.atomic_add(Cnt[0], 1, return_prev=True) and
    writes its id there (Slots is a permutation of the ids); per element, the old values of
    T.atomic_max / T.atomic_min / T.atomic_add on Mx / Mn / Ad (one thread per element, so
    each old value is the element's initial value) go to Old."""

    @T.prim_func
    def olds(V: T.Tensor((n,), T.float32), Cnt: T.Tensor((1,), T.int32),
             Slots: T.Tensor((n,), T.int32), Mx: T.Tensor((n,), T.float32),
             Mn: T.Tensor((n,), T.float32), Ad: T.Tensor((n,), T.float32),
             Old: T.Tensor((3, n), T.float32)):
        with T.Kernel(n // 128, threads=128) as b:
            tx = T.get_thread_binding()
            g = b * 128 + tx
            slot = T.atomic_add(Cnt[0], 1, return_prev=True)
            Slots[slot] = g
            Old[0, g] = T.atomic_max(Mx[g], V[g], return_prev=True)
            Old[1, g] = T.atomic_min(Mn[g], V[g], return_prev=True)
            Old[2, g] = T.atomic_add(Ad[g], V[g], return_prev=True)
    return olds


# ---- barriers in branches, layouts, fills -----------------------------------------------------
def sync_in_uniform_branch(n=128, blocks=4):
    """Even blocks: each thread writes s[t], an explicit T.sync_threads, then reads
    s[n - 1 - t] (a reversal); odd blocks: s[t] = 2 x, sync, read s[(t + 1) % n]. The
    condition is the block index, so the whole block takes the branch and its barrier."""

    @T.prim_func
    def sb(X: T.Tensor((blocks, n), T.float32), Y: T.Tensor((blocks, n), T.float32)):
        with T.Kernel(blocks, threads=n) as b:
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), T.float32)
            if b % 2 == 0:
                s[tx] = X[b, tx]
                T.sync_threads()
                Y[b, tx] = s[n - 1 - tx]
            else:
                s[tx] = X[b, tx] * 2.0
                T.sync_threads()
                Y[b, tx] = s[(tx + 1) % n]
    return sb


def annotated_swizzle_transposed(M=128, N=128, bm=64, bn=64):
    """A shared tile with T.annotate_layout(make_swizzled_layout) written transposed by a
    T.Parallel loop (t[j, i] = A[by*bm + i, bx*bn + j]) and copied out whole to At: the
    swizzle is the tile's storage, not its meaning."""

    @T.prim_func
    def sw(A: T.Tensor((M, N), T.float16), At: T.Tensor((N, M), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            t = T.alloc_shared((bn, bm), T.float16)
            T.annotate_layout({t: L.make_swizzled_layout(t)})
            for i, j in T.Parallel(bm, bn):
                t[j, i] = A[by * bm + i, bx * bn + j]
            T.copy(t, At[bx * bn, by * bm])
    return sw


def fill_clear_slices(M=64, N=64):
    """A fragment filled with 1, rows 0..7 refilled with 2, rows 8..15 x columns 16..47
    cleared; a shared tile loaded from A, its rows 0..1 cleared and rows 4..11 x columns
    8..15 filled with 3; both out; and T.fill of a global slice (B2 rows 10..19)."""

    @T.prim_func
    def fc(A: T.Tensor((M, N), T.float32), F: T.Tensor((M, N), T.float32),
           S: T.Tensor((M, N), T.float32), B2: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_shared((M, N), T.float32)
            T.fill(f, 1.0)
            T.fill(f[0:8, 0:N], 2.0)
            T.clear(f[8:16, 16:48])
            T.copy(f, F)
            T.copy(A, s)
            T.clear(s[0:2, 0:N])
            T.fill(s[4:12, 8:16], 3.0)
            T.copy(s, S)
            T.fill(B2[10:20, 0:N], -5.0)
    return fc


# ---- out-of-bounds reads outside and inside T.Parallel ----------------------------------------
def window_sum_zero_padding(M=64, N=40, W=5, parallel=False):
    """Out[r, c] = A[r, c] + .. + A[r, c + W - 1], reading past the row's end: TileLang's
    LegalizeSafeMemoryAccess (run over the whole function, not only T.Parallel loops)
    turns every global load it cannot prove in bounds into ``if_then_else(in_bounds, load,
    0)``, so the window reads 0 there (never the next row's first elements).  With
    ``parallel`` the (row, column) walk is a T.Parallel nest with the window a serial loop
    inside; without, one row per thread in serial loops."""

    if parallel:
        @T.prim_func
        def window(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M, N), T.float32)):
            with T.Kernel(1, threads=128) as _:
                acc = T.alloc_fragment((M, N), T.float32)
                for r, c in T.Parallel(M, N):
                    acc[r, c] = 0.0
                    for w in T.serial(W):
                        acc[r, c] += A[r, c + w]
                T.copy(acc, Out)
        return window

    @T.prim_func
    def window_serial(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=M) as _:
            r = T.get_thread_binding()
            s = T.alloc_var(T.float32)
            for c in T.serial(N):
                s = 0.0
                for w in T.serial(W):
                    s += A[r, c + w]
                Out[r, c] = s
    return window_serial
