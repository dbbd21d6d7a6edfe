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

