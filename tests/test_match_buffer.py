"""TVMScript's buffer and variable forms as TileLang programs write them: ``T.handle``
parameters bound by ``T.match_buffer`` (or TileLang's ``T.make_tensor``) at the top of the
body (``T.ptr`` parameters are pointers: tests/test_pointers.py), symbols declared ``n = T.int32()`` / ``T.var("int32")``, ``T.decl_buffer``,
``T.buffer``, ``T.meta_var``.  A matched parameter is the tensor ``A: T.Tensor(shape,
dtype)`` would declare (``T.StridedTensor`` with ``strides=``): the same IR, the same launch
ABI.  CPU: IR, ABI, sm_90a cubins, the refusals naming their argument and line; GPU: the
kernels against torch."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


# ---- the same kernel written both ways ---------------------------------------------------
def _scale_tensor():
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor((m, n), T.float16), B: T.Tensor((m, n), T.float32)):
        with T.Kernel(T.ceildiv(n, 64), T.ceildiv(m, 4), threads=128) as (bx, by):
            for i, j in T.Parallel(4, 64):
                B[by * 4 + i, bx * 64 + j] = T.cast(A[by * 4 + i, bx * 64 + j], T.float32) * 2.0

    return scale


def _scale_match():
    @T.prim_func
    def scale(a: T.handle, b: T.handle):
        m = T.int32()
        n = T.var("int32")
        A = T.match_buffer(a, (m, n), T.float16)
        B = T.match_buffer(b, [m, n], dtype="float32", align=16, offset_factor=1)
        with T.Kernel(T.ceildiv(n, 64), T.ceildiv(m, 4), threads=128) as (bx, by):
            for i, j in T.Parallel(4, 64):
                B[by * 4 + i, bx * 64 + j] = T.cast(A[by * 4 + i, bx * 64 + j], T.float32) * 2.0

    return scale


def _scale_ptr():  # TileLang's T.make_tensor on a T.handle: its Tensor.from_ptr, a match
    @T.prim_func
    def scale(a: T.handle, b: T.handle):
        m, n = T.dynamic("m, n")
        A = T.make_tensor(a, (m, n), T.float16)
        B = T.make_tensor(b, (m, n), T.float32)
        with T.Kernel(T.ceildiv(n, 64), T.ceildiv(m, 4), threads=128) as (bx, by):
            for i, j in T.Parallel(4, 64):
                B[by * 4 + i, bx * 64 + j] = T.cast(A[by * 4 + i, bx * 64 + j], T.float32) * 2.0

    return scale


def _rows_strided():
    m, n, s0 = T.dynamic("m"), T.dynamic("n"), T.dynamic("s0")

    @T.prim_func
    def rows(X: T.StridedTensor((m, n), (s0, 1), T.float32), Y: T.Tensor((m, n), T.float32)):
        with T.Kernel(m, threads=128) as bx:
            for j in T.Parallel(n):
                Y[bx, j] = X[bx, j] + 1.0

    return rows


def _rows_match_strided():
    @T.prim_func
    def rows(x: T.handle, y: T.handle):
        m = T.int32()
        n = T.int32()
        X = T.match_buffer(x, (m, n), T.float32, strides=("s0", 1))
        Y = T.match_buffer(y, (m, n), T.float32)
        with T.Kernel(m, threads=128) as bx:
            for j in T.Parallel(n):
                Y[bx, j] = X[bx, j] + 1.0

    return rows


def _same(f, g):
    assert f.script() == g.script()
    assert [(p.name, p.dtype, p.shape, p.strides) for p in f.params] == \
        [(p.name, p.dtype, p.shape, p.strides) for p in g.params]
    assert lower(f, "sm_90a").abi.to_json() == lower(g, "sm_90a").abi.to_json()


def test_match_buffer_is_the_tensor_parameter():
    _same(_scale_tensor(), _scale_match())
    _same(_scale_tensor(), _scale_ptr())


def test_symbols_take_the_names_their_assignments_give():
    f = _scale_match()
    assert [s.name for s in f.symbols] == ["m", "n"]
    assert [p.name for p in f.params] == ["A", "B"]  # the tensors' names, not the handles'


def test_strides_make_a_strided_tensor():
    f, g = _rows_strided(), _rows_match_strided()
    _same(f, g)
    assert g.params[0].strides[0] == N.Var("s0", "int32")


def test_match_buffer_compiles_to_a_cubin(tmp_path):
    info = tilecute.build_cubin(_rows_match_strided(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernels


def test_handle_params_mix_with_body_annotations_and_scalars():
    f = T.from_script('''
import tilecute.language as T

@T.prim_func
def mixed(a: T.handle, B, k: T.int32):
    n = T.int32()
    A = T.match_buffer(a, (n * 2,), T.float32)
    B: T.Tensor((n * 2,), T.float32)
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            B[i] = A[i] * k
''')
    assert [(p.name, type(p).__name__) for p in f.params] == \
        [("A", "Buffer"), ("B", "Buffer"), ("k", "Var")]
    assert f.params[0].shape == (N.binop("mul", N.Var("n", "int32"), N.Const(2, "int32")),)


# ---- kernel-body forms ------------------------------------------------------------------
def _body(body: str) -> N.PrimFunc:
    return T.from_script('''
import tilecute.language as T

@T.prim_func
def body(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64):
''' + "".join(f"        {line}\n" for line in body.strip().splitlines()))


def test_decl_buffer_is_a_view_or_an_allocation():
    decl = _body('''
s = T.alloc_shared((64,), T.float32)
v = T.decl_buffer((8, 8), T.float32, data=s.data, scope="shared")
loc = T.decl_buffer((4,), T.float32, scope="local")
for i in T.Parallel(64):
    s[i] = A[i]
loc[0] = v[1, 2]
B[0] = loc[0]
''')
    view = _body('''
s = T.alloc_shared((64,), T.float32)
v = T.view(s, (8, 8), T.float32)
loc = T.alloc_local((4,), T.float32)
for i in T.Parallel(64):
    s[i] = A[i]
loc[0] = v[1, 2]
B[0] = loc[0]
''')
    assert decl == view


def test_buffer_and_buffer_decl_are_tvms_T_Buffer():
    spelled = [_body(f'''
s = T.alloc_shared((64,), T.float32)
v = {form}((2, 32), T.float32, data=s.data)
B[0] = v[1, 3]
''') for form in ("T.Buffer", "T.buffer", "T.buffer_decl")]
    assert spelled[0] == spelled[1] == spelled[2]


def test_meta_var_names_the_expression_itself():
    f = _body('''
acc = T.alloc_local((1,), T.float32)
acc[0] = A[0]
late = T.meta_var(acc[0] * 2.0)
early = acc[0] * 2.0
acc[0] = 5.0
B[0] = late
B[1] = early
''')
    text = f.script()
    assert "B[0] = acc[0] * T.float32(2.0)" in text  # read where it is used: 10
    assert "early = acc[0] * T.float32(2.0)" in text and "B[1] = early" in text  # a Let: 2 * A[0]


def test_var_declares_a_symbol_for_let():
    f = _body('''
n = T.var("int32")
T.let(n, 3)
B[n] = A[n]
''')
    assert "n = 3" in f.script()


# ---- refusals ---------------------------------------------------------------------------
def _error(body: str, params: str = "a: T.handle") -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script('''
import tilecute.language as T

@T.prim_func
def bad(''' + params + '''):
''' + "".join(f"    {line}\n" for line in body.strip().splitlines()) + '''    with T.Kernel(1, threads=32):
        pass
''')
    return str(e.value)


@pytest.mark.parametrize("arg, value, why", [
    ("data", "a", "data=a is not supported"),
    ("elem_offset", "4", "elem_offset=4 is not supported"),
    ("scope", '"shared"', "scope='shared' is not supported"),
    ("offset_factor", "16", "offset_factor=16 is not supported: tilecute does not check"),
    ("buffer_type", '"auto_broadcast"', "buffer_type='auto_broadcast' is not supported"),
    ("axis_separators", "[1]", "is not supported: tilecute's tensors are not flattened"),
    ("align", "3", "align is an int (a power of two"),
])
def test_match_buffer_refuses_what_it_does_not_honor(arg, value, why):
    msg = _error(f"A = T.match_buffer(a, (64, 64), T.float32, {arg}={value})")
    assert "<script>:6:" in msg and "T.match_buffer" in msg and why in msg, msg


@pytest.mark.parametrize("body, params, why", [
    ("", "a: T.handle", "parameter 'a': T.handle is bound by no `A = T.match_buffer(a, shape, "
                        "dtype)`"),
    ("A = T.match_buffer(a, (4,))", 'a: T.handle("float32", "shared")',
     "T.handle(storage_scope='shared') is not supported"),
    ("A = T.match_buffer(a)", "a: T.handle", "the shape must be given"),
    ("A = T.match_buffer(a, (4,))\nB = T.match_buffer(a, (4,))", "a: T.handle",
     "parameter 'a' is already bound to 'A'"),
    ("A = T.match_buffer(B, (4,))", 'a: T.handle, B: T.Tensor((4,), "float32")',
     "param must be a T.handle parameter of bad (it is another kind of parameter)"),
    ("B = T.match_buffer(a, (4,))", 'a: T.handle, B: T.Tensor((4,), "float32")',
     "'B' is already a parameter"),
    ("A = T.match_buffer(a, (m,))", "a: T.handle, m: T.int32",
     "a dim is the scalar parameter 'm'"),
    ("A = T.match_buffer(a[0:4], (4,))", "a: T.handle",
     "TVM's match of a buffer region"),
    ("A = T.match_buffer(a, (4,), bogus=1)", "a: T.handle",
     "T.match_buffer: got an unexpected keyword argument 'bogus'"),
    ("A = T.make_tensor(a, (4,), T.float32, (1,), 7)", "a: T.handle",
     "T.make_tensor: unexpected positional argument 5 (`7`)"),
    ("M = T.const('M')", "A: T.Tensor((4,), \"float32\")",
     "T.const declares the dims of a @tilecute.jit eager kernel"),
])
def test_refusals_name_the_form_and_argument(body, params, why):
    msg = _error(body, params)
    assert why in msg, msg


def test_a_match_inside_a_kernel_or_after_it_is_refused_where_it_stands():
    text = '''
import tilecute.language as T

@T.prim_func
def late(a: T.handle, B: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32):
        A = T.match_buffer(a, (4,), T.float32)
'''
    with pytest.raises(FrontendError, match=r"<script>:7: .*T.match_buffer binds a T.handle "
                                            r"parameter to a tensor at the top"):
        T.from_script(text)
    with pytest.raises(FrontendError, match=r"<script>:8: .*T.match_buffer after other "
                                            r"statements"):
        T.from_script(text.replace("        A = T.match", "    A = T.match").replace(
            "    with T.Kernel(1, threads=32):\n", "    with T.Kernel(1, threads=32):\n"
            "        B[0] = 1.0\n"))


def test_eager_match_buffer_on_a_ptr_parameter_declares_it():
    """TileLang's eager jit: `A: T.ptr` and `A = T.match_buffer(A, [M, N], T.float32)` bind
    the tensor passed for A (its T.const dims from the tensor), as `A: T.Tensor(...)`."""
    @tilecute.jit
    def add_one(A: T.ptr, block: int = 64):
        M, N = T.const("M, N")
        A = T.match_buffer(A, [M, N], T.float32)
        with T.Kernel(T.ceildiv(N, block), M, threads=64) as (bx, by):
            for j in T.Parallel(block):
                A[by, bx * block + j] = A[by, bx * block + j] + 1.0
    src = add_one.compile(torch.zeros(3, 128)).get_kernel_source()
    assert "A = cute.make_tensor(A_ptr, cute.make_layout((3, 128,), stride=(128, 1,)))" in src


def test_eager_match_buffer_nested_is_refused_naming_the_form():
    with pytest.raises(FrontendError, match=r"test_match_buffer.py:\d+: .*T.match_buffer in an "
                                            r"eager kernel is not supported by tilecute "
                                            r"inside another statement"):
        @tilecute.jit
        def add_one(A: T.ptr, is_2d: bool = True):
            if is_2d:
                M, N = T.const("M, N")
                A = T.match_buffer(A, [M, N], T.float32)
                with T.Kernel(M, threads=64) as by:
                    A[by, 0] = A[by, 0] + 1.0


def test_decl_buffer_refuses_tvm_buffer_details():
    with pytest.raises(FrontendError, match=r"T.decl_buffer: strides=\(1,\) is not supported"):
        _body('''
s = T.alloc_shared((64,), T.float32)
v = T.decl_buffer((64,), T.float32, data=s.data, strides=(1,))
''')


def test_tvm_block_forms_stay_refused_by_name():
    # (`with T.sblock(...)`, T.reads and T.writes in one: tests/test_sblock_safe_values.py)
    for form in ("T.reads()", "with T.block():\n    pass"):
        with pytest.raises(FrontendError, match=r"T\.reads annotates a TVM block|T\.block is a "
                                                r"TileLang form that tilecute does not support"):
            _body(form)


# ---- on the GPU -------------------------------------------------------------------------
FORMS = '''
import tilecute.language as T

@T.prim_func
def forms(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (64,), T.float32)
    B = T.match_buffer(b, (32, 4), T.float32)
    with T.Kernel(1, threads=32):
        s = T.alloc_shared((64,), T.float32)
        v = T.decl_buffer((8, 8), T.float32, data=s.data, scope="shared")
        acc = T.decl_buffer((1,), T.float32, scope="local")
        n = T.var("int32")
        T.let(n, 3)
        tx = T.get_thread_binding()
        for i in T.Parallel(64):
            s[i] = A[i]
        acc[0] = A[tx]
        late = T.meta_var(acc[0] * 2.0)
        early = acc[0] * 2.0
        acc[0] = 5.0
        B[tx, 0] = late
        B[tx, 1] = early
        B[tx, 2] = v[tx // 8, tx % 8 + 0] + n
        B[tx, 3] = acc[0]
'''


def test_forms_kernel_compiles_to_a_cubin(tmp_path):
    assert tilecute.build_cubin(T.from_script(FORMS), "sm_90a", out_dir=str(tmp_path)).kernels


@pytest.mark.gpu
@pytest.mark.parametrize("make", [_scale_match, _scale_ptr])
def test_gpu_matched_tensors(make):
    kernel = tilecute.compile(make())
    a = torch.randn(37, 200, device="cuda", dtype=torch.float16)
    b = torch.empty(37, 200, device="cuda", dtype=torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.float() * 2)


@pytest.mark.gpu
def test_gpu_matched_strides_read_a_column_slice():
    kernel = tilecute.compile(_rows_match_strided())
    wide = torch.randn(9, 300, device="cuda", dtype=torch.float32)
    x = wide[:, 10:210]  # strides (300, 1)
    y = torch.empty(9, 200, device="cuda", dtype=torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x + 1)


@pytest.mark.gpu
def test_gpu_out_idx_allocates_a_matched_output():
    kernel = tilecute.compile(_scale_match(), out_idx=[1])
    a = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a), a.float() * 2)


@pytest.mark.gpu
def test_gpu_meta_var_decl_buffer_and_var():
    kernel = tilecute.compile(T.from_script(FORMS))
    a = torch.randn(64, device="cuda", dtype=torch.float32)
    b = torch.empty(32, 4, device="cuda", dtype=torch.float32)
    kernel(a, b)
    want = torch.stack([torch.full((32,), 10.0, device="cuda"), a[:32] * 2, a[:32] + 3,
                        torch.full((32,), 5.0, device="cuda")], dim=1)
    torch.testing.assert_close(b, want)


@pytest.mark.gpu
def test_gpu_jit_factory_with_handles():
    @tilecute.jit(out_idx=[1])
    def doubled(block: int):
        @T.prim_func
        def main(x: T.handle, y: T.handle):
            n = T.int32()
            X = T.match_buffer(x, (n,), T.float32)
            Y = T.match_buffer(y, (n,), T.float32)
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2.0

        return main

    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(doubled(128)(x), x * 2)
