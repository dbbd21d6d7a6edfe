"""``T.copy(A, B)`` between two global tensors named whole: TileLang's buffer argument is
the region of all of it, so the copy covers the tensors (with a cast where the dtypes
differ); the tile-op lowering makes it one T.Parallel nest over their shape.  A global
origin (``A[bx * 64]``) still takes its extents from the other side."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


def _widen(shape=(8, 64)):
    n = T.dynamic("n")

    @T.prim_func
    def widen(A: T.Tensor(shape, T.float16), B: T.Tensor(shape, T.float32),
              C: T.Tensor((n,), T.bfloat16), D: T.Tensor((n,), T.bfloat16)):
        with T.Kernel(1, threads=128):
            T.copy(A, B)
            T.copy(C, D)

    return widen


def test_whole_global_copies_are_nests_over_the_tensors():
    lowered = lower(_widen(), "sm_90a").func
    nests = [s for s in lowered.kernels[0].body if isinstance(s, N.For)]
    assert [s.extent for s in nests[:1]] == [N.Const(8, "int32")]
    stores = [s for s in walk_stmts(lowered.kernels[0].body) if isinstance(s, N.Store)]
    assert [s.buffer for s in stores] == ["B", "D"]
    assert isinstance(stores[0].value, N.Cast) and stores[0].value.dtype == "float32"
    assert any(isinstance(s, N.For) and s.extent == N.Var("n") for s in walk_stmts(lowered.kernels[0].body))


def test_whole_global_copy_builds_a_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    assert tilecute.compile(_widen(), target="cuda").ensure_cubin()


def test_whole_globals_of_different_shapes_are_refused():
    """TileLang asserts two whole buffers have one shape; the frontend says so at the line."""
    with pytest.raises(FrontendError, match=r"T.copy\(A, B\): 'A' has shape \(64,\) and 'B' "
                                            r"\(32,\); two whole buffers must have one shape"):
        @T.prim_func
        def mismatch(A: T.Tensor((64,), T.float32), B: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                T.copy(A, B)


@pytest.mark.gpu
def test_whole_global_copy_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_widen())
    a = torch.randn(8, 64, device="cuda").half()
    c = torch.randn(300, device="cuda").bfloat16()
    b, d = torch.zeros(8, 64, device="cuda"), torch.zeros_like(c)
    kernel(a, b, c, d)
    assert torch.equal(b, a.float()) and torch.equal(d, c)
