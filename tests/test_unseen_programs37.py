"""A thirty-seventh set of programs in TileLang's idioms (tests/unseen_programs37.py), most on
TileLang's 4-bit integers: AWQ / GPTQ-style w4a16 GEMMs, w4a8 GEMMs (int4 weights cast to int8
in registers, or decoded from uint8 bytes by a T.macro with T.reinterpret and an arithmetic
shift), an int4 x int4 GEMM with a scale epilogue, int4 KV quantization on write and two decode
attentions reading an int4 / uint4 cache, uint4 nibble shuffles, an early-exit int4 requantizer
(T.thread_return), a uint4 GEMV, an int4 GEMM over a T.dynamic M with an explicit pipeline
schedule, an eager int4 quantizer with T.empty outputs, a split-K int4 GEMM with a ragged K and
a w4afp8 GEMM (int4 weights cast to float8_e4m3 in registers) and a hand double-buffered int4
GEMM reading 64-wide K parts of stage-indexed shared tiles.

CPU: each builds to an sm_90a and (but the fp8 one) an sm_80 cubin, and what decides its result is read in the
generated source.  One fix came from these programs: a T.if_then_else whose value is int4 /
uint4 (``T.if_then_else(c > 12, T.cast(12, T.uint4), x[i, j ^ 1])``) named its select
``cutlass.Uint4(...)``, which CuTe DSL does not have (the cubin build failed); it is now named
by the code's register type, a Uint8.  A cast from an integer (int4 included) to float8 failed
in NVVM (MLIR folds CuTe DSL's ``Float8E4M3FN(Float32(i))`` into an sitofp to f8, which LLVM
refuses) and one from float8 to an integer had no lowering: both go through float32 now, as
CUTLASS's ``float_e4m3_t(int)`` does (tests/test_fp8_elementwise.py too).  A T.gemm on one
matrix of a stage-indexed int4 tile (``A_s[k % 2, :, :]``) or on a K part of one
(``A_s[:, kk * 64:(kk + 1) * 64]``) addressed the operand in elements where its bytes were
meant (two int4 a byte): stage 1 read from twice its offset (inside B_s) and part kk from
part 2 kk, silently wrong; the offsets are now bytes.  int4 / uint4 <-> bool casts, refused
before, convert as integers do (tests/test_int4.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs37.py``)."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T
import rounds
import unseen_programs37 as P

NAMES = ["awq_w4a16_group_gemm", "gptq_packed_u8_gemm", "w4a8_gemm_dequant_epilogue",
         "int4_gemm_scaled_fp16", "kv_int4_quant_write", "decode_attn_int4_kv",
         "uint4_nibble_shuffle", "int4_requant_thread_return", "w4a8_u8_macro_gemm",
         "gemv_w4a16_uint4", "int4_gemm_dynamic_m_pipelined", "eager_int4_row_quant",
         "int4_gemm_splitk_atomic", "gqa_decode_uint4_kv_gemm", "w4afp8_gemm",
         "int4_gemm_hand_stages_kparts"]
NO_SM80 = {"w4afp8_gemm"}  # float8 conversions need sm_89+
# eager kernels are built from the tensors they are called with (CPU tensors give the shapes)
EAGER = {"eager_int4_row_quant": lambda: P.eager_int4_row_quant.compile(
    torch.zeros(100, 256, dtype=torch.float32))}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P, EAGER)
_body = rounds.body_of(_kernel)
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - set(EAGER) - NO_SM80), rounds.tir_of(P), "sm_80")


def test_w4afp8_is_refused_on_sm80(tmp_path):
    with pytest.raises(Exception, match="float8 values convert only on sm_89"):
        tilecute.build_cubin(P.w4afp8_gemm.get_tir(), "sm_80", out_dir=str(tmp_path))


def test_w4afp8_casts_int4_codes_through_float32():
    src = _body("w4afp8_gemm")
    # the cast failed in NVVM before (MLIR folded truncf(sitofp) into an sitofp to f8)
    assert "tcmath.fp8_from_int(tcfp4.decode_int4(" in src and "cutlass.Float8E4M3FN)" in src
    assert 'tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32' in src


def test_int4_stage_and_k_part_offsets_are_bytes():
    src = _body("int4_gemm_hand_stages_kparts")
    # a stage of (128, 256) uint4 is 16384 bytes; a 64-wide K part of 128 rows 4096
    assert "tcm.operand(tc_smem + cute.assume(0 + (k % 2) * 16384 + (kk * 64 * 64), divby=1024), tcm.Uint4" in src
    assert "tcm.operand(tc_smem + cute.assume(32768 + (k % 2) * 16384 + (kk * 64 * 64), divby=1024), cutlass.Int4" in src
    # the copies fill stage (k + 1) % 2 at element (k + 1) % 2 * 32768, byte 16384
    assert re.search(r"\(\(\(k \+ 1\) % 2\) \* 32768 \+ \(i\d+ >> 6\) \* 8192 \+ ", src)


def test_awq_dequantizes_codes_and_zero_points_in_registers():
    src = _body("awq_w4a16_group_gemm")
    # the weight tile's bytes unpacked into codes; the zero point read as its nibble of Z
    assert "tcfp4.unpack(" in src
    assert re.search(r"cutlass\.Float16\(tcfp4\.decode_uint4\(Wq_l\[[^]]+\]\)\) - "
                     r"cutlass\.Float16\(tcfp4\.decode_uint4\(tcfp4\.nibble\(Z\[", src)
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32' in src
    assert "decode_int4" not in src  # uint4: zero-extended


def test_gptq_shifts_the_byte_by_its_nibble():
    src = _body("gptq_packed_u8_gemm")
    # (byte >> 4 * (j % 2)) & 15 at int32 width, then minus the zero point of 8
    assert re.search(r"code = cutlass\.Uint8\(cutlass\.Int32\(Bq_l\[[^]]+\]\) >> "
                     r"cutlass\.Int32\(cutlass\.Uint8\(\(j \+ tc_lane\d+\) % 2\)\) \* 4 & 15\)", src)
    assert "(cutlass.Float16(code) - cutlass.Float16(8.0))" in src


def test_w4a8_casts_int4_to_int8_for_an_int8_gemm():
    src = _body("w4a8_gemm_dequant_epilogue")
    assert re.search(r"W_l8\[[^]]+\] = cutlass\.Int8\(tcfp4\.decode_int4\(W_l4\[", src)
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert "cutlass.BFloat16(cutlass.Float32(acc[" in src


def test_int4_gemm_scales_the_int32_accumulator():
    src = _body("int4_gemm_scaled_fp16")
    assert 'tcm.tiled_mma("mma", cutlass.Int4, cutlass.Int4, cutlass.Int32' in src
    assert "cutlass.Float16(cutlass.Float32(acc[" in src


def test_kv_quant_rounds_clamps_and_packs():
    src = _body("kv_int4_quant_write")
    assert "tcfp4.encode_int4(cutlass.Int32(" in src and "cute.math.roundeven(" in src
    assert "cutlass.Float32(-8.0)), cutlass.Float32(7.0))" in src
    assert "/ cutlass.Float32(7.0), cutlass.Float32(1.0))" in src  # absmax / 7, or 1
    assert "< 200" in src  # the ragged token block


def test_decode_attention_reads_int4_codes_signed():
    src = _body("decode_attn_int4_kv")
    assert "tcfp4.decode_int4(tcfp4.nibble(Kq[" in src and "tcfp4.decode_int4(tcfp4.nibble(Vq[" in src
    assert "tcr.block_allreduce(" in src and "cute.math.exp2(" in src


def test_uint4_select_is_named_by_its_register_type():
    src = _body("uint4_nibble_shuffle")
    assert "cutlass.Uint4" not in src
    assert re.search(r"cutlass\.Uint8\(cutlass\.select_\(c > 12, cutlass\.Uint8\(12\), ", src)
    assert "cutlass.Uint8(15)" in src  # T.fill(z, 15): its code
    assert "^ 1)) >> 1]" in src  # the neighbour's nibble: element j ^ 1


def test_int4_select_of_codes_builds():
    """The same for int4: a select between a register code and a constant's."""
    @T.prim_func
    def relu4(A: T.Tensor((64, 64), T.int4), B: T.Tensor((64, 64), T.int4)):
        with T.Kernel(1, threads=64) as bx:
            a = T.alloc_fragment((64, 64), T.int4)
            T.copy(A, a)
            for i, j in T.Parallel(64, 64):
                B[i, j] = T.if_then_else(T.cast(a[i, j], T.int32) < 0, T.cast(0, T.int4), a[i, j])
    kernel = tilecute.compile(relu4)
    assert "cutlass.Int4" not in kernel.get_kernel_source()
    assert kernel.ensure_cubin()


def test_requant_returns_early_and_stores_nibbles():
    src = _body("int4_requant_thread_return")
    # the two early exits fold into branches: the rest of the kernel runs in their else
    assert re.search(r"if r >= 1000:\n\s+pass\n\s+else:\n\s+if s_out\[r\] == cutlass\.Float32\(0\.0\):"
                     r"\n(.*\n){2}\s+else:\n\s+f = s_in\[r\] / s_out\[r\]", src)
    assert "tcfp4.store(Y" in src and "tcfp4.encode_int4(" in src


def test_macro_decodes_a_nibble_by_arithmetic_shift():
    src = _body("w4a8_u8_macro_gemm")
    assert "tcmath.reinterpret(nib << cutlass.Uint8(4), cutlass.Int8) >> cutlass.Int8(4)" in src
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src


def test_gemv_reads_uint4_nibbles_and_reduces_rows():
    src = _body("gemv_w4a16_uint4")
    assert "cutlass.Float32(tcfp4.decode_uint4(tcfp4.nibble(W[" in src
    assert '"sum")' in src


def test_dynamic_m_int4_gemm_guards_rows_past_m():
    src = _body("int4_gemm_dynamic_m_pipelined")
    assert ", m: cutlass.Int32)" in src
    assert "if by1 * 64 + i3 < m:" in src or "< m:" in src
    assert 'tcm.tiled_mma("mma", cutlass.Int4, cutlass.Int4, cutlass.Int32' in src


def test_eager_quantizer_outputs_int4_bytes():
    kernel = EAGER["eager_int4_row_quant"]()
    src = kernel.get_kernel_source()
    assert "tcfp4.pack(" in src and "tcfp4.encode_int4(" in src


def test_splitk_guards_the_ragged_k_step_and_adds_atomically():
    src = _body("int4_gemm_splitk_atomic")
    assert "< 576:" in src  # the step past K: zero-filled element by element
    assert "tc_ld" in src and "= cutlass.Uint8(0)" in src
    assert "tca.atomic_add(C, " in src


def test_gqa_decode_dequantizes_kv_into_float16_tiles():
    src = _body("gqa_decode_uint4_kv_gemm")
    assert "tcfp4.decode_uint4(" in src and "decode_int4" not in src
    assert src.count("tcm.gemm_warp(") == 2


# ---- GPU ------------------------------------------------------------------------------------------
def _pack(codes):
    """Two 4-bit codes a byte, element 2k in the low nibble (TileLang's packing)."""
    c = codes.to(torch.int16) & 0xF
    return (c[..., ::2] | (c[..., 1::2] << 4)).to(torch.uint8).contiguous()


def _unpack(packed, signed):
    b = packed.view(torch.uint8).to(torch.int16)
    c = torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)
    return torch.where(c > 7, c - 16, c) if signed else c


@pytest.mark.gpu
def test_awq_on_gpu():
    torch.manual_seed(0)
    M, N, K, g = 128, 256, 512, 64
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    q = torch.randint(0, 16, (N, K), device="cuda")
    z = torch.randint(0, 16, (N, K // g), device="cuda")
    s = (torch.rand(N, K // g, device="cuda") * 0.02 + 0.005).half()
    C = P.awq_w4a16_group_gemm()(A, _pack(q), s, _pack(z))
    W = (q.half() - z.repeat_interleave(g, 1).half()) * s.repeat_interleave(g, 1)
    torch.testing.assert_close(C.float(), A.float() @ W.float().T, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gptq_on_gpu():
    torch.manual_seed(1)
    M, N, K, g = 128, 128, 256, 128
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    q = torch.randint(0, 16, (N, K), device="cuda")
    s = (torch.rand(N, K // g, device="cuda") * 0.02 + 0.005).half()
    C = P.gptq_packed_u8_gemm()(A, _pack(q), s)
    W = (q.half() - 8) * s.repeat_interleave(g, 1)
    torch.testing.assert_close(C.float(), A.float() @ W.float().T, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_w4a8_on_gpu():
    torch.manual_seed(2)
    M, N, K = 128, 128, 256
    A = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    w = torch.randint(-8, 8, (N, K), device="cuda")
    sa, sw = torch.rand(M, device="cuda") * 1e-3, torch.rand(N, device="cuda") * 1e-2
    C = P.w4a8_gemm_dequant_epilogue()(A, _pack(w).view(torch.int8), sa, sw)
    ref = (A.double() @ w.double().T) * sa.double()[:, None] * sw.double()[None, :]
    torch.testing.assert_close(C.float(), ref.float(), rtol=1e-2, atol=1e-3)


@pytest.mark.gpu
def test_int4_gemm_scaled_on_gpu():
    torch.manual_seed(3)
    M, N, K = 256, 256, 512
    a, b = (torch.randint(-8, 8, (r, K), device="cuda") for r in (M, N))
    rs, cs = (torch.rand(r, device="cuda", dtype=torch.float16) * 0.05 for r in (M, N))
    C = P.int4_gemm_scaled_fp16()(_pack(a).view(torch.int8), _pack(b).view(torch.int8), rs, cs)
    ref = (a.double() @ b.double().T) * rs.double()[:, None] * cs.double()[None, :]
    torch.testing.assert_close(C.float(), ref.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_kv_quant_on_gpu():
    torch.manual_seed(4)
    Kx = torch.randn(200, 4, 128, device="cuda", dtype=torch.float16)
    Kx[7, 2] = 0  # an all-zero row: scale 1
    Kq, Ks = P.kv_int4_quant_write()(Kx)
    amax = Kx.float().abs().amax(-1)
    scale = torch.where(amax > 0, amax / 7, torch.ones_like(amax))
    torch.testing.assert_close(Ks, scale)
    ref = torch.clamp(torch.round(Kx.float() / scale[..., None]), -8, 7)
    diff = (_unpack(Kq, True).float() - ref).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3  # a tie decided by one ulp


@pytest.mark.gpu
def test_decode_attn_int4_on_gpu():
    torch.manual_seed(5)
    B, H, S, D = 2, 8, 512, 128
    Q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
    kc, vc = (torch.randint(-8, 8, (B, S, H, D), device="cuda") for _ in range(2))
    ks, vs = (torch.rand(B, S, H, device="cuda") * 0.2 + 0.05 for _ in range(2))
    O = P.decode_attn_int4_kv()(Q, _pack(kc).view(torch.int8), ks, _pack(vc).view(torch.int8), vs)
    Kf, Vf = kc.float() * ks[..., None], vc.float() * vs[..., None]
    sc = torch.einsum("bhd,bshd->bhs", Q.float(), Kf) / D ** 0.5
    ref = torch.einsum("bhs,bshd->bhd", sc.softmax(-1), Vf)
    torch.testing.assert_close(O.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_uint4_nibble_shuffle_on_gpu():
    torch.manual_seed(6)
    x = torch.randint(0, 16, (64, 256), device="cuda")
    Y, Z = P.uint4_nibble_shuffle()(_pack(x))
    sw = x.view(64, 128, 2).flip(-1).reshape(64, 256)
    assert torch.equal(_unpack(Y, False), torch.clamp(sw, max=12).to(torch.int16))
    assert torch.equal(_unpack(Z, False), torch.where(x % 2 == 1, x, 15).to(torch.int16))


@pytest.mark.gpu
def test_requant_thread_return_on_gpu():
    torch.manual_seed(7)
    R, N = 1000, 64
    x = torch.randint(-8, 8, (R, N), device="cuda")
    s_in = torch.rand(R, device="cuda") + 0.5
    s_out = torch.rand(R, device="cuda") + 0.5
    s_out[::13] = 0
    Y = torch.full((R, N // 2), 0x55, device="cuda", dtype=torch.int8)
    P.int4_requant_thread_return()(_pack(x).view(torch.int8), s_in, s_out, Y)
    f = s_in / torch.where(s_out == 0, torch.ones_like(s_out), s_out)
    ref = torch.clamp(torch.round(x.float() * f[:, None]), -8, 7)
    ref[s_out == 0] = 0
    diff = (_unpack(Y, True).float() - ref).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3


@pytest.mark.gpu
def test_w4a8_macro_on_gpu():
    torch.manual_seed(8)
    M, N, K = 128, 128, 256
    A = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    w = torch.randint(-8, 8, (N, K), device="cuda")
    C = P.w4a8_u8_macro_gemm()(A, _pack(w))
    assert torch.equal(C, (A.double() @ w.double().T).to(torch.int32))


@pytest.mark.gpu
def test_gemv_uint4_on_gpu():
    torch.manual_seed(9)
    N, K, g = 1024, 2048, 128
    x = torch.randn(K, device="cuda", dtype=torch.float16)
    q = torch.randint(0, 16, (N, K), device="cuda")
    s = (torch.rand(N, K // g, device="cuda") * 0.02).half()
    y = P.gemv_w4a16_uint4()(x, _pack(q), s)
    W = (q.float() - 8) * s.float().repeat_interleave(g, 1)
    torch.testing.assert_close(y.float(), W @ x.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_dynamic_m_int4_gemm_on_gpu():
    torch.manual_seed(10)
    kernel = P.int4_gemm_dynamic_m_pipelined()
    for M in (200, 64, 33):
        a, b = torch.randint(-8, 8, (M, 512), device="cuda"), torch.randint(-8, 8, (256, 512), device="cuda")
        bias = torch.randint(-100, 100, (256,), device="cuda", dtype=torch.int32)
        C = kernel(_pack(a).view(torch.int8), _pack(b).view(torch.int8), bias)
        ref = torch.clamp(a.double() @ b.double().T, min=0) + bias.double()
        assert torch.equal(C, ref.to(torch.int32))


@pytest.mark.gpu
def test_eager_int4_quant_on_gpu():
    torch.manual_seed(11)
    X = torch.randn(100, 256, device="cuda")
    Q, S = P.eager_int4_row_quant(X)
    scale = X.abs().amax(-1).clamp(min=1e-6) / 7
    torch.testing.assert_close(S, scale)
    ref = torch.clamp(torch.round(X / scale[:, None]), -8, 7)
    diff = (_unpack(Q, True).float() - ref).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3


@pytest.mark.gpu
def test_splitk_int4_on_gpu():
    torch.manual_seed(12)
    M, N, K = 128, 128, 576
    a, b = torch.randint(-8, 8, (M, K), device="cuda"), torch.randint(-8, 8, (N, K), device="cuda")
    C = torch.zeros(M, N, device="cuda", dtype=torch.int32)
    P.int4_gemm_splitk_atomic()(_pack(a).view(torch.int8), _pack(b).view(torch.int8), C)
    assert torch.equal(C, (a.double() @ b.double().T).to(torch.int32))


@pytest.mark.gpu
def test_gqa_decode_uint4_on_gpu():
    torch.manual_seed(13)
    B, H, G, S, D = 2, 32, 8, 1024, 128
    Q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
    kc, vc = (torch.randint(0, 16, (B, G, S, D), device="cuda") for _ in range(2))
    ks, vs = ((torch.rand(B, G, S, device="cuda") * 0.1 + 0.02).half() for _ in range(2))
    L = torch.tensor([1000, 517], device="cuda", dtype=torch.int32)
    O = P.gqa_decode_uint4_kv_gemm()(Q, _pack(kc), ks, _pack(vc), vs, L)
    Kf = ((kc.half() - 8) * ks[..., None]).float().repeat_interleave(H // G, 1)
    Vf = ((vc.half() - 8) * vs[..., None]).float().repeat_interleave(H // G, 1)
    sc = torch.einsum("bhd,bhsd->bhs", Q.float(), Kf) / D ** 0.5
    sc = sc.masked_fill(torch.arange(S, device="cuda")[None, None, :] >= L[:, None, None], float("-inf"))
    ref = torch.einsum("bhs,bhsd->bhd", sc.softmax(-1), Vf)
    torch.testing.assert_close(O.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_w4afp8_on_gpu():
    torch.manual_seed(14)
    M, N, K = 128, 128, 256
    A = (torch.randn(M, K, device="cuda") * 2).to(torch.float8_e4m3fn)
    w = torch.randint(-8, 8, (N, K), device="cuda")
    sw = torch.rand(N, device="cuda") * 0.1
    C = P.w4afp8_gemm()(A, _pack(w).view(torch.int8), sw)
    ref = (A.float() @ w.float().T) * sw[None, :]
    torch.testing.assert_close(C.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_int4_hand_stages_kparts_on_gpu():
    torch.manual_seed(15)
    M, N, K = 256, 128, 1024
    a, b = torch.randint(0, 16, (M, K), device="cuda"), torch.randint(-8, 8, (N, K), device="cuda")
    C = P.int4_gemm_hand_stages_kparts()(_pack(a), _pack(b).view(torch.int8))
    assert torch.equal(C, (a.double() @ b.double().T).to(torch.int32))
