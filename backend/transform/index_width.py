"""Index width: which global tensors index with 64-bit offsets (``PrimFunc.wide_tensors``).

A tensor whose static shape has offsets past int32 always does.  One whose symbolic shape
merely may (a 2-D tensor of two symbols) does only with the compile option
``wide_offsets``: 64-bit arithmetic costs up to 1.8x on memory-bound row kernels (measured
on an H200: softmax over 16384-wide rows 142 us against 79), and such tensors are rare.
Without the option the launch ABI marks them (``TensorArg.offsets_int32``) and the
launcher refuses a tensor whose largest offset passes int32, naming the option, instead of
reading and writing out of bounds."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from .analysis import max_offset, may_pass_int32, INT32_MAX


def choose_index_width(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    wide = []
    for p in func.params:
        if not isinstance(p, N.Buffer) or not may_pass_int32(p):
            continue
        bound = max_offset(p)
        if options.get("wide_offsets") or (bound is not None and bound > INT32_MAX):
            wide.append(p.name)
    return dataclasses.replace(func, wide_tensors=tuple(wide))
