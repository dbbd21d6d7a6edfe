"""``T.copy`` with a thread's own (``T.alloc_local``) buffer on one side is a per-thread
copy of all of it, as TileLang lowers it (a plain loop, never spread over the threads):
each thread writes its whole local tile to its own slice.  tilecute spread a local ->
global copy over the block's threads (every thread wrote one element of its tile, in
TileLang's own gemm_sp compressor: most of the output never written)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def per_thread_rows(rows=16, per=8, cols=256, shared_hop=False):
    """Thread (r, c) of a (rows, cols // per) block squares its `per` elements of row r in
    a local tile and writes them back (with ``shared_hop``, into its part of a shared tile
    that the block then copies out together)."""
    @T.prim_func
    def square(X: T.Tensor((64, cols), T.float32), Y: T.Tensor((64, cols), T.float32)):
        with T.Kernel(64 // rows, threads=(rows, cols // per)) as bx:
            r = T.get_thread_binding(0)
            c = T.get_thread_binding(1)
            mine = T.alloc_local((per,), T.float32)
            s = T.alloc_shared((rows, cols), T.float32)
            T.copy(X[bx * rows + r, c * per:(c + 1) * per], mine)
            for k in T.serial(per):
                mine[k] = mine[k] * mine[k]
            if shared_hop:  # each thread its part of the tile, then the block copies the tile
                T.copy(mine, s[r, c * per:(c + 1) * per])
                T.copy(s, Y[bx * rows, 0])
            else:
                T.copy(mine, Y[bx * rows + r, c * per:(c + 1) * per])
    return square


@pytest.mark.parametrize("shared_hop", [False, True])
def test_a_copy_from_a_local_tile_runs_whole_on_every_thread(shared_hop, tmp_path):
    lowered = run_passes(per_thread_rows(shared_hop=shared_hop), "sm_90a")
    reads_local = [s for s in walk_stmts(lowered.kernels[0].body) if isinstance(s, N.For)
                   and s.kind == "parallel" and any(
                       isinstance(x, N.Store) and isinstance(x.value, N.Load) and x.value.buffer == "mine"
                       for x in s.body)]
    assert reads_local and all(s.replicated for s in reads_local)
    assert tilecute.build_cubin(per_thread_rows(shared_hop=shared_hop), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("shared_hop", [False, True])
def test_local_tiles_reach_every_element(shared_hop):
    import torch

    x = torch.randn(64, 256, device="cuda")
    y = torch.full_like(x, float("nan"))
    tilecute.compile(per_thread_rows(shared_hop=shared_hop))(x, y)
    torch.testing.assert_close(y, x * x)
