"""A T.gemm inside a run-time ``if`` inside a T.unroll loop (TileLang's multi-staged idiom:
``for stage in T.unroll(num_stages): if k < k_blocks: ... T.gemm(A_s[stage, :, :], ...)``):
each unrolled copy of the branch calls the same tiled MMA.  The wgmma helper used to set
ACCUMULATE on the caller's tiled MMA object, so the value set inside the first copy's
branch was used by the second -- a value that does not dominate its use, and the cubin
build failed ("operand #0 does not dominate this use").  runtime/cute/mma.py's gemm now
sets it on a copy."""

import pytest

import tilecute
import tilecute.language as T


def staged_gemm(K=320, block_K=64, num_stages=2, threads=128):
    """C = A @ B^T over K in blocks of block_K, stage ``s`` of a T.unroll(num_stages) loop
    taking block ``i * num_stages + s``; K / block_K is not a multiple of num_stages, so the
    last trip's second stage has no block (the ``if``)."""
    k_blocks = K // block_K

    @T.prim_func
    def staged(A: T.Tensor((64, K), T.float16), B: T.Tensor((64, K), T.float16),
               C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((num_stages, 64, block_K), T.float16)
            b_s = T.alloc_shared((num_stages, 64, block_K), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.clear(acc)
            for i in T.serial(T.ceildiv(k_blocks, num_stages)):
                for s in T.unroll(num_stages):
                    if i * num_stages + s < k_blocks:
                        T.copy(A[0, (i * num_stages + s) * block_K], a_s[s, :, :])
                        T.copy(B[0, (i * num_stages + s) * block_K], b_s[s, :, :])
                        T.gemm(a_s[s, :, :], b_s[s, :, :], acc, transpose_B=True)
            T.copy(acc, C)
    return staged


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_gemm_in_a_branch_of_an_unrolled_loop_builds(arch, tmp_path):
    built = tilecute.build_cubin(staged_gemm(), arch, out_dir=str(tmp_path))
    assert built.kernel_names


def test_each_unrolled_branch_calls_the_one_tiled_mma():
    src = tilecute.compile(staged_gemm(), target="sm_90a").get_kernel_source()
    body = src.split("for s in cutlass.range_constexpr(0, 2):", 1)[1]
    assert "if i * 2 + s < 5:" in body
    assert body.count("tcm.gemm(tc_mma0, ") == 1 and "tc_mma1" not in src


@pytest.mark.gpu
def test_staged_gemm_on_gpu():
    import torch

    a = torch.randn(64, 320, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 320, device="cuda", dtype=torch.float16)
    kernel = tilecute.compile(staged_gemm(), out_idx=[2])
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float().T, rtol=1e-2, atol=1e-2)
