"""A fifty-fifth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): vision and convolution kernels -- ROI-align over a box list (torchvision's
aligned=True sampling, two samples a side, bilinear taps by T.floor), average pooling with
ceil_mode and padding counted (PyTorch's divisor from the padded window), an NCHW -> NHWC
transpose staged through shared memory with partial tiles, GroupNorm fused with SiLU (block
sums in a fragment, T.reduce_sum), a depthwise NHWC convolution with stride 2 and padding,
a transposed convolution as an implicit GEMM whose gather divides and takes remainders of
negative offsets (TileLang's floor division / floor modulo); max pooling with ceil_mode by
T.reduce_max over a gathered window (-inf outside), nearest upsampling by T.floor and T.clamp,
ROI-align's backward by float32 T.atomic_add onto the four taps, and a pixel shuffle on NHWC
through a T.copy slice into shared memory and a 4-d T.Parallel; adaptive average pooling over
runtime T.serial(start, stop) windows, ConvNeXt's channels-first LayerNorm by T.reduce_sum over
dim 0, a depthwise 3-d convolution whose halo is a T.copy of a 5-d slice into a 3-d shared
tile, and a float16 max pool in a T.alloc_local with -T.infinity and chained comparisons; an
integral image (T.cumsum along both dims of a shared tile), a uint8 image histogram (shared
then global T.atomic_add), torchvision NMS's IoU bitmask (uint64 bits by T.shift_left), and
bilinear upsampling with align_corners=True under threads=(32, 4); a 3x3 blur whose halo is a
T.copy slice starting one pixel before the tile (negative at the image's top-left), and a
deformable convolution (DCNv1) whose A tile is a bilinear gather at learned offsets; and a 1x1
convolution with folded batch-norm, hardswish by T.clamp with integer bounds, and a residual,
stored through a shared tile.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs55.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


@tilelang.jit(out_idx=[2])
def roi_align_nhwc(N=2, H=24, W=31, C=64, R=5, PH=7, PW=7, scale=0.25, sr=2):
    """torchvision's roi_align(aligned=True, sampling_ratio=sr) on NHWC features: a block per
    (roi, output cell), a thread per channel; each of the sr*sr samples of a bin is a bilinear
    tap (out-of-image samples count as zero but are counted in the mean)."""

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float32), rois: T.Tensor((R, 5), T.float32),
             Y: T.Tensor((R, PH, PW, C), T.float32)):
        with T.Kernel(PH * PW, R, threads=C) as (cell, r):
            acc = T.alloc_fragment((C,), T.float32)
            T.clear(acc)
            b = T.cast(rois[r, 0], T.int32)
            x1 = rois[r, 1] * scale - 0.5
            y1 = rois[r, 2] * scale - 0.5
            bin_w = (rois[r, 3] * scale - 0.5 - x1) / PW
            bin_h = (rois[r, 4] * scale - 0.5 - y1) / PH
            ph = cell // PW
            pw = cell % PW
            for iy, ix in T.grid(sr, sr):
                y = T.alloc_var(T.float32)
                x = T.alloc_var(T.float32)
                y = y1 + ph * bin_h + (iy + 0.5) * bin_h / sr
                x = x1 + pw * bin_w + (ix + 0.5) * bin_w / sr
                if y >= -1.0 and y <= H and x >= -1.0 and x <= W:
                    y = T.max(y, 0.0)
                    x = T.max(x, 0.0)
                    y0 = T.min(T.cast(T.floor(y), T.int32), H - 1)
                    x0 = T.min(T.cast(T.floor(x), T.int32), W - 1)
                    y_1 = T.min(y0 + 1, H - 1)
                    x_1 = T.min(x0 + 1, W - 1)
                    ly = T.if_then_else(y0 >= H - 1, 0.0, y - y0)
                    lx = T.if_then_else(x0 >= W - 1, 0.0, x - x0)
                    for c in T.Parallel(C):
                        acc[c] += ((1 - ly) * (1 - lx) * X[b, y0, x0, c] + (1 - ly) * lx * X[b, y0, x_1, c]
                                   + ly * (1 - lx) * X[b, y_1, x0, c] + ly * lx * X[b, y_1, x_1, c])
            for c in T.Parallel(C):
                Y[r, ph, pw, c] = acc[c] / (sr * sr)

    return main


@tilelang.jit(out_idx=[1])
def avgpool2d_ceil_mode(N=2, C=6, H=18, W=20, KS=3, stride=2, pad=1, block=128):
    """nn.AvgPool2d(KS, stride, pad, ceil_mode=True, count_include_pad=True) on NCHW: the last
    window may start in the right padding only if it starts inside the input (PyTorch's rule),
    and the divisor is the window clipped to the padded input, not to the input."""
    OH = -(-(H + 2 * pad - KS) // stride) + 1
    OW = -(-(W + 2 * pad - KS) // stride) + 1
    if (OH - 1) * stride >= H + pad:
        OH -= 1
    if (OW - 1) * stride >= W + pad:
        OW -= 1
    total = N * C * OH * OW

    @T.prim_func
    def main(X: T.Tensor((N, C, H, W), T.float16), Y: T.Tensor((N, C, OH, OW), T.float16)):
        with T.Kernel(T.ceildiv(total, block), threads=block) as bx:
            for t in T.Parallel(block):
                idx = bx * block + t
                if idx < total:
                    ow = idx % OW
                    oh = idx // OW % OH
                    nc = idx // (OW * OH)
                    h0 = oh * stride - pad
                    w0 = ow * stride - pad
                    h1 = T.min(h0 + KS, H + pad)
                    w1 = T.min(w0 + KS, W + pad)
                    div = (h1 - h0) * (w1 - w0)
                    s = T.alloc_var(T.float32)
                    s = 0.0
                    for kh, kw in T.grid(KS, KS):
                        ih = h0 + kh
                        iw = w0 + kw
                        if ih >= 0 and ih < H and iw >= 0 and iw < W:
                            s += T.cast(X[nc // C, nc % C, ih, iw], T.float32)
                    Y[nc // C, nc % C, oh, ow] = T.cast(s / T.cast(div, T.float32), T.float16)

    return main


@tilelang.jit(out_idx=[1])
def nchw_to_nhwc_shared(N=3, C=72, HW=200, bc=32, bp=64, threads=128):
    """NCHW (spatial flattened) -> NHWC: a (bc, bp) tile read along HW into shared memory by
    T.copy (partial tiles at both edges), written out along C from the transposed view."""

    @T.prim_func
    def main(X: T.Tensor((N, C, HW), T.bfloat16), Y: T.Tensor((N, HW, C), T.bfloat16)):
        with T.Kernel(T.ceildiv(HW, bp), T.ceildiv(C, bc), N, threads=threads) as (bx, by, n):
            tile = T.alloc_shared((bc, bp), T.bfloat16)
            T.copy(X[n, by * bc, bx * bp], tile)
            for p, c in T.Parallel(bp, bc):
                if bx * bp + p < HW and by * bc + c < C:
                    Y[n, bx * bp + p, by * bc + c] = tile[c, p]

    return main


@tilelang.jit(out_idx=[3])
def groupnorm_silu_nchw(N=2, C=64, HW=100, G=8, bp=64, threads=128, eps=1e-5):
    """GroupNorm(G, C) then SiLU on NCHW (spatial flattened): a block per (sample, group); sums
    and sums of squares of the group's Cg x HW values accumulate in a (Cg, bp) fragment over
    HW chunks (the last one masked), T.reduce_sum twice; then normalise, scale/shift per
    channel, x * sigmoid(x)."""
    Cg = C // G
    cnt = Cg * HW

    @T.prim_func
    def main(X: T.Tensor((N, C, HW), T.float16), gamma: T.Tensor((C,), T.float32),
             beta: T.Tensor((C,), T.float32), Y: T.Tensor((N, C, HW), T.float16)):
        with T.Kernel(G, N, threads=threads) as (g, n):
            s1 = T.alloc_fragment((Cg, bp), T.float32)
            s2 = T.alloc_fragment((Cg, bp), T.float32)
            r1 = T.alloc_fragment((Cg,), T.float32)
            r2 = T.alloc_fragment((Cg,), T.float32)
            t1 = T.alloc_fragment((1,), T.float32)
            t2 = T.alloc_fragment((1,), T.float32)
            T.clear(s1)
            T.clear(s2)
            for k in T.serial(T.ceildiv(HW, bp)):
                for c, p in T.Parallel(Cg, bp):
                    v = T.if_then_else(k * bp + p < HW, T.cast(X[n, g * Cg + c, k * bp + p], T.float32), 0.0)
                    s1[c, p] += v
                    s2[c, p] += v * v
            T.reduce_sum(s1, r1, dim=1)
            T.reduce_sum(s2, r2, dim=1)
            T.reduce_sum(r1, t1, dim=0)
            T.reduce_sum(r2, t2, dim=0)
            mean = t1[0] / cnt
            rstd = T.rsqrt(t2[0] / cnt - mean * mean + eps)
            for k in T.serial(T.ceildiv(HW, bp)):
                for c, p in T.Parallel(Cg, bp):
                    if k * bp + p < HW:
                        ch = g * Cg + c
                        v = (T.cast(X[n, ch, k * bp + p], T.float32) - mean) * rstd * gamma[ch] + beta[ch]
                        Y[n, ch, k * bp + p] = T.cast(v / (1.0 + T.exp(-v)), T.float16)

    return main


@tilelang.jit(out_idx=[3])
def depthwise_conv2d_nhwc_s2(N=2, H=27, W=30, C=96, KS=3, stride=2, pad=1, bw=4, threads=128):
    """Depthwise NHWC convolution, stride 2, zero padding, plus a bias: a block per (output
    row, bw output columns), the (bw, C) outputs a T.Parallel over a fragment, the taps a
    T.serial grid with a bounds test per tap."""
    OH = (H + 2 * pad - KS) // stride + 1
    OW = (W + 2 * pad - KS) // stride + 1

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float16), Wt: T.Tensor((KS, KS, C), T.float16),
             bias: T.Tensor((C,), T.float16), Y: T.Tensor((N, OH, OW, C), T.float16)):
        with T.Kernel(T.ceildiv(OW, bw), OH, N, threads=threads) as (bx, oh, n):
            acc = T.alloc_fragment((bw, C), T.float32)
            for j, c in T.Parallel(bw, C):
                acc[j, c] = T.cast(bias[c], T.float32)
            for kh, kw in T.grid(KS, KS):
                for j, c in T.Parallel(bw, C):
                    ih = oh * stride - pad + kh
                    iw = (bx * bw + j) * stride - pad + kw
                    if ih >= 0 and ih < H and iw >= 0 and iw < W:
                        acc[j, c] += T.cast(X[n, ih, iw, c], T.float32) * T.cast(Wt[kh, kw, c], T.float32)
            for j, c in T.Parallel(bw, C):
                if bx * bw + j < OW:
                    Y[n, oh, bx * bw + j, c] = T.cast(acc[j, c], T.float16)

    return main


@tilelang.jit(out_idx=[2])
def conv_transpose2d_implicit_gemm(N=2, H=9, W=11, C=32, F=64, KS=4, stride=2, pad=1,
                                   bm=64, bn=64, bk=32):
    """ConvTranspose2d (NHWC, weight (KS, KS, C, F) tap-major) as an implicit GEMM over output
    pixels: the A tile gathers X[n, (oh + pad - kh) / stride, ...] where the offset divides by
    the stride; the offset is negative near the top / left edge, so the test relies on
    TileLang's floor division and floor modulo (``//`` and ``%`` on PrimExprs)."""
    OH = (H - 1) * stride - 2 * pad + KS
    OW = (W - 1) * stride - 2 * pad + KS
    P = N * OH * OW
    Kdim = KS * KS * C

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float16), Wt: T.Tensor((Kdim, F), T.float16),
             Y: T.Tensor((N, OH, OW, F), T.float16)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(P, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(Kdim, bk), num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    p = by * bm + i
                    kk = k * bk + j
                    n = p // (OH * OW)
                    oh = p % (OH * OW) // OW
                    ow = p % OW
                    th = oh + pad - kk // (KS * C)
                    tw = ow + pad - kk // C % KS
                    ih = th // stride
                    iw = tw // stride
                    ok = (p < P and th % stride == 0 and tw % stride == 0 and ih >= 0 and ih < H
                          and iw >= 0 and iw < W)
                    a_s[i, j] = T.if_then_else(ok, X[n, ih, iw, kk % C], T.float16(0))
                T.copy(Wt[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(bm, bn):
                p = by * bm + i
                if p < P:
                    Y[p // (OH * OW), p % (OH * OW) // OW, p % OW, bx * bn + j] = acc[i, j]

    return main


@tilelang.jit(out_idx=[1])
def maxpool2d_nhwc_ceil_reduce(N=2, H=18, W=17, C=64, KS=3, stride=2, bc=64):
    """nn.MaxPool2d(KS, stride, ceil_mode=True) on NHWC (no padding): the window's KS*KS x bc
    values gathered into a fragment (-inf outside the input), T.reduce_max over dim 0."""
    OH = -(-(H - KS) // stride) + 1
    OW = -(-(W - KS) // stride) + 1
    if (OH - 1) * stride >= H:
        OH -= 1
    if (OW - 1) * stride >= W:
        OW -= 1

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float16), Y: T.Tensor((N, OH, OW, C), T.float16)):
        with T.Kernel(T.ceildiv(C, bc), OH * OW, N, threads=128) as (bx, pix, n):
            win = T.alloc_fragment((KS * KS, bc), T.float32)
            mx = T.alloc_fragment((bc,), T.float32)
            oh = pix // OW
            ow = pix % OW
            for t, c in T.Parallel(KS * KS, bc):
                ih = oh * stride + t // KS
                iw = ow * stride + t % KS
                win[t, c] = T.if_then_else(ih < H and iw < W, T.cast(X[n, ih, iw, bx * bc + c], T.float32),
                                           -T.infinity(T.float32))
            T.reduce_max(win, mx, dim=0)
            for c in T.Parallel(bc):
                Y[n, oh, ow, bx * bc + c] = T.cast(mx[c], T.float16)

    return main


@tilelang.jit(out_idx=[1])
def upsample_nearest_nchw(N=2, C=3, H=13, W=10, OH=32, OW=23, block=256):
    """F.interpolate(mode='nearest') to (OH, OW): ih = min(floor(oh * H / OH), H - 1) in float32
    (PyTorch's scale), by T.floor and T.clamp."""
    sh = H / OH
    sw = W / OW
    total = N * C * OH * OW

    @T.prim_func
    def main(X: T.Tensor((N, C, H, W), T.float32), Y: T.Tensor((N, C, OH, OW), T.float32)):
        with T.Kernel(T.ceildiv(total, block), threads=block) as bx:
            for t in T.Parallel(block):
                i = bx * block + t
                if i < total:
                    ow = i % OW
                    oh = i // OW % OH
                    nc = i // (OH * OW)
                    ih = T.clamp(T.cast(T.floor(T.cast(oh, T.float32) * sh), T.int32), 0, H - 1)
                    iw = T.clamp(T.cast(T.floor(T.cast(ow, T.float32) * sw), T.int32), 0, W - 1)
                    Y[nc // C, nc % C, oh, ow] = X[nc // C, nc % C, ih, iw]

    return main


@tilelang.jit
def roi_align_backward_atomic(N=2, H=16, W=20, C=32, R=4, PH=4, PW=4, scale=0.5, sr=2):
    """The backward of roi_align(aligned=False, sampling_ratio=sr) on NHWC: each output cell's
    gradient is spread onto its samples' four taps by float32 T.atomic_add into dX."""

    @T.prim_func
    def main(dY: T.Tensor((R, PH, PW, C), T.float32), rois: T.Tensor((R, 5), T.float32),
             dX: T.Tensor((N, H, W, C), T.float32)):
        with T.Kernel(PH * PW, R, threads=C) as (cell, r):
            b = T.cast(rois[r, 0], T.int32)
            x1 = rois[r, 1] * scale
            y1 = rois[r, 2] * scale
            bin_w = T.max(rois[r, 3] * scale - x1, 1.0) / PW
            bin_h = T.max(rois[r, 4] * scale - y1, 1.0) / PH
            ph = cell // PW
            pw = cell % PW
            for iy, ix in T.grid(sr, sr):
                y = T.alloc_var(T.float32, init=y1 + ph * bin_h + (iy + 0.5) * bin_h / sr)
                x = T.alloc_var(T.float32, init=x1 + pw * bin_w + (ix + 0.5) * bin_w / sr)
                if y >= -1.0 and y <= H and x >= -1.0 and x <= W:
                    y = T.max(y, 0.0)
                    x = T.max(x, 0.0)
                    y0 = T.min(T.cast(y, T.int32), H - 1)
                    x0 = T.min(T.cast(x, T.int32), W - 1)
                    ly = T.if_then_else(y0 >= H - 1, 0.0, y - y0)
                    lx = T.if_then_else(x0 >= W - 1, 0.0, x - x0)
                    y_1 = T.min(y0 + 1, H - 1)
                    x_1 = T.min(x0 + 1, W - 1)
                    for c in T.Parallel(C):
                        g = dY[r, ph, pw, c] / (sr * sr)
                        T.atomic_add(dX[b, y0, x0, c], g * (1 - ly) * (1 - lx))
                        T.atomic_add(dX[b, y0, x_1, c], g * (1 - ly) * lx)
                        T.atomic_add(dX[b, y_1, x0, c], g * ly * (1 - lx))
                        T.atomic_add(dX[b, y_1, x_1, c], g * ly * lx)

    return main


@tilelang.jit(out_idx=[1])
def pixel_shuffle_nhwc(N=2, H=7, W=9, C=64, r=2, bw=8, threads=128):
    """nn.PixelShuffle(r) expressed on NHWC: Y[n, h*r + i, w*r + j, c] = X[n, h, w, c*r*r + i*r + j];
    a (bw, C*r*r) input strip through shared memory by T.copy, written out by T.Parallel."""
    Co = C // (r * r)

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.bfloat16), Y: T.Tensor((N, H * r, W * r, Co), T.bfloat16)):
        with T.Kernel(T.ceildiv(W, bw), H, N, threads=threads) as (bx, h, n):
            s = T.alloc_shared((bw, C), T.bfloat16)
            T.copy(X[n, h, bx * bw:(bx + 1) * bw, :], s)
            for w, i, j, c in T.Parallel(bw, r, r, Co):
                if bx * bw + w < W:
                    Y[n, h * r + i, (bx * bw + w) * r + j, c] = s[w, c * r * r + i * r + j]

    return main


@tilelang.jit(out_idx=[1])
def adaptive_avgpool2d(N=2, C=64, H=17, W=23, OH=5, OW=7, bc=64):
    """nn.AdaptiveAvgPool2d((OH, OW)) on NHWC: the window [floor(o*H/OH), ceil((o+1)*H/OH)) is a
    runtime range of a T.serial loop."""

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float32), Y: T.Tensor((N, OH, OW, C), T.float32)):
        with T.Kernel(OH * OW, N, threads=bc) as (pix, n):
            acc = T.alloc_fragment((bc,), T.float32)
            T.clear(acc)
            oh = pix // OW
            ow = pix % OW
            h0 = oh * H // OH
            h1 = ((oh + 1) * H + OH - 1) // OH
            w0 = ow * W // OW
            w1 = ((ow + 1) * W + OW - 1) // OW
            for ih in T.serial(h0, h1):
                for iw in T.serial(w0, w1):
                    for c in T.Parallel(bc):
                        acc[c] += X[n, ih, iw, c]
            for c in T.Parallel(bc):
                Y[n, oh, ow, c] = acc[c] / ((h1 - h0) * (w1 - w0))

    return main


@tilelang.jit(out_idx=[3])
def layernorm2d_channels_first(N=2, C=48, HW=300, bp=64, threads=128, eps=1e-6):
    """ConvNeXt's LayerNorm over channels on NCHW: a (C, bp) tile, mean and variance per pixel
    by T.reduce_sum over dim 0."""

    @T.prim_func
    def main(X: T.Tensor((N, C, HW), T.float32), w: T.Tensor((C,), T.float32), b: T.Tensor((C,), T.float32),
             Y: T.Tensor((N, C, HW), T.float32)):
        with T.Kernel(T.ceildiv(HW, bp), N, threads=threads) as (bx, n):
            x = T.alloc_fragment((C, bp), T.float32)
            sq = T.alloc_fragment((C, bp), T.float32)
            mean = T.alloc_fragment((bp,), T.float32)
            var = T.alloc_fragment((bp,), T.float32)
            T.copy(X[n, :, bx * bp:(bx + 1) * bp], x)
            T.reduce_sum(x, mean, dim=0)
            for c, p in T.Parallel(C, bp):
                x[c, p] = x[c, p] - mean[p] / C
            for c, p in T.Parallel(C, bp):
                sq[c, p] = x[c, p] * x[c, p]
            T.reduce_sum(sq, var, dim=0)
            for c, p in T.Parallel(C, bp):
                x[c, p] = x[c, p] * T.rsqrt(var[p] / C + eps) * w[c] + b[c]
            T.copy(x, Y[n, :, bx * bp:(bx + 1) * bp])

    return main


@tilelang.jit(out_idx=[2])
def depthwise_conv3d_halo(N=2, D=6, H=10, W=12, C=32, KS=3, bh=4, bw=4, threads=128):
    """Depthwise 3-d conv (padding 1) on NDHWC: each (d, kd) plane's halo tile is a T.copy of a
    5-d slice (the n and d dims indexed) into a 3-d shared tile."""
    pad = KS // 2

    @T.prim_func
    def main(X: T.Tensor((N, D + 2 * pad, H + 2 * pad, W + 2 * pad, C), T.float16),
             Wt: T.Tensor((KS, KS, KS, C), T.float32), Y: T.Tensor((N, D, H, W, C), T.float16)):
        with T.Kernel(T.ceildiv(W, bw) * T.ceildiv(H, bh), D, N, threads=threads) as (t, d, n):
            halo = T.alloc_shared((bh + KS - 1, bw + KS - 1, C), T.float16)
            acc = T.alloc_fragment((bh, bw, C), T.float32)
            h0 = t // T.ceildiv(W, bw) * bh
            w0 = t % T.ceildiv(W, bw) * bw
            T.clear(acc)
            for kd in T.serial(KS):
                T.copy(X[n, d + kd, h0:h0 + bh + KS - 1, w0:w0 + bw + KS - 1, :], halo)
                for kh, kw in T.grid(KS, KS):
                    for i, j, c in T.Parallel(bh, bw, C):
                        acc[i, j, c] += T.cast(halo[i + kh, j + kw, c], T.float32) * Wt[kd, kh, kw, c]
            for i, j, c in T.Parallel(bh, bw, C):
                if h0 + i < H and w0 + j < W:
                    Y[n, d, h0 + i, w0 + j, c] = T.cast(acc[i, j, c], T.float16)

    return main


@tilelang.jit(out_idx=[1])
def maxpool_fp16_local(N=2, H=15, W=16, C=128, KS=3, stride=2, pad=1, threads=128):
    """Max pool in float16 with padding: each thread's running max a T.alloc_local((1,)) set to
    -T.infinity(T.float16), updated with T.max of two halves."""
    OH = (H + 2 * pad - KS) // stride + 1
    OW = (W + 2 * pad - KS) // stride + 1

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float16), Y: T.Tensor((N, OH, OW, C), T.float16)):
        with T.Kernel(OW, OH, N, threads=threads) as (ow, oh, n):
            m = T.alloc_local((1,), T.float16)
            c = T.get_thread_binding()
            m[0] = -T.infinity(T.float16)
            for kh in T.unroll(KS):
                for kw in T.unroll(KS):
                    ih = oh * stride - pad + kh
                    iw = ow * stride - pad + kw
                    if 0 <= ih < H and 0 <= iw < W:
                        m[0] = T.max(m[0], X[n, ih, iw, c])
            Y[n, oh, ow, c] = m[0]

    return main


@tilelang.jit(out_idx=[1])
def integral_image(B=3, H=40, W=50, tile=64, threads=256):
    """A summed-area table per image (H, W <= tile): the image into a zero-padded shared tile,
    T.cumsum along dim 0 then dim 1, written back."""

    @T.prim_func
    def main(X: T.Tensor((B, H, W), T.float32), S: T.Tensor((B, H, W), T.float32)):
        with T.Kernel(B, threads=threads) as b:
            s = T.alloc_shared((tile, tile), T.float32)
            T.clear(s)
            for i, j in T.Parallel(tile, tile):
                if i < H and j < W:
                    s[i, j] = X[b, i, j]
            T.cumsum(s, dim=0)
            T.cumsum(s, dim=1)
            for i, j in T.Parallel(tile, tile):
                if i < H and j < W:
                    S[b, i, j] = s[i, j]

    return main


@tilelang.jit(out_idx=[1])
def histogram_u8(B=2, HW=5000, bins=256, chunk=1024, threads=256):
    """A 256-bin histogram of each uint8 image: shared int32 counts by T.atomic_add, one block
    per (image, chunk), merged into the global counts by global atomics."""

    @T.prim_func
    def main(img: T.Tensor((B, HW), T.uint8), hist: T.Tensor((B, bins), T.int32)):
        with T.Kernel(T.ceildiv(HW, chunk), B, threads=threads) as (bx, b):
            h = T.alloc_shared((bins,), T.int32)
            T.clear(h)
            for i in T.Parallel(chunk):
                if bx * chunk + i < HW:
                    T.atomic_add(h[T.cast(img[b, bx * chunk + i], T.int32)], 1)
            for i in T.Parallel(bins):
                T.atomic_add(hist[b, i], h[i])

    return main


@tilelang.jit(out_idx=[1])
def nms_iou_bitmask(N=300, thresh=0.5, threads=64):
    """torchvision NMS's first kernel: for box i and the 64 boxes of column block j, bit k of
    mask[i, j] says IoU(i, 64*j + k) > thresh (only k past i counted); boxes (x1, y1, x2, y2)."""
    nb = (N + 63) // 64

    @T.prim_func
    def main(boxes: T.Tensor((N, 4), T.float32), mask: T.Tensor((N, nb), T.uint64)):
        with T.Kernel(nb, nb, threads=threads) as (bj, bi):
            cb = T.alloc_shared((64, 4), T.float32)
            for k, e in T.Parallel(64, 4):
                cb[k, e] = T.if_then_else(bj * 64 + k < N, boxes[bj * 64 + k, e], 0.0)
            i = bi * 64 + T.get_thread_binding()
            if i < N:
                bits = T.alloc_var(T.uint64, init=0)
                a_area = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
                for k in T.serial(64):
                    j = bj * 64 + k
                    if j < N and j > i:
                        w = T.max(T.min(boxes[i, 2], cb[k, 2]) - T.max(boxes[i, 0], cb[k, 0]), 0.0)
                        h = T.max(T.min(boxes[i, 3], cb[k, 3]) - T.max(boxes[i, 1], cb[k, 1]), 0.0)
                        inter = w * h
                        b_area = (cb[k, 2] - cb[k, 0]) * (cb[k, 3] - cb[k, 1])
                        if inter / (a_area + b_area - inter) > thresh:
                            bits = bits | T.shift_left(T.uint64(1), T.cast(k, T.uint64))
                mask[i, bj] = bits

    return main


@tilelang.jit(out_idx=[1])
def upsample_bilinear_align_corners(N=2, C=4, H=9, W=13, OH=20, OW=31, bh=4, bw=32):
    """F.interpolate(mode='bilinear', align_corners=True) on NCHW float16: source coordinate
    o * (in - 1) / (out - 1); threads given as (32, 4)."""
    rh = (H - 1) / (OH - 1)
    rw = (W - 1) / (OW - 1)

    @T.prim_func
    def main(X: T.Tensor((N, C, H, W), T.float16), Y: T.Tensor((N, C, OH, OW), T.float16)):
        with T.Kernel(T.ceildiv(OW, bw), T.ceildiv(OH, bh), N * C, threads=(32, 4)) as (bx, by, nc):
            for i, j in T.Parallel(bh, bw):
                oh = by * bh + i
                ow = bx * bw + j
                if oh < OH and ow < OW:
                    sy = oh * rh
                    sx = ow * rw
                    y0 = T.cast(sy, T.int32)
                    x0 = T.cast(sx, T.int32)
                    y1 = T.min(y0 + 1, H - 1)
                    x1 = T.min(x0 + 1, W - 1)
                    ly = sy - y0
                    lx = sx - x0
                    n = nc // C
                    c = nc % C
                    v = ((1 - ly) * ((1 - lx) * X[n, c, y0, x0] + lx * X[n, c, y0, x1])
                         + ly * ((1 - lx) * X[n, c, y1, x0] + lx * X[n, c, y1, x1]))
                    Y[n, c, oh, ow] = T.cast(v, T.float16)

    return main


@tilelang.jit(out_idx=[1])
def gaussian_blur_halo(N=2, H=30, W=45, C=32, bh=8, bw=16, threads=128):
    """A 3x3 binomial blur (zero padding) on NHWC: the (bh + 2, bw + 2, C) halo is a T.copy whose
    slice starts one row / column before the tile (negative at the top-left tiles)."""

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float16), Y: T.Tensor((N, H, W, C), T.float16)):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), N, threads=threads) as (bx, by, n):
            halo = T.alloc_shared((bh + 2, bw + 2, C), T.float16)
            acc = T.alloc_fragment((bh, bw, C), T.float32)
            T.copy(X[n, by * bh - 1:by * bh + bh + 1, bx * bw - 1:bx * bw + bw + 1, :], halo)
            T.clear(acc)
            for kh, kw in T.grid(3, 3):
                for i, j, c in T.Parallel(bh, bw, C):
                    acc[i, j, c] += (T.cast(halo[i + kh, j + kw, c], T.float32)
                                     * ((2 - (kh - 1) * (kh - 1)) * (2 - (kw - 1) * (kw - 1))) / 16.0)
            T.copy(acc, Y[n, by * bh:(by + 1) * bh, bx * bw:(bx + 1) * bw, :])

    return main


@tilelang.jit(out_idx=[3])
def deformable_conv2d_gemm(N=1, H=12, W=14, C=32, F=64, KS=3, bm=64, bn=64, bk=32):
    """A deformable convolution (DCNv1, stride 1, padding 1) as a GEMM: the A tile samples X at
    (oh - 1 + kh + dy, ow - 1 + kw + dx) bilinearly (offsets per pixel and tap), zero outside."""
    P = N * H * W
    Kdim = KS * KS * C

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), T.float32), off: T.Tensor((N, H, W, KS * KS, 2), T.float32),
             Wt: T.Tensor((F, Kdim), T.float16), Y: T.Tensor((P, F), T.float32)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(P, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(Kdim, bk), num_stages=1):
                for i, j in T.Parallel(bm, bk):
                    p = by * bm + i
                    kk = k * bk + j
                    n = p // (H * W)
                    oh = p % (H * W) // W
                    ow = p % W
                    tap = kk // C
                    c = kk % C
                    y = oh - 1 + tap // KS + off[n, oh, ow, tap, 0]
                    x = ow - 1 + tap % KS + off[n, oh, ow, tap, 1]
                    y0 = T.cast(T.floor(y), T.int32)
                    x0 = T.cast(T.floor(x), T.int32)
                    ly = y - y0
                    lx = x - x0
                    v00 = T.if_then_else(y0 >= 0 and y0 < H and x0 >= 0 and x0 < W, X[n, y0, x0, c], 0.0)
                    v01 = T.if_then_else(y0 >= 0 and y0 < H and x0 + 1 >= 0 and x0 + 1 < W, X[n, y0, x0 + 1, c], 0.0)
                    v10 = T.if_then_else(y0 + 1 >= 0 and y0 + 1 < H and x0 >= 0 and x0 < W, X[n, y0 + 1, x0, c], 0.0)
                    v11 = T.if_then_else(y0 + 1 >= 0 and y0 + 1 < H and x0 + 1 >= 0 and x0 + 1 < W,
                                         X[n, y0 + 1, x0 + 1, c], 0.0)
                    v = (1 - ly) * ((1 - lx) * v00 + lx * v01) + ly * ((1 - lx) * v10 + lx * v11)
                    a_s[i, j] = T.if_then_else(p < P, T.cast(v, T.float16), T.float16(0))
                T.copy(Wt[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, Y[by * bm, bx * bn])

    return main


@tilelang.jit(out_idx=[3])
def conv1x1_bn_hardswish_residual(P=200, C=64, F=96, bm=64, bn=32, bk=32):
    """A 1x1 conv (NHWC flattened to pixels) with folded batch-norm (scale, shift per filter), a
    hardswish x * clamp(x + 3, 0, 6) / 6 with integer bounds, and a residual added from Y's
    input, via a shared staging tile."""

    @T.prim_func
    def main(X: T.Tensor((P, C), T.float16), Wt: T.Tensor((C, F), T.float16),
             ss: T.Tensor((2, F), T.float32), Y: T.Tensor((P, F), T.float16), R: T.Tensor((P, F), T.float16)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(P, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            o_s = T.alloc_shared((bm, bn), T.float16)
            T.clear(acc)
            for k in T.Pipelined(C // bk, num_stages=2):
                T.copy(X[by * bm, k * bk], a_s)
                T.copy(Wt[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(bm, bn):
                v = acc[i, j] * ss[0, bx * bn + j] + ss[1, bx * bn + j]
                v = v * T.clamp(v + 3, 0, 6) / 6
                o_s[i, j] = T.cast(v + T.cast(R[by * bm + i, bx * bn + j], T.float32), T.float16)
            T.copy(o_s, Y[by * bm, bx * bn])

    return main
