"""cp.async software pipelining (backend/transform/async_pipeline.py): a
``T.Pipelined(n, num_stages=S)`` loop whose ``T.copy`` tiles run as cp.async (sm_80, or
copies TMA cannot take) multi-buffers them and issues ``S - 1`` steps ahead, as TileLang's
pipeline does; it used to copy, wait for everything and compute with one buffer."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes

NO_TMA = {"disable_tma": True, "disable_wgmma": True, "disable_warp_specialize": True}


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def matmul(M, N, K, bm=128, bn=128, bk=32, stages=3, dtype="float16"):
    """The plain TileLang GEMM: two tile copies and a T.gemm a step."""
    @T.prim_func
    def mm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return mm


def matmul_dynamic_k(M, N, bm=64, bn=64, bk=32, stages=3):
    """C = A^T B over a K known at run time (A stored K-major, so both tiles' rows are
    whole vectors whatever K is)."""
    K = T.dynamic("K")

    @T.prim_func
    def mm(A: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"),
           C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bk, bm), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[ko * bk, by * bm], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=True)
            T.copy(acc, C[by * bm, bx * bn])
    return mm


def two_gemm_steps(S_len=512, D=64, bn=64, stages=2):
    """An attention-shaped step: K copied first, V copied between the two GEMMs; a row
    scale in between (no softmax: the order of the copies is what is tested)."""
    @T.prim_func
    def attn(Q: T.Tensor((64, D), "float16"), K: T.Tensor((S_len, D), "float16"),
             V: T.Tensor((S_len, D), "float16"), O: T.Tensor((64, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((64, D), "float16")
            K_s = T.alloc_shared((bn, D), "float16")
            V_s = T.alloc_shared((bn, D), "float16")
            s = T.alloc_fragment((64, bn), "float32")
            p = T.alloc_fragment((64, bn), "float16")
            o = T.alloc_fragment((64, D), "float32")
            T.copy(Q, Q_s)
            T.clear(o)
            for k in T.Pipelined(S_len // bn, num_stages=stages):
                T.copy(K[k * bn, 0], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(64, bn):
                    p[i, j] = s[i, j] * 0.125
                T.copy(V[k * bn, 0], V_s)
                T.gemm(p, V_s, o)
            T.copy(o, O)
    return attn


def loop_of(func, arch="sm_90a", options=None):
    lowered = run_passes(func, arch, options)
    body = lowered.kernels[0].body
    loops = [s for s in walk_stmts(body) if isinstance(s, N.For) and s.kind == "pipelined"]
    stages = {s.buffer.name: s.stages for s in walk_stmts(body) if isinstance(s, N.Allocate)}
    return lowered, loops[0], stages


def waits(stmts):
    return [s.value.args[0].value for s in walk_stmts(stmts) if isinstance(s, N.Evaluate)
            and isinstance(s.value, N.Call) and s.value.name == "ptx_wait_group"]


@pytest.mark.parametrize("arch,options", [("sm_80", None), ("sm_90a", NO_TMA)])
def test_plain_gemm_copies_are_multi_buffered(arch, options):
    lowered, loop, stages = loop_of(matmul(1024, 1024, 1024), arch, options)
    assert stages["A_s"] == stages["B_s"] == 3
    assert waits(loop.body) == [4]  # two groups a step, two steps ahead
    assert waits(lowered.kernels[0].body)[-1] == 0  # (after the loop)
    fills = [s for s in walk_stmts(lowered.kernels[0].body)
             if isinstance(s, N.For) and s.fill_stage is not None]
    assert len(fills) == 2 * 2 + 2  # the prologue's two steps and the in-loop refill
    # the refill waits at a barrier for the reads of the stage it overwrites, and the
    # GEMM at one for the other threads' copies: two a step, as TileLang's
    assert sum(isinstance(s, N.Barrier) for s in walk_stmts(loop.body)) == 2
    kernel = tilecute.compile(matmul(1024, 1024, 1024), target=arch, options=options)
    src = kernel.get_kernel_source()
    assert "cp_async_wait_group(4)" in src and "the stage this copy fills" in src
    kernel.ensure_cubin()


def test_dynamic_trip_count_guards_the_prologue():
    lowered, loop, stages = loop_of(matmul_dynamic_k(256, 256), "sm_80")
    assert stages["A_s"] == 3
    guards = [s for s in lowered.kernels[0].body if isinstance(s, N.If)]
    assert len(guards) == 2  # steps 0 and 1 each only when the loop has them
    assert all(len(g.orelse) == 2 for g in guards)  # else: two empty groups
    tilecute.compile(matmul_dynamic_k(256, 256), target="sm_80").ensure_cubin()


def test_stages_that_do_not_fit_shared_memory_are_cut():
    # 128x256 tiles with 64-wide K steps: 48 KiB a stage; sm_80 blocks have 163 KiB
    _, loop, stages = loop_of(matmul(1024, 1024, 1024, bn=256, bk=64, stages=4), "sm_80")
    assert stages["A_s"] == stages["B_s"] == loop.num_stages == 3


def test_a_copy_between_the_gemms_is_issued_with_the_first():
    lowered, loop, stages = loop_of(two_gemm_steps(), "sm_90a", NO_TMA)
    assert stages["K_s"] == stages["V_s"] == 2 and stages["Q_s"] == 1
    first = loop.body[0]
    assert isinstance(first, N.If) and {b for s in first.then if isinstance(s, N.For)
                                       for b in _written(s)} == {"K_s", "V_s"}
    assert waits(loop.body) == [2]
    tilecute.compile(two_gemm_steps(), options=NO_TMA).ensure_cubin()


def _written(nest):
    from tilecute.transform.analysis import accesses
    return {b for b, _, w in accesses([nest]) if w}


def test_loops_whose_copies_cannot_run_ahead_keep_one_buffer():
    @T.prim_func
    def reads_after(A: T.Tensor((1024, 64), "float16"), O: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(16, num_stages=3):
                T.copy(A[k * 64, 0], A_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += A_s[i, j]
            T.copy(A_s, O)  # the last tile, read after the loop: one buffer

    @T.prim_func
    def index_from_body(A: T.Tensor((1024, 64), "float16"), Idx: T.Tensor((16,), "int32"),
                        O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_var("int32")
            T.clear(acc)
            for k in T.Pipelined(16, num_stages=3):
                r = Idx[k]
                T.copy(A[r * 64, 0], A_s)  # its row comes from the step's own work
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += A_s[i, j]
            T.copy(acc, O)

    for func in (reads_after, index_from_body):
        _, loop, stages = loop_of(func, "sm_80")
        assert stages["A_s"] == 1 and not waits(loop.body), func.name
        tilecute.compile(func, target="sm_80").ensure_cubin()


# ---- GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("K", [32, 64, 96, 1000, 1024])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_cp_async_gemm_on_gpu(K, stages):
    import torch
    torch.manual_seed(K + stages)
    M, N = 256, 192
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    C = torch.empty(M, N, device="cuda", dtype=torch.float16)
    tilecute.compile(matmul(M, N, K, bm=64, bn=64, stages=stages), options=NO_TMA)(A, B, C)
    torch.testing.assert_close(C.float(), A.float() @ B.float(), atol=0.1, rtol=1e-2)


@pytest.mark.gpu
def test_dynamic_trip_count_on_gpu():
    import torch
    kernel = tilecute.compile(matmul_dynamic_k(128, 128), options=NO_TMA)
    for K in (16, 32, 48, 200, 512):  # one step, two steps, ...: fewer than the prologue
        A = torch.randn(K, 128, device="cuda", dtype=torch.float16)
        B = torch.randn(K, 128, device="cuda", dtype=torch.float16)
        C = torch.empty(128, 128, device="cuda")
        kernel(A, B, C)
        torch.testing.assert_close(C, A.float().T @ B.float(), atol=2e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [2, 3])
def test_copy_between_gemms_on_gpu(stages):
    import torch
    torch.manual_seed(stages)
    Q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    K = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    V = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    O = torch.empty(64, 64, device="cuda")
    tilecute.compile(two_gemm_steps(stages=stages), options=NO_TMA)(Q, K, V, O)
    want = torch.zeros(64, 64, device="cuda")
    for k in range(8):
        s = Q.float() @ K[k * 64:(k + 1) * 64].float().T
        want += (s * 0.125).half().float() @ V[k * 64:(k + 1) * 64].float()
    torch.testing.assert_close(O, want, atol=0.1, rtol=1e-2)
