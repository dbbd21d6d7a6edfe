"""Expressions as CuTe DSL source text: constants, operators with Python precedence
(parentheses only where needed), casts, and the math intrinsics, each in one table.

The printer knows nothing of memory: a load prints through the ``load`` function its
owner passes in (a register, a hoisted temporary, or an element of a tensor).  Imports no
CUTLASS.
"""

from __future__ import annotations

import dataclasses
import enum

from typing import Callable

from ..ir import nodes as N
# FP4: codes two to a byte in memory; E8M0: its bytes in CuTe code (DTypeInfo.cute: Uint8),
# cast by runtime.cute.e8m0 (the validator's names, which bound what is done with them)
from ..ir.validate import E8M0, FP4, INTS4, PACKED, UINT4
from ..runtime.dtypes import DTYPES, e2m1_code, e8m0_code
from ..transform.analysis import value_range
from ..ir.visitor import decided
from .source import ident

BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
         "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
CMPOP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# Python precedence of what an operator prints as (higher binds tighter)
PREC = {"or": 2, "and": 3, "not": 4, "cmp": 5, "bitor": 6, "bitxor": 7, "bitand": 8,
        "shl": 10, "shr": 10, "add": 11, "sub": 11, "mul": 12, "div": 12, "floordiv": 12,
        "mod": 12}
ATOM = 100
# CuTe DSL's AST preprocessor rewrites `a and b` as `a if <a is the Python False> else
# and_(a, b)`, with `a` copied four times, once per `and`/`or` of a chain: its source and
# trace grow as 4^n (a 10-term bounds check took 28 s to compile, 15 terms hours).  A
# longer chain is emitted as one call of its variadic `cutlass.and_` / `cutlass.or_`,
# which folds the terms left to right (every term evaluated; a dynamic `and` already
# evaluates both sides).
LONG_CHAIN = 4


def chain(op: str, terms) -> str:
    """``terms`` (operands already printed at ``op``'s precedence) joined by ``op``
    (``"and"`` / ``"or"``), as one ``cutlass.and_(...)`` / ``cutlass.or_(...)`` past
    ``LONG_CHAIN`` terms."""
    terms = list(terms)
    if len(terms) <= LONG_CHAIN:
        return f" {op} ".join(terms)
    return f"cutlass.{op}_({', '.join(terms)})"
# 8- and 16-bit integer arithmetic that can leave its width.  TileLang's CUDA C computes it
# in int (C's integer promotions: `(int)(a[i] * b[i])` of two int8s is the whole product),
# so where its value is converted or compared, rather than stored at its own width, it
# does not wrap there; tilecute computes it in Int32 at those places (see
# ExprPrinter.promoted)
PROMOTED_OPS = ("add", "sub", "mul", "shl")
# Operators whose result at the narrow width is not the wrapped result of C's: a shift
# right, a division, a remainder, a min or max of a promoted value (`(a + b) >> 1` of two
# uint8s is the average, `(x * alpha) >> 8` the high byte of the whole product).  Where
# one of them takes a PROMOTED_OPS value, the whole expression is computed in Int32 and
# converted to its dtype once (ExprPrinter.promoted); the bitwise operators keep the low
# bits, as add, sub, mul and shl do, so they only pass a promotion through.
WIDTH_SENSITIVE_OPS = ("shr", "floordiv", "mod", "min", "max")
PASS_THROUGH_OPS = WIDTH_SENSITIVE_OPS + ("bitand", "bitor", "bitxor")
# float math intrinsic -> CuTe DSL function of its arguments.  16- and 8-bit arguments compute
# in float32 and the result converts back, as TileLang's CUDA code does for the functions
# CUDA has no half versions of (its templates #define hpow powf, htan as tanf(float(x)))
MATH = {
    "exp": "cute.math.exp", "exp2": "cute.math.exp2", "log": "cute.math.log",
    "log2": "cute.math.log2", "sqrt": "cute.math.sqrt", "rsqrt": "cute.math.rsqrt",
    "tanh": "cute.math.tanh", "sin": "cute.math.sin", "cos": "cute.math.cos",
    "floor": "cute.math.floor", "ceil": "cute.math.ceil", "tan": "cute.math.tan",
    "atan": "cute.math.atan", "acos": "cute.math.acos", "asin": "cute.math.asin",
    "sinh": "cute.math.sinh", "cosh": "cute.math.cosh", "erf": "cute.math.erf",
    "log10": "cute.math.log10", "log1p": "cute.math.log1p", "trunc": "cute.math.trunc",
    # TVM's round: halfway cases to even (rint); C's roundf: away from zero
    "round": "cute.math.roundeven", "round_ties_away_from_zero": "cute.math.round",
    "pow": "cute.math.pow", "atan2": "cute.math.atan2",
    # C's fmod (the sign of x): MLIR's arith.remf, LLVM's frem
    "fmod": "cute.math.rem",
    "asinh": "cute.math.asinh", "acosh": "cute.math.acosh", "atanh": "cute.math.atanh",
    # the sign bit of the second (16-bit arguments widened: exact)
    "copysign": "cute.math.copysign",
    # float predicates (MLIR's math.isnan ...: an i1, wrapped as a Boolean); 16-bit
    # arguments are widened first, as TVM's isnan does, which is exact
    "isnan": "cute.math.isnan", "isinf": "cute.math.isinf", "isfinite": "cute.math.isfinite",
}
# the fast-math pass's approximations: a float32 expression with the argument as {x}
APPROX = {
    "exp2_approx": "cute.math.exp2({x}, approx=True, ftz=True)",
    "exp_approx": "cute.math.exp2({x} * cutlass.Float32(1.4426950408889634), approx=True, ftz=True)",
    "log2_approx": "cute.math.log2({x}, approx=True, ftz=True)",
    "log_approx": "cute.math.log2({x}, approx=True, ftz=True) * cutlass.Float32(0.6931471805599453)",
    "exp10_approx": "cute.math.exp2({x} * cutlass.Float32(3.321928094887362), approx=True, ftz=True)",
    "log10_approx": "cute.math.log2({x}, approx=True, ftz=True) * cutlass.Float32(0.3010299956639812)",
    "sin_approx": "cute.math.sin({x}, approx=True, ftz=True)",
    "cos_approx": "cute.math.cos({x}, approx=True, ftz=True)",
    "tan_approx": "(cute.math.sin({x}, approx=True, ftz=True) / cute.math.cos({x}, approx=True, ftz=True))",
}
THREAD_IDX = ("tc_tx", "tc_ty", "tc_tz")  # what the kernel binds cute.arch.thread_idx() to
# intrinsics printed as Python operators of their arguments (``(a + b - 1) // b``, ``a * b +
# c``) or as a runtime.cute.math helper that folds Python ints (truncdiv, truncmod): a
# Python value where their arguments are (ExprPrinter.python_kind; an integer abs too)
PYTHON_CALLS = ("ceildiv", "fma", "truncdiv", "truncmod")


class Py(enum.IntEnum):
    """What an expression is in the generated code while the kernel is traced, ordered so
    that an operator all of whose operands must be Python values is the least of them."""
    CUTLASS = 0  # surely a cutlass (MLIR) value
    MAYBE = 1  # maybe a Python value (an `and` / `or` short-circuiting to a Python operand)
    PYTHON = 2  # surely a Python number or bool (constants, constant-unrolled indices)


def is_fp8(dtype: str) -> bool:
    """An 8-bit float (float8_e4m3, float8_e5m2), which CuTe DSL loads, stores and
    converts but does no arithmetic on."""
    return N.is_float(dtype) and DTYPES[dtype].bits == 8 and dtype != E8M0



def _int_add(e) -> bool:
    """Is ``e`` an integer (not bool) ``+``?"""
    return isinstance(e, N.BinOp) and e.op == "add" and N.is_int(e.dtype) and e.dtype != "bool"


def _sum_terms(e) -> list:
    """The terms of an integer ``+`` chain, left to right (``x + (x + y)``: x, x, y)."""
    if _int_add(e):
        return _sum_terms(e.a) + _sum_terms(e.b)
    while isinstance(e, N.Select) and e.a == e.b:  # (either branch: MLIR folds it to it)
        e = e.a
    return [e]


def _let_terms(t, lets: dict) -> list:
    """The terms of the sum a Let bound ``t`` to, and of the sums its terms were bound to
    (``k = j + 1``, ``j = i + tx``: i, tx, 1), through Lets of one variable to another
    (``k = j``); else ``[t]``."""
    value = t
    while isinstance(value, N.Var) and value.name in lets:
        value = lets[value.name]
    return [x for u in _sum_terms(value) for x in _let_terms(u, lets)] if _int_add(value) else [t]


def _repeated_sum(e, lets: dict | None = None) -> N.Expr | None:
    """An integer ``+`` chain in which a term comes back (``i + i``, ``i + (i + tx)``,
    ``(i + j) + i``) as the sum of each term times its count (``i * 2``, ``i * 2 + tx``),
    else None.  CuTe DSL 4.8's MLIR/LLVM lowering folds such a sum over a loop index as if
    it stepped by 1: a signed ``(i + i) // c`` or ``% c`` came out as ``i // c``
    (``sum((i + i) // 4 for i in range(6))`` was 2, not 6: fuzzer scalar seed 4424), and
    ``T.truncmod(i + (i + tx), 9)`` as ``(tx + k) % 9`` for the k-th iteration (seed 5572
    on an H200; ``truncdiv`` alike), while ``i * 2`` and ``(i * 2 + tx) % 9`` are right.
    ``lets`` (a variable's name -> the load-free value a Let in scope bound it to, the
    bounds prover's): a term that is such a variable bound to a sum counts as that sum's
    terms (:func:`_let_terms`) where that makes a term come back (``j = i + tx`` then ``i + j``, one SSA value in
    the MLIR as ``i + (i + tx)`` is)."""
    if not _int_add(e):
        return None
    terms = _sum_terms(e)
    if len(set(terms)) == len(terms) and lets:
        terms = [x for t in terms for x in _let_terms(t, lets)]
    counts: dict = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    if len(counts) == len(terms):
        return None
    out = None
    for t, c in counts.items():
        t = t if c == 1 else N.BinOp("mul", t, N.Const(c, e.dtype), e.dtype)
        out = t if out is None else N.BinOp("add", out, t, e.dtype)
    return out


def _bool_arith(e) -> bool:
    """``+``, ``-`` or ``*`` of two bools (TVM keeps the bool dtype; C computes it in int,
    so ``(a > 0) + (b > 0)`` is 2 where both hold; CuTe DSL's Boolean arithmetic gives a
    Boolean)."""
    return isinstance(e, N.BinOp) and e.dtype == "bool" and e.op in ("add", "sub", "mul")


def _int_abs(e) -> bool:
    """A ``T.abs`` of a signed integer: TVM builds it as ``x >= 0 ? x : 0 - x``, whose
    ``0 - x`` C computes in int (so |-128| of an int8 is 128 where it is converted)."""
    return isinstance(e, N.Call) and e.name == "abs" and N.is_int(e.dtype)


def _bit_not(e) -> bool:
    """``~x`` of an 8- or 16-bit unsigned integer (the ``bitwise_not`` Call: C computes it in
    int, so ~200 of a uint8 is -201 where converted or compared)."""
    return isinstance(e, N.Call) and e.name == "bitwise_not"


def _trunc_divmod(e) -> bool:
    """``T.truncdiv`` / ``T.truncmod`` (TVM's Div / Mod: C's ``/`` and ``%``)."""
    return isinstance(e, N.Call) and e.name in ("truncdiv", "truncmod")


def _narrow_int(e) -> bool:
    """8- or 16-bit integer arithmetic: a BinOp, a Select (C's ``?:`` converts its
    operands as arithmetic does), an integer abs, a ``bitwise_not``, a truncdiv / truncmod."""
    return ((isinstance(e, (N.BinOp, N.Select)) or _int_abs(e) or _bit_not(e) or _trunc_divmod(e))
            and N.is_int(e.dtype) and DTYPES[e.dtype].bits < 32)


def _operands(e) -> tuple:
    """The narrow operands of a ``_narrow_int`` expression (a Select's branches)."""
    return tuple(e.args) if isinstance(e, N.Call) else (e.a, e.b)


def _promotes(e) -> bool:
    """Is ``e`` 8- or 16-bit integer arithmetic that C computes in int: a PROMOTED_OPS
    operator, an integer abs or a ``bitwise_not``, or a PASS_THROUGH_OPS one or a Select
    over such a value?"""
    if not _narrow_int(e):
        return False
    if isinstance(e, N.Select):
        return any(_promotes(x) for x in _operands(e))
    if _int_abs(e) or _bit_not(e) or (not isinstance(e, N.Call) and e.op in PROMOTED_OPS):
        return True
    return (_trunc_divmod(e) or e.op in PASS_THROUGH_OPS) and any(_promotes(x) for x in _operands(e))


def _width_sensitive(e) -> bool:
    """Does ``e``'s value at its own narrow width differ from C's (a WIDTH_SENSITIVE_OPS
    operator, or an abs, over a promoted value, anywhere in its narrow arithmetic)?"""
    if _int_abs(e):
        return _promotes(e.args[0]) or _width_sensitive(e.args[0])
    if _bit_not(e):  # (bitwise: the narrow value is the low bits of C's)
        return _width_sensitive(e.args[0])
    if _trunc_divmod(e):  # C's / and % of a promoted value: as floordiv / mod
        return _promotes(e) or any(_width_sensitive(x) for x in e.args)
    if not _promotes(e) or isinstance(e, N.Select) or e.op in PROMOTED_OPS + ("bitand", "bitor", "bitxor"):
        return _narrow_int(e) and any(_width_sensitive(x) for x in _operands(e))
    return True


def _exprs(x) -> list:
    """The expressions in a node's field (one, or a tuple of them)."""
    if isinstance(x, N.Expr):
        return [x]
    return [y for y in x if isinstance(y, N.Expr)] if isinstance(x, tuple) else []


def cute_type(dtype: str) -> str:
    return f"cutlass.{DTYPES[dtype].cute}"


def memory_type(dtype: str) -> str:
    """The CuTe type of ``dtype`` elements in global or shared memory: bool is a byte
    there (as in DLPack and torch; CuTe keeps i1 to registers); float4_e2m1fn tensors are
    their bytes, two elements to a byte (``runtime.cute.fp4``), and so are int4 ones."""
    return "cutlass.Uint8" if dtype in ("bool",) + PACKED else cute_type(dtype)


def register_type(dtype: str) -> str:
    """The CuTe type of a ``dtype`` value in registers: an fp4 or int4 value is its code
    in a Uint8 (CuTe DSL has no scalar sub-byte registers)."""
    return "cutlass.Uint8" if dtype in PACKED else cute_type(dtype)


def mma_type(dtype: str) -> str:
    """The CuTe type of a T.gemm operand: float32 and tfloat32 operands multiply as tf32;
    uint4 is runtime.cute.mma's ``Uint4`` (CuTe DSL has none)."""
    if dtype == UINT4:
        return "tcm.Uint4"
    return "cutlass.TFloat32" if dtype in ("float32", "tfloat32") else cute_type(dtype)


def const(e: N.Const) -> str:
    if e.dtype == FP4:  # its code, rounded as the device rounds
        return f"cutlass.Uint8({e2m1_code(float(e.value))})"
    if e.dtype == E8M0:  # likewise
        return f"cutlass.Uint8({e8m0_code(float(e.value))})"
    if e.dtype in INTS4:  # its code: the value's low 4 bits
        return f"cutlass.Uint8({int(e.value) & 0xF})"
    if e.dtype == "bool":
        return "True" if e.value else "False"
    if e.dtype == "int32":
        return str(int(e.value))
    value = repr(float(e.value)) if N.is_float(e.dtype) else str(int(e.value))
    if value in ("inf", "-inf", "nan"):
        value = f'float("{value}")'
    return f"{cute_type(e.dtype)}({value})"


class ExprPrinter:
    """Source text of expressions.  ``ranges`` (variable -> known (lo, hi)) is shared with
    the kernel emitter, which fills it as loops open; ``subst`` maps a loop variable to
    the text that stands for it in the current lane.  Variables print through
    :func:`.source.ident`."""

    def __init__(self, ranges: dict[str, tuple], load: Callable[[N.Load], str],
                 fail: Callable[[object, str], None],
                 use: Callable[[str], None] | None = None):
        self.ranges = ranges
        self.load = load
        self.fail = fail
        self.use = use or self._no_helpers  # records a runtime.cute helper module it calls
        self.subst: dict[str, str] = {}
        # the names that are, or may be, Python values in the generated code (:class:`Py`;
        # any other name is a cutlass value): indices of constant-unrolled loops
        # (``cutlass.range_constexpr``) and names a Let binds to values made of them.  The
        # emitters bind each name as they print it (:meth:`bind`)
        self.python: dict[str, Py] = {}
        # the barrier of the threads the body maps onto, (id, thread count; 0: the whole
        # block), for T.syncthreads_count/_and/_or (the kernel emitter sets it per region)
        self.block_barrier: Callable[[], tuple[int, int]] = lambda: (0, 0)
        # the coordinate an atomic helper takes for ``buffer[indices]`` (the kernel emitter
        # sets it: a shared buffer's is its element offset under its layout)
        self.atomic_coord: Callable[[str, tuple], str] = self.global_coord
        # the temporary an atomic call with a result was run into (the bounds predication's,
        # for one not proved in bounds), or None
        self.held: Callable[[N.Expr], str | None] = lambda e: None
        # inside a nest over the rows / columns of an MMA row / column fragment, where the
        # holders of a row (column) run the nest alike: (the owner test, the owner's lane,
        # the holders' lane mask) so an atomic with a result runs once, in the owner, and
        # its value is shuffled to the holders; None elsewhere (the kernel emitter sets it)
        self.fetch_once: tuple[str, str, str] | None = None
        # an integer Let's name -> its load-free value, where known (the kernel emitter
        # sets it to the bounds prover's map): :func:`_repeated_sum` looks through it
        self.lets: Callable[[], dict[str, N.Expr]] = dict

    def global_coord(self, name: str, indices) -> str:
        """A global tensor element's index tuple, as the atomic helpers take it."""
        text = self.index_tuple(indices)
        return f"({text},)" if len(indices) == 1 else f"({text})"

    def expr(self, e: N.Expr) -> str:
        return self._expr(e)[0]

    def _no_helpers(self, helper: str) -> None:
        self.fail(None, f"an expression that calls the runtime.cute {helper!r} helpers cannot "
                        "stand here")

    def operand(self, e: N.Expr, min_prec: int) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < min_prec else text

    def promoted(self, e: N.Expr, min_prec: int) -> str:
        """``e`` as C computes an 8- or 16-bit integer expression: its ``PROMOTED_OPS``
        in Int32 (operands widened first), so a product or sum does not wrap at the narrow
        width; any other value widened (an Int32 of it)."""
        e = _repeated_sum(e, self.lets()) or e
        if _promotes(e):
            if _int_abs(e):
                return f"abs({self.promoted(e.args[0], 0)})"
            if _trunc_divmod(e):
                self.use("math")
                return f"tcmath.{e.name}({self.promoted(e.args[0], 0)}, {self.promoted(e.args[1], 0)})"
            if _bit_not(e):  # every bit of the int flipped
                text = f"{self.promoted(e.args[0], PREC['bitxor'])} ^ -1"
                return f"({text})" if PREC["bitxor"] < min_prec else text
            if isinstance(e, N.Select):
                known = decided(e.cond, self.ranges)
                if known is not None:
                    return self.promoted(e.a if known else e.b, min_prec)
                return (f"{self.select_fn(e.cond)}({self.expr(e.cond)}, {self.promoted(e.a, 0)}, "
                        f"{self.promoted(e.b, 0)})")
            if e.op in ("min", "max"):
                return f"cutlass.{e.op}({self.promoted(e.a, 0)}, {self.promoted(e.b, 0)})"
            if e.op in ("floordiv", "mod") and DTYPES[e.dtype].kind != "int":
                # TVM lowers an unsigned floordiv / floormod to C's / and % (its operands
                # are unsigned), which C applies to the promoted, signed values
                self.use("math")
                fn = "truncdiv" if e.op == "floordiv" else "truncmod"
                return f"tcmath.{fn}({self.promoted(e.a, 0)}, {self.promoted(e.b, 0)})"
            if e.op == "mod":  # a floor modulo of Int32 values
                a, b = self.promoted(e.a, PREC["mul"]), self.promoted(e.b, ATOM)
                text = f"{a} - {a} // {b} * {b}"
                return f"({text})" if PREC["sub"] < min_prec else text
            p = PREC[e.op]
            text = f"{self.promoted(e.a, p)} {BINOP[e.op]} {self.promoted(e.b, p + 1)}"
            return f"({text})" if p < min_prec else text
        if isinstance(e, N.Const) and N.is_int(e.dtype):
            return f"({int(e.value)})" if e.value < 0 else str(int(e.value))
        if N.is_int(e.dtype) and DTYPES[e.dtype].bits < 32:
            return f"cutlass.Int32({self.expr(e)})"
        return self.operand(e, min_prec)

    def bool_int(self, e: N.Expr, min_prec: int) -> str:
        """C's int value of a bool expression: bool arithmetic (``_bool_arith``) is
        computed on the operands' Int32 values (``(a > 0) + (b > 0)`` is 2 where both
        hold); any other bool is its Int32 (0 or 1)."""
        if not _bool_arith(e):
            return f"cutlass.Int32({self.expr(e)})"
        p = PREC[e.op]
        text = f"{self.bool_int(e.a, p)} {BINOP[e.op]} {self.bool_int(e.b, p + 1)}"
        return f"({text})" if p < min_prec else text

    def index_tuple(self, indices) -> str:
        """A global tensor's coordinate ``indices``: an index whose value may pass int32 is
        computed in 64 bits (:meth:`wide_index`; only a tensor of 64-bit offsets has one)."""
        parts = [self.expr(self.wide_index(i)) for i in indices]
        return ", ".join(parts) if len(parts) > 1 else parts[0]

    def wide_index(self, e: N.Expr) -> N.Expr:
        """TileLang's index legalization (ConfigIndexBitwidth's IndexLegalizer): an integer
        index narrower than 64 bits whose bounds reach past int32 (``bx * 1024 + i`` with
        ``bx`` up to 2^22 over a 2^32-element tensor) is computed in int64, each of its
        variables and loads cast to Int64 first, as TVM's Int64Promoter rewrites it;
        otherwise ``e`` itself (a product computed in Int32 wraps before any stride
        widens it)."""
        if not N.is_int(e.dtype) or DTYPES[e.dtype].bits >= 64:
            return e
        lo, hi = value_range(e, self.ranges)
        if not ((hi is not None and hi >= 2**31 - 1) or (lo is not None and lo < -2**31)):
            return e
        return _int64_promoted(e)

    def _expr(self, e: N.Expr) -> tuple[str, int]:
        """Source text of ``e`` and its Python precedence."""
        if isinstance(e, N.Var):
            return self.subst.get(e.name) or ident(e.name), ATOM
        if isinstance(e, N.Const):
            return const(e), ATOM
        if isinstance(e, N.BinOp):
            repeated = _repeated_sum(e, self.lets())
            if repeated is not None:
                return self._expr(repeated)
            if _bool_arith(e):  # C's int value, as a bool: nonzero
                return f"{self.bool_int(e, PREC['cmp'] + 1)} != 0", PREC["cmp"]
            if _width_sensitive(e):  # C's value, computed in Int32, at the narrow width
                return f"{cute_type(e.dtype)}({self.promoted(e, 0)})", ATOM
            if e.op in ("min", "max"):
                # floats: TileLang's CUDA max/min (fmaxf, __hmax ...) are NaN-quiet, a NaN
                # operand gives the other: cute.arch.fmax/fmin (max.f32, NaN-quiet; 16-bit
                # and fp8 operands through Float32, which is exact), cute.math.max/min
                # (arith.maxnumf) for float64; cutlass.max/min would select (setp + selp)
                # and pass a NaN on
                if e.dtype == "float64":
                    return f"cute.math.{e.op}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
                if N.is_float(e.dtype):
                    a, b = (self.expr(N.cast(x, "float32")) for x in (e.a, e.b))
                    value = f"cute.arch.f{e.op}({a}, {b})"
                    return (value if e.dtype == "float32" else f"{cute_type(e.dtype)}({value})"), ATOM
                value = f"cutlass.{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
                # (of two bools, or / and: cutlass.max gives an Int32)
                return (f"cutlass.Boolean({value})" if e.dtype == "bool" else value), ATOM
            if is_fp8(e.dtype):
                # CuTe DSL has no fp8 arithmetic; CUTLASS's float_e4m3_t / float_e5m2_t
                # (TileLang's fp8 types) compute in float and round the result back
                wide = N.BinOp(e.op, N.cast(e.a, "float32"), N.cast(e.b, "float32"), "float32")
                return f"{cute_type(e.dtype)}({self.expr(wide)})", ATOM
            if e.op in ("floordiv", "mod") and e.dtype in ("int32", "int64") and \
                    isinstance(e.b, N.Const) and e.b.value < 0:
                return self._by_negative_constant(e)
            if e.op == "mod" and N.is_int(e.dtype) and not self._nonnegative_mod(e):
                # CuTe DSL's % truncates like C; the IR's mod floors like Python's
                a, b = self.operand(e.a, PREC["mul"]), self.operand(e.b, ATOM)
                return f"{a} - {a} // {b} * {b}", PREC["sub"]
            p = PREC[e.op]
            return f"{self.operand(e.a, p)} {BINOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Cmp):
            p = PREC["cmp"]
            if _promotes(e.a) or _promotes(e.b):
                a, b = (self.promoted(x, p + 1) for x in (e.a, e.b))
                return f"{a} {CMPOP[e.op]} {b}", p
            if is_fp8(e.a.dtype):  # (compared as the float values they are, exactly)
                a, b = (self.operand(N.cast(x, "float32"), p + 1) for x in (e.a, e.b))
                return f"{a} {CMPOP[e.op]} {b}", p
            return f"{self.operand(e.a, p + 1)} {CMPOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Logic):
            p = PREC[e.op]
            terms = list(flatten_logic(e))
            if len(terms) > LONG_CHAIN:
                return chain(e.op, (self.expr(a) for a in terms)), ATOM
            return chain(e.op, (self.operand(a, p + 1) for a in terms)), p
        if isinstance(e, N.Not):
            return f"not {self.operand(e.a, PREC['not'])}", PREC["not"]
        if isinstance(e, N.Cast):
            held = self.held(e)  # (a bounds-checked cast of a load: codegen/bounds.py)
            if held is not None:
                return held, ATOM
            if FP4 in (e.dtype, e.value.dtype) and e.dtype != e.value.dtype:
                return self._fp4_cast(e), ATOM
            if {e.dtype, e.value.dtype} & set(INTS4) and e.dtype != e.value.dtype:
                return self._int4_cast(e), ATOM
            if E8M0 in (e.dtype, e.value.dtype):
                return self._e8m0_cast(e), ATOM
            if is_fp8(e.dtype) and (N.is_int(e.value.dtype) or e.value.dtype == "bool"):
                # through float32, as CUDA's __nv_fp8_e4m3(int) converts (CuTe DSL's
                # Float8E4M3FN(Float32(i)) folds to an sitofp to fp8, which LLVM refuses)
                self.use("math")
                value = self.expr(e.value)
                return f"tcmath.fp8_from_int({value}, {cute_type(e.dtype)})", ATOM
            if is_fp8(e.value.dtype) and (N.is_int(e.dtype) or e.dtype == "bool"):
                # (int)__nv_fp8_e4m3 and (bool) convert its float value likewise (CuTe DSL
                # has no direct fp8 to integer or i1 conversion)
                return self._expr(N.Cast(e.dtype, N.Cast("float32", e.value)))
            if is_fp8(e.dtype) and is_fp8(e.value.dtype) and e.dtype != e.value.dtype:
                # e4m3 <-> e5m2 through its (exact) float32 value, as CUTLASS converts (CuTe
                # DSL's direct conversion is an arith.truncf between fp8 types, which fails)
                return self._expr(N.Cast(e.dtype, N.Cast("float32", e.value)))
            if _bool_arith(e.value) and e.dtype != "bool":
                return f"{cute_type(e.dtype)}({self.bool_int(e.value, 0)})", ATOM
            promoted = _promotes(e.value)
            text = self.promoted(e.value, 0) if promoted else self.expr(e.value)
            if (promoted and N.is_float(e.dtype) and isinstance(e.value, N.Select)
                    and not isinstance(e.value.cond, N.Const)):
                # the promoted Select is a cutlass.select_ of Int32 values, whose MLIR value
                # has no sign (CuTe DSL's float conversions refuse it): name its type
                text = f"cutlass.Int32({text})"
            if (e.dtype in ("float16", "bfloat16", "float32") or is_fp8(e.dtype)) and \
                    not isinstance(e.value, N.Const) and self.surely_python(e.value):
                # CuTe DSL keeps a Python number unrounded in a cutlass float: a runtime value
                self.use("math")
                return f"tcmath.as_float({text}, {cute_type(e.dtype)})", ATOM
            return f"{cute_type(e.dtype)}({text})", ATOM
        if isinstance(e, N.Select):
            known = decided(e.cond, self.ranges)  # CuTe's select_ takes a runtime condition only
            if known is not None:
                return self._expr(e.a if known else e.b)
            text = f"{self.select_fn(e.cond)}({self.expr(e.cond)}, {self.expr(e.a)}, {self.expr(e.b)})"
            if N.is_int(e.dtype):
                # cutlass.select_ gives an MLIR value without a sign: a conversion of it
                # would extend it by the target's sign (a uint8 to Int32 sign-extended) and
                # a float conversion is refused, so the value is named with its own type
                # (an int4 / uint4 code's is its register type, a Uint8)
                text = f"{register_type(e.dtype)}({text})"
            return text, ATOM
        if isinstance(e, N.Load):
            return self.load(e), ATOM
        if isinstance(e, N.Call):
            held = self.held(e)
            if held is not None:
                return held, ATOM
            form = _CALLS.get(e.name)
            if form is not None:
                return form(self, e)
            if e.name in MATH:
                return self._math(e), ATOM
            if e.name == "div_approx":  # (float32: the fast-math pass's)
                # (CUDA's __fdividef: x times rcp.approx.ftz of y; the reciprocal of a
                # row's statistic is computed once for the row's elements)
                x = self.operand(e.args[0], PREC["mul"])
                return f"{x} * cute.arch.rcp_approx({self.expr(e.args[1])})", PREC["mul"]
            if e.name in APPROX:
                x = self.expr(N.Cast("float32", e.args[0]) if e.args[0].dtype != "float32"
                              else e.args[0])
                value = APPROX[e.name].format(x=f"({x})" if " " in x else x)
                return (value if e.dtype == "float32" else f"{cute_type(e.dtype)}({value})"), ATOM
        self.fail(None, f"expression {type(e).__name__} {getattr(e, 'name', '')} has no CuTe DSL form")

    def _fp4_cast(self, e: N.Cast) -> str:
        """A cast from or to float4_e2m1fn (``runtime.cute.fp4``): from, the code's exact
        Float32 converted on; to, the value rounded to the nearest code (float64 compared
        as float64, every other dtype through Float32, which holds it exactly or, for
        wide integers, rounds it where E2M1 saturates anyway)."""
        self.use("fp4")
        if e.value.dtype == FP4:
            value = f"tcfp4.decode({self.expr(e.value)})"
            return value if e.dtype == "float32" else f"{cute_type(e.dtype)}({value})"
        x = e.value if e.value.dtype in ("float32", "float64") else N.Cast("float32", e.value)
        return f"tcfp4.encode({self.expr(x)})"

    def _int4_cast(self, e: N.Cast) -> str:
        """A cast from or to int4 / uint4 (``runtime.cute.fp4``): from, the code sign- (or
        zero-) extended to an Int32 converted on; to, the value's Int32 (a float truncated
        toward zero, as C converts it) kept to its low 4 bits.  (Between int4 and uint4:
        the same code; to bool, whether the code is nonzero.)"""
        self.use("fp4")
        if e.value.dtype in INTS4 and e.dtype in INTS4:
            return self.expr(e.value)
        if e.value.dtype in INTS4:
            if e.dtype == "bool":  # nonzero: a nonzero code
                return f"({self.expr(e.value)} != 0)"
            if e.dtype != "int32":  # the code's Int32, converted on as an int32 is
                return self.expr(N.Cast(e.dtype, N.Cast("int32", e.value)))
            return f"tcfp4.decode_{e.value.dtype}({self.expr(e.value)})"
        return f"tcfp4.encode_int4({self.expr(N.Cast('int32', e.value))})"

    def _e8m0_cast(self, e: N.Cast) -> str:
        """A cast from or to float8_e8m0fnu (``runtime.cute.e8m0``, CUDA's conversions as
        TileLang's ``fp8_e8_t`` makes them): from, the code's exact Float32 converted on;
        to, the magnitude rounded up to a power of two (float64 and integers from Float64,
        which holds a 32-bit integer exactly; every other dtype through Float32)."""
        if e.dtype == e.value.dtype:
            return self.expr(e.value)
        self.use("e8m0")
        if e.value.dtype == E8M0:
            value = f"tce8m0.decode({self.expr(e.value)})"
            if e.dtype == FP4:
                self.use("fp4")
                return f"tcfp4.encode({value})"
            return value if e.dtype == "float32" else f"{cute_type(e.dtype)}({value})"
        wide = "float64" if e.value.dtype == "float64" or N.is_int(e.value.dtype) else "float32"
        if e.value.dtype == FP4:
            x = N.Cast("float32", e.value)
        else:
            x = e.value if e.value.dtype == wide else N.Cast(wide, e.value)
        return f"tce8m0.encode({self.expr(x)})"

    def _nonnegative_mod(self, e: N.BinOp) -> bool:
        (alo, _), (blo, _) = value_range(e.a, self.ranges), value_range(e.b, self.ranges)
        return alo is not None and alo >= 0 and blo is not None and blo > 0

    def _math(self, e: N.Call) -> str:
        # 16- and 8-bit float math runs in float32 (C converts a half or fp8 argument to
        # float; CuTe DSL's math functions take no fp8 value at all)
        wide = N.is_float(e.args[0].dtype) and DTYPES[e.args[0].dtype].bits < 32
        args = ", ".join(self.expr(N.Cast("float32", x) if wide else x) for x in e.args)
        value = f"{MATH[e.name]}({args})"
        if e.dtype == "bool" or wide:
            return f"{cute_type(e.dtype)}({value})"
        return value

    # ---- intrinsics that are not one function call --------------------------------------
    def _thread_idx(self, e: N.Call):
        return THREAD_IDX[int(e.args[0].value)], ATOM

    def _ceildiv(self, e: N.Call):
        a, b = self.operand(e.args[0], PREC["add"]), self.operand(e.args[1], ATOM)
        return f"({a} + {b} - 1) // {b}", PREC["floordiv"]

    def _fma(self, e: N.Call):
        a, b, c = (self.operand(x, PREC["mul"] + 1) for x in e.args)
        return f"{a} * {b} + {c}", PREC["add"]

    def _shuffle(self, e: N.Call):
        """``cute.arch.shuffle_sync_*`` (``shfl.sync``), with CUDA's ``__shfl_*_sync``
        segment/clamp word for ``width``-lane groups."""
        value, lane, width, mask = e.args
        fn = {"shfl_xor": "bfly", "shfl_down": "down", "shfl_up": "up", "shfl_sync": ""}[e.name]
        clamp = 0 if e.name == "shfl_up" else 31
        if isinstance(width, N.Const):
            word = str(((32 - int(width.value)) << 8) | clamp)
        else:
            word = f"((32 - {self.operand(width, PREC['sub'] + 1)}) << 8) | {clamp}"
        args = [self.expr(value), f"offset={self.expr(lane) if not isinstance(lane, N.Const) else int(lane.value)}",
                f"mask_and_clamp={word}"]
        if not (isinstance(mask, N.Const) and int(mask.value) == 0xFFFFFFFF):
            args.append(f"mask={self.expr(mask) if not isinstance(mask, N.Const) else int(mask.value)}")
        return f"cute.arch.shuffle_sync{'_' + fn if fn else ''}({', '.join(args)})", ATOM

    def _warp_reduce(self, e: N.Call):
        """``tcr.warp_allreduce`` over the 32 lanes (``shfl.sync.bfly`` offsets 16 .. 1)."""
        self.use("reduce")
        kind = e.name[len("warp_reduce_"):]
        return f'tcr.warp_allreduce({self.expr(e.args[0])}, "{kind}", 32)', ATOM

    def _vote(self, e: N.Call):
        """Warp votes: ``cute.arch.vote_*_sync`` (``vote.sync``), ``activemask``; the ballot
        and the active mask zero-extended to a uint64 (as TileLang's CUDA codegen)."""
        if e.name == "activemask":
            return "cutlass.Uint64(cute.arch.activemask())", ATOM
        mask, pred = e.args
        args = [self.expr(pred)]
        if not (isinstance(mask, N.Const) and int(mask.value) == 0xFFFFFFFF):
            args.append(f"mask={self.expr(mask) if not isinstance(mask, N.Const) else int(mask.value)}")
        fn = e.name[len("vote_"):]
        call = f"cute.arch.vote_{fn}_sync({', '.join(args)})"
        if fn == "ballot":
            return f"cutlass.Uint64(cutlass.Uint32({call}))", ATOM
        return f"cutlass.Int32({call})", ATOM

    def _block_vote(self, e: N.Call):
        """``tcvote.syncthreads_*`` (``bar.red``) on the barrier of the body's threads."""
        self.use("vote")
        bid, threads = self.block_barrier()
        return f"tcvote.{e.name}({self.expr(e.args[0])}, {bid}, {threads})", ATOM

    def _elect(self, e: N.Call):
        """``tcvote.elect_one_sync(warp_chosen)``: ``elect.sync``'s lane of a chosen warp."""
        self.use("vote")
        chosen = e.args[0]
        arg = "" if isinstance(chosen, N.Const) and chosen.value else self.expr(chosen)
        return f"tcvote.elect_one_sync({arg})", ATOM

    def _exp10(self, e: N.Call):
        """``10 ** x`` as ``powf(10, x)`` (CUDA's exp10f is libdevice's, which CuTe DSL does
        not expose; ``exp2(x * log2(10))`` would lose bits of ``x * log2(10)``)."""
        x = e.args[0]
        value = f"cute.math.pow(cutlass.Float32(10.0), {self.expr(N.cast(x, 'float32'))})"
        return (value if e.dtype == "float32" else f"{cute_type(e.dtype)}({value})"), ATOM

    def _by_negative_constant(self, e: N.BinOp):
        """``a // -c`` and ``a % -c`` (floor division and modulo, ``c`` > 0) through ``q = a // c``
        and ``r = a % c`` (``r`` in ``[0, c)``): ``0 - q - (r != 0)`` and ``r - c if r != 0 else 0``.
        CuTe DSL's ``arith.floordivsi`` by a negative constant of a loop index gave wrong
        quotients on an H200 (``i // -2`` for ``i`` in ``cutlass.range(2, 7)``: -2 at 5 and 6;
        the fuzzer's scalar form), while floor division by a positive constant is right.  No
        step overflows: ``0 - a`` would wrap for the dtype's minimum (``INT64_MIN // -3`` came
        out negative)."""
        t = e.dtype
        c, zero, one = N.Const(-int(e.b.value), t), N.Const(0, t), N.Const(1, t)
        q, r = N.BinOp("floordiv", e.a, c, t), N.BinOp("mod", e.a, c, t)
        nonzero = N.Cmp("ne", r, zero)
        if e.op == "floordiv":
            neg_q = N.BinOp("sub", zero, q, t)
            return self._expr(N.BinOp("sub", neg_q, N.Select(nonzero, one, zero, t), t))
        return self._expr(N.Select(nonzero, N.BinOp("sub", r, c, t), zero, t))

    def select_fn(self, cond: N.Expr) -> str:
        """``cutlass.select_``, which takes a runtime condition only; where the condition
        may be a Python bool in the generated code (:meth:`python_kind`: of constant-unrolled
        loop indices, alone or short-circuiting an ``and`` / ``or``), ``tcmath.select``."""
        if not self.maybe_python(cond):
            return "cutlass.select_"
        self.use("math")
        return "tcmath.select"

    def bind(self, name: str, kind: "Py") -> None:
        """Record what the name ``name`` is bound to in the generated code (a loop's index,
        a Let's value): a Python value, maybe one, or a cutlass value."""
        if kind is Py.CUTLASS:
            self.python.pop(name, None)
        else:
            self.python[name] = kind

    def python_kind(self, e: N.Expr) -> "Py":
        """Whether ``e`` is a Python value in the generated code (a number or bool while the
        kernel is traced, or a cutlass number holding one), maybe one, or surely a cutlass
        value: constants and the names of :attr:`python` are Python values; a load, a name of
        a run-time value (a block or thread index, a run-time loop's index, a scalar
        parameter) and a call (but ``PYTHON_CALLS`` and an integer abs) are cutlass values;
        an operator, a cast to an integer or float64 and a select (``tcmath.select`` of a
        Python condition picks a branch; a condition known here prints that branch alone)
        are Python values where all their operands are.  The one rule for the printing that
        depends on it: ``tcmath.select`` for a condition that may be a Python bool, a float
        cast of a Python number through ``tcmath.as_float``, clz / reinterpret naming the
        type of an operand that may be a Python number."""
        if isinstance(e, N.Const):
            return Py.PYTHON
        if isinstance(e, N.Var):
            return self.python.get(e.name, Py.CUTLASS)
        if isinstance(e, N.Load):
            return Py.CUTLASS
        if isinstance(e, N.Call) and not (e.name in PYTHON_CALLS or _int_abs(e)):
            return Py.CUTLASS  # (T.get_thread_binding's thread_idx, math ...)
        if isinstance(e, N.Select):
            known = decided(e.cond, self.ranges)  # (printed as the branch it picks)
            if known is not None:
                return self.python_kind(e.a if known else e.b)
        kids = [self.python_kind(x) for f in dataclasses.fields(e) if f.name != "loc"
                for x in _exprs(getattr(e, f.name))]
        if isinstance(e, N.Logic):
            # Python's `a and b` is `a` where `a` is a Python false value, else `b` (CuTe
            # DSL's preprocessor: `and_(a, b)`): one Python operand may make either
            return Py.MAYBE if any(k is not Py.CUTLASS for k in kids) else Py.CUTLASS
        kind = min(kids)  # (all Python: Python; any cutlass: cutlass)
        if isinstance(e, N.Cast) and not (N.is_int(e.dtype) or e.dtype == "float64"):
            # (a cutlass integer or Float64 holds a Python number; a cast that tcmath.as_float
            # makes a run-time value, a bool's or an fp4 / e8m0 helper's: maybe one)
            return min(kind, Py.MAYBE)
        return kind

    def maybe_python(self, e: N.Expr) -> bool:
        """Whether ``e`` may be a Python value in the generated code (:meth:`python_kind`)."""
        return self.python_kind(e) is not Py.CUTLASS

    def surely_python(self, e: N.Expr) -> bool:
        """Whether ``e`` is surely a Python value in the generated code
        (:meth:`python_kind`)."""
        return self.python_kind(e) is Py.PYTHON

    def _integer(self, e: N.Call):
        """C's ``/`` and ``%`` (``runtime.cute.math``), ``popc``, ``clz`` (an int32)."""
        if _width_sensitive(e):  # of a promoted value: C's quotient, at the narrow width
            return f"{cute_type(e.dtype)}({self.promoted(e, 0)})", ATOM
        if e.name in ("truncdiv", "truncmod"):
            self.use("math")
            a, b = e.args
            if e.dtype in ("int32", "int64") and isinstance(b, N.Const) and \
                    -(1 << (DTYPES[e.dtype].bits - 1)) < b.value < 0:
                # C's a % c is a % -c, and a / c is -(a / -c): CuTe DSL's arith.remsi by a
                # negative constant of a loop index gave wrong remainders on an H200 (the
                # fuzzer's scalar form, seed 520: T.truncmod(i, -2) over T.serial(6)), as
                # its floordivsi did (:meth:`_by_negative_constant`)
                text = f"tcmath.{e.name}({self.expr(a)}, {-int(b.value)})"
                return (text, ATOM) if e.name == "truncmod" else (f"0 - {text}", PREC["sub"])
            return f"tcmath.{e.name}({', '.join(self.expr(x) for x in e.args)})", ATOM
        args = ", ".join(self.expr(x) for x in e.args)
        if e.name == "popcount":
            return f"cute.arch.popc({args})", ATOM
        if self.maybe_python(e.args[0]):  # (clz refuses a Python int: a constant-unrolled index)
            args = f"{cute_type(e.args[0].dtype)}({args})"
        return f"cutlass.Int32(cute.arch.clz({args}))", ATOM

    def _reinterpret(self, e: N.Call):
        """The argument's bits as the result's dtype (``arith.bitcast``)."""
        self.use("math")
        x, text = e.args[0], self.expr(e.args[0])
        if self.maybe_python(x):  # (named with its type: a Python int or float has no bits)
            text = f"{cute_type(x.dtype)}({text})"
        return f"tcmath.reinterpret({text}, {cute_type(e.dtype)})", ATOM

    def _bitwise_not(self, e: N.Call):
        """``~x`` of an 8- or 16-bit unsigned integer at its own width: ``x ^ all ones``
        (in a conversion or comparison ``ExprPrinter.promoted`` prints C's int value)."""
        x = e.args[0]
        ones = f"{cute_type(e.dtype)}({(1 << DTYPES[e.dtype].bits) - 1})"
        if _width_sensitive(x):
            return f"{cute_type(e.dtype)}({self.promoted(x, PREC['bitxor'])} ^ -1)", ATOM
        return f"{self.operand(x, PREC['bitxor'])} ^ {ones}", PREC["bitxor"]

    def _abs(self, e: N.Call):
        if is_fp8(e.dtype):  # (exact in float32)
            return f"{cute_type(e.dtype)}(cute.math.absf({self.expr(N.cast(e.args[0], 'float32'))}))", ATOM
        if _width_sensitive(e):  # |x| of a promoted x: C's value at the narrow width
            return f"{cute_type(e.dtype)}({self.promoted(e, 0)})", ATOM
        fn = "cute.math.absf" if N.is_float(e.dtype) else "abs"
        return f"{fn}({self.expr(e.args[0])})", ATOM


    def _tcmath(self, e: N.Call):
        """``runtime.cute.math``'s helper of the same name (TVM's ``hypot`` / ``nextafter`` /
        ``ldexp``, TileLang's IEEE forms with their rounding mode, ``__ffs``, ``__fns``)."""
        self.use("math")
        args = [self.expr(x) for x in e.args]
        if e.name in N.IEEE_FORMS and e.name != "ieee_frsqrt":
            args[-1] = f'"{N.IEEE_ROUNDINGS[int(e.args[-1].value)]}"'
        return f"tcmath.{e.name}({', '.join(args)})", ATOM

    def _match(self, e: N.Call):
        """``tcmath.match_sync(value, mask, kind)``: ``match.{any,all}.sync``."""
        self.use("math")
        value, mask = (self.expr(x) for x in e.args)
        return f'tcmath.match_sync({value}, {mask}, "{e.name[len("match_"):]}")', ATOM

    def _atomic_load(self, e: N.Call):
        """``tca.atomic_load(tensor, coord, order)``: the global (or shared) element's
        ``ld.{relaxed, acquire}.gpu`` (seq_cst: after ``fence.sc.gpu``); the Load names the
        element."""
        self.use("atomic")
        src, order = e.args
        coord = self.index_tuple(src.indices)
        coord = f"({coord},)" if len(src.indices) == 1 else f"({coord})"
        return (f'tca.atomic_load({ident(src.buffer)}, {coord}, '
                f'"{N.MEMORY_ORDERS[int(order.value)]}")'), ATOM

    def _atomic_return(self, e: N.Call):
        """``tca.atomic_fetch(tensor, coord, value, op)``: the element's ``atom`` (``.gpu``
        global, ``.cta`` shared), whose result is the element's value before it; a memory
        order other than relaxed is passed as ``order=``."""
        self.use("atomic")
        dst, value, order = e.args
        order = N.MEMORY_ORDERS[int(order.value)]
        coord = self.atomic_coord(dst.buffer, dst.indices)
        op = e.name[len("atomic_"):-len("_ret")]
        # a uint buffer's tensor has signless Int elements: its max / min is told unsigned
        unsigned = ", unsigned=True" if op != "add" and e.dtype in ("uint32", "uint64") else ""
        ordered = f', order="{order}"' if order != "relaxed" else ""
        if self.fetch_once is not None:  # (TileLang's one atomic per element, its value to all)
            owner, lane, mask = self.fetch_once
            return (f'tca.atomic_fetch_once({ident(dst.buffer)}, {coord}, {self.expr(value)}, '
                    f'"{op}", {owner}, {lane}, {mask}{unsigned}{ordered})'), ATOM
        return (f'tca.atomic_fetch({ident(dst.buffer)}, {coord}, {self.expr(value)}, "{op}"'
                f'{unsigned}{ordered})'), ATOM

    def _rng(self, e: N.Call):
        """``runtime.cute.rng`` on the kernel's generator state ``tc_rng``."""
        self.use("rng")
        if e.name == "rng_init":
            return f"tcrng.init(tc_rng, {', '.join(self.expr(x) for x in e.args)})", ATOM
        fn = {"rng_rand": "rand", "rng_uniform": "uniform", "rng_normal": "normal"}[e.name]
        return f"tcrng.{fn}{'_double' if e.dtype == 'float64' else ''}(tc_rng)", ATOM


# intrinsic -> its printer (text, precedence); the others are MATH's one-argument calls
_CALLS = {"thread_idx": ExprPrinter._thread_idx, "ceildiv": ExprPrinter._ceildiv,
          "pdl_sync": lambda self, e: ("cute.arch.griddepcontrol_wait()", ATOM),
          "pdl_trigger": lambda self, e: ("cute.arch.griddepcontrol_launch_dependents()", ATOM),
          "fence_proxy_async": lambda self, e: ('cute.arch.fence_proxy("async.shared", space="cta")',
                                                ATOM),
          "ptx_commit_group": lambda self, e: ("cute.arch.cp_async_commit_group()", ATOM),
          "ptx_wait_group": lambda self, e: (f"cute.arch.cp_async_wait_group({e.args[0].value})",
                                             ATOM),
          "fma": ExprPrinter._fma, "abs": ExprPrinter._abs, "bitwise_not": ExprPrinter._bitwise_not, "exp10": ExprPrinter._exp10,
          "reinterpret": ExprPrinter._reinterpret,
          **{name: ExprPrinter._rng for name in ("rng_init",) + N.RNG_DRAWS},
          **{name: ExprPrinter._integer for name in ("truncdiv", "truncmod", "popcount", "clz")},
          **{name: ExprPrinter._shuffle for name in N.SHUFFLES},
          **{name: ExprPrinter._warp_reduce for name in N.WARP_REDUCTIONS},
          **{name: ExprPrinter._vote for name in N.WARP_VOTES + ("activemask",)},
          **{name: ExprPrinter._block_vote for name in N.BLOCK_VOTES},
          "elect_one_sync": ExprPrinter._elect, "atomic_load": ExprPrinter._atomic_load,
          **{name: ExprPrinter._tcmath
             for name in ("hypot", "nextafter", "ldexp", "ffs", "fns") + N.IEEE_FORMS},
          "fast_rcp": lambda self, e: (f"cute.arch.rcp_approx({self.expr(e.args[0])})", ATOM),
          "match_any": ExprPrinter._match, "match_all": ExprPrinter._match,
          "warp_activemask": lambda self, e: ("cutlass.Uint32(cute.arch.activemask())", ATOM),
          "block_rank_in_cluster": lambda self, e: (
              "cutlass.Int32(cute.arch.block_idx_in_cluster())", ATOM),
          **{name: ExprPrinter._atomic_return for name in N.ATOMIC_RETURNS}}


def flatten_logic(e: N.Logic):
    """The operands of a chain of one ``and`` / ``or`` (nested ones of the same op
    spliced in: ``(a and b) and c`` is one chain of three)."""
    for a in e.args:
        if isinstance(a, N.Logic) and a.op == e.op:
            yield from flatten_logic(a)
        else:
            yield a



def _int64_promoted(e: N.Expr) -> N.Expr:
    """Integer index ``e`` computed in int64: its variables and loads cast to int64, its
    arithmetic int64 (constants stay Python ints, which an Int64 operand widens)."""
    if isinstance(e, N.Const) or not N.is_int(e.dtype) or DTYPES[e.dtype].bits >= 64:
        return e
    if isinstance(e, N.BinOp):
        return N.BinOp(e.op, _int64_promoted(e.a), _int64_promoted(e.b), "int64")
    return N.Cast("int64", e)
