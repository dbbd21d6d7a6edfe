"""A fragment read packed, ``b[i, j // c]`` in a ``T.Parallel`` nest over ``(i, j)`` (a
dequantization reading two 4-bit values from each byte), is laid out by the nest that reads
it, as TileLang lays it out: each thread holds the bytes its own iterations unpack
(``V / c`` lanes where the nest runs ``V``), not every byte of the tile (layout pass:
``fit_packed``; codegen: ``owner_register``)."""

import re

import pytest

import tilecute
import tilecute.language as T


def int4_rows(n=64, k=256, block_n=32, block_k=128, threads=128, shift_form=True):
    """Unpack ``Q[n, k // 2]`` (two signed 4-bit values a byte, low nibble first) to int8
    ``W[n, k]``, through a shared tile and a packed fragment."""

    @T.prim_func
    def unpack(Q: T.Tensor((n, k // 2), "uint8"), W: T.Tensor((n, k), "int8")):
        with T.Kernel(n // block_n, threads=threads) as bx:
            q_s = T.alloc_shared((block_n, block_k // 2), "uint8")
            q = T.alloc_fragment((block_n, block_k // 2), "uint8")
            w = T.alloc_fragment((block_n, block_k), "int8")
            for ko in T.Pipelined(k // block_k, num_stages=1):
                T.copy(Q[bx * block_n, ko * block_k // 2], q_s)
                T.copy(q_s, q)
                for i, j in T.Parallel(block_n, block_k):
                    nib = (q[i, j // 2] >> ((j % 2) * 4).astype("uint8")) & T.uint8(15)
                    w[i, j] = T.reinterpret("int8", nib << T.uint8(4)) >> T.int8(4)
                T.copy(w, W[bx * block_n, ko * block_k])

    return unpack


def scaled_fp_rows(n=32, k=256, block_k=64, threads=64):
    """``Y[r, c] = code[r, c // 4] * s`` with a float16 "packed" fragment of one value per
    four columns: c = 4, the reading nest at 8 lanes (16 bytes of float16)."""

    @T.prim_func
    def spread(C: T.Tensor((n, k // 4), "float16"), Y: T.Tensor((n, k), "float16")):
        with T.Kernel(k // block_k, threads=threads) as bx:
            code = T.alloc_fragment((n, block_k // 4), "float16")
            y = T.alloc_fragment((n, block_k), "float16")
            T.copy(C[0, bx * block_k // 4], code)
            for r, c in T.Parallel(n, block_k):
                y[r, c] = code[r, c // 4] * T.float16(0.5)
            T.copy(y, Y[0, bx * block_k])

    return spread


def two_widths():
    """``q`` read packed at two widths: ``q[i, j // 2]`` and ``q[i, j // 4]``."""

    @T.prim_func
    def two(Q: T.Tensor((4, 8), "uint8"), W: T.Tensor((4, 16), "uint8"),
            X: T.Tensor((4, 32), "uint8")):
        with T.Kernel(1, threads=32) as bx:
            q = T.alloc_fragment((4, 8), "uint8")
            w = T.alloc_fragment((4, 16), "uint8")
            x = T.alloc_fragment((4, 32), "uint8")
            T.copy(Q, q)
            for i, j in T.Parallel(4, 16):
                w[i, j] = q[i, j // 2] + T.uint8(1)
            for i, j in T.Parallel(4, 32):
                x[i, j] = q[i, j // 4] + T.uint8(2)
            T.copy(w, W)
            T.copy(x, X)

    return two


def _declared(src: str, name: str) -> str:
    return re.search(rf"^\s*{name} = cute\.make_rmem_tensor\(\((\d+),\).*?# (.*)$", src,
                     re.M).group(0)


def test_a_packed_fragment_holds_only_the_bytes_its_thread_unpacks(cache_dir):
    kernel = tilecute.compile(int4_rows())
    src = kernel.get_kernel_source()
    # 32 x 64 bytes over 128 threads: 16 a thread, 8 consecutive a step (the nest runs 16)
    assert "q = cute.make_rmem_tensor((16,), cutlass.Uint8)  # blocked: 8 consecutive" in src, \
        _declared(src, "q")
    assert re.search(r"q\[tc_k\d+ \* 8 \+ \(tc_lane\d+\) // 2\]", src)


def test_a_packed_read_of_four_columns_an_element(cache_dir):
    src = tilecute.compile(scaled_fp_rows()).get_kernel_source()
    assert "code = cute.make_rmem_tensor((8,), cutlass.Float16)  # blocked: 2 consecutive" in src, \
        _declared(src, "code")
    assert re.search(r"code\[tc_k\d+ \* 2 \+ \(tc_lane\d+\) // 4\]", src)


def test_a_packed_read_of_short_rows_gives_a_byte_a_thread(cache_dir):
    # rows of 6 nibbles: the nest runs 2 lanes, so each thread holds one byte
    @T.prim_func
    def short(Q: T.Tensor((4, 3), "uint8"), W: T.Tensor((4, 6), "uint8")):
        with T.Kernel(1, threads=32) as bx:
            q = T.alloc_fragment((4, 3), "uint8")
            w = T.alloc_fragment((4, 6), "uint8")
            T.copy(Q, q)
            for i, j in T.Parallel(4, 6):
                w[i, j] = (q[i, j // 2] >> T.uint8((j % 2) * 4)) & T.uint8(15)
            T.copy(w, W)

    src = tilecute.compile(short).get_kernel_source()
    assert "q = cute.make_rmem_tensor((1,), cutlass.Uint8)  # blocked: 1 consecutive" in src, \
        _declared(src, "q")


def test_a_fragment_read_packed_at_two_widths_stays_replicated(cache_dir):
    # q[i, j // 2] wants 8 lanes and q[i, j // 4] 4: no one layout, so every thread holds q
    src = tilecute.compile(two_widths()).get_kernel_source()
    assert "q = cute.make_rmem_tensor((32,), cutlass.Uint8)  # replicated" in src, _declared(src, "q")


def rs_unpack_gemm():
    """``Y = W @ X^T`` where ``W[i, j]`` is nibble ``j % 2`` of byte ``Q[i, j // 2]``, the
    unpacked tile fed to T.gemm from registers (wgmma's A operand)."""

    @T.prim_func
    def rs(X: T.Tensor((64, 64), "float16"), Q: T.Tensor((64, 32), "uint8"),
           Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x_s = T.alloc_shared((64, 64), "float16")
            q_s = T.alloc_shared((64, 32), "uint8")
            q = T.alloc_fragment((64, 32), "uint8")
            w = T.alloc_fragment((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(X, x_s)
            T.copy(Q, q_s)
            T.copy(q_s, q)
            for i, j in T.Parallel(64, 64):
                w[i, j] = T.Cast("float16", (q[i, j // 2] >> T.uint8((j % 2) * 4)) & T.uint8(15))
            T.clear(acc)
            T.gemm(w, x_s, acc, transpose_B=True)
            T.copy(acc, Y)

    return rs


def test_a_packed_read_in_a_nest_over_an_mma_operand_moves_to_shared(cache_dir):
    # the unpacked tile's registers are wgmma's A layout, which no layout of the packed
    # bytes follows here: the bytes move to shared memory (2 KiB), each thread reading its own
    src = tilecute.compile(rs_unpack_gemm()).get_kernel_source()
    assert re.search(r"^\s*q = cute\.make_tensor\(cute\.recast_ptr\(tc_smem \+ \d+, "
                     r"dtype=cutlass\.Uint8\), cute\.make_layout\(2048\)\)", src, re.M), src


def test_a_packed_fragment_a_replicated_nest_writes_stays_replicated(cache_dir, tmp_path):
    # keep is written beside g1 (a reduction's output, replicated) and read packed: laid
    # out as before the packed layouts (replicated), not a LayoutError
    @T.prim_func
    def route(X: T.Tensor((4, 8, 2), "float32"), Y: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            x = T.alloc_fragment((4, 8, 2), "float32")
            g1 = T.alloc_fragment((4, 8), "float32")
            keep = T.alloc_fragment((4, 8), "int32")
            y = T.alloc_fragment((4, 16), "float32")
            T.copy(X, x)
            T.reduce_max(x, g1, dim=2)
            for i, g in T.Parallel(4, 8):
                keep[i, g] = T.if_then_else(g1[i, g] > 0, 1, 0)
                g1[i, g] = g1[i, g] * 2
            for i, j in T.Parallel(4, 16):
                y[i, j] = T.if_then_else(keep[i, j // 2] == 1, x[i, j // 2, j % 2], 0.0)
            T.copy(y, Y)

    assert tilecute.build_cubin(route, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_packed_fragments_unpack_on_the_gpu(cache_dir):
    torch = pytest.importorskip("torch")
    q = torch.randint(0, 256, (64, 128), dtype=torch.uint8, device="cuda")
    w = torch.empty(64, 256, dtype=torch.int8, device="cuda")
    tilecute.compile(int4_rows())(q, w)
    lo, hi = (q & 15).to(torch.int16), (q >> 4).to(torch.int16)
    ref = torch.stack((lo, hi), dim=-1).reshape(64, 256)
    ref = torch.where(ref >= 8, ref - 16, ref).to(torch.int8)
    assert torch.equal(w, ref)
    c = torch.randn(32, 64, device="cuda").half()
    y = torch.empty(32, 256, dtype=torch.float16, device="cuda")
    tilecute.compile(scaled_fp_rows())(c, y)
    torch.testing.assert_close(y, (c * 0.5).repeat_interleave(4, dim=1))
    q = torch.randint(0, 256, (4, 8), dtype=torch.uint8, device="cuda")
    w = torch.empty(4, 16, dtype=torch.uint8, device="cuda")
    x = torch.empty(4, 32, dtype=torch.uint8, device="cuda")
    tilecute.compile(two_widths())(q, w, x)
    assert torch.equal(w, q.repeat_interleave(2, dim=1) + 1)
    assert torch.equal(x, q.repeat_interleave(4, dim=1) + 2)
    xs = torch.randn(64, 64, device="cuda").half()
    q = torch.randint(0, 256, (64, 32), dtype=torch.uint8, device="cuda")
    y = torch.empty(64, 64, device="cuda")
    tilecute.compile(rs_unpack_gemm())(xs, q, y)
    nib = torch.stack(((q & 15), (q >> 4)), dim=-1).reshape(64, 64).float()
    torch.testing.assert_close(y, nib @ xs.float().T, rtol=1e-3, atol=1e-2)
