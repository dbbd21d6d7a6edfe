"""``T.atomic_add(x[i], v, return_prev=True)`` on float16 and bfloat16 elements: TileLang's
``AtomicAddRet`` (``atomicAdd`` on ``half`` / ``__nv_bfloat16``, which returns the old
value); tilecute's ``atom.add.noftz.f16`` / ``.bf16``, global tensor or shared buffer.  (A
16-bit max or min with a result: tests/test_atomic_minmax_half.py.)"""

import pytest

import tilecute
import tilecute.language as T


def counters(dtype, slots=4, threads=128):
    @T.prim_func
    def main(A: T.Tensor((threads,), dtype), G: T.Tensor((slots,), dtype),
             Old: T.Tensor((threads,), dtype), OldS: T.Tensor((threads,), dtype),
             Sum: T.Tensor((slots,), dtype)):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            S = T.alloc_shared((slots,), dtype)
            if tx < slots:
                S[tx] = 0
            T.sync_threads()
            Old[tx] = T.atomic_add(G[tx % slots], A[tx], return_prev=True)
            OldS[tx] = T.atomic_add(S[tx % slots], A[tx], return_prev=True)
            T.sync_threads()
            if tx < slots:
                Sum[tx] = S[tx]

    return main


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_add_with_result_builds_for_global_and_shared(dtype, cache_dir):
    kernel = tilecute.compile(counters(dtype), target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    source = kernel.get_kernel_source()
    assert source.count("tca.atomic_fetch(") == 2  # one per atomic: G's and S's


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_add_with_result_returns_each_old_value_once(dtype):
    import torch

    slots, threads = 4, 128
    kernel = tilecute.compile(counters(dtype, slots, threads))
    tdtype = getattr(torch, dtype)
    a = torch.ones(threads, dtype=tdtype, device="cuda")  # small integers: exact in both
    g = torch.zeros(slots, dtype=tdtype, device="cuda")
    old, old_s, total = (torch.full((n,), -1, dtype=tdtype, device="cuda")
                         for n in (threads, threads, slots))
    kernel(a, g, old, old_s, total)
    torch.cuda.synchronize()
    per_slot = threads // slots
    expect = torch.arange(per_slot, dtype=torch.float32)
    for prev in (old, old_s):
        for j in range(slots):
            got = prev[j::slots].float().cpu().sort().values
            torch.testing.assert_close(got, expect, rtol=0, atol=0)
    torch.testing.assert_close(g.float().cpu(), torch.full((slots,), float(per_slot)))
    torch.testing.assert_close(total.float().cpu(), torch.full((slots,), float(per_slot)))
