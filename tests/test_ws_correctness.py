"""Warp-specialized loops that compute the right numbers.

1. A kernel with a producer warpgroup starts the producer with the kernel (split_roles),
   so the producer's TMA loads of the loop's first stages run beside whatever the compute
   warpgroups do before the loop.  Shared-memory placement used to let a buffer used only
   before the loop (a prologue GEMM's tiles, a vector read into a fragment) share bytes
   with the loop's stages: the producer's loads and the prologue's overwrote each other
   (TileLang's Mamba chunk-scan example, warp-specialized: nearly every element wrong).
   The producer's buffers are alive from the kernel's first statement now
   (transform/shared_memory.place).
2. A stage the compute threads read themselves (a tile copied to a fragment, a vector read
   in a T.Parallel) was released (the arrive on its empty mbarrier) right after the
   loads, with nothing ordering those generic-proxy loads before the producer's next TMA
   write of the stage: on an H100 and an H200 a row-major tile copied to a wgmma A
   fragment read the next step's values on most runs.  Each thread now runs
   fence.proxy.async before such a release (transform/warp_specialize._release); stages
   only wgmma reads get none."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes
from tilecute.transform.shared_memory import overlapping
from tilecute.transform.warp_specialize import producer_branch


def prologue_gemm_then_loop(ws=True, nb=2, M=64, N=64, K=256, D=128, bk=64, stages=2):
    """A GEMM on two tiles loaded before the loop (dead once the loop starts), then a
    pipelined GEMM loop: out[b] = P[b] @ Q[b]^T + A[b] @ X[b]."""

    @T.prim_func
    def prologue_gemm_then_loop(P: T.Tensor((nb, M, D), "float16"),
                                Q: T.Tensor((nb, N, D), "float16"),
                                A: T.Tensor((nb, M, K), "float16"),
                                X: T.Tensor((nb, K, N), "float16"),
                                Out: T.Tensor((nb, M, N), "float32")):
        with T.Kernel(nb, threads=128) as b:
            P_s = T.alloc_shared((M, D), "float16")
            Q_s = T.alloc_shared((N, D), "float16")
            A_s = T.alloc_shared((M, bk), "float16")
            X_s = T.alloc_shared((bk, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            T.copy(P[b, 0:M, 0:D], P_s)
            T.copy(Q[b, 0:N, 0:D], Q_s)
            T.gemm(P_s, Q_s, acc, transpose_B=True)
            for k in T.Pipelined(K // bk, num_stages=stages, warp_specialize=ws):
                T.copy(A[b, 0:M, k * bk:(k + 1) * bk], A_s)
                T.copy(X[b, k * bk:(k + 1) * bk, 0:N], X_s)
                T.gemm(A_s, X_s, acc)
            T.copy(acc, Out[b, 0:M, 0:N])

    return prologue_gemm_then_loop


def scaled_chunks(ws=True, nb=3, M=64, N=64, K=192, D=128, bk=64, stages=2):
    """The Mamba chunk-scan structure: before the loop, a row-scale vector read through
    shared memory into a fragment and a GEMM on two tiles; in the loop, a tile read into a
    fragment, scaled by a column vector (its own load group), masked, and multiplied (wgmma
    with A in registers) by a third tile; after the loop, a residual tile read through
    shared memory.
    out[b] = (P[b] @ Q[b]^T) * s[b][:, None]
             + sum_k mask(half(A_k * w_k)) @ X_k + R[b]
    with mask keeping column j of step k where k * bk + j <= row + M // 2."""

    @T.prim_func
    def scaled_chunks(P: T.Tensor((nb, M, D), "float16"), Q: T.Tensor((nb, N, D), "float16"),
                      s: T.Tensor((nb, M), "float16"), A: T.Tensor((nb, M, K), "float16"),
                      w: T.Tensor((nb, K), "float16"), X: T.Tensor((nb, K, N), "float16"),
                      R: T.Tensor((nb, M, N), "float16"), Out: T.Tensor((nb, M, N), "float32")):
        with T.Kernel(nb, threads=128) as b:
            s_s = T.alloc_shared((M,), "float16")
            s_f = T.alloc_fragment((M,), "float32")
            P_s = T.alloc_shared((M, D), "float16")
            Q_s = T.alloc_shared((N, D), "float16")
            A_s = T.alloc_shared((M, bk), "float16")
            A_f = T.alloc_fragment((M, bk), "float16")
            w_s = T.alloc_shared((bk,), "float16")
            w_f = T.alloc_fragment((bk,), "float32")
            X_s = T.alloc_shared((bk, N), "float16")
            R_s = T.alloc_shared((M, N), "float16")
            R_f = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(s[b, 0:M], s_s)
            T.copy(s_s, s_f)
            T.clear(acc)
            T.copy(P[b, 0:M, 0:D], P_s)
            T.copy(Q[b, 0:N, 0:D], Q_s)
            T.gemm(P_s, Q_s, acc, transpose_B=True)
            for i, j in T.Parallel(M, N):
                acc[i, j] *= s_f[i]
            for k in T.Pipelined(K // bk, num_stages=stages, warp_specialize=ws):
                T.copy(A[b, 0:M, k * bk:(k + 1) * bk], A_s)
                T.copy(A_s, A_f)
                T.copy(w[b, k * bk:(k + 1) * bk], w_s)
                T.copy(w_s, w_f)
                for i, j in T.Parallel(M, bk):
                    A_f[i, j] = A_f[i, j] * w_f[j]
                for i, j in T.Parallel(M, bk):
                    A_f[i, j] = T.if_then_else(k * bk + j <= i + M // 2, A_f[i, j], 0)
                T.copy(X[b, k * bk:(k + 1) * bk, 0:N], X_s)
                T.gemm(A_f, X_s, acc)
            T.copy(R[b, 0:M, 0:N], R_s)
            T.copy(R_s, R_f)
            for i, j in T.Parallel(M, N):
                acc[i, j] += R_f[i, j]
            T.copy(acc, Out[b, 0:M, 0:N])

    return scaled_chunks


def fragment_a_loop(ws=True, nb=3, M=64, N=64, K=256, D=128, bk=64, stages=2):
    """The smallest program of the second kind: a row-major tile copied to a wgmma A
    fragment each step, then multiplied by a second tile: out[b] = A[b] @ X[b] (``D``
    unused)."""

    @T.prim_func
    def fragment_a_loop(A: T.Tensor((nb, M, K), "float16"), X: T.Tensor((nb, K, N), "float16"),
                        Out: T.Tensor((nb, M, N), "float32")):
        with T.Kernel(nb, threads=128) as b:
            A_s = T.alloc_shared((M, bk), "float16")
            A_f = T.alloc_fragment((M, bk), "float16")
            X_s = T.alloc_shared((bk, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages, warp_specialize=ws):
                T.copy(A[b, 0:M, k * bk:(k + 1) * bk], A_s)
                T.copy(A_s, A_f)
                T.copy(X[b, k * bk:(k + 1) * bk, 0:N], X_s)
                T.gemm(A_f, X_s, acc)
            T.copy(acc, Out[b, 0:M, 0:N])

    return fragment_a_loop


def _shared(f) -> dict[str, N.Allocate]:
    return {s.buffer.name: s for s in walk_stmts(f.kernels[0].body)
            if isinstance(s, N.Allocate) and s.buffer.scope == "shared"}


def _producer_loaded(f) -> set[str]:
    return {s.dst.buffer for s in walk_stmts(f.kernels[0].body)
            if isinstance(s, N.TmaCopy) and s.barrier is not None and s.stage is not None}


@pytest.mark.parametrize("program,before", [
    (prologue_gemm_then_loop, {"P_s", "Q_s"}),
    (scaled_chunks, {"s_s", "P_s", "Q_s"}),
])
def test_prologue_buffers_do_not_share_the_producers_stages(program, before):
    f = run_passes(program(ws=True), "sm_90a")
    k = f.kernels[0]
    assert k.producer_threads == 128
    staged = _producer_loaded(f)
    assert staged and staged.isdisjoint(before)
    shares = overlapping(k)
    for b in before:  # used only before the loop, while the producer already loads
        assert not shares[b] & staged, (b, shares[b] & staged)


def test_unspecialized_prologue_shares_the_stages_as_before():
    """Without a producer, nothing loads the stages before the loop: the prologue's tiles
    keep sharing their bytes (no change in shared memory for such kernels)."""
    f = run_passes(prologue_gemm_then_loop(ws=False), "sm_90a")
    assert f.kernels[0].producer_threads == 0
    assert producer_branch(f.kernels[0]) is None
    shares = overlapping(f.kernels[0])
    assert shares["P_s"] & {"A_s", "X_s"}


def test_producer_branch_is_found_before_split_roles():
    f = run_passes(prologue_gemm_then_loop(ws=True), "sm_90a", until="assign_shared_memory")
    k = f.kernels[0]
    at = producer_branch(k)
    assert at is not None
    assert {s.dst.buffer for s in walk_stmts(k.body[at].then) if isinstance(s, N.TmaCopy)} \
        == {"A_s", "X_s"}


def _releases(f) -> dict[str, bool]:
    """The compute loop's stage releases: for each empty mbarrier it arrives on, whether a
    proxy fence runs just before the arrive."""
    (loop,) = [s for s in walk_stmts(f.kernels[0].body)
               if isinstance(s, N.For) and s.kind == "pipelined"]
    out = {}

    def visit(body):
        for i, s in enumerate(body):
            if isinstance(s, N.MBarrierArrive):
                prev = body[i - 1] if i else None
                out[s.barrier.buffer] = isinstance(prev, N.Evaluate) and \
                    isinstance(prev.value, N.Call) and prev.value.name == "fence_proxy_async"
            elif isinstance(s, N.If):
                visit(s.then)
                visit(s.orelse)
    visit(loop.body)
    return out


def _empty_of(f, buf: str) -> str:
    """The empty mbarrier of the stage ``buf``: what the producer waits on before loading it."""
    (feed,) = [s for s in walk_stmts(f.kernels[0].body)
               if isinstance(s, N.For) and s.kind == "serial"
               and any(isinstance(t, N.TmaCopy) for t in s.body)]
    waited = None
    for s in feed.body:
        if isinstance(s, N.If) and s.then and isinstance(s.then[0], N.MBarrierWait):
            waited = s.then[0].barrier.buffer
        elif isinstance(s, N.TmaCopy) and s.dst.buffer == buf:
            return waited
    raise AssertionError(buf)


@pytest.mark.parametrize("program,fenced,unfenced", [
    (fragment_a_loop, {"A_s"}, {"X_s"}),
    (scaled_chunks, {"A_s", "w_s"}, {"X_s"}),
    (prologue_gemm_then_loop, set(), {"A_s", "X_s"}),  # (one group, read by wgmma alone)
])
def test_stages_the_threads_read_are_fenced_before_release(program, fenced, unfenced):
    f = run_passes(program(ws=True), "sm_90a")
    releases = _releases(f)
    for buf in fenced:
        assert releases[_empty_of(f, buf)] is True, buf
    for buf in unfenced:
        assert releases[_empty_of(f, buf)] is False, buf


def test_unspecialized_loop_has_no_release_fence():
    f = run_passes(fragment_a_loop(ws=False), "sm_90a")
    assert f.kernels[0].producer_threads == 0
    assert not [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.MBarrierArrive)]


@pytest.mark.parametrize("program", [prologue_gemm_then_loop, scaled_chunks, fragment_a_loop])
def test_warp_specialized_builds_sm90a_cubin(tmp_path, program):
    info = tilecute.build_cubin(program(ws=True), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names
    assert "setmaxregister_decrease" in (tmp_path / "kernel_cute.py").read_text()


def _inputs(program, nb, M, N, K, D, seed):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).half().cuda()

    if program is prologue_gemm_then_loop:
        return [rnd(nb, M, D, scale=0.3), rnd(nb, N, D, scale=0.3), rnd(nb, M, K, scale=0.3),
                rnd(nb, K, N, scale=0.3)]
    if program is fragment_a_loop:
        return [rnd(nb, M, K, scale=0.3), rnd(nb, K, N, scale=0.3)]
    return [rnd(nb, M, D, scale=0.3), rnd(nb, N, D, scale=0.3),
            (torch.rand(nb, M, generator=g) + 0.5).half().cuda(), rnd(nb, M, K, scale=0.3),
            (torch.rand(nb, K, generator=g) + 0.5).half().cuda(), rnd(nb, K, N, scale=0.3),
            rnd(nb, M, N)]


def _reference(program, args, M, bk):
    import torch

    f = [a.float() for a in args]
    if program is prologue_gemm_then_loop:
        P, Q, A, X = f
        return P @ Q.transpose(1, 2) + A @ X
    if program is fragment_a_loop:
        A, X = f
        return A @ X
    P, Q, s, A, w, X, R = f
    K = A.shape[2]
    scaled = (A * w[:, None, :]).half().float()  # the fragment is float16
    row = torch.arange(M, device=A.device)[:, None]
    col = torch.arange(K, device=A.device)[None, :]
    scaled = scaled * (col <= row + M // 2)
    return (P @ Q.transpose(1, 2)) * s[:, :, None] + scaled @ X + R


@pytest.mark.gpu
@pytest.mark.parametrize("program", [prologue_gemm_then_loop, scaled_chunks, fragment_a_loop])
@pytest.mark.parametrize("ws", [True, False])
@pytest.mark.parametrize("K,stages", [(256, 2), (64, 2), (448, 3)])
def test_against_torch_on_gpu(program, ws, K, stages):
    import torch

    nb, M, N, D, bk = 3, 64, 64, 128, 64
    args = _inputs(program, nb, M, N, K, D, seed=K + stages)
    out = torch.full((nb, M, N), float("nan"), device="cuda", dtype=torch.float32)
    kernel = tilecute.compile(program(ws=ws, nb=nb, M=M, N=N, K=K, D=D, bk=bk, stages=stages))
    for _ in range(3):  # (a race shows on some runs only)
        kernel(*args, out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, _reference(program, args, M, bk), atol=2e-2, rtol=1e-2)
