"""A forty-eighth set of programs in TileLang's idioms (tests/unseen_programs48.py): DeepSeek-V3.2
/ V4-era sparse attention and block-scaled fp8 -- sparse MLA forward (also as column-sliced
split-latent GEMMs, as a decode step over an fp8 cache, and as a split-k decode with its
combine kernel), V4's sparse attention with sinks and with partial RoPE, the lightning indexer
(dense, block-sparse, the varlen top-k form with a bitonic sort, its backward), the logits
clean-up, two radix top-k selectors, NSA's compressed-block attention, DeepGEMM's block-scaled
fp8 GEMM, the fp8 act_quant (a ue8m0 scale from the bits; whole rows through a reshaped
fragment), and the sparse MLA backward's dQ / dKV by atomics.

CPU: each builds to an sm_90a cubin (and an sm_80 one where it uses no fp8 and fits), and what
decides its result is read in the generated source. One showed a codegen fault:
indexer_topk_softmax's bitonic compare-and-swap, ``i < other and ((up and v[i] > v[other]) or
(not up and v[i] < v[other]))``, read ``v[other]`` inside the very guard meant to keep it from
being read (the second way's condition held it, and CuTe evaluates a condition whole) --
harmless there (``other`` stays inside the buffer), a read past a shared tile where the guard's
first test is the bounds check (``v < 128 and ...``); a read reached several ways is now taken
one way at a time (codegen/bounds.py, tests/test_register_branch_reads.py). And one ran slower
than TileLang's: sparse_mla_decode_fp8_cache's dequantising gather ran one element a thread
step (1-byte loads), the tile scale's index ``d // 128`` keeping the nest at one lane; a read
one value across each aligned group of lanes now runs per lane beside 16-byte loads
(transform/vectorize.py, tests/test_group_invariant_lanes.py). The refusals met are TileLang's
too: a bool fragment used as the score's column mask and again as the dKV accumulator's row
mask ("Layout infer conflict between valid and acc_dkv" in TileLang 0.1.15), and sizes past
sm_80's shared memory / its fp8 casts; each message names the kernel's line and the form.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs48.py``)."""

import math
import re

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.codegen.source import CodegenError
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.shared_memory import SharedMemoryError
import rounds
import unseen_programs48 as P

bf16, f32, i32, fp8 = torch.bfloat16, torch.float32, torch.int32, torch.float8_e4m3fn

NAMES = ["act_quant_row_groups", "act_quant_ue8m0", "clean_logits_window", "deepgemm_fp8_promote",
         "indexer_block_sparse_fp8", "indexer_bwd", "indexer_topk_softmax", "lightning_indexer_fp8", "nsa_compressed_attn",
         "radix_topk_exact", "radix_topk_select", "sparse_attn_partial_rope", "sparse_attn_sink_fwd", "sparse_mla_bwd_dq_dkv", "sparse_mla_fwd",
         "sparse_mla_decode_fp8_cache", "sparse_mla_decode_splitk", "sparse_mla_fwd_split_latent"]
# eager kernels are built from the arguments they are called with (CPU tensors give the shapes)
EAGER = {
    "indexer_block_sparse_fp8": lambda: P.indexer_block_sparse_fp8.compile(
        torch.zeros(8 * 32, 64, dtype=fp8), torch.zeros(1024, 64, dtype=fp8), torch.zeros(1024),
        torch.zeros(8, 4, dtype=torch.int64), torch.zeros(8, 32), torch.zeros(8, dtype=i32),
        torch.zeros(8, dtype=i32)),
    "clean_logits_window": lambda: P.clean_logits_window.compile(
        torch.zeros(16, 3000), torch.zeros(16, dtype=i32), torch.zeros(16, dtype=i32)),
    "act_quant_ue8m0": lambda: P.act_quant_ue8m0.compile(torch.zeros(100, 512, dtype=bf16)),
    "lightning_indexer_fp8": lambda: P.lightning_indexer_fp8.compile(
        torch.zeros(100 * 8, 64, dtype=fp8), torch.zeros(300, 64, dtype=fp8), torch.zeros(300),
        torch.zeros(100, 8), torch.zeros(100, dtype=i32), torch.zeros(100, dtype=i32)),
}
# no sm_80 cubin: fp8 GEMMs and casts (sm_89+); the split-latent forward's two KV stages and Q
# take 225 KiB of shared memory (sm_80 has 163; test below); the eager kernels are on sm_90a only
NO_SM80 = {"act_quant_row_groups", "deepgemm_fp8_promote", "sparse_mla_decode_fp8_cache", "sparse_mla_fwd_split_latent"} | set(EAGER)

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P, EAGER)
_body = rounds.body_of(_kernel)
test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - NO_SM80), rounds.tir_of(P), "sm_80")


# ---- what decides each result, in the generated source -----------------------------------------
def test_sparse_mla_gathers_latent_and_rope_rows_by_index():
    src = _body("sparse_mla_fwd")
    # the latent and rope parts of Q from one TMA'd row block each; KV rows gathered by index
    assert "tct.load(Q_desc, tc_smem + 0, tc_bar0, (0, 0, s_i1, by1)" in src
    assert "tct.load(Q_desc, tc_smem + 65536, tc_bar0, (512, 0, s_i1, by1)" in src
    assert "cutlass.max(Indices[by1, s_i1, 0, bi_1_], 0) * 576 + 0 * 576 + d" in src
    assert "cutlass.max(Indices[by1, s_i1, 0, bi_2_], 0) * 576 + 0 * 576 + 512 + d_1_" in src
    assert "valid[tc_q15 + tc_lane17] = idx >= 0 and idx <= s_i1" in src
    # the score: masked start, the latent GEMM then the rope GEMM into the same accumulator
    assert 'cutlass.select_(valid[tcrow.col_of(acc_s, ' in src
    assert src.index("# T.gemm(Q_s, KV_s, acc_s)") < src.index("# T.gemm(Qt_s, Kt_s, acc_s)")
    assert "l_i[tc_q42] = cute.math.log2(l_i[tc_q42]) + m_i[tc_q42] * cutlass.Float32(0.06011229333333333)" in src
    assert "Lse[by1, s_i1, i10] = l_i[" in src


def test_fp8_cache_decode_dequantises_the_gathered_rows():
    src = _body("sparse_mla_decode_fp8_cache")
    assert "row = cutlass.max(Idx[b, it * 64 + bi], 0)" in src
    # 16 fp8 elements a load, each lane's tile scale read on its own (one value a 16-lane group)
    assert ("Kq.iterator + cute.assume(cutlass.max(Idx[b, it * 64 + bi], 0) * 512 + d, divby=16), "
            "cute.make_layout(16)).load()") in src
    assert re.search(r"(tc_ld\d+) = Ks\[row, \(d \+ tc_lane\d+\) // 128\]", src)
    assert re.search(r"= cutlass\.BFloat16\(cutlass\.Float32\(tc_vec\d+\[tc_lane\d+\]\) \* tc_ld\d+\)", src)
    # the rope part still moves by cp.async, a stage ahead
    assert "tcc.copy_async(cute.make_tensor(Kr.iterator + cute.assume(cutlass.max(Idx[b, (it + 1) * 64 + bi_1_], 0) * 64" in src
    assert src.index("# T.gemm(Q_s, KV_s, acc_s)") < src.index("# T.gemm(Qt_s, Kt_s, acc_s)")


def test_splitk_decode_writes_partials_then_combines_them():
    src = rounds.source(P.sparse_mla_decode_splitk.get_tir())
    first, second = (k.split("\n@cute.jit", 1)[0] for k in src.split("\n@cute.kernel\n")[1:])
    # a split with no valid index: zeros and -inf, not 0 / 0
    assert "cutlass.select_(l_i[tcrow.row_of(acc_o, tc_r29)] > cutlass.Float32(0.0), acc_o[tc_r29 + tc_lane30] / l_i[" in first
    assert "cute.math.log2(l_i[tc_q31]) + mx[tc_q31] * cutlass.Float32(0.08064910450604446), cutlass.Float32(float(\"-inf\")))" in first
    assert "tct.store(Opart_desc, tc_smem + 0, (0, 0, sp1, b1)" in first and "Lpart[b1, sp1, i10] = l_i[" in first
    assert "lse[s] = Lpart[bb, s, head]" in second
    assert "lse[s_1_] = cute.math.exp2(lse[s_1_] - lmax[0])" in second
    assert "o[tc_lane5] = o[tc_lane5] + tc_vec4[tc_lane5] * lse[s_2_] / wsum[0]" in second


def test_split_latent_gemms_read_column_slices():
    src = _body("sparse_mla_fwd_split_latent")
    # Q_s's columns 256.. start 4 swizzled 64-column chunks in (4 * 8192 bytes); stage st of KV_s
    assert "tcm.operand(tc_smem + 32768, cutlass.BFloat16, 64, 256, 128, False" in src
    assert "tcm.operand(tc_smem + cute.assume(106496 + (st) * 73728, divby=1024), cutlass.BFloat16, 64, 256, 128, False" in src
    assert "tcm.operand(tc_smem + 65536, cutlass.BFloat16, 64, 64, 128, False" in src  # the rope columns
    # each output half is P times its half of the latent columns (B operand N-major)
    assert re.search(r"# T\.gemm\(P_s, KV_s\[st, 0:64, 256:512\], acc_r\):[^\n]*\n\s+tcm\.gemm\(tc_mma4, tc_tid, acc_r, "
                     r"tcm\.operand\(tc_smem \+ 221184, .*tcm\.operand\(tc_smem \+ cute\.assume\(106496 \+ \(st\) \* 73728, "
                     r"divby=1024\), cutlass\.BFloat16, 64, 256, 128, True", src)


def test_sink_attention_guards_the_head_block_past_the_heads():
    k = P.sparse_attn_sink_fwd()
    src = rounds.kernel_body(k)
    # Q, the sinks and the output move by TMA boxes of 64 heads over a 16-head tensor: the
    # box's rows past the tensor read zero and are not stored
    assert "tct.load(Q_desc, tc_smem + 0, tc_bar0, (0, h0, s_i, b), 16384" in src
    assert "tct.load(Sinks_desc, tc_smem + 57856, tc_bar0, (h0,), 128)" in src
    assert "tct.store(Out_desc, tc_smem + 0, (0, h0, s_i, b)" in src
    assert "ok[tc_q10 + tc_lane12] = tc_vec11[tc_lane12] >= 0" in src
    # the sink joins each row's denominator after the partial row sums are combined
    tail = src.split("tcrow.combine_rows(denom, ", 1)[1]
    assert "denom[tc_q30] = denom[tc_q30] + cute.math.exp2((cutlass.Float32(sink_s[h_5_]) * cutlass.Float32(1.44269504) - mx[tc_q30]" in tail


def test_partial_rope_rotates_the_gathered_stage_before_the_gemm():
    src = _body("sparse_attn_partial_rope")
    # Q's rope dims rotated in place at the query's position, after its TMA load
    assert "tc_vec3.store(cute.make_tensor(Cos.iterator + cute.assume(s_i * 32 + d, divby=4)" in src
    assert "cutlass.BFloat16(x1 * tc_vec3[tc_lane5] - x2 * tc_vec4[tc_lane5])" in src
    # each gathered row at its own position, in the stage the cp.async filled: after the wait,
    # and the rotated stage made visible to the wgmma (fence, barrier) before the QK^T GEMM
    loop = src.split("for it in cutlass.range(0, 2):", 1)[1]
    wait = loop.index("cute.arch.cp_async_wait_group(1)")
    rot = loop.index("Cos.iterator + cute.assume(cutlass.max(Idx[s_i, it * 64 + j_1_], 0) * 32 + d_2_, divby=4)")
    gemm = loop.index("# T.gemm(Q_s, KV_s, acc_s)")
    assert wait < rot < gemm
    assert ('cute.arch.fence_proxy("async.shared", space="cta")\n        cute.arch.sync_threads()\n'
            '        # T.gemm(Q_s, KV_s, acc_s)') in loop
    assert "cutlass.BFloat16(y1 * tc_vec27[tc_lane29] - y2 * tc_vec28[tc_lane29])" in loop


def test_block_sparse_indexer_casts_block_ids_and_sums_heads():
    src = _body("indexer_block_sparse_fp8")
    assert "blk = cutlass.Int32(BlockIdx[m, n])" in src
    assert '"wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32' in src
    assert "cute.arch.fmax(s[tc_r7 + tc_lane8] * ks_s[j_1_], cutlass.Float32(0.0)) * w[" in src
    assert 'tcrow.reduce_segments(s, tc_s_ij, s3_runs, "sum", 32, 1, tc_tid, 0)' in src
    assert "if k0 + j_2_ < k_lo or k0 + j_2_ >= k_hi:" in src
    assert "Logits[m, n * 128 + sub * 64 + j_3_] = lg[0]" in src


def test_lightning_indexer_walks_the_block_window_and_stores_transposed():
    src = _body("lightning_indexer_fp8")
    assert "q0 = bx * 16" in src  # block_Q = 128 // heads, heads a T.const (8)
    assert "k_lo[0] = cutlass.min(k_lo[0], cutlass.min(tc_ld1, seq_len_kv))" in src
    assert "for n in cutlass.range(0, (k_hi[0] - k_lo[0] + 64 - 1) // 64):" in src
    assert "tc_ld15 = KScale[k_lo[0] + n * 64 + i5]" in src  # the K scales as the score's rows
    assert 'tcrow.reduce_segments(s, tc_s_ij, s3_runs, "sum", 8, 16, tc_tid, 0)' in src
    assert "Logits[q0 + (q_3_ + tc_lane24), k_lo[0] + n * 64 + j_1_] = lg[" in src


def test_indexer_topk_keeps_a_running_top_k_by_bitonic_sort():
    src = _body("indexer_topk_softmax")
    assert "tct.load(Q_desc, tc_smem + 0, tc_bar0, (0, 0, bos + pos), 2048)" in src
    assert "cutlass.select_(k0 + i <= pos, tc_vec7[tc_lane8], cutlass.BFloat16(0.0))" in src
    assert "base[0] = 64 + (k0 - k0 // 64 * 64)" in src
    assert "val_s[base[0] + i_2_] = cutlass.select_(k0 + i_2_ <= pos, tot[tc_q14], cutlass.Float32(float(\"-inf\")))" in src
    assert "if k0 + 32 > 64 and (k0 + 32) - (k0 + 32) // 64 * 64 == 0:" in src
    # the compare-and-swap reads val_s[other] one way at a time (the fix of hoist_branches:
    # the second way's guard read it unguarded)
    assert re.search(r"if i_3_ < other and up:\s+(tc_ld\d+) = val_s\[other\]\s+"
                     r"if i_3_ < other and not \(up and val_s\[i_3_\] > \1\) and not up:\s+\1 = val_s\[other\]", src)
    assert "Prob.iterator + cute.assume(t * 64 + i_6_, divby=4)" in src
    assert "cutlass.select_(tc_vec45[tc_lane46] > pos, -1, tc_vec45[tc_lane46])" in src


def test_indexer_bwd_reduces_dw_over_rows_and_scatters_dk():
    src = _body("indexer_bwd")
    assert "tc_vec5[tc_lane6] = cutlass.BFloat16(cutlass.Float32(tc_vec5[tc_lane6]) * cutlass.Float32(0.125))" in src
    assert "cutlass.select_(row > -1 and row <= pos, tc_vec12[tc_lane13], cutlass.BFloat16(0.0))" in src
    assert 'tcrow.reduce_cols(dw_part, tc_dw_part_ij, dw, "sum", False, ' in src  # dim=0, clear=False
    assert re.search(r"d_relu\[0\] = cutlass\.Float32\(0\.0\)\s+if lg\[tc_r21 \+ tc_lane24\] > cutlass\.Float32\(0\.0\):\s+"
                     r"d_relu\[0\] = cutlass\.Float32\(1\.0\)\s+else:\s+d_relu\[0\] = cutlass\.Float32\(0\.0\)", src)
    # dQ's A operand: the bf16 register fragment staged to shared, read transposed
    assert "# T.gemm(dl_a_shared, k_s, dq): dq += dl_a_shared^T @ k_s" in src
    assert re.search(r"if row_1_ > -1 and row_1_ <= pos:\s+if bos \+ row_1_ >= 0 and bos \+ row_1_ < tokens:\s+"
                     r"tca\.atomic_add\(dK, \(bos \+ row_1_, \(d_2_ \+ tc_lane38\)\), dk\[", src)
    assert "dW[bos + pos, i15] = cutlass.BFloat16(tcr.pick(dw, i15, 16))" in src


def test_clean_logits_marks_ends_then_outside():
    src = _body("clean_logits_window")
    assert "col = c * 1024 + r * 256 + tx" in src
    assert re.search(r'if col == lo or col == hi - 1:\s+Logits\[row, col\] = cutlass\.Float32\(float\("inf"\)\)\s+'
                     r'if col < lo or col >= hi:\s+Logits\[row, col\] = cutlass\.Float32\(float\("-inf"\)\)', src)


def test_radix_select_keys_scans_and_places():
    src = _body("radix_topk_select")
    key = ("cutlass.select_(x[b, p] < cutlass.Float32(0.0), (cutlass.Int32(tcmath.reinterpret(cutlass.Float16(x[b, p]), "
           "cutlass.Uint16)) ^ -1) & 65535, cutlass.Int32(tcmath.reinterpret(cutlass.Float16(x[b, p]), cutlass.Uint16) | "
           "cutlass.Uint16(32768))) >> 8")
    assert "tca.atomic_add(hist, cutlass.Int32(" + key + "), 1)" in src
    assert src.count("cute.arch.barrier(barrier_id=1, number_of_threads=256)") == 3
    assert "if tc_tid < 256:" in src  # the scan's threads only, around the named barriers
    assert "need[0] = 64 - hist[t_bin[0] + 1]" in src
    assert "pos[0] = tca.atomic_fetch(hist, key[0] + 1, 1, \"add\")" in src
    assert "pos[0] = tca.atomic_fetch(n_eq, 0, 1, \"add\")" in src
    assert "index[b, 64 - need[0] + r] = eq_list[r]" in src


def test_exact_radix_select_shifts_by_round_and_keeps_candidates_by_parity():
    src = _body("radix_topk_exact")
    assert "while rnd[0] < 4 and need[0] > 0:" in src
    assert re.search(r"\(tcmath\.reinterpret\((tc_ld\d+), cutlass\.Uint32\) \^ cutlass\.Uint32\(4294967295\)\) & "
                     r"cutlass\.Uint32\(4294967295\), tcmath\.reinterpret\(\1, cutlass\.Uint32\) \| cutlass\.Uint32\(2147483648\)\)\) "
                     r">> cutlass\.Uint32\(24 - rnd\[0\] \* 8\) & cutlass\.Uint32\(255\)\)", src)
    assert "= cand[(rnd[0] - rnd[0] // 2 * 2) * 1024 + c * 256 + tx]" in src  # this round's list
    assert "pos[0] = tca.atomic_fetch(n_cand, (rnd[0] + 1) - (rnd[0] + 1) // 2 * 2, 1, \"add\")" in src
    assert "cand[((rnd[0] + 1) - (rnd[0] + 1) // 2 * 2) * 1024 + pos[0]] = p[0]" in src  # the next round's
    assert "index[b, 32 - need[0] + above[0] + pos[0]] = p[0]" in src  # the last round's equal keys
    assert src.count("cute.arch.barrier(barrier_id=2, number_of_threads=256)") == 2
    assert "need[0] = need[0] - above[0]" in src and "rnd[0] = rnd[0] + 1" in src


def test_nsa_compressed_attention_counts_visible_blocks():
    src = _body("nsa_compressed_attn")
    assert "n_vis = cutlass.Int32(cutlass.select_(t1 + 1 >= 32, (t1 + 1 - 32) // 16 + 1, 0))" in src
    assert "for c in cutlass.range(0, (n_vis + 32 - 1) // 32):" in src
    assert "cutlass.select_(c * 32 + (j + tc_lane8) < n_vis, acc_s[" in src
    assert "tcm.gemm_warp(" in src  # 16 rows (the group's heads): mma.sync
    assert "cutlass.select_(n_vis > 0, acc_o[tc_r19 + tc_lane20] / tot[" in src


def test_deepgemm_promotes_each_k_block_with_both_scales():
    src = _body("deepgemm_fp8_promote")
    assert "accumulate=False)" in src  # clear_accum: the K block's own product
    assert "tc_ld4 = Sa[k, by_1_ * 64 + i3]" in src  # K-major activation scales
    assert "sb = Sb[bx_1_ * 64 // 128, k]" in src  # two 64-wide N blocks share a weight scale
    assert "acc[tc_r5 + tc_lane6] = acc[tc_r5 + tc_lane6] + part[tc_r5 + tc_lane6] * sa_s[i] * sb" in src
    assert "panel_index - panel_index // 2 * 2 == 1" in src  # T.use_swizzle's serpentine panels


def test_act_quant_builds_the_scale_from_bits():
    src = _body("act_quant_ue8m0")
    assert ("tcmath.reinterpret(cutlass.Int32(tcmath.reinterpret(cute.arch.fmax(tc_red13[tc_c18], cutlass.Float32(0.0001)) "
            "* cutlass.Float32(0.002232142857142857), cutlass.Uint32) >> cutlass.Uint32(23) & cutlass.Uint32(255)) - 127 + "
            "cutlass.Int32(cutlass.select_(") in src
    assert "!= cutlass.Uint32(0), 1, 0)) + 127 << 23, cutlass.Float32)" in src
    assert "cute.arch.fmin(cute.arch.fmax(" in src and "cutlass.Float32(-448.0)), cutlass.Float32(448.0))" in src
    assert "e8[bx * 32 + i_2_, by] = cutlass.Uint8(tcmath.reinterpret(tc_rows19[tc_c23], cutlass.Uint32) >> cutlass.Uint32(23) & cutlass.Uint32(255))" in src
    assert "tct.load(" not in src  # disable_tma: cp.async in, plain stores out
    assert "if bx * 32 + i7 < M:" in src  # the partial last row block


def test_row_group_quant_reduces_the_reshaped_groups():
    src = _body("act_quant_row_groups")
    assert "x3 = x_l  # T.view of x_l" in src
    # a group is 8 threads x 16 registers: their maxima meet by an 8-lane warp reduction
    assert 'tc_red11[tc_c13] = tcr.warp_allreduce(tc_acc15, "max", 8)' in src
    assert "tcr.grouped_rows(tc_red11, tc_rows12, amax_scratch, 16, 8, tc_tid)" in src
    assert "g_1_ = (tc_f17 // 128) % 4" in src and "/ amax[i_1_ * 4 + g_1_]" in src
    assert "s[bx * 16 + i5, i6] = amax[i5 * 4 + i6]" in src


def test_sparse_mla_bwd_scatters_dkv_by_atomics():
    src = _body("sparse_mla_bwd_dq_dkv")
    assert "cute.math.exp2(acc_p[tc_r20 + tc_lane21] * cutlass.Float32(0.10411754621281724) - lse[" in src
    assert ("acc_dp[tc_r22 + tc_lane23] = acc_p[tc_r22 + tc_lane23] * (acc_dp[tc_r22 + tc_lane23] - delta["
            in src)
    assert "# T.gemm(dS_s, Q_s, acc_dkv): acc_dkv = dS_s^T @ Q_s" in src
    assert "# T.gemm(P_s, dO_s, acc_dkv): acc_dkv += P_s^T @ dO_s" in src
    assert re.search(r"row = Idx\[b, s_i, it \* 64 \+ bi_6_\]\s+if row >= 0 and row <= s_i:\s+"
                     r"tca\.atomic_add\(dKV, \(b, row, \(d_2_ \+ tc_lane31\)\), acc_dkv\[", src)
    assert "tca.atomic_add(dKV, (b, row_1_, 128 + (d_3_ + tc_lane33)), acc_dkt[" in src
    assert "tct.store(dQ_desc, tc_smem + 0, (128, 0, s_i, b)" in src  # the rope part of dQ


def test_split_latent_is_too_big_for_sm80():
    with pytest.raises(SharedMemoryError,
                       match=r"unseen_programs48\.py:\d+: prim_func 'main': kernel 0 needs 230400 bytes of shared "
                             r"memory; a block can have at most 166912 on sm_80"):
        rounds.source(P.sparse_mla_fwd_split_latent.get_tir(), "sm_80")


def test_fp8_cache_decode_is_refused_on_sm80():
    with pytest.raises(CodegenError, match=r"unseen_programs48\.py:\d+: prim_func 'main': a cast from float8_e4m3 "
                                           r"to float32: float8 values convert only on sm_89\+"):
        rounds.source(P.sparse_mla_decode_fp8_cache.get_tir(), "sm_80")


def test_column_mask_reused_as_accumulator_row_mask_is_refused():
    """TileLang 0.1.15 refuses this too: "Layout infer conflict between valid and acc_dkv"."""

    @T.prim_func
    def main(Idx: T.Tensor((64,), T.int32), A: T.Tensor((64, 64), T.bfloat16),
             Out: T.Tensor((64, 64), T.float32), dK: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), T.bfloat16)
            valid = T.alloc_fragment((64,), T.bool)
            acc = T.alloc_fragment((64, 64), T.float32)
            acc_t = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a_s)
            for j in T.Parallel(64):
                valid[j] = Idx[j] >= 0
            for i, j in T.Parallel(64, 64):
                acc[i, j] = T.if_then_else(valid[j], 0, -1.0)
            T.gemm(a_s, a_s, acc, transpose_B=True)
            T.gemm(a_s, a_s, acc_t, transpose_A=True, clear_accum=True)
            T.copy(acc, Out)
            for i, j in T.Parallel(64, 64):
                if valid[i]:
                    dK[i, j] = acc_t[i, j]

    with pytest.raises(LayoutError, match=r"test_unseen_programs48\.py:\d+: prim_func 'main': fragment 'valid' "
                                          r"holds one value per row of a T\.gemm accumulator"):
        rounds.source(main)


# ---- on the GPU ----------------------------------------------------------------------------
def _rows_with_self(S, SKV, topk, gen, pad=0.1):
    """Per query s: topk distinct KV positions (SKV >= topk), s itself first so that every
    row sees one; a share of the others -1.  Some lie past s (the causal kernels mask them)."""
    rows = []
    for s in range(S):
        r = torch.randperm(SKV, generator=gen)[:topk]
        hit = (r == s).nonzero()
        if len(hit):
            r[hit[0, 0]] = r[0]
        r[0] = s
        rows.append(r)
    idx = torch.stack(rows).to(i32)
    drop = torch.rand(S, topk, generator=gen) < pad
    drop[:, 0] = False
    return idx.masked_fill(drop, -1)


def _gathered_attention(q, kv, idx, sm_scale, dv, causal):
    """softmax(q k^T * sm_scale) v over each query's gathered rows; -1 (and, with ``causal``,
    rows past the query) masked; q (S, H, Dq), kv (SKV, Dq), idx (S, topk).  Returns O and the
    natural-log LSE, float32."""
    S = q.shape[0]
    g = kv.float()[idx.clamp(min=0).long()]  # (S, topk, Dq)
    s = torch.einsum("shd,std->sht", q.float(), g) * sm_scale
    bad = idx < 0
    if causal:
        bad |= idx > torch.arange(S, device=idx.device)[:, None]
    s = s.masked_fill(bad[:, None, :], float("-inf"))
    p = s.softmax(-1)
    return torch.einsum("sht,std->shd", p, g[..., :dv]), torch.logsumexp(s, -1)


@pytest.mark.gpu
def test_sparse_mla_fwd_on_gpu():
    gen = torch.Generator().manual_seed(0)
    S, H, topk = 160, 64, 128
    Q = (torch.randn(1, S, H, 576, generator=gen) * 0.5).to(bf16).cuda()
    KV = (torch.randn(1, S, 1, 576, generator=gen) * 0.5).to(bf16).cuda()
    Idx = _rows_with_self(S, S, topk, gen).view(1, S, 1, topk).cuda()
    O, Lse = P.sparse_mla_fwd()(Q, KV, Idx)
    ref, lse = _gathered_attention(Q[0], KV[0, :, 0], Idx[0, :, 0], 576**-0.5, 512, True)
    torch.testing.assert_close(O[0].float(), ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(Lse[0], lse * math.log2(math.e), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_sparse_mla_decode_fp8_cache_on_gpu():
    gen = torch.Generator().manual_seed(14)
    B, SKV, H, topk = 6, 700, 64, 128
    Q = (torch.randn(B, H, 576, generator=gen) * 0.5).to(bf16)
    Kq = torch.randn(SKV, 512, generator=gen).to(fp8)
    Ks = torch.rand(SKV, 4, generator=gen) * 0.1 + 0.05
    Kr = (torch.randn(SKV, 64, generator=gen) * 0.5).to(bf16)
    Idx = torch.stack([torch.randperm(SKV, generator=gen)[:topk] for _ in range(B)]).to(i32)
    Idx[:, 1:][torch.rand(B, topk - 1, generator=gen) < 0.2] = -1
    O = P.sparse_mla_decode_fp8_cache()(*[t.cuda() for t in (Q, Kq, Ks, Kr, Idx)])
    kv = torch.cat([(Kq.float() * Ks.repeat_interleave(128, 1)).to(bf16).float(), Kr.float()], 1)
    ref, _ = _gathered_attention(Q, kv, Idx, 576**-0.5, 512, False)
    torch.testing.assert_close(O.cpu().float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_sparse_mla_decode_splitk_on_gpu():
    gen = torch.Generator().manual_seed(16)
    B, SKV, H, topk, splits = 3, 1000, 64, 512, 4
    Q = (torch.randn(B, H, 320, generator=gen) * 0.5).to(bf16)
    KV = (torch.randn(SKV, 320, generator=gen) * 0.5).to(bf16)
    Idx = torch.stack([torch.randperm(SKV, generator=gen)[:topk] for _ in range(B)]).to(i32)
    Idx[torch.rand(B, topk, generator=gen) < 0.2] = -1
    Idx[1, 128:256] = -1  # a split with nothing to attend
    Opart = torch.empty(B, splits, H, 256, device="cuda")
    Lpart = torch.empty(B, splits, H, device="cuda")
    O = P.sparse_mla_decode_splitk()(Q.cuda(), KV.cuda(), Idx.cuda(), Opart, Lpart)
    ref, _ = _gathered_attention(Q, KV, Idx, 320**-0.5, 256, False)
    torch.testing.assert_close(O.cpu().float(), ref, rtol=2e-2, atol=2e-2)
    assert (Lpart[1, 1] == float("-inf")).all() and (Opart[1, 1] == 0).all()


@pytest.mark.gpu
def test_sparse_mla_fwd_split_latent_on_gpu():
    gen = torch.Generator().manual_seed(1)
    S, H, topk = 144, 64, 128
    Q = (torch.randn(S, H, 576, generator=gen) * 0.5).to(bf16).cuda()
    KV = (torch.randn(S, 576, generator=gen) * 0.5).to(bf16).cuda()
    Idx = _rows_with_self(S, S, topk, gen).cuda()
    O = P.sparse_mla_fwd_split_latent()(Q, KV, Idx)
    ref, _ = _gathered_attention(Q, KV, Idx, 576**-0.5, 512, False)
    torch.testing.assert_close(O.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_sparse_attn_sink_fwd_on_gpu():
    gen = torch.Generator().manual_seed(2)
    S, SKV, H, D, topk = 128, 512, 16, 128, 128
    Q = torch.randn(1, S, H, D, generator=gen).to(bf16).cuda()
    KV = torch.randn(1, SKV, D, generator=gen).to(bf16).cuda()
    Sinks = torch.randn(H, generator=gen).to(bf16).cuda()
    Idx = torch.stack([torch.randperm(SKV, generator=gen)[:topk] for _ in range(S)]).to(i32)
    Idx[torch.rand(S, topk, generator=gen) < 0.2] = -1
    Idx[:, 0] = 7
    Idx = Idx.view(1, S, topk).cuda()
    O = P.sparse_attn_sink_fwd()(Q, KV, Idx, Sinks)
    g = KV[0].float()[Idx[0].clamp(min=0).long()]
    s = torch.einsum("shd,std->sht", Q[0].float(), g) * D**-0.5
    s = s.masked_fill((Idx[0] < 0)[:, None, :], float("-inf"))
    s = torch.cat([s, Sinks.float()[None, :, None].expand(S, H, 1)], -1)
    ref = torch.einsum("sht,std->shd", s.softmax(-1)[..., :-1], g)
    torch.testing.assert_close(O[0].float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_sparse_attn_partial_rope_on_gpu():
    gen = torch.Generator().manual_seed(13)
    S, SKV, H, D, topk = 100, 400, 64, 128, 128
    Q = torch.randn(S, H, D, generator=gen).to(bf16)
    KV = torch.randn(SKV, D, generator=gen).to(bf16)
    ang = torch.arange(SKV)[:, None] * (10000.0 ** (-torch.arange(32) / 32))[None, :]
    Cos, Sin = ang.cos(), ang.sin()
    Idx = _rows_with_self(S, SKV, topk, gen, pad=0.2)
    O = P.sparse_attn_partial_rope()(*[t.cuda() for t in (Q, KV, Cos, Sin, Idx)])

    def rot(x, c, s):
        x1, x2 = x[..., :32], x[..., 32:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(bf16).float()

    q, kv = Q.float(), KV.float()
    q[..., 64:] = rot(q[..., 64:], Cos[:S, None, :], Sin[:S, None, :])
    kv[:, 64:] = rot(kv[:, 64:], Cos, Sin)
    ref, _ = _gathered_attention(q, kv, Idx, D**-0.5, D, False)
    torch.testing.assert_close(O.cpu().float(), ref, rtol=2e-2, atol=2e-2)


def _fp8(*shape, gen, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(fp8)


@pytest.mark.gpu
def test_indexer_block_sparse_fp8_on_gpu():
    gen = torch.Generator().manual_seed(3)
    M, H, D, N, kvb, nb = 64, 32, 64, 1024, 128, 4
    q, k = _fp8(M * H, D, gen=gen), _fp8(N, D, gen=gen)
    ks = torch.rand(N, generator=gen) * 0.1 + 0.05
    blk = torch.stack([torch.randperm(N // kvb, generator=gen)[:nb] for _ in range(M)])
    w = torch.randn(M, H, generator=gen)
    lo = torch.randint(0, N // 2, (M,), generator=gen).to(i32)
    hi = (lo + torch.randint(1, N // 2, (M,), generator=gen)).to(i32)
    args = [t.cuda() for t in (q, k, ks, blk, w, lo, hi)]
    L = P.indexer_block_sparse_fp8(*args)
    pos = blk[:, :, None] * kvb + torch.arange(kvb)  # (M, nb, kvb)
    kk = k.float()[pos.flatten()].view(M, nb, kvb, D)
    s = torch.einsum("mhd,mtid->mtih", q.float().view(M, H, D), kk) * ks[pos][..., None]
    ref = (s.clamp(min=0) * w[:, None, None, :]).sum(-1)
    ref = ref.masked_fill((pos < lo[:, None, None]) | (pos >= hi[:, None, None]), float("-inf"))
    # (fp8 wgmma accumulates in less than fp32's precision -- DeepGEMM's reason to promote
    # -- and the head sum runs in another order: 5 of 32768 scores were 2e-3 off on the H200)
    torch.testing.assert_close(L.cpu(), ref.view(M, nb * kvb), rtol=5e-3, atol=5e-3)


@pytest.mark.gpu
def test_lightning_indexer_fp8_on_gpu():
    gen = torch.Generator().manual_seed(4)
    S, H, D, SKV = 100, 8, 64, 300
    q, k = _fp8(S * H, D, gen=gen), _fp8(SKV, D, gen=gen)
    ks = torch.rand(SKV, generator=gen) * 0.1 + 0.05
    w = torch.randn(S, H, generator=gen)
    ke = torch.arange(S, dtype=i32) * 3 + 1  # query s sees keys [ks, 3 s + 1)
    lo = (ke - torch.randint(1, 100, (S,), generator=gen).to(i32)).clamp(min=0)
    args = [t.cuda() for t in (q, k, ks, w, lo, ke)]
    L = P.lightning_indexer_fp8(*args).cpu()
    s = torch.einsum("shd,nd->snh", q.float().view(S, H, D), k.float())
    ref = (s.clamp(min=0) * w[:, None, :]).sum(-1) * ks[None, :]
    for m in range(S):  # the query's own window is always visited
        a, b = lo[m].item(), min(ke[m].item(), SKV)
        torch.testing.assert_close(L[m, a:b], ref[m, a:b], rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_indexer_topk_softmax_on_gpu():
    gen = torch.Generator().manual_seed(11)
    lens, H, D, k = [50, 130, 200], 16, 64, 64
    S = sum(lens)
    offsets = torch.tensor([0, 50, 180, 380], dtype=i32)
    tok = torch.cat([torch.stack([torch.full((n,), b), torch.arange(n)], 1) for b, n in enumerate(lens)]).to(i32)
    Q = torch.randn(S, H, D, generator=gen).to(bf16)
    K = torch.randn(S, D, generator=gen).to(bf16)
    W = torch.randn(S, H, generator=gen)
    idx, prob = P.indexer_topk_softmax()(Q.cuda(), W.cuda(), K.cuda(), offsets.cuda(), tok.cuda())
    idx, prob = idx.cpu(), prob.cpu()
    for t in range(S):
        b, pos = tok[t].tolist()
        bos = offsets[b].item()
        sc = ((torch.einsum("hd,kd->kh", Q[t].float(), K[bos:bos + pos + 1].float()) * D**-0.5).clamp(min=0)
              * W[t]).sum(-1)
        n = min(k, pos + 1)
        sel = idx[t][idx[t] >= 0].long()
        assert len(sel) == n and len(set(sel.tolist())) == n and (sel <= pos).all()
        assert sc[sel].min() >= sc.topk(n).values[-1] - 1e-4  # the n best (up to ties)
        want = torch.softmax(sc[sel], 0)
        torch.testing.assert_close(prob[t][idx[t] >= 0], want, rtol=1e-4, atol=1e-5)
        assert (prob[t][idx[t] < 0] == 0).all()


@pytest.mark.gpu
def test_indexer_bwd_on_gpu():
    gen = torch.Generator().manual_seed(15)
    lens, H, D, k = [70, 90], 16, 64, 64
    S, sm = sum(lens), D**-0.5
    offsets = torch.tensor([0, 70, 160], dtype=i32)
    tok = torch.cat([torch.stack([torch.full((n,), b), torch.arange(n)], 1) for b, n in enumerate(lens)]).to(i32)
    Q = torch.randn(S, H, D, generator=gen).to(bf16)
    W = torch.randn(S, H, generator=gen).to(bf16)
    K = torch.randn(S, D, generator=gen).to(bf16)
    Idx = torch.stack([torch.randperm(lens[b], generator=gen)[:k] for b in tok[:, 0].tolist()]).to(i32)
    Idx[torch.rand(S, k, generator=gen) < 0.1] = -1
    Pa = torch.rand(S, k, generator=gen).softmax(-1)
    Pi = torch.rand(S, k, generator=gen).softmax(-1)
    dK = torch.zeros(S, D, device="cuda")
    dQ, dW = P.indexer_bwd()(*[t.cuda() for t in (Q, W, K, Pa, Pi, Idx, offsets, tok)], dK)
    ref_dq, ref_dw, ref_dk = torch.zeros(S, H, D), torch.zeros(S, H), torch.zeros(S, D)
    for t in range(S):
        b, pos = tok[t].tolist()
        bos = offsets[b].item()
        ok = (Idx[t] > -1) & (Idx[t] <= pos)
        kk = torch.where(ok[:, None], K[bos + Idx[t].clamp(min=0).long()].float(), torch.zeros(1))
        qs = Q[t].float() * sm
        lg = kk @ qs.T  # (k, H)
        g = Pi[t] - Pa[t]
        ref_dw[t] = (g[:, None] * lg.clamp(min=0)).sum(0)
        dl = (g[:, None] * (lg > 0).float() * W[t].float()[None, :]).to(bf16).float()
        ref_dq[t] = sm * dl.T @ kk
        ref_dk.index_add_(0, (bos + Idx[t][ok]).long(), (dl @ qs)[ok])
    torch.testing.assert_close(dQ.cpu().float(), ref_dq, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(dW.cpu().float(), ref_dw, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(dK.cpu(), ref_dk, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_clean_logits_window_on_gpu():
    gen = torch.Generator().manual_seed(5)
    M, N = 16, 3000
    X = torch.randn(M, N, generator=gen)
    lo = torch.randint(0, 1500, (M,), generator=gen).to(i32)
    hi = (lo + torch.randint(1, 1500, (M,), generator=gen)).to(i32)
    ref = X.clone()
    n = torch.arange(N)[None, :]
    ref = ref.masked_fill((n < lo[:, None]) | (n >= hi[:, None]), float("-inf"))
    ref[torch.arange(M), lo.long()] = float("inf")
    ref[torch.arange(M), hi.long() - 1] = float("inf")
    got = X.cuda()
    P.clean_logits_window(got, lo.cuda(), hi.cuda())
    assert torch.equal(got.cpu(), ref)


def _key16(x):
    bits = x.half().view(torch.int16).to(torch.int32) & 0xFFFF
    return torch.where(x < 0, ~bits & 0xFFFF, bits | 0x8000) >> 8


@pytest.mark.gpu
def test_radix_topk_select_on_gpu():
    gen = torch.Generator().manual_seed(6)
    B, L, k = 5, 5000, 64
    x = torch.randn(B, L, generator=gen)
    starts = torch.tensor([0, 100, 7, 2000, 0], dtype=i32)
    ends = torch.tensor([5000, 164, 3000, 4999, 900], dtype=i32)
    index = P.radix_topk_select()(x.cuda(), starts.cuda(), ends.cuda()).cpu()
    for b in range(B):
        sel = index[b].long()
        assert len(set(sel.tolist())) == k
        assert (sel >= starts[b]).all() and (sel < ends[b]).all()
        win = _key16(x[b, starts[b]:ends[b]])
        assert torch.equal(_key16(x[b, sel]).sort().values, win.sort().values[-k:])


@pytest.mark.gpu
def test_radix_topk_exact_on_gpu():
    gen = torch.Generator().manual_seed(12)
    B, L, k = 4, 3000, 32
    x = torch.randn(B, L, generator=gen)
    x[2] = (x[2] * 4).round() / 4  # many equal values: the fourth round's equal keys decide
    x[3, :500] = -x[3, :500].abs()  # a short row of negatives
    lens = torch.tensor([3000, 40, 2999, 500], dtype=i32)
    index = P.radix_topk_exact()(x.cuda(), lens.cuda()).cpu()
    for b in range(B):
        sel = index[b].long()
        assert len(set(sel.tolist())) == k and (sel >= 0).all() and (sel < lens[b]).all()
        assert torch.equal(x[b, sel].sort().values, x[b, :lens[b]].topk(k).values.sort().values)


@pytest.mark.gpu
def test_nsa_compressed_attn_on_gpu():
    gen = torch.Generator().manual_seed(7)
    S, H, G, D, L, st = 200, 32, 2, 64, 32, 16
    NC = (S - L) // st + 1
    Q = torch.randn(S, H, D, generator=gen).to(bf16).cuda()
    Kc = torch.randn(NC, G, D, generator=gen).to(bf16).cuda()
    Vc = torch.randn(NC, G, D, generator=gen).to(bf16).cuda()
    O = P.nsa_compressed_attn()(Q, Kc, Vc)
    kk = Kc.float().repeat_interleave(H // G, 1)  # (NC, H, D)
    vv = Vc.float().repeat_interleave(H // G, 1)
    s = torch.einsum("thd,chd->thc", Q.float(), kk) * D**-0.5
    last = torch.arange(NC, device="cuda") * st + L - 1
    seen = last[None, :] <= torch.arange(S, device="cuda")[:, None]  # (S, NC)
    p = s.masked_fill(~seen[:, None, :], float("-inf")).softmax(-1).nan_to_num(0.0)
    ref = torch.einsum("thc,chd->thd", p, vv)
    torch.testing.assert_close(O.float(), ref, rtol=2e-2, atol=2e-2)
    assert (O[:L - 1] == 0).all()  # queries before the first block's last token


@pytest.mark.gpu
def test_deepgemm_fp8_promote_on_gpu():
    gen = torch.Generator().manual_seed(8)
    M, N, K = 200, 512, 1024
    A, B = _fp8(M, K, gen=gen), _fp8(N, K, gen=gen)
    Sa = torch.rand(K // 128, M, generator=gen) * 0.1 + 0.01
    Sb = torch.rand(N // 128, K // 128, generator=gen) * 0.1 + 0.01
    C = P.deepgemm_fp8_promote()(A.cuda(), B.cuda(), Sa.cuda(), Sb.cuda())
    a = A.float() * Sa.T.repeat_interleave(128, 1)
    b = B.float() * Sb.repeat_interleave(128, 0).repeat_interleave(128, 1)
    torch.testing.assert_close(C.cpu().float(), a @ b.T, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_act_quant_ue8m0_on_gpu():
    gen = torch.Generator().manual_seed(9)
    X = torch.randn(100, 512, generator=gen) * 3
    X[5, :128] = 0.0  # an all-zero group: amax floored at 1e-4
    Xb = X.to(bf16)
    y, s, e8 = P.act_quant_ue8m0(Xb.cuda())
    amax = Xb.float().view(100, 4, 128).abs().amax(-1).clamp(min=1e-4) * (1.0 / 448.0)
    m, e = torch.frexp(amax)  # amax = m * 2^e, m in [0.5, 1): ceil(log2) is e, or e - 1 at m = 0.5
    e = torch.where(m == 0.5, e - 1, e)
    ref_s = torch.ldexp(torch.ones_like(amax), e)
    assert torch.equal(s.cpu(), ref_s)
    assert torch.equal(e8.cpu().to(torch.int32), e + 127)
    ref_y = (Xb.float().view(100, 4, 128) / ref_s[..., None]).clamp(-448, 448).to(fp8)
    assert torch.equal(y.cpu().float().view(100, 4, 128), ref_y.float())


@pytest.mark.gpu
def test_act_quant_row_groups_on_gpu():
    gen = torch.Generator().manual_seed(17)
    X = (torch.randn(70, 512, generator=gen) * 3).to(bf16)
    X[3, 128:256] = 0  # an all-zero group
    y, s = P.act_quant_row_groups()(X.cuda())
    ref_s = X.float().view(70, 4, 128).abs().amax(-1).clamp(min=1e-4) / 448.0
    assert torch.equal(s.cpu(), ref_s)
    ref_y = (X.float().view(70, 4, 128) / ref_s[..., None]).clamp(-448, 448).to(fp8)
    assert torch.equal(y.cpu().float().view(70, 4, 128), ref_y.float())


@pytest.mark.gpu
def test_sparse_mla_bwd_dq_dkv_on_gpu():
    gen = torch.Generator().manual_seed(10)
    S, H, D, DT, topk = 160, 64, 128, 64, 128  # seq_len >= topk: distinct indices
    sm = (D + DT) ** -0.5
    Q = (torch.randn(S, H, D + DT, generator=gen) * 0.5).to(bf16).cuda()
    KV = (torch.randn(S, D + DT, generator=gen) * 0.5).to(bf16).cuda()
    dO = torch.randn(S, H, D, generator=gen).to(bf16).cuda()
    Idx = _rows_with_self(S, S, topk, gen).cuda()
    q, kv = Q.float().requires_grad_(), KV.float().requires_grad_()
    O, lse = _gathered_attention(q, kv, Idx, sm, D, True)
    (O * dO.float()).sum().backward()
    delta = (O.detach() * dO.float()).sum(-1)
    dKV = torch.zeros(1, S, D + DT, device="cuda")
    dQ = P.sparse_mla_bwd_dq_dkv(seq_len=S)(Q[None], KV[None], dO[None], Idx[None],
                                    (lse.detach() * math.log2(math.e))[None], delta[None], dKV)
    rounds.max_error_within(dQ[0], q.grad, 2e-2)
    rounds.max_error_within(dKV[0], kv.grad, 2e-2)
