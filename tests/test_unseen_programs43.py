"""A forty-third set of programs in TileLang's idioms (tests/unseen_programs43.py): the
attention family -- MLA decode over a 512 + 64 latent, flash-decoding over 16-token pages
(split-KV partials with LSEs, then a combine), varlen GQA with a sliding window over
cu_seqlens, prefill with QK 192 / V 128, head dim 256 with soft-capping, FP8 attention with
per-head scales, a forward warp-specialised by hand (``if tx >= 128`` producer, mbarriers,
``T.wgmma_gemm``), GQA under ``T.Pipelined(order=, stage=, group=)``, the backward of
sliding-window attention (dQ by atomics), speculative decode over a paged cache with the
GQA group packed in the rows, T5 relative-position bias, NSA's selected-block attention and
gpt-oss learned sinks with a sliding window.

CPU: each builds to an sm_90a cubin, and to an sm_80 one but the two with forms only
Hopper has (FP8 operands, ``T.wgmma_gemm``: refused by name, as TileLang refuses them);
what decides each result is read in the generated source.  All built as first written;
two were wrong.  The hand-specialised forward hung: the wait for Q's TMA load (a copy
before ``if tx >= 128:``, read by the consumer branch) stood between the two branches'
regions, and the barrier pass ordered the consumer after the whole producer with a block
barrier while the producer waited for the consumer to free its slots
(tests/test_pipeline_waits.py).  The paged split-KV decode read its block table past the
table's end: a vector path's bounds check of K_cache's page index loaded
``block_table[b, tok // 16]`` unguarded (CuTe's ``and`` does not short-circuit) on the
last tile, which passes the table's 30 pages, where the program's ``T.if_then_else``
never reads it (tests/test_lane_fallback.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs43.py``)."""

import math
import re

import pytest
import torch

import tilecute
import rounds
import unseen_programs43 as P

NAMES = ["mla_decode_latent512_rope64", "paged16_decode_split", "paged16_decode_combine",
         "varlen_gqa_sliding_window", "fa_causal_qk192_v128", "fa_d256_softcap",
         "fa_fp8_per_head_scales", "fa_ws_producer_tx_branch", "gqa_fwd_order_stage_group",
         "attn_bwd_sliding_window", "spec_decode_paged_gqa8", "rel_bias_table_attn",
         "nsa_selected_blocks_fwd", "sinks_sliding_window_gqa"]
HOPPER_ONLY = {
    "fa_fp8_per_head_scales": "T.gemm on float8_e4m3 operands: float8 values convert only on sm_89+",
    "fa_ws_producer_tx_branch": "T.wgmma_gemm runs on wgmma only: wgmma needs sm_90a",
}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))


@pytest.mark.parametrize("name", NAMES)
def test_program_builds_an_sm80_cubin(name, tmp_path):
    func = getattr(P, name).get_tir()
    if name in HOPPER_ONLY:
        with pytest.raises(Exception, match=re.escape(HOPPER_ONLY[name])):
            tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path))
    else:
        assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- CPU: what decides each result in the generated source ----------------------------------
def test_mla_two_score_gemms_and_the_latent_as_values():
    src = _body("mla_decode_latent512_rope64")
    loop = src.split("for k in cutlass.range(0, (seqlen + 32 - 1) // 32):", 1)[1]
    nope, rope, pv = (loop.split(f"# T.gemm({g}", 1)[1].split("\n", 2)[1]
                      for g in ("q_s, kv_s", "qpe_s, kpe_s", "p_s, kv_s"))
    assert "accumulate=False" in nope and "accumulate=" not in rope  # the rope part adds on
    assert "64, 512, 128, False" in nope and "64, 64, 128, False" in rope
    assert "cutlass.BFloat16, 32, 512, 128, True" in pv  # the same KV stage, as values
    assert "k * 32 + (j + tc_lane" in loop and "< seqlen, acc_s[" in loop
    assert "cutlass.Float32(0.06011229333333333)" in loop  # log2(e) / sqrt(576)


def test_paged16_split_reads_four_pages_a_tile_and_the_table_in_bounds():
    src = _body("paged16_decode_split")
    assert "end = cutlass.min(start + per_split, n_tiles)" in src
    assert "for t in cutlass.range(0, cutlass.max(end - start, 0)):" in src
    for tensor in ("K_cache", "V_cache"):
        m = re.search(r"(tc_ld\d+) = cutlass\.Int32\(0\)\n\s+if \(\(start \+ t\) \* 64 \+ j\w*\) // 16 >= 0 "
                      r"and \(\(start \+ t\) \* 64 \+ j\w*\) // 16 < 30:\n\s+\1 = block_table\[b, .*\]\n"
                      rf"\s+if \1 >= 0 and \1 < 96:\n(?:.*\n){{2}}.*{tensor}\.iterator \+ cute\.assume\(\1 \* 8192 "
                      r"\+ \(\(\(start \+ t\) \* 64 \+ j\w*\) - \(\(start \+ t\) \* 64 \+ j\w*\) // 16 \* 16\) \* 512", src)
        assert m, tensor
    assert re.search(r'LSE_part\[b, hk \* 8 \+ i\w*, s\] = cutlass\.select_\(l\[(tc_q\d+)\] > cutlass\.Float32\(0\.0\), '
                     r'cute\.math\.log2\(l\[\1\]\) \+ m\[\1\], cutlass\.Float32\(float\("-inf"\)\)\)', src)


def test_combine_weighs_splits_by_their_lse():
    src = _body("paged16_decode_combine")
    assert "lse_max[0] = cute.arch.fmax(lse_max[0], LSE_part[b, h, s])" in src
    assert "lse[0] = cute.math.log2(lse_sum[0]) + lse_max[0]" in src
    assert "w[0] = cute.math.exp2(LSE_part[b, h, s_2_] - lse[0])" in src
    assert "o[tc_lane5] = o[tc_lane5] + w[0] * tc_vec4[tc_lane5]" in src


def test_varlen_window_cuts_the_loop_at_both_ends():
    src = _body("varlen_gqa_sliding_window")
    assert "total_tokens: cutlass.Int32, max_len: cutlass.Int32)" in src  # T.dynamic, scalar
    assert "if bx * 64 < cutlass.min(seqlen, max_len):" in src
    assert "lo = cutlass.max(bx * 64 - 90 + 1, 0) // 32" in src
    assert "hi = (cutlass.min((bx + 1) * 64, seqlen) + 32 - 1) // 32" in src
    assert "for k in cutlass.range(lo, lo + (hi - lo)):" in src
    assert "k_pos <= q_pos and k_pos > q_pos - 90 and k_pos < seqlen" in src
    assert "start + k * 32 + j < total_tokens" in src  # the keys read inside the packed tokens
    assert "h // 4 * 64" in src  # a KV head for 4 query heads
    assert re.search(r"if bx \* 64 \+ i_7_ < seqlen:\n\s+if .*\n\s+O\[start \+ bx \* 64 \+ i_7_, h, d_4_\]", src)


def test_qk192_v128_shapes_and_diagonal_mask():
    src = _body("fa_causal_qk192_v128")
    assert "cutlass.BFloat16, 128, 192, 128, False" in src and "cutlass.BFloat16, 64, 192, 128, False" in src
    assert "cutlass.BFloat16, 64, 128, 128, True" in src  # V: 64 keys x 128
    assert "if (k + 1) * 64 > bx * 128:" in src
    assert "bx * 128 + i >= k * 64 + (j + tc_lane" in src
    assert "cutlass.Float32(0.10411754621281724)" in src  # log2(e) / sqrt(192)


def test_d256_softcap_tanh_before_the_softmax():
    src = _body("fa_d256_softcap")
    assert "cutlass.Float16, 64, 256, 128, False" in src
    assert re.search(r"cutlass\.select_\(k \* 64 \+ \(j \+ tc_lane\d+\) < 300, cutlass\.Float32\(50\.0\) \* "
                     r"cute\.math\.tanh\(acc_s\[tc_r\d+ \+ tc_lane\d+\] \* cutlass\.Float32\(0\.0625\) / "
                     r"cutlass\.Float32\(50\.0\)\) \* cutlass\.Float32\(1\.44269504\)", src)


def test_fp8_scores_gemm_and_widened_values():
    src = _body("fa_fp8_per_head_scales")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32' in src
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, True' in src
    assert "qk[0] = q_scale[b, h] * k_scale[b, h] * cutlass.Float32(0.1275174307460247)" in src
    assert "acc_s[tc_r5 + tc_lane6] * qk[0]" in src
    assert "v_s8.iterator" in src and "cutlass.Float16(tc_vec" in src  # e4m3 -> f16 in shared
    assert "* v_scale[b, h] / l[tcrow.row_of(acc_o" in src


def test_ws_branches_side_by_side_q_waited_in_the_consumer():
    src = _body("fa_ws_producer_tx_branch")
    prod, cons = src.split("if tc_tid >= 128:", 1)[1].split("if tc_tid < 128:", 1)
    assert "setmaxregister_decrease(40)" in prod and "setmaxregister_increase(232)" in cons
    tail = prod.split("tct.arrive(kv_ready", 1)[1]
    assert "sync_threads" not in tail and "tct.wait(" not in tail  # nothing between the regions
    assert cons.lstrip().split("\n", 2)[1].strip() == "tct.wait(tc_bar0, 0)"  # Q, first thing
    assert "tct.wait(kv_free + t % 2, t // 2 & 1 ^ 1)" in prod and "tct.arrive(kv_ready + t % 2)" in prod
    assert "tct.wait(kv_ready + t_1_ % 2, t_1_ // 2 & 1)" in cons and "tct.arrive(kv_free + t_1_ % 2)" in cons
    assert cons.count("wait=None)") == 2 and cons.count("tcm.wait_batches(0)") == 2


def test_gqa_order_stage_group_overlaps_pv_of_the_previous_tile():
    src = _body("gqa_fwd_order_stage_group")
    loop = src.split("for k in cutlass.range(1,", 1)[1] if "for k in cutlass.range(1," in src else src
    pv = loop.split("# T.wgmma_gemm(acc_s_cast, v_s, acc_o)", 1)[1].split("\n", 2)[1]
    assert "((k - 1) % 2) * 32768" in pv  # tile k - 1's V stage, in step k
    assert "h // 8" in src  # 8 query heads a KV head
    assert "bx * 128 + i >= k * 128 + (j + tc_lane" in src


def test_bwd_window_query_range_and_atomic_dq():
    src = _body("attn_bwd_sliding_window")
    assert "lo = bx * 64 // 64" in src
    assert "hi = cutlass.min(((bx + 1) * 64 + 100 - 1 + 64 - 1) // 64, 5)" in src
    assert "for t in cutlass.range(lo, lo + (hi - lo)):" in src
    assert "k_pos <= q_pos and q_pos - k_pos < 100 and q_pos < 320" in src
    assert "tca.atomic_add_view(cute.make_tensor(dQ.iterator + cute.assume(b * 40960 + (t * 64 + " in src
    assert "tct.store(dV_desc" in src and "tct.store(dK_desc" in src


def test_spec_decode_rows_are_token_times_group():
    src = _body("spec_decode_paged_gqa8")
    assert "Q.iterator + cute.assume(b * 6144 + r // 8 * 2048 + (hk * 8 + r % 8) * 128 + d" in src
    assert re.search(r"if p < 8:\n\s+(tc_ld\d+) = block_table\[b, p\]\n\s+page_id\[0\] = \1", src)
    assert re.search(r"p \* 64 \+ \(j\w* \+ tc_lane\d+\) < kv_len - 3 \+ 1 \+ r\w* // 8", src)
    assert re.search(r"if (r\w*) < 24:\n\s+if \1 // 8 < 3:\n\s+O\[b, \1 // 8, hk \* 8 \+ \1 % 8,", src)


def test_t5_bias_bucket_is_clamped_and_read_from_shared():
    src = _body("rel_bias_table_attn")
    assert "bias_s[i1] = bias[h, i1]" in src
    assert "rel = cutlass.min(cutlass.max(k * 64 + (j + tc_lane" in src and "- (bx * 64 + i), -32), 32)" in src
    assert re.search(r"(tc_ld\d+) = bias_s\[rel \+ 32\]", src)


def test_nsa_skips_blocks_not_selected_or_in_the_future():
    src = _body("nsa_selected_blocks_fwd")
    assert "blk[s] = block_indices[b, t, hk, s]" in src
    assert "if blk[0] >= 0 and blk[0] * 32 <= t:" in src  # the prologue's copy
    assert re.search(r"if blk\[s_1_ \+ 1\] >= 0 and blk\[s_1_ \+ 1\] \* 32 <= t:", src)  # the next one
    assert "cutlass.select_(i_s * 32 + (j" in src and "<= t, acc_s[" in src


def test_sinks_add_to_the_denominator_only():
    src = _body("sinks_sliding_window_gqa")
    assert "sink[0] = Sinks[h] * cutlass.Float32(1.44269504)" in src
    assert re.search(r"l\[tc_q\d+\] = l\[tc_q\d+\] \+ cute\.math\.exp2\(sink\[0\] - m\[tc_q\d+\]\)", src)
    assert "start = cutlass.max(0, (bx * 64 - 128 + 1) // 64)" in src
    assert "q_pos >= k_pos and q_pos - k_pos < 128" in src


# ---- GPU: against torch ----------------------------------------------------------------------
def _softmax_av(s, v, allowed):
    """softmax(s) v over the allowed keys, float32 (s: [..., q, k])."""
    s = s.float().masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1) @ v.float()


@pytest.mark.gpu
def test_mla_decode_on_gpu():
    B, H, S = 2, 128, 320
    q = torch.randn(B, H, 512, device="cuda").bfloat16()
    qpe = torch.randn(B, H, 64, device="cuda").bfloat16()
    kv = torch.randn(B, S, 512, device="cuda").bfloat16()
    kpe = torch.randn(B, S, 64, device="cuda").bfloat16()
    lens = torch.tensor([300, 17], device="cuda", dtype=torch.int32)
    out = P.mla_decode_latent512_rope64()(q, qpe, kv, kpe, lens)
    s = (q.float() @ kv.float().transpose(1, 2) + qpe.float() @ kpe.float().transpose(1, 2)) / math.sqrt(576)
    allowed = (torch.arange(S, device="cuda")[None, :] < lens[:, None])[:, None, :]
    torch.testing.assert_close(out.float(), _softmax_av(s, kv, allowed), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_paged16_split_and_combine_on_gpu():
    B, H, HK, D, page = 3, 32, 4, 128, 16
    kc = torch.randn(96, page, HK, D, device="cuda").half()
    vc = torch.randn(96, page, HK, D, device="cuda").half()
    table = torch.stack([torch.randperm(96)[:30] for _ in range(B)]).int().cuda()
    lens = torch.tensor([480, 1, 200], device="cuda", dtype=torch.int32)
    q = torch.randn(B, H, D, device="cuda").half()
    o_part, lse = P.paged16_decode_split()(q, kc, vc, table, lens)
    assert torch.isinf(lse[1, :, 1:]).all() and (o_part[1, :, 1:] == 0).all()  # empty splits
    out = P.paged16_decode_combine()(o_part, lse)
    t = torch.arange(480, device="cuda")
    for b in range(B):
        pages = table[b, t // page].long()
        k = kc[pages, t % page].permute(1, 0, 2).repeat_interleave(H // HK, 0)  # [H, 480, D]
        v = vc[pages, t % page].permute(1, 0, 2).repeat_interleave(H // HK, 0)
        s = (q[b].float()[:, None, :] @ k.float().transpose(1, 2))[:, 0] / math.sqrt(D)
        ref = _softmax_av(s[:, None], v, (t < lens[b])[None, None, :])[:, 0]
        torch.testing.assert_close(out[b].float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_varlen_gqa_sliding_window_on_gpu():
    lens = [200, 1, 77, 130]
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    total = sum(lens)
    q = torch.randn(total, 8, 64, device="cuda").bfloat16()
    k = torch.randn(total, 2, 64, device="cuda").bfloat16()
    v = torch.randn(total, 2, 64, device="cuda").bfloat16()
    out = P.varlen_gqa_sliding_window()(q, k, v, cu, 200)
    for b, n in enumerate(lens):
        sl = slice(int(cu[b]), int(cu[b + 1]))
        qb = q[sl].transpose(0, 1).float()
        kb = k[sl].transpose(0, 1).repeat_interleave(4, 0).float()
        vb = v[sl].transpose(0, 1).repeat_interleave(4, 0)
        i = torch.arange(n, device="cuda")
        allowed = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 90)
        ref = _softmax_av(qb @ kb.transpose(1, 2) / 8.0, vb, allowed).transpose(0, 1)
        torch.testing.assert_close(out[sl].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_qk192_v128_on_gpu():
    q = torch.randn(1, 384, 4, 192, device="cuda").bfloat16()
    k = torch.randn(1, 384, 4, 192, device="cuda").bfloat16()
    v = torch.randn(1, 384, 4, 128, device="cuda").bfloat16()
    out = P.fa_causal_qk192_v128()(q, k, v)
    s = q.float().transpose(1, 2) @ k.float().permute(0, 2, 3, 1) / math.sqrt(192)
    allowed = torch.ones(384, 384, device="cuda", dtype=torch.bool).tril()
    ref = _softmax_av(s, v.transpose(1, 2), allowed).transpose(1, 2)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_d256_softcap_on_gpu():
    q, k, v = (torch.randn(2, 2, 300, 256, device="cuda").half() for _ in range(3))
    out = P.fa_d256_softcap()(q, k, v)
    s = 50.0 * torch.tanh(q.float() @ k.float().transpose(-1, -2) / 16.0 / 50.0)
    ref = _softmax_av(s, v, torch.ones(300, 300, device="cuda", dtype=torch.bool))
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_fp8_per_head_scales_on_gpu():
    B, H, S, D = 2, 4, 256, 128
    scales = [torch.rand(B, H, device="cuda") * 0.05 + 0.01 for _ in range(3)]
    f8 = [(torch.randn(B, H, S, D, device="cuda") / sc[..., None, None]).clamp(-448, 448)
          .to(torch.float8_e4m3fn) for sc in scales]
    out = P.fa_fp8_per_head_scales()(*f8, *scales)
    qd, kd, vd = (x.float() * sc[..., None, None] for x, sc in zip(f8, scales))
    ref = _softmax_av(qd @ kd.transpose(-1, -2) / math.sqrt(D), vd, torch.ones(S, S, device="cuda", dtype=torch.bool))
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_ws_producer_tx_branch_on_gpu():
    q, k, v = (torch.randn(1, 512, 4, 128, device="cuda").half() for _ in range(3))
    out = P.fa_ws_producer_tx_branch()(q, k, v)
    s = q.float().transpose(1, 2) @ k.float().permute(0, 2, 3, 1) / math.sqrt(128)
    ref = _softmax_av(s, v.transpose(1, 2), torch.ones(512, 512, device="cuda", dtype=torch.bool))
    torch.testing.assert_close(out.float(), ref.transpose(1, 2), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gqa_order_stage_group_on_gpu():
    q = torch.randn(1, 512, 16, 128, device="cuda").half()
    k = torch.randn(1, 512, 2, 128, device="cuda").half()
    v = torch.randn(1, 512, 2, 128, device="cuda").half()
    out = P.gqa_fwd_order_stage_group()(q, k, v)
    kk = k.transpose(1, 2).repeat_interleave(8, 1).float()
    vv = v.transpose(1, 2).repeat_interleave(8, 1)
    s = q.float().transpose(1, 2) @ kk.transpose(-1, -2) / math.sqrt(128)
    allowed = torch.ones(512, 512, device="cuda", dtype=torch.bool).tril()
    torch.testing.assert_close(out.float(), _softmax_av(s, vv, allowed).transpose(1, 2), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_bwd_sliding_window_on_gpu():
    B, S, H, D, W = 1, 320, 2, 64, 100
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda").half() for _ in range(4))
    i = torch.arange(S, device="cuda")
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < W)
    qf, kf, vf = (x.float().transpose(1, 2).requires_grad_() for x in (q, k, v))
    s = (qf @ kf.transpose(-1, -2) / math.sqrt(D)).masked_fill(~allowed, float("-inf"))
    o = torch.softmax(s, -1) @ vf
    o.backward(do.float().transpose(1, 2))
    lse = (torch.logsumexp(s, -1) * math.log2(math.e)).detach().contiguous()
    delta = (o * do.float().transpose(1, 2)).sum(-1).detach().contiguous()
    dq = torch.zeros(B, S, H, D, device="cuda")
    dk, dv = torch.empty_like(dq), torch.empty_like(dq)
    P.attn_bwd_sliding_window()(q, k, v, do, lse, delta, dq, dk, dv)
    for got, ref in ((dq, qf.grad), (dk, kf.grad), (dv, vf.grad)):
        torch.testing.assert_close(got, ref.transpose(1, 2), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_spec_decode_paged_gqa8_on_gpu():
    B, QL, H, HK, D, page = 3, 3, 16, 2, 128, 64
    kp = torch.randn(40, page, HK, D, device="cuda").bfloat16()
    vp = torch.randn(40, page, HK, D, device="cuda").bfloat16()
    table = torch.stack([torch.randperm(40)[:8] for _ in range(B)]).int().cuda()
    lens = torch.tensor([300, 3, 67], device="cuda", dtype=torch.int32)
    q = torch.randn(B, QL, H, D, device="cuda").bfloat16()
    out = P.spec_decode_paged_gqa8()(q, kp, vp, table, lens)
    t = torch.arange(512, device="cuda")
    for b in range(B):
        pages = table[b, t // page].long()
        k = kp[pages, t % page].permute(1, 0, 2).repeat_interleave(8, 0).float()  # [H, 512, D]
        v = vp[pages, t % page].permute(1, 0, 2).repeat_interleave(8, 0)
        s = q[b].float().transpose(0, 1) @ k.transpose(1, 2) / math.sqrt(D)  # [H, QL, 512]
        allowed = t[None, :] < lens[b] - QL + 1 + torch.arange(QL, device="cuda")[:, None]
        ref = _softmax_av(s, v, allowed).transpose(0, 1)
        torch.testing.assert_close(out[b].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_rel_bias_table_on_gpu():
    q, k, v = (torch.randn(2, 4, 200, 64, device="cuda").bfloat16() for _ in range(3))
    bias = torch.randn(4, 65, device="cuda")
    out = P.rel_bias_table_attn()(q, k, v, bias)
    i = torch.arange(200, device="cuda")
    rel = (i[None, :] - i[:, None]).clamp(-32, 32) + 32
    s = q.float() @ k.float().transpose(-1, -2) / 8.0 + bias[:, rel][None]
    ref = _softmax_av(s, v, torch.ones(200, 200, device="cuda", dtype=torch.bool))
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_nsa_selected_blocks_on_gpu():
    B, S, H, HK, D, BS, NS = 2, 256, 32, 2, 64, 32, 4
    q = torch.randn(B, S, H, D, device="cuda").half()
    k = torch.randn(B, S, HK, D, device="cuda").half()
    v = torch.randn(B, S, HK, D, device="cuda").half()
    g = torch.Generator().manual_seed(0)
    idx = torch.full((B, S, HK, NS), -1, dtype=torch.int32)
    for b in range(B):
        for t in range(S):
            for h in range(HK):
                own = t // BS
                others = torch.randperm(own + 1, generator=g)[:NS]
                sel = [own] + [int(x) for x in others if x != own][:NS - 1]
                sel += [-1] * (NS - len(sel))
                idx[b, t, h] = torch.tensor(sel)[torch.randperm(NS, generator=g)]
    idx = idx.cuda()
    out = P.nsa_selected_blocks_fwd()(q, k, v, idx)
    j = torch.arange(S, device="cuda")
    for b in range(B):
        sel = idx[b].long()  # [S, HK, NS]
        allowed = ((j[None, None, None, :] // BS) == sel[..., None]).any(2) & (j[None, None, :] <= j[:, None, None])
        kk = k[b].float().permute(1, 2, 0)  # [HK, D, S]
        s = torch.einsum("thd,hds->ths", q[b].float().view(S, HK, H // HK, D).reshape(S, H, D),
                         kk.repeat_interleave(H // HK, 0)) / 8.0
        al = allowed.repeat_interleave(H // HK, 1)  # [S, H, S]
        p = torch.softmax(s.masked_fill(~al, float("-inf")), -1)
        ref = torch.einsum("ths,shd->thd", p, v[b].float().repeat_interleave(H // HK, 1))
        torch.testing.assert_close(out[b].float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_sinks_sliding_window_on_gpu():
    q = torch.randn(1, 8, 300, 64, device="cuda").bfloat16()
    k = torch.randn(1, 2, 300, 64, device="cuda").bfloat16()
    v = torch.randn(1, 2, 300, 64, device="cuda").bfloat16()
    sinks = torch.randn(8, device="cuda")
    out = P.sinks_sliding_window_gqa()(q, k, v, sinks)
    i = torch.arange(300, device="cuda")
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 128)
    s = (q.float() @ k.float().repeat_interleave(4, 1).transpose(-1, -2) / 8.0).masked_fill(~allowed, float("-inf"))
    s = torch.cat([s, sinks[None, :, None, None].expand(1, 8, 300, 1)], -1)
    p = torch.softmax(s, -1)[..., :-1]
    ref = p @ v.float().repeat_interleave(4, 1)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
