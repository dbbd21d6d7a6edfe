"""Per-thread scalar code over constant-unrolled loops, whose indices are Python ints in the
generated CuTe DSL (``cutlass.range_constexpr``), found by the fuzzer's ``scalar`` form
(tests/fuzz_tiles.py): each program builds an sm_90a cubin on the CPU, and on a GPU
(``-m gpu``) matches torch."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


# a stepped T.unroll binds its index with a Let (i = 2 + i_iter * 3): a Python int too, whose
# condition CuTe DSL's select_ refused (fuzz seed scalar_68: 'condition must be a Runtime value')
STEPPED_SELECT = """
import tilecute.language as T


@T.prim_func
def stepped_select(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32, 4), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        for i in T.unroll(1, 12, 3):
            B[tx, (i - 1) // 3] = T.if_then_else(i + 2 <= 6, A[tx, i], -A[tx, i]) + T.if_then_else(
                i > 5 and tx < 16, 100.0, 0.0)
"""


def test_stepped_unrolled_index_in_a_condition_builds():
    kernel = tilecute.compile(T.from_script(STEPPED_SELECT))
    src = kernel.get_kernel_source()
    assert "i = 1 + i_iter * 3" in src and "cutlass.range_constexpr(0, 4)" in src
    assert "cutlass.select_(i" not in src and "tcmath.select(i + 2 <= 6" in src
    kernel.ensure_cubin()


@pytest.mark.gpu
def test_stepped_unrolled_index_in_a_condition_matches_torch():
    import torch

    a = torch.randn(32, 16, device="cuda")
    b = torch.empty(32, 4, device="cuda")
    tilecute.compile(T.from_script(STEPPED_SELECT))(a, b)
    i = torch.tensor([1, 4, 7, 10], device="cuda").expand(32, 4)
    tx = torch.arange(32, device="cuda")[:, None].expand(32, 4)
    want = torch.where(i + 2 <= 6, a[:, [1, 4, 7, 10]], -a[:, [1, 4, 7, 10]]) + \
        torch.where((i > 5) & (tx < 16), 100.0, 0.0)
    torch.testing.assert_close(b, want)
