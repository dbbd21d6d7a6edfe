"""TVM's vector values as the parser sees them: ``T.Ramp``, ``T.Broadcast``, loads at a
vector index (a ``T.Ramp`` or a stepped slice), TileLang's vector dtypes called as
constructors (``T.float16x2(a, b)``), ``T.extract_lane`` and the packed x2 math
(``T.add2`` ...).

tilecute's IR has no vector values.  A vector is a parse-time :class:`LaneVector`: one
scalar expression per lane.  Arithmetic on it is lanewise; where it is stored (a
``Store`` at a vector index), the parser writes one scalar ``Store`` per lane, each of
TVM's lanes being that element's value.  Nothing here emits statements; the parser
decides where the lanes are read (a vector read before any of its lanes is written, as
TVM's vector load is).

Imports only the IR nodes, the frontend's dtype values and ``bits`` (whose words, the
value of ``T.ldg64`` and wider, are a vector of their view's lanes here).
"""

from __future__ import annotations

import dataclasses
import re

from ..ir import nodes as N
from . import bits as B
from .values import DTYPES, UnsupportedDType

PACKED_X2_DTYPES = ("float32", "float16", "bfloat16")  # TileLang's _PACKED_X2_DTYPES


class VectorValueError(TypeError):
    """A vector used as a parse-time Python value (its truth, a Python comparison)."""


@dataclasses.dataclass(frozen=True, eq=False)
class LaneVector:
    """A vector of ``len(lanes)`` scalar expressions of one dtype.  ``ramp``: an index
    vector that is a ``T.Ramp`` (TileLang's LegalizeNegativeIndex wraps each of its lanes
    that may be negative at run time, a scalar index only where proved negative)."""

    lanes: tuple
    ramp: bool = False
    broadcast: bool = False

    @property
    def count(self) -> int:
        return len(self.lanes)

    @property
    def element_dtype(self) -> str:
        return self.lanes[0].dtype

    @property
    def dtype(self) -> str:
        """TVM's name of the vector's dtype (``float32x4``), as a program reads it."""
        return f"{self.element_dtype}x{self.count}"

    def _no_python_value(self, *_):
        # a vector is no parse-time value: Python's truth and comparisons of it would be
        # silently wrong (the parser compares vectors lane by lane)
        raise VectorValueError(f"a {self.dtype} vector has no truth value or comparison at "
                               "parse time; compare it lane by lane in an expression, or read "
                               "a lane (T.extract_lane)")

    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _no_python_value
    __hash__ = None

    def __repr__(self) -> str:
        return (f"<a {self.count}-lane {self.element_dtype} vector: tilecute takes it in "
                "lanewise arithmetic, T.add2/sub2/mul2/fma2/max2/min2/abs2, T.extract_lane "
                f"and stores into {self.count} elements>")


def as_vector(x):
    """``x``, or the words of ``T.ldg64(...)`` / ``T.reinterpret(T.ldg64(...),
    T.float32x2)`` (TVM's ``uint32x2`` / ``float32x2`` vector) as the vector of their
    lanes."""
    if isinstance(x, B.Words):
        vec = vector_dtype(x.view)
        scalar = vec[0] if vec is not None else x.view
        return LaneVector(tuple(B.unpack(x.words, scalar)))
    return x


def is_vector(x) -> bool:
    return isinstance(x, (LaneVector, B.Words))


def _lane_count(lanes, what: str) -> int:
    if isinstance(lanes, N.Const) and N.is_int(lanes.dtype):
        lanes = lanes.value
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise TypeError(f"{what}: lanes must be a positive int known at parse time, got "
                        f"{lanes!r}")
    return lanes


def ramp(base, stride, lanes) -> LaneVector:
    """``T.Ramp(base, stride, lanes)``: lane ``k`` is ``base + k * stride``."""
    n = _lane_count(lanes, "T.Ramp")
    if isinstance(base, LaneVector) or isinstance(stride, LaneVector):
        raise TypeError("T.Ramp: base and stride are scalars")
    base, stride, t = N._coerce(base, stride)
    if not N.is_int(t):
        raise TypeError(f"T.Ramp: base and stride are integers, got {t}")
    out = []
    for k in range(n):
        if isinstance(stride, N.Const):
            out.append(offset(base, stride.value * k))
        else:
            out.append(N.binop("add", base, N.binop("mul", stride, N.Const(k, t))) if k
                       else base)
    return LaneVector(tuple(out), ramp=True)


def offset(base: N.Expr, k: int) -> N.Expr:
    """``base + k``, a constant term of ``base`` folded in (``(t - 2) + 1`` is ``t - 1``)."""
    if k == 0:
        return base
    if isinstance(base, N.BinOp) and base.op in ("add", "sub") and \
            isinstance(base.b, N.Const) and base.b.dtype == base.dtype:
        c = (base.b.value if base.op == "add" else -base.b.value) + k
        if c == 0:
            return base.a
        return N.binop("add" if c > 0 else "sub", base.a, N.Const(abs(c), base.dtype))
    return N.binop("add", base, N.Const(k, base.dtype))


def broadcast(value, lanes) -> LaneVector:
    """``T.Broadcast(value, lanes)``: ``lanes`` copies of one scalar."""
    n = _lane_count(lanes, "T.Broadcast")
    if isinstance(value, (LaneVector, list, tuple)) or not isinstance(
            value, (N.Expr, int, float, bool)):
        raise TypeError(f"T.Broadcast: the value is a scalar, got {value!r}")
    return LaneVector((N.as_expr(value),) * n, broadcast=True)


def lanewise(what: str, op: str, fn, *args) -> LaneVector:
    """``fn`` (the scalar ``op``) applied lane by lane; a scalar argument is every lane's
    (TVM broadcasts it); the vectors' lane counts must agree."""
    args = [as_vector(a) for a in args]
    counts = {a.count for a in args if isinstance(a, LaneVector)}
    if len(counts) != 1:
        raise TypeError(f"{what}: vectors of {sorted(counts)} lanes; TVM's vector operands "
                        "have one lane count")
    n = counts.pop()
    out = tuple(fn(*(a.lanes[k] if isinstance(a, LaneVector) else a for a in args))
                for k in range(n))
    vectors = [a for a in args if isinstance(a, LaneVector)]
    if all(v.broadcast for v in vectors):
        return LaneVector(out, broadcast=True)
    # TVM's simplifier keeps a Ramp through + and - of a scalar, a Broadcast or a Ramp,
    # and through * by a scalar or a Broadcast
    ramps = [v for v in vectors if not v.broadcast]
    is_ramp = all(v.ramp for v in ramps) and (op in ("add", "sub") or
                                              op == "mul" and len(ramps) == 1)
    return LaneVector(out, ramp=is_ramp)


def vector_dtype(name: str):
    """``(scalar, lanes)`` of a vector dtype name ``<scalar>x<lanes>`` whose scalar dtype
    tilecute has, of a byte or more (``float16x2``: ``("float16", 2)``), else None (a
    packed sub-byte pair such as ``float4_e2m1fnx2`` is no vector of tilecute's)."""
    m = re.fullmatch(r"(.+)x(\d+)", name)
    if m is None or m.group(1) not in DTYPES or int(m.group(2)) < 2 or DTYPES[m.group(1)].pack > 1:
        return None
    return m.group(1), int(m.group(2))


class VectorDType(UnsupportedDType):
    """``T.float16x2``, ``T.int8x4`` ...: TileLang's vector dtypes.  Called with one value
    per lane (``T.float16x2(a, b)``, TileLang's Shuffle of the scalars) it is a
    :class:`LaneVector`; ``T.alloc_var(T.float16x2)`` is a variable of that many lanes,
    ``T.alloc_local(shape, T.float16x2)`` a local buffer of such vectors.  As the element
    dtype of a parameter or a shared or fragment buffer it stays refused: their layouts
    are chosen for scalars."""

    def __init__(self, name: str):
        super().__init__(name)
        self.scalar, self.lanes = vector_dtype(name)

    def message(self) -> str:
        return (f"T.{self.__name__} is a TileLang vector dtype ({self.lanes} x {self.scalar}); "
                f"tilecute takes it in T.alloc_var, T.alloc_local and as the constructor "
                f"T.{self.__name__}(lane0, lane1, ...) or cast T.{self.__name__}(x), not as "
                "the element dtype of a parameter or a shared or fragment buffer (allocate "
                f"{self.lanes} {self.scalar} elements per vector instead)")

    def __call__(self, *args, **kwargs):
        if kwargs or not args:
            raise TypeError(f"T.{self.__name__}(...) makes a vector of its {self.lanes} lanes "
                            "(one scalar argument each, TileLang's Shuffle) or converts one "
                            f"value; got {len(args)} argument(s)"
                            f"{' and keywords' if kwargs else ''} (a vector variable is "
                            f"T.alloc_var(T.{self.__name__}))")
        if len(args) == 1:  # TVM's cast to a vector dtype: a scalar in every lane, converted
            x = as_vector(args[0])
            if isinstance(x, LaneVector):
                return cast(x, self, None)
            if not isinstance(x, (N.Expr, int, float, bool)):
                raise TypeError(f"T.{self.__name__}({x!r}): expected a scalar or a vector")
            return LaneVector((N.cast(N.as_expr(x, self.scalar), self.scalar),) * self.lanes,
                              broadcast=True)
        if len(args) != self.lanes:
            raise TypeError(f"T.{self.__name__}(...) takes {self.lanes} lanes, got {len(args)}")
        if any(isinstance(a, LaneVector) or not isinstance(a, (N.Expr, int, float, bool))
               for a in args):
            raise TypeError(f"T.{self.__name__}(...): each lane is a scalar, got {args!r}")
        lanes = tuple(N.as_expr(a, self.scalar) if not isinstance(a, N.Expr) else a
                      for a in args)
        if any(a.dtype != self.scalar for a in lanes):
            raise TypeError(f"T.{self.__name__}(...): lanes of dtypes "
                            f"{[a.dtype for a in lanes]}; TileLang's Shuffle makes a vector "
                            "of its arguments' dtype, which must be "
                            f"{self.scalar} here: cast them (T.{self.scalar}(x))")
        return LaneVector(lanes)

    def __repr__(self) -> str:
        return (f"<T.{self.__name__}: a TileLang vector dtype, which tilecute takes in "
                f"T.alloc_var, T.alloc_local and T.{self.__name__}(...) only>")


def cast(vector: LaneVector, dtype, dtype_name) -> LaneVector:
    """TVM's cast of a vector: each lane to the scalar dtype (``float32`` or
    ``float32x<lanes>``)."""
    name = dtype.__name__ if isinstance(dtype, VectorDType) else str(dtype)
    vec = vector_dtype(name)
    if vec is not None and vec[1] != vector.count:
        raise TypeError(f"cannot cast a {vector.dtype} vector to {name}: the lane counts differ")
    scalar = vec[0] if vec is not None else dtype_name(dtype)
    return dataclasses.replace(vector, lanes=tuple(N.cast(x, scalar) for x in vector.lanes),
                               ramp=False)


def extract_lane(vector, lane) -> N.Expr:
    """``T.extract_lane(v, k)``: lane ``k`` (an int known at parse time) of a vector."""
    vector = as_vector(vector)
    if not isinstance(vector, LaneVector):
        raise TypeError(f"T.extract_lane expects a vector expression, got {vector!r}")
    if isinstance(lane, N.Const) and N.is_int(lane.dtype):
        lane = lane.value
    if isinstance(lane, bool) or not isinstance(lane, int):
        raise TypeError(f"T.extract_lane expects a compile-time integer lane, got {lane!r}")
    if not 0 <= lane < vector.count:
        raise IndexError(f"Lane index {lane} is out of bounds for dtype {vector.dtype} with "
                         f"{vector.count} lanes")
    return vector.lanes[lane]


def shuffle(vectors, indices):
    """TVM's ``T.Shuffle(vectors, indices)``: the lanes of ``vectors`` (vectors and scalars,
    their lanes one after another) picked by ``indices`` (ints known at parse time); one
    index gives a scalar."""
    if not isinstance(vectors, (list, tuple)) or not isinstance(indices, (list, tuple)) or \
            not indices:
        raise TypeError("T.Shuffle takes a list of vectors (or scalars) and a non-empty list "
                        f"of lane indices, got {vectors!r}, {indices!r}")
    lanes = []
    for v in vectors:
        v = as_vector(v)
        if isinstance(v, LaneVector):
            lanes.extend(v.lanes)
        elif isinstance(v, (N.Expr, int, float, bool)):
            lanes.append(N.as_expr(v))
        else:
            raise TypeError(f"T.Shuffle: {v!r} is no vector or scalar")
    if len({x.dtype for x in lanes}) != 1:
        raise TypeError(f"T.Shuffle: lanes of dtypes {sorted({x.dtype for x in lanes})}; TVM's "
                        "Shuffle takes one element dtype")
    picked = []
    for i in indices:
        i = i.value if isinstance(i, N.Const) and N.is_int(i.dtype) else i
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(lanes):
            raise IndexError(f"T.Shuffle: lane index {i!r} is not an int in 0..{len(lanes) - 1}")
        picked.append(lanes[i])
    return picked[0] if len(picked) == 1 else LaneVector(tuple(picked))


def _packed(name: str, args) -> None:
    """TileLang's _validate_packed_x2_args: each argument a float32x2, float16x2 or
    bfloat16x2 vector, all of one dtype."""
    for a in args:
        if not isinstance(a, LaneVector):
            raise TypeError(f"T.{name} takes float32x2 / float16x2 / bfloat16x2 vectors "
                            f"(e.g. loads at a T.Ramp(base, 1, 2) index), got {a!r}")
        if a.count != 2 or a.element_dtype not in PACKED_X2_DTYPES:
            raise ValueError(f"T.{name}: expected dtype in ['bfloat16x2', 'float16x2', "
                             f"'float32x2'], got '{a.dtype}'")
    if len({a.dtype for a in args}) > 1:
        raise ValueError(f"T.{name}: expected all packed x2 arguments to have the same dtype, "
                         f"got {[a.dtype for a in args]}")


def packed_x2(name: str, scalar_op, *args) -> LaneVector:
    """TileLang's ``T.<name>(*args)`` (packed x2 math, ``tl::<name>``): ``scalar_op`` on
    each of the two lanes, in the lanes' dtype."""
    args = tuple(as_vector(a) for a in args)
    _packed(name, args)
    return LaneVector(tuple(N.cast(scalar_op(*(a.lanes[k] for a in args)),
                                   args[0].element_dtype) for k in range(2)))
