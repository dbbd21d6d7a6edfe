"""A nineteenth set of programs in TileLang's idioms (tests/unseen_programs19.py), none a
transformer: implicit-im2col convolutions (stride, dilation, padding, a tap loop over
channel tiles, flat views of the weight and output), depthwise and transposed convs,
pooling with argmax and its backward scatter, halo stencils in shared memory, scans over
shared and fragment buffers, segmented reductions from an offsets table, privatised
histograms, sorts of a row in shared memory, CSR products with run-time bounds, a
block-sparse GEMM skipping masked tiles, gathers / scatters with atomics, padded
transposes, warp shuffles, per-thread local arrays, vectorized and unrolled loops,
``while`` loops, integer and bit arithmetic and float64.  CPU: each builds to an sm_90a and
an sm_80 cubin, and what each means is checked in the generated source.  GPU: each matches
a torch reference."""

import math

import pytest

import rounds
import unseen_programs19 as P

PROGRAMS = ["conv2d_nhwc_stride_dilation", "conv2d_nhwc_tap_loop", "conv1d_causal_dilated_gemm",
            "conv_transpose2d_gather", "depthwise_conv2d_nhwc_halo", "maxpool2d_nhwc_argmax",
            "avgpool1d_nlc_include_pad", "stencil2d_9point_halo", "stencil1d_radius3_f64",
            "jacobi2d_two_steps_shared", "cumsum_shared_suffix_then_prefix",
            "cumsum_fragment_exclusive_reverse", "long_row_scan_carry", "segment_max_argmax_tree",
            "segmented_cumsum_offsets", "histogram_per_warp_private", "byte_histogram_from_words",
            "odd_even_transposition_sort", "bitonic_desc_thread_code", "csr_spmv_while_f64",
            "csr_spmm_row_tiles", "blocksparse_gemm_a_tile_mask", "embedding_gather_padding_idx",
            "scatter_add_rows_atomic", "scatter_reduce_amax_amin", "maxpool_backward_scatter",
            "transpose_padded_2d_threads", "batched_transpose_fp16_tileop", "row_norm_f64_shfl_xor",
            "block_sum_shfl_down_int", "warp_scan_local_arrays", "vectorized_axpy_half2",
            "horner_poly_unroll", "gcd_modpow_while", "int_div_mod_negative_forms",
            "circular_conv1d_wrap", "uint32_bit_tricks", "logsumexp_cumsum_f64", "gemm_f64_shared"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(PROGRAMS, rounds.tir_of(P), "sm_80")


# ---- what the generated source says ------------------------------------------------------
def test_im2col_convs_gather_with_their_strides_and_bounds():
    src = _src("conv2d_nhwc_stride_dilation")
    # ih = oh * stride + kh * dil - pad, the image bound and the M tail (N*OH*OW = 220)
    assert "ih = oh * 2 + kh * 2 - 2" in src and "iw = ow * 2 + kw * 2 - 2" in src
    assert "m < 220" in src and "ih < 19" in src and "iw < 21" in src
    assert "T.view of Wt" in src and "(288, 64,)" in src  # the flat (K, F) weight view
    src = _src("conv2d_nhwc_tap_loop")
    assert "c0 + j < 40" in src  # the half-empty last channel tile is masked
    assert "cute.arch.fmax(" in src  # bias + ReLU in the epilogue
    src = _src("conv1d_causal_dilated_gemm")
    assert "shift = (3 - k) * 3" in src and "t >= 0 and t < 300" in src


def test_transposed_conv_uses_floor_division_of_negative_offsets():
    src = _src("conv_transpose2d_gather")
    # th = oh + pad - kh may be negative: th % 2 is a floor modulo (th - th // 2 * 2)
    assert "th - th // 2 * 2 == 0" in src and "ih = th // 2" in src
    assert "ih >= 0" in src


def test_depthwise_reads_the_halo_patch_in_shared():
    src = _src("depthwise_conv2d_nhwc_halo")
    assert "(i + kh) * 640 + (j + kw) * 64" in src  # patch[i + kh, j + kw, c] of a (10, 10, 64) tile
    assert "by * 8 + i_1_ < 30 and bx * 8 + j_1_ < 37" in src  # both ragged edges of the output


def test_pooling_pads_and_divides_as_torch():
    src = _src("maxpool2d_nhwc_argmax")
    assert 'float("-inf")' in src and "cutlass.Int64(ih * 18 + iw)" in src
    assert "if v > best[" in src  # the first maximum in tap order wins
    src = _src("avgpool1d_nlc_include_pad")
    assert "/ cutlass.Float32(5.0)" in src  # count_include_pad: always KS


def test_stencils_sync_between_halo_writes_and_reads():
    for name, loads in [("stencil2d_9point_halo", 1), ("jacobi2d_two_steps_shared", 2),
                        ("stencil1d_radius3_f64", 1)]:
        body = _src(name).split("@cute.kernel", 1)[1].split("set_name_prefix", 1)[0]
        assert body.count("cute.arch.sync_threads()") >= loads, name
    src = _src("stencil2d_9point_halo")
    assert "cutlass.min(cutlass.max(by * 16 + i - 1, 0), 69)" in src  # T.clamp: clamp to edge
    src = _src("stencil1d_radius3_f64")
    assert "cute.make_rmem_tensor((7,), cutlass.Float64)" in src  # the T.alloc_local weights
    # the halo written by the first 2R threads is read by the others after a barrier
    after_halo = src.split("s[256 + tx] =", 1)[1]
    assert after_halo.index("cute.arch.sync_threads()") < after_halo.index("w[k_1_] * s[tx + k_1_]")


def test_scans_keep_their_dims_and_directions():
    src = _src("cumsum_shared_suffix_then_prefix")
    assert "T.cumsum(s, s, dim=0, reverse=True)" in src and "T.cumsum(s, s, dim=1)" in src
    assert "31 - (" in src  # the suffix runs from the last row
    src = _src("cumsum_fragment_exclusive_reverse")
    assert "dim=1, reverse=True" in src and "127 - (" in src
    src = _src("long_row_scan_carry")
    # the carry reads the tile's last element after the scan's barrier and before the next
    # tile's copy overwrites it (the next iteration starts with a barrier)
    loop = src.split("for t in cutlass.range(0, 4):", 1)[1]
    assert loop.index("cute.arch.sync_threads()") < loop.index("copy_async")
    assert "carry[0] = carry[0] + s[255]" in loop


def test_segmented_reductions_walk_run_time_bounds():
    src = _src("segment_max_argmax_tree")
    assert "while k[0] < end:" in src and "stride = 128 >> lv + 1" in src
    tree = src.split("for lv in cutlass.range(0, 7):", 1)[1]
    assert tree.index("cute.arch.sync_threads()") < tree.index("if tx < stride:")
    src = _src("segmented_cumsum_offsets")
    assert "for t in cutlass.range(0, (length + 64 - 1) // 64):" in src
    assert "carry[d_2_] = carry[d_2_] + s[63 * 32 + d_2_]" in src


def test_histograms_count_in_shared_then_global():
    src = _src("histogram_per_warp_private")
    assert "tca.atomic_add(h_s, tx // 32 * 96 + b_1_, 1)" in src
    assert "tca.atomic_add(H, (b_2_,), tot[0])" in src
    src = _src("byte_histogram_from_words")
    assert "w >> cutlass.Uint32(sh * 8) & cutlass.Uint32(255)" in src
    # the zeroing of h_s is seen by the other threads' atomics, and the atomics by the flush
    assert src.count("cute.arch.sync_threads()") >= 2


def test_sorts_sync_every_stage():
    src = _src("odd_even_transposition_sort")
    phase = src.split("for ph in cutlass.range(0, 128):", 1)[1]
    assert phase.lstrip().startswith("cute.arch.sync_threads()")
    src = _src("bitonic_desc_thread_code")
    stage = src.split("for e_1_ in cutlass.range(0, 2):", 1)[1].split("s[hi] = a", 1)[0]
    # reads of s after the last stage's writes, writes after this stage's reads
    assert stage.index("cute.arch.sync_threads()") < stage.index("a = s[lo]")
    # (and one between the two swapped writes: the branch writes s[lo] then s[hi], which
    # the barrier pass cannot prove are other threads' elements: it splits the branch there)
    assert stage.count("cute.arch.sync_threads()") == 3
    assert "desc = lo >> p + 1 & 1 == 0" in src


def test_sparse_programs():
    src = _src("csr_spmv_while_f64")
    assert "while k[0] < row_ptr[r + 1]:" in src and "cutlass.Float64" in src
    src = _src("csr_spmm_row_tiles")
    assert "for e in cutlass.range(row_ptr[r], " in src
    src = _src("blocksparse_gemm_a_tile_mask")
    assert "if (Mask[by, k] != 0):" in src
    # pipelined under the mask (16 blocks: a producer warpgroup): the producer loads step j's
    # tiles under step j's mask, step k's GEMM runs under step k's (the loads and GEMM are
    # skipped where the mask is 0)
    ahead = src.split("if (Mask[by, tc_j0] != 0):", 1)[1].split("else:", 1)[0]
    assert ahead.count("tct.load(") == 2
    masked = src.split("if (Mask[by, k] != 0):", 1)[1].split("else:", 1)[0]
    assert "tcm.gemm(" in masked and "tct.wait(tc_bar0" in masked


def test_gathers_and_scatters():
    src = _src("embedding_gather_padding_idx")
    assert "cutlass.select_(ids[t] >= 0, " in src
    src = _src("scatter_add_rows_atomic")
    assert "tca.atomic_add(Out, (idx[t], d_1_), Src[t, d_1_])" in src
    assert src.count("@cute.kernel\ndef ") == 2  # the zeroing kernel, then the scatter
    src = _src("scatter_reduce_amax_amin")
    assert "tca.atomic_max(Mx, (idx[i],), Vals[i])" in src and "tca.atomic_min(Mn, (idx[i],), Vals[i])" in src
    src = _src("maxpool_backward_scatter")
    assert "flat // cutlass.Int64(18)" in src and "flat - flat // cutlass.Int64(18) * cutlass.Int64(18)" in src


def test_transposes():
    src = _src("transpose_padded_2d_threads")
    assert "tc_tid = tc_tx + tc_ty * 32" in src
    assert "s[(ty + k * 8) * 33 + tx] = A[r, c]" in src and "s[tx * 33 + ty + k_1_ * 8]" in src
    assert "block=[32, 8, 1]" in src
    src = _src("batched_transpose_fp16_tileop")
    assert "i1 * 72 + i2" in src and "(j + tc_lane7) * 72 + i" in src  # the padded rows


def test_warp_shuffles():
    src = _src("row_norm_f64_shfl_xor")
    assert "cute.arch.shuffle_sync_bfly(acc[0], offset=16 >> o, mask_and_clamp=31)" in src
    src = _src("block_sum_shfl_down_int")
    assert src.count("cute.arch.shuffle_sync_down(") == 2
    src = _src("warp_scan_local_arrays")
    assert "cute.arch.shuffle_sync_up(run[0], offset=1 << o, mask_and_clamp=0)" in src
    assert "vals = cute.make_rmem_tensor((8,), cutlass.Int32)" in src


def test_vectorized_and_unrolled_loops():
    src = _src("vectorized_axpy_half2")
    assert "cute.make_layout(8)).load()" in src and "cute.make_layout(8)).store(" in src
    assert "if g == 1250:" in src  # the tail group of 5
    src = _src("horner_poly_unroll")
    assert "acc[0] = acc[0] * x + c[6 - k_1_]" in src


def test_integer_forms():
    src = _src("gcd_modpow_while")
    assert "while b[0] != 0:" in src and "while e[0] > cutlass.Uint64(0):" in src
    src = _src("int_div_mod_negative_forms")
    assert "Out[i, 0] = x // 7" in src and "Out[i, 1] = x - x // 7 * 7" in src
    # floor by -3 without negating x (0 - x wraps at INT32_MIN): q, r of the positive 3
    assert "Out[i, 2] = 0 - x // 3 - cutlass.Int32(cutlass.select_(x - x // 3 * 3 != 0, 1, 0))" in src
    assert "Out[i, 3] = cutlass.Int32(cutlass.select_(x - x // 3 * 3 != 0, x - x // 3 * 3 - 3, 0))" in src
    assert "tcmath.truncdiv(x, 7)" in src and "tcmath.truncmod(x, 7)" in src
    assert "Out[i, 6] = x >> 2" in src and "tcmath.truncdiv(x, q2)" in src
    src = _src("circular_conv1d_wrap")
    assert "(i - k + 4) - (i - k + 4) // 257 * 257" in src  # a floor modulo: no negative index
    src = _src("uint32_bit_tricks")
    assert "x << cutlass.Uint32(13) | x >> cutlass.Uint32(19)" in src
    assert "cute.arch.popc(x)" in src and "(x ^ cutlass.Uint32(4294967295))" in src


def test_float64_programs():
    src = _src("logsumexp_cumsum_f64")
    assert 'tcr.warp_allreduce(tc_acc10, "max", 32)' in src and "cutlass.Float64" in src
    src = _src("gemm_f64_shared")
    assert "cutlass.Float64" in src and "gemm_simt" in src


def test_row_that_fits_no_thread_split_is_refused_by_name():
    # a float64 row of 200 over 128 threads: TileLang gives each of 8 threads a whole row
    # (replicated 16 times); tilecute's fragment layouts spread rows over threads, so it
    # refuses the reduce by name rather than computing something else
    with pytest.raises(Exception, match=r"T.reduce_max: rows of 'x' have 200 elements"):
        P.logsumexp_cumsum_f64(N=200)


# ---- GPU: against torch -------------------------------------------------------------------
def _close(got, want, tol):
    import torch
    torch.testing.assert_close(got.double(), want.double(), atol=tol, rtol=tol)


@pytest.mark.gpu
def test_convs_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(2, 19, 21, 32, device="cuda", dtype=torch.float16)
    w = torch.randn(3, 3, 32, 64, device="cuda", dtype=torch.float16) * 0.1
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(), stride=2, padding=2,
                    dilation=2).permute(0, 2, 3, 1)
    _close(P.conv2d_nhwc_stride_dilation()(x, w), want, 2e-2)
    x = torch.randn(2, 15, 17, 40, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3, 3, 40, 48, device="cuda", dtype=torch.bfloat16) * 0.1
    b = torch.randn(48, device="cuda")
    want = torch.relu(F.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(), padding=1)
                      + b[None, :, None, None]).permute(0, 2, 3, 1).reshape(-1, 48)
    _close(P.conv2d_nhwc_tap_loop()(x, w, b), want, 5e-2)
    x = torch.randn(2, 300, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(4, 64, 64, device="cuda", dtype=torch.float16) * 0.1
    xp = F.pad(x.float().transpose(1, 2), (9, 0))
    want = F.conv1d(xp, w.float().permute(2, 1, 0), dilation=3).transpose(1, 2)
    _close(P.conv1d_causal_dilated_gemm()(x, w), want, 2e-2)
    x = torch.randn(2, 8, 9, 11, device="cuda")
    w = torch.randn(8, 6, 4, 4, device="cuda")
    _close(P.conv_transpose2d_gather()(x, w), F.conv_transpose2d(x, w, stride=2, padding=1), 1e-4)
    x = torch.randn(2, 30, 37, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(3, 3, 64, device="cuda", dtype=torch.float16)
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(2, 0, 1)[:, None].float(), padding=1,
                    groups=64).permute(0, 2, 3, 1)
    _close(P.depthwise_conv2d_nhwc_halo()(x, w), want, 1e-2)


@pytest.mark.gpu
def test_pooling_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(1)
    x = torch.randn(2, 21, 18, 32, device="cuda")
    y, idx = P.maxpool2d_nhwc_argmax()(x)
    wy, widx = F.max_pool2d(x.permute(0, 3, 1, 2), 3, 2, 1, return_indices=True)
    _close(y, wy.permute(0, 2, 3, 1), 0)
    assert torch.equal(idx, widx.permute(0, 2, 3, 1))
    g = torch.randn_like(y)
    gi = P.maxpool_backward_scatter()(g.contiguous(), idx.contiguous())
    xr = x.permute(0, 3, 1, 2).clone().requires_grad_()
    F.max_pool2d(xr, 3, 2, 1).backward(g.permute(0, 3, 1, 2))
    _close(gi, xr.grad.permute(0, 2, 3, 1), 1e-5)
    x = torch.randn(3, 101, 48, device="cuda", dtype=torch.float16)
    want = F.avg_pool1d(x.float().transpose(1, 2), 5, 3, 2).transpose(1, 2)
    _close(P.avgpool1d_nlc_include_pad()(x), want, 2e-3)


@pytest.mark.gpu
def test_stencils_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(2)
    x = torch.randn(70, 100, device="cuda")
    k = torch.full((3, 3), 0.0625, device="cuda")
    k[1, 1] = 0.5
    want = F.conv2d(F.pad(x[None, None], (1, 1, 1, 1), mode="replicate"), k[None, None])[0, 0]
    _close(P.stencil2d_9point_halo()(x), want, 1e-5)
    x = torch.randn(5000, device="cuda", dtype=torch.float64)
    w = torch.randn(7, device="cuda", dtype=torch.float64)
    want = F.conv1d(F.pad(x[None, None], (3, 3)), w[None, None])[0, 0]
    _close(P.stencil1d_radius3_f64()(x, w), want, 1e-12)
    x = torch.randn(64, 90, device="cuda")
    k4 = torch.tensor([[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]], device="cuda")[None, None]
    want = F.conv2d(F.conv2d(x[None, None], k4, padding=1), k4, padding=1)[0, 0]
    _close(P.jacobi2d_two_steps_shared()(x), want, 1e-5)


@pytest.mark.gpu
def test_scans_on_gpu():
    import torch
    torch.manual_seed(3)
    x = torch.randn(100, 90, device="cuda")
    want = torch.empty_like(x)
    for r0 in range(0, 100, 32):
        for c0 in range(0, 90, 64):
            t = x[r0:r0 + 32, c0:c0 + 64]
            want[r0:r0 + 32, c0:c0 + 64] = t.flip(0).cumsum(0).flip(0).cumsum(1)
    _close(P.cumsum_shared_suffix_then_prefix()(x), want, 1e-4)
    xi = torch.randint(-50, 50, (64, 128), device="cuda", dtype=torch.int32)
    ex, suf = P.cumsum_fragment_exclusive_reverse()(xi)
    assert torch.equal(ex, (xi.cumsum(1) - xi).int())
    assert torch.equal(suf, xi.flip(1).cumsum(1).flip(1).int())
    x = torch.randn(6, 1000, device="cuda")
    _close(P.long_row_scan_carry()(x), x.double().cumsum(1), 1e-3)
    offs = [0, 300, 300, 1000, 1064, 1999, 2000]
    S = len(offs) - 1
    xs = torch.randn(2000, 32, device="cuda")
    o = torch.tensor(offs[:S + 1], device="cuda", dtype=torch.int32)
    got = P.segmented_cumsum_offsets(S=S)(xs, o)
    want = torch.cat([xs[a:b].double().cumsum(0) for a, b in zip(offs, offs[1:])])
    _close(got, want, 1e-3)


@pytest.mark.gpu
def test_segmented_max_and_histograms_on_gpu():
    import torch
    torch.manual_seed(4)
    offs = [0, 0, 1, 129, 1000, 1000, 2999, 3000]
    x = torch.randn(3000, device="cuda")
    x[500] = x[700] = 10.0  # a tie: the first index wins
    mx, arg = P.segment_max_argmax_tree()(x, torch.tensor(offs, device="cuda", dtype=torch.int32))
    for s, (a, b) in enumerate(zip(offs, offs[1:])):
        if a == b:
            assert mx[s].item() == -math.inf and arg[s].item() == -1
        else:
            assert mx[s].item() == x[a:b].max().item()
            assert arg[s].item() == int(torch.nonzero(x[a:b] == x[a:b].max())[0])
    v = torch.randn(20000, device="cuda") * 1.5
    # (an out_idx output would be torch.empty: the kernels add into H, so it is passed zeroed)
    h = torch.zeros(96, device="cuda", dtype=torch.int32)
    P.histogram_per_warp_private()(v, h)
    keep = (v >= -3) & (v < 3)
    want = torch.clamp(torch.floor((v[keep] + 3) / 0.0625).long(), max=95).bincount(minlength=96)
    assert torch.equal(h.long(), want)
    words = torch.randint(0, 2 ** 31, (5000,), device="cuda", dtype=torch.int64)
    words = (words * 3 + 12345) % (2 ** 32)
    hb = torch.zeros(256, device="cuda", dtype=torch.uint32)
    P.byte_histogram_from_words()(words.to(torch.int64).to(torch.uint32), hb)
    b = torch.stack([(words >> (8 * i)) & 255 for i in range(4)]).flatten()
    assert torch.equal(hb.to(torch.int64), b.bincount(minlength=256))


@pytest.mark.gpu
def test_sorts_on_gpu():
    import torch
    torch.manual_seed(5)
    x = torch.randn(6, 128, device="cuda")
    y, p = P.odd_even_transposition_sort()(x)
    ws, wi = torch.sort(x, dim=1, stable=True)
    assert torch.equal(y, ws) and torch.equal(p.long(), wi)
    xi = torch.randint(-1000, 1000, (5, 512), device="cuda", dtype=torch.int32)
    assert torch.equal(P.bitonic_desc_thread_code()(xi), torch.sort(xi, dim=1, descending=True).values)


def _csr(rows, cols, nnz, seed, dtype):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    counts = torch.multinomial(torch.ones(rows), nnz, replacement=True, generator=g).bincount(minlength=rows)
    counts[3] = 0  # an empty row
    row_ptr = torch.zeros(rows + 1, dtype=torch.int32)
    row_ptr[1:] = counts.cumsum(0)
    n = int(row_ptr[-1])
    col = torch.randint(0, cols, (nnz,), generator=g, dtype=torch.int32)
    val = torch.randn(nnz, generator=g, dtype=dtype)
    dense = torch.zeros(rows, cols, dtype=torch.float64)
    for r in range(rows):
        for e in range(int(row_ptr[r]), int(row_ptr[r + 1])):
            dense[r, int(col[e])] += float(val[e])
    assert n <= nnz
    return row_ptr.cuda(), col.cuda(), val.cuda(), dense.cuda()


@pytest.mark.gpu
def test_sparse_products_on_gpu():
    import torch
    torch.manual_seed(6)
    rp, ci, va, dense = _csr(700, 500, 4000, 0, torch.float64)
    x = torch.randn(500, device="cuda", dtype=torch.float64)
    _close(P.csr_spmv_while_f64()(rp, ci, va, x), dense @ x, 1e-10)
    rp, ci, va, dense = _csr(300, 400, 3000, 1, torch.float32)
    bm = torch.randn(400, 96, device="cuda", dtype=torch.float16)
    _close(P.csr_spmm_row_tiles()(rp, ci, va, bm), dense @ bm.double(), 1e-3)
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    mask = torch.rand(4, 8, device="cuda") > 0.5
    am = a.float() * mask.repeat_interleave(64, 0).repeat_interleave(64, 1)
    _close(P.blocksparse_gemm_a_tile_mask()(a, b, mask), am @ b.float().T, 1e-1)


@pytest.mark.gpu
def test_gathers_and_scatters_on_gpu():
    import torch
    torch.manual_seed(7)
    emb = torch.randn(1000, 96, device="cuda", dtype=torch.bfloat16)
    ids = torch.randint(-1, 1000, (333,), device="cuda", dtype=torch.int32)
    want = torch.where(ids[:, None] >= 0, emb[ids.clamp(min=0).long()], torch.zeros_like(emb[:1]))
    assert torch.equal(P.embedding_gather_padding_idx()(emb, ids), want)
    src = torch.randn(700, 64, device="cuda")
    idx = torch.randint(0, 50, (700,), device="cuda")
    _close(P.scatter_add_rows_atomic()(src, idx), torch.zeros(50, 64, device="cuda").index_add_(0, idx, src), 1e-4)
    v = torch.randn(900, device="cuda")
    idx = torch.randint(0, 40, (900,), device="cuda", dtype=torch.int32)
    mx, mn = P.scatter_reduce_amax_amin()(v, idx)
    wmx = torch.full((40,), -math.inf, device="cuda").scatter_reduce(0, idx.long(), v, "amax")
    wmn = torch.full((40,), math.inf, device="cuda").scatter_reduce(0, idx.long(), v, "amin")
    assert torch.equal(mx, wmx) and torch.equal(mn, wmn)


@pytest.mark.gpu
def test_transposes_on_gpu():
    import torch
    a = torch.randn(200, 150, device="cuda")
    assert torch.equal(P.transpose_padded_2d_threads()(a), a.T.contiguous())
    a = torch.randn(3, 96, 130, device="cuda", dtype=torch.float16)
    assert torch.equal(P.batched_transpose_fp16_tileop()(a), a.transpose(1, 2).contiguous())


@pytest.mark.gpu
def test_thread_level_programs_on_gpu():
    import torch
    torch.manual_seed(8)
    x = torch.randn(37, 300, device="cuda", dtype=torch.float64)
    _close(P.row_norm_f64_shfl_xor()(x), x.norm(dim=1), 1e-12)
    xi = torch.randint(-1000, 1000, (50000,), device="cuda", dtype=torch.int32)
    out = torch.full((1,), 7, device="cuda", dtype=torch.int32)
    P.block_sum_shfl_down_int()(xi, out)  # adds onto what Out holds
    assert out.item() == 7 + int(xi.long().sum())
    xi = torch.randint(-100, 100, (8192,), device="cuda", dtype=torch.int32)
    assert torch.equal(P.warp_scan_local_arrays()(xi), xi.cumsum(0).int())
    x = torch.randn(10005, device="cuda", dtype=torch.float16)
    b = torch.randn(10005, device="cuda", dtype=torch.float16)
    _close(P.vectorized_axpy_half2()(x, b), (0.75 * x.float() + b.float()), 2e-3)
    x = torch.rand(4096, device="cuda") * 2 - 1
    c = torch.randn(8, device="cuda")
    want = sum(c[k] * x ** k for k in range(8))
    _close(P.horner_poly_unroll()(x, c), want, 1e-4)


@pytest.mark.gpu
def test_integer_programs_on_gpu():
    import torch
    torch.manual_seed(9)
    a = torch.randint(1, 100000, (1000,), dtype=torch.int64)
    b = torch.randint(1, 100000, (1000,), dtype=torch.int64)
    out = P.gcd_modpow_while()(a.int().cuda(), b.int().cuda()).cpu()
    g = torch.gcd(a, b)
    assert torch.equal(out[:, 0], g)
    assert [int(v) for v in out[:, 1]] == [pow(int(x), int(e) + 10, 1000000007) for x, e in zip(a, g)]
    x = torch.randint(-1000, 1000, (512,), dtype=torch.int32)
    out = P.int_div_mod_negative_forms()(x.cuda()).cpu().long()
    xl = x.long()
    q = torch.roll(xl, -1) % 5 - 2
    q2 = torch.where(q == 0, torch.tensor(3), q)
    want = torch.stack([xl // 7, xl % 7, xl // -3, xl % -3, torch.div(xl, 7, rounding_mode="trunc"),
                        torch.fmod(xl, 7), xl >> 2, xl // q2, xl % q2,
                        torch.div(xl, q2, rounding_mode="trunc")], 1)
    assert torch.equal(out, want)
    x = torch.randn(257, device="cuda")
    want = sum((k + 1) * 0.125 * torch.roll(x, k - 4) for k in range(9))
    _close(P.circular_conv1d_wrap()(x), want, 1e-5)
    xs = [int(v) for v in torch.randint(0, 2 ** 32, (1024,), dtype=torch.int64)]
    got = P.uint32_bit_tricks()(torch.tensor(xs, dtype=torch.int64).to(torch.uint32).cuda()).cpu().to(torch.int64)
    M = 0xFFFFFFFF
    for i, v in enumerate(xs):
        rot = ((v << 13) | (v >> 19)) & M
        s = (v ^ (v << 13)) & M
        s ^= s >> 17
        s = (s ^ (s << 5)) & M
        rev = int(format(i, "010b")[::-1], 2)
        assert int(got[rev, 0]) & M == rot ^ s
        assert int(got[i, 1]) == bin(v).count("1")
        assert int(got[i, 2]) & M == (~v) & 0xFFFF0000


@pytest.mark.gpu
def test_float64_programs_on_gpu():
    import torch
    torch.manual_seed(10)
    x = torch.randn(50, 256, device="cuda", dtype=torch.float64)
    lse, c = P.logsumexp_cumsum_f64()(x)
    _close(lse, torch.logsumexp(x, 1), 1e-12)
    _close(c, x.cumsum(1), 1e-12)
    a = torch.randn(64, 96, device="cuda", dtype=torch.float64)
    b = torch.randn(96, 64, device="cuda", dtype=torch.float64)
    _close(P.gemm_f64_shared()(a, b), a @ b, 1e-12)
