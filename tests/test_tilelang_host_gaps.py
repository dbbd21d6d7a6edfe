"""TileLang host-API and frontend surface: ``tilecute.lower(func, target=...)`` with
TileLang's signature, ``kernel.get_kernel_source(kernel_only=...)``, TVM's
``T.parallel(n)`` loop, and TileLang's internal modules that import but refuse their
names."""

import importlib

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


def _scale(n=256):
    @T.prim_func
    def scale(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 3.0

    return scale


def test_lower_takes_tilelangs_signature_and_returns_the_cute_source():
    art = tilecute.lower(_scale(), target="cuda")
    assert "@cute.kernel" in art.kernel_source and art.arch == tilecute.api._arch("cuda", "t")
    assert [a.name for a in art.params] == ["X", "Y"] and art.plan.abi.function == "scale"
    assert tilecute.lower(_scale(), "sm_80", runtime_only=True).params is None
    with pytest.raises(NotImplementedError, match="host_mod is TileLang's TVM module"):
        art.host_mod  # noqa: B018
    with pytest.raises(ValueError, match="enable_device_compile=True is not supported"):
        tilecute.lower(_scale(), target="cuda", enable_device_compile=True)
    with pytest.raises(ValueError, match="target_host='cuda' is not supported"):
        tilecute.lower(_scale(), target_host="cuda")


def test_kernel_source_with_and_without_the_host_side(cache_dir):
    kernel = tilecute.compile(_scale(), target="cuda")
    device = kernel.get_kernel_source(kernel_only=True)
    assert device == kernel.get_kernel_source() == kernel.get_source("cute")
    full = kernel.get_kernel_source(kernel_only=False)
    assert full.startswith(device) and kernel.get_source("launcher") in full \
        and kernel.get_source("host") in full


def test_tvm_parallel_loop_is_t_parallel():
    tvm_style = _scale()

    @T.prim_func
    def scale(X: T.Tensor((256,), T.float32), Y: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 3.0

    loops = [s for s in walk_stmts(tvm_style.kernels[0].body) if isinstance(s, N.For)]
    assert [(x.kind, x.extent) for x in loops] == [("parallel", N.Const(128, "int32"))]
    assert tvm_style.script() == scale.script()
    with pytest.raises(FrontendError, match=r"T.parallel\(start, stop\) is supported from start 0"):
        T.from_script('''
import tilecute.language as T

@T.prim_func
def shifted(X: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=32):
        for i in T.parallel(2, 8):
            X[i] = 0.0
''')


@pytest.mark.parametrize("module, name", [
    ("tilecute.language.tir.ir", "_VALID_CAST_ROUNDING_MODES"),
    ("tilecute.language.common", "exp2"),
    ("tilecute.transform.simplify", "apply_simplify"),
    ("tilecute.language.kernel", "_normalize_threads"),
])
def test_tilelangs_internal_modules_import_and_refuse_their_names(module, name):
    value = getattr(importlib.import_module(module), name)
    with pytest.raises(NotImplementedError, match=module.replace("tilecute", "tilelang")
                       + rf"\.{name} is not supported by tilecute"):
        value()
