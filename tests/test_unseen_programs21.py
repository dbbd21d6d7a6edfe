"""A twenty-first set of programs in TileLang's idioms (tests/unseen_programs21.py), about
the host boundary: dynamic dims in the batch, sequence and hidden positions, symbols shared
between tensors, dims that are expressions of symbols, scalar arguments in bounds and
arithmetic, int8 / uint8 / int64 / bool / float64 / bfloat16 / float8 tensors, strided
parameters fed by torch views, 0-size dims, several outputs by negative ``out_idx`` and
outputs sized by expressions or by an input's stride.

CPU: each builds to an sm_90a and an sm_80 cubin; the generated CuTe DSL and C++ launcher
say what each program means; every launcher is called with wrong arguments (dtype, rank,
fixed dim, disagreeing symbols, a non-contiguous tensor, a CPU tensor) and raises an error
naming the kernel and the argument (the value checks run before the device check, so CPU
tensors reach them; memory-less "CUDA" FakeTensors reach the grid checks).  GPU: each
matches a torch reference."""

import re

import pytest
import torch

import tilecute
from fake_cuda import FakeTensor, raises

import rounds
import unseen_programs21 as P

PROGRAMS = ["affine_rows_scalars", "rmsnorm_bsh_dynamic", "bias_gelu_shared_symbol",
            "concat_cols_expr_shape", "group_quads_floordiv", "row_window_scalar_bounds",
            "int8_rowsum_dyn", "uint8_xor_key", "int64_index_gather_rows", "bool_mask_where_count",
            "float64_axpby_scalars", "fp8_rows_dequant_bf16", "fp8_e5m2_to_half_scale",
            "strided_rows_slice_scale", "colmajor_input_colsum", "static_strides_every_other_row",
            "gemm_dynamic_tokens_bf16", "gemm_dynamic_k_tail", "bmm_dynamic_batch_rows",
            "layernorm_stats_three_outputs", "argmax_rows_int64_out", "pad_rows_output_plus_one",
            "pairs_to_interleaved", "int64_offset_scalar_flag", "scalar_stride_flat_view",
            "blocks_from_scalar_grid", "gemm_strided_a_panel", "dense_copy_keeps_pitch",
            "groups_of_four_input", "seq_mean_tuple_symbols", "isfinite_bool_out",
            "add_broadcast_bias_view", "kv_prefix_dot_shared_stride", "square_symmetrize",
            "narrow_scalar_params", "gemm_k_tiles_scalar", "swiglu_fused_halves"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


def _launcher(name, **kw):
    return getattr(P, name)(**kw).get_source("launcher")


def _z(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


CPU = "expected a CUDA tensor, got cpu"  # every value check passed


test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


FP8 = ["fp8_rows_dequant_bf16", "fp8_e5m2_to_half_scale"]


test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    [n for n in PROGRAMS if n not in FP8], rounds.tir_of(P), "sm_80")


@pytest.mark.parametrize("name", FP8)
def test_fp8_casts_are_refused_on_sm80_by_name(name, tmp_path):
    from tilecute.codegen.source import CodegenError

    with pytest.raises(CodegenError, match=r"a cast from float8_e\dm\d to float32: float8 values "
                                           r"convert only on sm_89\+ .*the target is sm_80"):
        tilecute.build_cubin(getattr(P, name).get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- what the generated source and launcher say --------------------------------------------
def test_scalars_reach_the_kernel_with_their_types():
    src = _src("affine_rows_scalars")
    assert "alpha: cutlass.Float32, beta: cutlass.Float32, n_valid: cutlass.Int32" in src
    assert "if r < M and c < N:" in src and "cutlass.select_(c < n_valid, alpha * tc_ld3 + beta" in src
    cpp = _launcher("affine_rows_scalars")
    assert 'tc_int_arg(args[3], "n_valid", "int32"' in cpp and 'tc_float_arg(args[1], "alpha")' in cpp
    src = _src("int64_offset_scalar_flag")
    assert "offset: cutlass.Int64, doubled: cutlass.Boolean" in src
    assert "cutlass.select_(doubled, cutlass.Float32(2.0), cutlass.Float32(1.0))" in src
    cpp = _launcher("int64_offset_scalar_flag")
    assert '"offset", "int64", INT64_MIN, INT64_MAX' in cpp and 'tc_bool_arg(args[2], "doubled")' in cpp
    src = _src("float64_axpby_scalars")
    assert "a: cutlass.Float64, b: cutlass.Float64" in src and "stride=(33, 1,)" in src
    # a scalar grid: the launcher computes it from the argument and checks it
    cpp = _launcher("blocks_from_scalar_grid")
    assert "k0_grid_x = arg_num_blocks" in cpp.replace("static_cast<int64_t>(arg_num_blocks)", "arg_num_blocks")


def test_half_and_narrow_int_scalars_reach_the_kernel():
    # T.float16 / T.bfloat16 scalar parameters (TileLang casts the Python float; was a
    # LoweringError "scalar parameters may be ...")
    src = _src("narrow_scalar_params")
    assert "h: cutlass.Float16, g: cutlass.BFloat16, shift: cutlass.Uint8, bias: cutlass.Int8" in src
    cpp = _launcher("narrow_scalar_params")
    assert "uint16_t k0_h = tc_float16_bits(static_cast<double>(arg_h));" in cpp
    assert "uint16_t k0_g = tc_bfloat16_bits(static_cast<double>(arg_g));" in cpp
    assert 'tc_int_arg(args[3], "shift", "uint8", INT64_C(0), INT64_C(255))' in cpp


def test_one_symbol_names_both_dims_of_a_square_tensor():
    cpp = _launcher("square_symmetrize")
    assert 'tc_check_symbol(t_X->shape[1], sym_N, "X", "shape[1]", "N", "argument \'X\' shape[0]")' in cpp
    src = _src("square_symmetrize")
    assert "mirror[j * 32 + (i ^ (j & 31))]" in src  # the transposed read of a swizzled tile
    assert "cute.arch.sync_threads()" in src.split("mirror[i3 * 32")[1].split("Y[r, c]")[0]


def test_symbols_bind_once_and_are_checked_everywhere_else():
    cpp = _launcher("bias_gelu_shared_symbol")
    assert cpp.count("tc_bind_symbol(") == 2  # M and N, from X
    assert 'tc_check_symbol(t_bias->shape[0], sym_N, "bias", "shape[0]", "N", "argument \'X\' shape[1]")' in cpp
    assert 'tc_check_symbol(t_gate->shape[0], sym_M, "gate"' in cpp
    cpp = _launcher("rmsnorm_bsh_dynamic")
    assert [m for m in re.findall(r'tc_bind_symbol\(t_X->shape\[(\d)\]', cpp)] == ["0", "1", "2"]
    src = _src("rmsnorm_bsh_dynamic")
    assert "stride=(hidden * seq, hidden, 1,)" in src and "if h < hidden:" in src
    src = _src("seq_mean_tuple_symbols")  # T.dynamic("batch, seq") makes both
    assert "batch: cutlass.Int32, seq: cutlass.Int32" in src and "if k * 32 + i < seq:" in src


def test_expression_dims_are_checked_and_computed():
    cpp = _launcher("concat_cols_expr_shape")
    assert 'tc_check_dim_expr(t_Out->shape[1], (sym_N * INT64_C(2)), "Out", "shape[1]", "N * 2")' in cpp
    src = _src("concat_cols_expr_shape")
    assert "cute.make_layout((M, N * 2,), stride=(N * 2, 1,))" in src and "Out[r, c + N]" in src
    cpp = _launcher("group_quads_floordiv")
    assert 'tc_floordiv(sym_L, INT64_C(4)), "Y", "shape[0]", "L // 4"' in cpp
    cpp = _launcher("groups_of_four_input")
    assert 'tc_check_dim_expr(t_G->shape[0], tc_floordiv(sym_L, INT64_C(4)), "G"' in cpp
    cpp = _launcher("pad_rows_output_plus_one")
    assert '(sym_M + INT64_C(1)), "Out", "shape[0]", "M + 1"' in cpp
    src = _src("pad_rows_output_plus_one")
    assert "if not r == 0 and r - 1 >= 0:" in src  # the shifted read never reads row -1


def test_strided_parameters_bind_their_strides():
    cpp = _launcher("strided_rows_slice_scale")
    assert 'tc_bind_symbol(strides_X[0], "X", "strides[0]", "ld", 1)' in cpp
    assert 'tc_check_static_stride(strides_X[1], 1, "X", "strides[1]", t_X->shape[1])' in cpp
    assert "stride=(ld, 1,)" in _src("strided_rows_slice_scale")
    cpp = _launcher("colmajor_input_colsum")
    assert 'tc_check_static_stride(strides_A[0], 1, "A", "strides[0]", t_A->shape[0])' in cpp
    assert "stride=(1, ld,)" in _src("colmajor_input_colsum")
    cpp = _launcher("static_strides_every_other_row")
    assert 'tc_check_static_stride(strides_X[0], 96, "X", "strides[0]"' in cpp
    # a strided A of run-time row stride is read by thread copies, not TMA; B keeps TMA
    src = _src("gemm_strided_a_panel")
    assert "A_desc" not in src and "B_desc" in src and "stride=(lda, 1,)" in src
    cpp = _launcher("dense_copy_keeps_pitch")
    assert 'tc_check_symbol(t_Y->shape[1], sym_ld, "Y", "shape[1]", "ld", "argument \'X\' strides[0]")' in cpp


def test_a_shared_stride_symbol_is_checked_as_tilelang_relaxes_it():
    cpp = _launcher("kv_prefix_dot_shared_stride")
    assert 'tc_bind_symbol(strides_K[0], "K", "strides[0]", "sb", 1)' in cpp
    # V's batch stride against K's: any stride passes where V's batch is 1 or sb is 0
    assert ('tc_check_stride_symbol(strides_V[0], sym_sb, "V", "strides[0]", "sb", '
            '"argument \'K\' strides[0]", t_V->shape[0])') in cpp
    kernel = P.kv_prefix_dot_shared_stride()
    kc, vc = _z(3, 40, 64, dtype=torch.float16), _z(3, 40, 64, dtype=torch.float16)
    raises(ValueError, ["kv_dot: argument 'K': " + CPU], kernel, kc[:, :7], vc[:, :7])
    raises(ValueError, ["kv_dot: argument 'V': expected strides[0] == sb = 2560 (from argument 'K' "
                        "strides[0]), got 448"], kernel, kc[:, :7], vc[:, :7].contiguous())
    # a batch of 1: V's batch stride never moves the address, so it may differ
    raises(ValueError, ["kv_dot: argument 'K': " + CPU], kernel, kc[:1, :7], vc[:1, :7].contiguous())
    raises(ValueError, ["kv_dot: argument 'K': expected strides[1] == 64, got 128"], kernel,
           _z(3, 40, 128, dtype=torch.float16)[:, :7, :64], vc[:, :7])
    src = _src("kv_prefix_dot_shared_stride")
    assert "stride=(sb, 64, 1,)" in src


def test_a_stride_named_by_a_shape_symbol_passes_on_extent_one_and_zero():
    import tilecute.language as T

    M, N = T.dynamic("M N")

    @T.prim_func
    def rows_of_n(X: T.StridedTensor((M, N), (N, 1), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=32) as r:
            for j in T.serial(N):
                Y[r, j] = X[r, j]

    kernel = tilecute.compile(rows_of_n)
    assert "tc_check_stride_symbol(strides_X[0], sym_N" in kernel.get_source("launcher")
    raises(ValueError, ["rows_of_n: argument 'X': expected strides[0] == N = 7 (from argument 'X' "
                        "shape[1]), got 8"], kernel, _z(3, 8)[:, :7], _z(3, 7))
    raises(ValueError, [CPU], kernel, _z(1, 8)[:, :7], _z(1, 7))  # one row: any stride
    raises(ValueError, [CPU], kernel, _z(4, 80)[:, :0], _z(4, 0))  # N = 0: any stride


def test_one_name_is_one_symbol():
    import tilecute.language as T
    from tilecute.language import FrontendError

    # two T.dynamic("n") objects are one symbol n (TileLang: two, n and n_1): the launcher
    # checks B against A
    @T.prim_func
    def pair(A: T.Tensor((T.dynamic("n"),), T.float32), B: T.Tensor((T.dynamic("n"),), T.float32)):
        with T.Kernel(1, threads=32):
            A[0] = B[0]

    raises(ValueError, ["pair: argument 'B': expected shape[0] == n = 4 (from argument 'A' "
                        "shape[0]), got 5"], tilecute.compile(pair), _z(4), _z(5))
    # ... and two of one name that differ are refused naming them (were merged silently:
    # B's int64 dim bound as A's int32)
    with pytest.raises(FrontendError, match=r"two symbols named 'n' differ \(int32, multiple_of=1 "
                                            r"and int64, multiple_of=1\)"):
        @T.prim_func
        def mixed(A: T.Tensor((T.dynamic("n"),), T.float32),
                  B: T.Tensor((T.dynamic("n", "int64"),), T.float32)):
            with T.Kernel(1, threads=32):
                A[0] = B[0]


def test_a_static_zero_stride_is_refused_by_name():
    from tilecute.language import FrontendError

    with pytest.raises(FrontendError, match=r"'Bias': a static stride of 0 \(strides\[0\]\) is not "
                                            r"supported"):
        P.add_broadcast_bias_view(static_zero=True)


def test_dtypes_of_the_tensors():
    assert "cutlass.Float32(Q[r, c]) * scale[r]" in _src("fp8_rows_dequant_bf16")
    assert 'tc_check_dtype(t_Q, "Q", 10, 8, "float8_e4m3")' in _launcher("fp8_rows_dequant_bf16")
    assert 'tc_check_dtype(t_Q, "Q", 12, 8, "float8_e5m2")' in _launcher("fp8_e5m2_to_half_scale")
    src = _src("uint8_xor_key")
    assert "cutlass.Uint8(key + i & 255)" in src and "v >> cutlass.Uint8(5)" in src
    src = _src("int64_index_gather_rows")
    assert "row >= cutlass.Int64(0) and row < cutlass.Int64(V)" in src
    assert 'tc_check_dtype(t_idx, "idx", 0, 64, "int64")' in _launcher("int64_index_gather_rows")
    assert "(mask[i] != 0)" in _src("bool_mask_where_count")
    assert 'tc_check_dtype_bool(t_mask, "mask")' in _launcher("bool_mask_where_count")
    assert "ok[i] = cutlass.Uint8(cutlass.Boolean(cute.math.isfinite(v)))" in _src("isfinite_bool_out")
    assert "at[0] = cutlass.Int64(c)" in _src("argmax_rows_int64_out")


def test_dynamic_gemms_guard_their_tails():
    src = _src("gemm_dynamic_k_tail")
    assert "for ko in cutlass.range(0, (K + 32 - 1) // 32):" in src
    assert "ko * 32 + i4 < K" in src and "if ko * 32 + i5 < K and bx1 * 64 + i6 < N:" in src
    assert "if by1 * 64 + i7 < M and bx1 * 64 + (i8 + tc_lane10) < N:" in src
    src = _src("gemm_dynamic_tokens_bf16")
    assert "tct.load(A_desc" in src and "tct.store(C_desc" in src  # TMA clips the token tail
    src = _src("gemm_k_tiles_scalar")  # a run-time trip count from a scalar, in both warpgroups
    assert src.count("cutlass.range(0, cutlass.min(k_tiles, 8))") == 2
    src = _src("bmm_dynamic_batch_rows")
    assert "tct.load(A_desc, tc_smem + 0, tc_bar0, (0, bx1 * 64, b1)" in src  # rank-3 box: rows clip per batch


# ---- the launchers' argument checks (CPU tensors reach every value check) -------------------
BAD_CALLS = {
    "affine_rows_scalars": [
        ((_z(5, 7), 1.0, 0.0, 3), ValueError, CPU),
        ((_z(5, 7).double(), 1.0, 0.0, 3), ValueError, "affine: argument 'X': expected dtype float32, got float64"),
        ((_z(5, 7), "1", 0.0, 3), TypeError, "affine: argument 'alpha': expected a float, got str"),
        ((_z(5, 7), 1.0, 0.0, 2.5), TypeError, "affine: argument 'n_valid': expected an int, got float"),
        ((_z(5, 7), 1.0, 0.0, 2 ** 31), ValueError, "affine: argument 'n_valid': expected a value that fits int32"),
        ((_z(5, 7).t(), 1.0, 0.0, 3), ValueError, "affine: argument 'X': expected a contiguous (row-major) tensor"),
        ((_z(5), 1.0, 0.0, 3), ValueError, "affine: argument 'X': expected rank 2, got rank 1"),
    ],
    "bias_gelu_shared_symbol": [
        ((_z(4, 6, dtype=torch.float16), _z(6, dtype=torch.float16), _z(4, 6, dtype=torch.float16)), ValueError, CPU),
        ((_z(4, 6, dtype=torch.float16), _z(5, dtype=torch.float16), _z(4, 6, dtype=torch.float16)), ValueError,
         "bias_gelu: argument 'bias': expected shape[0] == N = 6 (from argument 'X' shape[1]), got 5"),
        ((_z(4, 6, dtype=torch.float16), _z(6, dtype=torch.float16), _z(3, 6, dtype=torch.float16)), ValueError,
         "bias_gelu: argument 'gate': expected shape[0] == M = 4 (from argument 'X' shape[0]), got 3"),
        ((_z(4, 6, dtype=torch.float16), _z(6, dtype=torch.bfloat16), _z(4, 6, dtype=torch.float16)), ValueError,
         "bias_gelu: argument 'bias': expected dtype float16, got bfloat16"),
    ],
    "rmsnorm_bsh_dynamic": [
        ((_z(2, 3, 5, dtype=torch.bfloat16),), ValueError, CPU),
        ((_z(3, 5, dtype=torch.bfloat16),), ValueError, "rms: argument 'X': expected rank 3, got rank 2 (shape [3, 5])"),
        ((_z(2, 3, 5, dtype=torch.bfloat16).transpose(0, 1),), ValueError,
         "rms: argument 'X': expected a contiguous (row-major) tensor, got shape [3, 2, 5] with strides [5, 15, 1]"),
    ],
    "concat_cols_expr_shape": [
        ((_z(4, 3), _z(4, 3)), ValueError, CPU),
        ((_z(4, 3), _z(4, 2)), ValueError, "concat: argument 'B': expected shape[1] == N = 3 (from argument 'A' shape[1]), got 2"),
    ],
    "group_quads_floordiv": [
        ((_z(10, dtype=torch.int32),), ValueError, CPU),
        ((_z(10, dtype=torch.int64),), ValueError, "quads: argument 'X': expected dtype int32, got int64"),
    ],
    "groups_of_four_input": [
        ((_z(9), _z(2, 4)), ValueError, CPU),
        ((_z(9), _z(3, 4)), ValueError, "grouped: argument 'G': expected shape[0] == L // 4 = 2, got 3"),
        ((_z(9), _z(2, 5)), ValueError, "grouped: argument 'G': expected shape[1] == 4, got 5"),
    ],
    "row_window_scalar_bounds": [
        ((_z(4, 96, dtype=torch.float16), 1, 2), ValueError, CPU),
        ((_z(4, 95, dtype=torch.float16), 1, 2), ValueError, "window: argument 'X': expected shape[1] == 96, got 95"),
        ((_z(4, 96, dtype=torch.float16), torch.tensor(1), 2), TypeError, "window: argument 'start': expected an int, got tensor"),
    ],
    "int8_rowsum_dyn": [
        ((_z(3, 70, dtype=torch.int8),), ValueError, CPU),
        ((_z(3, 0, dtype=torch.int8),), ValueError, CPU),  # K = 0: a row of nothing sums to 0
        ((_z(3, 70, dtype=torch.uint8),), ValueError, "rowsum: argument 'X': expected dtype int8, got uint8"),
    ],
    "uint8_xor_key": [
        ((_z(9, dtype=torch.uint8), 7), ValueError, CPU),
        ((_z(9, dtype=torch.int8), 7), ValueError, "xor_key: argument 'X': expected dtype uint8, got int8"),
        ((_z(9, dtype=torch.uint8), None), TypeError, "xor_key: argument 'key': expected an int, got None"),
    ],
    "int64_index_gather_rows": [
        ((_z(10, 64), _z(3, dtype=torch.int64), 2.0), ValueError, CPU),
        ((_z(10, 64), _z(3, dtype=torch.int32), 2.0), ValueError, "gather: argument 'idx': expected dtype int64, got int32"),
        ((_z(10, 32), _z(3, dtype=torch.int64), 2.0), ValueError, "gather: argument 'Table': expected shape[1] == 64, got 32"),
    ],
    "bool_mask_where_count": [
        ((_z(9), _z(9, dtype=torch.bool), 0.5), ValueError, CPU),
        ((_z(9), _z(9, dtype=torch.uint8), 0.5), ValueError, CPU),  # TileLang binds a byte tensor as bool
        ((_z(9), _z(9, dtype=torch.int8), 0.5), ValueError, CPU),
        ((_z(9), _z(9), 0.5), ValueError,
         "where: argument 'mask': expected dtype bool (or an 8-bit integer tensor: int8, uint8), got float32"),
        ((_z(9), _z(9, dtype=torch.int16), 0.5), ValueError, "where: argument 'mask': expected dtype bool"),
        ((_z(9), _z(8, dtype=torch.bool), 0.5), ValueError,
         "where: argument 'mask': expected shape[0] == N = 9 (from argument 'X' shape[0]), got 8"),
    ],
    "float64_axpby_scalars": [
        ((_z(2, 33, dtype=torch.float64), _z(2, 33, dtype=torch.float64), 1.0, 2), ValueError, CPU),  # an int for a float
        ((_z(2, 33, dtype=torch.float64), _z(2, 33), 1.0, 2.0), ValueError, "axpby: argument 'Y': expected dtype float64, got float32"),
        ((_z(2, 33, dtype=torch.float64), _z(2, 33, dtype=torch.float64), True, 2.0), TypeError,
         "axpby: argument 'a': expected a float, got bool"),
    ],
    "fp8_rows_dequant_bf16": [
        ((_z(3, 5).to(torch.float8_e4m3fn), _z(3)), ValueError, CPU),
        ((_z(3, 5).to(torch.float8_e5m2), _z(3)), ValueError, "deq: argument 'Q': expected dtype float8_e4m3, got float8_e5m2"),
        ((_z(3, 5, dtype=torch.uint8), _z(3)), ValueError, "deq: argument 'Q': expected dtype float8_e4m3, got uint8"),
        # torch's float8_e4m3fnuz (another exponent bias; TileLang's binder lets it through)
        ((_z(3, 5).to(torch.float8_e4m3fnuz), _z(3)), ValueError,
         "deq: argument 'Q': expected dtype float8_e4m3, got float8_e4m3fnuz"),
    ],
    "fp8_e5m2_to_half_scale": [
        ((_z(5).to(torch.float8_e5m2), 1.0), ValueError, CPU),
        ((_z(5).to(torch.float8_e4m3fn), 1.0), ValueError, "up: argument 'Q': expected dtype float8_e5m2, got float8_e4m3"),
    ],
    "strided_rows_slice_scale": [
        ((_z(10, 80, dtype=torch.float16)[:, :70], 2.0), ValueError, CPU),
        ((_z(10, 80, dtype=torch.float16)[:, 1:71], 2.0), ValueError, CPU),
        ((_z(10, 80, dtype=torch.float16).t(), 2.0), ValueError, "scale_view: argument 'X': expected strides[1] == 1, got 80"),
        ((_z(10, 80, dtype=torch.float16)[:, ::2], 2.0), ValueError, "scale_view: argument 'X': expected strides[1] == 1, got 2"),
    ],
    "colmajor_input_colsum": [
        ((_z(7, 9).t(),), ValueError, CPU),
        ((_z(9, 7),), ValueError, "colsum: argument 'A': expected strides[0] == 1, got 7"),
    ],
    "static_strides_every_other_row": [
        ((_z(128, 48)[::2],), ValueError, CPU),
        ((_z(64, 48),), ValueError, "even_rows: argument 'X': expected strides[0] == 96, got 48"),
        ((_z(128, 48)[1::2],), ValueError, CPU),  # a storage offset: the data pointer moves
    ],
    "gemm_dynamic_tokens_bf16": [
        ((_z(70, 128, dtype=torch.bfloat16), _z(256, 128, dtype=torch.bfloat16)), ValueError, CPU),
        ((_z(70, 128, dtype=torch.bfloat16), _z(128, 256, dtype=torch.bfloat16)), ValueError,
         "linear: argument 'W': expected shape[0] == 256, got 128"),
        ((_z(70, 128, dtype=torch.float16), _z(256, 128, dtype=torch.bfloat16)), ValueError,
         "linear: argument 'A': expected dtype bfloat16, got float16"),
    ],
    "gemm_dynamic_k_tail": [
        ((_z(70, 45, dtype=torch.float16), _z(45, 33, dtype=torch.float16)), ValueError, CPU),
        ((_z(70, 45, dtype=torch.float16), _z(44, 33, dtype=torch.float16)), ValueError,
         "mm: argument 'B': expected shape[0] == K = 45 (from argument 'A' shape[1]), got 44"),
    ],
    "bmm_dynamic_batch_rows": [
        ((_z(3, 70, 64, dtype=torch.float16), _z(3, 64, 64, dtype=torch.float16)), ValueError, CPU),
        ((_z(3, 70, 64, dtype=torch.float16), _z(2, 64, 64, dtype=torch.float16)), ValueError,
         "bmm: argument 'B': expected shape[0] == batch = 3 (from argument 'A' shape[0]), got 2"),
    ],
    "scalar_stride_flat_view": [
        ((_z(100, dtype=torch.float16), 10, _z(5, 7, dtype=torch.float16)), ValueError, CPU),
        ((_z(100, dtype=torch.float16), 10, _z(5, 7, dtype=torch.float16).t()), ValueError,
         "pitch: argument 'Y': expected a contiguous (row-major) tensor"),
    ],
    "add_broadcast_bias_view": [
        ((_z(5, 9), _z(9).expand(5, 9)), ValueError, CPU),  # a row stride of 0 binds rs = 0
        ((_z(5, 9), _z(9, 5).t()), ValueError, "add_bias: argument 'Bias': expected strides[1] == 1, got 5"),
        ((_z(5, 9), _z(5, 8)), ValueError, "add_bias: argument 'Bias': expected shape[1] == N = 9"),
    ],
    "square_symmetrize": [
        ((_z(5, 5),), ValueError, CPU),
        ((_z(4, 5),), ValueError, "symmetrize: argument 'X': expected shape[1] == N = 4 (from argument 'X' shape[0]), got 5"),
    ],
    "narrow_scalar_params": [
        ((_z(9), 0.5, -1.25, 3, -7), ValueError, CPU),
        ((_z(9), 0.5, -1.25, 256, -7), ValueError, "narrow: argument 'shift': expected a value that fits uint8, got 256"),
        ((_z(9), 0.5, -1.25, 3, -129), ValueError, "narrow: argument 'bias': expected a value that fits int8, got -129"),
        ((_z(9), "0.5", -1.25, 3, 1), TypeError, "narrow: argument 'h': expected a float, got str"),
    ],
    "swiglu_fused_halves": [
        ((_z(5, 20, dtype=torch.bfloat16)[:, :10], _z(5, 20, dtype=torch.bfloat16)[:, 10:]), ValueError, CPU),
        # one row: its stride never moves the address, any passes (TileLang's relaxation)
        ((_z(1, 20, dtype=torch.bfloat16)[:, :10], _z(1, 10, dtype=torch.bfloat16)), ValueError, CPU),
        ((_z(5, 20, dtype=torch.bfloat16)[:, :10], _z(5, 10, dtype=torch.bfloat16)), ValueError,
         "swiglu: argument 'U': expected strides[0] == N * 2 = 20, got 10"),
        ((_z(5, 20, dtype=torch.bfloat16)[:, :9], _z(5, 20, dtype=torch.bfloat16)[:, 10:19]), ValueError,
         "swiglu: argument 'G': expected strides[0] == N * 2 = 18, got 20"),
    ],
    "int64_offset_scalar_flag": [
        ((_z(10), 2, True, _z(5)), ValueError, CPU),
        ((_z(10), 2 ** 40, 1, _z(5)), ValueError, CPU),  # an int64 offset; an int for a bool
        ((_z(10), 2, "yes", _z(5)), TypeError, "offs: argument 'doubled': expected a bool, got str"),
    ],
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_launcher_refuses_bad_arguments_by_name(name):
    kernel = getattr(P, name)()
    for args, exc, text in BAD_CALLS[name]:
        raises(exc, [text], kernel, *args)


def _plain(name):
    """The program compiled without out_idx (memory-less FakeTensors cannot be outputs)."""
    return tilecute.compile(getattr(P, name).get_tir())


def test_scalar_grid_is_checked_before_the_driver():
    kernel = _plain("blocks_from_scalar_grid")
    x = FakeTensor((100,))
    raises(ValueError, ["stamp: kernel '", "grid (0, 1, 1) has an empty dimension"], kernel, 0, 1.0, x, x)
    raises(ValueError, ["stamp: kernel '", "grid (-1, 1, 1)"], kernel, -1, 1.0, x, x)
    raises(RuntimeError, ["stamp: no CUDA driver"], kernel, 2, 1.0, x, x)  # every check passed


def test_zero_size_dims_reach_the_grid_check():
    # a dynamic row count of 0: the grid along y is empty, which the launcher names
    raises(ValueError, ["affine: kernel '", "grid (1, 0, 1) has an empty dimension"],
           _plain("affine_rows_scalars"), FakeTensor((0, 7)), 1.0, 0.0, 3, FakeTensor((0, 7)))
    # a 0-size reduction dim with a non-empty grid passes every check
    raises(RuntimeError, ["rowsum: no CUDA driver"], _plain("int8_rowsum_dyn"),
           FakeTensor((3, 0), "int8"), FakeTensor((3,), "int32"))


def test_a_null_data_pointer_is_refused_unless_the_tensor_is_empty():
    kernel = _plain("int8_rowsum_dyn")
    raises(ValueError, ["rowsum: argument 'X': the data pointer is NULL, but the tensor has elements "
                        "(shape [3, 5])"], kernel, FakeTensor((3, 5), "int8", data=0), FakeTensor((3,), "int32"))
    raises(RuntimeError, ["rowsum: no CUDA driver"], kernel, FakeTensor((3, 0), "int8", data=0),
           FakeTensor((3,), "int32"))


def test_an_offset_tensor_takes_the_general_variant():
    # K % 8 == 0 picks the aligned variant (16-byte vector / TMA loads); a contiguous A at a
    # 2-byte storage offset now takes the general one (was the aligned launcher's alignment
    # error)
    kernel = P.gemm_dynamic_k_tail()
    assert kernel.pointer_checks() == [(0, 16), (1, 16)]
    a = _z(64 * 64 + 1, dtype=torch.float16)[1:].view(64, 64)
    b = _z(64, 64, dtype=torch.float16)
    assert kernel.pick((a, b)) is kernel.general
    assert kernel.pick((_z(64, 64, dtype=torch.float16), b)) is kernel.aligned
    raises(ValueError, ["mm: argument 'A': " + CPU], kernel, a, b)
    assert kernel.pick((_z(64, 60, dtype=torch.float16), _z(60, 64, dtype=torch.float16))) is kernel.general
    # K = 0 meets "K % 8 == 0" but TMA takes no empty extent: the general variant (was the
    # aligned launcher's "TMA needs every extent in [1, 2^32]")
    empty_a, empty_b = _z(70, 0, dtype=torch.float16), _z(0, 40, dtype=torch.float16)
    assert kernel.pick((empty_a, empty_b)) is kernel.general
    raises(ValueError, ["TMA needs every extent in [1, 2^32], got shape [70, 0]"], kernel.aligned,
           empty_a, empty_b)
    raises(ValueError, ["mm: argument 'A': " + CPU], kernel, empty_a, empty_b)


def test_bool_argument_takes_byte_tensors_as_tilelang_does():
    kernel = _plain("bool_mask_where_count")
    x = FakeTensor((9,))
    for dt in ("bool", "uint8", "int8"):
        raises(RuntimeError, ["where: no CUDA driver"], kernel, x, FakeTensor((9,), dt), 0.5,
               x, FakeTensor((1,), "int32"))
    raises(ValueError, ["where: argument 'mask': expected dtype bool"], kernel, x,
           FakeTensor((9,), "int32"), 0.5, x, FakeTensor((1,), "int32"))


def test_outputs_are_sized_from_symbols_expressions_and_strides():
    shapes = lambda k, ins: [(tuple(o.shape), o.dtype) for o in k.allocate_outputs(ins)]  # noqa: E731
    assert shapes(P.concat_cols_expr_shape(), [_z(4, 3), _z(4, 3)]) == [((4, 6), torch.float32)]
    assert shapes(P.group_quads_floordiv(), [_z(10, dtype=torch.int32)]) == [((2,), torch.int32)]
    assert shapes(P.pad_rows_output_plus_one(), [_z(3, 5), 1.0]) == [((4, 5), torch.float32)]
    assert shapes(P.pairs_to_interleaved(), [_z(2, 5, dtype=torch.int32)]) == [((10,), torch.int32)]
    assert shapes(P.layernorm_stats_three_outputs(), [_z(5, 256, dtype=torch.float16)]) == \
        [((5, 256), torch.float16), ((5,), torch.float32), ((5,), torch.float32)]
    assert shapes(P.bool_mask_where_count(), [_z(9), _z(9, dtype=torch.bool), 0.0]) == \
        [((9,), torch.float32), ((1,), torch.int32)]
    assert shapes(P.isfinite_bool_out(), [_z(9, dtype=torch.bfloat16)]) == \
        [((9,), torch.bool), ((9,), torch.int32)]
    assert shapes(P.argmax_rows_int64_out(), [_z(3, 4)]) == [((3,), torch.float32), ((3,), torch.int64)]
    # the output (M, ld) takes ld from the input's row stride (was: "no input binds 'ld'")
    assert shapes(P.dense_copy_keeps_pitch(), [_z(5, 12)[:, :7]]) == [((5, 12), torch.float32)]
    raises(ValueError, ["keep_pitch: argument 'X': " + CPU], P.dense_copy_keeps_pitch(), _z(5, 12)[:, :7])


def test_outputs_return_in_out_idx_order():
    # TileLang returns [tensors[i] for i in out_idx]: out_idx=[4, 3] gives (count, Y) (was
    # sorted: (Y, count), silently swapped)
    func = P.bool_mask_where_count.get_tir()
    for out_idx, want in (([4, 3], [(1,), (9,)]), ([-2, -1], [(9,), (1,)]), ([-1, 3], [(1,), (9,)])):
        kernel = tilecute.compile(func, out_idx=out_idx)
        assert kernel.out_idx == [3, 4]  # parameter order, for the arguments
        with pytest.raises(ValueError, match="where: argument 'X': " + CPU):
            kernel(_z(9), _z(9, dtype=torch.bool), 0.0)
    kernel = tilecute.compile(func, out_idx=[4, 3])
    assert kernel._return_order == [1, 0] and kernel.out_order == [4, 3]
    # allocate_outputs (torch.register's fake kernel) in the call's order too
    assert [tuple(o.shape) for o in kernel.allocate_outputs([_z(9), _z(9, dtype=torch.bool), 0.0])] == \
        [(1,), (9,)]
    assert tilecute.compile(func, out_idx=[3, 4])._return_order is None
    # the call's return (the launch itself replaced: no GPU here)
    seen = []
    kernel._call = lambda *full: seen.append([tuple(t.shape) for t in full if hasattr(t, "shape")])
    count, y = kernel(_z(9), _z(9, dtype=torch.bool), 0.0)
    assert tuple(count.shape) == (1,) and tuple(y.shape) == (9,)
    assert seen == [[(9,), (9,), (9,), (1,)]]  # the launcher still gets parameter order


def test_a_callers_output_is_checked_against_its_expression_dims():
    concat = _plain("concat_cols_expr_shape")
    raises(ValueError, ["concat: argument 'A': " + CPU], concat, _z(4, 3), _z(4, 3), _z(4, 6))
    raises(ValueError, ["concat: argument 'Out': expected shape[1] == N * 2 = 6, got 5"], concat,
           _z(4, 3), _z(4, 3), _z(4, 5))
    raises(ValueError, ["concat: argument 'Out': expected a contiguous (row-major) tensor"], concat,
           _z(4, 3), _z(4, 3), _z(6, 4).t())
    pad = _plain("pad_rows_output_plus_one")
    raises(ValueError, ["shift: argument 'Out': expected shape[0] == M + 1 = 4, got 3"], pad,
           _z(3, 5), 1.0, _z(3, 5))


def test_an_output_no_input_sizes_is_refused_by_name():
    kernel = tilecute.compile(P.int64_offset_scalar_flag.get_tir(), out_idx=[-1])
    raises(ValueError, ["offs: output 'Y' has symbolic dim 'n' that no input binds"], kernel, _z(10), 2, True)


def test_out_idx_outputs_are_not_passed():
    raises(TypeError, ["where: expected 3 arguments (X, mask, fill)", "Y, count (out_idx [3, 4]) are allocated"],
           P.bool_mask_where_count(), _z(9))


# ---- GPU: each against torch --------------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_elementwise_with_scalars_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(70, 130, device="cuda")
    y = P.affine_rows_scalars()(x, 1.5, -0.25, 100)
    want = 1.5 * x - 0.25
    want[:, 100:] = 0
    _close(y, want, 1e-5)
    xh = torch.randn(37, 300, device="cuda", dtype=torch.float16)
    b = torch.randn(300, device="cuda", dtype=torch.float16)
    g = torch.randn(37, 300, device="cuda", dtype=torch.float16)
    _close(P.bias_gelu_shared_symbol()(xh, b, g),
           torch.nn.functional.gelu(xh.float() + b.float()) * g.float(), 2e-2)
    xw = torch.randn(9, 96, device="cuda", dtype=torch.float16)
    got = P.row_window_scalar_bounds()(xw, 3, 4)
    want = torch.zeros_like(xw)
    want[:4] = xw[3:7]
    assert torch.equal(got, want)
    a, bb = torch.randn(11, 33, device="cuda", dtype=torch.float64), torch.randn(11, 33, device="cuda", dtype=torch.float64)
    _close(P.float64_axpby_scalars()(a, bb, 0.5, -3), 0.5 * a - 3 * bb, 1e-12)
    xn = torch.randn(300, device="cuda")
    # h = 0.1 rounds to float16's 0.0999755859375, g = 1/3 to bfloat16's 0.333984375
    want = (xn * 0.0999755859375 + 0.333984375) * 8 - 7
    _close(P.narrow_scalar_params()(xn, 0.1, 1 / 3, 3, -7), want, 1e-5)
    xq = torch.randn(70, 70, device="cuda")
    _close(P.square_symmetrize()(xq), (xq + xq.t()) / 2, 1e-6)
    xs = torch.randn(1000, device="cuda")
    got = P.blocks_from_scalar_grid()(10, 0.5, xs)  # 10 blocks of 64 cover 640 elements
    want = xs + 0.5 + torch.arange(1000, device="cuda").div(64, rounding_mode="floor").float()
    _close(got[:640], want[:640], 1e-6)


@pytest.mark.gpu
def test_reductions_over_dynamic_dims_on_gpu():
    torch.manual_seed(1)
    x = torch.randn(2, 5, 300, device="cuda", dtype=torch.bfloat16)
    xf = x.float()
    want = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
    _close(P.rmsnorm_bsh_dynamic()(x), want, 2e-2)
    q = torch.randint(-128, 128, (13, 150), device="cuda", dtype=torch.int8)
    assert torch.equal(P.int8_rowsum_dyn()(q), q.int().sum(-1).int())
    empty = torch.zeros(4, 0, device="cuda", dtype=torch.int8)
    assert torch.equal(P.int8_rowsum_dyn()(empty), torch.zeros(4, device="cuda", dtype=torch.int32))
    xl = torch.randn(19, 256, device="cuda", dtype=torch.float16)
    y, mean, rstd = P.layernorm_stats_three_outputs()(xl)
    _close(mean, xl.float().mean(-1), 1e-3)
    _close(rstd, torch.rsqrt(xl.float().var(-1, unbiased=False) + 1e-5), 1e-2)
    _close(y, torch.nn.functional.layer_norm(xl.float(), (256,), eps=1e-5), 2e-2)
    xa = torch.randn(6, 77, device="cuda")
    vmax, imax = P.argmax_rows_int64_out()(xa)
    assert imax.dtype == torch.int64 and torch.equal(imax, xa.argmax(-1)) and torch.equal(vmax, xa.amax(-1))
    xm = torch.randn(3, 45, 64, device="cuda", dtype=torch.float16)
    _close(P.seq_mean_tuple_symbols()(xm), xm.float().mean(1), 1e-3)


@pytest.mark.gpu
def test_shape_expressions_on_gpu():
    torch.manual_seed(2)
    a, b = torch.randn(45, 50, device="cuda"), torch.randn(45, 50, device="cuda")
    assert torch.equal(P.concat_cols_expr_shape()(a, b), torch.cat([a, b], 1))
    x = torch.randint(-100, 100, (1002,), device="cuda", dtype=torch.int32)
    assert torch.equal(P.group_quads_floordiv()(x), x[:1000].view(250, 4).sum(-1).int())
    f = torch.randn(1002, device="cuda")
    g = torch.randn(250, 4, device="cuda")
    _close(P.groups_of_four_input()(f, g), g.amax(-1) - f[:1000:4], 0)
    xs = torch.randn(7, 300, device="cuda")
    got = P.pad_rows_output_plus_one()(xs, -2.0)
    assert torch.equal(got, torch.cat([torch.full((1, 300), -2.0, device="cuda"), xs]))
    p = torch.randint(0, 1000, (2, 301), device="cuda", dtype=torch.int32)
    assert torch.equal(P.pairs_to_interleaved()(p), p.t().reshape(-1))


@pytest.mark.gpu
def test_out_idx_order_on_gpu():
    xw = torch.randn(333, device="cuda")
    m = torch.rand(333, device="cuda") > 0.4
    xb = torch.tensor([1.0, float("inf"), float("nan"), -float("inf"), 0.0] * 20, device="cuda",
                      dtype=torch.bfloat16)
    cls, ok = tilecute.compile(P.isfinite_bool_out.get_tir(), out_idx=[2, 1])(xb)
    assert ok.dtype == torch.bool and cls.dtype == torch.int32
    assert torch.equal(ok, torch.isfinite(xb))
    assert torch.equal(cls, torch.where(xb.isnan(), 2, torch.where(xb.isinf(), 1, 0)).int())
    count = torch.zeros(1, device="cuda", dtype=torch.int32)
    y = tilecute.compile(P.bool_mask_where_count.get_tir(), out_idx=[3])(xw, m, -7.0, count)
    assert int(count.item()) == int(m.sum()) and torch.equal(y, torch.where(m, xw, torch.full_like(xw, -7.0)))


@pytest.mark.gpu
def test_integer_bool_and_fp8_tensors_on_gpu():
    torch.manual_seed(3)
    x = torch.randint(0, 256, (1000,), device="cuda", dtype=torch.uint8)
    key = 77
    k = ((key + torch.arange(1000, device="cuda")) & 255).to(torch.int32)
    v = x.int() ^ k
    assert torch.equal(P.uint8_xor_key()(x, key), (((v << 3) | (v >> 5)) & 255).to(torch.uint8))
    table = torch.randn(20, 64, device="cuda")
    idx = torch.tensor([0, 19, -1, 20, 5, 5], device="cuda", dtype=torch.int64)
    got = P.int64_index_gather_rows()(table, idx, 2.0)
    want = torch.zeros(6, 64, device="cuda")
    ok = (idx >= 0) & (idx < 20)
    want[ok] = table[idx[ok]] * 2
    assert torch.equal(got, want)
    xw = torch.randn(333, device="cuda")
    m = torch.rand(333, device="cuda") > 0.4
    counting = tilecute.compile(P.bool_mask_where_count.get_tir(), out_idx=[3])  # count zeroed here
    for mask in (m, m.to(torch.uint8)):  # a byte tensor binds a T.bool argument, as in TileLang
        count = torch.zeros(1, device="cuda", dtype=torch.int32)
        y = counting(xw, mask, -7.0, count)
        assert torch.equal(y, torch.where(m, xw, torch.full_like(xw, -7.0)))
        assert int(count.item()) == int(m.sum())
    xb = torch.tensor([1.0, float("inf"), float("nan"), -float("inf"), 0.0] * 20, device="cuda",
                      dtype=torch.bfloat16)
    ok, cls = P.isfinite_bool_out()(xb)
    assert torch.equal(ok, torch.isfinite(xb))
    assert torch.equal(cls, torch.where(xb.isnan(), 2, torch.where(xb.isinf(), 1, 0)).int())
    q = (torch.randn(9, 300, device="cuda") * 4).to(torch.float8_e4m3fn)
    s = torch.rand(9, device="cuda") + 0.5
    _close(P.fp8_rows_dequant_bf16()(q, s), (q.float() * s[:, None]).bfloat16(), 1e-2)
    q5 = (torch.randn(500, device="cuda") * 4).to(torch.float8_e5m2)
    _close(P.fp8_e5m2_to_half_scale()(q5, 0.25), (q5.float() * 0.25).half(), 1e-3)


@pytest.mark.gpu
def test_strided_views_on_gpu():
    torch.manual_seed(4)
    big = torch.randn(40, 160, device="cuda", dtype=torch.float16)
    view = big[3:40, 5:135]  # a row stride of 160 and a storage offset
    _close(P.strided_rows_slice_scale()(view, 0.5), (view.float() * 0.5).half(), 1e-3)
    at = torch.randn(75, 50, device="cuda")
    _close(P.colmajor_input_colsum()(at.t()), at.t().sum(0), 1e-4)
    x2 = torch.randn(128, 48, device="cuda")
    assert torch.equal(P.static_strides_every_other_row()(x2[::2]), x2[::2] + 1)
    wide = torch.randn(9, 40, device="cuda")
    got = P.dense_copy_keeps_pitch()(wide[:, :25])
    want = wide.clone()
    want[:, 25:] = 0
    assert got.shape == (9, 40) and torch.equal(got, want)
    h = torch.randn(7, 2 * 300, device="cuda", dtype=torch.bfloat16)
    g, u = h[:, :300].float(), h[:, 300:].float()
    _close(P.swiglu_fused_halves()(h[:, :300], h[:, 300:]), torch.nn.functional.silu(g) * u, 2e-2)
    xb = torch.randn(37, 300, device="cuda")
    bias = torch.randn(300, device="cuda")
    assert torch.equal(P.add_broadcast_bias_view()(xb, bias.expand(37, 300)), xb + bias)
    kc = torch.randn(2, 50, 64, device="cuda", dtype=torch.float16)
    vc = torch.randn(2, 50, 64, device="cuda", dtype=torch.float16)
    _close(P.kv_prefix_dot_shared_stride()(kc[:, :21], vc[:, :21]),
           (kc[:, :21].float() * vc[:, :21].float()).sum(-1), 1e-3)
    flat = torch.randn(500, device="cuda", dtype=torch.float16)
    y = torch.zeros(6, 70, device="cuda", dtype=torch.float16)
    P.scalar_stride_flat_view()(flat, 90, y)
    want = torch.zeros(6, 70, device="cuda", dtype=torch.float16)
    for r in range(6):
        row = flat[r * 90:r * 90 + 70]  # row 5 runs past the 500 elements: 50 of them
        want[r, :row.numel()] = row
    assert torch.equal(y, want)
    xo = torch.randn(100, device="cuda")
    yo = torch.zeros(40, device="cuda")
    P.int64_offset_scalar_flag()(xo, 30, True, yo)
    assert torch.equal(yo, xo[30:70] * 2)
    yo.zero_()
    P.int64_offset_scalar_flag()(xo, 70, False, yo)
    assert torch.equal(yo[:30], xo[70:]) and torch.equal(yo[30:], torch.zeros(10, device="cuda"))


@pytest.mark.gpu
def test_dynamic_gemms_on_gpu():
    torch.manual_seed(5)
    a = torch.randn(150, 128, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    _close(P.gemm_dynamic_tokens_bf16()(a, w), a.float() @ w.float().t(), 5e-2)
    a = torch.randn(100, 75, device="cuda", dtype=torch.float16)
    b = torch.randn(75, 90, device="cuda", dtype=torch.float16)
    _close(P.gemm_dynamic_k_tail()(a, b), a.float() @ b.float(), 2e-2)
    big = torch.randn(64 * 64 + 1, device="cuda", dtype=torch.float16)
    a = big[1:].view(64, 64)  # K % 8 == 0 but 2 bytes off: the general variant
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    _close(P.gemm_dynamic_k_tail()(a, b), a.float() @ b.float(), 2e-2)
    for k in (10, 0):  # one K step for three stages; no K at all (C = 0)
        a = torch.randn(70, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, 40, device="cuda", dtype=torch.float16)
        _close(P.gemm_dynamic_k_tail()(a, b), a.float() @ b.float(), 2e-2)
    a = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    for kt in (0, 1, 2, 5, 100, -3):  # min(k_tiles, 8) steps, none when <= 0
        n = max(0, min(kt, 8)) * 32
        _close(P.gemm_k_tiles_scalar()(a, b, kt), a[:, :n].float() @ b[:n].float(), 2e-2)
    a = torch.randn(3, 100, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(3, 64, 64, device="cuda", dtype=torch.float16)
    _close(P.bmm_dynamic_batch_rows()(a, b), a.float() @ b.float(), 5e-2)
    big = torch.randn(130, 200, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    panel = big[:, 7:71]  # a row stride of 200 and an odd column offset
    _close(P.gemm_strided_a_panel()(panel, b), panel.float() @ b.float(), 2e-2)


def test_export_keeps_the_out_idx_order(tmp_path, monkeypatch):
    from tilecute.export import collect, load_module

    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "mod.py"
    src.write_text(
        "import tilecute\nimport tilecute.language as T\n"
        "@T.prim_func\n"
        "def two(A: T.Tensor((256,), 'float32'), B: T.Tensor((256,), 'float32'),\n"
        "        C: T.Tensor((256,), 'float32')):\n"
        "    with T.Kernel(1, threads=256) as bx:\n"
        "        for i in T.Parallel(256):\n"
        "            B[i] = A[i]\n"
        "            C[i] = A[i] * 2.0\n"
        "swapped = tilecute.compile(two, out_idx=[2, 1])\n")
    (kernel,) = collect(load_module(str(src), ["sm_90a"]), "swapped")
    assert kernel.out_idx == [1, 2] and kernel.returns == [1, 0]
