"""``fla.ops.utils.cumsum`` stand-in: chunk-local cumulative sums."""

import torch

from fla._reference import local_cumsum


def chunk_local_cumsum_scalar(g, chunk_size, reverse=False, cu_seqlens=None, head_first=False,
                              output_dtype=torch.float, scale=None, **kwargs):
    """g [B, T, H] ([B, H, T] with head_first): cumsum inside each chunk of ``chunk_size``."""
    return local_cumsum(g, chunk_size, reverse, cu_seqlens, head_first, output_dtype, scale)


def chunk_local_cumsum_vector(g, chunk_size, reverse=False, cu_seqlens=None, head_first=False,
                              output_dtype=torch.float, scale=None, **kwargs):
    """g [B, T, H, S] ([B, H, T, S] with head_first): cumsum inside each chunk."""
    return local_cumsum(g, chunk_size, reverse, cu_seqlens, head_first, output_dtype, scale)


def chunk_local_cumsum(g, chunk_size, reverse=False, cu_seqlens=None, head_first=False,
                       output_dtype=torch.float, scale=None, **kwargs):
    if g.dim() not in (3, 4):
        raise ValueError(f"fla torch reference: chunk_local_cumsum takes a 3-d or 4-d g, not shape {tuple(g.shape)}")
    return local_cumsum(g, chunk_size, reverse, cu_seqlens, head_first, output_dtype, scale)
