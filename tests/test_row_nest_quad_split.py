"""A nest over the rows of an MMA row fragment whose other loop only stores to shared or
global memory (a decode kernel rescaling the per-step maxima it kept in shared memory by
the final row maximum) splits that loop among the four lanes of the quad holding the row:
each element is written once, by one lane, a quarter of the work each.  A body that writes
a fragment, or a loop extent not a multiple of 4, keeps every holder running it whole."""

import pytest
import torch

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def rescaled_steps(bm=64, bn=64, dim=64, cols=64, extra=32):
    """Row maxima of S = Q K^T (an accumulator's row fragment ``m``); a shared tile of
    per-row values (``cols`` wide) rescaled by them in place, and an ``extra``-wide
    global block written from them directly."""

    @T.prim_func
    def rescale(Q: T.Tensor((bm, dim), "float16"), K: T.Tensor((bn, dim), "float16"),
                X: T.Tensor((bm, cols), "float32"), Y: T.Tensor((bm, cols), "float32"),
                Z: T.Tensor((bm, extra), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((bm, dim), "float16")
            K_s = T.alloc_shared((bn, dim), "float16")
            X_s = T.alloc_shared((bm, cols), "float32")
            S = T.alloc_fragment((bm, bn), "float32")
            m = T.alloc_fragment((bm,), "float32")
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.copy(X, X_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            T.reduce_max(S, m, dim=1)
            for h, c in T.Parallel(bm, cols):
                X_s[h, c] = T.exp2(X_s[h, c] - m[h]) / (m[h] + 100.0)
            for h, c in T.Parallel(bm, extra):
                Z[h, c] = m[h] * c
            T.copy(X_s, Y)

    return rescale


def _source(**kw):
    return tilecute.compile(rescaled_steps(**kw), out_idx=[3, 4]).get_kernel_source()


def test_each_lane_of_the_quad_takes_every_fourth_column():
    src = _source()
    assert src.count("cute.arch.lane_idx() % 4") == 2  # both nests
    assert "cutlass.range_constexpr(16):" in src and "cutlass.range_constexpr(8):" in src


def test_an_extent_not_a_multiple_of_four_is_run_whole():
    src = _source(extra=30)
    assert src.count("cute.arch.lane_idx() % 4") == 1  # the shared tile's nest only
    assert "in cutlass.range(0, 30):" in src


def test_a_body_with_an_atomic_is_run_whole():
    """(its atomics run in the row's first holder, once per element, as before)"""
    @T.prim_func
    def tally(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"),
              Y: T.Tensor((64, 4), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((64, 64), "float16")
            K_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            T.reduce_max(S, m, dim=1)
            for h, c in T.Parallel(64, 8):
                T.atomic_add(Y[h, c % 4], m[h])

    src = tilecute.compile(tally).get_kernel_source()
    assert "lane_idx() % 4" not in src and "tca.atomic_add(" in src


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [32, 30])
def test_quad_split_rows_on_gpu(extra):
    torch.manual_seed(0)
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    x = torch.randn(64, 64, device="cuda")
    y, z = tilecute.compile(rescaled_steps(extra=extra), out_idx=[3, 4])(q, k, x)
    m = (q.float() @ k.float().T).amax(dim=1, keepdim=True)
    torch.testing.assert_close(y, torch.exp2(x - m) / (m + 100.0), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(z, m * torch.arange(extra, device="cuda"), rtol=1e-6, atol=1e-5)
