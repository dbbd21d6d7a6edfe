"""A shared tile written before a loop that reads it in every step (Q copied by cp.async,
``disable_tma=True``, before flash attention's key loop) is ordered by one block barrier
before the loop, not by one in the loop's body that every step runs; where the body
needs its barrier for its own accesses anyway, none is added before the loop."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def scores(steps=16, rewrite=False):
    @T.prim_func
    def qk(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((steps * 64, 64), "float16"),
           O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((64, 64), "float16")
            K_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(Q, Q_s, disable_tma=True)
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=2):
                T.copy(K[k * 64, 0], K_s)
                if rewrite:  # the body writes the tile it reads: its own barrier each step
                    for i, j in T.Parallel(64, 64):
                        Q_s[i, j] = Q_s[i, j] * T.float16(0.5)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += S[i, j]
            T.copy(acc, O)
    return qk


def _split(func):
    # (without a producer warpgroup, which the loop's GEMM-then-registers body would get on
    # its one block: the barriers of the single-role pipeline are what these tests read)
    text = print_func(run_passes(func, "sm_90a", {"disable_warp_specialize": True},
                                 until="insert_barriers"))
    at = text.index("for k in T.Pipelined(")
    return text[:at], text[at:text.index("T.Parallel", text.index("T.gemm(", at))]


def test_the_tile_before_the_loop_is_ordered_before_it():
    before, body = _split(scores())
    assert before.rstrip().splitlines()[-1].strip() == "T.sync_threads(wait_async=True)"
    # the body keeps only the barrier before its refill (the stage read one step back)
    assert body.count("T.sync_threads(") == 1
    assert body.index("T.sync_threads(") < body.index("T.tma_copy(")


def test_no_barrier_before_a_loop_that_needs_its_own():
    before, body = _split(scores(rewrite=True))
    assert "T.sync_threads(" not in before.split("T.tma_copy(")[-1]
    assert body.count("T.sync_threads(") >= 2


def test_builds(tmp_path):
    assert tilecute.build_cubin(scores(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_matches_torch():
    import torch

    kernel = tilecute.compile(scores(), out_idx=[2])
    torch.manual_seed(0)
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(16 * 64, 64, device="cuda", dtype=torch.float16)
    ref = sum(q.float() @ k[i * 64:(i + 1) * 64].float().T for i in range(16))
    assert torch.allclose(kernel(q, k), ref, atol=1e-2, rtol=1e-3)
