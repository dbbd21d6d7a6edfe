"""The runtime of an exported package (``tilecute export``): what ``import PKG`` and a
first call need, with the standard library only (``tvm_ffi`` is imported at the first
call, torch only to allocate ``out_idx`` outputs and workspaces).

``tilecute export`` copies this file into every package as ``PKG/_runtime.py``, so a
package needs no tilecute; tilecute itself uses :func:`device_capability` and
:func:`pick_arch` for ``tilecute.compile(..., target=[...])``.

A package's ``manifest.json`` lists its kernels (see docs/export.md).  One kernel is a
list of *variants*, each built for every arch of the package: the specializations the
exporter was given (distinct constant shapes or dtypes) and, for ``T.dynamic`` extents
that decide a stride's alignment, an aligned variant before the general one.  A call
runs the first variant whose shapes, dtypes and divisibility checks its arguments meet;
a call that none accepts is a ``ValueError`` naming the shapes the package was built
for (a package never compiles).  A kernel with one variant and no allocated outputs is,
after its first call, the TVM FFI function itself: no Python frame of the package runs
per call.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import threading

# CUdevice_attribute values (cuda.h): stable since CUDA 2.x
_CC_MAJOR, _CC_MINOR = 75, 76
_DL_CUDA = 2

_TORCH_DTYPES = {"float8_e4m3fn": "float8_e4m3"}
# tilecute dtypes whose tensors are another dtype's (runtime/dtypes.py's TORCH_NAMES)
_STORED_AS = {"tfloat32": "float32"}


class PackageError(RuntimeError):
    """A package that cannot serve this process (no arch for the GPU, no CUDA driver)."""


# ---- the device's arch -------------------------------------------------------------------
_driver = None
_driver_lock = threading.Lock()


def _cuda_driver():
    """libcuda, initialized (``cuInit``), through ctypes; a :class:`PackageError` without it."""
    global _driver
    with _driver_lock:
        if _driver is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise PackageError(f"no CUDA driver (libcuda.so.1: {e}); set TILECUTE_ARCH to "
                                   "pick an arch without a GPU") from None
            status = lib.cuInit(0)
            if status != 0:
                raise PackageError(f"cuInit failed (CUresult {status})")
            _driver = lib
        return _driver


def ffi_release_gil_default() -> bool:
    """Whether a TVM FFI function releases the GIL when nothing set it: True unless the
    process started with ``TVM_FFI_RELEASE_GIL_BY_DEFAULT=0`` (read by TVM FFI at import)."""
    import tvm_ffi

    return bool(tvm_ffi.convert(lambda: None).release_gil)


def device_count() -> int:
    lib = _cuda_driver()
    count = ctypes.c_int()
    status = lib.cuDeviceGetCount(ctypes.byref(count))
    if status != 0:
        raise PackageError(f"cuDeviceGetCount failed (CUresult {status})")
    return count.value


def device_capability(device: int = 0) -> tuple[int, int]:
    """(major, minor) compute capability of CUDA device ``device``."""
    lib = _cuda_driver()
    handle, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    status = lib.cuDeviceGet(ctypes.byref(handle), device)
    if status == 0:
        status = lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, handle)
    if status == 0:
        status = lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, handle)
    if status != 0:
        raise PackageError(f"cannot read the compute capability of CUDA device {device} "
                           f"(CUresult {status})")
    return major.value, minor.value


def _parse_arch(arch: str) -> tuple[int, int, bool]:
    digits = arch[3:].rstrip("af")
    return int(digits[:-1]), int(digits[-1]), arch.endswith(("a", "f"))


def pick_arch(archs, capability: tuple[int, int]):
    """The arch among ``archs`` (``"sm_90a"``, ``"sm_80"``...) whose cubin runs on a GPU of
    ``capability``, or None.  A cubin runs on its own major version at an equal or higher
    minor; an ``a`` (arch-specific) one only on exactly its version.  Preferred: the exact
    version (``a`` first), then the highest minor below."""
    best, best_rank = None, None
    for arch in archs:
        major, minor, specific = _parse_arch(arch)
        if major != capability[0] or minor > capability[1] or (specific and minor != capability[1]):
            continue
        rank = (minor, specific)
        if best_rank is None or rank > best_rank:
            best, best_rank = arch, rank
    return best


def arch_for_device(archs, device: int, kernel: str) -> str:
    """The arch whose cubin serves CUDA device ``device`` (``TILECUTE_ARCH`` overrides the
    GPU, e.g. to check arguments on a machine without one), or a :class:`PackageError`."""
    forced = os.environ.get("TILECUTE_ARCH")
    if forced:
        if forced not in archs:
            raise PackageError(f"{kernel}: TILECUTE_ARCH={forced} but this package was built for "
                               f"{', '.join(archs)}")
        return forced
    capability = device_capability(device)
    arch = pick_arch(archs, capability)
    if arch is None:
        raise PackageError(f"{kernel}: CUDA device {device} is sm_{capability[0]}{capability[1]}; "
                           f"this package has cubins for {', '.join(archs)} only (export it "
                           f"again with --arch sm_{capability[0]}{capability[1]}"
                           f"{'a' if capability >= (9, 0) else ''})")
    return arch


def tensor_device(args) -> int:
    """The CUDA device of the first argument that is a CUDA DLPack tensor, else 0."""
    for a in args:
        probe = getattr(a, "__dlpack_device__", None)
        if probe is not None:
            kind, index = probe()
            if int(kind) == _DL_CUDA:
                return int(index)
    return 0


# ---- shapes --------------------------------------------------------------------------------
def dtype_name(dtype) -> str:
    """tilecute's name of a tensor's dtype (torch's ``torch.float16``, DLPack/TVM FFI's
    ``float16``)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _TORCH_DTYPES.get(name, name)


# ---- dims: an int, a symbol's name or [op, dim, dim] (tilecute.runtime.abi's rules, kept
# here because a package carries no tilecute) ----------------------------------------------
_DIM_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b}


def _eval_dim(d, symbols: dict) -> int:
    if isinstance(d, (list, tuple)):
        return _DIM_OPS[d[0]](_eval_dim(d[1], symbols), _eval_dim(d[2], symbols))
    return int(symbols[d]) if isinstance(d, str) else int(d)


def _dim_names(d) -> list:
    if isinstance(d, (list, tuple)):
        return _dim_names(d[1]) + _dim_names(d[2])
    return [d] if isinstance(d, str) else []


def _bind_dims(pairs) -> dict:
    """Symbols from (declared dim, extent) pairs: plain dims first, then a symbol alone in
    an affine dim ``a * n + b`` is solved (from two evaluations of the dim)."""
    pairs = list(pairs)
    symbols = {}
    for want, got in pairs:
        if isinstance(want, str):
            symbols.setdefault(want, int(got))
    for want, got in pairs:
        if isinstance(want, (list, tuple)):
            free = set(_dim_names(want))
            if len(free) == 1 and (n := free.pop()) not in symbols:
                try:
                    b = _eval_dim(want, {n: 0})
                    a = _eval_dim(want, {n: 1}) - b
                    q, r = divmod(int(got) - b, a) if a else (-1, 1)
                    if r == 0 and q >= 0 and _eval_dim(want, {n: q}) == int(got):
                        symbols[n] = q
                except ZeroDivisionError:
                    pass
    return symbols


def given_args(abi: dict, out_idx) -> list[dict]:
    """The ABI args the caller passes: neither ``out_idx`` outputs nor workspaces."""
    return [a for i, a in enumerate(abi["args"]) if i not in out_idx and not a.get("workspace")]


def accepts(abi: dict, out_idx, checks, args) -> bool:
    """Whether the variant with launch ABI ``abi`` serves ``args`` (the caller's): every
    static dim and dtype matches, each symbol takes one value, and ``checks``
    (position, axis, divisor) hold.  The launcher checks everything again."""
    given = given_args(abi, out_idx)
    if len(args) not in (len(given), len(given) + 1):
        return False
    pairs = []
    for spec, value in zip(given, args):
        if spec["kind"] != "tensor":
            continue
        shape = getattr(value, "shape", None)
        if shape is None or len(shape) != len(spec["shape"]):
            return False
        if dtype_name(getattr(value, "dtype", "")) != _STORED_AS.get(spec["dtype"], spec["dtype"]):
            return False
        pairs += zip(spec["shape"], shape)
    symbols = _bind_dims(pairs)
    for want, got in pairs:
        try:
            if _eval_dim(want, symbols) != got:
                return False
        except (KeyError, ZeroDivisionError):
            return False
    for position, axis, divisor in checks:
        if int(args[position].shape[axis]) % divisor:
            return False
    return True


def allocate(abi: dict, out_idx, which, inputs, kernel: str) -> list:
    """torch tensors for the args ``which`` (indices into the ABI's args), shaped by the
    symbols that ``inputs`` bind, on the first input tensor's device."""
    import torch

    device, pairs = None, []
    for spec, value in zip(given_args(abi, out_idx), inputs):
        if spec["kind"] == "tensor" and hasattr(value, "shape"):
            device = device or value.device
            pairs += zip(spec["shape"], value.shape)
    symbols = _bind_dims(pairs)
    for spec, value in zip(given_args(abi, out_idx), inputs):  # an output dim's scalar (m + 1)
        if spec["kind"] == "scalar" and isinstance(value, int) and not isinstance(value, bool):
            symbols.setdefault(spec["name"], value)
    out = []
    for i in which:
        spec = abi["args"][i]
        try:
            shape = [_eval_dim(d, symbols) for d in spec["shape"]]
        except KeyError as e:
            raise ValueError(f"{kernel}: '{spec['name']}' has symbolic dim {e} that no input "
                             "binds") from None
        dtype = {"float8_e4m3": "float8_e4m3fn", **_STORED_AS}.get(spec["dtype"], spec["dtype"])
        out.append(torch.empty(shape, dtype=getattr(torch, dtype), device=device))
    return out


def describe(abi: dict, out_idx) -> str:
    """``A: float16[1024, N], n: int32`` for the args a caller passes."""
    parts = []
    for a in given_args(abi, out_idx):
        if a["kind"] == "tensor":
            parts.append(f"{a['name']}: {a['dtype']}[{', '.join(map(str, a['shape']))}]")
        else:
            parts.append(f"{a['name']}: {a['dtype']}")
    return ", ".join(parts)


# ---- a packaged kernel -------------------------------------------------------------------
def _cleanup_at_exit(cleanup) -> None:
    """As tilecute's kernels do: unload modules at exit unless another thread may launch."""
    current = threading.current_thread()
    if any(t is not current and t.is_alive() for t in threading.enumerate()):
        return
    cleanup()


class PackagedKernel:
    """``PKG.<name>``: call it with the kernel's arguments (``out_idx`` outputs are
    allocated and returned), optionally a trailing int CUDA stream handle."""

    def __init__(self, root: str, name: str, spec: dict):
        self.root, self.name, self.spec = root, name, spec
        self.function = spec["function"]
        self.out_idx = list(spec["out_idx"])
        self.returns = spec.get("returns")
        self.variants = spec["variants"]
        self.archs = list(spec.get("archs") or self.variants[0]["archs"])
        first = self.variants[0]["archs"][self.archs[0]]["abi"]
        self.workspace_idx = [i for i, a in enumerate(first["args"]) if a.get("workspace")]
        self._lock = threading.Lock()
        self._funcs: dict = {}  # (variant index, arch) -> TVM FFI function
        self._release_gil = None  # set on each function as it loads (None: TVM FFI's default)
        self._arch_of_device: dict = {}
        self._single_arch = None
        self.__doc__ = f"{name}({describe(first, self.out_idx)})"
        self.__class__ = type(f"PackagedKernel_{name}", (PackagedKernel,), {})

    def __repr__(self) -> str:
        return f"<packaged kernel {self.__doc__}: {len(self.variants)} variant(s), {', '.join(self.archs)}>"

    def shapes(self) -> list[str]:
        """What each variant accepts, as the error for an unserved call lists them."""
        out = []
        for v in self.variants:
            abi = v["archs"][self.archs[0]]["abi"]
            when = "".join(f", arg {p} dim {ax} % {d} == 0" for p, ax, d in v.get("checks", []))
            out.append(describe(abi, self.out_idx) + when)
        return out

    def _arch(self, args) -> str:
        if self._single_arch:
            return self._single_arch
        device = tensor_device(args)
        arch = self._arch_of_device.get(device)
        if arch is None:
            arch = self._arch_of_device[device] = arch_for_device(self.archs, device, self.name)
        return arch

    @property
    def release_gil(self) -> bool:
        """Whether a call lets go of the GIL while it launches (default True, TVM FFI's);
        False holds it: faster launches from several Python threads, but a launch that
        blocks blocks every Python thread (tilecute's Kernel.release_gil; tilecute's
        docs/performance.md, "Launching from several threads")."""
        if self._release_gil is not None:
            return self._release_gil
        return ffi_release_gil_default()

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"{self.name}.release_gil takes True or False, got {value!r}")
        with self._lock:
            self._release_gil = value
            for func in self._funcs.values():
                func.release_gil = value

    def _load(self, variant: int, arch: str):
        key = (variant, arch)
        func = self._funcs.get(key)
        if func is not None:
            return func
        with self._lock:
            if key not in self._funcs:
                import tvm_ffi

                folder = os.path.join(self.root, self.variants[variant]["archs"][arch]["dir"])
                module = tvm_ffi.load_module(os.path.join(folder, "launcher.so"))
                module["__tilecute_set_cubin"](os.path.join(folder, "kernel.cubin"))
                atexit.register(_cleanup_at_exit, module["cleanup"])
                func = module[self.function]
                if self._release_gil is not None:
                    func.release_gil = self._release_gil
                self._funcs[key] = func
            return self._funcs[key]

    def _first_call(self, args):
        """Pick the arch once for the process when every GPU has the same one; then, for
        one variant and nothing to allocate, become the TVM FFI function."""
        if os.environ.get("TILECUTE_ARCH"):
            self._single_arch = arch_for_device(self.archs, 0, self.name)
        else:
            count = device_count()
            archs = {arch_for_device(self.archs, d, self.name) for d in range(count)}
            if len(archs) == 1:
                self._single_arch = archs.pop()
        if len(self.variants) == 1 and not self.out_idx and not self.workspace_idx \
                and self._single_arch and not self.returns:
            type(self).__call__ = staticmethod(self._load(0, self._single_arch))

    def __call__(self, *args):
        if not self._funcs:
            self._first_call(args)
            if type(self).__call__ is not PackagedKernel.__call__:
                return type(self).__call__(*args)
        arch = self._arch(args)
        n_given = len(given_args(self.variants[0]["archs"][arch]["abi"], self.out_idx))
        inputs, extra = args[:n_given], args[n_given:]
        if len(args) not in (n_given, n_given + 1) or \
                (len(args) == n_given + 1 and hasattr(args[-1], "shape")):
            raise TypeError(f"{self.name}: expected {n_given} argument(s) "
                            f"({describe(self.variants[0]['archs'][arch]['abi'], self.out_idx)}) "
                            f"and optionally a stream, got {len(args)}")
        for index, variant in enumerate(self.variants):
            abi = variant["archs"][arch]["abi"]
            if len(self.variants) == 1 or accepts(abi, self.out_idx, variant.get("checks", []), args):
                break
        else:
            got = ", ".join(f"{dtype_name(a.dtype)}{list(a.shape)}" if hasattr(a, "shape")
                            else type(a).__name__ for a in args)
            raise ValueError(f"{self.name}: no variant of this package takes ({got}); it was "
                             "built for: " + " | ".join(self.shapes()) + " (a package never "
                             "compiles: export it again with these shapes)")
        func = self._load(index, arch)
        allocated = self.out_idx + self.workspace_idx
        if not allocated:
            return func(*args)
        outs = allocate(abi, self.out_idx, allocated, inputs, self.name)
        it_in, it_out = iter(inputs), iter(outs)
        full = [next(it_out) if i in allocated else next(it_in) for i in range(len(abi["args"]))]
        func(*full, *extra)
        outs = outs[:len(self.out_idx)]
        if self.returns is not None:
            outs = [outs[i] for i in self.returns]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else list(outs)  # (a list, as TileLang returns several)


def load_package(root: str) -> dict:
    """``{name: PackagedKernel}`` for the package folder ``root`` (its manifest.json)."""
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    return {name: PackagedKernel(root, name, spec) for name, spec in manifest["kernels"].items()}
