"""Tile ops on the memory hierarchy: every tile example compiles to sm_90a and sm_80
cubins matching its ABI; the layout pass's choices; barriers and cp.async placement; and
the errors for invalid programs."""

import os

import pytest

import tile_ops as E
import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.validate import ValidationError
from tilecute.ir.visitor import walk_stmts
from tilecute.language import from_script
from tilecute.language.parser import FrontendError
from tilecute.runtime.cubin import check_abi
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import lower
from tilecute.codegen.cute import emit_cute

CASES = [("softmax", {}), ("softmax", {"dtype": "bfloat16", "block_n": 1024, "threads": 128}),
         ("softmax", {"align": 1, "block_n": 2048}), ("layernorm", {}),
         ("layernorm", {"dtype": "bfloat16"}), ("rmsnorm", {}), ("rmsnorm", {"dtype": "bfloat16"}),
         ("row_sum", {}), ("transpose", {}), ("histogram", {}), ("tile_copy", {})]


def _ids(cases):
    return [name + "".join(f"-{k}={v}" for k, v in kw.items()) for name, kw in cases]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name,kw", CASES, ids=_ids(CASES))
def test_tile_example_compiles_to_a_cubin_matching_the_abi(name, kw, arch, tmp_path):
    func = E.ALL[name](**kw)
    info = tilecute.build_cubin(func, arch, out_dir=str(tmp_path))
    assert os.path.getsize(info.path) > 0
    check_abi(info, lower(func, arch).abi)


def _allocs(func):
    out = {}

    def visit(body):
        for s in body:
            if isinstance(s, N.Allocate):
                out[s.buffer.name] = s.layout
            for sub in ("body", "then", "orelse"):
                visit(getattr(s, sub, ()))
    for k in func.kernels:
        visit(k.body)
    return out


def _nests(func):
    out = []

    def visit(body):
        for s in body:
            if isinstance(s, N.For) and s.kind == "parallel":
                inner = s
                while len(inner.body) == 1 and isinstance(inner.body[0], N.For) and inner.body[0].kind == "parallel":
                    inner = inner.body[0]
                out.append(inner)
            else:
                for sub in ("body", "then", "orelse"):
                    visit(getattr(s, sub, ()))
    for k in func.kernels:
        visit(k.body)
    return out


def test_softmax_layouts_rows_spread_over_threads_stats_replicated():
    plan = lower(E.softmax(block_n=4096, threads=256))
    layouts = _allocs(plan.func)
    # 16 bytes of fp16 per global access -> 8 lanes; 4096 = 2 steps of 256 threads x 8
    assert layouts["x"] == N.Layout("blocked", threads=256, vector=8)
    assert layouts["row_max"] == N.Layout("replicated")
    assert layouts["row_max_scratch"] == N.Layout("row_major")  # 8 warps exchange through it
    assert {n.vector_width for n in _nests(plan.func)} == {8}
    assert {a.name: a.align for a in plan.abi.args} == {"X": 16, "Y": 16}
    # two scratch buffers of 8 float32 (one per warp), used one reduction after the other:
    # they share bytes
    assert plan.abi.kernels[0].dynamic_smem == 8 * 4


def test_reduced_rows_shorter_than_a_step_take_fewer_lanes():
    # 1024-element rows over 256 threads: 8 lanes would leave threads without a whole
    # part of each row, so the pass takes 4
    plan = lower(E.softmax(block_n=1024, threads=256))
    assert _allocs(plan.func)["x"] == N.Layout("blocked", threads=256, vector=4)


def test_transpose_tile_is_swizzled_and_the_copy_is_vectorized_on_the_global_side():
    plan = lower(E.transpose())
    assert _allocs(plan.func)["tile"] == N.Layout("swizzled", swizzle=32)
    src = emit_cute(plan)
    assert "^ (i1 & 31)" in src  # the swizzle is in the tile's index
    assert {a.name: a.align for a in plan.abi.args} == {"A": 16, "B": 16}


def test_global_to_shared_copy_is_cp_async_with_a_wait_before_the_barrier():
    # sm_80: cp.async (on sm_90a this copy goes through TMA, see tests/test_tma.py)
    plan = lower(E.tile_copy(), "sm_80")
    nests = _nests(plan.func)
    assert nests[0].async_copy and not nests[1].async_copy
    script = plan.func.script()
    assert "T.sync_threads(wait_async=True)" in script
    src = emit_cute(plan)
    assert src.index("tcc.copy_async(") < src.index("cute.arch.cp_async_commit_group()") \
        < src.index("cute.arch.cp_async_wait_group(0)") < src.index("cute.arch.sync_threads()")


def test_histogram_barriers_between_shared_phases():
    script = lower(E.histogram()).func.script()
    # clear -> barrier -> shared atomics -> barrier -> global atomics
    assert script.count("T.sync_threads()") == 2


def test_printed_lowered_ir_shows_layouts_and_reparses_to_the_same_function():
    func = lower(E.layernorm()).func
    text = func.script()
    assert 'T.Layout("blocked", threads=256, vector=8)' in text
    assert 'T.Layout("replicated")' in text
    again = from_script(text)
    assert again.script() == text


def test_copy_between_mismatched_shapes_is_an_error():
    with pytest.raises(FrontendError, match=r"T.copy\(s, f\): 's' has shape \(32, 64\) and 'f' "
                                            r"\(64, 64\); two whole buffers must have one shape"):
        @T.prim_func
        def bad(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((32, 64), "float32")
                f = T.alloc_fragment((64, 64), "float32")
                T.copy(s, f)


def test_reduce_over_a_missing_axis_is_an_error():
    with pytest.raises(ValidationError, match="reduce over dim 1 of 'x', which has 1 dims"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                x = T.alloc_fragment((128,), "float32")
                s = T.alloc_fragment((1,), "float32")
                T.reduce_sum(x, s, dim=1)


def test_reduce_into_a_wrong_shape_is_an_error():
    with pytest.raises(ValidationError, match=r"gives shape \(4,\) \(or \(4, 1\)\), but 's' has shape \(128,\)"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                x = T.alloc_fragment((4, 128), "float32")
                s = T.alloc_fragment((128,), "float32")
                T.reduce_sum(x, s, dim=1)


def test_fragment_indexed_outside_a_parallel_loop_is_replicated():
    # every thread runs a statement outside a nest, so the fragment it reads is held whole
    # by every thread (issue 17: TileLang programs read reduction results this way)
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((128,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A, x)
            B[0] = x[3]
            for i in T.Parallel(1):
                s[i] = x[5] * 2.0
                B[1] = s[i]

    plan = lower(f)
    layouts = {a.buffer.name: a.layout for a in walk_stmts(plan.func.kernels[0].body)
               if isinstance(a, N.Allocate)}
    assert layouts["x"] == N.Layout("replicated")


def test_writing_a_replicated_fragment_from_a_distributed_loop_is_an_error():
    @T.prim_func
    def bad(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((128,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A, x)
            T.reduce_sum(x, s, dim=0)
            for i in T.Parallel(128):
                s[0] = x[i]
                B[i] = s[0]

    with pytest.raises(LayoutError, match="writes the replicated fragment 's'"):
        lower(bad)


def test_reduce_rows_that_threads_cannot_share_is_an_error():
    @T.prim_func
    def bad(A: T.Tensor((100,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((100,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A, x)
            T.reduce_max(x, s, dim=0)

    with pytest.raises(LayoutError, match="rows of 'x' have 100 elements, neither a multiple of "
                                          "the block's 128 threads nor a power-of-two number"):
        lower(bad)


def test_symbol_divisibility_is_checked_by_the_launcher_abi():
    abi = lower(E.softmax(align=8)).abi
    assert {s.name: s.divisibility for s in abi.symbols} == {"M": 1, "N": 8}
    assert {s.name: s.divisibility for s in lower(E.softmax(align=1)).abi.symbols} == {"M": 1, "N": 1}


def test_shared_memory_past_the_block_limit_is_an_error():
    @T.prim_func
    def big(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((256, 256), "float32")
            T.copy(A, s[0, 0:128])

    with pytest.raises(ValueError, match="needs 262144 bytes of shared memory"):
        lower(big)


def test_ir_json_round_trips_infinite_constants():
    from tilecute.ir.serialize import canonical_json, from_json, to_json

    func = E.softmax()
    assert from_json(to_json(func)) == func
    assert from_script(func.script()) == func  # printed as T.float32(float("-inf"))
    assert '{"float":"-inf"}' in canonical_json(func)


def test_reduction_result_read_outside_a_loop_builds(tmp_path):
    @T.prim_func
    def row_max(A: T.Tensor((64, 256), "float32"), B: T.Tensor((64,), "float32"),
                C: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=128) as bx:
            a = T.alloc_fragment((256,), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, 0], a)
            T.reduce_max(a, m, dim=0)
            B[bx] = m[0]  # a fragment element read outside T.Parallel
            for i in T.Parallel(1):  # one loop writing a replicated fragment and memory
                m[i] = m[i] * 2.0
                C[bx] = m[i]

    assert tilecute.build_cubin(row_max, "sm_90a", out_dir=str(tmp_path)).kernel_names


def _leading_unit_row_sum(N=256):
    @T.prim_func
    def row_sum_1(A: T.Tensor((64, N), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=128) as bx:
            a = T.alloc_fragment((1, N), "float32")  # a leading unit dim, as TileLang writes rows
            s = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, 0], a)
            T.reduce_sum(a, s, dim=1)
            B[bx] = s[0]
    return row_sum_1


def test_fragment_with_a_leading_unit_dim_is_blocked(tmp_path):
    plan = lower(_leading_unit_row_sum())
    layouts = {a.buffer.name: a.layout for a in walk_stmts(plan.func.kernels[0].body)
               if isinstance(a, N.Allocate)}
    assert layouts["a"].kind == "blocked" and layouts["s"].kind == "replicated"
    assert tilecute.build_cubin(_leading_unit_row_sum(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_leading_unit_dim_row_sum_on_gpu():
    import torch

    a = torch.randn(64, 256, device="cuda")
    b = torch.empty(64, device="cuda")
    tilecute.compile(_leading_unit_row_sum())(a, b)
    torch.testing.assert_close(b, a.sum(1), atol=1e-4, rtol=1e-4)
