"""Public entry points: ``tilecute.compile(prim_func)`` and ``@tilecute.jit``.

``compile`` computes the cache key from the canonical IR, the target and the tool
versions, and imports the cached entry when there is one: on a hit nothing of the
compiler beyond the IR is imported (no codegen, no templates, no CUTLASS).  On a miss it
builds the entry (``tilecute.driver.build_entry``) under the cache's lock.  What a user
can get wrong (the target, ``out_idx``, the options) is checked first, before any build,
and reported with the function's name.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Optional, Sequence

from .ir import nodes as N
from .ir.serialize import canonical_json
from .runtime.arch import TargetError, check_arch
from .runtime.kernel import Kernel, check_release_gil, resolve_out_idx, write_debug_files


# TVM's CUDA target tags (``target="nvidia/nvidia-a100"``, which TileLang passes to TVM's
# Target and so accepts) of the GPUs tilecute builds for: the tag's arch.  A tag of an
# older GPU, or one not listed, is refused by name.  sm_90 / sm_120 tags build as sm_90a /
# sm_120a, as TileLang's nvcc target does for compute 9.0 and up.
_TVM_CUDA_TAGS = {
    **dict.fromkeys(("nvidia-a100", "nvidia-a30"), "sm_80"),
    **dict.fromkeys(("nvidia-a40", "nvidia-a10", "nvidia-a10g", "nvidia-a16", "nvidia-a2",
                     "rtx-a6000", "geforce-rtx-3090-ti", "geforce-rtx-3090",
                     "geforce-rtx-3080-ti", "geforce-rtx-3080", "geforce-rtx-3070-ti",
                     "geforce-rtx-3070", "geforce-rtx-3060"), "sm_86"),
    **dict.fromkeys(("jetson-orin-nano", "jetson-agx-orin-32gb", "jetson-agx-orin-64gb"),
                    "sm_87"),
    "geforce-rtx-4090": "sm_89", "nvidia-h100": "sm_90a", "nvidia-b100": "sm_100a",
    "geforce-rtx-5060-ti": "sm_120a",
}


def _tag_arch(tag: str) -> str:
    """The arch of TVM CUDA target tag ``tag`` (``"nvidia/nvidia-a100"``: ``sm_80``)."""
    arch = _TVM_CUDA_TAGS.get(tag[len("nvidia/"):])
    if arch is None:
        raise TargetError(f"target {tag!r}: a TVM target tag of a GPU tilecute does not build "
                          f"for (it knows the tags of sm_80 and newer GPUs: "
                          f"{', '.join('nvidia/' + t for t in _TVM_CUDA_TAGS)}); give the arch, "
                          f"e.g. target=\"cuda -arch=sm_80\"")
    return arch


def _arch(target: Optional[str], function: str) -> str:
    """The arch ``target`` names (``"sm_90a"``, ``"cuda:sm_90a"``, TVM's ``"cuda -arch=sm_90a"``
    or ``{"kind": "cuda", "arch": "sm_90a"}``, a TVM CUDA tag ``"nvidia/nvidia-a100"``; None,
    ``"auto"``, ``"cuda"`` or ``"cutedsl"``: the GPU's, else ``TILECUTE_ARCH``), checked
    against the supported ones."""
    try:
        if isinstance(target, str) and target.strip().startswith("nvidia/"):  # TVM's tag
            return check_arch(_tag_arch(target.strip().split()[0]), f"target={target!r}")
        if isinstance(target, dict):  # TVM's target dict: {"kind": "cuda", "arch": "sm_90"}
            kind = target.get("kind", "cuda")
            if kind not in ("cuda", "cutedsl"):
                raise TargetError(f"target kind {kind!r} is not supported: tilecute builds CUDA "
                                  "kernels (kind 'cuda' or 'cutedsl')")
            target = target.get("arch")
        elif isinstance(target, str) and target.startswith(("cuda ", "cutedsl ")) and \
                "-arch=" in target:  # TVM's target string "cuda -arch=sm_90a"
            target = target.split("-arch=", 1)[1].split()[0]
        if target in (None, "auto", "cuda", "cutedsl"):
            from .runtime.cubingen import default_arch

            return default_arch()
        if isinstance(target, str) and target.startswith("cuda:"):
            return check_arch(target[len("cuda:"):], f"target={target!r}")
        return check_arch(target)
    except TargetError as e:
        raise TargetError(f"{function}: {e}") from None


def _names_an_arch(target) -> bool:
    """Whether ``target`` (any spelling :func:`_arch` takes) names a CUDA arch, ``sm_<n>``
    with an optional ``a``/``f`` suffix, or is a TVM CUDA tag (``nvidia/...``), supported
    or not."""
    import re

    if isinstance(target, str) and target.strip().startswith("nvidia/"):  # a TVM CUDA tag
        return True
    if isinstance(target, dict):
        target = target.get("arch") if target.get("kind", "cuda") in ("cuda", "cutedsl") else None
    elif isinstance(target, str) and target.startswith(("cuda ", "cutedsl ")) and \
            "-arch=" in target:
        target = target.split("-arch=", 1)[1].split()[0]
    elif isinstance(target, str) and target.startswith("cuda:"):
        target = target[len("cuda:"):]
    return isinstance(target, str) and re.fullmatch(r"sm_[1-9][0-9]{1,2}[af]?", target) is not None


def _options(options, pass_configs, function: str, compile_flags=None) -> dict:
    """``options`` with TileLang's ``pass_configs`` and ``compile_flags`` mapped in (an
    explicit option wins; ptxas flags add up)."""
    from .options import check_options, from_compile_flags, from_pass_configs, merge_options

    return check_options(merge_options(from_pass_configs(pass_configs, function),
                                       from_compile_flags(compile_flags, function), options))


# TileLang's execution backends for CUDA: how its host calls the kernel (TVM FFI, its
# Cython wrapper, NVRTC-compiled source) with the same calling convention and results.
# tilecute has one, a CuTe DSL kernel behind a TVM-FFI launcher, which serves them all;
# "torch" (TileLang's Metal backend) is refused
_BACKENDS = (None, "auto", "tvm_ffi", "cutedsl", "cython", "nvrtc")
# TileLang's target_host: the host code's target; tilecute's launcher is C++ built for
# this machine by the host compiler, which is what None / "llvm" / "c" ask for
_HOSTS = (None, "llvm", "c")


def _check_host_args(function: str, execution_backend=None, target_host=None) -> None:
    """TileLang's ``execution_backend`` and ``target_host``: accepted where they name what
    tilecute builds, refused by value otherwise."""
    if execution_backend not in _BACKENDS:
        raise ValueError(f"{function}: execution_backend={execution_backend!r} is not "
                         f"supported by tilecute, whose one backend is a CuTe DSL kernel behind "
                         f"a TVM-FFI launcher (accepted: None, 'auto', 'tvm_ffi', 'cutedsl', "
                         f"and TileLang's CUDA backends 'cython' and 'nvrtc', which it serves)")
    host = target_host.split()[0] if isinstance(target_host, str) and target_host else target_host
    if host not in _HOSTS:
        raise ValueError(f"{function}: target_host={target_host!r} is not supported by "
                         f"tilecute: its launcher is C++ built for this machine (accepted: "
                         f"None, 'llvm', 'c')")


def _verbose(verbose) -> bool:
    """TileLang's ``verbose``; None: ``TILECUTE_VERBOSE`` (or TileLang's ``TILELANG_VERBOSE``)
    set to 1/true/yes/on."""
    if verbose is None:
        env = os.environ.get("TILECUTE_VERBOSE", os.environ.get("TILELANG_VERBOSE", ""))
        return env.strip().lower() in ("1", "true", "yes", "on")
    return bool(verbose)


def _write_debug(kernel, func: N.PrimFunc, debug_root_path: str) -> None:
    """TileLang's ``debug_root_path``: the kernel's source and the program, as files."""
    write_debug_files(kernel, func.name, func.script(), debug_root_path)


def compile(func: N.PrimFunc, out_idx: Optional[Sequence[int]] = None,  # noqa: A001
            execution_backend: Optional[str] = None, target: Optional[str] = None,
            target_host=None, verbose: Optional[bool] = None,
            pass_configs: Optional[dict] = None, compile_flags=None, *,
            options: Optional[dict] = None, release_gil: Optional[bool] = None) -> Kernel:
    """Compile ``func`` for ``target`` (``"sm_90a"``, ``"sm_80"``..., TVM's ``"cuda
    -arch=sm_80"``, ``{"kind": "cuda", "arch": "sm_86"}`` or CUDA tag
    ``"nvidia/nvidia-a100"``; default: the GPU's arch, else ``TILECUTE_ARCH``; an ``sm_90``
    target builds sm_90a code, as TileLang's nvcc target does) and return the callable
    kernel.  The positional order is
    TileLang's ``tilelang.compile(func, out_idx, execution_backend, target, target_host,
    verbose, pass_configs, compile_flags)``; tilecute's ``options`` and ``release_gil`` are
    keywords.

    ``out_idx``: indices of parameters the kernel allocates (torch) and returns.
    ``options``: compile options, TileLang's pass configs by another name:
    ``{"disable_tma": True}`` keeps tile copies off TMA, ``{"disable_wgmma": True}`` keeps
    ``T.gemm`` on mma.sync (so an sm_90a GPU runs the sm_80 code paths).  They are part of
    the cache key.  ``pass_configs``: TileLang's ``PassConfigKey`` settings, mapped onto
    ``options`` (``tilecute.PassConfigKey``; a key with no tilecute meaning is refused);
    ``compile_flags``: TileLang's nvcc flags, mapped likewise (``options.from_compile_flags``).
    The cubin is produced on the first call, or by ``kernel.ensure_cubin()``.

    TileLang's ``execution_backend`` (None, ``"auto"``, ``"tvm_ffi"``, ``"cutedsl"``, and
    its other CUDA backends ``"cython"`` and ``"nvrtc"``: how its host calls the kernel,
    with the same calling convention, all served by tilecute's one launcher; ``"torch"``,
    its Metal backend, refused) and ``target_host`` (None, ``"llvm"``, ``"c"``) are
    checked; ``verbose=True`` (default ``TILECUTE_VERBOSE``/``TILELANG_VERBOSE``) prints
    each compile (its target, then its time and kernel) to stderr, as TileLang logs its
    JIT phases.

    ``release_gil=False`` makes calls hold the GIL while they launch
    (``Kernel.release_gil``; default: TVM FFI's, released).  Not part of the cache key: it
    changes no generated code.

    ``target`` may list several archs (``["sm_90a", "sm_80"]``): one cache entry each, and
    a :class:`MultiArchKernel` whose first call picks the one that runs on the GPU.

    Plain ``T.dynamic`` extents that decide whether a row stride is a multiple of 16
    bytes give two kernels, picked per call by the tensors' shapes (an aligned variant
    that keeps TMA and vector accesses, and the general one; ``tilecute.variants``;
    option ``disable_dynamic_variants`` builds the general one only).
    """
    if not isinstance(func, N.PrimFunc):
        raise TypeError(f"tilecute.compile takes a PrimFunc (from @T.prim_func), got "
                        f"{type(func).__name__}")
    _check_host_args(func.name, execution_backend, target_host)
    check_release_gil(release_gil, func.name)
    from .options import function_attrs

    func, out_idx, pass_configs, compile_flags = function_attrs(func, out_idx, pass_configs,
                                                                compile_flags)
    if _verbose(verbose):
        import sys
        import time

        start = time.monotonic()
        print(f"tilecute: compile {func.name!r} target={target!r}", file=sys.stderr)
        kernel = compile(func, out_idx, target=target, pass_configs=pass_configs,
                         compile_flags=compile_flags, options=options, verbose=False,
                         release_gil=release_gil)
        print(f"tilecute: compiled {func.name!r} in {time.monotonic() - start:.3f}s: {kernel!r}",
              file=sys.stderr)
        return kernel
    if isinstance(target, (list, tuple)):  # several archs: one kernel per arch, picked per GPU
        if not target:
            raise ValueError(f"{func.name}: target=[] names no arch")
        archs = list(dict.fromkeys(_arch(t, func.name) for t in target))
        return MultiArchKernel({a: compile(func, out_idx, target=a, pass_configs=pass_configs,
                                           compile_flags=compile_flags, options=options,
                                           verbose=False, release_gil=release_gil)
                                for a in archs})
    outputs = resolve_out_idx(func.name, [p.name for p in func.params
                                          if p.name not in func.workspaces], out_idx)  # before any build
    arch = _arch(target, func.name)
    options = _options(options, pass_configs, func.name, compile_flags)
    if not options.get("disable_dynamic_variants"):
        from .variants import AlignedOrGeneral, aligned_variant, alignment_divisors, checks_for

        divisors = alignment_divisors(func)
        checks = checks_for(func, divisors, outputs) if divisors else None
        if checks:  # plain T.dynamic extents that decide a stride's alignment
            aligned = _compile_one(aligned_variant(func, divisors), out_idx, arch, options,
                                   release_gil)
            return AlignedOrGeneral(aligned, _compile_one(func, out_idx, arch, options,
                                                          release_gil), checks)
    return _compile_one(func, out_idx, arch, options, release_gil)


def par_compile(funcs, out_idx: Optional[Sequence[int]] = None, execution_backend=None,
                target: Optional[str] = None, target_host=None, verbose: Optional[bool] = None,
                pass_configs: Optional[dict] = None, compile_flags=None,
                num_workers: Optional[int] = None, ignore_error: bool = False,
                options: Optional[dict] = None, release_gil: Optional[bool] = None) -> list:
    """TileLang's ``tilelang.par_compile(funcs, ...)``: :func:`compile` of each PrimFunc
    with the same arguments, on a thread pool (``num_workers``, default: one per function
    up to the CPU count); the kernels in ``funcs``' order.  With ``ignore_error`` a
    function that fails gives None (and a logged warning) instead of raising.
    ``release_gil``: as in :func:`compile`."""
    from .language.eager import par_compile as _par

    def one(func):
        return compile(func, out_idx, execution_backend, target, target_host, verbose,
                       pass_configs, compile_flags, options=options, release_gil=release_gil)

    def logged(func):
        try:
            return one(func)
        except Exception as e:
            if not ignore_error:
                raise
            import logging

            logging.getLogger("tilecute").warning("par_compile: %s: %s",
                                                  getattr(func, "name", func), e)
            return None

    return _par(logged, [(f,) for f in funcs], num_workers, ignore_error=False)


class MultiArchKernel:
    """``tilecute.compile(..., target=[...])``: one compiled kernel per arch.  The first
    call picks the one whose cubin runs on the GPU (``tilecute.runtime.package.pick_arch``:
    an ``a`` arch on its exact version, a plain one on its major at an equal or higher
    minor) and, when every GPU of the process takes the same arch, becomes that kernel;
    otherwise each call picks by its tensors' device.  Everything else (``abi``,
    ``get_source``...) is the first arch's kernel; ``kernels`` holds them all."""

    def __init__(self, kernels: dict):
        self.kernels = kernels
        self.archs = list(kernels)
        self._by_device: dict = {}
        # a class per instance, so that __call__ can become the picked kernel
        self.__class__ = type("MultiArchKernel", (MultiArchKernel,), {})

    def pick(self, args):
        from .runtime.package import arch_for_device, tensor_device

        device = tensor_device(args)
        kernel = self._by_device.get(device)
        if kernel is None:
            kernel = self._by_device[device] = self.kernels[
                arch_for_device(self.archs, device, self.kernels[self.archs[0]].name)]
        return kernel

    def __call__(self, *args):
        from .runtime.package import arch_for_device, device_count

        kernel = self.pick(args)
        if os.environ.get("TILECUTE_ARCH") or len(
                {arch_for_device(self.archs, d, kernel.name) for d in range(device_count())}) == 1:
            type(self).__call__ = staticmethod(kernel)  # one arch serves every GPU
        return kernel(*args)

    def launch(self, *args, stream=None):
        return self.pick(args).launch(*args, stream=stream)

    def ensure_cubin(self) -> list:
        """Every arch's cubin (paths, in ``archs`` order)."""
        return [k.ensure_cubin() for k in self.kernels.values()]

    def warmup(self, devices=None):
        """Every arch's cubin; the launcher of the arch this host's GPU takes, loaded
        (``Kernel.warmup``; without a GPU, ``TILECUTE_ARCH``'s, if set)."""
        from .runtime.package import PackageError, arch_for_device

        self.ensure_cubin()
        try:
            arch = arch_for_device(self.archs, 0, self.kernels[self.archs[0]].name)
        except PackageError:
            return self
        self.kernels[arch].warmup(devices)
        return self

    @property
    def release_gil(self) -> bool:
        """``Kernel.release_gil`` of the first arch's kernel; setting it sets every arch's."""
        return self.kernels[self.archs[0]].release_gil

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        for kernel in self.kernels.values():
            kernel.release_gil = value

    def __getattr__(self, name):
        if name == "kernels":
            raise AttributeError(name)
        return getattr(self.kernels[self.archs[0]], name)

    def __repr__(self) -> str:
        return f"<tilecute kernel for {', '.join(self.archs)}: {self.kernels[self.archs[0]]!r}>"


def _compile_one(func: N.PrimFunc, out_idx, arch: str, options: dict,
                 release_gil: Optional[bool] = None) -> Kernel:
    """One cache entry: looked up by its key, built on a miss.  ``release_gil`` is the
    kernel's (a runtime setting), never the key's."""
    from . import cache

    ir_json = canonical_json(func)
    key = cache.cache_key(ir_json, arch, options, cache.tool_versions())

    def build(folder):
        from .driver import build_entry

        return build_entry(func, arch, options, folder,
                           published_as=cache.published_path(key, folder),
                           runtime_folder=cache.launcher_runtime_folder())

    # the kernel imports its host module under the key's lock: `tilecute cache clear`
    # cannot remove the entry between the lookup and the import
    return cache.get_or_build(key, build, use=lambda path: Kernel(path, out_idx, release_gil))


def _hashable(value) -> bool:
    try:
        hash((value[0], tuple(value[1].values())))
        return True
    except TypeError:
        return False


def _specs_text(specializations: dict) -> str:
    if not specializations:
        return "none"
    return "; ".join("(" + ", ".join([*map(repr, a), *(f"{k}={v!r}" for k, v in kw)]) + ")"
                     for a, kw in specializations)


def jit(fn=None, *, out_idx: Optional[Sequence[int]] = None, target: Optional[str] = None,
        options: Optional[dict] = None, pass_configs: Optional[dict] = None, compile_flags=None,
        target_host=None, execution_backend: Optional[str] = None,
        verbose: Optional[bool] = None, debug_root_path: Optional[str] = None,
        release_gil: Optional[bool] = None):
    """Decorate a kernel factory (a function returning a ``@T.prim_func``): calling it
    with the same arguments returns the same compiled kernel.

        @tilecute.jit(out_idx=[-1])
        def add(N, block=256): ...

    TileLang's other keywords: ``execution_backend``, ``target_host`` and ``verbose`` as in
    :func:`compile`; ``debug_root_path``: a folder each compiled kernel's source
    (``tilelang_jit_kernel_<name>.py``) and program (``tilelang_jit_program_<name>.py``) is
    written to (a relative path is taken from the decorated function's file's folder).
    tilecute's ``release_gil``: as in :func:`compile`, for every kernel it compiles.
    """

    def wrap(factory):
        if isinstance(factory, N.PrimFunc):
            # TileLang 0.1.4's form `@tilelang.jit(out_idx=...)` over `@T.prim_func`: the
            # decorator compiled the prim_func at once and the name is the kernel
            if debug_root_path is not None:
                raise TypeError(f"{factory.name}: tilecute.jit applied to a prim_func compiles "
                                "it at once; debug_root_path is not supported there: read "
                                "kernel.get_kernel_source()")
            return compile(factory, out_idx=out_idx, execution_backend=execution_backend,
                           target=target, target_host=target_host, verbose=verbose,
                           pass_configs=pass_configs, compile_flags=compile_flags,
                           options=options, release_gil=release_gil)
        _check_host_args(getattr(factory, "__name__", "tilecute.jit"), execution_backend,
                         target_host)
        check_release_gil(release_gil, getattr(factory, "__name__", "tilecute.jit"))
        debug_root = debug_root_path
        if debug_root is not None and not os.path.isabs(debug_root):
            import inspect

            try:
                base = os.path.dirname(os.path.abspath(inspect.getfile(factory)))
            except TypeError:
                base = os.getcwd()
            debug_root = os.path.join(base, debug_root)
        # a malformed target or a bad option fails at decoration, not at the first call; a
        # well-formed arch tilecute does not build (TileLang programs pin sm_75 or sm_100
        # kernels beside others in one module) is refused when it is compiled, as TileLang
        # only reads the target then: the module still imports and its other kernels run
        for t in (target if isinstance(target, (list, tuple)) else [target]):
            if t not in (None, "auto", "cuda"):
                try:
                    _arch(t, getattr(factory, "__name__", "tilecute.jit"))
                except TargetError:
                    if not _names_an_arch(t):
                        raise
        merged = _options(options, pass_configs, getattr(factory, "__name__", "tilecute.jit"),
                          compile_flags)
        from .language.eager import JitFunction, is_eager, par_compile

        if is_eager(factory):  # TileLang's eager style: tensors in, T.empty outputs returned
            from .language.eager import EagerKernel

            if out_idx is not None:
                raise TypeError(f"{factory.__name__}: an eager kernel's outputs are its "
                                "T.empty tensors (returned); out_idx does not apply")
            # (debug_root_path: TileLang's JITImpl.compile writes an eager kernel's files too)
            return EagerKernel(factory, target=target, options=merged, verbose=verbose,
                               release_gil=release_gil, debug_root_path=debug_root)

        specializations = {}  # (args, kwargs) -> kernel, what `tilecute export` reads
        sealed = []
        # kernels by TileLang's key of the bound arguments (defaults applied, any call form)
        kernels: dict = {}
        lock, key_locks = threading.Lock(), {}
        jit_func = JitFunction(factory)

        # the same kernels by the call's own arguments as given (hashable ones only): a
        # repeated call skips binding them to the signature (~10 us a call)
        by_call: dict = {}

        def compiled(*args, **kwargs):
            try:
                return by_call[args, tuple(kwargs.items())]
            except (KeyError, TypeError):
                pass
            kernel = bind_and_compile(*args, **kwargs)
            try:
                by_call[args, tuple(kwargs.items())] = kernel
            except TypeError:  # an unhashable argument: bound every call
                pass
            return kernel

        def bind_and_compile(*args, **kwargs):
            key = jit_func.parse_args(*args, **kwargs)[0]
            kernel = kernels.get(key)
            if kernel is not None:
                return kernel
            with lock:
                key_lock = key_locks.setdefault(key, threading.Lock())
            with key_lock:  # one compile per key; different keys compile in parallel
                kernel = kernels.get(key)
                if kernel is not None:
                    return kernel
                if sealed:
                    shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
                    raise ValueError(f"{factory.__name__}({shown}): not compiled, and "
                                     f"{factory.__name__} is sealed (no compile after seal()); "
                                     f"its kernels: {_specs_text(specializations)}")
                func = factory(*args, **kwargs)
                kernel = compile(func, out_idx=out_idx, target=target, options=merged,
                                 verbose=verbose, release_gil=release_gil)
                if debug_root is not None:
                    _write_debug(kernel, func, debug_root)
                with lock:
                    specializations[(args, tuple(sorted(kwargs.items())))
                                    if _hashable((args, kwargs)) else (key, ())] = kernel
                    kernels[key] = kernel
            return kernel

        @functools.wraps(factory)
        def call(*args, **kwargs):
            return compiled(*args, **kwargs)

        def cache_clear():
            by_call.clear()
            kernels.clear()
            key_locks.clear()
            specializations.clear()

        def warmup(*specs, devices=None):
            """Compile each specialization (a tuple of arguments or a dict of keyword
            arguments) and warm it up (``Kernel.warmup``); returns the kernels."""
            out = []
            for spec in specs:
                args, kwargs = ((), spec) if isinstance(spec, dict) else (
                    tuple(spec) if isinstance(spec, (tuple, list)) else (spec,), {})
                out.append(compiled(*args, **kwargs).warmup(devices))
            return out

        def seal():
            """From now on an argument set not compiled yet is a ``ValueError``, never a
            compile (a serving process, after ``warmup``)."""
            sealed.append(True)

        call.cache_clear = cache_clear
        call.specializations = specializations
        call.warmup = warmup
        call.seal = seal
        call.compile = call  # TileLang's factory.compile(*args): the compiled kernel
        # TileLang's JITImpl.get_tir / get_kernel_source / par_compile
        call.get_tir = factory
        call.get_kernel_source = lambda *a, **kw: compiled(*a, **kw).get_kernel_source()
        call.par_compile = functools.partial(par_compile, call)
        call.func = jit_func  # TileLang's JITImpl.func / .mode
        call.mode = "lazy"
        # what tilecute.autotune reads
        call.__tilecute_jit__ = (out_idx, target, merged, release_gil)
        return call

    return wrap(fn) if fn is not None else wrap
