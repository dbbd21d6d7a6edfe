"""``T.tma_copy`` of one row longer than TMA's 256-element box (``A[pid, 0:1024]`` into
``a_s[0, 0:1024]``: TileLang moves it in several copies) and of a per-warp row whose index is
computed at run time (``a_s[warp, 0:K]`` with ``leader_scope_threads=32``: one TMA issue per
warp).  tilecute cuts such a row into consecutive boxes of at most 256 elements (the chunks
of one row lie one after another in shared memory too) and places a run-time row at
``row * row_bytes`` when every row starts at a multiple of 128 bytes.  What stays refused: a
box of several rows wider than 256 unswizzled, a run-time row off TMA's 128-byte alignment."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.tma_copies import TmaError


def per_warp(M=32, K=1024, threads=256):
    warps = threads // 32

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, warps), threads=threads) as pid:
            tid = T.get_thread_binding()
            warp_idx = tid // 32
            row = pid * warps + warp_idx
            a_shared = T.alloc_shared((warps, K), dtype=T.float32)
            mbars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[row, 0:K], a_shared[warp_idx, 0:K], barrier=mbars[warp_idx],
                       leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[warp_idx])
            T.mbarrier_wait_parity(mbarrier=mbars[warp_idx], parity=0)
            if tid % 32 == 0:
                B[row] = a_shared[warp_idx, 0] + a_shared[warp_idx, K - 1] + a_shared[warp_idx, 300]

    return main


def whole_row(M=64, K=1024, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), C: T.Tensor((M, K), T.float16)):
        with T.Kernel(M, threads=threads) as pid:
            a_shared = T.alloc_shared((1, K), dtype=T.float16)
            mbar = T.alloc_barrier([threads])
            T.tma_copy(A[pid, 0:K], a_shared[0, 0:K], barrier=mbar)
            T.mbarrier_arrive(mbarrier=mbar)
            T.mbarrier_wait_parity(mbarrier=mbar, parity=0)
            for j in T.Parallel(K):
                a_shared[0, j] = a_shared[0, j] * 2.0
            T.tma_copy(a_shared[0, 0:K], C[pid, 0:K])  # a store: the same boxes back

    return main


@pytest.mark.parametrize("make,boxes", [(per_warp, "tct.load(A_desc, tc_smem + 0 + warp_idx * 4096"),
                                        (whole_row, "chunks=4, step=256")])
def test_long_rows_build_as_several_boxes(make, boxes, cache_dir):
    kernel = tilecute.compile(make(), target="sm_90a")
    src = kernel.get_kernel_source()
    assert boxes in src, src
    assert "(1, 256)" in src  # every descriptor's box: one row of 256 elements
    assert kernel.ensure_cubin().endswith("kernel.cubin")


def test_several_rows_wider_than_a_box_stay_refused():
    @T.prim_func
    def main(A: T.Tensor((64, 1024), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(16, threads=128) as pid:
            s = T.alloc_shared((4, 1024), dtype=T.float32)
            mbar = T.alloc_barrier([128])
            T.tma_copy(A[pid * 4:pid * 4 + 4, 0:1024], s, barrier=mbar)
            T.mbarrier_arrive(mbarrier=mbar)
            T.mbarrier_wait_parity(mbarrier=mbar, parity=0)
            B[pid] = s[0, 0]

    with pytest.raises(TmaError, match=r"box \[4, 1024\] has a dim above 256"):
        tilecute.compile(main, target="sm_90a")


def test_run_time_row_off_128_bytes_stays_refused():
    with pytest.raises(TmaError, match="sliced otherwise"):
        tilecute.compile(per_warp(M=32, K=8), target="sm_90a")  # rows of 32 bytes


@pytest.mark.gpu
def test_per_warp_rows_match_torch():
    import torch

    a = torch.randn(32, 1024, device="cuda")
    b = torch.zeros(32, device="cuda")
    tilecute.compile(per_warp())(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a[:, 0] + a[:, 1023] + a[:, 300])


@pytest.mark.gpu
def test_whole_row_load_and_store_match_torch():
    import torch

    a = torch.randn(64, 1024, device="cuda").half()
    c = torch.zeros_like(a)
    tilecute.compile(whole_row())(a, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a * 2)
