"""Constants the compiler folds or prints keep TileLang's meaning where the GPU run of the
fuzzer's scalar form found they did not (2026-11-28, H200):

- a cast of a constant to a narrow float folds to the value rounded to that type
  (``T.Cast("bfloat16", 3004)`` is 3008, as the conversion gives; it folded to 3004.0);
- floor division and modulo by a negative constant print through division by the positive
  constant (``i // -2`` of a loop index came out -2 at i = 5 and 6 from CuTe DSL's
  ``floordivsi``; ``(0 - i) // 2`` is the same quotient)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N


@pytest.mark.parametrize("value,dtype,want", [
    (3004, "bfloat16", 3008.0), (-3004, "bfloat16", -3008.0), (3000, "bfloat16", 3008.0),
    (2049, "float16", 2048.0), (2051, "float16", 2052.0), (65520.0, "float16", float("inf")),
    (16777217, "float32", 16777216.0), (0.5, "float16", 0.5),
])
def test_a_cast_constant_is_rounded_to_its_type(value, dtype, want):
    src = N.Const(value, "int32" if isinstance(value, int) else "float32")
    assert N.cast(src, dtype) == N.Const(want, dtype)
    # the same through a float32 cast after it (the fuzzer's seed 3: the bfloat16 step lost)
    assert N.cast(N.cast(src, dtype), "float32").value == want


def test_fp8_constants_keep_their_value_for_the_generated_code_to_encode():
    assert N.cast(N.Const(3, "int32"), "float8_e4m3") == N.Const(3.0, "float8_e4m3")


NEG_DIV = """
import tilecute.language as T


@T.prim_func
def neg_div(A: T.Tensor((32,), "int32"), Q: T.Tensor((32, 16), "int32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.serial(2, 7):
            Q[tx, i] = i // -2
            Q[tx, i + 5] = i % -3
        Q[tx, 12] = T.floordiv(A[tx], -4)
        Q[tx, 13] = T.floormod(A[tx], -4)
"""


def test_division_by_a_negative_constant_divides_by_the_positive_one_without_negating():
    kernel = tilecute.compile(T.from_script(NEG_DIV))
    src = kernel.get_kernel_source()
    # q = a // c and r = a % c of the positive c, then -q - (r != 0) and (r - c if r else 0):
    # no step negates a (0 - a wraps at the dtype's minimum: INT64_MIN // -3 came out negative)
    assert "Q[tx, i] = 0 - i // 2 - cutlass.Int32(cutlass.select_(i % 2 != 0, 1, 0))" in src
    assert "Q[tx, i + 5] = cutlass.Int32(cutlass.select_(i % 3 != 0, i % 3 - 3, 0))" in src
    assert "(0 - i)" not in src and "(0 - A" not in src
    assert "// -" not in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_division_by_a_negative_constant_matches_python():
    import torch

    a = torch.arange(-16, 16, device="cuda", dtype=torch.int32)
    a[0] = -2**31  # (its negation wraps: the division must not negate it)
    q = torch.zeros(32, 16, device="cuda", dtype=torch.int32)
    tilecute.compile(T.from_script(NEG_DIV))(a, q)
    got = q.cpu().tolist()
    for t, x in enumerate(a.cpu().tolist()):
        assert got[t][2:7] == [i // -2 for i in range(2, 7)]
        assert got[t][7:12] == [i % -3 for i in range(2, 7)]
        assert got[t][12:14] == [x // -4, x % -4]


NEG_TRUNC = """
import tilecute.language as T


@T.prim_func
def neg_trunc(A: T.Tensor((32,), "int32"), Q: T.Tensor((32, 16), "int32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.serial(6):
            Q[tx, i] = T.truncmod(i - 3, -2)
            Q[tx, i + 6] = T.truncdiv(i - 3, -2)
        Q[tx, 12] = T.truncmod(A[tx], -4)
        Q[tx, 13] = T.truncdiv(A[tx], -4)
"""


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def test_truncated_division_by_a_negative_constant_divides_by_the_positive_one():
    """C's a % c is a % -c and a / c is -(a / -c): CuTe DSL's remsi by a negative constant
    of a loop index gave wrong remainders on an H200 (fuzzer seed 520)."""
    kernel = tilecute.compile(T.from_script(NEG_TRUNC))
    src = kernel.get_kernel_source()
    assert "tcmath.truncmod(i - 3, 2)" in src and "0 - tcmath.truncdiv(i - 3, 2)" in src
    assert "tcmath.truncmod(A[tx], 4)" in src and ", -" not in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_truncated_division_by_a_negative_constant_matches_c():
    import torch

    a = torch.arange(-16, 16, device="cuda", dtype=torch.int32)
    q = torch.zeros(32, 16, device="cuda", dtype=torch.int32)
    tilecute.compile(T.from_script(NEG_TRUNC))(a, q)
    got = q.cpu().tolist()
    for t, x in enumerate(a.cpu().tolist()):
        assert got[t][0:6] == [(i - 3) - _c_div(i - 3, -2) * -2 for i in range(6)]
        assert got[t][6:12] == [_c_div(i - 3, -2) for i in range(6)]
        assert got[t][12:14] == [x - _c_div(x, -4) * -4, _c_div(x, -4)]


UNROLLED_TRUNC_CAST = """
import tilecute.language as T


@T.prim_func
def trunc_cast(F: T.Tensor((32, 4), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for j in T.unroll(4):
            F[tx, j] = T.Cast("float32", T.Cast("bfloat16", T.truncmod(j, 60) * 1001 + 1))
"""


def test_a_truncmod_of_unrolled_indices_is_rounded_where_cast():
    """T.truncmod of Python ints is a Python int in the generated code (tcmath folds it), so
    its cast to bfloat16 goes through tcmath.as_float, which rounds (the fuzzer's seeds 46,
    133, 373: 3004 stayed unrounded)."""
    kernel = tilecute.compile(T.from_script(UNROLLED_TRUNC_CAST))
    assert "tcmath.as_float(tcmath.truncmod(j, 60) * 1001 + 1, cutlass.BFloat16)" in \
        kernel.get_kernel_source()
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_a_truncmod_of_unrolled_indices_rounds_on_the_gpu():
    import torch

    f = torch.zeros(32, 4, device="cuda")
    tilecute.compile(T.from_script(UNROLLED_TRUNC_CAST))(f)
    want = torch.tensor([j * 1001 + 1 for j in range(4)], dtype=torch.float32).to(torch.bfloat16)
    assert torch.equal(f.cpu(), want.float().expand(32, 4))


@pytest.mark.parametrize("value,src,dtype,want", [
    (-1, "int32", "uint8", 255), (200, "int32", "int8", -56), (-129, "int32", "int8", 127),
    (2 ** 32 + 5, "int64", "int32", 5), (-3, "int32", "uint32", 2 ** 32 - 3),
    (65535, "uint16", "int16", -1), (3.7, "float32", "int32", 3), (-3.7, "float32", "int32", -3),
    (1e10, "float32", "int32", 2 ** 31 - 1), (300.0, "float32", "uint8", 255),
])
def test_a_cast_constant_converts_as_the_gpu_does(value, src, dtype, want):
    """An integer cast of a constant wraps modulo 2**bits (C's conversion; the fuzzer's scalar
    seed 1728 folded ``T.Cast("uint8", ~0)`` to -1, not 255); a float one truncates and
    saturates (PTX's cvt.rzi)."""
    assert N.cast(N.Const(value, src), dtype) == N.Const(want, dtype)


NARROW_CASTS = """
import tilecute.language as T


@T.prim_func
def narrow_casts(Q: T.Tensor((32, 12), "int32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for j in T.serial(1):  # a one-trip loop: its index is the constant 0
            Q[tx, 0] = T.Cast("int32", T.Cast("uint8", ~j))
            Q[tx, 1] = T.Cast("int32", T.Cast("int8", j + 200))
            Q[tx, 2] = T.Cast("int32", T.Cast("uint16", j - 3))
        for j in T.unroll(3):  # unrolled: Python ints in the generated code
            Q[tx, 3 + j] = T.Cast("int32", T.Cast("uint8", ~j))
            Q[tx, 6 + j] = T.Cast("int32", T.Cast("int8", j * 100 + 27))
        for j in T.serial(3):  # a runtime loop
            Q[tx, 9 + j] = T.Cast("int32", T.Cast("uint8", ~(j + tx)))
"""


def _narrow_casts_want(tx):
    return [255, -56, 65533] + [(~j) & 255 for j in range(3)] + \
        [((j * 100 + 27 + 128) & 255) - 128 for j in range(3)] + [(~(j + tx)) & 255 for j in range(3)]


def test_narrow_integer_casts_of_constants_wrap():
    kernel = tilecute.compile(T.from_script(NARROW_CASTS))
    src = kernel.get_kernel_source()
    assert "Q[tx, 0] = 255" in src and "Q[tx, 1] = -56" in src and "Q[tx, 2] = 65533" in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_narrow_integer_casts_of_constants_wrap_on_the_gpu():
    import torch

    q = torch.zeros(32, 12, dtype=torch.int32, device="cuda")
    tilecute.compile(T.from_script(NARROW_CASTS))(q)
    assert q.cpu().tolist() == [_narrow_casts_want(tx) for tx in range(32)]


def test_integer_arithmetic_on_constants_wraps_in_its_type():
    """Folded integer arithmetic wraps as the GPU's does (TVM folds to the type's
    representation too), instead of keeping a value its type cannot hold."""
    assert N.binop("add", N.Const(2 ** 31 - 1, "int32"), N.Const(1, "int32")) == \
        N.Const(-2 ** 31, "int32")
    assert N.binop("sub", N.Const(0, "uint32"), N.Const(1, "uint32")) == N.Const(2 ** 32 - 1, "uint32")
    assert N.binop("mul", N.Const(2 ** 20, "int64"), N.Const(2 ** 20, "int64")) == \
        N.Const(2 ** 40, "int64")


HALF_CONST = """
import tilecute.language as T


@T.prim_func
def half_const(H: T.Tensor((256,), "float16"), B: T.Tensor((256,), "bfloat16"),
               O: T.Tensor((2, 256), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            O[0, bx * 128 + i] = T.Cast("float32", H[bx * 128 + i] + T.float16(0.1))
            O[1, bx * 128 + i] = T.Cast("float32", B[bx * 128 + i] * T.bfloat16(0.1))
"""


def test_a_16_bit_float_constant_holds_its_types_value():
    """T.float16(0.1) is 0.0999755859375 (TVM's FloatImm and the GPU's conversion), also
    where the generated code computes 16-bit arithmetic in float32: the literal printed is
    the rounded value, not 0.1."""
    from tilecute.ir import nodes as N

    assert N.const(0.1, "float16").value == 0.0999755859375
    assert N.as_expr(0.1, "bfloat16").value == 0.10009765625
    assert N.const(0.1, "float32").value == 0.1  # (wider: the generated literal rounds it)
    kernel = tilecute.compile(T.from_script(HALF_CONST))
    src = kernel.get_kernel_source()
    assert "0.0999755859375" in src and "0.10009765625" in src
    assert "(0.1)" not in src
    kernel.ensure_cubin()
