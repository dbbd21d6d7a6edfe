"""``T.copy(..., prefer_instruction=...)`` and the ``annotations={...}`` of ``T.copy`` and
``T.Parallel``, with TileLang's meanings (its copy_analysis.cc and lower_tile_op.cc):

- ``prefer_instruction="tma"``: the copy is a TMA copy, or compiling fails naming it
  ("could not be honored"); with ``disable_tma=True`` or the option ``disable_tma`` it
  conflicts.  ``"cp_async"``: a cp.async copy (global -> shared), or compiling fails.
  ``"sync"``: neither TMA nor cp.async.  Each keeps T.copy synchronous, so results are
  the same whichever instruction moves the tile.
- A T.copy annotation key is read as the argument of its name (TileLang's T.copy puts its
  keyword arguments there, and annotation values win); other keys are refused by name.
- ``T.Parallel(prefer_async=True)`` and the annotations ``parallel_prefer_async`` /
  ``parallel_async_without_async_commit_wait`` are hints tilecute accepts (its
  vectorization pass makes global -> shared stores cp.async where it can and completes
  them before the tile is read); other loop annotation keys are refused by name.

CPU: printed IR (before and after the passes), round trips, sm_90a / sm_80 cubins,
refusals with their lines.  GPU: each variant against torch."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.lower_tile_ops import TileOpError
from tilecute.transform.pipeline import run_passes
from tilecute.transform.tma_copies import TmaError
from tilecute.transform.vectorize import VectorizeError


def tile_through_shared(load=None, store=None, dtype=T.float16, M=256, N=64, block_M=64,
                        via_annotations=False):
    """Each block copies a (block_M, N) tile of A into shared memory and out to B."""
    kw_load = {} if load is None else (
        {"annotations": {"prefer_instruction": load}} if via_annotations else {"prefer_instruction": load})
    kw_store = {} if store is None else (
        {"annotations": {"prefer_instruction": store}} if via_annotations else {"prefer_instruction": store})

    @T.prim_func
    def tile_k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            s = T.alloc_shared((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], s, **kw_load)
            T.copy(s, B[bx * block_M, 0], **kw_store)

    return tile_k


def scaled_rows(load="tma"):
    """A pipelined loop over K tiles, each loaded as asked, scaled and stored per row."""

    @T.prim_func
    def rows_k(A: T.Tensor((128, 256), T.float32), B: T.Tensor((128, 256), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 64), T.float32)
            f = T.alloc_fragment((64, 64), T.float32)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[bx * 64, k * 64], s, prefer_instruction=load)
                for i, j in T.Parallel(64, 64):
                    f[i, j] = s[i, j] * 2.0
                T.copy(f, B[bx * 64, k * 64])

    return rows_k


def _stmts(func, kind):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, kind)]


def _copy_nests(func):
    """The innermost loops of the parallel nests that store into shared or global memory
    from a load of the other (the lowered copies)."""
    out = []
    for s in _stmts(func, N.For):
        if s.kind == "parallel" and len(s.body) == 1 and isinstance(s.body[0], N.Store) \
                and isinstance(s.body[0].value, N.Load):
            out.append(s)
    return out


# ---- the frontend --------------------------------------------------------------------------
@pytest.mark.parametrize("via_annotations", [False, True], ids=["argument", "annotations"])
def test_prefer_instruction_is_on_the_copy_and_printed(via_annotations):
    f = tile_through_shared("cp_async", "sync", via_annotations=via_annotations)
    copies = _stmts(f, N.Copy)
    assert [c.instruction for c in copies] == ["cp_async", "sync"]
    text = f.script()
    assert 'T.copy(A[bx * 64, 0], s, prefer_instruction="cp_async")' in text
    assert 'T.copy(s, B[bx * 64, 0], prefer_instruction="sync")' in text
    assert T.from_script(text).script() == text


def test_annotation_values_win_over_arguments():
    """TileLang's T.copy: 'Values in annotations take precedence over individual arguments'."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), T.float16)
            T.copy(A, s, prefer_instruction="tma", annotations={"prefer_instruction": "sync",
                                                              "disable_tma": True})

    (c,) = _stmts(k, N.Copy)
    assert (c.instruction, c.disable_tma) == ("sync", True)


def test_lowered_ir_round_trips():
    text = run_passes(tile_through_shared("tma", "tma"), "sm_90a").script()
    assert text.count("required=True") == 2
    text = run_passes(tile_through_shared("cp_async", "sync"), "sm_90a").script()
    assert 'copy_instruction="cp_async"' in text and T.from_script(text).script() == text


# ---- what the passes do with it ------------------------------------------------------------
def test_tma_load_and_store_are_tma_copies():
    f = run_passes(tile_through_shared("tma", "tma"), "sm_90a")
    tma = _stmts(f, N.TmaCopy)
    assert len(tma) == 2 and all(t.required for t in tma)
    assert not _copy_nests(f)


def test_sync_keeps_the_tile_off_tma_and_cp_async():
    base = run_passes(tile_through_shared(), "sm_90a")
    assert len(_stmts(base, N.TmaCopy)) == 2  # what tilecute chooses by itself
    f = run_passes(tile_through_shared("sync", "sync"), "sm_90a")
    assert not _stmts(f, N.TmaCopy)
    nests = _copy_nests(f)
    assert len(nests) == 2 and not any(n.async_copy for n in nests)
    assert all(n.copy_instruction == "sync" for n in nests)
    assert not _stmts(f, N.AsyncCopyWait) and all(not b.wait_async for b in _stmts(f, N.Barrier))


def test_cp_async_load_is_a_cp_async_nest_waited_for_before_the_store():
    f = run_passes(tile_through_shared("cp_async", "sync"), "sm_90a")
    assert not _stmts(f, N.TmaCopy)
    load, store = _copy_nests(f)
    assert load.async_copy and not store.async_copy
    assert any(b.wait_async for b in _stmts(f, N.Barrier))  # the tile lands before it is read


def test_tma_load_in_a_pipelined_loop_is_a_stage_load():
    f = run_passes(scaled_rows("tma"), "sm_90a")
    loads = [t for t in _stmts(f, N.TmaCopy) if t.barrier is not None]
    assert loads and all(t.required for t in loads)


def test_cp_async_in_a_pipelined_loop_stays_off_tma():
    f = run_passes(scaled_rows("cp_async"), "sm_90a")
    assert not [t for t in _stmts(f, N.TmaCopy) if t.barrier is not None]
    assert any(n.async_copy for n in _copy_nests(f))


@pytest.mark.parametrize("make,arch", [
    (lambda: tile_through_shared("tma", "tma"), "sm_90a"),
    (lambda: tile_through_shared("cp_async", "sync"), "sm_90a"),
    (lambda: tile_through_shared("sync", "sync", dtype=T.float32), "sm_90a"),
    (lambda: scaled_rows("tma"), "sm_90a"),
    (lambda: tile_through_shared("cp_async", "sync"), "sm_80"),
], ids=["tma sm_90a", "cp_async sm_90a", "sync float32", "tma pipelined", "cp_async sm_80"])
def test_cubins(make, arch, tmp_path):
    info = tilecute.build_cubin(make(), arch, out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_generated_source_shows_the_instruction(tmp_path):
    src = tilecute.compile(tile_through_shared("cp_async", "sync")).get_kernel_source()
    assert "copy_async" in src or "cp_async" in src
    src = tilecute.compile(tile_through_shared("tma", "tma")).get_kernel_source()
    assert "tct.load(" in src and "tct.store(" in src


# ---- refused: what TileLang refuses, and what tilecute cannot honor -------------------------
def _script(body: str, params: str = 'A: T.Tensor((256, 64), T.float16), B: T.Tensor((256, 64), T.float16)'):
    return textwrap.dedent(f'''
        import tilecute.language as T

        @T.prim_func
        def kern({params}):
            with T.Kernel(4, threads=128) as bx:
                s = T.alloc_shared((64, 64), T.float16)
    ''') + textwrap.indent(textwrap.dedent(body), " " * 8)


@pytest.mark.parametrize("body,message", [
    ('T.copy(A[bx * 64, 0], s, prefer_instruction="ldsm")',
     "T.copy: prefer_instruction='ldsm': expected one of 'tma', 'cp_async', 'sync'"),
    ('T.copy(A[bx * 64, 0], s, annotations={"prefer_instruction": "bulk"})',
     "T.copy: annotations={'prefer_instruction': 'bulk'}: expected one of"),
    ('T.copy(A[bx * 64, 0], s, disable_tma=True, prefer_instruction="tma")',
     "T.copy: prefer_instruction='tma' conflicts with disable_tma=True"),
    ('T.copy(A[bx * 64, 0], s, annotations={"test.copy": "sync"})',
     "T.copy: annotations={'test.copy': 'sync'} is not supported: tilecute does not know this annotation"),
    ('T.copy(A[bx * 64, 0], s, annotations={"no_implicit_async_commit_wait": True})',
     "T.copy: annotations={'no_implicit_async_commit_wait': True} is not supported: TileLang's "
     "pipeline pass"),
    ('T.copy(A[bx * 64, 0], s, annotations={"eviction_policy": 1})',
     "T.copy: annotations={'eviction_policy': 1} is not supported: tilecute's copies use the normal"),
    ('T.copy(A[bx * 64, 0], s, annotations={"coalesced_width": 0})',
     "T.copy: annotations={'coalesced_width': 0}: coalesced_width must be an int >= 1"),
    ('for i, j in T.Parallel(64, 64, annotations={"parallel_loop_predicate": bx < 3}):\n    s[i, j] = 0',
     "T.Parallel: annotations={'parallel_loop_predicate'"),
    ('for i, j in T.Parallel(64, 64, annotations={"parallel_async_without_async_commit_wait": 1}):\n    s[i, j] = 0',
     "T.Parallel: parallel_async_without_async_commit_wait=1 must be True or False"),
    ('for i, j in T.Parallel(64, 64, annotations={"unroll": True}):\n    s[i, j] = 0',
     "T.Parallel: annotations={'unroll': True} is not supported: tilecute does not know this annotation"),
    ('for k in T.serial(4, annotations={"parallel_prefer_async": True}):\n    T.copy(A[k * 64, 0], s)',
     "T.serial: annotations={'parallel_prefer_async': True} is not supported"),
])
def test_refused_at_parse_time_with_the_line(body, message):
    text = _script(body)
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    msg = str(e.value)
    assert message in msg, msg
    line = text.splitlines().index("        " + body.splitlines()[0]) + 1
    assert f"<script>:{line}:" in msg


def test_tma_that_tilecute_cannot_make_is_an_error_naming_the_copy():
    """A load inside a plain serial loop: tilecute issues TMA loads at the kernel's top
    level and in T.Pipelined bodies only, so it cannot honor the request there."""
    text = _script('''
        for k in T.serial(4):
            T.copy(A[k * 64, 0], s, prefer_instruction="tma")
            T.copy(s, B[k * 64, 0])
    ''')
    f = T.from_script(text)
    with pytest.raises(TileOpError) as e:
        run_passes(f, "sm_90a")
    msg = str(e.value)
    assert 'T.copy(A[k * 64, 0], s, prefer_instruction="tma") could not be honored' in msg
    assert "<script>:10:" in msg


def test_tma_between_a_fragment_and_global_memory_is_refused():
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), T.float32)
            T.clear(f)
            T.copy(f, A, prefer_instruction="tma")

    with pytest.raises(TileOpError, match="could not be honored: TMA copies between global and "
                                          "shared memory; this copy is fragment -> global"):
        run_passes(k, "sm_90a")


def test_tma_conflicts_with_the_disable_tma_option_and_needs_sm_90():
    f = tile_through_shared("tma", None)
    with pytest.raises(TmaError, match=r'prefer_instruction="tma"\) conflicts with the option disable_tma'):
        run_passes(f, "sm_90a", {"disable_tma": True})
    with pytest.raises(TmaError, match="could not be honored: TMA is sm_90\\+, the target is sm_80"):
        run_passes(f, "sm_80")


def test_cp_async_that_cannot_be_is_an_error_naming_the_copy():
    with pytest.raises(TileOpError, match="cp.async copies global -> shared memory; this copy "
                                          "is shared -> global"):
        run_passes(tile_through_shared(None, "cp_async"), "sm_90a")

    @T.prim_func
    def odd(A: T.Tensor((64, 3), T.float16), B: T.Tensor((64, 3), T.float16)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64, 3), T.float16)
            T.copy(A, s, prefer_instruction="cp_async")  # 2-byte rows pieces: no cp.async
            T.copy(s, B)

    with pytest.raises(VectorizeError, match=r'prefer_instruction="cp_async"\) could not be honored'):
        run_passes(odd, "sm_90a")


# ---- T.Parallel's hints ----------------------------------------------------------------------
def _parallel_copy(**kw):
    @T.prim_func
    def k(A: T.Tensor((256, 64), T.float16), B: T.Tensor((256, 64), T.float16)):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((64, 64), T.float16)
            for i, j in T.Parallel(64, 64, **kw):
                s[i, j] = A[bx * 64 + i, j]
            for i, j in T.Parallel(64, 64):
                B[bx * 64 + i, j] = s[i, j] + s[63 - i, j]

    return k


@pytest.mark.parametrize("kw", [
    {"prefer_async": True},
    {"prefer_async": False},
    {"annotations": {"parallel_prefer_async": True}},
    {"prefer_async": True, "annotations": {"parallel_async_without_async_commit_wait": True}},
], ids=["prefer_async", "prefer_async=False", "annotation", "without commit/wait"])
def test_parallel_async_hints_give_the_same_program(kw):
    """The hints change nothing tilecute does: the nest is cp.async either way (the
    vectorization pass's choice) and the block barrier before the reads waits for it."""
    plain = run_passes(_parallel_copy(), "sm_90a").script()
    assert run_passes(_parallel_copy(**kw), "sm_90a").script() == plain
    assert "async_copy=True" in plain and "T.sync_threads(wait_async=True)" in plain


def test_parallel_coalesced_width_annotation_is_the_argument():
    a = run_passes(_parallel_copy(annotations={"coalesced_width": 4}), "sm_90a").script()
    b = run_passes(_parallel_copy(coalesced_width=4), "sm_90a").script()
    assert a == b and "vector_width=4" in a


# ---- on a GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("load,store", [("tma", "tma"), ("cp_async", "sync"), ("sync", "tma"),
                                        ("sync", "sync"), (None, None)])
def test_every_instruction_copies_the_tile(load, store):
    import torch

    a = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    out = tilecute.compile(tile_through_shared(load, store), out_idx=[-1])(a)
    torch.testing.assert_close(out, a, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("load", ["tma", "cp_async", "sync"])
def test_pipelined_loads_on_gpu(load):
    import torch

    a = torch.randn(128, 256, device="cuda")
    out = tilecute.compile(scaled_rows(load), out_idx=[-1])(a)
    torch.testing.assert_close(out, a * 2)


@pytest.mark.gpu
def test_parallel_hints_on_gpu():
    import torch

    a = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    out = tilecute.compile(_parallel_copy(prefer_async=True, annotations={
        "parallel_async_without_async_commit_wait": True}), out_idx=[-1])(a)
    ref = a.view(4, 64, 64)
    torch.testing.assert_close(out, (ref + ref.flip(1)).view(256, 64))
