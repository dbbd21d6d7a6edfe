"""Device prints and asserts for generated kernels: TileLang's ``T.print`` and
``T.device_assert``, with the lines TileLang's CUDA helpers print.

Usage in generated code::

    from tilecute.runtime.cute import debug as tcd
    cute.printf("msg='m' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d): dtype=float value=%f",
                *tcd.where(), cutlass.Float32(x))
    tcd.trap()

The format strings are compile-time text; :func:`where` gives the six indices that
every line starts with.
"""

import cutlass.cute as cute
from cutlass._mlir.dialects import llvm as _llvm
from cutlass.cutlass_dsl import dsl_user_op


def where():
    """``(blockIdx.x, .y, .z, threadIdx.x, .y, .z)``, the prefix of every printed line."""
    bx, by, bz = cute.arch.block_idx()
    tx, ty, tz = cute.arch.thread_idx()
    return bx, by, bz, tx, ty, tz


@dsl_user_op
def trap(*, loc=None, ip=None) -> None:
    """PTX ``trap``: the thread stops and the launch fails (what CUDA's ``assert`` does)."""
    _llvm.inline_asm(None, [], "trap;", "", has_side_effects=True, is_align_stack=False,
                     asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
