"""T.GemmWarpPolicy as TileLang means it: FullRow puts as many warps (warpgroups) along M
as the tile allows and the rest along N, FullCol as many along N; neither is refused
because the tile cannot take every warp on one side."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import mma_warps, wgmma_warps


def test_wgmma_arrangements():
    assert wgmma_warps(128, 256, 4, "FullRow") == (2, 2)  # M takes 2 of 4 warpgroups
    assert wgmma_warps(256, 128, 4, "FullRow") == (4, 1)
    assert wgmma_warps(256, 16, 4, "FullCol") == (2, 2)  # N takes 2 (8 columns each)
    assert wgmma_warps(64, 256, 2, "FullCol") == (1, 2)
    assert wgmma_warps(128, 128, 2, "Square") == (2, 1)
    assert wgmma_warps(64, 16, 4, "FullRow") is None  # nothing tiles it


def test_mma_arrangements():
    assert mma_warps(32, 64, 4, "FullRow") == (2, 2)
    assert mma_warps(128, 64, 4, "FullRow") == (4, 1)
    assert mma_warps(64, 32, 4, "FullCol") == (2, 2)
    assert mma_warps(64, 64, 4, "Square") == (2, 2)
    assert mma_warps(32, 64, 4, "Square", all_along_m=True) is None  # A from registers


def _gemm(M, N_, K, bm, bn, bk, threads, policy):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N_), "float16"),
             C: T.Tensor((M, N_), "float16")):
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc, policy=policy)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("arch,threads,policy,warps", [
    ("sm_90a", 512, T.GemmWarpPolicy.FullRow, (2, 2)),   # 4 warpgroups, M = 128 takes 2
    ("sm_80", 256, T.GemmWarpPolicy.FullRow, (8, 1)),
    ("sm_80", 256, T.GemmWarpPolicy.FullCol, (1, 8)),
])
def test_policy_falls_back_to_a_mixed_arrangement(arch, threads, policy, warps, tmp_path):
    func = _gemm(256, 512, 128, 128, 256, 32, threads, policy)
    plan = lower(func, arch)
    (acc,) = [s for k in plan.func.kernels for s in walk_stmts(k.body)
              if isinstance(s, N.Allocate) and s.buffer.name == "acc"]
    assert tuple(acc.layout.warps) == warps
    assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path)).kernel_names


def test_four_compute_warpgroups_ask_only_for_the_launch_pool():
    """A small grid's 512-thread GEMM gets a producer warpgroup (640 threads, launched at 96
    registers a thread: a pool of 61440). setmaxnreg.inc waits until the block's own pool
    has the registers, so the compute warpgroups may ask for 112, not the 120 the SM's
    file would leave them (which hung on the H100)."""
    func = _gemm(256, 512, 128, 128, 256, 32, 512, T.GemmWarpPolicy.FullRow)
    plan = lower(func, "sm_90a")
    counts = [(s.count, s.increase) for k in plan.func.kernels for s in walk_stmts(k.body)
              if isinstance(s, N.SetMaxNReg)]
    assert sorted(counts) == [(24, False), (112, True)], counts
    assert 128 * 24 + 512 * 112 <= 640 * 96


@pytest.mark.gpu
def test_fullrow_mixed_arrangement_matches_torch():
    import torch

    kernel = tilecute.compile(_gemm(256, 512, 128, 128, 256, 32, 512, T.GemmWarpPolicy.FullRow),
                              out_idx=[-1])
    a = torch.randn(256, 128, dtype=torch.float16, device="cuda")
    b = torch.randn(128, 512, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


def test_mma_narrow_warp_tiles():
    """TileLang's mma.sync warps take 16 x 8 steps: a 32 x 16 tile over four warps, a
    16 x 32 one over four along N; tilecute keeps 16 x 16 where an arrangement has it."""
    assert mma_warps(32, 16, 4, "Square") == (2, 2)  # 16 x 8 each
    assert mma_warps(16, 32, 4, "FullRow") == (1, 4)
    assert mma_warps(64, 64, 4, "Square") == (2, 2)  # 16 x 16 steps still first
    assert mma_warps(16, 16, 4, "Square") is None  # 4 x 8 per warp: nothing tiles it


def _narrow(M, N_, K, threads, policy, dtype="float16"):
    """C = A @ B^T over one tile narrower than 16 columns a warp (TileLang's indexer
    shapes: 32 x 16 and 16 x 32 on 128 threads, below wgmma's 64 rows)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N_, K), dtype),
             C: T.Tensor((M, N_), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((N_, K), dtype)
            acc = T.alloc_fragment((M, N_), "float32")
            total = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, policy=policy, clear_accum=True)
            T.reduce_sum(acc, total, dim=1)
            for i, j in T.Parallel(M, N_):
                C[i, j] = acc[i, j] + total[i]

    return main


@pytest.mark.parametrize("M,N_,policy,warps", [
    (32, 16, T.GemmWarpPolicy.Square, (2, 2)),
    (16, 32, T.GemmWarpPolicy.FullRow, (1, 4)),
])
def test_narrow_warp_tiles_build(M, N_, policy, warps, tmp_path):
    func = _narrow(M, N_, 64, 128, policy)
    plan = lower(func, "sm_90a")
    gemms = [s for k in plan.func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
    assert [g.family for g in gemms] == ["mma"]
    (acc,) = [s for k in plan.func.kernels for s in walk_stmts(k.body)
              if isinstance(s, N.Allocate) and s.buffer.name == "acc"]
    assert tuple(acc.layout.warps) == warps
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("M,N_,policy", [(32, 16, T.GemmWarpPolicy.Square),
                                         (16, 32, T.GemmWarpPolicy.FullRow)])
def test_narrow_warp_tiles_match_torch(M, N_, policy):
    import torch

    kernel = tilecute.compile(_narrow(M, N_, 64, 128, policy), out_idx=[-1])
    a = torch.randn(M, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(N_, 64, dtype=torch.float16, device="cuda")
    ref = a.float() @ b.float().T
    torch.testing.assert_close(kernel(a, b), ref + ref.sum(1, keepdim=True), atol=1e-2,
                               rtol=1e-2)
