"""PyTorch integration: register a compiled kernel as a ``torch.library`` custom op, with a
fake (meta) implementation derived from the launch ABI, so it runs under
``torch.compile(fullgraph=True)`` without graph breaks.

    op = tilecute.torch.register(kernel, "mylib::vector_add")   # kernel compiled with out_idx
    y = op(a, b)          # or torch.ops.mylib.vector_add(a, b)

Outputs (the kernel's ``out_idx``) are allocated by the op and returned; other tensor
arguments the kernel writes are named in ``mutates_args``.  Importing this module imports
torch; ``import tilecute`` does not.
"""

from __future__ import annotations

from typing import Iterable

import torch

from .runtime.abi import ScalarArg, TensorArg
from .runtime.kernel import Kernel

_SCALAR_SCHEMA = {"bool": "bool", "float32": "float", "float64": "float"}


def _scalar_type(a: ScalarArg) -> str:
    return _SCALAR_SCHEMA.get(a.dtype, "int")


def schema(kernel: Kernel, mutates_args: Iterable[str] = ()) -> str:
    """The op schema: inputs in the kernel's order (outputs left out), outputs returned."""
    mutates = set(mutates_args)
    inputs, outputs = [], []
    for i, a in enumerate(kernel.args):
        if i in kernel.out_idx:
            outputs.append("Tensor")
        elif isinstance(a, TensorArg):
            inputs.append(f"Tensor{'(a' + str(len(inputs)) + '!)' if a.name in mutates else ''} {a.name}")
        else:
            inputs.append(f"{_scalar_type(a)} {a.name}")
    ret = "()" if not outputs else outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})"
    return f"({', '.join(inputs)}) -> {ret}"


def register(kernel: Kernel, name: str, mutates_args: Iterable[str] = ()):
    """Register ``kernel`` as the custom op ``name`` (``"namespace::op"``); returns the op."""
    mutates = tuple(mutates_args)
    names = {a.name for a in kernel.args if isinstance(a, TensorArg)}
    unknown = set(mutates) - names
    if unknown:
        raise ValueError(f"{kernel.name}: mutates_args {sorted(unknown)} are not tensor "
                         f"arguments of the kernel ({sorted(names)})")
    if not kernel.out_idx and not mutates:
        raise ValueError(f"{kernel.name}: an op must return outputs (compile with out_idx) or "
                         "name the tensors it writes in mutates_args")
    def impl(*args):
        result = kernel(*args)  # (a list for several outputs: a torch op returns a tuple)
        if isinstance(result, list):
            result = tuple(result)
        return result if kernel.out_idx else None

    def fake(*args):
        outs = kernel.allocate_outputs(args)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    op = torch.library.custom_op(name, impl, mutates_args=mutates,
                                 schema=schema(kernel, mutates))
    op.register_fake(fake)
    return op
