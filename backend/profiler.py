"""TileLang's ``tilelang.profiler``: ``do_bench(fn)`` and the ``Profiler`` that
``kernel.get_profiler(tensor_supply_type=...)`` returns (implemented in
``tilecute.runtime.profiling``)."""

from .runtime.profiling import Profiler, _cuda, do_bench  # noqa: F401
