"""A ``T.macro`` parameter without ``T.Ref`` given a ``T.alloc_var`` takes the variable's
value at the call (TileLang 0.1.15 binds ``x: T.int32 = v[0]``), so assigning the parameter
inside the macro leaves the caller's variable as it was; with ``x: T.Ref`` the macro stores
into the caller's variable.  Before, tilecute passed the variable itself either way, and a
macro that reassigned its parameter silently changed the caller's variable."""

import pytest
import torch

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


@T.macro
def _bump(x):
    x = x + 1
    return x


@T.macro
def _bump_ref(x: T.Ref):
    x = x + 1


@T.prim_func
def bumps(out: T.Tensor((3,), T.int32)):
    with T.Kernel(1, threads=32) as _:
        v = T.alloc_var(T.int32)
        w = T.alloc_var(T.int32)
        v = 5
        w = 5
        r = _bump(v)
        _bump_ref(w)
        v = v + 10  # (the value bound at the call is 5 still)
        out[0] = v
        out[1] = w
        out[2] = r


def test_unannotated_parameter_takes_the_value(tmp_path):
    src = tilecute.compile(bumps, target="sm_90a").get_kernel_source()
    assert "x = v[0]\n" in src and "x_1_ = x + 1" in src  # a Let of the value, then a new name
    assert "v[0] = v[0] + 1\n" not in src
    assert "w[0] = w[0] + 1\n" in src  # T.Ref: the caller's variable
    assert "r = x_1_\n" in src and "out[2] = r\n" in src
    assert tilecute.build_cubin(bumps, "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_unannotated_parameter_on_gpu():
    out = torch.zeros(3, dtype=torch.int32, device="cuda")
    tilecute.compile(bumps)(out)
    assert out.tolist() == [15, 6, 6]
