"""A non-warp-specialized T.Pipelined loop with TMA loads whose step does work after its
last read of the loaded tiles (DeepSeek-style fp8 block scaling: the GEMM of the step into a
fresh accumulator, then the accumulator scaled into a running one) refills the step's own
stage with step k + S right after that read, and its prologue issues S steps
(backend/transform/software_pipeline.py); option ``disable_early_stage_refill`` keeps the
refill at the start of the step, S - 1 steps ahead.  CPU: where the refill goes, the cases
that keep the old form, sm_90a cubins.  GPU: the results against torch, every trip count
around the stage count, both forms."""

import pytest

import tilecute
import tilecute.language as T

NO_WS = {"disable_warp_specialize": True}  # (small grids get a producer warpgroup)
OFF = {**NO_WS, "disable_early_stage_refill": True}
GROUP = 128


def scaled_gemm(M=128, N=128, K=1024, block_N=128, stages=4, async_gemm=False, tail=True):
    """fp16 operands, one scale per row of A and 128 of K, one per 128 x 128 block of B,
    applied to the step's accumulator before it joins the running one.  ``tail``: work
    follows the GEMM (the promotion); without it the GEMM ends the step.  ``async_gemm``:
    the GEMM leaves its MMAs in flight (``wg_wait=-1``) and the program waits for them."""
    block_M, block_K = 64, GROUP
    nk = K // block_K

    @T.prim_func
    def scaled_gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
                    SA: T.Tensor((M, nk), "float32"), SB: T.Tensor((N // GROUP, nk), "float32"),
                    C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float16")
            b_s = T.alloc_shared((block_N, block_K), "float16")
            step = T.alloc_fragment((block_M, block_N), "float32")
            total = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(step)
            T.clear(total)
            for k in T.Pipelined(nk, num_stages=stages):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b_s)
                if async_gemm:
                    T.gemm(a_s, b_s, step, transpose_B=True, wg_wait=-1)
                    T.wait_wgmma(0)
                else:
                    T.gemm(a_s, b_s, step, transpose_B=True)
                if tail:
                    sb = SB[bx * block_N // GROUP, k]
                    for i, j in T.Parallel(block_M, block_N):
                        total[i, j] += step[i, j] * (SA[by * block_M + i, k] * sb)
                    T.clear(step)
            if tail:
                T.copy(total, C[by * block_M, bx * block_N])
            else:
                T.copy(step, C[by * block_M, bx * block_N])

    return scaled_gemm


def loop_of(func, options=NO_WS) -> str:
    src = tilecute.compile(func, target="sm_90a", options=options).get_kernel_source()
    return src[src.index("    for k in"):]


def prologue_loads(func, options=NO_WS) -> int:
    src = tilecute.compile(func, target="sm_90a", options=options).get_kernel_source()
    return src[:src.index("    for k in")].count("tct.load(")


def test_refill_follows_the_gemm_and_loads_s_steps_ahead():
    body = loop_of(scaled_gemm())
    gemm, refill = body.index("tcm.gemm("), body.index("if k + 4 < 8:")
    promote = body.index("total[")
    assert gemm < refill < promote
    # the step's own stage, step k + 4, after a block barrier that orders the step's reads
    head = body[refill:promote]
    assert "cute.arch.sync_threads()" in head
    assert "((k + 4) * 128" in head and "tc_bar0 + k % 4" in head
    assert prologue_loads(scaled_gemm()) == 2 * 4


def test_option_keeps_the_refill_at_the_step_start():
    body = loop_of(scaled_gemm(), OFF)
    assert body.index("if k + 3 < 8:") < body.index("tcm.gemm(")
    assert prologue_loads(scaled_gemm(), OFF) == 2 * 3


@pytest.mark.parametrize("case", ["gemm ends the step", "gemm left in flight"])
def test_forms_that_keep_the_step_start_refill(case):
    func = scaled_gemm(tail=False) if case == "gemm ends the step" else scaled_gemm(async_gemm=True)
    assert loop_of(func) == loop_of(func, OFF)


def test_short_loops_build(tmp_path):
    """Fewer steps than stages: the prologue's guarded loads, no refill at all."""
    for i, K in enumerate((128, 256, 512, 640)):
        func = scaled_gemm(K=K)
        info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / str(i)), options=NO_WS)
        assert info.kernel_names


def _reference(a, b, sa, sb):
    import torch
    K = a.shape[1]
    af = a.float() * sa.repeat_interleave(GROUP, dim=1)[:, :K]
    bf = b.float() * sb.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)[:, :K]
    return af @ bf.t()


@pytest.mark.gpu
@pytest.mark.parametrize("K", [128, 384, 512, 640, 2048])
@pytest.mark.parametrize("options", [NO_WS, OFF], ids=["after-read", "step-start"])
@pytest.mark.parametrize("stages", [2, 4])
def test_gpu_scaled_gemm(K, options, stages):
    import torch
    M, N = 192, 256
    torch.manual_seed(K + stages)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    sa = torch.rand(M, K // GROUP, device="cuda") + 0.5
    sb = torch.rand(N // GROUP, K // GROUP, device="cuda") + 0.5
    c = torch.empty(M, N, device="cuda")
    tilecute.compile(scaled_gemm(M, N, K, stages=stages), options=options)(a, b, sa, sb, c)
    torch.testing.assert_close(c, _reference(a, b, sa, sb), atol=2e-2 * K ** 0.5, rtol=1e-2)
