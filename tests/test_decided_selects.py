"""A select (``T.if_then_else``) whose integer condition the ranges of its loop variables
decide is printed as the branch it takes: a padding mask of tiles that never reach the
sequence's end costs no instruction (TileLang's flash-attention example at seq_len 4096,
128-key tiles: ``k * 128 + j >= 4096`` never holds).  A condition they do not decide keeps
its select."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import decided


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _masked(S, tile=64):
    @T.prim_func
    def masked(X: T.Tensor((S,), "float32"), Y: T.Tensor((S,), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((tile,), "float32")
            for k in T.serial(T.ceildiv(S, tile)):
                for j in T.Parallel(tile):
                    acc[j] = T.if_then_else(k * tile + j >= S, 0.0, 1.0)
                for j in T.Parallel(tile):
                    if k * tile + j < S:
                        Y[k * tile + j] = X[k * tile + j] + acc[j]
    return masked


@pytest.mark.parametrize("S,select", [(256, False), (250, True)])
def test_decided_masks_print_no_select(S, select, tmp_path):
    func = _masked(S)
    src = tilecute.compile(func).get_kernel_source()
    assert ("cutlass.select_" in src) == select
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_decided():
    k, j = N.Var("k", "int32"), N.Var("j", "int32")
    e = N.binop("add", N.binop("mul", k, N.Const(128, "int32")), j)
    env = {"k": (0, 31), "j": (0, 127)}
    assert decided(N.Cmp("ge", e, N.Const(4096, "int32")), env) is False
    assert decided(N.Cmp("lt", e, N.Const(4096, "int32")), env) is True
    assert decided(N.Cmp("ge", e, N.Const(4000, "int32")), env) is None
    assert decided(N.Cmp("ge", e, N.Const(4096, "int32")), {"k": (0, 31)}) is None
    assert decided(N.Cmp("ne", k, N.Const(40, "int32")), env) is True


@pytest.mark.gpu
@pytest.mark.parametrize("S", [256, 250])
def test_decided_masks_on_gpu(S):
    import torch

    x = torch.randn(S, device="cuda")
    y = torch.zeros(S, device="cuda")
    tilecute.compile(_masked(S))(x, y)
    torch.testing.assert_close(y, x + 1.0)
