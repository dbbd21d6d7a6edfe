"""Aligned and general variants of a function with plain dynamic extents (issue 17: "T.dynamic
symbols keep TMA and vector paths by checking divisibility at launch").

A ``T.dynamic("K")`` extent without ``multiple_of`` may make a row stride of a tensor
parameter a non-multiple of 16 bytes (``(M, K)`` float16: ``K * 2`` bytes), and then TMA
and 16-byte vector accesses cannot serve rows strided by it.  ``tilecute.compile`` then
builds two kernels: the *aligned* variant, where each such symbol promises the divisor that
makes those strides 16-byte multiples (``multiple_of``, checked by its launcher), and the
program as written, the *general* variant.  A call picks the aligned one when the tensors
it is given meet the divisors and their data pointers the alignment the aligned variant
assumes of them (a tensor at a storage offset off 16 bytes takes the general one), the
general one otherwise, and where a checked extent is 0 (TMA takes no empty extent; the
general variant's thread copies run no iteration) (:class:`AlignedOrGeneral`).

Symbols that do not change a stride's alignment (attention's sequence length in
``(B, S, H, D)``: ``S`` multiplies ``H * D * 2`` bytes, already a multiple of 16) make no
variant.  Only symbols a caller-given tensor binds are checked (one bound only by an
``out_idx`` output makes no variant).  Imports the IR only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

from .ir import nodes as N
from .ir.visitor import substitute
from .runtime.dtypes import DTYPES

ALIGN_BYTES = 16


def alignment_divisors(func: N.PrimFunc) -> dict[str, int]:
    """symbol -> the divisor that makes every row stride it enters a multiple of 16 bytes
    (only the symbols without one already that need one)."""
    need: dict[str, int] = {}
    for p in func.params:
        if not isinstance(p, N.Buffer) or p.strides is not None:
            continue
        size = DTYPES[p.dtype].bytes
        for j in range(len(p.shape) - 1):  # stride j = prod(shape[j+1:]) * size
            trailing = p.shape[j + 1:]
            static = size * math.prod(int(d.value) for d in trailing if isinstance(d, N.Const))
            syms = [d for d in trailing if isinstance(d, N.Var)]
            plain = [d for d in syms if d.multiple == 1]
            if not plain or len(syms) != len([d for d in trailing if not isinstance(d, N.Const)]):
                continue  # (a dim that is an expression: left to the general variant)
            promised = static * math.prod(d.multiple for d in syms)
            if promised % ALIGN_BYTES == 0:
                continue
            missing = ALIGN_BYTES // math.gcd(promised, ALIGN_BYTES)
            s = plain[-1].name  # the innermost plain symbol carries the divisor
            need[s] = max(need.get(s, 1), missing)
    return need


def aligned_variant(func: N.PrimFunc, divisors: dict[str, int]) -> N.PrimFunc:
    """``func`` with each symbol of ``divisors`` promising its divisor."""
    mapping = {}
    for v in func.symbols:
        if v.name in divisors:
            mapping[v.name] = dataclasses.replace(v, multiple=v.multiple * divisors[v.name])
    return substitute(func, mapping)


def checks_for(func: N.PrimFunc, divisors: dict[str, int],
               out_idx: Sequence[int]) -> Optional[list[tuple[int, int, int]]]:
    """(position among the caller's arguments, axis, divisor) per symbol, from the first
    caller-given tensor whose shape has it; None when an output alone binds one."""
    checks, found = [], set()
    position = 0
    for i, p in enumerate(func.params):
        if i in out_idx or p.name in func.workspaces:
            continue
        if isinstance(p, N.Buffer):
            for axis, d in enumerate(p.shape):
                if isinstance(d, N.Var) and d.name in divisors and d.name not in found:
                    found.add(d.name)
                    checks.append((position, axis, divisors[d.name]))
        position += 1
    return checks if found == set(divisors) else None


class AlignedOrGeneral:
    """Two compiled variants of one function; ``kernel(*args)`` runs the aligned one when
    the argument tensors meet its divisors, else the general one.  Everything else
    (``abi``, ``out_idx``, ``get_source``...) is the general variant's; ``aligned`` and
    ``general`` are both there."""

    def __init__(self, aligned, general, checks: list[tuple[int, int, int]]):
        self.aligned, self.general, self.checks = aligned, general, checks
        self._pointer_checks = None

    def pointer_checks(self) -> list[tuple[int, int]]:
        """(position among the caller's arguments, bytes) of each tensor whose data pointer
        the aligned variant assumes more aligned than the general one does (its 16-byte
        vector or TMA accesses): a tensor off that boundary (a storage offset) takes the
        general variant instead of the aligned launcher's alignment error."""
        if self._pointer_checks is None:
            given = [i for i in range(len(self.general.args)) if i not in self.general.out_idx]
            self._pointer_checks = [
                (pos, self.aligned.args[i].align) for pos, i in enumerate(given)
                if getattr(self.aligned.args[i], "kind", None) == "tensor"
                and self.aligned.args[i].align > self.general.args[i].align]
        return self._pointer_checks

    def pick(self, args):
        for position, axis, divisor in self.checks:
            try:
                extent = int(args[position].shape[axis])
                if extent == 0 or extent % divisor:  # (TMA takes no empty extent)
                    return self.general
            except (AttributeError, IndexError, TypeError, ValueError):
                # too few arguments, a non-tensor or a tensor of too low a rank: the general
                # variant's launcher names what is wrong
                return self.general
        for position, align in self.pointer_checks():
            data_ptr = getattr(args[position], "data_ptr", None)
            if callable(data_ptr) and data_ptr() % align:
                return self.general
        return self.aligned

    def __call__(self, *args):
        return self.pick(args)(*args)

    def launch(self, *args, stream=None):
        return self.pick(args).launch(*args, stream=stream)

    def ensure_cubin(self) -> str:
        self.aligned.ensure_cubin()
        return self.general.ensure_cubin()

    def warmup(self, devices=None):
        """Both variants' cubins and launchers, ready (``Kernel.warmup``)."""
        self.aligned.warmup(devices)
        self.general.warmup(devices)
        return self

    @property
    def release_gil(self) -> bool:
        """``Kernel.release_gil`` of the general variant; setting it sets both variants'."""
        return self.general.release_gil

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        self.aligned.release_gil = value
        self.general.release_gil = value

    def __getattr__(self, name):
        return getattr(self.general, name)

    def __repr__(self) -> str:
        return (f"<tilecute kernel {self.general.name}: aligned variant at {self.aligned.path} "
                f"when {self.checks} (argument, axis, divisor) hold, else {self.general.path}>")
