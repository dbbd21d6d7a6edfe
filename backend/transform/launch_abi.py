"""The launch ABI of a lowered function: the one structure the code generator, both
templates and the cubin check read (``tilecute.runtime.abi.LaunchABI``).

The kernel parameter list is derived here and nowhere else: every kernel of a function
takes the data pointers of the tensor arguments (in argument order), then the symbols
(int32, or int64 for TileLang's ``T.dynamic("n", "int64")``, in first-use order), then
the scalar arguments (a pointer argument, TileLang's ``p: T.ptr``, as its int64 address),
then its own TMA descriptors.
Everything else comes from what the passes recorded in the IR: the descriptors
(``KernelScope.tma_descriptors``), the shared memory (``KernelScope.shared_bytes``), the
producer warpgroup, and the alignment each tensor needs (the vector accesses the
vectorization pass chose, ``For.vectors``; TMA needs 16-byte bases), which for a tensor
at an address (``Allocate.address``, T.make_tensor) is what its pointer is assumed
aligned to: checked by the launcher for a pointer argument, a promise of the caller's for
an address read from a table.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..ir import nodes as N
from ..target import arch_at_least
from ..ir.visitor import var_names, walk_nodes, walk_stmts
from .analysis import may_pass_int32, syncs_grid
from ..ir.printer import expr_str
from ..runtime.abi import (DIM_OPS, HostAssume, KernelLaunch, KernelParam, L2Window, LaunchABI,
                           PointerArg, ScalarArg, SymbolSpec, TensorArg, affine_in, dim_symbols,
                           dim_text)
from ..runtime.dtypes import DTYPES, storage_bytes

# scalar argument dtypes a kernel parameter can carry as is
_SCALAR_PARAM_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64", "float16", "bfloat16", "float32", "float64"}
TMA_BASE_ALIGN = 16  # bytes: TMA global addresses


class LoweringError(ValueError):
    pass


@dataclass(frozen=True)
class KernelPlan:
    """Everything generation needs: the lowered function, its ABI, and per kernel scope
    the name prefix CuTe DSL gives its symbol (cubin symbol = ``f"{prefix}_{i}"``, which is
    also the ``@cute.kernel`` function's name)."""

    func: N.PrimFunc
    abi: LaunchABI
    name_prefixes: tuple[str, ...]
    arch: str
    # tensor at an address (Allocate.address) -> the bytes its pointer is assumed aligned to
    address_align: tuple[tuple[str, int], ...] = ()

    @property
    def tensor_params(self) -> list[N.Buffer]:
        return [p for p in self.func.params if isinstance(p, N.Buffer)]

    @property
    def scalar_params(self) -> list[N.Var]:
        return [p for p in self.func.params if isinstance(p, N.Var)]


def _dim(d: N.Expr):
    """An IR dim as an ABI ``Dim``: an int, a symbol's name or ``(op, Dim, Dim)``."""
    if isinstance(d, N.Const):
        return int(d.value)
    if isinstance(d, N.Var):
        return d.name
    if isinstance(d, N.BinOp) and d.op in DIM_OPS:
        return (d.op, _dim(d.a), _dim(d.b))
    if isinstance(d, N.Cast) and d.dtype == "int64":  # the launcher computes dims in int64
        return _dim(d.value)
    raise LoweringError(f"dim {d} is not an int, a symbol or an expression of them")


def _bind_divisibility(sym: N.Var, assumes) -> int:
    """The divisor the launcher checks where ``sym`` binds: its ``multiple`` less what a
    host-checked ``T.assume(N % k == 0)`` (``func.assumes``) promises, so that a call
    breaking the assume raises TileLang's "Assume: ..." RuntimeError from that check; the
    smallest ``d`` dividing the multiple whose lcm with the assumed ``k`` is still the
    multiple (both checks together are the promise)."""
    ks = [k for name, k in filter(None, map(N.assumed_divisor, assumes)) if name == sym.name]
    if not ks:
        return sym.multiple
    k = math.lcm(*ks)
    return next(d for d in range(1, sym.multiple + 1)
                if sym.multiple % d == 0 and math.lcm(d, k) % sym.multiple == 0)


def _bind_symbols(func: N.PrimFunc, args) -> list[SymbolSpec]:
    """Where each symbol is bound at launch, TileLang's way: walking the tensors' shapes
    then strides in argument order, a symbol binds at its first dim that is the plain
    symbol or, where no dim is, its first affine dim ``a * n + b`` (int ``a``, ``b``;
    the launcher solves for ``n``); every other dim naming it is checked against it.

    A tensor the caller may pass as None (``nullable``) binds a symbol only where no
    other tensor can: the tensors always given are walked first, an affine dim of one
    solving a symbol that only nullable tensors name plainly (every given dim must
    agree, so which one binds changes no call's outcome).  A symbol bound on a nullable
    tensor gets ``carriers``: its places on such tensors, the launcher binding it from
    the first one given (TileLang's cascade over the buffers carrying it)."""
    multiple = {s.name: _bind_divisibility(s, func.assumes) for s in func.symbols}
    dtype = {s.name: s.dtype for s in func.symbols}
    sites = [(i, field, d, x) for i, a in enumerate(args) if isinstance(a, TensorArg)
             for field, dims in (("shape", a.shape), ("stride", a.strides or ()))
             for d, x in enumerate(dims)]
    bound: dict[str, SymbolSpec] = {}
    # integer scalar arguments named in dims (a T.empty output's `m + 1`): known at launch
    # before any tensor, so the launcher checks those dims against them, binding nothing
    scalars = {a.name for a in args if isinstance(a, ScalarArg)}
    plain = {x for *_, x in sites if isinstance(x, str)}
    plain_given = {x for i, *_, x in sites if isinstance(x, str) and not args[i].nullable}
    for i, field, d, x in sorted(sites, key=lambda site: args[site[0]].nullable):
        if isinstance(x, str) and x not in bound and x not in scalars:
            bound[x] = SymbolSpec(x, i, field, d, multiple.get(x, 1), dtype=dtype[x])
        elif isinstance(x, tuple):
            free = [n for n in dim_symbols(x) if n not in bound and n not in scalars]
            # (solved from a tensor always given rather than bound from one that may be None)
            if len(free) == 1 and (ab := affine_in(x, free[0])) is not None and \
                    free[0] not in (plain_given if not args[i].nullable else plain):
                bound[free[0]] = SymbolSpec(free[0], i, field, d, multiple.get(free[0], 1),
                                            scale=ab[0], offset=ab[1], dtype=dtype[free[0]])
    missing = [s.name for s in func.symbols if s.name not in bound]
    if missing:
        where = [f"{args[i].name} {field}[{d}] = {dim_text(x)}" for i, field, d, x in sites
                 if isinstance(x, tuple) and set(dim_symbols(x)) & set(missing)]
        raise LoweringError(
            f"prim_func '{func.name}': symbols {missing} appear in no tensor argument's "
            "shape or strides as a plain dim or alone in an affine one (a * n + b)"
            + (f" ({'; '.join(where)})" if where else "") + ", so no launch can bind them")
    used = var_names((func.kernels, func.assumes))
    for name, spec in bound.items():
        if args[spec.arg].nullable:
            first = (spec.arg, spec.field, spec.dim)
            carriers = (first,) + tuple((i, field, d) for i, field, d, x in sites
                                        if x == name and (i, field, d) != first)
            # TileLang requires one given only of a symbol several buffers carry and
            # the body uses; a lone carrier left NULL binds it to 0
            bound[name] = dataclasses.replace(spec, carriers=carriers,
                                              required=len(carriers) > 1 and name in used)
    order = {s.name: i for i, s in enumerate(func.symbols)}
    return sorted(bound.values(), key=lambda s: order[s.name])


def _mentions(func: N.PrimFunc, name: str) -> bool:
    """Whether any kernel of ``func`` names buffer ``name`` (a load, store, region, tile
    op, view, TMA descriptor ...): any field of any node equal to the name (IR names are
    unique, so a match is a use)."""
    for n in walk_nodes(func.kernels):
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            if v == name or isinstance(v, tuple) and name in v:
                return True
    return False


def _mark_nullable(func: N.PrimFunc, args: list) -> list:
    """The tensor arguments the caller may pass as None (TileLang's unused buffer given
    NULL): those no kernel names.  The symbols they carry bind from the tensors given
    (:func:`_bind_symbols`); the launch device is the first tensor's given."""
    return [dataclasses.replace(a, nullable=True)
            if isinstance(a, TensorArg) and not a.workspace and not _mentions(func, a.name) else a
            for a in args]


def grid_cpp(e: N.Expr, func: N.PrimFunc) -> str:
    """A grid extent as a C++ expression over the launcher's ``sym_<name>`` locals (the
    symbolic dims) and ``arg_<name>`` locals (integer scalar arguments: TileLang's
    ``T.Kernel(T.ceildiv(max_seqlen_q, block_M), ...)`` with ``max_seqlen_q: T.int32``)."""
    symbols = {s.name for s in func.symbols}
    if isinstance(e, N.Const):
        return str(int(e.value))
    if isinstance(e, N.Var):
        if e.name in symbols:
            return f"sym_{e.name}"
        if any(isinstance(p, N.Var) and p.name == e.name and N.is_int(p.dtype) and
               p.dtype != "bool" for p in func.params):
            return f"arg_{e.name}"
        raise LoweringError(
            f"prim_func '{func.name}': grid extent uses '{e.name}'; grid extents may use "
            "only constants, the symbolic dims of the tensor arguments and integer scalar "
            "arguments"
        )
    if isinstance(e, N.BinOp):
        ops = {"add": "+", "sub": "-", "mul": "*"}
        a, b = grid_cpp(e.a, func), grid_cpp(e.b, func)
        if e.op in ops:
            return f"({a} {ops[e.op]} {b})"
        if e.op in ("floordiv", "min", "max"):
            return f"tc_{e.op}({a}, {b})"
        if e.op == "mod":
            return f"tc_mod({a}, {b})"
    if isinstance(e, N.Call) and e.name == "ceildiv":
        return f"tc_ceildiv({grid_cpp(e.args[0], func)}, {grid_cpp(e.args[1], func)})"
    if isinstance(e, N.Cast) and N.is_int(e.dtype):
        return grid_cpp(e.value, func)
    raise LoweringError(f"prim_func '{func.name}': grid extent {e} is not supported")


_HOST_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def assume_cpp(e: N.Expr, func: N.PrimFunc) -> str:
    """A host-evaluable condition (``PrimFunc.assumes``, ``N.is_host_condition``) as C++
    over the launcher's locals: integer parts as :func:`grid_cpp` writes them (int64,
    floor division and modulo as TileLang's), comparisons, ``&&`` / ``||`` / ``!``, bool
    scalar arguments (``arg_<name>``) and constants."""
    if isinstance(e, N.Cmp):
        return f"({assume_cpp(e.a, func)} {_HOST_CMP[e.op]} {assume_cpp(e.b, func)})"
    if isinstance(e, N.Logic):
        joint = " && " if e.op == "and" else " || "
        return "(" + joint.join(assume_cpp(a, func) for a in e.args) + ")"
    if isinstance(e, N.Not):
        return f"(!{assume_cpp(e.a, func)})"
    if e.dtype == "bool":
        if isinstance(e, N.Const):
            return "true" if e.value else "false"
        if isinstance(e, N.Var):
            return f"arg_{e.name}"
        if isinstance(e, N.Cast):
            return f"({assume_cpp(e.value, func)} != 0)"
    if isinstance(e, N.Cast) and N.is_int(e.dtype) and e.value.dtype == "bool":
        return f"static_cast<int64_t>({assume_cpp(e.value, func)})"
    return grid_cpp(e, func)


def at_address(func: N.PrimFunc) -> list[N.Allocate]:
    """The allocations of tensors at an address (``Allocate.address``, T.make_tensor), in
    kernel order."""
    return [s for k in func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate) and s.address is not None]


def tensor_alignment(func: N.PrimFunc) -> dict[str, int]:
    """Bytes each tensor argument's base must be a multiple of, from the recorded vector
    accesses, TMA descriptors and T.ptx_cp_async sources; also each tensor at an address's
    (``Allocate.address``, by its name), at least its element's size."""
    params = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    aligned: dict[str, int] = {}
    for k in func.kernels:
        views = {s.buffer.name: s for s in walk_stmts(k.body)
                 if isinstance(s, N.Allocate) and s.view_of in params}
        addressed = {s.buffer.name: s.buffer for s in walk_stmts(k.body)
                     if isinstance(s, N.Allocate) and s.address is not None}
        for name, b in addressed.items():
            aligned[name] = max(aligned.get(name, 1), DTYPES[b.dtype].bytes)
        globals_ = {**params, **addressed}
        for s in walk_stmts(k.body):
            if isinstance(s, N.For):
                for v in s.vectors:
                    if v.buffer in globals_:
                        need = storage_bytes(globals_[v.buffer].dtype, v.chunk)
                        aligned[v.buffer] = max(aligned.get(v.buffer, 1), need)
                    elif v.buffer in views:  # a global view: its base's pointer
                        view = views[v.buffer]
                        need = storage_bytes(view.buffer.dtype, v.chunk)
                        aligned[view.view_of] = max(aligned.get(view.view_of, 1), need)
            if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
                    s.value.name == "ptx_cp_async" and s.value.args[1].buffer in globals_:
                # T.ptx_cp_async: a cp.async of n elements reads n-element aligned addresses
                src, n = s.value.args[1], s.value.args[2]
                need = int(n.value) * DTYPES[globals_[src.buffer].dtype].bytes
                aligned[src.buffer] = max(aligned.get(src.buffer, 1), need)
        for d in k.tma_descriptors:
            aligned[d.tensor] = max(aligned.get(d.tensor, 1), TMA_BASE_ALIGN)
    return aligned


# the kernel parameter through which the launcher passes a T.sync_grid() barrier's word
GRID_BARRIER = "tc_grid_barrier"


def pointer_alignment(func: N.PrimFunc, addressed: list[N.Allocate],
                      aligned: dict[str, int]) -> dict[str, int]:
    """Bytes each pointer argument must be a multiple of: what the tensors at its address
    (``T.make_tensor(p, ...)``, among ``addressed``) are assumed aligned to."""
    out = {name: 1 for name in func.pointers}
    for s in addressed:
        if isinstance(s.address, N.Var) and s.address.name in out:
            out[s.address.name] = max(out[s.address.name], aligned[s.buffer.name])
    return out


def build_abi(func: N.PrimFunc, arch: str) -> KernelPlan:
    """The launch ABI of lowered ``func`` and the plan the generators render from."""
    aligned = tensor_alignment(func)
    addressed = at_address(func)
    pointer_align = pointer_alignment(func, addressed, aligned)
    args = []
    for p in func.params:
        if isinstance(p, N.Var) and p.name in func.pointers:
            args.append(PointerArg(p.name, p.dtype, pointer_align[p.name]))
        elif isinstance(p, N.Buffer):
            args.append(TensorArg(p.name, p.dtype, tuple(_dim(d) for d in p.shape),
                                  None if p.strides is None else tuple(_dim(d) for d in p.strides),
                                  aligned.get(p.name, 1),
                                  offsets_int32=may_pass_int32(p) and p.name not in func.wide_tensors,
                                  offsets_int64=p.name in func.wide_tensors,
                                  workspace=p.name in func.workspaces))
        else:
            if p.dtype not in _SCALAR_PARAM_DTYPES:
                raise LoweringError(
                    f"prim_func '{func.name}': scalar parameter '{p.name}' has dtype {p.dtype}; "
                    f"scalar parameters may be {sorted(_SCALAR_PARAM_DTYPES)}"
                )
            args.append(ScalarArg(p.name, p.dtype))
    args = _mark_nullable(func, args)
    symbols = _bind_symbols(func, args)

    params = tuple(
        [KernelParam(f"{p.name}_ptr", "pointer", p.dtype, p.name)
         for p in func.params if isinstance(p, N.Buffer)]
        + [KernelParam(s.name, "scalar", s.dtype, s.name, from_symbol=True) for s in symbols]
        + [KernelParam(p.name, "scalar", p.dtype, p.name)
           for p in func.params if isinstance(p, N.Var)]
    )
    cooperative = [syncs_grid(k.body) for k in func.kernels]
    if any(cooperative):  # T.sync_grid(): the launcher's barrier word, after the others
        params += (KernelParam(GRID_BARRIER, "grid_barrier", "uint32", ""),)
    kernels, prefixes = [], []
    for i, k in enumerate(func.kernels):
        if cooperative[i] and k.cluster is not None:
            raise LoweringError(f"{k.loc}: prim_func '{func.name}': T.sync_grid() in a kernel "
                                f"launched in clusters ({k.cluster}): tilecute launches grid "
                                "barriers cooperatively without clusters")
        if k.cluster is not None and math.prod(map(int, k.cluster)) > 1 and not arch_at_least(arch, 90):
            raise LoweringError(f"{k.loc}: prim_func '{func.name}': a kernel launched in clusters "
                                f"of {math.prod(map(int, k.cluster))} blocks (T.ClusterKernel(cluster_dims=...) / "
                                f"T.Kernel(cluster_dims=...)) needs thread block clusters, sm_90+; "
                                f"the target is {arch}")
        prefix = f"tilecute_{func.name}"
        prefixes.append(prefix)
        grid = tuple(grid_cpp(g, func) for g in k.grid) + ("1",) * (3 - len(k.grid))
        threads = (k.threads[0] + k.producer_threads,) + tuple(k.threads[1:])
        block = threads + (1,) * (3 - len(threads))
        cluster = None if k.cluster is None else tuple(k.cluster) + (1,) * (3 - len(k.cluster))
        tma = tuple(KernelParam(d.name, "tma_desc", d.dtype, d.tensor, tma=d.spec)
                    for d in k.tma_descriptors)
        launch_smem = ""
        if k.launch_shared_bytes is not None:  # shared buffers sized at launch
            if cooperative[i]:
                raise LoweringError(f"{k.loc}: prim_func '{func.name}': T.sync_grid() in a "
                                    "kernel with a shared buffer sized at launch: tilecute "
                                    "checks a cooperative grid's residency at the static "
                                    "shared memory")
            launch_smem = grid_cpp(k.launch_shared_bytes, func)
        kernels.append(KernelLaunch(f"{prefix}_{i}", grid, block, params + tma, k.shared_bytes,
                                    cluster, pdl=k.pdl, cooperative=cooperative[i],
                                    launch_smem=launch_smem))
    windows = {pair for k in func.kernels for pair in k.l2_hit_ratios}  # (the validator: one)
    l2_window = L2Window(*windows.pop()) if windows else None
    assumes = tuple(HostAssume(assume_cpp(a, func), expr_str(a)) for a in func.assumes)
    abi = LaunchABI(func.name, tuple(args), tuple(symbols), tuple(kernels), l2_window=l2_window,
                    assumes=assumes)
    return KernelPlan(func, abi, tuple(prefixes), arch,
                      tuple((s.buffer.name, aligned[s.buffer.name]) for s in addressed))
