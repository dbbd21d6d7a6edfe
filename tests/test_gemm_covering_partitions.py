"""``T.gemm`` warp partitions that cover the tile in TileLang's sense (its GemmWarpPolicy
search after issue 2537: ``m_warp * n_warp`` = the block's warps, each warp a multiple of
16 rows and 8 columns; every warp takes part, none is left over) with a count along N or
M that is not a power of two (13 warps over a 16 x 104 tile, 12 over 16 x 96, 6 over 32 x
96), and shared operands whose rows no swizzle chunk tiles (a 32 x 104 float16 B, 208
bytes a row).  On mma.sync they take 16 x 8 steps, a swizzle whose chunks hold whole warp
tiles, or unswizzled rows (read by ldmatrix as they are); partitions that do not cover
the tile stay refused with TileLang's words."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes
from tilecute.transform.select_mma import GemmError, mma_warps


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def one_block_gemm(M, N, K, threads, policy, trans_a=False, trans_b=False):
    @T.prim_func
    def gemm(A: T.Tensor((K, M) if trans_a else (M, K), T.float16),
             B: T.Tensor((N, K) if trans_b else (K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, 1, threads=threads):
            A_shared = T.alloc_shared((K, M) if trans_a else (M, K), T.float16)
            B_shared = T.alloc_shared((N, K) if trans_b else (K, N), T.float16)
            C_local = T.alloc_fragment((M, N), T.float32)
            T.clear(C_local)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_local, trans_a, trans_b, policy=policy)
            T.copy(C_local, C)
    return gemm


SHAPES = [  # (M, N, K, threads, policy, options, warps)
    (16, 104, 32, 416, T.GemmWarpPolicy.Square, {}, (1, 13)),
    (16, 96, 32, 384, T.GemmWarpPolicy.Square, {}, (1, 12)),
    (16, 192, 32, 384, T.GemmWarpPolicy.Square, {}, (1, 12)),
    (32, 96, 32, 192, T.GemmWarpPolicy.Square, {}, (1, 6)),  # (TileLang: (2, 3); either covers)
    (192, 104, 32, 384, T.GemmWarpPolicy.FullCol, {"disable_wgmma": True}, (12, 1)),
    (48, 64, 32, 256, T.GemmWarpPolicy.FullRow, {}, (1, 8)),
]
IDS = [f"{m}x{n}-w{t // 32}-{w[0]}x{w[1]}" for m, n, _, t, _, _, w in SHAPES]


def _layouts(func, options):
    low = run_passes(func, "sm_90a", options, until="select_mma")
    return {s.buffer.name: s.layout for s in walk_stmts(low.kernels[0].body)
            if isinstance(s, N.Allocate)}


@pytest.mark.parametrize("M,N,K,threads,policy,options,warps", SHAPES, ids=IDS)
def test_covering_partition_builds(M, N, K, threads, policy, options, warps, tmp_path):
    lay = _layouts(one_block_gemm(M, N, K, threads, policy), options)
    assert lay["C_local"].mma == "mma" and lay["C_local"].warps == warps
    info = tilecute.build_cubin(one_block_gemm(M, N, K, threads, policy), "sm_90a",
                                out_dir=str(tmp_path), options=options)
    assert info.kernel_names


def test_operand_swizzle_holds_whole_warp_tiles():
    """16 x 192 over 12 warps along N (8 columns a step, 96 a row of warps): the widest
    swizzle (128 bytes, 64 columns) would cut a row of warps; 64 bytes (32 columns) holds
    a whole number of warp steps and tiles 96.  A 104-column B has no swizzle: row-major."""
    lay = _layouts(one_block_gemm(16, 192, 32, 384, T.GemmWarpPolicy.Square), {})
    assert lay["B_shared"] == N.Layout("tma_swizzled", swizzle=64)
    lay = _layouts(one_block_gemm(16, 104, 32, 416, T.GemmWarpPolicy.Square), {})
    assert lay["B_shared"] == N.Layout("row_major")
    # (a power-of-two partition keeps the widest swizzle)
    lay = _layouts(one_block_gemm(64, 128, 32, 128, T.GemmWarpPolicy.Square),
                   {"disable_wgmma": True})
    assert lay["B_shared"] == N.Layout("tma_swizzled", swizzle=128)


@pytest.mark.parametrize("trans_a,trans_b,M,N,threads", [
    (False, True, 16, 104, 416), (True, False, 48, 64, 96), (True, True, 96, 48, 192)])
def test_transposed_operands_build(trans_a, trans_b, M, N, threads, tmp_path):
    info = tilecute.build_cubin(one_block_gemm(M, N, 32, threads, T.GemmWarpPolicy.Square,
                                               trans_a, trans_b), "sm_90a",
                                out_dir=str(tmp_path), options={"disable_wgmma": True})
    assert info.kernel_names


@pytest.mark.parametrize("M,N,threads,policy,options", [
    (16, 104, 384, T.GemmWarpPolicy.Square, {}),       # 12 warps: 12 x 8 = 96 < 104
    (16, 104, 384, T.GemmWarpPolicy.FullRow, {}),
    (288, 8, 544, T.GemmWarpPolicy.Square, {}),        # 17 warps: 17 x 16 = 272 < 288
    (16, 16, 224, T.GemmWarpPolicy.Square, {}),        # 7 warps over 16 x 16
    (64, 104, 384, T.GemmWarpPolicy.Square, {}),
    (336, 16, 640, T.GemmWarpPolicy.FullCol, {}),
])
def test_uncovering_partitions_stay_refused(M, N, threads, policy, options, tmp_path):
    with pytest.raises(GemmError, match="No valid warp partition"):
        tilecute.build_cubin(one_block_gemm(M, N, 32, threads, policy), "sm_90a",
                             out_dir=str(tmp_path), options=options)


def test_mma_warps_takes_any_count_along_n_in_8_column_steps():
    assert mma_warps(16, 104, 13, "Square") == (1, 13)
    assert mma_warps(64, 96, 12, "Square") == (2, 6)
    assert mma_warps(16, 128, 4, "Square") == (1, 4)  # (16 x 16 steps still first)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,threads,policy,options,warps", SHAPES, ids=IDS)
def test_covering_partitions_on_gpu(M, N, K, threads, policy, options, warps):
    import torch
    torch.manual_seed(0)
    a = torch.randint(0, 3, (M, K), dtype=torch.float16, device="cuda")
    b = torch.randint(0, 3, (K, N), dtype=torch.float16, device="cuda")
    kernel = tilecute.compile(one_block_gemm(M, N, K, threads, policy), out_idx=[2],
                              options=options)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("trans_a,trans_b,M,N,threads", [
    (False, True, 16, 104, 416), (True, False, 48, 64, 96), (True, True, 96, 48, 192)])
def test_transposed_operands_on_gpu(trans_a, trans_b, M, N, threads):
    import torch
    a = torch.randn(32, M, device="cuda").half() if trans_a else torch.randn(M, 32, device="cuda").half()
    b = torch.randn(N, 32, device="cuda").half() if trans_b else torch.randn(32, N, device="cuda").half()
    kernel = tilecute.compile(one_block_gemm(M, N, 32, threads, T.GemmWarpPolicy.Square,
                                             trans_a, trans_b), out_idx=[2],
                              options={"disable_wgmma": True})
    want = (a.float().T if trans_a else a.float()) @ (b.float().T if trans_b else b.float())
    torch.testing.assert_close(kernel(a, b), want, atol=1e-2, rtol=1e-2)
