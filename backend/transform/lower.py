"""Lower a validated PrimFunc to a :class:`KernelPlan`: the function after the passes,
and the launch ABI that the CuTe DSL codegen and both templates render from.

The kernel parameter list is derived here and nowhere else: every kernel of a function
takes the data pointers of the tensor arguments (in argument order), then the symbols
(int32, in first-use order), then the scalar arguments, then its own TMA descriptors.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as N
from ..ir.validate import validate
from ..options import check_options
from ..runtime.dtypes import DTYPES
from ..runtime.abi import KernelLaunch, KernelParam, LaunchABI, ScalarArg, SymbolSpec, TensorArg
from .gemm import plan_gemm
from .layout import infer_layouts
from .sync import insert_barriers
from .tileops import lower_tile_ops
from .tma import plan_tma, split_roles, stage_bytes
from .vectorize import plan_vectorization

SHARED_ALIGN = 128  # bytes; every shared buffer starts at a multiple (swizzles and cp.async)
TMA_SWIZZLE_ALIGN = 1024  # bytes; a TMA-swizzled buffer (and each of its stages) starts at one
SHARED_LIMIT = 227 * 1024  # the most dynamic shared memory a Hopper block can opt into

# scalar argument dtypes a kernel parameter can carry as is
_SCALAR_PARAM_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64", "float32", "float64"}


class LoweringError(ValueError):
    pass


@dataclass(frozen=True)
class KernelPlan:
    """Everything generation needs: the lowered function, its ABI, and per kernel scope
    the CuTe DSL function name and its name prefix (cubin symbol = ``f"{prefix}_{i}"``)."""

    func: N.PrimFunc
    abi: LaunchABI
    kernel_names: tuple[str, ...]
    name_prefixes: tuple[str, ...]
    arch: str

    @property
    def tensor_params(self) -> list[N.Buffer]:
        return [p for p in self.func.params if isinstance(p, N.Buffer)]

    @property
    def scalar_params(self) -> list[N.Var]:
        return [p for p in self.func.params if isinstance(p, N.Var)]


def _dim(d: N.Expr):
    return d.value if isinstance(d, N.Const) else d.name


def grid_cpp(e: N.Expr, func: N.PrimFunc) -> str:
    """A grid extent as a C++ expression over the launcher's ``sym_<name>`` locals."""
    symbols = {s.name for s in func.symbols}
    if isinstance(e, N.Const):
        return str(int(e.value))
    if isinstance(e, N.Var):
        if e.name not in symbols:
            raise LoweringError(
                f"prim_func '{func.name}': grid extent uses '{e.name}'; grid extents may use "
                "only constants and the symbolic dims of the tensor arguments"
            )
        return f"sym_{e.name}"
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


def lower(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None) -> KernelPlan:
    """Run the passes for ``arch`` with compile ``options`` (:data:`OPTIONS`)."""
    options = check_options(options)
    validate(func)
    func = plan_gemm(func, arch, wgmma=not options.get("disable_wgmma", False))
    func, descriptors = plan_tma(func, arch, auto=not options.get("disable_tma", False))
    func = lower_tile_ops(func)
    func = infer_layouts(func)
    func, aligned = plan_vectorization(func, arch)
    for d in (d for ds in descriptors for d in ds):
        aligned[d.tensor] = max(aligned.get(d.tensor, 1), 16)  # TMA needs 16-byte bases
    func = insert_barriers(func)
    func = split_roles(func)
    symbols: list[SymbolSpec] = []
    seen: set[str] = set()
    args = []
    for i, p in enumerate(func.params):
        if isinstance(p, N.Buffer):
            for field, dims in (("shape", p.shape), ("stride", p.strides or ())):
                for d, x in enumerate(dims):
                    if isinstance(x, N.Var) and x.name not in seen:
                        seen.add(x.name)
                        symbols.append(SymbolSpec(x.name, i, field, d, x.multiple))
            args.append(TensorArg(p.name, p.dtype, tuple(_dim(d) for d in p.shape),
                                  None if p.strides is None else tuple(_dim(d) for d in p.strides),
                                  aligned.get(p.name, 1)))
        else:
            if p.dtype not in _SCALAR_PARAM_DTYPES:
                raise LoweringError(
                    f"prim_func '{func.name}': scalar parameter '{p.name}' has dtype {p.dtype}; "
                    f"scalar parameters may be {sorted(_SCALAR_PARAM_DTYPES)}"
                )
            args.append(ScalarArg(p.name, p.dtype))
    missing = [s.name for s in func.symbols if s.name not in seen]
    if missing:
        raise LoweringError(f"prim_func '{func.name}': symbols {missing} appear in no tensor "
                            "argument's shape or strides, so no launch can bind them")
    order = {s.name: i for i, s in enumerate(func.symbols)}
    symbols.sort(key=lambda s: order[s.name])

    params = tuple(
        [KernelParam(f"{p.name}_ptr", "pointer", p.dtype, p.name)
         for p in func.params if isinstance(p, N.Buffer)]
        + [KernelParam(s.name, "scalar", "int32", s.name, from_symbol=True) for s in symbols]
        + [KernelParam(p.name, "scalar", p.dtype, p.name)
           for p in func.params if isinstance(p, N.Var)]
    )
    kernels, names, prefixes = [], [], []
    for i, k in enumerate(func.kernels):
        prefix = f"tilecute_{func.name}"
        names.append(f"{func.name}_kernel{i}")
        prefixes.append(prefix)
        grid = tuple(grid_cpp(g, func) for g in k.grid) + ("1",) * (3 - len(k.grid))
        threads = (k.threads[0] + k.producer_threads,) + tuple(k.threads[1:])
        block = threads + (1,) * (3 - len(threads))
        cluster = None if k.cluster is None else tuple(k.cluster) + (1,) * (3 - len(k.cluster))
        smem = shared_bytes(k)
        if smem > SHARED_LIMIT:
            raise LoweringError(f"prim_func '{func.name}': kernel {i} needs {smem} bytes of shared "
                                f"memory; a block can have at most {SHARED_LIMIT}")
        tma = tuple(KernelParam(d.name, "tma_desc", d.dtype, d.tensor, tma=d.spec)
                    for d in descriptors[i])
        kernels.append(KernelLaunch(f"{prefix}_{i}", grid, block, params + tma, smem, cluster))
    abi = LaunchABI(func.name, tuple(args), tuple(symbols), tuple(kernels))
    return KernelPlan(func, abi, tuple(names), tuple(prefixes), arch)


def shared_allocs(scope: N.KernelScope) -> list[N.Allocate]:
    """The shared allocations of a kernel, in order (shared allocations stand at the top
    level of the kernel body)."""
    return [s for s in scope.body if isinstance(s, N.Allocate) and s.buffer.scope == "shared"]


def shared_stride(alloc: N.Allocate) -> int:
    """Bytes from one stage of a shared buffer to the next (its alignment divides it)."""
    align = shared_align(alloc)
    return -(-stage_bytes(alloc.buffer) // align) * align


def shared_align(alloc: N.Allocate) -> int:
    swizzled = alloc.layout is not None and alloc.layout.kind == "tma_swizzled"
    return TMA_SWIZZLE_ALIGN if swizzled else SHARED_ALIGN


def shared_offsets(scope: N.KernelScope) -> tuple[dict[str, int], int]:
    """Byte offset of each shared buffer in the block's dynamic shared memory, and the
    total; the codegen carves the buffers at these offsets.  A buffer with ``stages``
    holds that many copies, :func:`shared_stride` apart."""
    offsets, total = {}, 0
    for a in shared_allocs(scope):
        align = shared_align(a)
        total = -(-total // align) * align
        offsets[a.buffer.name] = total
        total += shared_stride(a) * (a.stages - 1) + stage_bytes(a.buffer)
    return offsets, total


def shared_bytes(scope: N.KernelScope) -> int:
    return shared_offsets(scope)[1]
