"""A forty-fifth set of programs in TileLang's idioms (tests/unseen_programs45.py): a whole
mixture-of-experts forward as separate kernels -- routers (Mixtral's top-k then softmax,
DeepSeek-V3's group-limited sigmoid routing, a warp per token with warp reductions and int64
ids, DeepSeek-V2's group maximum over a 3-d fragment), moe_align_block_size (shared atomics,
T.cumsum, atomics returning the previous value), the fused-MoE grouped GEMM (gathered rows,
the block's expert read from a tensor, padded ids masked, the routed weight in the epilogue;
wgmma and mma.sync), its swap-AB decode form, SiLU-and-mul with fp8 group quantisation, an fp8
block-scaled down projection, combines (float32 atomics, half2 atomics, a shared expert's GEMM
epilogue, a gated shared expert), moe_sum over a 3-d fragment, the expert-parallel dispatch
layout, send positions and all-to-all offsets (T.cumsum along both dims), a persistent grouped
GEMM over a tile schedule computed by a first launch, align-then-permute under programmatic
dependent launch, a decode GEMV per slot, a padding block's early T.thread_return(), and one
expert's MLP whose down GEMM takes its A operand from registers.

CPU: each builds to an sm_90a cubin (and an sm_80 one where it uses no fp8), and what decides
its result is read in the generated source.  All built and read right as first written but
fused_moe_padding_exit: ``if eid[0] < 0: T.thread_return()`` before the block's tile work was
refused (a collective statement after a return); a condition every thread of the block
evaluates alike now leaves with the whole block (tests/test_thread_return_block_uniform.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs45.py``)."""

import re

import pytest
import torch

import tilecute
from tilecute.codegen.source import CodegenError
import rounds
import unseen_programs45 as P

f16, bf16, i32 = torch.float16, torch.bfloat16, torch.int32

NAMES = ["ep_dispatch_layout", "ep_recv_offsets", "ep_send_index", "fused_expert_mlp",
         "fused_moe_gemm", "fused_moe_padding_exit", "fused_moe_swap_ab",
         "gated_shared_expert_combine", "moe_align_block_size", "moe_align_then_permute_pdl",
         "moe_combine_atomic_x2", "moe_combine_scatter_atomic", "moe_decode_gemv",
         "moe_down_fp8_blockscale", "moe_sum_reduce", "persistent_grouped_gemm",
         "router_group_max_fragments", "router_grouped_topk_sigmoid", "router_topk_then_softmax",
         "router_warp_softmax_topk", "shared_expert_down_plus_routed", "silu_mul_fp8_group_quant"]
# no sm_80 cubin: float8 casts and fp8 GEMMs (sm_89+)
SM90_ONLY = {"silu_mul_fp8_group_quant", "moe_down_fp8_blockscale"}

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = getattr(P, name)().get_kernel_source()
    return "\n".join(part.split("\n@cute.jit", 1)[0] for part in src.split("\n@cute.kernel\n")[1:])


test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_fp8_quant_is_refused_on_sm80(tmp_path):
    with pytest.raises(CodegenError, match=r"unseen_programs45\.py:\d+: prim_func 'main': a cast from "
                                           r"float32 to float8_e4m3: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(P.silu_mul_fp8_group_quant.get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- what decides each result, in the generated source -----------------------------------------
def test_router_inserts_into_registers_then_softmaxes_the_k():
    src = _body("router_topk_then_softmax")
    assert "tcm.gemm(" in src and '"wgmma"' in src
    insert = src.split("for e in cutlass.range(0, 8):", 1)[1].split("top = best[0]", 1)[0]
    assert re.search(r"if v\[0\] > best\[(\w+)\]:\s+tmp\[0\] = best\[\1\]\s+tmpi\[0\] = arg\[\1\]\s+"
                     r"best\[\1\] = v\[0\]\s+arg\[\1\] = vi\[0\]\s+v\[0\] = tmp\[0\]", insert)
    # the top logit is bound once, before the loop overwrites best[0]
    assert re.search(r"top = best\[0\]\s+tot\[0\] = cutlass\.Float32\(0\.0\)\s+for (\w+) in cutlass\.range_constexpr"
                     r"\(0, 2\):\s+best\[\1\] = cute\.math\.exp\(best\[\1\] - top\)", src)


def test_grouped_router_sums_two_best_and_unbiases_the_weights():
    src = _body("router_grouped_topk_sigmoid")
    assert re.search(r"if v\[0\] > a\[0\]:\s+b\[0\] = a\[0\]\s+a\[0\] = v\[0\]\s+else:\s+if v\[0\] > b\[0\]:", src)
    assert "gs[g] = a[0] + b[0]" in src and "keep[gi[0]] = 1" in src
    assert "if keep[g_1_] == 0 and gs[g_1_] > gbest[0]:" in src
    assert "if keep[e_1_ // 8] != 0:" in src
    assert re.search(r"best\[(\w+)\] = best\[\1\] - tc_ld\d+", src)  # the bias taken off again
    assert "/ tot[0] * cutlass.Float32(2.5)" in src


def test_align_counts_scans_and_takes_positions():
    src = _body("moe_align_block_size")
    assert "tca.atomic_add(cnt, topk_ids[" in src
    assert "T.cumsum(ends, ends, dim=0)" in src and 'tcs.warp_inclusive_scan(' in src
    assert "start = ends[tx] - (cnt[tx] + 64 - 1) // 64 * 64" in src
    assert "p = tca.atomic_fetch(pos, " in src and "sorted_ids[p] = idx_3_" in src
    assert "sorted_ids[idx] = tokens * 2" in src and "expert_ids[idx_1_] = -1" in src


def test_fused_moe_gathers_rows_and_weights_the_epilogue():
    src = _body("fused_moe_gemm")
    assert "expert = expert_ids[bx1]" in src and "if bx1 * 64 < total[0]:" in src
    # the weight tile of the block's expert, by TMA under the block's `if` (as the same
    # pipelined loop at the top level; tests/test_guarded_pipeline_tma.py); the gathered A
    # rows read zeros for padding ids
    assert "tct.load(W_desc, tc_smem + cute.assume(8192 + ((k + 2) % 3) * 16384, divby=1024), " \
        "tc_bar0 + (k + 2) % 3, ((k + 2) * 64, by1 * 128, expert), 16384)" in src
    assert "A.iterator + cute.assume(ids_s[i_1_] // 2 * 256 + k * 64 + j" in src
    assert re.search(r"cutlass\.select_\(ids_s\[i_1_\] < tokens \* 2, tc_vec(\d+)\[tc_lane\d+\], "
                     r"cutlass\.Float16\(0\.0\)\)", src)
    assert re.search(r"tc_ld\d+ = topk_w\[ids_s\[i_2_\]\]", src)
    assert re.search(r"C\[ids_s\[i_2_\], by1 \* 128 \+ \(j_1_ \+ tc_lane\d+\)\] = cutlass\.Float16\(acc\[", src)


def test_fused_moe_on_sm80_uses_mma_sync():
    src = tilecute.compile(P.fused_moe_gemm.get_tir(), target="sm_80").get_kernel_source()
    assert 'tcm.tiled_mma("mma", cutlass.Float16' in src and '"wgmma"' not in src
    assert "cute.arch.cp_async_wait_group(" in src  # T.Pipelined's weight tiles by cp.async


def test_swap_ab_puts_the_weight_on_m():
    src = _body("fused_moe_swap_ab")
    assert "tcm.accumulator(\"wgmma\", (1, 1), (64, 16)" in src  # M = block_N, N = 16 tokens
    assert "cutlass.min(ids_s[i_1_] // 2, tokens - 1) * 512" in src
    assert re.search(r"C\[ids_s\[\(i_2_ \+ tc_lane\d+\)\], by1 \* 64 \+ n\] = cutlass\.BFloat16\(accT\[", src)


def test_silu_quant_rounds_scales_to_powers_of_two():
    src = _body("silu_mul_fp8_group_quant")
    assert "gv / (cutlass.Float32(1.0) + cute.math.exp(gv * cutlass.Float32(-1.0)))" in src
    assert "cute.math.exp2(cute.math.ceil(cute.math.log2(" in src
    assert "(512 + g * 128, bm * 32)" in src  # the up half from column I
    assert "cutlass.Float8E4M3FN(cutlass.select_(" in src


def test_fp8_down_scales_each_k_block():
    src = _body("moe_down_fp8_blockscale")
    assert "accumulate=False)" in src  # clear_accum: the K block's own product
    assert "Ws[expert, by1 * 128 // 128, k]" in src
    assert re.search(r"acc\[(\w+) \+ (\w+)\] = acc\[\1 \+ \2\] \+ part\[\1 \+ \2\] \* sa\[tcrow\.row_of\(acc, \1\)\] \* sw", src)
    assert "As[cutlass.min(ids_s[i_2_], rows - 1), k]" in src


def test_scatter_combine_adds_atomically_unless_dropped():
    src = _body("moe_combine_scatter_atomic")
    assert re.search(r"if t < rows and tc_ld\d+ != cutlass\.Int8\(0\):\s+if t // 4 < tokens:\s+"
                     r"tca\.atomic_add\(out, \(t // 4, bh \* 256 \+ \(j \+ tc_lane\d+\)\), y\[", src)


def test_shared_expert_epilogue_gathers_the_routed_rows():
    src = _body("shared_expert_down_plus_routed")
    epi = src.split("for s in cutlass.range(0, 2):", 1)[1]
    assert "r = inv[m, s]" in epi and "if r >= 0:" in epi
    assert re.search(r"tc_ld\d+ = Y\[r, bx1 \* 128 \+ \(j \+ tc_lane\d+\)\]", epi)
    assert epi.index("acc[") < epi.index("tct.store(out_desc")


def test_gated_shared_expert_reduces_the_gate_over_the_block():
    src = _body("gated_shared_expert_combine")
    assert "tcr.block_allreduce(" in src
    assert "cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(cutlass.Float32(0.0) - tc_rows" in src
    assert "Y.iterator + cute.assume((cutlass.min(bt * 8 + i_3_, tokens - 1) * 4 + k) * 512" in src


def test_ep_layout_counts_in_shared_then_once_per_block():
    src = _body("ep_dispatch_layout")
    assert "if e_1_ >= 0 and e_1_ // 8 == (r_1_ + tc_lane4):" in src
    assert "is_in_rank[m, (r_1_ + tc_lane4)] = cutlass.Uint8(hit[tc_lane4] != 0)" in src
    assert "tca.atomic_add(cnt_r, (r_1_ + tc_lane4), 1)" in src
    assert "tca.atomic_add(tokens_per_expert, (e_2_,), cnt_e[e_2_])" in src


def test_persistent_gemm_walks_the_device_schedule():
    k = P.persistent_grouped_gemm()
    src = _body("persistent_grouped_gemm")
    assert "sched[g + 1] = sched[g] + (offsets[g + 1] - offsets[g] + 64 - 1) // 64 * 4" in src
    assert "while tile[0] < sched[4]:" in src and "tile[0] = tile[0] + 16" in src
    assert "if tile[0] >= sched[g_1_]:" in src
    assert [p.name for p in k.params] == ["A", "W", "offsets", "C"]  # the schedule is a workspace


def test_decode_gemv_reads_the_slot_expert_by_tma():
    src = _body("moe_decode_gemv")
    assert "e = slot_exp[s]" in src and "t = slot_tok[s]" in src
    assert "(0 * 128, bn * 64, e)" in src and "(0 * 128, t)" in src  # W[e] and x[t] boxes
    assert "acc[tc_c12] = tcr.combine(acc[tc_c12], tc_rows11[tc_c12], \"sum\")" in src  # clear=False


def test_moe_sum_reduces_the_middle_dim():
    src = _body("moe_sum_reduce")
    assert "T.reduce_sum(x3_frag4, y)" in src and "(bt * 8 + i1) * 2048 + i2 * 512 + bh * 128 + i3" in src


def test_warp_router_uses_warp_reductions_and_int64_ids():
    src = _body("router_warp_softmax_topk")
    assert 'mx = tcr.warp_allreduce(lm[0], "max", 32)' in src
    assert 's = tcr.warp_allreduce(lm[0], "sum", 32)' in src
    assert 'win = tcr.warp_allreduce(cutlass.Int32(cutlass.select_(lm[0] == best, li[0], 128)), "min", 32)' in src
    assert "ids[m, r] = cutlass.Int64(win)" in src and "w[m, lane] = mine[0] / tot[0]" in src


def test_send_index_breaks_at_the_first_empty_slot():
    src = _body("ep_send_index")
    assert "while k_it[0] < 4 and broke[0] == 0:" in src and "broke[0] = 1" in src
    assert "seen[0] = seen[0] | 1 << r_1_" in src
    assert "tca.atomic_fetch(counts, (r_1_,), 1, \"add\")" in src
    assert "send_tok[r_1_, slot] = m" in src


def test_half2_combine_adds_both_halves():
    src = _body("moe_combine_atomic_x2")
    assert "tca.atomic_add(out, (t_1_ // 2, bh * 128 + j_1_ * 2), y[i_1_ * 128 + j_1_ * 2])" in src
    assert "tca.atomic_add(out, (t_1_ // 2, bh * 128 + j_1_ * 2 + 1), y[i_1_ * 128 + j_1_ * 2 + 1])" in src


def test_align_then_permute_launches_dependently():
    k = P.moe_align_then_permute_pdl()
    src = k.get_kernel_source()
    first, second = _body("moe_align_then_permute_pdl").split("def tilecute_main_1(", 1)
    assert first.split("tilecute_main_0.set_name_prefix", 1)[0].rstrip().endswith(
        "cute.arch.griddepcontrol_launch_dependents()")  # T.pdl_trigger() last
    assert second.index("cute.arch.griddepcontrol_wait()") < second.index("X.iterator")
    assert "dst[idx_1_ // 2, idx_1_ - idx_1_ // 2 * 2] = tca.atomic_fetch(pos, " in src


def test_group_max_router_masks_groups_from_shared():
    src = _body("router_group_max_fragments")
    assert "T.reduce_max(p3, gmax)" in src
    assert "keep[i_5_ * 8 + g_3_] = 1" in src
    assert "cutlass.select_(keep[i_6_ * 8 + (e_2_ + tc_lane59) // 8] != 0, p[" in src


def test_padding_block_exits_before_the_tile_work():
    src = _body("fused_moe_padding_exit")
    assert re.search(r"eid\[0\] = expert_ids\[bx_1_\]\s+if eid\[0\] < 0:\s+pass\s+else:", src)
    # FullRow with 64 rows: one warpgroup's worth, so the two split N (TileLang's fallback)
    assert "tcm.accumulator(\"wgmma\", (1, 2), (64, 128)" in src
    assert "W.iterator + cute.assume(eid[0] * 131072" in src
    assert "A[cutlass.min(ids[i_1_] // 2, tokens - 1), k * 64 + i3]" in src  # row i_1_'s slice
    assert "panel_index" in src  # T.use_swizzle(8)


def test_recv_offsets_scan_both_dims():
    src = _body("ep_recv_offsets")
    assert "# T.cumsum(a, a, dim=0)" in src and "a[tc_pos8 * 16 + tc_line5]" in src  # down a column
    assert "# T.cumsum(b, b, dim=1)" in src
    assert "# T.cumsum(d, d, dim=1, reverse=True)" in src and "15 - (tc_lane14" in src
    assert "recv_off[r, e] = a[r * 16 + e] - c[r * 16 + e]" in src


def test_expert_mlp_feeds_the_down_gemm_from_registers():
    src = _body("fused_expert_mlp")
    assert "a_regs=True)  # T.gemm(h, D_s, o)" in src
    assert re.search(r"tcm\.gemm\(tc_mma2, tc_tid, o, h, tcm\.operand\(.*accumulate=False, a_regs=True\)", src)
    assert re.search(r"h\[(\w+) \+ (\w+)\] = cutlass\.Float16\(g\[\1 \+ \2\] \* \(cutlass\.Float32\(1\.0\) / "
                     r"\(cutlass\.Float32\(1\.0\) \+ cute\.math\.exp\(cutlass\.Float32\(0\.0\) - g\[\1 \+ \2\]\)\)\) "
                     r"\* u\[\1 \+ \2\]\)", src)


# ---- GPU ----------------------------------------------------------------------------------------
def _align(topk_ids, E, block):
    """moe_align_block_size in torch: sorted ids (padding tokens * topk), expert per block,
    the padded total; each expert's pairs in flat order."""
    flat = topk_ids.flatten().long()
    n = flat.numel()
    sorted_ids, experts = [], []
    for e in range(E):
        idx = (flat == e).nonzero().flatten().tolist()
        pad = -len(idx) % block
        sorted_ids += idx + [n] * pad
        experts += [e] * ((len(idx) + pad) // block)
    dev = topk_ids.device
    return (torch.tensor(sorted_ids, dtype=i32, device=dev), torch.tensor(experts, dtype=i32, device=dev),
            torch.tensor([len(sorted_ids)], dtype=i32, device=dev))


def _distinct_topk(M, E, k, device="cuda"):
    return torch.stack([torch.randperm(E, device=device)[:k] for _ in range(M)]).to(i32)


def _agree(ids, ref_ids, at_least=0.99):
    same = (ids.long().sort(-1).values == ref_ids.long().sort(-1).values).all(-1)
    assert same.float().mean() >= at_least
    return same


def _moe_case(seed, M, topk, E, N, K, dtype, block):
    """A GEMM's rows, the experts' weights, distinct top-k ids, routed weights and their
    alignment to `block`; the expected rows x W[expert]^T before the routed weight."""
    torch.manual_seed(seed)
    A = torch.randn(M, K, device="cuda", dtype=dtype)
    W = torch.randn(E, N, K, device="cuda", dtype=dtype) * 0.1
    topk_ids = _distinct_topk(M, E, topk)
    topk_w = torch.rand(M * topk, device="cuda")
    e = topk_ids.flatten().long()
    ref = torch.einsum("tk,tnk->tn", A.float().repeat_interleave(topk, 0), W.float()[e])
    return A, W, topk_w, _align(topk_ids, E, block), ref


@pytest.mark.gpu
def test_router_topk_then_softmax_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(300, 512, device="cuda", dtype=bf16)
    Wg = torch.randn(8, 512, device="cuda", dtype=bf16)
    w, ids = P.router_topk_then_softmax()(x, Wg)
    logits = x.float() @ Wg.float().T
    top, ref_ids = logits.topk(2, dim=-1)
    same = _agree(ids, ref_ids)
    torch.testing.assert_close(w[same], top.softmax(-1)[same], rtol=1e-3, atol=1e-3)


def _grouped_reference(x, Wg, bias, n_group, topk_group, topk, scale):
    s = torch.sigmoid(x.float() @ Wg.float().T)
    sel = s + bias
    M, E = s.shape
    gs = sel.view(M, n_group, -1).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(gs).scatter_(1, gs.topk(topk_group, dim=-1).indices, 1.0)
    masked = sel.masked_fill(keep.repeat_interleave(E // n_group, 1) == 0, float("-inf"))
    ids = masked.topk(topk, dim=-1).indices
    w = s.gather(1, ids)
    return w / w.sum(-1, keepdim=True) * scale, ids


@pytest.mark.gpu
def test_router_grouped_topk_sigmoid_on_gpu():
    torch.manual_seed(1)
    x = torch.randn(300, 256, device="cuda", dtype=bf16)
    Wg = torch.randn(64, 256, device="cuda", dtype=bf16) * 0.1
    bias = torch.randn(64, device="cuda") * 0.1
    w, ids = P.router_grouped_topk_sigmoid()(x, Wg, bias)
    ref_w, ref_ids = _grouped_reference(x, Wg, bias, 8, 4, 6, 2.5)
    same = _agree(ids, ref_ids)
    order = ids.long().argsort(-1)
    ref_order = ref_ids.argsort(-1)
    torch.testing.assert_close(w.gather(1, order)[same], ref_w.gather(1, ref_order)[same], rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_moe_align_block_size_on_gpu():
    torch.manual_seed(2)
    M, topk, E, block = 300, 2, 16, 64
    topk_ids = torch.randint(0, E, (M, topk), device="cuda", dtype=i32)
    P_ = M * topk + E * (block - 1)
    NB = -(-P_ // block)
    sorted_ids = torch.empty(P_, dtype=i32, device="cuda")
    expert_ids = torch.empty(NB, dtype=i32, device="cuda")
    total = torch.empty(1, dtype=i32, device="cuda")
    P.moe_align_block_size()(topk_ids, sorted_ids, expert_ids, total)
    ref_sorted, ref_experts, ref_total = _align(topk_ids, E, block)
    assert total.item() == ref_total.item()
    nb = total.item() // block
    assert expert_ids[:nb].tolist() == ref_experts.tolist() and (expert_ids[nb:] == -1).all()
    for e in range(E):  # each expert's padded segment holds its pairs (in atomics' order)
        seg = (ref_experts == e).repeat_interleave(block)
        assert torch.equal(sorted_ids[:total.item()][seg].sort().values, ref_sorted[seg].sort().values)
    assert (sorted_ids[total.item():] == M * topk).all()


@pytest.mark.gpu
def test_fused_moe_gemm_on_gpu():
    A, W, topk_w, (sorted_ids, expert_ids, total), ref = _moe_case(3, 150, 2, 8, 512, 256, f16, 64)
    C = P.fused_moe_gemm()(A, W, sorted_ids, expert_ids, topk_w, total)
    torch.testing.assert_close(C.float(), ref * topk_w[:, None], rtol=1e-2, atol=5e-2)


@pytest.mark.gpu
def test_fused_moe_swap_ab_on_gpu():
    A, W, topk_w, (sorted_ids, expert_ids, _), ref = _moe_case(4, 5, 2, 8, 512, 512, bf16, 16)
    C = P.fused_moe_swap_ab()(A, W, sorted_ids, expert_ids, topk_w)
    torch.testing.assert_close(C.float(), ref * topk_w[:, None], rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_fused_moe_padding_exit_on_gpu():
    A, W, topk_w, (sorted_ids, expert_ids, _), ref = _moe_case(19, 150, 2, 8, 512, 256, bf16, 64)
    topk_w = topk_w.to(bf16)
    pad = 3  # blocks past the padded total: expert -1, they return at once
    sorted_ids = torch.cat([sorted_ids, torch.full((pad * 64,), 300, dtype=i32, device="cuda")])
    expert_ids = torch.cat([expert_ids, torch.full((pad,), -1, dtype=i32, device="cuda")])
    C = P.fused_moe_padding_exit()(A, W, sorted_ids, expert_ids, topk_w)
    torch.testing.assert_close(C.float(), ref.to(bf16).float() * topk_w.float()[:, None], rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_silu_mul_fp8_group_quant_on_gpu():
    torch.manual_seed(5)
    X = torch.randn(100, 1024, device="cuda", dtype=bf16) * 2
    Y, S = P.silu_mul_fp8_group_quant()(X)
    x = X.float()
    h = torch.nn.functional.silu(x[:, :512]) * x[:, 512:]
    s = h.view(100, 4, 128).abs().amax(-1).clamp(min=1e-10) / 448.0
    s = torch.exp2(torch.ceil(torch.log2(s)))
    torch.testing.assert_close(S, s)
    ref = (h.view(100, 4, 128) / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    torch.testing.assert_close(Y.float().view(100, 4, 128), ref, rtol=0.07, atol=0.05)


@pytest.mark.gpu
def test_moe_down_fp8_blockscale_on_gpu():
    torch.manual_seed(6)
    M, topk, E, H, I = 90, 2, 4, 256, 512
    R = M * topk
    A = (torch.randn(R, I, device="cuda") * 2).to(torch.float8_e4m3fn)
    As = torch.rand(R, I // 128, device="cuda") * 0.1 + 0.01
    W = (torch.randn(E, H, I, device="cuda") * 2).to(torch.float8_e4m3fn)
    Ws = torch.rand(E, H // 128, I // 128, device="cuda") * 0.1 + 0.01
    topk_ids = _distinct_topk(M, E, topk)
    topk_w = torch.rand(R, device="cuda")
    sorted_ids, expert_ids, _ = _align(topk_ids, E, 64)
    C = P.moe_down_fp8_blockscale()(A, As, W, Ws, sorted_ids, expert_ids, topk_w)
    a = A.float() * As.repeat_interleave(128, 1)
    w = W.float() * Ws.repeat_interleave(128, 1).repeat_interleave(128, 2)
    e = topk_ids.flatten().long()
    ref = torch.einsum("tk,tnk->tn", a, w[e]) * topk_w[:, None]
    torch.testing.assert_close(C.float(), ref, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_moe_combine_scatter_atomic_on_gpu():
    torch.manual_seed(7)
    M, topk = 70, 4
    Y = torch.randn(M * topk, 512, device="cuda", dtype=bf16)
    mask = (torch.rand(M * topk, device="cuda") > 0.2).to(torch.int8)
    out = torch.zeros(M, 512, device="cuda")
    P.moe_combine_scatter_atomic()(Y, mask, out)
    ref = (Y.float() * mask[:, None].float()).view(M, topk, 512).sum(1)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_shared_expert_down_plus_routed_on_gpu():
    torch.manual_seed(8)
    M, topk, N, K = 100, 2, 256, 512
    Hs = torch.randn(M, K, device="cuda", dtype=bf16)
    Wd = torch.randn(N, K, device="cuda", dtype=bf16) * 0.05
    Y = torch.randn(M * topk, N, device="cuda", dtype=bf16)
    inv = torch.randperm(M * topk, device="cuda").view(M, topk).to(i32)
    inv[::7, 1] = -1
    out = P.shared_expert_down_plus_routed()(Hs, Wd, Y, inv)
    routed = torch.where(inv[..., None] >= 0, Y.float()[inv.clamp(min=0).long()], 0.0).sum(1)
    torch.testing.assert_close(out.float(), Hs.float() @ Wd.float().T + routed, rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_gated_shared_expert_combine_on_gpu():
    torch.manual_seed(9)
    M, topk, H = 37, 4, 512
    x = torch.randn(M, H, device="cuda", dtype=bf16)
    g = torch.randn(H, device="cuda", dtype=bf16) * 0.05
    Y = torch.randn(M * topk, H, device="cuda", dtype=bf16)
    w = torch.rand(M, topk, device="cuda")
    Sh = torch.randn(M, H, device="cuda", dtype=bf16)
    out = P.gated_shared_expert_combine()(x, g, Y, w, Sh)
    gate = torch.sigmoid(x.float() @ g.float())
    ref = (Y.float().view(M, topk, H) * w[..., None]).sum(1) + gate[:, None] * Sh.float()
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_ep_dispatch_layout_on_gpu():
    torch.manual_seed(10)
    M, E, ranks, topk = 333, 64, 8, 6
    ids = _distinct_topk(M, E, topk)
    ids[::5, 4:] = -1
    in_rank = torch.empty(M, ranks, dtype=torch.bool, device="cuda")
    per_rank = torch.zeros(ranks, dtype=i32, device="cuda")
    per_expert = torch.zeros(E, dtype=i32, device="cuda")
    P.ep_dispatch_layout()(ids, in_rank, per_rank, per_expert)
    valid = ids >= 0
    ref_in = torch.zeros(M, ranks, dtype=torch.bool, device="cuda")
    ref_in[torch.arange(M, device="cuda")[:, None].expand_as(ids)[valid], (ids[valid] // 8).long()] = True
    assert torch.equal(in_rank, ref_in)
    assert per_rank.tolist() == ref_in.sum(0).tolist()
    assert per_expert.tolist() == torch.bincount(ids[valid].long(), minlength=E).tolist()


@pytest.mark.gpu
def test_persistent_grouped_gemm_on_gpu():
    torch.manual_seed(11)
    sizes = [70, 0, 130, 45]
    offsets = torch.tensor([0, 70, 70, 200, 245], dtype=i32, device="cuda")
    A = torch.randn(sum(sizes), 256, device="cuda", dtype=f16)
    W = torch.randn(4, 256, 256, device="cuda", dtype=f16) * 0.1
    C = P.persistent_grouped_gemm()(A, W, offsets)
    ref = torch.cat([A[o:o + n].float() @ W[g].float().T
                     for g, (o, n) in enumerate(zip(offsets.tolist(), sizes))])
    torch.testing.assert_close(C.float(), ref, rtol=1e-2, atol=2e-2)


@pytest.mark.gpu
def test_moe_decode_gemv_on_gpu():
    torch.manual_seed(12)
    x = torch.randn(3, 1024, device="cuda", dtype=f16)
    W = torch.randn(8, 512, 1024, device="cuda", dtype=f16) * 0.05
    tok = torch.tensor([0, 0, 1, 2, 2], dtype=i32, device="cuda")
    exp = torch.tensor([3, 7, 0, 3, 5], dtype=i32, device="cuda")
    sw = torch.rand(5, device="cuda")
    Y = P.moe_decode_gemv()(x, W, tok, exp, sw)
    ref = torch.einsum("snk,sk->sn", W.float()[exp.long()], x.float()[tok.long()]) * sw[:, None]
    torch.testing.assert_close(Y, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_moe_sum_reduce_on_gpu():
    torch.manual_seed(13)
    X = torch.randn(37, 4, 512, device="cuda", dtype=bf16)
    torch.testing.assert_close(P.moe_sum_reduce()(X).float(), X.float().sum(1), rtol=1e-2, atol=2e-2)


@pytest.mark.gpu
def test_router_warp_softmax_topk_on_gpu():
    torch.manual_seed(14)
    logits = torch.randn(203, 128, device="cuda")
    w, ids = P.router_warp_softmax_topk()(logits)
    top, ref_ids = logits.softmax(-1).topk(8, dim=-1)
    assert ids.dtype == torch.int64 and torch.equal(ids, ref_ids)
    torch.testing.assert_close(w, top / top.sum(-1, keepdim=True), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_ep_send_index_on_gpu():
    torch.manual_seed(15)
    M, E, ranks, topk = 300, 32, 4, 4
    ids = _distinct_topk(M, E, topk).long()
    ids[::3, 2:] = -1
    ids[5, 3] = 7  # after an empty slot: never read
    ids[5, 2] = -1
    counts = torch.zeros(ranks, dtype=i32, device="cuda")
    send_tok = torch.full((ranks, M), -1, dtype=i32, device="cuda")
    send_pos = torch.empty(M, ranks, dtype=i32, device="cuda")
    P.ep_send_index()(ids, counts, send_tok, send_pos)
    goes = torch.zeros(M, ranks, dtype=torch.bool)
    for m, row in enumerate(ids.tolist()):
        for e in row:
            if e < 0:
                break
            goes[m, e // 8] = True
    assert counts.tolist() == goes.sum(0).tolist()
    pos = send_pos.cpu()
    assert torch.equal(pos >= 0, goes)
    for r in range(ranks):
        ms = goes[:, r].nonzero().flatten()
        assert sorted(pos[ms, r].tolist()) == list(range(len(ms)))
        assert torch.equal(send_tok[r].cpu()[pos[ms, r].long()], ms.to(i32))


@pytest.mark.gpu
def test_moe_combine_atomic_x2_on_gpu():
    torch.manual_seed(16)
    M, topk = 90, 2
    Y = torch.randn(M * topk, 256, device="cuda", dtype=f16)
    w = torch.rand(M * topk, device="cuda")
    out = torch.zeros(M, 256, device="cuda", dtype=f16)
    P.moe_combine_atomic_x2()(Y, w, out)
    ref = (Y.float() * w[:, None]).half().float().view(M, topk, 256).sum(1)
    torch.testing.assert_close(out.float(), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_moe_align_then_permute_pdl_on_gpu():
    torch.manual_seed(17)
    M, topk, E, block, H = 100, 2, 8, 16, 256
    ids = _distinct_topk(M, E, topk)
    X = torch.randn(M, H, device="cuda", dtype=f16)
    dst = torch.empty(M, topk, dtype=i32, device="cuda")
    total = torch.empty(1, dtype=i32, device="cuda")
    Xp = torch.zeros(M * topk + E * (block - 1), H, device="cuda", dtype=f16)
    P.moe_align_then_permute_pdl()(ids, X, dst, total, Xp)
    cnt = torch.bincount(ids.flatten().long(), minlength=E)
    padded = (cnt + block - 1) // block * block
    starts = torch.cumsum(padded, 0) - padded
    assert total.item() == padded.sum().item()
    for e in range(E):
        rows = dst[ids == e]
        assert sorted(rows.tolist()) == list(range(starts[e].item(), starts[e].item() + cnt[e].item()))
    assert torch.equal(Xp[dst.long()], X[:, None, :].expand(M, topk, H))


@pytest.mark.gpu
def test_router_group_max_fragments_on_gpu():
    torch.manual_seed(18)
    logits = torch.randn(77, 64, device="cuda") * 2
    w, ids = P.router_group_max_fragments()(logits)
    p = logits.softmax(-1)
    gmax = p.view(77, 8, 8).amax(-1)
    keep = torch.zeros_like(gmax).scatter_(1, gmax.topk(3, dim=-1).indices, 1.0)
    masked = p * keep.repeat_interleave(8, 1)
    top, ref_ids = masked.topk(6, dim=-1)
    assert torch.equal(ids.long(), ref_ids)
    torch.testing.assert_close(w, top, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_ep_recv_offsets_on_gpu():
    torch.manual_seed(20)
    counts = torch.randint(0, 50, (4, 16), dtype=i32, device="cuda")
    outs = [torch.empty(4, 16, dtype=i32, device="cuda") for _ in range(3)]
    P.ep_recv_offsets()(counts, *outs)
    recv, send, tail = outs
    assert torch.equal(recv, counts.cumsum(0, dtype=i32) - counts)
    assert torch.equal(send, counts.cumsum(1, dtype=i32) - counts)
    assert torch.equal(tail, counts.flip(1).cumsum(1, dtype=i32).flip(1))


@pytest.mark.gpu
def test_fused_expert_mlp_on_gpu():
    torch.manual_seed(21)
    X = torch.randn(150, 256, device="cuda", dtype=f16)
    Wg = torch.randn(128, 256, device="cuda", dtype=f16) * 0.05
    Wu = torch.randn(128, 256, device="cuda", dtype=f16) * 0.05
    Wd = torch.randn(256, 128, device="cuda", dtype=f16) * 0.05
    out = P.fused_expert_mlp()(X, Wg, Wu, Wd)
    g, u = X.float() @ Wg.float().T, X.float() @ Wu.float().T
    h = (torch.nn.functional.silu(g) * u).half().float()
    torch.testing.assert_close(out.float(), h @ Wd.float().T, rtol=2e-2, atol=2e-2)
