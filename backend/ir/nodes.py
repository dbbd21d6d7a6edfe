"""The tile IR: frozen dataclasses for expressions, statements, buffers, tile ops,
kernel scopes and functions.

Every node is an immutable value; passes build new nodes.  Types are canonical dtype
names (``"float16"``, ``"int32"`` ...; see ``tilecute.runtime.dtypes``).  Statements
carry a source location (``loc``) that is not part of their identity, so the printer's
output re-parsed gives an equal IR.

Imports nothing heavy: no CUTLASS, no torch.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Optional, Union

from ..runtime.abi import TmaSpec
from ..runtime.dtypes import DTYPES, canonical_dtype

INDEX = "int32"  # dtype of extents, indices, loop and thread variables
# dtypes of a buffer's dims and of symbols: TileLang's T.dynamic("n", "int64") and static
# dims past int32 are int64 (block and loop variables over them too)
DIM_DTYPES = ("int32", "int64")


@dataclass(frozen=True)
class Loc:
    """Where a node came from in the frontend source; ``form``: for a statement a pass made
    from a tile op (the parallel nest of a ``T.copy``), that op as the printer writes it, so
    that a later pass's error names the form the program wrote."""

    file: str
    line: int
    form: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _loc() -> Optional[Loc]:
    return field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------
class Expr:
    """Base of expressions. Arithmetic operators build IR (used by ``T.*`` helpers and by
    the plain Python functions a kernel calls, which TileLang runs on TVM ``PrimExpr``s);
    so do the ordering comparisons ``< <= > >=`` (TVM's ``LT``...).  ``==``/``!=`` are
    structural equality, except while a kernel's plain Python helper runs
    (:func:`primexpr_equality`): there they build a ``Cmp`` as TVM's ``EqualOp`` /
    ``NotEqualOp`` do, whose truth in a Python ``if`` is still structural equality."""

    dtype: str

    def __bool__(self):
        """The truth of an expression in Python (``if e:``, ``e and f``, ``max(a, b)``): True,
        except while a kernel's plain Python helper runs, where TileLang runs the helper on
        TVM ``PrimExpr``s and ``bool()`` of a run-time value is TVM's ValueError (the
        helper's ``if a > 0:`` or ``max(a, b)`` would otherwise take one branch for every
        value); a constant is its value, a helper's ``==``/``!=`` its structural
        (in)equality (:class:`Cmp`)."""
        if _PRIMEXPR_EQ[0]:
            raise ValueError(_HELPER_BOOL)
        return True

    def __ne__(self, o):
        if _PRIMEXPR_EQ[0] and isinstance(o, (Expr, int, float)):
            return _equal_op("ne", self, o)
        eq = self.__eq__(o)
        return eq if eq is NotImplemented else not eq

    def __add__(self, o): return binop("add", self, o)
    def __radd__(self, o): return binop("add", o, self)
    def __sub__(self, o): return binop("sub", self, o)
    def __rsub__(self, o): return binop("sub", o, self)
    def __mul__(self, o): return binop("mul", self, o)
    def __rmul__(self, o): return binop("mul", o, self)
    def __floordiv__(self, o): return binop("floordiv", self, o)
    def __rfloordiv__(self, o): return binop("floordiv", o, self)
    def __truediv__(self, o): return binop("div", self, o)
    def __rtruediv__(self, o): return binop("div", o, self)
    def __mod__(self, o): return binop("mod", self, o)
    def __rmod__(self, o): return binop("mod", o, self)
    def __neg__(self): return binop("sub", const(0, self.dtype), self)
    # integer bit operations (TVM's PrimExpr has them: `T.int32() & 0x7FFFFFFF` in Python)
    def __and__(self, o): return _int_binop("bitand", self, o)
    def __rand__(self, o): return _int_binop("bitand", o, self)
    def __or__(self, o): return _int_binop("bitor", self, o)
    def __ror__(self, o): return _int_binop("bitor", o, self)
    def __xor__(self, o): return _int_binop("bitxor", self, o)
    def __rxor__(self, o): return _int_binop("bitxor", o, self)
    # shifts, on the operands' (promoted) integer dtype: logical on unsigned, arithmetic
    # on signed, as TVM's `>>` (a Python helper's `(val >> (pos * 4)) & mask`)
    def __lshift__(self, o): return _int_binop("shl", self, o)
    def __rlshift__(self, o): return _int_binop("shl", o, self)
    def __rshift__(self, o): return _int_binop("shr", self, o)
    def __rrshift__(self, o): return _int_binop("shr", o, self)
    # ordering comparisons build a ``Cmp`` (a helper's `T.if_then_else(x < 0, ...)`); a
    # reflected one (`0 > x`) comes here with the operands swapped, as Python calls it
    def __lt__(self, o): return cmp("lt", self, o)
    def __le__(self, o): return cmp("le", self, o)
    def __gt__(self, o): return cmp("gt", self, o)
    def __ge__(self, o): return cmp("ge", self, o)

    def __invert__(self):
        """``~x``: on integers every bit flipped (``x ^ -1``, all ones for unsigned), on a
        bool ``not`` (TVM's one-bit bool)."""
        if self.dtype == "bool":
            return Not(self)
        if not is_int(self.dtype):
            raise TypeError(f"~ on {self.dtype}: Python's ~ on expressions takes integers")
        return bitwise_not(self)

    def astype(self, dtype) -> "Expr":
        """TVM's ``PrimExpr.astype(dtype)``: a cast (``T.uint8``, a name or a torch dtype)."""
        text = str(dtype)
        return cast(self, canonical_dtype(text[6:] if text.startswith("torch.") else text))


@dataclass(frozen=True)
class Var(Expr):
    """A named scalar: loop/block variable, symbolic extent, scalar param, let binding.
    Names are unique within a function (the frontend renames shadowing bindings)."""

    name: str
    dtype: str = INDEX
    # symbols only: a divisor every launch promises (the launcher checks it); lets the
    # vectorizer prove that rows strided by this symbol stay 16-byte aligned
    multiple: int = 1


@dataclass(frozen=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: str

    def __bool__(self):
        return bool(self.value)


BINOPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max",
          "bitand", "bitor", "bitxor", "shl", "shr")
CMPOPS = ("lt", "le", "gt", "ge", "eq", "ne")


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # one of BINOPS
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Cmp(Expr):
    op: str  # one of CMPOPS
    a: Expr
    b: Expr
    dtype: str = "bool"

    def __bool__(self):
        """A comparison a helper's ``==``/``!=`` built is, while the helper runs, its
        operands' structural (in)equality, as ``bool()`` of TVM's ``EqualOp``; an ordering
        comparison there is TVM's ValueError (:meth:`Expr.__bool__`); elsewhere True."""
        truth = self.__dict__.get("_structural")
        if truth is not None and _PRIMEXPR_EQ[0]:
            return truth
        return Expr.__bool__(self)


@dataclass(frozen=True)
class Logic(Expr):
    op: str  # "and" | "or"
    args: tuple[Expr, ...]
    dtype: str = "bool"


@dataclass(frozen=True)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Load(Expr):
    buffer: str
    indices: tuple[Expr, ...]
    dtype: str


# intrinsic name -> number of arguments
INTRINSICS = {
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1,
    "sin": 1, "cos": 1, "abs": 1, "floor": 1, "ceil": 1, "fma": 3, "ceildiv": 2,
    "thread_idx": 1,
    # TileLang's T.block_rank_in_cluster(): the block's rank in its cluster (%cluster_ctarank)
    "block_rank_in_cluster": 0,
    # TileLang's T.assume(cond) inside a kernel (a statement, T.evaluate of it): ``cond``
    # (bool) holds from there to the end of the enclosing body; it emits no code, the bounds
    # checks take it as a fact (TileLang's assume, trusted by LegalizeSafeMemoryAccess)
    "assume": 1,
    # TVM's tir math (TileLang's T.tan ...): float argument(s), the argument's dtype;
    # round: halfway cases to even (TVM's round), round_ties_away_from_zero: C's roundf
    "tan": 1, "atan": 1, "acos": 1, "asin": 1, "sinh": 1, "cosh": 1, "erf": 1, "log10": 1,
    "log1p": 1, "exp10": 1, "trunc": 1, "round": 1, "round_ties_away_from_zero": 1,
    "pow": 2, "fmod": 2, "atan2": 2,
    # float predicates: bool
    "isnan": 1, "isinf": 1, "isfinite": 1,
    # integers: C's / and % (truncating; the BinOps floordiv and mod floor), the number
    # of set bits (the argument's dtype), leading zeros of a 32/64-bit integer (int32)
    "truncdiv": 2, "truncmod": 2, "popcount": 1, "clz": 1,
    # ~x of an 8- or 16-bit unsigned integer (TVM's bitwise_not, C's ~ of the value promoted
    # to int: ~200 is -201 where it is converted or compared, 55 stored back as uint8); the
    # other integers' ~x is the BinOp x ^ -1 (bitwise_not below)
    "bitwise_not": 1,
    # the fast-math pass's approximations (ex2.approx.ftz / lg2.approx.ftz: flush
    # subnormals, ~2 ulp): exp2(x), exp(x) as exp2(x * log2 e), log2(x), log(x) as
    # log2(x) * ln 2
    "exp2_approx": 1, "exp_approx": 1, "log2_approx": 1, "log_approx": 1,
    # and float32 division x / y as nvcc's --use_fast_math makes it (CUDA's __fdividef:
    # x times rcp.approx.ftz of y, ~2 ulp; 0 for |y| above 2**126)
    "div_approx": 2,
    # TileLang's T.__exp10 / __log10 / __sin / __cos / __tan (CUDA's fast intrinsics):
    # exp10(x) as exp2 of x * log2 10, log10(x) as log2(x) * log10 2, sin.approx.ftz,
    # cos.approx.ftz, and their quotient
    "exp10_approx": 1, "log10_approx": 1, "sin_approx": 1, "cos_approx": 1, "tan_approx": 1,
    # warp shuffles (TileLang's T.shfl_*): (value, lane delta / source lane, width, mask);
    # the value of lane ``lane ^ delta`` / ``lane + delta`` / ``lane - delta`` / ``src``
    # within groups of ``width`` lanes (CUDA's __shfl_*_sync)
    "shfl_xor": 4, "shfl_down": 4, "shfl_up": 4, "shfl_sync": 4,
    # warp all-reductions (TileLang's T.warp_reduce_*): every lane of the warp gets the
    # sum / max / min / and / or of the 32 lanes' values (all 32 lanes must run it)
    "warp_reduce_sum": 1, "warp_reduce_max": 1, "warp_reduce_min": 1,
    "warp_reduce_bitand": 1, "warp_reduce_bitor": 1,
    # TileLang's T.reinterpret(value, dtype): the argument's bits read as the result's
    # dtype, of the same width (a bit cast, no conversion)
    "reinterpret": 1,
    # TileLang's T.pdl_sync() / T.pdl_trigger() (statements, T.evaluate of these calls):
    # wait for the previous grid's memory (griddepcontrol.wait) / let the next grid on the
    # stream start launching (griddepcontrol.launch_dependents); Programmatic Dependent
    # Launch, sm_90+ (the programmatic_launch pass drops them on older targets)
    "pdl_sync": 0, "pdl_trigger": 0,
    # TileLang's T.fence_proxy_async() (a statement): this thread's shared-memory writes
    # become visible to the async proxy (wgmma, TMA) before its later async operations
    # (fence.proxy.async.shared::cta; sm_90+)
    "fence_proxy_async": 0,
    # TileLang's T.sync_grid() (a statement): the grid-wide barrier; its kernel launches
    # cooperatively and takes the launcher's barrier word (the launch ABI's grid_barrier)
    "sync_grid": 0,
    # TileLang's T.rng_init(seed, seq, off) (a statement): this thread's Philox4x32-10
    # generator (runtime/cute/rng.py) keyed by the seed, at subsequence seq and offset off
    # (int64s); T.rng_rand(): its next uint32 draw; T.rng_rand_float(): rng_uniform, a
    # float32/float64 in (0, 1], or rng_normal, a standard normal (by the call's dtype)
    "rng_init": 3, "rng_rand": 0, "rng_uniform": 0, "rng_normal": 0,
    # warp votes (TileLang's T.any_sync / T.all_sync / T.ballot_sync / T.ballot /
    # T.activemask): (lane mask uint32, predicate bool); any / all: an int32, 1 where some /
    # every lane of the mask has the predicate, else 0; ballot: a uint64 whose bit N is lane
    # N's predicate (upper 32 bits zero); activemask: the warp's active lanes (a uint64)
    "vote_any": 2, "vote_all": 2, "vote_ballot": 2, "activemask": 0,
    # block barriers that reduce a predicate (TileLang's T.syncthreads_count / _and / _or,
    # CUDA's __syncthreads_*): an int32, the count / 1 if all / 1 if any of the threads
    # that the body maps onto (a barrier of those threads, bar.red)
    "syncthreads_count": 1, "syncthreads_and": 1, "syncthreads_or": 1,
    # T.shuffle_elect: (warp chosen, a bool): true in the lane that elect.sync picks (over
    # the full warp; all its lanes run it) of a chosen warp, false elsewhere
    "elect_one_sync": 1,
    # TileLang's T.ptx_cp_async (a statement): (a Load of the shared element written, a
    # Load of the global element read, the element count, an int32 Const): this thread's
    # cp.async of that many contiguous elements (4, 8 or 16 bytes); the Loads stand for
    # their elements' addresses
    "ptx_cp_async": 3,
    # TileLang's T.ptx_commit_group() / T.ptx_wait_group(n) (statements): this thread's
    # cp.async copies since its last commit become a group (cp.async.commit_group) / it
    # waits until at most n (an int32 Const) of its groups are pending (cp.async.wait_group)
    "ptx_commit_group": 0, "ptx_wait_group": 1,
    # TileLang's T.atomic_load(x[i], memory_order): (a Load of the global element, its
    # memory order's id in MEMORY_ORDERS, an int32 Const): the element read atomically at
    # device scope (the Load stands for its address); the Load's dtype
    "atomic_load": 2,
    # T.atomic_add/max/min(x[i], v, return_prev=True, memory_order=...): (a Load of the
    # global or shared element, the value, of the element's dtype, the memory order's id in
    # MEMORY_ORDERS, an int32 Const): the element updated atomically (device scope in
    # global memory, block scope in shared) and its value before the update returned; the
    # Load stands for its address
    "atomic_add_ret": 3, "atomic_max_ret": 3, "atomic_min_ret": 3,
    # TVM's libm forms (TileLang's T.copysign ...): (x1, x2) of x1's float dtype; ldexp:
    # (x, an int32 exponent); the result x1's dtype
    "asinh": 1, "acosh": 1, "atanh": 1, "copysign": 2, "hypot": 2, "nextafter": 2,
    "ldexp": 2,
    # TileLang's IEEE forms: (operands of the result's float dtype, then the rounding mode's
    # index in IEEE_ROUNDINGS, an int32 Const; ieee_frsqrt has none: to nearest); never
    # contracted into an fma with a neighbour.  float16/bfloat16: 'rn' only, computed as
    # CUDA's half intrinsics compute them (ieee_frcp/fsqrt/frsqrt: the float32
    # rcp/sqrt/rsqrt.approx rounded to the 16-bit dtype)
    "ieee_add": 3, "ieee_sub": 3, "ieee_mul": 3, "ieee_fmaf": 4, "ieee_fdiv": 3,
    "ieee_frcp": 2, "ieee_fsqrt": 2, "ieee_frsqrt": 1,
    # TileLang's T.fast_rcp: rcp.approx.ftz.f32 of a float32
    "fast_rcp": 1,
    # TileLang's T.__ffs: the one-based index of the lowest set bit of a 32/64-bit integer
    # (0 for 0), an int32; T.__fns(mask uint32, base int32, offset int32): fns.b32, a uint32
    "ffs": 1, "fns": 3,
    # TileLang's T.match_any_sync / T.match_all_sync (value, mask uint32): match.sync over
    # the lanes of the mask, a uint32; T.tvm_warp_activemask(): the active lanes, a uint32
    "match_any": 2, "match_all": 2, "warp_activemask": 0,
}
IEEE_ROUNDINGS = ("rn", "rz", "ru", "rd")  # to nearest even, toward zero, up, down
IEEE_DTYPES = ("float16", "bfloat16", "float32", "float64")
IEEE_FORMS = ("ieee_add", "ieee_sub", "ieee_mul", "ieee_fmaf", "ieee_fdiv", "ieee_frcp",
              "ieee_fsqrt", "ieee_frsqrt")
RNG_DRAWS = ("rng_rand", "rng_uniform", "rng_normal")  # each call draws (not pure)
ATOMIC_RETURNS = ("atomic_add_ret", "atomic_max_ret", "atomic_min_ret")  # each call updates
# the dtypes of the element an ATOMIC_RETURNS call updates (atom.add / atom.max / atom.min
# with a result; float max/min: float32 only, as the statement form)
ATOMIC_RETURN_DTYPES = {"add": ("int32", "uint32", "int64", "uint64", "float32", "float64",
                                "float16", "bfloat16"),
                        "max": ("int32", "uint32", "int64", "uint64", "float32", "float16",
                                "bfloat16"),
                        "min": ("int32", "uint32", "int64", "uint64", "float32", "float16",
                                "bfloat16")}
# T.atomic_max / T.atomic_min statements (float16 / bfloat16: TileLang's 16-bit CAS loop)
ATOMIC_MINMAX_DTYPES = ("float32", "int32", "uint32", "int64", "uint64", "float16", "bfloat16")
WARP_VOTES = ("vote_any", "vote_all", "vote_ballot")
WARP_MATCHES = ("match_any", "match_all")
BLOCK_VOTES = ("syncthreads_count", "syncthreads_and", "syncthreads_or")
PDL_CALLS = ("pdl_sync", "pdl_trigger")
STMT_CALLS = PDL_CALLS + ("fence_proxy_async", "sync_grid", "ptx_commit_group")  # intrinsics written as statements
SHUFFLES = ("shfl_xor", "shfl_down", "shfl_up", "shfl_sync")
WARP_REDUCTIONS = ("warp_reduce_sum", "warp_reduce_max", "warp_reduce_min",
                   "warp_reduce_bitand", "warp_reduce_bitor")
# the intrinsics whose arguments and result share one float dtype
FLOAT_MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor",
              "ceil", "tan", "atan", "acos", "asin", "sinh", "cosh", "erf", "log10", "log1p",
              "exp10", "trunc", "round", "round_ties_away_from_zero", "pow", "fmod", "atan2",
              "exp2_approx", "exp_approx", "log2_approx", "log_approx", "div_approx",
              "exp10_approx",
              "log10_approx", "sin_approx", "cos_approx", "tan_approx", "asinh", "acosh",
              "atanh", "copysign", "hypot", "nextafter", "fast_rcp")
FLOAT_PREDICATES = ("isnan", "isinf", "isfinite")


@dataclass(frozen=True)
class Call(Expr):
    """An intrinsic call (``INTRINSICS``); ``min``/``max`` are ``BinOp``s."""

    name: str
    args: tuple[Expr, ...]
    dtype: str


# --------------------------------------------------------------------------------------
# Type rules (shared by the frontend and the validator)
# --------------------------------------------------------------------------------------
def is_float(dtype: str) -> bool:
    return DTYPES[dtype].kind == "float"


def is_int(dtype: str) -> bool:
    return DTYPES[dtype].kind in ("int", "uint")


# TVM's BinaryOpMatchTypes ranks the float kinds before their widths: an IEEE float
# (float16 / float32 / float64) beats bfloat16 (float16 + bfloat16 is float16, either
# side), bfloat16 beats the fp8s, an fp8 beats fp4
_FLOAT_KIND_RANK = {"float16": 3, "float32": 3, "tfloat32": 3, "float64": 3, "bfloat16": 2,
                    "float8_e4m3": 1, "float8_e5m2": 1, "float8_e8m0fnu": 1,
                    "float4_e2m1fn": 0}


def promote(a: str, b: str) -> str:
    """The dtype of ``a op b``, as TVM's BinaryOpMatchTypes gives it: a float beats an
    integer or bool whatever the widths; two floats by kind (``_FLOAT_KIND_RANK``), then
    the wider; a bool loses to an integer; two integers the wider, at equal widths the
    unsigned one (``int32 + uint32`` and ``uint32 + int32`` are uint32); ties of the same
    kind keep ``a``.  Two different fp8 formats have no common dtype (TVM: "Cannot match
    type")."""
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa != fb:
        return a if fa else b
    if fa:
        ra, rb = _FLOAT_KIND_RANK[a], _FLOAT_KIND_RANK[b]
        if ra != rb:
            return a if ra > rb else b
        if ra == 1:
            raise TypeError(f"cannot match {a} and {b}: TVM's BinaryOpMatchTypes has no common "
                            "dtype for two fp8 formats; convert one with T.cast first")
        return a if DTYPES[a].bits >= DTYPES[b].bits else b
    if a == "bool":
        return b
    if b == "bool":
        return a
    if DTYPES[a].bits != DTYPES[b].bits:
        return a if DTYPES[a].bits > DTYPES[b].bits else b
    return b if DTYPES[b].kind == "uint" and DTYPES[a].kind != "uint" else a


def _int_binop(op: str, a, b) -> Expr:
    if op in ("bitand", "bitor", "bitxor"):
        a_bool, b_bool = (isinstance(x, bool) or isinstance(x, Expr) and x.dtype == "bool"
                          for x in (a, b))
        if a_bool and b_bool:
            # TVM's bool is a one-bit unsigned integer: `&`, `|`, `^` of two conditions (a
            # Python helper's `(o > me) | ((o == me) & (j < k))`) are their logical and, or
            # and inequality, as the parser reads them in a kernel body
            a, b = as_expr(a), as_expr(b)
            return Logic({"bitand": "and", "bitor": "or"}[op], (a, b)) if op != "bitxor" \
                else cmp("ne", a, b)
        if a_bool != b_bool:  # a condition against an integer: its 0 or 1 in the integer's dtype
            t = (b if a_bool else a)
            t = t.dtype if isinstance(t, Expr) else "int32"
            if is_int(t):
                a, b = (cast(as_expr(a), t), b) if a_bool else (a, cast(as_expr(b), t))
    e = binop(op, a, b)
    if not is_int(e.dtype):
        raise TypeError(f"{op} on {e.dtype}: Python's & | ^ << >> on expressions take "
                        "integers")
    return e


def as_expr(x, dtype: Optional[str] = None) -> Expr:
    """Turn a Python constant into a ``Const`` (``dtype`` or its natural dtype).  A
    ``dtype`` of another kind converts the value as a cast does: ``1.7`` into an integer
    dtype is ``1`` (TileLang's ``A[i] = 1.0`` into an int32 buffer)."""
    if isinstance(x, Expr):
        return x
    if dtype is not None and isinstance(x, (bool, int, float)) and \
            not is_float(dtype) and dtype != "bool" and isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise TypeError(f"cannot convert {x!r} to {dtype}")
        return Const(int(x), dtype)
    if isinstance(x, bool):
        return Const(x, dtype or "bool")
    if isinstance(x, int):  # TVM: int32, or int64 for a literal past it
        return Const(x, dtype or (INDEX if -2 ** 31 <= x < 2 ** 31 else "int64"))
    if isinstance(x, float):
        return Const(_half_value(x, dtype), dtype) if dtype else Const(x, "float32")
    raise TypeError(f"cannot use {type(x).__name__} {x!r} as an IR expression")


def _half_value(x: float, dtype: str) -> float:
    """A float constant of a 16-bit float dtype holds the value of that type (``0.1`` as a
    float16 is 0.0999755859375, as TVM's FloatImm and the GPU's conversion make it): the
    generated code computes 16-bit arithmetic in float32, where the unrounded 0.1 would
    give other sums.  Wider dtypes keep the Python value (its float32 rounding is the
    generated literal's own)."""
    if DTYPES[dtype].bits != 16 or not is_float(dtype):
        return x
    rounded = _round_float(x, dtype)
    return x if rounded is None else rounded


def const(value, dtype: str) -> Const:
    if is_float(dtype):
        return Const(_half_value(float(value), dtype), dtype)
    if dtype == "bool":
        return Const(bool(value), dtype)
    return Const(int(value), dtype)


def _takes_dtype(x, dtype: str) -> bool:
    """A Python constant ``x`` beside an operand of ``dtype`` takes that dtype, except a
    float beside an integer or a float narrower than 32 bits, and an int past int32 beside
    a 32-bit or narrower integer.  TVM's arithmetic operators type a Python float float32
    and a Python int int32 (int64 past it), then BinaryOpMatchTypes promotes: ``i + 2**32``
    of an int32 ``i`` is int64, and ``h * 0.1`` of a float16 ``h`` is a float32 product
    (TileLang's CUDA: ``(half_t)((float)h * 0.1f)``), not a float16 one with 0.1 rounded
    to float16."""
    if isinstance(x, float):
        return is_float(dtype) and DTYPES[dtype].bits >= 32
    if dtype == "bool":  # an int is int32 and wins: ``(a > 0) * 5`` is 0 or 5, not a bool
        return isinstance(x, bool)
    if isinstance(x, int) and not isinstance(x, bool) and is_int(dtype) and \
            DTYPES[dtype].bits < 32:
        # an 8- or 16-bit operand: C computes in int anyway (codegen's promotion), so the
        # int only matters past the operand's range, where TVM's int32 wins (``a + 300``
        # and ``a < 200`` of an int8 ``a`` are int32)
        bits, signed = DTYPES[dtype].bits, DTYPES[dtype].kind == "int"
        lo, hi = (-2 ** (bits - 1), 2 ** (bits - 1)) if signed else (0, 2 ** bits)
        return lo <= x < hi
    if isinstance(x, int) and not isinstance(x, bool) and is_int(dtype) and \
            DTYPES[dtype].bits <= 32:
        return -2 ** 31 <= x < 2 ** 31 or (dtype == "uint32" and 0 <= x < 2 ** 32)
    return True


def _coerce(a, b):
    """Give two operands one dtype; Python constants take the other side's dtype."""
    if not isinstance(a, Expr) and isinstance(b, Expr):
        a = const(a, b.dtype) if _takes_dtype(a, b.dtype) else as_expr(a)
    if not isinstance(b, Expr) and isinstance(a, Expr):
        b = const(b, a.dtype) if _takes_dtype(b, a.dtype) else as_expr(b)
    a, b = as_expr(a), as_expr(b)
    t = promote(a.dtype, b.dtype)
    return cast(a, t), cast(b, t), t


def cast(e: Expr, dtype: str) -> Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Const):
        if is_float(dtype) and DTYPES[dtype].bits < 64 and not isinstance(e.value, bool):
            rounded = _round_float(float(e.value), dtype)
            if rounded is not None:
                return Const(rounded, dtype)
        if is_int(dtype) and not isinstance(e.value, bool):
            return Const(_int_of(e.value, e.dtype, dtype), dtype)
        return const(e.value, dtype)
    return Cast(dtype, e)


def _int_of(v, src: str, dtype: str) -> int:
    """The constant ``v`` of ``src`` converted to the integer ``dtype`` as the GPU converts
    it: an integer modulo 2**bits, read signed or unsigned (``(uint8_t)-1`` is 255,
    ``(int8_t)200`` is -56); a float truncated and saturated to the range (PTX's
    ``cvt.rzi``; NaN is 0)."""
    bits, signed = DTYPES[dtype].bits, DTYPES[dtype].kind == "int"
    if is_float(src):
        import math
        if math.isnan(v):
            return 0
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return lo if v <= lo else hi if v >= hi else int(v)
    v = int(v) & ((1 << bits) - 1)
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _round_float(x: float, dtype: str):
    """``x`` rounded to the nearest ``dtype`` value (ties to even, as a conversion does:
    TVM folds ``Cast("bfloat16", 3004)`` to the bfloat16 value 3008, and a folded constant
    must keep that rounding); None for the types whose constants the generated code
    encodes itself (fp8, fp4, e8m0)."""
    import math
    import struct

    if math.isnan(x) or math.isinf(x):
        return x
    if dtype == "float32":
        try:
            return struct.unpack("<f", struct.pack("<f", x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
    if dtype == "float16":
        try:
            return struct.unpack("<e", struct.pack("<e", x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
    if dtype == "bfloat16":
        f32 = _round_float(x, "float32")
        if math.isinf(f32):
            return f32
        bits = struct.unpack("<I", struct.pack("<f", f32))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return None


def binop(op: str, a, b) -> Expr:
    a, b, t = _coerce(a, b)
    if op == "div" and is_int(t):
        op = "floordiv"  # tilecute integer division is floor division, as in Python
    if op in ("floordiv", "mod") and not is_int(t):
        # TVM's floordiv / floormod (Python's // and % on expressions, T.floordiv,
        # T.floormod) check that both operands are integers: TileLang refuses them on floats
        sym, instead = ("//", "T.floor(a / b)") if op == "floordiv" else \
            ("%", "T.fmod(a, b) (C's fmod) or a - T.floor(a / b) * b")
        raise TypeError(f"{sym} on {t} operands: TVM's {'floormod' if op == 'mod' else op} "
                        f"takes integers (TileLang refuses it); write {instead}")
    if isinstance(a, Const) and isinstance(b, Const) and is_int(t):
        folded = _fold_int(op, a.value, b.value)
        if folded is not None:  # wrapping as the GPU's integer arithmetic does
            return Const(_int_of(folded, t, t), t)
    return BinOp(op, a, b, t)


def _fold_int(op, x, y):
    if op == "add": return x + y
    if op == "sub": return x - y
    if op == "mul": return x * y
    if op == "floordiv" and y != 0: return x // y
    if op == "mod" and y != 0: return x % y
    if op == "min": return min(x, y)
    if op == "max": return max(x, y)
    return None


def bitwise_not(x: Expr) -> Expr:
    """``~x`` of an integer expression (TVM's ``bitwise_not``): ``x ^ -1`` (all ones); for an
    8- or 16-bit unsigned ``x`` the ``bitwise_not`` Call, whose value C computes in int
    (``~x`` of a uint8 200 is -201 where converted or compared), unlike ``x ^ 255``."""
    ones = -1 if DTYPES[x.dtype].kind == "int" else (1 << DTYPES[x.dtype].bits) - 1
    if isinstance(x, Const):
        return Const(x.value ^ ones, x.dtype)
    if DTYPES[x.dtype].kind == "uint" and DTYPES[x.dtype].bits < 32:
        return Call("bitwise_not", (x,), x.dtype)
    return binop("bitxor", x, Const(ones, x.dtype))


def cmp(op: str, a, b) -> Expr:
    a, b, _ = _coerce(a, b)
    return Cmp(op, a, b)


def ceildiv(a, b) -> Expr:
    a, b, t = _coerce(a, b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(-(-a.value // b.value), t)
    return Call("ceildiv", (a, b), t)


# --------------------------------------------------------------------------------------
# Buffers and regions
# --------------------------------------------------------------------------------------
SCOPES = ("global", "shared", "fragment", "local")


@dataclass(frozen=True)
class Buffer:
    """A tensor in some memory scope.  ``shape``/``strides`` entries are ``Const`` or
    ``Var`` (symbolic).  ``strides is None`` means row-major contiguous."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    scope: str = "global"
    strides: Optional[tuple[Expr, ...]] = None

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Region:
    """A tile of a buffer: origin per axis, and the extents when given explicitly
    (``A[i:i+16, 0:64]``); ``extents is None`` means "as large as the other side"."""

    buffer: str
    starts: tuple[Expr, ...]
    extents: Optional[tuple[Expr, ...]] = None


# --------------------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------------------
class Stmt:
    loc: Optional[Loc]


LOOP_KINDS = ("serial", "unrolled", "parallel", "pipelined")


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    start: Expr
    extent: Expr
    kind: str
    body: tuple[Stmt, ...]
    num_stages: int = 0  # pipelined loops only
    # parallel loops: consecutive iterations per thread step (lanes); 0 = the passes choose
    vector_width: int = 0
    # parallel loops: every thread runs every iteration (they write only replicated
    # fragments or locals); set by the layout pass
    replicated: bool = False
    # parallel loops copying global -> shared: cp.async, completed at the next barrier
    async_copy: bool = False
    # parallel nests made from a T.copy(..., prefer_instruction=...) (lower_tile_ops):
    # "cp_async": the vectorization pass makes the nest cp.async or fails naming the copy;
    # "sync": never cp.async; "": the pass decides; "async" (ASYNC_COPY, T.async_copy's):
    # cp.async or a failure naming it, its copies one commit group, and no wait of the
    # passes' (the program's T.ptx_wait_group waits for them)
    copy_instruction: str = ""
    loc: Optional[Loc] = _loc()
    # pipelined loops (sm_90a): a producer warpgroup issues the body's TMA loads while the
    # kernel's threads compute (the warp-specialization pass); None: the pass decides
    warp_specialize: Optional[bool] = None
    # pipelined loops: the program asked for the body's second GEMM to run one step behind,
    # overlapping the next step's first GEMM and the work between them (TileLang's
    # T.Pipelined(stage=, order=, group=) saying so); the MMA-overlap pass does it or fails
    overlap_mma: bool = False
    # the innermost loop of a parallel nest: the accesses of its body that run as one
    # vector instruction per chunk of lanes (the vectorization pass decides, the code
    # generator and the launch ABI's alignment checks read them)
    vectors: tuple["VectorAccess", ...] = ()
    # pipelined loops inside an outer loop (a persistent kernel's loop over tiles; the
    # warp-specialization pass): the steps of the loop's earlier runs, so that step k uses
    # stage (stage_base + k - start) % num_stages and the mbarrier phases run on across runs
    stage_base: Optional[Expr] = None
    # the innermost loop of a parallel nest: the program's map of its iterations onto the
    # threads (TileLang's ``T.Parallel(..., loop_layout=T.Fragment(...))``, which the
    # frontend matched to one of tilecute's): ``blocked`` (iteration ``f`` on thread
    # ``(f // vector) % threads``) or ``replicated`` (every thread runs every iteration);
    # the layout pass runs the nest so or fails naming it
    loop_layout: Optional["Layout"] = None
    # unrolled loops: TileLang's ``T.unroll(..., unroll_factor=n)``, a hint that the loop
    # is unrolled ``n`` iterations at a time (``#pragma unroll n``; CuTe DSL's
    # ``cutlass.range(..., unroll=n)``); 0: unrolled completely
    unroll_factor: int = 0
    # pipelined loops: the shared buffers whose copies the program's T.Pipelined(order=)
    # issues after the body's other statements (a step issues step k + S - 1's loads into
    # them after step k's compute: TileLang's order=[1, 2, 0] with stage=[0, 0, S - 1]
    # names both tiles, order=[0, 2, 1] the second); the software-pipelining pass places
    # their refill so, the other copies' at the start of the step
    loads_last: tuple[str, ...] = ()
    # unrolled loops: the program's ``T.vectorized``: the vectorization pass makes its
    # body's contiguous global / shared accesses vector instructions where it can
    # (``vector_width`` lanes a step, ``vectors``), as TileLang vectorizes such a loop
    vectorized: bool = False
    # parallel nests (their outer loop) that fill multi-buffered shared buffers ahead of
    # the pipelined loop's step (the cp.async pipelining pass's prologue and refill): the
    # stage of those buffers they write; None: the stage the enclosing loop body sees
    fill_stage: Optional[Expr] = None


@dataclass(frozen=True)
class VectorAccess:
    """``buffer[indices]`` in a parallel loop body moves ``chunk`` consecutive elements
    (at most 16 bytes) per instruction; its offset is a known multiple of ``chunk``."""

    buffer: str
    indices: tuple[Expr, ...]
    chunk: int


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class While(Stmt):
    """``while cond: body``: the condition is tested before every iteration (TileLang's
    bounded ``while``; the program guarantees it ends)."""

    cond: Expr
    body: tuple[Stmt, ...]
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class SafeValueScope(Stmt):
    """``with T.sblock(name): T.annotate_safe_value({A: v}) ...`` inside a T.Kernel:
    TileLang's nested block scope of a ``safe_value_map``: in ``body`` (lexically) an
    out-of-bounds read of global tensor ``A`` (or of a view of it) gives ``v``, overriding
    for that tensor the kernel's ``safe_values`` and any enclosing scope's.  ``values``:
    (global tensor parameter, value) pairs as ``KernelScope.safe_values`` holds them.  The
    first pass after validation (``transform/scope_safe_values``) rewrites each scope into
    views of its tensors whose own safe values the kernel lists, so no later pass sees one."""

    name: str
    values: tuple[tuple[str, Expr], ...]
    body: tuple[Stmt, ...]
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class Let(Stmt):
    """Bind ``var`` to ``value`` for the rest of the enclosing block.  ``within``: an
    integer the pass that made the Let knows the value lies below (``0 <= var <
    within``), where the value's form does not show it: a block index remapped by a
    block order (a permutation of the grid) is below its grid extent.  The bounds
    prover reads it; nothing checks it at run time."""

    var: Var
    value: Expr
    loc: Optional[Loc] = _loc()
    within: Optional[Expr] = None


@dataclass(frozen=True)
class Store(Stmt):
    """``buffer[indices] = value``.  ``feeds`` (stage_global_loads' fill of a staged
    fragment): the global store ``(buffer, indices)`` of the same iteration, the only
    reader of this element, which reads it under its own bounds check; where that check
    cannot pass, this store is not needed."""

    buffer: str
    indices: tuple[Expr, ...]
    value: Expr
    loc: Optional[Loc] = _loc()
    feeds: Optional[tuple[str, tuple[Expr, ...]]] = None


@dataclass(frozen=True)
class Evaluate(Stmt):
    value: Expr
    loc: Optional[Loc] = _loc()


def is_assume(s: Stmt) -> bool:
    """A kernel's ``T.assume(cond)`` statement (``INTRINSICS["assume"]``)."""
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.name == "assume"


WARPGROUP_THREADS = 128


@dataclass(frozen=True)
class WarpGroups(Stmt):
    """``with T.ws(g, ...)``: TileLang's explicit warp-specialized region.  ``body`` runs on
    the threads of warpgroups ``groups`` (one consecutive run of 128-thread warpgroups of a
    1-D block: ``128 * groups[0] <= thread < 128 * (groups[-1] + 1)``); the tile ops in
    it map onto those threads alone, numbered from 0 (a ``T.gemm`` there is the MMA of
    those warpgroups, a copy is spread over them, a barrier is theirs: a named barrier).
    A kernel with such regions orders them itself (mbarriers): the compiler gives it no
    producer warpgroup of its own.

    ``span``: a region of whole warps that are not whole warpgroups (the branch ``if tx
    < 32:`` of a 96-thread block, its ``else``): the threads ``span[0] <= thread <
    span[1]`` (multiples of 32), ``groups`` then empty; the same region otherwise, except
    that no ``T.gemm`` runs in it (an MMA here takes whole warpgroups).

    ``synced``: a region the compiler made for the threads holding a fragment (pass
    ``fragment_thread_regions``): ordered against the statements around it, neighbouring
    regions included, by block barriers as any statement (the program orders a T.ws
    region, or the branches of ``if tx < 32:``, side by side with its mbarriers)."""

    groups: tuple[int, ...]
    body: tuple[Stmt, ...]
    loc: Optional[Loc] = _loc()
    span: tuple[int, ...] = ()
    synced: bool = False

    @property
    def first_thread(self) -> int:
        return self.span[0] if self.span else self.groups[0] * WARPGROUP_THREADS

    @property
    def num_threads(self) -> int:
        return self.span[1] - self.span[0] if self.span else \
            len(self.groups) * WARPGROUP_THREADS


LAYOUT_KINDS = ("blocked", "replicated", "row_major", "swizzled", "tma_swizzled", "mbarrier")


@dataclass(frozen=True)
class Layout:
    """Where the elements of a fragment or shared buffer live; chosen by the layout pass.

    Fragments (``f`` = row-major flat index of an element):
      ``blocked``: thread ``(f // vector) % threads`` holds it, in register
      ``(f // (vector * threads)) * vector + f % vector``;
      ``replicated``: every thread holds every element, in register ``f``;
      ``mma``: the accumulator layout of tensor-core MMA family ``mma`` (``wgmma`` on
      sm_90a, ``mma`` for warp ``mma.sync``) with ``warps = (along M, along N)``
      (warpgroups for wgmma): ``T.gemm`` accumulates into it; element ``(i, j)`` of each
      register is given by CuTe's partition of the tiled MMA (``runtime/cute/mma.py``);
      with ``operand="A"`` the register layout of an A operand read from registers
      (wgmma, or mma.sync with every warp along M; the same (i, j) per register as an
      accumulator with as many columns);
      ``mma_rows``: an ``(M,)`` fragment holding one value per row of an ``(M, N)``
      accumulator with layout ``mma``/``warps``: each thread holds the rows its
      accumulator registers cover (``runtime/cute/rows.py``); row reductions of the
      accumulator write it, and loops over the accumulator read it at their row.
      ``mma_cols``: an ``(N,)`` fragment holding one value per column of an ``(M, N)``
      fragment with layout ``mma``/``warps`` (an accumulator or a register A operand):
      each thread holds the columns its registers of it cover, in adjacent pairs
      (``runtime/cute/rows.py``: ``col_fragment``); loops over that fragment read it at
      their column, ``T.Parallel(N)`` loops walk each thread's columns.
    Shared buffers:
      ``row_major``;
      ``swizzled``: row-major over the last two dims ``(r, c)``, with column ``c`` stored at
      ``c ^ (r % swizzle)`` (a power of two), so column walks hit distinct banks;
      ``tma_swizzled``: per matrix of the last two dims ``(r, c)`` (a buffer with more
      dims holds its matrices one after another, row-major over the leading dims, as a
      T.gemm on ``A_s[s, :, :]`` reads them), the last dim cut into ``swizzle``-byte
      column chunks (32, 64 or 128), stored chunk after chunk, each chunk row-major over
      the rows; with TMA's pattern on byte offsets (``b ^ ((b >> 3) & mask)``, ``mask``
      0x10/0x30/0x70): what TMA copies with that swizzle write, one box per chunk (and
      matrix), and the layout tensor-core MMAs read operands from; with ``flat``: no
      column chunks, the pattern on the buffer's row-major flat index (a view whose rows
      differ from those of a base whose rows fit one chunk: the base's flat index is the
      view's, T.reshape of a swizzled tile);
      ``mbarrier``: an array of mbarriers (dtype uint64), each expecting ``threads``
      arrivals per phase (``T.alloc_barrier(n, arrive_count=threads)``).
    """

    kind: str
    threads: int = 0
    vector: int = 0
    swizzle: int = 0
    mma: str = ""
    warps: tuple = ()
    operand: str = ""  # mma layouts: "" for an accumulator, "A" for an A operand
    # fragments used inside a ``T.ws`` region: the first thread of the region, whose
    # ``threads`` threads (numbered from 0 there) hold it; 0 for the block's threads
    first_thread: int = 0
    flat: bool = False  # tma_swizzled only: the pattern on the flat index (no chunks)


@dataclass(frozen=True)
class Allocate(Stmt):
    """Declare a shared, fragment or local buffer for the rest of the enclosing block (or,
    with ``view_of``, a view of another buffer's storage, global ones included; or, with
    ``address``, a global tensor at an address computed at run time)."""

    buffer: Buffer
    layout: Optional[Layout] = None  # chosen by the layout pass for fragment/shared buffers
    loc: Optional[Loc] = _loc()
    # shared buffers multi-buffered by a T.Pipelined loop (the pipelining passes):
    # `stages` copies, the loop body sees stage (k - start) % stages
    stages: int = 1
    # shared buffers: where the buffer lives in the block's dynamic shared memory (the
    # shared-memory pass, last); None before it
    slot: Optional["SharedSlot"] = None
    # fragments only: a reducer (TileLang's T.alloc_reducer): every thread holds a private
    # copy of every element that T.Parallel loops (run over the threads) combine
    # contributions into with this op (one of REDUCER_OPS; the bitwise ones on integers);
    # T.finalize_reducer combines the copies.  "" for an ordinary fragment
    reducer: str = ""
    # a view (TileLang's T.view / T.reshape / T.Tensor(shape, dtype, buf.data)): this
    # buffer names no storage of its own but the storage of buffer ``view_of`` (a shared,
    # fragment or local allocation of the same scope, or a global parameter), from its
    # first byte, read as this buffer's shape and dtype in row-major order: element ``e``
    # (row-major flat index) is the bytes ``e * size .. (e + 1) * size`` of the base's
    # row-major bytes.  The passes keep the two consistent (one layout of the bytes, one
    # shared-memory slot, one set of registers).  "" for a buffer of its own
    view_of: str = ""
    # a view of a global tensor that starts this many of its own elements into the base's
    # storage (TVM's ``elem_offset``: ``T.Buffer(shape, dtype, data=A.data,
    # elem_offset=h * 128)``): an integer expression, evaluated where the statement stands,
    # known to be a multiple of 16 bytes (:func:`known_multiple`), so the view starts as
    # aligned as its base.  None for every other allocation
    view_offset: Optional[Expr] = None
    # a global tensor at an address (TileLang's T.make_tensor / T.make_tensor_from_addr):
    # ``buffer`` (scope "global", row-major or with its strides) starts at the byte address
    # this int64 expression holds where the statement stands: a pointer parameter
    # (``PrimFunc.pointers``, TileLang's ``p: T.ptr``) or a value loaded from a table of
    # addresses (``T.Tensor([G], T.ptr)``, an int64 tensor).  No TMA descriptor can cover
    # it (descriptors are encoded on the host from a tensor argument): copies of it take
    # the cp.async / vector path.  None for every other allocation
    address: Optional[Expr] = None


@dataclass(frozen=True)
class SharedSlot:
    """A shared buffer's place in dynamic shared memory: its first stage starts at byte
    ``offset``, stage ``s`` at ``offset + s * stride``; both are multiples of ``align``."""

    offset: int
    stride: int
    align: int
    # after another shared buffer sized at launch: the bytes before it past ``offset``, an
    # int64 expression of the function's symbols and scalar parameters (a multiple of
    # ``align``); None: at ``offset``
    launch_offset: Optional[Expr] = None


@dataclass(frozen=True)
class Barrier(Stmt):
    """``T.sync_threads()``: a block-wide barrier; with ``wait_async`` it first waits for
    this thread's outstanding cp.async copies.  The barrier pass inserts them between
    tile statements that share a shared buffer."""

    wait_async: bool = False
    # set by the barrier pass before a TMA load into shared bytes threads read or wrote:
    # each thread first fences its shared accesses for the async proxy
    # (fence.proxy.async), since the barrier alone does not order them with TMA's writes
    fence_proxy: bool = False
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class SetMaxNReg(Stmt):
    """``T.set_max_nreg(count, is_inc)``: the executing warpgroup's register budget
    becomes ``count`` per thread (``setmaxnreg``, sm_90a); the TMA pass gives a producer
    warpgroup few and the compute warpgroups the rest."""

    count: int
    increase: bool
    loc: Optional[Loc] = _loc()


# ---- tile ops (lowered by later passes; the foundation codegen rejects them) --------
# TileLang's T.copy(..., prefer_instruction=...) values (its copy_analysis.cc)
COPY_INSTRUCTIONS = ("tma", "cp_async", "sync")
# TileLang's T.async_copy (and T.copy with its annotation is_async_copy): cp.async copies,
# one commit group, no wait (Copy.instruction, For.copy_instruction)
ASYNC_COPY = "async"
CLUSTER_SYNC_KINDS = ("sync", "arrive", "arrive_relaxed", "wait")  # ClusterSync.kind
NEST_COPY_INSTRUCTIONS = ("", "cp_async", "sync", ASYNC_COPY)  # For.copy_instruction


@dataclass(frozen=True)
class Copy(Stmt):
    src: Region
    dst: Region
    loc: Optional[Loc] = _loc()
    # TileLang's T.copy(..., disable_tma=True): this copy never becomes a TMA copy (the TMA
    # pass and the shared epilogue leave it on the cp.async / vector path)
    disable_tma: bool = False
    # TileLang's T.copy(..., prefer_instruction=...): "tma" (the TMA pass makes it a TMA
    # copy, or the copy's lowering fails naming it), "cp_async" (a cp.async nest, or the
    # vectorization pass fails naming it), "sync" (neither TMA nor cp.async); "": the
    # passes choose.  Every choice keeps T.copy synchronous, as in TileLang.  ASYNC_COPY
    # ("async"): TileLang's T.async_copy, asynchronous (printed T.async_copy(src, dst))
    instruction: str = ""
    # TileLang's T.copy(..., coalesced_width=w): the copy's nest runs w consecutive elements
    # of its innermost dim a thread step (its loop's vector_width); 0: the passes choose.  A
    # copy that becomes TMA has no such loop (TileLang applies it to the SIMT loop alone)
    vector_width: int = 0
    # TileLang's T.copy(..., loop_layout=T.Fragment(shape, ...)): the map of the copy's loop
    # (over its non-unit extents) onto the threads, as For.loop_layout (blocked or
    # replicated); such a copy is never TMA (TileLang's is a plain or cp.async copy).
    # ``loop_shape``: the Fragment's shape, which the copy's loop must have; () unchecked
    loop_layout: Optional["Layout"] = None
    loop_shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Fill(Stmt):
    dst: Region
    value: Expr
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class Clear(Stmt):
    buffer: str
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class Gemm(Stmt):
    a: str
    b: str
    c: str
    transpose_a: bool = False
    transpose_b: bool = False
    # True: C = op(A) @ op(B); an expression (TileLang's ``clear_accum=(k == 0)``): whether
    # to, each time the statement runs
    clear_accum: Union[bool, Expr] = False
    # wgmma batches this statement leaves in flight (0: done when it ends); the TMA pass
    # sets 1 for the last statement of a pipelined body, and the loop drains after its end;
    # NO_WAIT (TileLang's T.wgmma_gemm, and T.gemm's wg_wait=-1): no wait at all: its
    # batch stays in flight until a WaitWgmma (or a statement touching its registers)
    # waits for it; n > 1 (T.gemm's wg_wait=n): at most n batches left in flight
    wg_wait: int = 0
    loc: Optional[Loc] = _loc()
    # how the block's warps tile (M, N) (TileLang's T.GemmWarpPolicy): "Square" (as square
    # as the tile allows; warpgroups along M for wgmma when M allows), "FullRow" (every
    # warp along M), "FullCol" (every warp along N)
    policy: str = "Square"
    # the stage of its multi-buffered shared operands, where it is not the one the
    # enclosing pipelined loop's body sees (set by the MMA-overlap pass)
    stage: Optional[Expr] = None
    # a shared operand that is one matrix of a buffer with more than 2 dims (TileLang's
    # ``T.gemm(A_s[s, :, :], ...)``): the indices of its leading dims (scalars, possibly
    # run-time), the matrix ``A_s[*a_index, :, :]``; () for a whole 2-D operand
    a_index: tuple[Expr, ...] = ()
    b_index: tuple[Expr, ...] = ()
    # a shared operand that is part of its matrix (TileLang's ``Q_s[:, 0:256]``, a K range):
    # ``((first row, rows), (first column, columns))`` of the matrix's last two dims (the
    # first ones expressions, the counts constants); () for the whole matrix
    a_part: tuple[tuple[Expr, int], ...] = ()
    b_part: tuple[tuple[Expr, int], ...] = ()
    # the instructions it runs on, chosen by the gemm pass: "wgmma", "mma" (mma.sync) or
    # "simt" (scalar multiply-adds on CUDA cores, where no tensor-core MMA serves)
    family: str = ""
    # TileLang's T.wgmma_gemm: wgmma or an error, never another family (with wg_wait
    # NO_WAIT).  A T.gemm's wg_wait (TileLang's earlier T.gemm argument) applies where it
    # runs on wgmma; mma.sync and SIMT complete in the statement, as TileLang's did
    wgmma_only: bool = False


GEMM_POLICIES = ("Square", "FullRow", "FullCol")
NO_WAIT = -1  # Gemm.wg_wait of T.wgmma_gemm: never waits


REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")
BITWISE_REDUCE_KINDS = ("bitand", "bitor", "bitxor")  # integer sources (and bool, below)


def bitwise_reduce_takes(kind: str, dtype: str) -> bool:
    """Whether T.reduce_<kind> (a bitwise kind) takes a ``dtype`` source: integers, and bool
    for bitor / bitxor (TileLang lowers those as the logical or / parity; its bitand starts
    from all ones, which bool cannot hold, and is refused there too)."""
    return is_int(dtype) or (dtype == "bool" and kind != "bitand")
REDUCER_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")  # T.alloc_reducer's op


@dataclass(frozen=True)
class Reduce(Stmt):
    kind: str
    src: str
    dst: str
    dim: int
    clear: bool = True
    scratch: str = ""  # shared buffer for the cross-warp step; set by the layout pass
    # TileLang's nan_propagate: max/min/absmax into a float dtype combine NaN-propagating
    # (a NaN element makes its row's result NaN, CUDA __hmax_nan); set by the parser only
    # for those kinds and dtypes (TileLang ignores it elsewhere)
    nan_propagate: bool = False
    loc: Optional[Loc] = _loc()
    # the barrier pass: False where a block barrier follows before the scratch is touched
    # again (in program order, around the loop), so the exchange's own barrier after its
    # reads of the scratch is left out (an MMA accumulator's rows: runtime.cute.rows)
    sync_after: bool = True
    # the deferred row sums pass: a sum over an MMA accumulator's rows that each thread
    # leaves as its own partial (its registers of the row, no shuffle, no exchange); a
    # ``CombineRows`` of the running sum it feeds adds the partials up later
    partial: bool = False


SCAN_KINDS = ("sum", "max")


@dataclass(frozen=True)
class Scan(Stmt):
    """``T.cumsum(src, dst, dim, reverse)`` / ``T.cummax``: the inclusive scan of shared
    buffer ``src`` along ``dim`` into shared buffer ``dst`` of the same shape (may be
    ``src``); ``reverse`` scans from the end (``dst[i] = op(src[i:])``).  A fragment
    source is staged through shared memory by the tile-op lowering, as TileLang does."""

    kind: str  # one of SCAN_KINDS
    src: str
    dst: str
    dim: int
    reverse: bool = False
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class FinalizeReducer(Stmt):
    """``T.finalize_reducer(r)``: combine every thread's copy of reducer ``r`` (an
    all-reduce with the reducer's op); each thread then holds the totals.  ``scratch``:
    the shared buffer of the cross-warp step, set by the layout pass."""

    buffer: str
    scratch: str = ""
    loc: Optional[Loc] = _loc()


THREAD_ALLREDUCE_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")


@dataclass(frozen=True)
class ThreadAllReduce(Stmt):
    """TVM's thread all-reduce as TileLang programs write it: ``with T.attr(
    T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", ...):
    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v, True, r[0], ty, dtype="handle"))``.

    Every thread of the block runs it.  The threads that differ only in the thread dims
    ``dims`` (0: ``threadIdx.x``, 1: ``.y``, 2: ``.z``; each of extent > 1) form a group;
    every thread of a group gets the combination of its group's ``values`` by the
    combiner and stores it into element 0 of each of the local buffers ``dsts`` (TVM
    remaps the result buffer to the reduction's result).  The combiner is TVM's
    ``CommReducer``: the expressions ``results`` of the variables ``lhs`` and ``rhs`` (one
    of each per value, the dtypes of ``identity``); ``op`` names it where it is one of
    ``THREAD_ALLREDUCE_OPS`` on a single value (``x + y`` is ``"sum"``), ``""`` for any
    other (a product, a custom expression, several values).  ``values`` already hold
    TVM's condition (``Select(cond, v, identity)``).  ``scratch``: one shared buffer per
    value for the step across warps (``transform.analysis.allreduce_steps``), set by the
    layout pass where a group's threads are not all in one warp."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    results: tuple[Expr, ...]
    identity: tuple[Expr, ...]
    values: tuple[Expr, ...]
    dsts: tuple[str, ...]
    dims: tuple[int, ...]
    op: str = ""
    scratch: tuple[str, ...] = ()
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class SegmentReduce(Stmt):
    """``dst[i * (N // width) + u] = kind over src[i, u * width : (u + 1) * width]``: the
    columns of the ``(M, N)`` T.gemm accumulator ``src`` (an ``mma`` layout) reduced in
    runs of ``width`` into the shared buffer ``dst`` of ``M * N // width`` values.  Each
    thread combines its registers of a run, the lanes holding the rest of the run combine
    theirs (shuffles), one lane writes the result, then the MMA's threads meet at a
    barrier; statements after it read ``dst``.  ``width`` divides the run of columns a
    warp(group) holds, so no run spans warps.  With ``axis=0``, runs of rows instead (see
    the field).  Placed by the accumulator views pass (:mod:`~tilecute.transform.
    accumulator_views`) for ``T.reduce_<kind>`` of a ``T.reshape`` / ``T.view`` of an
    accumulator over a split of its columns (rows); the pass combines each group's runs."""

    kind: str
    src: str
    dst: str
    width: int
    nan_propagate: bool = False
    # 0: runs of ``width`` rows instead: ``dst[u * N + j] = kind over src[u * width : (u + 1) *
    # width, j]``, ``width`` dividing 16 (a warp's block of rows)
    axis: int = 1
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class CombineRows(Stmt):
    """Every thread holding a row of ``buffer`` (an ``mma_rows`` fragment whose registers
    are this thread's partials of each row, from ``Reduce.partial`` sums) replaces them with
    the row's total: the quad holding the row (shuffles), then the warps along N through
    the shared ``scratch``.  Placed by the deferred row sums pass after a loop whose running
    row sum (``l = l * alpha + rowsum(S)``) it left partial."""

    buffer: str
    kind: str = "sum"
    scratch: str = ""
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class Im2Col(Stmt):
    """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``: gather tile
    ``col`` (shared, ``(block_M, block_K)``) of the im2col matrix of the NHWC image
    ``img``: row ``nhw_step * block_M + m`` is output pixel (n, oh, ow), column
    ``c_step * block_K + k`` is filter tap (kh, kw, c) of a square ``kernel``; elements
    in the padding or past the matrix are 0.  Lowered to a T.Parallel loop."""

    img: str
    col: str
    nhw_step: Expr
    c_step: Expr
    kernel: int
    stride: int
    dilation: int
    pad: int
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class AtomicAdd(Stmt):
    """``dst += value`` atomically (``op`` "max"/"min": ``dst = max(dst, value)`` ...,
    TileLang's ``T.atomic_max``/``T.atomic_min``; "or": ``dst |= value``, TileLang's
    ``T.atomic_or``; "store": ``dst = value``, TileLang's ``T.atomic_store``); ``value`` is
    an expression or a source region (add/max/min).  ``order``: the memory order
    (``MEMORY_ORDERS``; store: ``ATOMIC_STORE_ORDERS``), at device scope for or/store, at
    the buffer's (device for global, block for shared) for add/max/min."""

    dst: Region
    value: Union[Expr, Region]
    loc: Optional[Loc] = _loc()
    op: str = "add"
    order: str = "relaxed"


ATOMIC_OPS = ("add", "max", "min", "or", "store")
# TileLang's memory orders, by its ids 0..5 (cuda::memory_order's)
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
ATOMIC_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
ATOMIC_STORE_ORDERS = ("relaxed", "release", "seq_cst")


@dataclass(frozen=True)
class TmaCopy(Stmt):
    """A TMA bulk tensor copy of one box, issued by one thread (sm_90+).

    Load (``src`` global, ``dst`` shared): expects the box's bytes on the mbarrier
    element ``barrier`` and (``arrive``) arrives there once; threads see the data after
    ``T.mbarrier_wait_parity`` on it.  Store (``src`` shared, ``dst`` global): makes the
    block's shared writes visible to TMA, copies, and waits until the shared tile has
    been read.  ``stage`` names the stage of a multi-buffered shared buffer (None: the
    stage the enclosing pipelined loop's body sees).  ``desc`` is the descriptor
    parameter, set by the TMA pass.  The global side is a region origin (its box is the
    shared buffer's shape, leading dims 1); out-of-bounds elements load as zero and are
    not stored.  A reduce-store (``reduce``) is a store that adds.
    """

    src: Region
    dst: Region
    barrier: Optional[Region] = None
    stage: Optional[Expr] = None
    desc: str = ""
    loc: Optional[Loc] = _loc()
    # loads: the issuing thread arrives once on ``barrier`` (the passes' loads, printed
    # ``arrive=True``); False: it only adds the box's bytes to the phase's expected
    # transactions, and the program's threads arrive (TileLang's T.tma_copy)
    arrive: bool = True
    # loads only (the multicast pass): the box is the same for every block of the kernel's
    # cluster of ``multicast`` blocks; each block issues its share of the box's chunks to
    # all of them (``.multicast::cluster``) and every block expects the whole box.  0: a
    # load into this block alone
    multicast: int = 0
    # stores only (the barrier pass): False: the issuing thread does not wait here until
    # the shared tile has been read; a ``TmaStoreWait`` before the next block barrier (and
    # at the kernel's end) does, so the read overlaps the statements after the store
    wait_read: bool = True
    # stores only: "add": a reduce-store (TileLang's ``T.atomic_add(G[region], s,
    # use_tma=True)``, ``cp.reduce.async.bulk.tensor .add``): each element of the box is
    # added into the global tensor (each addition atomic, relaxed at device scope) instead
    # of written; "": a plain store
    reduce: str = ""
    # a copy the program asked to be TMA (T.copy(..., prefer_instruction="tma")): a pass
    # that puts this load back as a copy keeps the request on it (Copy.instruction), so
    # its lowering fails naming the copy instead of moving it another way
    required: bool = False
    # loads (TileLang's T.tma_copy(..., leader_scope_threads=k)): the first thread of each
    # group of k consecutive threads of the block (or of the thread region it stands in)
    # issues the load, each with its own region and barrier (a per-warp copy: k = 32);
    # 0: one thread of the block or region
    leader_threads: int = 0


@dataclass(frozen=True)
class ClusterCopy(Stmt):
    """TileLang's ``T.copy_cluster(src, dst, dst_block=b, remote_barrier=bar)`` (sm_90+, a
    kernel launched in clusters): the threads that run it store shared region ``src`` of
    their block into region ``dst`` (a shared buffer, same element count) of block ``block``
    of the cluster (its rank), element by element (``st.shared::cluster``, cast to ``dst``'s
    dtype).  With ``barrier``: once all are stored, one thread arrives once on that barrier
    element in block ``block`` (release at cluster scope), whose threads see the data after
    ``T.mbarrier_wait_parity`` on it; without, the program orders the stores
    (``T.cluster_sync()``).  Regions carry their extents."""

    src: Region
    dst: Region
    block: Expr
    barrier: Optional[Region] = None
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class MBarrierArrive(Stmt):
    """``T.mbarrier_arrive(bar[i])``: every thread that runs it arrives once.  ``cp_async``:
    TileLang's ``T.cp_async_barrier_noinc(bar[i])``, the thread's arrive made when its
    earlier ``cp.async`` copies are done (``cp.async.mbarrier.arrive.noinc``)."""

    barrier: Region
    loc: Optional[Loc] = _loc()
    cp_async: bool = False
    # the multicast pass: the stage this barrier guards is written by every block of a
    # cluster of ``cluster`` blocks, so each warp of the threads that run it arrives once
    # on the barrier of every block of the cluster (lane r on block r's, after the warp's
    # lanes sync); 0: every thread arrives on this block's own barrier
    cluster: int = 0
    # TileLang's ``T.mbarrier_arrive(bar, cta_id)`` on a ``T.alloc_cluster_barrier``: the
    # thread arrives on the barrier at the same offset in block ``block`` of its cluster
    # (its rank, ``T.block_rank_in_cluster()``'s numbering); None: this block's own
    block: Optional[Expr] = None


@dataclass(frozen=True)
class NamedBarrier(Stmt):
    """A named barrier (``bar.sync`` / ``bar.arrive``) over ``threads`` threads: the
    threads that sync wait until ``threads`` have arrived or synced on ``barrier_id``
    (2..15; 0 is the block's barrier, 1 the compute warpgroups' one).  The MMA-overlap
    pass uses them to take the two compute warpgroups' GEMMs in turns."""

    barrier_id: Expr
    threads: int
    arrive: bool = False
    loc: Optional[Loc] = _loc()
    # the program's own (TileLang's ``T.sync_threads(barrier_id, arrive_count)``): the
    # passes and the code generator that take named barriers of their own (warp
    # specialization, MMA overlap, ``T.ws`` regions) refuse a kernel holding one
    program: bool = False


@dataclass(frozen=True)
class ClusterSync(Stmt):
    """``T.cluster_sync()``: every thread of every block of the cluster arrives and waits
    (``barrier.cluster.arrive`` + ``wait``).  The multicast pass ends a kernel with one,
    so that no block exits while another may still arrive on its mbarriers.  ``kind``:
    ``"sync"`` (both), or TileLang's halves ``"arrive"`` (``barrier.cluster.arrive``,
    release), ``"arrive_relaxed"`` (``.relaxed``: no memory ordering) and ``"wait"``
    (``barrier.cluster.wait``, acquire); a kernel not launched in clusters is a cluster of
    one block (sm_90+)."""

    loc: Optional[Loc] = _loc()
    kind: str = "sync"


@dataclass(frozen=True)
class TmaStoreWait(Stmt):
    """The thread that issues the block's TMA stores waits until the shared tiles of its
    stores so far have been read (``cp.async.bulk.wait_group.read 0``).  The barrier pass
    puts one before each block barrier that follows a store whose wait it deferred
    (``TmaCopy.wait_read``), and one at the kernel's end.

    ``program``: the program's own ``T.tma_store_wait(count, read)`` (TileLang's): that
    thread waits until at most ``count`` of its committed groups of bulk stores are
    pending, their reads of shared memory (``read``: ``.read``) or their writes to global
    memory as well (``cp.async.bulk.wait_group[.read] count``)."""

    loc: Optional[Loc] = _loc()
    count: int = 0
    read: bool = True
    program: bool = False


@dataclass(frozen=True)
class TmaStoreArrive(Stmt):
    """``T.tma_store_arrive()`` (TileLang's): the thread that issues the block's TMA stores
    commits its bulk stores not yet committed as one group (``cp.async.bulk.commit_group``;
    each TMA store commits its own, so this group is empty)."""

    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class WarpSync(Stmt):
    """``T.sync_warp(mask)``: ``bar.warp.sync`` (CUDA's ``__syncwarp``) over the lanes of
    ``mask`` (a ``uint32``; ``None``: the whole warp).  Every lane in the mask runs it."""

    mask: Optional[Expr] = None
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class AsyncCopyWait(Stmt):
    """The thread waits until its ``cp.async`` copies so far have landed in shared memory
    (``cp.async.wait_group 0``), with no barrier.  The barrier pass puts one before a
    statement that hands the thread's shared writes on without a block barrier (an
    mbarrier arrive, the program's partial barrier ``T.sync_threads(id, n)``,
    ``T.fence_proxy_async()``, a TMA store of the tile) while copies the vectorizer made
    cp.async may still be in flight: the program wrote a synchronous ``T.copy``.  The
    cp.async pipelining pass puts one before its prologue where such copies come before
    the loop (a Q tile): the loop's barriers then need not wait for every group."""

    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class WaitWgmma(Stmt):
    """``T.wait_wgmma(pending)``: wait until at most ``pending`` of this warpgroup's wgmma
    batches (the most recent ones) are in flight; the accumulators of the others may be
    read after it.  ``after`` (set by the MMA overlap): a float32 fragment written just
    before, whose writes the wait stays after (ptxas would move it up: ``tcm.anchor``)."""

    pending: int
    after: Optional[str] = None
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class MBarrierWait(Stmt):
    """``T.mbarrier_wait_parity(bar[i], parity)``: wait until the phase with this
    parity (0 or 1) of the mbarrier has completed."""

    barrier: Region
    parity: Expr
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class DevicePrint(Stmt):
    """TileLang's device print (``T.print``): every thread that runs it prints one line,
    ``msg='<msg>' BlockIdx=(x, y, z), ThreadIdx=(x, y, z)``, then ``: dtype=<t>
    value=<value>`` for a value, or ``: buffer=<buffer>, index=<index>, dtype=<t>
    value=<value>`` for a buffer element (``buffer`` is then the printed name)."""

    msg: str
    value: Optional[Expr] = None
    buffer: str = ""
    index: Optional[Expr] = None
    loc: Optional[Loc] = _loc()


@dataclass(frozen=True)
class DeviceAssert(Stmt):
    """TileLang's ``T.device_assert(cond, msg)``: a thread for which ``cond`` is false
    prints ``Device assert failed: <msg>`` (when there is one) and traps, which ends the
    launch with an error."""

    cond: Expr
    msg: str = ""
    loc: Optional[Loc] = _loc()


TILE_OPS = (Copy, Fill, Clear, Gemm, Reduce, AtomicAdd, Scan, Im2Col)


# --------------------------------------------------------------------------------------
# Kernel scopes and functions
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelScope(Stmt):
    """``with T.Kernel(*grid, threads=..., cluster=...) as block_vars:``"""

    grid: tuple[Expr, ...]  # 1..3 extents
    threads: tuple[int, ...]  # 1..3
    block_vars: tuple[Var, ...]  # one per grid dim
    body: tuple[Stmt, ...]
    cluster: Optional[tuple[int, ...]] = None
    loc: Optional[Loc] = _loc()
    # threads launched after the `threads` ones for a producer warpgroup (the
    # warp-specialization pass); the body's statements map onto `threads` alone
    producer_threads: int = 0
    # the TMA descriptor parameters of this kernel (the TMA descriptor pass), in order
    tma_descriptors: tuple["TmaDescriptor", ...] = ()
    # bytes of dynamic shared memory (the shared-memory pass)
    shared_bytes: int = 0
    # the shared buffers sized at launch (TileLang's dynamic shared memory): their bytes, an
    # expression of the function's symbols and scalar parameters, after the `shared_bytes`
    # (the shared-memory pass places them there; the launcher adds them up and checks them)
    launch_shared_bytes: Optional[Expr] = None
    # Programmatic Dependent Launch (option `pdl`): the kernel may start while the previous
    # kernel on the stream finishes; it waits for it (griddepcontrol.wait) before its body
    pdl: bool = False
    # T.annotate_min_blocks_per_sm(n): compiled for at least n resident blocks per SM
    # (CUDA's __launch_bounds__(threads, n)); 0: no bound
    min_blocks_per_sm: int = 0
    # the register budgets (per thread) of a warp-specialized kernel's roles: its producer
    # warpgroup's (T.annotate_producer_reg_dealloc) and its compute warpgroups'
    # (T.annotate_consumer_reg_alloc); 0: the compiler's choice.  reg_alloc=False
    # (T.no_set_max_nreg): no setmaxnreg, every thread keeps the launch's budget
    producer_regs: int = 0
    consumer_regs: int = 0
    reg_alloc: bool = True
    # T.annotate_safe_value({A: v}) (TileLang's safe_value_map on the kernel's block, which
    # holds for the whole body wherever the call stands): (global tensor, value) pairs; an
    # out-of-bounds read of the tensor (or of a view of it) reads the value instead of 0,
    # cast to the load's dtype (to a copy's destination dtype where a cast of the load is
    # what is stored).  Values are constants or expressions of the function's symbols and
    # scalar parameters
    safe_values: tuple[tuple[str, Expr], ...] = ()
    # T.annotate_l2_hit_ratio({A: 0.8}) (TileLang's l2_hit_ratio_map on the kernel's block,
    # which TileLang's host code applies around the function's launches): (global tensor,
    # hit ratio in [0, 1]) pairs; the launcher launches the function's kernels with an L2
    # access policy window over the tensor (docs/launch-abi.md, "L2 access policy window")
    l2_hit_ratios: tuple[tuple[str, float], ...] = ()

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


@dataclass(frozen=True)
class TmaDescriptor:
    """One TMA descriptor parameter of a kernel: ``TmaCopy.desc`` names it; the launcher
    encodes it per launch from tensor argument ``tensor`` with ``spec``."""

    name: str
    tensor: str
    dtype: str
    spec: TmaSpec


Param = Union[Buffer, Var]

# what a host-evaluable condition (PrimFunc.assumes) is built from: the launcher evaluates
# it in int64 C++ over the symbolic dims and the integer / bool scalar arguments
HOST_BINOPS = ("add", "sub", "mul", "floordiv", "mod", "min", "max")


def known_multiple(e: Expr) -> int:
    """The largest integer known to divide ``e`` at every launch (1 when nothing is known)."""
    if isinstance(e, Const):
        return abs(int(e.value)) or 0  # 0 is a multiple of everything
    if isinstance(e, Var):
        return e.multiple
    if isinstance(e, BinOp):
        a, b = known_multiple(e.a), known_multiple(e.b)
        if e.op == "mul":
            return a * b if a and b else 0
        if e.op in ("add", "sub"):
            return math.gcd(a, b)
        if e.op == "mod" and is_int(e.dtype) and isinstance(e.b, Const) and e.b.value:
            return math.gcd(a, b)  # x - c * floor(x / c)
    if isinstance(e, Cast) and is_int(e.dtype):
        return known_multiple(e.value)
    return 1


def assumed_divisor(cond: Expr):
    """``(name, k)`` where ``cond`` is ``N % k == 0`` of a variable ``N`` and a constant
    ``k > 1`` (TileLang's ``T.assume(N % k == 0)``), else None."""
    if isinstance(cond, Cmp) and cond.op == "eq" and isinstance(cond.b, Const) \
            and cond.b.value == 0 and isinstance(cond.a, BinOp) and cond.a.op == "mod" \
            and isinstance(cond.a.a, Var) and isinstance(cond.a.b, Const) and cond.a.b.value > 1:
        return cond.a.a.name, int(cond.a.b.value)
    return None


def host_condition_names(symbols, scalars, pointers) -> dict:
    """The names a host-evaluable condition may read (name -> Var): the ``symbols`` and
    the integer / bool ``scalars`` (parameter Vars) that are not ``pointers``."""
    names = {v.name: v for v in symbols}
    names.update({v.name: v for v in scalars
                  if v.name not in pointers and (is_int(v.dtype) or v.dtype == "bool")})
    return names


def is_host_condition(e: Expr, names: dict) -> bool:
    """Whether ``e`` is a bool expression the launcher can evaluate: constants (ints,
    bools), the ``Var``s of ``names`` (name -> Var: the function's symbols and its integer
    and bool scalar params), ``HOST_BINOPS``, comparisons, ``and``/``or``/``not``,
    ``T.ceildiv``, integer casts.  No memory, no thread index, no float (TileLang's
    host-evaluable condition, over what tilecute's launcher reads as int64)."""
    def ok(x: Expr) -> bool:
        if isinstance(x, Const):
            return isinstance(x.value, (bool, int)) and (x.dtype == "bool" or is_int(x.dtype))
        if isinstance(x, Var):
            v = names.get(x.name)
            return v is not None and v.dtype == x.dtype
        if isinstance(x, BinOp):
            return x.op in HOST_BINOPS and is_int(x.dtype) and ok(x.a) and ok(x.b)
        if isinstance(x, Cmp):
            return ok(x.a) and ok(x.b)
        if isinstance(x, Logic):
            return all(ok(a) for a in x.args)
        if isinstance(x, Not):
            return ok(x.a)
        if isinstance(x, Cast):
            return (is_int(x.dtype) or x.dtype == "bool") and ok(x.value)
        if isinstance(x, Call):
            return x.name == "ceildiv" and len(x.args) == 2 and all(ok(a) for a in x.args)
        return False
    return isinstance(e, Expr) and e.dtype == "bool" and ok(e)


@dataclass(frozen=True)
class PrimFunc:
    """A function: params (global tensors and scalars) and one or more kernel scopes,
    launched in order.  ``symbols`` are the symbolic extents/strides, in first-use order."""

    name: str
    params: tuple[Param, ...]
    kernels: tuple[KernelScope, ...]
    symbols: tuple[Var, ...] = ()
    loc: Optional[Loc] = _loc()
    # global tensors indexed with 64-bit offsets (the index-width pass)
    wide_tensors: tuple[str, ...] = ()
    # params that are workspaces (``T.alloc_global``): the last params, allocated by each
    # call and passed to the kernels, never given by the caller nor returned
    workspaces: tuple[str, ...] = ()
    # TileLang's function attributes, read by ``tilecute.compile`` (which compiles the
    # function without them): ``out_idx`` (``tilelang_out_idx``) the ``T.empty`` outputs
    # the body returns, negative indices in ``return`` order; ``pass_configs``
    # (``T.annotate_pass_configs``, (key, value) pairs) and ``compile_flags``
    # (``T.annotate_compile_flags``), merged with the caller's as TileLang merges them
    out_idx: Optional[tuple[int, ...]] = None
    pass_configs: tuple[tuple[str, Union[bool, int, float, str]], ...] = ()
    compile_flags: tuple[str, ...] = ()
    # scalar params that are TileLang's pointer parameters (``a_ptr: T.ptr``): int64 ``Var``s
    # holding a device address, which the caller passes as a tensor (its data pointer) or
    # an int; ``T.make_tensor(a_ptr, shape, dtype)`` views the memory there
    # (``Allocate.address``)
    pointers: tuple[str, ...] = ()
    # TileLang's host-evaluable ``T.assume(cond)``s: conditions over the symbolic dims and
    # the integer / bool scalar params only (no memory, no thread index), stated where no
    # loop or branch encloses them; the launcher checks each at every call (a
    # RuntimeError "Assume: ...", as TileLang's host code raises).  ``N % k == 0`` on a
    # symbol is the symbol's ``multiple`` instead.
    assumes: tuple[Expr, ...] = ()

    def without_attrs(self) -> "PrimFunc":
        """The function without TileLang's function attributes (what is compiled)."""
        if self.out_idx is None and not self.pass_configs and not self.compile_flags:
            return self
        return replace(self, out_idx=None, pass_configs=(), compile_flags=())

    def buffer(self, name: str) -> Optional[Buffer]:
        for p in self.params:
            if isinstance(p, Buffer) and p.name == name:
                return p
        return None

    def script(self) -> str:
        from .printer import print_func

        return print_func(self)

    def to_json(self) -> str:
        from .serialize import to_json

        return to_json(self)

    def __str__(self) -> str:
        return self.script()


# ---- TVM's ==/!= in the plain Python helpers a kernel calls ------------------------------------
_PRIMEXPR_EQ = [0]  # how many plain Python helpers of a kernel are running
_HELPER_BOOL = ("a run-time value used as a Python bool (`if`, `and` / `or` / `not`, "
                "`x if c else y`, max() / min() of run-time values) in a plain Python helper: "
                "TileLang refuses it too (TVM's \"Cannot use and / or / not operator to Expr\"); "
                "use T.if_then_else, T.max / T.min, T.And / T.Or")


@contextmanager
def primexpr_equality():
    """While a kernel's plain Python helper runs (``T.if_then_else(e == 0, a, b)`` in
    TileLang's fp4 and int4 converters), ``==``/``!=`` between an expression and an
    expression or a number build ``Cmp('eq' | 'ne')``, TVM's ``EqualOp`` / ``NotEqualOp``;
    elsewhere (the passes, tests) they stay structural equality."""
    _PRIMEXPR_EQ[0] += 1
    try:
        yield
    finally:
        _PRIMEXPR_EQ[0] -= 1


def _equal_op(op: str, a: Expr, b) -> Expr:
    structural = _STRUCTURAL_EQ.get(type(a), object.__eq__)(a, b) is True
    try:
        c = cmp(op, a, b)
    except TypeError:  # operands no comparison takes: the Python value
        return structural if op == "eq" else not structural
    object.__setattr__(c, "_structural", structural if op == "eq" else not structural)
    return c


def _tvm_eq(structural):
    def __eq__(self, o):
        if _PRIMEXPR_EQ[0] and isinstance(o, (Expr, int, float)):
            return _equal_op("eq", self, o)
        return structural(self, o)
    __eq__.__doc__ = structural.__doc__
    return __eq__


def _expr_classes(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _expr_classes(sub)


_STRUCTURAL_EQ = {}
for _cls in _expr_classes(Expr):
    _STRUCTURAL_EQ[_cls] = _cls.__eq__
    _cls.__eq__ = _tvm_eq(_cls.__eq__)

