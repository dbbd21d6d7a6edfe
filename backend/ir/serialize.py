"""The JSON form of the IR: what other compilers emit to target tilecute.

Every node is an object ``{"node": "<ClassName>", <field>: <value>, ...}``; tuples are
lists; source locations are ``{"node": "Loc", "file": ..., "line": ...}``.  The document is
``{"schema": "tilecute.ir", "version": SCHEMA_VERSION, "func": <PrimFunc>}``.  Infinite
and NaN float constants, which JSON cannot spell, are ``{"float": "-inf"}``.
``from_json(to_json(f)) == f`` for every function (locations included).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing

from . import nodes
from .validate import MAX_DEPTH
from ..runtime.dtypes import DTYPES, valid_dtypes_text

SCHEMA_VERSION = 1

_NODE_TYPES = {
    cls.__name__: cls
    for cls in vars(nodes).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls)
}
# JSON levels a document may nest: two per IR level (a node, a list of nodes) and some
_MAX_JSON_DEPTH = 2 * MAX_DEPTH + 16


class IRJSONError(ValueError):
    """A document that is not tilecute IR JSON; the message names the node and field."""


@functools.lru_cache(maxsize=None)
def _field_types(cls) -> dict:
    return typing.get_type_hints(cls)


def _type_text(tp, plural: bool = False) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a, plural) for a in typing.get_args(tp))
    if origin is tuple or tp is tuple:
        args = typing.get_args(tp)
        return f"a list of {_type_text(args[0], True)}" if args else "a list"
    if tp is type(None):
        return "null"
    one, many = {int: ("an int", "ints"), float: ("a number", "numbers"),
                 bool: ("true or false", "booleans"), str: ("a string", "strings")}.get(
        tp, (f"a {getattr(tp, '__name__', tp)} node", f"{getattr(tp, '__name__', tp)} nodes"))
    return many if plural else one


def _fits(value, tp) -> bool:
    """Is a decoded ``value`` of field type ``tp`` (nodes' annotations)?"""
    origin = typing.get_origin(tp)
    if tp is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in typing.get_args(tp))
    if origin is tuple or tp is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, tuple):
            return False
        if not args:
            return True
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(args) == len(value) and all(_fits(v, a) for v, a in zip(value, args))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, tp)


def _check_depth(doc) -> None:
    stack = [(doc, 0)]
    while stack:
        x, d = stack.pop()
        if d > _MAX_JSON_DEPTH:
            raise IRJSONError(f"tilecute IR JSON: the document nests deeper than "
                              f"{_MAX_JSON_DEPTH} levels (the IR allows {MAX_DEPTH})")
        if isinstance(x, dict):
            stack.extend((v, d + 1) for v in x.values())
        elif isinstance(x, list):
            stack.extend((v, d + 1) for v in x)


# PrimFunc fields written only when set: TileLang's function attributes, the pointer params,
# the host-evaluable assumes
_FUNC_ATTRS = ("out_idx", "pass_configs", "compile_flags", "pointers", "assumes")


def _encode(x):
    if dataclasses.is_dataclass(x):
        out = {"node": type(x).__name__}
        for f in dataclasses.fields(x):
            value = getattr(x, f.name)
            if f.name == "loc" and value is None or \
                    isinstance(x, nodes.Loc) and f.name == "form" and not value or \
                    isinstance(x, nodes.PrimFunc) and f.name in _FUNC_ATTRS and \
                    value == f.default or \
                    isinstance(x, nodes.Gemm) and f.name == "wgmma_only" and not value or \
                    isinstance(x, nodes.Allocate) and f.name == "address" and value is None or \
                    isinstance(x, nodes.Allocate) and f.name == "view_offset" and value is None or \
                    isinstance(x, nodes.For) and f.name == "loop_layout" and value is None or \
                    isinstance(x, nodes.Copy) and f.name in ("loop_layout", "loop_shape") and \
                    not value or \
                    isinstance(x, nodes.For) and f.name == "unroll_factor" and not value or \
                    isinstance(x, nodes.For) and f.name == "loads_last" and not value or \
                    isinstance(x, nodes.For) and f.name == "vectorized" and not value or \
                    isinstance(x, nodes.WarpGroups) and f.name == "synced" and not value or \
                    isinstance(x, nodes.ClusterSync) and f.name == "kind" and value == "sync" or \
                    isinstance(x, nodes.MBarrierArrive) and f.name == "block" and value is None or \
                    isinstance(x, nodes.KernelScope) and f.name == "l2_hit_ratios" and not value or \
                    isinstance(x, nodes.KernelScope) and f.name == "launch_shared_bytes" and \
                    value is None or \
                    isinstance(x, nodes.SharedSlot) and f.name == "launch_offset" and \
                    value is None or \
                    isinstance(x, nodes.Let) and f.name == "within" and value is None or \
                    isinstance(x, nodes.Store) and f.name == "feeds" and value is None:
                # (TileLang's function attributes, T.wgmma_gemm's flag, an address, a loop
                # layout, an unroll factor, loads issued last, a region's own barriers, a
                # kernel's L2 hit ratios, a Let's bound and a staged fill's reader, when set)
                continue
            out[f.name] = _encode(value)
        return out
    if isinstance(x, (tuple, list)):
        return [_encode(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": repr(x)}  # JSON has no inf/nan: {"float": "-inf"}
    return x


def _decode(x, path: str = "func"):
    if isinstance(x, dict) and set(x) == {"float"}:
        try:
            return float(x["float"])
        except (TypeError, ValueError):
            raise IRJSONError(f"tilecute IR JSON: {path}: {x['float']!r} is not a float") from None
    if isinstance(x, dict):
        name = x.get("node")
        cls = _NODE_TYPES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise IRJSONError(f"tilecute IR JSON: {path}: unknown node type {name!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(x) - names - {"node"}
        if unknown:
            raise IRJSONError(f"tilecute IR JSON: {path}: {name} has no field(s) {sorted(unknown)}")
        kwargs = {k: _decode(v, f"{path}.{k}") for k, v in x.items() if k != "node"}
        hints = _field_types(cls)
        for k, v in kwargs.items():
            if not _fits(v, hints[k]):
                raise IRJSONError(f"tilecute IR JSON: {path}: {name}.{k} must be "
                                  f"{_type_text(hints[k])}, got {_json_text(x[k])}")
            if k == "dtype" and hints[k] is str and v not in DTYPES:
                raise IRJSONError(f"tilecute IR JSON: {path}: {name}.dtype: unknown dtype {v!r}; "
                                  f"{valid_dtypes_text()}")
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise IRJSONError(f"tilecute IR JSON: {path}: bad {name}: {e}") from None
    if isinstance(x, list):
        return tuple(_decode(v, f"{path}[{i}]") for i, v in enumerate(x))
    return x


def _json_text(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def to_dict(func: nodes.PrimFunc) -> dict:
    return {"schema": "tilecute.ir", "version": SCHEMA_VERSION, "func": _encode(func)}


def to_json(func: nodes.PrimFunc, *, indent: int | None = 1) -> str:
    return json.dumps(to_dict(func), indent=indent)


def canonical_json(func: nodes.PrimFunc) -> str:
    """The cache-key form: sorted keys, no whitespace, no source locations."""
    func = strip_locs(func)
    return json.dumps(to_dict(func), sort_keys=True, separators=(",", ":"))


def strip_locs(x):
    if dataclasses.is_dataclass(x):
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            nv = None if f.name == "loc" else strip_locs(v)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(x, **changes) if changes else x
    if isinstance(x, tuple):
        items = tuple(strip_locs(v) for v in x)
        return x if all(a is b for a, b in zip(items, x)) else items
    return x


def from_dict(doc: dict) -> nodes.PrimFunc:
    """The PrimFunc a decoded document holds.  Every field is checked against its node's
    type (an :class:`IRJSONError`, a ``ValueError``, names the node and field); what the
    function means is checked by ``tilecute.ir.validate``."""
    if not isinstance(doc, dict) or doc.get("schema") != "tilecute.ir":
        raise IRJSONError("not a tilecute IR document (missing \"schema\": \"tilecute.ir\")")
    if doc.get("version") != SCHEMA_VERSION:
        raise IRJSONError(
            f"tilecute IR JSON version {doc.get('version')!r} is not supported "
            f"(this tilecute reads version {SCHEMA_VERSION})"
        )
    _check_depth(doc.get("func"))
    func = _decode(doc.get("func"))
    if not isinstance(func, nodes.PrimFunc):
        raise IRJSONError("tilecute IR JSON: \"func\" is not a PrimFunc")
    return func


def from_json(text: str) -> nodes.PrimFunc:
    try:
        doc = json.loads(text)
    except RecursionError:
        raise IRJSONError(f"tilecute IR JSON: the document nests deeper than Python's JSON "
                          f"reader can follow (the IR allows {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as e:
        raise IRJSONError(f"tilecute IR JSON: not valid JSON: {e}") from None
    return from_dict(doc)
