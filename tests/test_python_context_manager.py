"""``with cm:`` on a Python context manager of the program's own (not a T.* form) inside a
prim_func: TileLang's builder enters it while building the kernel, builds the body and
exits it (TileOPs' trace groups); tilecute does the same while parsing."""

import contextlib

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def scaled_copy(log, fail_enter=False):
    @contextlib.contextmanager
    def region(name):
        log.append(("enter", name))
        if fail_enter:
            raise RuntimeError("no such region")
        yield
        log.append(("exit", name))

    @T.prim_func
    def scaled(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            with region("load"):
                v = A[bx * 128 + T.get_thread_binding()]
            with region("store"):
                B[bx * 128 + T.get_thread_binding()] = v * 3.0
    return scaled


def test_context_manager_runs_around_its_body_while_parsing(tmp_path):
    log = []
    func = scaled_copy(log)
    assert log == [("enter", "load"), ("exit", "load"), ("enter", "store"), ("exit", "store")]
    text = func.script()
    assert "v * T.float32(3.0)" in text and "region" not in text, text
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


def test_a_failing_context_manager_is_reported_at_its_line():
    with pytest.raises(T.FrontendError, match=r"`with region\('load'\)`: the context manager's "
                                              r"__enter__ raised RuntimeError: no such region"):
        scaled_copy([], fail_enter=True)


@pytest.mark.gpu
def test_context_manager_kernel_matches_torch():
    import torch

    a = torch.randn(256, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(scaled_copy([]))(a, b)
    torch.testing.assert_close(b, a * 3)
