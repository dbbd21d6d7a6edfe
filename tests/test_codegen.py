"""Codegen compiled for real: every example builds sm_90a and sm_80 cubins on this CPU
machine, and each cubin's parameter table matches the launch ABI."""

import dataclasses
import os

import pytest

import elementwise as E
import tilecute
from tilecute.runtime.abi import KernelParam
from tilecute.runtime.cubin import ABIMismatch, check_abi
from tilecute.transform.pipeline import lower
from tilecute.codegen.cute import CodegenError, emit_cute
import tilecute.language as T

CASES = [(name, dt) for name, fac in E.ALL.items()
         for dt in (["float16", "bfloat16", "float32"] if name == "math_ops" else [None])]


def _make(name, dt):
    fac = E.ALL[name]
    return fac(dt) if dt else fac()


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name,dt", CASES, ids=[f"{n}-{d}" if d else n for n, d in CASES])
def test_example_compiles_to_a_cubin_matching_the_abi(name, dt, arch, tmp_path):
    func = _make(name, dt)
    info = tilecute.build_cubin(func, arch, out_dir=str(tmp_path))
    assert os.path.getsize(info.path) > 0 and info.arch == arch
    plan = lower(func, arch)
    assert sorted(info.kernel_names) == sorted(k.symbol for k in plan.abi.kernels)
    for launch in plan.abi.kernels:
        got = [(p.offset, p.size) for p in info.kernels[launch.symbol].params]
        want = list(zip(launch.param_offsets(), [p.size for p in launch.params]))
        assert got == want
    check_abi(info, plan.abi)  # the same comparison build_cubin made


def test_abi_mismatch_names_both_sides(tmp_path):
    func = E.vector_add()
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    abi = lower(func).abi
    k = abi.kernels[0]
    extra = dataclasses.replace(k, params=k.params + (KernelParam("ghost", "scalar", "int32", "ghost"),))
    with pytest.raises(ABIMismatch, match=r"packs 5 parameters .*cubin declares 4"):
        check_abi(info, dataclasses.replace(abi, kernels=(extra,)))
    wrong = dataclasses.replace(k, params=(dataclasses.replace(k.params[0], kind="scalar", dtype="int32"),)
                                + k.params[1:])
    with pytest.raises(ABIMismatch, match=r"parameter 'A_ptr'.*size 4.*size 8"):
        check_abi(info, dataclasses.replace(abi, kernels=(wrong,)))
    renamed = dataclasses.replace(k, symbol="tilecute_other_0")
    with pytest.raises(ABIMismatch, match="names kernel 'tilecute_other_0'"):
        check_abi(info, dataclasses.replace(abi, kernels=(renamed,)))


def test_vectorized_example_uses_128_bit_accesses():
    plan = lower(E.vector_add("float16"))
    assert {a.name: a.align for a in plan.abi.args} == {"A": 16, "B": 16, "C": 16}
    src = emit_cute(plan)
    assert "cute.assume(" in src and ".load()" in src and ".store(" in src


def test_symbolic_row_stride_is_not_vectorized():
    plan = lower(E.strided_scale())
    assert all(a.align == 1 for a in plan.abi.args if a.kind == "tensor")


def test_abi_lists_pointers_then_symbols_then_scalars():
    abi = lower(E.scaled_add()).abi
    params = abi.kernels[0].params
    assert [(p.name, p.kind) for p in params] == [
        ("x_ptr", "pointer"), ("y_ptr", "pointer"), ("out_ptr", "pointer"), ("N", "scalar"),
        ("alpha", "scalar"), ("beta", "scalar"), ("offset", "scalar")]
    assert abi.kernels[0].grid == ("tc_ceildiv(sym_N, 512)", "1", "1")


def test_long_condition_chains_are_one_variadic_call(tmp_path):
    """CuTe DSL's preprocessor copies the left side of each `and` four times, so a chain
    of n terms grows as 4^n (a 15-term guard of an im2col gather under T.if_then_else did
    not finish compiling); a chain past expr.LONG_CHAIN terms is one cutlass.and_ call
    (here ten conditions of the program and the load's bounds checks)."""
    @T.prim_func
    def guarded(X: T.Tensor((64, 64), T.float32), Y: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 64):
                Y[i, j] = T.if_then_else(
                    (i > 0) & (i < 63) & (j > 0) & (j < 63) & (i != j) & (i + j < 120) &
                    (i - j < 50) & (j - i < 50) & (i % 3 != 1) & (j % 5 != 2),
                    X[i - 1, j + 1], 0.0)

    source = emit_cute(lower(guarded, "sm_90a"))
    assert " and " not in "".join(ln for ln in source.splitlines() if "cutlass.and_(" in ln)
    (cond,) = [ln.strip() for ln in source.splitlines() if ln.strip().startswith("if cutlass.and_(")]
    assert cond.count(",") >= 11, cond  # the ten conditions, then the load's bounds
    assert tilecute.build_cubin(guarded, "sm_90a", out_dir=str(tmp_path)).kernel_names
