"""``Prev[i:i + 2] = T.atomic_addx2(dst, value, return_prev=True)`` (and ``x4``): TileLang's
``AtomicAddx2Ret`` / ``AtomicAddx4Ret`` give the ``lanes`` elements of ``dst`` before the
adds as one vector of ``dst``'s dtype (each element's add atomic on its own, as CUDA's
``half2`` / ``float4`` atomics are); tilecute stores one ``atomic_add_ret`` per lane into the
target's elements.  CPU: the IR, sm_90a cubins (global and shared, three dtypes), refusals;
GPU: old values and sums against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError

THREADS = 64


def pairs(lanes, dtype):
    """Every thread adds its ``lanes`` values into row ``tx % 4`` of a global tensor and of a
    shared one, keeping the old values of both."""
    add = T.atomic_addx2 if lanes == 2 else T.atomic_addx4

    @T.prim_func
    def main(Val: T.Tensor((THREADS, lanes), dtype), G: T.Tensor((4, lanes), dtype),
             Old: T.Tensor((THREADS, lanes), dtype), OldS: T.Tensor((THREADS, lanes), dtype),
             Sums: T.Tensor((4, lanes), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((4, lanes), dtype)
            T.clear(S)
            T.sync_threads()
            Old[tx, 0:lanes] = add(G[tx % 4, 0], Val[tx, 0], return_prev=True)
            OldS[tx, 0:lanes] = add(S[tx % 4, 0:lanes], Val[tx, 0:lanes], return_prev=True)
            T.sync_threads()
            if tx < 4:
                for j in T.serial(lanes):
                    Sums[tx, j] = S[tx, j]

    return main


@pytest.mark.parametrize("lanes,dtype", [(2, "float16"), (2, "bfloat16"), (2, "float32"),
                                         (4, "float32"), (4, "float16"), (4, "bfloat16")])
def test_vector_old_values_build(lanes, dtype, cache_dir):
    f = pairs(lanes, dtype)
    text = f.script()
    for k in range(lanes):
        assert f"Old[tx, {k}] = T.atomic_add(G[tx % 4, {k}], Val[tx, {k}], return_prev=True)" \
            in text.replace("[tx, 0]", "[tx, 0]")
    kernel = tilecute.compile(f, target="sm_90a")
    assert kernel.get_kernel_source().count("tca.atomic_fetch(") == 2 * lanes
    assert kernel.ensure_cubin().endswith("kernel.cubin")


def _one(body, dtype="float32", prev="float32"):
    text = f'''import tilecute.language as T


@T.prim_func
def bad(D: T.Tensor((8,), "{dtype}"), V: T.Tensor((8,), "{dtype}"), P: T.Tensor((8,), "{prev}")):
    with T.Kernel(1, threads=32) as bx:
        {body}
'''
    return T.from_script(text)


def test_refusals_name_the_form():
    with pytest.raises(FrontendError, match="return_prev=True"):
        _one("P[0:2] = T.atomic_addx2(D[0], V[0])")
    with pytest.raises(FrontendError, match="region of 4 'P' elements"):
        _one("P[0:2] = T.atomic_addx4(D[0], V[0], return_prev=True)")
    with pytest.raises(FrontendError, match="is a float16x2 vector; 'P' is float32"):
        _one("P[0:2] = T.atomic_addx2(D[0], V[0], return_prev=True)", dtype="float16")
    with pytest.raises(FrontendError, match="return_prev=True"):  # no value without it
        _one("x = T.atomic_addx2(D[0], V[0])")
    with pytest.raises(FrontendError, match="statement form"):  # inside another expression
        _one("P[0] = T.extract_lane(T.atomic_addx2(D[0], V[0], return_prev=True), 0) + 1.0")


def test_old_values_bound_to_a_name(cache_dir):
    """``old = T.atomic_addx2(dst, v, return_prev=True)``: TileLang's vector let; each lane's
    atomic runs once, at the binding, into a let (kept where the name goes unread), and
    ``T.extract_lane`` / a region store read the lets."""
    f = _one("old = T.atomic_addx4(D[0:4], V[4:8], return_prev=True)\n"
             "        P[0] = T.extract_lane(old, 3) * 2.0 + T.extract_lane(old, 3)\n"
             "        P[4:8] = old\n"
             "        unread = T.atomic_addx2(D[4], V[0], return_prev=True)")
    src = tilecute.compile(f, target="sm_90a").get_kernel_source()
    assert src.count("tca.atomic_fetch(") == 6
    for k in range(4):
        assert f'old_{k}_ = tca.atomic_fetch(D, ({k},), V[{4 + k}], "add")' in src
        assert f"P[{4 + k}] = old_{k}_" in src
    assert "P[0] = old_3_ * cutlass.Float32(2.0) + old_3_" in src
    assert 'unread_1_ = tca.atomic_fetch(D, (5,), V[1], "add")' in src


@pytest.mark.gpu
@pytest.mark.parametrize("lanes,dtype", [(2, "float16"), (2, "bfloat16"), (4, "float32")])
def test_vector_old_values_match_torch(lanes, dtype):
    import torch

    tdtype = getattr(torch, dtype)
    # small integers: every partial sum is exact in all three dtypes
    val = torch.randint(1, 4, (THREADS, lanes)).to(tdtype).cuda()
    g = torch.zeros(4, lanes, dtype=tdtype, device="cuda")
    old, old_s, sums = (torch.full(s, -1, dtype=tdtype, device="cuda")
                        for s in ((THREADS, lanes), (THREADS, lanes), (4, lanes)))
    tilecute.compile(pairs(lanes, dtype))(val, g, old, old_s, sums)
    torch.cuda.synchronize()
    v = val.float().cpu()
    want = torch.stack([v[r::4].sum(0) for r in range(4)])
    torch.testing.assert_close(g.float().cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(sums.float().cpu(), want, rtol=0, atol=0)
    for prev in (old, old_s):
        p = prev.float().cpu()
        for r in range(4):
            for k in range(lanes):
                # the old values of one element, in update order, are the prefix sums of
                # the values added: sorted by old value each thread's value fills the gap
                rows = sorted(zip(p[r::4, k].tolist(), v[r::4, k].tolist()))
                acc = 0.0
                for o, x in rows:
                    assert o == acc
                    acc += x
