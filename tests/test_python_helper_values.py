"""A plain Python helper (not a ``T.macro``) called in an expression with a buffer argument:
TileLang 0.1.15 runs it as Python on the buffer while the kernel is built, so its value -- an
expression of the buffer's elements, a region of it -- stands where it is called; tilecute
inlines its body as it inlines a ``T.macro``'s (model ports pass tensors to epilogue and
tile helpers this way).  A view it returns with an element offset is refused by name.
And a buffer chosen by a conditional expression: by a Python condition it is that buffer,
by a runtime one it is refused by name (TileLang's ifexp is T.if_then_else, of values)."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.language.parser import FrontendError


def _kernel_body(func):
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def scaled_plus(v, extra, i):
    """v * 2 + extra[i] in fp32 (a helper taking the tensor it reads)."""
    w = v * 2.0
    return w + T.cast(extra[i], "float32")


def row_tile(buf, row, rows):
    """Rows [row * rows, (row + 1) * rows) of a 2-D tensor, all columns: a region."""
    return buf[row * rows:(row + 1) * rows, :]


def test_a_helper_given_a_tensor_yields_its_value():
    @T.prim_func
    def epilogue(X: T.Tensor((128,), "float32"), R: T.Tensor((128,), "float16"),
                 Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                Y[i] = scaled_plus(X[i], R, i)

    src = _kernel_body(epilogue)
    assert "w = X[i] * cutlass.Float32(2.0)" in src
    assert "Y[i] = w + cutlass.Float32(R[i])" in src


def test_a_helper_given_a_tensor_yields_a_region_to_copy():
    @T.prim_func
    def tiles(X: T.Tensor((64, 32), "float16"), Y: T.Tensor((64, 32), "float16")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((16, 32), "float16")
            T.copy(row_tile(X, bx, 16), s)
            T.copy(s, row_tile(Y, bx, 16))

    src = _kernel_body(tiles)
    assert "tct.load(X_desc, tc_smem + 0, tc_bar0, (0, bx * 16), 1024)" in src  # rows bx*16..
    assert "tct.store(Y_desc, tc_smem + 0, (0, bx * 16)" in src
    assert tilecute.compile(tiles, target="sm_90a").ensure_cubin()


def head_view(buf, head):
    """Head `head` of a [heads, ...] tensor as a tensor of its own (TVM's buffer over the
    same storage from an element offset)."""
    size = 1
    for d in buf.shape[1:]:
        size *= d
    return T.Buffer(list(buf.shape[1:]), buf.dtype, data=buf.data, elem_offset=head * size)


def test_a_view_at_an_element_offset_from_a_helper():
    # (was refused; tests/test_view_elem_offset.py: the view starts h * 128 elements in)
    @T.prim_func
    def per_head(X: T.Tensor((4, 8, 16), "float32"), Y: T.Tensor((4, 8, 16), "float32")):
        with T.Kernel(4, threads=128) as h:
            xv = head_view(X, h)
            for i, j in T.Parallel(8, 16):
                Y[h, i, j] = xv[i, j]
    src = _kernel_body(per_head)
    assert re.search(r"head_view_result = cute.make_tensor\(\(X_ptr \+ h \* size\w*\),", src), src
    assert tilecute.compile(per_head, target="sm_90a").ensure_cubin()


plus_one = lambda buf, i: buf[i] + 1.0  # noqa: E731  (a lambda: no `def` to inline)


def test_a_lambda_given_a_tensor_is_still_refused():
    with pytest.raises(FrontendError, match="buffer 'X' passed to `plus_one`"):
        @T.prim_func
        def lam(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    Y[i] = plus_one(X, i)


# ---- a buffer chosen by a condition ------------------------------------------------------------
@T.macro
def _doubled_from(A, B, Y, which, base):
    src = A if which == 0 else B  # `which` is the macro's Python argument: decided while parsing
    for i in T.Parallel(64):
        Y[base + i] = src[i] * 2.0


def test_a_buffer_chosen_by_a_python_condition():
    @T.prim_func
    def chosen(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
               Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=64):
            _doubled_from(A, B, Y, 0, 0)
            _doubled_from(A, B, Y, 1, 64)

    src = _kernel_body(chosen)
    assert "Y[0 + i] = A[i] * cutlass.Float32(2.0)" in src
    assert "Y[64 + i_1_] = B[i_1_] * cutlass.Float32(2.0)" in src


def test_a_buffer_chosen_by_a_runtime_condition_is_refused_by_name():
    # TileLang 0.1.15: ifexp on a PrimExpr is T.if_then_else, which takes no buffer (TypeError)
    with pytest.raises(TypeError, match=r"`A if half == 0 else B`: `A` is a buffer, chosen by the "
                                        r"runtime condition `half == 0`"):
        @T.prim_func
        def runtime_pick(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
                         Y: T.Tensor((2,), "float32")):
            with T.Kernel(1, threads=32):
                for half in T.unroll(2):
                    s = A if half == 0 else B
                    Y[half] = s[0]


def doubled_after_bump(v):
    v = v + 1.0  # rebinds the helper's own name: the caller's variable keeps its value
    return v * 2.0


def test_a_helper_given_an_alloc_var_gets_its_value():
    @T.prim_func
    def by_value(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                acc = T.alloc_var("float32", init=X[i])
                Y[i] = doubled_after_bump(acc) + acc

    src = _kernel_body(by_value)
    assert "acc[0] = acc[0] + " not in src  # the helper's rebinding does not store into acc
    assert re.search(r"Y\[i\] = \(acc\[0\] \+ cutlass\.Float32\(1\.0\)\) \* cutlass\.Float32\(2\.0\) \+ acc\[0\]", src)


def bumped_plus(v, extra, i):
    v = v + 1.0  # the helper's own name, though a tensor argument has it inlined
    return v + extra[i]


def test_an_inlined_helper_gets_an_alloc_vars_value():
    @T.prim_func
    def mixed(X: T.Tensor((32,), "float32"), R: T.Tensor((32,), "float32"),
              Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                acc = T.alloc_var("float32", init=X[i])
                Y[i] = bumped_plus(acc, R, i) * acc

    src = _kernel_body(mixed)
    assert "acc[0] = acc[0] + cutlass.Float32(1.0)" not in src
    # the helper's parameter is a Let of the variable's value at the call, then its own name
    assert re.search(r"\bv = acc\[0\]\n", src)
    m = re.search(r"(\w+) = v \+ cutlass\.Float32\(1\.0\)", src)
    assert m and f"Y[i] = ({m.group(1)} + R[i]) * acc[0]" in src


def fill_doubled(dst, v):
    v = v * 2.0  # the helper's own name (TileLang hands it the variable's value)
    T.fill(dst, v)


def test_a_statement_helper_gets_an_alloc_vars_value():
    @T.prim_func
    def filled(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"),
               Z: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            acc = T.alloc_var("float32", init=X[0])
            fill_doubled(Y, acc)
            Z[0] = acc

    src = _kernel_body(filled)
    assert "acc[0] = acc[0] * cutlass.Float32(2.0)" not in src
    assert "Z[0] = acc[0]" in src


# ---- a T.macro given a T.alloc_var it rebinds ----------------------------------------------------
@T.macro
def _doubled_into(v, Y, i):
    v = v * 2.0  # the macro's own name: TileLang 0.1.15 binds `v: T.float32 = acc[0]`
    Y[i] = v


def test_a_macro_rebinding_its_alloc_var_parameter_leaves_the_variable():
    @T.prim_func
    def doubled(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"),
                Z: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                acc = T.alloc_var("float32", init=X[i])
                _doubled_into(acc, Y, i)
                Z[i] = acc  # X[i], as TileLang: not 2 * X[i]

    src = _kernel_body(doubled)
    assert "acc[0] = acc[0] * cutlass.Float32(2.0)" not in src
    assert re.search(r"\bv = acc\[0\]\n", src) and "Z[i] = acc[0]" in src
    assert re.search(r"(\w+) = v \* cutlass\.Float32\(2\.0\)", src)


@T.macro
def _warp_total(v):
    for o in T.unroll(5):
        v = v + T.shfl_xor(v, 1 << o)  # a rebinding inside the loop body only
    return v


def test_a_parameter_rebound_in_a_loop_and_returned_is_refused_as_tilelang_does():
    # TileLang: "Immutable variable `v` is used outside its defining region"
    with pytest.raises(FrontendError, match=r"'v' is read after the loop/if body that rebinds it"):
        @T.prim_func
        def totals(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                part = T.alloc_var("float32", init=X[tx])
                Y[tx] = _warp_total(part)
