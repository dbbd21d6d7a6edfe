"""Chunk-local cumulative sum written out as a Hillis-Steele scan: log2(block_S) rounds,
each adding the element ``offset`` places back, ping-ponging between two shared tiles so a
round never reads what it writes."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-4, 1e-4
SM80 = True
MISSING = None


def program(B=2, S=256, H=4, block_S=64, input_dtype="float16", output_dtype="float32"):
    rounds = block_S.bit_length() - 1
    assert 1 << rounds == block_S

    @T.prim_func
    def cumsum_scan(G: T.Tensor((B, S, H), input_dtype), G_new: T.Tensor((B, S, H), output_dtype)):
        with T.Kernel(T.ceildiv(S, block_S), B * H, threads=64) as (bs, bbh):
            bb = bbh // H
            bh = bbh % H
            ping = T.alloc_shared((block_S,), output_dtype)
            pong = T.alloc_shared((block_S,), output_dtype)
            for i in T.Parallel(block_S):
                ping[i] = T.Cast(output_dtype, G[bb, bs * block_S + i, bh])
            for r in T.unroll(rounds):
                offset = 1 << r
                if r % 2 == 0:
                    for i in T.Parallel(block_S):
                        if i >= offset:
                            pong[i] = ping[i] + ping[i - offset]
                        else:
                            pong[i] = ping[i]
                else:
                    for i in T.Parallel(block_S):
                        if i >= offset:
                            ping[i] = pong[i] + pong[i - offset]
                        else:
                            ping[i] = pong[i]
            for i in T.Parallel(block_S):
                if rounds % 2 == 0:
                    G_new[bb, bs * block_S + i, bh] = ping[i]
                else:
                    G_new[bb, bs * block_S + i, bh] = pong[i]

    return cumsum_scan


def make_args(device):
    import torch

    g = torch.randn(2, 256, 4, device=device, dtype=torch.float16)
    return [g, torch.empty(2, 256, 4, device=device)]


def reference(g, out):
    return (g.float().view(2, 4, 64, 4).cumsum(2).view(2, 256, 4),)
