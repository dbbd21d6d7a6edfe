"""Expression semantics against TileLang 0.1.15's CUDA for the same program (lowered on the
CPU).  TVM's arithmetic operators (``+ - * /``, comparisons, ``T.max``/``T.min``,
``T.if_then_else``) type a Python float float32 and a Python int int32 (int64 past it)
before BinaryOpMatchTypes, so:

* ``h * 0.1`` of a float16 / bfloat16 / fp8 ``h`` is a float32 product rounded once where
  it is stored (TileLang: ``(half_t)((float)h * 0.1f)``); tilecute gave the literal the
  operand's dtype (a float16 product with 0.1 rounded to float16, and ``fp8 * 0.1`` was
  rounded to fp8 before a float16 store);
* ``(a > 0) * 5`` is an int32 (0 or 5; tilecute made 5 a bool True: 0 or 1), and
  ``(a > 0) + (b > 0)`` keeps TVM's bool dtype but C computes it in int (2 where both
  hold; CuTe DSL's Boolean arithmetic gave a Boolean);
* ``a + 300`` / ``a < 200`` of an int8 ``a`` are int32 (tilecute refused the literal as
  out of int8's range).
"""

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N


def unary(fn, din, dout, n=128):
    @T.prim_func
    def k(A: T.Tensor((n,), din), B: T.Tensor((n,), din), O: T.Tensor((n,), dout)):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                O[i] = fn(A[i], B[i])
    return k


CASES = {
    # name: (fn, input dtype, output dtype, what tilecute's source holds)
    "half_times_float": (lambda a, b: a * 0.1, "float16", "float16",
                         "cutlass.Float16(cutlass.Float32(A[i]) * cutlass.Float32(0.1))"),
    "bf16_plus_float_to_f32": (lambda a, b: a + 1e-3, "bfloat16", "float32",
                               "cutlass.Float32(A[i]) + cutlass.Float32(0.001)"),
    "half_lt_float": (lambda a, b: T.if_then_else(a < 0.1, 1, 0), "float16", "int32",
                      "cutlass.Float32(A[i]) < cutlass.Float32(0.1)"),
    "half_exp_scaled": (lambda a, b: T.exp(a * 1.4426950408889634), "float16", "float16",
                        "cute.math.exp(cutlass.Float32(A[i]) * cutlass.Float32(1.4426950408889634))"),
    "fp8_times_float": (lambda a, b: T.cast(a * 0.1, "float16"), "float8_e4m3", "float16",
                        "cutlass.Float16(cutlass.Float32(A[i]) * cutlass.Float32(0.1))"),
    "bool_sum": (lambda a, b: (a > 0) + (b > 0), "int32", "int32",
                 "cutlass.Int32(cutlass.Int32(A[i] > 0) + cutlass.Int32(B[i] > 0))"),
    "bool_times_int": (lambda a, b: (a > 0) * 5, "int32", "int32",
                       "cutlass.Int32(A[i] > 0) * 5"),
    "bool_diff_float": (lambda a, b: T.cast((a > 0) - (b > 0), "float32"), "int32", "float32",
                        "cutlass.Float32(cutlass.Int32(A[i] > 0) - cutlass.Int32(B[i] > 0))"),
    "int8_plus_300": (lambda a, b: a + 300, "int8", "int32", "cutlass.Int32(A[i]) + 300"),
    "int8_lt_200": (lambda a, b: T.if_then_else(a < 200, 1, 0), "int8", "int32",
                    "cutlass.Int32(A[i]) < 200"),
    "uint8_min_minus_one": (lambda a, b: T.min(a, -1), "uint8", "int32",
                            "cutlass.min(cutlass.Int32(cutlass.Uint8(A[i])), -1)"),
}


def test_python_literals_are_typed_as_tvm_types_them():
    h = N.Var("h", "float16")
    assert (h * 0.1).dtype == "float32"          # float32 literal, float32 product
    assert (h * 2).dtype == "float16"            # an int beside a float takes the float
    assert (N.Var("d", "float64") + 0.1).dtype == "float64"
    c = N.Var("c", "bool")
    assert (c * 5).dtype == "int32" and (c + True).dtype == "bool"
    i8 = N.Var("x", "int8")
    assert (i8 + 3).dtype == "int8" and (i8 + 300).dtype == "int32"
    assert (N.Var("u", "uint8") - (-1)).dtype == "int32"


@pytest.mark.parametrize("name", list(CASES))
def test_source_computes_what_tilelang_computes(name):
    fn, din, dout, needle = CASES[name]
    src = tilecute.compile(unary(fn, din, dout)).get_kernel_source()
    assert needle in src, src


@pytest.mark.parametrize("name", ["half_times_float", "fp8_times_float", "bool_sum",
                                  "bool_diff_float", "int8_lt_200"])
def test_builds_a_cubin(name, tmp_path):
    fn, din, dout, _ = CASES[name]
    tilecute.compile(unary(fn, din, dout)).ensure_cubin()


def _reference(name, a, b):
    """TileLang's meaning (its CUDA), in numpy."""
    f32 = lambda x: np.asarray(x, np.float32)
    if name == "half_times_float":
        return (f32(a) * np.float32(0.1)).astype(np.float16)
    if name == "half_lt_float":
        return (f32(a) < np.float32(0.1)).astype(np.int32)
    if name == "bool_sum":
        return (a > 0).astype(np.int32) + (b > 0).astype(np.int32)
    if name == "bool_times_int":
        return (a > 0).astype(np.int32) * 5
    if name == "bool_diff_float":
        return ((a > 0).astype(np.int32) - (b > 0).astype(np.int32)).astype(np.float32)
    if name == "int8_plus_300":
        return a.astype(np.int32) + 300
    if name == "int8_lt_200":
        return np.ones(a.shape, np.int32)
    if name == "uint8_min_minus_one":
        return np.full(a.shape, -1, np.int32)
    raise KeyError(name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["half_times_float", "half_lt_float", "bool_sum", "bool_times_int",
                                  "bool_diff_float", "int8_plus_300", "int8_lt_200",
                                  "uint8_min_minus_one"])
def test_matches_tilelangs_meaning_on_gpu(name):
    import torch
    fn, din, dout, _ = CASES[name]
    n = 128
    rng = np.random.default_rng(0)
    if din == "float16":
        # halves near 0.1, where 0.1 rounded to float16 (0.0999755859375) and 0.1f differ
        a = (np.float16(0.1) + rng.integers(-20, 20, n) * np.float16(2 ** -14)).astype(np.float16)
        a[:4] = [np.float16(0.1), 1000.0, -3.5, 0.3]
    elif din == "uint8":
        a = rng.integers(0, 256, n).astype(np.uint8)
    else:
        a = rng.integers(-100, 100, n).astype(din)
    b = rng.integers(-3, 3, n).astype(np.int32 if din == "int32" else a.dtype)
    kernel = tilecute.compile(unary(fn, din, dout))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out = torch.empty(n, dtype=getattr(torch, dout), device="cuda")
    kernel(ta, tb, out)
    want = _reference(name, a, b)
    np.testing.assert_array_equal(out.cpu().numpy(), want)


def test_pow_with_an_integer_exponent_is_tilelangs_pow_of_int():
    """TileLang's ``T.pow(x, n)`` of an int ``n >= 1`` is ``tl::pow_of_int<n>(x)``: ``x``
    multiplied ``n - 1`` times in its own dtype (integers allowed); ``n == 0`` is 1; a
    negative or float exponent stays ``powf``.  tilecute called ``powf`` (a float16 cube
    rounded once, not at each product; an integer ``x`` refused)."""
    h, i = N.Var("h", "float16"), N.Var("i", "int32")
    assert T.pow(h, 3) == N.BinOp("mul", N.BinOp("mul", h, h, "float16"), h, "float16")
    assert T.pow(i, 2) == N.BinOp("mul", i, i, "int32")
    assert T.pow(h, T.int32(1)) is h and T.pow(i, 0) == N.Const(1, "int32")
    assert T.pow(h, -2).name == "pow"
    src = tilecute.compile(unary(lambda a, b: T.pow(a, 3), "float16", "float16")).get_kernel_source()
    assert "O[i] = A[i] * A[i] * A[i]" in src, src


@pytest.mark.gpu
def test_pow_of_int_on_gpu():
    import torch
    n = 128
    a = torch.linspace(-3, 3, n, device="cuda").half()
    kernel = tilecute.compile(unary(lambda a, b: T.pow(a, 3), "float16", "float16"))
    out = torch.empty(n, dtype=torch.float16, device="cuda")
    kernel(a, a, out)
    assert torch.equal(out, a * a * a)  # rounded to float16 at each product, as __hmul


def test_float_clamp_keeps_a_nan_as_tilelangs_clamp():
    """TileLang 0.1.15's ``T.clamp`` of floats is ``tl::clamp``: a NaN ``x`` (or bound) is
    the result, where ``fminf(fmaxf(x, lo), hi)`` gives ``lo``; tilecute's NaN-quiet
    min/max clamped a NaN to the lower bound.  Integers stay min/max."""
    src = tilecute.compile(unary(lambda a, b: T.clamp(a, -1.0, 1.0), "float32", "float32")).get_kernel_source()
    assert ("O[i] = cutlass.select_(cutlass.Boolean(cute.math.isnan(A[i])), A[i], "
            "cute.arch.fmin(cute.arch.fmax(A[i], cutlass.Float32(-1.0)), cutlass.Float32(1.0)))") in src, src
    src = tilecute.compile(unary(lambda a, b: T.clamp(a, -3, 3), "int32", "int32")).get_kernel_source()
    assert "O[i] = cutlass.min(cutlass.max(A[i], -3), 3)" in src, src


def test_half_clamp_with_a_runtime_bound_builds_a_cubin(tmp_path):
    k = tilecute.compile(unary(lambda a, b: T.clamp(a, T.float16(-1), b), "float16", "float16"))
    src = k.get_kernel_source()
    line = next(x for x in src.splitlines() if "O[i] =" in x)
    assert line.count("cute.math.isnan") == 2, line  # x and the run-time bound, not the constant
    k.ensure_cubin()


@pytest.mark.gpu
def test_float_clamp_of_nan_on_gpu():
    import torch
    n = 128
    a = torch.linspace(-3, 3, n, device="cuda")
    a[::7] = float("nan")
    kernel = tilecute.compile(unary(lambda a, b: T.clamp(a, -1.0, 1.0), "float32", "float32"))
    out = torch.empty(n, device="cuda")
    kernel(a, a, out)
    want = a.clamp(-1.0, 1.0)  # torch.clamp keeps NaN, as tl::clamp
    assert torch.equal(out.isnan(), want.isnan())
    assert torch.equal(out.nan_to_num(), want.nan_to_num())
