"""TileLang's partial barrier ``T.sync_threads(barrier_id, arrive_count=None)``:
``bar.sync id, count`` over ``count`` threads (the whole block without it), a
``NamedBarrier`` the program owns.  The barrier pass takes it as a sync point (no block
barrier inside the branch it guards); warp specialization and the MMA overlap, which
take named barriers of their own, refuse a kernel holding one; ``T.ws`` regions take ids
the program does not use.  CPU: IR,
printed script round trip, refusals, an sm_90a cubin; GPU: a prefix sum over a subset of
the block's threads."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.codegen.source import CodegenError
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower

LANES = 64


def _prefix_sum():
    @T.prim_func
    def prefix_sum(A: T.Tensor((LANES,), T.int32), B: T.Tensor((LANES,), T.int32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            acc = T.alloc_shared((LANES,), T.int32)
            part = T.alloc_var(T.int32)
            if tx < LANES:
                acc[tx] = A[tx]
            T.sync_threads()
            if tx < LANES:  # only 2 warps take part in the scan's steps
                for step in T.serial(6):
                    gap = 1 << step
                    T.sync_threads(5, LANES)
                    if tx >= gap:
                        part = acc[tx] + acc[tx - gap]
                    T.sync_threads(5, LANES)
                    if tx >= gap:
                        acc[tx] = part
            T.sync_threads(0)  # barrier 0 over the block: the block barrier
            if tx < LANES:
                B[tx] = acc[tx]

    return prefix_sum


def test_partial_barriers_are_the_programs_named_barriers():
    f = _prefix_sum()
    named = [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.NamedBarrier)]
    assert [(s.barrier_id, s.threads, s.program) for s in named] == \
        [(N.Const(5, "int32"), 64, True)] * 2
    assert sum(isinstance(s, N.Barrier) for s in walk_stmts(f.kernels[0].body)) == 2
    assert "T.sync_threads(5, 64)" in f.script()
    assert T.from_script(f.script()).script() == f.script()


def test_no_block_barrier_lands_inside_the_partial_scan():
    lowered = lower(_prefix_sum(), "sm_90a").func
    guarded = [s for s in walk_stmts(lowered.kernels[0].body)
               if isinstance(s, N.For) and s.kind == "serial"][0]
    assert not any(isinstance(s, N.Barrier) for s in walk_stmts(guarded.body))


def test_partial_barrier_builds_a_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_prefix_sum(), target="cuda")
    assert "cute.arch.barrier(barrier_id=5, number_of_threads=64)" in kernel.get_kernel_source()
    assert kernel.ensure_cubin()


@pytest.mark.parametrize("call, message", [
    ("T.sync_threads(16, 64)", r"barrier_id=.*barrier 16: the hardware has named barriers 0..15"),
    ("T.sync_threads(3, 48)", r"arrive_count=.*48 threads: a named barrier counts whole warps"),
    ("T.sync_threads(3, 512)", r"at most the block's 256"),
    ("T.sync_threads(arrive_count=64)", r"arrive_count=64 is not supported: an arrive count needs a barrier_id"),
])
def test_partial_barrier_refusals(call, message):
    with pytest.raises(FrontendError, match=message):
        T.from_script(f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=256):
        {call}
        A[0] = 1.0
''')


def _ws_and_named(barrier_id):
    @T.prim_func
    def mixed(A: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((128,), T.float32)
            with T.ws(1):
                for i in T.Parallel(128):
                    s[i] = A[i] * 2.0
                for i in T.Parallel(128):
                    A[128 + i] = s[127 - i]
            T.sync_threads(barrier_id(bx), 256)
            for i in T.Parallel(128):
                A[i] = s[i]
    return mixed


def test_ws_regions_take_a_named_barrier_the_program_does_not(tmp_path, monkeypatch):
    """A ``T.ws`` region syncs on a named barrier of its own: one the program's
    ``T.sync_threads(id, count)`` does not use (TileLang's radix top-k syncs barrier 3
    inside ``if tx < 256:``, a region).  It used to refuse any kernel with a program
    barrier."""
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    src = tilecute.compile(_ws_and_named(lambda bx: 2), target="cuda").get_kernel_source()
    assert "cute.arch.barrier(barrier_id=3, number_of_threads=128)" in src, src  # the region's
    assert "cute.arch.barrier(barrier_id=2, number_of_threads=256)" in src, src  # the program's


def test_ws_regions_refuse_a_named_barrier_computed_at_run_time(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    with pytest.raises(CodegenError, match=r"T.ws regions sync on named barriers 2.. of their own"
                                           r", and the kernel syncs a named barrier whose id is "
                                           r"computed at run time"):
        tilecute.compile(_ws_and_named(lambda bx: bx + 4), target="cuda")


@pytest.mark.gpu
def test_partial_scan_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    a = torch.randint(0, 100, (LANES,), dtype=torch.int32, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(_prefix_sum())(a, b)
    assert torch.equal(b, torch.cumsum(a, 0).to(torch.int32))


def _staged():
    @T.prim_func
    def staged(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), T.float32)
            for i in T.Parallel(128):
                s[i] = A[i] * 2.0
            for i in T.Parallel(128):
                B[i] = s[127 - i]

    return staged


def test_disabled_barrier_insertion_leaves_the_ordering_to_the_program():
    from tilecute.options import PassConfigKey, from_pass_configs

    def barriers(options):
        body = lower(_staged(), "sm_90a", options).func.kernels[0].body
        return sum(isinstance(s, N.Barrier) for s in walk_stmts(body))

    assert barriers(None) == 1  # the pass orders the write and the other threads' reads
    options = from_pass_configs({PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}, "staged")
    assert options == {"disable_barrier_insertion": True}
    assert barriers(options) == 0
