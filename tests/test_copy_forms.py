"""T.copy forms of TileLang's language tests: two single elements
(``T.copy(A[i], B[j])``: TileLang's scalar-BufferLoad case, the one element is stored),
the region aliases of TileLang's buffer-region bindings (``X = A_shared[:M, :K]`` then
used as a buffer) and a 1-D fragment written at an affine combination of a 2-D loop's
variables (``b[i * N + j] = a[i, j]``)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def _one_element(N_=256, block_N=64):
    @T.prim_func
    def one_element(A: T.Tensor((N_,), "int32"), B: T.Tensor((N_,), "int32")):
        with T.Kernel(T.ceildiv(N_, block_N), threads=block_N) as bx:
            T.copy(A[bx * block_N], B[bx * block_N + 1])
    return one_element


def test_copy_of_two_elements_copies_one_element():
    func = run_passes(_one_element(), "sm_90a", until="lower_tile_ops")
    stores = [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Store)]
    assert len(stores) == 1
    text = print_func(func)
    # one element: a nest of extent 1 storing A[bx * 64] at B[bx * 64 + 1]
    assert "T.Parallel(1)" in text, text
    assert "B[bx * 64 + 1 + i1] = A[bx * 64 + i1]" in text, text


def test_copy_of_two_elements_builds(tmp_path):
    info = tilecute.build_cubin(_one_element(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_one_element_0"]


@pytest.mark.gpu
def test_copy_of_two_elements_on_gpu():
    import torch
    kernel = tilecute.compile(_one_element())
    a = torch.arange(256, dtype=torch.int32, device="cuda")
    b = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    kernel(a, b)
    want = torch.full((256,), -1, dtype=torch.int32)
    for bx in range(4):
        want[bx * 64 + 1] = bx * 64
    assert torch.equal(b.cpu(), want)
