"""A ``T.Parallel`` nest over memory runs ``V`` lanes a thread step only where every global
access is a full vector -- but a read whose index is one value across each aligned group of
``V`` lanes (a group scale ``s[row, j // 128]`` next to the row it scales) need not be: it is
read per lane, as TileLang's planner takes an access invariant within the vector
(``IsExprInvariantInVectorBoundary``).  Such a nest ran one element a thread step: an fp8
cache row dequantised as it was gathered (round 48's sparse MLA decode) read 1 byte a load,
128 steps a thread, where TileLang reads 16 bytes a load."""

import re

import pytest

import tilecute
import tilecute.language as T
import rounds

_arch = rounds.use_arch("TILECUTE_ARCH")


@tilecute.jit(out_idx=[-1])
def dequant_gather(rows=64, D=512, group=128, offset=0, dtype=T.float8_e4m3fn):
    """Out[r, d] = Kq[idx[r], d] * Ks[idx[r], (d + offset) // group] (rows gathered by index)."""
    N = T.dynamic("cache_len")

    @T.prim_func
    def main(Kq: T.Tensor((N, D), dtype), Ks: T.Tensor((N, D // group + 1), T.float32),
             Idx: T.Tensor((rows,), T.int32), Out: T.Tensor((rows, D), T.bfloat16)):
        with T.Kernel(1, threads=256):
            for r, d in T.Parallel(rows, D):
                row = Idx[r]
                Out[r, d] = T.cast(T.cast(Kq[row, d], T.float32) * Ks[row, (d + offset) // group], T.bfloat16)

    return main


_body = rounds.kernel_body


def test_group_scale_read_per_lane_beside_16_byte_loads():
    src = _body(dequant_gather())
    assert "tc_f2 = (tc_k1 * 256 + tc_tid) * 16" in src
    assert "Kq.iterator + cute.assume(Idx[r] * 512 + d, divby=16), cute.make_layout(16)).load()" in src
    assert re.search(r"= Ks\[row, \(\(d \+ tc_lane\d+\) \+ 0\) // 128\]", src)  # one scalar read a lane
    assert dequant_gather().ensure_cubin()


def test_a_group_crossing_the_lanes_narrows_them():
    """``(d + 4) // 128`` is one value over aligned groups of 4 lanes, not of 8: bfloat16 rows
    run 4 lanes (8-byte vectors) where 8 would straddle a group's end."""
    src = _body(dequant_gather(offset=4, dtype=T.bfloat16))
    assert "* 256 + tc_tid) * 4" in src and "cute.make_layout(4)).load()" in src
    assert "* 256 + tc_tid) * 8" not in src
    src = _body(dequant_gather(offset=8, dtype=T.bfloat16))
    assert "* 256 + tc_tid) * 8" in src and "cute.make_layout(8)).load()" in src


@pytest.mark.gpu
def test_dequant_gather_on_gpu():
    import torch
    N, D = 300, 512
    for offset, dt in ((0, torch.float8_e4m3fn), (4, torch.bfloat16), (8, torch.bfloat16)):
        Kq = torch.randn(N, D, device="cuda").to(dt)
        Ks = torch.rand(N, D // 128 + 1, device="cuda") + 0.5
        Idx = torch.randint(0, N, (64,), device="cuda", dtype=torch.int32)
        tdt = T.float8_e4m3fn if dt == torch.float8_e4m3fn else T.bfloat16
        out = dequant_gather(offset=offset, dtype=tdt)(Kq, Ks, Idx)
        cols = (torch.arange(D, device="cuda") + offset) // 128
        ref = (Kq.float()[Idx.long()] * Ks[Idx.long()][:, cols]).to(torch.bfloat16)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
