"""TileLang's newer frontend forms: typed locals (``a: T.int32 = 1``: a Bind, or a variable
where the function assigns it again),
a float constant stored into an integer buffer (converted as a cast), and T.macro return
values (also tests/test_macro.py)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _typed_locals():
    @T.prim_func
    def typed(A: T.Tensor((4,), T.int32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            a: T.int32 = 1
            b: T.int32 = a
            a = 2
            d: T.int32 = a
            x: T.float32 = B[0]
            y: T.int32 = x  # converted to the declared dtype
            c: T.int32
            c += 5
            A[0] = b
            A[1] = d
            A[2] = y + c
            A[3] = 7.9  # a float constant into int32: 7, as a cast
    return typed


def test_typed_locals_are_variables_of_their_dtype(tmp_path):
    """A typed local the function assigns again (``a``) or declares without a value (``c``)
    is a variable; the others are TileLang's Binds, immutable values of their dtype."""
    func = _typed_locals()
    allocs = [s.buffer for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Allocate)]
    assert [(b.name, b.dtype, b.scope) for b in allocs] == [("a", "int32", "local"),
                                                             ("c", "int32", "local")]
    lets = {s.var.name: s.var.dtype for s in walk_stmts(func.kernels[0].body)
            if isinstance(s, N.Let)}
    assert lets == {"b": "int32", "d": "int32", "x": "float32", "y": "int32"}
    stores = [s for s in walk_stmts(func.kernels[0].body)
              if isinstance(s, N.Store) and s.buffer == "A"]
    assert stores[-1].value == N.Const(7, "int32")
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_typed_local_refusals_name_the_statement():
    with pytest.raises(FrontendError, match="the annotation must be a scalar dtype"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=32) as _:
                a: "int3" = 1
                A[0] = a


@pytest.mark.gpu
def test_typed_locals_on_gpu():
    import torch

    a = torch.zeros(4, dtype=torch.int32, device="cuda")
    b = torch.tensor([3.7, 0, 0, 0], device="cuda")
    tilecute.compile(_typed_locals())(a, b)
    assert a.tolist() == [1, 2, 3 + 5, 7]
