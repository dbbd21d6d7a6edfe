"""A fiftieth set of programs in TileLang's idioms (tests/unseen_programs50.py): GEMMs at the
edges of their shapes and schedules -- decode shapes (one row on a 16-row mma.sync tile, four
stages, K and N ragged), 48 rows with a float16 accumulator and one stage, ``transpose_A`` in
bfloat16 with eight rows, a gate stored (D, 24), a bfloat16 epilogue reading bias and residual
(from global, and staged through shared), fp8 with B (K, N), ``policy=Square`` on eight warps
with ``k_pack=2``, ``FullCol`` on two warps, a 256-row tile on two warpgroups, per-K-block
scales with ``clear_accum=True`` in the K loop, stream-K with a runtime ``T.Pipelined`` extent
and atomic fixup (alone, and ahead of data-parallel tiles in one launch), a grouped GEMM over a
``T.dynamic`` number of rows, a batched GEMM (batch in blockIdx.z) written transposed, and
``T.use_swizzle`` panels of 16 (rows) and 8 (columns) over grids no multiple of the panel.

CPU: each builds to an sm_90a cubin and an sm_80 one (fp8 aside: refused on sm_80, as it
should be), and what decides its result is read in the generated source.  All built and read
right as first written but router_logits_kn_24_experts: a B stored (K, N) 24 float16 columns
wide (48 bytes, which no 32-byte swizzle chunk tiles) was refused on sm_90a ("rows must be a
multiple of 32 bytes") though TileLang takes it (wgmma over an unswizzled tile) and tilecute
built it for sm_80; such a T.gemm now runs on warp mma.sync on sm_90a too
(tests/test_gemm.py).  fp8 with an MN-major B runs on CUDA cores (tilecute's documented
fallback: wgmma reads 8-bit operands K-major only), the values the same.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs50.py``)."""

import re

import pytest
import torch

import tilecute
from tilecute.codegen.source import CodegenError
import rounds
import unseen_programs50 as P

f16, bf16 = torch.float16, torch.bfloat16

NAMES = ["bmm_z_batch_transposed_out", "decode_gemm_m1_bm16", "gemm_bias_residual_bf16",
         "gemm_bias_residual_staged_bf16",
         "gemm_bm256_two_warpgroups", "gemm_fp8_b_kn", "gemm_fullcol_two_warps",
         "gemm_kblock_scales_clear_accum", "gemm_m48_half_accum_one_stage",
         "gemm_square_8warps_kpack2", "gemm_swizzle_panel16_row", "gemm_swizzle_panel8_column",
         "gemm_transpose_a_bf16_m8", "grouped_gemm_dynamic_rows", "router_logits_kn_24_experts",
         "streamk_hybrid_dp_tail", "streamk_pipelined_ragged"]
SM90_ONLY = {"gemm_fp8_b_kn"}  # fp8 operands convert on sm_89+ only

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name, arch="sm_90a"):
    """The @cute.kernel functions' text (not the launch wrapper) for ``arch``."""
    return rounds.kernel_body(rounds.source(getattr(P, name).get_tir(), arch))


def _launch(name, arch="sm_90a"):
    src = rounds.source(getattr(P, name).get_tir(), arch)
    return re.search(r"\.launch\((.*)\)", src).group(1)


test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - SM90_ONLY), rounds.tir_of(P), "sm_80")


def test_fp8_gemm_is_refused_on_sm80(tmp_path):
    with pytest.raises(CodegenError, match=r"unseen_programs50\.py:\d+: prim_func 'main': T\.gemm on "
                                           r"float8_e4m3 operands: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(P.gemm_fp8_b_kn.get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- what decides each result, in the generated source -----------------------------------------
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_decode_gemm_runs_a_16_row_tile_on_mma_sync(arch):
    src = _body("decode_gemm_m1_bm16", arch)
    # 16 rows: no wgmma (64 rows a warpgroup); four warps side by side along N
    assert 'tcm.tiled_mma("mma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, False, (1, 4), 32)' in src
    assert "# x_s: 4 stages of 1024 float16" in src and "cute.arch.cp_async_wait_group(6)" in src
    # the K tail (300 = 4 * 64 + 44): a 4-wide chunk is copied whole only if it lies inside
    assert "if by * 16 + i3 < 1 and (ko + 3) * 64 + (i4 + 3) < 300:" in src
    assert "if by * 16 + i3 < 1 and (ko + 3) * 64 + (i4 + tc_lane" in src
    # only row 0 and columns below 100 are written
    assert re.search(r"if by \* 16 \+ i\d+ < 1 and bx \* 32 \+ \(i\d+ \+ tc_lane\d+\) < 100:\s+y\[", src)


def test_m48_half_accumulator_stays_float16():
    src = _body("gemm_m48_half_accum_one_stage")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float16, False, True, (1, 1), 64)' in src
    assert 'tcm.accumulator("wgmma", (1, 1), (64, 64), cutlass.Float16, tc_tid)' in src
    assert "C_l[tc_r1 + tc_lane2] = cutlass.Float16(0.0)" in src
    assert "tc_vec4[tc_lane5] = C_l[tc_r3 + tc_lane5]" in src  # no cast on the way out
    assert "for ko in cutlass.range(0, 6):" in src and "tct.init_barriers(tc_bar0, 1, 2)" in src  # one stage
    # K = 176: TMA fills the last step's second half with zeros; on sm_80 the copies are masked
    assert "(tc_j0 * 32, by * 64)" in src and "(bx * 64, tc_j0 * 32)" in src
    src80 = _body("gemm_m48_half_accum_one_stage", "sm_80")
    assert "if by * 64 + i3 < 48 and ko * 32 + (i4 + 7) < 176:" in src80
    assert "if ko * 32 + i5 < 176 and bx * 64 + (i6 + 7) < 96:" in src80
    assert 'tcm.tiled_mma("mma", cutlass.Float16, cutlass.Float16, cutlass.Float16' in src80


def test_transpose_a_reads_a_mn_major():
    src = _body("gemm_transpose_a_bf16_m8")
    assert 'tcm.tiled_mma("wgmma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, True, False' in src
    assert "acc += A_s^T @ B_s^T" in src
    assert "(by * 64, tc_j0 * 64)" in src  # A's box: M innermost, then K
    assert 'tcm.tiled_mma("mma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, True, False' in \
        _body("gemm_transpose_a_bf16_m8", "sm_80")


def test_router_with_a_24_column_mn_major_gate_runs_on_mma_sync():
    src = _body("router_logits_kn_24_experts")
    # (refused on sm_90a before: no swizzle chunk tiles 48-byte rows)
    assert 'tcm.tiled_mma("mma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, True, (4, 1), 24)' in src
    assert "# TMA load of a 64x24 box of Wg" in src  # the gate's tile unswizzled, by TMA
    assert re.search(r"tcm\.gemm_warp\(tc_mma0, tc_tid, acc, tcm\.operand\(.*\), tcm\.simt_operand\(.*"
                     r"cutlass\.Float16, 64, 24, True\)", src)
    assert "Wg_desc = tct.placeholder(Wg_ptr, cutlass.Float16, (64, 24), 0)" in \
        rounds.source(P.router_logits_kn_24_experts.get_tir())


def test_bias_residual_epilogue_adds_in_float32_then_rounds_once():
    src = _body("gemm_bias_residual_bf16")
    assert "if m < 200 and n < 250:" in src
    assert "out[m, n] = cutlass.BFloat16(acc[" in src and "+ bias[n] + cutlass.Float32(res[m, n]))" in src
    assert 'tcm.accumulator("wgmma", (2, 1), (128, 128), cutlass.Float32, tc_tid)' in src


def test_staged_epilogue_reads_bias_and_residual_from_shared():
    src = _body("gemm_bias_residual_staged_bf16")
    assert "tct.load(bias_desc, tc_smem + 49152, tc_bar2, (bx * 128,), 256)" in src  # zero past 250
    # the residual rows are 500 bytes: cp.async of 4-byte pairs, masked at the ragged edge
    assert "if by * 64 + i1 < 200 and bx * 128 + (i2 + 1) < 250:" in src
    epi = src.split("tct.wait(tc_bar2, 0)", 1)[1]
    assert epi.index("cute.arch.cp_async_wait_group(0)") < epi.index("bias_s.iterator")
    assert re.search(r"acc\[(\w+) \+ (\w+)\] = acc\[\1 \+ \2\] \+ \(cutlass\.Float32\(tc_vec\d+\[\2\]\) \+ "
                     r"cutlass\.Float32\(tc_vec\d+\[\2\]\)\)", epi)
    assert "tc_vec12[tc_lane13] = cutlass.BFloat16(acc[" in epi
    assert "out[by * 64 + i7, bx * 128 + (i8 + tc_lane19)] = out_s[" in epi


def test_fp8_with_mn_major_b_runs_on_cuda_cores():
    src = _body("gemm_fp8_b_kn")
    assert "tcm.tiled_mma(" not in src
    assert "no tensor-core MMA for float8_e4m3 x float8_e4m3 -> float32 here" in src
    assert re.search(r"tcm\.gemm_simt\(acc, tcm\.simt_operand\(.*cutlass\.Float8E4M3FN, 64, 64, False\), "
                     r"tcm\.simt_operand\(.*cutlass\.Float8E4M3FN, 64, 64, True\)", src)


def test_square_on_eight_warps_ignores_k_pack():
    src = _body("gemm_square_8warps_kpack2")
    assert 'tcm.accumulator("wgmma", (2, 1), (128, 128), cutlass.Float32, tc_tid)' in src
    assert "block=[384, 1, 1]" in _launch("gemm_square_8warps_kpack2")  # + a producer warpgroup
    # mma.sync: Square picks 2 x 4 warps (64 x 32 each: 4 x 4 MMA tiles, the squarest)
    assert 'tcm.accumulator("mma", (2, 4), (128, 128), cutlass.Float32, tc_tid)' in \
        _body("gemm_square_8warps_kpack2", "sm_80")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_fullcol_puts_two_warps_along_n(arch):
    src = _body("gemm_fullcol_two_warps", arch)
    assert 'tcm.accumulator("mma", (1, 2), (32, 64), cutlass.Float32, tc_tid)' in src
    assert "block=[64, 1, 1]" in _launch("gemm_fullcol_two_warps", arch)


def test_256_rows_on_two_warpgroups():
    src = _body("gemm_bm256_two_warpgroups")
    assert 'tcm.accumulator("wgmma", (2, 1), (256, 128), cutlass.Float32, tc_tid)' in src
    assert "cutlass.Float16, 256, 64, 128, False, \"wgmma\")" in src  # A: 256 x 64
    assert 'tcm.accumulator("mma", (4, 2), (256, 128)' in _body("gemm_bm256_two_warpgroups", "sm_80")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_kblock_scales_clear_the_part_each_step(arch):
    src = _body("gemm_kblock_scales_clear_accum", arch)
    loop = src.split("for ko in cutlass.range(0, 5):", 1)[1]
    assert re.search(r"tcm\.gemm_warp\(tc_mma0, tc_tid, part, .*accumulate=False\)", loop)
    assert re.search(r"acc\[(\w+) \+ (\w+)\] = acc\[\1 \+ \2\] \+ part\[\1 \+ \2\] \* s\[ko\]", loop)
    assert loop.index("accumulate=False") < loop.index("* s[ko]")


def test_streamk_pipelines_a_runtime_k_range():
    src = _body("streamk_pipelined_ragged")
    assert "it[0] = pid * 12" in src and "stop[0] = cutlass.min(it[0] + 12, 84)" in src
    assert "k_end = cutlass.min(7, k0 + stop[0] - it[0])" in src
    assert "for kk in cutlass.range(0, k_end - k0 - 0):" in src and "if kk + 1 < k_end - k0 - 0:" in src
    assert "(k0 + (kk + 1)) * 64" in src  # the next stage's K block
    assert re.search(r"if tm \* 64 \+ i < 200:\s+if tm \* 64 \+ i >= 0:\s+tca\.atomic_add\(C, "
                     r"\(tm \* 64 \+ i, tn \* 64 \+ \(j \+ tc_lane\d+\)\), acc\[", src)
    assert "it[0] = it[0] + (k_end - k0)" in src


def test_streamk_hybrid_stores_whole_tiles_and_adds_partial_ones():
    src = _body("streamk_hybrid_dp_tail")
    # 16 x 128 tiles on two warps side by side (mma.sync: 16 rows)
    assert 'tcm.accumulator("mma", (1, 2), (16, 128), cutlass.Float32, tc_tid)' in src
    assert "it[0] = pid * 15 + cutlass.min(pid, 0)" in src
    assert "end[0] = cutlass.min(it[0] + (10 - (it[0] - it[0] // 10 * 10)), last)" in src
    assert "for k in cutlass.range(0, end[0] - it[0] - 0):" in src
    whole, partial = src.split("if k0 == 0 and end[0] - end[0] // 10 * 10 == 0:", 1)[1].split("        else:", 1)
    assert ".store(tc_vec" in whole and "atomic" not in whole
    assert "tca.atomic_add_view(" in partial.split("it[0] = end[0]", 1)[0]
    # then three rounds of whole tiles after the 6 stream-K ones, one stage (no prefetch)
    dp = src.split("for r in cutlass.range(0, 3):", 1)[1]
    assert "tile_1_ = 6 + r * 4 + pid" in dp and "for k_1_ in cutlass.range(0, 10):" in dp
    assert dp.index("cute.arch.sync_threads()") < dp.index("tcc.copy_async(")  # the stream-K tiles' reads done


def test_grouped_gemm_finds_its_group_and_masks_rows():
    k = P.grouped_gemm_dynamic_rows()
    src = k.get_kernel_source()
    assert "grid=[2, (rows + 64 - 1) // 64 + 3 - 1, 1]" in src
    body = rounds.kernel_body(src)
    assert "n_tiles = (offsets[gi + 1] - offsets[gi] + 64 - 1) // 64" in body
    assert re.search(r"if g\[0\] < 0 and by\w* < first\[0\] \+ n_tiles:\s+g\[0\] = gi", body)
    assert "W.iterator + cute.assume(g[0] * 24576 + (bx" in body  # the group's weight
    assert "cutlass.select_(start + i < end, tc_vec" in body
    assert re.search(r"if start \+ i_1_ < end:\s+if start \+ i_1_ >= 0 and start \+ i_1_ < rows:\s+C\[start \+ i_1_, ", body)


def test_batched_output_goes_out_transposed():
    src = _body("bmm_z_batch_transposed_out")
    assert "bx, by, bz = cute.arch.block_idx()" in src
    assert "(tc_j0 * 32, by * 64, bz)" in src  # A[bz]'s box
    assert re.search(r"out_s\[\(j \+ tc_lane\d+\) \* 64 \+ \(i \^ \(\(j \+ tc_lane\d+\) & 31\)\)\] = "
                     r"cutlass\.Float16\(acc\[", src)
    assert "cute.make_tensor(Ct.iterator + cute.assume(bz * 7200 + (bx * 64 + i3) * 100 + by * 64 + i4, divby=4)" in src
    assert "grid=[2, 2, 3]" in _launch("bmm_z_batch_transposed_out")


def test_swizzle_panel16_rows_walks_the_second_panel_back():
    src = _body("gemm_swizzle_panel16_row")
    assert "block_flat = bx + by * 5" in src and "panel_index = block_flat // 80" in src
    assert "panel_rows = cutlass.Int32(cutlass.select_(panel_first + 16 <= 21, 16, 21 - panel_first))" in src
    assert ("bx_1_ = cutlass.Int32(cutlass.select_(panel_index - panel_index // 2 * 2 == 1, "
            "4 - panel_offset // panel_rows, panel_offset // panel_rows))") in src
    assert "by_1_ = panel_offset - panel_offset // panel_rows * panel_rows + panel_first" in src


def test_swizzle_panel8_columns_walks_the_second_panel_up():
    src = _body("gemm_swizzle_panel8_column")
    assert "block_flat = bx + by * 17" in src and "panel_index = block_flat // 40" in src
    assert "panel_rows = cutlass.Int32(cutlass.select_(panel_first + 8 <= 17, 8, 17 - panel_first))" in src
    assert "bx_1_ = panel_offset - panel_offset // panel_rows * panel_rows + panel_first" in src
    assert ("by_1_ = cutlass.Int32(cutlass.select_(panel_index - panel_index // 2 * 2 == 1, "
            "4 - panel_offset // panel_rows, panel_offset // panel_rows))") in src


def _rasterization(nx, ny, panel, order):
    """TileLang's rasterization2DRow / rasterization2DColumn, block by block."""
    out = []
    for by in range(ny):
        for bx in range(nx):
            idx = bx + by * nx
            across, along = (nx, ny) if order == "row" else (ny, nx)
            size = panel * across
            pi, off = divmod(idx, size)
            stride = panel if (pi + 1) * size < nx * ny else (nx * ny - pi * size) // across
            walk = off // stride
            if pi & 1:
                walk = across - 1 - walk
            step = off % stride + pi * panel
            out.append((walk, step) if order == "row" else (step, walk))
    return out


@pytest.mark.parametrize("name,nx,ny,panel,order", [("gemm_swizzle_panel16_row", 5, 21, 16, "row"),
                                                   ("gemm_swizzle_panel8_column", 17, 5, 8, "column")])
def test_swizzle_lets_give_tilelangs_block_order(name, nx, ny, panel, order):
    """The generated block remapping, run for every block, is TileLang's order (and so a
    permutation of the grid)."""
    lines = [ln.strip() for ln in _body(name).splitlines()
             if re.match(r"\s+(block_flat|panel_\w+|bx_1_|by_1_) = ", ln)]
    ns = {"cutlass": type("C", (), {"select_": staticmethod(lambda c, a, b: a if c else b),
                                     "Int32": staticmethod(int)})}
    got = []
    for by in range(ny):
        for bx in range(nx):
            env = dict(ns, bx=bx, by=by)
            for ln in lines:
                exec(ln, env)
            got.append((env["bx_1_"], env["by_1_"]))
    assert got == _rasterization(nx, ny, panel, order)
    assert sorted(got) == sorted((x, y) for x in range(nx) for y in range(ny))


# ---- GPU ----------------------------------------------------------------------------------------
def _ref(a, b):
    return a.float() @ b.float()


@pytest.mark.gpu
def test_decode_gemm_m1_bm16_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(1, 300, device="cuda", dtype=f16)
    W = torch.randn(100, 300, device="cuda", dtype=f16) * 0.1
    rounds.close(P.decode_gemm_m1_bm16()(x, W), _ref(x, W.T), 2e-2)


@pytest.mark.gpu
def test_gemm_m48_half_accum_one_stage_on_gpu():
    torch.manual_seed(1)
    A = torch.randn(48, 176, device="cuda", dtype=f16) * 0.3
    B = torch.randn(176, 96, device="cuda", dtype=f16) * 0.3
    rounds.close(P.gemm_m48_half_accum_one_stage()(A, B), _ref(A, B), 3e-2)


@pytest.mark.gpu
def test_gemm_transpose_a_bf16_m8_on_gpu():
    torch.manual_seed(2)
    A = torch.randn(200, 8, device="cuda", dtype=bf16)
    B = torch.randn(136, 200, device="cuda", dtype=bf16) * 0.1
    rounds.close(P.gemm_transpose_a_bf16_m8()(A, B), _ref(A.T, B.T), 3e-2)


@pytest.mark.gpu
def test_router_logits_kn_24_experts_on_gpu():
    torch.manual_seed(13)
    x = torch.randn(150, 512, device="cuda", dtype=f16)
    Wg = torch.randn(512, 24, device="cuda", dtype=f16) * 0.05
    rounds.close(P.router_logits_kn_24_experts()(x, Wg), _ref(x, Wg), 1e-2)


@pytest.mark.gpu
def test_gemm_bias_residual_bf16_on_gpu():
    torch.manual_seed(3)
    x = torch.randn(200, 256, device="cuda", dtype=bf16)
    W = torch.randn(250, 256, device="cuda", dtype=bf16) * 0.05
    bias = torch.randn(250, device="cuda")
    res = torch.randn(200, 250, device="cuda", dtype=bf16)
    out = P.gemm_bias_residual_bf16()(x, W, bias, res)
    rounds.close(out, _ref(x, W.T) + bias + res.float(), 3e-2)


@pytest.mark.gpu
def test_gemm_bias_residual_staged_bf16_on_gpu():
    torch.manual_seed(15)
    x = torch.randn(200, 192, device="cuda", dtype=bf16)
    W = torch.randn(250, 192, device="cuda", dtype=bf16) * 0.05
    bias = torch.randn(250, device="cuda", dtype=bf16)
    res = torch.randn(200, 250, device="cuda", dtype=bf16)
    out = P.gemm_bias_residual_staged_bf16()(x, W, bias, res)
    rounds.close(out, _ref(x, W.T) + bias.float() + res.float(), 3e-2)


@pytest.mark.gpu
def test_gemm_fp8_b_kn_on_gpu():
    torch.manual_seed(4)
    A = torch.randn(128, 256, device="cuda").to(torch.float8_e4m3fn)
    B = torch.randn(256, 128, device="cuda").to(torch.float8_e4m3fn)
    rounds.close(P.gemm_fp8_b_kn()(A, B), _ref(A, B), 1e-3)


@pytest.mark.gpu
def test_gemm_square_8warps_kpack2_on_gpu():
    torch.manual_seed(5)
    A = torch.randn(256, 192, device="cuda", dtype=bf16)
    B = torch.randn(320, 192, device="cuda", dtype=bf16)
    rounds.close(P.gemm_square_8warps_kpack2()(A, B), _ref(A, B.T), 1e-3)


@pytest.mark.gpu
def test_gemm_fullcol_two_warps_on_gpu():
    torch.manual_seed(6)
    A = torch.randn(96, 128, device="cuda", dtype=f16)
    B = torch.randn(80, 128, device="cuda", dtype=f16) * 0.1
    rounds.close(P.gemm_fullcol_two_warps()(A, B), _ref(A, B.T), 2e-2)


@pytest.mark.gpu
def test_gemm_bm256_two_warpgroups_on_gpu():
    torch.manual_seed(7)
    A = torch.randn(512, 256, device="cuda", dtype=f16)
    B = torch.randn(256, 384, device="cuda", dtype=f16) * 0.1
    rounds.close(P.gemm_bm256_two_warpgroups()(A, B), _ref(A, B), 2e-2)


@pytest.mark.gpu
def test_gemm_kblock_scales_clear_accum_on_gpu():
    torch.manual_seed(8)
    A = torch.randn(96, 320, device="cuda", dtype=f16)
    B = torch.randn(128, 320, device="cuda", dtype=f16)
    s = torch.rand(5, device="cuda") + 0.5
    ref = sum(_ref(A[:, k * 64:(k + 1) * 64], B[:, k * 64:(k + 1) * 64].T) * s[k] for k in range(5))
    rounds.close(P.gemm_kblock_scales_clear_accum()(A, B, s), ref, 1e-3)


@pytest.mark.gpu
def test_streamk_pipelined_ragged_on_gpu():
    torch.manual_seed(9)
    A = torch.randn(200, 448, device="cuda", dtype=f16)
    B = torch.randn(192, 448, device="cuda", dtype=f16)
    C = torch.zeros(200, 192, device="cuda")
    P.streamk_pipelined_ragged()(A, B, C)
    rounds.close(C, _ref(A, B.T), 1e-3)


@pytest.mark.gpu
def test_streamk_hybrid_dp_tail_on_gpu():
    torch.manual_seed(14)
    A = torch.randn(96, 320, device="cuda", dtype=f16)
    B = torch.randn(384, 320, device="cuda", dtype=f16)
    C = torch.zeros(96, 384, device="cuda")
    P.streamk_hybrid_dp_tail()(A, B, C)
    rounds.close(C, _ref(A, B.T), 1e-3)


@pytest.mark.gpu
def test_grouped_gemm_dynamic_rows_on_gpu():
    torch.manual_seed(10)
    sizes = [70, 0, 131]
    offsets = torch.tensor([0, 70, 70, 201], dtype=torch.int32, device="cuda")
    A = torch.randn(sum(sizes), 192, device="cuda", dtype=f16)
    W = torch.randn(3, 128, 192, device="cuda", dtype=f16) * 0.1
    C = P.grouped_gemm_dynamic_rows()(A, W, offsets)
    ref = torch.cat([_ref(A[o:o + n], W[g].T) for g, (o, n) in enumerate(zip(offsets.tolist(), sizes))])
    rounds.close(C, ref, 2e-2)


@pytest.mark.gpu
def test_bmm_z_batch_transposed_out_on_gpu():
    torch.manual_seed(11)
    A = torch.randn(3, 100, 96, device="cuda", dtype=f16)
    B = torch.randn(3, 96, 72, device="cuda", dtype=f16) * 0.1
    rounds.close(P.bmm_z_batch_transposed_out()(A, B), (A.float() @ B.float()).transpose(1, 2), 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("name,M,N", [("gemm_swizzle_panel16_row", 1344, 320),
                                      ("gemm_swizzle_panel8_column", 320, 1088)])
def test_gemm_swizzle_panels_on_gpu(name, M, N):
    torch.manual_seed(12)
    A = torch.randn(M, 128, device="cuda", dtype=f16)
    B = torch.randn(N, 128, device="cuda", dtype=f16) * 0.1
    rounds.close(getattr(P, name)()(A, B), _ref(A, B.T), 2e-2)
