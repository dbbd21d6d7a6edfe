"""A forty-ninth set of programs in TileLang's idioms (tests/unseen_programs49.py): serving-time
decode kernels over paged and quantized KV caches -- flash-decoding over 64-token pages with
split and combine as two launches of one prim_func, GQA decode with ALiBi and soft-capping
(an empty sequence returns early), an fp8 paged cache with per-token scales dequantized in
registers, fp8 MQA decode on fp8 GEMMs, a uint8 cache with zero points, the KV-cache append
with NeoX rotary at slot_mapping, tree-speculation verification (an ancestor mask from a parent
array), chunked prefill over a paged prefix, MLA decode over a paged 576-wide latent cache, a
combine with per-sequence split counts, speculative verification as two T.Pipelined(start,
stop) loops, MLA decode over reversed tiles, and int8 Q K^T with per-token scales.

CPU: each builds to an sm_90a cubin (and an sm_80 one where it uses no fp8), and what decides
its result is read in the generated source.  Each also lowers in TileLang 0.1.15 (checked on
the CPU with tilelang.engine.lower for sm_90a; three first versions TileLang refused --
16-row tiles with P in registers, a pipelined V tile rewritten in place, a shared tile in two
pipelined loops -- were rewritten to forms it takes).  All built as first written; reading the
source found spec_verify_token_tree's ancestor-mask read ``anc[r // group, j]`` after
``r < rows and j < n_draft and`` made a two-lane vector load ahead of the condition, for
every row and column of the score tile (past the (6, 6) table and the kernel's shared
memory): the vectorizer now leaves a shared read after an ``and`` / ``or``'s first operand
to the guarded path (tests/test_if_then_else_branches.py).  fp8 MQA over an MN-major V is
refused by TileLang 0.1.15 and by tilecute alike (a layout conflict on the rescale).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs49.py``)."""

import math
import re

import pytest
import torch

import tilecute
from tilecute.transform.layout_inference import LayoutError
import rounds
import unseen_programs49 as P

f16, bf16, i32 = torch.float16, torch.bfloat16, torch.int32

NAMES = ["chunked_prefill_paged", "combine_varsplit_natural_lse", "fp8_mqa_decode_fp8_gemms",
         "fp8_paged16_decode_token_scales", "gqa_decode_alibi_softcap", "gqa_decode_token_mask",
         "int8_qk_decode_token_scales", "kv_append_rope_slots", "mla_decode_reversed_tiles",
         "mla_paged_latent576_split", "paged64_decode_split_combine",
         "spec_verify_causal_two_loops", "spec_verify_token_tree", "uint8_kv_decode_zero_points",
         "varlen_decode_tile_scores_sink"]
# no sm_80 cubin: float8 values convert only on sm_89+
SM90_ONLY = {"fp8_mqa_decode_fp8_gemms", "fp8_paged16_decode_token_scales"}

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = getattr(P, name)().get_kernel_source()
    return "\n".join(part.split("\n@cute.jit", 1)[0] for part in src.split("\n@cute.kernel\n")[1:])


test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_fp8_mqa_over_mn_major_v_is_refused_by_name():
    """P V on an MN-major fp8 V runs on CUDA cores (no tensor-core MMA reads fp8 MN-major),
    so acc_o holds no MMA rows and cannot be rescaled by Q K^T's row statistics; TileLang
    0.1.15 refuses it too ("Layout infer conflict between r_scale and acc_o")."""
    with pytest.raises(LayoutError, match=r"unseen_programs49\.py:\d+: prim_func 'main': this "
                                          r"T\.Parallel loop walks fragment 'acc_o' and reads "
                                          r"'r_scale', which holds one value per row of a T\.gemm"):
        tilecute.compile(P.fp8_mqa_mn_major_v(), target="sm_90a").get_kernel_source()


# ---- what decides each result, in the generated source -----------------------------------------
def test_paged64_split_and_combine_are_two_launches():
    src = P.paged64_decode_split_combine().get_kernel_source()
    body = _body("paged64_decode_split_combine")
    # the two T.Kernel blocks launch in order from one wrapper
    launches = re.findall(r"(tilecute_main_\d)\(.*\)\.launch\(grid=\[(.*?)\]", src)
    assert [g for _, g in launches] == ["batch, 2, 4", "16, batch, 1"], launches
    # a 32-token tile starts inside its 64-token page: page * 64 + tok0 % 64
    assert "kv_start = tc_ld12 * 64 + (tok0 - tok0 // 64 * 64)" in body, body
    # the uneven split: per_split tiles, one more for the first `rem` splits
    assert "n_tiles = per_split + cutlass.Int32(cutlass.select_(bz < rem, 1, 0))" in body
    assert "start = (per_split * bz + cutlass.min(bz, rem)) * 32" in body
    # the combine skips an empty sequence (zeros), else weighs splits by 2^(lse - max) / sum
    assert "if cache_seqlens[b] > 0:" in body
    assert "w[0] = cute.math.exp2(glse[b, h, s_2_] - lse_max[0]) / lse_sum[0]" in body


def test_gqa_alibi_softcap_returns_early_and_caps():
    body = _body("gqa_decode_alibi_softcap")
    # T.thread_return() under seqlen == 0 (block-uniform): the rest of the block is the else
    assert re.search(r"if seqlen == 0:\n(?:.*\n)*?.*\.store\(tc_vec2\.load\(\)\)\n    else:\n", body), body
    assert "cutlass.Float32(30.0) * cute.math.tanh(acc_s[" in body
    assert "slope[tcrow.row_of(acc_s, " in body and "cutlass.Float32(pos - (seqlen - 1))" in body


def test_fp8_paged16_dequantizes_each_page_quarter():
    body = _body("fp8_paged16_decode_token_scales")
    # four 16-token pages a tile, each into its quarter of the fp8 tile
    assert "for p in cutlass.range(0, 4):" in body
    assert "page_id[0] = block_table[b, cutlass.min(k * 4 + p, 63)]" in body
    assert "k8_s.iterator + cute.assume((p * 16 + i5) * 128 + i6, divby=16)" in body
    # fp8 -> float32 in registers, times the token's scale, rows past the sequence zero
    assert body.count("kv_f[") >= 4 and "= cutlass.Float32(tc_vec" in body
    assert re.search(r"cutlass\.select_\(k \* 64 \+ j_\w+ < seqlen, kv_f\[.*\] \* tc_ld\d+, "
                     r"cutlass\.Float32\(0\.0\)\)", body), body


def test_fp8_mqa_both_gemms_on_fp8_wgmma():
    body = _body("fp8_mqa_decode_fp8_gemms")
    mmas = re.findall(r'tcm\.tiled_mma\("wgmma", cutlass\.Float8E4M3FN, cutlass\.Float8E4M3FN, '
                      r'cutlass\.Float32, False, False, \(1, 1\), (\d+)\)', body)
    assert mmas == ["64", "128"], mmas
    # P (fp8) reaches P V through shared memory (an fp8 A in registers is not laid out as
    # the accumulator it comes from)
    assert "T.gemm(p8_shared, v_s, acc_o)" in body


def test_uint8_zero_points_subtract_before_scaling():
    body = _body("uint8_kv_decode_zero_points")
    assert "cutlass.Uint8(K_q[b, t, hk," in body
    assert "v_zero[b, t, hk]" in body and "v_scale[b, t, hk]" in body


def test_kv_append_skips_padding_slots():
    body = _body("kv_append_rope_slots")
    # positions and slots are int64; a -1 slot leaves the block after the query rotation
    assert "pos = positions[t]" in body
    assert re.search(r"slot = slot_mapping\[t\]\n    if slot < cutlass\.Int64\(0\):\n        pass\n"
                     r"    else:\n        blk = slot // cutlass\.Int64\(16\)", body), body
    assert body.index("query[t, h, 32 + i] = ") < body.index("slot = slot_mapping[t]")


def test_token_tree_mask_walks_parents_and_reads_guarded():
    body = _body("spec_verify_token_tree")
    assert re.search(r"if tx < 6:\n\s+node\[0\] = tx\n\s+while node\[0\] >= 0:\n"
                     r"\s+anc\[tx \* 6 \+ node\[0\]\] = 1", body), body
    # the mask is read only where r < 24 and j < 6 (C's &&), never as a vector ahead of them
    assert re.search(r"if r_\w+ < 24 and \(j_\w+ \+ tc_lane\d+\) < 6:\n\s+tc_ld\d+ = anc\[", body), body
    assert "anc.iterator" not in body


def test_chunked_prefill_leaves_tiles_past_the_chunk():
    body = _body("chunked_prefill_paged")
    # (the K/V loop under the `if` has a producer warpgroup since helper CE's change: both
    # roles skip a tile past the chunk)
    assert "q_len = cu_q[b + 1] - q_start\n" in body
    assert body.count("if bx * 64 < q_len:\n") == 2 and "tct.load(K_pages_desc" in body


def test_mla_slices_latent_and_rope_from_one_row():
    body = _body("mla_paged_latent576_split")
    # the latent columns 0..511 and the rope columns 512..575 of one 576-wide cache row
    assert re.search(r"tct\.load\(KV_cache_desc, .*\(0, \(s \+ tc_j0 \* 2\) \* 32 % 64, ", body), body
    assert re.search(r"tct\.load\(KV_cache_desc, .*\(512, \(s \+ tc_j0 \* 2\) \* 32 % 64, ", body), body


def test_combine_reduces_lse_fragment_over_a_read_count():
    body = _body("combine_varsplit_natural_lse")
    assert "lse[s] = cutlass.select_(s < n, tc_ld1, cutlass.Float32(float(\"-inf\")))" in body
    assert "lse_max[i2] = cute.arch.fmax(lse_max[i2], lse[k3])" in body
    assert "for s_2_ in cutlass.range(0, n):" in body


def test_spec_verify_two_pipelined_ranges():
    body = _body("spec_verify_causal_two_loops")
    assert re.search(r"n_full\[0\] = 0\n(?:.*\n)*?\s+if ctx > 0:\n\s+n_full\[0\] = ctx // 64", body), body
    assert "for k in cutlass.range(0, n_full[0]):" in body
    # the tail loop runs from n_full, its stages counted from there
    assert "for k_1_ in cutlass.range(n_full[0], n_full[0] + ((kv_len + 64 - 1) // 64 - n_full[0])):" in body
    assert "tct.wait(tc_bar2 + ((k_1_ - n_full[0]) - (k_1_ - n_full[0]) // 2 * 2)" in body
    # rows head-major: draft r % 4 of head r // 4
    assert re.search(r"k_1_ \* 64 \+ \(j_\w+ \+ tc_lane\d+\) <= ctx \+ r_\w+ % 4, acc_s", body), body


def test_mla_reversed_tiles_masks_the_first_only():
    body = _body("mla_decode_reversed_tiles")
    assert "tc_ld1 = block_table[b_1_, n - 1 - tc_j0]" in body  # the producer walks pages backwards
    assert re.search(r"if kr == 0:\n(?:.*\n){3}.*cutlass\.select_\(k \* 64 \+ \(j \+ tc_lane\d+\) >= "
                     r"cache_seqlens\[b_1_\]", body), body
    assert "panel_index = block_flat // 10" in body  # T.use_swizzle(10)
    # the row fragment's log2-sum-exps go straight to their rows of LSE
    assert "LSE[b_1_, hx_1_ * 64 + i8] = logsum[" in body


def test_int8_qk_scales_the_int32_scores():
    body = _body("int8_qk_decode_token_scales")
    assert 'tcm.tiled_mma("mma", cutlass.Int8, cutlass.Int8, cutlass.Int32, False, False, (1, 4), 64)' in body
    assert re.search(r"cutlass\.Float32\(acc_i\[tc_r\d+ \+ tc_lane\d+\]\) \* qs\[tcrow\.row_of\(acc_s, "
                     r"tc_r\d+\)\] \* tc_ld\d+", body), body


def test_token_mask_reads_valid_rows_only():
    body = _body("gqa_decode_token_mask")
    # Q's 64 rows from hid * 8 by TMA (rows past the 32 heads come in as zeros)
    assert "tct.load(Q_desc, tc_smem + 0, tc_bar4, (0, hid * 8, bid), 16384" in body
    # the bool mask, one value per column the thread holds, read at the scores' column
    assert "tc_ld7 = (mask[bid, k * 64 + (i5 + tc_lane6), hk] != 0)" in body
    assert "cutlass.select_(mask_local[tcrow.col_of(acc_s, tc_r8 + tc_lane9)], acc_s[" in body
    # only acc_o's first 8 rows reach o_s, 8 rows of O by TMA
    assert re.search(r"if i9 < 8:\n\s+o_s\[", body), body
    assert "tct.store(O_desc, tc_smem + 0, (0, hid * 8, bid), chunks=2, step=64, chunk_bytes=1024" in body


def test_tile_scores_column_copy_and_row_walk():
    body = _body("varlen_decode_tile_scores_sink")
    # the tile maxima (one per row this thread holds) into column k of the swizzled table
    assert "S_s[i11 * 16 + (k ^ (i11 & 15))] = tile_max[tc_q21]" in body
    # the table walked by rows: each thread its rows, the 16 columns shared by a row's 4 lanes
    assert re.search(r"h = tc_m_i\[tc_q\d+\]\n\s+for tc_c\d+ in cutlass\.range_constexpr\(4\):\n"
                     r"\s+t = tc_c\d+ \* 4 \+ cute\.arch\.lane_idx\(\) % 4\n\s+S_s\[h \* 16 \+ \(t \^ \(h & 15\)\)\] = "
                     r"cute\.math\.exp2\(\(S_s\[h \* 16 \+ \(t \^ \(h & 15\)\)\] - m\[tc_q\d+\]\)", body), body
    assert "logsum[tc_q31] + cute.math.exp2(sink_s[i_5_] * cutlass.Float32(1.44269504) - m[tc_q31]" in body


# ---- on the GPU ----------------------------------------------------------------------------
LENS = [1, 17, 1000]


def _attend(q, k, v, mask=None, scale=None, bias=None):
    """softmax(q k^T * scale + bias) v in float32; q (H, D), k / v (S, D) (or per-head)."""
    s = q.float() @ k.float().transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def _paged(lens, page, num_blocks, max_pages, Hk, D, dtype):
    """A cache of shuffled pages: (K, V, block_table, the contiguous K / V per sequence)."""
    K = torch.randn(num_blocks, page, Hk, D, device="cuda").to(dtype)
    V = torch.randn(num_blocks, page, Hk, D, device="cuda").to(dtype)
    perm = torch.randperm(num_blocks, device="cuda")
    table = torch.zeros(len(lens), max_pages, dtype=i32, device="cuda")
    seqs, used = [], 0
    for b, n in enumerate(lens):
        pages = -(-n // page)
        table[b, :pages] = perm[used:used + pages].to(i32)
        used += pages
        ids = table[b, :pages].long()
        seqs.append((K[ids].reshape(-1, Hk, D)[:n], V[ids].reshape(-1, Hk, D)[:n]))
    return K, V, table, seqs


@pytest.mark.gpu
def test_paged64_decode_split_combine_on_gpu():
    torch.manual_seed(1)
    lens = [1, 17, 1000, 0]
    K, V, table, seqs = _paged(lens, 64, 64, 16, 2, 128, f16)
    Q = torch.randn(4, 16, 128, device="cuda", dtype=f16)
    kc, vc = K.reshape(-1, 2, 128), V.reshape(-1, 2, 128)
    seqlens = torch.tensor(lens, dtype=i32, device="cuda")
    glse = torch.empty(4, 16, 4, device="cuda")
    part = torch.empty(4, 16, 4, 128, device="cuda")
    O = P.paged64_decode_split_combine()(Q, kc, vc, table, seqlens, glse, part)
    for b, n in enumerate(lens):
        if n == 0:
            assert torch.equal(O[b], torch.zeros_like(O[b]))
            continue
        k, v = seqs[b]
        ref = torch.stack([_attend(Q[b, h], k[:, h // 8], v[:, h // 8]) for h in range(16)])
        torch.testing.assert_close(O[b].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gqa_decode_alibi_softcap_on_gpu():
    torch.manual_seed(2)
    lens = LENS + [0]
    B, S = len(lens), 1000
    Q = torch.randn(B, 32, 128, device="cuda", dtype=bf16)
    K = torch.randn(B, S, 8, 128, device="cuda", dtype=bf16)
    V = torch.randn(B, S, 8, 128, device="cuda", dtype=bf16)
    slopes = 2.0 ** (-8.0 * torch.arange(1, 33, device="cuda") / 32)
    O = P.gqa_decode_alibi_softcap()(Q, K, V, torch.tensor(lens, dtype=i32, device="cuda"), slopes)
    for b, n in enumerate(lens):
        if n == 0:
            assert torch.equal(O[b], torch.zeros_like(O[b]))
            continue
        for h in range(32):
            s = Q[b, h].float() @ K[b, :n, h // 4].float().T / math.sqrt(128)
            s = 30.0 * torch.tanh(s / 30.0) + slopes[h] * (torch.arange(n, device="cuda") - (n - 1))
            ref = torch.softmax(s, -1) @ V[b, :n, h // 4].float()
            torch.testing.assert_close(O[b, h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_fp8_paged16_decode_token_scales_on_gpu():
    torch.manual_seed(3)
    lens = LENS
    K, V, table, _ = _paged(lens, 16, 160, 64, 2, 128, torch.float32)
    K8, V8 = K.to(torch.float8_e4m3fn), V.to(torch.float8_e4m3fn)
    ks = torch.rand(160, 16, 2, device="cuda") + 0.5
    vs = torch.rand(160, 16, 2, device="cuda") + 0.5
    K8.view(torch.uint8)[table[0, 1]] = 0x7F  # a stale page past sequence 0 full of NaN bytes
    Q = torch.randn(3, 16, 128, device="cuda", dtype=bf16)
    O = P.fp8_paged16_decode_token_scales()(Q, K8, V8, ks, vs, table,
                                            torch.tensor(lens, dtype=i32, device="cuda"))
    for b, n in enumerate(lens):
        ids = table[b, :-(-n // 16)].long()
        k = (K8[ids].float() * ks[ids][..., None]).reshape(-1, 2, 128)[:n].to(bf16)
        v = (V8[ids].float() * vs[ids][..., None]).reshape(-1, 2, 128)[:n].to(bf16)
        ref = torch.stack([_attend(Q[b, h], k[:, h // 8], v[:, h // 8]) for h in range(16)])
        torch.testing.assert_close(O[b].float(), ref, rtol=3e-2, atol=3e-2)


@pytest.mark.gpu
def test_fp8_mqa_decode_fp8_gemms_on_gpu():
    torch.manual_seed(4)
    lens = [1, 17, 1000]
    Q = torch.randn(3, 64, 128, device="cuda").to(torch.float8_e4m3fn)
    K = torch.randn(3, 1024, 128, device="cuda").to(torch.float8_e4m3fn)
    Vt = torch.randn(3, 128, 1024, device="cuda").to(torch.float8_e4m3fn)
    qs = torch.rand(64, device="cuda") * 0.5 + 0.25
    kvs = torch.tensor([0.7, 1.3], device="cuda")
    O = P.fp8_mqa_decode_fp8_gemms(batch=3)(Q, K, Vt, qs, kvs, torch.tensor(lens, dtype=i32, device="cuda"))
    for b, n in enumerate(lens):
        s = (Q[b].float() @ K[b, :n].float().T) * (qs[:, None] * kvs[0] / math.sqrt(128))
        # P is rounded to e4m3 before P V (its rows normalised afterwards by the float sum)
        m = s.amax(-1, keepdim=True)
        e = torch.exp(s - m)
        ref = (e.to(torch.float8_e4m3fn).float() @ Vt[b, :, :n].float().T) * kvs[1] / e.sum(-1, keepdim=True)
        torch.testing.assert_close(O[b].float(), ref, rtol=6e-2, atol=6e-2)


@pytest.mark.gpu
def test_uint8_kv_decode_zero_points_on_gpu():
    torch.manual_seed(5)
    lens, S = LENS, 1000
    Q = torch.randn(3, 8, 128, device="cuda", dtype=bf16)
    Kq = torch.randint(0, 256, (3, S, 2, 128), device="cuda", dtype=torch.uint8)
    Vq = torch.randint(0, 256, (3, S, 2, 128), device="cuda", dtype=torch.uint8)
    ks, kz = torch.rand(2, 128, device="cuda") * 0.02, torch.rand(2, 128, device="cuda") * 255
    vs, vz = torch.rand(3, S, 2, device="cuda") * 0.02, torch.rand(3, S, 2, device="cuda") * 255
    O = P.uint8_kv_decode_zero_points()(Q, Kq, Vq, ks, kz, vs, vz, torch.tensor(lens, dtype=i32, device="cuda"))
    k = ((Kq.float() - kz) * ks).to(bf16)
    v = ((Vq.float() - vz[..., None]) * vs[..., None]).to(bf16)
    for b, n in enumerate(lens):
        ref = torch.stack([_attend(Q[b, h], k[b, :n, h // 4], v[b, :n, h // 4]) for h in range(8)])
        torch.testing.assert_close(O[b].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_kv_append_rope_slots_on_gpu():
    torch.manual_seed(6)
    n, rot = 37, 64
    pos = torch.randint(0, 4096, (n,), device="cuda")
    q = torch.randn(n, 8, 128, device="cuda", dtype=bf16)
    k = torch.randn(n, 2, 128, device="cuda", dtype=bf16)
    v = torch.randn(n, 2, 128, device="cuda", dtype=bf16)
    inv = 1.0 / 10000 ** (torch.arange(0, rot, 2, device="cuda").float() / rot)
    ang = torch.arange(4096, device="cuda").float()[:, None] * inv
    cs = torch.cat([ang.cos(), ang.sin()], -1)
    slots = torch.randperm(32 * 16, device="cuda")[:n]
    slots[::5] = -1
    kc = torch.zeros(32, 16, 2, 128, device="cuda", dtype=bf16)
    vc = torch.zeros_like(kc)
    q0 = q.clone()
    P.kv_append_rope_slots()(pos, q, k, v, cs, slots, kc, vc)

    def rope(x):
        c, s = cs[pos][:, None, :rot // 2], cs[pos][:, None, rot // 2:]
        x1, x2 = x[..., :rot // 2].float(), x[..., rot // 2:rot].float()
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, x[..., rot:].float()], -1)
    torch.testing.assert_close(q.float(), rope(q0).to(bf16).float(), rtol=1e-2, atol=1e-2)
    keep = slots >= 0
    flat_k, flat_v = kc.view(-1, 2, 128), vc.view(-1, 2, 128)
    torch.testing.assert_close(flat_k[slots[keep]].float(), rope(k)[keep].to(bf16).float(), rtol=1e-2, atol=1e-2)
    assert torch.equal(flat_v[slots[keep]], v[keep])
    untouched = torch.ones(32 * 16, dtype=torch.bool, device="cuda")
    untouched[slots[keep]] = False
    assert not flat_k[untouched].any() and not flat_v[untouched].any()


@pytest.mark.gpu
def test_spec_verify_token_tree_on_gpu():
    torch.manual_seed(7)
    lens = [17, 0]
    K, V, table, seqs = _paged(lens + [1], 64, 48, 16, 2, 64, f16)
    table = table[:2].contiguous()
    Q = torch.randn(2, 6, 8, 64, device="cuda", dtype=f16)
    Kd = torch.randn(2, 6, 2, 64, device="cuda", dtype=f16)
    Vd = torch.randn(2, 6, 2, 64, device="cuda", dtype=f16)
    parents = torch.tensor([[-1, 0, 0, 1, -1, 4], [-1, -1, 1, 2, 2, 0]], dtype=i32, device="cuda")
    O = P.spec_verify_token_tree()(Q, K, V, Kd, Vd, table, torch.tensor(lens, dtype=i32, device="cuda"), parents)
    for b, n in enumerate(lens):
        anc = torch.zeros(6, 6, dtype=torch.bool, device="cuda")
        for i in range(6):
            j = i
            while j >= 0:
                anc[i, j] = True
                j = parents[b, j].item()
        kp, vp = seqs[b]
        for t in range(6):
            for h in range(8):
                keys = torch.cat([kp[:, h // 4], Kd[b, :, h // 4]])
                vals = torch.cat([vp[:, h // 4], Vd[b, :, h // 4]])
                mask = torch.cat([torch.ones(n, dtype=torch.bool, device="cuda"), anc[t]])
                ref = _attend(Q[b, t, h], keys, vals, mask)
                torch.testing.assert_close(O[b, t, h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_chunked_prefill_paged_on_gpu():
    torch.manual_seed(8)
    lens, chunks = [17, 1000, 150], [17, 100, 1]
    K, V, table, seqs = _paged(lens, 64, 64, 20, 2, 128, bf16)
    cu = torch.tensor([0] + list(torch.tensor(chunks).cumsum(0)), dtype=i32, device="cuda")
    Q = torch.randn(sum(chunks), 8, 128, device="cuda", dtype=bf16)
    O = P.chunked_prefill_paged()(Q, K, V, table, cu, torch.tensor(lens, dtype=i32, device="cuda"))
    for b, (n, c) in enumerate(zip(lens, chunks)):
        k, v = seqs[b]
        q = Q[cu[b]:cu[b + 1]]
        mask = torch.arange(n, device="cuda")[None, :] <= (n - c + torch.arange(c, device="cuda"))[:, None]
        for h in range(8):
            ref = _attend(q[:, h], k[:, h // 4], v[:, h // 4], mask)
            torch.testing.assert_close(O[cu[b]:cu[b + 1], h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_mla_paged_latent576_split_on_gpu():
    torch.manual_seed(9)
    lens = [17, 600]
    KV = torch.randn(40, 64, 576, device="cuda", dtype=bf16) * 0.5
    perm = torch.randperm(40, device="cuda").to(i32)
    table = perm[:32].view(2, 16).contiguous()
    Q = torch.randn(2, 64, 576, device="cuda", dtype=bf16) * 0.5
    part, lse = P.mla_paged_latent576_split()(Q, KV, table, torch.tensor(lens, dtype=i32, device="cuda"))
    w = torch.softmax(lse * math.log(2), 1)  # (log2-sum-exps; an empty split weighs 0)
    O = (part * w[..., None]).sum(1)
    for b, n in enumerate(lens):
        rows = KV[table[b].long()].reshape(-1, 576)[:n]
        ref = _attend(Q[b], rows, rows[:, :512], scale=576 ** -0.5)
        torch.testing.assert_close(O[b], ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_combine_varsplit_natural_lse_on_gpu():
    torch.manual_seed(10)
    splits = torch.tensor([3, 8, 0, 1], dtype=i32, device="cuda")
    part = torch.randn(4, 8, 16, 128, device="cuda", dtype=bf16)
    lse = torch.randn(4, 8, 16, device="cuda") * 3
    O = P.combine_varsplit_natural_lse()(part, lse, splits)
    for b, n in enumerate(splits.tolist()):
        if n == 0:
            assert torch.equal(O[b], torch.zeros_like(O[b]))
            continue
        w = torch.softmax(lse[b, :n], 0)  # (n, heads)
        ref = (part[b, :n].float() * w[..., None]).sum(0)
        torch.testing.assert_close(O[b].float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_spec_verify_causal_two_loops_on_gpu():
    torch.manual_seed(11)
    lens, S = [4, 17, 1000, 130], 1000
    Q = torch.randn(4, 4, 16, 128, device="cuda", dtype=bf16)
    K = torch.randn(4, S, 4, 128, device="cuda", dtype=bf16)
    V = torch.randn(4, S, 4, 128, device="cuda", dtype=bf16)
    O = P.spec_verify_causal_two_loops()(Q, K, V, torch.tensor(lens, dtype=i32, device="cuda"))
    for b, n in enumerate(lens):
        mask = torch.arange(n, device="cuda")[None, :] <= (n - 4 + torch.arange(4, device="cuda"))[:, None]
        for h in range(16):
            ref = _attend(Q[b, :, h], K[b, :n, h // 4], V[b, :n, h // 4], mask)
            torch.testing.assert_close(O[b, :, h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_mla_decode_reversed_tiles_on_gpu():
    torch.manual_seed(12)
    lens = [1, 700]
    KV = torch.randn(24, 64, 320, device="cuda", dtype=f16) * 0.5
    table = torch.randperm(24, device="cuda")[:24].to(i32).view(2, 12).contiguous()
    Q = torch.randn(2, 64, 320, device="cuda", dtype=f16) * 0.5
    O, lse = P.mla_decode_reversed_tiles()(Q, KV, table, torch.tensor(lens, dtype=i32, device="cuda"))
    for b, n in enumerate(lens):
        rows = KV[table[b].long()].reshape(-1, 320)[:n]
        s = Q[b].float() @ rows.float().T * 320 ** -0.5
        torch.testing.assert_close(O[b].float(), torch.softmax(s, -1) @ rows[:, :256].float(),
                                   rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(lse[b], torch.logsumexp(s, -1) / math.log(2), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_int8_qk_decode_token_scales_on_gpu():
    torch.manual_seed(13)
    lens, S = LENS, 1000
    Qq = torch.randint(-127, 128, (3, 32, 128), device="cuda", dtype=torch.int8)
    Kq = torch.randint(-127, 128, (3, S, 4, 128), device="cuda", dtype=torch.int8)
    qs = torch.rand(3, 32, device="cuda") * 0.01
    ks = torch.rand(3, S, 4, device="cuda") * 0.01
    V = torch.randn(3, S, 4, 128, device="cuda", dtype=bf16)
    O = P.int8_qk_decode_token_scales()(Qq, qs, Kq, ks, V, torch.tensor(lens, dtype=i32, device="cuda"))
    for b, n in enumerate(lens):
        for h in range(32):
            s = (Kq[b, :n, h // 8].float() @ Qq[b, h].float()) * qs[b, h] * ks[b, :n, h // 8] / math.sqrt(128)
            ref = torch.softmax(s, -1) @ V[b, :n, h // 8].float()
            torch.testing.assert_close(O[b, h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gqa_decode_token_mask_on_gpu():
    torch.manual_seed(14)
    Q = torch.randn(2, 32, 128, device="cuda", dtype=f16)
    K = torch.randn(2, 1000, 4, 128, device="cuda", dtype=f16)
    V = torch.randn(2, 1000, 4, 128, device="cuda", dtype=f16)
    mask = torch.rand(2, 1000, 4, device="cuda") > 0.3
    mask[1, :, 2] = False  # a KV head with no token: its heads give 0
    O = P.gqa_decode_token_mask()(Q, K, V, mask)
    for b in range(2):
        for h in range(32):
            keep = mask[b, :, h // 8]
            if not keep.any():
                assert not O[b, h].any()
                continue
            ref = _attend(Q[b, h], K[b, :, h // 8], V[b, :, h // 8], keep)
            torch.testing.assert_close(O[b, h].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_varlen_decode_tile_scores_sink_on_gpu():
    torch.manual_seed(15)
    lens = [1, 17, 1000]
    cu = torch.tensor([0, 1, 18, 1018], dtype=i32, device="cuda")
    Q = torch.randn(3, 32, 128, device="cuda", dtype=bf16)
    K = torch.randn(1018, 4, 128, device="cuda", dtype=bf16)
    V = torch.randn(1018, 4, 128, device="cuda", dtype=bf16)
    sinks = torch.randn(32, device="cuda")
    O, S = P.varlen_decode_tile_scores_sink()(Q, K, V, cu, sinks)
    for b, n in enumerate(lens):
        for h in range(32):
            k, v = K[cu[b]:cu[b + 1], h // 8].float(), V[cu[b]:cu[b + 1], h // 8].float()
            s = k @ Q[b, h].float() / math.sqrt(128)
            mx = s.max()
            denom = torch.exp(s - mx).sum() + torch.exp(sinks[h] - mx)
            torch.testing.assert_close(O[b, h].float(), (torch.exp(s - mx) @ v) / denom, rtol=2e-2, atol=2e-2)
            tiles = -(-n // 64)
            want = torch.zeros(16, device="cuda")
            want[:tiles] = torch.stack([torch.exp(s[t * 64:(t + 1) * 64].max() - mx) for t in range(tiles)]) / denom
            torch.testing.assert_close(S[b, h].float(), want, rtol=2e-2, atol=2e-3)
