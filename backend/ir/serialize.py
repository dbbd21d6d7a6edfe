"""The JSON form of the IR: what other compilers emit to target tilecute.

Every node is an object ``{"node": "<ClassName>", <field>: <value>, ...}``; tuples are
lists; source locations are ``{"node": "Loc", "file": ..., "line": ...}``.  The document is
``{"schema": "tilecute.ir", "version": SCHEMA_VERSION, "func": <PrimFunc>}``.  Infinite
and NaN float constants, which JSON cannot spell, are ``{"float": "-inf"}``.
``from_json(to_json(f)) == f`` for every function (locations included).
"""

from __future__ import annotations

import dataclasses
import json
import math

from . import nodes

SCHEMA_VERSION = 1

_NODE_TYPES = {
    cls.__name__: cls
    for cls in vars(nodes).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls)
}


def _encode(x):
    if dataclasses.is_dataclass(x):
        out = {"node": type(x).__name__}
        for f in dataclasses.fields(x):
            value = getattr(x, f.name)
            if f.name == "loc" and value is None:
                continue
            out[f.name] = _encode(value)
        return out
    if isinstance(x, (tuple, list)):
        return [_encode(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": repr(x)}  # JSON has no inf/nan: {"float": "-inf"}
    return x


def _decode(x):
    if isinstance(x, dict) and set(x) == {"float"}:
        return float(x["float"])
    if isinstance(x, dict):
        name = x.get("node")
        cls = _NODE_TYPES.get(name)
        if cls is None:
            raise ValueError(f"tilecute IR JSON: unknown node type {name!r}")
        kwargs = {k: _decode(v) for k, v in x.items() if k != "node"}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(kwargs) - names
        if unknown:
            raise ValueError(f"tilecute IR JSON: {name} has no field(s) {sorted(unknown)}")
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"tilecute IR JSON: bad {name}: {e}") from None
    if isinstance(x, list):
        return tuple(_decode(v) for v in x)
    return x


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
    if doc.get("schema") != "tilecute.ir":
        raise ValueError("not a tilecute IR document (missing \"schema\": \"tilecute.ir\")")
    if doc.get("version") != SCHEMA_VERSION:
        raise ValueError(
            f"tilecute IR JSON version {doc.get('version')!r} is not supported "
            f"(this tilecute reads version {SCHEMA_VERSION})"
        )
    func = _decode(doc["func"])
    if not isinstance(func, nodes.PrimFunc):
        raise ValueError("tilecute IR JSON: \"func\" is not a PrimFunc")
    return func


def from_json(text: str) -> nodes.PrimFunc:
    return from_dict(json.loads(text))
