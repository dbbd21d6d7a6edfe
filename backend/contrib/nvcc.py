"""TileLang's ``tilelang.contrib.nvcc`` helpers that programs call to ask about the
target: its compute version (``get_target_compute_version() -> "9.0"``), what that
version has (``have_fp8``, ``have_tma`` ...) and the CUDA toolkit's version.  The target
is an arch name (``"sm_90a"``, a ``cuda:`` prefix allowed) or, by default, the GPU's arch,
else ``TILECUTE_ARCH`` (:func:`tilecute.runtime.cubingen.default_arch`).  Compiling CUDA C
with nvcc (``compile_cuda``, ``get_ptx_from_source`` ...) is TileLang's path, not
tilecute's: those names are errors saying so."""

from __future__ import annotations

import re

from ..refusals import refusing_getattr


def _arch_of(target) -> str:
    if target is None:
        from ..runtime.cubingen import default_arch

        return default_arch()
    text = str(target)
    m = re.search(r"sm_(\d+)[a-z]*", text)
    if not m:
        raise ValueError(f"nvcc: cannot read an arch from target {target!r} (give e.g. 'sm_90a')")
    return m.group(0)


def get_target_compute_version(target=None) -> str:
    """The compute capability of ``target`` as TileLang writes it: ``"9.0"`` for sm_90a,
    ``"8.6"`` for sm_86, ``"10.0"`` for sm_100a."""
    digits = re.findall(r"\d+", _arch_of(target))[0]
    return f"{digits[:-1]}.{digits[-1]}"


def parse_compute_version(compute_version) -> tuple:
    """``"9.0"`` -> ``(9, 0)``."""
    try:
        major, minor = str(compute_version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise RuntimeError(f"compute version {compute_version!r} is not 'major.minor'") from None


def get_target_arch(compute_version) -> str:
    """``"9.0"`` (or ``(9, 0)``) -> ``"90a"``: the arch digits, with ``a`` from 9.0 on."""
    major, minor = (parse_compute_version(compute_version) if isinstance(compute_version, str)
                    else compute_version)
    return f"{major * 10 + minor}" + ("a" if major >= 9 else "")


def have_fp16(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return major >= 6 or (major == 5 and minor >= 3)


def have_int8(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 6


def have_tensorcore(compute_version=None, target=None) -> bool:
    version = compute_version or get_target_compute_version(target)
    return parse_compute_version(version)[0] >= 7


def have_bf16(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 8


def have_fp8(compute_version) -> bool:
    return parse_compute_version(compute_version) >= (8, 9)


def _major(target) -> int:
    return parse_compute_version(get_target_compute_version(target))[0]


def have_tma(target=None) -> bool:
    return _major(target) >= 9


def have_mbarrier(target=None) -> bool:
    return _major(target) >= 8


def have_pdl(target=None) -> bool:
    return _major(target) >= 9


def is_hopper(target=None) -> bool:
    return _major(target) == 9


def have_cudagraph() -> bool:
    try:
        return get_cuda_version() >= (10, 0)
    except RuntimeError:
        return False


def find_cuda_path() -> str:
    """The CUDA folder whose ``include/cuda.h`` tilecute builds launchers with."""
    from ..toolchain import cuda_include_dir

    return str(cuda_include_dir().parent)


def get_cuda_version(cuda_path=None) -> tuple:
    """The CUDA version of ``cuda_path`` (default :func:`find_cuda_path`) as ``(major,
    minor)``, read from its ``cuda.h`` (``CUDA_VERSION``)."""
    import os

    header = os.path.join(cuda_path or find_cuda_path(), "include", "cuda.h")
    try:
        with open(header) as f:
            m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read())
    except OSError:
        m = None
    if not m:
        raise RuntimeError(f"cannot read the CUDA version from {header}")
    version = int(m.group(1))
    return version // 1000, version % 1000 // 10


__getattr__ = refusing_getattr(__name__, {n: "it compiles CUDA C with nvcc, TileLang's path; "
                                             "tilecute compiles CuTe DSL (tilecute.build_cubin)"
                                          for n in ("compile_cuda", "get_ptx_from_source",
                                                    "get_sass_from_source", "get_nvcc_compiler",
                                                    "default_compile_options",
                                                    "get_target_arch_and_code")})
