"""IR JSON and the validator against malformed input: every bad document is a clear
ValueError naming the node or field (never a bare TypeError, KeyError, ZeroDivisionError
or RecursionError, a C++ build error, or a kernel that is silently wrong)."""

import dataclasses
import json

import pytest

import elementwise as E
import tilecute.language as T
from tilecute.ir import ValidationError, from_json, nodes as N, to_json, validate
from tilecute.ir.serialize import IRJSONError
from tilecute.ir.validate import MAX_DEPTH


def _doc():
    return json.loads(to_json(E.vector_add()))


def _kernel(doc):
    return doc["func"]["kernels"][0]


def _load(doc):
    """Decode and validate, as tilecute.compile does with a JSON program."""
    return validate(from_json(json.dumps(doc)))


def test_parallel_loop_over_zero_iterations_is_refused():
    doc = _doc()
    _kernel(doc)["body"][0]["extent"] = {"node": "Const", "value": 0, "dtype": "int32"}
    with pytest.raises(ValidationError, match=r"statement `for i in T.Parallel\(0\):`: a parallel "
                                              r"loop over 0 iterations"):
        _load(doc)


def test_parallel_zero_from_the_frontend_names_the_line():
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(0):
                x[i] = 0.0
    with pytest.raises(ValidationError, match="a parallel loop over 0 iterations") as e:
        T.prim_func(f)
    assert "prim_func 'f'" in str(e.value) and "test_ir_hardening.py:" in str(e.value)


@pytest.mark.parametrize("threads", [[0], [128, 0]])
def test_zero_threads_is_refused(threads):
    doc = _doc()
    _kernel(doc)["threads"] = threads
    with pytest.raises(ValidationError, match="threads is 0; it must be at least 1"):
        _load(doc)


@pytest.mark.parametrize("field,value,message", [
    ("threads", "128", r"func.kernels\[0\]: KernelScope.threads must be a list of ints, got \"128\""),
    ("threads", [128.0], r"KernelScope.threads must be a list of ints, got \[128.0\]"),
    ("threads", 128, r"KernelScope.threads must be a list of ints, got 128"),
    ("producer_threads", True, r"KernelScope.producer_threads must be an int, got true"),
    ("grid", {"node": "Const", "value": 4, "dtype": "int32"}, r"KernelScope.grid must be a list of Expr nodes"),
])
def test_kernel_fields_of_the_wrong_type_name_node_and_field(field, value, message):
    doc = _doc()
    _kernel(doc)[field] = value
    with pytest.raises(IRJSONError, match=message):
        from_json(json.dumps(doc))
    assert issubclass(IRJSONError, ValueError)


def test_a_shape_that_is_not_a_list_names_the_parameter():
    doc = _doc()
    doc["func"]["params"][0]["shape"] = 5
    with pytest.raises(IRJSONError, match=r"func.params\[0\]: Buffer.shape must be a list of Expr "
                                          r"nodes, got 5"):
        from_json(json.dumps(doc))


def test_a_float_dim_names_the_parameter():
    doc = _doc()
    doc["func"]["params"][0]["shape"][0] = {"node": "Const", "value": 2.5, "dtype": "int32"}
    with pytest.raises(ValidationError, match=r"parameter 'A': an int32 constant holds float 2.5"):
        _load(doc)


def test_constants_must_fit_their_dtype():
    doc = _doc()
    store = _kernel(doc)["body"][0]["body"][0]
    store["indices"][0] = {"node": "Const", "value": 2 ** 40, "dtype": "int32"}
    with pytest.raises(ValidationError, match=r"the int32 constant 1099511627776 is out of range"):
        _load(doc)


def test_unknown_dtype_in_json_names_it_and_the_valid_ones():
    doc = _doc()
    doc["func"]["params"][0]["dtype"] = "float17"
    with pytest.raises(IRJSONError, match=r"func.params\[0\]: Buffer.dtype: unknown dtype "
                                          r"'float17'; tilecute dtypes are float16, bfloat16"):
        from_json(json.dumps(doc))


def test_unknown_dtype_in_python_built_ir_names_the_valid_ones():
    func = E.vector_add()
    bad = dataclasses.replace(func, params=(dataclasses.replace(func.params[0], dtype="float17"),)
                              + func.params[1:])
    with pytest.raises(ValidationError, match=r"parameter 'A': unknown dtype 'float17'; tilecute "
                                              r"dtypes are"):
        validate(bad)


def test_binop_nested_3000_deep_is_a_value_error_not_a_recursion_error():
    doc = _doc()
    _kernel(doc)["body"][0]["body"][0]["value"] = "@@"
    leaf = '{"node": "Const", "value": 1.0, "dtype": "float16"}'
    deep = ('{"node": "BinOp", "op": "add", "a": ' * 3000 + leaf
            + (', "b": ' + leaf + ', "dtype": "float16"}') * 3000)
    with pytest.raises(IRJSONError, match="nests deeper"):
        from_json(json.dumps(doc).replace('"@@"', deep))


def test_ir_nested_past_the_limit_is_refused_before_anything_recurses():
    func = E.vector_add()
    k = func.kernels[0]
    loop = k.body[0]
    store = loop.body[0]
    value = store.value
    for _ in range(MAX_DEPTH):
        value = N.BinOp("add", value, N.Const(1.0, "float16"), "float16")
    bad = dataclasses.replace(func, kernels=(dataclasses.replace(k, body=(
        dataclasses.replace(loop, body=(dataclasses.replace(store, value=value),)),)),))
    with pytest.raises(ValidationError, match=f"the IR nests deeper than {MAX_DEPTH} levels"):
        validate(bad)
    # the same document is refused as JSON (it is read, then validated)
    with pytest.raises(ValueError, match="nests deeper"):
        validate(from_json(to_json(bad)))


@pytest.mark.parametrize("extent,axis,message", [
    (-1, 0, r"grid extent -1 along x is negative \(CUDA's range is 1..2147483647"),
    (-3, 2, r"grid extent -3 along z is negative \(CUDA's range is 1..65535"),
    (2 ** 31, 0, "the int32 constant 2147483648 is out of range"),
])
def test_constant_grids_outside_cudas_range_are_refused(extent, axis, message):
    """(A grid past CUDA's y / z limit of 65535 is valid IR, as TileLang compiles it: the
    launcher refuses it at each call, tests/test_grid_limits.py.)"""
    func = E.vector_add()
    k = func.kernels[0]
    grid = tuple(N.Const(1, "int32") for _ in range(axis)) + (N.Const(extent, "int32"),)
    names = ("bx", "by", "bz")[:axis + 1]
    bad = dataclasses.replace(func, kernels=(dataclasses.replace(
        k, grid=grid, block_vars=tuple(N.Var(n, "int32") for n in names)),))
    with pytest.raises(ValidationError, match=message):
        validate(from_json(to_json(bad)))


def test_a_name_python_would_fold_onto_another_is_refused():
    """'ｂx' (fullwidth b) reads as 'bx' in Python source: the loop would overwrite the
    block index and the kernel would be wrong without any error."""
    text = to_json(E.vector_add())
    doc = json.loads(text)
    loop = _kernel(doc)["body"][0]
    loop["var"]["name"] = "\uff42x"
    text = json.dumps(doc).replace('"name": "i"', '"name": "\\uff42x"')
    with pytest.raises(ValidationError, match=r"loop variable name 'ｂx' is not in Unicode NFKC "
                                              r"form: Python would read it as 'bx'"):
        _load(json.loads(text))


def test_fields_must_have_their_types():
    doc = _doc()
    _kernel(doc)["body"][0]["kind"] = 5
    with pytest.raises(IRJSONError, match=r"func.kernels\[0\].body\[0\]: For.kind must be a "
                                          r"string, got 5"):
        from_json(json.dumps(doc))
    doc = _doc()
    _kernel(doc)["body"][0]["num_stages"] = 2.0
    with pytest.raises(IRJSONError, match=r"For.num_stages must be an int, got 2.0"):
        from_json(json.dumps(doc))


def test_text_that_is_not_json_is_a_value_error():
    with pytest.raises(IRJSONError, match="not valid JSON"):
        from_json("{")
    with pytest.raises(IRJSONError, match="not a tilecute IR document"):
        from_json("[1, 2]")


def test_dunder_names_are_refused_by_the_validator():
    import json

    import tilecute.language as T
    from tilecute.ir.serialize import from_json, to_json
    from tilecute.ir.validate import ValidationError, validate

    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                A[i] = 0.0
    doc = to_json(f).replace('"name": "bx"', '"name": "__bx"')
    with pytest.raises(ValidationError, match=r"'__bx' is reserved for generated code"):
        validate(from_json(doc))
    assert json.loads(doc)  # the document itself is well formed
