"""``T.reshape`` / ``T.view`` of fragments followed by reductions over the new dims
(DeepSeek's lightning indexer and its pooled / block-sparse variants): a T.gemm
accumulator of logits ``(block_N, block_Q * heads)`` seen as ``(block_N, block_Q,
heads)``, ReLU'd and weighted per head, summed over the heads of each query; a max over
groups of columns; a mean over groups of rows of an ordinary fragment; and views refused
by name.  CPU: the IR the accumulator views pass leaves and sm_90a cubins; GPU: the
results against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.accumulator_views import AccumulatorViewError, run_width
from tilecute.transform.pipeline import run_passes


# ---- programs ------------------------------------------------------------------------------
def _indexer(block_N=64, heads=16, block_Q=2, dim=64, threads=128, dtype="float16",
             policy=T.GemmWarpPolicy.FullCol, n_blocks=2):
    """Logits[q, n] = sum_h relu(Q[q, h] . K[n] * k_scale[n]) * W[q, h], one key block of
    ``block_N`` rows per thread block, ``block_Q`` queries of ``heads`` heads."""
    qh = block_Q * heads

    @T.prim_func
    def indexer(Q: T.Tensor((qh, dim), dtype), K: T.Tensor((n_blocks * block_N, dim), dtype),
                KScale: T.Tensor((n_blocks * block_N,), "float32"),
                W: T.Tensor((block_Q, heads), "float32"),
                Logits: T.Tensor((block_Q, n_blocks * block_N), "float32")):
        with T.Kernel(n_blocks, threads=threads) as bx:
            q_s = T.alloc_shared((qh, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            k_scale = T.alloc_fragment((block_N,), "float32")
            s = T.alloc_fragment((block_N, qh), "float32")
            s_heads = T.reshape(s, (block_N, block_Q, heads))
            weights = T.alloc_fragment((block_Q, heads), "float32")
            logits = T.alloc_fragment((block_N, block_Q), "float32")
            T.copy(Q, q_s)
            T.copy(K[bx * block_N, 0], k_s)
            T.copy(KScale[bx * block_N], k_scale)
            T.copy(W, weights)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=policy)
            for n, q, h in T.Parallel(block_N, block_Q, heads):
                s_heads[n, q, h] = T.max(s_heads[n, q, h] * k_scale[n], 0) * weights[q, h]
            T.reduce_sum(s_heads, logits, dim=-1, clear=True)
            for q, n in T.Parallel(block_Q, block_N):
                Logits[q, bx * block_N + n] = logits[n, q]
    return indexer


def _group_max(m=64, n=64, group=8, threads=128, dtype="float16", clear=True,
               policy=T.GemmWarpPolicy.Square, kind="max"):
    """Out[i, g] = max (or another kind) over columns g * group .. of A @ B^T, through a
    fragment allocated as a view of the accumulator (``T.Tensor(shape, dtype, acc.data)``);
    without ``clear`` combined with 1."""
    groups = n // group

    @T.prim_func
    def group_max(A: T.Tensor((m, 32), dtype), B: T.Tensor((n, 32), dtype),
                  Out: T.Tensor((m, groups), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a = T.alloc_shared((m, 32), dtype)
            b = T.alloc_shared((n, 32), dtype)
            acc = T.alloc_fragment((m, n), "float32")
            grouped = T.Tensor((m, groups, group), "float32", acc.data)
            best = T.alloc_fragment((m, groups), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.fill(best, 1.0)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True, policy=policy)
            if kind == "max":
                T.reduce_max(grouped, best, dim=2, clear=clear)
            elif kind == "absmax":
                T.reduce_absmax(grouped, best, dim=2, clear=clear)
            else:
                T.reduce_sum(grouped, best, dim=2, clear=clear)
            T.copy(best, Out)
    return group_max


def _pool_acc_rows(m=64, n=64, pool=8, threads=128, dtype="float16", kind="sum",
                   policy=T.GemmWarpPolicy.Square):
    """Out[b, j] = (A @ B^T)[b * pool .. (b + 1) * pool - 1, j] pooled (sum, then halved;
    or max): the accumulator viewed as (m / pool, pool, n), halved in place through the
    view, reduced over dim 1."""
    blocks = m // pool

    @T.prim_func
    def pool_acc_rows(A: T.Tensor((m, 32), dtype), B: T.Tensor((n, 32), dtype),
                      Out: T.Tensor((blocks, n), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a = T.alloc_shared((m, 32), dtype)
            b = T.alloc_shared((n, 32), dtype)
            acc = T.alloc_fragment((m, n), "float32")
            pooled = T.reshape(acc, (blocks, pool, n))
            out = T.alloc_fragment((blocks, n), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True, policy=policy)
            for b_, p, d in T.Parallel(blocks, pool, n):
                pooled[b_, p, d] = pooled[b_, p, d] * 0.5
            if kind == "sum":
                T.reduce_sum(pooled, out, dim=1)
            else:
                T.reduce_max(pooled, out, dim=1)
            T.copy(out, Out)
    return pool_acc_rows


def _tiles_view(threads=128, dtype="float16"):
    """A (64, 64) accumulator viewed as (4, 16, 8, 8) (rows and columns both split): each
    8-column group offset by its index along the rows' outer split, then the max of each."""
    @T.prim_func
    def tiles_view(A: T.Tensor((64, 32), dtype), B: T.Tensor((64, 32), dtype),
                   Out: T.Tensor((4, 16, 8), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a = T.alloc_shared((64, 32), dtype)
            b = T.alloc_shared((64, 32), dtype)
            acc = T.alloc_fragment((64, 64), "float32")
            tiles = T.reshape(acc, (4, 16, 8, 8))
            best = T.alloc_fragment((4, 16, 8), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True)
            for i, r, g, c in T.Parallel(4, 16, 8, 8):
                tiles[i, r, g, c] = tiles[i, r, g, c] + T.cast(i * 8 + g, "float32")
            T.reduce_max(tiles, best, dim=3)
            T.copy(best, Out)
    return tiles_view


def _mean_pool_rows(rows=64, dim=64, pool=8, threads=128):
    """Out[b, d] = mean of rows b * pool .. of X: a (rows, dim) fragment reshaped to
    (rows / pool, pool, dim), summed over dim 1, scaled."""
    blocks = rows // pool

    @T.prim_func
    def mean_pool_rows(X: T.Tensor((rows, dim), "float32"), Out: T.Tensor((blocks, dim), "float32")):
        with T.Kernel(1, threads=threads) as _:
            x = T.alloc_fragment((rows, dim), "float32")
            pooled = T.reshape(x, (blocks, pool, dim))
            total = T.alloc_fragment((blocks, dim), "float32")
            T.copy(X, x)
            T.reduce_sum(pooled, total, dim=1)
            for b, d in T.Parallel(blocks, dim):
                Out[b, d] = total[b, d] * (1.0 / pool)
    return mean_pool_rows


def _fragment_heads(rows=32, groups=4, per=16, threads=128):
    """A loaded (not T.gemm) fragment viewed as (rows, groups, per): relu, weight per
    column of a group, summed per group."""
    cols = groups * per

    @T.prim_func
    def fragment_heads(X: T.Tensor((rows, cols), "float32"), W: T.Tensor((per,), "float32"),
                       Out: T.Tensor((rows, groups), "float32")):
        with T.Kernel(1, threads=threads) as _:
            x = T.alloc_fragment((rows, cols), "float32")
            xg = T.reshape(x, (rows, groups, per))
            w = T.alloc_fragment((per,), "float32")
            out = T.alloc_fragment((rows, groups), "float32")
            T.copy(X, x)
            T.copy(W, w)
            for i, g, h in T.Parallel(rows, groups, per):
                xg[i, g, h] = T.max(xg[i, g, h], 0) * w[h]
            T.reduce_sum(xg, out, dim=-1)
            T.copy(out, Out)
    return fragment_heads


def _refused(body: str, err=AccumulatorViewError) -> str:
    import textwrap

    src = textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 4), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                out = T.alloc_fragment((64, 4), "float32")
                T.copy(A, a)
                T.gemm(a, a, acc, transpose_B=True, clear_accum=True)
    ''') + textwrap.indent(textwrap.dedent(body), " " * 8)
    with pytest.raises(err) as e:
        run_passes(T.from_script(src))
    return str(e.value)


# ---- IR -------------------------------------------------------------------------------------
def _stmts(func):
    return [s for k in func.kernels for s in walk_stmts(k.body)]


def test_indexer_walks_the_accumulator_and_reduces_runs_of_heads():
    func = run_passes(_indexer(), until="split_accumulator_views")
    text = func.script()
    assert "s_heads = " not in text and "s_heads[" not in text  # the view is gone
    seg = [s for s in _stmts(func) if isinstance(s, N.SegmentReduce)]
    assert len(seg) == 1 and seg[0].src == "s" and seg[0].width == 16 and seg[0].kind == "sum"
    # the (n, q, h) loop is one over the accumulator's (n, j), h and q recovered from j
    assert "s[n, q_h] = T.max(s[n, q_h] * k_scale[n], T.float32(0.0)) * weights[q_h // 16, q_h % 16]" \
        in text
    assert "logits[s_heads_r0, s_heads_r1] = s_heads_runs[s_heads_r0 * 2 + s_heads_r1]" in text


@pytest.mark.parametrize("h,n,warps,mma,width", [
    (16, 32, (1, 1), "wgmma", 16), (64, 128, (1, 2), "wgmma", 64), (128, 128, (1, 2), "wgmma", 64),
    (24, 96, (1, 2), "wgmma", 24), (4, 64, (1, 1), "wgmma", 4), (2, 64, (2, 2), "mma", 2),
    (64, 64, (2, 2), "mma", 8), (6, 48, (1, 1), "wgmma", 2), (1, 64, (1, 1), "wgmma", 1)])
def test_run_width_divides_the_group_and_a_warps_columns(h, n, warps, mma, width):
    assert run_width(h, n, N.Layout("mma", threads=128, mma=mma, warps=warps)) == width


def test_runs_spanning_warpgroups_meet_in_the_combining_loop():
    # 2 warpgroups along N (64 columns each), heads of 128 columns: runs of 64, two a head
    func = run_passes(_indexer(block_N=64, heads=128, block_Q=1, threads=256), "sm_90a",
                      until="split_accumulator_views")
    (seg,) = [s for s in _stmts(func) if isinstance(s, N.SegmentReduce)]
    assert seg.width == 64
    # (one query: s_heads_r1 is 0) row r's two runs, r * 2 and r * 2 + 1
    assert "s_heads_runs[(s_heads_r0 + s_heads_r1) * 2] + s_heads_runs[(s_heads_r0 + " \
           "s_heads_r1) * 2 + 1]" in func.script()


def test_reduce_without_clear_combines_the_old_value():
    text = run_passes(_group_max(clear=False), until="split_accumulator_views").script()
    assert "best[grouped_r0, grouped_r1] = T.max(best[grouped_r0, grouped_r1], " \
           "grouped_runs[grouped_r0 * 8 + grouped_r1])" in text


def test_segment_reduce_round_trips_through_json():
    from tilecute.ir.serialize import from_json, strip_locs, to_json

    for func in (run_passes(_indexer()), run_passes(_pool_acc_rows())):
        assert strip_locs(from_json(to_json(func))) == strip_locs(func)
        assert any(isinstance(s, N.SegmentReduce) for s in _stmts(func))


def test_rows_and_columns_split_both_fuse():
    text = run_passes(_tiles_view(), until="split_accumulator_views").script()
    assert "acc[i_r, g_c] = acc[i_r, g_c] + T.Cast(\"float32\", i_r // 16 * 8 + g_c // 8)" in text
    assert "best[tiles_r0, tiles_r1, tiles_r2] = tiles_runs[(tiles_r0 * 16 + tiles_r1) * 8 + " \
           "tiles_r2]" in text


# ---- refused --------------------------------------------------------------------------------
def test_view_flattening_an_accumulator_is_refused():
    msg = _refused('''
        v = T.reshape(acc, (32, 128))
        for i, c in T.Parallel(32, 128):
            v[i, c] = v[i, c] * 2.0
    ''')
    assert "'v'" in msg and "accumulator 'acc'" in msg and "split of its rows and of its columns" in msg


def test_row_split_walks_the_accumulator_rows():
    func = run_passes(_pool_acc_rows(), until="split_accumulator_views")
    text = func.script()
    assert "acc[b__p, d] = acc[b__p, d] * T.float32(0.5)" in text  # (b_, p) fused
    (seg,) = [s for s in _stmts(func) if isinstance(s, N.SegmentReduce)]
    assert seg.axis == 0 and seg.width == 8 and seg.kind == "sum"
    assert "pooled_runs[pooled_r0 * 64 + pooled_r1]" in text


def test_reduce_over_a_middle_dim_of_an_accumulator_view_is_refused():
    msg = _refused('''
        v = T.reshape(acc, (64, 4, 16))
        sums = T.alloc_fragment((64, 16), "float32")
        T.reduce_sum(v, sums, dim=1)
    ''')
    assert "dim=1" in msg and "or over its last dim of rows, dim 0" in msg


def test_view_walked_at_other_indices_is_refused():
    msg = _refused('''
        v = T.reshape(acc, (64, 4, 16))
        for i, h, g in T.Parallel(64, 16, 4):
            v[i, g, h] = v[i, g, h] * 2.0
    ''')
    assert "'v'" in msg and "walks its dims in order" in msg


def test_copy_of_an_accumulator_view_is_refused():
    msg = _refused('''
        v = T.reshape(acc, (64, 4, 16))
        s = T.alloc_shared((64, 4, 16), "float32")
        T.copy(v, s)
    ''')
    assert "'v', a view of T.gemm accumulator 'acc'" in msg and "Copy" in msg


# ---- cubins ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: _indexer(),
    lambda: _indexer(dtype="float8_e4m3", dim=128, block_N=128, heads=32, block_Q=4, threads=256),
    lambda: _indexer(block_N=64, heads=128, block_Q=1, threads=256),
    lambda: _indexer(block_N=128, heads=64, block_Q=2, threads=512),
    lambda: _group_max(group=8),
    lambda: _group_max(group=4, clear=False),
    lambda: _group_max(group=2, kind="absmax"),
    lambda: _group_max(dtype="float32", group=16, kind="sum"),  # tf32: mma.sync
    lambda: _mean_pool_rows(),
    lambda: _fragment_heads(),
    lambda: _pool_acc_rows(),
    lambda: _pool_acc_rows(m=128, pool=32, kind="max", threads=256),
    lambda: _pool_acc_rows(dtype="float32", pool=4),
    lambda: _tiles_view(),
], ids=["indexer", "indexer-fp8", "indexer-2wg", "indexer-4wg", "max8", "max4-noclear",
        "absmax2", "sum16-mma", "mean-pool", "fragment-heads", "acc-pool8", "acc-max32",
        "acc-pool4-mma", "tiles-view"])
def test_compiles_to_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kw", [
    dict(),
    dict(dtype="float8_e4m3", dim=128, block_N=128, heads=32, block_Q=4, threads=256),
    dict(block_N=64, heads=128, block_Q=1, threads=256),
    dict(block_N=128, heads=64, block_Q=2, threads=512),
    dict(block_N=64, heads=8, block_Q=4, threads=128, policy=T.GemmWarpPolicy.FullRow),
], ids=["indexer", "indexer-fp8", "indexer-2wg", "indexer-4wg", "indexer-8heads"])
def test_indexer_on_gpu(kw):
    import torch

    block_N, heads, block_Q = kw.get("block_N", 64), kw.get("heads", 16), kw.get("block_Q", 2)
    dim, n_blocks = kw.get("dim", 64), 2
    dt = {"float16": torch.float16, "float8_e4m3": torch.float8_e4m3fn}[kw.get("dtype", "float16")]
    kernel = tilecute.compile(_indexer(n_blocks=n_blocks, **kw))
    torch.manual_seed(0)
    q = torch.randn(block_Q * heads, dim, device="cuda").to(dt)
    k = torch.randn(n_blocks * block_N, dim, device="cuda").to(dt)
    k_scale = torch.rand(n_blocks * block_N, device="cuda") + 0.5
    w = torch.randn(block_Q, heads, device="cuda")
    logits = torch.empty(block_Q, n_blocks * block_N, device="cuda")
    kernel(q, k, k_scale, w, logits)
    s = (k.float() @ q.float().T) * k_scale[:, None]  # (N, Q * H)
    ref = (s.relu().view(-1, block_Q, heads) * w[None]).sum(-1).T
    torch.testing.assert_close(logits, ref, atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [
    dict(group=8), dict(group=4, clear=False), dict(group=2, kind="absmax"),
    dict(dtype="float32", group=16, kind="sum"), dict(group=1, kind="sum"),
    dict(m=128, n=128, group=32, threads=256, policy=T.GemmWarpPolicy.FullCol),
    dict(dtype="float32", m=64, n=64, group=4, threads=128, policy=T.GemmWarpPolicy.FullCol,
         kind="max"),
    dict(m=128, n=64, group=8, kind="sum"),  # two 64-row steps per warpgroup
    dict(m=128, n=128, group=16, threads=512, policy=T.GemmWarpPolicy.FullRow),  # (2, 2)
    dict(dtype="float32", m=64, n=32, group=8, threads=32, kind="sum"),  # one warp, 4 x 4 steps
], ids=["max8", "max4-noclear", "absmax2", "sum16-mma", "sum1", "max32-2wg", "max4-mma-cols",
        "sum8-2steps", "max16-2x2wg", "sum8-mma-1warp"])
def test_group_reductions_on_gpu(kw):
    import torch

    m, n, group = kw.get("m", 64), kw.get("n", 64), kw["group"]
    kind, clear = kw.get("kind", "max"), kw.get("clear", True)
    dt = torch.float32 if kw.get("dtype") == "float32" else torch.float16
    kernel = tilecute.compile(_group_max(**kw))
    torch.manual_seed(1)
    a = torch.randn(m, 32, device="cuda").to(dt)
    b = torch.randn(n, 32, device="cuda").to(dt)
    out = torch.empty(m, n // group, device="cuda")
    kernel(a, b, out)
    c = (a.float() @ b.float().T).view(m, n // group, group)
    ref = {"max": c.amax(-1), "absmax": c.abs().amax(-1), "sum": c.sum(-1)}[kind]
    if not clear:
        ref = torch.maximum(ref, torch.ones_like(ref)) if kind != "sum" else ref + 1
    tol = 5e-2 if dt == torch.float32 else 1e-2  # tf32 products
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [
    dict(), dict(pool=16), dict(pool=2, kind="max"), dict(m=128, pool=32, kind="max", threads=256),
    dict(m=128, n=128, pool=64, threads=512, policy=T.GemmWarpPolicy.FullRow),
    dict(pool=1), dict(dtype="float32", pool=4), dict(dtype="float32", m=64, n=32, pool=16,
                                                        threads=32),
    dict(dtype="float32", m=128, n=64, pool=32, threads=256, policy=T.GemmWarpPolicy.FullRow),
], ids=["sum8", "sum16", "max2", "max32-2wg", "sum64-2x2wg", "sum1", "sum4-mma",
        "sum16-mma-1warp", "sum32-mma-8warps"])
def test_accumulator_row_pooling_on_gpu(kw):
    import torch

    m, n, pool, kind = kw.get("m", 64), kw.get("n", 64), kw.get("pool", 8), kw.get("kind", "sum")
    dt = torch.float32 if kw.get("dtype") == "float32" else torch.float16
    kernel = tilecute.compile(_pool_acc_rows(**kw))
    torch.manual_seed(2)
    a = torch.randn(m, 32, device="cuda").to(dt)
    b = torch.randn(n, 32, device="cuda").to(dt)
    out = torch.empty(m // pool, n, device="cuda")
    kernel(a, b, out)
    c = (a.float() @ b.float().T).view(m // pool, pool, n) * 0.5
    ref = c.sum(1) if kind == "sum" else c.amax(1)
    tol = 5e-2 if dt == torch.float32 else 1e-2
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


@pytest.mark.gpu
def test_tiles_view_on_gpu():
    import torch

    kernel = tilecute.compile(_tiles_view())
    a = torch.randn(64, 32, device="cuda").half()
    b = torch.randn(64, 32, device="cuda").half()
    out = torch.empty(4, 16, 8, device="cuda")
    kernel(a, b, out)
    c = (a.float() @ b.float().T).view(4, 16, 8, 8)
    c = c + (torch.arange(4, device="cuda")[:, None, None, None] * 8
             + torch.arange(8, device="cuda")[None, None, :, None])
    torch.testing.assert_close(out, c.amax(-1), atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_mean_pool_rows_on_gpu():
    import torch

    kernel = tilecute.compile(_mean_pool_rows())
    x = torch.randn(64, 64, device="cuda")
    out = torch.empty(8, 64, device="cuda")
    kernel(x, out)
    torch.testing.assert_close(out, x.view(8, 8, 64).mean(1), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,groups,per", [(32, 4, 16), (2, 6, 32), (2, 3, 128)])
def test_fragment_heads_on_gpu(rows, groups, per):
    import torch

    kernel = tilecute.compile(_fragment_heads(rows, groups, per))
    x = torch.randn(rows, groups * per, device="cuda")
    w = torch.randn(per, device="cuda")
    out = torch.empty(rows, groups, device="cuda")
    kernel(x, w, out)
    ref = (x.relu().view(rows, groups, per) * w).sum(-1)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
