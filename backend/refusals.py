"""TileLang host-API names that tilecute does not provide, as values that say so when
used.  ``from tilecute.engine.callback import register_cuda_postproc_callback`` imports
(a program that imports a name and never uses it runs); calling the name, or reading an
attribute of it, raises ``NotImplementedError`` naming it and why.

Imports nothing; each module that serves TileLang names builds its refusals here.
"""

from __future__ import annotations


class Refused:
    """TileLang's ``qualname`` (e.g. ``"tilelang.engine.callback.register_cuda_postproc_callback"``),
    which tilecute refuses because ``reason``."""

    def __init__(self, qualname: str, reason: str):
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__qualname__ = qualname
        self._reason = reason

    def message(self) -> str:
        return f"{self.__qualname__} is not supported by tilecute: {self._reason}"

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.message())

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"{self.__qualname__}.{name}: {self.message()}")

    def __mro_entries__(self, bases):  # `class X(Refused...)`
        raise NotImplementedError(self.message())

    def __repr__(self) -> str:
        return f"<{self.__qualname__}: not supported by tilecute>"


def refusing_getattr(module: str, names: dict, tilelang_module: str | None = None):
    """A module ``__getattr__`` that serves each of ``names`` (name -> reason) as a
    :class:`Refused` value and raises ``AttributeError`` for any other name."""
    tilelang_module = tilelang_module or module.replace("tilecute", "tilelang", 1)

    def __getattr__(name: str):
        if name in names:
            return Refused(f"{tilelang_module}.{name}", names[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
