"""Forms from TileLang's programming guides (language basics, control flow, instructions,
software pipelines), written the way the guides show them: ``T.dyn['K']`` and shapes
read at the top of a prim_func, ``T.all_of`` / ``T.any_of`` over conditions,
``T.unroll(..., unroll_factor=)``, ``T.tvm_storage_sync``, typed locals as Binds in a
manually staged pipeline (and the legacy stage lists that count them), and a pipelined
load whose origin a local variable holds (never prefetched with another step's value)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def scale_rows():
    """Shapes as the language guide reads them: ``T.dyn`` symbols, read back at the top of
    the body (``rows, cols = X.shape``) and a grid size computed there."""
    R, C = T.dyn['R'], T.dyn['C', 'int32']

    @T.prim_func
    def scale(X: T.Tensor((R, C), T.float32), Y: T.Tensor((R, C), T.float32)):
        rows, cols = X.shape
        blocks = T.ceildiv(rows, 4)
        with T.Kernel(blocks, threads=128) as bx:
            for i, j in T.Parallel(4, 32):
                for c in T.serial(T.ceildiv(cols, 32)):
                    r, k = bx * 4 + i, c * 32 + j
                    if T.all_of(r < rows, k < cols):
                        Y[r, k] = X[r, k] * 2.0
                    if T.any_of(r >= rows, k >= cols, False):
                        pass
    return scale


def test_dyn_symbols_and_top_level_shapes_build(tmp_path):
    func = scale_rows()
    assert [v.name for v in func.symbols] == ["R", "C"]
    kernel = func.kernels[0]
    assert "ceildiv(R, 4)" in func.script()  # the grid is the expression itself
    assert kernel is not None
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_top_level_reads_of_tensor_values_are_refused():
    with pytest.raises(FrontendError, match="at the top level"):
        @T.prim_func
        def bad(X: T.Tensor((8,), T.int32), Y: T.Tensor((8,), T.int32)):
            n = X[0]
            with T.Kernel(1, threads=32) as _:
                Y[0] = n


def test_all_of_with_a_buffer_among_conditions_is_refused():
    with pytest.raises(FrontendError, match=r"T.all_of: argument 2 \(`s`\) is not a condition"):
        @T.prim_func
        def bad(X: T.Tensor((8,), T.int32)):
            with T.Kernel(1, threads=32) as bx:
                s = T.alloc_shared((8,), T.int32)
                if T.all_of(bx < 1, s):
                    X[0] = 1


def unrolled_sums(factor_form):
    @T.prim_func
    def sums(X: T.Tensor((128, 64), T.float32), Y: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, 0.0)
            if factor_form == "argument":
                for k in T.unroll(64, unroll_factor=4):
                    acc += X[tx, k]
            else:
                for k in T.unroll(0, 64, annotations={"pragma_unroll_factor": 8}):
                    acc += X[tx, k]
            Y[tx] = acc
    return sums


@pytest.mark.parametrize("form,factor", [("argument", 4), ("annotations", 8)])
def test_unroll_factor_is_a_partial_unroll(form, factor):
    func = unrolled_sums(form)
    loops = [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.For)]
    assert [(s.kind, s.unroll_factor) for s in loops] == [("unrolled", factor)]
    assert f"unroll_factor={factor}" in func.script()
    src = tilecute.compile(func).get_kernel_source()
    assert f"cutlass.range(0, 64, unroll={factor})" in src


def reversed_tiles():
    @T.prim_func
    def rev(A: T.Tensor((256, 64), T.float16), B: T.Tensor((256, 64), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((128, 64), T.float16)
            T.async_copy(A[bx * 128, 0], s)
            T.ptx_wait_group(0)
            T.tvm_storage_sync("shared")
            for i, j in T.Parallel(128, 64):
                B[bx * 128 + i, j] = s[127 - i, j]
            T.evaluate(T.tvm_storage_sync("warp"))
    return rev


def test_tvm_storage_sync_is_the_barrier_it_names(tmp_path):
    func = reversed_tiles()
    body = list(walk_stmts(func.kernels[0].body))
    assert any(isinstance(s, N.Barrier) for s in body)
    assert not any(isinstance(s, N.WarpSync) for s in body)  # ("warp": none, as TileLang)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_tvm_storage_sync_of_another_scope_is_refused():
    with pytest.raises(FrontendError, match="storage_scope='global'"):
        @T.prim_func
        def bad(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=32) as _:
                T.tvm_storage_sync("global")


M = N_ = K = 256
BM = BN = 128
BK = 32


def staged_gemm(form):
    """The guide's manually staged GEMM with a typed local (a Bind) in the body: the stage
    lists name the copies and the GEMM (``form="binds"``), or also the Bind (TileLang's
    legacy form, ``form="legacy"``)."""
    stage, order = ([0, 0, 1], [0, 1, 2]) if form == "binds" else ([0, 0, 0, 1], [0, 1, 2, 3])

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N_), T.float16),
             C: T.Tensor((M, N_), T.float16)):
        with T.Kernel(N_ // BN, M // BM, threads=128) as (bx, by):
            A_s = T.alloc_shared((BM, BK), T.float16)
            B_s = T.alloc_shared((BK, BN), T.float16)
            C_f = T.alloc_fragment((BM, BN), T.float32)
            T.clear(C_f)
            for ko in T.Pipelined(K // BK, stage=stage, order=order):
                base: T.int32 = ko * BK
                T.copy(A[by * BM, base], A_s)
                T.copy(B[base, bx * BN], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * BM, bx * BN])
    return gemm


@pytest.mark.parametrize("form", ["binds", "legacy"])
def test_typed_local_in_a_staged_pipeline_is_a_bind(form, tmp_path):
    func = staged_gemm(form)
    loop = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.For))
    assert loop.kind == "pipelined" and loop.num_stages == 2
    assert isinstance(loop.body[0], N.Let) and loop.body[0].var.dtype == "int32"
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def gather_rows():
    """A pipelined load whose row a local variable holds, assigned in the body: each step's
    load must use that step's row, so the load is not issued steps ahead."""
    @T.prim_func
    def gather(A: T.Tensor((1024, 64), T.float32), Ids: T.Tensor((8,), T.int32),
               B: T.Tensor((8, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            row_s = T.alloc_shared((64,), T.float32)
            for k in T.Pipelined(8, num_stages=2):
                idx = T.alloc_var(T.int32)
                idx = Ids[k]
                T.copy(A[idx, 0:64], row_s)
                for j in T.Parallel(64):
                    B[k, j] = row_s[j]
    return gather


def test_load_from_a_local_index_is_not_prefetched(tmp_path):
    lowered = run_passes(gather_rows(), "sm_90a")
    tma = [s for s in walk_stmts(lowered.kernels[0].body) if isinstance(s, N.TmaCopy)]
    assert tma == []  # (it was issued a step ahead with the previous step's index)
    assert tilecute.build_cubin(gather_rows(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_guide_forms_on_gpu():
    import torch

    x = torch.randn(37, 70, device="cuda")
    y = torch.zeros_like(x)
    tilecute.compile(scale_rows())(x, y)
    torch.testing.assert_close(y, x * 2)

    for form in ("argument", "annotations"):
        xs = torch.randn(128, 64, device="cuda")
        ys = torch.empty(128, device="cuda")
        tilecute.compile(unrolled_sums(form))(xs, ys)
        torch.testing.assert_close(ys, xs.sum(1), rtol=1e-5, atol=1e-4)

    a = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    tilecute.compile(reversed_tiles())(a, b)
    assert torch.equal(b, torch.cat([a[:128].flip(0), a[128:].flip(0)]))

    for form in ("binds", "legacy"):
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        B = torch.randn(K, N_, device="cuda", dtype=torch.float16)
        C = torch.empty(M, N_, device="cuda", dtype=torch.float16)
        tilecute.compile(staged_gemm(form))(A, B, C)
        torch.testing.assert_close(C.float(), A.float() @ B.float(), rtol=1e-2, atol=1e-1)

    src = torch.randn(1024, 64, device="cuda")
    ids = torch.tensor([5, 900, 3, 3, 1023, 0, 77, 512], dtype=torch.int32, device="cuda")
    out = torch.empty(8, 64, device="cuda")
    tilecute.compile(gather_rows())(src, ids, out)
    assert torch.equal(out, src[ids.long()])
