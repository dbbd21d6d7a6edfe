"""``fla.ops.common.chunk_delta_h`` stand-in: the gated delta rule's chunked state recurrence."""

from fla._reference import delta_rule_bwd_dhu, delta_rule_fwd_h, refuse_varlen


def chunk_gated_delta_rule_fwd_h(k, w, u, g=None, initial_state=None, output_final_state=False,
                                 chunk_size=64, save_new_value=True, cu_seqlens=None):
    """Returns (h [B, NT, H, K, V], v_new [B, T, H, V] or None, final_state [B, H, K, V] fp32 or None)."""
    refuse_varlen("chunk_gated_delta_rule_fwd_h", cu_seqlens)
    return delta_rule_fwd_h(k, w, u, g, initial_state, output_final_state, chunk_size, save_new_value)


def chunk_gated_delta_rule_bwd_dhu(q, k, w, g, h0, dht, do, dv, scale, cu_seqlens=None, chunk_size=64):
    """Returns (dh [B, NT, H, K, V], dh0 [B, H, K, V] fp32 or None, dv2 [B, T, H, V])."""
    refuse_varlen("chunk_gated_delta_rule_bwd_dhu", cu_seqlens)
    return delta_rule_bwd_dhu(q, k, w, g, h0, dht, do, dv, scale, chunk_size)
