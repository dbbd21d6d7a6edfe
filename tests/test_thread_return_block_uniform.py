"""``T.thread_return()`` under a condition every thread of the block evaluates alike (a
fused MoE's padding block: ``if expert_ids[bx] < 0: T.thread_return()``) leaves with the
whole block, so the collective work after it (tile ops, a T.Pipelined T.gemm, barriers)
runs in the ``if``'s other branch with every thread; TileLang's CUDA ``return;`` does the
same.  A condition that may differ between threads (the thread index, a shared buffer, a
local variable set in a branch) keeps the refusal: the threads that returned would never
reach the block's barriers."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _expert_gemm(read_into_var: bool, E=4, N=128, K=128, block_M=64, block_N=64, block_K=32):
    """C[rows of block b] = A[rows of b] @ W[expert_ids[b]]^T; a block whose expert id is
    negative (padding) returns before its GEMM and writes nothing."""
    NB = T.dynamic("blocks")

    def tiles(A, W, C, e, bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(K // block_K, num_stages=2):
            T.copy(A[bx * block_M, k * block_K], A_s)
            T.copy(W[e, by * block_N, k * block_K], B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True)
        T.copy(acc, C[bx * block_M, by * block_N])

    if read_into_var:
        @T.prim_func
        def expert_gemm_var(A: T.Tensor((NB * block_M, K), T.float16), W: T.Tensor((E, N, K), T.float16),
                            expert_ids: T.Tensor((NB,), T.int32), C: T.Tensor((NB * block_M, N), T.float16)):
            with T.Kernel(NB, N // block_N, threads=128) as (bx, by):
                e = T.alloc_var(T.int32)
                e = expert_ids[bx]
                if e < 0:
                    T.thread_return()
                T.macro(tiles)(A, W, C, e, bx, by)
        return expert_gemm_var

    @T.prim_func
    def expert_gemm(A: T.Tensor((NB * block_M, K), T.float16), W: T.Tensor((E, N, K), T.float16),
                    expert_ids: T.Tensor((NB,), T.int32), C: T.Tensor((NB * block_M, N), T.float16)):
        with T.Kernel(NB, N // block_N, threads=128) as (bx, by):
            e = expert_ids[bx]
            if e < 0:
                T.thread_return()
            T.macro(tiles)(A, W, C, e, bx, by)
    return expert_gemm


@pytest.mark.parametrize("read_into_var", [False, True])
def test_block_exit_runs_the_gemm_in_the_other_branch(read_into_var, tmp_path):
    f = _expert_gemm(read_into_var)
    src = tilecute.compile(f, target="sm_90a").get_kernel_source()
    # the whole block takes one branch: the GEMM (and its barriers) in the other
    m = re.search(r"if (\w+(?:\[0\])?) < 0:\s+pass\s+else:\n", src)
    assert m, src
    rest = src[m.end():]
    assert "tcm.gemm(" in rest and "cute.arch.sync_threads()" in rest
    assert tilecute.compile(f, target="sm_90a").ensure_cubin()
    assert tilecute.build_cubin(f, "sm_80", out_dir=str(tmp_path)).kernel_names


def test_thread_dependent_exit_before_a_tile_op_is_refused():
    with pytest.raises(FrontendError, match=r"a statement after T\.thread_return\(\) needs every thread"):
        @T.prim_func
        def half_block(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((128,), T.float32)
                if T.get_thread_binding() >= 64:
                    T.thread_return()
                T.copy(A, s)
                T.copy(s, B)


def test_exit_on_a_variable_set_per_thread_is_refused():
    with pytest.raises(FrontendError, match=r"a statement after T\.thread_return\(\) needs every thread"):
        @T.prim_func
        def flagged(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((128,), T.float32)
                stop = T.alloc_var(T.int32, init=0)
                if A[T.get_thread_binding()] < 0:
                    stop = 1
                if stop == 1:
                    T.thread_return()
                T.copy(A, s)
                T.copy(s, B)


def test_exit_on_shared_memory_is_refused():
    with pytest.raises(FrontendError, match=r"a statement after T\.thread_return\(\) needs every thread"):
        @T.prim_func
        def from_shared(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((128,), T.float32)
                T.copy(A, s)
                if s[0] < 0:  # one value, but shared memory: left to the refusal
                    T.thread_return()
                T.copy(s, B)


@pytest.mark.gpu
@pytest.mark.parametrize("read_into_var", [False, True])
def test_block_exit_gemm_matches_torch(read_into_var):
    torch.manual_seed(0)
    f = tilecute.compile(_expert_gemm(read_into_var))
    NB = 5
    A = torch.randn(NB * 64, 128, device="cuda", dtype=torch.float16)
    W = torch.randn(4, 128, 128, device="cuda", dtype=torch.float16) * 0.1
    ids = torch.tensor([2, -1, 0, 3, -1], dtype=torch.int32, device="cuda")
    C = torch.full((NB * 64, 128), 7.0, device="cuda", dtype=torch.float16)
    f(A, W, ids, C)
    for b, e in enumerate(ids.tolist()):
        rows = slice(b * 64, (b + 1) * 64)
        want = torch.full((64, 128), 7.0, device="cuda") if e < 0 else A[rows].float() @ W[e].float().T
        torch.testing.assert_close(C[rows].float(), want, rtol=1e-2, atol=1e-2)
