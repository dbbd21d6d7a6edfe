"""Fast math (option ``fast_math``, TileLang's ``tl.enable_fast_math``): ``exp2``,
``exp``, ``log2`` and ``log`` of float32 (and 16-bit, computed in float32) become their
approximations (``exp2_approx``...: ``ex2.approx.ftz.f32`` / ``lg2.approx.ftz.f32``,
subnormals flushed to zero), as nvcc's ``--use_fast_math`` makes them.  The default
``exp2`` is ``ex2.approx.f32`` without ftz, which ptxas wraps in a subnormal fix-up
(more instructions per element: what an attention kernel's softmax pays on every score).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N

APPROX = {"exp2": "exp2_approx", "exp": "exp_approx", "log2": "log2_approx", "log": "log_approx"}


def _rewrite(x):
    if isinstance(x, tuple):
        return tuple(_rewrite(y) for y in x)
    if not dataclasses.is_dataclass(x) or isinstance(x, type) or isinstance(x, N.Loc):
        return x
    changes = {f.name: _rewrite(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name != "loc"}
    x = dataclasses.replace(x, **changes)
    if isinstance(x, N.Call) and x.name in APPROX and x.dtype in ("float32", "float16", "bfloat16"):
        return dataclasses.replace(x, name=APPROX[x.name])
    return x


def fast_math(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if not options.get("fast_math"):
        return func
    return dataclasses.replace(func, kernels=_rewrite(func.kernels))
