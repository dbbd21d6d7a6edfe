"""``T.atomic_add(A[0:4], v)`` / ``T.atomic_max(M[r, 0:8], v)`` / ``T.atomic_add(A, v)`` (a bare
buffer) with ONE value: TileLang's tile atomic with a ``src_value`` adds the value into every
element of the region, each element once per block (a parallel loop; TileLang's own test:
``T.atomic_add(B, 1)`` on a (1,) buffer in a 128-thread block adds 1).  tilecute read such a
call as an update of the region's first element by every thread (a silent wrong answer); it
is now a parallel nest of element atomics.  An element ``A[i]`` stays TileLang's element
atomic, run by every thread that reaches it."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.transform.pipeline import lower

BLOCKS = 3


def broadcast_atomics():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), M: T.Tensor((2, 8), "int32"),
             W: T.Tensor((6,), "float32"), C: T.Tensor((1,), "int32"),
             X: T.Tensor((BLOCKS,), "float32")):
        with T.Kernel(BLOCKS, threads=32) as bx:
            T.atomic_add(A[0:4], 1.0)            # every element +1 per block
            T.atomic_max(M[1, 0:8], bx * 10)     # row 1 -> max over blocks
            T.atomic_add(W, X[bx])               # a bare buffer: all 6 elements
            T.atomic_add(C, 1)                   # a bare (1,) buffer: once per block
            T.atomic_add(C[0], 1)                # an element: every thread of every block

    return main


def test_one_value_into_a_region_is_a_nest_over_it(cache_dir):
    f = broadcast_atomics()
    text = f.script()
    assert "T.atomic_add(A[0:4], T.float32(1.0))" in text
    assert "T.atomic_add(W[0:6], X[bx])" in text
    assert "T.atomic_add(C[0:1], 1)" in text and "T.atomic_add(C[0], 1)" in text
    assert T.from_script(text) == f  # an element prints as one (C[0]), a region as a slice
    src = emit_cute(lower(f, "sm_90a"))
    lines = [ln.strip() for ln in src.splitlines()]
    assert "if tc_f1 < 4:" in lines or any(ln.startswith("if") and "< 4" in ln for ln in lines)
    assert any("tca.atomic_max(M, (1, " in ln for ln in lines)
    assert "tca.atomic_add(C, (0,), 1)" in lines  # the element form, every thread
    assert sum("tca.atomic_add(C, (" in ln for ln in lines) == 2
    assert sum("tca.atomic_add(A, (" in ln for ln in lines) == 1
    kernel = tilecute.compile(f, target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")


def test_element_and_one_element_tile():
    f = T.from_script('''import tilecute.language as T


@T.prim_func
def k(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        T.atomic_add(A[2], 1.0)
        T.atomic_add(A[1:2], 1.0)
''')
    # A[2]: the element form; A[1:2]: a one-element tile (once per block, as TileLang)
    from tilecute.ir.visitor import walk_stmts

    atomics = [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.AtomicAdd)]
    assert [a.dst.extents for a in atomics] == [None, (N.Const(1, "int32"),)]


@pytest.mark.gpu
def test_one_value_into_a_region_matches_torch():
    import torch

    a = torch.zeros(4, device="cuda")
    m = torch.full((2, 8), -1, dtype=torch.int32, device="cuda")
    w = torch.zeros(6, device="cuda")
    c = torch.zeros(1, dtype=torch.int32, device="cuda")
    x = torch.tensor([1.0, 2.0, 4.0], device="cuda")
    tilecute.compile(broadcast_atomics())(a, m, w, c, x)
    torch.cuda.synchronize()
    torch.testing.assert_close(a.cpu(), torch.full((4,), float(BLOCKS)))
    want_m = torch.full((2, 8), -1, dtype=torch.int32)
    want_m[1] = (BLOCKS - 1) * 10
    assert torch.equal(m.cpu(), want_m)
    torch.testing.assert_close(w.cpu(), torch.full((6,), 7.0))
    assert int(c.item()) == BLOCKS + 32 * BLOCKS  # the tile once per block, the element per thread


def one_element_tiles():
    """TileLang's tile_atomic_add_scalar idiom: a (1,) buffer named bare, a local tile and a
    constant, in a 128-thread block: each added once."""

    @T.prim_func
    def main(A: T.Tensor((1,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            a_local = T.alloc_local([1], "float32")
            T.copy(A, a_local)
            T.clear(B)
            T.atomic_add(B, a_local)
            T.atomic_add(B, 1)

    return main


def test_one_element_tiles_build(cache_dir):
    kernel = tilecute.compile(one_element_tiles(), target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    src = kernel.get_kernel_source()
    assert src.count("if tc_f") >= 3  # clear and both atomics: thread 0's iteration only


@pytest.mark.gpu
def test_one_element_tiles_add_once():
    import torch

    a = torch.randn(1, device="cuda")
    b = torch.full((1,), 5.0, device="cuda")
    tilecute.compile(one_element_tiles())(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a + 1)
