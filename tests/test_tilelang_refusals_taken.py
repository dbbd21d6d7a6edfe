"""Programs TileLang refuses by an implementation limit that tilecute computes with the
meaning the program states (TileLang's own tests expect the refusal; tilecute's answer is
the one a TileLang without the limit would give):

- a reduction whose rows are held by a number of threads that is not a power of two
  (TileLang's XOR-butterfly all-reduce needs ``logical_width`` a power of two): here the
  columns of a (48, 2) fragment over 96 threads.  tilecute moves the reduced dim last
  through shared memory and pads each row of 48 to 64 with the reduction's identity, so
  16-lane shuffles reduce it;
- a ``T.Parallel`` loop whose ``loop_layout`` puts an iteration on threads that do not own
  the fragment element it writes (TileLang: "Layout infer conflict").  tilecute lays a
  fragment held by several threads per element out whole on every thread, and the loop
  over it then runs every iteration on every thread: each copy is written, none is stale.

(A grid extent of 0, the third such test, is tests/test_empty_grid.py.)"""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir.printer import print_func as script
from tilecute.transform.pipeline import lower


def column_reduce(kind: str, rows: int = 48, cols: int = 2):
    @T.prim_func
    def col_stat(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((cols,), "float32")):
        with T.Kernel(1, threads=rows * cols):
            x = T.alloc_fragment((rows, cols), "float32")
            y = T.alloc_fragment((cols,), "float32")
            T.copy(X, x)
            if kind == "sum":
                T.reduce_sum(x, y, dim=0)
            else:
                T.reduce_max(x, y, dim=0)
            T.copy(y, Y)
    return col_stat


def shared_writes(width: int = 4):
    """Each element of an (8, 4) fragment on two threads (t and t + 32), the loop that
    fills it on eight threads per iteration, none of them both owners."""
    def owners(i, j, rep):
        return i * width + j + rep * 32, 0

    def runners(i, j, rep):
        return i * width + rep % 4 + (rep // 4) * 32, j

    @T.prim_func
    def fill_then_flip(A: T.Tensor((8, width), "float32"), B: T.Tensor((8, width), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((8, width), "float32")
            T.annotate_layout({f: T.Fragment((8, width), forward_fn=owners, replicate=2)})
            for i, j in T.Parallel(8, width,
                                   loop_layout=T.Fragment((8, width), forward_fn=runners, replicate=8)):
                f[i, j] = A[i, j] * 2.0 + 1.0
            for i, j in T.Parallel(8, width):
                B[i, j] = f[7 - i, width - 1 - j]
    return fill_then_flip


@pytest.mark.parametrize("kind,identity", [("sum", "cutlass.Float32(0.0)"),
                                           ("max", "cutlass.Float32(float(\"-inf\"))")])
def test_columns_of_48_over_96_threads_reduce_padded_rows(kind, identity, tmp_path):
    func = column_reduce(kind)
    # moved last (option disable_in_place_column_reduce): rows of 48 padded to 64 with the
    # identity, then 16 threads x 4 registers a row
    src = emit_cute(lower(func, "sm_90a", {"disable_in_place_column_reduce": True}))
    assert re.search(r"cutlass\.select_\(\(i\d+ \+ tc_lane\d+\) < 48, tc_ld\d+, " + re.escape(identity), src), src
    assert "tcr.warp_allreduce(tc_acc" in src and f'"{kind}", 16)' in src
    # by default in place (TileLang's layout, each column in its own threads): lanes 2
    # apart hold a column, the 3 warps meet in shared
    src = emit_cute(lower(func, "sm_90a"))
    assert re.search(rf'tcr.warp_allreduce\(tc_acc\d+, "{kind}", 16, 2\)', src), src
    assert re.search(rf'tcr.block_allreduce\(tc_red\d+, "{kind}", y_cols_scratch, 3, 3, lanes=2\)', src)
    assert "< 48" not in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_non_owner_loop_layout_writes_every_copy(tmp_path):
    func = shared_writes()
    text = script(func)
    assert 'f = T.alloc_fragment((8, 4), "float32", layout=T.Layout("replicated"))' in text, text
    assert 'loop_layout=T.Layout("replicated")' in text, text
    src = emit_cute(lower(func, "sm_90a"))
    # every thread writes all 32 elements of its own copy, unguarded
    assert "f = cute.make_rmem_tensor((32,), cutlass.Float32)" in src, src
    assert re.search(r"for i in cutlass\.range_constexpr\(0, 8\):\n\s+for j in cutlass\.range_constexpr\(0, 4\):\n"
                     r"\s+f\[i \* 4 \+ j\] = ", src), src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_columns_of_48_over_96_threads_on_gpu(kind):
    import torch

    kernel = tilecute.compile(column_reduce(kind))
    x = -1.0 - torch.rand(48, 2, device="cuda")  # all negative: a 0 pad would win the max
    y = torch.empty(2, device="cuda")
    kernel(x, y)
    ref = x.sum(dim=0) if kind == "sum" else x.max(dim=0).values
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_non_owner_loop_layout_writes_on_gpu():
    import torch

    kernel = tilecute.compile(shared_writes())
    a = torch.randn(8, 4, device="cuda")
    b = torch.empty(8, 4, device="cuda")
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2.0 + 1.0).flip(0, 1))
