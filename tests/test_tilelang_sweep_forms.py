"""Forms TileLang's own tests use that tilecute misread or lacked (helper O's sweep of
TileLang's testing/python): each program here is written for this file, in TileLang's
idioms; a CPU test builds its sm_90a cubin, a GPU test checks it against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


# ---- a T.* form, a T.macro or a function bound to a local name -------------------------------
@T.macro
def _bump(frag, n):
    for i in T.Parallel(n):
        frag[i] = frag[i] + 1.0


@T.macro
def _double(frag, n):
    for i in T.Parallel(n):
        frag[i] = frag[i] * 2.0


def scan_by_name(op: str, rows=8, cols=64):
    """A scan picked in Python and called through a local name (``scan = T.cumsum if ...``),
    then a macro and an intrinsic picked the same way."""

    @T.prim_func
    def pick(X: T.Tensor((rows, cols), T.float32), Y: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((rows, cols), T.float32)
            frag = T.alloc_fragment((rows * cols,), T.float32)
            T.copy(X, tile)
            scan = T.cumsum if op == "sum" else T.cummax
            scan(src=tile, dim=1, reverse=op == "sum")
            for i, j in T.Parallel(rows, cols):
                frag[i * cols + j] = tile[i, j]
            step = _bump if op == "sum" else _double
            step(frag, rows * cols)
            act = T.abs
            for i, j in T.Parallel(rows, cols):
                Y[i, j] = act(frag[i * cols + j])
    return pick


def test_forms_bound_to_local_names_parse_as_their_calls(tmp_path):
    text = scan_by_name("sum").script()
    assert "T.cumsum(tile, tile, dim=1, reverse=True)" in text
    assert "frag[i_1] = frag[i_1] + T.float32(1.0)" in text
    assert "Y[i_2, j_1] = T.abs(frag[i_2 * 64 + j_1])" in text
    text = scan_by_name("max").script()
    assert "T.cummax(tile, tile, dim=1, reverse=False)" in text and "T.float32(2.0)" in text
    assert tilecute.build_cubin(scan_by_name("max"), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_refused_form_bound_to_a_name_is_refused_at_its_call():
    def build():
        @T.prim_func
        def k(X: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                clc = T.clc_is_canceled
                clc(X[0])
        return k
    with pytest.raises(FrontendError, match=r"T\.clc_is_canceled is a TileLang form"):
        build()


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
def test_forms_bound_to_local_names_on_gpu(op):
    import torch
    x = torch.randn(8, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(scan_by_name(op))(x, y)
    if op == "sum":
        ref = (x.flip(1).cumsum(1).flip(1) + 1.0).abs()
    else:
        ref = (x.cummax(1).values * 2.0).abs()
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
