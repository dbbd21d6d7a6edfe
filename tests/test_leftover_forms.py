"""Four TileLang forms tilecute refused or could misread, honored with TileLang 0.1.15's
meaning (or refused by name where it cannot be):

1. ``T.Pipelined(n, num_stages=S, order=..., stage=...)`` with ``S != max(stage) + 1``:
   TileLang's ``num_stages`` annotation is the depth override (its sm_90 lowering keeps S
   buffers and barrier pairs whatever the stage list says, ``stage=[0, 0, 0]`` included;
   sm_80's keeps ``max(stage) + 1``: the same values); tilecute builds an S-deep pipeline.
2. ``old = T.atomic_add(x[i], v, return_prev=True)`` in a nest over an MMA row / column
   fragment: one atomic per logical element, its old value seen by every thread holding
   the row (column).
3. ``float8_e8m0fnu``: MX scale factors, a storage dtype (buffers, copies, casts to and
   from float32: 2^(e - 127), 0xFF NaN).
4. ``T.mbarrier_wait_parity`` / ``T.barrier_wait`` on sm_80 (``mbarrier.test_wait`` spins).

CPU: each builds a cubin and the generated source shows the meaning; GPU: torch references."""

import pytest
import torch

import tilecute
import tilecute as tilelang
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


# ---- 1. num_stages beside stage= ---------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def staged_gemm(M=256, N=192, K=512, bm=64, bn=64, bk=32, ns=3, stage=(0, 0, 1)):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bk, bn), T.float16)
            c = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c)
            for k in T.Pipelined(K // bk, num_stages=ns, order=[0, 1, 2], stage=list(stage)):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[-1])
def staged_scale_rows(M=512, N=128, bm=32, ns=4):
    """A copy-only pipeline: the load in stage 0, the scaled store in stage 1, four buffers
    deep (num_stages=4 overrides max(stage) + 1 = 2)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128):
            xs = T.alloc_shared((bm, N), T.float32)
            for r in T.Pipelined(T.ceildiv(M, bm), num_stages=ns, stage=[0, 1]):
                T.copy(X[r * bm, 0], xs)
                for i, j in T.Parallel(bm, N):
                    Y[r * bm + i, j] = xs[i, j] * 3.0 + r
    return main


@pytest.mark.parametrize("ns, stage, depth", [(3, (0, 0, 1), 3), (4, (0, 0, 1), 4),
                                              (3, (0, 0, 0), 3), (0, (0, 0, 1), 2),
                                              (2, (0, 0, 2), 2)])
def test_num_stages_is_the_depth_beside_stage(ns, stage, depth):
    """TileLang 0.1.15 on sm_90a: num_stages=S keeps S buffers (S mbarrier pairs) for
    stage=[0, 0, 1] and [0, 0, 0] alike; without num_stages (0: no annotation) the depth is
    max(stage) + 1.  tilecute refused S != max(stage) + 1."""
    kern = staged_gemm(ns=ns, stage=stage)
    src = kern.get_kernel_source()
    assert f"# a: {depth} stages of 2048 float16" in src
    assert f"# b: {depth} stages of 2048 float16" in src
    assert kern.ensure_cubin()


def test_num_stages_depth_on_sm80_cp_async():
    kern = tilecute.compile(staged_gemm.func.get_tir(ns=3, stage=(0, 0, 1)), target="sm_80")
    src = kern.get_kernel_source()
    assert "# a: 3 stages" in src and "wgmma" not in src
    assert kern.ensure_cubin()


def test_num_stages_depth_copy_pipeline():
    kern = staged_scale_rows()
    assert "4 stages" in kern.get_kernel_source()
    assert kern.ensure_cubin()


def test_one_stage_with_late_copies_is_refused_by_name():
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"num_stages=1 with order=\(2, 0, 1\): the order "
                                            r"issues copies after the step's other statements"):
        @T.prim_func
        def k(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float16"),
              C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                a_s = T.alloc_shared((64, 64), "float16")
                b_s = T.alloc_shared((64, 64), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                T.clear(acc)
                T.copy(B, b_s)
                for k in T.Pipelined(4, num_stages=1, order=[2, 0, 1], stage=[0, 2, 2]):
                    T.copy(A[k * 64, 0], a_s)
                    T.gemm(a_s, b_s, acc)
                    T.copy(acc, C)


@pytest.mark.gpu
@pytest.mark.parametrize("ns, stage", [(3, (0, 0, 1)), (4, (0, 0, 0)), (1, (0, 0, 1))])
def test_staged_gemm_gpu(ns, stage):
    torch.manual_seed(0)
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 192, device="cuda", dtype=torch.float16)
    c = staged_gemm(ns=ns, stage=stage)(a, b)
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_staged_scale_rows_gpu():
    x = torch.randn(512, 128, device="cuda")
    y = staged_scale_rows()(x)
    r = torch.arange(512, device="cuda").div(32, rounding_mode="floor")[:, None].float()
    torch.testing.assert_close(y, x * 3.0 + r)
