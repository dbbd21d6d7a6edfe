"""A fifty-first set of programs in TileLang's idioms (tests/unseen_programs51.py): attention
forwards at head dims 80, 96, 112, 160, 192 (and 192 / 128) and 256, block_M 64 / 128 on 4 or
8 warps with block_N 32, 48, 80, 112 and 176 -- soft-capping, ALiBi slopes per head, a
left / right window with the loop cut to the band, causal bottom-right with Sk > Sq, cross
attention over T.dynamic lengths, varlen GQA over cu_seqlens, learned sinks, a relative
position bias table, fp8 e4m3 with descale factors, and the LSE in base 2 or base e; then
four in the shape of TileLang's own examples (sinks with a window under num_stages=0 with
T.annotate_layout / T.use_swizzle, varlen with separate query / key offsets and slice
copies, Q pre-scaled in registers, the sink as the softmax's start with a bias tile in
registers).  Each also lowers in TileLang 0.1.15 (tilelang.lower on the CPU).

CPU: each builds an sm_90a cubin (and an sm_80 one but the fp8 program), and what decides its
result is read in the generated source.  All built and read right as first written, but for
the fp8 program's first form: P kept in fp8 registers against V's fp8 tile as stored, (S, D)
(MN-major).  TileLang 0.1.15 refuses it too (a layout conflict between the scores and their
fp8 cast); tilecute's refusal named the loop and fragments but not why (the second T.gemm
runs on SIMT, so its accumulator has no MMA rows) and now says so.  The program here takes V
transposed and P through shared memory, the form TileLang 0.1.15 lowers.
GPU: each matches a torch reference in float32 at sequence lengths 1, 63, 300 and 1000
(``pytest -q -m gpu tests/test_unseen_programs51.py``)."""

import math
import re

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.codegen.source import CodegenError
from tilecute.transform.layout_inference import LayoutError
import rounds
import unseen_programs51 as P

f16, bf16 = torch.float16, torch.bfloat16

NAMES = ["fa_d112_alibi_causal", "fa_d160_window_lr", "fa_d256_cross_dynamic",
         "fa_d80_softcap_bm128_w8", "fa_dqk192_dv128_bottom_right", "fa_fp8_e4m3_descale",
         "fa_gqa_d192_bn48_lse_e", "fa_q_in_registers_d96", "fa_relpos_bias_d80",
         "fa_sink_start_bias_frag_d96", "fa_sink_window_stage0", "fa_sinks_bn176_lse2",
         "fa_varlen_gqa_causal_d96", "fa_varlen_qk_slices_d112"]
SM90_ONLY = {"fa_fp8_e4m3_descale"}  # fp8 GEMMs (sm_89+)

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name, **kw):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    return rounds.kernel_body(getattr(P, name)(**kw))


test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_fp8_attention_is_refused_on_sm80(tmp_path):
    with pytest.raises(CodegenError, match=r"unseen_programs51\.py:\d+: prim_func 'main': T\.gemm on "
                                           r"float8_e4m3 operands: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(P.fa_fp8_e4m3_descale.get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- what decides each result, in the generated source -----------------------------------------
def test_softcap_tanh_before_a_base_e_softmax_on_eight_warps():
    src = _body("fa_d80_softcap_bm128_w8")
    # 128 rows over two warpgroups, 48-key tiles; P from registers into the second wgmma
    assert 'tcm.accumulator("wgmma", (2, 1), (128, 48)' in src
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, True, (2, 1), 80, ' \
           'a_regs=True)' in src
    assert re.search(r"cutlass\.select_\(k \* 48 \+ \(j \+ tc_lane\d+\) < 300, cute\.math\.tanh\(acc_s\[\w+ \+ \w+\] "
                     r"\* cutlass\.Float32\(0\.1118\d*\) / cutlass\.Float32\(30\.0\)\) \* cutlass\.Float32\(30\.0\)", src)
    assert 'tcrow.reduce_rows(acc_s, scores_max, "max", clear=False)' in src
    assert "cute.math.exp(scores_max_prev[" in src and "cute.math.exp2" not in src
    assert re.search(r"if bx \* 128 \+ (\w+) < 300:\s+LSE\[bz, by, bx \* 128 \+ \1\] = scores_max\[\w+\] \+ "
                     r"cute\.math\.log\(logsum\[\w+\]\)", src)


def test_alibi_slope_per_head_and_an_explicit_running_max():
    src = _body("fa_d112_alibi_causal")
    assert "slope[0] = cute.math.exp2(cutlass.Float32(-8.0) * cutlass.Float32(by + 1) / cutlass.Float32(4.0))" in src
    assert "hi = cutlass.min(3, ((bx + 1) * 64 + 112 - 1) // 112)" in src  # the loop stops at the diagonal
    assert re.search(r"cutlass\.select_\(kj <= qi and kj < 300, s\[\w+ \+ \w+\] \* cutlass\.Float32\(0\.1363\d*\) - "
                     r"slope\[0\] \* cutlass\.Float32\(1\.44269504\) \* cutlass\.Float32\(qi - kj\)", src)
    assert 'tcrow.reduce_rows(s, m_tile, "max", clear=True)' in src
    assert re.search(r"m_tile\[(\w+)\] = cute\.arch\.fmax\(m\[\1\], m_tile\[\1\]\)\s+.*\s+alpha\[\1\] = "
                     r"cute\.math\.exp2\(m\[\1\] - m_tile\[\1\]\)\s+.*\s+m\[\1\] = m_tile\[\1\]", src)


def test_window_cuts_the_loop_and_guards_empty_rows():
    src = _body("fa_d160_window_lr")
    assert "lo = cutlass.max(0, (bx * 64 - 100) // 32)" in src
    assert "hi = cutlass.min(10, ((bx + 1) * 64 + 20 + 32 - 1) // 32)" in src
    assert "for tc_j0 in cutlass.range(0, hi - lo):" in src  # the producer's three-stage ring
    assert "(tc_j0 % 3) * 10240" in src and "(0, (lo + tc_j0) * 32, by, bz)" in src
    assert re.search(r"k \* 32 \+ \(j \+ tc_lane\d+\) >= bx \* 64 \+ i - 100 and k \* 32 \+ \(j \+ tc_lane\d+\) "
                     r"<= bx \* 64 \+ i \+ 20 and k \* 32 \+ \(j \+ tc_lane\d+\) < 300", src)
    assert 'm_safe[tc_q8] = cutlass.select_(m[tc_q8] == cutlass.Float32(float("-inf")), cutlass.Float32(0.0), ' \
           'm[tc_q8])' in src


def test_bottom_right_causal_with_a_wider_qk_and_a_base2_lse():
    src = _body("fa_dqk192_dv128_bottom_right")
    assert "loop_range = cutlass.min(6, ((bx + 1) * 128 + 37 + 64 - 1) // 64)" in src
    assert re.search(r"cutlass\.select_\(bx \* 128 \+ i \+ 37 >= k \* 64 \+ \(j \+ tc_lane\d+\)", src)
    assert 'tcm.accumulator("wgmma", (2, 1), (128, 64)' in src and 'tcm.accumulator("wgmma", (2, 1), (128, 128)' in src
    assert "chunks=3, step=64" in src and "chunks=2, step=64" in src  # K 192 wide, V 128 wide
    assert re.search(r"logsum\[(\w+)\] = cute\.math\.log2\(logsum\[\1\]\) \+ scores_max\[\1\] \* "
                     r"cutlass\.Float32\(0\.1041\d*\)", src)
    assert re.search(r"if bx \* 128 \+ (\w+) < 300:\s+LSE\[bz, by, bx \* 128 \+ \1\] = logsum\[", src)


def test_cross_attention_masks_the_dynamic_key_tail():
    k = P.fa_d256_cross_dynamic()
    src = rounds.kernel_body(k)
    assert "for k in cutlass.range(0, (Sk + 32 - 1) // 32):" in src
    assert re.search(r"cutlass\.select_\(k \* 32 \+ \(j \+ tc_lane\d+\) < Sk, s\[", src)
    assert 'tcm.accumulator("wgmma", (1, 1), (64, 256)' in src


def test_varlen_reads_each_sequence_from_its_start():
    src = _body("fa_varlen_gqa_causal_d96")
    assert "start = cu_seqlens[bz]" in src and "seqlen = cu_seqlens[bz + 1] - start" in src
    assert "if bx * 64 < seqlen:" in src
    assert "loop_range = cutlass.min((seqlen + 80 - 1) // 80, ((bx + 1) * 64 + 80 - 1) // 80)" in src
    assert "(start + k * 80 + j) * 192 + kv_head * 96" in src  # the query head's KV head
    assert re.search(r"if bx \* 64 \+ (\w+) < seqlen:\s+if start \+ bx \* 64 \+ \1 >= 0 and start \+ bx \* 64 \+ \1 "
                     r"< total:\s+O\[start \+ bx \* 64 \+ \1, by, \w+\] = O_shared\[", src)


def test_sinks_join_the_denominator_after_the_loop():
    src = _body("fa_sinks_bn176_lse2")
    assert 'tcm.accumulator("wgmma", (2, 1), (128, 176)' in src
    assert "end = cutlass.min(2, ((bx + 1) * 128 + 176 - 1) // 176)" in src
    tail = src.split("tcrow.combine_rows(logsum", 1)[1]
    assert re.search(r"logsum\[(\w+)\] = logsum\[\1\] \+ cute\.math\.exp2\(sinks\[\1\] \* cutlass\.Float32\(1\.44269504\) "
                     r"- scores_max\[\1\] \* cutlass\.Float32\(0\.1275\d*\)\)", tail)
    assert tail.index("sinks[") < tail.index("/ logsum[") < tail.index("cute.math.log2(logsum[")


def test_relative_bias_is_gathered_only_where_the_score_is_kept():
    src = _body("fa_relpos_bias_d80")
    assert re.search(r"if kj < 300 and qi < 300:\s+(tc_ld\d+) = Bias\[by, kj - qi \+ 300 - 1\]\s+"
                     r"s\[\w+ \+ \w+\] = cutlass\.select_\(kj < 300 and qi < 300, s\[\w+ \+ \w+\] \* "
                     r"cutlass\.Float32\(0\.1118\d*\) \+ \1,", src)
    assert "cute.math.exp(m_prev[" in src


def test_fp8_gemms_are_k_major_wgmma_with_the_descales():
    src = _body("fa_fp8_e4m3_descale")
    assert src.count('tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32, '
                     'False, False') == 2  # Q K^T and P Vt^T, both K-major
    assert "qk_scale[0] = q_descale[by] * k_descale[by] * cutlass.Float32(0.1275" in src
    assert "acc_s[tc_r10 + tc_lane11] * qk_scale[0]" in src
    assert re.search(r"P_shared\.iterator \+ cute\.assume\(\(i\d+ \* 64 \+ i\d+\)", src)  # P staged as fp8
    assert "Vt.iterator + cute.assume(bz * 76800 + by * 38400 + i12 * 300 + (k + 1) * 64 + i13, divby=4)" in src
    assert "* v_descale[by] / logsum[" in src


def test_gqa_lse_in_natural_log_units():
    src = _body("fa_gqa_d192_bn48_lse_e")
    assert "(tc_j0 % 3) * 18432" in src and "(0, by // 3, tc_j0 * 48, bz)" in src  # 3 stages, KV head by // 3
    assert re.search(r"logsum\[(\w+)\] = scores_max\[\1\] \* cutlass\.Float32\(0\.1041\d*\) \* "
                     r"cutlass\.Float32\(0\.69314718\) \+ cute\.math\.log\(logsum\[\1\]\)", src)


def test_sink_window_unpipelined_with_swizzles():
    src = _body("fa_sink_window_stage0")
    assert "panel_index" in src  # T.use_swizzle(10)
    assert 'tcrow.row_fragment("wgmma", (2, 1), 128, cutlass.Float16, tc_tid)' in src  # the fp16 sinks
    assert "end = cutlass.min(3, ((bx_1_ + 1) * 128 + 63 + 128 - 1) // 128)" in src
    assert "start = cutlass.max(0, (bx_1_ * 128 + 63 - 128) // 128)" in src
    assert "q_idx >= k_idx and q_idx < k_idx + 128, cutlass.Float32(0.0)" in src
    # num_stages=0: each tile's copy waited for in its own step, no TMA ring for K / V
    assert "tct.load(K_desc" not in src and "K_desc" not in src
    loop = src.split("for k in cutlass.range(start, start + (end - start)):", 1)[1]
    assert loop.index("cp_async_wait_group(0)") < loop.index("tcm.gemm(tc_mma0")
    assert re.search(r"cute\.math\.exp2\(cutlass\.Float32\(sinks\[\w+\]\) \* cutlass\.Float32\(1\.44269504\)", src)


def test_varlen_slices_start_at_each_sequence():
    src = _body("fa_varlen_qk_slices_d112")
    assert "offset = k_len - q_len" in src
    assert "(0, by, q_start + bx * 64)" in src and "(0, by // 2, k_start + tc_j0 * 64)" in src  # TMA boxes
    assert "cutlass.Float32(-1000000000.0), cutlass.Float32(0.0))" in src
    assert re.search(r"if bx \* 64 \+ (\w+) < q_len:\s+if q_start \+ bx \* 64 \+ \1 >= 0 and q_start \+ bx \* 64 \+ \1 "
                     r"< total_q:\s+LSE\[by, q_start \+ bx \* 64 \+ \1\] = logsum\[", src)


def test_q_prescaled_in_registers_feeds_the_first_gemm():
    src = _body("fa_q_in_registers_d96")
    assert "T.gemm(Q_frag, K_shared, acc_s)" in src
    assert src.count("a_regs=True)  # T.gemm(Q_frag, K_shared, acc_s)") == 2
    assert re.search(r"Q_frag\[(\w+) \+ (\w+)\] = Q_frag\[\1 \+ \2\] \* cutlass\.Float16\(0\.147216796875\)", src)
    assert 'tcrow.reduce_rows(acc_s, m, "max", clear=False)' in src  # dim=-1: the rows


def test_sink_starts_the_softmax_and_the_bias_tile_lives_in_registers():
    src = _body("fa_sink_start_bias_frag_d96")
    assert "m[tc_q3] = Sinks[by] * cutlass.Float32(1.44269504)" in src and "l[tc_q3] = cutlass.Float32(1.0)" in src
    assert "slope[0] = cute.math.pow(cutlass.Float32(2.0), cutlass.Float32(-8.0) * cutlass.Float32(by + 1) / " \
           "cutlass.Float32(4.0))" in src
    assert re.search(r"bias, tc_bias_ij = tcm\.accumulator\(\"wgmma\", \(1, 1\), \(64, 64\)", src)
    assert "Bias.iterator + cute.assume(by * 90000 + (bx * 64 + i3) * 300 + k * 64 + i4, divby=2)" in src
    assert re.search(r"if bx \* 64 \+ (\w+) < 300:\s+LSE\[bz, by, bx \* 64 \+ \1\] = l\[", src)  # the point start


def test_sm80_puts_eight_warps_along_m_on_mma_sync():
    src = rounds.source(P.fa_sinks_bn176_lse2.get_tir(), "sm_80")
    assert 'tcm.accumulator("mma", (8, 1), (128, 176)' in src and '"wgmma"' not in src
    assert 'tcm.tiled_mma("mma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, False, True, (8, 1), 128, ' \
           'a_regs=True)' in src


# ---- the fp8 form TileLang 0.1.15 refuses too: P in fp8 registers against V as stored ------------
def _fp8_p_against_mn_major_v():
    B, H, S, D, bm, bn = 1, 2, 256, 128, 64, 64
    fp8 = T.float8_e4m3fn

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), fp8), K: T.Tensor((B, H, S, D), fp8), V: T.Tensor((B, H, S, D), fp8),
             O: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, by, bz):
            q = T.alloc_shared((bm, D), fp8)
            k = T.alloc_shared((bn, D), fp8)
            v = T.alloc_shared((bn, D), fp8)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), fp8)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q)
            T.fill(o, 0)
            for kb in T.Pipelined(S // bn, num_stages=2):
                T.copy(K[bz, by, kb * bn:(kb + 1) * bn, :], k)
                T.gemm(q, k, s, transpose_B=True, clear_accum=True)
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.copy(s, p)
                for i, j in T.Parallel(bm, D):
                    o[i, j] *= m[i]
                T.copy(V[bz, by, kb * bn:(kb + 1) * bn, :], v)
                T.gemm(p, v, o)
            T.copy(o, O[bz, by, bx * bm:(bx + 1) * bm, :])

    return main


def test_row_scale_over_a_simt_accumulator_names_the_gemm():
    with pytest.raises(LayoutError, match=r"test_unseen_programs51\.py:\d+: prim_func 'main': this T\.Parallel loop "
                                          r"walks fragment 'o' and reads 'm', which holds one value per row of a "
                                          r"T\.gemm accumulator: .*; 'o' accumulates the T\.gemm at "
                                          r".*test_unseen_programs51\.py:\d+, which no tensor-core MMA serves "
                                          r"\(float8_e4m3 operands, transpose_A=False, transpose_B=False"
                                          r".*runs as SIMT multiply-adds and has no MMA rows"):
        rounds.source(_fp8_p_against_mn_major_v())


# ---- GPU ----------------------------------------------------------------------------------------
LENS = [1, 63, 300, 1000]


def _attn(q, k, v, scale, bias=None, mask=None, softcap=None, sinks=None):
    """softmax(q k^T * scale (+ bias), masked) v in float32, heads on dim 1 (B, H, Sq, D);
    k / v may have fewer heads (GQA).  Also the natural-log LSE (sinks included)."""
    q, k, v = q.float(), k.float(), v.float()
    if k.shape[1] != q.shape[1]:
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) * scale
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.float().view(1, -1, 1, 1).expand(*s.shape[:-1], 1)], -1)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1)
    if sinks is not None:
        p = p[..., :-1]
    return p @ v, lse


def _bshd(*t):
    return [x.transpose(1, 2) for x in t]


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_d80_softcap_bm128_w8_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(2, 2, S, 80, device="cuda", dtype=f16) for _ in range(3))
    o, lse = P.fa_d80_softcap_bm128_w8(B=2, S=S)(q, k, v)
    ref, ref_lse = _attn(q, k, v, 80 ** -0.5, softcap=30.0)
    rounds.close(o, ref, 2e-2)
    rounds.close(lse, ref_lse, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_d112_alibi_causal_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, S, 4, 112, device="cuda", dtype=bf16) for _ in range(3))
    o = P.fa_d112_alibi_causal(S=S)(q, k, v)
    pos = torch.arange(S, device="cuda")
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], device="cuda")
    bias = -slopes.view(4, 1, 1) * (pos[:, None] - pos[None, :]).float()
    ref, _ = _attn(*_bshd(q, k, v), 112 ** -0.5, bias=bias, mask=pos[None, :] <= pos[:, None])
    rounds.close(o, ref.transpose(1, 2), 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_d160_window_lr_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, 2, S, 160, device="cuda", dtype=f16) for _ in range(3))
    o = P.fa_d160_window_lr(S=S)(q, k, v)
    pos = torch.arange(S, device="cuda")
    d = pos[None, :] - pos[:, None]
    ref, _ = _attn(q, k, v, 160 ** -0.5, mask=(d >= -100) & (d <= 20))
    rounds.close(o, ref, 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_dqk192_dv128_bottom_right_on_gpu(S):
    torch.manual_seed(S)
    Sk = S + 37
    q = torch.randn(1, S, 2, 192, device="cuda", dtype=bf16)
    k = torch.randn(1, Sk, 2, 192, device="cuda", dtype=bf16)
    v = torch.randn(1, Sk, 2, 128, device="cuda", dtype=bf16)
    o, lse = P.fa_dqk192_dv128_bottom_right(Sq=S, Sk=Sk)(q, k, v)
    mask = torch.arange(Sk, device="cuda")[None, :] <= torch.arange(S, device="cuda")[:, None] + 37
    ref, ref_lse = _attn(*_bshd(q, k, v), 192 ** -0.5, mask=mask)
    rounds.close(o, ref.transpose(1, 2), 3e-2)
    rounds.close(lse, ref_lse / math.log(2), 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_d256_cross_dynamic_on_gpu(S):
    torch.manual_seed(S)
    kern = P.fa_d256_cross_dynamic()
    for Sq, Sk in ((S, 77), (max(S // 3, 1), S)):  # one compiled kernel, both lengths vary
        q = torch.randn(1, Sq, 2, 256, device="cuda", dtype=f16)
        k, v = (torch.randn(1, Sk, 2, 256, device="cuda", dtype=f16) for _ in range(2))
        o = kern(q, k, v)
        ref, _ = _attn(*_bshd(q, k, v), 256 ** -0.5)
        rounds.close(o, ref.transpose(1, 2), 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_varlen_gqa_causal_d96_on_gpu(S):
    torch.manual_seed(S)
    lens = [S, max(S // 2, 1), max(S - 7, 1)]
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    tot = int(cu[-1])
    q = torch.randn(tot, 4, 96, device="cuda", dtype=f16)
    k, v = (torch.randn(tot, 2, 96, device="cuda", dtype=f16) for _ in range(2))
    o = P.fa_varlen_gqa_causal_d96(max_seqlen=max(lens))(q, k, v, cu)
    for b, n in enumerate(lens):
        a, z = int(cu[b]), int(cu[b + 1])
        qb, kb, vb = (x[a:z].transpose(0, 1)[None] for x in (q, k, v))
        pos = torch.arange(n, device="cuda")
        ref, _ = _attn(qb, kb, vb, 96 ** -0.5, mask=pos[None, :] <= pos[:, None])
        rounds.close(o[a:z], ref[0].transpose(0, 1), 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_sinks_bn176_lse2_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, 4, S, 128, device="cuda", dtype=bf16) for _ in range(3))
    sinks = torch.randn(4, device="cuda")
    o, lse = P.fa_sinks_bn176_lse2(S=S)(q, k, v, sinks)
    pos = torch.arange(S, device="cuda")
    ref, ref_lse = _attn(q, k, v, 128 ** -0.5, mask=pos[None, :] <= pos[:, None], sinks=sinks)
    rounds.close(o, ref, 3e-2)
    rounds.close(lse, ref_lse / math.log(2), 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_relpos_bias_d80_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, S, 2, 80, device="cuda", dtype=f16) for _ in range(3))
    table = torch.randn(2, 2 * S - 1, device="cuda")
    o = P.fa_relpos_bias_d80(S=S)(q, k, v, table)
    pos = torch.arange(S, device="cuda")
    bias = table[:, (pos[None, :] - pos[:, None] + S - 1)]
    ref, _ = _attn(*_bshd(q, k, v), 80 ** -0.5, bias=bias)
    rounds.close(o, ref.transpose(1, 2), 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_fp8_e4m3_descale_on_gpu(S):
    torch.manual_seed(S)
    scales = [torch.rand(2, device="cuda") * 0.5 + 0.25 for _ in range(3)]
    x = [torch.randn(1, 2, S, 128, device="cuda") for _ in range(3)]
    q8, k8, v8 = ((t / sc.view(1, 2, 1, 1)).to(torch.float8_e4m3fn) for t, sc in zip(x, scales))
    o = P.fa_fp8_e4m3_descale(S=S)(q8, k8, v8.transpose(2, 3).contiguous(), *scales)
    deq = [t.float() * sc.view(1, 2, 1, 1) for t, sc in zip((q8, k8, v8), scales)]
    ref, _ = _attn(*deq, 128 ** -0.5)
    rounds.close(o, ref, 6e-2)  # P rounded to e4m3 (3 mantissa bits)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_gqa_d192_bn48_lse_e_on_gpu(S):
    torch.manual_seed(S)
    q = torch.randn(2, S, 6, 192, device="cuda", dtype=bf16)
    k, v = (torch.randn(2, S, 2, 192, device="cuda", dtype=bf16) for _ in range(2))
    o, lse = P.fa_gqa_d192_bn48_lse_e(S=S)(q, k, v)
    pos = torch.arange(S, device="cuda")
    ref, ref_lse = _attn(*_bshd(q, k, v), 192 ** -0.5, mask=pos[None, :] <= pos[:, None])
    rounds.close(o, ref.transpose(1, 2), 3e-2)
    rounds.close(lse, ref_lse, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_sink_window_stage0_on_gpu(S):
    torch.manual_seed(S)
    Sk = S + 63
    q = torch.randn(1, 2, S, 128, device="cuda", dtype=f16)
    k, v = (torch.randn(1, 2, Sk, 128, device="cuda", dtype=f16) for _ in range(2))
    sinks = torch.randn(2, device="cuda", dtype=f16)
    o = P.fa_sink_window_stage0(seq_q=S, seq_kv=Sk)(q, k, v, sinks)
    qpos = torch.arange(S, device="cuda")[:, None] + 63
    kpos = torch.arange(Sk, device="cuda")[None, :]
    ref, _ = _attn(q, k, v, 128 ** -0.5, mask=(kpos <= qpos) & (kpos > qpos - 128), sinks=sinks)
    rounds.close(o, ref, 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_varlen_qk_slices_d112_on_gpu(S):
    torch.manual_seed(S)
    q_lens = [S, max(S // 2, 1), max(S - 5, 1)]
    k_lens = [n + extra for n, extra in zip(q_lens, (0, 17, 64))]  # a prefix of cached keys
    cu_q = torch.tensor([0] + torch.tensor(q_lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + torch.tensor(k_lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q = torch.randn(int(cu_q[-1]), 4, 112, device="cuda", dtype=bf16)
    k, v = (torch.randn(int(cu_k[-1]), 2, 112, device="cuda", dtype=bf16) for _ in range(2))
    o, lse = P.fa_varlen_qk_slices_d112(max_seqlen_q=max(q_lens))(q, k, v, cu_q, cu_k)
    for b, (nq, nk) in enumerate(zip(q_lens, k_lens)):
        qa, qz, ka, kz = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        qb = q[qa:qz].transpose(0, 1)[None]
        kb, vb = (x[ka:kz].transpose(0, 1)[None] for x in (k, v))
        mask = torch.arange(nk, device="cuda")[None, :] <= torch.arange(nq, device="cuda")[:, None] + (nk - nq)
        ref, ref_lse = _attn(qb, kb, vb, 112 ** -0.5, mask=mask)
        rounds.close(o[qa:qz], ref[0].transpose(0, 1), 3e-2)
        rounds.close(lse[:, qa:qz], ref_lse[0] / math.log(2), 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_q_in_registers_d96_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, 2, S, 96, device="cuda", dtype=f16) for _ in range(3))
    o = P.fa_q_in_registers_d96(S=S)(q, k, v)
    ref, _ = _attn(q, k, v, 96 ** -0.5)
    rounds.close(o, ref, 2e-2)  # Q times the scale rounded to fp16, as the program asks


@pytest.mark.gpu
@pytest.mark.parametrize("S", LENS)
def test_fa_sink_start_bias_frag_d96_on_gpu(S):
    torch.manual_seed(S)
    q, k, v = (torch.randn(1, 4, S, 96, device="cuda", dtype=f16) for _ in range(3))
    sinks = torch.randn(4, device="cuda")
    bias = torch.randn(4, S, S, device="cuda")
    o, lse = P.fa_sink_start_bias_frag_d96(S=S)(q, k, v, sinks, bias)
    pos = torch.arange(S, device="cuda")
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], device="cuda")
    alibi = -slopes.view(4, 1, 1) * (pos[:, None] - pos[None, :]).abs().float()
    ref, ref_lse = _attn(q, k, v, 96 ** -0.5, bias=bias + alibi, sinks=sinks)
    rounds.close(o, ref, 2e-2)
    rounds.close(lse, ref_lse / math.log(2), 1e-3)
