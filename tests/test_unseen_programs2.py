"""A second set of programs in TileLang's idioms (tests/unseen_programs2.py): each builds
to an sm_90a cubin on the CPU, and on a GPU matches torch.  The fixes they led to have
their focused tests with their passes (tests/test_passes.py: the attention schedule with
``T.clear`` before its first GEMM, barriers around branches on the thread index, nests
whose loop order permutes their fragments' dims)."""

import math

import pytest

import tilecute

import rounds
import unseen_programs2 as P

PROGRAMS = ["flash_attn_gqa_causal", "flash_attn_overlap", "gemv_warp_reduce", "gemv_shfl_tree",
            "transpose_shared", "gemm_int8", "gemm_fp8_e4m3", "gemm_annotated_swizzle",
            "gemm_square_kpack", "gemm_bias_gelu", "batched_gemm", "gemm_register_a",
            "dequant_int4_gemm", "conv2d_im2col_loads", "strided_loops_scalars", "math_helpers",
            "reductions_min_dim0", "row_argmax", "argmax_scan_thread", "parallel_3d",
            "fill_shared_pad", "atomic_pairs", "shared_histogram", "copy_forms",
            "pipelined_softmax_rows", "fp8_row_quant", "kernel_forms", "gemm_ragged",
            "ragged_rows_fragment", "attn_lse_band", "dq_atomic_accumulate", "splitk_workspace",
            "gemm_tt_colscale", "axpby_scalars", "int8_quant_round", "gemm_wide_n_256threads",
            "gemm_fp16_accum", "attn_bwd_dv", "gqa_tile_atomic", "paged_gather_sum", "topk_rows",
            "compact_positive"]


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


def test_variants_build(tmp_path):
    for i, func in enumerate([P.flash_attn_gqa_causal(causal=False, stages=3),
                              P.gemm_annotated_swizzle(rasterize=False)]):
        out = tmp_path / str(i)
        assert tilecute.build_cubin(func, "sm_90a", out_dir=str(out)).kernel_names


def test_two_kernel_programs_launch_in_order(tmp_path):
    info = tilecute.build_cubin(P.splitk_workspace(), "sm_90a", out_dir=str(tmp_path))
    assert sorted(info.kernel_names) == ["tilecute_splitk_ws_0", "tilecute_splitk_ws_1"]
    src = (tmp_path / "kernel_cute.py").read_text()
    assert src.index("tilecute_splitk_ws_0(") < src.index("tilecute_splitk_ws_1(", src.index("@cute.jit"))


def test_jit_factories_build():
    k = P.jit_dynamic_rowscale()
    assert [a.name for a in k.abi.args] == ["X", "s", "Y"] and k.ensure_cubin()
    g = P.jit_gemm_pass_configs(256, 256, 256)
    assert g.ensure_cubin()
    src = g.get_kernel_source()
    assert "tct.load(" not in src  # TL_DISABLE_TMA_LOWER
    assert "approx=True" in src  # TL_ENABLE_FAST_MATH: the sigmoid's exp


# ---- on the GPU ------------------------------------------------------------------------------
_randn = rounds.randn


def _close(got, want, atol=1e-2, rtol=1e-2):
    rounds.close_on_cpu(got, want, atol, rtol)


_run = rounds.run


def _attention(q, k, v, causal=False, window=None):
    """q (B, H, S, D); k, v (B, Hkv, S, D); float32 result and base-2 log-sum-exp."""
    import torch
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    s = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    n = q.shape[2]
    qi = torch.arange(n, device="cuda")[:, None]
    kj = torch.arange(n, device="cuda")[None, :]
    keep = torch.ones(n, n, dtype=torch.bool, device="cuda")
    if causal:
        keep &= kj <= qi
    if window is not None:
        keep &= (kj <= qi) & (kj > qi - window)
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1) * math.log2(math.e)


@pytest.mark.gpu
def test_attention_programs_on_gpu():
    import torch
    q = _randn(2, 8, 256, 64, dtype=torch.float16)
    k, v = _randn(2, 2, 256, 64, dtype=torch.float16), _randn(2, 2, 256, 64, dtype=torch.float16)
    for causal, stages in ((True, 2), (False, 3)):
        o = torch.empty_like(q)
        _run(P.flash_attn_gqa_causal(causal=causal, stages=stages), q, k, v, o)
        _close(o, _attention(q, k, v, causal=causal)[0], atol=2e-2, rtol=2e-2)
    q, k, v = (_randn(1, 512, 4, 128, dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    _run(P.flash_attn_overlap(), q, k, v, o)
    want = _attention(*(t.transpose(1, 2) for t in (q, k, v)))[0].transpose(1, 2)
    _close(o, want, atol=2e-2, rtol=2e-2)
    q, k, v = (_randn(2, 2, 256, 64, dtype=torch.float16) for _ in range(3))
    o, lse = torch.empty(2, 2, 256, 64, device="cuda"), torch.empty(2, 2, 256, device="cuda")
    _run(P.attn_lse_band(), q, k, v, o, lse)
    want_o, want_lse = _attention(q, k, v, window=96)
    _close(o, want_o, atol=2e-2, rtol=2e-2)
    _close(lse, want_lse, atol=1e-2, rtol=1e-3)
    ds = _randn(1, 2, 128, 128, dtype=torch.float16)
    kk = _randn(1, 128, 2, 64, dtype=torch.float16)
    dq = torch.zeros(1, 128, 2, 64, device="cuda")
    _run(P.dq_atomic_accumulate(), ds, kk, dq)
    _close(dq, (ds.float() @ kk.float().transpose(1, 2)).transpose(1, 2), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_gemv_and_transpose_on_gpu():
    import torch
    a, x = _randn(1024, 2048, dtype=torch.float16), _randn(2048, dtype=torch.float16)
    y = torch.empty(1024, device="cuda")
    _run(P.gemv_warp_reduce(), a, x, y)
    _close(y, a.float() @ x.float(), atol=5e-2, rtol=1e-3)
    a, x = _randn(512, 1024), _randn(1024)
    y = torch.empty(512, device="cuda")
    _run(P.gemv_shfl_tree(), a, x, y)
    _close(y, a @ x, atol=1e-3, rtol=1e-4)
    a = _randn(1000, 700)
    b = torch.empty(700, 1000, device="cuda")
    _run(P.transpose_shared(), a, b)
    _close(b, a.T, atol=0, rtol=0)


@pytest.mark.gpu
def test_gemm_dtype_programs_on_gpu():
    import torch
    a = torch.randint(-128, 128, (256, 512), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (256, 512), device="cuda", dtype=torch.int8)
    c = torch.empty(256, 256, device="cuda", dtype=torch.int32)
    _run(P.gemm_int8(), a, b, c)
    assert torch.equal(c.cpu(), (a.cpu().long() @ b.cpu().long().T).int())
    a8 = (_randn(256, 256) * 0.5).to(torch.float8_e4m3fn)
    b8 = (_randn(256, 256) * 0.5).to(torch.float8_e4m3fn)
    scale = torch.tensor([0.25], device="cuda")
    c = torch.empty(256, 256, device="cuda", dtype=torch.bfloat16)
    _run(P.gemm_fp8_e4m3(), a8, b8, scale, c)
    _close(c, a8.float() @ b8.float().T * 0.25, atol=5e-2, rtol=2e-2)
    a, b = _randn(128, 128, dtype=torch.float16), _randn(128, 128, dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda", dtype=torch.float16)
    _run(P.gemm_fp16_accum(), a, b, c)
    _close(c, a.float() @ b.float(), atol=1e-1, rtol=2e-2)
    a, b = _randn(128, 128, dtype=torch.bfloat16), _randn(128, 512, dtype=torch.bfloat16)
    c = torch.empty(128, 512, device="cuda")
    _run(P.gemm_wide_n_256threads(), a, b, c)
    _close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_gemm_layout_programs_on_gpu():
    import torch
    a, b = _randn(512, 512, dtype=torch.float16), _randn(512, 512, dtype=torch.float16)
    for rasterize in (True, False):
        c = torch.empty(512, 512, device="cuda")
        _run(P.gemm_annotated_swizzle(rasterize=rasterize), a, b, c)
        _close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-3)
    a, b = _randn(256, 256, dtype=torch.float16), _randn(256, 384, dtype=torch.float16)
    c = torch.empty(256, 384, device="cuda", dtype=torch.float16)
    _run(P.gemm_square_kpack(), a, b, c)
    _close(c, a.float() @ b.float(), atol=1e-1, rtol=1e-2)
    a, b = _randn(1000, 300, dtype=torch.float16), _randn(300, 500, dtype=torch.float16)
    c = torch.full((1000, 500), 7.0, device="cuda", dtype=torch.float16)
    _run(P.gemm_ragged(), a, b, c)
    _close(c, a.float() @ b.float(), atol=1e-1, rtol=1e-2)
    a, b = _randn(3, 128, 128, dtype=torch.float16), _randn(3, 128, 256, dtype=torch.float16)
    c = torch.empty(3, 128, 256, device="cuda")
    _run(P.batched_gemm(), a, b, c)
    _close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-3)
    at, bt = _randn(128, 256, dtype=torch.float16), _randn(256, 128, dtype=torch.float16)
    scale = _randn(256)
    c, colsum = torch.empty(256, 256, device="cuda"), torch.zeros(256, device="cuda")
    _run(P.gemm_tt_colscale(), at, bt, scale, c, colsum)
    want = at.float().T @ bt.float().T * scale
    _close(c, want, atol=1e-2, rtol=1e-3)
    _close(colsum, want.sum(dim=0), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_gemm_epilogue_and_dequant_programs_on_gpu():
    import torch
    a, b = _randn(256, 256, dtype=torch.float16), _randn(256, 256, dtype=torch.float16)
    bias = _randn(256, dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    _run(P.gemm_bias_gelu(), a, b, bias, c)
    _close(c, torch.nn.functional.gelu(a.float() @ b.float() + bias.float()), atol=1e-1, rtol=1e-2)
    c = torch.empty(256, 256, device="cuda")
    _run(P.gemm_register_a(), a, b, c)
    _close(c, 2 * a.float() @ b.float(), atol=5e-2, rtol=1e-3)
    a = _randn(128, 256, dtype=torch.float16)
    bp = torch.randint(0, 256, (128, 128), device="cuda", dtype=torch.uint8)
    s = (torch.rand(4, 128, device="cuda") * 0.1).half()
    c = torch.empty(128, 128, device="cuda", dtype=torch.float16)
    _run(P.dequant_int4_gemm(), a, bp, s, c)
    q = torch.stack([(bp & 15).int() - 8, (bp >> 4).int() - 8], dim=1).reshape(256, 128)
    w = (q.half() * s.repeat_interleave(64, dim=0)).float()
    _close(c, a.float() @ w, atol=5e-2, rtol=1e-2)
    x = _randn(2, 16, 16, 32, dtype=torch.float16)
    wt = _randn(3, 3, 32, 64, dtype=torch.float16)
    y = torch.empty(2, 16, 16, 64, device="cuda", dtype=torch.float16)
    _run(P.conv2d_im2col_loads(), x, wt, y)
    want = torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2), wt.float().permute(3, 2, 0, 1),
                                      padding=1).permute(0, 2, 3, 1)
    _close(y, want, atol=1e-1, rtol=1e-2)
    a, b = _randn(128, 512, dtype=torch.float16), _randn(512, 128, dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda")
    _run(P.splitk_workspace(), a, b, c)
    _close(c, a.float() @ b.float(), atol=5e-2, rtol=1e-3)
    g = P.jit_gemm_pass_configs(256, 256, 256)
    a, b = _randn(256, 256, dtype=torch.float16), _randn(256, 256, dtype=torch.float16)
    _close(g(a, b), torch.sigmoid(a.float() @ b.float()), atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_scalar_and_math_programs_on_gpu():
    import torch
    x = _randn(256, 96)
    even, oddmax = torch.empty(256, device="cuda"), torch.empty(256, device="cuda")
    count = torch.empty(256, device="cuda", dtype=torch.int32)
    _run(P.strided_loops_scalars(), x, even, oddmax, count)
    _close(even, x[:, 0::2].sum(dim=1), atol=1e-4, rtol=1e-4)
    _close(oddmax, x[:, 1::2].max(dim=1).values, atol=0, rtol=0)
    assert torch.equal(count.cpu(), (x[:, 1::2] > 0).sum(dim=1).int().cpu())
    x = _randn(128, 256) * 3
    y, z = torch.empty_like(x), torch.empty(128, 256, device="cuda", dtype=torch.float16)
    _run(P.math_helpers(), x, y, z)
    a = x.abs() + 1
    _close(y, torch.rsqrt(a) + torch.log2(a) + torch.exp(x.clamp(max=2.0)) + a.sqrt()
           + x.clamp(-0.5, 0.5), atol=1e-4, rtol=1e-4)
    _close(z, torch.tanh(x).clamp(min=-0.25).half(), atol=1e-3, rtol=1e-3)
    x = _randn(10000)
    y0 = _randn(10000)
    y = y0.clone()
    tilecute.compile(P.axpby_scalars())(x, y, 2.0, 0.5, 7000)
    want = y0.clone()
    want[:7000] = 2.0 * x[:7000] + 0.5 * y0[:7000]
    _close(y, want, atol=1e-5, rtol=1e-5)
    x = _randn(1000)
    total = torch.empty(1, device="cuda")
    y = torch.empty(4, 8, 32, device="cuda", dtype=torch.int32)
    _run(P.kernel_forms(), x, y, total)
    bx, by, t = torch.meshgrid(torch.arange(4), torch.arange(8), torch.arange(32), indexing="ij")
    assert torch.equal(y.cpu(), (bx * 1000 + by * 100 + t).int())
    _close(total, x.sum().reshape(1), atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_reduction_programs_on_gpu():
    import torch
    x = _randn(128, 64)
    outs = [torch.empty(64, device="cuda")] + [torch.empty(128, device="cuda") for _ in range(3)]
    _run(P.reductions_min_dim0(), x, *outs)
    _close(outs[0], x.min(dim=0).values, atol=0, rtol=0)
    _close(outs[1], x.abs().max(dim=1).values, atol=0, rtol=0)
    _close(outs[2], x.abs().sum(dim=1), atol=1e-4, rtol=1e-4)
    _close(outs[3], x.max(dim=1).values, atol=0, rtol=0)
    x = _randn(256, 128)
    val, idx = torch.empty(256, device="cuda"), torch.empty(256, device="cuda", dtype=torch.int32)
    _run(P.row_argmax(), x, val, idx)
    _close(val, x.max(dim=1).values, atol=0, rtol=0)
    assert torch.equal(idx.long().cpu(), x.argmax(dim=1).cpu())
    x = _randn(300, 77, dtype=torch.float16)
    idx = torch.empty(300, device="cuda", dtype=torch.int64)
    _run(P.argmax_scan_thread(), x, idx)
    assert torch.equal(idx.cpu(), x.float().argmax(dim=1).cpu())
    x = _randn(100, 60)
    mx = torch.empty(100, device="cuda")
    _run(P.fill_shared_pad(), x, mx)
    _close(mx, x.max(dim=1).values, atol=0, rtol=0)
    x = _randn(64, 4096)
    y = torch.empty_like(x)
    _run(P.pipelined_softmax_rows(), x, y)
    _close(y, torch.softmax(x, dim=1), atol=1e-6, rtol=1e-4)


@pytest.mark.gpu
def test_atomic_programs_on_gpu():
    import torch
    x = _randn(128, 256)
    s = torch.zeros(256, device="cuda")
    _run(P.atomic_pairs(), x, s)
    _close(s, x.sum(dim=0), atol=1e-3, rtol=1e-4)
    x = torch.randint(0, 1000, (4096,), device="cuda", dtype=torch.int32)
    h = torch.zeros(64, device="cuda", dtype=torch.int32)
    _run(P.shared_histogram(), x, h)
    assert torch.equal(h.cpu(), torch.bincount((x % 64).long(), minlength=64).int().cpu())
    x = _randn(2048)
    out, count = torch.zeros(2048, device="cuda"), torch.empty(4, device="cuda", dtype=torch.int32)
    _run(P.compact_positive(), x, out, count)
    for b in range(4):
        blk = x[b * 512:(b + 1) * 512]
        n = int(count[b])
        assert n == int((blk > 0).sum())  # each positive element once, in some order
        assert torch.equal(out[b * 512:b * 512 + n].sort().values.cpu(), blk[blk > 0].sort().values.cpu())


@pytest.mark.gpu
def test_tile_shape_programs_on_gpu():
    import torch
    x, w, bias = _randn(4, 64, 64, dtype=torch.float16), _randn(64, dtype=torch.float16), _randn(4, 64)
    y = torch.empty(4, 64, 64, device="cuda")
    _run(P.parallel_3d(), x, w, bias, y)
    _close(y, (x * w).float() + bias[:, None, :], atol=0, rtol=0)
    x = _randn(256, 256, dtype=torch.float16)
    y = torch.empty_like(x)
    _run(P.copy_forms(), x, y)
    _close(y, x + 1, atol=0, rtol=0)
    x, s = _randn(1000, 96), _randn(1000)
    y = torch.empty_like(x)
    _run(P.ragged_rows_fragment(), x, s, y)
    _close(y, x * s[:, None] + 1, atol=1e-5, rtol=1e-5)
    x = _randn(128, 512, dtype=torch.bfloat16)
    q = torch.empty(128, 512, device="cuda", dtype=torch.float8_e4m3fn)
    sc = torch.empty(128, device="cuda")
    _run(P.fp8_row_quant(), x, q, sc)
    amax = x.float().abs().amax(dim=1).clamp(min=1e-4)
    want_s = amax / torch.full_like(amax, 448.0)  # (torch divides by a scalar as a multiply
    # by its reciprocal, 1 ulp off the kernel's IEEE division)
    _close(sc, want_s, atol=0, rtol=0)
    want_q = (x.float() / want_s[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    _close(q, want_q, atol=0, rtol=0.13)
    x = _randn(128, 256)
    keep = torch.rand(128, 256, device="cuda") > 0.3
    q = torch.empty(128, 256, device="cuda", dtype=torch.int8)
    s = torch.empty(128, device="cuda")
    _run(P.int8_quant_round(), x, keep, q, s)
    amax = x.abs().amax(dim=1).clamp(min=1e-6)
    want_s = amax / torch.full_like(amax, 127.0)  # (IEEE division, as the kernel's)
    _close(s, want_s, atol=0, rtol=0)
    want_q = torch.where(keep, torch.round(x / want_s[:, None]).clamp(-127, 127), torch.zeros_like(x))
    assert (q.float() - want_q).abs().max().item() <= 1  # (a quotient a rounding away from .5)


@pytest.mark.gpu
def test_jit_dynamic_on_gpu():
    import torch
    k = P.jit_dynamic_rowscale()
    for m in (77, 300):
        x, s = _randn(m, 256, dtype=torch.float16), _randn(m)
        _close(k(x, s), x.float() * s[:, None], atol=0, rtol=0)


@pytest.mark.gpu
def test_attention_backward_pieces_on_gpu():
    import torch
    q, k, do = (_randn(1, 256, 2, 64, dtype=torch.float16) for _ in range(3))
    qt, kt, dot = (t.float().transpose(1, 2) for t in (q, k, do))
    s = qt @ kt.transpose(-1, -2) / 8.0
    keep = torch.arange(256, device="cuda")[None, :] <= torch.arange(256, device="cuda")[:, None]
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1) * math.log2(math.e)
    p = torch.softmax(s, dim=-1)  # (B, H, query, key)
    dv = torch.empty_like(q)
    psum = torch.empty(1, 2, 256, device="cuda")
    _run(P.attn_bwd_dv(), q, k, do, lse.contiguous(), dv, psum)
    _close(dv, (p.transpose(-1, -2) @ dot).transpose(1, 2), atol=2e-2, rtol=2e-2)
    _close(psum, p.sum(dim=-2), atol=1e-3, rtol=1e-3)
    x = _randn(2, 128, 4, 64)
    y = torch.zeros(2, 128, 2, 64, device="cuda")
    _run(P.gqa_tile_atomic(), x, y)
    _close(y, x.view(2, 128, 2, 2, 64).sum(dim=3), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_gather_and_topk_on_gpu():
    import torch
    cache = _randn(16, 32, 64, dtype=torch.float16)
    table = torch.randint(0, 16, (4, 3), device="cuda", dtype=torch.int32)
    out = torch.empty(4, 64, device="cuda")
    _run(P.paged_gather_sum(), cache, table, out)
    _close(out, cache.float()[table.long()].sum(dim=(1, 2)), atol=1e-3, rtol=1e-3)
    x = _randn(64, 128)
    vals, idx = torch.empty(64, 4, device="cuda"), torch.empty(64, 4, device="cuda", dtype=torch.int32)
    _run(P.topk_rows(), x, vals, idx)
    want = x.topk(4, dim=1)
    _close(vals, want.values, atol=0, rtol=0)
    assert torch.equal(idx.long().cpu(), want.indices.cpu())
