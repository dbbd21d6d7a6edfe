"""A thirty-fourth set of programs in TileLang's idioms (tests/unseen_programs34.py): losses,
vision and state-space kernels.

CPU: each builds to an sm_90a cubin, and what decides its result is read in the generated
source (the running max / sum carried across vocabulary chunks, the conv window's zero halo,
the scan's state kept in registers across steps, the pool's -inf start, the bilinear floor).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs34.py``)."""

import pytest
import torch

import rounds
import unseen_programs34 as P

NAMES = ["cross_entropy_fwd", "cross_entropy_bwd", "causal_conv1d", "selective_scan",
         "group_norm_nhwc", "max_pool_3x3_s2", "upsample_bilinear_2x", "column_softmax",
         "embedding_bag_mean"]


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


def test_cross_entropy_carries_max_and_sum_across_chunks():
    src = _body("cross_entropy_fwd")
    # the running values are per-thread scalars updated once per chunk, the chunk maximum
    # and sum all-reduced over the block first
    assert 'm[0] = cutlass.Float32(float("-inf"))' in src
    assert "tcr.block_allreduce(" in src and src.count("tcr.block_allreduce(") == 2
    assert "s[0] = s[0] * cute.math.exp2((m[0] - m_new)" in src
    assert "m[0] = m_new" in src
    # the label's logit: one read at a run-time column
    assert "X[r, label]" in src


def test_conv_window_zero_halo_and_taps():
    src = _body("causal_conv1d")
    # the halo columns before t = 0 are zeros, not a read at a negative column
    assert "cutlass.select_(src >= 0" in src and "cutlass.Float16(0.0)" in src
    # the W taps read the window at t + k, after the window is complete
    k_loop = src.index("for k in cutlass.range_constexpr(0, 4)")
    assert "cute.arch.sync_threads()" in src[:k_loop]
    assert "+ k]" in src[k_loop:]


def test_scan_state_stays_in_registers_across_steps():
    src = _body("selective_scan")
    step = src.index("for t in cutlass.range(0, 256)")
    # h is cleared once, before the steps, and updated in place each step
    assert src.index("h[tc_lane2] = cutlass.Float32(0.0)") < step
    assert "h[tc_lane9] = cute.math.exp(dt * a[tc_lane9]) * h[tc_lane9]" in src[step:]
    # the row sum over the state is a 4-lane reduction each step
    assert "tcr.warp_allreduce(tc_acc18, \"sum\", 4)" in src[step:]


def test_pool_starts_at_minus_infinity_and_skips_padding():
    src = _body("max_pool_3x3_s2")
    assert 'best[tc_lane2] = cutlass.Float32(float("-inf"))' in src
    assert "if ih >= 0 and ih < 56 and iw >= 0 and iw < 56:" in src
    assert "cute.arch.fmax(best[tc_lane5]" in src


def test_bilinear_floors_the_source_coordinate():
    src = _body("upsample_bilinear_2x")
    assert "y0 = cutlass.Int32(cute.math.floor(sy))" in src
    assert "x1 = cutlass.min(x0 + 1, 31)" in src
    # (ox + 0.5): the integer loop index converted to float32 first, as TVM promotes it
    assert "(cutlass.Float32(ox) + cutlass.Float32(0.5))" in src


def test_empty_bag_reads_nothing():
    src = _body("embedding_bag_mean")
    assert "for k in cutlass.range(0, hi[0] - lo[0]" in src
    assert "cutlass.select_(hi[0] > lo[0]" in src


# ---- GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cross_entropy_gpu():
    torch.manual_seed(0)
    x = (torch.randn(256, 8192, device="cuda") * 3).bfloat16()
    y = torch.randint(0, 8192, (256,), device="cuda")
    loss = P.cross_entropy_fwd()(x, y)
    ref = torch.nn.functional.cross_entropy(x.float(), y, reduction="none")
    torch.testing.assert_close(loss, ref, atol=1e-4, rtol=1e-4)
    # backward from the saved log-sum-exp
    xh = x.half()
    lse = torch.logsumexp(xh.float(), dim=1)
    dl = torch.rand(256, device="cuda")
    dx = P.cross_entropy_bwd()(xh, y.int(), lse, dl)
    ref = (torch.softmax(xh.float(), 1) - torch.nn.functional.one_hot(y, 8192).float()) * dl[:, None]
    torch.testing.assert_close(dx.float(), ref, atol=2e-3, rtol=1e-2)


@pytest.mark.gpu
def test_causal_conv1d_gpu():
    torch.manual_seed(0)
    x = torch.randn(2, 512, 1024, device="cuda").half()
    w = torch.randn(512, 4, device="cuda")
    y = P.causal_conv1d()(x, w)
    ref = torch.nn.functional.conv1d(torch.nn.functional.pad(x.float(), (3, 0)), w[:, None, :], groups=512)
    torch.testing.assert_close(y.float(), torch.nn.functional.silu(ref), atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_selective_scan_gpu():
    torch.manual_seed(0)
    Bt, L, D, Nst = 2, 256, 256, 16
    x = torch.randn(Bt, L, D, device="cuda")
    dt = torch.rand(Bt, L, D, device="cuda") * 0.1
    a = -torch.rand(D, Nst, device="cuda")
    bm = torch.randn(Bt, L, Nst, device="cuda")
    cm = torch.randn(Bt, L, Nst, device="cuda")
    y = P.selective_scan()(x, dt, a, bm, cm)
    h = torch.zeros(Bt, D, Nst, device="cuda")
    ref = torch.empty_like(x)
    for t in range(L):
        h = torch.exp(dt[:, t, :, None] * a) * h + dt[:, t, :, None] * bm[:, t, None, :] * x[:, t, :, None]
        ref[:, t] = (h * cm[:, t, None, :]).sum(-1) + x[:, t]
    torch.testing.assert_close(y, ref, atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_group_norm_gpu():
    torch.manual_seed(0)
    x = torch.randn(4, 1024, 256, device="cuda").half()
    g = torch.randn(256, device="cuda")
    b = torch.randn(256, device="cuda")
    y = P.group_norm_nhwc()(x, g, b)
    ref = torch.nn.functional.group_norm(x.float().permute(0, 2, 1), 8, g, b, eps=1e-5).permute(0, 2, 1)
    torch.testing.assert_close(y.float(), ref, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_pool_upsample_gpu():
    torch.manual_seed(0)
    x = torch.randn(2, 56, 56, 64, device="cuda")
    y = P.max_pool_3x3_s2()(x)
    ref = torch.nn.functional.max_pool2d(x.permute(0, 3, 1, 2), 3, 2, 1).permute(0, 2, 3, 1)
    torch.testing.assert_close(y, ref)
    x = torch.randn(2, 32, 32, 32, device="cuda")
    y = P.upsample_bilinear_2x()(x)
    ref = torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_column_softmax_and_bag_gpu():
    torch.manual_seed(0)
    x = torch.randn(128, 1024, device="cuda")
    torch.testing.assert_close(P.column_softmax()(x), torch.softmax(x, 0), atol=1e-6, rtol=1e-5)
    emb = torch.randn(4096, 256, device="cuda")
    idx = torch.randint(0, 4096, (1024,), device="cuda", dtype=torch.int32)
    cuts = torch.sort(torch.randint(0, 1025, (63,))).values
    off = torch.cat([torch.tensor([0]), cuts, torch.tensor([1024])]).int().cuda()
    off[5] = off[4]  # an empty bag
    out = P.embedding_bag_mean()(emb, idx, off)
    ref = torch.stack([emb[idx[off[b]:off[b + 1]].long()].mean(0) if off[b + 1] > off[b]
                       else torch.zeros(256, device="cuda") for b in range(64)])
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
