"""Pass ``scope_safe_values``: TileLang's lexical safe values become views.

A ``SafeValueScope`` (``with T.sblock(name): T.annotate_safe_value({A: v}) ...``) gives
global tensor ``A`` the value ``v`` for the reads in its body alone; the kernel's
``safe_values`` (and any enclosing scope's) hold elsewhere.  The rest of the compiler
knows one safe value per buffer, so each scope becomes, where it stood:

- for ``A`` and for each view of ``A`` allocated before it, a fresh view of ``A``'s
  storage with that buffer's shape and dtype (``A_<name>``), whose own safe value ``v``
  the kernel lists (``KernelScope.safe_values`` keyed by the view);
- its body, every reference to those buffers renamed to their views; a view of ``A``
  allocated inside it gets ``v`` of its own.

A safe value keyed by a view holds for that view alone (the code generator gives other
views their base's).  Nested scopes override per tensor.  No ``SafeValueScope`` remains.
Imports the IR only.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, walk_stmts
from .analysis import all_names, fresh_name

# statement and region fields that name a buffer
_BUFFER_FIELDS = ("buffer", "a", "b", "c", "src", "dst", "img", "col")


def scope_safe_values(func: N.PrimFunc) -> N.PrimFunc:
    if not any(isinstance(s, N.SafeValueScope) for k in func.kernels for s in walk_stmts(k.body)):
        return func
    taken = all_names(func)
    kernels = tuple(_Scoper(func, k, taken).run() for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)


class _Scoper:
    def __init__(self, func: N.PrimFunc, kernel: N.KernelScope, taken: set):
        self.kernel, self.taken = kernel, taken
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.safe = list(kernel.safe_values)
        self.view_root: dict[str, str] = {}  # a view allocated so far -> the tensor it views
        self.view_offset: dict[str, N.Expr] = {}  # such a view -> its Allocate.view_offset

    def run(self) -> N.KernelScope:
        body = self.block(self.kernel.body, {}, {})
        return dataclasses.replace(self.kernel, body=body, safe_values=tuple(self.safe))

    def block(self, body: tuple, renamed: dict, values: dict) -> tuple:
        """``renamed``: buffer -> the view that stands for it here; ``values``: tensor ->
        the safe value of the innermost scope that gives it one."""
        out: list[N.Stmt] = []
        for s in body:
            if isinstance(s, N.SafeValueScope):
                inner, inner_values = dict(renamed), dict(values)
                tag = s.name if s.name.isidentifier() else "sblock"
                for tensor, value in s.values:
                    inner_values[tensor] = value
                    for x in [tensor] + [v for v, r in self.view_root.items() if r == tensor]:
                        buf = self.buffers[x]
                        view = N.Buffer(fresh_name(self.taken, f"{x}_{tag}"), buf.dtype, buf.shape, "global")
                        out.append(N.Allocate(view, loc=s.loc, view_of=tensor,
                                              view_offset=self.view_offset.get(x)))
                        self.buffers[view.name] = view
                        self.safe.append((view.name, value))
                        inner[x] = view.name
                out.extend(self.block(s.body, inner, inner_values))
                continue
            if isinstance(s, N.Allocate) and s.view_of and s.buffer.scope == "global":
                root = self.view_root.get(s.view_of, s.view_of)
                self.view_root[s.buffer.name] = root
                if s.view_offset is not None:
                    self.view_offset[s.buffer.name] = s.view_offset
                self.buffers[s.buffer.name] = s.buffer
                if root in values:  # a view made inside a scope: the scope's value, its own
                    self.safe.append((s.buffer.name, values[root]))
            out.append(self.stmt(s, renamed, values))
        return tuple(out)

    def stmt(self, s: N.Stmt, renamed: dict, values: dict) -> N.Stmt:
        bodies = BODY_FIELDS.get(type(s), ())
        changes = {}
        for f in dataclasses.fields(s):
            v = getattr(s, f.name)
            if f.name in bodies:
                nv = self.block(v, renamed, values)
            elif f.name == "loc":
                continue
            else:
                nv = _rename(v, renamed, f.name)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(s, **changes) if changes else s


def _rename(x, renamed: dict, field: str = ""):
    """``x`` with the buffer names in ``renamed`` replaced, at any depth (statements'
    bodies aside: the caller walks them)."""
    if not renamed:
        return x
    if isinstance(x, str):
        return renamed.get(x, x) if field in _BUFFER_FIELDS else x
    if isinstance(x, tuple):
        items = tuple(_rename(y, renamed) for y in x)
        return items if any(a is not b for a, b in zip(items, x)) else x
    if not dataclasses.is_dataclass(x) or isinstance(x, (type, N.Loc, N.Buffer)):
        return x
    changes = {}
    for f in dataclasses.fields(x):
        v = getattr(x, f.name)
        nv = _rename(v, renamed, f.name)
        if nv is not v:
            changes[f.name] = nv
    return dataclasses.replace(x, **changes) if changes else x
