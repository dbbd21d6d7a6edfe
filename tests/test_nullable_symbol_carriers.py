"""A tensor argument no kernel uses may be None, TileLang's way, also where it carries a
shape symbol: the symbol binds from a tensor the caller must give where one carries it,
else from the first of its carriers given (TileLang's binder cascades over them), each
other carrier given checked against it.  None given: the symbol is 0, or -- several
carriers and a kernel uses it -- TileLang's RuntimeError "requires at least one non-null
buffer".  The CPU tests call the launchers with CPU tensors (every value check passes
when the call fails at the device check, last) and on the fake driver (tests/fake_cuda),
reading the symbol the kernel gets."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.runtime.abi import LaunchABI
from tilecute.transform.pipeline import lower


def skip_first(cols=64, rows=4):
    """A residual TileLang passes as None when a flag leaves it unread -- the first
    tensor to name ``m``."""
    m = T.dynamic("m")

    @T.prim_func
    def doubled(Residual: T.Tensor((m, cols), T.float32), X: T.Tensor((m, cols), T.float32),
                Y: T.Tensor((m, cols), T.float32)):
        with T.Kernel(T.ceildiv(m, rows), threads=128) as bx:
            for i, j in T.Parallel(rows, cols):
                if bx * rows + i < m:
                    Y[bx * rows + i, j] = X[bx * rows + i, j] * 2.0
    return doubled


def count_of(carriers=3):
    """Only unused tensors carry ``n``; the kernel writes it out (TileLang's test prints it)."""
    n = T.dynamic("n")

    @T.prim_func
    def count(a: T.Tensor((n,), T.int32), b: T.Tensor((n,), T.int32), c: T.Tensor((n, 2), T.int32),
              Out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                Out[0] = n
    if carriers == 3:
        return count

    @T.prim_func
    def count_one(a: T.Tensor((n,), T.int32), Out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                Out[0] = n + 1
    return count_one


def unused_symbol():
    """Two unused tensors carry ``k`` (one as ``k + 1``) and no kernel reads it."""
    k = T.dynamic("k")

    @T.prim_func
    def touch(a: T.Tensor((k,), T.float16), b: T.Tensor((k + 1,), T.float16),
              out: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((8,), T.float32)
            T.copy(out, f)
            for i in T.Parallel(8):
                f[i] = f[i] + 1.0
            T.copy(f, out)
    return touch


def expr_before_binder():
    """An unused tensor whose dim is ``m + 1`` before the tensor that binds ``m``."""
    m = T.dynamic("m")

    @T.prim_func
    def halo(Pad: T.Tensor((m + 1,), T.float32), X: T.Tensor((m,), T.float32),
             Y: T.Tensor((m,), T.float32)):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < m:
                    Y[bx * 128 + i] = X[bx * 128 + i] + 1.0
    return halo


def launcher_of(func):
    kernel = tilecute.compile(func, target="sm_90a")
    return kernel, (kernel.path / "launcher.cpp").read_text()


def device_check(name):
    return pytest.raises(ValueError, match=f"argument '{name}': expected a CUDA tensor")


def test_an_unused_first_carrier_may_be_none():
    torch = pytest.importorskip("torch")
    abi = lower(skip_first(), "sm_90a").abi
    assert [a.nullable for a in abi.args] == [True, False, False]
    (m,) = abi.symbols
    assert (m.arg, m.carriers) == (1, ())  # X binds it: a tensor the caller gives
    kernel, src = launcher_of(skip_first())
    assert 'sym_m = tc_bind_symbol(t_X->shape[0], "X", "shape[0]", "m", 1);' in src
    assert ('if (t_Residual != nullptr) tc_check_symbol(t_Residual->shape[0], sym_m, "Residual", '
            '"shape[0]", "m", "argument \'X\' shape[0]");') in src
    x, y = torch.randn(12, 64), torch.empty(12, 64)
    with device_check("X"):  # was: TypeError "argument 'Residual': expected a tensor, got None"
        kernel(None, x, y)
    with device_check("X"):
        kernel(torch.randn(12, 64), x, y)
    with pytest.raises(ValueError, match=re.escape(
            "argument 'Residual': expected shape[0] == m = 12 (from argument 'X' shape[0]), got 13")):
        kernel(torch.randn(13, 64), x, y)


def test_a_symbol_only_unused_tensors_carry_binds_from_the_first_given():
    torch = pytest.importorskip("torch")
    abi = lower(count_of(), "sm_90a").abi
    assert [a.nullable for a in abi.args] == [True, True, True, False]
    (n,) = abi.symbols
    assert n.carriers == ((0, "shape", 0), (1, "shape", 0), (2, "shape", 0)) and n.required
    assert LaunchABI.from_json(abi.to_json()) == abi
    kernel, src = launcher_of(count_of())
    assert "int64_t sym_n = 0;\n  const char* sym_n_at = nullptr;" in src
    assert ('    if (sym_n_at == nullptr) {  // the first tensor given that carries n binds it\n'
            '      sym_n = tc_bind_symbol(t_b->shape[0], "b", "shape[0]", "n", 1);\n'
            '      sym_n_at = "argument \'b\' shape[0]";\n'
            '    } else {\n'
            '      tc_check_symbol(t_b->shape[0], sym_n, "b", "shape[0]", "n", sym_n_at);\n'
            '    }') in src
    t = lambda *shape: torch.zeros(shape, dtype=torch.int32)  # noqa: E731
    out = t(1)
    for given in ((t(5), None, None), (None, t(5), None), (None, None, t(5, 2)),
                  (t(5), None, t(5, 2)), (t(5), t(5), t(5, 2))):
        with device_check("Out"):
            kernel(*given, out)
    with pytest.raises(ValueError, match=re.escape(
            "argument 'c': expected shape[0] == n = 5 (from argument 'b' shape[0]), got 6")):
        kernel(None, t(5), t(6, 2), out)
    with pytest.raises(ValueError, match=re.escape(
            "argument 'b': expected shape[0] == n = 4 (from argument 'a' shape[0]), got 5")):
        kernel(t(4), t(5), None, out)
    with pytest.raises(ValueError, match="argument 'c': expected shape.1. == 2"):
        kernel(None, None, t(5, 3), out)  # a carrier given is checked in full
    with pytest.raises(RuntimeError, match=re.escape(
            "symbolic shape variable n requires at least one non-null buffer among: "
            "a.shape[0], b.shape[0], c.shape[0]")):
        kernel(None, None, None, out)


def test_a_lone_or_unread_carrier_left_none_binds_zero():
    torch = pytest.importorskip("torch")
    (n,) = lower(count_of(1), "sm_90a").abi.symbols
    assert n.carriers == ((0, "shape", 0),) and not n.required  # TileLang: one carrier, 0
    kernel, src = launcher_of(count_of(1))
    assert "tc_fail_no_carrier" not in src
    with device_check("Out"):
        kernel(None, torch.zeros(1, dtype=torch.int32))
    abi = lower(unused_symbol(), "sm_90a").abi
    (k,) = abi.symbols
    assert k.carriers == ((0, "shape", 0),) and not k.required
    kernel, src = launcher_of(unused_symbol())
    # b's `k + 1` waits for k, and is checked only where b is given
    assert ('if (t_b != nullptr) tc_check_dim_expr(t_b->shape[0], (sym_k + INT64_C(1)), "b", '
            '"shape[0]", "k + 1");') in src
    out = torch.zeros(8, dtype=torch.float16)
    for a, b in ((None, None), (torch.zeros(3, dtype=torch.float16), None),
                 (torch.zeros(3, dtype=torch.float16), torch.zeros(4, dtype=torch.float16))):
        with device_check("out"):
            kernel(a, b, out)
    with pytest.raises(ValueError, match="argument 'b': expected shape.0. == k . 1"):
        kernel(None, torch.zeros(4, dtype=torch.float16), out)  # k = 0 (as TileLang binds it)


def test_a_stride_symbol_binds_from_the_first_strided_tensor_given():
    torch = pytest.importorskip("torch")
    ld = T.dynamic("ld")

    @T.prim_func
    def pitch(P: T.StridedTensor((8, 64), (ld, 1), "float32"), Q: T.StridedTensor((8, 64), (ld, 1), "float32"),
              Out: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                Out[0] = ld
    (s,) = lower(pitch, "sm_90a").abi.symbols
    assert s.carriers == ((0, "stride", 0), (1, "stride", 0)) and s.required
    kernel, src = launcher_of(pitch)
    assert ('      tc_check_stride_symbol(strides_Q[0], sym_ld, "Q", "strides[0]", "ld", sym_ld_at, '
            't_Q->shape[0]);') in src
    out = torch.zeros(1, dtype=torch.int32)
    for p, q in ((torch.randn(8, 100)[:, :64], None), (None, torch.randn(8, 80)[:, :64])):
        with device_check("Out"):
            kernel(p, q, out)
    with pytest.raises(ValueError, match=re.escape(
            "argument 'Q': expected strides[0] == ld = 100 (from argument 'P' strides[0]), got 80")):
        kernel(torch.randn(8, 100)[:, :64], torch.randn(8, 80)[:, :64], out)


def test_an_affine_dim_of_a_given_tensor_solves_what_unused_ones_name_plainly():
    torch = pytest.importorskip("torch")
    m = T.dynamic("m")

    @T.prim_func
    def pairs(Half: T.Tensor((m,), "float32"), Y: T.Tensor((2 * m,), "float32")):
        with T.Kernel(T.ceildiv(2 * m, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < 2 * m:
                    Y[bx * 128 + i] = Y[bx * 128 + i] + 1.0
    (s,) = lower(pairs, "sm_90a").abi.symbols
    assert (s.arg, s.scale, s.carriers) == (1, 2, ())  # Y solves m; Half may be None
    kernel, src = launcher_of(pairs)
    assert ('if (t_Half != nullptr) tc_check_symbol(t_Half->shape[0], sym_m, "Half", "shape[0]", '
            '"m", "argument \'Y\' shape[0]");') in src
    for half in (None, torch.zeros(5)):
        with device_check("Y"):
            kernel(half, torch.zeros(10))
    with pytest.raises(ValueError, match=re.escape(
            "argument 'Half': expected shape[0] == m = 5 (from argument 'Y' shape[0]), got 6")):
        kernel(torch.zeros(6), torch.zeros(10))


def test_an_unused_tensors_dim_expression_is_checked_only_when_given():
    torch = pytest.importorskip("torch")
    kernel, src = launcher_of(expr_before_binder())
    assert ('if (t_Pad != nullptr) tc_check_dim_expr(t_Pad->shape[0], (sym_m + INT64_C(1)), "Pad", '
            '"shape[0]", "m + 1");') in src
    x = torch.randn(300)
    with device_check("X"):
        kernel(None, x, torch.empty(300))
    with pytest.raises(ValueError, match="argument 'Pad'"):
        kernel(torch.randn(300), x, torch.empty(300))


# after fake_cuda.DRIVE_HEAD (the fake driver `cuda`, the launcher `mod`, the JSON `out`)
DRIVE_CALLS = r"""
out_t = FakeTensor((1,), "int32", data=0x900000, device="cuda:1")
mod["count"](None, FakeTensor((7,), "int32", data=0x100000, device="cuda:1"), None, out_t)
mod["count"](None, None, FakeTensor((9, 2), "int32", data=0x200000, device="cuda:1"), out_t)
out["log"] = cuda.fake_log().decode().splitlines()
print(json.dumps(out))
"""


def test_the_kernel_gets_the_symbol_of_the_carrier_given(tmp_path):
    pytest.importorskip("tvm_ffi")
    from fake_cuda import DRIVE_HEAD, drive_launcher, parse_launch

    _, out = drive_launcher(lower(count_of(), "sm_90a").abi, tmp_path, DRIVE_HEAD + DRIVE_CALLS)
    launches = [parse_launch(x) for x in out["log"] if x.startswith("launch")]
    null = (0).to_bytes(8, "little").hex()
    assert [(x["device"], x["params"]) for x in launches] == [
        ("1", [null, (0x100000).to_bytes(8, "little").hex(), null,
               (0x900000).to_bytes(8, "little").hex(), (7).to_bytes(4, "little").hex()]),
        ("1", [null, null, (0x200000).to_bytes(8, "little").hex(),
               (0x900000).to_bytes(8, "little").hex(), (9).to_bytes(4, "little").hex()]),
    ]


# ---- on a GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
def test_unused_first_carrier_none_on_gpu():
    import torch
    x = torch.randn(37, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(skip_first())(None, x, y)
    torch.testing.assert_close(y, x * 2.0)


@pytest.mark.gpu
def test_symbol_from_first_carrier_given_on_gpu():
    import torch
    kernel = tilecute.compile(count_of())
    out = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    t = lambda *shape: torch.zeros(shape, dtype=torch.int32, device="cuda")  # noqa: E731
    for given, n in (((t(5), None, None), 5), ((None, t(6), None), 6), ((None, None, t(7, 2)), 7),
                     ((t(8), None, t(8, 2)), 8)):
        kernel(*given, out)
        assert out.item() == n
    lone = tilecute.compile(count_of(1))
    lone(None, out)
    assert out.item() == 1  # n = 0
    touch = tilecute.compile(unused_symbol())
    o = torch.zeros(8, dtype=torch.float16, device="cuda")
    touch(None, None, o)
    torch.testing.assert_close(o, torch.ones_like(o))
