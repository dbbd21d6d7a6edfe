"""A T.Parallel nest that writes a fragment every thread holds whole runs whole on every
thread; its atomics must still happen once per iteration (TileLang guards such side
effects to one copy).  They ran once per thread: E += V from each of 128 threads."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError  # noqa: F401  (the module's errors)


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _scaled_columns(N=64, returning=False):
    @T.prim_func
    def scaled(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, N), "float16"),
               V: T.Tensor((N,), "float32"), E: T.Tensor((N,), "float32"),
               C: T.Tensor((64, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, N), "float16")
            acc = T.alloc_fragment((64, N), "float32")
            f = T.alloc_fragment((N,), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            for j in T.Parallel(N):
                f[j] = V[j]
                if returning:
                    f[j] = T.atomic_add(E[j], V[j], return_prev=True)
                else:
                    T.atomic_add(E[j], V[j])
            for i, j in T.Parallel(64, N):
                acc[i, j] = acc[i, j] * f[j]
            T.copy(acc, C)
    return scaled


def test_atomics_of_a_replicated_nest_run_once(tmp_path):
    func = _scaled_columns()
    src = tilecute.compile(func).get_kernel_source()
    guard = [ln for ln in src.splitlines() if "tca.atomic_add(E" in ln]
    assert guard, src
    lines = src.splitlines()
    at = lines.index(guard[0])
    assert lines[at - 1].strip() == "if tc_tid == 0:", lines[at - 3:at + 1]
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_returning_atomic_in_a_replicated_nest_is_refused():
    with pytest.raises(Exception, match=r"T\.atomic_add\(\.\.\., return_prev=True\) in a T\.Parallel "
                       r"nest that every thread runs whole: it writes 'f'.*shared memory"):
        tilecute.compile(_scaled_columns(returning=True)).get_kernel_source()


@pytest.mark.gpu
def test_atomics_of_a_replicated_nest_on_gpu():
    import torch

    torch.manual_seed(0)
    A = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    B = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    V = torch.randn(64, device="cuda")
    E = torch.zeros(64, device="cuda")
    C = torch.empty(64, 64, device="cuda")
    tilecute.compile(_scaled_columns())(A, B, V, E, C)
    torch.testing.assert_close(E, V)
    torch.testing.assert_close(C, (A.float() @ B.float()) * V, atol=1e-2, rtol=1e-3)

