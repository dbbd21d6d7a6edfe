"""``fla.ops.linear_attn`` stand-in."""

from fla._reference import linear_attn, refuse_varlen


def fused_chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False,
                            normalize=True, cu_seqlens=None, head_first=False):
    """q, k [B, T, H, K], v [B, T, H, V] ([B, H, T, ...] with head_first) -> (o, final_state);
    differentiable (plain torch autograd)."""
    refuse_varlen("fused_chunk_linear_attn", cu_seqlens)
    if head_first:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    if scale is None:
        scale = q.shape[-1] ** -0.5
    o, final = linear_attn(q, k, v, scale, initial_state, output_final_state, normalize)
    return (o.transpose(1, 2) if head_first else o), final
