"""Per-function switches the options make: fast math (option ``fast_math``, TileLang's ``tl.enable_fast_math``): ``exp2``,
``exp``, ``log2`` and ``log`` of float32 (and 16-bit, computed in float32) become their
approximations (``exp2_approx``...: ``ex2.approx.ftz.f32`` / ``lg2.approx.ftz.f32``,
subnormals flushed to zero), and float32 division ``x / y`` becomes ``div_approx``
(CUDA's ``__fdividef``: ``x`` times ``rcp.approx.ftz`` of ``y``, ~2 ulp; TileLang's CuTe
DSL backend emits ``divf(..., fastmath=True)``), as nvcc's ``--use_fast_math`` makes
them: an attention epilogue's ``acc_o[i, j] /= l[i]`` then costs a reciprocal per row
and a multiply per element instead of an IEEE division per element.  The default
``exp2`` is ``ex2.approx.f32`` without ftz, which ptxas wraps in a subnormal fix-up
(more instructions per element: what an attention kernel's softmax pays on every score).
And Programmatic Dependent Launch (option ``pdl``, :func:`programmatic_launch`).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import StmtMutator
from ..target import arch_at_least
from .analysis import has_pdl_calls

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
    if isinstance(x, N.BinOp) and x.op == "div" and x.dtype == "float32":
        return N.Call("div_approx", (x.a, x.b), "float32")
    return x


def fast_math(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if not options.get("fast_math"):
        return func
    return dataclasses.replace(func, kernels=_rewrite(func.kernels))


def programmatic_launch(func: N.PrimFunc, arch: str, options: dict) -> N.PrimFunc:
    """Option ``pdl``: every kernel launches with Programmatic Dependent Launch
    (``KernelScope.pdl``: the launcher sets the attribute, the kernel waits for the
    previous grid's memory at its start).  sm_90+ only (an ``OptionError`` otherwise)."""
    explicit = [has_pdl_calls(k.body) for k in func.kernels]
    if any(explicit) and not options.get("pdl"):
        # TileLang's T.pdl_sync / T.pdl_trigger: their kernels launch with PDL (sm_90+);
        # older targets have no PDL, and kernels on a stream never overlap there: no-ops
        if not arch_at_least(arch, 90):
            return _DropPdl().run(func)
        return dataclasses.replace(func, kernels=tuple(
            dataclasses.replace(k, pdl=True) if e else k for k, e in zip(func.kernels, explicit)))
    if not options.get("pdl"):
        return func
    from ..options import OptionError

    if not arch_at_least(arch, 90):
        raise OptionError(f"prim_func '{func.name}': option pdl (Programmatic Dependent "
                          f"Launch) needs sm_90 or later; the target is {arch}")
    return dataclasses.replace(func, kernels=tuple(dataclasses.replace(k, pdl=True)
                                                   for k in func.kernels))


class _DropPdl(StmtMutator):
    """T.pdl_sync() / T.pdl_trigger() statements removed (targets without PDL)."""

    def visit_evaluate(self, s: N.Evaluate):
        if isinstance(s.value, N.Call) and s.value.name in N.PDL_CALLS:
            return None
        return s
