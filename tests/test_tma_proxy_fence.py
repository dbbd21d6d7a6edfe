"""A TMA load writes shared memory through the async proxy, which a block barrier does not
order after the threads' own loads and stores: before a TMA load into bytes the threads
read or wrote (its own buffer refilled, or another buffer the shared-memory plan placed
there), every thread fences its accesses (``fence.proxy.async.shared::cta``) and then
the block synchronises.  Found on an H200 with FLA's KDA ``chunk_bwd_intra`` (TileLang's
examples/kda): it read ``q``'s tile, synchronised and TMA-loaded ``dq`` onto its bytes;
some reads saw ``dq`` (a nondeterministic wrong ``dg``, relative error 3e-2), and turning
that one copy into a thread copy made it exact."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes

FENCE = 'cute.arch.fence_proxy("async.shared", space="cta")'


def tiles_in_turn(rows=64, cols=128, bm=16, steps=4):
    """Each block reads a tile of A with its threads, then loads a tile of B (the same
    shape, so the plan may put it on A's bytes) and combines both: out = 2 * A + B, then
    a loop whose steps refill one tile read by the threads in the step before."""
    @T.prim_func
    def turns(A: T.Tensor((rows, cols), "float32"), Bm: T.Tensor((rows, cols), "float32"),
              C: T.Tensor((steps, rows, cols), "float32"), Out: T.Tensor((rows, cols), "float32"),
              Acc: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows // bm, threads=128) as bx:
            a_tile = T.alloc_shared((bm, cols), "float32")
            acc = T.alloc_fragment((bm, cols), "float32")
            T.copy(A[bx * bm, 0], a_tile)
            for i, j in T.Parallel(bm, cols):
                acc[i, j] = a_tile[i, j] * 2.0
            b_tile = T.alloc_shared((bm, cols), "float32")
            T.copy(Bm[bx * bm, 0], b_tile)
            for i, j in T.Parallel(bm, cols):
                acc[i, j] = acc[i, j] + b_tile[i, j]
            T.copy(acc, Out[bx * bm, 0])
            c_tile = T.alloc_shared((bm, cols), "float32")
            total = T.alloc_fragment((bm, cols), "float32")
            T.clear(total)
            for k in T.Pipelined(steps, num_stages=1):
                T.copy(C[k, bx * bm, 0], c_tile)
                for i, j in T.Parallel(bm, cols):
                    total[i, j] = total[i, j] + c_tile[i, j]
            T.copy(total, Acc[bx * bm, 0])

    return turns


def test_barriers_before_tma_loads_onto_touched_bytes_fence_first(tmp_path):
    func = tiles_in_turn()
    text = print_func(run_passes(func, "sm_90a"))
    assert "T.sync_threads()  # fence.proxy.async first (a TMA load follows)" in text
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert info.kernel_names
    # every TMA load after the first ones follows a fenced barrier
    lines = src.splitlines()
    loads = [n for n, line in enumerate(lines) if "tct.load(" in line]
    assert len(loads) >= 3
    for n in loads[2:]:
        before = [line.strip() for line in lines[max(0, n - 4):n]]
        assert FENCE in before, "\n".join(lines[max(0, n - 4):n + 1])


def test_without_tma_there_is_no_fence():
    text = print_func(run_passes(tiles_in_turn(), "sm_90a", {"disable_tma": True}))
    assert "fence.proxy.async" not in text


@pytest.mark.gpu
def test_tiles_in_turn_on_gpu():
    kernel = tilecute.compile(tiles_in_turn(rows=4096), out_idx=[3, 4])
    torch.manual_seed(0)
    a, b = (torch.randn(4096, 128, device="cuda") for _ in range(2))
    c = torch.randn(4, 4096, 128, device="cuda")
    for _ in range(5):
        out, acc = kernel(a, b, c)
        torch.testing.assert_close(out, 2 * a + b)
        torch.testing.assert_close(acc, c.sum(0), rtol=1e-5, atol=1e-5)
