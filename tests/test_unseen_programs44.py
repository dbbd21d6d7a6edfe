"""A forty-fourth set of programs in TileLang's idioms (tests/unseen_programs44.py): the
language surface TileLang's git HEAD (August 2026) uses in what it wrote since March 2026 --
eager kernels with T.annotate_pass_configs in the body, reducer v2, multi-staged shared
buffers (a T.ws producer / consumer ring on T.tma_copy and mbarriers; an unrolled stage loop
of explicit T.wgmma_gemm), a persistent GEMM on T.PersistentTileScheduler, T.cumsum /
T.cummax(reverse=True), block votes with T.ballot_sync and T.__ffs, a T.alloc_global
workspace shared by two launches, named barriers, T.extract_lane, T.copy(...,
prefer_instruction="cp_async") with T.annotate_min_blocks_per_sm, T.unroll(explicit=True) /
T.unroll(unroll_factor=) with T.pow(x, -2) and T.__exp, T.annotate_safe_value on a ragged
copy, and a dtype-changing T.view with T.transpose.

CPU: each builds to an sm_90a cubin (and an sm_80 one where it uses no Hopper-only form),
and what decides its result is read in the generated source.  All built as first written
but staged_unrolled_wgmma: a T.gemm inside a run-time ``if`` inside T.unroll failed to
build ("operand #0 does not dominate this use": the wgmma helper set ACCUMULATE on the
tiled MMA object shared by the unrolled copies; tests/test_gemm_unrolled_branches.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs44.py``)."""

import re

import pytest
import torch

import tilecute
from tilecute.codegen.source import CodegenError
import rounds
import unseen_programs44 as P

f16, bf16 = torch.float16, torch.bfloat16


def _z(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


# each program compiled with its defaults, or (eager kernels) from CPU tensors
BUILDS = {
    "layernorm_rows_with_stats": lambda: P.layernorm_rows_with_stats(),
    "act_quant_fp8_groups": lambda: P.act_quant_fp8_groups.compile(_z(100, 512, dtype=bf16)),
    "gemv_reducer_v2": lambda: P.gemv_reducer_v2(),
    "ws_gemm_staged_ring": lambda: P.ws_gemm_staged_ring.compile(_z(256, 512, dtype=f16),
                                                                 _z(256, 512, dtype=f16)),
    "staged_unrolled_wgmma": lambda: P.staged_unrolled_wgmma(),
    "persistent_scheduler_gemm": lambda: P.persistent_scheduler_gemm(),
    "row_prefix_sum_suffix_max": lambda: P.row_prefix_sum_suffix_max(),
    "block_vote_stats": lambda: P.block_vote_stats(),
    "split_kv_decode_workspace": lambda: P.split_kv_decode_workspace(),
    "named_barrier_tile_handoff": lambda: P.named_barrier_tile_handoff(),
    "complex_mul_lanes": lambda: P.complex_mul_lanes(),
    "row_scale_cp_async": lambda: P.row_scale_cp_async(),
    "horner_rational": lambda: P.horner_rational(),
    "maxpool_right_window_safe_tail": lambda: P.maxpool_right_window_safe_tail(),
    "exponent_bits_transposed": lambda: P.exponent_bits_transposed(),
}
# no sm_80 cubin: Hopper-only forms (T.ws + T.tma_copy, T.wgmma_gemm), and float8 casts
# (sm_89+: refused on sm_80, test_fp8_cast_is_refused_on_sm80)
SM90_ONLY = {"ws_gemm_staged_ring", "staged_unrolled_wgmma", "act_quant_fp8_groups"}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = BUILDS[name]().get_kernel_source()
    return "\n".join(part.split("\n@cute.jit", 1)[0] for part in src.split("\n@cute.kernel\n")[1:])


test_every_program_is_listed = rounds.every_public_program_is_listed(P, BUILDS)
test_program_builds_a_cubin = rounds.builds_a_cubin(sorted(BUILDS), lambda n: BUILDS[n]())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(BUILDS) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_fp8_cast_is_refused_on_sm80(tmp_path):
    tir = P.act_quant_fp8_groups.get_tir(X=_z(100, 512, dtype=bf16))
    with pytest.raises(CodegenError,
                       match=r"prim_func 'act_quant_fp8_groups': a cast from float32 to "
                             r"float8_e4m3: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(tir, "sm_80", out_dir=str(tmp_path))


def test_layernorm_centres_before_the_variance_and_saves_the_stats():
    src = _body("layernorm_rows_with_stats")
    assert src.count("tcr.block_allreduce(") == 2  # the mean, then the centred squares
    assert re.search(r"var\[\w+\] = cute\.math\.rsqrt\(var\[\w+\] / cutlass\.Float32\(1024\.0\) "
                     r"\+ cutlass\.Float32\(1e-05\)\)", src)
    assert re.search(r"if bx \* 2 \+ \w+ < 300:\s+Mean\[bx \* 2 \+ \w+\] = tot\[\w+\]\s+"
                     r"Rstd\[bx \* 2 \+ \w+\] = var\[\w+\]", src)


def test_act_quant_takes_its_own_fast_math_and_clamps_to_fp8():
    src = _body("act_quant_fp8_groups")
    # T.annotate_pass_configs({TL_ENABLE_FAST_MATH: True}): divisions become approximate
    # reciprocals, as TileLang's fast math makes them
    assert "cute.arch.fmax(amax[i], cutlass.Float32(0.0001)) * cute.arch.rcp_approx(cutlass.Float32(448.0))" in src
    assert "cutlass.Float8E4M3FN(cutlass.select_(cutlass.Boolean(cute.math.isnan(" in src  # T.clamp keeps NaN
    assert "S[bm * 32 + i, g] = amax[i]" in src


def test_gemv_reducer_updates_then_finalizes_once():
    src = _body("gemv_reducer_v2")
    loop = src.split("for ko in cutlass.range(0, 16):", 1)[1].split("# T.finalize_reducer(acc)", 1)[0]
    assert re.search(r"acc\[i\] = acc\[i\] \+ cutlass\.Float32\(\w+\[\w+\]\) \* cutlass\.Float32\(\w+\[\w+\]\)", loop)
    assert "tcr.block_allreduce(acc, \"sum\", acc_scratch" in src and "out[" in src


def test_ws_ring_waits_and_arrives_per_stage():
    src = _body("ws_gemm_staged_ring")
    assert "tct.init_barriers(bars, 6, 128)" in src
    producer = src.split("if tc_tid >= 128:  # T.ws(1)", 1)[1].split("if tc_tid < 128:", 1)[0]
    assert "tct.wait(bars + (st + 3), ko // 3 & 1 ^ 1)" in producer  # the empty barrier
    assert producer.count("arrive=False)") == 2 and "tct.arrive(bars + st)" in producer
    consumer = src.split("if tc_tid < 128:  # T.ws(0)", 2)[2]
    assert consumer.index("tct.wait(bars + st, ko // 3 & 1)") < consumer.index("tcm.gemm(") < \
        consumer.index("tct.arrive(bars + (st + 3))")


def test_staged_unrolled_wgmma_skips_the_missing_stage():
    src = _body("staged_unrolled_wgmma")
    stage = src.split("for stage in cutlass.range_constexpr(0, 2):", 1)[1]
    assert "ko = it * 2 + stage" in stage and "if ko < 7:" in stage
    assert "wait=None)" in stage and "tcm.wait_batches(0)" in stage  # T.wgmma_gemm, T.wait_wgmma
    assert "tc_smem + cute.assume(0 + (stage) * 8192, divby=1024)" in stage  # A_s[stage, :, :]


def test_persistent_scheduler_walks_tiles_by_workers():
    src = _body("persistent_scheduler_gemm")
    assert "linear_idx[0] = block_id" in src and "while linear_idx[0] < 12:" in src
    assert "linear_idx[0] = linear_idx[0] + 5" in src  # next_tile: the next wave
    assert "tm = m_idx[0]" in src and "tn = n_idx[0]" in src


def test_scans_run_forward_and_reversed():
    src = _body("row_prefix_sum_suffix_max")
    fwd, rev = src.split("# T.cummax(xs, rs, dim=1, reverse=True)", 1)
    assert "# T.cumsum(xs, cs, dim=1)" in fwd and '"sum"' in fwd and "255 - (" not in fwd
    assert '"max"' in rev and "255 - (" in rev  # a suffix max: positions read from the end


def test_votes_count_flag_and_find_the_first_negative_lane():
    src = _body("block_vote_stats")
    assert "tcvote.syncthreads_count(v > cutlass.Float32(0.0), 0, 0)" in src
    assert "tcvote.syncthreads_or(cutlass.Boolean(cute.math.isnan(v)), 0, 0)" in src
    assert "cute.arch.vote_ballot_sync(v < cutlass.Float32(0.0))" in src
    assert "tcmath.ffs(cutlass.Int32(neg))" in src


def test_split_kv_workspace_is_shared_by_both_launches():
    k = BUILDS["split_kv_decode_workspace"]()
    src = _body("split_kv_decode_workspace")
    assert src.count("part_ptr: cute.Pointer, lse_ptr: cute.Pointer)") == 2
    assert re.search(r"lse\[b, h, sp\] = cute\.math\.log2\(l\[0\]\) \+ m\[0\] \* cutlass\.Float32\(", src)
    assert "w[i] = lse[b_1_, h_1_, i]" in src
    assert [p.name for p in k.params] == ["Q", "Kc", "Vc", "Out"]  # the workspace is not an argument


def test_named_barriers_hand_off_without_a_block_barrier():
    src = _body("named_barrier_tile_handoff")
    assert "cute.arch.barrier_arrive(barrier_id=1, number_of_threads=256)" in src
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=256)" in src
    assert "cute.arch.barrier(barrier_id=2, number_of_threads=256)" in src
    assert "cute.arch.barrier_arrive(barrier_id=2, number_of_threads=256)" in src
    assert "sync_threads()" not in src  # a block-wide barrier in one warpgroup's branch would hang


def test_extract_lane_reads_each_part():
    src = _body("complex_mul_lanes")
    for part, lane in (("ar", "va_0_"), ("ai", "va_1_"), ("br", "vb_0_"), ("bi", "vb_1_")):
        assert f"{part} = {lane}" in src
    assert "C[2 * i] = ar * br - ai * bi" in src and "C[2 * i + 1] = ar * bi + ai * br" in src


def test_cp_async_stages_and_min_blocks():
    k = BUILDS["row_scale_cp_async"]()
    assert "min_blocks_per_mp=2" in k.get_kernel_source()
    src = _body("row_scale_cp_async")
    assert src.count("tcc.copy_async(") == 3 and "cute.arch.cp_async_wait_group(2)" in src


def test_horner_unrolls_explicitly_and_keeps_the_negative_power():
    src = _body("horner_rational")
    assert "for e in cutlass.range(0, 4, unroll=2):" in src  # unroll_factor=2
    assert re.search(r"for c in cutlass\.range_constexpr\(0, 6\):\s+acc\[0\] = acc\[0\] \* x \+ Cf\[c\]", src)
    assert "cute.math.pow(x, cutlass.Float32(-2.0))" in src
    # T.__exp is e ** x (TileLang HEAD's fix): exp2 of x * log2(e)
    assert "cute.math.exp2((x * cutlass.Float32(-1.0) * x) * cutlass.Float32(1.4426950408889634)" in src


def test_maxpool_tail_reads_minus_infinity():
    src = _body("maxpool_right_window_safe_tail")
    assert re.search(r"(tc_ld\d+) = cutlass\.Float32\(float\(\"-inf\"\)\)\s+if bx \* 128 \+ "
                     r"\(i1 \+ tc_lane\d+\) < 1000:\s+\1 = X\[", src)


def test_view_reinterprets_the_tile_and_transpose_swaps_it():
    src = _body("exponent_bits_transposed")
    assert "xs = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float32)" in src
    assert "bits = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Int32)" in src
    assert ">> 23 & 255) - 127" in src
    assert re.search(r"et\[(\w+) \* 64 \+ \((\w+) \^ \(\1 & 31\)\)\] = es\[\2 \* 64 \+ \1\]", src)


# ---- GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_layernorm_on_gpu():
    torch.manual_seed(0)
    X = torch.randn(300, 1024, device="cuda", dtype=f16) * 2 + 1
    g = torch.randn(1024, device="cuda", dtype=f16)
    b = torch.randn(1024, device="cuda", dtype=f16)
    Y, mean, rstd = P.layernorm_rows_with_stats()(X, g, b)
    x = X.float()
    m = x.mean(-1)
    r = torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)
    torch.testing.assert_close(mean, m, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rstd, r, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(Y.float(), (x - m[:, None]) * r[:, None] * g.float() + b.float(),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_act_quant_on_gpu():
    torch.manual_seed(1)
    X = torch.randn(100, 512, device="cuda", dtype=bf16) * 3
    Y, S = P.act_quant_fp8_groups(X)
    x = X.float().view(100, 4, 128)
    s = x.abs().amax(-1).clamp(min=1e-4) / 448.0
    torch.testing.assert_close(S, s, rtol=1e-5, atol=1e-7)
    ref = (x / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).float().view(100, 512)
    torch.testing.assert_close(Y.float(), ref, rtol=0.07, atol=0.02)  # fp8 rounding of x / s


@pytest.mark.gpu
def test_gemv_reducer_on_gpu():
    torch.manual_seed(2)
    A = torch.randn(1024, 2048, device="cuda", dtype=f16)
    x = torch.randn(2048, device="cuda", dtype=f16)
    torch.testing.assert_close(P.gemv_reducer_v2()(A, x), A.float() @ x.float(), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_ws_gemm_staged_ring_on_gpu():
    torch.manual_seed(3)
    A = torch.randn(256, 512, device="cuda", dtype=f16)
    B = torch.randn(384, 512, device="cuda", dtype=f16)
    torch.testing.assert_close(P.ws_gemm_staged_ring(A, B).float(), A.float() @ B.float().T,
                               rtol=2e-2, atol=1e-1)


@pytest.mark.gpu
def test_staged_unrolled_wgmma_on_gpu():
    torch.manual_seed(4)
    A = torch.randn(256, 448, device="cuda", dtype=f16)
    B = torch.randn(256, 448, device="cuda", dtype=f16)
    torch.testing.assert_close(P.staged_unrolled_wgmma()(A, B), A.float() @ B.float().T,
                               rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_persistent_scheduler_gemm_on_gpu():
    torch.manual_seed(5)
    A = torch.randn(512, 256, device="cuda", dtype=f16)
    B = torch.randn(256, 384, device="cuda", dtype=f16)
    torch.testing.assert_close(P.persistent_scheduler_gemm()(A, B), A.float() @ B.float(),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_scans_on_gpu():
    torch.manual_seed(6)
    X = torch.randn(96, 256, device="cuda")
    C, R = P.row_prefix_sum_suffix_max()(X)
    torch.testing.assert_close(C, X.cumsum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(R, X.flip(1).cummax(1).values.flip(1))


@pytest.mark.gpu
def test_block_votes_on_gpu():
    torch.manual_seed(7)
    X = torch.randn(40 * 256, device="cuda")
    X[X.abs() < 0.3] = 0.0
    X[5 * 256 + 17] = float("nan")
    X[9 * 256:10 * 256] = X[9 * 256:10 * 256].abs() + 1  # a block without negatives
    pos, nan, first = P.block_vote_stats()(X)
    xb = X.view(40, 256)
    assert pos.tolist() == (xb > 0).sum(1).int().tolist()
    assert nan.tolist() == xb.isnan().any(1).int().tolist()
    neg = (X < 0).view(40 * 8, 32)
    want = torch.where(neg.any(1), neg.int().argmax(1) + 1, 0)
    assert first.tolist() == want.tolist()


@pytest.mark.gpu
def test_split_kv_decode_on_gpu():
    torch.manual_seed(8)
    Q = torch.randn(2, 4, 64, device="cuda", dtype=f16)
    K = torch.randn(2, 1024, 4, 64, device="cuda", dtype=f16)
    V = torch.randn(2, 1024, 4, 64, device="cuda", dtype=f16)
    out = P.split_kv_decode_workspace()(Q, K, V)
    s = torch.einsum("bhd,bshd->bhs", Q.float(), K.float()) / 8.0
    ref = torch.einsum("bhs,bshd->bhd", s.softmax(-1), V.float())
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_named_barrier_handoff_on_gpu():
    torch.manual_seed(9)
    X = torch.randn(6, 512, device="cuda")
    sq = X * X
    torch.testing.assert_close(P.named_barrier_tile_handoff()(X), sq + sq.roll(-1, dims=1))


@pytest.mark.gpu
def test_complex_mul_on_gpu():
    torch.manual_seed(10)
    A = torch.randn(8192, device="cuda")
    B = torch.randn(8192, device="cuda")
    want = torch.view_as_real(torch.view_as_complex(A.view(-1, 2)) * torch.view_as_complex(B.view(-1, 2)))
    torch.testing.assert_close(P.complex_mul_lanes()(A, B), want.reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_row_scale_cp_async_on_gpu():
    torch.manual_seed(11)
    X = torch.randn(512, 1024, device="cuda", dtype=f16)
    s = torch.rand(512, device="cuda") + 0.5
    torch.testing.assert_close(P.row_scale_cp_async()(X, s).float(), X.float() * s[:, None],
                               rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_horner_on_gpu():
    torch.manual_seed(12)
    X = torch.rand(8192, device="cuda") * 2 + 0.25
    Cf = torch.randn(6, device="cuda")
    p = torch.zeros_like(X)
    for c in Cf:
        p = p * X + c
    want = p + 0.25 / (X * X) + 0.5 * torch.exp(-X * X)
    torch.testing.assert_close(P.horner_rational()(X, Cf), want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_maxpool_on_gpu():
    torch.manual_seed(13)
    X = torch.randn(1000, device="cuda") - 3  # all below 0 near the end: padding must be -inf
    pad = torch.nn.functional.pad(X, (0, 2), value=float("-inf"))
    torch.testing.assert_close(P.maxpool_right_window_safe_tail()(X), pad.unfold(0, 3, 1).amax(1))


@pytest.mark.gpu
def test_exponent_bits_on_gpu():
    torch.manual_seed(14)
    X = torch.randn(128, 64, device="cuda") * 1000
    X[X == 0] = 1.0
    want = ((X.view(torch.int32) >> 23) & 255) - 127
    assert torch.equal(P.exponent_bits_transposed()(X), want.T.contiguous())
