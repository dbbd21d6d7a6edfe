"""A fifty-sixth set of programs in TileLang's idioms (tests/unseen_programs56.py): quantisation
formats -- an NVFP4 weight GEMM (e2m1 pairs, e4m3 scale per 16, a global fp32 scale), GPTQ int4
with act-order g_idx, AWQ int4 in its interleaved nibble order, per-tensor dynamic fp8 (abs-max
by T.atomic_max, then scale and cast), an NVFP4 quantize-and-pack kernel, MXFP4 on TileLang's own
float4_e2m1fn / float8_e8m0fnu dtypes, and SmoothQuant W8A8 (smoothing + per-token int8 quant by
T.round, then an int8 GEMM with per-token x per-channel scales), an MXFP4 quantizer on the native
dtypes (power-of-two e8m0 scales, T.cast to float4_e2m1fn) and a BitNet b1.58 ternary GEMM (2-bit
codes four a byte, int8 activations, int32 accumulation), and a uint4 dequant GEMM whose threads
decode by hand (T.serial over steps, T.vectorized copies into T.alloc_local).

CPU: each builds to an sm_90a cubin (and an sm_80 one where it has no fp8), and what decides
its result is read in the generated source.  All built and read right as first written.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs56.py``)."""

import re

import pytest
import torch

import tilecute
from tilecute.codegen.source import CodegenError
from tilecute.runtime.dtypes import E2M1_VALUES
import rounds
import unseen_programs56 as P

f16, bf16, i32, e4m3 = torch.float16, torch.bfloat16, torch.int32, torch.float8_e4m3fn

NAMES = ["awq_interleaved_gemm", "bitnet_ternary_gemm", "gptq_act_order_gemm", "mxfp4_native_dtypes_gemm",
         "mxfp4_native_quantize", "nvfp4_dequant_gemm", "nvfp4_quantize_pack", "smoothquant_act_quant",
         "smoothquant_int8_gemm", "tensor_amax", "tensor_fp8_quant", "uint4_fine_grained_dequant_gemm"]
# no sm_80 cubin: float8 casts (sm_89+)
SM90_ONLY = {"nvfp4_dequant_gemm", "nvfp4_quantize_pack", "tensor_fp8_quant"}

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


_body = rounds.body_of(rounds.kernel_of(P))  # each program is one @cute.kernel


test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_e4m3_scales_are_refused_on_sm80(tmp_path):
    with pytest.raises(CodegenError, match=r"unseen_programs56\.py:\d+: prim_func 'main': a cast from "
                                           r"float8_e4m3 to float32: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(P.nvfp4_dequant_gemm.get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- what decides each result, in the generated source -----------------------------------------
def test_nvfp4_weight_is_code_times_block_scale_times_global():
    src = _body("nvfp4_dequant_gemm")
    assert '"wgmma"' in src and "g[0] = G[0]" in src
    # the nibble: the even K element in the low four bits
    assert re.search(r"nib = cutlass\.Uint8\(q_s\[n \* 64 \+ \((j \+ \w+)\) // 2\]\) >> "
                     r"cutlass\.Uint8\(\(\1\) % 2 \* 4\) & cutlass\.Uint8\(15\)", src)
    # e2m1: exponent 0 is m / 2, else 2^(e - 1) (1 + m / 2); bit 3 the sign
    assert "cutlass.select_(nib & cutlass.Uint8(8) != cutlass.Uint8(0), cutlass.Float32(0.0) - " in src
    assert ("cute.math.exp2(cutlass.Float32(nib >> cutlass.Uint8(1) & cutlass.Uint8(3)) - cutlass.Float32(1.0))"
            " * (cutlass.Float32(1.0) + cutlass.Float32(nib & cutlass.Uint8(1)) * cutlass.Float32(0.5))") in src
    # one e4m3 scale per 16 of K (8 per row of the 128-wide tile), then the global scale
    assert re.search(r"\* cutlass\.Float32\(s_s\[n \* 8 \+ \(j \+ \w+\) // 16\]\) \* g\[0\]\)", src)
    assert "s_s[i3 * 8 + i4] = Bs[bx * 128 + i3, k * 128 // 16 + i4]" in src


def test_gptq_takes_each_k_rows_group_from_g_idx():
    src = _body("gptq_act_order_gemm")
    assert '"wgmma"' in src
    # K row kk is nibble kk % 8 of packed row kk // 8
    assert re.search(r"q = \w+\[\w+\] >> kk % 8 \* 4 & 15", src)
    assert re.search(r"q = q_s\[kk // 8 \* 128 \+ \(n \+ \w+\)\] >> kk % 8 \* 4 & 15", src)
    # zero point: column col in nibble col % 8 of the row of group g_idx[kk], plus one
    assert "gi = g_s[kk]" in src and "= Qz[gi, col // 8]" in src
    assert re.search(r"z = \(\w+ >> \(col - col // 8 \* 8\) \* 4 & 15\) \+ 1", src)
    # the scale row is the group too (vectorized: g_s[kk] * N)
    assert "Sc.iterator + cute.assume(g_s[kk] * 256 + bx * 128 + n, divby=8)" in src
    assert re.search(r"= Sc\[gi, col\]", src)


def test_awq_unpacks_in_its_interleaved_order():
    src = _body("awq_interleaved_gemm")
    shift = re.search(r"shift = \(\((n \+ \w+)\) % 8 % 2 \* 4 \+ \(\1\) % 8 // 2\) \* 4", src)
    assert shift, src
    lane = shift.group(1)
    assert f"q = q_s[kk * 8 + ({lane}) // 8] >> shift & 15" in src
    assert f"z = z_s[({lane}) // 8] >> shift & 15" in src
    assert re.search(r"w_l\[\w+ \* 8 \+ \w+\] = cutlass\.Float16\(q - z\) \* \w+\[\w+\]", src)
    # one zero / scale row per K tile (block_K 64 within a 128 group), by TMA
    assert "(bx * 64 // 8, tc_j0 * 64 // 128), 32)  # TMA load of a 1x8 box of Qz" in src
    assert "(bx * 64, tc_j0 * 64 // 128), 128)  # TMA load of a 1x64 box of Sc" in src


def test_tensor_amax_reduces_the_block_then_one_atomic_max():
    src = _body("tensor_amax")
    assert "cute.math.absf(x_l[" in src and 'tcr.block_allreduce(tc_red9, "max"' in src
    assert re.search(r"tot\[i1\] = cute\.arch\.fmax\(tot\[i1\], row\[k2\]\)", src)
    assert src.count("atomic_max") == 1 and "tca.atomic_max(Amax, (0,), tot[0])" in src


def test_tensor_fp8_quant_scales_by_448_over_amax_and_saturates():
    src = _body("tensor_fp8_quant")
    assert "amax = cute.arch.fmax(Amax[0], cutlass.Float32(1e-12))" in src
    assert "inv[0] = cutlass.Float32(448.0) / amax" in src
    assert re.search(r"if bx == 0 and by == 0:\s+Scale\[0\] = amax / cutlass\.Float32\(448\.0\)", src)
    assert ("cutlass.Float8E4M3FN(cutlass.select_(cutlass.Boolean(cute.math.isnan(v)), v, cute.arch.fmin("
            "cute.arch.fmax(v, cutlass.Float32(-448.0)), cutlass.Float32(448.0))))") in src


def test_nvfp4_quantize_rounds_to_e2m1_and_packs_low_nibble_first():
    src = _body("nvfp4_quantize_pack")
    assert "tcr.grouped_rows(" in src
    assert re.search(r"s_l\[(\w+ \* 32 \+ \w+)\] = cutlass\.Float8E4M3FN\(cute\.arch\.fmin\(amax\[\1\] / "
                     r"cutlass\.Float32\(6\.0\) / g, cutlass\.Float32\(448\.0\)\)\)", src)
    assert re.search(r"sf = cutlass\.Float32\(s_l\[\w+ \* 32 \+ \w+\]\) \* g", src)
    # the seven midpoints between the eight e2m1 magnitudes, in order
    cuts = re.findall(r"a (<=?) cutlass\.Float32\(([\d.]+)\), (\d)", src)
    assert cuts == [("<=", "0.25", "0"), ("<", "0.75", "1"), ("<=", "1.25", "2"), ("<", "1.75", "3"),
                    ("<=", "2.5", "4"), ("<", "3.5", "5"), ("<=", "5.0", "6")]
    assert re.search(r"select_\(x_l\[\w+\] < cutlass\.Float32\(0\.0\), 8, 0\)", src)
    assert re.search(r"Q\[bm \* 4 \+ (\w+), j\] = cutlass\.Uint8\(code\[\1 \* 512 \+ 2 \* j\]\) \| "
                     r"cutlass\.Uint8\(code\[\1 \* 512 \+ 2 \* j \+ 1\]\) << cutlass\.Uint8\(4\)", src)


def test_mxfp4_native_casts_decode_fp4_and_e8m0():
    src = _body("mxfp4_native_dtypes_gemm")
    # the packed fp4 tile arrives by cp.async (no 4-bit TMA before sm_100), half a byte an element
    assert re.search(r"tcc\.copy_async\(cute\.make_tensor\(B\.iterator \+ cute\.assume\(\(\(bx \* 128 \+ i3\) \* 512 "
                     r"\+ \(k \+ 1\) \* 128 \+ i4\) // 2, divby=16\)", src)
    assert re.search(r"tcfp4\.unpack\(cute\.make_tensor\(b4_s\.iterator \+ cute\.assume\(\(n \* 128 \+ j\) // 2", src)
    # value = e2m1 * 2^(e - 127), one e8m0 scale per 32 of K (4 per row of the 128-wide tile)
    assert re.search(r"cutlass\.BFloat16\(tcfp4\.decode\((\w+)\[\w+\]\) \* tce8m0\.decode\(cutlass\.Uint8\("
                     r"s_s\[n \* 4 \+ \(j \+ \w+\) // 32\]\)\)\)", src)
    assert '"wgmma"' in src


def test_smoothquant_divides_by_smooth_rounds_half_even_and_clamps():
    src = _body("smoothquant_act_quant")
    assert re.search(r"x_l\[\w+ \* 16 \+ \w+\] = cutlass\.Float32\(\w+\[\w+\]\) / \w+\[\w+\]", src)
    assert 'tcr.block_allreduce(tc_red12, "max"' in src and "cute.math.absf(x_l[" in src
    assert re.search(r"(tc_rows\d+)\[(\w+)\] = cute\.arch\.fmax\(\1\[\2\], cutlass\.Float32\(1e-08\)\)", src)
    q = re.search(r"q_l\[.*", src).group(0)
    assert q.startswith("q_l[") and "cutlass.Int8(" in q
    assert "cute.math.roundeven(x_l[" in q and "* cutlass.Float32(127.0) / tc_rows" in q
    assert "cutlass.Float32(-127.0)), cutlass.Float32(127.0))" in q
    assert re.search(r"Sx\[bm \* 4 \+ \w+\] = tc_rows\d+\[\w+\] / cutlass\.Float32\(127\.0\)", src)


def test_smoothquant_gemm_accumulates_int32_and_scales_token_and_channel():
    src = _body("smoothquant_int8_gemm")
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert "tcm.drain(acc)" in src
    assert "Sw.iterator + cute.assume(bx * 128 + j, divby=2)" in src
    assert re.search(r"if by \* 64 \+ i < 200:\s+(\w+) = Sx\[by \* 64 \+ i\]", src)
    assert re.search(r"cutlass\.Float16\(cutlass\.Float32\(acc\[\w+ \+ \w+\]\) \* \w+ \* \w+\[\w+\]\)", src)
    # ragged M: rows past 200 are not stored
    assert re.search(r"if by \* 64 \+ i3 < 200:\s+\w+ = cute\.make_rmem_tensor", src)


def test_mxfp4_quantize_takes_a_power_of_two_scale_and_casts_to_fp4():
    src = _body("mxfp4_native_quantize")
    assert "tcr.grouped_rows(" in src
    assert re.search(r"(p_l\[(\w+) \* 32 \+ (\w+)\]) = cute\.math\.exp2\(cute\.arch\.fmax\(cute\.math\.ceil\("
                     r"cute\.math\.log2\(amax\[\2 \* 32 \+ \3\] / cutlass\.Float32\(6\.0\)\)\), "
                     r"cutlass\.Float32\(-126\.0\)\)\)\s+S\[bm \* 8 \+ \2, \3\] = tce8m0\.encode\(\1\)", src)
    assert re.search(r"q_l\[\w+ \* 16 \+ \w+\] = tcfp4\.encode\(x_l\[\w+ \* 16 \+ \w+\] / p_l\[\w+ \* 32 \+ \w+\]\)", src)
    # sixteen codes packed into eight bytes of the row, at element offset // 2
    assert re.search(r"tcfp4\.pack\(\w+, 0, 16, cute\.make_tensor\(Q\.iterator \+ cute\.assume\(\(\(bm \* 8 \+ \w+\) "
                     r"\* 1024 \+ \w+ \* 32 \+ \w+\) // 2, divby=8\), cute\.make_layout\(8\)\)\)", src)


def test_bitnet_decodes_two_bit_codes_minus_one_and_multiplies_int8():
    src = _body("bitnet_ternary_gemm")
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert re.search(r"= \(p_s\[n \* 32 \+ \((j \+ \w+)\) // 4\] >> cutlass\.Int8\(\(\1\) % 4 \* 2\) & "
                     r"cutlass\.Int8\(3\)\) - cutlass\.Int8\(1\)", src)
    assert re.search(r"cutlass\.BFloat16\(cutlass\.Float32\(acc\[\w+ \+ \w+\]\) \* Sx\[by \* 64 \+ i\] \* Sw\[0\]\)", src)


def test_fine_grained_dequant_walks_thread_steps_and_stores_eight_halves():
    src = _body("uint4_fine_grained_dequant_gemm")
    assert re.search(r"for i in cutlass\.range\(0, 8\):\s+base = \(i \* 128 \+ tx\) \* 8\s+n = base // 64\s+"
                     r"j0 = base - base // 64 \* 64", src)
    assert re.search(r"q_loc\[v\] = cutlass\.Uint8\(q_s\[n \* 32 \+ j0 // 2 \+ v\]\)", src)
    assert re.search(r"= Sc\[bx \* 128 \+ n, \(k \* 64 \+ j0\) // 64\]", src)
    assert re.search(r"nib = q_loc\[(\w+) // 2\] >> cutlass\.Uint8\(\1 % 2 \* 4\) & cutlass\.Uint8\(15\)\s+"
                     r"w_loc\[\1\] = \(cutlass\.Float16\(nib\) - cutlass\.Float16\(8\.0\)\) \* s", src)
    # the eight halves go to shared as one 16-byte store (swizzled for the wgmma)
    assert re.search(r"cute\.make_tensor\(b_s\.iterator \+ cute\.assume\(\(n \* 64 \+ j0 \+ \w+\) \^ .*divby=8\), "
                     r"cute\.make_layout\(8\)\)\.store\(", src)


# ---- on the GPU ----------------------------------------------------------------------------
def _e2m1_lut(device):
    """The value of each e2m1 code 0..15 (bit 3 the sign)."""
    return torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), device=device)


def _nibbles_along_last(q_u8):
    """(R, C/2) uint8 -> (R, C) codes, the even element in the low nibble."""
    lo, hi = q_u8 & 0xF, q_u8 >> 4
    return torch.stack([lo, hi], dim=-1).flatten(-2).long()


def _int4_along(packed, order, dim):
    """Unpack eight 4-bit fields of int32 along ``dim``: field ``order[j]`` holds element j."""
    shifts = torch.tensor([4 * s for s in order], device=packed.device, dtype=torch.int32)
    x = (packed.unsqueeze(-1) >> shifts) & 0xF  # (..., 8) element j last
    if dim == 0:
        return x.permute(0, 2, 1).reshape(-1, packed.shape[1])
    return x.reshape(packed.shape[0], -1)


@pytest.mark.gpu
def test_nvfp4_dequant_gemm_on_gpu():
    torch.manual_seed(0)
    M, N, K = 256, 256, 512
    A = torch.randn(M, K, device="cuda", dtype=bf16)
    Bq = torch.randint(0, 256, (N, K // 2), device="cuda", dtype=torch.uint8)
    Bs = (torch.rand(N, K // 16, device="cuda") * 0.5 + 0.01).to(e4m3)
    G = torch.tensor([0.75], device="cuda")
    C = P.nvfp4_dequant_gemm()(A, Bq, Bs, G)
    W = _e2m1_lut("cuda")[_nibbles_along_last(Bq)] * Bs.float().repeat_interleave(16, dim=1) * G
    rounds.close(C, A.float() @ W.to(bf16).float().T, 2e-2)


@pytest.mark.gpu
def test_gptq_act_order_gemm_on_gpu():
    torch.manual_seed(1)
    M, N, K, group = 128, 256, 512, 128
    A = torch.randn(M, K, device="cuda", dtype=f16)
    Qw = torch.randint(-2**31, 2**31, (K // 8, N), device="cuda", dtype=torch.int64).to(i32)
    Qz = torch.randint(-2**31, 2**31, (K // group, N // 8), device="cuda", dtype=torch.int64).to(i32)
    Sc = (torch.rand(K // group, N, device="cuda") * 0.02 + 0.001).to(f16)
    gidx = (torch.randperm(K, device="cuda") // group).to(i32)  # act-order: groups permuted along K
    C = P.gptq_act_order_gemm()(A, Qw, Qz, Sc, gidx)
    q = _int4_along(Qw, range(8), dim=0)  # (K, N)
    z = _int4_along(Qz, range(8), dim=1) + 1  # (G, N)
    W = ((q - z[gidx.long()]).to(f16) * Sc[gidx.long()]).float()
    rounds.close(C, A.float() @ W, 2e-2)


@pytest.mark.gpu
def test_awq_interleaved_gemm_on_gpu():
    torch.manual_seed(2)
    M, N, K, group = 128, 256, 512, 128
    A = torch.randn(M, K, device="cuda", dtype=f16)
    Qw = torch.randint(-2**31, 2**31, (K, N // 8), device="cuda", dtype=torch.int64).to(i32)
    Qz = torch.randint(-2**31, 2**31, (K // group, N // 8), device="cuda", dtype=torch.int64).to(i32)
    Sc = (torch.rand(K // group, N, device="cuda") * 0.02 + 0.001).to(f16)
    C = P.awq_interleaved_gemm()(A, Qw, Qz, Sc)
    order = [0, 4, 1, 5, 2, 6, 3, 7]  # column j of eight in nibble order[j] (packed 0,2,4,6,1,3,5,7)
    q = _int4_along(Qw, order, dim=1)
    z = _int4_along(Qz, order, dim=1).repeat_interleave(group, dim=0)
    W = ((q - z).to(f16) * Sc.repeat_interleave(group, dim=0)).float()
    rounds.close(C, A.float() @ W, 2e-2)


def _within_an_e4m3_step(got, want):
    """Nearly all e4m3 values equal, the rest one step (2^-3 relative) apart: a float32
    product or quotient an ulp off may round to the other neighbour."""
    g, w = got.float(), want.float()
    assert ((g - w).abs() <= 0.125 * w.abs() + 2.0 ** -9).all()
    assert (g == w).float().mean() > 0.999


@pytest.mark.gpu
def test_tensor_fp8_dynamic_quant_on_gpu():
    torch.manual_seed(3)
    X = torch.randn(1000, 1024, device="cuda", dtype=bf16) * 3
    Amax = torch.zeros(1, device="cuda")
    P.tensor_amax()(X, Amax)
    want = X.float().abs().max()
    assert Amax[0] == want
    Xq, Scale = P.tensor_fp8_quant()(X, Amax)
    torch.testing.assert_close(Scale[0], want / 448.0)
    ref = (X.float() * (448.0 / want)).clamp(-448.0, 448.0).to(e4m3)
    _within_an_e4m3_step(Xq, ref)
    # all zeros: scale 1e-12 / 448, codes 0
    Amax.zero_()
    Z = torch.zeros_like(X)
    P.tensor_amax()(Z, Amax)
    Zq, _ = P.tensor_fp8_quant()(Z, Amax)
    assert Amax[0] == 0 and not Zq.float().any()


@pytest.mark.gpu
def test_nvfp4_quantize_pack_on_gpu():
    torch.manual_seed(4)
    M, K = 300, 512
    X = torch.randn(M, K, device="cuda", dtype=bf16)
    G = torch.tensor([X.float().abs().max().item() / (448.0 * 6.0)], device="cuda")
    Q, S = P.nvfp4_quantize_pack()(X, G)
    x = X.float().view(M, K // 16, 16)
    s = (x.abs().amax(-1) / 6.0 / G).clamp(max=448.0).to(e4m3)
    _within_an_e4m3_step(S, s)
    sf = (s.float() * G).unsqueeze(-1)
    a = (x / sf).abs()
    mid = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device="cuda")
    mag = torch.bucketize(a, mid)  # nearest e2m1 magnitude (a tie may land either side)
    code = mag + 8 * (x < 0)
    got = _nibbles_along_last(Q).view(M, K // 16, 16)
    assert (got == code).float().mean() > 0.999
    # what the codes mean: each value within half a step of its group's scale
    sfk = S.float().unsqueeze(-1) * G
    ak = (x / sfk).abs()
    deq = _e2m1_lut("cuda")[got] * sfk
    assert ((deq - x).abs() <= 1.01 * sfk * torch.where(ak > 4, 1.0, torch.where(ak > 2, 0.5, 0.25))).all()


@pytest.mark.gpu
def test_mxfp4_native_dtypes_gemm_on_gpu():
    torch.manual_seed(5)
    M, N, K = 128, 256, 512
    A = torch.randn(M, K, device="cuda", dtype=bf16)
    Bq = torch.randint(0, 256, (N, K // 2), device="cuda", dtype=torch.uint8)
    S = torch.randint(120, 131, (N, K // 32), device="cuda", dtype=torch.uint8)
    C = P.mxfp4_native_dtypes_gemm()(A, Bq.view(torch.float4_e2m1fn_x2), S.view(torch.float8_e8m0fnu))
    W = _e2m1_lut("cuda")[_nibbles_along_last(Bq)] * torch.exp2(S.float() - 127).repeat_interleave(32, dim=1)
    rounds.close(C, A.float() @ W.to(bf16).float().T, 2e-2)


@pytest.mark.gpu
def test_smoothquant_w8a8_on_gpu():
    torch.manual_seed(6)
    M, N, K = 200, 256, 1024
    X = torch.randn(M, K, device="cuda", dtype=f16)
    X[:, :8] *= 20  # outlier channels, what smoothing is for
    smooth = X.float().abs().amax(0).clamp(min=1e-5).sqrt()
    Xq, Sx = P.smoothquant_act_quant()(X, smooth)
    xs = X.float() / smooth
    amax = xs.abs().amax(1).clamp(min=1e-8)
    torch.testing.assert_close(Sx, amax / 127.0)
    ref = torch.round(xs * 127.0 / amax[:, None]).clamp(-127, 127)
    assert (Xq.float() - ref).abs().max() <= 1 and (Xq.float() == ref).float().mean() > 0.999
    W = torch.randn(N, K, device="cuda") * smooth  # the smoothing folded into the weight
    Sw = W.abs().amax(1) / 127.0
    Wq = torch.round(W / Sw[:, None]).clamp(-127, 127).to(torch.int8)
    C = P.smoothquant_int8_gemm()(Xq, Wq, Sx, Sw)
    want = (Xq.double() @ Wq.double().T) * Sx.double()[:, None] * Sw.double()[None, :]
    rounds.close(C, want.float(), 1e-2)


@pytest.mark.gpu
def test_mxfp4_native_quantize_on_gpu():
    torch.manual_seed(7)
    M, K = 256, 1024
    X = torch.randn(M, K, device="cuda", dtype=bf16) * torch.logspace(-3, 3, M, device="cuda", dtype=bf16)[:, None]
    X[0, :32] = 0  # an all-zero group
    Q, S = P.mxfp4_native_quantize()(X)
    x = X.float().view(M, K // 32, 32)
    p = torch.exp2(torch.ceil(torch.log2(x.abs().amax(-1) / 6.0)).clamp(min=-126.0))
    assert torch.equal(torch.exp2(S.view(torch.uint8).float() - 127), p)
    v = x / p.unsqueeze(-1)
    lut = _e2m1_lut("cuda")
    got = lut[_nibbles_along_last(Q.view(torch.uint8))].view(M, K // 32, 32)
    # nearest e2m1 value: no code is closer than the one chosen
    err = (got - v).abs()
    assert (err <= (lut[:8].view(1, 1, 1, 8) - v.abs().unsqueeze(-1)).abs().amin(-1) + 1e-6).all()
    assert not got[0, 0].any() and (v.abs() <= 6).all()


@pytest.mark.gpu
def test_bitnet_ternary_gemm_on_gpu():
    torch.manual_seed(8)
    M, N, K = 128, 256, 512
    Xq = torch.randint(-127, 128, (M, K), device="cuda", dtype=torch.int8)
    Sx = torch.rand(M, device="cuda") * 0.01 + 0.001
    W = torch.randint(-1, 2, (N, K), device="cuda", dtype=torch.int32)
    codes = (W + 1).view(N, K // 4, 4)
    Wp = (codes[..., 0] | codes[..., 1] << 2 | codes[..., 2] << 4 | codes[..., 3] << 6).to(torch.uint8).view(torch.int8)
    Sw = torch.tensor([0.37], device="cuda")
    C = P.bitnet_ternary_gemm()(Xq, Wp, Sx, Sw)
    want = (Xq.double() @ W.double().T) * Sx.double()[:, None] * 0.37
    rounds.close(C, want.float(), 2e-2)


@pytest.mark.gpu
def test_uint4_fine_grained_dequant_gemm_on_gpu():
    torch.manual_seed(9)
    M, N, K, group = 128, 256, 512, 64
    A = torch.randn(M, K, device="cuda", dtype=f16)
    Bq = torch.randint(0, 256, (N, K // 2), device="cuda", dtype=torch.uint8)
    Sc = (torch.rand(N, K // group, device="cuda") * 0.02 + 0.001).to(f16)
    C = P.uint4_fine_grained_dequant_gemm()(A, Bq, Sc)
    W = (_nibbles_along_last(Bq) - 8).to(f16) * Sc.repeat_interleave(group, dim=1)
    rounds.close(C, A.float() @ W.float().T, 2e-2)
