"""Copy regions as TileLang writes them: unit dimensions anywhere in a region
(``Q[b, s:s + M, h, :]`` against a 2-D tile) lower to nests over the region's non-unit
axes, and TMA moves them as one box with the unit dims in place."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import expr_str
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower, run_passes

B, S, H, D, M = T.symbolic("B"), T.symbolic("S"), 8, 64, 64


@T.prim_func
def bshd_copy(Q: T.Tensor((B, S, H, D), "float16"), O: T.Tensor((B, S, H, D), "float16")):
    with T.Kernel(T.ceildiv(S, M), H, B, threads=128) as (bx, h, b):
        Qs = T.alloc_shared((M, D), "float16")
        q = T.alloc_fragment((M, D), "float32")
        T.copy(Q[b, bx * M:bx * M + M, h, 0:D], Qs)
        T.copy(Qs, q)
        T.copy(q, O[b, bx * M:bx * M + M, h, 0:D])


def _stores(func):
    return [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Store)]


def test_unit_dims_inside_a_region_are_held_by_the_region_origin():
    func = run_passes(bshd_copy, "sm_80", until="lower_tile_ops")
    first, _, last = _stores(func)
    assert first.value.buffer == "Q" and last.buffer == "O"
    for indices in (first.value.indices, last.indices):
        assert [expr_str(i) for i in indices][0::2] == ["b", "h"]


def test_tma_box_keeps_the_unit_dims_in_place():
    plan = lower(bshd_copy, "sm_90a")
    (desc,) = [p for p in plan.abi.kernels[0].params if p.kind == "tma_desc"]
    assert desc.source == "Q" and desc.tma.box == (1, 64, 1, 64)


def test_region_shape_mismatch_is_still_an_error():
    @T.prim_func
    def bad(Q: T.Tensor((B, S, H, D), "float16")):
        with T.Kernel(1, threads=128) as bx:
            Qs = T.alloc_shared((M, D), "float16")
            T.copy(Q[0, 0:M, 0:2, 0:D], Qs)
    with pytest.raises(ValueError, match=r"shapes of 'Q' \(1, 64, 2, 64\) and 'Qs' \(64, 64\) differ"):
        lower(bad, "sm_90a")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_bshd_copy_builds(arch, tmp_path):
    info = tilecute.build_cubin(bshd_copy, arch, out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_bshd_copy_0"]



def _unit_dim_tiles(shape, whole):
    """A tile with a unit dim that is not leading, copied from and back to global
    memory given whole (``T.copy(Y, s)``) or by its origin (``T.copy(Y[0, 0], s)``)."""
    @T.prim_func
    def unit_dim_tiles(Y: T.Tensor(shape, "float32"), Z: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared(shape, "float32")
            f = T.alloc_fragment(shape, "float32")
            if whole:
                T.copy(Y, s)
                T.copy(f, Z)
            elif len(shape) == 2:
                T.copy(Y[0, 0], s)
                T.copy(f, Z[0, 0])
            else:
                T.copy(Y[0, 0, 0], s)
                T.copy(f, Z[0, 0, 0])
            T.copy(s, f)
    return unit_dim_tiles


@pytest.mark.parametrize("shape", [(32, 1), (4, 1, 16)])
@pytest.mark.parametrize("whole", [True, False])
def test_an_origin_takes_the_tiles_unit_dims_in_place(shape, whole):
    # TileLang right-aligns the tile's extents on the origin (legalize_pairwise_extents):
    # Y[i, 0], not Y[0, i] (which copied one element of Y and left the rest)
    func = run_passes(_unit_dim_tiles(shape, whole), "sm_80", until="lower_tile_ops")
    glob = [s for s in _stores(func) if s.buffer == "Z" or s.value.buffer == "Y"]
    assert len(glob) == 2
    for indices in (glob[0].value.indices, glob[1].indices):
        text = [expr_str(i) for i in indices]
        assert [t for t, d in zip(text, shape) if d == 1] == ["0"], text
        assert all(t != "0" for t, d in zip(text, shape) if d != 1), text
