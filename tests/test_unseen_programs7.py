"""A seventh set of programs in TileLang's idioms (tests/unseen_programs7.py), aimed at
hand-written scheduling and synchronisation and at GEMM forms: explicit warp
specialization (``T.ws`` regions and thread-index branches, mbarrier rings and their
parities, ``T.set_max_nreg``, ``T.fence_proxy_async``, producers that copy with threads),
the program's partial barriers, ``T.Pipelined`` schedules, the transposes, policies and
dtypes of ``T.gemm`` on wgmma and mma.sync, ``T.use_swizzle``, ``T.annotate_layout`` and
``T.Kernel``'s thread forms.  Each builds to a cubin on the CPU, and on a GPU matches
torch written to TileLang's meaning."""

import dataclasses
import re

import pytest

import tilecute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes

import rounds
import unseen_programs7 as P

PROGRAMS = ["ws_ring_gemm", "ws_single_buffer_nt", "ws_branch_thread_copies",
            "copy_then_tma_store", "partial_barrier_after_copies", "ws_two_consumers_elected",
            "gemm_forms", "gemm_fragment_operands", "split_k_ranges",
            "pipelined_explicit_schedule", "swizzled_gemm", "kernel_thread_forms"]
# the programs whose GEMMs (or none) also run on sm_80's mma.sync
SM80 = ["gemm_forms", "gemm_fragment_operands", "split_k_ranges", "kernel_thread_forms"]
TRANSPOSES = [(False, False), (False, True), (True, False), (True, True)]


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_ring_depths_build(stages, tmp_path):
    assert tilecute.build_cubin(P.ws_ring_gemm(stages=stages), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


test_program_builds_an_sm80_cubin = rounds.builds_cubin(SM80, rounds.kernel_of(P), "sm_80")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("ta,tb", TRANSPOSES[1:])
def test_transposes_build(arch, ta, tb, tmp_path):
    assert tilecute.build_cubin(P.gemm_forms(ta=ta, tb=tb, dtype="bfloat16"), arch,
                                out_dir=str(tmp_path)).kernel_names


GEMM_VARIANTS = {
    "fp8_e4m3": dict(dtype="float8_e4m3", tb=True, bk=64),
    "fp8_e5m2": dict(dtype="float8_e5m2", tb=True, bk=64),
    "int8": dict(dtype="int8", accum="int32", tb=True, bk=64),
    "tf32": dict(dtype="float32", tb=True),
    "fp16_acc": dict(dtype="float16", accum="float16"),
    "full_col_256": dict(dtype="bfloat16", ta=True, tb=True, policy="FullCol", threads=256, bn=128),
    "full_row_256": dict(policy="FullRow", threads=256, bm=128, clear="clear", k_pack=2),
    "every_step": dict(clear="every_step", stages=3),
}


@pytest.mark.parametrize("variant", sorted(GEMM_VARIANTS))
def test_gemm_variants_build(variant, tmp_path):
    assert tilecute.build_cubin(P.gemm_forms(**GEMM_VARIANTS[variant]), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_split_k_depths_build(stages, tmp_path):
    assert tilecute.build_cubin(P.split_k_ranges(stages=stages), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


# ---- what the generated code says ------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_k_pack_is_the_same_gemm(arch):
    """TileLang reads ``k_pack`` (1 or 2) only in AMD's MFMA lowering: on NVIDIA's tensor
    cores ``k_pack=2`` is the same GEMM, and tilecute generates the same code."""
    one = tilecute.compile(P.gemm_forms(k_pack=1), target=arch).get_kernel_source()
    two = tilecute.compile(P.gemm_forms(k_pack=2), target=arch).get_kernel_source()
    assert one == two


def test_k_pack_outside_tilelangs_values_is_refused():
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"T\.gemm: k_pack=3; TileLang's T\.gemm takes 1 or 2"):
        P.gemm_forms(k_pack=3)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_clear_accum_forms(arch):
    """``clear_accum=True`` inside the K loop starts every step afresh; ``clear_accum=(ko ==
    0)`` only the first (wgmma's accumulate flag, or a zeroing under ``if ko == 0``)."""
    every = tilecute.compile(P.gemm_forms(clear="every_step"), target=arch).get_kernel_source()
    first = tilecute.compile(P.gemm_forms(), target=arch).get_kernel_source()
    assert "# T.gemm(A_s, B_s, acc): acc = A_s @ B_s" in every
    assert "# T.gemm(A_s, B_s, acc): acc = (if ko == 0) or += A_s @ B_s" in first
    assert "accumulate=False)" in every
    if arch == "sm_90a":
        assert "accumulate=not ko == 0)" in first
    else:
        assert "if ko == 0:  # clear_accum=ko == 0" in first


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_transposes_reach_the_mma(arch, ta, tb):
    """The operands' majors follow transpose_A / transpose_B: A is M-major when
    transposed, B is N-major unless transposed (``tiled_mma``'s two flags)."""
    src = tilecute.compile(P.gemm_forms(ta=ta, tb=tb), target=arch).get_kernel_source()
    fam = "wgmma" if arch == "sm_90a" else "mma"
    assert f'tcm.tiled_mma("{fam}", cutlass.Float16, cutlass.Float16, cutlass.Float32, ' \
           f"{ta}, {not tb}," in src
    assert f"acc = (if ko == 0) or += A_s{'^T' if ta else ''} @ " \
           f"B_s{'^T' if tb else ''}" in src


def test_policies_arrange_the_warps():
    """FullRow puts the warpgroups along M, FullCol along N (wgmma); on mma.sync FullCol
    puts all 8 warps along N."""
    rows = _src(P.gemm_forms(**GEMM_VARIANTS["full_row_256"]))
    cols = _src(P.gemm_forms(**GEMM_VARIANTS["full_col_256"]))
    assert "cutlass.Float32, False, True, (2, 1), 64)" in rows
    assert "cutlass.Float32, True, False, (1, 2), 128)" in cols
    cols80 = tilecute.compile(P.gemm_forms(**GEMM_VARIANTS["full_col_256"]),
                              target="sm_80").get_kernel_source()
    assert '"mma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, True, False, (1, 8)' in cols80


def test_refusals_name_the_argument_and_line():
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError) as e:
        P.gemm_accumulator_window()
    assert "unseen_programs7.py:" in str(e.value) and "T.gemm: C=acc[0:64, 0:64] is a region" \
        in str(e.value)
    # (order=[1, 0, 2] swaps the two loads of a step, which issue together: accepted)
    loop = next(s for s in walk_stmts(P.pipelined_reordered().kernels[0].body)
                if getattr(s, "kind", None) == "pipelined")
    assert loop.num_stages == 3 and loop.loads_last == ()


def test_pipelined_over_a_runtime_range_guards_its_prologue():
    """Each prologue load of ``T.Pipelined(lo, hi, num_stages=3)`` runs only when its step
    exists (``if s < hi - lo``), the loop is ``range(lo, hi)`` (none when hi <= lo)."""
    # (the threads' own pipeline: its small grid would get a producer warpgroup by default)
    src = _src(P.split_k_ranges(stages=3), options={"disable_warp_specialize": True})
    assert "if 0 < hi - lo:" in src and "if 1 < hi - lo:" in src and "if 2 < hi - lo:" not in src
    assert "for ko in cutlass.range(lo, lo + (hi - lo)):" in src


def test_explicit_schedule_is_the_default_schedule():
    """``order=[0, 1, 2], stage=[0, 0, 1]`` spells tilecute's schedule: the same code as
    ``T.Pipelined(..., num_stages=2)`` alone."""
    a = tilecute.compile(P.pipelined_explicit_schedule(), target="sm_90a").get_kernel_source()
    b = tilecute.compile(P.gemm_forms(clear="clear"), target="sm_90a").get_kernel_source()
    def body(src):
        return src[src.index("tc_mma0 ="):src.index("\n@cute.jit")]
    assert body(a).replace("scheduled", "forms") == body(b)


def test_shuffle_elect_picks_a_lane_per_warpgroup_of_the_block():
    """``T.shuffle_elect(128)``: one lane (elect.sync) of the warps whose block-wide index
    is a multiple of 4, as TileLang's tl_shuffle_elect<128> (canonical warp index)."""
    src = _src(P.ws_two_consumers_elected())
    assert src.count("if tcvote.elect_one_sync(tc_tx // 32 % 4 == 0):") == 2
    assert "tct.init_barriers(full, 2, 1)" in src and "tct.init_barriers(empty, 2, 2)" in src


def test_kernel_thread_forms_read_the_block():
    src = _src(P.kernel_thread_forms())
    assert "tc_tid = tc_tx + tc_ty * 32" in src
    assert "ty2 = tc_ty" in src and "W[bx, by, ty, tx] = tx + 100 * ty2" in src


# ---- cp.async copies are waited for before their tile is handed on -----------------------
def _lines_between(src, first, last):
    """The generated lines from the last ``first`` before the first ``last`` after it."""
    lines = src.splitlines()
    j = next(i for i, t in enumerate(lines) if last in t)
    i = max(i for i, t in enumerate(lines[:j]) if first in t)
    return lines[i:j + 1]


def test_thread_copies_land_before_the_fence_and_the_arrive():
    """The producer's ``T.copy``s run as cp.async; TileLang's copies are synchronous, so
    the program's ``T.fence_proxy_async(); T.mbarrier_arrive(full)`` publishes finished
    tiles: the copies are waited for before the fence (which then covers their writes)."""
    src = _src(P.ws_branch_thread_copies())
    seg = _lines_between(src, "cp_async_commit_group()", "tct.arrive(full")
    text = "\n".join(seg)
    assert "cp_async_wait_group(0)" in text, text
    assert text.index("cp_async_wait_group(0)") < text.index('fence_proxy("async.shared"'), text


def test_thread_copies_land_before_a_tma_store():
    src = _src(P.copy_then_tma_store())
    seg = "\n".join(_lines_between(src, "cp_async_commit_group()", "tct.store(B_desc"))
    assert "cp_async_wait_group(0)" in seg and \
        seg.index("cp_async_wait_group(0)") < seg.index("tct.store_fence()"), seg


def test_thread_copies_land_before_the_programs_partial_barrier():
    src = _src(P.partial_barrier_after_copies())
    seg = "\n".join(_lines_between(src, "cp_async_commit_group()",
                                   "cute.arch.barrier(barrier_id=1, number_of_threads=256)"))
    assert "cp_async_wait_group(0)" in seg, seg


def test_async_copy_wait_is_the_barrier_pass_decision():
    """The wait is an ``AsyncCopyWait`` statement in the lowered IR (printed
    ``T.cp_async_wait()``), right before the statement that hands the tile on; it is not an
    input form."""
    from tilecute.ir.printer import print_func
    from tilecute.ir.validate import ValidationError, validate

    f = run_passes(P.ws_branch_thread_copies(), "sm_90a")
    loop = next(s for s in walk_stmts(f.kernels[0].body)
                if isinstance(s, N.For) and any(isinstance(t, N.MBarrierArrive) for t in s.body))
    kinds = [type(t).__name__ for t in loop.body]
    assert kinds[-3:] == ["AsyncCopyWait", "Evaluate", "MBarrierArrive"], kinds
    assert "T.cp_async_wait()" in print_func(f)
    func = P.copy_then_tma_store()
    k = func.kernels[0]
    bad = dataclasses.replace(func, kernels=(
        dataclasses.replace(k, body=k.body + (N.AsyncCopyWait(),)),))
    with pytest.raises(ValidationError, match="placed by the barrier pass"):
        validate(bad)


def test_no_wait_without_pending_copies():
    """A TMA-fed ring has no cp.async: no waits are added."""
    assert "cp_async_wait_group" not in _src(P.ws_ring_gemm())


def test_ring_parities_and_roles_read_as_written():
    src = _src(P.ws_ring_gemm())
    assert "tct.wait(empty + ko % 3, ko // 3 & 1 ^ 1)" in src
    assert "tct.wait(full + ko % 3, ko // 3 & 1)" in src
    assert re.search(r"if tc_tid >= 128:  # T.ws\(1\)", src) and \
        re.search(r"if tc_tid < 128:  # T.ws\(0\)", src)
    assert src.count("tct.arrive(full + ko % 3)") == 1 and "arrive=False" in src


# ---- on the GPU ------------------------------------------------------------------------------
def _close(got, want, atol=1e-2, rtol=1e-2):
    rounds.close_on_cpu(got, want, atol, rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_ws_ring_on_gpu(stages):
    import torch
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(P.ws_ring_gemm(stages=stages))(a, b, c)
    _close(c, a.float() @ b.float())


@pytest.mark.gpu
def test_ws_single_buffer_on_gpu():
    import torch
    a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(P.ws_single_buffer_nt())(a, b, c)
    _close(c, a.float() @ b.float().T)


@pytest.mark.gpu
def test_thread_copy_producer_on_gpu():
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 128, device="cuda", dtype=torch.float16)
    for _ in range(3):  # a race shows on some launches only
        c.fill_(0)
        tilecute.compile(P.ws_branch_thread_copies())(a, b, c)
        _close(c, a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_copies_handed_on_on_gpu():
    import torch
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    tilecute.compile(P.copy_then_tma_store())(a, b)
    torch.testing.assert_close(b, a, atol=0, rtol=0)
    tilecute.compile(P.partial_barrier_after_copies())(a, b)
    torch.testing.assert_close(b, a.view(4, 64, 128).flip(1).reshape(256, 128), atol=0, rtol=0)


@pytest.mark.gpu
def test_ws_two_consumers_on_gpu():
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(P.ws_two_consumers_elected())(a, b, c)
    _close(c, a.float() @ b.float().T)


def _gemm_inputs(kw, torch):
    """A, B stored as ``gemm_forms`` declares them, and the reference in float64."""
    M, N, K = 128, 128, 256
    dtype = kw.get("dtype", "float16")
    ta, tb = kw.get("ta", False), kw.get("tb", False)
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    if dtype == "int8":
        a = torch.randint(-128, 128, a_shape, device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, b_shape, device="cuda", dtype=torch.int8)
    else:
        tt = getattr(torch, {"float8_e4m3": "float8_e4m3fn"}.get(dtype, dtype))
        a = torch.randn(a_shape, device="cuda").to(tt)
        b = torch.randn(b_shape, device="cuda").to(tt)
    av, bv = a.double(), b.double()
    av = av.T if ta else av
    bv = bv.T if tb else bv
    return a, b, av, bv


@pytest.mark.gpu
@pytest.mark.parametrize("wgmma", [True, False])
@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_transposes_on_gpu(ta, tb, wgmma):
    """Every transpose pair on wgmma and (``disable_wgmma``: the sm_80 path on the H100)
    on mma.sync, fp16 and bf16."""
    import torch
    for dtype in ("float16", "bfloat16"):
        kw = dict(ta=ta, tb=tb, dtype=dtype)
        a, b, av, bv = _gemm_inputs(kw, torch)
        c = torch.empty(128, 128, device="cuda")
        tilecute.compile(P.gemm_forms(**kw), options={"disable_wgmma": not wgmma})(a, b, c)
        _close(c, av @ bv, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(GEMM_VARIANTS))
def test_gemm_variants_on_gpu(variant):
    import torch
    kw = GEMM_VARIANTS[variant]
    a, b, av, bv = _gemm_inputs(kw, torch)
    out = {"int32": torch.int32, "float16": torch.float16}.get(kw.get("accum"), torch.float32)
    c = torch.zeros(128, 128, device="cuda", dtype=out)
    tilecute.compile(P.gemm_forms(**kw))(a, b, c)
    if kw.get("clear") == "every_step":  # only the last K block (bk = 32) counts
        want = av[:, -32:] @ bv[-32:, :]
    else:
        want = av @ bv
    if kw.get("dtype") == "int8":
        torch.testing.assert_close(c.cpu(), want.to(torch.int64).to(torch.int32).cpu(), atol=0,
                                   rtol=0)
    elif kw.get("dtype") == "float32":  # tf32 inputs
        _close(c, want, atol=0.5, rtol=2e-2)
    elif kw.get("accum") == "float16":
        _close(c, want, atol=0.25, rtol=2e-2)
    else:
        _close(c, want, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_fragment_operands_on_gpu():
    import torch
    a = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    c1, c2 = (torch.empty(128, 128, device="cuda") for _ in range(2))
    tilecute.compile(P.gemm_fragment_operands())(a, b, c1, c2)
    _close(c1, a.float().clamp(min=0) @ b.float())
    _close(c2, a.float() @ (2 * b.float()), atol=4e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_split_k_ranges_on_gpu(stages):
    """Ranges of 16, 0, 3 and reversed (hi < lo) K blocks."""
    import torch
    a = torch.randn(128, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 128, device="cuda", dtype=torch.float16)
    lo = torch.tensor([0, 5, 13, 9], device="cuda", dtype=torch.int32)
    hi = torch.tensor([16, 5, 16, 4], device="cuda", dtype=torch.int32)
    c = torch.full((4, 128, 128), 7.0, device="cuda")
    tilecute.compile(P.split_k_ranges(stages=stages))(a, b, lo, hi, c)
    for z in range(4):
        l, h = int(lo[z]) * 32, int(hi[z]) * 32
        want = a[:, l:h].float() @ b[l:h].float() if h > l else torch.zeros(128, 128,
                                                                              device="cuda")
        _close(c[z], want)


@pytest.mark.gpu
@pytest.mark.parametrize("order,panel", [("row", 2), ("col", 4), ("row", 4)])
def test_swizzled_gemm_on_gpu(order, panel):
    import torch
    a = torch.randn(320, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    c = torch.empty(320, 192, device="cuda")
    who = torch.zeros(5, 3, device="cuda", dtype=torch.int32)
    tilecute.compile(P.swizzled_gemm(order=order, panel=panel))(a, b, c, who)
    _close(c, a.float() @ b.float())
    assert (who == 1).all(), who  # the rebound block indices cover the grid once


@pytest.mark.gpu
def test_explicit_schedule_on_gpu():
    import torch
    a = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda")
    tilecute.compile(P.pipelined_explicit_schedule(stages=3))(a, b, c)
    _close(c, a.float() @ b.float())


@pytest.mark.gpu
def test_kernel_thread_forms_on_gpu():
    import torch
    a = torch.randn(64, 128, device="cuda")
    b = torch.empty_like(a)
    w = torch.full((2, 3, 4, 32), -1, device="cuda", dtype=torch.int32)
    tilecute.compile(P.kernel_thread_forms())(a, b, w)
    torch.testing.assert_close(b, a.view(2, 32, 128).flip(1).reshape(64, 128) + 0.5)
    tx = torch.arange(32, device="cuda").view(1, 1, 1, 32)
    ty = torch.arange(4, device="cuda").view(1, 1, 4, 1)
    by = torch.arange(3, device="cuda").view(1, 3, 1, 1)
    bx = torch.arange(2, device="cuda").view(2, 1, 1, 1)
    torch.testing.assert_close(w, (tx + 100 * ty + 10000 * by + 100000 * bx).int())
