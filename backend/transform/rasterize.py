"""L2-friendly block order for GEMM kernels (by default): a kernel with a 2-D grid (the
tiles of one output matrix; a third grid dimension, such as attention's heads and batch,
keeps the plain order, in which neighbouring blocks share their K/V) whose program runs a
T.gemm, and that does not remap its block indices itself (as
``T.use_swizzle`` does) nor makes its blocks wait for each other (a grid barrier, a
``while`` on a flag in global memory: such a program may count on the order it wrote), walks its grid in panels of :data:`PANEL` rows, as
``T.use_swizzle(PANEL)`` does but every panel walked from its first column (TileLang's
rasterization, which ``T.use_swizzle`` follows, walks every other panel from the far
end): blocks running at once then share the tiles of one operand in L2.  The Lets it adds are visible in the printed IR; the compile option
``disable_rasterization`` keeps the plain order.  A grid launched in clusters walks whole clusters in that order
(:func:`~..ir.rasterization.panel_order`)."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.rasterization import panel_order
from ..ir.visitor import substitute, walk_nodes, walk_stmts
from .analysis import all_names, fresh_name, mentions

PANEL = 16  # rows per panel (the measured best for 128x256 tiles on an H100)


def _remaps_blocks(scope: N.KernelScope) -> bool:
    """Does the program compute new block indices from both of the first two (as
    T.use_swizzle's Lets do)?"""
    x, y = (v.name for v in scope.block_vars[:2])
    return any(isinstance(s, N.Let) and mentions(s.value, x) and mentions(s.value, y)
               for s in scope.body)


def _waits_on_other_blocks(func: N.PrimFunc, scope: N.KernelScope) -> bool:
    """Do the kernel's blocks wait for each other (a grid barrier, or a ``while`` whose
    condition reads global memory: a flag another block sets)?  Such a program may rely on
    which tiles the blocks launched first hold, so its block order stays as written."""
    globals_ = {p.name for p in func.params if isinstance(p, N.Buffer)}  # (workspaces too)
    for s in walk_stmts(scope.body):
        if isinstance(s, N.While) and any(isinstance(x, N.Load) and x.buffer in globals_
                                          for x in walk_nodes(s.cond)):
            return True
        if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
                s.value.name == "sync_grid":
            return True
    return False


def _kernel(func: N.PrimFunc, scope: N.KernelScope, names: set[str]) -> N.KernelScope:
    if len(scope.grid) != 2 or not any(isinstance(s, N.Gemm) for s in walk_stmts(scope.body)) \
            or _remaps_blocks(scope) or _waits_on_other_blocks(func, scope):
        return scope
    if all(isinstance(g, N.Const) for g in scope.grid[:2]) and scope.grid[1].value <= PANEL:
        return scope  # one panel: nothing to gain

    x, y = scope.block_vars[:2]
    lets = []

    def let(stem, value, within=None):
        var = N.Var(fresh_name(names, stem, sep=""), value.dtype)
        lets.append(N.Let(var, value, loc=scope.loc, within=within))
        return var
    new_x, new_y = panel_order(x, y, scope.grid[0], scope.grid[1], PANEL, let,
                               (tuple(scope.cluster or ()) + (1, 1))[:2])
    # each new index keeps its block variable's dtype (the walk is int64 where a grid
    # extent is; an int32 index's new value is below its extent, so it fits), and is
    # below that extent (the order is a permutation of the grid): the bounds prover
    # knows it as it knows the block index's range
    new_x = let(x.name, N.cast(new_x, x.dtype), N.cast(scope.grid[0], x.dtype))
    new_y = let(y.name, N.cast(new_y, y.dtype), N.cast(scope.grid[1], y.dtype))
    body = substitute(tuple(scope.body), {x.name: new_x, y.name: new_y})
    return dataclasses.replace(scope, body=tuple(lets) + body)


def rasterize(func: N.PrimFunc, options: dict) -> N.PrimFunc:
    if options.get("disable_rasterization"):
        return func
    names = all_names(func)
    return dataclasses.replace(func, kernels=tuple(_kernel(func, k, names) for k in func.kernels))
