"""TileLang's programming guides, form by form (python_compatibility.md, control_flow.md,
language_basics.md, instructions.md): each program in doc_guide_programs.py builds for sm_90a
and its generated CuTe DSL holds what the form means; forms the guides mark unsupported (or
that TileLang itself refuses) are refused with an error naming them."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language.parser import FrontendError

import doc_guide_programs as P


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _source(func):
    kernel = func if hasattr(func, "get_kernel_source") else tilecute.compile(func)
    kernel.ensure_cubin()
    return kernel.get_kernel_source()


def test_range_with_start_and_step_is_a_strided_serial():
    src = _source(P.strided_range())
    # range(1 + tx*3, 96, 96): the trip count from the start, not from 0
    assert "(96 - (1 + tx * 3) + 96 - 1) // 96" in src


def test_while_with_break_over_a_var():
    src = _source(P.first_negative())
    assert "while j[0] < 40" in src and "Out[bx * 32 + tx] = j[0]" in src


def test_continue_in_serial():
    src = _source(P.skip_sum())
    assert "Mask[" in src and "acc[0]" in src


def test_rebinding_a_ternary_let_inside_an_if_is_refused():
    with pytest.raises(FrontendError, match="'x' is read after the loop/if body"):
        P.banded()


def test_ternary_and_elif_chain_over_a_var():
    src = _source(P.banded_var())
    assert "cutlass.select_(g < 100" in src
    assert "if x[0] < cutlass.Float32(-1.0)" in src  # the elif, nested under the else


def test_negative_constant_index_reads_from_the_end():
    assert "A[i] - A[127]" in _source(P.last_element())


def test_torch_dtypes_and_shape_reads_in_the_body():
    func = P.torch_dtyped()
    assert [str(p.dtype) for p in func.params] == ["float16", "float32"]
    assert "launch(grid=[2, 1, 1]" in _source(func)


def test_alloc_var_with_a_positional_init():
    src = _source(P.var_init_positional())
    assert "-math.inf" in src or "-inf" in src.lower()


def test_slices_as_copy_regions_in_a_jit_factory():
    src = _source(P.slice_copy())
    assert "bx * 64" in src


@pytest.mark.gpu
def test_doc_forms_on_gpu():
    import torch

    a = torch.randn(96, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(P.strided_range())(a, b)
    ref = torch.zeros_like(a)
    ref[1::3] = a[1::3] + 1
    assert torch.equal(b, ref)

    x = torch.rand(64, 40, device="cuda") + 0.1
    x[3, 7] = -1.0; x[3, 20] = -2.0; x[40, 0] = -0.5; x[63, 39] = -3.0
    out = torch.empty(64, dtype=torch.int32, device="cuda")
    tilecute.compile(P.first_negative())(x, out)
    neg = x < 0
    ref = torch.where(neg.any(1), neg.int().argmax(1), torch.full_like(out, 40)).int()
    assert torch.equal(out, ref)

    x = torch.randn(64, 48, device="cuda")
    mask = (torch.arange(48, device="cuda") % 3 != 0).int()
    s = torch.empty(64, device="cuda")
    tilecute.compile(P.skip_sum())(x, mask, s)
    torch.testing.assert_close(s, (x * mask).sum(1), rtol=1e-5, atol=1e-4)

    a = torch.randn(100, device="cuda") * 2
    b = torch.empty_like(a)
    tilecute.compile(P.banded_var())(a, b)
    assert torch.equal(b, torch.where(a > 1, 1.0, torch.where(a < -1, -1.0, a * 0.5)))

    a = torch.randn(128, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(P.last_element())(a, b)
    assert torch.equal(b, a - a[-1])

    h = torch.randn(256, device="cuda", dtype=torch.float16)
    f = torch.empty(256, device="cuda")
    tilecute.compile(P.torch_dtyped())(h, f)
    assert torch.equal(f, h.float() * 3)

    a = torch.randn(128, 16, device="cuda")
    m = torch.empty(128, device="cuda")
    tilecute.compile(P.var_init_positional())(a, m)
    assert torch.equal(m, a.amax(1))

    a = torch.randn(256, device="cuda")
    assert torch.equal(P.slice_copy()(a), a * 2)

    lanes, warps = (torch.empty(256, dtype=torch.int32, device="cuda") for _ in range(2))
    tilecute.compile(P.lane_and_warp_ids())(lanes, warps)
    t = torch.arange(256, dtype=torch.int32, device="cuda")
    assert torch.equal(lanes, t % 16) and torch.equal(warps, t // 16 * 100 + t // 128)

    a = torch.randn(4, 32, device="cuda", dtype=torch.float64).float()
    b = torch.empty_like(a)
    tilecute.compile(P.reverse_decay())(a, b)
    ref = torch.empty_like(a)
    acc = torch.zeros(4, device="cuda")
    for i in range(31, -1, -1):
        acc = acc * 0.5 + a[:, i]
        ref[:, i] = acc
    torch.testing.assert_close(b, ref, rtol=1e-5, atol=1e-5)

    a = torch.randn(8, 32, device="cuda")
    b = torch.empty(8, device="cuda")
    tilecute.compile(P.corner_reads())(a, b)
    torch.testing.assert_close(b, 2 * a[:, -1] + a[-1, :8])

    a = torch.randn(1000, device="cuda")
    b = torch.full_like(a, -7.0)
    tilecute.compile(P.dynamic_doubling())(a, b)
    assert torch.equal(b, a * 2)

    a = torch.randn(32, 16, device="cuda")
    b = torch.empty(32, device="cuda")
    tilecute.compile(P.unroll_with_step())(a, b)
    torch.testing.assert_close(b, a[:, 1::2].sum(1), rtol=1e-5, atol=1e-5)

    w = torch.randn(200, 512, device="cuda", dtype=torch.float16)
    v = torch.randn(512, device="cuda", dtype=torch.float16)
    y = torch.empty(200, device="cuda")
    tilecute.compile(P.split_k_matvec())(w, v, y)
    torch.testing.assert_close(y, (w.double() @ v.double()).float(), rtol=1e-3, atol=1e-2)

    for n in (1000, T.dynamic("N")):
        kernel = tilecute.compile(P.bare_int_shapes(n), out_idx=-1, target="cuda",
                                  execution_backend="cython")
        a = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
        c = kernel(a)
        assert torch.equal(c, torch.where(a > 0, a, (a.float() * 0.125).bfloat16()))

    base = torch.randint(0, 120, (256,), device="cuda")
    for dtype, tensor in (("bool", base % 2 == 1), ("int64", base - 60),
                          ("uint8", base.to(torch.uint8) + 130), ("float64", base.double() / 7.0)):
        out = torch.empty(256, device="cuda")
        tilecute.compile(P.widen(dtype))(tensor, out)
        assert torch.equal(out, tensor.float() + 1), dtype

    a = torch.randn(64, device="cuda")
    n = torch.arange(-32, 32, dtype=torch.int32, device="cuda")
    f = torch.empty(64, 4, device="cuda")
    q = torch.empty(64, 2, dtype=torch.int32, device="cuda")
    tilecute.compile(P.python_operators())(a, n, f, q)
    ref = torch.stack([a.abs(), a.clamp(max=0.5), a.clamp(min=-0.5), -a / 4], 1)
    assert torch.equal(f, ref)
    assert torch.equal(q, torch.stack([torch.div(n, 3, rounding_mode="floor"), n % 3], 1))

    a = torch.rand(32, 8, device="cuda") * 6
    b = torch.empty(32, device="cuda")
    tilecute.compile(P.unroll_break())(a, b)
    stop = torch.cumsum((a > 5).int(), 1) > 0
    torch.testing.assert_close(b, torch.where(stop, 0.0, a).sum(1), rtol=1e-5, atol=1e-5)

    a = torch.randn(64, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(P.named_barriers())(a, b)
    idx = torch.arange(64, device="cuda")
    assert torch.equal(b, a[idx ^ 1] + a.flip(0))


def test_lane_and_warp_ids_with_a_warp_size():
    src = _source(P.lane_and_warp_ids())
    assert "L[tx] = tc_tx % 16" in src
    assert "W[tx] = tc_tx // 16 * 100 + tc_tx // 128" in src


def test_descending_range():
    src = _source(P.reverse_decay())
    assert "cutlass.range(0, 32)" in src and "i = 31 + i_iter * -1" in src


def test_negative_indices_in_two_dims_and_chained_assignment():
    src = _source(P.corner_reads())
    assert "A[tx, 31]" in src and "A[7, tx]" in src
    assert "u = chained" in src and "v = chained" in src


def _kernel_with(stmt):
    T.from_script(
        "@T.prim_func\n"
        "def unsupported(A: T.Tensor((32,), T.float32)):\n"
        "    with T.Kernel(1, threads=32) as _:\n"
        "        tx = T.get_thread_binding()\n"
        f"        {stmt}\n"
        "        A[tx] = A[tx] + 1.0\n")


@pytest.mark.parametrize("stmt, match", [
    # (TileLang 0.1.15's builder refuses a loop frame given to a Python builtin)
    ("for i, c in enumerate(T.serial(4)): A[tx] = A[tx] + c", r"T.serial is a statement form"),
    ("A[tx] = A[tx] + len(A)", "buffer 'A' passed to `len`"),
    ("assert A[tx] > 0", "use T.device_assert"),
])
def test_python_forms_the_guide_marks_unsupported_are_refused(stmt, match):
    with pytest.raises(FrontendError, match=match):
        _kernel_with(stmt)


def test_python_list_loop_the_guide_marks_unsupported_is_expanded():
    # python_compatibility.md marks `for x in list` and enumerate/zip unsupported, but
    # TileLang 0.1.15's builder (ctx_for) expands a loop over a Python iterable while tracing
    func = T.from_script(
        "@T.prim_func\n"
        "def expanded(A: T.Tensor((32,), T.float32)):\n"
        "    with T.Kernel(1, threads=32) as _:\n"
        "        tx = T.get_thread_binding()\n"
        "        for i, c in enumerate([1.0, 2.0]):\n"
        "            A[tx] = A[tx] + c * i\n")
    src = func.script()
    assert "A[tx] = A[tx] + T.float32(0.0)" in src and "A[tx] = A[tx] + T.float32(2.0)" in src
    assert "for " not in src


def test_dynamic_symbol_in_annotations_and_grid():
    src = _source(P.dynamic_doubling())
    assert "grid=[(K + 64 - 1) // 64, 1, 1]" in src
    assert "if bx * 64 + i < K" in src  # the tail of the last block is guarded


def test_unroll_with_start_and_step():
    src = _source(P.unroll_with_step())
    assert "cutlass.range_constexpr(0, 8)" in src and "j = 1 + j_iter * 2" in src


def test_while_over_a_python_int_is_refused_as_tilelang_does():
    with pytest.raises(FrontendError, match="`while` with a condition that is true at parse time"):
        P.python_int_while()


def test_coalesced_width_that_no_access_allows_is_refused():
    with pytest.raises(ValueError, match="vector_width=4.* is not legal here.*coalesced_width"):
        tilecute.compile(P.coalesced_tail()).ensure_cubin()


def test_split_k_matvec_guards_the_tail_and_orders_the_shared_slot():
    src = _source(P.split_k_matvec())
    assert "tc_tid = tc_tx + tc_ty * 32" in src and "tk = tc_ty" in src
    assert "divby=8), cute.make_layout(8)).load())" in src  # the T.vectorized loads
    body = src[src.index("total[tn] = cutlass.Float32(0.0)"):]
    # zeroed by tk == 0, then a barrier before the others' atomics, then one before the read
    atomic = body.index("tca.atomic_add(total, tn, part[0])")
    assert "cute.arch.sync_threads()" in body[:atomic]
    assert "cute.arch.sync_threads()" in body[atomic:body.index("y[bn * 32 + tn] = total[tn]")]
    assert "if bn * 32 + tn < 200:\n            y[bn * 32 + tn]" in body


@pytest.mark.parametrize("n", [1000, "dynamic"])
def test_bare_int_shapes_and_compile_arguments_of_the_elementwise_guide(n):
    n = T.dynamic("N") if n == "dynamic" else n
    kernel = tilecute.compile(P.bare_int_shapes(n), out_idx=-1, target="cuda",
                              execution_backend="cython")
    src = _source(kernel)
    assert "regs = cute.make_rmem_tensor((4,), cutlass.BFloat16)" in src
    bound = "1000" if isinstance(n, int) else "N"
    assert f"if b_x * 512 + (i1 + 3) < {bound}:" in src  # the tail block's 4-wide loads
    assert f"if b_x * 512 + (i2 + tc_lane11) < {bound}:" in src  # and its stores


_WIDENED = {
    "bool": "cutlass.Float32((A[bx * 128 + i] != 0))",
    "int8": "cutlass.Float32(A[bx * 128 + i])",
    "int64": "cutlass.Float32(A[bx * 128 + i])",
    "uint16": "cutlass.Float32(cutlass.Uint16(A[bx * 128 + i]))",
    "uint64": "cutlass.Float32(cutlass.Uint64(A[bx * 128 + i]))",
    "float64": "cutlass.Float32(A[bx * 128 + i])",
    "float8_e4m3fn": "cutlass.Float32(A[bx * 128 + i])",
    "float8_e5m2": "cutlass.Float32(A[bx * 128 + i])",
}


@pytest.mark.parametrize("dtype", sorted(_WIDENED))
def test_type_system_dtypes_as_strings_widen(dtype):
    src = _source(P.widen(dtype))
    assert f"B[bx * 128 + i] = {_WIDENED[dtype]} + cutlass.Float32(1.0)" in src


@pytest.mark.parametrize("dtype", ["float8_e3m4", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                   "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
                                   "float16x2", "int8x4"])
def test_type_system_dtypes_without_a_cute_type_are_refused_by_name(dtype):
    with pytest.raises(FrontendError, match=f"parameter 'A': unknown dtype '{dtype}'"):
        P.widen(dtype)


def test_python_operators_on_values():
    src = _source(P.python_operators())
    for line in ("F[tx, 0] = cute.math.absf(a)", "F[tx, 1] = cute.arch.fmin(a, cutlass.Float32(0.5))",
                 "F[tx, 2] = cute.arch.fmax(a, cutlass.Float32(-0.5))",
                 "Q[tx, 0] = n // 3", "Q[tx, 1] = n - n // 3 * 3"):
        assert line in src


def test_power_of_a_device_value_is_refused():
    with pytest.raises(FrontendError, match="operator Pow is not supported"):
        P.power_of_a_value()


def test_break_in_an_unrolled_loop_stops_the_row():
    src = _source(P.unroll_break())
    assert "while j_it[0] < 8 and broke[0] == 0:" in src
    assert "if broke[0] == 0:" in src  # the rest of the body skipped once broken


def test_continue_in_a_parallel_loop_skips_the_rest_of_the_element():
    """(Honored since helper AG's fold: what follows the continuing if runs in its else.)"""
    src = _source(P.parallel_continue())
    assert "if A[i] < cutlass.Float32(0.0):\n        pass\n    else:\n        B[i] = A[i] * cutlass.Float32(2.0)" in src


def test_warp_mask_and_named_barrier_arguments_are_kept():
    src = _source(P.named_barriers())
    assert "cute.arch.sync_warp(4294967295)" in src
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=64)" in src
