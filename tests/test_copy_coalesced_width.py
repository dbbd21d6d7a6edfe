"""``T.copy(..., coalesced_width=w)`` (and ``T.async_copy``'s, and the annotation key): the
copy's loop runs ``w`` consecutive elements a thread step, as TileLang's loop partition
takes it (it was refused).  A copy that becomes TMA has no such loop: TileLang applies the
width to the SIMT loop alone.  Programs written for these tests in TileLang's idioms."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T


def staged_copy(width=2, how="arg", dtype="float16"):
    @T.prim_func
    def copy2(A: T.Tensor((64, 256), dtype), B: T.Tensor((64, 256), dtype)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 256), dtype)
            if how == "arg":
                T.copy(A, s, disable_tma=True, coalesced_width=width)
            elif how == "annotation":
                T.copy(A, s, disable_tma=True, annotations={"coalesced_width": width})
            else:
                T.async_copy(A, s, coalesced_width=width)
                T.ptx_wait_group(0)
                T.sync_threads()
            for i, j in T.Parallel(64, 256):
                B[i, j] = s[i, j] + 1

    return copy2


@pytest.mark.parametrize("how", ["arg", "annotation", "async"])
def test_width_sets_the_copy_lanes(how):
    src = tilecute.compile(staged_copy(2, how), target="sm_90a").get_kernel_source()
    # 2 float16 a thread step: 4-byte cp.async pieces (16 bytes without the width)
    line = next(ln for ln in src.splitlines() if "tcc.copy_async(" in ln)
    assert re.search(r"cute\.make_layout\(2\)\), cute\.make_tensor", line), line
    assert line.rstrip().endswith(", 32)"), line


def test_printed_back():
    assert "T.copy(A, s, disable_tma=True, coalesced_width=4)" in staged_copy(4).script()


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["arg", "annotation", "async"])
def test_copy_with_width_gpu(how):
    a = torch.randn(64, 256, device="cuda").half()
    b = torch.empty_like(a)
    tilecute.compile(staged_copy(2, how))(a, b)
    torch.testing.assert_close(b, a + 1)
