"""Integer math for generated kernels that CuTe DSL's operators do not spell.

``truncdiv`` / ``truncmod`` are C's integer ``/`` and ``%`` (TVM's ``truncdiv`` /
``truncmod``, TileLang's ``T.truncdiv`` / ``T.truncmod``): the quotient rounded toward
zero and the remainder with the dividend's sign.  CuTe DSL's ``//`` floors (it is the
IR's ``floordiv``), so these go to ``arith.divsi`` / ``arith.remsi`` directly
(``divui`` / ``remui`` for unsigned types, where the two roundings agree).

Usage in generated code::

    from tilecute.runtime.cute import math as tcmath
    q = tcmath.truncdiv(a, b)
    r = tcmath.truncmod(a, b)
    f = tcmath.reinterpret(i, cutlass.Float32)  # the bits of Int32 i as a Float32

Either operand may be a Python int; the other's type is the result's (both ints of one
type otherwise).
"""

import cutlass
from cutlass._mlir.dialects import arith
from cutlass.cutlass_dsl import dsl_user_op


def _operands(a, b, loc, ip):
    kind = type(a) if isinstance(a, cutlass.Numeric) else type(b)
    return kind, kind(a).ir_value(loc=loc, ip=ip), kind(b).ir_value(loc=loc, ip=ip)


@dsl_user_op
def truncdiv(a, b, *, loc=None, ip=None):
    """``a / b`` rounded toward zero (``-7 / 2 == -3``)."""
    kind, x, y = _operands(a, b, loc, ip)
    op = arith.divsi if kind.signed else arith.divui
    return kind(op(x, y, loc=loc, ip=ip))


@dsl_user_op
def truncmod(a, b, *, loc=None, ip=None):
    """``a - truncdiv(a, b) * b``: the sign of ``a`` (``-7 % 2 == -1``)."""
    kind, x, y = _operands(a, b, loc, ip)
    op = arith.remsi if kind.signed else arith.remui
    return kind(op(x, y, loc=loc, ip=ip))


@dsl_user_op
def reinterpret(value, target, *, loc=None, ip=None):
    """The bits of ``value`` read as cutlass type ``target`` of the same width
    (``arith.bitcast``: TileLang's ``T.reinterpret``)."""
    return target(arith.bitcast(target.mlir_type, value.ir_value(loc=loc, ip=ip), loc=loc, ip=ip))
