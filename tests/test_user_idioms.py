"""Programs in the idioms of TileLang users' issues and shipped kernels
(tests/user_idiom_programs.py).  CPU: each builds to an sm_90a cubin (and an sm_80 one where
no Hopper instruction is involved), what each means is checked in the generated source, and
the host surface users read (``params``, ``out_idx``, ``get_kernel_source``, the profiler) is
checked on the compiled kernels.  GPU (``-m gpu``): results against torch."""

import re

import pytest
import torch

import tilecute

import user_idiom_programs as P

PROGRAMS = ["kv_tiles_skip_by_ranges", "pipelined_row_gather_sum", "pipelined_last_tile_after_loop",
            "fragment_width_not_multiple", "vars_reassigned_absmax", "var_init_from_var", "strided_scalar_args",
            "serial_step_neg", "first_negative_break", "unroll_explicit_break", "out_first_dynamic",
            "view_bf16_as_f32", "reshape_shared_tuple", "group_quant_pow2", "head_weighted_scores", "swap_halves",
            "fib_swap_vars", "sum_skip_negative", "counter_int_shape", "macro_var_ref",
            "pipelined_consume_then_reload", "fragment_partial_rows", "fragment_slice_copy", "threads_2d_tile",
            "col_max_dim0", "bf16_atomic_hist", "pipelined_order_stage", "print_debug_value", "mod_table_2d",
            "neg_floor_div_mod", "shifted_window_idx", "topk_gate_argmax", "reducer_col_sums",
            "masked_tile_gemm", "masked_tile_gemm_elementwise", "head_slice_copy", "gemm_transpose_a",
            "pipelined_range_from_buffer"]
# float8 conversions need sm_89+: that one is refused on sm_80 (a bfloat16 atomic add
# builds there as a compare-and-swap loop)
SM80 = [n for n in PROGRAMS if n != "group_quant_pow2"]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _body(name, **kw):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = getattr(P, name)(**kw).get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name):
    assert getattr(P, name)().ensure_cubin()


@pytest.mark.parametrize("name", SM80)
def test_program_builds_an_sm80_cubin(name, tmp_path):
    func = getattr(P, name).get_tir()
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


def test_float8_quantizer_is_refused_on_sm80(tmp_path):
    with pytest.raises(Exception, match=r"float8 values convert only on sm_89\+.*sm_80"):
        tilecute.build_cubin(P.group_quant_pow2.get_tir(), "sm_80", out_dir=str(tmp_path))


def test_eager_program_builds_from_a_tensor():
    kernel = P.eager_scale_rows.compile(torch.empty(100, 48), scale=0.5)
    assert [(a.name, tuple(a.shape)) for a in kernel.abi.args] == [("X", (100, 48)), ("Y", (100, 48))]
    assert "0.5" in kernel.get_kernel_source()
    assert kernel.ensure_cubin().endswith(".cubin")


# ---- pipelined loops --------------------------------------------------------------------
def test_pipelined_tile_skip_keeps_the_loaded_bounds_test():
    src = _body("kv_tiles_skip_by_ranges")
    assert "q_start = starts[qt]" in src and "q_end = ends[qt]" in src
    cond = src.index("if q_start <= kv and kv < q_end:")
    # the Q tile's load runs only under its step's test: the producer warpgroup reads each
    # step's bounds and loads the tiles of the steps that pass (the guarded pipeline); both
    # GEMMs only under this step's test, at the stage of the steps that loaded
    ahead = src.index("if starts[tc_j0] <= kv and kv < ends[tc_j0]:")
    assert ahead < src.index("tct.load(Q_desc", ahead) < cond
    assert "tc_cbase0[0] = tc_cbase0[0] - 1" in src[cond:]  # (a skipped step loads nothing)
    assert cond < src.index("tcm.gemm(tc_mma0") < src.index("tcm.gemm(tc_mma1")
    assert "accumulate=False" in src.split("tcm.gemm(tc_mma0")[1].split("\n")[0]  # clear_accum=True


def test_pipelined_gather_reads_the_index_of_each_stage():
    src = _body("pipelined_row_gather_sum")
    # the prologue loads row ids[0], each iteration the next stage's row ids[i + 1]
    assert "(0, ids[0])" in src and "(0, ids[i + 1])" in src
    assert "tct.wait(tc_bar0 + i % 2, i // 2 & 1)" in src


def test_shared_tile_read_after_its_pipelined_loop_is_the_last_tile():
    src = _body("pipelined_last_tile_after_loop")
    loop, after = src.split("for k in cutlass.range(0, 4):", 1)[1].rsplit("for tc_k10", 1)
    assert "cp_async_wait_group(0)" in loop.rsplit("tcc.copy_async", 1)[1]  # the last load landed
    assert "As.iterator" in after and "cutlass.Float32(2.0) + tc_vec13" in after


def test_read_then_reload_of_one_row_waits_for_the_readers():
    src = _body("pipelined_consume_then_reload")
    loop = src.split("for k in cutlass.range(0, 6):", 1)[1]
    read, reload = loop.index("out[k, j] = S[j]"), loop.index("S[i1] = A[k + 1, i1]")
    assert read < reload and "cute.arch.sync_threads()" in loop[read:reload]
    assert loop.lstrip().startswith("cute.arch.sync_threads()")  # the reload is seen next time


def test_order_and_stage_lists_pipeline_the_gemm():
    src = _body("pipelined_order_stage")
    assert "tcm.gemm(" in src and ("tct.load(" in src or "tcc.copy_async(" in src)


# ---- scalars: alloc_var, swaps, macros ------------------------------------------------------
def test_reassigned_vars_keep_their_order():
    src = _body("vars_reassigned_absmax")
    assert src.index("i[0] = 0") < src.index("i[0] = 1") < src.index("i[0] = i[0] + 2")
    assert "amax[0] = cute.arch.fmax(amax[0], tmp_row[j])" in src
    src = _body("var_init_from_var")
    assert "b[0] = a[0]\n    a[0] = 2\n    d = " in src and "d[0] = a[0]\n    a[0] = 7" in src


def test_tuple_assignments_read_every_value_first():
    src = _body("swap_halves")
    assert "unpacked = S[i]\n    S[i] = S[i + 128]\n    S[i + 128] = unpacked" in src
    src = _body("fib_swap_vars")
    assert "unpacked = a[0] + c[0]\n        a[0] = c[0]\n        c[0] = unpacked" in src


def test_var_macro_parameter_writes_the_callers_var():
    src = _body("macro_var_ref")
    assert "x[0] = x[0] + 5\n    x[0] = x[0] + bx\n    B[bx] = x[0]" in src


# ---- loops ----------------------------------------------------------------------------------
def test_stepped_and_negative_serial_loops():
    src = _body("serial_step_neg")
    assert "for i_iter in cutlass.range(0, 64):" in src and "i = 63 + i_iter * -1" in src
    assert "cutlass.range(0, 16)" in src and "0 + i_iter_1_ * 4" in src


def test_break_continue_and_loop_break():
    src = _body("first_negative_break")
    # break: the first negative column ends the walk
    assert "while j_it[0] < 100 and broke[0] == 0:" in src
    assert "pos[0] = j\n            broke[0] = 1" in src
    src = _body("unroll_explicit_break")
    # T.loop_break in an explicitly unrolled loop ends the loop (not just one step)
    assert "while i_1_it[0] < 16 and broke[0] == 0:" in src
    assert src.index("broke[0] = 1") < src.index("if broke[0] == 0:") < src.index("Out[i_1_] = tc_ld2 + 1")
    src = _body("sum_skip_negative")
    assert "skipped[0] = 1" in src and "if skipped[0] == 0:\n            acc[0] = acc[0] + A[bx, j]" in src
    assert "(100 - tx + 32 - 1) // 32" in src


# ---- tensors, views, fragments ----------------------------------------------------------------
def test_strided_tensor_after_scalar_parameters():
    kernel = P.strided_scalar_args()
    assert [(a.name, a.kind) for a in kernel.args] == [("x", "scalar"), ("num_blocks", "scalar"),
                                                       ("t", "tensor"), ("out", "tensor")]
    assert kernel.args[2].strides == ("st0", "st1") and kernel.args[3].strides is None
    src = _body("strided_scalar_args")
    assert "make_layout((s0, s1,), stride=(st0, st1,))" in src
    assert "out[r, c] = tc_ld1 ^ x" in src


def test_output_before_the_input_that_sizes_it():
    kernel = P.out_first_dynamic()
    assert kernel.out_idx == [0] and [a.name for a in kernel.args] == ["Y", "X"]


def test_views_read_the_same_bytes():
    src = _body("view_bf16_as_f32")
    assert "Sf = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float32)" in src
    assert "B[i] = Sf[i]" in src
    src = _body("reshape_shared_tuple")
    assert "R = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float16)" in src
    assert "R.iterator + cute.assume(i * 16 + j" in src


def test_fragment_forms():
    src = _body("fragment_width_not_multiple")
    assert src.count("if tc_f") == 3 and "< 192:" in src  # 48 threads hold the 192 elements
    src = _body("fragment_partial_rows")
    # (the 4 KiB fragment written at shifted rows lives in shared memory: rows 3.. by
    # cp.async, after a barrier that orders them behind the first nest's stores)
    assert "F.iterator + cute.assume((i_1_ + 3) * 64 + j_1_" in src
    assert src.index("cute.arch.sync_threads()") < src.index("F.iterator + cute.assume((i_1_ + 3)")
    src = _body("fragment_slice_copy")
    assert "F[3 + i2] = A[i2]" in src and "range_constexpr(0, 8)" in src
    src = _body("col_max_dim0")
    assert '"max"' in src


def test_head_weighted_scores_forms():
    src = _body("head_weighted_scores")
    # T.Parallel(h, n) writes logits[n, h]: each register's (row, col) names (jn, ih)
    assert "jn, ih = tc_logits_ij[tc_r17]" in src
    assert "* wf[tcrow.col_of(logits, tc_r17 + tc_lane18)]" in src
    assert 'tcrow.reduce_rows(logits, tot, "sum", clear=True)' in src
    # the 1-D fragment goes along o's last dim, guarded by the symbolic n
    assert "if in1 * 256 + in2 * 64 + i7 < n:\n                o[ib, im, in1 * 256 + in2 * 64 + i7] = tot[tc_q20]" in src


def test_quantizer_power_of_two_scale():
    src = _body("group_quant_pow2")
    # (the row maxima read from the reduction round's registers, as the lane groups hold them)
    assert "# amax: its rows stay in" in src
    assert "* cutlass.Float32(0.002232142857142857), cutlass.Uint32)" in src
    assert "tcmath.reinterpret(tc_rows" in src
    assert "+ 127 << 23, cutlass.Float32)" in src
    assert "cutlass.Float32(448.0)" in src and "cutlass.Float32(-448.0)" in src
    src = _body("group_quant_pow2", pow2_scale=False)
    assert "tcmath.reinterpret" not in src and "/ cutlass.Float32(448.0)" in src


def test_int_shapes_threads_2d_and_atomics():
    assert [tuple(a.shape) for a in P.counter_int_shape().args] == [(1,), (128,)]
    src = _body("threads_2d_tile")
    assert "tx = tc_tx\n    ty = tc_ty" in src
    src = _body("bf16_atomic_hist")
    assert "tca.atomic_add(H, (idx[bx * 256 + i] - idx[bx * 256 + i] // 64 * 64,), w[bx * 256 + i])" in src


def test_floor_and_trunc_division():
    src = _body("neg_floor_div_mod")
    assert "C[i, 0] = v // 5" in src and "C[i, 1] = v - v // 5 * 5" in src
    assert "tcmath.truncdiv(v, 5)" in src and "tcmath.truncmod(v, 5)" in src
    src = _body("mod_table_2d")
    # (a global -> global nest: staged, 4 lanes a thread step)
    assert re.search(r"B\[\(j \+ (tc_lane\d+)\) % 7\] \* cutlass\.Float32\(\(j \+ \1\) // 7\)", src), src


def test_masked_gemm_waits_for_every_stage_outside_the_branch():
    src = _body("masked_tile_gemm")
    loop = src.split("for k in cutlass.range(0, 8):", 1)[1]
    # each iteration waits for its stage before the mask test, so a skipped tile keeps the
    # barrier phases in step; the GEMM alone is under the test
    assert loop.index("tct.wait(tc_bar0 + k % 3, k // 3 & 1)") < loop.index("if mask[by, k] != 0:") < loop.index("tcm.gemm(")
    src = _body("masked_tile_gemm_elementwise")
    assert "if mask[k] > 0:" in src and "else:" in src.split("if mask[k] > 0:", 1)[1]


def test_topk_gate_and_reducer():
    src = _body("topk_gate_argmax")
    assert 'warp_allreduce(tc_acc9, "max", 32)' in src and 'warp_allreduce(tc_acc15, "min", 32)' in src
    assert "cutlass.select_(s[tc_lane11] == best[0], (e_1_ + tc_lane11), 64)" in src  # E padded to 64
    src = _body("reducer_col_sums")
    assert src.index("r[(j + tc_lane4)] = r[(j + tc_lane4)] + tc_vec3[tc_lane4]") < src.index("# T.finalize_reducer(r)")
    assert 'tcr.block_allreduce(r, "sum", r_scratch, 4, 4)' in src


def test_sliced_middle_dim_transposed_a_and_loaded_pipeline_range():
    src = _body("head_slice_copy")
    assert "X.iterator + cute.assume(b * 32768 + (bs * 64 + i1) * 256 + h * 64 + i2, divby=8)" in src
    assert "Y.iterator + cute.assume(b * 32768 + (bs * 64 + i3) * 256 + h * 64 + i4, divby=8)" in src
    src = _body("gemm_transpose_a")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, True, True' in src
    assert "(by * 64, tc_j0 * 32)" in src  # A's (bk, 64) box at row k * bk, column by * 64
    src = _body("pipelined_range_from_buffer")
    assert "for k in cutlass.range(lo[q], lo[q] + (hi[q] - lo[q])):" in src
    assert "if 0 < hi[q] - lo[q]:" in src and "(0, (lo[q] + 0) * 64)" in src  # no prologue load of an empty range
    assert "tct.wait(tc_bar0 + ((k - lo[q]) - (k - lo[q]) // 2 * 2), (k - lo[q]) // 2 & 1)" in src


def test_print_keeps_its_message():
    assert "msg='v0'" in _body("print_debug_value")


# ---- host surface users read ------------------------------------------------------------------
def test_params_lists_each_parameter_as_tilelang_does():
    kernel = P.strided_scalar_args()
    params = kernel.params
    assert [(p.name, p.dtype, p.shape) for p in params] == [
        ("x", "uint32", []), ("num_blocks", "int32", []), ("t", "uint32", ["s0", "s1"]),
        ("out", "uint32", ["s0", "s1"])]
    assert [p.is_scalar() for p in params] == [True, True, False, False]
    assert params[0].is_unsigned() and not params[1].is_unsigned()
    quant = P.group_quant_pow2()
    assert [p.is_float8() for p in quant.params] == [False, True, False]
    assert quant.params[2].shape == ["M", 4]  # T.ceildiv(N, group) of static N folds
    assert quant.get_profiler().params == quant.params
    assert P.counter_int_shape().params[0].torch_dtype() is torch.int32


def test_out_idx_forms_and_sources():
    assert P.var_init_from_var().out_idx == [0]  # out_idx=-1 (an int)
    assert P.head_weighted_scores().out_idx == [4]
    kernel = P.swap_halves()
    assert kernel.get_kernel_source() == kernel.kernel_source
    assert "launcher" in kernel.get_host_source().lower()


# ---- GPU ------------------------------------------------------------------------------------
def _cuda(*ts):
    return [t.cuda() for t in ts]


@pytest.mark.gpu
def test_gpu_kv_tiles_skip_by_ranges():
    torch.manual_seed(0)
    q = torch.randn(256, 64, dtype=torch.float16) * 0.25
    k = torch.randn(256, 64, dtype=torch.float16) * 0.25
    starts = torch.tensor([0, 1, 3, 2], dtype=torch.int32)
    ends = torch.tensor([2, 3, 4, 3], dtype=torch.int32)
    o = P.kv_tiles_skip_by_ranges()(*_cuda(q, k, starts, ends)).cpu()
    want = torch.zeros(256, 64)
    for kv in range(4):
        kt = k[kv * 64:(kv + 1) * 64].float()
        for qt in range(4):
            if starts[qt] <= kv < ends[qt]:
                qq = q[qt * 64:(qt + 1) * 64].float()
                s = (kt @ qq.T).half().float()
                want[kv * 64:(kv + 1) * 64] += s @ qq
    torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gpu_pipelined_gathers_and_loop_tails():
    torch.manual_seed(0)
    kv = torch.randn(64, 128).to(torch.bfloat16)
    ids = torch.tensor([5, 0, 63, 5, 17, 2, 40, 9], dtype=torch.int32)
    out = P.pipelined_row_gather_sum()(*_cuda(kv, ids)).cpu()
    torch.testing.assert_close(out, kv.float()[ids.long()].sum(0), rtol=1e-4, atol=1e-4)
    a = torch.randn(256, 32)
    out = P.pipelined_last_tile_after_loop()(a.cuda()).cpu()
    torch.testing.assert_close(out, a.view(4, 64, 32).sum(0) * 2 + a[192:], rtol=1e-5, atol=1e-5)
    a = torch.randn(7, 128)
    out = P.pipelined_consume_then_reload()(a.cuda()).cpu()
    torch.testing.assert_close(out, a[:6] * 2)


@pytest.mark.gpu
def test_gpu_scalars_and_swaps():
    x = torch.randn(64, 4)
    out = P.vars_reassigned_absmax()(x.cuda()).cpu()
    assert torch.equal(out[:, 0], x.abs().amax(1)) and (out[:, 1] == 3).all()
    assert P.var_init_from_var()().cpu().tolist() == [1, 2, 7]
    a, b = torch.randn(256), torch.randn(256)
    assert torch.equal(P.swap_halves()(*_cuda(a, b)).cpu(), torch.cat([a[128:], a[:128]]))
    x = torch.randint(0, 5, (32, 2), dtype=torch.int32)
    got = P.fib_swap_vars()(x.cuda()).cpu()
    want = []
    for a0, c0 in x.tolist():
        for _ in range(10):
            a0, c0 = c0, a0 + c0
        want.append(a0)
    assert got.tolist() == want
    a = torch.randint(-100, 100, (64,), dtype=torch.int32)
    assert torch.equal(P.macro_var_ref()(a.cuda()).cpu(), a + 5 + torch.arange(64, dtype=torch.int32))


@pytest.mark.gpu
def test_gpu_loops_with_steps_and_exits():
    a = torch.randn(64)
    b = P.serial_step_neg()(a.cuda()).cpu()
    want = a.flip(0).cumsum(0).flip(0)
    want[::4] *= 2
    torch.testing.assert_close(b, want, rtol=1e-5, atol=1e-5)
    a = torch.rand(32, 100) + 0.1
    a[3, 7] = -1.0
    a[3, 50] = -2.0
    a[9, 0] = -1.0
    idx = P.first_negative_break()(a.cuda()).cpu()
    want = torch.full((32,), -1, dtype=torch.int32)
    want[3], want[9] = 7, 0
    assert torch.equal(idx, want)
    a = torch.tensor([3, 1, 4, 1, 5, 0, 2, 6, 0, 1, 1, 1, 1, 1, 1, 1], dtype=torch.int32)
    out = P.unroll_explicit_break()(a.cuda()).cpu()
    assert out.tolist() == [4, 2, 5, 2, 6] + [-99] * 11
    a = torch.randn(16, 100)
    s = P.sum_skip_negative()(a.cuda()).cpu()
    torch.testing.assert_close(s, a.clamp(min=0).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_strided_tensor_scalars_and_dynamic_outputs():
    base = torch.randint(0, 2 ** 31, (40, 70), dtype=torch.int64).to(torch.int32).view(torch.uint32)
    t = base.cuda()[:, ::2]  # strided: (40, 35) with strides (70, 2)
    out = P.strided_scalar_args()(0xA5A5A5A5, 3, t).cpu()
    want = (base[:, ::2].view(torch.int32) ^ torch.tensor(0xA5A5A5A5 - 2 ** 32, dtype=torch.int32))
    assert torch.equal(out.view(torch.int32), want)
    x = torch.randn(1000)
    y = P.out_first_dynamic()(x.cuda())
    torch.testing.assert_close(y.cpu(), x * 3)


@pytest.mark.gpu
def test_gpu_views_and_fragments():
    a = torch.randn(256).to(torch.bfloat16)
    b = P.view_bf16_as_f32()(a.cuda()).cpu()
    assert torch.equal(b, a.view(torch.float32))
    a = torch.randn(256).half()
    assert torch.equal(P.reshape_shared_tuple()(a.cuda()).cpu(), (a * 2).view(16, 16))
    x = torch.randn(4, 192)
    torch.testing.assert_close(P.fragment_width_not_multiple()(x.cuda()).cpu(), x * x + 1)
    a, b = torch.randn(8, 64), torch.randn(16, 64)
    c = P.fragment_partial_rows()(*_cuda(a, b)).cpu()
    want = b + 100
    want[3:11] = a
    assert torch.equal(c, want)
    a = torch.randn(64)
    c = P.fragment_slice_copy()(a.cuda()).cpu()
    want = torch.full((128,), -1.0)
    want[3:11] = a[:8]
    assert torch.equal(c, want)
    a = torch.randn(64, 96)
    assert torch.equal(P.col_max_dim0()(a.cuda()).cpu(), a.amax(0))
    a = torch.randn(64, 64)
    assert torch.equal(P.threads_2d_tile()(a.cuda()).cpu(), a.T)


@pytest.mark.gpu
def test_gpu_quantizer_and_scores():
    torch.manual_seed(0)
    x = (torch.randn(50, 256) * 3).to(torch.bfloat16)
    for pow2 in (True, False):
        kernel = P.group_quant_pow2(pow2_scale=pow2)
        y = torch.empty(50, 256, dtype=torch.float8_e4m3fn, device="cuda")
        s = torch.empty(50, 4, device="cuda")
        kernel(x.cuda(), y, s)
        amax = x.float().view(50, 4, 64).abs().amax(-1).clamp(min=1e-4)
        want_s = amax / 448.0
        if pow2:
            want_s = torch.exp2(torch.ceil(torch.log2(want_s)))
        torch.testing.assert_close(s.cpu(), want_s, rtol=1e-6, atol=0)
        want_y = (x.float().view(50, 4, 64) / want_s[..., None]).clamp(-448, 448).view(50, 256)
        torch.testing.assert_close(y.cpu().float(), want_y.to(torch.float8_e4m3fn).float(), rtol=0.07, atol=0)
    b, m, n = 2, 3, 300
    q = torch.randn(b, m, 16, 64).half() * 0.3
    w = torch.rand(b, m, 16)
    k = torch.randn(b, n, 64).half() * 0.3
    ks = torch.rand(b, n)
    o = P.head_weighted_scores()(*_cuda(q, w, k, ks)).cpu()
    logits = torch.einsum("bnd,bmhd->bmnh", k.float(), q.float()).clamp(min=0) * w[:, :, None, :]
    torch.testing.assert_close(o, logits.sum(-1) * ks[:, None, :], rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_gpu_gemm_with_order_and_stage():
    torch.manual_seed(0)
    a, b = torch.randn(128, 256).half(), torch.randn(256, 128).half()
    c = P.pipelined_order_stage()(*_cuda(a, b)).cpu()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gpu_integer_forms_and_atomics():
    a = torch.randint(0, 64, (64,), dtype=torch.int32)
    c = P.neg_floor_div_mod()(a.cuda()).cpu()
    v = a - 32
    assert torch.equal(c[:, 0], torch.div(v, 5, rounding_mode="floor"))
    assert torch.equal(c[:, 1], torch.remainder(v, 5))
    assert torch.equal(c[:, 2], torch.div(v, 5, rounding_mode="trunc"))
    assert torch.equal(c[:, 3], torch.fmod(v, 5))
    a, b = torch.randn(16, 96), torch.randn(7)
    j = torch.arange(96)
    torch.testing.assert_close(P.mod_table_2d()(*_cuda(a, b)).cpu(), a + b[j % 7] * (j // 7).float())
    x = torch.randn(128)
    want = sum(torch.roll(x, t) for t in range(5))
    torch.testing.assert_close(P.shifted_window_idx()(x.cuda()).cpu(), want, rtol=1e-5, atol=1e-5)
    idx = torch.randint(0, 1000, (1024,), dtype=torch.int32)
    w = torch.ones(1024, dtype=torch.bfloat16)
    kernel = P.bf16_atomic_hist()
    hist = torch.zeros(64, dtype=torch.bfloat16, device="cuda")  # the atomics add into it
    kernel(idx.cuda(), w.cuda(), hist)
    hist = hist.cpu().float()
    assert torch.equal(hist, torch.bincount((idx % 64).long(), minlength=64).float())
    cnt = torch.zeros(1, dtype=torch.int32, device="cuda")
    xs = torch.randn(128)
    P.counter_int_shape()(cnt, xs.cuda())
    assert cnt.item() == int((xs > 0).sum())


@pytest.mark.gpu
def test_gpu_topk_gate_and_reducer():
    torch.manual_seed(0)
    logits = torch.randn(37, 48)
    w, ids = P.topk_gate_argmax()(logits.cuda())
    want_w, want_ids = logits.topk(4, dim=1)
    assert torch.equal(w.cpu(), want_w) and torch.equal(ids.cpu().long(), want_ids)
    a = torch.randn(256, 64)
    torch.testing.assert_close(P.reducer_col_sums()(a.cuda()).cpu(), a.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_gpu_masked_tile_gemms():
    torch.manual_seed(0)
    a, b = torch.randn(128, 512).half(), torch.randn(512, 128).half()
    mask = torch.tensor([[1, 0, 1, 1, 0, 0, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1]], dtype=torch.int32)
    c = P.masked_tile_gemm()(*_cuda(a, b, mask)).cpu()
    keep = mask.repeat_interleave(64, 0).repeat_interleave(64, 1).half()  # (128, 512)
    want = torch.zeros(128, 128)
    for r in range(2):
        rows = slice(r * 64, r * 64 + 64)
        want[rows] = (a[rows] * keep[rows]).float() @ b.float()
    torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)
    m1 = torch.tensor([1, 0, 0, 1, 1, 0, 1, 0], dtype=torch.int32)
    c = P.masked_tile_gemm_elementwise()(*_cuda(a, b, m1)).cpu()
    want = torch.zeros(128, 128)
    for k in range(8):
        at, bt = a[:, k * 64:(k + 1) * 64].float(), b[k * 64:(k + 1) * 64].float()
        want += at @ bt if m1[k] else at.repeat(1, 2) * 0.5
    torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gpu_slices_transposed_a_and_loaded_ranges():
    torch.manual_seed(0)
    x = torch.randn(2, 128, 4, 64).half()
    y = P.head_slice_copy()(x.cuda()).cpu()
    torch.testing.assert_close(y, (x.float() * torch.arange(1, 5).view(1, 1, 4, 1)).half())
    a, b = torch.randn(128, 128).half(), torch.randn(128, 64).half()
    c = P.gemm_transpose_a()(*_cuda(a, b)).cpu()
    torch.testing.assert_close(c, a.float().T @ b.float(), rtol=1e-2, atol=1e-2)
    x = torch.randn(512, 64)
    lo = torch.tensor([0, 3, 5, 7], dtype=torch.int32)
    hi = torch.tensor([8, 3, 7, 8], dtype=torch.int32)  # the second range is empty
    out = P.pipelined_range_from_buffer()(*_cuda(x, lo, hi)).cpu()
    want = torch.stack([x[l * 64:h * 64].sum(0) for l, h in zip(lo.tolist(), hi.tolist())])
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_eager_scale_rows():
    x = torch.randn(100, 48, device="cuda")
    y = P.eager_scale_rows(x, scale=0.5)
    torch.testing.assert_close(y, x * 0.5)
