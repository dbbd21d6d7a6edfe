"""Check a PrimFunc before anything is generated from it.

Errors name the function, the statement (as the printer writes it) and the frontend
source line, so an IR coming from JSON is as debuggable as one from ``@T.prim_func``.
"""

from __future__ import annotations

import dataclasses
import keyword
import unicodedata

from ..runtime.dtypes import DTYPES, valid_dtypes_text
from ..target import MAX_THREADS, TMA_REDUCE_ADD_TYPES
from ..target import WARP
from . import nodes as N
from .visitor import BODY_FIELDS, walk_nodes

FP4 = "float4_e2m1fn"  # two to a byte in memory (DTypeInfo.pack)
E8M0 = "float8_e8m0fnu"  # MX scales: a storage dtype, as CUDA's __nv_fp8_e8m0 has no arithmetic
INT4 = "int4"  # two to a byte, as FP4; a T.gemm operand (mma.sync s4), else a storage dtype
UINT4 = "uint4"  # likewise (mma.sync u4)
INTS4 = (INT4, UINT4)
PACKED = (FP4, INT4, UINT4)  # a 4-bit code a register, two to a byte in memory

# the tile ops refused on FP4 / E8M0 operands (ir/validate's narrow_dtype_statement), with
# what the message says, and each op's operands
_NARROW_REFUSALS = {
    N.Gemm: {FP4: "T.gemm: sm_80/sm_90 have no FP4 MMA (TileLang multiplies float4_e2m1fn "
                  "with tcgen05 on sm_100); dequantize to float16/bfloat16 first",
             E8M0: "T.gemm: no MMA takes float8_e8m0fnu operands (they are scales: multiply "
                   "by their float32 values)"},
    N.Reduce: {FP4: "T.reduce: reduce float4_e2m1fn values after casting them to float32",
               E8M0: "T.reduce: cast float8_e8m0fnu values to float32, then reduce",
               **{d: f"T.reduce: reduce {d} values after casting them to int32" for d in INTS4}},
    N.Scan: {FP4: "T.scan: reduce float4_e2m1fn values after casting them to float32",
             E8M0: "T.cumsum: cast float8_e8m0fnu values to float32, then scan",
             **{d: f"T.cumsum: cast {d} values to int32, then scan" for d in INTS4}},
    N.AtomicAdd: {FP4: "T.atomic_add: no atomic add on float4_e2m1fn",
                  E8M0: "T.atomic_add: no atomic arithmetic on float8_e8m0fnu",
                  **{d: f"T.atomic_add: no atomic add on {d}" for d in INTS4}},
    N.TmaCopy: {FP4: "a TMA copy (T.tma_copy): tilecute moves float4_e2m1fn by cp.async and "
                     "thread copies (TMA's 4-bit types are sm_100's)",
                **{d: f"a TMA copy (T.tma_copy): tilecute moves {d} by cp.async and thread "
                      "copies" for d in INTS4}},
    N.Im2Col: {d: "T.c2d_im2col" for d in (FP4, E8M0) + INTS4},
}
_NARROW_OPERANDS = {
    N.Gemm: lambda s: (s.a, s.b, s.c), N.Reduce: lambda s: (s.src, s.dst),
    N.Scan: lambda s: (s.src, s.dst), N.AtomicAdd: lambda s: (s.dst, s.value),
    N.TmaCopy: lambda s: (s.src, s.dst), N.Im2Col: lambda s: (s.img, s.col),
}


def _operand_name(x):
    """The buffer a tile op's operand names (a name, a region, a load), else None."""
    return x if isinstance(x, str) else x.buffer if isinstance(x, (N.Region, N.Load)) else None
CODED = (FP4, E8M0, INT4, UINT4)  # loaded, stored, selected and cast, nothing computed on them

# names the generated CuTe DSL source uses itself
RESERVED = {"cute", "cutlass", "_", "placeholder_args"}
RESERVED_PREFIXES = ("tc_", "tilecute", "__")

MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)  # CUDA's gridDim limits
# how deeply IR nodes may nest (statements and expressions together, from the function
# down): the passes and the code generator recurse over the IR, and a function nested
# some 500 levels deep exhausts Python's default recursion limit there
MAX_DEPTH = 256


class ValidationError(ValueError):
    def __init__(self, func: str, stmt, msg: str):
        self.func, self.stmt, self.msg_text = func, stmt, msg
        loc = getattr(stmt, "loc", None) if stmt is not None else None
        where = f"{loc}: " if loc else ""
        text = f"{where}in prim_func '{func}'"
        if stmt is not None and not isinstance(stmt, N.PrimFunc):
            text += f", statement `{_stmt_text(stmt)}`"
        super().__init__(f"{text}: {msg}")


def _stmt_text(s) -> str:
    from .printer import _stmt

    out: list[str] = []
    try:
        _stmt(s, 0, out)
    except Exception:  # a malformed node must not hide the real error
        return type(s).__name__
    return out[0] if out else type(s).__name__


class _Validator:
    def __init__(self, func: N.PrimFunc, compiling: bool = True):
        self.func = func
        self.compiling = compiling
        self.stmt = func
        self.scoped_safe: list[set] = []  # the tensors of the T.sblock scopes around a statement
        self.bound: set[str] = set()
        self.barriers: set[str] = set()
        self.reducers: set[str] = set()  # T.alloc_reducer buffers
        self.views: dict[str, str] = {}  # view -> the buffer it views

    def name(self, name: str, what: str) -> None:
        """Names become Python identifiers in generated code: unique, not ours, and as
        Python reads them (it folds identifiers to NFKC: a fullwidth 'ｂx' would become
        'bx' in the generated source and overwrite the block index)."""
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            self.fail(f"{what} name {name!r} is not a Python identifier")
        folded = unicodedata.normalize("NFKC", name)
        if folded != name:
            self.fail(f"{what} name {name!r} is not in Unicode NFKC form: Python would read "
                      f"it as {folded!r} in the generated source, where it could clash with "
                      "another name; use the NFKC form (or plain ASCII)")
        if name in RESERVED or name.startswith(RESERVED_PREFIXES):
            self.fail(f"{what} name {name!r} is reserved for generated code (names starting "
                      "with 'tc_', 'tilecute' or '__' belong to tilecute, Python and CuTe DSL)")
        if name in self.bound:
            self.fail(f"{what} name {name!r} is bound twice in this function (names are unique)")
        self.bound.add(name)

    def fail(self, msg: str):
        raise ValidationError(self.func.name, self.stmt, msg)

    def dtype(self, d: str, what: str):
        if not isinstance(d, str) or d not in DTYPES:
            self.fail(f"{what}: unknown dtype {d!r}; {valid_dtypes_text()}")

    def integer(self, v, what: str, lo: int = 0, hi: int | None = None) -> int:
        """A field that must be a Python int in ``[lo, hi]`` (JSON may hold anything)."""
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(f"{what} must be an int, got {type(v).__name__} {v!r}")
        if v < lo or (hi is not None and v > hi):
            self.fail(f"{what} is {v}; it must be {lo}..{hi}" if hi is not None
                      else f"{what} is {v}; it must be at least {lo}")
        return v

    def int_tuple(self, v, what: str, lo: int = 1):
        if not isinstance(v, tuple):
            self.fail(f"{what} must be a list of ints, got {type(v).__name__} {v!r}")
        for x in v:
            self.integer(x, what, lo)

    def const(self, e: N.Const, what: str = "") -> None:
        """A literal's value fits its dtype (a float in an int32 dim, a bool in an int, or
        2**40 in an int32 would be printed into code as they are)."""
        info = DTYPES[e.dtype]
        v = e.value
        where = f"{what}: " if what else ""
        if info.kind == "bool":
            if not isinstance(v, bool):
                self.fail(f"{where}a bool constant holds {type(v).__name__} {v!r}")
        elif info.kind in ("int", "uint"):
            if isinstance(v, bool) or not isinstance(v, int):
                self.fail(f"{where}an {e.dtype} constant holds {type(v).__name__} {v!r}")
            lo, hi = (-(1 << (info.bits - 1)), (1 << (info.bits - 1)) - 1) if info.kind == "int" \
                else (0, (1 << info.bits) - 1)
            if not lo <= v <= hi:
                self.fail(f"{where}the {e.dtype} constant {v} is out of range ({lo}..{hi})")
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(f"{where}a {e.dtype} constant holds {type(v).__name__} {v!r}")

    def static_shapes(self, form: str, buffers) -> None:
        """``form`` takes buffers of constant shape: a shared buffer sized at launch is
        refused, naming it."""
        for b in buffers:
            if b.scope == "shared" and not all(isinstance(d, N.Const) for d in b.shape):
                self.fail(f"{form} takes buffers of constant shape; '{b.name}' is a shared "
                          "buffer sized at launch (copy the part it needs into a tile of "
                          "constant shape)")

    def dim(self, d, what: str, vars_, expr: bool = False) -> None:
        """A buffer dim or stride: a positive int32 or int64 constant or a declared int32 or
        int64 symbol; with ``expr`` (a parameter's dims) also an expression of them (+, -,
        *, //, %) at their promoted dtype, an int32 part widened by a ``Cast`` to int64."""
        if expr and isinstance(d, N.BinOp):
            if d.op not in ("add", "sub", "mul", "floordiv", "mod") or d.dtype not in N.DIM_DTYPES:
                self.fail(f"{what}: a dim expression may use +, -, *, // and % on int32 or "
                          f"int64, got {d.op} ({d.dtype})")
            for x in (d.a, d.b):
                if x.dtype != d.dtype:
                    self.fail(f"{what}: the operands of a {d.dtype} dim expression are "
                              f"{d.a.dtype} and {d.b.dtype}")
                if isinstance(x, N.Const):
                    self.dtype(x.dtype, what)
                    self.const(x, what)
                else:
                    self.dim(x, what, vars_, expr=True)
            return
        if expr and isinstance(d, N.Cast):
            if d.dtype != "int64" or d.value.dtype != "int32":
                self.fail(f"{what}: a dim expression converts int32 to int64 only, got "
                          f"{d.value.dtype} to {d.dtype}")
            if isinstance(d.value, N.Const):
                self.const(d.value, what)
            else:
                self.dim(d.value, what, vars_, expr=True)
            return
        if isinstance(d, N.Var):
            if d.name not in vars_:
                self.fail(f"{what}: symbol '{d.name}' is not declared in the function's symbols")
            if d.dtype not in N.DIM_DTYPES:
                self.fail(f"{what}: symbol '{d.name}' is {d.dtype}; symbols are int32 or int64")
            return
        if not isinstance(d, N.Const):
            self.fail(f"{what}: dims must be ints or symbols, got {type(d).__name__}")
        self.dtype(d.dtype, what)
        self.const(d, what)
        if d.dtype not in N.DIM_DTYPES or d.value < 1:
            self.fail(f"{what}: dim {d.value!r} must be a positive int32 or int64")

    def view(self, s: N.Allocate, vars_, bufs) -> None:
        """An allocation viewing ``s.view_of``: an earlier buffer of the same scope that
        is no view itself, holding at least the view's bits (exactly, when both are
        static), no multi-buffered or reducer base; a global view's dims are int32
        expressions of constants and the function's symbols."""
        b = s.buffer
        base = bufs.get(s.view_of)
        if base is None:
            self.fail(f"view '{b.name}' of '{s.view_of}': no buffer '{s.view_of}' is in scope")
        if s.view_of in self.views:
            self.fail(f"view '{b.name}' of '{s.view_of}': '{s.view_of}' is itself a view; view "
                      f"its base '{self.views[s.view_of]}'")
        if base.scope != b.scope:
            self.fail(f"view '{b.name}' is {b.scope} but its base '{base.name}' is {base.scope}")
        if s.stages != 1 or s.reducer or (s.layout is not None and s.layout.kind == "mbarrier"):
            self.fail(f"view '{b.name}': a view has no stages, reducer or mbarrier layout of its "
                      "own")
        if base.scope == "global":
            if base.strides is not None:
                self.fail(f"view '{b.name}': its base '{base.name}' has strides; views are of "
                          "row-major tensors")
            symbols = {v.name for v in self.func.symbols}
            if not isinstance(b.shape, tuple) or not b.shape:
                self.fail(f"view '{b.name}': a view has dims")
            for d in b.shape:
                self.expr(d, vars_, bufs)
                if d.dtype != "int32" or any(
                        isinstance(x, N.Var) and x.name not in symbols or isinstance(x, N.Load)
                        for x in _walk(d)):
                    self.fail(f"view '{b.name}': a global view's dims are int32 expressions of "
                              "constants and the function's symbols")
        offset_bits = 0
        if s.view_offset is not None:
            e = s.view_offset
            if not isinstance(e, N.Expr) or base.scope != "global":
                self.fail(f"view '{b.name}': view_offset is an element offset into a global base")
            self.expr(e, vars_, bufs)
            # (a run-time offset's multiple may come from Lets' values: the frontend proves it)
            if not N.is_int(e.dtype) or any(isinstance(x, N.Load) for x in _walk(e)) or \
                    (isinstance(e, N.Const) and (e.value < 0 or e.value * DTYPES[b.dtype].bits % 128)):
                from .printer import expr_str
                self.fail(f"view '{b.name}': view_offset {expr_str(e)} is an integer expression "
                          f"that reads no memory, >= 0, a multiple of 16 bytes of {b.dtype} "
                          "elements")
            offset_bits = int(e.value) * DTYPES[b.dtype].bits if isinstance(e, N.Const) else 0
        if all(isinstance(d, N.Const) for d in b.shape + base.shape):
            bits = _prod(int(d.value) for d in b.shape) * DTYPES[b.dtype].bits + offset_bits
            base_bits = _prod(int(d.value) for d in base.shape) * DTYPES[base.dtype].bits
            if bits > base_bits or (bits != base_bits and base.scope != "global"):
                self.fail(f"view '{b.name}' holds {bits} bits"
                          + (" from its offset on" if s.view_offset else "")
                          + f" but its base '{base.name}' holds {base_bits}")
        if s.view_of in self.reducers:
            self.fail(f"view '{b.name}': its base '{base.name}' is a reducer")
        packed = next((d for d in (b.dtype, base.dtype) if d in PACKED), None)
        if packed and b.scope in ("fragment", "local") and b.dtype != base.dtype:
            self.fail(f"view '{b.name}': a {b.scope} {packed} buffer holds one value a "
                      f"register, so it has no bytes to view as another dtype (view shared or "
                      f"global {packed} memory)")
        if b.scope == "fragment" and b.dtype != base.dtype:
            self.fail(f"view '{b.name}': a fragment view keeps its base's dtype ({base.dtype})")
        self.views[b.name] = base.name

    def address_view(self, s: N.Allocate, vars_, bufs) -> None:
        """A global tensor at a run-time address (``Allocate.address``, TileLang's
        T.make_tensor): an int64 address; dims and strides integer expressions of constants
        and the names in scope (symbols, scalar parameters, lets) that read no memory; no
        layout, stages, reducer or base of its own."""
        b = s.buffer
        if not isinstance(s.address, N.Expr):
            self.fail(f"buffer '{b.name}': address is an expression, got {s.address!r}")
        self.expr(s.address, vars_, bufs)
        if s.address.dtype != "int64":
            self.fail(f"buffer '{b.name}': its address is {s.address.dtype}; an address is int64")
        if b.scope != "global" or s.view_of or s.layout is not None or s.stages != 1 or \
                s.reducer:
            self.fail(f"buffer '{b.name}': a tensor at an address is a global buffer with no "
                      "base, layout, stages or reducer")
        if not isinstance(b.shape, tuple) or not b.shape or \
                not isinstance(b.strides, (tuple, type(None))) or \
                b.strides is not None and len(b.strides) != len(b.shape):
            self.fail(f"buffer '{b.name}': a tensor at an address has dims (and as many strides, "
                      "when given)")
        for d in b.shape + (b.strides or ()):
            self.expr(d, vars_, bufs)
            if d.dtype not in N.DIM_DTYPES or any(isinstance(x, N.Load) for x in _walk(d)):
                self.fail(f"buffer '{b.name}': the dims and strides of a tensor at an address "
                          "are int32 or int64 expressions that read no memory")
        if DTYPES[b.dtype].pack > 1:
            self.fail(f"buffer '{b.name}': a {b.dtype} tensor at an address is not supported "
                      "(its elements are packed two a byte)")

    def packed_param(self, p: N.Buffer) -> None:
        """A float4_e2m1fn or int4 tensor parameter is its bytes, two elements each along its last
        dim (TileLang's binding: the tensor's last dim times 2, its other strides times 2,
        its last stride 1): a static last dim and static outer strides must be even, the
        last stride 1."""
        last = p.shape[-1]
        if isinstance(last, N.Const) and last.value % 2:
            self.fail(f"parameter '{p.name}': a {p.dtype} tensor's last dim counts two "
                      f"elements a byte, so it is even; got {last.value}")
        if p.strides is not None:
            if not (isinstance(p.strides[-1], N.Const) and p.strides[-1].value == 1):
                self.fail(f"parameter '{p.name}': a {p.dtype} tensor's last stride is 1 "
                          "(its elements are packed two a byte along the last dim)")
            for d in p.strides[:-1]:
                if isinstance(d, N.Const) and d.value % 2:
                    self.fail(f"parameter '{p.name}': a {p.dtype} tensor's strides count "
                              f"elements, two a byte, so they are even; got {d.value}")

    def run(self):
        self.depth()
        f = self.func
        scope_vars: dict[str, N.Var] = {}
        buffers: dict[str, N.Buffer] = {}
        # the function's name is the launch wrapper's, in the generated module's scope: a
        # parameter, symbol or local of the same name is another scope (TileLang's too)
        self.name(f.name, "function")
        self.bound.discard(f.name)
        for s in f.symbols:
            self.name(s.name, "symbol")
            scope_vars[s.name] = s
        for p in f.params:
            self.name(p.name, "parameter")
            if p.name in buffers or p.name in scope_vars and isinstance(p, N.Buffer):
                self.fail(f"parameter name '{p.name}' is used twice")
            if isinstance(p, N.Buffer):
                self.dtype(p.dtype, f"parameter '{p.name}'")
                if p.scope != "global":
                    self.fail(f"parameter '{p.name}' must be a global tensor")
                if p.shape == ():
                    self.fail(f"parameter '{p.name}': a 0-d tensor (shape ()) is not supported "
                              "by tilecute; declare it with shape (1,) and read element 0")
                if not isinstance(p.shape, tuple) or not p.shape or \
                        not isinstance(p.strides, (tuple, type(None))):
                    self.fail(f"parameter '{p.name}': shape and strides are lists of dims")
                if p.strides is not None and len(p.strides) != len(p.shape):
                    self.fail(f"parameter '{p.name}': {len(p.strides)} strides for "
                              f"{len(p.shape)} dims")
                for d in p.shape + (p.strides or ()):
                    self.dim(d, f"parameter '{p.name}'", scope_vars, expr=True)
                if DTYPES.get(p.dtype) is not None and DTYPES[p.dtype].pack > 1:
                    self.packed_param(p)
                buffers[p.name] = p
                self.name(f"{p.name}_ptr", "parameter pointer (generated)")
            else:
                self.dtype(p.dtype, f"parameter '{p.name}'")
                scope_vars[p.name] = p
        scalars = {p.name: p for p in f.params if isinstance(p, N.Var)}
        if not isinstance(f.pointers, tuple) or len(set(f.pointers)) != len(f.pointers):
            self.fail(f"pointers {f.pointers!r} must name parameters, each once")
        for name in f.pointers:
            if name not in scalars or scalars[name].dtype != "int64":
                self.fail(f"pointer parameter {name!r} must be an int64 scalar parameter (the "
                          "address; TileLang's `p: T.ptr`)")
        host_names = N.host_condition_names(f.symbols, scalars.values(), f.pointers)
        if not isinstance(f.assumes, tuple):
            self.fail(f"assumes {f.assumes!r} must be a tuple of conditions")
        for a in f.assumes:
            if not N.is_host_condition(a, host_names):
                self.fail(f"assume {a!r}: the launcher checks a bool condition over the "
                          "symbols and the integer / bool scalar parameters only")
        tail = [p.name for p in f.params[len(f.params) - len(f.workspaces):]] \
            if f.workspaces else []
        if list(f.workspaces) != tail or len(set(tail)) != len(tail):
            self.fail(f"workspaces {list(f.workspaces)} must name the last parameters, each once")
        for p in f.params:
            if p.name in f.workspaces:
                if not isinstance(p, N.Buffer) or p.strides is not None:
                    self.fail(f"workspace '{p.name}' must be a contiguous tensor parameter")
                bound = {d.name for q in f.params if q.name not in f.workspaces
                         and isinstance(q, N.Buffer) for d in q.shape + (q.strides or ())
                         if isinstance(d, N.Var)}
                for d in p.shape:
                    if not isinstance(d, (N.Const, N.Var)) or \
                            isinstance(d, N.Var) and d.name not in bound:
                        self.fail(f"workspace '{p.name}': each dim is an int or a symbol "
                                  "another parameter's shape or strides bind")
        if not f.kernels and self.compiling:
            self.fail("the prim_func has no `with T.Kernel(...)` block, so there is no kernel "
                      "to compile (TileLang compiles it to a host function that only checks its "
                      "arguments and launches nothing; tilecute builds kernels only)")
        for k in f.kernels:
            self.kernel(k, dict(scope_vars), dict(buffers))
        windows = {pair for k in f.kernels for pair in k.l2_hit_ratios}
        if len(windows) > 1:
            self.stmt = next(k for k in f.kernels if k.l2_hit_ratios)
            pairs = ", ".join(f"{n}: {r!r}" for n, r in sorted(windows))
            self.fail(f"T.annotate_l2_hit_ratio gives the function {len(windows)} L2 windows "
                      f"({pairs}); a launch has one access policy window (TileLang sets one per "
                      "tensor on the stream, each replacing the one before): annotate one tensor")

    def nested_loops(self, stmts, in_parallel: bool) -> None:
        """TileLang's nested-loop semantic check (its ValueError, raised when it compiles): a
        T.Parallel loop may nest in a T.Parallel body only as that whole body (``for i in
        T.Parallel(a): for j in T.Parallel(b): ...``, one nest); any other T.Parallel loop
        under one (after a statement, under a serial loop, a tile op's nest) and any
        T.Pipelined loop under one are refused."""
        for s in stmts:
            if isinstance(s, N.For) and s.kind == "parallel":
                if len(s.body) == 1 and isinstance(s.body[0], N.For) and s.body[0].kind == "parallel":
                    self.nested_loops(s.body, in_parallel)
                    continue
                if in_parallel:
                    self.stmt = s
                    self.fail("a T.Parallel loop inside a T.Parallel body that holds other "
                              "statements (or under a serial loop in it): nested parallel loops "
                              "are not allowed, except one T.Parallel loop as the whole body of "
                              "another (TileLang's semantic check)")
                self.nested_loops(s.body, True)
                continue
            if isinstance(s, N.For) and s.kind == "pipelined" and in_parallel:
                self.stmt = s
                self.fail("a T.Pipelined loop inside a T.Parallel loop: a pipelined loop cannot "
                          "be nested inside a parallel loop (TileLang's semantic check)")
            for name in BODY_FIELDS.get(type(s), ()):
                self.nested_loops(getattr(s, name), in_parallel)

    def kernel(self, k: N.KernelScope, vars_, bufs):
        self.stmt = k
        self.kernel_scope = k
        if not isinstance(k, N.KernelScope):
            self.fail(f"a prim_func's kernels are T.Kernel scopes, got {type(k).__name__}")
        if self.compiling:  # (TileLang checks when it compiles, not at @T.prim_func)
            self.nested_loops(k.body, False)
        self.host_vars = dict(vars_)  # what the launcher knows: symbols, scalar parameters
        if not isinstance(k.grid, tuple) or not 1 <= len(k.grid) <= 3:
            self.fail(f"T.Kernel takes 1 to 3 grid extents, got {k.grid!r}")
        if not isinstance(k.block_vars, tuple) or len(k.block_vars) != len(k.grid):
            self.fail("one block variable per grid extent")
        self.int_tuple(k.threads, "threads")
        if not 1 <= len(k.threads) <= 3:
            self.fail("threads must have 1 to 3 dims")
        self.integer(k.producer_threads, "producer_threads")
        self.integer(k.min_blocks_per_sm, "min_blocks_per_sm", 0)
        for regs, what in ((k.producer_regs, "T.annotate_producer_reg_dealloc"),
                           (k.consumer_regs, "T.annotate_consumer_reg_alloc")):
            self.integer(regs, what, 0)
            if regs and not (24 <= regs <= 256 and regs % 8 == 0):
                self.fail(f"{what}({regs}): setmaxnreg takes a multiple of 8 from 24 to 256")
        if not isinstance(k.reg_alloc, bool):
            self.fail(f"reg_alloc must be a bool, got {k.reg_alloc!r}")
        if k.cluster is not None:
            self.int_tuple(k.cluster, "cluster")
        if k.num_threads > MAX_THREADS:
            self.fail(f"threads={k.threads} is {k.num_threads} threads per block; CUDA allows at "
                      f"most {MAX_THREADS}")
        for t, limit in zip(k.threads, MAX_BLOCK_DIMS):
            if t > limit:
                self.fail(f"threads={k.threads}: a block dim of {t} exceeds {limit}")
        if k.producer_threads and (k.producer_threads % 128 or len(k.threads) != 1
                                   or k.num_threads % 128
                                   or k.num_threads + k.producer_threads > MAX_THREADS):
            self.fail(f"producer_threads={k.producer_threads}: a producer is whole warpgroups "
                      "(multiples of 128) after a 1-D block of whole warpgroups, "
                      f"{MAX_THREADS} threads in all at most")
        if k.cluster is not None and (len(k.cluster) > 3 or _prod(k.cluster) > 16):
            self.fail(f"cluster={k.cluster}: at most 3 dims and 16 blocks")
        for axis, (g, limit) in enumerate(zip(k.grid, MAX_GRID_DIMS)):
            self.expr(g, vars_, bufs)
            if not N.is_int(g.dtype):
                self.fail("grid extents must be integers")
            # 0 and extents past CUDA's gridDim limits pass, as TileLang compiles them: the
            # launcher refuses such a grid at each call (TileLang's launch fails there too)
            if isinstance(g, N.Const) and g.value < 0:
                self.fail(f"grid extent {g.value} along {'xyz'[axis]} is negative (CUDA's range "
                          f"is 1..{limit}; 0 and extents past it compile, and each call raises)")
        self.safe_values(k, vars_, bufs)
        self.l2_hit_ratios(k, bufs)
        for v, g in zip(k.block_vars, k.grid):
            self.name(v.name, "block variable")
            if v.dtype not in N.DIM_DTYPES or v.dtype != g.dtype:
                self.fail(f"block variable '{v.name}' is {v.dtype}; a block index has its grid "
                          f"extent's dtype ({g.dtype}), int32 or int64")
            vars_[v.name] = v
        self.scope, self.in_ws = k, False
        self.body(k.body, vars_, bufs)
        self.replicated_atomics(k)

    def replicated_atomics(self, k: N.KernelScope) -> None:
        """TileLang spreads a kernel's tile ops and T.Parallel loops over ``threadIdx.x``
        alone (its LowerTileOp binds the thread variable of threadIdx.x): with
        ``threads=(x, y[, z])`` every y/z row of the block runs them again.  Loads and stores
        come out the same either way (each row writes the same values); an atomic does not:
        TileLang adds y x z times where tilecute, which spreads them over all the block's
        threads once, adds once.  So those atomics are refused, naming the statement."""
        if _prod(k.threads[1:]) <= 1:
            return
        from .visitor import walk_nodes, walk_stmts

        why = (f"the block has threads={k.threads}: TileLang runs tile ops and T.Parallel loops "
               "on threadIdx.x alone, every threadIdx.y/z row repeating them, so its atomics "
               f"there count {_prod(k.threads[1:])} times where tilecute's (spread over all the "
               "block's threads) count once; write the atomic per thread (outside T.Parallel, "
               "indexed by T.get_thread_binding(0/1/2)) or use a 1-D block")
        for s in walk_stmts(k.body):
            if isinstance(s, N.AtomicAdd) and (s.dst.extents is not None
                                               or isinstance(s.value, N.Region)):
                self.stmt = s
                self.fail(f"a tile atomic (T.atomic_{s.op} of a region): {why}")
            if isinstance(s, N.For) and s.kind == "parallel":
                for t in walk_nodes(s.body):
                    if isinstance(t, N.AtomicAdd) or \
                            isinstance(t, N.Call) and t.name in N.ATOMIC_RETURNS:
                        self.stmt = t if isinstance(t, N.Stmt) else s
                        self.fail(f"an atomic in a T.Parallel loop: {why}")

    def l2_hit_ratios(self, k: N.KernelScope, bufs) -> None:
        """T.annotate_l2_hit_ratio's pairs: global tensor parameters with a hit ratio in
        [0, 1] (what the access policy window's hitRatio takes)."""
        if not isinstance(k.l2_hit_ratios, tuple):
            self.fail(f"l2_hit_ratios must be a tuple of (tensor, ratio) pairs, got "
                      f"{k.l2_hit_ratios!r}")
        for pair in k.l2_hit_ratios:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                    and isinstance(pair[1], float)):
                self.fail(f"l2_hit_ratios holds (tensor name, float ratio) pairs, got {pair!r}")
            name, ratio = pair
            buf = bufs.get(name)
            if not isinstance(buf, N.Buffer) or buf.scope != "global" or \
                    name in self.func.workspaces or \
                    not any(isinstance(p, N.Buffer) and p.name == name for p in self.func.params):
                self.fail(f"T.annotate_l2_hit_ratio names '{name}', which is no global tensor "
                          "parameter of the function (TileLang's host code sets windows over "
                          "the function's tensor parameters only; a T.alloc_global workspace "
                          "is none)")
            if not 0.0 <= ratio <= 1.0:
                self.fail(f"T.annotate_l2_hit_ratio: the hit ratio of '{name}' is {ratio!r}; an "
                          "access policy window's hitRatio is a fraction in [0, 1]")

    def has_safe_value(self, name: str) -> bool:
        """Whether an out-of-bounds read of tensor ``name`` gives a safe value here: the
        kernel's, or an enclosing T.sblock scope's."""
        return name in dict(self.scope.safe_values) or any(name in s for s in self.scoped_safe)

    def safe_values(self, k: N.KernelScope, vars_, bufs) -> None:
        """T.annotate_safe_value's pairs: global tensor parameters, each once, with values
        of the symbols and scalar parameters (what is in scope at the kernel's start)."""
        self.safe_value_pairs(k.safe_values, vars_, bufs)

    def safe_value_pairs(self, pairs, vars_, bufs) -> None:
        """A kernel's or a T.sblock scope's (SafeValueScope) safe values."""
        from .visitor import walk_nodes

        if not isinstance(pairs, tuple):
            self.fail(f"safe_values must be a tuple of (tensor, value) pairs, got {pairs!r}")
        seen = set()
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                self.fail(f"safe_values holds (tensor name, value) pairs, got {pair!r}")
            name, value = pair
            buf = bufs.get(name)
            if not isinstance(buf, N.Buffer) or buf.scope != "global":
                self.fail(f"T.annotate_safe_value names '{name}', which is no global tensor "
                          "parameter of the function")
            if name in seen:
                self.fail(f"T.annotate_safe_value gives '{name}' two values")
            seen.add(name)
            self.expr(value, vars_, bufs)
            if any(isinstance(x, (N.Load, N.Call)) for x in walk_nodes(value)):
                self.fail(f"T.annotate_safe_value: the value for '{name}' reads memory or calls "
                          "a function; it is a constant or an expression of the symbols and "
                          "scalar parameters")
            if value.dtype not in DTYPES or value.dtype in CODED:
                self.fail(f"T.annotate_safe_value: the value for '{name}' is {value.dtype}")

    def body(self, stmts, vars_, bufs):
        vars_, bufs = dict(vars_), dict(bufs)
        for s in stmts:
            self.stmt = s
            self.one(s, vars_, bufs)

    def narrow_dtype_statement(self, s, bufs) -> None:
        """float4_e2m1fn (two to a byte) and float8_e8m0fnu (MX scale factors) buffers are
        loaded, stored, copied, filled and cast; the tile ops that compute on their
        elements (or, for FP4, move them by TMA) are refused by name (sm_90 has no FP4 MMA,
        TMA and the reductions no 4-bit element type; CUDA's __nv_fp8_e8m0, TileLang's
        fp8_e8_t, has no arithmetic: TileLang's CUDA for them does not compile)."""
        refused = _NARROW_REFUSALS.get(type(s))
        if refused is None:
            return
        operands = _NARROW_OPERANDS[type(s)](s)
        for dtype, what in refused.items():
            if any(isinstance(x, N.Expr) and not isinstance(x, N.Load) and x.dtype == dtype
                   or bufs.get(_operand_name(x)) is not None
                   and bufs[_operand_name(x)].dtype == dtype for x in operands):
                self.fail(f"{what} (a {dtype} operand)")

    def one(self, s, vars_, bufs):
        if isinstance(s, N.TILE_OPS + (N.TmaCopy,)):
            self.narrow_dtype_statement(s, bufs)
        if isinstance(s, N.For):
            if s.kind not in N.LOOP_KINDS:
                self.fail(f"unknown loop kind {s.kind!r}")
            if s.copy_instruction not in N.NEST_COPY_INSTRUCTIONS:
                self.fail(f"copy_instruction={s.copy_instruction!r}: a T.copy nest is \"cp_async\", "
                          "\"sync\", \"async\" (T.async_copy's) or \"\" (the passes choose)")
            if s.unroll_factor and (s.kind != "unrolled" or not isinstance(s.unroll_factor, int)
                                    or isinstance(s.unroll_factor, bool) or s.unroll_factor < 0):
                self.fail(f"unroll_factor={s.unroll_factor!r}: an unrolled loop's hint, an int >= 1 "
                          f"(0: unrolled completely), not on a {s.kind} loop")
            if s.vectorized is not False and (s.vectorized is not True or s.kind != "unrolled"):
                self.fail(f"vectorized={s.vectorized!r} on a {s.kind} loop: T.vectorized's flag, "
                          "True only on an unrolled loop")
            if s.loads_last and (s.kind != "pipelined" or s.num_stages < 2 or not all(
                    isinstance(b, str) for b in s.loads_last)):
                self.fail(f"loads_last={s.loads_last!r} on a {s.kind} loop of {s.num_stages} "
                          "stages: the shared buffers whose copies a pipelined loop of 2 stages "
                          "or more issues after the rest of a step")
            if not isinstance(s.var, N.Var):
                self.fail(f"a loop variable is a Var, got {type(s.var).__name__}")
            self.expr(s.start, vars_, bufs)
            self.expr(s.extent, vars_, bufs)
            self.integer(s.num_stages, "num_stages")
            self.integer(s.vector_width, "vector_width")
            if s.kind == "pipelined" and s.num_stages < 1:
                self.fail("T.Pipelined needs num_stages >= 1")
            if isinstance(s.extent, N.Const) and s.extent.value < (1 if s.kind == "parallel" else 0):
                self.fail(f"a {s.kind} loop over {s.extent.value} iterations"
                          + (" (T.Parallel needs at least one)" if s.kind == "parallel" else ""))
            if s.warp_specialize is not None and s.kind != "pipelined":
                self.fail("warp_specialize is a T.Pipelined option")
            if s.loop_layout is not None and (s.kind != "parallel" or
                                              not _loop_layout_ok(s.loop_layout)):
                self.fail("loop_layout is a T.Parallel loop's blocked (threads, vector >= 1) or "
                          f"replicated layout, got {s.loop_layout!r} on a {s.kind} loop")
            if s.stage_base is not None:
                self.fail("stage_base is the warp-specialization pass's (a pipelined loop run "
                          "again by an outer loop), not an input")
            if s.fill_stage is not None:
                self.fail("fill_stage is the cp.async pipelining pass's (a nest filling a "
                          "later stage of a multi-buffered tile), not an input")
            self.name(s.var.name, "loop variable")
            if not N.is_int(s.start.dtype) or not N.is_int(s.extent.dtype):
                self.fail("loop bounds must be integers")
            inner = dict(vars_)
            inner[s.var.name] = s.var
            self.body(s.body, inner, bufs)
        elif isinstance(s, N.If):
            self.expr(s.cond, vars_, bufs)
            self.boolean(s.cond, "an if condition")
            self.body(s.then, vars_, bufs)
            self.body(s.orelse, vars_, bufs)
        elif isinstance(s, N.While):
            self.expr(s.cond, vars_, bufs)
            self.boolean(s.cond, "a while condition")
            self.body(s.body, vars_, bufs)
        elif isinstance(s, N.SafeValueScope):
            if not isinstance(s.name, str):
                self.fail(f"a T.sblock's name is a string, got {s.name!r}")
            if not s.values:
                self.fail("a SafeValueScope holds at least one (tensor, value) pair")
            self.safe_value_pairs(s.values, vars_, bufs)
            self.scoped_safe.append({name for name, _ in s.values})
            try:
                self.body(s.body, vars_, bufs)
            finally:
                self.scoped_safe.pop()
        elif isinstance(s, N.WarpGroups):
            self.warp_groups(s)
            self.in_ws = True
            try:
                self.body(s.body, vars_, bufs)
            finally:
                self.in_ws = False
        elif isinstance(s, N.Scan):
            src, dst = self.buffer(s.src, bufs), self.buffer(s.dst, bufs)
            fn = {"sum": "T.cumsum", "max": "T.cummax"}.get(s.kind)
            self.static_shapes(fn or "T.cumsum", (src, dst))
            if fn is None:
                self.fail(f"unknown scan {s.kind!r}; expected one of {', '.join(N.SCAN_KINDS)}")
            if src.scope not in ("shared", "fragment") or dst.scope not in ("shared", "fragment"):
                self.fail(f"{fn} scans shared or fragment buffers ('{src.name}' is {src.scope}, "
                          f"'{dst.name}' is {dst.scope})")
            if tuple(src.shape) != tuple(dst.shape) or src.dtype != dst.dtype:
                self.fail(f"{fn}: '{dst.name}' must have the shape and dtype of '{src.name}'")
            if not isinstance(s.dim, int) or not 0 <= s.dim < src.ndim:
                self.fail(f"{fn} over dim {s.dim} of '{src.name}', which has {src.ndim} dims")
        elif isinstance(s, N.SegmentReduce):
            self.fail("T.reduce_segments is the accumulator views pass's decision, not an input")
        elif isinstance(s, N.CombineRows):
            self.fail("T.combine_rows is the deferred row sums pass's decision, not an input")
        elif isinstance(s, N.FinalizeReducer):
            if s.buffer not in self.reducers:
                self.fail(f"T.finalize_reducer: '{s.buffer}' is not a T.alloc_reducer buffer")
            if s.scratch and self.buffer(s.scratch, bufs).scope != "shared":
                self.fail(f"reducer scratch '{s.scratch}' must be a shared buffer")
        elif isinstance(s, N.ThreadAllReduce):
            self.thread_allreduce(s, vars_, bufs)
        elif isinstance(s, N.Im2Col):
            img, col = self.buffer(s.img, bufs), self.buffer(s.col, bufs)
            if img.scope != "global" or img.ndim != 4:
                self.fail(f"T.im2col reads a 4-d NHWC global tensor; '{img.name}' is a "
                          f"{img.ndim}-d {img.scope} buffer")
            if col.scope not in ("shared", "fragment") or col.ndim != 2 or col.dtype != img.dtype:
                self.fail(f"T.im2col writes a 2-d shared or fragment tile of '{img.name}''s dtype; "
                          f"'{col.name}' is a {col.ndim}-d {col.scope} {col.dtype} buffer")
            for e in (s.nhw_step, s.c_step):
                self.expr(e, vars_, bufs)
                if not N.is_int(e.dtype):
                    self.fail("T.im2col's nhw_step and c_step are integers")
            for name in ("kernel", "stride", "dilation"):
                self.integer(getattr(s, name), f"T.im2col's {name}", 1)
            self.integer(s.pad, "T.im2col's pad", 0)
        elif isinstance(s, N.Let):
            self.expr(s.value, vars_, bufs)
            if s.value.dtype != s.var.dtype:
                self.fail(f"let '{s.var.name}': value has dtype {s.value.dtype}, variable "
                          f"{s.var.dtype}")
            if s.within is not None:
                self.expr(s.within, vars_, bufs)
                if not (N.is_int(s.var.dtype) and N.is_int(s.within.dtype)):
                    self.fail(f"let '{s.var.name}': 'within' bounds an integer variable by an "
                              f"integer, not {s.var.dtype} by {s.within.dtype}")
            self.name(s.var.name, "variable")
            vars_[s.var.name] = s.var
        elif isinstance(s, N.Store):
            buf = self.buffer(s.buffer, bufs)
            if len(s.indices) != buf.ndim:
                self.fail(f"'{buf.name}' has {buf.ndim} dims but the store gives "
                          f"{len(s.indices)} indices")
            for i in s.indices:
                self.expr(i, vars_, bufs)
                if not N.is_int(i.dtype):
                    self.fail(f"index of '{buf.name}' has dtype {i.dtype}, expected an integer")
            self.expr(s.value, vars_, bufs)
            if s.value.dtype != buf.dtype:
                self.fail(f"storing a {s.value.dtype} value into '{buf.name}' of dtype {buf.dtype}")
        elif isinstance(s, N.Evaluate):
            self.expr(s.value, vars_, bufs)
        elif isinstance(s, N.SetMaxNReg):
            self.integer(s.count, "T.set_max_nreg's count")
            if not (24 <= s.count <= 256 and s.count % 8 == 0):
                self.fail(f"T.set_max_nreg({s.count}, ...): the count must be a multiple of 8 "
                          "from 24 to 256")
        elif isinstance(s, N.Allocate):
            b = s.buffer
            if not isinstance(b, N.Buffer):
                self.fail(f"an allocation holds a Buffer, got {type(b).__name__}")
            self.dtype(b.dtype, f"buffer '{b.name}'")
            if not isinstance(s.view_of, str):
                self.fail(f"buffer '{b.name}': view_of names a buffer, got {s.view_of!r}")
            if s.address is not None:
                self.address_view(s, vars_, bufs)
            elif s.view_of:
                self.view(s, vars_, bufs)
            elif b.scope not in ("shared", "fragment", "local"):
                self.fail(f"buffer '{b.name}': allocations are shared, fragment or local")
            if (not s.view_of or b.scope != "global") and s.address is None:
                if not isinstance(b.shape, tuple) or not b.shape:
                    self.fail(f"buffer '{b.name}': allocation shapes are positive constants")
                launch_sized = b.scope == "shared" and not s.view_of
                for d in b.shape:
                    if isinstance(d, N.Const):
                        self.dim(d, f"buffer '{b.name}'", vars_)
                    elif not launch_sized:
                        self.fail(f"buffer '{b.name}': allocation shapes are positive constants")
                    else:  # sized at launch (TileLang's dynamic shared memory)
                        self.expr(d, self.host_vars, bufs)
                        if not N.is_int(d.dtype) or any(isinstance(x, N.Load)
                                                        for x in walk_nodes(d)):
                            self.fail(f"buffer '{b.name}': a shared buffer sized at launch has "
                                      "integer dims of the function's symbols and scalar "
                                      f"parameters, got {d!r}")
                if not all(isinstance(d, N.Const) for d in b.shape) and s.stages != 1:
                    self.fail(f"buffer '{b.name}': a shared buffer sized at launch has one "
                              "stage")
            self.integer(s.stages, f"buffer '{b.name}': stages", 1)
            if s.layout is not None and s.layout.kind == "mbarrier" and \
                    (b.scope != "shared" or b.dtype != "uint64" or b.ndim != 1 or s.layout.threads < 1):
                self.fail(f"buffer '{b.name}': an mbarrier array is a 1-d shared uint64 buffer "
                          "with an arrive count >= 1 (T.alloc_barrier)")
            if s.layout is not None and s.layout.kind in ("row_major", "swizzled", "tma_swizzled") \
                    and b.scope != "shared":
                self.fail(f"buffer '{b.name}': layout {s.layout.kind} is a shared-memory layout; "
                          f"'{b.name}' is a {b.scope} buffer")
            if s.layout is not None and s.layout.flat and s.layout.kind != "tma_swizzled":
                self.fail(f"buffer '{b.name}': flat=True belongs to a tma_swizzled layout")
            if s.layout is not None and s.layout.kind == "tma_swizzled" and \
                    s.layout.swizzle not in (32, 64, 128):
                self.fail(f"buffer '{b.name}': a tma_swizzled layout swizzles 32, 64 or 128 bytes, "
                          f"not {s.layout.swizzle}")
            if s.stages < 1 or (s.stages > 1 and b.scope != "shared"):
                self.fail(f"buffer '{b.name}': only shared buffers have stages (got {s.stages})")
            self.name(b.name, "buffer")
            bufs[b.name] = b
            if s.layout is not None and s.layout.kind == "mbarrier":
                self.barriers.add(b.name)
            if s.reducer:
                if b.scope != "fragment" or s.reducer not in N.REDUCER_OPS or \
                        s.reducer in N.BITWISE_REDUCE_KINDS and not N.is_int(b.dtype):
                    self.fail(f"buffer '{b.name}': a reducer is a fragment combined by sum, max "
                              f"or min, or bitand, bitor or bitxor on integers (got a {b.dtype} "
                              f"{b.scope} buffer, op {s.reducer!r})")
                self.reducers.add(b.name)
        elif isinstance(s, N.TmaCopy):
            if s.multicast:
                self.fail("T.tma_copy(multicast=...) is the multicast pass's decision (from the "
                          "kernel's cluster), not an input: give T.Kernel(..., cluster=...)")
            if not s.wait_read:
                self.fail("T.tma_copy(wait_read=False) is the barrier pass's decision, not an "
                          "input")
            self.region(s.src, vars_, bufs)
            self.region(s.dst, vars_, bufs)
            scopes = (bufs[s.src.buffer].scope, bufs[s.dst.buffer].scope)
            if scopes not in (("global", "shared"), ("shared", "global")):
                self.fail(f"T.tma_copy copies global -> shared or shared -> global, not "
                          f"{scopes[0]} -> {scopes[1]}")
            if s.reduce:
                self.tma_reduce(s, bufs)
            if scopes[0] == "global" and s.barrier is None:
                self.fail("T.tma_copy from global memory needs barrier= (an mbarrier element "
                          "the copy arrives on)")
            if scopes[0] == "global" and self.has_safe_value(s.src.buffer):
                self.fail(f"T.tma_copy from '{s.src.buffer}', which has a T.annotate_safe_value: "
                          "TMA fills the elements out of bounds with zeros, not the safe value; "
                          f"copy it with T.copy (tilecute keeps copies from '{s.src.buffer}' off "
                          "TMA)")
            if scopes[0] == "shared" and s.barrier is not None:
                self.fail("T.tma_copy to global memory takes no barrier (it waits for itself)")
            if s.leader_threads < 0 or s.leader_threads % 32:
                self.fail(f"T.tma_copy leader_scope_threads={s.leader_threads}: a positive "
                          "multiple of the warp size (32)")
            if s.leader_threads and scopes[0] == "shared":
                self.fail("T.tma_copy(leader_scope_threads=...) of a store: tilecute issues a "
                          "TMA store from one thread of the block (or thread region), which "
                          "waits for it")
            if s.barrier is not None:
                self.barrier_ref(s.barrier, vars_, bufs)
            if s.stage is not None:
                self.expr(s.stage, vars_, bufs)
        elif isinstance(s, N.ClusterCopy):
            self.region(s.src, vars_, bufs)
            self.region(s.dst, vars_, bufs)
            self.expr(s.block, vars_, bufs)
            if not N.is_int(s.block.dtype):
                self.fail("T.copy_cluster(dst_block=...): the block's rank is an integer")
            if bufs[s.src.buffer].scope != "shared" or bufs[s.dst.buffer].scope != "shared":
                self.fail("T.copy_cluster(dst_block=...) copies a shared region into a shared "
                          "buffer of another block")
            if s.src.extents is None or s.dst.extents is None:
                self.fail("T.copy_cluster(dst_block=...): both regions carry their extents")
            if s.barrier is not None:
                self.barrier_ref(s.barrier, vars_, bufs)
        elif isinstance(s, (N.MBarrierArrive, N.MBarrierWait)):
            if isinstance(s, N.MBarrierArrive) and s.cluster:
                self.fail("T.mbarrier_arrive(cluster=...) is the multicast pass's decision, not "
                          "an input")
            self.barrier_ref(s.barrier, vars_, bufs)
            if isinstance(s, N.MBarrierWait):
                self.expr(s.parity, vars_, bufs)
                if not N.is_int(s.parity.dtype):
                    self.fail("the parity of T.mbarrier_wait_parity must be an integer")
            elif s.block is not None:
                if s.cp_async or s.cluster:
                    self.fail("T.mbarrier_arrive(bar, cta_id): a remote arrive is a plain arrive")
                self.expr(s.block, vars_, bufs)
                if not N.is_int(s.block.dtype):
                    self.fail("the cta_id of T.mbarrier_arrive must be an integer")
        elif isinstance(s, N.Copy):
            self.region(s.src, vars_, bufs)
            self.region(s.dst, vars_, bufs)
            if s.instruction not in ("", N.ASYNC_COPY) + N.COPY_INSTRUCTIONS:
                self.fail(f"T.copy prefer_instruction={s.instruction!r}: expected one of "
                          f"{', '.join(map(repr, N.COPY_INSTRUCTIONS))}")
            if s.instruction == "tma" and s.disable_tma:
                self.fail('T.copy prefer_instruction="tma" conflicts with disable_tma=True')
            if s.loop_layout is not None and (s.instruction == "tma" or
                                              not _loop_layout_ok(s.loop_layout)):
                self.fail("T.copy's loop_layout is a blocked (threads, vector >= 1) or "
                          f"replicated layout of a copy the threads run (not TMA), got "
                          f"{s.loop_layout!r} with prefer_instruction={s.instruction!r}")
            if s.instruction == "tma" and self.has_safe_value(s.src.buffer):
                self.fail(f'T.copy prefer_instruction="tma" from \'{s.src.buffer}\', which has a '
                          "T.annotate_safe_value: TMA fills the elements out of bounds with "
                          "zeros, not the safe value")
        elif isinstance(s, N.Fill):
            self.region(s.dst, vars_, bufs)
            self.expr(s.value, vars_, bufs)
        elif isinstance(s, N.Clear):
            self.buffer(s.buffer, bufs)
        elif isinstance(s, N.Gemm):
            for name in (s.a, s.b, s.c):
                self.buffer(name, bufs)
            self.static_shapes("T.gemm", [bufs[n] for n in (s.a, s.b, s.c)])
            if self.buffer(s.c, bufs).scope != "fragment":
                self.fail(f"T.gemm accumulates into a fragment; '{s.c}' is {bufs[s.c].scope}")
            if s.stage is not None:
                self.expr(s.stage, vars_, bufs)
            if isinstance(s.clear_accum, N.Expr):
                self.expr(s.clear_accum, vars_, bufs)
                if s.clear_accum.dtype != "bool":
                    self.fail(f"T.gemm's clear_accum is a bool, got {s.clear_accum.dtype}")
            if s.wgmma_only and s.wg_wait != N.NO_WAIT:
                self.fail(f"T.wgmma_gemm never waits: its wg_wait is NO_WAIT ({N.NO_WAIT}), "
                          f"got {s.wg_wait}")
            if s.wg_wait < N.NO_WAIT:
                self.fail(f"T.gemm's wg_wait is a count of batches >= 0 or NO_WAIT "
                          f"({N.NO_WAIT}), got {s.wg_wait}")
            for name, part, what in ((s.a, s.a_part, "A"), (s.b, s.b_part, "B")):
                if not part:
                    continue
                if bufs[name].scope != "shared" or len(part) != 2 or any(
                        not isinstance(n, int) or n <= 0 for _, n in part):
                    self.fail(f"T.gemm's {what} is part of '{name}': (first, count) of the last "
                              "two dims of a shared buffer, constant positive counts")
                for st, _ in part:
                    self.expr(st, vars_, bufs)
            for name, index, what in ((s.a, s.a_index, "A"), (s.b, s.b_index, "B")):
                if not index:
                    continue
                buf = bufs[name]
                if buf.scope != "shared" or buf.ndim != len(index) + 2:
                    self.fail(f"T.gemm's {what} is matrix {len(index)} leading index(es) into "
                              f"'{name}', which must be a shared buffer of {len(index) + 2} dims "
                              f"(it is {buf.scope} with {buf.ndim})")
                for i in index:
                    self.expr(i, vars_, bufs)
                    if not N.is_int(i.dtype):
                        self.fail(f"T.gemm's {what} indexes '{name}' with {i.dtype}, not an integer")
        elif isinstance(s, N.NamedBarrier):
            self.expr(s.barrier_id, vars_, bufs)
            if s.threads <= 0 or s.threads % 32:
                self.fail(f"a named barrier counts whole warps; {s.threads} threads")
        elif isinstance(s, N.WarpSync):
            if s.mask is not None:
                self.expr(s.mask, vars_, bufs)
                if s.mask.dtype != "uint32":
                    self.fail(f"T.sync_warp's mask is a uint32, got {s.mask.dtype}")
        elif isinstance(s, N.WaitWgmma):
            if not isinstance(s.pending, int) or s.pending < 0:
                self.fail(f"T.wait_wgmma takes a count of batches >= 0, got {s.pending!r}")
            if s.after is not None:
                b = self.buffer(s.after, bufs)
                if b.scope != "fragment" or b.dtype != "float32":
                    self.fail(f"T.wait_wgmma's after= names a float32 fragment, got "
                              f"{b.scope} {b.dtype} '{s.after}'")
        elif isinstance(s, N.DevicePrint):
            if not isinstance(s.msg, str) or not isinstance(s.buffer, str):
                self.fail("T.print's msg and buffer name are strings")
            for e in (s.value, s.index):
                if e is not None:
                    self.expr(e, vars_, bufs)
            if (s.buffer != "") != (s.index is not None) or (s.buffer and s.value is None):
                self.fail("T.print of a buffer element names the buffer, the index and the value")
        elif isinstance(s, N.DeviceAssert):
            if not isinstance(s.msg, str):
                self.fail("T.device_assert's msg is a string")
            self.expr(s.cond, vars_, bufs)
            self.boolean(s.cond, "T.device_assert's condition")
        elif isinstance(s, N.Reduce):
            if not s.sync_after:
                self.fail(f"T.reduce_{s.kind}(sync_after=False) is the barrier pass's decision, "
                          "not an input")
            if s.partial:
                self.fail(f"T.reduce_{s.kind}(partial=True) is the deferred row sums pass's "
                          "decision, not an input")
            src, dst = self.buffer(s.src, bufs), self.buffer(s.dst, bufs)
            self.static_shapes(f"T.reduce_{s.kind}", (src, dst))
            if s.kind not in N.REDUCE_KINDS:
                self.fail(f"unknown reduction {s.kind!r}")
            if s.kind in N.BITWISE_REDUCE_KINDS and not N.bitwise_reduce_takes(s.kind, src.dtype):
                self.fail(f"T.reduce_{s.kind} takes integers{'' if s.kind == 'bitand' else ' or bool'}; "
                          f"'{src.name}' is {src.dtype}")
            if s.nan_propagate and (s.kind not in ("max", "min", "absmax") or
                                    not N.is_float(dst.dtype)):
                self.fail(f"T.reduce_{s.kind}({s.src}, {s.dst}): nan_propagate is for max, min "
                          f"and absmax into a float dtype (dst is {dst.dtype})")
            if not 0 <= s.dim < src.ndim:
                self.fail(f"reduce over dim {s.dim} of '{src.name}', which has {src.ndim} dims")
            # TileLang's scopes: shared or fragment into shared or fragment; local into local
            tile = ("shared", "fragment")
            if not (src.scope in tile and dst.scope in tile or
                    src.scope == "local" and dst.scope == "local"):
                self.fail(f"T.reduce_{s.kind}: invalid buffer scopes: '{src.name}' is a {src.scope} "
                          f"buffer and '{dst.name}' a {dst.scope} one (a shared or fragment buffer "
                          "reduces into a shared or fragment one, a local buffer into a local one)")
            want = src.shape[:s.dim] + src.shape[s.dim + 1:] or (N.Const(1, "int32"),)
            keep = src.shape[:s.dim] + (N.Const(1, "int32"),) + src.shape[s.dim + 1:]
            if tuple(dst.shape) not in (tuple(want), tuple(keep)):
                shape = lambda b: tuple(int(d.value) for d in b)  # noqa: E731
                self.fail(f"T.reduce_{s.kind}: reducing '{src.name}' {shape(src.shape)} over dim "
                          f"{s.dim} gives shape {shape(want)} (or {shape(keep)}), but "
                          f"'{dst.name}' has shape {shape(dst.shape)}")
            if s.scratch and self.buffer(s.scratch, bufs).scope != "shared":
                self.fail(f"reduce scratch '{s.scratch}' must be a shared buffer")
        elif isinstance(s, N.Barrier):
            pass
        elif isinstance(s, N.TmaStoreWait):
            if not s.program:
                self.fail("T.tma_store_wait() is placed by the barrier pass (after the TMA "
                          "stores whose wait it defers), not an input (the program's own is "
                          "TmaStoreWait(program=True))")
            self.integer(s.count, "T.tma_store_wait(count)", 0)
            if not isinstance(s.read, bool):
                self.fail(f"T.tma_store_wait(read={s.read!r}) takes a bool")
        elif isinstance(s, N.TmaStoreArrive):
            pass
        elif isinstance(s, N.AsyncCopyWait):
            self.fail("T.cp_async_wait() is placed by the barrier pass (before a statement "
                      "that hands on shared writes of cp.async copies) and the cp.async "
                      "pipelining pass, not an input")
        elif isinstance(s, N.ClusterSync):
            if s.kind not in N.CLUSTER_SYNC_KINDS:
                self.fail(f"ClusterSync kind {s.kind!r}: one of {', '.join(N.CLUSTER_SYNC_KINDS)}")
        elif isinstance(s, N.AtomicAdd):
            if s.op not in N.ATOMIC_OPS:
                self.fail(f"unknown atomic op {s.op!r}; expected one of {', '.join(N.ATOMIC_OPS)}")
            dst_dtype = self.buffer(s.dst.buffer, bufs).dtype
            if s.op in ("or", "store"):
                if self.buffer(s.dst.buffer, bufs).scope not in ("global", "shared") or \
                        isinstance(s.value, N.Region):
                    self.fail(f"T.atomic_{s.op} writes one element of a global tensor or a "
                              "shared buffer")
                orders = N.ATOMIC_STORE_ORDERS if s.op == "store" else N.MEMORY_ORDERS
                if s.order not in orders:
                    self.fail(f"T.atomic_{s.op}: memory order {s.order!r}; expected one of "
                              f"{', '.join(orders)}")
                if s.op == "or" and dst_dtype not in ("int32", "uint32", "int64", "uint64") or \
                        s.op == "store" and DTYPES[dst_dtype].bits not in (32, 64):
                    self.fail(f"T.atomic_{s.op} into '{s.dst.buffer}' ({dst_dtype}): "
                              + ("a 32- or 64-bit integer" if s.op == "or" else "32 or 64 bits"))
            elif s.order not in N.MEMORY_ORDERS:
                self.fail(f"T.atomic_{s.op}: memory order {s.order!r}; expected one of "
                          f"{', '.join(N.MEMORY_ORDERS)}")
            if s.op in ("max", "min") and dst_dtype not in N.ATOMIC_MINMAX_DTYPES:
                self.fail(f"T.atomic_{s.op} into '{s.dst.buffer}' ({dst_dtype}): atomic max/min "
                          f"take {', '.join(N.ATOMIC_MINMAX_DTYPES)}")
            if s.op == "add" and dst_dtype not in N.ATOMIC_RETURN_DTYPES["add"]:
                # (8- and 16-bit integers, fp8, bool: no red/atom.add of that width here)
                self.fail(f"T.atomic_add into '{s.dst.buffer}' ({dst_dtype}): atomic add takes "
                          f"{', '.join(N.ATOMIC_RETURN_DTYPES['add'])}")
            self.region(s.dst, vars_, bufs)
            if isinstance(s.value, N.Region):
                self.region(s.value, vars_, bufs)
            else:
                self.expr(s.value, vars_, bufs)
        elif isinstance(s, N.KernelScope):
            self.fail("T.Kernel blocks cannot nest")
        else:
            self.fail(f"unknown statement {type(s).__name__}")

    def warp_groups(self, s: N.WarpGroups) -> None:
        """``T.ws(g, ...)``: one consecutive run of the 1-D block's 128-thread warpgroups;
        with ``span``, one run of whole warps (no warpgroups)."""
        k = self.scope
        if s.span:
            lo_hi = s.span
            if s.groups or len(lo_hi) != 2 or not all(
                    isinstance(x, int) and not isinstance(x, bool) for x in lo_hi) or \
                    not 0 <= lo_hi[0] < lo_hi[1] or any(x % WARP for x in lo_hi):
                self.fail(f"a thread region spans whole warps: threads (lo, hi), multiples of "
                          f"{WARP} with lo < hi, and no warpgroups; got span={lo_hi!r}, "
                          f"groups={s.groups!r}")
            if self.in_ws:
                self.fail("thread regions cannot nest")
            if len(k.threads) != 1 or lo_hi[1] > k.num_threads:
                self.fail(f"the thread region {lo_hi[0]}..{lo_hi[1] - 1} is not inside the 1-D "
                          f"block's threads={k.threads}")
            if k.producer_threads:
                self.fail("thread regions and a compiler-made producer warpgroup "
                          "(producer_threads) cannot share a kernel")
            return
        groups = s.groups
        if not isinstance(groups, tuple) or not groups or not all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in groups):
            self.fail(f"T.ws takes warpgroup indices (ints >= 0), got {groups!r}")
        if list(groups) != list(range(groups[0], groups[0] + len(groups))):
            self.fail(f"T.ws{groups}: tilecute's regions are one consecutive run of warpgroups, "
                      "in order")
        if self.in_ws:
            self.fail("T.ws regions cannot nest")
        if len(k.threads) != 1 or k.num_threads % N.WARPGROUP_THREADS:
            self.fail(f"T.ws needs a 1-D block of whole warpgroups ({N.WARPGROUP_THREADS} "
                      f"threads each); the kernel has threads={k.threads}")
        if (groups[-1] + 1) * N.WARPGROUP_THREADS > k.num_threads:
            self.fail(f"T.ws{groups}: warpgroup {groups[-1]} is past the block's "
                      f"{k.num_threads // N.WARPGROUP_THREADS} warpgroup(s) "
                      f"(threads={k.num_threads})")
        if k.producer_threads:
            self.fail("T.ws regions and a compiler-made producer warpgroup (producer_threads) "
                      "cannot share a kernel")

    def boolean(self, e, what: str) -> None:
        if e.dtype != "bool":
            self.fail(f"{what} must be bool, got {e.dtype}")

    def buffer(self, name, bufs) -> N.Buffer:
        if name not in bufs:
            self.fail(f"buffer '{name}' is not defined here")
        return bufs[name]

    def tma_reduce(self, s: N.TmaCopy, bufs) -> None:
        """A TMA reduce-store (``T.atomic_add(G[region], s, use_tma=True)``): shared to
        global, adding elements of a dtype ``cp.reduce.async.bulk.tensor .add`` takes."""
        if s.reduce != "add":
            self.fail(f"TmaCopy.reduce is 'add' (T.atomic_add(..., use_tma=True)) or empty, "
                      f"not {s.reduce!r}")
        src, dst = bufs[s.src.buffer], bufs[s.dst.buffer]
        if src.scope != "shared":
            self.fail("T.atomic_add(..., use_tma=True) adds a shared tile into global memory, "
                      f"not a {src.scope} buffer into a {dst.scope} one")
        if src.dtype != dst.dtype or dst.dtype not in TMA_REDUCE_ADD_TYPES:
            self.fail(f"T.atomic_add(..., use_tma=True) adds {', '.join(TMA_REDUCE_ADD_TYPES)} "
                      f"into the same dtype, not {src.dtype} into {dst.dtype}")

    def barrier_ref(self, r: N.Region, vars_, bufs):
        self.region(r, vars_, bufs)
        if r.buffer not in self.barriers or r.extents is not None:
            self.fail(f"'{r.buffer}' is not an element of a T.alloc_barrier array")

    def region(self, r: N.Region, vars_, bufs):
        buf = self.buffer(r.buffer, bufs)
        if len(r.starts) != buf.ndim or (r.extents is not None and len(r.extents) != buf.ndim):
            self.fail(f"region of '{buf.name}' names {len(r.starts)} dims, the buffer has {buf.ndim}")
        for e in r.starts + (r.extents or ()):
            self.expr(e, vars_, bufs)

    def thread_allreduce(self, s: N.ThreadAllReduce, vars_, bufs) -> None:
        """TVM's thread all-reduce: n values, n result elements (local buffers of the
        values' dtypes), a combiner of n left and n right variables of those dtypes
        returning n values of them, thread dims of the kernel (each once)."""
        what = "T.tvm_thread_allreduce"
        n = len(s.values)
        if not n or not (len(s.lhs) == len(s.rhs) == len(s.results) == len(s.identity) ==
                         len(s.dsts) == n):
            self.fail(f"{what}: {n} value(s) need as many left and right variables, combiner "
                      "results, identity values and result buffers")
        if self.in_ws:
            self.fail(f"{what} inside a warpgroup region: every thread of the block takes part")
        threads = tuple(self.kernel_scope.threads) if getattr(self, "kernel_scope", None) else ()
        if not s.dims or list(s.dims) != sorted(set(s.dims)) or \
                any(not isinstance(d, int) or not 0 <= d < 3 for d in s.dims):
            self.fail(f"{what}: reduced thread dims {s.dims} must be distinct dims 0..2, sorted")
        if threads and any(d >= len(threads) or threads[d] <= 1 for d in s.dims):
            self.fail(f"{what}: reduced thread dims {s.dims} must be dims of the kernel's "
                      f"threads {threads} of extent > 1")
        if s.op and (s.op not in N.THREAD_ALLREDUCE_OPS or n != 1):
            self.fail(f"{what}: op {s.op!r} is one of {N.THREAD_ALLREDUCE_OPS} on one value")
        inner = dict(vars_)
        for v, r, i, d in zip(s.values, s.lhs + s.rhs, s.identity, s.dsts):
            self.expr(v, vars_, bufs)
            self.expr(i, vars_, bufs)
            buf = self.buffer(d, bufs)
            if buf.scope != "local" or buf.dtype != v.dtype or i.dtype != v.dtype:
                self.fail(f"{what}: result '{d}' must be a local buffer of its value's dtype "
                          f"{v.dtype} (it is a {buf.scope} {buf.dtype} buffer), and so must the "
                          f"identity {i.dtype}")
        for a, b, v in zip(s.lhs, s.rhs, s.values):
            if a.dtype != v.dtype or b.dtype != v.dtype:
                self.fail(f"{what}: combiner variables '{a.name}', '{b.name}' must have their "
                          f"value's dtype {v.dtype}")
            inner[a.name], inner[b.name] = a, b
        for r, v in zip(s.results, s.values):
            self.expr(r, inner, bufs)
            if r.dtype != v.dtype:
                self.fail(f"{what}: a combiner result has dtype {r.dtype}, its value {v.dtype}")
        if s.scratch and (len(s.scratch) != n or any(
                self.buffer(b, bufs).scope != "shared" or self.buffer(b, bufs).dtype != v.dtype
                for b, v in zip(s.scratch, s.values))):
            self.fail(f"{what}: scratch {list(s.scratch)} must be one shared buffer per value, "
                      "of its dtype")

    def expr(self, e, vars_, bufs):
        if not isinstance(e, N.Expr):
            self.fail(f"expected an expression, got {type(e).__name__}")
        self.dtype(e.dtype, f"expression {type(e).__name__}")
        if isinstance(e, N.Var):
            if e.name not in vars_:
                self.fail(f"name '{e.name}' is not defined here: no loop, let or block variable "
                          "in scope has it, and no parameter binds it (a T.dynamic symbol is "
                          "bound by a tensor parameter's shape or strides, or is a scalar "
                          "parameter)")
            if vars_[e.name].dtype != e.dtype:
                self.fail(f"'{e.name}' is used as {e.dtype} but declared {vars_[e.name].dtype}")
        elif isinstance(e, N.Const):
            self.const(e)
        elif isinstance(e, (N.BinOp, N.Cmp)):
            if e.op not in (N.BINOPS if isinstance(e, N.BinOp) else N.CMPOPS):
                self.fail(f"unknown operator {e.op!r}")
            coded = [d for d in (e.a.dtype, e.b.dtype) if d in CODED]
            if coded:
                wide = "int32" if coded[0] in INTS4 else "float32"
                self.fail(f"{e.op} of {coded[0]} values: {coded[0]} values are loaded, "
                          f"stored, selected and cast; cast them to {wide} (T.cast(x, "
                          f"'{wide}')) to compute with them")
            self.expr(e.a, vars_, bufs)
            self.expr(e.b, vars_, bufs)
            if e.a.dtype != e.b.dtype:
                self.fail(f"operands of {e.op} have dtypes {e.a.dtype} and {e.b.dtype}")
            if isinstance(e, N.BinOp) and e.dtype != e.a.dtype:
                self.fail(f"{e.op} of {e.a.dtype} operands is declared {e.dtype}")
            if isinstance(e, N.BinOp) and e.op == "div" and N.is_int(e.dtype):
                self.fail("integer division is written floordiv (the IR's div is for floats)")
        elif isinstance(e, N.Logic):
            for a in e.args:
                self.expr(a, vars_, bufs)
                self.boolean(a, f"an operand of {e.op}")
        elif isinstance(e, N.Not):
            self.expr(e.a, vars_, bufs)
            self.boolean(e.a, "the operand of not")
        elif isinstance(e, N.Cast):
            self.expr(e.value, vars_, bufs)
            # (int4 / uint4 and bool convert as integers do: nonzero, 0 / 1)
            coded = [d for d in (e.dtype, e.value.dtype) if d in CODED and d not in INTS4]
            if coded and "bool" in (e.dtype, e.value.dtype):
                self.fail(f"a cast between {coded[0]} and bool (compare the float32 value "
                          "instead)")
        elif isinstance(e, N.Select):
            for a in (e.cond, e.a, e.b):
                self.expr(a, vars_, bufs)
            self.boolean(e.cond, "a select condition")
            if not e.a.dtype == e.b.dtype == e.dtype:
                self.fail(f"select branches have dtypes {e.a.dtype} and {e.b.dtype}, "
                          f"the select {e.dtype}")
        elif isinstance(e, N.Load):
            buf = self.buffer(e.buffer, bufs)
            if len(e.indices) != buf.ndim:
                self.fail(f"'{buf.name}' has {buf.ndim} dims but is indexed with {len(e.indices)}")
            if e.dtype != buf.dtype:
                self.fail(f"a load of '{buf.name}' ({buf.dtype}) is declared {e.dtype}")
            for i in e.indices:
                self.expr(i, vars_, bufs)
                if not N.is_int(i.dtype):
                    self.fail(f"index of '{buf.name}' has dtype {i.dtype}, expected an integer")
        elif isinstance(e, N.Call):
            if e.name not in N.INTRINSICS:
                self.fail(f"unknown intrinsic {e.name!r}")
            if len(e.args) != N.INTRINSICS[e.name]:
                self.fail(f"{e.name} takes {N.INTRINSICS[e.name]} arguments, got {len(e.args)}")
            for a in e.args:
                self.expr(a, vars_, bufs)
            coded = [d for d in [a.dtype for a in e.args] + [e.dtype] if d in CODED]
            if coded:
                self.fail(f"{e.name} of a {coded[0]} value: {coded[0]} values are "
                          "loaded, stored, selected and cast; cast to "
                          f"{'int32' if coded[0] in INTS4 else 'float32'} first")
            if e.name in N.SHUFFLES and not (N.is_int(e.args[2].dtype) and N.is_int(e.args[3].dtype)
                                             and N.is_int(e.args[1].dtype)):
                self.fail(f"T.{e.name}: the lane, width and mask are integers")
            if e.name in N.SHUFFLES and e.dtype != e.args[0].dtype:
                self.fail(f"T.{e.name} of a {e.args[0].dtype} value is declared {e.dtype}")
            if e.name in N.WARP_REDUCTIONS:
                t = e.args[0].dtype
                if e.dtype != t or t == "bool" or DTYPES[t].bits > 64:
                    self.fail(f"T.{e.name} takes a number of at most 64 bits and is of its dtype; "
                              f"got {t} -> {e.dtype}")
                if e.name in ("warp_reduce_bitand", "warp_reduce_bitor") and not N.is_int(t):
                    self.fail(f"T.{e.name} takes an integer, got {t}")
            if e.name == "ptx_cp_async":
                dst, src, n = e.args
                if not (isinstance(dst, N.Load) and isinstance(src, N.Load) and
                        isinstance(n, N.Const) and self.buffer(dst.buffer, bufs).scope == "shared"
                        and self.buffer(src.buffer, bufs).scope == "global"
                        and dst.dtype == src.dtype and
                        n.value * DTYPES[dst.dtype].bytes in (4, 8, 16)):
                    self.fail("ptx_cp_async takes a shared element, a global element of its "
                              "dtype and a count of 4, 8 or 16 bytes of them")
            if e.name == "ptx_wait_group" and not (
                    isinstance(e.args[0], N.Const) and e.args[0].dtype == "int32" and
                    e.args[0].value >= 0):
                self.fail("ptx_wait_group takes an int32 Const >= 0 (the groups left pending)")
            if e.name == "atomic_load":
                src, order = e.args
                if not (isinstance(src, N.Load) and self.buffer(src.buffer, bufs).scope in ("global", "shared")
                        and e.dtype == src.dtype and DTYPES[e.dtype].bits in (32, 64)
                        and isinstance(order, N.Const) and order.value in
                        [N.MEMORY_ORDERS.index(o) for o in N.ATOMIC_LOAD_ORDERS]):
                    self.fail("atomic_load takes a 32- or 64-bit element of a global tensor or a "
                              "shared buffer and a "
                              "load memory order's id, and is of the element's dtype")
            if e.name in N.ATOMIC_RETURNS:
                dst, value, order = e.args
                op = e.name[len("atomic_"):-len("_ret")]
                if not (isinstance(order, N.Const) and order.dtype == "int32"
                        and 0 <= order.value < len(N.MEMORY_ORDERS)):
                    self.fail(f"{e.name}'s memory order is an int32 Const id in MEMORY_ORDERS")
                if not (isinstance(dst, N.Load)
                        and self.buffer(dst.buffer, bufs).scope in ("global", "shared")
                        and e.dtype == dst.dtype == value.dtype
                        and e.dtype in N.ATOMIC_RETURN_DTYPES[op]):
                    self.fail(f"{e.name} takes an element of a global tensor or a shared buffer of "
                              f"{', '.join(N.ATOMIC_RETURN_DTYPES[op])} and a value of its "
                              "dtype, and is of that dtype")
            if e.name in N.WARP_VOTES + N.BLOCK_VOTES + ("elect_one_sync",) and \
                    e.args[-1].dtype != "bool":
                self.fail(f"{e.name} takes a bool predicate, got {e.args[-1].dtype}")
            if e.name in N.WARP_VOTES and e.args[0].dtype != "uint32":
                self.fail(f"{e.name} takes a uint32 lane mask, got {e.args[0].dtype}")
            self.intrinsic_types(e)
            if e.name == "thread_idx" and not (isinstance(e.args[0], N.Const)
                                               and e.args[0].value in (0, 1, 2)):
                self.fail("thread_idx takes a constant axis 0, 1 or 2")
        else:
            self.fail(f"unknown expression {type(e).__name__}")

    def intrinsic_types(self, e: N.Call) -> None:
        """The dtype rules of the math intrinsics (what the frontend's helpers build)."""
        dtypes = [a.dtype for a in e.args]
        if e.name in N.FLOAT_MATH and not (N.is_float(e.dtype) and set(dtypes) == {e.dtype}):
            self.fail(f"{e.name} takes float arguments of its result's dtype; got "
                      f"{', '.join(dtypes)} -> {e.dtype}")
        if e.name in N.FLOAT_PREDICATES and not (N.is_float(dtypes[0]) and e.dtype == "bool"):
            self.fail(f"{e.name} takes a float and is a bool; got {dtypes[0]} -> {e.dtype}")
        if e.name in ("truncdiv", "truncmod", "popcount", "bitwise_not") and not (
                N.is_int(e.dtype) and set(dtypes) == {e.dtype}):
            self.fail(f"{e.name} takes integer arguments of its result's dtype; got "
                      f"{', '.join(dtypes)} -> {e.dtype}")
        if e.name == "clz" and not (N.is_int(dtypes[0]) and DTYPES[dtypes[0]].bits in (32, 64)
                                    and e.dtype == "int32"):
            self.fail(f"clz takes a 32- or 64-bit integer and is an int32; got {dtypes[0]} -> "
                      f"{e.dtype}")
        if e.name == "ldexp" and not (N.is_float(e.dtype) and dtypes == [e.dtype, "int32"]):
            self.fail(f"ldexp takes a float of its result's dtype and an int32 exponent; got "
                      f"{', '.join(dtypes)} -> {e.dtype}")
        if e.name == "nextafter" and e.dtype not in ("float32", "float64"):
            self.fail(f"nextafter is float32 or float64, declared {e.dtype}")
        if e.name == "fast_rcp" and e.dtype != "float32":
            self.fail(f"fast_rcp is a float32, declared {e.dtype}")
        if e.name in N.IEEE_FORMS:
            rounded = e.name != "ieee_frsqrt"
            operands = e.args[:-1] if rounded else e.args
            mode = e.args[-1] if rounded else None
            if not (e.dtype in N.IEEE_DTYPES and all(a.dtype == e.dtype for a in operands)):
                self.fail(f"{e.name} takes operands of its result's dtype, one of "
                          f"{', '.join(N.IEEE_DTYPES)}; got {', '.join(dtypes)} -> {e.dtype}")
            if rounded and not (isinstance(mode, N.Const) and mode.dtype == "int32"
                                and mode.value in range(len(N.IEEE_ROUNDINGS))):
                self.fail(f"{e.name}'s last argument is its rounding mode's index in "
                          f"{N.IEEE_ROUNDINGS} (an int32 Const)")
            elif rounded and mode.value != 0 and e.dtype in ("float16", "bfloat16"):
                self.fail(f"{e.name} on {e.dtype} rounds to nearest only")
            if e.name == "ieee_frsqrt" and e.dtype == "float64":
                self.fail("ieee_frsqrt has no float64 form")
        if e.name == "ffs" and not (N.is_int(dtypes[0]) and DTYPES[dtypes[0]].bits in (32, 64)
                                    and e.dtype == "int32"):
            self.fail(f"ffs takes a 32- or 64-bit integer and is an int32; got {dtypes[0]} -> "
                      f"{e.dtype}")
        if e.name == "fns" and not (dtypes == ["uint32", "int32", "int32"] and e.dtype == "uint32"):
            self.fail(f"fns takes (uint32 mask, int32 base, int32 offset) and is a uint32; got "
                      f"{', '.join(dtypes)} -> {e.dtype}")
        if e.name in N.WARP_MATCHES and not (
                dtypes[1] == "uint32" and e.dtype == "uint32" and dtypes[0] in
                ("int32", "uint32", "int64", "uint64", "float32", "float64")):
            self.fail(f"{e.name} takes a 32/64-bit integer or float value and a uint32 lane mask, "
                      f"and is a uint32; got {', '.join(dtypes)} -> {e.dtype}")
        if e.name == "rng_init" and not all(t == "int64" for t in dtypes):
            self.fail(f"rng_init takes the int64 seed, subsequence and offset; got {', '.join(dtypes)}")
        if e.name == "rng_rand" and e.dtype != "uint32" or \
                e.name in ("rng_uniform", "rng_normal") and e.dtype not in ("float32", "float64"):
            self.fail(f"{e.name} is declared {e.dtype}: rng_rand is a uint32, rng_uniform and "
                      "rng_normal a float32 or float64")
        want = {"vote_any": "int32", "vote_all": "int32", "vote_ballot": "uint64",
                "activemask": "uint64", "warp_activemask": "uint32", "elect_one_sync": "bool",
                **{name: "int32" for name in N.BLOCK_VOTES}}.get(e.name)
        if want and e.dtype != want:
            self.fail(f"{e.name} is a {want}, declared {e.dtype}")
        if e.name == "reinterpret" and not (
                DTYPES[dtypes[0]].bits == DTYPES[e.dtype].bits and "bool" not in (dtypes[0], e.dtype)):
            self.fail(f"reinterpret keeps the width of its argument; got {dtypes[0]} -> {e.dtype}")


    def depth(self) -> None:
        """Refuse IR nested deeper than :data:`MAX_DEPTH` before anything recurses over
        it (this walk keeps its own stack)."""
        stack = [(self.func, 0)]
        while stack:
            x, d = stack.pop()
            if isinstance(x, tuple):
                stack.extend((y, d) for y in x)
            elif dataclasses.is_dataclass(x) and not isinstance(x, (type, N.Loc)):
                if d > MAX_DEPTH:
                    self.fail(f"the IR nests deeper than {MAX_DEPTH} levels (a {type(x).__name__} "
                              "node at that depth); split deep expressions with lets")
                stack.extend((getattr(x, f.name), d + 1) for f in dataclasses.fields(x)
                             if f.name != "loc")


class _StaticBounds:
    """Accesses that the loop, block and thread ranges prove leave their buffer.

    On-chip buffers (shared, fragment, local) have no bounds checks: an index past one
    reads or overwrites its neighbours (TileLang only warns, and by default not even that),
    so an unguarded access whose index is *known* to reach past a static dim is refused.
    Known means exactly: the index is built from constants and independent loop, block and
    thread variables, each used once, with +, -, * by a constant, floordiv by a positive
    constant, min/max with a constant (:func:`_exact_range`), and the statement runs for
    every value of them (not under an ``if``, a ``while``, a select's branch or a later
    operand of ``and``/``or``).  A global access is checked only where its index is a
    constant: TileLang guards every other one (its LegalizeSafeMemoryAccess; tilecute's
    code generator likewise).  An index proved negative is refused on any buffer: the
    frontend has counted TileLang's negative indices from the end of the dim
    (language.negative_index, TileLang's LegalizeNegativeIndex), so one still negative here
    reaches before the dim's start (``A[-65]`` of 64, or a JSON producer's)."""

    def __init__(self, v: "_Validator"):
        self.v = v
        self.bufs: dict[str, N.Buffer] = {p.name: p for p in v.func.params
                                          if isinstance(p, N.Buffer)}

    def run(self):
        for k in self.v.func.kernels:
            self.v.stmt = k
            env: dict[str, tuple] = {}
            for var, g in zip(k.block_vars, k.grid):
                env[var.name] = (0, g.value - 1) if isinstance(g, N.Const) else (0, None)
            for axis, t in enumerate(k.threads):
                env[f"thread_idx{axis}"] = (0, t - 1 + (k.producer_threads if axis == 0 else 0))
            self.body(k.body, env, False)

    def body(self, stmts, env, guarded):
        env = dict(env)
        for s in stmts:
            self.v.stmt = s
            self.one(s, env, guarded)

    def one(self, s, env, guarded):
        if isinstance(s, N.For):
            self.expr(s.start, env, guarded)
            self.expr(s.extent, env, guarded)
            start, n = s.start, s.extent
            inner = dict(env)
            # a start of other variables would tie the loop variable to them
            known = isinstance(start, N.Const) and isinstance(n, N.Const) and n.value >= 1
            inner[s.var.name] = (start.value, start.value + n.value - 1) if known else (None, None)
            self.body(s.body, inner, guarded)
        elif isinstance(s, N.If):
            self.expr(s.cond, env, guarded)
            self.body(s.then, env, True)
            self.body(s.orelse, env, True)
        elif isinstance(s, N.While):
            self.expr(s.cond, env, True)
            self.body(s.body, env, True)
        elif isinstance(s, N.SafeValueScope):
            self.body(s.body, env, guarded)
        elif isinstance(s, N.WarpGroups):  # a part of the block runs the body
            self.body(s.body, env, True)
        elif isinstance(s, N.Let):
            self.expr(s.value, env, guarded)
            env[s.var.name] = (None, None)  # may depend on other variables: not independent
        elif isinstance(s, N.Allocate):
            self.bufs[s.buffer.name] = s.buffer
        elif isinstance(s, N.Store):
            for i in s.indices:
                self.expr(i, env, guarded)
            self.expr(s.value, env, guarded)
            self.access(s.buffer, s.indices, env, guarded)
        else:
            for f in dataclasses.fields(s):
                x = getattr(s, f.name)
                for y in (x if isinstance(x, tuple) else (x,)):
                    if isinstance(y, N.Expr):
                        self.expr(y, env, guarded)
                    elif isinstance(y, N.Region):
                        self.region(y, env, guarded)

    def expr(self, e, env, guarded):
        if isinstance(e, N.Load):
            for i in e.indices:
                self.expr(i, env, guarded)
            self.access(e.buffer, e.indices, env, guarded)
        elif isinstance(e, N.Select):
            self.expr(e.cond, env, guarded)
            self.expr(e.a, env, True)
            self.expr(e.b, env, True)
        elif isinstance(e, N.Logic):
            for n, a in enumerate(e.args):
                self.expr(a, env, guarded or n > 0)
        else:
            for x in vars(e).values():
                for y in (x if isinstance(x, tuple) else (x,)):
                    if isinstance(y, N.Expr):
                        self.expr(y, env, guarded)

    def access(self, name, indices, env, guarded):
        buf = self.bufs.get(name)
        if buf is None or len(indices) != buf.ndim:
            return
        for axis, (idx, d) in enumerate(zip(indices, buf.shape)):
            lo, hi = _exact_range(idx, env)
            if hi is not None and hi < 0:
                self.v.fail(f"index `{_expr_text(idx)}` of '{name}' is negative ({_values(lo, hi)}) "
                            f"along dim {axis}, whose extent is {_expr_text(d)}: a negative index "
                            "counts from the end of the dim (TileLang's LegalizeNegativeIndex; the "
                            "frontend has already rewritten it to extent + index), and this one "
                            "still reaches before the dim's start")
            if guarded or not isinstance(d, N.Const) or lo is None or hi is None:
                continue
            if buf.scope == "global" and any(isinstance(x, (N.Var, N.Load, N.Call))
                                             for x in _walk(idx)):
                continue  # guarded where it runs (a global access of unknown index)
            if lo < 0 or hi >= d.value:
                self.v.fail(f"index `{_expr_text(idx)}` of the {buf.scope} buffer '{name}' "
                            f"takes {_values(lo, hi)} along dim {axis}, whose extent is {d.value} "
                            f"(indices 0..{d.value - 1}); {_past(buf)}")

    def region(self, r: N.Region, env, guarded):
        for e in r.starts + (r.extents or ()):
            self.expr(e, env, guarded)
        buf = self.bufs.get(r.buffer)
        if buf is None or r.extents is None or buf.scope == "global" or guarded or \
                len(r.starts) != buf.ndim:
            return
        for axis, (start, ext, d) in enumerate(zip(r.starts, r.extents, buf.shape)):
            lo, hi = _exact_range(start, env)
            if not (isinstance(ext, N.Const) and isinstance(d, N.Const)) or lo is None or hi is None:
                continue
            if lo < 0 or hi + ext.value > d.value:
                self.v.fail(f"the region of the {buf.scope} buffer '{r.buffer}' along dim {axis} "
                            f"starts at `{_expr_text(start)}` ({_values(lo, hi)}) and spans "
                            f"{ext.value}, reaching index {hi + ext.value - 1 if lo >= 0 else lo}, but "
                            f"the dim's extent is {d.value}; {_past(buf)}")


def _past(buf: N.Buffer) -> str:
    return (f"a {buf.scope} buffer has no bounds checks, so the access would reach memory "
            "past it" if buf.scope != "global" else "a constant index is not bounds-checked "
            "(TileLang guards only computed ones), so the access would reach memory past the "
            "tensor")


def _values(lo: int, hi: int) -> str:
    return f"the value {lo}" if lo == hi else f"values {lo}..{hi}"


def _expr_text(e) -> str:
    from .printer import expr_str

    try:
        return expr_str(e)
    except Exception:  # a malformed node must not hide the real error
        return type(e).__name__


def _exact_range(e, env) -> tuple:
    """``e``'s exact [lo, hi] over independent variables of known ranges (``env``), or
    (None, None) where interval reasoning could over-estimate it: a variable used twice
    (``i - i``), a mod, a product of variables.  Every value in between is taken."""
    names = [x.name for x in _walk(e) if isinstance(x, N.Var)]
    names += [f"thread_idx{x.args[0].value}" for x in _walk(e) if isinstance(x, N.Call)
              and x.name == "thread_idx" and isinstance(x.args[0], N.Const)]
    if len(names) != len(set(names)):
        return None, None
    return _range(e, env)


def _range(e, env) -> tuple:
    unknown = (None, None)
    if isinstance(e, N.Const) and N.is_int(e.dtype):
        return int(e.value), int(e.value)
    if isinstance(e, N.Var):
        return env.get(e.name, unknown)
    if isinstance(e, N.Call) and e.name == "thread_idx" and isinstance(e.args[0], N.Const):
        return env.get(f"thread_idx{e.args[0].value}", unknown)
    if isinstance(e, N.Cast) and N.is_int(e.dtype) and N.is_int(e.value.dtype):
        return _range(e.value, env)
    if not isinstance(e, N.BinOp) or not N.is_int(e.dtype):
        return unknown
    (al, ah), (bl, bh) = _range(e.a, env), _range(e.b, env)
    if None in (al, ah, bl, bh):
        return unknown
    const_b = bl == bh
    if e.op == "add":
        return al + bl, ah + bh
    if e.op == "sub":
        return al - bh, ah - bl
    if e.op == "mul" and (const_b or al == ah):
        c, (lo, hi) = (bl, (al, ah)) if const_b else (al, (bl, bh))
        return (lo * c, hi * c) if c >= 0 else (hi * c, lo * c)
    if e.op == "floordiv" and const_b and bl > 0:
        return al // bl, ah // bl
    if e.op == "mod" and const_b and bl > 0 and 0 <= al and ah < bl:
        return al, ah
    if e.op in ("min", "max") and (const_b or al == ah):
        f = min if e.op == "min" else max
        return f(al, bl), f(ah, bh)
    return unknown


def _walk(e):
    """``e`` and every expression inside it."""
    yield e
    for v in vars(e).values():
        if isinstance(v, N.Expr):
            yield from _walk(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, N.Expr):
                    yield from _walk(x)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def validate(func: N.PrimFunc, compiling: bool = True) -> N.PrimFunc:
    """Raise :class:`ValidationError` if ``func`` is malformed; return it otherwise.
    ``compiling=False`` (the frontend's check) takes a prim_func with no T.Kernel, as
    TileLang's ``@T.prim_func`` does; compiling one is refused."""
    v = _Validator(func, compiling)
    v.run()
    _StaticBounds(v).run()
    return func


def _loop_layout_ok(layout) -> bool:
    """A loop's map onto the threads (``For.loop_layout``, ``Copy.loop_layout``): blocked
    with threads and vector >= 1, or replicated."""
    return isinstance(layout, N.Layout) and (
        layout.kind == "replicated" or
        layout.kind == "blocked" and layout.vector >= 1 and layout.threads >= 1)
