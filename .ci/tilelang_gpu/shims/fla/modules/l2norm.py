"""``fla.modules.l2norm`` stand-in."""

import torch

from fla._reference import l2norm


def l2norm_fwd(x, eps=1e-6, output_dtype=None):
    """(x / sqrt(sum(x^2, -1) + eps), rstd) with rstd float32 of shape x.shape[:-1].

    A forward kernel call, as fla's is: no autograd graph is recorded, so the outputs are leaf
    tensors (``l2norm_fwd(q)[0].requires_grad_(True)`` then collects ``.grad``, as
    linear_attention/example_linear_attn_bwd.py relies on)."""
    with torch.no_grad():
        return l2norm(x, eps, output_dtype)
