"""T.gemm on CPU: the gemm pass's choices (family, layouts, pipelining), its errors, real
cubins for every dtype x transpose x arch with parameter tables checked against the ABI,
and ptxas's verdict that the wgmma main loop is not serialized."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.runtime.cubin import check_abi, read_cubin
from tilecute.runtime.cubingen import _import_source, compile_cubin
from tilecute.transform.select_mma import GemmError
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.codegen.cute import emit_cute

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "examples")))  # as conftest: locations match the digest test
import gemm as G  # noqa: E402

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


def _stmts(plan, cls):
    return [s for s in walk_stmts(plan.func.kernels[0].body) if isinstance(s, cls)]


def _layouts(plan):
    return {s.buffer.name: s.layout for s in _stmts(plan, N.Allocate)}


def _cubin(plan, tmp_path):
    path = tmp_path / "k.py"
    path.write_text(emit_cute(plan))
    os.environ["CUTE_DSL_ARCH"] = plan.arch
    cubin = compile_cubin(str(path), plan.func.name, plan.arch, str(tmp_path))
    check_abi(read_cubin(cubin), plan.abi)
    return cubin


# ---- what the passes choose ----------------------------------------------------------------
def test_wgmma_plan_for_the_issue_example():
    plan = lower(G.matmul(tm=128, tn=128, tk=64, stages=3, threads=256), "sm_90a")
    layouts = _layouts(plan)
    assert layouts["xs"] == N.Layout("tma_swizzled", swizzle=128)
    assert layouts["ws"] == N.Layout("tma_swizzled", swizzle=128)
    assert layouts["acc"] == N.Layout("mma", threads=256, mma="wgmma", warps=(2, 1))
    (g,) = _stmts(plan, N.Gemm)
    assert g.wg_wait == 1  # the last statement of a pipelined body keeps its MMAs in flight
    descs = {p.name: p.tma for p in plan.abi.kernels[0].params if p.kind == "tma_desc"}
    # X's tile is one 128 x 64 box; W's (64, 128) tile is two 64-column chunks of one box each
    assert descs["X_desc"].box == (128, 64) and descs["W_desc"].box == (64, 64)
    assert all(d.swizzle == 128 and d.l2_promotion == 128 for d in descs.values())
    # full barriers (one arrival per load) and empty barriers (every thread releases)
    bars = [a for a in _stmts(plan, N.Allocate) if a.layout and a.layout.kind == "mbarrier"]
    assert [(int(a.buffer.shape[0].value), a.layout.threads) for a in bars] == [(3, 2), (3, 256)]
    assert not _stmts(plan, N.Barrier) or all(
        b not in walk_stmts([f for f in _stmts(plan, N.For) if f.kind == "pipelined"][0].body)
        for b in _stmts(plan, N.Barrier))
    src = emit_cute(plan)
    assert "tcm.gemm(tc_mma0, tc_tid, acc," in src and "wait=1)" in src
    assert "tcm.drain(acc)" in src
    assert "chunks=2, step=64, chunk_bytes=8192" in src


def test_mma_family_and_warps():
    plan = lower(G.matmul(tm=128, tn=128, tk=32, threads=128), "sm_80")
    assert _layouts(plan)["acc"] == N.Layout("mma", threads=128, mma="mma", warps=(2, 2))
    assert not [p for p in plan.abi.kernels[0].params if p.kind == "tma_desc"]  # cp.async on sm_80
    assert "tcm.gemm_warp(" in emit_cute(plan)
    # tf32 takes mma.sync on Hopper too (CuTe DSL has no tf32 wgmma atom)
    plan = lower(G.matmul(dtype="float32", tk=32, transpose_B=True), "sm_90a")
    assert _layouts(plan)["acc"].mma == "mma"


def test_epilogue_through_shared_memory_is_a_tma_store():
    plan = lower(G.matmul(tn=256, epilogue="shared"), "sm_90a")
    src = emit_cute(plan)
    assert "tct.store(Y_desc" in src and "chunks=4" in src
    # accumulator pairs go to the swizzled tile as 2-element vectors
    assert "cute.make_tensor(ys.iterator + cute.assume(" in src


def test_use_swizzle_rebinds_the_block_indices():
    plan = lower(G.matmul(panel=8), "sm_90a")
    lets = [s.var.name for s in _stmts(plan, N.Let)]
    assert lets[:5] == ["block_flat", "panel_index", "panel_first", "panel_offset", "panel_rows"]
    src = emit_cute(plan)
    assert "(col_1_ * 128, " in src and "row_1_ * 128)" in src  # the loads use the new indices (col_1 spelled col_1_)


def test_gemm_round_trips_through_json_and_the_printer():
    func = G.matmul()
    again = from_json(to_json(func))
    assert print_func(again) == print_func(func)
    assert "T.gemm(xs, ws, acc, transpose_A=False, transpose_B=False, clear_accum=False)" in print_func(func)
    plan = lower(func, "sm_90a")
    assert "wg_wait=1" in print_func(plan.func)
    assert from_json(to_json(plan.func)) == plan.func


# ---- warp specialization -------------------------------------------------------------------
def test_warp_specialized_plan():
    """A producer warpgroup after the 256 compute threads runs the TMA loads in its own
    loop; the compute threads wait for full stages and release them, with no TMA and no
    block barrier in their loop; both roles set their register budgets."""
    plan = lower(G.matmul(tn=256, epilogue="shared", panel=16, warp_specialize=True), "sm_90a")
    scope = plan.func.kernels[0]
    assert scope.producer_threads == 128 and plan.abi.kernels[0].block == (384, 1, 1)
    split = scope.body[-1]
    assert isinstance(split, N.If) and print_func(plan.func).count("T.get_thread_binding(0) >= 256") == 1
    assert split.then[0] == N.SetMaxNReg(24, False) and split.orelse[0] == N.SetMaxNReg(240, True)
    # the shared buffers and the T.use_swizzle Lets stay before the split: both roles see them
    assert all(isinstance(s, (N.Allocate, N.Let)) for s in scope.body[:-1])
    (feed,) = [f for f in walk_stmts(split.then) if isinstance(f, N.For)]
    assert len([s for s in walk_stmts(feed.body) if isinstance(s, N.TmaCopy)]) == 2
    assert any(isinstance(s, N.MBarrierWait) for s in walk_stmts(feed.body))  # waits for "empty"
    (loop,) = [f for f in walk_stmts(split.orelse) if isinstance(f, N.For) and f.kind == "pipelined"]
    inner = list(walk_stmts(loop.body))
    assert not any(isinstance(s, (N.TmaCopy, N.Barrier)) for s in inner)
    assert any(isinstance(s, N.MBarrierArrive) for s in inner)
    src = emit_cute(plan)
    assert "cute.arch.setmaxregister_decrease(24)" in src and "setmaxregister_increase(240)" in src
    assert "if tc_tid == 256:" in src and "min_blocks_per_mp=1" in src
    # the epilogue's barrier before the TMA store leaves the producer out
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=256)" in src
    assert "sync_threads()" in src.split("if tc_tx >= 256:")[0]  # barrier init: every thread
    assert "sync_threads()" not in src.split("if tc_tx >= 256:")[1]


@pytest.mark.parametrize("kw,ws", [
    (dict(tn=256, epilogue="shared"), True),  # 208 KiB of shared memory: one block per SM anyway
    (dict(tn=256, stages=4), True),
    (dict(), False),  # 128 x 128 x 64 x 3 stages: 96 KiB, two blocks fit on an SM
    (dict(tm=64, tn=64, threads=128), False),
    (dict(tn=256, epilogue="shared", warp_specialize=False), False),  # asked not to
])
def test_warp_specialization_by_default_when_it_costs_no_occupancy(kw, ws):
    plan = lower(G.matmul(**kw), "sm_90a")
    assert (plan.func.kernels[0].producer_threads == 128) == ws


def _static_gemm(size):
    @T.prim_func
    def static_gemm(A: T.Tensor((size, size), "float16"), B: T.Tensor((size, size), "float16"),
                    C: T.Tensor((size, size), "float16")):
        with T.Kernel(size // 128, size // 128, threads=128) as (bx, by):
            a = T.alloc_shared((128, 32), "float16")
            b = T.alloc_shared((32, 128), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            for k in T.Pipelined(size // 32, num_stages=3):
                T.copy(A[by * 128, k * 32], a)
                T.copy(B[k * 32, bx * 128], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 128, bx * 128])
    return static_gemm


@pytest.mark.parametrize("size,ws", [(1024, True), (1152, False), (2048, False)])
def test_warp_specialization_by_default_on_grids_of_one_block_per_sm(size, ws):
    """48 KiB of shared memory would fit several blocks on an SM, but a constant grid of at
    most 78 blocks (the fewest SMs of a Hopper GPU) gives each block an SM of its own: the
    producer warpgroup costs nothing there (8 x 8 blocks), and stays off on larger grids
    (9 x 9 = 81, 16 x 16)."""
    plan = lower(_static_gemm(size), "sm_90a")
    assert (plan.func.kernels[0].producer_threads == 128) == ws
    if ws:
        assert "setmaxregister_decrease(24)" in emit_cute(plan)


def _hidden_origin(ws):
    @T.prim_func
    def hidden(A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"),
               C: T.Tensor((128, 256), "float16")):
        with T.Kernel(1, threads=256) as bx:
            a = T.alloc_shared((128, 64), "float16")
            b = T.alloc_shared((64, 256), "float16")
            ys = T.alloc_shared((128, 256), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
            t = T.alloc_local((1,), "int32")
            c = T.alloc_fragment((128, 256), "float32")
            t[0] = 2
            base = t[0] * 64
            T.clear(c)
            for k in T.Pipelined(8, num_stages=3, warp_specialize=ws):
                T.copy(A[base, k * 64], a)
                T.copy(B[k * 64, 0], b)
                T.gemm(a, b, c)
            T.copy(c, ys)
            T.copy(ys, C[0, 0])
    return hidden


def test_producer_must_see_the_load_origins():
    """The producer warpgroup sees block indices, parameters and the pure top-level Lets
    before the loop; an origin computed from a thread's registers is an error when asked
    for, and keeps the default off."""
    from tilecute.transform.tma_copies import TmaError

    with pytest.raises(TmaError, match=r"the loads use \['base'\]"):
        lower(_hidden_origin(True), "sm_90a")
    assert lower(_hidden_origin(None), "sm_90a").func.kernels[0].producer_threads == 0


def test_warp_specialized_budget_for_one_compute_warpgroup():
    plan = lower(G.matmul(tm=64, tn=128, threads=128, warp_specialize=True), "sm_90a")
    split = plan.func.kernels[0].body[-1]
    assert plan.abi.kernels[0].block == (256, 1, 1) and split.orelse[0] == N.SetMaxNReg(256, True)


def test_warp_specialized_lowered_ir_round_trips():
    plan = lower(G.matmul(warp_specialize=True), "sm_90a")
    text = print_func(plan.func)
    assert "producer_threads=128" in text and "T.set_max_nreg(24, 0)" in text
    assert "warp_specialize=True" in text
    assert from_json(to_json(plan.func)) == plan.func
    func = G.matmul(warp_specialize=True)
    assert "warp_specialize=True" in print_func(func) and T.from_script(print_func(func)) == func
    # a kernel scope with a producer warpgroup parses back from its printed form
    scope = plan.func.kernels[0]
    bare = N.PrimFunc("bare", plan.func.params, (N.KernelScope(
        scope.grid, scope.threads, scope.block_vars, (N.SetMaxNReg(40, False),),
        producer_threads=128),), plan.func.symbols)
    assert T.from_script(print_func(bare)) == bare


def test_set_max_nreg_needs_hopper():
    from tilecute.codegen.cute import CodegenError

    @T.prim_func
    def regs(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.set_max_nreg(240, 1)
            A[T.get_thread_binding(0)] = 1.0
    assert "cute.arch.setmaxregister_increase(240)" in emit_cute(lower(regs, "sm_90a"))
    assert "T.set_max_nreg(240, 1)" in print_func(regs)
    assert T.from_script(print_func(regs)) == regs
    with pytest.raises(CodegenError, match="prim_func 'regs'.*sm_90a instruction; the target is sm_80"):
        emit_cute(lower(regs, "sm_80"))
    with pytest.raises(Exception, match="multiple of 8 from 24 to 256"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.set_max_nreg(20, 0)
                A[T.get_thread_binding(0)] = 1.0
        lower(bad, "sm_90a")


def _ws_loop(gemm=True, loops=1):
    @T.prim_func
    def ws(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            a2 = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.clear(c)
            for k in T.Pipelined(4, num_stages=2, warp_specialize=True):
                T.copy(A[0, k * 64], a)
                T.copy(B[k * 64, 0], b)
                if gemm:
                    T.gemm(a, b, c)
            if loops == 2:
                for k in T.Pipelined(4, num_stages=2, warp_specialize=True):
                    T.copy(B[0, k * 64], a2)
                    T.gemm(a2, b, c)
            T.copy(c, A[0, 0])
    return ws


@pytest.mark.parametrize("kw,arch,match", [
    ({}, "sm_80", r"needs sm_90a"),
    (dict(gemm=False), "sm_90a", r"ends with a wgmma T.gemm"),
    (dict(loops=2), "sm_90a", r"at most one T.Pipelined\(warp_specialize=True\)"),
])
def test_warp_specialize_errors_name_the_kernel(kw, arch, match):
    from tilecute.transform.tma_copies import TmaError

    with pytest.raises(TmaError, match=match) as e:
        lower(_ws_loop(**kw), arch)
    assert "prim_func 'ws'" in str(e.value)


# ---- A from registers (wgmma RS) ------------------------------------------------------------
def test_a_in_registers_plan():
    plan = lower(G.matmul_a_registers(), "sm_90a")
    layouts = _layouts(plan)
    assert layouts["xr"] == N.Layout("mma", threads=256, mma="wgmma", warps=(2, 1), operand="A")
    assert layouts["ws"].kind == "tma_swizzled"
    (g,) = _stmts(plan, N.Gemm)
    assert g.wg_wait == 0  # the next step rewrites A's registers: no MMAs left in flight
    src = emit_cute(plan)
    assert 'xr, tc_xr_ij = tcm.a_fragment("wgmma", (2, 1), (128, 64), cutlass.Float16, tc_tid)' in src
    assert "tcm.gemm(tc_mma0, tc_tid, acc, xr, tcm.operand(" in src and "a_regs=True)" in src
    text = print_func(plan.func)
    assert 'T.Layout("mma", threads=256, mma="wgmma", warps=(2, 1), operand="A")' in text


def test_a_in_registers_warp_specialized_releases_each_step():
    plan = lower(G.matmul_a_registers(warp_specialize=True), "sm_90a")
    (loop,) = [f for f in _stmts(plan, N.For) if f.kind == "pipelined"]
    assert isinstance(loop.body[-1], N.MBarrierArrive)  # this step's stage, right after its MMAs
    assert [g.wg_wait for g in _stmts(plan, N.Gemm)] == [0]


def test_accumulator_moves_into_an_a_fragment():
    """The chained GEMM: the first accumulator is cast into the second T.gemm's A
    registers, register for register (same (i, j) per register)."""
    plan = lower(G.matmul_chain(), "sm_90a")
    assert _layouts(plan)["p"].operand == "A" and _layouts(plan)["s"].operand == ""
    src = emit_cute(plan)
    assert "p[tc_r3 + tc_lane4] = cutlass.Float16(s[tc_r3 + tc_lane4])" in src


def test_a_fragment_walked_in_part_is_a_clear_error():
    from tilecute.transform.layout_inference import LayoutError

    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 32), "float16")
            s = T.alloc_fragment((64, 32), "float32")
            p = T.alloc_fragment((64, 64), "float16")
            c = T.alloc_fragment((64, 32), "float32")
            T.copy(A[0, 0], a)
            T.copy(A[0, 0], b)
            T.gemm(a, b, s, clear_accum=True)
            for i, j in T.Parallel(64, 32):
                p[i, j] = T.Cast("float16", s[i, j])
            T.gemm(p, b, c, clear_accum=True)
    with pytest.raises(LayoutError, match="fragment 'p' has a T.gemm register layout"):
        lower(bad, "sm_90a")


# ---- errors --------------------------------------------------------------------------------
def _mm(a_shape, b_shape, c_shape, dtype="float16", c_dtype="float32", threads=128,
        a_scope="shared", transpose_B=False, b_scope="shared"):
    cm, cn = c_shape

    @T.prim_func
    def mm(A: T.Tensor((256, 256), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            if a_scope == "shared":
                a = T.alloc_shared(a_shape, dtype)
            else:
                a = T.alloc_fragment(a_shape, dtype)
            if b_scope == "shared":
                b = T.alloc_shared(b_shape, dtype)
            else:
                b = T.alloc_fragment(b_shape, dtype)
            c = T.alloc_fragment(c_shape, c_dtype)
            T.clear(c)
            T.gemm(a, b, c, transpose_B=transpose_B)
            for i, j in T.Parallel(cm, cn):
                A[i, j] = T.Cast(dtype, c[i, j])
    return mm


@pytest.mark.parametrize("args,kw,arch,match", [
    (((64, 32), (64, 64), (64, 64)), {}, "sm_90a", r"shapes do not chain"),
    (((64, 32), (32, 64), (64, 64)), dict(threads=96), "sm_90a", r"warpgroups of 128 threads"),
])
def test_errors_name_the_kernel_and_operands(args, kw, arch, match):
    # (float16 accumulators, float8 MN-major or on sm_80, and archs without tensor cores
    # are no longer errors: tests/test_gemm_dtypes.py; nor fragment operands no MMA reads
    # from registers, which go through shared memory: tests/test_gemm_fragment_operands.py)
    with pytest.raises(GemmError, match=match) as e:
        lower(_mm(*args, **kw), arch)
    assert "prim_func 'mm'" in str(e.value) and "T.gemm(a, b, c)" in str(e.value)


def _mm_b_columns(lo, hi):
    """A T.gemm reading columns [lo, hi) of a (32, 64) shared B stored (K, N)."""

    @T.prim_func
    def mm(A: T.Tensor((256, 256), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            c = T.alloc_fragment((64, hi - lo), "float32")
            T.clear(c)
            T.gemm(a, b[:, lo:hi], c)
            for i, j in T.Parallel(64, hi - lo):
                A[i, j] = T.Cast("float16", c[i, j])
    return mm


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_part_off_the_swizzle_chunks_is_refused(arch):
    with pytest.raises(GemmError, match=r"prim_func 'mm': T\.gemm\(a, b\[0:32, 8:16\], c\): B \('b'\) is "
                                        r"32 x 64 float16: its rows must be a multiple of 32 bytes.*"
                                        r"start and end on 32-byte chunks"):
        lower(_mm_b_columns(8, 16), arch)


@pytest.mark.parametrize("n", [8, 24])
def test_mn_major_b_no_swizzle_tiles_runs_on_mma_sync(tmp_path, n):
    """B stored (K, N) with 8 or 24 columns of float16 (16 / 48 bytes: no 32-byte swizzle
    chunk tiles them) on sm_90a: TileLang takes it (wgmma over an unswizzled tile); here
    warp mma.sync, which reads the rows as they are, as on sm_80 (it was refused)."""
    plan = lower(_mm((64, 16), (16, n), (64, n)), "sm_90a")
    assert _layouts(plan)["c"].mma == "mma" and _layouts(plan)["b"].kind == "row_major"
    assert _layouts(plan)["a"].kind == "tma_swizzled"
    _cubin(plan, tmp_path)
    # 16 columns (32 bytes) stay on wgmma
    assert _layouts(lower(_mm((64, 16), (16, 16), (64, 16)), "sm_90a"))["c"].mma == "wgmma"


def _wgmma_gemm_kn_b(n):
    @T.prim_func
    def mm(A: T.Tensor((256, 256), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 16), "float16")
            b = T.alloc_shared((16, n), "float16")
            c = T.alloc_fragment((64, n), "float32")
            T.clear(c)
            T.wgmma_gemm(a, b, c)
            for i, j in T.Parallel(64, n):
                A[i, j] = T.Cast("float16", c[i, j])
    return mm


def test_wgmma_gemm_names_the_unswizzled_operand():
    with pytest.raises(GemmError, match=r"T\.wgmma_gemm runs on wgmma only: B \('b'\) is 16 x 24 float16: "
                                        r"its rows must be a multiple of 32 bytes .*\(wgmma reads its "
                                        r"shared operands swizzled\); T\.gemm would run it on mma\.sync"):
        lower(_wgmma_gemm_kn_b(24), "sm_90a")


# ---- cubins --------------------------------------------------------------------------------
CASES = [("sm_90a", dt, ta, tb, {}) for dt in ("float16", "bfloat16")
         for ta in (False, True) for tb in (False, True)]
CASES += [("sm_90a", "float8_e4m3", False, True, dict(tk=128)),
          ("sm_90a", "float8_e5m2", False, True, dict(tk=128)),
          ("sm_90a", "float32", False, True, dict(tk=32)),
          ("sm_90a", "bfloat16", False, False, dict(tn=256, stages=3, epilogue="shared", panel=16,
                                                    warp_specialize=False))]
CASES += [("sm_90a", "bfloat16", False, False, dict(tn=256, epilogue="shared", panel=16,
                                                    warp_specialize=True)),
          ("sm_90a", "float16", True, True, dict(warp_specialize=True)),
          ("sm_90a", "float16", False, False, dict(tm=64, threads=128, stages=4, warp_specialize=True)),
          ("sm_90a", "float8_e4m3", False, True, dict(tk=128, warp_specialize=True))]
RS_CASES = [("matmul_a_registers", {}), ("matmul_a_registers", dict(warp_specialize=True)),
            ("matmul_a_registers", dict(dtype="bfloat16", tm=64, threads=128)),
            ("matmul_chain", {}), ("matmul_chain", dict(tm=128, threads=256, n1=128))]
CASES += [("sm_80", dt, ta, tb, dict(tk=32, threads=128)) for dt in ("float16", "bfloat16")
          for ta in (False, True) for tb in (False, True)]
CASES += [("sm_80", "float32", False, True, dict(tk=32, threads=128))]


@pytest.mark.parametrize("arch,dtype,ta,tb,kw", CASES)
def test_gemm_variants_compile_to_cubins(tmp_path, arch, dtype, ta, tb, kw):
    plan = lower(G.matmul(dtype=dtype, transpose_A=ta, transpose_B=tb, **kw), arch)
    _cubin(plan, tmp_path)


SM80_ON_HOPPER = {"disable_tma": True, "disable_wgmma": True}


def test_options_put_sm80_code_paths_on_hopper():
    """disable_tma + disable_wgmma (TileLang's pass configs) on sm_90a: cp.async into the
    swizzled tiles, ldmatrix and mma.sync, the sm_80 kernel an H100 can run."""
    plan = lower(G.matmul(threads=128, tk=32), "sm_90a", SM80_ON_HOPPER)
    assert _layouts(plan)["acc"].mma == "mma"
    assert not [p for p in plan.abi.kernels[0].params if p.kind == "tma_desc"]
    src = emit_cute(plan)
    assert "tcc.copy_async(" in src and "tcm.gemm_warp(" in src
    only_wgmma = lower(G.matmul(), "sm_90a", {"disable_wgmma": True})
    assert _layouts(only_wgmma)["acc"].mma == "mma"
    assert [p for p in only_wgmma.abi.kernels[0].params if p.kind == "tma_desc"]  # TMA stays


@pytest.mark.parametrize("options,match", [({"disable_wgmma": 1}, r"takes True or False"),
                                           ({"fastmath": True}, r"unknown compile option 'fastmath'")])
def test_unknown_or_bad_options_are_errors(options, match):
    from tilecute.options import OptionError

    with pytest.raises(OptionError, match=match):
        lower(G.matmul(), "sm_90a", options)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_sm80_paths_on_hopper_compile(tmp_path, ta, tb):
    plan = lower(G.matmul(threads=128, tk=32, transpose_A=ta, transpose_B=tb), "sm_90a", SM80_ON_HOPPER)
    _cubin(plan, tmp_path)


@pytest.mark.parametrize("fn,kw", RS_CASES)
def test_a_in_registers_compiles(tmp_path, fn, kw):
    _cubin(lower(getattr(G, fn)(**kw), "sm_90a"), tmp_path)


@pytest.mark.parametrize("ws", [False, True])
def test_bias_relu_epilogue_compiles(tmp_path, ws):
    _cubin(lower(G.matmul_bias_relu(warp_specialize=ws), "sm_90a"), tmp_path)


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="needs ptxas (CUDA toolkit)")
@pytest.mark.parametrize("epilogue,ws", [("direct", False), ("shared", False), ("shared", True)])
def test_ptxas_keeps_the_wgmma_pipeline(tmp_path, epilogue, ws):
    """ptxas serializes every wgmma of a kernel when something reads the accumulators
    while MMAs may be in flight (C7514); the drain's register fence prevents it."""
    import cutlass.cute as cute

    plan = lower(G.matmul(tn=256, stages=3, dtype="bfloat16", epilogue=epilogue,
                          warp_specialize=ws), "sm_90a")
    path = tmp_path / "k.py"
    path.write_text(emit_cute(plan))
    os.environ["CUTE_DSL_ARCH"] = "sm_90a"
    module = _import_source(str(path), "tilecute_gemm_ptx_check")
    cute.compile(getattr(module, plan.func.name), *module.placeholder_args(),
                 options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    (ptx,) = glob.glob(str(tmp_path / "*.ptx"))
    out = subprocess.run([PTXAS, "-arch=sm_90a", "-v", ptx, "-o", str(tmp_path / "x.cubin")],
                         capture_output=True, text=True, check=True)
    assert "wgmma.mma_async" in open(ptx).read()
    assert "C7514" not in out.stderr and "serialized" not in out.stderr, out.stderr
    assert "0 bytes spill stores" in out.stderr
    assert ("setmaxnreg" in open(ptx).read()) == ws
