"""The CUDA architectures tilecute compiles for, and the check every target passes before
it reaches a generated file, a compiler option string or a cache key.

Both sides read it: the compiler (``tilecute.target`` re-exports it, ``tilecute.compile``
checks its ``target``) and the runtime (``tilecute.runtime.cubingen`` checks the arch it
takes from the GPU, ``TILECUTE_ARCH`` or ``CUTE_DSL_ARCH``).  Imports nothing, so the
runtime keeps to its rule of never importing the compiler.
"""

from __future__ import annotations

from typing import Optional

SUPPORTED_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
                   "sm_100a", "sm_103a", "sm_120a")


def device_arch(arch: str) -> str:
    """The arch a cubin for target ``arch`` is compiled with: ``sm_90`` builds as ``sm_90a``,
    as TileLang's nvcc target does (``get_target_arch``: compute capability 9.0 and up get
    the arch-specific ``a``), so wgmma, ``setmaxnreg`` and the other sm_90a instructions
    the passes plan for a Hopper target are there (CuTe DSL refuses them for plain
    ``sm_90``); an sm_90a cubin runs on every sm_90 GPU.  Other archs are themselves."""
    return "sm_90a" if arch == "sm_90" else arch


class TargetError(ValueError):
    """A target architecture tilecute does not compile for; the message names the valid ones."""


def check_arch(arch, source: Optional[str] = None) -> str:
    """``arch`` if it is an architecture tilecute supports, else a :class:`TargetError`
    naming the valid ones.  ``source`` says where the value came from (``"$TILECUTE_ARCH"``,
    ``"GPU cuda:0"``), for the message."""
    if isinstance(arch, str) and arch in SUPPORTED_ARCHS:
        return arch
    origin = f" (from {source})" if source else ""
    raise TargetError(f"target {arch!r}{origin} is not an architecture tilecute supports; "
                      f"use one of {', '.join(SUPPORTED_ARCHS)}")
