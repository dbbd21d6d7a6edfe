"""TileLang's ``tilelang.testing`` helpers that kernel tests use: ``set_random_seed``,
``torch_assert_close`` and ``requires_cuda`` (a pytest skip mark without a GPU)."""

from __future__ import annotations


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, NumPy's (when installed) and torch's generators."""
    import random

    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def torch_assert_close(a, b, rtol: float = 1e-2, atol: float = 1e-2,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, base_name: str = "LHS", ref_name: str = "RHS"):
    """Like ``torch.testing.assert_close``, but a fraction ``max_mismatched_ratio`` of the
    elements may differ (low-precision kernels)."""
    import torch

    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape:
        raise AssertionError(f"shapes differ: {base_name} {tuple(a.shape)}, {ref_name} "
                             f"{tuple(b.shape)}")
    bad = ~torch.isclose(a.double(), b.double().to(a.device), rtol=rtol, atol=atol,
                         equal_nan=equal_nan)
    n = bad.sum().item()
    allowed = max_mismatched_ratio * a.numel()
    if n > allowed:
        worst = (a.double() - b.double().to(a.device)).abs().max().item()
        raise AssertionError(f"{n} of {a.numel()} elements differ beyond rtol={rtol}, "
                             f"atol={atol} (allowed {int(allowed)}); max |{base_name} - "
                             f"{ref_name}| = {worst:.3g}")
    if verbose:
        print(f"{a.numel() - n} of {a.numel()} elements close")


def requires_cuda(fn):
    """Skip the decorated test where torch sees no CUDA GPU."""
    import pytest
    import torch

    return pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(fn)
