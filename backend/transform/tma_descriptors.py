"""TMA descriptors: every ``TmaCopy`` (those the TMA passes made, the program's own
``T.tma_copy`` and ``T.atomic_add(..., use_tma=True)``'s reduce-stores, which share a
store's descriptor) names a descriptor parameter of its kernel (``TmaCopy.desc``), one per
(tensor, box, swizzle), named ``<tensor>_desc``; the kernel records them
(``KernelScope.tma_descriptors``), the launch ABI turns them into parameters, and the
launcher encodes them per launch."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import StmtMutator, walk_stmts
from ..runtime.abi import TmaSpec
from ..target import arch_at_least
from .analysis import (all_names, column_slice, matrix_of, matrix_slice, row_slice, tma_box,
                       tma_swizzle, whole)
from .tma_copies import TmaError

L2_PROMOTION = 128  # bytes, as CuTe's own TMA atoms encode it


class _Describer(StmtMutator):
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, arch: str, names: set[str]):
        self.func, self.arch, self.names = func, arch, names
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
        self.buffers.update({n: a.buffer for n, a in self.allocs.items()})
        self.at_address = {a.buffer.name for a in walk_stmts(scope.body)
                           if isinstance(a, N.Allocate) and a.address is not None}
        self.buffers.update({a.buffer.name: a.buffer for a in walk_stmts(scope.body)
                             if isinstance(a, N.Allocate) and a.buffer.scope == "global"})
        self.descriptors: dict[tuple, N.TmaDescriptor] = {}

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if s.loc else ""
        raise TmaError(f"{where}prim_func '{self.func.name}': {msg}")

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        scope = super().visit_kernel(scope)
        return dataclasses.replace(scope, tma_descriptors=tuple(self.descriptors.values()))

    def visit_tma_copy(self, s: N.TmaCopy) -> N.TmaCopy:
        form = "T.atomic_add(..., use_tma=True)" if s.reduce else "T.tma_copy"
        if not arch_at_least(self.arch, 90):
            if s.reduce:  # (as TileLang, which refuses it there too: no non-TMA fallback)
                self.fail(s, f"T.atomic_add: use_tma=True needs TMA (a reduce-store, sm_90 or "
                             f"newer); the target is {self.arch} (without use_tma=True the "
                             f"tile is added element by element)")
            self.fail(s, f"T.tma_copy needs TMA (sm_90 or newer); the target is {self.arch}")
        load = self.buffers[s.src.buffer].scope == "global"
        glob_r, shared_r = (s.src, s.dst) if load else (s.dst, s.src)
        glob, shared = self.buffers[glob_r.buffer], self.buffers[shared_r.buffer]
        if self.func.buffer(glob.name) is None:
            what = "a tensor at an address (T.make_tensor)" if glob.name in self.at_address \
                else "a view (T.view) of a tensor argument"
            self.fail(s, f"{form} of '{glob.name}', {what}: a TMA descriptor is encoded on the "
                         "host from a tensor argument, which this tensor is not; copy it with "
                         "T.copy (cp.async / vector loads and stores)")
        swizzle = tma_swizzle(self.allocs.get(shared.name))
        sliced = row_slice(shared_r, shared, swizzle, symbolic=True)
        columns = column_slice(shared_r, shared, swizzle)
        if matrix_slice(shared_r, shared, swizzle) is not None:
            shared = matrix_of(shared)  # A_s[s, :, :]: one matrix, placed by the codegen
        elif columns is not None:  # KV_s[:, j * 64:(j + 1) * 64]: whole chunks
            shared = dataclasses.replace(shared, shape=(shared.shape[0], N.as_expr(columns[1])))
        elif not whole(shared_r, shared) and sliced is None:
            self.fail(s, f"{form} moves a whole shared buffer, a range of its rows that "
                         f"starts at a multiple of {1024 if swizzle else 128} bytes (unswizzled: "
                         f"also at a row computed at run time, each such row at a multiple of "
                         f"128 bytes), a range "
                         f"of its columns of whole swizzle chunks ({swizzle or 'no'}-byte "
                         f"swizzle here), or one matrix A_s[s, :, :] of a multiple of "
                         f"{1024 if swizzle else 128} bytes; '{shared.name}' is sliced otherwise")
        box = tma_box(glob, glob_r, shared, swizzle, sliced[1] if sliced else None, split=True)
        if isinstance(box, str):
            self.fail(s, f"{form} between '{glob.name}' and '{shared.name}': {box}")
        spec = TmaSpec(box=box, swizzle=swizzle, l2_promotion=L2_PROMOTION)
        key = (glob.name, spec)
        d = self.descriptors.get(key)
        if d is None:
            taken = {x.name for x in self.descriptors.values()}
            name, i = f"{glob.name}_desc", 1
            while name in taken or name in self.names:
                i += 1
                name = f"{glob.name}_desc{i}"
            d = N.TmaDescriptor(name, glob.name, glob.dtype, spec)
            self.descriptors[key] = d
        return dataclasses.replace(s, desc=d.name)


def assign_tma_descriptors(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    names = all_names(func)
    kernels = tuple(_Describer(func, k, arch, names).visit_kernel(k) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
