"""Parse a ``@T.prim_func`` Python function (its AST) into a ``tilecute.ir.PrimFunc``.

Values of closure and global names are taken at parse time: Python ints, floats, bools,
dtypes and tuples fold into the IR as constants, so ``if block_M > 64:`` picks a branch
while parsing.  Names bound inside the body become IR variables, renamed where they
would shadow one another so that generated code keeps TileLang's scoping.  Anything the
frontend does not support is a :class:`FrontendError` at its source line.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from typing import Any, Optional

from ..ir import nodes as N
from ..ir.validate import validate

MAX_PARALLEL_DIMS = 8


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


class _BufferRef:
    """A buffer name in the parse scope (params and allocations)."""

    def __init__(self, buffer: N.Buffer):
        self.buffer = buffer


_LOOPS = {"Parallel": "parallel", "serial": "serial", "unroll": "unrolled",
          "Pipelined": "pipelined"}
_ALLOCS = {"alloc_shared": "shared", "alloc_fragment": "fragment", "alloc_local": "local"}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
        ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "bitand", ast.BitOr: "bitor",
        ast.BitXor: "bitxor", ast.LShift: "shl", ast.RShift: "shr"}


def _is_ir(x) -> bool:
    return isinstance(x, N.Expr)


class _Parser:
    def __init__(self, tree: ast.FunctionDef, env: dict, filename: str, line_offset: int,
                 source_lines: list[str], annotations: Optional[dict] = None):
        self.tree, self.env, self.filename = tree, env, filename
        self.annotations = annotations or {}
        self.line_offset, self.source_lines = line_offset, source_lines
        self.fname = tree.name
        self.scopes: list[dict[str, Any]] = [{}]
        self.control: list[bool] = [False]  # per scope: is it a loop or if body?
        self.used_names: set[str] = set()
        self.symbols: dict[str, N.Var] = {}
        self.T = env.get("T")
        self.in_kernel = False

    # ---- errors and locations ---------------------------------------------------------
    def loc(self, node) -> N.Loc:
        return N.Loc(self.filename, getattr(node, "lineno", 0) + self.line_offset)

    def error(self, node, msg: str) -> FrontendError:
        lineno = getattr(node, "lineno", 0)
        line = self.source_lines[lineno - 1] if 0 < lineno <= len(self.source_lines) else ""
        return FrontendError(msg, self.loc(node), self.fname, line)

    # ---- scopes -----------------------------------------------------------------------
    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        import builtins

        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined")

    def fresh(self, name: str) -> str:
        if name not in self.used_names:
            self.used_names.add(name)
            return name
        i = 1
        while f"{name}_{i}" in self.used_names:
            i += 1
        self.used_names.add(f"{name}_{i}")
        return f"{name}_{i}"

    def bind(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def push(self, control: bool = True):
        self.scopes.append({})
        self.control.append(control)

    def pop(self):
        self.scopes.pop()
        self.control.pop()

    def check_rebind(self, name: str, node) -> None:
        """Rebinding a variable from outside the enclosing loop/if body would not carry
        out of that body (IR lets are immutable): say so instead of miscompiling."""
        inner_control = max(i for i, c in enumerate(self.control) if c or i == 0)
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i]:
                if i < inner_control and isinstance(self.scopes[i][name], N.Var):
                    raise self.error(node, f"'{name}' is bound outside this loop/if body; "
                                           "assigning it here would not change it there. Use a "
                                           "local buffer: `acc = T.alloc_local((1,), dtype)` and "
                                           "`acc[0] += ...`")
                return

    def note_symbols(self, value):
        for x in _walk_exprs(value):
            if isinstance(x, N.Var) and x.name not in self.symbols:
                self.symbols[x.name] = x
                self.used_names.add(x.name)

    # ---- the function -----------------------------------------------------------------
    def parse(self) -> N.PrimFunc:
        fn = self.tree
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.error(fn, "parameters must be plain positional names with annotations")
        params: list[N.Param] = []
        for arg in a.args:
            if arg.annotation is None:
                raise self.error(arg, f"parameter '{arg.arg}' needs an annotation "
                                      "(T.Tensor(shape, dtype) or a scalar dtype such as T.int32)")
            # annotations were evaluated when the function was defined (closure values of
            # a kernel factory included); a script re-parse evaluates them here
            if arg.arg in self.annotations:
                spec = self.annotations[arg.arg]
            else:
                spec = self.eval_python(arg.annotation)
            self.used_names.add(arg.arg)
            params.append(self.make_param(arg, spec))
        kernels: list[N.KernelScope] = []
        body = self.block(fn.body, top=True)
        for s in body:
            if not isinstance(s, N.KernelScope):
                raise self.error(fn, "only `with T.Kernel(...)` blocks may stand at the top "
                                     "level of a prim_func body")
            kernels.append(s)
        if not kernels:
            raise self.error(fn, "a prim_func needs at least one `with T.Kernel(...)` block")
        func = N.PrimFunc(self.fname, tuple(params), tuple(kernels),
                          tuple(self.symbols.values()), loc=self.loc(fn))
        validate(func)
        return func

    def make_param(self, arg: ast.arg, spec) -> N.Param:
        from . import TensorSpec, DType, dtype_name

        name = arg.arg
        if isinstance(spec, TensorSpec):
            shape = tuple(self.dim(arg, d, name) for d in spec.shape)
            strides = None
            if spec.strides is not None:
                if len(spec.strides) != len(shape):
                    raise self.error(arg, f"'{name}': {len(spec.strides)} strides for "
                                          f"{len(shape)} dims")
                strides = tuple(self.dim(arg, d, name) for d in spec.strides)
            buf = N.Buffer(name, spec.dtype, shape, "global", strides)
            self.note_symbols(shape + (strides or ()))
            self.bind(name, _BufferRef(buf))
            return buf
        if isinstance(spec, str):
            try:
                dt = dtype_name(spec)
            except KeyError:
                raise self.error(arg, f"parameter '{name}': unknown dtype {spec!r}") from None
            var = N.Var(name, dt)
            self.bind(name, var)
            return var
        raise self.error(arg, f"parameter '{name}': annotation must be T.Tensor(...), "
                              f"T.StridedTensor(...) or a dtype, got {spec!r}")

    def dim(self, node, d, name) -> N.Expr:
        if isinstance(d, bool) or not isinstance(d, (int, N.Var)):
            raise self.error(node, f"'{name}': a dimension must be an int or T.symbolic(...), "
                                   f"got {d!r}")
        if isinstance(d, int):
            if d <= 0:
                raise self.error(node, f"'{name}': dimension {d} must be positive")
            return N.Const(d, "int32")
        if d.dtype != "int32":
            raise self.error(node, f"'{name}': symbolic dimension {d.name} must be int32")
        return d

    # ---- statements -------------------------------------------------------------------
    def block(self, stmts, top=False) -> tuple[N.Stmt, ...]:
        out: list[N.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, top))
        return tuple(out)

    def stmt(self, s, top=False) -> list[N.Stmt]:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return []  # docstring
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.With):
            return [self.with_stmt(s)]
        if top:
            if isinstance(s, ast.Assign) and self.try_python_assign(s):
                return []
            raise self.error(s, "only `with T.Kernel(...)` blocks (and parse-time constants) "
                                "may stand at the top level of a prim_func body")
        if isinstance(s, ast.For):
            return [self.for_stmt(s)]
        if isinstance(s, ast.If):
            return self.if_stmt(s)
        if isinstance(s, ast.Assign):
            return self.assign(s)
        if isinstance(s, ast.AugAssign):
            return self.aug_assign(s)
        if isinstance(s, ast.AnnAssign):
            raise self.error(s, "annotated assignments are not supported; write `x = T.float32(v)`")
        if isinstance(s, ast.Expr):
            return self.expr_stmt(s)
        kind = type(s).__name__
        hint = {"While": "use `for ... in T.serial(n)`", "Return": "a prim_func returns nothing",
                "Break": "", "Continue": "", "Try": "", "FunctionDef": "", "Raise": ""}.get(kind, "")
        raise self.error(s, f"`{kind.lower()}` statements are not supported in a prim_func"
                            + (f" ({hint})" if hint else ""))

    def try_python_assign(self, s: ast.Assign) -> bool:
        """A top-level `name = <parse-time constant>` binds a Python value."""
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            return False
        try:
            value = self.eval_python(s.value)
        except FrontendError:
            return False
        if isinstance(value, (int, float, bool, str, tuple)):
            self.bind(s.targets[0].id, value)
            return True
        return False

    def with_stmt(self, s: ast.With) -> N.Stmt:
        if len(s.items) != 1:
            raise self.error(s, "one `with T.Kernel(...)` at a time")
        item = s.items[0]
        call = item.context_expr
        if not (isinstance(call, ast.Call) and self.is_t_form(call.func, "Kernel")):
            raise self.error(s, "the only `with` form is `with T.Kernel(...) as ...`")
        if self.in_kernel:
            raise self.error(s, "T.Kernel blocks cannot nest")
        grid = [self.index_expr(a) for a in call.args]
        kw = {k.arg: k.value for k in call.keywords}
        unknown = set(kw) - {"threads", "cluster", "producer_threads"}
        if unknown:
            raise self.error(s, f"T.Kernel got unknown keyword(s) {sorted(unknown)}")
        if not 1 <= len(grid) <= 3:
            raise self.error(s, f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}")
        threads = self.int_tuple(kw["threads"], "threads") if "threads" in kw else (128,)
        if not 1 <= len(threads) <= 3:
            raise self.error(s, "threads must have 1 to 3 dims")
        cluster = self.int_tuple(kw["cluster"], "cluster") if "cluster" in kw else None
        producer = self.int_tuple(kw["producer_threads"], "producer_threads")[0] \
            if "producer_threads" in kw else 0
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
        for nm in names:
            v = N.Var(self.fresh(nm), "int32")
            block_vars.append(v)
            self.bind(nm, v)
        self.kernel_grid = (tuple(grid), tuple(names))
        self.in_kernel = True
        try:
            body = self.block(s.body)
        finally:
            self.in_kernel = False
            self.pop()
        return N.KernelScope(tuple(grid), threads, tuple(block_vars), body, cluster,
                             loc=self.loc(s), producer_threads=producer)

    def int_tuple(self, node, what) -> tuple[int, ...]:
        v = self.eval_python(node)
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            raise self.error(node, f"{what} must be positive ints known at parse time, got {v!r}")
        return v

    def for_stmt(self, s: ast.For) -> N.Stmt:
        if s.orelse:
            raise self.error(s, "for-else is not supported")
        it = s.iter
        if not isinstance(it, ast.Call):
            raise self.error(s, "loop over T.Parallel(...), T.serial(...), T.unroll(...), "
                                "T.Pipelined(...) or range(...)")
        kind = None
        for form, k in _LOOPS.items():
            if self.is_t_form(it.func, form):
                kind = k
        if kind is None and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and self.lookup("range", it) is range:
            kind = "serial"
        if kind is None:
            raise self.error(s, "loop over T.Parallel(...), T.serial(...), T.unroll(...), "
                                "T.Pipelined(...) or range(...)")
        if not self.in_kernel:
            raise self.error(s, "loops must be inside a T.Kernel block")
        kw = {k.arg: k.value for k in it.keywords}
        target = s.target
        names = [e for e in (target.elts if isinstance(target, ast.Tuple) else [target])]
        if not all(isinstance(n, ast.Name) for n in names):
            raise self.error(s, "loop variables must be plain names")
        num_stages, vector_width, replicated, async_copy = 0, 0, False, False
        warp_specialize = None
        if kind == "parallel":
            unknown = set(kw) - {"coalesced_width", "vector_width", "replicated", "async_copy"}
            if unknown:
                raise self.error(s, f"T.Parallel got unknown keyword(s) {sorted(unknown)}")
            if "vector_width" in kw:
                vector_width = self.eval_python(kw["vector_width"])
            replicated = bool(self.eval_python(kw["replicated"])) if "replicated" in kw else False
            async_copy = bool(self.eval_python(kw["async_copy"])) if "async_copy" in kw else False
            extents = [self.index_expr(a) for a in it.args]
            if len(extents) != len(names):
                raise self.error(s, f"T.Parallel has {len(extents)} extents but {len(names)} "
                                    "loop variables")
            ranges = [(N.Const(0, "int32"), e) for e in extents]
        else:
            if len(names) != 1:
                raise self.error(s, f"{kind} loops bind one variable")
            if kind == "pipelined":
                unknown = set(kw) - {"num_stages", "warp_specialize"}
                if unknown:
                    raise self.error(s, f"T.Pipelined got unknown keyword(s) {sorted(unknown)}")
                num_stages = self.eval_python(kw["num_stages"]) if "num_stages" in kw else 2
                if "warp_specialize" in kw:  # None: the TMA pass decides
                    ws = self.eval_python(kw["warp_specialize"])
                    warp_specialize = None if ws is None else bool(ws)
            elif kw and not (kind == "serial" and set(kw) <= {"step"}):
                raise self.error(s, f"unsupported keyword(s) {sorted(kw)} for a {kind} loop")
            if "step" in kw:
                raise self.error(s, "loop steps are not supported; scale the variable instead")
            args = [self.index_expr(a) for a in it.args]
            if len(args) == 1:
                ranges = [(N.Const(0, "int32"), args[0])]
            elif len(args) == 2:
                ranges = [(args[0], _sub(args[1], args[0]))]
            else:
                raise self.error(s, "a loop range takes (extent) or (start, stop)")
        self.push()
        loop_vars = []
        for nm, _ in zip(names, ranges):
            v = N.Var(self.fresh(nm.id), "int32")
            loop_vars.append(v)
            self.bind(nm.id, v)
        try:
            body = self.block(s.body)
        finally:
            self.pop()
        innermost = len(loop_vars) - 1
        for d, (v, (start, extent)) in reversed(list(enumerate(zip(loop_vars, ranges)))):
            width = vector_width if d == innermost else (1 if vector_width else 0)
            body = (N.For(v, start, extent, kind, body, num_stages, width, replicated,
                          async_copy, loc=self.loc(s), warp_specialize=warp_specialize),)
        return body[0]

    def if_stmt(self, s: ast.If) -> list[N.Stmt]:
        cond = self.expr(s.test)
        if not _is_ir(cond):  # parse-time condition: the chosen branch is straight-line code
            return list(self.block(s.body if cond else s.orelse))
        if cond.dtype != "bool":
            cond = N.cmp("ne", cond, 0)
        self.push()
        then = self.block(s.body)
        self.pop()
        self.push()
        orelse = self.block(s.orelse)
        self.pop()
        return [N.If(cond, then, orelse, loc=self.loc(s))]

    def assign(self, s: ast.Assign) -> list[N.Stmt]:
        if len(s.targets) != 1:
            raise self.error(s, "chained assignment is not supported")
        target = s.targets[0]
        if isinstance(target, ast.Subscript):
            return [self.store(target, self.expr(s.value), s)]
        if not isinstance(target, ast.Name):
            raise self.error(s, "assign to a name or to a buffer element `A[i, j] = ...`")
        value = s.value
        if isinstance(value, ast.Call):
            for form, scope in _ALLOCS.items():
                if self.is_t_form(value.func, form):
                    return [self.allocate(target.id, value, scope, s)]
            if self.is_t_form(value.func, "alloc_barrier"):
                return [self.alloc_barrier(target.id, value, s)]
        v = self.expr(value)
        if not _is_ir(v):
            if isinstance(v, (int, float, bool)):
                v = N.as_expr(v)
            elif isinstance(v, (str, tuple)):
                self.bind(target.id, v)  # a parse-time value (dtype name, shape tuple)
                return []
            else:
                raise self.error(s, f"cannot bind '{target.id}' to {type(v).__name__} {v!r}")
        self.check_rebind(target.id, s)
        var = N.Var(self.fresh(target.id), v.dtype)
        self.bind(target.id, var)
        return [N.Let(var, v, loc=self.loc(s))]

    def aug_assign(self, s: ast.AugAssign) -> list[N.Stmt]:
        op = _BIN.get(type(s.op))
        if op is None:
            raise self.error(s, f"operator {type(s.op).__name__} is not supported")
        if isinstance(s.target, ast.Subscript):
            current = self.expr(s.target)
            return [self.store(s.target, N.binop(op, current, self.expr(s.value)), s)]
        if isinstance(s.target, ast.Name):
            current = self.expr(s.target)
            if not _is_ir(current):
                raise self.error(s, f"'{s.target.id}' is a parse-time constant")
            self.check_rebind(s.target.id, s)
            value = N.cast(N.binop(op, current, self.expr(s.value)), current.dtype)
            var = N.Var(self.fresh(s.target.id), value.dtype)
            self.bind(s.target.id, var)
            return [N.Let(var, value, loc=self.loc(s))]
        raise self.error(s, "augmented assignment to a name or a buffer element only")

    def store(self, target: ast.Subscript, value, s) -> N.Stmt:
        buf = self.buffer_of(target.value)
        indices = self.indices(target)
        if any(isinstance(i, slice) for i in indices):
            raise self.error(s, f"storing to a slice of '{buf.name}' is not supported; "
                                "use T.copy or T.Parallel")
        if len(indices) != buf.ndim:
            raise self.error(s, f"'{buf.name}' has {buf.ndim} dims but is indexed with "
                                f"{len(indices)}")
        if isinstance(value, _BufferRef):
            raise self.error(s, "cannot store a whole buffer into an element")
        value = N.as_expr(value, buf.dtype if not _is_ir(value) else None)
        return N.Store(buf.name, tuple(indices), N.cast(value, buf.dtype), loc=self.loc(s))

    def allocate(self, name: str, call: ast.Call, scope: str, s) -> N.Stmt:
        from . import dtype_name

        if not self.in_kernel:
            raise self.error(s, "buffers are allocated inside a T.Kernel block")
        args = [self.eval_python(a) for a in call.args]
        kw = {k.arg: self.eval_python(k.value) for k in call.keywords}
        shape = args[0] if args else kw.get("shape")
        dtype = args[1] if len(args) > 1 else kw.get("dtype", "float32")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise self.error(s, f"'{name}': {scope} buffer shape must be positive ints known at "
                                f"parse time, got {shape!r}")
        try:
            dt = dtype_name(dtype)
        except KeyError:
            raise self.error(s, f"'{name}': unknown dtype {dtype!r}") from None
        layout = kw.get("layout")
        if layout is not None and not isinstance(layout, N.Layout):
            raise self.error(s, f"'{name}': layout= takes a T.Layout(...), got {layout!r}")
        buf = N.Buffer(self.fresh(name), dt, tuple(N.Const(d, "int32") for d in shape), scope)
        self.bind(name, _BufferRef(buf))
        return N.Allocate(buf, layout, loc=self.loc(s))

    def alloc_barrier(self, name: str, call: ast.Call, s) -> N.Stmt:
        """``bars = T.alloc_barrier(n, arrive_count=1)``: n mbarriers in shared memory."""
        if not self.in_kernel:
            raise self.error(s, "barriers are allocated inside a T.Kernel block")
        args = [self.eval_python(a) for a in call.args]
        kw = {k.arg: self.eval_python(k.value) for k in call.keywords}
        unknown = set(kw) - {"num", "arrive_count"}
        if unknown:
            raise self.error(s, f"T.alloc_barrier got unknown keyword(s) {sorted(unknown)}")
        num = args[0] if args else kw.get("num", 1)
        count = args[1] if len(args) > 1 else kw.get("arrive_count", 1)
        for what, v in (("the number of barriers", num), ("arrive_count", count)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise self.error(s, f"'{name}': T.alloc_barrier: {what} must be a positive int "
                                    f"known at parse time, got {v!r}")
        buf = N.Buffer(self.fresh(name), "uint64", (N.Const(num, "int32"),), "shared")
        self.bind(name, _BufferRef(buf))
        return N.Allocate(buf, N.Layout("mbarrier", threads=count), loc=self.loc(s))

    def barrier_element(self, node, what: str) -> N.Region:
        r = self.region(node) if isinstance(node, ast.Subscript) else \
            N.Region(self.buffer_of(node).name, (N.Const(0, "int32"),))
        buf = self.buffer_named(r.buffer)
        if buf.dtype != "uint64" or buf.scope != "shared" or r.extents is not None:
            raise self.error(node, f"{what} takes one element of a T.alloc_barrier array, "
                                   f"e.g. bars[0]")
        return r

    def use_swizzle(self, call: ast.Call, s) -> list[N.Stmt]:
        """``T.use_swizzle(panel_size, order="row")``: from here on the block's first two
        indices walk the grid in panels of ``panel_size`` rows (``order="col"``: columns),
        down each panel's rows before moving a column, so blocks running together share
        operand tiles in L2.  Lets that rebind the ``T.Kernel`` names."""
        if not self.in_kernel:
            raise self.error(s, "T.use_swizzle belongs inside a T.Kernel block")
        (grid, names) = self.kernel_grid
        if len(grid) < 2:
            raise self.error(s, "T.use_swizzle needs a T.Kernel with at least 2 grid extents")
        args = [self.eval_python(a) for a in call.args]
        kw = {k.arg: self.eval_python(k.value) for k in call.keywords}
        unknown = set(kw) - {"panel_size", "order", "enable"}
        if unknown:
            raise self.error(s, f"T.use_swizzle got unknown keyword(s) {sorted(unknown)}")
        panel = args[0] if args else kw.get("panel_size", 8)
        order = args[1] if len(args) > 1 else kw.get("order", "row")
        if not kw.get("enable", True):
            return []
        if not isinstance(panel, int) or panel < 1 or order not in ("row", "col"):
            raise self.error(s, f"T.use_swizzle(panel_size={panel!r}, order={order!r}): "
                                "panel_size is a positive int, order 'row' or 'col'")
        i32 = lambda v: N.Const(v, "int32")  # noqa: E731
        x, y = (self.expr(ast.Name(id=n, ctx=ast.Load())) for n in names[:2])
        nx, ny = grid[0], grid[1]
        if order == "col":  # panels of columns: swap the roles of the two grid dims
            x, y, nx, ny = y, x, ny, nx
        stmts = []

        def let(name, value):
            var = N.Var(self.fresh(name), "int32")
            stmts.append(N.Let(var, value, loc=self.loc(s)))
            return var
        flat = let("block_flat", N.binop("add", x, N.binop("mul", y, nx)))
        size = N.binop("mul", i32(panel), nx)
        first = let("panel_first", N.binop("mul", N.binop("floordiv", flat, size), i32(panel)))
        offset = let("panel_offset", N.binop("mod", flat, size))
        rv = let("panel_rows", N.Select(N.Cmp("le", N.binop("add", first, i32(panel)), ny),
                                        i32(panel), N.binop("sub", ny, first), "int32"))
        new_x = N.binop("floordiv", offset, rv)
        new_y = N.binop("add", N.binop("mod", offset, rv), first)
        if order == "col":
            new_x, new_y = new_y, new_x
        for name, value in zip(names[:2], (new_x, new_y)):
            var = N.Var(self.fresh(name), "int32")
            stmts.append(N.Let(var, value, loc=self.loc(s)))
            self.bind(name, var)
        return stmts

    def expr_stmt(self, s: ast.Expr) -> list[N.Stmt]:
        call = s.value
        if not isinstance(call, ast.Call):
            raise self.error(s, "an expression statement must be a T.* call")
        loc = self.loc(s)
        f = call.func
        if self.is_t_form(f, "use_swizzle"):
            return self.use_swizzle(call, s)
        if self.is_t_form(f, "copy"):
            src, dst = self.region_args(call, 2, "T.copy")
            return [N.Copy(src, dst, loc=loc)]
        if self.is_t_form(f, "fill"):
            dst = self.region(call.args[0])
            buf = self.buffer_named(dst.buffer)
            return [N.Fill(dst, N.cast(N.as_expr(self.expr(call.args[1]), buf.dtype), buf.dtype), loc=loc)]
        if self.is_t_form(f, "clear"):
            return [N.Clear(self.buffer_of(call.args[0]).name, loc=loc)]
        if self.is_t_form(f, "gemm"):
            a, b, c = (self.buffer_of(x).name for x in call.args[:3])
            kw = {k.arg: self.eval_python(k.value) for k in call.keywords}
            unknown = set(kw) - {"transpose_A", "transpose_B", "clear_accum", "policy", "k_pack", "wg_wait"}
            if unknown:
                raise self.error(s, f"T.gemm got unknown keyword(s) {sorted(unknown)}")
            wait = int(kw.get("wg_wait", 0))
            if wait not in (0, 1):
                raise self.error(s, f"T.gemm: wg_wait={wait}; tilecute keeps 0 or 1 wgmma "
                                    "batches in flight")
            return [N.Gemm(a, b, c, bool(kw.get("transpose_A", False)),
                           bool(kw.get("transpose_B", False)), bool(kw.get("clear_accum", False)),
                           wait, loc=loc)]
        for kind in N.REDUCE_KINDS:
            if self.is_t_form(f, f"reduce_{kind}"):
                src, dst = (self.buffer_of(x).name for x in call.args[:2])
                kw = {k.arg: self.eval_python(k.value) for k in call.keywords if k.arg != "scratch"}
                dim = self.eval_python(call.args[2]) if len(call.args) > 2 else kw.get("dim", 0)
                unknown = set(kw) - {"dim", "clear", "scratch"}
                if unknown:
                    raise self.error(s, f"T.reduce_{kind} got unknown keyword(s) {sorted(unknown)}")
                scratch = ""
                for k in call.keywords:
                    if k.arg == "scratch":
                        scratch = self.buffer_of(k.value).name
                return [N.Reduce(kind, src, dst, int(dim), bool(kw.get("clear", True)), scratch,
                                 loc=loc)]
        if self.is_t_form(f, "sync_threads"):
            kw = {k.arg: self.eval_python(k.value) for k in call.keywords}
            return [N.Barrier(bool(kw.get("wait_async", False)), loc=loc)]
        if self.is_t_form(f, "atomic_add"):
            dst = self.region(call.args[0])
            v = call.args[1]
            value = self.expr(v)
            if isinstance(value, _BufferRef) or (isinstance(v, ast.Subscript) and
                                                 any(isinstance(i, slice) for i in self.indices(v))):
                value = self.region(v)
            else:
                buf = self.buffer_named(dst.buffer)
                value = N.cast(N.as_expr(value, buf.dtype), buf.dtype)
            return [N.AtomicAdd(dst, value, loc=loc)]
        if self.is_t_form(f, "tma_copy"):
            src, dst = self.region_args(call, 2, "T.tma_copy")
            barrier, stage = None, None
            for k in call.keywords:
                if k.arg == "barrier":
                    barrier = self.barrier_element(k.value, "T.tma_copy(barrier=)")
                elif k.arg == "stage":
                    stage = N.as_expr(self.expr(k.value))
                else:
                    raise self.error(s, f"T.tma_copy got unknown keyword {k.arg!r}")
            return [N.TmaCopy(src, dst, barrier, stage, loc=loc)]
        if self.is_t_form(f, "mbarrier_arrive"):
            if len(call.args) != 1:
                raise self.error(s, "T.mbarrier_arrive takes one barrier element")
            return [N.MBarrierArrive(self.barrier_element(call.args[0], "T.mbarrier_arrive"), loc=loc)]
        if self.is_t_form(f, "mbarrier_wait_parity"):
            if len(call.args) != 2:
                raise self.error(s, "T.mbarrier_wait_parity takes a barrier element and a parity")
            bar = self.barrier_element(call.args[0], "T.mbarrier_wait_parity")
            parity = N.cast(N.as_expr(self.expr(call.args[1]), "int32"), "int32")
            return [N.MBarrierWait(bar, parity, loc=loc)]
        if self.is_t_form(f, "evaluate"):
            return [N.Evaluate(N.as_expr(self.expr(call.args[0])), loc=loc)]
        if self.is_t_form(f, "set_max_nreg"):
            if len(call.args) != 2:
                raise self.error(s, "T.set_max_nreg takes a register count and is_inc (0 or 1)")
            count, inc = (self.eval_python(a) for a in call.args)
            if not isinstance(count, int) or isinstance(count, bool):
                raise self.error(s, f"T.set_max_nreg: the register count must be an int known "
                                    f"at parse time, got {count!r}")
            return [N.SetMaxNReg(count, bool(inc), loc=loc)]
        raise self.error(s, "an expression statement must be a T.* statement call "
                            "(T.copy, T.fill, T.clear, T.gemm, T.reduce_*, T.atomic_add, "
                            "T.sync_threads, T.tma_copy, T.mbarrier_arrive, "
                            "T.mbarrier_wait_parity, T.set_max_nreg, T.evaluate)")

    # ---- regions ----------------------------------------------------------------------
    def region_args(self, call, n, what):
        if len(call.args) != n:
            raise self.error(call, f"{what} takes {n} arguments")
        return [self.region(a) for a in call.args]

    def region(self, node) -> N.Region:
        if isinstance(node, ast.Subscript):
            buf = self.buffer_of(node.value)
            idx = self.indices(node)
            if len(idx) != buf.ndim:
                raise self.error(node, f"'{buf.name}' has {buf.ndim} dims but the region names "
                                       f"{len(idx)}")
            if any(isinstance(i, slice) for i in idx):
                starts, extents = [], []
                for i, d in zip(idx, buf.shape):
                    if isinstance(i, slice):
                        start = i.start if i.start is not None else N.Const(0, "int32")
                        stop = i.stop if i.stop is not None else d
                        starts.append(start)
                        extents.append(_sub(stop, start))
                    else:
                        starts.append(i)
                        extents.append(N.Const(1, "int32"))
                return N.Region(buf.name, tuple(starts), tuple(extents))
            return N.Region(buf.name, tuple(idx))
        buf = self.buffer_of(node)
        return N.Region(buf.name, tuple(N.Const(0, "int32") for _ in buf.shape))

    def buffer_of(self, node) -> N.Buffer:
        v = self.expr(node)
        if not isinstance(v, _BufferRef):
            raise self.error(node, f"expected a buffer, got {ast.unparse(node)}")
        return v.buffer

    def buffer_named(self, name: str) -> N.Buffer:
        for scope in reversed(self.scopes):
            for v in scope.values():
                if isinstance(v, _BufferRef) and v.buffer.name == name:
                    return v.buffer
        raise KeyError(name)

    def indices(self, node: ast.Subscript) -> list:
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                if e.step is not None:
                    raise self.error(node, "slice steps are not supported")
                out.append(slice(self.index_expr(e.lower) if e.lower else None,
                                 self.index_expr(e.upper) if e.upper else None))
            else:
                out.append(self.index_expr(e))
        return out

    # ---- expressions ------------------------------------------------------------------
    def is_t_form(self, node, name: str) -> bool:
        """Is ``node`` the T.* statement form ``name`` (as ``T.name`` or an imported alias)?"""
        from . import _ParserOnly

        try:
            v = self.eval_python(node)
        except FrontendError:
            return False
        return isinstance(v, _ParserOnly) and v.__name__ == name

    def eval_python(self, node):
        """Evaluate ``node`` to a Python value (closure constants, T.* attributes, IR)."""
        return self.expr(node)

    def index_expr(self, node) -> N.Expr:
        v = self.expr(node)
        if isinstance(v, bool) or not isinstance(v, (int, N.Expr)):
            raise self.error(node, f"expected an integer expression, got {ast.unparse(node)}")
        v = N.as_expr(v)
        if not N.is_int(v.dtype):
            raise self.error(node, f"index/extent `{ast.unparse(node)}` has dtype {v.dtype}, "
                                   "expected an integer")
        return N.cast(v, "int32") if v.dtype != "int32" else v

    def expr(self, node):
        try:
            return self._expr(node)
        except FrontendError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError) as e:
            raise self.error(node, f"cannot evaluate `{ast.unparse(node)}`: {e}") from None

    def _expr(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value)
            if isinstance(base, _BufferRef):
                b = base.buffer
                if node.attr == "shape":
                    return tuple(d.value if isinstance(d, N.Const) else d for d in b.shape)
                if node.attr == "dtype":
                    return b.dtype
                raise self.error(node, f"buffer attribute '{node.attr}' is not supported")
            return getattr(base, node.attr)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left), self.expr(node.right)
            op = _BIN.get(type(node.op))
            if op is None:
                raise self.error(node, f"operator {type(node.op).__name__} is not supported")
            self.check_value(node.left, a)
            self.check_value(node.right, b)
            if not _is_ir(a) and not _is_ir(b):
                return _python_binop(node.op, a, b)
            return N.binop(op, a, b)
        if isinstance(node, ast.UnaryOp):
            a = self.expr(node.operand)
            if not _is_ir(a):
                return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x,
                        ast.Invert: lambda x: ~x}[type(node.op)](a)
            self.check_value(node.operand, a)
            if isinstance(node.op, ast.USub):
                return N.binop("sub", N.const(0, a.dtype), a)
            if isinstance(node.op, ast.Not):
                return N.Not(_truth(a))
            if isinstance(node.op, ast.UAdd):
                return a
            raise self.error(node, "operator ~ is not supported")
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
            op = _CMP.get(type(node.ops[0]))
            if op is None:
                raise self.error(node, f"comparison {type(node.ops[0]).__name__} is not supported")
            if not _is_ir(a) and not _is_ir(b):
                return _python_cmp(node.ops[0], a, b)
            self.check_value(node.left, a)
            self.check_value(node.comparators[0], b)
            return N.cmp(op, a, b)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v) for v in node.values]
            return _and(values) if isinstance(node.op, ast.And) else _or(values)
        if isinstance(node, ast.IfExp):
            c = self.expr(node.test)
            if not _is_ir(c):
                return self.expr(node.body) if c else self.expr(node.orelse)
            a, b = self.expr(node.body), self.expr(node.orelse)
            a, b, t = N._coerce(a, b)
            return N.Select(_truth(c), a, b, t)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value)
            if isinstance(base, _BufferRef):
                buf = base.buffer
                idx = self.indices(node)
                if any(isinstance(i, slice) for i in idx):
                    raise self.error(node, f"a slice of '{buf.name}' is a region: use it in "
                                           "T.copy/T.fill/T.atomic_add")
                if len(idx) != buf.ndim:
                    raise self.error(node, f"'{buf.name}' has {buf.ndim} dims but is indexed "
                                           f"with {len(idx)}")
                return N.Load(buf.name, tuple(idx), buf.dtype)
            if _is_ir(base):
                raise self.error(node, f"`{ast.unparse(node.value)}` is a scalar, not a buffer")
            return base[self.expr(node.slice)]
        if isinstance(node, ast.Call):
            fn = self.expr(node.func)
            from . import _ParserOnly

            if isinstance(fn, _ParserOnly):
                raise self.error(node, f"T.{fn.__name__} is a statement form and cannot be used "
                                       "in an expression here")
            args = [self.expr(a) for a in node.args]
            kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
            for a in args:
                if isinstance(a, _BufferRef):
                    raise self.error(node, f"buffer '{a.buffer.name}' passed to "
                                           f"`{ast.unparse(node.func)}`")
            if fn in (max, min) and any(_is_ir(a) for a in args) and len(args) == 2:
                return N.binop(fn.__name__, *args)
            if fn is float and args and _is_ir(args[0]):
                return N.cast(args[0], "float32")
            if fn is int and args and _is_ir(args[0]):
                return N.cast(args[0], "int32")
            return fn(*args, **kwargs)
        if isinstance(node, ast.Slice):
            return slice(self.expr(node.lower) if node.lower else None,
                         self.expr(node.upper) if node.upper else None)
        raise self.error(node, f"`{type(node).__name__}` expressions are not supported")

    def check_value(self, node, v):
        if isinstance(v, _BufferRef):
            raise self.error(node, f"buffer '{v.buffer.name}' used as a value; index it "
                                   f"(`{v.buffer.name}[i]`)")


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


def _sub(a: N.Expr, b: N.Expr) -> N.Expr:
    """``a - b`` with ``(x + y) - x -> y`` so printed ranges re-parse exactly."""
    if isinstance(a, N.BinOp) and a.op == "add" and a.a == b:
        return a.b
    return N.binop("sub", a, b)


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


def _walk_exprs(x):
    if isinstance(x, N.Expr):
        yield x
        for v in vars(x).values():
            yield from _walk_exprs(v)
    elif isinstance(x, tuple):
        for v in x:
            yield from _walk_exprs(v)


def _function_env(fn) -> dict:
    env = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:
                pass
    return env


def _parse(tree: ast.FunctionDef, env: dict, filename: str, line_offset: int,
           lines: list[str]) -> N.PrimFunc:
    return _Parser(tree, env, filename, line_offset, lines).parse()


def prim_func(fn) -> N.PrimFunc:
    """Parse ``fn`` (a Python function written with ``T.*``) into a PrimFunc."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise FrontendError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}",
                            None, getattr(fn, "__name__", "?")) from None
    source = textwrap.dedent("".join(lines))
    filename = inspect.getsourcefile(fn) or "<unknown>"
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise FrontendError("@T.prim_func decorates a function", None, "?")
    all_lines = linecache.getlines(filename) or source.splitlines()
    # line numbers in `tree` are relative to the dedented snippet; shift to the file
    offset = first - 1
    return _Parser(fdef, _function_env(fn), filename, offset,
                   all_lines[offset:] if all_lines else source.splitlines(),
                   getattr(fn, "__annotations__", None)).parse()


def from_script(text: str, env: Optional[dict] = None, filename: str = "<script>") -> N.PrimFunc:
    """Parse a printed script (``PrimFunc.script()``): its top-level assignments run as
    Python with ``T`` bound, then its ``@T.prim_func`` function is parsed."""
    import tilecute.language as T

    namespace: dict = {"T": T, **(env or {})}
    tree = ast.parse(text)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(funcs) != 1:
        raise FrontendError(f"a script holds exactly one function, found {len(funcs)}", None, "?")
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.Import, ast.ImportFrom)):
            exec(compile(ast.Module([node], []), filename, "exec"), namespace)
    return _Parser(funcs[0], namespace, filename, 0, text.splitlines()).parse()
