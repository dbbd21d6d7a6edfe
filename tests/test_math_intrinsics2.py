"""TileLang's remaining math and intrinsic forms: TVM's libm forms (``T.copysign``,
``T.hypot``, ``T.ldexp``, ``T.nextafter``, ``T.nearbyint``, ``T.fabs``, ``T.asinh`` ...),
the IEEE forms with their rounding modes (``T.ieee_add`` ... ``T.ieee_frsqrt``),
``T.fast_rcp``, ``T.__ffs``, ``T.__fns``, ``T.match_any_sync`` / ``T.match_all_sync`` and
``T.tvm_warp_activemask``: the IR each builds (printed and read back), the CuTe DSL and
PTX they lower to, an sm_90a cubin for each, the errors TileLang raises for them, the
forms that stay refused, and (GPU) their values against exact references."""

import math
import re
import textwrap
import zlib
from fractions import Fraction

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower

MODES = ("rn", "rz", "ru", "rd")


def program(body: str, dtype: str, out_dtype: str = "", threads: int = 128) -> str:
    """One thread per element: ``B[r] = <body>`` over ``a = A[r]``, ``c = C[r]``,
    ``d = D[r]`` (``dtype``) and ``e = E[r]`` (int32), as TileLang's elementwise kernels."""
    out_dtype = out_dtype or dtype
    return textwrap.dedent(f"""\
        import tilecute.language as T

        N = T.dynamic("N")


        @T.prim_func
        def kern(A: T.Tensor((N,), "{dtype}"), C: T.Tensor((N,), "{dtype}"),
                 D: T.Tensor((N,), "{dtype}"), E: T.Tensor((N,), "int32"),
                 B: T.Tensor((N,), "{out_dtype}")):
            with T.Kernel(T.ceildiv(N, {threads}), threads={threads}) as bx:
                for i in T.Parallel({threads}):
                    r = bx * {threads} + i
                    a = A[r]
                    c = C[r]
                    d = D[r]
                    e = E[r]
                    B[r] = {body}
        """)


def _roundtrip(func):
    assert T.from_script(func.script()) == func
    assert from_json(func.to_json()) == func
    return func


def _error(text: str, needle: str) -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)
    assert f"<script>:{line}:" in str(e.value), str(e.value)
    return str(e.value)


# case -> (the call, input dtype, output dtype, what the CuTe DSL source holds)
CASES = {
    **{f"{name}_{dt}": (f"T.{name}(a)", dt, dt, f"cute.math.{name}(")
       for name in ("asinh", "acosh", "atanh") for dt in ("float32", "float64")},
    "asinh_float16": ("T.asinh(a)", "float16", "float16",
                      "cutlass.Float16(cute.math.asinh(cutlass.Float32(a)))"),
    **{f"copysign_{dt}": ("T.copysign(a, c)", dt, dt, "cute.math.copysign(")
       for dt in ("float32", "float64", "bfloat16")},
    **{f"hypot_{dt}": ("T.hypot(a, c)", dt, dt, "tcmath.hypot(a, c)")
       for dt in ("float32", "float64", "float16")},
    **{f"nextafter_{dt}": ("T.nextafter(a, c)", dt, dt, "tcmath.nextafter(a, c)")
       for dt in ("float32", "float64")},
    **{f"ldexp_{dt}": ("T.ldexp(a, e)", dt, dt, "tcmath.ldexp(a, e)")
       for dt in ("float32", "float64", "bfloat16")},
    "nearbyint_float32": ("T.nearbyint(a)", "float32", "float32", "cute.math.roundeven(a)"),
    "fabs_float32": ("T.fabs(a)", "float32", "float32", "cute.math.absf(a)"),
    "fast_rcp_float32": ("T.fast_rcp(a)", "float32", "float32", "cute.arch.rcp_approx(a)"),
    **{f"{op}_{dt}": (f"T.{op}({args}, rounding_mode=\"{mode}\")", dt, dt,
                      f'tcmath.{op}({args}, "{mode}")')
       for op, args in (("ieee_add", "a, c"), ("ieee_sub", "a, c"), ("ieee_mul", "a, c"),
                        ("ieee_fdiv", "a, c"), ("ieee_fmaf", "a, c, d"), ("ieee_frcp", "a"),
                        ("ieee_fsqrt", "a"))
       for dt, mode in (("float32", "rz"), ("float64", "ru"), ("float16", "rn"),
                        ("bfloat16", "rn"))},
    **{f"ieee_frsqrt_{dt}": ("T.ieee_frsqrt(a)", dt, dt, "tcmath.ieee_frsqrt(a)")
       for dt in ("float32", "float16", "bfloat16")},
    "ffs_int32": ("T.__ffs(e)", "float32", "int32", "tcmath.ffs(e)"),
    "ffs_uint64": ('T.__ffs(T.Cast("uint64", e))', "float32", "int32",
                   "tcmath.ffs(cutlass.Uint64(e))"),
    "fns": ('T.Cast("int32", T.__fns(T.Cast("uint32", e), r % 32, r % 5 - 2))', "float32",
            "int32", "tcmath.fns(cutlass.Uint32(e), "),
    "match_any_int32": ('T.Cast("int32", T.match_any_sync(e))', "float32", "int32",
                        'tcmath.match_sync(e, cutlass.Uint32(4294967295), "any")'),
    "match_any_float32": ('T.Cast("int32", T.match_any_sync(a, 0xFFFF0000))', "float32",
                          "int32", 'tcmath.match_sync(a, cutlass.Uint32(4294901760), "any")'),
    "match_all_int32": ('T.Cast("int32", T.match_all_sync(e % 3))', "float32", "int32",
                        '"all")'),
    "warp_activemask": ('T.Cast("int32", T.tvm_warp_activemask())', "float32", "int32",
                        "cutlass.Uint32(cute.arch.activemask())"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_form_prints_lowers_and_builds_a_cubin(case, tmp_path):
    call, dtype, out_dtype, lowered = CASES[case]
    func = _roundtrip(T.from_script(program(call, dtype, out_dtype)))
    source = emit_cute(lower(func, "sm_90a"))
    assert lowered in source, source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_the_printer_spells_what_the_program_wrote():
    """``T.nearbyint`` is ``T.round`` (halfway cases to even), ``T.fabs`` is ``T.abs``; the
    IEEE forms print their rounding mode; the bit and warp forms their TileLang names."""
    text = T.from_script(program(
        'T.nearbyint(a) + T.fabs(c) + T.ieee_fmaf(a, c, d, "rd") + T.ieee_frsqrt(a) + '
        'T.Cast("float32", T.__ffs(e) + T.Cast("int32", T.__fns(T.uint32(6), 0, 2)))',
        "float32")).script()
    assert ('B[r] = T.round(a) + T.abs(c) + T.ieee_fmaf(a, c, d, "rd") + T.ieee_frsqrt(a) + '
            'T.Cast("float32", T.__ffs(e) + T.Cast("int32", T.__fns(T.uint32(6), 0, 2)))'
            in text), text


def test_constants_fold_as_cuda_computes_them():
    assert T.__ffs(0) == T.__ffs(T.int32(0)) == N.Const(0, "int32")
    assert T.__ffs(T.int32(-8)).value == 4 and T.__ffs(T.uint64(1 << 63)).value == 64
    assert T.nearbyint(T.int32(3)) == T.int32(3)  # an integer is itself, as T.round's


def test_ieee_operands_take_the_first_operands_dtype():
    """TileLang's ``call_intrin(x.dtype, ...)``: ``y`` is converted to ``x``'s dtype, a Python
    float first argument is a float32."""
    func = T.from_script(program("T.ieee_mul(a, T.Cast(\"float64\", c), \"ru\")", "float32"))
    assert 'T.ieee_mul(a, T.Cast("float32", T.Cast("float64", c)), "ru")' in func.script()
    call = T.ieee_add(1.5, 2)
    assert call.dtype == "float32" and call.args[1].dtype == "float32"


def test_sm80_cubin_holds_every_form(tmp_path):
    """All of them in one kernel for sm_80 too (bfloat16 fma is PTX's fma.rn.bf16, sm_80+)."""
    body = ("T.asinh(a) + T.copysign(a, c) + T.hypot(a, c) + T.ldexp(a, e) + T.nearbyint(a) + "
            "T.ieee_add(a, c) + T.ieee_fmaf(a, c, d) + T.ieee_fdiv(a, c) + T.ieee_frcp(a) + "
            "T.ieee_fsqrt(a) + T.ieee_frsqrt(a)")
    for dtype in ("bfloat16", "float16"):
        func = T.from_script(program(body, dtype))
        assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path / dtype)).kernel_names


# ---- the PTX: each rounding mode reaches its instruction ------------------------------------------
def _ptx(func, tmp_path, monkeypatch, arch="sm_90a") -> str:
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, arch)))
    module = import_source(str(path), f"tilecute_math2_{abs(hash(str(tmp_path))):x}")
    monkeypatch.setenv("CUTE_DSL_ARCH", arch)
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch {arch} --dump-dir {tmp_path}").__ptx__


IEEE_PTX = {"ieee_add": "add", "ieee_sub": "sub", "ieee_mul": "mul", "ieee_fdiv": "div",
            "ieee_fmaf": "fma", "ieee_frcp": "rcp", "ieee_fsqrt": "sqrt"}
PTX_MODE = {"rn": "rn", "rz": "rz", "ru": "rp", "rd": "rm"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(IEEE_PTX))
def test_each_rounding_mode_is_its_ptx_instruction(op, dtype, tmp_path, monkeypatch):
    """``T.ieee_add(a, c, "ru")`` is ``add.rp.f32`` (CUDA's ``__fadd_ru``) ...: one
    instruction per mode, none contracted away."""
    args = {"ieee_fmaf": "a, c, d", "ieee_frcp": "a", "ieee_fsqrt": "a"}.get(op, "a, c")
    body = " + ".join(f'T.{op}({args}, "{m}")' for m in MODES)
    ptx = _ptx(T.from_script(program(body, dtype)), tmp_path, monkeypatch)
    suffix = "f32" if dtype == "float32" else "f64"
    for mode in MODES:
        assert re.search(rf"\b{IEEE_PTX[op]}\.{PTX_MODE[mode]}\.{suffix}\b", ptx), (mode, ptx)


@pytest.mark.parametrize("dtype,instructions", [
    ("float16", (r"fma\.rn\.f16", r"rcp\.approx\.ftz\.f32", r"sqrt\.approx\.ftz\.f32",
                 r"rsqrt\.approx\.ftz\.f32")),
    ("bfloat16", (r"fma\.rn\.bf16", r"rcp\.approx\.f32", r"sqrt\.approx\.f32",
                  r"rsqrt\.approx\.f32", r"div\.approx\.f32")),
])
def test_half_forms_are_cudas_half_intrinsics(dtype, instructions, tmp_path, monkeypatch):
    body = ("T.ieee_fmaf(a, c, d) + T.ieee_frcp(a) + T.ieee_fsqrt(c) + T.ieee_frsqrt(d) + "
            "T.ieee_fdiv(a, c)")
    ptx = _ptx(T.from_script(program(body, dtype)), tmp_path, monkeypatch)
    for instruction in instructions:
        assert re.search(instruction, ptx), (instruction, ptx)


def test_bit_and_warp_forms_are_their_ptx(tmp_path, monkeypatch):
    body = ('T.Cast("int32", T.__fns(T.Cast("uint32", e), 3, -2) + T.match_any_sync(a) + '
            'T.match_all_sync(T.Cast("int64", e)) + T.tvm_warp_activemask()) + T.__ffs(e)')
    ptx = _ptx(T.from_script(program(body, "float64", "int32")), tmp_path, monkeypatch)
    for instruction in (r"fns\.b32", r"match\.any\.sync\.b64", r"match\.all\.sync\.b64",
                        r"activemask\.b32", r"clz\.b32"):
        assert re.search(instruction, ptx), (instruction, ptx)


# ---- errors: TileLang's, at the line, naming the form ------------------------------------------------
@pytest.mark.parametrize("call,dtype,needle", [
    ('T.ieee_add(a, c, "rp")', "float32", "Invalid rounding mode 'rp' for T.ieee_add"),
    ('T.ieee_fdiv(a, c, rounding_mode="rz")', "float16",  # TileLang's message, kept
     "T.ieee_fdiv: rounding_mode='rz' on float16: Only rounding mode 'rn' is available for half precision"),
    ('T.ieee_fsqrt(a, "ru")', "bfloat16", "T.ieee_fsqrt: rounding_mode='ru' on bfloat16"),
    ("T.ieee_frsqrt(a)", "float64", "T.ieee_frsqrt is not supported for float64"),
    ("T.ieee_mul(e, e)", "float32", "T.ieee_mul takes"),
    ("T.fast_rcp(a)", "float16", "T.fast_rcp takes a float32"),
    ("T.nextafter(a, c)", "bfloat16", "T.nextafter takes float32 or float64"),
    ("T.copysign(e, a)", "float32", "T.copysign takes a float first argument"),
    ("T.hypot(e, a)", "float32", "T.hypot takes a float first argument"),
    ("T.ldexp(e, 2)", "float32", "T.ldexp takes a float first argument"),
    ('T.Cast("float32", T.__ffs(T.Cast("int16", e)))', "float32",
     "T.__ffs expects a 32-bit or 64-bit integer argument"),
    ('T.Cast("float32", T.__fns(T.Cast("int64", e), 0, 1))', "float32",
     "T.__fns expects a 32-bit integer mask argument"),
    ('T.Cast("float32", T.match_any_sync(a))', "float16", "T.match_any_sync compares"),
    ('T.Cast("float32", T.match_all_sync(e, 0))', "float32",
     "T.match_all_sync: mask=0x0 must be a nonzero 32-bit lane mask"),
])
def test_tilelangs_errors_name_the_form_at_its_line(call, dtype, needle):
    msg = _error(program(call, dtype, "float32"), "B[r] =")
    assert needle in msg, msg


@pytest.mark.parametrize("call", [
    "T.q_multiply_shift(e, 1 << 20, 31, 0)",
    "T.q_multiply_shift_per_axis(e, 1 << 20, 0, 0, 31, False, False)",
])
def test_forms_kept_refused_say_so_and_why(call):
    name = call.split("(")[0]
    msg = _error(program(call, "float32"), "B[r] =")
    assert f"{name} is a TileLang form that tilecute does not support (" in msg, msg
    assert "1 << 30" in msg, msg


@pytest.mark.parametrize("call", [
    "T.add2(a, c)", "T.sub2(a, c)", "T.mul2(a, c)", "T.fma2(a, c, d)", "T.max2(a, c)",
    "T.min2(a, c)", "T.abs2(a)",
])
def test_packed_x2_math_takes_vectors_not_scalars(call):
    # (TileLang's _validate_packed_x2_args; the vector forms: tests/test_vector_lanes.py)
    name = call.split("(")[0]
    msg = _error(program(call, "float32"), "B[r] =")
    assert f"{name} takes float32x2 / float16x2 / bfloat16x2 vectors" in msg, msg


# ---- GPU: the values against exact references ------------------------------------------------------
def _np(dtype):
    import numpy as np

    return {"float16": np.float16, "float32": np.float32, "float64": np.float64}[dtype]


def _round_exact(sign_at, approx: float, mode: str, dtype: str):
    """The ``dtype`` value that rounds the real number ``v`` as ``mode`` says, where
    ``sign_at(q)`` is the sign of ``q - v`` for a rational ``q`` and ``approx`` a nearby
    double.  Walks ``dtype``'s representable values (numpy's nextafter) to the two that
    bracket ``v``; infinities stand at the ends."""
    import numpy as np

    t = _np(dtype)
    inf = t(np.inf)
    c = t(approx)
    if np.isinf(c):
        c = np.nextafter(c, t(0))
    while np.isfinite(c) and sign_at(Fraction(float(c))) > 0:
        c = np.nextafter(c, -inf)
    while True:
        up = np.nextafter(c, inf) if np.isfinite(c) else np.nextafter(c, t(0))
        if not np.isfinite(up) or sign_at(Fraction(float(up))) > 0:
            break
        c = up
    lo, hi = c, up  # lo <= v < hi (lo may be -inf, hi +inf)
    if np.isfinite(lo) and sign_at(Fraction(float(lo))) == 0:
        return lo
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return hi if np.isfinite(hi) and hi <= 0 and not (np.isfinite(lo) and lo >= 0) else lo
    # to nearest, ties to even; past the largest finite value, rounding goes to infinity
    # where v is at least the largest plus half an ulp
    if not np.isfinite(lo) or not np.isfinite(hi):
        big = hi if np.isfinite(hi) else lo
        ulp = abs(Fraction(float(big)) - Fraction(float(np.nextafter(big, t(0)))))
        edge = Fraction(float(big)) + (ulp / 2 if big > 0 else -ulp / 2)
        s = sign_at(edge)
        past = (s <= 0) if big > 0 else (s >= 0)
        return (inf if big > 0 else -inf) if past else big
    mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
    s = sign_at(mid)
    if s != 0:
        return lo if s > 0 else hi
    bits = np.array([lo]).view({"float16": np.uint16, "float32": np.uint32,
                                "float64": np.uint64}[dtype])[0]
    return lo if bits % 2 == 0 else hi


def _ieee_reference(op: str, mode: str, xs, dtype: str):
    """The correctly rounded value of ``op`` on ``xs`` (numpy scalars of ``dtype``), NaNs,
    infinities and zeros by IEEE 754's rules (through float64 / Python, where exact)."""
    import numpy as np

    t = _np(dtype)
    vals = [float(x) for x in xs]
    if any(math.isnan(v) for v in vals) or any(math.isinf(v) for v in vals) or \
            (op in ("ieee_fdiv", "ieee_frcp") and vals[-1] == 0) or \
            (op in ("ieee_fsqrt", "ieee_frsqrt") and vals[0] <= 0):
        with np.errstate(all="ignore"):
            x = np.float64(vals[0])
            out = {"ieee_add": lambda: x + vals[1], "ieee_sub": lambda: x - vals[1],
                   "ieee_mul": lambda: x * vals[1], "ieee_fdiv": lambda: x / np.float64(vals[1]),
                   "ieee_fmaf": lambda: x * vals[1] + vals[2],
                   "ieee_frcp": lambda: np.float64(1.0) / x, "ieee_fsqrt": lambda: np.sqrt(x),
                   "ieee_frsqrt": lambda: np.float64(1.0) / np.sqrt(x)}[op]()
        return t(out)
    q = [Fraction(v) for v in vals]
    if op == "ieee_fsqrt":
        if q[0] == 0:
            return xs[0]
        return _round_exact(lambda c: (c > 0 and c * c > q[0]) - (c < 0 or c * c < q[0]),
                            math.sqrt(vals[0]), mode, dtype)
    if op == "ieee_frsqrt":
        return _round_exact(lambda c: (c > 0 and c * c * q[0] > 1) - (c <= 0 or c * c * q[0] < 1),
                            1 / math.sqrt(vals[0]), mode, dtype)
    exact = {"ieee_add": lambda: q[0] + q[1], "ieee_sub": lambda: q[0] - q[1],
             "ieee_mul": lambda: q[0] * q[1], "ieee_fdiv": lambda: q[0] / q[1],
             "ieee_fmaf": lambda: q[0] * q[1] + q[2], "ieee_frcp": lambda: 1 / q[0]}[op]()
    if exact == 0:  # the sign of an exact zero: IEEE 754's for sums, the operands' otherwise
        if op in ("ieee_add", "ieee_sub", "ieee_fmaf"):
            terms = ((vals[0] * vals[1], vals[2]) if op == "ieee_fmaf" else
                     (vals[0], vals[1] if op == "ieee_add" else -vals[1]))
            if all(math.copysign(1, v) < 0 for v in terms):
                return t(-0.0)
            if all(math.copysign(1, v) > 0 for v in terms) or mode != "rd":
                return t(0.0)
            return t(-0.0)
        return t(math.copysign(0.0, vals[0] * (vals[1] if len(vals) > 1 else 1)))
    try:
        approx = float(exact)
    except OverflowError:  # past float64's range: dtype's infinity stands nearest
        approx = math.inf if exact > 0 else -math.inf
    got = _round_exact(lambda c: (c > exact) - (c < exact), approx, mode, dtype)
    if got == 0:
        return t(-0.0 if exact < 0 else 0.0)
    return got


def _special_floats(dtype):
    import numpy as np

    t = _np(dtype)
    info = np.finfo(t)
    tiny = info.smallest_subnormal
    return [t(0.0), t(-0.0), t(np.inf), t(-np.inf), t(np.nan), t(1.0), t(-1.0), tiny, -tiny,
            info.tiny, info.max, -info.max, t(1.5), t(3.0), t(1 / 3), t(-2.75)]


def _operands(op: str, dtype: str, n: int, seed: int):
    """Random operands of wide magnitude (so rounding matters), then every pair/triple of
    the special values."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(seed)
    t = _np(dtype)
    arity = {"ieee_fmaf": 3, "ieee_frcp": 1, "ieee_fsqrt": 1, "ieee_frsqrt": 1}.get(op, 2)
    span = {"float16": 6, "float32": 40, "float64": 300}[dtype]
    cols = [(rng.standard_normal(n) * 2.0 ** rng.integers(-span, span, n)).astype(t)
            for _ in range(arity)]
    if op in ("ieee_fsqrt", "ieee_frsqrt"):
        cols[0] = np.abs(cols[0])
    if op == "ieee_fmaf":  # cancellations near the product
        cols[2][: n // 4] = (-cols[0][: n // 4].astype(np.float64)
                             * cols[1][: n // 4].astype(np.float64)).astype(t)
    special = _special_floats(dtype)
    combos = list(itertools.product(special, repeat=arity))[:1024]
    return [np.concatenate([c, np.array([k[i] for k in combos], dtype=t)])
            for i, c in enumerate(cols)]


def _run(body, dtype, out_dtype, a, c=None, d=None, e=None):
    import numpy as np
    import torch

    n = len(a)
    tt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64, "int32": torch.int32}

    def dev(x, dt):
        if x is None:
            return torch.zeros(n, dtype=tt[dt], device="cuda")
        if isinstance(x, torch.Tensor):
            return x.to("cuda")
        return torch.from_numpy(np.ascontiguousarray(x)).to("cuda")

    out = torch.empty(n, dtype=tt[out_dtype], device="cuda")
    kernel = tilecute.compile(T.from_script(program(body, dtype, out_dtype)))
    kernel(dev(a, dtype), dev(c, dtype), dev(d, dtype), dev(e, "int32"), out)
    return out.cpu()


def _same(got, want):
    """Bit-equal values (any NaN matches a NaN; zeros compared with their signs)."""
    import numpy as np

    got, want = np.asarray(got), np.asarray(want)
    both_nan = np.isnan(got) & np.isnan(want)
    return both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["ieee_add", "ieee_sub", "ieee_mul", "ieee_fdiv", "ieee_fmaf",
                                "ieee_frcp", "ieee_fsqrt"])
def test_ieee_forms_round_as_each_mode_says(op, mode, dtype):
    """Every result is the exactly rounded one (Python fractions), signed zeros, infinities,
    subnormals and NaNs included."""
    import numpy as np

    xs = _operands(op, dtype, 2048, seed=zlib.crc32(f"{op}{mode}{dtype}".encode()))
    args = {"ieee_fmaf": "a, c, d", "ieee_frcp": "a", "ieee_fsqrt": "a"}.get(op, "a, c")
    got = _run(f'T.{op}({args}, "{mode}")', dtype, dtype, *xs).numpy()
    want = np.array([_ieee_reference(op, mode, k, dtype) for k in zip(*xs)], dtype=_np(dtype))
    ok = _same(got, want)
    bad = np.flatnonzero(~ok)[:5]
    assert ok.all(), [(tuple(x[i] for x in xs), got[i], want[i]) for i in bad]


@pytest.mark.gpu
def test_ieee_frsqrt_is_correctly_rounded():
    import numpy as np

    xs = _operands("ieee_frsqrt", "float32", 4096, seed=7)
    got = _run("T.ieee_frsqrt(a)", "float32", "float32", *xs).numpy()
    want = np.array([_ieee_reference("ieee_frsqrt", "rn", k, "float32") for k in zip(*xs)],
                    dtype=np.float32)
    assert _same(got, want).all()


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["ieee_add", "ieee_sub", "ieee_mul", "ieee_fmaf"])
def test_float16_ieee_forms_are_correctly_rounded(op):
    """``__hadd_rn`` ... and ``__hfma`` (``fma.rn.f16``) round once to nearest."""
    import numpy as np

    xs = _operands(op, "float16", 2048, seed=3)
    args = {"ieee_fmaf": "a, c, d"}.get(op, "a, c")
    got = _run(f"T.{op}({args})", "float16", "float16", *xs).numpy()
    want = np.array([_ieee_reference(op, "rn", k, "float16") for k in zip(*xs)], dtype=np.float16)
    ok = _same(got, want)
    assert ok.all(), [(tuple(x[i] for x in xs), got[i], want[i]) for i in np.flatnonzero(~ok)[:5]]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["ieee_fdiv", "ieee_frcp", "ieee_fsqrt", "ieee_frsqrt"])
def test_half_approximate_forms_are_within_an_ulp(op, dtype):
    """CUDA's ``__hdiv``, ``hrcp``, ``hsqrt``, ``hrsqrt`` (float32 approximations rounded to
    16 bits): within one 16-bit ulp of the exact value."""
    import torch

    torch.manual_seed(0)
    a = (torch.rand(4096) * 8 + 0.05).to(getattr(torch, dtype))
    c = (torch.randn(4096) * 4).to(getattr(torch, dtype))
    c[c == 0] = 1
    args = {"ieee_fdiv": "a, c"}.get(op, "a")
    got = _run(f"T.{op}({args})", dtype, dtype, a, c).double()
    a64, c64 = a.double(), c.double()
    want = {"ieee_fdiv": a64 / c64, "ieee_frcp": 1 / a64, "ieee_fsqrt": a64.sqrt(),
            "ieee_frsqrt": a64.rsqrt()}[op]
    ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
    assert ((got - want).abs() <= want.abs() * ulp).all()


@pytest.mark.gpu
def test_fast_rcp_is_rcp_approx_ftz():
    import torch

    a = torch.randn(4096, dtype=torch.float32) * 100
    a[:3] = torch.tensor([1e-40, -1e-40, 0.0])  # subnormals flushed: 1 / +-0
    got = _run("T.fast_rcp(a)", "float32", "float32", a)
    assert got[0] == float("inf") and got[1] == -float("inf") and got[2] == float("inf")
    torch.testing.assert_close(got[3:], 1 / a[3:], rtol=2.5e-7, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_libm_forms_match_numpy(dtype):
    """copysign, nextafter, ldexp, nearbyint and fabs bit for bit (numpy's), hypot within
    CUDA's bound (2 ulp), the inverse hyperbolics within a few ulp; edge values included."""
    import numpy as np

    t = _np(dtype)
    rng = np.random.default_rng(11)
    special = np.array(_special_floats(dtype), dtype=t)
    a = np.concatenate([(rng.standard_normal(2000) * 50).astype(t), np.repeat(special, len(special)),
                        np.array([0.5, 1.5, 2.5, -0.5, -2.5], dtype=t)])
    c = np.concatenate([(rng.standard_normal(2000) * 50).astype(t), np.tile(special, len(special)),
                        np.array([1, 2, 3, 4, 5], dtype=t)])
    e = rng.integers(-200 if dtype == "float32" else -1200, 200 if dtype == "float32" else 1200,
                     len(a)).astype(np.int32)
    e[:8] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 127, -149, -1074]
    with np.errstate(all="ignore"):
        exact = {"T.copysign(a, c)": np.copysign(a, c), "T.nextafter(a, c)": np.nextafter(a, c),
                 "T.ldexp(a, e)": np.ldexp(a, np.clip(e, -5000, 5000)), "T.nearbyint(a)": np.rint(a),
                 "T.fabs(a)": np.abs(a)}
        for call, want in exact.items():
            got = _run(call, dtype, dtype, a, c, None, e).numpy()
            ok = _same(got, want.astype(t))
            bad = np.flatnonzero(~ok)[:5]
            assert ok.all(), (call, [(a[i], c[i], e[i], got[i], want[i]) for i in bad])
        got = _run("T.hypot(a, c)", dtype, dtype, a, c).numpy()
        want = np.hypot(a, c)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.allclose(got, want, rtol=2 * np.finfo(t).eps, atol=0, equal_nan=True)
        assert np.all(np.hypot(t(np.inf), t(np.nan)) == _run(
            "T.hypot(a, c)", dtype, dtype, np.array([np.inf, np.nan, -np.inf], dtype=t),
            np.array([np.nan, -np.inf, np.nan], dtype=t)).numpy())
        x = (rng.standard_normal(2048) * 4).astype(t)
        for name, fn, domain in (("asinh", np.arcsinh, x), ("acosh", np.arccosh, np.abs(x) + 1),
                                 ("atanh", np.arctanh, np.tanh(x).astype(t) * t(0.999))):
            domain = domain.astype(t)
            got = _run(f"T.{name}(a)", dtype, dtype, domain).numpy()
            # CUDA's asinhf / acoshf / atanhf: 3-4 ulp; CuTe DSL's expansions, a few more
            eps = np.finfo(t).eps
            assert np.allclose(got, fn(domain), rtol=64 * eps, atol=16 * eps), name


@pytest.mark.gpu
def test_bit_and_warp_forms_match_python():
    import torch

    n = 256
    e = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int64).to(torch.int32)
    e[:4] = torch.tensor([0, 1, -2 ** 31, 96], dtype=torch.int32)
    got = _run("T.__ffs(e)", "float32", "int32", torch.zeros(n), e=e)
    want = [((v & -v) & 0xFFFFFFFF).bit_length() for v in e.tolist()]
    assert got.tolist() == want

    got = _run('T.Cast("int32", T.__fns(T.Cast("uint32", e), r % 32, r % 7 - 3))', "float32",
               "int32", torch.zeros(n), e=e)

    def fns(mask, base, offset):
        mask &= 0xFFFFFFFF
        if offset == 0:
            return base if mask >> base & 1 else 0xFFFFFFFF
        step, count, pos = (1 if offset > 0 else -1), abs(offset) - 1, base
        while 0 <= pos < 32:
            if mask >> pos & 1:
                if count == 0:
                    return pos
                count -= 1
            pos += step
        return 0xFFFFFFFF
    want = [fns(v, r % 32, r % 7 - 3) for r, v in enumerate(e.tolist())]
    assert [v & 0xFFFFFFFF for v in got.tolist()] == want

    # lanes holding equal values (lane % 4) find each other; a warp of one value matches all
    lanes = torch.arange(n, dtype=torch.int32)
    got = _run('T.Cast("int32", T.match_any_sync(e))', "float32", "int32", torch.zeros(n),
               e=lanes % 4)
    want = [sum(1 << k for k in range(32) if k % 4 == r % 32 % 4) for r in range(n)]
    assert [v & 0xFFFFFFFF for v in got.tolist()] == want
    floats = (lanes % 3).float()
    floats[5] = -0.0  # bits differ from +0.0: CUDA's float overload compares bits
    got = _run('T.Cast("int32", T.match_any_sync(a))', "float32", "int32", floats)
    assert got[0].item() & 0xFFFFFFFF == sum(1 << k for k in range(32) if k % 3 == 0 and k != 5)
    got = _run('T.Cast("int32", T.match_all_sync(e // 64))', "float32", "int32",
               torch.zeros(n), e=lanes)
    assert [v & 0xFFFFFFFF for v in got.tolist()] == [0xFFFFFFFF] * n
    got = _run('T.Cast("int32", T.match_all_sync(e))', "float32", "int32", torch.zeros(n), e=lanes)
    assert got.tolist() == [0] * n
    got = _run('T.Cast("int32", T.tvm_warp_activemask())', "float32", "int32", torch.zeros(n))
    assert [v & 0xFFFFFFFF for v in got.tolist()] == [0xFFFFFFFF] * n
