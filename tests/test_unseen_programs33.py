"""A thirty-third set of programs in TileLang's idioms (tests/unseen_programs33.py):
``T.assume`` inside a kernel.

CPU: each builds to an sm_90a cubin, and the bounds checks are read in the generated
source: an access an assume proves in bounds has none (TileLang's LegalizeSafeMemoryAccess
trusts the assume over the rest of its scope), one outside the assume's body keeps its.
GPU: each matches a torch reference (run: ``pytest -q -m gpu tests/test_unseen_programs33.py``);
not run in the session that wrote them (no GPU)."""

import types

import pytest

import tilecute
import rounds
import unseen_programs33 as P

NAMES = sorted(n for n, f in vars(P).items() if isinstance(f, types.FunctionType))


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name, **kw):
    return rounds.kernel_body(rounds.source(getattr(P, name)(**kw)))


test_program_builds_a_cubin = rounds.builds_cubin(NAMES, rounds.kernel_of(P), "sm_90a")


def test_assume_in_a_serial_loop_drops_the_check():
    src = _body("assume_window_zero")
    assert "        # T.assume(l + i >= 0 and l + i < N)\n        A[l + i] = cutlass.Float32(0.0)" in src
    assert "if " not in src


def test_assume_before_a_loop_covers_the_loop():
    src = _body("assume_thread_row_copy")
    assert "    # T.assume(row < M)\n" in src
    assert "        B[row, j] = A[row, j] * cutlass.Float16(2.0)" in src
    assert "if " not in src and "tc_ld" not in src


def test_assume_in_a_parallel_body():
    src = _body("assume_parallel_tail")
    assert "    Y[bx * 128 + i] = X[bx * 128 + i] * cutlass.Float32(3.0)" in src
    assert "if " not in src


def test_assume_reaches_the_end_of_its_branch_only():
    src = _body("assume_in_branch_only")
    assert "    if k > 0:\n        # T.assume(t + k < N)\n        B[t + k] = 1\n" in src
    assert "    if t < N:\n        A[t] = 2" in src  # after the branch: checked


def test_assume_of_a_disjunction_keeps_the_check():
    src = _body("assume_either_keeps_checks")
    assert "    # T.assume(k < 0 or t + k < N)\n    if t + k >= 0 and t + k < N:\n        A[t + k] = 7" in src


def test_assume_on_a_loaded_variable_keeps_the_check():
    src = _body("assume_offset_load")
    assert "# T.assume(off[0] >= 0 and off[0] < N)" in src
    assert "if off[0] >= 0 and off[0] < N:\n        tc_ld1 = X[off[0]]" in src


def test_assume_at_the_top_of_a_vectorized_body_covers_the_vector_path():
    # the epilogue's 2-wide vector stores of C: the row assume holds at every lane, so no
    # per-lane fallback path is emitted
    src = _body("assume_pipelined_gemm")
    assert "cute.make_tensor(C.iterator + cute.assume((by1 * 64 + i) * 256 + bx1 * 64 + j, divby=2)" in src
    assert "else:" not in src and "< M" not in src.replace("T.assume(by1 * 64 + i < M)", "")


def test_assume_in_a_vectorized_loop_body():
    # the body's assume does not stop T.vectorized from becoming vector instructions, and
    # covers their check: no per-lane fallback
    src = _body("assume_vectorized_row_chunk")
    assert "tc_vec2.store(cute.make_tensor(A.iterator + cute.assume(t * N + base + i, divby=4), " \
        "cute.make_layout(4)).load())" in src
    assert "cute.make_tensor(B.iterator + cute.assume(t * N + base + i, divby=4), " \
        "cute.make_layout(4)).store(tc_vec1.load())" in src
    assert "if " not in src and "else:" not in src


def test_host_assume_is_a_fact_in_the_kernels():
    src = _body("assume_top_level_window")
    assert "    B[bx * 128 + i] = A[l + bx * 128 + i] * cutlass.Float32(2.0)" in src
    assert "if " not in src


def test_vectorized_loop_over_a_let_bound_offset():
    src = _body("vectorized_let_base")
    assert "tc_vec2.store(cute.make_tensor(A.iterator + cute.assume(base + i, divby=4), " \
        "cute.make_layout(4)).load())" in src
    assert "cute.make_tensor(B.iterator + cute.assume(base + i, divby=4), cute.make_layout(4))" \
        ".store(tc_vec1.load())" in src
    src = _body("vectorized_let_base_pairs")  # an even offset: pairs
    assert "for i in cutlass.range_constexpr(0, 6, 2):" in src
    assert "cute.make_tensor(A.iterator + cute.assume(base + i, divby=2), cute.make_layout(2))" in src


def test_vectorized_loop_down_a_column_major_tensor():
    src = _body("vectorized_column_major_copy")
    assert "for row in cutlass.range_constexpr(0, 128, 4):" in src
    assert "tc_vec2.store(cute.make_tensor(A.iterator + cute.assume(row + col * 132, divby=4), " \
        "cute.make_layout(4)).load())" in src
    assert "cute.make_tensor(B.iterator + cute.assume(row + col * 128, divby=4), " \
        "cute.make_layout(4)).store(tc_vec1.load())" in src
    src = _body("vectorized_column_major_copy", stride_a=130)  # even columns only: pairs
    assert "cute.make_tensor(tc_vec2.iterator + 2, cute.make_layout(2)).store(" \
        "cute.make_tensor(A.iterator + cute.assume(row + col * 130 + 2, divby=2), cute.make_layout(2)).load())" in src


def test_assume_is_kept_in_the_script():
    import tilecute.language as T
    text = P.assume_window_zero().script()
    assert "            T.assume(l + i >= 0 and l + i < N)\n            A[l + i] = " in text
    assert "T.assume(l + i >= 0 and l + i < N)" in T.from_script(text).script()


# ---- raw cp.async widened over a T.vectorized loop -----------------------------------------
def test_narrow_cp_async_lanes_widen_to_one_copy():
    src = _body("cp_async_lanes_half")  # 8 float16 lanes of 2 bytes: one 16-byte copy
    assert "    for i in cutlass.range_constexpr(0, 1):\n        tcc.copy_async(cute.make_tensor(" \
        "A.iterator + cute.assume(bx * 256 + t * 8 + i * 8, divby=8), cute.make_layout(8)), " \
        "cute.make_tensor(S.iterator + cute.assume(t * 8 + i * 8, divby=8), cute.make_layout(8)), 128)" in src
    src = _body("cp_async_lanes_int8_pairs")  # 4 lanes of 2 int8: one 8-byte copy
    assert "cute.make_tensor(S.iterator + cute.assume(t * 8 + i * 4 * 2, divby=8), cute.make_layout(8)), 64)" in src


def test_narrow_cp_async_uint8_lanes_make_four_bytes():
    src = _body("cp_async_lanes_uint8_quad")
    assert "cute.make_tensor(S.iterator + cute.assume(t * 4 + i * 4, divby=4), cute.make_layout(4)), 32)" in src


def test_narrow_cp_async_lanes_past_16_bytes_take_steps():
    src = _body("cp_async_lanes_bf16_two_steps")  # 16 lanes of 2 bytes from start 16
    assert "    for i in cutlass.range_constexpr(0, 2):\n" in src
    assert "cute.make_tensor(S.iterator + cute.assume(t * 16 + (16 + i * 8) - 16, divby=8), " \
        "cute.make_layout(8)), 128)" in src
    assert src.count("tcc.copy_async(") == 1


def _narrow_in(lanes):
    import tilecute.language as T

    @T.prim_func
    def main(A: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((64,), T.float16)
            for i in T.vectorized(lanes):
                T.ptx_cp_async(T.access_ptr(S[i * 2], "w", 1), T.access_ptr(A[i * 2], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
    return main


def test_narrow_cp_async_that_does_not_widen_is_refused_by_name():
    from tilecute.language import FrontendError
    # lanes two elements apart are not contiguous: TileLang's vectorizer leaves them 2 bytes
    with pytest.raises(FrontendError, match=r"test_unseen_programs33.py:\d+: in prim_func 'main': "
                       r"T.ptx_cp_async: 1 float16 elements are 2 bytes; cp.async copies 4, 8 or 16"):
        _narrow_in(4)


# ---- GPU: against torch ----------------------------------------------------------------------
def _gpu():
    import torch
    return torch


@pytest.mark.gpu
def test_gpu_assume_window_zero():
    torch = _gpu()
    A = torch.ones(100, device="cuda")
    tilecute.compile(P.assume_window_zero())(A, 10, 40)
    ref = torch.ones(100)
    ref[10:41] = 0
    assert torch.equal(A.cpu(), ref)


@pytest.mark.gpu
def test_gpu_assume_thread_row_copy():
    torch = _gpu()
    A = torch.randn(64, 37, device="cuda", dtype=torch.float16)
    B = torch.empty_like(A)
    tilecute.compile(P.assume_thread_row_copy())(A, B)
    assert torch.equal(B, A * 2)


@pytest.mark.gpu
def test_gpu_assume_parallel_tail():
    torch = _gpu()
    X = torch.randn(1024, device="cuda")
    Y = torch.empty_like(X)
    tilecute.compile(P.assume_parallel_tail())(X, Y)
    assert torch.equal(Y, X * 3)


@pytest.mark.gpu
def test_gpu_assume_in_branch_only():
    torch = _gpu()
    A = torch.zeros(40, dtype=torch.int32, device="cuda")
    B = torch.zeros(40, dtype=torch.int32, device="cuda")
    tilecute.compile(P.assume_in_branch_only())(A, B, 5)
    ref_a, ref_b = torch.zeros(40, dtype=torch.int32), torch.zeros(40, dtype=torch.int32)
    ref_a[:32] = 2
    ref_b[5:37] = 1
    assert torch.equal(A.cpu(), ref_a) and torch.equal(B.cpu(), ref_b)


@pytest.mark.gpu
def test_gpu_assume_offset_load():
    torch = _gpu()
    X = torch.randn(500, device="cuda")
    Idx = torch.randint(0, 500, (64,), dtype=torch.int32, device="cuda")
    Y = torch.empty(64, device="cuda")
    tilecute.compile(P.assume_offset_load())(X, Idx, Y)
    assert torch.equal(Y, X[Idx.long()])


@pytest.mark.gpu
def test_gpu_assume_pipelined_gemm():
    torch = _gpu()
    A = torch.randn(192, 256, device="cuda", dtype=torch.float16)
    B = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    C = torch.empty(192, 256, device="cuda")
    tilecute.compile(P.assume_pipelined_gemm())(A, B, C)
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gpu_assume_vectorized_row_chunk():
    torch = _gpu()
    A = torch.randn(128, 512, device="cuda")
    B = torch.zeros_like(A)
    tilecute.compile(P.assume_vectorized_row_chunk())(A, B)
    ref = torch.zeros_like(A)
    for t in range(128):
        ref[t, t * 4:t * 4 + 4] = A[t, t * 4:t * 4 + 4] + 1
    assert torch.equal(B, ref)


@pytest.mark.gpu
def test_gpu_cp_async_lanes():
    torch = _gpu()
    A = torch.randn(4096, device="cuda", dtype=torch.float16)
    B = torch.empty_like(A)
    tilecute.compile(P.cp_async_lanes_half())(A, B)
    assert torch.equal(B, A * 2)
    A8 = torch.randint(-100, 100, (2048,), device="cuda", dtype=torch.int8)
    B8 = torch.empty_like(A8)
    tilecute.compile(P.cp_async_lanes_int8_pairs())(A8, B8)
    assert torch.equal(B8, A8 + 1)
    Au = torch.randint(0, 255, (1024,), device="cuda", dtype=torch.uint8)
    Bu = torch.empty_like(Au)
    tilecute.compile(P.cp_async_lanes_uint8_quad())(Au, Bu)
    ref = torch.cat([torch.roll(Au[b * 256:(b + 1) * 256], -4) for b in range(4)])
    assert torch.equal(Bu, ref)
    Ab = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    Bf = torch.empty(4096, device="cuda")
    tilecute.compile(P.cp_async_lanes_bf16_two_steps())(Ab, Bf)
    assert torch.equal(Bf, Ab.float())


@pytest.mark.gpu
def test_gpu_assume_top_level_window():
    torch = _gpu()
    A = torch.randn(1000, device="cuda")
    B = torch.empty(256, device="cuda")
    k = tilecute.compile(P.assume_top_level_window())
    k(A, B, 700)
    assert torch.equal(B, A[700:956] * 2)
    with pytest.raises(RuntimeError, match="Assume"):
        k(A, B, 800)  # the launcher checks the host assume


@pytest.mark.gpu
def test_gpu_vectorized_let_base():
    torch = _gpu()
    A = torch.randn(4096, device="cuda")
    B = torch.empty_like(A)
    tilecute.compile(P.vectorized_let_base())(A, B)
    assert torch.equal(B, A * 2)
    A = torch.randn(3072, device="cuda")
    B = torch.empty_like(A)
    tilecute.compile(P.vectorized_let_base_pairs())(A, B)
    assert torch.equal(B, A + 1)


@pytest.mark.gpu
def test_gpu_assume_either_keeps_checks():
    torch = _gpu()
    A = torch.zeros(40, dtype=torch.int32, device="cuda")
    tilecute.compile(P.assume_either_keeps_checks())(A, 8)  # (the assume holds: t + 8 < 40)
    ref = torch.zeros(40, dtype=torch.int32)
    ref[8:] = 7
    assert torch.equal(A.cpu(), ref)


@pytest.mark.gpu
def test_gpu_vectorized_column_major_copy():
    torch = _gpu()
    for sa in (132, 130):
        base_a = torch.randn(256, sa, device="cuda")
        base_b = torch.zeros(256, 128, device="cuda")
        A = torch.as_strided(base_a, (128, 256), (1, sa))
        B = torch.as_strided(base_b, (128, 256), (1, 128))
        tilecute.compile(P.vectorized_column_major_copy(stride_a=sa))(A, B)
        assert torch.equal(B, A * 0.5)
