"""``fla.utils`` stand-in: the decorators fla's autograd functions use."""

import functools

import torch


def contiguous(fn):
    """Call ``fn`` with every tensor argument made contiguous."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
        kwargs = {n: a.contiguous() if isinstance(a, torch.Tensor) else a for n, a in kwargs.items()}
        return fn(*args, **kwargs)

    return wrapper


def autocast_custom_fwd(fn=None, **_kwargs):
    """Pass-through (fla wraps ``torch.amp.custom_fwd``; the references run without autocast)."""
    return fn if fn is not None else (lambda f: f)


def autocast_custom_bwd(fn=None, **_kwargs):
    """Pass-through (fla wraps ``torch.amp.custom_bwd``)."""
    return fn if fn is not None else (lambda f: f)
