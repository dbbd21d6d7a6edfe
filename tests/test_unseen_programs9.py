"""A ninth set of programs in TileLang's idioms (tests/unseen_programs9.py): split-K tile
atomics, dequantizing and fp8 GEMMs, GEMVs over 2-D blocks and block reductions, per-thread
scans, histograms, norms, softmax along dim 0, scans with carries, a bitonic sort, CSR and
segment loops, convolutions and pooling with padding, block-sparse attention over an index
list, rotary embedding, loop / math / buffer forms, raw cp.async rings.  Each builds to a
cubin on the CPU (sm_90a; sm_80 where meaningful), refusals are asserted by name, and on a
GPU each matches torch written to TileLang's meaning.  The fixes they led to have focused
tests with their subjects (test_ptx_cp_async_groups.py, test_fp8_elementwise.py,
test_dim_expressions.py)."""

import math

import pytest

import tilecute

import rounds
import unseen_programs9 as P

PROGRAMS = ["splitk_atomic_bf16", "dequant_int8_groupscale", "dequant_int4_packed",
            "gemm_fp8_forms", "gemm_grouped_schedule", "gemm_fp8_epilogue",
            "batched_gemm_swizzled", "gemv_2d_threads", "gemv_block_reduce", "argminmax_rows",
            "weighted_histogram", "softmax_dim0", "log_softmax_bf16", "rmsnorm_residual",
            "layernorm_saved_stats", "groupnorm_nhwc", "column_variance", "reverse_cumsums",
            "scan_with_carries", "bitonic_sort_rows", "csr_spmv", "segment_sums",
            "moe_count_offsets", "conv1d_im2col", "depthwise_conv2d", "maxpool2d",
            "sparse_attn_index_list", "rotary_position_ids", "stepped_and_reversed",
            "math_dtype_mixes", "int64_shapes_gather", "dynamic_ragged_tiles",
            "reshape_view_buffers", "fill_slices_fragment_shapes", "permute_bshd",
            "swiglu_bf16", "index_add_rows", "raw_cp_async_double_buffer"]
# sm_80 builds all but the float8 ones (no float8 conversion below sm_89: refused, see
# test_sm80_refusals)
SM80 = [n for n in PROGRAMS if n not in ("gemm_fp8_forms", "gemm_fp8_epilogue")]
TRANSPOSES = [(False, False), (False, True), (True, False), (True, True)]


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(SM80, rounds.kernel_of(P), "sm_80")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_89"])
@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_fp8_transposes_build(arch, ta, tb, tmp_path):
    assert tilecute.build_cubin(P.gemm_fp8_forms(ta=ta, tb=tb), arch,
                                out_dir=str(tmp_path)).kernel_names


def test_variants_build(tmp_path):
    for i, f in enumerate([P.batched_gemm_swizzled(order="row", panel=3),
                           P.splitk_atomic_bf16(splits=2, stages=2),
                           P.softmax_dim0(M=64, bn=64)]):
        assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / str(i))).kernel_names


# ---- refusals -------------------------------------------------------------------------------
def test_custom_shared_layout_builds(tmp_path):
    """A custom T.Layout index map on a shared tile (once refused): built, never by TMA."""
    src = _src(P.shared_custom_layout())
    assert "tct.load(" not in src and "tct.store(" not in src
    assert tilecute.build_cubin(P.shared_custom_layout(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_custom_shared_layout_on_gpu():
    import torch
    x = torch.randn(64, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(P.shared_custom_layout())(x, y)
    assert torch.equal(x, y)


def test_sm80_refusals():
    """No float8 conversion below sm_89 (the cast, the GEMM named)."""
    with pytest.raises(Exception, match=r"prim_func 'epi': a cast from float32 to "
                                        r"float8_e4m3: float8 values convert only on sm_89\+"):
        _src(P.gemm_fp8_epilogue(), "sm_80")
    with pytest.raises(Exception, match=r"prim_func 'fp8': T.gemm on float8_e4m3 operands"):
        _src(P.gemm_fp8_forms(), "sm_80")


def test_sparse_attention_on_mma_sync_shares_one_partition():
    """On mma.sync the score T.gemm (Square, 2 x 2 alone) takes the P @ V T.gemm's partition,
    every warp along M, as their row statistics meet (was refused naming 'm_old';
    tests/test_attention_warp_partitions.py)."""
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts
    from tilecute.transform.pipeline import lower
    body = lower(P.sparse_attn_index_list(), "sm_80").func.kernels[0].body
    warps = {s.buffer.name: s.layout.warps for s in walk_stmts(body)
             if isinstance(s, N.Allocate) and s.layout is not None and s.layout.kind == "mma"}
    assert warps["s"] == warps["p"] == warps["o"] == (4, 1)


def test_dim0_reduction_over_96_rows_pads_them():
    """96 rows reduced along dim 0 on 128 threads (TileLang accepts it; it was refused): the
    transposed rows are padded to 128 with each reduction's identity (-inf for the max, 0
    for the sum), so they fit a lane group."""
    src = _src(P.softmax_dim0(M=96))
    assert "< 96" in src and 'float("-inf")' in src and "cutlass.Float32(0.0)" in src, src


# ---- what the generated code says -------------------------------------------------------------
def test_shared_atomics_then_tile_atomic_are_ordered():
    src = _src(P.weighted_histogram())
    lines = [ln.strip() for ln in src.splitlines()]
    shared = max(i for i, ln in enumerate(lines) if ln.startswith("tca.atomic_add(h_s,"))
    tile = next(i for i, ln in enumerate(lines) if ln.startswith("tca.atomic_add(H,"))
    assert any(ln == "cute.arch.sync_threads()" for ln in lines[shared:tile])


def test_carry_kernel_waits_for_the_serial_writer():
    """Thread 0 writes the carries under ``if tx == 0``; the nest that reads them comes
    after a block barrier."""
    src = _src(P.scan_with_carries())
    second = src[src.index("def tilecute_scan_1"):]
    assert second.index("if tx == 0:") < second.index("cute.arch.sync_threads()") < \
        second.index("carry[b_1_]")


def test_raw_ring_waits_then_syncs():
    src = _src(P.raw_cp_async_double_buffer())
    lines = [ln.strip() for ln in src.splitlines()]
    w = lines.index("cute.arch.cp_async_wait_group(1)")
    assert lines[w + 1] == "cute.arch.sync_threads()"
    assert lines.count("cute.arch.cp_async_commit_group()") == 2


def test_stepped_loops():
    src = _src(P.stepped_and_reversed())
    assert "for j_iter in cutlass.range(0, 37):" in src and "j = 36 + j_iter * -1" in src
    assert "cutlass.range(0, 12):" in src and "= 1 + j_iter_1_ * 3" in src  # 1, 4, ..., 34


# ---- on the GPU -------------------------------------------------------------------------------
def _close(got, want, atol=1e-2, rtol=1e-2):
    rounds.close_on_cpu(got, want, atol, rtol)


_rel = rounds.max_error_within
_run = rounds.run
_r = rounds.randn


def _gpu_gemms():
    import torch
    A, B = _r(256, 1024, dtype=torch.bfloat16), _r(1024, 256, dtype=torch.bfloat16)
    C = torch.zeros(256, 256, device="cuda")
    _run(P.splitk_atomic_bf16(), A, B, C)
    _rel(C, A.float() @ B.float(), 1e-2)

    A, W = _r(128, 512, dtype=torch.float16), torch.randint(-128, 128, (256, 512), device="cuda", dtype=torch.int8)
    S = (torch.rand(256, 4, device="cuda") * 0.02).half()
    C = torch.empty(128, 256, device="cuda", dtype=torch.float16)
    _run(P.dequant_int8_groupscale(), A, W, S, C)
    Wd = (W.float().view(256, 4, 128) * S.float()[:, :, None]).half().view(256, 512)
    _rel(C, A.float() @ Wd.float().T, 1e-2)

    M, N, K, g = 128, 128, 256, 32
    A = _r(M, K, dtype=torch.bfloat16)
    q = torch.randint(-8, 8, (K, N), device="cuda")
    packed = ((q[0::2] & 0xF) | ((q[1::2] & 0xF) << 4)).to(torch.uint8)
    S = torch.rand(K // g, N, device="cuda") * 0.1
    C = torch.empty(M, N, device="cuda")
    _run(P.dequant_int4_packed(), A, packed, S, C)
    Wd = (q.float() * S.repeat_interleave(g, 0)).bfloat16().float()
    _rel(C, A.float() @ Wd, 1e-2)

    for ta, tb in TRANSPOSES:
        a = _r(*((256, 128) if ta else (128, 256))).to(torch.float8_e4m3fn)
        b = _r(*((128, 256) if tb else (256, 128))).to(torch.float8_e4m3fn)
        C = torch.empty(128, 128, device="cuda")
        _run(P.gemm_fp8_forms(ta=ta, tb=tb), a, b, C)
        fa, fb = a.float(), b.float()
        _rel(C, (fa.T if ta else fa) @ (fb.T if tb else fb), 1e-3)

    A, B = _r(128, 512, dtype=torch.float16), _r(512, 128, dtype=torch.float16)
    cs = (torch.rand(512, device="cuda") + 0.5).half()
    C = torch.empty(128, 128, device="cuda")
    _run(P.gemm_grouped_schedule(), A, B, cs, C)
    _rel(C, (A * cs).float() @ B.float(), 1e-2)

    A, B = _r(256, 128, dtype=torch.bfloat16), _r(256, 128, dtype=torch.bfloat16)
    rs, bias = torch.rand(256, device="cuda") * 20, _r(256) * 10
    C = torch.empty(256, 256, device="cuda", dtype=torch.float8_e4m3fn)
    _run(P.gemm_fp8_epilogue(), A, B, rs, bias, C)
    want = (A.float() @ B.float().T * rs[:, None] + bias).clamp(-448, 448)
    # (one e4m3 step is up to 1/8 of a value: an fp32 sum in another order than torch's
    # may round to the neighbouring fp8 value; one element did so on an H200)
    _close(C, want.to(torch.float8_e4m3fn), atol=1e-6, rtol=0.13)

    for order in ("column", "row"):
        A, B = _r(3, 256, 128, dtype=torch.float16), _r(3, 128, 320, dtype=torch.float16)
        C = torch.empty(3, 256, 320, device="cuda", dtype=torch.float16)
        _run(P.batched_gemm_swizzled(order=order), A, B, C)
        _rel(C, A.float() @ B.float(), 1e-2)


def _gpu_reductions():
    import torch
    W, x = _r(1024, 1024, dtype=torch.float16), _r(1024, dtype=torch.float16)
    y = torch.empty(1024, device="cuda")
    _run(P.gemv_2d_threads(), W, x, y)
    _close(y, W.float() @ x.float(), atol=1e-2, rtol=1e-3)

    W, x = _r(512, 2048, dtype=torch.bfloat16), _r(2048, dtype=torch.bfloat16)
    y = torch.empty(512, device="cuda", dtype=torch.bfloat16)
    _run(P.gemv_block_reduce(), W, x, y)
    _close(y, W.float() @ x.float(), atol=0.25, rtol=2e-2)

    X = torch.randint(-20, 20, (300, 257), device="cuda").float()  # ties: the first wins
    imax = torch.empty(300, device="cuda", dtype=torch.int32)
    imin = torch.empty(300, device="cuda", dtype=torch.int64)
    _run(P.argminmax_rows(), X, imax, imin)
    j = torch.arange(257, device="cuda")
    first = lambda hit: torch.where(hit, j, 257).min(1).values  # noqa: E731
    assert torch.equal(imax.long(), first(X == X.max(1, keepdim=True).values))
    assert torch.equal(imin, first(X == X.min(1, keepdim=True).values))

    V, Wt = torch.rand(8192, device="cuda"), torch.rand(8192, device="cuda")
    H = torch.zeros(96, device="cuda")
    _run(P.weighted_histogram(), V, Wt, H)
    want = torch.zeros(96, device="cuda").index_add_(0, (V * 96).floor().long().clamp(0, 95), Wt)
    _close(H, want, atol=1e-3, rtol=1e-4)

    X = _r(128, 256, dtype=torch.float16)
    Y = torch.empty_like(X)
    _run(P.softmax_dim0(), X, Y)
    _close(Y, torch.softmax(X.float(), 0), atol=1e-3, rtol=1e-2)

    X = _r(64, 1024, dtype=torch.bfloat16)
    Y = torch.empty_like(X)
    _run(P.log_softmax_bf16(), X, Y)
    _close(Y, torch.log_softmax(X.float(), 1), atol=5e-2, rtol=1e-2)

    X, R = _r(256, 768, dtype=torch.bfloat16), _r(256, 768, dtype=torch.bfloat16)
    w = _r(768, dtype=torch.bfloat16)
    H, Y = torch.empty_like(X), torch.empty_like(X)
    _run(P.rmsnorm_residual(), X, R, w, H, Y)
    h = X.float() + R.float()
    _close(H, h, atol=2e-2, rtol=1e-2)
    _close(Y, h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6) * w.float(), atol=5e-2, rtol=2e-2)

    X = _r(128, 512, dtype=torch.float16)
    g, b = _r(512), _r(512)
    Y = torch.empty_like(X)
    mean, rstd = torch.empty(128, device="cuda"), torch.empty(128, device="cuda")
    _run(P.layernorm_saved_stats(), X, g, b, Y, mean, rstd)
    _close(mean, X.float().mean(1), atol=1e-4, rtol=1e-4)
    _close(rstd, torch.rsqrt(X.float().var(1, unbiased=False) + 1e-5), atol=1e-4, rtol=1e-4)
    _close(Y, torch.nn.functional.layer_norm(X.float(), (512,), g, b, 1e-5), atol=1e-2, rtol=1e-2)

    X = _r(2, 256, 128)
    gam, bet = _r(128), _r(128)
    Y = torch.empty_like(X)
    _run(P.groupnorm_nhwc(), X, gam, bet, Y)
    want = torch.nn.functional.group_norm(X.permute(0, 2, 1), 8, gam, bet, 1e-5).permute(0, 2, 1)
    _close(Y, want, atol=1e-3, rtol=1e-3)

    X = _r(1000, 128) + 3
    mu, var = torch.empty(128, device="cuda"), torch.empty(128, device="cuda")
    _run(P.column_variance(), X, mu, var)
    _close(mu, X.mean(0), atol=1e-4, rtol=1e-4)
    _close(var, X.var(0, unbiased=False), atol=1e-4, rtol=1e-4)


def _gpu_scans():
    import torch
    X = _r(64, 128)
    rows, cols = torch.empty_like(X), torch.empty_like(X)
    _run(P.reverse_cumsums(), X, rows, cols)
    _close(rows, X.flip(1).cumsum(1).flip(1), atol=1e-4, rtol=1e-4)
    _close(cols, X.view(2, 32, 128).cumsum(1).view(64, 128), atol=1e-4, rtol=1e-4)

    x = torch.randint(-50, 50, (4096,), device="cuda", dtype=torch.int32)
    y, tot = torch.empty_like(x), torch.empty(8, device="cuda", dtype=torch.int32)
    _run(P.scan_with_carries(), x, y, tot)
    assert torch.equal(y, x.cumsum(0).int())

    X = _r(8, 256)
    Y = torch.empty_like(X)
    _run(P.bitonic_sort_rows(), X, Y)
    assert torch.equal(Y, X.sort(1).values)

    rows, cols = 500, 300
    nnz = torch.randint(0, 9, (rows,), device="cuda")
    row_ptr = torch.zeros(rows + 1, device="cuda", dtype=torch.int32)
    row_ptr[1:] = nnz.cumsum(0)
    col_idx = torch.randint(0, cols, (rows * 8,), device="cuda", dtype=torch.int32)
    vals, x = _r(rows * 8), _r(cols)
    y = torch.empty(rows, device="cuda")
    _run(P.csr_spmv(), row_ptr, col_idx, vals, x, y)
    n = int(row_ptr[-1])
    A = torch.sparse_csr_tensor(row_ptr.long(), col_idx[:n].long(), vals[:n], (rows, cols))
    _close(y, A.to_dense() @ x, atol=1e-4, rtol=1e-4)

    X = _r(700, 128, dtype=torch.float16)
    offsets = torch.tensor([0, 100, 100, 350, 351, 600, 700], device="cuda", dtype=torch.int32)
    out = torch.empty(6, 128, device="cuda")
    _run(P.segment_sums(), X, offsets, out)
    want = torch.stack([X[a:b].float().sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())])
    _close(out, want, atol=1e-3, rtol=1e-3)

    ids = torch.randint(0, 16, (2048,), device="cuda", dtype=torch.int32)
    counts = torch.zeros(16, device="cuda", dtype=torch.int32)
    offs = torch.empty(17, device="cuda", dtype=torch.int32)
    _run(P.moe_count_offsets(), ids, counts, offs)
    want = torch.bincount(ids.long(), minlength=16)
    assert torch.equal(counts.long(), want)
    assert torch.equal(offs.long(), torch.cat([want.new_zeros(1), want.cumsum(0)]))


def _gpu_conv_attn():
    import torch
    import torch.nn.functional as F
    X = _r(2, 200, 64, dtype=torch.float16)
    W = _r(5, 64, 128, dtype=torch.float16, scale=0.1)
    Y = torch.empty(2, 200, 128, device="cuda")
    _run(P.conv1d_im2col(), X, W.view(5 * 64, 128), Y)
    want = F.conv1d(X.float().permute(0, 2, 1), W.float().permute(2, 1, 0), padding=4, dilation=2)
    _close(Y, want.permute(0, 2, 1), atol=2e-2, rtol=1e-2)

    X = _r(2, 30, 30, 64, dtype=torch.float16)
    W = _r(3, 3, 64)
    Y = torch.empty_like(X)
    _run(P.depthwise_conv2d(), X, W, Y)
    want = F.conv2d(X.float().permute(0, 3, 1, 2), W.permute(2, 0, 1)[:, None], padding=1, groups=64)
    _close(Y, want.permute(0, 2, 3, 1), atol=2e-2, rtol=1e-2)

    X = _r(2, 32, 33, 31)
    Y = torch.empty(2, 32, 17, 16, device="cuda")
    _run(P.maxpool2d(), X, Y)
    assert torch.equal(Y, F.max_pool2d(X, 3, 2, 1))

    b, h, s, d, bm, ms = 1, 2, 512, 64, 64, 4
    q, k, v = (_r(b, h, s, d, dtype=torch.float16) for _ in range(3))
    nq = s // bm
    idx = torch.full((b, h, nq, ms), -1, device="cuda", dtype=torch.int32)
    count = torch.zeros(b, h, nq, device="cuda", dtype=torch.int32)
    g = torch.Generator(device="cpu").manual_seed(0)
    for hh in range(h):
        for qb in range(nq):
            sel = sorted(torch.randperm(nq, generator=g)[:ms].tolist())
            idx[0, hh, qb, :len(sel)] = torch.tensor(sel, dtype=torch.int32)
            count[0, hh, qb] = len(sel) if qb % 3 else 2
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d)
    allowed = torch.zeros(b, h, s, s, dtype=torch.bool, device="cuda")
    for hh in range(h):
        for qb in range(nq):
            for t in range(int(count[0, hh, qb])):
                kb = int(idx[0, hh, qb, t])
                allowed[0, hh, qb * bm:(qb + 1) * bm, kb * bm:(kb + 1) * bm] = True
    allowed &= torch.ones(s, s, dtype=torch.bool, device="cuda").tril()
    p = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    # the GPU's own arch, and mma.sync (sm_80's plan: one partition for S, P and O)
    for options in (None, {"disable_wgmma": True}):
        o = torch.empty_like(q)
        tilecute.compile(P.sparse_attn_index_list(), options=options)(q, k, v, idx, count, o)
        _close(o, p @ v.float(), atol=2e-2, rtol=2e-2)

    T_, H, D = 300, 4, 64
    X = _r(T_, H, D, dtype=torch.bfloat16)
    pos = torch.randint(0, 1024, (T_,), device="cuda")
    ang = torch.arange(1024, device="cuda")[:, None] * (10000 ** (-torch.arange(32, device="cuda") / 32))
    cos, sin = ang.cos(), ang.sin()
    Y = torch.empty_like(X)
    _run(P.rotary_position_ids(), X, pos, cos, sin, Y)
    c, sn = cos[pos][:, None], sin[pos][:, None]
    x1, x2 = X.float()[..., :32], X.float()[..., 32:]
    _close(Y, torch.cat([x1 * c - x2 * sn, x2 * c + x1 * sn], -1), atol=2e-2, rtol=1e-2)


def _gpu_forms():
    import torch
    X = _r(64, 37)
    rmax, s3 = torch.empty_like(X), torch.empty(64, device="cuda")
    cp, poly = torch.empty(64, 32, device="cuda"), torch.empty(64, device="cuda")
    _run(P.stepped_and_reversed(), X, rmax, s3, cp, poly)
    _close(rmax, X.flip(1).cummax(1).values.flip(1), atol=0, rtol=0)
    _close(s3, X[:, 1::3].sum(1), atol=1e-5, rtol=1e-5)
    _close(cp, X[:, :32], atol=0, rtol=0)
    x0 = X[:, 0]
    _close(poly, ((1 * x0 + 2) * x0 + 3) * x0 + 4, atol=1e-4, rtol=1e-5)

    n = 1024
    Hh, Bf, Fl = _r(n, dtype=torch.float16, scale=2), _r(n, dtype=torch.bfloat16, scale=3), _r(n, scale=5)
    I = torch.randint(-300, 300, (n,), device="cuda", dtype=torch.int32)
    o16, obf = torch.empty(4, n, device="cuda", dtype=torch.float16), torch.empty(2, n, device="cuda", dtype=torch.bfloat16)
    o32, oi = torch.empty(3, n, device="cuda"), torch.empty(2, n, device="cuda", dtype=torch.int32)
    _run(P.math_dtype_mixes(), Hh, Bf, Fl, I, o16, obf, o32, oi)
    _close(o16[0], Hh.clamp(-1.5, 2.0), atol=0, rtol=0)
    _close(o16[1], Hh.abs() + Hh, atol=1e-3, rtol=1e-3)
    _close(o16[2], (Hh * 3).floor(), atol=0, rtol=0)
    _close(o16[3], (Hh * 3).ceil(), atol=0, rtol=0)
    _close(obf[0], torch.rsqrt(Bf.float().abs() + 1), atol=1e-2, rtol=1e-2)
    _close(obf[1], torch.log2(Bf.float().abs() + 1), atol=1e-2, rtol=1e-2)
    _close(o32[0], torch.maximum(Fl, Hh.float()), atol=0, rtol=0)
    _close(o32[1], torch.minimum(Fl, I.float() * 0.25), atol=0, rtol=0)
    _close(o32[2], Fl.floor() + Fl.ceil(), atol=0, rtol=0)
    assert torch.equal(oi[0], I.clamp(-100, 100))
    assert torch.equal(oi[1], I.abs() // 3 + Fl.floor().int())

    table, ids = _r(4096, 128, dtype=torch.float16), torch.randint(0, 4096, (512,), device="cuda")
    out = torch.empty(512, 128, device="cuda", dtype=torch.float16)
    _run(P.int64_shapes_gather(), table, ids, out)
    assert torch.equal(out, table[ids] * 2)

    for m, n in ((1000, 500), (64, 64), (1, 130)):
        X = _r(m, n)
        Y = torch.empty_like(X)
        _run(P.dynamic_ragged_tiles(), X, Y)
        _close(Y, X * 2 + 1, atol=1e-6, rtol=1e-6)

    X = _r(4, 64, 64, dtype=torch.float16)
    Y, Z = torch.empty_like(X), torch.empty(4, 32, 128, device="cuda", dtype=torch.float16)
    _run(P.reshape_view_buffers(), X, Y, Z)
    assert torch.equal(Y, -X) and torch.equal(Z, -X.view(4, 32, 128))

    X = _r(64, 64)
    Y, Z, W = torch.empty_like(X), torch.empty_like(X), torch.empty(1, 64, device="cuda")
    _run(P.fill_slices_fragment_shapes(), X, Y, Z, W)
    wy = X.clone()
    wy[0:4] = 1.0
    wy[:, 56:] = -2.0
    wz = X.clone()
    wz[8:16, 0:32] = 3.0
    assert torch.equal(Y, wy) and torch.equal(Z, wz) and torch.equal(W[0], wz[5] * 10)

    X = _r(2, 128, 4, 64, dtype=torch.bfloat16)
    Y = torch.empty(2, 4, 128, 64, device="cuda", dtype=torch.bfloat16)
    _run(P.permute_bshd(), X, Y)
    assert torch.equal(Y, X.permute(0, 2, 1, 3))

    X = _r(256, 2048, dtype=torch.bfloat16)
    Y = torch.empty(256, 1024, device="cuda", dtype=torch.bfloat16)
    _run(P.swiglu_bf16(), X, Y)
    g, u = X.float()[:, :1024], X.float()[:, 1024:]
    _close(Y, torch.nn.functional.silu(g) * u, atol=2e-2, rtol=1e-2)

    src, idx = _r(1000, 128), torch.randint(0, 64, (1000,), device="cuda", dtype=torch.int32)
    out = torch.zeros(64, 128, device="cuda")
    _run(P.index_add_rows(), src, idx, out)
    _close(out, torch.zeros(64, 128, device="cuda").index_add_(0, idx.long(), src * 0.5), atol=1e-4, rtol=1e-4)

    X = _r(512, 64, dtype=torch.float16)
    out = torch.empty(512, device="cuda")
    _run(P.raw_cp_async_double_buffer(), X, out)
    _close(out, X.float().sum(1), atol=1e-3, rtol=1e-3)


GPU_GROUPS = {"gemms": _gpu_gemms, "reductions": _gpu_reductions, "scans": _gpu_scans,
              "conv_attn": _gpu_conv_attn, "forms": _gpu_forms}


@pytest.mark.gpu
@pytest.mark.parametrize("group", sorted(GPU_GROUPS))
def test_programs_match_torch_on_gpu(group):
    GPU_GROUPS[group]()
