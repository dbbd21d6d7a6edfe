"""TileLang's ``tilelang.layout.make_fully_replicated_layout_fragment(buffer, threads)``
(``Fragment::FullyReplicated``: each of ``threads`` threads holds a copy of the whole
buffer) for ``T.annotate_layout`` on a fragment: the ``T.Fragment`` of that map, which
tilecute reads as its replicated layout.  It was refused by name.

CPU: the layout the frontend gives, both module paths, a cubin; GPU: against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.layout import make_fully_replicated_layout_fragment


def lookup_scale(n=64, rows=128, holders=128):
    """out[r, c] = table[c] * (r + 1) with ``table`` loaded serially into a fragment every
    thread holds whole (``holders`` of the 128 threads)."""
    @T.prim_func
    def lookup(tab: T.Tensor((n,), T.float32), out: T.Tensor((rows, n), T.float32)):
        with T.Kernel(1, threads=128):
            table = T.alloc_fragment((n,), T.float32)
            T.annotate_layout({table: make_fully_replicated_layout_fragment(table, holders)})
            for i in T.serial(n):
                table[i] = tab[i]
            for r, c in T.Parallel(rows, n):
                out[r, c] = table[c] * T.Cast(T.float32, r + 1)
    return lookup


def _layout(func, name):
    allocs = [s for s in func.kernels[0].body if isinstance(s, N.Allocate) and s.buffer.name == name]
    return allocs[0].layout


def test_the_replicated_layout():
    assert _layout(lookup_scale(), "table") == N.Layout("replicated")


def test_fewer_holders_than_threads():
    assert _layout(lookup_scale(holders=64), "table") == N.Layout("replicated", threads=64)


def test_swizzle_module_path():
    from tilecute.layout.swizzle import make_fully_replicated_layout_fragment as via_swizzle

    assert via_swizzle is make_fully_replicated_layout_fragment
    frag = make_fully_replicated_layout_fragment(
        N.Buffer("t", "float32", (N.Const(4, "int32"), N.Const(8, "int32")), "fragment"), 32)
    assert frag.replicate_extent == 32


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cubin(arch, tmp_path):
    assert tilecute.build_cubin(lookup_scale(), arch, out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("holders", [128, 64])
def test_gpu_lookup_scale(holders):
    import torch
    tab = torch.randn(64, device="cuda")
    out = torch.empty(128, 64, device="cuda")
    tilecute.compile(lookup_scale(holders=holders))(tab, out)
    want = tab[None, :] * torch.arange(1, 129, device="cuda", dtype=torch.float32)[:, None]
    torch.testing.assert_close(out, want)


def test_refused_layout_names_say_so_on_attribute_access():
    """A refused tilelang.layout name (``SwizzleMode``) says so when its attributes are read
    too (it was an AttributeError on tilecute's stand-in)."""
    from tilecute.layout import SwizzleMode

    with pytest.raises(NotImplementedError, match=r"tilelang\.layout\.SwizzleMode\.SWIZZLE_128B: "
                                                  r"tilelang\.layout\.SwizzleMode is a TileLang "
                                                  r"layout that tilecute does not support"):
        SwizzleMode.SWIZZLE_128B
