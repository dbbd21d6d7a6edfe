"""A twenty-fifth set of programs in TileLang's idioms (tests/unseen_programs25.py), from the
newest TileLang example domains: lazy-annotated factories (DSA logit cleaning, mHC post mix,
fp8 block mean pooling), mHC pre, fp8 activation quantisation, chunked gated linear attention
(GDN / KDA), block-causal / block-sparse / sink / vertical-column / top-k-index sparse
attention, flash decoding (split + combine), a Hadamard butterfly, top-k, split-K GEMV, an int4
dequantising GEMM, MoE gather / combine, add + RMSNorm, online softmax, an indexer score, a
grouped GEMM over ragged groups, mHC warp roles, a TF32 gemm, an async prefetch ring, a sparse
dKV backward and the GDN delta-rule state recurrence.  CPU: each builds to an sm_90a cubin and what each means is
checked in the generated source.  GPU: each matches a torch reference."""

import math

import re

import pytest

import rounds
import unseen_programs25 as P

PROGRAMS = ["dsa_clean_logits", "mhc_post_mix", "mhc_pre_rms_gate", "fp8_block_mean_pool", "act_quant_group_fp8",
            "chunk_local_cumsum", "chunk_scaled_kkt", "chunk_gated_output", "linear_attn_chunk_states",
            "block_causal_attention", "block_sparse_attention_mask", "attention_with_sink", "decode_split_kv",
            "decode_combine", "vertical_column_sparse_attn", "hadamard_rows", "topk_rows_reduce_max", "gemv_split_k",
            "int4_dequant_gemm", "moe_gather_sorted_tokens", "moe_weighted_combine", "fused_add_rmsnorm",
            "online_softmax_two_pass", "indexer_weighted_relu_scores", "topk_index_sparse_mqa",
            "grouped_gemm_offsets", "kda_intra_chunk_scores", "mhc_sinkhorn_roles", "mhc_tf32_gemm_sqrsum",
            "vertical_prefetch_async", "sparse_dkv_scatter", "gdn_chunk_delta_h"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _kernel(name, **kw):
    f = getattr(P, name)
    if name in P.LAZY_SHAPES:
        return f.compile(**P.LAZY_SHAPES[name], **kw)
    return f(**kw)


_body = rounds.body_of(_kernel)
test_every_program_is_listed = rounds.every_kernel_is_listed(P, PROGRAMS, ("tilecute", "T", "math"))
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, _kernel)


# ---- what the generated source says ------------------------------------------------------
def test_lazy_factories_read_their_annotations():
    src = _body("dsa_clean_logits")
    # T.const("seq, seq_kv") gives two shapes; T.float is float32; T.thread_binding the thread
    assert "cute.make_layout((8, 1000,), stride=(1000, 1,))" in src and "Logits_ptr" in src
    assert "tx = tc_tx" in src and "idx = n * 512 + k * 128 + tx" in src
    assert 'Logits[bx, idx] = cutlass.Float32(float("inf"))' in src
    assert 'Logits[bx, idx] = cutlass.Float32(float("-inf"))' in src
    assert "if idx == s or idx == e - 1:" in src and "if idx < s or idx >= e:" in src
    src = _body("mhc_post_mix")
    assert "num_tokens: cutlass.Int32" in src  # the T.dynamic token count
    assert "a_f[i1 * 4 + i2] = A[tok, i1, i2]" in src  # the (hc, hc) mix read whole
    src = _body("fp8_block_mean_pool")
    assert "cnt = cutlass.min(32, 200 - bx * 32)" in src  # the ragged last block
    # a column of k_f a thread, folded there into its one mean (TileLang's column layout),
    # the mean's absmax over the block's threads
    assert "k_f = cute.make_rmem_tensor((32,), cutlass.Float32)  # blocked: 1 " in src
    assert "mean = cute.make_rmem_tensor((1,), cutlass.Float32)  # blocked: 1 " in src
    assert "mean[0] = mean[0] + k_f[k2]" in src and "mean[0] = mean[0] / cutlass.Float32(cnt)" in src
    assert "cute.math.absf(mean[" in src and 'tcr.block_allreduce(tc_red6, "max"' in src
    assert "cutlass.Float8E4M3FN(" in src


def test_quantisation_and_norm_forms():
    src = _body("act_quant_group_fp8")
    # T.clamp(x / s, -448, 448): max with the low bound, then min with the high one
    # (the scales computed per row where the lane groups hold the rows, in registers of
    # their own, tc_rows15: no exchange of amax, no pick of the thread's row)
    assert "cute.arch.fmin(cute.arch.fmax(x_f[tc_k16 * 16 + tc_lane18] / tc_rows15[tc_k16], cutlass.Float32(-448.0)), cutlass.Float32(448.0))" in src
    assert "tc_rows15[tc_c14] = cute.arch.fmax(tc_red9[tc_c14] / cutlass.Float32(448.0), cutlass.Float32(0.0001))" in src
    assert "tcr.grouped_rows(" not in src and "= tc_rows15[tc_c" in src  # the scales' store
    src = _body("int4_dequant_gemm")
    # the low nibble first, then the high one; signed after the - 8
    # (8 lanes a thread step: the scale, one value a group of 8 lanes, read per lane)
    assert re.search(r">> \(k \+ (tc_lane\d+)\) % 2 \* 4 & 15", src)
    assert re.search(r"cutlass\.Float16\(q - 8\) \* Scale\[bx \* 64 \+ n, \(kt \* 64 \+ \(k \+ tc_lane\d+\)\) // 64\]", src)
    src = _body("mhc_pre_rms_gate")
    # T.sigmoid of each gate, summed over the hc streams, then the one RMS factor of the token
    # x_f a column of each stream a thread (the stream loop unrolled: register i * 2 + step),
    # not all 1024 values in every thread; its squares reduced over each row by every thread
    assert ("cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(cutlass.Float32(0.0) - g_f[i_1_]))"
            " * x_f[i_1_ * 2 + tc_k") in src
    assert "x_f = cute.make_rmem_tensor((8,), cutlass.Float32)  # blocked: 1 consecutive" in src
    assert "for i_1_ in cutlass.range_constexpr(0, 4):" in src
    assert "cute.math.rsqrt(tot[0] / cutlass.Float32(1024.0) + cutlass.Float32(1e-06))" in src


def test_hadamard_stages_are_fenced():
    src = _body("hadamard_rows")
    loop = src.split("for st in cutlass.range(0, 8):", 1)[1]
    stage = loop.split("x_s[a + h] = u - v", 1)[0]
    assert "h = 1 << st" in stage and "cute.arch.sync_threads()" in stage  # each stage after the last
    assert "u = x_s[a]" in stage and "v = x_s[a + h]" in stage
    assert "cutlass.Float32(0.0625)" in loop  # 1 / sqrt(256)


def test_selection_and_reduction_forms():
    src = _body("topk_rows_reduce_max")
    # N marks a column not at the max (the row's max: the reduction round's register)
    assert re.search(r"== tc_red\d+\[tc_k\d+\], \(j \+ tc_lane16\), 64\)", src), src
    assert 'cutlass.Float32(float("-inf"))' in src
    src = _body("gemv_split_k")
    assert "tca.atomic_add" in src and "Y.iterator + cute.assume(bn * 64 + i_2_" in src
    src = _body("decode_combine")
    assert "lmax[0] = cute.arch.fmax(lmax[0], Lpart[bb, bh, s])" in src
    assert "w = cute.math.exp2(Lpart[bb, bh, s_1_] - lmax[0])" in src and "den[0] = den[0] + w" in src
    src = _body("online_softmax_two_pass")
    assert "s[0] = s[0] * cute.math.exp(m[0] - m_new) + tsum[0]" in src and "m[0] = m_new" in src


def test_chunked_linear_attention_forms():
    src = _body("chunk_gated_output")
    g1 = src.index("# T.gemm(q_s, k_s, s_f)")
    rescale = src.index("cute.math.exp(g_s[i_1_]) * cutlass.Float32(0.125)")
    # q_s is rescaled in place only after a barrier behind the gemm that read it
    assert "cute.arch.sync_threads()" in src[g1:rescale]
    assert src.index("tcm.gemm(tc_mma2, tc_tid, o_f") > rescale  # the Q h gemm reads the rescaled Q
    src = _body("chunk_local_cumsum")
    assert "T.cumsum(g_s, g_s, dim=0)" in src
    rev = _body("chunk_local_cumsum", reverse=True)
    assert rev != src and "reverse" in rev
    src = _body("kda_intra_chunk_scores")
    assert "if (j + tc_lane8) <= i:" in src  # the channel loop only on and below the diagonal
    assert "cute.math.exp(g_s[i * 32 + (d ^ (i & 31))] - g_s[(j + tc_lane8) * 32 + (d ^ ((j + tc_lane8) & 31))])" in src


def test_sparse_attention_forms():
    src = _body("block_sparse_attention_mask")
    skip = src.index("if (BlockMask[bz, by, bx, kb] != 0):")
    assert src.index("tcm.gemm(tc_mma0") > skip and src.index("tcm.gemm(tc_mma1") > skip
    src = _body("vertical_column_sparse_attn")
    assert "cnt[0] = ColCnt[bz, by]" in src
    src = _body("topk_index_sparse_mqa")
    # the gathered row's address comes from the index; a -1 row loads nothing and becomes 0
    assert "KV.iterator + cute.assume(Idx[s, ib * 64 + i_1_] * 64 + d, divby=8)" in src
    assert "cutlass.select_(Idx[s, ib * 64 + i_1_] >= 0, tc_vec11[tc_lane12], cutlass.BFloat16(0.0))" in src
    src = _body("grouped_gemm_offsets")
    assert "if by1 >= TileOffs[q + 1]:" in src and "g[0] = q + 1" in src
    assert "if g[0] < 3:" in src


def test_mhc_roles_and_tf32_forms():
    src = _body("mhc_sinkhorn_roles")
    # the Sinkhorn warp's reductions stay inside its region: 32-thread named barriers, no
    # block-wide sync_threads after the branch opens
    region = src.split("if tc_tid < 32:  # thread region: threads 0..31", 1)[1].split("if tc_tid >= 32:", 1)[0]
    assert "sync_threads" not in region and "cute.arch.barrier(barrier_id=2, number_of_threads=32)" in region
    # row max, row sum, and the loop's row sums stay in their reductions' registers (only
    # nests over the rows read them); the loop's column sums, read whole, are shared out
    assert region.count("tcr.grouped_rows(") == 1 and region.count("its rows stay in") == 3
    assert "for u__ in cutlass.range(0, 3):" in region
    assert "cm[tc_lane40] / (tcr.pick(csum, (k_3_ + tc_lane40), 4) + cutlass.Float32(1e-06))" in region
    other = src.split("if tc_tid >= 32:  # thread region: threads 32..95", 1)[1]
    assert "tc_wtid55 = tc_tid - 32" in other and "Pre[tok, j_6_] =" in other
    src = _body("mhc_tf32_gemm_sqrsum")
    assert 'tcm.tiled_mma("mma", cutlass.TFloat32, cutlass.TFloat32, cutlass.Float32' in src
    assert "if i < 24:" in src  # Fn's rows past N = 24 are zero in the 32-row tile
    assert src.index("sq[tc_lane34] = sq[tc_lane34] + part[") < src.index("tcm.gemm_warp(tc_mma0")


def test_prefetch_ring_waits_and_fences():
    src = _body("vertical_prefetch_async")
    loop = src.split("for t in cutlass.range(0, nblk):", 1)[1]
    nxt = loop.split("if t + 1 < nblk:", 1)[1]
    # the macro's `cnt: T.int32` takes the variable's value at the call (a Let, as TileLang
    # binds it); the next stage is overwritten only after a barrier behind the last
    # iteration's gemms
    assert nxt.lstrip().startswith('cnt_2_ = cnt[0]\n            cute.arch.fence_proxy("async.shared", '
                                   'space="cta")\n            cute.arch.sync_threads()')
    assert "(t + 1) % 2 * 2048" in nxt or "((t + 1) % 2) * 2048" in nxt
    assert "cute.arch.cp_async_commit_group()\n            cute.arch.cp_async_wait_group(1)" in nxt
    assert "else:\n            cute.arch.cp_async_wait_group(0)" in loop
    # every thread's gathered rows are visible before the gemm reads the stage
    g = loop.index("tcm.gemm(tc_mma0")
    assert "cute.arch.sync_threads()" in loop[loop.index("cp_async_wait_group(0)"):g]
    assert "cute.assume(8192 + (t % 2) * 4096, divby=1024)" in loop[g:]
    assert "cute.assume(16384 + (t % 2) * 4096, divby=1024)" in loop  # V from the same stage
    # rows past the count are zero, not gathered
    assert "cnt_1_ = cnt[0]" in src
    assert "cutlass.select_(0 + i < cnt_1_, tc_vec9[tc_lane10], cutlass.Float16(0.0))" in src


def test_shifted_fragment_slabs_read_the_right_rows():
    src = _body("sparse_dkv_scatter")
    assert src.count("tcm.gemm(") == 2
    loop = src.split("for s in cutlass.range(0, 2):", 1)[1]
    # slab row i holds accumulator row i + 32 s: each thread writes the rows it holds
    assert "if i1 >= s * 32 and i1 < s * 32 + 32:" in loop
    assert "slab[(i1 - s * 32) * 64 + (d + tc_lane2)] = acc[tc_r1 + tc_lane2]" in loop
    assert loop.index("cute.arch.sync_threads()") < loop.index("slab[(i1 - s * 32)")  # last slab's reads done
    assert "tca.atomic_add(dKV, (Idx[s_i, i_i * 64 + i_1_ + s * 32], d_1_), slab[i_1_ * 64 + d_1_])" in loop


def test_delta_rule_state_hazards_are_fenced():
    src = _body("gdn_chunk_delta_h")
    loop = src.split("for c in cutlass.range(0, 4):", 1)[1]
    h_write = loop.index("h_s.iterator")
    g1 = loop.index("tcm.gemm(tc_mma0")
    # h_s is written after the last iteration's Hs store has read it, and fenced before W h
    assert loop.index("tct.store_wait()") < loop.index("cute.arch.barrier(barrier_id=1, number_of_threads=128)") < h_write
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=128)" in loop[h_write:g1]
    assert "accumulate=False" in loop[g1:g1 + 400]  # clear_accum=True
    # V' = U - W h, stored, then scaled into vn_s behind a barrier (g_s written by 64 threads)
    assert "v_f[tc_r10 + tc_lane11] = u_f[tc_r10 + tc_lane11] - v_f[tc_r10 + tc_lane11]" in loop
    vn = loop.index("vn_s.iterator")
    assert "cute.arch.barrier(barrier_id=1" in loop[loop.index("g_s[i7] = G["):vn]
    assert "cute.math.exp(g_s[63] - g_s[t_1_])" in loop
    assert "h_f[tc_r18 + tc_lane19] * cute.math.exp(g_s[63])" in loop
    g2 = loop.index("tcm.gemm(tc_mma1")
    assert "cute.arch.barrier(barrier_id=1" in loop[vn:g2]


# ---- GPU: each against torch ---------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_lazy_factories_on_gpu():
    import torch
    torch.manual_seed(0)
    L = torch.randn(8, 1000, device="cuda")
    ks = torch.tensor([0, 5, 100, 999, 10, 0, 300, 512], dtype=torch.int32, device="cuda")
    ke = torch.tensor([1000, 6, 700, 1000, 20, 1, 990, 1000], dtype=torch.int32, device="cuda")
    want = L.clone()
    n = torch.arange(1000, device="cuda")[None, :]
    want[(n < ks[:, None]) | (n >= ke[:, None])] = float("-inf")
    want[(n == ks[:, None]) | (n == ke[:, None] - 1)] = float("inf")
    P.dsa_clean_logits(L, ks, ke)
    assert torch.equal(L, want)
    # mHC post mix
    n_tok, hc, hid = 37, 4, 512
    a = torch.randn(n_tok, hc, hc, device="cuda")
    b = torch.randn(n_tok, hc, hid, device="cuda").bfloat16()
    c = torch.randn(n_tok, hc, device="cuda")
    d = torch.randn(n_tok, hid, device="cuda").bfloat16()
    x = P.mhc_post_mix(a, b, c, d)
    want = c[:, :, None] * d.float()[:, None, :] + torch.bmm(a.mT, b.float())
    _close(x, want, 3e-2)
    # fp8 block mean pooling, ragged last block
    k = torch.randn(200, 128, device="cuda").bfloat16()
    pooled, scale = P.fp8_block_mean_pool(k)
    kf = torch.nn.functional.pad(k.float(), (0, 0, 0, 24))
    cnt = torch.tensor([32] * 6 + [8], device="cuda", dtype=torch.float32)
    mean = kf.reshape(7, 32, 128).sum(1) / cnt[:, None]
    want_s = (mean.abs().amax(1) / 448.0).clamp(min=1e-8)
    _close(scale, want_s, 1e-5)
    _close(pooled.float() * scale[:, None], mean, 0.08 * mean.abs().max().item())


@pytest.mark.gpu
def test_quantisation_and_norms_on_gpu():
    import torch
    torch.manual_seed(1)
    x = torch.randn(256, 512, device="cuda").bfloat16() * 3
    q, s = P.act_quant_group_fp8()(x)
    g = x.float().reshape(256, 4, 128)
    want_s = (g.abs().amax(2) / 448.0).clamp(min=1e-4)
    _close(s, want_s, 1e-6)
    want_q = (g / want_s[:, :, None]).clamp(-448, 448).reshape(256, 512).to(torch.float8_e4m3fn)
    # within one float8 step (x / s may round differently by an ulp before the conversion)
    # (one step of e4m3's 3-bit mantissa is up to 1/8 of the value; 2^-9 among subnormals;
    # seen on an H200: 22 of 131072 values one step off)
    torch.testing.assert_close(q.float(), want_q.float(), rtol=0.13, atol=2 ** -9)
    assert (q.float() == want_q.float()).float().mean() > 0.99
    # mHC pre
    xs = torch.randn(19, 4, 256, device="cuda").bfloat16()
    gates = torch.randn(19, 4, device="cuda")
    y = P.mhc_pre_rms_gate()(xs, gates)
    xf = xs.float()
    r = torch.rsqrt(xf.pow(2).mean((1, 2)) + 1e-6)
    want = (torch.sigmoid(gates)[:, :, None] * xf).sum(1) * r[:, None]
    _close(y, want, 2e-2)
    # add + RMSNorm, ragged rows
    x = torch.randn(100, 1024, device="cuda").bfloat16()
    res = torch.randn(100, 1024, device="cuda").bfloat16()
    w = torch.randn(1024, device="cuda").bfloat16()
    rout, y = P.fused_add_rmsnorm()(x, res, w)
    h = x.float() + res.float()
    _close(rout, h, 2e-2)
    _close(y, h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6) * w.float(), 3e-2)
    # online softmax over ragged tiles
    x = torch.randn(64, 3000, device="cuda") * 4
    _close(P.online_softmax_two_pass()(x), torch.softmax(x, 1), 1e-5)


@pytest.mark.gpu
def test_chunked_linear_attention_on_gpu():
    import torch
    torch.manual_seed(2)
    g = torch.randn(2, 256, 4, device="cuda")
    for rev in (False, True):
        out = P.chunk_local_cumsum(reverse=rev)(g)
        gc = g.reshape(2, 4, 64, 4)
        want = gc.flip(2).cumsum(2).flip(2) if rev else gc.cumsum(2)
        _close(out, want.reshape(2, 256, 4), 1e-4)
    # scaled K K^T
    B, S, H, DK, C = 2, 128, 2, 64, 64
    k = torch.randn(B, S, H, DK, device="cuda").half() * 0.3
    beta = torch.rand(B, S, H, device="cuda")
    gg = -torch.rand(B, S, H, device="cuda").reshape(B, S // C, C, H).cumsum(2).reshape(B, S, H) * 0.1
    A = P.chunk_scaled_kkt()(k, beta, gg)
    kc = k.float().reshape(B, S // C, C, H, DK)
    gcn = gg.reshape(B, S // C, C, H)
    kk = torch.einsum("bnihd,bnjhd->bnhij", kc, kc)
    gate = torch.exp(gcn.permute(0, 1, 3, 2)[..., :, None] - gcn.permute(0, 1, 3, 2)[..., None, :])
    mask = torch.tril(torch.ones(C, C, device="cuda"), -1)
    want = kk * gate * beta.reshape(B, S // C, C, H).permute(0, 1, 3, 2)[..., :, None] * mask
    _close(A, want.permute(0, 1, 3, 2, 4).reshape(B, S, H, C), 2e-2)
    # chunk output
    B, S, H, D, C = 1, 128, 2, 64, 64
    q = torch.randn(B, S, H, D, device="cuda").half() * 0.3
    k = torch.randn(B, S, H, D, device="cuda").half() * 0.3
    v = torch.randn(B, S, H, D, device="cuda").half()
    hs = (torch.randn(B, S // C, H, D, D, device="cuda") * 0.1).half()
    gg = -torch.rand(B, S, H, device="cuda").reshape(B, S // C, C, H).cumsum(2).reshape(B, S, H) * 0.05
    o = P.chunk_gated_output()(q, k, v, hs, gg)
    qc, kc, vc = (t.float().reshape(B, S // C, C, H, D).permute(0, 1, 3, 2, 4) for t in (q, k, v))
    gcn = gg.reshape(B, S // C, C, H).permute(0, 1, 3, 2)
    att = qc @ kc.transpose(-1, -2) * torch.exp(gcn[..., :, None] - gcn[..., None, :])
    att = att * torch.tril(torch.ones(C, C, device="cuda")) * 0.125
    inter = (qc * torch.exp(gcn)[..., None] * 0.125) @ hs.float().permute(0, 1, 2, 3, 4)
    want = (att @ vc + inter).permute(0, 1, 3, 2, 4).reshape(B, S, H, D)
    _close(o, want, 3e-2)
    # chunk states of linear attention
    B, S, H, D, C = 1, 256, 2, 64, 64
    k = torch.randn(B, S, H, D, device="cuda").half() * 0.3
    v = torch.randn(B, S, H, D, device="cuda").half() * 0.3
    hs = P.linear_attn_chunk_states()(k, v)
    kv = torch.einsum("bnchk,bnchv->bnhkv", k.float().reshape(B, S // C, C, H, D), v.float().reshape(B, S // C, C, H, D))
    want = torch.cat([torch.zeros_like(kv[:, :1]), kv.cumsum(1)[:, :-1]], 1)
    _close(hs, want, 2e-2)
    # KDA intra-chunk scores
    B, S, H, DK, C = 1, 128, 2, 32, 16
    q = torch.randn(B, S, H, DK, device="cuda") * 0.3
    k = torch.randn(B, S, H, DK, device="cuda") * 0.3
    gk = -torch.rand(B, S, H, DK, device="cuda").reshape(B, S // C, C, H, DK).cumsum(2) * 0.1
    A = P.kda_intra_chunk_scores()(q, k, gk.reshape(B, S, H, DK).contiguous())
    qc, kc = q.reshape(B, S // C, C, H, DK), k.reshape(B, S // C, C, H, DK)
    want = (qc[:, :, :, None] * kc[:, :, None, :] * torch.exp(gk[:, :, :, None] - gk[:, :, None, :])).sum(-1)
    want = want * torch.tril(torch.ones(C, C, device="cuda"))[None, None, :, :, None]
    _close(A, want.reshape(B, S, C, H).permute(0, 1, 3, 2), 1e-4)


def _vertical_columns(H, S, width, counts):
    """Per head of batch entry 0, ``counts[h]`` ascending key columns (column 0 always
    listed) in a ``width``-wide int32 list, their counts, and the causal mask they give."""
    import torch

    idx = torch.zeros(1, H, width, dtype=torch.int32, device="cuda")
    cnt = torch.tensor([list(counts)], dtype=torch.int32, device="cuda")
    mask = torch.zeros(1, H, S, S, dtype=torch.bool, device="cuda")
    for h in range(H):
        n_c = int(cnt[0, h])
        cols = torch.cat([torch.zeros(1, dtype=torch.long), torch.randperm(S - 1)[:n_c - 1] + 1]).sort().values
        idx[0, h, :n_c] = cols.int().cuda()
        mask[0, h][:, cols.cuda()] = True
    mask &= torch.tril(torch.ones(S, S, dtype=torch.bool, device="cuda"))
    return idx, cnt, mask


def _attn_ref(q, k, v, mask=None, scale=None, sink=None):
    import torch
    s = (q.float() @ k.float().transpose(-1, -2)) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if sink is not None:
        s = torch.cat([s, sink.expand(*s.shape[:-1], 1)], -1)
    p = torch.softmax(s, -1)
    if sink is not None:
        p = p[..., :-1]
    return p @ v.float()


@pytest.mark.gpu
def test_attention_variants_on_gpu():
    import torch
    torch.manual_seed(3)
    B, H, S, D = 1, 2, 256, 64
    q, k, v = (torch.randn(B, H, S, D, device="cuda").half() for _ in range(3))
    o, lse = P.block_causal_attention()(q, k, v)
    i = torch.arange(S, device="cuda")
    mask = (i[None, :] // 128) <= (i[:, None] // 128)
    _close(o, _attn_ref(q, k, v, mask), 2e-2)
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(D)
    _close(lse, torch.logsumexp(s.masked_fill(~mask, float("-inf")), -1) / math.log(2), 2e-2)
    # block-sparse with the diagonal always on
    bm = torch.rand(B, H, 4, 4, device="cuda") < 0.4
    bm |= torch.eye(4, dtype=torch.bool, device="cuda")
    o = P.block_sparse_attention_mask()(q, k, v, bm)
    full = bm.repeat_interleave(64, 2).repeat_interleave(64, 3)
    _close(o, _attn_ref(q, k, v, full), 2e-2)
    # sink
    B, H, S = 1, 4, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda").half() for _ in range(3))
    sink = torch.randn(H, device="cuda")
    o = P.attention_with_sink()(q, k, v, sink)
    _close(o, _attn_ref(q, k, v, sink=sink[None, :, None, None]), 2e-2)
    # vertical columns: column 0 always listed, ascending, per-(b, h) counts
    B, H, S = 1, 2, 256
    q, k, v = (torch.randn(B, H, S, D, device="cuda").half() for _ in range(3))
    idx, cnt, mask = _vertical_columns(H, S, 64, (40, 64))
    o = P.vertical_column_sparse_attn()(q, k, v, idx, cnt)
    _close(o, _attn_ref(q, k, v, mask), 2e-2)
    # the same over 128-column lists through the async prefetch ring (counts 100 and 128)
    idx, cnt, mask = _vertical_columns(H, S, 128, (100, 128))
    o = P.vertical_prefetch_async()(q, k, v, idx, cnt)
    _close(o, _attn_ref(q, k, v, mask), 2e-2)
    # top-k index MQA: query s lists random rows, some -1, at least one valid
    S_, SKV, H, topk = 64, 512, 16, 128
    qm = torch.randn(S_, H, D, device="cuda").bfloat16()
    kv = torch.randn(SKV, D, device="cuda").bfloat16()
    idx = torch.stack([torch.randperm(SKV, device="cuda")[:topk] for _ in range(S_)]).int()
    idx[torch.rand(S_, topk, device="cuda") < 0.3] = -1
    idx[:, 0] = 7
    o = P.topk_index_sparse_mqa()(qm, kv, idx)
    want = []
    for s_ in range(S_):
        rows = idx[s_][idx[s_] >= 0].long()
        kk = kv[rows].float()
        want.append(torch.softmax(qm[s_].float() @ kk.T / math.sqrt(D), -1) @ kk)
    _close(o, torch.stack(want), 3e-2)


@pytest.mark.gpu
def test_flash_decoding_on_gpu():
    import torch
    torch.manual_seed(4)
    B, H, S, D = 4, 8, 1000, 64
    q = torch.randn(B, H, D, device="cuda").half()
    k = torch.randn(B, S, H, D, device="cuda").half()
    v = torch.randn(B, S, H, D, device="cuda").half()
    opart, lpart = P.decode_split_kv()(q, k, v)
    o = P.decode_combine()(opart, lpart)
    want = _attn_ref(q[:, :, None, :], k.transpose(1, 2), v.transpose(1, 2))[:, :, 0]
    _close(o, want, 2e-2)
    # each split alone is that range's softmax
    s = (q.float()[:, :, None, :] @ k.float().permute(0, 2, 3, 1))[:, :, 0] / math.sqrt(D)
    _close(lpart[..., 0], torch.logsumexp(s[..., :250], -1) / math.log(2), 2e-2)


@pytest.mark.gpu
def test_transforms_selection_and_gemv_on_gpu():
    import torch
    torch.manual_seed(5)
    x = torch.randn(64, 256, device="cuda")
    hmat = torch.ones(1, 1, device="cuda")
    for _ in range(8):
        hmat = torch.cat([torch.cat([hmat, hmat], 1), torch.cat([hmat, -hmat], 1)], 0)
    _close(P.hadamard_rows()(x), x @ hmat / 16.0, 1e-4)
    # top-k with ties
    x = torch.randint(-20, 20, (128, 64), device="cuda").float()
    vals, idx = P.topk_rows_reduce_max()(x)
    want_v = x.sort(dim=1, descending=True, stable=True)
    _close(vals, want_v.values[:, :4], 0)
    assert torch.equal(idx.long(), want_v.indices[:, :4])
    # split-K GEMV
    w = torch.randn(512, 4096, device="cuda").half()
    xv = torch.randn(4096, device="cuda").half()
    y = torch.zeros(512, device="cuda")
    P.gemv_split_k()(w, xv, y)
    _close(y, w.float() @ xv.float(), 5e-2)
    # int4 GEMM
    A = torch.randn(128, 256, device="cuda").half()
    qv = torch.randint(0, 16, (128, 256), device="cuda", dtype=torch.uint8)
    packed = (qv[:, 0::2] | (qv[:, 1::2] << 4)).contiguous()
    scale = (torch.rand(128, 4, device="cuda") * 0.1).half()
    c = P.int4_dequant_gemm()(A, packed, scale)
    wdq = (qv.float() - 8) * scale.float().repeat_interleave(64, 1)
    _close(c, A.float() @ wdq.T, 5e-2)
    # indexer score
    q = torch.randn(128, 8, 64, device="cuda").half()
    kc = torch.randn(256, 64, device="cuda").half()
    wh = torch.randn(128, 8, device="cuda")
    sc = P.indexer_weighted_relu_scores()(q, kc, wh)
    want = (torch.relu(torch.einsum("shd,td->sht", q.float(), kc.float())) * wh[:, :, None]).sum(1)
    _close(sc, want, 5e-2)


@pytest.mark.gpu
def test_moe_and_grouped_gemm_on_gpu():
    import torch
    torch.manual_seed(6)
    T_tok, D, topk = 200, 128, 2
    x = torch.randn(T_tok, D, device="cuda").bfloat16()
    expert = torch.randint(0, 4, (T_tok * topk,), device="cuda")
    order = torch.argsort(expert, stable=True).int()
    pad = torch.full((17,), T_tok * topk, dtype=torch.int32, device="cuda")
    sorted_ids = torch.cat([order, pad])
    xs = P.moe_gather_sorted_tokens()(x, sorted_ids)
    want = torch.zeros(sorted_ids.numel(), D, device="cuda")
    want[:order.numel()] = x[order.long() // topk].float()
    _close(xs, want, 0)
    ys = torch.randn(sorted_ids.numel(), D, device="cuda")
    wt = torch.rand(T_tok * topk, device="cuda")
    out = torch.zeros(T_tok, D, device="cuda")
    P.moe_weighted_combine()(ys, sorted_ids, wt, out)
    want = torch.zeros(T_tok, D, device="cuda")
    want.index_add_(0, order.long() // topk, ys[:order.numel()] * wt[order.long()][:, None])
    _close(out, want, 1e-4)
    # grouped GEMM over ragged groups (one empty)
    offs = torch.tensor([0, 70, 70, 200], dtype=torch.int32)
    tiles = torch.tensor([0, 2, 2, 5], dtype=torch.int32)  # 64-row tiles per group: 2, 0, 3
    a = torch.randn(200, 128, device="cuda").half()
    w = torch.randn(3, 128, 128, device="cuda").half() * 0.1
    c = P.grouped_gemm_offsets()(a, w, offs.cuda(), tiles.cuda())
    want = torch.cat([a[offs[g]:offs[g + 1]].float() @ w[g].float() for g in range(3)])
    _close(c, want, 5e-2)


@pytest.mark.gpu
def test_mhc_roles_and_tf32_on_gpu():
    import torch
    torch.manual_seed(7)
    hc = 4
    mixes = torch.randn(37, hc + hc * hc, device="cuda")
    comb, pre = P.mhc_sinkhorn_roles(mixes)
    cm = torch.softmax(mixes[:, hc:].reshape(37, hc, hc), -1) + 1e-6
    for _ in range(3):
        cm = cm / (cm.sum(1, keepdim=True) + 1e-6)
        cm = cm / (cm.sum(2, keepdim=True) + 1e-6)
    _close(comb, cm, 1e-5)
    _close(pre, torch.sigmoid(mixes[:, :hc]), 1e-6)
    x = torch.randn(128, 512, device="cuda")
    fn = torch.randn(24, 512, device="cuda")
    out, sq = P.mhc_tf32_gemm_sqrsum()(x, fn)
    _close(out, x @ fn.T, 0.1)  # TF32 inputs
    _close(sq, x.pow(2).sum(1), 1e-3)


@pytest.mark.gpu
def test_sparse_dkv_scatter_on_gpu():
    import torch
    torch.manual_seed(8)
    S, SKV, H, D, topk = 32, 256, 64, 64, 128
    q = torch.randn(S, H, D, device="cuda").half()
    do = torch.randn(S, H, D, device="cuda").half()
    pm = torch.rand(S, H, topk, device="cuda").half()
    dp = torch.randn(S, H, topk, device="cuda").half()
    idx = torch.randint(0, SKV, (S, topk), device="cuda", dtype=torch.int32)  # repeats land twice
    dkv = torch.zeros(SKV, D, device="cuda")
    P.sparse_dkv_scatter()(q, do, pm, dp, idx, dkv)
    per_row = dp.float().transpose(1, 2) @ q.float() + pm.float().transpose(1, 2) @ do.float()  # (S, topk, D)
    want = torch.zeros(SKV, D, device="cuda").index_add_(0, idx.reshape(-1).long(), per_row.reshape(-1, D))
    _close(dkv, want, 5e-2)


@pytest.mark.gpu
def test_gdn_chunk_delta_h_on_gpu():
    import torch
    torch.manual_seed(9)
    B, S, H, DK, DV, C = 1, 256, 2, 64, 64, 64
    k = (torch.randn(B, S, H, DK, device="cuda") * 0.1).half()
    w = (torch.randn(B, S, H, DK, device="cuda") * 0.1).half()
    u = torch.randn(B, S, H, DV, device="cuda").half()
    g = -(torch.rand(B, S, H, device="cuda") * 0.05).reshape(B, S // C, C, H).cumsum(2).reshape(B, S, H)
    hs, vn = P.gdn_chunk_delta_h()(k, w, u, g)
    h = torch.zeros(B, H, DK, DV, device="cuda")
    want_h, want_v = [], []
    for c in range(S // C):
        sl = slice(c * C, (c + 1) * C)
        h16 = h.half().float()  # the state enters the gemms as float16
        want_h.append(h16)
        kc, wc, uc, gc = (t[:, sl].transpose(1, 2).float() for t in (k, w, u, g))  # (B, H, C, ...)
        v_new = uc - wc @ h16
        want_v.append(v_new)
        glast = gc[..., -1]
        scaled = (v_new * torch.exp(glast[..., None] - gc)[..., None]).half().float()
        h = h * torch.exp(glast)[..., None, None] + kc.transpose(-1, -2) @ scaled
    _close(hs, torch.stack(want_h, 1), 2e-2)
    _close(vn, torch.cat(want_v, 2).transpose(1, 2), 2e-2)


def test_mhc_pre_variants_hold_their_columns():
    """hc=8, hidden=512: x_f one column of each stream a thread (4 columns x 8 streams); at
    hidden=64 the columns are short of a round of the 128 threads: x_f stays whole."""
    src = _body("mhc_pre_rms_gate", hc=8, hidden=512)
    assert "x_f = cute.make_rmem_tensor((32,), cutlass.Float32)  # blocked: 1 consecutive" in src
    assert "* x_f[i_1_ * 4 + tc_k" in src
    src = _body("mhc_pre_rms_gate", hc=4, hidden=64)
    assert "x_f = cute.make_rmem_tensor((256,), cutlass.Float32)  # replicated" in src


@pytest.mark.gpu
@pytest.mark.parametrize("hc,hidden", [(4, 256), (8, 512), (4, 64), (2, 128)])
def test_mhc_pre_shapes_on_gpu(hc, hidden):
    import torch
    torch.manual_seed(hc * hidden)
    xs = torch.randn(23, hc, hidden, device="cuda").bfloat16()
    gates = torch.randn(23, hc, device="cuda")
    y = P.mhc_pre_rms_gate(hc=hc, hidden=hidden)(xs, gates)
    xf = xs.float()
    r = torch.rsqrt(xf.pow(2).mean((1, 2)) + 1e-6)
    want = (torch.sigmoid(gates)[:, :, None] * xf).sum(1) * r[:, None]
    _close(y, want, 2e-2)
