"""The grid-wide barrier of generated kernels (TileLang's ``T.sync_grid()``).

Every block of the grid waits until every block has arrived; writes to global memory
before the barrier are visible to every thread after it.  The grid must be co-resident:
the launcher launches a kernel that uses it cooperatively
(``CU_LAUNCH_ATTRIBUTE_COOPERATIVE``), which fails rather than deadlocks when the grid
does not fit the device at once, and passes the barrier's word (``tc_grid_barrier``, a
32-bit counter in global memory that the launcher owns per device, zero when first
allocated).

The algorithm is the one CUDA's cooperative groups use for ``grid.sync()``: thread 0 of
each block adds 1 to the counter, block 0 adds ``0x80000000 - (blocks - 1)``, so that the
counter's top bit flips exactly when the last block arrives (the adds total
``0x80000000``) and its low 31 bits are back to zero; each thread 0 spins until the top
bit differs from the one it saw when it added.  No reset is needed between barriers or
launches.

Usage in generated code::

    from tilecute.runtime.cute import grid as tcgrid
    tcgrid.sync_grid(tc_grid_barrier)
"""

import cutlass
import cutlass.cute as cute

_TOP_BIT = 0x80000000


@cute.jit
def sync_grid(barrier: cute.Pointer):
    """The grid barrier: every thread of every block of the launch calls it (a block
    barrier before and after; thread 0 of the block does the counting)."""
    cute.arch.sync_threads()
    tx, ty, tz = cute.arch.thread_idx()
    if tx + ty + tz == 0:
        bx, by, bz = cute.arch.block_idx()
        gx, gy, gz = cute.arch.grid_dim()
        blocks = cutlass.Uint32(gx * gy * gz)
        inc = cutlass.Uint32(1)
        if bx + by + bz == 0:
            inc = cutlass.Uint32(_TOP_BIT) - (blocks - cutlass.Uint32(1))
        word = cute.recast_ptr(barrier, dtype=cutlass.Uint32)
        # this block's writes before the arrival (release), the others' after (acquire)
        cute.arch.fence_acq_rel_gpu()
        old = cute.arch.atomic_add(word, inc, sem="relaxed", scope="gpu")
        now = cute.arch.load(word, cutlass.Uint32, sem="relaxed", scope="gpu")
        while ((old ^ now) & cutlass.Uint32(_TOP_BIT)) == cutlass.Uint32(0):
            now = cute.arch.load(word, cutlass.Uint32, sem="relaxed", scope="gpu")
        cute.arch.fence_acq_rel_gpu()
    cute.arch.sync_threads()
