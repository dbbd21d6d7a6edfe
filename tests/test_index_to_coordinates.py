"""TileLang's ``T.index_to_coordinates(index, shape)``: a flat index's row-major
coordinates, plain frontend arithmetic (ints fold, expressions floor ``//`` and ``%``).
CPU: the values, the IR it leaves, refusals, an sm_90a cubin; GPU: a gather vs torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError


def test_ints_fold_to_row_major_coordinates():
    shape = (3, 5, 7)
    for flat in (0, 1, 6, 7, 34, 35, 104):
        c = T.index_to_coordinates(flat, shape)
        assert isinstance(c, tuple) and len(c) == 3
        assert (c[0] * 5 + c[1]) * 7 + c[2] == flat and all(0 <= x < e for x, e in zip(c, shape))
    # every dim is reduced by its extent, the first too (TileLang's loop over all dims)
    assert T.index_to_coordinates(3 * 5 * 7 + 2, shape) == (0, 0, 2)
    assert T.index_to_coordinates(9, [4]) == (1,)


def transpose_by_flat_index(R=6, C=10):
    """Bt[c, r] = A[r, c], one thread per flat index of A (its coordinates unpacked)."""

    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), Bt: T.Tensor((C, R), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for t in T.Parallel(R * C):
                r, c = T.index_to_coordinates(t, (R, C))
                Bt[c, r] = A[r, c]
    return main


def test_ir_uses_floor_division_and_modulo(tmp_path):
    f = transpose_by_flat_index()
    text = f.script()
    assert "r = t // 10 % 6" in text and "c = t % 10" in text, text
    info = tilecute.build_cubin(transpose_by_flat_index(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_indexed_result_and_constant_index():
    @T.prim_func
    def main(A: T.Tensor((2, 3, 4), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            co = T.index_to_coordinates(23, (2, 3, 4))
            B[0] = A[co[0], co[1], co[2]]
            B[1] = A[T.index_to_coordinates(bx + 5, (2, 3, 4))[0], 0, 0]
    body = main.script()
    assert "B[0] = A[1, 2, 3]" in body and "(bx + 5) // 4 // 3 % 2" in body, body


@pytest.mark.parametrize("call,msg", [
    ("T.index_to_coordinates(bx, 4)", "shape must be a non-empty sequence of extents"),
    ("T.index_to_coordinates(bx, ())", "shape must be a non-empty sequence of extents"),
    ("T.index_to_coordinates(bx)", "shape"),
])
def test_refusals_name_the_form_and_line(call, msg):
    src = f'''import tilecute.language as T


@T.prim_func
def main(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        A[0] = 1.0
        y = {call}
'''
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(src)
    assert "<script>:8" in str(e.value) and "index_to_coordinates" in str(e.value)


@pytest.mark.gpu
def test_gpu_transpose_by_flat_index():
    import torch

    kernel = tilecute.compile(transpose_by_flat_index())
    a = torch.randn(6, 10, device="cuda")
    bt = torch.empty(10, 6, device="cuda")
    kernel(a, bt)
    torch.testing.assert_close(bt, a.T.contiguous())
