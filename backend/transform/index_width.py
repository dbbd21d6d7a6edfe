"""Index width: which global tensors index with 64-bit offsets (``PrimFunc.wide_tensors``).

A tensor with an int64 dim (TileLang's ``T.dynamic("n", "int64")``, a static extent past
int32) always does, and so does one whose static shape has offsets past int32.  One whose symbolic shape
merely may (a 2-D tensor of two symbols) does only with the compile option
``wide_offsets``: 64-bit arithmetic costs up to 1.8x on memory-bound row kernels (measured
on an H200: softmax over 16384-wide rows 142 us against 79), and such tensors are rare.
Without the option the launch ABI marks them (``TensorArg.offsets_int32``) and the
launcher refuses a tensor whose largest offset passes int32, naming the option, instead of
reading and writing out of bounds.

A global view (``Allocate.view_of``, T.view of a parameter) indexes as wide as its base,
and wide also where its elements are narrower than a base whose offsets may pass int32
(more of them fit in the same bytes).  A tensor at an address (``Allocate.address``,
T.make_tensor) is wide where its dims are int64 or its static shape's offsets pass int32,
and with ``wide_offsets`` where its symbolic ones may: otherwise its offsets are int32, as
TileLang indexes it, and nothing checks them at launch (the caller passes no tensor)."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..runtime.dtypes import DTYPES
from .analysis import int64_dims, max_offset, may_pass_int32, walk_stmts, INT32_MAX


def choose_index_width(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    wide = []
    for p in func.params:
        if not isinstance(p, N.Buffer) or not may_pass_int32(p):
            continue
        bound = max_offset(p)
        if options.get("wide_offsets") or (bound is not None and bound > INT32_MAX) or \
                int64_dims(p):
            wide.append(p.name)
    params = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    for k in func.kernels:
        for s in (s for s in walk_stmts(k.body) if isinstance(s, N.Allocate) and s.view_of in params):
            base = params[s.view_of]
            narrower = DTYPES[s.buffer.dtype].bytes < DTYPES[base.dtype].bytes
            if s.view_of in wide or (narrower and may_pass_int32(base)) or (
                    max_offset(s.buffer) or 0) > INT32_MAX:
                wide.append(s.buffer.name)
        # a tensor at an address (T.make_tensor): wide where its dims are int64 or its static
        # shape's offsets pass int32, or with wide_offsets where its symbolic ones may
        # (nothing at launch can check the offsets of a tensor the caller does not pass)
        for s in (s for s in walk_stmts(k.body) if isinstance(s, N.Allocate) and s.address is not None):
            b = s.buffer
            if int64_dims(b) or (max_offset(b) or 0) > INT32_MAX or \
                    (options.get("wide_offsets") and may_pass_int32(b)):
                wide.append(b.name)
    return dataclasses.replace(func, wide_tensors=tuple(wide))
