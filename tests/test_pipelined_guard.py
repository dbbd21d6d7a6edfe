"""A ``T.Pipelined`` body that is one ``if`` each step decides by itself (a block-sparse
mask: ``if Mask[by, bx, k]:``) is software-pipelined like an unguarded one: the cp.async
copies of step ``k + S - 1`` are issued under that step's condition (empty groups where it
fails), the rest of the body runs under step ``k``'s.  TileLang pipelines such a loop too;
tilecute ran it with one buffer and no overlap (TileLang's block-sparse GEMM example at
0.66x TileLang's time).  Programs written for these tests in TileLang's idioms."""

import pytest
import torch

import tilecute
import tilecute.language as T


def masked_tiles_gemm(M=256, N=256, K=512, bm=64, bn=64, bk=32, stages=3, flag_in_body=False):
    @T.prim_func
    def bsgemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               Mask: T.Tensor((M // bm, N // bn, K // bk), "int8"), C: T.Tensor((M, N), "float32"),
               Used: T.Tensor((M // bm, N // bn), "int32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            seen = T.alloc_shared((1,), "int32")
            T.clear(acc)
            seen[0] = 0
            for k in T.Pipelined(K // bk, num_stages=stages):
                if (Mask[by, bx, k] != 0) if not flag_in_body else (seen[0] >= 0):
                    T.copy(A[by * bm, k * bk], a_s)
                    T.copy(B[k * bk, bx * bn], b_s)
                    T.gemm(a_s, b_s, acc)
                    if flag_in_body:
                        seen[0] = seen[0] + 1
            T.copy(acc, C[by * bm, bx * bn])
            Used[by, bx] = seen[0]

    return bsgemm


NO_PRODUCER = {"disable_warp_specialize": True}  # (the cp.async pipeline's tests)


def test_guarded_body_is_pipelined():
    src = tilecute.compile(masked_tiles_gemm(), target="sm_90a", options=NO_PRODUCER).get_kernel_source()
    # the refill of step k + 2 under that step's mask, the GEMM under step k's
    assert "if Mask[by, bx, k + 2] != cutlass.Int8(0):" in src, src
    assert "tc_a_s_stage" in src and "cute.arch.cp_async_wait_group(4)" in src, src


def test_guard_the_body_changes_is_not_pipelined():
    src = tilecute.compile(masked_tiles_gemm(flag_in_body=True), target="sm_90a").get_kernel_source()
    assert "tc_a_s_stage" not in src


def selected_tiles_gemm(M=128, N=128, K=512, nsel=6, bm=64, bn=64, bk=32, stages=2):
    """C = sum over the K tiles a row block lists (Idx[by, s], -1 for none) of A_k @ B_k:
    the step's tile is a Let read from the index tensor, the body guarded by it."""

    @T.prim_func
    def selgemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                Idx: T.Tensor((M // bm, nsel), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for s in T.Pipelined(nsel, num_stages=stages):
                kb = Idx[by, s]
                if kb >= 0:
                    T.copy(A[by * bm, kb * bk], a_s)
                    T.copy(B[kb * bk, bx * bn], b_s)
                    T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return selgemm


def test_guard_through_the_steps_let_is_pipelined():
    src = tilecute.compile(selected_tiles_gemm(), target="sm_90a", options=NO_PRODUCER).get_kernel_source()
    assert "if Idx[by, s + 1] >= 0:" in src, src
    assert "tc_a_s_stage" in src


def test_guarded_body_gets_a_producer_warpgroup():
    """Where the block is alone on its SM (16 blocks), the guarded loop gets TileLang's
    schedule: a producer warpgroup issues the TMA loads of the steps whose mask is set, and
    both roles count only those steps (a skipped step takes 1 off the count), so the
    stages and mbarrier phases follow the loads; no cp.async, no block barrier a step."""
    src = tilecute.compile(masked_tiles_gemm(), target="sm_90a").get_kernel_source()
    assert "block=[256, 1, 1]" in src and "cp_async" not in src, src
    producer = src[src.index("if tc_tx >= 128:"):src.index("    else:\n        cute.arch.setmaxregister_increase")]
    assert "if Mask[by, bx, tc_j0] != cutlass.Int8(0):" in producer, producer
    assert producer.count("tct.load(") == 2 and "tc_pbase0[0] = tc_pbase0[0] - 1" in producer, producer
    loop = src[src.index("for k in cutlass.range(0, 16):"):]
    assert "if Mask[by, bx, k] != cutlass.Int8(0):" in loop, loop
    assert "tct.wait(tc_bar0 + ((tc_cbase0[0] + k) - (tc_cbase0[0] + k) // 3 * 3), (tc_cbase0[0] + k) // 3 & 1)" \
        in loop, loop
    assert "tc_cbase0[0] = tc_cbase0[0] - 1" in loop and "sync_threads" not in loop, loop
    # the GEMM reads the stage of the steps that loaded
    assert "tcm.operand(tc_smem + cute.assume(0 + ((tc_cbase0[0] + k) % 3) * 4096" in loop, loop


def test_guard_through_the_steps_let_gets_a_producer_warpgroup():
    """The guard read through the step's Let (``kb = Idx[by, s]; if kb >= 0:``): the
    producer reads it for each step (the Let inlined), the compute warpgroups keep it."""
    src = tilecute.compile(selected_tiles_gemm(), target="sm_90a").get_kernel_source()
    assert "if Idx[by, tc_j0] >= 0:" in src and "tc_origin0 = Idx[by, tc_j0]" in src, src
    assert "(tc_origin0 * 32, by * 64)" in src, src
    assert "kb = Idx[by, s]\n            if kb >= 0:" in src, src
    assert "cp_async" not in src


def test_guarded_loop_of_a_large_grid_keeps_the_async_pipeline():
    """A grid of more blocks than SMs gets no producer warpgroup by default (its
    occupancy): the guarded branch's loads are put back as copies, pipelined by cp.async."""
    src = tilecute.compile(masked_tiles_gemm(M=2048, N=2048), target="sm_90a").get_kernel_source()
    assert "tct.load(" not in src and "block=[128, 1, 1]" in src, src
    assert ", k + 2] != cutlass.Int8(0):" in src and "tc_a_s_stage" in src, src  # (its block order: by1, bx1)


def test_a_guard_the_body_changes_gets_no_producer():
    """A guard reading what the body writes (shared memory) holds only for its own step:
    its loads stay copies, the loop keeps one buffer."""
    src = tilecute.compile(masked_tiles_gemm(flag_in_body=True), target="sm_90a").get_kernel_source()
    assert "tct.load(" not in src and "block=[128, 1, 1]" in src, src


def _reference(a, b, mask, bm, bn, bk):
    M, K = a.shape
    N = b.shape[1]
    keep = mask.bool().repeat_interleave(bm, 0).repeat_interleave(bn, 1)  # (M, N, K // bk)
    out = torch.zeros(M, N, device=a.device)
    for k in range(K // bk):
        part = a[:, k * bk:(k + 1) * bk].float() @ b[k * bk:(k + 1) * bk].float()
        out += torch.where(keep[:, :, k], part, torch.zeros_like(part))
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("options", [None, NO_PRODUCER], ids=["producer", "cp_async"])
@pytest.mark.parametrize("stages", [2, 3])
def test_masked_tiles_gemm_gpu(stages, options):
    torch.manual_seed(0)
    M, N, K, bm, bn, bk = 256, 256, 512, 64, 64, 32
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    mask = (torch.rand(M // bm, N // bn, K // bk, device="cuda") > 0.5).to(torch.int8)
    mask[0, 0] = 0  # a tile with no step at all
    c = torch.empty(M, N, device="cuda")
    used = torch.empty(M // bm, N // bn, device="cuda", dtype=torch.int32)
    tilecute.compile(masked_tiles_gemm(M, N, K, bm, bn, bk, stages), options=options)(a, b, mask, c, used)
    torch.testing.assert_close(c, _reference(a, b, mask, bm, bn, bk), atol=1e-2, rtol=1e-3)
    assert (c[:bm, :bn] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("options", [None, NO_PRODUCER], ids=["producer", "cp_async"])
def test_selected_tiles_gemm_gpu(options):
    torch.manual_seed(0)
    M, N, K, nsel, bm, bn, bk = 128, 128, 512, 6, 64, 64, 32
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    idx = torch.tensor([[3, -1, 0, 15, -1, 7], [-1, -1, -1, -1, -1, -1]], device="cuda", dtype=torch.int32)
    c = torch.empty(M, N, device="cuda")
    tilecute.compile(selected_tiles_gemm(M, N, K, nsel, bm, bn, bk), options=options)(a, b, idx, c)
    ref = torch.zeros(M, N, device="cuda")
    for r in range(M // bm):
        for t in idx[r].tolist():
            if t >= 0:
                ref[r * bm:(r + 1) * bm] += a[r * bm:(r + 1) * bm, t * bk:(t + 1) * bk].float() @ \
                    b[t * bk:(t + 1) * bk].float()
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-3)


def test_a_guard_of_the_thread_index_is_not_pipelined():
    """A guard each thread decides for itself would put the refill's barrier in a branch
    some threads skip: such a loop keeps one buffer."""
    M, K, bm, bk = 128, 256, 64, 32

    @T.prim_func
    def per_thread(A: T.Tensor((M, K), "float16"), C: T.Tensor((M, bk), "float32")):
        with T.Kernel(M // bm, threads=128) as by:
            tx = T.get_thread_binding()
            a_s = T.alloc_shared((bm, bk), "float16")
            acc = T.alloc_fragment((bm, bk), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                if (tx + k) % 2 >= 0:
                    T.copy(A[by * bm, k * bk], a_s)
                    for i, j in T.Parallel(bm, bk):
                        acc[i, j] += a_s[i, j]
            T.copy(acc, C[by * bm, 0])

    from tilecute.transform.pipeline import run_passes
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts
    out = run_passes(per_thread, "sm_90a", until="pipeline_async_copies")
    stages = {s.buffer.name: s.stages for s in walk_stmts(out.kernels[0].body) if isinstance(s, N.Allocate)}
    assert stages["a_s"] == 1, stages
