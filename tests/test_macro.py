"""``@T.macro``: TileLang's inlined helpers (its attention kernels are written with them).
A macro called as a statement inside a ``@T.prim_func`` body is inlined there: parameters
bound to the call's buffers, expressions and Python values (defaults and keywords too),
other names resolved where the macro is defined, locations pointing into the macro."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError

SCALE = 3.0  # read by `scaled_copy` from its own module


@T.macro
def scaled_copy(src, dst, n, factor=SCALE):
    for i in T.Parallel(n):
        dst[i] = src[i] * factor


@T.macro
def twice(src, dst, n):
    scaled_copy(src, dst, n, factor=2.0)
    scaled_copy(dst, dst, n)


def test_macro_is_inlined_with_buffers_expressions_and_defaults():
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((256,), "float32")
            scaled_copy(A, s, 256)
            twice(s, B, n=128)

    stores = [x for x in walk_stmts(f.kernels[0].body) if isinstance(x, N.Store)]
    assert [st.buffer for st in stores] == ["s", "B", "B"]
    assert [st.value.b.value for st in stores] == [3.0, 2.0, 3.0]  # the default, then 2.0, 3.0
    loops = [x for x in walk_stmts(f.kernels[0].body) if isinstance(x, N.For)]
    assert [lp.extent.value for lp in loops] == [256, 128, 128]
    assert stores[1].loc.file == __file__  # the macro's own lines


def test_macro_builds_a_cubin(tmp_path):
    @T.prim_func
    def g(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            twice(A, B, 1024)

    assert tilecute.build_cubin(g, "sm_90a", out_dir=str(tmp_path)).kernel_names


@T.macro
def returns_value(x):
    return x + 1


def test_macro_errors_name_the_macro():
    with pytest.raises(FrontendError, match="T.macro 'returns_value' returns a value"):
        @T.prim_func
        def h(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                returns_value(A)
    with pytest.raises(FrontendError, match=r"T.macro 'scaled_copy': missing a required argument: 'n'"):
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                scaled_copy(A, A)
    with pytest.raises(TypeError, match="inlined by @T.prim_func"):
        scaled_copy(1, 2, 3)
    with pytest.raises(ValueError, match="hygienic=False"):
        T.macro(hygienic=False)
