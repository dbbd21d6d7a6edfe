"""Render the Python host module of a compiled kernel (``templates/host_module.py.j2``)."""

from __future__ import annotations

from ..runtime.abi import LaunchABI, TensorArg, dim_text
from .launcher import template_environment

TEMPLATE = "host_module.py.j2"


def signature(abi: LaunchABI) -> str:
    """``name(A: Tensor[N] float16, alpha: float32)``: the call as users see it."""
    parts = []
    for a in abi.args:
        if isinstance(a, TensorArg):
            dims = ", ".join(dim_text(d) for d in a.shape)
            strides = "" if a.strides is None else f" strides=({', '.join(map(dim_text, a.strides))})"
            parts.append(f"{a.name}: Tensor[{dims}] {a.dtype}{strides}")
        elif a.kind == "pointer":  # TileLang's T.ptr: a tensor or an int address
            parts.append(f"{a.name}: ptr")
        else:
            parts.append(f"{a.name}: {a.dtype}")
    return f"{abi.function}({', '.join(parts)})"


def render_host_module(abi: LaunchABI, *, arch: str, tilecute_version: str,
                       ptxas_options: str = "") -> str:
    """``ptxas_options``: the compile option's ptxas flags, passed on when the host module
    compiles the cubin (none: the module is as before the option existed)."""
    return template_environment().get_template(TEMPLATE).render(
        version=tilecute_version, function=abi.function, arch=arch, signature=signature(abi),
        ptxas_options=ptxas_options)
