"""Writing generated CuTe DSL source: indented lines, fresh temporaries, the
``runtime.cute`` helper modules a kernel calls, how IR names are spelled, and the one
quoting helper for every other string that reaches the source.

Three namespaces share the generated module:

- the generator's own names: ``tc_*`` temporaries, the kernels (named after their cubin
  symbols, ``tilecute_<function>_<i>``), ``cute``, ``cutlass``, the helper aliases and
  ``placeholder_args`` (:data:`MODULE_NAMES`).  The IR validator refuses user names with
  the ``tc_`` and ``tilecute`` prefixes and ``cute``/``cutlass``/``placeholder_args``;
- Python's builtins and the names CuTe DSL's AST preprocessor adds to the functions it
  rewrites (``range``, ``locals``, ``self``, an ``if`` function's ``pred``, regions and temporaries named
  ``<word>_<n>``);
- the IR's names (parameters, symbols, variables, buffers, descriptors).

:func:`ident` spells an IR name as itself unless it could be read as a name of the first
two, and then with a trailing underscore (PEP 8's way around a clash).  Every IR name
the generator prints goes through it.  Strings that are not names go through
:func:`quote` (string literals) or :func:`comment` (comments).

Imports nothing of the compiler.
"""

from __future__ import annotations

import builtins
import re

INDENT = "    "

# runtime.cute helper modules, by what a kernel uses (imported under these aliases)
HELPERS = {
    "reduce": "from tilecute.runtime.cute import reduce as tcr",
    "atomic": "from tilecute.runtime.cute import atomic as tca",
    "copy": "from tilecute.runtime.cute import copy as tcc",
    "tma": "from tilecute.runtime.cute import tma as tct",
    "mma": "from tilecute.runtime.cute import mma as tcm",
    "rows": "from tilecute.runtime.cute import rows as tcrow",
    "scan": "from tilecute.runtime.cute import scan as tcs",
    "math": "from tilecute.runtime.cute import math as tcmath",
    "debug": "from tilecute.runtime.cute import debug as tcd",
    "grid": "from tilecute.runtime.cute import grid as tcgrid",
    "rng": "from tilecute.runtime.cute import rng as tcrng",
    "vote": "from tilecute.runtime.cute import vote as tcvote",
    "fp4": "from tilecute.runtime.cute import fp4 as tcfp4",
    "e8m0": "from tilecute.runtime.cute import e8m0 as tce8m0",
}
# names the generated module binds at its top level
MODULE_NAMES = frozenset({"cutlass", "cute", "placeholder_args"}
                         | {line.rsplit(" as ", 1)[1] for line in HELPERS.values()})
# names CuTe DSL's preprocessor uses in the kernel and wrapper functions it rewrites,
# besides builtins: its own locals, the condition parameter of the function it makes of
# an `if` body (`pred`, unless the body writes a name `pred`: it then shadows a `pred`
# the body only reads), and region functions and temporaries `<word>_<n>`
_DSL_NAMES = frozenset({"self", "yield_self", "pred"})
_DSL_NUMBERED = re.compile(r"_[0-9]+$")
_BUILTINS = frozenset(dir(builtins))
# the generator's own names that are not fresh temporaries (the passes name theirs tc_*
# too: tc_bar<n>, tc_j<n>; these must stay apart)
_FIXED = frozenset({"tc_tid", "tc_tx", "tc_ty", "tc_tz", "tc_smem", "tc_grid_barrier",
                    "tc_rng"})
_FIXED_FAMILIES = re.compile(r"tc_mma[0-9]+$|tc_.+_ij?$")


class CodegenError(NotImplementedError):
    pass


def clashes(name: str) -> bool:
    """Could IR name ``name``, printed as is, be read as a name of Python, CuTe DSL or
    the generator?  (Names ending in ``_`` count, so that :func:`ident` stays one to
    one.)"""
    return (name in _BUILTINS or name in MODULE_NAMES or name in _DSL_NAMES
            or _DSL_NUMBERED.search(name) is not None or name.endswith("_"))


def generator_name(name: str) -> bool:
    """Is ``name`` one the generator binds (besides fresh temporaries)?"""
    return name in _FIXED or name in MODULE_NAMES or _FIXED_FAMILIES.match(name) is not None


def ident(name: str) -> str:
    """How IR name ``name`` is spelled in the generated source.  Distinct names stay
    distinct: a name printed as is never ends in ``_``, a renamed one always does."""
    if name.startswith("__"):  # Python's and CuTe DSL's (__module_dsl__); the codegen refuses them
        raise CodegenError(f"internal: IR name {name!r} reached the printer")
    return name + "_" if clashes(name) else name


def quote(text: str) -> str:
    """``text`` as a double-quoted Python string literal."""
    r = repr(text)
    # repr picks single quotes unless text holds one; without a double quote the body
    # holds no quote at all and reads the same between double quotes
    return f'"{r[1:-1]}"' if r[0] == "'" and '"' not in text else r


def comment(text: str) -> str:
    """``text`` made safe for a ``#`` comment: printable ASCII stays, every other
    character (line breaks included) is written as its Python escape, so the comment
    cannot end early or carry anything Python would read as code."""
    return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in text)


class Writer:
    """The lines of one ``@cute.kernel`` function, the temporaries it has named, and the
    helper modules it calls.  ``taken``: the IR's names (passes name theirs ``tc_*``
    too), which no temporary may take."""

    def __init__(self, taken: frozenset[str] = frozenset()):
        self.lines: list[str] = []
        self.uses: set[str] = set()  # keys of HELPERS
        self.taken = taken
        self._count = 0

    def line(self, depth: int, text: str, note: str | None = None) -> None:
        """``text`` at ``depth``, with ``note`` as a trailing comment."""
        self.lines.append(INDENT * depth + text + ("" if note is None else f"  # {comment(note)}"))

    def comment(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + f"# {comment(text)}")

    def fresh(self, stem: str) -> str:
        """A new temporary ``tc_<stem><n>``."""
        self._count += 1
        while f"tc_{stem}{self._count}" in self.taken:
            self._count += 1
        return f"tc_{stem}{self._count}"

    def use(self, helper: str) -> None:
        self.uses.add(helper)

    def mark(self) -> tuple:
        """Where the source is now, for :meth:`rewind`."""
        return len(self.lines), set(self.uses)

    def rewind(self, mark: tuple) -> None:
        """Takes back what was written since ``mark``: code that turned out to do nothing
        (its temporaries' numbers stay used)."""
        del self.lines[mark[0]:]
        self.uses = set(mark[1])
