"""TileLang's ``tilelang.language.fp8``: the FP8 dtype for the platform.  tilecute
targets NVIDIA GPUs, whose FP8 types are E4M3 (``T.float8_e4m3``, torch's
``float8_e4m3fn``) and E5M2; TileLang's ROCm FNUZ variants do not apply."""

from __future__ import annotations


def determine_fp8_type(fp8_format: str = "e4m3"):
    """``T.float8_e4m3`` for ``"e4m3"``, ``T.float8_e5m2`` for ``"e5m2"``."""
    from . import values

    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"determine_fp8_type: fp8_format must be 'e4m3' or 'e5m2', got "
                         f"{fp8_format!r}")
    return values.float8_e4m3 if fp8_format == "e4m3" else values.float8_e5m2


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of :func:`determine_fp8_type` (``torch.float8_e4m3fn`` ...)."""
    import torch

    return torch.float8_e4m3fn if determine_fp8_type(fp8_format) == "float8_e4m3" \
        else torch.float8_e5m2
