"""int8 / uint8 x int8 / uint8 -> int32 T.gemm on warp ``mma.sync.aligned.m16n8k32.row.col
.s32`` (TileLang's choice for such tiles, and on sm_80 for every int8 GEMM): K-major
operands (A as (M, K), B as (N, K) with transpose_B=True) on sm_80+ and tiles wgmma cannot
take with the block's warpgroups on sm_90a (a 32-row tile, TileLang's w4a8 dequant GEMM).
CuTe DSL has no warp-level int8 atom, so ``tcm.Int8WarpMma`` loads the operands as the f16
m16n8k16 MMA's (byte pairs along K, ldmatrix) and issues each m16n8k32 by inline PTX.
MN-major int8 operands stay on the SIMT path (the tensor cores read 8-bit operands
K-major only)."""

import os
import re
import shutil
import subprocess

import pytest

import tilecute
import tilecute.language as T

CUOBJDUMP = shutil.which("cuobjdump") or next(
    (p for p in ("/tmp/trw/x/triton/backends/nvidia/bin/cuobjdump",) if os.path.exists(p)), None)


def int8_gemm(m, n, k, bm, bn, bk, threads=128, ad="int8", bd="int8", stages=2,
              transpose_b=True):
    b_shape = (n, k) if transpose_b else (k, n)
    bs_shape = (bn, bk) if transpose_b else (bk, bn)

    @T.prim_func
    def i8mm(A: T.Tensor((m, k), ad), B: T.Tensor(b_shape, bd), C: T.Tensor((m, n), "int32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), ad)
            b_s = T.alloc_shared(bs_shape, bd)
            acc = T.alloc_fragment((bm, bn), "int32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], a_s)
                if transpose_b:
                    T.copy(B[bx * bn, ko * bk], b_s)
                else:
                    T.copy(B[ko * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=transpose_b)
            T.copy(acc, C[by * bm, bx * bn])

    return i8mm


def dequant_gemm(m, n, k, bm=32, bn=64, bk=64, threads=128):
    """int8 GEMM into int32 C, then a per-column scale in a T.Parallel epilogue."""

    @T.prim_func
    def i8_scaled(A: T.Tensor((m, k), "int8"), B: T.Tensor((n, k), "int8"),
                  scale: T.Tensor((n,), "float32"), D: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_s = T.alloc_shared((bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            out = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=3):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = T.Cast("float32", acc[i, j]) * scale[bx * bn + j]
            T.copy(out, D[by * bm, bx * bn])

    return i8_scaled


def w4a8_gemm(m, n, k, bm=32, bn=64, bk=128, threads=128):
    """A int8 (M, K); B signed int4 packed two to a byte along K, (N, K / 2): each B tile
    unpacked in a fragment, stored to shared as int8, multiplied with mma.sync."""

    @T.prim_func
    def w4a8(A: T.Tensor((m, k), "int8"), B: T.Tensor((n, k // 2), "int8"),
             C: T.Tensor((m, n), "int32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_packed_s = T.alloc_shared((bn, bk // 2), "int8")
            b_packed = T.alloc_fragment((bn, bk // 2), "int8")
            b_unpacked = T.alloc_fragment((bn, bk), "int8")
            b_s = T.alloc_shared((bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk // 2], b_packed_s)
                T.copy(b_packed_s, b_packed)
                for i, j in T.Parallel(bn, bk):
                    nib = (T.Cast("int32", b_packed[i, j // 2]) >> (4 * (j % 2))) & 15
                    b_unpacked[i, j] = T.Cast("int8", T.if_then_else(nib >= 8, nib - 16, nib))
                T.copy(b_unpacked, b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return w4a8


# (rows, columns, K) of a block's tile and its threads: one warp (16 x 32; 16 x 8, one
# n8 atom); two along N; four as (2, 2); three along N (8-column steps, ldmatrix.x2 for
# B); two warps of 32 x 64
TILES = [(16, 32, 32, 32), (16, 8, 32, 32), (16, 64, 64, 64), (32, 32, 128, 128),
         (32, 128, 64, 128), (16, 48, 64, 96), (64, 64, 128, 64)]


def k_parts_gemm(m, n, k, bm=32, bn=32, bk=128, threads=128):
    """Two T.gemms over the K halves of each tile (TileLang's ``A_s[:, 0:64]`` parts)."""

    @T.prim_func
    def i8parts(A: T.Tensor((m, k), "int8"), B: T.Tensor((n, k), "int8"),
                C: T.Tensor((m, n), "int32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_s = T.alloc_shared((bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            T.clear(acc)
            for ko in T.serial(T.ceildiv(k, bk)):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.gemm(a_s[:, 0:bk // 2], b_s[:, 0:bk // 2], acc, transpose_B=True)
                T.gemm(a_s[:, bk // 2:bk], b_s[:, bk // 2:bk], acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return i8parts


def w4a8_fragment_gemm(m, n, k, bm=32, bn=32, bk=128, threads=128):
    """TileLang's w4a8 form: the unpacked int8 weights stay a fragment and are T.gemm's A
    (Ct = W @ A^T, (N, M)); the gemm pass stages the fragment through shared memory."""

    @T.prim_func
    def w4a8_t(A: T.Tensor((m, k), "int8"), B: T.Tensor((n, k // 2), "uint8"),
               Ct: T.Tensor((n, m), "int32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_packed_s = T.alloc_shared((bn, bk // 2), "uint8")
            b_packed = T.alloc_fragment((bn, bk // 2), "uint8")
            w = T.alloc_fragment((bn, bk), "int8")
            ct = T.alloc_fragment((bn, bm), "int32")
            T.clear(ct)
            for ko in T.Pipelined(k // bk, num_stages=1):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk // 2], b_packed_s)
                T.copy(b_packed_s, b_packed)
                for i, j in T.Parallel(bn, bk):
                    nib = (T.Cast("int32", b_packed[i, j // 2]) >> (4 * (j % 2))) & 15
                    w[i, j] = T.Cast("int8", T.if_then_else(nib >= 8, nib - 16, nib))
                T.gemm(w, a_s, ct, transpose_B=True)
            T.copy(ct, Ct[bx * bn, by * bm])

    return w4a8_t


def row_sums_gemm(m, n, k, bm=32, bn=64, bk=64, threads=128):
    """The row sums of each C tile: T.reduce_sum over the int32 mma.sync accumulator (its
    warps along N meet through shared memory)."""

    @T.prim_func
    def i8rows(A: T.Tensor((m, k), "int8"), B: T.Tensor((n, k), "int8"),
               R: T.Tensor((n // bn, m), "int32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "int8")
            b_s = T.alloc_shared((bn, bk), "int8")
            acc = T.alloc_fragment((bm, bn), "int32")
            rows = T.alloc_fragment((bm,), "int32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[bx * bn, ko * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.reduce_sum(acc, rows, dim=1)
            T.copy(rows, R[bx, by * bm])

    return i8rows


@pytest.fixture(params=["sm_90a", "sm_80"])
def arch(request, monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", request.param)
    monkeypatch.setenv("CUTE_DSL_ARCH", request.param)
    return request.param


def gemm_lines(src):
    return [line for line in src.splitlines() if "tcm.gemm" in line or "tcm.tiled_mma(" in line]


def sass_of(built):
    if CUOBJDUMP is None:
        return None
    return subprocess.run([CUOBJDUMP, "-sass", built.path], capture_output=True, text=True,
                          check=True).stdout


def check_mma_sync(func, arch, tmp_path, kinds=("S8", "S8")):
    """The T.gemm runs on the int8 tiled mma.sync; the cubin builds and (where cuobjdump
    is at hand) its SASS multiplies on IMMA.16832 of the operands' signedness, with no
    dp4a."""
    built = tilecute.build_cubin(func, arch, out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    lines = gemm_lines(src)
    assert any(re.search(r'tcm\.tiled_mma\("mma", cutlass\.(Int8|Uint8), cutlass\.(Int8|Uint8), '
                         r'cutlass\.Int32', x) for x in lines), lines
    assert any("tcm.gemm_warp(" in x for x in lines), lines
    assert not any("gemm_simt" in x for x in lines), lines
    sass = sass_of(built)
    if sass is not None:
        imma = re.findall(r"IMMA\.16832\.(\w+)\.(\w+)", sass)
        assert imma and set(imma) == {kinds}, set(imma)
        assert "IDP" not in sass
    return src


@pytest.mark.parametrize("bm,bn,bk,threads", TILES)
def test_int8_tiles_run_on_mma_sync(cache_dir, tmp_path, arch, bm, bn, bk, threads):
    check_mma_sync(int8_gemm(128, bn * (256 // bn), 256, bm, bn, bk, threads), arch, tmp_path)


@pytest.mark.parametrize("ad,bd", [("uint8", "uint8"), ("int8", "uint8"), ("uint8", "int8")])
def test_uint8_and_mixed_signedness(cache_dir, tmp_path, arch, ad, bd):
    kinds = tuple("S8" if d == "int8" else "U8" for d in (ad, bd))
    src = check_mma_sync(int8_gemm(64, 64, 128, 32, 32, 64, 128, ad, bd), arch, tmp_path, kinds)
    want = {"int8": "cutlass.Int8", "uint8": "cutlass.Uint8"}
    assert f'tcm.tiled_mma("mma", {want[ad]}, {want[bd]}, cutlass.Int32' in src


def test_mn_major_int8_stays_on_simt(cache_dir, tmp_path, arch):
    func = int8_gemm(64, 64, 128, 32, 32, 64, 128, transpose_b=False)
    tilecute.build_cubin(func, arch, out_dir=str(tmp_path))
    lines = gemm_lines((tmp_path / "kernel_cute.py").read_text())
    assert any("tcm.gemm_simt(" in x for x in lines) and \
        not any("gemm_warp" in x for x in lines), lines


def test_sm90a_wgmma_tile_keeps_wgmma(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    tilecute.build_cubin(int8_gemm(128, 128, 256, 64, 64, 64, 128), "sm_90a",
                         out_dir=str(tmp_path))
    lines = gemm_lines((tmp_path / "kernel_cute.py").read_text())
    assert any('tcm.tiled_mma("wgmma"' in x for x in lines), lines


def test_int8_k_not_a_multiple_of_32_is_refused(cache_dir, arch):
    with pytest.raises(Exception, match=r"K = 16 is not a multiple of 32"):
        tilecute.build_cubin(int8_gemm(64, 64, 128, 32, 32, 16, 128), arch)


def test_k_parts_of_swizzled_int8_operands(cache_dir, tmp_path, arch):
    src = check_mma_sync(k_parts_gemm(64, 64, 256), arch, tmp_path)
    assert src.count("tcm.gemm_warp(") == 2


def test_row_sums_over_the_int32_accumulator(cache_dir, tmp_path, arch):
    src = check_mma_sync(row_sums_gemm(64, 128, 128), arch, tmp_path)
    assert "tcrow.reduce_rows" in src


def test_w4a8_weight_fragment_as_a(cache_dir, tmp_path, arch):
    src = check_mma_sync(w4a8_fragment_gemm(64, 128, 256), arch, tmp_path)
    assert "w_shared" in src  # (A staged: int8 A fragments are not read from registers)


def test_dequant_epilogue_over_the_int32_accumulator(cache_dir, tmp_path, arch):
    src = check_mma_sync(dequant_gemm(128, 128, 256), arch, tmp_path)
    # the epilogue walks the accumulator's mma register layout
    assert 'tcm.accumulator("mma"' in src and "cutlass.Int32" in src


def test_w4a8_unpacked_int8_tile_in_shared(cache_dir, tmp_path, arch):
    check_mma_sync(w4a8_gemm(64, 128, 256), arch, tmp_path)


# ---- on the GPU, against torch ----------------------------------------------------------
def _ref(a, b):
    return (a.cpu().long() @ b.cpu().long().T).int()


def _rand(torch, dtype, *shape):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return torch.randint(lo, hi, shape, dtype=getattr(torch, dtype), device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,bk,threads", TILES)
def test_int8_mma_sync_on_the_gpu(cache_dir, bm, bn, bk, threads):
    torch = pytest.importorskip("torch")
    m, n, k = 128, bn * (256 // bn), 256  # (whole tiles)
    a, b = _rand(torch, "int8", m, k), _rand(torch, "int8", n, k)
    c = torch.empty(m, n, dtype=torch.int32, device="cuda")
    tilecute.compile(int8_gemm(m, n, k, bm, bn, bk, threads))(a, b, c)
    assert torch.equal(c.cpu(), _ref(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("ad,bd", [("uint8", "uint8"), ("int8", "uint8"), ("uint8", "int8")])
def test_uint8_mma_sync_on_the_gpu(cache_dir, ad, bd):
    torch = pytest.importorskip("torch")
    a, b = _rand(torch, ad, 64, 128), _rand(torch, bd, 64, 128)
    c = torch.empty(64, 64, dtype=torch.int32, device="cuda")
    tilecute.compile(int8_gemm(64, 64, 128, 32, 32, 64, 128, ad, bd))(a, b, c)
    assert torch.equal(c.cpu(), _ref(a, b))


@pytest.mark.gpu
def test_k_parts_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    a, b = _rand(torch, "int8", 64, 256), _rand(torch, "int8", 64, 256)
    c = torch.empty(64, 64, dtype=torch.int32, device="cuda")
    tilecute.compile(k_parts_gemm(64, 64, 256))(a, b, c)
    assert torch.equal(c.cpu(), _ref(a, b))


@pytest.mark.gpu
def test_row_sums_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    m, n, k, bn = 64, 128, 128, 64
    a, b = _rand(torch, "int8", m, k), _rand(torch, "int8", n, k)
    r = torch.empty(n // bn, m, dtype=torch.int32, device="cuda")
    tilecute.compile(row_sums_gemm(m, n, k, bn=bn))(a, b, r)
    want = _ref(a, b).long().view(m, n // bn, bn).sum(dim=2).T.int()
    assert torch.equal(r.cpu(), want)


@pytest.mark.gpu
def test_w4a8_weight_fragment_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    m, n, k = 64, 128, 256
    a = _rand(torch, "int8", m, k)
    w = torch.randint(-8, 8, (n, k), dtype=torch.int32)
    packed = ((w[:, 0::2] & 15) | ((w[:, 1::2] & 15) << 4)).to(torch.uint8)
    ct = torch.empty(n, m, dtype=torch.int32, device="cuda")
    tilecute.compile(w4a8_fragment_gemm(m, n, k))(a, packed.cuda(), ct)
    assert torch.equal(ct.cpu(), _ref(a, w).T)


@pytest.mark.gpu
def test_dequant_epilogue_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    m, n, k = 128, 128, 256
    a, b = _rand(torch, "int8", m, k), _rand(torch, "int8", n, k)
    scale = torch.rand(n, device="cuda") + 0.5
    d = torch.empty(m, n, dtype=torch.float32, device="cuda")
    tilecute.compile(dequant_gemm(m, n, k))(a, b, scale, d)
    want = _ref(a, b).float() * scale.cpu()  # (|sums| < 2^24: exact in float32)
    assert torch.equal(d.cpu(), want)


@pytest.mark.gpu
def test_w4a8_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    m, n, k = 64, 128, 256
    a = _rand(torch, "int8", m, k)
    w = torch.randint(-8, 8, (n, k), dtype=torch.int32)  # signed int4 values
    packed = ((w[:, 0::2] & 15) | ((w[:, 1::2] & 15) << 4)).to(torch.uint8).view(torch.int8)
    c = torch.empty(m, n, dtype=torch.int32, device="cuda")
    tilecute.compile(w4a8_gemm(m, n, k))(a, packed.cuda(), c)
    assert torch.equal(c.cpu(), _ref(a, w))
