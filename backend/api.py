"""Public entry points: ``tilecute.compile(prim_func)`` and ``@tilecute.jit``.

``compile`` computes the cache key from the canonical IR, the target and the tool
versions, and imports the cached entry when there is one: on a hit nothing of the
compiler beyond the IR is imported (no codegen, no templates, no CUTLASS).  On a miss it
builds the entry (``tilecute.driver.build_entry``) under the cache's lock.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

from .ir import nodes as N
from .ir.serialize import canonical_json
from .runtime.kernel import Kernel


def _arch(target: Optional[str]) -> str:
    if target in (None, "auto", "cuda"):
        from .runtime.cubingen import default_arch

        return default_arch()
    return target[len("cuda:"):] if target.startswith("cuda:") else target


def compile(func: N.PrimFunc, out_idx: Optional[Sequence[int]] = None,  # noqa: A001
            target: Optional[str] = None, options: Optional[dict] = None) -> Kernel:
    """Compile ``func`` for ``target`` (``"sm_90a"``, ``"sm_80"``...; default: the GPU's
    arch, else ``TILECUTE_ARCH``) and return the callable kernel.

    ``out_idx``: indices of parameters the kernel allocates (torch) and returns.
    ``options``: compile options, TileLang's pass configs by another name:
    ``{"disable_tma": True}`` keeps tile copies off TMA, ``{"disable_wgmma": True}`` keeps
    ``T.gemm`` on mma.sync (so an sm_90a GPU runs the sm_80 code paths).  They are part of
    the cache key.
    The cubin is produced on the first call, or by ``kernel.ensure_cubin()``.
    """
    from . import cache

    if not isinstance(func, N.PrimFunc):
        raise TypeError(f"tilecute.compile takes a PrimFunc (from @T.prim_func), got "
                        f"{type(func).__name__}")
    from .options import check_options

    arch = _arch(target)
    options = check_options(options)
    ir_json = canonical_json(func)
    key = cache.cache_key(ir_json, arch, options, cache.tool_versions())

    def build(folder):
        from .driver import build_entry

        return build_entry(func, arch, options, folder)

    path = cache.get_or_build(key, build)
    return Kernel(path, out_idx)


def jit(fn=None, *, out_idx: Optional[Sequence[int]] = None, target: Optional[str] = None,
        options: Optional[dict] = None):
    """Decorate a kernel factory (a function returning a ``@T.prim_func``): calling it
    with the same arguments returns the same compiled kernel.

        @tilecute.jit(out_idx=[-1])
        def add(N, block=256): ...
    """

    def wrap(factory):
        @functools.lru_cache(maxsize=None)
        def compiled(*args, **kwargs):
            func = factory(*args, **kwargs)
            return compile(func, out_idx=out_idx, target=target, options=options)

        @functools.wraps(factory)
        def call(*args, **kwargs):
            return compiled(*args, **kwargs)

        call.cache_clear = compiled.cache_clear
        return call

    return wrap(fn) if fn is not None else wrap
