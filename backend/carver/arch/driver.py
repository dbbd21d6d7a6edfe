"""TileLang's ``tilelang.carver.arch.driver``: properties of CUDA device ``device_id``
(default 0), read from torch's device properties and the CUDA driver's attributes
(``cuDeviceGetAttribute``, through ctypes: no toolkit needed).  Without a GPU each raises
``RuntimeError`` saying so (TileLang's return ``None`` where it prints an error)."""

from __future__ import annotations

# CUdevice_attribute numbers (the same as the runtime's cudaDeviceAttr for these)
MAX_SHARED_MEMORY_PER_BLOCK = 8
MAX_REGISTERS_PER_BLOCK = 12
MULTIPROCESSOR_COUNT = 16
L2_CACHE_SIZE = 38
MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
MAX_PERSISTING_L2_CACHE_SIZE = 108


def get_cuda_device_properties(device_id: int = 0):
    """torch's properties of the device (``name``, ``multi_processor_count``,
    ``total_memory``, ``L2_cache_size`` ...)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("tilecute.carver.arch.driver: no CUDA GPU is available")
    return torch.cuda.get_device_properties(torch.device("cuda", device_id))


def get_device_name(device_id: int = 0) -> str:
    return get_cuda_device_properties(device_id).name


def get_num_sms(device_id: int = 0) -> int:
    """The number of streaming multiprocessors (132 on an H100 SXM)."""
    return get_cuda_device_properties(device_id).multi_processor_count


def get_device_attribute(attr: int, device_id: int = 0) -> int:
    """The driver's ``cuDeviceGetAttribute(attr)`` of the device."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise RuntimeError("tilecute.carver.arch.driver: no CUDA driver (libcuda.so.1) on this "
                           "machine") from None
    dev, value = ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), device_id) != 0:
        raise RuntimeError(f"tilecute.carver.arch.driver: no CUDA device {device_id}")
    status = cuda.cuDeviceGetAttribute(ctypes.byref(value), int(attr), dev)
    if status != 0:
        raise RuntimeError(f"cuDeviceGetAttribute({attr}) failed with CUresult {status}")
    return value.value


def _scaled(n: int, format: str) -> int:
    units = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}
    if format not in units:
        raise ValueError(f"format must be one of bytes, kb, mb, got {format!r}")
    return n // units[format]


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block gets without opting in (48 KiB)."""
    return _scaled(get_device_attribute(MAX_SHARED_MEMORY_PER_BLOCK, device_id), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory per multiprocessor (TileLang reads this attribute under this name)."""
    return _scaled(get_device_attribute(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device_id), format)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    return get_device_attribute(MAX_PERSISTING_L2_CACHE_SIZE, device_id)


def get_registers_per_block(device_id: int = 0) -> int:
    return get_device_attribute(MAX_REGISTERS_PER_BLOCK, device_id)
