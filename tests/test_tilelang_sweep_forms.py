"""Forms TileLang's own tests use that tilecute misread or lacked (helper O's sweep of
TileLang's testing/python): each program here is written for this file, in TileLang's
idioms; a CPU test builds its sm_90a cubin, a GPU test checks it against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


# ---- a T.* form, a T.macro or a function bound to a local name -------------------------------
@T.macro
def _bump(frag, n):
    for i in T.Parallel(n):
        frag[i] = frag[i] + 1.0


@T.macro
def _double(frag, n):
    for i in T.Parallel(n):
        frag[i] = frag[i] * 2.0


def scan_by_name(op: str, rows=8, cols=64):
    """A scan picked in Python and called through a local name (``scan = T.cumsum if ...``),
    then a macro and an intrinsic picked the same way."""

    @T.prim_func
    def pick(X: T.Tensor((rows, cols), T.float32), Y: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((rows, cols), T.float32)
            frag = T.alloc_fragment((rows * cols,), T.float32)
            T.copy(X, tile)
            scan = T.cumsum if op == "sum" else T.cummax
            scan(src=tile, dim=1, reverse=op == "sum")
            for i, j in T.Parallel(rows, cols):
                frag[i * cols + j] = tile[i, j]
            step = _bump if op == "sum" else _double
            step(frag, rows * cols)
            act = T.abs
            for i, j in T.Parallel(rows, cols):
                Y[i, j] = act(frag[i * cols + j])
    return pick


def test_forms_bound_to_local_names_parse_as_their_calls(tmp_path):
    text = scan_by_name("sum").script()
    assert "T.cumsum(tile, tile, dim=1, reverse=True)" in text
    assert "frag[i_1] = frag[i_1] + T.float32(1.0)" in text
    assert "Y[i_2, j_1] = T.abs(frag[i_2 * 64 + j_1])" in text
    text = scan_by_name("max").script()
    assert "T.cummax(tile, tile, dim=1, reverse=False)" in text and "T.float32(2.0)" in text
    assert tilecute.build_cubin(scan_by_name("max"), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_refused_form_bound_to_a_name_is_refused_at_its_call():
    def build():
        @T.prim_func
        def k(X: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                clc = T.clc_is_canceled
                clc(X[0])
        return k
    with pytest.raises(FrontendError, match=r"T\.clc_is_canceled is a TileLang form"):
        build()


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
def test_forms_bound_to_local_names_on_gpu(op):
    import torch
    x = torch.randn(8, 64, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(scan_by_name(op))(x, y)
    if op == "sum":
        ref = (x.flip(1).cumsum(1).flip(1) + 1.0).abs()
    else:
        ref = (x.cummax(1).values * 2.0).abs()
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)


# ---- T.cumsum / T.cummax of a part of a shared buffer ----------------------------------------
def scan_of_part(op="sum", dim=1, reverse=False, rows=8, cols=40, pitch=64, r0=3, out_of_place=True):
    """Rows r0.. r0+rows of a wider shared tile scanned as a region, in place or into a part
    of another tile with a different pitch; the elements around the region must not move."""

    @T.prim_func
    def part_scan(A: T.Tensor((rows + r0, pitch), T.float32),
                  B: T.Tensor((rows + r0, pitch + 16), T.float32)):
        with T.Kernel(1, threads=256):
            wide = T.alloc_shared((rows + r0, pitch), T.float32)
            other = T.alloc_shared((rows + r0, pitch + 16), T.float32)
            T.copy(A, wide)
            for i, j in T.Parallel(rows + r0, pitch + 16):
                other[i, j] = -1.0
            scan = T.cumsum if op == "sum" else T.cummax
            if out_of_place:
                scan(wide[r0:r0 + rows, 0:cols], other[r0:r0 + rows, 0:cols], dim=dim,
                     reverse=reverse)
            else:
                scan(src=wide[r0:r0 + rows, 0:cols], dim=dim, reverse=reverse)
                T.copy(wide, other[0:rows + r0, 0:pitch])
            T.copy(other, B)
    return part_scan


def test_scan_of_a_shared_part_goes_through_a_tile_of_its_shape(tmp_path):
    text = scan_of_part().script()
    assert 'wide_part = T.alloc_shared((8, 40), "float32")' in text
    assert "T.copy(wide[3:11, 0:40], wide_part, disable_tma=True)" in text
    assert "T.cumsum(wide_part, wide_part, dim=1, reverse=False)" in text
    assert "T.copy(wide_part, other[3:11, 0:40], disable_tma=True)" in text
    text = scan_of_part("max", dim=0, reverse=True, out_of_place=False).script()
    assert "T.cummax(wide_part, wide_part, dim=0, reverse=True)" in text
    assert "T.copy(wide_part, wide[3:11, 0:40], disable_tma=True)" in text
    for i, func in enumerate((scan_of_part(), scan_of_part("max", 0, True, out_of_place=False))):
        assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / str(i))).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("dim,reverse", [(0, False), (1, False), (0, True), (1, True)])
@pytest.mark.parametrize("out_of_place", [True, False])
def test_scan_of_a_shared_part_on_gpu(op, dim, reverse, out_of_place):
    import torch
    rows, cols, pitch, r0 = 8, 40, 64, 3
    a = torch.randint(-3, 4, (rows + r0, pitch), device="cuda").float()
    b = torch.empty(rows + r0, pitch + 16, device="cuda")
    tilecute.compile(scan_of_part(op, dim, reverse, rows, cols, pitch, r0, out_of_place))(a, b)
    part = a[r0:, :cols]
    if reverse:
        part = part.flip(dim)
    part = part.cumsum(dim) if op == "sum" else part.cummax(dim).values
    if reverse:
        part = part.flip(dim)
    ref = torch.full_like(b, -1.0)
    if not out_of_place:
        ref[:, :pitch] = a
    ref[r0:, :cols] = part
    torch.testing.assert_close(b, ref)


# ---- tilelang.transform.simplify_prim_func / apply_simplify ----------------------------------
def test_simplify_prim_func_and_apply_simplify_give_the_prim_func_back(tmp_path):
    from tilecute.transform import simplify_prim_func
    from tilecute.transform.simplify import apply_simplify

    @simplify_prim_func
    def row_scale(rows: int, cols: int, block: int = 64):
        @T.prim_func
        def scale(X: T.Tensor((rows, cols), T.float16), Y: T.Tensor((rows, cols), T.float16)):
            with T.Kernel(T.ceildiv(cols, block), rows, threads=64) as (bx, by):
                for j in T.Parallel(block):
                    if bx * block + j < cols:
                        Y[by, bx * block + j] = X[by, bx * block + j] * T.float16(2.0)
        return scale

    func = row_scale(4, 200)
    assert func == row_scale.__wrapped__(4, 200) and func.name == "scale"
    assert apply_simplify(func) is func and apply_simplify(func, inline_let=True) is func
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    with pytest.raises(ValueError, match=r"simplify_prim_func: expected a prim_func"):
        simplify_prim_func(lambda: "not a function")()
    with pytest.raises(ValueError, match=r"apply_simplify: expected a prim_func"):
        apply_simplify(42)
    from tilecute.transform import simplify
    with pytest.raises(NotImplementedError, match=r"tilelang\.transform\.simplify\.Simplify"):
        simplify.Simplify()


# ---- an eager kernel's T.empty sized by a scalar parameter -----------------------------------
def test_eager_empty_sized_by_a_scalar_parameter_is_allocated_from_it(cache_dir):
    @tilecute.jit
    def ramp(count: T.int32):
        out = T.empty([count + 1], T.float32)
        with T.Kernel(1, threads=32):
            for i in T.serial(count + 1):
                out[i] = T.cast(i, T.float32)
        return out

    kernel = ramp.compile(7)  # (was refused; tests/test_empty_scalar_dims.py)
    (out,) = kernel._allocate([7], kernel.out_idx)
    assert tuple(out.shape) == (8,)


# ---- None for a tensor argument that no kernel uses ------------------------------------------
def biased_rows(with_bias: bool, rows=4, cols=64):
    """TileLang's optional-bias idiom: ``Bias`` (and ``Extra``) are parameters that a
    Python flag leaves unread, so the caller may pass None for them."""

    @T.prim_func
    def rows_plus(A: T.Tensor((T.dynamic("m"), cols), T.float32),
                  C: T.Tensor((T.dynamic("m"), cols), T.float32),
                  Bias: T.Tensor((cols,), T.float32),
                  Extra: T.Tensor((T.dynamic("m"), cols), T.float32)):
        with T.Kernel(T.ceildiv(A.shape[0], rows), threads=128) as bx:
            for i, j in T.Parallel(rows, cols):
                if with_bias:
                    C[bx * rows + i, j] = A[bx * rows + i, j] + Bias[j]
                else:
                    C[bx * rows + i, j] = A[bx * rows + i, j] * 2.0
    return rows_plus


def test_an_unused_tensor_argument_may_be_none(tmp_path):
    import torch
    from tilecute.transform.pipeline import lower

    abi = lower(biased_rows(False), "sm_90a").abi
    assert [getattr(a, "nullable", None) for a in abi.args] == [False, False, True, True]
    assert [a.nullable for a in lower(biased_rows(True), "sm_90a").abi.args] == \
        [False, False, False, True]
    kernel = tilecute.compile(biased_rows(False), target="sm_90a")
    launcher = (kernel.path / "launcher.cpp").read_text()
    assert 'tc_tensor_arg_or_none(args[2], "Bias")' in launcher
    assert 'tc_check_pointer_device(t_Extra, "Extra", device_id, "A")' in launcher
    a, c = torch.randn(8, 64), torch.empty(8, 64)
    # every value check passes with None (the CPU tensors fail the device check, last)
    for bias, extra in ((None, None), (torch.randn(64), None), (None, torch.randn(8, 64))):
        with pytest.raises(ValueError, match="argument 'A': expected a CUDA tensor"):
            kernel(a, c, bias, extra)
    # a tensor given for it is checked as any other
    with pytest.raises(ValueError, match="Bias"):
        kernel(a, c, torch.randn(65), None)
    with pytest.raises(ValueError, match="Extra"):
        kernel(a, c, None, torch.randn(9, 64))
    used = tilecute.compile(biased_rows(True), target="sm_90a")
    with pytest.raises(TypeError, match="argument 'Bias': expected a tensor, got None"):
        used(a, c, None, None)


@pytest.mark.gpu
def test_an_unused_tensor_argument_may_be_none_on_gpu():
    import torch
    a = torch.randn(12, 64, device="cuda")
    c = torch.empty_like(a)
    tilecute.compile(biased_rows(False))(a, c, None, None)
    torch.testing.assert_close(c, a * 2.0)
    bias = torch.randn(64, device="cuda")
    tilecute.compile(biased_rows(True))(a, c, bias, None)
    torch.testing.assert_close(c, a + bias)


# ---- pass_configs tl.disable_shared_memory_reuse ---------------------------------------------
def staged_twice(n=512):
    """Two shared tiles used one after the other: by default they share bytes."""

    @T.prim_func
    def twice(X: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.float16),
              Z: T.Tensor((n,), T.float16)):
        with T.Kernel(1, threads=128):
            first = T.alloc_shared((n,), T.float16)
            second = T.alloc_shared((n,), T.float16)
            acc = T.alloc_fragment((n,), T.float16)
            T.copy(X, first)
            for i in T.Parallel(n):
                acc[i] = first[i] * T.float16(2.0)
            T.copy(Y, second)
            for i in T.Parallel(n):
                acc[i] = acc[i] + second[i]
            T.copy(acc, Z)
    return twice


def test_disable_shared_memory_reuse_gives_each_buffer_its_bytes(tmp_path):
    from tilecute import PassConfigKey
    from tilecute.ir import nodes as N
    from tilecute.options import from_pass_configs
    from tilecute.transform.pipeline import run_passes

    def slots(options):
        func = run_passes(staged_twice(), "sm_90a", options)
        scope = func.kernels[0]
        return ({s.buffer.name: s.slot.offset for s in scope.body
                 if isinstance(s, N.Allocate) and s.buffer.scope == "shared"}, scope.shared_bytes)

    assert slots({}) == ({"first": 0, "second": 0}, 1024)  # one after the other: shared bytes
    options = from_pass_configs({PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: True}, "twice")
    assert options == {"disable_shared_memory_reuse": True}
    assert slots(options) == ({"first": 0, "second": 1024}, 2048)
    assert from_pass_configs({"tl.disable_shared_memory_reuse": False}, "twice") == \
        {"disable_shared_memory_reuse": False}
    kernel = tilecute.compile(staged_twice(), target="sm_90a",
                              pass_configs={PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: True})
    assert kernel.ensure_cubin()


@pytest.mark.gpu
@pytest.mark.parametrize("disable", [False, True])
def test_disable_shared_memory_reuse_on_gpu(disable):
    import torch
    x, y = torch.randn(512, device="cuda").half(), torch.randn(512, device="cuda").half()
    z = torch.empty_like(x)
    tilecute.compile(staged_twice(), pass_configs={"tl.disable_shared_memory_reuse": disable})(
        x, y, z)
    torch.testing.assert_close(z, x * 2 + y, rtol=1e-2, atol=1e-2)


# ---- TVM's blockIdx/threadIdx T.thread_binding loops at the top level ------------------------
def bound_loops(rows=64, cols=32, rows_per_block=8):
    """TVM's kernel: blockIdx.y and threadIdx.y/x loops; every thread runs the body."""

    @T.prim_func
    def scaled(A: T.Tensor((rows, cols), T.float32), B: T.Tensor((rows, cols), T.float32)):
        for by in T.thread_binding(0, rows // rows_per_block, thread="blockIdx.y"):
            for ty in T.thread_binding(rows_per_block, thread="threadIdx.y"):
                for tx in T.thread_binding(cols, thread="threadIdx.x"):
                    B[by * rows_per_block + ty, tx] = A[by * rows_per_block + ty, tx] * 3.0 + tx
    return scaled


def test_top_level_thread_binding_loops_are_a_kernel(tmp_path):
    text = bound_loops().script()
    assert "with T.Kernel(1, 8, threads=(32, 8)) as (unbound_block_x, by):" in text
    assert "ty = T.get_thread_binding(1)" in text and "tx = T.get_thread_binding(0)" in text
    assert tilecute.build_cubin(bound_loops(), "sm_90a", out_dir=str(tmp_path)).kernel_names
    # TVM's tag as the second positional argument: T.thread_binding(128, "threadIdx.x")
    head = 'import tilecute.language as T\n\n@T.prim_func\n'
    top = T.from_script(head + '''def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    for i in T.thread_binding(128, "threadIdx.x"):
        B[i] = A[i]
''')
    assert "with T.Kernel(1, threads=128) as unbound_block_x:\n        i = T.get_thread_binding(0)" \
        in top.script()
    inside = T.from_script(head + '''def inside(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.thread_binding(128, "threadIdx.x")
        A[tx] = 1.0
''')
    assert "tx = T.get_thread_binding(0)" in inside.script()

    def refused(body: str, message: str):
        src = ("import tilecute.language as T\n\n@T.prim_func\n"
               "def k(A: T.Tensor((8, 32), T.float32)):\n" + body)
        with pytest.raises(FrontendError, match=message):
            T.from_script(src)
    refused('    for bx in T.thread_binding(1, 8, thread="blockIdx.x"):\n        A[bx, 0] = 1.0\n',
            "the range must start at 0")
    outer = '    for bx in T.thread_binding(8, thread="blockIdx.x"):\n'
    refused(outer + '        for b2 in T.thread_binding(8, thread="blockIdx.x"):\n'
                    '            A[bx, 0] = 1.0\n', "blockIdx.x is bound twice")
    refused(outer + '        for tx in T.thread_binding(32, thread="threadIdx.x"):\n'
                    '            A[bx, tx] = 1.0\n'
                    '        A[bx, 0] = 2.0\n', "nothing may follow the inner loop")
    refused('    for bx in T.thread_binding(8, thread="vthread"):\n        A[bx, 0] = 1.0\n',
            "binds blockIdx.x/y/z or threadIdx.x/y/z")


@pytest.mark.gpu
def test_top_level_thread_binding_loops_on_gpu():
    import torch
    a = torch.randn(64, 32, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(bound_loops())(a, b)
    torch.testing.assert_close(b, a * 3.0 + torch.arange(32, device="cuda").float())


# ---- T.ptx_cp_async at an element whose address cannot be aligned ----------------------------
def test_ptx_cp_async_at_a_misaligned_element_is_refused_at_its_line(tmp_path):
    def program(dst: int, src: int, n: int):
        return f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((64,), T.uint8), B: T.Tensor((64,), T.uint8)):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((64,), T.uint8)
        T.ptx_cp_async(T.access_ptr(S[{dst}], "w", {n}), T.access_ptr(A[{src}], "r", {n}), {n})
        T.ptx_commit_group()
        T.ptx_wait_group(0)
        B[0] = S[{dst}]
'''
    with pytest.raises(FrontendError, match=r"<script>:8: .*T.ptx_cp_async: `T.access_ptr\(S\[8\], "
                                            r"'w', 16\)` is byte 8 of 'S', not a multiple of the 16"):
        T.from_script(program(8, 16, 16))
    with pytest.raises(FrontendError, match=r"`T.access_ptr\(A\[4\], 'r', 8\)` is byte 4 of 'A'"):
        T.from_script(program(8, 4, 8))
    ok = T.from_script(program(8, 24, 8))  # 8-byte copies at bytes 8 and 24
    assert tilecute.build_cubin(ok, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- tilelang.layout's submodules ------------------------------------------------------------
def test_layout_submodules_import_by_their_paths(tmp_path):
    import tilecute.layout as L
    from tilecute.layout.fragment import Fragment
    from tilecute.layout.layout import Layout
    from tilecute.layout.swizzle import make_full_bank_swizzled_layout, make_swizzled_layout

    assert (make_swizzled_layout, Fragment, Layout) == (L.make_swizzled_layout, L.Fragment,
                                                        L.Layout)
    from tilecute.layout.swizzle import make_volta_swizzled_layout
    assert "not supported by tilecute" in repr(make_volta_swizzled_layout)
    with pytest.raises(ImportError):
        from tilecute.layout.swizzle import no_such_layout  # noqa: F401

    @T.prim_func
    def staged(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), T.float16)
            T.annotate_layout({tile: make_full_bank_swizzled_layout(tile)})
            T.copy(A, tile)
            T.copy(tile, B)
    assert tilecute.build_cubin(staged, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- T.cast(..., sat=False) ------------------------------------------------------------------
def test_cast_sat_false_converts_as_tilelang_does(tmp_path):
    """TileLang's code generator reads ``sat`` only for stochastic rounding: a cast with
    sat=False is the cast with sat=True."""
    x = T.float32(1.5)
    for dtype in ("float8_e4m3", "float16", "bfloat16", "int8"):
        assert T.cast(x, dtype, sat=False) == T.cast(x, dtype)

    @T.prim_func
    def narrow(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float8_e4m3)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = T.cast(A[i], T.float8_e4m3, sat=False)
    assert "T.Cast(\"float8_e4m3\", A[i])" in narrow.script()
    assert tilecute.build_cubin(narrow, "sm_90a", out_dir=str(tmp_path)).kernel_names
