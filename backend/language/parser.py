"""Parse a ``@T.prim_func`` Python function (its AST) into a ``tilecute.ir.PrimFunc``.

Values of closure and global names are taken at parse time: Python ints, floats, bools,
dtypes and tuples fold into the IR as constants, so ``if block_M > 64:`` picks a branch
while parsing.  Names bound inside the body become IR variables, renamed where they
would shadow one another so that generated code keeps TileLang's scoping.  Anything the
frontend does not support is a :class:`FrontendError` at its source line.

``T.*`` forms are recognised by value (``forms.Form``), and a call's arguments are bound
to the form's signature (TileLang's) before anything is read from them: positional and
keyword spellings mean the same, and an unknown argument, or a TileLang argument
tilecute does not honor, is an error naming the form, the argument and the line.

Imports the IR, the values, forms and ops modules; never the ``T`` namespace
(``tilecute.language``), which imports this module.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import math
import struct
import textwrap
import sys
import types
from typing import Any, Optional

from ..ir import nodes as N
from ..refusals import Refused
from ..ir.printer import expr_str, layout_str
from ..ir.visitor import fold_constants, linear_form, rebuild, substitute, var_names, walk_nodes, walk_stmts
from ..ir.rasterization import panel_order
from ..ir.validate import RESERVED, RESERVED_PREFIXES, validate
from .fragment_extents import widen_loop_fragments
from . import cp_async_lanes
from .negative_index import lane_wrap, legalize_negative_indices
from ..target import WARP
from ..runtime.dtypes import DTYPES, UnknownDTypeError
from ..target import TMA_REDUCE_ADD_TYPES
from . import forms as F
from . import layouts as L
from . import bits as B
from . import lanes as VL
from . import ops
from .tile_schedule import PersistentTileScheduler, StateStores
from .values import (DType, GemmWarpPolicy, HandleSpec, Layout, Macro, Pointer, TensorSpec,
                     _HandleProxy, _TensorProxy, dtype_name, dynamic, meta_var,
                     plain_signature, signature_error, tensor_dtype_name)
from .values import POINTER_DTYPE
from . import values as V

MAX_PARALLEL_DIMS = 8


def _is_ptr(x) -> bool:
    """Is ``x`` TVM's ``T.handle`` (an opaque pointer a ``T.match_buffer`` binds), called or not?"""
    return isinstance(x, (_HandleProxy, HandleSpec))


def empty_args(name: str, args: list, kw: dict, fail) -> tuple:
    """The (shape, dtype) of TileLang's ``T.empty(shape, dtype)``, ``T.empty(shape,
    dtype=...)`` or ``T.empty(d0, d1, ..., dtype=...)`` (dtype float32 when not given), from
    its evaluated arguments; ``fail(message)`` makes the error to raise (a prim_func's
    output and an eager kernel's read it alike)."""
    if set(kw) - {"dtype"}:
        raise fail(f"T.empty for '{name}': unexpected keyword(s) "
                   f"{', '.join(sorted(set(kw) - {'dtype'}))}; T.empty(shape, dtype)")
    dtype = kw.get("dtype", "float32")
    if len(args) in (1, 2) and isinstance(args[0], (list, tuple)):
        shape = tuple(args[0])
        if len(args) == 2:
            if "dtype" in kw:
                raise fail(f"T.empty for '{name}': dtype given twice")
            dtype = args[1]
    elif args and all(isinstance(a, (int, N.Expr)) and not isinstance(a, bool) for a in args):
        shape = tuple(args)
    elif args and hasattr(args[0], "__len__") and hasattr(args[0], "__getitem__") and \
            not isinstance(args[0], (str, bytes)):
        # TileLang's T.empty takes a tuple or list; a buffer's .shape is a TVM Array there
        raise fail(f"T.empty for '{name}': the shape is a tuple or list of dims, got "
                   f"{type(args[0]).__name__} {list(args[0])} (TileLang's T.empty refuses a tensor's "
                   ".shape, a TVM Array, too: write tuple(A.shape))")
    else:
        raise fail(f"T.empty for '{name}': the shape is a tuple or list of dims (or the dims "
                   "themselves), then the dtype")
    return shape, dtype


class FrontendError(SyntaxError):
    """A construct the frontend rejects, reported at its source line."""

    def __init__(self, msg: str, loc: Optional[N.Loc], func: str, source_line: str = ""):
        self.loc, self.func, self.msg_text = loc, func, msg
        where = f"{loc}: " if loc else ""
        text = f"{where}in prim_func '{func}': {msg}"
        if source_line:
            text += f"\n    {source_line.strip()}"
        super().__init__(text)

    def __str__(self) -> str:
        return self.args[0]


class FrontendValueError(FrontendError, ValueError):
    """A FrontendError where TileLang raises ValueError for the same form and argument (a
    T.Ref macro argument that is not a reference, ``T.finalize_reducer``'s ``batch`` < 1,
    an ``T.alloc_var`` float ``init`` past its dtype, an atomic's unsupported
    ``memory_order``, a shared buffer's non-injective ``T.Layout``), so ``except
    ValueError`` written for TileLang catches it."""


class FrontendAssertionError(FrontendError, AssertionError):
    """A FrontendError where TileLang's helper asserts (``T.reshape``'s bit-count check),
    so ``except AssertionError`` written for TileLang catches it."""


class FrontendTypeError(FrontendError, TypeError):
    """A FrontendError where TileLang raises TypeError (a T.* helper that raises
    TypeError on its arguments, as TileLang's own helper does)."""


class _BufferRef:
    """A buffer name in the parse scope (params and allocations)."""

    def __init__(self, buffer: N.Buffer):
        self.buffer = buffer


class _VarRef(_BufferRef):
    """A ``T.alloc_var`` name: a one-element local buffer that reads and assigns like a
    scalar (``x = x + 1`` stores into it)."""

    indices = (N.Const(0, "int32"),)


class _ElemRef(_VarRef):
    """A ``T.macro`` parameter annotated ``T.Ref`` (or ``T.Var``) given a buffer element
    ``A[i, j]``: it reads and assigns like a ``T.alloc_var``, at those indices (TileLang's
    ``Ref``; the indices were evaluated once, at the call)."""

    def __init__(self, buffer: N.Buffer, indices: tuple, name: str):
        super().__init__(buffer)
        self.indices, self.name = indices, name


@dataclasses.dataclass
class _Lambda:
    """A ``lambda`` passed to a ``T.macro`` (``apply(x, lambda v: v * 2.0)``): its body is
    parsed where the macro calls it, with the names it does not bind resolved where it was
    written."""
    node: ast.Lambda
    scopes: list
    env: dict


class _RegionRef:
    """A name bound to a proper sub-region of a buffer (``X = A_s[0:M, 0:K]``, TileLang's
    buffer-region alias): T.copy / T.fill / T.clear / T.atomic_add take it as that region;
    a form that needs a whole buffer refuses it naming the alias and its line."""

    def __init__(self, region: N.Region, name: str, line: str, bound_at=None):
        self.region, self.name, self.line = region, name, line
        # (open block, statements emitted) where it was bound: read as a vector value
        # (TVM's vector load at the binding) only while both are unchanged
        self.bound_at = bound_at

    def refuse(self, parser, node, what: str):
        return parser.error(node, f"'{self.name}' is a region of '{self.region.buffer}' (bound "
                                  f"at {self.line}), not a buffer; {what} takes a whole buffer "
                                  "(T.copy, T.fill, T.clear and T.atomic_add take the region)")


class _VectorVarRef:
    """A ``T.alloc_var(T.float16x2)`` name: a variable of ``lanes`` scalars (a local buffer
    of that many elements), read as a vector of its lanes and assigned a whole vector."""

    def __init__(self, buffer: N.Buffer, lanes: int):
        self.buffer, self.lanes = buffer, lanes

    def indices(self) -> list:
        return [(N.Const(k, "int32"),) for k in range(self.lanes)]

    def value(self) -> VL.LaneVector:
        return VL.LaneVector(tuple(N.Load(self.buffer.name, i, self.buffer.dtype)
                                   for i in self.indices()))


class _VectorBufferRef:
    """A ``T.alloc_local(shape, T.float16x2)`` name: a local buffer of vectors, held as
    ``shape + (lanes,)`` scalars; ``v[i]`` reads element ``i`` as a vector of its lanes,
    ``v[i] = x`` stores a vector of as many lanes."""

    def __init__(self, buffer: N.Buffer, lanes: int):
        self.buffer, self.lanes = buffer, lanes

    def element(self, idx) -> list:
        return [tuple(idx) + (N.Const(k, "int32"),) for k in range(self.lanes)]


class _DataRef:
    """``buf.data``: a buffer's storage, which ``T.Tensor(shape, dtype, buf.data)`` views."""

    def __init__(self, buffer: N.Buffer):
        self.buffer = buffer


# the T.copy annotation keys tilecute reads: each the argument of its name (TileLang's
# T.copy puts its keyword arguments into the annotations; loop_layout's key is
# "parallel_loop_layout"), with that argument's meaning
_COPY_ANNOTATIONS = ("coalesced_width", "disable_tma", "eviction_policy", "prefer_instruction",
                     "parallel_loop_layout", "is_async_copy", "force_cp_async")
# the keys by which TileLang's T.copy becomes T.async_copy (its copy lowering reads
# "is_async_copy", and "force_cp_async" as its older name): a true value makes the copy
# asynchronous, as T.async_copy
_ASYNC_COPY_KEYS = ("is_async_copy", "force_cp_async")
# the scalar parameters' dtypes a T.empty dim may name (its output allocated from their
# values; the eager frontend's too)
_INT_SCALAR_DIMS = ("int32", "int64", "uint32", "int16", "uint16", "int8", "uint8")
# the T.Parallel annotation keys tilecute reads (TileLang's lower_tile_op.cc reads these
# on a parallel loop): coalesced_width and parallel_loop_layout as their arguments, the
# two async-copy hints as docs/ir.md says (neither can change a result)
_PARALLEL_ANNOTATIONS = ("coalesced_width", "parallel_prefer_async",
                         "parallel_async_without_async_commit_wait", "parallel_loop_layout")
_PARALLEL_ANNOTATIONS_REFUSED = {
    "parallel_loop_predicate": "a predicate on the loop's iterations (TileLang's lowering "
                               "sets it with a loop layout); tilecute has none",
    "parallel_loop_requires_padding_guard": "a guard of a loop layout's padding (TileLang's "
                                            "lowering sets it with a loop layout); tilecute "
                                            "has none",
}
_NO_COMMIT = ("TileLang's pipeline pass sets it on the copies it makes asynchronous (cp.async "
              "with neither the commit nor the wait, which the pipeline places); tilecute's "
              "T.copy is synchronous and T.async_copy commits its own group: write "
              "T.async_copy with T.ptx_wait_group")
_TMA_COPY_KEY = "T.tma_copy's / T.copy_cluster's (barrier, multicast and leader scope of a TMA copy)"
# T.gemm annotation keys of TileLang's GEMM op that its other forms set
_GEMM_ANNOTATIONS_REFUSED = {
    "is_wgmma": "TileLang's T.wgmma_gemm sets it: write T.wgmma_gemm",
    "is_tcgen05": "TileLang's T.tcgen05_gemm sets it (Blackwell's tcgen05 MMA, which tilecute "
                  "does not build)",
    "use_2cta": "Blackwell's two-block tcgen05 MMA (sm_100), which tilecute does not build",
}
_COPY_ANNOTATIONS_REFUSED = {
    "no_implicit_async_commit_wait": _NO_COMMIT,
    "is_tma_copy": _TMA_COPY_KEY, "barrier": _TMA_COPY_KEY, "cluster_mask": _TMA_COPY_KEY,
    "leader_scope_threads": _TMA_COPY_KEY, "emit_arrive": _TMA_COPY_KEY,
    "dst_block": "T.copy_cluster's (a copy into another block's shared memory)",
}


class _Given:
    """A call argument whose value is already known (from ``*args`` / ``**kwargs``)."""

    def __init__(self, value, node):
        self.value, self.node = value, node


_LOOPS = {"Parallel": "parallel", "serial": "serial", "Serial": "serial", "unroll": "unrolled",
          "grid": "serial",
          "Unroll": "unrolled", "vectorized": "unrolled", "Vectorized": "unrolled",
          "Pipelined": "pipelined"}
# TileLang's memory scopes (the `scope` argument of T.alloc_*) -> tilecute's
_SCOPES = {"shared.dyn": "shared", "shared": "shared", "local.fragment": "fragment",
           "local": "local", "local.var": "local"}
# T.alloc_buffer's arguments beyond shape, dtype and scope, and their TVM defaults
_TVM_BUFFER_DETAILS = {"data": None, "strides": None, "elem_offset": None, "align": -1,
                       "offset_factor": 0, "buffer_type": "default", "axis_separators": None,
                       "annotations": None}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
        ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "bitand", ast.BitOr: "bitor",
        ast.BitXor: "bitxor", ast.LShift: "shl", ast.RShift: "shr"}


def _is_ir(x) -> bool:
    return isinstance(x, N.Expr)


class _Args:
    """A ``T.*`` call's arguments bound to the form's signature.

    ``value(name)`` evaluates an argument (its default when the call does not give it);
    ``node(name)`` is the AST node to report an error at; ``given(name)`` says whether
    the call names it.  Binding errors (an unknown keyword, one positional too many, a
    missing argument) name the form, the argument and the line."""

    def __init__(self, parser: "_Parser", name: str, sig: inspect.Signature, call: ast.Call,
                 prefix: str = "T."):
        self.parser, self.name, self.sig, self.call = parser, name, sig, call
        self.prefix = prefix
        pos: list = []
        kw: dict = {}
        for a in call.args:
            if isinstance(a, ast.Starred):
                pos.extend(_Given(v, a) for v in parser.eval_python(a.value))
            else:
                pos.append(a)
        for k in call.keywords:
            if k.arg is None:
                kw.update({n: _Given(v, k.value) for n, v in parser.eval_python(k.value).items()})
            else:
                kw[k.arg] = k.value
        texts = [ast.unparse(r) if isinstance(r, ast.AST) else repr(r.value) for r in pos]
        error = signature_error(f"{prefix}{name}", sig, texts, kw)
        if error:
            raise parser.error(call, error)
        self.bound = sig.bind(*pos, **kw)
        self._values: dict = {}

    def given(self, name: str) -> bool:
        return name in self.bound.arguments

    def node(self, name: str):
        ref = self.bound.arguments.get(name)
        if isinstance(ref, _Given):
            return ref.node
        return ref if isinstance(ref, ast.AST) else self.call

    def ref(self, name: str):
        """The raw argument: an AST node, a :class:`_Given`, or a tuple of them for
        ``*args``; the default when the call does not give it."""
        if name in self.bound.arguments:
            return self.bound.arguments[name]
        p = self.sig.parameters[name]
        return {p.VAR_POSITIONAL: (), p.VAR_KEYWORD: {}}.get(p.kind, p.default)

    def value(self, name: str):
        if name not in self._values:
            v = self.parser.arg_value(self.ref(name))
            if isinstance(v, N.Var):
                # a kernel name bound to True / False: TileLang binds the Python bool, so
                # the argument is one (transpose_B=tb, disable_tma=flag, clear=keep)
                e = self.parser.expand(v)
                if isinstance(e, N.Const) and e.dtype == "bool":
                    v = bool(e.value)
            self._values[name] = v
        return self._values[name]

    def fail(self, name: str, msg: str, kind: type = None) -> "FrontendError":
        return self.parser.error(self.node(name), f"{self.prefix}{self.name}: {msg}", kind)

    def refuse_unless(self, name: str, accepted, why: str) -> None:
        """An argument tilecute does not honor: an error when the call gives it a value
        other than ``accepted`` (TileLang's default, and spellings meaning the same)."""
        if not self.given(name):
            return
        v = self.value(name)
        if any(v is a or (type(v) is type(a) and v == a) for a in accepted):
            return
        raise self.fail(name, f"{name}={_show(v)} is not supported: {why}")

    def no_annotations(self) -> None:
        self.refuse_unless("annotations", (None, {}), "tilecute takes no annotations")

    def annotations(self, honored, refused: Optional[dict] = None) -> dict:
        """The call's ``annotations={...}`` (TileLang's dict of keys its passes read on a
        tile op or loop), as ``{key: value}`` for the keys in ``honored`` (the caller reads
        each as the argument it stands for).  A key in ``refused`` is an error with that
        reason; any other key is an error naming it: an annotation tilecute does not know
        is refused, never dropped."""
        ann = self.value("annotations")
        if ann is None:
            return {}
        if not isinstance(ann, dict):
            raise self.fail("annotations", f"annotations is a dict {{key: value}}, got {_show(ann)}")
        for key in ann:
            if not isinstance(key, str):
                raise self.fail("annotations", f"annotations={_show(ann)}: the keys are strings, "
                                               f"got {_show(key)}")
            if key in honored:
                continue
            why = (refused or {}).get(key)
            if why is None:
                why = (f"tilecute does not know this annotation (it reads "
                       f"{', '.join(repr(k) for k in honored) or 'none'} on {self.prefix}{self.name})")
            raise self.fail("annotations", f"annotations={{{key!r}: {_show(ann[key])}}} is not "
                                           f"supported: {why}")
        return dict(ann)

    def static_bool(self, name: str) -> bool:
        v = self.value(name)
        if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
            return bool(v)
        raise self.fail(name, f"{name} must be True or False, known at parse time; got {_show(v)}")

    def static_int(self, name: str, lo: Optional[int] = None) -> int:
        v = self.value(name)
        if isinstance(v, N.Expr):
            # an integer constant expression (``T.int32(2)``, a kernel name bound to an
            # int): TileLang binds such a name to the Python int, an IntImm reads as one
            f = self.parser.folded(v)
            if isinstance(f, N.Const) and N.is_int(f.dtype) and f.dtype != "bool":
                v = f.value
        if isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo):
            return v
        bound = f" >= {lo}" if lo is not None else ""
        raise self.fail(name, f"{name} must be an int{bound} known at parse time; got {_show(v)}")


_PYTHON_OPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
               "div": lambda x, y: x / y, "floordiv": lambda x, y: x // y,
               "mod": lambda x, y: x % y, "shl": lambda x, y: x << y, "shr": lambda x, y: x >> y,
               "bitand": lambda x, y: x & y, "bitor": lambda x, y: x | y,
               "bitxor": lambda x, y: x ^ y}


def _python_number(v):
    """``v`` as TileLang's Python number: a Python int or float (not a bool), or an int32
    constant (TileLang's kernel name bound to an int32 IntImm holds the Python int); None
    for anything else."""
    if isinstance(v, N.Const) and v.dtype == "int32":
        return int(v.value)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    return None


def _annotated_args(a: _Args, ann: dict):
    """``given(name, key, default)`` -> (value, where, shown) for a call that folds its
    keyword arguments into ``annotations`` (TileLang's copies: annotation values win):
    the value of annotation ``key`` if the call has it, else of argument ``name`` (its
    ``default`` when not given), with the argument an error names and its text."""
    def given(name: str, key: str, default):
        if key in ann:
            return ann[key], "annotations", f"annotations={{{key!r}: {_show(ann[key])}}}"
        v = a.value(name) if a.given(name) else default
        return v, name, f"{name}={_show(v)}"
    return given


def _reducer_identity(op: str, dtype: str) -> N.Const:
    """The combine identity a reducer epoch's partials start from (TileLang's): 0 for sum,
    bitor and bitxor, -inf / the least value for max, +inf / the greatest for min, all ones
    for bitand."""
    if op in ("sum", "bitor", "bitxor"):
        return N.const(0, dtype)
    if N.is_float(dtype):
        return N.const(float("-inf") if op == "max" else float("inf"), dtype)
    bits = int("".join(c for c in dtype if c.isdigit()) or 32)
    signed = dtype.startswith("int")
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return N.Const({"max": lo, "min": hi}.get(op, -1 if signed else hi), dtype)


def _reducer_combine(op: str, acc: N.Expr, value: N.Expr) -> N.Expr:
    return N.BinOp({"sum": "add"}.get(op, op), acc, value, acc.dtype)


# the intrinsics without effects and without thread state (pure in TVM's sense)
_PURE_CALLS = frozenset(N.FLOAT_MATH + N.FLOAT_PREDICATES + N.IEEE_FORMS + (
    "abs", "fma", "ceildiv", "truncdiv", "truncmod", "popcount", "clz", "reinterpret", "ffs",
    "bitwise_not"))


def _reserved(name: str) -> bool:
    """A name the IR keeps for generated code (``validate.RESERVED``)."""
    return name in RESERVED or name.startswith(RESERVED_PREFIXES)


def _host_pure(e, symbols, scalars) -> bool:
    """Whether ``e`` is an expression of constants, the function's symbols and scalar
    parameters, without loads or effects: a value the prim_func level may hold (TVM's
    ``side_effect(e) <= Pure``)."""
    if isinstance(e, N.Const):
        return True
    if isinstance(e, N.Var):
        return e.name in symbols or e.name in scalars
    if isinstance(e, (N.BinOp, N.Cmp)):
        return _host_pure(e.a, symbols, scalars) and _host_pure(e.b, symbols, scalars)
    if isinstance(e, N.Logic):
        return all(_host_pure(a, symbols, scalars) for a in e.args)
    if isinstance(e, N.Not):
        return _host_pure(e.a, symbols, scalars)
    if isinstance(e, N.Cast):
        return _host_pure(e.value, symbols, scalars)
    if isinstance(e, N.Select):
        return all(_host_pure(x, symbols, scalars) for x in (e.cond, e.a, e.b))
    if isinstance(e, N.Call):
        return e.name in _PURE_CALLS and all(_host_pure(a, symbols, scalars) for a in e.args)
    return False


def _show(v) -> str:
    if isinstance(v, N.Expr):
        from ..ir.printer import expr_str

        return f"`{expr_str(v)}`"
    if isinstance(v, GemmWarpPolicy):
        return f"T.GemmWarpPolicy.{v.name}"
    if isinstance(v, _BufferRef):  # a buffer given where a value is taken
        return f"buffer '{v.buffer.name}'"
    return repr(v)


@dataclasses.dataclass(frozen=True)
class _CommReducer:
    """A ``T.comm_reducer(combiner, identity)`` as parsed: the combiner (a lambda's AST or
    the node of a Python function), its parameter names and the identity values; the
    combiner's expressions are made at each T.tvm_thread_allreduce, over variables of its
    values' dtypes (TVM substitutes the values into the combiner)."""

    combiner: Any
    names: list
    identity: tuple
    node: Any


def _thread_dim(e, let_values: dict) -> Optional[int]:
    """The dim d when ``e`` is ``threadIdx.<d>`` (``T.get_thread_binding(d)``, a name bound
    to it, an integer cast of it), else None."""
    seen = set()
    while True:
        while isinstance(e, N.Cast) and N.is_int(e.dtype):
            e = e.value
        if isinstance(e, N.Var) and e.name in let_values and e.name not in seen:
            seen.add(e.name)
            e = let_values[e.name]
            continue
        break
    if isinstance(e, N.Call) and e.name == "thread_idx" and isinstance(e.args[0], N.Const):
        return int(e.args[0].value)
    return None


def _allreduce_op(lhs, rhs, results) -> str:
    """The op string of a one-value combiner that is ``x + y``, ``T.max(x, y)``, ... (either
    operand order), else ""."""
    if len(results) != 1:
        return ""
    r = results[0]
    ops = {"add": "sum", "max": "max", "min": "min", "bitand": "bitand", "bitor": "bitor",
           "bitxor": "bitxor"}
    if isinstance(r, N.BinOp) and r.op in ops and r.dtype == lhs[0].dtype and \
            {r.a, r.b} == {lhs[0], rhs[0]} and r.a != r.b:
        return ops[r.op]
    return ""


def _reads_state(e) -> bool:
    """``e`` loads from a buffer or calls something (not a pure index expression)."""
    return any(isinstance(n, (N.Load, N.Call)) for n in walk_nodes(e))


def _tvm_loop_control(fdef, env: dict) -> None:
    """TVM's explicit loop control as the Python statements it stands for, in place:
    ``T.break_loop()`` / ``T.continue_loop()`` written as a statement (also inside
    ``T.evaluate(...)``, as TileLang's builder emits Python's ``break`` / ``continue``:
    ``T.evaluate(T.break_loop())``) become ``break`` / ``continue``.  A call with a
    ``span`` other than None is left alone (its form's refusal names it)."""
    module = sys.modules[__package__]

    def is_t(func, names) -> bool:
        return isinstance(func, ast.Attribute) and func.attr in names and \
            isinstance(func.value, ast.Name) and env.get(func.value.id) is module

    def control(e):
        if isinstance(e, ast.Call) and is_t(e.func, ("evaluate",)) and len(e.args) == 1 \
                and not e.keywords:
            e = e.args[0]
        if not (isinstance(e, ast.Call) and is_t(e.func, ("break_loop", "continue_loop"))):
            return None
        spans = list(e.args) + [k.value for k in e.keywords if k.arg == "span"]
        if len(e.args) > 1 or any(k.arg != "span" for k in e.keywords) or len(spans) > 1 or \
                not all(isinstance(v, ast.Constant) and v.value is None for v in spans):
            return None
        return ast.Break if e.func.attr == "break_loop" else ast.Continue

    for node in ast.walk(fdef):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, st in enumerate(stmts):
                kind = control(st.value) if isinstance(st, ast.Expr) else None
                if kind is not None:
                    stmts[i] = ast.copy_location(kind(), st)
                    stmts[i].tvm_form = ast.unparse(st.value)


def _written_as(s) -> dict:
    """The ``form`` of a ``_Break`` / ``_Continue`` from ``s``: TVM's call as written when
    :func:`_tvm_loop_control` made ``s`` of one."""
    form = getattr(s, "tvm_form", None)
    return {"form": form} if form else {}


def _has_return(node) -> bool:
    """``node`` holds a ``return`` of its own function (not a nested one's)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not node:
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


def holds_kernel(fn) -> bool:
    """A plain Python function whose own body opens a ``with T.Kernel(...)`` (or
    ``T.ClusterKernel``) block or declares a ``T.empty`` output: called at the top level of
    a prim_func or an eager kernel, TileLang's builder runs it there, and its blocks and
    outputs are the function's."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False

    env = _function_env(fn)

    def attr_call(node, names):  # `T.<name>(...)`, T the tilecute.language module
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in names and isinstance(node.func.value, ast.Name) and \
            env.get(node.func.value.id) is sys.modules[__package__]

    return any(isinstance(n, ast.With) and any(attr_call(i.context_expr, ("Kernel", "ClusterKernel"))
                                               for i in n.items) or attr_call(n, ("empty",))
               for n in ast.walk(tree))


def _return_in_loop(stmts):
    """A ``return value`` under a loop, ``with`` or ``try`` of a macro's body (``if``s are
    decided while parsing), else None."""
    for t in stmts:
        if isinstance(t, ast.If):
            found = _return_in_loop(t.body) or _return_in_loop(t.orelse)
            if found is not None:
                return found
        elif isinstance(t, (ast.For, ast.While, ast.With, ast.Try)):
            for n in ast.walk(t):
                if isinstance(n, ast.Return) and n.value is not None:
                    return n
    return None


def _python_scalar(v):
    """A NumPy integer or float (`M = np.prod(shape)`) as Python's int or float, as TVM
    converts it where TileLang meets it (a shape, an extent, an operand)."""
    if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", None) == 0 \
            and getattr(getattr(v, "dtype", None), "kind", "") in "iuf":
        return v.item()
    return v


# Python container methods an expression statement may call while parsing
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "update", "add", "setdefault"})


class _Parser:
    def __init__(self, tree: ast.FunctionDef, env: dict, filename: str, line_offset: int,
                 source_lines: list[str], annotations: Optional[dict] = None):
        self.tree, self.env, self.filename = tree, env, filename
        _tvm_loop_control(tree, env)
        self.reassigned = _reassigned_names(tree)  # (in the function parsed now)
        self.annotations = annotations or {}
        self.line_offset, self.source_lines = line_offset, source_lines
        self.fname = tree.name
        self.scopes: list[dict[str, Any]] = [{}]
        # name -> [(scope of the binding a loop/if body rebound, the body's scope, line)]
        self.rebound_inside: dict[str, list] = {}
        # every buffer bound so far, by its IR name (a macro's body sees only its own
        # scope, and a region it was given names its buffer)
        self.named_buffers: dict[str, N.Buffer] = {}
        self.control: list[bool] = [False]  # per scope: is it a loop or if body?
        # per scope: ("loop" | "parallel" | "if", serial number) for the loop/if bodies,
        # None for other scopes (reducer epochs compare where init and finalize stand)
        self.ctx: list = []
        self.epochs: dict[str, dict] = {}  # T.alloc_reducer without replication: its epoch
        self.used_names: set[str] = set()
        self.symbols: dict[str, N.Var] = {}
        self.let_values: dict[str, N.Expr] = {}  # a name's Let var -> its value (assert_stmt)
        # statements emitted so far and the blocks open now (a region alias's vector read)
        self.emitted, self.blocks_opened, self.open_blocks = 0, 0, []
        self.declared: set[str] = set()  # `x = T.int32()` vars awaiting their T.let
        self.current_form = "this form"  # the statement form parsed now (region alias errors)
        self.assumed_divisors: dict[str, int] = {}
        self.scalar_param_vars: set[str] = set()  # the scalar parameters made so far
        self.scalar_params: set[str] = set()  # set by parse  # T.assume(N % k == 0): symbol -> k
        self.scalar_vars: dict[str, N.Var] = {}  # set by parse: the scalar params' Vars
        self.host_assumes: list[N.Expr] = []  # T.assume(...)s the launcher checks (stmt_assume)
        self.workspaces: list[N.Buffer] = []  # T.alloc_global
        self.pointers: list[str] = []  # the `p: T.ptr` parameters
        # `A = T.make_tensor(p, shape, dtype)` at the top level of the body: (program name,
        # buffer, address, statement), allocated at the start of each T.Kernel that follows
        self.top_tensors: list[tuple[str, N.Buffer, N.Expr, ast.stmt]] = []
        # top-level views of a parameter's storage, parsed again at each T.Kernel's start
        self.top_views: list[ast.Assign] = []
        self.address_tensors: set[str] = set()  # the buffers T.make_tensor made
        self.used_names.add(self.fname)  # the function's own name is taken too
        self.in_kernel = False
        self.vectorized_loops = 0  # T.vectorized loops around the statement parsed now
        # T.alloc_var's declared without init: TileLang zeroes them once, at the kernel's top
        self.default_zero_vars: set[str] = set()
        self.in_ws = False  # inside `with T.ws(...)` (or a branch made a region)
        self.in_varying_if = False  # inside an `if` whose condition may differ by thread
        # the T.comm_reducer of each enclosing T.attr(..., "reduce_scope", ...), innermost last
        self.reduce_scopes: list[_CommReducer] = []
        self.view_roots: dict[str, N.Buffer] = {}  # a view's name -> the buffer it views
        self.view_offsets: dict[str, N.Expr] = {}  # a view -> its start (elements), if not 0
        self.pending: Optional[list] = None  # see stmt: what a T.ldg*/T.lds* needs first
        # a comprehension's allocations: named after the assigned name, counted per name
        self.comprehension_name: Optional[str] = None
        self.comprehension_count: dict[str, int] = {}
        self.comprehension_targets = None  # the names a comprehension's value unpacks into
        # TileLang's function attributes, set by top-level statements: the T.empty outputs
        # (name -> (buffer, statement)), the names `return` gives, in order (None: no
        # return), T.annotate_pass_configs' and T.annotate_compile_flags' values
        self.outputs: dict[str, tuple[N.Buffer, ast.stmt]] = {}
        self.returned: Optional[list[str]] = None
        self.macro_at_top = False  # inlining a T.macro called at the top level (its T.empty)
        self.sblock_depth = 0  # `with T.sblock(...)` bodies being parsed
        self.pass_configs: tuple = ()
        self.compile_flags: tuple = ()

    # ---- errors and locations ---------------------------------------------------------
    def loc(self, node) -> N.Loc:
        return N.Loc(self.filename, getattr(node, "lineno", 0) + self.line_offset)

    def error(self, node, msg: str, kind: type = None) -> FrontendError:
        lineno = getattr(node, "lineno", 0)
        line = self.source_lines[lineno - 1] if 0 < lineno <= len(self.source_lines) else ""
        return (kind or FrontendError)(msg, self.loc(node), self.fname, line)

    # ---- scopes -----------------------------------------------------------------------
    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope:
                if name in self.rebound_inside:
                    self.check_defining_region(name, scope, node)
                return scope[name]
        if name in self.env:
            return _python_scalar(self.env[name])
        import builtins

        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined")

    def lookup_local(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def fresh(self, name: str) -> str:
        """A unique IR name for the program's local ``name``; one the IR keeps for generated
        code (``_``, ``cute``, ``tc_*``, ``__*``: Python lets a program use them) is
        prefixed with ``u``."""
        if name in RESERVED or name.startswith(RESERVED_PREFIXES):
            name = "u" + name
        if name not in self.used_names:
            self.used_names.add(name)
            return name
        i = 1
        while f"{name}_{i}" in self.used_names or _reserved(f"{name}_{i}"):
            if _reserved(f"{name}_{i}"):  # `tc` bound again: `tc_1` is the generator's
                return self.fresh("u" + name)
            i += 1
        self.used_names.add(f"{name}_{i}")
        return f"{name}_{i}"

    def bind(self, name: str, value) -> None:
        if name in self.rebound_inside:  # bound anew here: the older binding is live again
            self.rebound_inside[name] = [r for r in self.rebound_inside[name]
                                         if r[0] is not self.scopes[-1]]
            if not self.rebound_inside[name]:
                del self.rebound_inside[name]
        self.scopes[-1][name] = value
        if isinstance(value, _BufferRef):
            self.named_buffers.setdefault(value.buffer.name, value.buffer)

    def push(self, control: bool = True, kind: str | None = None):
        self.scopes.append({})
        self.control.append(control)
        self.ctx.append((kind, len(self.used_names), id(self.scopes[-1])) if kind else None)

    def pop(self):
        self.scopes.pop()
        self.control.pop()
        self.ctx.pop()

    def context(self) -> tuple:
        """The loop/if bodies enclosing the statement parsed now, outermost first."""
        return tuple(c for c in self.ctx if c is not None)

    def check_rebind(self, name: str, node) -> None:
        """Rebinding a variable from outside the enclosing loop/if body, inside it: as in
        TileLang's builder, a new immutable binding for the rest of that body (TileLang
        warns "Immutable value is re-bound"); it does not carry out of the body, so a
        read of the name after the body is refused (``check_defining_region``: TileLang's
        "Immutable variable is used outside its defining region")."""
        inner_control = max(i for i, c in enumerate(self.control) if c or i == 0)
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i]:
                if i < inner_control and isinstance(self.scopes[i][name], (N.Expr, float, bool)):
                    self.rebound_inside.setdefault(name, []).append(
                        (self.scopes[i], self.scopes[-1], getattr(node, "lineno", 0)
                         + self.line_offset))
                return

    def check_defining_region(self, name: str, scope: dict, node) -> None:
        """``name`` read from ``scope`` after a loop/if body that rebound it has closed:
        TileLang refuses the read (the rebinding's value lives only in that body)."""
        for outer, inner, line in self.rebound_inside[name]:
            if outer is scope and not any(inner is s for s in self.scopes):
                raise self.error(node, f"'{name}' is read after the loop/if body that rebinds "
                                       f"it (line {line}) has closed: a rebinding inside a "
                                       "loop/if body is a new immutable value for the rest "
                                       "of that body only, it does not change the name "
                                       "outside it (TileLang: \"Immutable variable is used "
                                       "outside its defining region\"). Use "
                                       "`acc = T.alloc_var(dtype)` (or a local buffer: "
                                       "`acc = T.alloc_local((1,), dtype)` and "
                                       "`acc[0] += ...`)")

    def note_symbols(self, value, node=None):
        for x in _walk_exprs(value):
            if isinstance(x, N.Var) and x.name not in self.symbols:
                self.symbols[x.name] = x
                self.used_names.add(x.name)
            elif node is not None and isinstance(x, N.Var) and self.symbols[x.name] != x:
                # two T.dynamic objects of one name: TileLang keeps them apart (n, n_1);
                # tilecute names a symbol by its name, so they must be the same symbol
                was = self.symbols[x.name]
                raise self.error(node, f"two symbols named '{x.name}' differ ({was.dtype}, "
                                       f"multiple_of={was.multiple} and {x.dtype}, "
                                       f"multiple_of={x.multiple}): tilecute names a symbol "
                                       "by its name, so one name is one symbol; declare it "
                                       "once (n = T.dynamic(...)) and share it, or give the "
                                       "other a name of its own")

    # ---- T.* forms and their arguments ------------------------------------------------
    def form_of(self, node) -> Optional[F.Form]:
        """The ``T.*`` statement form ``node`` names (as ``T.copy`` or an imported alias),
        or None; a TileLang form tilecute lacks is an error here."""
        try:
            v = self.eval_python(node)
        except FrontendError:
            return None
        if isinstance(v, F.Unsupported):
            raise self.error(node, v.message())
        return v if isinstance(v, F.Form) else None

    def args(self, form: F.Form, call: ast.Call) -> _Args:
        return _Args(self, form.__name__, self.positional_signature(form, call), call)

    def positional_signature(self, form: F.Form, call: ast.Call) -> inspect.Signature:
        """The form's signature, or TileLang 0.1.13's where 0.1.15 reordered its positional
        arguments and the call's argument at the telling position is 0.1.13's
        (forms.LEGACY_POSITIONAL)."""
        legacy = F.LEGACY_POSITIONAL.get(form.__name__)
        if legacy is None or any(isinstance(x, ast.Starred) for x in call.args):
            return form.signature
        index, old, sig = legacy
        if form.__name__ == "gemm_sp" and len(call.args) == index:
            # ten positional arguments: the tenth is 0.1.15's wg_wait or 0.1.13's k_pack
            node = call.args[index - 1]
            try:
                v = self.eval_python(node)
            except FrontendError:
                v = None
            if not (isinstance(v, int) and not isinstance(v, bool) and v == 0):
                raise self.error(node, f"T.gemm_sp: the tenth positional argument "
                                       f"`{ast.unparse(node)}` is wg_wait in TileLang 0.1.15 "
                                       "and k_pack in 0.1.13; pass it by keyword")
        if len(call.args) <= index:
            return form.signature
        try:
            v = self.eval_python(call.args[index])
        except FrontendError:
            return form.signature
        return sig if old(v) else form.signature

    def arg_value(self, ref):
        if isinstance(ref, _Given):
            return ref.value
        if isinstance(ref, ast.AST):
            return self.eval_python(ref)
        if isinstance(ref, tuple):
            return tuple(self.arg_value(r) for r in ref)
        return ref  # a default

    def arg_index(self, ref, form: str) -> N.Expr:
        """An argument that is an integer expression (a grid or loop extent)."""
        if isinstance(ref, ast.AST):
            return self.index_value(ref, self.expr(ref), f"T.{form}: ")
        v = ref.value if isinstance(ref, _Given) else ref
        node = ref.node if isinstance(ref, _Given) else None
        if isinstance(v, bool) or not isinstance(v, (int, N.Expr)) or not N.is_int(N.as_expr(v).dtype):
            raise self.error(node, f"T.{form}: expected an integer expression, got {_show(v)}")
        return _index_dtype(N.as_expr(v))

    # ---- the function -----------------------------------------------------------------
    def parse(self) -> N.PrimFunc:
        fn = self.tree
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.error(fn, "parameters must be plain positional names with annotations")
        params: list[N.Param] = []
        specs = {x.arg: self.param_spec(x) for x in a.args if x.annotation is not None}
        for name, spec in specs.items():  # scalars first: a match_buffer dim may name one
            if isinstance(spec, str) and spec in DTYPES:
                self.bind(name, N.Var(name, spec))
        handles = {n for n, spec in specs.items() if _is_ptr(spec)}
        self.handle_params = handles
        for x in a.args:
            if x.arg in handles:
                self.check_handle(x, specs[x.arg])
        declared, rest = self.body_annotations(
            fn, {x.arg for x in a.args if x.annotation is None}, handles,
            {n for n in specs if n not in handles})
        for arg in a.args:
            if arg.annotation is None and arg.arg not in declared:
                raise self.error(arg, f"parameter '{arg.arg}' needs an annotation "
                                      "(T.Tensor(shape, dtype) or a scalar dtype such as T.int32), "
                                      f"in the signature or as `{arg.arg}: T.Tensor(...)` at the "
                                      "top of the body")
            # annotations were evaluated when the function was defined (closure values of
            # a kernel factory included); a script re-parse evaluates them here
            if arg.arg in declared:
                arg, spec = declared[arg.arg]  # a T.match_buffer's arg is named as its tensor
            else:
                spec = specs[arg.arg]
            self.used_names.add(arg.arg)
            params.append(self.make_param(arg, spec))
        kernels: list[N.KernelScope] = []
        self.scalar_params = {p.name for p in params if not isinstance(p, N.Buffer)}
        self.scalar_vars = {p.name: p for p in params if isinstance(p, N.Var)}
        self.host_assumes: list[N.Expr] = []  # T.assume(...)s the launcher checks (stmt_assume)
        body = self.block(rest, top=True)
        self.check_epochs_closed()
        for s in body:
            if not isinstance(s, N.KernelScope):
                raise self.error(fn, "only `with T.Kernel(...)` blocks may stand at the top "
                                     "level of a prim_func body")
            kernels.append(s)
        stray = next((b for b in walk_stmts(body) if isinstance(b, (_Break, _Continue))), None)
        if stray is not None:
            raise FrontendError(f"{stray.form} outside a loop", stray.loc, self.fname)
        outputs = self.returned_outputs(params)
        func = N.PrimFunc(self.fname, tuple(params) + tuple(outputs) + tuple(self.workspaces),
                          tuple(kernels), tuple(self.symbols.values()), loc=self.loc(fn),
                          workspaces=tuple(b.name for b in self.workspaces),
                          out_idx=tuple(range(-len(outputs), 0)) if outputs else None,
                          pass_configs=self.pass_configs, compile_flags=self.compile_flags,
                          pointers=tuple(self.pointers), assumes=tuple(self.host_assumes))
        if self.assumed_divisors:  # T.assume(N % k == 0): N promises k (stmt_assume)
            from ..ir.visitor import substitute

            func = substitute(func, {  # the symbol's multiple, checked at launch
                n: dataclasses.replace(self.symbols[n], multiple=self.symbols[n].multiple
                                       * (k // math.gcd(k, self.symbols[n].multiple)))
                for n, k in self.assumed_divisors.items()})
        func = legalize_negative_indices(func)  # TileLang's A[-1]: counted from the end
        func = widen_loop_fragments(func)  # frag[i] in T.Parallel(M): the nest's layout, M values
        validate(func, compiling=False)  # a prim_func with no T.Kernel parses (TileLang's)
        return func

    def param_spec(self, arg: ast.arg):
        """What a signature annotation says (evaluated when the function was defined,
        closure values of a kernel factory included; a script re-parse evaluates it here)."""
        spec = self.annotations[arg.arg] if arg.arg in self.annotations else \
            self.eval_python(arg.annotation)
        if isinstance(spec, str) and arg.annotation is not None and \
                spec.replace(" ", "") == ast.unparse(arg.annotation).replace(" ", ""):
            # a module with `from __future__ import annotations` keeps each annotation's
            # text (`"T.Tensor((M, K), 'float16')"`): it is evaluated here, as TileLang's
            # parser evaluates the annotation's expression
            spec = self.eval_python(arg.annotation)
        if isinstance(spec, V.ScalarDecl) or isinstance(spec, N.Var) and \
                isinstance(arg.annotation, ast.Call) and self.declares_symbol(arg.annotation):
            return DType(spec.dtype)  # TVMScript's `x: T.int32()`, `flag: T.bool()`: a scalar
        return spec

    def check_handle(self, arg: ast.arg, spec) -> None:
        """A ``T.handle(dtype, storage_scope)`` / ``T.ptr`` parameter's arguments: a global
        pointer (``is_size_var`` and other scopes refused, naming them)."""
        spec = spec.spec() if isinstance(spec, _HandleProxy) else spec
        self.check_spec(arg, spec, "a handle parameter is a global tensor that T.match_buffer "
                                   "binds")

    def check_spec(self, arg: ast.arg, spec, why: str) -> None:
        """A parameter annotation's call (a ``TensorSpec`` / ``HandleSpec``): its signature
        error, or its first refused argument, reported at the parameter with ``why``."""
        if spec.error:
            raise self.error(arg, f"parameter '{arg.arg}': {spec.error}")
        for what, value in spec.refused:
            raise self.error(arg, f"parameter '{arg.arg}': {spec.form}({what}={_show(value)}) "
                                  f"is not supported ({why})")

    def body_annotations(self, fn, unannotated: set, handles: set = frozenset(),
                         annotated: set = frozenset()) -> tuple[dict, list]:
        """TileLang's parameters typed in the body (``def k(A, B): A: T.Tensor(...)``) and
        TVM's ``T.handle`` parameters bound by ``A = T.match_buffer(a, shape, dtype)``:
        the top-level statements before the first other one that are a parameter's
        annotation or match, a parse-time constant, a symbol (``m = T.dynamic("m")``,
        ``n = T.int32()``, ``T.var("int32")``) or an integer expression of symbols
        (``n2 = n * 2``, bound to the expression as TileLang's builder binds it there),
        evaluated in order; returns {parameter: (node, spec)} (a matched handle's node
        named as its tensor) and the body's other statements."""
        declared: dict = {}
        body = list(fn.body)
        matched: dict = {}  # handle -> the tensor's name
        k = 0
        later = []  # T.empty and T.annotate_* among them: parsed once the parameters are
        while k < len(body):
            st = body[k]
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                pass  # a docstring
            elif self.func_attr_form(st) is not None:
                later.append(st)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and \
                    st.value is None and st.target.id in unannotated:
                if st.target.id in declared:
                    raise self.error(st, f"parameter '{st.target.id}' is annotated twice")
                where = ast.copy_location(ast.arg(arg=st.target.id, annotation=st.annotation), st)
                declared[st.target.id] = (where, self.eval_python(st.annotation))
            elif self.match_form(st) is not None:  # A = T.match_buffer(a, shape, dtype)
                handle, where, spec = self.match_buffer(st, self.match_form(st), handles,
                                                        unannotated | annotated, matched)
                declared[handle] = (where, spec)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name) and \
                    (sym := self.symbol_value(st.targets[0].id, st.value)) is not None:
                self.bind(st.targets[0].id, sym)  # m = T.dynamic("m"), n = T.int32(), n * 2
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Tuple) and \
                    all(isinstance(t, ast.Name) for t in st.targets[0].elts) and \
                    isinstance(syms := self.python_value(st.value), tuple) and \
                    len(syms) == len(st.targets[0].elts) and \
                    all(isinstance(x, N.Var) for x in syms):  # m, n = T.dynamic("m, n")
                for t, x in zip(st.targets[0].elts, syms):
                    self.bind(t.id, x)
            elif not (isinstance(st, ast.Assign) and self.try_python_assign(st)):
                if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                    self.form_of(st.value.func)  # T.annotate_pass_configs ...: refused by name
                break
            k += 1
        for st in body[k:]:  # a match after other statements: say where it belongs
            if self.match_form(st) is not None:
                raise self.top_level_error(st)
            for inner in ast.walk(st):
                if inner is not st and self.match_form(inner) is not None:
                    raise self.misplaced_match(inner, self.match_form(inner))
        return declared, later + body[k:]

    def symbol_value(self, name: str, node):
        """The value of a top-level ``name = node`` that declares a symbol or is an integer
        expression of symbols (no loads): ``T.dynamic("m")`` as it is; TVMScript's
        ``T.int32()`` and TVM's ``T.var("int32")`` named ``name`` (TVMScript names it by the
        assignment); None for anything else."""
        v = self.python_value(node)
        if isinstance(v, N.Var):
            if isinstance(node, ast.Call) and self.declares_symbol(node):
                return N.Var(v.name if self.given_name(node) else name, v.dtype, v.multiple)
            return v
        if isinstance(v, N.Expr) and N.is_int(v.dtype) and \
                not any(isinstance(x, (N.Load, N.Call)) for x in _walk_exprs(v)):
            return v
        return None

    def declares_symbol(self, call: ast.Call) -> bool:
        """``call`` is TVMScript's ``T.int32()`` (a dtype with no value) or ``T.var(...)``."""
        fn = self.python_value(call.func)
        return (isinstance(fn, DType) and not call.args and not call.keywords) or fn is V.var

    def given_name(self, call: ast.Call) -> bool:
        """A ``T.var(dtype, name)`` call that names its variable."""
        return self.python_value(call.func) is V.var and \
            (len(call.args) > 1 or any(k.arg == "name" for k in call.keywords))

    _MATCH_FORMS = ("match_buffer", "make_tensor")

    def match_form(self, st) -> Optional[F.Form]:
        """The form of ``X = T.match_buffer(...)``, or of ``X = T.make_tensor(a, ...)`` on a
        ``T.handle`` parameter ``a`` (TileLang's ``Tensor.from_ptr``, a match), else None
        (``T.make_tensor`` of a ``T.ptr`` or an address is :meth:`make_tensor`'s)."""
        if not (isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)):
            return None
        f = st.value.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) \
                not in self._MATCH_FORMS:
            return None  # (spelled T.match_buffer / T.make_tensor, or imported by that name)
        fn = self.python_value(f)
        if not (isinstance(fn, F.Form) and fn.__name__ in self._MATCH_FORMS):
            return None
        if fn.__name__ == "make_tensor":
            args = st.value.args
            first = args[0] if args else next(
                (k.value for k in st.value.keywords if k.arg == "ptr"), None)
            if not (isinstance(first, ast.Name)
                    and first.id in getattr(self, "handle_params", ())):
                return None
        return fn

    def match_buffer(self, st: ast.Assign, form: F.Form, handles: set, params: set,
                     matched: dict) -> tuple:
        """``A = T.match_buffer(a, shape, dtype, ...)`` (or TileLang's ``T.make_tensor(a,
        shape, dtype, strides)``, its ``T.Tensor.from_ptr``) on a ``T.handle`` / ``T.ptr``
        parameter ``a``: TVM binds ``a`` to a DLTensor checked against the buffer, so the
        parameter is the tensor ``A`` (``strides``: a strided one, as T.StridedTensor;
        string strides are int32 symbols, as TVM makes them).  Returns (the handle, its
        node named ``A``, the spec)."""
        what = f"T.{form.__name__}"
        first = "param" if form.__name__ == "match_buffer" else "ptr"
        if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
            raise self.error(st, f"{what} binds one name: `A = {what}(a, shape, dtype)`")
        name = st.targets[0].id
        a = self.args(form, st.value)
        node = a.node(first)
        if not isinstance(node, ast.Name) or node.id not in handles:
            got = ast.unparse(node)
            why = ("a T.handle parameter of " + self.fname
                   + (" (it is another kind of parameter)" if isinstance(node, ast.Name)
                      and node.id in params else ""))
            if isinstance(node, ast.Subscript):
                why += ("; TVM's match of a buffer region (inside a T.block) and TileLang's "
                        "tensors from addresses read out of a pointer table are not supported")
            raise a.fail(first, f"'{name}': {first} must be {why}, got `{got}`")
        handle = node.id
        if handle in matched:
            raise a.fail(first, f"'{name}': parameter '{handle}' is already bound to "
                                f"'{matched[handle]}' by an earlier match")
        if (name != handle and name in params | handles) or name in matched.values():
            raise self.error(st, f"{what}: '{name}' is already a parameter or a matched tensor "
                                 f"of {self.fname}")
        if form.__name__ == "match_buffer":
            why = "tilecute's tensor parameters are global tensors passed by the caller"
            if a.given("data") and not (isinstance(a.node("data"), ast.Constant) and
                                        a.node("data").value is None):
                raise a.fail("data", f"'{name}': data={ast.unparse(a.node('data'))} is not "
                                     f"supported: {why}")
            a.refuse_unless("elem_offset", (None, 0), "the tensor starts at its data pointer "
                            "(its byte_offset added), at any element")
            a.refuse_unless("scope", ("global",), why)
            a.refuse_unless("offset_factor", (0, 1), "tilecute does not check a tensor's element "
                            "offset for a multiple at launch")
            a.refuse_unless("buffer_type", ("default", ""), "TVM's auto-broadcast buffers "
                            "(strides of 0 where a dim is 1) are not tilecute's")
            a.refuse_unless("axis_separators", (None, (), []), "tilecute's tensors are not "
                            "flattened to several axes")
            align = a.value("align")
            if isinstance(align, bool) or not isinstance(align, int) or \
                    (align > 0 and align & (align - 1)):
                raise a.fail("align", f"'{name}': align is an int (a power of two, or -1/0: "
                                      f"TVM's default), got {_show(align)}")
        shape = a.value("shape")
        if shape is None:
            raise a.fail("shape", f"'{name}': the shape must be given when binding a parameter "
                                  "(TVM's ValueError)")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        strides = a.value("strides")
        if strides is not None:
            strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
            wide = any(isinstance(d, N.Expr) and d.dtype == "int64" for d in shape[:1])
            strides = tuple(N.Var(x, "int64" if wide else "int32") if isinstance(x, str) else x
                            for x in strides)
        scalars = {n for n in params if isinstance(self.lookup_local(n), N.Var)}
        for arg, dims in (("shape", shape), ("strides", strides or ())):
            for x in _walk_exprs(tuple(d for d in dims if isinstance(d, N.Expr))):
                if isinstance(x, N.Var) and x.name in scalars and self.lookup_local(x.name) == x:
                    raise a.fail(arg, f"'{name}': a dim is the scalar parameter '{x.name}'; "
                                      "tilecute binds a tensor's dims from the tensor itself and "
                                      "does not check them against a scalar argument (TileLang "
                                      "asserts they agree): declare the dim a symbol (`"
                                      f"{x.name} = T.int32()` or T.dynamic) in place of the "
                                      "scalar parameter")
        matched[handle] = name
        where = ast.copy_location(ast.arg(arg=name, annotation=None), st)
        return handle, where, TensorSpec(shape, a.value("dtype"), strides, what)

    # ---- TileLang's function attributes: T.empty outputs, T.annotate_* -------------------
    _FUNC_ATTR_FORMS = ("empty", "annotate_pass_configs", "annotate_compile_flags")

    def func_attr_form(self, s) -> Optional[str]:
        """``s`` is a top-level ``name = T.empty(...)`` ("empty") or
        ``T.annotate_pass_configs(...)`` / ``T.annotate_compile_flags(...)``: that name."""
        call = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
        if not isinstance(call, ast.Call):
            return None
        v = self.python_value(call.func)
        name = getattr(v, "__name__", None) if isinstance(v, F.Unsupported) else None
        if name not in self._FUNC_ATTR_FORMS or (name == "empty") != isinstance(s, ast.Assign):
            return None
        return name

    def empty_output(self, s: ast.Assign) -> list:
        """TileLang's ``B = T.empty(shape, dtype)`` at the top of a prim_func body: an
        output parameter (after the others), which ``return B`` makes the function's
        ``out_idx``; ``T.empty(shape, dtype=...)`` and ``T.empty(d0, d1, ..., dtype=...)``
        too, float32 when no dtype is given (TileLang's ``T.empty``)."""
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            raise self.error(s, "T.empty declares one output: `B = T.empty(shape, dtype)`")
        name, call = s.targets[0].id, s.value
        if self.lookup_local(name) is not None or name in self.used_names:
            raise self.error(s, f"T.empty: '{name}' is already a name of {self.fname} (a "
                                "parameter or an earlier output)")
        kw = {k.arg: k.value for k in call.keywords}
        if None in kw:
            raise self.error(s, f"T.empty for '{name}': unexpected keyword(s) "
                                f"{', '.join(sorted(str(k) for k in set(kw) - {'dtype'}))}; "
                                "T.empty(shape, dtype)")
        shape, dtype = empty_args(name, [self.eval_python(a) for a in call.args],
                                  {k: self.eval_python(v) for k, v in kw.items()},
                                  lambda msg: self.error(s, msg))
        try:
            dt = dtype_name(dtype)
        except UnknownDTypeError as e:
            raise self.error(s, f"T.empty for '{name}': {e}") from None
        if not shape:
            raise self.error(s, f"T.empty for '{name}': a 0-d output is not supported "
                                "(tilecute's tensors have at least one dim)")
        if self.macro_at_top:  # a macro's `M, N = A.shape`: its names are Lets of the shape
            shape = [self.let_free(d) for d in shape]
        buf = N.Buffer(name, dt, tuple(self.dim(s, d, name) for d in shape), "global")
        params = getattr(self, "scalar_params", set())
        self.note_symbols(tuple(x for x in _walk_exprs(buf.shape) if isinstance(x, N.Var) and not (
            x.name in params and self.lookup_local(x.name) == x)))  # (a scalar parameter's dims)
        self.used_names.add(name)
        self.bind(name, _BufferRef(buf))
        self.outputs[name] = (buf, s)
        return []

    def let_free(self, d):
        """``d`` with each variable bound by a ``Let`` of a pure value (the symbols and
        scalar parameters) replaced by that value, as a top-level macro's kernels get them."""
        from ..ir.visitor import substitute

        for _ in range(64):
            if not isinstance(d, N.Expr):
                return d
            names = {x.name for x in _walk_exprs((d,)) if isinstance(x, N.Var)
                     and x.name in self.let_values
                     and _host_pure(self.let_values[x.name], self.symbols, self.scalar_params)}
            if not names:
                return d
            d = substitute(d, {n: self.let_values[n] for n in names})
        return d

    def return_outputs(self, s: ast.Return) -> list:
        """TileLang's ``return B`` / ``return B, C`` ending a prim_func body: the
        ``T.empty`` outputs, in the order the call returns them."""
        if s is not self.tree.body[-1]:
            raise self.error(s, "`return` ends a prim_func body (it names the T.empty "
                                "outputs the call returns)")
        v = s.value
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            self.returned = []
            return []
        elts = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
        names, kernels, bad = [], [], []
        for e in elts:
            if isinstance(e, ast.Call) and self.top_function_of(e.func) is not None:
                # `return copy_impl(A)` (TileLang's eager kernels): the macro's T.empty
                # outputs, which it returns, are the function's; its kernels run here
                found, got = self.top_level_macro_outputs(e, s)
                kernels += found
                names += got
            elif isinstance(e, ast.Name) and e.id in self.outputs:
                names.append(e.id)
            else:
                bad.append(ast.unparse(e))
        if bad:
            raise self.error(s, f"a prim_func returns only tensors allocated by T.empty "
                                f"({', '.join(self.outputs) or 'none declared'}), got "
                                f"{', '.join(bad)}")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise self.error(s, f"`return` names {', '.join(twice)} twice")
        self.returned = names
        return kernels

    def top_level_macro_outputs(self, call: ast.Call, s) -> tuple[list, list[str]]:
        """``return macro(A)`` at the top level: the macro inlined as a top-level macro
        (its ``T.empty`` outputs declared as the function's, its ``T.Kernel`` blocks the
        function's), and the names of the outputs it returns."""
        fn, what = self.top_function_of(call.func)
        saved = self.macro_at_top
        self.macro_at_top = True
        try:
            stmts, value = self.inline_function(fn, what, call, s, want_value=True)
        finally:
            self.macro_at_top = saved
        def refuse(st):
            where = f" (line {st.loc.line})" if st.loc is not None else ""
            return self.error(s, f"`return {ast.unparse(call)}`: {what} at the top level of a "
                                 "prim_func may hold only T.empty outputs, `with T.Kernel(...)` "
                                 "blocks and names bound to shapes and scalar parameters; it "
                                 f"has a {type(st).__name__} statement{where} outside a "
                                 "T.Kernel")
        out = self.top_level_kernels(stmts, refuse)
        values = value if isinstance(value, tuple) else (value,)
        names = []
        for v in values:
            name = v.buffer.name if isinstance(v, _BufferRef) else None
            if name not in self.outputs:
                raise self.error(s, f"`return {ast.unparse(call)}`: {what} returns "
                                    f"{_show(v)}; a prim_func returns the tensors T.empty "
                                    "declares")
            names.append(name)
        return out, names

    def returned_outputs(self, params: list) -> list:
        """The T.empty outputs as parameters, in ``return`` order (so the kernel returns
        them so), each dim bound by the input tensors' dims: the launch allocates an
        output from the symbols those bind."""
        returned = self.returned or []
        missing = [n for n in self.outputs if n not in returned]
        if missing:
            raise self.error(self.outputs[missing[0]][1],
                             f"T.empty output(s) {', '.join(missing)} not returned: a "
                             f"prim_func returns every T.empty tensor (`return "
                             f"{', '.join(self.outputs)}`), as TileLang requires")
        bound = {x.name for p in params if isinstance(p, N.Buffer)
                 for x in _walk_exprs(p.shape + (p.strides or ())) if isinstance(x, N.Var)}
        # integer scalar parameters: TileLang evaluates them when it allocates the output
        # too (the launcher checks the output's dims against the scalars' values)
        bound |= {p.name for p in params if isinstance(p, N.Var) and not isinstance(p, N.Buffer)
                  and p.dtype in _INT_SCALAR_DIMS and p.name not in self.pointers}
        scalars = {p.name for p in params if not isinstance(p, N.Buffer)}
        for name in returned:
            buf, s = self.outputs[name]
            for x in _walk_exprs(buf.shape):
                if isinstance(x, N.Var) and x.name not in bound:
                    what = (f"scalar parameter '{x.name}' ({x.dtype})" if x.name in scalars
                            else f"symbol '{x.name}'")
                    raise self.error(s, f"T.empty for '{name}': dim uses {what}, which no "
                                        "input tensor's dims bind and which is no integer "
                                        "scalar parameter; tilecute allocates an output from "
                                        "the symbols its input tensors' shapes bind and the "
                                        "integer scalar arguments: declare the dim with a "
                                        "T.dynamic symbol an input tensor's shape binds, or "
                                        "pass the output in")
        return [self.outputs[n][0] for n in returned]

    def annotate_function(self, s: ast.Expr, form: str) -> list:
        """TileLang's ``T.annotate_pass_configs(configs)`` / ``T.annotate_compile_flags(
        flags)`` at the top level: the function's pass configs / compile flags, which
        ``tilecute.compile`` merges with the caller's (a later call replaces an earlier
        one, as in TileLang); each is checked here against tilecute's mapping of them
        (``options.from_pass_configs`` / ``from_compile_flags``), a key or flag without a
        tilecute meaning refused by name."""
        from ..options import OptionError, from_compile_flags, from_pass_configs

        call = s.value
        param = "configs" if form == "annotate_pass_configs" else "flags"
        given = list(call.args) + [k.value for k in call.keywords if k.arg == param]
        if len(given) != 1 or any(k.arg != param for k in call.keywords):
            raise self.error(s, f"T.{form} takes one argument, {param}")
        value = self.eval_python(given[0])
        try:
            if form == "annotate_pass_configs":
                if not isinstance(value, dict):
                    raise self.error(s, f"T.{form}: configs is a dict {{PassConfigKey: value}}, "
                                        f"got {_show(value)}")
                from_pass_configs(value, f"T.{form}")
                pairs = []
                for k, v in value.items():
                    key = getattr(k, "value", k)
                    if isinstance(v, bool) or isinstance(v, (int, float, str)):
                        pairs.append((str(key), v))
                    else:
                        raise self.error(s, f"T.{form}: the value of {key!r} is {_show(v)}; "
                                            "tilecute keeps bools, ints, floats and strings")
                self.pass_configs = tuple(pairs)
            else:
                flags = [value] if isinstance(value, str) else value
                if not isinstance(flags, (list, tuple)) or \
                        not all(isinstance(f, str) for f in flags):
                    raise self.error(s, f"T.{form}: flags is a string or a list of strings, got "
                                        f"{_show(value)}")
                from_compile_flags(flags, f"T.{form}")
                self.compile_flags = tuple(flags)
        except OptionError as e:
            raise self.error(s, str(e)) from None
        return []

    def python_value(self, node):
        try:
            return self.eval_python(node)
        except FrontendError:
            return None

    def make_param(self, arg: ast.arg, spec) -> N.Param:
        name = arg.arg
        if isinstance(spec, TensorSpec):
            self.check_spec(arg, spec, "tilecute's tensor parameters are global tensors passed "
                                       "in by the caller")
            try:
                # T.ptr: a table of addresses, int64 (TileLang's _normalize_tensor_dtype)
                dt = tensor_dtype_name(spec.dtype)
            except UnknownDTypeError as e:
                raise self.error(arg, f"parameter '{name}': {e}") from None
            shape = tuple(self.dim(arg, d, name) for d in spec.shape)
            strides = None
            if spec.strides is not None:
                if len(spec.strides) != len(shape):
                    raise self.error(arg, f"'{name}': {len(spec.strides)} strides for "
                                          f"{len(shape)} dims")
                for k, d in enumerate(spec.strides):
                    if isinstance(d, int) and not isinstance(d, bool) and d <= 0:
                        # (TileLang takes a static 0: its dim read broadcast, any stride passed)
                        raise self.error(arg, f"'{name}': a static stride of {d} (strides[{k}]) "
                                              "is not supported: tilecute's layouts and TMA "
                                              "take positive static strides; for a broadcast "
                                              "read declare the stride a symbol (T.dynamic) "
                                              "and pass an expanded tensor, or index the dim "
                                              "at 0")
                strides = tuple(self.dim(arg, d, name) for d in spec.strides)
            buf = N.Buffer(name, dt, shape, "global", strides)
            # (an eager kernel's T.empty output may name an earlier integer scalar
            # parameter's variable: the launch checks that dim against the scalar)
            self.note_symbols(tuple(x for x in _walk_exprs(shape + (strides or ()))
                                    if isinstance(x, N.Var) and not (
                                        x.name in self.scalar_param_vars and
                                        self.lookup_local(x.name) == x)), arg)
            self.bind(name, _BufferRef(buf))
            return buf
        if isinstance(spec, str) or str(spec).startswith("torch."):
            try:
                dt = dtype_name(spec)
            except UnknownDTypeError as e:
                raise self.error(arg, f"parameter '{name}': {e}") from None
            var = N.Var(name, dt)
            self.bind(name, var)
            self.scalar_param_vars.add(name)
            return var
        if isinstance(spec, Pointer):
            return self.pointer_param(arg, spec)
        if isinstance(spec, F.Unsupported):
            raise self.error(arg, f"parameter '{name}': {spec.message()}; declare it "
                                  "T.Tensor(shape, dtype) (or T.ptr, a device address)")
        if _is_ptr(spec):  # a T.handle that no T.match_buffer bound
            spec = spec.spec() if isinstance(spec, _HandleProxy) else spec
            raise self.error(arg, f"parameter '{name}': {spec.form} is bound by no `A = "
                                  f"T.match_buffer({name}, shape, dtype)` at the top of the "
                                  "body (a T.match_buffer makes the parameter that tensor; or "
                                  "declare it T.Tensor(shape, dtype), or T.ptr for a device "
                                  "address)")
        raise self.error(arg, f"parameter '{name}': annotation must be T.Tensor(...), "
                              f"T.StridedTensor(...) or a dtype, got {spec!r}")

    def pointer_param(self, arg: ast.arg, spec: Pointer) -> N.Var:
        """``a_ptr: T.ptr`` (``T.ptr(dtype)``): a device address, an int64 scalar the caller
        passes as a tensor (its data pointer) or an int; ``T.make_tensor(a_ptr, ...)``
        views the memory there.  TileLang annotates the pointer with a pointee dtype, which
        nothing reads (T.make_tensor's dtype decides), so any dtype is taken."""
        name = arg.arg
        if spec.error:
            raise self.error(arg, f"parameter '{name}': {spec.error}")
        if spec.dtype is not None:
            try:
                dtype_name(spec.dtype)
            except UnknownDTypeError as e:
                raise self.error(arg, f"parameter '{name}': T.ptr({spec.dtype!r}): {e}") from None
        if spec.storage_scope != "global":
            raise self.error(arg, f"parameter '{name}': T.ptr(storage_scope="
                                  f"{spec.storage_scope!r}) is not supported: a pointer "
                                  "parameter is a global (device memory) address")
        if spec.is_size_var:
            raise self.error(arg, f"parameter '{name}': T.ptr(is_size_var=True) is not "
                                  "supported: a pointer is no size")
        var = N.Var(name, POINTER_DTYPE)
        self.pointers.append(name)
        self.bind(name, var)
        return var

    def dim(self, node, d, name) -> N.Expr:
        d = _python_scalar(d)
        if isinstance(d, N.Const) and N.is_int(d.dtype) and not isinstance(d.value, bool):
            # `T.Tensor((T.int64(4096), ...))`: TileLang's int64 shapes; how wide offsets
            # are is the index-width pass's (64-bit where a static shape's pass int32)
            d = int(d.value)
        if isinstance(d, (N.BinOp, N.Cast)) or self.is_ceildiv(d):  # `T.Tensor((n * 4, m + 1), ...)`
            e = self.dim_expr(node, d, name)
            return self.dim(node, e.value, name) if isinstance(e, N.Const) else e
        if isinstance(d, bool) or not isinstance(d, (int, N.Var)):
            raise self.error(node, f"'{name}': a dimension must be an int, T.dynamic(...) or "
                                   f"an integer expression of them (+, -, *, //, %, T.ceildiv), got {d!r}")
        if isinstance(d, int):
            if d <= 0:  # TileLang takes 0 (an empty tensor); CuTe DSL's layouts do not
                raise self.error(node, f"'{name}': dimension {d} must be positive"
                                 + (" (a static 0 is refused: CuTe DSL takes no static zero "
                                    "extent in a layout; declare the dim T.dynamic(...) and "
                                    "pass an empty tensor)" if d == 0 else ""))
            if d >= 2 ** 63:
                raise self.error(node, f"'{name}': dimension {d} does not fit int64")
            # TVM types an int literal int32, or int64 past it (T.Tensor((2**32,), ...))
            return N.Const(d, "int32" if d < 2 ** 31 else "int64")
        if d.dtype not in N.DIM_DTYPES:
            raise self.error(node, f"'{name}': symbolic dimension {d.name} is {d.dtype}; "
                                   "dims are int32 or int64 (T.dynamic(name, \"int64\"))")
        return d

    _DIM_OPS = ("add", "sub", "mul", "floordiv", "mod")

    @staticmethod
    def is_ceildiv(d) -> bool:
        """``T.ceildiv(a, b)`` of a symbol (a Call; two ints fold to an int)."""
        return isinstance(d, N.Call) and d.name == "ceildiv" and len(d.args) == 2

    def dim_expr(self, node, d: N.Expr, name) -> N.Expr:
        """A dimension written as an expression of symbols and ints (TileLang's
        ``T.Tensor((n * 4,), dtype)``): the launch binds each symbol from a dim that is the
        plain symbol or, failing one, solves it from the first affine dim ``a * n + b`` it
        appears in; every other expression dim is checked at launch (launch_abi)."""
        if isinstance(d, N.Cast) and N.is_int(d.dtype):
            return self.dim_expr(node, d.value, name)
        if isinstance(d, int) and not isinstance(d, bool):
            return N.Const(d, "int32" if -2 ** 31 <= d < 2 ** 31 else "int64")
        if isinstance(d, N.Const) and N.is_int(d.dtype) and not isinstance(d.value, bool):
            v = int(d.value)
            return N.Const(v, "int32" if -2 ** 31 <= v < 2 ** 31 else "int64")
        if isinstance(d, N.Var):
            return self.dim(node, d, name)
        if self.is_ceildiv(d):  # T.ceildiv(n, 16): TVM's integer ceildiv, (n + 16 - 1) // 16
            a, b = d.args
            d = N.binop("floordiv", N.binop("sub", N.binop("add", a, b), 1), b)
        if isinstance(d, N.BinOp) and d.op in self._DIM_OPS:
            a, b = self.dim_expr(node, d.a, name), self.dim_expr(node, d.b, name)
            if isinstance(a, N.Const) and isinstance(b, N.Const):
                v = {"add": a.value + b.value, "sub": a.value - b.value,
                     "mul": a.value * b.value,
                     "floordiv": a.value // b.value if b.value else None,
                     "mod": a.value % b.value if b.value else None}[d.op]
                if v is None:
                    raise self.error(node, f"'{name}': dimension divides by zero")
                wide = "int64" in (a.dtype, b.dtype) or not -2 ** 31 <= v < 2 ** 31
                return N.Const(v, "int64" if wide else "int32")
            # an int64 symbol (or a literal past int32) makes the expression int64, as TVM
            # promotes it; the launcher computes every dim in int64
            return N.binop(d.op, a, b)
        raise self.error(node, f"'{name}': a dimension expression may combine ints and "
                               "T.dynamic(...) symbols with +, -, *, //, % and T.ceildiv, got "
                               f"{_show(d)}")

    # ---- statements -------------------------------------------------------------------
    def block(self, stmts, top=False) -> tuple[N.Stmt, ...]:
        out: list[N.Stmt] = []
        self.blocks_opened += 1
        self.open_blocks.append(self.blocks_opened)
        try:
            for i, s in enumerate(stmts):
                if top and self.is_launch_thread(s):
                    # TVM's frames, TileLang's T.Kernel as printed: they cover the rest of the body
                    out.extend(self.stmt(self.launch_threads_as_kernel(stmts[i:]), top))
                    break
                if not top and isinstance(s, ast.Expr) and self.is_attr_call(s.value):
                    # TVMScript's frame written as a statement: it covers the rest of the block
                    out.extend(self.attr_scope(s, s.value, stmts[i + 1:]))
                    break
                out.extend(self.stmt(s, top))
        finally:
            self.open_blocks.pop()
        return tuple(out)

    def stmt(self, s, top=False) -> list[N.Stmt]:
        try:
            out = self.parse_stmt(s, top)
        except TypeError as e:  # `if v:`, `T.print(v)` on a vector: an error at its line
            if isinstance(e, VL.VectorValueError) or f"use {VL.LaneVector.__name__} " in str(e):
                raise self.error(s, str(e)) from None
            raise
        if any(not isinstance(x, N.Let) for x in out):
            self.emitted += 1  # (a region alias's vector read checks nothing ran since)
        return out

    def parse_stmt(self, s, top=False) -> list[N.Stmt]:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return []  # docstring
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.With):
            loop = self.while_frame(s)
            if loop is not None:
                return self.stmt(loop, top)
            branch = self.if_frames(s)
            if branch is not None:
                return self.stmt(branch, top)
            managed = self.python_context(s, top)
            if managed is not None:
                return managed
            item = s.items[0].context_expr if len(s.items) == 1 else None
            if not top and self.is_attr_call(item):
                if s.items[0].optional_vars is not None:
                    raise self.error(s, "`with T.attr(...)` binds no names")
                return self.attr_scope(s, item, s.body)
            if isinstance(item, ast.Call) and \
                    getattr(self.form_of(item.func), "__name__", None) == "sblock":
                return self.sblock_stmt(s, item)
            return [self.with_stmt(s)]
        if top:
            attr = self.func_attr_form(s)
            if attr == "empty":
                return self.empty_output(s)
            if attr is not None:
                return self.annotate_function(s, attr)
            if isinstance(s, ast.Return):
                return self.return_outputs(s)
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                    self.top_function_of(s.value.func) is not None:  # holding T.Kernel blocks
                return self.top_level_macro(s)
            if isinstance(s, ast.Assign) and self.is_alloc_global(s.value):
                return self.assign(s)
            if isinstance(s, ast.If):
                # `if dim == 1: with T.Kernel(...)` on a parse-time value: TileLang's builder
                # runs the chosen branch only (its ctx_if on a Python value)
                cond = self.top_level_condition(s)
                return list(self.block(s.body if cond else s.orelse, top=True))
            if isinstance(s, ast.Assign) and self.is_storage_view(s):
                # `A_flat = T.Tensor(shape, dtype, A.data)` before the kernels: TileLang's
                # function-level buffer over a parameter's storage; it stands at the start
                # of each T.Kernel that follows (a view of its own in each)
                self.top_views.append(s)
                return []
            if isinstance(s, ast.Assign) and self.is_make_tensor(s.value):
                return self.assign(s)
            if isinstance(s, ast.Assign) and self.try_python_assign(s):
                return []
            if isinstance(s, ast.AnnAssign) and s.value is not None and \
                    isinstance(s.target, ast.Name) and self.try_python_assign(
                        ast.Assign(targets=[s.target], value=s.value, lineno=s.lineno)):
                # `n: T.int32 = M * N`: TileLang's builder binds a pure value at the
                # prim_func level as is (the annotation unread), as without one
                return []
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                    getattr(self.form_of(s.value.func), "__name__", None) in (
                        "assume", "annotate_restrict_buffers"):
                # TileLang's `T.assume(stride % 2 == 0)` before the kernels: a promise about
                # the parameters, read as inside a kernel (so is a restrict annotation)
                form = self.form_of(s.value.func)
                return getattr(self, f"stmt_{form.__name__}")(self.args(form, s.value), s)
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                    self.python_value(s.value.func) is print:
                return self.parse_time_print(s.value, s)
            if isinstance(s, ast.Assert):
                # checked now on parse-time values; on the symbols and scalar parameters
                # TileLang's host Assert, checked at every call (assert_stmt)
                return self.assert_stmt(s)
            if self.is_thread_binding_loop(s):
                return [self.with_stmt(self.binding_loops_as_kernel(s))]
            raise self.top_level_error(s)
        # statements a T.ldg*/T.lds* access in this statement's expressions needs first
        # (`pending`); only where they run once, before the statement
        outer = self.pending
        self.pending = [] if isinstance(s, (ast.Assign, ast.AugAssign, ast.Expr, ast.If)) else None
        try:
            out = self.inner_stmt(s)
            return self.pending + out if self.pending else out
        finally:
            self.pending = outer

    def inner_stmt(self, s) -> list[N.Stmt]:
        if self.macro_at_top and not self.in_kernel and self.func_attr_form(s) == "empty":
            return self.empty_output(s)  # a top-level macro's output: the function's
        if isinstance(s, ast.For):
            return self.for_stmt(s)
        if isinstance(s, ast.If):
            return self.if_stmt(s)
        if isinstance(s, ast.Assign):
            return self.assign(s)
        if isinstance(s, ast.AugAssign):
            return self.aug_assign(s)
        if isinstance(s, ast.AnnAssign):
            return self.ann_assign(s)
        if isinstance(s, ast.Expr):
            return self.expr_stmt(s)
        if isinstance(s, ast.While):
            return self.while_stmt(s)
        if isinstance(s, ast.Assert):
            return self.assert_stmt(s)
        if isinstance(s, ast.Break):  # TileLang's builder: T.loop_break()
            return [_Break(loc=self.loc(s), statement=not hasattr(s, "tvm_form"),
                           **_written_as(s))]
        if isinstance(s, ast.Continue):  # TileLang's builder: tirx.continue_loop()
            return [_Continue(loc=self.loc(s), statement=not hasattr(s, "tvm_form"),
                              **_written_as(s))]
        kind = type(s).__name__
        hint = {"While": "use `for ... in T.serial(n)`", "Return": "a prim_func returns nothing",
"Try": "", "FunctionDef": "", "Raise": ""}.get(kind, "")
        raise self.error(s, f"`{kind.lower()}` statements are not supported in a prim_func"
                            + (f" ({hint})" if hint else ""))

    def is_thread_binding_loop(self, s) -> bool:
        return isinstance(s, ast.For) and isinstance(s.iter, ast.Call) and \
            self.python_value(s.iter.func) is ops.thread_binding

    def binding_loops_as_kernel(self, s: ast.For) -> ast.With:
        """TVM's kernel written as nested blockIdx/threadIdx ``T.thread_binding`` loops at
        the top level of a prim_func (``for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"): body``): the same kernel as
        ``with T.Kernel(8, threads=128) as bx: tx = T.thread_binding(128, thread=
        "threadIdx.x"); body`` (every thread runs the body, as TVM's loops launch it), built
        here as that ``with`` statement.  The loops must nest directly, each bound once,
        each range starting at 0."""
        blocks: dict[int, tuple] = {}  # dim -> (extent node, name)
        threads: dict[int, tuple] = {}  # dim -> (extent node, the loop's call)
        thread_names: list[tuple] = []  # (name, call, loop) of each threadIdx loop
        node, t_module = s, None
        while self.is_thread_binding_loop(node):
            call = node.iter
            where = f"`for {ast.unparse(node.target)} in {ast.unparse(call)}`"
            if not isinstance(node.target, ast.Name) or node.orelse:
                raise self.error(node, f"{where}: a thread_binding loop binds one name, "
                                       "without `else`")
            if not isinstance(call.func, ast.Attribute):
                raise self.error(node, f"{where}: write it as T.thread_binding(...) (the T "
                                       "module's attribute) at the top level")
            t_module = call.func.value
            sig = inspect.signature(ops.thread_binding)
            try:
                bound = sig.bind(*call.args, **{k.arg: k.value for k in call.keywords})
            except TypeError as e:
                raise self.error(node, f"{where}: {e}") from None
            args = bound.arguments
            if args.get("annotations") is not None or "kernel" in args:
                raise self.error(node, f"{where}: annotations are not supported here")
            thread = self.eval_python(args["thread"]) if "thread" in args else None
            if thread is None and "stop" in args and \
                    isinstance(stop := self.eval_python(args["stop"]), str):
                thread = stop  # TVM's T.thread_binding(128, "threadIdx.x"): the tag second
                del args["stop"]
            dims = {f"{k}.{c}": (k, i) for k in ("blockIdx", "threadIdx")
                    for i, c in enumerate("xyz")}
            if thread not in dims:
                raise self.error(node, f"{where}: thread={thread!r}; a top-level thread_binding "
                                       "loop binds blockIdx.x/y/z or threadIdx.x/y/z")
            if "stop" in args:
                start = self.eval_python(args["start"])
                if not (isinstance(start, int) and start == 0):
                    raise self.error(node, f"{where}: the range must start at 0 (TVM launches "
                                           "the whole extent)")
                extent = args["stop"]
            else:
                extent = args["start"]
            kind, d = dims[thread]
            table = blocks if kind == "blockIdx" else threads
            if d in table:
                raise self.error(node, f"{where}: {thread} is bound twice")
            table[d] = (extent, node.target.id) if kind == "blockIdx" else (extent, call)
            if kind == "threadIdx":
                thread_names.append((node.target.id, call, node))
            body = node.body
            if self.is_thread_binding_loop(body[0]) and len(body) > 1:
                raise self.error(body[1], "TVM's thread_binding loops nest directly: nothing "
                                          "may follow the inner loop inside an outer one")
            node = body[0] if len(body) == 1 and self.is_thread_binding_loop(body[0]) else None
            inner_body = body

        def loc(x):
            return ast.copy_location(x, s)

        one = lambda: loc(ast.Constant(1))  # noqa: E731
        grid = [blocks[d][0] if d in blocks else one() for d in range(max(blocks, default=0) + 1)]
        names = [blocks[d][1] if d in blocks else f"unbound_block_{'xyz'[d]}"
                 for d in range(len(grid))]
        extents = [threads[d][0] if d in threads else one()
                   for d in range(max(threads, default=0) + 1)]
        threads_list = loc(ast.List(elts=extents, ctx=ast.Load()))
        kernel = loc(ast.Call(
            func=loc(ast.Attribute(value=t_module, attr="Kernel", ctx=ast.Load())), args=grid,
            keywords=[ast.keyword(arg="threads", value=threads_list)]))
        target = loc(ast.Tuple(elts=[loc(ast.Name(id=n, ctx=ast.Store())) for n in names],
                               ctx=ast.Store()))
        # each threadIdx loop's name bound to its own call, read inside the kernel
        binds = [ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                              value=call), loop)
                 for name, call, loop in thread_names]
        return ast.copy_location(ast.With(items=[ast.withitem(context_expr=kernel,
                                                              optional_vars=target)],
                                          body=binds + list(inner_body)), s)

    def is_launch_thread(self, s) -> bool:
        """``name = T.launch_thread(tag, extent)`` (or the call as a statement)."""
        value = s.value if isinstance(s, ast.Expr) or isinstance(s, ast.Assign) and \
            len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) else None
        return isinstance(value, ast.Call) and self.python_value(value.func) is ops.launch_thread

    def launch_threads_as_kernel(self, stmts) -> ast.With:
        """TVM's ``T.launch_thread`` frames at the top of a prim_func body -- how TileLang
        prints a ``T.Kernel``: ``bx = T.launch_thread("blockIdx.x", 32)``, ``tx =
        T.launch_thread("threadIdx.x", 128)``, ... then the body -- as that ``T.Kernel``:
        the blockIdx extents its grid (their names its block variables), the threadIdx
        extents its threads, and everything after the run of frames its body, where each
        threadIdx name is bound to its own call (the thread index, the extent checked)."""
        run = []
        for s in stmts:
            if not self.is_launch_thread(s):
                break
            run.append(s)
        blocks, threads, thread_names = {}, {}, []
        t_module = None
        for s in run:
            call = s.value
            where = f"`{ast.unparse(call)}` at the top level"
            if not isinstance(call.func, ast.Attribute):
                raise self.error(s, f"{where}: write it as T.launch_thread(...) (the T module's "
                                    "attribute)")
            t_module = call.func.value
            try:
                bound = inspect.signature(ops.launch_thread).bind(
                    *call.args, **{k.arg: k.value for k in call.keywords})
            except TypeError as e:
                raise self.error(s, f"{where}: {e}") from None
            tag = self.eval_python(bound.arguments["thread"])
            if tag not in ops._LAUNCH_TAGS:
                raise self.error(s, f"{where}: thread={tag!r}; tilecute launches blockIdx.x/y/z and "
                                    "threadIdx.x/y/z (a T.Kernel's grid and threads), the tag "
                                    "given as a string")
            kind, d = ops._LAUNCH_TAGS[tag]
            table = blocks if kind == "blockIdx" else threads
            if d in table:
                raise self.error(s, f"{where}: {tag} is launched twice")
            name = s.targets[0].id if isinstance(s, ast.Assign) else None
            table[d] = (bound.arguments["extent"], name)
            if kind == "threadIdx" and name is not None:
                thread_names.append((name, call, s))
        first = run[0]

        def loc(x):
            return ast.copy_location(x, first)

        one = lambda: loc(ast.Constant(1))  # noqa: E731
        grid = [blocks[d][0] if d in blocks else one() for d in range(max(blocks, default=0) + 1)]
        names = [blocks[d][1] or f"unbound_block_{'xyz'[d]}" if d in blocks
                 else f"unbound_block_{'xyz'[d]}" for d in range(len(grid))]
        extents = [threads[d][0] if d in threads else one()
                   for d in range(max(threads, default=0) + 1)]
        kernel = loc(ast.Call(
            func=loc(ast.Attribute(value=t_module, attr="Kernel", ctx=ast.Load())), args=grid,
            keywords=[ast.keyword(arg="threads", value=loc(ast.List(elts=extents, ctx=ast.Load())))]))
        target = loc(ast.Tuple(elts=[loc(ast.Name(id=n, ctx=ast.Store())) for n in names],
                               ctx=ast.Store()))
        binds = [ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                              value=call), s)
                 for name, call, s in thread_names]
        return ast.fix_missing_locations(ast.copy_location(
            ast.With(items=[ast.withitem(context_expr=kernel, optional_vars=target)],
                     body=binds + list(stmts[len(run):]) or [loc(ast.Pass())]), first))

    def top_level_error(self, s) -> FrontendError:
        """What may not stand at the top level of a prim_func body, named."""
        rule = ("only `with T.Kernel(...)` blocks, the parameters' annotations, parse-time "
                "constants and names bound to expressions of constants, symbols and scalar "
                "parameters (no load, no effect) may stand at the top level of a prim_func body")
        form = self.match_form(s)
        if form is not None:
            return self.error(s, f"T.{form.__name__} after other statements: it binds a "
                                 "T.handle parameter at the top of the body, among the "
                                 "parameters' annotations, symbols and parse-time constants, "
                                 "before any other statement")
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and \
                self.python_value(s.value.func) is PersistentTileScheduler:
            self.assign(s)  # a stateful scheduler's refusal (its state lives in a T.Kernel)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            self.form_of(s.value.func)  # a TileLang form tilecute lacks says so by name
            return self.error(s, f"`{ast.unparse(s.value.func)}(...)` at the top level: {rule}")
        if isinstance(s, ast.AnnAssign):
            return self.error(s, f"`{ast.unparse(s)}` at the top level: a body annotation types "
                                 "a parameter the signature leaves unannotated, before any "
                                 "other statement")
        return self.error(s, f"`{ast.unparse(s).splitlines()[0]}` at the top level: {rule}")

    def top_level_macro(self, s: ast.Expr) -> list[N.Stmt]:
        """A ``T.macro`` call at the top level of a prim_func (TileLang's eager kernels call
        one holding the ``T.Kernel`` blocks), or one of a plain Python function opening
        them (``top_function_of``): its names bound to expressions of the
        function's symbols and scalar parameters (``M, N = A.shape``) are substituted into
        the blocks that follow; anything else but a ``T.Kernel`` block is refused."""
        fn, what = self.top_function_of(s.value.func)
        return self.top_level_kernels(
            self.inline_function(fn, what, s.value, s),
            lambda st: self.error(s, f"`{ast.unparse(s.value)}` at the top level of a prim_func "
                                     "may hold only `with T.Kernel(...)` blocks and names bound "
                                     "to shapes and scalar parameters"))

    def top_level_kernels(self, stmts, refuse) -> list[N.Stmt]:
        """The ``T.Kernel`` blocks of a macro inlined at the top level of a prim_func, its
        names bound to expressions of the function's symbols and scalar parameters
        substituted into the blocks that follow; ``refuse(stmt)`` is the error for any
        other statement."""
        from ..ir.visitor import substitute

        out, mapping = [], {}
        for st in stmts:
            st = substitute(st, mapping) if mapping else st
            if isinstance(st, N.Let) and _host_pure(st.value, self.symbols, self.scalar_params):
                mapping[st.var.name] = st.value
            elif isinstance(st, N.KernelScope):
                out.append(st)
            else:
                raise refuse(st)
        return out

    def ann_assign(self, s: ast.AnnAssign) -> list[N.Stmt]:
        """``a: T.int32 = v`` in a kernel (TileLang's frontend, TVMScript's typed local):
        ``v`` converted to that dtype, bound to ``a`` as TileLang's ``Bind`` (an immutable
        alias, like ``a = v``: not a statement of a pipelined loop's manual schedule); where
        the function assigns ``a`` again (``a = 2``, ``a += 1``), a scalar variable, as
        ``a = T.alloc_var(T.int32, init=v)``; ``a: T.int32`` alone declares it (zero)."""
        if not isinstance(s.target, ast.Name):
            raise self.error(s, f"`{ast.unparse(s)}`: an annotated assignment declares a name")
        if not self.in_kernel:
            raise self.error(s, f"`{ast.unparse(s)}`: a typed local is declared inside a T.Kernel")
        annotation = self.eval_python(s.annotation)
        if isinstance(annotation, str) and VL.vector_dtype(annotation):
            annotation = VL.VectorDType(annotation)
        if isinstance(annotation, VL.VectorDType):
            return self.vector_ann_assign(s, annotation)
        try:
            dt = dtype_name(annotation)
        except (FrontendError, UnknownDTypeError) as e:
            raise self.error(s, f"`{ast.unparse(s)}`: the annotation must be a scalar dtype "
                                f"(T.int32, T.float32, ...): {e}") from None
        name = s.target.id
        self.check_rebind(name, s)
        value = N.Const(0, dt) if s.value is None else self.expr(s.value)
        if isinstance(value, _BufferRef) or not (_is_ir(value) or
                                                 isinstance(value, (int, float, bool))):
            raise self.error(s, f"`{ast.unparse(s)}`: the value must be a scalar")
        if s.value is not None and (name not in self.reassigned or
                                    any(k == "parallel" for k, _, _ in self.context())):
            # TileLang's Bind: an immutable value alias (a pipelined loop's schedule does not
            # count it; in a T.Parallel body, a value per element, which a later `a = ...`
            # rebinds), as `name = value` is
            return self.let(name, N.cast(N.as_expr(value, dt), dt), s)
        return self.declare_var(name, dt, N.as_expr(value, dt), s)

    def vector_ann_assign(self, s: ast.AnnAssign, vector: VL.VectorDType) -> list[N.Stmt]:
        """``v: T.float16x4 = value``: a vector of that many lanes, each converted to the
        scalar dtype, bound as ``v = value`` is (reassigned later, or declared alone, a
        vector variable as ``T.alloc_var(T.float16x4)``)."""
        name = s.target.id
        value = None if s.value is None else self.expr(s.value)
        if value is not None and (not isinstance(value, VL.LaneVector) or
                                  value.count != vector.lanes):
            raise self.error(s, f"`{ast.unparse(s)}`: a {vector.__name__} takes a "
                                f"{vector.lanes}-lane vector, got {_show(value)}")
        if value is not None:
            value = dataclasses.replace(value, lanes=tuple(N.cast(x, vector.scalar)
                                                           for x in value.lanes))
        if value is not None and name not in self.reassigned:
            return self.assign_name(s.target, None, s, value)
        self.check_rebind(name, s)
        buf = N.Buffer(self.fresh(name), vector.scalar, (N.Const(vector.lanes, "int32"),),
                       "local")
        ref = _VectorVarRef(buf, vector.lanes)
        self.bind(name, ref)
        zeros = VL.broadcast(N.const(0, vector.scalar), vector.lanes)
        return [N.Allocate(buf, loc=self.loc(s))] + self.store_lanes(
            buf, ref.indices(), value if value is not None else zeros, s)

    def declare_var(self, name: str, dt: str, value: N.Expr, s) -> list[N.Stmt]:
        """A scalar variable ``name`` (a one-element local buffer, read and assigned like a
        scalar) of dtype ``dt`` holding ``value``: ``T.alloc_var`` and typed locals."""
        buf = N.Buffer(self.fresh(name), dt, (N.Const(1, "int32"),), "local")
        self.bind(name, _VarRef(buf))
        return [N.Allocate(buf, loc=self.loc(s)),
                N.Store(buf.name, (N.Const(0, "int32"),), N.cast(value, dt), loc=self.loc(s))]

    def try_python_assign(self, s: ast.Assign) -> bool:
        """A top-level `name = <parse-time constant>` binds a Python value; a value that
        reads no buffer and has no effect, an expression of constants, the function's
        symbols and scalar parameters (`M = A.shape[0]`, `M, K = A.shape`, `blocks =
        T.ceildiv(M, 128)`, `zero = T.Cast(accum_dtype, 0)`), binds the name to that
        expression, which each use inside the kernels then is: TileLang's builder keeps a
        pure value at the prim_func level as is (its ``bind`` returns the ``PrimExpr``)."""
        if len(s.targets) != 1 or not isinstance(s.targets[0], (ast.Name, ast.Tuple)):
            return False
        try:
            value = self.eval_python(s.value)
        except FrontendError:
            return False

        def known(v) -> bool:
            if isinstance(v, (int, float, bool, str)):
                return True
            if isinstance(v, PersistentTileScheduler):
                return not v.stateful  # a decoder of tiles: no state, nothing to allocate
            if isinstance(v, tuple):
                return all(known(x) for x in v)
            return isinstance(v, N.Expr) and _host_pure(v, self.symbols, self.scalar_params)

        target = s.targets[0]
        if isinstance(target, ast.Name):
            if not known(value):
                return False
            self.bind(target.id, value)
            return True
        if all(isinstance(t, ast.Name) for t in target.elts) and \
                isinstance(value, (tuple, list)) and len(value) != len(target.elts):
            # `M, N = A.shape` of a 3-d A: Python's (and so TileLang's) unpacking error
            raise self.error(s, f"cannot unpack {len(value)} values into {len(target.elts)} names")
        if not all(isinstance(t, ast.Name) for t in target.elts) or \
                not isinstance(value, (tuple, list)) or len(value) != len(target.elts) or \
                not all(known(v) for v in value):
            return False
        for t, v in zip(target.elts, value):
            self.bind(t.id, v)
        return True

    def ws_stmt(self, s: ast.With, form: F.Form, call: ast.Call) -> N.Stmt:
        """``with T.ws(g, ...):`` (TileLang's warp-specialized region): the body on the
        warpgroups ``g, ...`` (merged and sorted, as TileLang does)."""
        if not self.in_kernel:
            raise self.error(s, "T.ws is only valid inside a T.Kernel")
        if s.items[0].optional_vars is not None:
            raise self.error(s, "T.ws binds no names: `with T.ws(0):`")
        a = self.args(form, call)
        groups = []
        for i, ref in enumerate(a.ref("warp_group_idx")):
            g = self.arg_value(ref)
            if isinstance(g, bool) or not isinstance(g, int) or g < 0:
                raise self.error(s, f"T.ws: warp_group_idx {i} must be a warpgroup index (an int "
                                    f">= 0) known at parse time; got {_show(g)}")
            groups.append(g)
        if not groups:
            raise self.error(s, "T.ws needs at least one warpgroup index")
        groups = sorted(set(groups))
        if groups != list(range(groups[0], groups[-1] + 1)):
            raise self.error(s, f"T.ws{tuple(groups)}: warpgroups that are not consecutive are not "
                                "supported (tilecute's region is one run of warpgroups)")
        threads = self.kernel_threads
        if len(threads) != 1 or threads[0] % N.WARPGROUP_THREADS:
            raise self.error(s, f"T.ws needs T.Kernel(..., threads=n) with n a multiple of "
                                f"{N.WARPGROUP_THREADS} (whole warpgroups); the kernel has "
                                f"threads={threads if len(threads) > 1 else threads[0]}")
        if (groups[-1] + 1) * N.WARPGROUP_THREADS > threads[0]:
            raise self.error(s, f"T.ws({groups[-1]}): the kernel's {threads[0]} threads are "
                                f"{threads[0] // N.WARPGROUP_THREADS} warpgroup(s)")
        if self.in_ws:
            raise self.error(s, "T.ws regions cannot nest")
        self.in_ws = True
        self.push(control=True)
        try:
            body = self.block(s.body)
        finally:
            self.pop()
            self.in_ws = False
        return N.WarpGroups(tuple(groups), body, loc=self.loc(s))

    def python_context(self, s: ast.With, top: bool) -> Optional[list[N.Stmt]]:
        """``with cm:`` where ``cm`` is a Python context manager of the program's, not a
        ``T.*`` form (TileOPs' ``with trace.group("producer", lead=0):``): TileLang's
        builder enters it while building, builds the body, and exits it; so does tilecute
        while parsing (the body's statements, as if written without the ``with``).  None
        when ``s`` is another ``with``."""
        if len(s.items) != 1:
            return None
        item = s.items[0]
        node = item.context_expr
        try:
            head = self.eval_python(node.func if isinstance(node, ast.Call) else node)
        except FrontendError:
            return None
        if isinstance(head, (F.Form, F.IfFrame, F.Unsupported)) or \
                getattr(head, "__module__", "").startswith("tilecute."):
            return None
        try:
            cm = self.eval_python(node)
        except FrontendError:
            return None
        if not (hasattr(type(cm), "__enter__") and hasattr(type(cm), "__exit__")) or \
                type(cm).__module__.startswith("tilecute."):
            return None
        if item.optional_vars is not None:
            raise self.error(s, f"`with {ast.unparse(node)} as {ast.unparse(item.optional_vars)}`: "
                                "tilecute runs a Python context manager around the body while "
                                "parsing it, but binds no name to what it enters (drop `as`)")

        def run(step, *args):
            try:
                return step(*args)
            except FrontendError:
                raise
            except Exception as e:  # its Python failed: say where
                raise self.error(s, f"`with {ast.unparse(node)}`: the context manager's "
                                    f"{step.__name__} raised {type(e).__name__}: {e}") from None

        run(cm.__enter__)
        try:
            body = list(self.block(s.body, top))
        except BaseException:
            cm.__exit__(*sys.exc_info())
            raise
        run(cm.__exit__, None, None, None)
        return body

    def if_frame_name(self, node) -> Optional[str]:
        """``"If"`` / ``"Then"`` / ``"Else"`` when ``node`` is a call of TVMScript's if frame
        ``T.If(...)`` / ``T.Then()`` / ``T.Else()``, else None."""
        if not isinstance(node, ast.Call):
            return None
        try:
            v = self.eval_python(node.func)
        except FrontendError:
            return None
        return v.__name__ if isinstance(v, F.IfFrame) else None

    def while_frame(self, s: ast.With) -> Optional[ast.While]:
        """TVMScript's while frame ``with T.While(cond): body`` as the ``while cond: body``
        it means; None for another ``with``."""
        if len(s.items) != 1 or self.if_frame_name(s.items[0].context_expr) != "While":
            return None
        if s.items[0].optional_vars is not None:
            raise self.error(s, "`with T.While(cond)` binds no names")
        cond = self.frame_condition(s, s.items[0].context_expr, "While")
        return ast.copy_location(ast.While(test=cond, body=s.body, orelse=[]), s)

    def frame_condition(self, s, call: ast.Call, name: str):
        """The condition of TVMScript's ``T.If(condition)`` / ``T.While(condition)`` frame
        (positional or ``condition=``, as TileLang's signature); any other argument is an
        error naming the frame."""
        conds = list(call.args) + [k.value for k in call.keywords if k.arg == "condition"]
        others = [k.arg for k in call.keywords if k.arg != "condition"]
        if len(conds) != 1 or others:
            extra = f" (got {', '.join(f'{k}=' for k in others)})" if others else ""
            raise self.error(s, f"T.{name} takes one argument, the condition: "
                                f"`with T.{name}(cond):`{extra}")
        return conds[0]

    def if_frames(self, s: ast.With) -> Optional[ast.If]:
        """TVMScript's if frames as the ``if`` statement they mean: ``with T.If(c),
        T.Then(): A`` is ``if c: A``; ``with T.If(c):`` whose body is ``with T.Then(): A``
        and optionally ``with T.Else(): B`` is ``if c: A else: B``.  None when ``s`` is
        another ``with``; any other arrangement of the frames is an error at its line."""
        names = [self.if_frame_name(it.context_expr) for it in s.items]
        names = [None if n == "While" else n for n in names]  # (see while_frame)
        if not any(names):
            return None
        for it, name in zip(s.items, names):
            if name is not None and it.optional_vars is not None:
                raise self.error(s, f"`with T.{name}(...)` binds no names")
        if names[0] != "If":
            name = next(n for n in names if n)
            raise self.error(s, f"`with T.{name}()` stands directly inside `with T.If(cond):` "
                                "(or as `with T.If(cond), T.Then():`)")
        cond = self.frame_condition(s, s.items[0].context_expr, "If")

        def no_args(node, call, name):
            if call.args or call.keywords:
                raise self.error(node, f"T.{name}() takes no arguments")

        if len(s.items) == 2 and names[1] == "Then":
            no_args(s, s.items[1].context_expr, "Then")
            then, orelse = s.body, []
        elif len(s.items) == 1:
            body = [b for b in s.body if not (isinstance(b, ast.Pass) or (
                isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)))]
            kinds = [self.if_frame_name(b.items[0].context_expr)
                     if isinstance(b, ast.With) and len(b.items) == 1 else None for b in body]
            if kinds not in (["Then"], ["Then", "Else"]):
                raise self.error(s, "`with T.If(cond):` holds `with T.Then():` and optionally "
                                    "`with T.Else():`, nothing else (TVMScript's if frame)")
            for b, name in zip(body, kinds):
                no_args(b, b.items[0].context_expr, name)
            then, orelse = body[0].body, body[1].body if len(body) == 2 else []
        else:
            raise self.error(s, "`with T.If(cond), T.Then():` takes those two items only")
        return ast.copy_location(ast.If(test=cond, body=then, orelse=orelse), s)

    def with_stmt(self, s: ast.With) -> N.Stmt:
        if len(s.items) != 1:
            raise self.error(s, "one `with T.Kernel(...)` at a time")
        item = s.items[0]
        call = item.context_expr
        form = self.form_of(call.func) if isinstance(call, ast.Call) else None
        if form is not None and form.__name__ == "attr":
            raise self.error(s, "`with T.attr(...)` outside a T.Kernel: TVM's reduce_scope "
                                "attribute covers a T.tvm_thread_allreduce inside a kernel")
        if form is None or form.kind != "with":
            f = call.func if isinstance(call, ast.Call) else call
            named = f"`with {ast.unparse(f)}(...)`" if isinstance(call, ast.Call) else \
                f"`with {ast.unparse(call)}`"
            raise self.error(s, f"{named} is not supported by tilecute: the only `with` "
                                "forms are `with T.Kernel(...) as ...`, `with T.ClusterKernel(...) "
                                "as ...`, `with T.ws(...)` and `with T.attr(T.comm_reducer(...), "
                                "\"reduce_scope\", ...)`")
        if form.__name__ == "ws":
            return self.ws_stmt(s, form, call)
        if self.in_kernel:
            raise self.error(s, "T.Kernel blocks cannot nest")
        a = self.args(form, call)
        grid = [self.arg_index(r, form.__name__) for r in a.ref("blocks")]
        if len(grid) > 3:
            raise self.error(s, f"T.{form.__name__} takes 0 to 3 grid extents, got {len(grid)}")
        # TileLang's T.Kernel() / T.Kernel(threads=n): no blockIdx binding, one block
        gridless = not grid
        if gridless:
            if item.optional_vars is not None:
                raise self.error(s, f"T.{form.__name__}() with no grid extents has no block "
                                    f"index to bind (TileLang binds an empty list): drop "
                                    f"`as {ast.unparse(item.optional_vars)}`, or give the grid "
                                    f"(T.{form.__name__}(1, ...) as bx)")
            grid = [N.const(1, "int32")]
        a.refuse_unless("prelude", (None,), "tilecute emits CuTe DSL, not CUDA C++, so there is "
                                            "no C code to import")
        threads = self.int_tuple(a.node("threads"), "threads", a.value("threads")) \
            if a.value("threads") is not None else (128,)
        if not 1 <= len(threads) <= 3:
            raise a.fail("threads", "threads must have 1 to 3 dims")
        cluster, producer = None, 0
        if form.__name__ == "ClusterKernel":
            dims = self.int_tuple(a.node("cluster_dims"), "cluster_dims", a.value("cluster_dims"))
            if len(dims) > 3:
                raise a.fail("cluster_dims", "cluster_dims has at most 3 dims")
            dims = dims + (1,) * (3 - len(dims))
            cluster = None if dims == (1, 1, 1) else dims
        else:
            if a.value("cluster") is not None and a.value("cluster_dims") is not None:
                raise a.fail("cluster_dims", "cluster_dims= and cluster= are the same launch "
                                             "setting; give one")
            if a.value("cluster_dims") is not None:  # TileLang 0.1.15's T.Kernel(cluster_dims=)
                dims = self.int_tuple(a.node("cluster_dims"), "cluster_dims",
                                      a.value("cluster_dims"))
                if len(dims) > 3:
                    raise a.fail("cluster_dims", "cluster_dims has at most 3 dims")
                dims = dims + (1,) * (3 - len(dims))
                cluster = None if dims == (1, 1, 1) else dims
            elif a.value("cluster") is not None:
                cluster = self.int_tuple(a.node("cluster"), "cluster", a.value("cluster"))
            if a.given("producer_threads"):
                producer = a.static_int("producer_threads", 0)
        names = []
        if item.optional_vars is not None:
            t = item.optional_vars
            elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
            for e in elts:
                if not isinstance(e, ast.Name):
                    raise self.error(s, "T.Kernel binds plain names: `as bx` or `as (bx, by)`")
                names.append(e.id)
            if len(names) != len(grid):
                raise self.error(s, f"T.Kernel has {len(grid)} grid extents but binds "
                                    f"{len(names)} names")
        else:
            names = ["bx", "by", "bz"][: len(grid)]
        self.push(control=False)
        block_vars = []
        for nm, g in zip(names, grid):
            # TileLang binds a block index of its extent's dtype: an int64 grid extent
            # (T.ceildiv(n, 512) of an int64 n) gives an int64 index
            v = N.Var(self.fresh(nm), g.dtype)
            block_vars.append(v)
            if not gridless:  # the one block's index is bound to no name
                self.bind(nm, v)
        self.kernel_grid = (tuple(grid), tuple(names))
        self.kernel_cluster = cluster
        self.kernel_blocks = tuple(block_vars)
        self.kernel_threads = tuple(threads)
        self.in_kernel = True
        self.layout_annotations: dict[str, tuple[N.Layout, ast.AST]] = {}
        # global tensors with TileLang's index-map layout: name -> (GlobalMap, Loc)
        self.global_layouts: dict = {}
        # shared buffers with an index map of the program's (T.Layout(shape, forward_fn)):
        # name -> (custom_layouts.SharedMap, Loc)
        self.shared_layouts: dict = {}
        # the T.Kernel's annotations, KernelScope fields (defaults: none given)
        self.kernel_notes = {"min_blocks_per_sm": 0, "producer_regs": 0, "consumer_regs": 0,
                             "reg_alloc": True, "safe_values": (), "l2_hit_ratios": ()}
        try:
            body = self.top_tensor_views(s) + self.block(self.top_views + list(s.body))
            body = self.fold_thread_returns(body)
        finally:
            self.in_kernel = False
            self.pop()
        if self.global_layouts:
            body = self.map_global_layouts(body)
        body = self.annotate_layouts(body)
        if self.shared_layouts:
            body = self.map_global_layouts(body, shared=True)
        body = _hoist_shared(body)
        body = _hoist_default_vars(body, self.default_zero_vars, lambda loc, msg: FrontendError(
            msg, loc, self.fname, linecache.getline(loc.file, loc.line) if loc else ""))
        return N.KernelScope(tuple(grid), threads, tuple(block_vars), body, cluster,
                             loc=self.loc(s), producer_threads=producer,
                             **self.kernel_notes)

    def int_tuple(self, node, what, v=None) -> tuple[int, ...]:
        if v is None:
            v = self.eval_python(node)
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            raise self.error(node, f"{what} must be positive ints known at parse time, got {v!r}")
        return v

    def python_iterable(self, node, value, what: str):
        """``value`` (of ``node``) iterated while parsing: TileLang's builder refuses a TIR
        expression or buffer (``python_iterable``) and anything that is not iterable."""
        if _is_ir(value) or VL.is_vector(value) or \
                isinstance(value, (_BufferRef, _RegionRef, _VarRef, _VectorVarRef, F.Form)):
            raise self.error(node, f"{what} over `{ast.unparse(node)}`: a TIR expression or "
                                   "buffer is not iterable; use range(n) or T.serial(n) to "
                                   "loop over a runtime extent, or iterate over a Python "
                                   "container")
        try:
            return list(value)
        except TypeError:
            raise self.error(node, f"{what} over `{ast.unparse(node)}`: expected range, "
                                   "T.serial, T.Parallel, T.unroll, T.Pipelined, ... or a "
                                   f"Python iterable, got {type(value).__name__}") from None

    def bind_python_target(self, target, value, s) -> None:
        """Bind a Python loop's or comprehension's target (a name or nested tuple of names)
        to one item, as Python does."""
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
            return
        if isinstance(target, (ast.Tuple, ast.List)) and \
                not any(isinstance(t, ast.Starred) for t in target.elts):
            try:
                items = list(value)
            except TypeError:
                raise self.error(s, f"cannot unpack {type(value).__name__} into "
                                    f"`{ast.unparse(target)}`") from None
            if len(items) != len(target.elts):
                raise self.error(s, f"cannot unpack {len(items)} values into "
                                    f"{len(target.elts)} names (`{ast.unparse(target)}`)")
            for t, v in zip(target.elts, items):
                self.bind_python_target(t, v, s)
            return
        raise self.error(s, f"a Python loop target is a name or a tuple of names, not "
                            f"`{ast.unparse(target)}`")

    def python_loop(self, s: ast.For) -> list[N.Stmt]:
        """``for w in taps:`` / ``for i, (x, t) in enumerate(zip(xs, tiles)):`` over a
        Python iterable: TileLang's builder runs the body once per item while tracing (no
        loop in the kernel, no new scope); ``break`` / ``continue`` end the expansion or the
        item, and under a runtime condition are TileLang's NotImplementedError."""
        items = self.python_iterable(s.iter, self.expr(s.iter), "a for loop")
        out: list[N.Stmt] = []
        for item in items:
            self.bind_python_target(s.target, item, s)
            body = list(self.block(s.body))
            stop = None
            for k, st in enumerate(body):
                if isinstance(st, (_Break, _Continue)) and st.statement:
                    stop = "break" if isinstance(st, _Break) else "continue"
                    body = body[:k]
                    break
                self.python_loop_exit_under_if(st, s)
            out.extend(body)
            if stop == "break":
                break
        return out

    def python_loop_exit_under_if(self, st, s) -> None:
        """A ``break``/``continue`` of a Python loop under a runtime ``if`` (not inside a
        kernel loop of its own): TileLang cannot lower it (no runtime loop to leave)."""
        if isinstance(st, (N.For, N.While)):
            return
        if isinstance(st, (_Break, _Continue)) and st.statement:
            raise self.error(s, f"{'`break`' if isinstance(st, _Break) else '`continue`'} of a loop over a Python iterable under a runtime "
                                "condition: the expanded loop has no runtime target "
                                "(TileLang's NotImplementedError); loop with T.serial, or "
                                "branch on a parse-time condition")
        for f in getattr(st, "__dataclass_fields__", {}):
            v = getattr(st, f, None)
            if isinstance(v, tuple):
                for x in v:
                    if isinstance(x, N.Stmt):
                        self.python_loop_exit_under_if(x, s)

    def for_stmt(self, s: ast.For) -> list[N.Stmt]:
        if s.orelse:
            raise self.error(s, "for-else is not supported")
        it = s.iter
        loops = "T.Parallel(...), T.serial(...), T.unroll(...), T.Pipelined(...) or range(...)"
        form = self.form_of(it.func) if isinstance(it, ast.Call) else None
        if form is None and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                it.func.id == "range" and self.lookup("range", it) is range:
            form = F.FORMS["serial"]  # range(start, stop, step) binds like T.serial
        if form is None:
            # TileLang's builder: a loop over a Python iterable (a list, a tuple, zip(...),
            # enumerate(...)) expands its body once per item while the kernel is traced
            return self.python_loop(s)
        if form.kind != "for":
            raise self.error(s, f"loop over {loops}")
        if not self.in_kernel:
            raise self.error(s, "loops must be inside a T.Kernel block")
        if form.__name__ == "parallel":  # TVM's T.parallel(n): T.Parallel(n), as in TileLang
            a = self.args(form, it)
            a.no_annotations()
            extent = a.node("start")
            if a.given("stop"):
                if not N.Const(0, "int32") == N.as_expr(a.value("start")):
                    raise a.fail("start", "T.parallel(start, stop) is supported from start 0 "
                                          "(it is T.Parallel(stop), whose iterations start at 0)")
                extent = a.node("stop")
            it = ast.copy_location(ast.Call(func=it.func, args=[extent], keywords=[]), it)
            form = F.FORMS["Parallel"]
        a = self.args(form, it)
        target = s.target
        names = [e for e in (target.elts if isinstance(target, ast.Tuple) else [target])]
        if not all(isinstance(n, ast.Name) for n in names):
            raise self.error(s, "loop variables must be plain names")
        if form.__name__ == "Persistent":
            return self.persistent_loop(s, a, [n.id for n in names])
        kind = _LOOPS[form.__name__]
        ann: dict = {}
        if kind == "parallel":
            ann = a.annotations(_PARALLEL_ANNOTATIONS, _PARALLEL_ANNOTATIONS_REFUSED)
        elif kind == "unrolled" and "unroll_factor" in a.sig.parameters:
            # (TileLang's T.unroll stores its two arguments under these keys)
            ann = a.annotations(("pragma_unroll_factor", "pragma_unroll_explicit"))
        else:
            a.no_annotations()
        num_stages, vector_width, replicated, async_copy = 0, 0, False, False
        unroll_factor = 0
        copy_instruction, loop_layout = "", None
        warp_specialize = None
        step = None
        given_int64 = False
        if kind == "parallel":
            extents = [self.parallel_extent(self.folded(self.arg_index(r, "Parallel")), s, "Parallel")
                       for r in a.ref("extents")]
            if not extents:
                raise self.error(s, "T.Parallel needs at least one extent")
            vector_width = a.static_int("vector_width", 0)
            if "coalesced_width" in ann:  # (TileLang's T.Parallel puts it there itself)
                width = ann["coalesced_width"]
                if not isinstance(width, int) or isinstance(width, bool) or width < 1:
                    raise a.fail("annotations", f"annotations={{'coalesced_width': {_show(width)}}}: "
                                                "coalesced_width must be an int >= 1 known at "
                                                "parse time")
                if a.value("coalesced_width") not in (None, width):
                    raise a.fail("coalesced_width", "coalesced_width and annotations="
                                                    "{'coalesced_width': ...} disagree")
                if vector_width and vector_width != width:
                    raise a.fail("annotations", f"coalesced_width={width} and "
                                                f"vector_width={vector_width} disagree")
                vector_width = width
            elif a.value("coalesced_width") is not None:
                width = a.static_int("coalesced_width", 1)
                if vector_width and vector_width != width:
                    raise a.fail("coalesced_width", f"coalesced_width={width} and "
                                                    f"vector_width={vector_width} disagree")
                vector_width = width
            loop_layout = self.loop_layout(a, ann, extents)
            # hints that cannot change results: tilecute's vectorization pass makes a
            # nest's global -> shared stores cp.async where it can, with or without them,
            # and completes them before the tile is read (docs/ir.md, T.Parallel)
            for key, value in (("prefer_async", a.value("prefer_async")),
                               ("parallel_prefer_async", ann.get("parallel_prefer_async")),
                               ("parallel_async_without_async_commit_wait",
                                ann.get("parallel_async_without_async_commit_wait"))):
                if value is not None and not isinstance(value, bool):
                    raise a.fail("prefer_async" if key == "prefer_async" else "annotations",
                                 f"{key}={_show(value)} must be True or False")
            replicated = a.static_bool("replicated")
            async_copy = a.static_bool("async_copy")
            copy_instruction = a.value("copy_instruction")
            if copy_instruction not in N.NEST_COPY_INSTRUCTIONS:
                raise a.fail("copy_instruction", f"copy_instruction={_show(copy_instruction)}: "
                                                 "\"cp_async\", \"sync\", \"async\" or \"\"")
            if len(extents) != len(names):
                raise self.error(s, f"T.Parallel has {len(extents)} extents but {len(names)} "
                                    "loop variables")
            ranges = [(N.Const(0, "int32"), e) for e in extents]
        elif form.__name__ == "grid":
            extents = [self.parallel_extent(self.folded(self.arg_index(r, "grid")), s, "grid")
                       for r in a.ref("extents")]
            if not extents:
                raise self.error(s, "T.grid needs at least one extent")
            if len(extents) != len(names):
                raise self.error(s, f"T.grid has {len(extents)} extents but {len(names)} "
                                    "loop variables")
            ranges = [(N.Const(0, "int32"), e) for e in extents]
        else:
            if len(names) != 1:
                raise self.error(s, f"{kind} loops bind one variable")
            start = self.arg_index(a.ref("start"), form.__name__)
            if a.ref("stop") is None:
                start, stop = N.Const(0, "int32"), start
            else:
                stop = self.arg_index(a.ref("stop"), form.__name__)
            # TVM's loop variable has the dtype of the range as given: T.serial(T.int64(8))
            # binds an int64 one, though its constant extent folds to an int32 8 below
            given_int64 = "int64" in (start.dtype, stop.dtype)
            if kind == "pipelined":
                num_stages = a.static_int("num_stages", 0)
                a.refuse_unless("sync", (None, (), []), "tilecute schedules pipelined loops "
                                                        "itself (num_stages, or stage/order "
                                                        "that say the same)")
                ws = a.value("warp_specialize")
                warp_specialize = None if ws is None else a.static_bool("warp_specialize")
                if num_stages == 0 and a.value("stage") in (None, [], ()) and \
                        a.value("order") in (None, [], ()):
                    # TileLang: no pipelining
                    if warp_specialize:
                        raise a.fail("warp_specialize", "warp_specialize needs a pipelined "
                                                        "loop (num_stages >= 1)")
                    kind, warp_specialize = "serial", None
            else:
                if "step" in a.sig.parameters and a.value("step") is not None:
                    if isinstance(a.value("step"), N.Expr) and \
                            not isinstance(self.folded(a.value("step")), N.Const):
                        # TileLang's run-time step (it warns): the iterations start +
                        # v * step for v below ceildiv(stop - start, step)
                        step = self.arg_index(a.ref("step"), form.__name__)
                    else:
                        step = a.static_int("step")
                    if isinstance(step, int) and step == 0:  # TileLang's ValueError
                        raise a.fail("step", "step=0: a stepped loop's step must be non-zero")
                if kind == "unrolled" and "explicit" in a.sig.parameters:
                    unroll_factor = self.unroll_factor(a, ann)
            if isinstance(step, N.Expr):
                extent = ops.ceildiv(_sub(stop, start), step)
            elif step is not None and step < 0:
                # TileLang's stepped loop counting down (`range(n - 1, -1, -1)`): the
                # iterations start, start + step, ... while above stop
                extent = ops.ceildiv(self.extent(start, stop), -step)
            else:
                extent = self.extent(stop, start)
                if kind in ("serial", "unrolled") and isinstance(extent, N.Const) and extent.value < 0:
                    # TileLang's T.serial(2, 1) / range(n, m) with m < n: no iteration
                    extent = N.Const(0, extent.dtype)
            if isinstance(step, int) and step > 1:
                extent = ops.ceildiv(extent, step)
            if given_int64 and isinstance(start, N.Const) and start.dtype != "int64":
                start = N.Const(int(start.value), "int64")  # (the variable counts in Int64)
            ranges = [(start, extent)]
            if kind in ("serial", "unrolled") and not isinstance(step, N.Expr) and \
                    step in (None, 1) and isinstance(extent, N.Const) and extent.value == 1 \
                    and not _breaks(s.body):
                # a one-step loop is its body, with the variable bound to the start
                self.push(kind="loop")
                try:
                    self.bind(names[0].id, start)
                    return list(self.block(s.body))
                finally:
                    self.pop()
        self.push(kind="parallel" if kind == "parallel" else "loop")
        loop_vars = []
        prologue: list[N.Stmt] = []
        for nm, (start, extent) in zip(names, ranges):
            # TVM's loop variable has its range's dtype: int64 over an int64 start or extent
            # (T.serial(T.ceildiv(n, 512)) of an int64 n)
            dtype = "int64" if "int64" in (start.dtype, extent.dtype) or given_int64 else "int32"
            if step is not None and (isinstance(step, N.Expr) or step != 1):
                counter = N.Var(self.fresh(f"{nm.id}_iter"), dtype)
                v = N.Var(self.fresh(nm.id), dtype)
                prologue.append(N.Let(v, N.binop("add", ranges[0][0],
                                                 N.binop("mul", counter, step)), loc=self.loc(s)))
                loop_vars.append(counter)
                self.bind(nm.id, v)
            else:
                v = N.Var(self.fresh(nm.id), dtype)
                loop_vars.append(v)
                self.bind(nm.id, v)
        if prologue:
            ranges = [(N.Const(0, ranges[0][1].dtype), ranges[0][1])]
        vectorized = form.__name__ in ("vectorized", "Vectorized")
        self.vectorized_loops += vectorized
        try:
            body = tuple(prologue) + self.block(s.body)
        finally:
            self.pop()
            self.vectorized_loops -= vectorized
        if vectorized:
            ranges, body = self.widen_cp_async(loop_vars[0], ranges, body)
        if kind == "parallel":
            self.parallel_semantic_check(s, body, loop_vars)
        overlap = kind == "pipelined" and a.given("overlap_mma") and a.static_bool("overlap_mma")
        loads_last: tuple = ()
        # (None, as 0.1.15's positional `T.Pipelined(0, n, 2, None, None, {})` gives, is no
        # schedule: TileLang's default)
        if kind == "pipelined" and any(a.value(n) not in (None, [], ()) for n in ("stage", "order", "group")):
            num_stages, overlap, loads_last, body = self.manual_stages(a, body, num_stages)
            if num_stages == 0:
                kind, warp_specialize = "serial", None
        innermost = len(loop_vars) - 1
        for d, (v, (start, extent)) in reversed(list(enumerate(zip(loop_vars, ranges)))):
            width = vector_width if d == innermost else (1 if vector_width else 0)
            body = (N.For(v, start, extent, kind, body, num_stages if kind == "pipelined" else 0,
                          width, replicated, async_copy, loc=self.loc(s),
                          warp_specialize=warp_specialize, overlap_mma=overlap,
                          copy_instruction=copy_instruction if d == innermost else "",
                          loop_layout=loop_layout if d == innermost else None,
                          unroll_factor=unroll_factor, loads_last=loads_last,
                          vectorized=vectorized),)
            if d == innermost and _has_break(body[0].body, _Continue):
                body = self.continue_loop(body[0], kind)
            if d == innermost and _has_break(body[-1].body):
                body = body[:-1] + self.break_loop(body[-1], kind)
        return list(body)

    def parallel_semantic_check(self, s, body: tuple, loop_vars: list) -> None:
        """TileLang's ParallelLocalIndexChecker (its ValueError): a local (thread-private)
        buffer may not be indexed by a T.Parallel loop variable, each thread running only
        its share of the iterations.  Checked on the loops written in the source only (the
        nests the frontend builds for tile ops over locals are TileLang's lowered tile ops,
        which its check never sees).  Its nested-loop check is the validator's
        (``nested_loops``)."""
        names = {v.name: v for v in loop_vars}
        for node in walk_nodes(body):
            if not isinstance(node, (N.Load, N.Store)):
                continue
            try:
                buf = self.buffer_named(node.buffer)
            except KeyError:
                buf = next((a.buffer for a in walk_stmts(body) if isinstance(a, N.Allocate)
                            and a.buffer.name == node.buffer), None)
            used = var_names(node.indices) & set(names)
            if buf is not None and buf.scope == "local" and used:
                raise self.error(s, f"Local buffer `{buf.name}` is indexed by T.Parallel loop "
                                    f"variable `{sorted(used)[0]}`: local buffers are "
                                    "thread-private (TileLang's semantic check refuses it); "
                                    "use T.serial / T.vectorized / T.unroll for per-thread "
                                    "indexing, or T.alloc_fragment to spread the dimension "
                                    "over the threads", FrontendValueError)

    def unroll_factor(self, a: "_Args", ann: dict) -> int:
        """``T.unroll(..., explicit=, unroll_factor=)`` (or TileLang's annotation keys
        ``pragma_unroll_explicit`` / ``pragma_unroll_factor``, where T.unroll stores them):
        ``explicit`` unrolls completely, as plain ``T.unroll`` does in tilecute; a factor
        ``n`` is TileLang's ``#pragma unroll n``, ``For.unroll_factor``.  Both given is
        TileLang's ValueError."""
        explicit, factor = a.static_bool("explicit"), a.value("unroll_factor")
        where = "unroll_factor"
        if not explicit and ann.get("pragma_unroll_explicit") is not None:
            explicit, where = ann["pragma_unroll_explicit"], "annotations"
            if not isinstance(explicit, bool):
                raise a.fail("annotations", f"pragma_unroll_explicit={_show(explicit)} must be "
                                            "True or False")
        if factor is None and ann.get("pragma_unroll_factor") is not None:
            factor, where = ann["pragma_unroll_factor"], "annotations"
        if factor is None:
            return 0
        if explicit:
            raise a.fail(where, "T.unroll's explicit and unroll_factor params are mutually "
                                "exclusive (TileLang's ValueError)")
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise a.fail(where, f"unroll_factor={_show(factor)} must be an int >= 1 known "
                                "at parse time")
        return factor

    def loop_layout(self, a: "_Args", ann: dict, extents) -> "N.Layout | None":
        """``T.Parallel(..., loop_layout=T.Fragment(extents, ...))`` (or the annotation key
        ``parallel_loop_layout``): TileLang's map of the loop's iterations onto threads, as
        the tilecute layout with the same map (:func:`.custom_layouts.match_fragment`), or
        tilecute's own ``T.Layout("blocked" | "replicated", ...)`` (as the printer writes
        it); the layout pass runs the nest so."""
        given = self.given_loop_layout(a, ann, "T.Parallel")
        if given is None or isinstance(given[0], N.Layout):
            return given and given[0]
        value, arg = given
        if not all(isinstance(e, N.Const) for e in extents):
            raise a.fail(arg, "loop_layout needs constant extents (tilecute evaluates the "
                              "T.Fragment over them)")
        return self.match_loop_layout(a, arg, value, [e.value for e in extents])

    def given_loop_layout(self, a: "_Args", ann: dict, form: str):
        """The ``loop_layout`` argument of ``a`` (or its annotation key
        ``parallel_loop_layout``) and the argument an error names: a ``T.Fragment``, or
        tilecute's own ``T.Layout("blocked" | "replicated", ...)``; None when not given."""
        from .custom_layouts import Fragment

        given = [(v, n) for v, n in ((self.python_arg(a, "loop_layout", f"{form}: loop_layout"),
                                      "loop_layout"),
                                     (ann.get("parallel_loop_layout"), "annotations"))
                 if v is not None]
        if not given:
            return None
        if len(given) > 1 and given[0][0] is not given[1][0]:
            raise a.fail("annotations", "loop_layout and annotations={'parallel_loop_layout': "
                                        "...} are both given")
        value, arg = given[0]
        if isinstance(value, N.Layout):
            if value.kind not in ("blocked", "replicated"):
                raise a.fail(arg, f"loop_layout={layout_str(value)}: a loop layout is blocked "
                                  "or replicated")
        elif not isinstance(value, Fragment):
            raise a.fail(arg, f"loop_layout is a T.Fragment over the loop's extents, got "
                              f"{_show(value)}")
        return value, arg

    def match_loop_layout(self, a: "_Args", arg: str, frag, extents) -> N.Layout:
        """The tilecute layout of ``T.Fragment`` ``frag`` over a loop of ``extents``."""
        from .custom_layouts import MapError, match_fragment

        try:
            return match_fragment(frag, extents, self.block_threads(), "loop_layout")
        except MapError as e:
            raise a.fail(arg, str(e)) from None

    def manual_stages(self, a: _Args, body, num_stages: int) -> tuple[int, bool, bool, tuple]:
        """``T.Pipelined(n, stage=[...], order=[...], group=[[...], ...])``: a manual
        schedule (``group`` gathers consecutive statements; ``stage`` and ``order`` are then
        per group), honored where it is one tilecute builds; returns (num_stages, overlap,
        loads_last, the body in its order):

        - tilecute's pipeline, ``num_stages = max(stage) + 1`` (or ``num_stages`` where
          given, TileLang's depth override: ``stage`` then places the statements, the
          depth is ``num_stages``; ``order`` issuing copies last needs 2): the copies into shared
          memory in stage 0 (or -1) and every other statement in the last stage, issued in
          the order ``order`` gives (TileLang's meaning: a step issues its statements in
          that order, each for the iteration its stage puts it at); each copy before the
          rest or after it (``For.loads_last``, the shared buffers of those after: the
          pipelining pass issues step k + S - 1's copies into them after step k's other
          statements); the other statements in that order (reordered in the body; not
          across scalar bindings); with one stage, the body in that order;
        - the MMA overlap (TileLang's pipelined attention): two ``T.gemm``s, the first in
          stage 0 and issued first, the second in stage 1, the statements between them in
          stage 0 or 1, and everything in stage 1 issued before the stage-0 work between
          the GEMMs (the next step's first GEMM and this step's second run while the
          softmax computes): the loop is marked ``overlap_mma`` (done by that pass).

        Anything else is refused, naming what differs."""
        scheduled = [t for t in body if not isinstance(t, N.Let)]
        n = len(scheduled)
        stage, order, group = a.value("stage"), a.value("order"), a.value("group")
        if group in ((), []):
            group = None
        if group is not None:
            if not isinstance(group, (tuple, list)) or not all(
                    isinstance(g, (tuple, list)) and g and all(
                        isinstance(x, int) and not isinstance(x, bool) for x in g) for g in group):
                raise a.fail("group", f"group={_show(group)}: a list of lists of statement "
                                      "indices known at parse time")
            if [x for g in group for x in g] != list(range(n)):
                raise a.fail("group", f"group={_show(group)}: tilecute takes groups of "
                                      f"consecutive statements covering the body's {n} "
                                      "scheduled statements in order (scalar bindings do not "
                                      "count)")
            groups = [[scheduled[x] for x in g] for g in group]
            if stage is None and order is None:
                raise a.fail("group", "group= without stage= or order= schedules nothing")
        else:
            groups = [[t] for t in scheduled]
        m = len(groups)
        unit = "groups" if group is not None else "scheduled statements"

        def int_list(name, v):
            if not isinstance(v, (tuple, list)) or not all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= -1 for x in v):
                raise a.fail(name, f"{name}={_show(v)}: a list of ints >= -1 known at parse "
                                   "time")
            if len(v) != m and group is None and len(v) == len(body):
                # TileLang's legacy form: an entry for each scalar binding too, ignored
                v = [x for x, t in zip(v, body) if not isinstance(t, N.Let)]
                if name == "order":  # the remaining entries' ranks
                    v = [sorted(v).index(x) for x in v]
            if len(v) != m:
                raise a.fail(name, f"{name}={_show(v)} has {len(v)} entries but the loop body "
                                   f"has {m} {unit} (scalar bindings do not count)")
            return list(v)
        stage = int_list("stage", stage) if stage is not None else [0] * m
        order = int_list("order", order) if order is not None else None
        scopes = {}
        for scope in self.scopes:
            scopes.update({v.buffer.name: v.buffer.scope for v in scope.values()
                           if isinstance(v, _BufferRef)})
        for t in body:
            if isinstance(t, N.Allocate):
                scopes[t.buffer.name] = t.buffer.scope

        def is_load(t):
            return isinstance(t, N.Copy) and scopes.get(t.dst.buffer) == "shared" \
                and scopes.get(t.src.buffer) == "global"
        loads = [all(is_load(t) for t in g) for g in groups]
        overlap = self.overlap_schedule(groups, loads, stage, order)
        if overlap:
            if a.given("num_stages") and num_stages < 2:
                raise a.fail("num_stages", f"num_stages={num_stages}: the overlapped GEMMs "
                                           "need 2 stages or more")
            return (num_stages if a.given("num_stages") else 2), True, (), body
        last = max(stage, default=0)
        for g, st, producer in zip(groups, stage, loads):
            want = (0, -1) if producer else (last,)
            if st not in want:
                t = g[0]
                what = "a copy into shared memory" if producer else "a statement other than a " \
                    "global-to-shared copy"
                why = (f"{what} at line {t.loc.line if t.loc else '?'} is in stage {st}; "
                       f"tilecute's pipeline puts copies into shared memory in stage 0 and the "
                       f"rest in the last stage ({last})")
                if order is not None and order != list(range(m)):
                    raise a.fail("order", f"order={_show(a.value('order'))} with stage="
                                          f"{_show(a.value('stage'))} is not supported: {why}, "
                                          "or the MMA overlap's schedule (the first T.gemm, then "
                                          "the stage-1 work and the second T.gemm, then the rest)")
                raise a.fail("stage", f"stage={_show(a.value('stage'))}: {why}")
        stages = last + 1 if last else 0
        # TileLang's num_stages > 0 beside stage= is the depth override (its pipeline
        # depth is the annotation when there is one, else max(stage) + 1: the sm_90 path
        # keeps num_stages buffers and barriers, stage=[0, 0, 0] included); 0 is no
        # annotation.  One stage (every entry 0) with num_stages=1 is the body in its order
        if num_stages > 0 and (num_stages, last) != (1, 0):
            if not last and order is not None and order != list(range(m)):
                # (sm_80's TileLang runs it unpipelined, the body in that order; sm_90's
                # pipelines it num_stages deep: a step's copies land before its reads)
                raise a.fail("num_stages", f"num_stages={num_stages} with every stage 0 and "
                                           f"order={_show(a.value('order'))}: TileLang reads "
                                           "it as one stage in that order on sm_80 and as a "
                                           f"{num_stages}-stage pipeline on sm_90 (different "
                                           "values where a statement reads a later copy); "
                                           "give stage= the copies' stage or drop num_stages")
            stages = num_stages
        loads_last: tuple = ()
        if order is not None and order != list(range(m)):
            issued = sorted(range(m), key=lambda g: order[g])  # (ties in source order)
            rest = [g for g in issued if not loads[g]]
            at = {g: i for i, g in enumerate(issued)}
            first, end = (at[rest[0]], at[rest[-1]]) if rest else (m, -1)
            inside = [g for g in issued if loads[g] and first < at[g] < end]
            if inside and stages:  # (one stage: the body in the given order, copies anywhere)
                t = groups[inside[0]][0]
                raise a.fail("order", f"order={_show(a.value('order'))} issues the copy into "
                                      f"shared memory at line {t.loc.line if t.loc else '?'} "
                                      "between the step's other statements; tilecute issues "
                                      "each copy of a step before them all or after them all")
            copies = [g for g in issued if loads[g]]
            dsts = [t.dst.buffer for g in copies for t in groups[g]]
            if stages and copies != sorted(copies) and len(set(dsts)) < len(dsts):
                raise a.fail("order", f"order={_show(a.value('order'))} reorders copies into "
                                      "one shared buffer; tilecute issues a step's copies in "
                                      "source order (one wait for them all)")
            moved = issued != list(range(m)) if not stages else rest != sorted(rest)
            if moved and any(isinstance(t, N.Let) for t in body):
                raise a.fail("order", f"order={_show(a.value('order'))} reorders statements of "
                                      "the body that has scalar bindings (x = ...) between "
                                      "them; tilecute reorders a pipelined body's statements "
                                      "only where it has none")
            # TileLang's meaning: within a step, the statements issue in the given order,
            # each at its stage's offset.  A copy into shared memory goes before the rest
            # or after it (loads_last: the copies the pipelining pass issues after it); the
            # rest follow the order.  With one stage (no pipeline) the body is the
            # statements in that order, as written.
            if not stages:
                body = tuple(t for g in issued for t in groups[g])
            else:
                loads_last = tuple(t.dst.buffer for g in copies if at[g] > end
                                   for t in groups[g]) if rest else ()
                if loads_last and stages == 1:
                    raise a.fail("num_stages", f"num_stages=1 with order="
                                               f"{_show(a.value('order'))}: the order issues "
                                               "copies after the step's other statements (for a "
                                               "later step), which needs 2 stages or more; one "
                                               "stage keeps one buffer")
                if rest != sorted(rest):
                    body = tuple(t for g in [groups[g] for g in copies] +
                                 [groups[g] for g in rest] for t in g)
        return stages, False, loads_last, body

    @staticmethod
    def overlap_schedule(groups, loads, stage, order) -> bool:
        """Whether ``stage``/``order`` over ``groups`` describe the MMA overlap (see
        :meth:`manual_stages`)."""
        gemms = [i for i, g in enumerate(groups) for t in g if isinstance(t, N.Gemm)]
        if order is None or len(gemms) != 2 or gemms[0] == gemms[1]:
            return False
        g1, g2 = gemms
        work = [i for i in range(len(groups)) if not loads[i]]
        if work[0] != g1 or work[-1] != g2 or stage[g1] != 0 or stage[g2] != 1:
            return False
        between = [i for i in work if g1 < i < g2]
        if any(stage[i] not in (0, 1) for i in between):
            return False
        late = [i for i in between if stage[i] == 1] + [g2]
        early = [i for i in between if stage[i] == 0]
        return all(order[g1] < order[i] for i in late + early) and \
            all(order[x] < order[y] for x in late for y in early)

    def persistent_loop(self, s: ast.For, a: _Args, names: list[str]) -> list[N.Stmt]:
        """``for bx, by in T.Persistent(domain, wave_size, index, group_size=8)``, as
        TileLang builds it: a serial loop over ``ceildiv(padded, wave_size)`` waves, tile
        ``w * wave_size + index`` of the domain padded to whole groups of ``group_size``
        along its last dim; the coordinates are Lets and the body runs when the tile lies in
        the domain."""
        a.no_annotations()
        # TileLang 0.1.15's num_stages pipelines the wave loop itself (its copies issued
        # waves ahead by a producer); tilecute's pipeline passes stage T.Pipelined loops'
        # loads only, which the wave loop's bounds test hides
        if a.static_int("num_stages", 0):
            raise a.fail("num_stages", f"num_stages={a.static_int('num_stages')} is not "
                                       "supported: tilecute does not pipeline the wave loop "
                                       "(pipeline a T.Pipelined loop inside it; num_stages=0 "
                                       "runs the waves one after another)")
        domain = a.value("domain")
        if not isinstance(domain, (tuple, list)) or not domain:
            raise a.fail("domain", f"domain must be a list of extents, got {_show(domain)}")
        if len(names) != len(domain):
            raise self.error(s, f"T.Persistent has {len(domain)} domain dims but {len(names)} "
                                "loop variables")
        domain = [self.arg_index(_Given(d, a.node("domain")), "Persistent") for d in domain]
        wave_size = self.arg_index(a.ref("wave_size"), "Persistent")
        index = self.arg_index(a.ref("index"), "Persistent")
        group = self.arg_index(a.ref("group_size"), "Persistent")
        last = domain[-1]
        if isinstance(group, N.Const) and isinstance(last, N.Const):
            group = N.Const(max(1, min(int(group.value), int(last.value))), "int32")
        else:
            group = ops.max(N.Const(1, "int32"), ops.min(group, last))
        grouped = [ops.ceildiv(last, group), *domain[:-1], group]
        padded = grouped[0]
        for g in grouped[1:]:
            padded = N.binop("mul", padded, g)
        loc = self.loc(s)
        wave = N.Var(self.fresh("w"), "int32")
        self.push(kind="loop")
        try:
            tile = N.Var(self.fresh("tile_id"), "int32")
            stmts: list[N.Stmt] = [N.Let(tile, N.binop("add", N.binop("mul", wave, wave_size), index),
                                         loc=loc)]
            idx, rem = [None] * len(grouped), tile
            for i in range(len(grouped) - 1, 0, -1):
                idx[i] = N.binop("mod", rem, grouped[i])
                rem = N.binop("floordiv", rem, grouped[i])
            idx[0] = rem
            coords = idx[1:-1] + [N.binop("add", N.binop("mul", idx[0], group), idx[-1])]
            for name, value in zip(names, coords):
                var = N.Var(self.fresh(name), "int32")
                stmts.append(N.Let(var, value, loc=loc))
                self.bind(name, var)
            body = self.block(s.body)
        finally:
            self.pop()
        in_range = N.cmp("lt", stmts[-1].var, last)
        stmts.append(N.If(in_range, body, (), loc=loc))
        waves = ops.ceildiv(padded, wave_size)
        return [N.For(wave, N.Const(0, "int32"), waves, "serial", tuple(stmts), loc=loc)]

    def if_stmt(self, s: ast.If, span: tuple | None = None) -> list[N.Stmt]:
        """``span``: this ``if`` is the ``elif`` of a branch on the thread index whose
        other branches took the threads outside ``span`` (see :meth:`thread_branches`)."""
        cond = self.expr(s.test)
        self.check_value(s.test, cond)
        if span is not None:
            return self.thread_branches(s, cond, span)
        if not _is_ir(cond):  # parse-time condition: the chosen branch is straight-line code
            return list(self.block(s.body if cond else s.orelse))
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        whole = self.warpgroup_span()
        if whole is not None and self.thread_range(cond, whole) is not None:
            return self.thread_branches(s, cond, whole)
        return self.plain_if(s, cond)

    # ---- branches on the thread index (TileLang's hand warp specialization) -------------
    def warpgroup_span(self) -> tuple | None:
        """The block's threads ``(0, n)`` where a branch on the thread index may become a
        thread region: a 1-D block of whole warps, outside any ``T.ws`` region."""
        threads = self.kernel_threads if self.in_kernel else ()
        if self.in_ws or self.in_varying_if or \
                any(kind == "parallel" for kind, _, _ in self.context()) or len(threads) != 1 or \
                not isinstance(threads[0], int) or threads[0] % WARP:
            return None
        return (0, threads[0])

    def varies_by_thread(self, e) -> bool:
        """May ``e`` differ between the block's threads: does it read the thread index
        (through the names bound to values that do) or any buffer?"""
        seen = set()

        def walk(x) -> bool:
            if isinstance(x, N.Call) and x.name == "thread_idx" or isinstance(x, N.Load):
                return True
            if isinstance(x, N.Var) and x.name in self.let_values and x.name not in seen:
                seen.add(x.name)
                return walk(self.let_values[x.name])
            if isinstance(x, N.Expr):
                return any(walk(v) for v in vars(x).values())
            if isinstance(x, tuple):
                return any(walk(v) for v in x)
            return False
        return walk(e)

    def thread_range(self, cond, span: tuple) -> tuple | None:
        """The threads ``[lo, hi)`` of ``span`` for which ``cond`` holds, when ``cond``
        compares the thread index (``T.get_thread_binding()``, a name bound to it) with
        constants (``tx < 128``, ``tx >= 256``, ``128 <= tx < 256``, ``and`` of such) and
        they are whole warps; else None."""
        def is_tid(e) -> bool:
            while isinstance(e, N.Cast) and N.is_int(e.dtype):
                e = e.value
            while isinstance(e, N.Var) and e.name in self.let_values:
                e = self.let_values[e.name]
            return isinstance(e, N.Call) and e.name == "thread_idx" and \
                e.args == (N.Const(0, "int32"),)

        def const(e):
            while isinstance(e, N.Cast) and N.is_int(e.dtype):
                e = e.value
            return e.value if isinstance(e, N.Const) and isinstance(e.value, int) and \
                not isinstance(e.value, bool) else None

        def rng(e):
            if isinstance(e, N.Logic) and e.op == "and":
                lo, hi = span
                for x in e.args:
                    r = rng(x)
                    if r is None:
                        return None
                    lo, hi = max(lo, r[0]), min(hi, r[1])
                return lo, max(lo, hi)
            if not isinstance(e, N.Cmp) or e.op in ("eq", "ne"):
                return None
            op, a, b = e.op, e.a, e.b
            if is_tid(b) and const(a) is not None:  # 128 > tx: tx < 128
                op, a, b = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}[op], b, a
            c = const(b)
            if not is_tid(a) or c is None:
                return None
            lo, hi = {"lt": (span[0], c), "le": (span[0], c + 1),
                      "gt": (c + 1, span[1]), "ge": (c, span[1])}[op]
            return max(lo, span[0]), max(max(lo, span[0]), min(hi, span[1]))

        r = rng(cond) if _is_ir(cond) else None
        if r is None or any(x % WARP for x in r):
            return None
        return r

    def thread_branches(self, s: ast.If, cond, span: tuple) -> list[N.Stmt]:
        """``if tx < 128: ... elif tx >= 256: ... else: ...`` on the thread index, each
        branch selecting a run of whole warps of ``span``: TileLang plans the tile ops of a
        branch for the threads its condition selects, so each branch becomes the thread
        region (``N.WarpGroups``, what ``with T.ws(g, ...)`` makes; of whole warps that are
        no whole warpgroups, ``if tx < 32:`` in a block of 96, one with a ``span``) of its
        threads.  The regions follow one another in the IR as the branches do in the
        ``if``; their threads are disjoint, so they run side by side (the barrier pass
        puts no block barrier between them).  The ``else`` of such a branch is the rest of
        ``span`` (one run of warps; an ``elif`` there is taken the same way); a branch on
        the thread index that does not select whole warps stays an ``if`` (where a
        ``T.gemm`` under it is refused by name)."""
        r = self.thread_range(cond, span)
        rest = None
        if r is not None and s.orelse:
            rest = (r[1], span[1]) if r[0] == span[0] else (span[0], r[0]) \
                if r[1] == span[1] else None
        if r is None or (s.orelse and rest is None):
            if span == self.warpgroup_span():  # not a branch over warpgroups: an if
                return self.plain_if(s, cond)
            # the elif of a branch over warpgroups: an if inside the region of the rest
            return self.thread_region(span, s, lambda: self.plain_if(s, cond))
        out = self.thread_region(r, s, lambda: self.block(s.body))
        if s.orelse:
            if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
                out += self.if_stmt(s.orelse[0], rest)  # elif: within the rest
            else:
                out += self.thread_region(rest, s, lambda: self.block(s.orelse))
        return out

    def thread_region(self, span: tuple, s, parse) -> list[N.Stmt]:
        """``parse()``'s statements as the warpgroup region of threads ``span``: nothing
        when ``span`` is empty (no thread runs it; it is still parsed)."""
        self.in_ws = True
        self.push(control=True)  # as `with T.ws(...)`
        try:
            body = tuple(parse())
        finally:
            self.pop()
            self.in_ws = False
        lo, hi = span
        if lo >= hi:
            return []
        if lo % N.WARPGROUP_THREADS or hi % N.WARPGROUP_THREADS:  # whole warps
            return [N.WarpGroups((), body, loc=self.loc(s), span=(lo, hi))]
        groups = tuple(range(lo // N.WARPGROUP_THREADS, hi // N.WARPGROUP_THREADS))
        return [N.WarpGroups(groups, body, loc=self.loc(s))]

    def plain_if(self, s: ast.If, cond) -> list[N.Stmt]:
        """An ``If``; inside an ``if`` whose condition may differ between threads (``if tx
        < 32:``, its ``elif tx < 128:``) no branch becomes a warpgroup region: only some
        of the warpgroup's threads would get there."""
        if not _is_ir(cond):  # parse-time condition: the chosen branch is straight-line code
            return list(self.block(s.body if cond else s.orelse))
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        saved = self.in_varying_if
        self.in_varying_if = saved or self.varies_by_thread(cond)
        try:
            self.push(kind="if")
            then = self.block(s.body)
            self.pop()
            self.push(kind="if")
            orelse = self.block(s.orelse)
            self.pop()
        finally:
            self.in_varying_if = saved
        return [N.If(cond, then, orelse, loc=self.loc(s))]

    def assign(self, s: ast.Assign) -> list[N.Stmt]:
        if len(s.targets) != 1:
            return self.chain_assign(s)
        target = s.targets[0]
        if isinstance(target, ast.Subscript) and isinstance(s.value, ast.Call):
            form = self.form_of(s.value.func)
            if form is not None and form.__name__ in ("atomic_addx2", "atomic_addx4"):
                return self.vector_atomic_return(target, form, s.value, s)
        if isinstance(target, ast.Subscript):
            if isinstance(s.value, ast.Subscript) and self.is_slice_of_buffer(s.value):
                # `A[0, 4:8] = A[0, 0:4]`: TileLang's parser gives a slice read by `=` a
                # step of 1, a vector load
                return self.store(target, self.region_lanes(
                    s.value, self.buffer_of(s.value.value), self.region(s.value)), s)
            return self.store(target, self.expr(s.value), s)
        if isinstance(target, (ast.Tuple, ast.List)):
            return self.unpack(target, s)
        if not isinstance(target, ast.Name):
            raise self.error(s, "assign to a name or to a buffer element `A[i, j] = ...`")
        outer, self.comprehension_name = self.comprehension_name, target.id
        try:
            return self.assign_name(target, s.value, s)
        finally:
            self.comprehension_name = outer

    def assert_stmt(self, s: ast.Assert) -> list[N.Stmt]:
        """Python's ``assert`` on parse-time values (a macro's ``assert M == M_`` on shapes):
        checked while parsing, a false one a ``FrontendError`` with its message.  At the
        top level (outside the ``T.Kernel`` blocks, no loop or branch around it) one on the
        symbolic dims and integer / bool scalar parameters (``assert N % 64 == 0``, ``assert
        n1 == n2`` on two symbols) is TileLang's host ``Assert``, checked at every call: it
        joins ``PrimFunc.assumes`` as a ``T.assume`` does.  Another on a runtime value is
        refused (``T.device_assert`` checks one on the device)."""
        cond = self.expr(s.test)
        def value(e):
            while isinstance(e, N.Var) and e.name in self.let_values:
                e = self.let_values[e.name]
            return e

        host = not self.in_kernel and not self.context()
        if isinstance(cond, N.Cmp) and cond.op in ("eq", "ne"):
            # TVM's bool(a == b) on expressions: whether they are the same expression
            # (`assert M == M_` on two shapes' symbols); TileLang's builder makes the
            # comparison of two different ones an Assert, checked when the call binds them
            a, b = value(cond.a), value(cond.b)
            if a == b or (self.host_only(a) and self.host_only(b) and not (
                    host and self.host_condition(N.cmp(cond.op, a, b)))):
                cond = (a == b) == (cond.op == "eq")
            else:
                cond = N.cmp(cond.op, a, b)
        if _is_ir(cond) and not isinstance(cond, N.Const):
            if host and self.host_condition(cond):
                return self.assume_condition(cond, s)
            raise self.error(s, f"`assert {ast.unparse(s.test)}` tests a runtime value: use "
                                "T.device_assert(cond, msg) to check it on the device")
        if not (cond.value if isinstance(cond, N.Const) else cond):
            raise self.error(s, f"assertion failed: `{ast.unparse(s.test)}`" + (
                f" ({ast.unparse(s.msg)})" if s.msg is not None else "") + (
                f": {ast.unparse(s.test.left)} is {_show(value(self.expr(s.test.left)))}, "
                f"{ast.unparse(s.test.comparators[0])} is "
                f"{_show(value(self.expr(s.test.comparators[0])))}"
                if isinstance(s.test, ast.Compare) and len(s.test.comparators) == 1 else ""))
        return []

    def expand(self, e) -> Optional[N.Expr]:
        """``e`` with every name a Let binds to a pure value (one reading no buffer and
        calling nothing but ``ceildiv``) replaced by that value, recursively: TileLang's
        kernel variables are expressions its simplifier sees through.  Every such name is
        bound once, by the Let that dominates its uses (a rebinding makes a fresh name),
        and its value reads only immutable names, so the substitution keeps its meaning;
        the IR keeps the Lets (only parse-time folding uses this).  None when the
        expansion would pass ``_EXPAND_NODES`` nodes (``a = b * b`` chains double it)."""
        budget = [_EXPAND_NODES]

        def go(e):
            budget[0] -= 1
            if budget[0] < 0:
                raise _TooLarge
            if isinstance(e, N.Var):
                v = self.let_values.get(e.name)
                return e if v is None or not _pure(v) else go(v)
            if isinstance(e, N.BinOp):
                a, b = go(e.a), go(e.b)
                if a is e.a and b is e.b:
                    return e
                return N.binop(e.op, a, b) if a.dtype == b.dtype == e.dtype else \
                    N.BinOp(e.op, a, b, e.dtype)
            if isinstance(e, N.Cast):
                v = go(e.value)
                return e if v is e.value else N.cast(v, e.dtype)
            if isinstance(e, N.Call) and e.name == "ceildiv":
                args = tuple(go(x) for x in e.args)
                return N.ceildiv(*args) if args[0].dtype == args[1].dtype == e.dtype else e
            return e

        try:
            return go(e)
        except _TooLarge:
            return None

    def parallel_extent(self, e: N.Expr, s, form: str) -> N.Expr:
        """A T.Parallel / T.grid extent: int32 (a constant one of int64 dtype is taken as
        int32 when it fits); a non-constant int64 extent is refused."""
        if isinstance(e, N.Const) and e.dtype == "int64" and -2 ** 31 <= e.value < 2 ** 31:
            return N.Const(int(e.value), "int32")
        if e.dtype == "int64":
            raise self.error(s, f"T.{form}: an int64 extent ({expr_str(e)}) is not supported: "
                                f"tilecute spreads T.{form} iterations over a block's threads "
                                "with int32 loop variables; use an int32 extent, or T.serial for "
                                "an int64 count")
        return e

    def folded(self, e):
        """``e`` as a constant when it is one through its Let-bound names (``n = hi - lo``
        with ``hi = lo + 64``), else ``e`` itself."""
        if not isinstance(e, N.Expr) or isinstance(e, N.Const):
            return e
        x = self.expand(e)
        f = _affine(x) if x is not None else None
        return N.Const(f[1], e.dtype) if f is not None and not any(f[0].values()) else e

    def extent(self, stop: N.Expr, start: N.Expr) -> N.Expr:
        """The extent ``stop - start`` of a slice or loop range (``_sub``), a constant also
        where ``stop`` and ``start`` are names bound to expressions that differ by one
        (``kv_start = s * 64; kv_end = kv_start + 64``: extent 64)."""
        e = _sub(stop, start)
        if isinstance(e, N.Const):
            return e
        a, b = self.expand(stop), self.expand(start)
        f = _sub(a, b) if a is not None and b is not None else None
        return f if isinstance(f, N.Const) else e

    def host_only(self, e) -> bool:
        """``e`` is built of constants and the function's symbols alone (a shape)."""
        if isinstance(e, N.Var):
            return e.name in self.symbols
        if isinstance(e, N.Call):
            return e.name in ("ceildiv", "min", "max") and all(map(self.host_only, e.args))
        if isinstance(e, (N.BinOp, N.Cmp)):
            return self.host_only(e.a) and self.host_only(e.b)
        return isinstance(e, N.Const)

    def chain_assign(self, s: ast.Assign) -> list[N.Stmt]:
        """``A[i] = B[i] = x`` / ``a = b = x``: as in Python, the value is evaluated once
        (bound to a fresh name when it is more than a constant or a name) and assigned to
        each target from left to right."""
        if isinstance(s.value, ast.Call) and (
                (lambda f: f is not None and f.kind == "alloc")(self.form_of(s.value.func))
                or self.tensor_proxy(s.value.func) is not None):
            raise self.error(s, f"`{ast.unparse(s.value)}` allocates or views a buffer: bind "
                                "it to one name (a chained assignment would alias it)")
        value = self.expr(s.value)
        out: list[N.Stmt] = []
        if _is_ir(value) and not isinstance(value, (N.Const, N.Var)):
            tmp = N.Var(self.fresh("chained"), value.dtype)
            out.append(N.Let(tmp, value, loc=self.loc(s)))
            value = tmp
        elif isinstance(value, VL.LaneVector):  # a vector, likewise read once
            out, value = self.lane_lets(value, "chained", s, only=_reads_or_calls)
        for t in s.targets:
            if isinstance(t, ast.Subscript):
                out.extend(self.store(t, value, s))
            elif isinstance(t, ast.Name):
                out.extend(self.assign_name(t, None, s, value))
            else:
                raise self.error(s, "a chained assignment assigns to names or buffer elements "
                                    f"(not `{ast.unparse(t)}`)")
        return out

    def unpack(self, target, s) -> list[N.Stmt]:
        """``bb, bh = bbh // H, bbh % H``: every value is read before any name is bound,
        as in Python; targets are names or buffer elements."""
        if any(isinstance(t, ast.Starred) for t in target.elts):
            raise self.error(s, "starred assignment targets are not supported")
        if isinstance(s.value, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in s.value.elts):
            allocs = [isinstance(e, ast.Call) and (f := self.form_of(e.func)) is not None and
                      f.kind == "alloc" for e in s.value.elts]
            if any(allocs) and len(s.value.elts) == len(target.elts) and \
                    all(isinstance(t, ast.Name) for t in target.elts):
                # `a, b = T.alloc_var(T.int), T.alloc_var(T.int)`: each allocation bound to
                # its name, as one assignment each; the other values are read first
                values = [None if is_alloc else self.expr(e)
                          for e, is_alloc in zip(s.value.elts, allocs)]
                out: list[N.Stmt] = []
                for t, e, v, is_alloc in zip(target.elts, s.value.elts, values, allocs):
                    out.extend(self.assign_name(t, e, s) if is_alloc
                               else self.assign_name(t, None, s, v))
                return out
            values = [self.expr(e) for e in s.value.elts]
        else:
            names = [t.id if isinstance(t, ast.Name) else None for t in target.elts]
            outer = self.comprehension_targets
            # `A_s, B_s = [T.alloc_shared(s, dt) for s in shapes]`: each allocation named
            # after the name it is unpacked into
            self.comprehension_targets = iter(names) if all(names) else None
            try:
                values = self.expr(s.value)
            finally:
                self.comprehension_targets = outer
            if not isinstance(values, (tuple, list)):
                raise self.error(s, f"cannot unpack `{ast.unparse(s.value)}` into "
                                    f"{len(target.elts)} names")
        if len(values) != len(target.elts):
            raise self.error(s, f"cannot unpack {len(values)} values into {len(target.elts)} names")
        values, out = list(values), []
        for i, v in enumerate(values):  # a vector's reads happen before any target's store
            if isinstance(v, VL.LaneVector):
                lets, values[i] = self.lane_lets(v, "unpacked", s, only=_reads_or_calls)
                out += lets
        # Python reads every value before it assigns any target: a value reading a buffer
        # that an earlier target stores into (`a, b = b, a` on T.alloc_var's, `A[0], A[1] =
        # A[1], A[0]`) is read into a fresh name first
        written: set = set()
        for i, (t, v) in enumerate(zip(target.elts, values)):
            if written and _is_ir(v) and any(isinstance(x, N.Load) and x.buffer in written
                                             for x in _walk_exprs(v)):
                tmp = N.Var(self.fresh("unpacked"), v.dtype)
                out.append(N.Let(tmp, v, loc=self.loc(s)))
                values[i] = tmp
            ref = self.lookup_local(t.value.id) if isinstance(t, ast.Subscript) and \
                isinstance(t.value, ast.Name) else None
            if isinstance(ref, _BufferRef):
                written.add(ref.buffer.name)
            elif isinstance(ref, _RegionRef):
                written.add(ref.region.buffer)
            elif isinstance(t, ast.Name) and isinstance(self.lookup_local(t.id), _VarRef):
                written.add(self.lookup_local(t.id).buffer.name)
        for t, v in zip(target.elts, values):
            if isinstance(t, ast.Subscript):
                out.extend(self.store(t, v, s))
            elif isinstance(t, ast.Name):
                out.extend(self.assign_name(t, None, s, v))
            else:
                raise self.error(s, "unpack into names or buffer elements")
        return out

    def assign_name(self, target: ast.Name, value, s, known=None) -> list[N.Stmt]:
        """``name = value`` (``known``: the value, already evaluated)."""
        if isinstance(value, ast.Call) and self.python_value(value.func) is meta_var:
            # TVM's `x = T.meta_var(e)`: x names e itself (no Let), as TVMScript binds it
            a = _Args(self, "meta_var", plain_signature(meta_var), value)
            self.bind(target.id, a.value("value"))
            return []
        if isinstance(value, ast.Call):
            form = self.form_of(value.func)
            if form is not None and form.kind == "alloc":
                return self.allocate(target.id, form, value, s)
            proxy = self.tensor_proxy(value.func)
            if proxy is not None:  # `flat = T.Tensor(shape, dtype, buf.data)`: a view
                return self.tensor_view(target.id, proxy, value, s)
            if form is not None and form.__name__ in ("atomic_addx2", "atomic_addx4") and \
                    not isinstance(self.lookup_local(target.id), (_VarRef, _VectorVarRef)):
                # `prev = T.atomic_addx2(dst, v, return_prev=True)`: TileLang's vector let of
                # the old values; each lane's atomic runs here, once, into a let
                self.check_rebind(target.id, s)
                stmts, v = self.lane_lets(self.vector_atomic_lanes(form, value), target.id, s,
                                          only=_reads_or_calls)
                self.bind(target.id, v)
                return stmts
        if isinstance(value, ast.Subscript) and self.is_slice_of_buffer(value):
            # `X = A_s[0:M, 0:K]`: TileLang's buffer-region alias.  One covering its whole
            # buffer is that buffer; a proper sub-region is kept as the region
            region = self.region(value)
            buf = self.buffer_named(region.buffer)
            if _whole_region(region, buf):
                self.bind(target.id, _BufferRef(buf))
            else:
                self.bind(target.id, _RegionRef(region, target.id, self.loc(s),
                                                (self.open_blocks[-1:], self.emitted)))
            return []
        v = self.expr(value) if value is not None else known
        if isinstance(value, ast.List) and isinstance(v, tuple):
            v = list(v)  # `tiles = []`: a Python list, which `tiles.append(...)` may grow
        current = self.lookup_local(target.id)
        if isinstance(current, _VectorVarRef):  # `packed = T.float16x2(a, b)`
            v = self.region_vector(v, s) if isinstance(v, _RegionRef) else v
            if not isinstance(v, VL.LaneVector) or v.count != current.lanes:
                raise self.error(s, f"'{target.id}' is a {current.lanes}-lane "
                                    f"{current.buffer.dtype} vector variable; assign it a "
                                    f"{current.lanes}-lane vector, got {_show(v)}")
            return self.store_lanes(current.buffer, current.indices(), v, s)
        if isinstance(current, _VarRef):  # `x = ...` on a T.alloc_var stores into it
            buf = current.buffer
            return [self.store_value(buf, current.indices, v, s)]
        if isinstance(v, VL.LaneVector):  # `idx = T.Ramp(...)`, `v = A[T.Ramp(i, 1, 4)]`
            # TVM's vector let: lanes that read memory are read here, into names
            self.check_rebind(target.id, s)
            stmts, v = self.lane_lets(v, target.id, s, only=_reads_or_calls)
            self.bind(target.id, v)
            return stmts
        if not _is_ir(v):
            if isinstance(v, GemmWarpPolicy) or \
                    (isinstance(v, (float, bool)) and current is None):
                # `pol = T.GemmWarpPolicy.FullRow`: TileLang binds the enum itself (an int);
                # `s = 0.3`: the Python float, typed where it meets an operand as a
                # literal is (`H[i] * s` of a float16 H is `H[i] * 0.3`, a float32 product);
                # `big = bm > 128`: the Python bool (an `if` on it is decided while parsing)
                self.bind(target.id, v)
                return []
            if isinstance(v, (int, float, bool)):
                v = N.as_expr(v)
            elif isinstance(v, (str, tuple, list, dict)):
                # a parse-time value (dtype name, shape, kwargs dict, a helper's list of
                # expressions such as `list(unpack(x))`)
                self.bind(target.id, v)
                return []
            elif isinstance(v, (_BufferRef, _RegionRef, B.Words)):
                self.bind(target.id, v)  # another name for a buffer; T.ldg64's words
                return []
            elif isinstance(v, PersistentTileScheduler):
                return self.tile_scheduler(target.id, v, s)
            elif isinstance(v, (F.Form, F.Unsupported, Macro)) or inspect.isfunction(v) or \
                    inspect.isbuiltin(v):
                # another name for a T.* form, a T.macro or a function (`scan = T.cumsum
                # if op == "sum" else T.cummax`, then `scan(src, dim=1)`): Python binds
                # the object, and a call through the name is the call of what it names
                self.bind(target.id, v)
                return []
            elif isinstance(v, V.ScalarDecl):
                raise self.error(s, f"'{target.id}': {v.message()}")
            else:
                raise self.error(s, f"cannot bind '{target.id}' to {type(v).__name__} {v!r}")
        if isinstance(value, ast.Call) and isinstance(v, N.Var) and self.in_kernel and \
                self.declares_symbol(value):
            # `x = T.int32()` (or TVM's `T.var("int32")`): a declaration, given its value by
            # `T.let(x, value)`
            declared = N.Var(self.fresh(target.id), v.dtype)
            self.declared.add(declared.name)
            self.bind(target.id, declared)
            return []
        self.check_rebind(target.id, s)
        return self.let(target.id, v, s)

    def let(self, name: str, value: N.Expr, s) -> list[N.Stmt]:
        """``name = value``: ``name`` bound to a fresh variable, an immutable ``Let`` of
        ``value`` (kept in ``let_values``, which ``let_constant`` reads)."""
        var = N.Var(self.fresh(name), value.dtype)
        self.bind(name, var)
        self.let_values[var.name] = value
        return [N.Let(var, value, loc=self.loc(s))]

    def aug_assign(self, s: ast.AugAssign) -> list[N.Stmt]:
        op = _BIN.get(type(s.op))
        if op is None:
            raise self.error(s, f"operator {type(s.op).__name__} is not supported")
        if isinstance(s.target, ast.Subscript):
            target = self.expr(s.target.value) if not isinstance(s.target.value, ast.Name) \
                else self.lookup(s.target.value.id, s.target.value)
            if isinstance(target, _BufferRef):  # `acc[i] += v` stores (a reducer's check)
                self.reducer_access(target.buffer.name, s, "store")
            current = self.expr(s.target)
            return self.store(s.target, self.binop(s, op, current, self.expr(s.value)), s)
        if isinstance(s.target, ast.Name):
            ref = self.lookup_local(s.target.id)
            if isinstance(ref, _VarRef):
                current = self.expr(s.target)
                return [self.store_value(ref.buffer, ref.indices,
                                         self.binop(s, op, current, self.expr(s.value)), s)]
            current = self.expr(s.target)
            if isinstance(current, VL.LaneVector):  # `v += w` on a vector name or variable
                value = self.binop(s, op, current, self.expr(s.value))
                value = dataclasses.replace(value, lanes=tuple(
                    N.cast(x, c.dtype) for x, c in zip(value.lanes, current.lanes)))
                return self.assign_name(s.target, None, s, value)
            if isinstance(current, float):  # a name bound to a Python float: `s = s + v`
                return self.assign_name(s.target, None, s, self.binop(s, op, current,
                                                                      self.expr(s.value)))
            if not _is_ir(current):
                raise self.error(s, f"'{s.target.id}' is a parse-time constant")
            self.check_rebind(s.target.id, s)
            value = self.binop(s, op, current, self.expr(s.value))
            if isinstance(value, int) and not isinstance(value, bool):
                # `off += w` of a name bound to a Python int and a Python int (a running
                # offset in a loop over a Python list): TileLang's Python int arithmetic
                return self.assign_name(s.target, None, s, value)
            value = N.cast(value, current.dtype)
            var = N.Var(self.fresh(s.target.id), value.dtype)
            self.bind(s.target.id, var)
            return [N.Let(var, value, loc=self.loc(s))]
        raise self.error(s, "augmented assignment to a name or a buffer element only")

    def store(self, target: ast.Subscript, value, s) -> list[N.Stmt]:
        ref = self.lookup_local(target.value.id) if isinstance(target.value, ast.Name) else None
        if isinstance(ref, _VectorBufferRef):  # `packed[i] = T.float16x2(a, b)`
            at = self.vector_element(ref, target)
            value = self.region_vector(value, s) if isinstance(value, _RegionRef) else value
            if not isinstance(value, VL.LaneVector) or value.count != ref.lanes:
                raise self.error(s, f"`{ast.unparse(target)}` is a {ref.lanes}-lane vector; "
                                    f"store a vector of {ref.lanes} lanes, got {_show(value)}")
            return self.store_lanes(ref.buffer, at, value, s)
        buf = self.buffer_of(target.value)
        indices = self.indices(target)
        if isinstance(value, B.Words):  # `Y[i:i + 2] = T.reinterpret(T.ldg64(...), T.float32x2)`
            form = f"storing a {value.bits}-bit value"
            _, idx = self.access_elements(target, form, value.bits,
                                          "global" if buf.scope == "global" else "shared") \
                if buf.scope in ("global", "shared") else (None, None)
            if idx is None:
                raise self.error(s, f"{form} into '{buf.name}': a {buf.scope} buffer")
            return [N.Store(buf.name, tuple(i), v, loc=self.loc(s))
                    for i, v in zip(idx, B.unpack(value.words, buf.dtype))]
        if isinstance(value, (VL.LaneVector, _RegionRef)) or \
                any(isinstance(i, (slice, VL.LaneVector)) for i in indices):
            return self.vector_store(target, buf, indices, value, s)
        if len(indices) != buf.ndim:
            raise self.error(s, f"'{buf.name}' has {buf.ndim} dims but is indexed with "
                                f"{len(indices)}")
        return [self.store_value(buf, tuple(indices), value, s)]

    # ---- TVM's vector values (lanes.py) ------------------------------------------------
    def lanewise(self, node, op: str, fn, *args) -> VL.LaneVector:
        try:
            return VL.lanewise(f"`{ast.unparse(node)}`", op, fn, *args)
        except TypeError as e:
            raise self.error(node, str(e)) from None

    def stepped_slice(self, node: ast.Subscript, e: ast.Slice, dim: int):
        """``A[0:10:2]``: TVM's subscript with a step, the vector index ``T.Ramp(start,
        step, lanes)`` of ``ceil((stop - start) / step)`` lanes (one lane: the start)."""
        step = self.expr(e.step)
        step = step.value if isinstance(step, N.Const) and N.is_int(step.dtype) else step
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise self.error(node, f"slice step `{ast.unparse(e.step)}`: tilecute takes a "
                                   "positive int known at parse time (TVM's vector index "
                                   "T.Ramp(start, step, lanes), whose lane count it computes "
                                   "for a positive step)")
        start = self.index_expr(e.lower) if e.lower else N.Const(0, "int32")
        if e.upper is not None:
            stop = self.index_expr(e.upper)
        else:
            shape = self.buffer_of(node.value).shape
            stop = shape[dim] if dim < len(shape) else None
        extent = self.extent(stop, start) if stop is not None else None
        if not isinstance(extent, N.Const) or extent.value < 1:
            raise self.error(node, f"slice `{ast.unparse(e)}`: a stepped slice is TVM's vector "
                                   "index, whose lane count must be a positive int known at "
                                   f"parse time; got {_show(extent)} elements")
        lanes = -(-extent.value // step)
        return start if lanes == 1 else VL.ramp(start, step, lanes)

    def lane_indices(self, node, buf: N.Buffer, idx) -> Optional[list]:
        """The index tuple of each lane of an access at a vector index (``A[i, T.Ramp(j,
        1, 4)]``), or None when every index is a scalar.  A lane of a ``T.Ramp`` that may
        be negative is counted from the end where it is (TileLang's LegalizeNegativeIndex
        on a Ramp, ``lane_wrap``)."""
        if not any(isinstance(i, VL.LaneVector) for i in idx):
            return None
        if any(isinstance(i, VL.LaneVector) for i in idx[:-1]):
            raise self.error(node, f"`{ast.unparse(node)}`: only the last index of a buffer "
                                   "access may be a vector (TVM's rule)")
        if len(idx) != buf.ndim:
            raise self.error(node, f"'{buf.name}' has {buf.ndim} dims but is indexed with "
                                   f"{len(idx)}")
        v = idx[-1]
        lanes = [lane_wrap(x, buf.shape[-1]) for x in v.lanes] if v.ramp else v.lanes
        return [tuple(idx[:-1]) + (x,) for x in lanes]

    def region_lanes(self, node, buf: N.Buffer, region: N.Region):
        """The elements of a region along the last dim as a vector (TVM's load at the
        region's Ramp: TileLang's parser gives a slice read by `=` a step of 1); one
        element is a scalar."""
        extents = region.extents or (N.Const(1, "int32"),) * buf.ndim
        if not all(isinstance(x, N.Const) for x in extents) or \
                any(x.value != 1 for x in extents[:-1]):
            raise self.error(node, f"`{ast.unparse(node)}` is read as a vector, which runs "
                                   "along the last dim only (TVM's vector index is the last "
                                   f"one); the region's extents are {_show(extents)}")
        n = extents[-1].value
        if n == 1:
            return N.Load(buf.name, region.starts, buf.dtype)
        idx = list(region.starts[:-1]) + [VL.ramp(region.starts[-1], 1, n)]
        self.reducer_access(buf.name, node, "read")
        return VL.LaneVector(tuple(N.Load(buf.name, i, buf.dtype)
                                   for i in self.lane_indices(node, buf, idx)))

    def ramp_region(self, node, buf: N.Buffer, idx) -> N.Region:
        """An element address at a unit-stride ``T.Ramp`` (``T.atomic_addx2(Dst[T.Ramp(0,
        1, 2)], ...)``): the region of its lanes along the last dim."""
        v = idx[-1]
        unit = isinstance(v, VL.LaneVector) and v.ramp and all(
            x == VL.offset(v.lanes[0], k) for k, x in enumerate(v.lanes)) and \
            not any(isinstance(i, (VL.LaneVector, slice)) for i in idx[:-1])
        if not unit:
            raise self.error(node, f"`{ast.unparse(node)}` names a region here, which a vector "
                                   "index is only as T.Ramp(start, 1, lanes) in the last dim")
        one = N.Const(1, "int32")
        return N.Region(buf.name, tuple(idx[:-1]) + (v.lanes[0],),
                        (one,) * (buf.ndim - 1) + (N.Const(v.count, "int32"),))

    def region_vector(self, ref: _RegionRef, node):
        """``b`` bound to a slice (``b = A[0, 0:4]``) read as a vector value: TileLang
        loads the lanes at the binding, tilecute where they are used, so only in a
        statement right after the binding in the same block (nothing run between)."""
        if ref.bound_at != (self.open_blocks[-1:], self.emitted):
            raise self.error(node, f"'{ref.name}' (a slice of '{ref.region.buffer}' bound at "
                                   f"{ref.line}) is read here as a vector: TileLang loads its "
                                   "lanes where it is bound, tilecute reads them where they are "
                                   "used, which is the same only in the statement right after "
                                   "the binding, in its block; move the binding to just before "
                                   "this statement, or read the slice here")
        return self.region_lanes(node, self.buffer_named(ref.region.buffer), ref.region)

    def lane_lets(self, value: VL.LaneVector, name: str, s, only=None):
        """``value``'s lanes that are more than a constant or a name (or, with ``only``,
        those ``only`` picks) bound to fresh names: their reads happen here."""
        stmts, lanes = [], []
        for k, x in enumerate(value.lanes):
            if isinstance(x, (N.Const, N.Var)) or (only is not None and not only(x)):
                lanes.append(x)
                continue
            var = N.Var(self.fresh(f"{name}_{k}"), x.dtype)
            self.let_values[var.name] = x
            stmts.append(N.Let(var, x, loc=self.loc(s)))
            lanes.append(var)
        return stmts, dataclasses.replace(value, lanes=tuple(lanes))

    def vector_store(self, target: ast.Subscript, buf: N.Buffer, idx: list, value, s):
        """TVM's vector store ``A[..., T.Ramp(b, st, n)] = v``: a slice ``A[i, 0:4]`` is
        the Ramp of its elements (one element: its start), a stepped one ``B[0:8:2]`` of
        every other; the ``n`` lanes of ``v`` stored one element each."""
        for d, i in enumerate(idx):
            if isinstance(i, slice):
                start = i.start if i.start is not None else N.Const(0, "int32")
                stop = i.stop if i.stop is not None else \
                    (buf.shape[d] if d < buf.ndim else None)
                n = self.extent(stop, start) if stop is not None else None
                if not isinstance(n, N.Const) or n.value < 1:
                    raise self.error(s, f"storing into `{ast.unparse(target)}`: a slice is "
                                        "TVM's vector index, whose lane count must be a "
                                        f"positive int known at parse time; got {_show(n)}")
                idx[d] = start if n.value == 1 else VL.ramp(start, 1, n.value)
        if len(idx) != buf.ndim:
            raise self.error(s, f"'{buf.name}' has {buf.ndim} dims but is indexed with {len(idx)}")
        at = self.lane_indices(target, buf, idx)
        name = value.name if isinstance(value, _RegionRef) else "lane"
        if isinstance(value, _RegionRef):
            value = self.region_vector(value, s)
        n = len(at) if at is not None else 1
        if not isinstance(value, VL.LaneVector):
            raise self.error(s, f"storing one value into {n} elements of '{buf.name}' "
                                f"(`{ast.unparse(target)}`): TVM's vector store takes a "
                                f"{n}-lane value (T.Broadcast(x, {n}) repeats one); a tile is "
                                "T.fill, T.copy or a T.Parallel loop")
        if at is None:
            raise self.error(s, f"a {value.count}-lane vector stored into one element of "
                                f"'{buf.name}' (`{ast.unparse(target)}`): store it at a vector "
                                f"index of {value.count} lanes (a T.Ramp or a slice)")
        if value.count != n:
            raise self.error(s, f"cannot store a {value.count}-lane value into {n} elements of "
                                f"'{buf.name}' (`{ast.unparse(target)}`): TVM's vector store "
                                "takes as many lanes as its index has")
        return self.store_lanes(buf, at, value, s, name)

    def store_lanes(self, buf: N.Buffer, at: list, value: VL.LaneVector, s,
                    name: str = "lane") -> list[N.Stmt]:
        """One ``Store`` of each lane of ``value`` at its index tuple.  TVM's vector store
        reads the whole vector (and its index) before it writes: lanes reading ``buf`` (or
        a view of its storage) are bound to names first."""
        def root(name: str) -> str:
            return self.view_roots[name].name if name in self.view_roots else name

        def reads(e) -> bool:
            return any(isinstance(x, N.Load) and root(x.buffer) == root(buf.name)
                       for x in _walk_exprs(e))
        out: list[N.Stmt] = []
        if any(reads(x) for x in value.lanes) or any(reads(i) for i in at):
            out, value = self.lane_lets(value, name, s, only=reads)
            index_lets, flat = self.lane_lets(
                VL.LaneVector(tuple(x for i in at for x in i)), "index", s, only=reads)
            out += index_lets
            it = iter(flat.lanes)
            at = [tuple(next(it) for _ in i) for i in at]
        return out + [self.store_value(buf, i, v, s) for i, v in zip(at, value.lanes)]

    def store_value(self, buf: N.Buffer, indices, value, s) -> N.Stmt:
        self.reducer_access(buf.name, s, "store")
        if isinstance(value, _BufferRef):
            raise self.error(s, "cannot store a whole buffer into an element")
        if not _is_ir(value) and not isinstance(value, (int, float, bool)):
            raise self.error(s, f"cannot store {type(value).__name__} {value!r} into "
                                f"'{buf.name}'")
        value = N.as_expr(value, buf.dtype if not _is_ir(value) else None)
        return N.Store(buf.name, tuple(indices), N.cast(value, buf.dtype), loc=self.loc(s))

    def is_alloc_global(self, value) -> bool:
        if not isinstance(value, ast.Call):
            return False
        form = self.form_of(value.func)
        return form is not None and form.__name__ in ("alloc_global", "alloc_buffer", "decl_buffer")

    def alloc_global(self, name: str, a: _Args, s) -> list[N.Stmt]:
        """``ws = T.alloc_global(shape, dtype)``: a workspace param, appended after the
        prim_func's own (every call allocates it; see ``PrimFunc.workspaces``)."""
        shape = a.value("shape")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        dims = []
        for d, x in enumerate(shape):
            if isinstance(x, int) and not isinstance(x, bool) and x > 0:
                dims.append(N.Const(x, "int32"))
            elif isinstance(x, N.Var) and x.name in self.symbols:
                dims.append(x)
            else:
                raise a.fail("shape", f"'{name}': dim {d} of a T.alloc_global is "
                                      f"{_show(x)}; tilecute's workspaces take positive ints "
                                      "or symbols a parameter's shape binds, per dim")
        dt = self.dtype_arg(a, "dtype", name)
        if a.value("scope") != "global":
            raise a.fail("scope", f"'{name}': T.alloc_global allocates in 'global', got "
                                  f"scope={a.value('scope')!r}")
        buf = N.Buffer(self.fresh(name), dt, tuple(dims), "global")
        self.workspaces.append(buf)
        self.bind(name, _BufferRef(buf))
        return []

    def top_level_condition(self, s: ast.If) -> bool:
        """The parse-time truth of a top-level ``if``'s condition; a condition on run-time
        values is refused (TileLang would branch on the host, before the kernels)."""
        try:
            cond = self.expr(s.test)
        except FrontendError:
            cond = None
        if cond is None or _is_ir(cond) or not isinstance(cond, (bool, int, float, str, tuple)):
            raise self.error(s, f"`if {ast.unparse(s.test)}:` at the top level of a prim_func: "
                                "its condition must be known at parse time (a Python value), "
                                "which chooses the statements that stand there")
        return bool(cond)

    def is_storage_view(self, s: ast.Assign) -> bool:
        """``name = T.Tensor(shape, dtype, P.data)`` (``T.Buffer`` too) or
        ``T.make_tensor(P.data, shape, dtype)``: a buffer over a parameter's storage."""
        value = s.value
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name) or \
                not isinstance(value, ast.Call):
            return False
        if self.tensor_proxy(value.func) is not None:
            data = value.args[2] if len(value.args) > 2 else next(
                (k.value for k in value.keywords if k.arg == "data"), None)
        elif self.is_make_tensor(value):
            data = value.args[0] if value.args else next(
                (k.value for k in value.keywords if k.arg == "ptr"), None)
        else:
            return False
        return isinstance(data, ast.Attribute) and data.attr == "data"

    def is_make_tensor(self, value) -> bool:
        if not isinstance(value, ast.Call):
            return False
        form = self.form_of(value.func)
        return form is not None and form.__name__ in ("make_tensor", "make_tensor_from_addr")

    def make_tensor(self, name: str, form: str, a: _Args, s) -> list[N.Stmt]:
        """``A = T.make_tensor(ptr, shape, dtype="float32", strides=None)`` and
        ``T.make_tensor_from_addr(addr, ...)``: TileLang's global tensor at an address, a
        pointer parameter (``p: T.ptr``) or an int64 expression (``ptrs[g]``, an entry of a
        table ``T.Tensor([G], T.ptr)``): an ``Allocate`` with ``address``, read where it
        stands.  At the top level of the body (a pointer parameter's, or an address of
        scalar parameters) it is allocated at the start of each T.Kernel that follows."""
        what = f"'{name}'"
        src = "ptr" if form == "make_tensor" else "addr"
        if form == "make_tensor_from_addr":
            a.refuse_unless("storage_scope", ("global",), "a tensor at an address is in global "
                                                          "memory in tilecute")
        address = a.value(src)
        if isinstance(address, _DataRef) and form == "make_tensor":
            # T.make_tensor(A.data, shape, dtype): TileLang's buffer over A's storage, a view
            if a.value("strides") is not None:
                raise a.fail("strides", f"{what}: a tensor over another buffer's storage "
                                        "(`buf.data`) is row-major from its first element")
            return self.alloc_view(name, a, s, _BufferRef(address.buffer), a.value("shape"),
                                   a.value("dtype"), "ptr", exact=False)
        if isinstance(address, N.Expr) and address.dtype == "uint64":
            address = N.cast(address, POINTER_DTYPE)
        if not isinstance(address, N.Expr) or address.dtype != POINTER_DTYPE:
            got = f"a {address.dtype} value {_show(address)}" if isinstance(address, N.Expr) \
                else f"the {address.buffer.scope} buffer '{address.buffer.name}'" \
                if isinstance(address, _BufferRef) else _show(address)
            raise a.fail(src, f"{what}: {src} is a pointer: a `T.ptr` parameter or a 64-bit "
                              "integer address (an entry of a table `T.Tensor([n], T.ptr)`, "
                              f"which is int64); got {got}")
        if not self.in_kernel and any(isinstance(x, N.Load) for x in _walk_exprs(address)):
            raise a.fail(src, f"{what}: at the top level of the body the address is a pointer "
                              "parameter or an expression of scalar parameters (nothing reads "
                              "device memory there); read a table inside the T.Kernel")
        shape = a.value("shape")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        dims = tuple(self.tensor_dim(a, "shape", what, d, x, positive=True)
                     for d, x in enumerate(shape))
        strides = a.value("strides")
        if strides is not None:
            strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
            if len(strides) != len(dims):
                raise a.fail("strides", f"{what}: {len(strides)} strides for {len(dims)} dims")
            strides = tuple(self.tensor_dim(a, "strides", what, d, x, positive=False)
                            for d, x in enumerate(strides))
        try:
            dt = tensor_dtype_name(a.value("dtype"))
        except UnknownDTypeError as e:
            raise a.fail("dtype", f"{what}: {e}") from None
        if DTYPES[dt].pack > 1:
            raise a.fail("dtype", f"{what}: a {dt} tensor at an address is not supported "
                                  "(its elements are packed two a byte)")
        buf = N.Buffer(name if not self.in_kernel else self.fresh(name), dt, dims, "global",
                       strides)
        self.bind(name, _BufferRef(buf))
        self.address_tensors.add(buf.name)
        if not self.in_kernel:
            self.top_tensors.append((name, buf, address, s))
            return []
        return [N.Allocate(buf, loc=self.loc(s), address=address)]

    def tensor_dim(self, a: _Args, arg: str, what: str, d: int, x, positive: bool) -> N.Expr:
        """Dim (or stride) ``d`` of a T.make_tensor: an int, or an integer expression of
        constants, symbols, scalar parameters and the kernel's names that reads no memory."""
        if isinstance(x, int) and not isinstance(x, bool):
            if positive and x <= 0:
                raise a.fail(arg, f"{what}: dim {d} is {x}; a static dim is positive")
            return N.Const(x, "int32" if -2 ** 31 <= x < 2 ** 31 else "int64")
        if not _is_ir(x) or not N.is_int(x.dtype) or x.dtype == "bool" or \
                any(isinstance(v, N.Load) for v in _walk_exprs(x)):
            raise a.fail(arg, f"{what}: {arg}[{d}] is {_show(x)}; it is an int or an integer "
                              "expression of constants, symbols, scalar parameters and the "
                              "kernel's names that reads no memory (bind a value read from "
                              "memory to a name first)")
        self.note_symbols(tuple(v for v in _walk_exprs(x) if isinstance(v, N.Var)
                                and v.name not in self.used_names))
        return x if x.dtype in N.DIM_DTYPES else N.cast(x, "int32")

    def top_tensor_views(self, s) -> tuple[N.Stmt, ...]:
        """The top-level T.make_tensor tensors, allocated at the start of the T.Kernel being
        parsed (each under a name of its own in each kernel)."""
        out = []
        for name, buf, address, st in self.top_tensors:
            view = dataclasses.replace(buf, name=self.fresh(buf.name)) \
                if buf.name in self.used_names else buf
            self.used_names.add(view.name)
            self.address_tensors.add(view.name)
            self.bind(name, _BufferRef(view))
            out.append(N.Allocate(view, loc=self.loc(st), address=address))
        return tuple(out)

    def tensor_proxy(self, func_node):
        """The ``T.Tensor`` / ``T.Buffer`` proxy a call names, or None."""
        try:
            fn = self.eval_python(func_node)
        except FrontendError:
            return None
        return fn if isinstance(fn, _TensorProxy) else None

    def tensor_view(self, name: str, proxy, call: ast.Call, s) -> list[N.Stmt]:
        """``flat = T.Tensor(shape, dtype, buf.data)`` in a body (TileLang's buffer view,
        ``T.Buffer`` too): a view of ``buf``'s storage, as ``T.view`` but with no check
        that the two hold the same bits (the view may cover fewer)."""
        form = proxy.form[len("T."):]
        a = _Args(self, form, plain_signature(proxy.spec), call)
        if not a.given("data"):
            raise self.error(call, f"{proxy.form}(...) in a prim_func body needs data=buf.data "
                                   "(a view of another buffer's storage); declare tensors as "
                                   "parameters, or allocate with T.alloc_shared/T.alloc_fragment/"
                                   "T.alloc_local")
        defaults = {"strides": (None,),
                    "align": (0, None), "offset_factor": (0, None), "buffer_type": ("", "default"),
                    "axis_separators": (None, (), [])}
        for arg, accepted in defaults.items():
            if arg in a.sig.parameters:
                a.refuse_unless(arg, accepted, f"a view of '{ast.unparse(a.node('data'))}' takes "
                                               "its base's scope and is row-major from its first "
                                               "element")
        data = a.value("data")
        if not isinstance(data, _DataRef):
            raise a.fail("data", f"data must be a buffer's storage (`buf.data`), got {_show(data)}")
        root = self.view_roots.get(data.buffer.name, data.buffer)
        scope = a.value("scope") if a.given("scope") else None
        if scope is not None and {"global": "global", **_SCOPES}.get(scope) != root.scope:
            raise a.fail("scope", f"'{name}': scope={scope!r}, but '{data.buffer.name}' is a "
                                  f"{root.scope} buffer; a view lives where its base does")
        return self.alloc_view(name, a, s, _BufferRef(data.buffer), a.value("shape"),
                               a.value("dtype"), "data", exact=False,
                               offset=a.value("elem_offset") if "elem_offset" in a.sig.parameters else None)

    def alloc_view(self, name: str, a: _Args, s, src, shape, dtype, src_arg: str,
                   exact: bool, offset=None) -> list[N.Stmt]:
        """``name = T.view(src, shape, dtype)`` / ``T.reshape`` / ``T.Tensor(.., src.data)``:
        an allocation with ``view_of`` the root of ``src`` (a view of a view views the
        first one's base).  ``exact``: the view holds exactly the bits of ``src`` (TileLang
        asserts it for T.view and T.reshape).  ``offset``: TVM's ``elem_offset``, the view
        starting that many of its elements into ``src`` (a global one's: ``view_offset``)."""
        if not isinstance(src, _BufferRef):
            raise a.fail(src_arg, f"'{name}': expected a buffer to view, got {_show(src)}")
        if not self.in_kernel:
            raise a.fail(src_arg, f"'{name}': tilecute takes views inside a T.Kernel block (write "
                                  "it as the kernel's first statement)")
        base = src.buffer
        root = self.view_roots.get(base.name, base)
        if root.name in self.address_tensors:
            raise a.fail(src_arg, f"'{name}': '{base.name}' is a tensor at an address "
                                  "(T.make_tensor); make the view with T.make_tensor of the "
                                  "same address instead")
        what = f"{self.form_text(a)}"
        if shape is None:
            shape = tuple(d.value if isinstance(d, N.Const) else d for d in base.shape)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        dims = []
        for d, x in enumerate(shape):
            if isinstance(x, int) and not isinstance(x, bool) and x > 0:
                dims.append(N.Const(x, "int32"))
            elif root.scope == "global" and _is_ir(x) and N.is_int(x.dtype) and \
                    all(not isinstance(v, N.Var) or v.name in self.symbols
                        for v in _walk_exprs(x)) and not any(
                        isinstance(v, N.Load) for v in _walk_exprs(x)):
                dims.append(N.cast(x, "int32"))
            else:
                more = (" or expressions of the symbols of the parameters' shapes"
                        if root.scope == "global" else "")
                raise a.fail("shape", f"'{name}': dim {d} of the view is {_show(x)}; a view's "
                                      f"dims are positive ints known at parse time{more}")
        dt = base.dtype if dtype is None else self.dtype_arg(a, "dtype", name)
        start = self.view_start(a, name, base, root, dt, offset)
        offset_bits = 0 if start is None else \
            int(start.value) * DTYPES[dt].bits if isinstance(start, N.Const) else None
        bits, base_bits = _bits(dims, dt), _bits(root.shape, root.dtype)
        if offset_bits is None:
            bits = None  # (a run-time start: unchecked, as TileLang's)
        elif offset_bits and bits is not None and base_bits is not None:
            if bits[1] or base_bits[1]:  # (symbolic: unchecked, as TileLang's)
                bits = None
            elif bits[0] + offset_bits > base_bits[0]:
                raise a.fail("elem_offset", f"'{name}': the view {_shape_text(dims)} {dt} at "
                                            f"element {offset_bits // DTYPES[dt].bits} ends "
                                            f"{(bits[0] + offset_bits - base_bits[0]) // 8} bytes "
                                            f"past the end of '{root.name}' "
                                            f"{_shape_text(root.shape)} {root.dtype}")
            else:
                bits = (bits[0] + offset_bits, ())
        if bits is None or base_bits is None:
            if exact:
                raise a.fail("shape", f"'{name}': cannot prove that the view "
                                      f"{_shape_text(dims)} {dt} holds the bits of '{base.name}' "
                                      f"{_shape_text(root.shape)} {root.dtype}")
        elif bits != base_bits and (exact or not _fits(bits, base_bits)):
            # (TileLang's T.reshape asserts the bit count, its T.view raises ValueError)
            kind = {"reshape": FrontendAssertionError, "view": FrontendValueError}.get(a.name)
            raise a.fail("shape", f"'{name}': the view {_shape_text(dims)} {dt} holds "
                                  f"{_bits_text(bits)} bits but '{base.name}' "
                                  f"{_shape_text(base.shape)} {base.dtype} holds "
                                  f"{_bits_text(base_bits)}; {what} keeps the bits", kind)
        if dt != root.dtype and root.scope == "fragment":
            raise a.fail("dtype", f"'{name}': a view of fragment '{base.name}' as {dt} (it holds "
                                  f"{root.dtype}) is not supported by tilecute: a fragment's "
                                  "elements are spread over the threads by element, so other "
                                  "element sizes would not land in the same registers; view a "
                                  "local or shared buffer instead")
        if root.scope == "global" and root.strides is not None:
            raise a.fail(src_arg, f"'{name}': '{base.name}' is a T.StridedTensor; a view reads "
                                  "its base's bytes in row-major order, which a strided "
                                  "tensor's are not")
        if "strides" in a.sig.parameters and a.value("strides") is not None:
            # TileLang 0.1.15's T.view(..., strides=): a row-major one is the view itself;
            # other strides (a strided or rank-changing view of the storage) are refused
            strides = a.value("strides")
            strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
            dense, acc = [], 1
            for d in reversed(dims):
                dense.insert(0, acc)
                acc = acc * d.value if isinstance(d, N.Const) and acc is not None else None
            given = [self.parser_int(x) for x in strides]
            if len(given) != len(dims) or given != dense:
                raise a.fail("strides", f"'{name}': strides={_show(a.value('strides'))} is not "
                                        f"supported: tilecute's views are row-major (strides "
                                        f"{tuple(dense)} for {_shape_text(dims)})")
        if "layout" in a.sig.parameters and a.value("layout") is not None and \
                not isinstance(a.value("layout"), N.Layout):
            raise a.fail("layout", f"'{name}': layout= takes a T.Layout(...), got "
                                   f"{a.value('layout')!r}")
        layout = a.value("layout") if "layout" in a.sig.parameters else None
        self.note_symbols(tuple(dims))
        buf = N.Buffer(self.fresh(name), dt, tuple(dims), root.scope)
        self.view_roots[buf.name] = root
        if start is not None:
            self.view_offsets[buf.name] = start
        self.bind(name, _BufferRef(buf))
        return [N.Allocate(buf, layout, loc=self.loc(s), view_of=root.name, view_offset=start)]

    def view_start(self, a: _Args, name: str, base: N.Buffer, root: N.Buffer, dtype: str,
                   offset) -> Optional[N.Expr]:
        """Where a view of ``dtype`` starts in its root's storage, in its own elements:
        ``base``'s start (a view of a view at an offset) plus TVM's ``elem_offset``; None
        at the first element.  tilecute takes an offset into a global root, an integer
        expression reading no memory, known to be a multiple of 16 bytes."""
        k = offset
        if k is not None and not _is_ir(k):
            if isinstance(k, bool) or not isinstance(k, int):
                raise a.fail("elem_offset", f"'{name}': elem_offset is an integer, got {_show(k)}")
            k = N.Const(k, "int32")
        if k is not None:
            k = self.folded(k)
            if not N.is_int(k.dtype) or any(isinstance(x, N.Load) for x in _walk_exprs(k)) or \
                    isinstance(k, N.Const) and k.value < 0:
                raise a.fail("elem_offset", f"'{name}': elem_offset={_show(offset)} is not "
                                            "supported: tilecute takes an integer >= 0 that "
                                            "reads no memory (bind a value read from memory "
                                            "to a name first)")
            if isinstance(k, N.Const) and k.value == 0:
                k = None
        if k is not None and root.scope != "global":
            raise a.fail("elem_offset", f"'{name}': elem_offset={_show(offset)} on {root.scope} "
                                        f"buffer '{root.name}' is not supported: tilecute lays a "
                                        f"{root.scope} view over its base's bytes from their "
                                        "first (one layout, one slot or set of registers); "
                                        "an offset view is a global tensor's")
        start = self.view_offsets.get(base.name)
        if start is not None and base.dtype != dtype:
            if not isinstance(start, N.Const) or start.value * DTYPES[base.dtype].bits % DTYPES[dtype].bits:
                raise a.fail("data", f"'{name}': '{base.name}' starts {_show(start)} {base.dtype} "
                                     f"elements into '{root.name}', which tilecute does not "
                                     f"count in {dtype} elements (view '{root.name}' itself)")
            start = N.Const(start.value * DTYPES[base.dtype].bits // DTYPES[dtype].bits, "int32")
        total = k if start is None else start if k is None else self.folded(N.binop("add", start, k))
        if total is not None and N.known_multiple(self.through_lets(total)) * DTYPES[dtype].bits % 128:
            raise a.fail("elem_offset", f"'{name}': the view starts {expr_str(total)} {dtype} "
                                        f"elements into '{root.name}', not known to be a multiple "
                                        "of 16 bytes, which tilecute takes (its vector accesses "
                                        "take a view to start as aligned as its base)")
        return total

    def through_lets(self, e: N.Expr) -> N.Expr:
        """``e`` with the names bound by Lets replaced by their values (what is known of
        ``size`` in ``h * size`` after ``size = 8 * 16``)."""
        for _ in range(64):
            names = {x.name for x in _walk_exprs(e)
                     if isinstance(x, N.Var) and x.name in self.let_values}
            if not names:
                break
            e = substitute(e, {n: self.let_values[n] for n in names})
        return self.folded(e)

    def parser_int(self, x):
        """``x`` as a Python int when it is one (an int, or an integer constant), else None."""
        if isinstance(x, N.Expr):
            x = self.folded(x)
            return x.value if isinstance(x, N.Const) and N.is_int(x.dtype) else None
        return x if isinstance(x, int) and not isinstance(x, bool) else None

    def form_text(self, a: _Args) -> str:
        return f"{a.prefix}{a.name}"

    def misplaced_match(self, s, form: F.Form) -> FrontendError:
        """A ``T.match_buffer`` (or ``T.make_tensor`` of a ``T.handle``) inside a kernel (or
        another block)."""
        self.args(form, s.value)  # (its arguments bound first: an unknown one is named)
        return self.error(s, f"T.{form.__name__} binds a T.handle parameter to a tensor at "
                             "the top of the prim_func body, before any other statement (`A = "
                             "T.match_buffer(a, shape, dtype)`); here it is not supported "
                             "(TVM's match of a buffer region inside a T.block; a tensor at a "
                             "T.ptr or an address read in a kernel is T.make_tensor's)")

    def allocate(self, name: str, form: F.Form, call: ast.Call, s) -> list[N.Stmt]:
        if form.__name__ == "match_buffer" or self.match_form(s) is not None:
            raise self.misplaced_match(s, form)
        if form.__name__ == "decl_buffer":
            return self.decl_buffer(name, self.args(form, call), s)
        if form.__name__ == "alloc_global":
            return self.alloc_global(name, self.args(form, call), s)
        if form.__name__ == "alloc_buffer":
            a = self.args(form, call)
            for arg, default in _TVM_BUFFER_DETAILS.items():
                if a.given(arg) and a.value(arg) != default:
                    raise a.fail(arg, f"'{name}': {arg}={_show(a.value(arg))} is a detail of "
                                      "TVM's buffer declaration tilecute does not take (it "
                                      "takes shape, dtype and scope)")
            if a.value("scope") == "global":  # TileLang's T.alloc_global is this call
                return self.alloc_global(name, a, s)
        if form.__name__ in ("make_tensor", "make_tensor_from_addr"):
            return self.make_tensor(name, form.__name__, self.args(form, call), s)
        if form.__name__ in ("view", "reshape"):
            a = self.args(form, call)
            return self.alloc_view(name, a, s, a.value("src"), a.value("shape"),
                                   a.value("dtype") if form.__name__ == "view" else None,
                                   "src", exact=True)
        if not self.in_kernel:
            raise self.error(s, "buffers are allocated inside a T.Kernel block")
        a = self.args(form, call)
        if form.__name__ in ("alloc_barrier", "alloc_cluster_barrier"):
            return [self.alloc_barrier(name, a, s)]
        if form.__name__ == "alloc_var":
            return self.alloc_var(name, a, s)
        if form.__name__ == "alloc_reducer":
            return self.alloc_reducer(name, a, s)
        shape = a.value("shape")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        # a name bound in the kernel to a constant (`n = 64`: TileLang keeps it an int)
        shape = tuple(f.value if isinstance(f := self.folded(d), N.Const) and N.is_int(f.dtype)
                      else d for d in shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape) \
                and not (form.__name__ in ("alloc_shared", "alloc_buffer")
                         and self.scope_arg(a, name) == "shared"
                         and self.launch_sized(a, name, shape)):
            raise a.fail("shape", f"'{name}': the shape must be positive ints known at parse "
                                  f"time, got {shape!r}")
        vector = a.value("dtype")
        if isinstance(vector, str) and VL.vector_dtype(vector):
            vector = VL.VectorDType(vector)
        if isinstance(vector, VL.VectorDType):
            return self.alloc_vectors(name, form, a, shape, vector, s)
        dt = self.dtype_arg(a, "dtype", name)
        scope = self.scope_arg(a, name)
        layout = self.python_arg(a, "layout", f"T.{form.__name__}: layout=") \
            if "layout" in a.sig.parameters else None
        from .custom_layouts import Fragment
        if isinstance(layout, Fragment) and scope == "fragment":  # TileLang's T.Fragment
            layout = self.fragment_layout(N.Buffer(name, dt, tuple(N.Const(d, "int32") for d in shape),
                                                   scope), layout, a.node("layout"),
                                          f"T.{form.__name__}: layout= of '{name}'")
        if layout is not None and not isinstance(layout, N.Layout):
            raise a.fail("layout", f"'{name}': layout= takes a T.Layout(...), got {layout!r}")
        stages = a.static_int("stages", 1) if "stages" in a.sig.parameters else 1
        dims = tuple(N.Const(d, "int32") if isinstance(d, int) else d for d in shape)
        if not all(isinstance(d, N.Const) for d in dims) and (layout is not None or stages != 1):
            raise a.fail("layout" if layout is not None else "stages",
                         f"'{name}': a shared buffer sized at launch takes no layout= or "
                         "stages= (tilecute lays it out row-major, once)")
        buf = N.Buffer(self.fresh(name), dt, dims, scope)
        self.bind(name, _BufferRef(buf))
        return [N.Allocate(buf, layout, loc=self.loc(s), stages=stages)]

    def launch_sized(self, a: _Args, name: str, shape: tuple) -> bool:
        """Is ``shape`` a shared buffer's shape sized at launch: positive ints and integer
        expressions of the prim_func's symbols (``T.dynamic``) and scalar parameters, which
        the launcher evaluates (TileLang sizes dynamic shared memory from their values)?"""
        known = set(self.scalar_vars) | set(self.symbols)
        for d in shape:
            if isinstance(d, int) and not isinstance(d, bool):
                if d <= 0:
                    return False
            elif not (isinstance(d, N.Expr) and N.is_int(d.dtype) and
                      not any(isinstance(x, N.Load) for x in walk_nodes(d)) and
                      all(v.name in known for v in walk_nodes(d) if isinstance(v, N.Var))):
                raise a.fail("shape", f"'{name}': a shared buffer's dims are ints or integer "
                                      "expressions of the prim_func's T.dynamic symbols and "
                                      f"scalar parameters (the launcher sizes it), got "
                                      f"{_show(d)}")
        return True

    def alloc_vectors(self, name: str, form, a: _Args, shape: tuple, vector: VL.VectorDType,
                      s) -> list[N.Stmt]:
        """``v = T.alloc_local((n,), T.float16x2)``: a local buffer of ``n`` vectors, held
        as ``(n, lanes)`` scalars (a vector's lanes consecutive, as in TileLang's memory)."""
        scope = self.scope_arg(a, name)
        if scope != "local":
            raise a.fail("dtype", f"'{name}': a {scope} buffer of {vector.__name__} vectors; "
                                  "tilecute takes a buffer of vectors in local memory only "
                                  f"(T.alloc_local), where it holds {vector.lanes} "
                                  f"{vector.scalar} scalars per element: allocate the "
                                  f"scalars, shape {shape + (vector.lanes,)}, for {scope} memory")
        if "layout" in a.sig.parameters and a.value("layout") is not None:
            raise a.fail("layout", f"'{name}': a layout of a buffer of vectors")
        buf = N.Buffer(self.fresh(name), vector.scalar,
                       tuple(N.Const(d, "int32") for d in shape + (vector.lanes,)), "local")
        self.bind(name, _VectorBufferRef(buf, vector.lanes))
        return [N.Allocate(buf, loc=self.loc(s))]

    def vector_element(self, ref: _VectorBufferRef, node: ast.Subscript) -> list:
        """The lanes' index tuples of ``v[i]`` on a buffer of vectors."""
        idx = self.indices(node)
        if any(isinstance(i, (slice, VL.LaneVector)) for i in idx) or \
                len(idx) != ref.buffer.ndim - 1:
            raise self.error(node, f"`{ast.unparse(node)}`: a buffer of {ref.lanes}-lane vectors "
                                   f"takes one scalar index per dim ({ref.buffer.ndim - 1}), "
                                   "an element a vector")
        return ref.element(idx)

    def decl_buffer(self, name: str, a: _Args, s) -> list[N.Stmt]:
        """TVM's ``T.decl_buffer(shape, dtype, data, strides, elem_offset, scope, align,
        offset_factor, buffer_type, axis_separators)``: with ``data=buf.data`` a view of
        ``buf`` (as ``T.Buffer(..., data=buf.data)`` in a body); without, TVM lowers it to
        ``T.alloc_buffer`` in ``scope`` ("global": a workspace, as ``T.alloc_global``)."""
        if a.value("data") is None:
            a.refuse_unless("elem_offset", (None, 0), "an allocation starts at its own first "
                                                      "element")
        for arg, accepted in (("strides", (None,)),
                              ("align", (0, -1)), ("offset_factor", (0,)),
                              ("buffer_type", ("", "default")),
                              ("axis_separators", (None, (), []))):
            a.refuse_unless(arg, accepted, "a detail of TVM's buffer declaration tilecute "
                                           "does not take (a view is row-major from its "
                                           "base's first element; an allocation takes shape, "
                                           "dtype and scope)")
        if a.value("data") is None:
            if a.value("scope") == "global":
                return self.alloc_global(name, a, s)
            if not self.in_kernel:
                raise self.error(s, "buffers are allocated inside a T.Kernel block")
            shape = a.value("shape")
            shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
            shape = tuple(f.value if isinstance(f := self.folded(d), N.Const) and
                          N.is_int(f.dtype) else d for d in shape)
            if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
                raise a.fail("shape", f"'{name}': the shape must be positive ints known at parse "
                                      f"time, got {shape!r}")
            buf = N.Buffer(self.fresh(name), self.dtype_arg(a, "dtype", name),
                           tuple(N.Const(d, "int32") for d in shape), self.scope_arg(a, name))
            self.bind(name, _BufferRef(buf))
            return [N.Allocate(buf, None, loc=self.loc(s))]
        data = a.value("data")
        if not isinstance(data, _DataRef):
            raise a.fail("data", f"data must be a buffer's storage (`buf.data`), got {_show(data)}")
        root = self.view_roots.get(data.buffer.name, data.buffer)
        if a.given("scope") and {"global": "global", **_SCOPES}.get(a.value("scope")) != root.scope:
            raise a.fail("scope", f"'{name}': scope={a.value('scope')!r}, but "
                                  f"'{data.buffer.name}' is a {root.scope} buffer; a view lives "
                                  "where its base does")
        return self.alloc_view(name, a, s, _BufferRef(data.buffer), a.value("shape"),
                               a.value("dtype"), "data", exact=False, offset=a.value("elem_offset"))

    def dtype_arg(self, a: _Args, arg: str, name: str) -> str:
        try:
            return dtype_name(a.value(arg))
        except UnknownDTypeError as e:
            raise a.fail(arg, f"'{name}': {e}") from None

    def scope_arg(self, a: _Args, name: str) -> str:
        scope = a.value("scope")
        if scope not in _SCOPES:
            raise a.fail("scope", f"'{name}': scope={scope!r} is not supported; tilecute "
                                  f"allocates in {sorted(_SCOPES)}")
        return _SCOPES[scope]

    def alloc_var(self, name: str, a: _Args, s) -> list[N.Stmt]:
        """``x = T.alloc_var(dtype, init=0)``: TileLang reads ``*args`` as ``(init)``,
        ``(scope)`` (a string) or ``(init, scope)``."""
        vector = a.value("dtype")
        if isinstance(vector, str) and VL.vector_dtype(vector):
            vector = VL.VectorDType(vector)
        dt = vector.scalar if isinstance(vector, VL.VectorDType) else \
            self.dtype_arg(a, "dtype", name)
        extra = a.value("args")
        init, scope = a.value("init"), a.value("scope")
        if len(extra) == 1 and isinstance(extra[0], str):
            scope = extra[0]
        elif len(extra) == 1:
            if a.given("init"):
                raise a.fail("init", f"'{name}': init given twice")
            init = extra[0]
        elif len(extra) == 2:
            init, scope = extra
        elif extra:
            raise a.fail("args", f"'{name}': T.alloc_var takes (dtype, init, scope) at most")
        if scope not in ("local.var", "local"):
            raise a.fail("scope", f"'{name}': scope={scope!r} is not supported; a T.alloc_var "
                                  "lives in 'local.var'")
        if isinstance(vector, VL.VectorDType):
            # `packed = T.alloc_var(T.float16x2)`: a variable of `lanes` scalars (zero, as a
            # scalar T.alloc_var without init is)
            if init is not None:
                raise a.fail("init", f"'{name}': T.alloc_var(T.{vector.__name__}) takes no "
                                     "init in tilecute; assign the vector after it")
            buf = N.Buffer(self.fresh(name), dt, (N.Const(vector.lanes, "int32"),), "local")
            ref = _VectorVarRef(buf, vector.lanes)
            self.bind(name, ref)
            return [N.Allocate(buf, loc=self.loc(s))] + [
                N.Store(buf.name, i, N.const(0, dt), loc=self.loc(s)) for i in ref.indices()]
        limit = ops._FLOAT_MAX.get(dt)
        if isinstance(init, float) and limit is not None and math.isfinite(init) and \
                abs(init) > limit:  # TileLang refuses it too (a silent inf otherwise)
            raise a.fail("init", f"'{name}': init={init!r} exceeds maximum of {dt} ({limit!r})",
                         FrontendValueError)
        value = N.const(0 if init is None else init, dt) \
            if isinstance(init, (int, float, type(None))) else N.as_expr(init, dt) if not _is_ir(init) else init
        if isinstance(value, _BufferRef) or not isinstance(value, N.Expr):
            raise a.fail("init", f"'{name}': init must be a scalar, got {init!r}")
        stmts = self.declare_var(name, dt, value, s)
        if init is None:
            self.default_zero_vars.add(stmts[0].buffer.name)
        return stmts

    def alloc_barrier(self, name: str, a: _Args, s) -> N.Stmt:
        """``bar = T.alloc_barrier(arrive_count)``: one mbarrier; a list of counts makes one
        per entry (tilecute's arrays share one count)."""
        counts = a.value("arrive_count")
        counts = list(counts) if isinstance(counts, (tuple, list)) else [counts]
        if not counts or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1
                                 for c in counts):
            raise a.fail("arrive_count", f"'{name}': arrive_count must be a positive int (or "
                                         f"a list of them) known at parse time, got {_show(a.value('arrive_count'))}")
        if len(set(counts)) != 1:
            raise a.fail("arrive_count", f"'{name}': arrive counts {counts} differ; tilecute's "
                                         "mbarrier arrays take one count for all")
        buf = N.Buffer(self.fresh(name), "uint64", (N.Const(len(counts), "int32"),), "shared")
        self.bind(name, _BufferRef(buf))
        return N.Allocate(buf, N.Layout("mbarrier", threads=counts[0]), loc=self.loc(s))

    def barrier_element(self, node, what: str) -> N.Region:
        r = self.region(node) if isinstance(node, ast.Subscript) else \
            N.Region(self.buffer_of(node).name, (N.Const(0, "int32"),))
        buf = self.buffer_named(r.buffer)
        if buf.dtype != "uint64" or buf.scope != "shared" or r.extents is not None:
            raise self.error(node, f"{what} takes one element of a T.alloc_barrier array, "
                                   f"e.g. bars[0]")
        return r

    def use_swizzle(self, a: _Args, s) -> list[N.Stmt]:
        """``T.use_swizzle(panel_size, order="row")``: from here on the block's first two
        indices walk the grid in panels of ``panel_size`` rows (``order="column"``, or
        ``"col"``: columns), down each panel's rows before moving a column, every other
        panel from the far end (TileLang's ``rasterization2DRow`` / ``2DColumn`` block
        map), so blocks running together share operand tiles in L2.  Lets that rebind the ``T.Kernel``
        names.  In a 1-D grid it changes nothing: TileLang's ``rasterization2DRow`` and
        ``rasterization2DColumn`` map block ``(x, 0)`` of a grid one block high to itself.
        In a kernel launched in clusters the panels walk whole clusters (each block keeps
        its place in its cluster), so the blocks of a cluster still share their tiles."""
        if not self.in_kernel:
            raise self.error(s, "T.use_swizzle belongs inside a T.Kernel block")
        (grid, names) = self.kernel_grid
        panel, order = a.value("panel_size"), a.value("order")
        if order == "mlx":
            raise self.error(s, "T.use_swizzle(order='mlx') is TileLang's Metal rasterization "
                                "(its CUDA code generator has none); tilecute takes 'row' or "
                                "'column'")
        if order not in ("row", "col", "column"):  # TileLang checks the order first
            raise self.error(s, f"T.use_swizzle(order={order!r}): order is 'row' or 'column'")
        if not a.static_bool("enable"):
            return []
        if not isinstance(panel, int) or isinstance(panel, bool) or panel < 1:
            raise self.error(s, f"T.use_swizzle(panel_size={panel!r}, order={order!r}): "
                                "panel_size is a positive int")
        if len(grid) < 2:
            return []  # one grid extent: every block keeps its index (see above)
        x, y = (self.expr(ast.Name(id=n, ctx=ast.Load())) for n in names[:2])
        cluster = (tuple(self.kernel_cluster or ()) + (1, 1))[:2]
        stmts = []

        def let(name, value):
            var = N.Var(self.fresh(name), value.dtype)
            stmts.append(N.Let(var, value, loc=self.loc(s)))
            return var
        # TileLang's rasterization2DRow / 2DColumn: the launch order's blocks handed out
        # panel by panel, every other panel walked from the far end
        new_x, new_y = panel_order(x, y, grid[0], grid[1], panel, let, cluster,
                                   order="row" if order == "row" else "column",
                                   serpentine=True)
        renamed = {}
        for name, value, old, extent in zip(names[:2], (new_x, new_y), (x, y), grid[:2]):
            var = N.Var(self.fresh(name), old.dtype)  # (the block index's dtype)
            # (below its grid extent, as the block index: the order permutes the grid)
            stmts.append(N.Let(var, N.cast(value, old.dtype), loc=self.loc(s),
                               within=N.cast(extent, old.dtype)))
            self.bind(name, var)
            if isinstance(old, N.Var):
                renamed[old.name] = var
        # TileLang inlines integer lets (its Simplify) and its `const dim3 blockIdx = ...`
        # shadows the block index for all that follows, so a name bound before this from a
        # block index (`bb, bh = bbh // H, bbh % H`) reads the swizzled index after it: bind
        # each such name again, in the order the lets were made (one may use another)
        visible = {}
        for scope in self.scopes:
            for name, value in scope.items():
                if isinstance(value, N.Var):
                    visible.setdefault(value.name, []).append(name)
        for old_name, value in list(self.let_values.items()):
            if old_name not in visible or old_name in renamed or not N.is_int(value.dtype) or \
                    not var_names(value) & renamed.keys() or _reads_state(value):
                continue  # (TileLang inlines pure integer lets only: not a load's, a call's)
            value = substitute(value, renamed)
            var = N.Var(self.fresh(visible[old_name][0]), value.dtype)
            stmts.append(N.Let(var, value, loc=self.loc(s)))
            self.let_values[var.name] = value
            renamed[old_name] = var
            for name in visible[old_name]:
                if getattr(self.lookup_local(name), "name", None) == old_name:  # (not shadowed)
                    self.bind(name, var)
        return stmts

    def expr_stmt(self, s: ast.Expr) -> list[N.Stmt]:
        call = s.value
        if not isinstance(call, ast.Call):
            if isinstance(call, ast.Constant):
                if call.value is Ellipsis or isinstance(call.value, str):
                    return []  # `...` and docstrings, as in Python
                raise self.error(s, "an expression statement must be a T.* call")
            # TileLang evaluates any other expression statement (`tmp[0]`, `x + 1`): T.evaluate
            return [N.Evaluate(N.as_expr(self.expr(call)), loc=self.loc(s))]
        macro = self.macro_of(call.func)
        if macro is not None:
            return self.inline_macro(macro, call, s)
        form = self.form_of(call.func)
        if form is not None and form.__name__ == "evaluate" and len(call.args) == 1 and \
                not call.keywords and isinstance(call.args[0], ast.Call):
            inner = self.form_of(call.args[0].func)
            if inner is not None and (inner.__name__ == "tvm_thread_allreduce" or
                                      inner.kind == "stmt" and inner.__name__ != "evaluate"):
                # T.evaluate(T.tvm_thread_allreduce(...)), T.evaluate(T.tvm_storage_sync(...)):
                # TVMScript's statement call written as an evaluated expression
                call, form = call.args[0], inner
        if form is None or form.kind != "stmt":
            if form is not None:
                raise self.error(s, f"T.{form.__name__} is not a statement here")
            helper = self.python_helper_of(call.func)
            if helper is not None:
                return self.inline_function(helper, f"helper {helper.__name__!r}", call, s)
            stores = self.scheduler_stores(call)
            if stores is not None:
                return [self.store_value(buf, _VarRef.indices, v, s) for buf, v in stores]
            f = call.func
            try:
                target = self.eval_python(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
            except (FrontendError, NotImplementedError):
                target = None
            if isinstance(target, Refused):  # `tirx.call_extern(...)`: say which and why
                raise self.error(s, target.message())
            if target is print:
                # Python's print runs while the kernel is built, as in TileLang (whose parser
                # runs a Python call statement): an expression prints as the script shows it
                return self.parse_time_print(call, s)
            if isinstance(f, ast.Attribute) and f.attr in _CONTAINER_METHODS and \
                    not call.keywords and \
                    isinstance(self.python_value(f.value), (list, dict, set)):
                # `tiles.append(T.alloc_shared(...))`: Python's call, run while parsing (as
                # TileLang's builder runs an expression statement); an allocation in its
                # arguments is a buffer named after the container (`tiles_0`, ...)
                outer = self.comprehension_name
                self.comprehension_name = f.value.id if isinstance(f.value, ast.Name) else None
                try:
                    args = [self.comprehension_item(x, s) for x in call.args]
                finally:
                    self.comprehension_name = outer
                getattr(self.python_value(f.value), f.attr)(*args)
                return []
            if isinstance(f, ast.Attribute):
                try:
                    module = self.eval_python(f.value)
                except FrontendError:
                    module = None
                if getattr(module, "__name__", "") == "tilecute.language" and \
                        not hasattr(module, f.attr):
                    raise self.error(s, f"T.{f.attr} is not a tilecute form (a TileLang or "
                                        "TVM statement tilecute does not have; see "
                                        "docs/ir.md, \"TileLang's forms\")")
            raise self.error(s, "an expression statement must be a T.* statement call "
                                "(T.copy, T.fill, T.clear, T.gemm, T.reduce_*, T.atomic_add/max/min, "
                                "T.sync_threads, T.tma_copy, T.mbarrier_arrive, "
                                "T.mbarrier_wait_parity, T.use_swizzle, T.set_max_nreg, "
                                "T.evaluate)")
        if self.sblock_depth and form.__name__ in _KERNEL_ANNOTATIONS:
            raise self.error(s, f"T.{form.__name__} inside a `with T.sblock(...)`: TileLang "
                                "attaches it to that block, tilecute reads it as the kernel's; "
                                "write it directly in the T.Kernel body")
        a = self.args(form, call)
        self.current_form = self.form_text(a)  # named when a region alias is refused
        handler = getattr(self, f"stmt_{form.__name__}", None)
        if handler is None and form.__name__.startswith("reduce_"):
            return [self.reduce(a, form.__name__[len("reduce_"):], s)]
        return handler(a, s)

    def tile_scheduler(self, name: str, sched: PersistentTileScheduler, s) -> list[N.Stmt]:
        """``sched = T.PersistentTileScheduler(...)``: the name binds the scheduler; a
        stateful one's four ``int32`` ``T.alloc_var``s (``m_idx``, ``n_idx``,
        ``linear_idx``, ``current_iter``, prefixed ``{name}_`` when it is given one, as
        TileLang names them) are allocated here, initialized to 0."""
        if sched.stateful and sched._state is not None:
            raise self.error(s, f"'{name}': this T.PersistentTileScheduler already has its "
                                "state (one scheduler object, one name)")
        self.check_rebind(name, s)
        out: list[N.Stmt] = []
        if sched.stateful:
            if not self.in_kernel:
                raise self.error(s, f"'{name} = T.PersistentTileScheduler(...)': a stateful "
                                    "scheduler keeps its cursor in T.alloc_vars, which live "
                                    "inside a T.Kernel (stateful=False decodes tiles "
                                    "anywhere)")
            buffers, scope, missing = [], self.scopes[-1], object()
            for var in sched.state_names():
                shadowed = scope.get(var, missing)  # the state binds no name of the program's
                out += self.declare_var(var, "int32", N.Const(0, "int32"), s)
                buffers.append(scope[var].buffer)
                if shadowed is missing:
                    del scope[var]
                else:
                    scope[var] = shadowed
            sched.bind_state(tuple(buffers))
        self.bind(name, sched)
        return out

    def scheduler_stores(self, call: ast.Call):
        """``sched.init(block_id)`` / ``sched.next_tile()`` as a statement: the
        :class:`StateStores` the method makes, or None where the call is no such
        method's."""
        if not isinstance(call.func, ast.Attribute):
            return None
        try:
            base = self.eval_python(call.func.value)
        except FrontendError:
            return None
        if not isinstance(base, PersistentTileScheduler):
            return None
        value = self.expr(call)
        return value if isinstance(value, StateStores) else None

    def parse_time_print(self, call: ast.Call, s) -> list[N.Stmt]:
        """``print(...)`` in a kernel body: printed once, now; no statement (TileLang's
        device print is ``T.print``)."""
        if any(isinstance(x, ast.Starred) for x in call.args):
            raise self.error(s, "print(*args) in a kernel body: give print its values")
        args = []
        for x in call.args:
            v = self.expr(x)
            if isinstance(v, N.Expr) and isinstance(c := self.folded(v), N.Const):
                v = c.value  # a name bound to a number prints it, as in TileLang
            args.append(expr_str(v) if _is_ir(v) else v.buffer.name
                        if isinstance(v, _BufferRef) else v)
        kwargs = {k.arg: self.eval_python(k.value) for k in call.keywords}
        print(*args, **kwargs)
        return []

    # ---- T.macro -------------------------------------------------------------------------
    def macro_of(self, node):
        """The ``T.macro`` a call's callee names (a name or an attribute path), or returns
        (``get_dequant_func()(B_shared, B_deq)``: a Python call, run while the kernel is
        built as TileLang runs it, that returns a macro), or None."""
        if isinstance(node, ast.Call):
            value = self.eval_python(node)
            return value if isinstance(value, Macro) else None
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        value = self.lookup_local(node.id)
        if value is None:
            value = self.env.get(node.id)
        for attr in reversed(path):
            value = getattr(value, attr, None)
        return value if isinstance(value, Macro) else None

    def top_function_of(self, node):
        """What a top-level call may inline, holding the function's ``T.Kernel`` blocks: a
        ``T.macro``, or a plain Python function opening one (TileLang's builder runs
        either where the body calls it), as (function, how messages name it), or None."""
        macro = self.macro_of(node)
        if macro is not None:
            return macro.fn, f"T.macro {macro.__name__!r}"
        helper = self.python_helper_of(node)
        if helper is not None and holds_kernel(helper):
            return helper, f"function {helper.__name__!r}"
        return None

    def python_helper_of(self, node):
        """A plain Python function (not a ``T.*`` form or a ``T.macro``) that a statement
        calls, e.g. a test's ``_emit(T, src, dst)`` whose body calls ``T.reduce_sum``, or
        None.  TileLang runs such a call as Python while the kernel is built, so the ``T.*``
        statements it makes land where it is called; tilecute inlines its body as it
        inlines a ``T.macro`` (:meth:`inline_function`)."""
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        try:
            fn = self.eval_python(node)
        except FrontendError:
            return None
        if not isinstance(fn, types.FunctionType) or \
                (fn.__module__ or "").split(".")[0] in ("tilecute", "backend", "runtime"):
            return None
        return fn

    def inline_macro(self, macro: "Macro", call: ast.Call, s) -> list[N.Stmt]:
        return self.inline_function(macro.fn, f"T.macro {macro.__name__!r}", call, s)

    def inline_function(self, fn, what: str, call: ast.Call, s, want_value=False):
        """The function's body (a ``T.macro``'s, or a plain Python helper's), parsed here
        with its parameters bound to the call's arguments and its other names resolved in
        its own module and closure.  A ``T.alloc_var`` given to a parameter the body
        rebinds (``v = v * 2``, not annotated ``T.Ref``) is bound to its value: TileLang
        0.1.15 hands a macro or a helper the variable's value (``v: T.float32 = acc[0]``),
        so the rebinding is the function's own and the caller's variable keeps its value.
        A ``return value`` may end the body (TileLang's macros return values: an
        expression, a tuple of them, a buffer, a ``T.alloc_var``); with ``want_value`` the
        result is (statements, value), else the value is dropped, as Python drops the
        value of a call made as a statement."""
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise self.error(s, f"{what}: cannot read its source ({e})")
        tree = ast.parse(textwrap.dedent("".join(lines)))
        fdef = tree.body[0]
        final = fdef.body[-1] if fdef.body and isinstance(fdef.body[-1], ast.Return) else None
        looped = _return_in_loop(fdef.body)
        if looped is not None:
            raise self.error(s, f"{what} returns a value from inside a loop or `with` "
                                f"(line {first + looped.lineno - 1}); tilecute inlines a "
                                "macro and takes the value of a `return` that ends its body "
                                "or a branch decided while parsing")
        branch_returns = any(isinstance(t, ast.If) and _has_return(t) for t in fdef.body)
        if want_value and not branch_returns and (final is None or final.value is None):
            raise self.error(s, f"{what} returns no value to assign")
        values, kwvalues = [], {}
        for a in call.args:
            if isinstance(a, ast.Starred):
                values.extend(self.eval_python(a.value))
            else:
                values.append(self.macro_arg(a))
        for k in call.keywords:
            if k.arg is None:
                kwvalues.update(self.eval_python(k.value))
            else:
                kwvalues[k.arg] = self.macro_arg(k.value)
        sig = inspect.signature(fn)
        params = sig.parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            # Python names an unknown keyword before a missing argument (`_z(A, count=64)`
            # for `_z(buf, n)`); inspect's bind says only that `n` is missing
            names = [p.name for p in params if p.kind is not p.POSITIONAL_ONLY]
            for key in kwvalues:
                if key not in names:
                    raise self.error(s, f"{what}: got an unexpected keyword argument {key!r} "
                                        f"(its parameters: {', '.join(names)})")
        try:
            bound = sig.bind(*values, **kwvalues)
        except TypeError as e:
            raise self.error(s, f"{what}: {e}") from None
        bound.apply_defaults()
        refs = self.reference_args(fn, what, bound.arguments, s)
        saved = (self.scopes, self.control, self.env, self.filename, self.line_offset,
                 self.source_lines, self.reassigned)
        self.reassigned = _reassigned_names(fdef)
        filename = inspect.getsourcefile(fn) or "<unknown>"
        all_lines = linecache.getlines(filename)
        self.scopes, self.control = [dict(bound.arguments)], [False]
        self.env = _function_env(fn)
        _tvm_loop_control(fdef, self.env)
        self.filename, self.line_offset = filename, first - 1
        self.source_lines = all_lines[first - 1:] if all_lines else lines
        try:
            body = [t for t in fdef.body if not (isinstance(t, ast.Expr)
                                                 and isinstance(t.value, ast.Constant))]
            out: list[N.Stmt] = refs

            def run(stmts):
                """The statements up to a `return` (its node), an `if` holding one decided
                while parsing (TileLang traces a macro as Python: `if out is None: return
                ...` takes one branch)."""
                for t in stmts:
                    if isinstance(t, ast.Return):
                        return t
                    if isinstance(t, ast.If) and _has_return(t):
                        cond = self.expr(t.test)
                        if _is_ir(cond) or VL.is_vector(cond):
                            raise self.error(t, f"{what} returns from inside a branch on the "
                                                f"runtime value `{ast.unparse(t.test)}`; "
                                                "tilecute inlines a macro and takes the value "
                                                "of a `return` in a branch decided while "
                                                "parsing only")
                        done = run(t.body if cond else t.orelse)
                        if done is not None:
                            return done
                        continue
                    out.extend(self.stmt(t, False))
                return None

            ret = run(body)
            value = None
            if ret is not None and ret.value is not None:
                value = self.returned_value(ret, out, fn.__name__)
            if want_value and value is None:
                raise self.error(s, f"{what} returns no value to assign")
            return (out, value) if want_value else out
        finally:
            (self.scopes, self.control, self.env, self.filename, self.line_offset,
             self.source_lines, self.reassigned) = saved

    def reference_args(self, fn, what: str, arguments: dict, s) -> list[N.Stmt]:
        """TileLang's pass-by-reference macro parameters (``x: T.Ref``, or the deprecated
        ``x: T.Var``): a buffer element argument becomes an :class:`_ElemRef` (its indices
        bound to names here, once), a ``T.alloc_var`` or a buffer region stays what it is;
        any other argument is an error, as TileLang's ``ValueError``.  A parameter without
        the annotation given a ``T.alloc_var`` (or a reference) takes its value at the call,
        a ``Let`` (TileLang binds it so): assigning the parameter in the macro leaves the
        caller's variable alone.  Returns the ``Let`` statements of the indices and values."""
        from . import Ref  # (the package imports this module)

        out: list[N.Stmt] = []
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return out
        for name, p in params.items():
            if name not in arguments:
                continue
            value = arguments[name]
            if not _by_reference(fn, name):
                if isinstance(value, _VarRef):  # (by value)
                    load = N.Load(value.buffer.name, tuple(value.indices), value.buffer.dtype)
                    var = N.Var(self.fresh(name), load.dtype)
                    self.let_values[var.name] = load
                    out.append(N.Let(var, load, loc=self.loc(s)))
                    arguments[name] = var
                continue
            if isinstance(value, (_VarRef, _BufferRef, _RegionRef)):
                continue  # a T.alloc_var, a buffer or a region: itself
            if isinstance(value, N.Load):
                buf = self.buffer_named(value.buffer)
                idx = []
                for k, e in enumerate(value.indices):
                    if isinstance(e, (N.Const, N.Var)):
                        idx.append(e)
                        continue
                    var = N.Var(self.fresh(f"{name}_i{k}"), e.dtype)
                    out.append(N.Let(var, e, loc=self.loc(s)))
                    idx.append(var)
                arguments[name] = _ElemRef(buf, tuple(idx), name)
                continue
            kind = "T.Ref" if p.annotation in (Ref, "T.Ref", "Ref") else "T.Var"
            raise self.error(s, f"{what}: parameter '{name}' is annotated {kind} (passed by "
                                "reference): the argument must be a T.alloc_var, a buffer "
                                f"element or a buffer region, got {_show(value)}",
                             FrontendValueError)
        return out

    def call_lambda(self, fn: _Lambda, node: ast.Call):
        """A call of a lambda a macro was given: its body's value, its parameters bound to
        the call's arguments."""
        params = fn.node.args
        if params.vararg or params.kwarg or params.kwonlyargs or params.defaults or \
                node.keywords or len(node.args) != len(params.args):
            raise self.error(node, f"`{ast.unparse(fn.node)}`: a lambda given to a macro is "
                                   f"called with its {len(params.args)} positional arguments")
        values = [self.macro_arg(a) for a in node.args]
        saved = self.scopes, self.env
        self.scopes = fn.scopes + [{p.arg: v for p, v in zip(params.args, values)}]
        self.env = fn.env
        try:
            return self.expr(fn.node.body)
        finally:
            self.scopes, self.env = saved

    def returned_value(self, ret: ast.Return, out: list, fn_name: str):
        """The value of a macro's final ``return``, read in the macro's scope: each
        returned expression is assigned to a fresh name (so a returned ``T.alloc_var(...)``
        or buffer region is made as an assignment makes it), whose binding is the value."""
        elts = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        values = []
        for e in elts:
            made = isinstance(e, ast.Subscript) and self.is_slice_of_buffer(e) or \
                isinstance(e, ast.Call) and (f := self.form_of(e.func)) is not None and \
                f.kind == "alloc" or self.is_storage_view(ast.Assign(
                    targets=[ast.Name(f"{fn_name}_result", ast.Store())], value=e))
            if not made:  # an expression (or a name's binding) is the value itself
                values.append(self.macro_arg(e))
                continue
            name = f"{fn_name}_result" + (f"{len(values)}" if len(elts) > 1 else "")
            assign = ast.copy_location(ast.Assign(targets=[ast.Name(name, ast.Store())],
                                                  value=e), ret)
            out.extend(self.stmt(ast.fix_missing_locations(assign), False))
            values.append(self.lookup_local(name))
        return tuple(values) if isinstance(ret.value, ast.Tuple) else values[0]

    def macro_arg(self, node):
        """A macro argument: a buffer (by name), a lambda, or an expression's value."""
        if isinstance(node, ast.Lambda):
            return _Lambda(node, list(self.scopes), self.env)
        if isinstance(node, ast.Name):
            value = self.lookup_local(node.id)
            if value is not None:
                if node.id in self.rebound_inside:  # (a rebinding's value read past its body)
                    self.lookup(node.id, node)
                return value
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                self.is_slice_of_buffer(node):  # `A[4:6]`: that region of A
            return _RegionRef(self.region(node), ast.unparse(node), self.loc(node))
        return self.expr(node)

    def stmt_copy(self, a: _Args, s) -> list[N.Stmt]:
        # TileLang's T.copy folds its keyword arguments into the annotations, whose values
        # win (copy_op.py); an annotation key is read here as the argument it stands for
        ann = a.annotations(_COPY_ANNOTATIONS, _COPY_ANNOTATIONS_REFUSED)
        given = _annotated_args(a, ann)

        explicit_async = False
        for key in _ASYNC_COPY_KEYS:
            if key in ann:
                v = ann[key]
                if not (isinstance(v, bool) or isinstance(v, int) and v in (0, 1)):
                    raise a.fail("annotations", f"annotations={{{key!r}: {_show(v)}}}: True or "
                                                "False, known at parse time")
                explicit_async |= bool(v)
        self.copy_options(a, given)
        no_tma, arg, shown = given("disable_tma", "disable_tma", False)
        if not (isinstance(no_tma, bool) or isinstance(no_tma, int) and no_tma in (0, 1)):
            raise a.fail(arg, f"{shown}: disable_tma must be True or False, known at parse time")
        no_tma = bool(no_tma)
        instruction, arg, shown = given("prefer_instruction", "prefer_instruction", None)
        if instruction is not None and instruction not in N.COPY_INSTRUCTIONS:
            raise a.fail(arg, f"{shown}: expected one of "
                              f"{', '.join(repr(x) for x in N.COPY_INSTRUCTIONS)} (TileLang's)")
        if instruction == "tma" and no_tma:  # TileLang: "conflicts with disable_tma=true"
            raise a.fail(arg, f'{shown} conflicts with disable_tma=True')
        if explicit_async:  # (TileLang's copy lowering: the async keys win over the others)
            instruction = N.ASYNC_COPY
        layout = self.copy_loop_layout(a, ann, "T.copy")
        if layout and instruction == "tma":  # TileLang: "loop layout annotation requires SIMT"
            raise a.fail("loop_layout", f"loop_layout and {shown}: a loop layout is for a "
                                        "copy the threads run (TileLang's), not a TMA copy")
        src, dst = self.copy_regions(a, s)
        return [N.Copy(src, dst, loc=self.loc(s), disable_tma=no_tma,
                       instruction=instruction or "", vector_width=self.copy_width(a, given),
                       **layout)]

    def stmt_copy_cluster(self, a: _Args, s) -> list[N.Stmt]:
        """``T.copy_cluster(src, dst, *, dst_block=, cluster_mask=, remote_barrier=)``:
        TileLang's cluster copies (sm_90+, a kernel launched in clusters).

        ``cluster_mask`` (a global -> shared load): the blocks whose rank's bit is set get
        the tile of the lowest-ranked of them (TileLang multicasts that block's load to
        them); the others load their own.  tilecute loads the issuing block's tile in each
        block of the mask (the same bytes land in each; no multicast): the copy's global
        origin is the issuer's, its block indices and ``T.block_rank_in_cluster()`` those
        of the mask's lowest rank (:meth:`issuer_region`).
        ``dst_block`` (shared -> shared): the threads store ``src`` into ``dst`` of block
        ``dst_block`` of the cluster (``N.ClusterCopy``); with ``remote_barrier``, once
        stored, one thread arrives on that barrier in that block (its threads wait on it
        with ``T.mbarrier_wait_parity``), as TileLang's every path arrives once.  Without
        either it is ``T.copy``."""
        keys = ("dst_block", "cluster_mask", "barrier", "eviction_policy", "coalesced_width",
                "parallel_loop_layout")
        ann = a.annotations(keys, _COPY_ANNOTATIONS_REFUSED)
        given = _annotated_args(a, ann)

        self.copy_options(a, given)
        for name, key in (("coalesced_width", "coalesced_width"),
                          ("loop_layout", "parallel_loop_layout")):
            value, arg, shown = given(name, key, None)
            if value is not None:
                raise a.fail(arg, f"{shown} is not supported: a cluster copy's lanes and "
                                  "threads are chosen by tilecute's vectorization pass")
        if not self.in_kernel:
            raise self.error(s, "T.copy_cluster belongs inside a T.Kernel / T.ClusterKernel")
        block, _, shown_block = given("dst_block", "dst_block", None)
        mask, mask_arg, shown_mask = given("cluster_mask", "cluster_mask", None)
        barrier = a.node("remote_barrier") if a.given("remote_barrier") else None
        if "barrier" in ann:  # (the barrier element as written in the dict literal)
            node = a.node("annotations")
            barrier = next((v for k, v in zip(node.keys, node.values)
                            if isinstance(k, ast.Constant) and k.value == "barrier"), None) \
                if isinstance(node, ast.Dict) else None
            if barrier is None:
                raise a.fail("annotations", "annotations={'barrier': ...}: write the barrier "
                                            "element in the dict literal (bars[0])")
        if block is not None and mask is not None:
            raise a.fail("dst_block", f"{shown_block} and {shown_mask}: a copy is either a "
                                      "multicast load (cluster_mask) or a copy into another "
                                      "block's shared memory (dst_block), not both (TileLang's)")
        src, dst = self.copy_regions(a, s, "T.copy_cluster")
        scopes = [self.buffer_named(r.buffer).scope for r in (src, dst)]
        if block is None:
            if barrier is not None:
                raise a.fail("remote_barrier", "remote_barrier signals the end of a copy into "
                                               "another block (dst_block=...); this copy has none")
            if mask is not None and mask != 0:
                if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
                    raise a.fail(mask_arg, f"{shown_mask}: cluster_mask is a bitmask of ranks, "
                                           "an int known at parse time (TileLang's)")
                if scopes != ["global", "shared"]:
                    raise a.fail(mask_arg, f"{shown_mask}: a multicast copy loads a global "
                                           f"tile into shared memory; this one copies "
                                           f"{scopes[0]} '{src.buffer}' to {scopes[1]} "
                                           f"'{dst.buffer}'")
                src = self.issuer_region(src, mask, a.node(mask_arg), "T.copy_cluster")
            return [N.Copy(src, dst, loc=self.loc(s))]
        if scopes != ["shared", "shared"]:
            raise a.fail("dst_block", f"{shown_block}: a copy into another block's shared memory "
                                      f"copies a shared region to a shared region; this one "
                                      f"copies {scopes[0]} '{src.buffer}' to {scopes[1]} "
                                      f"'{dst.buffer}'")
        if isinstance(block, bool) or not (isinstance(block, int) or
                                           _is_ir(block) and N.is_int(block.dtype)):
            raise a.fail("dst_block", f"{shown_block}: dst_block is a block's rank in the "
                                      "cluster, an integer")
        size = math.prod(self.kernel_cluster or (1,))
        if isinstance(block, int) and not 0 <= block < size:
            raise a.fail("dst_block", f"{shown_block}: the kernel's cluster has {size} "
                                      f"block(s), ranks 0..{size - 1}")
        if any(self.buffer_named(r.buffer).dtype == "float4_e2m1fn" for r in (src, dst)):
            raise self.error(s, "T.copy_cluster(dst_block=) of float4_e2m1fn is not supported "
                                "(two elements a byte)")
        src, dst = self.cluster_copy_extents(
            src, dst, s, [not isinstance(a.node(n), ast.Subscript) for n in ("src", "dst")])
        bar = None if barrier is None else \
            self.barrier_element(barrier, "T.copy_cluster(remote_barrier=)")
        return [N.ClusterCopy(src, dst, N.cast(N.as_expr(block), "int32"), bar, loc=self.loc(s))]

    def cluster_copy_extents(self, src: N.Region, dst: N.Region, s, whole_buffers):
        """T.copy_cluster(dst_block=)'s regions with their extents (a whole buffer's shape, a
        region's own, an element origin the other side's), both the same elements."""
        def ext(r, whole_buffer):
            return r.extents if r.extents is not None else \
                (tuple(self.buffer_named(r.buffer).shape) if whole_buffer else None)

        def whole(r, extents):
            starts = r.starts or tuple(N.Const(0, "int32") for _ in extents)
            return N.Region(r.buffer, starts, tuple(extents))
        es, ed = ext(src, whole_buffers[0]), ext(dst, whole_buffers[1])
        if es is None and ed is None:
            raise self.error(s, "T.copy_cluster: give the extent of one side (a region "
                                "s[0:64, 0:32] or a whole buffer)")
        src, dst = whole(src, es or ed), whole(dst, ed or es)

        def dims(e):  # the extents other than 1 (TileLang matches regions so)
            out = []
            for x in e:
                if not isinstance(x, N.Const):
                    raise self.error(s, "T.copy_cluster(dst_block=): region extents are known "
                                        "at parse time")
                if x.value != 1:
                    out.append(int(x.value))
            return out
        if dims(src.extents) != dims(dst.extents):
            raise self.error(s, f"T.copy_cluster: '{src.buffer}' region {_shape_text(src.extents)} "
                                f"and '{dst.buffer}' region {_shape_text(dst.extents)} are not the "
                                "same elements")
        return src, dst

    def issuer_region(self, r: N.Region, mask: int, node, form: str) -> N.Region:
        """A multicast load's global region (``cluster_mask``) as each block loads it: in the
        blocks whose rank's bit is set, the origin the mask's lowest rank computes (its
        block indices: ``b - b % c + (its place along that dim)``, and its
        ``T.block_rank_in_cluster()``); elsewhere the block's own.  Names bound to values of
        the block indices are followed; a value read from a local, shared or fragment
        buffer cannot be the issuer's and is refused."""
        cluster = tuple(self.kernel_cluster or ()) + (1, 1, 1)
        size = math.prod(cluster[:3])
        if mask >> size:
            raise self.error(node, f"{form}: cluster_mask={bin(mask)} names ranks the kernel's "
                                   f"cluster of {size} block(s) does not have")
        if mask & (mask - 1) == 0:
            return r  # one rank: the issuer loads its own tile
        low = (mask & -mask).bit_length() - 1
        place = (low % cluster[0], low // cluster[0] % cluster[1],
                 low // (cluster[0] * cluster[1]))
        (_, names) = self.kernel_grid
        blocks = {}
        for d, v in enumerate(self.kernel_blocks):
            blocks[v.name] = d
        current = list(self.kernel_blocks)  # each dim's index as the program names it now
        for d, nm in enumerate(names):  # (T.use_swizzle rebinds the names)
            v = next((sc[nm] for sc in reversed(self.scopes) if nm in sc), None)
            if isinstance(v, N.Var) and d < len(current):
                blocks[v.name] = d
                current[d] = v
        i32 = lambda x: N.Const(x, "int32")  # noqa: E731

        def issuer_block(v: N.Var, d: int) -> N.Expr:
            c = cluster[d]
            if c == 1:
                return v
            return N.binop("add", N.binop("sub", v, N.binop("mod", v, N.cast(i32(c), v.dtype))),
                           N.cast(i32(place[d]), v.dtype))

        def issuer(e):
            def leaf(x):
                if isinstance(x, N.Var):
                    if x.name in blocks:
                        return issuer_block(x, blocks[x.name])
                    if x.name in self.let_values:
                        value = self.let_values[x.name]
                        new = issuer(value)
                        return x if new == value else new
                    return x
                if isinstance(x, N.Call) and x.name == "block_rank_in_cluster":
                    return i32(low)
                if isinstance(x, N.Load) and self.buffer_named(x.buffer).scope != "global":
                    raise self.error(node, f"{form}: cluster_mask={bin(mask)}: the copy's origin "
                                           f"reads '{x.buffer}' ({self.buffer_named(x.buffer).scope}), "
                                           "whose value in the issuing block tilecute cannot "
                                           "know (it loads the issuer's tile in each block of "
                                           "the mask); bind the origin to names of the block "
                                           "indices")
                return None
            return rebuild(e, leaf)
        rank = None
        for d in range(3):
            if cluster[d] > 1:
                if d >= len(current):
                    raise self.error(node, f"{form}: the cluster spans grid dim {d}, which the "
                                           "kernel does not have")
                term = N.binop("mod", N.cast(current[d], "int32"), i32(cluster[d]))
                if d:
                    term = N.binop("mul", term, i32(math.prod(cluster[:d])))
                rank = term if rank is None else N.binop("add", rank, term)
        if rank is None:
            return r
        in_mask = N.cmp("ne", N.binop("bitand", N.binop("shr", i32(mask), rank), i32(1)), i32(0))
        starts = []
        for e in r.starts:
            mine = issuer(e)
            starts.append(e if mine == e else N.Select(in_mask, mine, e, e.dtype))
        return dataclasses.replace(r, starts=tuple(starts))

    def stmt_async_copy(self, a: _Args, s) -> list[N.Stmt]:
        """``T.async_copy(src, dst)``: TileLang's asynchronous copy, global -> shared memory
        by cp.async (sm_80+), this thread's copies one commit group
        (``cp.async.commit_group``) and no wait: the program waits with
        ``T.ptx_wait_group(n)`` (``Copy.instruction`` ASYNC_COPY).  Two single elements are
        one plain store, as TileLang lowers them."""
        ann = a.annotations(("coalesced_width", "parallel_loop_layout") + _ASYNC_COPY_KEYS,
                            _COPY_ANNOTATIONS_REFUSED)
        given = _annotated_args(a, ann)

        self.copy_options(a, given)
        layout = self.copy_loop_layout(a, ann, "T.async_copy")
        src, dst = self.copy_regions(a, s, "T.async_copy")
        single = src.extents is not None and all(
            isinstance(x, N.Const) and x.value == 1 for x in src.extents) and \
            isinstance(a.node("src"), ast.Subscript) and isinstance(a.node("dst"), ast.Subscript) \
            and not ann and not layout
        return [N.Copy(src, dst, loc=self.loc(s), instruction="" if single else N.ASYNC_COPY,
                       vector_width=0 if single else self.copy_width(a, given), **layout)]

    def copy_width(self, a: _Args, given) -> int:
        """T.copy's / T.async_copy's ``coalesced_width`` (its annotation key too): the lanes
        a thread step of the copy's loop, as TileLang's loop partition takes it; 0 when not
        given."""
        width, arg, shown = given("coalesced_width", "coalesced_width", None)
        if width is None:
            return 0
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise a.fail(arg, f"{shown}: coalesced_width must be an int >= 1 known at parse time")
        return width

    def copy_options(self, a: _Args, given) -> None:
        """The argument T.copy, T.async_copy and T.copy_cluster refuse: an eviction policy
        other than normal."""
        if "eviction_policy" in a.sig.parameters:
            policy, arg, shown = given("eviction_policy", "eviction_policy", None)
            if policy not in (None, "evict_normal", 0) or isinstance(policy, bool):
                raise a.fail(arg, f"{shown} is not supported: tilecute's copies use the normal "
                                  "eviction policy")

    def copy_loop_layout(self, a: _Args, ann: dict, form: str) -> dict:
        """``T.copy(..., loop_layout=T.Fragment(shape, ...))`` (or the annotation key
        ``parallel_loop_layout``): TileLang's map of the copy's SIMT loop (over its non-unit
        extents) onto the threads, as ``T.Parallel(..., loop_layout=)``; the copy is then
        never a TMA copy (TileLang takes it for a plain or cp.async copy only).  The
        ``Copy`` fields: ``loop_layout`` and the Fragment's shape, which the copy's lowering
        checks against its loop."""
        given = self.given_loop_layout(a, ann, form)
        if given is None:
            return {}
        value, arg = given
        if isinstance(value, N.Layout):  # tilecute's own form, as the printer writes it
            return {"loop_layout": value}
        return {"loop_layout": self.match_loop_layout(a, arg, value, value.shape),
                "loop_shape": tuple(value.shape)}

    def copy_regions(self, a: _Args, s, form: str = "T.copy") -> tuple[N.Region, N.Region]:
        """T.copy's / T.async_copy's source and destination regions (two single elements:
        one element each)."""
        src, dst = self.region(a.node("src")), self.region(a.node("dst"))
        whole = [not isinstance(a.node(n), ast.Subscript) and r.extents is None
                 for n, r in (("src", src), ("dst", dst))]
        if all(whole):
            self.check_whole_shapes(s, form, src, dst)
        if src.extents is None and dst.extents is None and \
                isinstance(a.node("src"), ast.Subscript) and isinstance(a.node("dst"), ast.Subscript):
            # two single elements (T.copy(A[i], B[j])): TileLang copies that one element
            # (its scalar-BufferLoad case, a plain store dst[j] = src[i])
            one = lambda r: N.Region(r.buffer, r.starts, tuple(N.Const(1, "int32") for _ in r.starts))  # noqa: E731
            src, dst = one(src), one(dst)
        src = self.origin_region(src, a.node("src"), dst, a.node("dst"))
        dst = self.origin_region(dst, a.node("dst"), src, a.node("src"))
        return src, dst

    def origin_region(self, r: N.Region, node, other: N.Region, other_node) -> N.Region:
        """A tile op's operand ``buf[0, 0]`` (one index a dim, all 0) of a shared, fragment or
        local buffer, the other operand's extents known: TileLang's copy legalization gives
        the element the other side's extents (right-aligned, leading dims 1), a tile from
        there; the IR's region without extents would mean the whole buffer, so it states
        them where their non-unit dims differ from the buffer's (a tile the buffer cannot
        hold is left to the lowering's shape check, as before)."""
        if not isinstance(node, ast.Subscript) or r.extents is not None or \
                not all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
            return r
        buf = self.buffer_named(r.buffer)
        if buf.scope == "global":
            return r  # (a global element is the origin of the other side's tile already)
        ext = other.extents
        if ext is None and not isinstance(other_node, ast.Subscript):
            ext = self.buffer_named(other.buffer).shape
        if ext is None or len(ext) > buf.ndim:
            return r
        ext = (N.Const(1, "int32"),) * (buf.ndim - len(ext)) + tuple(ext)
        unit = lambda shape: [d for d in shape if _const_value(d) != 1]  # noqa: E731
        if _shape_text(unit(ext)) == _shape_text(unit(buf.shape)) or any(
                _const_value(e) is not None and _const_value(d) is not None and
                _const_value(e) > _const_value(d) for e, d in zip(ext, buf.shape)):
            return r  # the whole buffer is that tile already (or it cannot hold it: as before)
        return N.Region(r.buffer, r.starts, ext)

    def stmt_transpose(self, a: _Args, s) -> list[N.Stmt]:
        """``T.transpose(src, dst)``: TileLang's tl.transpose, ``dst[..., j, i] =
        src[..., i, j]``: a T.Parallel nest over src's region (its unit dims dropped), dst
        indexed with the last two axes swapped and the others as in src (a unit dim of src
        at dst's start), the value cast to dst's dtype."""
        a.no_annotations()
        loc = self.loc(s)
        regions = []
        for name in ("src", "dst"):
            node = a.node(name)
            r = self.region(node)
            buf = self.buffer_named(r.buffer)
            if r.extents is None:
                if isinstance(node, ast.Subscript):
                    raise a.fail(name, f"{name} must be a buffer or a region of one "
                                       f"(`{buf.name}[0:64, 0:32]`), not the single element "
                                       f"`{ast.unparse(node)}`")
                r = N.Region(buf.name, r.starts, tuple(buf.shape))
            if len(r.extents) < 2:
                raise a.fail(name, f"{name} '{buf.name}' has {len(r.extents)} dim: the "
                                   "transpose swaps the last two axes")
            regions.append((r, buf))
        (src, sbuf), (dst, dbuf) = regions
        if len(src.extents) != len(dst.extents):
            raise a.fail("dst", f"'{dbuf.name}' has {len(dst.extents)} dims and '{sbuf.name}' "
                                f"{len(src.extents)}: TileLang's T.transpose takes one rank")
        rank = len(src.extents)
        swap = list(range(rank))
        swap[-2], swap[-1] = rank - 1, rank - 2
        want = [src.extents[swap[d]] for d in range(rank)]
        for d, (w, got) in enumerate(zip(want, dst.extents)):
            if isinstance(w, N.Const) and isinstance(got, N.Const) and w.value != got.value:
                shown = lambda ex: "(" + ", ".join(str(e.value) if isinstance(e, N.Const)  # noqa: E731
                                                   else "?" for e in ex) + ")"
                raise a.fail("dst", f"T.transpose({sbuf.name}, {dbuf.name}): the source region "
                                    f"{shown(src.extents)} transposed is {shown(want)}, but the "
                                    f"destination region is {shown(dst.extents)}")
        ivs = {d: N.Var(self.fresh("t"), "int32") for d, e in enumerate(src.extents)
               if not (isinstance(e, N.Const) and e.value == 1)}
        at = lambda start, v: v if isinstance(start, N.Const) and start.value == 0 \
            else N.binop("add", start, v)  # noqa: E731
        src_idx = tuple(at(src.starts[d], ivs[d]) if d in ivs else src.starts[d]
                        for d in range(rank))
        dst_idx = tuple(at(dst.starts[d], ivs[swap[d]]) if swap[d] in ivs else dst.starts[d]
                        for d in range(rank))
        value = N.Load(sbuf.name, src_idx, sbuf.dtype)
        if sbuf.dtype != dbuf.dtype:
            value = N.cast(value, dbuf.dtype)
        body: tuple = (N.Store(dbuf.name, dst_idx, value, loc=loc),)
        if not ivs:  # one element
            return list(body)
        for d in reversed(sorted(ivs)):
            body = (N.For(ivs[d], N.Const(0, "int32"), src.extents[d], "parallel", body, loc=loc),)
        return list(body)

    def stmt_fill(self, a: _Args, s) -> list[N.Stmt]:
        a.no_annotations()
        dst = self.element_as_region(self.region(a.node("buffer")), a.node("buffer"))
        buf = self.buffer_named(dst.buffer)
        if buf.scope == "global" and dst.extents is None and \
                not isinstance(a.node("buffer"), ast.Subscript):
            dst = N.Region(buf.name, dst.starts, tuple(buf.shape))  # T.fill(A, v): all of A
        value = a.value("value")
        self.check_value(a.node("value"), value)
        if not _is_ir(value) and not isinstance(value, (int, float, bool)):
            raise a.fail("value", f"cannot fill '{buf.name}' with {value!r}")
        value = N.cast(N.as_expr(value, buf.dtype), buf.dtype)
        op = self.__dict__.get("reducer_ops", {}).get(buf.name)
        if op in ("sum", "bitxor") and not (isinstance(value, N.Const) and value.value == 0):
            # every thread's copy would start from it: the total would hold it once per
            # thread (TileLang's legacy reducer shim refuses it the same way)
            raise a.fail("value", f"a legacy {op} reducer '{buf.name}' is filled with its "
                                  "identity (0) only: every thread's copy starts from the fill, "
                                  "so the total would count the value once per thread; add it "
                                  "after T.finalize_reducer (or use T.reducer_init(acc, v))")
        return [N.Fill(dst, value, loc=self.loc(s))]

    @staticmethod
    def element_as_region(r: N.Region, node) -> N.Region:
        """T.fill's / T.clear's destination ``buf[i, j]`` (one index per dim, no slice):
        TileLang's BufferLoad there is the one element (its region of extents 1), not the
        origin of a tile running to the buffer's end, as the same subscript is in
        ``T.copy``."""
        if isinstance(node, ast.Subscript) and r.extents is None:
            return N.Region(r.buffer, r.starts, tuple(N.Const(1, "int32") for _ in r.starts))
        return r

    def stmt_clear(self, a: _Args, s) -> list[N.Stmt]:
        a.no_annotations()
        node = a.node("buffer")
        ref = self.lookup(node.id, node) if isinstance(node, ast.Name) else None
        if isinstance(ref, _RegionRef):  # T.clear(region): TileLang's T.fill(region, 0)
            buf = self.buffer_named(ref.region.buffer)
            return [N.Fill(ref.region, N.cast(N.as_expr(0, buf.dtype), buf.dtype), loc=self.loc(s))]
        if isinstance(node, ast.Subscript):  # T.clear(f[0:8, 16:48]): T.fill(f[0:8, 16:48], 0)
            dst = self.element_as_region(self.region(node), node)
            buf = self.buffer_named(dst.buffer)
            return [N.Fill(dst, N.cast(N.as_expr(0, buf.dtype), buf.dtype), loc=self.loc(s))]
        buf = self.buffer_of(node)
        self.reducer_access(buf.name, node, "use")
        return [N.Clear(buf.name, loc=self.loc(s))]

    def gemm_knobs(self, a: _Args, wait: int) -> int:
        """``k_pack`` and ``wg_wait`` of a T.gemm / T.wgmma_gemm; returns the wait.  TileLang
        0.1.15's T.gemm takes them in ``annotations`` (``{"k_pack": 2, "wg_wait": 1}``:
        its GEMM op reads those keys; T.wgmma_gemm sets ``wg_wait`` -1 unless given), its
        earlier releases as keywords; given both ways they must agree.  ``wait``: the
        form's default."""
        ann = a.annotations(("k_pack", "wg_wait"), _GEMM_ANNOTATIONS_REFUSED)
        knobs = {}
        for key, default in (("k_pack", 1), ("wg_wait", wait)):
            kw = a.static_int(key) if a.given(key) else None
            v = ann.get(key)
            if isinstance(v, N.Expr):
                f = self.folded(v)
                v = f.value if isinstance(f, N.Const) and N.is_int(f.dtype) and f.dtype != "bool" else v
            if v is not None and not (isinstance(v, int) and not isinstance(v, bool)):
                raise a.fail("annotations", f"annotations={{{key!r}: {_show(v)}}}: {key} is an "
                                            "int known at parse time")
            if v is not None and kw is not None and v != kw:
                raise a.fail("annotations", f"annotations={{{key!r}: {v}}} and {key}={kw} "
                                            "disagree")
            knobs[key] = v if v is not None else kw if kw is not None else default
        # k_pack packs K for AMD's MFMA: TileLang checks it is 1 or 2 and reads it there
        # only, so on NVIDIA's wgmma and mma.sync (tilecute's targets) either is the same GEMM
        if knobs["k_pack"] not in (1, 2):
            where = "k_pack" if a.given("k_pack") and "k_pack" not in ann else "annotations"
            raise a.fail(where, f"k_pack={knobs['k_pack']}; TileLang's T.gemm takes 1 or 2 "
                                "(its MFMA packing, for AMD only)")
        # on wgmma, wgmma.wait_group(wg_wait) after the issue (at most wg_wait batches left
        # in flight), no wait at all for a negative one; elsewhere (mma.sync) the GEMM
        # completes in the statement and wg_wait is unread
        if knobs["wg_wait"] < N.NO_WAIT:
            where = "wg_wait" if a.given("wg_wait") and "wg_wait" not in ann else "annotations"
            raise a.fail(where, f"wg_wait={knobs['wg_wait']}: a count of wgmma batches left in "
                                f"flight (>= 0), or {N.NO_WAIT} for no wait")
        return knobs["wg_wait"]

    def stmt_gemm(self, a: _Args, s) -> list[N.Stmt]:
        a.refuse_unless("mbar", (None,), "tilecute's T.gemm completes (or, with wg_wait=1, "
                                         "leaves one wgmma batch in flight) without an mbarrier")
        return [self.gemm(a, s, self.gemm_knobs(a, 0))]

    def stmt_gemm_sp(self, a: _Args, s) -> list[N.Stmt]:
        """TileLang's ``T.gemm_sp``: ``A`` decompressed from ``A_sparse`` and its metadata
        ``E`` into a dense shared tile (``<A_sparse>_dense``, (M, K), allocated once per
        block), then ``T.gemm`` of that tile with ``B`` into ``C`` (tilecute has no sparse
        MMA: the same product on dense tensor cores).  8- and 16-bit values are 2:4 sparse:
        group ``g`` of a row (K elements ``4g .. 4g + 3``) holds ``A_sparse[.., 2g]`` at the
        position in bits 0-1 of field ``g`` of its metadata and ``A_sparse[.., 2g + 1]`` at
        bits 2-3, the others 0.  float32 (TileLang's tf32 ``mma.sp``) is 1:2 sparse: group
        ``g`` (K elements ``2g, 2g + 1``) holds ``A_sparse[.., g]`` at position ``(field & 3)
        >> 1`` (the field names the pair of 16-bit halves the value fills: 0b0100 the
        first element, 0b1110 the second), the other 0.  Field ``g`` is bits ``4 (g % f) ..``
        of ``E[.., g // f]``, ``f`` the fields per ``E`` element (TileLang's ``compress`` and
        ``get_e_factor``)."""
        loc = self.loc(s)
        sparse, meta = (self.buffer_of(a.node(n)) for n in ("A_sparse", "E"))
        for name, buf in (("A_sparse", sparse), ("E", meta)):
            if buf.scope not in ("shared", "fragment") or len(buf.shape) != 2 or \
                    not all(isinstance(d, N.Const) for d in buf.shape):
                raise a.fail(name, f"'{buf.name}' must be a 2-D shared or fragment buffer of "
                                   f"constant shape (a tile the program copied in), got a "
                                   f"{buf.scope} buffer of shape "
                                   f"{tuple(_show(d) for d in buf.shape)}")
        if sparse.dtype not in ("float32", "float16", "bfloat16", "int8", "uint8",
                                "float8_e4m3", "float8_e5m2"):
            raise a.fail("A_sparse", f"'{sparse.name}' is {sparse.dtype}: T.gemm_sp takes 2:4 "
                                     "sparsity of 8- and 16-bit values and 1:2 of float32")
        if meta.dtype not in ("int8", "uint8", "int16", "uint16", "int32", "uint32"):
            raise a.fail("E", f"'{meta.name}' is {meta.dtype}: the metadata is an integer "
                              "dtype of 8, 16 or 32 bits")
        a.no_annotations()
        ta, te = a.static_bool("transpose_A"), a.static_bool("transpose_E")
        rows, half = (int(d.value) for d in sparse.shape)
        M, half = (half, rows) if ta else (rows, half)
        K = 2 * half
        group = 2 if sparse.dtype == "float32" else 4  # TileLang's GROUP_CONFIG: 1:2 or 2:4
        fields = DTYPES[meta.dtype].bits // 4  # groups per metadata element
        want = (K // (group * fields), M) if te else (M, K // (group * fields))
        if K % (group * fields) or tuple(int(d.value) for d in meta.shape) != want:
            raise a.fail("E", f"'{meta.name}' has shape {tuple(int(d.value) for d in meta.shape)};"
                              f" {M} rows of K = {K} ({K // group} groups of {group}, {fields} "
                              f"per {meta.dtype}) need {want}" + (" (transpose_E)" if te else ""))
        i32 = "int32"
        dense = N.Buffer(self.fresh(f"{sparse.name}_dense"), sparse.dtype,
                         (N.Const(M, i32), N.Const(K, i32)), "shared")
        i, g = N.Var(self.fresh("sp_i"), i32), N.Var(self.fresh("sp_g"), i32)

        def c(v):
            return N.Const(v, i32)

        def at(buf, row, col, transposed):
            return N.Load(buf.name, (col, row) if transposed else (row, col), buf.dtype)

        def let(name, value):
            var = N.Var(self.fresh(name), value.dtype)
            return var, N.Let(var, value, loc=loc)

        word = N.cast(at(meta, i, N.binop("floordiv", g, c(fields)), te), i32)
        field, field_let = let("sp_field", N.binop("bitand", N.binop("shr", word, N.binop(
            "mul", c(4), N.binop("mod", g, c(fields)))), c(15)))
        zero = N.Const(0, sparse.dtype)
        # the first kept value's position in its group: bits 0-1 of the field, or for 1:2
        # float32 the 16-bit half pair they name (0: the first element, 2: the second)
        pos0 = N.binop("bitand", field, c(3))
        if group == 2:
            pos0 = N.binop("shr", pos0, c(1))

        def place(p, value, rest):  # dense[i, group * g + p]
            return N.Store(dense.name, (i, N.binop("add", N.binop("mul", c(group), g), c(p))),
                           N.Select(N.Cmp("eq", pos0, c(p)), value, rest, sparse.dtype), loc=loc)

        if group == 2:
            only, only_let = let("sp_value", at(sparse, i, g, ta))
            stores = (field_let, only_let) + tuple(place(p, only, zero) for p in range(2))
        else:
            first, first_let = let("sp_first", at(sparse, i, N.binop("mul", c(2), g), ta))
            second, second_let = let("sp_second", at(sparse, i, N.binop(
                "add", N.binop("mul", c(2), g), c(1)), ta))
            pos1 = N.binop("shr", field, c(2))
            stores = (field_let, first_let, second_let) + tuple(
                place(p, first, N.Select(N.Cmp("eq", pos1, c(p)), second, zero, sparse.dtype))
                for p in range(4))
        nest = N.For(i, c(0), c(M), "parallel",
                     (N.For(g, c(0), c(K // group), "parallel", stores, loc=loc),), loc=loc)
        ref = self.fresh(f"{sparse.name}_dense_ref")
        self.bind(ref, _BufferRef(dense))
        keep = [n for n in ("transpose_B", "policy", "clear_accum", "k_pack", "wg_wait")
                if a.given(n)]
        call = ast.copy_location(ast.Call(
            func=a.call.func, args=[ast.Name(id=ref, ctx=ast.Load()), a.node("B"), a.node("C")],
            keywords=[ast.keyword(arg=n, value=a.node(n)) for n in keep]), a.call)
        gemm_args = _Args(self, "gemm_sp", F.FORMS["gemm"].signature, call)
        return [N.Allocate(dense, loc=loc), nest] + self.stmt_gemm(gemm_args, s)

    def stmt_wgmma_gemm(self, a: _Args, s) -> list[N.Stmt]:
        """TileLang's explicit Hopper GEMM: wgmma only, no wait (``Gemm.wg_wait`` NO_WAIT;
        the gemm pass refuses it where wgmma cannot run it)."""
        wait = self.gemm_knobs(a, N.NO_WAIT)
        gemm = dataclasses.replace(self.gemm(a, s, N.NO_WAIT), wgmma_only=True)
        # annotations={"wg_wait": n}: TileLang's wgmma.wait_group(n) right after the issue,
        # which is T.wait_wgmma(n) as the next statement
        return [gemm] + ([N.WaitWgmma(wait, loc=self.loc(s))] if wait != N.NO_WAIT else [])

    def gemm(self, a: _Args, s, wait: int) -> N.Gemm:
        (A, a_index, a_part), (B, b_index, b_part), (C, _, _) = \
            (self.gemm_operand(a, x) for x in ("A", "B", "C"))
        policy = a.value("policy")
        if policy not in tuple(GemmWarpPolicy) or isinstance(policy, bool):
            raise a.fail("policy", f"policy={_show(policy)}: expected a T.GemmWarpPolicy "
                                   "(Square, FullRow, FullCol)")
        clear = a.value("clear_accum")  # (TileLang's PrimExpr: clear_accum=(k == 0) too)
        if _is_ir(clear):
            if clear.dtype != "bool":
                raise a.fail("clear_accum", f"clear_accum={_show(clear)} is {clear.dtype}; "
                                            "expected a bool (True, False or a condition)")
        else:
            clear = a.static_bool("clear_accum")
        return N.Gemm(A, B, C, a.static_bool("transpose_A"), a.static_bool("transpose_B"),
                      clear, wait, loc=self.loc(s),
                      policy=GemmWarpPolicy(policy).name, a_index=a_index, b_index=b_index,
                      a_part=a_part, b_part=b_part)

    def gemm_operand(self, a: _Args, x: str) -> tuple[str, tuple[N.Expr, ...], tuple]:
        """T.gemm's operand ``x`` as ``(buffer, leading indices, part)``: a whole buffer
        (``A_s``, ``A_s[:, :]``, ``A_s[0:M, 0:K]``), or for A and B one matrix of a shared
        buffer of more dims (TileLang's ``A_s[s, :, :]``: scalar leading indices; also
        through a region alias ``A_t = A_s[s, :, :]``) or a part of a shared matrix
        (``Q_s[:, 0:256]``, ``KV_s[s, :, 256:512]``: ranges of its last two dims of constant
        extents, ``Gemm.a_part``; the gemm pass checks where they may start and end)."""
        node = a.node(x)
        ref = None
        if isinstance(node, ast.Subscript):
            ref = self.expr(node.value) if not isinstance(node.value, ast.Name) \
                else self.lookup(node.value.id, node.value)
        elif isinstance(node, ast.Name):
            ref = self.lookup(node.id, node)
        if isinstance(ref, _RegionRef):  # an alias of a region: its starts and extents
            r, buf = ref.region, self.buffer_named(ref.region.buffer)
            dims = [(st, None if r.extents is None else ext)
                    for st, ext in zip(r.starts, r.extents or r.starts)]
            idx = [st if ext is not None and _const_value(ext) == 1 and i < buf.ndim - 2
                   else slice(st, None if ext is None else N.binop("add", st, ext))
                   for i, (st, ext) in enumerate(dims)]
            text = f"{ast.unparse(node)} (= {ref.line})"
        elif isinstance(ref, _BufferRef) and isinstance(node, ast.Subscript):
            buf, idx, text = ref.buffer, self.indices(node), ast.unparse(node)
        else:
            return self.buffer_of(node).name, (), ()

        def full(i, d) -> bool:
            return isinstance(i, slice) and (i.start is None or _const_value(i.start) == 0) \
                and (i.stop is None or i.stop == d
                     or (_const_value(d) is not None and _const_value(i.stop) == _const_value(d)))
        if len(idx) == buf.ndim and all(full(i, d) for i, d in zip(idx, buf.shape)):
            return buf.name, (), ()  # A_s[:, :], A_s[0:M, 0:K]: the buffer itself
        if x == "C":
            raise a.fail(x, f"C={text} is a region of '{buf.name}'; T.gemm accumulates into a "
                            "whole 2-D fragment")
        if buf.scope != "shared":
            raise a.fail(x, f"{x}={text} is a region of {buf.scope} buffer '{buf.name}'; T.gemm "
                            "takes one matrix of a shared buffer (A_s[s, :, :]), a part of a "
                            "shared matrix (A_s[:, 0:64]) or a whole buffer")
        if len(idx) != buf.ndim:
            raise a.fail(x, f"{x}={text} indexes {len(idx)} of the {buf.ndim} dims of "
                            f"'{buf.name}'; T.gemm takes its operands indexed in every dim")
        lead, last = idx[:-2], idx[-2:]
        if any(isinstance(i, slice) for i in lead):
            raise a.fail(x, f"{x}={text}: T.gemm takes one matrix of '{buf.name}'; its leading "
                            f"dims ({buf.ndim - 2}) take single indices, not ranges")
        part = []
        for i, d in zip(last, buf.shape[-2:]):
            if not isinstance(i, slice):
                raise a.fail(x, f"{x}={text}: the last two dims of '{buf.name}' are the "
                                "matrix's rows and columns; T.gemm takes ranges of them, not "
                                "single indices")
            start = N.as_expr(0) if i.start is None else i.start
            stop = d if i.stop is None else i.stop
            form = linear_form(N.binop("sub", stop, start))
            extent = form.get(None, 0) if form is not None and not any(
                c for v, c in form.items() if v is not None) else None
            if extent is None or extent <= 0:
                raise a.fail(x, f"{x}={text}: a range of '{buf.name}' T.gemm reads has a "
                                f"constant positive extent; {ast.unparse(node)} has "
                                f"`{expr_str(N.binop('sub', stop, start))}`")
            part.append((start, extent))
        whole = all(full(i, d) for i, d in zip(last, buf.shape[-2:]))
        return buf.name, tuple(lead), () if whole else tuple(part)

    def stmt_reduce(self, a: _Args, s) -> list[N.Stmt]:
        kind = a.value("reduce_type")
        if kind not in N.REDUCE_KINDS:
            raise a.fail("reduce_type", f"reduce_type={kind!r} is not supported; tilecute "
                                        f"reduces with {', '.join(N.REDUCE_KINDS)}")
        return [self.reduce(a, kind, s)]

    def reduce(self, a: _Args, kind: str, s) -> N.Stmt:
        what = f"T.reduce_{kind}" if a.name != "reduce" else "T.reduce"
        if kind not in N.REDUCE_KINDS:
            raise self.error(s, f"{what} is not supported: tilecute's Reduce has the kinds "
                                f"{', '.join(N.REDUCE_KINDS)}")
        src, dst = (self.reduce_operand(a, arg, what) for arg in ("buffer", "out"))
        if kind in N.BITWISE_REDUCE_KINDS and not N.bitwise_reduce_takes(kind, src.dtype):
            raise a.fail("buffer", f"'{src.name}' is {src.dtype}; bitwise reductions take "
                                   f"integers{', and bool for bitor / bitxor' if kind == 'bitand' else ' or bool'}")
        dim = a.static_int("dim")
        if dim < -src.ndim:
            raise a.fail("dim", f"dim={dim} is out of range for '{src.name}', which has "
                                f"{src.ndim} dims")
        if dim < 0:  # counts from the last axis, as in TileLang
            dim += src.ndim
        self.batch_hint(a)
        nan, nan_arg = False, "nan_propagate"
        if "nan_propagate" in a.sig.parameters:
            nan = a.static_bool("nan_propagate")
        annotations = a.value("annotations")
        if isinstance(annotations, dict) and annotations and \
                set(annotations) <= {"enable_fadd2", "nan_propagate"}:
            # TileLang's switch for packed FP32x2 adds (SM100+ sum/abssum): tilecute's
            # reductions add one value at a time on every target, so either value is honored
            if not isinstance(annotations.get("enable_fadd2", True), (bool, int)):
                raise a.fail("annotations", f"annotations={_show(annotations)}: enable_fadd2 "
                                            "must be a boolean")
            if "nan_propagate" in annotations:  # TileLang 0.1.15's carrier; it wins
                if not isinstance(annotations["nan_propagate"], (bool, int)):
                    raise a.fail("annotations", f"annotations={_show(annotations)}: "
                                                "nan_propagate must be a boolean")
                nan, nan_arg = bool(annotations["nan_propagate"]), "annotations"
        else:
            a.no_annotations()
        # TileLang's nan_propagate (HEAD takes any out dtype; 0.1.15 refused all but 16-bit
        # ones): max/min/absmax combine NaN-propagating (a NaN element makes its row's
        # result NaN) into every float out (float16/bfloat16 as __hmax_nan, float32 as
        # max.NaN.f32, where HEAD's code still calls fmaxf; float64 by compares); an integer
        # out has no NaN to propagate, and other kinds ignore it
        nan = nan and kind in ("max", "min", "absmax") and N.is_float(dst.dtype)
        scratch = ""
        if "scratch" in a.sig.parameters and a.value("scratch") is not None:
            scratch = self.buffer_of(a.node("scratch")).name
        return N.Reduce(kind, src.name, dst.name, dim, a.static_bool("clear"),
                        scratch, nan_propagate=nan, loc=self.loc(s))

    def reduce_operand(self, a: _Args, arg: str, what: str) -> N.Buffer:
        """A T.reduce_* operand: a buffer, or a slice of all of one (``x[0:64]``).  A part
        of a buffer is refused: TileLang 0.1.15 reduces over / into the part's whole buffer
        from its start, the part's offset dropped (``T.reduce_sum(x, part[1:2])`` writes
        ``part[0]``)."""
        node = a.node(arg)
        if isinstance(node, ast.Subscript) and any(
                isinstance(x, ast.Slice) for x in ast.walk(node.slice)):
            r = self.region(node)
            buf = self.buffer_named(r.buffer)
            if not _whole_region(r, buf):
                raise a.fail(arg, f"{arg}={ast.unparse(node)} is a part of '{r.buffer}': "
                                  f"{what} takes whole buffers (TileLang reduces over the "
                                  "buffer from its start, not the part); use a buffer of the "
                                  "part's shape and T.copy it")
            return buf
        return self.buffer_of(node)

    def batch_hint(self, a: _Args, total: int | None = None) -> None:
        """TileLang's ``batch=`` of ``T.reduce_*`` / ``T.finalize_reducer``: how many
        output elements one block-wide all-reduce step covers (one barrier pair per
        ``batch`` elements).  A performance hint: tilecute's cross-warp step already
        exchanges every element of the reduction through one barrier pair, so any valid
        ``batch`` gives the same code and results.  Validated as TileLang does: an int
        >= 1; with ``total`` (the per-thread element count, known at parse time for a
        replicated reducer) at most ``total`` and dividing it."""
        if not a.given("batch"):
            return
        b = a.value("batch")
        if isinstance(b, bool) or not isinstance(b, int):
            raise a.fail("batch", f"batch={_show(b)}: batch is an int >= 1")
        if b < 1:
            raise a.fail("batch", f"batch must be >= 1, got {b}", FrontendValueError)
        if total is not None and b > 1:
            if b > total:
                raise a.fail("batch", f"batch ({b}) exceeds total output elements ({total})")
            if total % b:
                raise a.fail("batch", f"batch ({b}) must evenly divide total output elements "
                                      f"({total})")

    def stmt_atomic_max(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_atomic_add(a, s, "max")

    def stmt_atomic_min(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_atomic_add(a, s, "min")

    @staticmethod
    def memory_order(a: _Args) -> str:
        """An atomic's ``memory_order`` argument: TileLang's name (None: relaxed, its id 0)."""
        order = a.value("memory_order")
        if order is None:
            return "relaxed"
        if order not in N.MEMORY_ORDERS:  # (TileLang's map lookup fails on it)
            raise a.fail("memory_order", f"memory_order={_show(order)} is not a memory order; "
                                         f"expected one of {', '.join(N.MEMORY_ORDERS)}")
        return order

    def check_whole_shapes(self, s, form: str, first: N.Region, second: N.Region) -> None:
        """Two whole buffers named bare (``T.copy(s, f)``, ``T.atomic_add(B, f)``): TileLang
        asserts their shapes are one (``assert_structural_equal``); a FrontendError naming
        both shapes, never a tile of the smaller one."""
        shapes = [self.buffer_named(r.buffer).shape for r in (first, second)]
        if _shape_text(shapes[0]) != _shape_text(shapes[1]):
            raise self.error(s, f"{form}({first.buffer}, {second.buffer}): '{first.buffer}' has shape "
                                f"{_shape_text(shapes[0])} and '{second.buffer}' "
                                f"{_shape_text(shapes[1])}; two whole buffers must have one "
                                "shape (TileLang asserts it): name a region of one "
                                "(A[0:64, 0:64]) or the element its tile starts at (A[i, j])")

    def stmt_atomic_add(self, a: _Args, s, op: str = "add") -> list[N.Stmt]:
        """``T.atomic_add/max/min(dst, value, memory_order)``: an element, or a tile
        (regions); TileLang's memory order on each element's update (None: relaxed)."""
        order = self.memory_order(a)
        a.no_annotations()
        v = a.node("value")
        if not isinstance(a.node("dst"), ast.Subscript) and not isinstance(v, ast.Subscript) \
                and isinstance(a.value("value"), _BufferRef):
            whole = [self.region(a.node("dst")), self.region(v)]
            if all(r.extents is None for r in whole):
                self.check_whole_shapes(s, f"T.atomic_{op}", *whole)
        if "use_tma" in a.sig.parameters and a.static_bool("use_tma"):
            element = isinstance(a.node("dst"), ast.Subscript) and not any(
                isinstance(i, slice) for i in self.indices(a.node("dst"))) and not (
                isinstance(v, ast.Subscript) and any(isinstance(i, slice) for i in self.indices(v))
                or isinstance(a.value("value"), (_BufferRef, _RegionRef)))
            if not element:  # (one element and one value: TileLang ignores use_tma there)
                return [self.tma_atomic_add(a, s, order)]
        # return_prev=True as a statement: the old value is unused, the update is the same
        prev = a.static_bool("return_prev")
        dst = self.region(a.node("dst"))
        if isinstance(v, ast.Subscript) and any(isinstance(i, slice) for i in self.indices(v)):
            value = self.region(v)  # a tile: T.atomic_add(C[0:2], x[0:2])
            dst = self.origin_region(dst, a.node("dst"), value, v)
        elif isinstance(a.value("value"), (_BufferRef, _RegionRef)):
            value = self.region(v)
            dst = self.origin_region(dst, a.node("dst"), value, v)
        else:
            value = a.value("value")
            buf = self.buffer_named(dst.buffer)
            value = N.as_expr(value, buf.dtype)
            dst = self.atomic_scalar_dst(a, dst, buf)
            value = N.cast(value, buf.dtype)
        if prev and (isinstance(value, N.Region) or dst.extents is not None):
            raise a.fail("return_prev", "return_prev=True is not supported for tile-region-based "
                                        "atomic operations (TileLang's NotImplementedError): it "
                                        "returns the old value of one element (`x[i]`)")
        return [N.AtomicAdd(dst, value, loc=self.loc(s), op=op, order=order)]

    def atomic_scalar_dst(self, a: _Args, dst: N.Region, buf: N.Buffer) -> N.Region:
        """The destination of ``T.atomic_<op>(dst, value)`` with one value.  An element
        ``x[i]`` (TileLang's element atomic, every thread that runs it updating it): a
        ``Region`` without extents.  A slice or a whole buffer named bare (TileLang's tile
        atomic with a ``src_value``): that region with its extents, even all 1 (``C`` of
        shape (1,), ``A[0:1]``): the lowering makes it a parallel nest over the region, so
        the one value (or element ``x[i]``) goes into each element once per block, not once
        per thread."""
        if dst.extents is None and not isinstance(a.node("dst"), ast.Subscript):
            dst = N.Region(dst.buffer, dst.starts, tuple(buf.shape))  # the whole buffer
        return dst

    def tma_atomic_add(self, a: _Args, s, order: str) -> N.Stmt:
        """``T.atomic_add(G[region], s_tile, use_tma=True)``: TileLang's TMA reduce-store.
        One thread adds the shared tile into the global region with one
        ``cp.reduce.async.bulk.tensor .add`` (each element's addition atomic, relaxed at
        device scope; elements outside the tensor are skipped) after the block's shared
        writes are fenced for TMA and a block barrier, and waits until TMA has read the tile
        (as a TMA store: ``TmaCopy(reduce="add")``).  The box is the global region's
        extents (a whole tensor: its shape; an element origin: the tile's); the descriptor
        pass refuses what one box cannot move, and targets without TMA."""
        if order != "relaxed":
            raise a.fail("memory_order", f"memory_order={order!r} with use_tma=True is not "
                                         "supported: a TMA reduce-store adds each element "
                                         "relaxed at device scope (TileLang drops the order "
                                         "on this path; tilecute refuses it instead)")
        if a.static_bool("return_prev"):
            raise a.fail("return_prev", "return_prev=True with use_tma=True: a TMA reduce-store "
                                        "returns nothing (TileLang: not implemented for tiles)")
        v = a.node("value")
        if not (isinstance(v, ast.Subscript) and any(isinstance(i, slice) for i in self.indices(v))
                or isinstance(a.value("value"), (_BufferRef, _RegionRef))):
            raise a.fail("value", f"use_tma=True adds a shared tile (a shared buffer or a region "
                                  f"of one) into the global region; got `{ast.unparse(v)}`")
        src, dst = self.region(v), self.region(a.node("dst"))
        sbuf, gbuf = self.buffer_named(src.buffer), self.buffer_named(dst.buffer)
        if sbuf.scope != "shared":
            raise a.fail("value", f"use_tma=True: '{sbuf.name}' is a {sbuf.scope} buffer; TMA "
                                  "reads the tile it adds from shared memory (copy it into a "
                                  "T.alloc_shared buffer first)")
        if gbuf.scope != "global":
            raise a.fail("dst", f"use_tma=True: '{gbuf.name}' is a {gbuf.scope} buffer; a TMA "
                                "reduce-store adds into a global tensor")
        if sbuf.dtype != gbuf.dtype:
            raise a.fail("value", f"use_tma=True: '{sbuf.name}' is {sbuf.dtype} and "
                                  f"'{gbuf.name}' {gbuf.dtype}; a TMA reduce-store adds "
                                  "matching dtypes (it does not convert)")
        if gbuf.dtype not in TMA_REDUCE_ADD_TYPES:
            raise a.fail("dst", f"use_tma=True: '{gbuf.name}' is {gbuf.dtype}; a TMA "
                                f"reduce-store adds {', '.join(TMA_REDUCE_ADD_TYPES)}")
        if dst.extents is None and not isinstance(a.node("dst"), ast.Subscript):
            dst = N.Region(dst.buffer, dst.starts, tuple(gbuf.shape))  # the whole tensor
        return N.TmaCopy(src, dst, loc=self.loc(s), reduce="add")

    def atomic_return(self, fn: F.Form, node: ast.Call) -> N.Expr:
        """``old = T.atomic_add(x[i], v, return_prev=True)`` (also ``atomic_max/min``):
        TileLang's atomic that returns the element's value before the update, an
        ``atomic_<op>_ret`` intrinsic call on one element of a global tensor or a shared
        buffer."""
        op = fn.__name__[len("atomic_"):]
        a = self.args(fn, node)
        if not (a.given("return_prev") and a.static_bool("return_prev")):
            raise a.fail("return_prev", "returns a value only with return_prev=True; without "
                                        "it, it is a statement")
        order = self.memory_order(a)
        if "use_tma" in a.sig.parameters:
            a.static_bool("use_tma")  # one element: TileLang's element atomic ignores it
        a.no_annotations()
        dst_node = a.node("dst")
        if not isinstance(dst_node, ast.Subscript) or \
                any(isinstance(i, slice) for i in self.indices(dst_node)):
            raise a.fail("dst", "return_prev=True takes one element (`x[i]`), got "
                                f"`{ast.unparse(dst_node)}`")
        dst = self.expr(dst_node)
        buf = self.buffer_named(dst.buffer)
        if buf.scope not in ("global", "shared"):
            raise a.fail("dst", f"return_prev=True: '{buf.name}' is a {buf.scope} buffer; "
                                "tilecute returns the old value of an element of a global "
                                "tensor or a shared buffer only")
        if buf.dtype not in N.ATOMIC_RETURN_DTYPES[op]:
            raise a.fail("dst", f"return_prev=True: '{buf.name}' is {buf.dtype}; T.atomic_{op} "
                                f"returns the old value of "
                                f"{', '.join(N.ATOMIC_RETURN_DTYPES[op])} elements")
        value = a.value("value")
        if isinstance(value, (_BufferRef, _RegionRef)) or not isinstance(
                value, (int, float, bool, N.Expr)):
            raise a.fail("value", f"value must be one value, got `{ast.unparse(a.node('value'))}`")
        value = N.cast(value, buf.dtype) if isinstance(value, N.Expr) else N.const(value, buf.dtype)
        return N.Call(f"atomic_{op}_ret",
                      (dst, value, N.Const(N.MEMORY_ORDERS.index(order), "int32")), buf.dtype)

    def stmt_atomic_store(self, a: _Args, s, op: str = "store") -> list[N.Stmt]:
        """``T.atomic_store(dst, src, memory_order)`` / ``T.atomic_or(dst, value,
        memory_order)``: one element of a global tensor or a shared buffer (a flag another
        warp spins on), written atomically at device scope with TileLang's memory order."""
        name = f"T.atomic_{op}"
        order = a.value("memory_order")
        orders = N.ATOMIC_STORE_ORDERS if op == "store" else N.MEMORY_ORDERS
        if op == "or" and order is None:
            order = "relaxed"  # TileLang's id 0
        if order not in orders:
            if op == "store":  # TileLang's ValueError (its _get_memory_order_id)
                raise a.fail("memory_order", f"{name} does not support memory_order={order!r}; "
                                             f"expected one of {sorted(orders)}", FrontendValueError)
            raise a.fail("memory_order", f"memory_order={order!r} is not supported; "
                                         f"expected one of {sorted(orders)}")
        node = a.node("dst")
        if not isinstance(node, ast.Subscript) or any(isinstance(i, slice) for i in self.indices(node)):
            raise a.fail("dst", f"dst must be one element (`flag[i]`), got `{ast.unparse(node)}`")
        dst = self.region(node)
        buf = self.buffer_named(dst.buffer)
        if buf.scope not in ("global", "shared"):
            raise a.fail("dst", f"'{buf.name}' is a {buf.scope} buffer; tilecute's {name} "
                                "writes an element of a global tensor or a shared buffer")
        ints = ("int32", "uint32", "int64", "uint64")
        if op == "or" and buf.dtype not in ints or DTYPES[buf.dtype].bits not in (32, 64) \
                or buf.dtype == "bool":
            raise a.fail("dst", f"'{buf.name}' is {buf.dtype}; {name} writes "
                                + ("a 32- or 64-bit integer" if op == "or" else "32 or 64 bits"))
        vname = "src" if op == "store" else "value"
        value = a.value(vname)
        if isinstance(value, (_BufferRef, _RegionRef)) or not isinstance(
                value, (int, float, bool, N.Expr)):
            raise a.fail(vname, f"{vname} must be one value, got `{ast.unparse(a.node(vname))}`")
        if op == "or" and isinstance(value, N.Expr) and not N.is_int(value.dtype):
            raise a.fail(vname, f"{vname} must be an integer, got a {value.dtype}")
        value = N.cast(N.as_expr(value, buf.dtype), buf.dtype)
        return [N.AtomicAdd(dst, value, loc=self.loc(s), op=op, order=order)]

    def stmt_atomic_or(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_atomic_store(a, s, "or")

    def stmt_dp4a(self, a: _Args, s) -> list[N.Stmt]:
        """``T.dp4a(A, B, C)``: ``C += A[0..3] . B[0..3]``, 4 signed int8 pairs from each
        element (or buffer: its first) on along the last dim, into the int32 element C,
        as one Store (TileLang's ``DP4A``: CUDA's ``__dp4a`` on the 4 bytes at each
        address; int32 arithmetic wraps as it does)."""
        want = {"A": "int8", "B": "int8", "C": "int32"}
        regions = {}
        for name, dtype in want.items():
            node = a.node(name)
            if isinstance(node, ast.Subscript) and any(isinstance(i, slice) for i in self.indices(node)):
                raise a.fail(name, f"{name} must be an element or a buffer (its first element), got "
                                   f"`{ast.unparse(node)}`")
            r = self.region(node)
            buf = self.buffer_named(r.buffer)
            if buf.dtype != dtype:
                raise a.fail(name, f"requires {'an int32 accumulator' if name == 'C' else 'int8 inputs'}"
                                   f", got {name}.dtype='{buf.dtype}'")
            last = buf.shape[-1]
            if name != "C" and not (isinstance(last, N.Const) and last.value % 4 == 0):
                raise a.fail(name, f"'{buf.name}' has a last dim of {expr_str(last)}; T.dp4a reads 4 "
                                   "bytes at a 4-byte aligned address, which stay in one row only where "
                                   "the last dim is a constant multiple of 4")
            regions[name] = r
        c = regions["C"]
        acc: N.Expr = N.Load(c.buffer, c.starts, "int32")
        for k in range(4):
            x, y = (N.Load(regions[n].buffer, regions[n].starts[:-1] +
                           (N.binop("add", regions[n].starts[-1], k) if k else regions[n].starts[-1],),
                           "int8") for n in ("A", "B"))
            acc = N.binop("add", acc, N.binop("mul", N.cast(x, "int32"), N.cast(y, "int32")))
        return [N.Store(c.buffer, c.starts, acc, loc=self.loc(s))]

    def stmt_let(self, a: _Args, s) -> list[N.Stmt]:
        a.refuse_unless("body", (None,), "T.let(v, value, body) is TVM's deprecated Let "
                                         "expression; write T.let(v, value) and use v")
        node = a.node("v")
        if not isinstance(node, ast.Name) or not isinstance(self.lookup(node.id, node), N.Var):
            raise a.fail("v", "T.let binds a name declared as a scalar variable "
                                "(`x = T.int32()`), got `" + ast.unparse(node) + "`")
        v = a.value("value")
        if isinstance(v, (int, float, bool)) and not isinstance(v, N.Expr):
            v = N.as_expr(v)
        if not _is_ir(v):
            raise a.fail("value", f"T.let: cannot bind '{node.id}' to {v!r}")
        current = self.lookup(node.id, node)
        if current.name in self.declared:  # its first value: the declared name and dtype
            self.declared.discard(current.name)
            var, v = current, N.cast(v, current.dtype) if v.dtype != current.dtype else v
        else:
            var = N.Var(self.fresh(node.id), v.dtype)
        self.bind(node.id, var)
        self.let_values[var.name] = v
        return [N.Let(var, v, loc=self.loc(s))]

    def stmt_pdl_sync(self, a: _Args, s) -> list[N.Stmt]:
        return [N.Evaluate(N.Call("pdl_sync", (), "int32"), loc=self.loc(s))]

    def stmt_ptx_cp_async(self, a: _Args, s) -> list[N.Stmt]:
        """``T.ptx_cp_async(dst, src, num_elems)`` with ``dst`` / ``src`` TileLang's
        ``T.access_ptr(buffer[indices], access_type, *extents)`` of one shared and one global
        element: an Evaluate of the intrinsic ``ptx_cp_async(dst element, src element,
        num_elems)`` (the elements as Loads, whose addresses codegen takes)."""
        if not self.in_kernel:
            raise self.error(s, "T.ptx_cp_async is only valid inside a T.Kernel")
        a.refuse_unless("predicate", (None,), "tilecute's cp.async has no predicate (TileLang "
                                              "zero-fills the destination where it is false); "
                                              "guard the call with an `if` instead")
        dst = self.access_ptr(a, "dst_access_ptr")
        src = self.access_ptr(a, "src_access_ptr")
        n = a.value("num_elems")
        if isinstance(n, bool) or not isinstance(n, int):
            raise a.fail("num_elems", f"num_elems must be an int known at parse time; got {_show(n)}")
        for ptr, name, scope in ((dst, "dst_access_ptr", "shared"), (src, "src_access_ptr", "global")):
            buf = self.buffer_named(ptr.buffer)
            if buf.scope != scope:
                raise a.fail(name, f"'{buf.name}' is {buf.scope}; cp.async copies from a global "
                                   "tensor (src) into a shared buffer (dst)")
        sb, gb = self.buffer_named(dst.buffer), self.buffer_named(src.buffer)
        if sb.dtype != gb.dtype:
            raise a.fail("src_access_ptr", f"'{gb.name}' is {gb.dtype} and '{sb.name}' {sb.dtype}: "
                                           "cp.async copies bytes between elements of one dtype")
        nbytes = n * DTYPES[sb.dtype].bytes
        call = N.Call("ptx_cp_async", (dst, src, N.Const(n, "int32")), "int32")
        if nbytes not in cp_async_lanes.CP_ASYNC_BYTES:
            if self.vectorized_loops:  # (the loop widens it, or refuses it: widen_cp_async)
                return [N.Evaluate(call, loc=self.loc(s))]
            raise a.fail("num_elems", f"{n} {sb.dtype} elements are {nbytes} bytes; cp.async "
                                      "copies 4, 8 or 16")
        for ptr, name in ((dst, "dst_access_ptr"), (src, "src_access_ptr")):
            misaligned = self.cp_async_misaligned(ptr, nbytes)
            if misaligned:
                raise a.fail(name, f"`{ast.unparse(a.node(name))}` {misaligned}")
        return [N.Evaluate(call, loc=self.loc(s))]

    def cp_async_misaligned(self, ptr: N.Load, nbytes: int) -> str:
        """cp.async of nbytes reads and writes nbytes-aligned addresses (the code assumes
        so): why the element ``ptr`` at a known offset is not ("" when it is, or its
        offset is not known at parse time)."""
        buf = self.buffer_named(ptr.buffer)
        offset = _static_offset(fold_constants(ptr.indices), buf)
        if offset is not None and offset * DTYPES[buf.dtype].bytes % nbytes:
            return (f"is byte {offset * DTYPES[buf.dtype].bytes} of '{buf.name}', not a multiple "
                    f"of the {nbytes} bytes the cp.async copies (it needs both addresses "
                    "aligned to its size)")
        return ""

    def widen_cp_async(self, var: N.Var, ranges: list, body: tuple) -> tuple[list, tuple]:
        """A ``T.vectorized`` loop's ranges and body with its raw cp.async narrower than 4
        bytes widened over the lanes (language/cp_async_lanes.py), as TileLang's
        vectorizer widens it; one that does not widen is refused by name."""
        dtypes = {b.name: b.dtype for b in map(self.buffer_named, {
            x.args[0].buffer for x in walk_nodes(body)
            if isinstance(x, N.Call) and x.name == "ptx_cp_async"})}
        narrow = cp_async_lanes.narrow(body, dtypes)
        if not narrow:
            return ranges, body
        first = narrow[0]
        dtype = dtypes[first.value.args[0].buffer]
        start, extent = ranges[0]  # (a T.vectorized loop has one variable)
        folded = cp_async_lanes.fold(var, start, extent, body, dtype)
        if not folded:
            raise FrontendError(cp_async_lanes.narrow_error(first, dtype), first.loc, self.fname)
        steps, stmt = folded
        lane0 = substitute(stmt.value.args[:2], {var.name: N.Const(0, var.dtype)})
        nbytes = cp_async_lanes.copy_bytes(stmt.value, dtype)
        for ptr, name in zip(lane0, ("dst_access_ptr", "src_access_ptr")):
            misaligned = self.cp_async_misaligned(ptr, nbytes)
            if misaligned:
                raise FrontendError(f"T.ptx_cp_async: {name} `{expr_str(ptr)}` widened over the "
                                    f"T.vectorized loop {misaligned}", first.loc, self.fname)
        return [(N.Const(0, steps.dtype), steps)], (stmt,)

    def access_ptr(self, a: _Args, name: str) -> N.Load:
        """The element ``T.access_ptr(buffer[indices], access_type="r", *extents, offset=0,
        extent=None, ignore_last_ndim=0)`` points at (TileLang's access pointer, taken
        only as an argument of ``T.ptx_cp_async``)."""
        node = a.node(name)
        f = node.func if isinstance(node, ast.Call) else None
        if getattr(f, "attr", getattr(f, "id", None)) != "access_ptr":
            raise a.fail(name, f"{name} must be T.access_ptr(buffer[indices], ...), the form "
                               f"TileLang's examples pass; got `{ast.unparse(node)}`")
        sig = inspect.signature(lambda base, access_type="r", *extents, offset=0, extent=None,
                                ignore_last_ndim=0: None)
        p = _Args(self, "access_ptr", sig, node)
        p.refuse_unless("offset", (0,), "tilecute takes the element's own address")
        p.refuse_unless("extent", (None,), "the extent is num_elems")
        p.refuse_unless("ignore_last_ndim", (0,), "tilecute takes the element's own address")
        mask = p.value("access_type")
        want = "w" if name.startswith("dst") else "r"
        if mask not in (want, "rw", {"w": 2, "r": 1}[want], 3):
            raise p.fail("access_type", f"access_type={_show(mask)}: the {name[:3]} of a cp.async "
                                        f"is {'written' if want == 'w' else 'read'} ({want!r})")
        base = p.node("base")
        sliced = isinstance(base, ast.Subscript) and any(
            isinstance(x, ast.Slice) for x in (base.slice.elts if isinstance(base.slice, ast.Tuple)
                                               else (base.slice,)))
        e = None if sliced else self.expr(base)
        if not isinstance(e, N.Load):
            raise p.fail("base", f"base must be one buffer element, `{ast.unparse(base)}[i, j]` "
                                 "(tilecute takes no region, buffer or pointer variable here)")
        return e

    def stmt_ptx_commit_group(self, a: _Args, s) -> list[N.Stmt]:
        if not self.in_kernel:
            raise self.error(s, "T.ptx_commit_group is only valid inside a T.Kernel")
        return [N.Evaluate(N.Call("ptx_commit_group", (), "int32"), loc=self.loc(s))]

    def stmt_ptx_wait_group(self, a: _Args, s) -> list[N.Stmt]:
        """``T.ptx_wait_group(num)``: ``cp.async.wait_group num``, whose count PTX takes as
        an immediate (an int known at parse time, a literal or a macro's argument)."""
        if not self.in_kernel:
            raise self.error(s, "T.ptx_wait_group is only valid inside a T.Kernel")
        n = a.value("num")
        if _is_ir(n) and isinstance(n, N.Const):
            n = n.value
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise a.fail("num", f"num must be an int >= 0 known at parse time (cp.async.wait_group "
                                f"takes an immediate); got {_show(n)}")
        call = N.Call("ptx_wait_group", (N.Const(n, "int32"),), "int32")
        return [N.Evaluate(call, loc=self.loc(s))]

    def stmt_cp_async_barrier_noinc(self, a: _Args, s) -> list[N.Stmt]:
        bar = self.barrier_element(a.node("barrier"), "T.cp_async_barrier_noinc")
        return [N.MBarrierArrive(bar, loc=self.loc(s), cp_async=True)]

    def stmt_fence_proxy_async(self, a: _Args, s) -> list[N.Stmt]:
        return [N.Evaluate(N.Call("fence_proxy_async", (), "int32"), loc=self.loc(s))]

    def stmt_pdl_trigger(self, a: _Args, s) -> list[N.Stmt]:
        return [N.Evaluate(N.Call("pdl_trigger", (), "int32"), loc=self.loc(s))]

    def stmt_sync_grid(self, a: _Args, s) -> list[N.Stmt]:
        """``T.sync_grid()``: the grid-wide barrier; its kernel launches cooperatively."""
        return [N.Evaluate(N.Call("sync_grid", (), "int32"), loc=self.loc(s))]

    def stmt_rng_init(self, a: _Args, s) -> list[N.Stmt]:
        """``T.rng_init(seed, seq=None, off=0, generator=...)``: an Evaluate of the
        intrinsic rng_init (int64 seed, subsequence, offset), which (re)starts the
        thread's Philox4x32-10 state; ``seq`` defaults to TileLang's ``threadIdx.x +
        blockIdx.x * blockDim.x``."""
        if not self.in_kernel:
            raise self.error(s, "T.rng_init is only valid inside a T.Kernel")
        generator = a.value("generator")
        if generator in ("curandStateMRG32k3a_t", "curandStateXORWOW_t"):
            raise a.fail("generator", f"generator={generator!r} is not supported: tilecute "
                                      "implements cuRAND's Philox4x32-10 "
                                      "(\"curandStatePhilox4_32_10_t\", the default) only")
        if generator != "curandStatePhilox4_32_10_t":
            raise a.fail("generator", f"generator must name a cuRAND state type "
                                      f"(\"curandStatePhilox4_32_10_t\"), got {_show(generator)}")

        def integer(name):
            v = a.value(name)
            if isinstance(v, bool) or not isinstance(v, (int, N.Expr)) or \
                    not N.is_int(N.as_expr(v).dtype):
                raise a.fail(name, f"{name} must be an integer, got {_show(v)}")
            if isinstance(v, int):  # cuRAND's unsigned long long: the same 64 bits
                v = N.Const((v + (1 << 63)) % (1 << 64) - (1 << 63), "int64")
            return N.cast(v, "int64")

        if a.value("seq") is None:
            block = self.kernel_blocks[0] if self.kernel_blocks else N.Const(0, "int32")
            seq = N.cast(ops.get_thread_binding(0) + block * int(self.kernel_threads[0]), "int64")
        else:
            seq = integer("seq")
        call = N.Call("rng_init", (integer("seed"), seq, integer("off")), "int32")
        return [N.Evaluate(call, loc=self.loc(s))]

    def stmt_evaluate(self, a: _Args, s) -> list[N.Stmt]:
        return [N.Evaluate(N.as_expr(a.value("value")), loc=self.loc(s))]

    # ---- TVM's thread all-reduce (T.attr reduce_scope + T.tvm_thread_allreduce) ---------------
    def is_attr_call(self, node) -> bool:
        if not isinstance(node, ast.Call):
            return False
        form = self.form_of(node.func)
        return form is not None and form.__name__ == "attr"

    def attr_scope(self, s, call: ast.Call, body) -> list[N.Stmt]:
        """``T.attr(node, attr_key, value)`` over ``body`` (a ``with`` body, or the rest of
        the block after the statement form): the keys honored are TVM's ``"reduce_scope"``
        with a ``T.comm_reducer`` node, the combiner of the ``T.tvm_thread_allreduce`` calls
        inside, and ``"async_scope"``, which TileLang's pipeline no longer reads (its body
        as written); it makes no statement of its own."""
        a = self.args(F.FORMS["attr"], call)
        if not self.in_kernel:
            raise self.error(s, "T.attr outside a T.Kernel: TVM's reduce_scope attribute "
                                "covers a T.tvm_thread_allreduce inside a kernel")
        key = a.value("attr_key")
        if key == "async_scope":
            # TVM's hint for its InjectPTXAsyncCopy, which older TileLang ran to turn the
            # global->shared stores under it into cp.async; TileLang's pipeline today runs
            # no pass that reads it, so the stores stay the plain stores written
            return list(self.block(body))
        if key != "reduce_scope":
            raise a.fail("attr_key", f"attr_key={_show(key)} is not supported: TVM's attribute "
                                     "statement annotates TIR for TVM's own passes; tilecute "
                                     "honors \"reduce_scope\" (a T.comm_reducer around "
                                     "T.tvm_thread_allreduce) and \"async_scope\" (inert)")
        reducer = self.comm_reducer(a.node("node"))
        # `value` (TVM's T.reinterpret(T.uint64(0), dtype="handle")): TVM's lowering reads
        # only the node of a reduce_scope attribute, and so does tilecute
        self.reduce_scopes.append(reducer)
        try:
            return list(self.block(body))
        finally:
            self.reduce_scopes.pop()

    def comm_reducer(self, node) -> "_CommReducer":
        f = node.func if isinstance(node, ast.Call) else None
        form = self.form_of(f) if f is not None else None
        if form is None or form.__name__ != "comm_reducer":
            raise self.error(node, f"T.attr(..., \"reduce_scope\", ...): the node must be "
                                   f"T.comm_reducer(combiner, identity); got `{ast.unparse(node)}`")
        a = self.args(form, node)
        ident = a.value("identity")
        if not isinstance(ident, (list, tuple)) or not ident:
            raise a.fail("identity", f"identity is a list of one identity value per reduced "
                                     f"value; got {_show(ident)}")
        for v in ident:
            if isinstance(v, bool) or not isinstance(v, (int, float, N.Expr)) or \
                    isinstance(v, N.Expr) and self.varies_by_thread(v):
                raise a.fail("identity", f"an identity value is a constant (`T.cast(0, dtype)`); "
                                         f"got {_show(v)}")
        comb = a.node("combiner")
        if isinstance(comb, ast.Lambda):
            params = comb.args
            if params.vararg or params.kwarg or params.kwonlyargs or params.posonlyargs or \
                    params.defaults:
                raise a.fail("combiner", "the combiner is a lambda of plain parameters "
                                         "(`lambda x, y: x + y`)")
            names = [p.arg for p in params.args]
        else:
            fn = a.value("combiner")
            if not callable(fn) or isinstance(fn, (F.Form, F.Unsupported)):
                raise a.fail("combiner", f"the combiner is a function of the left and right "
                                         f"values (`lambda x, y: x + y`); got {_show(fn)}")
            names = list(inspect.signature(fn).parameters)
        if len(names) != 2 * len(ident):
            raise a.fail("combiner", f"the combiner takes {len(names)} parameter(s); with "
                                     f"{len(ident)} identity value(s) it takes {2 * len(ident)} "
                                     "(the left values, then the right ones)")
        return _CommReducer(comb, names, tuple(ident), node)

    def combine_exprs(self, reducer: "_CommReducer", dtypes) -> tuple:
        """The reducer's combiner applied to fresh variables of ``dtypes`` (left, then
        right): (lhs, rhs, results, each result in its value's dtype)."""
        lhs = tuple(N.Var(self.fresh(n), d) for n, d in zip(reducer.names, dtypes))
        rhs = tuple(N.Var(self.fresh(n), d) for n, d in zip(reducer.names[len(dtypes):], dtypes))
        comb = reducer.combiner
        if isinstance(comb, ast.Lambda):
            self.push(control=False)
            try:
                for n, v in zip(reducer.names, lhs + rhs):
                    self.bind(n, v)
                out = self.expr(comb.body)
            finally:
                self.pop()
        else:
            try:
                out = self.eval_python(comb)(*(lhs + rhs))
            except (TypeError, ValueError, AttributeError, NotImplementedError) as e:
                raise self.error(comb, f"T.comm_reducer: the combiner failed on tilecute's "
                                       f"expressions: {e}") from None
        out = out if isinstance(out, tuple) else (out,)
        if len(out) != len(dtypes) or not all(
                isinstance(x, (int, float, N.Expr)) and not isinstance(x, bool) or
                isinstance(x, N.Expr) for x in out):
            raise self.error(comb, f"T.comm_reducer: the combiner returns {len(out)} value(s) "
                                   f"for {len(dtypes)} identity value(s)")
        results = tuple(N.cast(N.as_expr(x), d) for x, d in zip(out, dtypes))
        return lhs, rhs, results

    def stmt_tvm_thread_allreduce(self, a: _Args, s) -> list[N.Stmt]:
        """``T.tvm_thread_allreduce(T.uint32(n), v.., cond, r[0].., *thread_vars)`` under
        the innermost reduce_scope's combiner (TVM's LowerThreadAllreduce): see
        :class:`tilecute.ir.nodes.ThreadAllReduce`."""
        name = "T.tvm_thread_allreduce"
        if not self.reduce_scopes:
            raise self.error(s, f"{name} outside a `with T.attr(T.comm_reducer(...), "
                                "\"reduce_scope\", ...)`: TVM takes its combiner from there")
        a.refuse_unless("dtype", ("handle",), "TVM's call is a handle")
        if self.in_ws or self.in_varying_if or any(k == "parallel" for k, _, _ in self.context()):
            where = "a T.Parallel loop" if not (self.in_ws or self.in_varying_if) else \
                "a T.ws region or a branch on the thread index"
            raise self.error(s, f"{name} inside {where}: every thread of the block takes part "
                                "in the all-reduce (shuffles and block barriers)")
        reducer = self.reduce_scopes[-1]
        refs = list(a.ref("args"))
        n = len(reducer.identity)
        if len(refs) < 2 * n + 2:
            raise self.error(s, f"{name} takes T.uint32({n}), {n} value(s), the condition, "
                                f"{n} result element(s) and the thread indices to reduce over "
                                f"(the reducer has {n} identity value(s)); got {len(refs)} "
                                "argument(s)")
        count = self.arg_value(refs[0])
        count = count.value if isinstance(count, N.Const) else count
        if isinstance(count, bool) or count != n:
            raise self.error(s, f"{name}: the first argument is the number of reduced values, "
                                f"T.uint32({n}) for a reducer of {n} identity value(s); got "
                                f"{_show(count)}")
        node = lambda r: r.node if isinstance(r, _Given) else r  # noqa: E731
        values = []
        for r in refs[1:1 + n]:
            v = self.arg_value(r)
            if isinstance(v, bool) or not isinstance(v, (int, float, N.Expr)) or \
                    isinstance(v, N.Expr) and v.dtype == "bool":
                raise self.error(node(r), f"{name}: a reduced value is a number; got "
                                          f"`{ast.unparse(node(r))}`")
            values.append(N.as_expr(v))
        cond = self.arg_value(refs[1 + n])
        if isinstance(cond, N.Const):
            cond = bool(cond.value)
        if not isinstance(cond, (bool, N.Expr)):
            raise self.error(node(refs[1 + n]), f"{name}: the condition is a bool; got "
                                                f"{_show(cond)}")
        dsts = []
        for r, v in zip(refs[2 + n:2 + 2 * n], values):
            d = self.arg_value(r)
            buf = self.buffer_named(d.buffer) if isinstance(d, N.Load) else None
            if buf is None or buf.scope != "local" or any(
                    not (isinstance(i, N.Const) and i.value == 0) for i in d.indices):
                raise self.error(node(r), f"{name}: a result is element 0 of a local buffer "
                                          f"(`r[0]` of T.alloc_local((1,), dtype) or a "
                                          f"T.alloc_var; TVM replaces that buffer by the "
                                          f"result); got `{ast.unparse(node(r))}`")
            if buf.dtype != v.dtype:
                raise self.error(node(r), f"{name}: result '{buf.name}' is {buf.dtype} but its "
                                          f"value is {v.dtype} (TVM's result has the value's dtype)")
            dsts.append(buf.name)
        threads = tuple(self.kernel_threads) + (1, 1, 1)
        dims = set()
        for r in refs[2 + 2 * n:]:
            e = self.arg_value(r)
            d = _thread_dim(e, self.let_values)
            if d is None:
                if isinstance(e, (int, N.Const)) and not isinstance(e, bool) and \
                        int(getattr(e, "value", e)) == 0:
                    continue  # TVM's folded thread index of extent 1
                raise self.error(node(r), f"{name}: the values are reduced over thread "
                                          f"indices (T.get_thread_binding(d), a name bound to "
                                          f"one); got `{ast.unparse(node(r))}`")
            if threads[d] > 1:
                dims.add(d)
        identity = tuple(N.cast(N.as_expr(i), v.dtype) for i, v in zip(reducer.identity, values))
        if cond is not True:
            for i, v, r in zip(reducer.identity, values, refs[1:1 + n]):
                if isinstance(i, N.Expr) and i.dtype != v.dtype:
                    raise self.error(node(r), f"{name}: with a condition, a thread whose "
                                              f"condition is false contributes the identity, "
                                              f"{i.dtype}, which must have the value's dtype "
                                              f"{v.dtype}")
            values = [i if cond is False else N.Select(cond, v, i, v.dtype)
                      for v, i in zip(values, identity)]
        if not dims:  # TVM: a reduction over one thread stores the values
            return [N.Store(d, (N.Const(0, "int32"),), v, loc=self.loc(s))
                    for d, v in zip(dsts, values)]
        lhs, rhs, results = self.combine_exprs(reducer, [v.dtype for v in values])
        scratch = ()
        if a.given("scratch"):  # (printed IR: the layout pass's buffers)
            node_ = a.node("scratch")
            elts = node_.elts if isinstance(node_, (ast.List, ast.Tuple)) else [node_]
            scratch = tuple(self.buffer_of(e).name for e in elts)
        return [N.ThreadAllReduce(lhs, rhs, results, identity, tuple(values), tuple(dsts),
                                  tuple(sorted(dims)), _allreduce_op(lhs, rhs, results),
                                  scratch, loc=self.loc(s))]

    def stmt_sync_threads(self, a: _Args, s) -> list[N.Stmt]:
        """``T.sync_threads()``: the block's barrier; ``T.sync_threads(barrier_id,
        arrive_count=None)``: TileLang's partial barrier, ``bar.sync barrier_id, count``
        (every thread of the block without ``arrive_count``)."""
        bid, count = a.value("barrier_id"), a.value("arrive_count")
        if bid is None:
            a.refuse_unless("arrive_count", (None,), "an arrive count needs a barrier_id "
                                                     "(TileLang would read it as the id)")
            return [N.Barrier(a.static_bool("wait_async"), loc=self.loc(s))]
        a.refuse_unless("wait_async", (False,), "a named barrier waits for its threads only")
        bid = self.named_barrier_id(a)
        threads = self.named_barrier_threads(a, "arrive_count", count)
        if isinstance(bid, N.Const) and bid.value == 0 and threads == math.prod(self.kernel_threads):
            return [N.Barrier(False, loc=self.loc(s))]  # bar.sync 0 over the block
        return [N.NamedBarrier(bid, threads, loc=self.loc(s), program=True)]

    def stmt_named_barrier_arrive(self, a: _Args, s) -> list[N.Stmt]:
        """``T.named_barrier_arrive(barrier_id, thread_count)``: ``bar.arrive``, the
        program's arrive on the named barrier a ``T.sync_threads(barrier_id, thread_count)``
        waits on."""
        bid = self.named_barrier_id(a)
        threads = self.named_barrier_threads(a, "thread_count", a.value("thread_count"))
        return [N.NamedBarrier(bid, threads, arrive=True, loc=self.loc(s), program=True)]

    def named_barrier_id(self, a: _Args) -> N.Expr:
        bid = a.value("barrier_id")
        if isinstance(bid, bool) or not (isinstance(bid, int) or _is_ir(bid) and N.is_int(bid.dtype)):
            raise a.fail("barrier_id", f"expected an integer, got {_show(bid)}")
        bid = N.cast(self.let_constant(N.as_expr(bid)), "int32")
        if isinstance(bid, N.Const) and not 0 <= bid.value <= 15:
            raise a.fail("barrier_id", f"barrier_id={bid.value}: barrier {bid.value}: the "
                                       "hardware has named barriers 0..15")
        return bid

    def let_constant(self, e: N.Expr) -> N.Expr:
        """``e``, or the constant a kernel name bound once to one stands for (``ready = 10``
        in a kernel is a Let; TVM's simplifier sees through it)."""
        seen = set()
        x = e
        while isinstance(x, N.Var) and x.name in self.let_values and x.name not in seen:
            seen.add(x.name)
            x = self.let_values[x.name]
        return x if isinstance(x, N.Const) else e

    def named_barrier_threads(self, a: _Args, arg: str, count) -> int:
        """A named barrier's thread count (the block's without one): whole warps, at most
        the block's threads, known when the kernel is built."""
        total = math.prod(self.kernel_threads)
        if _is_ir(count) and isinstance(self.let_constant(count), N.Const) and \
                N.is_int(count.dtype):
            threads = int(self.let_constant(count).value)  # `participants = 64` in the kernel
        else:
            threads = total if count is None else a.static_int(arg, 1)
        if threads % 32 or threads > total:
            raise a.fail(arg, f"{arg}={threads}: {threads} threads: a named barrier counts "
                              f"whole warps (a multiple of 32), at most the block's {total}")
        return threads

    def stmt_tvm_storage_sync(self, a: _Args, s) -> list[N.Stmt]:
        """TVM's ``T.tvm_storage_sync(scope)``: TileLang's CUDA codegen prints
        ``__syncthreads()`` for ``"shared"`` / ``"shared.dyn"`` and nothing for ``"warp"``."""
        scope = a.value("storage_scope")
        if scope in ("shared", "shared.dyn"):
            return [N.Barrier(False, loc=self.loc(s))]
        if scope == "warp":
            return []
        raise a.fail("storage_scope", f"storage_scope={scope!r}: tilecute takes \"shared\", "
                                      "\"shared.dyn\" (the block's barrier) and \"warp\" "
                                      "(nothing, as TileLang's codegen); for the grid's barrier "
                                      "write T.sync_grid()")

    def stmt_sync_warp(self, a: _Args, s) -> list[N.Stmt]:
        mask = a.value("mask")
        if mask is not None:
            if isinstance(mask, int) and not isinstance(mask, bool):
                if not 0 < mask <= 0xFFFFFFFF:
                    raise a.fail("mask", f"mask={mask:#x} must be a nonzero 32-bit lane mask")
                mask = N.Const(mask, "uint32")
            elif not (isinstance(mask, N.Expr) and N.is_int(mask.dtype)):
                raise a.fail("mask", "mask must be an integer lane mask")
            mask = N.cast(mask, "uint32")
        return [N.WarpSync(mask, loc=self.loc(s))]

    def stmt_tma_copy(self, a: _Args, s) -> list[N.Stmt]:
        mask = a.value("cluster_mask")
        if mask is not None and (isinstance(mask, bool) or not isinstance(mask, int) or mask < 0):
            raise a.fail("cluster_mask", f"cluster_mask={_show(mask)}: a bitmask of ranks, an "
                                         "int known at parse time (TileLang's)")
        leader = 0
        if a.value("leader_scope_threads") is not None:
            # TileLang: each group of this many threads elects one thread that issues the
            # copy (T.tma_copy's ValueErrors: a positive int, a multiple of the warp size)
            leader = a.static_int("leader_scope_threads", 1)
            if leader % 32:
                raise a.fail("leader_scope_threads", f"leader_scope_threads={leader} must be a "
                                                     "multiple of warp size (32)")
        a.refuse_unless("eviction_policy", (None, "evict_normal"), "tilecute's copies use the "
                        "normal eviction policy")
        a.no_annotations()
        src, dst = self.region(a.node("src")), self.region(a.node("dst"))
        src = self.origin_region(src, a.node("src"), dst, a.node("dst"))
        dst = self.origin_region(dst, a.node("dst"), src, a.node("src"))
        barrier = None
        if a.value("barrier") is not None:
            barrier = self.barrier_element(a.node("barrier"), "T.tma_copy(barrier=)")
        stage = None
        if a.given("stage"):
            stage = N.as_expr(a.value("stage"))
        if leader and self.buffer_named(src.buffer).scope == "shared" and \
                leader < math.prod(self.kernel_threads):
            raise a.fail("leader_scope_threads", f"leader_scope_threads={leader} on a store: "
                                                 "tilecute issues a TMA store from one thread "
                                                 "of the block, which waits for it (the loads' "
                                                 "leader scopes are honored)")
        if leader >= math.prod(self.kernel_threads):
            leader = 0  # one group: the block's one issuing thread, as without it
        if mask:  # TileLang's multicast load: the mask's blocks get its lowest rank's tile
            if self.buffer_named(src.buffer).scope != "global":
                raise a.fail("cluster_mask", f"cluster_mask={bin(mask)}: a multicast is a load "
                                             f"(global -> shared); '{src.buffer}' is "
                                             f"{self.buffer_named(src.buffer).scope}")
            src = self.issuer_region(src, mask, a.node("cluster_mask"), "T.tma_copy")
        return [N.TmaCopy(src, dst, barrier, stage, loc=self.loc(s),
                          arrive=a.static_bool("arrive"), required=a.static_bool("required"),
                          leader_threads=leader)]

    def stmt_tma_store_wait(self, a: _Args, s) -> list[N.Stmt]:
        """``T.tma_store_wait(count=0, read=True)``: TileLang's wait of the thread that
        issued the block's TMA stores (``cp.async.bulk.wait_group[.read] count``)."""
        if not self.in_kernel:
            raise self.error(s, "T.tma_store_wait is only valid inside a T.Kernel")
        return [N.TmaStoreWait(loc=self.loc(s), count=a.static_int("count", 0),
                               read=a.static_bool("read"), program=True)]

    def stmt_tma_store_arrive(self, a: _Args, s) -> list[N.Stmt]:
        if not self.in_kernel:
            raise self.error(s, "T.tma_store_arrive is only valid inside a T.Kernel")
        return [N.TmaStoreArrive(loc=self.loc(s))]

    def stmt_mbarrier_arrive(self, a: _Args, s) -> list[N.Stmt]:
        """``T.mbarrier_arrive(bar[i])``; ``T.mbarrier_arrive(bar[i], cta_id)``: on the
        barrier of block ``cta_id`` of the cluster (TileLang asks for a
        ``T.alloc_cluster_barrier``; tilecute's barriers are the same mbarriers)."""
        block = a.value("cta_id")
        if block is not None:
            if isinstance(block, bool) or not (isinstance(block, int) or
                                               _is_ir(block) and N.is_int(block.dtype)):
                raise a.fail("cta_id", f"cta_id must be an integer (a block's rank in the "
                                       f"cluster), got {_show(block)}")
            block = N.cast(N.as_expr(block), "int32")
        return [N.MBarrierArrive(self.barrier_element(a.node("mbarrier"), "T.mbarrier_arrive"),
                                 loc=self.loc(s), block=block)]

    def stmt_cluster_sync(self, a: _Args, s) -> list[N.Stmt]:
        return [N.ClusterSync(loc=self.loc(s))]

    def stmt_cluster_arrive(self, a: _Args, s) -> list[N.Stmt]:
        return [N.ClusterSync(loc=self.loc(s), kind="arrive")]

    def stmt_cluster_arrive_relaxed(self, a: _Args, s) -> list[N.Stmt]:
        return [N.ClusterSync(loc=self.loc(s), kind="arrive_relaxed")]

    def stmt_cluster_wait(self, a: _Args, s) -> list[N.Stmt]:
        return [N.ClusterSync(loc=self.loc(s), kind="wait")]

    def stmt_wait_wgmma(self, a: _Args, s, name: str = "id") -> list[N.Stmt]:
        pending = a.static_int(name)
        if pending < 0:
            raise a.fail(name, f"{name}={pending}: a count of wgmma batches >= 0")
        return [N.WaitWgmma(pending, loc=self.loc(s))]

    def stmt_warpgroup_wait(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_wait_wgmma(a, s, "num_mma")

    def stmt_barrier_arrive(self, a: _Args, s) -> list[N.Stmt]:
        return [N.MBarrierArrive(self.barrier_element(a.node("mbarrier"), "T.barrier_arrive"),
                                 loc=self.loc(s))]

    def stmt_barrier_wait(self, a: _Args, s) -> list[N.Stmt]:
        """TileLang's sugar for :meth:`stmt_mbarrier_wait_parity` (same arguments)."""
        return self.stmt_mbarrier_wait_parity(a, s, "T.barrier_wait")

    def stmt_mbarrier_wait_parity(self, a: _Args, s, what: str = "T.mbarrier_wait_parity") \
            -> list[N.Stmt]:
        bar = self.barrier_element(a.node("mbarrier"), what)
        parity = a.value("parity")
        if not (_is_ir(parity) or isinstance(parity, int)) or isinstance(parity, bool):
            raise a.fail("parity", f"parity must be an integer, got {_show(parity)}")
        parity = N.cast(N.as_expr(parity, "int32"), "int32")
        return [N.MBarrierWait(bar, parity, loc=self.loc(s))]

    def stmt_annotate_restrict_buffers(self, a: _Args, s) -> list[N.Stmt]:
        """``T.annotate_restrict_buffers(x, y)``: TileLang's CUDA code then leaves
        ``__restrict__`` off those parameters, which may alias.  tilecute's kernels assume
        no parameter is free of aliases (global loads and stores keep their program order;
        no read-only-cache loads), so that already holds: the arguments are checked to be
        buffers (TileLang's TypeError otherwise) and nothing else changes."""
        for ref in a.ref("buffers"):
            if isinstance(ref, _Given):  # one of `*bufs`: its value
                ok, node, shown = isinstance(ref.value, (_BufferRef, N.Buffer)), ref.node, \
                    _show(ref.value)
            else:
                node, shown = ref, ast.unparse(ref)
                try:
                    ok = self.buffer_of(node) is not None
                except FrontendError:
                    ok = False
            if not ok:
                raise self.error(node, f"T.annotate_restrict_buffers expects Buffer arguments, "
                                       f"got `{shown}`", FrontendTypeError)
        return []

    def stmt_use_swizzle(self, a: _Args, s) -> list[N.Stmt]:
        return self.use_swizzle(a, s)

    def stmt_set_max_nreg(self, a: _Args, s) -> list[N.Stmt]:
        count = a.static_int("reg_count")
        return [N.SetMaxNReg(count, a.static_bool("is_inc"), loc=self.loc(s))]

    def stmt_inc_max_nreg(self, a: _Args, s) -> list[N.Stmt]:
        return [N.SetMaxNReg(a.static_int("reg_count"), True, loc=self.loc(s))]

    def stmt_dec_max_nreg(self, a: _Args, s) -> list[N.Stmt]:
        return [N.SetMaxNReg(a.static_int("reg_count"), False, loc=self.loc(s))]

    # ---- annotations ----------------------------------------------------------------------
    def stmt_annotate_layout(self, a: _Args, s) -> list[N.Stmt]:
        """``T.annotate_layout({buf: layout, ...})``: each shared buffer's layout, set on its
        ``Allocate`` when the T.Kernel body is parsed (:meth:`annotate_layouts`)."""
        if not self.in_kernel:
            raise self.error(s, "T.annotate_layout is only valid inside a T.Kernel")
        node = a.node("layout_map")
        if isinstance(node, ast.Dict) and a.given("layout_map"):
            if None in node.keys:
                raise a.fail("layout_map", "layout_map is a dict literal {buffer: layout, ...} "
                                           "(no ** unpacking)")
            pairs = list(zip(node.keys, node.values))
        else:
            value = a.value("layout_map")
            if not isinstance(value, dict):
                raise a.fail("layout_map", f"layout_map is a dict {{buffer: layout, ...}}, got "
                                           f"{_show(value)}")
            pairs = [(_Given(k, node), _Given(v, node)) for k, v in value.items()]
        for key, val in pairs:
            where = key.node if isinstance(key, _Given) else key
            ref = key.value if isinstance(key, _Given) else self.expr(key)
            if not isinstance(ref, _BufferRef) or isinstance(ref, _VarRef):
                raise self.error(where, f"T.annotate_layout: the keys are buffers, got "
                                        f"`{ast.unparse(where) if isinstance(key, ast.AST) else _show(ref)}`")
            buf = ref.buffer
            if buf.scope == "global":
                self.global_layout(buf, val, s)
                continue
            layout = self.annotated_layout(buf, val, s)
            if layout is None:  # a shared buffer's index map (self.shared_layouts)
                continue
            have = self.layout_annotations.get(buf.name)
            if have is not None and have[0] != layout:
                raise self.error(where, f"T.annotate_layout: '{buf.name}' is annotated twice, "
                                        f"with {have[0]} and {layout}")
            self.layout_annotations[buf.name] = (layout, where)
        return []

    def global_layout(self, buf: N.Buffer, val, s) -> None:
        """``T.annotate_layout({G: T.Layout(G.shape, forward_fn)})`` on a global tensor
        (TileLang's index-map layout, often built by a Python helper ``make_layout(G)``):
        the kernel reads and writes ``G`` through the map (:mod:`.global_layouts`).  Other
        layouts of a global tensor are refused."""
        from .global_layouts import BufferProxy, IndexMapLayout, resolve

        node = val.node if isinstance(val, _Given) else val
        if isinstance(node, ast.Call) and not isinstance(val, _Given):
            try:
                fn = self.expr(node.func)
            except FrontendError:
                fn = None
            if isinstance(fn, (L.LayoutConstructor, L.UnsupportedLayout, F.Unsupported)):
                self.check_layout_scope("T.annotate_layout", buf, node)  # refuses: global
        value = self.layout_python(buf, val)
        if not isinstance(value, IndexMapLayout):
            self.check_layout_scope("T.annotate_layout", buf, node)
        if buf.name in self.global_layouts:
            raise self.error(node, f"T.annotate_layout: '{buf.name}' is annotated twice")
        try:
            m = resolve(buf, value)
        except (ValueError, TypeError) as e:
            raise self.error(node, f"T.annotate_layout: the index-map layout of "
                                   f"'{buf.name}': {e}") from None
        self.global_layouts[buf.name] = (m, self.loc(s))

    def python_arg(self, a: "_Args", name: str, what: str):
        """Argument ``name`` of ``a`` run as Python (a ``T.Fragment(..., forward_fn=lambda
        ...)`` written in the call), as TileLang runs it."""
        ref = a.ref(name)
        if not isinstance(ref, ast.AST) or not any(isinstance(x, ast.Lambda) for x in ast.walk(ref)):
            return a.value(name)  # (bound to its form's signature as the parser reads it)
        return self.layout_python(what, ref)

    def layout_python(self, buf, val):
        """The value of a ``T.annotate_layout`` layout: TileLang runs the layout's Python (a
        helper, ``T.Layout``, ``T.Fragment``, the lambda), and so does tilecute, with the
        prim_func's buffers as :class:`~.global_layouts.BufferProxy` values."""
        from .global_layouts import BufferProxy

        if isinstance(val, _Given):
            return val.value
        node = val
        names = dict(self.env)
        for scope in self.scopes:
            for k, v in scope.items():
                names[k] = BufferProxy(v.buffer) if isinstance(v, _BufferRef) else v
        try:
            return eval(compile(ast.Expression(node), self.filename, "eval"), names)
        except FrontendError:
            raise
        except Exception as e:  # the program's own Python failed
            what = f"T.annotate_layout: the layout of '{buf.name}'" if isinstance(buf, N.Buffer) \
                else buf
            raise self.error(node, f"{what} (`{ast.unparse(node)}`) raised "
                                   f"{type(e).__name__}: {e}")

    def block_threads(self) -> int:
        return math.prod(int(t) for t in self.kernel_threads)

    def fragment_layout(self, buf: N.Buffer, value, node, what: str) -> N.Layout:
        """tilecute's layout for TileLang's ``T.Fragment`` ``value`` on fragment ``buf``
        (:func:`.custom_layouts.match_fragment`), or the error naming ``what``."""
        from .custom_layouts import MapError, match_fragment

        try:
            return match_fragment(value, buf.shape, self.block_threads(), what)
        except MapError as e:
            raise self.error(node, str(e)) from None

    def map_global_layouts(self, body: tuple, shared: bool = False) -> tuple:
        """The kernel body reading and writing each global tensor with an index-map layout
        through it (:func:`.global_layouts.apply`); ``shared``: each shared buffer with one
        (:func:`.global_layouts.apply_shared`)."""
        from .global_layouts import apply, apply_shared

        buffers = {b.name: b for b in self.workspaces}
        for scope in self.scopes:
            buffers.update({v.buffer.name: v.buffer for v in scope.values()
                            if isinstance(v, _BufferRef)})

        def error(loc, msg):
            line = linecache.getline(loc.file, loc.line) if loc else ""
            return FrontendError(msg, loc, self.fname, line)

        if shared:
            return apply_shared(body, self.shared_layouts, buffers, self.fresh, error)
        return apply(body, self.global_layouts, buffers, self.fresh, error)

    def local_fragment(self, buf: N.Buffer, val, node) -> bool:
        """Whether ``val`` is a T.Fragment that ``T.annotate_layout`` may give the local
        buffer ``buf`` with nothing to do: TileLang stores a local buffer annotated with a
        T.Fragment at the fragment's register indices (its threads play no part: each
        thread holds its own copy), which relabels the elements when the indices are
        one-to-one (DeepSeek MLA decode's ``T.Fragment(lse.shape, forward_thread_fn=lambda
        i: i)`` on a one-element buffer); indices that make elements share a register are
        refused.  False when ``val`` is no T.Fragment."""
        from .custom_layouts import Fragment, MapError

        value = self.layout_python(buf, val)
        if not isinstance(value, Fragment):
            return False
        what = f"T.annotate_layout: T.Fragment of the local buffer '{buf.name}'"
        if tuple(value.shape) != tuple(int(d.value) for d in buf.shape):
            raise self.error(node, f"{what}: its shape {list(value.shape)} is not the "
                                   f"buffer's {[int(d.value) for d in buf.shape]}")
        try:
            _, local = value.table()
        except MapError as e:
            raise self.error(node, f"{what}: {e}") from None
        if len(set(local[:, 0].tolist())) != local.shape[0]:
            raise self.error(node, f"{what}: its register indices put several elements in one "
                                   "register, which TileLang's local buffer would then share; "
                                   "tilecute keeps a local buffer's elements apart (a "
                                   "one-to-one register map is a relabeling, honored)")
        return True

    def annotated_layout(self, buf: N.Buffer, val, s) -> N.Layout:
        """The tilecute layout that ``T.annotate_layout`` gives ``buf`` for the value
        ``val`` (an AST node, or a :class:`_Given`)."""
        from .custom_layouts import Fragment, MapError, SharedMap, resolve_shared
        from .global_layouts import IndexMapLayout

        node = val.node if isinstance(val, _Given) else val
        if buf.scope == "local" and self.local_fragment(buf, val, node):
            return None
        ours = False  # a tilecute.layout constructor or tilecute's own T.Layout(kind, ...)
        if isinstance(node, ast.Call) and not isinstance(val, _Given):
            try:
                fn = self.expr(node.func)
            except FrontendError:
                fn = None
            ours = isinstance(fn, (L.LayoutConstructor, L.UnsupportedLayout, F.Unsupported)) or (
                fn is Layout and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str))
        if not ours and buf.scope in ("fragment", "shared"):
            value = self.layout_python(buf, val)
            if isinstance(value, N.Layout):
                pass  # tilecute's own T.Layout(kind, ...) made by the program's Python
            elif buf.scope == "fragment":
                if not isinstance(value, Fragment):
                    raise self.error(node, f"T.annotate_layout: '{buf.name}' is a fragment; its "
                                           f"layout is a T.Fragment(shape, forward_fn, ...), got "
                                           f"{_show(value)} (TileLang asserts so too)")
                return self.fragment_layout(buf, value, node,
                                            f"T.annotate_layout: T.Fragment of '{buf.name}'")
            else:
                if isinstance(value, Fragment):
                    raise self.error(node, f"T.annotate_layout: '{buf.name}' is shared; a "
                                           "T.Fragment lays out a fragment (a shared buffer "
                                           "takes T.Layout(shape, forward_fn))")
                if callable(value) and not isinstance(value, (IndexMapLayout, L.LayoutConstructor)):
                    value = IndexMapLayout(tuple(buf.shape), value)  # TileLang's callable form
                if isinstance(value, IndexMapLayout):
                    try:
                        m = resolve_shared(buf, value.shape, value.forward_fn)
                    except MapError as e:
                        raise self.error(node, f"T.annotate_layout: the T.Layout of "
                                               f"'{buf.name}': {e}",
                                         FrontendValueError) from None  # TileLang's ValueError
                    if isinstance(m, N.Layout):
                        return m
                    have = self.shared_layouts.get(buf.name)
                    if have is not None or buf.name in self.layout_annotations:
                        raise self.error(node, f"T.annotate_layout: '{buf.name}' is annotated "
                                               "twice")
                    assert isinstance(m, SharedMap)
                    self.shared_layouts[buf.name] = (m, self.loc(node))
                    return None
                val = _Given(value, node)
        self.check_layout_scope("T.annotate_layout", buf, node)
        if isinstance(val, _Given):
            value = val.value
        else:
            if isinstance(node, ast.Call):
                fn = self.expr(node.func)
                if not isinstance(fn, (L.LayoutConstructor, L.UnsupportedLayout, F.Unsupported)) \
                        and not (isinstance(fn, type) and issubclass(fn, N.Layout)) and \
                        fn is not Layout:
                    raise self.error(node, f"T.annotate_layout: the layout of '{buf.name}' is "
                                           f"`{ast.unparse(node)}`; tilecute takes one of "
                                           f"tilecute.layout's constructors ("
                                           f"{', '.join(L.CONSTRUCTORS)}) called on the buffer "
                                           "(a Python function that builds a TileLang layout is "
                                           "not supported)")
            value = self.expr(node)
        if isinstance(value, L.Resolved):
            if value.buffer.dtype != buf.dtype or value.buffer.shape[-2:] != buf.shape[-2:]:
                raise self.error(node, f"T.annotate_layout: the layout of '{buf.name}' was made "
                                       f"for '{value.buffer.name}', whose last dims or dtype differ")
            return value.layout
        if isinstance(value, N.Layout):  # tilecute's own T.Layout(kind, ...)
            if buf.scope == "fragment":
                if value.kind not in ("blocked", "replicated"):
                    raise self.error(node, f"T.annotate_layout: '{buf.name}' is a fragment; "
                                           f"{layout_str(value)} is not a fragment layout the "
                                           "program may give (blocked, replicated)")
                return value
            if value.kind not in ("row_major", "swizzled", "tma_swizzled"):
                raise self.error(node, f"T.annotate_layout: '{buf.name}' is shared; "
                                       f"{layout_str(value)} is a fragment layout")
            return value
        shown = f"is `{ast.unparse(node)}`" if isinstance(node, ast.AST) else "must be"
        raise self.error(node, f"T.annotate_layout: the layout of '{buf.name}' {shown}; tilecute "
                               f"takes one of tilecute.layout's constructors "
                               f"({', '.join(L.CONSTRUCTORS)}), T.Layout(shape, forward_fn) or a "
                               f"function of the indices (a shared buffer's index map), or "
                               f"T.Fragment(...) (a fragment's), got {_show(value)}")

    def check_layout_scope(self, form: str, buf: N.Buffer, node) -> None:
        if buf.scope != "shared" and not (buf.scope == "fragment" and form == "T.annotate_layout"):
            what = {"global": "a global tensor: tilecute reads and writes it at the strides "
                              "the caller's tensor has",
                    "fragment": "a fragment: its layout is a T.Fragment(shape, forward_fn, "
                                "...) in T.annotate_layout",
                    "local": "a local buffer: each thread holds it whole, in order"}[buf.scope]
            tail = "" if buf.scope == "fragment" else \
                "; tilecute honors layouts of shared buffers and fragments only"
            raise self.error(node, f"{form}: '{buf.name}' is {what}{tail}")

    def layout_value(self, fn: "L.LayoutConstructor", node: ast.Call) -> "L.Resolved":
        """A call of a ``tilecute.layout`` constructor: its layout for the buffer it names."""
        a = _Args(self, fn.__name__, fn.signature, node, prefix="tilecute.layout.")
        first = next(iter(fn.signature.parameters))
        ref = a.ref(first)
        target = ref.value if isinstance(ref, _Given) else self.expr(ref)
        if not isinstance(target, _BufferRef) or isinstance(target, _VarRef):
            raise a.fail(first, f"expected a buffer, got {_show(target)}")
        self.check_layout_scope(f"tilecute.layout.{fn.__name__}", target.buffer, a.node(first))
        kwargs = {n: a.value(n) for n in fn.signature.parameters if n != first}
        try:
            return L.Resolved(target.buffer, fn.resolve(target.buffer, **kwargs))
        except ValueError as e:
            raise self.error(node, str(e)) from None

    def annotate_layouts(self, body: tuple) -> tuple:
        """The kernel body with the ``T.annotate_layout`` layouts on their allocations."""
        from ..ir.visitor import StmtMutator

        wanted = dict(self.layout_annotations)
        parser = self

        class _Set(StmtMutator):
            def visit_allocate(self, s: N.Allocate):
                if s.buffer.name not in wanted:
                    return s
                layout, where = wanted.pop(s.buffer.name)
                if s.layout is not None and s.layout != layout:
                    raise parser.error(where, f"T.annotate_layout: '{s.buffer.name}' has "
                                              f"layout={layout_str(s.layout)} at its allocation "
                                              f"and {layout_str(layout)} here")
                return dataclasses.replace(s, layout=layout)
        out = _Set().visit_block(body)
        for name, (_, where) in wanted.items():
            raise self.error(where, f"T.annotate_layout: '{name}' is not allocated in this "
                                    "T.Kernel block")
        return out

    def stmt_annotate_min_blocks_per_sm(self, a: _Args, s) -> list[N.Stmt]:
        if not self.in_kernel:
            raise self.error(s, "T.annotate_min_blocks_per_sm is only valid inside a T.Kernel")
        n = a.static_int("n", 1)
        asked = self.kernel_notes["min_blocks_per_sm"]
        if asked not in (0, n):
            raise a.fail("n", f"the kernel already asked for {asked}")
        self.kernel_notes["min_blocks_per_sm"] = n
        return []

    def stmt_annotate_safe_value(self, a: _Args, s) -> list[N.Stmt]:
        """``T.annotate_safe_value({A: v, ...})``: TileLang's ``safe_value_map`` on the
        kernel's block: an out-of-bounds read of global tensor ``A`` anywhere in the kernel
        (before the call too: the map is the block's) gives ``v`` instead of 0.  A key that
        is a view of a tensor names the tensor's storage, as TileLang keys the map by the
        buffer's data.  ``v``: a number, typed as TVM types a literal (an int is int32, a
        float float32, a bool bool), a typed constant (``T.float16(-1)``) or an expression
        of the function's symbols and scalar parameters."""
        if not self.in_kernel:
            raise self.error(s, "T.annotate_safe_value is only valid inside a T.Kernel")
        if self.sblock_depth:  # (one standing directly in a block's body is its map)
            raise self.error(s, "T.annotate_safe_value inside a `with T.sblock(...)` stands "
                                "directly in the block's body (it is the block's map); here it "
                                "is nested in a loop or a branch of the block")
        given = dict(self.kernel_notes["safe_values"])
        for key_node, buf, val_node, value in self.safe_value_pairs(a):
            if buf.name in given and given[buf.name] != value:
                raise self.error(val_node, f"T.annotate_safe_value: '{buf.name}' already has "
                                           f"the safe value {_show(given[buf.name])} in this "
                                           f"kernel; it has one for the whole kernel")
            given[buf.name] = value
        self.kernel_notes["safe_values"] = tuple(given.items())
        return []

    def dict_arg_pairs(self, a: _Args, name: str, what: str, value_of) -> list:
        """The (key node, key, value node, value) entries of a ``{buffer: value}`` argument
        ``name``: a dict literal, each value read by ``value_of``, or a dict computed
        before the kernel."""
        node = a.node(name)
        if isinstance(node, ast.Dict) and a.given(name):
            if None in node.keys:
                raise a.fail(name, f"{name} is a dict literal {{buffer: {what}, ...}} (no ** "
                                   "unpacking)")
            return [(k, self.expr(k), v, value_of(v)) for k, v in zip(node.keys, node.values)]
        value = a.value(name)
        if not isinstance(value, dict):
            raise a.fail(name, f"{name} is a dict {{buffer: {what}, ...}}, got {_show(value)}")
        return [(node, k, node, v) for k, v in value.items()]

    def safe_value_pairs(self, a: _Args) -> list:
        """A T.annotate_safe_value call's (key node, global tensor, value node, value)
        entries, a view's key naming its tensor."""
        pairs = self.dict_arg_pairs(a, "safe_value_map", "value", self.arg_value)
        out = []
        for key_node, ref, val_node, v in pairs:
            if not isinstance(ref, _BufferRef) or isinstance(ref, _VarRef):
                raise self.error(key_node, f"T.annotate_safe_value: the keys are global tensors, "
                                           f"got {_show(ref)}")
            buf = self.view_roots.get(ref.buffer.name, ref.buffer)
            if buf.scope != "global":
                raise self.error(key_node, f"T.annotate_safe_value: '{ref.buffer.name}' is a "
                                           f"{buf.scope} buffer; the value is what an "
                                           "out-of-bounds read of a global tensor gives (TileLang "
                                           "checks the bounds of global accesses only)")
            out.append((key_node, buf, val_node, self.safe_value(val_node, v, ref.buffer.name)))
        return out

    def sblock_stmt(self, s: ast.With, call: ast.Call) -> list[N.Stmt]:
        """``with T.sblock(name):`` inside a T.Kernel (TVM's block, as TileLang's programs
        write it to scope a safe-value map): its ``T.annotate_safe_value`` calls, standing
        directly in its body, are the block's map, which holds for the whole body (before
        the calls too) and overrides per tensor the kernel's and any enclosing block's
        (``SafeValueScope``; TileLang's lower_tile_op keeps a map per block).  ``T.reads``
        / ``T.writes`` are annotations nothing reads.  A block without a map is its body."""
        form = self.form_of(call.func)
        a = self.args(form, call)
        if not self.in_kernel:
            raise self.error(s, "`with T.sblock(...)` outside a T.Kernel: tilecute takes TVM's "
                                "block inside a kernel, as TileLang's programs write it (the "
                                "scope of a T.annotate_safe_value map)")
        if s.items[0].optional_vars is not None:
            raise self.error(s, "`with T.sblock(...)` binds no names")
        name = a.value("name")
        if not isinstance(name, str):
            raise a.fail("name", f"T.sblock's name is a string, got {_show(name)}")
        a.refuse_unless("no_realize", (False,), "TVM's unrealized block has no meaning in a "
                                                "TileLang kernel")
        maps = [st for st in s.body if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                and getattr(self.form_of(st.value.func), "__name__", None) == "annotate_safe_value"]
        rest = [st for st in s.body if not any(st is m for m in maps)] or [ast.Pass()]
        if not maps:
            self.sblock_depth += 1
            try:
                return list(self.block(rest))
            finally:
                self.sblock_depth -= 1
        values: dict[str, N.Expr] = {}
        for m in maps:
            form = self.form_of(m.value.func)
            for key_node, buf, val_node, value in self.safe_value_pairs(self.args(form, m.value)):
                if buf.name in values and values[buf.name] != value:
                    raise self.error(val_node, f"T.annotate_safe_value: '{buf.name}' already "
                                               f"has the safe value {_show(values[buf.name])} in "
                                               f"the block {name!r}")
                if buf.strides is not None:
                    raise self.error(key_node, f"T.annotate_safe_value in the block {name!r}: "
                                               f"'{buf.name}' has strides; tilecute scopes a "
                                               "block's safe value through a row-major view of "
                                               "the tensor (give the value in the T.Kernel body, "
                                               "for the whole kernel)")
                values[buf.name] = value
        self.push()
        self.sblock_depth += 1
        try:
            body = self.block(rest)
        finally:
            self.sblock_depth -= 1
            self.pop()
        return [N.SafeValueScope(name, tuple(values.items()), body, loc=self.loc(s))]

    def stmt_reads(self, a: _Args, s) -> list[N.Stmt]:
        return self.block_regions("reads", s)

    def stmt_writes(self, a: _Args, s) -> list[N.Stmt]:
        return self.block_regions("writes", s)

    def block_regions(self, form: str, s) -> list[N.Stmt]:
        """TVM's ``T.reads(...)`` / ``T.writes(...)`` in a ``with T.sblock(...)`` body:
        region annotations that TileLang's lowering does not read; nothing."""
        if not self.sblock_depth:
            raise self.error(s, f"T.{form} annotates a TVM block: it stands in a `with "
                                "T.sblock(...)` body")
        return []

    def stmt_annotate_l2_hit_ratio(self, a: _Args, s) -> list[N.Stmt]:
        """``T.annotate_l2_hit_ratio({A: 0.8})``: TileLang's ``l2_hit_ratio_map`` on the
        kernel's block, which its host code turns into an L2 access policy window over the
        tensor around the function's launches.  Keys are global tensor parameters (a view
        names its tensor, as TileLang keys the map by the buffer's data); a ratio is a
        number known when the kernel is built (TileLang's ``float(hit_ratio)``)."""
        if not self.in_kernel:
            raise self.error(s, "T.annotate_l2_hit_ratio is only valid inside a T.Kernel")
        pairs = self.dict_arg_pairs(a, "l2_hit_ratio_map", "ratio", self.expr)
        given = dict(self.kernel_notes["l2_hit_ratios"])
        for key_node, ref, val_node, v in pairs:
            if not isinstance(ref, _BufferRef) or isinstance(ref, _VarRef):
                raise self.error(key_node, f"T.annotate_l2_hit_ratio: the keys are global "
                                           f"tensors, got {_show(ref)}")
            buf = self.view_roots.get(ref.buffer.name, ref.buffer)
            if buf.scope != "global":  # (the validator refuses a global that is no parameter)
                raise self.error(key_node, f"T.annotate_l2_hit_ratio: '{ref.buffer.name}' is a "
                                           f"{buf.scope} buffer; persistent L2 applies to global "
                                           "tensors (TileLang asserts as much)")
            if isinstance(v, N.Const) and not N.is_int(v.dtype) or \
                    isinstance(v, (int, float)) and not isinstance(v, bool):
                ratio = float(v.value if isinstance(v, N.Const) else v)
            else:
                raise self.error(val_node, f"T.annotate_l2_hit_ratio: the hit ratio of "
                                           f"'{buf.name}' is a number known when the kernel is "
                                           f"built, got {_show(v)}")
            if not 0.0 <= ratio <= 1.0:
                raise self.error(val_node, f"T.annotate_l2_hit_ratio: the hit ratio of "
                                           f"'{buf.name}' is {ratio!r}; an access policy "
                                           "window's hitRatio is a fraction in [0, 1]")
            if buf.name in given and given[buf.name] != ratio:
                raise self.error(val_node, f"T.annotate_l2_hit_ratio: '{buf.name}' already has "
                                           f"the hit ratio {given[buf.name]!r} in this kernel")
            given[buf.name] = ratio
        self.kernel_notes["l2_hit_ratios"] = tuple(given.items())
        return []

    def safe_value(self, node, v, name: str) -> N.Expr:
        """A T.annotate_safe_value value as TVM types it (a Python float is a float32
        literal: rounded to float32 here)."""
        if isinstance(v, bool):
            return N.Const(v, "bool")
        if isinstance(v, int):
            return N.Const(v, "int32" if -2**31 <= v < 2**31 else "int64")
        if isinstance(v, float):
            f32 = struct.unpack("f", struct.pack("f", v))[0]
            if math.isinf(f32) and math.isfinite(v):
                raise self.error(node, f"T.annotate_safe_value: the value for '{name}', {v!r}, "
                                       "is past float32's range (TVM's float literal)")
            return N.Const(f32, "float32")
        if _is_ir(v) and not any(isinstance(x, (N.Load, N.Call)) for x in _walk_exprs(v)) and \
                all(not isinstance(x, N.Var) or x.name in self.symbols or x.name in self.scalar_params
                    for x in _walk_exprs(v)) and v.dtype in DTYPES:
            return v
        raise self.error(node, f"T.annotate_safe_value: the value for '{name}' is {_show(v)}; "
                               "tilecute takes a number, a typed constant or an expression of "
                               "the function's symbols and scalar parameters (it stands for every "
                               "out-of-bounds read of the kernel)")

    def reg_annotation(self, s, form: str, key: str, value) -> list[N.Stmt]:
        """A T.Kernel's register-budget annotation (``key`` of :class:`N.KernelScope`)."""
        if not self.in_kernel:
            raise self.error(s, f"T.{form} is only valid inside a T.Kernel")
        if self.kernel_notes[key] not in (0, True, value):
            raise self.error(s, f"T.{form}: the kernel already set it to {self.kernel_notes[key]}")
        self.kernel_notes[key] = value
        return []

    def stmt_annotate_producer_reg_dealloc(self, a: _Args, s) -> list[N.Stmt]:
        return self.reg_annotation(s, "annotate_producer_reg_dealloc", "producer_regs",
                                   a.static_int("reg_count", 24))

    def stmt_annotate_consumer_reg_alloc(self, a: _Args, s) -> list[N.Stmt]:
        return self.reg_annotation(s, "annotate_consumer_reg_alloc", "consumer_regs",
                                   a.static_int("reg_count", 24))

    def stmt_no_set_max_nreg(self, a: _Args, s) -> list[N.Stmt]:
        return self.reg_annotation(s, "no_set_max_nreg", "reg_alloc", False)

    def stmt_disable_warp_group_reg_alloc(self, a: _Args, s) -> list[N.Stmt]:
        return self.reg_annotation(s, "disable_warp_group_reg_alloc", "reg_alloc", False)

    # ---- while, scans, reducers, im2col (issue 17's corpus) -----------------------------
    def while_stmt(self, s: ast.While) -> list[N.Stmt]:
        """``while cond:`` with a condition computed in the kernel (TileLang's bounded
        while: the program makes it end)."""
        if s.orelse:
            raise self.error(s, "while-else is not supported")
        cond = self.expr(s.test)
        self.check_value(s.test, cond)
        if not _is_ir(cond):
            if not cond:
                return []
            raise self.error(s, "`while` with a condition that is true at parse time never ends")
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        self.push(kind="loop")
        body = self.block(s.body)
        self.pop()
        loop: tuple = (N.While(cond, body, loc=self.loc(s)),)
        if _has_break(body, _Continue):
            loop = self.continue_loop(loop[0], "while")
        if _has_break(loop[-1].body):
            loop = loop[:-1] + self.break_loop(loop[-1], "while")
        return list(loop)

    def whole_buffer(self, a: _Args, arg: str, what: str) -> N.Buffer:
        """A whole buffer argument (a region of all of it counts)."""
        node = a.node(arg)
        if isinstance(node, ast.Subscript):
            r = self.region(node)
            buf = self.buffer_named(r.buffer)
            full = all(isinstance(x, N.Const) and x.value == 0 for x in r.starts) and (
                r.extents is None or tuple(r.extents) == tuple(buf.shape))
            if not full or r.extents is None and buf.scope == "global":
                raise a.fail(arg, f"{what} takes a whole buffer; `{ast.unparse(node)}` is a part "
                                  f"of '{buf.name}' (allocate a buffer of the tile's shape)")
            return buf
        return self.buffer_of(node)

    def scan_operand(self, a: _Args, arg: str, what: str):
        """A T.cumsum / T.cummax operand: ``(buffer, None)`` for a whole buffer, or
        ``(buffer, region)`` for a part of a shared buffer with static extents (TileLang's
        BufferRegion operand, ``big[0:M, 0:N]``)."""
        node = a.node(arg)
        ref = self.lookup_local(node.id) if isinstance(node, ast.Name) else None
        if not (isinstance(node, ast.Subscript) or isinstance(ref, _RegionRef)):
            return self.buffer_of(node), None
        r = self.region(node)
        buf = self.buffer_named(r.buffer)
        if isinstance(node, ast.Subscript) and r.extents is None:
            # TileLang's scan reads a BufferLoad's region: one element has none (its
            # ValueError), never the whole buffer from there
            raise a.fail(arg, f"{what} takes a whole buffer or a part of a shared buffer "
                              f"(`s[0:M, 0:N]`); `{ast.unparse(node)}` is one element")
        if _whole_region(r, buf) or r.extents is None and buf.scope != "global" and all(
                isinstance(x, N.Const) and x.value == 0 for x in r.starts):
            return buf, None
        if buf.scope != "shared" or r.extents is None:
            raise a.fail(arg, f"{what} takes a whole buffer or a part of a shared buffer "
                              f"(`s[0:M, 0:N]`); `{ast.unparse(node)}` is "
                              + ("an element" if r.extents is None else
                                 f"a part of {buf.scope} buffer '{buf.name}'"))
        if not all(isinstance(e, N.Const) for e in r.extents):
            raise a.fail(arg, f"{what}: the extents of `{ast.unparse(node)}` must be known at "
                              "parse time (a part of a shared buffer is scanned through a "
                              "shared tile of its shape)")
        return buf, r

    def stmt_cumsum(self, a: _Args, s, kind: str = "sum") -> list[N.Stmt]:
        """A scan of whole shared/fragment buffers; a part of a shared buffer (either
        operand) is copied into a shared tile of its shape, scanned there and copied out to
        the destination part, so that the scan sees exactly the region's elements."""
        what = {"sum": "T.cumsum", "max": "T.cummax"}[kind]
        src, src_r = self.scan_operand(a, "src", what)
        given = a.given("dst") and not (isinstance(a.node("dst"), ast.Constant) and
                                        a.node("dst").value is None)
        dst, dst_r = self.scan_operand(a, "dst", what) if given else (src, src_r)
        for b, arg in ((src, "src"), (dst, "dst")):
            if b.scope not in ("shared", "fragment"):
                raise a.fail(arg, f"'{b.name}' is a {b.scope} buffer; {what} scans shared or "
                                  "fragment buffers")
        shape = lambda b, r: tuple(r.extents) if r is not None else tuple(b.shape)  # noqa: E731
        if shape(dst, dst_r) != shape(src, src_r) or dst.dtype != src.dtype:
            raise a.fail("dst", f"'{dst.name}' must have the shape and dtype of '{src.name}'"
                         + (" (of the parts given)" if src_r or dst_r else ""))
        if src.dtype == "bool":  # (TileLang 0.1.15 fails on it too: a bool vector type)
            raise a.fail("src", f"'{src.name}' is bool; {what} scans numbers")
        ndim = len(shape(src, src_r))
        dim = a.static_int("dim")
        if not -ndim <= dim < ndim:
            raise a.fail("dim", f"dim={dim} is out of range for '{src.name}', which has "
                                f"{ndim} dims")
        a.no_annotations()
        reverse, loc = a.static_bool("reverse"), self.loc(s)
        if src_r is None and dst_r is None:
            return [N.Scan(kind, src.name, dst.name, dim % ndim, reverse, loc=loc)]
        tile = N.Buffer(self.fresh(f"{src.name}_part"), src.dtype, shape(src, src_r), "shared")
        whole = lambda b: N.Region(b.name, tuple(N.Const(0, "int32") for _ in b.shape))  # noqa: E731
        return [N.Allocate(tile, loc=loc),
                N.Copy(src_r or whole(src), whole(tile), loc=loc, disable_tma=True),
                N.Scan(kind, tile.name, tile.name, dim % ndim, reverse, loc=loc),
                N.Copy(whole(tile), dst_r or whole(dst), loc=loc, disable_tma=True)]

    def stmt_cummax(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_cumsum(a, s, "max")

    def alloc_reducer(self, name: str, a: _Args, s) -> list[N.Stmt]:
        """TileLang's reducer: a fragment each thread holds whole (tilecute's physical plan
        for every reducer, TileLang's baseline).  ``replication="all"`` or ``"none"``
        (TileLang's legacy reducer; the two differ only in TileLang's physical plan):
        ``T.clear``/``T.fill``, ``r[i] += x`` in ``T.Parallel`` loops, an in-place
        ``T.finalize_reducer(r)``.  ``replication=None``: a reducer epoch
        (``T.reducer_init``, ``T.reducer_update``, ``T.finalize_reducer(acc, dst)``), or,
        used only with the legacy syntax, a legacy reducer as in TileLang."""
        op = a.value("op")
        replication = a.value("replication")
        if op not in N.REDUCER_OPS:
            raise a.fail("op", f"'{name}': op={op!r} is not one of TileLang's reducer ops "
                               f"{', '.join(N.REDUCER_OPS)}")
        if replication not in (None, "all", "none"):
            raise a.fail("replication", f"'{name}': replication={_show(replication)}: "
                                        "TileLang's legacy reducer takes \"all\" or \"none\"")
        # (TileLang's legacy reducer takes sum/max/min only; tilecute's takes the bitwise
        # ops on integers too: the printer writes every reducer, epochs included, with
        # replication="all", their lowered form being the legacy statements)
        bitwise = op in N.BITWISE_REDUCE_KINDS
        shape = a.value("shape")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise a.fail("shape", f"'{name}': the shape must be positive ints known at parse "
                                  f"time, got {shape!r}")
        dt = self.dtype_arg(a, "dtype", name)
        if bitwise and not N.is_int(dt):
            raise a.fail("dtype", f"'{name}': bitwise reducer op {op!r} requires an integer "
                                  f"dtype, got {dt}")
        layout = a.value("layout")
        if layout is not None and not isinstance(layout, N.Layout):
            raise a.fail("layout", f"'{name}': layout= takes a T.Layout(...), got {layout!r}")
        buf = N.Buffer(self.fresh(name), dt, tuple(N.Const(d, "int32") for d in shape), "fragment")
        self.bind(name, _BufferRef(buf))
        self.__dict__.setdefault("reducer_buffers", set()).add(buf.name)
        self.__dict__.setdefault("reducer_ops", {})[buf.name] = op
        if replication is None:
            self.epochs[buf.name] = {"mode": None, "op": op, "name": name, "init": None,
                                     "ctx": None, "seed": None, "final": False,
                                     "loc": self.loc(s)}
        return [N.Allocate(buf, layout, loc=self.loc(s), reducer=op)]

    # ---- reducer epochs (T.alloc_reducer without replication) ----------------------------
    def reducer_access(self, name: str, node, what: str) -> None:
        """A read, store or tile-op use of buffer ``name`` outside the epoch forms.  A
        reducer allocated without ``replication`` that T.reducer_init opened is reached only
        through T.reducer_update (and read through its T.finalize_reducer's ``dst``); one
        first used this way takes TileLang's legacy reducer syntax instead (sum/max/min)."""
        e = self.epochs.get(name)
        if e is None:
            return
        if e["mode"] == "epoch":
            verb = {"read": "illegal read of", "store": "illegal store to",
                    "use": "illegal use of"}[what]
            raise self.error(node, f"{verb} reducer '{e['name']}': a reducer opened by "
                                   "T.reducer_init is updated only by T.reducer_update(acc[...], "
                                   "v) inside T.Parallel loops, and its result is read from "
                                   "T.finalize_reducer(acc, dst)'s dst")
        if e["mode"] is None:
            if e["op"] in N.BITWISE_REDUCE_KINDS:
                raise self.error(node, f"reducer '{e['name']}' (op={e['op']!r}) used with the "
                                       "legacy reducer syntax: legacy (v1) reducers only support "
                                       "sum/max/min; open it with T.reducer_init")
            e["mode"] = "legacy"

    def epoch_of(self, a: _Args, arg: str, form: str) -> tuple[N.Buffer, dict]:
        node = a.node(arg)
        buf = self.buffer_of(node.value if isinstance(node, ast.Subscript) else node)
        e = self.epochs.get(buf.name)
        if e is None:
            raise a.fail(arg, f"'{buf.name}' is not a reducer of T.alloc_reducer without "
                              "replication (reducer epochs are opened on those)")
        if e["mode"] == "legacy":
            raise a.fail(arg, f"reducer '{e['name']}' is used with the legacy reducer syntax "
                              f"(T.clear/T.fill, stores, reads); {form} belongs to a reducer "
                              "epoch: do not mix the two on one reducer")
        return buf, e

    def stmt_reducer_init(self, a: _Args, s) -> list[N.Stmt]:
        """``T.reducer_init(acc, init=None)``: every thread's copy starts from the combine
        identity (a Fill); ``init`` (a Python number, or an expression of the reducer's dtype)
        is captured here (an expression into a local) and combined once per output by
        T.finalize_reducer."""
        buf, e = self.epoch_of(a, "reducer", "T.reducer_init")
        if e["mode"] == "epoch":
            raise self.error(s, f"double T.reducer_init of reducer '{e['name']}' (the first is "
                                f"at {e['init']}); an epoch opens once (put it in a loop to "
                                "reopen it each iteration)")
        e.update(mode="epoch", init=self.loc(s), ctx=self.context())
        identity = _reducer_identity(e["op"], buf.dtype)
        out: list[N.Stmt] = [N.Fill(N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape),
                                             tuple(buf.shape)), identity, loc=self.loc(s))]
        init = a.value("init")
        if init is None:
            return out
        if isinstance(init, (bool, int, float)) and not _is_ir(init):
            e["seed"] = N.const(init, buf.dtype)
            return out
        if not _is_ir(init):
            raise a.fail("init", f"init={_show(init)} is not a value of the reducer's dtype")
        if init.dtype != buf.dtype:
            raise a.fail("init", f"the init value's dtype {init.dtype} does not match reducer "
                                 f"'{e['name']}' dtype {buf.dtype} (a Python number converts)")
        if isinstance(init, N.Const):
            e["seed"] = init
            return out
        seed = N.Buffer(self.fresh(f"{e['name']}_init"), buf.dtype, (N.Const(1, "int32"),), "local")
        zero = (N.Const(0, "int32"),)
        e["seed"] = N.Load(seed.name, zero, buf.dtype)
        return [N.Allocate(seed, None, loc=self.loc(s)),
                N.Store(seed.name, zero, init, loc=self.loc(s))] + out

    def stmt_reducer_update(self, a: _Args, s) -> list[N.Stmt]:
        """``T.reducer_update(acc[i], v)``: ``acc[i] = combine(acc[i], v)`` in the
        enclosing T.Parallel loop, which runs each logical iteration once (on one thread,
        into that thread's copy)."""
        node = a.node("target")
        if not isinstance(node, ast.Subscript):
            raise a.fail("target", f"T.reducer_update expects `acc[indices]` as its first "
                                   f"argument, got `{ast.unparse(node)}`")
        buf, e = self.epoch_of(a, "target", "T.reducer_update")
        if e["mode"] != "epoch":
            raise self.error(s, f"T.reducer_update of reducer '{e['name']}' before "
                                "T.reducer_init")
        if e["final"]:
            raise self.error(s, f"T.reducer_update of reducer '{e['name']}' after its "
                                "T.finalize_reducer (the epoch is closed)")
        if not any(c[0] == "parallel" for c in self.context()):
            raise self.error(s, f"T.reducer_update of reducer '{e['name']}' outside any "
                                "T.Parallel loop: each logical iteration of a T.Parallel loop "
                                "contributes once; a statement outside one is ambiguous")
        idx = self.indices(node)
        if len(idx) != buf.ndim or any(isinstance(i, slice) for i in idx):
            raise a.fail("target", f"T.reducer_update takes one element of '{e['name']}' "
                                   f"({buf.ndim} indices), got `{ast.unparse(node)}`")
        value = a.value("value")
        if not _is_ir(value) and not isinstance(value, (bool, int, float)):
            raise a.fail("value", f"cannot contribute {_show(value)} to reducer '{e['name']}'")
        value = N.cast(N.as_expr(value, buf.dtype), buf.dtype)
        idx = tuple(idx)
        return [N.Store(buf.name, idx, _reducer_combine(e["op"], N.Load(buf.name, idx, buf.dtype),
                                                        value), loc=self.loc(s))]

    def finalize_epoch(self, a: _Args, s, buf: N.Buffer, e: dict) -> list[N.Stmt]:
        """``T.finalize_reducer(acc, dst)``: every thread's copy combined (FinalizeReducer),
        then ``dst[...] = combine(acc[...], init)`` over dst's elements (a T.Parallel loop)."""
        if e["mode"] != "epoch":
            raise self.error(s, f"T.finalize_reducer(acc, dst) of reducer '{e['name']}' before "
                                "T.reducer_init")
        if e["final"]:
            raise self.error(s, f"reducer '{e['name']}' is finalized twice")
        here, opened = self.context(), e["ctx"]
        if here[:len(opened)] != opened or any(c[0] != "if" for c in here[len(opened):]):
            raise self.error(s, f"T.finalize_reducer of reducer '{e['name']}' is not in the "
                                f"scope of its T.reducer_init ({e['init']}): they share the "
                                "enclosing loops (the finalize may sit in an if inside the "
                                "init's scope)")
        dst = self.buffer_of(a.node("dst"))
        if dst.scope != "fragment" or tuple(dst.shape) != tuple(buf.shape) or \
                dst.dtype != buf.dtype:
            raise a.fail("dst", f"dst '{dst.name}' must be a fragment of reducer "
                                f"'{e['name']}''s shape and dtype ({buf.dtype})")
        e["final"] = True
        loc = self.loc(s)
        vars_ = [N.Var(self.fresh("r"), "int32") for _ in buf.shape]
        value = N.Load(buf.name, tuple(vars_), buf.dtype)
        if e["seed"] is not None:
            value = _reducer_combine(e["op"], value, e["seed"])
        body: tuple = (N.Store(dst.name, tuple(vars_), value, loc=loc),)
        for v, d in reversed(list(zip(vars_, buf.shape))):
            body = (N.For(v, N.Const(0, "int32"), d, "parallel", body, loc=loc),)
        scratch = ""
        if a.value("scratch") is not None:
            scratch = self.buffer_of(a.node("scratch")).name
        return [N.FinalizeReducer(buf.name, scratch, loc=loc), *body]

    def check_epochs_closed(self) -> None:
        for e in self.epochs.values():
            if e["mode"] == "epoch" and not e["final"]:
                raise FrontendError(f"reducer '{e['name']}' is opened by T.reducer_init at "
                                    f"{e['init']} but never finalized (T.finalize_reducer(acc, "
                                    "dst))", e["loc"], self.fname)

    def stmt_finalize_reducer(self, a: _Args, s) -> list[N.Stmt]:
        buf = self.buffer_of(a.node("reducer"))
        if buf.name not in self.__dict__.get("reducer_buffers", ()):
            raise a.fail("reducer", f"'{buf.name}' is not a T.alloc_reducer buffer")
        self.batch_hint(a, math.prod(int(d.value) for d in buf.shape))
        a.no_annotations()
        e = self.epochs.get(buf.name)
        if a.value("dst") is not None:
            if e is None:
                raise a.fail("dst", f"dst=`{ast.unparse(a.node('dst'))}`: reducer '{buf.name}' "
                                    "has replication= (TileLang's legacy reducer, finalized in "
                                    "place: T.finalize_reducer(r))")
            return self.finalize_epoch(a, s, buf, e)
        if e is not None:
            if e["mode"] == "epoch":
                raise a.fail("dst", f"reducer '{e['name']}' was opened by T.reducer_init: its "
                                    "T.finalize_reducer takes the destination fragment (acc, dst)")
            self.reducer_access(buf.name, s, "use")
        scratch = ""
        if a.value("scratch") is not None:
            scratch = self.buffer_of(a.node("scratch")).name
        return [N.FinalizeReducer(buf.name, scratch, loc=self.loc(s))]

    def stmt_im2col(self, a: _Args, s) -> list[N.Stmt]:
        img, col = self.buffer_of(a.node("img")), self.buffer_of(a.node("col"))
        if img.scope != "global" or img.ndim != 4:
            raise a.fail("img", f"'{img.name}' must be a 4-d (N, H, W, C) tensor parameter")
        if col.scope not in ("shared", "fragment") or col.ndim != 2:
            raise a.fail("col", f"'{col.name}' must be a 2-d shared or fragment tile")
        if col.dtype != img.dtype:
            raise a.fail("col", f"'{col.name}' is {col.dtype} but '{img.name}' is {img.dtype}")
        a.refuse_unless("eviction_policy", (None, "evict_normal"),
                        "tilecute's im2col gather has no cache-eviction hint")
        a.no_annotations()
        steps = [self.arg_index(a.ref(n), "T.im2col") for n in ("nhw_step", "c_step")]
        return [N.Im2Col(img.name, col.name, steps[0], steps[1], a.static_int("kernel", 1),
                         a.static_int("stride", 1), a.static_int("dilation", 1),
                         a.static_int("pad", 0), loc=self.loc(s))]

    def stmt_c2d_im2col(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_im2col(a, s)

    # ---- regions ----------------------------------------------------------------------
    # ---- loop_break, vector atomics, device print and assert (issue 17) -----------------
    def stmt_loop_break(self, a: _Args, s) -> list[N.Stmt]:
        return [_Break(loc=self.loc(s))]

    def stmt_thread_return(self, a: _Args, s) -> list[N.Stmt]:
        return [_Return(loc=self.loc(s))]

    def fold_thread_returns(self, body: tuple) -> tuple:
        """The T.Kernel body with each ``if`` whose branch ends in ``T.thread_return()``
        running what follows it in its other branch (TileLang's CuTe DSL lowering).  What
        follows may not hold tile ops, T.Parallel / T.Pipelined loops or barriers (they
        need every thread of the block, and the threads that returned never reach them),
        unless the whole block leaves together (:meth:`block_exits`).
        A T.thread_return() inside a per-thread loop (T.serial, T.unroll, range, while:
        TileLang's CUDA ``return;`` leaves the kernel from there) sets a per-thread
        ``returned`` flag instead: the rest of the loop body, the loop's later iterations
        and everything after the loop run only while it is clear (:func:`_guard_returns`);
        the loop may then hold no collective statement either (a thread that returned in
        one iteration would miss it in the next).  One in a T.Parallel / T.Pipelined loop
        or a T.ws region is refused."""
        if not any(isinstance(x, _Return) for x in walk_stmts(body)):
            return body
        if self.block_exits(body):
            return _fold_continues(body, _Return)
        first = next(k for k, x in enumerate(body)
                     if any(isinstance(y, _Return) for y in walk_stmts((x,))))
        where = body[first].loc

        def refuse_collectives(stmts, what: str):
            for x in walk_stmts(stmts):
                if _collective(x):
                    raise FrontendError(
                        f"{what} needs every thread of the block (a tile op, a T.Parallel "
                        "or T.Pipelined loop, a barrier), and the threads that returned "
                        "never reach it; return only past the block's collective work, or "
                        "guard the per-thread statements with an `if` instead "
                        f"(T.thread_return() at line {where.line if where else '?'})",
                        x.loc, self.fname, linecache.getline(x.loc.file, x.loc.line) if x.loc else "")
        refuse_collectives(body[first + 1:], "a statement after T.thread_return()")
        folded = _fold_continues(body, _Return)
        left = next((x for x in walk_stmts(folded) if isinstance(x, _Return)), None)
        if left is None:
            return folded
        for x in walk_stmts(folded):  # the scopes a return stays inside
            if isinstance(x, (N.For, N.While, N.WarpGroups)) and \
                    any(isinstance(y, _Return) for y in walk_stmts((x,))):
                kind = "a T.ws region" if isinstance(x, N.WarpGroups) else \
                    f"a T.{x.kind.capitalize()} loop" if isinstance(x, N.For) and \
                    x.kind in ("parallel", "pipelined") else None
                if kind is not None:
                    raise FrontendError(
                        f"T.thread_return() inside {kind}: tilecute honors it as the last "
                        "statement of an `if` branch in the T.Kernel body, or inside a "
                        "per-thread loop (T.serial, T.unroll, range, while) with no "
                        "collective statement in the loop or after it", left.loc, self.fname,
                        linecache.getline(left.loc.file, left.loc.line) if left.loc else "")
        refuse_collectives(body[first:first + 1], "a statement in the loop that holds a "
                                                  "T.thread_return()")
        i32 = lambda v: N.Const(v, "int32")  # noqa: E731
        flag = N.Buffer(self.fresh("returned"), "int32", (i32(1),), "local")
        return tuple(body[:first]) + (N.Allocate(flag, loc=where),
                                      N.Store(flag.name, (i32(0),), i32(0), loc=where)) + \
            _guard_returns(tuple(body[first:]), flag.name, where)

    def block_exits(self, body: tuple) -> bool:
        """Does every T.thread_return() in the T.Kernel body end a branch of an ``if`` at
        the body's top level (or nested in such a branch, no loop between) whose condition
        every thread of the block evaluates alike (:meth:`alike_in_block`)?  Then the whole
        block leaves together (``if expert_ids[bx] < 0: T.thread_return()``, a fused MoE's
        padding block), and what follows runs in the other branch with every thread of the
        block, its collective work (tile ops, T.Pipelined loops, barriers) included."""
        alike = self.alike_in_block(body)

        def exits(stmts) -> bool:
            for x in stmts:
                if isinstance(x, _Return) or not any(isinstance(y, _Return) for y in walk_stmts((x,))):
                    continue
                if not (isinstance(x, N.If) and alike(x.cond) and exits(x.then) and exits(x.orelse)):
                    return False
            return True
        return exits(body)

    def alike_in_block(self, body: tuple):
        """A test of whether an expression of the T.Kernel body ``body`` has one value for
        every thread of the block: built from constants, block indices, scalar parameters
        and symbolic dims, global tensors read at such indices, names bound to such values,
        and local variables (``T.alloc_var`` / ``T.alloc_local``) only ever set by
        statements at the body's top level to such values; not the thread index, a shared
        or fragment buffer, a shuffle, vote, warp reduction or atomic's result."""
        scopes = {x.buffer.name: x.buffer.scope for x in walk_stmts(body) if isinstance(x, N.Allocate)}
        top = {id(x) for x in body}
        sets: dict[str, list] = {}  # a local buffer -> the (indices, value) set at the top level
        others: set[str] = set()  # buffers some other statement names (writes, maybe)
        for x in walk_stmts(body):
            if isinstance(x, N.Store) and id(x) in top:
                sets.setdefault(x.buffer, []).append((x.indices, x.value))
            elif not isinstance(x, N.Allocate):
                others.update(v.buffer if isinstance(v, N.Region) else v for v in vars(x).values()
                              if isinstance(v, (str, N.Region)))
        local = {n for n in sets if scopes.get(n, "").startswith("local") and n not in others}

        def alike(e, seen=frozenset()) -> bool:
            if isinstance(e, N.Call) and e.name in _PER_THREAD_CALLS:
                return False
            if isinstance(e, N.Var) and e.name in self.let_values and e.name not in seen:
                return alike(self.let_values[e.name], seen | {e.name})
            if isinstance(e, N.Load) and scopes.get(e.buffer, "global") != "global" and \
                    e.buffer not in local:
                return False
            if isinstance(e, N.Expr):
                return all(alike(v, seen) for v in vars(e).values())
            if isinstance(e, tuple):
                return all(alike(v, seen) for v in e)
            return True
        changed = True
        while changed:  # a local set from another local that is not alike is not alike
            changed = False
            for n in sorted(local):
                if not all(alike(idx) and alike(v) for idx, v in sets[n]):
                    local.discard(n)
                    changed = True
        return alike

    def stmt_atomic_addx2(self, a: _Args, s, lanes: int = 2) -> list[N.Stmt]:
        """``T.atomic_addx2/x4(dst, value)``: the ``lanes`` elements from ``dst`` and from
        ``value`` along their last dims; each added atomically, as scalar atomic adds
        (``return_prev=True`` as a statement: the same update, its old values unused)."""
        a.static_bool("return_prev")
        dbuf, vbuf, dsts, vals = self.addx_lanes(a, lanes)
        return [N.AtomicAdd(N.Region(dbuf.name, d), N.cast(N.Load(vbuf.name, v, vbuf.dtype), dbuf.dtype),
                            loc=self.loc(s)) for d, v in zip(dsts, vals)]

    def vector_atomic_return(self, target: ast.Subscript, form, call: ast.Call, s) -> list[N.Stmt]:
        """``Prev[i:i + 2] = T.atomic_addx2(dst, value, return_prev=True)`` (``x4``: 4):
        TileLang's ``AtomicAddx2Ret`` / ``x4Ret``, whose value is the ``lanes`` elements of
        ``dst`` before the adds (a ``dst``-dtype vector; each element's add atomic on its
        own, as CUDA's ``half2`` / ``float4`` atomics are), stored into ``lanes`` elements
        along the target's last dim: one ``atomic_add_ret`` per lane, each stored into its
        element.  Only this assignment form takes the vector (anywhere else the call is
        refused as a statement form in an expression)."""
        olds = self.vector_atomic_lanes(form, call).lanes
        lanes, dtype = len(olds), olds[0].dtype
        tbuf = self.buffer_of(target.value)
        r = self.region(target)
        extents = r.extents if r.extents is not None else (N.Const(1, "int32"),) * tbuf.ndim
        if not all(isinstance(x, N.Const) for x in extents) or \
                any(x.value != 1 for x in extents[:-1]) or extents[-1].value != lanes:
            raise self.error(s, f"T.atomic_addx{lanes}(..., return_prev=True) is {lanes} "
                                f"{dtype} values, stored into a region of {lanes} "
                                f"'{tbuf.name}' elements along the last dim; got "
                                f"`{ast.unparse(target)}`")
        if tbuf.dtype != dtype:
            raise self.error(s, f"T.atomic_addx{lanes}(..., return_prev=True) is a {dtype}"
                                f"x{lanes} vector; '{tbuf.name}' is {tbuf.dtype} (TileLang "
                                "stores the vector unconverted: use a buffer of the same dtype)")
        out = []
        for k, old in enumerate(olds):
            idx = r.starts[:-1] + (N.binop("add", r.starts[-1], N.Const(k, "int32")) if k
                                   else r.starts[-1],)
            out.append(self.store_value(tbuf, idx, old, s))
        return out

    def vector_atomic_lanes(self, form, call: ast.Call) -> "VL.LaneVector":
        """The old values ``T.atomic_addx2/x4(dst, value, return_prev=True)`` returns: one
        ``atomic_add_ret`` a lane (each element's add atomic on its own, as CUDA's ``half2``
        / ``float4`` atomics are), a ``dst``-dtype vector."""
        lanes = 2 if form.__name__ == "atomic_addx2" else 4
        a = self.args(form, call)
        if not (a.given("return_prev") and a.static_bool("return_prev")):
            raise a.fail("return_prev", f"T.atomic_addx{lanes} returns the old values only with "
                                        "return_prev=True; without it, it is a statement")
        dbuf, vbuf, dsts, vals = self.addx_lanes(a, lanes)
        if dbuf.dtype not in N.ATOMIC_RETURN_DTYPES["add"]:
            raise a.fail("dst", f"return_prev=True: '{dbuf.name}' is {dbuf.dtype}")
        return VL.LaneVector(tuple(
            N.Call("atomic_add_ret", (N.Load(dbuf.name, d, dbuf.dtype),
                                      N.cast(N.Load(vbuf.name, v, vbuf.dtype), dbuf.dtype),
                                      N.Const(0, "int32")),  # relaxed
                   dbuf.dtype) for d, v in zip(dsts, vals)))

    def addx_lanes(self, a: _Args, lanes: int):
        """``T.atomic_addx2/x4``'s operands: the dst and value buffers and the ``lanes``
        element indices of each, consecutive along the last dim from the element (or the
        region of ``lanes`` elements) given."""
        dst, value = self.region(a.node("dst")), self.region(a.node("value"))
        dbuf, vbuf = self.buffer_named(dst.buffer), self.buffer_named(value.buffer)
        for r, arg in ((dst, "dst"), (value, "value")):
            if r.extents is not None and not (all(N.Const(1, "int32") == x for x in r.extents[:-1])
                                              and r.extents[-1] == N.Const(lanes, "int32")):
                raise a.fail(arg, f"the region must be {lanes} elements along the last dim")
        if dbuf.dtype not in ("float16", "bfloat16", "float32"):
            raise a.fail("dst", f"'{dbuf.name}' is {dbuf.dtype}; T.atomic_addx{lanes} adds "
                                "float16, bfloat16 or float32 elements")
        if dbuf.scope not in ("global", "shared"):
            raise a.fail("dst", f"'{dbuf.name}' is a {dbuf.scope} buffer; atomics target global "
                                "or shared memory")
        step = lambda st, k: st[:-1] + (N.binop("add", st[-1], k) if k else st[-1],)  # noqa: E731
        return (dbuf, vbuf, [step(dst.starts, k) for k in range(lanes)],
                [step(value.starts, k) for k in range(lanes)])

    # ---- TileLang's explicit-width accesses (backend/language/bits.py) -----------------
    def access_elements(self, node, form: str, bits: int, space: str):
        """The buffer and the element indices a ``bits``-bit access at ``node`` (an element
        ``x[i, j]``, whose address it starts at as TileLang's pointer does, or a region)
        covers: consecutive along the last dim."""
        r = self.region(node)
        buf = self.buffer_named(r.buffer)
        scope = "global" if space == "global" else "shared"
        if buf.scope != scope:
            raise self.error(node, f"T.{form}: '{buf.name}' is a {buf.scope} buffer; T.{form} "
                                   f"accesses {scope} memory")
        if buf.strides is not None and not N.Const(1, "int32") == buf.strides[-1]:
            raise self.error(node, f"T.{form}: '{buf.name}' has a declared last stride; the "
                                   "access needs its elements contiguous")
        try:
            eb = B.element_bits(buf.dtype, f"T.{form}")
        except TypeError as e:
            raise self.error(node, str(e)) from None
        if bits % eb:
            raise self.error(node, f"T.{form}: {bits} bits are not a whole number of "
                                   f"'{buf.name}' elements ({buf.dtype})")
        count = bits // eb
        if r.extents is not None:
            total = 1
            for x in r.extents:
                total = total * x.value if isinstance(x, N.Const) and total is not None else None
            if total is not None and total * eb != bits or \
                    any(not N.Const(1, "int32") == x for x in r.extents[:-1]):
                raise self.error(node, f"T.{form}: the region must be {count} '{buf.name}' "
                                       f"elements along the last dim ({bits} bits)")
        idx = [r.starts[:-1] + (N.binop("add", r.starts[-1], k) if k else r.starts[-1],)
               for k in range(count)]
        return buf, idx

    def wide_load(self, fn, node: ast.Call):
        """``T.ldg32/64/128/256(src, pred=None)``, ``T.lds32/64/128(src)``: the words read,
        through a local copy made before the statement (where ``pred`` is false, zeros and
        no read); ``T.__ldg(x[i])`` / ``T.__ldg(x, i)``: the element load."""
        bits, space = fn.wide_load
        form = fn.__name__
        if bits == 0:  # T.__ldg
            a = _Args(self, form, inspect.Signature([
                inspect.Parameter("load_or_buf", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                inspect.Parameter("index", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]),
                node)
            src = a.node("load_or_buf")
            if a.given("index"):
                index = a.value("index")
                index = list(index) if isinstance(index, (list, tuple)) else [index]
                buf = self.buffer_of(src)
                if len(index) != buf.ndim:
                    raise a.fail("index", f"'{buf.name}' has {buf.ndim} dims, the index {len(index)}")
                idx = tuple(N.cast(N.as_expr(i), "int32") for i in index)
            else:
                r = self.region(src)
                buf = self.buffer_named(r.buffer)
                if r.extents is not None or not isinstance(src, ast.Subscript):
                    raise a.fail("load_or_buf", "T.__ldg reads one element: `T.__ldg(x[i])` or "
                                                "`T.__ldg(x, i)`")
                idx = r.starts
            if buf.scope != "global":
                raise a.fail("load_or_buf", f"'{buf.name}' is a {buf.scope} buffer; T.__ldg "
                                            "reads global memory")
            return N.Load(buf.name, tuple(idx), buf.dtype)
        a = _Args(self, form, fn.__signature__, node)
        if self.pending is None:
            raise self.error(node, f"T.{form} may stand in an assignment, a store, an expression "
                                   "statement or an if condition only (its read runs once, "
                                   "before the statement)")
        if not self.in_kernel:
            raise self.error(node, f"T.{form} is only valid inside a T.Kernel")
        buf, idx = self.access_elements(a.node("src"), form, bits, space)
        words = B.pack([N.Load(buf.name, tuple(i), buf.dtype) for i in idx], buf.dtype)
        local = N.Buffer(self.fresh(f"{form}_words"), "uint32", (N.Const(len(words), "int32"),),
                         "local")
        loc = self.loc(node)
        fill = lambda ws: tuple(N.Store(local.name, (N.Const(k, "int32"),), w, loc=loc)  # noqa: E731
                                for k, w in enumerate(ws))
        body = fill(words)
        if a.given("pred") and a.value("pred") is not None:
            pred = a.value("pred")
            if not (_is_ir(pred) or isinstance(pred, bool)):
                raise a.fail("pred", f"expected a condition, got {_show(pred)}")
            pred = N.as_expr(pred)
            zeros = fill([N.Const(0, "uint32")] * len(words))
            body = (N.If(pred, body, zeros, loc=loc),) if not isinstance(pred, N.Const) else \
                (body if pred.value else zeros)
        self.pending += [N.Allocate(local, loc=loc), *body]
        loads = tuple(N.Load(local.name, (N.Const(k, "int32"),), "uint32") for k in range(len(words)))
        return loads[0] if len(loads) == 1 else B.Words(loads)

    def wide_store(self, a: _Args, s, bits: int, space: str) -> list[N.Stmt]:
        """``T.stg*/T.sts*(dst, value[, pred])``: the value's bits stored as the elements
        from ``dst`` on (under ``if pred`` when given)."""
        form = a.name
        buf, idx = self.access_elements(a.node("dst"), form, bits, space)
        try:
            words = B.as_words(a.value("value"), bits, f"T.{form}")
        except TypeError as e:
            raise a.fail("value", str(e)) from None
        loc = self.loc(s)
        stores = [N.Store(buf.name, tuple(i), v, loc=loc)
                  for i, v in zip(idx, B.unpack(words, buf.dtype))]
        if "pred" in a.sig.parameters and a.value("pred") is not None:
            pred = a.value("pred")
            if not (_is_ir(pred) or isinstance(pred, bool)):
                raise a.fail("pred", f"expected a condition, got {_show(pred)}")
            pred = N.as_expr(pred)
            if isinstance(pred, N.Const):
                return stores if pred.value else []
            return [N.If(pred, tuple(stores), loc=loc)]
        return stores

    def stmt_atomic_addx4(self, a: _Args, s) -> list[N.Stmt]:
        return self.stmt_atomic_addx2(a, s, 4)

    def stmt_stg32(self, a, s): return self.wide_store(a, s, 32, "global")  # noqa: E704
    def stmt_stg64(self, a, s): return self.wide_store(a, s, 64, "global")  # noqa: E704
    def stmt_stg128(self, a, s): return self.wide_store(a, s, 128, "global")  # noqa: E704
    def stmt_stg256(self, a, s): return self.wide_store(a, s, 256, "global")  # noqa: E704
    def stmt_sts32(self, a, s): return self.wide_store(a, s, 32, "shared")  # noqa: E704
    def stmt_sts64(self, a, s): return self.wide_store(a, s, 64, "shared")  # noqa: E704
    def stmt_sts128(self, a, s): return self.wide_store(a, s, 128, "shared")  # noqa: E704

    def stmt_print(self, a: _Args, s) -> list[N.Stmt]:
        """TileLang's ``T.print``: a value, a buffer, or the message alone."""
        msg = a.value("msg")
        if not isinstance(msg, str):
            raise a.fail("msg", f"msg must be a string, got {_show(msg)}")
        loc = self.loc(s)
        if a.value("buffer") is not None or a.value("index") is not None:  # lowered IR
            name, index = a.value("buffer"), a.value("index")
            if not isinstance(name, str) or not _is_ir(N.as_expr(index)):
                raise a.fail("buffer", "buffer (a name) and index go together")
            return [N.DevicePrint(msg, N.as_expr(a.value("obj")), name, N.as_expr(index), loc=loc)]
        if not a.given("obj") or a.value("obj") is None:
            if not msg:
                raise a.fail("msg", "T.print() without a value prints its msg, which must not "
                                    "be empty")
            return [N.DevicePrint(msg, loc=loc)]
        obj = a.value("obj")
        if not isinstance(obj, _BufferRef):
            self.check_value(a.node("obj"), obj)
            value = N.as_expr(obj)
            from ..ir.printer import expr_str
            return [N.DevicePrint(msg or f"expr<{expr_str(value)}>", value, loc=loc)]
        buf = obj.buffer
        lane = a.static_int("warp_group_id", 0) * 128 + a.static_int("warp_id", 0) * 32
        if buf.scope != "global" and not msg:
            msg = f"buffer<{buf.name}, {buf.dtype}>"
        elems = 1
        for d in buf.shape:
            if not isinstance(d, N.Const):
                raise a.fail("obj", f"T.print of '{buf.name}' needs a static shape")
            elems *= int(d.value)
        out: list[N.Stmt] = []
        source = buf
        if buf.scope == "fragment":  # every thread copies its part to shared, one prints
            source = N.Buffer(self.fresh(f"{buf.name}_print"), buf.dtype, buf.shape, "shared")
            out.append(N.Allocate(source, loc=loc))
            whole = N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape))
            out.append(N.Copy(whole, N.Region(source.name, whole.starts), loc=loc))
        i = N.Var(self.fresh("print_i"), "int32")
        coords, rest = [], elems
        for d in buf.shape:
            rest //= int(d.value)
            flat = N.binop("floordiv", i, rest) if rest > 1 else i
            coords.append(N.binop("mod", flat, d) if int(d.value) > 1 else N.Const(0, "int32"))
        element = N.DevicePrint(msg, N.Load(source.name, tuple(coords), buf.dtype), buf.name, i,
                                loc=loc)
        body: N.Stmt = N.For(i, N.Const(0, "int32"), N.Const(elems, "int32"), "serial",
                             (element,), loc=loc)
        if buf.scope in ("shared", "fragment"):
            threads = self.kernel_threads if isinstance(self.kernel_threads, tuple) else \
                (self.kernel_threads,)
            cond = [N.cmp("eq", N.Call("thread_idx", (N.Const(0, "int32"),), "int32"), lane)]
            cond += [N.cmp("eq", N.Call("thread_idx", (N.Const(d, "int32"),), "int32"), 0)
                     for d in range(1, len(threads))]
            body = N.If(cond[0] if len(cond) == 1 else N.Logic("and", tuple(cond)), (body,),
                        loc=loc)
        return out + [body]

    def stmt_assume(self, a: _Args, s) -> list[N.Stmt]:
        """``T.assume(cond)`` (forms.assume): parse-time false is an error; ``N % k == 0``
        on a symbol of the function's shapes becomes the symbol's ``multiple_of`` (checked
        at launch); another condition the host can evaluate (``N.is_host_condition``: the
        symbols and integer / bool scalar params only) where no loop or branch encloses it
        goes to ``PrimFunc.assumes``, which the launcher checks at every call, as TileLang
        checks such an assume at run time (its ``RuntimeError`` "Assume: ..."; a top-level
        ``N % k == 0`` too, its ``k`` then left out of the symbol's binding check).  Inside
        a ``T.Kernel`` it is also a statement, ``Evaluate(Call("assume", (cond,)))``, that
        emits no code: the bounds checks (codegen/bounds.py) take it as a fact for the rest
        of its body, as TileLang's LegalizeSafeMemoryAccess trusts an assume over its
        scope."""
        cond = a.value("cond")
        self.check_value(a.node("cond"), cond)
        if not _is_ir(cond):
            if not cond:
                raise a.fail("cond", f"`{ast.unparse(a.node('cond'))}` is false at compile time")
            return []
        if isinstance(cond, N.Const):
            if not cond.value:
                raise a.fail("cond", f"`{ast.unparse(a.node('cond'))}` is false at compile time")
            return []
        return self.assume_condition(cond, s)

    def host_condition(self, cond: N.Expr) -> bool:
        """``cond`` reads only the function's symbols and integer / bool scalar parameters
        (``N.is_host_condition``): the launcher can check it before the launch."""
        names = N.host_condition_names(self.symbols.values(), self.scalar_vars.values(),
                                       self.pointers)
        return N.is_host_condition(cond, names)

    def assume_condition(self, cond: N.Expr, s) -> list[N.Stmt]:
        """A run-time condition assumed (``T.assume``) or asserted at the top level: a
        symbol's ``multiple_of`` for ``N % k == 0``, a host check (``PrimFunc.assumes``)
        where no loop or branch encloses it, a fact for the bounds checks in a kernel."""
        divisor = N.assumed_divisor(cond)
        if divisor is not None and divisor[0] in self.symbols \
                and self.symbols[divisor[0]] == cond.a.a:
            name, k = divisor
            self.assumed_divisors[name] = math.lcm(self.assumed_divisors.get(name, 1), k)
        if not self.context() and cond not in self.host_assumes and self.host_condition(cond):
            self.host_assumes.append(cond)
        if not self.in_kernel:
            return []
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        return [N.Evaluate(N.Call("assume", (cond,), "bool"), loc=self.loc(s))]

    def stmt_device_assert(self, a: _Args, s) -> list[N.Stmt]:
        cond = a.value("condition")
        self.check_value(a.node("condition"), cond)
        cond = N.as_expr(cond)
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        msg = a.value("msg")
        if not isinstance(msg, str):
            raise a.fail("msg", f"msg must be a string, got {_show(msg)}")
        if not a.static_bool("no_stack_info"):  # TileLang appends where the assert stands
            msg += f"\n  at {self.filename}:{self.loc(s).line} in {self.fname}\n"
        return [N.DeviceAssert(cond, msg, loc=self.loc(s))]

    def break_loop(self, loop, kind: str) -> tuple:
        """A loop whose body runs ``T.loop_break()``: a ``while`` over a counter and a flag
        that the break sets; the statements after a break that may have run are guarded
        by the flag (CuTe DSL's loops have no ``break``)."""
        where = next(b for b in walk_stmts(loop.body) if isinstance(b, _Break))
        if kind not in ("serial", "unrolled", "while"):
            raise FrontendError(f"T.loop_break inside a {kind} loop: TileLang's loop_break "
                                "leaves a serial loop (T.serial, T.unroll, range, while)",
                                where.loc, self.fname)
        loc = loop.loc
        i32 = lambda v: N.Const(v, "int32")  # noqa: E731
        flag = N.Buffer(self.fresh("broke"), "int32", (i32(1),), "local")
        out: list[N.Stmt] = [N.Allocate(flag, loc=loc), N.Store(flag.name, (i32(0),), i32(0), loc=loc)]
        running = N.cmp("eq", N.Load(flag.name, (i32(0),), "int32"), 0)
        body = _guard_breaks(loop.body, flag.name, loc)
        if isinstance(loop, N.While):
            cond = N.Logic("and", (loop.cond, running))
        else:
            it = N.Buffer(self.fresh(f"{loop.var.name}_it"), "int32", (i32(1),), "local")
            out += [N.Allocate(it, loc=loc), N.Store(it.name, (i32(0),), loop.start, loc=loc)]
            now = N.Load(it.name, (i32(0),), "int32")
            cond = N.Logic("and", (N.cmp("lt", now, N.binop("add", loop.start, loop.extent)), running))
            body = (N.Let(loop.var, now, loc=loc),) + body + (
                N.Store(it.name, (i32(0),), N.binop("add", now, 1), loc=loc),)
        return tuple(out) + (N.While(cond, body, loc=loc),)

    def continue_loop(self, loop, kind: str) -> tuple:
        """A loop whose body runs ``continue`` (TileLang's ``tirx.continue_loop()``): a
        local flag cleared at the start of each iteration and set by the continue; the
        statements after a continue that may have run are guarded by it (CuTe DSL's loops
        have no ``continue``)."""
        where = next(b for b in walk_stmts(loop.body) if isinstance(b, _Continue))
        if kind == "parallel":  # TileLang: a continue in the thread's loop over its elements
            return (dataclasses.replace(loop, body=_fold_continues(loop.body)),)
        if kind not in ("serial", "unrolled", "while"):
            raise FrontendError(f"`continue` inside a {kind} loop: TileLang continues a serial "
                                "loop (T.serial, T.unroll, range, while) or skips a T.Parallel "
                                "element", where.loc, self.fname)
        loc = loop.loc
        zero = N.Const(0, "int32")
        flag = N.Buffer(self.fresh("skipped"), "int32", (N.Const(1, "int32"),), "local")
        body = (N.Store(flag.name, (zero,), zero, loc=loc),) + \
            _guard_breaks(loop.body, flag.name, loc, _Continue)
        return (N.Allocate(flag, loc=loc), dataclasses.replace(loop, body=body))

    def region_truths(self, node: ast.Call, name: str) -> tuple:
        """The truth (``x != 0``) of each element ``T.any_of`` / ``T.all_of`` reads: a whole
        buffer in row-major order, or a region along its last dim (TileLang's)."""
        a = _Args(self, name, inspect.Signature([inspect.Parameter(
            "buffer", inspect.Parameter.POSITIONAL_OR_KEYWORD)]), node)
        r = self.region(a.node("buffer"))
        buf = self.buffer_named(r.buffer)
        if r.extents is None and isinstance(a.node("buffer"), ast.Subscript):
            extents = tuple(N.Const(1, "int32") for _ in buf.shape)  # one element
        else:
            extents = r.extents if r.extents is not None else buf.shape
        if r.extents is not None and any(not (isinstance(x, N.Const) and x.value == 1)
                                         for x in r.extents[:-1]):
            raise a.fail("buffer", f"T.{name} of a region reads along its last dim only "
                                   "(the other extents must be 1), as in TileLang")
        if not all(isinstance(x, N.Const) for x in extents):
            raise a.fail("buffer", f"T.{name} needs a static number of elements")
        sizes = [int(x.value) for x in extents]
        total = 1
        for x in sizes:
            total *= x
        if total > 1024:
            raise a.fail("buffer", f"T.{name} reads {total} elements; tilecute unrolls at most 1024")
        out = []
        for f in range(total):
            idx, rest = [], total
            for st, x in zip(r.starts, sizes):
                rest //= x
                k = (f // rest) % x
                idx.append(N.binop("add", st, k) if k else st)
            v = N.Load(buf.name, tuple(idx), buf.dtype)
            out.append(v if buf.dtype == "bool" else N.cmp("ne", v, 0))
        return tuple(out)

    def is_slice_of_buffer(self, node: ast.Subscript) -> bool:
        """``node`` is a buffer subscripted with at least one slice (a region)."""
        base = self.lookup_local(node.value.id) if isinstance(node.value, ast.Name) else None
        if not isinstance(base, _BufferRef) or isinstance(base, _VarRef):
            return False
        return any(isinstance(i, slice) for i in self.indices(node))

    def region(self, node) -> N.Region:
        r = self.region_of(node)
        self.reducer_access(r.buffer, node, "use")
        return r

    def region_of(self, node) -> N.Region:
        if isinstance(node, ast.Name):
            ref = self.lookup(node.id, node)
            if isinstance(ref, _RegionRef):
                return ref.region
        if isinstance(node, ast.Subscript) and isinstance(
                self.python_value(node.value), (list, tuple, dict)):
            # `accs[h]` of a Python list of buffers: the item (a buffer or a region alias);
            # a whole buffer as its full region (`accs_0[0:64, 0:64]`), not the element form
            # a subscript of a buffer is
            item = self.expr(node)
            if isinstance(item, _RegionRef):
                return item.region
            buf = self.buffer_of(node)
            return N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape),
                            tuple(N.as_expr(d) for d in buf.shape))
        if isinstance(node, ast.Subscript):
            buf = self.buffer_of(node.value)
            idx = self.indices(node)
            if len(idx) != buf.ndim:
                raise self.error(node, f"'{buf.name}' has {buf.ndim} dims but the region names "
                                       f"{len(idx)}")
            if any(isinstance(i, VL.LaneVector) for i in idx):
                return self.ramp_region(node, buf, idx)
            if any(isinstance(i, slice) for i in idx):
                starts, extents = [], []
                for i, d in zip(idx, buf.shape):
                    if isinstance(i, slice):
                        start = i.start if i.start is not None else N.Const(0, "int32")
                        stop = i.stop if i.stop is not None else d
                        starts.append(start)
                        extents.append(self.extent(stop, start))
                    else:
                        starts.append(i)
                        extents.append(N.Const(1, "int32"))
                return N.Region(buf.name, tuple(starts), tuple(extents))
            return N.Region(buf.name, tuple(idx))
        value = self.expr(node) if isinstance(node, ast.Call) else None
        if isinstance(value, _RegionRef):  # `T.copy(tile_of(X, i), s)`: a macro's region
            return value.region
        buf = self.buffer_of(node, value)
        return N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape))

    def buffer_of(self, node, value=None) -> N.Buffer:
        """The buffer ``node`` names (``value``: its value, when the caller has it)."""
        v = value if value is not None else self.expr(node) if not isinstance(node, ast.Name) \
            else self.lookup(node.id, node)
        if isinstance(v, _RegionRef):
            raise v.refuse(self, node, self.current_form)
        if isinstance(v, _ElemRef):
            raise self.error(node, f"'{v.name}' is a T.Ref to an element of '{v.buffer.name}'; "
                                   "read it or assign it by its name")
        if isinstance(v, (_VectorBufferRef, _VectorVarRef)):
            raise self.error(node, f"`{ast.unparse(node)}` holds {v.lanes}-lane vectors, which "
                                   "are read and written by element (`v[i]`, or by name for a "
                                   "T.alloc_var); this form takes a buffer of scalars")
        if not isinstance(v, _BufferRef):
            raise self.error(node, f"expected a buffer, got `{ast.unparse(node)}`")
        return v.buffer

    def buffer_named(self, name: str) -> N.Buffer:
        for scope in reversed(self.scopes):
            for v in scope.values():
                if isinstance(v, _BufferRef) and v.buffer.name == name:
                    return v.buffer
        if name in self.named_buffers:
            return self.named_buffers[name]
        raise KeyError(name)

    def indices(self, node: ast.Subscript) -> list:
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice) and e.step is not None:
                out.append(self.stepped_slice(node, e, len(out)))
            elif isinstance(e, ast.Slice):
                out.append(slice(self.index_expr(e.lower) if e.lower else None,
                                 self.index_expr(e.upper) if e.upper else None))
            elif isinstance(e, ast.Starred):  # A[*idx, j]: the indices idx holds
                for v in self.starred(e):
                    if isinstance(v, slice) and v.step is None:
                        out.append(slice(*(None if x is None else self.index_value(e, x)
                                           for x in (v.start, v.stop))))
                    else:
                        out.append(self.index_value(e, v))
            else:
                v = self.expr(e)
                if isinstance(v, VL.LaneVector):  # a vector index (`A[T.Ramp(i, 1, 4)]`)
                    v = dataclasses.replace(v, lanes=tuple(self.index_value(e, x)
                                                           for x in v.lanes))
                    out.append(v)
                else:
                    out.append(self.index_value(e, v))
        return out

    # ---- expressions ------------------------------------------------------------------
    def eval_python(self, node):
        """Evaluate ``node`` to a Python value (closure constants, T.* attributes, IR)."""
        return self.expr(node)

    def index_expr(self, node) -> N.Expr:
        return self.index_value(node, self.expr(node))

    def index_value(self, node, v, form: str = "") -> N.Expr:
        """``v`` (the value of ``node``) as an index: int32, or int64 for a 64-bit value
        (TVM keeps an index's dtype: ``x[bx * 512 + i]`` over an int64 ``bx`` is int64).
        ``form`` (``"T.Parallel: "``) starts the error's message."""
        if isinstance(v, bool) or not isinstance(v, (int, N.Expr)):
            why = f" (the Python float {v!r}: `//` divides integers)" if isinstance(v, float) else ""
            raise self.error(node, f"{form}expected an integer expression, got "
                                   f"`{ast.unparse(node)}`{why}")
        v = N.as_expr(v)
        if not N.is_int(v.dtype):
            raise self.error(node, f"index/extent `{ast.unparse(node)}` has dtype {v.dtype}, "
                                   "expected an integer")
        return _index_dtype(v)

    def expr(self, node):
        try:
            return self._expr(node)
        except FrontendError:
            raise
        except RecursionError:
            raise self.error(node, "expression nested too deeply") from None
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError,
                NotImplementedError) as e:
            raise self.error(node, f"cannot evaluate `{ast.unparse(node)}`: {e}") from None

    def starred(self, node: ast.Starred) -> tuple:
        """The items ``*x`` unpacks in a tuple or list (a shape, a list of indices)."""
        value = self.expr(node.value)
        if _is_ir(value) or not hasattr(value, "__iter__") or isinstance(value, (str, bytes)):
            raise self.error(node, f"`{ast.unparse(node)}` unpacks "
                                   f"{type(value).__name__}, not a tuple or list")
        return tuple(value)

    def binop(self, node, op: str, a, b):
        if VL.is_vector(a) or VL.is_vector(b):  # TVM's vectors
            return self.lanewise(node, op, lambda x, y: self.binop(node, op, x, y), a, b)
        if op in _PYTHON_OPS and (_is_ir(a) or _is_ir(b)):
            # TileLang binds a kernel name given an int to the Python int (`bm = 64`,
            # `M = A.shape[0]` of a static shape), so `bm / 3` is Python's true division
            # (21.33...), not the integer division of an int32 expression, `bm * 0.5` the
            # Python float 32.0 (typed where it meets an operand as a literal is), and `one << 40`
            # Python's int
            x, y = (_python_number(self.expand(v) if _is_ir(v) else v) for v in (a, b))
            ints = isinstance(x, int) and isinstance(y, int)
            if x is not None and y is not None and (ints or op in ("add", "sub", "mul", "div")) \
                    and not (op in ("div", "floordiv", "mod") and y == 0) \
                    and not (op in ("shl", "shr") and y < 0):
                return _PYTHON_OPS[op](x, y)
        if op in _LOGICAL_BITWISE:
            a_bool, b_bool = _is_bool(a), _is_bool(b)
            if a_bool and b_bool:
                # TVM's bool is a one-bit unsigned integer: `&`, `|`, `^` of two conditions
                # (`(mask[j] != 0) & (j < n)`) are their logical and, or and inequality
                if op == "bitand":
                    return _and([a, b])
                if op == "bitor":
                    return _or([a, b])
                if not _is_ir(a):
                    a, b = b, a
                if not _is_ir(b):
                    return N.Not(a) if b else a
                return N.cmp("ne", a, b)
            # a condition against an integer: TVM matches the operand types, the bool
            # becomes 0 or 1 of the integer's dtype and the operator is the integer's
            if a_bool != b_bool:
                t = (b if a_bool else a)
                t = t.dtype if _is_ir(t) else "int32"
                if N.is_int(t):
                    if a_bool:
                        a = N.cast(N.as_expr(a), t)
                    else:
                        b = N.cast(N.as_expr(b), t)
        if op in _BITWISE:
            for side in (a, b):
                t = side.dtype if _is_ir(side) else ("float32" if isinstance(side, float) else "int32")
                if not N.is_int(t):
                    also = " (&, | and ^ also take two bools)" if op in _LOGICAL_BITWISE else ""
                    raise self.error(node, f"bitwise operator {_BITWISE[op]} takes integers, "
                                           f"got {t}{also}")
        return N.binop(op, a, b)

    def _expr(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            v = self.lookup(node.id, node)
            if isinstance(v, _VarRef):
                return N.Load(v.buffer.name, v.indices, v.buffer.dtype)
            if isinstance(v, _VectorVarRef):
                return v.value()
            return v
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value)
            if isinstance(base, _BufferRef):
                b = base.buffer
                if node.attr == "shape":
                    return tuple(d.value if isinstance(d, N.Const) else d for d in b.shape)
                if node.attr == "dtype":
                    return b.dtype
                if node.attr == "data":
                    return _DataRef(b)
                raise self.error(node, f"buffer attribute '{node.attr}' is not supported")
            if isinstance(base, VL.LaneVector):  # TVM's vector: its dtype (`float32x4`)
                if node.attr == "dtype":
                    return base.dtype
                if node.attr == "astype":
                    return lambda dtype: ops.Cast(dtype, base)
                raise self.error(node, f"vector attribute '{node.attr}' is not supported "
                                       "(`.dtype` and `.astype(dtype)` are)")
            if _is_ir(base):
                if node.attr == "dtype":
                    return base.dtype
                if node.attr == "astype":
                    return _Astype(base)
                raise self.error(node, f"expression attribute '{node.attr}' is not supported "
                                       "(`.dtype` and `.astype(dtype)` are)")
            return getattr(base, node.attr)
        if isinstance(node, (ast.Tuple, ast.List)):  # (2, *tile): Python's unpacking
            # (an allocation among the items, `bufs = [T.alloc_shared(...), ...]`, is a
            # buffer named after the assigned name, as in a comprehension)
            return tuple(v for e in node.elts for v in (
                self.starred(e) if isinstance(e, ast.Starred)
                else (self.comprehension_item(e, node),)))
        if isinstance(node, ast.Dict) and None not in node.keys:  # annotations={...}
            out = {}
            for k, v in zip(node.keys, node.values):
                key = self.expr(k)
                out[key] = self.comprehension_item(v, node, key)
            return out
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left), self.expr(node.right)
            # `v = X[i:i + 2]` then `v * 2`: TileLang binds the slice's vector (a let of its
            # lanes), so arithmetic on the name is lanewise
            a = self.region_vector(a, node) if isinstance(a, _RegionRef) else a
            b = self.region_vector(b, node) if isinstance(b, _RegionRef) else b
            self.check_value(node.left, a)
            self.check_value(node.right, b)
            if VL.is_vector(a) or VL.is_vector(b):
                op = _BIN.get(type(node.op))
                if op is None:
                    raise self.error(node, f"operator {type(node.op).__name__} is not supported")
                return self.binop(node, op, a, b)
            if not _is_ir(a) and not _is_ir(b):
                return _python_binop(node.op, a, b)
            op = _BIN.get(type(node.op))
            if op is None:
                raise self.error(node, f"operator {type(node.op).__name__} is not supported")
            return self.binop(node, op, a, b)
        if isinstance(node, ast.UnaryOp):
            a = self.expr(node.operand)
            a = self.region_vector(a, node) if isinstance(a, _RegionRef) else a
            if VL.is_vector(a):  # -v, ~v, not v: lane by lane
                return self.lanewise(node, "sub" if isinstance(node.op, ast.USub) else "unary",
                                     lambda x: self.unary(node, x), a)
            return self.unary(node, a)
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                parts = []
                left = node.left
                for op, right in zip(node.ops, node.comparators):
                    parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
                    left = right
                values = [self.expr(ast.copy_location(p, node)) for p in parts]
                return _and(values)
            a, b = self.expr(node.left), self.expr(node.comparators[0])
            vector = VL.is_vector(a) or VL.is_vector(b)
            if not _is_ir(a) and not _is_ir(b) and not vector:
                return _python_cmp(node.ops[0], a, b)
            if not vector:
                # kernel names bound to ints are TileLang's Python ints: `bm > 128` is a
                # Python bool, and an `if` on it chooses its branch while parsing
                x, y = (_python_number(self.expand(v) if _is_ir(v) else v) for v in (a, b))
                if x is not None and y is not None:
                    return _python_cmp(node.ops[0], x, y)
            op = _CMP.get(type(node.ops[0]))
            if op is None:
                raise self.error(node, f"comparison {type(node.ops[0]).__name__} is not supported")
            self.check_value(node.left, a)
            self.check_value(node.comparators[0], b)
            if vector:  # TVM's vector comparison: lane by lane
                return self.lanewise(node, "cmp", lambda x, y: N.cmp(op, x, y), a, b)
            return N.cmp(op, a, b)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v) for v in node.values]
            return _and(values) if isinstance(node.op, ast.And) else _or(values)
        if isinstance(node, ast.IfExp):
            c = self.expr(node.test)
            if not _is_ir(c):
                return self.expr(node.body) if c else self.expr(node.orelse)
            a, b = self.expr(node.body), self.expr(node.orelse)
            for branch, v in ((node.body, a), (node.orelse, b)):
                if isinstance(v, (_BufferRef, _RegionRef)):
                    # TileLang's ifexp on a PrimExpr is T.if_then_else, of values (its
                    # TypeError: "Expected `ir.PrimExpr` but got `tirx.Buffer`")
                    raise self.error(node, f"`{ast.unparse(node)}`: `{ast.unparse(branch)}` is "
                                           "a buffer, chosen by the runtime condition "
                                           f"`{ast.unparse(node.test)}`; a buffer can be chosen "
                                           "by a condition known while parsing (a Python "
                                           "value: a macro's argument), a runtime one picks "
                                           "values (index each buffer: `A[i] if c else B[i]`)",
                                     FrontendTypeError)
            a, b, t = N._coerce(a, b)
            return N.Select(_truth(c), a, b, t)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value) if not isinstance(node.value, ast.Name) \
                else self.lookup(node.value.id, node.value)
            if isinstance(base, _BufferRef):
                buf = base.buffer
                idx = self.indices(node)
                if any(isinstance(i, slice) for i in idx):
                    raise self.error(node, f"a slice of '{buf.name}' is a region: use it in "
                                           "T.copy/T.fill/T.atomic_add")
                if len(idx) != buf.ndim:
                    raise self.error(node, f"'{buf.name}' has {buf.ndim} dims but is indexed "
                                           f"with {len(idx)}")
                self.reducer_access(buf.name, node, "read")
                at = self.lane_indices(node, buf, idx)
                if at is not None:  # `A[T.Ramp(i, 1, 4)]`: a vector load, one Load a lane
                    return VL.LaneVector(tuple(N.Load(buf.name, x, buf.dtype) for x in at))
                return N.Load(buf.name, tuple(idx), buf.dtype)
            if isinstance(base, _VectorBufferRef):  # `packed[i]`: element i, a vector
                return VL.LaneVector(tuple(N.Load(base.buffer.name, i, base.buffer.dtype)
                                           for i in self.vector_element(base, node)))
            if isinstance(base, _VectorVarRef):
                raise self.error(node, f"'{ast.unparse(node.value)}' is a {base.lanes}-lane "
                                       "vector variable; read a lane with "
                                       f"T.extract_lane({ast.unparse(node.value)}, k)")
            if _is_ir(base):
                raise self.error(node, f"`{ast.unparse(node.value)}` is a scalar, not a buffer")
            if isinstance(base, _RegionRef):
                raise base.refuse(self, node, "indexing an element")
            key = self.expr(node.slice)
            if isinstance(base, (list, tuple)) and (_is_ir(key) or (
                    isinstance(key, tuple) and any(_is_ir(k) for k in key))):
                raise self.error(node, f"`{ast.unparse(node.value)}` is a Python "
                                       f"{type(base).__name__}, indexed here by the runtime "
                                       f"value `{ast.unparse(node.slice)}` (a loop over "
                                       "range(n) is T.serial, as in TileLang): index it by a "
                                       "Python int, e.g. loop over the list itself or "
                                       "enumerate(...)")
            return base[key]
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self.comprehension(node)
        if isinstance(node, ast.Slice):
            return slice(self.expr(node.lower) if node.lower else None,
                         self.expr(node.upper) if node.upper else None)
        raise self.error(node, f"`{type(node).__name__}` expressions are not supported")

    def comprehension(self, node):
        """``[T.alloc_shared((bm, w), dtype) for w in widths]``, ``{b: layout(b) for b in
        bufs}``, ``sum(w for w in ws)``: Python's comprehension, evaluated while parsing (as
        TileLang's builder leaves it to Python), in a scope of its own.  An allocation in
        it is one buffer per item, named after the assigned name (``tiles_0``, ...)."""
        items: list = []
        self.push(control=False)
        try:
            def walk(k):
                if k == len(node.generators):
                    if isinstance(node, ast.DictComp):
                        items.append((self.comprehension_item(node.key, node),
                                      self.comprehension_item(node.value, node)))
                    else:
                        items.append(self.comprehension_item(node.elt, node))
                    return
                g = node.generators[k]
                if g.is_async:
                    raise self.error(node, "an async comprehension is not supported")
                for v in self.python_iterable(g.iter, self.expr(g.iter), "a comprehension"):
                    self.bind_python_target(g.target, v, node)
                    keep = True
                    for c in g.ifs:
                        cv = self.expr(c)
                        if _is_ir(cv) or VL.is_vector(cv):
                            raise self.error(c, f"a comprehension's condition "
                                                f"`{ast.unparse(c)}` is a runtime value; it "
                                                "is decided while parsing")
                        if not cv:
                            keep = False
                            break
                    if keep:
                        walk(k + 1)
            walk(0)
        finally:
            self.pop()
        if isinstance(node, ast.ListComp):
            return items
        if isinstance(node, ast.SetComp):
            return set(items)
        if isinstance(node, ast.DictComp):
            return dict(items)
        return iter(items)

    def comprehension_item(self, elt, node, key=None):
        """A comprehension's or display's item; an allocation is named after the assigned
        name and the item's string key (`acc = {"c": T.alloc_fragment(...)}`: `acc_c`) or
        its count (`tiles_0`, ...)."""
        if isinstance(elt, ast.Call):
            form = self.form_of(elt.func)
            if form is not None and form.kind == "alloc":
                if form.__name__ in ("alloc_var", "alloc_barrier", "alloc_cluster_barrier"):
                    raise self.error(elt, f"T.{form.__name__} in a comprehension is not "
                                          "supported by tilecute: bind each to a name")
                if self.pending is None:
                    raise self.error(elt, f"T.{form.__name__} in a comprehension allocates: "
                                          "use the comprehension in an assignment")
                base = self.comprehension_name or form.__name__.replace("alloc_", "")
                target = next(self.comprehension_targets, None) \
                    if self.comprehension_targets is not None else None
                if target is not None:
                    name = target
                elif isinstance(key, str) and key.isidentifier():
                    name = f"{base}_{key}"
                else:
                    name = f"{base}_{self.comprehension_count.get(base, 0)}"
                    self.comprehension_count[base] = self.comprehension_count.get(base, 0) + 1
                self.pending += self.allocate(name, form, elt, node)
                return self.lookup_local(name)
        return self.expr(elt)

    def unary(self, node: ast.UnaryOp, a):
        """``-a``, ``+a``, ``not a``, ``~a`` on one value (a parse-time one in Python)."""
        if not _is_ir(a):
            return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x,
                    ast.Invert: lambda x: ~x}[type(node.op)](a)
        self.check_value(node.operand, a)
        if isinstance(node.op, ast.USub):
            if isinstance(a, N.Const) and (N.is_float(a.dtype) or a.dtype.startswith("int")):
                return N.Const(-a.value, a.dtype)  # -T.infinity(dtype) is a constant
            if N.is_float(a.dtype):
                # TVM's `-x` is `x * -1`: a float's sign flips, zero's too (-(+0.0) is -0.0,
                # which `0 - x` would make +0.0)
                return N.binop("mul", a, N.const(-1, a.dtype))
            return N.binop("sub", N.const(0, a.dtype), a)
        if isinstance(node.op, ast.Not):
            return N.Not(_truth(a))
        if isinstance(node.op, ast.UAdd):
            return a
        if a.dtype == "bool":  # TVM's bool is one bit wide: its bitwise not is `not`
            return N.Not(a)
        if not N.is_int(a.dtype):
            raise self.error(node, f"operator ~ takes an integer or a bool, got {a.dtype}")
        return ops.bitwise_not(a)

    def call(self, node: ast.Call):
        macro = self.macro_of(node.func)
        inlined = (macro.fn, f"T.macro {macro.__name__!r}") if macro is not None else None
        if inlined is None and self.passes_buffer(node):
            # `v = scaled(res, i)`, `xv = head_view(X, h)`: a plain Python helper given a
            # buffer; TileLang runs it as Python on the buffer while the kernel is built,
            # tilecute inlines it as a T.macro (its value: an expression, a region, a view)
            helper = self.python_helper_of(node.func)
            if helper is not None and helper.__name__ != "<lambda>":  # (a `def`'s source)
                inlined = (helper, f"helper {helper.__name__!r}")
        if inlined is not None:  # `row, col = tile_of(i)`: the macro's body, then its value
            fn, what = inlined
            stmts, value = self.inline_function(fn, what, node, node, want_value=True)
            if stmts and self.pending is None:
                raise self.error(node, f"{what} makes statements, and its call here would run "
                                       "them more than once or not at all (a loop range or "
                                       "condition): assign its value to a name first")
            if stmts:
                self.pending += stmts
            return value
        fn = self.expr(node.func)
        if isinstance(fn, _Lambda):
            return self.call_lambda(fn, node)
        if isinstance(fn, F.Form) and fn.__name__ in ("view", "reshape") and \
                self.pending is not None:
            # `T.cumsum(T.view(smem, (1, n)), dim=1)`: an unnamed view, allocated before
            # the statement that reads it (as `v = T.view(...)` on the line above)
            a = self.args(fn, node)
            src = a.value("src")
            name = f"{fn.__name__}_of_{src.buffer.name if isinstance(src, _BufferRef) else 'src'}"
            scope, missing = self.scopes[-1], object()
            shadowed = scope.get(name, missing)  # the view binds no name of the program's
            stmts = self.alloc_view(name, a, node, a.value("src"), a.value("shape"),
                                    a.value("dtype") if fn.__name__ == "view" else None,
                                    "src", exact=True)
            if shadowed is missing:
                del scope[name]
            else:
                scope[name] = shadowed
            self.pending += stmts
            return _BufferRef(stmts[-1].buffer)
        if isinstance(fn, F.Form) and fn.__name__ in ("atomic_add", "atomic_max", "atomic_min"):
            return self.atomic_return(fn, node)
        if isinstance(fn, F.Form) and fn.__name__ == "comm_reducer":
            self.args(fn, node)  # (its arguments bound first: an unknown one is named)
            raise self.error(node, "T.comm_reducer is only the node of `T.attr(T.comm_reducer("
                                   "...), \"reduce_scope\", ...)` (the combiner of the "
                                   "T.tvm_thread_allreduce inside)")
        if isinstance(fn, F.Form):
            raise self.error(node, f"T.{fn.__name__} is a statement form and cannot be used "
                                   "in an expression here")
        if isinstance(fn, (F.Unsupported, L.UnsupportedLayout)):
            raise self.error(node, fn.message())
        if isinstance(fn, L.LayoutConstructor):
            return self.layout_value(fn, node)
        helper = _helper_name(fn)
        if getattr(fn, "reads_elements", False):  # T.any_of / T.all_of: a buffer's elements
            if len(node.args) > 1 or node.args and not node.keywords and not isinstance(
                    node.args[0], (ast.Name, ast.Subscript, ast.Attribute)):
                # TileLang's control-flow guide writes conditions: T.all_of(i < M, j < N)
                values = [self.expr(a) for a in node.args]
                for i, (x, v) in enumerate(zip(node.args, values)):
                    if not (_is_ir(v) or isinstance(v, (bool, int))):
                        raise self.error(x, f"T.{fn.__name__}: argument {i + 1} (`{ast.unparse(x)}`) "
                                            f"is not a condition; T.{fn.__name__} takes one buffer "
                                            "(or region), or conditions")
                return _and(values) if fn.__name__ == "all_of" else _or(values)
            return fn(self.region_truths(node, fn.__name__))
        if getattr(fn, "wide_load", None):  # T.ldg32 ... T.lds128, T.__ldg
            return self.wide_load(fn, node)
        if helper is not None:  # a T.* helper: TileLang's signature, then its arguments
            sig = plain_signature(fn)
            span = helper in ops.TVM_SPAN and "span" not in sig.parameters
            if span:  # TVM's trailing span=None (ops.TVM_SPAN)
                sig = _with_span(sig)
            if isinstance(node.func, ast.Attribute) and not isinstance(fn, _Astype):
                helper = node.func.attr  # as written: T.half, T.symbolic
            a = _Args(self, helper, sig, node)
            if span and a.value("span") is not None:
                raise a.fail("span", f"span={_show(a.value('span'))}: TVM's source location "
                                     "of the node; tilecute's nodes carry the program's own "
                                     "lines, so it takes span=None only")
            args = [a.value(n) for n, p in a.sig.parameters.items()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    and not (span and n == "span")]
            for n, p in a.sig.parameters.items():  # `*lanes` (T.float16(a, b): a vector)
                if p.kind == p.VAR_POSITIONAL:
                    args.extend(a.value(n))
            kwargs = {n: a.value(n) for n, p in a.sig.parameters.items()
                      if p.kind == p.KEYWORD_ONLY and not (span and n == "span")}
            for n, v in zip(a.sig.parameters, args):
                self.check_value(a.node(n), v)
            if getattr(fn, "kernel_threads", False):  # T.get_lane_idx ...: of the T.Kernel's threads
                if not self.in_kernel:
                    raise self.error(node, f"T.{helper} is only valid inside a T.Kernel")
                kwargs["threads"] = self.kernel_threads
            if getattr(fn, "buffer_lookup", False):  # T.atomic_load: its element's buffer
                kwargs["buffer_of"] = self.buffer_named
            if getattr(fn, "kernel_scope", False):  # T.get_block_binding ...: of the T.Kernel
                if not self.in_kernel:
                    raise self.error(node, f"T.{helper} is only valid inside a T.Kernel")
                kwargs["kernel"] = (self.kernel_blocks, self.kernel_grid[0], self.kernel_threads)
            if getattr(fn, "kernel_cluster", False):  # T.get_cluster_id ...: its cluster dims
                kwargs["cluster"] = tuple(self.kernel_cluster or ()) + \
                    (1,) * (3 - len(self.kernel_cluster or ()))
            try:
                return fn(*args, **kwargs)
            except (TypeError, ValueError, KeyError) as e:
                # the helper's class kept (TileLang's helpers raise ValueError / TypeError
                # on their arguments, and its programs catch those)
                kind = FrontendValueError if isinstance(e, ValueError) else \
                    FrontendTypeError if isinstance(e, TypeError) else FrontendError
                raise self.error(node, f"T.{helper}: {e}" if not str(e).startswith("T.")
                                 else str(e), kind) from None
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        for a in args:
            if isinstance(a, _BufferRef):
                raise self.error(node, f"buffer '{a.buffer.name}' passed to "
                                       f"`{ast.unparse(node.func)}`")
        if fn in (max, min) and any(_is_ir(a) for a in args) and len(args) == 2:
            return N.binop(fn.__name__, *args)
        if fn is abs and len(args) == 1 and _is_ir(args[0]):
            return ops.abs(args[0])
        if fn is float and args and _is_ir(args[0]):
            return N.cast(args[0], "float32")
        if fn is int and args and _is_ir(args[0]):
            return N.cast(args[0], "int32")
        with N.primexpr_equality():  # TileLang runs it on PrimExprs: `e == 0` is an EqualOp
            return fn(*args, **kwargs)

    def passes_buffer(self, node: ast.Call) -> bool:
        """A call's argument (positional or keyword) names a buffer or a region of one
        (``f(A, i)``, ``f(A[0:4, :])``; not a ``T.alloc_var``), read from the source with
        nothing parsed."""
        for a in list(node.args) + [k.value for k in node.keywords]:
            ref = self.lookup_local(a.id) if isinstance(a, ast.Name) else None
            if isinstance(ref, _BufferRef) and not isinstance(ref, _VarRef):
                return True  # (a T.alloc_var is passed by its value, as TileLang reads it)
            if isinstance(a, ast.Subscript) and isinstance(a.value, ast.Name) and \
                    self.is_slice_of_buffer(a):
                return True
        return False

    def check_value(self, node, v):
        if isinstance(v, _BufferRef):
            raise self.error(node, f"buffer '{v.buffer.name}' used as a value; index it "
                                   f"(`{v.buffer.name}[i]`)")


class _Astype:
    """``expr.astype(dtype)``: a cast."""

    def __init__(self, value: N.Expr):
        self.value = value

    def __call__(self, dtype):
        return ops.Cast(dtype, self.value)


# the T.Kernel annotations a `with T.sblock(...)` body may not hold (tilecute's are the kernel's)
_KERNEL_ANNOTATIONS = frozenset({
    "annotate_layout", "annotate_min_blocks_per_sm", "annotate_l2_hit_ratio",
    "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc", "no_set_max_nreg",
    "disable_warp_group_reg_alloc"})
_BITWISE = {"bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
_LOGICAL_BITWISE = ("bitand", "bitor", "bitxor")  # logical on two bools (TVM's one-bit bool)


def _static_offset(indices, buf: N.Buffer) -> Optional[int]:
    """The element offset of ``buf[indices]`` when the indices, the shape and the strides
    are all known at parse time (row-major without strides), else None."""
    idx = [_const_value(i) for i in indices]
    shape = [_const_value(d) for d in buf.shape]
    strides = [_const_value(x) for x in buf.strides] if buf.strides is not None else None
    if None in idx or (strides is None and None in shape[1:]) or \
            (strides is not None and None in strides):
        return None
    if strides is None:
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d if d is not None else 0
    return sum(i * st for i, st in zip(idx, strides))


def _whole_region(r: N.Region, buf: N.Buffer) -> bool:
    """Region ``r`` (explicit extents) covers all of ``buf``."""
    if r.extents is None:
        return False
    for st, ext, d in zip(r.starts, r.extents, buf.shape):
        if _const_value(st) != 0:
            return False
        if not (ext == d or (_const_value(d) is not None and _const_value(ext) == _const_value(d))):
            return False
    return True


def _const_value(e):
    """The value of a constant extent (an int or a Const), else None."""
    if isinstance(e, N.Const):
        return e.value
    return e if isinstance(e, int) and not isinstance(e, bool) else None


def _is_bool(x) -> bool:
    """A condition: a bool-typed expression or a Python bool."""
    return isinstance(x, bool) or (_is_ir(x) and x.dtype == "bool")


@dataclasses.dataclass(frozen=True)
class _Break(N.Stmt):
    """``T.loop_break()`` while its loop is parsed; the loop lowers it (``break_loop``).
    ``form``: what the program wrote, for errors."""

    loc: Optional[N.Loc] = None
    form: str = "T.loop_break"
    statement: bool = False  # Python's `break` (it may end a loop over a Python iterable)


@dataclasses.dataclass(frozen=True)
class _Return(N.Stmt):
    """``T.thread_return()`` while the T.Kernel body is parsed; the kernel folds it
    (``fold_thread_returns``)."""

    loc: Optional[N.Loc] = None


@dataclasses.dataclass(frozen=True)
class _Continue(N.Stmt):
    """``continue`` while its loop is parsed; the loop lowers it (``continue_loop``).
    ``form``: what the program wrote, for errors."""

    loc: Optional[N.Loc] = None
    form: str = "`continue`"
    statement: bool = False  # Python's `continue`


def _has_break(body, marker=_Break) -> bool:
    """Does ``body`` break out of its loop (a ``T.loop_break()`` not inside a nested loop;
    ``marker=_Continue``: continue it)?"""
    return any(isinstance(s, marker) or isinstance(s, N.If) and (
        _has_break(s.then, marker) or _has_break(s.orelse, marker)) for s in body)


def _breaks(body) -> bool:
    """Does an AST body call ``T.loop_break()``, ``break`` or ``continue`` outside nested
    loops?"""
    for node in body:
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Break, ast.Continue)) or isinstance(sub, ast.Call) and \
                    isinstance(sub.func, ast.Attribute) and sub.func.attr == "loop_break":
                return True
    return False


def _fold_continues(body, marker=_Continue) -> tuple:
    """A T.Parallel body without its continues: what follows an ``if`` that may continue
    runs in each of its branches that does not (TileLang's ``continue`` skips the rest of
    the element's body); no flag, so the nest keeps no per-element state.  ``marker=
    _Return``: a T.Kernel body without its T.thread_return() calls, alike."""
    out: list[N.Stmt] = []
    for k, s in enumerate(body):
        if isinstance(s, marker):
            return tuple(out)
        if isinstance(s, N.If) and (_has_break(s.then, marker) or _has_break(s.orelse, marker)):
            rest = tuple(body[k + 1:])
            out.append(dataclasses.replace(s, then=_fold_continues(tuple(s.then) + rest, marker),
                                           orelse=_fold_continues(tuple(s.orelse) + rest, marker)))
            return tuple(out)
        out.append(s)
    return tuple(out)


def _guard_breaks(body, flag: str, loc, marker=_Break) -> tuple:
    """``body`` with each break (``marker``: each continue) setting ``flag`` and what
    follows a possible break running only while the flag is clear."""
    one = N.Const(1, "int32")
    zero = N.Const(0, "int32")
    out: list[N.Stmt] = []
    for k, s in enumerate(body):
        if isinstance(s, marker):
            out.append(N.Store(flag, (zero,), one, loc=s.loc))
            return tuple(out)
        if isinstance(s, N.If) and (_has_break(s.then, marker) or _has_break(s.orelse, marker)):
            out.append(dataclasses.replace(s, then=_guard_breaks(s.then, flag, loc, marker),
                                           orelse=_guard_breaks(s.orelse, flag, loc, marker)))
            rest = _guard_breaks(body[k + 1:], flag, loc, marker)
            if rest:
                out.append(N.If(N.cmp("eq", N.Load(flag, (zero,), "int32"), 0), rest, loc=loc))
            return tuple(out)
        out.append(s)
    return tuple(out)


# calls whose value may differ between the threads of a block (Parser.alike_in_block)
_PER_THREAD_CALLS = frozenset(("thread_idx", "atomic_add_ret", "atomic_max_ret", "atomic_min_ret",
                               "atomic_load", "activemask", "warp_activemask", "elect_one_sync",
                               "rng_rand", "rng_normal", "rng_uniform") +
                              N.SHUFFLES + N.WARP_VOTES + N.WARP_MATCHES + N.WARP_REDUCTIONS)


def _collective(x) -> bool:
    """Does statement ``x`` need every thread of the block (a tile op other than one
    thread's element atomic ``T.atomic_add(C[i], v)``, a barrier, a T.ws region, a
    T.Parallel or T.Pipelined loop)?"""
    element_atomic = isinstance(x, N.AtomicAdd) and not isinstance(x.value, N.Region) \
        and x.dst.extents is None
    return isinstance(x, N.TILE_OPS + (N.Barrier, N.WarpGroups)) and not element_atomic or \
        isinstance(x, N.For) and x.kind in ("parallel", "pipelined")


def _guard_returns(body, flag: str, loc) -> tuple:
    """``body`` with each ``T.thread_return()`` setting the per-thread ``flag``, and what
    may run after one (the rest of its block, the later iterations of the loops around
    it, what follows those loops) running only while the flag is clear: a serial loop's
    body is guarded whole, a ``while`` also stops on the flag."""
    zero = N.Const(0, "int32")
    running = N.cmp("eq", N.Load(flag, (zero,), "int32"), 0)
    out: list[N.Stmt] = []
    for k, s in enumerate(body):
        if isinstance(s, _Return):
            out.append(N.Store(flag, (zero,), N.Const(1, "int32"), loc=s.loc))
            return tuple(out)
        if not any(isinstance(y, _Return) for y in walk_stmts((s,))):
            out.append(s)
            continue
        if isinstance(s, N.If):
            out.append(dataclasses.replace(s, then=_guard_returns(s.then, flag, loc),
                                           orelse=_guard_returns(s.orelse, flag, loc)))
        elif isinstance(s, N.While):
            out.append(dataclasses.replace(s, cond=N.Logic("and", (s.cond, running)),
                                           body=_guard_returns(s.body, flag, loc)))
        else:  # a serial or unrolled loop (fold_thread_returns refused the others)
            out.append(dataclasses.replace(s, body=(N.If(running, _guard_returns(
                s.body, flag, loc), loc=s.loc),)))
        rest = _guard_returns(body[k + 1:], flag, loc)
        if rest:
            out.append(N.If(running, rest, loc=loc))
        return tuple(out)
    return tuple(out)


def _with_span(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` with TVM's ``span=None`` after its other parameters (positional when
    they all are, as in ``T.abs(x, span=None)``; else keyword-only)."""
    params = list(sig.parameters.values())
    plain = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if plain else inspect.Parameter.KEYWORD_ONLY
    at = next((i for i, p in enumerate(params) if p.kind == p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("span", kind, default=None))
    return sig.replace(parameters=params)


def _helper_name(fn) -> Optional[str]:
    """The ``T.`` name of an expression helper (whose signature the parser binds)."""
    if isinstance(fn, DType):
        return str(fn)
    if isinstance(fn, _Astype):
        return "astype"
    if getattr(fn, "__module__", None) == ops.__name__ and getattr(fn, "__name__", "") in \
            ops.EXPRESSION_HELPERS:
        return fn.__name__
    if fn is dynamic or fn is Layout or fn is V.var:
        return fn.__name__
    return None


def _bits(shape, dtype: str):
    """The bits a buffer of ``shape`` and ``dtype`` holds, as (constant factor, sorted
    symbol names) when its dims are products of constants and symbols; None otherwise."""
    from ..runtime.dtypes import DTYPES

    const, names = DTYPES[dtype].bits, []

    def take(e) -> bool:
        nonlocal const
        if isinstance(e, int):
            const *= e
            return True
        if isinstance(e, N.Const):
            const *= int(e.value)
            return True
        if isinstance(e, N.Var):
            names.append(e.name)
            return True
        if isinstance(e, N.Cast):
            return take(e.value)
        if isinstance(e, N.BinOp) and e.op == "mul":
            return take(e.a) and take(e.b)
        return False
    if not all(take(d) for d in shape):
        return None
    return const, tuple(sorted(names))


def _fits(bits, base_bits) -> bool:
    """Does a view of ``bits`` fit in a base of ``base_bits`` (both from :func:`_bits`)?"""
    if bits[1] == base_bits[1]:
        return bits[0] <= base_bits[0]
    return False


def _bits_text(bits) -> str:
    return " * ".join([str(bits[0])] + list(bits[1]))


def _shape_text(shape) -> str:
    from ..ir.printer import expr_str

    return "(" + ", ".join(expr_str(d) if isinstance(d, N.Expr) else str(d) for d in shape) + \
        (",)" if len(shape) == 1 else ")")


def _hoist_shared(body: tuple) -> tuple:
    """A kernel body with the shared buffers allocated in its loops and ifs allocated at
    its top level instead, just before the statement that held them (TileLang allocates
    every buffer once per block, wherever the program writes the T.alloc_shared)."""
    from ..ir.visitor import StmtMutator

    hoisted: list[N.Allocate] = []

    class _Take(StmtMutator):
        def visit_allocate(self, s):
            if s.buffer.scope == "shared":
                hoisted.append(s)
                return None
            return s
    out: list[N.Stmt] = []
    for s in body:
        if isinstance(s, N.Allocate):
            out.append(s)
            continue
        t = _Take().generic(s)
        out.extend(hoisted)
        hoisted.clear()
        out.append(t)
    return tuple(out)


def _hoist_default_vars(body: tuple, names: set, error) -> tuple:
    """A kernel body with each ``T.alloc_var`` declared without init inside a serial,
    unrolled or ``while`` loop declared, and zeroed, once before the top-level statement
    holding the loop (inside a thread region: at the region's top): TileLang declares it at
    the kernel's top (``float s = 0;``) and its place in the loop stores nothing, so it
    keeps its value from one iteration to the next
    (TileLang warns that it is read before written); an ``init`` (even 0) stays a store
    where it is written.  Inside a ``T.Parallel`` body such a variable read before it is
    written is refused: TileLang's value there is what the thread's previous iteration
    left, which depends on TileLang's thread layout of the nest."""
    from ..ir.visitor import BODY_FIELDS, StmtMutator, walk_nodes

    if not names:
        return body
    hoisted: list = []

    def reads(x, name) -> bool:
        return any(isinstance(n, N.Load) and n.buffer == name for n in walk_nodes(x))

    def first(stmts, name) -> str:
        """'read' where some path reads ``name`` before writing it, 'written' where every
        path writes it first, else 'none'."""
        for t in stmts:
            kids = BODY_FIELDS.get(type(t), ())
            own = [getattr(t, f.name) for f in dataclasses.fields(t)
                   if f.name not in kids and f.name != "loc"]
            if reads(own, name):
                return "read"
            if isinstance(t, N.Store) and t.buffer == name:
                return "written"
            if isinstance(t, N.If):
                a, b = first(t.then, name), first(t.orelse, name)
                if "read" in (a, b):
                    return "read"
                if a == b == "written":
                    return "written"
            elif kids:
                got = [first(getattr(t, k), name) for k in kids]
                if "read" in got:
                    return "read"
                if isinstance(t, N.For) and isinstance(t.extent, N.Const) and \
                        t.extent.value > 0 and got == ["written"]:
                    return "written"  # a loop that runs: its body's first write
        return "none"

    def check_parallel(stmts):
        for i, t in enumerate(stmts):
            if isinstance(t, N.Allocate) and t.buffer.name in names:
                rest = stmts[i + 2:]  # after the declaration's zero
                if first(rest, t.buffer.name) == "read":
                    raise error(t.loc, f"'{t.buffer.name}' = T.alloc_var(...) without init in a "
                                       "T.Parallel body is read before it is written: TileLang "
                                       "0.1.15 zeroes it once per thread, so an iteration reads "
                                       "what the thread's previous iteration left (its thread "
                                       "layout decides which); give init= (each iteration's "
                                       "start value) or write it first")
            for k in BODY_FIELDS.get(type(t), ()):
                check_parallel(getattr(t, k))

    class _Take(StmtMutator):
        def __init__(self):
            self.loops, self.taken = 0, set()

        def visit_for(self, s):
            if s.kind == "parallel":
                check_parallel(s.body)
                return s
            self.loops += 1
            try:
                return self.generic(s)
            finally:
                self.loops -= 1

        def visit_while(self, s):
            self.loops += 1
            try:
                return self.generic(s)
            finally:
                self.loops -= 1

        def visit_allocate(self, s):
            if self.loops and s.buffer.name in names:
                hoisted.append(s)
                self.taken.add(s.buffer.name)
                return None
            return s

        def visit_store(self, s):
            if s.buffer in self.taken:  # the declaration's zero, just after the Allocate
                self.taken.discard(s.buffer)
                hoisted.append(s)
                return None
            return s
    out: list = []
    for s in body:
        if isinstance(s, N.WarpGroups):
            # a thread region (`T.ws`, a branch on the thread index): declared and zeroed
            # at the top of the region, where only its threads run it -- before the region,
            # every thread's store would stand between it and a side-by-side region and
            # order the two by a block barrier (a hang where they hand data to each other)
            out.append(dataclasses.replace(s, body=_hoist_default_vars(s.body, names, error)))
            continue
        t = _Take().visit_block((s,))
        out.extend(hoisted)
        hoisted.clear()
        out.extend(t)
    return tuple(out)


def _by_reference(fn, name: str) -> bool:
    """Parameter ``name`` of ``fn`` is annotated ``T.Ref`` (or the deprecated ``T.Var``):
    TileLang passes it by reference."""
    from . import Ref  # (the package imports this module)
    from .values import Var

    try:
        ann = inspect.signature(fn).parameters[name].annotation
    except (TypeError, ValueError, KeyError):
        return False
    if isinstance(ann, str):  # `from __future__ import annotations`
        return ann in ("T.Ref", "T.Var", "Ref", "Var")
    return ann is Ref or ann is Var or ann is N.Var


def _reassigned_names(fdef) -> set:
    """The names a function body assigns other than by a typed declaration (``a = 2``,
    ``a += 1``, a loop target): a typed local ``a: T.int32 = 0`` of such a name is a
    variable; nested functions and lambdas aside."""
    names: set = set()

    def targets(t):
        if isinstance(t, ast.Name):
            yield t.id
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                yield from targets(e)
        elif isinstance(t, ast.Starred):
            yield from targets(t.value)

    stack = list(fdef.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            names.update(n for t in node.targets for n in targets(t))
        elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension)):
            names.update(targets(node.target))
        stack.extend(ast.iter_child_nodes(node))
    return names


def _truth(x) -> N.Expr:
    x = N.as_expr(x)
    return x if x.dtype == "bool" else N.cmp("ne", x, 0)


def _and(values):
    if all(not _is_ir(v) for v in values):
        return all(values)
    dyn = [v for v in values if _is_ir(v)]
    if any(not _is_ir(v) and not v for v in values):
        return False
    return _truth(dyn[0]) if len(dyn) == 1 else N.Logic("and", tuple(_truth(v) for v in dyn))


def _or(values):
    if all(not _is_ir(v) for v in values):
        return any(values)
    if any(not _is_ir(v) and v for v in values):
        return True
    dyn = [v for v in values if _is_ir(v)]
    return _truth(dyn[0]) if len(dyn) == 1 else N.Logic("or", tuple(_truth(v) for v in dyn))


def _index_dtype(v: N.Expr) -> N.Expr:
    """An integer index or extent at its index dtype, as TVM keeps it: int64 for a 64-bit
    value (an int64 symbol, a literal past int32, a block index over an int64 grid), else
    int32 (narrower and 32-bit unsigned values widen or convert to it, as before)."""
    return N.cast(v, "int64" if DTYPES[v.dtype].bits == 64 else "int32")


def _sub(a: N.Expr, b: N.Expr) -> N.Expr:
    """The extent ``a - b`` of a slice or loop range, folded where the two are affine in
    the same terms: ``A[bx * 64:(bx + 1) * 64]`` has extent 64, and ``(x + y) - x`` is
    ``y`` (so printed ranges re-parse exactly)."""
    if isinstance(a, N.BinOp) and a.op == "add" and a.a == b:
        e = a.b  # (a constant extent is int32 where it fits, as _affine's below)
        return N.Const(int(e.value), "int32") if isinstance(e, N.Const) and \
            -2 ** 31 <= e.value < 2 ** 31 else e
    fa, fb = _affine(a), _affine(b)
    if fa is not None and fb is not None:
        terms = dict(fa[0])
        for t, c in fb[0].items():
            terms[t] = terms.get(t, 0) - c
        terms = {t: c for t, c in terms.items() if c}
        const = fa[1] - fb[1]
        if not terms:
            return N.Const(const, "int32" if -2 ** 31 <= const < 2 ** 31 else "int64")
        if const == 0 and list(terms.values()) == [1]:
            return next(iter(terms))
    return N.binop("sub", a, b)


_EXPAND_NODES = 512  # the most nodes _Parser.expand visits for one expression


class _TooLarge(Exception):
    pass


def _pure(e) -> bool:
    """``e`` reads no buffer and calls nothing with an effect: its value depends on the
    names it reads alone (``_Parser.expand`` substitutes such a Let value)."""
    if isinstance(e, (N.Const, N.Var)):
        return True
    if isinstance(e, (N.BinOp, N.Cmp)):
        return _pure(e.a) and _pure(e.b)
    if isinstance(e, N.Cast):
        return _pure(e.value)
    if isinstance(e, N.Not):
        return _pure(e.a)
    if isinstance(e, N.Logic):
        return all(map(_pure, e.args))
    if isinstance(e, N.Select):
        return _pure(e.cond) and _pure(e.a) and _pure(e.b)
    if isinstance(e, N.Call):
        return e.name == "ceildiv" and all(map(_pure, e.args))
    return False


def _affine(e) -> Optional[tuple[dict, int]]:
    """``e`` as ``sum(coefficient * term) + constant`` over int32 or int64 terms (anything
    that is not a sum, difference or product by a constant is a term); None for other
    dtypes."""
    if not isinstance(e, N.Expr) or e.dtype not in N.DIM_DTYPES:
        return None
    if isinstance(e, N.Const):
        return {}, int(e.value)
    if isinstance(e, N.BinOp) and e.op in ("add", "sub", "mul"):
        fa, fb = _affine(e.a), _affine(e.b)
        if fa is not None and fb is not None:
            if e.op == "mul":
                if not fa[0] or not fb[0]:  # a product by a constant
                    (_, k), (terms, c) = (fa, fb) if not fa[0] else (fb, fa)
                    return {t: v * k for t, v in terms.items()}, c * k
            else:
                sign = 1 if e.op == "add" else -1
                terms = dict(fa[0])
                for t, c in fb[0].items():
                    terms[t] = terms.get(t, 0) + sign * c
                return terms, fa[1] + sign * fb[1]
    return {e: 1}, 0


def _python_binop(op, a, b):
    return {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
            ast.Div: lambda: a / b, ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b,
            ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b, ast.BitXor: lambda: a ^ b,
            ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b, ast.Pow: lambda: a ** b}[type(op)]()


def _python_cmp(op, a, b):
    return {ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b,
            ast.GtE: lambda: a >= b, ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b,
            ast.Is: lambda: a is b, ast.IsNot: lambda: a is not b, ast.In: lambda: a in b,
            ast.NotIn: lambda: a not in b}[type(op)]()


def _reads_or_calls(e) -> bool:
    """``e`` reads memory or calls an intrinsic (its value depends on where it is read)."""
    return any(isinstance(x, (N.Load, N.Call)) for x in _walk_exprs(e))


def _walk_exprs(x):
    if isinstance(x, N.Expr):
        yield x
        for v in vars(x).values():
            yield from _walk_exprs(v)
    elif isinstance(x, tuple):
        for v in x:
            yield from _walk_exprs(v)


def _function_env(fn, closure_only: bool = False) -> dict:
    env = {} if closure_only else dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:
                pass
    return env


def prim_func(func=None, *, eager_jit: bool = False) -> N.PrimFunc:
    """Parse ``func`` (a Python function written with ``T.*``) into a PrimFunc.
    ``@T.prim_func()`` is ``@T.prim_func`` (TileLang 0.1.15's signature); its
    ``eager_jit=True`` (TileLang's JIT-function builder) is refused."""
    fn = func
    if eager_jit is not False:
        raise FrontendError(f"T.prim_func(eager_jit={eager_jit!r}) is not supported: tilecute's "
                            "prim_func parses the function once (use @tilelang.jit on a kernel "
                            "factory or an eager kernel)", None, getattr(fn, "__name__", "?"))
    if fn is None:
        return prim_func
    name = getattr(fn, "__name__", "?")
    if not inspect.isfunction(fn):
        raise FrontendError(f"@T.prim_func decorates a Python function, got {fn!r}", None, name)
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise FrontendError(
            f"cannot read the source of {name!r} ({e}). @T.prim_func parses the function's "
            "source text, which Python keeps only for functions defined in a file (not typed "
            "into a REPL or built with exec): put the kernel in a .py file and import it, or "
            "pass its text to T.from_script(text)", None, name) from None
    source = textwrap.dedent("".join(lines))
    filename = inspect.getsourcefile(fn) or "<unknown>"
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise FrontendError("@T.prim_func decorates a function", None, "?")
    all_lines = linecache.getlines(filename) or source.splitlines()
    # line numbers in `tree` are relative to the dedented snippet; shift to the file
    offset = first - 1
    env = _function_env(fn)
    if any(isinstance(a, str) for a in (getattr(fn, "__annotations__", None) or {}).values()):
        # postponed annotations (`from __future__ import annotations`): names used only in
        # them (`dtype` of `T.Tensor((M, N), dtype)`) are no free variables of the function,
        # so its closure lacks them; they are the defining frame's locals, which TVMScript's
        # parser (TileLang's) evaluates annotations in
        frame = inspect.currentframe().f_back
        while frame is not None and frame.f_globals.get("__name__", "").startswith(__package__):
            frame = frame.f_back  # (past tilecute's own frames: @T.prim_func() and the like)
        if frame is not None:  # (the closure's values over the frame's, as Python reads them)
            env = {**fn.__globals__, **frame.f_locals, **_function_env(fn, closure_only=True)}
    return _Parser(fdef, env, filename, offset,
                   all_lines[offset:] if all_lines else source.splitlines(),
                   getattr(fn, "__annotations__", None)).parse()


def parse_script(text: str, namespace: dict, filename: str = "<script>") -> N.PrimFunc:
    """Parse a script holding one ``@T.prim_func`` function: its top-level assignments
    and imports run as Python in ``namespace`` (where the caller binds ``T``), then the
    function is parsed (``tilecute.language.from_script``)."""
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as e:
        raise FrontendError(f"the script is not valid Python: {e.msg}",
                            N.Loc(filename, e.lineno or 0), "?", e.text or "") from None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(funcs) != 1:
        raise FrontendError(f"a script holds exactly one function, found {len(funcs)}", None, "?")
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.Import, ast.ImportFrom)):
            exec(compile(ast.Module([node], []), filename, "exec"), namespace)
    return _Parser(funcs[0], namespace, filename, 0, text.splitlines()).parse()
