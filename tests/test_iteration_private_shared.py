"""A shared buffer each step of a loop touches at its own slice (``T.copy(row_max,
S[:, k])``: a decode kernel keeping every step's row maxima for a second pass) needs no
barrier per step for what the step before did there: no two steps touch one element.
Where a step reads the slice of another (``S[:, k - 1]``), or a buffer on the same bytes is
touched, the barrier stays."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def step_maxima(steps=8, rows=64, cols=64, previous=False):
    """Row maxima of each step's tile kept in shared memory, normalised after the loop;
    ``previous``: each step also reads the last step's column (a real carry)."""

    @T.prim_func
    def kept(X: T.Tensor((steps, rows, cols), "float32"), O: T.Tensor((rows, steps), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_fragment((rows, cols), "float32")
            m = T.alloc_fragment((rows,), "float32")
            top = T.alloc_fragment((rows,), "float32")
            S = T.alloc_shared((rows, steps), "float32")
            T.fill(top, -T.infinity("float32"))
            for k in T.serial(steps):
                T.copy(X[k, :, :], tile)
                T.reduce_max(tile, m, dim=1)
                if previous:
                    for i in T.Parallel(rows):
                        m[i] = m[i] + T.if_then_else(k > 0, S[i, T.max(k - 1, 0)], 0.0)
                T.copy(m, S[:, k])
                for i in T.Parallel(rows):
                    top[i] = T.max(top[i], m[i])
            for i, j in T.Parallel(rows, steps):
                O[i, j] = S[i, j] - top[i]

    return kept


def _loop_body(func):
    lines = print_func(run_passes(func, "sm_90a", until="insert_barriers")).splitlines()
    at = next(n for n, line in enumerate(lines) if "for k in T.serial(" in line)
    depth = len(lines[at]) - len(lines[at].lstrip())
    body = []
    for line in lines[at + 1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line)
    return "\n".join(body)


def test_no_barrier_per_step_for_each_steps_own_column():
    assert "T.sync_threads(" not in _loop_body(step_maxima())


def test_a_step_reading_the_last_steps_column_keeps_its_barrier():
    assert "T.sync_threads(" in _loop_body(step_maxima(previous=True))


def test_builds():
    kernel = tilecute.compile(step_maxima(), out_idx=[1])
    assert kernel.ensure_cubin().endswith(".cubin")


@pytest.mark.gpu
@pytest.mark.parametrize("previous", [False, True])
def test_step_maxima_on_gpu(previous):
    torch.manual_seed(0)
    steps, rows, cols = 8, 64, 64
    x = torch.randn(steps, rows, cols, device="cuda")
    out = tilecute.compile(step_maxima(steps, rows, cols, previous), out_idx=[1])(x)
    m = x.amax(dim=2).T.contiguous()  # (rows, steps)
    if previous:
        for k in range(1, steps):
            m[:, k] += m[:, k - 1]
    torch.testing.assert_close(out, m - m.amax(dim=1, keepdim=True), rtol=0, atol=0)
