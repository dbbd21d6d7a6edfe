"""TileLang's eager jit style and autotune over it (issue 17 items 5-6): T.const bound
through Python aliases, derived dims checked, shapes given by variables and lists,
in-place kernels without T.empty, runtime scalar parameters (grid extents included),
the kernel API of an eager function (compile / get_kernel_source / get_tir /
par_compile), and tilecute.autotune over eager kernels (tunables given by the call,
set_autotune_inputs, early_stop, TileLang's AutoTuner builder)."""

import dataclasses
import sys
from pathlib import Path

import pytest

import tilecute
import tilecute.language as T
from tilecute import autotuner as A
from tilecute.language import FrontendError

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_programs as P  # noqa: E402
import eager_programs as E  # noqa: E402


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


def _shapes(kernel):
    return {a.name: getattr(a, "shape", None) for a in kernel.abi.args}


# ---- binding ---------------------------------------------------------------------------
def test_constants_bind_through_aliases_and_derived_dims_are_checked():
    data, weight, bias = torch.zeros(2, 10, 4), torch.zeros(3, 4, 64), torch.zeros(4, 64)
    k = E.conv1d.compile(data, weight, bias, S=2)  # K from weight's dim 0, declared as KW
    assert _shapes(k) == {"data": (2, 10, 4), "weight": (3, 4, 64), "bias": (4, 64),
                          "out": (2, 4, 64)}  # OL = (10 - 3) // 2 + 1
    assert k.kernel.out_idx == [3]
    assert E.conv1d.compile(N=2, L=10, C=4, F=64, K=3, S=2) is k  # the same kernel by keyword
    with pytest.raises(ValueError, match=r"conv1d: 'bias' is declared with shape \(4, 64\) "
                                         r"for .*K=3.*got a tensor of shape \(5, 64\)"):
        E.conv1d.compile(data, weight, torch.zeros(5, 64), S=2)


@tilecute.jit
def _doubled(A, block: int = 64):
    M = T.const("M")
    A: T.Tensor((2 * M,), T.float32)
    B = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[2 * (bx * block + i)]
    return B


def test_a_constant_used_only_inside_expressions_is_given_by_keyword():
    with pytest.raises(ValueError, match=r"_doubled: T.const M is not a dim of any tensor "
                                         r"argument; pass it by keyword \(M=\.\.\.\)"):
        _doubled(torch.zeros(256))
    with pytest.raises(TypeError, match=r"_doubled.compile: give the T.const value\(s\) M"):
        _doubled.compile(torch.zeros(256))
    assert _shapes(_doubled.compile(torch.zeros(256), M=128)) == {"A": (256,), "B": (128,)}
    with pytest.raises(ValueError, match=r"'A' is declared with shape \(256,\).*got .*\(100,\)"):
        _doubled.compile(torch.zeros(100), M=128)


def test_shapes_given_by_variables_lists_and_single_dims():
    k = E.scale_rows.compile(torch.zeros(64, 32), torch.zeros(64))
    assert _shapes(k) == {"A": (64, 32), "D": (64,), "B": (64, 32)}
    t = E.scale_rows.compile(torch.zeros(32, 64), torch.zeros(64), trans=True)  # A is (K, M)
    assert _shapes(t) == {"A": (32, 64), "D": (64,), "B": (64, 32)}
    with pytest.raises(ValueError, match=r"scale_rows: 'A' is declared with 2 dims \(K, M\), "
                                         r"got a tensor of shape \(64,\)"):
        E.scale_rows.compile(torch.zeros(64), torch.zeros(64), trans=True)
    with pytest.raises(ValueError, match=r"T.const M is 64 by 'A' \(shape 0\) but 48 by 'D'"):
        E.scale_rows.compile(torch.zeros(64, 32), torch.zeros(48))


# ---- in-place kernels and runtime scalars ----------------------------------------------
def test_in_place_kernel_with_runtime_scalars_and_a_grid_from_one():
    k = E.axpy_.compile(N=1024)
    assert [(a.name, a.kind, a.dtype) for a in k.abi.args] == [
        ("X", "tensor", "float32"), ("Y", "tensor", "float32"),
        ("alpha", "scalar", "float32"), ("n_valid", "scalar", "int32")]
    assert k.kernel.out_idx == [] and k.order == []
    assert k.abi.kernels[0].grid[0] == "tc_ceildiv(arg_n_valid, 256)"
    # the call binds N from X, passes the scalars through and reaches the launcher (which
    # needs CUDA tensors): one kernel for every alpha and n_valid
    x, y = torch.zeros(1024), torch.zeros(1024)
    for alpha, n in ((2.0, 100), (0.5, 7)):
        with pytest.raises(ValueError, match="expected a CUDA tensor"):
            E.axpy_(x, y, alpha, n)
    assert list(E.axpy_._kernels.values()) == [k]
    # the second call took the positional fast path: one entry, keyed by the shapes
    assert list(E.axpy_._fast) == [((1024,), (1024,), None, None)]
    with pytest.raises(ValueError, match=r"T.const N is 1024 by 'X' \(shape 0\) but 512"):
        E.axpy_(x, torch.zeros(512), 1.0, 1)  # other shapes: bound and checked again


@tilecute.jit
def _fill(Y, value: T.float32, block: int = 128):
    N = T.const("N")
    Y: T.Tensor((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            Y[bx * block + i] = value


def test_scalar_typed_in_the_signature_is_a_kernel_argument():
    k = _fill.compile(torch.zeros(512))
    assert [(a.name, a.kind) for a in k.abi.args] == [("Y", "tensor"), ("value", "scalar")]
    assert _fill.scalars == ["block"] and _fill.runtime == ["Y", "value"]


def _ragged(batch, dim, block_M=64):
    """TileLang's varlen idiom: the grid's first extent is a runtime scalar."""

    @T.prim_func
    def main(X: T.Tensor((batch * 128, dim), T.float16), cu_seqlens: T.Tensor((batch + 1,), T.int32),
             max_seqlen: T.int32, Y: T.Tensor((batch * 128, dim), T.float16)):
        with T.Kernel(T.ceildiv(max_seqlen, block_M), batch, threads=128) as (bx, b):
            start = cu_seqlens[b]
            end = cu_seqlens[b + 1]
            for i, j in T.Parallel(block_M, dim):
                if start + bx * block_M + i < end:
                    Y[start + bx * block_M + i, j] = X[start + bx * block_M + i, j]

    return main


def test_grid_extent_from_an_integer_scalar_argument():
    from tilecute.host.launcher import LauncherABIError, launcher_context

    k = tilecute.compile(_ragged(4, 64), out_idx=[-1])
    assert k.abi.kernels[0].grid == ("tc_ceildiv(arg_max_seqlen, 64)", "4", "1")
    assert Path(k.ensure_cubin()).stat().st_size > 0
    bad = dataclasses.replace(k.abi, kernels=(dataclasses.replace(
        k.abi.kernels[0], grid=("arg_X", "1", "1")),))
    with pytest.raises(LauncherABIError, match=r"uses \['X'\], not integer scalar arguments"):
        launcher_context(bad, tilecute_version="test")


# ---- the kernel API of an eager function -----------------------------------------------
def test_eager_function_has_the_jit_kernel_api():
    src = E.scale_rows.get_kernel_source(M=64, K=32, block=32)
    assert src == E.scale_rows.compile(M=64, K=32, block=32).get_kernel_source()
    assert "scale_rows" in src
    func = E.scale_rows.get_tir(torch.zeros(64, 32), torch.zeros(64))
    assert [p.name for p in func.params] == ["A", "D", "B"]
    kernels = E.scale_rows.par_compile([{"M": 64, "K": 32}, {"M": 64, "K": 32, "block": 32},
                                        {"M": 64, "K": 32, "bogus": 1}], ignore_error=True)
    assert kernels[0] is E.scale_rows.compile(M=64, K=32) and kernels[1] is not None
    assert kernels[2] is None
    # a factory has them too
    assert P.scale.get_kernel_source(1024, block=512) == P.scale(1024, block=512).get_kernel_source()
    assert P.scale.get_tir(1024).name == "scale"
    assert P.scale.par_compile([(1024,), {"n": 1024, "block": 512}]) == [P.scale(1024),
                                                                         P.scale(n=1024, block=512)]
    with pytest.raises(TypeError, match=r"unknown argument\(s\) bogus"):
        E.scale_rows.compile(M=64, K=32, bogus=1)
    with pytest.raises(TypeError, match=r"missing specialization argument 'value'"):
        tilecute.jit(_needs_value.__wrapped__).compile(N=4)


@tilecute.jit
def _needs_value(Y, value):
    N = T.const("N")
    Y: T.Tensor((N,), T.float32)
    with T.Kernel(1, threads=32) as _:
        for i in T.Parallel(N):
            Y[i] = value


def test_empty_forms_and_return_rules():
    @tilecute.jit
    def ones(A):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float16)
        B = T.empty(M, N, dtype=T.float16)  # dims as arguments
        C = T.empty([M, N])  # float32 by default
        with T.Kernel(1, threads=128) as _:
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j]
                C[i, j] = 1.0
        return C, B

    k = ones.compile(M=16, N=16)
    assert [(a.name, a.dtype) for a in k.abi.args] == [("A", "float16"), ("B", "float16"),
                                                        ("C", "float32")]
    assert k.order == [1, 0]
    # several returned outputs come back as a list in return order (TileLang's list API)
    from tilecute.language.eager import _Returning
    picked = _Returning(lambda *args: ("B out", "C out"), k.order)("A in")
    assert isinstance(picked, list) and picked == ["C out", "B out"]
    assert _Returning(lambda *args: "B out", [0])("A in") == "B out"

    with pytest.raises(FrontendError, match=r"returns every T.empty output: D not returned"):
        @tilecute.jit
        def forgets(A):
            M = T.const("M")
            A: T.Tensor((M,), T.float32)
            D = T.empty((M,), T.float32)  # noqa: F841
            with T.Kernel(1, threads=32) as _:
                T.evaluate(0)

    with pytest.raises(FrontendError, match=r"returns only its T.empty outputs \(none "
                                            r"declared\); got A"):
        @tilecute.jit
        def returns_input(A):
            M = T.const("M")
            A: T.Tensor((M,), T.float32)
            with T.Kernel(1, threads=32) as _:
                T.evaluate(0)
            return A


def test_python_statements_of_the_body_run_with_the_constants():
    @tilecute.jit
    def scaled(A, scale=None, block: int = 64):
        M = T.const("M")
        if scale is None:  # a top-level Python `if`: runs as Python
            scale = 0.5
        A: T.Tensor((M,), T.float32)
        B = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * scale
        return B

    a = scaled.compile(M=256)
    b = scaled.compile(M=256, scale=0.5)
    assert a is not b and "0.5" in a.get_kernel_source()


def _copy_row_blocks(A, B, block):
    """A plain Python function (no T.macro) holding the kernel: TileLang's builder runs it
    where the body calls it."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, N):
            B[bx * block + i, j] = A[bx * block + i, j] * 2.0


def test_a_plain_function_holding_the_kernel_is_called_at_the_top_level():
    """It ran as Python before (an eager body's statement call), where T.Kernel raised
    without naming the kernel or line; a @T.prim_func refused it as a top-level
    statement.  Both inline it as they inline a top-level T.macro."""
    @tilecute.jit
    def doubled(A, B, block=16):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B: T.Tensor((M, N), T.float32)
        _copy_row_blocks(A, B, block)

    text = doubled.get_tir(torch.zeros(64, 32), torch.zeros(64, 32)).script()
    assert "with T.Kernel(T.ceildiv(64, 16), threads=128) as bx:" in text
    assert "B[bx * 16 + i, j] = A[bx * 16 + i, j] * T.float32(2.0)" in text
    assert doubled.compile(torch.zeros(64, 32), torch.zeros(64, 32)).ensure_cubin()

    @T.prim_func
    def doubled_pf(A: T.Tensor((64, 32), T.float32), B: T.Tensor((64, 32), T.float32)):
        _copy_row_blocks(A, B, 16)
    assert doubled_pf.script().split("\n", 4)[4] == text.split("\n", 4)[4].replace("doubled(", "doubled_pf(")

    def doubled_out(A, block):  # returning its T.empty output, as `return macro(A)` does
        M, N = A.shape
        B = T.empty((M, N), A.dtype)
        _copy_row_blocks(A, B, block)
        return B

    @tilecute.jit
    def doubled_returned(A, block=16):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        return doubled_out(A, block)

    text = doubled_returned.get_tir(torch.zeros(64, 32)).script()
    assert '    B = T.empty((64, 32), "float32")' in text and text.endswith("    return B\n")
    assert "B[bx * 16 + i, j] = A[bx * 16 + i, j] * T.float32(2.0)" in text


def test_the_truth_of_a_dynamic_dim_in_the_bodys_python_is_refused():
    """``rows = min(block, M)`` on a T.dynamic M: TileLang's builder raises (TVM's bool of
    a PrimExpr); tilecute took every comparison for true (rows was M, one block)."""
    @tilecute.jit
    def rows_of(X, block=64):
        M = T.dynamic("M")
        X: T.Tensor((M, 8), T.float32)
        rows = min(block, M)
        with T.Kernel(T.ceildiv(M, rows), threads=128) as bx:
            X[bx, 0] = 0.0

    with pytest.raises(FrontendError, match=r"`rows = min\(block, M\)` uses a run-time value "
                                            r"\(a T.dynamic dim\) as a Python bool"):
        rows_of.compile(torch.zeros(8, 8))


# ---- autotune over eager kernels ---------------------------------------------------------
def test_autotune_over_an_eager_kernel_compiles_every_config():
    tuned = tilecute.autotune(configs=[{"block_M": 32}, {"block_M": 64}])(E.add)
    a, b = torch.zeros(256, 128), torch.zeros(256, 128)
    results = tuned.compile_all(a, b)
    assert [r.error for r in results] == [None, None]
    assert all(_shapes(r.kernel)["C"] == (256, 128) for r in results)
    assert results[1].kernel is E.add.compile(M=256, N=128, block_M=64)
    assert tuned.key((a, b), {}, [{"block_M": 32}]) == \
        tuned.key((torch.ones(256, 128), b), {}, [{"block_M": 32}])  # shapes, not data
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        tuned.compile(a, b)
    with pytest.raises(ValueError, match=r"config \{'block_K': 1\} names block_K"):
        tilecute.autotune(configs=[{"block_K": 1}])(E.add).compile(a, b)


def test_a_call_that_gives_the_tuned_parameters_compiles_them_untuned(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("tuned")
    monkeypatch.setattr(A.AutoTuner, "compile_all", boom)
    tuned = tilecute.autotune(configs=[{"block_M": 32}, {"block_M": 64}])(E.add)
    a = torch.zeros(256, 128)
    assert tuned.compile(a, a, block_M=64) is E.add.compile(M=256, N=128, block_M=64)
    assert tuned.compile(a, a, 32) is E.add.compile(M=256, N=128, block_M=32)  # by position
    factory = tilecute.autotune(configs=[{"block": 256}, {"block": 512}])(P.scale)
    assert factory(1024, block=512) is P.scale(1024, block=512)


def _fake_gpu(monkeypatch, times):
    """Profiling on the CPU machine: do_bench returns the given times and records the
    early-stop baseline it was handed."""
    import tilecute.profiler as prof

    baselines = []

    def do_bench(fn, warmup=25, rep=100, backend="event", early_stop_baseline=None, **kw):
        baselines.append(early_stop_baseline)
        return times.pop(0)
    monkeypatch.setattr(prof, "do_bench", do_bench)
    monkeypatch.setattr(prof, "_cuda", lambda: torch)
    return baselines


def test_early_stop_and_set_autotune_inputs(monkeypatch):
    baselines = _fake_gpu(monkeypatch, [1.0, 3.0, 0.5])
    configs = [{"block_M": 32}, {"block_M": 64}, {"block_M": 128}]
    tuned = tilecute.autotune(configs=configs, early_stop=True, early_stop_factor=2.0)(E.add)
    a = torch.zeros(256, 128)
    with A.set_autotune_inputs(a, a):
        assert A.get_autotune_inputs() == [a, a]
        kernel = tuned.compile(a, a)
    assert A.get_autotune_inputs() is None
    assert tuned.inputs == [a, a]  # the captured tensors timed every config
    assert baselines == [None, 2.0, 2.0]  # best so far x early_stop_factor
    assert kernel.config == {"block_M": 128} and kernel.latency == 0.5
    assert kernel is E.add.compile(M=256, N=128, block_M=128)
    assert tuned.compile(a, a) is kernel  # tuned once per argument shapes
    with pytest.raises(ValueError, match="early_stop_factor must be >= 1.0"):
        tilecute.autotune(configs=configs, early_stop=True, early_stop_factor=0.5)


def _scale_1024(block=None, threads=128):
    return P.scale_program(1024, block, threads)


def test_tilelangs_autotuner_builder(monkeypatch):
    _fake_gpu(monkeypatch, [0.2, 0.1])
    x = torch.zeros(1024)
    with A.set_autotune_inputs([x]):
        tuner = (A.AutoTuner.from_kernel(kernel=_scale_1024, configs=[{"block": 256}, {"block": 512}])
                 .set_compile_args(out_idx=[-1], target="auto")
                 .set_profile_args())
    result = tuner.run(warmup=1, rep=1, early_stop=True, early_stop_factor=1.2)
    assert isinstance(result, A.AutotuneResult)
    assert result.config == {"block": 512} and result.latency == 0.1
    assert result.kernel.out_idx == [1] and result.libcode == result.kernel.get_kernel_source()
    assert result.func.name == "scale"
    with pytest.raises(ValueError, match=r"execution_backend='torch'"):
        A.AutoTuner.from_kernel(kernel=_scale_1024, configs=[{}]).set_compile_args(
            execution_backend="torch")


# ---- GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
def test_eager_forms_on_the_gpu():
    dev = "cuda"
    data, weight = torch.randn(2, 10, 4, device=dev), torch.randn(3, 4, 64, device=dev)
    bias = torch.randn(4, 64, device=dev)
    want = torch.nn.functional.conv1d(data.transpose(1, 2), weight.permute(2, 1, 0), stride=2)
    torch.testing.assert_close(E.conv1d(data, weight, bias, S=2), want.transpose(1, 2) + bias,
                               rtol=1e-4, atol=1e-4)
    a, d = torch.randn(64, 32, device=dev), torch.randn(64, device=dev)
    torch.testing.assert_close(E.scale_rows(a, d), a * d[:, None])
    torch.testing.assert_close(E.scale_rows(a.T.contiguous(), d, trans=True), a * d[:, None])
    x, y = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    want = y.clone()
    want[:100] += 2.0 * x[:100]
    assert E.axpy_(x, y, 2.0, 100) is None
    torch.testing.assert_close(y, want)


@pytest.mark.gpu
def test_scalar_grid_and_eager_autotune_on_the_gpu():
    k = tilecute.compile(_ragged(4, 64), out_idx=[-1])
    x = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    lens = [100, 3, 128, 60]
    cu = torch.tensor([0, 100, 103, 231, 291], device="cuda", dtype=torch.int32)
    y = k(x, cu, max(lens))
    torch.testing.assert_close(y[:291], x[:291])
    tuned = tilecute.autotune(configs=[{"block_M": 32}, {"block_M": 64}], warmup=2, rep=5,
                              ref_prog=lambda A, B: A + B)(E.add)
    a, b = torch.randn(256, 128, device="cuda"), torch.randn(256, 128, device="cuda")
    torch.testing.assert_close(tuned(a, b), a + b)
    assert tuned.result.best in ({"block_M": 32}, {"block_M": 64})
    assert tuned.compile(a, b).latency > 0
