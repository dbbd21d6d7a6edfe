"""TileLang's ``tilelang.engine`` names.  Its post-processing callbacks
(``register_cuda_postproc`` ...) rewrite the CUDA C / HIP / C source TileLang generates
before it is compiled; tilecute generates CuTe DSL instead (``kernel.get_kernel_source()``)
and never edits generated code, so they import and registering one is an error naming it.
``lower`` (``tilecute.lower``) takes TileLang's signature: the passes, the launch ABI and
the CuTe DSL source, in a :class:`CompiledArtifact`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..refusals import refusing_getattr
from .callback import (  # noqa: F401
    register_c_postproc, register_cuda_postproc, register_hip_postproc,
    register_metal_postproc,
)


@dataclass(frozen=True)
class CompiledArtifact:
    """What :func:`lower` returns (TileLang's ``tilelang.engine.param.CompiledArtifact``,
    with tilecute's contents): ``kernel_source`` (the CuTe DSL source), ``params`` (the
    launch ABI's arguments, None with ``runtime_only``), ``plan`` (the lowered function
    ``plan.func`` and its launch ABI ``plan.abi``) and ``arch``.  TileLang's TVM modules
    (``host_mod``, ``device_mod``, ``rt_mod``) have no counterpart."""

    kernel_source: str
    params: Optional[tuple]
    plan: Any
    arch: str

    def __getattr__(self, name: str):
        if name in ("host_mod", "device_mod", "rt_mod"):
            raise NotImplementedError(
                f"CompiledArtifact.{name} is TileLang's TVM module; tilecute has no TVM: read "
                "kernel_source (CuTe DSL), plan.func (the lowered IR) or plan.abi, or "
                "tilecute.compile(...) for a launchable kernel")
        raise AttributeError(name)


def lower(func, target="auto", target_host=None, runtime_only: bool = False,
          enable_host_codegen: bool = False, enable_device_compile: bool = False, *,
          options: Optional[dict] = None) -> CompiledArtifact:
    """``tilecute.lower`` with TileLang's signature: ``func`` through tilecute's passes
    for ``target`` (as ``tilecute.compile``'s: ``"auto"``, ``"cuda"``, ``"sm_90a"`` ...) and
    its CuTe DSL source generated, nothing compiled or written.  ``target_host`` may be
    None, ``"c"`` or ``"llvm"`` (tilecute's host code is its C++ launcher, made by
    ``tilecute.compile``); ``enable_host_codegen`` / ``enable_device_compile`` (TileLang's
    host module and device binary at this stage) are refused: ``tilecute.compile`` and
    ``tilecute.build_cubin`` build those."""
    from ..api import _arch
    from ..codegen.cute import emit_cute
    from ..transform.pipeline import lower as run

    if target_host not in (None, "c", "llvm"):
        raise ValueError(f"tilecute.lower: target_host={target_host!r} is not supported: "
                         "tilecute's host code is its C++ launcher (None, 'c' or 'llvm')")
    for name, value in (("enable_host_codegen", enable_host_codegen),
                        ("enable_device_compile", enable_device_compile)):
        if value:
            raise ValueError(f"tilecute.lower: {name}=True is not supported: lower generates "
                             "the CuTe DSL source only; tilecute.compile builds the launcher "
                             "and tilecute.build_cubin the cubin")
    from ..ir import nodes as N

    if not isinstance(func, N.PrimFunc):
        hint = ("; a compiled kernel's source is kernel.get_kernel_source()"
                if hasattr(func, "get_kernel_source") else "")
        raise TypeError(f"tilecute.lower takes a PrimFunc (from @T.prim_func), got "
                        f"{type(func).__name__}{hint}")
    arch = _arch(target, "tilecute.lower")
    plan = run(func, arch, options)
    return CompiledArtifact(emit_cute(plan), None if runtime_only else plan.abi.args, plan, arch)


__getattr__ = refusing_getattr(__name__, {
    "is_device_call": "it inspects TVM TIR calls; tilecute has no TVM",
    "KernelParam": "tilecute's kernel parameters are its launch ABI's (kernel.args)",
})
