"""A fourteenth set of programs in TileLang's idioms (tests/unseen_programs14.py): quantized
GEMMs (int8 -> int32 with ragged K, W8A8 dequantizing epilogues, fp8 e4m3 / e5m2 with
scales and an e4m3 output, fp4 e2m1 through a table and through bit operations, signed
int4 nibbles), grouped / MoE GEMMs, routing, count / scan / scatter, scans (ragged
columns, segmented, ``T.cummax``, two-level), sorting and top-k in a block, histograms,
im2col / depthwise convolution, pooling, padded and batched transposes, split-K by tile
atomics and by a workspace, GEMVs, batched GEMMs, hand-masked tails, ``T.dynamic`` /
``T.symbolic`` dims, bit packing, narrowing casts and floor operations, macros.
Each builds to an sm_90a cubin on the CPU; on a GPU each matches torch written to
TileLang's meaning."""

import numpy as np
import pytest

import tilecute

import unseen_programs14 as P

PROGRAMS = ['gemm_int8_ragged_k', 'gemm_int8_rowcol_dequant', 'gemm_fp8_e4m3_tensor_scales',
            'gemm_fp8_e5m2_channel_scales_e4m3_out', 'dequant_fp4_lut_gemm', 'dequant_fp4_bitops_gemm',
            'int4_signed_gemv_groups', 'gemv_int8_dynamic_quant', 'moe_grouped_gemm_offsets',
            'moe_gather_scatter_gemm', 'top2_router_softmax', 'moe_count_scan_scatter', 'cumsum_columns_ragged',
            'segmented_cumsum_scans', 'cummax_fragment_and_reverse', 'block_scan_two_level',
            'bitonic_argsort_desc', 'topk_insertion_per_thread', 'stable_rank_sort', 'histogram_float_bins',
            'histogram_joint_weighted', 'conv2d_nhwc_im2col_ktail', 'depthwise_conv2d_nchw_stride2',
            'avgpool2d_exclude_padding', 'maxpool_nhwc_with_indices', 'global_avgpool_nhwc',
            'transpose_into_padded', 'batched_transpose_fp16', 'splitk_tile_atomic_ragged',
            'splitk_workspace_reduce', 'gemv_fp16_ktail_fragment', 'gemv_transposed_atomic',
            'batched_gemm_middle_batch_dim', 'batched_gemm_broadcast_b_transposed_out', 'gemm_hand_masked_tails',
            'jit_dynamic_softmax_rows_kernel', 'symbolic_rows_cumsum', 'jit_dynamic_k_gemv_kernel',
            'pack_unpack_int8x4', 'narrow_casts_and_floor_ops', 'macro_quant_dequant_error']


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
        if hasattr(f, "ensure_cubin"):  # a compiled @tilecute.jit kernel
            assert f.ensure_cubin()
            continue
        info = tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / str(i)))
        assert info.kernel_names and (tmp_path / str(i) / "kernel.cubin").stat().st_size > 0
