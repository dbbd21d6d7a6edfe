"""Atomics in tile ops and T.Parallel loops of a block with ``threads=(x, y[, z])``.
TileLang spreads tile ops and T.Parallel loops over threadIdx.x alone, so each y/z row of
the block runs them again: plain loads and stores give the same result as tilecute's
spread over all the block's threads, but an atomic would count y x z times in TileLang and
once in tilecute.  Those atomics are refused by name and line; per-thread atomics and 1-D
blocks are unchanged."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.validate import ValidationError


def _src(body, threads="(32, 4)"):
    return f'''
@T.prim_func
def hist(X: T.Tensor((128,), "int32"), H: T.Tensor((16,), "int32"), S: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads={threads}) as bx:
        tx = T.get_thread_binding(0)
        ty = T.get_thread_binding(1)
        s = T.alloc_shared((128,), "float32")
        {body}
'''


PARALLEL = """for i in T.Parallel(128):
            T.atomic_add(H[X[i] % 16], 1)"""
PARALLEL_RET = """for i in T.Parallel(128):
            S[i] = T.cast(T.atomic_add(H[X[i] % 16], 1, return_prev=True), "float32")"""
TILE = """T.copy(S, s)
        T.atomic_add(S, s)"""


@pytest.mark.parametrize("body, what", [(PARALLEL, "an atomic in a T.Parallel loop"),
                                        (PARALLEL_RET, "an atomic in a T.Parallel loop"),
                                        (TILE, "a tile atomic (T.atomic_add of a region)")],
                         ids=["parallel", "parallel-return-prev", "tile"])
def test_atomics_tilelang_would_repeat_per_row_are_refused(body, what):
    with pytest.raises(ValidationError, match="threads=\\(32, 4\\): TileLang runs tile ops") as e:
        T.from_script(_src(body), filename="hist.py")
    assert what in str(e.value) and "hist.py:" in str(e.value)


PER_THREAD = """if tx < 32 and ty == 0:
            T.atomic_add(H[X[tx] % 16], 1)"""


@pytest.mark.parametrize("body, threads", [(PER_THREAD, "(32, 4)"), (PARALLEL, "128"),
                                           (TILE, "(128, 1)"), (PARALLEL, "(128, 1, 1)")],
                         ids=["per-thread", "1-d", "tile y=1", "parallel y=z=1"])
def test_per_thread_atomics_and_1d_blocks_are_unchanged(body, threads, tmp_path):
    func = T.from_script(_src(body, threads))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
