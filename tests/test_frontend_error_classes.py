"""Refusals where TileLang raises ValueError for the same form and argument are
``FrontendValueError``s: still ``FrontendError`` (a ``SyntaxError``) naming the form and
the line, and also a ``ValueError``, so a TileLang program's ``except ValueError`` (or a
test's ``pytest.raises(ValueError)``) catches them.  Errors a ``T.*`` helper raises keep
their class when the parser wraps them with the line."""

import pytest

import tilecute.language as T
from tilecute.language import FrontendError
from tilecute.language.parser import FrontendAssertionError, FrontendTypeError, FrontendValueError

HEAD = '''import tilecute.language as T


@T.prim_func
def kern(G: T.Tensor((64,), "int32"), F: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
'''


def refuse(body: str):
    with pytest.raises(FrontendError) as e:
        T.from_script(HEAD + body)
    line = 6 + body.count("\n")  # the body's last line states the refused form
    assert f"<script>:{line}:" in str(e.value), str(e.value)
    return e.value


@pytest.mark.parametrize("body,message", [
    # TileLang's reduce_op.finalize_reducer: ValueError("finalize_reducer: batch must be >= 1")
    ('        r = T.alloc_reducer((64,), "float32", op="sum")\n'
     '        T.finalize_reducer(r, batch=0)\n', "batch must be >= 1, got 0"),
    # TVM's FloatImm: ValueError("... exceeds maximum of float32")
    ('        v = T.alloc_var("float32", init=1e39)\n', "init=1e+39 exceeds maximum of float32"),
    # TileLang's atomic._get_memory_order_id: ValueError("atomic_store does not support ...")
    ('        T.atomic_store(G[1], 7, memory_order="acquire")\n',
     "T.atomic_store does not support memory_order='acquire'; expected one of"),
    # a T.* helper's own ValueError (TileLang's atomic_load raises it from the same check)
    ('        G[2] = T.atomic_load(G[3], memory_order="acq_rel")\n',
     "T.atomic_load does not support memory_order='acq_rel'"),
    # TileLang's layout inference: TVM_FFI_THROW(ValueError) "... must be injective"
    ('        s = T.alloc_shared((64,), "int32")\n'
     '        T.annotate_layout({s: T.Layout((64,), lambda i: i // 2)})\n',
     "T.Layout on shared buffer `s` must be injective"),
    # TileLang's T.view: ValueError("T.view shape and dtype must preserve the logical bit count")
    ('        s = T.alloc_shared((64,), "float16")\n'
     '        v = T.view(s, (16,), "float32")\n',
     "the view (16,) float32 holds 512 bits but 's' (64,) float16 holds 1024"),
])
def test_value_errors_of_tilelang_are_value_errors(body, message):
    err = refuse(body)
    assert isinstance(err, FrontendValueError) and isinstance(err, ValueError), type(err)
    assert isinstance(err, SyntaxError)
    assert message in str(err), str(err)


def test_reshape_bit_count_is_an_assertion_error():
    # TileLang's T.reshape asserts the bit count (an AssertionError), its T.view raises
    # ValueError for the same check
    err = refuse('        s = T.alloc_shared((64,), "float16")\n'
                 '        v = T.reshape(s, (8, 4))\n')
    assert isinstance(err, FrontendAssertionError) and isinstance(err, AssertionError), type(err)
    assert not isinstance(err, ValueError)
    assert "T.reshape: 'v': the view (8, 4) float16 holds 512 bits" in str(err)


def test_a_helpers_type_error_stays_a_type_error():
    # T.shfl_xor's helper computes with its width, a float: Python's TypeError, kept
    err = refuse('        F[0] = T.shfl_xor(F[0], 1, 16.5)\n')
    assert isinstance(err, FrontendTypeError) and isinstance(err, TypeError), type(err)
    assert "T.shfl_xor" in str(err)


def test_other_refusals_stay_plain_frontend_errors():
    # an unknown memory order for T.atomic_or: TileLang fails in a map lookup, not ValueError
    err = refuse('        T.atomic_or(G[0], 1, memory_order="weak")\n')
    assert type(err) is FrontendError
    assert not isinstance(err, ValueError)
