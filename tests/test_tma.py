"""TMA on CPU: which copies become TMA, the pipelined schedule, descriptor specs in the
ABI, errors, and real sm_90a cubins whose parameter tables match the ABI."""

import os
import sys

import pytest

import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.runtime.abi import TmaSpec
from tilecute.runtime.cubin import check_abi, read_cubin
from tilecute.runtime.cubingen import compile_cubin
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.transform.tma_copies import TmaError
from tilecute.codegen.cute import emit_cute

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "examples")))  # as conftest: locations match the digest test
import tma_ops as ex  # noqa: E402


def _stmts(plan, cls):
    return [s for k in plan.func.kernels for s in walk_stmts(k.body) if isinstance(s, cls)]


def _cubin(plan, tmp_path):
    path = tmp_path / "k.py"
    path.write_text(emit_cute(plan))
    os.environ["CUTE_DSL_ARCH"] = plan.arch
    cubin = compile_cubin(str(path), plan.func.name, plan.arch, str(tmp_path))
    info = read_cubin(cubin)
    check_abi(info, plan.abi)
    return info


def test_tma_copy_abi_and_cubin(tmp_path):
    plan = lower(ex.tma_copy((64, 64)), "sm_90a")
    params = plan.abi.kernels[0].params
    descs = [p for p in params if p.kind == "tma_desc"]
    assert [(p.name, p.source, p.dtype) for p in descs] == [
        ("A_desc", "A", "float16"), ("B_desc", "B", "float16")]
    assert descs[0].tma == TmaSpec(box=(64, 64), l2_promotion=128)
    assert {a.name: a.align for a in plan.abi.args} == {"A": 16, "B": 16}
    copies = _stmts(plan, N.TmaCopy)
    assert [c.barrier is not None for c in copies] == [True, False]  # a load, then a store
    info = _cubin(plan, tmp_path)
    (kernel,) = info.kernels.values()
    assert [p.size for p in kernel.params] == [8, 8, 4, 4, 128, 128]  # A, B, D0, D1, descs
    assert kernel.params[4].offset == 48  # 64-byte aligned in the constant bank


@pytest.mark.parametrize("box", [(256,), (8, 16, 64), (2, 2, 8, 64), (1, 2, 2, 8, 32)])
def test_ranks_compile(box, tmp_path):
    plan = lower(ex.tma_copy(box), "sm_90a")
    descs = [p for p in plan.abi.kernels[0].params if p.kind == "tma_desc"]
    assert all(p.tma.box == box for p in descs) and len(descs) == 2
    _cubin(plan, tmp_path)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float8_e4m3"])
def test_dtypes_compile(dtype, tmp_path):
    plan = lower(ex.tma_copy((32, 64), dtype=dtype), "sm_90a")
    assert plan.abi.kernels[0].params[-1].dtype == dtype
    _cubin(plan, tmp_path)


def test_sm80_keeps_cp_async():
    plan = lower(ex.pipelined_copy(), "sm_80")
    assert not _stmts(plan, N.TmaCopy)
    assert all(p.kind != "tma_desc" for p in plan.abi.kernels[0].params)
    assert "tcc.copy_async" in emit_cute(plan)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_pipelined_schedule(stages, tmp_path):
    plan = lower(ex.pipelined_copy(stages=stages), "sm_90a")
    k = plan.func.kernels[0]
    (s_alloc,) = [s for s in k.body if isinstance(s, N.Allocate) and s.buffer.name == "s"]
    assert s_alloc.stages == stages
    (bar,) = [s for s in k.body if isinstance(s, N.Allocate) and s.layout and s.layout.kind == "mbarrier"]
    assert int(bar.buffer.shape[0].value) == stages
    loop = next(s for s in k.body if isinstance(s, N.For))
    # prologue: stages - 1 guarded loads before the loop (the trip count is symbolic)
    before = [s for s in k.body if isinstance(s, N.If)]
    assert len(before) == stages - 1
    # in the loop: the prefetch (behind a block barrier), then the wait, then the compute
    prefetch, wait = loop.body[0], loop.body[1]
    assert isinstance(prefetch, N.If) and isinstance(prefetch.then[0], N.Barrier)
    assert isinstance(prefetch.then[1], N.TmaCopy) and prefetch.then[1].stage is not None
    assert isinstance(wait, N.MBarrierWait)
    if stages > 1:
        assert "k + %d" % (stages - 1) in print_func(plan.func)
    source = emit_cute(plan)
    if stages > 1:  # the body reads stage k % stages of s
        assert f"s = cute.make_tensor(cute.recast_ptr(tc_smem + cute.assume(0 + (k % {stages}) * 8192" in source
    _cubin(plan, tmp_path)


def test_explicit_forms_round_trip_and_compile(tmp_path):
    f = ex.explicit_copy()
    text = print_func(f)
    assert "T.alloc_barrier(128)" in text and "T.mbarrier_wait_parity(bar, 0)" in text
    assert print_func(T.from_script(text)) == text
    (load,) = [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.TmaCopy) and s.barrier]
    assert not load.arrive  # TileLang's T.tma_copy expects the bytes; the threads arrive
    plan = lower(f, "sm_90a")
    assert ", arrive=False)" in emit_cute(plan)
    assert [p.name for p in plan.abi.kernels[0].params if p.kind == "tma_desc"] == ["A_desc", "B_desc"]
    _cubin(plan, tmp_path)


def test_strided_view_descriptor(tmp_path):
    plan = lower(ex.strided_copy(), "sm_90a")
    (desc,) = [p for p in plan.abi.kernels[0].params if p.kind == "tma_desc"]
    assert desc.source == "A" and plan.abi.arg("A").strides == ("S", 1)
    _cubin(plan, tmp_path)


def test_copy_without_tma_alignment_falls_back():
    """N not known to be a multiple of 8 fp16: row strides may not be 16-byte multiples,
    so T.copy keeps cp.async; the explicit form says why."""
    rows, cols = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def f(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((rows, cols), "float16")):
        with T.Kernel(T.ceildiv(cols, 64), T.ceildiv(rows, 64), threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A[by * 64, bx * 64], s)
            T.copy(s, B[by * 64, bx * 64])

    plan = lower(f, "sm_90a")
    assert not _stmts(plan, N.TmaCopy)

    @T.prim_func
    def g(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((rows, cols), "float16")):
        with T.Kernel(T.ceildiv(cols, 64), T.ceildiv(rows, 64), threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(1)
            T.tma_copy(A[by * 64, bx * 64], s, barrier=bar[0])
            T.mbarrier_wait_parity(bar[0], 0)

    with pytest.raises(TmaError, match=r"T.tma_copy between 'A' and 's': stride 0 of 'A' is not "
                                        r"known to be a multiple of 16 bytes"):
        lower(g, "sm_90a")


def test_a_start_read_from_memory_keeps_tma_only_when_aligned():
    """TMA's innermost coordinate must be a multiple of 16 bytes (an odd float32 offset
    stopped the kernel with an illegal instruction on an H200): a window starting at a value
    read from memory (directly or through a Let) keeps the vector path, unless the value's
    coefficient keeps it aligned (a page of 4 floats)."""

    def window(scale, through_let):
        @T.prim_func
        def f(X: T.Tensor((4096,), "float32"), Off: T.Tensor((8,), "int32"),
              O: T.Tensor((8, 128), "float32")):
            with T.Kernel(8, threads=128) as bx:
                s = T.alloc_shared((128,), "float32")
                if through_let:
                    o = Off[bx] * scale
                    T.copy(X[o:o + 128], s)
                else:
                    T.copy(X[Off[bx] * scale:Off[bx] * scale + 128], s)
                for i in T.Parallel(128):
                    O[bx, i] = s[i]
        return lower(f, "sm_90a")

    for through_let in (False, True):
        assert not _stmts(window(1, through_let), N.TmaCopy)
        assert not _stmts(window(2, through_let), N.TmaCopy)
        assert len(_stmts(window(4, through_let), N.TmaCopy)) == 1

    def param_window(scale):  # a scalar parameter is as unknown as a value read
        @T.prim_func
        def g(X: T.Tensor((4096,), "float32"), off: T.int32, O: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((128,), "float32")
                T.copy(X[off * scale:off * scale + 128], s)
                T.copy(s, O)
        return lower(g, "sm_90a")

    assert [s.dst.buffer for s in _stmts(param_window(1), N.TmaCopy)] == ["O"]  # (the store)
    assert len(_stmts(param_window(8), N.TmaCopy)) == 2


def test_tma_errors():
    M = T.symbolic("M")

    @T.prim_func
    def big_box(A: T.Tensor((M, 512), "float16")):
        with T.Kernel(T.ceildiv(M, 4), threads=128) as b:
            s = T.alloc_shared((4, 512), "float16")
            bar = T.alloc_barrier(1)
            T.tma_copy(A[b * 4, 0], s, barrier=bar[0])

    with pytest.raises(TmaError, match=r"box \[4, 512\] has a dim above 256"):
        lower(big_box, "sm_90a")
    with pytest.raises(TmaError, match="T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80"):
        lower(ex.explicit_copy(), "sm_80")

    with pytest.raises(Exception, match="needs barrier="):
        @T.prim_func
        def no_barrier(A: T.Tensor((M, 64), "float16")):
            with T.Kernel(T.ceildiv(M, 64), threads=128) as b:
                s = T.alloc_shared((64, 64), "float16")
                T.tma_copy(A[b * 64, 0], s)

        lower(no_barrier, "sm_90a")


def test_column_walked_tile_keeps_swizzle():
    """transpose reads its tile down columns: TMA's row layout would conflict on banks, so
    the copy keeps cp.async and the element swizzle."""
    import tile_ops

    plan = lower(tile_ops.transpose(), "sm_90a")
    assert not _stmts(plan, N.TmaCopy)
    assert "^" in emit_cute(plan)


@T.prim_func
def _explicit_transpose(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((32, 32), "float32")
        bar = T.alloc_barrier(128)
        T.tma_copy(X[0, 0], s, barrier=bar[0])
        T.mbarrier_arrive(bar[0])
        T.mbarrier_wait_parity(bar[0], 0)
        for i, j in T.Parallel(32, 32):
            Y[i, j] = s[j, i]


def test_a_tile_tma_moves_is_never_column_swizzled(tmp_path):
    """The program's own T.tma_copy writes s row by row (its descriptor has no swizzle), so
    the layout pass keeps s row-major although a nest reads it down columns (it used to
    swizzle it and read each column at XOR-ed places the TMA load never wrote)."""
    plan = lower(_explicit_transpose, "sm_90a")
    (alloc,) = [s for s in walk_stmts(plan.func.kernels[0].body)
                if isinstance(s, N.Allocate) and s.buffer.name == "s"]
    assert alloc.layout == N.Layout("row_major")
    source = emit_cute(plan)
    assert "s[(j + tc_lane4) * 32 + i]" in source and "^" not in source
    _cubin(plan, tmp_path)
