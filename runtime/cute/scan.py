"""Scans for generated kernels (``T.cumsum`` / ``T.cummax``): the arithmetic of one
warp's inclusive scan of a line held in its lanes' registers.  The generated code loads
the line (lane ``l`` holds positions ``l * n .. l * n + n - 1`` in scan order), calls
:func:`warp_inclusive_scan` and stores it back; where the elements live (shared memory,
its layout) is the code generator's business.

Usage in generated code::

    from tilecute.runtime.cute import scan as tcs
    tcs.warp_inclusive_scan(vals, "sum", lane)
"""

import cutlass
import cutlass.cute as cute

from .reduce import combine


def warp_inclusive_scan(vals: cute.Tensor, op: str, lane):
    """Replace the ``n`` registers of ``vals`` (``n`` = its static size) in each of the
    warp's 32 lanes by the inclusive scan, with ``op`` ("sum" or "max"), of the
    warp's 32 * n values in lane-major order (lane 0's registers first).

    Steps: each lane scans its own registers (``n - 1`` combines); a Hillis-Steele scan
    of the lanes' totals by ``shfl.sync.up`` (offsets 1, 2, 4, 8, 16; a lane below the
    offset keeps its value, by a select); then ``shfl.sync.up`` by 1 gives each lane the
    total of the lanes before it, which it combines into its registers (lane 0 keeps
    its own).  All 32 lanes must run it (full-mask shuffles).  Values past the end of
    the line (in the last lanes) only affect positions after them.  A plain function
    emitting straight-line code.
    """
    n = cute.size(vals)
    for c in range(1, n):
        vals[c] = combine(vals[c - 1], vals[c], op)
    running = vals[n - 1]
    offset = 1
    while offset < 32:
        other = cute.arch.shuffle_sync_up(running, offset=offset)
        running = cutlass.select_(lane >= offset, combine(other, running, op), running)
        offset *= 2
    before = cute.arch.shuffle_sync_up(running, offset=1)
    for c in range(n):
        vals[c] = cutlass.select_(lane > 0, combine(before, vals[c], op), vals[c])
