"""The per-lane ``else`` of a bounds-checked vector path (``backend/codegen/nests.py``
``lanes_fallback``).  Where the vector bounds checks do not depend on the lane (a row tail,
a data-dependent row), a guarded global access that needs all of them never runs in the
``else``: a store is not emitted, a load reads its out-of-bounds value (0); what else the
body does stays (a fragment's zero fill, TileLang's padding), and the ``else`` goes where
nothing is left.  A lane-dependent check (a column tail) keeps its per-lane fallback.
CPU: the generated CuTe DSL of sm_90a cubins; GPU: values against torch, tails included."""

import re

import elementwise  # (examples/: conftest puts it on the path)
import pytest

import tilecute
import tilecute.language as T


# ---- programs -------------------------------------------------------------------------------
def row_tail_fragment(N=256, bm=16, threads=128):
    """B = 2 * A + 1 through a fragment filled by a T.copy whose last tile of rows passes
    M (rows past M are read as 0, TileLang's padding, and the stores skip them)."""
    M = T.symbolic("M")

    @T.prim_func
    def row_tail(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as by:
            f = T.alloc_fragment((bm, N), T.float32)
            T.copy(A[by * bm, 0], f)
            for i, j in T.Parallel(bm, N):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, B[by * bm, 0])
    return row_tail


def column_tail(bm=8, bn=128, threads=128):
    """C = A + 1 over (M, N) with both symbolic: the tile's columns may pass N, lane by
    lane (``j + lane < N``; N a multiple of 4, so the tile vectorizes)."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=4)

    @T.prim_func
    def col_tail(A: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + 1.0
    return col_tail


def row_gather(rows=64, D=256, n=48):
    """out[b, :] = table[ids[b], :] for a block's row b: the row read is in bounds where
    ``0 <= ids[b] < rows`` (the same at every lane)."""
    @T.prim_func
    def gather(table: T.Tensor((rows, D), T.float16), ids: T.Tensor((n,), T.int32),
               out: T.Tensor((n, D), T.float16)):
        with T.Kernel(n, threads=32) as b:
            for d in T.Parallel(D):
                out[b, d] = table[ids[b], d]
    return gather


def row_scatter(rows=64, D=256, n=48):
    """out[ids[b], :] = src[b, :]: the row written is in bounds where ``0 <= ids[b] <
    rows``; a block whose id is out of range writes nothing."""
    @T.prim_func
    def scatter(src: T.Tensor((n, D), T.float16), ids: T.Tensor((n,), T.int32),
                out: T.Tensor((rows, D), T.float16)):
        with T.Kernel(n, threads=32) as b:
            for d in T.Parallel(D):
                out[ids[b], d] = src[b, d]
    return scatter



def paged_rows(num_pages=32, page=16, D=128, max_pages=6, rows=64):
    """out[t, :] = cache[table[t // page], t % page, :] for the tokens the table holds, 0
    past them: the tiles of 64 tokens run past its 96 (``T.if_then_else`` keeps the table
    from being read there)."""
    @T.prim_func
    def paged(cache: T.Tensor((num_pages, page, D), T.float16), table: T.Tensor((max_pages,), T.int32),
              out: T.Tensor((2 * rows, D), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            for j, d in T.Parallel(rows, D):
                tok = bx * rows + j
                out[tok, d] = T.if_then_else(tok < max_pages * page,
                                             cache[table[tok // page], tok % page, d], 0)
    return paged

def _body(func, **options) -> str:
    kernel = tilecute.compile(func, target="sm_90a", options=options or None)
    assert kernel.ensure_cubin()
    src = kernel.get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def _else_blocks(src: str) -> list[str]:
    """The text of each ``else:`` block of ``src``."""
    lines = src.splitlines()
    out = []
    for n, line in enumerate(lines):
        if line.strip() == "else:":
            indent = len(line) - len(line.lstrip())
            block = []
            for nxt in lines[n + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                block.append(nxt)
            out.append("\n".join(block))
    return out


# ---- CPU: the generated source ---------------------------------------------------------------
def test_add_2d_row_tail_has_no_else():
    # the row check (by * 32 + i < M) is the same at every lane: its per-lane else only
    # re-tested it, and did nothing
    src = _body(elementwise.add_2d(), disable_load_staging=True)
    assert "if by * 32 + i < M:" in src
    assert "else:" not in src
    # staged (the default), neither nest has an else: the store nest's would not store,
    # and the loading nest's would only fill staged registers that the store reads back
    # under the same row check (Store.feeds)
    src = _body(elementwise.add_2d())
    assert src.count("if by * 32 + i < M:") == 2
    assert not _else_blocks(src) and "out of bounds" not in src


def test_fragment_copy_row_tail_keeps_its_zero_fill():
    src = _body(row_tail_fragment())
    blocks = _else_blocks(src)
    assert len(blocks) == 1  # (the store to B: none)
    (fill,) = blocks
    assert "A[" not in fill and "< M" not in fill
    assert "cutlass.Float32(0)  # out of bounds" in fill
    assert "f[" in fill  # the fragment's rows past M are 0, as TileLang pads them


def test_column_tail_keeps_its_per_lane_checks():
    src = _body(column_tail())
    assert "if by * 8 + i < M and bx * 128 + (j + 3) < N:" in src
    load, store = _else_blocks(src)  # (the staged nest's loads, then its stores)
    for lanes in (load, store):  # each lane checks its own column, and its row
        assert "for tc_lane" in lanes and "out of bounds" not in lanes
        assert "if by * 8 + i < M and bx * 128 + (j + tc_lane" in lanes
    assert "= A[by * 8 + i, bx * 128 + (j + tc_lane" in load
    assert "C[by * 8 + i, bx * 128 + (j + tc_lane" in store


def test_gather_and_scatter_under_a_loaded_row():
    # a gathered row out of range reads 0 and is stored (TileLang's padding): the else
    # keeps the store, its load unchecked
    src = _body(row_gather(), disable_load_staging=True)
    assert "if ids[b] >= 0 and ids[b] < 64:" in src
    (row,) = _else_blocks(src)
    assert "table[" not in row and "ids[b]" not in row
    assert "cutlass.Float16(0)  # out of bounds" in row and "out[b, (d + tc_lane" in row
    # staged, the else fills the staged fragment only
    (row,) = _else_blocks(_body(row_gather()))
    assert "table[" not in row and "out_staged[tc_lane" in row
    # a scattered row out of range is not written: nothing is left of the else
    src = _body(row_scatter())
    assert "if ids[b] >= 0 and ids[b] < 64:" in src
    assert "else:" not in src



def test_a_row_through_a_table_reads_the_table_in_bounds():
    # the vector path's check of the page id reads the table first, itself bounds checked:
    # a tile past the table's end (tokens 96..127) must not read table[6], table[7] (the
    # checks run whole: no short-circuit), as the lanes' path does not
    src = _body(paged_rows(), disable_load_staging=True)
    hoisted = re.search(r"(tc_ld\d+) = cutlass\.Int32\(0\)\n\s+if \(bx \* 64 \+ j\) // 16 < 6:\n"
                        r"\s+\1 = table\[\(bx \* 64 \+ j\) // 16\]\n\s+if \1 >= 0 and \1 < 32:", src)
    assert hoisted, src
    fast = src.split(hoisted.group(0), 1)[1].split("else:", 1)[0]
    assert f"cache.iterator + cute.assume({hoisted.group(1)} * 2048" in fast
    lines = (src.split(hoisted.group(0), 1)[0] + fast).splitlines()
    for n, line in enumerate(lines):  # any other read of the table is under its own check
        if "table[" in line:
            assert lines[n - 1].strip().startswith("if ") and "// 16 < 6" in lines[n - 1], line

# ---- GPU: values against torch -------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("staging", [True, False])
def test_gpu_add_2d_row_tail(staging):
    import torch

    M = 77  # 2 full tiles of 32 rows and a tail of 13
    a, b = (torch.randn(M, 1024, device="cuda") for _ in range(2))
    c = torch.full_like(a, float("nan"))
    k = tilecute.compile(elementwise.add_2d(), options={"disable_load_staging": not staging})
    k(a, b, c)
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_fragment_copy_row_tail():
    import torch

    M = 37
    a = torch.randn(M, 256, device="cuda")
    out = torch.full_like(a, float("nan"))
    tilecute.compile(row_tail_fragment())(a, out)
    torch.testing.assert_close(out, a * 2 + 1, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_column_tail():
    import torch

    M, N = 19, 300  # both tails: rows 16..18, columns 256..299
    a = torch.randn(M, N, device="cuda")
    c = torch.full_like(a, float("nan"))
    tilecute.compile(column_tail())(a, c)
    torch.testing.assert_close(c, a + 1, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_gather_and_scatter_rows_out_of_range():
    import torch

    table = torch.randn(64, 256, device="cuda").half()
    ids = torch.randint(-8, 72, (48,), device="cuda", dtype=torch.int32)
    ids[:3] = torch.tensor([-1, 64, 5], dtype=torch.int32)
    ok = (ids >= 0) & (ids < 64)
    want = torch.where(ok[:, None], table[ids.clamp(0, 63).long()], torch.zeros_like(table[:1]))
    for staging in (True, False):
        out = torch.full((48, 256), float("nan"), device="cuda").half()
        tilecute.compile(row_gather(), options={"disable_load_staging": not staging})(table, ids, out)
        torch.testing.assert_close(out, want, rtol=0, atol=0)
    ids = torch.randperm(80, device="cuda")[:48].int() - 8  # distinct rows, some out of range
    src = torch.randn(48, 256, device="cuda").half()
    out = torch.full((64, 256), -7.0, device="cuda").half()
    tilecute.compile(row_scatter())(src, ids, out)
    want = torch.full_like(out, -7.0)
    keep = (ids >= 0) & (ids < 64)
    want[ids[keep].long()] = src[keep]
    torch.testing.assert_close(out, want, rtol=0, atol=0)



@pytest.mark.gpu
def test_gpu_rows_through_a_table_past_its_end():
    import torch

    cache = torch.randn(32, 16, 128, device="cuda").half()
    table = torch.randperm(32, device="cuda")[:6].int()
    out = torch.full((128, 128), float("nan"), device="cuda").half()
    tilecute.compile(paged_rows(), options={"disable_load_staging": True})(cache, table, out)
    want = torch.zeros_like(out)
    want[:96] = cache[table.long()].reshape(96, 128)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
