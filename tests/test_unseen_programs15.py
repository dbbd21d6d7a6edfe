"""A fifteenth set of programs in TileLang's idioms (tests/unseen_programs15.py), all from
the attention / sequence-model family, as ``@tilecute.jit(out_idx=...)`` factories:
varlen with bottom-right causal alignment, left / right windows, ALiBi slopes from a
tensor, soft-capping before the tail mask, additive and accumulator-initialising biases,
a bool key-padding mask, GQA at 96 / 64, head dim 192 / 128 and 32, RoPE fused into the
loads, sink tokens plus a window, fewer queries than keys, per-head descales, packed QKV,
a two-pass probability kernel, speculative / paged / split-KV / MLA-like decode, a
backward with tile-atomic dQ and a tail, chunked linear attention, retention and Mamba-2
chunk pieces.  CPU: each builds to an sm_90a cubin, and what the attention passes do
to these programs is checked in the generated source.  GPU: each matches a float32
torch reference at lengths that are not tile multiples."""

import itertools
import math

import pytest

import tilecute

import rounds
import unseen_programs15 as P

PROGRAMS = ["fa_varlen_bottom_right", "fa_window_left_right", "fa_alibi_slopes_tensor",
            "fa_softcap_then_tail_mask", "fa_additive_bias_tensor", "fa_relpos_bias_initialises_scores",
            "fa_key_padding_mask", "fa_gqa_d96_dv64", "fa_d192_dv128", "fa_d32_two_warpgroups",
            "fa_rope_fused_loads", "fa_sink_tokens_window", "fa_causal_fewer_queries",
            "fa_per_head_descale", "fa_packed_qkv_3_stages", "attn_probs_two_pass", "spec_decode_gqa",
            "paged_decode_two_pages_a_tile", "split_kv_decode_partials", "split_kv_combine",
            "mla_decode_rope_part", "bwd_delta", "bwd_kv_major_atomic_dq", "bwd_dq_post",
            "linear_attn_chunk_state", "retention_chunk_recurrent", "mamba2_chunk_cumsum_states",
            "fa_normalised_every_step", "fa_sum_into_running_clear_false", "fa_user_lazy_rescale",
            "mamba2_chunk_scan_output", "fa_doc_mask_from_fragment", "fa_mask_init_then_softcap",
            "fa_p_through_shared"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_kernel = rounds.kernel_of(P)
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, _kernel)


# the forward programs again at FlashAttention-3's tile (128 x 128 over two compute
# warpgroups): here the warp specialization, the MMA overlap, the mask fold, the deferred
# row sums and the warpgroups' turns rewrite the programs
BIG = ["fa_varlen_bottom_right", "fa_window_left_right", "fa_alibi_slopes_tensor",
       "fa_softcap_then_tail_mask", "fa_additive_bias_tensor", "fa_relpos_bias_initialises_scores",
       "fa_key_padding_mask", "fa_gqa_d96_dv64", "fa_d192_dv128", "fa_rope_fused_loads",
       "fa_sink_tokens_window", "fa_causal_fewer_queries", "fa_per_head_descale", "fa_packed_qkv_3_stages",
       "fa_normalised_every_step", "fa_sum_into_running_clear_false", "fa_user_lazy_rescale",
       "fa_doc_mask_from_fragment", "fa_mask_init_then_softcap", "fa_p_through_shared"]


def _big(name):
    kw = dict(block_M=128, block_N=128, threads=256)
    if name not in ("fa_gqa_d96_dv64", "fa_d192_dv128"):
        kw["dim"] = 128
    return _kernel(name, **kw)


@pytest.mark.parametrize("name", BIG)
def test_big_tile_program_builds_a_cubin(name):
    assert _big(name).ensure_cubin()


def test_head_dim_256_key_padding_builds_a_cubin():
    assert P.fa_key_padding_mask(dim=256, block_M=128, block_N=64, threads=256).ensure_cubin()


@pytest.mark.parametrize("big", [False, True])
def test_varlen_with_dynamic_totals_builds_a_cubin(big):
    kw = dict(dim=128, block_M=128, block_N=128, threads=256) if big else {}
    kern = P.fa_varlen_bottom_right(dynamic_totals=True, **kw)
    assert kern.ensure_cubin()
    assert "total_q: cutlass.Int32" in kern.get_kernel_source()


# ---- what the attention passes make of these programs ---------------------------------------
def _loop_of(src):
    """The steady loop of the compute warpgroups (after the producer's branch)."""
    body = src[src.index("setmaxregister_increase"):]
    return body[body.index("for k in cutlass.range("):]


def test_a_mask_read_from_a_tensor_is_added_after_the_first_gemm():
    """fa_key_padding_mask at 128 x 128: the scores start at 0 / -inf from KeyMask (a bool
    tensor) before the GEMM adds to them; the mask fold runs the GEMM from 0 and adds the
    mask after it, the tensor read still guarded by the key bound."""
    src = _big("fa_key_padding_mask").get_kernel_source()
    assert "setmaxregister_decrease" in src  # a producer warpgroup: the overlapped loop
    loop = _loop_of(src)
    g1 = loop.index("# T.gemm(q_s, k_s, acc_s): acc_s = q_s @ k_s^T")
    mask = loop.index("KeyMask[bz, k * 128 + (j + tc_lane")
    assert g1 < mask < loop.index('tcrow.reduce_rows(acc_s, m, "max"')
    assert "accumulate=False" in loop[g1:mask]
    assert "= acc_s[tc_r16 + tc_lane17] + cutlass.select_(k * 128 + (j + tc_lane17) < 1000 and tc_ld18, " \
        "cutlass.Float32(0.0), cutlass.Float32(float(\"-inf\")))" in loop, loop
    assert "if k * 128 + (j + tc_lane17) < 1000:\n" in loop


def test_a_varlen_mask_fold_is_guarded_by_the_sequence_lengths():
    """fa_varlen_bottom_right at 128 x 128: the fold's guard (some element of the tile is
    masked) is written in the lengths read from cu_seqlens (off = len_k - len_q, k_len)."""
    loop = _loop_of(_big("fa_varlen_bottom_right").get_kernel_source())
    assert "if bx * 128 + off - k * 128 + -127 < 0 or k * 128 - k_len + 127 >= 0:" in loop, loop
    assert "+ cutlass.select_(bx * 128 + i + off >= k * 128 + (j + tc_lane17) and " \
        "k * 128 + (j + tc_lane17) < k_len, cutlass.Float32(0.0)" in loop


def test_scores_initialised_by_a_bias_are_accumulated_into():
    """fa_relpos_bias_initialises_scores: the scores start at RelB values (not 0 / inf), so
    no fold: the bias is written first and the GEMM adds to it (no accumulate=False)."""
    src = _big("fa_relpos_bias_initialises_scores").get_kernel_source()
    init = src.index("tc_ld7 = RelB[by, rel]")
    g1 = src.index("# T.gemm(q_s, k_s, acc_s): acc_s += q_s @ k_s^T")
    assert init < g1
    call = src[g1:src.index("\n", src.index("tcm.gemm(", g1))]
    assert "accumulate=False" not in call, call


def test_softcap_runs_before_the_tail_mask_after_the_gemm():
    """fa_softcap_then_tail_mask: the tanh, then the select of the tail mask, both after
    the GEMM from 0; the select is not turned into an added mask (its kept value is the
    score, not 0)."""
    loop = _loop_of(_big("fa_softcap_then_tail_mask").get_kernel_source())
    tanh = loop.index("cute.math.tanh(")
    sel = loop.index("cutlass.select_(k * 128 + (j_1_ + tc_lane")
    assert loop.index("accumulate=False") < tanh < sel < loop.index('tcrow.reduce_rows(acc_s, m, "max"')
    assert "+ cutlass.select_" not in loop


def test_alibi_bias_is_added_before_the_row_max():
    loop = _loop_of(_big("fa_alibi_slopes_tensor").get_kernel_source())
    bias = loop.index("slope * cutlass.Float32(k * 128 + (j + tc_lane")
    assert bias < loop.index('tcrow.reduce_rows(acc_s, m, "max"')


def test_a_guarded_row_max_feeds_the_rescale_and_the_exponent():
    """fa_window_left_right: m_safe (0 while the row max is -inf) is what the rescale and
    the exponent subtract, in the overlapped loop too."""
    loop = _loop_of(_big("fa_window_left_right").get_kernel_source())
    assert "cute.math.exp2(m_prev[tc_q21] * cutlass.Float32(0.1275174307460247) - m_safe[tc_q21] * " in loop, loop
    assert "- m_safe[tcrow.row_of(acc_s, tc_r" in loop


def test_a_mask_written_inf_first_is_added_before_the_softcap():
    """fa_mask_init_then_softcap: the scores start at -inf / 0 (the -inf branch first) and
    are soft-capped after the GEMM; the folded mask is added right after the GEMM, before
    the tanh (a masked score is -softcap, as the program says), and skipped at step 0
    (no key of tile 0 is past the end)."""
    src = _big("fa_mask_init_then_softcap").get_kernel_source()
    loop = _loop_of(src)
    add = loop.index("+ cutlass.select_(k * 128 + (j + tc_lane")
    assert loop.index("accumulate=False") < add < loop.index("cute.math.tanh(")
    first = src[src.index("setmaxregister_increase"):src.index("for k in cutlass.range(")]
    assert "cutlass.select_" not in first and "cute.math.tanh(" in first


def test_a_mask_reading_a_row_fragment_is_folded():
    """fa_doc_mask_from_fragment: the condition reads the rows' document ids from a
    fragment and the keys' from the tensor; folded after the GEMM, it still reads both."""
    loop = _loop_of(_big("fa_doc_mask_from_fragment").get_kernel_source())
    assert loop.index("accumulate=False") < loop.index(
        "+ cutlass.select_(k * 128 + (j + tc_lane21) < 1000 and qdoc[tcrow.row_of(acc_s, tc_r19)] == ")


def test_two_gemms_into_the_scores_are_chained():
    """mla_decode_rope_part: q_nope . kv from 0, then q_pe . k_pe added to it."""
    src = _kernel("mla_decode_rope_part", dim=256, pe_dim=64).get_kernel_source()
    first = src.index("# T.gemm(qn_s, kv_s, acc_s): acc_s = qn_s @ kv_s^T")
    second = src.index("# T.gemm(qp_s, kp_s, acc_s): acc_s += qp_s @ kp_s^T")
    assert first < second
    assert "accumulate=False" not in src[second:src.index("\n", src.index("tcm.gemm(", second))]


def test_a_macro_defined_inside_the_prim_func_is_refused_by_name():
    """A ``def`` nested in a prim_func body (TileLang's programs define their macros in
    the factory, as fa_sink_tokens_window does) is refused by name, not misread."""
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match="`functiondef` statements are not supported"):
        @T.prim_func
        def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                @T.macro
                def twice(i):
                    Y[i] = X[i] * 2.0
                twice(0)


# ---- on the GPU -------------------------------------------------------------------------------
LOG2E = 1.0 / math.log(2.0)


_r = rounds.randn
_close = rounds.close


def _rel(got, want, tol):
    err = (got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12)
    assert err < tol, float(err)


def _attn(q, k, v, scale, mask=None, bias=None, softcap=None):
    """softmax(q k^T * scale (+ bias), masked) v and the natural-log LSE, in float32;
    q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv], mask [..., Sq, Sk] (True: keep)."""
    import torch
    s = q.float() @ k.float().transpose(-1, -2) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.float()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v.float(), lse


def _bshd(x):
    return x.permute(0, 2, 1, 3)


def _causal(sq, sk, off=0):
    import torch
    i = torch.arange(sq, device="cuda")[:, None]
    j = torch.arange(sk, device="cuda")[None, :]
    return j <= i + off


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("dynamic", [False, True])
def test_varlen_bottom_right_on_gpu(big, dynamic):
    import torch
    torch.manual_seed(0)
    lq, lk, H, D = [1, 127, 60], [1, 300, 200], 2, (128 if big else 64)
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    kern = P.fa_varlen_bottom_right(dynamic_totals=dynamic, **kw)
    cq = torch.tensor([0] + list(itertools.accumulate(lq)), dtype=torch.int32, device="cuda")
    ck = torch.tensor([0] + list(itertools.accumulate(lk)), dtype=torch.int32, device="cuda")
    q = _r(sum(lq), H, D, dtype=torch.float16)
    k, v = _r(sum(lk), H, D, dtype=torch.float16), _r(sum(lk), H, D, dtype=torch.float16)
    o, lse = kern(q, k, v, cq, ck)
    for b in range(3):
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        want, wl = _attn(q[qs].transpose(0, 1), k[ks].transpose(0, 1), v[ks].transpose(0, 1), D ** -0.5,
                         mask=_causal(lq[b], lk[b], lk[b] - lq[b]))
        _close(o[qs].transpose(0, 1), want, 1e-2)
        _close(lse[:, qs], wl * LOG2E, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_window_left_right_and_sinks_on_gpu(big):
    import torch
    torch.manual_seed(1)
    B, S, H = 1, 1000, 2
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    q, k, v = (_r(B, S, H, D, dtype=torch.bfloat16) for _ in range(3))
    i = torch.arange(S, device="cuda")[:, None]
    j = torch.arange(S, device="cuda")[None, :]
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=(j >= i - 100) & (j <= i + 37))
    _close(_bshd(P.fa_window_left_right(**kw)(q, k, v)), want, 3e-2)
    q, k, v = (x.half() for x in (q, k, v))
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=(j <= i) & ((j < 4) | (i - j < 128)))
    _close(_bshd(P.fa_sink_tokens_window(**kw)(q, k, v)), want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_biased_and_capped_attention_on_gpu(big):
    import torch
    torch.manual_seed(2)
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    # ALiBi (slopes from a tensor), causal, natural LSE
    B, S, H = 1, 1000, 4
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")
    i = torch.arange(S, device="cuda")[:, None]
    j = torch.arange(S, device="cuda")[None, :]
    bias = slopes[:, None, None] * (j - i).float()[None]
    o, lse = P.fa_alibi_slopes_tensor(**kw)(q, k, v, slopes)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=_causal(S, S), bias=bias)
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)
    # soft-capping before the tail mask (BHSD), float32 out, log2 LSE
    B, S, H = 1, 1000, 2
    q, k, v = (_r(B, H, S, D, dtype=torch.float16, scale=2.0) for _ in range(3))
    o, lse = P.fa_softcap_then_tail_mask(**kw)(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5, softcap=20.0)
    _close(o, want, 1e-2)
    _close(lse, wl * LOG2E, 1e-3)
    # an additive bias tensor, cross attention with ragged Sq / Sk, bfloat16
    B, Sq, Sk = 2, 200, 300
    q = _r(B, H, Sq, D, dtype=torch.bfloat16)
    k, v = _r(B, H, Sk, D, dtype=torch.bfloat16), _r(B, H, Sk, D, dtype=torch.bfloat16)
    bias = _r(B, H, Sq, Sk, dtype=torch.float16)
    want, _ = _attn(q, k, v, D ** -0.5, bias=bias)
    _close(P.fa_additive_bias_tensor(**kw)(q, k, v, bias), want, 3e-2)
    # a relative-position bias the scores start at (raw q.k units)
    S = 200
    q, k, v = (_r(S, H, D, dtype=torch.float16) for _ in range(3))
    rel = _r(H, 2 * S - 1, scale=4.0)
    i = torch.arange(S, device="cuda")[:, None]
    j = torch.arange(S, device="cuda")[None, :]
    s = (q.float().transpose(0, 1) @ k.float().transpose(0, 1).transpose(-1, -2) + rel[:, j - i + S - 1]) * D ** -0.5
    want = torch.softmax(s, -1) @ v.float().transpose(0, 1)
    _close(P.fa_relpos_bias_initialises_scores(**kw)(q, k, v, rel).transpose(0, 1), want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("d256", [False, True])
def test_key_padding_mask_on_gpu(big, d256):
    import torch
    torch.manual_seed(3)
    B, S, H = 2, 1000, 2
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    if d256:
        if not big:
            pytest.skip("head dim 256 runs at the big tile only")
        D, kw = 256, dict(dim=256, block_M=128, block_N=64, threads=256)
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    keep = torch.rand(B, S, device="cuda") > 0.3
    keep[1, :300] = False  # whole tiles masked before the first kept key
    keep[1, 500] = True
    o = P.fa_key_padding_mask(**kw)(q, k, v, keep)
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=keep[:, None, None, :].expand(B, H, S, S))
    _close(_bshd(o), want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_head_dims_and_groups_on_gpu(big):
    import torch
    torch.manual_seed(4)
    kw = dict(block_M=128, block_N=128, threads=256) if big else {}
    # GQA, q.k dim 96, value dim 64, causal, log2 LSE
    B, S, HQ, HK = 1, 300, 8, 2
    q = _r(B, S, HQ, 96, dtype=torch.bfloat16)
    k, v = _r(B, S, HK, 96, dtype=torch.bfloat16), _r(B, S, HK, 64, dtype=torch.bfloat16)
    o, lse = P.fa_gqa_d96_dv64(**kw)(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k).repeat_interleave(4, 1), _bshd(v).repeat_interleave(4, 1), 96 ** -0.5,
                     mask=_causal(S, S))
    _close(_bshd(o), want, 3e-2)
    _close(lse, wl * LOG2E, 1e-3)
    # q.k dim 192, value dim 128, natural LSE
    H = 2
    q, k = _r(B, H, S, 192, dtype=torch.float16), _r(B, H, S, 192, dtype=torch.float16)
    v = _r(B, H, S, 128, dtype=torch.float16)
    o, lse = P.fa_d192_dv128(**kw)(q, k, v)
    want, wl = _attn(q, k, v, 192 ** -0.5)
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)


@pytest.mark.gpu
def test_d32_two_warpgroups_on_gpu():
    import torch
    torch.manual_seed(5)
    B, S, H, D = 2, 1000, 2, 32
    q, k, v = (_r(B, S, H, D, dtype=torch.bfloat16) for _ in range(3))
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=_causal(S, S))
    _close(_bshd(P.fa_d32_two_warpgroups()(q, k, v)), want, 3e-2)


def _rope(x, cos, sin):
    """rotate-half RoPE of x [B, S, H, D] (float32) with cos / sin [S, D / 2]."""
    import torch
    h = x.shape[-1] // 2
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_rope_fused_and_fewer_queries_on_gpu(big):
    import torch
    torch.manual_seed(6)
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    B, S, H = 1, 200, 2
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    pos = torch.arange(S, device="cuda").float()[:, None]
    inv = 10000.0 ** (-torch.arange(D // 2, device="cuda").float() * 2 / D)
    cos, sin = torch.cos(pos * inv), torch.sin(pos * inv)
    o = P.fa_rope_fused_loads(**kw)(q, k, v, cos, sin)
    qr, kr = _rope(q.float(), cos, sin).half(), _rope(k.float(), cos, sin).half()
    want, _ = _attn(_bshd(qr), _bshd(kr), _bshd(v), D ** -0.5, mask=_causal(S, S))
    _close(_bshd(o), want, 1e-2)
    # 100 queries over 1000 keys, bottom-right causal
    Sq, Sk = 100, 1000
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    o, lse = P.fa_causal_fewer_queries(**kw)(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=_causal(Sq, Sk, Sk - Sq))
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl * LOG2E, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_descale_packed_qkv_on_gpu(big):
    import torch
    torch.manual_seed(7)
    kw = dict(block_M=128, block_N=128, threads=256) if big else {}
    B, S, H, D = 1, 333, 2, 128
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    qs, ks = torch.tensor([0.5, 2.0], device="cuda"), torch.tensor([1.5, 0.25], device="cuda")
    o, lse = P.fa_per_head_descale(**kw)(q, k, v, qs, ks)
    want, wl = _attn(q * 1.0, k.float() * (qs * ks)[None, :, None, None], v, D ** -0.5)
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)
    D = 128 if big else 64
    if big:
        kw["dim"] = D
    S = 1000
    qkv = _r(B, S, 3, H, D, dtype=torch.float16)
    want, _ = _attn(_bshd(qkv[:, :, 0]), _bshd(qkv[:, :, 1]), _bshd(qkv[:, :, 2]), D ** -0.5)
    _close(_bshd(P.fa_packed_qkv_3_stages(**kw)(qkv)), want, 1e-2)


@pytest.mark.gpu
def test_attention_probabilities_two_pass_on_gpu():
    import torch
    torch.manual_seed(8)
    B, H, Sq, Sk, D = 1, 2, 130, 200, 64
    q, k = _r(B, H, Sq, D, dtype=torch.float16), _r(B, H, Sk, D, dtype=torch.float16)
    want = torch.softmax(q.float() @ k.float().transpose(-1, -2) * D ** -0.5, -1)
    _close(P.attn_probs_two_pass()(q, k), want, 1e-4)


@pytest.mark.gpu
def test_spec_and_paged_decode_on_gpu():
    import torch
    torch.manual_seed(9)
    # speculative decoding: 4 new tokens a sequence, GQA 8 / 2
    B, HQ, HK, T_, L, D = 3, 8, 2, 4, 1000, 64
    q = _r(B, T_, HQ, D, dtype=torch.float16)
    kc, vc = _r(B, L, HK, D, dtype=torch.float16), _r(B, L, HK, D, dtype=torch.float16)
    lens = torch.tensor([4, 130, 1000], dtype=torch.int32, device="cuda")
    o = P.spec_decode_gqa()(q, kc, vc, lens)
    for b in range(B):
        n = int(lens[b])
        kk = kc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        vv = vc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        want, _ = _attn(q[b].transpose(0, 1), kk, vv, D ** -0.5, mask=_causal(T_, n, n - T_))
        _close(o[b].transpose(0, 1), want, 1e-2)
    # paged KV: 32-key pages, two a tile
    B, HQ, HK, D, page, npages, maxp = 3, 32, 2, 128, 32, 100, 32
    q = _r(B, HQ, D, dtype=torch.float16)
    kp, vp = _r(npages, page, HK, D, dtype=torch.float16), _r(npages, page, HK, D, dtype=torch.float16)
    table = torch.randperm(npages, device="cuda")[:B * maxp].reshape(B, maxp).to(torch.int32).contiguous()
    lens = torch.tensor([1, 127, 1000], dtype=torch.int32, device="cuda")
    o = P.paged_decode_two_pages_a_tile()(q, kp, vp, table, lens)
    for b in range(B):
        n = int(lens[b])
        kk = kp[table[b].long()].reshape(-1, HK, D)[:n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        vv = vp[table[b].long()].reshape(-1, HK, D)[:n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        want, _ = _attn(q[b][:, None, :], kk, vv, D ** -0.5)
        _close(o[b], want[:, 0], 1e-2)


@pytest.mark.gpu
def test_split_kv_decode_and_combine_on_gpu():
    import torch
    torch.manual_seed(10)
    B, HQ, L, D, splits = 3, 16, 1000, 64, 4
    q = _r(B, HQ, D, dtype=torch.float16)
    kc, vc = _r(B, L, 1, D, dtype=torch.float16), _r(B, L, 1, D, dtype=torch.float16)
    lens = torch.tensor([1, 127, 1000], dtype=torch.int32, device="cuda")
    op, lp = P.split_kv_decode_partials()(q, kc, vc, lens)
    assert torch.isinf(lp[0, :, 1:]).all() and (lp[0, :, 1:] < 0).all()  # the empty splits
    assert (op[0, :, 1:] == 0).all()
    o, lse = P.split_kv_combine()(op, lp)
    for b in range(B):
        n = int(lens[b])
        want, wl = _attn(q[b][:, None, :], kc[b, :n, 0][None], vc[b, :n, 0][None], D ** -0.5)
        _close(o[b], want[:, 0], 1e-2)
        _close(lse[b], wl[:, 0] * LOG2E, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(128, 32), (256, 64)])
def test_mla_decode_on_gpu(dims):
    import torch
    torch.manual_seed(11)
    D, Dp = dims
    B, H, L = 2, 64, 300
    qn, qp = _r(B, H, D, dtype=torch.bfloat16), _r(B, H, Dp, dtype=torch.bfloat16)
    kv, kp = _r(B, L, D, dtype=torch.bfloat16), _r(B, L, Dp, dtype=torch.bfloat16)
    lens = torch.tensor([1, 300], dtype=torch.int32, device="cuda")
    o, lse = P.mla_decode_rope_part(dim=D, pe_dim=Dp)(qn, qp, kv, kp, lens)
    for b in range(B):
        n = int(lens[b])
        s = (qn[b].float() @ kv[b, :n].float().T + qp[b].float() @ kp[b, :n].float().T) * (D + Dp) ** -0.5
        _close(o[b], torch.softmax(s, -1) @ kv[b, :n].float(), 3e-2)
        _close(lse[b], torch.logsumexp(s, -1), 1e-3)


@pytest.mark.gpu
def test_backward_with_tile_atomic_dq_on_gpu():
    import torch
    torch.manual_seed(12)
    B, S, H, D = 1, 1000, 2, 64
    q, k, v, do = (_r(B, S, H, D, dtype=torch.bfloat16) for _ in range(4))
    qf, kf, vf = (_bshd(x).float().requires_grad_() for x in (q, k, v))
    of, lse = _attn(qf, kf, vf, D ** -0.5, mask=_causal(S, S))
    of.backward(_bshd(do).float())
    o = _bshd(of.detach()).to(torch.bfloat16).contiguous()
    delta = P.bwd_delta()(o, do)
    _close(delta, (o.float() * do.float()).sum(-1).permute(0, 2, 1), 1e-3)
    dq_acc = torch.zeros(B, S, H, D, device="cuda")
    dk, dv = P.bwd_kv_major_atomic_dq()(q, k, v, do, (lse.detach() * LOG2E).contiguous(), delta, dq_acc)
    dq = P.bwd_dq_post()(dq_acc)
    _rel(_bshd(dq), qf.grad, 2e-2)
    _rel(_bshd(dk), kf.grad, 2e-2)
    _rel(_bshd(dv), vf.grad, 2e-2)


@pytest.mark.gpu
def test_linear_attention_and_retention_on_gpu():
    import torch
    torch.manual_seed(13)
    B, L, H, D = 1, 200, 2, 64
    q, k, v = (_r(B, L, H, D, dtype=torch.float16, scale=0.3) for _ in range(3))
    o, st = P.linear_attn_chunk_state()(q, k, v)
    qf, kf, vf = (_bshd(x).float() for x in (q, k, v))
    att = (qf @ kf.transpose(-1, -2)).tril()
    _rel(_bshd(o), att @ vf, 1e-2)
    _rel(st, kf.transpose(-1, -2) @ vf, 1e-2)
    H = 4
    q, k, v = (_r(B, L, H, D, dtype=torch.float16, scale=0.3) for _ in range(3))
    lg = torch.log2(1 - 2.0 ** (-5.0 - torch.arange(H, device="cuda").float()))
    o = P.retention_chunk_recurrent()(q, k, v, lg)
    qf, kf, vf = (_bshd(x).float() for x in (q, k, v))
    i = torch.arange(L, device="cuda")[:, None].float()
    j = torch.arange(L, device="cuda")[None, :].float()
    decay = torch.where(i >= j, torch.exp2((i - j)[None] * lg[:, None, None]), torch.zeros((), device="cuda"))
    _rel(_bshd(o), ((qf @ kf.transpose(-1, -2)) * decay) @ vf, 1e-2)


@pytest.mark.gpu
def test_mamba2_chunk_cumsum_states_on_gpu():
    import torch
    torch.manual_seed(14)
    B, L, H, Pd, N, C = 1, 200, 2, 64, 64, 64
    nc = (L + C - 1) // C
    x, bm = _r(B, L, H, Pd, dtype=torch.float16), _r(B, L, N, dtype=torch.float16)
    dt = torch.nn.functional.softplus(_r(B, H, L))
    A = -torch.rand(H, device="cuda") - 0.5
    cs, states = P.mamba2_chunk_cumsum_states()(x, bm, dt, A)
    pad = nc * C - L
    dtp = torch.nn.functional.pad(dt, (0, pad)).reshape(B, H, nc, C)
    want_cs = torch.cumsum(dtp * A[None, :, None, None], -1)
    _close(cs, want_cs, 1e-4)
    xp = torch.nn.functional.pad(x.float(), (0, 0, 0, 0, 0, pad)).reshape(B, nc, C, H, Pd)
    bp = torch.nn.functional.pad(bm.float(), (0, 0, 0, pad)).reshape(B, nc, C, N)
    w = torch.exp(want_cs[..., -1:] - want_cs) * dtp  # [B, H, nc, C]
    want = torch.einsum("bclhp,bhcl,bcln->bchpn", xp, w, bp)
    _rel(states, want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_other_online_softmax_bookkeeping_on_gpu(big):
    import torch
    torch.manual_seed(15)
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    B, S, H = 1, 1000, 2
    q, k, v = (_r(B, S, H, D, dtype=torch.float16, scale=1.5) for _ in range(3))
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=_causal(S, S))
    _close(_bshd(P.fa_normalised_every_step(**kw)(q, k, v)), want, 1e-2)
    _close(_bshd(P.fa_user_lazy_rescale(**kw)(q, k, v)), want, 1e-2)
    S = 777
    q, k, v = (_r(B, H, S, D, dtype=torch.bfloat16) for _ in range(3))
    o, lse = P.fa_sum_into_running_clear_false(**kw)(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5)
    _close(o, want, 3e-2)
    _close(lse, wl * LOG2E, 1e-3)


@pytest.mark.gpu
def test_mamba2_chunk_scan_output_on_gpu():
    import torch
    torch.manual_seed(16)
    B, L, H, Pd, N, C = 1, 200, 2, 64, 64, 64
    nc = (L + C - 1) // C
    x = _r(B, L, H, Pd, dtype=torch.float16)
    cm, bm = _r(B, L, N, dtype=torch.float16, scale=0.3), _r(B, L, N, dtype=torch.float16, scale=0.3)
    dt = torch.nn.functional.softplus(_r(B, H, L)) * 0.1
    A = -torch.rand(H, device="cuda") - 0.5
    pad = nc * C - L
    dtp = torch.nn.functional.pad(dt, (0, pad)).reshape(B, H, nc, C)
    cs = torch.cumsum(dtp * A[None, :, None, None], -1).contiguous()
    prev = _r(B, nc, H, Pd, N, scale=0.5)
    dsk = torch.tensor([0.5, -1.0], device="cuda")
    y = P.mamba2_chunk_scan_output()(x, cm, bm, dt, cs, prev, dsk)
    xp = torch.nn.functional.pad(x.float(), (0, 0, 0, 0, 0, pad)).reshape(B, nc, C, H, Pd)
    cp = torch.nn.functional.pad(cm.float(), (0, 0, 0, pad)).reshape(B, nc, C, N)
    bp = torch.nn.functional.pad(bm.float(), (0, 0, 0, pad)).reshape(B, nc, C, N)
    cb = cp @ bp.transpose(-1, -2)  # [B, nc, C, C]
    seg = cs[..., :, None] - cs[..., None, :]  # [B, H, nc, C, C]
    keep = torch.ones(C, C, device="cuda", dtype=torch.bool).tril()
    w = torch.where(keep, cb[:, None] * torch.exp(seg) * dtp[..., None, :], torch.zeros((), device="cuda"))
    intra = torch.einsum("bhcls,bcshp->bclhp", w, xp)
    inter = torch.einsum("bcln,bchpn->bclhp", cp, prev) * torch.exp(cs).permute(0, 2, 3, 1)[..., None]
    want = (intra + inter + dsk[None, None, None, :, None] * xp).reshape(B, nc * C, H, Pd)[:, :L]
    _rel(y, want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_masks_meeting_the_fold_on_gpu(big):
    import torch
    torch.manual_seed(17)
    D = 128 if big else 64
    kw = dict(dim=D, block_M=128, block_N=128, threads=256) if big else {}
    B, S, H = 1, 1000, 2
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    # documents: ids from random breaks (some documents shorter than a tile)
    breaks = torch.rand(B, S, device="cuda") < 0.02
    breaks[:, 0] = False
    doc = breaks.cumsum(-1).to(torch.int32).contiguous()
    same = doc[:, :, None] == doc[:, None, :]
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=same[:, None].expand(B, H, S, S))
    _close(_bshd(P.fa_doc_mask_from_fragment(**kw)(q, k, v, doc)), want, 1e-2)
    # the tail mask before a soft-cap: the 24 keys past the end of the last tile (zero K
    # and V rows) score -softcap
    cap = 5.0
    s = _bshd(q).float() @ _bshd(k).float().transpose(-1, -2) * D ** -0.5
    s = cap * torch.tanh(s / cap)
    s = torch.cat([s, torch.full((B, H, S, 24), -cap, device="cuda")], -1)
    vp = torch.cat([_bshd(v).float(), torch.zeros(B, H, 24, D, device="cuda")], -2)
    _close(_bshd(P.fa_mask_init_then_softcap(**kw)(q, k, v)), torch.softmax(s, -1) @ vp, 1e-2)
    # P through shared memory, causal, bfloat16
    q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=_causal(S, S))
    _close(_bshd(P.fa_p_through_shared(**kw)(q, k, v)), want, 3e-2)
