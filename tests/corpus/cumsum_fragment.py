"""Chunk-local reversed cumulative sum through a fragment (TileLang's GDN cumsum example
with ``use_fragment=True, reverse=True``): the tile is copied into a fragment, scanned
there with ``T.cumsum(..., reverse=True)`` (staged through shared memory, as TileLang
does) and copied out: ``G_new[t] = sum(G[t:])`` within each chunk."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-4, 1e-4
SM80 = True
MISSING = None


def program(B=2, S=256, H=4, block_S=64, threads=256, input_dtype="float16", output_dtype="float32"):
    @T.prim_func
    def cumsum_fragment(G: T.Tensor((B, S, H), input_dtype), G_new: T.Tensor((B, S, H), output_dtype)):
        with T.Kernel(T.ceildiv(S, block_S), B * H, threads=threads) as (bs, bbh):
            bb, bh = bbh // H, bbh % H
            G_shared = T.alloc_shared((1, block_S), dtype=output_dtype, scope="shared")
            T.copy(G[bb, bs * block_S:(bs + 1) * block_S, bh], G_shared)
            G_fragment = T.alloc_fragment((1, block_S), dtype=output_dtype)
            T.copy(G_shared, G_fragment)
            T.cumsum(G_fragment, dim=1, reverse=True)
            T.copy(G_fragment, G_new[bb, bs * block_S:(bs + 1) * block_S, bh])

    return cumsum_fragment


def make_args(device):
    import torch

    g = torch.randn(2, 256, 4, device=device, dtype=torch.float16)
    return [g, torch.empty(2, 256, 4, device=device)]


def reference(g, out):
    chunks = g.float().view(2, 4, 64, 4)
    return (chunks.flip(2).cumsum(2).flip(2).reshape(2, 256, 4),)
