"""A T.Parallel loop that writes a replicated fragment at its own loop variables runs whole
on every thread, so the fragments it reads there become replicated too, back through the
loops and T.copy that fill them (TileLang's layout inference gives the loop the replicated
fragment's layout and the fragments it reads the loop's).  Programs written in TileLang's
idioms: a per-column scale computed from two fragments filled from shared memory, then
read across threads (``scale[j]`` under ``T.Parallel(M, K)``), and a split-combine whose
per-row weights are read at ``[i]`` under ``T.Parallel(M, D)``."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import lower


def _column_scale(M=64, K=32, threads=128):
    @T.prim_func
    def column_scale(X: T.Tensor((K, M), "float32"), A: T.Tensor((K,), "float32"),
                     D: T.Tensor((K,), "float32"), Y: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            a_shared = T.alloc_shared((K,), "float32")
            d_shared = T.alloc_shared((K,), "float32")
            a_local = T.alloc_fragment((K,), "float32")
            d_local = T.alloc_fragment((K,), "float32")
            scale = T.alloc_fragment((K,), "float32")
            x_local = T.alloc_fragment((K, M), "float32")
            y_local = T.alloc_fragment((M, K), "float32")
            last = T.alloc_fragment((1,), "float32")
            last[0] = A[K - 1]
            T.copy(A, a_shared)
            T.copy(D, d_shared)
            T.copy(a_shared, a_local)
            T.copy(d_shared, d_local)
            for i in T.Parallel(K):
                scale[i] = T.exp2(last[0] - a_local[i]) * d_local[i]
            T.copy(X, x_local)
            for i, j in T.Parallel(M, K):
                y_local[i, j] = x_local[j, i] * scale[j]
            T.copy(y_local, Y)

    return column_scale


def _split_combine(S=4, M=64, D=64, threads=128):
    @T.prim_func
    def split_combine(P: T.Tensor((S, M, D), "float32"), L: T.Tensor((S, M), "float32"),
                      O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            lse = T.alloc_fragment((S, M), "float32")
            lse_max = T.alloc_fragment((M,), "float32")
            lse_sum = T.alloc_fragment((M,), "float32")
            lse_k = T.alloc_fragment((M,), "float32")
            w = T.alloc_fragment((M,), "float32")
            p = T.alloc_fragment((M, D), "float32")
            acc = T.alloc_fragment((M, D), "float32")
            T.clear(lse_sum)
            T.clear(acc)
            T.copy(L, lse)
            T.reduce_max(lse, lse_max, dim=0, clear=True)
            for k in T.serial(S):
                T.copy(lse[k, :], lse_k)
                for i in T.Parallel(M):
                    lse_sum[i] += T.exp2(lse_k[i] - lse_max[i])
            for i in T.Parallel(M):
                lse_sum[i] = T.log2(lse_sum[i]) + lse_max[i]
            for k in T.serial(S):
                T.copy(P[k, :, :], p)
                for i in T.Parallel(M):
                    lse_k[i] = lse[k, i]
                for i in T.Parallel(M):
                    w[i] = T.exp2(lse_k[i] - lse_sum[i])
                for i, j in T.Parallel(M, D):
                    acc[i, j] += p[i, j] * w[i]
            T.copy(acc, O)

    return split_combine


def _layouts(plan) -> dict:
    return {a.buffer.name: a.layout for k in plan.func.kernels for a in walk_stmts(k.body)
            if isinstance(a, N.Allocate)}


def _nests(plan) -> list:
    """Each outermost T.Parallel loop: (the buffers it writes, replicated?)."""
    from tilecute.transform.analysis import accesses, parallel_nest
    out, inner = [], set()
    for k in plan.func.kernels:
        for s in walk_stmts(k.body):
            if isinstance(s, N.For) and s.kind == "parallel" and id(s) not in inner:
                loops = parallel_nest(s)
                inner |= {id(lp) for lp in loops[1:]}
                writes = sorted({b for b, _, w in accesses(loops[-1].body) if w})
                out.append((writes, all(lp.replicated for lp in loops)))
    return out


def test_fragments_read_by_a_replicated_writer_are_replicated():
    plan = lower(_column_scale(), "sm_90a")
    lay = _layouts(plan)
    rep = N.Layout("replicated")
    # scale is read at [j] under (i, j); the loop writing it reads a_local/d_local at [i],
    # so every thread needs all of them, and the copies filling them run whole per thread
    assert lay["scale"] == lay["a_local"] == lay["d_local"] == lay["last"] == rep
    # read at [j, i] where y_local is walked at [i, j]: through a shared tile of its own
    # (x_local stays blocked, not a whole copy per thread)
    assert lay["x_local"].kind == "blocked" and lay["x_local_staged1"].kind == "swizzled"
    assert lay["y_local"].kind == "blocked"  # walked at its own (i, j): unchanged
    nests = dict((tuple(w), r) for w, r in _nests(plan) if w)
    assert nests[("a_local",)] and nests[("d_local",)] and nests[("scale",)]
    assert not nests[("y_local",)]
    text = print_func(plan.func)
    assert 'a_local = T.alloc_fragment((32,), "float32", layout=T.Layout("replicated"))' in text
    assert "T.Parallel(32, vector_width=1, replicated=True):\n            a_local[" in text
    # without TMA the copies into shared are waited for by the whole block before every
    # thread reads all of a_shared
    text80 = print_func(lower(_column_scale(), "sm_80").func)
    assert text80.index("T.sync_threads(") < text80.index("a_local[i")


def test_split_combine_spreads_back_through_accumulating_loops():
    plan = lower(_split_combine(), "sm_90a")
    lay = _layouts(plan)
    rep = N.Layout("replicated")
    assert lay["w"] == lay["lse_k"] == lay["lse_sum"] == lay["lse_max"] == rep
    assert lay["acc"].kind == lay["p"].kind == "blocked"


@pytest.mark.parametrize("factory", [_column_scale, _split_combine])
def test_replicated_spread_builds_sm90a_cubin(tmp_path, factory):
    assert tilecute.build_cubin(factory(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _spread_after_reduce():
    @T.prim_func
    def spread(A: T.Tensor((128,), "float32"), B: T.Tensor((128, 128), "float32"),
               C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((128,), "float32")
            s = T.alloc_fragment((128,), "float32")
            total = T.alloc_fragment((1,), "float32")
            y = T.alloc_fragment((128, 128), "float32")
            T.copy(A, x)
            T.reduce_sum(x, total, dim=0)
            for i in T.Parallel(128):
                s[i] = x[i] * 2.0
            for i, j in T.Parallel(128, 128):
                y[i, j] = s[j]
            T.copy(y, B)
            C[0] = total[0]

    return spread


def test_spread_to_a_reduced_fragment_folds_the_reduction(tmp_path):
    # the spread makes x replicated (every thread holds it whole); the reduction of a
    # replicated fragment is folded by each thread (it was refused before that fold)
    plan = lower(_spread_after_reduce(), "sm_90a")
    lay = _layouts(plan)
    assert lay["x"] == lay["s"] == N.Layout("replicated")
    assert tilecute.build_cubin(_spread_after_reduce(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_spread_to_a_reduced_fragment_on_gpu():
    import torch

    a = torch.randn(128, device="cuda")
    b = torch.empty(128, 128, device="cuda")
    c = torch.empty(1, device="cuda")
    tilecute.compile(_spread_after_reduce())(a, b, c)
    torch.testing.assert_close(b, (2 * a).expand(128, 128))
    torch.testing.assert_close(c, a.sum().reshape(1), atol=1e-4, rtol=1e-5)


def test_spread_to_a_gemm_accumulator_is_refused():
    @T.prim_func
    def bad(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
            C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((64, 32), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            t = T.alloc_fragment((64, 64), "float32")
            u = T.alloc_fragment((64, 64), "float32")
            d = T.alloc_fragment((64,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                t[i, j] = acc[i, j] + 1.0
            for i, j in T.Parallel(64, 64):
                u[i, j] = t[i, j] * 2.0
            for i in T.Parallel(64):
                d[i] = u[i, i]  # the diagonal: u is read across threads
            T.copy(d, C)

    with pytest.raises(LayoutError, match=r"fragment 'acc' has a T.gemm register layout .* "
                                          r"read by the T.Parallel loop at .*writes the "
                                          r"replicated fragment 't'"):
        lower(bad, "sm_90a")


def _row_back(staged: bool):
    """A row computed from a fragment read across threads (``tile[0, j]``, so ``tile`` is
    replicated) copied back into another row of it: straight from the distributed ``row``
    (refused, naming the T.copy), or through a shared tile (every thread reads it whole)."""
    @T.prim_func
    def row_back(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((16, 64), "float32")
            row = T.alloc_fragment((64,), "float32")
            row_s = T.alloc_shared((64,), "float32")
            T.copy(A, tile)
            for j in T.Parallel(64):
                row[j] = tile[0, j] * 2.0
            if staged:
                T.copy(row, row_s)
                T.copy(row_s, tile[3, :])
            else:
                T.copy(row, tile[3, :])
            T.copy(tile, B)
    return row_back


def test_copy_into_a_replicated_row_is_refused_naming_the_copy():
    """The nest a T.copy lowers to is named as the T.copy (was: "this T.Parallel loop"),
    with the fix that works for a copy (a shared tile between)."""
    # the T.copy writes row 3 of the replicated 'tile' at its own loop variable: run whole on
    # every thread, it makes 'row' replicated too (TileLang 0.1.15 replicates the fragments
    # such a loop reads); it was refused naming the copy
    # such a loop reads); it was refused naming the copy.  Replicated, 'tile' (4 KiB) would
    # be more than a thread's registers: it moves to shared memory (large_replicated), and
    # 'row' is blocked again
    plan = lower(_row_back(False), "sm_90a")
    allocs = {s.buffer.name: s for s in walk_stmts(plan.func.kernels[0].body)
              if isinstance(s, N.Allocate)}
    assert allocs["tile"].buffer.scope == "shared" and allocs["row"].layout.kind == "blocked"
    # the form travels on the nest's Loc (JSON keeps it; a program's Loc has none)
    from tilecute.ir.serialize import from_json, to_json
    from tilecute.transform.pipeline import run_passes
    lowered = run_passes(_row_back(False), "sm_90a", until="lower_tile_ops")
    forms = [s.loc.form for s in walk_stmts(lowered.kernels[0].body)
             if isinstance(s, N.For) and s.loc is not None]
    assert forms == ["T.copy(A, tile)", "T.copy(A, tile)", "", "T.copy(row, tile[3:4, 0:64])",
                     "T.copy(tile, B)", "T.copy(tile, B)"]
    back = from_json(to_json(lowered))
    assert [s.loc for s in walk_stmts(back.kernels[0].body)] == \
        [s.loc for s in walk_stmts(lowered.kernels[0].body)]
    assert '"form"' not in to_json(_row_back(False))
    plan = lower(_row_back(True), "sm_90a")
    body = plan.func.kernels[0].body
    assert any(isinstance(s, N.Allocate) and s.buffer.name == "tile" and
               s.buffer.scope == "shared" for s in walk_stmts(body))


def test_program_loops_keep_their_name():
    """A T.Parallel loop the program wrote is still "this T.Parallel loop"."""
    @T.prim_func
    def mixed(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((16, 64), "float32")
            row = T.alloc_fragment((64,), "float32")
            T.copy(A, tile)
            for j in T.Parallel(64):
                row[j] = tile[0, j] * 2.0
            for j in T.Parallel(64):
                tile[j % 4, j] = row[j]  # (tile[3, j] now spreads: a slice at the loop variable)
            T.copy(tile, B)
    with pytest.raises(LayoutError, match=r"this T.Parallel loop writes the replicated fragment "
                                          r"'tile'"):
        lower(mixed, "sm_90a")


@pytest.mark.gpu
def test_column_scale_on_gpu():
    import torch

    M, K = 64, 32
    x = torch.randn(K, M, device="cuda")
    a = torch.randn(K, device="cuda")
    d = torch.randn(K, device="cuda")
    y = torch.empty(M, K, device="cuda")
    tilecute.compile(_column_scale(M, K))(x, a, d, y)
    scale = torch.exp2(a[-1] - a) * d
    torch.testing.assert_close(y, x.t() * scale[None, :])


@pytest.mark.gpu
def test_split_combine_on_gpu():
    import torch

    S, M, D = 4, 64, 64
    p = torch.randn(S, M, D, device="cuda")
    lse = torch.randn(S, M, device="cuda")
    o = torch.empty(M, D, device="cuda")
    tilecute.compile(_split_combine(S, M, D))(p, lse, o)
    mx = lse.max(dim=0).values
    total = torch.log2(torch.exp2(lse - mx).sum(dim=0)) + mx
    ref = (p * torch.exp2(lse - total)[:, :, None]).sum(dim=0)
    torch.testing.assert_close(o, ref, rtol=1e-4, atol=1e-4)
