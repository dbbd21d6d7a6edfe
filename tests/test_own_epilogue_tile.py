"""A program's own GEMM epilogue tile (``C_s = T.alloc_shared((bm, bn), dtype)``,
``T.copy(acc, C_s)``, ``T.copy(C_s, C[...])``: TileLang's block-sparse GEMM example) gets the
TMA swizzle the staged epilogue gives its own tile (``shared_epilogue``): row-major, a warp's
register pairs met 8 rows in one bank group (8-way conflicts on every store).  Programs
written for these tests in TileLang's idioms."""

import pytest
import torch

import tilecute
import tilecute.language as T


def own_tile_gemm(M=256, N=256, K=256, bm=128, bn=128, bk=64, read_back=False):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16"), R: T.Tensor((N,), "float16")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            c_s = T.alloc_shared((bm, bn), "float16")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, c_s)
            T.copy(c_s, C[by * bm, bx * bn])
            if read_back:
                for j in T.Parallel(bn):
                    R[bx * bn + j] = c_s[0, j]
    return gemm


def test_own_epilogue_tile_is_swizzled():
    src = tilecute.compile(own_tile_gemm(), target="sm_90a").get_kernel_source()
    # two 64-column boxes with the 128-byte swizzle, as the staged epilogue stores its tile
    assert "C_desc = tct.placeholder(C_ptr, cutlass.Float16, (128, 64), 128)" in src, src
    assert "chunks=2, step=64" in src, src
    store = next(x for x in src.splitlines() if "c_s.iterator" in x)
    assert "^" in store, store  # the swizzled offset


def test_a_tile_threads_read_keeps_its_layout():
    """A tile some other statement reads (here a T.Parallel row read) is left to the
    layout pass, as before."""
    src = tilecute.compile(own_tile_gemm(read_back=True), target="sm_90a").get_kernel_source()
    assert "C_desc = tct.placeholder(C_ptr, cutlass.Float16, (128, 128), 0)" in src, src


@pytest.mark.gpu
def test_own_epilogue_tile_gpu():
    torch.manual_seed(0)
    a = torch.randn(256, 256, device="cuda").half()
    b = torch.randn(256, 256, device="cuda").half()
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    r = torch.empty(256, device="cuda", dtype=torch.float16)
    tilecute.compile(own_tile_gemm())(a, b, c, r)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=2e-2)
