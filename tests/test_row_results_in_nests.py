"""A row reduction whose rows are held by lane groups (rows shorter than threads x lanes)
leaves, in each thread, the result of the rows that thread holds, one register a round.
A nest over ``(i, j)`` laid out as the reduction's source reads ``m[i]`` as that
register, where it read the replicated ``m`` at a row known only at run time (local
memory: TileLang's top-k example at 0.55x TileLang's time).  A write to ``m`` in between
(or a reduction with ``clear=False``) ends it.  Programs written for these tests in
TileLang's idioms."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T


def short_row_softmax(M=256, N=128, bm=32, threads=128, rescale=None):
    """``rescale``: "rows" halves each row's max in place (``mx[i] = mx[i] * 0.5``);
    "flip" shifts row ``i`` by half the max of row ``bm - 1 - i`` of the tile (a read of
    rows other than the thread's own)."""
    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, threads=threads) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sh = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            if rescale == "rows":
                for i in T.Parallel(bm):
                    mx[i] = mx[i] * 0.5
            if rescale == "flip":
                for i in T.Parallel(bm):
                    sh[i] = mx[bm - 1 - i] * 0.5
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - sh[i])
            else:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * bm, 0])

    return softmax


def iterative_argmax(M=96, N=64, k=3, bm=32, threads=128):
    """The k largest values of each row and their columns, by k rounds of max, first index
    of it, and masking (TileLang's top-k idiom)."""

    @T.prim_func
    def topk(X: T.Tensor((M, N), "float32"), V: T.Tensor((M, k), "float32"),
             I: T.Tensor((M, k), "int32")):
        with T.Kernel(M // bm, threads=threads) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            idx = T.alloc_fragment((bm, N), "int32")
            mv = T.alloc_fragment((bm,), "float32")
            mi = T.alloc_fragment((bm,), "int32")
            T.copy(X[bx * bm, 0], x)
            for r in T.serial(k):
                T.reduce_max(x, mv, dim=1)
                for i, j in T.Parallel(bm, N):
                    idx[i, j] = T.if_then_else(x[i, j] == mv[i], N - j, 0)
                T.reduce_max(idx, mi, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = T.if_then_else(N - j == mi[i], -1e30, x[i, j])
                for i in T.Parallel(bm):
                    V[bx * bm + i, r] = mv[i]
                    I[bx * bm + i, r] = N - mi[i]

    return topk


def _line(src: str, needle: str) -> str:
    return next(ln for ln in src.splitlines() if needle in ln)


def test_nests_read_the_rounds_registers():
    src = tilecute.compile(short_row_softmax()).get_kernel_source()
    # 128 columns over 128 threads x 4 lanes: a row is 32 threads, 4 rows a round
    assert "a row is 32 threads x 4 registers" in src
    assert re.search(r"- tc_red\d+\[tc_k\d+\]\)", _line(src, "cute.math.exp")), src
    assert re.search(r"/ tc_red\d+\[tc_k\d+\]$", _line(src, "] / ")), src


def test_a_nest_over_the_rows_rescales_them_in_registers():
    # mx[i] = mx[i] * 0.5 in a T.Parallel(bm) nest: each thread rescales the rows its
    # rounds hold, in registers of the nest's (TileLang lays the loop out by mx), and the
    # nest over (i, j) reads those; no row is shared out
    src = tilecute.compile(short_row_softmax(rescale="rows")).get_kernel_source()
    rows = re.search(r"(tc_rows\d+) = cute.make_rmem_tensor\(\(8,\), cutlass.Float32\)  # mx: ", src)
    assert rows, src
    reg = rows.group(1)
    assert re.search(rf"{reg}\[(tc_c\d+)\] = tc_red\d+\[\1\]\n.*\n +{reg}\[\1\] = {reg}\[\1\] \* "
                     r"cutlass.Float32\(0.5\)", src), src
    assert re.search(rf"- {reg}\[tc_k\d+\]\)$", _line(src, "cute.math.exp")), src
    assert "tcr.grouped_rows(" not in src and "tcr.pick(" not in src


def test_a_read_of_other_rows_shares_them_out():
    src = tilecute.compile(short_row_softmax(rescale="flip")).get_kernel_source()
    # sh[i] = mx[bm - 1 - i]: every thread reads rows other than its own, so mx's rows are
    # shared out (and sh is every thread's, read by its row at run time); sm's are not
    assert "tcr.pick(sh, " in _line(src, "cute.math.exp")
    assert src.count("tcr.grouped_rows(") == 1 and "# sm: its rows stay in tc_red" in src
    assert re.search(r"/ tc_red\d+\[tc_k\d+\]$", _line(src, "] / ")), src


@pytest.mark.gpu
@pytest.mark.parametrize("rescale", [None, "rows", "flip"])
def test_short_row_softmax_gpu(rescale):
    torch.manual_seed(0)
    x = torch.randn(256, 128, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(short_row_softmax(rescale=rescale))(x, y)
    shift = x.max(1, keepdim=True).values * (0.5 if rescale else 1.0)
    if rescale == "flip":  # row i of each 32-row tile: half the max of row 31 - i
        shift = shift.view(-1, 32).flip(1).reshape(-1, 1)
    e = torch.exp(x - shift)
    torch.testing.assert_close(y, e / e.sum(1, keepdim=True), atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,bm", [(96, 64, 32), (320, 128, 64), (36, 32, 18)])
def test_iterative_argmax_gpu(M, N, bm):
    torch.manual_seed(0)
    x = torch.randn(M, N, device="cuda")
    v = torch.empty(M, 3, device="cuda")
    i = torch.empty(M, 3, device="cuda", dtype=torch.int32)
    tilecute.compile(iterative_argmax(M, N, bm=bm))(x, v, i)
    ref = x.topk(3, dim=1)
    torch.testing.assert_close(v, ref.values)
    assert torch.equal(i.long(), ref.indices)


def test_a_nest_over_the_rows_runs_as_the_reduction_left_them(tmp_path):
    """``V[.., r] = mv[i]`` in a ``T.Parallel(bm)`` nest: each lane group's first thread
    stores the rows of its rounds from their registers (TileLang lays the loop out by the
    reduced fragment), instead of thread ``i`` reading the replicated ``mv`` at run-time row
    ``i`` (local memory: 528 bytes a thread in TileLang's top-k example)."""
    src = tilecute.compile(iterative_argmax()).get_kernel_source()
    # 64 columns over 128 threads x 4 lanes: a row is 16 threads, 8 rows a round, 4 rounds
    assert re.search(r"if tc_tid % 16 == 0:  # rows of mi, mv ", src), src
    row = re.search(r"(i\w*) = (tc_c\d+) \* 8 \+ tc_tid // 16$", src, re.M)
    assert row, src
    i, c = row.groups()
    assert re.search(rf"V\[bx \* 32 \+ {i}, r\] = tc_red\d+\[{c}\]$", src, re.M), src
    assert re.search(rf"I\[bx \* 32 \+ {i}, r\] = 64 - tc_red\d+\[{c}\]$", src, re.M), src
    # 64 rows of 128 (the top-k example's tile): 528 bytes of local memory a thread before
    built = tilecute.build_cubin(iterative_argmax(M=128, N=128, bm=64), "sm_90a",
                                 out_dir=str(tmp_path))
    (kernel,) = built.kernels.values()
    assert kernel.frame_bytes == 0 and 0 < kernel.registers <= 128, kernel
    # only nests over the rows read mv and mi: their rows are not shared out (no barrier)
    assert "tcr.grouped_rows(" not in src and "# mv: its rows stay in tc_red" in src
    assert kernel.barriers == 0, kernel


def test_a_rows_nest_over_a_last_round_the_rows_do_not_fill():
    # 18 rows of 32 on 128 threads x 4 lanes: 16 rows a round, the second round's first 2
    src = tilecute.compile(iterative_argmax(M=36, N=32, bm=18)).get_kernel_source()
    assert re.search(r"for (tc_c\d+) in cutlass.range_constexpr\(2\):\n +(i\w*) = \1 \* 16 \+ "
                     r"tc_tid // 8\n +if \2 < 18:\n +V\[bx \* 18 \+ \2, r\] = tc_red\d+\[\1\]", src), src


def test_a_rows_nest_writing_a_fragment_and_memory_keeps_the_spread_layout():
    """A ``T.Parallel(bm)`` nest that writes a fragment and stores to memory runs on thread
    ``i`` as before: run by every thread of a lane group it would store each row many
    times, run by the group's first thread it would leave the others without the rows."""
    M, N, bm = 64, 64, 32

    @T.prim_func
    def rowmax_twice(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mv = T.alloc_fragment((bm,), "float32")
            dbl = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mv, dim=1)
            for i in T.Parallel(bm):
                dbl[i] = mv[i] * 2.0
                Y[bx * bm + i] = mv[i]

    src = tilecute.compile(rowmax_twice).get_kernel_source()
    assert "as their reduction's lane groups hold them" not in src


def scale_per_row(M=64, N=128, bm=8, limit=448.0):
    """Each row of X scaled to [-limit, limit] by its absolute maximum (floored at 1e-4),
    the scale stored beside it; the rows past ``valid[0]`` get a scale of 0 (a per-token
    quantization's shape, written for this test)."""

    @T.prim_func
    def scale_rows(X: T.Tensor((M, N), "bfloat16"), valid: T.Tensor((1,), "int32"),
                   Q: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            amax = T.alloc_fragment((bm,), "float32")
            scale = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(bm):
                amax[i] = T.max(amax[i], 1e-4)
                scale[i] = T.if_then_else(bx * bm + i < valid[0], amax[i] / limit, 0.0)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.clamp(x[i, j] / scale[i], -limit, limit)
            T.copy(x, Q[bx * bm, 0])
            for i in T.Parallel(bm):
                S[bx * bm + i] = scale[i]

    return scale_rows


def test_a_nest_over_the_rows_writes_their_registers(tmp_path):
    """The scale nest runs on the rows each lane group holds (8 rows of 128 on 128 threads x
    8 registers: a row is 16 threads, one round), in every thread of the group, into
    registers the quantizing nest and the store of S read: no row shared out, no barrier
    (TileLang's group_per_split_token_cast_to_fp8 example; before, every thread computed
    all 8 scales after an exchange through shared memory and picked its row's)."""
    src = tilecute.compile(scale_per_row()).get_kernel_source()
    assert "tcr.grouped_rows(" not in src and "tcr.pick(" not in src
    scale = re.search(r"(tc_rows\d+) = cute.make_rmem_tensor\(\(1,\), cutlass.Float32\)  # scale: ", src)
    assert scale, src
    reg = scale.group(1)
    assert re.search(rf"{reg}\[tc_c\d+\] = cutlass.select_\(bx \* 8 \+ i\w* < valid\[0\], "
                     rf"tc_rows\d+\[tc_c\d+\] / cutlass.Float32\(448.0\)", src), src
    assert re.search(rf"x\[tc_lane\d+\] / {reg}\[0\]", src), src
    assert re.search(rf"if tc_tid % 16 == 0:  # rows of scale .*\n.*\n.*\n +S\[bx \* 8 \+ i\w*\] = "
                     rf"{reg}\[tc_c\d+\]", src), src
    built = tilecute.build_cubin(scale_per_row(), "sm_90a", out_dir=str(tmp_path))
    (kernel,) = built.kernels.values()
    assert kernel.barriers == 0 and kernel.frame_bytes == 0, kernel


@pytest.mark.gpu
@pytest.mark.parametrize("valid", [64, 37])
def test_scale_per_row_gpu(valid):
    torch.manual_seed(0)
    x = (torch.randn(64, 128, device="cuda") * 3).bfloat16()
    q = torch.empty(64, 128, device="cuda")
    s = torch.empty(64, device="cuda")
    n = torch.tensor([valid], device="cuda", dtype=torch.int32)
    tilecute.compile(scale_per_row())(x, n, q, s)
    amax = x.float().abs().amax(1).clamp_min(1e-4)
    ref_s = torch.where(torch.arange(64, device="cuda") < valid, amax / 448.0, torch.zeros_like(amax))
    torch.testing.assert_close(s, ref_s)
    live = slice(0, valid)
    torch.testing.assert_close(q[live], (x.float()[live] / ref_s[live, None]).clamp(-448.0, 448.0))
