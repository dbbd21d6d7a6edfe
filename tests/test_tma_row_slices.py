"""TMA loads into a range of a shared tile's rows: a tile filled piece by piece, each piece
from its own place (a paged KV cache's pages, rows gathered by an index table), written the
TileLang way with a small ``T.serial`` loop of copies in a ``T.Pipelined`` body.

CPU: the loop is unrolled into one TMA copy per piece, each into its rows of the
(multi-buffered, swizzled) tile, and the kernel builds to an sm_90a cubin; a piece whose
rows do not start on the swizzle's 1024-byte period keeps the cp.async path.  GPU: a
gathered GEMM against torch."""

import os

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower


def gathered_gemm(M, N_, K, block_M=128, block_N=128, block_K=64, piece=32, stages=3,
                  dtype="float16"):
    """C[i, :] = A[rows[i], :] @ B^T, the rows of A gathered in pieces of ``piece`` rows:
    ``rows[i]`` is ``starts[i // piece] * piece + i % piece``."""
    pieces = block_M // piece

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N_, K), dtype),
             starts: T.Tensor((M // piece,), "int32"), C: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                for p in T.serial(pieces):
                    src = starts[by * pieces + p]
                    T.copy(A[src * piece:(src + 1) * piece, k * block_K:(k + 1) * block_K],
                           A_s[p * piece:(p + 1) * piece, :])
                T.copy(B[bx * block_N:(bx + 1) * block_N, k * block_K:(k + 1) * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main


def _tma_loads(plan, buffer):
    return [s for k in plan.func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.TmaCopy) and s.dst.buffer == buffer]


def test_pieces_become_tma_copies_into_row_ranges(tmp_path):
    plan = lower(gathered_gemm(512, 256, 256), "sm_90a")
    loads = _tma_loads(plan, "A_s")
    # (the prologue's two steps ahead and the loop's refill: four pieces each)
    firsts = sorted({int(s.dst.starts[0].value) for s in loads})
    assert firsts == [0, 32, 64, 96] and all(int(s.dst.extents[0].value) == 32 for s in loads)
    assert all(s.stage is not None for s in loads)  # multi-buffered with the whole tile
    source = emit_cute(plan)
    assert "into rows 32:64 of A_s" in source
    # each piece's lookup is folded into its copy's origin: no Let of it is left behind
    assert not [s for k in plan.func.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.Let) and s.var.name.startswith("src")]
    built = tilecute.build_cubin(gathered_gemm(512, 256, 256), "sm_90a", out_dir=str(tmp_path))
    assert built.kernel_names


def test_unaligned_piece_keeps_cp_async():
    """16-row pieces of a 128-byte-swizzled tile start every 2048 bytes: TMA; 4-row pieces
    start every 512 bytes, inside the swizzle's 1024-byte period: cp.async."""
    assert _tma_loads(lower(gathered_gemm(512, 256, 256, piece=16), "sm_90a"), "A_s")
    plan = lower(gathered_gemm(512, 256, 256, piece=4, block_M=64, block_N=64), "sm_90a")
    assert not _tma_loads(plan, "A_s") and _tma_loads(plan, "B_s")


def test_paged_decode_page16_reads_four_pages_per_step(tmp_path):
    import decode as D

    plan = lower(D.paged_decode(32, 8, 128, 16, 4, block_N=64), "sm_90a")
    firsts = sorted({int(s.dst.starts[0].value) for s in _tma_loads(plan, "K_s")})
    assert firsts == [0, 16, 32, 48]
    assert not [s for k in plan.func.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.For) and s.async_copy]  # no cp.async left
    built = tilecute.build_cubin(D.paged_decode(32, 8, 128, 16, 4, block_N=64), "sm_90a",
                                 out_dir=str(tmp_path))
    assert len(built.kernel_names) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("piece", [16, 32, 64])
def test_gathered_gemm_matches_torch(piece):
    import torch

    M, N_, K = 512, 256, 320
    kernel = tilecute.compile(gathered_gemm(M, N_, K, piece=piece), out_idx=[-1])
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(N_, K, dtype=torch.float16, device="cuda")
    starts = torch.randperm(M // piece, device="cuda").to(torch.int32)
    c = kernel(a, b, starts)
    rows = (starts.long()[:, None] * piece + torch.arange(piece, device="cuda")).reshape(-1)
    torch.testing.assert_close(c, a[rows].float() @ b.float().T, atol=1e-2, rtol=1e-2)
