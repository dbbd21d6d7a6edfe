"""`tilelang` -> `tilecute` for running TileLang's own programs under tilecute: importing this
module (or loading it as a pytest plugin, ``-p tlalias``) makes ``import tilelang`` and
``import tilelang.X`` give tilecute's modules.  Nothing else is patched: the programs run on
the GPU with their own data and their own reference checks."""

import importlib
import importlib.abc
import importlib.util
import sys

import tilecute
import tilecute.language

sys.modules["tilelang"] = tilecute
sys.modules["tilelang.language"] = tilecute.language
tilecute.__version__ = getattr(tilecute, "__version__", "0.1.0")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``tilelang.X`` is the module ``tilecute.X`` itself (one module, two names)."""

    def find_spec(self, name, path=None, target=None):
        if name.startswith("tilelang."):
            return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return importlib.import_module("tilecute" + spec.name[len("tilelang"):])

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())

# tilecute.layout is a module whose TileLang submodules (swizzle, fragment, ...) it registers
# itself; Python finds a submodule of a module that is no package only in sys.modules, so
# `import tilelang.layout.swizzle` needs that name there too
import tilecute.layout  # noqa: E402,F401

for _name, _module in list(sys.modules.items()):
    _parent = sys.modules.get(_name.rpartition(".")[0])
    if _name.startswith("tilecute.") and _parent is not None and not hasattr(_parent, "__path__"):
        sys.modules.setdefault("tilelang" + _name[len("tilecute"):], _module)
