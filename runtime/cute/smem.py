"""Shared-memory tensors for generated kernels.

All of these live in the kernel's *dynamic* shared memory (PTX
``.extern .shared .align N .b8 __dynamic_shmem__K[]``): the cubin records no size, so
whoever launches the cubin (tilecute's C++ launcher) must pass the total bytes as the
launch's dynamic shared memory, and above 48 KiB first raise
``cudaFuncAttributeMaxDynamicSharedMemorySize``.  Nothing checks the size at compile
time.  (CuTe's own ``.launch()`` infers the size of :func:`alloc` buffers by itself;
an explicit ``smem=`` smaller than that only gets a host-side runtime message.)

Two ways, do not mix them in one kernel (every ``.extern .shared`` symbol starts at the
same address, so :func:`view` buffers would overlap :func:`alloc` buffers):

* :func:`alloc` (``cutlass.memory.SmemAllocator``): a bump allocator in program order.
  Each buffer starts at the running size rounded up to its alignment
  (``max(align, element bytes)``); the total is the end of the last buffer, with no
  padding after it.  E.g. 3 x Int8 (align 1) at 0, 4 x Float32 (align 128) at 128,
  5 x Float16 (align 2) at 144: 154 bytes.
* :func:`view` over one ``base = cute.arch.get_dyn_smem(cutlass.Int8, alignment=16)``
  with offsets the compiler picks itself (what tilecute's codegen does today).

Usage in generated code::

    from tilecute.runtime.cute import smem as tcs
    A_s = tcs.alloc(cutlass.Float16, (64, 32), swizzle=(3, 3, 3))
    red_s = tcs.alloc(cutlass.Float32, (8,))
    # or
    base = cute.arch.get_dyn_smem(cutlass.Int8, alignment=16)
    A_s = tcs.view(base, 0, cutlass.Float16, (64, 32), swizzle=(3, 3, 3))

Indexing ``A_s[i, j]`` (dynamic ``i``, ``j``) applies the swizzle.  A vector view of an
unswizzled buffer: ``copy.vector(t, offset, v)``; of a swizzled one: take the offset
from ``cute.crd2idx((i, j), t.layout)`` (already swizzled) and keep the vector inside
one swizzle atom (``v`` <= 2**m elements).
"""

import math

import cutlass
import cutlass.cute as cute
from cutlass.memory import SmemAllocator


def row_major(shape, swizzle=None):
    """Row-major layout of the static ``shape`` (int or tuple of 1-3 ints), composed
    with the XOR swizzle ``swizzle = (b, m, s)`` (``cute.make_swizzle(b, m, s)``: bits
    [m + s, m + s + b) of the element offset XORed into bits [m, m + b)) if given."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    stride = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
    layout = cute.make_layout(shape, stride=stride)
    if swizzle is None:
        return layout
    return cute.make_composed_layout(cute.make_swizzle(*swizzle), 0, layout)


def alloc(dtype, shape, swizzle=None, align: int = 16):
    """A new shared-memory tensor of ``dtype`` and static row-major ``shape`` (see
    :func:`row_major`), from the kernel's ``SmemAllocator``; its first byte is aligned
    to ``max(align, element bytes)``.  Index it with a tuple of ``len(shape)`` ints
    (``t[i, j]``) or, for 1-D, ``t[i]``.  Plain function (no control flow): call it
    anywhere in a ``@cute.kernel``.  PTX: no code, addresses become offsets from
    ``__dynamic_shmem__0``."""
    return SmemAllocator().allocate_tensor(dtype, row_major(shape, swizzle), align)


def view(base, byte_offset: int, dtype, shape, swizzle=None):
    """A shared-memory tensor of ``dtype`` and row-major ``shape`` at ``base +
    byte_offset``, ``base`` a byte pointer from
    ``cute.arch.get_dyn_smem(cutlass.Int8, alignment=A)``.  A static ``byte_offset`` that
    is a multiple of A keeps A-byte alignment on the tensor's pointer (needed for
    128-bit ``ld.shared``/``cp.async``)."""
    return cute.make_tensor(cute.recast_ptr(base + byte_offset, dtype=dtype),
                            row_major(shape, swizzle))


def nbytes(dtype, shape) -> int:
    """Bytes of a ``dtype`` buffer of ``shape`` (a trace-time int)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return math.prod(shape) * dtype.width // 8
