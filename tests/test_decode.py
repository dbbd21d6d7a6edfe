"""Decode attention (examples/decode.py): split-KV flash decoding over a paged KV cache.

CPU: every variant builds to an sm_90a cubin (both kernels, the workspaces in the launch
ABI), the op's shapes under fake tensors, the num_split heuristic, and the reference's
split/combine algebra.  GPU: against a float32 torch reference for batch 1..128,
sequence lengths 1..64k, page sizes 16/64/256, ragged ``cache_seqlens``, and under
CUDA-graph capture."""

import math

import pytest

import decode as D
import tilecute

BUILDS = [  # heads, kv_heads, dim, page_size, num_split, dtype
    (32, 8, 128, 16, 4, "float16"),
    (64, 8, 128, 64, 16, "bfloat16"),
    (16, 2, 128, 256, 32, "float16"),
    (16, 1, 64, 64, 1, "float16"),
]


@pytest.mark.parametrize("heads,kv_heads,dim,page,split,dtype", BUILDS,
                         ids=[f"H{h}-KV{kv}-D{d}-page{p}-split{s}-{dt}" for h, kv, d, p, s, dt in BUILDS])
def test_decode_builds(heads, kv_heads, dim, page, split, dtype, tmp_path):
    func = D.paged_decode(heads, kv_heads, dim, page, split, dtype=dtype)
    assert func.workspaces == ("lse_partial", "o_partial")
    built = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert len(built.kernel_names) == 2  # split, combine


def test_decode_abi_and_paged_loads(cache_dir):
    """The workspaces are launch arguments the caller never sees; a page at least one
    key step long is loaded by TMA, pipelined, its page looked up per step."""
    kernel = D.paged_decode_kernel(16, 2, 128, 256, 8)
    ws = [a.name for a in kernel.abi.args if getattr(a, "workspace", False)]
    assert ws == ["lse_partial", "o_partial"]
    assert [a.name for a in kernel.args] == ["Q", "K_pages", "V_pages", "block_table",
                                             "cache_seqlens", "O"]
    script = kernel.get_source("script")
    assert "T.tma_copy(K_pages[block_table[b" in script and "stage=" in script
    # the sequence split: a workspace of (batch, heads, num_split) log-sum-exps
    assert 'lse_partial = T.alloc_global((batch, 16, 8), "float32")' in script


def test_decode_op_shapes_under_fake_tensors(cache_dir):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import tilecute.torch

    kernel = D.paged_decode_kernel(8, 2, 64, 16, 2)
    op = tilecute.torch.register(kernel, "tilecute_tests::paged_decode_h8_kv2")
    assert "lse_partial" not in str(op._schema) and "o_partial" not in str(op._schema)
    with FakeTensorMode():
        q = torch.empty(3, 8, 64, dtype=torch.float16)
        k = torch.empty(10, 16, 2, 64, dtype=torch.float16)
        out = op(q, k, k, torch.empty(3, 4, dtype=torch.int32), torch.empty(3, dtype=torch.int32))
        assert tuple(out.shape) == (3, 8, 64) and out.dtype == torch.float16


def test_num_split_heuristic():
    # one sequence, 8 KV heads on 132 SMs: 33 -> 64 splits (two waves), capped by length
    assert D.choose_num_split(1, 8, 65536) == 32  # capped: the combine grows with it
    assert D.choose_num_split(1, 8, 1000) == 16  # ceil(1000 / 64) = 16 steps
    assert D.choose_num_split(128, 8, 65536) == 1  # the batch fills the GPU
    assert D.choose_num_split(4, 8, 8192) == 16


def test_split_combine_algebra():
    """The partials and base-2 log-sum-exps the split kernel writes, combined as the
    combine kernel does, are the softmax over all keys (the reference's algebra)."""
    import torch

    torch.manual_seed(0)
    s = torch.randn(4, 1000, dtype=torch.float64) * 3
    v = torch.randn(1000, 16, dtype=torch.float64)
    full = s.softmax(-1) @ v
    parts, lses = [], []
    for chunk_s, chunk_v in zip(s.split(300, -1), v.split(300, 0)):
        m = chunk_s.max(-1, keepdim=True).values
        p = torch.exp2((chunk_s - m) / math.log(2))
        parts.append(p @ chunk_v / p.sum(-1, keepdim=True))
        lses.append(m.squeeze(-1) / math.log(2) + torch.log2(p.sum(-1)))
    lse = torch.stack(lses, -1)
    w = torch.exp2(lse - lse.max(-1, keepdim=True).values)
    w = w / w.sum(-1, keepdim=True)
    combined = sum(w[:, i:i + 1] * parts[i] for i in range(len(parts)))
    torch.testing.assert_close(combined, full)


GPU_CASES = [  # heads, kv_heads, dim, page, seqlens, num_split (None: the heuristic), dtype
    (32, 8, 128, 16, [1, 77, 1000], 4, "float16"),
    (32, 8, 128, 16, [5, 3000], None, "bfloat16"),
    (64, 8, 128, 64, [4096, 33, 64, 65], 16, "float16"),
    (16, 2, 128, 256, [65536], None, "float16"),
    (16, 2, 128, 256, [255, 256, 257], 2, "bfloat16"),
    (16, 1, 64, 64, [17, 1], 1, "float16"),
    (32, 8, 128, 64, "ragged128", None, "float16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("heads,kv_heads,dim,page,seqlens,split,dtype", GPU_CASES,
                         ids=[f"H{c[0]}-KV{c[1]}-D{c[2]}-page{c[3]}-{c[6]}-{i}"
                              for i, c in enumerate(GPU_CASES)])
def test_decode_matches_torch(heads, kv_heads, dim, page, seqlens, split, dtype):
    import torch

    torch.manual_seed(1)
    if seqlens == "ragged128":
        seqlens = torch.randint(1, 2049, (128,)).tolist()
    dt = getattr(torch, dtype)
    q = torch.randn(len(seqlens), heads, dim, dtype=dt, device="cuda")
    cache = D.make_cache(len(seqlens), kv_heads, dim, page, seqlens, dt, "cuda")
    out = D.paged_decode_op(q, *cache, num_split=split)
    torch.testing.assert_close(out.float(), D.reference(q, *cache), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("block_N,stages", [(64, 2), (64, 3), (16, 2)])
def test_decode_page16_steps_match_torch(block_N, stages):
    """Page 16 with 64-key steps (the default: each K/V tile is four TMA copies, one per
    page) and with one page per step."""
    import torch

    torch.manual_seed(2)
    seqlens = [1, 15, 16, 17, 1000, 4097]
    q = torch.randn(len(seqlens), 32, 128, dtype=torch.float16, device="cuda")
    cache = D.make_cache(len(seqlens), 8, 128, 16, seqlens, torch.float16, "cuda")
    out = D.paged_decode_op(q, *cache, num_split=4, block_N=block_N, num_stages=stages)
    torch.testing.assert_close(out.float(), D.reference(q, *cache), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_decode_under_cuda_graph():
    """Both kernels and the workspace allocation replay from a graph; new cache contents
    and lengths (same shapes) give new answers with no host sync."""
    import torch

    kernel = D.paged_decode_kernel(32, 8, 128, 64, 8)
    q = torch.randn(2, 32, 128, dtype=torch.float16, device="cuda")
    k, v, table, lens = D.make_cache(2, 8, 128, 64, [900, 3000], torch.float16, "cuda")
    kernel(q, k, v, table, lens)  # load before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel(q, k, v, table, lens)
    k.normal_()
    lens.copy_(torch.tensor([600, 17], dtype=torch.int32))  # within each row's pages
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), D.reference(q, k, v, table, lens), atol=2e-2, rtol=2e-2)
