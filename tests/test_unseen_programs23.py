"""A twenty-third set of programs in TileLang's idioms (tests/unseen_programs23.py), aimed
at the cp.async software pipeline (transform/async_pipeline.py): on sm_80 and on sm_90a
with TMA, wgmma and warp specialization off, each builds to a cubin, and the pass's
rewrite is checked in the IR after the barrier pass (stages, the prologue's and refill's
stage indices and guards, the wait counts, the barriers around refills and reads) or,
where a loop must keep one buffer, that it did.  GPU: each matches a torch reference,
compiled without TMA (the cp.async path on the H100)."""

import pytest

import tilecute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.analysis import accesses, buffers_used
from tilecute.transform.pipeline import run_passes

import rounds
import unseen_programs23 as P

NO_TMA = {"disable_tma": True, "disable_wgmma": True, "disable_warp_specialize": True}
TARGETS = [("sm_80", None), ("sm_90a", NO_TMA)]
IDS = ["sm_80", "sm_90a-no-tma"]

PROGRAMS = ["gemm_ragged_every_dim", "gemm_bf16_nt_dynamic_mnk", "gemm_split_k_lo_hi",
            "gemm_fewer_steps_than_stages", "gemm_second_copy_after_first_gemm", "gemm_int8_i32",
            "gemm_swizzle_annotated", "gemm_stages_past_shared_memory", "gemm_one_stage",
            "gemm_program_sync_in_body", "gemm_manual_order_loads_last", "gemm_persistent_tiles",
            "two_loops_one_tile", "two_loops_own_tiles", "batched_gemm_serial_batches",
            "attention_causal_fwd", "paged_decode_page_table", "paged_rows_page_in_var",
            "column_sums_dynamic_rows", "row_max_via_fragment", "fp8_dequant_rows_with_scales",
            "int8_tile_abs_sum", "prefix_carry_in_place", "async_copy_program_mixed",
            "bias_tile_and_vector_sizes", "gemm_k_offset_in_a_let", "paged_page_in_a_let",
            "consume_counted_tiles"]
SM90_ONLY = {"fp8_dequant_rows_with_scales"}  # (fp8 converts by cvt on sm_89+)


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def lowered(name, arch="sm_80", options=None, **kw):
    """The kernel body after the barrier pass."""
    return run_passes(getattr(P, name).get_tir(**kw), arch, options,
                      until="insert_barriers").kernels[0].body


def stages(body):
    return {s.buffer.name: s.stages for s in walk_stmts(body) if isinstance(s, N.Allocate)}


def loops(body):
    return [s for s in walk_stmts(body) if isinstance(s, N.For) and s.kind == "pipelined"]


def waits(stmts):
    return [s.value.args[0].value for s in walk_stmts(stmts) if isinstance(s, N.Evaluate)
            and isinstance(s.value, N.Call) and s.value.name == "ptx_wait_group"]


def fills(stmts):
    return [s for s in walk_stmts(stmts) if isinstance(s, N.For) and s.fill_stage is not None]


def stages_of(nest):
    """The shared buffers a filling nest writes."""
    return {b for b, _, w in accesses([nest]) if w}


def text(x):
    from tilecute.ir.printer import expr_str
    return expr_str(x)


def refill_and_wait(loop):
    """The refill ``If`` the pass put at the top of the step and the wait after it."""
    (refill,) = [s for s in loop.body if isinstance(s, N.If) and fills(s.then)]
    return refill, loop.body[loop.body.index(refill) + 1]


def check_step(loop, G, S):
    """The pass's step: a refill of G nests into stage (k - start + S - 1) % S behind a
    barrier (the stage was read the step before), else G empty groups; then
    wait_group(G * (S - 1)) and a barrier before anything reads a stage."""
    refill, wait = refill_and_wait(loop)
    assert len(fills(refill.then)) == G and isinstance(refill.then[0], N.Barrier)
    assert not refill.then[0].wait_async
    assert [s.value.name for s in refill.orelse] == ["ptx_commit_group"] * G
    assert waits([wait]) == [G * (S - 1)]
    after = loop.body[loop.body.index(wait) + 1:]
    staged = {b for f in fills(refill.then) for b in stages_of(f)}
    first_read = next(i for i, s in enumerate(after) if buffers_used([s]) & staged)
    assert any(isinstance(s, N.Barrier) for s in after[:first_read]), "a barrier after the wait"
    start = "" if isinstance(loop.start, N.Const) and loop.start.value == 0 else \
        f" - {text(loop.start)}"
    want = f"({loop.var.name}{start} + {S - 1}) % {S}"
    assert {text(f.fill_stage) for f in fills(refill.then)} == {want}
    return refill


# ---- every program builds on both targets ----------------------------------------------------
@pytest.mark.parametrize("arch,options", TARGETS, ids=IDS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name, arch, options, tmp_path):
    if name in SM90_ONLY and arch == "sm_80":
        with pytest.raises(Exception, match="float8 values convert only on sm_89"):
            tilecute.build_cubin(getattr(P, name).get_tir(), arch, out_dir=str(tmp_path))
        return
    info = tilecute.build_cubin(getattr(P, name).get_tir(), arch, out_dir=str(tmp_path),
                                options=options)
    assert info.kernel_names


# ---- the rewrite, program by program ----------------------------------------------------------
@pytest.mark.parametrize("arch,options", TARGETS, ids=IDS)
def test_ragged_gemm_refills_guard_the_k_tail(arch, options):
    body = lowered("gemm_ragged_every_dim", arch, options)
    assert stages(body)["A_s"] == stages(body)["B_s"] == 3
    (loop,) = loops(body)
    check_step(loop, 2, 3)
    src = tilecute.compile(P.gemm_ragged_every_dim.get_tir(), target=arch,
                           options=options).get_kernel_source()
    # step ko + 2's 4-element chunks of A past column 100 fall back to zero-filled loads
    assert "if by * 64 + i3 < 200 and (ko + 2) * 32 + (i4 + 3) < 100:" in src
    assert "(ko + 2) * 32 + (i4 + tc_lane" in src


def test_sm90_copy_tma_cannot_take_beside_tma_and_wgmma():
    # sm_90a with TMA on: B's tile goes by TMA (a producer warpgroup), A's rows (200 bytes
    # apart) cannot: A is cp.async, pipelined in the consumer; its refill overwrites the
    # stage the last step's wgmma read, so the wgmma in flight (wg_wait=1) is drained first
    body = lowered("gemm_ragged_every_dim", "sm_90a", None)
    assert stages(body)["A_s"] == stages(body)["B_s"] == 3
    (loop,) = loops(body)
    check_step(loop, 1, 3)
    src = tilecute.compile(P.gemm_ragged_every_dim.get_tir(), target="sm_90a").get_kernel_source()
    refill = src.split("if ko + 2 < 4:")[1]
    assert refill.index("tcm.drain(acc)") < refill.index("cute.arch.barrier(") < \
        refill.index("tcc.copy_async(")
    assert "tct.load(B_desc" in src


def test_dynamic_gemm_rows_of_unknown_alignment_keep_one_buffer():
    # rows K elements apart, K known at run time: element copies, not cp.async (so the
    # loop keeps one buffer, its copies waited for by the barriers)
    body = lowered("gemm_bf16_nt_dynamic_mnk")
    assert set(stages(body).values()) == {1} and not waits(body) and not fills(body)


@pytest.mark.parametrize("arch,options", TARGETS, ids=IDS)
def test_split_k_loop_starting_at_lo(arch, options):
    body = lowered("gemm_split_k_lo_hi", arch, options)
    (loop,) = loops(body)
    assert text(loop.start) == "lo"
    refill = check_step(loop, 2, 3)
    assert text(refill.cond) == "ko - lo + 2 < hi - lo"
    guards = [s for s in body if isinstance(s, N.If) and fills(s.then)]
    assert [text(g.cond) for g in guards] == ["0 < hi - lo", "1 < hi - lo"]
    # the prologue's steps are lo and lo + 1, into stages 0 and 1
    assert [text(f.fill_stage) for g in guards for f in fills(g.then)] == ["0", "0", "1", "1"]
    assert "(lo + 1) * 32" in print_func(run_passes(P.gemm_split_k_lo_hi.get_tir(), arch,
                                                    options, until="insert_barriers"))
    src = tilecute.compile(P.gemm_split_k_lo_hi.get_tir(), target=arch,
                           options=options).get_kernel_source()
    assert "(ko - lo) % 3" in src  # the stage step ko reads


def test_split_k_prologue_guards_the_k_tail_where_lo_may_reach_it():
    # 32 splits of one step: lo may be the ragged last step, so the prologue's copy of
    # step lo is bounds-checked (with 3 splits lo <= 22 and it needs none)
    src = tilecute.compile(P.gemm_split_k_lo_hi.get_tir(splits=32), target="sm_80").get_kernel_source()
    assert "if lo * 32 + (i4 + 7) < 1000:" in src


def test_fewer_steps_than_stages():
    body = lowered("gemm_fewer_steps_than_stages")
    (loop,) = loops(body)
    # steps 0 and 1 copied before the loop, step 2 (past the end) two empty groups
    assert len(fills(body)) - len(fills(loop.body)) == 4
    assert [s.value.name for s in body if isinstance(s, N.Evaluate)][:2] == ["ptx_commit_group"] * 2
    check_step(loop, 2, 4)


def test_copy_after_the_first_gemm_is_issued_at_the_top():
    body = lowered("gemm_second_copy_after_first_gemm")
    assert {b: n for b, n in stages(body).items() if b.endswith("_s")} == \
        {"A_s": 3, "B_s": 3, "E_s": 3}
    (loop,) = loops(body)
    check_step(loop, 3, 3)
    gemms = [s for s in loop.body if isinstance(s, N.Gemm)]
    assert [g.b for g in gemms] == ["B_s", "E_s"]
    assert not any(isinstance(s, N.Barrier) for s in loop.body[loop.body.index(gemms[0]):])


def test_int8_and_swizzled_tiles_are_multi_buffered():
    body = lowered("gemm_int8_i32")
    assert stages(body)["A_s"] == 3
    check_step(loops(body)[0], 2, 3)
    body = lowered("gemm_swizzle_annotated")
    assert stages(body)["A_s"] == stages(body)["B_s"] == 3
    check_step(loops(body)[0], 2, 3)
    src = tilecute.compile(P.gemm_swizzle_annotated.get_tir(), target="sm_80").get_kernel_source()
    assert "the stage this copy fills" in src and "cp_async_wait_group(4)" in src


@pytest.mark.parametrize("arch,options,want", [("sm_80", None, 3), ("sm_90a", NO_TMA, 4)],
                         ids=IDS)
def test_stages_are_cut_to_shared_memory(arch, options, want):
    body = lowered("gemm_stages_past_shared_memory", arch, options)
    (loop,) = loops(body)
    assert loop.num_stages == stages(body)["A_s"] == want  # 48 KiB a stage: 163 / 227 KiB
    check_step(loop, 2, want)


def test_one_stage_is_the_loop_as_written():
    body = lowered("gemm_one_stage")
    assert stages(body)["A_s"] == 1 and not waits(body) and not fills(body)


def test_program_barriers_are_kept():
    body = lowered("gemm_program_sync_in_body")
    (loop,) = loops(body)
    check_step(loop, 2, 3)
    assert isinstance(loop.body[-1], N.Barrier)  # the program's, after the GEMM


def test_manual_order_keeps_two_stages():
    body = lowered("gemm_manual_order_loads_last")
    (loop,) = loops(body)
    assert loop.num_stages == 2 and loop.loads_last == ("A_s", "B_s")
    check_step(loop, 2, 2)


def test_persistent_tiles_refill_after_a_barrier():
    body = lowered("gemm_persistent_tiles")
    (outer,) = [s for s in body if isinstance(s, N.For) and s.kind == "serial"]
    (loop,) = loops(body)
    check_step(loop, 2, 3)
    at = outer.body.index(loop)
    pro = outer.body[at - 4:at]
    assert [f.fill_stage.value for f in pro] == [0, 0, 1, 1]
    # the previous tile's last steps read the stages the prologue fills
    assert isinstance(outer.body[at - 5], N.Barrier)
    assert waits([outer.body[at + 1]]) == [0]


def test_two_loops_into_one_tile_keep_one_buffer():
    body = lowered("two_loops_one_tile")
    assert stages(body)["A_s"] == 1 and not waits(body)
    for loop in loops(body):
        assert all(s.wait_async for s in loop.body if isinstance(s, N.Barrier))


def test_two_loops_with_their_own_tiles():
    body = lowered("two_loops_own_tiles")
    first, second = loops(body)
    check_step(first, 2, 3)
    check_step(second, 2, 3)
    between = body[body.index(first) + 1:body.index(second)]
    # loop 1 drained, then a barrier before loop 2's prologue (its tiles may share bytes)
    assert waits(between[:1]) == [0] and isinstance(between[1], N.Barrier)


def test_batches_in_a_serial_loop():
    body = lowered("batched_gemm_serial_batches")
    (loop,) = loops(body)
    check_step(loop, 2, 3)
    assert "A[b, i3, (ko + 2) * 32 + i4]" in print_func(run_passes(
        P.batched_gemm_serial_batches.get_tir(), "sm_80", None, until="insert_barriers"))


@pytest.mark.parametrize("arch,options", TARGETS, ids=IDS)
def test_attention_q_tile_lands_before_the_prologue(arch, options):
    # the Q tile's cp.async (the barrier pass's to wait for) used to make every barrier
    # of the loop body wait for all groups (cp.async.wait_group 0 before the refill and
    # before the GEMM), the prefetched K / V steps' too: no pipelining left
    body = lowered("attention_causal_fwd", arch, options)
    (loop,) = loops(body)
    check_step(loop, 2, 2)
    assert not any(s.wait_async for s in walk_stmts(loop.body) if isinstance(s, N.Barrier))
    at = body.index(loop)
    (wait,) = [i for i, s in enumerate(body[:at]) if isinstance(s, N.AsyncCopyWait)]
    assert isinstance(body[wait + 1], N.If) and fills(body[wait + 1].then)  # the prologue
    assert text(body[wait + 1].cond) == "0 < n"
    src = tilecute.compile(P.attention_causal_fwd.get_tir(), target=arch,
                           options=options).get_kernel_source()
    loop_src = src.split("for k in cutlass.range(0, n):")[1].split("cp_async_wait_group(0)")[0]
    assert "cp_async_wait_group(2)" in loop_src


def test_page_table_lookup_in_the_copy_index():
    body = lowered("paged_decode_page_table")
    (loop,) = loops(body)
    if stages(body)["K_s"] == 1:  # a copy at a looked-up row is not a vector copy (yet)
        assert not fills(body) and not waits(body)
    else:  # its step k + 2 reads the table at k + 2
        check_step(loop, 1, 3)
        assert "Tbl[h, k + 2]" in print_func(run_passes(
            P.paged_decode_page_table.get_tir(), "sm_80", None, until="insert_barriers"))


def test_index_from_the_step_or_source_written_keep_one_buffer():
    for name, buf in (("paged_rows_page_in_var", "K_s"), ("prefix_carry_in_place", "X_s")):
        body = lowered(name)
        assert stages(body)[buf] == 1 and not waits(body) and not fills(body), name


def test_step_values_bound_in_lets_are_inlined_into_the_copies():
    # a Let of the step (the page, the K offset) used to keep the loop single-buffered
    body = lowered("paged_page_in_a_let")
    (loop,) = loops(body)
    assert stages(body)["K_s"] == 3
    refill = check_step(loop, 1, 3)
    ir = print_func(run_passes(P.paged_page_in_a_let.get_tir(), "sm_80", None,
                               until="insert_barriers"))
    assert "Kc[Tbl[h, 0], i1, i2]" in ir and "Kc[Tbl[h, 1], i1, i2]" in ir
    assert "Kc[Tbl[h, k + 2], i1, i2]" in ir
    assert text(refill.cond) == "k + 2 < T.ceildiv(Lens[h], 32)"
    # k0 = ko * 32: B's copy runs ahead ((ko + 2) * 32); A's rows (288 elements apart,
    # at k0 not known to be a multiple of 8) copy element by element, single-buffered,
    # behind the barrier that also covers B's refill
    body = lowered("gemm_k_offset_in_a_let")
    (loop,) = loops(body)
    assert stages(body)["B_s"] == 3 and stages(body)["A_s"] == 1
    refill, wait = refill_and_wait(loop)
    assert text(fills(refill.then)[0].fill_stage) == "(ko + 2) % 3"
    first = loop.body.index(next(s for s in loop.body if isinstance(s, N.Barrier)))
    assert first < loop.body.index(refill)


def test_a_let_reading_what_the_step_writes_is_not_inlined():
    from tilecute.transform.async_pipeline import _step_lets
    body = lowered("paged_rows_page_in_var")
    (loop,) = loops(body)
    assert _step_lets(loop) == {}  # (pg is a T.alloc_var the body sets)


def test_a_trip_count_the_body_changes_keeps_one_buffer():
    # the refill's guard `k + 2 < Cnt[b]` read Cnt[b] again each step, after step 0 set it
    # to 0: steps 3.. were never copied (they read a stale stage), and threads could
    # disagree on the guard around its barrier
    body = lowered("consume_counted_tiles")
    assert stages(body)["X_s"] == 1 and not fills(body) and not waits(body)


def test_dynamic_rows_prologue_and_reductions():
    body = lowered("column_sums_dynamic_rows")
    (loop,) = loops(body)
    check_step(loop, 1, 3)
    guards = [s for s in body if isinstance(s, N.If) and fills(s.then)]
    assert [text(g.cond) for g in guards] == ["0 < T.ceildiv(N, 32)", "1 < T.ceildiv(N, 32)"]
    body = lowered("row_max_via_fragment")
    check_step(loops(body)[0], 1, 3)
    assert stages(body)["mx_scratch"] == 1


def test_fp8_tile_and_a_scale_vector():
    body = lowered("fp8_dequant_rows_with_scales", "sm_90a", NO_TMA)
    (loop,) = loops(body)
    assert stages(body)["X_s"] == 3 and stages(body)["S_s"] == 1  # (one float a thread: sync)
    check_step(loop, 1, 3)


def test_tile_updated_in_place_after_it_lands():
    body = lowered("int8_tile_abs_sum")
    (loop,) = loops(body)
    check_step(loop, 1, 2)
    nests = [s for s in loop.body if isinstance(s, N.For)]
    # the in-place update of the stage, a barrier, then its read into registers
    at = loop.body.index(nests[0])
    assert isinstance(loop.body[at + 1], N.Barrier)


def test_program_async_copy_loop_is_left_alone():
    body = lowered("async_copy_program_mixed")
    assert not fills(body) and waits(body) == [0] and set(stages(body).values()) == {1}


def test_small_synchronous_copy_beside_pipelined_tiles():
    body = lowered("bias_tile_and_vector_sizes")
    assert stages(body)["X_s"] == stages(body)["W_s"] == 3 and stages(body)["b_s"] == 1
    check_step(loops(body)[0], 2, 3)


# ---- GPU ----------------------------------------------------------------------------------
def _run(name, args, out_idx=None, options=NO_TMA, **kw):
    kernel = tilecute.compile(getattr(P, name).get_tir(**kw), out_idx=out_idx, options=options)
    return kernel(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("options", [NO_TMA, None], ids=["no-tma", "default"])
def test_ragged_gemm_on_gpu(options):
    import torch
    torch.manual_seed(0)
    A = torch.randn(200, 100, device="cuda", dtype=torch.float16)
    B = torch.randn(100, 136, device="cuda", dtype=torch.float16)
    C = _run("gemm_ragged_every_dim", (A, B), [2], options)
    torch.testing.assert_close(C, A.float() @ B.float(), atol=2e-2, rtol=1e-3)


@pytest.mark.gpu
def test_dynamic_gemm_on_gpu():
    import torch
    kernel = tilecute.compile(P.gemm_bf16_nt_dynamic_mnk.get_tir(), out_idx=[2], options=NO_TMA)
    for M, N, K in ((64, 64, 64), (100, 72, 128), (130, 200, 328), (64, 64, 192), (8, 16, 8)):
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        C = kernel(A, B)
        torch.testing.assert_close(C, A.float() @ B.float().T, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [3, 9, 32])  # (9: the last split has no step)
def test_split_k_on_gpu(splits):
    import torch
    torch.manual_seed(splits)
    A = torch.randn(128, 1000, device="cuda", dtype=torch.float16)
    B = torch.randn(1000, 128, device="cuda", dtype=torch.float16)
    C = torch.zeros(128, 128, device="cuda")
    _run("gemm_split_k_lo_hi", (A, B, C), splits=splits)
    torch.testing.assert_close(C, A.float() @ B.float(), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("name,K", [("gemm_fewer_steps_than_stages", 64), ("gemm_one_stage", 256),
                                    ("gemm_program_sync_in_body", 256),
                                    ("gemm_manual_order_loads_last", 256),
                                    ("gemm_swizzle_annotated", 256)])
def test_square_gemms_on_gpu(name, K):
    import torch
    torch.manual_seed(K)
    M = 256 if name == "gemm_swizzle_annotated" else 128
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, M, device="cuda", dtype=torch.float16)
    C = _run(name, (A, B), [2])
    torch.testing.assert_close(C.float(), A.float() @ B.float(), atol=0.1, rtol=1e-2)


@pytest.mark.gpu
def test_gemm_stages_past_shared_memory_on_gpu():
    import torch
    A = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    B = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    C = _run("gemm_stages_past_shared_memory", (A, B), [2])
    torch.testing.assert_close(C, A.float() @ B.float(), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_second_copy_after_first_gemm_on_gpu():
    import torch
    A = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    B = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    E = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    D = _run("gemm_second_copy_after_first_gemm", (A, B, E), [3])
    torch.testing.assert_close(D, A.float() @ (B.float() + E.float()), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_int8_gemm_on_gpu():
    import torch
    A = torch.randint(-128, 128, (128, 320), device="cuda", dtype=torch.int8)
    B = torch.randint(-128, 128, (128, 320), device="cuda", dtype=torch.int8)
    C = _run("gemm_int8_i32", (A, B), [2])
    # (torch has no integer matmul on CUDA; float64 sums of int8 products are exact here)
    assert torch.equal(C.long(), (A.double() @ B.double().T).long())


@pytest.mark.gpu
def test_persistent_and_batched_on_gpu():
    import torch
    A = torch.randn(256, 160, device="cuda", dtype=torch.float16)
    B = torch.randn(160, 192, device="cuda", dtype=torch.float16)
    C = _run("gemm_persistent_tiles", (A, B), [2])
    torch.testing.assert_close(C, A.float() @ B.float(), atol=5e-2, rtol=1e-3)
    A = torch.randn(3, 64, 128, device="cuda", dtype=torch.float16)
    B = torch.randn(3, 128, 64, device="cuda", dtype=torch.float16)
    C = _run("batched_gemm_serial_batches", (A, B), [2])
    torch.testing.assert_close(C, A.float() @ B.float(), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_two_loops_on_gpu():
    import torch
    A1 = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    B1 = torch.randn(192, 64, device="cuda", dtype=torch.float16)
    AB2 = torch.randn(128 + 96, 96, device="cuda", dtype=torch.float16)
    C = _run("two_loops_one_tile", (A1, B1, AB2), [3])
    want = A1.float() @ B1.float() + AB2[:128].float() @ AB2[128:, :64].float()
    torch.testing.assert_close(C, want, atol=5e-2, rtol=1e-3)
    A2 = torch.randn(128, 160, device="cuda", dtype=torch.float16)
    B2 = torch.randn(160, 64, device="cuda", dtype=torch.float16)
    C = _run("two_loops_own_tiles", (A1, B1, A2, B2), [4])
    torch.testing.assert_close(C, A1.float() @ B1.float() + A2.float() @ B2.float(),
                               atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
def test_attention_on_gpu(causal):
    import torch
    torch.manual_seed(1)
    S, D = 320, 64
    Q, K, V = (torch.randn(S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    O = _run("attention_causal_fwd", (Q, K, V), [3], causal=causal)
    s = (Q.float() @ K.float().T) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(S, S, device="cuda").triu(1).bool(), float("-inf"))
    torch.testing.assert_close(O.float(), torch.softmax(s, -1) @ V.float(), atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_paged_on_gpu():
    import torch
    torch.manual_seed(2)
    H, D, page, pages = 4, 64, 32, 6
    Kc = torch.randn(pages, page, D, device="cuda", dtype=torch.float16)
    Tbl = torch.tensor([[5, 0, 3, 1], [2, 4, 0, 0], [1, 1, 5, 2], [3, 0, 0, 0]],
                       device="cuda", dtype=torch.int32)
    Lens = torch.tensor([128, 40, 97, 1], device="cuda", dtype=torch.int32)
    Qd = torch.randn(H, D, device="cuda", dtype=torch.float16)
    Out = _run("paged_decode_page_table", (Qd, Kc, Tbl, Lens), [4])
    keys = Kc.float()[Tbl.long()].reshape(H, 4 * page, D)
    want = torch.einsum("hd,hkd->hk", Qd.float(), keys)
    mask = torch.arange(4 * page, device="cuda")[None, :] < Lens[:, None]
    got = torch.where(mask, Out, 0.0)  # (entries past a head's pages are never written)
    torch.testing.assert_close(got, torch.where(mask, want, 0.0), atol=1e-2, rtol=1e-3)
    Out = _run("paged_rows_page_in_var", (Kc, Tbl, Lens), [3])
    sums = Kc.float()[Tbl.long()].sum(2)  # (H, 4, D)
    pages_used = (Lens + page - 1) // page
    for h in range(H):
        n = int(pages_used[h])
        torch.testing.assert_close(Out[h, :n], sums[h, :n], atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_lets_inlined_on_gpu():
    import torch
    torch.manual_seed(4)
    A = torch.randn(128, 288, device="cuda", dtype=torch.float16)
    B = torch.randn(288, 128, device="cuda", dtype=torch.float16)
    C = _run("gemm_k_offset_in_a_let", (A, B), [2])
    torch.testing.assert_close(C, A.float() @ B.float(), atol=5e-2, rtol=1e-3)
    H, D, page, pages = 4, 64, 32, 6
    Kc = torch.randn(pages, page, D, device="cuda", dtype=torch.float16)
    Tbl = torch.tensor([[5, 0, 3, 1], [2, 4, 0, 0], [1, 1, 5, 2], [3, 0, 0, 0]],
                       device="cuda", dtype=torch.int32)
    Lens = torch.tensor([128, 40, 97, 1], device="cuda", dtype=torch.int32)
    Out = _run("paged_page_in_a_let", (Kc, Tbl, Lens), [3])
    sums = Kc.float()[Tbl.long()].sum(2)
    for h in range(H):
        n = (int(Lens[h]) + page - 1) // page
        torch.testing.assert_close(Out[h, :n], sums[h, :n], atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_consumed_count_on_gpu():
    import torch
    X = torch.randn(3, 128, 64, device="cuda")
    Cnt = torch.tensor([5, 0, 8], device="cuda", dtype=torch.int32)
    want = torch.stack([X[b, :16 * int(Cnt[b])].sum(0) for b in range(3)])
    Y = _run("consume_counted_tiles", (X, Cnt), [2])
    torch.testing.assert_close(Y, want, atol=1e-4, rtol=1e-5)
    assert not Cnt.any()


@pytest.mark.gpu
def test_reductions_on_gpu():
    import torch
    torch.manual_seed(3)
    kernel = tilecute.compile(P.column_sums_dynamic_rows.get_tir(), out_idx=[1], options=NO_TMA)
    for n in (1, 32, 33, 100, 257, 0):  # (0: the loop runs no step)
        X = torch.randn(n, 128, device="cuda")
        torch.testing.assert_close(kernel(X), X.sum(0), atol=1e-3, rtol=1e-4)
    X = torch.randn(256, 1000, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(_run("row_max_via_fragment", (X,), [1]), X.float().amax(1))
    X = torch.randint(-128, 128, (64, 768), device="cuda", dtype=torch.int8)
    Y = _run("int8_tile_abs_sum", (X,), [1])
    # (|-128| wraps to -128 in int8, as the program computes it)
    want = torch.where(X < 0, (-X.int()).to(torch.int8), X).int().sum(1)
    assert torch.equal(Y, want)


@pytest.mark.gpu
def test_fp8_scales_on_gpu():
    import torch
    X = (torch.randn(128, 512, device="cuda") * 4).to(torch.float8_e4m3fn)
    Sc = torch.rand(512, device="cuda")
    Y = _run("fp8_dequant_rows_with_scales", (X, Sc), [2])
    torch.testing.assert_close(Y, (X.float() * Sc).sum(1), atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_prefix_and_program_async_on_gpu():
    import torch
    X = torch.randn(4096, device="cuda")
    want = X.view(8, 512).cumsum(0).reshape(-1)
    _run("prefix_carry_in_place", (X,))
    torch.testing.assert_close(X, want, atol=1e-4, rtol=1e-5)
    X, Y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    torch.testing.assert_close(_run("async_copy_program_mixed", (X, Y), [2]), X * Y)


@pytest.mark.gpu
def test_bias_tile_on_gpu():
    import torch
    X = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    W = torch.randn(192, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(192, device="cuda", dtype=torch.float16)
    Y = torch.empty(128, 256, device="cuda")
    _run("bias_tile_and_vector_sizes", (X, W, Y, b))
    want = (X + b).float() @ W.float()
    torch.testing.assert_close(Y, want, atol=5e-2, rtol=1e-3)
