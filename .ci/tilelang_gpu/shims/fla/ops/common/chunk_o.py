"""``fla.ops.common.chunk_o`` stand-in: chunked output and its q/k/w/g gradients."""

from fla._reference import chunk_bwd_dqkwg as _dqkwg
from fla._reference import chunk_o, next_pow2, refuse_varlen


def _bt(T, chunk_size):  # fla shrinks the chunk for short sequences
    return min(chunk_size, max(16, next_pow2(T)))


def chunk_fwd_o(q, k, v, h, g=None, scale=None, cu_seqlens=None, chunk_size=64):
    """q, k [B, T, H, K], v [B, T, H, V], h [B, NT, H, K, V], g [B, T, H] -> o [B, T, H, V]."""
    refuse_varlen("chunk_fwd_o", cu_seqlens)
    if scale is None:
        scale = k.shape[-1] ** -0.5
    return chunk_o(q, k, v, h, g, scale, _bt(q.shape[1], chunk_size))


def chunk_bwd_dqkwg(q, k, v, g, do, h, dh, dv=None, w=None, cu_seqlens=None, chunk_size=64, scale=1.0):
    """Returns (dq, dk, dw or None, dg [B, T, H] fp32 or None)."""
    refuse_varlen("chunk_bwd_dqkwg", cu_seqlens)
    if w is not None and dv is None:
        raise ValueError("fla torch reference: chunk_bwd_dqkwg(w=...) needs dv")
    return _dqkwg(q, k, v, g, do, h, dh, dv, w, scale, _bt(q.shape[1], chunk_size))
