"""TileLang's host-evaluable ``T.assume(cond)``: a condition over the symbolic dims and the
integer / bool scalar parameters, stated where no loop or branch encloses it, is checked
at every call (TileLang's host code raises ``RuntimeError("Assume: ...")``; a kernel
compiled trusting it would otherwise run on arguments that break it).  tilecute keeps it
in ``PrimFunc.assumes`` and the launcher checks it after reading the arguments, before any
driver call, so memory-less "CUDA" tensors reach the check on the CPU.  ``N % k == 0`` on
a symbol is also the symbol's ``multiple_of`` (what the kernel may rely on) and is checked
as an assume (TileLang's RuntimeError, as its test_host_evaluable_assume_is_checked_at_runtime
asks), the binding check leaving ``k`` to it; an assume that reads memory, a thread index,
a float or sits in a loop or branch changes no code."""

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import FakeTensor, raises
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.validate import ValidationError, validate
from tilecute.ir import nodes as N
from tilecute.language.parser import FrontendError


def _window():
    n = T.dynamic("n")

    @T.prim_func
    def window(X: T.Tensor((n,), "float32"), lo: T.int32, hi: T.int32, wide: T.bool,
               scale: T.float32):
        T.assume(lo <= hi and hi <= n)
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            T.assume(n >= 128 or not wide)
            T.assume(scale > 0.0)              # a float: a hint only
            tx = T.get_thread_binding()
            T.assume(bx * 128 + tx < n)        # a thread index: a hint only
            for i in T.serial(2):
                T.assume(lo + i < n)           # in a loop: a hint only
            T.assume(n % 8 == 0)               # the symbol's multiple_of, checked as an assume
            for i in T.Parallel(128):
                if bx * 128 + i >= lo and bx * 128 + i < hi:
                    X[bx * 128 + i] = X[bx * 128 + i] * scale
    return window


def test_host_evaluable_assumes_are_kept_and_printed():
    f = _window()
    text = f.script()
    assert "    T.assume(lo <= hi and hi <= n)" in text, text
    assert "    T.assume(n >= 128 or not wide)" in text, text
    assert len(f.assumes) == 3 and "    T.assume(n % 8 == 0)" in text
    assert 'n = T.symbolic("n", multiple_of=8)' in text
    # the kernel's own assumes stay where they stand, as facts for its bounds checks
    # (a float or thread-index one is not a host assume)
    kernel_part = text.split("with T.Kernel", 1)[1]
    assert "scale > " not in text.split("with T.Kernel", 1)[0] and "T.assume(scale > " in kernel_part
    assert "        T.assume(bx * 128 + tx < n)" in kernel_part
    assert from_json(to_json(f)) == f
    again = T.from_script(text)
    assert again.assumes == f.assumes and again.script() == text


def test_the_validator_refuses_an_assume_the_host_cannot_evaluate():
    import dataclasses

    f = _window()
    bad = dataclasses.replace(f, assumes=f.assumes + (N.cmp("lt", N.Var("tx", "int32"), 4),))
    with pytest.raises(ValidationError, match="the launcher checks a bool condition"):
        validate(bad)


def test_the_launcher_checks_them(cache_dir):
    k = tilecute.compile(_window())
    x = FakeTensor((256,))
    raises(RuntimeError, ["window: Assume: lo <= hi and hi <= n does not hold"], k, x, 9, 3, True, 1.0)
    raises(RuntimeError, ["Assume: lo <= hi and hi <= n"], k, x, 0, 300, True, 1.0)
    raises(RuntimeError, ["Assume: n >= 128 or not wide"], k, FakeTensor((64,)), 0, 8, True, 1.0)
    raises(RuntimeError, ["Assume: n % 8 == 0"], k, FakeTensor((260,)), 0, 8, False, 1.0)
    # arguments that meet them go on to the driver (none here)
    with pytest.raises(Exception) as e:
        k(FakeTensor((64,)), 0, 8, False, -1.0)
    assert "Assume" not in str(e.value), str(e.value)


@pytest.mark.gpu
def test_assumes_on_gpu():
    import torch

    k = tilecute.compile(_window())
    x = torch.ones(256, device="cuda")
    k(x, 8, 24, True, 2.0)
    ref = torch.ones(256, device="cuda")
    ref[8:24] = 2.0
    assert torch.equal(x, ref)
    with pytest.raises(RuntimeError, match="Assume: lo <= hi and hi <= n"):
        k(x, 24, 8, True, 2.0)
    with pytest.raises(RuntimeError, match="Assume: n >= 128 or not wide"):
        k(torch.ones(64, device="cuda"), 0, 8, True, 2.0)
    assert torch.equal(x, ref)  # nothing ran


def _multiple_of_four():
    n = T.dynamic("n")

    @T.prim_func
    def fill(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            T.assume(n % 4 == 0)
            tx = T.get_thread_binding()
            if tx < n:
                A[tx] = 1.0
    return fill


def test_a_divisibility_assume_raises_tilelangs_runtime_error(cache_dir):
    """``T.assume(N % 4 == 0)`` broken at a call raises TileLang's RuntimeError "Assume:
    N % 4 == 0" (it was the binding check's ValueError), and the kernel still knows the
    multiple; an own ``multiple_of`` beyond the assumed one stays the binding check's."""
    from tilecute.transform.launch_abi import _bind_divisibility

    f = _multiple_of_four()
    assert f.symbols[0].multiple == 4 and len(f.assumes) == 1
    k = tilecute.compile(f)
    raises(RuntimeError, ["fill: Assume: n % 4 == 0"], k, FakeTensor((2,)))
    with pytest.raises(Exception) as e:  # a multiple of 4 goes on to the driver (none here)
        k(FakeTensor((8,)))
    assert "Assume" not in str(e.value), str(e.value)
    four = N.cmp("eq", N.binop("mod", N.Var("n", "int32"), 4), 0)
    assert _bind_divisibility(N.Var("n", "int32", multiple=4), (four,)) == 1
    assert _bind_divisibility(N.Var("n", "int32", multiple=8), (four,)) == 8
    assert _bind_divisibility(N.Var("n", "int32", multiple=12), (four,)) == 3
    assert _bind_divisibility(N.Var("n", "int32", multiple=8), ()) == 8


@pytest.mark.gpu
def test_a_divisibility_assume_on_gpu():
    import torch

    k = tilecute.compile(_multiple_of_four())
    a = torch.zeros(4, device="cuda")
    k(a)
    assert a.tolist() == [1.0] * 4
    with pytest.raises(RuntimeError, match="Assume: n % 4 == 0"):
        k(torch.empty(2, device="cuda"))



def test_a_top_level_assert_on_symbols_is_checked_at_every_call(cache_dir):
    """TileLang's builder makes ``assert`` on symbolic dims or scalar parameters at the
    top level a host Assert, checked at every call.  tilecute refused it as a top-level
    statement in a @T.prim_func; in an eager kernel it ran as Python, where ``==`` on two
    expressions is their structural equality (``assert L % 64 == 0`` failed for every L)
    and ``>=`` always true (``assert M >= 64`` checked nothing).  Both are host checks now;
    parse-time ones stay parse-time, and one inside a kernel stays refused."""
    m, m2 = T.dynamic("m"), T.dynamic("m2")

    @T.prim_func
    def pair(A: T.Tensor((m,), "float32"), B: T.Tensor((m2,), "float32"), k: T.int32):
        assert m == m2, "one length"
        assert m >= k and k > 0
        assert 4 * 4 == 16  # parse time
        with T.Kernel(T.ceildiv(m, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < m:
                    B[bx * 64 + i] = A[bx * 64 + i]
    text = pair.script()
    assert len(pair.assumes) == 2 and "    T.assume(m == m2)" in text and \
        "    T.assume(m >= k and k > 0)" in text, text
    k = tilecute.compile(pair)
    raises(RuntimeError, ["pair: Assume: m == m2 does not hold", "top-level assert"], k,
           FakeTensor((128,)), FakeTensor((64,)), 1)
    raises(RuntimeError, ["Assume: m >= k and k > 0"], k, FakeTensor((8,)), FakeTensor((8,)), 9)
    with pytest.raises(FrontendError, match=r"assertion failed: `4 \* 4 == 17`"):
        @T.prim_func
        def bad(A: T.Tensor((m,), "float32")):
            assert 4 * 4 == 17
            with T.Kernel(1, threads=32):
                A[0] = 1.0

    @tilecute.jit
    def rows(X, block=64):
        M = T.dynamic("M")
        L = T.const("L")
        X: T.Tensor((M, L), T.float32)
        assert M % block == 0, "whole blocks"
        assert L >= block  # a constant's value: checked when the kernel is built
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i in T.Parallel(block):
                X[bx * block + i, 0] = 0.0
    f = rows.get_tir(FakeTensor((128, 64)))
    assert f.assumes == (N.cmp("eq", N.binop("mod", f.symbols[0], 64), 0),)
    assert f.symbols[0].multiple == 64
    with pytest.raises(ValueError, match=r"assert L >= block failed for \{'L': 32\}"):
        rows.get_tir(FakeTensor((128, 32)))
    # a T.const given a symbol by keyword: its assert is checked at the call too
    g = rows.get_tir(L=T.dynamic("l"))
    assert "T.assume(l >= 64)" in g.script()
