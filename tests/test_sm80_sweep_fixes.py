"""Fixes found by sweeping the program corpus on the sm_80 path (tests/sm80_sweep.py: every
program factory in tests/*programs*.py and examples/*.py lowered and built for sm_80, Ampere:
mma.sync, cp.async, no TMA / wgmma / clusters).  CPU: the sm_80 cubin builds, or the refusal
names the form and the program's line."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.transform.pipeline import lower

import tile_scheduler_programs


def _cluster_add(N=1024, cluster=2):
    @T.prim_func
    def add(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128, threads=128, cluster_dims=cluster) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] + 1.0
    return add


# ---- thread block clusters are sm_90+ -----------------------------------------------------
def test_cluster_launch_is_refused_by_name_on_sm80():
    # was: the CuTe DSL source built, and libNVVM failed on the cluster launch (error 9)
    with pytest.raises(Exception) as err:
        lower(tile_scheduler_programs.clustered_add(), "sm_80", None)
    msg = str(err.value)
    assert "T.ClusterKernel(cluster_dims=...)" in msg and "sm_90+" in msg and "sm_80" in msg
    assert "tile_scheduler_programs.py:114" in msg


def test_cluster_dims_on_t_kernel_is_refused_on_sm80_and_builds_on_sm90a(tmp_path):
    with pytest.raises(Exception, match=r"clusters of 2 blocks .* sm_90\+; the target is sm_80"):
        lower(_cluster_add(), "sm_80", None)
    assert tilecute.build_cubin(_cluster_add(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_one_block_cluster_still_builds_on_sm80(tmp_path):
    assert tilecute.build_cubin(_cluster_add(cluster=1), "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- T.Pipelined(stage=, order=) on sm_80 runs the loop in source order ---------------------
@pytest.mark.parametrize("module,name", [("unseen_programs2", "flash_attn_overlap"),
                                         ("unseen_programs18", "fa_user_overlap_groups")])
def test_overlap_schedule_on_sm80_runs_the_plain_loop(module, name, tmp_path):
    # the MMA overlap is a wgmma schedule; TileLang compiles these loops on sm_80 as software
    # pipelines, which compute what the statements in source order compute (was refused)
    import importlib
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts

    factory = getattr(importlib.import_module(module), name)
    func = getattr(factory, "get_tir", factory)()
    plan = lower(func, "sm_80", None)
    loops = [s for k in plan.func.kernels for s in walk_stmts(k.body) if isinstance(s, N.For)]
    assert not any(lp.overlap_mma for lp in loops)
    assert not any(isinstance(s, (N.NamedBarrier, N.WaitWgmma))
                   for k in plan.func.kernels for s in walk_stmts(k.body))
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


# ---- mbarrier phase waits on sm_80: mbarrier.test_wait spins ---------------------------------
def test_mbarrier_wait_builds_on_sm80(tmp_path):
    # was: refused by name (CuTe DSL's wait is mbarrier.try_wait, sm_90+); now
    # tct.wait_test spins on mbarrier.test_wait.parity (sm_80+), tct.arrive_cta arrives
    # without CuTe DSL's .release.cta (sm_90+) (tests/test_leftover_forms.py)
    import unseen_programs11

    plan = lower(unseen_programs11.ws_row_logsumexp(), "sm_80", None)
    src = emit_cute(plan)
    assert "tct.wait_test(" in src and "tct.wait(" not in src and "tct.arrive_cta(" in src
    assert tilecute.build_cubin(unseen_programs11.ws_row_logsumexp(), "sm_80",
                                out_dir=str(tmp_path)).kernel_names


def test_a_second_cluster_program_is_refused_on_sm80():
    import unseen_programs13

    f = unseen_programs13.grid_3d_cluster
    with pytest.raises(Exception, match=r"unseen_programs13.py:\d+: .*clusters of 2 blocks"):
        lower(getattr(f, "get_tir", f)(), "sm_80", None)
