"""TVM's ``elem_offset`` on a buffer view (``T.Buffer(shape, dtype, data=A.data,
elem_offset=k)``, ``T.decl_buffer(..., data=A.data, elem_offset=k)``): the view starts
``k`` of its elements into ``A``'s storage.  TileLang 0.1.15 reads a global view so (its
CUDA for ``tail = T.Buffer((128,), data=A.data, elem_offset=128)`` reads
``tail[threadIdx.x + 128]``); tilecute makes the view's tensor at ``A``'s pointer plus
``k`` (``Allocate.view_offset``), for an offset known to be a multiple of 16 bytes, and
refuses the rest by name."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func as script
from tilecute.ir.serialize import from_json, to_json
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


def tail_doubled(n=256):
    @T.prim_func
    def tail2(A: T.Tensor((n,), "float32"), B: T.Tensor((n // 2,), "float32")):
        with T.Kernel(1, threads=128):
            tail = T.Buffer((n // 2,), "float32", data=A.data, elem_offset=n // 2)
            for i in T.Parallel(n // 2):
                B[i] = tail[i] * 2.0
    return tail2


def head_of(buf, h):
    """Head ``h`` of a [heads, rows, cols] tensor as a tensor of its own (a helper)."""
    size = 1
    for d in buf.shape[1:]:
        size *= d
    return T.Buffer(list(buf.shape[1:]), buf.dtype, data=buf.data, elem_offset=h * size)


def per_head(heads=4, rows=8, cols=16):
    @T.prim_func
    def scale_heads(X: T.Tensor((heads, rows, cols), "float32"), Y: T.Tensor((heads, rows, cols), "float32")):
        with T.Kernel(heads, threads=128) as h:
            xv = head_of(X, h)
            for i, j in T.Parallel(rows, cols):
                Y[h, i, j] = xv[i, j] * 3.0 + T.cast(h, "float32")
    return scale_heads


def lower_rows_wide(rows=32, cols=64):
    """The lower half of a float16 tile through a decl_buffer view, read 8 lanes a thread
    step; then a float32 view of that view (its start counted in float32 elements)."""
    @T.prim_func
    def lower_half(A: T.Tensor((2 * rows, cols), "float16"), B: T.Tensor((rows, cols), "float16"),
                   W: T.Tensor((rows * cols // 2,), "float32")):
        with T.Kernel(1, threads=128):
            lo = T.decl_buffer((rows, cols), "float16", data=A.data, elem_offset=rows * cols)
            lo32 = T.Buffer((rows * cols // 2,), "float32", data=lo.data)
            for i, j in T.Parallel(rows, cols):
                B[i, j] = lo[i, j] + T.float16(1.0)
            for i in T.Parallel(rows * cols // 2):
                W[i] = lo32[i]
    return lower_half


def kernel_source(func):
    return tilecute.compile(func, target="sm_90a").get_kernel_source()


def test_a_static_offset_view_starts_there(tmp_path):
    func = tail_doubled()
    assert 'tail = T.Buffer((128,), "float32", data=A.data, elem_offset=128)' in script(func)
    assert from_json(to_json(func)) == func
    src = kernel_source(func)
    assert ("tail = cute.make_tensor((A_ptr + 128), cute.make_layout((128,), stride=(1,)))"
            "  # T.Buffer(data=A.data, elem_offset=128)") in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_run_time_offset_from_a_helper(tmp_path):
    func = per_head()
    text = script(func)
    assert re.search(r'head_of_result = T.Buffer\(\(8, 16\), "float32", data=X.data, '
                     r'elem_offset=h \* size\w*\)', text), text
    src = kernel_source(func)
    assert re.search(r"head_of_result = cute.make_tensor\(\(X_ptr \+ h \* size\w*\), "
                     r"cute.make_layout\(\(8, 16,\), stride=\(16, 1,\)\)\)", src), src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_an_offset_view_keeps_vector_accesses_and_views_of_it_count_from_it(tmp_path):
    func = lower_rows_wide()
    src = kernel_source(func)
    assert "lo = cute.make_tensor((A_ptr + 2048)," in src, src
    # a float32 view of `lo`: 2048 float16 elements are 1024 float32 ones
    assert "lo32 = cute.make_tensor((cute.recast_ptr(A_ptr, dtype=cutlass.Float32) + 1024)," in src, src
    abi = lower(func, "sm_90a").abi
    assert abi.arg("A").align == 16  # the 8-lane float16 vectors of `lo`, as of A itself
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    for arch in ("sm_80",):
        assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path / arch)).kernel_names


def test_a_scoped_safe_value_keeps_the_views_offset():
    @T.prim_func
    def padded(A: T.Tensor((2, 64), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            second = T.Buffer((60,), "float32", data=A.data, elem_offset=64)
            s = T.alloc_shared((64,), "float32")
            with T.sblock("pad"):
                T.annotate_safe_value({A: -1.0})
                T.copy(second[0:64], s)
            T.copy(s, B)
    func = lower(padded, "sm_90a").func
    offsets = {a.buffer.name: a.view_offset for k in func.kernels for a in _allocates(k.body)
               if a.view_of == "A"}
    # the block's views of A and of `second` (reads out of bounds give its safe value)
    assert offsets == {"second": N.Const(64, "int32"), "A_pad": None,
                       "second_pad": N.Const(64, "int32")}, offsets


def _allocates(body):
    from tilecute.ir.visitor import walk_stmts
    return [s for s in walk_stmts(body) if isinstance(s, N.Allocate)]


@pytest.mark.parametrize("decl, message", [
    ('v = T.Buffer((16,), "float32", data=A.data, elem_offset=1)',
     "'v': the view starts 1 float32 elements into 'A', not known to be a multiple of 16 bytes"),
    ('v = T.Buffer((16,), "float32", data=A.data, elem_offset=bx * 2)',
     "'v': the view starts bx * 2 float32 elements into 'A', not known to be a multiple of 16 bytes"),
    ('v = T.Buffer((16,), "float32", data=A.data, elem_offset=I[0] * 4)',
     "elem_offset=`I[0] * 4` is not supported: tilecute takes an integer >= 0 that reads no memory"),
    ('v = T.Buffer((16,), "float32", data=A.data, elem_offset=64)',
     "'v': the view (16,) float32 at element 64 ends 64 bytes past the end of 'A' (64,) float32"),
    ('s = T.alloc_shared((64,), "float32")\n            v = T.Buffer((16,), "float32", data=s.data, '
     'elem_offset=16, scope="shared")',
     "'v': elem_offset=16 on shared buffer 's' is not supported: tilecute lays a shared view over"),
    ('v = T.decl_buffer((16,), "float32", elem_offset=16, scope="local")',
     "elem_offset=16 is not supported: an allocation starts at its own first element"),
])
def test_offsets_tilecute_does_not_take_are_refused_by_name(decl, message):
    source = f'''
import tilecute.language as T

@T.prim_func
def viewed(A: T.Tensor((64,), "float32"), I: T.Tensor((1,), "int32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(2, threads=32) as bx:
            {decl}
            for i in T.Parallel(16):
                B[i] = A[i]
'''
    with pytest.raises(FrontendError) as e:
        T.from_script(source)
    assert message in str(e.value), str(e.value)
    assert "in prim_func 'viewed'" in str(e.value)


# ---- on a GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
def test_offset_views_on_gpu():
    import torch
    a = torch.randn(256, device="cuda")
    b = torch.empty(128, device="cuda")
    tilecute.compile(tail_doubled())(a, b)
    torch.testing.assert_close(b, a[128:] * 2.0)

    x = torch.randn(4, 8, 16, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(per_head())(x, y)
    torch.testing.assert_close(y, x * 3.0 + torch.arange(4, device="cuda").view(4, 1, 1))

    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.empty(32, 64, device="cuda", dtype=torch.float16)
    w = torch.empty(32 * 64 // 2, device="cuda")
    tilecute.compile(lower_rows_wide())(a, b, w)
    torch.testing.assert_close(b, a[32:] + 1.0)
    torch.testing.assert_close(w, a[32:].contiguous().view(torch.float32).flatten())
