"""A FlashAttention backward written the TileLang way (preprocess: Delta = rowsum(O * dO) on a
32 x 32 fragment of 128 threads, whose rows reduce in lane groups; the main kernel: K/V
tile per block, Q/dO pipelined, dV and dK accumulated, dQ by tile atomics), against torch
autograd.  CPU: both build to sm_90a cubins.  GPU: gradients match."""

import math

import pytest

import tilecute
import tilecute.language as T

@tilecute.jit(out_idx=[2])
def bwd_prep(batch, heads, seq_len, dim):
    dtype, accum_dtype = "float16", "float"
    shape = [batch, seq_len, heads, dim]
    blk = 32

    @T.prim_func
    def prep(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype), Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, blk), batch) as (bx, by, bz):
            o = T.alloc_fragment([blk, blk], dtype)
            do = T.alloc_fragment([blk, blk], dtype)
            acc = T.alloc_fragment([blk, blk], accum_dtype)
            delta = T.alloc_fragment([blk], accum_dtype)
            T.clear(acc)
            for k in range(T.ceildiv(dim, blk)):
                T.copy(O[bz, by * blk:(by + 1) * blk, bx, k * blk:(k + 1) * blk], o)
                T.copy(dO[bz, by * blk:(by + 1) * blk, bx, k * blk:(k + 1) * blk], do)
                for i, j in T.Parallel(blk, blk):
                    acc[i, j] += o[i, j] * do[i, j]
            T.reduce_sum(acc, delta, 1)
            T.copy(delta, Delta[bz, bx, by * blk:(by + 1) * blk])
    return prep


@tilecute.jit
def bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, threads=128):
    sm_scale = (1.0 / dim) ** 0.5
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype, accum_dtype = "float16", "float"

    @T.prim_func
    def flash_bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  dO: T.Tensor(shape, dtype), lse: T.Tensor([batch, heads, seq_len], accum_dtype),
                  Delta: T.Tensor([batch, heads, seq_len], accum_dtype),
                  dQ: T.Tensor(shape, accum_dtype), dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv_shared = T.alloc_shared([block_M, dim], dtype)
            dk_shared = T.alloc_shared([block_M, dim], dtype)

            T.copy(K[bz, by * block_M:(by + 1) * block_M, bx, :], K_shared)
            T.copy(V[bz, by * block_M:(by + 1) * block_M, bx, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(by * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=2):
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, bx, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, bx, k * block_N:(k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(by * block_M + i <= k * block_N + j, qkT[i, j], 0)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, bx, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[bz, bx, k * block_N:(k + 1) * block_N], delta)
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, k * block_N + i, bx, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, by * block_M:(by + 1) * block_M, bx, :])
            T.copy(dk_shared, dK[bz, by * block_M:(by + 1) * block_M, bx, :])
    return flash_bwd


@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_builds(causal, cache_dir):
    assert bwd_prep(1, 4, 256, 64).ensure_cubin()
    assert bwd(1, 4, 256, 64, causal).ensure_cubin()


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_matches_autograd(causal):
    import torch

    torch.manual_seed(0)
    B, S, H, D = 2, 256, 4, 64
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if causal:
        s = s.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, -1)
    o = torch.einsum("bhqk,bkhd->bqhd", p, v.float())
    do = torch.randn_like(o)
    o.backward(do)
    lse = (torch.logsumexp(s, -1) * math.log2(math.e)).contiguous()  # (B, H, S), base 2
    o16, do16 = o.detach().half().contiguous(), do.half().contiguous()
    delta = bwd_prep(B, H, S, D)(o16, do16)
    torch.testing.assert_close(delta, (o16.float() * do16.float()).sum(-1).transpose(1, 2),
                               atol=2e-2, rtol=1e-2)
    dq = torch.zeros(B, S, H, D, device="cuda")
    dk = torch.empty(B, S, H, D, device="cuda", dtype=torch.float16)
    dv = torch.empty_like(dk)
    bwd(B, H, S, D, causal)(q.detach(), k.detach(), v.detach(), do16, lse, delta, dq, dk, dv)
    torch.testing.assert_close(dv.float(), v.grad.float(), atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(dk.float(), k.grad.float(), atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(dq, q.grad.float(), atol=5e-2, rtol=5e-2)
