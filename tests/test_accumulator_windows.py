"""A window of a T.gemm accumulator at constant offsets (``T.copy(acc[16:48, :],
C[r + 16, c])``, ``for i, j in T.Parallel(32, 32): ... acc[i + 8, j + 16]``): TileLang
lays such a loop out by the fragment it reads at a shifted index; tilecute walks the
whole fragment under the window's guard (layout_inference._PadToMmaFragment).  It was
refused ('read across threads')."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.validate import ValidationError
from tilecute.transform.layout_inference import LayoutError
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


def _windows(M=128, N=128, K=64, bm=64, bn=64, bk=32):
    @T.prim_func
    def windows(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float32), D: T.Tensor((M, N // 2), T.float32),
                E: T.Tensor((M // 2, N // 2), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            half = T.alloc_shared((bm, bn // 2), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            # rows 16..47 of the tile, to the same rows of C
            T.copy(acc[16:48, 0:bn], C[by * bm + 16, bx * bn])
            # the right half of the tile through shared
            T.copy(acc[:, bn // 2:bn], half)
            T.copy(half, D[by * bm, bx * (bn // 2)])
            # a window at (8, 16) read with its own loop variables in the value
            for i, j in T.Parallel(bm // 2, bn // 2):
                E[by * (bm // 2) + i, bx * (bn // 2) + j] = acc[i + 8, 16 + j] + i * 1000.0 + j
    return windows


def test_window_walks_the_fragment_under_its_guard():
    text = print_func(run_passes(_windows(), "sm_90a", until="infer_layouts"))
    # each nest runs over the accumulator's 64 x 64, the window's elements taken, and
    # reads the fragment at the new loop variables (its own layout), the window's
    # variables being theirs less the window's start
    assert "if i31 >= 16 and i31 < 48:\n" \
           "                    C[by * 64 + 16 + (i31 - 16), bx * 64 + i4] = acc[i31, i4]" in text, text
    assert "if i62 >= 32:\n                    half[i5, i62 - 32] = acc[i5, i62]" in text, text
    assert "if i7 >= 8 and i7 < 40 and j8 >= 16 and j8 < 48:" in text, text
    assert "= acc[i7, j8] + T.Cast(\"float32\", i7 - 8) * T.float32(1000.0)" in text, text


def test_window_builds(tmp_path):
    info = tilecute.build_cubin(_windows(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert ">= 16 and" in src and "< 48" in src, src
    assert info.kernel_names


def test_window_past_the_fragment_is_still_refused():
    # (the IR validator refuses it as the prim_func is parsed: rows 40..71 of 64)
    with pytest.raises(ValidationError, match="takes values 40..71 along dim 0, whose extent is 64"):
        _past()


def _past():
    @T.prim_func
    def past(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
             C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i, j in T.Parallel(32, 64):
                C[i, j] = acc[i + 40, j]
    return past


def _chunked(loop="unroll"):
    """TileLang's chunked epilogue: the accumulator's columns 64 at a time through one
    shared tile, the window's start a loop variable."""
    @T.prim_func
    def chunked(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 256), T.float16),
                C: T.Tensor((128, 256), T.float16)):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 256), T.float16)
            acc = T.alloc_fragment((128, 256), T.float32)
            C_s = T.alloc_shared((128, 64), T.float16)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            if loop == "unroll":
                for i in T.unroll(4):
                    T.copy(acc[:, i * 64:(i + 1) * 64], C_s)
                    T.copy(C_s, C[0, i * 64])
            elif loop == "serial":
                for i in T.serial(4):
                    T.copy(acc[:, i * 64:(i + 1) * 64], C_s)
                    T.copy(C_s, C[0, i * 64])
            else:  # the window's start a name bound in the loop
                for i in T.serial(4):
                    c0 = i * 64
                    T.copy(acc[:, c0:c0 + 64], C_s)
                    T.copy(C_s, C[0, c0])
    return chunked


@pytest.mark.parametrize("loop", ["unroll", "serial", "let"])
def test_window_at_a_loop_variable(loop, tmp_path):
    text = print_func(run_passes(_chunked(loop), "sm_90a", until="infer_layouts"))
    start = "c0" if loop == "let" else "i * 64"
    assert f"if i21 >= {start} and i21 < {start} + 64:\n" in text, text
    assert f"C_s[i1, i21 - {start}] = T.Cast(\"float16\", acc[i1, i21])" in text, text
    assert tilecute.build_cubin(_chunked(loop), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _block_window(grid):
    @T.prim_func
    def by_block(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
                 C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(grid, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            T.copy(acc[:, bx * 32:bx * 32 + 32], C[0, bx * 32])
    return by_block


def test_window_at_the_block_index(tmp_path):
    """Block bx of two copies the accumulator's columns bx * 32 ... bx * 32 + 31."""
    assert tilecute.build_cubin(_block_window(2), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_window_that_may_leave_the_fragment_is_refused():
    """With three blocks block 2's window would start at column 64, past the fragment:
    refused (by the IR validator: the window reaches column 95 of 64)."""
    with pytest.raises(ValidationError, match="reaching index 95, but the dim's extent is 64"):
        tilecute.compile(_block_window(3))


@pytest.mark.gpu
@pytest.mark.parametrize("loop", ["unroll", "serial", "let"])
def test_chunked_epilogue_on_gpu(loop):
    import torch
    a = torch.randn(128, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(64, 256, dtype=torch.float16, device="cuda")
    c = torch.empty(128, 256, dtype=torch.float16, device="cuda")
    tilecute.compile(_chunked(loop))(a, b, c)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(),
                               atol=2e-2, rtol=2e-3)
    a = torch.randn(64, 32, dtype=torch.float16, device="cuda")
    b = torch.randn(32, 64, dtype=torch.float16, device="cuda")
    c = torch.empty(64, 64, device="cuda")
    tilecute.compile(_block_window(2))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-3, rtol=1e-3)


def test_window_into_a_smaller_fragment_is_refused_by_name():
    """A window written into a fragment of the window's shape would need a layout of that
    fragment's own taken from the accumulator's (TileLang derives one); tilecute refuses
    it, naming the loop's fragments (the message said the loop 'writes' the accumulator it
    only reads)."""
    @T.prim_func
    def smaller(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
                C: T.Tensor((32, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            part = T.alloc_fragment((32, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i, j in T.Parallel(32, 64):
                part[i, j] = acc[i + 16, j] * 2.0
            T.copy(part, C)
    with pytest.raises(LayoutError, match="writes the replicated fragment 'part' .* and also "
                                          "walks the distributed fragment 'acc'"):
        tilecute.compile(smaller)


@pytest.mark.gpu
def test_windows_on_gpu():
    import torch
    a = torch.randn(128, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(64, 128, dtype=torch.float16, device="cuda")
    c = torch.full((128, 128), 7.0, device="cuda")
    d = torch.empty(128, 64, device="cuda")
    e = torch.empty(64, 64, device="cuda")
    tilecute.compile(_windows())(a, b, c, d, e)
    full = a.float() @ b.float()
    want_c = torch.full((128, 128), 7.0, device="cuda")
    for by in range(2):
        want_c[by * 64 + 16:by * 64 + 48] = full[by * 64 + 16:by * 64 + 48]
    torch.testing.assert_close(c, want_c, atol=1e-3, rtol=1e-3)
    want_d = torch.cat([full[:, 32:64], full[:, 96:128]], dim=1)
    torch.testing.assert_close(d, want_d, atol=1e-3, rtol=1e-3)
    ii = torch.arange(32, device="cuda").view(32, 1).float()
    jj = torch.arange(32, device="cuda").view(1, 32).float()
    want_e = torch.empty(64, 64, device="cuda")
    for by in range(2):
        for bx in range(2):
            tile = full[by * 64 + 8:by * 64 + 40, bx * 64 + 16:bx * 64 + 48]
            want_e[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32] = tile + ii * 1000 + jj
    torch.testing.assert_close(e, want_e, atol=1e-3, rtol=1e-3)
