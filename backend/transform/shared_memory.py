"""Shared-memory layout: each shared buffer of a kernel gets its place in the block's
dynamic shared memory (``Allocate.slot``), and the kernel its total
(``KernelScope.shared_bytes``), checked against what a block of the target may use.
Runs before the barrier pass, which orders the threads around buffers that share bytes.

Buffers are placed in allocation order (or the most aligned first, where that takes fewer
bytes), each at the lowest offset (a multiple of its alignment: 128 bytes, 1024 for a
TMA-swizzled buffer) where it overlaps no buffer placed before it that is alive at the same
time.  A buffer is alive from the first to the last top-level statement of the kernel that
uses it (a loop or a branch counts as one statement), so a GEMM's epilogue tile reuses the
bytes of the main loop's stages; a buffer that one serial loop's body alone uses, and
whose first use there writes all of it, is alive from that body statement to the last one
that uses it, as TileLang's (:func:`loop_body_lifetimes`); consecutive ``T.ws`` regions on
disjoint threads (and the regions of a thread-index branch, ``if tx < 32: ... else: ...``)
run side by side, so what each uses, a reduction's scratch included, is alive over all of
them (:func:`side_by_side_runs`).  In a kernel with a producer warpgroup (a
warp-specialized loop), what the producer loads (the loop's stages) is alive from the
kernel's first statement: the producer starts with the kernel, beside whatever the
compute warpgroups do before the loop (a prologue's own tiles may not share its stages'
bytes).  Mbarrier arrays live the whole kernel.  A buffer with ``stages`` holds that many
copies, ``stride`` bytes apart (one stage rounded up to the alignment).  A view
(``Allocate.view_of``) takes its base's slot, and the base lives as long as any of its
views is used.  Option disable_shared_memory_reuse (TileLang's
tl.disable_shared_memory_reuse) gives every buffer bytes of its own.  Shared buffers sized at
launch (dims of the function's symbols and scalar parameters: TileLang's dynamic shared
memory) follow all of that, alive the whole kernel, one after another
(``SharedSlot.launch_offset``); their bytes (``KernelScope.launch_shared_bytes``) are the
launcher's to add up and check."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import fold_constants, walk_stmts
from ..runtime.dtypes import DTYPES
from ..target import SHARED_ALIGN, TMA_SWIZZLE_ALIGN, target
from .analysis import buffers_used, launch_sized, lifetimes, loads, stage_bytes, view_bases
from .warp_specialize import producer_branch


class SharedMemoryError(ValueError):
    pass


def shared_allocs(scope: N.KernelScope) -> list[N.Allocate]:
    """The shared allocations of a kernel, in order."""
    return [s for s in scope.body if isinstance(s, N.Allocate) and s.buffer.scope == "shared"]


def _align(a: N.Allocate) -> int:
    swizzled = a.layout is not None and a.layout.kind == "tma_swizzled"
    return TMA_SWIZZLE_ALIGN if swizzled else SHARED_ALIGN


def _round_up(x: int, align: int) -> int:
    return -(-x // align) * align


def side_by_side_runs(body) -> list[tuple[int, int]]:
    """The first and last top-level statement of each run of two or more consecutive
    ``T.ws`` regions on disjoint threads (allocations between them aside).  They run at
    the same time, each on its own threads (the barrier pass puts no block barrier
    between them: the program orders them with its mbarriers), so what one uses is alive
    while any other runs."""
    runs, run = [], None  # run: (first, last, thread ranges)
    for i, s in enumerate(body):
        if isinstance(s, N.Allocate):
            continue
        if isinstance(s, N.WarpGroups):
            lo, hi = s.first_thread, s.first_thread + s.num_threads
            if run is not None and all(hi <= a or b <= lo for a, b in run[2]):
                run = (run[0], i, run[2] + [(lo, hi)])
                continue
            if run is not None and len(run[2]) > 1:
                runs.append(run[:2])
            run = (i, i, [(lo, hi)])
            continue
        if run is not None and len(run[2]) > 1:
            runs.append(run[:2])
        run = None
    if run is not None and len(run[2]) > 1:
        runs.append(run[:2])
    return runs


_END = 1 << 30  # after the last statement of a loop body


def _overwrites(s, buf: N.Buffer) -> bool:
    """Does ``s`` write every element of ``buf`` before reading any: a ``T.Parallel`` nest
    over exactly its shape (a lowered ``T.copy`` / ``T.fill``) storing ``buf[i, j]`` from a
    value that does not read it.  (Other first writes, a TMA load among them, leave the
    buffer its whole loop.)"""
    loop_vars = []
    while isinstance(s, N.For) and s.kind == "parallel" and len(s.body) == 1:
        if not (isinstance(s.start, N.Const) and s.start.value == 0):
            return False
        loop_vars.append((s.var, s.extent))
        s = s.body[0]
    return isinstance(s, N.Store) and s.buffer == buf.name and \
        len(loop_vars) == len(buf.shape) and \
        all(isinstance(i, N.Var) and i.name == v.name and e == d
            for i, (v, e), d in zip(s.indices, loop_vars, buf.shape)) and \
        not any(ld.buffer == buf.name for ld in loads((s.indices, s.value)))


def loop_body_lifetimes(scope: N.KernelScope, alive: dict, pinned: set) -> dict:
    """Lifetimes within a serial loop's body, as TileLang's (its allocation planner places
    a buffer that only one loop's body uses inside that body, and its shared-memory merge
    frees it after the body statement that last uses it): each single-stage shared buffer
    used in one top-level serial loop alone, whose first use in the body writes all of it
    (so it carries no value from one iteration to the next), lives from that statement to
    the last one of the body that uses it.  Two such buffers used by disjoint statements
    share bytes; the barrier pass orders their threads as it orders one buffer's."""
    out = {}
    for a in shared_allocs(scope):
        b = a.buffer.name
        if b in pinned or b not in alive or a.stages != 1 or \
                (a.layout is not None and a.layout.kind == "mbarrier"):
            continue
        (i, _), (last, _) = alive[b]
        loop = scope.body[i]
        if i != last or not isinstance(loop, N.For) or loop.kind != "serial":
            continue
        uses = [j for j, t in enumerate(loop.body) if b in buffers_used(t)]
        if uses and _overwrites(loop.body[uses[0]], a.buffer):
            out[b] = ((i, uses[0]), (i, uses[-1]))
    return out


_NEVER = ((-3, 0), (-2, 0))  # a lifetime before every other: overlaps none of theirs


def _first_fit(sized) -> tuple[dict, int]:
    """Each buffer of ``sized`` in turn at the lowest offset (a multiple of its alignment)
    where it overlaps no buffer placed before it that is alive at the same time: the
    slots, and the bytes they take."""
    placed, slots = [], {}  # (start, end, lifetime)
    for a, align, stride, size, life in sized:
        offset, moved = 0, True
        while moved:
            moved = False
            for start, end, other in placed:
                together = life[0] <= other[1] and other[0] <= life[1]
                if together and offset < end and start < offset + size:
                    offset, moved = _round_up(end, align), True
        placed.append((offset, offset + size, life))
        slots[a.buffer.name] = N.SharedSlot(offset, stride, align)
    # a buffer never used (_NEVER) has no bytes of its own: it adds nothing to the total
    return slots, max((end for _, end, life in placed if life != _NEVER), default=0)


def place(scope: N.KernelScope, reuse: bool = True) -> N.KernelScope:
    """``scope`` with a slot on each shared allocation and its total bytes; ``reuse=False``
    (option disable_shared_memory_reuse): every buffer is alive the whole kernel, so none
    shares bytes with another (a view still takes its base's)."""
    alive = lifetimes(scope) if reuse else {}
    at = producer_branch(scope)
    if at is not None and reuse:  # the producer warpgroup loads from the kernel's start
        for b in buffers_used(scope.body[at]):
            alive[b] = (0, alive.get(b, (0, at))[1])
    for first, last in side_by_side_runs(scope.body):
        for b, (lo, hi) in list(alive.items()):
            if lo <= last and first <= hi:
                alive[b] = (min(lo, first), max(hi, last))
    bases = view_bases(scope.body)
    for v, b in bases.items():  # the base's bytes live while a view reads or writes them
        if v in alive:
            lo, hi = alive.get(b, alive[v])
            alive[b] = (min(lo, alive[v][0]), max(hi, alive[v][1]))
    # buffers other blocks of the cluster store into (T.copy_cluster(dst_block=)) whenever
    # they run: their bytes are theirs the whole kernel
    remote = {bases.get(t.dst.buffer, t.dst.buffer) for t in walk_stmts(scope.body)
              if isinstance(t, N.ClusterCopy)}
    allocs = shared_allocs(scope)
    # a lifetime runs from (statement, -1) to (statement, END): the whole of each top-level
    # statement; a buffer that lives in one serial loop's body gets the body statements
    # that use it, (loop, first) to (loop, last) (:func:`loop_body_lifetimes`)
    alive = {b: ((lo, -1), (hi, _END)) for b, (lo, hi) in alive.items()}
    if reuse:
        pinned = remote | set(bases) | set(bases.values()) | \
            {b for first, last in side_by_side_runs(scope.body) for b in alive
             if alive[b][0][0] <= last and first <= alive[b][1][0]}
        alive.update(loop_body_lifetimes(scope, alive, pinned))
    forever = ((-1, -1), (len(scope.body), _END))
    sized = []  # (allocation, alignment, stage stride, bytes, lifetime), in allocation order
    for a in allocs:
        if a.buffer.name in bases or launch_sized(a.buffer):
            continue
        align = _align(a)
        stride = _round_up(stage_bytes(a.buffer), align)
        mbarrier = a.layout is not None and a.layout.kind == "mbarrier"
        if reuse and a.buffer.name not in alive and not mbarrier and a.buffer.name not in remote \
                and a.buffer.name not in bases.values():
            life = _NEVER  # allocated, never used (TileLang's lowering drops it): no bytes of its own
        else:
            life = forever if mbarrier or a.buffer.name in remote else alive.get(a.buffer.name, forever)
        sized.append((a, align, stride, stride * (a.stages - 1) + stage_bytes(a.buffer), life))
    # first fit in allocation order, or with the most aligned buffers first where that
    # needs fewer bytes (a 1024-aligned TMA tile may not start where a 128-aligned buffer
    # that ended its life left a gap)
    slots, total = min((_first_fit(sized), _first_fit(sorted(sized, key=lambda x: -x[1]))),
                       key=lambda placed: placed[1])
    # the buffers sized at launch (TileLang's dynamic shared memory) after the static bytes,
    # one after another in allocation order, each alive the whole kernel: the first at a
    # static offset, the next ones past the bytes of those before (rounded up to the
    # alignment; SharedSlot.launch_offset); launch_bytes: all their bytes
    launched = [a for a in allocs if launch_sized(a.buffer) and a.buffer.name not in bases]
    launch_bytes = None
    if launched:
        total = _round_up(total, SHARED_ALIGN)
    for a in launched:
        before = None if launch_bytes is None else fold_constants(launch_bytes)
        slots[a.buffer.name] = N.SharedSlot(total, 0, SHARED_ALIGN, launch_offset=before)
        size = launch_size(a.buffer)
        if a is not launched[-1]:
            align = N.Const(SHARED_ALIGN, "int64")
            size = N.binop("mul", N.ceildiv(size, align), align)
        launch_bytes = size if launch_bytes is None else N.binop("add", launch_bytes, size)
    for a in allocs:
        if a.buffer.name in bases:
            base = next(b for b in allocs if b.buffer.name == bases[a.buffer.name])
            if base.stages > 1:
                where = f"{a.loc}: " if a.loc else ""
                raise SharedMemoryError(f"{where}view '{a.buffer.name}' of '{base.buffer.name}': "
                                        f"'{base.buffer.name}' has {base.stages} stages; tilecute "
                                        "views single-buffered shared buffers")
            slots[a.buffer.name] = slots[base.buffer.name]
    body = tuple(dataclasses.replace(s, slot=slots[s.buffer.name])
                 if isinstance(s, N.Allocate) and s.buffer.name in slots else s
                 for s in scope.body)
    return dataclasses.replace(scope, body=body, shared_bytes=total,
                               launch_shared_bytes=launch_bytes)


def launch_size(buf: N.Buffer) -> N.Expr:
    """The bytes of a shared buffer sized at launch, as an int64 expression of its dims."""
    wide = [d if d.dtype == "int64" else N.cast(d, "int64") for d in buf.shape]
    count = wide[0]
    for d in wide[1:]:
        count = N.binop("mul", count, d)
    info = DTYPES[buf.dtype]
    if info.pack > 1:  # (sub-byte elements: rounded up to whole bytes, as storage_bytes)
        return N.ceildiv(count, N.Const(info.pack, "int64"))
    return N.binop("mul", count, N.Const(info.bytes, "int64"))


def overlapping(scope: N.KernelScope) -> dict[str, set[str]]:
    """For each shared buffer, the other buffers placed on some of its bytes."""
    spans = {a.buffer.name: (a.slot.offset, a.slot.offset + a.slot.stride * (a.stages - 1)
                             + stage_bytes(a.buffer))
             for a in shared_allocs(scope) if a.slot is not None}
    return {b: {c for c, (s2, e2) in spans.items() if c != b and s < e2 and s2 < e}
            for b, (s, e) in spans.items()}


def assign_shared_memory(func: N.PrimFunc, arch: str, reuse: bool = True) -> N.PrimFunc:
    limit = target(arch).shared_per_block
    kernels = []
    for i, scope in enumerate(func.kernels):
        scope = place(scope, reuse)
        if scope.shared_bytes > limit:
            where = f"{scope.loc}: " if scope.loc else ""
            raise SharedMemoryError(
                f"{where}prim_func '{func.name}': kernel {i} needs {scope.shared_bytes} bytes of "
                f"shared memory; a block can have at most {limit} on {arch}. "
                f"{_largest(scope)}")
        kernels.append(scope)
    return dataclasses.replace(func, kernels=tuple(kernels))


def _largest(scope: N.KernelScope, count: int = 4) -> str:
    """The biggest shared buffers of a placed kernel, in words (what to shrink)."""
    sizes = []
    for a in shared_allocs(scope):
        if a.slot is None or a.view_of:
            continue
        shape = ", ".join(str(d.value) if isinstance(d, N.Const) else "?" for d in a.buffer.shape)
        stages = f" x {a.stages} stages" if a.stages > 1 else ""
        size = a.slot.stride * (a.stages - 1) + stage_bytes(a.buffer)
        sizes.append((size, f"'{a.buffer.name}' ({shape}) {a.buffer.dtype}{stages}: {size}"))
    sizes.sort(key=lambda x: -x[0])
    shown = "; ".join(text for _, text in sizes[:count])
    more = f" and {len(sizes) - count} more" if len(sizes) > count else ""
    return (f"Its largest shared buffers (bytes): {shown}{more}. Buffers in use at the same "
            "time cannot share bytes; T.Pipelined's num_stages multiplies the tiles its loop "
            "loads")
