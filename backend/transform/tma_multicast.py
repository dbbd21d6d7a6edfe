"""TMA multicast in clusters (sm_90a): in a warp-specialized kernel launched in clusters
along one grid dimension (``T.Kernel(..., cluster=(1, 2, 1))``, ``T.ClusterKernel``'s
``cluster_dims``), a TMA load whose tile is the same for every block of a cluster is
multicast: each block copies its share of the tile's boxes to all blocks of the cluster
at once, so the tile leaves L2 once per cluster rather than once per block (a GEMM
cluster of two blocks along M shares its B tiles; MLA decode's two head blocks share
their KV tiles).  The program's meaning is unchanged: each block still sees the whole
tile in its own shared memory.

The last pass (after :func:`warp_specialize.split_roles`), on the producer's loop:

- a load is multicast when its origin, the producer loop's bounds and every condition
  around the load are the same for every block of a cluster: they depend on the
  cluster's block index ``b`` only through ``b // k`` with ``k`` a multiple of the
  cluster size (clusters are aligned: a cluster's blocks share ``b // cluster``); block
  orders from ``T.use_swizzle`` and the rasterize pass walk whole clusters, so they keep
  this form.  Each block expects the whole tile on its own full barrier, as before, and
  ``c`` blocks each issue ``boxes / c`` of its boxes (a tile of fewer boxes, or a number
  that does not divide, stays per block);
- a stage a peer block writes must be free in every block of the cluster: where the
  compute threads arrived on the producer's "stage free" barriers, each warp now
  arrives once on that barrier of every block of the cluster (lane ``r`` on block
  ``r``'s, after the warp's lanes sync), and each barrier counts ``warps * c``
  arrivals;
- the kernel's mbarrier initialization is synced cluster-wide, and the kernel ends with
  ``T.cluster_sync()``, so that no block exits while a peer may still arrive on its
  barriers.

The option ``disable_tma_multicast`` keeps every load per block."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import StmtMutator, walk_stmts
from .analysis import column_slice, written_globals

# intrinsics whose value depends on their arguments alone (the same in every block)
_PURE_CALLS = set(N.FLOAT_MATH) | set(N.FLOAT_PREDICATES) | {
    "ceildiv", "fma", "abs", "truncdiv", "truncmod", "popcount", "clz", "reinterpret",
    "bitwise_not"}


class _Invariance:
    """Which expressions of a kernel are the same in every block of a cluster of
    ``size`` blocks along the grid dimension of block index ``block``."""

    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, block: str, size: int):
        self.block, self.size = block, size
        self.globals = {p.name for p in func.params if isinstance(p, N.Buffer)}
        self.written = written_globals(func, scope.body)
        self.varying: set[str] = set()
        for s in walk_stmts(scope.body):  # (names are unique: a Let's value is earlier)
            if isinstance(s, N.Let) and self.varies(s.value):
                self.varying.add(s.var.name)
            elif isinstance(s, N.For) and s.kind != "serial":
                self.varying.add(s.var.name)  # (a thread-mapped loop's index)

    def varies(self, e) -> bool:
        if isinstance(e, N.Var):
            return e.name == self.block or e.name in self.varying
        if isinstance(e, N.Const):
            return False
        if isinstance(e, N.BinOp) and e.op == "floordiv" and isinstance(e.a, N.Var) \
                and e.a.name == self.block and isinstance(e.b, N.Const) \
                and isinstance(e.b.value, int) and e.b.value % self.size == 0:
            return False  # the cluster's index along its dimension (clusters are aligned)
        if isinstance(e, N.Load):
            if e.buffer not in self.globals or e.buffer in self.written:
                return True  # a block's own data, or memory the kernel changes
            return any(self.varies(i) for i in e.indices)
        if isinstance(e, N.Call) and e.name not in _PURE_CALLS:
            return True
        if isinstance(e, N.Expr):
            return any(self.varies(v) for v in vars(e).values()
                       if isinstance(v, (N.Expr, tuple)))
        if isinstance(e, tuple):
            return any(self.varies(v) for v in e)
        return False


def _cluster_dim(scope: N.KernelScope) -> tuple[int, int] | None:
    """(grid dimension, blocks) of a cluster spread along one grid dimension, else None."""
    if scope.cluster is None:
        return None
    dims = [(d, c) for d, c in enumerate(scope.cluster) if c > 1]
    if len(dims) != 1 or dims[0][0] >= len(scope.block_vars):
        return None
    return dims[0]


def _boxes(s: N.TmaCopy, scope: N.KernelScope, shared: N.Buffer) -> int:
    """How many boxes of its descriptor the code generator moves ``s``'s tile in."""
    spec = next(d.spec for d in scope.tma_descriptors if d.name == s.desc)
    columns = column_slice(s.dst, shared, spec.swizzle)
    width = columns[0][1] if columns is not None else int(shared.shape[-1].value)
    return width // spec.box[-1]


def _kernel(func: N.PrimFunc, scope: N.KernelScope) -> N.KernelScope:
    found = _cluster_dim(scope)
    if found is None or not scope.producer_threads:
        return scope
    dim, size = found
    split = scope.body[-1]
    if not isinstance(split, N.If):  # (split_roles: the producer's branch ends the kernel)
        return scope
    inv = _Invariance(func, scope, scope.block_vars[dim].name, size)
    shared = {s.buffer.name: s.buffer for s in walk_stmts(scope.body) if isinstance(s, N.Allocate)}
    multicast: set[int] = set()  # ids of the loads that become multicast
    empty: set[str] = set()  # the "stage free" barriers of their stages
    waited = [None]  # the barrier the producer waited on last (before the loads it frees)

    def visit(body, uniform: bool) -> None:
        for s in body:
            if isinstance(s, N.TmaCopy) and s.barrier is not None and s.arrive and uniform \
                    and not inv.varies(s.src.starts) and waited[0] is not None:
                n = _boxes(s, scope, shared[s.dst.buffer])
                if n >= size and n % size == 0:
                    multicast.add(id(s))
                    empty.add(waited[0])
            elif isinstance(s, N.MBarrierWait):
                waited[0] = s.barrier.buffer
            elif isinstance(s, N.For):
                visit(s.body, uniform and not inv.varies((s.start, s.extent)))
            elif isinstance(s, N.If):
                # (the producer's one issuing thread: the same thread in every block)
                one_thread = isinstance(s.cond, N.Cmp) and s.cond.op == "eq" and \
                    isinstance(s.cond.a, N.Call) and s.cond.a.name == "thread_idx" and \
                    not inv.varies(s.cond.b)
                same = uniform and (one_thread or not inv.varies(s.cond))
                visit(s.then, same)
                visit(s.orelse, same)
    visit(split.then, True)
    threads = scope.num_threads
    counts = {s.buffer.name: s.layout.threads for s in walk_stmts(scope.body)
              if isinstance(s, N.Allocate) and s.buffer.name in empty}
    if not multicast or threads % 32 or any(c != threads for c in counts.values()):
        return scope  # (the stages are released by every compute thread, as the pass builds)

    scope = _Multicast(multicast, empty, size, threads // 32 * size).visit_kernel(scope)
    return dataclasses.replace(scope, body=scope.body + (N.ClusterSync(loc=scope.loc),))


class _Multicast(StmtMutator):
    """The loads chosen (by id) multicast to the ``size`` blocks of the cluster, and the
    stages they fill (barriers ``empty``) released in every block, one arrival per warp
    of every block (``count`` a phase)."""

    def __init__(self, loads: set[int], empty: set[str], size: int, count: int):
        self.loads, self.empty, self.size, self.count = loads, empty, size, count

    def visit_tma_copy(self, s: N.TmaCopy):
        return dataclasses.replace(s, multicast=self.size) if id(s) in self.loads else s

    def visit_m_barrier_arrive(self, s: N.MBarrierArrive):
        if s.barrier.buffer in self.empty and not s.cp_async:
            return dataclasses.replace(s, cluster=self.size)
        return s

    def visit_allocate(self, s: N.Allocate):
        if s.buffer.name in self.empty:
            return dataclasses.replace(s, layout=dataclasses.replace(s.layout,
                                                                     threads=self.count))
        return s


def multicast_tma_loads(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if options.get("disable_tma_multicast"):
        return func
    return dataclasses.replace(func, kernels=tuple(_kernel(func, k) for k in func.kernels))
