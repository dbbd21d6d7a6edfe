"""Writing generated CuTe DSL source: indented lines, fresh temporaries, and the
``runtime.cute`` helper modules a kernel calls.

Every part of the code generator writes through a :class:`Writer`; nothing here knows
what a kernel is.  Imports nothing of the compiler.
"""

from __future__ import annotations

INDENT = "    "

# runtime.cute helper modules, by what a kernel uses (imported under these aliases)
HELPERS = {
    "reduce": "from tilecute.runtime.cute import reduce as tcr",
    "atomic": "from tilecute.runtime.cute import atomic as tca",
    "copy": "from tilecute.runtime.cute import copy as tcc",
    "tma": "from tilecute.runtime.cute import tma as tct",
    "mma": "from tilecute.runtime.cute import mma as tcm",
}


class CodegenError(NotImplementedError):
    pass


class Writer:
    """The lines of one ``@cute.kernel`` function, the temporaries it has named, and the
    helper modules it calls."""

    def __init__(self):
        self.lines: list[str] = []
        self.uses: set[str] = set()  # keys of HELPERS
        self._count = 0

    def line(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def fresh(self, stem: str) -> str:
        """A new temporary ``tc_<stem><n>`` (``tc_`` names are the generator's own)."""
        self._count += 1
        return f"tc_{stem}{self._count}"

    def use(self, helper: str) -> None:
        self.uses.add(helper)
