"""A T.Parallel nest that scales a T.gemm accumulator by a per-row factor
(``acc[i, j] *= f[i]``, an online softmax's rescale of O) skips the multiply in a thread
whose rows all have factor 1: ``x * 1`` is ``x`` exactly, so the result is the same, and
once the rows' maxima stop moving (or with FlashAttention-4's lazy rescale, the examples'
``lazy_rescale``) most steps rescale nothing."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _scaled(form, M=128, N=128, K=64, threads=256):
    @T.prim_func
    def scaled(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
               F: T.Tensor((M,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            f = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            T.reduce_max(acc, f, dim=1)  # (lays f out on the accumulator's rows)
            for i in T.Parallel(M):
                f[i] = F[i]
            if form == "times":
                for i, j in T.Parallel(M, N):
                    acc[i, j] *= f[i]
            elif form == "swapped":
                for i, j in T.Parallel(M, N):
                    acc[i, j] = f[i] * acc[i, j]
            else:  # not a pure scale: no skip
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * f[i] + 1.0
            T.copy(acc, C)
    return scaled


@pytest.mark.parametrize("form,skips", [("times", True), ("swapped", True), ("affine", False)])
def test_pure_row_scales_skip_factors_of_one(form, skips, tmp_path):
    func = _scaled(form)
    src = tilecute.compile(func).get_kernel_source()
    assert ("if tcrow.any_not_one(f):" in src) == skips
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_no_guard_where_the_fragments_fill_the_registers(tmp_path):
    """One warpgroup holding a 128 x 256 accumulator (256 registers a thread) gets the plain
    multiply: the guard's two paths cost registers a thread has none of (TileLang's
    flash-attention example at 128 threads spilled 1608 bytes with it, 1152 without)."""
    func = _scaled("times", N=256, threads=128)
    src = tilecute.compile(func).get_kernel_source()
    assert "any_not_one" not in src and "acc[tc_r" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["times", "swapped", "affine"])
def test_row_scales_on_gpu(form):
    import torch

    torch.manual_seed(0)
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    f = torch.ones(128, device="cuda")
    f[5] = 0.5  # one row of one thread's pair scaled, the rest (most threads) factor 1
    f[77] = -2.0
    c = torch.empty(128, 128, device="cuda")
    tilecute.compile(_scaled(form))(a, b, f, c)
    ref = (a.float() @ b.float()) * f[:, None] + (1.0 if form == "affine" else 0.0)
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-3)
