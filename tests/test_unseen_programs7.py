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

import unseen_programs7 as P

PROGRAMS = ["ws_ring_gemm", "ws_single_buffer_nt", "ws_branch_thread_copies",
            "copy_then_tma_store", "partial_barrier_after_copies"]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _src(func, **kw):
    return tilecute.compile(func, target="sm_90a", **kw).get_kernel_source()


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name, tmp_path):
    info = tilecute.build_cubin(getattr(P, name)(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names and (tmp_path / "kernel.cubin").stat().st_size > 0


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_ring_depths_build(stages, tmp_path):
    assert tilecute.build_cubin(P.ws_ring_gemm(stages=stages), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


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
    import torch
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), atol=atol, rtol=rtol)


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
