"""A pipelined GEMM loop whose wgmma ``T.gemm`` is followed by register work only (FP8's
promotion of the partial accumulator every few steps) gets the producer warpgroup like a
loop ending with the GEMM: TileLang specializes it too.  Before, the trailing ``if`` kept
it a single-role loop (TileLang's fp8 2xAcc example at 0.86x TileLang's time).  Programs
written for these tests in TileLang's idioms."""

import pytest
import torch

import tilecute
import tilecute.language as T


def promoted_fp8_gemm(M=256, N=256, K=2048, bm=128, bn=128, bk=64, every=2, tail="registers"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float8_e4m3"), B: T.Tensor((N, K), "float8_e4m3"),
             C: T.Tensor((M, N), "float32"), Seen: T.Tensor((M // bm, N // bn), "int32"),
             Sc: T.Tensor((K // bk,), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float8_e4m3")
            b_s = T.alloc_shared((bn, bk), "float8_e4m3")
            part = T.alloc_fragment((bm, bn), "float32")
            total = T.alloc_fragment((bm, bn), "float32")
            T.clear(part)
            T.clear(total)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, part, transpose_B=True)
                if (k + 1) % every == 0:
                    for i, j in T.Parallel(bm, bn):
                        total[i, j] += part[i, j] * Sc[k]  # (a global the kernel only reads)
                    T.clear(part)
                    if tail == "global":
                        Seen[by, bx] = k
            T.copy(total, C[by * bm, bx * bn])

    return gemm


def test_register_tail_gets_a_producer():
    src = tilecute.compile(promoted_fp8_gemm(), target="sm_90a").get_kernel_source()
    assert "block=[256, 1, 1]" in src  # 128 compute threads + a producer warpgroup
    assert "tct.arrive(" in src


def test_a_tail_storing_to_global_gets_a_producer_unless_the_option_says():
    """A store to a global tensor after the GEMM is compute work the producer never reads:
    the loop gets the producer too (helper CG's rule, attention backward's dQ), and option
    ``disable_warp_specialize_tail`` keeps the one-role loop (register work alone)."""
    func = promoted_fp8_gemm(tail="global")
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert "block=[256, 1, 1]" in src and "tct.arrive(" in src
    src = tilecute.compile(func, target="sm_90a",
                           options={"disable_warp_specialize_tail": True}).get_kernel_source()
    assert "block=[128, 1, 1]" in src


@pytest.mark.gpu
@pytest.mark.parametrize("every", [2, 3])
def test_promoted_fp8_gemm_gpu(every):
    torch.manual_seed(0)
    M, N, K = 256, 256, 2048
    # small integers: every partial sum exact even in fp8 wgmma's narrower accumulator
    a = torch.randint(-2, 3, (M, K), device="cuda").float().to(torch.float8_e4m3fn)
    b = torch.randint(-2, 3, (N, K), device="cuda").float().to(torch.float8_e4m3fn)
    c = torch.empty(M, N, device="cuda")
    seen = torch.zeros(M // 128, N // 128, device="cuda", dtype=torch.int32)
    sc = torch.randint(1, 4, (K // 64,), device="cuda").float()
    tilecute.compile(promoted_fp8_gemm(M, N, K, every=every))(a, b, c, seen, sc)
    # the last promotion is at the last multiple of `every`: steps after it are not added;
    # each promotion scales the partial sum of its `every` steps by Sc at its step
    steps = (K // 64) // every * every
    ref = torch.zeros(M, N, device="cuda")
    for k0 in range(0, steps, every):
        lo, hi = k0 * 64, (k0 + every) * 64
        ref += (a[:, lo:hi].float() @ b[:, lo:hi].float().T) * sc[k0 + every - 1]
    torch.testing.assert_close(c, ref, atol=0, rtol=0)
