"""Tile operations at boundaries, probed against the CUDA TileLang 0.1.15 generates for the
same programs (lowered on the CPU): copies whose region crosses a tensor's end, fills and
clears of sub-regions, reductions with ``clear=False`` over tails, scans, atomics past the end.

Found: a ``T.Parallel`` nest (or a ``T.copy`` lowered to one) whose outer extent is known only
at run time (``T.min(bm, M - bx * bm)`` rows) and whose inner extent is constant got 4-element
vectors from the vectorize pass, while codegen spreads such a nest one iteration a thread step:
every iteration copied 4 elements (cp.async of 16 bytes at unaligned addresses, reads past the
tensor's end).  Now the nest's lanes are one element wide (TileLang's code for the program is
scalar too)."""

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
