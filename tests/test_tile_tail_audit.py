"""Tile operations at boundaries, probed against the CUDA TileLang 0.1.15 generates for the
same programs (lowered on the CPU): copies whose region crosses a tensor's end, fills and
clears of sub-regions, reductions with ``clear=False`` over tails, scans, atomics past the end.

Found: a ``T.Parallel`` nest (or a ``T.copy`` lowered to one) whose outer extent is known only
at run time (``T.min(bm, M - bx * bm)`` rows) and whose inner extent is constant got 4-element
vectors from the vectorize pass, while codegen spreads such a nest one iteration a thread step:
every iteration copied 4 elements (cp.async of 16 bytes at unaligned addresses, reads past the
tensor's end).  Now the nest's lanes are one element wide (TileLang's code for the program is
scalar too).

Found: a tile op's region whose start is proved negative (``T.copy(A[-1, 0:64], s)``,
``T.copy(A[-16, 0], s)``, ``T.fill(B[-1, 0:64], v)``) kept its start, so the copy read zeros
(a TMA box at row -1) and the fill wrote nothing; TileLang lowers the op to loads and stores
whose proved-negative indices its LegalizeNegativeIndex counts from the end (the last row).
The frontend's negative-index pass now rewrites such region dims."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def _min_rows_copy(M=100, N_=32, bm=32, dtype="float32"):
    """Rows [bx * bm, bx * bm + min(bm, M - bx * bm)) copied into the top of a tile that
    starts filled with 5; the whole tile stored (the store stops at M)."""
    @T.prim_func
    def min_rows_copy(A: T.Tensor((M, N_), dtype), B: T.Tensor((M, N_), dtype)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            S = T.alloc_shared((bm, N_), dtype)
            T.fill(S, 5.0)
            m = T.min(bm, M - bx * bm)
            T.copy(A[bx * bm:bx * bm + m, 0:N_], S[0:m, 0:N_])
            T.copy(S, B[bx * bm:(bx + 1) * bm, 0:N_])
    return min_rows_copy


def _dynamic_rows_parallel(N_=64, dtype="float16"):
    """A symbolic row count: T.Parallel(n_rows, N) over a shared tile, fp16."""
    M = T.symbolic("M")

    @T.prim_func
    def dynamic_rows_parallel(A: T.Tensor((M, N_), dtype), B: T.Tensor((M, N_), dtype)):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            S = T.alloc_shared((64, N_), dtype)
            T.clear(S)
            for i, j in T.Parallel(T.min(64, M - bx * 64), N_):
                S[i, j] = A[bx * 64 + i, j] * T.cast(2.0, dtype)
            T.copy(S, B[bx * 64, 0])
    return dynamic_rows_parallel


@pytest.mark.parametrize("make", [_min_rows_copy, _dynamic_rows_parallel])
def test_dynamic_extent_nest_has_one_lane(make):
    func = run_passes(make(), "sm_90a", until="vectorize")
    found = 0
    for s in walk_stmts(func.kernels[0].body):
        if isinstance(s, N.For) and s.kind == "parallel" and not isinstance(s.extent, N.Const):
            # the nest under the run-time extent: its inner loop's lanes and vectors are
            # one element wide (codegen runs one iteration a thread step)
            inner = s
            while any(isinstance(b, N.For) for b in inner.body):
                (inner,) = [b for b in inner.body if isinstance(b, N.For)]
            assert isinstance(inner.extent, N.Const)
            assert inner.vector_width == 1, inner
            assert all(v.chunk == 1 for v in inner.vectors), inner.vectors
            found += 1
    assert found == 1


def test_dynamic_extent_copy_source_is_scalar(tmp_path):
    kernel = tilecute.compile(_min_rows_copy(), target="sm_90a")
    src = kernel.get_kernel_source()
    # the run-time-bounded nest: one element an iteration, no 4-element cp.async
    loop = src[src.index("cutlass.min(32, 100 - bx * 32)"):]
    loop = loop[:loop.index("tct.store_fence")]
    assert "copy_async" not in loop and "make_layout(4)" not in loop, loop
    assert "A[bx * 32 + i3, i4]" in loop, loop
    info = tilecute.build_cubin(_min_rows_copy(), "sm_90a", out_dir=str(tmp_path / "a"))
    assert info.kernel_names
    info = tilecute.build_cubin(_dynamic_rows_parallel(), "sm_80", out_dir=str(tmp_path / "b"))
    assert info.kernel_names


@pytest.mark.gpu
def test_min_rows_copy_on_gpu():
    import torch
    kernel = tilecute.compile(_min_rows_copy())
    a = torch.randn(100, 32, device="cuda")
    b = torch.full((100, 32), -1.0, device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 64, 100, 130])
def test_dynamic_rows_parallel_on_gpu(m):
    import torch
    kernel = tilecute.compile(_dynamic_rows_parallel())
    a = torch.randn(m, 64, device="cuda", dtype=torch.float16)
    b = torch.full((m, 64), -1.0, device="cuda", dtype=torch.float16)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a * 2)


# ---- probes whose code agreed with TileLang's: elements past a tensor's end read 0 (loads
# predicated, TMA zero fill), stores and atomics past it are skipped, clear=False folds the
# destination's old value in, scans over lengths off 32 guard their lanes -------------------

def _sum_rows_accumulate(M=100, N_=50, bm=32, bn=32):
    """Element origins A[bx * bm, k * bn] crossing both ends; reduce_sum(clear=False) onto
    rows seeded with 1."""
    @T.prim_func
    def sum_rows_accumulate(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            S = T.alloc_shared((bm, bn), "float32")
            F = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm,), "float32")
            T.fill(r, 1.0)
            for k in T.serial(T.ceildiv(N_, bn)):
                T.copy(A[bx * bm, k * bn], S)
                T.copy(S, F)
                T.reduce_sum(F, r, dim=1, clear=False)
            T.copy(r, B[bx * bm])
    return sum_rows_accumulate


def _max_rows_seeded(M=40, N_=50, bn=64):
    """reduce_max(clear=False) onto -100 over a 64-column tile of a 50-column tensor: the 14
    columns past the end are 0 in the tile (TileLang's too), so a row of negatives gives 0."""
    @T.prim_func
    def max_rows_seeded(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((M, bn), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.fill(r, -100.0)
            T.copy(A[0, 0], F)
            T.reduce_max(F, r, dim=1, clear=False)
            T.copy(r, B)
    return max_rows_seeded


def _col_sum_shared_dst(M=50, N_=32, bm=64):
    """reduce_sum over dim 0 (a row tail) with clear=False into a shared 1-D destination."""
    @T.prim_func
    def col_sum_shared_dst(A: T.Tensor((M, N_), "float32"), B: T.Tensor((N_,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((bm, N_), "float32")
            r = T.alloc_shared((N_,), "float32")
            T.fill(r, 2.0)
            T.copy(A[0:bm, 0:N_], F)
            T.reduce_sum(F, r, dim=0, clear=False)
            T.copy(r, B)
    return col_sum_shared_dst


def _tile_atomic_tail(M=100, N_=40, bm=32, bn=32):
    @T.prim_func
    def tile_atomic_tail(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            F = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], F)
            T.atomic_add(B[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], F)
    return tile_atomic_tail


def _reverse_scans(M=8, N_=50):
    """cumsum along dim 1, reverse, of rows 50 long (lanes past 50 guarded), and a forward
    scan along dim 0 of a tile 64 rows tall over a 50-row tensor (zeros past the end)."""
    @T.prim_func
    def reverse_scans(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M, N_), "float32"),
                      C: T.Tensor((N_, M), "float32"), D: T.Tensor((N_, M), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((M, N_), "float32")
            U = T.alloc_shared((64, M), "float32")
            T.copy(A, S)
            T.cumsum(S, dim=1, reverse=True)
            T.copy(S, B)
            T.copy(C[0:64, 0:M], U)
            T.cumsum(U, dim=0, reverse=True)
            T.copy(U, D[0:64, 0:M])
    return reverse_scans


def _sub_region_fills(M=64, N_=64):
    @T.prim_func
    def sub_region_fills(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M, N_), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((M, N_), "float32")
            F = T.alloc_fragment((M, N_), "float32")
            T.copy(A, S)
            T.fill(S[8:24, 4:20], 7.0)
            T.copy(S, F)
            T.clear(F[0:4, :])
            T.copy(F, B)
    return sub_region_fills


def _symbolic_min_rows(bm=32, bn=32):
    M, N_ = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def symbolic_min_rows(A: T.Tensor((M, N_), "float32"), B: T.Tensor((M, N_), "float32"),
                          R: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            F = T.alloc_fragment((bm, bn), "float32")
            r = T.alloc_fragment((bm,), "float32")
            T.copy(A[by * bm, bx * bn], F)
            T.reduce_min(F, r, dim=1)
            T.copy(F, B[by * bm, bx * bn])
            if bx == 0:
                T.copy(r, R[by * bm])
    return symbolic_min_rows


def test_tail_loads_read_zero_in_source():
    src = tilecute.compile(_max_rows_seeded(), target="sm_90a").get_kernel_source()
    # the per-lane path past column 50 reads 0; the reduction folds the seeded -100 in
    assert "tc_ld6 = cutlass.Float32(0)" in src and "(i3 + tc_lane5) < 50" in src, src
    assert 'r[tc_c13] = tcr.combine(r[tc_c13], tc_rows12[tc_c13], "max")' in src, src
    src = tilecute.compile(_symbolic_min_rows(), target="sm_90a").get_kernel_source()
    assert "if by * 32 + i1 < M and bx * 32 + (i2 + tc_lane3) < N:" in src, src
    assert "if by * 32 + i5 < M:" in src, src


def test_tail_atomics_and_scans_guarded_in_source():
    src = tilecute.compile(_tile_atomic_tail(), target="sm_90a").get_kernel_source()
    assert "if by * 32 + i3 < 100 and bx * 32 + (i4 + tc_lane11) < 40:" in src, src
    src = tilecute.compile(_reverse_scans(), target="sm_90a").get_kernel_source()
    # rows of 50 in a warp of 32 lanes x 2: lanes past 50 neither read nor write
    assert src.count("* 2 + tc_c") >= 4 and "< 50:" in src, src


@pytest.mark.parametrize("make", [_sum_rows_accumulate, _max_rows_seeded, _col_sum_shared_dst,
                                  _tile_atomic_tail, _reverse_scans, _sub_region_fills,
                                  _symbolic_min_rows])
def test_tail_probes_build(make, tmp_path):
    info = tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names


@pytest.mark.gpu
def test_tail_reductions_on_gpu():
    import torch
    a = torch.randn(100, 50, device="cuda")
    b = torch.empty(100, device="cuda")
    tilecute.compile(_sum_rows_accumulate())(a, b)
    torch.testing.assert_close(b, 1 + a.sum(1), rtol=1e-5, atol=1e-4)
    a = -torch.rand(40, 50, device="cuda") - 1  # all negative: the zeros past column 50 win
    a[:5] += 3
    b = torch.empty(40, device="cuda")
    tilecute.compile(_max_rows_seeded())(a, b)
    want = torch.maximum(a.max(1).values, torch.zeros(40, device="cuda"))
    torch.testing.assert_close(b, want)
    a = torch.randn(50, 32, device="cuda")
    b = torch.empty(32, device="cuda")
    tilecute.compile(_col_sum_shared_dst())(a, b)
    torch.testing.assert_close(b, 2 + a.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_tail_atomics_scans_fills_on_gpu():
    import torch
    a = torch.randn(100, 40, device="cuda")
    b = torch.ones(100, 40, device="cuda")
    tilecute.compile(_tile_atomic_tail())(a, b)
    torch.testing.assert_close(b, a + 1)
    a, c = torch.randn(8, 50, device="cuda"), torch.randn(50, 8, device="cuda")
    b, d = torch.empty(8, 50, device="cuda"), torch.empty(50, 8, device="cuda")
    tilecute.compile(_reverse_scans())(a, b, c, d)
    torch.testing.assert_close(b, a.flip(1).cumsum(1).flip(1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(d, c.flip(0).cumsum(0).flip(0), rtol=1e-5, atol=1e-4)
    a = torch.randn(64, 64, device="cuda")
    b = torch.empty(64, 64, device="cuda")
    tilecute.compile(_sub_region_fills())(a, b)
    want = a.clone()
    want[8:24, 4:20] = 7
    want[0:4] = 0
    torch.testing.assert_close(b, want)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n", [(50, 70), (33, 32), (1, 1)])
def test_symbolic_min_rows_on_gpu(m, n):
    import torch
    kernel = tilecute.compile(_symbolic_min_rows())
    a = torch.rand(m, n, device="cuda") + 1  # positive: the zeros past column n win the min
    b = torch.empty(m, n, device="cuda")
    r = torch.empty(m, device="cuda")
    kernel(a, b, r)
    assert torch.equal(b, a)
    want = a[:, :32].min(1).values if n >= 32 else torch.zeros(m, device="cuda")
    torch.testing.assert_close(r, want)


# ---- negative region starts: counted from the end, as TileLang's lowered loads are --------

def _negative_origins(M=16, N_=64):
    @T.prim_func
    def negative_origins(A: T.Tensor((M, N_), "float32"), H: T.Tensor((64, N_), "float16"),
                         B: T.Tensor((N_,), "float32"), C: T.Tensor((2, N_), "float32"),
                         D: T.Tensor((16, N_), "float16"), E: T.Tensor((M, N_), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s1 = T.alloc_shared((N_,), "float32")
            s2 = T.alloc_shared((2, N_), "float32")
            s3 = T.alloc_shared((16, N_), "float16")
            T.copy(A[-1, 0:N_], s1)      # A's last row
            T.copy(A[-2, 0], s2)         # its last two rows (an element origin)
            T.copy(H[-16, 0], s3)        # H's last 16 rows
            T.copy(s1, B)
            T.copy(s2, C)
            T.copy(s3, D)
            T.fill(E[-1, 0:N_], 4.0)     # E's last row
            T.copy(s2[-1, 0:N_], E[0, 0:N_])  # s2's last row (A's last) into E's first
    return negative_origins


def test_negative_region_starts_count_from_the_end():
    func = _negative_origins()
    starts = {}
    for s in walk_stmts(func.kernels[0].body):
        if isinstance(s, N.Copy):
            starts[(s.src.buffer, s.dst.buffer)] = s.src.starts
        elif isinstance(s, N.Fill):
            starts[("fill", s.dst.buffer)] = s.dst.starts
    val = lambda t: tuple(getattr(x, "value", None) for x in t)  # noqa: E731
    assert val(starts[("A", "s1")]) == (15, 0)
    assert val(starts[("A", "s2")]) == (14, 0)
    assert val(starts[("H", "s3")]) == (48, 0)
    assert val(starts[("fill", "E")]) == (15, 0)
    assert val(starts[("s2", "E")]) == (1, 0)


def test_negative_region_starts_in_source(tmp_path):
    src = tilecute.compile(_negative_origins(), target="sm_90a").get_kernel_source()
    assert "(0, -1)" not in src and "(0, -2)" not in src and "(0, -16)" not in src, src
    assert "E[15, i" in src or "E[15," in src, src
    info = tilecute.build_cubin(_negative_origins(), "sm_80", out_dir=str(tmp_path))
    assert info.kernel_names


def test_partly_negative_region_stays_as_written():
    @T.prim_func
    def partly_negative(A: T.Tensor((64,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((8,), "float32")
            T.copy(A[-4:4], s)  # indices -4..3: not all negative, as TileLang leaves them
            T.copy(s, B)
    copies = [s for s in walk_stmts(partly_negative.kernels[0].body) if isinstance(s, N.Copy)]
    assert copies[0].src.starts[0] == N.Const(-4, "int32") or \
        getattr(copies[0].src.starts[0], "value", None) == -4


@pytest.mark.gpu
def test_negative_origins_on_gpu():
    import torch
    kernel = tilecute.compile(_negative_origins())
    a = torch.randn(16, 64, device="cuda")
    h = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.empty(64, device="cuda")
    c = torch.empty(2, 64, device="cuda")
    d = torch.empty(16, 64, device="cuda", dtype=torch.float16)
    e = torch.zeros(16, 64, device="cuda")
    kernel(a, h, b, c, d, e)
    torch.cuda.synchronize()
    assert torch.equal(b, a[-1])
    assert torch.equal(c, a[-2:])
    assert torch.equal(d, h[-16:])
    want = torch.zeros(16, 64, device="cuda")
    want[-1] = 4
    want[0] = a[-1]
    assert torch.equal(e, want)


def _window_before_start(M=128, N_=64):
    """Rows bx * 32 - 8 .. bx * 32 + 23: block 0's window starts 8 rows before A's start
    (only possibly negative: not counted from the end; those rows read 0, as TileLang's
    guarded loads; here a TMA box at row -8, which fills them with zeros)."""
    @T.prim_func
    def window_before_start(A: T.Tensor((M, N_), "float32"),
                            B: T.Tensor((M // 32, 32, N_), "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            S = T.alloc_shared((32, N_), "float32")
            T.copy(A[bx * 32 - 8, 0], S)
            T.copy(S, B[bx, 0, 0])
    return window_before_start


def test_window_before_start_keeps_its_origin(tmp_path):
    src = tilecute.compile(_window_before_start(), target="sm_90a").get_kernel_source()
    assert "(0, bx * 32 - 8)" in src, src
    info = tilecute.build_cubin(_window_before_start(), "sm_80", out_dir=str(tmp_path))
    assert info.kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("tma", [True, False])
def test_window_before_start_on_gpu(tma):
    import torch
    kernel = tilecute.compile(_window_before_start(), options={"disable_tma": not tma})
    a = torch.randn(128, 64, device="cuda")
    b = torch.empty(4, 32, 64, device="cuda")
    kernel(a, b)
    padded = torch.cat([torch.zeros(8, 64, device="cuda"), a])
    want = torch.stack([padded[bx * 32:bx * 32 + 32] for bx in range(4)])
    assert torch.equal(b, want)
