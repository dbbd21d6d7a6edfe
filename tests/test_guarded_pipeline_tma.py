"""A T.Pipelined loop under a block-uniform `if` at the kernel's top level (an MoE
grouped GEMM's `if expert_rows > 0:` around its K loop) keeps the TMA loads the same loop
gets outside the `if`, as TileLang 0.1.15 does (its lowered CUDA: tma_load on mbarriers,
a producer warpgroup): with a producer warpgroup where the kernel gets one, else the TMA
software pipeline in place; before, the loop fell back to the cp.async pipeline.
sm_90a cubins."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def _expert_gemm(M=1024, N=1024, K=1024, experts=8, ws=None):
    """Row tile ``by`` belongs to expert ``by % experts``; an expert with no rows skips
    its K loop (its tile stays zero)."""
    @T.prim_func
    def expert_gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                    rows: T.Tensor((experts,), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            if rows[by % experts] > 0:
                for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3, warp_specialize=ws):
                    T.copy(A[by * 128, k * 64], A_s)
                    T.copy(B[k * 64, bx * 128], B_s)
                    T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 128, bx * 128])

    return expert_gemm


def _tma_loads(func):
    return [s for s in walk_stmts(func.kernels[0].body)
            if isinstance(s, N.TmaCopy) and s.src.buffer in ("A", "B")]


def test_small_grid_gets_a_producer_with_tma_loads():
    """64 blocks (alone on their SMs): a producer warpgroup replays the `if` and issues
    the TMA loads, as for the same loop outside the `if`."""
    f = run_passes(_expert_gemm(), "sm_90a", {})
    assert f.kernels[0].producer_threads == 128
    assert {c.src.buffer for c in _tma_loads(f)} == {"A", "B"}
    src = tilecute.compile(_expert_gemm(), target="sm_90a").get_kernel_source()
    assert "tct.load(A_desc" in src and "tct.load(B_desc" in src
    assert "copy_async" not in src
    producer = src[src.index("if tc_tx >= 128:"):src.index("tct.load(A_desc")]
    assert "if rows[by % 8] > 0:" in producer  # (the producer decides the `if` too)


def test_large_grid_gets_the_tma_software_pipeline_in_the_if():
    """1024 blocks (no producer warpgroup by default): the loop is pipelined with TMA in
    place under the `if` (prologue loads, mbarrier waits), not with cp.async."""
    prog = _expert_gemm(M=4096, N=4096)
    f = run_passes(prog, "sm_90a", {})
    k = f.kernels[0]
    assert k.producer_threads == 0
    (guard,) = [s for s in k.body if isinstance(s, N.If) and any(
        isinstance(t, N.For) and t.kind == "pipelined" for t in walk_stmts(s.then))]
    assert {c.src.buffer for c in _tma_loads(f)} == {"A", "B"}
    assert all(any(c is t for t in walk_stmts(guard.then)) for c in _tma_loads(f))
    assert any(isinstance(t, N.MBarrierWait) for t in walk_stmts(guard.then))
    src = tilecute.compile(prog, target="sm_90a").get_kernel_source()
    assert "tct.load(A_desc" in src and "copy_async" not in src


def test_option_and_program_still_choose_cp_async():
    """disable_tma keeps the cp.async pipeline; warp_specialize=False on a small grid
    gives the TMA software pipeline (no producer)."""
    src = tilecute.compile(_expert_gemm(), target="sm_90a",
                           options={"disable_tma": True}).get_kernel_source()
    assert "copy_async" in src and "tct.load(A_desc" not in src
    f = run_passes(_expert_gemm(ws=False), "sm_90a", {})
    assert f.kernels[0].producer_threads == 0
    assert {c.src.buffer for c in _tma_loads(f)} == {"A", "B"}


def test_an_if_some_threads_skip_keeps_its_copies():
    """An ``if`` on the thread index through a Let (``tx % 2 == 0``) is no block decision:
    the TMA issuer (thread 0) could be among the threads that skip it, and no block barrier
    can stand inside it, so its loop's copies are not made TMA loads."""
    @T.prim_func
    def odd_rows(A: T.Tensor((1024, 256), "float16"), B: T.Tensor((1024, 64), "float32")):
        with T.Kernel(8, threads=256) as bx:
            tx = T.get_thread_binding()
            a_s = T.alloc_shared((128, 64), "float16")
            if tx % 2 == 0:
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(A[bx * 128, k * 64], a_s)
                    for i in T.serial(64):
                        B[bx * 128 + tx // 2, i] += T.float32(a_s[tx // 2, i])

    f = run_passes(odd_rows, "sm_90a", {}, until="lower_copies_to_tma")
    assert not [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.TmaCopy)]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,ws", [(1024, 1024, 1024, None), (4096, 2048, 512, None),
                                      (1024, 512, 1000, False)])
def test_expert_gemm_on_gpu(M, N, K, ws):
    import torch

    torch.manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    rows = torch.tensor([5, 0, 3, 0, 0, 7, 1, 0], device="cuda", dtype=torch.int32)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    tilecute.compile(_expert_gemm(M, N, K, ws=ws))(a, b, rows, c)
    ref = a.float() @ b.float()
    live = (rows.cpu()[torch.arange(M // 128) % 8] > 0).repeat_interleave(128).cuda()
    ref[~live] = 0
    torch.testing.assert_close(c.float(), ref, atol=2e-2, rtol=2e-3)
