"""A T.Pipelined(num_stages=S) loop whose body is the program's own T.ws regions and
mbarriers gets S stages of its loaded tiles and S copies of its barriers, each wait on the
parity of the copy's own phases, as TileLang's pipeline pass versions such a loop
(transform/version_pipelines.py).  Before, the loop ran with one tile and one barrier
each, so the producer warpgroup could load step k + 1 only once step k's GEMM was done
(TileLang's warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py: 36.7 ms against
TileLang's 27.4 on an H100).  Loops that do not read exactly so stay as written."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


def ws_gemm(M=512, N=512, K=512, stages=2, start_parity=1, after_loop=False, shared_step=False,
            bm=128, bn=128, bk=64):
    """TileLang's warp-specialized GEMM with its own barriers (the example's program)."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if shared_step:
                    T.sync_threads()  # (a statement every thread runs)
                with T.ws(1):
                    T.barrier_wait(done, (ko + start_parity) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(0):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, acc)
                    T.barrier_arrive(done)
            if after_loop:
                with T.ws(1):
                    T.barrier_wait(done, 1)
            with T.ws(0):
                T.copy(acc, C[by * bm, bx * bn])

    return gemm


def _ir(func) -> str:
    return print_func(run_passes(func, "sm_90a", until="version_pipelines"))


@pytest.mark.parametrize("stages", [2, 3])
def test_tiles_and_barriers_get_one_copy_per_stage(stages):
    text = _ir(ws_gemm(stages=stages))
    assert f'A_s = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages={stages})' in text
    assert f"ready = T.alloc_barrier([128] * {stages})" in text
    assert f"T.mbarrier_wait_parity(done[ko % {stages}], (ko // {stages} + 1) % 2)" in text
    assert f"T.mbarrier_wait_parity(ready[ko % {stages}], ko // {stages} % 2)" in text
    assert f"T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready[ko % {stages}])" in text
    assert f"T.mbarrier_arrive(done[ko % {stages}])" in text


def test_the_first_steps_parity_carries_over():
    # (ko + 0) % 2 for the producer: its first wait is on phase 0 of each copy
    text = _ir(ws_gemm(start_parity=0))
    assert "T.mbarrier_wait_parity(done[ko % 2], ko // 2 % 2)" in text


@pytest.mark.parametrize("kw", [dict(after_loop=True), dict(shared_step=True), dict(stages=1)])
def test_other_loops_stay_as_written(kw):
    # a barrier named after the loop, a statement all threads run in the body, one stage
    text = _ir(ws_gemm(**kw))
    assert "T.alloc_barrier(128)" in text and ", stages=" not in text
    assert re.search(r"T.mbarrier_wait_parity\(ready, ko % 2\)", text)


def test_a_parity_that_does_not_alternate_stays_as_written():
    @T.prim_func
    def fixed(A: T.Tensor((128, 64), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 128), T.float16)
            acc = T.alloc_fragment((128, 128), T.float32)
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(acc)
            for ko in T.Pipelined(1, num_stages=2):
                with T.ws(1):
                    T.tma_copy(A[0, 0], A_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(0):
                    T.barrier_wait(ready, 0)
                    T.gemm(A_s, B_s, acc)
            with T.ws(0):
                T.copy(acc, C[0, 0])

    assert ", stages=" not in _ir(fixed)


def test_versioned_loop_builds(tmp_path):
    assert tilecute.build_cubin(ws_gemm(stages=3), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_generated_source_reads_the_steps_stage(tmp_path):
    src = tilecute.compile(ws_gemm()).get_kernel_source()
    assert "tct.wait(ready + ko % 2, ko // 2 % 2)" in src
    assert "# A_s: 2 stages of 8192 float16" in src


@pytest.mark.gpu
@pytest.mark.parametrize("stages, parity", [(2, 1), (3, 1), (4, 1)])
def test_versioned_ws_gemm_on_gpu(stages, parity):
    import torch

    M, N, K = 512, 384, 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    tilecute.compile(ws_gemm(M, N, K, stages=stages, start_parity=parity))(a, b, c)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)
