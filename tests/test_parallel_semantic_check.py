"""TileLang's semantic checks of T.Parallel bodies (its NestedLoopChecker and
ParallelLocalIndexChecker, both ValueError before any lowering): a local buffer indexed by a
T.Parallel loop variable, a T.Parallel nested under other statements of a T.Parallel body,
and a T.Pipelined inside a T.Parallel are refused, naming the buffer or the loops; the
allowed forms (one nest of T.Parallel loops, a local indexed by a constant or a serial
variable, a serial loop between T.Parallel loops at the top) still build."""

import pytest

import tilecute
import tilecute.language as T


def _build(func, tmp_path):
    return tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_local_indexed_by_parallel_variable_refused():
    with pytest.raises(ValueError, match=r"Local buffer `acc` is indexed by T\.Parallel loop "
                                         r"variable `i`"):
        @T.prim_func
        def scale(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                acc = T.alloc_local((64,), "float32")
                for i in T.Parallel(64):
                    acc[i] = X[i] * 2.0
                for i in T.Parallel(64):
                    X[i] = acc[i]


def test_local_read_by_parallel_variable_of_an_outer_nest_refused():
    with pytest.raises(ValueError, match=r"Local buffer `table` is indexed by T\.Parallel"):
        @T.prim_func
        def gather(X: T.Tensor((8, 4), "float32")):
            with T.Kernel(1, threads=32):
                table = T.alloc_local((8,), "float32")
                for k in T.serial(8):
                    table[k] = T.float32(k)
                for i, j in T.Parallel(8, 4):
                    X[i, j] = table[i]


def test_local_indexed_by_constant_or_serial_variable_builds(tmp_path):
    @T.prim_func
    def fine(X: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_local((1,), "float32")
            lanes = T.alloc_local((4,), "float32")
            s[0] = T.float32(3)
            for i in T.Parallel(128):
                for v in T.serial(4):
                    lanes[v] = X[i] + T.float32(v)
                X[i] = lanes[3] * s[0]

    assert _build(fine, tmp_path)


def test_parallel_nested_after_a_statement_refused(tmp_path):
    @T.prim_func
    def nested(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(8):
                B[i] = 0.0
                for j in T.Parallel(16):
                    B[i * 16 + j] = A[i * 16 + j]

    with pytest.raises(ValueError, match=r"nested parallel loops are not allowed"):
        _build(nested, tmp_path)


def test_parallel_serial_parallel_refused(tmp_path):
    @T.prim_func
    def psp(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(8):
                for j in T.serial(4):
                    for k in T.Parallel(4):
                        B[i * 16 + j * 4 + k] = A[i * 16 + j * 4 + k]

    with pytest.raises(ValueError, match=r"nested parallel loops are not allowed"):
        _build(psp, tmp_path)


def test_pipelined_inside_parallel_refused(tmp_path):
    @T.prim_func
    def pip(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(8):
                for k in T.Pipelined(16, num_stages=2):
                    B[i * 16 + k] = A[i * 16 + k]

    with pytest.raises(ValueError, match=r"T\.Pipelined loop inside a T\.Parallel"):
        _build(pip, tmp_path)


def test_whole_body_nests_and_serial_between_build(tmp_path):
    @T.prim_func
    def ok(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(16):
                for j in T.Parallel(16):
                    B[i * 16 + j] = A[i * 16 + j] + 1.0
            for i in T.serial(2):
                for j in T.Parallel(128):
                    B[i * 128 + j] = B[i * 128 + j] * 2.0

    assert _build(ok, tmp_path)
