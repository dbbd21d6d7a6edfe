"""The values a ``T.*`` program handles at parse time: dtypes, parameter annotations,
symbolic extents, GEMM warp policies, layouts.

Both the ``T`` namespace (``tilecute.language``) and the parser import this module;
it imports neither of them.  Nothing here builds statements.
"""

from __future__ import annotations

import collections.abc
import enum
import inspect
import re
from dataclasses import dataclass
from typing import Optional

from ..ir import nodes as _N
from ..runtime.dtypes import DTYPES, UnknownDTypeError, canonical_dtype


class DType(str):
    """A dtype name usable as annotation (``n: T.int32``) and as a constant maker
    (``T.float32(0)``), or a cast when given an expression (``T.float32(x)``).
    ``T.dtype`` is this class (TileLang's ``dtype: T.dtype = T.float16`` annotations):
    ``T.dtype("half")`` or ``T.dtype(torch.float16)`` is ``T.float16``."""

    def __new__(cls, value):  # (TileLang's parameter name: T.dtype(value="half"))
        text = str(value)
        return super().__new__(cls, canonical_dtype(text[6:] if text.startswith("torch.") else text))

    def __call__(self, value=None, *lanes, is_size_var: bool = False) -> _N.Expr:
        # TileLang 0.1.15's ``T.<dtype>(*args, is_size_var=False)``: two or more values are
        # packed into a vector as TVM's ``Shuffle(args, [0, 1, ...])`` (its dtype theirs,
        # as TileLang's: ``T.bfloat16x2(a, b)``); ``is_size_var`` (keyword only) makes the
        # symbol a TVM SizeVar, a non-negative extent, which every tilecute symbol is
        if lanes:
            from .lanes import shuffle

            values = [value, *lanes]
            try:
                return shuffle(values, list(range(len(values))))
            except (TypeError, IndexError) as e:
                raise TypeError(f"{len(values)} values make a vector (TVM's Shuffle, as "
                                f"TileLang's T.<dtype>(*args)): "
                                f"{str(e).removeprefix('T.Shuffle: ')}") from None
        if value is None:  # TVMScript's `m = T.int32()`: a symbolic variable
            return _symbol(str(self))
        if isinstance(value, _N.Expr):
            return _N.cast(value, str(self))
        return _N.const(value, str(self))

    def as_torch(self):
        """The torch dtype (TileLang's ``T.float8_e4m3fn.as_torch()``)."""
        from ..runtime.profiling import map_torch_type

        return map_torch_type(str(self))

    @property
    def bits(self) -> int:
        return DTYPES[str(self)].bits

    @property
    def bytes(self) -> int:
        """TileLang's ``dtype.bytes`` (TVM's ``itemsize``: the bits rounded up to bytes),
        which factories use for vector widths (``16 // T.dtype(dtype).bytes``)."""
        return (self.bits + 7) // 8


_SYMBOLS = [0]


def _symbol(dtype: str) -> _N.Var:
    """``m = T.int32()`` (no value): TVMScript's declaration of a symbolic variable, which
    tilecute's ``T.dynamic("m", dtype)`` is; named by the assignment on the caller's line
    (TVMScript names it so), else ``sym<k>``.  Only integer dtypes: a symbol is an extent
    bound at launch from the tensors whose shapes use it."""
    import inspect
    import linecache

    if not dtype.startswith(("int", "uint")):
        return ScalarDecl(dtype)
    name = None
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame and frame.f_back else None
    if caller is not None:
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=\s*[\w.]*\b" + dtype +
                     r"\(\s*\)", line)
        name = m.group(1) if m else None
    if name is None:
        name = f"sym{_SYMBOLS[0]}"
        _SYMBOLS[0] += 1
    return _N.Var(name, dtype, 1)


class ScalarDecl:
    """``T.float32()`` / ``T.bool()`` with no value: TVMScript's declaration of a variable
    of a dtype that is no extent.  As a parameter annotation (``flag: T.bool()``, as
    TileLang's docs write it) it is a scalar parameter of that dtype, as ``flag: T.bool``;
    anywhere else an error (tilecute's symbols are integer extents, ``T.dynamic``)."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def message(self) -> str:
        return (f"T.{self.dtype}() with no value declares a symbolic variable, which tilecute "
                "has for integer extents only (T.dynamic); give a value: "
                f"T.{self.dtype}(x), or annotate a scalar parameter with it")

    def __repr__(self) -> str:
        return f"T.{self.dtype}()"


class UnsupportedDType:
    """``T.<name>`` for a TileLang dtype tilecute does not have (``T.int2``,
    ``T.float4_e2m1fn``, ``T.float16x2`` ...): a parameter, buffer or cast of it is an
    error naming it (the parser prints its repr), and so is calling it."""

    def __init__(self, name: str):
        self.__name__ = name

    def message(self) -> str:
        return (f"T.{self.__name__} is a TileLang dtype that tilecute does not have; its dtypes "
                f"are {', '.join(DTYPES)}")

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.message())

    def __repr__(self) -> str:
        return f"<T.{self.__name__}: a TileLang dtype tilecute does not have>"


def tilelang_only_dtype(name: str) -> bool:
    """Whether ``name`` is one of TileLang's dtype names that tilecute lacks: its sub-byte,
    FNUZ and e3m4 types and the vector types ``<scalar>x<lanes>``."""
    scalar = re.sub(r"x(2|4|8|16|32|64)$", "", name)
    return name in _TILELANG_ONLY_DTYPES or (scalar != name and (
        scalar in DTYPES or scalar in _TILELANG_ONLY_DTYPES or scalar in ("float8_e4m3fn",)))


_TILELANG_ONLY_DTYPES = frozenset("""
    int1 int2 uint1 uint2 float8_e3m4 float8_e4m3b11fnuz float8_e4m3fnuz
    float8_e5m2fnuz float6_e2m3fn float6_e3m2fn
    float4_e2m1_unpacked
""".split())


float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
float8_e4m3 = DType("float8_e4m3")
float8_e5m2 = DType("float8_e5m2")
float8_e8m0fnu = DType("float8_e8m0fnu")
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
boolean = DType("bool")


class _Boolean(DType):
    """TileLang's ``T.boolean(expr=None, is_size_var=False)`` (TVMScript's function, not a
    dtype call): ``T.bool``'s meaning under its own parameter names."""

    def __call__(self, expr=None, is_size_var: bool = False) -> _N.Expr:
        return DType.__call__(self, expr, is_size_var=is_size_var)

# every `T.<name>` that is a dtype: the canonical names and TileLang's spellings
DTYPE_NAMES = {
    **{name: DType(name) for name in DTYPES if name != "bool"},
    "boolean": _Boolean("bool"), "bool": boolean,
    "half": float16, "float": float32, "double": float64, "float8_e4m3fn": float8_e4m3,
    "int": int32, "uint": uint32, "short": int16, "long": int64, "ulong": uint64,
}


class Pointer:
    """TileLang's ``T.ptr``: as a parameter annotation (``a_ptr: T.ptr``, or called:
    ``T.ptr()``, ``T.ptr(T.float16)``) a pointer parameter, a device address the caller
    passes as a tensor (its data pointer) or an int, which ``T.make_tensor(a_ptr, shape,
    dtype)`` views; as the dtype of a tensor (``T.Tensor([G], T.ptr)``) int64, a table of
    addresses (TileLang's ``_normalize_tensor_dtype``).  ``dtype`` (the pointee TileLang
    annotates the pointer with; T.make_tensor's own dtype decides how the memory reads),
    ``storage_scope`` and ``is_size_var`` are kept for the parser to check; ``error`` says
    why a call's arguments did not fit TileLang's signature (reported at the parameter)."""

    def __init__(self, dtype=None, storage_scope: str = "global", is_size_var: bool = False,
                 error: str = ""):
        self.dtype, self.storage_scope, self.is_size_var = dtype, storage_scope, is_size_var
        self.error = error

    def spec(self, dtype=None, storage_scope="global", *, is_size_var=False) -> "Pointer":
        return Pointer(dtype, storage_scope, is_size_var)

    @property
    def __signature__(self) -> inspect.Signature:
        return plain_signature(self.spec)

    def __call__(self, *args, **kwargs) -> "Pointer":
        error = signature_error("T.ptr", plain_signature(self.spec), [repr(a) for a in args],
                                kwargs)
        return Pointer(error=error) if error else self.spec(*args, **kwargs)

    def __repr__(self) -> str:
        return "T.ptr" if self.dtype is None else f"T.ptr({self.dtype!r})"


ptr = Pointer()
POINTER_DTYPE = "int64"  # a pointer as an argument, a table entry and a kernel parameter


def tensor_dtype_name(d) -> str:
    """The dtype of a tensor declared with dtype ``d`` (a parameter's annotation,
    T.make_tensor's ``dtype``): :func:`dtype_name`, and ``T.ptr`` is int64 (TileLang's
    ``_normalize_tensor_dtype``: a table of addresses is int64 storage)."""
    return POINTER_DTYPE if isinstance(d, Pointer) else dtype_name(d)


def dtype_name(d) -> str:
    """Canonical dtype name of a ``T.*`` dtype, a string, or a torch dtype;
    :class:`UnknownDTypeError` (a ``KeyError`` and a ``ValueError``) naming the valid
    ones otherwise."""
    if isinstance(d, str):
        return canonical_dtype(str(d))
    text = str(d)
    if text.startswith("torch."):
        return canonical_dtype(text[len("torch."):])
    raise UnknownDTypeError(d)


# ---- parameter annotations ---------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """What a parameter annotation (``T.Tensor(shape, dtype)``) says.  It is checked by
    the parser, which can name the prim_func, the parameter and the line: ``dtype`` is
    kept as written, ``refused`` lists the TileLang arguments given that tilecute does
    not honor, as ``(argument, value)``, and ``error`` says why the annotation's
    arguments did not fit its signature."""

    shape: tuple
    dtype: object
    strides: Optional[tuple] = None
    form: str = "T.Tensor"
    refused: tuple = ()
    error: str = ""


def plain_signature(fn) -> inspect.Signature:
    """``fn``'s signature without annotations, as error messages print it."""
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                       return_annotation=sig.empty)


def signature_error(form: str, sig: inspect.Signature, args: list, kwargs: dict) -> Optional[str]:
    """Why ``form(*args, **kwargs)`` does not fit ``sig`` (None if it does), naming the
    argument: ``args`` are the positional arguments as the program wrote them."""
    params = list(sig.parameters.values())
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        if len(args) > n:
            return (f"{form}: unexpected positional argument {n + 1} (`{args[n]}`); {form} "
                    f"takes {n} positional argument(s) (the signature is {form}{sig})")
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        return f"{form}: {e} (the signature is {form}{sig})"
    return None


def _shape_tuple(shape) -> tuple:
    # (a Sequence: an eager body's declared tensor's `.shape`, TileLang's buffer shape Array,
    # which TileLang's T.Tensor takes as the shape: `B: T.Tensor(A.shape, A.dtype)`)
    if isinstance(shape, (tuple, list)) or \
            isinstance(shape, collections.abc.Sequence) and not isinstance(shape, (str, bytes)):
        return tuple(shape)
    return (shape,)


def _refused(**given) -> tuple:
    """The arguments whose value differs from TileLang's default (given as
    ``name=(value, default)``)."""
    return tuple((k, v) for k, (v, default) in given.items() if v != default)


class _TensorProxy:
    """``T.Tensor(shape, dtype="float32", data=None, scope=None)`` and TileLang's
    subscript spelling ``T.Tensor[shape, dtype]``: a global tensor parameter.

    Annotations are evaluated when Python runs the ``def``, before the parser sees the
    function: arguments that do not fit the signature come back as a spec with an
    ``error``, which the parser reports at the parameter."""

    form = "T.Tensor"

    def spec(self, shape, dtype="float32", data=None, scope=None) -> TensorSpec:
        return TensorSpec(_shape_tuple(shape), dtype, None, self.form,
                          _refused(data=(data, None), scope=(_global(scope), "global")))

    @property
    def __signature__(self) -> inspect.Signature:
        return plain_signature(self.spec)

    def __call__(self, *args, **kwargs) -> TensorSpec:
        error = signature_error(self.form, plain_signature(self.spec), [repr(a) for a in args],
                                kwargs)
        if error:
            return TensorSpec((), None, None, self.form, (), error)
        return self.spec(*args, **kwargs)

    def __getitem__(self, keys) -> TensorSpec:
        keys = keys if isinstance(keys, tuple) else (keys,)
        if all(not isinstance(k, (tuple, list, str)) for k in keys):
            keys = (keys,)  # T.Tensor[M, N]: all of it is the shape
        return self(*keys)

    def __repr__(self) -> str:
        return f"<{self.form}>"


class _StridedTensorProxy(_TensorProxy):
    """``T.StridedTensor(shape, strides, dtype="float32", scope=None)``."""

    form = "T.StridedTensor"

    def spec(self, shape, strides, dtype="float32", scope=None, *, data=None) -> TensorSpec:  # noqa: D102
        # data= (TileLang 0.1.15's): a tensor over another buffer's storage, refused
        return TensorSpec(_shape_tuple(shape), dtype, _shape_tuple(strides), self.form,
                          _refused(data=(data, None), scope=(_global(scope), "global")))


class _BufferProxy(_TensorProxy):
    """``T.Buffer(shape, dtype, data, strides, elem_offset, scope, align, offset_factor,
    buffer_type, axis_separators)`` (TileLang's older spelling of ``T.Tensor``)."""

    form = "T.Buffer"

    def spec(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,  # noqa: D102
             scope="global", align=0, offset_factor=0, buffer_type="",
             axis_separators=None) -> TensorSpec:
        return TensorSpec(_shape_tuple(shape), dtype,
                          None if strides is None else _shape_tuple(strides), self.form,
                          _refused(data=(data, None),
                                   # 0 and None are both TVM's offset 0, [] no separators
                                   elem_offset=(None if isinstance(elem_offset, int) and
                                                not isinstance(elem_offset, bool) and
                                                elem_offset == 0 else elem_offset, None),
                                   scope=(_global(scope), "global"), align=(align or 0, 0),
                                   offset_factor=(offset_factor or 0, 0),
                                   buffer_type=("" if buffer_type == "default" else buffer_type,
                                                ""),
                                   axis_separators=(axis_separators or None, None)))


class _ScopedBufferProxy(_TensorProxy):
    """``T.SharedBuffer(shape, dtype)``, ``T.FragmentBuffer(...)``, ``T.LocalBuffer(...)``:
    TileLang's annotations of a ``T.macro`` parameter that takes a shared, fragment or
    local buffer (``def mma0(K_shared: T.SharedBuffer([bn, d], dtype), ...)``).  As in
    TileLang they describe the parameter and bind nothing: the macro's parameter is the
    buffer the call passes.  On a prim_func parameter (a global tensor) they are refused."""

    def __init__(self, form: str, scope: str):
        self.form, self.scope = form, scope

    def spec(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,  # noqa: D102
             scope=None, align=0, offset_factor=0, buffer_type="", axis_separators=None) -> TensorSpec:
        return TensorSpec(_shape_tuple(shape), dtype,
                          None if strides is None else _shape_tuple(strides), self.form,
                          (("scope", scope or self.scope),))


def _global(scope):
    return "global" if scope is None else scope


Tensor = _TensorProxy()
StridedTensor = _StridedTensorProxy()
Buffer = _BufferProxy()
buffer = _BufferProxy()  # TVM's T.buffer: T.Buffer(...) is this call
buffer.form = "T.buffer"
buffer_decl = _BufferProxy()  # TVM's deprecated name of T.buffer
buffer_decl.form = "T.buffer_decl"
SharedBuffer = _ScopedBufferProxy("T.SharedBuffer", "shared.dyn")
FragmentBuffer = _ScopedBufferProxy("T.FragmentBuffer", "local.fragment")
LocalBuffer = _ScopedBufferProxy("T.LocalBuffer", "local")


# ---- TVM's handle parameters --------------------------------------------------------------
@dataclass(frozen=True)
class HandleSpec:
    """What ``a: T.handle`` / ``a: T.ptr`` says (called or not: ``T.handle("float32")``):
    an opaque pointer parameter, which a ``T.match_buffer(a, shape, dtype)`` (or
    ``T.make_tensor(a, shape, dtype)``) at the top of the body binds to a tensor.  ``refused``
    lists the arguments tilecute does not honor, as in :class:`TensorSpec`."""

    form: str
    dtype: object = None
    storage_scope: str = "global"
    refused: tuple = ()
    error: str = ""


class _HandleProxy:
    """``T.handle(dtype=None, storage_scope="global", *, is_size_var=False)`` and TileLang's
    ``T.ptr`` (the same signature): TVM's pointer variable.  As a parameter annotation it
    is the parameter a ``T.match_buffer`` binds (TileLang's packed API then takes a tensor
    for it, checked against the buffer's shape, strides and dtype): tilecute makes the
    parameter that tensor, as if declared ``A: T.Tensor(shape, dtype)``.  The pointer's own
    dtype is a type annotation TVM does not check against the buffer's."""

    def __init__(self, form: str):
        self.form = form

    def spec(self, dtype=None, storage_scope="global", *, is_size_var=False) -> HandleSpec:
        return HandleSpec(self.form, dtype, storage_scope,
                          _refused(storage_scope=(storage_scope, "global"),
                                   is_size_var=(is_size_var, False)))

    @property
    def __signature__(self) -> inspect.Signature:
        return plain_signature(self.spec)

    def __call__(self, *args, **kwargs) -> HandleSpec:
        error = signature_error(self.form, plain_signature(self.spec), [repr(a) for a in args],
                                kwargs)
        if error:
            return HandleSpec(self.form, error=error)
        return self.spec(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.form}>"


handle = _HandleProxy("T.handle")



# ---- symbolic extents --------------------------------------------------------------------
def dynamic(name: str, dtype="int32", multiple_of: int = 1):
    """``T.dynamic("N")``: a symbolic extent, bound at launch from the tensors that use
    it; ``T.dynamic("M, N")`` (or ``"M N"``) makes a tuple of them, as in TileLang.
    ``multiple_of`` (tilecute's) promises a divisor, checked at launch (a ValueError
    names the argument), which lets rows strided by the symbol be read with 16-byte
    vector instructions."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"T.dynamic: the name must be a non-empty string, got {name!r}")
    if not isinstance(multiple_of, int) or isinstance(multiple_of, bool) or multiple_of < 1:
        raise ValueError(f"T.dynamic('{name}'): multiple_of must be a positive int, "
                         f"got {multiple_of!r}")
    names = re.split(r"\s*,\s*|\s+", name.strip())
    made = tuple(_N.Var(n, dtype_name(dtype), multiple_of) for n in names)
    return made if len(made) > 1 else made[0]


symbolic = dynamic  # TileLang's older name (tilecute's printer writes it)


class _VarClass(type):
    """``T.Var`` is TVM's class of scalar variables: ``isinstance(M, T.Var)`` holds for every
    symbol (:class:`tilecute.ir.nodes.Var`), and calling it takes TVM's signature."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _N.Var)

    def __subclasscheck__(cls, sub) -> bool:
        return isinstance(sub, type) and issubclass(sub, _N.Var)

    def __call__(cls, name, dtype="int32", span=None) -> _N.Var:
        """``T.Var(name, dtype="int32", span=None)``: a symbolic variable (TVM's constructor;
        the third argument is TVM's source location, taken as None only)."""
        if span is not None:
            raise ValueError(f"T.Var({name!r}): span={span!r} is TVM's source location of the "
                             "node; tilecute's nodes carry the program's own lines, so it takes "
                             "span=None only")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"T.Var: the name must be a non-empty string, got {name!r}")
        return _N.Var(name, dtype_name(dtype))


class Var(metaclass=_VarClass):
    """TVM's ``T.Var``: see :class:`_VarClass` (never instantiated itself)."""


def var(dtype, name: str = "") -> _N.Var:
    """TVM's ``T.var(dtype, name="")`` (deprecated in TileLang for ``T.{dtype}()``): a
    symbolic variable, as ``n = T.int32()``: named ``name``, else by the assignment that
    binds it (the parser names it), else ``sym<k>``.  Integer dtypes only, as ``T.int32()``."""
    dt = dtype_name(dtype)
    if not dt.startswith(("int", "uint")):
        raise TypeError(f"T.var({dt!r}) declares a symbolic variable, which tilecute has for "
                        "integer extents only (T.dynamic)")
    if not isinstance(name, str):
        raise TypeError(f"T.var: name must be a string, got {name!r}")
    if not name:
        name = f"sym{_SYMBOLS[0]}"
        _SYMBOLS[0] += 1
    return _N.Var(name, dt, 1)
class _DynProxy:
    """``T.dyn``: ``T.dynamic`` called (``T.dyn("K")``) or subscripted, the form TileLang's
    language guide writes in annotations: ``T.dyn['K']`` (int32), ``T.dyn['K', 'int64']``."""

    def __call__(self, name, dtype="int32", multiple_of: int = 1):
        return dynamic(name, dtype, multiple_of)

    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) != 2:
                raise ValueError(f"T.dyn[...]: a name or (name, dtype), got {key!r}")
            return dynamic(key[0], key[1])
        return dynamic(key)

    def __repr__(self) -> str:
        return "<T.dyn>"


dyn = _DynProxy()


def meta_var(value):
    """TVM's ``T.meta_var(value)``: ``x = T.meta_var(e)`` makes ``x`` a name of ``e`` itself,
    with no ``Let`` (each use of ``x`` is ``e``, evaluated where it stands, as TVMScript
    substitutes a meta variable); used as a value elsewhere, it is ``value``."""
    return value

# ---- T.gemm's warp policy ----------------------------------------------------------------
class GemmWarpPolicy(enum.IntEnum):
    """TileLang's ``T.GemmWarpPolicy``: how ``T.gemm`` spreads a block's warps over the
    ``(M, N)`` tile, TileLang's values (``Square`` 0, the default; ``FullRow`` 1: as many
    warps along M as fit; ``FullCol`` 2: along N); the MMA selection pass honors each
    (``Gemm.policy``; docs/ir.md)."""

    Square = 0
    FullRow = 1
    FullCol = 2

    # TileLang's helpers on the policy (tilelang.tileop.base), for programs that size their
    # own per-warp tiles in Python
    def is_square(self) -> bool:
        return self is GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self is GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self is GemmWarpPolicy.FullCol

    @staticmethod
    def to_prime_factors(num: int) -> list:
        """``num``'s prime factors, smallest first, with repeats (``12 -> [2, 2, 3]``)."""
        out, p = [], 2
        while p * p <= num:
            while num % p == 0:
                out.append(p)
                num //= p
            p += 1
        return out + ([num] if num > 1 else [])

    def compute_warp_partition(self, M: int, N: int, num_warps: int) -> tuple:
        """TileLang's ``(m_warp, n_warp)`` for an ``M x N`` tile over ``num_warps`` warps
        (a warp's piece at least 16 rows by 8 columns): ``FullRow`` all warps along M, or
        ``M // 16`` of them and the rest along N when M does not split; ``FullCol`` the same
        along N by 8; ``Square`` the exact split whose per-warp piece's shape is nearest the
        tile's aspect ratio (the fewest warps along M on a tie; (1, 1) when none fits)."""
        if self is GemmWarpPolicy.FullRow:
            if M % (num_warps * 16) == 0:
                return num_warps, 1
            m = M // 16
            return m, max(num_warps // m, 1)
        if self is GemmWarpPolicy.FullCol:
            if N % (num_warps * 8) == 0:
                return 1, num_warps
            n = N // 8
            return max(num_warps // n, 1), n
        ratio = M / N if N > 0 else 1.0
        best, best_gap = (1, 1), float("inf")
        for m in range(1, min(M // 16, num_warps) + 1):
            n = num_warps // m
            if m * n != num_warps or n > N // 8:
                continue
            gap = abs((M / (m * 16)) / (N / (n * 8)) - ratio)
            if gap < best_gap:
                best, best_gap = (m, n), gap
        return best

    @classmethod
    def from_warp_partition(cls, m_warp: int, n_warp: int) -> "GemmWarpPolicy":
        """The policy a ``(m_warp, n_warp)`` split is: ``FullRow`` (warps along M only),
        ``FullCol`` (along N only), else ``Square``."""
        if n_warp == 1 and m_warp > 1:
            return cls.FullRow
        if m_warp == 1 and n_warp > 1:
            return cls.FullCol
        return cls.Square


# ---- layouts ------------------------------------------------------------------------------
def Layout(kind: str, threads: int = 0, vector: int = 0, swizzle: int = 0, mma: str = "",  # noqa: N802
           warps: tuple = (), operand: str = "", first_thread: int = 0, flat: bool = False) -> _N.Layout:
    """A buffer layout, as the layout pass prints it (``T.alloc_fragment(..., layout=...)``);
    see ``tilecute.ir.nodes.Layout``."""
    if not isinstance(kind, str):  # TileLang's T.Layout(shape, forward_fn)
        if not callable(threads):
            raise ValueError("T.Layout(shape, forward_fn) is TileLang's index-map layout: "
                             f"forward_fn must be a function of the indices, got {threads!r}; "
                             f"tilecute's own T.Layout names one of its layout kinds "
                             f"{_N.LAYOUT_KINDS}")
        from .global_layouts import IndexMapLayout

        # honored by T.annotate_layout on a global tensor (docs/ir.md)
        return IndexMapLayout(kind, threads)
    if kind not in _N.LAYOUT_KINDS:
        raise ValueError(f"T.Layout: kind must be one of {_N.LAYOUT_KINDS}, got {kind!r}")
    return _N.Layout(kind, threads, vector, swizzle, mma, tuple(warps), operand, first_thread, bool(flat))


# ---- macros -------------------------------------------------------------------------------
class Macro:
    """``@T.macro``: a Python function whose ``T.*`` body is inlined where a
    ``@T.prim_func`` calls it as a statement, its parameters bound to the call's arguments
    (buffers, expressions or Python values) and its other names resolved in the macro's
    own module and closure, as Python would.  A macro returns nothing."""

    def __init__(self, fn):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@T.macro decorates a Python function, got {fn!r}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        raise TypeError(f"T.macro {self.__name__!r} is inlined by @T.prim_func: call it as a "
                        "statement inside a kernel body")

    def __repr__(self) -> str:
        return f"<T.macro {self.__name__}>"


def macro(func=None, *, hygienic: bool = True):
    """TileLang's ``@T.macro`` (``hygienic=True``: names resolve where the macro is
    defined; ``hygienic=False``, TileLang's other mode, is refused)."""
    fn = func
    if not hygienic:
        raise ValueError("T.macro(hygienic=False) is not supported: tilecute resolves a "
                         "macro's names where it is defined, as Python does")
    if fn is None:
        return Macro
    return Macro(fn)

