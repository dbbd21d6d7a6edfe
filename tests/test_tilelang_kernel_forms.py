"""TileLang statement forms inside kernels that TileLang's examples use: a per-copy
``T.copy(..., disable_tma=True)``, explicit warp-specialized regions ``with T.ws(...)``
and the refusals of forms tilecute has no meaning for.  Each program is written in
TileLang's idioms, lowered, printed and compiled to an sm_90a cubin on the CPU; the GPU
tests check results against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower


def _stmts(func, cls):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, cls)]


# ---- T.copy(..., disable_tma=True) ------------------------------------------------------
def matmul_q_without_tma(M=256, N=256, K=256, bm=128, bn=128, bk=64, stages=2):
    """C = A @ B.T where A's tile is loaded without TMA (TileLang's flash-decoding idiom
    for a tile whose rows run past the tensor) and B's tiles with it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s, disable_tma=True)
                T.copy(B[bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn], disable_tma=True)

    return main


def test_disable_tma_round_trips():
    f = matmul_q_without_tma()
    text = print_func(f)
    assert text.count("disable_tma=True") == 2
    assert print_func(T.from_script(text)) == text
    assert from_json(to_json(f)) == f
    (a_copy, _, c_copy) = _stmts(f, N.Copy)
    assert a_copy.disable_tma and c_copy.disable_tma


def test_disable_tma_keeps_that_copy_off_tma(tmp_path):
    plan = lower(matmul_q_without_tma(), "sm_90a")
    tma = _stmts(plan.func, N.TmaCopy)
    assert {c.dst.buffer for c in tma} == {"B_s"}  # B's load only: A's load, C's store stay
    assert [p.source for p in plan.abi.kernels[0].params if p.kind == "tma_desc"] == ["B"]
    # the accumulator's copy is not staged through shared memory for a TMA store
    assert not any(s.buffer.name.startswith("acc_shared") for s in _stmts(plan.func, N.Allocate))
    # without the flag, both loads and the (staged) store use TMA
    plain = T.from_script(print_func(matmul_q_without_tma()).replace(", disable_tma=True", ""))
    assert len({c.dst.buffer for c in _stmts(lower(plain, "sm_90a").func, N.TmaCopy)}) == 3
    info = tilecute.build_cubin(matmul_q_without_tma(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_disable_tma_must_be_static():
    with pytest.raises(FrontendError, match=r"disable_tma must be True or False"):
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16"), flag: T.int32):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((64, 64), "float16")
                T.copy(A[0, 0], s, disable_tma=flag)


@pytest.mark.gpu
def test_gpu_disable_tma_matmul():
    import torch

    kernel = tilecute.compile(matmul_q_without_tma(M=384, N=256, K=320))
    a = torch.randn(384, 320, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 320, device="cuda", dtype=torch.float16)
    c = torch.empty(384, 256, device="cuda", dtype=torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-2, atol=1e-2)


# ---- a T.Parallel nest over the leading rows of a T.gemm accumulator ---------------------
def head_rows_of_gemm(M=64, N=128, K=64, rows=8, bm=64, bn=64, threads=128):
    """TileLang's GQA decode idiom: a 64-row MMA tile of which only the first ``rows``
    are this block's (``T.copy(acc_o[:valid_block_H, :], O_shared)``), plus a hand-written
    nest over the same rows."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float16"), D: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), M // rows, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, K), "float16")
            B_s = T.alloc_shared((bn, K), "float16")
            O_s = T.alloc_shared((rows, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * rows:by * rows + bm, :], A_s)
            T.copy(B[bx * bn:(bx + 1) * bn, :], B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc[:rows, :], O_s)
            T.copy(O_s, C[by * rows:(by + 1) * rows, bx * bn:(bx + 1) * bn])
            for i, j in T.Parallel(rows, bn):
                D[by * rows + i, bx * bn + j] = acc[i, j] * 2.0

    return main


def test_nest_over_head_rows_walks_the_whole_accumulator(tmp_path):
    from tilecute.transform.pipeline import run_passes

    f = run_passes(head_rows_of_gemm(), "sm_90a", until="infer_layouts")
    nests = [s for s in _stmts(f, N.For) if s.kind == "parallel" and isinstance(s.body[0], N.For)
             and any(isinstance(t, N.If) for t in s.body[0].body)]
    assert len(nests) == 2  # the copy to O_s and the hand-written nest
    for outer in nests:
        inner = outer.body[0]
        assert (outer.extent, inner.extent) == (N.Const(64, "int32"), N.Const(64, "int32"))
        (guard,) = inner.body
        assert guard.cond == N.Cmp("lt", outer.var, N.Const(8, "int32"))
    assert "if i" in print_func(f) and "< 8:" in print_func(f)
    info = tilecute.build_cubin(head_rows_of_gemm(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def _accumulator_rows_at_an_offset():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i, j in T.Parallel(8, 64):
                D[i, j] = acc[i + 8, j]
    return main


def test_nest_reading_accumulator_rows_at_an_offset_builds(tmp_path):
    """A nest reading a window of the accumulator at a constant row offset (was refused:
    'read across threads'; TileLang lays it out by the fragment, as the accumulator-window
    lowering now does: tests/test_accumulator_windows.py)."""
    assert tilecute.build_cubin(_accumulator_rows_at_an_offset(), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_nest_reading_accumulator_rows_at_an_offset_on_gpu():
    import torch

    a, b = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(2))
    d = torch.zeros(64, 64, device="cuda")
    tilecute.compile(_accumulator_rows_at_an_offset())(a, b, d)
    want = torch.zeros(64, 64, device="cuda")
    want[:8] = (a.float() @ b.float())[8:16]
    torch.testing.assert_close(d, want, atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("threads,rows", [(128, 8), (128, 16), (256, 4)])
def test_gpu_head_rows_of_gemm(threads, rows):
    import torch

    M, N, K = 64, 192, 64
    kernel = tilecute.compile(head_rows_of_gemm(M=M, N=N, K=K, rows=rows, bm=64 if threads == 128 else 128,
                                                threads=threads))
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    d = torch.empty(M, N, device="cuda", dtype=torch.float32)
    kernel(a, b, c, d)
    ref = a.float() @ b.float().T
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(d, ref * 2, rtol=1e-2, atol=1e-2)


# ---- with T.ws(...): explicit warp-specialized regions ------------------------------------
def ws_gemm_mbarriers(M=256, N=256, K=512, bm=128, bn=128, bk=64, producer=1):
    """TileLang's explicit producer/consumer GEMM: warpgroup ``producer`` issues the TMA
    loads (TileLang's T.tma_copy: the bytes expected, the 128 producer threads arrive),
    the other warpgroup waits, multiplies and releases the tiles."""
    consumer = 1 - producer

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                with T.ws(producer):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(consumer):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(done)
            with T.ws(consumer):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def ws_gemm_split_n(M=128, N=128, K=256, bm=128, bn=128, bk=64):
    """TileLang's copy_gemm_0_1 idiom: both warpgroups load A together, then each loads
    its half of B and multiplies it into its own accumulator."""
    half = bn // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B0 = T.alloc_shared((bk, half), "float16")
            B1 = T.alloc_shared((bk, half), "float16")
            C0 = T.alloc_fragment((bm, half), "float32")
            C1 = T.alloc_fragment((bm, half), "float32")
            with T.ws(1):
                T.clear(C1)
            with T.ws(0):
                T.clear(C0)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=0):
                T.copy(A[by * bm, ko * bk], A_s)
                with T.ws(1):
                    T.copy(B[ko * bk, bx * bn], B1)
                    T.gemm(A_s, B1, C1)
                with T.ws(0):
                    T.copy(B[ko * bk, bx * bn + half], B0)
                    T.gemm(A_s, B0, C0)
            with T.ws(1):
                T.copy(C1, C[by * bm, bx * bn])
            with T.ws(0):
                T.copy(C0, C[by * bm, bx * bn + half])

    return main


def test_ws_round_trips_and_maps_onto_its_warpgroups():
    f = ws_gemm_mbarriers()
    text = print_func(f)
    assert "with T.ws(1):" in text and "with T.ws(0):" in text
    assert print_func(T.from_script(text)) == text
    assert from_json(to_json(f)) == f
    (load, _) = _stmts(f, N.TmaCopy)
    assert not load.arrive  # TileLang's T.tma_copy: the threads arrive themselves
    plan = lower(f, "sm_90a")
    k = plan.func.kernels[0]
    assert k.producer_threads == 0  # no compiler-made producer in an explicit-ws kernel
    (acc,) = [a for a in _stmts(plan.func, N.Allocate) if a.buffer.name == "C_l"]
    assert (acc.layout.kind, acc.layout.threads, acc.layout.first_thread) == ("mma", 128, 0)
    assert not _stmts(plan.func, N.Barrier)  # the program's mbarriers order the regions


@pytest.mark.parametrize("producer", [0, 1])
def test_ws_producer_consumer_gemm_compiles(producer, tmp_path):
    from tilecute.codegen.cute import emit_cute

    plan = lower(ws_gemm_mbarriers(producer=producer), "sm_90a")
    (acc,) = [a for a in _stmts(plan.func, N.Allocate) if a.buffer.name == "C_l"]
    consumer = 1 - producer
    assert acc.layout.first_thread == 128 * consumer
    src = emit_cute(plan)
    region = "tc_tid >= 128" if producer else "tc_tid < 128"
    assert f"if {region}:  # T.ws({producer}): threads" in src
    assert "arrive=False" in src  # expect_tx only
    if producer:  # the producer's TMA issued by its first thread
        assert "tc_wtid" in src and "if tc_wtid" in src
    info = tilecute.build_cubin(ws_gemm_mbarriers(producer=producer), "sm_90a",
                                out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_ws_split_n_uses_region_barriers(tmp_path):
    from tilecute.codegen.cute import emit_cute

    plan = lower(ws_gemm_split_n(), "sm_90a")
    layouts = {a.buffer.name: a.layout for a in _stmts(plan.func, N.Allocate)}
    assert (layouts["C0"].first_thread, layouts["C1"].first_thread) == (0, 128)
    src = emit_cute(plan)
    # A's copy by every thread, then a block barrier; B's copy and the MMA in a region are
    # ordered by that region's named barrier over its 128 threads
    assert "number_of_threads=128" in src and "cute.arch.sync_threads()" in src
    info = tilecute.build_cubin(ws_gemm_split_n(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_ws_refusals():
    with pytest.raises(FrontendError, match=r"T.ws\(1\): the kernel's 128 threads are 1 warpgroup"):
        @T.prim_func
        def f1(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                with T.ws(1):
                    A[0] = 1.0
    with pytest.raises(FrontendError, match=r"warpgroups that are not consecutive"):
        @T.prim_func
        def f2(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=384):
                with T.ws(0, 2):
                    A[0] = 1.0
    with pytest.raises(FrontendError, match=r"T.ws regions cannot nest"):
        @T.prim_func
        def f3(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256):
                with T.ws(0):
                    with T.ws(0):
                        A[0] = 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("producer", [0, 1])
def test_gpu_ws_producer_consumer_gemm(producer):
    import torch

    kernel = tilecute.compile(ws_gemm_mbarriers(M=384, N=256, K=512, producer=producer))
    a = torch.randn(384, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(384, 256, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)


@pytest.mark.gpu
def test_gpu_ws_split_n_gemm():
    import torch

    kernel = tilecute.compile(ws_gemm_split_n(M=256, N=256, K=256))
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
