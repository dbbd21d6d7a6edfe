"""T.gemm on one matrix of a shared buffer of more dims (TileLang's ``A_s[s, :, :]``):
the frontend keeps the leading indices on the Gemm (``a_index`` / ``b_index``), the
matrices of a buffer lie one after another in every shared layout (the TMA swizzle's
chunks per matrix), copies into ``A_s[s, :, :]`` and element accesses ``A_s[s, i, j]``
keep working, and the cubins build; the refusals name what is not supported."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


# ---- programs (TileLang's idioms) ------------------------------------------------------------
def batched_gemm(batch, M, N, K, bm=64, bn=64, bk=32, trans_A=False, trans_B=False,
                 threads=128, stages=2, dtype="float16"):
    """C[b] = op(A[b]) @ op(B[b]): the batch from the grid; each operand's 3-D shared tile
    holds two batches' matrices, and block bz uses matrix bz % 2."""
    A_shape = (batch, K, M) if trans_A else (batch, M, K)
    B_shape = (batch, N, K) if trans_B else (batch, K, N)
    A_tile = (2, bk, bm) if trans_A else (2, bm, bk)
    B_tile = (2, bn, bk) if trans_B else (2, bk, bn)

    @T.prim_func
    def bgemm(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype),
              C: T.Tensor((batch, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), batch, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared(A_tile, dtype)
            B_s = T.alloc_shared(B_tile, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if trans_A:
                    T.copy(A[bz, k * bk, by * bm], A_s[bz % 2, :, :])
                else:
                    T.copy(A[bz, by * bm, k * bk], A_s[bz % 2, :, :])
                if trans_B:
                    T.copy(B[bz, bx * bn, k * bk], B_s[bz % 2, :, :])
                else:
                    T.copy(B[bz, k * bk, bx * bn], B_s[bz % 2, :, :])
                T.gemm(A_s[bz % 2, :, :], B_s[bz % 2, :, :], acc, trans_A, trans_B)
            T.copy(acc, C[bz, by * bm, bx * bn])

    return bgemm


def double_buffered_gemm(M, N, K, bm=64, bn=64, bk=32, trans_A=False, trans_B=False,
                         threads=128, dtype="float16", scale_a=False):
    """A GEMM multi-buffered by hand: step k fills A_s[k % 2] / B_s[k % 2] and multiplies
    them; ``scale_a`` doubles the A tile in shared memory first (element accesses
    A_s[k % 2, i, j] under the operand's swizzle)."""
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (bk, bm) if trans_A else (bm, bk)
    B_tile = (bn, bk) if trans_B else (bk, bn)
    A_stages, B_stages = (2,) + A_tile, (2,) + B_tile

    @T.prim_func
    def dbgemm(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(A_stages, dtype)
            B_s = T.alloc_shared(B_stages, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.serial(T.ceildiv(K, bk)):
                if trans_A:
                    T.copy(A[k * bk, by * bm], A_s[k % 2, :, :])
                else:
                    T.copy(A[by * bm, k * bk], A_s[k % 2, :, :])
                if trans_B:
                    T.copy(B[bx * bn, k * bk], B_s[k % 2, :, :])
                else:
                    T.copy(B[k * bk, bx * bn], B_s[k % 2, :, :])
                if scale_a:
                    for i, j in T.Parallel(A_tile[0], A_tile[1]):
                        A_s[k % 2, i, j] = A_s[k % 2, i, j] * T.cast(2, dtype)
                T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], acc, trans_A, trans_B)
            T.copy(acc, C[by * bm, bx * bn])

    return dbgemm


def producer_consumer_gemm(M, N, K, bm=128, bn=128, bk=64, stages=2, dtype="float16"):
    """Warpgroup 1 loads step k's tiles into A_s[k % stages] / B_s[k % stages] with
    T.tma_copy; warpgroup 0 multiplies them; full / empty mbarriers per stage."""

    @T.prim_func
    def pcgemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), dtype)
            B_s = T.alloc_shared((stages, bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))  # full: 0..S-1, empty: S..2S-1
            with T.ws(0):
                T.clear(acc)
            for k in T.serial(T.ceildiv(K, bk)):
                with T.ws(1):
                    T.mbarrier_wait_parity(bars[k % stages + stages], (k // stages) % 2 ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk],
                               A_s[k % stages, :, :], barrier=bars[k % stages])
                    T.tma_copy(B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn],
                               B_s[k % stages, :, :], barrier=bars[k % stages])
                    T.mbarrier_arrive(bars[k % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(bars[k % stages], (k // stages) % 2)
                    T.gemm(A_s[k % stages, :, :], B_s[k % stages, :, :], acc)
                    T.mbarrier_arrive(bars[k % stages + stages])
            with T.ws(0):
                T.copy(acc, C[by * bm, bx * bn])

    return pcgemm


def staged_store(M, N, bm=64, bn=64):
    """Two output tiles staged in one 3-D shared buffer, each stored from its matrix."""

    @T.prim_func
    def store2(X: T.Tensor((M, N), "float16"), Y: T.Tensor((2, M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            Y_s = T.alloc_shared((2, bm, bn), "float16")
            for i, j in T.Parallel(bm, bn):
                Y_s[0, i, j] = X[by * bm + i, bx * bn + j]
                Y_s[1, i, j] = X[by * bm + i, bx * bn + j] * T.float16(3)
            T.copy(Y_s[0, :, :], Y[0, by * bm, bx * bn])
            T.copy(Y_s[1, :, :], Y[1, by * bm, bx * bn])

    return store2


def _gemms(func):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]


def _layouts(plan):
    return {s.buffer.name: s.layout for k in plan.func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate)}


# ---- the frontend and the IR -------------------------------------------------------------------
def test_gemm_keeps_the_leading_indices():
    f = double_buffered_gemm(256, 256, 256)
    (g,) = _gemms(f)
    assert (g.a, g.b) == ("A_s", "B_s")
    assert g.a_index == g.b_index == (N.binop("mod", N.Var("k"), 2),)
    assert "T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], acc" in f.script()
    assert from_json(to_json(f)) == f


def test_region_alias_of_a_matrix_is_that_matrix():
    @T.prim_func
    def alias(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
              C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((3, 64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s[bx + 1, :, :])
            T.copy(B, B_s)
            A_t = A_s[bx + 1, :, :]
            T.gemm(A_t, B_s, acc, clear_accum=True)
            T.copy(acc, C)

    (g,) = _gemms(alias)
    assert g.a == "A_s" and g.a_index == (N.binop("add", N.Var("bx"), 1),) and g.b_index == ()


@pytest.mark.parametrize("operand,why", [
    ("A_s[0, 0, :]", "T.gemm takes ranges of them, not single indices"),
    ("A_s[0, :, 0:k]", "a constant positive extent"),
    ("A_s[0:1, :, :]", "its leading dims (1) take single indices"),
    ("A_s[0, :]", "indexed in every dim"),
])
def test_part_of_a_matrix_is_refused_by_name(operand, why):
    src = f'''
@T.prim_func
def part(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
         C: T.Tensor((64, 64), "float32"), k: T.int32):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((2, 64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.gemm({operand}, B_s, acc)
'''
    with pytest.raises(FrontendError, match="A=") as e:
        T.from_script(src)
    assert why in str(e.value) and ":9" in str(e.value)


def test_region_of_c_is_refused():
    src = '''
@T.prim_func
def part(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((2, 64, 64), "float32")
        T.gemm(A_s, B_s, acc[0, :, :])
'''
    with pytest.raises(FrontendError, match="C=acc\\[0, :, :\\] is a region of 'acc'"):
        T.from_script(src)


# ---- the passes and the code ---------------------------------------------------------------------
def test_matrices_of_a_swizzled_operand_lie_one_after_another():
    plan = lower(double_buffered_gemm(256, 256, 256, bk=128, scale_a=True), "sm_90a")
    layouts = _layouts(plan)
    # A's (64, 128) float16 matrices: 256-byte rows in two 128-byte chunks, per matrix
    assert layouts["A_s"] == N.Layout("tma_swizzled", swizzle=128)
    source = emit_cute(plan)
    # the operand is the buffer's pointer plus the matrix's bytes (64 * 128 * 2)
    assert "tcm.operand(tc_smem + cute.assume(0 + (k % 2) * 16384, divby=1024)" in source
    # element A_s[k % 2, i, j]: the matrix, then chunk j // 64 of 64 rows, the row, j % 64
    assert "(k % 2) * 8192 + (j >> 6) * 4096 + (i) * 64 + (j & 63)" in source


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (False, True), (True, False),
                                             (True, True)])
def test_double_buffered_cubins(tmp_path, arch, trans_A, trans_B):
    built = tilecute.build_cubin(double_buffered_gemm(256, 256, 256, trans_A=trans_A,
                                                      trans_B=trans_B), arch, out_dir=str(tmp_path))
    assert built.kernel_names


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (True, True)])
def test_batched_cubins(tmp_path, arch, trans_A, trans_B):
    built = tilecute.build_cubin(batched_gemm(3, 128, 128, 128, trans_A=trans_A,
                                              trans_B=trans_B), arch, out_dir=str(tmp_path))
    assert built.kernel_names


def test_element_accesses_cubin(tmp_path):
    built = tilecute.build_cubin(double_buffered_gemm(256, 256, 256, bk=128, scale_a=True),
                                 "sm_90a", out_dir=str(tmp_path))
    assert built.kernel_names


def _tma(plan, buffer):
    return [s for k in plan.func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.TmaCopy) and buffer in (s.src.buffer, s.dst.buffer)]


def test_loads_into_a_matrix_are_tma_copies():
    """The batch's matrix A_s[bz % 2] is a fixed place per block: the pipelined loop's TMA
    loads fill it, multi-buffered (the whole 3-D buffer per stage)."""
    # (the threads' own pipeline: its 3 blocks would get a producer warpgroup by default)
    plan = lower(batched_gemm(3, 128, 128, 128), "sm_90a", {"disable_warp_specialize": True})
    loads = _tma(plan, "A_s")
    assert loads and all(s.dst.starts[0] == N.binop("mod", N.Var("bz"), 2) for s in loads)
    descs = {d.name: d.spec for d in plan.func.kernels[0].tma_descriptors}
    assert descs["A_desc"].box == (1, 64, 32)  # one matrix: (64, 32) of the (3, 128, 128) tensor
    source = emit_cute(plan)
    assert ("tc_smem + cute.assume(0 + ((k + 1) % 2) * 8192 + (bz % 2) * 4096, divby=1024)"
            in source)  # stage (k + 1) % 2 of the loop, matrix bz % 2 within it
    assert "into A_s[bz % 2, :, :] of A" in source


def test_a_matrix_the_step_chooses_keeps_cp_async():
    """A_s[k % 2] inside a T.Pipelined body: the loop's loads run steps ahead, into the
    matrix of their own step, which the pipelining passes do not re-index: cp.async."""
    @T.prim_func
    def hand(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((2, 64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s[k % 2, :, :])
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s[k % 2, :, :], B_s, acc)
            T.copy(acc, C[by * 64, bx * 64])

    plan = lower(hand, "sm_90a")
    assert not _tma(plan, "A_s") and _tma(plan, "B_s")
    assert any(s.async_copy for k in plan.func.kernels for s in walk_stmts(k.body)
               if isinstance(s, N.For))


def test_whole_buffer_of_swizzled_matrices_is_not_one_box():
    """Each matrix has its own chunks: a box spanning two matrices cannot fill them."""
    from tilecute.transform.analysis import tma_box

    glob = N.Buffer("A", "float16", (N.Const(2, "int32"), N.Const(64, "int32"), N.Const(128, "int32")))
    shared = N.Buffer("A_s", "float16", glob.shape, "shared")
    origin = N.Region("A", (N.Const(0, "int32"),) * 3)
    assert "holds 2 matrices" in tma_box(glob, origin, shared, 128)
    assert tma_box(glob, origin, shared, 0) == (2, 64, 128)


def test_explicit_tma_copies_into_stages(tmp_path):
    plan = lower(producer_consumer_gemm(512, 512, 512), "sm_90a")
    assert len(_tma(plan, "A_s")) == 1
    source = emit_cute(plan)
    assert "into A_s[k % 2, :, :] of A" in source
    built = tilecute.build_cubin(producer_consumer_gemm(512, 512, 512), "sm_90a",
                                 out_dir=str(tmp_path))
    assert built.kernel_names


def test_store_from_a_matrix(tmp_path):
    plan = lower(staged_store(128, 128), "sm_90a")
    stores = _tma(plan, "Y_s")
    assert [s.src.starts[0] for s in stores] == [N.Const(0, "int32"), N.Const(1, "int32")]
    assert "tct.store(Y_desc, tc_smem + 8192," in emit_cute(plan)  # matrix 1: 64 * 64 * 2 on
    built = tilecute.build_cubin(staged_store(128, 128), "sm_90a", out_dir=str(tmp_path))
    assert built.kernel_names


# ---- on a GPU ---------------------------------------------------------------------------------------
def _op(x, trans):
    return x.transpose(-1, -2) if trans else x


def test_warp_specialized_batched_cubin(tmp_path):
    """256 threads, 3 stages: a producer warpgroup issues the matrix loads (B's 128-column
    rows in two swizzle chunks per matrix)."""
    f = batched_gemm(4, 512, 512, 512, **WS)
    plan = lower(f, "sm_90a")
    assert plan.func.kernels[0].producer_threads == 128
    assert "(tc_j0 % 3) * 32768 + (bz % 2) * 16384" in emit_cute(plan)
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


WS = dict(bm=128, bn=128, bk=64, threads=256, stages=3)


@pytest.mark.gpu
@pytest.mark.parametrize("trans_A,trans_B,ws", [(False, False, False), (False, True, False),
                                                (True, False, False), (True, True, False),
                                                (False, False, True), (True, True, True)])
def test_batched_matches_torch(trans_A, trans_B, ws):
    import torch

    batch, M, N_, K = 3, 256, 256, 512
    kernel = tilecute.compile(batched_gemm(batch, M, N_, K, trans_A=trans_A, trans_B=trans_B,
                                           **(WS if ws else {})), out_idx=[-1])
    a = torch.randn((batch, K, M) if trans_A else (batch, M, K), dtype=torch.float16, device="cuda")
    b = torch.randn((batch, N_, K) if trans_B else (batch, K, N_), dtype=torch.float16, device="cuda")
    c = kernel(a, b)
    torch.testing.assert_close(c, _op(a, trans_A).float() @ _op(b, trans_B).float(),
                               atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("trans_A,trans_B,bk,scale_a", [
    (False, False, 32, False), (False, True, 32, False), (True, False, 32, False),
    (True, True, 32, False), (False, False, 128, True), (False, True, 128, True)])
def test_double_buffered_matches_torch(trans_A, trans_B, bk, scale_a):
    import torch

    M, N_, K = 256, 128, 512
    kernel = tilecute.compile(double_buffered_gemm(M, N_, K, bk=bk, trans_A=trans_A,
                                                   trans_B=trans_B, scale_a=scale_a), out_idx=[-1])
    a = torch.randn((K, M) if trans_A else (M, K), dtype=torch.float16, device="cuda")
    b = torch.randn((N_, K) if trans_B else (K, N_), dtype=torch.float16, device="cuda")
    c = kernel(a, b)
    want = (_op(a, trans_A).float() * (2 if scale_a else 1)) @ _op(b, trans_B).float()
    torch.testing.assert_close(c, want, atol=2e-2, rtol=1e-2)


@pytest.mark.gpu
def test_producer_consumer_matches_torch():
    import torch

    M, N_, K = 512, 256, 1024
    kernel = tilecute.compile(producer_consumer_gemm(M, N_, K), out_idx=[-1])
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N_, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_store_from_a_matrix_matches_torch():
    import torch

    kernel = tilecute.compile(staged_store(128, 192), out_idx=[-1])
    x = torch.randn(128, 192, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(x), torch.stack([x, x * 3]))
