"""A compiled kernel as users hold it: a cache entry's host module behind a callable.

``tilecute.load(path)`` and ``tilecute.compile`` both end here.  The first call
produces the cubin if needed and loads the launcher; after that, calling the kernel calls
the TVM FFI function directly (the kernel's class ``__call__`` becomes that function, behind
the call path of ``runtime/fastcall.py`` where torch is imported: torch tensors handed over
as DLTensor pointers), so no Python frame of tilecute's runs per call.  With ``out_idx`` the outputs are
allocated with torch first, which keeps one Python frame per call.  ``release_gil``
says whether that function lets go of the GIL while it launches (docs/performance.md,
"Launching from several threads").

Imports neither the compiler nor CUTLASS; torch only when outputs are allocated.
"""

from __future__ import annotations

import atexit
import numbers
import operator
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .abi import LaunchABI, ScalarArg, TensorArg, bind_dims, dim_symbols, dim_text, eval_dim
from .dtypes import DTYPES, element_dims
from .entry import check_private, import_source, verify_entry

SOURCE_KINDS = {"cute": "kernel_cute.py", "host": "host.py", "launcher": "launcher.cpp",
                "abi": "abi.json", "ir": "ir.json", "launcher-header": "tilecute_launcher.h",
                "launcher-runtime": "tilecute_launcher_runtime.cpp",
                "script": "ir_script.txt"}
# the files the first call reads (the cubin is checked by publish_artifact itself)
_LOADED_FILES = ("host.py", "abi.json", "kernel_cute.py", "launcher.so")


def _import_host_module(path: Path):
    name = f"tilecute_entry_{path.name[:24]}"
    if name in sys.modules and getattr(sys.modules[name], "HERE", None) == str(path):
        return sys.modules[name]
    return import_source(path / "host.py", name, register=True)


def resolve_out_idx(function: str, params: Sequence[str], out_idx, given_order: bool = False) -> list[int]:
    """``out_idx`` (None, an int, or a sequence of ints; negative ones count from the end,
    as in TileLang) as the sorted indices of the parameters ``params`` of ``function``
    (with ``given_order``: in the order given, the order a call returns the outputs in, as
    TileLang returns ``[tensors[i] for i in out_idx]``).
    A ``TypeError`` for what is not an index, a ``ValueError`` for an index out of range
    either side or one parameter named twice; each names the function."""
    if out_idx is None:
        return []
    items = [out_idx] if isinstance(out_idx, int) else out_idx
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{function}: out_idx takes a parameter index or a list of them, got "
                        f"{out_idx!r}")
    n = len(params)
    names = ", ".join(params)
    indices = []
    for i in items:
        try:
            if isinstance(i, bool):
                raise TypeError
            i = operator.index(i)
        except TypeError:
            hint = f" (parameter {i!r} is out_idx {params.index(i)})" if i in params else ""
            raise TypeError(f"{function}: out_idx takes parameter indices (ints), got {i!r}"
                            f"{hint}") from None
        if not -n <= i < n:
            raise ValueError(f"{function}: out_idx {i} is out of range: {function} has {n} "
                             f"parameter{'' if n == 1 else 's'} ({names}), so an index is 0 to "
                             f"{n - 1}, or -{n} to -1 counting from the end")
        if i % n in indices:
            raise ValueError(f"{function}: out_idx names parameter {i % n} "
                             f"('{params[i % n]}') twice")
        indices.append(i % n)
    return indices if given_order else sorted(indices)


def _cleanup_at_exit(cleanup) -> None:
    """The launcher's ``cleanup`` at interpreter exit, unless another thread is still alive.

    ``cleanup`` must not run while a call launches (it unloads the module a launch is
    using).  At exit Python has joined its non-daemon threads, but daemon threads still run
    and may be inside a call; then the cleanup is skipped: it is optional (the driver
    reclaims modules and contexts when the process ends)."""
    current = threading.current_thread()
    if any(t is not current and t.is_alive() for t in threading.enumerate()):
        return
    cleanup()


def check_release_gil(value, function: str) -> Optional[bool]:
    """``release_gil`` as given to ``compile``/``jit``/``Kernel``: None (TVM FFI's default)
    or a bool; anything else a ``TypeError`` naming ``function``."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{function}: release_gil takes True or False, got {value!r}")
    return value


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a compiled kernel as TileLang's ``JITKernel.params`` lists it
    (``tilelang.engine.param.KernelParam``): its ``dtype`` (the TileLang dtype name) and
    ``shape`` (a list of ints and, for symbolic dims, their text: ``"n"``, ``"n * 4"``;
    ``[]`` for a scalar), with the parameter's ``name`` beside them."""

    name: str
    dtype: str
    shape: list

    @classmethod
    def of(cls, arg) -> "KernelParam":
        shape = [d if isinstance(d, int) else dim_text(d) for d in getattr(arg, "shape", ())]
        return cls(arg.name, arg.dtype, shape)

    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    def is_unsigned(self) -> bool:
        return self.dtype.startswith("uint")

    def is_float8(self) -> bool:
        return self.dtype.startswith("float8")

    def is_float4(self) -> bool:
        return self.dtype.startswith("float4")

    def is_boolean(self) -> bool:
        return self.dtype.startswith("bool")

    def torch_dtype(self):
        return _torch_dtype(self.dtype)


class Kernel:
    """A compiled function.  ``kernel(*args)`` launches it (arguments in the prim_func's
    order; an optional trailing int is an explicit CUDA stream handle)."""

    def __init__(self, path, out_idx: Optional[Sequence[int]] = None,
                 release_gil: Optional[bool] = None):
        self.path = Path(path)
        check_private(self.path, recursive=True)
        self.host = _import_host_module(self.path)
        self.abi = LaunchABI.from_json((self.path / "abi.json").read_text())
        self.name = self.abi.function
        # T.alloc_global workspaces: the last args; each call allocates them
        self.workspace_idx = [i for i, a in enumerate(self.abi.args)
                              if isinstance(a, TensorArg) and a.workspace]
        self.args = self.abi.args[:len(self.abi.args) - len(self.workspace_idx)]
        self.out_idx = resolve_out_idx(self.name, [a.name for a in self.args], out_idx)
        # the outputs' order in a call's result: out_idx as given (TileLang's), where
        # self.out_idx is in parameter order
        self.out_order = resolve_out_idx(self.name, [a.name for a in self.args], out_idx,
                                         given_order=True)
        self._return_order = (None if self.out_order == self.out_idx
                              else [self.out_idx.index(i) for i in self.out_order])
        for i in self.out_idx:
            if not isinstance(self.abi.args[i], TensorArg):
                raise ValueError(f"{self.name}: out_idx {i} names scalar argument "
                                 f"'{self.abi.args[i].name}'; outputs must be tensors")
        self._plan = ...  # the allocation plan, made at the first call that allocates
        self._lock = threading.Lock()
        self._module = None
        self._func = None  # the launcher's TVM FFI function
        self._call = None  # what a call calls: that function, or it behind runtime.fastcall
        # what the launcher's function gets when it is loaded (None: TVM FFI's default)
        self._release_gil = check_release_gil(release_gil, self.name)
        # a class per instance, so that __call__ can become the TVM FFI function itself
        self.__class__ = type(f"Kernel_{self.name}", (Kernel,), {})

    def __repr__(self) -> str:
        return f"<tilecute kernel {self.host.SIGNATURE} at {self.path}>"

    # ---- artifacts ----------------------------------------------------------------------
    def ensure_cubin(self) -> str:
        """Produce the cubin now (what the first call would do); return its path.
        Works without a GPU when the arch was given (TILECUTE_ARCH)."""
        return self.host.ensure_cubin()

    def warmup(self, devices=None) -> "Kernel":
        """Everything a first call would do, now: the cubin produced, the launcher loaded,
        and the cubin loaded on ``devices`` (CUDA device ids; default: every GPU, none
        without a driver), so that serving never waits on a build or a load."""
        self.ensure_cubin()
        self._load()
        if devices is None:
            from .package import PackageError, device_count

            try:
                devices = range(device_count())
            except PackageError:  # no driver: nothing to load on
                devices = ()
        for d in devices:
            self._module["__tilecute_ensure_device"](int(d))
        return self

    def get_source(self, kind: str = "cute") -> str:
        """``"cute"`` (CuTe DSL), ``"host"`` (host module), ``"launcher"`` (C++), ``"abi"``
        (launch ABI JSON), ``"ir"`` (the lowered IR as JSON), ``"script"`` (the lowered IR as
        the printer shows it: every decision of the passes in TileLang's form),
        ``"launcher-header"`` or ``"launcher-runtime"`` (the launcher runtime's header and
        code, beside ``launcher.cpp``)."""
        if kind not in SOURCE_KINDS:
            raise ValueError(f"get_source: kind must be one of {sorted(SOURCE_KINDS)}, got {kind!r}")
        return (self.path / SOURCE_KINDS[kind]).read_text()

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        """The CuTe DSL source (TileLang's name for ``get_source("cute")``); with
        ``kernel_only=False`` followed by the host side, as TileLang's CuTe DSL backend
        appends its host wrapper: the host module and the C++ launcher."""
        if kernel_only:
            return self.get_source("cute")
        return "\n\n".join(self.get_source(kind) for kind in ("cute", "host", "launcher"))

    def get_host_source(self) -> str:
        """TileLang's host-side source: tilecute's host module (the Python side of the
        call) followed by the C++ launcher that checks the arguments and launches."""
        return "\n\n".join(self.get_source(kind) for kind in ("host", "launcher"))

    @property
    def kernel_source(self) -> str:
        """TileLang's ``JITKernel.kernel_source``: ``get_kernel_source()``."""
        return self.get_kernel_source()

    @property
    def host_source(self) -> str:
        """TileLang's ``JITKernel.host_source``: ``get_host_source()``."""
        return self.get_host_source()

    def show_source(self, which: str = "kernel") -> None:
        """TileLang's ``show_source``: print the kernel source (CuTe DSL), the host source
        (host module and C++ launcher), or ``"both"`` under TileLang's two headers."""
        if which == "kernel":
            print(self.get_kernel_source())
        elif which == "host":
            print(self.get_host_source())
        elif which == "both":
            print("===== Kernel Source =====")
            print(self.get_kernel_source())
            print("===== Host Source =====")
            print(self.get_host_source())
        else:
            raise ValueError(f"{self.name}.show_source: which is 'kernel', 'host' or 'both', "
                             f"got {which!r}")

    def export_sources(self, kernel_path: Optional[str] = None,
                       host_path: Optional[str] = None) -> None:
        """TileLang's ``export_sources``: write the kernel source and/or the host source to
        the given paths (their folders made as needed); at least one path."""
        if kernel_path is None and host_path is None:
            raise ValueError(f"{self.name}.export_sources: give kernel_path, host_path or both")
        for path, text in ((kernel_path, self.get_kernel_source),
                           (host_path, self.get_host_source)):
            if path is not None:
                folder = os.path.dirname(path)
                if folder:
                    os.makedirs(folder, exist_ok=True)
                with open(path, "w") as f:
                    f.write(text())

    def print_source_code(self, which: str = "kernel", file: Optional[str] = None) -> None:
        """TileLang's deprecated ``print_source_code``: with ``file``, the kernel source
        written there (``export_sources(kernel_path=file)``); else ``show_source(which)``."""
        if file is not None:
            self.export_sources(kernel_path=file)
        else:
            self.show_source(which)

    @property
    def params(self) -> list:
        """TileLang's ``JITKernel.params``: a :class:`KernelParam` (name, dtype, shape) for
        each parameter of the prim_func, outputs of ``out_idx`` included, in its order
        (``T.alloc_global`` workspaces, which no call passes, left out)."""
        return [KernelParam.of(a) for a in self.args]

    @property
    def resource_usage(self) -> dict:
        """TileLang's ``resource_usage``: filled by its HIP backend only, so ``{}`` for a
        CUDA kernel, as in TileLang (and ``n_regs``, ``n_spills``, ``n_max_threads`` None)."""
        return {}

    n_regs = n_spills = n_max_threads = property(lambda self: None)

    def get_profiler(self, tensor_supply_type=None, shapes=None):
        """A ``tilecute.profiler.Profiler`` for this kernel (TileLang's API): ``do_bench``
        and ``assert_allclose`` on inputs made as ``tensor_supply_type`` says
        (``tilecute.utils.TensorSupplyType``, default ``Auto``); ``shapes`` gives the
        sizes of symbolic dims."""
        from .profiling import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto, shapes)

    def run_once(self, func=None):
        """TileLang's ``JITKernel.run_once``: the kernel (or ``func`` taking the same
        arguments) called once on inputs its profiler makes; its result."""
        return self.get_profiler().run_once(func)

    @property
    def launcher(self):
        """The loaded TVM FFI module (``cleanup`` and the function live there)."""
        self._load()
        return self._module

    @property
    def release_gil(self) -> bool:
        """Whether a call lets go of the GIL while it launches (default True, TVM FFI's
        default).  False holds it: launches from several Python threads then no longer
        hand the GIL back and forth per call (faster), but a launch that blocks (a full
        launch queue) blocks every Python thread with it, a deadlock when the GPU waits on
        another Python thread; see docs/performance.md.  Settable before or after the
        first call."""
        if self._func is not None:
            return bool(self._func.release_gil)
        if self._release_gil is not None:
            return self._release_gil
        from .package import ffi_release_gil_default

        return ffi_release_gil_default()

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"{self.name}.release_gil takes True or False, got {value!r}")
        with self._lock:
            self._release_gil = value
            if self._func is not None:
                self._func.release_gil = value
                if self._call is not self._func:
                    self._call.release_gil = value

    def _load(self):
        with self._lock:
            if self._func is None:
                self._check_entry()
                self._module = self.host.load_launcher()
                func = self._module[self.name]
                if self._release_gil is not None:
                    func.release_gil = self._release_gil
                from .fastcall import wrap

                self._call = wrap(func, len(self.abi.args)) or func
                self._func = func
                # unload modules and release contexts while the driver is still up
                atexit.register(_cleanup_at_exit, self._module["cleanup"])
                if not self.out_idx and not self.workspace_idx:
                    type(self).__call__ = staticmethod(self._call)
        return self._call or self._func  # (a _func set from outside: a test's, a benchmark's)

    def _check_entry(self) -> None:
        """The files the first call loads, checked against the manifest just before: the
        entry was checked when the kernel was compiled, maybe long ago."""
        try:
            check_private(self.path, recursive=True)
        except FileNotFoundError:
            problems = ["the folder is gone"]
        else:
            problems = verify_entry(self.path, files=_LOADED_FILES)
        if problems:
            raise RuntimeError(
                f"{self.name}: refusing to load the launcher from {str(self.path)!r}: the cache "
                f"entry changed after it was compiled ({'; '.join(problems)}); call "
                "tilecute.compile again, which rebuilds it")

    # ---- calls --------------------------------------------------------------------------
    def launch(self, *args, stream=None):
        """``kernel(*args)`` with an explicit stream given as a torch/CuPy stream, any
        object with ``__cuda_stream__`` (the CUDA stream protocol), or an int handle.
        For arrays of another DLPack framework (CuPy is tested; JAX is not): TVM FFI learns
        the current stream only from a framework that exports the DLPack C exchange API
        (torch does); without it and without ``stream`` the launch goes to the legacy
        default stream, so pass the one the data lives on."""
        if stream is None:
            return self(*args)
        return self(*args, stream_handle(stream))


    def __call__(self, *args):
        if self.out_idx or self.workspace_idx:
            return self._call_with_outputs(args)
        return (self._call or self._load())(*args)

    def allocate_outputs(self, inputs) -> list:
        """torch tensors for the ``out_idx`` outputs, shaped by the symbols the ``inputs``
        (the other arguments, in order) bind, on the first input tensor's device (with none,
        torch's current CUDA device), in the order a call returns them (``out_idx`` as
        given).  Under torch's fake-tensor mode they are fake tensors, so this serves meta
        kernels too."""
        outs = self._allocate(inputs, self.out_idx)
        return outs if self._return_order is None else [outs[k] for k in self._return_order]

    def _allocation_plan(self):
        """How each call's outputs and workspaces get their shapes, worked out once:
        ``(position of the first tensor input, [(dims, torch dtype)])``, each dim a
        static extent or the ``(input position, dim)`` of the input dim that first binds
        its symbol (the launcher's rule).  ``None`` when a dim is an expression or a
        symbol that only an expression binds: those go through ``bind_dims`` each call."""
        given = [a for i, a in enumerate(self.args) if i not in self.out_idx]
        if any(isinstance(a, TensorArg) and DTYPES[a.dtype].pack > 1 for a in self.args):
            return None  # packed tensors (float4_e2m1fn): their dims are not the torch dims
        first: dict = {}
        tensor_pos = None
        for pos, spec in enumerate(given):
            if isinstance(spec, TensorArg):
                tensor_pos = pos if tensor_pos is None else tensor_pos
                for d, dim in enumerate(spec.shape):
                    if isinstance(dim, str):
                        first.setdefault(dim, (pos, d))
        if tensor_pos is None:
            return None
        plan = []
        for i in self.out_idx + self.workspace_idx:
            spec = self.abi.args[i]
            dims = []
            for dim in spec.shape:
                if isinstance(dim, int):
                    dims.append(dim)
                elif isinstance(dim, str) and dim in first:
                    dims.append(first[dim])
                else:
                    return None
            plan.append((tuple(dims), _torch_dtype(spec.dtype)))
        return tensor_pos, plan

    def _allocate_planned(self, inputs):
        """The outputs and workspaces by the allocation plan, or None where the plan does
        not apply to these inputs (no plan, a non-tensor where a tensor is declared, fewer
        dims than declared): the general path then binds and reports."""
        import torch

        plan = self._plan
        if plan is ...:
            plan = self._plan = self._allocation_plan()
        if plan is None:
            return None
        tensor_pos, items = plan
        try:
            device = inputs[tensor_pos].device
            outs = []
            for dims, dtype in items:
                shape = [d if isinstance(d, int) else int(inputs[d[0]].shape[d[1]]) for d in dims]
                outs.append(torch.empty(shape, dtype=dtype, device=device))
        except (AttributeError, IndexError, TypeError):
            return None
        return outs

    def _allocate(self, inputs, which) -> list:
        import torch

        device = None
        pairs = []
        given = [a for i, a in enumerate(self.args) if i not in self.out_idx]
        for spec, value in zip(given, inputs):
            if isinstance(spec, TensorArg) and hasattr(value, "shape"):
                if len(value.shape) != len(spec.shape):  # the launcher's words, before sizing outputs
                    raise ValueError(f"{self.name}: argument '{spec.name}': expected rank "
                                     f"{len(spec.shape)}, got rank {len(value.shape)} "
                                     f"(shape [{', '.join(str(int(d)) for d in value.shape)}])")
                device = device or value.device
                pairs += zip(spec.shape, element_dims(spec.dtype, value.shape))
                if spec.strides is not None and callable(getattr(value, "stride", None)):
                    # a symbol bound by a T.StridedTensor's stride (the launcher's order:
                    # each tensor's shape, then its strides), as TileLang sizes an output
                    pairs += zip(spec.strides, element_dims(spec.dtype, value.stride(), strides=True))
        if device is None and which and torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())  # no tensor input (TileLang's)
        symbols = bind_dims(pairs)
        for spec, value in zip(given, inputs):  # integer scalars a T.empty dim names (m + 1)
            if isinstance(spec, ScalarArg) and isinstance(value, numbers.Integral) and not isinstance(value, bool):
                symbols.setdefault(spec.name, value)
        outs = []
        for i in which:
            spec = self.abi.args[i]
            try:
                shape = [eval_dim(d, symbols) for d in spec.shape]
                if DTYPES[spec.dtype].pack > 1 and shape:  # a torch element holds `pack`
                    shape[-1] = -(-shape[-1] // DTYPES[spec.dtype].pack)
            except KeyError as e:
                what = "workspace" if spec.workspace else "output"
                solve = [dim_text(d) for d, _ in pairs if e.args[0] in dim_symbols(d)]
                raise ValueError(f"{self.name}: {what} '{spec.name}' has symbolic dim {e} "
                                 "that no input binds" + (
                                     f" (no integer {e.args[0]} >= 0 gives the inputs' "
                                     f"extents {', '.join(solve)})" if solve else "")) from None
            outs.append(torch.empty(shape, dtype=_torch_dtype(spec.dtype), device=device))
        return outs

    def _call_with_outputs(self, args):
        """Check the arguments (before anything is loaded), allocate the outputs and the
        workspaces, call."""
        n_in = len(self.args) - len(self.out_idx)
        if not self.out_idx and (len(args) not in (n_in, n_in + 1)
                                 or len(args) == n_in + 1 and _is_tensor(args[-1])):
            raise TypeError(f"{self.name}: expected {n_in} argument{'' if n_in == 1 else 's'} "
                            f"({', '.join(a.name for a in self.args)}) and optionally a "
                            f"stream, got {len(args)}")
        if len(args) not in (n_in, n_in + 1) or (len(args) == n_in + 1 and _is_tensor(args[-1])):
            inputs = [a.name for i, a in enumerate(self.args) if i not in self.out_idx]
            outputs = [self.args[i].name for i in self.out_idx]
            raise TypeError(
                f"{self.name}: expected {n_in} argument{'' if n_in == 1 else 's'} "
                f"({', '.join(inputs)}) and optionally a stream, got {len(args)}: "
                f"{', '.join(outputs)} (out_idx {self.out_idx}) "
                f"{'is' if len(outputs) == 1 else 'are'} allocated by the kernel and returned, "
                "so do not pass "
                f"{'it' if len(outputs) == 1 else 'them'}")
        outs = self._allocate_planned(args)
        if outs is None:
            outs = self._allocate(args[:n_in], self.out_idx + self.workspace_idx)
        func = self._call or self._load()
        inputs, allocated = iter(args[:n_in]), iter(outs)
        full = [next(allocated) if i in self.out_idx or i in self.workspace_idx else next(inputs)
                for i in range(len(self.abi.args))]
        func(*full, *args[n_in:])
        outs = outs[:len(self.out_idx)]
        if not outs:
            return None
        if self._return_order is not None:  # out_idx=[3, 2]: returned as [param 3, param 2]
            outs = [outs[k] for k in self._return_order]
        return outs[0] if len(outs) == 1 else list(outs)  # (a list, as TileLang returns several)


def _is_tensor(value) -> bool:
    return hasattr(value, "__dlpack__") or hasattr(value, "shape")


def stream_handle(stream) -> int:
    """The ``CUstream`` handle (an int) of a stream object of any framework."""
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):  # the CUDA stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"cannot take a CUDA stream handle from {type(stream).__name__}; pass an "
                    "int, a torch or CuPy stream, or an object with __cuda_stream__")


def _torch_dtype(name: str):
    import torch

    from .dtypes import torch_name

    return getattr(torch, torch_name(name))


def load(path, out_idx: Optional[Sequence[int]] = None,
         release_gil: Optional[bool] = None) -> Kernel:
    """Load a compiled kernel from its folder (a cache entry) for deployment.  The
    entry's manifest is checked first; a damaged entry is an error, never used.
    ``release_gil``: as ``Kernel.release_gil`` (None: TVM FFI's default)."""
    path = Path(path)
    if not (path / "manifest.json").exists():
        raise FileNotFoundError(f"{path} is not a tilecute kernel folder (no manifest.json)")
    check_private(path, recursive=True)
    problems = verify_entry(path)
    if problems:
        raise RuntimeError(f"tilecute.load({str(path)!r}): the entry is damaged: " + "; ".join(problems))
    return Kernel(path, out_idx, release_gil)


def write_debug_files(kernel, name: str, program: str, debug_root_path: str) -> None:
    """TileLang's ``debug_root_path`` (``tilelang.jit``, lazy and eager): the kernel's source
    and its program's text, as ``tilelang_jit_kernel_<name>.py`` and
    ``tilelang_jit_program_<name>.py`` in that folder."""
    os.makedirs(debug_root_path, exist_ok=True)
    with open(os.path.join(debug_root_path, f"tilelang_jit_kernel_{name}.py"), "w") as f:
        print(kernel.get_kernel_source(), file=f)
    with open(os.path.join(debug_root_path, f"tilelang_jit_program_{name}.py"), "w") as f:
        print(program, file=f)
