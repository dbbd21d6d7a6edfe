"""TileLang's host keywords (``jit``/``compile``: execution_backend, target_host, verbose,
debug_root_path; ``tilecute.par_compile``) and frontend forms (``T.align_up``,
``T.assume``, chained assignment, ``T.int32()`` as a symbol), found by TileLang's own
language tests run through tilecute."""

import os
from pathlib import Path

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _fill(n=256, value=1.0):
    @T.prim_func
    def fill(A: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = value

    return fill


# ---- jit / compile keywords ---------------------------------------------------------------
def test_jit_accepts_tilelang_backends_and_verbose_prints_the_compile(capsys):
    @tilecute.jit(execution_backend="tvm_ffi", target_host="llvm", verbose=True)
    def fill(n):
        return _fill(n)

    k = fill(256)
    err = capsys.readouterr().err
    assert "tilecute: compile 'fill'" in err and "tilecute: compiled 'fill' in" in err
    assert [a.name for a in k.abi.args] == ["A"]
    for backend in ("auto", "cutedsl", None, "cython", "nvrtc"):  # (TileLang's CUDA backends)
        tilecute.compile(_fill(128), execution_backend=backend, verbose=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("backend", ["torch", "ctypes"])
def test_a_backend_tilecute_does_not_build_is_refused_by_value(backend):
    with pytest.raises(ValueError, match=f"fill: execution_backend='{backend}' is not supported"):
        @tilecute.jit(execution_backend=backend)
        def fill(n):
            return _fill(n)
    with pytest.raises(ValueError, match=f"execution_backend='{backend}'"):
        tilecute.compile(_fill(), execution_backend=backend)


def test_target_host_other_than_this_machine_is_refused():
    with pytest.raises(ValueError, match="target_host='aarch64-linux' is not supported"):
        tilecute.compile(_fill(), target_host="aarch64-linux")


def test_verbose_default_reads_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_VERBOSE", "on")
    tilecute.compile(_fill(512))
    assert "tilecute: compile 'fill'" in capsys.readouterr().err


def test_debug_root_path_writes_the_kernel_source_and_program(tmp_path):
    @tilecute.jit(debug_root_path=str(tmp_path / "dbg"))
    def fill(n):
        return _fill(n)

    k = fill(256)
    src = (tmp_path / "dbg" / "tilelang_jit_kernel_fill.py").read_text()
    prog = (tmp_path / "dbg" / "tilelang_jit_program_fill.py").read_text()
    assert src.strip() == k.get_kernel_source().strip()
    assert "@T.prim_func" in prog and "def fill(" in prog


def test_par_compile_at_top_level_keeps_order_and_ignores_errors():
    bad = _fill(200)  # 200 is no multiple of the 128-wide block: fine; break it instead
    ks = tilecute.par_compile([_fill(128), _fill(256)], num_workers=2)
    assert [k.abi.args[0].shape for k in ks] == [(128,), (256,)]
    with pytest.raises(ValueError, match="execution_backend='torch'"):
        tilecute.par_compile([bad], execution_backend="torch")
    out = tilecute.par_compile([_fill(128), "not a prim_func"], ignore_error=True)
    assert out[0] is not None and out[1] is None


# ---- T.align_up -------------------------------------------------------------------------------
def test_align_up_folds_python_ints_and_builds_ir_for_expressions():
    assert T.align_up(5, 4) == 8 and T.align_up(8, 4) == 8 and T.align_up(1, 32) == 32
    n = T.dynamic("n")
    assert T.align_up(n, 8) == N.BinOp("mul", N.Call("ceildiv", (n, N.Const(8, "int32")), "int32"),
                                       N.Const(8, "int32"), "int32")


def test_align_up_takes_tilelang_keyword_names():
    assert T.align_up(x=5, y=4) == 8  # TileLang's T.align_up(x, y)


def test_a_form_called_outside_a_prim_func_names_an_argument_it_does_not_take():
    # TileLang's T.gemm is a Python function: a keyword it lacks is a TypeError naming it
    with pytest.raises(TypeError, match="use_2cta"):
        T.gemm(None, None, None, use_2cta=True)
    with pytest.raises(RuntimeError, match="inside a @T.prim_func body"):
        T.gemm(None, None, None, clear_accum=True)


def test_align_up_in_a_kernel_compiles(tmp_path):
    @T.prim_func
    def align(A: T.Tensor((1,), T.int32), x: T.int32):
        with T.Kernel(1, threads=1) as _:
            A[0] = T.align_up(x, T.int32(32))

    assert "ceildiv(x, 32) * 32" in align.script()
    assert Path(tilecute.build_cubin(align, "sm_90a", out_dir=tmp_path).path).stat().st_size > 0


# ---- T.assume ---------------------------------------------------------------------------------
def test_assume_of_a_divisor_on_a_symbol_becomes_a_launch_check():
    N_ = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N_,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(N_ % 4 == 0)
            tx = T.get_thread_binding()
            if tx < N_:
                A[tx] = 1.0

    assert main.params[0].shape[0].multiple == 4
    k = tilecute.compile(main)
    # checked as TileLang checks it (RuntimeError "Assume: N % 4 == 0"), not by the binding
    assert [(s.name, s.divisibility) for s in k.abi.symbols] == [("N", 1)]
    assert [a.text for a in k.abi.assumes] == ["N % 4 == 0"]


def test_assume_of_a_divisor_combines_with_multiple_of():
    N_ = T.dynamic("N", multiple_of=4)

    @T.prim_func
    def main(A: T.Tensor((N_,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(N_ % 6 == 0)
            A[0] = 1.0

    assert main.params[0].shape[0].multiple == 12
    # the binding checks what the assume does not: 12 = lcm(4, 6)
    k = tilecute.compile(main)
    assert [(s.name, s.divisibility) for s in k.abi.symbols] == [("N", 4)]


def test_an_assume_in_a_loop_drops_the_bounds_check():
    # TileLang's LegalizeSafeMemoryAccess trusts the assume: the store is not checked
    N_ = T.dynamic("N")

    def make(assume: bool):
        @T.prim_func
        def main(A: T.Tensor((N_,), T.float32), l: T.int32, r: T.int32):
            with T.Kernel(1, threads=32) as _:
                for i in T.serial(r - l + 1):
                    if assume:
                        T.assume(l + i >= 0 and l + i < N_)
                    A[l + i] = 0

        return main

    assert "T.assume(l + i >= 0 and l + i < N)" in make(True).script()
    kept = tilecute.compile(make(False), target="sm_90a").get_kernel_source()
    dropped = tilecute.compile(make(True), target="sm_90a").get_kernel_source()
    assert "        if l + i >= 0 and l + i < N:\n            A[l + i] = cutlass.Float32(0.0)" in kept
    assert "        # T.assume(l + i >= 0 and l + i < N)\n        A[l + i] = cutlass.Float32(0.0)" in dropped


def test_a_statically_false_assume_is_an_error_naming_the_line():
    with pytest.raises(FrontendError, match=r"test_tilelang_jit_keywords_and_forms.py:\d+: .*T.assume: `4 % 3 == 0` is false"):
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                T.assume(4 % 3 == 0)
                A[0] = 1.0


# ---- chained assignment -----------------------------------------------------------------------
def test_chained_assignment_stores_every_target_and_evaluates_once(tmp_path):
    @T.prim_func
    def chain(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32),
              C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                A[i] = B[i] = C[i] = 1
            for i in T.Parallel(128):
                x = y = A[i] * 2.0
                B[i] = x + y

    text = chain.script()
    for name in "ABC":
        assert f"{name}[i] = T.float32(1)" in text, text
    # the loaded value is bound once and both names read it, as in Python
    assert "chained = A[i_1] * T.float32(2.0)" in text, text
    assert "x = chained" in text and "y = chained" in text and "B[i_1] = x + y" in text
    assert text.count("A[i_1]") == 1
    assert Path(tilecute.build_cubin(chain, "sm_90a", out_dir=tmp_path).path).stat().st_size > 0


def test_chained_assignment_of_an_allocation_is_refused():
    with pytest.raises(FrontendError, match="allocates or views a buffer"):
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                a = b = T.alloc_shared((128,), T.float32)
                T.copy(A, a)
                T.copy(b, A)


@pytest.mark.gpu
def test_gpu_chained_assignment_writes_all_three():
    import torch

    @T.prim_func
    def chain(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32),
              C: T.Tensor((256,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = B[bx * 128 + i] = C[bx * 128 + i] = 3
    a, b, c = (torch.zeros(256, device="cuda") for _ in range(3))
    tilecute.compile(chain)(a, b, c)
    for t in (a, b, c):
        assert torch.equal(t, torch.full_like(t, 3.0))


@pytest.mark.gpu
def test_gpu_assume_divisor_is_checked_at_launch():
    import torch

    N_ = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N_,), T.float32)):
        with T.Kernel(1, threads=32):
            T.assume(N_ % 4 == 0)
            tx = T.get_thread_binding()
            if tx < N_:
                A[tx] = 1.0

    k = tilecute.compile(main)
    a = torch.zeros(4, device="cuda")
    k(a)
    assert torch.equal(a, torch.ones(4, device="cuda"))
    with pytest.raises(RuntimeError, match="Assume: N % 4 == 0"):  # TileLang's error
        k(torch.zeros(2, device="cuda"))


# ---- T.int32() as a symbol --------------------------------------------------------------------
def test_dtype_call_without_a_value_declares_a_symbol_named_by_the_assignment():
    m = T.int32()
    assert m == N.Var("m", "int32")
    assert (m & 0x7FFFFFFF).op == "bitand"
    u = T.uint64()
    assert (u & T.uint64(0xFFFFFFFFFFFFFFFF)).dtype == "uint64"

    @T.prim_func
    def main(A: T.Tensor((m,), T.float32)):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    assert [s.name for s in main.symbols] == ["m"]
    with pytest.raises(T.FrontendError, match=r"'v': T.float32\(\) with no value declares a symbolic"):
        @T.prim_func
        def body_symbol(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32):
                v = T.float32()
                A[0] = v
    with pytest.raises(TypeError, match="take integers"):
        T.dynamic("n") & T.float32(1.0)


def test_dtype_call_without_a_value_annotates_a_scalar_parameter(tmp_path):
    """TVMScript's ``x: T.int32()`` / ``flag: T.bool()`` / ``s: T.float32()`` (TileLang's
    docs write ``flag: T.bool()``): scalar parameters of those dtypes, as ``x: T.int32``."""
    import tilecute

    n = T.dynamic("n")

    @T.prim_func
    def scaled(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), x: T.int32(),
               flag: T.bool(), s: T.float32()):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n and flag:
                    B[bx * 128 + i] = A[bx * 128 + i] * s + x

    assert [(p.name, p.dtype) for p in scaled.params[2:]] == \
        [("x", "int32"), ("flag", "bool"), ("s", "float32")]
    assert tilecute.build_cubin(scaled, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- eager kernels calling a T.macro that holds the T.Kernel blocks -------------------------
@T.macro
def _copy_blocks(A, B):
    M, N = A.shape
    M_, N_ = B.shape
    assert M == M_, f"M mismatch {M} {M_}"
    assert N == N_
    with T.Kernel(T.ceildiv(M, 64), T.ceildiv(N, 64), threads=128) as (bx, by):
        T.copy(A[bx * 64:bx * 64 + 64, by * 64:by * 64 + 64],
               B[bx * 64:bx * 64 + 64, by * 64:by * 64 + 64])


def test_eager_kernel_runs_a_macro_holding_its_kernel(tmp_path):
    @tilecute.jit
    def copy(A, B):
        M = T.dynamic("M")
        N = T.const("N")
        A: T.Tensor[[M, N], T.float32]
        B: T.Tensor[[M, N], T.float32]
        _copy_blocks(A, B)

    func = copy.get_tir(N=128)
    assert len(func.kernels) == 1
    # the macro's M (the symbol) and N (128) are substituted into the grid
    assert "T.Kernel(T.ceildiv(M, 64), T.ceildiv(128, 64), threads=128)" in func.script()
    k = copy.compile(N=128)
    assert [a.name for a in k.abi.args] == ["A", "B"]


def test_a_parse_time_assert_in_a_macro_is_checked():
    with pytest.raises(FrontendError, match=r"assertion failed: `M == M_` \(f'M mismatch.*"
                                            r"M is `128`, M_ is `64`"):
        @T.prim_func
        def bad(A: T.Tensor((128, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
            _copy_blocks(A, B)


def test_an_assert_on_a_runtime_value_is_refused():
    with pytest.raises(FrontendError, match=r"`assert x > 0` tests a runtime value: use "
                                            r"T.device_assert"):
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32), x: T.int32):
            with T.Kernel(1, threads=32):
                assert x > 0
                A[0] = 1.0


def test_a_returned_macro_copying_outside_a_kernel_is_refused():
    # (returning a macro's T.empty output is honored: tests/test_macro_outputs.py; a tile op
    # outside any T.Kernel is not)
    @T.macro
    def make(A):
        B = T.empty((128,), T.float32)
        T.copy(A, B)
        return B

    @tilecute.jit
    def f(A):
        A: T.Tensor[[128], T.float32]
        return make(A)

    with pytest.raises(FrontendError, match=r"T.macro 'make' at the top level of a prim_func may "
                                            r"hold only .* it has a Copy statement \(line \d+\) "
                                            r"outside a T.Kernel"):
        f.get_tir()
