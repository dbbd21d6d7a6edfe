"""Hardware facts per target architecture: the one place passes, the code generator and
the launcher generator read them from.  Imports nothing of tilecute but
``tilecute.runtime.arch`` (the supported archs and ``check_arch``).

A target is a CUDA architecture name as ``cute.compile`` takes it (``sm_90a``,
``sm_80``...); :func:`check_arch` refuses anything else before it reaches a generated
file or a compiler option string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the supported archs and their check live in the runtime, which reads TILECUTE_ARCH without
# importing the compiler; re-exported here
from .runtime.arch import SUPPORTED_ARCHS, TargetError, check_arch  # noqa: F401

WARP = 32  # threads per warp
WARPGROUP = 128  # threads per warpgroup (wgmma, setmaxnreg)
MAX_THREADS = 1024  # threads per block
VECTOR_BYTES = 16  # the widest vector load/store a thread issues (128 bits)
ASYNC_COPY_BYTES = (4, 8, 16)  # cp.async moves 4, 8 or 16 bytes

# TMA (sm_90+): box and tensor limits of cuTensorMapEncodeTiled
TMA_MAX_BOX = 256  # elements per box dimension
TMA_MAX_RANK = 5
TMA_SWIZZLES = (128, 64, 32)  # bytes; the widest dividing a row is chosen
# the element types of a TMA reduce-store that adds (cp.reduce.async.bulk.tensor .add; the
# tensor map's element type is the add's), the ones TileLang's T.atomic_add(...,
# use_tma=True) takes
TMA_REDUCE_ADD_TYPES = ("float16", "bfloat16", "float32", "int32", "uint32", "uint64")

# shared memory layout
SHARED_ALIGN = 128  # bytes; every shared buffer starts at a multiple (swizzles and cp.async)
TMA_SWIZZLE_ALIGN = 1024  # bytes; a TMA-swizzled buffer (and each of its stages) starts at one

# tensor-core MMA
WGMMA_TYPES = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8", "uint8")
# warp mma.sync (sm_80+): float32 multiplies as tf32; int8 / uint8 (m16n8k32, K-major
# operands) by inline PTX, as CuTe DSL has no warp-level int8 atom; int4 (m16n8k64, K-major,
# no wgmma takes it) alike
MMA_TYPES = ("float16", "bfloat16", "float32", "tfloat32", "int8", "uint8", "int4", "uint4")
MMA_INSTR_K = {"float16": 16, "bfloat16": 16, "float32": 8, "tfloat32": 8, "float8_e4m3": 32,
               "float8_e5m2": 32, "int8": 32, "uint8": 32, "int4": 64,
               "uint4": 64}
# the accumulator dtypes each operand dtype's tensor-core MMAs take (float16 accumulators:
# wgmma and mma.sync for float16, wgmma for float8; int32 for int8: both)
MMA_ACCUMULATORS = {"float16": ("float32", "float16"), "bfloat16": ("float32",),
                    "float32": ("float32",), "tfloat32": ("float32",), "float8_e4m3": ("float32", "float16"),
                    "float8_e5m2": ("float32", "float16"), "int8": ("int32",), "uint8": ("int32",),
                    "int4": ("int32",), "uint4": ("int32",)}

PRODUCER_REGS = 24  # registers per thread a TMA producer warpgroup keeps (TileLang, FA3: 24)


@dataclass(frozen=True)
class Target:
    """What a block may use on one architecture."""

    arch: str
    cc: int  # compute capability as an integer (90, 80...)
    shared_per_block: int  # the most dynamic shared memory a block can opt into (bytes)
    shared_per_sm: int  # shared memory of one SM (bytes)
    registers_per_sm: int
    # the fewest SMs a GPU of this architecture has (Hopper: the H20's 78; others: 0,
    # unknown): a grid of at most this many blocks gives every block an SM of its own
    min_sms: int = 0

    def at_least(self, cc: int) -> bool:
        return self.cc >= cc

    def launch_regs(self, threads: int, blocks_per_sm: int = 1) -> int:
        """The registers per thread a kernel of ``threads`` threads is compiled with when
        its launch bounds ask for ``blocks_per_sm`` blocks an SM (the register file over
        the threads, in steps of 8, at most 255).  ptxas holds every instruction within
        it, whatever setmaxnreg raises later, and it times the threads is the pool a
        block's setmaxnreg counts draw from."""
        return min(255, self.registers_per_sm // (threads * blocks_per_sm)) // 8 * 8

    @property
    def tma(self) -> bool:
        return self.cc >= 90

    @property
    def wgmma(self) -> bool:
        return self.arch == "sm_90a"

    @property
    def cp_async(self) -> bool:
        return self.cc >= 80


# Shared memory per SM and the per-block opt-in limit, from the CUDA programming guide's
# compute capability table.
_SHARED = {
    80: (164 * 1024, 163 * 1024), 86: (100 * 1024, 99 * 1024), 87: (164 * 1024, 163 * 1024),
    89: (100 * 1024, 99 * 1024), 90: (228 * 1024, 227 * 1024),
    100: (228 * 1024, 227 * 1024), 103: (228 * 1024, 227 * 1024),
    120: (100 * 1024, 99 * 1024),
}

_ARCH = re.compile(r"sm_(\d+)a?")


def compute_capability(arch: str) -> int:
    m = _ARCH.fullmatch(arch)
    return int(m.group(1)) if m else 0


def arch_at_least(arch: str, cc: int) -> bool:
    """Is target ``arch`` (``sm_90a``, ``sm_80``...) compute capability ``cc`` (90, 80...)
    or newer?"""
    return compute_capability(arch) >= cc


# the fewest SMs of a GPU of each architecture (H100 SXM / H200 132, H100 PCIe 114, H20 78)
_MIN_SMS = {90: 78}


def target(arch: str) -> Target:
    cc = compute_capability(arch)
    per_sm, per_block = _SHARED.get(cc, _SHARED[90] if cc >= 90 else _SHARED[80])
    return Target(arch, cc, per_block, per_sm, 65536, _MIN_SMS.get(cc, 0))
