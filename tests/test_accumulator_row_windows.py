"""Row windows of a T.gemm accumulator at a loop-dependent start: TileLang's split store
(sparse MLA's backward writes its dKV accumulator out half its rows at a time through a
shared tile half its size, ``for s in range(2): for i, j in T.Parallel(BS, D): if i < BS //
2: tile[i, j] = acc[i + s * (BS // 2), j]``), the compact form of the same nest
(``T.Parallel(BS // 2, D)``), ``T.copy(acc[s * h:(s + 1) * h, :], tile)``, atomic adds of row
chunks into global memory, and windows moving along both dims.  The nest walks the whole
fragment under the window's guard (layout_inference._PadToMmaFragment); a guard ``i < h``
over the whole body of a nest bounds the window as a smaller extent would.  The guarded form
was refused ('read across threads')."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import run_passes


def _split_store(form, M=64, N=128, K=32, split=2, threads=128, guard="lt"):
    """C = A @ B, the accumulator stored ``split`` row chunks at a time through ``part``."""
    h = M // split

    @T.prim_func
    def split_store(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                    C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            part = T.alloc_shared((h, N), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for s in range(split):
                if form == "guarded":  # the nest over the fragment's rows, guarded
                    for i, j in T.Parallel(M, N):
                        if guard == "lt":
                            if i < h:
                                part[i, j] = acc[i + s * h, j]
                        elif guard == "le":
                            if i <= h - 1:
                                part[i, j] = acc[i + s * h, j]
                        else:
                            if h > i:
                                part[i, j] = acc[i + s * h, j]
                elif form == "compact":
                    for i, j in T.Parallel(h, N):
                        part[i, j] = acc[i + s * h, j]
                else:
                    T.copy(acc[s * h:(s + 1) * h, :], part)
                for i, j in T.Parallel(h, N):
                    C[s * h + i, j] = part[i, j]
    return split_store


def _atomic_rows(guarded, M=64, N=128, K=32, split=2):
    """C += A @ B, row chunk by row chunk, straight from the accumulator."""
    h = M // split

    @T.prim_func
    def atomic_rows(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                    C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in T.serial(split):
                if guarded:
                    for i, j in T.Parallel(M, N):
                        if i < h:
                            T.atomic_add(C[i + s * h, j], acc[i + s * h, j])
                else:
                    for i, j in T.Parallel(h, N):
                        T.atomic_add(C[i + s * h, j], acc[i + s * h, j])
    return atomic_rows


def _tiles(M=64, N=128, K=32):
    """The accumulator in 32 x 64 tiles through one shared tile: windows moving along
    both dims (two serial loops)."""
    @T.prim_func
    def tiles(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            tile = T.alloc_shared((32, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in T.serial(M // 32):
                for t in T.serial(N // 64):
                    for i, j in T.Parallel(64, 64):
                        if i < 32:
                            tile[i, j] = acc[i + s * 32, j + t * 64] + s * 1000.0 + t * 100.0
                    T.copy(tile, C[s * 32, t * 64])
    return tiles


def _even_columns(M=64, N=128, K=32):
    """A guard with more than the row bound: the bound goes, the rest stays."""
    @T.prim_func
    def even_columns(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                     C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in T.serial(2):
                for i, j in T.Parallel(M, N):
                    if i < M // 2 and j % 2 == 0:
                        C[i + s * (M // 2), j] = acc[i + s * (M // 2), j]
    return even_columns


def _ir(func, options=None):
    return print_func(run_passes(func, "sm_90a", options, until="infer_layouts"))


@pytest.mark.parametrize("form, guard", [("guarded", "lt"), ("guarded", "le"),
                                         ("guarded", "gt"), ("compact", ""), ("copy", "")])
def test_split_store_walks_the_fragment_under_the_window(form, guard):
    text = _ir(_split_store(form, guard=guard))
    # the nest runs over the accumulator's 64 rows, the window's rows taken, the shared
    # tile written at the fragment's row less the window's start; the guard i < 32 is gone
    # into the window's
    row = re.search(r"for (i1+) in T\.Parallel\(64", text).group(1)
    assert f"if {row} >= s * 32 and {row} < s * 32 + 32:\n" in text, text
    assert f"part[{row} - s * 32, " in text and f"= acc[{row}, " in text, text
    assert "i < 32" not in text and "i <= 31" not in text and "32 > i" not in text, text


def test_atomic_add_of_row_chunks():
    for guarded in (True, False):
        text = _ir(_atomic_rows(guarded))
        # C[i + s * 32, j] at i = v - s * 32 is C[v, j]: the row the thread holds
        assert re.search(r"if (i1+) >= s \* 32 and \1 < s \* 32 \+ 32:\n +"
                         r"T\.atomic_add\(C\[\1, j\], acc\[\1, j\]\)", text), text


def test_windows_along_both_dims():
    text = _ir(_tiles())
    assert ">= s * 32 and" in text and "< s * 32 + 32 and" in text, text
    assert ">= t * 64 and" in text and "< t * 64 + 64:" in text, text


def test_guard_keeps_its_other_terms():
    text = _ir(_even_columns())
    assert "< s * 32 + 32:" in text, text
    assert "if j % 2 == 0:" in text, text
    assert "i < 32" not in text, text


@pytest.mark.parametrize("name, make, threads", [
    ("guarded", lambda: _split_store("guarded"), 128),
    ("guarded_256_fullcol", lambda: _split_store("guarded", N=256, threads=256), 256),
    ("atomic", lambda: _atomic_rows(True), 128),
    ("tiles", _tiles, 128),
])
@pytest.mark.parametrize("mma", ["wgmma", "mma_sync"])
def test_builds(name, make, threads, mma, tmp_path):
    options = {"disable_wgmma": True} if mma == "mma_sync" else None
    info = tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path), options=options)
    src = (tmp_path / "kernel_cute.py").read_text()
    assert ">= s * 32 and" in src and "< s * 32 + 32" in src, src
    assert info.kernel_names


def test_guard_that_lets_the_window_leave_is_refused():
    """Rows i + s * 32 for i < 48 and s in 0..1 reach row 79 of 64: still refused."""
    @T.prim_func
    def leaves(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
               C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            part = T.alloc_shared((48, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in T.serial(2):
                for i, j in T.Parallel(64, 64):
                    if i < 48:
                        part[i, j] = acc[i + s * 32, j]
                T.copy(part[0:32, :], C[s * 32, 0])
    with pytest.raises(LayoutError, match="'acc' .* read across threads"):
        tilecute.compile(leaves)


def test_guard_with_an_else_is_refused():
    """``if i < 32: ... else: ...`` is not the window's guard (the else runs too): refused."""
    @T.prim_func
    def with_else(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
                  C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            part = T.alloc_shared((32, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in T.serial(2):
                for i, j in T.Parallel(64, 64):
                    if i < 32:
                        part[i, j] = acc[i + s * 32, j]
                    else:
                        C[i, j] = acc[i + s * 32 - 32, j]
                T.copy(part, C[s * 32, 0])
    with pytest.raises(LayoutError, match="'acc' .* read across threads"):
        tilecute.compile(with_else)


# ---- GPU: against torch -------------------------------------------------------------------
def _operands(M, N, K):
    import torch
    torch.manual_seed(0)
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    return a, b, a.float() @ b.float()


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["wgmma", "mma_sync"])
@pytest.mark.parametrize("form", ["guarded", "compact", "copy"])
def test_split_store_on_gpu(form, mma):
    import torch
    options = {"disable_wgmma": True} if mma == "mma_sync" else None
    for N, threads in ((128, 128), (256, 256)):
        a, b, want = _operands(64, N, 32)
        c = torch.full((64, N), 7.0, device="cuda")
        tilecute.compile(_split_store(form, N=N, threads=threads), options=options)(a, b, c)
        torch.testing.assert_close(c, want, atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["wgmma", "mma_sync"])
def test_atomic_rows_and_tiles_on_gpu(mma):
    import torch
    options = {"disable_wgmma": True} if mma == "mma_sync" else None
    a, b, want = _operands(64, 128, 32)
    for guarded in (True, False):
        c = torch.full((64, 128), 0.5, device="cuda")
        tilecute.compile(_atomic_rows(guarded), options=options)(a, b, c)
        torch.testing.assert_close(c, want + 0.5, atol=1e-3, rtol=1e-3)
    c = torch.empty(64, 128, device="cuda")
    tilecute.compile(_tiles(), options=options)(a, b, c)
    shift = torch.tensor([[0.0, 100.0], [1000.0, 1100.0]], device="cuda")
    shift = shift.repeat_interleave(32, 0).repeat_interleave(64, 1)
    torch.testing.assert_close(c, want + shift, atol=1e-3, rtol=1e-3)
    c = torch.full((64, 128), 7.0, device="cuda")
    tilecute.compile(_even_columns(), options=options)(a, b, c)
    even = torch.full((64, 128), 7.0, device="cuda")
    even[:, 0::2] = want[:, 0::2]
    torch.testing.assert_close(c, even, atol=1e-3, rtol=1e-3)
