"""TMA multicast in clusters: which loads of a warp-specialized loop the multicast pass
shares between the blocks of a cluster, the barriers it makes cluster-wide, the cases it
leaves alone (a tile or loop that differs between the blocks, no producer warpgroup, the
option off), the cluster-aware block orders, and the sm_90a cubins."""

import itertools

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.rasterization import panel_order
from tilecute.ir.validate import ValidationError
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def _gemm(cluster=(1, 2, 1), stages=3, panel=8, ws=True, tn=256, causal_steps=False,
          M=1024, N=1024, K=512):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, tn), T.ceildiv(M, 128), threads=256,
                      cluster=cluster) as (bx, by):
            if panel:
                T.use_swizzle(panel)
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, tn), "float16")
            acc = T.alloc_fragment((128, tn), "float32")
            T.clear(acc)
            steps = by + 1 if causal_steps else T.ceildiv(K, 64)
            for k in T.Pipelined(steps, num_stages=stages, warp_specialize=ws):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * tn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 128, bx * tn])

    return gemm


def _lowered(func, **options):
    return run_passes(func, "sm_90a", options)


def _stmts(func, kind):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, kind)]


def test_b_tiles_shared_along_m_are_multicast():
    f = _lowered(_gemm())
    loads = {s.src.buffer: s.multicast for s in _stmts(f, N.TmaCopy) if s.barrier is not None}
    # B's 64x256 tile is 4 boxes, 2 per block; A's 128x64 tile differs per block (and is
    # one box)
    assert loads == {"B": 2, "A": 0}
    releases = [s.cluster for s in _stmts(f, N.MBarrierArrive)]
    assert releases and set(releases) == {2}
    assert isinstance(f.kernels[0].body[-1], N.ClusterSync)
    text = print_func(f)
    assert "multicast=2" in text and "cluster=2)" in text and "T.cluster_sync()" in text
    # one arrival per warp (8) of each of the 2 blocks
    assert "T.alloc_barrier([16] * 3)" in text


def test_option_off_and_no_cluster_keep_loads_per_block():
    for f in (_lowered(_gemm(), disable_tma_multicast=True), _lowered(_gemm(cluster=None))):
        assert not any(s.multicast for s in _stmts(f, N.TmaCopy))
        assert not any(s.cluster for s in _stmts(f, N.MBarrierArrive))
        assert not _stmts(f, N.ClusterSync)


def test_a_tile_that_differs_in_the_cluster_is_not_multicast():
    # clusters along N: the blocks share A, but A's tile is one box (nothing to split),
    # and B's tiles differ
    f = _lowered(_gemm(cluster=(2, 1, 1)))
    assert not any(s.multicast for s in _stmts(f, N.TmaCopy))
    assert not _stmts(f, N.ClusterSync)


def test_a_loop_whose_length_differs_in_the_cluster_is_not_multicast():
    # by + 1 steps: the blocks of a cluster along M run different numbers of steps, and a
    # peer would wait for stages this block never frees
    f = _lowered(_gemm(causal_steps=True, panel=0))
    assert not any(s.multicast for s in _stmts(f, N.TmaCopy))


def test_no_producer_warpgroup_no_multicast():
    f = _lowered(_gemm(ws=False))
    assert not any(s.multicast for s in _stmts(f, N.TmaCopy))


def test_four_block_clusters_split_the_boxes():
    f = _lowered(_gemm(cluster=(1, 4, 1)))
    assert {s.src.buffer: s.multicast for s in _stmts(f, N.TmaCopy)
            if s.barrier is not None} == {"B": 4, "A": 0}


def _one_tma_load(cluster=None):
    @T.prim_func
    def one_load(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128, cluster=cluster) as bx:
            A_s = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(1)
            if T.get_thread_binding() == 0:
                T.tma_copy(A[0:64, 0:64], A_s, barrier=bar[0])
                T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            T.copy(A_s, B[0:64, 0:64])

    return one_load


def _replace(func, kind, **fields):
    from tilecute.ir.visitor import BODY_FIELDS
    import dataclasses

    def body(stmts):
        out = []
        for s in stmts:
            if isinstance(s, kind):
                s = dataclasses.replace(s, **fields)
            for name in BODY_FIELDS.get(type(s), ()):
                s = dataclasses.replace(s, **{name: body(getattr(s, name))})
            out.append(s)
        return tuple(out)
    return dataclasses.replace(func, kernels=body(func.kernels))


@pytest.mark.parametrize("kind, fields, needle", [
    (N.TmaCopy, {"multicast": 2}, "T.tma_copy(multicast=...) is the multicast pass's decision"),
    (N.MBarrierArrive, {"cluster": 2}, "T.mbarrier_arrive(cluster=...) is the multicast pass's"),
])
def test_multicast_fields_are_not_inputs(kind, fields, needle):
    f = _replace(_one_tma_load((2, 1, 1)), kind, **fields)
    with pytest.raises(ValidationError) as e:
        run_passes(f, "sm_90a", {}, until="validate")
    assert needle in str(e.value)


def test_cluster_sync_kind_is_checked():
    """A ``ClusterSync`` in a kernel not launched in clusters is a cluster of one block
    (TileLang's ``T.cluster_sync()`` there); its kind is one of the four."""
    import dataclasses

    f = _one_tma_load()
    k = f.kernels[0]
    one = dataclasses.replace(f, kernels=(dataclasses.replace(k, body=k.body + (N.ClusterSync(),)),))
    run_passes(one, "sm_90a", {}, until="validate")
    bad = dataclasses.replace(f, kernels=(dataclasses.replace(
        k, body=k.body + (N.ClusterSync(kind="fence"),)),))
    with pytest.raises(ValidationError, match=r"ClusterSync kind 'fence'"):
        run_passes(bad, "sm_90a", {}, until="validate")


def _eval(e, env):
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.Select):
        return _eval(e.a, env) if _eval(e.cond, env) else _eval(e.b, env)
    a, b = _eval(e.a, env), _eval(e.b, env)
    ops = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
           "floordiv": lambda: a // b, "mod": lambda: a % b, "le": lambda: a <= b,
           "lt": lambda: a < b, "ge": lambda: a >= b, "gt": lambda: a > b}
    return ops[e.op]()


@pytest.mark.parametrize("cluster, nx, ny, panel", [
    ((1, 2), 6, 8, 4), ((1, 2), 5, 10, 3), ((2, 1), 8, 6, 4), ((1, 4), 3, 16, 8), ((1, 1), 4, 7, 2)])
def test_cluster_panel_order_is_a_permutation_keeping_clusters_together(cluster, nx, ny, panel):
    env = {}

    def let(stem, value):
        var = N.Var(f"{stem}{len(env)}", "int32")
        env[var.name] = value
        return var
    x, y = N.Var("x", "int32"), N.Var("y", "int32")
    new = panel_order(x, y, N.Const(nx, "int32"), N.Const(ny, "int32"), panel, let, cluster)
    seen = {}
    for bx, by in itertools.product(range(nx), range(ny)):
        vals = {"x": bx, "y": by}
        for name, value in env.items():
            vals[name] = _eval(value, vals)
        seen[bx, by] = (_eval(new[0], vals), _eval(new[1], vals))
    assert sorted(seen.values()) == sorted(seen)  # every tile once
    cx, cy = cluster
    for (bx, by), (tx, ty) in seen.items():  # the cluster's blocks: neighbouring tiles
        base = seen[bx - bx % cx, by - by % cy]
        assert (tx - base[0], ty - base[1]) == (bx % cx, by % cy)


def test_use_swizzle_in_a_cluster_keeps_multicast():
    text = print_func(_lowered(_gemm(panel=8)))
    assert "by // 2" in text.replace("(", "").replace(")", "") or "// 2" in text
    assert "multicast=2" in text


@pytest.mark.parametrize("cluster, stages", [((1, 2, 1), 3), ((1, 2, 1), 2), ((1, 4, 1), 4)])
def test_multicast_gemm_builds_sm90a_cubin(tmp_path, cluster, stages):
    info = tilecute.build_cubin(_gemm(cluster=cluster, stages=stages), "sm_90a",
                                out_dir=str(tmp_path))
    assert info.kernel_names
    source = (tmp_path / "kernel_cute.py").read_text()
    assert f"cluster={cluster[1]})" in source and "tct.cluster_sync()" in source
