"""TileLang's explicit-width memory accesses (``T.ldg32/64/128/256``, ``T.lds32/64/128``,
``T.stg*``, ``T.sts*``) as element accesses: their values are 32-bit words (TileLang's
``uint32`` / ``uint32x2`` / ``uint32x4`` / ``uint32x8``), packed from and unpacked into
the elements of the buffer the access starts at, with integer shifts, masks and bit casts.

:class:`Words` is the parse-time value of a 64-bit or wider access (the IR has no vector
dtypes); a 32-bit one is a plain ``uint32`` expression.

Imports the IR nodes and the values module; the parser and the ops module import this one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import nodes as _N
from ..runtime.dtypes import DTYPES

ACCESS_BITS = (32, 64, 128, 256)


@dataclass(frozen=True)
class Words:
    """A value of ``len(words) * 32`` bits: ``words[0]`` holds the lowest-addressed bytes
    (little-endian, as the GPU lays them out).  ``view``: the dtype name it was
    reinterpreted as (``T.reinterpret(v, T.float32x2)``), for messages only."""

    words: tuple[_N.Expr, ...]
    view: str = "uint32"

    @property
    def bits(self) -> int:
        return 32 * len(self.words)

    def __repr__(self) -> str:
        return f"<{len(self.words) * 32}-bit value ({self.view}x{len(self.words)} words)>"


def vector_bits(name: str):
    """Bits of TileLang's vector dtype name ``<scalar>x<lanes>`` (``float32x2``: 64), or
    None."""
    m = re.fullmatch(r"(.+)x(\d+)", name)
    if m and m.group(1) in DTYPES and DTYPES[m.group(1)].kind != "bool":
        return DTYPES[m.group(1)].bits * int(m.group(2))
    return None


def element_bits(dtype: str, what: str) -> int:
    info = DTYPES[dtype]
    if dtype == "bool" or info.bits not in (8, 16, 32, 64):
        raise TypeError(f"{what}: {dtype} elements cannot be packed into 32-bit words")
    return info.bits


def _bitcast(e: _N.Expr, dtype: str) -> _N.Expr:
    return e if e.dtype == dtype else _N.Call("reinterpret", (e,), dtype)


def _uint(bits: int) -> str:
    return f"uint{bits}"


def pack(elements: list, dtype: str) -> tuple[_N.Expr, ...]:
    """The 32-bit words (uint32) holding ``elements`` (of ``dtype``) in memory order."""
    b = element_bits(dtype, "packing")
    raw = [_bitcast(e, _uint(b)) for e in elements]
    if b == 32:
        return tuple(raw)
    if b == 64:
        out = []
        for e in raw:
            out.append(_N.cast(_N.binop("bitand", e, _N.Const(0xFFFFFFFF, "uint64")), "uint32"))
            out.append(_N.cast(_N.binop("shr", e, _N.Const(32, "uint64")), "uint32"))
        return tuple(out)
    per = 32 // b
    words = []
    for w in range(len(raw) // per):
        acc = None
        for j in range(per):
            part = _N.cast(raw[w * per + j], "uint32")
            if j:
                part = _N.binop("shl", part, _N.Const(b * j, "uint32"))
            acc = part if acc is None else _N.binop("bitor", acc, part)
        words.append(acc)
    return tuple(words)


def unpack(words, dtype: str) -> list:
    """The elements of ``dtype`` that 32-bit ``words`` hold, in memory order."""
    b = element_bits(dtype, "unpacking")
    words = [_N.cast(w, "uint32") if w.dtype != "uint32" else w for w in words]
    if b == 32:
        return [_bitcast(w, dtype) for w in words]
    if b == 64:
        return [_bitcast(_N.binop("bitor", _N.cast(words[i], "uint64"),
                                  _N.binop("shl", _N.cast(words[i + 1], "uint64"),
                                           _N.Const(32, "uint64"))), dtype)
                for i in range(0, len(words), 2)]
    out = []
    for w in words:
        for j in range(32 // b):
            part = _N.binop("shr", w, _N.Const(b * j, "uint32")) if j else w
            part = _N.binop("bitand", part, _N.Const((1 << b) - 1, "uint32"))
            out.append(_bitcast(_N.cast(part, _uint(b)), dtype))
    return out


def as_words(value, bits: int, what: str) -> tuple[_N.Expr, ...]:
    """``value`` (a :class:`Words`, or an expression of exactly ``bits`` bits) as words."""
    if isinstance(value, Words):
        if value.bits != bits:
            raise TypeError(f"{what}: the value has {value.bits} bits, the access {bits}")
        return value.words
    value = _N.as_expr(value) if not isinstance(value, _N.Expr) else value
    if value.dtype == "bool" or DTYPES[value.dtype].bits != bits:
        raise TypeError(f"{what}: the value is {value.dtype} ({DTYPES[value.dtype].bits} bits); "
                        f"the access stores {bits} bits (a uint32 per 32 bits, as TileLang's "
                        "T.ldg* and T.reinterpret give)")
    return pack([value], value.dtype)
