"""TileLang host-API names that tilecute does not provide, as values that say so when
used.  ``from tilecute.engine.callback import register_cuda_postproc_callback`` imports
(a program that imports a name and never uses it runs); calling the name, or reading an
attribute of it, raises ``NotImplementedError`` naming it and why.

TileLang modules that tilecute has no counterpart for (``tilelang.cuda.intrinsics.macro``
...) import too, through :class:`RefusedModules` (last on ``sys.meta_path``, so a real
module always wins): every name in one is a :class:`Refused`.  ``import tvm`` finds
``tilecute.tvm`` where no TVM is installed, as ``import tilelang`` makes TileLang's
bundled TVM importable.

Imports nothing; each module that serves TileLang names builds its refusals here.
"""

from __future__ import annotations

import sys


class Refused:
    """TileLang's ``qualname`` (e.g. ``"tilelang.engine.callback.register_cuda_postproc_callback"``),
    which tilecute refuses because ``reason``."""

    def __init__(self, qualname: str, reason: str):
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__qualname__ = qualname
        self._reason = reason

    def message(self) -> str:
        return f"{self.__qualname__} is not supported by tilecute: {self._reason}"

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.message())

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"{self.__qualname__}.{name}: {self.message()}")

    def __mro_entries__(self, bases):  # `class X(Refused...)`
        raise NotImplementedError(self.message())

    def __iter__(self):  # `for mode in _VALID_CAST_ROUNDING_MODES`
        raise NotImplementedError(self.message())

    def __getitem__(self, key):  # `GROUP_CONFIG[dtype]`
        raise NotImplementedError(self.message())

    def __contains__(self, item):
        raise NotImplementedError(self.message())

    def __instancecheck__(self, instance):  # `isinstance(x, tvm.tirx.Call)`
        raise NotImplementedError(self.message())

    def __subclasscheck__(self, subclass):  # `issubclass(C, tvm.tirx.PrimExpr)`
        raise NotImplementedError(self.message())

    def __repr__(self) -> str:
        return f"<{self.__qualname__}: not supported by tilecute>"


def refusing_getattr(module: str, names: dict, tilelang_module: str | None = None):
    """A module ``__getattr__`` that serves each of ``names`` (name -> reason) as a
    :class:`Refused` value and raises ``AttributeError`` for any other name."""
    tilelang_module = tilelang_module or module.replace("tilecute", "tilelang", 1)

    def __getattr__(name: str):
        if name in names:
            return Refused(f"{tilelang_module}.{name}", names[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


_NO_TVM = ("it is TVM's; tilecute is standalone (no TVM): write the kernel with "
           "tilecute.language (T.*) forms, which build tilecute's own IR")
# module (and everything under it) -> why tilecute has none of its names
REFUSED_MODULES = {
    "tvm": _NO_TVM,
    "tilecute.tvm": _NO_TVM,
    "tilecute.cuda.intrinsics.macro": "TileLang's MMA/WGMMA emitters generate TVM TIR; tilecute "
                                      "has no TIR (T.gemm lowers onto CuTe DSL's MMAs)",
    # (its make_mma_swizzle_layout is served by the real module; its other submodules here)
    "tilecute.cuda.intrinsics.layout": "TileLang's MMA fragment index maps are TVM TIR "
                                       "functions; tilecute's T.gemm chooses its own layouts",
    "tilecute.tools": "TileLang's tools (layout plots, the roofline Analyzer, IKET tracing) "
                      "read TileLang's IR; tilecute's lowered IR is kernel.get_source('script')",
    "tilecute.rocm": "it targets AMD GPUs; tilecute targets NVIDIA's (CuTe DSL)",
    # TileLang's internal layers that its own tests import
    "tilecute.language.tir": "it is TileLang's TVM-TIR op layer (ir, op, exports); tilecute's "
                             "T.* names are in tilecute.language itself",
    "tilecute.language.common": "it is TileLang's dialect namespace (the T.* names its backends "
                                "share); tilecute.language is tilecute's one namespace",
    "tilecute.language.kernel": "it is TileLang's T.Kernel frame builder; T.Kernel is a form "
                                "tilecute's frontend parses (its thread checks are the parser's)",
    "tilecute.cuda.language": "it holds TileLang's CUDA-only TIR intrinsics (ptx_wgmma_ss ...); "
                              "tilecute lowers T.gemm and copies onto CuTe DSL",
    "tilecute.jit.adapter": "TileLang's execution-backend adapters (tvm_ffi, cython, nvrtc, "
                            "cutedsl) wrap the CUDA C or Python TileLang generates; tilecute's "
                            "one backend is a CuTe DSL kernel behind a TVM-FFI launcher "
                            "(tilecute.host.launcher)",
    "tilecute.jit.abi": "it prepares arguments for TileLang's TVM-FFI adapter; tilecute's "
                        "launcher allocates out_idx outputs itself (tilecute.runtime.kernel)",
    "tilecute.jit.env": "it holds TileLang's JIT workspace folders; tilecute's cache folder "
                        "is TILECUTE_CACHE_DIR (docs/cache.md)",
    "tilecute.jit.param": "it holds TileLang's Program/Kernel typing helpers; a tilecute "
                          "kernel is tilecute.runtime.kernel.Kernel (tilecute.jit.JITKernel)",
    "tilecute.jit.diagnostics": "it times TileLang's JIT phases (jit_phase) in its own "
                                "logger; tilecute's compile logs with verbose=True / "
                                "TILECUTE_VERBOSE (docs/host-api.md)",
    "tilecute.jit.exceptions": "its JITNoBuilderError / EagerJITBuildError come from "
                               "TileLang's eager builder; tilecute's frontend raises "
                               "tilecute.language.FrontendError",
}


def _refused_module(name: str, why: str):
    import types

    module = types.ModuleType(name)
    module.__path__ = []  # a package: its submodules are refused too

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Refused(f"{name.replace('tilecute', 'tilelang', 1)}.{attr}", why)

    module.__getattr__ = __getattr__
    return module


class RefusedModules:
    """The finder of :data:`REFUSED_MODULES` (and ``tvm`` -> ``tilecute.tvm``)."""

    @staticmethod
    def _why(fullname: str):
        for prefix, why in REFUSED_MODULES.items():
            if fullname == prefix or fullname.startswith(prefix + "."):
                return why
        return None

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if cls._why(fullname) is None:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, cls)

    @classmethod
    def create_module(cls, spec):
        if spec.name == "tvm":
            import importlib

            return importlib.import_module("tilecute.tvm")
        name = spec.name.replace("tilecute.tvm", "tvm", 1)
        if name in ("tvm.tir", "tvm.tirx"):  # TVM's expression builders, over tilecute's IR
            import importlib

            return importlib.import_module("tilecute.tvm").tir_module(name)
        if name == "tvm.testing":  # requires_package, a skip mark
            import importlib

            return importlib.import_module("tilecute.tvm").testing_module(name)
        return _refused_module(spec.name.replace("tilecute.tvm", "tvm", 1), cls._why(spec.name))

    @staticmethod
    def exec_module(module):
        pass


def install_module_finder() -> None:
    if RefusedModules not in sys.meta_path:
        sys.meta_path.append(RefusedModules)
