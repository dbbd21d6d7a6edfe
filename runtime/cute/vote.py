"""Warp election and block barriers that reduce a predicate, for generated kernels.

TileLang's ``T.shuffle_elect`` (``elect.sync``) and ``T.syncthreads_count`` /
``T.syncthreads_and`` / ``T.syncthreads_or`` (CUDA's ``__syncthreads_count`` ...:
``bar.red``).  The warp votes (``T.any_sync``, ``T.ballot_sync`` ...) print as
``cute.arch.vote_*_sync`` directly.

Usage in generated code::

    from tilecute.runtime.cute import vote as tcvote
    leader = tcvote.elect_one_sync()                 # a Boolean, true in one lane
    n = tcvote.syncthreads_count(x > 0, 0, 0)        # barrier 0 over the whole block
    ok = tcvote.syncthreads_and(x > 0, 2, 128)       # named barrier 2 over 128 threads
"""

import cutlass
from cutlass._mlir.dialects import llvm as _llvm
from cutlass.cutlass_dsl import dsl_user_op


def _asm(text: str, constraints: str, args, *, loc=None, ip=None):
    return cutlass.Int32(_llvm.inline_asm(
        cutlass.Int32.mlir_type, [cutlass.Int32(a).ir_value(loc=loc, ip=ip) for a in args],
        text, constraints, has_side_effects=True, is_align_stack=False,
        asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def elect_one_sync(warp_chosen=True, *, loc=None, ip=None) -> cutlass.Boolean:
    """PTX ``elect.sync`` over the full warp: true in exactly one lane (the lowest
    active one) where ``warp_chosen``, false in the others; all 32 lanes must run it
    (sm_90+)."""
    got = _asm("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 $0, 1, 0, p;\n}",
               "=r", [], loc=loc, ip=ip)
    if warp_chosen is True:
        return got != 0
    return (got & cutlass.Int32(warp_chosen)) != 0


def _bar(barrier_id: int, threads: int) -> str:
    """The barrier operands: ``id`` (every thread of the block) or ``id, threads``."""
    return f"{barrier_id}" if not threads else f"{barrier_id}, {threads}"


@dsl_user_op
def syncthreads_count(pred, barrier_id: int = 0, threads: int = 0, *, loc=None, ip=None):
    """A barrier (``barrier_id``; over ``threads`` threads, or the whole block with 0)
    that returns, in every thread, how many of its threads had ``pred`` true
    (``bar.red.popc.u32``; CUDA's ``__syncthreads_count``).  An Int32."""
    return _asm("{\n .reg .pred p;\n setp.ne.u32 p, $1, 0;\n"
                f" bar.red.popc.u32 $0, {_bar(barrier_id, threads)}, p;\n}}",
                "=r,r", [cutlass.Int32(pred)], loc=loc, ip=ip)


def _bar_pred(op: str, pred, barrier_id: int, threads: int, loc, ip):
    return _asm("{\n .reg .pred p, q;\n setp.ne.u32 p, $1, 0;\n"
                f" bar.red.{op}.pred q, {_bar(barrier_id, threads)}, p;\n"
                " selp.u32 $0, 1, 0, q;\n}", "=r,r", [cutlass.Int32(pred)], loc=loc, ip=ip)


@dsl_user_op
def syncthreads_and(pred, barrier_id: int = 0, threads: int = 0, *, loc=None, ip=None):
    """As :func:`syncthreads_count`; 1 where every thread had ``pred`` true, else 0
    (``bar.red.and.pred``; CUDA's ``__syncthreads_and``)."""
    return _bar_pred("and", pred, barrier_id, threads, loc, ip)


@dsl_user_op
def syncthreads_or(pred, barrier_id: int = 0, threads: int = 0, *, loc=None, ip=None):
    """As :func:`syncthreads_count`; 1 where any thread had ``pred`` true, else 0
    (``bar.red.or.pred``; CUDA's ``__syncthreads_or``)."""
    return _bar_pred("or", pred, barrier_id, threads, loc, ip)
