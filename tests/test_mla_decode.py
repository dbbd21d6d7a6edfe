"""MLA decode (examples/mla_decode.py): DeepSeek-V2/V3 shapes (128 query heads on one
latent KV head, latent 512 + rope 64), a paged latent cache, the score and output
accumulators split over two warpgroups along N (``GemmWarpPolicy.FullCol``), so the row
statistics combine the warpgroups' halves through shared memory.

CPU: the kernels build to sm_90a cubins; the schedule is what the docstring says.  GPU:
against a float32 torch reference for batch 1..64, sequence lengths 1..16k, ragged, and
under CUDA-graph capture."""

import re
import pytest

import mla_decode as M
import tilecute

BUILDS = [  # heads, page_size, num_split, num_stages, dtype
    (128, 64, 4, 2, "float16"),
    (128, 256, 1, 2, "bfloat16"),
    (64, 64, 8, 1, "float16"),
]


@pytest.mark.parametrize("heads,page,split,stages,dtype", BUILDS,
                         ids=[f"H{h}-page{p}-split{s}-stages{st}-{dt}" for h, p, s, st, dt in BUILDS])
def test_mla_decode_builds(heads, page, split, stages, dtype, tmp_path):
    func = M.mla_decode(heads, page_size=page, num_split=split, num_stages=stages, dtype=dtype)
    built = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert len(built.kernel_names) == 2  # split, combine


WS_BUILDS = [  # heads, page_size, num_split, dtype
    (128, 64, 1, "float16"),
    (128, 256, 4, "bfloat16"),
    (64, 64, 2, "float16"),
]


@pytest.mark.parametrize("heads,page,split,dtype", WS_BUILDS,
                         ids=[f"ws-H{h}-page{p}-split{s}-{dt}" for h, p, s, dt in WS_BUILDS])
def test_mla_decode_ws_builds(heads, page, split, dtype, tmp_path):
    func = M.mla_decode_ws(heads, page_size=page, num_split=split, dtype=dtype)
    built = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert len(built.kernel_names) == 2  # split, combine


def test_mla_decode_ws_schedule(cache_dir):
    """Three warpgroups: the producer's TMA loads of the pages, the whole 64 x 64 score
    tile in one warpgroup (no cross-warpgroup row statistics), each half of O in its own."""
    kernel = M.mla_decode_ws_kernel(num_split=2)
    src = kernel.get_kernel_source()
    assert src.count("setmaxregister_increase(232)") == 2 and "setmaxregister_decrease(40)" in src
    assert 'tcm.accumulator("wgmma", (1, 1), (64, 64)' in src  # S: one warpgroup's
    assert src.count('tcm.accumulator("wgmma", (1, 1), (64, 256)') == 2  # O's halves
    assert "m_rows_scratch" not in kernel.get_source("script")  # no row max exchange
    assert src.count("tct.load(") == 4  # Q and Q_pe once; the KV and K_pe pages by the producer


def test_mla_decode_op_chooses_the_kernel():
    with pytest.raises(ValueError, match="'ws' or 'fullcol'"):
        M.mla_decode_op(None, None, None, None, None, None, kernel="both")


def test_mla_decode_schedule(cache_dir):
    kernel = M.mla_decode_kernel(num_split=4)
    script = kernel.get_source("script")
    # two consumer warpgroups split N; the row statistics meet in shared scratch
    assert 'layout=T.Layout("mma", threads=256, mma="wgmma", warps=(1, 2))' in script
    # (the max's exchange leaves its second barrier to the block barrier before P is
    # written to shared memory; the running sum l stays a partial per thread in the loop,
    # its rows added up once after it: deferred row sums)
    assert "T.reduce_max(S, m, dim=1, clear=False, scratch=m_rows_scratch, sync_after=False)" in script
    assert "T.reduce_sum(S, l_step, dim=1, clear=True, partial=True)" in script
    assert "T.combine_rows(l, 'sum', scratch=l_step_rows_scratch)" in script
    # the latent pages come by TMA, looked up per step (the producer reads the block
    # table before it waits for a free stage), two stages
    assert re.search(r"tc_origin\d+ = block_table\[b, ", script)
    assert re.search(r"T.tma_copy\(KV\[tc_origin\d+:", script) and "stage=" in script
    assert [a.name for a in kernel.args] == ["Q", "Q_pe", "KV", "K_pe", "block_table",
                                             "cache_seqlens", "O"]


def test_mla_decode_cluster_multicasts_kv(tmp_path):
    from tilecute.ir.printer import print_func
    from tilecute.transform.pipeline import run_passes

    func = M.mla_decode(num_split=2, cluster=True)
    text = print_func(run_passes(func, "sm_90a"))
    # KV (8 boxes of 64 columns) is shared by the two head blocks; K_pe is one box
    assert re.search(r"T.tma_copy\(KV\[.*multicast=2\)", text)
    assert not re.search(r"T.tma_copy\(K_pe\[.*multicast", text)
    assert "T.cluster_sync()" in text
    built = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert len(built.kernel_names) == 2


def test_choose_schedule():
    # 64-key steps, 2 stages, splits for one wave of blocks (at most 132, one step each)
    assert M.choose_schedule(128, 128, 8192) == dict(num_split=1, block_N=64, num_stages=2)
    assert M.choose_schedule(64, 128, 4096) == dict(num_split=1, block_N=64, num_stages=2)
    assert M.choose_schedule(16, 128, 4096) == dict(num_split=4, block_N=64, num_stages=2)
    assert M.choose_schedule(1, 128, 8192) == dict(num_split=16, block_N=64, num_stages=2)
    assert M.choose_schedule(1, 128, 128)["num_split"] == 2  # every split has a step
    for batch in (1, 2, 16, 33, 64, 200):
        s = M.choose_schedule(batch, 128, 1 << 20)
        assert batch * 2 * s["num_split"] <= 132 or s["num_split"] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("batch,lens,dtype,schedule", [
    (1, [1], "float16", {}),
    (2, [127, 1000], "float16", {}),
    (3, [4097, 64, 16384], "bfloat16", {}),
    (64, None, "float16", {}),
    (3, [4097, 64, 1000], "float16", dict(num_split=3, block_N=32, num_stages=3)),
    # the two head blocks in a cluster, their KV tiles multicast; ragged lengths, an
    # empty split (num_split 4 over 64 keys), 3 stages
    (4, [4097, 64, 16384, 1], "float16", dict(cluster=True)),
    (3, [1000, 64, 5000], "bfloat16", dict(num_split=4, block_N=32, num_stages=3, cluster=True)),
    # TileLang's FullCol kernel at the default schedule; the warp-specialized one (the
    # default) with splits, empty splits and a sequence with no key (output 0)
    (2, [127, 1000], "float16", dict(kernel="fullcol")),
    (4, [0, 65, 640, 16384], "float16", dict(num_split=4)),
    (3, [1, 4097, 200], "bfloat16", dict(num_split=2, kernel="ws")),
    (5, [0, 1, 64, 65, 3000], "float16", dict(num_split=16, kernel="fullcol")),
])
def test_mla_decode_matches_torch(batch, lens, dtype, schedule):
    import torch

    torch.manual_seed(batch)
    dt = getattr(torch, dtype)
    lens = lens or torch.randint(1, 2048, (batch,)).tolist()
    q = torch.randn(batch, 128, 512, dtype=dt, device="cuda")
    q_pe = torch.randn(batch, 128, 64, dtype=dt, device="cuda")
    cache = M.make_cache(batch, 512, 64, 64, lens, dt, "cuda")
    out = M.mla_decode_op(q, q_pe, *cache, **schedule)
    ref = M.reference(q, q_pe, *cache)  # (a sequence with no key: 0)
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_mla_decode_under_cuda_graph():
    import torch

    torch.manual_seed(0)
    q = torch.randn(2, 128, 512, dtype=torch.float16, device="cuda")
    q_pe = torch.randn(2, 128, 64, dtype=torch.float16, device="cuda")
    cache = M.make_cache(2, 512, 64, 64, [600, 17], torch.float16, "cuda")
    for kernel in (M.mla_decode_kernel(num_split=4), M.mla_decode_ws_kernel(num_split=4)):
        _replayed(kernel, q, q_pe, cache)


def _replayed(kernel, q, q_pe, cache):
    import torch

    kernel(q, q_pe, *cache)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel(q, q_pe, *cache)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), M.reference(q, q_pe, *cache), atol=2e-2, rtol=2e-2)


def test_mla_decode_op_shapes_under_fake_tensors(cache_dir):
    """A registered torch op (its fake implementation allocates the output by the
    symbols the inputs bind), so it traces under torch.compile; the workspaces stay
    out of its schema."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import tilecute.torch

    kernel = M.mla_decode_kernel(heads=64, num_split=2)
    op = tilecute.torch.register(kernel, "tilecute_tests::mla_decode_h64")
    assert "lse_partial" not in str(op._schema) and "o_partial" not in str(op._schema)
    with FakeTensorMode():
        q = torch.empty(3, 64, 512, dtype=torch.float16)
        q_pe = torch.empty(3, 64, 64, dtype=torch.float16)
        kv = torch.empty(10, 64, 1, 512, dtype=torch.float16)
        kpe = torch.empty(10, 64, 1, 64, dtype=torch.float16)
        out = op(q, q_pe, kv, kpe, torch.empty(3, 4, dtype=torch.int32), torch.empty(3, dtype=torch.int32))
        assert tuple(out.shape) == (3, 64, 512) and out.dtype == torch.float16
