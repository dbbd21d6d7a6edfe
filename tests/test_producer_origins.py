"""The producer warpgroup reads a TMA origin that comes from a global tensor (a paged
cache's block table) before it waits for a free stage, so the read's latency passes
during the wait (transform/warp_specialize.read_origins_first)."""

import re

import pytest

import tilecute
import tilecute.language as T

B, P, pages = T.symbolic("B"), T.symbolic("P"), T.symbolic("pages")


def paged_scores():
    @T.prim_func
    def paged_scores(KV: T.Tensor((P, 64, 128), "float16"), table: T.Tensor((B, pages), "int32"),
                     Q: T.Tensor((B, 64, 128), "float16"), S: T.Tensor((B, 64, 64), "float32")):
        with T.Kernel(B, threads=128) as b:
            Q_s = T.alloc_shared((64, 128), "float16")
            K_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(Q[b, :, :], Q_s)
            T.clear(acc)
            for k in T.Pipelined(pages, num_stages=2, warp_specialize=True):
                page = table[b, k]
                T.copy(KV[page, :, :], K_s)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
            T.copy(acc, S[b, :, :])
    return paged_scores


def producer_loop(kernel) -> list[str]:
    """The lines of the producer's loop in the printed lowered IR."""
    script = kernel.get_source("script").splitlines()
    start = next(i for i, line in enumerate(script) if re.search(r"for tc_j\d* in", line))
    indent = len(script[start]) - len(script[start].lstrip())
    body = []
    for line in script[start + 1:]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line.strip())
    return body


def test_block_table_read_before_the_stage_wait():
    kernel = tilecute.compile(paged_scores(), target="sm_90a")
    body = producer_loop(kernel)
    read = next(i for i, s in enumerate(body) if re.match(r"tc_origin\d* = table\[b, ", s))
    wait = next(i for i, s in enumerate(body) if "T.mbarrier_wait_parity" in s)
    copy = next(i for i, s in enumerate(body) if "T.tma_copy" in s)
    assert read < wait < copy
    assert "table[" not in body[copy]  # the copy's origin is the bound read
    assert kernel.ensure_cubin().endswith(".cubin")


def test_a_tensor_the_kernel_writes_is_read_where_it_was():
    """read_origins_first leaves origins that read a written tensor in place (the TMA pass
    makes no such copy today; the rule holds on its own)."""
    from tilecute.ir import nodes as N
    from tilecute.transform.warp_specialize import read_origins_first

    i32 = lambda v: N.Const(v, "int32")  # noqa: E731
    page = N.Load("table", (N.Var("b", "int32"), N.Var("tc_j0", "int32")), "int32")
    copy = N.TmaCopy(N.Region("KV", (page, i32(0), i32(0))), N.Region("K_s", (i32(0), i32(0))))
    wait = N.MBarrierWait(N.Region("tc_bar1", (i32(0),)), i32(0))
    assert read_origins_first([wait, copy], {"table"}, lambda s: s + "0", None) == [wait, copy]
    lets = read_origins_first([wait, copy, copy], set(), lambda s: s + "0", None)
    assert isinstance(lets[0], N.Let) and lets[0].value == page and len(lets) == 4
    assert lets[2].src.starts[0] == lets[0].var == lets[3].src.starts[0]


@pytest.mark.gpu
def test_paged_scores_on_gpu():
    import torch

    kernel = tilecute.compile(paged_scores())
    nb, npages = 3, 5
    kv = torch.randn(nb * npages + 2, 64, 128, device="cuda", dtype=torch.float16)
    table = torch.randperm(nb * npages + 2, device="cuda")[:nb * npages].view(nb, npages).int()
    q = torch.randn(nb, 64, 128, device="cuda", dtype=torch.float16)
    out = torch.empty(nb, 64, 64, device="cuda", dtype=torch.float32)
    kernel(kv, table, q, out)
    ref = sum(q.float() @ kv[table[:, k].long()].float().transpose(1, 2) for k in range(npages))
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-3)
