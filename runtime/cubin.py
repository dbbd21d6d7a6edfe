"""Read a cubin's kernels and parameter tables, and check them against a launch ABI.

The parameter table of each kernel lives in its ``.nv.info.<kernel>`` ELF section as
``EIATTR_KPARAM_INFO`` records (ordinal, byte offset, size); its register count and
local-memory frame (what ``ptxas -v`` reports: ``Used N registers``, ``N bytes stack
frame``) in the cubin's ``.nv.info`` as ``EIATTR_REGCOUNT`` / ``EIATTR_FRAME_SIZE``
records (symbol index, value); the named barriers it uses (``used N barriers``) in bits
20..26 of its ``.text.<kernel>`` section's flags.  pyelftools reads the ELF;
the ``.nv.info`` records are decoded here because no library knows them.

Imports pyelftools only; no CUTLASS, no torch, no compiler modules.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

from .abi import LaunchABI

# .nv.info record formats and the attributes we read (cuobjdump's names)
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17
_EIATTR_CBANK_PARAM_SIZE = 0x19
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F


@dataclass(frozen=True)
class CubinParam:
    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True)
class CubinKernel:
    name: str
    params: tuple[CubinParam, ...]  # by ordinal
    param_bytes: int  # size of the parameter buffer the cubin declares
    registers: int = 0  # registers per thread
    frame_bytes: int = 0  # local memory per thread (arrays indexed at run time, spills)
    barriers: int = 0  # barriers (bar.sync ids) the kernel uses


@dataclass(frozen=True)
class CubinInfo:
    path: str
    arch: str
    kernels: dict[str, CubinKernel]

    @property
    def kernel_names(self) -> list[str]:
        return list(self.kernels)


class ABIMismatch(Exception):
    """The cubin and the launch ABI disagree; the message names both sides."""


def _records(data: bytes):
    i = 0
    while i + 4 <= len(data):
        fmt, attr = data[i], data[i + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, i + 2)
            yield attr, data[i + 4 : i + 4 + size]
            i += 4 + size
        else:  # NVAL / BVAL / HVAL: the value sits in the 2 bytes after the header
            yield attr, data[i + 2 : i + 4]
            i += 4


def read_cubin(path: str, arch: str = "") -> CubinInfo:
    """The kernels of the cubin at ``path`` with their parameter tables."""
    from elftools.elf.elffile import ELFFile

    kernels: dict[str, CubinKernel] = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if not section.name.startswith(".nv.info."):
                continue
            name = section.name[len(".nv.info."):]
            params: list[CubinParam] = []
            param_bytes = 0
            for attr, value in _records(section.data()):
                if attr == _EIATTR_KPARAM_INFO:
                    _index, ordinal, offset, packed = struct.unpack("<IHHI", value)
                    params.append(CubinParam(ordinal, offset, (packed >> 18) & 0x3FFF))
                elif attr == _EIATTR_CBANK_PARAM_SIZE:
                    (param_bytes,) = struct.unpack("<H", value)
            params.sort(key=lambda p: p.ordinal)
            kernels[name] = CubinKernel(name, tuple(params), param_bytes)
        # a kernel without parameters has no .nv.info.<name>: take the function symbols too
        symtab = elf.get_section_by_name(".symtab")
        if symtab is not None:
            for sym in symtab.iter_symbols():
                if (sym["st_info"]["type"] == "STT_FUNC" and sym["st_info"]["bind"] == "STB_GLOBAL"
                        and sym.name not in kernels):
                    kernels[sym.name] = CubinKernel(sym.name, (), 0)
        info = elf.get_section_by_name(".nv.info")
        if symtab is not None and info is not None:
            resources: dict[str, dict] = {}
            for attr, value in _records(info.data()):
                if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE):
                    index, amount = struct.unpack("<II", value)
                    field = "registers" if attr == _EIATTR_REGCOUNT else "frame_bytes"
                    resources.setdefault(symtab.get_symbol(index).name, {})[field] = amount
            for name in kernels:
                text = elf.get_section_by_name(".text." + name)
                if text is not None:
                    resources.setdefault(name, {})["barriers"] = (text["sh_flags"] >> 20) & 0x7F
            for name, fields in resources.items():
                if name in kernels:
                    kernels[name] = dataclasses.replace(kernels[name], **fields)
    return CubinInfo(path=str(path), arch=arch, kernels=kernels)


def check_abi(info: CubinInfo, abi: LaunchABI) -> None:
    """Raise :class:`ABIMismatch` unless every kernel of ``abi`` is in the cubin with the
    parameter offsets and sizes the launcher will pack."""
    for launch in abi.kernels:
        kernel = info.kernels.get(launch.symbol)
        if kernel is None:
            raise ABIMismatch(
                f"{abi.function}: the launch ABI names kernel {launch.symbol!r}, "
                f"the cubin {info.path} has {sorted(info.kernels)}"
            )
        want = [(p.name, off, p.size) for p, off in zip(launch.params, launch.param_offsets())]
        got = [(c.offset, c.size) for c in kernel.params]
        if len(want) != len(got):
            raise ABIMismatch(
                f"{abi.function}: kernel {launch.symbol}: the launch ABI packs "
                f"{len(want)} parameters {[w[0] for w in want]}, the cubin declares {len(got)} "
                f"(offset, size) = {got}"
            )
        for (name, off, size), (c_off, c_size) in zip(want, got):
            if (off, size) != (c_off, c_size):
                raise ABIMismatch(
                    f"{abi.function}: kernel {launch.symbol}: parameter {name!r}: the launch ABI "
                    f"packs it at offset {off} with size {size}, the cubin expects offset "
                    f"{c_off} with size {c_size}"
                )
