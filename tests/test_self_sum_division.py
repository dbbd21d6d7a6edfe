"""An integer ``x + x`` is printed as ``x * 2``: CuTe DSL 4.8's lowering folds a signed
``(i + i) // c`` (or ``% c``, TileLang's truncdiv / truncmod) over a loop index as if it
were ``i // c``.  ``sum((i + i) // 4 for i in range(6))`` came out 2, not 6 (fuzzer scalar
seed 4424), while ``i * 2`` divides right."""

import pytest
import torch

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def doubled_steps(steps=6, dtype="int8"):
    """Per thread: ``acc += (i + i) // 4``, ``rem += T.truncmod(i + i + 1, 4)`` and a
    local element updated at ``T.truncmod(i + i, 2)`` for ``i < steps``."""

    @T.prim_func
    def doubled(O: T.Tensor((128, 3), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var("int32", init=0)
            rem = T.alloc_var("int32", init=0)
            loc = T.alloc_local((2,), dtype)
            for k in T.serial(2):
                loc[k] = k
            for i in T.serial(steps):
                acc += (i + i) // 4
                rem += T.truncmod(i + i + 1, 4)
                loc[T.truncmod(i + i, 2)] = T.Cast(dtype, loc[T.truncmod(i + i, 2)] +
                                                   T.truncdiv(i + i, 4) + (tx + tx) // 64)
            O[tx, 0] = acc
            O[tx, 1] = rem
            O[tx, 2] = T.Cast("int32", loc[0])

    return doubled


def test_a_self_sum_is_printed_doubled():
    src = tilecute.compile(doubled_steps(), out_idx=[0]).get_kernel_source()
    body = src[src.index("def tilecute_doubled_0"):src.index("set_name_prefix")]
    assert "i + i" not in body and "tx + tx" not in body
    assert "i * 2 // 4" in body and "tx * 2" in body


@pytest.mark.gpu
def test_doubled_steps_on_gpu():
    out = tilecute.compile(doubled_steps(), out_idx=[0])()
    tx = torch.arange(128)
    want = torch.stack([
        torch.full((128,), sum((2 * i) // 4 for i in range(6))),
        torch.full((128,), sum((2 * i + 1) % 4 for i in range(6))),
        sum((2 * i) // 4 for i in range(6)) + 6 * ((2 * tx) // 64),
    ], dim=1).to(torch.int32)
    assert torch.equal(out.cpu(), want)
