"""Emit CuTe DSL source from a KernelPlan: one ``@cute.kernel`` per ``T.Kernel`` block,
one ``@cute.jit`` wrapper that launches them in order, and ``placeholder_args()`` that
builds the compile-time stand-ins the lazy cubin step passes to ``cute.compile``.

Kernel parameters are exactly the launch ABI's (pointers, int32 symbols, scalars); the
kernel builds its tensors from them.  Op -> code mappings are tables at the top of the
file; statements have one method each.  This module imports no CUTLASS: it prints text.
"""

from __future__ import annotations

import math

from .. import __version__
from ..ir import nodes as N
from ..runtime.dtypes import DTYPES
from ..transform.analysis import loads as _loads, row_major_strides, value_range
from ..transform.lower import KernelPlan

# ---- tables ------------------------------------------------------------------------------
BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
         "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
CMPOP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# intrinsic -> CuTe DSL function; `{fast}` marks where fastmath goes
MATH = {
    "exp": "cute.math.exp", "exp2": "cute.math.exp2", "log": "cute.math.log",
    "log2": "cute.math.log2", "sqrt": "cute.math.sqrt", "rsqrt": "cute.math.rsqrt",
    "tanh": "cute.math.tanh", "sin": "cute.math.sin", "cos": "cute.math.cos",
    "floor": "cute.math.floor", "ceil": "cute.math.ceil",
}
PREC = {"or": 2, "and": 3, "not": 4, "cmp": 5, "bitor": 6, "bitxor": 7, "bitand": 8,
        "shl": 10, "shr": 10, "add": 11, "sub": 11, "mul": 12, "div": 12, "floordiv": 12,
        "mod": 12}
ATOM = 100
UNROLL_LIMIT = 8  # parallel nests with at most this many iterations per thread unroll fully


class CodegenError(NotImplementedError):
    pass


def cute_type(dtype: str) -> str:
    return f"cutlass.{DTYPES[dtype].cute}"


class _KernelEmitter:
    def __init__(self, plan: KernelPlan, index: int):
        self.plan, self.func = plan, plan.func
        self.scope = plan.func.kernels[index]
        self.name = plan.kernel_names[index]
        self.lines: list[str] = []
        self.buffers: dict[str, N.Buffer] = {p.name: p for p in plan.tensor_params}
        self.ranges: dict[str, tuple] = {}
        self.counter = 0
        self.subst: dict[str, str] = {}  # loop variable -> expression text (vector tails)
        self.vector: dict[str, str] = {}  # Load key -> TensorSSA temporary (vector bodies)

    # ---- helpers -------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"tc_{stem}{self.counter}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def fail(self, node, msg: str):
        loc = getattr(node, "loc", None)
        where = f"{loc}: " if loc else ""
        raise CodegenError(f"{where}prim_func '{self.func.name}': {msg}")

    # ---- expressions ---------------------------------------------------------------------
    def const(self, e: N.Const) -> str:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if e.dtype == "int32":
            return str(int(e.value))
        value = repr(float(e.value)) if N.is_float(e.dtype) else str(int(e.value))
        if value in ("inf", "-inf", "nan"):
            value = f'float("{value}")'
        return f"{cute_type(e.dtype)}({value})"

    def expr(self, e: N.Expr) -> str:
        return self._expr(e)[0]

    def operand(self, e: N.Expr, min_prec: int) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < min_prec else text

    def _expr(self, e: N.Expr) -> tuple[str, int]:
        """Source text of ``e`` and its Python precedence (parentheses only where needed)."""
        if isinstance(e, N.Var):
            return self.subst.get(e.name, e.name), ATOM
        if isinstance(e, N.Const):
            return self.const(e), ATOM
        if isinstance(e, N.BinOp):
            if e.op in ("min", "max"):
                return f"cutlass.{e.op}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
            if e.op == "mod" and N.is_int(e.dtype) and not self.nonnegative_mod(e):
                # CuTe DSL's % truncates like C; the IR's mod floors like Python's
                a, b = self.operand(e.a, PREC["mul"]), self.operand(e.b, ATOM)
                return f"{a} - {a} // {b} * {b}", PREC["sub"]
            p = PREC[e.op]
            return f"{self.operand(e.a, p)} {BINOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Cmp):
            p = PREC["cmp"]
            return f"{self.operand(e.a, p + 1)} {CMPOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Logic):
            p = PREC[e.op]
            return f" {e.op} ".join(self.operand(a, p + 1) for a in e.args), p
        if isinstance(e, N.Not):
            return f"not {self.operand(e.a, PREC['not'])}", PREC["not"]
        if isinstance(e, N.Cast):
            if self.vector:  # TensorSSA values convert with .to
                return f"{self.operand(e.value, ATOM)}.to({cute_type(e.dtype)})", ATOM
            return f"{cute_type(e.dtype)}({self.expr(e.value)})", ATOM
        if isinstance(e, N.Select):
            return (f"cutlass.select_({self.expr(e.cond)}, {self.expr(e.a)}, "
                    f"{self.expr(e.b)})"), ATOM
        if isinstance(e, N.Load):
            key = self.load_key(e)
            if key in self.vector:
                return self.vector[key], ATOM
            return f"{e.buffer}[{self.index_tuple(e.indices)}]", ATOM
        if isinstance(e, N.Call):
            if e.name == "thread_idx":
                return ("tc_tx", "tc_ty", "tc_tz")[int(e.args[0].value)], ATOM
            if e.name == "ceildiv":
                a, b = self.operand(e.args[0], PREC["add"]), self.operand(e.args[1], ATOM)
                return f"({a} + {b} - 1) // {b}", PREC["floordiv"]
            if e.name == "fma":
                a, b, c = (self.operand(x, PREC["mul"] + 1) for x in e.args)
                return f"{a} * {b} + {c}", PREC["add"]
            if e.name == "abs":
                fn = "cute.math.absf" if N.is_float(e.dtype) else "abs"
                return f"{fn}({self.expr(e.args[0])})", ATOM
            if e.name in MATH:
                x = e.args[0]
                if x.dtype in ("float16", "bfloat16"):  # 16-bit math runs in fp32
                    inner = f"{MATH[e.name]}({self.expr(N.Cast('float32', x))})"
                    if self.vector:
                        return f"{inner}.to({cute_type(e.dtype)})", ATOM
                    return f"{cute_type(e.dtype)}({inner})", ATOM
                return f"{MATH[e.name]}({self.expr(x)})", ATOM
        self.fail(None, f"expression {type(e).__name__} {getattr(e, 'name', '')} has no CuTe DSL form")

    def nonnegative_mod(self, e: N.BinOp) -> bool:
        (alo, _), (blo, _) = value_range(e.a, self.ranges), value_range(e.b, self.ranges)
        return alo is not None and alo >= 0 and blo is not None and blo > 0

    def index_tuple(self, indices) -> str:
        parts = [self.expr(i) for i in indices]
        return ", ".join(parts) if len(parts) > 1 else parts[0]

    @staticmethod
    def load_key(e: N.Load) -> tuple:
        return (e.buffer, e.indices)

    # ---- bounds predication --------------------------------------------------------------
    def access_predicate(self, buffer: str, indices) -> list[str]:
        """Conditions for ``buffer[indices]`` to be in bounds that cannot be proved."""
        buf = self.buffers.get(buffer)
        if buf is None or buf.scope != "global":
            return []
        conds = []
        for idx, dim in zip(indices, buf.shape):
            lo, hi = value_range(idx, self.ranges)
            if lo is None or lo < 0:
                conds.append(f"{self.expr(idx)} >= 0")
            if not (isinstance(dim, N.Const) and hi is not None and hi < dim.value):
                conds.append(f"{self.expr(idx)} < {self.expr(dim)}")
        return conds

    def stmt_predicate(self, s) -> list[str]:
        loads = list(_loads(s.value)) + list(_loads(s.indices)) if isinstance(s, N.Store) \
            else list(_loads(s.value)) if isinstance(s, N.Let) else []
        conds = self.access_predicate(s.buffer, s.indices) if isinstance(s, N.Store) else []
        return list(dict.fromkeys(conds + self.access_conds(loads)))

    def access_conds(self, loads) -> list[str]:
        conds: list[str] = []
        for ld in loads:
            conds += self.access_predicate(ld.buffer, ld.indices)
        return list(dict.fromkeys(conds))

    # ---- statements ----------------------------------------------------------------------
    def body(self, stmts, depth: int, guarded: bool = False) -> None:
        if not stmts:
            self.line(depth, "pass")
        for s in stmts:
            self.stmt(s, depth, guarded)

    def stmt(self, s: N.Stmt, depth: int, guarded: bool) -> None:
        if isinstance(s, N.Let):
            value = self.expr(s.value)
            conds = self.stmt_predicate(s) if guarded else []
            if conds:
                # defined before the `if` with the value's exact type, as CuTe DSL requires
                self.line(depth, f"{s.var.name} = {cute_type(s.var.dtype)}(0)")
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, f"{s.var.name} = {value}")
            else:
                self.line(depth, f"{s.var.name} = {value}")
        elif isinstance(s, N.Store):
            text = f"{s.buffer}[{self.index_tuple(s.indices)}] = {self.expr(s.value)}"
            conds = self.stmt_predicate(s) if guarded else []
            if conds:
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, text)
            else:
                self.line(depth, text)
        elif isinstance(s, N.If):
            conds = self.access_conds(list(_loads(s.cond))) if guarded else []
            if conds:  # the condition reads global memory: read it only where in bounds
                c = self.fresh("cond")
                self.line(depth, f"{c} = False")
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, f"{c} = {self.expr(s.cond)}")
                self.line(depth, f"if {c}:")
            else:
                self.line(depth, f"if {self.expr(s.cond)}:")
            self.body(s.then, depth + 1, guarded)
            if s.orelse:
                self.line(depth, "else:")
                self.body(s.orelse, depth + 1, guarded)
        elif isinstance(s, N.Evaluate):
            conds = self.access_conds(list(_loads(s.value))) if guarded else []
            if conds:
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, self.expr(s.value))
            else:
                self.line(depth, self.expr(s.value))
        elif isinstance(s, N.For):
            if s.kind == "parallel":
                self.parallel(s, depth)
            else:
                self.serial(s, depth, guarded)
        elif isinstance(s, N.Allocate):
            self.allocate(s, depth)
        elif isinstance(s, N.TILE_OPS):
            self.fail(s, f"T.{type(s).__name__.lower()} is a tile op; its lowering to CuTe DSL "
                         "is not implemented yet in this tilecute")
        else:
            self.fail(s, f"statement {type(s).__name__} has no CuTe DSL form")

    def allocate(self, s: N.Allocate, depth: int) -> None:
        b = s.buffer
        if b.scope != "local":
            self.fail(s, f"'{b.name}' is a {b.scope} buffer; shared and fragment buffers come "
                         "with tile-op lowering, not implemented yet in this tilecute")
        shape = ", ".join(str(int(d.value)) for d in b.shape)
        self.line(depth, f"{b.name} = cute.make_rmem_tensor(({shape},), {cute_type(b.dtype)})")
        self.buffers[b.name] = b

    def serial(self, s: N.For, depth: int, guarded: bool) -> None:
        start, stop = self.expr(s.start), self.expr(N.binop("add", s.start, s.extent))
        const = isinstance(s.start, N.Const) and isinstance(s.extent, N.Const)
        if s.kind == "unrolled" and const:
            rng = f"cutlass.range_constexpr({start}, {stop})"
        elif s.kind == "unrolled":
            rng = f"cutlass.range({start}, {stop}, unroll_full=True)"
        else:
            rng = f"cutlass.range({start}, {stop})"
        if const:
            self.ranges[s.var.name] = (int(s.start.value), int(s.start.value + s.extent.value - 1))
        self.line(depth, f"for {s.var.name} in {rng}:")
        self.body(s.body, depth + 1, guarded)

    def parallel(self, s: N.For, depth: int) -> None:
        loops = [s]
        while len(loops[-1].body) == 1 and isinstance(loops[-1].body[0], N.For) \
                and loops[-1].body[0].kind == "parallel":
            loops.append(loops[-1].body[0])
        for lp in loops:
            if not isinstance(lp.extent, N.Const) or not isinstance(lp.start, N.Const):
                self.fail(lp, "T.Parallel extents must be known at compile time")
        if _has_parallel(loops[-1].body):
            self.fail(s, "a T.Parallel loop inside a T.Parallel body must be the whole body "
                         "(write `for i, j in T.Parallel(a, b)`)")
        extents = [int(lp.extent.value) for lp in loops]
        width = max(1, loops[-1].vector_width)
        total = math.prod(extents)
        threads = self.scope.num_threads
        per_step = threads * width
        iters = -(-total // per_step)
        k, f = self.fresh("k"), self.fresh("f")
        scale = f" * {width}" if width > 1 else ""
        if iters == 1:
            inner = depth
            self.line(inner, f"{f} = tc_tid{scale}")
        else:
            rng = f"cutlass.range_constexpr({iters})" if iters <= UNROLL_LIMIT else f"cutlass.range({iters})"
            self.line(depth, f"for {k} in {rng}:")
            inner = depth + 1
            self.line(inner, f"{f} = ({k} * {threads} + tc_tid){scale}")
        if total % per_step:
            self.line(inner, f"if {f} < {total}:")
            inner += 1
        rest = total
        for lp, extent in zip(loops, extents):
            rest //= extent
            start = int(lp.start.value)
            value = f"{f} // {rest}" if rest > 1 else f
            if lp is not loops[0]:
                value = f"({value}) % {extent}"
            if start:
                value = f"{value} + {start}"
            self.line(inner, f"{lp.var.name} = {value}")
            self.ranges[lp.var.name] = (start, start + extent - 1)
        body = loops[-1].body
        if width == 1:
            self.body(body, inner, guarded=True)
        else:
            self.vector_body(loops[-1], body, width, inner)

    def vector_body(self, loop: N.For, body, width: int, depth: int) -> None:
        """Vector loads/stores of ``width`` elements at ``j``; a scalar tail where the vector
        may cross a bound."""
        j = loop.var.name
        # every access is j + c (increasing in j): the bounds at the vector's first and last
        # element cover all of its elements
        first = [c for s in body for c in self.stmt_predicate(s)]
        conds = list(dict.fromkeys(first + self._vector_last_conds(body, j, width)))
        if conds:
            self.line(depth, f"if {' and '.join(conds)}:")
            self.vector_stmts(body, width, depth + 1)
            self.line(depth, "else:")
            v = self.fresh("v")
            self.line(depth + 1, f"for {v} in cutlass.range_constexpr({width}):")
            self.subst[j] = f"({j} + {v})"
            self.body(body, depth + 2, guarded=True)
            del self.subst[j]
        else:
            self.vector_stmts(body, width, depth)

    def _vector_last_conds(self, body, j: str, width: int) -> list[str]:
        conds = []
        saved = dict(self.subst)
        self.subst[j] = f"({j} + {width - 1})"
        lo, hi = self.ranges[j]
        self.ranges[j] = (lo + width - 1, hi)
        for s in body:
            conds += self.stmt_predicate(s)
        self.ranges[j] = (lo, hi)
        self.subst = saved
        return conds

    def vector_stmts(self, body, width: int, depth: int) -> None:
        for s in body:
            for ld in _loads(s.value):
                key = self.load_key(ld)
                if key not in self.vector:
                    name = self.fresh("vec")
                    self.line(depth, f"{name} = {self.vector_view(ld.buffer, ld.indices, width)}.load()")
                    self.vector[key] = name
            if isinstance(s, N.Let):
                self.line(depth, f"{s.var.name} = {self.expr(s.value)}")
            else:
                # later loads of the stored buffer must see the new values
                self.vector = {k: v for k, v in self.vector.items() if k[0] != s.buffer}
                # TensorSSA arithmetic may widen (a Float32 scalar widens fp16 lanes): convert
                value = self.operand(s.value, ATOM)
                if not isinstance(s.value, N.Cast):  # a Cast already ends in .to(dtype)
                    value += f".to({cute_type(self.buffers[s.buffer].dtype)})"
                self.line(depth, f"{self.vector_view(s.buffer, s.indices, width)}.store({value})")
        self.vector.clear()

    def vector_view(self, buffer: str, indices, width: int) -> str:
        """A ``width``-element tensor over ``buffer[indices...]`` (contiguous, aligned)."""
        buf = self.buffers[buffer]
        strides = row_major_strides(buf)
        terms = []
        for idx, stride in zip(indices, strides):
            if isinstance(stride, N.Const) and stride.value == 1:
                terms.append(self.expr(idx))
            else:
                terms.append(f"{self.operand(idx, PREC['mul'])} * {self.operand(stride, PREC['mul'] + 1)}")
        offset = " + ".join(terms)
        return (f"cute.make_tensor({buffer}.iterator + cute.assume({offset}, divby={width}), "
                f"cute.make_layout({width}))")

    # ---- the kernel ----------------------------------------------------------------------
    def emit(self) -> list[str]:
        plan, k = self.plan, self.scope
        params = [f"{p.name}: {'cute.Pointer' if p.kind == 'pointer' else cute_type(p.dtype)}"
                  for p in plan.abi.kernels[0].params]
        self.line(0, "@cute.kernel")
        self.line(0, f"def {self.name}({', '.join(params)}):")
        bvars = [v.name for v in k.block_vars] + ["_"] * (3 - len(k.block_vars))
        self.line(1, f"{', '.join(bvars)} = cute.arch.block_idx()")
        self.line(1, "tc_tx, tc_ty, tc_tz = cute.arch.thread_idx()")
        tx, ty = (k.threads + (1, 1))[:2]
        tid = "tc_tx"
        if len(k.threads) > 1:
            tid += f" + tc_ty * {tx}"
        if len(k.threads) > 2:
            tid += f" + tc_tz * {tx * ty}"
        self.line(1, f"tc_tid = {tid}")
        for d, t in enumerate(k.threads):
            self.ranges[f"thread_idx{d}"] = (0, t - 1)
        for v, g in zip(k.block_vars, k.grid):
            hi = g.value - 1 if isinstance(g, N.Const) else None
            self.ranges[v.name] = (0, hi)
        used = _used_buffers(k.body)
        for p in plan.tensor_params:
            if p.name not in used:
                continue
            shape = ", ".join(self.expr(d) for d in p.shape)
            strides = ", ".join(self.expr(d) for d in row_major_strides(p))
            self.line(1, f"{p.name} = cute.make_tensor({p.name}_ptr, "
                         f"cute.make_layout(({shape},), stride=({strides},)))")
        self.body(k.body, 1)
        return self.lines


def _has_parallel(body) -> bool:
    for s in body:
        if isinstance(s, N.For):
            if s.kind == "parallel" or _has_parallel(s.body):
                return True
        elif isinstance(s, N.If) and (_has_parallel(s.then) or _has_parallel(s.orelse)):
            return True
    return False


def _used_buffers(body) -> set[str]:
    used: set[str] = set()

    def visit(x):
        if isinstance(x, (N.Load, N.Store)):
            used.add(x.buffer)
        if isinstance(x, N.Region):
            used.add(x.buffer)
        if isinstance(x, (N.Expr, N.Stmt, N.Region)) and hasattr(x, "__dataclass_fields__"):
            for v in vars(x).values():
                visit(v)
        elif isinstance(x, tuple):
            for v in x:
                visit(v)

    visit(body)
    return used


def emit_cute(plan: KernelPlan) -> str:
    """The CuTe DSL source of ``plan``."""
    f, abi = plan.func, plan.abi
    out = [
        f"# Generated by tilecute {__version__} from prim_func '{f.name}'"
        + (f" ({f.loc})" if f.loc else "") + ".",
        f"# {len(f.kernels)} @cute.kernel function(s) and the @cute.jit wrapper `{f.name}` that",
        "# launches them in order.  Kernel parameters follow the launch ABI (abi.json).",
        "import cutlass",
        "import cutlass.cute as cute",
        "",
    ]
    for i in range(len(f.kernels)):
        out += ["", *(_KernelEmitter(plan, i).emit()), "",
                f'{plan.kernel_names[i]}.set_name_prefix("{plan.name_prefixes[i]}", '
                "remove_cutlass_symbol=True, keep_mangled_name=False)", ""]
    params = abi.kernels[0].params
    sig = ", ".join(f"{p.name}: {'cute.Pointer' if p.kind == 'pointer' else cute_type(p.dtype)}"
                    for p in params)
    names = ", ".join(p.name for p in params)
    out += ["", "@cute.jit", f"def {f.name}({sig}):"]
    emitter = _KernelEmitter(plan, 0)
    for i, (k, launch) in enumerate(zip(f.kernels, abi.kernels)):
        grid = [emitter.expr(g) for g in k.grid] + ["1"] * (3 - len(k.grid))
        extra = f", cluster=[{', '.join(map(str, launch.cluster))}]" if launch.cluster else ""
        out.append(f"    {plan.kernel_names[i]}({names}).launch(grid=[{', '.join(grid)}], "
                   f"block=[{', '.join(map(str, launch.block))}]{extra})")
    align = {a.name: a.align for a in abi.args if a.kind == "tensor"}
    out += ["", "", "def placeholder_args():",
            '    """Compile-time stand-ins for the wrapper\'s parameters, in order."""',
            "    return ("]
    for p in params:
        if p.kind == "pointer":
            out.append(f"        cute.runtime.make_ptr({cute_type(p.dtype)}, 0, "
                       f"cute.AddressSpace.gmem, assumed_align={max(align[p.source], DTYPES[p.dtype].bytes)}),")
        else:
            out.append(f"        {cute_type(p.dtype)}(0),")
    out.append("    )")
    return "\n".join(out) + "\n"
