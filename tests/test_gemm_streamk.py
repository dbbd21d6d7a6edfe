"""``examples/gemm.py`` ``matmul_streamk``: a persistent GEMM whose last waves' K loops are
split evenly over the blocks (data-parallel + stream-K, against wave quantization).  The
split checked on the host (``streamk_plan``: every (tile, k) step exactly once, the counts
that make a tile's last contributor); the sm_90a build and its generated code (one
warp-specialized wgmma loop with run-time K bounds, vector ``red`` into the workspace, an
``acq_rel`` arrival counter, ptxas keeping the wgmma pipeline); on a GPU, against torch,
twice per workspace (the kernel leaves it zero)."""

import glob
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

import tilecute
from tilecute.codegen.cute import emit_cute
from tilecute.runtime.cubingen import _import_source
from tilecute.transform.pipeline import lower

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "examples")))
import gemm as G  # noqa: E402

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _check_plan(M, N, K, tm, tn, tk, sms, group=8, sk_waves=1):
    """The plan covers each (tile, k) step once; each tile's units sum to its K steps; a
    tile done whole by one unit is the only unit of it; stream-K slots lie in [0, 2 sms);
    each block's stream-K steps differ by at most one between blocks."""
    m_tiles, n_tiles, ipt = -(-M // tm), -(-N // tn), -(-K // tk)
    tiles = m_tiles * n_tiles
    plan = G.streamk_plan(M, N, K, tm, tn, tk, sms, group, sk_waves)
    assert len(plan) == sms
    steps = Counter()
    units_of = defaultdict(list)
    coords = {}
    sk_steps = []
    for b, units in enumerate(plan):
        mine = 0
        for t, row, col, k_lo, k_hi, s in units:
            assert 0 <= t < tiles and 0 <= row < m_tiles and 0 <= col < n_tiles
            assert coords.setdefault(t, (row, col)) == (row, col)
            assert 0 <= k_lo < k_hi <= ipt
            for k in range(k_lo, k_hi):
                steps[t, k] += 1
            units_of[t].append((b, k_lo, k_hi))
            if s >= 0:
                assert s < 2 * sms
                mine += k_hi - k_lo
        sk_steps.append(mine)
    assert set(steps) == {(t, k) for t in range(tiles) for k in range(ipt)}
    assert set(steps.values()) == {1}
    assert len(set(coords.values())) == tiles  # the tile order is a bijection
    assert max(sk_steps) - min(sk_steps) <= 1
    contributors = {t: len(u) for t, u in units_of.items()}
    # a stream-K tile's contributors: one more than the block boundaries strictly inside
    # its steps (boundary b at step b * q + min(b, r) of the concatenated stream-K steps)
    full = max(tiles // sms - sk_waves, 0) * sms
    q, r = divmod((tiles - full) * ipt, sms)
    cuts = [b * q + min(b, r) for b in range(1, sms)]
    for t in range(full, tiles):
        s = t - full
        assert contributors[t] == 1 + sum(1 for c in cuts if s * ipt < c < (s + 1) * ipt)
    assert all(contributors[t] == 1 for t in range(full))
    for t, units in units_of.items():
        if len(units) > 1:  # split: no unit is whole, the arrival counter sums to ipt
            assert all(k_hi - k_lo < ipt for _, k_lo, k_hi in units)
            assert sum(k_hi - k_lo for _, k_lo, k_hi in units) == ipt
            assert len({b for b, _, _ in units}) == len(units)  # one unit per block
    return plan, contributors


@pytest.mark.parametrize("M,N,K,tm,tn,tk,sms", [
    (4096, 4096, 4096, 128, 256, 64, 132),    # 512 tiles: 3.88 waves
    (4096, 11008, 4096, 128, 256, 64, 132),   # 1376 tiles: 10.42 waves
    (1000, 776, 520, 128, 256, 64, 132),      # ragged, 32 tiles < sms
    (4224, 4096, 1024, 128, 256, 64, 132),    # 528 tiles = 4 whole waves
    (2000, 3000, 1000, 128, 128, 64, 7),
    (640, 512, 64, 64, 128, 64, 13),          # one K step a tile
    (300, 200, 8192, 128, 128, 64, 108),
    (200, 300, 128, 128, 256, 64, 132),       # 8 steps over 132 blocks: q = 0
    (128, 256, 64, 128, 256, 64, 132),        # one tile, one step
])
@pytest.mark.parametrize("sk_waves", [1, 0])
def test_streamk_split_covers_every_step_once(M, N, K, tm, tn, tk, sms, sk_waves):
    plan, contributors = _check_plan(M, N, K, tm, tn, tk, sms, sk_waves=sk_waves)
    tiles = -(-M // tm) * -(-N // tn)
    if tiles % sms == 0:  # the last wave's tiles are dealt one a block: nothing is split
        assert set(contributors.values()) == {1}
    if sk_waves == 0:  # only the partial wave's tiles are split: tiles // sms whole
        assert sum(1 for c in contributors.values() if c == 1) >= tiles // sms * sms
        return
    if (M, N, K) == (4096, 11008, 4096):
        # 9 data-parallel waves (1188 tiles), 188 tiles' 12032 steps over 132 blocks:
        # 91 or 92 steps each (more than a tile's 64), spanning 2 or 3 tiles; a tile
        # shared by 2 blocks at most
        assert all(len(units) - 9 in (2, 3) for units in plan)
        assert max(contributors.values()) == 2
        assert sum(1 for c in contributors.values() if c > 1) == 129  # 59 fall whole
    if (M, N, K) == (1000, 776, 520):  # 32 tiles x 9 steps over 132 blocks: 2-3 steps
        assert all(len(units) in (1, 2) for units in plan)


@pytest.fixture(scope="module")
def streamk_source():
    return tilecute.compile(G.matmul_streamk(), target="sm_90a").get_kernel_source()


def test_streamk_builds_sm90a_cubin(tmp_path):
    """One cubin serves 4096^3, 4096 x 11008 x 4096 and ragged shapes (M, N, K are
    symbols: the split is computed in the kernel)."""
    for dtype in ("float16", "bfloat16"):
        cubin = tilecute.build_cubin(G.matmul_streamk(dtype=dtype), "sm_90a",
                                     out_dir=str(tmp_path / dtype))
        assert cubin.kernel_names


def test_streamk_generated_code(streamk_source):
    src = streamk_source
    # a producer warpgroup issues the TMA loads, at run-time bounds, and keeps its stage
    # count running across the units
    assert "cute.arch.setmaxregister_decrease(24)" in src
    assert "for tc_j0 in cutlass.range(0, k_hi - k_lo):" in src
    assert "tc_pbase0[0] = tc_pbase0[0] + cutlass.max(k_hi - k_lo, 0)" in src
    assert src.count("tct.load(X_desc") == 1 and src.count("tct.load(W_desc") == 1
    # the compute loop: wgmma on the stages, one batch in flight, from k_lo to k_hi
    assert "for k in cutlass.range(k_lo, k_lo + (k_hi - k_lo)):" in src
    assert src.count("tcm.gemm(tc_mma0") == 1 and ', "wgmma"), wait=1)' in src
    # the partial tile: vector red into the workspace slot, the acq_rel arrival count
    # after a barrier of the compute threads, the count shared through shared memory
    assert "tca.atomic_add_view(cute.make_tensor(Ws.iterator + cute.assume(s * 32768" in src
    assert 'tca.atomic_fetch(Cnt, (s,), k_hi - k_lo, "add", order="acq_rel")' in src
    i_red = src.index("tca.atomic_add_view")
    i_bar = src.index("cute.arch.barrier(barrier_id=1, number_of_threads=256)", i_red)
    i_cnt = src.index("tca.atomic_fetch(Cnt")
    assert i_red < i_bar < i_cnt
    # the last contributor reads the slot, stores through the shared tile, zeroes the slot
    # and the counter
    assert "if done[0] == ipt:" in src and "Cnt[s] = 0" in src
    assert src.count("tct.store(Y_desc") == 2


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="needs ptxas (CUDA toolkit)")
def test_streamk_ptx(tmp_path):
    """The PTX has the vector reds and the acq_rel atom; ptxas does not serialize the
    wgmma loop (C7514) and spills nothing."""
    import cutlass.cute as cute

    plan = lower(G.matmul_streamk(dtype="bfloat16"), "sm_90a")
    path = tmp_path / "k.py"
    path.write_text(emit_cute(plan))
    module = _import_source(str(path), "tilecute_streamk_ptx_check")
    cute.compile(getattr(module, plan.func.name), *module.placeholder_args(),
                 options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    (ptx,) = glob.glob(str(tmp_path / "*.ptx"))
    text = open(ptx).read()
    out = subprocess.run([PTXAS, "-arch=sm_90a", "-v", ptx, "-o", str(tmp_path / "x.cubin")],
                         capture_output=True, text=True, check=True)
    assert "wgmma.mma_async" in text and "setmaxnreg" in text
    # a pair of accumulator registers a red: 128 x 256 over 256 threads is 64 pairs
    assert text.count("red.relaxed.gpu.global.add.v2.f32") == 64
    assert text.count("atom.global.acq_rel.add.u32") == 1  # .gpu: atom's default scope
    assert "C7514" not in out.stderr and "serialized" not in out.stderr, out.stderr
    assert "0 bytes spill stores" in out.stderr, out.stderr


# ---- on a GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,sms,dtype,sk_waves", [
    (4096, 11008, 512, 132, "bfloat16", 1),  # 1376 tiles: 9 whole waves, then stream-K
    (4096, 11008, 512, 132, "float16", 0),   # 10 whole waves, the last 56 tiles split
    (1000, 776, 520, 132, "bfloat16", 1),    # ragged, 32 tiles < sms: all stream-K
    (4224, 4096, 256, 132, "float16", 1),    # 528 tiles = 4 waves: nothing split
    (1999, 1000, 1032, 13, "float16", 1),    # ragged M, N; 64 tiles over 13 blocks
    (1999, 1000, 1032, 13, "bfloat16", 0),
    (200, 296, 128, 132, "bfloat16", 1),     # 4 tiles x 2 steps: 8 blocks of one step each
])
def test_streamk_on_gpu(M, N, K, sms, dtype, sk_waves):
    import torch

    torch.manual_seed(0)
    tdt = getattr(torch, dtype)
    kernel = tilecute.compile(G.matmul_streamk(dtype=dtype, sms=sms, sk_waves=sk_waves))
    x = torch.randn(M, K, device="cuda", dtype=tdt)
    w = torch.randn(K, N, device="cuda", dtype=tdt)
    ws = torch.zeros(2 * sms, 128, 256, device="cuda", dtype=torch.float32)
    cnt = torch.zeros(2 * sms, device="cuda", dtype=torch.int32)
    ref = x.float() @ w.float()
    tol = (0.02 if dtype == "bfloat16" else 0.005) * ref.abs().max().item()
    for _ in range(2):  # the second call finds the workspace the first left zero
        y = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
        kernel(x, w, ws, cnt, y)
        torch.cuda.synchronize()
        assert (y.float() - ref).abs().max().item() <= tol
        assert not ws.any().item() and not cnt.any().item()
