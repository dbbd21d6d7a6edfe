"""(N,) fragments that live with the columns of a T.gemm register fragment (``mma_cols``):
a per-column factor read as ``v[j]`` in a T.Parallel loop over an accumulator's or a
register A operand's ``(i, j)`` (mamba's ``cb[i, j] *= dt[j]``), filled by a
``T.copy`` / ``T.Parallel(N)`` loop.  TileLang lays such a fragment out by the loop over
the MMA fragment: each thread holds the columns its registers cover.  Replicated (as
before), every thread held all N values and the loop over the MMA registers indexed them
at a column known only at run time: local memory (TileLang's mamba chunk-scan example
kept 512 bytes of stack a thread, STL/LDL in its main loop).

The column index arithmetic is checked against CuTe's own thread-value layout of the
tiled MMA on the CPU; programs build to cubins here and match torch on a GPU."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.pipeline import run_passes

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")

from tilecute.runtime.cute import rows as tcrow  # noqa: E402
from test_accumulator_columns import LAYOUTS, _thread_coords  # noqa: E402


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


WGMMA = {"wgmma": None, "mma.sync": {"disable_wgmma": True}}
POLICIES = {"FullRow": T.GemmWarpPolicy.FullRow, "FullCol": T.GemmWarpPolicy.FullCol,
            "Square": T.GemmWarpPolicy.Square}


# ---- the index arithmetic, against CuTe's layout ---------------------------------------------
@pytest.mark.parametrize("family,warps,shape", LAYOUTS)
def test_column_registers_follow_the_mma_layout(family, warps, shape):
    """``col_fragment``'s columns (read off a one-M-step partition of the tiled MMA) are
    the columns of the full fragment's registers in every thread, ``col_of`` names the
    one holding each register's column, and the columns of a pair are adjacent (the
    two lanes of a ``cols`` loop step)."""
    coords, regs = _thread_coords(family, warps, shape)
    inner, mma_m = int(__import__("numpy").prod(regs[0])), regs[1]
    unit = 64 if family == "wgmma" else 16
    small, small_regs = _thread_coords(family, warps, (unit * warps[0], shape[1]))
    assert small_regs[1] == 1
    picks = tcrow.column_registers(int(__import__("numpy").prod(small_regs[0])), 1, small_regs[2])
    for t, regs_t in enumerate(coords):
        cols = [small[t][g[0]][1] for g in picks]
        assert all(cols[q + 1] == cols[q] + 1 and cols[q] % 2 == 0 for q in range(0, len(cols), 2))
        for r, (_, j) in enumerate(regs_t):
            assert cols[tcrow.column_index(r, inner, mma_m)] == j
    # every column is held by some thread
    held = {small[t][g[0]][1] for t in range(len(small)) for g in picks}
    assert held == set(range(shape[1]))


# ---- programs ---------------------------------------------------------------------------------
def scaled_a_operand(M=64, N=64, K=64, threads=128, steps=3, stages=2):
    """C = sum over k of (A_k * S_k[None, :]).half() @ B_k: the A operand read from shared
    into registers, scaled per column by ``s_l`` (T.copy'd from shared), then a register-A
    T.gemm (mamba's chunk scan)."""

    @T.prim_func
    def scaled(A: T.Tensor((M, K * steps), "float16"), B: T.Tensor((K * steps, N), "float16"),
               S: T.Tensor((K * steps,), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), "float16")
            a_l = T.alloc_fragment((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            s_s = T.alloc_shared((K,), "float16")
            s_l = T.alloc_fragment((K,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(A[0:M, k * K:(k + 1) * K], a_s)
                T.copy(a_s, a_l)
                T.copy(S[k * K:(k + 1) * K], s_s)
                T.copy(s_s, s_l)
                for i, j in T.Parallel(M, K):
                    a_l[i, j] = a_l[i, j] * s_l[j]
                T.copy(B[k * K:(k + 1) * K, 0:N], b_s)
                T.gemm(a_l, b_s, acc)
            T.copy(acc, C)
    return scaled


def column_affine(M=128, N=64, K=32, threads=128, policy="FullRow"):
    """acc = A @ B; C = acc * sc[None, :] + bias[None, :], with ``sc`` copied from global
    and ``bias[j] = Bias[j] * 2`` (two T.Parallel(N) loops); D[j] = sc[j] + bias[j] (each
    column's holders store the same value)."""
    pol = POLICIES[policy]

    @T.prim_func
    def affine(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               Sc: T.Tensor((N,), "float32"), Bias: T.Tensor((N,), "float16"),
               C: T.Tensor((M, N), "float32"), D: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            sc = T.alloc_fragment((N,), "float32")
            bias = T.alloc_fragment((N,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(Sc, sc)
            for j in T.Parallel(N):
                bias[j] = Bias[j] * 2.0
            T.gemm(a_s, b_s, acc, clear_accum=True, policy=pol)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * sc[j] + bias[j]
            for j in T.Parallel(N):
                D[j] = sc[j] + bias[j]
            T.copy(acc, C)
    return affine


def decayed_transpose(M=64, N=64, K=64, threads=128, steps=2, stages=2):
    """C = sum over k of (X_k^T * scale_k[None, :]).half() @ B_k with ``scale[i] =
    exp2(last - a[i]) * d[i]`` (``last`` a (1,) fragment set outside any loop, read at
    [0]; ``a``, ``d`` T.copy'd from shared): mamba's chunk state."""

    @T.prim_func
    def decayed(X: T.Tensor((K * steps, M), "float16"), B: T.Tensor((K * steps, N), "float16"),
                Acs: T.Tensor((K * steps,), "float16"), Dt: T.Tensor((K * steps,), "float16"),
                C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _:
            x_s = T.alloc_shared((K, M), "float16")
            x_l = T.alloc_fragment((K, M), "float16")
            xt = T.alloc_fragment((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            a_s = T.alloc_shared((K,), "float16")
            d_s = T.alloc_shared((K,), "float16")
            a = T.alloc_fragment((K,), "float32")
            d = T.alloc_fragment((K,), "float32")
            scale = T.alloc_fragment((K,), "float32")
            last = T.alloc_fragment((1,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            last[0] = Acs[K * steps - 1]
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(X[k * K:(k + 1) * K, 0:M], x_s)
                T.copy(Acs[k * K:(k + 1) * K], a_s)
                T.copy(Dt[k * K:(k + 1) * K], d_s)
                T.copy(a_s, a)
                T.copy(d_s, d)
                for i in T.Parallel(K):
                    scale[i] = T.exp2(last[0] - a[i]) * d[i]
                T.copy(x_s, x_l)
                for i, j in T.Parallel(M, K):
                    xt[i, j] = x_l[j, i] * scale[j]
                T.copy(B[k * K:(k + 1) * K, 0:N], b_s)
                T.gemm(xt, b_s, acc)
            T.copy(acc, C)
    return decayed


def _layout(text: str, name: str) -> str:
    m = re.search(rf"{name} = T.alloc_fragment\([^\n]*layout=T.Layout\(\"(\w+)\"", text)
    return m.group(1)


def test_a_column_factor_lives_with_the_columns_of_the_a_operand():
    text = run_passes(scaled_a_operand(), "sm_90a", until="infer_layouts").script()
    assert re.search(r's_l = T.alloc_fragment\(\(64,\), "float32", layout=T.Layout\("mma_cols", '
                     r'threads=128, mma="wgmma", warps=\(1, 1\)\)\)', text)
    # the T.copy filling it walks a thread's columns, two a step
    assert re.search(r"for \w+ in T.Parallel\(64, vector_width=2\):\n\s+s_l\[", text)


def test_column_fragments_of_an_accumulator_every_policy():
    for policy, threads, warps in (("FullRow", 128, "(1, 1)"), ("FullCol", 256, "(1, 2)"),
                                   ("Square", 256, "(2, 1)")):
        text = run_passes(column_affine(M=128, N=128, threads=threads, policy=policy),
                          "sm_90a", until="infer_layouts").script()
        for name in ("sc", "bias"):
            assert re.search(rf'{name} = T.alloc_fragment\(\(128,\), "float32", layout=T.Layout'
                             rf'\("mma_cols", threads={threads}, mma="wgmma", warps={re.escape(warps)}',
                             text), (policy, name)
    text = run_passes(column_affine(), "sm_90a", {"disable_wgmma": True},
                      until="infer_layouts").script()
    assert re.search(r'sc = T.alloc_fragment\(\(64,\), "float32", layout=T.Layout\("mma_cols", '
                     r'threads=128, mma="mma", warps=\(4, 1\)', text)


def test_a_scale_computed_from_column_fragments_and_a_scalar():
    """The (1,) fragment read at [0] stays replicated; the three (K,) fragments the scale
    loop joins take the A operand's columns (a transposed read of x_l routes it through a
    staged shared tile first)."""
    text = run_passes(decayed_transpose(), "sm_90a", until="infer_layouts").script()
    for name in ("a", "d", "scale"):
        assert _layout(text, name) == "mma_cols", name
    assert _layout(text, "last") == "replicated"


def test_generated_code_indexes_the_thread_s_columns(tmp_path):
    tilecute.build_cubin(scaled_a_operand(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert re.search(r"s_l, tc_s_l_j = tcrow.col_fragment\(\"wgmma\", \(1, 1\), 64, "
                     r"cutlass.Float32, tc_tid\)", src)
    assert re.search(r"s_l\[tcrow.col_of\(a_l, tc_r\d+ \+ tc_lane\d+\)\]", src)
    assert re.search(r"for tc_q\d+ in cutlass.range_constexpr\(0, cute.size\(s_l\), 2\):", src)
    assert "replicated: every thread holds every element" not in src


def _other_uses():
    """Fragments read at ``v[j]`` in a loop over an accumulator but used otherwise too:
    they stay replicated (every thread holds every element)."""
    M = N = K = 64

    @T.prim_func
    def others(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               V: T.Tensor((N,), "float32"), C: T.Tensor((M, N), "float32"),
               E: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as _:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            direct = T.alloc_fragment((N,), "float32")  # also read outside a loop
            shifted = T.alloc_fragment((N,), "float32")  # filled at another index
            lone = T.alloc_fragment((N,), "float32")  # never read in a loop over the MMA
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(V, direct)
            for j in T.Parallel(N):
                shifted[N - 1 - j] = V[j]
            for j in T.Parallel(N):
                lone[j] = V[j] + 1.0
            T.gemm(a_s, b_s, acc, clear_accum=True)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * direct[j] + shifted[j] + direct[0]
            T.copy(acc, C)
            T.copy(lone, E)
    return others


def test_fragments_used_otherwise_keep_their_layouts(tmp_path):
    text = run_passes(_other_uses(), "sm_90a", until="infer_layouts").script()
    assert _layout(text, "direct") == "replicated"
    assert _layout(text, "shifted") == "replicated"
    assert _layout(text, "lone") == "blocked"
    assert tilecute.build_cubin(_other_uses(), "sm_90a", out_dir=str(tmp_path)).kernel_names


AFFINE = [(128, 64, 128, "FullRow"), (128, 128, 256, "FullCol"), (256, 128, 256, "Square"),
          (64, 256, 128, "FullRow"), (192, 32, 128, "FullRow")]


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", AFFINE)
def test_column_affine_builds(M, N, threads, policy, backend, tmp_path):
    info = tilecute.build_cubin(column_affine(M=M, N=N, threads=threads, policy=policy),
                                "sm_90a", out_dir=str(tmp_path), options=WGMMA[backend])
    assert info.kernel_names


@pytest.mark.parametrize("backend", list(WGMMA))
def test_scaled_a_operand_builds(backend, tmp_path):
    info = tilecute.build_cubin(scaled_a_operand(M=128, threads=256), "sm_90a",
                                out_dir=str(tmp_path), options=WGMMA[backend])
    assert info.kernel_names
    assert tilecute.build_cubin(scaled_a_operand(), "sm_80", out_dir=str(tmp_path / "80")).kernel_names


@pytest.mark.parametrize("backend", list(WGMMA))
def test_decayed_transpose_builds(backend, tmp_path):
    info = tilecute.build_cubin(decayed_transpose(), "sm_90a", out_dir=str(tmp_path),
                                options=WGMMA[backend])
    assert info.kernel_names


# ---- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy", AFFINE)
def test_column_affine_on_gpu(M, N, threads, policy, backend):
    import torch
    torch.manual_seed(0)
    K = 32
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    sc = torch.randn(N, device="cuda")
    bias = torch.randn(N, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda")
    d = torch.zeros(N, device="cuda")
    tilecute.compile(column_affine(M=M, N=N, threads=threads, policy=policy),
                     options=WGMMA[backend])(a, b, sc, bias, c, d)
    torch.testing.assert_close(c, (a.float() @ b.float()) * sc + bias.float() * 2,
                               atol=2e-2, rtol=1e-3)
    torch.testing.assert_close(d, sc + bias.float() * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,threads", [(64, 128), (128, 256)])
def test_scaled_a_operand_on_gpu(M, threads, backend):
    import torch
    torch.manual_seed(0)
    N = K = 64
    steps = 3
    a = torch.randn(M, K * steps, device="cuda", dtype=torch.float16)
    b = torch.randn(K * steps, N, device="cuda", dtype=torch.float16)
    s = torch.rand(K * steps, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda")
    tilecute.compile(scaled_a_operand(M=M, threads=threads, steps=steps),
                     options=WGMMA[backend])(a, b, s, c)
    want = (a.float() * s.float()).half().float() @ b.float()
    torch.testing.assert_close(c, want, atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_other_uses_on_gpu():
    import torch
    torch.manual_seed(0)
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    v = torch.randn(64, device="cuda")
    c = torch.zeros(64, 64, device="cuda")
    e = torch.zeros(64, device="cuda")
    tilecute.compile(_other_uses())(a, b, v, c, e)
    torch.testing.assert_close(c, (a.float() @ b.float()) * v + v.flip(0) + v[0], atol=2e-2, rtol=1e-3)
    torch.testing.assert_close(e, v + 1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
def test_decayed_transpose_on_gpu(backend):
    import torch
    torch.manual_seed(0)
    M = N = K = 64
    steps = 2
    x = torch.randn(K * steps, M, device="cuda", dtype=torch.float16)
    b = torch.randn(K * steps, N, device="cuda", dtype=torch.float16)
    acs = torch.rand(K * steps, device="cuda", dtype=torch.float16)
    dt = torch.rand(K * steps, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda")
    tilecute.compile(decayed_transpose(steps=steps), options=WGMMA[backend])(x, b, acs, dt, c)
    scale = torch.exp2(acs[-1].float() - acs.float()) * dt.float()
    want = (x.float().t() * scale).half().float() @ b.float()
    torch.testing.assert_close(c, want, atol=5e-2, rtol=1e-3)
