"""Fragments laid out by the threads that own their rows or columns, as TileLang lays them
(layout pass: ``special_access`` / ``owner_vectors``; codegen: ``owner_register``).

A split-KV combine reads a row's factor ``scale[i]`` in a nest over ``(i, j)`` and a split's
log-sum-exp ``lse[k, j]`` at an outer ``k``; TileLang gives thread ``i`` row ``i`` (the 2-D
fragments whole rows a thread, the 1-D ones one element) and column ``j`` of ``lse``, and
folds ``T.reduce_max(lse, mx, dim=0)`` in each thread.  tilecute replicated those
fragments (every thread computed every row's factor and read it at a run-time row: local
memory); now it lays them out the same way, and falls back to replication where the
extents are not whole rounds of the threads.
"""

import math

import pytest

import tilecute
import tilecute.language as T


def split_combine(splits=4, block_M=128, dim=128, threads=128):
    """Combine ``splits`` partial outputs ``P[s, m, d]`` by their log2-sum-exps
    ``L[s, m]`` (rows ``m`` in blocks of ``block_M``)."""
    M = T.symbolic("M")

    @T.prim_func
    def combine(L: T.Tensor((splits, M), "float32"), P: T.Tensor((splits, M, dim), "float16"),
                O: T.Tensor((M, dim), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            lse = T.alloc_fragment((splits, block_M), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            part = T.alloc_fragment((block_M, dim), "float16")
            acc = T.alloc_fragment((block_M, dim), "float32")
            T.copy(L[0, bx * block_M], lse)
            T.reduce_max(lse, mx, dim=0)
            T.clear(total)
            T.clear(acc)
            for s in T.serial(splits):
                for i in T.Parallel(block_M):
                    total[i] += T.exp2(lse[s, i] - mx[i])
            for s in T.serial(splits):
                T.copy(P[s, bx * block_M, 0], part)
                for i in T.Parallel(block_M):
                    scale[i] = T.exp2(lse[s, i] - mx[i]) / total[i]
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] += part[i, j] * scale[i]
            T.copy(acc, O[bx * block_M, 0])
    return combine


def column_folds(rows=4, cols=256, threads=128):
    """``T.reduce_sum`` (clear=False onto a start value) and ``T.reduce_max`` over dim 0 of
    a ``(rows, cols)`` fragment: two columns a thread."""

    @T.prim_func
    def folds(X: T.Tensor((rows, cols), "float32"), S: T.Tensor((cols,), "float32"),
              Mx: T.Tensor((cols,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((rows, cols), "float32")
            s = T.alloc_fragment((cols,), "float32")
            m = T.alloc_fragment((cols,), "float32")
            T.copy(X, x)
            for j in T.Parallel(cols):
                s[j] = 1.0
            T.reduce_sum(x, s, dim=0, clear=False)
            T.reduce_max(x, m, dim=0)
            T.copy(s, S)
            T.copy(m, Mx)
    return folds


def row_scale(rows=256, cols=64, threads=128):
    """``y[i, j] = x[i, j] * f[i]`` with ``f`` a fragment of the rows: two rows a thread
    when ``rows`` is twice the threads; replicated (as before) when it is not a whole
    number of rounds."""

    @T.prim_func
    def scaled(X: T.Tensor((rows, cols), "float32"), F: T.Tensor((rows,), "float32"),
               Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((rows, cols), "float32")
            f = T.alloc_fragment((rows,), "float32")
            T.copy(X, x)
            for i in T.Parallel(rows):
                f[i] = F[i] * 2.0
            for i, j in T.Parallel(rows, cols):
                x[i, j] = x[i, j] * f[i]
            T.copy(x, Y)
    return scaled


def _source(func):
    return tilecute.compile(func, target="sm_90a").get_kernel_source()


def _declared(src, name):
    line = next(x for x in src.splitlines() if x.strip().startswith(f"{name} = cute.make_rmem_tensor"))
    return line.split("#", 1)[1].strip()


def test_split_combine_is_laid_out_by_row_owner(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(split_combine())
    # 1-D fragments one element a thread, the (splits, block_M) one a column a thread, the
    # (block_M, dim) ones a whole row a thread: nothing replicated
    for name in ("mx", "total", "scale"):
        assert _declared(src, name) == "blocked: 1 consecutive elements per thread step"
    assert "lse = cute.make_rmem_tensor((4,)" in src
    assert _declared(src, "acc") == "blocked: 128 consecutive elements per thread step"
    assert "replicated" not in src
    # the column max folds in each thread, its split loops unrolled (constant registers)
    assert "cute.arch.fmax(mx[0], lse[k" in src
    assert "lse[s]" in src and "for s in cutlass.range_constexpr(0, 4):" in src
    assert "acc[tc_lane" in src and "* scale[0]" in src


def test_column_folds_and_two_rows_a_thread_build(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(column_folds())
    assert "replicated" not in src
    assert _declared(src, "x") == "blocked: 1 consecutive elements per thread step"
    assert "x = cute.make_rmem_tensor((8,)" in src  # 4 rows x 2 columns a thread
    assert "x[k" in src and "* 2 + tc_k" in src  # register k * (256 // 128) + step
    src = _source(row_scale())
    assert _declared(src, "f") == "blocked: 1 consecutive elements per thread step"
    assert _declared(src, "x") == "blocked: 64 consecutive elements per thread step"
    assert "f[tc_k" in src  # row step*128 + tid: register step


def test_rows_that_are_not_whole_rounds_stay_replicated(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(row_scale(rows=64, cols=64))
    assert _declared(src, "f") == "replicated: every thread holds every element"


def test_owner_layouts_build_sm80_cubins(tmp_path):
    for func in (split_combine(), column_folds(), row_scale()):
        assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m", [128, 300])
def test_split_combine_on_gpu(m):
    import torch
    torch.manual_seed(0)
    splits = 4
    L = torch.randn(splits, m, device="cuda") * 3
    P = torch.randn(splits, m, 128, device="cuda").half()
    O = torch.empty(m, 128, device="cuda", dtype=torch.float16)
    tilecute.compile(split_combine())(L, P, O)
    w = torch.softmax(L.double() * math.log(2), dim=0)  # exp2 weights, normalised
    want = (P.double() * w[:, :, None]).sum(0)
    torch.testing.assert_close(O.double(), want, atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_column_folds_and_row_scale_on_gpu():
    import torch
    torch.manual_seed(1)
    X = torch.randn(4, 256, device="cuda")
    S, Mx = torch.empty(256, device="cuda"), torch.empty(256, device="cuda")
    tilecute.compile(column_folds())(X, S, Mx)
    torch.testing.assert_close(S, 1.0 + X.sum(0), atol=1e-5, rtol=1e-5)
    assert torch.equal(Mx, X.max(0).values)
    for rows in (256, 64):
        X = torch.randn(rows, 64, device="cuda")
        F = torch.randn(rows, device="cuda")
        Y = torch.empty_like(X)
        tilecute.compile(row_scale(rows=rows))(X, F, Y)
        assert torch.equal(Y, X * (F * 2.0)[:, None])


def rms_weighted(rows=64, cols=1024, block_rows=4, threads=128, dtype="float16"):
    """RMSNorm with a weight: ``y[i, j] = x[i, j] * rstd[i] * w[j]``, the weight copied
    into a ``(cols,)`` fragment and read at the nest's column."""

    @T.prim_func
    def rms(X: T.Tensor((rows, cols), dtype), W: T.Tensor((cols,), dtype),
            Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
            x = T.alloc_fragment((block_rows, cols), "float32")
            sq = T.alloc_fragment((block_rows, cols), "float32")
            w = T.alloc_fragment((cols,), "float32")
            ss = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_rows, cols):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_rows):
                ss[i] = T.rsqrt(ss[i] / cols + 1e-6)
            for i, j in T.Parallel(block_rows, cols):
                x[i, j] = x[i, j] * ss[i] * w[j]
            T.copy(x, Y[bx * block_rows, 0])
    return rms


@pytest.mark.parametrize("cols,held", [(1024, 8), (4096, 32), (2048, 16)])
def test_a_column_factor_holds_the_columns_each_thread_meets(cols, held):
    """``w[j]`` in a nest over ``(i, j)`` whose rows are whole rounds of the threads'
    8-element pieces: each thread holds the columns it meets (``cols / 128``), as TileLang
    lays ``w`` out by the loop; it held all ``cols``."""
    src = _source(rms_weighted(cols=cols))
    assert f"w = cute.make_rmem_tensor(({held},), cutlass.Float32)" in src
    rounds = cols // (128 * 8)
    if rounds > 1:
        assert f"% {rounds}) * 8 + " in src


def test_a_column_factor_short_of_whole_rounds_stays_whole():
    # rows of 64 over 128 threads: 8 threads a row, each row's columns on other threads
    src = _source(rms_weighted(cols=64, block_rows=16))
    assert "w = cute.make_rmem_tensor((64,), cutlass.Float32)" in src


@pytest.mark.gpu
@pytest.mark.parametrize("cols,block_rows", [(1024, 4), (4096, 2), (2048, 1), (640, 4), (64, 16)])
def test_column_factor_on_gpu(cols, block_rows):
    import torch
    torch.manual_seed(cols)
    X = torch.randn(64, cols, device="cuda").half()
    W = torch.randn(cols, device="cuda").half()
    Y = torch.empty_like(X)
    tilecute.compile(rms_weighted(cols=cols, block_rows=block_rows))(X, W, Y)
    x = X.float()
    want = x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * W.float()
    torch.testing.assert_close(Y.float(), want, atol=2e-2, rtol=2e-2)


def test_a_column_factor_beside_a_failed_row_owner():
    """Eight rows over 128 threads: the row factor ``r[i]`` cannot be one element a thread
    (the kernel's other owner layouts are dropped), and the weight ``w[j]`` still holds the
    columns each thread meets (the retry keeps the column factors)."""
    @T.prim_func
    def scaled(X: T.Tensor((64, 384), "float32"), W: T.Tensor((384,), "float32"),
               R: T.Tensor((64,), "float32"), Y: T.Tensor((64, 384), "float32")):
        with T.Kernel(8, threads=128) as bx:
            x = T.alloc_fragment((8, 384), "float32")
            w = T.alloc_fragment((384,), "float32")
            r = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.copy(W, w)
            T.copy(R[bx * 8], r)
            for i, j in T.Parallel(8, 384):
                x[i, j] = x[i, j] * r[i] * w[j]
            T.copy(x, Y[bx * 8, 0])
    src = _source(scaled)
    assert "r = cute.make_rmem_tensor((8,), cutlass.Float32)  # replicated" in src
    assert "w = cute.make_rmem_tensor((3,), cutlass.Float32)" in src


def streams_mix(streams=4, width=256, threads=128, eps=1e-6):
    """One token's ``(streams, width)`` rows: their squares summed by a row reduction (``sq``
    walks ``x`` at ``(i, j)``), then mixed over the streams by a serial loop inside a nest
    over the columns (``x[s, j]``, ``s`` the inner loop's): ``y[j] = sum_s w[s] * x[s, j] *
    rsqrt(mean(x^2) + eps)``."""

    @T.prim_func
    def mix(X: T.Tensor((64, streams, width), "float16"), Wt: T.Tensor((streams,), "float32"),
            Y: T.Tensor((64, width), "float16")):
        with T.Kernel(64, threads=threads) as t:
            xs = T.alloc_shared((streams, width), "float16")
            x = T.alloc_fragment((streams, width), "float32")
            sq = T.alloc_fragment((streams, width), "float32")
            ss = T.alloc_fragment((streams,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            w = T.alloc_fragment((streams,), "float32")
            y = T.alloc_fragment((width,), "float32")
            T.copy(X[t, 0, 0], xs)
            T.copy(xs, x)
            T.copy(Wt, w)
            for i, j in T.Parallel(streams, width):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for j in T.Parallel(width):
                y[j] = 0.0
                for s in T.serial(streams):
                    y[j] += w[s] * x[s, j]
            T.reduce_sum(ss, tot, dim=0)
            for j in T.Parallel(width):
                y[j] = y[j] * T.rsqrt(tot[0] / (streams * width) + eps)
            T.copy(y, Y[t, 0])
    return mix


@pytest.mark.parametrize("streams,width", [(4, 256), (8, 512), (2, 128)])
def test_rows_reduced_and_read_under_an_inner_serial_loop_are_blocked(monkeypatch, streams, width):
    """``x[s, j]`` read under a serial loop inside a nest over ``j`` gives ``x`` a column a
    thread (the owner layout), though its group (``sq``) is also reduced over its rows: that
    reduction runs on the one-lane blocked layout (each row over the block's threads).  It
    was replicated: every thread held all ``streams * width`` values (local memory)."""
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(streams_mix(streams, width))
    held = streams * width // 128
    for name in ("x", "sq"):
        assert f"{name} = cute.make_rmem_tensor(({held},), cutlass.Float32)  # blocked: 1 " in src
    assert f"y = cute.make_rmem_tensor(({width // 128},), cutlass.Float32)  # blocked: 1 " in src
    # the stream loop unrolls: register s * (width // 128) + step, a constant
    assert f"for s in cutlass.range_constexpr(0, {streams}):" in src
    per = width // 128  # (one step: register s)
    assert (f"w[s] * x[s * {per} + tc_k" if per > 1 else "w[s] * x[s]\n") in src
    # each thread sums its registers of a row, then the row over the warps
    assert "tcr.warp_allreduce(" in src and "tcr.block_allreduce(" in src


def test_columns_short_of_whole_rounds_stay_replicated(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(streams_mix(4, 64))
    assert "x = cute.make_rmem_tensor((256,), cutlass.Float32)  # replicated" in src


def test_streams_mix_builds_cubins(tmp_path):
    for streams, width in ((4, 256), (8, 512), (4, 64)):
        assert tilecute.build_cubin(streams_mix(streams, width), "sm_90a",
                                    out_dir=str(tmp_path / f"{streams}_{width}")).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("streams,width", [(4, 256), (8, 512), (2, 128), (4, 64), (8, 32)])
def test_streams_mix_on_gpu(streams, width):
    import torch
    torch.manual_seed(streams * width)
    X = torch.randn(64, streams, width, device="cuda").half()
    Wt = torch.randn(streams, device="cuda")
    Y = torch.empty(64, width, device="cuda", dtype=torch.float16)
    tilecute.compile(streams_mix(streams, width))(X, Wt, Y)
    x = X.float()
    want = (Wt[None, :, None] * x).sum(1) * torch.rsqrt(x.pow(2).mean((1, 2)) + 1e-6)[:, None]
    torch.testing.assert_close(Y.float(), want, atol=2e-2, rtol=2e-2)


def weighted_streams(streams=4, width=512, threads=64, tokens=16, stages=2, chunks=2):
    """Each token's ``(streams, width * chunks)`` rows summed with per-stream weights, a
    ``width`` chunk a step: the chunk copied to shared memory (bfloat16 to float32), to a
    fragment, then ``y[j] += w * x[s, j]`` in a nest over ``j`` under a serial loop over
    the streams (``s`` an enclosing loop's, ``w`` read from shared memory there)."""
    total = width * chunks

    @T.prim_func
    def wsum(X: T.Tensor((tokens, streams, total), "bfloat16"), Wt: T.Tensor((tokens, streams), "float32"),
             Y: T.Tensor((tokens, total), "bfloat16")):
        with T.Kernel(tokens, threads=threads) as t:
            ws = T.alloc_shared((streams,), "float32")
            for q in T.Parallel(streams):
                ws[q] = Wt[t, q]
            for c in T.Pipelined(chunks, num_stages=stages):
                xs = T.alloc_shared((streams, width), "float32")
                x = T.alloc_fragment((streams, width), "float32")
                T.copy(X[t, 0, c * width], xs)
                T.copy(xs, x)
                y = T.alloc_fragment((width,), "float32")
                T.clear(y)
                for s in T.serial(streams):
                    w = ws[s]
                    for j in T.Parallel(width):
                        y[j] += w * x[s, j]
                T.copy(y, Y[t, c * width])
    return wsum


@pytest.mark.parametrize("width,threads,held", [(512, 64, 8), (384, 64, 2), (256, 128, 2)])
def test_rows_read_under_an_enclosing_serial_loop_are_blocked_with_the_nests_lanes(
        monkeypatch, width, threads, held):
    """``x[s, j]`` in a nest over ``j`` alone, ``s`` an enclosing serial loop's: ``x`` is
    blocked with the nest's lanes (``held`` consecutive columns a thread, every row of
    them), so the shared-to-fragment copy reads 16-byte vectors and ``y`` stores ``held``
    bfloat16 values at once; TileLang lays ``x`` out by that copy (4 float32 columns a
    thread) and reads it in place.  It had one column a thread (scalar shared loads, 2-byte
    stores)."""
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(weighted_streams(width=width, threads=threads))
    for name in ("x", "y"):
        assert _declared(src, name) == f"blocked: {held} consecutive elements per thread step", src
    rounds = width // (threads * held)
    reg = f"s * {held} + tc_lane" if rounds == 1 else f"(s * {rounds} + (tc_k"
    assert f"w * x[{reg}" in src, src
    assert f"Y.iterator + cute.assume(t * {2 * width} + c * {width} + " in src
    assert f"cute.make_layout({held})).store(" in src


def test_a_reduced_fragment_read_under_an_enclosing_loop_keeps_a_column_a_thread(monkeypatch):
    """The split combine's ``lse[s, i]`` (``T.reduce_max(lse, mx, dim=0)`` folds its columns):
    one column a thread, as before."""
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    src = _source(split_combine())
    assert "lse = cute.make_rmem_tensor((4,)" in src


@pytest.mark.gpu
@pytest.mark.parametrize("width,threads", [(512, 64), (384, 64), (256, 128)])
def test_weighted_streams_on_gpu(width, threads):
    import torch
    torch.manual_seed(width + threads)
    X = torch.randn(16, 4, 2 * width, device="cuda").bfloat16()
    Wt = torch.randn(16, 4, device="cuda")
    Y = torch.empty(16, 2 * width, device="cuda", dtype=torch.bfloat16)
    tilecute.compile(weighted_streams(width=width, threads=threads))(X, Wt, Y)
    want = (Wt[:, :, None] * X.float()).sum(1)
    torch.testing.assert_close(Y.float(), want, atol=3e-2, rtol=2e-2)


def test_rank3_fragment_nest_keeps_its_step_registers():
    """A (4, 16, 32) fragment filled by a 3-loop nest (T.copy) keeps each thread step's
    registers (``x[step * 4 + lane]``): the owner-register rule for a nest over ``j`` alone
    is for 1- and 2-D fragments (a 3-D one read ``x[lane]`` for every step, a wrong answer
    in every rank-3 reduction on the H200)."""
    import re
    import sys
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from test_reduce_dims import _reduce
    src = tilecute.compile(_reduce((4, 16, 32), 1, "sum")).get_kernel_source()
    assert re.search(r"\bx\[tc_k\d+ \* 4 \+ tc_lane\d+\] = tc_vec\d+\[tc_lane\d+\]", src), src
    assert not re.search(r"\bx\[tc_lane\d+\] = ", src)
