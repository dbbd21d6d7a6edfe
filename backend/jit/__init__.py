"""``tilecute.jit``: the decorator, and TileLang's ``tilelang.jit`` package by name.

TileLang's ``tilelang.jit`` is both its jit decorator (``@tilelang.jit``) and a package
programs import from (``from tilelang.jit import JITKernel``, ``tilelang.jit.kernel``).
This module is both too: calling it is :func:`tilecute.api.jit`; its names are
tilecute's counterparts (``compile``, ``par_compile``, ``JITKernel`` = the compiled
:class:`tilecute.runtime.kernel.Kernel`, ``prim_func``, ``PrimFunc``); TileLang's names
with none (``JITImpl``, ``JITFunc``, ``cached``) are refused by name when used, and its
submodules without a counterpart (``adapter``, ``abi``, ``env``, ``param``,
``diagnostics``, ``exceptions``) import with every name refused
(``tilecute.refusals.REFUSED_MODULES``).
"""

import sys
import types

from ..api import compile, jit as _jit, par_compile  # noqa: A004
from ..ir.nodes import PrimFunc
from ..language import prim_func
from ..refusals import refusing_getattr
from .kernel import JITKernel

__all__ = ["jit", "compile", "par_compile", "JITKernel", "PrimFunc", "prim_func"]

jit = _jit

__getattr__ = refusing_getattr(__name__, {
    "JITImpl": "tilecute's @jit returns a plain function for a factory (its kernels keyed "
               "by the bound arguments) or a tilecute.language.eager.EagerKernel; "
               "`jitted.func` is TileLang's JITFunc view (parse_args, get_tir)",
    "JITFunc": "`jitted.func` of a @tilecute.jit function is its counterpart "
               "(tilecute.language.eager.JitFunction: parse_args, _parse_phase1_key, get_tir)",
    "cached": "tilecute.compile looks every kernel up in its cache itself (docs/cache.md)",
})


class _JitModule(types.ModuleType):
    """``tilecute.jit(...)`` is the decorator (as ``tilelang.jit(...)`` is)."""

    def __call__(self, *args, **kwargs):
        return _jit(*args, **kwargs)


sys.modules[__name__].__class__ = _JitModule
