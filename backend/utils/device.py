"""TileLang's ``tilelang.utils.device``: which device a kernel's inputs would go to
(``get_current_device``: the current CUDA device's index, ``"mps:0"`` on Apple's MPS,
else None) and how many CPU cores this process may use (``get_available_cpu_count``).
``IS_CUDA`` / ``IS_MPS`` are read when the module is imported, as TileLang's are; torch
is imported here, so import this module only where torch is wanted."""

from __future__ import annotations

import os

import torch

IS_CUDA = torch.cuda.is_available()
try:
    IS_MPS = torch.backends.mps.is_available()
except AttributeError:  # a torch build without the MPS backend
    IS_MPS = False


def get_current_device():
    """The current CUDA device's index where CUDA is available, ``"mps:0"`` where MPS
    is, else None (TileLang's)."""
    if IS_CUDA:
        return torch.cuda.current_device()
    if IS_MPS:
        return "mps:0"
    return None


def get_available_cpu_count() -> int:
    """The CPU cores this process may run on (its affinity mask; ``os.cpu_count`` where
    there is none), at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:
        count = os.cpu_count()
    return max(1, count or 1)
