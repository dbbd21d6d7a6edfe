"""Counts the kernels a run of TileLang's code loads (each kernel's first launch), for the
RESULT lines of run_example.py and run_kernel_file.py: importing it wraps
``Kernel._load``; ``loaded[0]`` is the count."""

import tilecute.runtime.kernel as _rk

loaded = [0]
_load = _rk.Kernel._load


def _counting_load(self):
    if self._func is None:
        loaded[0] += 1
    return _load(self)


_rk.Kernel._load = _counting_load
