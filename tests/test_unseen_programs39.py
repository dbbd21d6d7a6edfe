"""A thirty-ninth set of programs in TileLang's idioms (tests/unseen_programs39.py), all in
TileLang's eager ``@tilelang.jit`` style (``T.const`` dims bound from the tensors, arguments
declared in the body, ``T.empty`` outputs returned): a broadcast GELU epilogue, an RMS norm
with a runtime eps and its outputs returned out of order, an autotuned top-k, a GEMM with a
flag-chosen epilogue, a per-token-group fp8 cast, a convolution through a hand-written im2col
gather, a causal flash attention forward, a w4a16 dequant GEMM, a chunked row scan over a
``T.dynamic`` row count, a block-sparse GEMM under a bool mask, an in-place softmax through a
``T.macro``, a transpose of a strided view, a GEMM compiled with ``M=T.dynamic("m")`` and
two launches over a ``T.dynamic`` row count, one from a plain Python function, one from a
``T.macro``, both called at the top level.

CPU: each builds to an sm_90a cubin from CPU tensors (they give the shapes), and what decides
its result is read in the generated source.  One fix came from these programs: a ``T.const``
given a ``T.dynamic`` symbol by keyword (``gemm_nt.compile(M=T.dynamic("m"), N=256, K=256)``,
as TileLang's eager autotune test compiles its GEMM) was a bare ``TypeError`` from ``int()``;
the dim now stays dynamic (a kernel parameter bound at launch, the output allocated from the
input's size), and a constant given anything but an int or a symbol is a ``TypeError`` naming
it.  With it, an eager body's ``assert L % chunk == 0`` on such a symbol ran as Python, where
``==`` on expressions is structural equality (always false here) and ``>=`` always true: a
top-level assert on symbols is now TileLang's host Assert, checked at every call
(tests/test_host_assumes.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs39.py``)."""

import re

import pytest
import torch

import tilecute.language as T
import rounds
import unseen_programs39 as P

f16, bf16, u8 = torch.float16, torch.bfloat16, torch.uint8


def _z(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


# each program compiled from CPU tensors (the shapes), or from constants by keyword
BUILDS = {
    "bias_gelu_broadcast": lambda: P.bias_gelu_broadcast.compile(_z(300, 1000, dtype=f16),
                                                                 _z(1000, dtype=f16), _z(300)),
    "rms_norm_rows": lambda: P.rms_norm_rows.compile(_z(100, 1024, dtype=bf16), _z(1024, dtype=bf16), 1e-6),
    # the tuned parameters given: compiled as asked, untuned (tuning needs a GPU)
    "topk_rows": lambda: P.topk_rows.compile(_z(200, 64), 6, block_M=16, threads=128),
    "gemm_bias_act": lambda: P.gemm_bias_act.compile(_z(512, 256, dtype=f16), _z(256, 384, dtype=f16), _z(384)),
    "per_token_group_fp8": lambda: P.per_token_group_fp8.compile(_z(100, 1000, dtype=bf16)),
    "conv2d_im2col_gather": lambda: P.conv2d_im2col_gather.compile(_z(2, 16, 16, 32, dtype=f16),
                                                                   _z(3, 3, 32, 64, dtype=f16), 1, 1),
    "flash_attn_fwd": lambda: P.flash_attn_fwd.compile(*[_z(2, 256, 4, 64, dtype=f16)] * 3),
    "dequant_w4a16_gemm": lambda: P.dequant_w4a16_gemm.compile(_z(128, 256, dtype=f16), _z(128, 128, dtype=u8),
                                                               _z(128, 4, dtype=f16)),
    "chunked_row_cumsum": lambda: P.chunked_row_cumsum.compile(_z(37, 256), reverse=True),
    "blocksparse_gemm_mask": lambda: P.blocksparse_gemm_mask.compile(_z(256, 256, dtype=f16), _z(256, 256, dtype=f16),
                                                                     _z(4, 4, 8, dtype=torch.bool)),
    "softmax_inplace": lambda: P.softmax_inplace.compile(_z(64, 512, dtype=f16), 0.5),
    "strided_transpose": lambda: P.strided_transpose.compile(_z(200, 2, 300, 2)[:, 0, :, 0]),
    "gemm_nt": lambda: P.gemm_nt.compile(M=T.dynamic("m"), N=256, K=256),
    "absmax_normalize_two_launches": lambda: P.absmax_normalize_two_launches.compile(_z(100, 256)),
}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name, kernel=None):
    return rounds.kernel_body(kernel or BUILDS[name]())


test_every_program_is_listed = rounds.every_public_program_is_listed(P, BUILDS)
test_program_builds_a_cubin = rounds.builds_a_cubin(sorted(BUILDS), lambda n: BUILDS[n]())


def test_gelu_folds_the_python_constant_and_takes_a_torch_dtype():
    src = _body("bias_gelu_broadcast")
    assert "cutlass.Float32(0.7978845608028654) * (v + cutlass.Float32(0.044715) * v * v * v)" in src
    assert "cutlass.Float32(X[r, col]) * row_scale[r] + cutlass.Float32(bias[col])" in src
    bf = _body("", P.bias_gelu_broadcast.compile(_z(64, 256, dtype=bf16), _z(256, dtype=bf16), _z(64),
                                                  dtype=torch.bfloat16))
    assert "Y[r, col] = cutlass.BFloat16(" in bf and "cutlass.Float16(" not in bf


def test_rms_norm_takes_eps_at_run_time_and_returns_in_return_order():
    k = BUILDS["rms_norm_rows"]()
    src = _body("", k)
    assert "rstd_ptr: cute.Pointer, eps: cutlass.Float32):" in src  # a kernel parameter
    assert re.search(r"= cute\.math\.rsqrt\(ss\[\w+\] / cutlass\.Float32\(1024\.0\) \+ eps\)", src)
    assert k.order == [1, 0]  # Y declared first, `return rstd, Y`


def test_topk_picks_the_lowest_column_of_the_row_max():
    src = _body("topk_rows")
    assert re.search(r"cand\[[^]]+\] = cutlass\.Int32\(cutlass\.select_\(s\[[^]]+\] == tc_red\d+\[[^]]+\], "
                     r"\(j \+ tc_lane\d+\), 64\)\)", src)
    assert re.search(r'= tcr\.warp_allreduce\(tc_acc\d+, "min", 16\)', src)  # 16 threads a row
    assert "cutlass.range(0, 6)" in src  # k = 6 rounds
    assert re.search(r'cutlass\.select_\(\(j_1_ \+ tc_lane\d+\) == tc_red\d+\[[^]]+\], '
                     r'cutlass\.Float32\(float\("-inf"\)\)', src)


def test_gemm_epilogue_follows_the_activation_flag():
    relu = _body("gemm_bias_act")
    assert re.search(r"v = acc\[[^]]+\] \+ tc_vec\d+\[tc_lane\d+\]\n\s+acc\[[^]]+\] = "
                     r"cute\.arch\.fmax\(v, cutlass\.Float32\(0\.0\)\)", relu)
    assert "cute.math.exp(" not in relu
    silu = _body("", P.gemm_bias_act.compile(_z(512, 256, dtype=f16), _z(256, 384, dtype=f16), _z(384),
                                             activation="silu", out_dtype=T.bfloat16))
    assert "cute.math.exp(" in silu and "cutlass.BFloat16(acc[" in silu
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32' in relu


def test_fp8_cast_scale_width_is_a_ceildiv_of_the_constant():
    k = BUILDS["per_token_group_fp8"]()
    src = k.get_kernel_source()
    assert "cute.make_layout((100, 8,), stride=(8, 1,))" in src  # Xs: (M, ceildiv(1000, 128))
    assert "cutlass.Float8E4M3FN" in src and "448.0" in src
    assert re.search(r"grid=\[13, 8, 1\]", src)


def test_conv_gathers_inside_the_image_only():
    src = _body("conv2d_im2col_gather")
    # derived output dims: (16 + 2 - 3) // 1 + 1 = 16, rows = 2 * 16 * 16 = 512, depth = 288
    assert "inside = cutlass.and_(m < 512, d < 288, ih >= 0, ih < 16, iw >= 0, iw < 16)" in src
    assert re.search(r"if cutlass\.and_\(inside, [^)]*\):\n\s+tc_ld\d+ = data\[n, ih, iw, d - d // 32 \* 32\]", src)
    assert "w_flat = cute.make_tensor(weight_ptr, cute.make_layout((288, 64,), stride=(64, 1,)))" in src
    assert "cutlass.range(0, 9)" in src  # ceildiv(288, 32) K steps


def test_flash_attention_scale_from_python_and_causal_steps():
    src = _body("flash_attn_fwd")
    assert "cutlass.Float32(0.18033688)" in src  # (1 / 64) ** 0.5 * log2(e)
    assert re.search(r"cutlass\.select_\(bx \* 64 \+ i >= t \* 64 \+ \(j \+ tc_lane\d+\), "
                     r"cutlass\.Float32\(0\.0\), cutlass\.Float32\(float\(\"-inf\"\)\)\)", src)
    full = _body("", P.flash_attn_fwd.compile(*[_z(2, 256, 4, 64, dtype=f16)] * 3, is_causal=False))
    assert "cutlass.range(0, 4)" in full and "float(\"-inf\")))" not in full.split("for t in")[1]


def test_dequant_shifts_by_the_nibble_and_binds_k_from_a():
    src = _body("dequant_w4a16_gemm")
    # (8 lanes a thread step since helper CA's vectorizer change: the scale's column is the
    # same over each aligned group of lanes, so it no longer forces one lane)
    j = r"(j|\(j \+ tc_lane\d+\))"
    assert re.search(rf"code = cutlass\.Int32\(cutlass\.Uint8\(Bq_s\[i \* 32 \+ {j} // 2\]\)\) >> {j} % 2 \* 4 & 15",
                     src)
    assert re.search(rf"\(cutlass\.Float16\(code\) - cutlass\.Float16\(8\.0\)\) \* Scale\[bx \* 64 \+ i, "
                     rf"\(k \* 64 \+ {j}\) // 64\]", src)
    assert "cutlass.range(0, 4)" in src  # K = 256 from A, four 64-wide steps


def test_cumsum_row_count_is_dynamic_and_reverse_is_honoured():
    k = BUILDS["chunked_row_cumsum"]()
    src = _body("", k)
    assert "M: cutlass.Int32" in src
    assert "T.cumsum(s, s, dim=1, reverse=True)" in src and "tc_pos5 = 63 - (" in src
    assert k is P.chunked_row_cumsum.compile(_z(5, 256), reverse=True)  # one kernel for every M
    with pytest.raises(ValueError, match="the width is whole chunks"):
        P.chunked_row_cumsum.compile(_z(5, 100))
    # the width given as a symbol: the assert is TileLang's host Assert, checked at each call
    # (it ran as Python before, where `l % 64 == 0` is structural equality: always false)
    assert "T.assume(l % 64 == 0)" in P.chunked_row_cumsum.get_tir(L=T.dynamic("l")).script()


def test_blocksparse_reads_the_mask_at_swizzled_blocks():
    src = _body("blocksparse_gemm_mask")
    assert "Mask = cute.make_tensor(Mask_ptr, cute.make_layout((4, 4, 8,), stride=(32, 8, 1,)))" in src
    assert "if (Mask[by_1_, bx_1_, k] != 0):" in src
    plain = _body("", P.blocksparse_gemm_mask.compile(_z(256, 256, dtype=f16), _z(256, 256, dtype=f16),
                                                       _z(4, 4, 8, dtype=torch.bool), swizzle=False))
    assert "if (Mask[by, bx, k] != 0):" in plain


def test_softmax_macro_reads_the_runtime_scale():
    src = _body("softmax_inplace")
    assert "def tilecute_softmax_inplace_0(X_ptr: cute.Pointer, scale: cutlass.Float32):" in src
    assert re.search(r"cute\.math\.exp\(\(x\[[^]]+\] - tc_red\d+\[[^]]+\]\) \* scale\)", src)
    assert BUILDS["softmax_inplace"]().order == []  # in place: the call returns None


def test_strided_view_strides_are_bound_from_the_tensor():
    src = _body("strided_transpose")
    assert "X = cute.make_tensor(X_ptr, cute.make_layout((200, 300,), stride=(1200, 2,)))" in src
    assert "Y = cute.make_tensor(Y_ptr, cute.make_layout((300, 200,), stride=(200, 1,)))" in src


def test_a_dynamic_symbol_given_for_a_const_keeps_the_dim_dynamic():
    k = BUILDS["gemm_nt"]()
    src = _body("", k)
    assert "C_ptr: cute.Pointer, m: cutlass.Int32" in src
    tir = P.gemm_nt.get_tir(M=T.dynamic("m"), N=256, K=256).script()
    assert "A: T.Tensor((m, 256)" in tir and "C: T.Tensor((m, 256)" in tir
    assert "T.Kernel(4, T.ceildiv(m, 64)" in tir
    assert k is P.gemm_nt.compile(M=T.dynamic("m"), N=256, K=256)
    with pytest.raises(TypeError, match=r"gemm_nt: T.const M is given 64.5; a constant is an int, "
                                        r"or a T.dynamic symbol"):
        P.gemm_nt.compile(M=64.5, N=256, K=256)


def test_a_plain_function_and_a_macro_each_launch_a_kernel():
    k = BUILDS["absmax_normalize_two_launches"]()
    src = k.get_kernel_source()
    assert src.count("\n@cute.kernel\n") == 2 and "Y_ptr: cute.Pointer, M: cutlass.Int32):" in src
    assert re.search(r'tcr\.combine\(tc_acc\d+, cute\.math\.absf\(x\[[^]]+\]\), "max"\)', src)
    # (global -> global: staged, every load before the first store)
    assert re.search(r"Y_staged\[tc_k\d+ \* 4 \+ tc_lane\d+\] = X\[bm_1_ \* 16 \+ i, \(j \+ tc_lane\d+\)\] / "
                     r"cute\.arch\.fmax\(S\[bm_1_ \* 16 \+ i\], cutlass\.Float32\(1e-06\)\)", src), src
    assert k is P.absmax_normalize_two_launches.compile(_z(7, 256))  # one kernel for every M
    assert k.order == [1, 0]  # `return Y, S`, S declared first


# ---- GPU: each against torch -------------------------------------------------------------------
@pytest.mark.gpu
def test_bias_gelu_on_gpu():
    torch.manual_seed(0)
    for dt in (f16, bf16):
        X = torch.randn(300, 1000, device="cuda", dtype=dt)
        b = torch.randn(1000, device="cuda", dtype=dt)
        rs = torch.rand(300, device="cuda") + 0.5
        Y = P.bias_gelu_broadcast(X, b, rs, dtype=dt)
        ref = torch.nn.functional.gelu(X.float() * rs[:, None] + b.float()[None, :], approximate="tanh")
        torch.testing.assert_close(Y.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_rms_norm_on_gpu():
    torch.manual_seed(1)
    X = torch.randn(100, 1024, device="cuda", dtype=bf16)
    W = torch.randn(1024, device="cuda", dtype=bf16)
    rstd, Y = P.rms_norm_rows(X, W, 1e-6)
    r = torch.rsqrt(X.float().pow(2).mean(-1) + 1e-6)
    torch.testing.assert_close(rstd, r, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(Y.float(), X.float() * r[:, None] * W.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_topk_on_gpu():
    torch.manual_seed(2)
    x = torch.rand(200, 64, device="cuda")
    kernel = P.topk_rows.compile(x, 6, block_M=16, threads=128)
    vals, idx = kernel(x)
    rv, ri = x.topk(6, dim=1)
    torch.testing.assert_close(vals, rv)
    torch.testing.assert_close(idx, ri.to(torch.int32))


@pytest.mark.gpu
def test_gemm_bias_act_on_gpu():
    torch.manual_seed(3)
    A = torch.randn(512, 256, device="cuda", dtype=f16)
    B = torch.randn(256, 384, device="cuda", dtype=f16)
    bias = torch.randn(384, device="cuda")
    acc = A.float() @ B.float() + bias
    torch.testing.assert_close(P.gemm_bias_act(A, B, bias).float(), acc.relu(), rtol=2e-2, atol=5e-2)
    C = P.gemm_bias_act(A, B, bias, activation="silu", out_dtype=T.bfloat16)
    assert C.dtype == bf16
    torch.testing.assert_close(C.float(), torch.nn.functional.silu(acc), rtol=2e-2, atol=2e-1)


@pytest.mark.gpu
def test_per_token_group_fp8_on_gpu():
    torch.manual_seed(4)
    X = torch.randn(100, 1000, device="cuda", dtype=bf16)
    Xq, Xs = P.per_token_group_fp8(X)
    pad = torch.nn.functional.pad(X.float(), (0, 24)).view(100, 8, 128)
    s = pad.abs().amax(-1).clamp(min=1e-4) / 448.0
    torch.testing.assert_close(Xs, s)
    ref = (pad / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(100, 1024)[:, :1000]
    # (a quotient within an ulp of a rounding boundary may land one fp8 step away: 1/8 relative)
    torch.testing.assert_close(Xq.float(), ref.float(), rtol=0.13, atol=2e-3)


@pytest.mark.gpu
def test_conv2d_on_gpu():
    torch.manual_seed(5)
    data = torch.randn(2, 16, 16, 32, device="cuda", dtype=f16)
    w = torch.randn(3, 3, 32, 64, device="cuda", dtype=f16)
    for stride, pad in ((1, 1), (2, 0)):
        out = P.conv2d_im2col_gather(data, w, stride, pad)
        ref = torch.conv2d(data.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(),
                           stride=stride, padding=pad).permute(0, 2, 3, 1)
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_flash_attention_on_gpu():
    torch.manual_seed(6)
    Q, K, V = (torch.randn(2, 256, 4, 64, device="cuda", dtype=f16) for _ in range(3))
    for causal in (True, False):
        O = P.flash_attn_fwd(Q, K, V, is_causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(
            Q.transpose(1, 2).float(), K.transpose(1, 2).float(), V.transpose(1, 2).float(),
            is_causal=causal).transpose(1, 2)
        torch.testing.assert_close(O.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_dequant_gemm_on_gpu():
    torch.manual_seed(7)
    A = torch.randn(128, 256, device="cuda", dtype=f16)
    q = torch.randint(0, 16, (128, 256), device="cuda")
    Bq = (q[:, 0::2] | (q[:, 1::2] << 4)).to(u8)
    S = (torch.rand(128, 4, device="cuda") * 0.05 + 0.01).half()
    C = P.dequant_w4a16_gemm(A, Bq, S)
    W = (q.float() - 8) * S.float().repeat_interleave(64, 1)
    torch.testing.assert_close(C.float(), A.float() @ W.T, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_chunked_cumsum_on_gpu():
    torch.manual_seed(8)
    for M in (37, 5):  # one kernel for both (T.dynamic M)
        X = torch.randn(M, 256, device="cuda")
        c = X.view(M, 4, 64)
        torch.testing.assert_close(P.chunked_row_cumsum(X), c.cumsum(-1).view(M, 256), rtol=1e-4, atol=1e-4)
        rev = c.flip(-1).cumsum(-1).flip(-1).view(M, 256)
        torch.testing.assert_close(P.chunked_row_cumsum(X, reverse=True), rev, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_blocksparse_gemm_on_gpu():
    torch.manual_seed(9)
    A = torch.randn(256, 256, device="cuda", dtype=f16)
    B = torch.randn(256, 256, device="cuda", dtype=f16)
    mask = torch.rand(4, 4, 8, device="cuda") > 0.5
    C = P.blocksparse_gemm_mask(A, B, mask)
    ref = torch.zeros(256, 256, device="cuda")
    for i in range(4):
        for j in range(4):
            for k in range(8):
                if mask[i, j, k]:
                    ref[i * 64:(i + 1) * 64, j * 64:(j + 1) * 64] += \
                        A[i * 64:(i + 1) * 64, k * 32:(k + 1) * 32].float() @ B[k * 32:(k + 1) * 32, j * 64:(j + 1) * 64].float()
    torch.testing.assert_close(C.float(), ref, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_softmax_inplace_on_gpu():
    torch.manual_seed(10)
    X = torch.randn(64, 512, device="cuda", dtype=f16)
    ref = torch.softmax(X.float() * 0.5, dim=-1)
    assert P.softmax_inplace(X, 0.5) is None
    torch.testing.assert_close(X.float(), ref, rtol=1e-2, atol=1e-3)


@pytest.mark.gpu
def test_strided_transpose_on_gpu():
    torch.manual_seed(11)
    big = torch.randn(200, 2, 300, 2, device="cuda")
    view = big[:, 1, :, 0]
    torch.testing.assert_close(P.strided_transpose(view), view.T.contiguous())


@pytest.mark.gpu
def test_gemm_dynamic_m_on_gpu():
    torch.manual_seed(12)
    kernel = P.gemm_nt.compile(M=T.dynamic("m"), N=256, K=256)
    B = torch.randn(256, 256, device="cuda", dtype=f16)
    for M in (64, 200, 1000):
        A = torch.randn(M, 256, device="cuda", dtype=f16)
        C = kernel(A, B)
        assert C.shape == (M, 256)
        torch.testing.assert_close(C.float(), A.float() @ B.float().T, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_absmax_normalize_on_gpu():
    torch.manual_seed(13)
    for M in (100, 7):
        X = torch.randn(M, 256, device="cuda")
        X[3] = 0  # an all-zero row: divided by 1e-6
        Y, S = P.absmax_normalize_two_launches(X)
        s = X.abs().amax(-1)
        torch.testing.assert_close(S, s)
        torch.testing.assert_close(Y, X / s.clamp(min=1e-6)[:, None])
