"""TileLang's ``tilelang.utils.tensor``: how profilers make a kernel's inputs and how
tests compare tensors.  Implemented in ``tilecute.runtime.profiling`` (so that
``kernel.get_profiler`` stays inside the runtime); torch is imported on use."""

from __future__ import annotations

from ..runtime.profiling import (  # noqa: F401
    TensorSupplyType, is_float8_dtype, make_tensor, map_torch_type, torch_assert_close,
)


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer):
    """TileLang's ``get_tensor_supply(supply_type)``: a function from a parameter (anything
    with ``shape`` and ``dtype``: a tilecute kernel's ``args`` entry, a torch tensor) to a
    new CUDA tensor of that shape and dtype filled as ``supply_type`` says
    (:func:`tilecute.runtime.profiling.make_tensor`).  A symbolic dim is a ``ValueError``."""
    if not isinstance(supply_type, TensorSupplyType):
        raise TypeError(f"get_tensor_supply: supply_type must be a TensorSupplyType, got "
                        f"{supply_type!r}")

    def get_tensor(param):
        shape = tuple(getattr(param, "shape", ()))
        symbolic = [d for d in shape if not isinstance(d, int)]
        if symbolic:
            raise ValueError(f"get_tensor_supply: parameter {getattr(param, 'name', param)!r} "
                             f"has symbolic dims {symbolic}; a tensor needs a static shape")
        return make_tensor(shape, param.dtype, supply_type, device="cuda")

    return get_tensor


def fp8_remove_negative_zeros_(tensor):
    """Turn the float8 tensor's negative zeros into positive ones, in place."""
    import torch

    if not is_float8_dtype(tensor.dtype):
        raise TypeError(f"fp8_remove_negative_zeros_ takes a float8 tensor, got {tensor.dtype}")
    bits = tensor.view(torch.uint8)
    bits[tensor == 0] = 0
    return tensor
