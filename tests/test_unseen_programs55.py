"""The fifty-fifth set of programs in TileLang's idioms (tests/unseen_programs55.py): ROI-align
over a box list, average pooling with ceil_mode, an NCHW -> NHWC transpose through shared
memory, GroupNorm fused with SiLU, a depthwise NHWC convolution with stride 2, and a transposed
convolution as an implicit GEMM over negative floor-divided offsets; max pooling with ceil_mode
by T.reduce_max, nearest upsampling, ROI-align's backward by atomics, a pixel shuffle, adaptive
average pooling over runtime windows, a channels-first LayerNorm (T.reduce_sum over dim 0), a
depthwise 3-d convolution through a halo tile, a float16 max pool in a local, an integral image
(T.cumsum both ways), a uint8 histogram by atomics, NMS's IoU bitmask, bilinear upsampling
with align_corners=True, a blur through a halo copy that starts before the image, a
deformable convolution, and a 1x1 convolution with batch-norm, hardswish and a residual.

CPU: each builds to an sm_90a cubin and an sm_80 one, and what decides its result is read in
the generated source.  All built and read right as first written; the integral image's scans
indexed their lines as ``line % 64 // 1 % 64`` (right, unreadable), now plainly
(tests/test_scan_shuffle.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs55.py``)."""

import itertools
import re

import pytest
import torch
import torch.nn.functional as F

import rounds
import unseen_programs55 as P

f16, bf16 = torch.float16, torch.bfloat16

NAMES = ["adaptive_avgpool2d", "avgpool2d_ceil_mode", "conv1x1_bn_hardswish_residual",
         "conv_transpose2d_implicit_gemm", "deformable_conv2d_gemm", "depthwise_conv2d_nhwc_s2",
         "depthwise_conv3d_halo", "gaussian_blur_halo", "groupnorm_silu_nchw", "histogram_u8",
         "integral_image", "layernorm2d_channels_first", "maxpool2d_nhwc_ceil_reduce",
         "maxpool_fp16_local", "nchw_to_nhwc_shared", "nms_iou_bitmask", "pixel_shuffle_nhwc",
         "roi_align_backward_atomic", "roi_align_nhwc", "upsample_bilinear_align_corners",
         "upsample_nearest_nchw"]

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")

test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


def _body(name):
    return rounds.kernel_body(getattr(P, name)())


# ---- what decides each result, in the generated source -----------------------------------------
def test_roi_align_samples_floor_their_taps_and_average_all_four():
    src = _body("roi_align_nhwc")
    # a sample outside [-1, H] x [-1, W] adds nothing; inside, it is clamped to 0 and floored
    assert ("if y[0] >= cutlass.Float32(-1.0) and y[0] <= cutlass.Float32(24.0) and "
            "x[0] >= cutlass.Float32(-1.0) and x[0] <= cutlass.Float32(31.0):") in src
    assert "y0 = cutlass.min(cutlass.Int32(cute.math.floor(y[0])), 23)" in src
    assert "ly = cutlass.select_(y0 >= 23, cutlass.Float32(0.0), y[0] - cutlass.Float32(y0))" in src
    # aligned=True: half a pixel off both corners; the mean divides by sr*sr, skipped samples too
    assert "x1 = rois[r, 1] * cutlass.Float32(0.25) - cutlass.Float32(0.5)" in src
    assert "acc[tc_lane16] / cutlass.Float32(4.0)" in src


def test_avgpool_ceil_mode_adds_a_window_and_divides_by_the_padded_one():
    src = _body("avgpool2d_ceil_mode")
    assert "cute.make_layout((2, 6, 10, 11,)" in src  # ceil_mode: 10 x 11, not floor's 9 x 10
    assert "h1 = cutlass.min(h0 + 3, 19)" in src and "w1 = cutlass.min(w0 + 3, 21)" in src
    assert "div = (h1 - h0) * (w1 - w0)" in src
    assert "if ih >= 0 and ih < 18 and iw >= 0 and iw < 20:" in src
    assert "cutlass.Float16(s[0] / cutlass.Float32(div))" in src


def test_nchw_to_nhwc_reads_and_writes_one_swizzle_with_partial_tiles():
    src = _body("nchw_to_nhwc_shared")
    w = re.search(r"tile\[i1 \* 64 \+ \(\(i2 \+ tc_lane\d+\) \^ \(i1 & 31\)\)\] = tc_vec\d+\[", src)
    assert w, "the vector path stores rows into the swizzled tile"
    assert "if by * 32 + i1 < 72 and bx * 64 + (i2 + 7) < 200:" in src  # whole vector inside, else per element
    assert "cute.arch.sync_threads()" in src
    assert ("if bx * 64 + p < 200 and by * 32 + c < 72:\n"
            "            Y[n, bx * 64 + p, by * 32 + c] = tile[c * 64 + (p ^ (c & 31))]") in src


def test_groupnorm_silu_masks_the_tail_and_reduces_both_sums():
    src = _body("groupnorm_silu_nchw")
    assert src.count("tcr.warp_allreduce(") == 2 and src.count("tcr.grouped_rows(") == 2
    assert re.search(r"v = cutlass\.select_\(k \* 64 \+ \(p \+ tc_lane\d+\) < 100, ", src)
    assert "mean = t1[0] / cutlass.Float32(800.0)" in src
    assert "rstd = cute.math.rsqrt(t2[0] / cutlass.Float32(800.0) - mean * mean + cutlass.Float32(1e-05))" in src
    assert "v_1_ / (cutlass.Float32(1.0) + cute.math.exp(v_1_ * cutlass.Float32(-1.0)))" in src


def test_depthwise_stride2_taps_and_bias():
    src = _body("depthwise_conv2d_nhwc_s2")
    assert "cute.make_layout((2, 14, 15, 96,)" in src
    assert "ih = oh * 2 - 1 + kh" in src and "iw = (bx * 4 + j_1_) * 2 - 1 + kw" in src
    assert "if ih >= 0 and ih < 27 and iw >= 0 and iw < 30:" in src
    assert re.search(r"acc\[tc_lane\d+\] = cutlass\.Float32\(tc_vec\d+\[tc_lane\d+\]\)", src)  # bias first
    assert re.search(r"if bx \* 4 \+ j_2_ < 15:\s+Y\[n, oh, bx \* 4 \+ j_2_,", src)


def test_conv_transpose_divides_negative_offsets_by_floor():
    src = _body("conv_transpose2d_implicit_gemm")
    assert "th = oh + 1 - kk // 128" in src
    # th is negative near the top edge: floor modulo, never C's % (which would say -1 % 2 == -1)
    assert "th - th // 2 * 2 == 0" in src and "tw - tw // 2 * 2 == 0" in src
    assert "th % 2" not in src and "tw % 2" not in src
    assert "ih = th // 2" in src and "ih >= 0" in src
    assert 'tcm.tiled_mma("wgmma"' in src


def test_maxpool_ceil_mode_pads_the_window_with_minus_infinity_and_reduces_dim0():
    src = _body("maxpool2d_nhwc_ceil_reduce")
    assert "cute.make_layout((2, 9, 8, 64,)" in src  # ceil_mode: 9 x 8, not floor's 8 x 8
    assert re.search(r"win\[tc_lane\d+\] = cutlass\.select_\(ih < 18 and iw < 17, "
                     r"cutlass\.Float32\(tc_\w+\[tc_lane\d+\]\), "
                     r'cutlass\.Float32\(float\("-inf"\)\)\)', src)
    # the vector load is taken only where its row is inside (iw <= 16 always: OW = 8)
    assert "if oh * 2 + t // 3 < 18:" in src
    assert "T.reduce_max(win_frag1, mx)" in src


def test_nearest_upsample_floors_the_scaled_index_and_clamps():
    src = _body("upsample_nearest_nchw")
    assert ("ih = cutlass.min(cutlass.max(cutlass.Int32(cute.math.floor(cutlass.Float32(oh) * "
            "cutlass.Float32(0.40625))), 0), 12)") in src


def test_roi_align_backward_adds_four_weighted_taps_atomically():
    src = _body("roi_align_backward_atomic")
    assert src.count("tca.atomic_add(dX, ") == 4
    assert "tca.atomic_add(dX, (b, y_1_, x_1_, c), g * ly * lx)" in src
    # aligned=False: no half-pixel offset, the bin at least one pixel
    assert "x1 = rois[r, 1] * cutlass.Float32(0.5)\n" in src
    assert "cute.arch.fmax(rois[r, 3] * cutlass.Float32(0.5) - x1, cutlass.Float32(1.0))" in src


def test_pixel_shuffle_reads_channel_c_r_r_plus_i_r_plus_j():
    src = _body("pixel_shuffle_nhwc")
    assert "tct.load(X_desc, tc_smem + 0, tc_bar0, (0, bx * 8, h, n), 1024)" in src  # the partial strip by TMA
    assert ("if bx * 8 + w < 9:\n"
            "            Y[n, h * 2 + i, (bx * 8 + w) * 2 + j, c] = s[w * 64 + c * 2 * 2 + i * 2 + j]") in src


def test_adaptive_pool_walks_runtime_windows_and_divides_by_their_size():
    src = _body("adaptive_avgpool2d")
    assert "h0 = oh * 17 // 5" in src and "h1 = ((oh + 1) * 17 + 5 - 1) // 5" in src
    assert "for ih in cutlass.range(h0, h0 + (h1 - h0)):" in src
    assert "acc[tc_lane8] / cutlass.Float32((h1 - h0) * (w1 - w0))" in src


def test_channels_first_layernorm_reduces_over_channels():
    src = _body("layernorm2d_channels_first")
    assert src.count("tcr.grouped_rows(") == 2  # mean and variance, one per pixel column
    assert "x_moved2[(i6 + tc_lane9) * 48 + i5]" in src  # the (C, bp) tile moved pixel-major for dim 0
    assert "- mean[(p + tc_lane25)] / cutlass.Float32(48.0)" in src
    assert ("cute.math.rsqrt(var[(p_2_ + tc_lane47)] / cutlass.Float32(48.0) + cutlass.Float32(1e-06))"
            " * w[c_2_] + b[c_2_]") in src
    assert "if bx * 64 + (i4 + tc_lane52) < 300:" in src  # the last tile's store is masked


def test_conv3d_halo_copy_indexes_n_and_depth_and_masks_rows():
    src = _body("depthwise_conv3d_halo")
    assert re.search(r"if h0 \+ i4 < 12:\s+tc_ld5 = X\[n, d \+ kd, h0 \+ i4, w0 \+ i5, i6\]", src)
    assert "halo.iterator + cute.assume((i + kh) * 192 + (j + kw) * 32 + c, divby=8)" in src
    assert src.count("cute.arch.sync_threads()") == 2  # before the tile is refilled, and after


def test_fp16_maxpool_starts_at_minus_infinity():
    src = _body("maxpool_fp16_local")
    assert 'm[0] = cutlass.Float16(float("-inf"))' in src
    assert "if 0 <= ih and ih < 15 and 0 <= iw and iw < 16:" in src
    assert "m[0] = cutlass.Float16(cute.arch.fmax(cutlass.Float32(m[0]), cutlass.Float32(tc_ld1)))" in src


def test_integral_image_scans_columns_then_rows():
    src = _body("integral_image")
    col = src.split("# T.cumsum(s, s, dim=0)", 1)[1].split("# T.cumsum(s, s, dim=1)", 1)[0]
    assert re.search(r"= s\[tc_pos\d+ \* 64 \+ tc_line\d+\]", col)  # down a column
    row = src.split("# T.cumsum(s, s, dim=1)", 1)[1]
    assert re.search(r"= s\[tc_line\d+ \* 64 \+ tc_pos\d+\]", row)  # along a row
    assert "// 1" not in src


def test_histogram_counts_in_shared_then_merges():
    src = _body("histogram_u8")
    assert "tca.atomic_add(h, cutlass.Int32(cutlass.Uint8(img[b, bx * 1024 + i])), 1)" in src
    assert re.search(r"h\[i1\] = 0\s+cute\.arch\.sync_threads\(\)", src)
    assert "tca.atomic_add(hist, (b, i_1_), h[i_1_])" in src


def test_nms_sets_bit_k_for_later_boxes_over_threshold():
    src = _body("nms_iou_bitmask")
    assert "if j < 300 and j > i:" in src
    assert "if inter / (a_area + b_area - inter) > cutlass.Float32(0.5):" in src
    assert "bits[0] = bits[0] | cutlass.Uint64(1) << cutlass.Uint64(k_1_)" in src
    assert "mask[i, bj] = bits[0]" in src


def test_align_corners_scales_by_in_minus_one_over_out_minus_one():
    src = _body("upsample_bilinear_align_corners")
    assert "tc_tid = tc_tx + tc_ty * 32" in src  # threads=(32, 4)
    assert "sy = cutlass.Float32(oh) * cutlass.Float32(0.42105263157894735)" in src  # 8 / 19
    assert "sx = cutlass.Float32(ow) * cutlass.Float32(0.4)" in src  # 12 / 30
    assert "y1 = cutlass.min(y0 + 1, 8)" in src and "ly = sy - cutlass.Float32(y0)" in src


def test_blur_halo_starts_one_pixel_before_the_tile():
    src = _body("gaussian_blur_halo")  # sm_90a: TMA fills what lies outside the image with zeros
    assert "tct.load(X_desc, tc_smem + 0, tc_bar0, (0, bx * 16 - 1, by * 8 - 1, n), 11520)" in src
    sm80 = rounds.source(P.gaussian_blur_halo.get_tir(), "sm_80")  # by hand, both edges tested
    assert ("if by * 8 - 1 + i1 >= 0 and by * 8 - 1 + i1 < 30 and bx * 16 - 1 + i2 >= 0 and "
            "bx * 16 - 1 + i2 < 45:\n            tc_ld3 = X[n, by * 8 - 1 + i1, bx * 16 - 1 + i2, i3]") in sm80
    assert "if by * 8 + i4 < 30 and bx * 16 + i5 < 45:" in src  # the store's partial tiles


def test_deformable_gather_floors_offset_positions_and_zeroes_outside():
    src = _body("deformable_conv2d_gemm")
    assert "y = cutlass.Float32(oh - 1 + tap // 3) + tc_ld5" in src
    assert "y0 = cutlass.Int32(cute.math.floor(y))" in src and "ly = y - cutlass.Float32(y0)" in src
    assert re.search(r"v11 = cutlass\.select_\(y0 \+ 1 >= 0 and y0 \+ 1 < 12 and x0 \+ 1 >= 0 and x0 \+ 1 < 14, ", src)
    assert 'tcm.tiled_mma("wgmma"' in src


def test_conv1x1_epilogue_folds_bn_then_hardswish_then_residual():
    src = _body("conv1x1_bn_hardswish_residual")
    assert "v = acc[tc_r3 + tc_lane9] * ss[0, bx * 32 + (j + tc_lane9)] + ss[1, bx * 32 + (j + tc_lane9)]" in src
    # T.clamp(v + 3, 0, 6) of a float: TileLang's tl::clamp (NaN passes), the int bounds as floats
    assert ("v_1_ = v * cutlass.select_(cutlass.Boolean(cute.math.isnan(v + cutlass.Float32(3.0))), "
            "v + cutlass.Float32(3.0), "
            "cute.arch.fmin(cute.arch.fmax(v + cutlass.Float32(3.0), cutlass.Float32(0.0)), cutlass.Float32(6.0))) "
            "/ cutlass.Float32(6.0)") in src
    assert re.search(r"= cutlass\.Float16\(v_1_ \+ cutlass\.Float32\(tc_vec\d+\[tc_lane\d+\]\)\)", src)
    assert "tct.store(Y_desc, tc_smem + 0, (bx * 32, by * 64)" in src  # the partial last rows clipped by TMA


# ---- on a GPU, against torch -------------------------------------------------------------------
def _roi_taps(rois, PH, PW, H, W, scale, sr, aligned):
    """torchvision roi_align's sampling: (roi, batch, ph, pw, y, x, weight) for each bilinear
    tap of each of a cell's sr * sr samples, the weight divided by sr * sr (out-of-image
    samples give no taps)."""
    off = 0.5 if aligned else 0.0
    for r, (b, *box) in enumerate(rois.cpu().tolist()):
        x1, y1, x2, y2 = (v * scale - off for v in box)
        bw, bh = x2 - x1, y2 - y1
        if not aligned:
            bw, bh = max(bw, 1.0), max(bh, 1.0)
        bw, bh = bw / PW, bh / PH
        for ph, pw, iy, ix in itertools.product(range(PH), range(PW), range(sr), range(sr)):
            y = y1 + ph * bh + (iy + 0.5) * bh / sr
            x = x1 + pw * bw + (ix + 0.5) * bw / sr
            if y < -1.0 or y > H or x < -1.0 or x > W:
                continue
            y, x = max(y, 0.0), max(x, 0.0)
            y0, x0 = min(int(y), H - 1), min(int(x), W - 1)
            ly = 0.0 if y0 >= H - 1 else y - y0
            lx = 0.0 if x0 >= W - 1 else x - x0
            y_1, x_1 = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
            for yy, xx, wt in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x_1, (1 - ly) * lx),
                               (y_1, x0, ly * (1 - lx)), (y_1, x_1, ly * lx)):
                yield r, int(b), ph, pw, yy, xx, wt / (sr * sr)


def _roi_align_reference(x, rois, PH, PW, scale, sr):
    """roi_align(aligned=True) on NHWC, in float64 on the CPU."""
    x = x.cpu().double()
    out = torch.zeros(rois.shape[0], PH, PW, x.shape[-1], dtype=torch.float64)
    for r, b, ph, pw, y, xx, wt in _roi_taps(rois, PH, PW, x.shape[1], x.shape[2], scale, sr, True):
        out[r, ph, pw] += wt * x[b, y, xx]
    return out


@pytest.mark.gpu
def test_roi_align_nhwc_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(2, 24, 31, 64, device="cuda")
    # image coordinates (features at 1/4): boxes inside, across the right / bottom edge, tiny, off the top-left
    rois = torch.tensor([[0, 8.0, 4.0, 60.0, 50.0], [1, 90.0, 70.0, 130.0, 100.0], [0, 20.0, 20.0, 22.0, 23.0],
                         [1, -10.0, -6.0, 30.0, 12.0], [0, 0.0, 0.0, 123.0, 95.0]], device="cuda")
    got = P.roi_align_nhwc()(x, rois)
    torch.testing.assert_close(got.cpu().double(), _roi_align_reference(x, rois, 7, 7, 0.25, 2), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_avgpool2d_ceil_mode_on_gpu():
    x = rounds.randn(2, 6, 18, 20, dtype=f16)
    want = F.avg_pool2d(x.float(), 3, 2, 1, ceil_mode=True, count_include_pad=True)
    rounds.close(P.avgpool2d_ceil_mode()(x), want, 2e-3)


@pytest.mark.gpu
def test_nchw_to_nhwc_shared_on_gpu():
    x = rounds.randn(3, 72, 200, dtype=bf16)
    rounds.exact(P.nchw_to_nhwc_shared()(x), x.permute(0, 2, 1).contiguous())


@pytest.mark.gpu
def test_groupnorm_silu_nchw_on_gpu():
    x = rounds.randn(2, 64, 100, dtype=f16)
    gamma, beta = rounds.randn(64), rounds.randn(64)
    want = F.silu(F.group_norm(x.float(), 8, gamma, beta, 1e-5))
    rounds.close(P.groupnorm_silu_nchw()(x, gamma, beta), want, 1e-2)


@pytest.mark.gpu
def test_depthwise_conv2d_nhwc_s2_on_gpu():
    x, w, b = rounds.randn(2, 27, 30, 96, dtype=f16), rounds.randn(3, 3, 96, dtype=f16), rounds.randn(96, dtype=f16)
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(2, 0, 1).unsqueeze(1).float(), b.float(),
                    stride=2, padding=1, groups=96).permute(0, 2, 3, 1)
    rounds.close(P.depthwise_conv2d_nhwc_s2()(x, w, b), want, 1e-2)


@pytest.mark.gpu
def test_conv_transpose2d_implicit_gemm_on_gpu():
    x, w = rounds.randn(2, 9, 11, 32, dtype=f16), rounds.randn(4 * 4 * 32, 64, dtype=f16, scale=0.1)
    want = F.conv_transpose2d(x.permute(0, 3, 1, 2).float(), w.view(4, 4, 32, 64).permute(2, 3, 0, 1).float(),
                              stride=2, padding=1).permute(0, 2, 3, 1)
    rounds.close(P.conv_transpose2d_implicit_gemm()(x, w), want, 2e-2)


@pytest.mark.gpu
def test_maxpool2d_nhwc_ceil_reduce_on_gpu():
    x = rounds.randn(2, 18, 17, 64, dtype=f16)
    want = F.max_pool2d(x.permute(0, 3, 1, 2).float(), 3, 2, ceil_mode=True).permute(0, 2, 3, 1)
    rounds.exact(P.maxpool2d_nhwc_ceil_reduce()(x).float(), want)


@pytest.mark.gpu
def test_upsample_nearest_nchw_on_gpu():
    x = rounds.randn(2, 3, 13, 10)
    rounds.exact(P.upsample_nearest_nchw()(x), F.interpolate(x, size=(32, 23), mode="nearest"))


def _roi_align_backward_reference(dy, rois, H, W, scale, sr):
    """The gradient of roi_align(aligned=False) on NHWC, in float64 on the CPU."""
    dy = dy.cpu().double()
    _, PH, PW, C = dy.shape
    dx = torch.zeros(2, H, W, C, dtype=torch.float64)
    for r, b, ph, pw, y, x, wt in _roi_taps(rois, PH, PW, H, W, scale, sr, False):
        dx[b, y, x] += wt * dy[r, ph, pw]
    return dx


@pytest.mark.gpu
def test_roi_align_backward_atomic_on_gpu():
    torch.manual_seed(3)
    dy = torch.randn(4, 4, 4, 32, device="cuda")
    rois = torch.tensor([[0, 2.0, 3.0, 20.0, 25.0], [1, 30.0, 20.0, 45.0, 40.0], [0, 10.0, 10.0, 10.5, 11.0],
                         [1, -4.0, -2.0, 12.0, 8.0]], device="cuda")
    dx = torch.zeros(2, 16, 20, 32, device="cuda")
    P.roi_align_backward_atomic()(dy, rois, dx)
    torch.testing.assert_close(dx.cpu().double(), _roi_align_backward_reference(dy, rois, 16, 20, 0.5, 2),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_pixel_shuffle_nhwc_on_gpu():
    x = rounds.randn(2, 7, 9, 64, dtype=bf16)
    want = F.pixel_shuffle(x.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    rounds.exact(P.pixel_shuffle_nhwc()(x), want.contiguous())


@pytest.mark.gpu
def test_adaptive_avgpool2d_on_gpu():
    x = rounds.randn(2, 17, 23, 64)
    want = F.adaptive_avg_pool2d(x.permute(0, 3, 1, 2), (5, 7)).permute(0, 2, 3, 1)
    rounds.close(P.adaptive_avgpool2d()(x), want, 1e-5)


@pytest.mark.gpu
def test_layernorm2d_channels_first_on_gpu():
    x, w, b = rounds.randn(2, 48, 300), rounds.randn(48), rounds.randn(48)
    want = F.layer_norm(x.transpose(1, 2), (48,), w, b, 1e-6).transpose(1, 2)
    rounds.close(P.layernorm2d_channels_first()(x, w, b), want, 1e-4)


@pytest.mark.gpu
def test_depthwise_conv3d_halo_on_gpu():
    x = F.pad(rounds.randn(2, 6, 10, 12, 32, dtype=f16), (0, 0, 1, 1, 1, 1, 1, 1))
    w = rounds.randn(3, 3, 3, 32)
    want = F.conv3d(x.permute(0, 4, 1, 2, 3).float(), w.permute(3, 0, 1, 2).unsqueeze(1), groups=32)
    rounds.close(P.depthwise_conv3d_halo()(x, w), want.permute(0, 2, 3, 4, 1), 2e-2)


@pytest.mark.gpu
def test_maxpool_fp16_local_on_gpu():
    x = rounds.randn(2, 15, 16, 128, dtype=f16)
    want = F.max_pool2d(x.permute(0, 3, 1, 2), 3, 2, 1).permute(0, 2, 3, 1)
    rounds.exact(P.maxpool_fp16_local()(x), want.contiguous())


@pytest.mark.gpu
def test_integral_image_on_gpu():
    x = rounds.randn(3, 40, 50)
    rounds.close(P.integral_image()(x), x.double().cumsum(1).cumsum(2), 1e-3)


@pytest.mark.gpu
def test_histogram_u8_on_gpu():
    img = torch.randint(0, 256, (2, 5000), device="cuda", dtype=torch.uint8)
    want = torch.stack([torch.bincount(r.long(), minlength=256) for r in img]).int()
    rounds.exact(P.histogram_u8()(img), want)


@pytest.mark.gpu
def test_nms_iou_bitmask_on_gpu():
    torch.manual_seed(4)
    xy = torch.rand(300, 2, device="cuda") * 100
    boxes = torch.cat([xy, xy + torch.rand(300, 2, device="cuda") * 30 + 1], 1)
    mask = P.nms_iou_bitmask()(boxes)
    x1, y1, x2, y2 = boxes.double().unbind(1)
    w = (torch.min(x2[:, None], x2) - torch.max(x1[:, None], x1)).clamp(min=0)
    h = (torch.min(y2[:, None], y2) - torch.max(y1[:, None], y1)).clamp(min=0)
    area = (x2 - x1) * (y2 - y1)
    iou = w * h / (area[:, None] + area - w * h)
    want = (iou > 0.5) & torch.ones(300, 300, dtype=torch.bool, device="cuda").triu(1)
    m = mask.cpu().view(torch.int64)
    got = torch.stack([(m[:, j // 64] >> (j % 64)) & 1 for j in range(300)], 1).bool()
    # ties at the threshold may round either way in float32 vs float64
    assert (got != want.cpu()).sum() <= 2


@pytest.mark.gpu
def test_upsample_bilinear_align_corners_on_gpu():
    x = rounds.randn(2, 4, 9, 13, dtype=f16)
    want = F.interpolate(x.float(), size=(20, 31), mode="bilinear", align_corners=True)
    rounds.close(P.upsample_bilinear_align_corners()(x), want, 1e-2)


@pytest.mark.gpu
def test_gaussian_blur_halo_on_gpu():
    x = rounds.randn(2, 30, 45, 32, dtype=f16)
    k = torch.tensor([1.0, 2.0, 1.0], device="cuda")
    w = (k[:, None] * k[None, :] / 16).expand(32, 1, 3, 3)
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), w, padding=1, groups=32).permute(0, 2, 3, 1)
    rounds.close(P.gaussian_blur_halo()(x), want, 1e-2)


@pytest.mark.gpu
def test_deformable_conv2d_gemm_on_gpu():
    torch.manual_seed(5)
    x = rounds.randn(1, 12, 14, 32)
    off = rounds.randn(1, 12, 14, 9, 2, scale=1.5)
    w = rounds.randn(64, 9 * 32, dtype=f16, scale=0.1)
    y = P.deformable_conv2d_gemm()(x, off, w)
    # the reference: each tap's bilinear sample by grid_sample (zeros outside), rounded to
    # float16 as the kernel's A tile is, then the GEMM in float32
    oh, ow = torch.meshgrid(torch.arange(12, device="cuda"), torch.arange(14, device="cuda"), indexing="ij")
    cols = []
    for tap in range(9):
        py = oh - 1 + tap // 3 + off[0, :, :, tap, 0]
        px = ow - 1 + tap % 3 + off[0, :, :, tap, 1]
        grid = torch.stack([(2 * px + 1) / 14 - 1, (2 * py + 1) / 12 - 1], -1)[None]
        cols.append(F.grid_sample(x.permute(0, 3, 1, 2), grid, align_corners=False, padding_mode="zeros")[0])
    a = torch.stack(cols, 0).permute(2, 3, 0, 1).reshape(168, 9 * 32).half().float()
    rounds.close(y, a @ w.float().T, 2e-2)


@pytest.mark.gpu
def test_conv1x1_bn_hardswish_residual_on_gpu():
    x, w = rounds.randn(200, 64, dtype=f16), rounds.randn(64, 96, dtype=f16, scale=0.2)
    ss, r = torch.stack([rounds.randn(96) * 0.5 + 1, rounds.randn(96)]), rounds.randn(200, 96, dtype=f16)
    want = F.hardswish(x.float() @ w.float() * ss[0] + ss[1]) + r.float()
    rounds.close(P.conv1x1_bn_hardswish_residual()(x, w, ss, r), want, 2e-2)
