"""The lazy cubin step: run a kernel's generated CuTe DSL source through ``cute.compile``
and keep the cubin.

This is the only place tilecute imports CUTLASS.  The generated host module calls
:func:`produce_cubin` on first use; ``tilecute.build_cubin`` calls it ahead of time.
The compile runs in a private staging folder (``--dump-dir``); the caller moves the cubin
into place with ``os.replace``.  Every arch is checked (``tilecute.runtime.arch``) before
it reaches ``cute.compile``'s option string, which is built with ``shlex`` so that a
folder name with spaces stays one argument.
"""

from __future__ import annotations

import glob
import os
import shlex
import tempfile

from .abi import LaunchABI
from .arch import check_arch, device_arch
from .cubin import CubinInfo, check_abi, read_cubin
from .entry import import_source


def gpu_arch(device: int = 0):
    """The arch of GPU ``device`` (``sm_90a`` on Hopper, ``sm_80``...), or None without a
    driver or GPU.  Asks the driver directly (ctypes), so it needs no CUDA Python package."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), device) != 0:
        return None
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    if cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0 or \
            cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0:
        return None
    # wgmma, tcgen05 and sm_120's MMAs need the arch-specific target
    suffix = "a" if major.value in (9, 10, 12) else ""
    return f"sm_{major.value}{minor.value}{suffix}"


def default_arch() -> str:
    """The GPU's arch, else TILECUTE_ARCH / CUTE_DSL_ARCH (for machines without a GPU),
    checked against the architectures tilecute supports (``TargetError`` naming them)."""
    arch = gpu_arch()
    if arch:
        return check_arch(arch, "the GPU cuda:0")
    for var in ("TILECUTE_ARCH", "CUTE_DSL_ARCH"):
        if os.environ.get(var):
            return check_arch(os.environ[var], f"${var}")
    raise RuntimeError(
        "tilecute: no GPU found to pick the target arch from; set TILECUTE_ARCH "
        "(e.g. sm_90a or sm_80) to build cubins on a machine without a GPU"
    )


_import_source = import_source  # the name tests/test_gemm.py imports


def compile_cubin(source_path: str, function: str, arch: str, out_dir: str,
                  ptxas_options: str = "") -> str:
    """Compile the ``@cute.jit`` wrapper ``function`` of the CuTe DSL file ``source_path``
    for ``arch``; return the path of the cubin written under ``out_dir``.
    ``ptxas_options``: ptxas flags (compile option ``ptxas_options``, checked there); with
    ``-v`` CuTe DSL's ptxas remarks are on, so ptxas' report is printed (stderr)."""
    arch = device_arch(check_arch(arch))  # sm_90: sm_90a, as TileLang's nvcc target
    os.environ.setdefault("CUTE_DSL_ARCH", arch)
    import cutlass.cute as cute  # noqa: F401  (first CUTLASS import of the process, if lazy)

    # in sys.modules while it runs: CuTe DSL reads the kernels' source through inspect
    module = import_source(source_path, f"tilecute_cute_{abs(hash(source_path)):x}")
    wrapper = getattr(module, function)
    dump = tempfile.mkdtemp(prefix="dump-", dir=out_dir)
    options = ["--keep-cubin", "--gpu-arch", arch, "--dump-dir", dump]
    if ptxas_options:
        options += ["--ptxas-options", ptxas_options]
        if {"-v", "--verbose"} & set(ptxas_options.split()):
            options.append("remarks{ptx}")
    cute.compile(wrapper, *module.placeholder_args(), options=shlex.join(options))
    found = glob.glob(os.path.join(dump, "*.cubin"))
    if len(found) != 1:
        raise RuntimeError(f"{function}: cute.compile left {len(found)} cubins in {dump}, expected 1")
    return found[0]


def produce_cubin(source_path: str, abi: LaunchABI, arch: str, staging_dir: str,
                  name: str = "kernel.cubin", ptxas_options: str = "") -> CubinInfo:
    """Compile, check the cubin against ``abi`` (``ABIMismatch`` on disagreement), and
    leave it as ``staging_dir/name``."""
    cubin = compile_cubin(source_path, abi.function, arch, staging_dir, ptxas_options)
    info = read_cubin(cubin, arch)
    check_abi(info, abi)
    target = os.path.join(staging_dir, name)
    os.replace(cubin, target)
    return CubinInfo(path=target, arch=arch, kernels=info.kernels)
