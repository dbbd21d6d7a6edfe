"""A thirteenth set of programs in TileLang's idioms (tests/unseen_programs13.py): warp
reductions, shared-memory words, ``T.ieee_sub`` modes, ``T.Unroll`` and a run-time
``T.serial`` step, negative floor-division / modulo index arithmetic, ragged
``T.Parallel`` extents and 1-D / 3-D / 4-D tails, odd thread counts, small-tile / int8 /
mixed-fp8 / stream-K / back-to-back / split-K-into-fp16 / batched GEMMs and fused
epilogues, normalizations and chunked reductions with ragged edges, reducers, macros with
scalar arguments, ``while`` walks, per-block roles, nested ``T.Pipelined``, cluster
launches over 3-D grids, shared -> shared copies, swizzle annotations, fills in every
scope, half / bf16 tile atomics, bit tricks, ``.astype``, promotion in min / max,
narrow integer arithmetic, fp8 e5m2 round trips, symbolic and strided arguments.
Each builds to an sm_90a cubin on the CPU; on a GPU each matches torch (or numpy) written
to TileLang's meaning."""

import numpy as np
import pytest

import tilecute

import unseen_programs13 as P

PROGRAMS = ['warp_reduce_family', 'warp_reduce_row_norms', 'shared_words', 'ieee_sub_modes',
            'unroll_alias_and_runtime_step', 'negative_index_arithmetic', 'parallel_extent_not_divisible',
            'elementwise_4d_tails', 'parallel_4d_loop', 'copy_3d_boundary', 'reduce_1d_tail_atomic',
            'softmax_single_warp_ragged', 'gemm_bm16_one_warp', 'gemm_bm32_transpose_a',
            'gemm_ragged_3_stages_swizzle', 'gemm_int8_both_transposed', 'gemm_int8_transpose_a_only',
            'gemm_fp8_mixed_formats', 'streamk_gemm', 'back_to_back_gemm', 'splitk_fp16_output_atomics',
            'batched_gemm_3d_grid_scaled', 'gemm_sigmoid_rowscale_bf16', 'layernorm_ragged_row',
            'rmsnorm_96_threads', 'column_stats_chunks_clear_false', 'reducer_ragged_rows',
            'shared_reduce_dim0_int', 'online_softmax_chunks', 'macro_scalar_args', 'collatz_while',
            'block_role_branches', 'nested_pipelined_heads', 'grid_3d_cluster', 'shared_to_shared_casts',
            'swizzled_transpose_annotated', 'fill_clear_every_scope', 'tile_atomics_half_bf16',
            'epilogue_fragment_shared_global_offset', 'float_bit_tricks', 'astype_and_casts',
            'nested_select_indices', 'mixed_minmax_promotion', 'int_ops_narrow_unsigned',
            'fp8_e5m2_roundtrip', 'dynamic_bias_tanh_gelu', 'strided_column_major_rowsum',
            'strided_row_slices']


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _funcs(name):
    f = getattr(P, name)()
    return f if isinstance(f, list) else [f]


def _src(func, arch="sm_90a"):
    return tilecute.compile(func, target=arch).get_kernel_source()


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name, tmp_path):
    for i, f in enumerate(_funcs(name)):
        info = tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / str(i)))
        assert info.kernel_names and (tmp_path / str(i) / "kernel.cubin").stat().st_size > 0


# ---- what the generated code says -------------------------------------------------------------
def test_a_run_time_serial_step_takes_tileLangs_trip_count():
    """``T.serial(start, n, St[0])``: TileLang (with a warning) runs ceildiv(n - start, step)
    iterations start + v * step; tilecute refused the run-time step."""
    src = _src(P.unroll_alias_and_runtime_step())
    assert "step = St[0]" in src
    assert "cutlass.range(0, (96 - (St[1] + (tx - tx // 4 * 4)) + step - 1) // step)" in src, src
    assert "i_1_ = St[1] + (tx - tx // 4 * 4) + i_iter_1_ * step" in src, src


def test_a_run_time_step_must_be_an_integer():
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"`X\[0\]` has dtype float32, expected an integer"):
        @T.prim_func
        def k(X: T.Tensor((8,), T.float32), Y: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.serial(0, 8, X[0]):
                    Y[0] = X[i]


def test_negative_index_arithmetic_keeps_floor_semantics():
    """Indices that go negative before ``%`` / ``//``: the modulo is printed as
    a - a // b * b (floor division), never C's ``%``."""
    src = _src(P.negative_index_arithmetic())
    assert "X[(i - 3) - (i - 3) // 8 * 8]" in src
    assert "I[i, 1] = (i - 5) - (i - 5) // 4 * 4" in src
    assert "tcmath.truncdiv(i - 5, 4)" in src
