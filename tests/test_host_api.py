"""TileLang's kernel and host API under tilecute's names (issue 17 items 5-6): the eager
jit style (T.const / T.Tensor declarations / T.empty outputs / .compile), pass_configs,
get_kernel_source, get_profiler, tilecute.profiler / utils / testing / cdiv."""

import sys
from pathlib import Path

import pytest

import tilecute
import tilecute.language as T
from tilecute.options import OptionError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eager_programs as E  # noqa: E402


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def test_eager_compile_builds_a_kernel_with_its_empty_outputs():
    k = E.add.compile(M=256, N=128, block_M=64)
    assert [a.name for a in k.abi.args] == ["A", "B", "C"] and k.kernel.out_idx == [2]
    assert [a.shape for a in k.abi.args] == [(256, 128)] * 3
    assert Path(k.ensure_cubin()).stat().st_size > 0
    assert k.get_kernel_source() == k.get_source("cute")
    assert E.add.compile(M=256, N=128, block_M=64) is k  # one kernel per specialization
    assert E.add.compile(M=256, N=128) is not k


def test_eager_return_order_and_python_statements():
    k = E.row_sum.compile(N=64, M=512)
    assert k.kernel.out_idx == [1, 2] and k.order == [1, 0]  # returns S, B; declared B, S
    with pytest.raises(ValueError, match=r"assert M % BLOCK_M == 0 failed"):
        E.row_sum.compile(N=64, M=500)


def test_eager_errors_name_the_kernel_and_what_is_wrong():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"add.compile: give the T.const value\(s\) N"):
        E.add.compile(M=1)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) block_K"):
        E.add.compile(M=64, N=64, block_K=3)
    with pytest.raises(ValueError, match=r"T.const N is 128 by .A. \(shape 1\) but 64 by .B. \(shape 1\)"):
        E.add(torch.zeros(256, 128), torch.zeros(256, 64))
    with pytest.raises(TypeError, match=r"add: missing a required argument: 'B'"):
        E.add(torch.zeros(4, 4))
    with pytest.raises(TypeError, match=r"out_idx does not apply"):
        tilecute.jit(out_idx=[-1])(E.add.fn)


def test_pass_configs_map_onto_options_or_are_refused():
    from tilecute.options import from_pass_configs

    assert from_pass_configs({tilecute.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
                              "tl.disable_fast_math": False}) == {"disable_tma": True,
                                                                  "fast_math": True}
    assert from_pass_configs({"tl.disable_warp_specialized": True}) == {
        "disable_warp_specialize": True}
    with pytest.raises(OptionError, match=r"pass_configs\[PassConfigKey.TL_DISABLE_SAFE_MEMORY_"
                                          r"ACCESS\] \('tl.disable_safe_memory_legalize'\) = True "
                                          r"is not supported by tilecute"):
        tilecute.jit(pass_configs={"tl.disable_safe_memory_legalize": True})(lambda: None)
    with pytest.raises(OptionError, match=r"takes True or False"):
        from_pass_configs({"tl.enable_fast_math": 1})


def test_disable_warp_specialize_keeps_the_producer_off():
    from tilecute.ir.printer import print_func
    from tilecute.transform.pipeline import run_passes

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import gemm as G

    func = G.matmul(tm=128, tn=256, tk=64, stages=3)  # alone on its SM: a producer by default
    plain = print_func(run_passes(func, "sm_90a"))
    off = print_func(run_passes(func, "sm_90a", {"disable_warp_specialize": True}))
    assert "producer_threads" in plain or "warp_specialize=True" in plain
    assert "producer_threads" not in off


def test_cdiv_submodules_and_supply_types():
    assert tilecute.cdiv(10, 4) == 3 and tilecute.cdiv(8, 4) == 2
    torch = pytest.importorskip("torch")
    from tilecute.utils import TensorSupplyType, make_tensor

    assert tilecute.utils.TensorSupplyType is TensorSupplyType is tilecute.TensorSupplyType
    i = make_tensor((64,), "int8", TensorSupplyType.Integer, device="cpu")
    assert i.dtype == torch.int8 and int(i.min()) >= -2 and int(i.max()) <= 2
    u = make_tensor((256,), "uint8", TensorSupplyType.Auto, device="cpu")
    assert int(u.min()) >= 0 and int(u.max()) <= 2  # TileLang: randint(0, 3)
    assert make_tensor((3,), "float16", TensorSupplyType.One, device="cpu").tolist() == [1, 1, 1]
    f = make_tensor((4096,), "float32", TensorSupplyType.Uniform, device="cpu")
    assert -1 <= float(f.min()) and float(f.max()) < 1
    # TileLang's meanings: Auto is uniform in [-1, 1) for 16/32-bit floats, Normal has
    # mean -1, int8 under Uniform/Normal is all ones, float8 Integer takes int8 values
    a = make_tensor((4096,), "float16", TensorSupplyType.Auto, device="cpu")
    assert -1 <= float(a.min()) and float(a.max()) < 1 and float(a.float().std()) < 0.7
    n = make_tensor((65536,), "float32", TensorSupplyType.Normal, device="cpu")
    assert abs(float(n.mean()) + 1) < 0.05 and abs(float(n.std()) - 1) < 0.05
    assert make_tensor((8,), "int8", TensorSupplyType.Normal, device="cpu").tolist() == [1] * 8
    e = make_tensor((4096,), "float8_e4m3", TensorSupplyType.Integer, device="cpu")
    assert e.dtype == torch.float8_e4m3fn and float(e.float().abs().max()) > 64
    # MX scales: positive powers of two under every random supply (no NaN, no 2^-127)
    for supply in (TensorSupplyType.Integer, TensorSupplyType.Auto, TensorSupplyType.Normal,
                   TensorSupplyType.Randn):
        m = make_tensor((512,), "float8_e8m0fnu", supply, device="cpu").float()
        assert set(m.unique().tolist()) <= {0.25, 0.5, 1.0, 2.0, 4.0}, supply
    assert tilecute.utils.map_torch_type(T.bfloat16) is torch.bfloat16
    assert tilecute.utils.map_torch_type("half") is torch.float16


def test_profiler_and_testing_helpers_on_cpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the GPU test covers timing")
    k = E.add.compile(M=64, N=64)
    prof = k.get_profiler(tilecute.TensorSupplyType.Normal)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        prof.do_bench()
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        tilecute.profiler.do_bench(lambda: None)
    with pytest.raises(TypeError, match="TensorSupplyType"):
        k.get_profiler("randn")
    tilecute.testing.set_random_seed(0)
    a = torch.randn(1000)
    b = a.clone()
    b[0] += 1
    tilecute.testing.torch_assert_close(a, b, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="1 of 1000 elements differ"):
        tilecute.testing.torch_assert_close(a, b, max_mismatched_ratio=0.0)


def test_factory_jit_has_compile():
    @tilecute.jit(out_idx=[-1])
    def scale(n):
        @T.prim_func
        def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2.0
        return scale

    assert scale.compile(256) is scale(256)
    assert scale(256).out_idx == [1]


@pytest.mark.gpu
def test_eager_kernels_run_and_profile():
    import torch

    a, b = torch.randn(256, 128, device="cuda"), torch.randn(256, 128, device="cuda")
    torch.testing.assert_close(E.add(a, b), a + b)
    x = torch.randn(64, 512, device="cuda")
    s, bsum = E.row_sum(x)
    torch.testing.assert_close(s, x.sum(1), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(bsum, x.sum(1), rtol=1e-4, atol=1e-3)
    k = E.add.compile(M=256, N=128)
    prof = k.get_profiler(tilecute.TensorSupplyType.Randn)
    assert prof.do_bench(warmup=5, rep=20) > 0
    prof.assert_allclose(lambda A, B: A + B, atol=1e-5, rtol=1e-5)
    with pytest.raises(AssertionError, match="elements differ beyond rtol"):  # TileLang's message
        prof.assert_allclose(lambda A, B: A - B)
    assert tilecute.profiler.do_bench(lambda: k(a, b), warmup=5, rep=20) > 0


def test_utils_tensor_is_tilelangs_module():
    """``from tilelang.utils.tensor import ...`` names (the blocksparse and cast examples'):
    get_tensor_supply, torch_assert_close with TileLang's defaults and checks."""
    torch = pytest.importorskip("torch")
    import tilecute.utils.tensor as U

    assert U.TensorSupplyType is tilecute.utils.TensorSupplyType
    assert tilecute.testing.torch_assert_close is U.torch_assert_close
    supply = U.get_tensor_supply(U.TensorSupplyType.One)
    assert callable(supply)
    with pytest.raises(ValueError, match="symbolic dims"):
        supply(type("P", (), {"name": "A", "shape": ("M", 4), "dtype": "float16"})())
    a = torch.zeros(100)
    b = a.clone()
    b[7] = 5e-3  # beyond TileLang's default atol (1e-3)
    with pytest.raises(AssertionError, match=r"first at index \[7\]"):
        U.torch_assert_close(a, b, max_mismatched_ratio=0.0)
    assert U.torch_assert_close(a, b, max_mismatched_ratio=0.01) is True
    with pytest.raises(AssertionError, match="dtype"):
        U.torch_assert_close(a, b.double())
    assert U.torch_assert_close(a, b.double(), check_dtype=False, atol=1e-2)
    x = torch.tensor([0.0, -0.0]).to(torch.float8_e4m3fn)
    U.fp8_remove_negative_zeros_(x)
    assert x.view(torch.uint8).tolist() == [0, 0]


def test_tilelang_tir_helpers_import_and_refuse_on_use():
    from tilecute.utils import is_shared, retrieve_stride  # noqa: F401  (imports work)

    with pytest.raises(NotImplementedError, match=r"tilelang\.utils\.is_shared is not "
                                                  r"supported by tilecute: it takes TVM TIR"):
        is_shared(None)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        tilecute.utils.no_such_name  # noqa: B018


def test_profiler_has_tilelangs_attributes(monkeypatch):
    """TileLang's Profiler surface (example_mla_decode_paged calls ``profiler.func``):
    func / adapter / params / result_idx / supply_type, inputs with or without outputs,
    with_default_adapter, calling the profiler, run_once, manual_assert_close."""
    torch = pytest.importorskip("torch")
    import tilecute.runtime.profiling as P

    real = P.make_tensor
    monkeypatch.setattr(P, "make_tensor", lambda shape, dtype, supply, device="cuda":
                        real(shape, dtype, supply, device="cpu"))
    monkeypatch.setattr(P, "_cuda", lambda: torch)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    k = E.add.compile(M=64, N=32)
    prof = k.get_profiler(tilecute.TensorSupplyType.One)
    assert prof.func is prof.adapter is prof.kernel and prof.func.name == "add"
    assert prof.supply_type is tilecute.TensorSupplyType.One
    assert prof.result_idx == prof.kernel.out_idx == [2]
    assert [p.name for p in prof.params] == ["A", "B", "C"]
    assert [tuple(t.shape) for t in prof._get_inputs()] == [(64, 32), (64, 32)]
    assert len(prof._get_inputs(with_output=True)) == 3
    assert prof.with_default_adapter(lambda A, B: A + B) is prof
    assert prof(torch.ones(2), torch.ones(2)).tolist() == [2, 2]
    assert float(prof.run_once().sum()) == 2 * 64 * 32
    seen = []
    prof.manual_assert_close(lambda A, B: 2 * A, manual_check_prog=lambda g, w: seen.append(
        torch.equal(g[0], w[0])))
    assert seen == [True]
    prof.assert_allclose(lambda A, B: A * 2)
    with pytest.raises(AssertionError, match="greatest absolute difference"):
        prof.assert_allclose(lambda A, B: A * 3)


def test_tvm_target_forms_name_the_arch():
    """TVM's target spellings TileLang programs pass: a dict ``{"kind": "cuda", "arch":
    ...}`` and the string ``"cuda -arch=sm_90a"`` name the arch; another kind is refused."""
    from tilecute.api import _arch
    from tilecute.runtime.arch import TargetError

    assert _arch({"kind": "cuda", "arch": "sm_90a"}, "f") == "sm_90a"
    assert _arch({"kind": "cutedsl", "arch": "sm_80"}, "f") == "sm_80"
    assert _arch("cuda -arch=sm_90a", "f") == "sm_90a"
    with pytest.raises(TargetError, match="f: target kind 'hip' is not supported"):
        _arch({"kind": "hip", "arch": "gfx942"}, "f")


@pytest.mark.gpu
def test_kernel_run_once_runs_on_generated_inputs():
    """TileLang's ``kernel.run_once()``: one call on the profiler's inputs, its outputs back."""
    import torch

    k = tilecute.compile(T.from_script(ADD_ONE), out_idx=[1])
    out = k.run_once()
    assert isinstance(out, torch.Tensor) and out.shape == (1024,) and out.is_cuda


ADD_ONE = """import tilecute.language as T


@T.prim_func
def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] + 1.0
"""
