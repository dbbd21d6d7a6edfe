"""T.gemm operands in fragments, as TileLang's kernel tests write them (its gemm_rs with a
transposed A fragment, its gemm_sr with B in a fragment): an operand no MMA reads from
registers is staged through shared memory (a copy into a shared tile of the fragment's
shape just before the T.gemm, which then reads that tile), while a K-major 16-bit A
fragment keeps the register-A MMAs (wgmma's RS form, mma.sync).  CPU: the IR the gemm pass
writes, cubins for sm_90a and sm_80; GPU (pytest -m gpu): results against torch."""

import os

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower, run_passes


def frag_gemm(M, N, K, block_M, block_N, block_K, trans_A, trans_B, dtype, accum,
              which="A", num_stages=0, threads=128):
    """C = op(A) @ op(B) tile by tile with one operand loaded shared -> fragment each step
    and T.gemm reading the fragment (``which``: "A" or "B")."""
    a_shape, b_shape = ((K, M) if trans_A else (M, K)), ((N, K) if trans_B else (K, N))
    a_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    b_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def fgemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
              C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            X_f = T.alloc_fragment(a_tile if which == "A" else b_tile, dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[ko * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, ko * block_K], B_s)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                if which == "A":
                    T.copy(A_s, X_f)
                    T.gemm(X_f, B_s, C_f, trans_A, trans_B)
                else:
                    T.copy(B_s, X_f)
                    T.gemm(A_s, X_f, C_f, trans_A, trans_B)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return fgemm


# (args of frag_gemm): TileLang's rs (A fragment, transpose_A) and sr (B fragment) cases, and
# fragments of dtypes no MMA reads from registers
CASES = {
    "rs_f16_tn": (512, 1024, 768, 128, 128, 32, True, False, "float16", "float16", "A"),
    "sr_f16_nt": (512, 1024, 768, 128, 128, 32, False, True, "float16", "float16", "B"),
    "sr_f16_nn_stages": (256, 256, 256, 64, 64, 32, False, False, "float16", "float32", "B", 2),
    "rs_f64_nt": (128, 128, 64, 64, 32, 16, False, True, "float64", "float64", "A"),
    "rs_tf32_nt": (256, 256, 128, 64, 64, 32, False, True, "tfloat32", "float32", "A"),
    # TileLang's w4a8 dequant GEMM shape: an int8 A fragment, a 32 x 32 tile wgmma cannot
    # take with 128 threads: int8 mma.sync (m16n8k32), as TileLang, A staged in shared
    "rs_i8_small_nt": (128, 128, 128, 32, 32, 32, False, True, "int8", "int32", "A"),
}


def _stmts(plan_or_func, kind):
    func = getattr(plan_or_func, "func", plan_or_func)
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, kind)]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_staged_through_shared(case, arch):
    """The gemm pass allocates X_f_shared (the fragment's shape and dtype), copies X_f into
    it right before the T.gemm, and the T.gemm reads it."""
    func = run_passes(frag_gemm(*CASES[case]), arch, until="select_mma")
    (g,) = _stmts(func, N.Gemm)
    which = CASES[case][10]
    assert (g.a if which == "A" else g.b) == "X_f_shared"
    allocs = {s.buffer.name: s for s in _stmts(func, N.Allocate)}
    staged, frag = allocs["X_f_shared"].buffer, allocs["X_f"].buffer
    assert (staged.scope, staged.dtype, staged.shape) == ("shared", frag.dtype, frag.shape)
    (body,) = [s.body for s in _stmts(func, N.For)]
    i = body.index(g)
    assert body[i - 1] == N.Copy(N.Region("X_f", (N.as_expr(0),) * 2),
                                 N.Region("X_f_shared", (N.as_expr(0),) * 2), loc=g.loc)
    # the rest of the pipeline puts a barrier between the copy and the MMA reading it
    lowered = lower(frag_gemm(*CASES[case]), arch).func
    (body,) = [s.body for s in _stmts(lowered, N.For) if any(isinstance(x, N.Gemm) for x in s.body)]
    i = next(i for i, s in enumerate(body) if isinstance(s, N.Gemm))
    assert isinstance(body[i - 1], N.Barrier)


def test_int8_wgmma_cannot_tile_goes_mma_sync():
    plan = lower(frag_gemm(*CASES["rs_i8_small_nt"]), "sm_90a")
    (g,) = _stmts(plan, N.Gemm)
    assert g.family == "mma" and g.a == "X_f_shared"
    # a tile wgmma takes keeps wgmma (B shared; A staged: int8 A stays off registers)
    plan = lower(frag_gemm(128, 128, 128, 64, 64, 64, False, True, "int8", "int32"), "sm_90a")
    (g,) = _stmts(plan, N.Gemm)
    assert g.family == "wgmma" and g.a == "X_f_shared"


@pytest.mark.parametrize("arch,family", [("sm_90a", "wgmma"), ("sm_80", "mma")])
def test_k_major_16bit_a_fragment_stays_in_registers(arch, family):
    """The fast path is untouched: a K-major float16 A fragment is read from registers."""
    plan = lower(frag_gemm(256, 256, 128, 128, 128, 32, False, True, "float16", "float32"), arch)
    (g,) = _stmts(plan, N.Gemm)
    assert g.a == "X_f" and g.family == family
    allocs = {s.buffer.name: s for s in _stmts(plan, N.Allocate)}
    assert "X_f_shared" not in allocs and allocs["X_f"].layout.operand == "A"


BUILDS = [(c, a) for c in sorted(CASES) for a in ("sm_90a", "sm_80")]


@pytest.mark.parametrize("case,arch", BUILDS)
def test_cubins(tmp_path, case, arch):
    os.environ["CUTE_DSL_ARCH"] = arch
    info = tilecute.build_cubin(frag_gemm(*CASES[case]), arch, out_dir=str(tmp_path))
    assert os.path.getsize(info.path) > 0


# ---- GPU ---------------------------------------------------------------------------------
def _run(case, options=None):
    import torch
    M, N, K, _, _, _, ta, tb, dtype, accum = CASES[case][:10]
    torch.manual_seed(0)
    tdtype = getattr(torch, {"tfloat32": "float32"}.get(dtype, dtype))
    kernel = tilecute.compile(frag_gemm(*CASES[case]), options=options)
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, K), dtype=torch.int8)
        b = torch.randint(-8, 8, (K, N), dtype=torch.int8)
    else:
        a = torch.randn(M, K, dtype=torch.float64).to(tdtype)
        b = torch.randn(K, N, dtype=torch.float64).to(tdtype)
    ref = a.double() @ b.double()
    c = torch.zeros(M, N, dtype=getattr(torch, accum), device="cuda")
    kernel((a.t() if ta else a).contiguous().cuda(), (b.t() if tb else b).contiguous().cuda(), c)
    if dtype == "int8":
        assert torch.equal(c.cpu().long(), ref.long()), f"{case}: int results differ"
        return
    tol = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-10}[accum]
    if dtype == "tfloat32":
        tol = 2e-3  # tf32 tensor cores
    err = (c.cpu().double() - ref).abs().max().item()
    assert err <= tol * ref.abs().max().item() + tol, f"{case}: max err {err}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("wgmma", [True, False])
def test_gpu_against_torch(case, wgmma):
    """On the GPU at hand; wgmma=False runs the sm_80 paths (mma.sync) on Hopper."""
    _run(case, None if wgmma else {"disable_wgmma": True})


def test_staging_tile_of_a_nested_fragment_is_allocated_at_the_top_level(tmp_path):
    """A fragment operand allocated inside a loop (TileLang allows it) is staged through a
    shared tile allocated at the kernel's top level, where shared memory is laid out."""
    import tilecute
    import tilecute.language as T
    from tilecute.ir import nodes as N
    from tilecute.transform.pipeline import lower

    @T.prim_func
    def nested(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"),
               C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.clear(acc)
            for k in T.serial(2):
                b = T.alloc_fragment((64, 64), "float32")
                T.copy(B, b)
                T.gemm(A_s, b, acc)
            T.copy(acc, C)

    plan = lower(nested, "sm_90a")
    top = [s.buffer.name for s in plan.func.kernels[0].body if isinstance(s, N.Allocate)]
    assert "b_shared" in top
    assert tilecute.build_cubin(nested, "sm_90a", out_dir=str(tmp_path)).kernel_names
