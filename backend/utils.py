"""TileLang's ``tilelang.utils`` names that kernel programs and their tests import:
``TensorSupplyType`` (how a profiler fills a kernel's inputs) and ``map_torch_type``."""

from __future__ import annotations

import enum


class TensorSupplyType(enum.Enum):
    """How :meth:`tilecute.profiler.Profiler` makes the input tensors (TileLang's meanings):
    ``Integer``: random integers in [-2, 2] (as the dtype; [0, 3] for unsigned),
    ``Uniform``: uniform in [-1, 1), ``Normal``/``Randn``: standard normal, ``Zero``,
    ``One``, ``Auto``: ``Integer`` for integer dtypes, ``Normal`` for floating ones."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def map_torch_type(dtype: str):
    """The torch dtype of a tilecute dtype name (``"float16"`` -> ``torch.float16``)."""
    import torch

    from .runtime.dtypes import DTYPES

    name = str(dtype)
    if name not in DTYPES:
        raise ValueError(f"map_torch_type: unknown dtype {dtype!r}; the dtypes are "
                         f"{', '.join(DTYPES)}")
    torch_name = {"float8_e4m3": "float8_e4m3fn"}.get(name, name)
    return getattr(torch, torch_name)


def make_tensor(shape, dtype: str, supply: TensorSupplyType, device="cuda"):
    """A tensor of ``shape`` and ``dtype`` filled as ``supply`` says."""
    import torch

    t = map_torch_type(dtype)
    floating = t.is_floating_point
    if supply == TensorSupplyType.Auto:
        supply = TensorSupplyType.Normal if floating else TensorSupplyType.Integer
    if supply == TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=t, device=device)
    if supply == TensorSupplyType.One:
        return torch.ones(shape, dtype=t, device=device)
    if supply == TensorSupplyType.Integer:
        if t == torch.bool:
            return torch.randint(0, 2, shape, device=device).bool()
        low, high = (0, 4) if (not floating and not t.is_signed) else (-2, 3)
        return torch.randint(low, high, shape, device=device).to(t)
    if not floating:
        raise ValueError(f"TensorSupplyType.{supply.name} makes floating-point tensors; "
                         f"{dtype} is an integer type (use Integer or Auto)")
    if supply == TensorSupplyType.Uniform:
        return (torch.rand(shape, device=device) * 2 - 1).to(t)
    return torch.randn(shape, device=device).to(t)  # Normal, Randn
