"""A T.Fragment given only its thread map (TileLang's flash-decoding combine kernels:
``T.Fragment(o.shape, forward_thread_fn=lambda i, j: i)``): TileLang infers the register
index from the parts of the indices the thread map leaves unused (``infer_fragment_index``),
here ``j``; tilecute reads it as each element's rank among its thread's elements."""

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.language.custom_layouts import MapError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def test_inferred_register_index():
    rows = T.Fragment((64, 32), forward_thread_fn=lambda i, j: i)
    thread, local = rows.table()
    grid_i, grid_j = np.divmod(np.arange(64 * 32), 32)
    assert (thread[:, 0] == grid_i).all() and (local[:, 0] == grid_j).all()
    assert rows.get_output_shape() == [32]
    halves = T.Fragment((64, 4), forward_thread_fn=lambda i, j: i % 32)  # i // 32, then j
    _, local = halves.table()
    i, j = np.divmod(np.arange(64 * 4), 4)
    assert (local[:, 0] == (i // 32) * 4 + j).all()
    with pytest.raises(MapError, match="T.Fragment.repeat: this T.Fragment gives only its "
                                       "thread map"):
        rows.repeat([2, 1])


def combine(heads=4, splits=4, rows=64, dim=64):
    @T.prim_func
    def split_combine(part: T.Tensor((heads, splits, rows, dim), "float32"),
                      out: T.Tensor((heads, rows, dim), "float32")):
        with T.Kernel(heads, threads=rows) as h:
            acc = T.alloc_fragment((rows, dim), "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i, j: i)})
            T.clear(acc)
            for k in T.serial(splits):
                for i, j in T.Parallel(rows, dim):
                    acc[i, j] += part[h, k, i, j] * (k + 1)
            T.copy(acc, out[h, 0, 0])
    return split_combine


def test_row_per_thread_fragment_builds(tmp_path):
    info = tilecute.build_cubin(combine(), "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


@pytest.mark.gpu
def test_row_per_thread_fragment_matches_torch():
    import torch

    part = torch.randn(4, 4, 64, 64, device="cuda")
    out = torch.empty(4, 64, 64, device="cuda")
    tilecute.compile(combine())(part, out)
    w = torch.arange(1, 5, device="cuda", dtype=torch.float32)
    torch.testing.assert_close(out, (part * w[None, :, None, None]).sum(1))
