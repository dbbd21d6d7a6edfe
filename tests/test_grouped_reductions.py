"""Row reductions of blocked fragments whose rows are shorter than the block's threads x
vector (TileLang's ``block_M`` > 1 norms and softmaxes, FlashAttention-backward's
preprocessing: a 32 x 32 fragment on 128 threads): a row is a group of consecutive
threads, reduced by shuffles within the group, and the rows meet in shared memory."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import lower


def _row_stats(rows, cols, threads, kind="sum", clear=True, dtype="float16", whole=False):
    """``whole``: the statistic is stored reversed (``S[i] = s[rows - 1 - i]``), a read of
    rows other than the thread's own, so the rows are shared out."""
    @T.prim_func
    def row_stats(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), "float32"),
                  S: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((rows, cols), dtype)
            y = T.alloc_fragment((rows, cols), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.copy(X, x)
            T.fill(s, 1.0)
            if kind == "sum":
                T.reduce_sum(x, s, dim=1, clear=clear)
            else:
                T.reduce_max(x, s, dim=1, clear=clear)
            for i, j in T.Parallel(rows, cols):  # the row statistic broadcast back
                y[i, j] = T.cast(x[i, j], "float32") - s[i]
            T.copy(y, Y)
            if whole:
                for i in T.Parallel(rows):
                    S[i] = s[rows - 1 - i]
            else:
                T.copy(s, S)
    return row_stats


@pytest.mark.parametrize("rows,cols,threads", [(32, 32, 128), (64, 16, 256), (16, 64, 128),
                                              (128, 8, 128)])
@pytest.mark.parametrize("whole", [False, True])
def test_short_rows_reduce_in_lane_groups(rows, cols, threads, whole, tmp_path):
    func = _row_stats(rows, cols, threads, whole=whole)
    source = emit_cute(lower(func, "sm_90a"))
    # read whole, the rows meet in shared memory; read only by nests over the rows (the
    # broadcast back, T.copy(s, S)), each thread keeps its own rows' results
    assert ("tcr.grouped_rows(" in source) == whole
    assert ("# s: its rows stay in tc_red" in source) != whole
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_rows_that_no_lane_group_covers_are_refused():
    with pytest.raises(LayoutError, match="power-of-two number"):
        lower(_row_stats(8, 48, 128), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols,threads,kind,clear", [
    (32, 32, 128, "sum", True), (64, 16, 256, "max", True), (16, 64, 128, "sum", False),
    (128, 8, 128, "max", False)])
@pytest.mark.parametrize("whole", [False, True])
def test_short_rows_on_gpu(rows, cols, threads, kind, clear, whole):
    import torch

    kernel = tilecute.compile(_row_stats(rows, cols, threads, kind, clear, whole=whole))
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    y = torch.empty(rows, cols, device="cuda")
    s = torch.empty(rows, device="cuda")
    kernel(x, y, s)
    ref = x.float().sum(1) if kind == "sum" else x.float().amax(1)
    if not clear:
        ref = ref + 1.0 if kind == "sum" else torch.maximum(ref, torch.ones_like(ref))
    torch.testing.assert_close(s, ref.flip(0) if whole else ref, atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(y, x.float() - ref[:, None], atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("rows,cols,threads", [(2, 64, 128), (2, 128, 256), (4, 64, 256)])
def test_rows_of_whole_warps_reduce_across_the_group(rows, cols, threads, tmp_path):
    # a row of `cols` float32 elements held by cols // 1 consecutive threads, more than a
    # warp (TileLang's dim-0 reduction of a (64, 2) fragment on 128 threads): each warp
    # shuffles, then the group's warps meet in shared, then the rows are shared out
    func = _row_stats(rows, cols, threads, dtype="float32", whole=True)
    source = emit_cute(lower(func, "sm_90a"))
    assert "tcr.block_allreduce(" in source and f", {threads // 32}, {cols // 32})" in source
    assert "tcr.grouped_rows(" in source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols,threads,kind", [(2, 64, 128, "sum"), (2, 128, 256, "max"),
                                                    (4, 64, 256, "sum"), (2, 96, 96, "max")])
def test_rows_of_whole_warps_on_gpu(rows, cols, threads, kind):
    import torch

    kernel = tilecute.compile(_row_stats(rows, cols, threads, kind, True, "float32"))
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty(rows, cols, device="cuda")
    s = torch.empty(rows, device="cuda")
    kernel(x, y, s)
    ref = x.sum(dim=1) if kind == "sum" else x.max(dim=1).values
    torch.testing.assert_close(s, ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(y, x - ref[:, None], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rows,cols,threads", [(1, 48, 48), (2, 24, 24)])
def test_rows_over_a_partial_warp_are_refused(rows, cols, threads):
    # every thread holds part of each row, but the block is not whole warps (nor a power of
    # two up to 32): the shuffles would read lanes past the block; TileLang refuses these
    # too (logical_width must be a positive power of two)
    with pytest.raises(LayoutError, match=rf"spreads over all {threads} threads of the block "
                                          rf"\(logical_width {threads}\), which must be a "
                                          "positive power of two"):
        lower(_row_stats(rows, cols, threads, dtype="float32"), "sm_90a")


def test_rows_over_three_whole_warps_reduce(tmp_path):
    # 96 threads, a row each: three whole warps meet in shared (TileLang refuses a logical
    # width that is not a power of two; tilecute's exchange takes any number of warps)
    func = _row_stats(2, 96, 96, dtype="float32")
    assert "tcr.block_allreduce(" in emit_cute(lower(func, "sm_90a"))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def _token_cast(blk_m=8, group=128, threads=128):
    # TileLang's per-token fp8 cast (cast/example_group_per_split_token_cast_to_fp8.py):
    # rows of `group` elements, a row offset summed into a T.alloc_var
    @T.prim_func
    def token_cast(X: T.Tensor((64, 256), "bfloat16"), sizes: T.Tensor((2,), "int32"),
                   Q: T.Tensor((2, 32, 256), "float8_e4m3"), A: T.Tensor((2, 32, 2), "float32")):
        with T.Kernel(32 // blk_m, 256 // group, 2, threads=threads) as (bx, by, bz):
            y = T.alloc_fragment((blk_m, group), "float32")
            amax = T.alloc_fragment((blk_m,), "float32")
            s = T.alloc_fragment((blk_m,), "float32")
            q = T.alloc_fragment((blk_m, group), "float8_e4m3")
            off = T.alloc_var("int32")
            off = 0
            for i in T.serial(bz):
                off += sizes[i]
            T.copy(X[off + bx * blk_m: off + (bx + 1) * blk_m, by * group:(by + 1) * group], y)
            T.reduce_absmax(y, amax, dim=1)
            for i in T.Parallel(blk_m):
                s[i] = T.max(amax[i], 1e-4) / 448.0
            for i, j in T.Parallel(blk_m, group):
                q[i, j] = T.clamp(y[i, j] / s[i], -448.0, 448.0)
            for i in T.Parallel(blk_m):
                A[bz, bx * blk_m + i, by] = s[i]
            T.copy(q, Q[bz, bx * blk_m:(bx + 1) * blk_m, by * group:(by + 1) * group])
    return token_cast


def test_rows_keep_the_loops_vector_width(tmp_path):
    """8 rows of 128 on 128 threads: each row is 16 threads x 8 registers (one 16-byte load
    of the bfloat16 source each, a 16-lane shuffle), as TileLang lays the copy out, not
    each thread one element of every row (a scalar load per element, shuffles over the
    block and the warps meeting in shared for every row); the copy's rows start at an
    offset held in a T.alloc_var, read once for the vector load."""
    from tilecute.transform.pipeline import run_passes

    func = _token_cast()
    f = run_passes(func, "sm_90a", until="infer_layouts")
    lay = {a.buffer.name: a.layout for a in f.kernels[0].body if hasattr(a, "layout")}
    assert lay["y"].kind == "blocked" and lay["y"].vector == 8
    source = emit_cute(lower(func, "sm_90a"))
    assert "a row is 16 threads x 8 registers" in source
    assert "tcr.block_allreduce(" not in source
    assert "X.iterator + cute.assume((off[0] + bx * 8 + i1) * 256" in source, source
    assert "cute.make_layout(8)).load()" in source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_token_cast_on_gpu():
    import torch

    kernel = tilecute.compile(_token_cast())
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    sizes = torch.tensor([24, 32], device="cuda", dtype=torch.int32)
    q = torch.zeros(2, 32, 256, device="cuda", dtype=torch.float8_e4m3fn)
    a = torch.zeros(2, 32, 2, device="cuda")
    kernel(x, sizes, q, a)
    for g, start in enumerate((0, 24)):
        rows = x[start:start + 32].float().view(32, 2, 128)
        scale = rows.abs().amax(2).clamp(min=1e-4) / 448.0
        torch.testing.assert_close(a[g], scale)
        # (from the kernel's own scales: torch's CUDA division by the scalar 448 above
        # multiplies by its reciprocal, one ulp off, which moves half-way fp8 roundings)
        want = (rows / a[g][..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        torch.testing.assert_close(q[g].float(), want.view(32, 256).float())
