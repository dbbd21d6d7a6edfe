"""A fragment of more than one dim written in a loop over the rows of a T.gemm
accumulator (``top[i, k] = arg[i]`` in a ``T.Parallel(M)`` loop inside a serial ``k`` loop:
a top-k over GEMM scores).  Only the threads holding a row run that row's iterations, so
the fragment cannot be every thread's whole copy (it was, and the other threads' copies
kept garbage: a silent wrong answer on its way out); it moves to shared memory, where each
row's holders write it and every thread reads it after a barrier."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def topk_of_scores(M=64, N=32, D=64, k=3, threads=128, reduce_out=False, view=False):
    """idx[r, :k] = the k columns of the largest scores Q K^T of row r, best first."""
    @T.prim_func
    def topk(Q: T.Tensor((M, D), T.float16), K: T.Tensor((N, D), T.float16),
             Idx: T.Tensor((M, k), T.int32), Best: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            q_s = T.alloc_shared((M, D), T.float16)
            k_s = T.alloc_shared((N, D), T.float16)
            sc = T.alloc_fragment((M, N), T.float32)
            mx = T.alloc_fragment((M,), T.float32)
            cand = T.alloc_fragment((M, N), T.int32)
            arg = T.alloc_fragment((M,), T.int32)
            top = T.alloc_fragment((M, k), T.int32)
            vals = T.alloc_fragment((M, k), T.float32)
            best = T.alloc_fragment((M,), T.float32)
            if view:
                top_flat = T.reshape(top, (M * k,))  # noqa: F841 (its registers are top's)
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
            for t in T.serial(k):
                T.reduce_max(sc, mx, dim=1)
                for i, j in T.Parallel(M, N):
                    cand[i, j] = T.if_then_else(sc[i, j] == mx[i], j, N)
                T.reduce_min(cand, arg, dim=1)
                for i in T.Parallel(M):
                    top[i, t] = arg[i]
                    vals[i, t] = mx[i]
                for i, j in T.Parallel(M, N):
                    if j == arg[i]:
                        sc[i, j] = -T.infinity(T.float32)
            T.copy(top, Idx)
            if reduce_out:
                T.reduce_sum(vals, best, dim=1)
            else:
                for i in T.Parallel(M):
                    best[i] = vals[i, 0]
            T.copy(best, Best)
    return topk


@pytest.mark.parametrize("reduce_out", [False, True])
def test_row_written_fragments_move_to_shared(tmp_path, reduce_out):
    lowered = run_passes(topk_of_scores(reduce_out=reduce_out), "sm_90a")
    scopes = {s.buffer.name: s.buffer.scope for s in walk_stmts(lowered.kernels[0].body)
              if isinstance(s, N.Allocate)}
    assert scopes["top"] == "shared" and scopes["vals"] == "shared"
    assert scopes["sc"] == "fragment"
    assert tilecute.build_cubin(topk_of_scores(reduce_out=reduce_out), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


def test_a_row_written_fragment_with_a_view_is_refused_by_name():
    from tilecute.transform.layout_inference import LayoutError
    with pytest.raises(LayoutError, match="fragment 'top' is written in a loop over the rows .* "
                                          "shares its registers with a view"):
        run_passes(topk_of_scores(view=True), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("threads, reduce_out", [(128, False), (256, False), (128, True)])
def test_topk_of_scores_on_gpu(threads, reduce_out):
    import torch
    torch.manual_seed(0)
    M, N, D, k = 64, 32, 64, 3
    q = torch.randn(M, D, device="cuda", dtype=torch.float16)
    kk = torch.randn(N, D, device="cuda", dtype=torch.float16)
    idx = torch.empty(M, k, device="cuda", dtype=torch.int32)
    best = torch.empty(M, device="cuda")
    tilecute.compile(topk_of_scores(M, N, D, k, threads, reduce_out))(q, kk, idx, best)
    sc = q.float() @ kk.float().t()
    ref = sc.topk(k, dim=1)
    got = sc.gather(1, idx.long())
    torch.testing.assert_close(got, ref.values, rtol=1e-3, atol=1e-3)  # (ties: equal scores)
    want = ref.values.sum(1) if reduce_out else ref.values[:, 0]
    torch.testing.assert_close(best, want, rtol=1e-3, atol=1e-3)
