"""TileLang's cluster intrinsics (its programming guide's "Cluster and TMA" and its cluster
tests): ``T.cluster_arrive`` / ``T.cluster_wait`` / ``T.cluster_arrive_relaxed`` /
``T.cluster_sync``, ``T.block_rank_in_cluster()``, ``T.alloc_cluster_barrier`` and
``T.mbarrier_arrive(bar, cta_id)`` (an arrive on another block's barrier)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.kernel import CodegenError
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def ranks(cluster_size=4):
    @T.prim_func
    def rank_of(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(128, threads=64, cluster_dims=(cluster_size, 1, 1)) as bx:
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            T.cluster_arrive()
            T.cluster_wait()
            rank = T.block_rank_in_cluster()
            if T.get_thread_binding() == 0:
                A[bx] = rank
            T.cluster_sync()
    return rank_of


def arrivals():
    """Every block of a cluster of 4 arrives on block 0's barrier (128 threads each);
    block 0 waits for the first phase (256 arrivals), then every block writes 1."""
    @T.prim_func
    def arrive_on_first(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(128, threads=128, cluster_dims=(4, 1, 1)) as bx:
            mbar = T.alloc_cluster_barrier([256])
            T.cluster_sync()
            T.mbarrier_arrive(mbar, 0)
            if T.block_rank_in_cluster() == 0:
                T.mbarrier_wait_parity(mbar, 0)
            T.cluster_sync()
            if T.get_thread_binding() == 0:
                A[bx] = 1
    return arrive_on_first


def test_cluster_statements_and_rank_build(tmp_path):
    func = ranks()
    kinds = [s.kind for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.ClusterSync)]
    assert kinds == ["arrive_relaxed", "wait", "arrive", "wait", "sync"]
    assert T.from_script(func.script()) == func  # printed as written
    src = tilecute.compile(func).get_kernel_source()
    assert "cute.arch.cluster_arrive_relaxed()" in src and "cute.arch.block_idx_in_cluster()" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_remote_arrive_builds_and_syncs_the_barriers_init(tmp_path):
    func = arrivals()
    arrive = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.MBarrierArrive))
    assert arrive.block == N.Const(0, "int32")
    src = tilecute.compile(func).get_kernel_source()
    assert "tct.arrive(mbar, block=0)" in src
    # the barriers' init is seen by the other blocks before any of them arrives
    assert src.index("tct.init_barriers(mbar") < src.index("tct.cluster_sync()")
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_cluster_barrier_below_sm90_is_refused_by_name(tmp_path):
    # the cluster launch itself is refused first on sm_80 (launch_abi), naming the form
    with pytest.raises(Exception, match=r"clusters of 4 blocks \(T.ClusterKernel\(cluster_dims=...\)"
                                        r".* sm_90\+; the target is sm_80"):
        tilecute.build_cubin(ranks(), "sm_80", out_dir=str(tmp_path))


def test_cta_id_must_be_an_integer():
    with pytest.raises(tilecute.language.parser.FrontendError, match="cta_id must be an integer"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.int32)):
            with T.ClusterKernel(2, threads=32, cluster_dims=(2, 1, 1)) as _:
                mbar = T.alloc_cluster_barrier([1])
                T.mbarrier_arrive(mbar, 0.5)


@pytest.mark.gpu
def test_cluster_forms_on_gpu():
    import torch

    out = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    tilecute.compile(ranks())(out)
    assert torch.equal(out, torch.arange(128, dtype=torch.int32, device="cuda") % 4)
    flags = torch.zeros(128, dtype=torch.int32, device="cuda")
    tilecute.compile(arrivals())(flags)
    torch.cuda.synchronize()
    assert int(flags.sum()) == 128
