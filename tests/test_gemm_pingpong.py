"""``examples/gemm.py`` ``matmul_pingpong``: CUTLASS's ping-pong GEMM written in TileLang's
explicit forms (``T.ws`` regions, mbarrier rings, ``T.gemm(..., wg_wait=1)`` with
``T.wait_wgmma``, a ``T.macro`` returning a tile's coordinates): two compute warpgroups
take whole tiles in turn, an ``order`` barrier keeps their K loops in turn.  sm_90a cubins
on CPU; on a GPU, against torch for ragged shapes, blocks with odd and even tile counts,
and blocks with no tile."""

import os
import sys

import pytest

import tilecute

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "examples")))
import gemm as G  # noqa: E402


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


@pytest.mark.parametrize("tiles,dtype", [((128, 128, 64, 4), "float16"),
                                         ((64, 256, 64, 4), "bfloat16")])
def test_pingpong_builds_sm90a_cubin(tiles, dtype, tmp_path):
    cubin = tilecute.build_cubin(G.matmul_pingpong(*tiles, dtype=dtype, sms=132), "sm_90a",
                                 out_dir=str(tmp_path))
    assert cubin.kernel_names


def test_pingpong_warpgroups_take_tiles_in_turn():
    src = tilecute.compile(G.matmul_pingpong(sms=132)).get_kernel_source()
    # a producer and two compute warpgroups, each with its own accumulator and shared tile
    for region in ("if tc_tid < 128:  # T.ws(0)", "if tc_tid >= 128 and tc_tid < 256:  # T.ws(1)",
                   "if tc_tid >= 256:  # T.ws(2)"):
        assert region in src
    assert "setmaxregister_decrease(40)" in src and src.count("setmaxregister_increase(232)") == 2
    # warpgroup 1 waits for warpgroup 2's K loop from its second tile on, warpgroup 2 for
    # warpgroup 1's from its first; each hands its turn on after its own K loop
    assert "tct.wait(order + 1, i_1_ // 2 - 1 + 0 & 1)" in src
    assert "tct.wait(order, i_2_ // 2 - 1 + 1 & 1)" in src
    assert src.index("tct.arrive(order)") < src.index("T.ws(2)") < src.index("tct.arrive(order + 1)")
    # the tiles' coordinates come from the macro, once per tile, in every warpgroup
    assert src.count("width = cutlass.min(8, n_tiles - g * 8)") == 1
    assert "width_1_ = " in src and "width_2_ = " in src


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", [(128, 128, 64, 4), (128, 128, 64, 5), (64, 256, 64, 4)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K,sms", [(1000, 776, 520, 132), (256, 384, 64, 132),
                                       (2000, 3000, 1000, 7), (640, 512, 4096, 4)])
def test_pingpong_on_gpu(tiles, dtype, M, N, K, sms):
    import torch

    tdt = getattr(torch, dtype)
    kernel = tilecute.compile(G.matmul_pingpong(*tiles, dtype=dtype, sms=sms))
    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda", dtype=tdt)
    w = torch.randn(K, N, device="cuda", dtype=tdt)
    y = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    kernel(x, w, y)
    ref = x.float() @ w.float()
    tol = (0.02 if dtype == "bfloat16" else 0.005) * ref.abs().max().item()
    assert (y.float() - ref).abs().max().item() <= tol
