"""``fla.modules.l2norm`` stand-in."""

from fla._reference import l2norm


def l2norm_fwd(x, eps=1e-6, output_dtype=None):
    """(x / sqrt(sum(x^2, -1) + eps), rstd) with rstd float32 of shape x.shape[:-1]."""
    return l2norm(x, eps, output_dtype)
