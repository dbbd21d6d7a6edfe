"""A thirty-eighth set of programs in TileLang's idioms (tests/unseen_programs38.py), families
earlier rounds had not tried: rotary embedding fused into a QK projection's epilogue
(half-split over T.dynamic tokens, interleaved from a cos / sin cache on the q / k heads of a
fused QKV projection), MoE permutation / weighted un-permutation through index tensors, a
planar complex GEMM, a 3xBF16 split GEMM, a lower-triangular SYRK, a fused linear
cross-entropy, Swin's shifted-window partition and reverse, M-RoPE, differential attention,
a col2im fold by atomics, flash attention with an in-kernel hash dropout, SageAttention-style
int8 QK scores, tree attention through a packed bitmask, Muon's Newton-Schulz iteration, a
bitonic top-k by nested while loops, a GEMM with a bias + residual + LayerNorm epilogue over
whole rows, an MoE router (gate GEMM, softmax, top-k by rounds of max), a paged MQA decode
walking a sequence's pages by a while loop through its block table and a W8A8 GEMM
dequantized per token x per channel and requantized to float8 per token.

CPU: each builds to an sm_90a and (but the float8 one) an sm_80 cubin, and what decides its
result is read in the generated source.  One fix came from these programs: SageAttention's
idiom converts the int32 score accumulator into a float32 fragment in a T.Parallel nest (so
that fragment takes the accumulator's register layout), reduces its rows, and reads the row
maxima as ``s[i, j] - m[i]`` in a nest over the float32 fragment; the layout pass refused
that nest ("reads 'm', which holds one value per row of a T.gemm accumulator"), asking for
the accumulator itself where a fragment sharing its layout serves as well
(tests/test_row_reductions.py).  The LayerNorm epilogue (``h = acc + bias + residual``, then
``h[i, j] - mean[i]``), the router (``T.copy(acc, p)``, then ``p[i, j] - mx[i]``) and the
W8A8 requantizer (``y = cast(acc) * sa[i] * sw[j]``, then ``y[i, j] / amax[i]``) met the
same refusal.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs38.py``)."""

import re

import pytest
import torch

import tilecute
import rounds
import unseen_programs38 as P

NAMES = ["qk_proj_rope_half_split", "qkv_proj_rope_interleaved", "moe_permute_rows",
         "moe_unpermute_weighted", "complex_gemm_planar", "gemm_3xbf16_split", "syrk_lower_blocks",
         "fused_linear_cross_entropy", "swin_window_partition_shift",
         "swin_window_reverse_residual", "mrope_sections_inplace", "diff_attention_fwd",
         "col2im_fold_atomic", "flash_fwd_hash_dropout", "sage_int8_qk_attention",
         "tree_attention_bitmask", "muon_newton_schulz", "bitonic_topk_while",
         "gemm_bias_residual_layernorm", "router_gemm_softmax_topk", "paged_mqa_decode_while",
         "w8a8_gemm_fp8_requant"]
NO_SM80 = {"w8a8_gemm_fp8_requant"}  # float8 conversions need sm_89+


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - NO_SM80), rounds.tir_of(P), "sm_80")


def test_fp8_requant_is_refused_on_sm80(tmp_path):
    with pytest.raises(Exception, match="float8 values convert only on sm_89"):
        tilecute.build_cubin(P.w8a8_gemm_fp8_requant.get_tir(), "sm_80", out_dir=str(tmp_path))


def test_half_split_rope_reads_the_partner_column_from_shared():
    src = _body("qk_proj_rope_half_split")
    assert ", tokens: cutlass.Int32" in src
    # the partner column (j + 64) % 128 of the staged accumulator, negated for the first half
    assert re.search(r"partner = C_s\[i \* 128 \+ \(\(j \+ tc_lane\d+\) \+ 64\) % 128\]", src)
    assert re.search(r"rot = cutlass\.select_\(\(j \+ tc_lane\d+\) < 64, "
                     r"partner \* cutlass\.Float32\(-1\.0\), partner\)", src)
    assert "inv_freq[(j + tc_lane" in src and "cute.math.cos(theta)" in src
    assert "< tokens:" in src  # the ragged last token tile


def test_interleaved_rope_rotates_only_q_and_k_heads():
    src = _body("qkv_proj_rope_interleaved")
    assert "if bh < 3:" in src  # heads_q + heads_k blocks of columns
    assert re.search(r"C_s\[i \* 64 \+ \(\(j \+ tc_lane\d+\) \^ 1\)\] \* s", src)
    assert "cs[p, (j + tc_lane" in src


def test_moe_permute_scatters_by_the_index_tensor():
    src = _body("moe_permute_rows")
    assert "Xp = cute.make_tensor(Xp_ptr, cute.make_layout((tokens * 2, 512,)" in src
    assert "row = dst[t, k]" in src and "if row >= 0:" in src


def test_moe_unpermute_gathers_and_weighs_in_float32():
    src = _body("moe_unpermute_weighted")
    assert "rows: cutlass.Int32, tokens: cutlass.Int32" in src
    assert "r = src[t, k]" in src and "Yp[cutlass.max(r, 0), bh * 128 + (j + tc_lane" in src
    assert "cutlass.select_(r >= 0, tc_ld" in src


def test_complex_gemm_keeps_three_accumulators():
    src = _body("complex_gemm_planar")
    for acc in ("rr", "ii", "im"):
        assert f"{acc}, tc_{acc}_ij = tcm.accumulator(" in src
    assert src.count("tcm.gemm(") == 4
    assert re.search(r"rr\[(tc_r\d+ \+ tc_lane\d+)\] = rr\[\1\] - ii\[\1\]", src)


def test_3xbf16_splits_each_operand_and_issues_three_gemms():
    src = _body("gemm_3xbf16_split")
    assert re.search(r"h = cutlass\.BFloat16\(a\[[^]]+\]\)", src)
    assert re.search(r"cutlass\.BFloat16\(a\[[^]]+\] - cutlass\.Float32\(h\)\)", src)
    assert src.count("tcm.gemm(tc_mma") == 3
    assert 'tcm.tiled_mma("wgmma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32' in src


def test_syrk_skips_upper_blocks_and_masks_the_diagonal():
    src = _body("syrk_lower_blocks")
    assert "if bx <= by:" in src and "if bx == by:" in src
    assert re.search(r"cutlass\.select_\(i >= \(j \+ tc_lane\d+\), acc\[", src)
    # both operands are panels of A, TMA loads under the block's `if bx <= by:`
    # (tests/test_guarded_pipeline_tma.py)
    assert re.search(r"tct\.load\(A_desc, .*\(tc_j0 \* 64, by \* 64\), 8192\)", src)
    assert re.search(r"tct\.load\(A_desc, .*\(tc_j0 \* 64, bx \* 64\), 8192\)", src)


def test_fused_linear_cross_entropy_picks_the_target_and_updates_online():
    src = _body("fused_linear_cross_entropy")
    assert re.search(r"picked\[[^]]+\] = cutlass\.select_\(v \* 128 \+ \(j \+ tc_lane\d+\) == tid\[", src)
    assert 'tcrow.reduce_rows(picked, tgt, "sum", clear=False)' in src
    assert 'tcrow.reduce_rows(logits, rowmax, "max", clear=True)' in src
    assert "cute.math.log(l[" in src and "== -100" in src


def test_swin_partition_rolls_by_the_shift():
    src = _body("swin_window_partition_shift")
    assert "x[b, (wh * 7 + p // 7 + 3) % 28, (ww * 7 + p % 7 + 3) % 28, ch]" in src


def test_swin_reverse_reads_the_window_of_the_unshifted_pixel():
    src = _body("swin_window_reverse_residual")
    assert "ys = (y - 3 + 28) % 28" in src
    assert "(xx - 3 + 28) % 28 // 7" in src


def test_mrope_chooses_the_position_row_by_section():
    src = _body("mrope_sections_inplace")
    assert "cutlass.select_(f < 16, 0, cutlass.Int32(cutlass.select_(f < 40, 1, 2)))" in src
    assert "pos[sec, t]" in src and "cute.math.pow(" in src
    assert "q[t, h, f + 64] = cutlass.BFloat16(" in src


def test_diff_attention_keeps_two_softmaxes():
    src = _body("diff_attention_fwd")
    assert 'tcrow.reduce_rows(s, m1, "max", clear=False)' in src
    assert 'tcrow.reduce_rows(s, m2, "max", clear=False)' in src
    assert re.search(r"/ l1\[tcrow\.row_of\(o1, tc_r\d+\)\] - lam\[h\] \* o2\[", src)


def test_col2im_steps_by_kernel_rows_and_adds_atomically():
    src = _body("col2im_fold_atomic")
    assert "t = 0 + t_iter * 3" in src
    assert "tca.atomic_add(img, (b, c, y, x), cols[b, c * 3 * 3 + t + dx, l])" in src
    assert "l < 100" in src


def test_dropout_hashes_in_uint32():
    src = _body("flash_fwd_hash_dropout")
    assert "seed: cutlass.Uint32" in src
    assert "cutlass.Uint32(2654435761)" in src and ">> cutlass.Uint32(16)" in src
    assert "cutlass.Uint32(1073741824)" in src  # p = 0.25 of 2^32
    assert "cutlass.Float32(1.3333333333333333)" in src


def test_sage_scores_take_the_int32_accumulators_layout():
    src = _body("sage_int8_qk_attention")
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert "s, tc_s_ij = tcm.accumulator(" in src
    assert re.search(r"s\[(tc_r\d+ \+ tc_lane\d+)\] = cutlass\.Float32\(si\[\1\]\) \* "
                     r"\(qs\[b, h, bx\] \* ks\[b, h, n\]", src)
    assert re.search(r"cute\.math\.exp2\(s\[tc_r\d+ \+ tc_lane\d+\] - m\[tcrow\.row_of\(s, tc_r\d+\)\]\)", src)


def test_tree_attention_tests_the_bit_of_each_tree_key():
    src = _body("tree_attention_bitmask")
    assert "keep = k < 192 or " in src
    assert ">> cutlass.Uint32(" in src and "& cutlass.Uint32(1) == cutlass.Uint32(1)" in src
    assert 'cutlass.Float32(float("-inf"))' in src


def test_newton_schulz_uses_one_tile_as_both_operands():
    src = _body("muon_newton_schulz")
    assert "T.gemm(X_s, X_s, A): A = X_s @ X_s^T" in src
    assert "T.gemm(A_s, A_s, AA): AA = A_s @ A_s" in src
    assert src.count("accumulate=False") == 3
    assert "cute.math.sqrt(tot[0])" in src


def test_bitonic_while_loops_sync_each_step():
    src = _body("bitonic_topk_while")
    assert re.search(r"while size\[0\] <= 1024:\n\s+stride\[0\] = size\[0\] // 2\n\s+while stride\[0\] > 0:"
                     r"\n\s+cute\.arch\.sync_threads\(\)", src)
    assert "desc = t_1_ & size[0] == 0" in src  # (t & size) == 0 by Python's precedence


def test_layernorm_epilogue_reads_row_statistics_over_its_fragment():
    src = _body("gemm_bias_residual_layernorm")
    assert "h, tc_h_ij = tcm.accumulator(" in src and "sq, tc_sq_ij = tcm.accumulator(" in src
    # two warpgroups along N: each row's partial sums meet in shared memory
    assert 'tcrow.reduce_rows_across(h, mean, tc_mean_i, "sum"' in src
    assert re.search(r"h\[(tc_r\d+ \+ tc_lane\d+)\] = h\[\1\] - mean\[tcrow\.row_of\(h, tc_r\d+\)\]", src)
    assert "cute.math.rsqrt(var[" in src


def test_router_takes_rounds_of_max_over_the_probabilities():
    src = _body("router_gemm_softmax_topk")
    assert "p, tc_p_ij = tcm.accumulator(" in src and "col, tc_col_ij = tcm.accumulator(" in src
    assert 'tcrow.reduce_rows(col, arg, "min", clear=True)' in src
    assert re.search(r"p\[(tc_r\d+ \+ tc_lane\d+)\] = p\[\1\] / sm\[tcrow\.row_of\(p, tc_r\d+\)\]", src)
    assert "wk[" in src and "/ tot[" in src


def test_paged_decode_walks_pages_in_a_while_loop():
    src = _body("paged_mqa_decode_while")
    assert "while p[0] * 64 < lens[b]:" in src
    # the page id read bounds-checked first (the table's row ends at max_pages), the copy's
    # address from it
    page = re.search(r"(tc_ld\d+) = cutlass\.Int32\(0\)\n\s+if p\[0\] >= 0 and p\[0\] < 16:\n"
                     r"\s+\1 = block_table\[b, p\[0\]\]\n\s+if \1 >= 0 and \1 < 256:", src)
    assert page and f"Kc.iterator + cute.assume({page.group(1)} * 4096 + " in src
    assert "p[0] = p[0] + 1" in src
    assert src.count("tcm.gemm(") == 2


def test_w8a8_requant_scales_dequantized_rows_into_fp8():
    src = _body("w8a8_gemm_fp8_requant")
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert 'tcrow.reduce_rows_across(y, amax, tc_amax_i, "absmax"' in src
    assert re.search(r"cutlass\.Float8E4M3FN\(cutlass\.select_\(cutlass\.Boolean\(cute\.math\.isnan\("
                     r"y\[tc_r\d+ \+ tc_lane\d+\] / amax\[tcrow\.row_of\(q, tc_r\d+\)\]\)\)", src)
    assert "sy[bm * 64 + " in src

# ---- GPU ------------------------------------------------------------------------------------------
def _rope_half(C, pos, inv_freq):
    ang = pos.double()[:, None] * inv_freq.double().repeat(2)[None, :]
    half = C.shape[-1] // 2
    rot = torch.cat((-C[..., half:], C[..., :half]), -1)
    return C * ang.cos() + rot * ang.sin()


@pytest.mark.gpu
def test_qk_proj_rope_half_split_on_gpu():
    torch.manual_seed(0)
    kernel = P.qk_proj_rope_half_split()
    inv = 1.0 / (100.0 ** (torch.arange(64, device="cuda", dtype=torch.float32) / 64))
    for M in (200, 64):
        X = torch.randn(M, 256, device="cuda", dtype=torch.float16)
        W = (torch.randn(256, 256, device="cuda") * 0.1).half()
        pos = torch.randint(0, 64, (M,), device="cuda", dtype=torch.int32)
        Y = kernel(X, W, pos, inv)
        C = (X.double() @ W.double().T).view(M, 2, 128)
        ref = torch.stack([_rope_half(C[:, h], pos, inv) for h in range(2)], 1).view(M, 256)
        torch.testing.assert_close(Y.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_qkv_proj_rope_interleaved_on_gpu():
    torch.manual_seed(1)
    M, K = 192, 128
    X = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    W = (torch.randn(256, K, device="cuda") * 0.1).bfloat16()
    pos = torch.randint(0, 4096, (M,), device="cuda", dtype=torch.int64)
    inv = 10000.0 ** (-torch.arange(32, device="cuda").double() / 32)
    ang = torch.arange(4096, device="cuda").double()[:, None] * inv
    cs = torch.stack((ang.cos(), ang.sin()), -1).reshape(4096, 64).float()
    Y = P.qkv_proj_rope_interleaved()(X, W, pos, cs)
    C = X.double() @ W.double().T
    ref = C.clone()
    c, s = cs.double()[pos][:, 0::2], cs.double()[pos][:, 1::2]
    for h in range(3):  # two q heads and one k head rotate
        e, o = C[:, h * 64:(h + 1) * 64:2], C[:, h * 64 + 1:(h + 1) * 64:2]
        ref[:, h * 64:(h + 1) * 64:2] = e * c - o * s
        ref[:, h * 64 + 1:(h + 1) * 64:2] = o * c + e * s
    torch.testing.assert_close(Y.double(), ref, rtol=2e-2, atol=3e-2)


@pytest.mark.gpu
def test_moe_permute_rows_on_gpu():
    torch.manual_seed(2)
    M = 100
    X = torch.randn(M, 512, device="cuda", dtype=torch.bfloat16)
    dst = torch.randperm(2 * M, device="cuda").to(torch.int32).view(M, 2)
    dst[::7, 1] = -1  # dropped slots
    Xp = P.moe_permute_rows()(X, dst)
    t, k = (dst >= 0).nonzero(as_tuple=True)
    assert torch.equal(Xp[dst[t, k].long()], X[t])


@pytest.mark.gpu
def test_moe_unpermute_weighted_on_gpu():
    torch.manual_seed(3)
    M = 100
    Yp = torch.randn(4 * M, 384, device="cuda", dtype=torch.bfloat16)
    src = torch.randperm(4 * M, device="cuda").to(torch.int32).view(M, 4)
    src[::5, 3] = -1
    w = torch.rand(M, 4, device="cuda")
    Y = P.moe_unpermute_weighted()(Yp, src, w)
    g = Yp.float()[src.clamp(min=0).long()] * (w * (src >= 0))[..., None]
    torch.testing.assert_close(Y.float(), g.sum(1), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_complex_gemm_on_gpu():
    torch.manual_seed(4)
    Ar, Ai = (torch.randn(128, 256, device="cuda", dtype=torch.float16) for _ in range(2))
    Br, Bi = (torch.randn(256, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    Cr, Ci = P.complex_gemm_planar()(Ar, Ai, Br, Bi)
    ref = torch.complex(Ar.double(), Ai.double()) @ torch.complex(Br.double(), Bi.double())
    torch.testing.assert_close(Cr.double(), ref.real, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(Ci.double(), ref.imag, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_3xbf16_gemm_on_gpu():
    torch.manual_seed(5)
    A, B = torch.randn(128, 256, device="cuda"), torch.randn(128, 256, device="cuda")
    C = P.gemm_3xbf16_split()(A, B)
    ref = A.double() @ B.double().T
    err = (C.double() - ref).abs().max()
    bf16_err = (A.bfloat16().double() @ B.bfloat16().double().T - ref).abs().max()
    assert err < 2e-3 and err < bf16_err / 20


@pytest.mark.gpu
def test_syrk_lower_on_gpu():
    torch.manual_seed(6)
    A = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    C = P.syrk_lower_blocks()(A)
    torch.testing.assert_close(C.double(), torch.tril(A.double() @ A.double().T), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_fused_linear_cross_entropy_on_gpu():
    torch.manual_seed(7)
    kernel = P.fused_linear_cross_entropy()
    for M in (200, 64):
        H = torch.randn(M, 256, device="cuda", dtype=torch.float16)
        W = (torch.randn(1024, 256, device="cuda") * 0.05).half()
        tgt = torch.randint(0, 1024, (M,), device="cuda", dtype=torch.int32)
        tgt[::9] = -100
        loss = kernel(H, W, tgt)
        logits = H.double() @ W.double().T
        ref = torch.nn.functional.cross_entropy(logits, tgt.long(), ignore_index=-100, reduction="none")
        torch.testing.assert_close(loss.double(), ref, rtol=2e-3, atol=2e-3)


def _windows(x, ws):
    B, H, W, C = x.shape
    return x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)


@pytest.mark.gpu
def test_swin_partition_on_gpu():
    torch.manual_seed(8)
    x = torch.randn(2, 28, 28, 96, device="cuda", dtype=torch.float16)
    win = P.swin_window_partition_shift()(x)
    assert torch.equal(win, _windows(torch.roll(x, (-3, -3), (1, 2)), 7))


@pytest.mark.gpu
def test_swin_reverse_residual_on_gpu():
    torch.manual_seed(9)
    short = torch.randn(2, 28, 28, 96, device="cuda", dtype=torch.float16)
    win = torch.randn(32, 49, 96, device="cuda", dtype=torch.float16)
    out = P.swin_window_reverse_residual()(short, win)
    merged = win.view(2, 4, 4, 7, 7, 96).permute(0, 1, 3, 2, 4, 5).reshape(2, 28, 28, 96)
    ref = (short.float() + torch.roll(merged, (3, 3), (1, 2)).float()).half()
    assert torch.equal(out, ref)


@pytest.mark.gpu
def test_mrope_on_gpu():
    torch.manual_seed(10)
    M = 37
    q = torch.randn(M, 4, 128, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 50, (3, M), device="cuda", dtype=torch.int32)
    ref_in = q.double()
    P.mrope_sections_inplace()(q, pos)
    f = torch.arange(64, device="cuda")
    sec = torch.where(f < 16, 0, torch.where(f < 40, 1, 2))
    inv = 1000000.0 ** (-2 * f.double() / 128)
    ang = pos.double()[sec].T * inv  # (M, 64)
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = ref_in[..., :64], ref_in[..., 64:]
    ref = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
    torch.testing.assert_close(q.double(), ref, rtol=2e-2, atol=2e-2)


def _attention(q, k, v):
    return ((q.double() @ k.double().transpose(-1, -2)) / q.shape[-1] ** 0.5).softmax(-1) @ v.double()


@pytest.mark.gpu
def test_diff_attention_on_gpu():
    torch.manual_seed(11)
    Q1, Q2, K1, K2, V = (torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.float16) for _ in range(5))
    lam = torch.rand(4, device="cuda") * 0.8
    O = P.diff_attention_fwd()(Q1, Q2, K1, K2, V, lam)
    ref = _attention(Q1, K1, V) - lam.double()[None, :, None, None] * _attention(Q2, K2, V)
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_col2im_on_gpu():
    torch.manual_seed(12)
    cols = torch.randn(2, 72, 100, device="cuda")
    img = torch.zeros(2, 8, 20, 20, device="cuda")
    P.col2im_fold_atomic()(cols, img)
    ref = torch.nn.functional.fold(cols, (20, 20), kernel_size=3, padding=1, stride=2)
    torch.testing.assert_close(img, ref, rtol=1e-5, atol=1e-5)


def _hash_keep(B, H, S, seed, threshold):
    m = 0xFFFFFFFF
    row = torch.arange(B * H * S, device="cuda", dtype=torch.int64).view(B, H, S, 1)
    col = torch.arange(S, device="cuda", dtype=torch.int64).view(1, 1, 1, S)
    h = (((row * 2654435761) & m) ^ ((col * 2246822519) & m)) ^ seed
    h = h ^ (h >> 16)
    h = (h * 2146121005) & m
    h = h ^ (h >> 15)
    return h >= threshold


@pytest.mark.gpu
def test_flash_hash_dropout_on_gpu():
    torch.manual_seed(13)
    Q, K, V = (torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    seed = 0x1234ABCD
    O = P.flash_fwd_hash_dropout()(Q, K, V, seed)
    keep = _hash_keep(1, 2, 256, seed, int(0.25 * 4294967296.0))
    assert 0.7 < keep.double().mean() < 0.8
    p = ((Q.double() @ K.double().transpose(-1, -2)) / 8.0).softmax(-1)
    ref = (p * keep / 0.75) @ V.double()
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_sage_int8_attention_on_gpu():
    torch.manual_seed(14)
    Q, K = (torch.randint(-16, 16, (1, 2, 256, 64), device="cuda", dtype=torch.int8) for _ in range(2))
    V = torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.float16)
    qs, ks = (torch.rand(1, 2, 4, device="cuda") * 0.05 + 0.05 for _ in range(2))
    O = P.sage_int8_qk_attention()(Q, K, V, qs, ks)
    sc = Q.double() @ K.double().transpose(-1, -2)
    rq, rk = (x.double().repeat_interleave(64, -1) for x in (qs, ks))  # each block's scale per row
    sc = sc * rq[..., :, None] * rk[..., None, :]
    ref = (sc / 8.0).softmax(-1) @ V.double()
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_tree_attention_on_gpu():
    torch.manual_seed(15)
    H, pre, tree, D = 4, 192, 64, 64
    Q = torch.randn(H, tree, D, device="cuda", dtype=torch.bfloat16)
    K, V = (torch.randn(H, pre + tree, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    allow = (torch.rand(tree, tree, device="cuda") < 0.3).tril()
    allow |= torch.eye(tree, device="cuda", dtype=torch.bool)  # ancestors and itself
    weights = 1 << torch.arange(32, device="cuda", dtype=torch.int64)
    words = (allow.view(tree, 2, 32).long() * weights).sum(-1)  # bit k % 32 of word k // 32
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32).view(torch.uint32)
    O = P.tree_attention_bitmask()(Q, K, V, words)
    keep = torch.cat((torch.ones(tree, pre, device="cuda", dtype=torch.bool), allow), 1)
    sc = (Q.double() @ K.double().transpose(-1, -2)) / 8.0
    ref = sc.masked_fill(~keep, float("-inf")).softmax(-1) @ V.double()
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_muon_newton_schulz_on_gpu():
    torch.manual_seed(16)
    G = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    Y = P.muon_newton_schulz()(G)
    a, b, c = 3.4445, -4.7750, 2.0315
    x = G.float()
    X = (x / (x.pow(2).sum().sqrt() + 1e-7)).bfloat16()
    for _ in range(5):  # the kernel's roundings: bfloat16 shared tiles, float32 accumulators
        A = X.float() @ X.float().T
        AA = A.bfloat16().float() @ A.bfloat16().float()
        Bm = (b * A + c * AA).bfloat16()
        X = (a * X.float() + Bm.float() @ X.float()).bfloat16()
    torch.testing.assert_close(Y.float(), X.float(), rtol=3e-2, atol=3e-2)
    # nearly orthogonal rows: the singular values pushed towards (0.7, 1.2)
    sv = torch.linalg.svdvals(Y.float())
    assert sv.min() > 0.5 and sv.max() < 1.5


@pytest.mark.gpu
def test_bitonic_topk_on_gpu():
    torch.manual_seed(17)
    X = torch.randn(64, 1024, device="cuda")
    V, I = P.bitonic_topk_while()(X)
    ref = torch.topk(X, 16, dim=1)
    assert torch.equal(V, ref.values) and torch.equal(I.long(), ref.indices)


@pytest.mark.gpu
def test_gemm_layernorm_epilogue_on_gpu():
    torch.manual_seed(18)
    kernel = P.gemm_bias_residual_layernorm()
    for M in (200, 128):
        X = torch.randn(M, 256, device="cuda", dtype=torch.float16)
        W = (torch.randn(256, 256, device="cuda") * 0.06).half()
        bias = torch.randn(256, device="cuda") * 0.1
        R = torch.randn(M, 256, device="cuda", dtype=torch.float16)
        gb = torch.stack((torch.rand(256, device="cuda") + 0.5, torch.randn(256, device="cuda") * 0.1))
        Y = kernel(X, W, bias, R, gb)
        h = X.double() @ W.double().T + bias.double() + R.double()
        ref = torch.nn.functional.layer_norm(h, (256,), gb[0].double(), gb[1].double(), eps=1e-5)
        torch.testing.assert_close(Y.double(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_router_topk_on_gpu():
    torch.manual_seed(19)
    M = 100
    x = torch.randn(M, 512, device="cuda", dtype=torch.bfloat16)
    Wg = (torch.randn(64, 512, device="cuda") * 0.1).bfloat16()
    w, ids = P.router_gemm_softmax_topk()(x, Wg)
    prob = (x.double() @ Wg.double().T).softmax(-1)
    top = prob.topk(4, -1)
    assert torch.equal(ids.long(), top.indices)
    want = top.values / top.values.sum(-1, keepdim=True)
    torch.testing.assert_close(w.double(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_paged_mqa_decode_on_gpu():
    torch.manual_seed(20)
    B, H, D, page = 4, 64, 64, 64
    Q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
    Kc, Vc = (torch.randn(256, page, D, device="cuda", dtype=torch.float16) for _ in range(2))
    bt = torch.randperm(256, device="cuda")[:B * 16].to(torch.int32).view(B, 16)
    lens = torch.tensor([1024, 1, 500, 64], device="cuda", dtype=torch.int32)
    O = P.paged_mqa_decode_while()(Q, Kc, Vc, bt, lens)
    for b in range(B):
        n = int(lens[b])
        rows = bt[b].long().repeat_interleave(page)[:n], torch.arange(n, device="cuda") % page
        K, V = Kc[rows].double(), Vc[rows].double()
        ref = ((Q[b].double() @ K.T) / D ** 0.5).softmax(-1) @ V
        torch.testing.assert_close(O[b].double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_w8a8_fp8_requant_on_gpu():
    torch.manual_seed(21)
    kernel = P.w8a8_gemm_fp8_requant()
    for M in (200, 64):
        A = torch.randint(-128, 128, (M, 512), device="cuda", dtype=torch.int8)
        W = torch.randint(-128, 128, (256, 512), device="cuda", dtype=torch.int8)
        sa, sw = torch.rand(M, device="cuda") * 1e-3, torch.rand(256, device="cuda") * 1e-2
        Y, sy = kernel(A, W, sa, sw)
        y = (A.double() @ W.double().T) * sa.double()[:, None] * sw.double()[None, :]
        scale = y.abs().amax(-1).clamp(min=1e-6) / 448
        torch.testing.assert_close(sy.double(), scale, rtol=1e-5, atol=1e-9)
        ref = (y / scale[:, None]).float().to(torch.float8_e4m3fn)
        torch.testing.assert_close(Y.float(), ref.float(), rtol=0.07, atol=0.02)
