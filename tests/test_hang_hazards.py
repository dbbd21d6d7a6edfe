"""Hangs in kernels the passes build: the static check of the lowered IR
(tilecute.transform.hang_check, the pipeline's last pass) and the programs of
tests/hang_hazard_programs.py, which mix the MMA overlap's warpgroup turns and a producer
warpgroup with statements that need barriers.  CPU: the check flags each hazard class on a
kernel that has it (the two the H100 hung on this session among them) and passes the
programs and examples under several option sets; GPU: the programs match torch."""

import dataclasses
import sys
from pathlib import Path

import pytest

import tilecute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import StmtMutator, walk_stmts
from tilecute.transform import insert_barriers
from tilecute.transform.hang_check import HangError, find_hazards
from tilecute.transform.pipeline import PASSES, run_passes

import hang_hazard_programs as H

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

OPTIONS = [{}, {"warpgroup_pingpong": True},
           {"warpgroup_pingpong": True, "rescale_before_gemm": True},
           {"disable_warp_specialize": True}, {"disable_mma_overlap": True}]


def _unchecked(func, options=None):
    """``func`` through every pass but the hang check."""
    return run_passes(func, "sm_90a", options, until=PASSES[-2].name)


class _Edit(StmtMutator):
    def __init__(self, rule):
        self.rule = rule

    def generic(self, s):
        s = super().generic(s)
        return self.rule(s)


def _edit(func, rule):
    """``func`` with each statement ``s`` replaced by ``rule(s)``."""
    kernels = tuple(_Edit(rule).visit_kernel(k) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)


def _turn_waits(body):
    return [s for s in walk_stmts(body) if isinstance(s, N.NamedBarrier) and not s.arrive
            and not isinstance(s.barrier_id, N.Const)]


# ---- the check on kernels that hang ---------------------------------------------------
def test_flags_a_barrier_inside_a_turn_as_before_6429ee7(monkeypatch):
    """The packed-GQA program (Q gathered into shared by the threads, 128 x 128 tiles, 256
    threads) hung the H100 with the barrier before its first GEMM placed after the turn's
    wait: with the barrier pass as it was, the pipeline now stops naming the barrier."""
    import unseen_programs18 as P18

    def old(self, s, st, out):
        if not self.program_orders and self.conflicts(s, st):
            st.barrier(out, getattr(s, "loc", None))

    f = P18.fa_gqa_packed_group_rows.func.get_tir(dim=128, rows=32, block_N=128, threads=256)
    run_passes(f, "sm_90a")  # as the pass is: no hazard
    monkeypatch.setattr(insert_barriers._Sync, "barrier_if_needed", old)
    with pytest.raises(HangError, match=r"unseen_programs18.py:\d+: prim_func 'packed': a "
                                        r"barrier of all the compute threads .*turn wait"):
        run_passes(f, "sm_90a")


def test_flags_setmaxnreg_over_the_launch_pool():
    """A 512-thread GEMM on a small grid gets a producer warpgroup (640 threads, 96
    registers each at launch): the compute warpgroups may take 112, not the 120 the SM's
    file would give (hung the H100 before 0d03309)."""
    g = _unchecked(H.gemm_rowsum_epilogue.func.get_tir(threads=512, block_M=256))
    assert g.kernels[0].producer_threads == 128
    counts = sorted(s.count for s in walk_stmts(g.kernels[0].body) if isinstance(s, N.SetMaxNReg))
    assert counts == [24, 112] and not find_hazards(g)
    bad = _edit(g, lambda s: dataclasses.replace(s, count=120)
                if isinstance(s, N.SetMaxNReg) and s.increase else s)
    (msg,) = find_hazards(bad)
    assert "setmaxnreg asks for 64512 registers" in msg and "more than the 61440" in msg


def test_flags_a_barrier_under_a_thread_branch_and_in_the_producer():
    g = _unchecked(H.gemm_rowsum_epilogue.func.get_tir())
    tid = N.Call("thread_idx", (N.Const(0, "int32"),), "int32")

    def guard(s):  # the block barrier after the tile's store to shared, for threads < 64 only
        if isinstance(s, N.Barrier):
            return N.If(N.Cmp("lt", tid, N.Const(64, "int32")), (s,), loc=s.loc)
        return s
    msgs = find_hazards(_edit(g, guard))
    assert msgs and all("reached by threads 0..63" in m for m in msgs)
    # a barrier in the producer warpgroup's branch: barrier 1 counts the compute threads
    producer = _edit(g, lambda s: dataclasses.replace(s, then=s.then + (N.Barrier(loc=s.loc),))
                     if isinstance(s, N.If) and s.then and isinstance(s.then[0], N.SetMaxNReg)
                     and not s.then[0].increase else s)
    (msg,) = find_hazards(producer)
    assert "reached by threads 256..383" in msg and "never joins" in msg


def test_flags_named_barrier_and_mbarrier_counts():
    g = _unchecked(H.fa_scale_in_shared.func.get_tir())
    assert len(_turn_waits(g.kernels[0].body)) == 2 and not find_hazards(g)
    wrong = _edit(g, lambda s: dataclasses.replace(s, threads=384)
                  if isinstance(s, N.NamedBarrier) and s.arrive else s)
    msgs = find_hazards(wrong)
    assert any("given different thread counts [256, 384]" in m for m in msgs)
    # an empty-stage mbarrier expecting fewer arrivals than the 256 compute threads make
    empties = {s.barrier.buffer for s in walk_stmts(g.kernels[0].body)
               if isinstance(s, N.MBarrierArrive)}
    fewer = _edit(g, lambda s: dataclasses.replace(s, layout=dataclasses.replace(s.layout, threads=128))
                  if isinstance(s, N.Allocate) and s.buffer.name in empties else s)
    msgs = find_hazards(fewer)
    assert msgs and all("expects 128 arrivals a phase, and 256 threads arrive" in m for m in msgs)
    more = _edit(g, lambda s: dataclasses.replace(s, layout=dataclasses.replace(s.layout, threads=512))
                 if isinstance(s, N.Allocate) and s.buffer.name in empties else s)
    assert any("its waits never end" in m for m in find_hazards(more))


# ---- the hazard fixed here: the late rescale in a turn reading shared memory ------------
def test_rescale_reading_shared_runs_before_the_turn():
    """At head dim 128 the rescale of O (``acc_o *= alpha_s[i]``) waits for the next step,
    where it ran inside the warpgroup's turn, after the turn's wait and Q K^T; reading the
    factors the row-stat threads wrote to shared memory, it needs a block barrier there,
    which warpgroup 1 never reached (its turn waits for warpgroup 0's hand-over): the
    statement now runs before the turn's wait."""
    f = H.fa_scale_in_shared.func.get_tir()
    g = run_passes(f, "sm_90a")  # (the check passes)
    loop = next(s for s in walk_stmts(g.kernels[0].body) if isinstance(s, N.For)
                and s.kind == "pipelined")
    kinds = [type(s).__name__ for s in loop.body]
    turn = next(i for i, s in enumerate(loop.body) if s in _turn_waits(loop.body))
    # (the factors' writes and reads are both by the quads holding their rows: since the
    # barrier pass's warp-barrier rule, a warp barrier orders them)
    assert {"Barrier", "WarpSync"} & set(kinds[:turn]) and kinds[turn + 1] == "Gemm"
    assert "Barrier" not in kinds[turn:kinds.index("NamedBarrier", turn + 1)]


@pytest.mark.parametrize("name,kw", [
    ("fa_scale_in_shared", {}), ("fa_scale_in_shared", dict(count_steps=True, print_step=True)),
    ("fa_scale_in_shared", dict(block_M=192, threads=384, dim=64)),
    ("fa_two_sources", {}), ("fa_two_sources", dict(block_M=192, threads=384, dim=64)),
    ("gemm_rowsum_epilogue", dict(threads=128)), ("gemm_rowsum_epilogue", dict(threads=256)),
    ("gemm_rowsum_epilogue", dict(threads=384, block_M=192)),
    ("gemm_rowsum_epilogue", dict(threads=512, block_M=256))])
def test_programs_lower_without_hazards(name, kw):
    f = getattr(H, name).func.get_tir(**kw)
    for o in OPTIONS:
        g = run_passes(f, "sm_90a", o)  # raises HangError on a hazard
        assert not find_hazards(g)


def test_examples_lower_without_hazards():
    import attention
    import gemm
    funcs = [attention.flash_attention(heads=4, dim=d, causal=c) for d in (64, 128, 256)
             for c in (False, True)]
    funcs += [gemm.matmul(threads=t, tm=t // 2 if t > 256 else 128) for t in (128, 256, 384)]
    funcs += [gemm.matmul_pingpong()]
    for f in funcs:
        f = f if isinstance(f, N.PrimFunc) else f.func.get_tir()
        for o in OPTIONS:
            assert not find_hazards(run_passes(f, "sm_90a", o)), (f.name, o)


def test_fa_scale_in_shared_builds():
    assert H.fa_scale_in_shared().ensure_cubin()


# ---- GPU ---------------------------------------------------------------------------------
def _attention(q, k, v):
    import torch
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / q.shape[-1] ** 0.5
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.double()), \
        torch.logsumexp(s, -1)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, dict(count_steps=True)])
def test_fa_scale_in_shared_on_gpu(kw):
    import torch
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    o = H.fa_scale_in_shared(**kw)(q, k, v)
    torch.cuda.synchronize()
    torch.testing.assert_close(o.double(), _attention(q, k, v)[0], atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_fa_two_sources_on_gpu():
    import torch
    torch.manual_seed(1)
    q = torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.float16)
    kc, vc = (torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    kn, vn = (torch.randn(1, 128, 2, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    lse = torch.empty(1, 2, 256, device="cuda", dtype=torch.float32)
    o = H.fa_two_sources()(q, kc, vc, kn, vn, lse)
    torch.cuda.synchronize()
    want, want_lse = _attention(q, torch.cat([kc, kn], 1), torch.cat([vc, vn], 1))
    torch.testing.assert_close(o.double(), want, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("threads,block_M", [(128, 128), (512, 256)])
def test_gemm_rowsum_epilogue_on_gpu(threads, block_M):
    import torch
    torch.manual_seed(2)
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    c, r = H.gemm_rowsum_epilogue(threads=threads, block_M=block_M)(a, b)
    torch.cuda.synchronize()
    want = a.double() @ b.double()
    torch.testing.assert_close(c.double(), want, atol=5e-2, rtol=1e-2)
    torch.testing.assert_close(r.double(), want.reshape(512, 4, 128).sum(-1), atol=0.5, rtol=1e-2)


def test_a_hazard_warns_by_default_and_raises_when_asked(monkeypatch):
    """Users get a HangWarning naming the kernel and line and their kernel (a false alarm
    must not refuse a program); TILECUTE_HANG_CHECK=error (this suite's setting) raises,
    =off skips the check."""
    from tilecute.transform.hang_check import HangWarning, check_hangs
    g = _unchecked(H.gemm_rowsum_epilogue.func.get_tir(threads=512, block_M=256))
    bad = _edit(g, lambda s: dataclasses.replace(s, count=120)
                if isinstance(s, N.SetMaxNReg) and s.increase else s)
    monkeypatch.setenv("TILECUTE_HANG_CHECK", "warn")
    with pytest.warns(HangWarning, match="more than the 61440"):
        assert check_hangs(bad, "sm_90a") is bad
    monkeypatch.setenv("TILECUTE_HANG_CHECK", "error")
    with pytest.raises(HangError, match="more than the 61440"):
        check_hangs(bad, "sm_90a")
    monkeypatch.setenv("TILECUTE_HANG_CHECK", "off")
    assert check_hangs(bad, "sm_90a") is bad
    monkeypatch.setenv("TILECUTE_HANG_CHECK", "eror")  # a typo: refused, not a quiet warn
    with pytest.raises(ValueError, match="TILECUTE_HANG_CHECK='eror': use warn"):
        check_hangs(g, "sm_90a")


def test_a_programs_own_barrier_is_named_as_the_programs(monkeypatch):
    """A hazard at the program's own barrier (named barrier 1 synced with two thread counts)
    is reported at its line, and the message says the program's synchronization may be at
    fault, not only tilecute's passes."""
    import tilecute
    import tilecute.language as T
    from tilecute.transform.hang_check import HangWarning

    f = T.from_script('''import tilecute.language as T


@T.prim_func
def two_counts(A: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        s = T.alloc_shared((256,), "float32")
        s[tx] = A[tx]
        if tx < 64:
            T.sync_threads(1, 64)
        else:
            T.sync_threads(1, 192)
        A[tx] = s[255 - tx]
''')
    monkeypatch.setenv("TILECUTE_HANG_CHECK", "warn")
    with pytest.warns(HangWarning) as w:
        tilecute.compile(f, target="sm_90a")
    (msg,) = [str(x.message) for x in w if issubclass(x.category, HangWarning)]
    assert "<script>:11: prim_func 'two_counts': named barrier 1 is given different thread counts [64, 192]" in msg
    assert "the program's synchronization is at fault" in msg
