"""The pass reuse_repeated_loads (backend/transform/repeated_loads.py): a T.copy that loads
into a fragment the tile it already holds is dropped, where nothing between the two copies
can change that tile -- as nvcc drops it for TileLang's ``const __restrict__`` tensors
(TileLang's two-pass online softmax reads its row once).  CPU: the generated source loads
the tensor once (an sm_90a cubin builds); every condition that keeps the second copy is
checked.  GPU: the two-pass softmax and the kept cases match torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.pipeline import run_passes
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts

ROWS, COLS = 64, 1024


def two_pass_softmax(between: str = ""):
    """A row a block, loaded twice into ``x`` (TileLang's online_softmax shape).  ``between``
    puts a statement between the two copies: "fragment" writes ``x``, "global" stores into
    ``Stat``, "inplace" writes ``X`` itself at the end."""
    scale = 1.44269504

    @T.prim_func
    def softmax2(X: T.Tensor((ROWS, COLS), "float16"), Y: T.Tensor((ROWS, COLS), "float16"),
                 Stat: T.Tensor((ROWS,), "float32")):
        with T.Kernel(ROWS, threads=128) as bx:
            x = T.alloc_fragment((1, COLS), "float16")
            e = T.alloc_fragment((1, COLS), "float32")
            y = T.alloc_fragment((1, COLS), "float16")
            m = T.alloc_fragment((1,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(1, COLS):
                e[i, j] = T.exp2(x[i, j] * scale - m[i] * scale)
            T.reduce_sum(e, s, dim=1)
            if between == "fragment":
                for i, j in T.Parallel(1, COLS):
                    x[i, j] = x[i, j] * 2.0
            if between == "global":
                Stat[bx] = s[0]
            T.copy(X[bx, 0], x)
            for i, j in T.Parallel(1, COLS):
                y[i, j] = T.exp2(x[i, j] * scale - m[i] * scale) / s[i]
            T.copy(y, Y[bx, 0])
            if between == "inplace":
                T.copy(y, X[bx, 0])

    return softmax2


def gathered_twice():
    """The row index read from a tensor: the copy's indices read memory, kept."""
    @T.prim_func
    def gathered(X: T.Tensor((ROWS, COLS), "float32"), Idx: T.Tensor((ROWS,), "int32"),
                 Y: T.Tensor((ROWS, COLS), "float32")):
        with T.Kernel(ROWS, threads=128) as bx:
            x = T.alloc_fragment((COLS,), "float32")
            t = T.alloc_fragment((1,), "float32")
            T.copy(X[Idx[bx], 0], x)
            T.reduce_max(x, t, dim=0)
            T.copy(X[Idx[bx], 0], x)
            for j in T.Parallel(COLS):
                Y[bx, j] = x[j] - t[0]

    return gathered


def tiles_in_a_loop():
    """Each step loads its tile twice: the second of each step is dropped, the loop's
    first copy stays (the next step's tile differs)."""
    @T.prim_func
    def tiled(X: T.Tensor((ROWS, COLS), "float32"), Y: T.Tensor((ROWS, COLS), "float32")):
        with T.Kernel(ROWS, threads=128) as bx:
            x = T.alloc_fragment((256,), "float32")
            t = T.alloc_fragment((1,), "float32")
            for k in T.serial(COLS // 256):
                T.copy(X[bx, k * 256], x)
                T.reduce_sum(x, t, dim=0)
                T.copy(X[bx, k * 256], x)
                for j in T.Parallel(256):
                    Y[bx, k * 256 + j] = x[j] - t[0] / 256.0

    return tiled


def _copies_from(func, name, options=None):
    lowered = run_passes(func, "sm_90a", options, until="reuse_repeated_loads")
    return sum(1 for s in walk_stmts(lowered.kernels[0].body)
               if isinstance(s, N.Copy) and s.src.buffer == name)


def test_the_second_load_of_a_held_tile_is_dropped():
    assert _copies_from(two_pass_softmax(), "X") == 1
    assert _copies_from(two_pass_softmax(), "X", {"disable_repeated_load_reuse": True}) == 2
    kernel = tilecute.compile(two_pass_softmax(), target="sm_90a")
    assert kernel.get_kernel_source().count("X.iterator") == 1  # one pass over X
    kernel.ensure_cubin()
    off = tilecute.compile(two_pass_softmax(), target="sm_90a",
                           options={"disable_repeated_load_reuse": True}).get_kernel_source()
    assert off.count("X.iterator") == 2


@pytest.mark.parametrize("between", ["fragment", "global", "inplace"])
def test_a_write_that_may_change_the_tile_keeps_the_load(between):
    assert _copies_from(two_pass_softmax(between), "X") == 2


def test_indices_that_read_memory_keep_the_load():
    assert _copies_from(gathered_twice(), "X") == 2


def test_a_loop_step_drops_its_own_repeat_only():
    assert _copies_from(tiles_in_a_loop(), "X") == 1
    src = tilecute.compile(tiles_in_a_loop(), target="sm_90a").get_kernel_source()
    assert src.count("X.iterator") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("between", ["", "fragment", "global", "inplace"])
def test_two_pass_softmax_on_gpu(between):
    import torch
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    stat = torch.zeros(ROWS, device="cuda")
    xin = x.clone()
    tilecute.compile(two_pass_softmax(between))(xin, y, stat)
    # the second copy reloads X in every case ("fragment": over the doubled x, so a dropped
    # reload would show as exp(2x - m))
    m = x.float().amax(dim=1, keepdim=True)
    e = torch.exp(x.float() - m)
    ref = (e / e.sum(dim=1, keepdim=True)).half()
    torch.testing.assert_close(y, ref, atol=2e-3, rtol=1e-2)
    if between == "global":
        torch.testing.assert_close(stat, e.sum(dim=1), atol=1e-2, rtol=1e-3)
    if between == "inplace":
        torch.testing.assert_close(xin, ref, atol=2e-3, rtol=1e-2)


@pytest.mark.gpu
def test_loop_and_gather_on_gpu():
    import torch
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(tiles_in_a_loop())(x, y)
    xr = x.view(ROWS, COLS // 256, 256)
    torch.testing.assert_close(y, (xr - xr.sum(-1, keepdim=True) / 256.0).view(ROWS, COLS))
    idx = torch.randperm(ROWS, device="cuda", dtype=torch.int32)
    tilecute.compile(gathered_twice())(x, idx, y)
    g = x[idx.long()]
    torch.testing.assert_close(y, g - g.amax(dim=1, keepdim=True))
