"""A corpus of TileLang-style programs (issue 17, "What must show").

One module per program, each written in TileLang's idioms (``import tilecute.language as
T`` is the only change a TileLang user would make).  Every module has:

- ``program(**config)``: the factory, returning a ``@T.prim_func`` (small default sizes);
- ``make_args(device)``: the kernel's arguments in parameter order (random inputs;
  outputs pre-allocated, zeroed where the kernel accumulates into them);
- ``reference(*args)``: torch's answer, a tuple aligned with ``OUTPUTS``;
- ``OUTPUTS``: the indices of the parameters the kernel writes, and ``ATOL``/``RTOL``;
- ``SM80``: whether the program builds for sm_80 too (fp8 and wgmma-only forms do not);
- ``MISSING``: ``None``, or the exact tilecute feature the program needs and lacks (its
  tests are strict xfails with that reason).

tests/test_corpus.py builds each to cubins and, on a GPU, compares with the reference.
"""

import importlib
import pkgutil

NAMES = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str):
    return importlib.import_module(f"{__name__}.{name}")
