"""Numeric forms whose TileLang meaning the code generator or the frontend had wrong:
``T.max`` / ``T.min`` (and ``T.clamp``) of floats are CUDA's ``fmaxf`` / ``__hmax`` in
TileLang's CUDA code, NaN-quiet (a NaN operand gives the other), where CuTe DSL's
``cutlass.max`` selects and passes a NaN on; ``T.abs`` of an unsigned integer is the
value (TVM), not a signed ``abs``; ``//`` and ``%`` on floats are TVM's floordiv /
floormod, which take integers only: TileLang refuses them, and so does tilecute."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


def minmax(dtype, n=128, clamp=True):
    @T.prim_func
    def mm(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((3, n), dtype)):
        with T.Kernel(1, threads=n) as bx:
            t = T.get_thread_binding()
            O[0, t] = T.max(A[t], B[t])
            O[1, t] = T.min(A[t], B[t])
            if clamp:  # (TileLang's tl::clamp keeps a NaN x: a select; test_expr_semantics_audit.py)
                O[2, t] = T.clamp(A[t], -1.0, 1.0)
    return mm


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3", "float64"])
def test_float_max_min_are_nan_quiet(dtype):
    src = emit_cute(lower(minmax(dtype), "sm_90a"))
    assert "cutlass.max(" not in src and "cutlass.min(" not in src, src
    if dtype == "float64":
        assert "cute.math.max(" in src and "cute.math.min(" in src, src
    elif dtype == "float32":
        assert "= cute.arch.fmax(A[t], B[t])" in src, src
    else:
        assert re.search(r"cutlass\.\w+\(cute\.arch\.fmax\(cutlass\.Float32\(A\[t\]\), "
                         r"cutlass\.Float32\(B\[t\]\)\)\)", src), src


def _ptx(func, tmp_path, monkeypatch):
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source
    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, "sm_90a")))
    module = import_source(str(path), f"tilecute_minmax_{tmp_path.name}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__


@pytest.mark.parametrize("dtype,suffix", [("float32", "f32"), ("float16", "f16"), ("bfloat16", "bf16")])
def test_float_max_min_are_one_max_instruction(dtype, suffix, tmp_path, monkeypatch):
    """max.f32 / max.f16 / max.bf16 (NaN-quiet; not max.NaN), no select."""
    ptx = _ptx(minmax(dtype, clamp=False), tmp_path, monkeypatch)
    assert re.search(rf"\bmax\.{suffix}\b", ptx) and re.search(rf"\bmin\.{suffix}\b", ptx), ptx
    assert "NaN" not in ptx and "selp" not in ptx, ptx


def test_abs_of_unsigned_is_the_value():
    u = N.Var("u", "uint32")
    assert T.abs(u) is u
    i = N.Var("i", "int32")
    assert T.abs(i) == N.Call("abs", (i,), "int32")


@pytest.mark.parametrize("expr,message", [
    ("A[t] % B[t]", "% on float32 operands: TVM's floormod takes integers (TileLang refuses it)"),
    ("A[t] // B[t]", "// on float32 operands: TVM's floordiv takes integers"),
    ("A[t] % 2", "% on float32 operands"),
    ("T.floormod(A[t], 2.0)", "% on float32 operands"),
    ("T.floordiv(A[t], 2)", "// on float32 operands"),
])
def test_float_floordiv_and_floormod_are_refused(expr, message):
    src = ("import tilecute.language as T\n\n\n@T.prim_func\n"
           "def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):\n"
           "    with T.Kernel(1, threads=128) as bx:\n"
           "        t = T.get_thread_binding()\n"
           f"        B[t] = {expr}\n")
    with pytest.raises(FrontendError) as e:
        T.from_script(src)
    assert message in str(e.value) and ":8:" in str(e.value), str(e.value)


def test_integer_floordiv_and_floormod_still_fold():
    assert N.binop("mod", N.Const(-7, "int32"), 2) == N.Const(1, "int32")
    assert N.binop("floordiv", N.Const(-7, "int32"), 2) == N.Const(-4, "int32")


def test_builds_cubins(tmp_path):
    for dtype in ("float32", "float16", "bfloat16"):
        assert tilecute.build_cubin(minmax(dtype), "sm_90a", out_dir=str(tmp_path / dtype)).kernel_names
