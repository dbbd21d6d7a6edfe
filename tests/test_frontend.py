"""The T.* frontend: what it accepts, and clear errors at the source line for what it does not."""

import inspect

import pytest

import tilecute.language as T
from tilecute.ir import ValidationError
from tilecute.ir import nodes as N
from tilecute.language import FrontendError


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def _parse_error(fn, exc=(FrontendError, ValidationError)):
    with pytest.raises(exc) as e:
        T.prim_func(fn)
    return str(e.value)


def test_closure_values_fold_at_parse_time():
    block, use_relu = 64, True

    def factory():
        @T.prim_func
        def relu(x: T.Tensor((1024,), "float32"), y: T.Tensor((1024,), "float32")):
            with T.Kernel(1024 // block, threads=block) as bx:
                for i in T.Parallel(block):
                    if use_relu:
                        y[bx * block + i] = T.max(x[bx * block + i], 0.0)
                    else:
                        y[bx * block + i] = x[bx * block + i]
        return relu

    f = factory()
    k = f.kernels[0]
    assert k.grid == (N.Const(16, "int32"),) and k.threads == (64,)
    store = k.body[0].body[0]  # the static `if` picked its branch: no If node
    assert isinstance(store, N.Store) and isinstance(store.value, N.BinOp) and store.value.op == "max"


def test_shadowing_names_get_fresh_ir_variables():
    @T.prim_func
    def f(x: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                v = x[i]
                v = v * 2.0
                x[i] = v
    body = f.kernels[0].body[0].body
    assert [s.var.name for s in body[:2]] == ["v", "v_1"]


def test_unknown_dtype_names_the_line():
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            buf = T.alloc_local((4,), "float17")
            x[0] = 1.0
    msg = _parse_error(f)
    assert "unknown dtype 'float17'" in msg
    assert f":{_line_of(f, 'float17')}:" in msg


def test_unknown_dtype_in_a_parameter_names_the_parameter_and_the_valid_dtypes():
    def f(x: T.Tensor((4,), "complex64")):
        with T.Kernel(1, threads=32) as bx:
            x[0] = 1.0
    msg = _parse_error(f)
    assert "parameter 'x': unknown dtype 'complex64'" in msg
    assert "tilecute dtypes are float16, bfloat16" in msg and "prim_func 'f'" in msg
    assert f":{_line_of(f, 'complex64')}:" in msg


def test_unknown_dtype_outside_a_prim_func_is_a_value_error_that_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown dtype 'float17'; tilecute dtypes are float16"):
        T.dtype_name("float17")
    with pytest.raises(KeyError):  # still a KeyError for callers that catch one
        T.dtype_name("float17")


def test_store_shape_mismatch_names_the_line():
    def f(x: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                x[i] = 1.0
    msg = _parse_error(f)
    assert "'x' has 2 dims but is indexed with 1" in msg
    assert f":{_line_of(f, 'x[i] = 1.0')}:" in msg
    assert "prim_func 'f'" in msg


def test_undefined_name_names_the_line():
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                x[i] = y_undefined + 1.0
    msg = _parse_error(f)
    assert "name 'y_undefined' is not defined" in msg
    assert f":{_line_of(f, 'y_undefined')}:" in msg


def test_unsupported_python_construct_names_the_line():
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            assert bx == 0
    msg = _parse_error(f)
    assert "`assert bx == 0` tests a runtime value: use T.device_assert" in msg
    assert f":{_line_of(f, 'assert bx')}:" in msg


def test_kernel_with_2048_threads_is_rejected_at_its_line():
    def f(x: T.Tensor((4096,), "float32")):
        with T.Kernel(2, threads=2048) as bx:
            for i in T.Parallel(2048):
                x[bx * 2048 + i] = 0.0
    msg = _parse_error(f)
    assert "2048 threads per block; CUDA allows at most 1024" in msg
    assert f":{_line_of(f, 'threads=2048')}:" in msg


def test_buffer_used_as_a_value_is_an_error():
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                x[i] = x + 1.0
    assert "buffer 'x' used as a value" in _parse_error(f)


def test_statement_forms_outside_prim_func_raise():
    with pytest.raises(RuntimeError, match="only be used inside a @T.prim_func"):
        T.copy(1, 2)


def test_symbolic_dims_are_collected_in_first_use_order():
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def f(a: T.Tensor((N, M), "float16"), b: T.StridedTensor((M,), (N,), "float16")):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            for i in T.Parallel(128):
                b[bx * 128 + i] = a[0, bx * 128 + i]
    assert [s.name for s in f.symbols] == ["N", "M"]
    assert f.params[1].strides == (N,)


def test_reading_a_name_after_the_loop_that_rebinds_it_is_an_error():
    # TileLang's builder: the rebinding is an immutable value of the loop body only, and
    # the read after the loop is "used outside its defining region"
    def f(x: T.Tensor((16,), "float32"), y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = 0.0
            for k in T.serial(16):
                s += x[k]
            y[0] = s
    msg = _parse_error(f)
    assert "'s' is read after the loop/if body that rebinds it" in msg and "T.alloc_local" in msg
    assert f":{_line_of(f, 'y[0] = s')}:" in msg
    assert f"(line {_line_of(f, 's += x[k]')})" in msg


def test_rebinding_inside_the_same_block_is_a_new_binding():
    @T.prim_func
    def f(x: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for k in T.serial(16):
                v = x[k]
                v += 1.0
                x[k] = v
    body = f.kernels[0].body[0].body
    assert [type(s).__name__ for s in body] == ["Let", "Let", "Store"]
