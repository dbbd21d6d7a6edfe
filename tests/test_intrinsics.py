"""TileLang's elementwise math and intrinsic forms (``T.pow``, ``T.erf``, ``T.isnan``,
``T.truncdiv``, ``T.popcount`` ...): the IR each builds (printed, and read back), its
TileLang meaning where it differs from a neighbour (``T.truncdiv`` against ``//``,
``T.round``'s halfway cases), the CuTe DSL it lowers to, a real sm_90a cubin for each,
the errors, and (GPU) the values against torch."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json
from tilecute.ir.validate import ValidationError, validate
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower

FLOAT_UNARY = ("tan", "atan", "acos", "asin", "sinh", "cosh", "erf", "log10", "log1p", "exp10",
               "trunc", "round")
FLOAT_BINARY = ("pow", "fmod", "atan2")
PREDICATES = ("isnan", "isinf", "isfinite")
INTEGER = ("truncdiv", "truncmod", "popcount", "clz")


def _script(body: str, params: str, grid: str = "T.ceildiv(M, 128)", threads: int = 128) -> str:
    return ("import tilecute.language as T\n\nM = T.dynamic('M')\n\n\n@T.prim_func\n"
            f"def kern({params}):\n    with T.Kernel({grid}, threads={threads}) as bx:\n"
            + textwrap.indent(textwrap.dedent(body), "        "))


def _roundtrip(func):
    """The printer writes what the frontend reads back, and the JSON form holds it."""
    assert T.from_script(func.script()) == func
    assert from_json(func.to_json()) == func
    return func


def _error(text: str, needle: str) -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)
    assert f"<script>:{line}:" in str(e.value), str(e.value)
    return str(e.value)


# ---- one kernel per form, in TileLang's idioms ------------------------------------------------
def elementwise(call: str, dtype: str, out_dtype: str = "", in_dtype: str = "") -> str:
    """``B = f(A[, C])`` over a tile: a T.copy into a fragment, a T.Parallel that applies
    ``call`` (``a``, ``c``: the two inputs), a T.copy back, as TileLang kernels write it."""
    in_dtype, out_dtype = in_dtype or dtype, out_dtype or dtype
    return _script(f"""
        a_frag = T.alloc_fragment((128,), "{in_dtype}")
        c_frag = T.alloc_fragment((128,), "{in_dtype}")
        b_frag = T.alloc_fragment((128,), "{out_dtype}")
        T.copy(A[bx * 128], a_frag)
        T.copy(C[bx * 128], c_frag)
        for i in T.Parallel(128):
            a = a_frag[i]
            c = c_frag[i]
            b_frag[i] = {call}
        T.copy(b_frag, B[bx * 128])
    """, f'A: T.Tensor((M,), "{in_dtype}"), C: T.Tensor((M,), "{in_dtype}"), '
         f'B: T.Tensor((M,), "{out_dtype}")')


# form -> (the call, input dtype, output dtype, what the CuTe DSL source holds)
CASES = {
    **{name: (f"T.{name}(a)", "float32", "float32", f"cute.math.{name}(")
       for name in FLOAT_UNARY if name not in ("round", "exp10")},
    "round": ("T.round(a)", "float32", "float32", "cute.math.roundeven("),
    "round_away": ('T.round(a, rounding_mode="ties-away-from-zero")', "float32", "float32",
                   "cute.math.round("),
    "exp10": ("T.exp10(a)", "float32", "float32", "cute.math.pow(cutlass.Float32(10.0), "),
    "pow": ("T.pow(a, c)", "float32", "float32", "cute.math.pow("),
    "fmod": ("T.fmod(a, c)", "float32", "float32", "cute.math.rem("),
    "atan2": ("T.atan2(a, c)", "float32", "float32", "cute.math.atan2("),
    **{name: (f"T.if_then_else(T.{name}(a), T.float32(1.0), T.float32(0.0))", "float32",
              "float32", f"cutlass.Boolean(cute.math.{name}(") for name in PREDICATES},
    "truncdiv": ("T.truncdiv(a, c)", "int32", "int32", "tcmath.truncdiv("),
    "truncmod": ("T.truncmod(a, c)", "int32", "int32", "tcmath.truncmod("),
    "popcount": ("T.popcount(a)", "int32", "int32", "cute.arch.popc("),
    "clz": ("T.clz(a)", "int32", "int32", "cutlass.Int32(cute.arch.clz("),
    "likely": ("T.if_then_else(T.likely(a > c), a, c)", "float32", "float32", "cutlass.select_("),
    # 16-bit floats compute in float32 and convert back (TileLang's CUDA: powf, tanf ...)
    "erf_f16": ("T.erf(a)", "float16", "float16",
                "cutlass.Float16(cute.math.erf(cutlass.Float32(a)))"),
    "pow_bf16": ("T.pow(a, c)", "bfloat16", "bfloat16",
                 "cutlass.BFloat16(cute.math.pow(cutlass.Float32(a), cutlass.Float32(c)))"),
    "isnan_f16": ("T.if_then_else(T.isnan(a), a, c)", "float16", "float16",
                  "cutlass.Boolean(cute.math.isnan(cutlass.Float32(a)))"),
    # unsigned: arith.divui (casts: a bounds-checked T.copy of a uint32 tensor does not build)
    "truncdiv_u32": ('T.Cast("int32", T.truncdiv(T.Cast("uint32", a), T.Cast("uint32", c)))',
                     "int32", "int32", "tcmath.truncdiv(cutlass.Uint32(a), cutlass.Uint32(c))"),
    "clz_i64": ("T.clz(a)", "int64", "int32", "cutlass.Int32(cute.arch.clz("),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_form_prints_lowers_and_builds_a_cubin(case, tmp_path):
    call, in_dtype, out_dtype, lowered = CASES[case]
    func = _roundtrip(T.from_script(elementwise(call, in_dtype, out_dtype, in_dtype)))
    source = emit_cute(lower(func, "sm_90a"))
    assert lowered in source, source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_all_forms_in_one_scalar_kernel_build_for_sm80(tmp_path):
    """Every form in one thread-per-element kernel (no tile ops), for sm_80 too."""
    func = _roundtrip(T.from_script(_script("""
        for i in T.Parallel(128):
            x = A[bx * 128 + i]
            n = I[bx * 128 + i]
            v = T.tan(x) + T.atan(x) + T.acos(x) + T.asin(x) + T.sinh(x) + T.cosh(x) + T.erf(x)
            v = v + T.log10(x) + T.log1p(x) + T.exp10(x) + T.trunc(x) + T.round(x)
            v = v + T.pow(x, 2.0) + T.fmod(x, 0.5) + T.atan2(x, 1.0) + T.round(x, "ties-away-from-zero")
            if T.likely(T.isfinite(v)) and not T.isnan(x) and not T.isinf(x):
                B[bx * 128 + i] = v
            J[bx * 128 + i] = T.truncdiv(n, 3) + T.truncmod(n, -5) + T.popcount(n) + T.clz(n)
    """, 'A: T.Tensor((M,), "float32"), I: T.Tensor((M,), "int32"), '
         'B: T.Tensor((M,), "float32"), J: T.Tensor((M,), "int32")')))
    assert "if T.isfinite(v_2) and not T.isnan(x) and not T.isinf(x):" in func.script()
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- lanes, warps, warp groups, T.sync_warp ------------------------------------------------------
WARPS = _script("""
    s = T.alloc_shared((256,), "float32")
    tid = T.get_thread_binding(0)
    s[tid] = A[bx * 256 + tid]
    T.sync_warp()
    lane = T.get_lane_idx()
    v = s[T.get_warp_idx() * 32 + (lane ^ 1)]
    T.sync_warp(0xFFFF)
    B[bx * 256 + tid] = v
    W[bx * 256 + tid] = lane + T.get_warp_idx_sync() * 100 + T.get_warp_group_idx() * 10000 + \\
        T.get_lane_idx(16) * 1000000 + T.get_warp_group_idx(32, 2) * 100000000
""", 'A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32"), W: T.Tensor((M,), "int32")',
    grid="T.ceildiv(M, 256)", threads=256)


def test_lane_warp_and_warp_group_are_tilelangs_divisions_of_the_thread_index(tmp_path):
    """tl::get_lane_idx / get_warp_idx / get_warp_group_idx: the linear thread index % 32,
    // 32, // (32 * 4), built from T.get_thread_binding (so every pass knows they vary by
    thread); T.sync_warp is bar.warp.sync."""
    func = _roundtrip(T.from_script(WARPS))
    script = func.script()
    assert "lane = T.get_thread_binding(0) % 32\n" in script
    assert "v = s[T.get_thread_binding(0) // 32 * 32 + (lane ^ 1)]" in script
    assert ("lane + T.get_thread_binding(0) // 32 * 100 + T.get_thread_binding(0) // 128 * 10000 "
            "+ T.get_thread_binding(0) % 16 * 1000000 + T.get_thread_binding(0) // 64 * 100000000") in script
    assert "        T.sync_warp()\n" in script and "        T.sync_warp(T.uint32(65535))\n" in script
    source = emit_cute(lower(func, "sm_90a"))
    assert "cute.arch.sync_warp()\n" in source and "cute.arch.sync_warp(65535)\n" in source
    assert "lane = tc_tx % 32" in source  # provably non-negative: Python's % is C's here
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_thread_forms_take_the_kernels_thread_dims():
    """A 2-D block: TileLang's linear index threadIdx.x + blockDim.x * threadIdx.y."""
    func = T.from_script(_script("""
        B[bx * 128 + T.get_thread_binding(0)] = T.get_warp_idx() + T.get_lane_idx(0)
    """, 'B: T.Tensor((M,), "int32")', threads="(32, 4)"))
    tid = "(T.get_thread_binding(0) + T.get_thread_binding(1) * 32)"
    # a warp size that is not positive is the default, as tl::get_lane_idx has it
    assert f"= {tid} // 32 + {tid} % 32\n" in func.script()
    i = N.Var("i", "int32")
    lane = T.get_lane_idx(i, threads=(128,))
    assert lane.b == N.Select(N.Cmp("gt", i, N.Const(0, "int32")), i, N.Const(32, "int32"), "int32")


@pytest.mark.parametrize("call,message", [
    ("T.get_lane_idx(1.5)", "T.get_lane_idx: warp_size must be an integer, got 1.5"),
    ("T.get_warp_group_idx(warps_per_group=2)",
     "T.get_warp_group_idx expects `warp_size` when specifying `warps_per_group`"),
    ("T.get_warp_idx(threads=4)", "T.get_warp_idx: got an unexpected keyword argument 'threads'"),
    ("T.sync_warp(0)", "T.sync_warp: mask=0x0 must be a nonzero 32-bit lane mask"),
    ("T.sync_warp(1.0)", "mask must be an integer lane mask"),
    ("T.sync_warp(1, 2)", "T.sync_warp: unexpected positional argument 2"),
])
def test_thread_form_errors(call, message):
    body = f"y = {call}" if not call.startswith("T.sync_warp") else call
    msg = _error(_script(f"""
        {body}
        A[bx] = 1.0
    """, 'A: T.Tensor((M,), "float32")'), call)
    assert message in msg, msg


# ---- what each means ---------------------------------------------------------------------------
def test_truncdiv_truncmod_round_toward_zero_where_floordiv_floors():
    assert (T.truncdiv(-7, 2), T.truncmod(-7, 2), T.truncdiv(7, -2), T.truncmod(7, -2)) == (-3, -1, -3, 1)
    assert (T.floordiv(N.Const(-7, "int32"), 2), T.floormod(N.Const(-7, "int32"), 2)) == \
        (N.Const(-4, "int32"), N.Const(1, "int32"))
    assert T.truncdiv(N.Const(-7, "int32"), 2) == N.Const(-3, "int32")
    assert T.truncmod(N.Const(-7, "int32"), N.Const(2, "int32")) == N.Const(-1, "int32")
    n = N.Var("n", "int32")
    assert T.truncdiv(n, 2) == N.Call("truncdiv", (n, N.Const(2, "int32")), "int32")
    assert n // 2 == N.BinOp("floordiv", n, N.Const(2, "int32"), "int32")
    # an int64 operand widens the other, as for every binary operator
    wide = T.truncmod(n, N.Var("m", "int64"))
    assert wide.dtype == "int64" and wide.args[0] == N.Cast("int64", n)


def test_constants_fold_as_tvm_folds_them():
    x = N.Var("x", "float16")
    assert T.isnan(N.Var("i", "int32")) == N.Const(False, "bool")  # an integer is never NaN
    assert T.isfinite(N.Var("i", "int32")) == N.Const(True, "bool")
    assert T.isinf(N.Const(float("inf"), "float32")) == N.Const(True, "bool")
    assert T.isnan(x) == N.Call("isnan", (x,), "bool")  # widened in the generated code
    assert T.popcount(N.Const(-1, "int32")) == N.Const(32, "int32")
    assert T.clz(N.Const(1, "int32")) == N.Const(31, "int32")
    assert T.clz(N.Const(0, "int64")) == N.Const(64, "int32")
    assert T.clz(N.Var("u", "uint64")).dtype == "int32"
    # round and trunc leave an integer as it is (TVM's round/trunc)
    i = N.Var("i", "int32")
    assert T.round(i) is i and T.trunc(i) is i
    assert T.round(x) == N.Call("round", (x,), "float16")
    assert T.round(x, "ties-away-from-zero") == N.Call("round_ties_away_from_zero", (x,), "float16")
    # an integer argument of the float math converts to float32, as for T.exp
    assert T.erf(i) == N.Call("erf", (N.Cast("float32", i),), "float32")
    # an integer exponent is TileLang's pow_of_int: x multiplied in its own dtype
    assert T.pow(x, 2) == N.BinOp("mul", x, x, "float16")
    assert T.pow(x, 2.0) == N.Call("pow", (N.Cast("float32", x), N.Const(2.0, "float32")), "float32")
    assert T.pow(i, 0.5).dtype == "float32"
    # T.likely is its condition
    cond = N.Cmp("lt", i, N.Const(4, "int32"))
    assert T.likely(cond) is cond


@pytest.mark.parametrize("call,message", [
    ("T.pow(n, n)", "T.pow takes floats, got int32 and int32"),
    ("T.fmod(n, 2)", "T.fmod takes floats"),
    ("T.atan2(n, n)", "T.atan2 takes floats"),
    ("T.truncdiv(x, 2)", "T.truncdiv takes integers, got float32 and float32"),
    ("T.truncmod(n, 2.5)", "T.truncmod takes integers"),
    ("T.truncdiv(7, 0)", "T.truncdiv: division by zero"),
    ("T.popcount(x)", "T.popcount takes an integer, got float32"),
    ("T.clz(T.int8(3))", "T.clz takes a 32- or 64-bit integer, got int8"),
    ("T.clz(x)", "T.clz takes an integer, got float32"),
    ('T.round(x, "up")', "T.round: rounding_mode='up'; expected 'ties-to-even' or 'ties-away-from-zero'"),
    ("T.erf(x, x)", "T.erf: unexpected positional argument 2"),
    ("T.atan2(x)", "T.atan2"),
    # TVM's span=None is accepted since TileLang 0.1.15's audit (test_surface_newest.py);
    # another span is refused by name
    ("T.isnan(x, span=x)", "T.isnan: span="),
    ("T.erf(x, span=None)", "T.erf: got an unexpected keyword argument 'span'"),
    ("T.likely()", "T.likely"),
])
def test_errors_name_the_form_and_line(call, message):
    msg = _error(_script(f"""
        x = A[bx]
        n = I[bx]
        y = {call}
    """, 'A: T.Tensor((M,), "float32"), I: T.Tensor((M,), "int32")'), call)
    assert message in msg and "prim_func 'kern'" in msg, msg


@pytest.mark.parametrize("call,message", [
    (N.Call("isnan", (N.Var("x", "float32"),), "float32"), "isnan takes a float and is a bool"),
    (N.Call("erf", (N.Var("i", "int32"),), "int32"), "erf takes float arguments"),
    (N.Call("pow", (N.Var("x", "float32"), N.Var("h", "float16")), "float32"), "pow takes float"),
    (N.Call("truncdiv", (N.Var("x", "float32"), N.Var("x", "float32")), "float32"),
     "truncdiv takes integer arguments"),
    (N.Call("clz", (N.Var("i", "int32"),), "int64"), "clz takes a 32- or 64-bit integer"),
])
def test_validator_checks_intrinsic_dtypes(call, message):
    """A JSON producer's Call is held to the rules the frontend's helpers follow."""
    func = T.from_script(_script("""
        x = A[bx]
        h = H[bx]
        i = I[bx]
        B[bx] = x
    """, 'A: T.Tensor((M,), "float32"), H: T.Tensor((M,), "float16"), '
         'I: T.Tensor((M,), "int32"), B: T.Tensor((M,), "float32")'))
    import dataclasses

    k = func.kernels[0]
    *lets, store = k.body
    bad = dataclasses.replace(store, value=N.Cast("float32", call) if call.dtype != "float32" else call)
    func = dataclasses.replace(func, kernels=(dataclasses.replace(k, body=(*lets, bad)),))
    with pytest.raises(ValidationError, match=message):
        validate(func)


# ---- GPU: the values against torch --------------------------------------------------------------
def _torch_reference(case, a, c):
    """What torch computes for ``case`` (integers in int64, floats in float32)."""
    import torch

    base = case if case == "round_away" else case.split("_")[0]
    if not a.is_floating_point():
        a, c = a.to(torch.int64), c.to(torch.int64)
        width = 64 if case == "clz_i64" else 32
        bits = [(a >> k) & 1 for k in range(width)]
        if base == "popcount":
            return sum(bits)
        if base == "clz":  # the highest set bit, walked from the lowest
            n = torch.full_like(a, width)
            for k in range(width):
                n = torch.where(bits[k] == 1, width - 1 - k, n)
            return n
        return {"truncdiv": lambda: torch.div(a, c, rounding_mode="trunc"),
                "truncmod": lambda: torch.fmod(a, c)}[base]()
    a, c = a.float(), c.float()
    if case == "isnan_f16":
        return torch.where(torch.isnan(a), a, c)
    if base in PREDICATES:
        return getattr(torch, base)(a).float()
    f = {"round_away": lambda: torch.sign(a) * torch.floor(a.abs() + 0.5),
         "exp10": lambda: torch.pow(10.0, a), "pow": lambda: torch.pow(a, c),
         "fmod": lambda: torch.fmod(a, c), "atan2": lambda: torch.atan2(a, c),
         "likely": lambda: torch.where(a > c, a, c)}
    return f[base]() if base in f else getattr(torch, base)(a)


def _inputs(case, dtype, n):
    import torch

    if dtype in ("int32", "int64"):
        a = torch.randint(-(1 << 30), 1 << 30, (n,), device="cuda", dtype=torch.int64)
        c = torch.randint(1, 97, (n,), device="cuda", dtype=torch.int64)
        if case != "truncdiv_u32":
            a = a << 20 if case == "clz_i64" else a
            c = torch.where(torch.rand(n, device="cuda") < 0.5, -c, c)
        else:
            a = a.abs()
        return a.to(getattr(torch, dtype)), c.to(getattr(torch, dtype))
    t = getattr(torch, dtype)
    a = torch.randn(n, device="cuda") * 3
    c = torch.randn(n, device="cuda") * 3
    base = case.split("_")[0]
    if base in ("acos", "asin"):
        a = torch.rand(n, device="cuda") * 2 - 1
    if base in ("log10", "log1p", "pow"):
        a = torch.rand(n, device="cuda") * 8 + 0.01
    if base in ("round", "trunc"):  # halfway cases
        a = torch.randint(-20, 20, (n,), device="cuda") * 0.5
    if base in PREDICATES:
        a[::7], a[1::7], a[2::7] = float("nan"), float("inf"), -float("inf")
    if base == "fmod":
        c = torch.where(c.abs() < 0.1, 0.5, c)
    return a.to(t), c.to(t)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES) + ["warps"])
def test_forms_match_torch(case):
    import torch

    if case == "warps":
        n = 1024
        a, b = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
        w = torch.empty(n, device="cuda", dtype=torch.int32)
        tilecute.compile(T.from_script(WARPS))(a, b, w)
        tid = torch.arange(n, device="cuda") % 256
        assert torch.equal(b, a[torch.arange(n, device="cuda") ^ 1])
        want = tid % 32 + tid // 32 * 100 + tid // 128 * 10000 + tid % 16 * 1000000 + tid // 64 * 100000000
        assert torch.equal(w.to(torch.int64), want)
        return
    call, in_dtype, out_dtype, _ = CASES[case]
    kernel = tilecute.compile(T.from_script(elementwise(call, in_dtype, out_dtype, in_dtype)))
    n = 4096
    a, c = _inputs(case, in_dtype, n)
    b = torch.empty(n, device="cuda", dtype=getattr(torch, out_dtype))
    kernel(a, c, b)
    ref = _torch_reference(case, a, c)
    if b.is_floating_point():  # float32 results: a few ulp; 16-bit: the last bit of rounding
        tol = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[out_dtype]
        torch.testing.assert_close(b, ref.to(b.dtype), atol=tol, rtol=tol, equal_nan=True)
    else:
        got = b.to(torch.int64)
        assert torch.equal(got, ref), (case, a[:8], got[:8], ref[:8])


# ---- the instructions they become ---------------------------------------------------------------
@pytest.mark.parametrize("case,instruction", [
    ("round", r"cvt\.rni\.f32\.f32"), ("trunc", r"cvt\.rzi\.f32\.f32"),
    ("truncdiv", r"div\.s32"), ("truncmod", r"rem\.s32"), ("truncdiv_u32", r"div\.u32"),
    ("popcount", r"popc\.b32"), ("clz", r"clz\.b32"), ("warps", r"bar\.warp\.sync"),
])
def test_ptx_instructions(case, instruction, tmp_path, monkeypatch):
    """C's integer / and % are PTX div/rem (which truncate); TVM's round is cvt.rni."""
    import re

    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    func = T.from_script(WARPS if case == "warps" else elementwise(*CASES[case][:3], CASES[case][1]))
    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, "sm_90a")))
    module = import_source(str(path), f"tilecute_intrinsics_{case}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptx = cute.compile(getattr(module, func.name), *module.placeholder_args(),
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    assert re.search(instruction, ptx), ptx


# T.truncdiv / T.truncmod of two values the generated code holds as Python ints (an index of a
# constant-unrolled loop and a constant) crashed the cubin build (the fuzzer's seed 8074); the
# runtime helpers fold them with C's rounding toward zero
UNROLLED_TRUNC = """
import tilecute.language as T


@T.prim_func
def trunc_unrolled(B: T.Tensor((32, 16), "int32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(16):
            B[tx, i] = T.truncmod(T.floordiv(i, 3) - 2, -3) * 100 + T.truncdiv(i - 7, 2) + tx * 0
"""


def _c_trunc(a, b):
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return q, a - q * b


def test_trunc_of_two_unrolled_ints_builds():
    kernel = tilecute.compile(T.from_script(UNROLLED_TRUNC))
    assert "tcmath.truncmod(" in kernel.get_kernel_source()
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_trunc_of_two_unrolled_ints_rounds_toward_zero():
    import torch

    b = torch.empty(32, 16, device="cuda", dtype=torch.int32)
    tilecute.compile(T.from_script(UNROLLED_TRUNC))(b)
    want = [_c_trunc(i // 3 - 2, -3)[1] * 100 + _c_trunc(i - 7, 2)[0] for i in range(16)]
    assert b.cpu().tolist() == [want] * 32


# conditions and integer forms of a constant-unrolled loop's index alone: a Python bool or int
# in the generated code, which CuTe DSL's select_, clz and bitcast refuse (the build crashed)
UNROLLED_FORMS = """
import tilecute.language as T


@T.prim_func
def unrolled_forms(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32, 16), "float32"),
                   C: T.Tensor((32, 16), "int32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(16):
            B[tx, i] = T.if_then_else(i > 4, A[tx, i], -A[tx, i]) + T.if_then_else(
                i < 8 and tx < 16, 100.0, 0.0) + T.if_then_else(i % 3 == 0, 1000.0, 0.0)
            C[tx, i] = T.clz(i) * 1000 + T.if_then_else(i < 5 or tx == 0, 1, 0) * 100 + \\
                T.Cast("int32", T.reinterpret(i * 8388608 + 1065353216, "float32"))
"""


def test_unrolled_index_conditions_and_integer_forms_build():
    kernel = tilecute.compile(T.from_script(UNROLLED_FORMS))
    src = kernel.get_kernel_source()
    assert "tcmath.select(i > 4" in src and "cute.arch.clz(cutlass.Int32(i))" in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_unrolled_index_conditions_and_integer_forms_match_torch():
    import torch

    a = torch.randn(32, 16, device="cuda")
    b = torch.empty_like(a)
    c = torch.empty(32, 16, device="cuda", dtype=torch.int32)
    tilecute.compile(T.from_script(UNROLLED_FORMS))(a, b, c)
    i = torch.arange(16, device="cuda").expand(32, 16)
    tx = torch.arange(32, device="cuda")[:, None].expand(32, 16)
    want_b = torch.where(i > 4, a, -a) + torch.where((i < 8) & (tx < 16), 100.0, 0.0) + \
        torch.where(i % 3 == 0, 1000.0, 0.0)
    torch.testing.assert_close(b, want_b)
    clz = torch.tensor([32 - int(v).bit_length() for v in range(16)], device="cuda")
    bits = (torch.arange(16, dtype=torch.int32) * 8388608 + 1065353216).view(torch.float32)
    want_c = clz * 1000 + torch.where((i < 5) | (tx == 0), 1, 0) * 100 + bits.to("cuda").to(torch.int32)
    assert bits[3] == 8.0  # (the exponent field raised by i: 2 ** i)
    assert torch.equal(c.to(torch.int64), want_c.to(torch.int64))
