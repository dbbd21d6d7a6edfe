"""TileLang's jit argument binding (issue 17): a factory's kernels are keyed by the bound
compile-time arguments (defaults applied), so every call form of one argument set is one
kernel; lists, dicts and sets key by value and other unhashable values are refused with
TileLang's message; ``jitted.func`` (TileLang's ``JITFunc``) exposes ``parse_args`` /
``_parse_phase1_key``, and ``jitted.mode`` is ``"lazy"`` or ``"eager"``."""

import pytest

import tilecute
import tilecute.language as T

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


BUILT = []


@tilecute.jit(out_idx=[-1])
def _scale(n: int, block: int, factor=2.0, tags=("a",), opts=None):
    BUILT.append((n, block, factor))
    factor = factor * len(opts or [None])

    @T.prim_func
    def scale(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * factor

    return scale


class _Config:  # unhashable: a class with __eq__ and no __hash__
    def __eq__(self, other):
        return isinstance(other, _Config)
    __hash__ = None


def test_call_forms_of_one_argument_set_are_one_kernel():
    BUILT.clear()
    k = _scale(256, 128)
    assert _scale(256, 128, 2.0) is k  # the default given
    assert _scale(block=128, n=256) is k  # keywords, any order
    assert _scale(256, block=128, factor=2.0, tags=("a",)) is k
    assert BUILT == [(256, 128, 2.0)]  # the factory ran once
    assert _scale(256, 128, 3.0) is not k
    k.ensure_cubin()


def test_unhashable_values_key_by_value_or_are_refused():
    k = _scale(256, 128, opts=[1, 2])
    assert _scale(256, 128, opts=[1, 2]) is k  # a list keys by its items
    assert _scale(256, 128, opts={"x": [1, 2]}) is _scale(256, 128, opts={"x": [1, 2]})
    with pytest.raises(TypeError, match="Unsupported unhashable JIT compile-time cache key "
                                        "value of type _Config"):
        _scale(256, 128, opts=_Config())


def test_parse_args_is_tilelangs_key():
    key, tensors = _scale.func.parse_args(256, 128)
    assert key == ((256, 128, 2.0, ("a",), None), None) and tensors == {}
    assert _scale.func.parse_args(block=128, n=256)[0] == key
    assert _scale.mode == "lazy" and _scale.func.orig_func.__name__ == "_scale"
    with pytest.raises(TypeError, match="got multiple values for argument 'n'"):
        _scale.func.parse_args(256, n=256, block=128)
    with pytest.raises(TypeError, match="missing a required argument: 'block'"):
        _scale.func.parse_args(n=256)
    with pytest.raises(TypeError, match="too many positional arguments"):
        _scale.func.parse_args(1, 2, 3, 4, 5, 6)
    # a keyword the signature lacks joins the key as one sorted item (TileLang's T.const
    # values by name), then reaches the function
    assert _scale.func.parse_args(256, 128, M=4)[0] == ((256, 128, 2.0, ("a",), None, (("M", 4),)), None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'M'"):
        _scale(256, 128, M=4)


@tilecute.jit
def _add_one(X, block: int = 64, dtype=T.float32, **meta):
    M = T.const("M")
    X: T.Tensor((M,), dtype)
    Y = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        for i in T.Parallel(block):
            Y[bx * block + i] = X[bx * block + i] + 1.0
    return Y


def test_eager_keys_leave_tensors_out():
    x = torch.zeros(256)
    key, tensors, kwargs = _add_one.func._parse_phase1_key(x, note=[1])
    assert key == (64, T.float32, (("note", (list, (1,))),))
    assert tensors == {"X": x} and kwargs == {"block": 64, "dtype": T.float32, "note": [1]}
    assert _add_one.mode == "eager"
    assert _add_one.func.parse_args(x)[0] == ((64, T.float32), (("M", 256),))
    assert _add_one.func.get_tir(x).name == "_add_one"


def test_jit_is_the_decorator_and_tilelangs_package():
    import importlib

    import tilecute.jit
    from tilecute.jit import JITKernel, compile as jit_compile
    from tilecute.runtime.kernel import Kernel

    assert jit_compile is tilecute.compile and issubclass(Kernel, JITKernel)
    assert importlib.import_module("tilecute.jit.kernel").JITKernel is JITKernel

    @tilecute.jit(out_idx=[-1])  # the module is callable: TileLang's @tilelang.jit(...)
    def copy(n):
        return _scale.func.get_tir(n, 64)

    assert copy(128) is copy(n=128)
    # TileLang's modules without a counterpart import; their names are refused when used
    from tilecute.jit.adapter.nvrtc.adapter import NVRTCKernelAdapter
    from tilecute.jit.diagnostics import jit_phase

    for refused, what in ((NVRTCKernelAdapter, "tilelang.jit.adapter.nvrtc.adapter.NVRTCKernelAdapter"),
                          (jit_phase, "tilelang.jit.diagnostics.jit_phase")):
        with pytest.raises(NotImplementedError, match=rf"{what} is not supported by tilecute"):
            refused()
    with pytest.raises(NotImplementedError, match=r"tilelang.jit.JITImpl is not supported"):
        tilecute.jit.JITImpl()
    with pytest.raises(AttributeError):
        tilecute.jit.no_such_name


def test_cutedsl_check_and_host_source():
    # TileLang's CuTe DSL test suites skip unless this passes: tilecute's kernels are CuTe DSL
    from tilecute.jit.adapter import CuTeDSLKernelAdapter
    from tilecute.jit.adapter.cutedsl.checks import check_cutedsl_available

    pytest.importorskip("cutlass.cute")
    assert check_cutedsl_available() is None
    with pytest.raises(NotImplementedError, match=r"tilelang.jit.adapter.CuTeDSLKernelAdapter is "
                                                  r"not supported by tilecute"):
        CuTeDSLKernelAdapter()
    kernel = _scale(128, 64)
    host = kernel.get_host_source()
    assert kernel.get_source("host") in host and kernel.get_source("launcher") in host


def test_jitkernel_compiles_a_prim_func_as_tilelang(tmp_path, monkeypatch):
    """TileLang's ``JITKernel(func, out_idx, execution_backend, target, ...)`` constructor
    compiles ``func`` (its kernel tests and older tutorials write it); the result is an
    instance of ``JITKernel``; a kernel folder loads; ``from_database`` is refused."""
    from tilecute.jit import JITKernel

    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    kernel = JITKernel(_scale.func.get_tir(256, 64), out_idx=[-1], target="cuda")
    assert isinstance(kernel, JITKernel) and kernel.out_idx == [1]
    assert kernel.get_kernel_source()
    again = JITKernel(str(kernel.path), out_idx=[-1])
    assert again.abi.to_json() == kernel.abi.to_json()
    with pytest.raises(NotImplementedError, match="from_database=True"):
        JITKernel(from_database=True, target="c")
    assert not isinstance(object(), JITKernel)
