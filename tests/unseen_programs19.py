"""A nineteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), none of them a transformer: convolutions written as implicit-im2col GEMMs
(stride, dilation, padding, a K loop over taps and channel tiles, a flattened weight and
output view), depthwise and transposed convolutions, pooling, stencils whose halos are
loaded into shared memory, prefix scans over shared and fragment buffers, segmented
reductions driven by an offsets table, privatised histograms, a sort of a row in shared
memory, CSR sparse products with run-time loop bounds, a block-sparse GEMM skipping tiles by
a mask, gathers and scatters through index tensors, a padded transpose, and low-level
per-thread programs (``T.get_thread_binding``, warp shuffles, ``T.alloc_local`` arrays,
``T.vectorized`` / ``T.unroll`` loops, ``while`` loops over ``T.alloc_var``, integer and
bit arithmetic, float64).

``tests/test_unseen_programs19.py`` builds each to a cubin on the CPU, checks what each
means in the generated source, and on a GPU compares it with a torch reference.

Each factory is a ``@tilecute.jit`` function: calling it with its parameters gives the
compiled kernel (``out_idx`` outputs returned by the call)."""

import tilecute
import tilecute.language as T


# ---- convolutions as implicit GEMMs -------------------------------------------------------
@tilecute.jit(out_idx=[2])
def conv2d_nhwc_stride_dilation(N=2, H=19, W=21, C=32, F=64, KH=3, KW=3, stride=2, pad=2, dil=2,
                                block_M=64, block_N=64, block_K=32, threads=128):
    """NHWC conv with stride, dilation and zero padding as one GEMM over K = KH * KW * C:
    the A tile gathered from the image inside the K loop (``T.if_then_else`` on the image
    bounds), the weight (KH, KW, C, F) and output (N, OH, OW, F) seen flat through
    ``T.Tensor(..., X.data)`` views; M = N * OH * OW has a tail."""
    OH = (H + 2 * pad - dil * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (KW - 1) - 1) // stride + 1
    K = KH * KW * C
    M = N * OH * OW
    dtype, accum = "float16", "float"

    @T.prim_func
    def conv(X: T.Tensor((N, H, W, C), dtype), Wt: T.Tensor((KH, KW, C, F), dtype),
             Y: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            w_flat = T.Tensor((K, F), dtype, Wt.data)
            y_flat = T.Tensor((M, F), dtype, Y.data)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                for i, j in T.Parallel(block_M, block_K):
                    m = by * block_M + i
                    k = ko * block_K + j
                    n = m // (OH * OW)
                    oh = m % (OH * OW) // OW
                    ow = m % OW
                    kh = k // (KW * C)
                    kw = k // C % KW
                    c = k % C
                    ih = oh * stride + kh * dil - pad
                    iw = ow * stride + kw * dil - pad
                    inside = (m < M) and (ih >= 0) and (ih < H) and (iw >= 0) and (iw < W)
                    a_s[i, j] = T.if_then_else(inside, X[n, ih, iw, c], 0)
                T.copy(w_flat[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, y_flat[by * block_M, bx * block_N])
    return conv


@tilecute.jit(out_idx=[3])
def conv2d_nhwc_tap_loop(N=2, H=15, W=17, C=40, F=48, KS=3, pad=1, block_M=64, block_N=48, block_K=32,
                         threads=128):
    """NHWC conv written as a loop over the taps (kh, kw) and the channel tiles inside
    each: ``T.Pipelined(KS * KS * ceil(C / block_K))`` whose step picks a tap and a channel
    tile (C = 40: the last channel tile half empty, masked on c < C for the input and by
    the copy's bounds for the weight), bias and ReLU in the epilogue, output (N*H*W, F)
    with an M tail and F = 48 (a block_N of 48)."""
    M = N * H * W
    ct = (C + block_K - 1) // block_K
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def conv(X: T.Tensor((N, H, W, C), dtype), Wt: T.Tensor((KS, KS, C, F), dtype),
             Bias: T.Tensor((F,), accum), Y: T.Tensor((M, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            T.clear(acc)
            for step in T.Pipelined(KS * KS * ct, num_stages=2):
                tap = step // ct
                c0 = (step % ct) * block_K
                kh = tap // KS
                kw = tap % KS
                for i, j in T.Parallel(block_M, block_K):
                    m = by * block_M + i
                    n = m // (H * W)
                    ih = m % (H * W) // W + kh - pad
                    iw = m % W + kw - pad
                    ok = (m < M) and (c0 + j < C) and (ih >= 0) and (ih < H) and (iw >= 0) and (iw < W)
                    a_s[i, j] = T.if_then_else(ok, X[n, ih, iw, c0 + j], 0)
                T.copy(Wt[kh, kw, c0:c0 + block_K, bx * block_N:(bx + 1) * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.max(acc[i, j] + Bias[bx * block_N + j], 0)
            T.copy(acc, Y[by * block_M, bx * block_N])
    return conv


@tilecute.jit(out_idx=[2])
def conv1d_causal_dilated_gemm(B=2, L=300, C=64, F=64, KS=4, dil=3, block_M=64, block_N=64, block_K=64,
                               threads=128):
    """Causal dilated 1-D conv (NLC): y[b, t, f] = sum_{k, c} x[b, t - (KS-1-k) * dil, c] w[k, c, f],
    one GEMM step a tap (``T.serial`` over the taps, the shifted rows gathered by
    ``T.Parallel`` with a left zero pad); a block a (batch, time tile, F tile)."""
    dtype, accum = "float16", "float"

    @T.prim_func
    def conv(X: T.Tensor((B, L, C), dtype), Wt: T.Tensor((KS, C, F), dtype), Y: T.Tensor((B, L, F), accum)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(L, block_M), B, threads=threads) as (bx, by, bz):
            x_s = T.alloc_shared((block_M, block_K), dtype)
            w_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            T.clear(acc)
            for k in T.serial(KS):
                shift = (KS - 1 - k) * dil
                for c0 in T.serial(C // block_K):
                    for i, j in T.Parallel(block_M, block_K):
                        t = by * block_M + i - shift
                        x_s[i, j] = T.if_then_else(t >= 0 and t < L, X[bz, t, c0 * block_K + j], 0)
                    T.copy(Wt[k, c0 * block_K, bx * block_N], w_s)
                    T.gemm(x_s, w_s, acc)
            T.copy(acc, Y[bz, by * block_M, bx * block_N])
    return conv


@tilecute.jit(out_idx=[2])
def conv_transpose2d_gather(N=2, C=8, H=9, W=11, F=6, KS=4, stride=2, pad=1, threads=128):
    """Transposed conv (NCHW, weight (C, F, KS, KS) as torch's) as a gather: output pixel
    (oh, ow) takes input (ih, iw) where oh + pad - kh = ih * stride, found with ``%`` and
    ``//`` of numbers that go negative (TileLang's floor semantics: a negative numerator
    must not alias a valid tap), one thread an output element."""
    OH = (H - 1) * stride - 2 * pad + KS
    OW = (W - 1) * stride - 2 * pad + KS
    total = N * F * OH * OW

    @T.prim_func
    def convt(X: T.Tensor((N, C, H, W), "float32"), Wt: T.Tensor((C, F, KS, KS), "float32"),
              Y: T.Tensor((N, F, OH, OW), "float32")):
        with T.Kernel(T.ceildiv(total, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            idx = bx * threads + tx
            if idx < total:
                ow = idx % OW
                oh = idx // OW % OH
                f = idx // (OW * OH) % F
                n = idx // (OW * OH * F)
                acc = T.alloc_var("float32")
                acc = 0.0
                for kh, kw in T.grid(KS, KS):
                    th = oh + pad - kh
                    tw = ow + pad - kw
                    ih = th // stride
                    iw = tw // stride
                    if th % stride == 0 and tw % stride == 0 and ih >= 0 and ih < H and iw >= 0 and iw < W:
                        for c in T.serial(C):
                            acc += X[n, c, ih, iw] * Wt[c, f, kh, kw]
                Y[n, f, oh, ow] = acc
    return convt


@tilecute.jit(out_idx=[2])
def depthwise_conv2d_nhwc_halo(N=2, H=30, W=37, C=64, KS=3, pad=1, bh=8, bw=8, threads=256):
    """Depthwise NHWC conv, stride 1: a block a (bh x bw output pixels, all C channels); the
    input patch with its halo ((bh + KS - 1) x (bw + KS - 1) x C) loaded into shared memory
    with zero padding at the image edges (``T.if_then_else``), the filters (KS, KS, C) in
    shared, then each output element summed over the taps from shared memory."""
    PH, PW = bh + KS - 1, bw + KS - 1

    @T.prim_func
    def dw(X: T.Tensor((N, H, W, C), "float16"), Wt: T.Tensor((KS, KS, C), "float16"),
           Y: T.Tensor((N, H, W, C), "float16")):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), N, threads=threads) as (bx, by, bz):
            patch = T.alloc_shared((PH, PW, C), "float16")
            w_s = T.alloc_shared((KS, KS, C), "float16")
            out = T.alloc_fragment((bh, bw, C), "float")
            T.copy(Wt, w_s)
            for p, q, c in T.Parallel(PH, PW, C):
                ih = by * bh + p - pad
                iw = bx * bw + q - pad
                patch[p, q, c] = T.if_then_else(ih >= 0 and ih < H and iw >= 0 and iw < W, X[bz, ih, iw, c], 0)
            T.clear(out)
            for kh, kw in T.grid(KS, KS):
                for i, j, c in T.Parallel(bh, bw, C):
                    out[i, j, c] += T.cast(patch[i + kh, j + kw, c], "float") * T.cast(w_s[kh, kw, c], "float")
            for i, j, c in T.Parallel(bh, bw, C):
                if by * bh + i < H and bx * bw + j < W:
                    Y[bz, by * bh + i, bx * bw + j, c] = out[i, j, c]
    return dw


# ---- pooling ------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1, 2])
def maxpool2d_nhwc_argmax(N=2, H=21, W=18, C=32, KS=3, stride=2, pad=1, block_P=16, threads=128):
    """Max pooling (NHWC) with padding that never wins (-inf), returning the flat index
    ih * W + iw of the maximum (the first one in tap order, as torch's): a block a run of
    ``block_P`` output pixels, ``T.Parallel(block_P, C)`` over pixel and channel, the taps
    a ``T.unroll`` nest, running max and index in fragments."""
    OH = (H + 2 * pad - KS) // stride + 1
    OW = (W + 2 * pad - KS) // stride + 1
    P = N * OH * OW

    @T.prim_func
    def pool(X: T.Tensor((N, H, W, C), "float32"), Y: T.Tensor((N, OH, OW, C), "float32"),
             Idx: T.Tensor((N, OH, OW, C), "int64")):
        with T.Kernel(T.ceildiv(P, block_P), threads=threads) as bx:
            best = T.alloc_fragment((block_P, C), "float32")
            arg = T.alloc_fragment((block_P, C), "int64")
            T.fill(best, -T.infinity("float32"))
            T.fill(arg, -1)
            for kh in T.unroll(KS):
                for kw in T.unroll(KS):
                    for p, c in T.Parallel(block_P, C):
                        g = bx * block_P + p
                        n = g // (OH * OW)
                        oh = g // OW % OH
                        ow = g % OW
                        ih = oh * stride - pad + kh
                        iw = ow * stride - pad + kw
                        v = T.if_then_else(g < P and ih >= 0 and ih < H and iw >= 0 and iw < W,
                                           X[n, ih, iw, c], -T.infinity("float32"))
                        if v > best[p, c]:
                            best[p, c] = v
                            arg[p, c] = T.cast(ih * W + iw, "int64")
            for p, c in T.Parallel(block_P, C):
                g = bx * block_P + p
                if g < P:
                    Y[g // (OH * OW), g // OW % OH, g % OW, c] = best[p, c]
                    Idx[g // (OH * OW), g // OW % OH, g % OW, c] = arg[p, c]
    return pool


@tilecute.jit(out_idx=[1])
def avgpool1d_nlc_include_pad(B=3, L=101, C=48, KS=5, stride=3, pad=2, block_L=16, threads=128):
    """1-D average pooling over the L axis of an NLC tensor, zero padding counted in the
    divisor (count_include_pad=True, torch's default): the window's rows read straight
    from global memory with ``T.if_then_else``; the sum into a fragment ``T.clear``-ed per
    block."""
    OL = (L + 2 * pad - KS) // stride + 1

    @T.prim_func
    def pool(X: T.Tensor((B, L, C), "float16"), Y: T.Tensor((B, OL, C), "float16")):
        with T.Kernel(T.ceildiv(OL, block_L), B, threads=threads) as (bx, by):
            s = T.alloc_fragment((block_L, C), "float")
            T.clear(s)
            for k in T.serial(KS):
                for i, c in T.Parallel(block_L, C):
                    t = (bx * block_L + i) * stride - pad + k
                    s[i, c] += T.if_then_else(t >= 0 and t < L, T.cast(X[by, t, c], "float"), 0.0)
            for i, c in T.Parallel(block_L, C):
                if bx * block_L + i < OL:
                    Y[by, bx * block_L + i, c] = s[i, c] / KS
    return pool


# ---- stencils with halos in shared memory -------------------------------------------------
@tilecute.jit(out_idx=[1])
def stencil2d_9point_halo(H=70, W=100, bh=16, bw=32, threads=128):
    """A 3x3 box-plus-centre stencil y = 0.5 * x + 0.0625 * sum(8 neighbours) on a
    float32 grid with clamp-to-edge boundaries: the (bh + 2) x (bw + 2) tile with its halo
    loaded into shared memory (clamped indices), then the output from shared."""

    @T.prim_func
    def st(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), "float32")):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=threads) as (bx, by):
            tile = T.alloc_shared((bh + 2, bw + 2), "float32")
            for i, j in T.Parallel(bh + 2, bw + 2):
                r = T.clamp(by * bh + i - 1, 0, H - 1)
                c = T.clamp(bx * bw + j - 1, 0, W - 1)
                tile[i, j] = X[r, c]
            for i, j in T.Parallel(bh, bw):
                nb = (tile[i, j] + tile[i, j + 1] + tile[i, j + 2] + tile[i + 1, j] + tile[i + 1, j + 2]
                      + tile[i + 2, j] + tile[i + 2, j + 1] + tile[i + 2, j + 2])
                if by * bh + i < H and bx * bw + j < W:
                    Y[by * bh + i, bx * bw + j] = 0.5 * tile[i + 1, j + 1] + 0.0625 * nb
    return st


@tilecute.jit(out_idx=[2])
def stencil1d_radius3_f64(N=5000, R=3, block=256):
    """A radius-3 1-D stencil in float64, y[i] = sum_k w[k] * x[i + k - R] with zero
    outside: the block's ``block + 2R`` inputs loaded into shared memory by one thread an
    element (the halo by the first 2R threads in a second pass), the 7 weights in a
    ``T.alloc_local`` array, the taps a ``T.unroll`` loop."""

    @T.prim_func
    def st(X: T.Tensor((N,), "float64"), Wk: T.Tensor((2 * R + 1,), "float64"), Y: T.Tensor((N,), "float64")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((block + 2 * R,), "float64")
            w = T.alloc_local((2 * R + 1,), "float64")
            for k in T.unroll(2 * R + 1):
                w[k] = Wk[k]
            g = bx * block + tx - R
            s[tx] = T.if_then_else(g >= 0 and g < N, X[g], T.float64(0))
            if tx < 2 * R:
                g2 = bx * block + block + tx - R
                s[block + tx] = T.if_then_else(g2 < N, X[g2], T.float64(0))
            acc = T.alloc_var("float64")
            acc = T.float64(0)
            for k in T.unroll(2 * R + 1):
                acc += w[k] * s[tx + k]
            if bx * block + tx < N:
                Y[bx * block + tx] = acc
    return st


@tilecute.jit(out_idx=[1])
def jacobi2d_two_steps_shared(H=64, W=90, bh=16, bw=32, threads=256):
    """Two Jacobi sweeps (average of the 4 neighbours, fixed zero outside the grid) fused
    in one kernel: a tile with a halo of 2 loaded into shared memory, the first sweep
    written into a second shared tile on the inner (bh + 2) x (bw + 2) ring (points
    outside the grid kept at 0), the second sweep read from it."""

    @T.prim_func
    def jac(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), "float32")):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=threads) as (bx, by):
            a = T.alloc_shared((bh + 4, bw + 4), "float32")
            b = T.alloc_shared((bh + 2, bw + 2), "float32")
            for i, j in T.Parallel(bh + 4, bw + 4):
                r = by * bh + i - 2
                c = bx * bw + j - 2
                a[i, j] = T.if_then_else(r >= 0 and r < H and c >= 0 and c < W, X[r, c], 0.0)
            for i, j in T.Parallel(bh + 2, bw + 2):
                r = by * bh + i - 1
                c = bx * bw + j - 1
                v = 0.25 * (a[i, j + 1] + a[i + 2, j + 1] + a[i + 1, j] + a[i + 1, j + 2])
                b[i, j] = T.if_then_else(r >= 0 and r < H and c >= 0 and c < W, v, 0.0)
            for i, j in T.Parallel(bh, bw):
                if by * bh + i < H and bx * bw + j < W:
                    Y[by * bh + i, bx * bw + j] = 0.25 * (b[i, j + 1] + b[i + 2, j + 1] + b[i + 1, j] + b[i + 1, j + 2])
    return jac


# ---- prefix scans -------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def cumsum_shared_suffix_then_prefix(M=100, N=90, block_M=32, block_N=64, threads=128):
    """Per tile: a suffix sum down the rows (``T.cumsum(s, dim=0, reverse=True)``) then a
    prefix sum along the columns (``T.cumsum(s, dim=1)``) of a shared tile, in place; the
    tile loaded with ``T.copy`` (zero beyond the ragged M, N edges, which a suffix sum down
    the rows must see as zero) and stored back with bounds."""

    @T.prim_func
    def scan(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            s = T.alloc_shared((block_M, block_N), "float32")
            T.copy(X[by * block_M, bx * block_N], s)
            T.cumsum(s, dim=0, reverse=True)
            T.cumsum(s, dim=1)
            T.copy(s, Y[by * block_M, bx * block_N])
    return scan


@tilecute.jit(out_idx=[1, 2])
def cumsum_fragment_exclusive_reverse(M=64, N=128, block_M=16, threads=128):
    """Row scans of a fragment: an exclusive prefix sum (inclusive ``T.cumsum`` into a
    second fragment, ``dst=``, minus the element) and an inclusive suffix sum
    (``reverse=True``, ``dim=-1``) of the same tile; int32 data."""

    @T.prim_func
    def scan(X: T.Tensor((M, N), "int32"), Ex: T.Tensor((M, N), "int32"), Suf: T.Tensor((M, N), "int32")):
        with T.Kernel(M // block_M, threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "int32")
            inc = T.alloc_fragment((block_M, N), "int32")
            T.copy(X[bx * block_M, 0], x)
            T.cumsum(src=x, dst=inc, dim=1)
            for i, j in T.Parallel(block_M, N):
                Ex[bx * block_M + i, j] = inc[i, j] - x[i, j]
            T.cumsum(x, dim=-1, reverse=True)
            T.copy(x, Suf[bx * block_M, 0])
    return scan


@tilecute.jit(out_idx=[1])
def long_row_scan_carry(R=6, L=1000, block=256, threads=128):
    """An inclusive prefix sum of each row of length L = 1000 by one block: the row in
    tiles of 256 (``T.serial``), each tile ``T.cumsum``-ed in shared memory, the running
    carry (``T.alloc_var``) added on the way out and then advanced by the tile's last
    element (a read of shared memory right after the scan)."""

    @T.prim_func
    def scan(X: T.Tensor((R, L), "float32"), Y: T.Tensor((R, L), "float32")):
        with T.Kernel(R, threads=threads) as bx:
            s = T.alloc_shared((block,), "float32")
            carry = T.alloc_var("float32")
            carry = 0.0
            for t in T.serial(T.ceildiv(L, block)):
                T.copy(X[bx, t * block:(t + 1) * block], s)
                T.cumsum(s)
                for i in T.Parallel(block):
                    if t * block + i < L:
                        Y[bx, t * block + i] = s[i] + carry
                carry = carry + s[block - 1]
    return scan


# ---- segmented reductions -----------------------------------------------------------------
@tilecute.jit(out_idx=[2, 3])
def segment_max_argmax_tree(S=7, total=3000, threads=128):
    """Per segment (rows offsets[s] .. offsets[s+1] of a flat float32 array, some segments
    empty): each thread walks its strided share with a ``while`` loop over a
    ``T.alloc_var`` index, keeping a (max, first index) pair; the pairs then meet in a
    shared-memory tree (``T.serial`` over halving strides, ``if tx < stride``), the
    smaller index winning ties.  An empty segment gives (-inf, -1)."""
    log_t = threads.bit_length() - 1

    @T.prim_func
    def segmax(X: T.Tensor((total,), "float32"), offsets: T.Tensor((S + 1,), "int32"),
               Mx: T.Tensor((S,), "float32"), Arg: T.Tensor((S,), "int32")):
        with T.Kernel(S, threads=threads) as bx:
            tx = T.get_thread_binding()
            vs = T.alloc_shared((threads,), "float32")
            ix = T.alloc_shared((threads,), "int32")
            best = T.alloc_var("float32")
            arg = T.alloc_var("int32")
            k = T.alloc_var("int32")
            best = -T.infinity("float32")
            arg = -1
            k = offsets[bx] + tx
            end = offsets[bx + 1]
            while k < end:
                if X[k] > best:
                    best = X[k]
                    arg = k - offsets[bx]
                k = k + threads
            vs[tx] = best
            ix[tx] = arg
            for lv in T.serial(log_t):
                stride = threads >> (lv + 1)
                if tx < stride:
                    ov = vs[tx + stride]
                    oi = ix[tx + stride]
                    if ov > vs[tx] or (ov == vs[tx] and oi >= 0 and (ix[tx] < 0 or oi < ix[tx])):
                        vs[tx] = ov
                        ix[tx] = oi
            if tx == 0:
                Mx[bx] = vs[0]
                Arg[bx] = ix[0]
    return segmax


@tilecute.jit(out_idx=[2])
def segmented_cumsum_offsets(S=5, total=2000, D=32, block=64, threads=128):
    """A prefix sum down the rows of each segment of a (total, D) tensor, segments given by
    ``offsets``: a block a segment, its rows in tiles of ``block`` (a run-time count,
    ``T.ceildiv(len, block)``), each tile gathered into shared with a row guard,
    ``T.cumsum(dim=0)``, the per-column carry kept in a fragment and advanced by the
    tile's last row."""

    @T.prim_func
    def segscan(X: T.Tensor((total, D), "float32"), offsets: T.Tensor((S + 1,), "int32"),
                Y: T.Tensor((total, D), "float32")):
        with T.Kernel(S, threads=threads) as bx:
            s = T.alloc_shared((block, D), "float32")
            carry = T.alloc_fragment((D,), "float32")
            start = offsets[bx]
            length = offsets[bx + 1] - start
            T.clear(carry)
            for t in T.serial(T.ceildiv(length, block)):
                for i, d in T.Parallel(block, D):
                    s[i, d] = T.if_then_else(t * block + i < length, X[start + t * block + i, d], 0.0)
                T.cumsum(s, dim=0)
                for i, d in T.Parallel(block, D):
                    if t * block + i < length:
                        Y[start + t * block + i, d] = s[i, d] + carry[d]
                for d in T.Parallel(D):
                    carry[d] += s[block - 1, d]
    return segscan


# ---- histograms ---------------------------------------------------------------------------
@tilecute.jit  # H is accumulated into (T.atomic_add): the caller passes it zeroed
def histogram_per_warp_private(n=20000, bins=96, lo=-3.0, hi=3.0, threads=256, per_block=2048):
    """A float32 histogram over [lo, hi) (values outside dropped): each warp atomically
    counts into its own shared row (``T.atomic_add(h_s[warp, b], 1)``), the rows are summed
    after a barrier and the block's nonzero counts added to the global histogram with
    ``T.atomic_add``."""
    warps = threads // 32
    width = (hi - lo) / bins

    @T.prim_func
    def hist(X: T.Tensor((n,), "float32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(n, per_block), threads=threads) as bx:
            tx = T.get_thread_binding()
            h_s = T.alloc_shared((warps, bins), "int32")
            for w, b in T.Parallel(warps, bins):
                h_s[w, b] = 0
            for it in T.serial(per_block // threads):
                i = bx * per_block + it * threads + tx
                if i < n:
                    v = X[i]
                    if v >= lo and v < hi:
                        b = T.min(T.cast(T.floor((v - lo) / width), "int32"), bins - 1)
                        T.atomic_add(h_s[tx // 32, b], 1)
            for b in T.Parallel(bins):
                tot = T.alloc_var("int32")
                tot = 0
                for w in T.serial(warps):
                    tot += h_s[w, b]
                if tot > 0:
                    T.atomic_add(H[b], tot)
    return hist


@tilecute.jit  # H is accumulated into (T.atomic_add): the caller passes it zeroed
def byte_histogram_from_words(nwords=5000, threads=256, per_thread=4):
    """A 256-bin histogram of the bytes of a uint32 array (each word's 4 bytes taken with
    ``>>`` and ``& 0xFF``): shared-memory atomic counts, then one global ``T.atomic_add``
    per bin per block (counts uint32)."""

    @T.prim_func
    def hist(Wd: T.Tensor((nwords,), "uint32"), H: T.Tensor((256,), "uint32")):
        with T.Kernel(T.ceildiv(nwords, threads * per_thread), threads=threads) as bx:
            tx = T.get_thread_binding()
            h_s = T.alloc_shared((256,), "uint32")
            h_s[tx] = T.uint32(0)
            for it in T.serial(per_thread):
                i = (bx * per_thread + it) * threads + tx
                if i < nwords:
                    w = Wd[i]
                    for sh in T.unroll(4):
                        T.atomic_add(h_s[(w >> T.uint32(sh * 8)) & T.uint32(0xFF)], T.uint32(1))
            T.atomic_add(H[tx], h_s[tx])
    return hist


# ---- sorting in shared memory -------------------------------------------------------------
@tilecute.jit(out_idx=[1, 2])
def odd_even_transposition_sort(R=6, n=128, threads=64):
    """Each row sorted ascending by odd-even transposition (n phases, ``T.serial``; even
    phases compare (2t, 2t + 1), odd phases (2t + 1, 2t + 2)), carrying each key's
    original position as an int32 payload; keys and payload in shared memory, the pairs a
    ``T.Parallel(n // 2)`` nest."""

    @T.prim_func
    def oets(X: T.Tensor((R, n), "float32"), Y: T.Tensor((R, n), "float32"), P: T.Tensor((R, n), "int32")):
        with T.Kernel(R, threads=threads) as bx:
            k_s = T.alloc_shared((n,), "float32")
            p_s = T.alloc_shared((n,), "int32")
            for i in T.Parallel(n):
                k_s[i] = X[bx, i]
                p_s[i] = i
            for ph in T.serial(n):
                for t in T.Parallel(n // 2):
                    a = 2 * t + ph % 2
                    if a + 1 < n:
                        if k_s[a] > k_s[a + 1]:
                            tk = k_s[a]
                            k_s[a] = k_s[a + 1]
                            k_s[a + 1] = tk
                            tp = p_s[a]
                            p_s[a] = p_s[a + 1]
                            p_s[a + 1] = tp
            for i in T.Parallel(n):
                Y[bx, i] = k_s[i]
                P[bx, i] = p_s[i]
    return oets


@tilecute.jit(out_idx=[1])
def bitonic_desc_thread_code(R=5, n=512, threads=128):
    """Bitonic sort of each int32 row, descending, written as per-thread code: ``tx =
    T.get_thread_binding()``, each thread doing n / (2 * threads) compare-exchanges a stage
    from a ``T.serial`` loop, no barrier written (TileLang's storage sync places them
    between a stage's shared writes and the next stage's reads)."""
    log_n = n.bit_length() - 1
    per = n // 2 // threads

    @T.prim_func
    def bsort(X: T.Tensor((R, n), "int32"), Y: T.Tensor((R, n), "int32")):
        with T.Kernel(R, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), "int32")
            for e in T.serial(n // threads):
                s[e * threads + tx] = X[bx, e * threads + tx]
            for p in T.serial(log_n):
                for q in T.serial(p + 1):
                    half = 1 << (p - q)
                    for e in T.serial(per):
                        t = e * threads + tx
                        lo = (t // half) * half * 2 + t % half
                        hi = lo + half
                        desc = ((lo >> (p + 1)) & 1) == 0
                        a = s[lo]
                        b = s[hi]
                        if (a < b) == desc:
                            s[lo] = b
                            s[hi] = a
            for e in T.serial(n // threads):
                Y[bx, e * threads + tx] = s[e * threads + tx]
    return bsort


# ---- sparse products ----------------------------------------------------------------------
@tilecute.jit(out_idx=[4])
def csr_spmv_while_f64(rows=700, cols=500, nnz=4000, threads=128):
    """y = A @ x in float64 with A in CSR, a thread a row: the row's nonzeros walked by a
    ``while`` loop over a ``T.alloc_var`` cursor from row_ptr[r] to row_ptr[r + 1]."""

    @T.prim_func
    def spmv(row_ptr: T.Tensor((rows + 1,), "int32"), col_idx: T.Tensor((nnz,), "int32"),
             vals: T.Tensor((nnz,), "float64"), x: T.Tensor((cols,), "float64"), y: T.Tensor((rows,), "float64")):
        with T.Kernel(T.ceildiv(rows, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding()
            if r < rows:
                k = T.alloc_var("int32")
                acc = T.alloc_var("float64")
                k = row_ptr[r]
                acc = T.float64(0)
                while k < row_ptr[r + 1]:
                    acc += vals[k] * x[col_idx[k]]
                    k += 1
                y[r] = acc
    return spmv


@tilecute.jit(out_idx=[4])
def csr_spmm_row_tiles(rows=300, K=400, Ncol=96, nnz=3000, block_R=4, threads=128):
    """Y = A @ B with A sparse (CSR, float32) and B dense (K, Ncol) float16: a block
    ``block_R`` rows; for each row a run-time ``T.serial(row_ptr[r], row_ptr[r + 1])`` over
    its nonzeros, each adding a scaled row of B into the row's fragment accumulator."""

    @T.prim_func
    def spmm(row_ptr: T.Tensor((rows + 1,), "int32"), col_idx: T.Tensor((nnz,), "int32"),
             vals: T.Tensor((nnz,), "float32"), Bm: T.Tensor((K, Ncol), "float16"),
             Y: T.Tensor((rows, Ncol), "float32")):
        with T.Kernel(T.ceildiv(rows, block_R), threads=threads) as bx:
            acc = T.alloc_fragment((block_R, Ncol), "float32")
            T.clear(acc)
            for rr in T.serial(block_R):
                r = bx * block_R + rr
                if r < rows:
                    for e in T.serial(row_ptr[r], row_ptr[r + 1]):
                        for j in T.Parallel(Ncol):
                            acc[rr, j] += vals[e] * Bm[col_idx[e], j]
            for i, j in T.Parallel(block_R, Ncol):
                if bx * block_R + i < rows:
                    Y[bx * block_R + i, j] = acc[i, j]
    return spmm


@tilecute.jit(out_idx=[3])
def blocksparse_gemm_a_tile_mask(M=256, N=256, K=512, block_M=64, block_N=64, block_K=64, threads=128):
    """C = A @ B^T over the A tiles a bool mask keeps: ``Mask[m_tile, k_tile]`` says whether
    A's (block_M x block_K) tile is nonzero, and the pipelined K loop skips the copies and
    the GEMM of the others (``if Mask[by, k]:``); B given (N, K) (transpose_B)."""

    @T.prim_func
    def bsgemm(A: T.Tensor((M, K), "float16"), Bm: T.Tensor((N, K), "float16"),
               Mask: T.Tensor((M // block_M, K // block_K), "bool"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // block_N, M // block_M, threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float16")
            b_s = T.alloc_shared((block_N, block_K), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float")
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                if Mask[by, k]:
                    T.copy(A[by * block_M, k * block_K], a_s)
                    T.copy(Bm[bx * block_N, k * block_K], b_s)
                    T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return bsgemm


# ---- gathers and scatters -----------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def embedding_gather_padding_idx(V=1000, D=96, n=333, block_T=8, threads=128):
    """out[t, :] = Emb[ids[t], :], a row of zeros where ids[t] is negative (a padding id):
    a block ``block_T`` tokens, the rows gathered into shared by ``T.Parallel`` with
    ``T.if_then_else`` on the id, then ``T.copy``-ed out (the token tail bounded)."""

    @T.prim_func
    def gather(Emb: T.Tensor((V, D), "bfloat16"), ids: T.Tensor((n,), "int32"), Out: T.Tensor((n, D), "bfloat16")):
        with T.Kernel(T.ceildiv(n, block_T), threads=threads) as bx:
            rows = T.alloc_shared((block_T, D), "bfloat16")
            for i, d in T.Parallel(block_T, D):
                t = T.min(bx * block_T + i, n - 1)
                rows[i, d] = T.if_then_else(ids[t] >= 0, Emb[ids[t], d], T.cast(0, "bfloat16"))
            T.copy(rows, Out[bx * block_T, 0])
    return gather


@tilecute.jit(out_idx=[2])
def scatter_add_rows_atomic(n=700, D=64, R=50, block_T=16, threads=128):
    """index_add: Out[idx[t], :] += Src[t, :] for n tokens into R rows (many tokens to a
    row, int64 indices), each element by ``T.atomic_add``; the float32 output is an
    ``out_idx`` tensor that a first ``T.Kernel`` of the same function zeroes."""

    @T.prim_func
    def scatter(Src: T.Tensor((n, D), "float32"), idx: T.Tensor((n,), "int64"), Out: T.Tensor((R, D), "float32")):
        with T.Kernel(R, threads=threads) as bx:
            for d in T.Parallel(D):
                Out[bx, d] = 0.0
        with T.Kernel(T.ceildiv(n, block_T), threads=threads) as bx:
            for i, d in T.Parallel(block_T, D):
                t = bx * block_T + i
                if t < n:
                    T.atomic_add(Out[idx[t], d], Src[t, d])
    return scatter


@tilecute.jit(out_idx=[2, 3])
def scatter_reduce_amax_amin(n=900, R=40, threads=128):
    """scatter_reduce with amax and amin: Mx[idx[i]] = max(..., v[i]) and Mn likewise, by
    ``T.atomic_max`` / ``T.atomic_min`` on float32 outputs initialised to -inf / +inf by a
    first kernel."""

    @T.prim_func
    def sred(Vals: T.Tensor((n,), "float32"), idx: T.Tensor((n,), "int32"),
             Mx: T.Tensor((R,), "float32"), Mn: T.Tensor((R,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            for r in T.Parallel(R):
                Mx[r] = -T.infinity("float32")
                Mn[r] = T.infinity("float32")
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < n:
                T.atomic_max(Mx[idx[i]], Vals[i])
                T.atomic_min(Mn[idx[i]], Vals[i])
    return sred


@tilecute.jit(out_idx=[2])
def maxpool_backward_scatter(N=2, H=21, W=18, C=32, OH=11, OW=9, threads=128):
    """The backward of max pooling with indices: grad_in[n, idx, c] += grad_out[n, oh, ow, c],
    the flat index ih * W + iw split with ``//`` and ``%``, overlapping windows meeting in
    ``T.atomic_add``; grad_in zeroed by a first kernel."""
    total = N * OH * OW * C

    @T.prim_func
    def bwd(G: T.Tensor((N, OH, OW, C), "float32"), Idx: T.Tensor((N, OH, OW, C), "int64"),
            GI: T.Tensor((N, H, W, C), "float32")):
        with T.Kernel(N * H, threads=threads) as bx:
            for w, c in T.Parallel(W, C):
                GI[bx // H, bx % H, w, c] = 0.0
        with T.Kernel(T.ceildiv(total, threads), threads=threads) as bx:
            e = bx * threads + T.get_thread_binding()
            if e < total:
                c = e % C
                ow = e // C % OW
                oh = e // (C * OW) % OH
                n = e // (C * OW * OH)
                flat = Idx[n, oh, ow, c]
                T.atomic_add(GI[n, flat // W, flat % W, c], G[n, oh, ow, c])
    return bwd


# ---- transposes ---------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def transpose_padded_2d_threads(M=200, N=150, tile=32, rows=8):
    """The classic padded-shared transpose with a 2-D thread block (``threads=(32, 8)``,
    ``T.get_thread_binding(0)`` / ``(1)``): each thread copies tile / rows elements of a
    32 x 32 tile into a (32, 33) shared array (the pad column keeps the column reads free
    of bank conflicts), then writes the transposed tile; bounds on both ragged edges."""

    @T.prim_func
    def tr(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, tile), T.ceildiv(M, tile), threads=(tile, rows)) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            s = T.alloc_shared((tile, tile + 1), "float32")
            for k in T.serial(tile // rows):
                r = by * tile + ty + k * rows
                c = bx * tile + tx
                if r < M and c < N:
                    s[ty + k * rows, tx] = A[r, c]
            T.sync_threads()
            for k in T.serial(tile // rows):
                r = bx * tile + ty + k * rows
                c = by * tile + tx
                if r < N and c < M:
                    B[r, c] = s[tx, ty + k * rows]
    return tr


@tilecute.jit(out_idx=[1])
def batched_transpose_fp16_tileop(Bt=3, M=96, N=130, block=64, threads=128):
    """A batched (B, M, N) -> (B, N, M) float16 transpose with tile ops: ``T.copy`` into a
    (block, block + 8) shared tile (padded rows), a ``T.Parallel`` read of its transpose
    into a fragment, and a ``T.copy`` out; N = 130 leaves a ragged last tile."""

    @T.prim_func
    def tr(A: T.Tensor((Bt, M, N), "float16"), B: T.Tensor((Bt, N, M), "float16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), Bt, threads=threads) as (bx, by, bz):
            s = T.alloc_shared((block, block + 8), "float16")
            f = T.alloc_fragment((block, block), "float16")
            T.copy(A[bz, by * block:(by + 1) * block, bx * block:(bx + 1) * block], s[0:block, 0:block])
            for i, j in T.Parallel(block, block):
                f[i, j] = s[j, i]
            T.copy(f, B[bz, bx * block:(bx + 1) * block, by * block:(by + 1) * block])
    return tr


# ---- low-level per-thread programs --------------------------------------------------------
@tilecute.jit(out_idx=[1])
def row_norm_f64_shfl_xor(R=37, N=300, threads=128):
    """L2 norms of float64 rows, a warp a row: each lane a strided partial sum of squares,
    then a butterfly all-reduce with ``T.shfl_xor`` (offsets 16, 8, 4, 2, 1) so every lane
    holds the total; lane 0 writes the square root."""
    warps = threads // 32

    @T.prim_func
    def norms(X: T.Tensor((R, N), "float64"), Y: T.Tensor((R,), "float64")):
        with T.Kernel(T.ceildiv(R, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            r = bx * warps + tx // 32
            acc = T.alloc_var("float64")
            acc = T.float64(0)
            if r < R:
                for k in T.serial(T.ceildiv(N, 32)):
                    c = k * 32 + lane
                    if c < N:
                        acc += X[r, c] * X[r, c]
            for o in T.unroll(5):
                acc += T.shfl_xor(acc, 16 >> o)
            if r < R and lane == 0:
                Y[r] = T.sqrt(acc)
    return norms


@tilecute.jit
def block_sum_shfl_down_int(n=50000, threads=256):
    """A global int32 sum: a thread sums a strided share, each warp reduces with
    ``T.shfl_down`` (only lane 0's value meaningful), the warp sums meet in shared memory,
    the first warp reduces those with ``T.shfl_down`` again and thread 0 adds the block's
    total to ``Out[0]`` (which the caller zeroes: no ``out_idx``) with ``T.atomic_add``."""
    warps = threads // 32
    per = 4

    @T.prim_func
    def bsum(X: T.Tensor((n,), "int32"), Out: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(n, threads * per), threads=threads) as bx:
            tx = T.get_thread_binding()
            ws = T.alloc_shared((warps,), "int32")
            v = T.alloc_var("int32")
            v = 0
            for k in T.serial(per):
                i = (bx * per + k) * threads + tx
                if i < n:
                    v += X[i]
            for o in T.serial(5):
                v += T.shfl_down(v, 16 >> o)
            if tx % 32 == 0:
                ws[tx // 32] = v
            if tx < 32:
                w = T.alloc_var("int32")
                w = T.if_then_else(tx < warps, ws[tx], 0)
                for o in T.serial(5):
                    w += T.shfl_down(w, 16 >> o)
                if tx == 0:
                    T.atomic_add(Out[0], w)
    return bsum


@tilecute.jit(out_idx=[1])
def warp_scan_local_arrays(n=8192, per=8, threads=128):
    """An inclusive int32 prefix sum of a whole array by one block pass per 1024 elements
    plus a carry: each thread loads ``per`` consecutive elements into a ``T.alloc_local``
    array and scans them serially, the lanes' totals are scanned across the warp with
    ``T.shfl_up`` (Hillis-Steele, adding only where lane >= offset), the warps' totals in
    shared memory scanned by warp 0, and a running block carry kept in a ``T.alloc_var``
    across a ``T.serial`` loop over the array's chunks (one block does it all)."""
    warps = threads // 32
    chunk = threads * per

    @T.prim_func
    def scan(X: T.Tensor((n,), "int32"), Y: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            lane = tx % 32
            wid = tx // 32
            vals = T.alloc_local((per,), "int32")
            wsum = T.alloc_shared((warps,), "int32")
            carry = T.alloc_var("int32")
            carry = 0
            for ch in T.serial(n // chunk):
                base = ch * chunk + tx * per
                for k in T.unroll(per):
                    vals[k] = X[base + k]
                for k in T.unroll(1, per):
                    vals[k] += vals[k - 1]
                run = T.alloc_var("int32")
                run = vals[per - 1]
                for o in T.unroll(5):
                    up = T.shfl_up(run, 1 << o)
                    if lane >= (1 << o):
                        run += up
                if lane == 31:
                    wsum[wid] = run
                T.sync_threads()
                if tx == 0:
                    for w in T.serial(1, warps):
                        wsum[w] += wsum[w - 1]
                T.sync_threads()
                before = run - vals[per - 1] + carry + T.if_then_else(wid > 0, wsum[wid - 1], 0)
                for k in T.unroll(per):
                    Y[base + k] = vals[k] + before
                carry += wsum[warps - 1]
                T.sync_threads()
    return scan


@tilecute.jit(out_idx=[2])
def vectorized_axpy_half2(n=10005, alpha=0.75, vec=8, threads=128):
    """y = alpha * x + b in float16, computed in float32: each thread a group of ``vec``
    consecutive elements loaded by a ``T.vectorized`` loop into a ``T.alloc_local`` array,
    combined, and stored by another ``T.vectorized`` loop; the last partial group by a
    guarded scalar loop."""
    groups = n // vec

    @T.prim_func
    def axpy(X: T.Tensor((n,), "float16"), Bv: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(T.ceildiv(T.ceildiv(n, vec), threads), threads=threads) as bx:
            g = bx * threads + T.get_thread_binding()
            xs = T.alloc_local((vec,), "float16")
            bs = T.alloc_local((vec,), "float16")
            if g < groups:
                for v in T.vectorized(vec):
                    xs[v] = X[g * vec + v]
                for v in T.vectorized(vec):
                    bs[v] = Bv[g * vec + v]
                for v in T.vectorized(vec):
                    Y[g * vec + v] = T.cast(alpha * T.cast(xs[v], "float32") + T.cast(bs[v], "float32"), "float16")
            elif g == groups:
                for v in T.serial(vec):
                    if g * vec + v < n:
                        Y[g * vec + v] = T.cast(alpha * T.cast(X[g * vec + v], "float32") + T.cast(Bv[g * vec + v], "float32"), "float16")
    return axpy


@tilecute.jit(out_idx=[2])
def horner_poly_unroll(n=4096, deg=7, threads=256):
    """p(x) = c0 + c1 x + ... + c7 x^7 per element by Horner's rule, the coefficients read
    once into a ``T.alloc_local`` array, the rule an ``T.unroll`` loop running backwards
    over a reversed index."""

    @T.prim_func
    def poly(X: T.Tensor((n,), "float32"), Cf: T.Tensor((deg + 1,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            c = T.alloc_local((deg + 1,), "float32")
            for k in T.unroll(deg + 1):
                c[k] = Cf[k]
            if i < n:
                x = X[i]
                acc = T.alloc_var("float32")
                acc = c[deg]
                for k in T.unroll(deg):
                    acc = acc * x + c[deg - 1 - k]
                Y[i] = acc
    return poly


@tilecute.jit(out_idx=[2])
def gcd_modpow_while(n=1000, threads=128):
    """Two ``while`` loops over ``T.alloc_var`` values: Euclid's gcd of positive int32
    pairs (a, b) and then base^exp mod 1000000007 by binary exponentiation in uint64
    (exp = the gcd + 10), the exponent's bits taken with ``>>`` and ``&``."""

    @T.prim_func
    def gm(A: T.Tensor((n,), "int32"), Bv: T.Tensor((n,), "int32"), Out: T.Tensor((n, 2), "int64")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < n:
                a = T.alloc_var("int32")
                b = T.alloc_var("int32")
                a = A[i]
                b = Bv[i]
                while b != 0:
                    t = a % b
                    a = b
                    b = t
                base = T.alloc_var("uint64")
                e = T.alloc_var("uint64")
                r = T.alloc_var("uint64")
                base = T.cast(A[i], "uint64") % T.uint64(1000000007)
                e = T.cast(a + 10, "uint64")
                r = T.uint64(1)
                while e > T.uint64(0):
                    if (e & T.uint64(1)) == T.uint64(1):
                        r = r * base % T.uint64(1000000007)
                    base = base * base % T.uint64(1000000007)
                    e = e >> T.uint64(1)
                Out[i, 0] = T.cast(a, "int64")
                Out[i, 1] = T.cast(r, "int64")
    return gm


# ---- integer and bit arithmetic -----------------------------------------------------------
@tilecute.jit(out_idx=[1])
def int_div_mod_negative_forms(n=512, d=7, threads=128):
    """Each way TileLang divides a negative int32 by 7 and by -3, side by side: ``//`` and
    ``%`` (floor: -10 // 7 == -2, -10 % 7 == 4), ``T.floordiv`` / ``T.floormod``,
    ``T.truncdiv`` / ``T.truncmod`` (C's: -1, -3), ``>> 2`` of a negative (arithmetic), and
    a divisor from a tensor (run-time floor division); ten columns."""

    @T.prim_func
    def dm(X: T.Tensor((n,), "int32"), Out: T.Tensor((n, 10), "int32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < n:
                x = X[i]
                q = X[(i + 1) % n] % 5 - 2
                q2 = T.if_then_else(q == 0, 3, q)
                Out[i, 0] = x // d
                Out[i, 1] = x % d
                Out[i, 2] = T.floordiv(x, -3)
                Out[i, 3] = T.floormod(x, -3)
                Out[i, 4] = T.truncdiv(x, d)
                Out[i, 5] = T.truncmod(x, d)
                Out[i, 6] = x >> 2
                Out[i, 7] = x // q2
                Out[i, 8] = x % q2
                Out[i, 9] = T.truncdiv(x, q2)
    return dm


@tilecute.jit(out_idx=[1])
def circular_conv1d_wrap(N=257, KS=9, shift=4, threads=128):
    """A circular 1-D convolution y[i] = sum_k w[k] * x[(i - k + shift) mod N] whose wrapped
    index goes negative: TileLang's ``%`` of an int is a floor modulo, so (i - k + shift)
    % N lands in [0, N) with no fix-up (the weights a closure constant array read through
    a shared copy)."""

    @T.prim_func
    def cconv(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < N:
                acc = T.alloc_var("float32")
                acc = 0.0
                for k in T.unroll(KS):
                    acc += (k + 1) * 0.125 * X[(i - k + shift) % N]
                Y[i] = acc
    return cconv


@tilecute.jit(out_idx=[1])
def uint32_bit_tricks(n=1024, bits=10, threads=128):
    """uint32 bit manipulation per element: a rotate-left by 13 (``<<`` / ``>>`` /
    ``|``), an xorshift step, ``T.popcount``, and a bit-reversal permutation of the
    element's position over ``bits`` bits built with a ``T.unroll`` loop of shifts and
    masks (out[rev(i)] gets a mix of x[i])."""

    @T.prim_func
    def bt(X: T.Tensor((n,), "uint32"), Out: T.Tensor((n, 3), "uint32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < n:
                x = X[i]
                rot = (x << T.uint32(13)) | (x >> T.uint32(19))
                s = T.alloc_var("uint32")
                s = x ^ (x << T.uint32(13))
                s = s ^ (s >> T.uint32(17))
                s = s ^ (s << T.uint32(5))
                rev = T.alloc_var("int32")
                rev = 0
                for b in T.unroll(bits):
                    rev = rev | (((i >> b) & 1) << (bits - 1 - b))
                Out[rev, 0] = rot ^ s
                Out[i, 1] = T.cast(T.popcount(x), "uint32")
                Out[i, 2] = ~x & T.uint32(0xFFFF0000)
    return bt


# ---- float64 ------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1, 2])
def logsumexp_cumsum_f64(M=50, N=256, block_M=8, threads=128):
    """float64 row statistics with tile ops: ``T.reduce_max`` and ``T.reduce_sum`` of a
    float64 fragment give each row's logsumexp (natural log); ``T.cumsum`` of the
    fragment along the rows gives its running sums (a ragged M tail of 2 rows)."""

    @T.prim_func
    def lse(X: T.Tensor((M, N), "float64"), L: T.Tensor((M,), "float64"), C: T.Tensor((M, N), "float64")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float64")
            e = T.alloc_fragment((block_M, N), "float64")
            mx = T.alloc_fragment((block_M,), "float64")
            sm = T.alloc_fragment((block_M,), "float64")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, sm, dim=1)
            for i in T.Parallel(block_M):
                if bx * block_M + i < M:
                    L[bx * block_M + i] = T.log(sm[i]) + mx[i]
            T.cumsum(x, dim=1)
            T.copy(x, C[bx * block_M, 0])
    return lse


@tilecute.jit(out_idx=[2])
def gemm_f64_shared(M=64, N=64, K=96, block_M=32, block_N=32, block_K=16, threads=128):
    """A float64 GEMM with ``T.gemm`` on shared tiles (TileLang lowers it to the DMMA
    m8n8k4 instruction on sm_80 / sm_90)."""

    @T.prim_func
    def mm(A: T.Tensor((M, K), "float64"), B: T.Tensor((K, N), "float64"), C: T.Tensor((M, N), "float64")):
        with T.Kernel(N // block_N, M // block_M, threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float64")
            b_s = T.alloc_shared((block_K, block_N), "float64")
            acc = T.alloc_fragment((block_M, block_N), "float64")
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[k * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])
    return mm
