"""Column reductions of T.gemm accumulators (``T.reduce_sum(acc, col_sums, dim=0)``),
reduced in the MMA's register layout as TileLang reduces a fragment in its own layout:
each thread combines its registers of each of its columns, the 8 lanes holding the same
columns shuffle, and the warps along M meet in a shared scratch of N x warps-along-M
values (``tcrow.reduce_cols``).  Any number of rows per warp(group) (192 on 128 threads
had no staging layout and was refused before), any policy, wgmma and mma.sync.

The index arithmetic of ``tcrow.reduce_cols`` (which registers share a column, which
lanes and warps hold the same columns) is checked here on the CPU against CuTe's own
thread-value layout of the tiled MMA; the programs build to cubins on the CPU and match
torch on a GPU."""

import re

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.pipeline import run_passes

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")

from tilecute.runtime.cute import mma as tcm  # noqa: E402
from tilecute.runtime.cute import rows as tcrow  # noqa: E402



@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    # the index tests trace CuTe's MMA layouts in this process: wgmma needs sm_90a
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


POLICIES = {"FullRow": T.GemmWarpPolicy.FullRow, "FullCol": T.GemmWarpPolicy.FullCol,
            "Square": T.GemmWarpPolicy.Square}
WGMMA = {"wgmma": None, "mma.sync": {"disable_wgmma": True}}


# ---- the index arithmetic, against CuTe's layout ---------------------------------------------
def _flat(shape, stride):
    if isinstance(shape, tuple):
        return [m for a, b in zip(shape, stride) for m in _flat(a, b)]
    return [(shape, stride)]


def _at(modes, i):
    """(row, column) of flat index ``i`` of a mode of a layout into the identity tensor."""
    coord = [0, 0]
    for size, st in modes:
        if size > 1:
            coord[st.mode[0]] += (i % size) * st.value
        i //= size
    return tuple(coord)


def _thread_coords(family, warps, shape):
    """coords[t][r] = (i, j) of accumulator register r of MMA thread t: the tiled MMA's
    thread-value layout over the identity of an (M, N) tile (what ``tcm.accumulator``'s
    partition holds), read while tracing."""
    got = {}

    @cute.jit
    def probe():
        mma = tcm.tiled_mma(family, cutlass.Float16, cutlass.Float16, cutlass.Float32, False,
                            False, warps, shape[1])
        fr = mma._thrfrg_C(cute.make_identity_layout(shape))
        got["thr"], got["val"] = _flat(fr.shape[0], fr.stride[0]), _flat(fr.shape[1], fr.stride[1])
        got["regs"] = mma.partition_shape_C(shape)
    cute.compile(probe, options="--gpu-arch sm_90a")
    threads = int(np.prod([s for s, _ in got["thr"]]))
    regs = int(np.prod([s for s, _ in got["val"]]))
    coords = []
    for t in range(threads):
        ti, tj = _at(got["thr"], t)
        coords.append([(ti + i, tj + j) for i, j in (_at(got["val"], r) for r in range(regs))])
    return coords, got["regs"]


LAYOUTS = [("wgmma", (1, 1), (64, 64)), ("wgmma", (1, 1), (192, 64)), ("wgmma", (1, 1), (256, 128)),
           ("wgmma", (2, 1), (256, 64)), ("wgmma", (1, 2), (128, 128)), ("wgmma", (3, 1), (192, 32)),
           ("wgmma", (2, 2), (256, 128)), ("mma", (4, 1), (128, 64)), ("mma", (2, 2), (64, 64)),
           ("mma", (1, 4), (48, 64)), ("mma", (8, 1), (256, 16)), ("mma", (2, 4), (96, 128))]


@pytest.mark.parametrize("family,warps,shape", LAYOUTS)
def test_column_reduction_indices_follow_the_mma_layout(family, warps, shape):
    """Every register's column is its group's; the lanes ``lane ^ 4, ^ 8, ^ 16`` hold the
    same columns in the same order; lanes 0..3 of the warps write each (slot, column) of
    the scratch exactly once, for every column and slot; so the emulated exchange gives
    the column sums of a random matrix."""
    coords, regs = _thread_coords(family, warps, shape)
    inner, mma_m, mma_n = int(np.prod(regs[0])), regs[1], regs[2]
    groups = tcrow.column_registers(inner, mma_m, mma_n)
    assert sorted(r for g in groups for r in g) == list(range(len(coords[0])))
    x = np.random.default_rng(0).integers(-50, 50, size=shape)
    m, n = shape
    scratch = {}
    for t, regs_t in enumerate(coords):
        cols = [regs_t[g[0]][1] for g in groups]
        for g in groups:
            assert {regs_t[r][1] for r in g} == {regs_t[g[0]][1]}
        for lanes in tcrow.COLUMN_LANES:
            assert [coords[t ^ lanes][g[0]][1] for g in groups] == cols
        slots, slot = tcrow.column_slot(family, warps, t)
        if t % 32 < 4:
            for g, c in zip(groups, cols):
                # the warp's partial: its 8 lanes' registers of the column
                lanes = [t + 4 * k for k in range(8)]
                part = sum(x[coords[u][r]] for u in lanes for r in g)
                assert (slot, c) not in scratch
                scratch[slot, c] = part
    assert sorted(scratch) == [(s, c) for s in range(slots) for c in range(n)]
    got = [sum(scratch[s, c] for s in range(slots)) for c in range(n)]
    assert got == list(x.sum(0))


# ---- programs ---------------------------------------------------------------------------------
def column_stats(M=192, N=64, K=32, threads=128, policy="FullRow", kind="sum", clear=True,
                 out_dtype="float32", keepdim=False, acc_dtype="float32"):
    """acc = A @ B (int8: A @ B^T); C <- T.reduce_<kind>(acc, c, dim=0, clear) with c first
    loaded from C (so clear=False combines into C's values); c of shape (N,) or keepdim
    (1, N)."""
    pol = POLICIES[policy]
    cshape = (1, N) if keepdim else (N,)
    in_dtype = "int8" if acc_dtype == "int32" else "float16"
    tb = in_dtype == "int8"  # (int8 wgmma reads B K-major: B given as (N, K))
    bshape = (N, K) if tb else (K, N)

    @T.prim_func
    def colstats(A: T.Tensor((M, K), in_dtype), B: T.Tensor(bshape, in_dtype),
                 C: T.Tensor(cshape, out_dtype)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), in_dtype)
            b_s = T.alloc_shared(bshape, in_dtype)
            acc = T.alloc_fragment((M, N), acc_dtype)
            c = T.alloc_fragment(cshape, out_dtype)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(C, c)
            T.gemm(a_s, b_s, acc, transpose_B=tb, clear_accum=True, policy=pol)
            T.reduce(acc, c, kind, 0, clear)
            T.copy(c, C)
    return colstats


def like_columns(M=192, N=64, K=32, threads=128, policy="FullRow", kind="sum"):
    """acc = A @ B; d[i, j] = acc[i, j] * 2 - 1 (a T.Parallel over the accumulator: d takes
    its register layout); C <- T.reduce_<kind>(d, c, dim=0, clear=False) with c loaded
    from C (TileLang's indexer backward reduces such a fragment over dim 0)."""
    pol = POLICIES[policy]

    @T.prim_func
    def likecols(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            d = T.alloc_fragment((M, N), "float32")
            c = T.alloc_fragment((N,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(C, c)
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            for i, j in T.Parallel(M, N):
                d[i, j] = acc[i, j] * 2.0 - 1.0
            T.reduce(d, c, kind, 0, False)
            T.copy(c, C)
    return likecols


# (M, N, threads, policy): 64..256 rows per warpgroup, 16..256 columns, 128..384 threads
SHAPES = [(64, 64, 128, "FullRow"), (192, 64, 128, "FullRow"), (192, 32, 128, "FullRow"),
          (256, 128, 128, "FullRow"), (128, 16, 128, "FullRow"), (64, 256, 128, "FullRow"),
          (256, 64, 256, "FullRow"), (256, 128, 256, "Square"), (128, 128, 256, "FullCol"),
          (192, 64, 384, "FullRow"), (384, 64, 256, "FullRow"), (128, 192, 384, "FullCol"),
          (256, 128, 256, "FullCol")]
# (mma.sync with 12 warps along N, (1, 12), aborts CuTe DSL's B partition in the gemm
# itself, reduction or not: wgmma only there)
CASES = [(shape, backend) for shape in SHAPES for backend in WGMMA
         if not (backend == "mma.sync" and shape == (128, 192, 384, "FullCol"))]
CASE_IDS = [f"{m}x{n}-t{t}-{p}-{b}" for (m, n, t, p), b in CASES]
KINDS = [("sum", True), ("max", False), ("min", True), ("abssum", False), ("absmax", True)]


def test_columns_reduce_in_the_accumulator_layout():
    """No transposed shared tile, no blocked copy: one reduce_cols on the accumulator, its
    scratch N x (4 warps x warpgroups along M) values."""
    text = run_passes(column_stats(M=192, N=64, threads=128), "sm_90a").script()
    assert "_moved" not in text and "acc_frag" not in text
    assert re.search(r'c_cols_scratch256 = T.alloc_shared\(\(256,\), "float32"', text)
    assert "T.reduce_sum(acc, c, dim=0, clear=True, scratch=c_cols_scratch256)" in text
    text = run_passes(column_stats(M=256, N=64, threads=256), "sm_90a",
                      {"disable_wgmma": True}).script()
    assert re.search(r'c_cols_scratch512 = T.alloc_shared\(\(512,\)', text)  # 8 warps along M


def test_a_fragment_laid_out_as_the_accumulator_reduces_its_columns_in_place():
    """d shares a T.Parallel loop with the accumulator, so it has its register layout and
    its columns reduce there too; a fragment of the generic layout still moves them last
    through a transposed shared tile (the layout pass, tests/test_reduce_dims.py)."""
    text = run_passes(like_columns(M=256, N=256, threads=256, policy="Square"), "sm_90a").script()
    assert "_moved" not in text
    assert re.search(r"T.reduce_sum\(d, c, dim=0, clear=False, scratch=c_cols_scratch\d+\)", text)


def test_generated_code_calls_reduce_cols(tmp_path):
    tilecute.build_cubin(column_stats(M=192, N=64, threads=128, kind="max", clear=False),
                         "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert re.search(r'tcrow\.reduce_cols\(acc, tc_acc_ij, c, "max", False, c_cols_scratch256, '
                     r'"wgmma", \(1, 1\), tc_tid, 0\)', src)


@pytest.mark.parametrize("shape,backend", CASES, ids=CASE_IDS)
def test_column_reductions_build(shape, backend, tmp_path):
    M, N, threads, policy = shape
    kind, clear = KINDS[SHAPES.index(shape) % len(KINDS)]
    info = tilecute.build_cubin(column_stats(M=M, N=N, threads=threads, policy=policy, kind=kind,
                                             clear=clear),
                                "sm_90a", out_dir=str(tmp_path), options=WGMMA[backend])
    assert info.kernel_names


LIKE = [(192, 64, 128, "FullRow"), (256, 256, 256, "Square"), (128, 128, 256, "FullCol")]


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", LIKE)
def test_columns_of_a_fragment_like_the_accumulator_build(M, N, threads, policy, backend,
                                                          tmp_path):
    info = tilecute.build_cubin(like_columns(M=M, N=N, threads=threads, policy=policy),
                                "sm_90a", out_dir=str(tmp_path), options=WGMMA[backend])
    assert info.kernel_names


@pytest.mark.parametrize("kind,clear", KINDS)
def test_every_kind_builds_for_sm_80(kind, clear, tmp_path):
    info = tilecute.build_cubin(column_stats(M=128, N=64, threads=128, kind=kind, clear=clear),
                                "sm_80", out_dir=str(tmp_path))
    assert info.kernel_names


def test_keepdim_half_destination_and_integer_accumulators_build(tmp_path):
    for i, kw in enumerate([dict(keepdim=True), dict(out_dtype="float16", kind="max"),
                            dict(acc_dtype="int32", out_dtype="int32", K=64, kind="bitxor"),
                            dict(acc_dtype="int32", out_dtype="int32", K=64, kind="absmax")]):
        info = tilecute.build_cubin(column_stats(**kw), "sm_90a", out_dir=str(tmp_path / str(i)))
        assert info.kernel_names


# ---- on the GPU -------------------------------------------------------------------------------
def _want(acc, kind, start, clear):
    import torch
    red = {"sum": lambda a: a.sum(0), "max": lambda a: a.max(0).values,
           "min": lambda a: a.min(0).values, "abssum": lambda a: a.abs().sum(0),
           "absmax": lambda a: a.abs().max(0).values,
           "bitxor": lambda a: torch.tensor(np.bitwise_xor.reduce(a.cpu().numpy(), 0),
                                            device=a.device)}[kind](acc)
    if clear:
        return red
    if kind in ("max", "absmax"):
        return torch.maximum(start, red)
    if kind == "min":
        return torch.minimum(start, red)
    return start + red


@pytest.mark.gpu
@pytest.mark.parametrize("shape,backend", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("kind,clear", KINDS)
def test_column_reductions_on_gpu(shape, backend, kind, clear):
    import torch
    M, N, threads, policy = shape
    torch.manual_seed(0)
    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, N, device="cuda", dtype=torch.float16)
    start = torch.randn(N, device="cuda")
    c = start.clone()
    kernel = tilecute.compile(column_stats(M=M, N=N, threads=threads, policy=policy, kind=kind,
                                           clear=clear), options=WGMMA[backend])
    kernel(a, b, c)
    torch.testing.assert_close(c, _want(a.float() @ b.float(), kind, start, clear),
                               atol=2e-2, rtol=1e-3)


@pytest.mark.gpu
def test_keepdim_half_and_integer_columns_on_gpu():
    import torch
    torch.manual_seed(0)
    a = torch.randn(192, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    acc = a.float() @ b.float()
    c = torch.zeros(1, 64, device="cuda")
    tilecute.compile(column_stats(keepdim=True))(a, b, c)
    torch.testing.assert_close(c[0], acc.sum(0), atol=2e-2, rtol=1e-3)
    h = torch.zeros(64, device="cuda", dtype=torch.float16)
    tilecute.compile(column_stats(out_dtype="float16", kind="max"))(a, b, h)
    torch.testing.assert_close(h, acc.half().max(0).values, atol=1e-2, rtol=1e-3)
    ai = torch.randint(-8, 8, (192, 64), device="cuda", dtype=torch.int8)
    bi = torch.randint(-8, 8, (64, 64), device="cuda", dtype=torch.int8)  # (N, K)
    acci = ai.int().cpu() @ bi.int().cpu().t()
    for kind in ("bitxor", "absmax"):
        ci = torch.zeros(64, device="cuda", dtype=torch.int32)
        tilecute.compile(column_stats(acc_dtype="int32", out_dtype="int32", K=64, kind=kind))(ai, bi, ci)
        torch.testing.assert_close(ci.cpu(), _want(acci, kind, None, True).int())


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", LIKE)
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_columns_of_a_fragment_like_the_accumulator_on_gpu(M, N, threads, policy, kind, backend):
    import torch
    torch.manual_seed(0)
    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, N, device="cuda", dtype=torch.float16)
    start = torch.randn(N, device="cuda")
    c = start.clone()
    tilecute.compile(like_columns(M=M, N=N, threads=threads, policy=policy, kind=kind),
                     options=WGMMA[backend])(a, b, c)
    d = (a.float() @ b.float()) * 2 - 1
    torch.testing.assert_close(c, _want(d, kind, start, False), atol=5e-2, rtol=1e-3)


# ---- keepdim row reductions of accumulators --------------------------------------------------
def keepdim_rows(M=128, N=128, threads=256, policy="FullCol", kind="sum", clear=False):
    """acc = A @ B; R (M, 1) <- T.reduce_<kind>(acc, r, dim=1, clear) with r of TileLang's
    keepdim shape (M, 1), first loaded from R."""
    pol = POLICIES[policy]

    @T.prim_func
    def keeprows(A: T.Tensor((M, 32), "float16"), B: T.Tensor((32, N), "float16"),
                 R: T.Tensor((M, 1), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, 32), "float16")
            b_s = T.alloc_shared((32, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M, 1), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(R, r)
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            T.reduce(acc, r, kind, 1, clear)
            T.copy(r, R)
    return keeprows


KEEP = [(128, 128, 256, "FullCol"), (192, 64, 128, "FullRow"), (64, 64, 128, "FullRow")]


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", KEEP)
def test_keepdim_row_reductions_hold_rows(M, N, threads, policy, backend, tmp_path):
    """The (M, 1) destination holds the accumulator's rows, as an (M,) one does (refused
    before: the nest combining the result into it read a row fragment beside a blocked
    fragment)."""
    func = keepdim_rows(M=M, N=N, threads=threads, policy=policy)
    text = run_passes(func, "sm_90a", WGMMA[backend]).script()
    assert re.search(rf'r = T.alloc_fragment\(\({M}, 1\), "float32", layout=T.Layout\("mma_rows"', text)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path),
                                options=WGMMA[backend]).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", KEEP)
@pytest.mark.parametrize("kind,clear", [("sum", False), ("max", True), ("absmax", False)])
def test_keepdim_row_reductions_on_gpu(M, N, threads, policy, kind, clear, backend):
    import torch
    torch.manual_seed(0)
    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, N, device="cuda", dtype=torch.float16)
    start = torch.randn(M, 1, device="cuda")
    r = start.clone()
    tilecute.compile(keepdim_rows(M=M, N=N, threads=threads, policy=policy, kind=kind,
                                  clear=clear), options=WGMMA[backend])(a, b, r)
    acc = (a.float() @ b.float()).t()  # _want reduces dim 0
    torch.testing.assert_close(r[:, 0], _want(acc, kind, start[:, 0], clear), atol=2e-2, rtol=1e-3)
