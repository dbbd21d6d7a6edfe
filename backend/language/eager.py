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

A call binds each ``T.const`` name from the shape of the first tensor whose declaration
has it as a dim, checks every tensor against its declaration (shape, dtype), and compiles
one kernel per distinct (constants, specialization arguments): the body becomes a
``prim_func`` whose parameters are the declared tensors, then the ``T.empty`` outputs
(``out_idx``), which the call allocates and returns (``return C`` or ``return C, D``).
Top-level Python statements of the body other than these (``BS = chunk_size``,
``assert K == K2``) run as Python with the constants bound.  ``T.dynamic`` names stay
symbolic (one kernel for every size).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import threading
from typing import Any, Optional

from ..ir import nodes as N
from .parser import FrontendError, _function_env, _Parser
from .values import TensorSpec


def _t_call(node, names: tuple[str, ...]) -> bool:
    """``node`` is a call ``T.<name>(...)`` (any alias of the module: an attribute call)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr in names


def _source(fn):
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    fdef = tree.body[0]
    return (fdef, first) if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def is_eager(fn) -> bool:
    """Whether ``fn`` is written in the eager style: its body declares ``T.const`` names,
    ``T.empty`` outputs, or a parameter's tensor type (``A: T.Tensor(...)``)."""
    if not inspect.isfunction(fn):
        return False
    found = _source(fn)
    if found is None:
        return False
    fdef, _ = found
    params = {a.arg for a in fdef.args.args}
    for s in fdef.body:
        if isinstance(s, ast.Assign) and _t_call(s.value, ("const", "empty")):
            return True
        if isinstance(s, ast.AnnAssign) and s.value is None and isinstance(s.target, ast.Name) \
                and s.target.id in params:
            return True
    return False


class EagerKernel:
    """The object ``@tilecute.jit`` returns for an eager-style function: call it with
    tensors (and specialization arguments), or ``.compile(**constants_and_arguments)``."""

    def __init__(self, fn, target: Optional[str] = None, options: Optional[dict] = None):
        self.fn, self.target, self.options = fn, target, dict(options or {})
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        fdef, first = _source(fn)
        self.fdef, self.offset = fdef, first - 1
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        self.lines = linecache.getlines(self.filename)[self.offset:] or []
        self.signature = inspect.signature(fn)
        self.consts: list[str] = []  # T.const names, in order
        self.dynamic: list[ast.stmt] = []  # `X = T.dynamic(...)` statements
        self.decls: dict[str, ast.expr] = {}  # tensor parameter -> its annotation
        self.outputs: dict[str, ast.Call] = {}  # T.empty name -> its call
        self.python: list[ast.stmt] = []  # other top-level Python statements
        self.body: list[ast.stmt] = []  # the kernel statements
        self.returns: list[str] = []
        params = [a.arg for a in fdef.args.args]
        for s in fdef.body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and \
                    isinstance(s.value.value, str):
                continue  # the docstring
            if isinstance(s, ast.Assign) and _t_call(s.value, ("const",)):
                self.consts += self._targets(s)
            elif isinstance(s, ast.Assign) and _t_call(s.value, ("dynamic", "symbolic")):
                self.dynamic.append(s)
            elif isinstance(s, ast.Assign) and _t_call(s.value, ("empty",)):
                names = self._targets(s)
                if len(names) != 1:
                    raise self.error(s, "T.empty declares one output: `C = T.empty(shape, dtype)`")
                self.outputs[names[0]] = s.value
            elif isinstance(s, ast.AnnAssign) and s.value is None and \
                    isinstance(s.target, ast.Name) and s.target.id in params:
                self.decls[s.target.id] = s.annotation
            elif isinstance(s, ast.Return):
                self.returns = self._returned(s)
            elif isinstance(s, (ast.Assign, ast.AugAssign, ast.Assert)) and not any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                    n.func.attr.startswith("alloc") for n in ast.walk(s)):
                self.python.append(s)
            else:
                self.body.append(s)
        if not self.outputs:
            raise self.error(fdef, "an eager kernel returns its T.empty outputs; it declares none")
        missing = [r for r in self.returns if r not in self.outputs]
        if missing or not self.returns:
            raise self.error(fdef, f"an eager kernel ends with `return` of its T.empty outputs "
                                   f"({', '.join(self.outputs)}); got {self.returns or 'none'}")
        self.tensors = [p for p in params if p in self.decls]
        self.scalars = [p for p in params if p not in self.decls]
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self.sealed = False

    # ---- parsing helpers --------------------------------------------------------------
    def error(self, node, msg: str) -> FrontendError:
        lineno = getattr(node, "lineno", 0)
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        return FrontendError(msg, N.Loc(self.filename, lineno + self.offset), self.__name__, line)

    def _targets(self, s: ast.Assign) -> list[str]:
        if len(s.targets) != 1:
            raise self.error(s, "one assignment target (a name or a tuple of names)")
        t = s.targets[0]
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(s, "T.const / T.empty bind plain names")
        return [e.id for e in elts]

    def _returned(self, s: ast.Return) -> list[str]:
        v = s.value
        elts = v.elts if isinstance(v, ast.Tuple) else [v]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(s, "an eager kernel returns its T.empty outputs by name")
        return [e.id for e in elts]

    def _eval(self, node, env: dict):
        return eval(compile(ast.Expression(node), self.filename, "eval"), env)

    # ---- binding ------------------------------------------------------------------------
    def _bind_from_tensors(self, tensors: dict, env: dict) -> dict:
        """The T.const values the tensors' shapes give (dims that are bare const names)."""
        bound: dict[str, int] = {}
        for name in self.tensors:
            t = tensors.get(name)
            if t is None:
                continue
            ann = self.decls[name]
            dims = _shape_nodes(ann)
            if dims is None:
                continue
            if len(dims) != len(t.shape):
                raise ValueError(f"{self.__name__}: '{name}' is declared with {len(dims)} dims, "
                                 f"got a tensor of shape {tuple(t.shape)}")
            for d, node in enumerate(dims):
                if isinstance(node, ast.Name) and node.id in self.consts:
                    size = int(t.shape[d])
                    if bound.setdefault(node.id, size) != size:
                        raise ValueError(f"{self.__name__}: {node.id} is {bound[node.id]} by an "
                                         f"earlier tensor but {size} by '{name}' (dim {d})")
        return bound

    def _env(self, consts: dict, spec: dict) -> dict:
        env = _function_env(self.fn)
        env.update(spec)
        env.update(consts)
        for s in self.dynamic:
            exec(compile(ast.Module([s], []), self.filename, "exec"), env)
        for s in self.python:
            try:
                exec(compile(ast.Module([s], []), self.filename, "exec"), env)
            except AssertionError:
                raise ValueError(f"{self.__name__}: line {s.lineno + self.offset}: "
                                 f"{ast.unparse(s)} failed for {consts}") from None
        return env

    def _build(self, consts: dict, spec: dict):
        key = (tuple(sorted(consts.items())), tuple(sorted(spec.items(), key=lambda kv: kv[0])))
        with self._lock:
            kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        if self.sealed:
            built = "; ".join(", ".join(f"{k}={v}" for k, v in (*c, *sp)) for c, sp in self._kernels) or "none"
            raise ValueError(f"{self.__name__}: no kernel for {', '.join(f'{k}={v}' for k, v in (*consts.items(), *spec.items()))}, "
                             f"and {self.__name__} is sealed (no compile after seal()); built: {built}")
        import tilecute

        env = self._env(consts, spec)
        annotations = {name: self._spec(name, self.decls[name], env) for name in self.tensors}
        for name, call in self.outputs.items():
            annotations[name] = self._empty(name, call, env)
        names = self.tensors + list(self.outputs)
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n, annotation=ast.Name(
            id="T", ctx=ast.Load())) for n in names], vararg=None, kwonlyargs=[],
            kw_defaults=[], kwarg=None, defaults=[])
        fdef = ast.FunctionDef(name=self.fdef.name, args=args, body=self.body or [ast.Pass()],
                               decorator_list=[], returns=None, type_comment=None)
        ast.copy_location(fdef, self.fdef)
        for a in args.args:
            ast.copy_location(a, self.fdef)
        func = _Parser(fdef, env, self.filename, self.offset, self.lines, annotations).parse()
        out_idx = [len(self.tensors) + i for i in range(len(self.outputs))]
        kernel = tilecute.compile(func, out_idx=out_idx, target=self.target, options=self.options)
        order = [list(self.outputs).index(r) for r in self.returns]
        kernel = _Returning(kernel, order)
        with self._lock:
            self._kernels[key] = kernel
        return kernel

    def _spec(self, name: str, ann, env: dict) -> TensorSpec:
        spec = self._eval(ann, env)
        if not isinstance(spec, TensorSpec):
            raise self.error(ann, f"'{name}' is declared {ast.unparse(ann)}; a tensor parameter "
                                  "is declared T.Tensor(shape, dtype)")
        return spec

    def _empty(self, name: str, call: ast.Call, env: dict) -> TensorSpec:
        from .values import Tensor

        a = list(call.args) + [k.value for k in call.keywords]
        if len(call.args) + len(call.keywords) != 2:
            raise self.error(call, f"T.empty(shape, dtype) for '{name}'")
        shape, dtype = (self._eval(x, env) for x in a)
        return Tensor(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), dtype)

    def _split(self, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: {e}") from None
        bound.apply_defaults()
        tensors = {n: bound.arguments[n] for n in self.tensors if n in bound.arguments}
        spec = {n: bound.arguments[n] for n in self.scalars if n in bound.arguments}
        for n, v in spec.items():
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                raise TypeError(f"{self.__name__}: '{n}' got a tensor but the body declares no "
                                f"`{n}: T.Tensor(shape, dtype)`")
        return tensors, spec

    # ---- the public API -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        tensors, spec = self._split(args, kwargs)
        missing = [n for n in self.tensors if n not in tensors]
        if missing:
            raise TypeError(f"{self.__name__}: missing tensor argument(s) {', '.join(missing)}")
        consts = self._bind_from_tensors(tensors, {})
        unbound = [c for c in self.consts if c not in consts]
        if unbound:
            raise ValueError(f"{self.__name__}: T.const {', '.join(unbound)} is not a dim of "
                             f"any tensor argument; compile with {self.__name__}.compile("
                             f"{', '.join(f'{c}=...' for c in unbound)})")
        kernel = self._build(consts, spec)
        return kernel(*[tensors[n] for n in self.tensors])

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

    def compile(self, **kwargs):
        """The kernel for these ``T.const`` values and specialization arguments (the
        others take their defaults), compiled now: ``kernel(*tensors)`` returns the
        outputs."""
        consts = {c: kwargs.pop(c) for c in list(kwargs) if c in self.consts}
        unbound = [c for c in self.consts if c not in consts]
        if unbound:
            raise TypeError(f"{self.__name__}.compile: give the T.const value(s) "
                            f"{', '.join(unbound)}")
        unknown = [k for k in kwargs if k not in self.scalars]
        if unknown:
            raise TypeError(f"{self.__name__}.compile: unknown argument(s) {', '.join(unknown)}; "
                            f"the T.const names are {', '.join(self.consts) or 'none'} and the "
                            f"specialization parameters {', '.join(self.scalars) or 'none'}")
        spec = {}
        for n in self.scalars:
            p = self.signature.parameters[n]
            if n in kwargs:
                spec[n] = kwargs[n]
            elif p.default is not inspect.Parameter.empty:
                spec[n] = p.default
            else:
                raise TypeError(f"{self.__name__}.compile: missing specialization argument '{n}'")
        return self._build({k: int(v) for k, v in consts.items()}, spec)


def _shape_nodes(ann) -> Optional[list]:
    """The dim expressions of ``T.Tensor((d0, d1), dtype)`` / ``T.Tensor[[d0, d1], dtype]``."""
    if isinstance(ann, ast.Call) and ann.args:
        shape = ann.args[0]
    elif isinstance(ann, ast.Subscript):
        sl = ann.slice
        shape = sl.elts[0] if isinstance(sl, ast.Tuple) and sl.elts else None
    else:
        return None
    if isinstance(shape, (ast.Tuple, ast.List)):
        return list(shape.elts)
    return [shape] if shape is not None else None


class _Returning:
    """A compiled eager kernel: ``kernel(*tensors)`` returns the outputs in the order of
    the body's ``return``."""

    def __init__(self, kernel, order: list[int]):
        self.kernel, self.order = kernel, order

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)

    def __call__(self, *args):
        outs = self.kernel(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        picked = tuple(outs[i] for i in self.order)
        return picked[0] if len(picked) == 1 else picked

    def __repr__(self) -> str:
        return repr(self.kernel)
