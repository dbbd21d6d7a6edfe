"""Per-thread scalar code over constant-unrolled loops, whose indices are Python ints in the
generated CuTe DSL (``cutlass.range_constexpr``), found by the fuzzer's ``scalar`` form
(tests/fuzz_tiles.py): each program builds an sm_90a cubin on the CPU, and on a GPU
(``-m gpu``) matches torch."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


# a stepped T.unroll binds its index with a Let (i = 2 + i_iter * 3): a Python int too, whose
# condition CuTe DSL's select_ refused (fuzz seed scalar_68: 'condition must be a Runtime value')
STEPPED_SELECT = """
import tilecute.language as T


@T.prim_func
def stepped_select(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32, 4), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(1, 12, 3):
            B[tx, (i - 1) // 3] = T.if_then_else(i + 2 <= 6, A[tx, i], -A[tx, i]) + T.if_then_else(
                i > 5 and tx < 16, 100.0, 0.0)
"""


def test_stepped_unrolled_index_in_a_condition_builds():
    kernel = tilecute.compile(T.from_script(STEPPED_SELECT))
    src = kernel.get_kernel_source()
    assert "i = 1 + i_iter * 3" in src and "cutlass.range_constexpr(0, 4)" in src
    assert "cutlass.select_(i" not in src and "tcmath.select(i + 2 <= 6" in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_stepped_unrolled_index_in_a_condition_matches_torch():
    import torch

    a = torch.randn(32, 16, device="cuda")
    b = torch.empty(32, 4, device="cuda")
    tilecute.compile(T.from_script(STEPPED_SELECT))(a, b)
    i = torch.tensor([1, 4, 7, 10], device="cuda").expand(32, 4)
    tx = torch.arange(32, device="cuda")[:, None].expand(32, 4)
    want = torch.where(i + 2 <= 6, a[:, [1, 4, 7, 10]], -a[:, [1, 4, 7, 10]]) + \
        torch.where((i > 5) & (tx < 16), 100.0, 0.0)
    torch.testing.assert_close(b, want)


# a float cast of a constant-unrolled loop's index: CuTe DSL keeps the Python number unrounded
# in a cutlass float (Float16(2049) holds 2049.0, Float32(16777217) 16777217.0) and runs
# arithmetic of such values in Python's double, so T.Cast("float16", i) stored 2049 and
# T.float32(i) * 0.1 was rounded once, not twice: the cast makes a runtime value
UNROLLED_FLOAT_CASTS = """
import tilecute.language as T


@T.prim_func
def unrolled_float_casts(B: T.Tensor((32, 8), "float32"), C: T.Tensor((32, 8), "float32"),
                         D: T.Tensor((32, 8), "float16")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(8):
            B[tx, i] = T.Cast("float32", T.Cast("float16", i * 1000 + 1))
            C[tx, i] = T.Cast("float32", T.Cast("bfloat16", i * 100 + 1)) + T.Cast("float32", i * 8388609)
            D[tx, i] = T.Cast("float16", i * 3) / T.Cast("float16", 7) * T.Cast("float16", 7)
"""


def test_float_casts_of_unrolled_indices_are_runtime_values():
    kernel = tilecute.compile(T.from_script(UNROLLED_FLOAT_CASTS))
    src = kernel.get_kernel_source()
    assert "tcmath.as_float(i * 1000 + 1, cutlass.Float16)" in src
    assert "tcmath.as_float(i * 8388609, cutlass.Float32)" in src
    import struct
    with open(kernel.ensure_cubin(), "rb") as f:
        cubin = f.read()
    # B's constants: i * 1000 + 1 rounded to float16 (3001 -> 3000, 5001 -> 5000), never unrounded
    for i in (3, 5, 7):
        assert struct.pack("<f", i * 1000.0) in cubin and struct.pack("<f", i * 1000.0 + 1) not in cubin


def test_as_float_rounds_python_numbers_in_the_ir():
    # the helper's premise: a cutlass float made of a Python number keeps it unrounded
    import cutlass
    assert cutlass.Float16(2049).value == 2049.0 and cutlass.Float32(16777217).value == 16777217.0


@pytest.mark.gpu
def test_float_casts_of_unrolled_indices_round_at_their_width():
    import torch

    b = torch.empty(32, 8, device="cuda")
    c = torch.empty(32, 8, device="cuda")
    d = torch.empty(32, 8, device="cuda", dtype=torch.float16)
    tilecute.compile(T.from_script(UNROLLED_FLOAT_CASTS))(b, c, d)
    i = torch.arange(8)
    want_b = (i * 1000 + 1).to(torch.float16).float()
    want_c = (i * 100 + 1).to(torch.bfloat16).float() + (i * 8388609).float()
    h = (i * 3).to(torch.float16)
    want_d = (h / torch.tensor(7.0, dtype=torch.float16)) * torch.tensor(7.0, dtype=torch.float16)
    assert want_b[3] == 3000.0  # (3001 rounds to even at float16's spacing 2)
    assert torch.equal(b.cpu(), want_b.expand(32, 8))
    assert torch.equal(c.cpu(), want_c.expand(32, 8))
    assert torch.equal(d.cpu(), want_d.expand(32, 8))


# the other range_constexpr indices are Python ints too: a T.vectorized loop's (its lanes,
# i + lane, unroll by range_constexpr) and a replicated T.Parallel nest's (every thread runs it
# whole, unrolled); their float casts stored the unrounded number (3001 for float16's 3000)
VECTORIZED_AND_REPLICATED_CASTS = """
import tilecute.language as T


@T.prim_func
def vectorized_and_replicated_casts(B: T.Tensor((32, 8), "float32"), C: T.Tensor((32, 8), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.vectorized(8):
            B[tx, i] = T.Cast("float32", T.Cast("float16", i * 1000 + 1))
        acc = T.alloc_fragment((8,), "float32")
        for i in T.Parallel(8):
            acc[i] = T.Cast("float32", T.Cast("float16", i * 1000 + 3))
        for i in T.serial(8):
            C[tx, i] = acc[i]
"""


def test_float_casts_of_vectorized_and_replicated_indices_are_runtime_values():
    kernel = tilecute.compile(T.from_script(VECTORIZED_AND_REPLICATED_CASTS))
    src = kernel.get_kernel_source()
    assert "cutlass.range_constexpr(0, 8, " in src  # (the vectorized loop)
    assert "tcmath.as_float((i + tc_lane" in src and " * 1000 + 1, cutlass.Float16)" in src
    assert "for i_1_ in cutlass.range_constexpr(0, 8):" in src  # (the replicated nest)
    assert "tcmath.as_float(i_1_ * 1000 + 3, cutlass.Float16)" in src
    import struct
    with open(kernel.ensure_cubin(), "rb") as f:
        cubin = f.read()
    # 3001 and 5001 round to float16's 3000 and 5000; 3003 to 3004, 5003 to 5004
    for rounded, unrounded in ((3000, 3001), (5000, 5001), (3004, 3003), (5004, 5003)):
        assert struct.pack("<f", rounded) in cubin and struct.pack("<f", unrounded) not in cubin


@pytest.mark.gpu
def test_float_casts_of_vectorized_and_replicated_indices_round_at_their_width():
    import torch

    b = torch.empty(32, 8, device="cuda")
    c = torch.empty(32, 8, device="cuda")
    tilecute.compile(T.from_script(VECTORIZED_AND_REPLICATED_CASTS))(b, c)
    i = torch.arange(8)
    assert torch.equal(b.cpu(), (i * 1000 + 1).to(torch.float16).float().expand(32, 8))
    assert torch.equal(c.cpu(), (i * 1000 + 3).to(torch.float16).float().expand(32, 8))


# a T.Parallel nest spread over the threads in unrolled steps binds a variable that moves only
# with the step (i = tc_k * 512 // 1024: 4 rows of 1024, 128 threads of 4 lanes) to a Python
# int: a condition on it is a Python bool, which CuTe DSL's select_ refused ('The condition
# must be a Runtime value')
SPREAD_STEP_SELECT = """
import tilecute.language as T


@T.prim_func
def spread_step_select(A: T.Tensor((4, 1024), "float32"), B: T.Tensor((4, 1024), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i, j in T.Parallel(4, 1024):
            B[i, j] = T.if_then_else(i < 2, A[i, j], -A[i, j])
"""


def test_condition_on_a_step_index_of_a_spread_nest_builds():
    kernel = tilecute.compile(T.from_script(SPREAD_STEP_SELECT))
    src = kernel.get_kernel_source()
    assert "cutlass.range_constexpr(8)" in src and "i = tc_k1 * 512 // 1024" in src
    assert "cutlass.select_(i < 2" not in src and "tcmath.select(i < 2, " in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_condition_on_a_step_index_of_a_spread_nest_matches_torch():
    import torch

    a = torch.randn(4, 1024, device="cuda")
    b = torch.empty(4, 1024, device="cuda")
    tilecute.compile(T.from_script(SPREAD_STEP_SELECT))(a, b)
    rows = torch.arange(4, device="cuda")[:, None]
    torch.testing.assert_close(b, torch.where(rows < 2, a, -a))


# more forms whose value is a Python number where their operands are: T.ceildiv (printed
# (a + b - 1) // b) and an integer T.abs (abs(x)) in a condition (cutlass.select_ of a Python
# bool: the cubin build failed, fuzz seeds scalar_154 / scalar_238), a T.if_then_else of Python
# values (tcmath.select picks a Python branch), one whose condition is known (printed as its
# branch), a float64 cast (a Float64 holding the Python number) and an fp8 cast: their float
# casts kept the unrounded number (3001 for float16's 3000, 23 for float8_e4m3's 24)
PYTHON_VALUED_FORMS = """
import tilecute.language as T


@T.prim_func
def python_valued_forms(A: T.Tensor((32, 8), "float32"), B: T.Tensor((32, 8), "float32"),
                        C: T.Tensor((32, 8), "float32"), D: T.Tensor((32, 8), "float32"),
                        E: T.Tensor((32, 8), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(8):
            A[tx, i] = T.if_then_else(T.ceildiv(i, 3) < 2, 1.0, -1.0) + T.if_then_else(T.abs(i - 4) > 1, 10.0, 0.0)
            B[tx, i] = T.Cast("float32", T.Cast("float16", T.if_then_else(i < 5, i * 1000 + 1, 7)))
            C[tx, i] = T.Cast("float32", T.Cast("float16", T.Cast("float64", i * 1000 + 3)))
            D[tx, i] = T.Cast("float32", T.Cast("float16", T.if_then_else(i < 100, i * 1000 + 7, tx)))
            E[tx, i] = T.Cast("float32", T.Cast("float8_e4m3", i * 3 + 2))
"""


def test_python_valued_forms_are_python_values():
    kernel = tilecute.compile(T.from_script(PYTHON_VALUED_FORMS))
    src = kernel.get_kernel_source()
    assert "tcmath.select((i + 3 - 1) // 3 < 2, " in src and "tcmath.select(abs(i - 4) > 1, " in src
    assert "cutlass.select_" not in src
    assert "tcmath.as_float(cutlass.Int32(tcmath.select(i < 5, i * 1000 + 1, 7)), cutlass.Float16)" in src
    assert "tcmath.as_float(cutlass.Float64(i * 1000 + 3), cutlass.Float16)" in src
    assert "tcmath.as_float(i * 1000 + 7, cutlass.Float16)" in src
    # (an integer to fp8 goes through a Float32 the compiler cannot fold away: MLIR would fold
    # the two conversions into one NVPTX refuses; tcmath.fp8_from_int)
    assert "tcmath.fp8_from_int(i * 3 + 2, cutlass.Float8E4M3FN)" in src
    import struct
    with open(kernel.ensure_cubin(), "rb") as f:
        cubin = f.read()
    # B: 3001, 4001 -> float16's 3000, 4000; C: 3003, 5003 -> 3004, 5004; D: 3007, 5007 ->
    # 3008, 5008 (E is rounded to float8_e4m3 at run time: its GPU test checks 23 -> 24)
    for rounded, unrounded in ((3000, 3001), (4000, 4001), (3004, 3003), (5004, 5003),
                               (3008, 3007), (5008, 5007)):
        assert struct.pack("<f", rounded) in cubin and struct.pack("<f", unrounded) not in cubin


@pytest.mark.gpu
def test_python_valued_forms_match_torch():
    import torch

    outs = [torch.empty(32, 8, device="cuda") for _ in range(5)]
    tilecute.compile(T.from_script(PYTHON_VALUED_FORMS))(*outs)
    i = torch.arange(8)
    want = [
        torch.where((i + 2) // 3 < 2, 1.0, -1.0) + torch.where((i - 4).abs() > 1, 10.0, 0.0),
        torch.where(i < 5, i * 1000 + 1, 7).to(torch.float16).float(),
        (i * 1000 + 3).double().to(torch.float16).float(),
        (i * 1000 + 7).to(torch.float16).float(),
        (i * 3 + 2).float().to(torch.float8_e4m3fn).float(),
    ]
    for got, w in zip(outs, want):
        assert torch.equal(got.cpu(), w.expand(32, 8))
