"""Chunk-local cumulative sum along the sequence (gated linear attention's gate cumsum):
each block scans one (chunk, batch*head) slice of G with ``T.cumsum`` on a shared tile,
forward or reversed (TileLang's GDN cumsum example)."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-4, 1e-4
SM80 = True
MISSING = None


def program(B=2, S=256, H=4, block_S=64, reverse=False, input_dtype="float16", output_dtype="float32"):
    @T.prim_func
    def cumsum(G: T.Tensor((B, S, H), input_dtype), G_new: T.Tensor((B, S, H), output_dtype)):
        with T.Kernel(T.ceildiv(S, block_S), B * H, threads=128) as (bs, bbh):
            bb, bh = bbh // H, bbh % H
            G_shared = T.alloc_shared((1, block_S), output_dtype, scope="shared")
            T.copy(G[bb, bs * block_S:(bs + 1) * block_S, bh], G_shared)
            T.cumsum(G_shared, dim=1, reverse=reverse)
            T.copy(G_shared, G_new[bb, bs * block_S:(bs + 1) * block_S, bh])

    return cumsum


def make_args(device):
    import torch

    g = torch.randn(2, 256, 4, device=device, dtype=torch.float16)
    return [g, torch.empty(2, 256, 4, device=device)]


def reference(g, out):
    return (g.float().view(2, 4, 64, 4).cumsum(2).view(2, 256, 4),)
