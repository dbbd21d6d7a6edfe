"""Test fakes of the CUDA side of a launcher, for machines without a GPU: the fake driver
libraries and tensors that say they live on a CUDA device.

* ``libcuda.cpp``: a stand-in for ``libcuda.so.1`` as the launcher uses it (entry points
  through ``cuGetProcAddress_v2``): two devices, primary contexts, modules read from a text
  "cubin" (:func:`text_cubin`), a log of launches with their parameter bytes.
  ``tensor_maps.cpp`` adds ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` with a
  log of their arguments.  :func:`fake_libcuda` builds them; a child process that finds the
  library first (:func:`driver_env`) drives launchers against it and reads what it saw
  through :func:`open_driver`.
* ``direct_libcuda.cpp``: the driver's own symbols, for programs linked with ``-lcuda``
  (``benchmarks/raw_launch.cpp``), reporting at exit what was encoded and launched.
* :class:`FakeTensor`: a DLPack tensor with any device, shape, strides and address, and no
  memory.

Test files and the scripts they run in child processes import this package (``tests/`` is
on ``sys.path``); no test file imports another.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tilecute.toolchain import cuda_include_dir

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent  # put it on sys.path in a child process to import this package

# -- building the fake drivers ------------------------------------------------------------------

_CXX = ("g++", "-std=c++17", "-O1", "-fPIC")


def _run(cmd: list[str]) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}"


@functools.lru_cache(maxsize=None)
def fake_libcuda(tensor_maps: bool = False) -> Path:
    """The folder holding the fake ``libcuda.so.1`` (with the tensor-map encoders when
    ``tensor_maps``), built once per process into a temporary folder removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="tilecute-fake-cuda-"))
    atexit.register(shutil.rmtree, folder, True)
    compile_ = [*_CXX, f"-I{cuda_include_dir()}", "-c"]
    library = ["g++", "-shared", "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so.1")]
    if tensor_maps:
        _run([*compile_, "-DcuGetProcAddress_v2=fake_base_cuGetProcAddress_v2", str(HERE / "libcuda.cpp"),
              "-o", str(folder / "base.o")])
        _run([*compile_, str(HERE / "tensor_maps.cpp"), "-o", str(folder / "maps.o")])
        _run([*library, str(folder / "base.o"), str(folder / "maps.o")])
    else:
        _run([*compile_, str(HERE / "libcuda.cpp"), "-o", str(folder / "base.o")])
        _run([*library, str(folder / "base.o")])
    return folder


@functools.lru_cache(maxsize=None)
def fake_direct_libcuda() -> Path:
    """The folder holding ``direct_libcuda.cpp`` built as ``libcuda.so.1`` (and the
    ``libcuda.so`` link that ``-lcuda`` looks for), once per process."""
    folder = Path(tempfile.mkdtemp(prefix="tilecute-fake-direct-cuda-"))
    atexit.register(shutil.rmtree, folder, True)
    _run([*_CXX, "-shared", f"-I{cuda_include_dir()}", str(HERE / "direct_libcuda.cpp"),
          "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so.1")])
    (folder / "libcuda.so").symlink_to("libcuda.so.1")
    return folder


def driver_env(folder: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process whose ``dlopen("libcuda.so.1")`` finds the fake
    in ``folder`` first; ``extra`` adds variables (``FAKE_CUDA_LOAD_DELAY_MS``)."""
    return dict(os.environ, LD_LIBRARY_PATH=f"{folder}:{os.environ.get('LD_LIBRARY_PATH', '')}", **extra)


# The start of a script :func:`drive_launcher` runs: the fake driver opened (``cuda``), the
# launcher loaded (``mod``) with its cubin set, and ``out``, the dict it prints as JSON last.
DRIVE_HEAD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tvm_ffi
from fake_cuda import FakeTensor, open_driver
paths = json.loads(sys.argv[2])
cuda = open_driver()
out = {}
mod = tvm_ffi.load_module(paths["launcher"])
mod["__tilecute_set_cubin"](paths["cubin"])
"""


def drive_launcher(abi, root: Path, drive: str):
    """Build the launcher of launch ABI ``abi`` in ``root`` (warnings as errors) with a text
    "cubin" of its kernels, run the script ``drive`` in a child process on the fake driver
    (its ``sys.argv[1]``: the folder holding this package, ``sys.argv[2]``: JSON
    ``{"launcher": path, "cubin": path}``) and return the launcher's source text and the
    JSON the script printed last."""
    import json
    import sys

    import tilecute
    from tilecute.host.launcher import write_launcher
    from tilecute.toolchain import build_launcher

    source = write_launcher(abi, root, tilecute_version=tilecute.__version__)
    launcher = build_launcher(source, root, extra_cflags=("-Wall", "-Wextra", "-Werror"))
    cubin = text_cubin(root / "fake.cubin", abi.kernels)
    script = root / "drive.py"
    script.write_text(drive)
    run = subprocess.run([sys.executable, str(script), str(TESTS),
                          json.dumps({"launcher": str(launcher), "cubin": str(cubin)})],
                         capture_output=True, text=True, env=driver_env(fake_libcuda()), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return source.read_text(), json.loads(run.stdout.strip().splitlines()[-1])


def text_cubin(path: Path, kernels) -> Path:
    """Write the fake driver's "cubin" for ``kernels`` (launch ABI ``KernelLaunch`` values):
    one ``kernel <symbol> <param sizes...>`` line each.  Returns ``path``."""
    path.write_text("".join(" ".join(["kernel", k.symbol, *(str(p.size) for p in k.params)]) + "\n"
                            for k in kernels))
    return path


def open_driver() -> ctypes.CDLL:
    """In the child process: the fake ``libcuda.so.1`` with the result types of its
    ``fake_*`` exports set."""
    cuda = ctypes.CDLL("libcuda.so.1")
    for name in ("fake_log", "fake_requests"):
        getattr(cuda, name).restype = ctypes.c_char_p
    for name in ("fake_context", "fake_current"):
        getattr(cuda, name).restype = ctypes.c_void_p
    cuda.fake_set_current.argtypes = (ctypes.c_void_p,)
    if hasattr(cuda, "fake_tma_log"):
        cuda.fake_tma_log.restype = ctypes.c_char_p
    return cuda


# -- reading the fake driver's log ----------------------------------------------------------------


def parse_launch(line: str) -> dict:
    """A ``launch <symbol> key=value...`` line of the fake driver's log; ``params`` is the
    list of each parameter's bytes in hex."""
    kind, symbol, *fields = line.split()
    assert kind == "launch"
    out = {"symbol": symbol}
    for field in fields:
        key, _, value = field.partition("=")
        out[key] = value
    out["params"] = out["params"].split(",") if out["params"] else []
    return out


_ENCODE_LISTS = ("dims", "strides", "box", "element_strides", "lower", "upper")


def parse_encode(line: str) -> dict:
    """A ``tiled ...`` / ``im2col ...`` line of an encode log, values as ints (lists for the
    per-axis fields)."""
    mode, *fields = line.split()
    out = {"mode": mode}
    for field in fields:
        key, _, value = field.partition("=")
        out[key] = [int(v) for v in value.split(",")] if "," in value or key in _ENCODE_LISTS else int(value)
    return out


# -- the real driver --------------------------------------------------------------------------------


def has_cuda_driver() -> bool:
    """Whether this machine's own ``libcuda.so.1`` loads."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


needs_no_driver = pytest.mark.skipif(has_cuda_driver(), reason="this machine has a CUDA driver")


# -- DLPack tensors that own no memory --------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


_KEEP_NOTHING = _DELETER(lambda _: None)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)

_DL_DEVICE = {"cpu": 1, "cuda": 2}
_DL_DTYPE = {"float16": (2, 16), "float32": (2, 32), "bfloat16": (4, 16), "int32": (0, 32),
             "float64": (2, 64), "int8": (0, 8), "uint8": (1, 8), "int64": (0, 64), "bool": (6, 8),
             "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}


class FakeTensor:
    """A DLPack tensor with any device, shape, strides and address, and no memory.

    The launcher reads only the DLTensor fields, so a "CUDA" FakeTensor takes a call past
    the device checks on a machine without a GPU.
    """

    def __init__(self, shape, dtype="float32", *, device="cuda:0", strides=None,
                 data=0x7F0000000000, byte_offset=0):
        kind, _, index = device.partition(":")
        self.device = (_DL_DEVICE[kind], int(index or 0))
        self.shape = tuple(shape)
        self.strides = None if strides is None else tuple(strides)
        self.dtype = _DL_DTYPE[dtype]
        self.data = data
        self.byte_offset = byte_offset
        self._alive = []

    @property
    def address(self) -> int:
        return self.data + self.byte_offset

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * ndim)(*self.shape)
        strides = None if self.strides is None else (ctypes.c_int64 * ndim)(*self.strides)
        managed = _DLManagedTensor()
        t = managed.dl_tensor
        t.data = self.data
        t.device = _DLDevice(*self.device)
        t.ndim = ndim
        t.dtype = _DLDataType(self.dtype[0], self.dtype[1], 1)
        t.shape = shape
        t.strides = strides if strides is not None else ctypes.POINTER(ctypes.c_int64)()
        t.byte_offset = self.byte_offset
        managed.deleter = _KEEP_NOTHING
        self._alive.append((managed, shape, strides))
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)


# -- calls into a launcher --------------------------------------------------------------------------


def raises(exc, match_all, fn, *args):
    """Call fn(*args); assert it raises exactly ``exc`` whose message contains every string
    of ``match_all``; return the message."""
    with pytest.raises(Exception) as info:
        fn(*args)
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for part in match_all:
        assert part in message, f"{part!r} not in {message!r}"
    return message
