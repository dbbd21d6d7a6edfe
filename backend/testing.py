"""TileLang's ``tilelang.testing`` helpers that kernel tests use: ``set_random_seed``,
``torch_assert_close`` (TileLang's, from ``tilecute.utils.tensor``), ``main`` and the
``requires_*`` pytest marks.

The marks skip a test where what it needs is missing: ``requires_cuda`` (a CUDA GPU torch
sees), ``requires_cuda_compute_version[_ge|_gt|_le|_lt|_eq](major, minor=0)`` (that GPU's
compute capability), ``requires_package(*names)``.  tilecute generates CUDA code only, so
the marks for other backends (``requires_rocm``, ``requires_cdna``, ``requires_gfx950``,
``requires_metal``, ``requires_llvm``) always skip, and ``requires_cuda_or_cdna`` is
``requires_cuda``.  Like TVM's, each mark is used as ``@mark`` and has ``mark.marks()``
(the list of pytest marks, to compose with others).

``process_func`` and ``regression`` are TileLang's performance-regression runner (its
examples' ``regression_*.py`` files): ``regression()`` runs the calling module's
``regression_*`` functions in name order, each recording latencies with
``process_func(bench, name, **kwargs)``, and prints them one ``name: latency`` a line, or
with ``TL_PERF_REGRESSION_FORMAT=json`` one line ``__TILELANG_PERF_RESULTS_JSON__=[...]``
(TileLang's collector reads either); ``TL_PERF_REGRESSION_ONLY`` (a comma list or a JSON
list of names or glob patterns) runs only the matching cases.
"""

from __future__ import annotations

import importlib.util
import operator

from .runtime.profiling import torch_assert_close  # noqa: F401  (TileLang's, tilelang.utils.tensor)

__all__ = ["set_random_seed", "torch_assert_close", "main", "process_func", "regression",
           "requires_cuda", "requires_package",
           "requires_cuda_or_cdna", "requires_cdna", "requires_gfx950", "requires_rocm",
           "requires_metal", "requires_llvm", "requires_cuda_compute_version"] + \
          [f"requires_cuda_compute_version_{op}" for op in ("ge", "gt", "le", "lt", "eq")]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, NumPy's (when installed) and torch's generators."""
    import random

    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def main() -> None:
    """Run the calling test file's tests with pytest (a test file's ``__main__``)."""
    import inspect
    import sys

    import pytest

    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller] + sys.argv[1:]))


class _Requires:
    """A skip mark: ``@mark`` on a test, or ``mark.marks()`` for pytest's mark list."""

    def __init__(self, reason: str, missing):
        self.reason, self._missing = reason, missing  # missing(): True skips

    def marks(self) -> list:
        import pytest

        return [pytest.mark.skipif(self._missing(), reason=self.reason)]

    def __call__(self, fn):
        for mark in self.marks():
            fn = mark(fn)
        return fn


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


requires_cuda = _Requires("needs a CUDA GPU", _no_cuda)
requires_cuda_or_cdna = requires_cuda
requires_rocm = _Requires("needs ROCm; tilecute generates CUDA code only", lambda: True)
requires_cdna = _Requires("needs an AMD CDNA GPU; tilecute generates CUDA code only", lambda: True)
requires_gfx950 = _Requires("needs an AMD gfx950 GPU; tilecute generates CUDA code only",
                            lambda: True)
requires_metal = _Requires("needs Metal; tilecute generates CUDA code only", lambda: True)
requires_llvm = _Requires("needs TVM's LLVM CPU target, which tilecute does not have", lambda: True)


def requires_package(*names: str) -> _Requires:
    """Skip unless every named Python package is importable."""
    missing = lambda: any(importlib.util.find_spec(n) is None for n in names)  # noqa: E731
    return _Requires(f"needs the package(s) {', '.join(names)}", missing)


_COMPARE = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt,
            "eq": operator.eq}


def requires_cuda_compute_version(major_version: int, minor_version: int = 0,
                                  mode: str = "ge") -> _Requires:
    """Skip unless a CUDA GPU's compute capability compares ``mode`` (ge, gt, le, lt, eq)
    to ``major_version.minor_version``."""
    if mode not in _COMPARE:
        raise ValueError(f"requires_cuda_compute_version: mode={mode!r} is not one of "
                         f"{', '.join(_COMPARE)}")

    def missing() -> bool:
        if _no_cuda():
            return True
        import torch

        return not _COMPARE[mode](torch.cuda.get_device_capability(), (major_version, minor_version))

    return _Requires(f"needs a CUDA GPU of compute capability {mode} "
                     f"{major_version}.{minor_version}", missing)


def _versioned(mode: str):
    def requires(major_version: int, minor_version: int = 0) -> _Requires:
        return requires_cuda_compute_version(major_version, minor_version, mode)

    requires.__name__ = requires.__qualname__ = f"requires_cuda_compute_version_{mode}"
    requires.__doc__ = f"``requires_cuda_compute_version(major, minor, {mode!r})``."
    return requires


requires_cuda_compute_version_ge = _versioned("ge")
requires_cuda_compute_version_gt = _versioned("gt")
requires_cuda_compute_version_le = _versioned("le")
requires_cuda_compute_version_lt = _versioned("lt")
requires_cuda_compute_version_eq = _versioned("eq")


# ---- TileLang's performance-regression runner (tilelang.testing.perf_regression) ---------
_PERF_JSON_MARKER = "__TILELANG_PERF_RESULTS_JSON__="
_PERF_RETRIES = 5  # a non-positive latency is measured again up to this many times
_perf_results: list = []  # dicts: name, latency, and case (the regression_* function) when known
_perf_case: list = [None]


def process_func(func, name=None, /, **kwargs) -> None:
    """Call ``func(**kwargs)`` for a latency (any positive number: only ratios are
    compared) and record it under ``name`` (default: ``func``'s module), a leading
    ``regression_`` dropped.  A latency <= 0 is measured again, up to 5 more times; if it
    stays so, a ``RuntimeWarning`` and nothing recorded."""
    import warnings

    label = getattr(func, "__module__", "<unknown>") if name is None else name
    label = label[len("regression_"):] if label.startswith("regression_") else label
    latency = float(func(**kwargs))
    for _ in range(_PERF_RETRIES):
        if latency > 0.0:
            break
        latency = float(func(**kwargs))
    if latency <= 0.0:
        warnings.warn(f"{label} has latency {latency} <= 0. Please verify the profiling results.",
                      RuntimeWarning, stacklevel=2)
        return
    entry = {"name": label, "latency": latency}
    if _perf_case[0] is not None:
        entry["case"] = _perf_case[0]
    _perf_results.append(entry)


def _perf_filters() -> list:
    import json
    import os

    raw = os.environ.get("TL_PERF_REGRESSION_ONLY", "").strip()
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw.split(",")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [str(v).strip().lower() for v in value if str(v).strip()]


def _perf_selected(names: tuple, filters: list) -> bool:
    import fnmatch

    return not filters or any(fnmatch.fnmatch(n.lower(), f) or f in n.lower()
                              for f in filters for n in names)


def regression(prefixes=("regression_",), verbose: bool = True) -> None:
    """Run the caller module's callables whose names start with one of ``prefixes``, in
    name order (those ``TL_PERF_REGRESSION_ONLY`` selects), with warnings and log
    records below ERROR silenced, then print the latencies they recorded through
    :func:`process_func` (see the module docstring for the formats)."""
    import inspect
    import json
    import logging
    import os
    import time
    import warnings

    scope = inspect.currentframe().f_back.f_globals
    cases = sorted((k, v) for k, v in list(scope.items())
                   if callable(v) and any(k.startswith(p) for p in prefixes))
    filters = _perf_filters()
    strip = lambda k: k[len("regression_"):] if k.startswith("regression_") else k  # noqa: E731
    cases = [(k, v) for k, v in cases if _perf_selected((k, strip(k)), filters)]
    _perf_results.clear()
    for i, (key, fn) in enumerate(cases, 1):
        _perf_case[0] = strip(key)
        if verbose:
            print(f"  \u251c\u2500 [{i}/{len(cases)}] {_perf_case[0]}", end="", flush=True)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                logging.disable(logging.WARNING)
                try:
                    fn()
                finally:
                    logging.disable(logging.NOTSET)
            if verbose:
                print(f" ({time.perf_counter() - start:.2f}s)", flush=True)
        finally:
            _perf_case[0] = None
    if os.environ.get("TL_PERF_REGRESSION_FORMAT", "text").strip().lower() == "json":
        print(_PERF_JSON_MARKER + json.dumps(_perf_results, separators=(",", ":")))
    else:
        for r in _perf_results:
            print(f"{r['name']}: {r['latency']}")
