"""Emit CuTe DSL source from a KernelPlan: one ``@cute.kernel`` per ``T.Kernel`` block,
one ``@cute.jit`` wrapper that launches them in order, and ``placeholder_args()`` that
builds the compile-time stand-ins the lazy cubin step passes to ``cute.compile``.

This is the entry point; the work is split by concern:

- ``source``: the Writer (lines, fresh ``tc_`` temporaries, helper modules used), how
  IR names are spelled (``ident``: the generated module's namespaces), ``quote`` and
  ``comment`` for every other string
- ``expr``: expressions (constants, operators and precedence, casts, math intrinsics)
- ``kernel``: a ``@cute.kernel`` function and its statements
- ``bounds``: bounds predication; ``memory``: shared memory and element offsets;
  ``nests``: T.Parallel nests and vector lanes; ``mma``: T.gemm
- ``wrapper``: the module header, the ``@cute.jit`` wrapper, ``placeholder_args``

Kernel parameters are exactly the launch ABI's (pointers, int32 symbols, scalars); the
kernel builds its tensors from them.  Imports no CUTLASS: it prints text.
"""

from __future__ import annotations

from ..transform.analysis import all_names
from ..transform.launch_abi import KernelPlan
from .kernel import KernelEmitter
from .source import CodegenError, generator_name
from .wrapper import check_function_name, header, jit_wrapper, name_prefix, placeholder_args

__all__ = ["CodegenError", "emit_cute"]


def emit_cute(plan: KernelPlan) -> str:
    """The CuTe DSL source of ``plan``."""
    check_names(plan)
    kernels, uses = [], set()
    for i in range(len(plan.func.kernels)):
        emitter = KernelEmitter(plan, i)
        lines = emitter.emit()
        while emitter.rows_read:  # fragments whose rows some nest reads whole after all
            # (each round shares more of them out: a nest over the rows that wrote one
            # runs on every row then, and reads its inputs whole)
            exchanged = emitter.exchanged | emitter.rows_read
            emitter = KernelEmitter(plan, i, exchanged=exchanged)
            lines = emitter.emit()
        kernels.append(lines)
        uses |= emitter.out.uses
    out = header(plan, uses)
    for i, lines in enumerate(kernels):
        out += ["", *lines, "", name_prefix(plan, i), ""]
    out += ["", *jit_wrapper(plan), "", "", *placeholder_args(plan)]
    return "\n".join(out) + "\n"


def check_names(plan: KernelPlan) -> None:
    """Refuse the IR names the generator cannot give a spelling of their own (see
    :mod:`.source`): the function's, where it would hide a name the module needs, and
    ``__`` names, which Python and CuTe DSL keep for themselves."""
    check_function_name(plan)
    f = plan.func
    names = all_names(f) | {d.name for k in f.kernels for d in k.tma_descriptors}
    where = f"{f.loc}: " if f.loc else ""
    dunder = sorted(n for n in names if n.startswith("__"))
    if dunder:
        raise CodegenError(f"{where}prim_func '{f.name}': the name '{dunder[0]}' starts with '__', "
                           "which Python and CuTe DSL keep for their own names; rename it")
    ours = sorted(n for n in names if n.startswith("tc_") and generator_name(n))
    if ours:
        raise CodegenError(f"{where}prim_func '{f.name}': internal: a pass named '{ours[0]}', a "
                           "name the code generator binds itself")
