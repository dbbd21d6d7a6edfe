"""Asynchronous global -> shared copies (``cp.async``, sm_80+) for generated kernels.

Usage in generated code::

    from tilecute.runtime.cute import copy as tcc
    tcc.copy_async(tcc.vector(A, off_g, 4), tcc.vector(A_s, off_s, 4), 128)
    tcc.commit()
    tcc.wait(0)
    cute.arch.sync_threads()

``vector(t, offset, v)`` is ``cute.make_tensor(t.iterator + cute.assume(offset,
divby=v), cute.make_layout(v))``: a ``v``-element view of the contiguous elements
``offset .. offset + v - 1`` of the (linearly indexed, unswizzled) tensor ``t``, for
global and shared tensors alike.  The ``assume`` tells CuTe the offset is a multiple
of ``v``, so the view's pointer carries ``v * element bytes`` alignment when the
tensor's base pointer has at least that (``assumed_align=16`` on the kernel's
pointers, a 16-byte aligned shared buffer); cp.async and 128-bit ``ld``/``st`` need it.
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import LoadCacheMode, cpasync


def vector(tensor, offset, width: int):
    """``width`` contiguous elements of ``tensor`` from linear element offset ``offset``
    (a multiple of ``width``; asserted to the compiler with ``cute.assume``).  The
    offset is added to the tensor's iterator, so it ignores the tensor's layout and
    any swizzle: use it on unswizzled tensors (or pass an already swizzled offset)."""
    return cute.make_tensor(tensor.iterator + cute.assume(offset, divby=width),
                            cute.make_layout(width))


def copy_async(src, dst, num_bits: int) -> None:
    """Start one ``cp.async`` of ``num_bits`` (32, 64 or 128) from the global view
    ``src`` to the shared view ``dst``, both of V = num_bits / element bits contiguous
    elements (see :func:`vector`), aligned to num_bits / 8 bytes.

    PTX: ``cp.async.cg.shared.global [dst], [src], 16`` for 128 bits (L2 only, bypass
    L1), ``cp.async.ca.shared.global [dst], [src], 4|8`` for 32/64 bits (``.cg`` only
    exists for 16 bytes).  Completion: :func:`commit` then :func:`wait`, then a barrier
    before other threads read ``dst``.
    """
    if num_bits not in (32, 64, 128):
        raise ValueError(f"tilecute copy_async: {num_bits} bits; cp.async copies 32, 64 or 128")
    mode = LoadCacheMode.GLOBAL if num_bits == 128 else LoadCacheMode.ALWAYS
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=mode), src.element_type,
                               num_bits_per_copy=num_bits)
    cute.copy(atom, src, dst)


def commit() -> None:
    """``cp.async.commit_group``: close the group of cp.async issued since the last one."""
    cute.arch.cp_async_commit_group()


def wait(n: int = 0) -> None:
    """``cp.async.wait_group n``: wait until at most ``n`` committed groups of this thread
    are pending (``n`` = 0: all done).  Other threads' copies need a barrier as well."""
    cute.arch.cp_async_wait_group(n)
