"""``T.copy`` whose two sides state static extents that pair up dim by dim (the same number
of non-unit dims) but differ: TileLang's copy (``copy.cc`` MakeIterVars) loops over the
side in the lower memory level (fragment/local, then shared, then global; the source on a
tie) and refuses only where that side is smaller than the source.  ``T.copy(A[:, 0:2],
B[:, 0:3])`` copies two columns into ``B[:, 0:2]``; into a wider shared tile the copy reads
as far past the source slice as the tile is wide.  tilecute refused every such copy
("the shapes ... differ").  A rank mismatch stays an error (tests/test_regions.py).

CPU: the lowered nests, the refusal, cubins; GPU: against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.lower_tile_ops import TileOpError
from tilecute.transform.pipeline import run_passes


def narrow_into_wide(m=96, n=24, take=5, room=7):
    """Global -> global: ``take`` columns of A into the first of ``room`` columns of B."""
    @T.prim_func
    def narrow(A: T.Tensor((m, n), T.float16), B: T.Tensor((m, n), T.float16)):
        with T.Kernel(1, threads=128):
            T.copy(A[:, 0:take], B[:, 0:room])
    return narrow


def slice_into_wider_tile(rows=64, n=32, c0=3, take=4, tile=8):
    """Global -> shared: a ``take``-column slice into a ``tile``-wide shared buffer (the
    copy runs over the tile, reading ``tile`` columns from ``c0``), then the tile out."""
    @T.prim_func
    def widen(A: T.Tensor((rows, n), T.float16), B: T.Tensor((rows, tile), T.float16)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((rows, tile), T.float16)
            T.copy(A[0:rows, c0:c0 + take], S)
            T.copy(S, B)
    return widen


def tile_smaller_than_source():
    @T.prim_func
    def short(A: T.Tensor((64, 32), T.float32), B: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((64, 8), T.float32)
            T.copy(A[0:64, 0:16], F)
            T.copy(F, B[0:64, 0:8])
    return short


def _stores(func, arch, buffer):
    body = run_passes(func, arch, until="lower_tile_ops").kernels[0].body
    nests = [s for s in walk_stmts(body) if isinstance(s, N.For) and s.kind == "parallel"
             and isinstance(s.body[0], N.For)]
    for outer in nests:
        inner = outer.body[0]
        (store,) = inner.body
        if store.buffer == buffer:
            return (outer.extent.value, inner.extent.value), store
    raise AssertionError(f"no nest stores into {buffer}")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_source_is_the_base_on_a_tie(arch):
    extents, store = _stores(narrow_into_wide(), arch, "B")
    assert extents == (96, 5)  # the source's 5 columns, not the destination's 7
    assert store.value.buffer == "A"


def test_lower_level_side_is_the_base():
    extents, store = _stores(slice_into_wider_tile(), "sm_80", "S")
    assert extents == (64, 8)  # the shared tile's 8 columns
    col = store.value.indices[1]  # A[i, 3 + j]
    assert isinstance(col, N.BinOp) and col.op == "add" and N.Const(3, "int32") in (col.a, col.b)


def test_smaller_base_is_refused():
    with pytest.raises(TileOpError, match=r"prim_func 'short': T.copy: the loop runs over 'F' \(the "
                                          r"side in the lower memory level\), whose extent 8 at "
                                          r"its non-unit dim 1 is smaller than the source 'A''s 16"):
        run_passes(tile_smaller_than_source(), "sm_80")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("make", [narrow_into_wide, slice_into_wider_tile])
def test_cubin(make, arch, tmp_path):
    assert tilecute.build_cubin(make(), arch, out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_gpu_narrow_into_wide():
    import torch
    a = torch.randn(96, 24, device="cuda", dtype=torch.float16)
    b = torch.zeros(96, 24, device="cuda", dtype=torch.float16)
    tilecute.compile(narrow_into_wide())(a, b)
    want = torch.zeros_like(b)
    want[:, :5] = a[:, :5]
    torch.testing.assert_close(b, want, atol=0, rtol=0)


@pytest.mark.gpu
def test_gpu_slice_into_wider_tile():
    import torch
    a = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    b = torch.empty(64, 8, device="cuda", dtype=torch.float16)
    tilecute.compile(slice_into_wider_tile())(a, b)
    torch.testing.assert_close(b, a[:, 3:11], atol=0, rtol=0)
