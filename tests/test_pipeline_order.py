"""``T.Pipelined(n, order=[...], stage=[...])`` with an order other than source order
(TileLang's test_pipeline_order_stage): a step issues its statements in the given order,
each for the iteration its stage puts it at.  Each copy into shared memory issues before
the rest or after it (``For.loads_last`` names the buffers of those after: their refill
of stage ``(k + S - 1) % S`` goes at the end of step k, after its GEMM); the rest in the
order given; with one stage the body is the statements in that order.  A copy ordered
between two compute statements is refused by name."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def tiled_gemm(order, stage, M=512, N=512, K=512, block_M=128, block_N=128, block_K=32,
               dtype=T.float16):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), order=order, stage=stage):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm


def scaled_gemm(order, stage, M=256, N=256, K=256, block=64, block_K=32):
    """Two compute statements in the last stage, reordered by ``order``: the GEMM, then
    a scale of the accumulator (order puts the scale first: it runs before the GEMM)."""
    @T.prim_func
    def sgemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block), T.float16)
            acc = T.alloc_fragment((block, block), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, order=order, stage=stage):
                T.copy(A[by * block, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block], B_s)
                T.gemm(A_s, B_s, acc)
                for i, j in T.Parallel(block, block):
                    acc[i, j] = acc[i, j] * 0.5
            T.copy(acc, C[by * block, bx * block])
    return sgemm


def _loop(func):
    return next(s for s in walk_stmts(func.kernels[0].body)
                if isinstance(s, N.For) and s.kind == "pipelined")


def test_order_that_puts_the_copies_last_is_recorded():
    loop = _loop(tiled_gemm([1, 2, 0], [0, 0, 2]))
    assert loop.loads_last == ("A_shared", "B_shared") and loop.num_stages == 3
    assert [type(s).__name__ for s in loop.body] == ["Copy", "Copy", "Gemm"]  # (source order)
    assert _loop(tiled_gemm([0, 1, 2], [0, 0, 2])).loads_last == ()
    assert _loop(tiled_gemm([0, 2, 1], [0, 0, 1])).loads_last == ("B_shared",)


@pytest.mark.parametrize("options", [{}, {"disable_wgmma": True}])
@pytest.mark.parametrize("stages", [1, 2])
def test_refill_follows_the_gemm(options, stages):
    """The step waits for its stage, runs its GEMM, then issues step k + S - 1's TMA
    loads (after a block barrier, the stage it refills being read in the step before;
    or, for a wgmma GEMM left in flight, after the release of that stage)."""
    func = run_passes(tiled_gemm([1, 2, 0], [0, 0, stages]), "sm_90a",
                      {**options, "disable_warp_specialize": True}, until="insert_barriers")
    body = _loop(func).body
    assert [type(s).__name__ for s in body[:2]] == ["MBarrierWait", "Gemm"]
    copies = [i for i, s in enumerate(body) if any(isinstance(t, N.TmaCopy) for t in walk_stmts([s]))]
    assert copies == [len(body) - 1]
    refill = list(walk_stmts([body[-1]]))
    assert any(isinstance(t, (N.Barrier, N.MBarrierWait)) for t in refill)


def test_source_order_keeps_the_refill_first():
    func = run_passes(tiled_gemm([0, 1, 2], [0, 0, 2]), "sm_90a",
                      {"disable_wgmma": True, "disable_warp_specialize": True},
                      until="insert_barriers")
    assert type(_loop(func).body[0]).__name__ == "If"


def test_loads_last_round_trips_through_json():
    from tilecute.ir.serialize import from_json, to_json
    func = tiled_gemm([0, 2, 1], [0, 0, 1])
    assert from_json(to_json(func)) == func
    assert "loads_last" not in to_json(tiled_gemm([0, 1, 2], [0, 0, 1]))  # (only when set)


def test_one_stage_runs_the_statements_in_the_order_given():
    """All in stage 0: no pipeline; the serial body is the statements in the given order
    (TileLang's meaning, whatever the GEMM then reads)."""
    loop = next(s for s in walk_stmts(tiled_gemm([1, 2, 0], [0, 0, 0]).kernels[0].body)
                if isinstance(s, N.For) and s.kind == "serial")
    assert [type(s).__name__ for s in loop.body] == ["Gemm", "Copy", "Copy"]


def test_compute_statements_follow_the_order():
    loop = _loop(scaled_gemm([0, 1, 3, 2], [0, 0, 1, 1]))
    assert [type(s).__name__ for s in loop.body] == ["Copy", "Copy", "For", "Gemm"]
    assert not loop.loads_last
    loop = _loop(scaled_gemm([2, 3, 1, 0], [0, 0, 1, 1]))
    assert [type(s).__name__ for s in loop.body] == ["Copy", "Copy", "For", "Gemm"]
    assert loop.loads_last == ("A_s", "B_s")


@pytest.mark.parametrize("order,stage", [([1, 2, 0], [0, 0, 2]), ([1, 2, 0], [0, 0, 1]),
                                         ([0, 2, 1], [0, 0, 2])])
@pytest.mark.parametrize("options", [{}, {"disable_wgmma": True}])
def test_builds_sm90a_cubin(order, stage, options, tmp_path):
    info = tilecute.build_cubin(tiled_gemm(order, stage), "sm_90a", out_dir=str(tmp_path),
                                options={**options, "disable_warp_specialize": True})
    assert info.kernel_names


def test_copies_on_both_sides_of_the_gemm():
    """``order=[0, 2, 1]``: A's copy, the GEMM, then B's copy: step k + S - 1's A load at
    the start of step k, its B load at the end (both arrive on the stage's mbarrier)."""
    func = run_passes(tiled_gemm([0, 2, 1], [0, 0, 1]), "sm_90a",
                      {"disable_wgmma": True, "disable_warp_specialize": True},
                      until="insert_barriers")
    body = _loop(func).body

    def copied(s):
        return [t.dst.buffer for t in walk_stmts([s]) if isinstance(t, N.TmaCopy)]
    assert copied(body[0]) == ["A_shared"] and copied(body[-1]) == ["B_shared"]
    assert any(isinstance(t, N.Gemm) for t in body[1:-1])


def test_copy_between_compute_statements_is_refused():
    with pytest.raises(FrontendError, match=r"order=\[1, 3, 0, 2\] issues the copy into shared "
                                            r"memory at line \d+ between the step's other"):
        scaled_gemm([1, 3, 0, 2], [0, 0, 1, 1])


@pytest.mark.gpu
@pytest.mark.parametrize("order,stage", [([0, 1, 2], [0, 0, 1]), ([0, 1, 2], [0, 0, 2]),
                                         ([1, 2, 0], [0, 0, 2]), ([1, 2, 0], [0, 0, 1]),
                                         ([0, 2, 1], [0, 0, 2])])
@pytest.mark.parametrize("options", [{"disable_warp_specialize": True},
                                     {"disable_warp_specialize": True, "disable_wgmma": True}, {}])
def test_order_stage_gemm_on_gpu(order, stage, options):
    import torch
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    kernel = tilecute.compile(tiled_gemm(order, stage, 1024, 1024, 1024), out_idx=[2],
                              options=options)
    c = kernel(a, b)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).half().float(),
                               atol=1e-1, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("order", [[0, 1, 2, 3], [0, 1, 3, 2], [2, 3, 1, 0]])
def test_reordered_compute_on_gpu(order):
    """Each step's scale runs after or before its GEMM, as ``order`` says."""
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(scaled_gemm(order, [0, 0, 1, 1]))(a, b, c)
    want = torch.zeros(256, 256, device="cuda")
    scale_first = order[3] < order[2]
    for k in range(0, 256, 32):
        step = a[:, k:k + 32].float() @ b[k:k + 32, :].float()
        want = (want * 0.5 + step) if scale_first else (want + step) * 0.5
    torch.testing.assert_close(c, want, atol=1e-2, rtol=1e-2)
