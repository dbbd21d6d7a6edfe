"""TileLang's earlier ``T.gemm(..., wg_wait=n)`` (its wgmma-pipelined attention examples
write ``wg_wait=-1`` and ``T.wait_wgmma``): on wgmma, ``wgmma.wait_group(n)`` after the
issue (at most ``n`` batches left in flight), no wait at all for -1; on mma.sync and SIMT
the GEMM completes in its statement and ``wg_wait`` is not read, as in TileLang (it was
refused unless 0 or 1).  ``T.wgmma_gemm`` keeps its rule (wgmma or an error).  A 16-bit
accumulator never stays in flight, whatever ``wg_wait`` says (CuTe DSL repacks it).  A
``T.wait_wgmma`` in a kernel with no wgmma GEMM waits for nothing (sm_80 has no
``wgmma.wait_group``)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


def gemm(wg_wait, acc=T.float32, wait_after=True, M=128, N_=128, K=128, wgmma=False):
    @T.prim_func
    def g(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N_), T.float16), C: T.Tensor((M, N_), acc)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), T.float16)
            b = T.alloc_shared((K, N_), T.float16)
            c = T.alloc_fragment((M, N_), acc)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            if wgmma:
                T.wgmma_gemm(a, b, c)
            else:
                T.gemm(a, b, c, wg_wait=wg_wait)
            if wait_after:
                T.wait_wgmma(0)
            T.copy(c, C)
    return g


def _src(func, arch="sm_90a"):
    return tilecute.compile(func, target=arch).get_kernel_source()


def _gemm_line(src):
    return next(ln.strip() for ln in src.splitlines() if ln.strip().startswith("tcm.gemm("))


def test_no_wait_issues_and_leaves_the_batch():
    f = gemm(-1)
    assert "clear_accum=False, wg_wait=-1)" in f.script()
    g = next(s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.Gemm))
    assert g.wg_wait == N.NO_WAIT and not g.wgmma_only
    src = _src(f)
    assert _gemm_line(src).endswith("wait=None)")
    assert "tcm.wait_batches(0)" in src


def test_a_count_above_one_is_the_wait_group():
    assert _gemm_line(_src(gemm(2))).endswith("wait=2)")


def test_other_families_complete_in_the_statement(tmp_path):
    """sm_80: mma.sync; the T.wait_wgmma waits for nothing and emits no wgmma.wait_group."""
    f = gemm(-1)
    src = _src(f, "sm_80")
    assert "tcm.gemm_warp(" in src and "wait_batches" not in src
    assert "# T.wait_wgmma(0): no wgmma batches in this kernel" in src
    assert tilecute.build_cubin(f, "sm_80", out_dir=str(tmp_path)).kernel_names


def test_wgmma_gemm_still_refuses_other_families():
    with pytest.raises(Exception, match=r"T.wgmma_gemm runs on wgmma only"):
        _src(gemm(0, wgmma=True), "sm_80")
    assert "T.wgmma_gemm(a, b, c, transpose_A=False" in gemm(0, wgmma=True).script()


def test_sixteen_bit_accumulators_wait_whatever_wg_wait_says():
    for w in (-1, 1, 2):
        assert "wait=" not in _gemm_line(_src(gemm(w, acc=T.float16)))


def test_a_wait_below_minus_one_is_refused_by_name():
    with pytest.raises(FrontendError, match=r"test_gemm_wg_wait.py:\d+: .*T.gemm: .*wg_wait=-2: a "
                                            r"count of wgmma batches left in flight"):
        gemm(-2)


def test_json_round_trip_keeps_the_flag():
    import json
    from tilecute.ir.serialize import from_dict, to_json
    for f in (gemm(-1), gemm(0, wgmma=True)):
        assert from_dict(json.loads(to_json(f))) == f
    assert "wgmma_only" not in to_json(gemm(-1)) and "wgmma_only" in to_json(gemm(0, wgmma=True))


@pytest.mark.parametrize("w", [-1, 2])
def test_builds_a_cubin(w, tmp_path):
    assert tilecute.build_cubin(gemm(w), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("w", [-1, 1, 2])
@pytest.mark.parametrize("wait_after", [True, False])
def test_results_on_gpu(w, wait_after):
    import torch
    A = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    B = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    C = torch.empty(128, 128, device="cuda")
    tilecute.compile(gemm(w, wait_after=wait_after))(A, B, C)
    torch.testing.assert_close(C, A.float() @ B.float(), atol=1e-2, rtol=1e-2)
