"""``fla.ops.common.chunk_scaled_dot_kkt`` stand-in."""

import torch

from fla._reference import refuse_varlen, scaled_dot_kkt


def chunk_scaled_dot_kkt_fwd(k, beta, g_cumsum=None, cu_seqlens=None, chunk_size=64, output_dtype=torch.float32, g=None):
    """k [B, T, H, K], beta [B, T, H], g_cumsum [B, T, H] (optional) -> A [B, T, H, BT]:
    A[t, j] = beta_t (k_t . k_j) safe_exp(g_t - g_j) for j before t in its chunk, else 0."""
    refuse_varlen("chunk_scaled_dot_kkt_fwd", cu_seqlens)
    return scaled_dot_kkt(k, beta, g_cumsum if g_cumsum is not None else g, chunk_size, output_dtype)
