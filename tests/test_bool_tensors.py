"""Boolean tensors (block masks, as TileLang's block-sparse GEMM takes them): a bool is a
byte in global and shared memory (DLPack's and torch's layout; CuTe keeps 1-bit booleans
to registers), read as ``!= 0`` and written as 0/1."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.transform.pipeline import lower


def block_sparse(M=256, N=256, K=256, bm=128, bn=128, bk=32):
    @T.prim_func
    def block_sparse(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                     BlockMask: T.Tensor((M // bm, N // bn, K // bk), "bool"),
                     C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float")
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                if BlockMask[by, bx, k]:
                    T.copy(A[by * bm, k * bk], A_s)
                    T.copy(B[k * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return block_sparse


def mask_out(N=1024):
    @T.prim_func
    def mask_out(X: T.Tensor((N,), "float32"), Keep: T.Tensor((N,), "bool")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                Keep[bx * 256 + i] = X[bx * 256 + i] > 0.0
    return mask_out


def test_bool_memory_is_bytes():
    src = emit_cute(lower(block_sparse(), "sm_90a"))
    assert "cute.runtime.make_ptr(cutlass.Uint8, 0" in src
    assert "!= 0)" in src
    src = emit_cute(lower(mask_out(), "sm_90a"))
    assert "= cutlass.Uint8(" in src


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_block_sparse_builds(arch, tmp_path):
    assert tilecute.build_cubin(block_sparse(), arch, out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_block_sparse_matches_torch():
    import torch

    kernel = tilecute.compile(block_sparse())
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    mask = torch.rand(2, 2, 8, device="cuda") > 0.5
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    kernel(a, b, mask, c)
    ref = torch.zeros(256, 256, device="cuda")
    for i in range(2):
        for j in range(2):
            for k in range(8):
                if mask[i, j, k]:
                    ref[i*128:(i+1)*128, j*128:(j+1)*128] += (
                        a[i*128:(i+1)*128, k*32:(k+1)*32].float() @ b[k*32:(k+1)*32, j*128:(j+1)*128].float())
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=1e-2)
    keep = torch.zeros(1024, device="cuda", dtype=torch.bool)
    x = torch.randn(1024, device="cuda")
    tilecute.compile(mask_out())(x, keep)
    assert torch.equal(keep, x > 0)


def mask_logic(N=1000):
    """Conditions combined with TileLang's `&`, `|`, `^`, `~` (TVM's one-bit bool: logical),
    a condition against an integer (`&` of 0/1 and an int32), over a uint8 mask whose
    last block is partial (its loads are bounds-checked)."""
    @T.prim_func
    def mask_logic(X: T.Tensor((N,), "float32"), Mask: T.Tensor((N,), "uint8"),
                   Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            m = T.alloc_fragment((128,), "uint8")
            T.copy(Mask[bx * 128:(bx + 1) * 128], m)
            for i in T.Parallel(128):
                x = X[bx * 128 + i]
                Y[bx * 128 + i] = (
                    T.if_then_else(((m[i] != 0) & (x > 0.0)) | (x < -1.0), 1.0, 0.0)
                    + T.if_then_else((m[i] != 0) ^ (x > 0.0), 2.0, 0.0)
                    + T.if_then_else(~(m[i] != 0), 4.0, 0.0)
                    + T.cast((x > 0.5) & 3, "float32") * 8.0)
    return mask_logic


def test_bool_bitwise_operators_are_logical():
    text = mask_logic().script()
    assert "m[i] != T.uint8(0) and x > T.float32(0.0) or x < T.float32(-1.0)" in text  # & |
    assert "(m[i] != T.uint8(0)) != (x > T.float32(0.0))" in text  # ^ of two bools
    assert "not m[i] != T.uint8(0)" in text  # ~ of a bool
    # a bool against an integer: the bool becomes the int32's 0/1, `&` is the integer one
    assert 'T.Cast("int32", x > T.float32(0.5)) & 3' in text


def test_bool_bitwise_operators_build(tmp_path):
    src = emit_cute(lower(mask_logic(), "sm_90a"))
    # the partial block's uint8 loads keep the buffer's unsigned type on both paths
    assert "= cutlass.Uint8(Mask[" in src
    assert tilecute.build_cubin(mask_logic(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_bool_bitwise_operators_match_torch():
    import torch

    x = torch.randn(1000, device="cuda") * 2
    mask = torch.randint(0, 256, (1000,), device="cuda", dtype=torch.uint8)
    mask[::3] = 0
    y = torch.empty(1000, device="cuda")
    tilecute.compile(mask_logic())(x, mask, y)
    a, b = mask != 0, x > 0
    ref = (((a & b) | (x < -1)).float() + 2 * (a ^ b).float() + 4 * (~a).float()
           + 8 * ((x > 0.5).int() & 3).float())
    torch.testing.assert_close(y, ref)
