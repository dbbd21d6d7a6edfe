"""A pipelined loop whose last wgmma on its loaded tiles is followed by more than register
work -- attention backward's dQ: dS^T stored into a shared tile of the kernel's own, an
mma.sync GEMM on it and atomics into global memory, after dK's wgmma on the loaded Q --
gets a producer warpgroup, as TileLang gives its GQA backward example one
(transform/mbarriers.KernelTma.mma_then_registers' ``compute_tail``).  Before, only
register work could follow and the loop ran on the block's threads, a block barrier per
step before refilling a stage.  Option ``disable_warp_specialize_tail`` keeps that."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def scores_then_dq(n=256, M=128, bn=32, D=64, stages=2, threads=256):
    """One block: S^T = K Q_k^T per step (wgmma), dK += S^T Q_k (wgmma, S^T from
    registers), then dQ_k = S K through shared memory (mma.sync) added atomically."""

    @T.prim_func
    def scores_then_dq(Q: T.Tensor((n, D), "float16"), K: T.Tensor((M, D), "float16"),
                       dQ: T.Tensor((n, D), "float32"), dK: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            k_tile = T.alloc_shared((M, D), "float16")
            q_tile = T.alloc_shared((bn, D), "float16")
            st_tile = T.alloc_shared((M, bn), "float16")
            st = T.alloc_fragment((M, bn), "float32")
            st_half = T.alloc_fragment((M, bn), "float16")
            dk = T.alloc_fragment((M, D), "float32")
            dq = T.alloc_fragment((bn, D), "float32")
            T.copy(K[0:M, 0:D], k_tile)
            T.clear(dk)
            for k in T.Pipelined(n // bn, num_stages=stages):
                T.copy(Q[k * bn:(k + 1) * bn, 0:D], q_tile)
                T.clear(st)
                T.gemm(k_tile, q_tile, st, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(st, st_half)
                T.gemm(st_half, q_tile, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(st_half, st_tile)
                T.clear(dq)
                T.gemm(st_tile, k_tile, dq, transpose_A=True)
                for i, j in T.Parallel(bn, D):
                    T.atomic_add(dQ[k * bn + i, j], dq[i, j])
            T.copy(dk, dK[0:M, 0:D])

    return scores_then_dq


def _loop(src: str) -> str:
    """The pipelined loop of the generated kernel (its ``for k`` line and body)."""
    lines = src.splitlines()
    at = next(i for i, x in enumerate(lines) if x.lstrip().startswith("for k in cutlass.range("))
    depth = len(lines[at]) - len(lines[at].lstrip())
    end = next((i for i in range(at + 1, len(lines))
                if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= depth), len(lines))
    return "\n".join(lines[at:end])


def _kernel(options=None) -> N.KernelScope:
    return run_passes(scores_then_dq(), "sm_90a", options, until="split_roles").kernels[0]


def test_loop_with_dq_tail_gets_a_producer():
    k = _kernel()
    assert k.producer_threads == 128
    # the compute threads' barriers around the shared dS^T tile are the named barrier
    src = tilecute.compile(scores_then_dq(), target="sm_90a").get_kernel_source()
    assert "cute.arch.setmaxregister_decrease(" in src
    assert "block=[384, 1, 1]" in src
    loop = _loop(src)
    assert "cute.arch.sync_threads()" not in loop
    assert loop.count("cute.arch.barrier(barrier_id=1, number_of_threads=256)") == 2
    # the compute threads issue no TMA: they wait for Q's stage and release it (one
    # pipeline: at the end of the step)
    assert "tct.load(" not in loop and re.search(r"\n\s*tct\.wait\(", loop)
    assert re.search(r"\n\s*tct\.arrive\([^\n]*\)$", loop)


def test_option_keeps_the_loop_on_the_block():
    k = _kernel({"disable_warp_specialize_tail": True})
    assert k.producer_threads == 0
    src = tilecute.compile(scores_then_dq(), target="sm_90a",
                           options={"disable_warp_specialize_tail": True}).get_kernel_source()
    assert "setmaxregister" not in src and "block=[256, 1, 1]" in src
    loop = _loop(src)
    assert loop.count("cute.arch.sync_threads()") == 3


def test_tail_with_a_global_load_into_shared_keeps_the_old_rule():
    """A copy from global memory into shared after the last wgmma on the stages is a load
    the producer would own: no producer for such a loop."""

    @T.prim_func
    def late_load(Q: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16"),
                  K: T.Tensor((128, 64), "float16"), Out: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            k_tile = T.alloc_shared((128, 64), "float16")
            q_tile = T.alloc_shared((32, 64), "float16")
            b_tile = T.alloc_shared((32, 64), "float16")
            st = T.alloc_fragment((128, 32), "float32")
            acc = T.alloc_fragment((32, 64), "float32")
            T.copy(K[0:128, 0:64], k_tile)
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(Q[k * 32:(k + 1) * 32, 0:64], q_tile)
                T.clear(st)
                T.gemm(k_tile, q_tile, st, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(B[k * 32:(k + 1) * 32, 0:64], b_tile, disable_tma=True)
                for i, j in T.Parallel(32, 64):
                    acc[i, j] += b_tile[i, j]
            T.copy(acc, Out[0:32, 0:64])
            T.copy(st, Out[0:128, 0:32])

    k = run_passes(late_load, "sm_90a", until="split_roles").kernels[0]
    assert k.producer_threads == 0


@pytest.mark.parametrize("options", [{}, {"disable_warp_specialize_tail": True}])
def test_builds_sm90a_cubin(tmp_path, options):
    built = tilecute.build_cubin(scores_then_dq(), "sm_90a", out_dir=str(tmp_path),
                                 options=options)
    assert built.kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("options", [{}, {"disable_warp_specialize_tail": True}])
def test_against_torch_on_gpu(options):
    import torch

    g = torch.Generator(device="cpu").manual_seed(7)
    Q = (torch.randn(256, 64, generator=g) * 0.3).half().cuda()
    K = (torch.randn(128, 64, generator=g) * 0.3).half().cuda()
    dQ = torch.zeros(256, 64, device="cuda", dtype=torch.float32)
    dK = torch.full((128, 64), float("nan"), device="cuda", dtype=torch.float32)
    tilecute.compile(scores_then_dq(), options=options)(Q, K, dQ, dK)
    st = (K.float() @ Q.float().T).half().float()  # (128, 256): S^T per step, rounded
    torch.testing.assert_close(dK, st @ Q.float(), atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(dQ, st.T @ K.float(), atol=2e-2, rtol=1e-2)
