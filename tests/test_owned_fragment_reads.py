"""A fragment the program lays out with ``T.annotate_layout`` (a ``T.Fragment`` whose thread
for element ``(i, j)`` is ``i``) read inside ``T.Parallel`` at another element of the same
row (``acc[i, 63 - j]``, ``acc[i, (j + 8) % 64]``, ``acc[i, j ^ 1]``): TileLang proves through
the layout's thread map that the element lives on the iteration's own thread and reads that
thread's register; tilecute does the same (layout_inference.owned_registers) instead of
refusing the read as one across threads.  A read that does cross threads is still refused."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.layout_inference import LayoutError

COLUMN_MAPS = {
    "reversed": lambda j: 63 - j,
    "rotated": lambda j: (j + 8) % 64,
    "pair_swapped": lambda j: j ^ 1,
    "clamped_shift": lambda j: T.min(j + 1, 63),
}
REFERENCE_COLUMNS = {"reversed": lambda j: 63 - j, "rotated": lambda j: (j + 8) % 64,
                     "pair_swapped": lambda j: j ^ 1, "clamped_shift": lambda j: min(j + 1, 63)}


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def row_permute(column, rows=64, threads=64):
    """y[i, j] = x[i, column(j)] + 1 through a fragment held one row a thread (``rows``
    over ``threads``: ``rows // threads`` rows a thread)."""

    @T.prim_func
    def row_permute(x: T.Tensor((rows, 64), "float32"), y: T.Tensor((rows, 64), "float32")):
        with T.Kernel(1, threads=threads) as _:
            acc = T.alloc_fragment((rows, 64), "float32")
            out = T.alloc_fragment((rows, 64), "float32")
            T.annotate_layout({
                acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i % threads,
                                forward_index_fn=lambda i, j: (i // threads) * 64 + j),
                out: T.Fragment(out.shape, forward_thread_fn=lambda i, j: i % threads,
                                forward_index_fn=lambda i, j: (i // threads) * 64 + j)})
            T.copy(x, acc)
            for i, j in T.Parallel(rows, 64):
                out[i, j] = acc[i, column(j)] + 1.0
            T.copy(out, y)
    return row_permute


def row_to_global(column):
    """The same read with no fragment of the nest's own: the nest writes global memory."""

    @T.prim_func
    def row_to_global(x: T.Tensor((64, 64), "float32"), y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=64) as _:
            acc = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i)})
            T.copy(x, acc)
            for i, j in T.Parallel(64, 64):
                y[i, j] = acc[i, column(j)]
    return row_to_global


@pytest.mark.parametrize("form, register", [
    ("reversed", "acc[63 - tc_lane"),
    ("rotated", "acc[(tc_lane5 + 8) % 64]"),
    ("pair_swapped", "acc[tc_lane5 ^ 1]"),
    ("clamped_shift", "acc[cutlass.min(tc_lane5 + 1, 63)]"),
])
def test_same_row_read_uses_own_registers(tmp_path, form, register):
    func = row_permute(COLUMN_MAPS[form])
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert register in src
    assert "cute.make_rmem_tensor((4096,)" not in src  # not replicated whole on every thread
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin")


@pytest.mark.parametrize("form, register", [
    ("reversed", r"acc\[63 \+ 64 \* tc_k\d+ - tc_lane\d+\]"),
    ("pair_swapped", r"acc\[tc_k\d+ \* 64 \+ \(tc_lane\d+ \^ 1\)\]"),
])
def test_two_rows_a_thread(tmp_path, form, register):
    """128 rows over 64 threads: a thread's second row is registers 64..127, so at step
    ``k`` the read is register ``64 k`` plus the column."""
    func = row_permute(COLUMN_MAPS[form], rows=128)
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert re.search(register, src)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def test_read_into_global(tmp_path):
    func = row_to_global(COLUMN_MAPS["reversed"])
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert "acc[63 - tc_lane" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def shifted_window(rows=64, threads=64, shift=8):
    """y[i, j] = x[i, j + shift] over ``T.Parallel(rows, 64 - shift)``: a nest narrower than
    the fragment's rows, which TileLang lays out by the fragment (a row of iterations a
    thread); tilecute runs it ``64 - shift`` lanes a thread step, the fragment 64."""

    @T.prim_func
    def shifted_window(x: T.Tensor((rows, 64), "float32"), y: T.Tensor((rows, 64 - shift), "float32")):
        with T.Kernel(1, threads=threads) as _:
            acc = T.alloc_fragment((rows, 64), "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i % threads,
                                               forward_index_fn=lambda i, j: (i // threads) * 64 + j)})
            T.copy(x, acc)
            for i, j in T.Parallel(rows, 64 - shift):
                y[i, j] = acc[i, j + shift] * 2.0
    return shifted_window


@pytest.mark.parametrize("rows, register", [
    (64, r"tc_vec\d+\[(tc_lane\d+)\] = acc\[8 \+ \1\] \* "),
    (128, r"acc\[8 \+ 64 \* tc_k\d+ \+ tc_lane\d+\] \* "),
])
def test_narrower_nest_reads_own_row(tmp_path, rows, register):
    func = shifted_window(rows=rows)
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert re.search(register, src)
    assert re.search(r"= \(?tc_tid\)? \* 56|= \(tc_k\d+ \* 64 \+ tc_tid\) \* 56", src)  # 56 lanes a step
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def test_read_across_threads_still_refused():
    @T.prim_func
    def row_flip(x: T.Tensor((64, 64), "float32"), y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=64) as _:
            acc = T.alloc_fragment((64, 64), "float32")
            out = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i),
                               out: T.Fragment(out.shape, forward_thread_fn=lambda i, j: i)})
            T.copy(x, acc)
            for i, j in T.Parallel(64, 64):
                out[i, j] = acc[63 - i, j]  # row 63 - i lives on thread 63 - i
            T.copy(out, y)
    with pytest.raises(LayoutError, match="prim_func 'row_flip'.*fragment 'acc'.*read across threads"):
        tilecute.compile(row_flip, target="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("form", sorted(COLUMN_MAPS))
@pytest.mark.parametrize("rows", [64, 128])
def test_same_row_read_matches_torch(form, rows):
    import torch

    x = torch.randn(rows, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(row_permute(COLUMN_MAPS[form], rows=rows))(x, y)
    perm = torch.tensor([REFERENCE_COLUMNS[form](j) for j in range(64)], device="cuda")
    torch.testing.assert_close(y, x[:, perm] + 1.0)


@pytest.mark.gpu
def test_read_into_global_matches_torch():
    import torch

    x = torch.randn(64, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(row_to_global(COLUMN_MAPS["reversed"]))(x, y)
    torch.testing.assert_close(y, x.flip(1))


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [64, 128])
def test_narrower_nest_matches_torch(rows):
    import torch

    x = torch.randn(rows, 64, device="cuda")
    y = torch.empty(rows, 56, device="cuda")
    tilecute.compile(shifted_window(rows=rows))(x, y)
    torch.testing.assert_close(y, x[:, 8:] * 2.0)
