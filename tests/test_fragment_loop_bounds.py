"""``T.Parallel`` nests with a run-time extent over fragments (the ``fragment_loop_bounds``
pass): TileLang walks the fragment's layout (its constant shape) and guards each iteration
by the loop's range, so ``for i in T.Parallel(n): f[i] = ...`` over a 128-element fragment
runs over 128 with ``if i < n``."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform.fragment_loop_bounds import fragment_loop_bounds
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


BEFORE = '''import tilecute.language as T


@T.prim_func
def head(A: T.Tensor((128,), "float32"), n: T.int32):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((128,), "float32")
        for i in T.Parallel(128):
            f[i] = A[i]
        for i_1 in T.Parallel(n):
            f[i_1] = f[i_1] * T.float32(2.0)
        for i_2 in T.Parallel(128):
            A[i_2] = f[i_2]
'''


def test_the_pass_walks_the_fragment_and_guards_the_range():
    after = fragment_loop_bounds(T.from_script(BEFORE)).script()
    assert "for i_1 in T.Parallel(128):\n            if i_1 < n:\n" \
           "                f[i_1] = f[i_1] * T.float32(2.0)" in after, after
    # constant nests are left as written
    assert after.count("T.Parallel(128)") == 3


def test_a_loop_reading_no_fragment_at_its_variable_is_left():
    text = BEFORE.replace("f[i_1] = f[i_1] * T.float32(2.0)", "A[i_1] = A[i_1] * T.float32(2.0)")
    assert "T.Parallel(n)" in fragment_loop_bounds(T.from_script(text)).script()


def scale_head(N=256):
    """Doubles the first ``n`` elements of each block's 128-element fragment."""
    @T.prim_func
    def scale_head(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(N // 128, threads=128) as bx:
            f = T.alloc_fragment((128,), "float32")
            T.copy(A[bx * 128], f)
            for i in T.Parallel(n):
                f[i] = f[i] * 2.0
            T.copy(f, B[bx * 128])
    return scale_head


def row_tail_max(bm=32, cols=64):
    """Row maxima of an (M, cols) tensor, the last block's rows fewer than ``bm``: the tile
    filled only over the rows there are (``T.min(bm, M - bx * bm)``), the rest -inf."""
    M = T.dynamic("M")

    @T.prim_func
    def row_tail_max(A: T.Tensor((M, cols), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            f = T.alloc_fragment((bm, cols), "float32")
            m = T.alloc_fragment((bm,), "float32")
            T.fill(f, -T.infinity("float32"))
            for i, j in T.Parallel(T.min(bm, M - bx * bm), cols):
                f[i, j] = A[bx * bm + i, j]
            T.reduce_max(f, m, dim=1)
            for i in T.Parallel(T.min(bm, M - bx * bm)):
                O[bx * bm + i] = m[i]
    return row_tail_max


def masked_columns(rows=16, cols=128):
    """Columns past a run-time width cleared, both dims of the nest walked (one run-time)."""
    @T.prim_func
    def masked_columns(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((rows, cols), "float16"),
                       width: T.int32):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((rows, cols), "float16")
            g = T.alloc_fragment((rows, cols), "float16")
            T.copy(A, f)
            T.clear(g)
            for i, j in T.Parallel(rows, width):
                g[i, j] = f[i, j]
            T.copy(g, B)
    return masked_columns


def gemm_rows(M=128, N=64, K=64):
    """A T.gemm tile whose first ``rows`` rows (a scalar argument) are stored: a run-time
    extent over the MMA accumulator."""
    @T.prim_func
    def gemm_rows(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                  C: T.Tensor((M, N), "float32"), rows: T.int32):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            for i, j in T.Parallel(rows, N):
                C[i, j] = c[i, j]
    return gemm_rows


def test_a_run_time_extent_over_an_accumulator_walks_its_registers():
    src = tilecute.compile(gemm_rows(), target="sm_90a").get_kernel_source()
    assert "for tc_r1 in cutlass.range(0, cute.size(c), 2, unroll_full=True):" in src, src
    assert "if i < rows:" in src, src


@pytest.mark.parametrize("factory", [scale_head, row_tail_max, masked_columns, gemm_rows])
def test_run_time_extents_over_fragments_build(factory, tmp_path):
    func = factory()
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_the_guard_reaches_the_generated_code():
    src = tilecute.compile(scale_head(), target="sm_90a").get_kernel_source()
    assert "< n:" in src and "f[tc_lane" in src, src
    lowered = run_passes(row_tail_max(), "sm_90a").script()
    assert "for i in T.Parallel(32" in lowered and "if i < T.min(32, M - bx * 32):" in lowered, \
        lowered


def test_an_index_other_than_the_variable_stays_refused():
    text = BEFORE.replace("f[i_1] = f[i_1] * T.float32(2.0)", "f[n - 1 - i_1] = T.float32(0.0)")
    with pytest.raises(Exception, match="a T.Parallel loop over fragments needs constant extents"):
        tilecute.compile(T.from_script(text), target="sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_run_time_extents_on_gpu():
    import torch

    a = torch.randn(256, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(scale_head())(a, b, 40)
    want = a.clone()
    want[:40] *= 2
    want[128:168] *= 2
    torch.testing.assert_close(b, want)

    for M in (70, 96):
        x = torch.randn(M, 64, device="cuda")
        o = torch.empty(M, device="cuda")
        tilecute.compile(row_tail_max())(x, o)
        torch.testing.assert_close(o, x.amax(1))

    a = torch.randn(128, 64, device="cuda").half()
    b = torch.randn(64, 64, device="cuda").half()
    c = torch.zeros(128, 64, device="cuda")
    tilecute.compile(gemm_rows())(a, b, c, 77)
    want = torch.zeros_like(c)
    want[:77] = (a.float() @ b.float())[:77]
    torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)

    x = torch.randn(16, 128, device="cuda").half()
    y = torch.empty_like(x)
    tilecute.compile(masked_columns())(x, y, 50)
    want = torch.zeros_like(x)
    want[:, :50] = x[:, :50]
    torch.testing.assert_close(y, want)
