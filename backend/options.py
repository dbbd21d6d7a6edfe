"""Compile options: ``tilecute.compile(func, options={...})``, TileLang's pass configs by
another name.  They are part of the cache key; the passes read them (``lower``).  Imports
nothing, so a process that finds its kernel in the cache checks them without loading the
compiler."""

from __future__ import annotations


class OptionError(ValueError):
    pass


OPTIONS = {
    "disable_tma": "no TMA: tile copies take the cp.async / vector path even on sm_90+ "
                   "(explicit T.tma_copy statements stay)",
    "disable_wgmma": "no wgmma: T.gemm takes warp mma.sync (+ ldmatrix) even on sm_90a",
}


def check_options(options) -> dict:
    """``options`` as a dict of known, boolean compile options (``OptionError``
    naming an unknown one)."""
    options = dict(options or {})
    for k, v in options.items():
        if k not in OPTIONS:
            raise OptionError(f"unknown compile option {k!r}; the options are "
                              + ", ".join(f"{n} ({d})" for n, d in OPTIONS.items()))
        if not isinstance(v, bool):
            raise OptionError(f"compile option {k!r} takes True or False, got {v!r}")
    return options
