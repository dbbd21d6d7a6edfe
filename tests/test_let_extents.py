"""Slice and loop extents through the kernel's Let-bound names (issue 17): TileLang's
kernel variables are expressions its simplifier sees through, so
``lo = s * 64; hi = lo + 64; A[lo:hi]`` is a 64-row region and ``n = hi - lo`` a
constant T.Parallel extent; names bound to values that read buffers are not seen
through (their value may change between two bindings)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts


def _stmts(f):
    return list(walk_stmts(f.kernels))


def _rows_kernel():
    @T.prim_func
    def rows(A: T.Tensor((2, 256, 32), "float16"), B: T.Tensor((2, 256, 32), "float16")):
        with T.Kernel(2, threads=128) as b:
            tile = T.alloc_shared((64, 32), "float16")
            width = 32
            for s in T.serial(4):
                lo = s * 64
                hi = lo + 64
                T.copy(A[b, lo:hi, 0:width], tile)
                rows_n = hi - lo
                for i, j in T.Parallel(rows_n, width):
                    B[b, lo + i, j] = tile[i, j] * T.float16(2)
                for t in T.serial(lo, hi):
                    B[b, t, 0] = tile[t - lo, 0]
    return rows


def test_extents_fold_through_lets():
    f = _rows_kernel()
    stmts = _stmts(f)
    copy = next(s for s in stmts if isinstance(s, N.Copy))
    assert copy.src.extents[1] == N.Const(64, "int32")
    assert copy.src.extents[2] == N.Const(32, "int32")
    par = [s for s in stmts if isinstance(s, N.For) and s.kind == "parallel"]
    assert [p.extent for p in par] == [N.Const(64, "int32"), N.Const(32, "int32")]
    serial = [s for s in stmts if isinstance(s, N.For) and s.kind == "serial"]
    assert serial[-1].extent == N.Const(64, "int32")
    text = f.script()
    assert "lo = s * 64" in text and "hi = lo + 64" in text  # the Lets stay


def test_extents_fold_cubin(tmp_path):
    tilecute.build_cubin(_rows_kernel(), "sm_90a", out_dir=str(tmp_path))


def test_constant_name_is_an_allocation_extent(tmp_path):
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(2, threads=64) as b:
            n = 64
            buf = T.alloc_shared((n,), "float32")
            T.copy(A[b * n:b * n + n], buf)
            for i in T.Parallel(n):
                B[b * n + i] = buf[i] + 1.0
    stmts = _stmts(k)
    alloc = next(s for s in stmts if isinstance(s, N.Allocate))
    assert tuple(alloc.buffer.shape) == (N.Const(64, "int32"),)
    tilecute.build_cubin(k, "sm_90a", out_dir=str(tmp_path))


def test_values_reading_buffers_are_not_seen_through():
    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), starts: T.Tensor((4,), "int32"),
          B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=32):
            cur = T.alloc_var("int32")
            cur = starts[0]
            lo = cur
            cur = starts[1]
            hi = cur + 8
            for t in T.serial(lo, hi):
                B[t] = A[t]
    stmts = _stmts(k)
    loop = next(s for s in stmts if isinstance(s, N.For))
    assert not isinstance(loop.extent, N.Const)  # hi - lo reads two different loads


def test_names_doubling_their_value_are_not_expanded_without_bound():
    """``a1 = a0 * a0`` 40 times over would expand to 2**40 nodes: past a bound the
    extent stays the (correct) difference of the names."""
    chain = "\n".join(f"        a{i + 1} = a{i} * a{i}" for i in range(40))
    src = f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=1) as bx:
        a0 = bx + 1
{chain}
        hi = a40 + 4
        for t in T.serial(a40, hi):
            A[t % 64] = t
'''
    f = T.from_script(src)
    loop = next(s for s in _stmts(f) if isinstance(s, N.For))
    assert not isinstance(loop.extent, N.Const)
