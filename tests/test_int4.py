"""TileLang's ``T.int4``: two's-complement 4-bit integers, two a byte (element ``j`` of a
row the low nibble of byte ``j // 2`` when ``j`` is even), bound from int8 / uint8
tensors whose last dim counts bytes, as TileLang packs them.  Values are loaded, stored,
copied, selected and cast (to int32 and on); ``T.gemm`` multiplies int4 x int4 into int32
on warp ``mma.sync`` m16n8k64 (sm_80+; no wgmma takes int4, so sm_90a uses it too)."""

import re

import pytest

import tilecute
import tilecute.language as T


def int4_gemm(M, N, K, block_M, block_N, block_K, threads=128, stages=3, a_dtype=T.int4,
              b_dtype=T.int4):
    @T.prim_func
    def gemm_s4(A: T.Tensor((M, K), a_dtype), B: T.Tensor((N, K), b_dtype),
                C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), a_dtype)
            B_s = T.alloc_shared((block_N, block_K), b_dtype)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return gemm_s4


def int4_elementwise(M=64, N=128):
    @T.prim_func
    def widen(A: T.Tensor((M, N), T.int4), W: T.Tensor((M, N), T.int32),
              P: T.Tensor((M, N), T.int4)):
        with T.Kernel(M, threads=64) as bx:
            for j in T.Parallel(N):
                W[bx, j] = T.cast(A[bx, j], "int32") * 3
                P[bx, j] = T.cast(T.cast(A[bx, j], "int32") + 1, "int4")  # 7 + 1 wraps to -8
    return widen


def w4a16_gemm(M=256, N=256, K=512, bm=64, bn=64, bk=64, threads=128):
    """int4 weights with a scale per output channel, dequantized in registers to float16
    (a shared int4 tile copied into an int4 fragment, cast, staged) for a float16 T.gemm."""
    @T.prim_func
    def w4a16(A: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.int4),
              S: T.Tensor((N,), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            Wq_s = T.alloc_shared((bn, bk), T.int4)
            Wq_f = T.alloc_fragment((bn, bk), T.int4)
            W_f = T.alloc_fragment((bn, bk), T.float16)
            W_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(W[bx * bn, k * bk], Wq_s)
                T.copy(Wq_s, Wq_f)
                for i, j in T.Parallel(bn, bk):
                    W_f[i, j] = T.cast(Wq_f[i, j], "float16") * S[bx * bn + i]
                T.copy(W_f, W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return w4a16


def test_w4a16_dequant_unpacks_bytes_in_registers():
    kernel = tilecute.compile(w4a16_gemm())
    src = kernel.get_kernel_source()
    assert "tcfp4.unpack(" in src and "cutlass.Float16(tcfp4.decode_int4(" in src
    kernel.ensure_cubin()


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_int4_gemm_runs_on_mma_sync(arch):
    kernel = tilecute.compile(int4_gemm(256, 256, 512, 128, 128, 64), target=arch)
    src = kernel.get_kernel_source()
    assert 'tcm.tiled_mma("mma", cutlass.Int4, cutlass.Int4, cutlass.Int32' in src
    assert "tcm.gemm_warp(" in src and "gemm_simt" not in src
    # int4 tiles move as bytes: 16-byte cp.async pieces, 32 elements each
    assert "tcc.copy_async(" in src and "// 2, divby=16), cute.make_layout(16)" in src
    kernel.ensure_cubin()


@pytest.mark.parametrize("a_dtype, b_dtype, kinds", [(T.uint4, T.uint4, "u4.u4"),
                                                     (T.int4, T.uint4, "s4.u4"),
                                                     (T.int4, T.int4, "s4.s4")])
def test_uint4_gemm_names_its_operand_kinds(a_dtype, b_dtype, kinds, tmp_path, monkeypatch):
    """The PTX multiplies on mma.sync m16n8k64 of the operands' signedness."""
    import cutlass.cute as cute

    from tilecute.runtime.cubingen import import_source

    func = int4_gemm(128, 128, 256, 64, 64, 64, a_dtype=a_dtype, b_dtype=b_dtype)
    src = tilecute.compile(func).get_kernel_source()
    assert ("tcm.Uint4" in src) == ("u4" in kinds) and "cutlass.Uint4" not in src
    path = tmp_path / "kernel_cute.py"
    path.write_text(src)
    module = import_source(str(path), f"tilecute_uint4_{tmp_path.name}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptx = cute.compile(getattr(module, func.name), *module.placeholder_args(),
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    assert f"mma.sync.aligned.m16n8k64.row.col.s32.{kinds}.s32" in ptx


def test_int4_shared_operand_swizzle_counts_nibbles():
    """A 64-element int4 row is 32 bytes: TMA's 32-byte swizzle XORs byte bit 4 from bit 7,
    element bit 5 from bit 8."""
    src = tilecute.compile(int4_gemm(256, 256, 512, 128, 128, 64)).get_kernel_source()
    assert "((i3 * 64 + i4) ^ (((i3 * 64 + i4) >> 3) & 32)) // 2" in src


def test_int4_values_are_cast_to_compute():
    kernel = tilecute.compile(int4_elementwise())
    src = kernel.get_kernel_source()
    # (two elements a thread: one byte unpacked into two codes, two packed back)
    assert re.search(r"tcfp4\.decode_int4\(\w+\[\w+\]\) \* 3", src)
    assert "tcfp4.encode_int4(" in src and "tcfp4.unpack(" in src and "tcfp4.pack(" in src
    kernel.ensure_cubin()


def int4_constants(M=64, N=64):
    @T.prim_func
    def consts(A: T.Tensor((M, N), T.int4), B: T.Tensor((M, N), T.int4)):
        with T.Kernel(1, threads=64) as bx:
            f = T.alloc_fragment((M, N), T.int4)
            T.fill(f, -3)
            for i, j in T.Parallel(M, N):
                if T.cast(A[i, j], "int32") > 0:
                    B[i, j] = f[i, j]
                else:
                    B[i, j] = T.if_then_else(j % 2 == 0, 5, A[i, j])
    return consts


def test_int4_constants_are_their_codes():
    kernel = tilecute.compile(int4_constants())
    src = kernel.get_kernel_source()
    assert "cutlass.Uint8(13)" in src and "cutlass.Uint8(5)" in src  # (-3: 0b1101)
    kernel.ensure_cubin()


def test_int4_arithmetic_is_refused_by_name():
    with pytest.raises(Exception, match=r"add of int4 values.*cast them to int32"):
        @T.prim_func
        def add_int4(A: T.Tensor((64,), T.int4), B: T.Tensor((64,), T.int4)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    B[i] = A[i] + A[i]
        tilecute.compile(add_int4)


def test_int4_gemm_k_must_be_a_multiple_of_64():
    with pytest.raises(Exception, match=r"K = 32 is not a multiple of 64"):
        tilecute.compile(int4_gemm(128, 128, 256, 64, 64, 32))


def test_int4_gemm_needs_k_major_operands():
    @T.prim_func
    def mn_major(A: T.Tensor((128, 128), T.int4), B: T.Tensor((128, 128), T.int4),
                 C: T.Tensor((128, 128), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 128), T.int4)
            B_s = T.alloc_shared((128, 128), T.int4)
            acc = T.alloc_fragment((128, 128), T.int32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc)  # B (K, N): MN-major
            T.copy(acc, C)
    with pytest.raises(Exception, match=r"T.gemm on int4 operands runs on mma.sync only.*K-major"):
        tilecute.compile(mn_major)


def test_int4_reduce_is_refused_by_name():
    with pytest.raises(Exception, match=r"reduce int4 values after casting them to int32"):
        @T.prim_func
        def rowsum(A: T.Tensor((64, 64), T.int4), S: T.Tensor((64,), T.int32)):
            with T.Kernel(1, threads=64) as bx:
                a = T.alloc_fragment((64, 64), T.int4)
                s = T.alloc_fragment((64,), T.int4)
                T.copy(A, a)
                T.reduce_sum(a, s, dim=1)
                for i in T.Parallel(64):
                    S[i] = T.cast(s[i], "int32")
        tilecute.compile(rowsum)


def _pack(t):
    """Two int4 values a byte, element 2k in the low nibble (TileLang's packing)."""
    import torch
    t16 = t.to(torch.int16)
    return ((t16[..., ::2] & 0xF) | ((t16[..., 1::2] & 0xF) << 4)).to(torch.int8).contiguous()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 256, 512, 128, 128, 64), (128, 192, 256, 64, 64, 128),
                                   (512, 256, 1024, 128, 256, 64),
                                   (256, 256, 1024, 128, 128, 256, 256),  # 128-byte swizzle
                                   (128, 128, 256, 64, 64, 64, 32)])  # one warp
def test_int4_gemm_on_gpu(shape):
    import torch
    M, N, K = shape[:3]
    a = torch.randint(-8, 8, (M, K), dtype=torch.int8, device="cuda")
    b = torch.randint(-8, 8, (N, K), dtype=torch.int8, device="cuda")
    c = torch.empty(M, N, dtype=torch.int32, device="cuda")
    tilecute.compile(int4_gemm(*shape))(_pack(a), _pack(b), c)
    want = a.cpu().to(torch.int32) @ b.cpu().to(torch.int32).T
    assert torch.equal(c.cpu(), want)


@pytest.mark.gpu
def test_int4_elementwise_on_gpu():
    import torch
    a = torch.randint(-8, 8, (64, 128), dtype=torch.int8, device="cuda")
    w = torch.empty(64, 128, dtype=torch.int32, device="cuda")
    p = torch.zeros(64, 64, dtype=torch.int8, device="cuda")
    tilecute.compile(int4_elementwise())(_pack(a), w, p)
    assert torch.equal(w.cpu(), a.cpu().to(torch.int32) * 3)
    wrapped = ((a.cpu().to(torch.int32) + 1 + 8) % 16 - 8).to(torch.int8)
    assert torch.equal(p.cpu(), _pack(wrapped))


@pytest.mark.gpu
def test_w4a16_dequant_gemm_on_gpu():
    import torch
    g = torch.Generator().manual_seed(4)
    a = (torch.randn(256, 512, generator=g) / 8).half()
    w = torch.randint(-8, 8, (256, 512), generator=g, dtype=torch.int8)
    s = (torch.rand(256, generator=g) / 4 + 0.01).half()
    c = torch.empty(256, 256, dtype=torch.float16, device="cuda")
    tilecute.compile(w4a16_gemm())(a.cuda(), _pack(w).cuda(), s.cuda(), c)
    deq = (w.half() * s[:, None]).double()  # (the kernel's float16 products)
    want = a.double() @ deq.T
    torch.testing.assert_close(c.cpu().double(), want, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_int4_constants_on_gpu():
    import torch
    a = torch.randint(-8, 8, (64, 64), dtype=torch.int8)
    b = torch.zeros(64, 32, dtype=torch.int8, device="cuda")
    tilecute.compile(int4_constants())(_pack(a).cuda(), b)
    even = (torch.arange(64) % 2 == 0).view(1, 64)
    want = torch.where(a > 0, torch.full_like(a, -3), torch.where(even, torch.full_like(a, 5), a))
    assert torch.equal(b.cpu(), _pack(want))


@pytest.mark.gpu
@pytest.mark.parametrize("a_dtype, b_dtype", [(T.uint4, T.uint4), (T.int4, T.uint4), (T.uint4, T.int4)])
def test_uint4_gemm_on_gpu(a_dtype, b_dtype):
    import torch

    def values(dtype, shape):
        return torch.randint(0, 16, shape, dtype=torch.int16) if dtype == T.uint4 else \
            torch.randint(-8, 8, shape, dtype=torch.int16)
    a, b = values(a_dtype, (128, 256)), values(b_dtype, (192, 256))
    c = torch.empty(128, 192, dtype=torch.int32, device="cuda")
    kernel = tilecute.compile(int4_gemm(128, 192, 256, 64, 64, 64, a_dtype=a_dtype, b_dtype=b_dtype))
    kernel(_pack(a).cuda(), _pack(b).cuda(), c)
    assert torch.equal(c.cpu(), a.to(torch.int32) @ b.to(torch.int32).T)


@pytest.mark.gpu
def test_uint4_casts_on_gpu():
    import torch

    @T.prim_func
    def widen(A: T.Tensor((64, 64), T.uint4), W: T.Tensor((64, 64), T.int32),
              P: T.Tensor((64, 64), T.uint4)):
        with T.Kernel(64, threads=32) as bx:
            for j in T.Parallel(64):
                W[bx, j] = T.cast(A[bx, j], "int32") - 8
                P[bx, j] = T.cast(T.cast(A[bx, j], "int32") + 1, "uint4")  # 15 + 1 wraps to 0
    a = torch.randint(0, 16, (64, 64), dtype=torch.int16)
    w = torch.empty(64, 64, dtype=torch.int32, device="cuda")
    p = torch.zeros(64, 32, dtype=torch.int8, device="cuda")
    tilecute.compile(widen)(_pack(a).cuda(), w, p)
    assert torch.equal(w.cpu(), a.to(torch.int32) - 8)
    assert torch.equal(p.cpu(), _pack((a + 1) % 16))


def int4_bool_casts(M=64, N=64):
    @T.prim_func
    def flags(A: T.Tensor((M, N), T.int4), F: T.Tensor((M, N), T.bool), B: T.Tensor((M, N), T.uint4)):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, N):
                F[i, j] = T.cast(A[i, j], T.bool)  # nonzero
                B[i, j] = T.cast(T.cast(A[i, j], T.bool), T.uint4)  # 0 / 1
    return flags


def test_int4_bool_casts_are_integer_casts():
    """TileLang casts int4 to bool as any integer (nonzero) and bool to int4 as 0 / 1; they
    were refused ("a cast between int4 and bool")."""
    kernel = tilecute.compile(int4_bool_casts())
    src = kernel.get_kernel_source()
    assert re.search(r"\(tcfp4\.nibble\(A\[[^]]+\], [^)]+\) != 0\)", src)
    assert "tcfp4.encode_int4(cutlass.Int32(" in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_int4_bool_casts_on_gpu():
    import torch
    a = torch.randint(-8, 8, (64, 64), device="cuda")
    F = torch.empty(64, 64, dtype=torch.bool, device="cuda")
    B = torch.empty(64, 32, dtype=torch.uint8, device="cuda")
    tilecute.compile(int4_bool_casts())(_pack(a), F, B)
    assert torch.equal(F, a != 0)
    assert torch.equal(B.view(torch.int8), _pack((a != 0).long()))
