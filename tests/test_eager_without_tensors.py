"""TileLang's eager jit on functions without tensor parameters (issue 17, TileLang's
``_infer_jit_mode``): ``@jit def k(): with T.Kernel(threads=32): ...`` and ``@jit def
k(M: int, N: int): with T.Kernel(): ...`` are eager kernels (``k.compile()``,
``k.compile(M=.., N=..)``, ``k()``), a function holding an inner ``@T.prim_func`` stays a
factory; ``T.Kernel()`` / ``T.Kernel(threads=n)`` launch one block (TileLang's
``KernelLaunch`` with no grid extents binds no blockIdx); a kernel with no tensor
argument launches on the current device; a bare expression statement is T.evaluate."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError
from tilecute.language.eager import EagerKernel, is_eager

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


def _launch(kernel):
    (launch,) = kernel.abi.kernels
    return tuple(int(g) for g in launch.grid), tuple(launch.block)


@tilecute.jit
def _scratch_gemm():
    # no parameters at all: shared tiles, a gemm into a fragment, a row reduction
    with T.Kernel(threads=128):
        a_s = T.alloc_shared((64, 32), T.float16)
        b_s = T.alloc_shared((64, 32), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        T.clear(acc)
        T.gemm(a_s, b_s, acc, transpose_B=True)


@tilecute.jit
def _ramp(rows: int, cols: int, scale: float = 1.0):
    # specialization arguments only (`int`/`float` annotations are not kernel arguments)
    with T.Kernel():
        frag = T.alloc_fragment((rows, cols), T.float32)
        for i, j in T.Parallel(rows, cols):
            frag[i, j] = (i * cols + j) * scale


@tilecute.jit
def _iota(n: int = 64):
    # no inputs, one T.empty output: allocated on torch's current CUDA device
    out = T.empty((n,), T.int32)
    with T.Kernel(threads=n):
        for i in T.Parallel(n):
            out[i] = i * 3
    return out


def test_functions_without_tensors_are_eager_kernels():
    assert isinstance(_scratch_gemm, EagerKernel) and isinstance(_ramp, EagerKernel)
    kernel = _scratch_gemm.compile()
    assert [a.name for a in kernel.abi.args] == []  # no kernel argument at all
    assert _launch(kernel) == ((1, 1, 1), (128, 1, 1))  # T.Kernel(threads=128): one block
    assert kernel.ensure_cubin().endswith(".cubin")


def test_specialization_arguments_key_the_kernels():
    k4 = _ramp.compile(rows=4, cols=32)
    assert _ramp.compile(4, 32) is k4  # positional, same values: the same kernel
    assert _ramp.compile(rows=8, cols=32) is not k4
    assert _ramp.compile(rows=4, cols=32, scale=0.5) is not k4
    assert _launch(k4) == ((1, 1, 1), (128, 1, 1))  # T.Kernel(): one block of 128 threads
    assert "0.5" in _ramp.compile(rows=4, cols=32, scale=0.5).get_kernel_source()
    k4.ensure_cubin()
    with pytest.raises(TypeError, match=r"_ramp.compile: missing specialization argument 'cols'"):
        _ramp.compile(rows=4)


def test_an_output_without_inputs():
    kernel = _iota.compile(n=32)
    assert [(a.name, tuple(a.shape)) for a in kernel.abi.args] == [("out", (32,))]
    assert _launch(kernel) == ((1, 1, 1), (32, 1, 1))
    kernel.ensure_cubin()
    if not torch.cuda.is_available():  # allocated on the CPU here, so the launch refuses it
        with pytest.raises(ValueError, match=r"argument 'out': expected a CUDA tensor"):
            _iota(n=32)


def _make_copy(n):
    @T.prim_func
    def copy(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                B[i] = A[i]
    return copy


def test_factories_stay_factories():
    # an inner @T.prim_func makes a factory (TileLang's has_internal_prim_func), even with
    # a `with T.Kernel` of its own elsewhere in the text
    def factory(n):
        @T.prim_func
        def copy(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=n):
                for i in T.Parallel(n):
                    B[i] = A[i]
        return copy

    def delegating(n):  # returns a prim_func built elsewhere: a factory
        return _make_copy(n)

    def eager(n: int):
        with T.Kernel(threads=n):
            T.evaluate(0)

    assert not is_eager(factory) and not is_eager(delegating) and is_eager(eager)
    jitted = tilecute.jit(delegating)
    assert not isinstance(jitted, EagerKernel)
    assert [a.name for a in jitted(64).abi.args] == ["A", "B"]


def test_kernel_without_grid_extents_in_a_prim_func(tmp_path):
    @T.prim_func
    def one_block(A: T.Tensor((256,), T.float32)):
        with T.Kernel(threads=256):
            for i in T.Parallel(256):
                A[i] = A[i] * 2.0

    (scope,) = one_block.kernels
    assert [g.value for g in scope.grid] == [1] and scope.threads == (256,)
    tilecute.build_cubin(one_block, "sm_90a", out_dir=str(tmp_path))


def test_kernel_without_grid_extents_binds_no_name():
    with pytest.raises(FrontendError, match=r"T.Kernel\(\) with no grid extents has no block "
                                            r"index to bind .*drop `as bx`"):
        @T.prim_func
        def bad(A: T.Tensor((32,), T.float32)):
            with T.Kernel(threads=32) as bx:
                A[bx] = 0.0
    with pytest.raises(FrontendError, match=r"T.Kernel takes 0 to 3 grid extents, got 4"):
        @T.prim_func
        def four(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, 1, 1, 1, threads=32):
                A[0] = 0.0


def test_bare_expression_statements_are_evaluated(tmp_path):
    @T.prim_func
    def touch(A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((32,), T.float32)
            for i in T.Parallel(32):
                frag[i] = A[i]
            frag[0]  # TileLang: T.evaluate(frag[0]), no effect
            ...
            for i in T.Parallel(32):
                A[i] = frag[i] + 1.0

    tilecute.build_cubin(touch, "sm_90a", out_dir=str(tmp_path))
    with pytest.raises(FrontendError, match="an expression statement must be a T.* call"):
        @T.prim_func
        def number(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                3


@pytest.mark.gpu
def test_an_output_without_inputs_on_the_gpu():
    for device in range(torch.cuda.device_count()):
        with torch.cuda.device(device):
            out = _iota(n=64)
            assert out.device == torch.device("cuda", device)
            torch.testing.assert_close(out, torch.arange(64, dtype=torch.int32, device=out.device) * 3)
    _scratch_gemm()  # launches with no argument at all
    _ramp(rows=4, cols=32)
    torch.cuda.synchronize()
