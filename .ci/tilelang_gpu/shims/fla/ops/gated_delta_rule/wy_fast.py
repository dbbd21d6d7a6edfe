"""``fla.ops.gated_delta_rule.wy_fast`` stand-in: the WY representation's w, u and their gradients."""

from fla._reference import recompute_w_u, refuse_varlen, wy_repr_bwd


def recompute_w_u_fwd(k, v, beta, g_cumsum, A, cu_seqlens=None):
    """w = A (k beta e^g), u = A (v beta) per chunk (BT = A.shape[-1]); returns (w, u)."""
    refuse_varlen("recompute_w_u_fwd", cu_seqlens)
    return recompute_w_u(k, v, beta, g_cumsum, A)


def prepare_wy_repr_bwd(k, v, g, beta, A, dw, du, cu_seqlens=None):
    """Returns (dk, dv, dbeta, dg); chunks of 64 tokens as fla's."""
    refuse_varlen("prepare_wy_repr_bwd", cu_seqlens)
    return wy_repr_bwd(k, v, g, beta, A, dw, du, 64)


bwd_prepare_wy_repr = prepare_wy_repr_bwd
fwd_recompute_w_u = recompute_w_u_fwd
