"""A seventeenth set of programs in TileLang's idioms (tests/unseen_programs17.py), all from
the GEMM family, as ``@tilecute.jit(out_idx=...)`` factories: both operands transposed,
``k_pack=2``, fp8 with ``transpose_A`` and into a float16 accumulator, int8 re-quantised
to int8, 128 x 256 tiles over two warpgroups, ``T.Parallel`` epilogues (row bias + tanh
GELU, SiLU + residual past a symbolic M, per-token x per-channel scales into e4m3, alpha /
beta over a batch), split-K by element atomics and by a mid-dim workspace plus a
``T.reduce_sum(dim=1)`` kernel, stacked and symbolic batches, grouped GEMMs (``T.serial``
group search, in-kernel prefix), GEMVs (``T.reduce_sum``, ``T.shfl_xor``, a 2-D thread
block), skinny GEMMs, weight-only dequant GEMMs (zero points, signed nibbles along K,
nibbles along N, a register A weight), ``T.use_swizzle(order="column")``,
``make_swizzled_layout`` annotations, ``num_stages`` 0..4, all-symbolic tails, a fused
RMSNorm through the A fragment, a peeled ``clear_accum=True`` step, a LoRA side GEMM and a
block-scaled fp8 GEMM; plus integer selects and int8 nibble shifts.

CPU: each builds to an sm_90a cubin (most also to sm_80), and what each means is checked
in the generated source; one program is refused by name.  GPU: each matches a float32 /
float64 torch reference written to TileLang's meaning, at shapes with tails."""

import re

import pytest

import tilecute

import rounds
import unseen_programs17 as P

PROGRAMS = ["gemm_tt_fp16_bf16_out", "gemm_bf16_k_pack2_fullrow", "gemm_fp8_transpose_a",
            "gemm_fp8_half_accumulator", "gemm_int8_requant_int8_out", "gemm_fullcol_128x256_shared_out",
            "gemm_row_bias_gelu_tanh_bf16", "gemm_silu_residual_symbolic_m",
            "gemm_token_channel_scales_fp8_out", "bmm_alpha_beta", "splitk_element_atomics",
            "splitk_partials_mid_dim", "splitk_reduce_mid_dim", "bmm_stacked_2d",
            "bmm_symbolic_batch_transpose_a", "grouped_gemm_tile_search", "grouped_gemm_prefix_in_kernel",
            "gemv_parallel_reduce_sum", "gemv_warp_per_row_shfl", "skinny_gemm_m16_fullcol",
            "skinny_gemm_cuda_core_fma", "dequant_uint4_zero_points", "dequant_int4_signed_k_packed_fragment",
            "dequant_uint4_n_packed_zeros", "dequant_weight_register_a", "gemm_swizzle_column_panel",
            "gemm_annotated_swizzled_layouts", "gemm_stages_fullrow_256", "gemm_all_symbolic_shared_epilogue",
            "rmsnorm_gemm_register_a_one_loop", "gemm_peeled_first_step_clear_accum",
            "lora_gemm_second_accumulator", "fp8_blockwise_scaled_gemm", "gemv_2d_threads_shared_sum",
            "select_uint8_bytes", "int8_nibble_shifts", "gemm_accumulate_into_c",
            "gemm_rowwise_fp8_quant_fullcol", "gemm_two_n_tiles_per_block", "gemm_weight_grad_with_bias_grad"]

# Ampere has no fp8 MMA and no wgmma: the programs that make sense there
SM80 = ["gemm_tt_fp16_bf16_out", "gemm_bf16_k_pack2_fullrow", "gemm_int8_requant_int8_out",
        "gemm_fullcol_128x256_shared_out", "gemm_silu_residual_symbolic_m", "splitk_element_atomics",
        "splitk_reduce_mid_dim", "bmm_symbolic_batch_transpose_a", "grouped_gemm_tile_search",
        "gemv_warp_per_row_shfl", "skinny_gemm_m16_fullcol", "dequant_int4_signed_k_packed_fragment",
        "dequant_weight_register_a", "gemm_swizzle_column_panel", "gemm_annotated_swizzled_layouts",
        "rmsnorm_gemm_register_a_one_loop", "gemm_peeled_first_step_clear_accum", "lora_gemm_second_accumulator",
        "gemm_accumulate_into_c", "gemm_two_n_tiles_per_block", "gemm_weight_grad_with_bias_grad"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("name", SM80)
def test_program_builds_an_sm80_cubin(name):
    kernel = tilecute.compile(getattr(P, name).get_tir(), target="sm_80")
    assert "wgmma" not in kernel.get_kernel_source()
    assert kernel.ensure_cubin()


@pytest.mark.parametrize("stages", [0, 1, 2, 4])
def test_stage_counts_build_cubins(stages):
    assert P.gemm_stages_fullrow_256(num_stages=stages).ensure_cubin()


def test_square_policy_128x256_builds_a_cubin():
    kernel = P.gemm_fullcol_128x256_shared_out(policy=P.T.GemmWarpPolicy.Square)
    assert kernel.ensure_cubin()


def test_row_order_swizzle_builds_a_cubin():
    assert P.gemm_swizzle_column_panel(order="row", panel=3).ensure_cubin()


# ---- what the generated code says ----------------------------------------------------------------
def test_k_pack_2_is_the_same_gemm_on_nvidia():
    """TileLang reads k_pack for AMD's MFMA only: k_pack=2 and 1 give the same kernel."""
    assert _src("gemm_bf16_k_pack2_fullrow") == _src("gemm_bf16_k_pack2_fullrow", k_pack=1)


def test_policies_split_the_warpgroups():
    full_row = _src("gemm_bf16_k_pack2_fullrow")
    assert 'tcm.tiled_mma("wgmma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, False, True, (2, 1), 128)' \
        in full_row, full_row
    full_col = _src("gemm_fullcol_128x256_shared_out")
    assert "cutlass.Float32, False, False, (1, 2), 256)" in full_col, full_col


def test_fp8_transpose_a_leaves_wgmma_and_fp8_half_accumulates_on_it():
    """wgmma takes 8-bit operands K-major only (TileLang's CheckWgmma): transpose_A goes
    elsewhere; a float16 accumulator of e4m3 operands stays on wgmma."""
    src = _src("gemm_fp8_transpose_a")
    assert '"wgmma"' not in src and "A_shared^T @ B_shared^T" in src, src
    src = _src("gemm_fp8_half_accumulator")
    assert ('tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float16'
            in src), src


def test_requant_rounds_half_to_even_then_clamps():
    """T.round is TileLang's nearbyintf (halves to even), clamped (TileLang's tl::clamp: a
    NaN passes through), then cast to int8."""
    src = _src("gemm_int8_requant_int8_out")
    assert ("cute.arch.fmin(cute.arch.fmax(cute.math.roundeven(v), cutlass.Float32(-128.0)), "
            "cutlass.Float32(127.0))") in src, src
    assert "cutlass.Int8(cutlass.select_(cutlass.Boolean(cute.math.isnan(cute.math.roundeven(v)))" in src


def test_residual_read_past_symbolic_m_is_guarded():
    src = _src("gemm_silu_residual_symbolic_m")
    assert "if by1 * 64 + i < m:" in src or "if by * 64 + i < m:" in src, src


def test_split_k_element_atomics_keep_the_users_guard():
    src = _src("splitk_element_atomics")
    assert "if by * 64 + i < 100 and bx * 64 + (j + tc_lane7) < 136:" in src, src
    assert "tca.atomic_add(C, (by * 64 + i, bx * 64 + (j + tc_lane7)), C_local[tc_r6 + tc_lane7])" in src, src
    # the last split's tiles run past K = 500 and read zeros there
    assert "if by * 64 + i3 < 100 and k0 + i4 < 500:" in src, src


def test_stacked_batches_offset_rows_and_columns():
    src = _src("bmm_stacked_2d")
    # (its 16 blocks get a producer warpgroup, alone on their SMs: its loop walks step j)
    assert "(tc_j0 * 32, bz * 100 + by * 64)" in src and "(bz * 64 + bx * 64, tc_j0 * 32)" in src, src
    assert "if i < 100 - by * 64:" in src, src
    assert "C2[bz * 100 + by * 64 + i, bx * 64 + (j + tc_lane4)] = C_local[tc_r3 + tc_lane4]" in src, src


def test_grouped_search_and_guards():
    src = _src("grouped_gemm_tile_search")
    assert "if bx >= tile_offs[i + 1]:" in src and "g[0] = i + 1" in src and "if g[0] < 4:" in src, src
    assert "if i_1_ < rows:" in src, src
    src = _src("grouped_gemm_prefix_in_kernel")
    assert "for i in cutlass.range(0, bz):" in src and "if bx * 64 < size:" in src, src


def test_warp_shuffles_butterfly_and_lane_zero_writes():
    src = _src("gemv_warp_per_row_shfl")
    for off in (16, 8, 4, 2, 1):
        assert f"acc[0] = acc[0] + cute.arch.shuffle_sync_bfly(acc[0], offset={off}, mask_and_clamp=31)" in src, src
    assert "if lane == 0 and row < 203:" in src, src


def test_two_d_thread_block_binds_both_indices():
    src = _src("gemv_2d_threads_shared_sum")
    assert "tn = tc_tx" in src and "tk = tc_ty" in src and "block=[32, 4, 1]" in src, src
    assert src.index("part[tn * 4 + tk] = s[0]") < src.index("cute.arch.sync_threads()") < \
        src.index("total[0] = total[0] + part[tn * 4 + t]"), src


def test_dequantised_weight_is_the_register_a_operand():
    src = _src("dequant_weight_register_a")
    assert "a_regs=True" in src and "tcm.a_fragment(" in src, src
    assert "Y[by1 * 32 + (j_1_ + tc_lane6), bx1 * 64 + i_1_]" in src, src


def test_column_swizzle_is_tilelangs_rasterization2DColumn():
    src = _src("gemm_swizzle_column_panel")
    assert "panel_rows = cutlass.Int32(cutlass.select_(panel_first + 4 <= 7, 4, 7 - panel_first))" in src, src
    assert "bx_1_ = panel_offset - panel_offset // panel_rows * panel_rows + panel_first" in src, src
    assert ("by_1_ = cutlass.Int32(cutlass.select_(panel_index - panel_index // 2 * 2 == 1, "
            "4 - panel_offset // panel_rows, panel_offset // panel_rows))") in src, src


def test_peeled_step_overwrites_then_accumulates():
    src = _src("gemm_peeled_first_step_clear_accum")
    first = src.index("accumulate=False")
    loop = src.index("for ko in cutlass.range(0, 4):")
    assert first < loop and "C_local = A_shared @ B_shared^T" in src, src
    assert "(ko + 1) * 64" in src, src


def test_lora_third_gemm_reads_the_scaled_rank_tile():
    src = _src("lora_gemm_second_accumulator")
    scale = src.index("xa[tc_r5 + tc_lane6] = xa[tc_r5 + tc_lane6] * cutlass.Float32(0.5)")
    third = src.index("# T.gemm(XA_shared, Lb_shared, acc): acc += XA_shared @ Lb_shared^T")
    assert scale < third, src


def test_blockwise_scales_fold_each_step():
    src = _src("fp8_blockwise_scaled_gemm")
    assert "tmp = A_shared @ B_shared^T" in src, src
    assert "acc[tc_r3 + tc_lane4] = acc[tc_r3 + tc_lane4] + tmp[tc_r3 + tc_lane4] * As[by * 64 + i, ko] * b_scale" \
        in src, src


def test_integer_select_is_named_with_its_type():
    """cutlass.select_ gives an MLIR value without a sign: a uint8 select widened to Int32
    would be sign-extended and a float conversion of it refused, so it carries its type."""
    src = _src("select_uint8_bytes")
    assert "v = cutlass.Uint8(cutlass.select_(i % 2 == 0, " in src, src
    assert "O[i, 0] = cutlass.Int32(v)" in src and "O[i, 2] = cutlass.Int32(cutlass.Float32(v) *" in src, src


def test_int8_nibble_shifts_as_tilelang_computes_them():
    """Checked against TileLang 0.1.15's CUDA: ``T.cast(b << 4, T.int8)`` of an int8 b is
    b << 4 itself (TVM drops a cast to the value's own type), shifted back in int."""
    src = _src("int8_nibble_shifts")
    assert "O[i, 0] = cutlass.Int32(cutlass.Int32(b) << 4 >> 4)" in src, src
    assert "O[i, 1] = cutlass.Int32(cutlass.Int8(cutlass.Int32(cutlass.Uint8(b)) << 4) >> cutlass.Int8(4))" in src, src
    assert "cutlass.Float32(cutlass.Int8(cutlass.select_(i % 3 == 0, " in src, src


def test_accumulator_loaded_from_c_is_not_cleared():
    src = _src("gemm_accumulate_into_c")
    load = src.index("C_local[tc_r1 + tc_lane3] = tc_vec2[tc_lane3]")
    assert load < src.index("C_local += A_shared @ B_shared") and "C_local[tc_r1 + tc_lane2] = cutlass.Float32(0.0)" not in src, src


def test_row_absmax_meets_across_the_warpgroups():
    src = _src("gemm_rowwise_fp8_quant_fullcol")
    assert 'tcrow.reduce_rows_across(acc, amax, tc_amax_i, "absmax", True, amax_rows_scratch, "wgmma", (1, 2), 64' in src, src
    assert "S[by * 64 + i_2_, bx] = amax[tc_q10]" in src, src


def test_serial_tiles_clear_the_accumulator_each_time():
    src = _src("gemm_two_n_tiles_per_block")
    loop = src.index("for t in cutlass.range(0, 2):")
    clear = src.index("= cutlass.Float32(0.0)", loop)
    assert loop < clear < src.index("C_local += A_shared @ B_shared", clear), src


def test_bias_grad_sums_columns_of_the_shared_tile():
    src = _src("gemm_weight_grad_with_bias_grad")
    # the column sums in dY_frag's own layout, col blocked alike (each thread its 8
    # columns: tests/test_column_reduce_in_place.py)
    assert "acc += dY_shared^T @ X_shared" in src, src
    assert "T.reduce_sum(dY_frag, col, dim=0): a row is 8 threads x 8 registers" in src, src
    assert re.search(r"colsum\[(tc_lane\d+)\] = colsum\[\1\] \+ col\[\1\]", src), src


def test_row_sums_of_a_fragment_not_laid_out_as_the_accumulator_are_refused():
    """TileLang 0.1.15: "no available layout found"; tilecute names the reduction."""
    with pytest.raises(Exception, match=r"T.reduce_sum\(sq, ss\): 'ss' lives with the rows of a T.gemm "
                                        r"accumulator .* no T.Parallel loop walks 'sq'"):
        P.rmsnorm_gemm_register_a()


# ---- on the GPU -------------------------------------------------------------------------------
def _close(got, want, atol, rtol):
    import torch
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)


_randn = rounds.randn


@pytest.mark.gpu
def test_transposes_and_operand_types_on_gpu():
    import torch
    torch.manual_seed(0)
    h, bf = torch.float16, torch.bfloat16
    M, N, K = 200, 136, 192
    A, B = _randn(K, M, dtype=h), _randn(N, K, dtype=h)
    C = P.gemm_tt_fp16_bf16_out()(A, B)
    _close(C, (A.float().T @ B.float().T).to(bf), atol=2e-2, rtol=1e-2)

    A, B = _randn(256, 256, dtype=bf), _randn(256, 256, dtype=bf)
    _close(P.gemm_bf16_k_pack2_fullrow()(A, B), A.float() @ B.float(), atol=1e-2, rtol=1e-3)

    f8 = torch.float8_e4m3fn
    A, B = _randn(256, 128, dtype=f8), _randn(192, 256, dtype=f8)
    _close(P.gemm_fp8_transpose_a()(A, B), A.float().T @ B.float().T, atol=1e-3, rtol=1e-4)

    A, B = _randn(128, 128, scale=0.5, dtype=f8), _randn(128, 128, scale=0.5, dtype=f8)
    _close(P.gemm_fp8_half_accumulator()(A, B), A.float() @ B.float().T, atol=0.1, rtol=0.02)

    M, N, K = 192, 128, 256
    A = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    W = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    Sa = (torch.rand(M, device="cuda") + 0.5) * 1e-2
    Sw = (torch.rand(N, device="cuda") + 0.5) * 2e-1
    Q = P.gemm_int8_requant_int8_out()(A, W, Sa, Sw)
    acc = (A.double() @ W.double().T).float()
    want = torch.clamp(torch.round(acc * Sa[:, None] * Sw[None, :]), -128, 127).to(torch.int8)
    assert (Q.int() - want.int()).abs().max().item() <= 1 and (Q == want).float().mean().item() > 0.999

    A, B = _randn(256, 256, scale=0.1, dtype=h), _randn(512, 256, dtype=h)
    want = (A.float() @ B.float().T).half()
    _close(P.gemm_fullcol_128x256_shared_out()(A, B), want, atol=1e-2, rtol=2e-3)
    _close(P.gemm_fullcol_128x256_shared_out(policy=P.T.GemmWarpPolicy.Square)(A, B), want, atol=1e-2, rtol=2e-3)


@pytest.mark.gpu
def test_epilogues_on_gpu():
    import torch
    torch.manual_seed(1)
    h, bf = torch.float16, torch.bfloat16
    M, N, K = 300, 200, 128
    A, B = _randn(M, K, scale=0.2, dtype=bf), _randn(K, N, scale=0.2, dtype=bf)
    Bias = _randn(M)
    x = A.float() @ B.float() + Bias[:, None]
    want = 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    _close(P.gemm_row_bias_gelu_tanh_bf16()(A, B, Bias), want.to(bf), atol=2e-2, rtol=1e-2)

    M, N, K = 77, 256, 192
    A, W, R = _randn(M, K, scale=0.2, dtype=h), _randn(N, K, scale=0.2, dtype=h), _randn(M, N, dtype=h)
    acc = A.float() @ W.float().T
    want = acc * torch.sigmoid(acc) + R.float()
    _close(P.gemm_silu_residual_symbolic_m()(A, W, R), want.half(), atol=1e-2, rtol=1e-2)

    M, N, K = 200, 256, 256
    A, B = _randn(M, K, dtype=h), _randn(N, K, dtype=h)
    St, Sc = torch.rand(M, device="cuda") * 10 + 1, torch.rand(N, device="cuda") * 5 + 1
    C = P.gemm_token_channel_scales_fp8_out()(A, B, St, Sc)
    assert C.dtype == torch.float8_e4m3fn
    want = torch.clamp((A.float() @ B.float().T) * St[:, None] * Sc[None, :], -448, 448)
    _close(C, want, atol=2e-2, rtol=0.07)
    assert (C.float().abs() == 448).any()

    Bt, M, N, K = 3, 128, 128, 96
    A, B, Cin = _randn(Bt, M, K, dtype=h), _randn(Bt, K, N, dtype=h), _randn(Bt, M, N, dtype=h)
    alpha = torch.rand(Bt, device="cuda") * 0.1
    want = alpha[:, None, None] * (A.float() @ B.float()) + 0.5 * Cin.float()
    _close(P.bmm_alpha_beta()(A, B, Cin, alpha), want.half(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_split_k_on_gpu():
    import torch
    torch.manual_seed(2)
    h, bf = torch.float16, torch.bfloat16
    M, N, K = 100, 136, 500
    A, B = _randn(M, K, dtype=h), _randn(K, N, dtype=h)
    C = torch.zeros(M, N, device="cuda")
    P.splitk_element_atomics()(A, B, C)
    _close(C, A.double() @ B.double(), atol=1e-3, rtol=1e-4)

    M, N, K, S = 128, 96, 384, 4
    A, B = _randn(M, K, dtype=bf), _randn(N, K, dtype=bf)
    Ws = P.splitk_partials_mid_dim()(A, B)
    parts = torch.stack([A[:, s * 96:(s + 1) * 96].double() @ B[:, s * 96:(s + 1) * 96].double().T
                         for s in range(S)], dim=1)
    _close(Ws, parts, atol=1e-3, rtol=1e-4)
    Bias = _randn(N)
    C = P.splitk_reduce_mid_dim()(Ws, Bias)
    _close(C, torch.relu(Ws.sum(1) + Bias).to(bf), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_batches_and_groups_on_gpu():
    import torch
    torch.manual_seed(3)
    h, bf = torch.float16, torch.bfloat16
    Bt, M, N, K = 3, 100, 64, 128
    A2, B2 = _randn(Bt * M, K, dtype=h), _randn(K, Bt * N, dtype=h)
    C2 = torch.full((Bt * M, N), float("nan"), device="cuda")
    P.bmm_stacked_2d()(A2, B2, C2)
    want = torch.cat([A2[b * M:(b + 1) * M].double() @ B2[:, b * N:(b + 1) * N].double() for b in range(Bt)])
    _close(C2, want, atol=1e-3, rtol=1e-4)

    A, B = _randn(3, 256, 128, dtype=bf), _randn(3, 256, 128, dtype=bf)
    _close(P.bmm_symbolic_batch_transpose_a()(A, B), A.double().transpose(1, 2) @ B.double(), atol=1e-3, rtol=1e-4)

    sizes = [70, 0, 130, 100]
    G, N, K = 4, 128, 128
    X, W = _randn(300, K, scale=0.2, dtype=h), _randn(G, N, K, scale=0.2, dtype=h)
    row_offs, tile_offs = [0], [0]
    for s in sizes:
        row_offs.append(row_offs[-1] + s)
        tile_offs.append(tile_offs[-1] + (s + 63) // 64)
    ro = torch.tensor(row_offs, device="cuda", dtype=torch.int32)
    to = torch.tensor(tile_offs, device="cuda", dtype=torch.int32)
    Y = P.grouped_gemm_tile_search()(X, W, ro, to)
    want = torch.cat([X[row_offs[g]:row_offs[g + 1]].float() @ W[g].float().T for g in range(G)])
    _close(Y, want.half(), atol=1e-2, rtol=1e-2)

    sizes = [100, 37, 123]
    X, W = _randn(260, 64, scale=0.2, dtype=bf), _randn(3, 64, 96, scale=0.2, dtype=bf)
    Y = P.grouped_gemm_prefix_in_kernel()(X, W, torch.tensor(sizes, device="cuda", dtype=torch.int32))
    starts = [0, 100, 137, 260]
    want = torch.cat([X[starts[g]:starts[g + 1]].float() @ W[g].float() for g in range(3)])
    _close(Y, want.to(bf), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_gemv_and_skinny_on_gpu():
    import torch
    torch.manual_seed(4)
    h, bf = torch.float16, torch.bfloat16
    W, x = _randn(300, 1000, dtype=h), _randn(1000, scale=0.1, dtype=h)
    _close(P.gemv_parallel_reduce_sum()(W, x), (W.float() @ x.float()).half(), atol=1e-2, rtol=1e-2)

    W, x, bias = _randn(203, 1000, dtype=bf), _randn(1000, dtype=bf), _randn(203)
    _close(P.gemv_warp_per_row_shfl()(W, x, bias), W.double() @ x.double() + bias.double(), atol=1e-3, rtol=1e-4)

    W, x = _randn(200, 768, dtype=h), _randn(768, scale=0.1, dtype=h)
    _close(P.gemv_2d_threads_shared_sum()(W, x), (W.float() @ x.float()).half(), atol=1e-2, rtol=1e-2)

    X, W = _randn(5, 256, scale=0.2, dtype=h), _randn(320, 256, scale=0.2, dtype=h)
    _close(P.skinny_gemm_m16_fullcol()(X, W), (X.float() @ W.float().T).half(), atol=1e-2, rtol=1e-2)

    X, W = _randn(4, 320, dtype=h), _randn(200, 320, dtype=h)
    _close(P.skinny_gemm_cuda_core_fma()(X, W), X.double() @ W.double().T, atol=1e-3, rtol=1e-4)


def _nibbles_along_last(q):
    """(..., 2n) codes 0..15 -> (..., n) uint8, even index low."""
    import torch
    return (q[..., 0::2] | (q[..., 1::2] << 4)).to(torch.uint8)


@pytest.mark.gpu
def test_dequant_gemms_on_gpu():
    import torch
    torch.manual_seed(5)
    h, bf = torch.float16, torch.bfloat16
    M, N, K, g = 128, 128, 256, 64
    q = torch.randint(0, 16, (N, K), device="cuda", dtype=torch.int32)
    z = torch.randint(0, 16, (N, K // g), device="cuda", dtype=torch.int32)
    s = (torch.rand(N, K // g, device="cuda") * 0.05).half()
    A = _randn(M, K, dtype=h)
    Wd = (q.half() - z.repeat_interleave(g, 1).half()) * s.repeat_interleave(g, 1)
    C = P.dequant_uint4_zero_points()(A, _nibbles_along_last(q), s, _nibbles_along_last(z))
    _close(C, (A.float() @ Wd.float().T).half(), atol=2e-2, rtol=1e-2)

    M, N, K, g = 128, 128, 256, 32
    q = torch.randint(-8, 8, (K, N), device="cuda", dtype=torch.int32)
    Bq = ((q[0::2] & 15) | ((q[1::2] & 15) << 4)).to(torch.uint8).view(torch.int8)
    S = (torch.rand(K // g, N, device="cuda") * 0.05 + 0.01).to(bf)
    A = _randn(M, K, dtype=bf)
    Wd = q.to(bf) * S.repeat_interleave(g, 0)
    C = P.dequant_int4_signed_k_packed_fragment()(A, Bq, S)
    _close(C, A.double() @ Wd.double(), atol=1e-3, rtol=1e-3)

    M, N, K, g = 64, 256, 256, 128
    q = torch.randint(0, 16, (K, N), device="cuda", dtype=torch.int32)
    z = torch.randint(0, 16, (K // g, N), device="cuda", dtype=torch.int32)
    Sc = (torch.rand(K // g, N, device="cuda") * 0.05).half()
    A = _randn(M, K, dtype=h)
    Wd = (q - z.repeat_interleave(g, 0)).half() * Sc.repeat_interleave(g, 0)
    C = P.dequant_uint4_n_packed_zeros()(A, _nibbles_along_last(q), Sc, _nibbles_along_last(z))
    _close(C, (A.float() @ Wd.float()).half(), atol=2e-2, rtol=1e-2)

    N, K, g, M = 256, 256, 64, 37
    q = torch.randint(0, 16, (N, K), device="cuda", dtype=torch.int32)
    Sc = (torch.rand(N, K // g, device="cuda") * 0.05).half()
    X = _randn(M, K, dtype=h)
    Wd = (q.half() - 8) * Sc.repeat_interleave(g, 1)
    Y = P.dequant_weight_register_a()(X, _nibbles_along_last(q), Sc)
    _close(Y, (X.float() @ Wd.float().T).half(), atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_schedules_and_layouts_on_gpu():
    import torch
    torch.manual_seed(6)
    h, bf = torch.float16, torch.bfloat16
    A, B = _randn(320, 128, dtype=h), _randn(128, 448, dtype=h)
    want = A.double() @ B.double()
    _close(P.gemm_swizzle_column_panel()(A, B), want, atol=1e-3, rtol=1e-4)
    _close(P.gemm_swizzle_column_panel(order="row", panel=3)(A, B), want, atol=1e-3, rtol=1e-4)

    A, B = _randn(256, 256, scale=0.2, dtype=bf), _randn(256, 256, scale=0.2, dtype=bf)
    _close(P.gemm_annotated_swizzled_layouts()(A, B), (A.float() @ B.float().T).to(bf), atol=2e-2, rtol=1e-2)

    A, B = _randn(256, 320, dtype=bf), _randn(320, 256, dtype=bf)
    want = A.double() @ B.double()
    for stages in (0, 1, 2, 3, 4):
        _close(P.gemm_stages_fullrow_256(num_stages=stages)(A, B), want, atol=1e-3, rtol=1e-4)

    kern = P.gemm_all_symbolic_shared_epilogue()
    for M, N, K in ((130, 72, 100), (64, 64, 32), (1, 200, 7)):
        A, B = _randn(M, K, scale=0.3, dtype=h), _randn(K, N, scale=0.3, dtype=h)
        _close(kern(A, B), (A.float() @ B.float()).half(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_register_a_peeled_lora_and_block_scales_on_gpu():
    import torch
    torch.manual_seed(7)
    h, bf = torch.float16, torch.bfloat16
    M, N, K = 128, 128, 256
    X, gamma, W = _randn(M, K, dtype=h), (torch.rand(K, device="cuda") + 0.5).half(), _randn(N, K, scale=0.1, dtype=h)
    xg = (X * gamma).float()
    rms = torch.rsqrt((X.float() ** 2).mean(1, keepdim=True) + 1e-6)
    _close(P.rmsnorm_gemm_register_a_one_loop()(X, gamma, W), ((xg @ W.float().T) * rms).half(), atol=1e-2, rtol=1e-2)

    A, B = _randn(128, 320, dtype=h), _randn(128, 320, dtype=h)
    _close(P.gemm_peeled_first_step_clear_accum()(A, B), A.double() @ B.double().T, atol=1e-3, rtol=1e-4)

    X, W = _randn(128, 256, scale=0.2, dtype=h), _randn(128, 256, scale=0.2, dtype=h)
    La, Lb = _randn(16, 256, scale=0.2, dtype=h), _randn(128, 16, scale=0.2, dtype=h)
    xa = ((X.float() @ La.float().T) * 0.5).half().float()
    want = X.float() @ W.float().T + xa @ Lb.float().T
    _close(P.lora_gemm_second_accumulator()(X, W, La, Lb), want.half(), atol=1e-2, rtol=1e-2)

    M, N, K = 256, 256, 512
    f8 = torch.float8_e4m3fn
    A, B = _randn(M, K, dtype=f8), _randn(N, K, dtype=f8)
    As = torch.rand(M, K // 128, device="cuda") + 0.5
    Bs = torch.rand(N // 128, K // 128, device="cuda") + 0.5
    Aw = A.double() * As.double().repeat_interleave(128, 1)
    Bw = B.double() * Bs.double().repeat_interleave(128, 0).repeat_interleave(128, 1)
    _close(P.fp8_blockwise_scaled_gemm()(A, B, As, Bs), (Aw @ Bw.T).to(bf), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_integer_selects_and_nibble_shifts_on_gpu():
    import torch
    U = torch.arange(256, device="cuda", dtype=torch.int32).flip(0).to(torch.uint8)
    O = P.select_uint8_bytes()(U)
    i = torch.arange(256, device="cuda")
    v = torch.where(i % 2 == 0, U.int(), U.int()[(i + 1) % 256])
    assert torch.equal(O[:, 0], v) and torch.equal(O[:, 1], v >> 4) and torch.equal(O[:, 2], v * 2)

    B = torch.arange(-128, 128, device="cuda", dtype=torch.int32).to(torch.int8)
    O = P.int8_nibble_shifts()(B)
    b = B.int()
    lo_unsigned = ((b << 4) >> 4)  # C's int shifts of the promoted byte
    lo_signed = ((b & 15) ^ 8) - 8
    assert torch.equal(O[:, 0], lo_unsigned) and torch.equal(O[:, 1], lo_signed)
    assert torch.equal(O[:, 2], torch.where(i % 3 == 0, lo_signed, b >> 4))


@pytest.mark.gpu
def test_accumulators_loaded_reused_and_reduced_on_gpu():
    import torch
    torch.manual_seed(8)
    h, bf = torch.float16, torch.bfloat16
    A, B = _randn(200, 128, dtype=h), _randn(128, 128, dtype=h)
    C0 = _randn(200, 128)
    C = C0.clone()
    P.gemm_accumulate_into_c()(A, B, C)
    _close(C, C0.double() + A.double() @ B.double(), atol=1e-3, rtol=1e-4)

    A, B = _randn(200, 128, dtype=bf), _randn(256, 128, dtype=bf)
    Q, S = P.gemm_rowwise_fp8_quant_fullcol()(A, B)
    acc = A.double() @ B.double().T
    scale = torch.clamp(acc.abs().amax(1, keepdim=True), min=1e-4) / 448
    _close(S, scale.float(), atol=0, rtol=1e-4)
    _close(Q.float() * S, acc.float(), atol=1e-2, rtol=0.07)

    A, B = _randn(128, 192, dtype=bf), _randn(192, 512, dtype=bf)
    _close(P.gemm_two_n_tiles_per_block()(A, B), (A.float() @ B.float()).to(bf), atol=2e-2, rtol=1e-2)

    dY, X = _randn(300, 128, dtype=h), _randn(300, 96, dtype=h)
    dW, db = P.gemm_weight_grad_with_bias_grad()(dY, X)
    _close(dW, dY.double().T @ X.double(), atol=1e-3, rtol=1e-4)
    _close(db, dY.double().sum(0), atol=1e-3, rtol=1e-4)
