"""``widen_loop_fragments`` (the parser's, after negative indices): a fragment indexed by a
``T.Parallel`` nest's own variables covers the nest's domain, whatever its declared extent.

TileLang gives a fragment that a parallel nest reads or writes at exactly the nest's
variables (``frag[i]`` in ``T.Parallel(M)``, ``frag[i, j]`` in ``T.Parallel(M, N)``) the
nest's own layout (``ParallelOpNode::CompleteBufferFragment``: a "common access" returns
the loop layout), so the registers each thread holds are those of the nest's iterations
and the declared shape bounds nothing: ``T.alloc_fragment([heads])`` written as
``s[i] = Sinks[by]`` in ``T.Parallel(block_M)`` holds ``block_M`` values when ``heads <
block_M`` (TileLang's attention-sink backward examples at fewer heads than ``block_M``).
Each such dim of the fragment is widened here to the largest constant extent of a nest
that indexes it so (never narrowed); accesses elsewhere keep their meaning, and the
bounds check of ``validate`` then judges the rest.  Imports the IR only.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, rebuild, walk_nodes


def widen_loop_fragments(func: N.PrimFunc) -> N.PrimFunc:
    kernels = tuple(_widen(k) for k in func.kernels)
    if all(a is b for a, b in zip(kernels, func.kernels)):
        return func
    return dataclasses.replace(func, kernels=kernels)


def _widen(kernel: N.KernelScope) -> N.KernelScope:
    frags = {s.buffer.name: s.buffer for s in _stmts(kernel.body)
             if isinstance(s, N.Allocate) and s.buffer.scope == "fragment" and not s.view_of
             and all(isinstance(d, N.Const) for d in s.buffer.shape)}
    if not frags:
        return kernel
    # a fragment a tile op names whole (T.copy, T.fill, T.reduce, T.gemm ...: their extents
    # are the declared shape's, as TileLang's frontend builds their regions from it) or that
    # has views keeps its shape: widened, a T.copy(f, Out[0, 0]) would write more than
    # TileLang's
    frags = {n: b for n, b in frags.items() if n not in _named_whole(kernel.body)}
    if not frags:
        return kernel
    need: dict[str, list[int]] = {}
    _visit(kernel.body, {}, frags, need)
    widened = {name: N.Buffer(buf.name, buf.dtype, tuple(N.const(e, d.dtype) if e > d.value else d
                                                       for e, d in zip(need[name], buf.shape)),
                              buf.scope, buf.strides)
               for name, buf in frags.items()
               if name in need and any(e > d.value for e, d in zip(need[name], buf.shape))}
    if not widened:
        return kernel
    return rebuild(kernel, lambda n: widened[n.name] if isinstance(n, N.Buffer) and n.scope == "fragment"
                   and n.name in widened and n == frags[n.name] else None)


def _named_whole(body) -> set[str]:
    """Buffers named other than by an element access: by a tile op's region or buffer
    field, or by a view (either side)."""
    out: set[str] = set()
    for s in _stmts(body):
        if isinstance(s, N.Allocate) and s.view_of:
            out |= {s.view_of, s.buffer.name}
        if isinstance(s, (N.For, N.If, N.While, N.Let, N.Store, N.Evaluate, N.Allocate)):
            continue
        for f in dataclasses.fields(s):
            v = getattr(s, f.name)
            if isinstance(v, str):
                out.add(v)
    for n in walk_nodes(body):
        if isinstance(n, N.Region):
            out.add(n.buffer)
    return out


def _stmts(body):
    for s in body:
        yield s
        for name in BODY_FIELDS.get(type(s), ()):
            yield from _stmts(getattr(s, name))


def _visit(body, loops: dict[str, int], frags: dict, need: dict) -> None:
    """``loops``: the enclosing parallel nest's variables -> constant extents (a nest
    starting at 0)."""
    for s in body:
        inner = loops
        if isinstance(s, N.For):
            if s.kind == "parallel" and isinstance(s.start, N.Const) and s.start.value == 0 \
                    and isinstance(s.extent, N.Const):
                inner = {**loops, s.var.name: s.extent.value}
            else:
                inner = {}
        nodes = [s] if not BODY_FIELDS.get(type(s)) else [getattr(s, f.name) for f in dataclasses.fields(s)
                                                            if f.name not in BODY_FIELDS[type(s)]
                                                            and f.name != "loc"]
        if loops:
            for x in nodes:
                for n in walk_nodes(x):
                    if isinstance(n, (N.Load, N.Store)) and n.buffer in frags:
                        _note(n.buffer, n.indices, loops, frags, need)
        for name in BODY_FIELDS.get(type(s), ()):
            _visit(getattr(s, name), inner, frags, need)


def _note(name: str, indices, loops: dict, frags: dict, need: dict) -> None:
    names = [i.name if isinstance(i, N.Var) else None for i in indices]
    if len(indices) != frags[name].ndim or None in names or len(set(names)) != len(names) \
            or any(x not in loops for x in names):
        return  # not the nest's own variables: the declared extent stands
    have = need.setdefault(name, [d.value for d in frags[name].shape])
    for axis, x in enumerate(names):
        have[axis] = max(have[axis], loops[x])
