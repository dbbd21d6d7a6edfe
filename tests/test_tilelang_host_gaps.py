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


def test_lower_names_what_it_got_instead_of_a_prim_func(cache_dir):
    kernel = tilecute.compile(_scale(), target="cuda")
    with pytest.raises(TypeError, match=r"takes a PrimFunc .*got .*kernel.get_kernel_source\(\)"):
        tilecute.lower(kernel)
    with pytest.raises(TypeError, match="takes a PrimFunc"):
        tilecute.lower("def f(): pass")


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
    ("tilecute.transform.simplify", "LetInline"),
    ("tilecute.language.kernel", "_normalize_threads"),
])
def test_tilelangs_internal_modules_import_and_refuse_their_names(module, name):
    value = getattr(importlib.import_module(module), name)
    with pytest.raises(NotImplementedError, match=module.replace("tilecute", "tilelang")
                       + rf"\.{name} is not supported by tilecute"):
        value()


def test_parameters_typed_in_the_body():
    src = '''
import tilecute.language as T

@T.prim_func
def shift(A, B, n: T.int32):
    """A docstring first."""
    m = T.dynamic("m")
    width = 4
    A: T.Tensor((m, width), T.float32)
    B: T.Tensor[[m, width], T.float32]
    with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:
        for i, j in T.Parallel(32, width):
            if bx * 32 + i < m:
                B[bx * 32 + i, j] = A[bx * 32 + i, j] + T.cast(n, T.float32)
'''
    f = T.from_script(src)
    assert [(p.name, getattr(p, "shape", None)) for p in f.params][:2] == [
        ("A", (N.Var("m"), N.Const(4, "int32"))), ("B", (N.Var("m"), N.Const(4, "int32")))]
    assert [s.name for s in f.symbols] == ["m"]
    with pytest.raises(FrontendError, match=r":5: .*parameter 'B' needs an annotation .* or as "
                                            r"`B: T.Tensor\(...\)` at the top of the body"):
        T.from_script(src.replace("    B: T.Tensor[[m, width], T.float32]\n", ""))
    with pytest.raises(FrontendError, match=r":9: .*'A': dimension 0 must be positive"):
        T.from_script(src.replace("A: T.Tensor((m, width)", "A: T.Tensor((0, width)"))


@pytest.mark.parametrize("statement, message", [
    ("T.annotate_pass_configs({'tl.bogus': 1})", r"T.annotate_pass_configs: pass_configs key "
                                                 r"'tl.bogus' is not one of TileLang's"),
    ("T.func_attr({'tir.noalias': True})", r"T.func_attr is a TileLang form"),
    ("T.evaluate(0)", r"`T.evaluate\(...\)` at the top level: only `with T.Kernel\(...\)` blocks"),
    ("for b in T.thread_binding(1, 2, thread='blockIdx.x'):\n        A[0] = 1.0",
     r"T.thread_binding\(1, 2, thread='blockIdx.x'\)`: the range must start at 0"),
])
def test_top_level_statements_are_refused_by_name(statement, message):
    src = f'''
import tilecute.language as T

@T.prim_func
def top(A: T.Tensor((8,), T.float32)):
    {statement}
    with T.Kernel(1, threads=32):
        A[0] = 1.0
'''
    with pytest.raises(FrontendError, match=message) as e:
        T.from_script(src)
    assert ":6:" in str(e.value)


def test_a_select_on_a_parse_time_condition_is_its_side(tmp_path, monkeypatch):
    @T.prim_func
    def pick(A: T.Tensor((32, 4), T.float32), B: T.Tensor((32, 4), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            for j in T.serial(4):
                B[tx, j] = T.Select(A[tx, 0] > 0, T.if_then_else(T.Select(False, True, False), 1.0, 2.0),
                                    T.Select(True, A[tx, j], 5.0))

    assert "B[tx, j] = T.if_then_else(A[tx, 0] > T.float32(0.0), T.float32(2.0), A[tx, j])" \
        in pick.script()
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    assert tilecute.compile(pick, target="cuda").ensure_cubin()  # CuTe's select_ wants runtime conditions


def test_tvm_handle_parameters_are_refused_by_name():  # (T.PersistentTileScheduler: test_tile_scheduler.py)
    with pytest.raises(FrontendError, match=r"parameter 'A_ptr': T.handle is bound by no `A = "
                                            r"T.match_buffer\(A_ptr, shape, dtype\)`.*T.Tensor\(shape, dtype\)"):
        T.from_script('''
import tilecute.language as T

@T.prim_func
def opaque(A_ptr: T.handle):
    with T.Kernel(1, threads=32):
        pass
''')


def test_cast_checks_tilelangs_rounding_hints():
    x = T.float32(1.0)
    assert T.cast(x, "float8_e4m3", round="rn") == T.cast(x, "float8_e4m3")  # nearest even
    for kwargs, message in [({"round": "up"}, "Invalid round 'up'"),
                            ({"sat": "yes"}, "Invalid sat 'yes'"),
                            ({"round": "rs"}, "rbits is required when round='rs'"),
                            ({"rbits": 3}, "rbits is only valid with round='rs'"),
                            ({"round": "rz"}, r"T.cast: round='rz' is not supported"),
                            ({"round": "rs", "rbits": 3}, r"T.cast: round='rs' is not supported"),
                            ({"round": "rs", "rbits": 3, "sat": False},
                             r"T.cast: round='rs' is not supported")]:
        with pytest.raises(ValueError, match=message):
            T.cast(x, "float8_e4m3", **kwargs)


def test_a_refused_name_refuses_iteration_too():
    from tilecute.language.tir.ir import _VALID_CAST_ROUNDING_MODES as modes

    with pytest.raises(NotImplementedError, match=r"tilelang.language.tir.ir._VALID_CAST_ROUNDING_MODES"):
        list(modes)
    with pytest.raises(NotImplementedError, match="not supported by tilecute"):
        "rn" in modes  # noqa: B015


def test_tilelangs_fast_math_intrinsics(tmp_path, monkeypatch):
    @T.prim_func
    def fast(X: T.Tensor((128,), T.float32), Y: T.Tensor((8, 128), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                Y[0, i] = T.__exp(X[i])
                Y[1, i] = T.__exp10(X[i])
                Y[2, i] = T.__log(X[i])
                Y[3, i] = T.__log2(X[i])
                Y[4, i] = T.__log10(X[i])
                Y[5, i] = T.__sin(X[i])
                Y[6, i] = T.__cos(X[i])
                Y[7, i] = T.__tan(X[i])

    calls = [s.value.name for s in walk_stmts(fast.kernels[0].body) if isinstance(s, N.Store)]
    assert calls == ["exp_approx", "exp10_approx", "log_approx", "log2_approx", "log10_approx",
                     "sin_approx", "cos_approx", "tan_approx"]
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(fast, target="cuda")
    source = kernel.get_kernel_source()
    for fn in ("exp2", "log2", "sin", "cos"):
        assert f"cute.math.{fn}(" in source
    assert "cutlass.Float32(3.321928094887362)" in source  # 10**x = 2**(x log2 10)
    assert kernel.ensure_cubin()
    with pytest.raises(FrontendError, match=r"T.__exp takes a float32 \(or 16-bit float\) value, got int32"):
        T.from_script('''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((8,), T.int32)):
    with T.Kernel(1, threads=32):
        A[0] = T.cast(T.__exp(A[1]), T.int32)
''')
