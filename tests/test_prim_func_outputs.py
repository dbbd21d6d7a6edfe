"""TileLang's function attributes in a plain ``@T.prim_func``: ``B = T.empty(shape, dtype)``
outputs returned by ``return B`` (the function's out_idx), and
``T.annotate_pass_configs`` / ``T.annotate_compile_flags`` (its options)."""

from pathlib import Path

import pytest

import tilecute
import tilecute.language as T
from tilecute import PassConfigKey
from tilecute.ir.serialize import from_json
from tilecute.language.parser import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


@T.prim_func
def plus_one(A):
    A: T.Tensor[[128, 128], T.float32]
    B = T.empty([128, 128], T.float32)
    with T.Kernel(1):
        for i in T.serial(128):
            for j in T.serial(128):
                B[i, j] = A[i, j] + 1.0
    return B


@T.prim_func
def two_outputs(A):
    m = T.dynamic("m")
    A: T.Tensor[[m], T.float32]
    B = T.empty([m * 2 + 1], T.float32)
    C = T.empty(m + 1, dtype=T.float32)
    with T.Kernel(1, threads=1):
        for i in T.serial(m * 2 + 1):
            B[i] = A[i % m] + 1.0
        for i in T.serial(m + 1):
            C[i] = T.cast(i, T.float32)
    return C, B


@T.prim_func
def doubled(A):
    T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
    A: T.Tensor[[64, 64], T.float32]
    B = T.empty([64, 64], T.float32)
    T.annotate_compile_flags(["--use_fast_math"])
    with T.Kernel(1):
        for i in T.serial(64):
            for j in T.serial(64):
                B[i, j] = A[i, j] / 3.0
    return B


@T.prim_func
def in_place_fast(A, B):
    A: T.Tensor[[32, 32], T.float32]
    B: T.Tensor[[32, 32], T.float32]
    T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
    with T.Kernel(1):
        for i in T.serial(32):
            for j in T.serial(32):
                B[i, j] = A[i, j] / 3.0


@T.prim_func
def in_place_plain(A, B):
    A: T.Tensor[[32, 32], T.float32]
    B: T.Tensor[[32, 32], T.float32]
    with T.Kernel(1):
        for i in T.serial(32):
            for j in T.serial(32):
                B[i, j] = A[i, j] / 3.0


def test_empty_outputs_are_trailing_parameters_with_out_idx():
    assert [p.name for p in plus_one.params] == ["A", "B"] and plus_one.out_idx == (-1,)
    assert [int(d.value) for d in plus_one.params[1].shape] == [128, 128]
    # in return order, so the kernel returns them so (TileLang: out_idx [-1, -2])
    assert [p.name for p in two_outputs.params] == ["A", "C", "B"]
    assert two_outputs.out_idx == (-2, -1)
    text = two_outputs.script()
    assert "C = T.empty((m + 1,), \"float32\")" in text and "return C, B" in text
    assert from_json(two_outputs.to_json()).out_idx == (-2, -1)
    assert in_place_plain.out_idx is None and '"out_idx"' not in in_place_plain.to_json()


def test_function_attributes_are_recorded():
    assert doubled.pass_configs == (("tl.enable_fast_math", True),)
    assert doubled.compile_flags == ("--use_fast_math",)
    assert in_place_fast.pass_configs == (("tl.enable_fast_math", True),)
    assert in_place_fast.out_idx is None
    text = doubled.script()
    assert "T.annotate_pass_configs({'tl.enable_fast_math': True})" in text
    assert "T.annotate_compile_flags(['--use_fast_math'])" in text
    again = T.from_script(text)
    assert (again.out_idx, again.pass_configs, again.compile_flags) == \
        (doubled.out_idx, doubled.pass_configs, doubled.compile_flags)


def test_compile_takes_the_functions_out_idx():
    k = tilecute.compile(plus_one)
    assert k.out_idx == [1] and [a.name for a in k.abi.args] == ["A", "B"]
    k2 = tilecute.compile(two_outputs)
    assert k2.out_idx == [1, 2] and [a.name for a in k2.abi.args] == ["A", "C", "B"]
    assert k2.abi.args[2].shape == (("add", ("mul", "m", 2), 1),)  # bound from A at launch


def test_out_idx_conflict_names_both():
    with pytest.raises(ValueError, match=r"Out index conflict: out_idx=\[-1\].*out_idx \[-1\], "
                                         r"parameter\(s\) B"):
        tilecute.compile(plus_one, out_idx=[-1])
    with pytest.raises(ValueError, match=r"Out index conflict: out_idx=\[0\]"):
        tilecute.compile(plus_one, [0])


def test_fast_math_reaches_the_generated_code():
    fast = "rcp_approx"  # x / 3.0 under fast math: a multiply by the approximate reciprocal
    plain = tilecute.compile(in_place_plain, out_idx=[-1]).get_kernel_source()
    assert fast not in plain
    assert fast in tilecute.compile(in_place_fast, out_idx=[-1]).get_kernel_source()
    assert fast in tilecute.compile(doubled).get_kernel_source()
    # the caller's pass_configs override the function's, key by key (TileLang's merge)
    off = tilecute.compile(in_place_fast, out_idx=[-1],
                           pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: False})
    assert fast not in off.get_kernel_source()


def test_build_cubin_takes_the_functions_options(tmp_path):
    info = tilecute.build_cubin(doubled, "sm_90a", out_dir=str(tmp_path))
    assert Path(info.path).stat().st_size > 0
    assert "rcp_approx" in (tmp_path / "kernel_cute.py").read_text()


def _parse_error(src: str, match: str):
    with pytest.raises(FrontendError, match=match):
        T.from_script(src, {"PassConfigKey": PassConfigKey})


def test_refusals_name_the_form_and_line():
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    B = T.empty((8,), "float32")
    with T.Kernel(1):
        B[0] = A[0]
''', r"T.empty output\(s\) B not returned")
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    B = T.empty((8,), "float32")
    with T.Kernel(1):
        B[0] = A[0]
    return A
''', r"returns only tensors allocated by T.empty \(B\), got A")
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32"), n: T.float32):
    B = T.empty((T.cast(n, "int32") + 1,), "float32")
    with T.Kernel(1):
        B[0] = A[0]
    return B
''', r"symbolic dimension n is float32")  # (an integer scalar: tests/test_empty_scalar_dims.py)
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    T.annotate_pass_configs({PassConfigKey.TL_DISABLE_TMA_LOWER: True, "tl.layout_cost_model": "x"})
    with T.Kernel(1):
        A[0] = 1.0
''', r"PassConfigKey.TL_LAYOUT_COST_MODEL")
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    T.annotate_pass_configs({"tl.no_such_key": True})
    with T.Kernel(1):
        A[0] = 1.0
''', r"'tl.no_such_key' is not one of TileLang's PassConfigKey keys")
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    T.annotate_compile_flags(["--use_fast_math", "-G"])
    with T.Kernel(1):
        A[0] = 1.0
''', r"compile_flags '-G' is not supported by tilecute")
    _parse_error('''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    with T.Kernel(1):
        B = T.empty((8,), "float32")
        A[0] = 1.0
''', r"T.empty is a TileLang form that tilecute does not support \(here: T.empty "
       r"declares an output at the top level")


def test_eager_body_annotates_its_pass_configs():
    @tilecute.jit
    def eager(A):
        M, N = T.const("M N")
        A: T.Tensor[[M, N], T.float32]
        B = T.empty([M, N], T.float32)
        T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
        with T.Kernel(1):
            for i in T.serial(M):
                for j in T.serial(N):
                    B[i, j] = A[i, j] / 3.0
        return B

    assert "rcp_approx" in eager.compile(M=32, N=32).get_kernel_source()


def test_refusal_reports_the_source_line():
    src = '''
@T.prim_func
def k(A: T.Tensor((8,), "float32")):
    T.annotate_compile_flags("-G")
    with T.Kernel(1):
        A[0] = 1.0
'''
    with pytest.raises(FrontendError) as e:
        T.from_script(src)
    assert "annotate_compile_flags" in str(e.value) and ":4" in str(e.value)


@pytest.mark.gpu
def test_gpu_single_output():
    import torch

    k = tilecute.compile(plus_one)
    a = torch.randn(128, 128, device="cuda")
    torch.testing.assert_close(k(a), a + 1.0)


@pytest.mark.gpu
def test_gpu_two_outputs_with_symbolic_dims_in_return_order():
    import torch

    k = tilecute.compile(two_outputs)
    a = torch.arange(37, dtype=torch.float32, device="cuda")
    outs = k(a)
    assert isinstance(outs, list)  # several outputs come back as a list, as TileLang's
    c, b = outs
    assert b.shape == (75,) and c.shape == (38,)
    torch.testing.assert_close(b, a.repeat(3)[:75] + 1.0)
    torch.testing.assert_close(c, torch.arange(38, dtype=torch.float32, device="cuda"))


@pytest.mark.gpu
def test_gpu_fast_math_function():
    import torch

    k = tilecute.compile(doubled)
    a = torch.randn(64, 64, device="cuda")
    torch.testing.assert_close(k(a), a / 3.0)
