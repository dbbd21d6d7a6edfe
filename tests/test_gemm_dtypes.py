"""T.gemm beyond float32 accumulators, as TileLang's kernel tests run it: float16
accumulators (wgmma on sm_90a, mma.sync on sm_80), int8 x int8 -> int32 (wgmma, K-major),
and the SIMT fallback on CUDA cores for what no tensor-core MMA serves (float64, float32
or int8 MN-major, int8 on sm_80, ...).  CPU: the family the gemm pass picks, the IR and
source that show it, cubins for sm_90a and sm_80; GPU (pytest -m gpu): results against
torch."""

import os

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import GemmError


def tiled_gemm(M, N, K, block_M, block_N, block_K, trans_A, trans_B, in_dtype, out_dtype,
               accum_dtype, num_stages=2, threads=128):
    """C = A @ B tile by tile, TileLang's way: operands staged through shared memory by a
    pipelined loop, C accumulated in a fragment and copied out (ragged edges guarded)."""
    a_shape, b_shape = ((K, M) if trans_A else (M, K)), ((N, K) if trans_B else (K, N))
    a_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    b_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, in_dtype)
            B_s = T.alloc_shared(b_tile, in_dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum_dtype)
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
                T.gemm(A_s, B_s, C_f, trans_A, trans_B)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return gemm


def gemm_row_max(M, N, K, block_M, in_dtype, accum_dtype, threads=128):
    """Per block of rows, S = A @ B^T (the whole N x K of B in one T.gemm with clear_accum
    over a T.fill), then S minus its row maxima (a reduction and a T.Parallel loop reading
    the row fragment), written out with the maxima."""
    @T.prim_func
    def rowmax(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype),
               C: T.Tensor((M, N), accum_dtype), R: T.Tensor((M,), accum_dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            A_s = T.alloc_shared((block_M, K), in_dtype)
            B_s = T.alloc_shared((N, K), in_dtype)
            C_f = T.alloc_fragment((block_M, N), accum_dtype)
            m = T.alloc_fragment((block_M,), accum_dtype)
            T.fill(C_f, 1)
            T.copy(A[bx * block_M, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=True, clear_accum=True)
            T.reduce_max(C_f, m, dim=1)
            for i, j in T.Parallel(block_M, N):
                C_f[i, j] = C_f[i, j] - m[i]
            T.copy(C_f, C[bx * block_M, 0])
            T.copy(m, R[bx * block_M])
    return rowmax


# (M, N, K, block_M, block_N, block_K, trans_A, trans_B, in, out, accum): TileLang's cases
CASES = {
    "f16f16f16_nn": (512, 1024, 768, 128, 256, 32, False, False, "float16", "float16", "float16"),
    "f16f16f16_tn": (512, 1024, 768, 128, 128, 32, True, False, "float16", "float16", "float16"),
    "f16f16f16_nt": (512, 1024, 768, 128, 128, 32, False, True, "float16", "float16", "float16"),
    "f16f16f16_pad": (512 - 9, 1024 - 7, 768 - 5, 128, 256, 32, False, False, "float16",
                      "float16", "float16"),
    "i8i8i32_nt": (512, 1024, 768, 128, 128, 64, False, True, "int8", "int32", "int32"),
    "i8i8i32_tn": (512, 1024, 768, 128, 128, 64, True, False, "int8", "int32", "int32"),
    "u8u8i32_nt": (256, 256, 256, 128, 128, 64, False, True, "uint8", "int32", "int32"),
    "f64f64f64_nt": (512, 512, 512, 64, 32, 16, False, True, "float64", "float64", "float64"),
    "f32f32f32_nn": (512, 1024, 768, 64, 128, 32, False, False, "float32", "float32", "float32"),
    "f32f32f32_tn": (512, 1024, 768, 64, 128, 32, True, False, "float32", "float32", "float32"),
    "f32f32f32_nt": (512, 1024, 768, 64, 128, 32, False, True, "float32", "float32", "float32"),
    # TileLang's T.tfloat32 operands: float32 tensors, multiplied as tf32 by the tensor cores
    "tf32tf32f32_nn": (512, 1024, 768, 64, 128, 32, False, False, "tfloat32", "float32",
                       "float32"),
    "tf32tf32f32_tn": (512, 1024, 768, 64, 128, 32, True, False, "tfloat32", "float32",
                       "float32"),
    "tf32tf32f32_nt": (512, 1024, 768, 64, 128, 32, False, True, "tfloat32", "float32",
                       "float32"),
    "f16f16f32_pad": (512 + 19, 1024 + 17, 768 + 15, 128, 64, 32, False, False, "float16",
                      "float16", "float32"),
    "e4m3e4m3f16_nt": (256, 256, 256, 128, 128, 64, False, True, "float8_e4m3", "float16",
                       "float16"),
    "e4m3e4m3f32_nn": (256, 256, 256, 128, 128, 64, False, False, "float8_e4m3", "float16",
                       "float32"),
}
# the family each case gets: sm_90a, sm_80
FAMILY = {
    "f16f16f16_nn": ("wgmma", "mma"), "f16f16f16_tn": ("wgmma", "mma"),
    "f16f16f16_nt": ("wgmma", "mma"), "f16f16f16_pad": ("wgmma", "mma"),
    "i8i8i32_nt": ("wgmma", "mma"), "i8i8i32_tn": ("simt", "simt"),
    "u8u8i32_nt": ("wgmma", "mma"), "f64f64f64_nt": ("simt", "simt"),
    "f32f32f32_nn": ("simt", "simt"), "f32f32f32_tn": ("simt", "simt"),
    "f32f32f32_nt": ("mma", "mma"), "f16f16f32_pad": ("wgmma", "mma"),
    "tf32tf32f32_nn": ("simt", "simt"), "tf32tf32f32_tn": ("simt", "simt"),
    "tf32tf32f32_nt": ("mma", "mma"),
    "e4m3e4m3f16_nt": ("wgmma", "simt"), "e4m3e4m3f32_nn": ("simt", "simt"),
}
TORCH_DTYPE = {"float8_e4m3": "float8_e4m3fn", "tfloat32": "float32"}


def _gemm(plan) -> N.Gemm:
    (g,) = [s for s in walk_stmts(plan.func.kernels[0].body) if isinstance(s, N.Gemm)]
    return g


def _layout(plan, name):
    (a,) = [s for s in walk_stmts(plan.func.kernels[0].body)
            if isinstance(s, N.Allocate) and s.buffer.name == name]
    return a.layout


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_family_and_what_shows_it(case, arch):
    plan = lower(tiled_gemm(*CASES[case]), arch)
    family = FAMILY[case][arch == "sm_80"]
    g = _gemm(plan)
    assert g.family == family
    assert (f"family='simt'" in plan.func.script()) == (family == "simt")
    if CASES[case][8].startswith("float8") and arch == "sm_80":
        # no float8 conversion below sm_89 (CuTe DSL's cvt; libNVVM's "unsupported operation")
        with pytest.raises(Exception, match="T.gemm on float8_e4m3 operands: float8 values "
                                            r"convert only on sm_89\+"):
            emit_cute(plan)
        return
    src = emit_cute(plan)
    acc = CASES[case][-1]
    layout = _layout(plan, "C_f")
    if family == "simt":
        # C is an ordinary fragment (the layout pass's), the operands row-major
        assert layout.kind == "blocked"
        assert _layout(plan, "A_s") == N.Layout("row_major") == _layout(plan, "B_s")
        assert "tcm.gemm_simt(C_f, tcm.simt_operand(" in src
        assert f"on CUDA cores (SIMT: no tensor-core MMA for {CASES[case][8]}" in src
        assert "tcm.tiled_mma(" not in src
    else:
        assert layout.kind == "mma" and layout.mma == family
        cute_acc = {"float16": "Float16", "float32": "Float32", "int32": "Int32"}[acc]
        assert f"cutlass.{cute_acc}, {CASES[case][6]}, {not CASES[case][7]}, " in src
        assert "tcm.gemm_simt" not in src


def test_accumulator_dtypes_tensor_cores_refuse_go_simt():
    """bfloat16 tensor-core MMAs accumulate in float32 only; float16 accumulators of
    bfloat16 operands (and float8 on sm_80) take the SIMT path; int8 with wgmma disabled
    runs on mma.sync (m16n8k32)."""
    plan = lower(tiled_gemm(256, 256, 256, 64, 64, 32, False, False, "bfloat16", "bfloat16",
                            "float16"), "sm_90a")
    assert _gemm(plan).family == "simt"
    plan = lower(tiled_gemm(*CASES["i8i8i32_nt"]), "sm_90a", {"disable_wgmma": True})
    assert _gemm(plan).family == "mma" and _layout(plan, "C_f").mma == "mma"
    plan = lower(tiled_gemm(256, 256, 256, 128, 128, 64, False, True, "float8_e4m3", "float16",
                            "float16"), "sm_90a")
    assert _gemm(plan).family == "wgmma" and _layout(plan, "C_f").mma == "wgmma"


def _build(func, arch, tmp_path):
    os.environ["CUTE_DSL_ARCH"] = arch
    info = tilecute.build_cubin(func, arch, out_dir=str(tmp_path))
    assert os.path.getsize(info.path) > 0
    return info


BUILDS = [(c, "sm_90a") for c in sorted(CASES)] + [
    (c, "sm_80") for c in ("f16f16f16_nn", "f16f16f16_tn", "i8i8i32_nt", "f64f64f64_nt",
                           "f32f32f32_tn", "tf32tf32f32_nt", "tf32tf32f32_nn")]


@pytest.mark.parametrize("case,arch", BUILDS)
def test_cubins(tmp_path, case, arch):
    _build(tiled_gemm(*CASES[case]), arch, tmp_path)


@pytest.mark.parametrize("in_dtype,accum,arch,family", [
    ("float16", "float16", "sm_90a", "wgmma"), ("float16", "float16", "sm_80", "mma"),
    ("int8", "int32", "sm_90a", "wgmma"), ("int8", "int32", "sm_80", "mma"),
    ("float64", "float64", "sm_90a", "simt"),
])
def test_reductions_and_fills_over_new_accumulators(tmp_path, in_dtype, accum, arch, family):
    """T.fill, clear_accum, a row reduction and a T.Parallel loop reading its rows over
    float16 / int32 accumulators and a SIMT one compile."""
    func = gemm_row_max(256, 64, 64, 64, in_dtype, accum)
    plan = lower(func, arch)
    assert _gemm(plan).family == family
    src = emit_cute(plan)
    if family == "simt":
        assert "accumulate=False" in src and "tcm.gemm_simt(" in src
    _build(func, arch, tmp_path)


def mixed_families():
    """A float16 wgmma accumulator and a SIMT float32 one (MN-major B) summed in one
    T.Parallel loop: the SIMT accumulator takes the wgmma register layout."""
    @T.prim_func
    def mixed(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
              X: T.Tensor((64, 32), "float32"), Y: T.Tensor((32, 64), "float32"),
              C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            x = T.alloc_shared((64, 32), "float32")
            y = T.alloc_shared((32, 64), "float32")
            c1 = T.alloc_fragment((64, 64), "float32")
            c2 = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(X, x)
            T.copy(Y, y)
            T.gemm(a, b, c1, clear_accum=True)
            T.gemm(x, y, c2, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                c1[i, j] = c1[i, j] + c2[i, j]
            T.copy(c1, C)
    return mixed


def shared_operands():
    """bfloat16 operands read by a wgmma T.gemm (float32 C) and a SIMT one (bfloat16 C, which
    no tensor-core MMA accumulates in): the SIMT one reads the wgmma's swizzled tiles."""
    @T.prim_func
    def both(A: T.Tensor((64, 32), "bfloat16"), B: T.Tensor((32, 64), "bfloat16"),
             C: T.Tensor((64, 64), "float32"), D: T.Tensor((64, 64), "bfloat16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), "bfloat16")
            b = T.alloc_shared((32, 64), "bfloat16")
            c1 = T.alloc_fragment((64, 64), "float32")
            c2 = T.alloc_fragment((64, 64), "bfloat16")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c2, clear_accum=True)
            T.gemm(a, b, c1, clear_accum=True)
            T.copy(c1, C)
            T.copy(c2, D)
    return both


def test_simt_reads_a_tensor_core_operand_swizzle(tmp_path):
    plan = lower(shared_operands(), "sm_90a")
    assert _layout(plan, "a").kind == "tma_swizzled" and _layout(plan, "c2").kind == "blocked"
    assert "tcm.gemm_simt(c2, tcm.operand(" in emit_cute(plan)
    _build(shared_operands(), "sm_90a", tmp_path)


def simt_shapes(m, n, k, dtype="float64", replicated=False):
    """One SIMT T.gemm of an (m, n) tile: with ``replicated``, C is also read at row 0 in
    every row (every thread then holds all of C)."""
    @T.prim_func
    def simt(A: T.Tensor((m, k), dtype), B: T.Tensor((k, n), dtype), C: T.Tensor((m, n), dtype)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((m, k), dtype)
            b = T.alloc_shared((k, n), dtype)
            c = T.alloc_fragment((m, n), dtype)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            if replicated:
                for i, j in T.Parallel(m, n):
                    C[i, j] = c[i, j] + c[0, j]
            else:
                T.copy(c, C)
    return simt


SIMT_SHAPES = [((64, 96, 16), False, "blocked"),  # rows of 96 on 256-element steps: per register
               ((16, 16, 16), True, "replicated"),  # all of C unrolled
               ((32, 32, 16), True, "replicated")]  # all of C, a loop over its rows


@pytest.mark.parametrize("shape,replicated,kind", SIMT_SHAPES)
def test_simt_layouts(tmp_path, shape, replicated, kind):
    func = simt_shapes(*shape, replicated=replicated)
    plan = lower(func, "sm_90a")
    assert _gemm(plan).family == "simt" and _layout(plan, "c").kind == kind
    _build(func, "sm_90a", tmp_path)


def test_simt_accumulator_in_a_tensor_core_layout(tmp_path):
    plan = lower(mixed_families(), "sm_90a")
    assert _layout(plan, "c2") == _layout(plan, "c1") and _layout(plan, "c1").mma == "wgmma"
    src = emit_cute(plan)
    assert "tcm.gemm_simt_at(c2, " in src and "tc_c2_ij, accumulate=False)" in src
    _build(mixed_families(), "sm_90a", tmp_path)


def _one(a_shape, b_shape, c_dtype, dtype="float16", a_scope="shared", b_scope="shared",
         transpose_B=False, threads=128):
    @T.prim_func
    def mm(A: T.Tensor((256, 256), c_dtype)):
        with T.Kernel(1, threads=threads) as bx:
            a = (T.alloc_shared if a_scope == "shared" else T.alloc_fragment)(a_shape, dtype)
            b = (T.alloc_shared if b_scope == "shared" else T.alloc_fragment)(b_shape, dtype)
            c = T.alloc_fragment((a_shape[0], b_shape[0] if transpose_B else b_shape[1]), c_dtype)
            T.clear(c)
            T.gemm(a, b, c, transpose_B=transpose_B)
            T.copy(c, A[0, 0])
    return mm


@pytest.mark.parametrize("args,kw,arch,match", [
    (((64, 64), (64, 64), "bool"), dict(dtype="float16"), "sm_90a", r"C \('c'\) is bool"),
    # int8 wgmma: 8, 24 or a multiple of 16 columns per warpgroup
    (((64, 64), (40, 64), "int32"), dict(dtype="int8", transpose_B=True), "sm_90a",
     r"wgmma on int8 takes 8, 24 or a multiple of 16"),
])
def test_refusals_that_remain(args, kw, arch, match):
    with pytest.raises(GemmError, match=match) as e:
        lower(_one(*args, **kw), arch)
    assert "prim_func 'mm'" in str(e.value) and "T.gemm(a, b, c)" in str(e.value)


# ---- GPU ---------------------------------------------------------------------------------
def _run(func, case, arch=None, options=None):
    torch = pytest.importorskip("torch")
    M, N, K, _, _, _, ta, tb, din, dout, dacc = CASES[case]
    tdin = TORCH_DTYPE.get(din, din)
    torch.manual_seed(0)
    kernel = tilecute.compile(func, target=arch, options=options)
    if din in ("int8", "uint8"):
        lo, hi = (-8, 8) if din == "int8" else (0, 16)
        a = torch.randint(lo, hi, (M, K), dtype=getattr(torch, din))
        b = torch.randint(lo, hi, (K, N), dtype=getattr(torch, din))
        ref = a.long() @ b.long()  # exact, on the CPU
    else:
        a = torch.randn(M, K, dtype=torch.float64).to(getattr(torch, tdin))
        b = torch.randn(K, N, dtype=torch.float64).to(getattr(torch, tdin))
        ref = a.double() @ b.double()
    c = torch.zeros(M, N, dtype=getattr(torch, dout), device="cuda")
    kernel((a.t() if ta else a).contiguous().cuda(), (b.t() if tb else b).contiguous().cuda(), c)
    got = c.cpu()
    if din in ("int8", "uint8"):
        assert torch.equal(got.long(), ref), f"{case}: int results differ"
        return
    # float16 accumulation rounds every partial sum to 11 bits: error grows like sqrt(K)
    tol = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-10}[dacc]
    if dout == "float16" and dacc != "float16":
        tol = 2e-3  # one rounding of the result
    if din in ("float32", "tfloat32") and FAMILY[case][0] != "simt":
        tol = 2e-3  # tf32 tensor cores
    err = (got.double() - ref).abs().max().item()
    assert err <= tol * ref.abs().max().item() + tol, f"{case}: max err {err}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_against_torch(case):
    _run(tiled_gemm(*CASES[case]), case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["f16f16f16_nn", "i8i8i32_nt", "f64f64f64_nt", "f32f32f32_nn"])
def test_gpu_sm80_paths_on_hopper(case):
    """The sm_80 code paths (mma.sync with float16 accumulators, int8 mma.sync) on the GPU at
    hand: on Hopper with wgmma off (an sm_80 cubin's SASS does not load on sm_90)."""
    import torch
    major = torch.cuda.get_device_capability()[0]
    if major < 8:
        pytest.skip("needs sm_80+")
    if major >= 9:
        _run(tiled_gemm(*CASES[case]), case, options={"disable_wgmma": True})
    else:
        _run(tiled_gemm(*CASES[case]), case, arch="sm_80")


@pytest.mark.gpu
@pytest.mark.parametrize("in_dtype,accum", [("float16", "float16"), ("int8", "int32"),
                                            ("float64", "float64")])
def test_gpu_row_max(in_dtype, accum):
    torch = pytest.importorskip("torch")
    M, N, K = 256, 64, 64
    kernel = tilecute.compile(gemm_row_max(M, N, K, 64, in_dtype, accum))
    torch.manual_seed(1)
    if in_dtype == "int8":
        a = torch.randint(-8, 8, (M, K), dtype=torch.int8)
        b = torch.randint(-8, 8, (N, K), dtype=torch.int8)
        full = a.long() @ b.long().t()
    else:
        a = torch.randn(M, K, dtype=torch.float64).to(getattr(torch, in_dtype))
        b = torch.randn(N, K, dtype=torch.float64).to(getattr(torch, in_dtype))
        full = a.double() @ b.double().t()
    c = torch.zeros(M, N, dtype=getattr(torch, accum), device="cuda")
    r = torch.zeros(M, dtype=getattr(torch, accum), device="cuda")
    kernel(a.cuda(), b.cuda(), c, r)
    # the T.fill(C, 1) before is overwritten: clear_accum
    rows = full.amax(dim=1)
    # float16 accumulation rounds each of the K partial sums (error ~ sqrt(K) half-ulps)
    tol = {"float16": 2e-2 * full.abs().max().item(), "int32": 0, "float64": 1e-9}[accum]
    assert (r.cpu().double() - rows.double()).abs().max().item() <= tol
    assert (c.cpu().double() - (full - rows[:, None]).double()).abs().max().item() <= tol


@pytest.mark.gpu
def test_gpu_simt_accumulator_in_a_tensor_core_layout():
    import torch
    kernel = tilecute.compile(mixed_families())
    torch.manual_seed(2)
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    x, y = torch.randn(64, 32), torch.randn(32, 64)
    c = torch.zeros(64, 64, device="cuda")
    kernel(a.cuda(), b.cuda(), x.cuda(), y.cuda(), c)
    ref = a.double() @ b.double() + x.double() @ y.double()
    assert (c.cpu().double() - ref).abs().max().item() < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("shape,replicated,kind", SIMT_SHAPES)
def test_gpu_simt_layouts(shape, replicated, kind):
    import torch
    m, n, k = shape
    kernel = tilecute.compile(simt_shapes(m, n, k, replicated=replicated))
    a, b = torch.randn(m, k, dtype=torch.float64), torch.randn(k, n, dtype=torch.float64)
    c = torch.zeros(m, n, dtype=torch.float64, device="cuda")
    kernel(a.cuda(), b.cuda(), c)
    ref = a @ b
    if replicated:
        ref = ref + ref[0:1, :]
    assert (c.cpu() - ref).abs().max().item() < 1e-10


@pytest.mark.gpu
def test_gpu_simt_reads_a_tensor_core_operand_swizzle():
    import torch
    kernel = tilecute.compile(shared_operands())
    a, b = torch.randn(64, 32).bfloat16(), torch.randn(32, 64).bfloat16()
    c = torch.zeros(64, 64, device="cuda")
    d = torch.zeros(64, 64, device="cuda", dtype=torch.bfloat16)
    kernel(a.cuda(), b.cuda(), c, d)
    ref = a.double() @ b.double()
    assert (c.cpu().double() - ref).abs().max().item() < 1e-3
    # bfloat16 accumulation: every partial sum rounded to 8 bits
    assert (d.cpu().double() - ref).abs().max().item() < 0.05 * ref.abs().max().item()


@pytest.mark.parametrize("accum,in_flight", [("float16", False), ("float32", True)])
def test_16bit_accumulators_never_stay_in_flight(accum, in_flight):
    """A pipelined GEMM keeps its wgmma batch in flight into the next step (wg_wait=1) only
    with a 32-bit accumulator: CuTe DSL repacks 16-bit accumulator registers around each
    wgmma, which is wrong while the batch runs (measured on an H100: float16 accumulators of
    128-row tiles came out wrong with 2 stages, right with 1).  (3 stages: with 2 no batch
    stays, whatever the accumulator.)"""
    plan = lower(tiled_gemm(512, 1024, 768, 128, 256, 32, False, False, "float16", accum,
                            accum, num_stages=3), "sm_90a")
    (g,) = [s for k in plan.func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
    assert (g.wg_wait == 1) == in_flight


def test_tfloat32_is_float32_in_memory():
    """TileLang's T.tfloat32: float32 tensors bind it (its adapter's rule), its elements are
    float32 in the kernel, and T.gemm multiplies it as tf32 (TFloat32 MMA operands)."""
    torch = pytest.importorskip("torch")
    from tilecute.runtime.dtypes import DTYPES
    from tilecute.runtime.profiling import map_torch_type
    assert T.tfloat32.as_torch() is torch.float32 is map_torch_type("tfloat32")
    assert (DTYPES["tfloat32"].dl_code, DTYPES["tfloat32"].bits) == \
        (DTYPES["float32"].dl_code, DTYPES["float32"].bits)  # the launcher's dtype check
    plan = lower(tiled_gemm(*CASES["tf32tf32f32_nt"]), "sm_90a")
    src = emit_cute(plan)
    assert "tcm.tiled_mma(\"mma\", cutlass.TFloat32, cutlass.TFloat32, cutlass.Float32" in src
    assert "cute.runtime.make_ptr(cutlass.Float32" in src


@pytest.mark.parametrize("stages,in_flight", [(2, False), (3, True)])
def test_a_two_stage_loop_waits_for_each_steps_mmas(stages, in_flight):
    """A step's wgmma batch stays in flight into the next step only with 3 stages or more:
    it holds its stage, so with 2 the next load could not start before the step ends."""
    plan = lower(tiled_gemm(512, 1024, 768, 128, 256, 32, False, False, "float16", "float32",
                            "float32", num_stages=stages), "sm_90a")
    (g,) = [s for k in plan.func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
    assert (g.wg_wait == 1) == in_flight
