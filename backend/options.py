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
    "disable_shared_epilogue": "T.copy(accumulator, global) stays a direct register -> global "
                               "copy (by default, on sm_90+, it goes through a swizzled shared "
                               "tile and a TMA store when the shared memory fits)",
    "wide_offsets": "compute every global tensor offset in 64 bits (for tensors of more than "
                    "2**31 elements under symbolic shapes); by default offsets are 64-bit only "
                    "where a static shape needs it, and the launcher refuses a tensor past "
                    "int32 with an error naming this option",
    "disable_mma_overlap": "a pipelined loop (3 stages or more) with two chained wgmma GEMMs "
                           "and work between them (attention's S = Q K^T, softmax, O += P V) "
                           "runs them in program order; by default (sm_90a) step k's first "
                           "GEMM and step k - 1's second are issued together and run during "
                           "the softmax",
    "warpgroup_pingpong": "with the MMA overlap, two compute warpgroups that each hold half "
                          "the rows take turns issuing their GEMMs (named barriers), so one's "
                          "MMAs run during the other's softmax (FA3's ping-pong; off by "
                          "default: slower than the overlap alone on an H100)",
    "fast_math": "exp2, exp, log2 and log compute with the approximate instructions that "
                 "flush subnormals (ex2/lg2.approx.ftz, as nvcc's --use_fast_math; TileLang's "
                 "tl.enable_fast_math); by default exp2 is ex2.approx without ftz",
    "disable_rasterization": "a GEMM kernel's 2-D grid keeps its plain block order (by default "
                             "the blocks walk it in panels of 16 rows, as T.use_swizzle(16), "
                             "unless the program sets an order)",
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
