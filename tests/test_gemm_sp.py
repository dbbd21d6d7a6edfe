"""TileLang's ``T.gemm_sp`` (2:4 structured-sparse A, compressed, with its metadata; 1:2 for
float32, TileLang's tf32 ``mma.sp``) as a dense GEMM of the decompressed tile: tilecute has
no sparse MMA, and the product is the same.  The metadata is TileLang's natural row-major layout (``compress`` of its gemm_sp
example, and ``tilelang.cuda.intrinsics.sparse_layout``'s factors)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.cuda.intrinsics.sparse_layout import get_e_factor
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def sparse_matmul(M=256, N=256, K=256, bm=128, bn=128, bk=64, dtype="float16",
                  e_dtype="int16", accum="float32", stages=2, threads=128, trans_b=False):
    e = get_e_factor(dtype, e_dtype)
    b_shape = (N, K) if trans_b else (K, N)
    b_tile = (bn, bk) if trans_b else (bk, bn)

    @T.prim_func
    def spmm(A_sparse: T.Tensor((M, K // 2), dtype), E: T.Tensor((M, K // e), e_dtype),
             B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk // 2), dtype)
            E_s = T.alloc_shared((bm, bk // e), e_dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((bm, bn), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A_sparse[by * bm, k * bk // 2], A_s)
                T.copy(E[by * bm, k * bk // e], E_s)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm_sp(A_s, E_s, B_s, C_f, transpose_B=trans_b)
            T.copy(C_f, C[by * bm, bx * bn])
    return spmm


def compress(dense, e_dtype):
    """2:4 compression with natural row-major metadata (TileLang's encoding): per group
    of four the two kept values and their positions (bits 0-1, 2-3 of a 4-bit field)."""
    import torch

    m, k = dense.shape
    groups = dense.view(m, k // 4, 4)
    nz = groups != 0
    pos = torch.sort((~nz).to(torch.int8) * 4 + torch.arange(4, device=dense.device), dim=-1).values[..., :2] % 4
    kept = groups.gather(-1, pos.long()).reshape(m, k // 2)
    fields = pos[..., 0].long() | (pos[..., 1].long() << 2)
    per = {torch.int16: 4, torch.int32: 8, torch.int8: 2}[e_dtype]
    fields = fields.view(m, k // (4 * per), per)
    meta = sum(fields[..., j] << (4 * j) for j in range(per))
    bits = {torch.int16: 16, torch.int32: 32, torch.int8: 8}[e_dtype]
    meta = torch.where(meta >= 1 << (bits - 1), meta - (1 << bits), meta)
    return kept.contiguous(), meta.to(e_dtype).contiguous()


def test_gemm_sp_is_a_dense_gemm_of_the_decompressed_tile(tmp_path):
    func = sparse_matmul()
    body = list(walk_stmts(func.kernels[0].body))
    dense = [s.buffer for s in body if isinstance(s, N.Allocate) and s.buffer.name.endswith("_dense")]
    assert [(b.shape, b.scope) for b in dense] == [((N.Const(128, "int32"), N.Const(64, "int32")), "shared")]
    gemm = next(s for s in body if isinstance(s, N.Gemm))
    assert gemm.a == dense[0].name and gemm.b == "B_s"
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    assert tilecute.build_cubin(sparse_matmul(dtype="bfloat16", trans_b=True), "sm_90a",
                                out_dir=str(tmp_path / "b")).kernel_names
    assert tilecute.build_cubin(sparse_matmul(dtype="int8", e_dtype="int32", accum="int32", bk=128),
                                "sm_90a", out_dir=str(tmp_path / "c")).kernel_names


def _one_tile(dtype, e_cols, acc="float32"):
    """One (128, 64) x (64, 128) T.gemm_sp of shared tiles, ``e_cols`` int16 metadata columns."""
    @T.prim_func
    def one_tile(A: T.Tensor((128, 32), dtype)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((128, 32), dtype)
            E_s = T.alloc_shared((128, e_cols), T.int16)
            B_s = T.alloc_shared((64, 128), dtype)
            C_f = T.alloc_fragment((128, 128), acc)
            T.gemm_sp(A_s, E_s, B_s, C_f)
    return one_tile


def test_gemm_sp_refusals_name_the_argument():
    with pytest.raises(FrontendError, match=r"T.gemm_sp: 'E_s' has shape \(128, 8\);"):
        _one_tile(T.float16, 8)  # 64 // 16 = 4 columns
    with pytest.raises(FrontendError, match=r"T.gemm_sp: 'A_s' is float64"):
        _one_tile(T.float64, 4, T.float64)
    # float32 is 1:2: an int16 indexes 8 values, so K = 64 has 8 columns of metadata
    with pytest.raises(FrontendError, match=r"'E_s' has shape \(128, 4\); 128 rows of K = 64 "
                                            r"\(32 groups of 2, 4 per int16\) need \(128, 8\)"):
        _one_tile(T.float32, 4)


# ---- float32: TileLang's 1:2 sparsity (tf32 mma.sp) ----------------------------------------
def compress32(dense, e_dtype):
    """1:2 compression of float32 with TileLang's metadata: per pair the kept value, and a
    4-bit field naming the 16-bit halves it fills (0b0100: the first, 0b1110: the second)."""
    import torch

    m, k = dense.shape
    pairs = dense.view(m, k // 2, 2)
    second = (pairs[..., 0] == 0) & (pairs[..., 1] != 0)
    kept = torch.where(second, pairs[..., 1], pairs[..., 0]).contiguous()
    fields = torch.where(second, 0b1110, 0b0100).long()
    per = {torch.int16: 4, torch.int32: 8, torch.int8: 2}[e_dtype]
    fields = fields.view(m, k // (2 * per), per)
    meta = sum(fields[..., j] << (4 * j) for j in range(per))
    bits = {torch.int16: 16, torch.int32: 32, torch.int8: 8}[e_dtype]
    meta = torch.where(meta >= 1 << (bits - 1), meta - (1 << bits), meta)
    return kept, meta.to(e_dtype).contiguous()


def half_sparse(m, k, device="cpu"):
    import torch

    a = torch.randn(m, k, device=device)
    a.view(m, k // 2, 2).scatter_(-1, torch.randint(0, 2, (m, k // 2, 1), device=device), 0)
    return a


def test_gemm_sp_float32_decompresses_one_of_two(tmp_path):
    func = sparse_matmul(dtype="float32", e_dtype="int16", trans_b=True, bk=32)
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    # one kept value a pair, placed by bit 1 of its field, then a tf32 mma.sync GEMM
    assert "(sp_field & 3) >> 1 == 0, sp_value" in src and "(sp_field & 3) >> 1 == 1" in src
    assert "sp_second" not in src and "cutlass.TFloat32" in src
    for i, kw in enumerate([dict(trans_b=False, bk=32), dict(e_dtype="int32", bk=64),
                            dict(e_dtype="int8", bk=32, trans_b=True)]):
        f = sparse_matmul(dtype="float32", **{"e_dtype": "int16", **kw})
        assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / str(i))).kernel_names


def test_compress32_round_trips_on_cpu():
    import torch

    torch.manual_seed(0)
    a = half_sparse(8, 64)
    kept, meta = compress32(a, torch.int16)
    fields = torch.stack([(meta.long() >> (4 * j)) & 15 for j in range(4)], -1).view(8, 32)
    back = torch.zeros(8, 32, 2)
    back.scatter_(-1, ((fields & 3) >> 1).unsqueeze(-1), kept.unsqueeze(-1))
    assert torch.equal(back.view(8, 64), a)


@pytest.mark.gpu
@pytest.mark.parametrize("e_dtype,trans_b,bk", [("int16", True, 32), ("int16", False, 32),
                                                ("int32", True, 64)])
def test_gemm_sp_float32_matches_torch(e_dtype, trans_b, bk):
    import torch

    torch.manual_seed(2)
    a = half_sparse(256, 256, "cuda")
    b = torch.randn(256, 256, device="cuda")
    kept, meta = compress32(a, getattr(torch, e_dtype))
    c = torch.empty(256, 256, device="cuda")
    kernel = tilecute.compile(sparse_matmul(dtype="float32", e_dtype=e_dtype, trans_b=trans_b,
                                            bk=bk))
    kernel(kept, meta, b.t().contiguous() if trans_b else b, c)
    torch.testing.assert_close(c, a @ b, rtol=2e-2, atol=5e-2)  # tf32 products


def test_compress_round_trips_on_cpu():
    import torch

    torch.manual_seed(0)
    a = torch.randn(8, 64)
    a.view(8, 16, 4).scatter_(-1, torch.rand(8, 16, 4).topk(2, dim=-1).indices, 0)
    kept, meta = compress(a, torch.int16)
    fields = torch.stack([(meta.long() >> (4 * j)) & 15 for j in range(4)], -1).view(8, 16)
    back = torch.zeros(8, 16, 4)
    back.scatter_(-1, (fields & 3).unsqueeze(-1), kept.view(8, 16, 2)[..., :1])
    back.scatter_(-1, ((fields >> 2) & 3).unsqueeze(-1), kept.view(8, 16, 2)[..., 1:])
    assert torch.equal(back.view(8, 64), a)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,e_dtype,trans_b", [("float16", "int16", False),
                                                    ("bfloat16", "int16", True),
                                                    ("float16", "int32", False)])
def test_gemm_sp_matches_torch(dtype, e_dtype, trans_b):
    import torch

    torch.manual_seed(0)
    tdt, edt = getattr(torch, dtype), getattr(torch, e_dtype)
    a = torch.randn(256, 256, device="cuda")
    a.view(256, 64, 4).scatter_(-1, torch.rand(256, 64, 4, device="cuda").topk(2, dim=-1).indices, 0)
    a = a.to(tdt)
    b = torch.randn(256, 256, device="cuda", dtype=tdt)
    kept, meta = compress(a, edt)
    c = torch.empty(256, 256, device="cuda")
    kernel = tilecute.compile(sparse_matmul(dtype=dtype, e_dtype=e_dtype, trans_b=trans_b))
    kernel(kept, meta, b.t().contiguous() if trans_b else b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def sparse_matmul_frags(M=128, N=128, K=128, bk=64, trans_a=False):
    """TileLang's gemm_sp test forms: A (and E) transposed, A_sparse from a fragment, B from
    a fragment."""
    e = 16

    @T.prim_func
    def spmm_rs(A_sparse: T.Tensor((K // 2, M) if trans_a else (M, K // 2), T.float16),
                E: T.Tensor((K // e, M) if trans_a else (M, K // e), T.int16),
                B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((bk // 2, M) if trans_a else (M, bk // 2), T.float16)
            A_f = T.alloc_fragment((bk // 2, M) if trans_a else (M, bk // 2), T.float16)
            E_s = T.alloc_shared((bk // e, M) if trans_a else (M, bk // e), T.int16)
            B_s = T.alloc_shared((bk, N), T.float16)
            B_f = T.alloc_fragment((bk, N), T.float16)
            C_f = T.alloc_fragment((M, N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=1):
                if trans_a:
                    T.copy(A_sparse[k * bk // 2, 0], A_s)
                    T.copy(E[k * bk // e, 0], E_s)
                else:
                    T.copy(A_sparse[0, k * bk // 2], A_s)
                    T.copy(E[0, k * bk // e], E_s)
                T.copy(A_s, A_f)
                T.copy(B[k * bk, 0], B_s)
                T.copy(B_s, B_f)
                T.gemm_sp(A_f, E_s, B_f, C_f, trans_a, trans_a, False)
            T.copy(C_f, C[0, 0])
    return spmm_rs


@pytest.mark.parametrize("trans_a", [False, True])
def test_gemm_sp_fragment_operands_build(trans_a, tmp_path):
    assert tilecute.build_cubin(sparse_matmul_frags(trans_a=trans_a), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("trans_a", [False, True])
def test_gemm_sp_fragment_operands_match_torch(trans_a):
    import torch

    torch.manual_seed(1)
    a = torch.randn(128, 128, device="cuda")
    a.view(128, 32, 4).scatter_(-1, torch.rand(128, 32, 4, device="cuda").topk(2, dim=-1).indices, 0)
    a = a.half()
    b = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    kept, meta = compress(a, torch.int16)
    if trans_a:
        kept, meta = kept.t().contiguous(), meta.t().contiguous()
    c = torch.empty(128, 128, device="cuda")
    tilecute.compile(sparse_matmul_frags(trans_a=trans_a))(kept, meta, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
