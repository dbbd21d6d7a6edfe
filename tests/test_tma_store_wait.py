"""T.tma_store_arrive() and T.tma_store_wait(count=0, read=True), TileLang's commit and wait
of bulk-store groups (cp.async.bulk.commit_group / wait_group[.read] count), run by the
thread that issues the TMA stores (TmaStoreArrive, TmaStoreWait(program=True);
docs/ir.md)."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.codegen.kernel import CodegenError
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def _kernel(func, arch="sm_90a") -> str:
    src = emit_cute(lower(func, arch))
    return src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]


def tile_store(read=True, count=0):
    """Each block doubles a 64 x 64 tile in shared memory and stores it by hand with
    T.tma_copy, commits and waits as a TileLang program does; then, after a barrier, the
    tile is rewritten and stored again."""

    @T.prim_func
    def twice(A: T.Tensor((128, 128), "float32"), B: T.Tensor((128, 128), "float32"),
              C: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float32")
            for i, j in T.Parallel(64, 64):
                s[i, j] = A[by * 64 + i, bx * 64 + j] * 2.0
            T.tma_copy(s, B[by * 64, bx * 64])
            T.tma_store_arrive()
            T.tma_store_wait(count, read=read)
            for i, j in T.Parallel(64, 64):
                s[i, j] = A[by * 64 + i, bx * 64 + j] + 1.0
            T.tma_copy(s, C[by * 64, bx * 64])
            T.tma_store_arrive()
            T.tma_store_wait()
    return twice


def waits_only():
    @T.prim_func
    def waits():
        with T.Kernel(threads=128):
            T.tma_store_wait(read=False)
            T.tma_store_wait(3)
            T.tma_store_arrive()
    return waits


# ---- IR ------------------------------------------------------------------------------------------
def test_frontend_nodes_print_and_round_trip():
    f = waits_only()
    body = f.kernels[0].body
    assert body == (N.TmaStoreWait(count=0, read=False, program=True, loc=body[0].loc),
                    N.TmaStoreWait(count=3, read=True, program=True, loc=body[1].loc),
                    N.TmaStoreArrive(loc=body[2].loc))
    text = f.script()
    assert "T.tma_store_wait(read=False)\n" in text and "T.tma_store_wait(3)\n" in text
    assert "T.tma_store_arrive()\n" in text
    assert T.from_script(text) == f and from_json(to_json(f)) == f
    g = tile_store(read=False)
    assert T.from_script(g.script()) == g


def test_program_wait_ends_the_barrier_pass_deferral():
    """The store's read wait is deferred by the barrier pass; the program's own
    T.tma_store_wait() after it waits for all reads, so the pass adds none before the
    barrier that orders the tile's rewrite (only the kernel's end keeps one)."""
    body = list(walk_stmts(run_passes(tile_store(), "sm_90a").kernels[0].body))
    waits = [s for s in body if isinstance(s, N.TmaStoreWait)]
    assert [w.program for w in waits] == [True, True, False]  # (the last: the kernel's end)
    first = body.index(waits[0])
    assert isinstance(body[first + 1], N.Barrier)  # straight on to the rewrite's barrier
    # a count above 0 leaves groups pending: the pass keeps its own wait
    body = list(walk_stmts(run_passes(tile_store(count=1), "sm_90a").kernels[0].body))
    assert [w.program for w in body if isinstance(w, N.TmaStoreWait)] == [True, False, True, False]


# ---- generated source ------------------------------------------------------------------------------
def test_generated_source():
    src = _kernel(waits_only())
    lines = src.splitlines()
    calls = [(re.search(r"# (T\.tma_store_\w+\([^)]*\))", line)[1], lines[n + 1].strip())
             for n, line in enumerate(lines) if line.strip().startswith("if tc_tid == 0:  # T.tma")]
    assert calls == [
        ("T.tma_store_wait(0, read=False)", "cute.arch.cp_async_bulk_wait_group(0, read=False)"),
        ("T.tma_store_wait(3)", "cute.arch.cp_async_bulk_wait_group(3, read=True)"),
        ("T.tma_store_arrive()", "cute.arch.cp_async_bulk_commit_group()")], src
    src = _kernel(tile_store(read=False))
    assert src.count("cute.arch.cp_async_bulk_commit_group()") == 2
    assert "cute.arch.cp_async_bulk_wait_group(0, read=False)" in src


@pytest.mark.parametrize("make", [waits_only, tile_store, lambda: tile_store(read=False, count=1)],
                         ids=["waits", "store", "store_count"])
def test_builds_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- refusals --------------------------------------------------------------------------------------
def test_refused_below_sm90():
    with pytest.raises(CodegenError, match=r"T\.tma_store_wait\(0, read=False\) .* sm_90\+; "
                                           r"the target is sm_80"):
        _kernel(waits_only(), "sm_80")


@pytest.mark.parametrize("call,match", [("T.tma_store_wait(-1)", "count"),
                                        ("T.tma_store_wait(read='yes')", "read must be True or False"),
                                        ("T.tma_store_arrive(1)", "T.tma_store_arrive")])
def test_bad_arguments(call, match):
    text = f'''
import tilecute.language as T

@T.prim_func
def f():
    with T.Kernel(threads=128):
        {call}
'''
    with pytest.raises(FrontendError, match=match):
        T.from_script(text)


# ---- on the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("read,count", [(True, 0), (False, 0), (False, 1)])
def test_tile_store_on_gpu(read, count):
    import torch
    a = torch.randn(128, 128, device="cuda")
    b, c = torch.zeros_like(a), torch.zeros_like(a)
    tilecute.compile(tile_store(read=read, count=count))(a, b, c)
    torch.testing.assert_close(b, a * 2)
    torch.testing.assert_close(c, a + 1)
