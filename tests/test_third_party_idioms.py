"""Programs in the idioms of TileLang kernels from third-party repositories
(tests/third_party_programs.py): block fp8 / fp4 / int8 / int4 quantization and GEMMs, sparse
attention by index gathering and its LSE combine, a radix top-k with hand-written named
barriers, RMSNorm + RoPE, hyper-connection mixing and Sinkhorn, MoE routing / alignment /
grouped GEMM, norms, paged-cache gathers, state-space pieces and sampling.  CPU: each builds
to an sm_90a and an sm_80 cubin, and what each means is checked in the generated source.
GPU: each compared with a torch reference."""

import pytest

import tilecute

import third_party_programs as P

PROGRAMS = [
    ("block_quant_fp8", {}), ("block_quant_fp8", dict(pow2_scale=True, stages=0)),
    ("block_fake_quant_e8m0", dict(scale_dtype="float32")), ("fp8_index_scores", {}),
    ("fp8_index_scores", dict(clear_accum=False)), ("gathered_sparse_attention", {}), ("lse_combine", {}),
    ("lse_combine", dict(head_per_block=16)), ("radix_threshold_select", {}), ("q_rmsnorm_rope", {}),
    ("rope_tail_inplace", {}), ("rope_tail_inplace", dict(inverse=True)), ("hyper_post_mix", {}),
    ("prenorm_gemv_warps", {}), ("sinkhorn_split", {}), ("fp8_block_scaled_gemm", {}), ("fp4_weight_gemm", {}),
    ("sink_sparse_attention", {}), ("silu_and_mul_rows", {}), ("moe_align_counts", {}),
    ("moe_grouped_gemm_offsets", {}), ("router_topk_softmax", {}), ("fused_add_rmsnorm", {}),
    ("layernorm_two_pass", {}), ("int4_dequant_gemm", {}), ("paged_kv_gather", {}), ("causal_conv1d_update", {}),
    ("per_token_int8_quant", {}), ("rotary_neox_rows", {}), ("ssd_chunk_state", {}), ("gated_chunk_cumsum", {}),
    ("gumbel_argmax_sample", {}),
]
IDS = [n + "".join(f"-{k}={v}" for k, v in kw.items()) for n, kw in PROGRAMS]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _body(name, **kw):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = getattr(P, name)(**kw).get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


@pytest.mark.parametrize("name,kw", PROGRAMS, ids=IDS)
def test_program_builds_a_cubin(name, kw):
    assert getattr(P, name)(**kw).ensure_cubin()


@pytest.mark.parametrize("name,kw", PROGRAMS, ids=IDS)
def test_program_builds_an_sm80_cubin(name, kw, tmp_path):
    func = getattr(P, name).get_tir(**kw)
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- refusals ----------------------------------------------------------------------------------
def test_e8m0_scales_are_refused_by_name():
    # DeepSeek-V4-style power-of-two scales stored as float8_e8m0fnu: tilecute has no e8m0 type
    with pytest.raises(Exception) as err:
        P.block_fake_quant_e8m0().get_kernel_source()
    msg = str(err.value)
    assert "unknown dtype 'float8_e8m0fnu'" in msg and "parameter 'S'" in msg
    assert "third_party_programs.py" in msg


# ---- what the generated source says --------------------------------------------------------------
def test_lse_combine_replicates_the_row_statistics():
    # scale[h, k] written under T.Parallel(h) inside a serial loop over k and read across the
    # threads of acc_o's rows: TileLang 0.1.15 lays the three (h,) fragments out replicated over
    # each row's threads; tilecute makes them replicated (it refused the program before)
    src = _body("lse_combine")
    for frag in ("lse_max = cute.make_rmem_tensor((8,)", "lse_sum = cute.make_rmem_tensor((8,)",
                 "scale = cute.make_rmem_tensor((32,)"):
        assert frag + ", cutlass.Float32)  # replicated" in src
    assert "scale[h_2_ * 4 + k_3_] = cute.math.exp2(lse_s[k_3_ * 8 + h_2_] - lse_max[h_2_]" in src
    assert "tcr.pick(scale, h_3_ * 4 + k_4_, 32)" in src
    assert "lse_s[k * 8 + i1] = " in src  # the row slice lands in shared row k


def test_radix_select_keeps_the_hand_written_barriers_only():
    src = _body("radix_threshold_select")
    # TL_DISABLE_THREAD_STORAGE_SYNC: no barrier of tilecute's own; the named ones as written
    assert src.count("cute.arch.barrier(barrier_id=1, number_of_threads=256)") == 3
    assert src.count("cute.arch.sync_threads()") == 5
    assert 'tca.atomic_fetch(s_hist, b32 + 1, 1, "add")' in src
    assert 'tca.atomic_fetch(s_eq, 0, 1, "add")' in src
    assert "broke[0] = 1" in src  # T.loop_break


def test_index_scores_transposed_nest_and_tails():
    src = _body("fp8_index_scores")
    assert "i3, ih = tc_logits_ij[" in src  # logits[i3, ih] under T.Parallel(h, n): (row, col)
    assert "* w_f[tcrow.col_of(logits, " in src
    assert 'tcrow.reduce_rows(logits, total, "sum", clear=True)' in src
    assert "if i1 * 256 + i2 * 64 + i10 < n:" in src  # the symbolic key count guards the store
    assert "accumulate=False" in src
    filled = _body("fp8_index_scores", clear_accum=False)  # T.fill(logits, 0), then add into it
    assert "accumulate=False" not in filled and "= cutlass.Float32(0.0)" in filled


def test_quant_scales_and_pow2_bits():
    src = _body("block_quant_fp8", pow2_scale=True, stages=0)
    assert "tcmath.reinterpret(" in src
    assert ">> cutlass.Uint32(23)" in src and "<< 23" in src
    assert "448.0" in src
