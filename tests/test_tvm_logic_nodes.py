"""TVM's node constructors T.And / T.Or / T.Not and T.EQ ... T.GE (TileOPs' Mamba-2
dA-cumsum kernel masks its tile with ``in_b = T.And(bh < H, seq_idx < S)``): the same
expressions as ``and`` / ``or`` / ``not`` and the comparison operators."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def masked_copy(M=100, N_=200, block=64):
    @T.prim_func
    def masked(X: T.Tensor((M, N_), "float32"), Y: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, block), T.ceildiv(M, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                r = by * block + i
                c = bx * block + j
                inside = T.And(T.LT(r, M), c < N_)
                odd_or_edge = T.Or(T.EQ(c % 2, 1), T.GE(c, N_ - 4))
                if inside:
                    Y[r, c] = T.if_then_else(T.Not(odd_or_edge), X[r, c], -X[r, c])
    return masked


def test_logic_nodes_are_the_operators():
    a, b = N.Var("a", "int32"), N.Var("b", "int32")
    assert T.And(a < b, a > 0) == N.Logic("and", (N.cmp("lt", a, b), N.cmp("gt", a, 0)))
    assert T.Or(a < b, False) == N.cmp("lt", a, b) and T.And(a < b, False) == \
        N.Const(False, "bool")
    assert T.Not(a < b) == N.Not(N.cmp("lt", a, b))
    assert (T.EQ(a, 1), T.NE(a, b), T.LE(a, 2), T.GT(b, a)) == (
        N.cmp("eq", a, 1), N.cmp("ne", a, b), N.cmp("le", a, 2), N.cmp("gt", b, a))
    with pytest.raises(TypeError, match="T.And: TVM's tir.And takes boolean operands, got int32"):
        T.And(a, b < 1)


def test_logic_nodes_build(tmp_path):
    text = masked_copy().script()
    assert "and" in text and "or" in text and "not" in text, text
    info = tilecute.build_cubin(masked_copy(), "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


@pytest.mark.gpu
def test_logic_nodes_match_torch():
    import torch

    x = torch.randn(100, 200, device="cuda")
    y = torch.zeros_like(x)
    tilecute.compile(masked_copy())(x, y)
    c = torch.arange(200, device="cuda")
    flip = (c % 2 == 1) | (c >= 196)
    torch.testing.assert_close(y, torch.where(flip, -x, x))
