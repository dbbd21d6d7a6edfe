"""T.PersistentTileScheduler: TileLang's persistent walk over a grid of tiles.  The order
is checked against a walk written out panel by panel (not the scheduler's division
formula), for the parse-time ints and for the IR the kernel computes; the programs build
sm_90a cubins; the GPU tests run the walk and two persistent kernels against torch."""

import itertools

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import fold_constants, substitute
from tilecute.language import FrontendError

import tile_scheduler_programs as P


def panel_walk(m: int, n: int, swizzle: int = 1, column_major: bool = True, cluster: int = 1):
    """The tiles in TileLang's order, enumerated: clustering along M shrinks the grid
    first; then panels of `swizzle` tiles of the slow axis (N when column-major), each
    swept whole along the fast axis, the panel's own tiles innermost."""
    m = -(-m // cluster)
    fast, slow = (m, n) if column_major else (n, m)
    order = []
    for base in range(0, slow, swizzle):
        for f in range(fast):
            for s in range(base, min(base + swizzle, slow)):
                order.append((f, s) if column_major else (s, f))
    return order


def test_column_major_walk_without_swizzle_sweeps_m_first():
    sched = T.PersistentTileScheduler(4, 2, num_workers=1, stateful=False)
    assert [sched.coord(t) for t in range(8)] == \
        [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1), (2, 1), (3, 1)]


def test_row_major_swizzled_walk_has_a_narrow_last_panel():
    # 3 rows of 5 tiles, panels of 2 rows: rows 0-1 column by column, then row 2 alone
    sched = T.PersistentTileScheduler(3, 5, num_workers=1, swizzle_size=2, column_major=False,
                                      stateful=False)
    assert [sched.coord(t) for t in range(15)] == \
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3), (0, 4), (1, 4),
         (2, 0), (2, 1), (2, 2), (2, 3), (2, 4)]


@pytest.mark.parametrize("m,n,swizzle,column_major,cluster", [
    (m, n, s, c, k) for m, n, s, c, k in itertools.product(
        (1, 3, 8), (1, 5, 6), (1, 2, 4, 9), (True, False), (1, 2))])
def test_walk_matches_the_panel_enumeration(m, n, swizzle, column_major, cluster):
    sched = T.PersistentTileScheduler(m, n, num_workers=3, swizzle_size=swizzle,
                                      column_major=column_major, cluster_size=cluster,
                                      stateful=False)
    want = panel_walk(m, n, swizzle, column_major, cluster)
    assert [sched.coord(t) for t in range(len(want))] == want
    # the kernel's expressions: the same decode of a runtime tile index
    t = N.Var("t", "int32")
    em, en = sched.coord(t)
    got = [tuple(fold_constants(substitute(e, {"t": N.Const(i, "int32")})).value
                 for e in (em, en)) for i in range(len(want))]
    assert got == want


def _ir_text(func) -> str:
    return func.script()


def test_stateful_scheduler_keeps_its_cursor_in_named_vars():
    @T.prim_func
    def persistent(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=1, name="sched")
            sched.init(block_id)
            while sched.valid():
                A[sched.m_idx] = sched.n_idx + sched.current_iter
                sched.next_tile()

    text = _ir_text(persistent)
    for name in ("sched_m_idx", "sched_n_idx", "sched_linear_idx", "sched_current_iter"):
        assert f"{name} = T.alloc_local((1,), \"int32\")" in text, text
    assert "while sched_linear_idx[0] < 8:" in text
    assert "sched_linear_idx[0] = sched_linear_idx[0] + 1" in text  # next_tile: + num_workers
    assert "sched_current_iter[0] = sched_current_iter[0] + 1" in text


def test_stateless_scheduler_allocates_nothing():
    @T.prim_func
    def stateless(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=1, stateful=False)
            bx, by = sched.coord(block_id)
            A[bx] = by

    text = _ir_text(stateless)
    assert "alloc_local" not in text and "A[bx] = by" in text, text


def test_state_names_do_not_shadow_the_programs_names():
    @T.prim_func
    def keep(A: T.Tensor((8,), T.int32)):
        with T.Kernel(2, threads=1) as (bid,):
            m_idx = bid + 3
            sched = T.PersistentTileScheduler(4, 2, num_workers=2)
            sched.init(bid)
            A[m_idx] = sched.m_idx

    text = _ir_text(keep)
    assert "m_idx = bid + 3" in text and "A[m_idx] = m_idx_1[0]" in text, text


def test_symbolic_tile_counts():
    m = T.dynamic("m")

    @T.prim_func
    def dyn(A: T.Tensor((m, 64), T.float32)):
        with T.Kernel(4, threads=64) as (bid,):
            sched = T.PersistentTileScheduler(T.ceildiv(m, 32), 2, num_workers=4,
                                              swizzle_size=2, name="s")
            sched.init(bid)
            while sched.valid():
                for i, j in T.Parallel(32, 32):
                    if sched.m_idx * 32 + i < m:
                        A[sched.m_idx * 32 + i, sched.n_idx * 32 + j] = 1.0
                sched.next_tile()

    assert "while s_linear_idx[0] < T.ceildiv(m, 32) * 2:" in _ir_text(dyn), _ir_text(dyn)
    assert tilecute.build_cubin(dyn, "sm_90a").kernel_names


@pytest.mark.parametrize("make", [
    lambda: P.tile_walk(5, 7, 3, swizzle=3, column_major=False),
    lambda: P.persistent_scale(200, 300),
    lambda: P.stateless_waves(100, 130),
    lambda: P.persistent_gemm(512, 384, 256),
    lambda: P.clustered_add(),
], ids=["walk", "scale", "stateless", "gemm", "cluster"])
def test_builds_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- refusals ---------------------------------------------------------------------------
def _parse(body: str, top: str = ""):
    text = f'''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((8,), T.int32)):
{top}
    with T.Kernel(2, threads=32) as (bid,):
{body}
'''
    return T.from_script(text)


@pytest.mark.parametrize("body,match", [
    ("        s = T.PersistentTileScheduler(4, 2, num_workers=2, stateful=False)\n"
     "        A[0] = s.m_idx", "stateful=False\\) has no m_idx"),
    ("        s = T.PersistentTileScheduler(4, 2, num_workers=2, swizzle_size=0)",
     "swizzle_size must be a positive int"),
    ("        s = T.PersistentTileScheduler(4, 2, num_workers=2, cluster_size=bid)",
     "cluster_size must be a positive int"),
    ("        s = T.PersistentTileScheduler(4, 2, num_workers=2, column_major=bid > 0)",
     "column_major must be a bool"),
    ("        s = T.PersistentTileScheduler(4.0, 2, num_workers=2)",
     "num_m_tiles must be an integer"),
    ("        A[0] = T.PersistentTileScheduler(4, 2, num_workers=2).m_idx",
     "its state is allocated where it is assigned"),
])
def test_refusals_name_the_argument(body, match):
    with pytest.raises(FrontendError, match=match):
        _parse(body)


def test_stateful_scheduler_outside_a_kernel_is_refused():
    with pytest.raises(FrontendError, match="a stateful scheduler keeps its cursor"):
        _parse("        A[0] = 1",
               top="    s = T.PersistentTileScheduler(4, 2, num_workers=2)\n    s.init(0)")


def test_stateless_scheduler_before_the_kernel_decodes_inside_it():
    f = _parse("        bx, by = s.coord(bid + 1)\n        A[bx] = by",
               top="    s = T.PersistentTileScheduler(4, 2, num_workers=2, stateful=False)")
    assert "A[bx] = by" in f.script()


# ---- on the GPU -------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m,n,workers,swizzle,column_major", [
    (5, 7, 3, 3, False), (6, 4, 4, 1, True), (9, 5, 2, 4, True)])
def test_gpu_walk_is_tilelangs_order(m, n, workers, swizzle, column_major):
    import torch

    kernel = tilecute.compile(P.tile_walk(m, n, workers, swizzle, column_major))
    order, it, worker = (torch.full((m, n), -1, dtype=torch.int32, device="cuda")
                         for _ in range(3))
    kernel(order, it, worker)
    torch.cuda.synchronize()
    want_order = torch.full((m, n), -1, dtype=torch.int32)
    want_iter, want_worker = want_order.clone(), want_order.clone()
    for t, (r, c) in enumerate(panel_walk(m, n, swizzle, column_major)):
        want_order[r, c], want_iter[r, c], want_worker[r, c] = t, t // workers, t % workers
    assert torch.equal(order.cpu(), want_order)
    assert torch.equal(it.cpu(), want_iter)
    assert torch.equal(worker.cpu(), want_worker)


@pytest.mark.gpu
def test_gpu_persistent_elementwise_matches_torch():
    import torch

    a = torch.randn(200, 300, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(P.persistent_scale(200, 300))(a, b)
    torch.testing.assert_close(b, a * 2 + 1)


@pytest.mark.gpu
def test_gpu_stateless_waves_match_torch():
    import torch

    M, N, bm, bn, workers, swizzle = 100, 130, 32, 32, 4, 3
    a = torch.randn(M, N, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(P.stateless_waves(M, N, bm, bn, workers, swizzle))(a, b)
    wave = torch.empty(M, N)
    for t, (r, c) in enumerate(panel_walk(-(-M // bm), -(-N // bn), swizzle, False)):
        wave[r * bm:(r + 1) * bm, c * bn:(c + 1) * bn] = t // workers
    torch.testing.assert_close(b.cpu(), a.cpu() + wave)


@pytest.mark.gpu
def test_gpu_clustered_walk_matches_torch():
    import torch

    a = torch.randn(256, 320, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(P.clustered_add())(a, b)
    torch.testing.assert_close(b, a + 1)


@pytest.mark.gpu
def test_gpu_persistent_gemm_matches_torch():
    import torch

    M, N, K = 512, 384, 256
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tilecute.compile(P.persistent_gemm(M, N, K))(a, b, c)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=1e-2, atol=1e-1)


def test_default_workers_are_the_gpus_sms_per_cluster(monkeypatch):
    from tilecute.language import tile_schedule

    monkeypatch.setattr(tile_schedule, "_device_sms", lambda: 132)
    assert T.PersistentTileScheduler(4, 4, stateful=False).num_workers == 132
    assert T.PersistentTileScheduler(4, 4, cluster_size=2, stateful=False).num_workers == 66


def test_default_workers_without_a_gpu_are_refused_by_name(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(FrontendError, match="num_workers=None is the GPU's SM count"):
        _parse("        s = T.PersistentTileScheduler(4, 2)")


def test_update_current_idx_sets_the_tile():
    @T.prim_func
    def jump(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (bid,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=1, name="s")
            sched.update_current_idx(5)
            A[0] = sched.m_idx
            A[1] = sched.n_idx

    text = jump.script()
    assert "s_m_idx[0] = 1" in text and "s_n_idx[0] = 1" in text, text  # tile 5: (1, 1)


def test_eager_kernel_walks_with_a_scheduler(tmp_path):
    @tilecute.jit
    def scale(A, block: int = 32, workers: int = 3):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty((M, N), T.float32)
        with T.Kernel(workers, threads=128) as (wid,):
            sched = T.PersistentTileScheduler(T.ceildiv(M, block), T.ceildiv(N, block),
                                              num_workers=workers, swizzle_size=2)
            sched.init(wid)
            while sched.valid():
                for i, j in T.Parallel(block, block):
                    B[sched.m_idx * block + i, sched.n_idx * block + j] = \
                        A[sched.m_idx * block + i, sched.n_idx * block + j] * 2.0
                sched.next_tile()
        return B

    func = scale.get_tir(M=64, N=96)
    assert "while linear_idx[0] < 6:" in func.script(), func.script()
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
