"""Corners TileLang's issue tracker reports as silently miscomputed (tests/issue_corner_programs.py,
one program of tilecute's own per report, in TileLang's idioms).  CPU: each builds to an sm_90a
cubin (most to an sm_80 one too), the generated source says what the program means (or the
refusal names the form); GPU (``-m gpu``): each against torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.insert_barriers import BarrierError

import issue_corner_programs as P

BUILDS = ["serial_fragment_store", "parallel_extents_share_fragment", "column_table_mod",
          "fragment_rotate", "rowsum_rotate", "pipelined_consume_then_overwrite",
          "pipelined_atomic_then_read", "reduce_max_keep_nan", "gemv_reducer_all",
          "reducer_epoch_batch", "ticket_used_twice", "safe_value_tail_tile",
          "padded_shared_columns", "store_1d_unaligned", "store_1d_partial_tile",
          "cumsum_shared_subregion", "fill_row_offset_fragment", "copy_then_offset_fill",
          "int_element_condition", "same_guard_twice", "same_form_guards_two_buffers",
          "cast_store_nested_if", "break_in_vectorized", "unroll_explicit_break",
          "vectorized_from_start", "temp_read_before_write", "serial_from_u64_var",
          "exchange_in_branch", "exchange_in_branch_with_else", "own_slot_in_branch",
          "gemm_rr_clear", "gemm_sr_clear", "persistent_ragged", "int_div_family",
          "view_swizzled_as_wider", "any_all_rows_swizzled", "big_const_index",
          "tile_atomic_acq_rel"]
SM80 = ["pipelined_consume_then_overwrite", "pipelined_atomic_then_read", "safe_value_tail_tile",
        "cumsum_shared_subregion", "exchange_in_branch", "gemm_rr_clear", "gemm_sr_clear",
        "gemv_reducer_all", "view_swizzled_as_wider"]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _body(name, **kw):
    """The @cute.kernel functions' text (not the launch wrapper)."""
    src = getattr(P, name)(**kw).get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def _lines(text):
    return [ln.strip() for ln in text.splitlines()]


@pytest.mark.parametrize("name", BUILDS)
def test_program_builds_a_cubin(name):
    assert getattr(P, name)().ensure_cubin()


@pytest.mark.parametrize("name", SM80)
def test_program_builds_an_sm80_cubin(name, tmp_path):
    func = getattr(P, name).get_tir()
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- the fix: a shared exchange inside a branch on the thread index -----------------------
def test_exchange_in_branch_is_split_around_a_barrier():
    # TileLang #2556 / #2612: `if tx < 48: s[tx] = ...; B[tx] = s[47 - tx]` reads another
    # thread's write; the barrier between them goes between two ifs every thread reaches
    lines = _lines(_body("exchange_in_branch"))
    w = lines.index("s[tx] = A[tx] * cutlass.Float32(2.0)")
    assert lines[w - 1] == "if tx < 48:"
    assert lines[w + 1] == "cute.arch.sync_threads()" and lines[w + 2] == "if tx < 48:"
    assert lines[w + 3] == "B[tx] = s[47 - tx]"


def test_each_exchange_of_a_branch_gets_its_barrier_and_the_else_runs_in_the_first_part():
    body = _body("exchange_in_branch_with_else")
    assert body.count("cute.arch.sync_threads()") == 3 and body.count("if tx < 48:") == 4
    lines = _lines(body)
    assert lines.index("else:") < lines.index("cute.arch.sync_threads()")


def test_a_branch_reading_back_its_own_slots_stays_one():
    body = _body("own_slot_in_branch")
    assert "sync_threads" not in body and body.count("if tx < 48:") == 1


def test_an_exchange_that_cannot_be_split_is_refused_by_name():
    with pytest.raises(BarrierError) as err:
        tilecute.compile(P.exchange_after_loaded_bound()).get_kernel_source()
    msg = str(err.value)
    assert "issue_corner_programs.py" in msg and "'v' is bound in the first part from memory" in msg
    assert "block barrier" in msg


# ---- what the generated source says ------------------------------------------------------
def test_fragments_read_where_the_program_says():
    assert "B[i, j] = f[i * 16 + j] * cutlass.Float32(2.0)" in _body("serial_fragment_store")
    body = _body("parallel_extents_share_fragment")
    assert "cutlass.range_constexpr(0, 100)" in body and "range_constexpr(0, 256)" in body
    # (a global -> global nest: staged, 4 lanes a thread step)
    assert re.search(r"B\[\(j \+ tc_lane\d+\) % 7\]", _body("column_table_mod"))
    assert "buf[(i_1_ + 1) % 128]" in _body("fragment_rotate")
    assert "% 64]" in _body("rowsum_rotate")


def test_pipelined_write_after_read_and_read_after_atomic_are_ordered():
    lines = _lines(_body("pipelined_consume_then_overwrite"))
    read = next(k for k, ln in enumerate(lines) if "s.iterator" in ln)
    write = lines.index("s[i2] = A[k, i2]")
    assert read < write and "cute.arch.sync_threads()" in lines[read:write]
    lines = _lines(_body("pipelined_atomic_then_read"))
    add = lines.index("tca.atomic_add(tot, 0, a_s[tx])")
    assert lines[add + 1] == "cute.arch.sync_threads()" and lines[add + 3] == "Out[k] = tot[0]"


def test_clear_false_nan_propagating_max_merges_with_a_nan_keeping_max():
    body = _body("reduce_max_keep_nan")
    assert '"max_nan"' in body and 'm[tc_c10] = tcr.combine(m[tc_c10], tc_rows9[tc_c10], "max_nan")' in body


def test_clear_false_nan_propagating_max_of_float32():
    # TileLang HEAD takes nan_propagate on a float32 out (0.1.15 refused it)
    body = P.reduce_max_keep_nan(dt="float32").get_kernel_source()
    assert body.count('"max_nan"') >= 2


def test_reducers_combine_every_thread_and_every_row():
    body = _body("gemv_reducer_all")
    assert 'tcr.warp_allreduce(r[tc_r3], "sum", 32)' in body and "block_allreduce" in body
    body = _body("reducer_epoch_batch")
    assert "cutlass.range_constexpr(64):  # T.finalize_reducer(acc)" in body
    assert 'float("-inf")' in body


def test_the_ticket_is_taken_once():
    assert _body("ticket_used_twice").count("tca.atomic_fetch(") == 1


def test_tail_copies_keep_their_safe_value_pitch_and_tail():
    assert "cutlass.Int32(-99)" in _body("safe_value_tail_tile")
    assert "i1 * 40 + i2" in _body("padded_shared_columns")  # the declared pitch
    assert "if tc_f2 < 50:" in _body("store_1d_unaligned")
    assert "i5 * 48 + i6" in _body("cumsum_shared_subregion")
    # (the 8 KiB fragment a fill at a row offset makes replicated lives in shared memory:
    # rows 3.. of it get the 7s)
    assert "f.iterator + cute.assume((3 + i3) * 64 + i4, divby=4)" in _body("fill_row_offset_fragment")


def test_control_flow_is_kept_as_written():
    assert "if M[tx] != 0:" in _body("int_element_condition")
    assert _body("same_guard_twice").count("if A[0] == 0:") == 2
    body = _body("same_form_guards_two_buffers")
    assert "if P[bx] < 2:" in body and "if Q[bx] < 2:" in body
    lines = _lines(_body("cast_store_nested_if"))
    k = lines.index("if i % 3 != 0:")
    assert lines[k + 1] == "if A[i] > cutlass.Float32(0.0):" and lines[k + 2].startswith("O[i] = ")
    assert "broke[0] = 1" in _body("break_in_vectorized")
    assert "broke[0] = 1" in _body("unroll_explicit_break")
    assert "cutlass.range_constexpr(2, 10)" in _body("vectorized_from_start")
    body = _body("temp_read_before_write")
    assert "tmp = cute.arch.fmax(A[i], cutlass.Float32(1.0))" in body and "B[i] = tmp / " in body


def test_gemm_clear_accum_clears_once_for_the_whole_k():
    assert "accumulate=False, a_regs=True" in _body("gemm_rr_clear")
    assert "accumulate=False)" in _body("gemm_sr_clear")


def test_integer_division_family():
    body = _body("int_div_family")
    assert "O[i, 0] = tcmath.truncdiv(A[i], 3)" in body and "O[i, 2] = tcmath.truncmod(A[i], 3)" in body
    assert "O[i, 1] = A[i] // 3" in body and "O[i, 3] = A[i] - A[i] // 3 * 3" in body


def test_swizzled_views_and_scans_read_the_swizzled_slots():
    assert "^ (((i1 * 32 + i2) >> 3) & 28)" in _body("view_swizzled_as_wider")
    assert "s[(tx * 64 + 63) ^ (((tx * 64 + 63) >> 3) & 56)]" in _body("any_all_rows_swizzled")


def test_large_constant_index_and_tile_atomic_order():
    assert "B[0] = A[cutlass.Int64(2147483653)]" in _body("big_const_index")
    assert 'f[tc_lane5], "acq_rel")' in _body("tile_atomic_acq_rel")


# ---- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize("make, words", [
    (lambda: P.reduce_48_lanes(), ["T.reduce_sum", "48 elements", "192 threads"]),
    (lambda: P.gemm_tile(), ["T.gemm(a_s, b_s, c_f)", "K = 24 is not a multiple of 16"]),
    (lambda: tilecute.compile(P.for_else()), ["for-else is not supported"]),
    (lambda: tilecute.compile(P.fill_past_end()), ["'s'", "reaching index 139", "extent is 128"]),
    (lambda: tilecute.compile(P.addx4_int32()), ["T.atomic_addx4", "'Out' is int32"]),
    (lambda: tilecute.compile(P.rebind_constant_in_if()), ["'val' is read after the loop/if body"]),
])
def test_refused_by_name(make, words):
    with pytest.raises(Exception) as err:
        make().get_kernel_source()
    msg = str(err.value)
    assert "issue_corner_programs.py" in msg and all(w in msg for w in words), msg


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_narrow_tile_gemm_builds_with_mma_sync(arch, tmp_path):
    """B's 64 x 24 float16 tile (48-byte rows: no wgmma swizzle chunk fits) runs on mma.sync
    on sm_90a too (it was refused there by name: helper CC's select_mma fallback)."""
    func = P.gemm_tile.get_tir(N=24, K=128, bK=64)
    assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path)).kernel_names
    src = tilecute.compile(func, target=arch).get_kernel_source()
    assert 'tcm.tiled_mma("mma"' in src and '"wgmma"' not in src and "tcm.gemm_warp(" in src


# ---- GPU -----------------------------------------------------------------------------------
def _close(got, want, tol=1e-5):
    import torch
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.gpu
def test_gpu_exchanges_in_a_branch():
    import torch
    a = torch.randn(48, device="cuda")
    _close(P.exchange_in_branch()(a), (a * 2).flip(0))
    s = a * 2
    t = s.flip(0)
    s = t.flip(0) + 1
    _close(P.exchange_in_branch_with_else()(a), s.flip(0))
    _close(P.own_slot_in_branch()(a), a * 2 + 1)


@pytest.mark.gpu
def test_gpu_fragments_and_tables():
    import torch
    a = torch.randn(16, 16, device="cuda")
    _close(P.serial_fragment_store()(a), a * 2)
    a = torch.randn(256, device="cuda")
    want = a + 1
    want[:100] = 6
    _close(P.parallel_extents_share_fragment()(a), want)
    a, b = torch.randn(16, 64, device="cuda"), torch.randn(7, device="cuda")
    _close(P.column_table_mod()(a, b), a + b[torch.arange(64, device="cuda") % 7])
    a = torch.arange(128, device="cuda", dtype=torch.int32) * 3
    assert torch.equal(P.fragment_rotate()(a), a.roll(-1))
    a = torch.randn(64, 64, device="cuda")
    _close(P.rowsum_rotate()(a), a.sum(1).roll(-3), 1e-4)


@pytest.mark.gpu
def test_gpu_pipelines():
    import torch
    a = torch.randint(-5, 5, (8, 32), device="cuda", dtype=torch.int32)
    s0 = torch.randint(-5, 5, (32,), device="cuda", dtype=torch.int32)
    tiles = torch.cat([s0[None], a[:-1]])
    want = (tiles * torch.arange(1, 9, device="cuda", dtype=torch.int32)[:, None]).sum(0).int()
    for stages in (0, 2):
        assert torch.equal(P.pipelined_consume_then_overwrite(stages=stages)(a, s0), want)
    a = torch.randint(-4, 4, (8, 32), device="cuda").float()
    _close(P.pipelined_atomic_then_read()(a), a.sum(1).cumsum(0))


@pytest.mark.gpu
def test_gpu_reductions_and_reducers():
    import torch
    a = torch.randn(8, 64, device="cuda").half()
    a[2, 5] = float("nan")
    a[5] = -3.0
    want = torch.maximum(a.float().amax(1), torch.tensor(-1.0, device="cuda"))
    want[2] = float("nan")
    _close(P.reduce_max_keep_nan()(a), want, 1e-3)
    a, x = torch.randn(96, 256, device="cuda"), torch.randn(256, device="cuda")
    _close(P.gemv_reducer_all()(a, x), a @ x, 1e-3)
    a = torch.randn(64, 128, device="cuda")
    _close(P.reducer_epoch_batch()(a), a.amax(1))


@pytest.mark.gpu
def test_gpu_copies_at_edges():
    import torch
    a = torch.randint(0, 100, (60, 60), device="cuda", dtype=torch.int32)
    want = torch.full((64, 64), -99, device="cuda", dtype=torch.int32)
    want[:60, :60] = a
    assert torch.equal(P.safe_value_tail_tile()(a), want)
    a = torch.randn(64, 64, device="cuda").half()
    assert torch.equal(P.padded_shared_columns()(a), a)
    a = torch.randn(250, device="cuda").half()
    assert torch.equal(P.store_1d_unaligned()(a), a)
    a = torch.randn(1000, device="cuda").half()
    assert torch.equal(P.store_1d_partial_tile()(a), a)
    a = torch.randn(16, 32, device="cuda")
    _close(P.cumsum_shared_subregion()(a), a.cumsum(1), 1e-4)
    want = torch.zeros(32, 64, device="cuda")
    want[3:11] = 7
    _close(P.fill_row_offset_fragment()(), want)
    a = torch.randn(128, device="cuda")
    want = a.clone()
    want[96:] = -1
    _close(P.copy_then_offset_fill()(a), want)


@pytest.mark.gpu
def test_gpu_control_flow():
    import torch
    m = torch.randint(-2, 3, (128,), device="cuda", dtype=torch.int32)
    _close(P.int_element_condition()(m), (m != 0).float())
    for first, want in ((0, 1), (3, 0)):
        a = torch.tensor([first, 0, 0, 0], device="cuda", dtype=torch.int32)
        assert P.same_guard_twice()(a)[0].item() == want
    p = torch.tensor([0, 3, 1, 5, 0, 2, 9, 1], device="cuda", dtype=torch.int32)
    q = torch.tensor([4, 0, 1, 0, 7, 1, 2, 8], device="cuda", dtype=torch.int32)
    a = torch.randn(8, 64, device="cuda")
    want = a * (p < 2).float()[:, None] + 2 * a * (q < 2).float()[:, None]
    _close(P.same_form_guards_two_buffers()(p, q, a), want)
    a = torch.randn(256, device="cuda")
    o = torch.full((256,), 42.0, device="cuda").half()
    P.cast_store_nested_if()(a, o)
    i = torch.arange(256, device="cuda")
    _close(o, torch.where((i % 3 != 0) & (a > 0), (a * 2).half(), torch.tensor(42.0, device="cuda").half()))
    a = torch.arange(16, device="cuda", dtype=torch.int32)
    want = torch.full((16,), -99, device="cuda", dtype=torch.int32)
    want[:5] = a[:5] + 1
    assert torch.equal(P.break_in_vectorized()(a), want)
    a = torch.tensor([3, 1, 4, 1, 5, -9, 2, 6] + [1] * 8, device="cuda", dtype=torch.int32)
    assert P.unroll_explicit_break()(a).item() == 14
    a = torch.randn(16, device="cuda")
    want = torch.zeros(16, device="cuda")
    want[2:10] = a[2:10] * 3
    _close(P.vectorized_from_start()(a), want)
    a = torch.randn(128, device="cuda") * 3
    a0 = a.clone()
    b = P.temp_read_before_write()(a)
    _close(b, a0.clamp(min=1) / 2)
    _close(a, a0.clamp(min=1) * 2)
    t = P.serial_from_u64_var()(torch.tensor([10], device="cuda", dtype=torch.uint64))
    assert t[10:13].tolist() == [1, 1, 1]


@pytest.mark.gpu
def test_gpu_gemm_clear_accum():
    import torch
    a, b = torch.randn(64, 64, device="cuda").half(), torch.randn(64, 64, device="cuda").half()
    want = a.float() @ b.float()
    _close(P.gemm_rr_clear()(a, b), want, 1e-2)
    _close(P.gemm_sr_clear()(a, b), want, 1e-2)


@pytest.mark.gpu
def test_gpu_atomics_persistent_integers_swizzles():
    import torch
    a = torch.randint(-3, 3, (256,), device="cuda", dtype=torch.int32)
    cnt = torch.zeros(1, device="cuda", dtype=torch.int32)
    out = P.ticket_used_twice()(a, cnt)
    k = int((a > 0).sum())
    assert cnt.item() == k
    assert sorted(out[:k].tolist()) == (a > 0).nonzero().flatten().tolist()
    a = torch.randn(160, 48, device="cuda")
    _close(P.persistent_ragged()(a), a + 1)
    src = torch.randn(16, 64, device="cuda").half()
    out = torch.zeros(16, 64, device="cuda").half()
    P.tile_atomic_acq_rel()(src, out)
    _close(out, src.float() * 4, 1e-2)
    a = torch.arange(-32, 32, device="cuda", dtype=torch.int32)
    o = P.int_div_family()(a)
    t = torch.div(a, 3, rounding_mode="trunc")
    f = torch.div(a, 3, rounding_mode="floor")
    for col, want in enumerate((t, f, a - t * 3, a - f * 3, f, a - f * 3)):
        assert torch.equal(o[:, col], want.int()), col
    a = torch.randn(16, 64, device="cuda").half()
    got = P.view_swizzled_as_wider()(a)  # (compared as bits: a pair of halves may be a NaN)
    assert torch.equal(got.view(torch.int32), a.view(torch.int32))
    a[3] = 0
    a[5, 7] = 0
    a[9] = 1
    a[12, :63] = 0
    nz = a != 0
    assert torch.equal(P.any_all_rows_swizzled()(a), (nz.any(1).int() + 2 * nz.all(1).int()))


def test_constant_elements_of_one_thread_branch_need_no_barrier():
    """`if tx == 0: cnt[0] = 0; pair[0] = 0; pair[1] = 0` writes distinct constant elements:
    no thread of the branch touches another's element, so the branch stays whole (the split
    around a barrier is for a branch whose threads share an element)."""
    from tilecute.transform.pipeline import run_passes

    @T.prim_func
    def init(Out: T.Tensor((2,), T.float16)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            pair = T.alloc_shared((2,), T.float16)
            if tx == 0:
                pair[0] = 0
                pair[1] = 1
            T.sync_threads()
            if tx < 2:
                Out[tx] = pair[tx]

    text = run_passes(init, "sm_90a").script()
    assert text.count("if tx == 0") == 1 and text.count("T.sync_threads()") == 1, text
