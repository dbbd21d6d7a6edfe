"""Fragments that a ``T.Fragment`` lays over part of the block (TileLang's partial thread
barrier reductions, test_reduce_partial_thread_barrier_*): a fragment on threads 0..63 or
32..95 of 128, a row-sum fragment replicated on those threads, the rows of a fragment on
groups of 64 threads of 128 or 256.  The statements over them run in a thread region of
those threads (pass ``fragment_thread_regions``), their reductions meet on its named
barrier; ranges that are not whole warps, not a power of two wide, or not contiguous are
refused by name, in TileLang's words where its rule is the same."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def softmax_free_normalize(first=0, holders=64, threads=128, rows=4, width=512, vec=8):
    """``out = x / x.sum(-1)``, ``x`` on threads ``first .. first + holders - 1``: each
    holder takes ``vec`` consecutive columns of every row; the row sums on the same
    threads, each holding all of them."""
    @T.prim_func
    def normalize(x: T.Tensor((rows, width), T.float32),
                  out: T.Tensor((rows, width), T.float32)):
        with T.Kernel(1, threads=threads):
            x_frag = T.alloc_fragment((rows, width), T.float32)
            total = T.alloc_fragment((rows,), T.float32)
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=lambda i, j: (
                    first + j // vec, i * vec + j % vec)),
                total: T.Fragment(total.shape, forward_fn=lambda i, rep: (first + rep, i),
                                  replicate=holders),
            })
            for i, j in T.Parallel(rows, width):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, total, dim=1)
            for i, j in T.Parallel(rows, width):
                out[i, j] = x_frag[i, j] / total[i]
    return normalize


def grouped_row_max(threads=128, group=64, rows=2, width=512):
    """Row maxima, row ``i`` on threads ``i * group ..`` (8 columns a thread), the result
    on the threads of its row."""
    @T.prim_func
    def row_max(x: T.Tensor((rows, width), T.float16), out: T.Tensor((rows,), T.float32)):
        with T.Kernel(1, threads=threads):
            xs = T.alloc_fragment((rows, width), T.float32)
            best = T.alloc_fragment((rows,), T.float32)
            T.annotate_layout({
                xs: T.Fragment(xs.shape, forward_fn=lambda i, j: (i * group + j // 8, j % 8)),
                best: T.Fragment(best.shape, forward_fn=lambda i, r: (i * group + r, 0),
                                 replicate=group),
            })
            T.copy(x, xs)
            T.reduce_max(xs, best, dim=1)
            T.copy(best, out)
    return row_max


def shared_handoff():
    """Threads 0..31 hold ``a`` and write it, reversed, to a shared tile; threads 64..127
    hold ``b`` and read the tile: two regions side by side, a barrier between them."""
    @T.prim_func
    def handoff(X: T.Tensor((64, 8), T.float32), Y: T.Tensor((64, 8), T.float32)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 8), T.float32)
            a = T.alloc_fragment((64, 8), T.float32)
            b = T.alloc_fragment((64, 8), T.float32)
            T.annotate_layout({
                a: T.Fragment(a.shape, forward_fn=lambda i, j: (i % 32, (i // 32) * 8 + j)),
                b: T.Fragment(b.shape, forward_fn=lambda i, j: (64 + i, j)),
            })
            T.copy(X, a)
            for i, j in T.Parallel(64, 8):
                tile[63 - i, j] = a[i, j] * 2.0
            for i, j in T.Parallel(64, 8):
                b[i, j] = tile[i, j] + 1.0
            T.copy(b, Y)
    return handoff


def half_block_scale(threads=128):
    """A loop TileLang's ``loop_layout`` puts on threads 64..127 (4 columns a thread)."""
    @T.prim_func
    def scale(X: T.Tensor((8, 256), T.float32), Y: T.Tensor((8, 256), T.float32)):
        with T.Kernel(1, threads=threads):
            for i, j in T.Parallel(8, 256, loop_layout=T.Fragment(
                    (8, 256), forward_fn=lambda i, j: (64 + (i * 256 + j) // 4 % 64,
                                                       (i * 256 + j) // 256 * 4 + j % 4))):
                Y[i, j] = X[i, j] * 3.0
    return scale


def row_sums_out(first=32):
    """Only ``x`` has a layout of the program's (threads 32..95); the row sums' fragment
    is the reduction's (TileLang infers it on the same threads), copied out alone."""
    @T.prim_func
    def sums(X: T.Tensor((4, 512), T.float32), S: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 512), T.float32)
            s = T.alloc_fragment((4,), T.float32)
            T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (
                first + j // 8, i * 8 + j % 8))})
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S)
    return sums


def _regions(func):
    return [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.WarpGroups)]


@pytest.mark.parametrize("first", [0, 32, 64])
def test_statements_over_the_fragment_run_on_its_threads(first):
    func = run_passes(softmax_free_normalize(first), "sm_90a", until="infer_layouts")
    (region,) = _regions(func)
    assert region.span == (first, first + 64)
    kinds = [type(s).__name__ for s in region.body]
    assert kinds == ["For", "Reduce", "For"]
    allocs = {s.buffer.name: s.layout for s in walk_stmts(func.kernels[0].body)
              if isinstance(s, N.Allocate)}
    assert allocs["x_frag"] == N.Layout("blocked", threads=64, vector=8, first_thread=first)
    assert allocs["total"].kind == "replicated"


def test_the_pass_wraps_only_the_statements_over_such_fragments():
    before = run_passes(softmax_free_normalize(32), "sm_90a", until="hoist_parallel_locals")
    after = run_passes(softmax_free_normalize(32), "sm_90a", until="fragment_thread_regions")
    assert not _regions(before) and len(_regions(after)) == 1
    top = [type(s).__name__ for s in after.kernels[0].body]
    assert top == ["Allocate", "Allocate", "WarpGroups"]


def test_reduction_meets_on_the_regions_named_barrier(tmp_path):
    tilecute.build_cubin(softmax_free_normalize(32), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "if tc_tid >= 32 and tc_tid < 96:" in src
    # (4 rows, 2 warps of the region, named barrier 2 over its 64 threads, from warp 1)
    assert 'tcr.block_allreduce(' in src and ", 2, 2, 64, 2, 1)" in src


@pytest.mark.parametrize("threads", [128, 256])
def test_rows_on_groups_of_threads(threads, tmp_path):
    """Row i on threads i * 64 ..: over a 128-thread block the whole block (each row's
    max then held by every thread); over 256 threads the first 128 (a region)."""
    func = run_passes(grouped_row_max(threads), "sm_90a", until="infer_layouts")
    assert [r.span for r in _regions(func)] == ([] if threads == 128 else [(0, 128)])
    info = tilecute.build_cubin(grouped_row_max(threads), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names


def test_regions_side_by_side_are_ordered_by_a_barrier(tmp_path):
    """Unlike T.ws regions (which the program orders with mbarriers), the regions made
    for fragments are ordered as any statements: the reader of the shared tile waits for
    its writer on other threads."""
    func = run_passes(shared_handoff(), "sm_90a", until="insert_barriers")
    kinds = [type(s).__name__ for s in func.kernels[0].body if not isinstance(s, N.Allocate)]
    assert kinds == ["WarpGroups", "Barrier", "WarpGroups"]
    assert [r.span for r in _regions(func)] == [(0, 32), (64, 128)]
    assert tilecute.build_cubin(shared_handoff(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_reductions_output_lives_on_its_threads():
    """The copy of ``s`` names no fragment of the program's range, but ``s`` is made
    there: it runs there (it ran on the whole block, threads 0..31 and 96..127 storing
    registers they never wrote)."""
    func = run_passes(row_sums_out(), "sm_90a", until="infer_layouts")
    (region,) = _regions(func)
    assert region.span == (32, 96)
    assert [type(s).__name__ for s in region.body] == ["For", "Reduce", "For"]


def test_partial_loop_layout_runs_on_its_threads(tmp_path):
    func = run_passes(half_block_scale(), "sm_90a", until="infer_layouts")
    (region,) = _regions(func)
    assert region.span == (64, 128)
    assert tilecute.build_cubin(half_block_scale(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("first", [0, 32])
def test_builds_sm90a_cubin(first, tmp_path):
    info = tilecute.build_cubin(softmax_free_normalize(first), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names


@pytest.mark.parametrize("make,match", [
    (lambda: softmax_free_normalize(first=16), "warp-aligned participating thread range"),
    (lambda: softmax_free_normalize(first=0, holders=48, width=384),
     "positive power of two"),
    (lambda: grouped_row_max(threads=256, group=128, width=256),
     "one contiguous thread range"),
])
def test_ranges_tilelang_refuses_are_refused_in_its_words(make, match):
    with pytest.raises(FrontendError, match=match):
        make()


@pytest.mark.gpu
@pytest.mark.parametrize("first", [0, 32, 64])
def test_normalize_on_gpu(first):
    import torch
    x = torch.rand(4, 512, device="cuda")
    out = torch.empty_like(x)
    tilecute.compile(softmax_free_normalize(first))(x, out)
    torch.testing.assert_close(out, x / x.sum(dim=1, keepdim=True), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [128, 256])
def test_grouped_row_max_on_gpu(threads):
    import torch
    x = torch.randn(2, 512, device="cuda").half()
    out = torch.empty(2, device="cuda")
    tilecute.compile(grouped_row_max(threads))(x, out)
    torch.testing.assert_close(out, x.float().amax(dim=1))


@pytest.mark.gpu
def test_shared_handoff_on_gpu():
    import torch
    x = torch.randn(64, 8, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(shared_handoff())(x, y)
    torch.testing.assert_close(y, x.flip(0) * 2.0 + 1.0)


@pytest.mark.gpu
def test_partial_loop_layout_on_gpu():
    import torch
    x = torch.randn(8, 256, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(half_block_scale())(x, y)
    torch.testing.assert_close(y, x * 3.0)


@pytest.mark.gpu
def test_row_sums_out_on_gpu():
    import torch
    x = torch.rand(4, 512, device="cuda")
    out = torch.empty(4, device="cuda")
    tilecute.compile(row_sums_out())(x, out)
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-5, atol=1e-5)
