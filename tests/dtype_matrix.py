"""The dtype matrix of TileLang's core tile ops (tests/dtype_matrix.py): a generator of small
TileLang-style programs, one per (op, dtype) cell, written as source text that reads as
TileLang or as tilecute by its import line alone (``import tilelang.language as T`` /
``import tilecute.language as T``).

``cells()`` gives name -> Cell; ``load(cell, "tilecute")`` writes the program to a file
(inspect needs one) and returns its ``main`` prim_func.  Run as a script under TileLang's
interpreter (``python tests/dtype_matrix.py tilelang OUT.json [arch ...]``) it lowers every
cell with TileLang and records which lower; tests/test_dtype_matrix.py holds that verdict
and builds the cells with tilecute."""

import dataclasses
import importlib.util
import itertools
import json
import os
import sys
import tempfile
import textwrap

INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
FP8 = ["float8_e4m3", "float8_e5m2"]
DTYPES = INTS + FLOATS + FP8 + ["bool"]
WIDTH = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32,
         "int64": 64, "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32,
         "float64": 64, "float8_e4m3": 8, "float8_e5m2": 8, "bool": 8}
# T.gemm's operand dtype -> its accumulator
MMA = {"float16": "float32", "bfloat16": "float32", "float32": "float32",
       "float64": "float64", "int8": "int32", "uint8": "int32",
       "float8_e4m3": "float32", "float8_e5m2": "float32"}


@dataclasses.dataclass(frozen=True)
class Cell:
    op: str
    dtype: str
    text: str  # the program's body, below the import line


def _one(v):
    return "True" if v == "bool" else "1"


def _kernel(params, body, grid="1", threads=128):
    sig = ", ".join(f"{n}: T.Tensor({s}, {d!r})" for n, s, d in params)
    return (f"@T.prim_func\ndef main({sig}):\n"
            f"    with T.Kernel({grid}, threads={threads}) as bx:\n"
            + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) + "\n")


def _copy(d, m, n, bm, disable_tma):
    tma = ", disable_tma=True" if disable_tma else ""
    if n is None:  # 1-D tiles
        return _kernel([("A", f"({m},)", d), ("B", f"({m},)", d)], f"""
            s = T.alloc_shared(({bm},), {d!r})
            f = T.alloc_fragment(({bm},), {d!r})
            T.copy(A[bx * {bm}], s{tma})
            T.copy(s, f)
            T.copy(f, B[bx * {bm}])""", grid=f"T.ceildiv({m}, {bm})")
    return _kernel([("A", f"({m}, {n})", d), ("B", f"({m}, {n})", d)], f"""
        s = T.alloc_shared(({bm}, {n}), {d!r})
        f = T.alloc_fragment(({bm}, {n}), {d!r})
        T.copy(A[bx * {bm}, 0], s{tma})
        T.copy(s, f)
        T.copy(f, B[bx * {bm}, 0])""", grid=f"T.ceildiv({m}, {bm})")


def _elementwise(d, out, expr):
    return _kernel([("A", "(32, 32)", d), ("B", "(32, 32)", d), ("C", "(32, 32)", out)], f"""
        a = T.alloc_fragment((32, 32), {d!r})
        b = T.alloc_fragment((32, 32), {d!r})
        c = T.alloc_fragment((32, 32), {out!r})
        T.copy(A, a)
        T.copy(B, b)
        for i, j in T.Parallel(32, 32):
            c[i, j] = {expr}
        T.copy(c, C)""")


def _reduce(d, kind, dim, clear):
    n_out = 16 if dim == 0 else 32
    clear_arg = "" if kind == "abssum" else f", clear={clear}"
    init = "" if clear else "T.copy(B, o)  # accumulate onto B's values"
    return _kernel([("A", "(32, 16)", d), ("B", f"({n_out},)", d)], f"""
        a = T.alloc_fragment((32, 16), {d!r})
        o = T.alloc_fragment(({n_out},), {d!r})
        T.copy(A, a)
        {init}
        T.reduce_{kind}(a, o, dim={dim}{clear_arg})
        T.copy(o, B)""")


def _cumsum(d, dim, reverse, scope):
    alloc = "T.alloc_shared" if scope == "shared" else "T.alloc_fragment"
    return _kernel([("A", "(32, 32)", d), ("B", "(32, 32)", d)], f"""
        s = {alloc}((32, 32), {d!r})
        T.copy(A, s)
        T.cumsum(s, dim={dim}, reverse={reverse})
        T.copy(s, B)""")


def _atomic(d, kind, form):
    if form == "tile":
        return _kernel([("A", "(32, 32)", d), ("B", "(32, 32)", d)], f"""
            a = T.alloc_fragment((32, 32), {d!r})
            T.copy(A, a)
            T.atomic_{kind}(B[0:32, 0:32], a)""", grid="4")
    if form == "return_prev":
        return _kernel([("A", "(32, 32)", d), ("B", "(32, 32)", d), ("P", "(4, 32, 32)", d)], f"""
            for i, j in T.Parallel(32, 32):
                P[bx, i, j] = T.atomic_{kind}(B[i, j], A[i, j], return_prev=True)""", grid="4")
    return _kernel([("A", "(32, 32)", d), ("B", "(4, 32)", d)], f"""
        for i, j in T.Parallel(32, 32):
            T.atomic_{kind}(B[i % 4, j], A[i, j])""")


def _gemm(d, acc, arch_tiles=(64, 64, 64)):
    m, n, k = arch_tiles
    return _kernel([("A", f"({m}, {k})", d), ("B", f"({n}, {k})", d), ("C", f"({m}, {n})", acc)], f"""
        a = T.alloc_shared(({m}, {k}), {d!r})
        b = T.alloc_shared(({n}, {k}), {d!r})
        c = T.alloc_fragment(({m}, {n}), {acc!r})
        T.copy(A, a)
        T.copy(B, b)
        T.gemm(a, b, c, transpose_B=True, clear_accum=True)
        T.copy(c, C)""")


def cells() -> dict:
    """name -> Cell for every (op, dtype) of the matrix."""
    out = {}

    def add(op, d, text):
        out[f"{op}__{d}"] = Cell(op, d, text)

    for d in DTYPES:
        add("copy2d", d, _copy(d, 128, 64, 32, False))
        add("copy2d_tail", d, _copy(d, 100, 64, 32, False))
        add("copy2d_notma", d, _copy(d, 100, 64, 32, True))
        add("copy1d", d, _copy(d, 256, None, 128, False))
        add("copy1d_tail", d, _copy(d, 200, None, 128, False))
        add("fill", d, _kernel([("B", "(32, 32)", d)], f"""
            f = T.alloc_fragment((32, 32), {d!r})
            T.fill(f, {_one(d)})
            T.copy(f, B)"""))
        add("clear", d, _kernel([("B", "(32, 32)", d)], f"""
            f = T.alloc_shared((32, 32), {d!r})
            T.clear(f)
            T.copy(f, B)"""))
        add("add", d, _elementwise(d, d, "a[i, j] + b[i, j]"))
        add("mul", d, _elementwise(d, d, "a[i, j] * b[i, j]"))
        add("max", d, _elementwise(d, d, "T.max(a[i, j], b[i, j])"))
        add("if_then_else", d, _elementwise(d, d, "T.if_then_else(a[i, j] > b[i, j], a[i, j], b[i, j])"))
        for e in DTYPES:
            if e != d:
                add(f"cast_to_{e}", d, _elementwise(d, e, f"T.cast(a[i, j], {e!r})"))
            if e != d and WIDTH[e] == WIDTH[d] and "bool" not in (d, e):
                add(f"reinterpret_to_{e}", d, _elementwise(d, e, f"T.reinterpret(a[i, j], {e!r})"))
        for kind in ["sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor"]:
            for dim, clear in itertools.product((0, 1), (True, False)):
                if kind == "abssum" and not clear:
                    continue
                add(f"reduce_{kind}_d{dim}{'' if clear else '_acc'}", d, _reduce(d, kind, dim, clear))
        for dim, rev, scope in itertools.product((0, 1), (False, True), ("shared", "fragment")):
            add(f"cumsum_{scope}_d{dim}{'_rev' if rev else ''}", d, _cumsum(d, dim, rev, scope))
        for kind in ["add", "max", "min"]:
            for form in ["scalar", "tile", "return_prev"]:
                add(f"atomic_{kind}_{form}", d, _atomic(d, kind, form))
        if d in MMA:
            add("gemm", d, _gemm(d, MMA[d]))
    return out


def program_text(cell: Cell, lang: str) -> str:
    return f"import {lang}.language as T\n\n\n{cell.text}"


def load(cell: Cell, lang: str, directory=None):
    """``cell``'s main prim_func under ``lang`` ("tilecute" or "tilelang")."""
    directory = directory or tempfile.mkdtemp(prefix="dtype_matrix_")
    name = f"cell_{abs(hash((cell.op, cell.dtype, lang))) % 10**12}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as fh:
        fh.write(program_text(cell, lang))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def _lower_with_tilelang(out_path, archs):
    """Lower every cell with TileLang for each arch; write {"cells": count, "refused": {arch:
    {name: TileLang's error}}} (the cells it lowers are the others)."""
    import tilelang
    from tvm.target import Target

    refused = {arch: {} for arch in archs}
    directory = tempfile.mkdtemp(prefix="dtype_matrix_tl_")
    every = cells()
    for name, cell in sorted(every.items()):
        for arch in archs:
            try:
                func = load(cell, "tilelang", directory)
                with Target({"kind": "cuda", "arch": arch}) as t:
                    tilelang.lower(func, target=t)
            except Exception as e:  # noqa: BLE001 -- the verdict records any refusal
                lines = str(e).strip().splitlines() or [""]
                refused[arch][name] = f"{type(e).__name__}: {lines[-1][:160]}"
        print(name, {a: refused[a].get(name, "ok") for a in archs}, flush=True)
    with open(out_path, "w") as fh:
        json.dump({"cells": len(every), "refused": refused}, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "tilelang":
        _lower_with_tilelang(sys.argv[2], sys.argv[3:] or ["sm_90a", "sm_80"])
    else:
        print(len(cells()), "cells")
