"""A fourteenth set of programs in TileLang's idioms (tests/unseen_programs14.py): quantized
GEMMs (int8 -> int32 with ragged K, W8A8 dequantizing epilogues, fp8 e4m3 / e5m2 with
scales and an e4m3 output, fp4 e2m1 through a table and through bit operations, signed
int4 nibbles), grouped / MoE GEMMs, routing, count / scan / scatter, scans (ragged
columns, segmented, ``T.cummax``, two-level), sorting and top-k in a block, histograms,
im2col / depthwise convolution, pooling, padded and batched transposes, split-K by tile
atomics and by a workspace, GEMVs, batched GEMMs, hand-masked tails, ``T.dynamic`` /
``T.symbolic`` dims, bit packing, narrowing casts and floor operations, macros.
Each builds to an sm_90a cubin on the CPU; on a GPU each matches torch written to
TileLang's meaning."""

import numpy as np
import pytest

import rounds
import unseen_programs14 as P

PROGRAMS = ['gemm_int8_ragged_k', 'gemm_int8_rowcol_dequant', 'gemm_fp8_e4m3_tensor_scales',
            'gemm_fp8_e5m2_channel_scales_e4m3_out', 'dequant_fp4_lut_gemm', 'dequant_fp4_bitops_gemm',
            'int4_signed_gemv_groups', 'gemv_int8_dynamic_quant', 'moe_grouped_gemm_offsets',
            'moe_gather_scatter_gemm', 'top2_router_softmax', 'moe_count_scan_scatter', 'cumsum_columns_ragged',
            'segmented_cumsum_scans', 'cummax_fragment_and_reverse', 'block_scan_two_level',
            'bitonic_argsort_desc', 'topk_insertion_per_thread', 'stable_rank_sort', 'histogram_float_bins',
            'histogram_joint_weighted', 'conv2d_nhwc_im2col_ktail', 'depthwise_conv2d_nchw_stride2',
            'avgpool2d_exclude_padding', 'maxpool_nhwc_with_indices', 'global_avgpool_nhwc',
            'transpose_into_padded', 'batched_transpose_fp16', 'splitk_tile_atomic_ragged',
            'splitk_workspace_reduce', 'gemv_fp16_ktail_fragment', 'gemv_transposed_atomic',
            'batched_gemm_middle_batch_dim', 'batched_gemm_broadcast_b_transposed_out', 'gemm_hand_masked_tails',
            'jit_dynamic_softmax_rows_kernel', 'symbolic_rows_cumsum', 'jit_dynamic_k_gemv_kernel',
            'pack_unpack_int8x4', 'narrow_casts_and_floor_ops', 'macro_quant_dequant_error',
            'grouped_gemm_variable_k', 'transpose_tileop_shared', 'block_counting_sort_u8',
            'causal_depthwise_conv1d_dynamic', 'gemm_u8_activation_zero_point',
            'jit_rowwise_fp8_quant_kernel', 'jit_csr_segment_max_kernel']


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated code says -------------------------------------------------------------
def test_signed_nibbles_sign_extend_through_int8():
    """``T.cast(byte << 4, T.int8) >> 4``: the shift computed in int (C's promotion), its
    low byte as int8, then an arithmetic shift: the low nibble sign-extended."""
    src = _src(P.int4_signed_gemv_groups())
    assert "lo = cutlass.Int8(cutlass.Int32(byte) << 4) >> cutlass.Int8(4)" in src, src
    assert "hi = cutlass.Int8(byte) >> cutlass.Int8(4)" in src, src


def test_floor_ops_of_runtime_divisors_and_narrowing_casts():
    src = _src(P.narrow_casts_and_floor_ops())
    assert "O[i, 0] = a // d" in src and "O[i, 1] = a - a // d * d" in src, src
    assert "tcmath.truncdiv(a, d)" in src and "tcmath.truncmod(a, d)" in src, src
    assert "O[i, 5] = cutlass.Int32(cutlass.Uint8(a))" in src, src
    assert "O[i, 7] = cutlass.min(cutlass.max(a, -50), 50)" in src, src


def test_histogram_bins_floor_before_the_cast():
    src = _src(P.histogram_float_bins())
    assert "b = cutlass.Int32(cute.math.floor((X[i] - cutlass.Float32(-3.0)) * " in src, src
    assert "tca.atomic_add(h, cutlass.min(cutlass.max(b, 0), 49), 1)" in src, src


def test_pack_unpack_shifts_are_arithmetic_then_logical():
    src = _src(P.pack_unpack_int8x4())
    assert "cutlass.Int8(p[0] << 24 - 8 * q_1_ >> 24)" in src, src
    assert "tcmath.reinterpret(p[0], cutlass.Uint32) >> cutlass.Uint32(28)" in src, src

# ---- on the GPU -------------------------------------------------------------------------------
_run = rounds.run


def _run_all(funcs, *arg_lists):
    for f, args in zip(funcs, arg_lists):
        _run(f, *args)


_close = rounds.exact


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _fp4_weights(N, K):
    """Random e2m1 codes (N, K), packed two a byte along K (even k low), and their values."""
    import torch
    codes = torch.randint(0, 16, (N, K), device="cuda", dtype=torch.int32)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    vals = torch.tensor(_E2M1, device="cuda")[codes.long()]
    return packed, vals


@pytest.mark.gpu
def test_int8_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 100, 72, 200
    A = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    B = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    C = torch.full((M, N), -7, device="cuda", dtype=torch.int32)
    _run(P.gemm_int8_ragged_k(), A, B, C)
    assert torch.equal(C, (A.double() @ B.double().T).int())

    M, N, K = 128, 128, 256
    A = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    B = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    Sa, Sb = torch.rand(M, device="cuda") * 1e-3, torch.rand(N, device="cuda") * 1e-3
    Bias = torch.randn(N, device="cuda")
    C = torch.full((M, N), float("nan"), device="cuda").half()
    _run(P.gemm_int8_rowcol_dequant(), A, B, Sa, Sb, Bias, C)
    want = (A.double() @ B.double().T).float() * Sa[:, None] * Sb[None, :] + Bias
    _close(C.float(), want.half().float(), atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_fp8_gemms_with_scales_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 192, 128, 256
    A = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    B = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    Sa, Sb = torch.tensor([0.5], device="cuda"), torch.tensor([0.25], device="cuda")
    C = torch.full((M, N), float("nan"), device="cuda").bfloat16()
    _run(P.gemm_fp8_e4m3_tensor_scales(), A, B, Sa, Sb, C)
    want = (A.float() @ B.float().T) * 0.125
    _close(C.float(), want.bfloat16().float(), atol=5e-2, rtol=2e-2)

    M = N = K = 128
    A = torch.randn(M, K, device="cuda").to(torch.float8_e5m2)
    B = torch.randn(N, K, device="cuda").to(torch.float8_e5m2)
    Sa, Sb = torch.rand(M, device="cuda") * 4 + 0.5, torch.rand(N, device="cuda") * 4 + 0.5
    So = torch.tensor([0.25], device="cuda")
    C = torch.zeros(M, N, device="cuda").to(torch.float8_e4m3fn)
    _run(P.gemm_fp8_e5m2_channel_scales_e4m3_out(), A, B, Sa, Sb, So, C)
    v = (A.float() @ B.float().T) * Sa[:, None] * Sb[None, :] * (1.0 / 0.25)
    assert v.abs().max() > 448  # the clamp matters
    want = v.clamp(-448, 448).to(torch.float8_e4m3fn).float()
    got = C.float()
    # one e4m3 step where the accumulation order moves a value across a rounding boundary
    assert ((got - want).abs() <= want.abs() * 0.125 + 1e-2).all()
    assert (got == want).float().mean() > 0.95
    assert got.abs().max() == 448


@pytest.mark.gpu
def test_fp4_dequant_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K, g = 128, 128, 256, 32
    A = torch.randn(M, K, device="cuda").bfloat16()
    Bq, Bv = _fp4_weights(N, K)
    Lut = torch.tensor(_E2M1, device="cuda")
    Sc = (torch.rand(N, K // g, device="cuda") + 0.5).bfloat16()
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.dequant_fp4_lut_gemm(), A, Bq, Lut, Sc, C)
    Bd = (Bv * Sc.float().repeat_interleave(g, 1)).bfloat16().float()
    _close(C, A.float() @ Bd.T, atol=1e-2, rtol=1e-3)

    Bq, Bv = _fp4_weights(N, K)
    Sc = torch.rand(N, device="cuda") + 0.5
    C = torch.full((M, N), float("nan"), device="cuda").bfloat16()
    _run(P.dequant_fp4_bitops_gemm(), A, Bq, Sc, C)
    _close(C.float(), ((A.float() @ Bv.T) * Sc).bfloat16().float(), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_int4_and_int8_gemvs_on_gpu():
    import torch
    torch.manual_seed(0)
    N, K, g = 300, 512, 64
    nib = torch.randint(-8, 8, (N, K), device="cuda", dtype=torch.int32)
    Wq = ((nib[:, 0::2] & 15) | ((nib[:, 1::2] & 15) << 4)).to(torch.uint8)
    S = (torch.rand(N, K // g, device="cuda") + 0.5).half()
    X = torch.randn(K, device="cuda").half()
    Y = torch.full((N,), float("nan"), device="cuda")
    _run(P.int4_signed_gemv_groups(), Wq, S, X, Y)
    Wd = nib.double() * S.double().repeat_interleave(g, 1)
    _close(Y, (Wd @ X.double()).float(), atol=1e-3, rtol=1e-4)

    N, K = 200, 768
    W = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    X = torch.randint(-128, 128, (K,), device="cuda", dtype=torch.int8)
    Sw, Sx = torch.rand(N, device="cuda"), torch.tensor([0.01], device="cuda")
    Y = torch.full((N,), float("nan"), device="cuda")
    _run(P.gemv_int8_dynamic_quant(), W, X, Sw, Sx, Y)
    dot = (W.cpu().long() @ X.cpu().long()).float().cuda()  # (no int64 matmul on CUDA)
    _close(Y, dot * Sw * 0.01, atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_moe_grouped_and_gather_scatter_on_gpu():
    import torch
    torch.manual_seed(0)
    E, T_, K, N = 4, 300, 128, 128
    sizes = [70, 0, 165, 65]
    offsets = torch.tensor([0, 70, 70, 235, 300], device="cuda", dtype=torch.int32)
    X, W = torch.randn(T_, K, device="cuda").half(), (torch.randn(E, N, K, device="cuda") * 0.1).half()
    Y = torch.full((T_, N), float("nan"), device="cuda")
    _run(P.moe_grouped_gemm_offsets(), X, W, offsets, Y)
    want = torch.cat([X[o:o + s].float() @ W[e].float().T
                      for e, (o, s) in enumerate(zip(offsets.tolist(), sizes))])
    _close(Y, want, atol=2e-3, rtol=2e-3)

    tokens, cap = 200, 96
    X = torch.randn(tokens, K, device="cuda").bfloat16()
    W = (torch.randn(E, N, K, device="cuda") * 0.1).bfloat16()
    Ids = torch.full((E, cap), -1, device="cuda", dtype=torch.int32)
    Wt = torch.rand(E, cap, device="cuda")
    want = torch.zeros(tokens, N, device="cuda")
    for e in range(E):
        n_e = [90, 0, 33, 96][e]
        ids = torch.randperm(tokens, device="cuda")[:n_e]
        Ids[e, :n_e] = ids.int()
        want.index_add_(0, ids, Wt[e, :n_e, None] * (X[ids].float() @ W[e].float().T))
    Out = torch.zeros(tokens, N, device="cuda")
    _run(P.moe_gather_scatter_gemm(), X, W, Ids, Wt, Out)
    _close(Out, want, atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_router_and_count_scan_scatter_on_gpu():
    import torch
    torch.manual_seed(0)
    tokens, E = 300, 24
    L = torch.randn(tokens, E, device="cuda")
    Ids = torch.full((tokens, 2), -5, device="cuda", dtype=torch.int32)
    Wt = torch.full((tokens, 2), float("nan"), device="cuda")
    _run(P.top2_router_softmax(), L, Ids, Wt)
    p = torch.softmax(L, 1)
    v, i = p.topk(2, 1)
    assert torch.equal(Ids, i.int())
    _close(Wt, v / v.sum(1, keepdim=True), atol=1e-6, rtol=1e-5)

    n, E = 1000, 16
    Ex = torch.randint(0, E, (n,), device="cuda", dtype=torch.int32)
    Ex[Ex == 5] = 6  # an empty expert
    Counts = torch.zeros(E, device="cuda", dtype=torch.int32)
    Offsets = torch.full((E + 1,), -1, device="cuda", dtype=torch.int32)
    Cursor = torch.zeros(E, device="cuda", dtype=torch.int32)
    Perm = torch.full((n,), -1, device="cuda", dtype=torch.int32)
    _run_all(P.moe_count_scan_scatter(), (Ex, Counts), (Counts, Offsets), (Ex, Offsets, Cursor, Perm))
    cnt = torch.bincount(Ex.long(), minlength=E)
    assert torch.equal(Counts.long(), cnt)
    assert torch.equal(Offsets.long(), torch.cat([cnt.new_zeros(1), cnt.cumsum(0)]))
    assert torch.equal(Cursor.long(), cnt)
    assert torch.equal(Perm.sort().values.long(), torch.arange(n, device="cuda"))
    for e in range(E):
        seg = Perm[Offsets[e]:Offsets[e + 1]].long()
        assert (Ex[seg] == e).all()


@pytest.mark.gpu
def test_scans_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(100, 96, device="cuda")
    Y = torch.full_like(X, float("nan"))
    _run(P.cumsum_columns_ragged(), X, Y)
    _close(Y, X.double().cumsum(0).float(), atol=1e-4, rtol=1e-5)

    R, N = 6, 256
    X = torch.randn(R, N, device="cuda")
    Flags = (torch.rand(R, N, device="cuda") < 0.1).to(torch.int8)
    Flags[:, 0] = 1
    Flags[3] = 0
    Flags[3, 0] = 1  # one row a single segment
    Y = torch.full_like(X, float("nan"))
    _run(P.segmented_cumsum_scans(), X, Flags, Y)
    want = torch.empty_like(X)
    for r in range(R):
        run = 0.0
        for j in range(N):
            run = float(X[r, j]) if Flags[r, j] else run + float(X[r, j])
            want[r, j] = run
    _close(Y, want, atol=1e-4, rtol=1e-4)

    X = torch.randn(16, 64, device="cuda")
    Mx, Rs = torch.full_like(X, float("nan")), torch.full_like(X, float("nan"))
    _run(P.cummax_fragment_and_reverse(), X, Mx, Rs)
    assert torch.equal(Mx, X.cummax(1).values)
    _close(Rs, X.flip(0).cumsum(0).flip(0), atol=1e-5, rtol=1e-5)

    n = 5000
    X = torch.randn(n, device="cuda")
    Y = torch.full_like(X, float("nan"))
    Tot = torch.full(((n + 255) // 256,), float("nan"), device="cuda")
    _run_all(P.block_scan_two_level(), (X, Y, Tot), (Tot,), (Y, Tot))
    _close(Y, X.double().cumsum(0).float(), atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_sorts_and_topk_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(5, 128, device="cuda")
    V, I = torch.empty_like(X), torch.empty(5, 128, device="cuda", dtype=torch.int32)
    _run(P.bitonic_argsort_desc(), X, V, I)
    sv, si = X.sort(1, descending=True)
    assert torch.equal(V, sv) and torch.equal(I, si.int())

    X = torch.randn(300, 77, device="cuda")
    V, I = torch.empty(300, 4, device="cuda"), torch.empty(300, 4, device="cuda", dtype=torch.int32)
    _run(P.topk_insertion_per_thread(), X, V, I)
    tv, ti = X.topk(4, 1)
    assert torch.equal(V, tv) and torch.equal(I, ti.int())

    X = torch.randint(-20, 20, (256,), device="cuda", dtype=torch.int32)
    Out, Perm = torch.empty_like(X), torch.empty_like(X)
    _run(P.stable_rank_sort(), X, Out, Perm)
    sv, si = X.cpu().sort(stable=True)
    assert torch.equal(Out.cpu(), sv) and torch.equal(Perm.cpu(), si.int())


@pytest.mark.gpu
def test_histograms_on_gpu():
    import torch
    torch.manual_seed(0)
    n, bins = 10000, 50
    X = torch.randn(n, device="cuda") * 1.5
    X[:5] = torch.tensor([-3.01, -3.0, 2.999, 3.0, 100.0], device="cuda")
    H = torch.zeros(bins, device="cuda", dtype=torch.int32)
    _run(P.histogram_float_bins(), X, H)
    # the kernel's float32 arithmetic: (x - lo) and the product each rounded to float32
    scale = torch.tensor(bins / 6.0, dtype=torch.float32, device="cuda")
    b = torch.floor((X - (-3.0)) * scale).long().clamp(0, bins - 1)
    assert torch.equal(H.long(), torch.bincount(b, minlength=bins))

    n, B1, B2 = 3000, 8, 12
    A = torch.randint(0, B1, (n,), device="cuda", dtype=torch.int32)
    Bl = torch.randint(0, B2, (n,), device="cuda", dtype=torch.int32)
    Wt = torch.rand(n, device="cuda")
    H = torch.zeros(B1, B2, device="cuda", dtype=torch.int32)
    HW = torch.zeros(B1, B2, device="cuda")
    _run(P.histogram_joint_weighted(), A, Bl, Wt, H, HW)
    flat = (A * B2 + Bl).long()
    assert torch.equal(H.view(-1).long(), torch.bincount(flat, minlength=B1 * B2))
    _close(HW.view(-1), torch.bincount(flat, weights=Wt, minlength=B1 * B2).float(), atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_convolutions_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    Nb, H, W, C, Fo, KS = 2, 14, 14, 24, 64, 3
    X = torch.randn(Nb, H, W, C, device="cuda").half()
    Wt = (torch.randn(Fo, KS, KS, C, device="cuda") * 0.1).half()
    Y = torch.full((Nb * H * W, Fo), float("nan"), device="cuda")
    _run(P.conv2d_nhwc_im2col_ktail(), X, Wt.reshape(Fo, -1), Y)
    want = F.conv2d(X.float().permute(0, 3, 1, 2), Wt.float().permute(0, 3, 1, 2), padding=1)
    _close(Y, want.permute(0, 2, 3, 1).reshape(-1, Fo), atol=2e-3, rtol=2e-3)

    Nb, C, H, W, KS = 2, 16, 23, 29, 5
    X = torch.randn(Nb, C, H, W, device="cuda")
    Wt, Bias = torch.randn(C, KS, KS, device="cuda"), torch.randn(C, device="cuda")
    Y = torch.full((Nb, C, 12, 15), float("nan"), device="cuda")
    _run(P.depthwise_conv2d_nchw_stride2(), X, Wt, Bias, Y)
    _close(Y, F.conv2d(X, Wt[:, None], Bias, stride=2, padding=2, groups=C), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_pooling_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    X = torch.randn(2, 8, 17, 20, device="cuda")
    Y = torch.full((2, 8, 9, 10), float("nan"), device="cuda")
    _run(P.avgpool2d_exclude_padding(), X, Y)
    _close(Y, F.avg_pool2d(X, 3, 2, 1, count_include_pad=False), atol=1e-6, rtol=1e-5)

    X = torch.randn(2, 15, 15, 32, device="cuda")
    Y = torch.full((2, 7, 7, 32), float("nan"), device="cuda")
    I = torch.full((2, 7, 7, 32), -1, device="cuda", dtype=torch.int32)
    _run(P.maxpool_nhwc_with_indices(), X, Y, I)
    v, i = F.max_pool2d(X.permute(0, 3, 1, 2), 2, 2, return_indices=True)
    assert torch.equal(Y, v.permute(0, 2, 3, 1)) and torch.equal(I, i.permute(0, 2, 3, 1).int())

    X = torch.randn(3, 200, 96, device="cuda")
    Y = torch.full((3, 96), float("nan"), device="cuda")
    _run(P.global_avgpool_nhwc(), X, Y)
    _close(Y, X.mean(1), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_transposes_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(100, 70, device="cuda")
    Y = torch.full((96, 128), float("nan"), device="cuda")
    _run(P.transpose_into_padded(), X, Y)
    want = torch.zeros(96, 128, device="cuda")
    want[:70, :100] = X.T
    assert torch.equal(Y, want)

    X = torch.randn(3, 64, 40, device="cuda").half()
    Y = torch.full((3, 40, 64), float("nan"), device="cuda").half()
    _run(P.batched_transpose_fp16(), X, Y)
    assert torch.equal(Y, X.transpose(1, 2))


@pytest.mark.gpu
def test_splitk_programs_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 100, 128, 512
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
    C = torch.zeros(M, N, device="cuda")
    _run(P.splitk_tile_atomic_ragged(), A, B, C)
    _close(C, A.float() @ B.float(), atol=2e-3, rtol=1e-3)

    M, N, K, S = 128, 96, 384, 3
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(N, K, device="cuda").half()
    Ws = torch.full((S, M, N), float("nan"), device="cuda")
    Bias = torch.randn(N, device="cuda")
    C = torch.full((M, N), float("nan"), device="cuda").half()
    _run_all(P.splitk_workspace_reduce(), (A, B, Ws), (Ws, Bias, C))
    _close(Ws.sum(0), A.float() @ B.float().T, atol=2e-3, rtol=1e-3)
    _close(C.float(), (A.float() @ B.float().T + Bias).half().float(), atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_gemvs_on_gpu():
    import torch
    torch.manual_seed(0)
    N, K = 300, 1000
    A, X, Bv = torch.randn(N, K, device="cuda").half(), torch.randn(K, device="cuda").half(), torch.randn(N, device="cuda").half()
    Y = torch.full((N,), float("nan"), device="cuda").half()
    _run(P.gemv_fp16_ktail_fragment(), A, X, Bv, Y)
    _close(Y.float(), (A.double() @ X.double() + Bv.double()).half().float(), atol=2e-2, rtol=2e-3)

    K, N = 512, 300
    A, X = torch.randn(K, N, device="cuda"), torch.randn(K, device="cuda")
    Y = torch.zeros(N, device="cuda")
    _run(P.gemv_transposed_atomic(), A, X, Y)
    _close(Y, (A.double().T @ X.double()).float(), atol=1e-3, rtol=1e-4)

    kern = P.jit_dynamic_k_gemv_kernel()
    for K in (1, 37, 300):
        A, X = torch.randn(128, K, device="cuda"), torch.randn(K, device="cuda")
        _close(kern(A, X), (A.double() @ X.double()).float(), atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_batched_and_masked_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, Bt, K, N = 64, 3, 96, 80
    A, B = torch.randn(M, Bt, K, device="cuda").half(), torch.randn(Bt, K, N, device="cuda").half()
    C = torch.full((Bt, M, N), float("nan"), device="cuda")
    _run(P.batched_gemm_middle_batch_dim(), A, B, C)
    _close(C, torch.einsum("mbk,bkn->bmn", A.float(), B.float()), atol=2e-3, rtol=1e-3)

    Bt, M, N, K = 4, 96, 64, 128
    A, W = torch.randn(Bt, M, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
    S = torch.randn(Bt, device="cuda")
    C = torch.full((Bt, N, M), float("nan"), device="cuda")
    _run(P.batched_gemm_broadcast_b_transposed_out(), A, W, S, C)
    _close(C, (S[:, None, None] * (A.float() @ W.float())).transpose(1, 2), atol=2e-3, rtol=1e-3)

    M, N, K = 90, 70, 100
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_hand_masked_tails(), A, B, C)
    _close(C, torch.relu(A.float() @ B.float()), atol=2e-3, rtol=1e-3)


@pytest.mark.gpu
def test_dynamic_and_symbolic_dims_on_gpu():
    import torch
    torch.manual_seed(0)
    kern = P.jit_dynamic_softmax_rows_kernel()
    for M in (1, 8, 61):
        X = torch.randn(M, 256, device="cuda") * 3
        _close(kern(X), torch.softmax(X, 1), atol=1e-6, rtol=1e-5)

    for n in (5, 16, 70):
        X = torch.randn(n, 64, device="cuda")
        Y = torch.full_like(X, float("nan"))
        _run(P.symbolic_rows_cumsum(), X, Y)
        _close(Y, X.double().cumsum(1).float(), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_bits_casts_and_floor_ops_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 256
    X = torch.randint(-128, 128, (n, 4), device="cuda", dtype=torch.int8)
    X[0] = torch.tensor([-1, 0, 127, -128], dtype=torch.int8)
    P_, U = torch.empty(n, device="cuda", dtype=torch.int32), torch.empty(n, 4, device="cuda", dtype=torch.int8)
    Hi = torch.empty(n, device="cuda", dtype=torch.int32)
    _run(P.pack_unpack_int8x4(), X, P_, U, Hi)
    x = X.cpu().numpy().astype(np.int64) & 0xFF
    packed = (x[:, 0] | x[:, 1] << 8 | x[:, 2] << 16 | x[:, 3] << 24)
    assert np.array_equal(P_.cpu().numpy(), packed.astype(np.uint32).view(np.int32))
    assert torch.equal(U, X)
    assert np.array_equal(Hi.cpu().numpy(), (packed >> 28).astype(np.int32))

    A = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    D = torch.randint(1, 13, (n,), device="cuda", dtype=torch.int32) * (torch.randint(0, 2, (n,), device="cuda") * 2 - 1).int()
    F = torch.randn(n, device="cuda") * 100
    O = torch.empty(n, 8, device="cuda", dtype=torch.int32)
    G = torch.empty(n, device="cuda")
    _run(P.narrow_casts_and_floor_ops(), A, D, F, O, G)
    a, d = A.cpu().numpy().astype(np.int64), D.cpu().numpy().astype(np.int64)
    want = np.stack([a // d, a % d, np.trunc(a / d), np.fmod(a, d), np.trunc(F.cpu().numpy()),
                     a & 0xFF, ((a + 200) & 0xFF).astype(np.uint8).view(np.int8), np.clip(a, -50, 50)], 1)
    assert np.array_equal(O.cpu().numpy(), want.astype(np.int32))
    assert np.array_equal(G.cpu().numpy(), ((a & 0xFF) * 0.5).astype(np.float32))


@pytest.mark.gpu
def test_macro_quant_dequant_error_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N = 64, 256
    X = torch.randn(M, N, device="cuda") * torch.rand(M, 1, device="cuda") * 4
    X[5] = 0.0  # the 1e-8 floor
    Q = torch.empty(M, N, device="cuda", dtype=torch.int8)
    S, Err = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    _run(P.macro_quant_dequant_error(), X, Q, S, Err)
    # (torch's CUDA division by a scalar multiplies by its reciprocal: divide in float64)
    s = torch.clamp((X.abs().amax(1).double() / 127.0).float(), min=1e-8)
    _close(S, s, rtol=1.2e-7)
    q = torch.round(X / s[:, None]).clamp(-127, 127)
    assert (Q.float() - q).abs().max() <= 1  # x / s vs x * (1 / s): a half-way value may round apart
    assert (Q.float() == q).float().mean() > 0.999
    _close(Err, (Q.float() * S[:, None] - X).abs().amax(1), atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
def test_variable_k_groups_and_zero_point_gemm_on_gpu():
    import torch
    torch.manual_seed(0)
    G, M, N, Ktot = 4, 64, 128, 416
    ks = [130, 0, 64, 222]
    Ko = torch.tensor([0, 130, 130, 194, 416], device="cuda", dtype=torch.int32)
    A, B = torch.randn(M, Ktot, device="cuda").half(), torch.randn(Ktot, N, device="cuda").half()
    C = torch.full((G, M, N), float("nan"), device="cuda")
    _run(P.grouped_gemm_variable_k(), A, B, Ko, C)
    for g in range(G):
        k0, k1 = int(Ko[g]), int(Ko[g + 1])
        _close(C[g], A[:, k0:k1].float() @ B[k0:k1].float(), atol=2e-3, rtol=1e-3)
    assert ks[1] == 0 and torch.equal(C[1], torch.zeros(M, N, device="cuda"))

    M, N, K = 128, 128, 256
    A = torch.randint(0, 256, (M, K), device="cuda", dtype=torch.uint8)
    W = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    Za = torch.randint(0, 256, (M,), device="cuda", dtype=torch.int32)
    Sa, Sw = torch.rand(M, device="cuda") * 1e-2, torch.rand(N, device="cuda") * 1e-2
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_u8_activation_zero_point(), A, W, Za, Sa, Sw, C)
    exact = ((A.long() - Za.long()[:, None]).double() @ W.double().T)
    _close(C, exact.float() * Sa[:, None] * Sw[None, :], atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_shared_transpose_and_counting_sort_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(100, 72, device="cuda")
    Y = torch.full((72, 100), float("nan"), device="cuda")
    _run(P.transpose_tileop_shared(), X, Y)
    assert torch.equal(Y, X.T * 2)

    n, per = 2000, 512
    X = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8)
    X[:600] = torch.randint(0, 4, (600,), device="cuda", dtype=torch.uint8)  # many ties
    Y = torch.zeros_like(X)
    H = torch.zeros(256, device="cuda", dtype=torch.int32)
    _run(P.block_counting_sort_u8(), X, Y, H)
    want = torch.cat([c.sort().values for c in X.split(per)])
    assert torch.equal(Y, want)
    assert torch.equal(H.long(), torch.bincount(X.long(), minlength=256))


@pytest.mark.gpu
def test_causal_depthwise_conv1d_dynamic_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    D, KW = 64, 4
    Wt = torch.randn(D, KW, device="cuda")
    for L in (1, 3, 32, 77):
        X = torch.randn(L, D, device="cuda")
        Y = torch.full_like(X, float("nan"))
        _run(P.causal_depthwise_conv1d_dynamic(), X, Wt, Y)
        conv = F.conv1d(F.pad(X.T[None], (KW - 1, 0)), Wt[:, None], groups=D)[0].T
        _close(Y, F.silu(conv), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_eager_jit_kernels_on_gpu():
    import torch
    torch.manual_seed(0)
    X = (torch.randn(130, 512, device="cuda") * torch.rand(130, 1, device="cuda") * 10).bfloat16()
    X[7] = 0
    Q, S = P.jit_rowwise_fp8_quant_kernel()(X)
    am = X.float().abs().amax(1)
    s = torch.clamp((am.double() / 448.0).float(), min=1e-12)  # (IEEE division, as above)
    _close(S, s, rtol=1.2e-7)
    want = (X.float() / S[:, None]).to(torch.float8_e4m3fn)  # (from the kernel's own scales)
    assert torch.equal(Q.view(torch.uint8), want.view(torch.uint8))

    kern = P.jit_csr_segment_max_kernel()
    lens = torch.randint(0, 90, (37,))
    lens[3] = 0
    lens[10] = 1
    off = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)]).int().cuda()
    vals = torch.randn(int(lens.sum()), device="cuda")
    out = kern(vals, off)
    want = torch.tensor([vals[off[i]:off[i + 1]].max().item() if lens[i] else float("-inf") for i in range(37)],
                        device="cuda")
    assert torch.equal(out, want)
