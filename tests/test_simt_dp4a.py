"""An int8 x int8 -> int32 T.gemm that no tensor-core MMA serves here (an 8-row tile on
sm_90a: wgmma takes 64 rows a warpgroup, mma.sync 16 a warp) runs on CUDA cores reading four
K-consecutive bytes of each operand as one word, one ``dp4a`` per four products (as
TileLang's SIMT GEMMs use ``T.dp4a``); other int8 SIMT GEMMs keep scalar multiply-adds."""

import pytest

import tilecute
import tilecute.language as T


def int8_gemm(m=64, n=64, k=256, bm=8, bn=32, bk=128, threads=128, transpose_b=True):
    b_shape = (n, k) if transpose_b else (k, n)
    bs_shape = (bn, bk) if transpose_b else (bk, bn)

    @T.prim_func
    def mm(A: T.Tensor((m, k), "int8"), B: T.Tensor(b_shape, "int8"),
           C: T.Tensor((m, n), "int32")):
        with T.Kernel(n // bn, m // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_s = T.alloc_shared(bs_shape, "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            T.clear(acc)
            for ko in T.Pipelined(k // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                if transpose_b:
                    T.copy(B[bx * bn, ko * bk], b_s)
                else:
                    T.copy(B[ko * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=transpose_b)
            T.copy(acc, C[by * bm, bx * bn])

    return mm


def test_a_k_major_int8_simt_gemm_uses_dp4a(cache_dir, tmp_path):
    src = tilecute.compile(int8_gemm()).get_kernel_source()
    call = next(line for line in src.splitlines() if "tcm.gemm_simt(" in line)
    assert call.rstrip().endswith("packed=True)"), call
    built = tilecute.build_cubin(int8_gemm(), "sm_90a", out_dir=str(tmp_path))
    assert built.kernel_names


def test_an_mn_major_int8_simt_gemm_keeps_scalar_products(cache_dir):
    src = tilecute.compile(int8_gemm(transpose_b=False)).get_kernel_source()
    call = next(line for line in src.splitlines() if "tcm.gemm_simt(" in line)
    assert "packed" not in call, call


@pytest.mark.gpu
@pytest.mark.parametrize("transpose_b", [True, False])
def test_int8_simt_gemm_on_the_gpu(cache_dir, transpose_b):
    torch = pytest.importorskip("torch")
    a = torch.randint(-128, 128, (64, 256), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (64, 256), dtype=torch.int8, device="cuda")
    c = torch.empty(64, 64, dtype=torch.int32, device="cuda")
    bt = b if transpose_b else b.T.contiguous()
    tilecute.compile(int8_gemm(transpose_b=transpose_b))(a, bt, c)
    assert torch.equal(c.cpu(), (a.cpu().long() @ b.cpu().long().T).int())
