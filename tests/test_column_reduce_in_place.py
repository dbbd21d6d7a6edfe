"""A column reduction of a fragment laid out by element (``T.reduce_sum(x, out, dim=0)``
of a ``(K, J)`` fragment, ``J`` not a multiple of the block's threads) reduced in the
source's own layout, as TileLang 0.1.15 lowers it: each thread folds the rows it holds of
its ``V`` columns, the lanes holding the same columns meet by shuffles (``J // V`` lanes
apart), the warps through shared memory, and the output keeps TileLang's layout (each
thread its ``V`` columns: ``float acc[4]``, the store from the threads holding them).
Before, the fragment moved through a transposed shared tile and every thread held the
whole output (``J`` registers, local memory for a dynamic pick at the store); option
``disable_in_place_column_reduce`` keeps that.  sm_90a cubins."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes

MOVE_COLUMNS = {"disable_in_place_column_reduce": True}


def _column_sum(M=4096, N=1024, bm=64, bn=32, threads=128, dtype="float32", kind="sum"):
    """A running column reduction over row tiles (clear=False), stored once."""
    @T.prim_func
    def column_sum(X: T.Tensor((M, N), dtype), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), threads=threads) as bx:
            x = T.alloc_fragment((bm, bn), dtype)
            acc = T.alloc_fragment((bn,), "float32")
            T.fill(acc, 0 if kind in ("sum", "absmax") else -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(M, bm), num_stages=2):
                T.copy(X[k * bm, bx * bn], x)
                T.reduce(x, acc, kind, 0, False)
            T.copy(acc, Y[bx * bn])
    return column_sum


def _normalize_columns(M=64, N=32):
    """The column sums read back in a nest over the tile (``x[i, j] / s[j]``): every
    thread needs every column's sum, so the output is replicated and the reduction moves
    its columns last as before."""
    @T.prim_func
    def normalize_columns(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=0)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] / s[j]
            T.copy(x, Y)
    return normalize_columns


def _reduces(func):
    return [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Reduce)]


def _layouts(func):
    return {s.buffer.name: s.layout for s in walk_stmts(func.kernels[0].body)
            if isinstance(s, N.Allocate)}


def test_columns_reduce_in_the_source_layout():
    f = run_passes(_column_sum(), "sm_90a", {})
    (r,) = _reduces(f)
    assert (r.src, r.dst, r.dim) == ("x", "acc", 0)  # not moved
    lay = _layouts(f)
    assert lay["x"].kind == lay["acc"].kind == "blocked"
    assert lay["x"].vector == lay["acc"].vector == 4
    assert not any(name.startswith("x_moved") for name in lay)
    src = tilecute.compile(_column_sum(), target="sm_90a").get_kernel_source()
    # 4 registers of acc a thread (TileLang: float acc[4]), not the 32 columns
    assert re.search(r"acc = cute.make_rmem_tensor\(\(4,\), cutlass.Float32\)  # blocked", src)
    # lanes 8 apart hold the same columns; the 4 warps meet in shared, 8 columns a warp
    assert re.search(r'tcr.warp_allreduce\(tc_acc\d+, "sum", 4, 8\)', src)
    assert re.search(r'tcr.block_allreduce\(tc_red\d+, "sum", acc_cols_scratch, 4, 4, lanes=8\)', src)
    assert "tcr.pick" not in src and "grouped_rows" not in src


def test_option_moves_the_columns_last_as_before():
    f = run_passes(_column_sum(), "sm_90a", MOVE_COLUMNS)
    (r,) = _reduces(f)
    assert r.dim == 1 and r.src.startswith("x_frag")
    assert _layouts(f)["acc"].kind == "replicated"
    src = tilecute.compile(_column_sum(), target="sm_90a", options=MOVE_COLUMNS).get_kernel_source()
    assert "x_moved" in src and "lanes=" not in src


@pytest.mark.parametrize("bn,threads,dtype,kind,v,group", [
    (64, 128, "float16", "absmax", 8, 8),  # half source, float output: 8 lanes a thread
    (16, 32, "float32", "max", 4, 4),      # one warp: shuffles only
    (128, 256, "float32", "sum", 4, 32),   # a row of 32 lanes: no shuffle, the warps meet
])
def test_other_shapes_and_kinds(bn, threads, dtype, kind, v, group, tmp_path):
    prog = _column_sum(bn=bn, threads=threads, dtype=dtype, kind=kind)
    f = run_passes(prog, "sm_90a", {})
    (r,) = _reduces(f)
    assert r.dim == 0 and r.src == "x"
    assert _layouts(f)["x"].vector == _layouts(f)["acc"].vector == v
    src = tilecute.compile(prog, target="sm_90a").get_kernel_source()
    width = min(threads, 32) // group
    assert (f", {width}, {group})" in src) == (width > 1)
    assert (f"lanes={group})" in src) == (threads > 32)
    assert tilecute.build_cubin(prog, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_replicated_output_moves_its_columns():
    f = run_passes(_normalize_columns(), "sm_90a", {})
    assert _layouts(f)["s"].kind == "replicated"
    (r,) = _reduces(f)
    assert r.dim == 1 and r.src.startswith("x_frag")


def test_a_replicated_source_folds_its_columns():
    """A column reduction kept in place whose source the layout pass then replicates (every
    thread holds the whole (S, M) table of split LSEs, read at a serial loop's row) folds
    over the table's rows, each output column from its own S values; it folded the rows
    (M x M reads off the table: NaNs on the GPU, found there)."""
    S, M = 4, 64

    @T.prim_func
    def lse_max(L: T.Tensor((S, M), "float32"), O: T.Tensor((S, M), "float32")):
        with T.Kernel(1, threads=128) as bx:
            lse = T.alloc_fragment((S, M), "float32")
            mx = T.alloc_fragment((M,), "float32")
            row = T.alloc_fragment((M,), "float32")
            T.copy(L, lse)
            T.reduce_max(lse, mx, dim=0, clear=True)
            for k in T.serial(S):
                for i in T.Parallel(M):
                    row[i] = lse[k, i] - mx[i]
                T.copy(row, O[k, :])

    src = tilecute.compile(lse_max, target="sm_90a").get_kernel_source()
    fold = re.search(r"for (k\d+) in cutlass.range_constexpr\(0, (\d+)\):\n\s+mx\[(j\d+)\] = "
                     r"cute.arch.fmax\(mx\[\3\], lse\[(\w+) \* 64 \+ (\w+)\]\)", src)
    assert fold and fold.group(2) == str(S) and fold.group(4) == fold.group(1) and \
        fold.group(5) == fold.group(3), src


def test_rows_short_of_a_round_move_their_columns(tmp_path):
    """(3, 64) in 128 threads: no V gives whole rounds of rows: moved (rows padded)."""
    prog = _column_sum(M=3 * 64, bm=3, bn=64)
    f = run_passes(prog, "sm_90a", {})
    (r,) = _reduces(f)
    assert r.dim == 1
    assert tilecute.build_cubin(prog, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("options", [{}, MOVE_COLUMNS], ids=["in_place", "moved"])
@pytest.mark.parametrize("bn,threads,dtype,kind", [
    (32, 128, "float32", "sum"), (64, 128, "float16", "absmax"), (16, 32, "float32", "max"),
    (128, 256, "float32", "sum"), (16, 128, "float32", "sum")])
def test_column_reductions_on_gpu(options, bn, threads, dtype, kind):
    import torch

    M, N = 1000, 512
    torch.manual_seed(bn + threads)
    x = torch.randn(M, N, device="cuda", dtype=getattr(torch, dtype))
    y = torch.full((N,), float("nan"), device="cuda")
    tilecute.compile(_column_sum(M, N, bn=bn, threads=threads, dtype=dtype, kind=kind),
                     options=options)(x, y)
    xf = x.float()
    ref = {"sum": lambda: xf.sum(0), "absmax": lambda: xf.abs().amax(0),
           "max": lambda: xf.amax(0)}[kind]()
    if kind == "max":  # (the last row tile's rows past M read 0, as in TileLang's copy)
        ref = torch.maximum(ref, torch.zeros_like(ref))
    torch.testing.assert_close(y, ref, atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_normalized_columns_on_gpu():
    import torch

    x = torch.rand(64, 32, device="cuda") + 0.5
    y = torch.empty_like(x)
    tilecute.compile(_normalize_columns())(x, y)
    torch.testing.assert_close(y, x / x.sum(0), atol=1e-5, rtol=1e-5)
