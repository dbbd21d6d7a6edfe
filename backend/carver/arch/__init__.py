"""TileLang's ``tilelang.carver.arch``: the device model ``CUDA(target)`` (what a GPU
offers: SMs, shared memory, registers, L2, compute capability), the ``is_*_arch``
predicates, ``get_arch`` / ``auto_infer_current_arch``, and :mod:`.driver`.  tilecute
targets NVIDIA GPUs only: ``CDNA``, ``RDNA``, ``METAL`` and ``CPU`` are errors when
constructed."""

from __future__ import annotations

import re

from ...refusals import Refused
from . import driver  # noqa: F401

_NOT_NVIDIA = "tilecute targets NVIDIA GPUs (CuTe DSL); this device model is TileLang's for {}"
CDNA = Refused("tilelang.carver.arch.CDNA", _NOT_NVIDIA.format("AMD CDNA GPUs"))
RDNA = Refused("tilelang.carver.arch.RDNA", _NOT_NVIDIA.format("AMD RDNA GPUs"))
METAL = Refused("tilelang.carver.arch.METAL", _NOT_NVIDIA.format("Apple GPUs"))
CPU = Refused("tilelang.carver.arch.CPU", _NOT_NVIDIA.format("CPUs"))


def check_sm_version(arch: str) -> int:
    """``"sm_90a"`` -> 90; -1 for a string that is not an SM arch."""
    m = re.fullmatch(r"(?:sm_)?(\d+)[a-zA-Z]*", str(arch))
    return int(m.group(1)) if m else -1


class CUDA:
    """TileLang's CUDA device model of GPU 0 for ``target`` (``"cuda"``, ``"sm_90a"``,
    ``"cuda:sm_90a"``; ``"cuda"``: the GPU's arch, else ``TILECUTE_ARCH``).  Its numbers
    come from the GPU (:mod:`.driver`), so constructing one needs a GPU."""

    platform = "CUDA"

    def __init__(self, target="cuda"):
        from ...runtime.cubingen import default_arch

        text = str(target)
        arch = re.search(r"sm_\d+[a-z]*", text)
        self.target = arch.group(0) if arch else default_arch()
        self.sm_version = check_sm_version(self.target)
        props = driver.get_cuda_device_properties(0)
        self.name = props.name
        self.smem_cap = driver.get_shared_memory_per_block()
        self.compute_max_core = props.multi_processor_count
        self.warp_size = 32
        self.compute_capability = f"{props.major}{props.minor}"
        self.reg_cap = 65536
        self.max_smem_usage = 2 * self.smem_cap
        self.sm_partition = 4
        self.l2_cache_size_bytes = int(getattr(props, "L2_cache_size", 0))
        self.transaction_size = [32, 128]  # bytes
        self.bandwidth = [750, 12080]  # MB/s, TileLang's relative figures for its roller
        self.available_tensor_instructions = None

    def __repr__(self) -> str:
        return f"CUDA({self.target})"


def is_cuda_arch(arch) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch) -> bool:
    return is_cuda_arch(arch) and 70 <= arch.sm_version < 80


def is_ampere_arch(arch) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 89


def is_ada_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 89


def is_hopper_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90


def has_mma_support(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version >= 80


def is_cdna_arch(arch) -> bool:
    return False


def is_rdna_arch(arch) -> bool:
    return False


def is_metal_arch(arch) -> bool:
    return False


def is_cpu_arch(arch) -> bool:
    return False


def get_arch(target="cuda") -> CUDA:
    """The device model for ``target``; tilecute has the CUDA one only."""
    text = str(target)
    if not (text.startswith(("cuda", "sm_", "nvidia"))):
        raise ValueError(f"get_arch: tilecute targets NVIDIA GPUs (cuda / sm_XX), got {target!r}")
    return CUDA(target)


def auto_infer_current_arch() -> CUDA:
    return CUDA("cuda")


__all__ = ["CUDA", "CDNA", "RDNA", "METAL", "CPU", "is_cuda_arch", "is_volta_arch",
           "is_ampere_arch", "is_ada_arch", "is_hopper_arch", "has_mma_support",
           "is_cdna_arch", "is_rdna_arch", "is_metal_arch", "is_cpu_arch", "get_arch",
           "auto_infer_current_arch", "check_sm_version"]
