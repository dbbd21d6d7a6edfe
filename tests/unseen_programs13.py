"""A thirteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at what the earlier rounds leave out or touch only once: the warp
reductions ``T.warp_reduce_sum`` / ``max`` / ``min`` / ``bitand`` / ``bitor`` on integers
and floats, shared-memory word moves (``T.lds128`` / ``T.sts32`` / ``T.sts64`` /
``T.sts128``), ``T.ieee_sub`` in its four rounding modes, ``T.Unroll`` (the alias), a
``T.serial`` whose step is a run-time value, floor division and modulo inside *index*
expressions that go negative (``X[(i - 3) % 8]``), ``T.Parallel`` extents that the
thread count does not divide, 1-D / 3-D / 4-D tensors with tails on every dim, blocks of
32 / 96 / 160 threads, GEMMs with block_M = 16 / 32 on the mma.sync path and with tails on
M, N and K at 3 stages, int8 GEMMs with both transposes, mixed fp8 (e4m3 x e5m2) GEMMs,
stream-K scheduling with tile atomics, a back-to-back GEMM, split-K into a float16
output by tile atomics, batched GEMM over a 3-D grid, epilogues (bias, sigmoid, row
scale) written through shared, normalizations whose rows do not fill the tile,
``reduce_*(dim=0, clear=False)`` over row chunks with a ragged last chunk, reducers over
ragged rows, shared -> shared copies with a dtype change, ``make_swizzled_layout``
(``tilelang.layout``'s) annotations on a transpose, fills and clears in every scope, bit
tricks through ``T.reinterpret``, ``.astype``, nested ``T.if_then_else`` selections,
``T.macro`` pieces with scalar arguments, macros returning values and the fragments they
allocate, ternaries and chained comparisons, ``T.ClusterKernel`` over three grid dims,
attention in two warps, a 64 x 256 tile over two warpgroups with ``FullCol``, float64
atomics, uint32 hash mixing, scalars bound inside the kernel (TileLang's Python values:
``blk / 3`` true division, a Python float meeting a float16 load, ``num_stages`` and
``reverse`` from kernel names), and a GEMM whose A is a column slice of a wider tensor
(``T.StridedTensor`` with a dynamic row stride).
``tests/test_unseen_programs13.py`` builds each to a cubin on the CPU and, on a GPU,
compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func`` (or a list of them, launched in order)."""

import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- warp reductions and shared-memory words --------------------------------------------
def warp_reduce_family(n=160):
    """Per warp (five warps): the sum / max / min / bit-and / bit-or of an int32 value,
    the max / min / sum of a float, every lane receiving the result."""

    @T.prim_func
    def wred(X: T.Tensor((n,), T.int32), F: T.Tensor((n,), T.float32),
             O: T.Tensor((n, 5), T.int32), OF: T.Tensor((n, 3), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            x = X[tx]
            f = F[tx]
            O[tx, 0] = T.warp_reduce_sum(x)
            O[tx, 1] = T.warp_reduce_max(x)
            O[tx, 2] = T.warp_reduce_min(x)
            O[tx, 3] = T.warp_reduce_bitand(x)
            O[tx, 4] = T.warp_reduce_bitor(x)
            OF[tx, 0] = T.warp_reduce_max(f)
            OF[tx, 1] = T.warp_reduce_min(f * 2.0)
            OF[tx, 2] = T.warp_reduce_sum(f)
    return wred


def warp_reduce_row_norms(M=37, N=96):
    """One warp per row (4 warps a block, a ragged last block): each lane sums the squares
    of its strided elements, ``T.warp_reduce_sum`` gives the row's, and the row is scaled
    by its reciprocal L2 norm; ``T.warp_reduce_max`` of |x| gives the row's abs-max."""

    @T.prim_func
    def l2(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), AM: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, 4), threads=128) as bx:
            tx = T.get_thread_binding()
            row = bx * 4 + tx // 32
            lane = tx % 32
            ss = T.alloc_var(T.float32, init=0.0)
            am = T.alloc_var(T.float32, init=0.0)
            if row < M:
                for j in T.serial(N // 32):
                    v = X[row, j * 32 + lane]
                    ss = ss + v * v
                    am = T.max(am, T.abs(v))
            tot = T.warp_reduce_sum(ss)
            mx = T.warp_reduce_max(am)
            if row < M:
                for j in T.serial(N // 32):
                    Y[row, j * 32 + lane] = X[row, j * 32 + lane] * T.rsqrt(tot + 1e-6)
                if lane == 0:
                    AM[row] = mx
    return l2


def shared_words(n=256):
    """Floats through shared memory as words: ``T.lds128`` of four floats and
    ``T.sts128`` into a second buffer (a rotation by one vector), ``T.sts64`` of a
    ``T.lds64`` pair, ``T.sts32`` of a float's bits."""

    @T.prim_func
    def words(X: T.Tensor((n,), T.float32), Y128: T.Tensor((n,), T.float32), Y64: T.Tensor((n,), T.float32),
              Y32: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((n,), T.float32)
            D128 = T.alloc_shared((n,), T.float32)
            D64 = T.alloc_shared((n,), T.float32)
            D32 = T.alloc_shared((n,), T.float32)
            T.copy(X, S)
            T.sync_threads()
            src = (tx + 1) % 64
            T.sts128(D128[tx * 4:tx * 4 + 4], T.lds128(S[src * 4:src * 4 + 4]))
            T.sts64(D64[tx * 2:tx * 2 + 2], T.lds64(S[tx * 2 + 128:tx * 2 + 130]))
            T.sts64(D64[tx * 2 + 128:tx * 2 + 130], T.lds64(S[tx * 2:tx * 2 + 2]))
            for r in T.serial(4):
                T.sts32(D32[r * 64 + tx], T.reinterpret(S[n - 1 - (r * 64 + tx)], T.uint32))
            T.sync_threads()
            T.copy(D128, Y128)
            T.copy(D64, Y64)
            T.copy(D32, Y32)
    return words


def ieee_sub_modes(n=256):
    """``T.ieee_sub`` rounded to nearest (the default), toward zero, up and down."""

    @T.prim_func
    def isub(X: T.Tensor((n,), T.float32), Z: T.Tensor((n,), T.float32), Y: T.Tensor((n, 4), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                a = X[bx * 128 + i]
                b = Z[bx * 128 + i]
                Y[bx * 128 + i, 0] = T.ieee_sub(a, b)
                Y[bx * 128 + i, 1] = T.ieee_sub(a, b, "rz")
                Y[bx * 128 + i, 2] = T.ieee_sub(a, b, rounding_mode="ru")
                Y[bx * 128 + i, 3] = T.ieee_sub(a, b, "rd")
    return isub


# ---- loops and index arithmetic ---------------------------------------------------------
def unroll_alias_and_runtime_step(n=96):
    """``T.Unroll(0, 64, 16)`` (TileLang's alias of ``T.unroll``) sums every 16th element
    from the thread's lane; ``T.serial(start, n, step)`` with ``step`` read from a tensor
    (TileLang's trip count ceildiv(n - start, step)) sums a strided subsequence."""

    @T.prim_func
    def loops(X: T.Tensor((n,), T.float32), St: T.Tensor((2,), T.int32), Y: T.Tensor((32, 2), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            a = T.alloc_var(T.float32, init=0.0)
            b = T.alloc_var(T.float32, init=0.0)
            for i in T.Unroll(0, 64, 16):
                if i + tx < 64:
                    a += X[i + tx]
            step = St[0]
            for i in T.serial(St[1] + tx % 4, n, step):
                b += X[i]
            Y[tx, 0] = a
            Y[tx, 1] = b
    return loops


def negative_index_arithmetic(n=200):
    """Index expressions that go negative before the floor division / modulo: X[(i - 3) %
    8] wraps to 5 at i = 0 (TVM's floormod), (i - 5) // 4 is -2 at i = 0 (floordiv), and
    T.truncmod / T.truncdiv of the same quantities (C's), stored as values and used as
    indices into a 16-element table."""

    @T.prim_func
    def negidx(X: T.Tensor((16,), T.float32), O: T.Tensor((n, 4), T.float32), I: T.Tensor((n, 4), T.int32)):
        with T.Kernel(T.ceildiv(n, 96), threads=96) as bx:
            for t in T.Parallel(96):
                i = bx * 96 + t
                if i < n:
                    O[i, 0] = X[(i - 3) % 8]
                    O[i, 1] = X[(i - 37) // 32 + 8]
                    O[i, 2] = X[T.truncmod(i - 37, 8) + 8]
                    O[i, 3] = X[(7 - i) % 16]
                    I[i, 0] = (i - 5) // 4
                    I[i, 1] = (i - 5) % 4
                    I[i, 2] = T.truncdiv(i - 5, 4)
                    I[i, 3] = (13 - i * 3) // 5 * 5 + (13 - i * 3) % 5
    return negidx


def parallel_extent_not_divisible(n=100, threads=64):
    """``T.Parallel(100)`` in a block of 64 threads (the last threads take one element),
    a (100,) fragment from global, scaled, its sum by ``T.reduce_sum``, and a (6, 100)
    fragment with ``T.Parallel(6, 100)``; the (100,) fragment's max too."""

    @T.prim_func
    def odd(X: T.Tensor((6, n), T.float32), Y: T.Tensor((6, n), T.float32), S: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=threads):
            f = T.alloc_fragment((n,), T.float32)
            g = T.alloc_fragment((6, n), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            s2 = T.alloc_fragment((1,), T.float32)
            for i in T.Parallel(n):
                f[i] = X[2, i] * 2.0
            T.reduce_sum(f, s, dim=0)
            for r, c in T.Parallel(6, n):
                g[r, c] = X[r, c] + f[c]
            T.copy(g, Y)
            T.reduce_max(f, s2, dim=0)
            S[0] = s[0]
            S[1] = s2[0]
    return odd


def elementwise_4d_tails(B=3, C=5, H=7, W=37, bh=4, bw=16, threads=96):
    """Y[b, c, h, w] = X[b, c, h, w] * scale[c] + shift[c] over tiles of (bh, bw) that run
    past H and W, a block per (w-tile, h-tile, b * C + c), ``T.copy`` of the 4-D slice in
    and out through a fragment, 96 threads."""

    @T.prim_func
    def ew(X: T.Tensor((B, C, H, W), T.float16), scale: T.Tensor((C,), T.float32),
           shift: T.Tensor((C,), T.float32), Y: T.Tensor((B, C, H, W), T.float16)):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), B * C, threads=threads) as (bx, by, bz):
            b = bz // C
            c = bz % C
            t = T.alloc_fragment((bh, bw), T.float16)
            T.copy(X[b, c, by * bh:(by + 1) * bh, bx * bw:(bx + 1) * bw], t)
            for i, j in T.Parallel(bh, bw):
                t[i, j] = T.cast(T.cast(t[i, j], T.float32) * scale[c] + shift[c], T.float16)
            T.copy(t, Y[b, c, by * bh:(by + 1) * bh, bx * bw:(bx + 1) * bw])
    return ew


def parallel_4d_loop(B=2, C=3, H=5, W=9):
    """A ``T.Parallel`` over four dims of a whole small 4-D tensor in one block of 32
    threads (270 elements), with a permuted store Y[w, h, c, b]."""

    @T.prim_func
    def p4(X: T.Tensor((B, C, H, W), T.float32), Y: T.Tensor((W, H, C, B), T.float32)):
        with T.Kernel(1, threads=32):
            for b, c, h, w in T.Parallel(B, C, H, W):
                Y[w, h, c, b] = X[b, c, h, w] + T.cast(b * 1000 + c * 100 + h * 10 + w, T.float32)
    return p4


def copy_3d_boundary(D0=5, D1=70, D2=45, b1=32, b2=32):
    """3-D tiles (1, b1, b2) of a (D0, D1, D2) tensor staged in shared with ``T.copy``
    (the tile runs past D1 and D2), transposed in shared (``T.Parallel``), and written to a
    (D0, D2, D1) tensor by ``T.copy`` of a 3-D destination slice that also runs past the
    end."""

    @T.prim_func
    def c3(X: T.Tensor((D0, D1, D2), T.float32), Y: T.Tensor((D0, D2, D1), T.float32)):
        with T.Kernel(T.ceildiv(D2, b2), T.ceildiv(D1, b1), D0, threads=128) as (bx, by, bz):
            s = T.alloc_shared((1, b1, b2), T.float32)
            st = T.alloc_shared((1, b2, b1), T.float32)
            T.copy(X[bz:bz + 1, by * b1:(by + 1) * b1, bx * b2:(bx + 1) * b2], s)
            for i, j in T.Parallel(b2, b1):
                st[0, i, j] = s[0, j, i] + 0.5
            T.copy(st, Y[bz:bz + 1, bx * b2:(bx + 1) * b2, by * b1:(by + 1) * b1])
    return c3


def reduce_1d_tail_atomic(n=1000, block=320, threads=160):
    """A 1-D sum and abs-max over a vector of n (not a multiple of the block): each block
    loads its chunk into a fragment (zero past n for the sum, the max over |x| also sees
    zeros), ``T.reduce_sum`` / ``T.reduce_absmax`` into (1,) fragments (every thread holds
    the result), then a float32 ``T.atomic_add`` from thread 0 (an element atomic runs in
    every thread that reaches it) and a ``T.atomic_max`` from every thread; 160 threads."""

    @T.prim_func
    def r1(X: T.Tensor((n,), T.float32), Out: T.Tensor((2,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            f = T.alloc_fragment((block,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            m = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx * block:(bx + 1) * block], f)
            T.reduce_sum(f, s, dim=0)
            T.reduce_absmax(f, m, dim=0)
            if T.get_thread_binding() == 0:
                T.atomic_add(Out[0], s[0])
            T.atomic_max(Out[1], m[0])
    return r1


def softmax_single_warp_ragged(M=10, N=200, bn=256):
    """Row softmax in blocks of one warp (32 threads): a row of N = 200 in a (1, 256)
    fragment, the padding filled with -inf by ``T.if_then_else`` so it adds exp(-inf) = 0,
    ``T.reduce_max`` / ``T.reduce_sum`` along dim 1, the store guarded by the column."""

    @T.prim_func
    def sm(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=32) as bx:
            f = T.alloc_fragment((1, bn), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            sm_ = T.alloc_fragment((1,), T.float32)
            for i, j in T.Parallel(1, bn):
                f[i, j] = T.if_then_else(j < N, X[bx, j], -T.infinity(T.float32))
            T.reduce_max(f, mx, dim=1)
            for i, j in T.Parallel(1, bn):
                f[i, j] = T.exp(f[i, j] - mx[i])
            T.reduce_sum(f, sm_, dim=1)
            for i, j in T.Parallel(1, bn):
                if j < N:
                    Y[bx, j] = f[i, j] / sm_[i]
    return sm


# ---- GEMMs ------------------------------------------------------------------------------
def gemm_bm16_one_warp(M=50, N=72, K=88, bm=16, bn=32, bk=32):
    """C = A @ B in fp16 with float32 accumulation, tiles of 16 x 32 in a block of one warp
    (32 threads, mma.sync), tails on M, N and K (the K tail read as zeros)."""

    @T.prim_func
    def g16(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=32) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return g16


def gemm_bm32_transpose_a(M=96, N=80, K=72, bm=32, bn=64, bk=32, threads=64):
    """C = A^T @ B with A stored (K, M): ``transpose_A=True`` on tiles of 32 x 64 in two
    warps, bf16 in, float32 out, N and K tails."""

    @T.prim_func
    def gta(A: T.Tensor((K, M), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bk, bm), T.bfloat16)
            b_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[k * bk, by * bm], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, transpose_A=True)
            T.copy(acc, C[by * bm, bx * bn])
    return gta


def gemm_ragged_3_stages_swizzle(M=200, N=136, K=100, bm=64, bn=64, bk=32):
    """bf16 GEMM with tails on M, N and K at 3 stages on the wgmma path (128 threads),
    ``T.use_swizzle(4)``, bf16 output through a fragment cast."""

    @T.prim_func
    def gr(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            b_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            out = T.alloc_fragment((bm, bn), T.bfloat16)
            T.use_swizzle(4)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, out)
            T.copy(out, C[by * bm, bx * bn])
    return gr


def gemm_int8_transposes(M=128, N=96, K=128, ta=False, tb=False, bm=64, bn=32, bk=64, threads=128):
    """int8 x int8 -> int32 with A stored (K, M) when ``ta`` and B stored (N, K) when ``tb``
    (TileLang's transpose flags), N a multiple of 32 but not of 64."""
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    a_tile = (bk, bm) if ta else (bm, bk)
    b_tile = (bn, bk) if tb else (bk, bn)

    @T.prim_func
    def gi8(A: T.Tensor(a_shape, T.int8), B: T.Tensor(b_shape, T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared(a_tile, T.int8)
            b_s = T.alloc_shared(b_tile, T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                if ta:
                    T.copy(A[k * bk, by * bm], a_s)
                else:
                    T.copy(A[by * bm, k * bk], a_s)
                if tb:
                    T.copy(B[bx * bn, k * bk], b_s)
                else:
                    T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, transpose_A=ta, transpose_B=tb)
            T.copy(acc, C[by * bm, bx * bn])
    return gi8


def gemm_int8_both_transposed():
    return gemm_int8_transposes(ta=True, tb=True)


def gemm_int8_transpose_a_only():
    return gemm_int8_transposes(ta=True, tb=False)


def gemm_fp8_mixed_formats(M=128, N=128, K=128, bm=64, bn=64, bk=64):
    """A in float8_e4m3, B in float8_e5m2 (B stored (N, K), ``transpose_B``), float32
    accumulation and output, on wgmma (128 threads)."""

    @T.prim_func
    def g8(A: T.Tensor((M, K), T.float8_e4m3fn), B: T.Tensor((N, K), T.float8_e5m2),
           C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float8_e4m3fn)
            b_s = T.alloc_shared((bn, bk), T.float8_e5m2)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return g8


def streamk_gemm(M=128, N=128, K=256, bm=64, bn=64, bk=32, sms=6):
    """Stream-K: ``sms`` blocks share the (tiles x k-iterations) work; block b takes
    iterations [b * per, min((b + 1) * per, total)) in order, accumulating into its
    accumulator while the tile stays the same and adding the partial tile to C (zeroed
    first) by a float32 tile ``T.atomic_add`` whenever the tile changes or its range
    ends."""
    tiles_n = N // bn
    k_iters = K // bk
    total = (M // bm) * tiles_n * k_iters
    per = (total + sms - 1) // sms

    @T.prim_func
    def sk(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(sms, threads=128) as b:
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            start = b * per
            stop = T.min(start + per, total)
            it = T.alloc_var(T.int32, init=start)
            while it < stop:
                tile = it // k_iters
                k0 = it % k_iters
                tm = tile // tiles_n
                tn = tile % tiles_n
                k_end = T.min(k_iters, k0 + (stop - it))
                T.clear(acc)
                for k in T.serial(k0, k_end):
                    T.copy(A[tm * bm, k * bk], a_s)
                    T.copy(B[tn * bn, k * bk], b_s)
                    T.gemm(a_s, b_s, acc, transpose_B=True)
                T.atomic_add(C[tm * bm:(tm + 1) * bm, tn * bn:(tn + 1) * bn], acc)
                it = it + (k_end - k0)
    return sk


def back_to_back_gemm(M=128, D=64, H=96, bm=64):
    """Y = relu(X @ W1) @ W2 per row block: the first accumulator cast to fp16 into shared
    memory (``T.copy`` fragment -> shared) and used as the A operand of the second GEMM;
    W1 (D, H) and W2 (H, D) whole in shared."""

    @T.prim_func
    def b2b(X: T.Tensor((M, D), T.float16), W1: T.Tensor((D, H), T.float16), W2: T.Tensor((H, D), T.float16),
            Y: T.Tensor((M, D), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_s = T.alloc_shared((bm, D), T.float16)
            w1_s = T.alloc_shared((D, H), T.float16)
            w2_s = T.alloc_shared((H, D), T.float16)
            h_s = T.alloc_shared((bm, H), T.float16)
            h = T.alloc_fragment((bm, H), T.float32)
            y = T.alloc_fragment((bm, D), T.float32)
            T.copy(X[bx * bm, 0], x_s)
            T.copy(W1, w1_s)
            T.copy(W2, w2_s)
            T.gemm(x_s, w1_s, h, clear_accum=True)
            for i, j in T.Parallel(bm, H):
                h[i, j] = T.max(h[i, j], 0.0)
            T.copy(h, h_s)
            T.gemm(h_s, w2_s, y, clear_accum=True)
            T.copy(y, Y[bx * bm, 0])
    return b2b


def splitk_fp16_output_atomics(M=64, N=128, K=256, bm=64, bn=64, bk=32, splits=4):
    """Split-K whose partial float32 accumulators are added into a float16 C (zeroed
    first) by a tile ``T.atomic_add`` (TileLang converts each value to the destination's
    dtype); integer-valued inputs keep every partial sum exact."""
    kps = K // splits

    @T.prim_func
    def sk16(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kps // bk, num_stages=2):
                T.copy(A[by * bm, bz * kps + k * bk], a_s)
                T.copy(B[bz * kps + k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.atomic_add(C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], acc)
    return sk16


def batched_gemm_3d_grid_scaled(Bt=3, M=64, N=96, K=64, bm=64, bn=32, bk=32):
    """C[b] = scale[b] * (A[b] @ B[b]^T) + bias[b, :]: batch on the grid's third dim, B
    stored (Bt, N, K), the epilogue in a ``T.Parallel`` over the accumulator reading a
    per-batch scalar and a bias row, the result through shared to global."""

    @T.prim_func
    def bg(A: T.Tensor((Bt, M, K), T.float16), B: T.Tensor((Bt, N, K), T.float16),
           scale: T.Tensor((Bt,), T.float32), bias: T.Tensor((Bt, N), T.float32),
           C: T.Tensor((Bt, M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, Bt, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            c_s = T.alloc_shared((bm, bn), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[bz, by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], a_s)
                T.copy(B[bz, bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = acc[i, j] * scale[bz] + bias[bz, bx * bn + j]
            T.copy(acc, c_s)
            T.copy(c_s, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return bg


def gemm_sigmoid_rowscale_bf16(M=128, N=128, K=96, bm=64, bn=128, bk=32):
    """bf16 GEMM, then per element bias[j] + sigmoid written as 1 / (1 + exp(-x)), times a
    per-row scale, stored as float32 through a shared tile; 256 threads (two warpgroups)."""

    @T.prim_func
    def gs(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), bias: T.Tensor((N,), T.float32),
           rs: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            b_s = T.alloc_shared((bk, bn), T.bfloat16)
            c_s = T.alloc_shared((bm, bn), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(bm, bn):
                z = acc[i, j] + bias[bx * bn + j]
                acc[i, j] = rs[by * bm + i] / (1.0 + T.exp(-z))
            T.copy(acc, c_s)
            T.copy(c_s, C[by * bm, bx * bn])
    return gs


# ---- normalizations and reductions ------------------------------------------------------
def layernorm_ragged_row(M=40, N=300, bn=512, bm=4, threads=128):
    """LayerNorm of rows of N = 300 in (4, 512) fragments: the padding loaded as 0 by a
    ragged ``T.copy``, the mean from ``T.reduce_sum`` divided by N (not by the tile), the
    centred squares masked to 0 past N with ``T.if_then_else`` before the variance sum;
    fp16 in and out, float32 weight and bias."""

    @T.prim_func
    def ln(X: T.Tensor((M, N), T.float16), W: T.Tensor((N,), T.float32), Bs: T.Tensor((N,), T.float32),
           Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            xh = T.alloc_fragment((bm, bn), T.float16)
            x = T.alloc_fragment((bm, bn), T.float32)
            sq = T.alloc_fragment((bm, bn), T.float32)
            mean = T.alloc_fragment((bm,), T.float32)
            var = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], xh)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = T.cast(xh[i, j], T.float32)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(bm):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(bm, bn):
                sq[i, j] = T.if_then_else(j < N, (x[i, j] - mean[i]) * (x[i, j] - mean[i]), 0.0)
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(bm):
                var[i] = T.rsqrt(var[i] / N + 1e-5)
            for i, j in T.Parallel(bm, bn):
                if bx * bm + i < M and j < N:
                    Y[bx * bm + i, j] = T.cast((x[i, j] - mean[i]) * var[i] * W[j] + Bs[j], T.float16)
    return ln


def rmsnorm_96_threads(M=24, N=192, bm=2):
    """RMSNorm in blocks of 96 threads, two rows a block: squares in a fragment, the mean
    square by ``T.reduce_sum``, bf16 weight times the bf16 input in float32, bf16 out."""

    @T.prim_func
    def rms(X: T.Tensor((M, N), T.bfloat16), W: T.Tensor((N,), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(M // bm, threads=96) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            sq = T.alloc_fragment((bm, N), T.float32)
            ms = T.alloc_fragment((bm,), T.float32)
            for i, j in T.Parallel(bm, N):
                x[i, j] = X[bx * bm + i, j]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ms, dim=1)
            for i, j in T.Parallel(bm, N):
                Y[bx * bm + i, j] = T.cast(x[i, j] * T.rsqrt(ms[i] / N + 1e-6) * T.cast(W[j], T.float32),
                                           T.bfloat16)
    return rms


def column_stats_chunks_clear_false(M=100, N=64, bm=32):
    """Column sum, max and min of an (M, N) matrix over chunks of 32 rows with
    ``reduce_*(dim=0, clear=False)`` (accumulating into fragments filled once), the last
    chunk ragged: its rows past M padded with 0 for the sum, -inf for the max and +inf for
    the min by ``T.if_then_else``."""

    @T.prim_func
    def cs(X: T.Tensor((M, N), T.float32), O: T.Tensor((3, N), T.float32)):
        with T.Kernel(1, threads=128):
            t = T.alloc_fragment((bm, N), T.float32)
            u = T.alloc_fragment((bm, N), T.float32)
            w = T.alloc_fragment((bm, N), T.float32)
            s = T.alloc_fragment((N,), T.float32)
            mx = T.alloc_fragment((N,), T.float32)
            mn = T.alloc_fragment((N,), T.float32)
            T.clear(s)
            T.fill(mx, -T.infinity(T.float32))
            T.fill(mn, T.infinity(T.float32))
            for c in T.serial(T.ceildiv(M, bm)):
                for i, j in T.Parallel(bm, N):
                    inb = c * bm + i < M
                    t[i, j] = T.if_then_else(inb, X[c * bm + i, j], 0.0)
                    u[i, j] = T.if_then_else(inb, X[c * bm + i, j], -T.infinity(T.float32))
                    w[i, j] = T.if_then_else(inb, X[c * bm + i, j], T.infinity(T.float32))
                T.reduce_sum(t, s, dim=0, clear=False)
                T.reduce_max(u, mx, dim=0, clear=False)
                T.reduce_min(w, mn, dim=0, clear=False)
            for j in T.Parallel(N):
                O[0, j] = s[j]
                O[1, j] = mx[j]
                O[2, j] = mn[j]
    return cs


def reducer_ragged_rows(M=77, N=48, bm=16):
    """Column sums, minima (``T.reducer_init`` with an init value) and bit-xors (int32) by
    ``T.alloc_reducer`` epochs over two chunks of 16 rows a block (the last block ragged:
    ``T.reducer_update`` under an ``if``), ``T.finalize_reducer`` into fragments; the sums added across blocks by
    ``T.atomic_add``, each block's minima and xors stored in its own row."""

    @T.prim_func
    def rr(X: T.Tensor((M, N), T.float32), XI: T.Tensor((M, N), T.int32), S: T.Tensor((N,), T.float32),
           MN: T.Tensor((T.ceildiv(M, 32), N), T.float32), XR: T.Tensor((T.ceildiv(M, 32), N), T.int32)):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            rs = T.alloc_reducer((N,), T.float32, op="sum")
            rm = T.alloc_reducer((N,), T.float32, op="min")
            rx = T.alloc_reducer((N,), T.int32, op="bitxor")
            T.reducer_init(rs)
            T.reducer_init(rm, 1.0e30)
            T.reducer_init(rx)
            for c in T.serial(2):
                for i, j in T.Parallel(bm, N):
                    r = bx * 32 + c * bm + i
                    if r < M:
                        T.reducer_update(rs[j], X[r, j])
                        T.reducer_update(rm[j], X[r, j])
                        T.reducer_update(rx[j], XI[r, j])
            fs = T.alloc_fragment((N,), T.float32)
            fm = T.alloc_fragment((N,), T.float32)
            fx = T.alloc_fragment((N,), T.int32)
            T.finalize_reducer(rs, fs)
            T.finalize_reducer(rm, fm)
            T.finalize_reducer(rx, fx)
            for j in T.Parallel(N):
                T.atomic_add(S[j], fs[j])
                MN[bx, j] = fm[j]
                XR[bx, j] = fx[j]
    return rr


def shared_reduce_dim0_int(M=64, N=32):
    """``T.reduce_sum`` / ``T.reduce_max`` / ``T.reduce_bitor`` along dim 0 of an int32
    tile in *shared* memory, into fragments, and ``T.reduce_min`` into a shared (N,)
    buffer."""

    @T.prim_func
    def rs(X: T.Tensor((M, N), T.int32), O: T.Tensor((4, N), T.int32)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((M, N), T.int32)
            a = T.alloc_fragment((N,), T.int32)
            b = T.alloc_fragment((N,), T.int32)
            c = T.alloc_fragment((N,), T.int32)
            d = T.alloc_shared((N,), T.int32)
            T.copy(X, s)
            T.reduce_sum(s, a, dim=0)
            T.reduce_max(s, b, dim=0)
            T.reduce_bitor(s, c, dim=0)
            T.reduce_min(s, d, dim=0)
            for j in T.Parallel(N):
                O[0, j] = a[j]
                O[1, j] = b[j]
                O[2, j] = c[j]
                O[3, j] = d[j]
    return rs


def online_softmax_chunks(M=16, N=400, bn=128):
    """A row softmax over chunks of 128 columns with the online rescaling (running max m
    and sum l carried in fragments across a ``T.serial`` loop, the last chunk ragged and
    masked to -inf), a second pass writing exp(x - m) / l; four rows a block, 128
    threads."""

    @T.prim_func
    def osm(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // 4, threads=128) as bx:
            t = T.alloc_fragment((4, bn), T.float32)
            m = T.alloc_fragment((4,), T.float32)
            m_new = T.alloc_fragment((4,), T.float32)
            l = T.alloc_fragment((4,), T.float32)
            ls = T.alloc_fragment((4,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.fill(m_new, -T.infinity(T.float32))
            T.clear(l)
            for c in T.serial(T.ceildiv(N, bn)):
                for i, j in T.Parallel(4, bn):
                    t[i, j] = T.if_then_else(c * bn + j < N, X[bx * 4 + i, c * bn + j], -T.infinity(T.float32))
                T.reduce_max(t, m_new, dim=1, clear=False)
                for i, j in T.Parallel(4, bn):
                    t[i, j] = T.exp(t[i, j] - T.max(m_new[i], m[i]))
                T.reduce_sum(t, ls, dim=1)
                for i in T.Parallel(4):
                    l[i] = l[i] * T.exp(m[i] - m_new[i]) + ls[i]
                    m[i] = m_new[i]
            for c in T.serial(T.ceildiv(N, bn)):
                for i, j in T.Parallel(4, bn):
                    if c * bn + j < N:
                        Y[bx * 4 + i, c * bn + j] = T.exp(X[bx * 4 + i, c * bn + j] - m[i]) / l[i]
    return osm


# ---- control flow and composition -------------------------------------------------------
@T.macro
def _load_scaled(src, dst, row0, alpha):
    """A macro with a buffer, a tile origin and a float scalar: dst = alpha * src[row0:]."""
    for i, j in T.Parallel(16, 32):
        dst[i, j] = src[row0 + i, j] * alpha


@T.macro
def _row_max_into(tile, out, row0, nrows):
    """A macro that reduces its tile and writes only the rows below ``nrows``."""
    mx = T.alloc_fragment((16,), T.float32)
    T.reduce_max(tile, mx, dim=1)
    for i in T.Parallel(16):
        if row0 + i < nrows:
            out[row0 + i] = mx[i]


def macro_scalar_args(M=40, alpha=0.5):
    """Two ``T.macro`` pieces taking buffers and scalars (a run-time tile origin, a Python
    float, the row count), called in a loop whose trip count is ``ceildiv(M, 16)``; the
    source rows past M are read from a zero-padded shared copy."""

    @T.prim_func
    def mac(X: T.Tensor((M, 32), T.float32), Y: T.Tensor((M, 32), T.float32), R: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((T.ceildiv(M, 16) * 16, 32), T.float32)
            f = T.alloc_fragment((16, 32), T.float32)
            T.clear(s)
            T.copy(X, s[0:M, 0:32])
            for t in T.serial(T.ceildiv(M, 16)):
                _load_scaled(s, f, t * 16, alpha)
                _row_max_into(f, R, t * 16, M)
                T.copy(f, Y[t * 16:(t + 1) * 16, 0:32])
    return mac


def collatz_while(n=256, cap=200):
    """Per thread a ``while`` loop over ``T.alloc_var`` state with a data-dependent exit
    (the Collatz walk from X[i]: x // 2 when even (x % 2 == 0), 3x + 1 otherwise) and a
    step cap; writes the step count and the largest value met (int64)."""

    @T.prim_func
    def cz(X: T.Tensor((n,), T.int64), S: T.Tensor((n,), T.int32), P: T.Tensor((n,), T.int64)):
        with T.Kernel(n // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_var(T.int64)
            steps = T.alloc_var(T.int32)
            peak = T.alloc_var(T.int64)
            x = X[bx * 128 + tx]
            steps = 0
            peak = x
            while x != 1 and steps < cap:
                if x % 2 == 0:
                    x = x // 2
                else:
                    x = 3 * x + 1
                peak = T.max(peak, x)
                steps = steps + 1
            S[bx * 128 + tx] = steps
            P[bx * 128 + tx] = peak
    return cz


def block_role_branches(n=512):
    """Blocks by index: block 0 reduces the whole of X into a scalar through a shared
    buffer and ``T.reduce_sum``, the last block writes a ramp, the blocks between scale
    their slice; ``if`` / ``elif`` / ``else`` on ``bx`` with allocations in each branch."""

    @T.prim_func
    def roles(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), S: T.Tensor((1,), T.float32)):
        with T.Kernel(n // 128 + 2, threads=128) as bx:
            if bx == 0:
                sh = T.alloc_shared((n,), T.float32)
                tot = T.alloc_fragment((1,), T.float32)
                T.copy(X, sh)
                T.reduce_sum(sh, tot, dim=0)
                S[0] = tot[0]
            elif bx == n // 128 + 1:
                for i in T.Parallel(128):
                    Y[i] = Y[i] + T.cast(i, T.float32)
            else:
                f = T.alloc_fragment((128,), T.float32)
                T.copy(X[(bx - 1) * 128:bx * 128], f)
                for i in T.Parallel(128):
                    f[i] = f[i] * T.cast(bx, T.float32)
                if bx != 1:
                    T.copy(f, Y[(bx - 1) * 128:bx * 128])
    return roles


def nested_pipelined_heads(H=3, S=256, D=64, bs=64):
    """A ``T.Pipelined`` over heads around a ``T.Pipelined`` over sequence blocks: per
    head the column sums of X[h] (S, D) accumulate in a fragment from the inner loop's
    staged tiles (``T.reduce_sum(dim=0, clear=False)``); the outer loop stages a per-head
    scale row."""

    @T.prim_func
    def nest(X: T.Tensor((H, S, D), T.float16), Sc: T.Tensor((H, D), T.float32), O: T.Tensor((H, D), T.float32)):
        with T.Kernel(1, threads=128):
            sc = T.alloc_shared((D,), T.float32)
            xs = T.alloc_shared((bs, D), T.float16)
            xf = T.alloc_fragment((bs, D), T.float32)
            acc = T.alloc_fragment((D,), T.float32)
            for h in T.Pipelined(H, num_stages=1):
                T.copy(Sc[h, 0:D], sc)
                T.clear(acc)
                for s in T.Pipelined(S // bs, num_stages=2):
                    T.copy(X[h, s * bs:(s + 1) * bs, 0:D], xs)
                    T.copy(xs, xf)
                    T.reduce_sum(xf, acc, dim=0, clear=False)
                for j in T.Parallel(D):
                    O[h, j] = acc[j] * sc[j]
    return nest


def grid_3d_cluster(X0=4, X1=3, X2=2, n=64):
    """``T.ClusterKernel`` over three grid dims with a (2, 1, 1) cluster: each block writes its
    flattened block id and cluster rank and adds a per-block offset to its slice."""

    @T.prim_func
    def g3(A: T.Tensor((X2, X1, X0 * n), T.float32), B: T.Tensor((X2, X1, X0 * n), T.float32),
           ID: T.Tensor((X2, X1, X0), T.int32)):
        with T.ClusterKernel(X0, X1, X2, cluster_dims=(2, 1, 1), threads=n) as (bx, by, bz):
            tx = T.get_thread_binding()
            B[bz, by, bx * n + tx] = A[bz, by, bx * n + tx] + T.cast(bz * 100 + by * 10 + bx, T.float32)
            if tx == 0:
                ID[bz, by, bx] = (bz * X1 + by) * X0 + bx + 1000 * T.block_rank_in_cluster()
    return g3


# ---- memory -----------------------------------------------------------------------------
def shared_to_shared_casts(M=64, N=64):
    """``T.copy`` between shared buffers: float32 -> float16 (a dtype change), a 32 x 32
    window of one shared buffer into the origin of another at an offset, and a bf16
    shared tile to a float32 fragment; all three written out."""

    @T.prim_func
    def s2s(X: T.Tensor((M, N), T.float32), H: T.Tensor((M, N), T.float16), W: T.Tensor((32, 32), T.float32),
            F: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, N), T.float32)
            h = T.alloc_shared((M, N), T.float16)
            w = T.alloc_shared((48, 48), T.float32)
            bf = T.alloc_shared((M, N), T.bfloat16)
            f = T.alloc_fragment((M, N), T.float32)
            T.copy(X, a)
            T.copy(a, h)
            T.fill(w, -1.0)
            T.copy(a[16:48, 8:40], w[8:40, 4:36])
            T.copy(h, bf)
            T.copy(bf, f)
            T.copy(h, H)
            T.copy(w[8:40, 4:36], W)
            T.copy(f, F)
    return s2s


def swizzled_transpose_annotated(M=128, N=96, bm=32, bn=32):
    """A tiled transpose through a float16 shared tile annotated with
    ``make_swizzled_layout`` (``tilelang.layout``'s): ``T.copy`` in, a transposed ``T.Parallel`` read of the
    swizzled tile into a fragment, ``T.copy`` out."""

    @T.prim_func
    def tr(X: T.Tensor((M, N), T.float16), Y: T.Tensor((N, M), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float16)
            f = T.alloc_fragment((bn, bm), T.float16)
            T.annotate_layout({s: make_swizzled_layout(s)})
            T.copy(X[by * bm, bx * bn], s)
            for i, j in T.Parallel(bn, bm):
                f[i, j] = s[j, i]
            T.copy(f, Y[bx * bn, by * bm])
    return tr


def fill_clear_every_scope(n=128):
    """``T.fill`` of a global slice, a shared buffer, a fragment and a local buffer;
    ``T.clear`` of a shared slice and a fragment slice; the buffers summed into the
    outputs so every fill shows."""

    @T.prim_func
    def fills(G: T.Tensor((4, n), T.float32), O: T.Tensor((3, n), T.float32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), T.float32)
            f = T.alloc_fragment((n,), T.float32)
            loc = T.alloc_local((4,), T.float32)
            T.fill(G[1, 32:96], 7.0)
            T.fill(s, 2.5)
            T.fill(f, -1.5)
            T.fill(loc, 0.25)
            T.sync_threads()
            T.clear(s[0:16])
            T.clear(f[n - 8:n])
            T.sync_threads()
            for i in T.Parallel(n):
                O[0, i] = s[i] + f[i]
            O[1, tx] = loc[0] + loc[3] + T.cast(tx, T.float32)
            O[2, tx] = G[1, tx]
    return fills


def tile_atomics_half_bf16(M=64, N=64, K=4):
    """K blocks add the same-shaped tiles into float16 and bfloat16 outputs by tile
    ``T.atomic_add`` of a fragment (float32 values converted to the destination's
    dtype) and of a shared float16 tile; integer-valued data keeps the sums exact."""

    @T.prim_func
    def ta(A: T.Tensor((K, M, N), T.float32), H: T.Tensor((M, N), T.float16), Bf: T.Tensor((M, N), T.bfloat16),
           H2: T.Tensor((M, N), T.float16)):
        with T.Kernel(K, threads=128) as bk:
            f = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_shared((M, N), T.float16)
            T.copy(A[bk, 0:M, 0:N], f)
            T.copy(f, s)
            T.atomic_add(H, f)
            T.atomic_add(Bf[0:M, 0:N], f)
            T.atomic_add(H2[0:M, 0:N], s)
    return ta


def epilogue_fragment_shared_global_offset(M=100, N=72, K=64, bm=64, bn=64):
    """A GEMM accumulator to a float16 shared tile, a 32-column half of it back to a
    fragment scaled by 2, and both halves to global at column offsets (the second half
    runs past N)."""

    @T.prim_func
    def ep(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, K), T.float16)
            b_s = T.alloc_shared((K, bn), T.float16)
            c_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            half = T.alloc_fragment((bm, 32), T.float16)
            T.copy(A[by * bm, 0], a_s)
            T.copy(B[0, bx * bn], b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True)
            T.copy(acc, c_s)
            T.copy(c_s[0:bm, 32:64], half)
            for i, j in T.Parallel(bm, 32):
                half[i, j] = half[i, j] * T.float16(2.0)
            T.copy(c_s[0:bm, 0:32], C[by * bm:(by + 1) * bm, bx * bn:bx * bn + 32])
            T.copy(half, C[by * bm:(by + 1) * bm, bx * bn + 32:bx * bn + 64])
    return ep


# ---- dtypes and numerics ----------------------------------------------------------------
def float_bit_tricks(n=256):
    """Bits through ``T.reinterpret``: the sign bit (x >> 31 of the uint32 bits), the
    unbiased exponent ((bits >> 23) & 0xFF) - 127 as int32, |x| by clearing the sign bit,
    the fast inverse square root's first guess 0x5f3759df - (bits >> 1) with one Newton
    step, and the next float up (bits + 1)."""

    @T.prim_func
    def bits(X: T.Tensor((n,), T.float32), I: T.Tensor((n, 2), T.int32), F: T.Tensor((n, 3), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for t in T.Parallel(128):
                i = bx * 128 + t
                u = T.reinterpret(X[i], T.uint32)
                I[i, 0] = T.cast(u >> T.uint32(31), T.int32)
                I[i, 1] = T.cast((u >> T.uint32(23)) & T.uint32(0xFF), T.int32) - 127
                F[i, 0] = T.reinterpret(u & T.uint32(0x7FFFFFFF), T.float32)
                ax = T.abs(X[i]) + 1e-3
                g = T.reinterpret(T.int32(0x5F3759DF) - (T.reinterpret(ax, T.int32) >> 1), T.float32)
                F[i, 1] = g * (1.5 - 0.5 * ax * g * g)
                F[i, 2] = T.reinterpret(u + T.uint32(1), T.float32)
    return bits


def astype_and_casts(n=256):
    """``x.astype(dtype)`` on loads and expressions next to ``T.cast``: float32 -> int32
    (toward zero), -> int8 of values in range, -> float16 -> float32 (rounding), bf16 math
    (a bf16 product rounded per op), uint8 -> float, int32 -> float64."""

    @T.prim_func
    def ast(X: T.Tensor((n,), T.float32), U: T.Tensor((n,), T.uint8), I: T.Tensor((n, 2), T.int32),
            F: T.Tensor((n, 3), T.float32), D: T.Tensor((n,), T.float64)):
        with T.Kernel(n // 64, threads=64) as bx:
            for t in T.Parallel(64):
                i = bx * 64 + t
                x = X[i]
                I[i, 0] = (x * 10.0).astype(T.int32)
                I[i, 1] = T.cast((x * 3.0).astype(T.int8), T.int32)
                F[i, 0] = x.astype(T.float16).astype(T.float32)
                F[i, 1] = (x.astype(T.bfloat16) * T.bfloat16(3.0)).astype(T.float32)
                F[i, 2] = U[i].astype(T.float32) * 0.5
                D[i] = (I[i, 0] * 7).astype(T.float64) / 3.0
    return ast


def nested_select_indices(n=300):
    """Nested ``T.if_then_else`` choosing both values and gather indices: a clamped
    reflection index (i < 0 -> -i, i >= n -> 2n - 2 - i) for a window of offsets -2..2,
    summed with weights; a three-way sign selection in int32."""

    @T.prim_func
    def sel(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), S: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            if i < n:
                for d in T.unroll(5):
                    j = i + d - 2
                    r = T.if_then_else(j < 0, -j, T.if_then_else(j >= n, 2 * n - 2 - j, j))
                    acc += X[r] * T.cast(d + 1, T.float32)
                Y[i] = acc
                S[i] = T.if_then_else(X[i] > 0.5, 1, T.if_then_else(X[i] < -0.5, -1, 0))
    return sel


def mixed_minmax_promotion(n=128):
    """``T.max`` / ``T.min`` of an int32 and a float32 (promoted to float32), of an int8
    and an int32 (int32), of float16 and float32 (float32), and ``T.clamp`` of an int
    by float bounds."""

    @T.prim_func
    def mm(I: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int8), H: T.Tensor((n,), T.float16),
           F: T.Tensor((n,), T.float32), O: T.Tensor((n, 4), T.float32), OI: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            t = T.get_thread_binding()
            O[t, 0] = T.max(I[t], F[t])
            O[t, 1] = T.min(H[t], F[t])
            O[t, 2] = T.clamp(T.cast(I[t], T.float32), -2.5, 2.5)
            O[t, 3] = T.max(T.cast(H[t], T.float32) * 2.0, T.cast(B[t], T.float32))
            OI[t] = T.min(T.cast(B[t], T.int32), I[t])
    return mm


def int_ops_narrow_unsigned(n=256):
    """uint16 / int16 arithmetic: a uint16 wrap-around sum, a signed right shift of
    negative int16 values, an unsigned right shift of uint16, xor / and / or mixes and
    ``~`` on uint8, floordiv / floormod of int16 by a negative constant."""

    @T.prim_func
    def nu(A: T.Tensor((n,), T.uint16), B: T.Tensor((n,), T.int16), C: T.Tensor((n,), T.uint8),
           O: T.Tensor((n, 6), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for t in T.Parallel(128):
                i = bx * 128 + t
                O[i, 0] = T.cast(A[i] + T.uint16(40000), T.int32)
                O[i, 1] = T.cast(B[i] >> T.int16(3), T.int32)
                O[i, 2] = T.cast(A[i] >> T.uint16(5), T.int32)
                O[i, 3] = T.cast((C[i] ^ T.uint8(0x5A)) & (~C[i] | T.uint8(0x0F)), T.int32)
                O[i, 4] = T.cast(B[i] // T.int16(-7), T.int32)
                O[i, 5] = T.cast(B[i] % T.int16(-7), T.int32)
    return nu


def fp8_e5m2_roundtrip(M=64, N=128):
    """Per-row fp8 e5m2 quantization: row abs-max by ``T.reduce_absmax``, the scale
    57344 / amax, values cast to float8_e5m2 and back (dequantized) in the same kernel."""

    @T.prim_func
    def q8(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float8_e5m2), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // 16, threads=128) as bx:
            x = T.alloc_fragment((16, N), T.float32)
            am = T.alloc_fragment((16,), T.float32)
            q = T.alloc_fragment((16, N), T.float8_e5m2)
            T.copy(X[bx * 16, 0], x)
            T.reduce_absmax(x, am, dim=1)
            for i, j in T.Parallel(16, N):
                q[i, j] = T.cast(x[i, j] * (57344.0 / T.max(am[i], 1e-4)), T.float8_e5m2)
            T.copy(q, Q[bx * 16, 0])
            for i, j in T.Parallel(16, N):
                Y[bx * 16 + i, j] = T.cast(q[i, j], T.float32) * (T.max(am[i], 1e-4) / 57344.0)
    return q8


# ---- dynamic shapes and strided arguments -----------------------------------------------
def dynamic_bias_tanh_gelu(bm=32, bn=64):
    """Y = gelu_tanh(X + b) over ``T.symbolic`` M and N (tiles ragged in both, staged by
    ``T.copy`` into a fragment), with ``T.tanh``; N also bounds a ``T.serial`` loop that
    writes each row's count of positive outputs through ``T.atomic_add``."""
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def gelu(X: T.Tensor((M, N), T.float32), b: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.float32),
             P: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            f = T.alloc_fragment((bm, bn), T.float32)
            T.copy(X[by * bm, bx * bn], f)
            for i, j in T.Parallel(bm, bn):
                z = f[i, j] + T.if_then_else(bx * bn + j < N, b[bx * bn + j], 0.0)
                f[i, j] = 0.5 * z * (1.0 + T.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))
            T.copy(f, Y[by * bm, bx * bn])
            if bx == 0:
                tx = T.get_thread_binding()
                if tx < bm and by * bm + tx < M:
                    cnt = T.alloc_var(T.int32, init=0)
                    for j in T.serial(N):
                        z = X[by * bm + tx, j] + b[j]
                        cnt += T.if_then_else(z > 0.0, 1, 0)
                    P[by * bm + tx] = cnt
    return gelu


def strided_column_major_rowsum(bm=64):
    """A column-major (M, N) argument, ``T.StridedTensor((M, N), (1, ld))`` with dynamic
    M, N and ld (a transposed torch view is passed): each block sums 64 rows' worth of
    columns elementwise (``T.Parallel`` reads) and copies its (bm, N) tile through shared
    into a contiguous output with ``T.copy`` from the strided source."""
    M, N, ld = T.dynamic("M"), T.dynamic("N"), T.dynamic("ld")

    @T.prim_func
    def cm(X: T.StridedTensor((M, N), (1, ld), T.float32), S: T.Tensor((M,), T.float32),
           Y: T.Tensor((M, 16), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=64) as bx:
            tx = T.get_thread_binding()
            sh = T.alloc_shared((bm, 16), T.float32)
            acc = T.alloc_var(T.float32, init=0.0)
            if bx * bm + tx < M:
                for j in T.serial(N):
                    acc += X[bx * bm + tx, j]
                S[bx * bm + tx] = acc
            T.copy(X[bx * bm, 0], sh)
            T.copy(sh, Y[bx * bm, 0])
    return cm


def strided_row_slices(bn=128):
    """Row-strided arguments (``T.StridedTensor((M, N), (s, 1))``, a column slice of a
    wider torch tensor) as the input and the output: Y = 2 X + 1 by a ``T.copy``-ed
    fragment, N ragged."""
    M, N, sx, sy = T.dynamic("M"), T.dynamic("N"), T.dynamic("sx"), T.dynamic("sy")

    @T.prim_func
    def rs(X: T.StridedTensor((M, N), (sx, 1), T.float16), Y: T.StridedTensor((M, N), (sy, 1), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), M, threads=128) as (bx, by):
            f = T.alloc_fragment((bn,), T.float16)
            T.copy(X[by, bx * bn:(bx + 1) * bn], f)
            for j in T.Parallel(bn):
                f[j] = f[j] * T.float16(2.0) + T.float16(1.0)
            T.copy(f, Y[by, bx * bn:(bx + 1) * bn])
    return rs


# ---- more forms: macro results, ternaries, small attention, wide GEMM, hashes -----------
@T.macro
def _gelu_erf(x):
    """A macro returning an expression."""
    return 0.5 * x * (1.0 + T.erf(x * 0.7071067811865476))


@T.macro
def _counter(start):
    """A macro returning a ``T.alloc_var`` (TileLang's frame result)."""
    return T.alloc_var(T.int32, init=start)


@T.macro
def _apply(x, fn):
    """A macro applying a Python function to its argument."""
    return fn(x)


def macro_results_and_ternaries(M=48, N=80):
    """Macro results used as values (an expression, a var that is then incremented in a
    loop, a lambda's result), the conditional expression ``a if cond else b`` on run-time
    conditions (TileLang's ternary) and chained comparisons ``lo <= x < hi``."""

    @T.prim_func
    def mr(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), C: T.Tensor((M,), T.int32)):
        with T.Kernel(M // 16, threads=128) as bx:
            for i, j in T.Parallel(16, N):
                x = X[bx * 16 + i, j]
                g = _gelu_erf(x)
                Y[bx * 16 + i, j] = (g if -1.0 <= x < 1.0 else _apply(x, lambda v: v * 3.0)) \
                    if j < N - 8 else 0.0
            tx = T.get_thread_binding()
            if tx < 16:
                cnt = _counter(0)
                for j in T.serial(N):
                    if 0.0 < X[bx * 16 + tx, j] <= 1.0:
                        cnt += 1
                C[bx * 16 + tx] = cnt
    return mr


def attention_two_warps(S=128, D=64, bm=32, bn=32):
    """Single-head attention forward in blocks of 64 threads (two warps: mma.sync, 16 query
    rows a warp with FullRow): Q K^T into a (32, 32) accumulator, online softmax with
    ``T.reduce_max`` / ``T.reduce_sum``, P cast to fp16 in a register fragment as the A
    operand of P V."""
    scale = (1.0 / D) ** 0.5

    @T.prim_func
    def attn(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16), V: T.Tensor((S, D), T.float16),
             O: T.Tensor((S, D), T.float32)):
        with T.Kernel(S // bm, threads=64) as bx:
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm, 0], q_s)
            T.clear(o)
            T.clear(l)
            T.fill(m, -T.infinity(T.float32))
            for t in T.Pipelined(S // bn, num_stages=2):
                T.copy(K[t * bn, 0], k_s)
                T.copy(V[t * bn, 0], v_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, ls, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp((m_prev[i] - m[i]) * scale) + ls[i]
                for i, j in T.Parallel(bm, D):
                    o[i, j] = o[i, j] * T.exp((m_prev[i] - m[i]) * scale)
                T.copy(s, p)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, D):
                o[i, j] = o[i, j] / l[i]
            T.copy(o, O[bx * bm, 0])
    return attn


def gemm_two_warpgroups_fullcol(M=128, N=256, K=128, bm=64, bn=256, bk=64):
    """A 64 x 256 tile in 256 threads with ``policy=FullCol`` (the two warpgroups split N,
    each a 64 x 128 wgmma), fp16 output cast in the epilogue, 2 stages."""

    @T.prim_func
    def gfc(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C[by * bm, bx * bn])
    return gfc


def float64_histogram_atomics(n=4096, bins=32):
    """A weighted histogram in float64: each element's bin from its value (floor of
    (x + 4) * 4, clamped to [0, bins)), ``T.atomic_add`` of the float64 weight into a
    global bin, and a per-block float64 sum of squares by a float64 ``T.reduce_sum``."""

    @T.prim_func
    def hist(X: T.Tensor((n,), T.float32), W: T.Tensor((n,), T.float64), H: T.Tensor((bins,), T.float64),
             SS: T.Tensor((n // 256,), T.float64)):
        with T.Kernel(n // 256, threads=128) as bx:
            w = T.alloc_fragment((256,), T.float64)
            s = T.alloc_fragment((1,), T.float64)
            for t in T.Parallel(256):
                i = bx * 256 + t
                b = T.clamp(T.cast(T.floor((X[i] + 4.0) * 4.0), T.int32), 0, bins - 1)
                T.atomic_add(H[b], W[i])
                w[t] = W[i] * W[i]
            T.reduce_sum(w, s, dim=0)
            SS[bx] = s[0]
    return hist


def uint32_hash_mix(n=512):
    """MurmurHash3's 32-bit finalizer and an xorshift step on uint32 (multiplications wrap
    modulo 2^32, right shifts logical), and a multiply-high by ``T.cast`` to uint64."""

    @T.prim_func
    def mix(K: T.Tensor((n,), T.uint32), H: T.Tensor((n, 3), T.uint32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for t in T.Parallel(128):
                i = bx * 128 + t
                h = K[i]
                h = h ^ (h >> T.uint32(16))
                h = h * T.uint32(0x85EBCA6B)
                h = h ^ (h >> T.uint32(13))
                h = h * T.uint32(0xC2B2AE35)
                h = h ^ (h >> T.uint32(16))
                H[i, 0] = h
                x = K[i] | T.uint32(1)
                x = x ^ (x << T.uint32(13))
                x = x ^ (x >> T.uint32(17))
                x = x ^ (x << T.uint32(5))
                H[i, 1] = x
                H[i, 2] = T.cast((T.cast(K[i], T.uint64) * T.uint64(0x9E3779B9)) >> T.uint64(32), T.uint32)
    return mix


def kernel_bound_scalars(n=256, bm=64):
    """Scalars bound inside the kernel, as TileLang binds them (Python values): ``inv =
    1 / bm`` is 0.015625 and ``third = bm / 3`` 21.33 (true division of Python ints),
    ``s = 0.3`` meets a float16 load as TileLang's float32 0.3 (a float32 product), ``stages = 2``
    is the pipeline depth and ``rev = True`` the scan direction."""

    @T.prim_func
    def ks(A: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float16), C: T.Tensor((n, 2), T.float32),
           D: T.Tensor((n,), T.float16), S: T.Tensor((n // bm, bm), T.float32)):
        with T.Kernel(n // bm, threads=bm) as bx:
            tx = T.get_thread_binding()
            blk = 64
            inv = 1 / blk
            third = blk / 3
            s = 0.3
            stages = 2
            rev = True
            i = bx * blk + tx
            C[i, 0] = A[i] * inv
            C[i, 1] = A[i] * third
            D[i] = H[i] * s
            sh = T.alloc_shared((blk,), T.float32)
            f = T.alloc_fragment((blk,), T.float32)
            for k in T.Pipelined(1, num_stages=stages):
                T.copy(A[bx * blk:(bx + 1) * blk], sh)
            T.copy(sh, f)
            T.cumsum(f, dim=0, reverse=rev)
            T.copy(f, S[bx, 0:blk])
    return ks


@T.macro
def _load_rows(A, r0):
    """A macro that allocates a fragment, fills it and returns it."""
    t = T.alloc_fragment((32, 64), T.float32)
    T.copy(A[r0, 0], t)
    return t


def _silu(x):
    """A plain Python helper on expressions."""
    return x / (1.0 + T.exp(-x))


@T.macro
def _row_max_sum(t):
    """A macro returning two fragments (a tuple)."""
    m = T.alloc_fragment((32,), T.float32)
    s = T.alloc_fragment((32,), T.float32)
    T.reduce_max(t, m, dim=1)
    T.reduce_sum(t, s, dim=1)
    return m, s


def macro_returns_buffers(M=64, N=64):
    """Macros returning the fragments they allocate (one, and a tuple of two unpacked by
    the caller) and a plain Python helper applied in a ``T.Parallel`` body: SiLU of a
    row block, its row maxima and sums."""

    @T.prim_func
    def mrb(A: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32), R: T.Tensor((M, 2), T.float32)):
        with T.Kernel(M // 32, threads=128) as bx:
            t = _load_rows(A, bx * 32)
            for i, j in T.Parallel(32, N):
                t[i, j] = _silu(t[i, j])
            m, s = _row_max_sum(t)
            T.copy(t, C[bx * 32, 0])
            for i in T.Parallel(32):
                R[bx * 32 + i, 0] = m[i]
                R[bx * 32 + i, 1] = s[i]
    return mrb


def gemm_strided_a_slice(N=128, K=128, bm=64, bn=64, bk=64):
    """C = A @ B where A is a column slice of a wider tensor (``T.StridedTensor((M, K),
    (sa, 1))``, M and sa dynamic: the K columns of a fused QKV-like tensor), staged by
    ``T.copy`` into shared (a TMA descriptor over the strided rows), 2 stages."""
    M, sa = T.dynamic("M"), T.dynamic("sa")

    @T.prim_func
    def gsa(A: T.StridedTensor((M, K), (sa, 1), T.float16), B: T.Tensor((K, N), T.float16),
            C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return gsa
