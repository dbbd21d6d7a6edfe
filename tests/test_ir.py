"""IR: JSON round trip, printer round trip, validator messages."""

import dataclasses
import json

import pytest

import elementwise as E
import tilecute.language as T
from tilecute.ir import from_json, to_json, validate, ValidationError
from tilecute.ir import nodes as N
from tilecute.language import from_script

EXAMPLES = [(name, fac(dt) if dt else fac())
            for name, fac in E.ALL.items()
            for dt in (["float16", "bfloat16", "float32"] if name == "math_ops" else [None])]


@pytest.mark.parametrize("name,func", EXAMPLES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXAMPLES)])
def test_json_round_trip_is_exact(name, func):
    text = to_json(func)
    back = from_json(text)
    assert back == func
    # locations are kept too (they are not part of equality)
    assert back.kernels[0].loc == func.kernels[0].loc is not None
    assert to_json(back) == text
    assert json.loads(text)["schema"] == "tilecute.ir"


@pytest.mark.parametrize("name,func", EXAMPLES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXAMPLES)])
def test_printer_output_reparses_to_the_same_ir(name, func):
    script = func.script()
    assert f"def {func.name}(" in script
    assert from_script(script) == func


def test_json_rejects_other_versions_and_unknown_nodes():
    func = E.vector_add()
    doc = json.loads(to_json(func))
    doc["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        from_json(json.dumps(doc))
    doc = json.loads(to_json(func))
    doc["func"]["kernels"][0]["node"] = "Bogus"
    with pytest.raises(ValueError, match="unknown node type 'Bogus'"):
        from_json(json.dumps(doc))


def test_validator_names_function_statement_and_line():
    func = E.vector_add()
    k = func.kernels[0]
    loop = k.body[0]
    store = loop.body[0]
    bad_store = dataclasses.replace(store, indices=store.indices + (N.Const(0, "int32"),))
    bad = dataclasses.replace(
        func, kernels=(dataclasses.replace(k, body=(dataclasses.replace(loop, body=(bad_store,)),)),))
    with pytest.raises(ValidationError) as e:
        validate(bad)
    msg = str(e.value)
    assert "prim_func 'vector_add'" in msg
    assert "C[" in msg and "has 1 dims but the store gives 2 indices" in msg
    assert f"elementwise.py:{store.loc.line}" in msg


def test_validator_rejects_undefined_variable_from_json():
    func = E.vector_add()
    k = func.kernels[0]
    loop = k.body[0]
    store = loop.body[0]
    ghost = dataclasses.replace(store, value=N.Cast("float16", N.Var("ghost", "int32")))
    bad = dataclasses.replace(
        func, kernels=(dataclasses.replace(k, body=(dataclasses.replace(loop, body=(ghost,)),)),))
    with pytest.raises(ValidationError, match="name 'ghost' is not defined"):
        validate(from_json(to_json(bad)))


def test_tile_ops_are_ir_nodes_that_round_trip():
    @T.prim_func
    def tiles(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
              C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            row = T.alloc_fragment((128,), "float32")
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32:k * 32 + 32, 0:128], Bs[0:32, 0:128])
                T.gemm(As, Bs, acc, transpose_B=False)
            T.reduce_max(acc, row, dim=1)
            T.fill(acc, 0.0)
            T.atomic_add(C[0, 0], 1.0)
            T.copy(acc, C[bx * 128, 0])

    assert from_json(to_json(tiles)) == tiles
    assert from_script(tiles.script()) == tiles
    kinds = [type(s).__name__ for s in tiles.kernels[0].body]
    assert kinds[:5] == ["Allocate", "Allocate", "Allocate", "Allocate", "Clear"]
    assert "Reduce" in kinds and "AtomicAdd" in kinds and "Fill" in kinds
