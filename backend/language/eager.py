"""TileLang's eager jit style: ``@tilecute.jit`` on a function that takes the tensors
themselves and declares its shapes and outputs in its body::

    @tilecute.jit
    def add(A, B, block_M: int = 32, block_N: int = 32, threads: int = 128):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B: T.Tensor((M, N), T.float32)
        C = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            ...
        return C

    C = add(a, b)                                       # M, N bound from a's shape
    kernel = add.compile(M=1024, N=1024, block_M=64)    # ahead of time; kernel(a, b) -> C
    kernel = add.compile(a, b)                          # or bound from tensors

The function's parameters are of three kinds, as in TileLang: tensors (declared
``A: T.Tensor(shape, dtype)`` in the body, or annotated so in the signature), runtime
scalars (``n: T.int32``, in the body or the signature: a kernel parameter, one kernel
for every value) and the others, specialization arguments (one kernel per distinct
value).  Each ``T.const`` is bound, as TileLang's phase 1 does, by evaluating the body's
Python statements and tensor declarations with every constant a symbol: a declared dim
that *is* a constant's symbol (``K``, or ``KH`` after ``KH, KW = K, K``) binds it from the
tensor's size there; a keyword argument named after the constant binds it too.  Then
the body runs with the constants' values (derived dims such as ``OH = (H - K) // S + 1``
become ints), every tensor is checked against what its declaration comes to, and the
kernel statements become a ``prim_func`` whose parameters are the tensors and runtime
scalars in signature order, then the ``T.empty`` outputs (``out_idx``), which the call
allocates and returns (``return C`` or ``return C, D``; a kernel that declares none
writes its tensors in place and returns None).  ``T.dynamic`` names stay symbolic.
"""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import operator
import sys
import textwrap
import threading
from collections.abc import Sequence
from typing import Any, Hashable, Optional

from ..ir import nodes as N
from .parser import (_INT_SCALAR_DIMS, FrontendError, _function_env, _Parser, _walk_exprs,
                     empty_args, holds_kernel)
from ..runtime.dtypes import element_dims
from ..runtime.kernel import write_debug_files
from .values import DType, Macro, Pointer, TensorSpec


def _is_t(node, env: dict) -> bool:
    """``node`` is ``T.<x>`` for a name bound to the ``tilecute.language`` module."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
        env.get(node.value.id) is sys.modules[__package__]


def _t_call(node, names: tuple[str, ...], env: dict) -> bool:
    """``node`` is a call ``T.<name>(...)``."""
    return isinstance(node, ast.Call) and _is_t(node.func, env) and node.func.attr in names


def _callee(call: ast.Call, env: dict):
    """What a call's callee (a name or an attribute path) is in ``env``, or None."""
    node, path = call.func, []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    value = env.get(node.id)
    for attr in reversed(path):
        value = getattr(value, attr, None)
    return value


def _source(fn):
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    fdef = tree.body[0]
    return (fdef, first) if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _own_nodes(fdef):
    """The nodes of ``fdef``'s body outside nested functions, lambdas and classes (what
    running the function itself evaluates)."""
    todo = list(fdef.body)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                      ast.ClassDef)):
                todo.append(child)


def has_internal_prim_func(fdef, env: dict) -> bool:
    """TileLang's ``has_internal_prim_func``: a function defined anywhere in ``fdef`` is
    decorated ``@T.prim_func`` (the decorator evaluates to tilecute's ``prim_func``), so
    ``fdef`` is a factory returning it."""
    from .parser import prim_func

    for node in ast.walk(fdef):
        if node is fdef or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in node.decorator_list:
            d = d.func if isinstance(d, ast.Call) else d
            try:
                if eval(compile(ast.Expression(d), "<decorator>", "eval"), dict(env)) is prim_func:
                    return True
            except Exception:
                continue
    return False


def is_eager(fn) -> bool:
    """Whether ``fn`` is written in TileLang's eager style rather than as a factory.
    TileLang (``JITFunc._is_lazy_style``) takes a function holding an inner
    ``@T.prim_func`` for a factory; otherwise it calls the function, and one that fails
    on an eager-only form (``T.const``, ``T.Kernel`` outside a kernel being built) is
    eager.  tilecute reads the same from the source, once: no inner ``@T.prim_func``,
    and the function's own body declares ``T.const`` names or ``T.empty`` outputs,
    declares a parameter's type (``A: T.Tensor(...)``, or in the signature), or opens a
    ``with T.Kernel(...)`` / ``T.ClusterKernel(...)`` block itself (``def k(M: int):
    with T.Kernel(threads=32): ...``: a kernel without tensors).  Any other function is
    a factory whose call returns the ``prim_func``."""
    if not inspect.isfunction(fn):
        return False
    found = _source(fn)
    if found is None:
        return False
    fdef, _ = found
    env = _function_env(fn)
    if has_internal_prim_func(fdef, env):
        return False
    params = {a.arg for a in fdef.args.args}
    for s in fdef.body:
        if isinstance(s, ast.Assign) and _t_call(s.value, ("const", "empty"), env):
            return True
        if isinstance(s, ast.AnnAssign) and s.value is None and isinstance(s.target, ast.Name) \
                and s.target.id in params:
            return True
    if any(isinstance(n, ast.With) and any(_t_call(i.context_expr, ("Kernel", "ClusterKernel"), env)
                                           for i in n.items)
           for n in _own_nodes(fdef)):
        return True
    # tensors typed in the signature (`def f(A: T.Tensor((128,), T.float32))`)
    return any(isinstance(p.annotation, TensorSpec) for p in inspect.signature(fn).parameters.values())


def _freeze(value) -> Hashable:
    """A hashable stand-in for a compile-time argument, as TileLang's jit keys one
    (``_freeze_jit_key_part``): dicts, lists and sets by their frozen items, tuples item
    by item; anything else unhashable is a ``TypeError``."""
    if isinstance(value, dict):
        return (dict, tuple((_freeze(k), _freeze(v))
                            for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))))
    if isinstance(value, list):
        return (list, tuple(_freeze(v) for v in value))
    if isinstance(value, set):
        return (set, tuple(sorted((_freeze(v) for v in value), key=repr)))
    if isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    if not isinstance(value, Hashable):
        raise TypeError(f"Unsupported unhashable JIT compile-time cache key value of type "
                        f"{type(value).__qualname__}: {value!r}")
    return value


def bind_arguments(signature: inspect.Signature, tensors, args: tuple, kwargs: dict):
    """TileLang's jit argument binding (``_JITArgumentBinder``): a call's arguments as
    (key, tensor arguments, compile-time keyword arguments).  The key holds the
    compile-time values in signature order, defaults applied (so ``f(512, 512)``,
    ``f(hidden=512, token_stride=512)`` and ``f(512, 512, False)`` with that default
    are one kernel), ``**kwargs`` and keywords the signature lacks (``T.const`` values
    by name) flattened into one sorted item; tensors are not part of it."""
    params = list(signature.parameters.values())
    var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    if any(p.kind is p.VAR_POSITIONAL for p in params) or var_keyword:
        bound = signature.bind(*args, **kwargs)  # Python's rules
        bound.apply_defaults()
        arguments, extra = dict(bound.arguments), {}
        if var_keyword:
            extra = arguments.pop(var_keyword) or {}
    else:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(args) > len(positional):
            raise TypeError(f"too many positional arguments for JIT function: expected at most "
                            f"{len(positional)}, got {len(args)}")
        arguments = {p.name: a for p, a in zip(positional, args)}
        extra = {}
        for name, value in kwargs.items():
            if name not in signature.parameters:
                extra[name] = value  # a T.const by name
            elif name in arguments:
                raise TypeError(f"got multiple values for argument '{name}'")
            else:
                arguments[name] = value
        for p in params:
            if p.name not in arguments:
                if p.default is not p.empty:
                    arguments[p.name] = p.default
                elif p.name not in tensors:
                    raise TypeError(f"missing a required argument: '{p.name}'")
    key, tensor_args, compile_kwargs = [], {}, {}
    for p in params:
        if p.name not in arguments:
            continue
        if p.name in tensors:
            tensor_args[p.name] = arguments[p.name]
        else:
            key.append(arguments[p.name])
            compile_kwargs[p.name] = arguments[p.name]
    if extra:
        key.append(tuple(sorted(extra.items())))
        compile_kwargs.update(extra)
    return tuple(_freeze(v) for v in key), tensor_args, compile_kwargs


class JitFunction:
    """``jitted.func`` (TileLang's ``JITFunc``): the decorated function and how a call's
    arguments key its kernels.  ``parse_args(*args, **kw)`` gives (kernel key, tensor
    arguments): a factory's key is ``(bound compile-time values, None)``, an eager
    kernel's ``(bound values, its T.const values)``; ``_parse_phase1_key`` gives (bound
    values, tensor arguments, compile-time keyword arguments)."""

    def __init__(self, fn, tensors=(), consts=None, get_tir=None):
        self.orig_func = fn
        self.signature = inspect.signature(fn)
        self.tensor_args = tuple(tensors)
        self.mode = "eager" if consts is not None else "lazy"
        self._consts = consts  # eager: args, kwargs -> the T.const values
        self.get_tir = get_tir or fn  # the prim_func of a call's arguments

    def _parse_phase1_key(self, *args, **kwargs):
        return bind_arguments(self.signature, self.tensor_args, args, kwargs)

    def parse_args(self, *args, **kwargs):
        key, tensors, _ = self._parse_phase1_key(*args, **kwargs)
        if self._consts is None:
            return (key, None), tensors
        return (key, tuple(sorted(self._consts(args, kwargs).items()))), tensors

    def set_mode(self, mode: str) -> None:
        if mode != self.mode:
            raise ValueError(f"{self.orig_func.__name__} is a {self.mode} jit function "
                             f"(tilecute reads the style from the source); set_mode({mode!r})")

    def __call__(self, *args, **kwargs):
        return self.get_tir(*args, **kwargs)

    def __getattr__(self, name):
        if name in ("__closure__", "__code__", "__name__", "__globals__"):
            return getattr(self.orig_func, name)
        if name == "__wrapped__":
            return self.orig_func
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _text(d) -> str:
    if isinstance(d, N.Expr):
        from ..ir.printer import expr_str

        return expr_str(d)
    return repr(d)


def _dtype_text(dtype) -> str:
    """A declared dtype's canonical name, or "" where it is no tilecute dtype (the parser
    reports it)."""
    from .values import dtype_name

    try:
        return dtype_name(dtype)
    except (KeyError, ValueError, TypeError):
        return ""


class _Probe:
    """What the declarations say with every ``T.const`` a symbol (TileLang's phase 1), for
    one set of specialization arguments: where each constant stands as a whole dim
    (``uses``: const -> [(tensor, field, dim)]), and each tensor's declared rank and dims
    as text (None where the declaration could not be evaluated symbolically)."""

    def __init__(self, uses: dict, ranks: dict, dims: dict, dtypes: dict | None = None):
        self.uses, self.ranks, self.dims = uses, ranks, dims
        self.dtypes = dtypes or {}  # tensor -> its declared dtype (packed ones bind so)


class EagerKernel:
    """The object ``@tilecute.jit`` returns for an eager-style function: call it with
    tensors (and specialization arguments), or ``.compile(...)`` for the kernel."""

    def __init__(self, fn, target: Optional[str] = None, options: Optional[dict] = None,
                 verbose: Optional[bool] = None, release_gil: Optional[bool] = None,
                 debug_root_path: Optional[str] = None):
        self.fn, self.target, self.options = fn, target, dict(options or {})
        # TileLang's jit(debug_root_path=...): each kernel compiled writes its source and
        # program there (tilelang_jit_kernel_<name>.py, tilelang_jit_program_<name>.py)
        self.debug_root_path = debug_root_path
        self.verbose = verbose  # TileLang's jit(verbose=...): tilecute.compile's
        self.release_gil = release_gil  # tilecute.compile's, for every kernel compiled
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        fdef, first = _source(fn)
        self.fdef, self.offset = fdef, first - 1
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        self.lines = linecache.getlines(self.filename)[self.offset:] or []
        self.signature = inspect.signature(fn)
        env = _function_env(fn)
        self.consts: list[str] = []  # T.const names, in order
        self.const_targets: dict[str, str] = {}  # Python name -> T.const name
        self.decls: dict[str, ast.expr] = {}  # parameter -> its annotation in the body
        self.outputs: dict[str, ast.Call] = {}  # T.empty name -> its call
        self.python: list[ast.stmt] = []  # other top-level Python statements, in order
        self.body: list[ast.stmt] = []  # the kernel statements
        self.returns: Optional[list[str]] = None
        self._local_macros: set[str] = set()  # T.macro functions defined in the body
        # `return macro(A)`: the outputs are the macro's T.empty, declared by the parser
        self.macro_return = False
        params = [a.arg for a in fdef.args.args]
        framed = False  # after TVM's launch frames (T.launch_thread), the kernel's statements
        for s in fdef.body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and \
                    isinstance(s.value.value, str):
                continue  # the docstring
            framed = framed or isinstance(s, ast.Assign) and \
                _t_call(s.value, ("launch_thread",), env)
            if framed and not isinstance(s, ast.Return):
                self.body.append(s)
                continue
            if isinstance(s, ast.Assign) and _t_call(s.value, ("const",), env):
                self._const(s)
                continue
            s = self._inline_consts(s, env)
            if isinstance(s, ast.Assign) and _t_call(s.value, ("const",), env):
                self._const(s)
            elif isinstance(s, ast.Assign) and _t_call(s.value, ("empty",), env):
                names = self._targets(s)
                if len(names) != 1:
                    raise self.error(s, "T.empty declares one output: `C = T.empty(shape, dtype)`")
                self.outputs[names[0]] = s.value
            elif isinstance(s, ast.AnnAssign) and s.value is None and \
                    isinstance(s.target, ast.Name) and s.target.id in params:
                self.decls[s.target.id] = s.annotation
                self.python.append(s)  # (in order: later statements read `A.shape`)
            elif isinstance(s, ast.Assign) and _t_call(s.value, ("match_buffer",), env):
                # `A = T.match_buffer(A, shape, dtype)` on an `A: T.ptr` parameter: TileLang's
                # eager jit binds the tensor passed for A to that shape, as a declaration
                decl = self._match_buffer_decl(s, params)
                self.decls[decl.target.id] = decl.annotation
                self.python.append(decl)
            elif any(_t_call(n, ("match_buffer",), env) for n in ast.walk(s)):
                raise self.error(s, "T.match_buffer in an eager kernel is not supported by "
                                    "tilecute inside another statement (an `if` on a "
                                    "specialization argument, say): bind the parameter at the "
                                    "top of the body, `A = T.match_buffer(A, shape, dtype)`, "
                                    "or declare the tensor there, `A: T.Tensor(shape, dtype)`")
            elif isinstance(s, ast.Return):
                self.returns = self._returned(s, env)
            elif self._is_python(s, env):
                if isinstance(s, ast.FunctionDef) and any(
                        _is_t(d.func if isinstance(d, ast.Call) else d, env) and
                        (d.func if isinstance(d, ast.Call) else d).attr == "macro"
                        for d in s.decorator_list):
                    self._local_macros.add(s.name)
                self.python.append(s)
            else:
                self.body.append(s)
        returned = self.returns or []
        missing = [r for r in returned if r not in self.outputs]
        if missing:
            raise self.error(fdef, f"an eager kernel returns only its T.empty outputs "
                                   f"({', '.join(self.outputs) or 'none declared'}); got "
                                   f"{', '.join(missing)}")
        unreturned = [o for o in self.outputs if o not in returned]
        if unreturned:
            raise self.error(fdef, f"an eager kernel returns every T.empty output: "
                                   f"{', '.join(unreturned)} not returned (`return "
                                   f"{', '.join(self.outputs)}`)")
        # parameter kinds: tensors and runtime scalars are kernel arguments
        sig_ann = self._signature_annotations(env)
        self.tensors, self.scalar_args, self.runtime, self.scalars = [], [], [], []
        for p in params:
            ann = self.decls.get(p)
            if ann is not None:  # (`A: T.ptr()`, a pointer, is no tensor)
                tensor = isinstance(ann, (ast.Call, ast.Subscript)) and \
                    not _t_call(ann, ("ptr",), env)
            elif p in sig_ann:
                tensor = isinstance(sig_ann[p], TensorSpec)
            else:
                self.scalars.append(p)  # a specialization argument
                continue
            (self.tensors if tensor else self.scalar_args).append(p)
            self.runtime.append(p)
        self.sig_ann = sig_ann
        self._tensor_pos = {params.index(p) for p in self.tensors}
        self._scalar_pos = {params.index(p) for p in self.scalar_args}
        self._runtime_pos = [params.index(p) for p in self.runtime]
        self._last_runtime_pos = max(self._runtime_pos, default=-1)
        self._fast: dict = {}  # positional call form -> kernel (see __call__)
        self._kernels: dict = {}
        self._probes: dict = {}
        self._expected: dict = {}  # kernel key -> {tensor: (declared shape, ints or None; dtype)}
        self._lock = threading.Lock()
        self.sealed = False
        self.mode = "eager"  # TileLang's JITImpl.mode
        self.func = JitFunction(fn, self.tensors, get_tir=self.get_tir,
                                consts=lambda a, kw: self._resolve(a, dict(kw), partial=True)[2])

    # ---- parsing helpers --------------------------------------------------------------
    def error(self, node, msg: str) -> FrontendError:
        lineno = getattr(node, "lineno", 0)
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        return FrontendError(msg, N.Loc(self.filename, lineno + self.offset), self.__name__, line)

    def _match_buffer_decl(self, s: ast.Assign, params: list) -> ast.AnnAssign:
        """``A = T.match_buffer(A, shape, dtype="float32", strides=None)`` at the top of an
        eager body, ``A`` a parameter: the declaration ``A: T.Tensor(shape, dtype)`` (or
        ``T.StridedTensor(shape, strides, dtype)``), which TileLang's eager jit makes of it
        too (its annotations become match_buffer's).  Other arguments are refused by name."""
        call = s.value
        fields = ("param", "shape", "dtype", "data", "strides", "elem_offset", "scope",
                  "align", "offset_factor", "buffer_type", "axis_separators")
        if len(call.args) > len(fields):
            raise self.error(s, f"T.match_buffer takes at most {len(fields)} arguments")
        given = dict(zip(fields, call.args))
        for kw in call.keywords:
            if kw.arg not in fields or kw.arg in given:
                raise self.error(s, f"T.match_buffer: unexpected or repeated argument "
                                    f"'{kw.arg}'")
            given[kw.arg] = kw.value
        target = s.targets[0] if len(s.targets) == 1 else None
        param = given.get("param")
        if not (isinstance(target, ast.Name) and isinstance(param, ast.Name) and
                param.id == target.id and param.id in params and "shape" in given):
            raise self.error(s, "T.match_buffer in an eager kernel binds a parameter to a "
                                "shape under its own name: `A = T.match_buffer(A, shape, "
                                "dtype)` (A a parameter, `A: T.ptr`)")
        # (as the prim_func parser takes them: defaults, and align a power of two)
        accepted = {"data": (None,), "elem_offset": (None, 0), "scope": ("global",),
                    "offset_factor": (0, 1), "buffer_type": ("default", ""),
                    "axis_separators": (None,)}
        align = given.pop("align", None)
        if align is not None and not (isinstance(align, ast.Constant) and
                                      type(align.value) is int and
                                      (align.value <= 0 or not align.value & (align.value - 1))):
            raise self.error(s, f"T.match_buffer: align is an int (a power of two, or -1/0: "
                                f"TVM's default), got {ast.unparse(align)}")
        for name, values in accepted.items():
            node = given.get(name)
            if node is not None and not (isinstance(node, ast.Constant) and node.value in values):
                raise self.error(s, f"T.match_buffer(..., {name}={ast.unparse(node)}) in an "
                                    "eager kernel is not supported by tilecute (a parameter "
                                    "binds a global tensor of its shape, dtype and strides)")
        dtype = given.get("dtype", ast.Constant("float32"))
        strides = given.get("strides")
        if strides is not None and isinstance(strides, ast.Constant) and strides.value is None:
            strides = None
        if isinstance(strides, (ast.Tuple, ast.List)):  # TVM: a string stride is an int32 symbol
            strides = type(strides)(elts=[
                ast.Call(func=ast.Attribute(value=call.func.value, attr="dynamic", ctx=ast.Load()),
                         args=[e], keywords=[])
                if isinstance(e, ast.Constant) and isinstance(e.value, str) else e
                for e in strides.elts], ctx=ast.Load())
        func = ast.Attribute(value=call.func.value, attr="Tensor" if strides is None else
                             "StridedTensor", ctx=ast.Load())
        args = [given["shape"], dtype] if strides is None else [given["shape"], strides, dtype]
        decl = ast.AnnAssign(target=ast.Name(target.id, ast.Store()),
                             annotation=ast.Call(func=func, args=args, keywords=[]), simple=1)
        return ast.fix_missing_locations(ast.copy_location(decl, s))

    def _targets(self, s: ast.Assign) -> list[str]:
        if len(s.targets) != 1:
            raise self.error(s, "one assignment target (a name or a tuple of names)")
        t = s.targets[0]
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(s, "T.const / T.empty bind plain names")
        return [e.id for e in elts]

    def _const(self, s: ast.Assign) -> None:
        """``M, N = T.const("M, N")``: TileLang names the constants by the string (the
        keyword a call may give them by); the targets are the Python names."""
        import re

        targets = self._targets(s)
        call = s.value
        names = targets
        if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            names = [n for n in re.split(r"\s*,\s*|\s+", call.args[0].value.strip()) if n]
        if len(names) != len(targets):
            raise self.error(s, f"T.const({ast.unparse(call.args[0])}) declares {len(names)} "
                                f"constant(s), bound to {len(targets)} name(s)")
        for t, n in zip(targets, names):
            self.consts.append(n)
            self.const_targets[t] = n

    def _inline_consts(self, s: ast.stmt, env: dict) -> ast.stmt:
        """TileLang's T.const where it is not a whole assignment's value: ``M, N =
        T.const("M"), T.const("N")`` or a declaration's dim ``A: T.Tensor((T.const("M"),
        64), ...)`` (phase 1 makes it a symbol, phase 2 its value, as for ``M =
        T.const("M")``).  Each such call becomes a name bound to the constant."""
        import re

        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                not any(_t_call(n, ("const",), env) for n in ast.walk(s)):
            return s
        owner = self

        class Inline(ast.NodeTransformer):
            def visit_Call(self, node):
                if not _t_call(node, ("const",), env):
                    return self.generic_visit(node)
                if not (node.args and isinstance(node.args[0], ast.Constant) and
                        isinstance(node.args[0].value, str)):
                    raise owner.error(node, "T.const takes the constants' names as a string: "
                                            "T.const(\"M\") or T.const(\"M, N\")")
                names = [n for n in re.split(r"\s*,\s*|\s+", node.args[0].value.strip()) if n]
                refs = []
                for n in names:
                    target = f"tc_const_{n}"
                    if n not in owner.consts:
                        owner.consts.append(n)
                    owner.const_targets[target] = n
                    refs.append(ast.copy_location(ast.Name(id=target, ctx=ast.Load()), node))
                if len(refs) == 1:
                    return refs[0]
                return ast.copy_location(ast.Tuple(elts=refs, ctx=ast.Load()), node)

        return ast.fix_missing_locations(Inline().visit(copy.deepcopy(s)))

    def _returned(self, s: ast.Return, env: dict) -> list[str]:
        v = s.value
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            return []
        elts = v.elts if isinstance(v, ast.Tuple) else [v]
        if any(isinstance(e, ast.Call) and (self._calls_macro(e, env) or
                                            self._calls_kernel_function(e, env)) for e in elts):
            # `return copy_impl(A)`: TileLang allocates the macro's T.empty as the output.
            # The parser inlines the macro where the body returns it (its outputs become
            # the prim_func's, after the tensors and scalars): the kernel statement is the
            # return itself
            if self.outputs:
                raise self.error(s, f"`{ast.unparse(s)}` returns a T.macro's output beside the "
                                    f"body's own T.empty ({', '.join(self.outputs)}): return "
                                    "the macro's alone, or declare every output in the body")
            self.macro_return = True
            self.body.append(s)
            return []
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(s, "an eager kernel returns its T.empty outputs by name")
        return [e.id for e in elts]

    def _is_python(self, s: ast.stmt, env: dict) -> bool:
        """A top-level statement that runs as Python (with the constants bound) rather
        than a kernel statement: assignments and asserts that allocate nothing, imports,
        nested functions (``@T.macro`` included), ``if`` on Python values without kernels
        inside, and calls that are not ``T.*`` statements (``print``)."""
        if any(isinstance(n, ast.With) for n in ast.walk(s)):
            return False
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Assert)):
            # (T.make_tensor: a tensor at a pointer parameter's address, a kernel statement)
            return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                           (n.func.attr.startswith("alloc") or n.func.attr in
                            ("make_tensor", "make_tensor_from_addr")) for n in ast.walk(s))
        if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Pass, ast.If)):
            return True
        return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
            not _is_t(s.value.func, env) and not self._calls_macro(s.value, env) and \
            not self._calls_kernel_function(s.value, env)

    def _calls_kernel_function(self, call: ast.Call, env: dict) -> bool:
        """``call`` calls a plain Python function holding ``with T.Kernel(...)`` blocks
        (``copy_tiles(A, B)``): TileLang's builder runs it in the kernel being built, so
        it is a kernel statement, inlined by the parser, not Python to run now."""
        value = _callee(call, env)
        return inspect.isfunction(value) and holds_kernel(value)

    def _calls_macro(self, call: ast.Call, env: dict) -> bool:
        """``call`` calls a ``T.macro`` (one of the function's environment, or one defined
        earlier in its body): a kernel statement, as in TileLang, not Python to run."""
        if isinstance(call.func, ast.Name) and call.func.id in self._local_macros:
            return True
        return isinstance(_callee(call, env), Macro)

    def _signature_annotations(self, env: dict) -> dict:
        """Signature annotations that make a parameter a kernel argument: a tensor type,
        a scalar dtype (``n: T.int32``) or TileLang's pointer ``T.ptr`` (an address the call
        passes as a tensor or an int); ``block_M: int`` and the like do not."""
        out = {}
        for name, p in self.signature.parameters.items():
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                continue
            if isinstance(ann, str) and not isinstance(ann, DType):  # postponed annotations
                try:
                    ann = eval(ann, dict(env))
                except Exception:
                    continue
            if isinstance(ann, (TensorSpec, DType, Pointer)):
                out[name] = ann
        return out

    def _exec(self, s: ast.stmt, env: dict) -> None:
        node = ast.increment_lineno(copy.deepcopy(s), self.offset)
        exec(compile(ast.Module([node], []), self.filename, "exec"), env)

    def _eval(self, node, env: dict):
        node = ast.increment_lineno(copy.deepcopy(node), self.offset)
        return eval(compile(ast.Expression(node), self.filename, "eval"), env)

    def _declared(self, name: str, env: dict):
        """The evaluated declaration of parameter ``name``."""
        if name in self.decls:
            return self._eval(self.decls[name], env)
        return self.sig_ann[name]

    def _bind_declared(self, env: dict) -> None:
        """Tensors and scalars typed in the signature, as the body's Python statements see
        them (a scalar: the kernel parameter's variable)."""
        for name in self.tensors:
            if name not in self.decls and isinstance(self.sig_ann.get(name), TensorSpec):
                env[name] = DeclaredTensor(name, self.sig_ann[name])
        for name in self.scalar_args:  # `n: T.int32` in the signature
            ann = self.sig_ann.get(name)
            if name not in self.decls and isinstance(ann, str) and _dtype_text(ann):
                env[name] = N.Var(name, _dtype_text(ann))

    def _declare(self, s: ast.stmt, env: dict) -> bool:
        """``A: T.Tensor(shape, dtype)`` among the body's Python statements: TileLang binds
        ``A`` to the matched buffer there, so the statements after it read ``A.shape`` /
        ``A.dtype`` (``M, N = A.shape``).  True if ``s`` is a tensor's declaration."""
        if not (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and
                self.decls.get(s.target.id) is s.annotation):
            return False
        name = s.target.id
        if name in self.tensors:
            declared = self._eval(s.annotation, env)
            if isinstance(declared, TensorSpec):
                env[name] = DeclaredTensor(name, declared)
        elif name in self.scalar_args:  # `n: T.int32`: the kernel's scalar (`T.ceildiv(n, 128)`)
            declared = self._eval(s.annotation, env)
            if isinstance(declared, str) and _dtype_text(declared):
                env[name] = N.Var(name, _dtype_text(declared))
        return True

    # ---- binding ------------------------------------------------------------------------
    def _probe(self, spec: dict, key) -> _Probe:
        """TileLang's phase 1 for these specialization arguments (cached)."""
        probe = self._probes.get(key)
        if probe is not None:
            return probe
        env = _function_env(self.fn)
        env.update(spec)
        symbols = {c: N.Var(c, "int32") for c in self.consts}
        env.update({t: symbols[c] for t, c in self.const_targets.items()})
        self._bind_declared(env)
        for s in self.python:
            try:
                if not self._declare(s, env):
                    self._exec(s, env)
            except Exception:  # noqa: BLE001 - a statement symbols cannot run; phase 2 runs it
                pass
        uses: dict[str, list] = {}
        ranks, dims, dtypes = {}, {}, {}
        for name in self.tensors:
            try:
                declared = self._declared(name, env)
            except Exception:  # noqa: BLE001
                declared = None
            if isinstance(declared, TensorSpec) and not declared.error:
                shape, strides = declared.shape, declared.strides or ()
                ranks[name] = len(shape)
                dims[name] = tuple(_text(d) for d in shape)
                dtypes[name] = _dtype_text(declared.dtype)
            else:  # fall back on the text: bare constant names as dims
                nodes = _shape_nodes(self.decls.get(name))
                if nodes is None:
                    continue
                shape = [symbols[self.const_targets[n.id]] if isinstance(n, ast.Name) and
                         n.id in self.const_targets else None for n in nodes]
                strides = ()
            for field, ds in (("shape", shape), ("stride", strides)):
                for i, d in enumerate(ds):
                    if isinstance(d, N.Var) and d.name in symbols and d is symbols[d.name]:
                        uses.setdefault(d.name, []).append((name, field, i))
        probe = _Probe(uses, ranks, dims, dtypes)
        with self._lock:
            self._probes[key] = probe
        return probe

    def _bind(self, tensors: dict, given: dict, probe: _Probe) -> dict:
        """The constants: given by keyword, else from the tensors where a declared dim is
        the constant itself; every such dim must agree.  A keyword may give a symbol
        (``M=T.dynamic("m")``, as TileLang's phase 2 substitutes it): that dim stays
        dynamic, one kernel for every size, bound at launch."""
        consts = {c: self._given_const(c, v) for c, v in given.items()}
        source: dict[str, str] = {c: "the keyword argument" for c in consts}
        for name, t in tensors.items():
            rank = probe.ranks.get(name)
            if rank is not None and hasattr(t, "shape") and rank != len(t.shape):
                raise ValueError(f"{self.__name__}: '{name}' is declared with {rank} dims "
                                 f"({', '.join(probe.dims[name])}), got a tensor of shape "
                                 f"{tuple(t.shape)}")
        for c, uses in probe.uses.items():
            for name, field, i in uses:
                t = tensors.get(name)
                if t is None:
                    continue
                # (a packed dtype's tensor is its bytes: its dims in elements)
                sizes = element_dims(probe.dtypes.get(name, ""), t.shape if field == "shape"
                                     else t.stride(), strides=field != "shape")
                if i >= len(sizes):
                    raise ValueError(f"{self.__name__}: '{name}' has no dim {i} (shape "
                                     f"{tuple(t.shape)}) for T.const {c}")
                size = int(sizes[i])
                if isinstance(consts.get(c), N.Var):
                    continue  # a symbol by keyword: the launch binds it from the tensor
                if c not in consts:
                    consts[c], source[c] = size, f"'{name}' ({field} {i})"
                elif consts[c] != size:
                    raise ValueError(f"{self.__name__}: T.const {c} is {consts[c]} by "
                                     f"{source[c]} but {size} by '{name}' ({field} {i})")
        return consts

    def _given_const(self, name: str, value):
        """A ``T.const`` value given by keyword: an integer, or a ``T.dynamic`` symbol."""
        if isinstance(value, N.Var):
            return value
        try:
            if isinstance(value, bool):
                raise TypeError
            return operator.index(value)
        except TypeError:
            raise TypeError(f"{self.__name__}: T.const {name} is given {value!r}; a constant is "
                            f"an int, or a T.dynamic symbol for a dim bound at launch") from None

    def _resolve(self, args, kwargs, partial: bool):
        """Split a call into (kernel arguments present, specialization arguments,
        constants, kernel key)."""
        const_kw = {k: kwargs.pop(k) for k in list(kwargs)
                    if k in self.consts and k not in self.signature.parameters}
        where = f"{self.__name__}.compile" if partial else self.__name__
        unknown = [k for k in kwargs if k not in self.signature.parameters]
        if unknown:
            raise TypeError(f"{where}: unknown argument(s) {', '.join(unknown)}; the T.const "
                            f"names are {', '.join(self.consts) or 'none'} and the parameters "
                            f"{', '.join(self.signature.parameters)}")
        try:
            bound = (self.signature.bind_partial if partial else self.signature.bind)(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{where}: {e}") from None
        bound.apply_defaults()
        runtime = {n: bound.arguments[n] for n in self.runtime if n in bound.arguments}
        spec = {}
        for n in self.scalars:
            if n not in bound.arguments:
                raise TypeError(f"{self.__name__}.compile: missing specialization argument '{n}'")
            v = bound.arguments[n]
            if hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, (str, DType)):
                raise TypeError(f"{self.__name__}: '{n}' got a tensor but the body declares no "
                                f"`{n}: T.Tensor(shape, dtype)`")
            spec[n] = v
        try:
            spec_key = tuple((n, _freeze(v)) for n, v in spec.items())
        except TypeError as e:
            raise TypeError(f"{self.__name__}: a specialization argument cannot key a kernel: "
                            f"{e}") from None
        probe = self._probe(spec, spec_key)
        tensors = {n: v for n, v in runtime.items() if n in self.tensors}
        consts = self._bind(tensors, const_kw, probe)
        unbound = [c for c in self.consts if c not in consts]
        if unbound:
            if partial:
                raise TypeError(f"{self.__name__}.compile: give the T.const value(s) "
                                f"{', '.join(unbound)} (or tensors whose declared dims they are)")
            raise ValueError(f"{self.__name__}: T.const {', '.join(unbound)} is not a dim of "
                             f"any tensor argument; pass it by keyword ({', '.join(f'{c}=...' for c in unbound)}) "
                             f"or compile with {self.__name__}.compile("
                             f"{', '.join(f'{c}=...' for c in unbound)})")
        key = (tuple(sorted(consts.items())), spec_key)
        return runtime, spec, consts, key

    def _env(self, consts: dict, spec: dict) -> tuple[dict, list]:
        """The body's Python statements run with these constants: (the names they bind,
        the ``assert``s on symbols, which the kernel's statements take)."""
        env = _function_env(self.fn)
        env.update(spec)
        env.update({t: consts[c] for t, c in self.const_targets.items()})
        self._bind_declared(env)
        symbolic = []
        for s in self.python:
            if isinstance(s, ast.Assert) and self._symbolic(s.test, env):
                # TileLang's builder makes an assert on symbols an Assert, checked at every
                # call (a T.dynamic dim, or a T.const given one): the parser's top-level assert
                symbolic.append(s)
                continue
            try:
                if not self._declare(s, env):
                    # as TileLang's builder runs them on PrimExprs: the truth of a run-time
                    # value (`min(128, M)` on a T.dynamic M) is an error, not True
                    with N.primexpr_equality():
                        self._exec(s, env)
            except AssertionError as e:
                if not isinstance(s, ast.Assert):
                    raise
                why = f" ({e})" if str(e) else ""
                raise ValueError(f"{self.__name__}: line {s.lineno + self.offset}: "
                                 f"{ast.unparse(s)} failed for {consts}{why}") from None
            except ValueError as e:
                if str(e) != N._HELPER_BOOL:
                    raise
                raise self.error(s, f"`{ast.unparse(s).splitlines()[0]}` uses a run-time value "
                                    "(a T.dynamic dim) as a Python bool (`if`, `and` / `or`, "
                                    "min() / max()): TileLang's builder refuses it too (TVM's "
                                    "\"Cannot use and / or / not operator to Expr\"); use "
                                    "T.min / T.max / T.if_then_else in the kernel") from None
        return env, symbolic

    def _symbolic(self, test: ast.expr, env: dict) -> bool:
        """An ``assert``'s test is a run-time condition: evaluated as TileLang's builder
        does (``==`` builds a comparison), it comes to an expression, not a value."""
        try:
            with N.primexpr_equality():
                value = self._eval(test, env)
        except ValueError as e:  # bool() of a run-time comparison (`M >= 64 and ...`)
            return str(e) == N._HELPER_BOOL
        except Exception:  # noqa: BLE001 - Python's assert reports it
            return False
        return isinstance(value, N.Expr) and not isinstance(value, N.Const)

    def _build(self, consts: dict, spec: dict, key):
        with self._lock:
            kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        if self.sealed:
            built = "; ".join(", ".join(f"{k}={v}" for k, v in (*c, *sp)) for c, sp in self._kernels) or "none"
            raise ValueError(f"{self.__name__}: no kernel for {', '.join(f'{k}={v}' for k, v in (*consts.items(), *spec.items()))}, "
                             f"and {self.__name__} is sealed (no compile after seal()); built: {built}")
        import tilecute

        func, expected = self._prim_func(consts, spec)
        outputs = len(self.outputs)
        if self.macro_return:  # the macro's outputs, in its return order, after the arguments
            outputs = len(func.params) - len(self.runtime) - len(func.workspaces)
        # (the parser's prim_func returns the macro's outputs itself: its own out_idx)
        out_idx = None if self.macro_return else [len(self.runtime) + i for i in range(outputs)]
        kernel = tilecute.compile(func, out_idx=out_idx, target=self.target, options=self.options,
                                  verbose=self.verbose, release_gil=self.release_gil)
        if self.debug_root_path is not None:
            write_debug_files(kernel, func.name, func.script(), self.debug_root_path)
        order = list(range(outputs)) if self.macro_return else \
            [list(self.outputs).index(r) for r in (self.returns or [])]
        kernel = _Returning(kernel, order)
        with self._lock:
            self._kernels[key] = kernel
            self._expected[key] = expected
        return kernel

    def _prim_func(self, consts: dict, spec: dict):
        """The body as a ``prim_func`` for these constants (TileLang's phase 2), and each
        tensor's declared shape (ints, None for symbolic dims)."""
        env, asserts = self._env(consts, spec)
        annotations, expected = {}, {}
        for name in self.runtime:
            declared = self._declared(name, env)
            node = self.decls.get(name, self.fdef)
            if name in self.tensors:
                if not isinstance(declared, TensorSpec):
                    raise self.error(node, f"'{name}' is declared {ast.unparse(node)}; a tensor "
                                           "parameter is declared T.Tensor(shape, dtype)")
                dims = tuple(declared.shape) + tuple(declared.strides or ())
                scalar = next((x.name for x in _walk_exprs(dims) if isinstance(x, N.Var)
                               and x.name in self.scalar_args), None)
                if scalar is not None:  # (as the prim_func parser refuses it in T.match_buffer)
                    raise self.error(node, f"'{name}': a dim is the scalar parameter '{scalar}' "
                                           f"({scalar}: T.int32); tilecute binds a tensor's dims "
                                           "from the tensor itself and does not check them "
                                           "against a scalar argument (TileLang asserts they "
                                           f"agree): declare the dim a symbol (`{scalar} = "
                                           "T.dynamic(...)` or T.const) in place of the scalar "
                                           "parameter, or pass it as a plain int (a "
                                           "specialization argument)")
                expected[name] = (tuple(int(d) if isinstance(d, int) else None for d in declared.shape),
                                  _dtype_text(declared.dtype))
            elif not isinstance(declared, (str, Pointer)):
                raise self.error(node, f"'{name}' is declared {ast.unparse(node)}; a scalar "
                                       "parameter is declared with a dtype (T.int32), a "
                                       "pointer with T.ptr")
            annotations[name] = declared
        # an output's dims may name integer scalar parameters (TileLang's `T.empty([m + 1])`):
        # they evaluate to the parameter's variable, which the launch reads
        dims_env = dict(env)
        dims_env.update({n: N.Var(n, _dtype_text(d)) for n, d in annotations.items()
                         if n not in self.tensors and not isinstance(d, Pointer) and n not in env
                         and _dtype_text(d) in _INT_SCALAR_DIMS})
        for name, call in self.outputs.items():
            annotations[name] = self._empty(name, call, dims_env)
        names = self.runtime + list(self.outputs)
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n, annotation=ast.Name(
            id="T", ctx=ast.Load())) for n in names], vararg=None, kwonlyargs=[],
            kw_defaults=[], kwarg=None, defaults=[])
        fdef = ast.FunctionDef(name=self.fdef.name, args=args, body=asserts + self.body or [ast.Pass()],
                               decorator_list=[], returns=None, type_comment=None)
        ast.copy_location(fdef, self.fdef)
        for a in args.args:
            ast.copy_location(a, self.fdef)
        # (the kernel's statements read the parameters themselves, not the declared views)
        env = {k: v for k, v in env.items() if not (isinstance(v, DeclaredTensor) or
                                                    k in self.scalar_args and isinstance(v, N.Var))}
        return _Parser(fdef, env, self.filename, self.offset, self.lines, annotations).parse(), expected

    def _empty(self, name: str, call: ast.Call, env: dict) -> TensorSpec:
        """TileLang's ``T.empty(shape, dtype)``, ``T.empty(shape, dtype=...)`` or
        ``T.empty(d0, d1, ..., dtype=...)`` (dtype float32 when not given)."""
        from .values import Tensor

        try:
            args = [self._eval(a, env) for a in call.args]
            kwargs = {k.arg: self._eval(k.value, env) for k in call.keywords}
        except NameError as e:
            if e.name not in self.runtime or e.name in self.tensors:
                raise
            # a dim of a scalar parameter that is no integer (integers are bound above)
            raise self.error(call, f"T.empty for '{name}': dim uses scalar parameter "
                                   f"'{e.name}', which is no integer scalar; tilecute "
                                   "allocates an output from the symbols its input tensors' "
                                   "shapes bind and integer scalar arguments") from None
        shape, dtype = empty_args(name, args, kwargs, lambda msg: self.error(call, msg))
        return Tensor(shape, dtype)

    def _check_shapes(self, key, tensors: dict) -> None:
        """Each tensor against what its declaration came to (derived dims included)."""
        expected = self._expected.get(key, {})
        for name, (want, dtype) in expected.items():
            t = tensors.get(name)
            if t is None or not hasattr(t, "shape"):
                continue
            got = element_dims(dtype, t.shape)  # (a packed dtype's tensor is its bytes)
            if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
                shown = tuple("*" if w is None else w for w in want)
                packed = "" if got == tuple(int(x) for x in t.shape) else \
                    f", {got} in {dtype} elements"
                raise ValueError(f"{self.__name__}: '{name}' is declared with shape {shown} "
                                 f"for {', '.join(f'{k}={v}' for k, v in key[0]) or 'these arguments'}, "
                                 f"got a tensor of shape {tuple(int(x) for x in t.shape)}{packed}")

    # ---- the public API -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        fast = None
        if not kwargs and len(args) > self._last_runtime_pos:
            # a positional call whose tensor shapes and specialization values were seen
            # before takes the kernel found then (runtime scalars are not part of it)
            try:
                fast = tuple(None if i in self._scalar_pos else
                             tuple(a.shape) if i in self._tensor_pos else a
                             for i, a in enumerate(args))
                kernel = self._fast.get(fast)
            except (TypeError, AttributeError):
                fast, kernel = None, None
            if kernel is not None:
                return kernel(*[args[i] for i in self._runtime_pos])
        runtime, spec, consts, key = self._resolve(args, dict(kwargs), partial=False)
        kernel = self._build(consts, spec, key)
        self._check_shapes(key, runtime)
        if fast is not None and not any(field == "stride" for uses in self._probes[key[1]].uses.values()
                                        for _, field, _ in uses):
            if len(self._fast) >= 1024:
                self._fast.clear()
            self._fast[fast] = kernel
        return kernel(*[runtime[n] for n in self.runtime])

    def compile(self, *args, **kwargs):
        """The kernel for these arguments (TileLang's ``compile``): tensors or the
        ``T.const`` values by keyword, and the specialization arguments (the others take
        their defaults); ``kernel(*tensors)`` returns the outputs."""
        runtime, spec, consts, key = self._resolve(args, dict(kwargs), partial=True)
        kernel = self._build(consts, spec, key)
        self._check_shapes(key, runtime)
        return kernel

    def get_tir(self, *args, **kwargs) -> N.PrimFunc:
        """The ``prim_func`` these arguments give (what ``compile`` would compile)."""
        _, spec, consts, _ = self._resolve(args, dict(kwargs), partial=True)
        return self._prim_func(consts, spec)[0]

    def get_kernel_source(self, *args, **kwargs) -> str:
        """TileLang's ``jit_fn.get_kernel_source(...)``: ``compile(...)``'s CuTe DSL source."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def par_compile(self, configs, num_workers: Optional[int] = None, ignore_error: bool = False) -> list:
        """TileLang's ``par_compile``: ``compile(**config)`` (or ``compile(*config)`` for a
        tuple) for each config on a thread pool; with ``ignore_error`` a config that fails
        gives None."""
        return par_compile(self.compile, configs, num_workers, ignore_error)

    def warmup(self, *specs, devices=None) -> list:
        """``compile(**spec)`` and ``Kernel.warmup`` for each dict ``spec`` (``T.const``
        values and specialization arguments); returns the kernels."""
        kernels = [self.compile(**spec) for spec in specs]
        for k in kernels:
            k.warmup(devices)
        return kernels

    def seal(self) -> None:
        """From now on a call that needs a kernel not built yet is a ``ValueError``,
        never a compile (a serving process, after ``warmup``)."""
        self.sealed = True

    def __repr__(self) -> str:
        return f"<tilecute eager jit {self.__name__}{self.signature}>"


def par_compile(compile_one, configs, num_workers: Optional[int] = None,
                ignore_error: bool = False) -> list:
    """TileLang's ``jit_fn.par_compile(configs)``: ``compile_one(**config)``
    (``compile_one(*config)`` for a tuple) for each config on a thread pool; with
    ``ignore_error`` a config that fails gives None.  (The factory jit's too.)"""
    import concurrent.futures as cf
    import os

    def one(c):
        try:
            return compile_one(*c) if isinstance(c, tuple) else compile_one(**c)
        except Exception:
            if ignore_error:
                return None
            raise

    configs = list(configs)
    with cf.ThreadPoolExecutor(num_workers or min(len(configs), os.cpu_count() or 1) or 1) as ex:
        return list(ex.map(one, configs))


class DeclaredShape(Sequence):
    """A declared tensor's ``shape`` as the eager body's Python sees it: a sequence (``M,
    N = A.shape``, ``A.shape[0]``, ``len(A.shape)``) but, like the TVM Array that TileLang's
    buffer gives, no tuple or list (TileLang's ``T.empty(A.shape, ...)`` raises)."""

    def __init__(self, dims):
        self._dims = tuple(dims)

    def __getitem__(self, i):
        return self._dims[i]

    def __len__(self) -> int:
        return len(self._dims)

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (Sequence,)) else NotImplemented

    def __repr__(self) -> str:
        return repr(list(self._dims))


class DeclaredTensor:
    """A tensor parameter after its declaration ``A: T.Tensor(shape, dtype)``, as the
    eager body's Python statements (and ``T.empty``'s arguments) read it: TileLang binds
    the name to the matched buffer, whose ``shape``, ``dtype`` and ``strides`` these are
    (the dims ints, or symbols for ``T.dynamic`` ones and, while the constants are bound,
    theirs)."""

    def __init__(self, name: str, spec: TensorSpec):
        self.name = name
        self.shape = DeclaredShape(spec.shape)
        self.dtype = _dtype_text(spec.dtype) or spec.dtype
        self.strides = DeclaredShape(spec.strides or ())
        self.ndim = len(spec.shape)

    def __repr__(self) -> str:
        return f"{self.name}: T.Tensor({list(self.shape)}, {self.dtype!r})"


def _shape_nodes(ann) -> Optional[list]:
    """The dim expressions of ``T.Tensor((d0, d1), dtype)`` / ``T.Tensor[[d0, d1], dtype]``
    written in place (None for a shape given by a name or anything else)."""
    if isinstance(ann, ast.Call) and ann.args:
        shape = ann.args[0]
    elif isinstance(ann, ast.Subscript):
        sl = ann.slice
        shape = sl.elts[0] if isinstance(sl, ast.Tuple) and sl.elts else None
    else:
        return None
    if isinstance(shape, (ast.Tuple, ast.List)):
        return list(shape.elts)
    return None


class _Returning:
    """A compiled eager kernel: ``kernel(*args)`` returns the outputs in the order of
    the body's ``return`` (None for a kernel that declares none)."""

    def __init__(self, kernel, order: list[int]):
        self.kernel, self.order = kernel, order

    def __getattr__(self, name: str) -> Any:
        if name == "kernel":
            raise AttributeError(name)
        return getattr(self.kernel, name)

    @property
    def release_gil(self) -> bool:
        """The compiled kernel's ``release_gil`` (``Kernel.release_gil``)."""
        return self.kernel.release_gil

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        self.kernel.release_gil = value

    def get_profiler(self, tensor_supply_type=None, shapes=None):
        """``Kernel.get_profiler`` over this kernel: its outputs come in ``return`` order,
        as a reference program returns them."""
        from ..runtime.profiling import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto, shapes)

    def __call__(self, *args):
        outs = self.kernel(*args)
        if not self.order:
            return None
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        picked = [outs[i] for i in self.order]
        return picked[0] if len(picked) == 1 else picked  # several: a list, as TileLang's

    def __repr__(self) -> str:
        return repr(self.kernel)
