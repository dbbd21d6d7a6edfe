"""TileLang 0.1.15's surface, argument by argument, where tilecute read it differently
(docs/ir.md, "TileLang's forms"): the newest release's parameter *names* of the expression
helpers (``T.ceildiv(lhs, rhs)``, ``T.bitwise_and(x, y)``, ``T.fma(x, y, z)``, TVM's
``T.tvm_warp_shuffle(mask, value, warp_id, ...)`` ...), TVM's trailing ``span=None``,
``T.prim_func(func=)`` / ``T.macro(func=)``, TVM's explicit loop control
``T.break_loop()`` / ``T.continue_loop()`` (what TileLang's builder emits for Python's
``break`` / ``continue``), and the pass-config keys 0.1.15 added.  Each program is written
as a TileLang program; each honored spelling is checked to parse to the same IR as the
spelling tilecute already honored, and built for sm_90a where codegen is involved."""

import inspect

import pytest

import tilecute
import tilecute as tilelang
import tilecute.language as T
from tilecute.language import FrontendError
from tilecute.language.forms import FORMS, Unsupported
from tilecute.language.ops import TVM_SPAN
from tilecute.options import OptionError, PassConfigKey, from_pass_configs


def _tilelang_surface() -> dict:
    """TileLang 0.1.15's ``T.*`` names and their parameters (tests/golden)."""
    import pathlib

    path = pathlib.Path(__file__).parent / "golden" / "tilelang_0_1_15_language.txt"
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, params = line.partition("\t")
            out[name] = params.split()
    return out


TILELANG_0_1_15 = _tilelang_surface()


def test_every_tilelang_name_is_honored_or_refused_by_name():
    assert len(TILELANG_0_1_15) == 713
    for name in TILELANG_0_1_15:
        value = getattr(T, name)  # no AttributeError: honored, or refused naming it
        if isinstance(value, Unsupported):
            assert f"T.{name} " in value.message(), name


def _tilecute_signature(name):
    value = getattr(T, name)
    if name in FORMS:
        return FORMS[name].signature
    try:
        return inspect.signature(value)
    except (TypeError, ValueError):
        return None


# TileLang's parameters tilecute's signature spells otherwise, each for its reason
SPELLED_OTHERWISE = {
    ("PrimExpr", "dtype"): "tilecute's expression class, used in isinstance checks only",
    ("PrimExpr", "span"): "as dtype",
    ("Layout", "shape"): "T.Layout(shape, forward_fn) is read by the parser's layout "
                         "constructor (custom_layouts.py), not through this class",
    ("Layout", "forward_fn"): "as shape",
}


def test_every_tilelang_parameter_is_in_tilecutes_signature():
    """Each honored callable binds TileLang's parameters under TileLang's names (a
    parameter tilecute refuses is still in its signature, refused by value)."""
    missing = []
    for name, params in TILELANG_0_1_15.items():
        if not params or isinstance(getattr(T, name), Unsupported):
            continue
        sig = _tilecute_signature(name)
        if sig is None:
            continue
        mine = sig.parameters
        if any(p.kind in (p.VAR_KEYWORD,) for p in mine.values()):
            continue
        for p in params:
            bare = p.lstrip("*~")
            if p.startswith("*") or bare in mine or (name, bare) in SPELLED_OTHERWISE:
                continue
            if bare == "span" and name in TVM_SPAN:
                continue
            missing.append(f"T.{name}({bare})")
    assert not missing, missing
    used = {(n, p.lstrip("*~")) for n, ps in TILELANG_0_1_15.items() for p in ps}
    assert set(SPELLED_OTHERWISE) <= used


def test_var_takes_tvms_signature_and_stays_the_symbol_class():
    """``T.Var(name, dtype, span)``: TVM's third parameter is the source location (it was
    read as tilecute's ``multiple`` divisor before); ``isinstance`` still names every symbol."""
    n = T.Var("n", "int64", None)
    assert (n.name, n.dtype, n.multiple) == ("n", "int64", 1)
    assert T.Var("m").dtype == "int32" and T.Var("m", span=None).multiple == 1
    assert isinstance(n, T.Var) and isinstance(T.dynamic("M"), T.Var)
    assert isinstance(T.symbolic("M, N")[1], T.Var) and not isinstance(4, T.Var)
    with pytest.raises(ValueError, match="span=4"):
        T.Var("n", "int32", 4)
    assert list(inspect.signature(T.Var).parameters) == ["name", "dtype", "span"]


def _elementwise(expr: str, dtype: str = "int32") -> str:
    return ("@T.prim_func\n"
            f"def k(A: T.Tensor((64,), '{dtype}'), B: T.Tensor((64,), '{dtype}')):\n"
            "    with T.Kernel(1, threads=64) as bx:\n"
            "        for i in T.Parallel(64):\n"
            f"            B[i] = {expr}\n")


def _script(expr: str, dtype: str = "int32") -> str:
    return T.from_script(_elementwise(expr, dtype)).script()


# ---- expression helpers under TileLang's parameter names ------------------------------------
@pytest.mark.parametrize("by_name,positional", [
    ("T.ceildiv(lhs=A[i], rhs=4)", "T.ceildiv(A[i], 4)"),
    ("T.cdiv(A[i], rhs=3)", "T.cdiv(A[i], 3)"),
    ("T.bitwise_and(x=A[i], y=6)", "T.bitwise_and(A[i], 6)"),
    ("T.bitwise_or(A[i], y=6)", "T.bitwise_or(A[i], 6)"),
    ("T.bitwise_xor(x=A[i], y=A[i] + 1)", "T.bitwise_xor(A[i], A[i] + 1)"),
    ("T.shift_left(x=A[i], y=2)", "T.shift_left(A[i], 2)"),
    ("T.shift_right(A[i], y=1)", "T.shift_right(A[i], 1)"),
    ("T.fma(x=A[i], y=A[i], z=3)", "T.fma(A[i], A[i], 3)"),
])
def test_helpers_take_tilelangs_parameter_names(by_name, positional):
    got = _script(by_name)
    assert got == _script(positional)
    assert "lhs" not in got and "x=" not in got


def test_old_parameter_names_are_refused_by_name():
    # tilecute's earlier names are not TileLang's: an error naming the form and TileLang's
    # signature at the user's line
    with pytest.raises(FrontendError, match=r"T.ceildiv: missing a required argument: 'lhs' "
                                            r"\(the signature is T.ceildiv\(lhs, rhs, "
                                            r"span=None\)\)"):
        T.from_script(_elementwise("T.ceildiv(a=A[i], b=4)"))
    with pytest.raises(FrontendError, match=r"T.fma: missing a required argument: 'x' "
                                            r"\(the signature is T.fma\(x, y, z\)\)"):
        T.from_script(_elementwise("T.fma(a=A[i], b=A[i], c=3)"))


@pytest.mark.parametrize("by_name,positional", [
    ("T.tvm_warp_shuffle(0xFFFFFFFF, A[i], warp_id=0, width=32, warp_size=32)",
     "T.tvm_warp_shuffle(0xFFFFFFFF, A[i], 0, 32, 32)"),
    ("T.tvm_warp_shuffle_down(0xFFFFFFFF, A[i], offset=1, width=32, warp_size=32)",
     "T.tvm_warp_shuffle_down(0xFFFFFFFF, A[i], 1, 32, 32)"),
    ("T.tvm_warp_shuffle_up(0xFFFFFFFF, A[i], offset=2, width=32, warp_size=32)",
     "T.tvm_warp_shuffle_up(0xFFFFFFFF, A[i], 2, 32, 32)"),
])
def test_tvm_warp_shuffle_parameter_names(by_name, positional):
    src = ("@T.prim_func\n"
           "def k(A: T.Tensor((32,), 'float32'), B: T.Tensor((32,), 'float32')):\n"
           "    with T.Kernel(1, threads=32) as bx:\n"
           "        i = T.get_thread_binding()\n"
           f"        B[i] = {{}}\n")
    assert T.from_script(src.format(by_name)).script() == T.from_script(src.format(positional)).script()


# ---- TVM's span=None -------------------------------------------------------------------------
@pytest.mark.parametrize("with_span,without", [
    ("T.abs(A[i] - 3, span=None)", "T.abs(A[i] - 3)"),
    ("T.abs(A[i] - 3, None)", "T.abs(A[i] - 3)"),
    ("T.if_then_else(A[i] > 0, A[i], 0, span=None)", "T.if_then_else(A[i] > 0, A[i], 0)"),
    ("T.Select(A[i] > 0, A[i], 1, span=None)", "T.Select(A[i] > 0, A[i], 1)"),
    ("T.cast(T.cast(A[i], 'int8', span=None), 'int32')", "T.cast(T.cast(A[i], 'int8'), 'int32')"),
    ("T.truncmod(A[i], 3, span=None) + T.floordiv(A[i], 2, span=None)",
     "T.truncmod(A[i], 3) + T.floordiv(A[i], 2)"),
    ("T.max_value('int32', span=None) - A[i]", "T.max_value('int32') - A[i]"),
    ("T.ceildiv(A[i], 8, span=None)", "T.ceildiv(A[i], 8)"),
])
def test_span_none_is_accepted(with_span, without):
    assert _script(with_span) == _script(without)


def test_cast_node_annotations_are_cast_hints():
    # TVM's T.Cast(dtype, value, annotations=None, span=None): T.cast's PTX hints as recorded
    assert _script("T.Cast('int8', A[i], annotations={'sat': False}, span=None)") == \
        _script("T.cast(A[i], 'int8', sat=False)")
    assert _script("T.Cast('int8', A[i], {'round': 'rn'})") == _script("T.Cast('int8', A[i])")
    with pytest.raises(FrontendError, match=r"T.Cast: annotations: round='rs' is not supported"):
        T.from_script(_elementwise("T.Cast('int8', A[i], annotations={'round': 'rs', 'rbits': A[i]})"))
    with pytest.raises(FrontendError, match=r"T.Cast: annotations key 'bogus' is not one of"):
        T.from_script(_elementwise("T.Cast('int8', A[i], annotations={'bogus': 1})"))


def test_span_float_helpers():
    assert _script("T.floor(A[i] * 0.5, span=None) + T.round(A[i], span=None)", "float32") == \
        _script("T.floor(A[i] * 0.5) + T.round(A[i])", "float32")


def test_span_other_than_none_is_refused_by_name():
    with pytest.raises(FrontendError, match=r"T.abs: span=1: TVM's source location"):
        T.from_script(_elementwise("T.abs(A[i], span=1)"))


def test_span_helpers_build():
    kernel = tilecute.compile(T.from_script(_elementwise(
        "T.ceildiv(lhs=T.abs(A[i], span=None), rhs=4) + T.bitwise_and(x=A[i], y=6)")))
    kernel.ensure_cubin()
    # the CuTe DSL statement: the named arguments in TileLang's order, span gone
    assert "B[i] = (abs(A[i]) + 4 - 1) // 4 + (A[i] & 6)" in kernel.get_kernel_source()


# ---- T.<dtype>(*args, is_size_var=False), T.dtype(value) ------------------------------------
def _swap_pairs(value: str) -> str:
    return ("@T.prim_func\n"
            "def k(A: T.Tensor((64,), 'float32'), B: T.Tensor((64,), 'float32')):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            "        for i in T.serial(32):\n"
            f"            B[T.Ramp(2 * i, 1, 2)] = {value}\n")


def test_dtype_call_with_several_values_is_a_shuffle():
    # TileLang 0.1.15: two or more values are TVM's Shuffle(args, [0, 1, ...]) (a vector
    # of the values' dtype); tilecute used to read the second as is_size_var and drop it
    got = T.from_script(_swap_pairs("T.float32(A[2 * i + 1], A[2 * i])")).script()
    assert got == T.from_script(_swap_pairs("T.Shuffle([A[2 * i + 1], A[2 * i]], [0, 1])")).script()
    assert "B[2 * i] = A[2 * i + 1]" in got and "B[2 * i + 1] = A[2 * i]" in got


def test_dtype_call_with_values_of_two_dtypes_is_refused():
    with pytest.raises(FrontendError, match=r"T.float32: 2 values make a vector \(TVM's Shuffle"
                                            r".*lanes of dtypes \['float32', 'int32'\]"):
        T.from_script(_swap_pairs("T.float32(A[2 * i + 1], 7)"))


def test_dtype_call_is_size_var_is_keyword_only():
    assert _script("T.int32(A[i], is_size_var=False)") == _script("T.int32(A[i])")
    # TVMScript's T.boolean(expr=None, is_size_var=False): T.bool under its own names
    assert _script("T.int32(T.boolean(expr=A[i] > 0))") == _script("T.int32(T.bool(A[i] > 0))")
    assert _script("T.int32(T.boolean(A[i] > 0, False))") == _script("T.int32(T.bool(A[i] > 0))")
    assert T.dtype(value="half") == T.float16


# ---- T.prim_func(func=), T.macro(func=) ------------------------------------------------------
def _double(A, B):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            B[i] = A[i] * 2


def _direct():
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2
    return main


def _through_macro(twice):
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        twice(A, B)
    return main


def test_prim_func_and_macro_take_func_by_name():
    by_name = T.prim_func(func=_direct())
    assert by_name.script() == T.prim_func(_direct()).script()
    assert T.prim_func(func=_through_macro(T.macro(func=_double))).script() == by_name.script()


# ---- T.break_loop() / T.continue_loop(): Python's break / continue ---------------------------
def _search(control: str) -> str:
    """The first negative element's index (a break) and the sum of the positive ones before
    it (a continue skips zeros and odd elements) of each row."""
    brk, cont = {
        "python": ("break", "continue"),
        "tvm": ("T.break_loop()", "T.continue_loop()"),
        "evaluate": ("T.evaluate(T.break_loop())", "T.evaluate(T.continue_loop(span=None))"),
    }[control]
    return ("@T.prim_func\n"
            "def search(A: T.Tensor((32, 64), 'int32'), S: T.Tensor((32,), 'int32'),\n"
            "           P: T.Tensor((32,), 'int32')):\n"
            "    with T.Kernel(32, threads=32) as bx:\n"
            "        acc = T.alloc_var(T.int32)\n"
            "        pos = T.alloc_var(T.int32, init=-1)\n"
            "        for j in T.serial(64):\n"
            "            if A[bx, j] < 0:\n"
            "                pos = j\n"
            f"                {brk}\n"
            "            if A[bx, j] % 2 == 1:\n"
            f"                {cont}\n"
            "            acc += A[bx, j]\n"
            "        S[bx] = acc\n"
            "        P[bx] = pos\n")


@pytest.mark.parametrize("control", ["tvm", "evaluate"])
def test_break_loop_and_continue_loop_are_break_and_continue(control):
    assert T.from_script(_search(control)).script() == T.from_script(_search("python")).script()


def test_break_loop_builds():
    kernel = tilecute.compile(T.from_script(_search("tvm")), out_idx=[1, 2])
    kernel.ensure_cubin()
    assert "while" in kernel.get_kernel_source()


def test_break_loop_outside_a_loop_is_an_error_at_its_line():
    with pytest.raises(FrontendError, match="outside a loop") as e:
        T.from_script("@T.prim_func\n"
                      "def k(A: T.Tensor((4,), 'float32')):\n"
                      "    with T.Kernel(1, threads=32) as bx:\n"
                      "        T.break_loop()\n")
    assert "T.break_loop()" in str(e.value)


def test_break_loop_with_a_span_is_refused_by_name():
    with pytest.raises(FrontendError, match=r"T.break_loop is a TileLang form that tilecute "
                                            "does not support"):
        T.from_script("@T.prim_func\n"
                      "def k(A: T.Tensor((4,), 'float32')):\n"
                      "    with T.Kernel(1, threads=32) as bx:\n"
                      "        for i in T.serial(4):\n"
                      "            T.break_loop(span=A)\n")


# ---- PassConfigKey: 0.1.15's new keys ---------------------------------------------------------
def test_new_pass_config_keys():
    K = PassConfigKey
    assert K.TL_ENABLE_FP32X2_REDUCTION.value == "tl.enable_fp32x2_reduction"
    assert K.TL_ENABLE_AUTO_SCHEDULE.value == "tl.enable_auto_schedule"
    assert K.TL_ENABLE_AUTO_WARP_SPECIALIZATION.value == "tl.enable_auto_warp_specialization"
    # packed FP32x2 reduction adds (SM100+): tilecute adds one value at a time, either way
    for v in (True, False):
        assert from_pass_configs({K.TL_ENABLE_FP32X2_REDUCTION: v}) == {}
        assert from_pass_configs({"tl.enable_auto_schedule": v}) == {}  # Ascend's switch
    assert from_pass_configs({K.TL_ENABLE_AUTO_WARP_SPECIALIZATION: None}) == {}
    with pytest.raises(OptionError, match=r"TL_ENABLE_AUTO_WARP_SPECIALIZATION.*'role_based' "
                                          "is not supported by tilecute"):
        from_pass_configs({K.TL_ENABLE_AUTO_WARP_SPECIALIZATION: "role_based"})


@tilelang.jit(out_idx=[1], pass_configs={"tl.enable_fp32x2_reduction": False,
                                         "tl.enable_auto_warp_specialization": None})
def row_sum(M=64, N=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_fragment((M,), T.float32)
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S)
    return main


def test_fp32x2_pass_config_through_jit_builds():
    row_sum().ensure_cubin()


# ---- GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_break_loop_on_gpu():
    import torch

    a = torch.randint(0, 50, (32, 64), device="cuda", dtype=torch.int32)
    stop = torch.randint(0, 80, (32,))
    for r in range(32):
        if stop[r] < 64:
            a[r, stop[r]] = -5
    kernel = tilecute.compile(T.from_script(_search("tvm")), out_idx=[1, 2])
    s, p = kernel(a)
    want_s, want_p = [], []
    for row in a.cpu().tolist():
        acc, pos = 0, -1
        for j, v in enumerate(row):
            if v < 0:
                pos = j
                break
            if v % 2 == 1:
                continue
            acc += v
        want_s.append(acc)
        want_p.append(pos)
    assert s.cpu().tolist() == want_s and p.cpu().tolist() == want_p


@pytest.mark.gpu
def test_named_helpers_on_gpu():
    import torch

    a = torch.randint(-100, 100, (64,), device="cuda", dtype=torch.int32)
    kernel = tilecute.compile(T.from_script(_elementwise(
        "T.ceildiv(lhs=T.abs(A[i], span=None), rhs=4) + T.bitwise_and(x=A[i], y=6)")),
        out_idx=[1])
    want = (a.abs() + 3) // 4 + (a & 6)
    assert torch.equal(kernel(a), want)


def test_gemm_warp_policy_helpers_give_tilelangs_partitions():
    """TileLang's GemmWarpPolicy helpers (tilelang.tileop.base), which programs call in Python
    to size their own per-warp tiles (its AMD fp8 preshuffle GEMM example):
    compute_warp_partition, from_warp_partition, to_prime_factors."""
    from tilecute.tileop.base import GemmWarpPolicy as P

    assert P is T.GemmWarpPolicy
    assert P.FullRow.compute_warp_partition(128, 128, 4) == (4, 1)
    assert P.FullRow.compute_warp_partition(32, 64, 4) == (2, 2)  # M holds 2 warps of 16 rows
    assert P.FullCol.compute_warp_partition(64, 128, 4) == (1, 4)
    assert P.FullCol.compute_warp_partition(64, 16, 4) == (2, 2)  # N holds 2 warps of 8 columns
    assert P.Square.compute_warp_partition(128, 128, 4) == (2, 2)
    assert P.Square.compute_warp_partition(64, 256, 8) == (2, 4)  # the tile's 1:4 aspect
    assert P.Square.compute_warp_partition(16, 8, 4) == (1, 1)  # no exact split fits
    assert [P.from_warp_partition(m, n) for m, n in ((4, 1), (1, 4), (2, 2), (1, 1))] == \
        [P.FullRow, P.FullCol, P.Square, P.Square]
    assert P.to_prime_factors(360) == [2, 2, 2, 3, 3, 5] and P.to_prime_factors(1) == []
    assert P.Square.is_square() and P.FullRow.is_full_row() and not P.FullCol.is_full_row()
