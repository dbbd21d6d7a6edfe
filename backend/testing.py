"""TileLang's ``tilelang.testing`` helpers that kernel tests use: ``set_random_seed``,
``torch_assert_close`` (TileLang's, from ``tilecute.utils.tensor``) and ``requires_cuda``
(a pytest skip mark without a GPU)."""

from __future__ import annotations

from .runtime.profiling import torch_assert_close  # noqa: F401  (TileLang's, tilelang.utils.tensor)


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


def requires_cuda(fn):
    """Skip the decorated test where torch sees no CUDA GPU."""
    import pytest
    import torch

    return pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(fn)
