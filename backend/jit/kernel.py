"""TileLang's ``tilelang.jit.kernel``: ``JITKernel``, tilecute's compiled
:class:`tilecute.runtime.kernel.Kernel` under TileLang's name, which TileLang's programs
also call to compile: ``JITKernel(func, out_idx, execution_backend, target, target_host,
verbose, pass_configs, from_database, compile_flags)`` is ``tilecute.compile`` of ``func``
with those arguments (a kernel folder loads it, as ``tilecute.load``);
``isinstance(k, JITKernel)`` holds for every compiled kernel."""

from __future__ import annotations

import os

from ..runtime.kernel import Kernel


class _KernelClass(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Kernel)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, Kernel)


class JITKernel(metaclass=_KernelClass):
    """``JITKernel(func, out_idx=None, ...)``: the compiled kernel of ``func`` (TileLang's
    constructor; ``from_database=True``, TileLang's cache lookup without a function, is
    refused: tilecute's cache is looked up by ``tilecute.compile`` itself)."""

    def __new__(cls, func=None, out_idx=None, execution_backend=None, target=None,
                target_host=None, verbose=None, pass_configs=None, from_database=False,
                compile_flags=None):
        from ..api import compile as compile_func
        from ..runtime.kernel import load

        if from_database:
            raise NotImplementedError(
                "JITKernel(from_database=True) is not supported by tilecute: give the "
                "prim_func; tilecute.compile finds a kernel already built in its cache")
        if isinstance(func, (str, os.PathLike)):
            return load(func, out_idx)
        if func is None:
            raise TypeError("JITKernel: give the prim_func to compile (func=)")
        return compile_func(func, out_idx, execution_backend, target, target_host, verbose,
                            pass_configs, compile_flags)


__all__ = ["JITKernel"]
