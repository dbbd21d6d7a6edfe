"""``T.vectorized`` loops (every iteration on one thread) get vector instructions: the
vectorization pass runs ``W`` iterations a step (16 bytes of the narrowest global/shared
dtype the body touches) and makes the contiguous global and shared accesses one 128-bit
access a chunk (``For.vectors``), as TileLang vectorizes such a loop.  They were unrolled
element by element (TileLang's Hadamard example: 128 scalar global loads and stores a
thread where TileLang has 32 of 16 bytes each)."""

from __future__ import annotations

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes

ROWS = """
@T.prim_func
def k(A: T.Tensor((4, 1024), "DT"), B: T.Tensor((4, 1024), "DT")):
    with T.Kernel(4, threads=128) as bx:
        r = T.alloc_local((8,), "DT")
        s = T.alloc_shared((128, 8), "DT")
        tx = T.get_thread_binding(0)
        for i in LOOP(8):
            r[i] = A[bx, tx * 8 + i]
        for i in LOOP(8):
            s[tx, i] = r[i] * 2
        for i in LOOP(8):
            r[i] = s[127 - tx, i]
        for i in LOOP(8):
            B[bx, tx * 8 + i] = r[i]
"""


def _loops(src):
    f = run_passes(T.from_script(src), "sm_90a", until="vectorize")
    return [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.For)], f


@pytest.mark.parametrize("dtype,width", [("float32", 4), ("float16", 8)])
def test_vectorized_loops_get_vector_accesses(dtype, width):
    loops, f = _loops(ROWS.replace("DT", dtype).replace("LOOP", "T.vectorized"))
    assert len(loops) == 4
    for lp in loops:
        assert lp.vectorized and lp.vector_width == width, print_func(f)
        (v,) = lp.vectors  # the global or shared access; the local one is per lane
        assert v.buffer in ("A", "B", "s") and v.chunk == width


def test_unrolled_loops_stay_element_by_element():
    """``T.unroll`` promises no vectorization (TileLang's leaves its accesses scalar)."""
    loops, f = _loops(ROWS.replace("DT", "float32").replace("LOOP", "T.unroll"))
    assert all(not lp.vectorized and not lp.vectors for lp in loops), print_func(f)


def test_a_branch_in_the_body_keeps_it_element_by_element():
    src = ROWS.replace("DT", "float32").replace("LOOP", "T.vectorized").replace(
        "            r[i] = A[bx, tx * 8 + i]",
        "            if bx > 0:\n                r[i] = A[bx, tx * 8 + i]")
    loops, f = _loops(src)
    assert not loops[0].vectors and all(lp.vectors for lp in loops[1:]), print_func(f)


def test_the_flag_prints_and_round_trips():
    func = T.from_script(ROWS.replace("DT", "float32").replace("LOOP", "T.vectorized"))
    assert "for i in T.vectorized(8):" in print_func(func)
    again = from_json(to_json(func))
    assert [s.vectorized for s in walk_stmts(again.kernels[0].body) if isinstance(s, N.For)] \
        == [True] * 4


def test_vectorized_source_and_cubin(tmp_path):
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    func = T.from_script(ROWS.replace("DT", "float32").replace("LOOP", "T.vectorized"))
    src = emit_cute(lower(func, "sm_90a"))
    assert src.count("cutlass.range_constexpr(0, 8, 4)") == 4, src
    assert "A.iterator + cute.assume(bx * 1024 + tx * 8 + i, divby=4)" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vectorized_loops_on_gpu(dtype):
    import torch

    kernel = tilecute.compile(T.from_script(ROWS.replace("DT", dtype).replace("LOOP", "T.vectorized")))
    a = torch.randn(4, 1024, device="cuda").to(getattr(torch, dtype))
    b = torch.empty_like(a)
    kernel(a, b)
    want = (a * 2).view(4, 128, 8).flip(1).reshape(4, 1024)
    torch.testing.assert_close(b, want)
