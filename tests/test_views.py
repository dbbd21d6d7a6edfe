"""TileLang's buffer views (issue 17): ``T.view(buf, shape, dtype)``, ``T.reshape(buf,
shape)`` and ``T.Tensor(shape, dtype, buf.data)`` of shared, fragment, local and global
buffers.  A view is an ``Allocate`` with ``view_of``; what the passes give it (the base's
bytes, layout, slot and registers), that views compile to sm_90a cubins, what is refused
and why, and (GPU) the results against torch."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import run_passes


def _allocs(func) -> dict:
    return {s.buffer.name: s for k in func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate)}


# ---- programs ------------------------------------------------------------------------------
def _every_scope():
    """A view of each scope: a global parameter, shared (another dtype), local, fragment."""
    @T.prim_func
    def every_scope(A: T.Tensor((1024,), T.float16), B: T.Tensor((32, 64), T.int8),
                    C: T.Tensor((1024,), T.float32), D: T.Tensor((128, 8), T.float32)):
        with T.Kernel(1, threads=128) as _:
            A2 = T.Tensor((32, 32), T.float16, A.data)
            s = T.alloc_shared((32, 32), T.float16)
            s8 = T.view(s, (32, 64), dtype=T.int8)
            loc = T.alloc_local((8,), T.float32)
            loc2 = T.reshape(loc, (2, 4))
            fr = T.alloc_fragment((1024,), T.float32)
            fr2 = T.reshape(fr, [32, 32])
            T.copy(A2[0:32, 0:32], s)
            T.copy(s8, B[0:32, 0:64])
            T.copy(C, fr)
            for i, j in T.Parallel(32, 32):
                fr2[i, j] = fr2[i, j] * 2 + i
            T.copy(fr, C)
            tx = T.get_thread_binding()
            for i in T.serial(8):
                loc[i] = i + tx
            for i, j in T.grid(2, 4):
                loc2[i, j] = loc2[i, j] * (i + 1)
            for i in T.serial(8):
                D[tx, i] = loc[i]
    return every_scope


def _fragment_reshape(n, m, dtype):
    """TileLang's reshape of a (n // m, m) fragment to (n,), copied out through shared."""
    @T.prim_func
    def fragment_reshape(A: T.Tensor((n // m, m), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=32) as _:
            A_shared = T.alloc_shared((n // m, m), dtype)
            A_frag = T.alloc_fragment((n // m, m), dtype)
            B_shared = T.alloc_shared((n,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_frag)
            flat = T.reshape(A_frag, [n])
            T.copy(flat, B_shared)
            T.copy(B_shared, B)
    return fragment_reshape


def _reduce_after_reshape(n, m, dtype):
    """Rows of m of a (n,) fragment reduced through its (n // m, m) reshape."""
    @T.prim_func
    def reduce_after_reshape(A: T.Tensor((n,), dtype), B: T.Tensor((n // m,), dtype)):
        with T.Kernel(1, threads=32) as _:
            A_frag = T.alloc_fragment((n,), dtype)
            B_frag = T.alloc_fragment((n // m,), dtype)
            T.copy(A, A_frag)
            rows = T.reshape(A_frag, [n // m, m])
            T.reduce_max(rows, B_frag, dim=1)
            T.copy(B_frag, B)
    return reduce_after_reshape


def _absmax_groups(m=2, groups=3, per=128):
    """An int64 fragment reshaped to (m, groups, per) before it is filled, reduced over
    its last dim."""
    @T.prim_func
    def absmax_groups(A: T.Tensor((m, groups * per), T.int64), B: T.Tensor((m, groups), T.int64)):
        with T.Kernel(1, threads=128) as _:
            A_frag = T.alloc_fragment((m, groups * per), T.int64)
            grouped = T.reshape(A_frag, [m, groups, per])
            B_frag = T.alloc_fragment((m, groups), T.int64)
            T.copy(A, A_frag)
            T.reduce_absmax(grouped, B_frag, dim=2)
            T.copy(B_frag, B)
    return absmax_groups


def _global_view(n, m, dtype, new_dtype):
    """A global (n,) tensor read as (n // m, m * ratio) elements of ``new_dtype``."""
    from tilecute.runtime.dtypes import DTYPES

    cols = m * DTYPES[dtype].bits // DTYPES[new_dtype].bits

    @T.prim_func
    def global_view(A: T.Tensor((n,), dtype), B: T.Tensor((n // m, cols), new_dtype)):
        with T.Kernel(1) as _:
            viewed = T.view(A, (n // m, cols), dtype=new_dtype)
            T.copy(viewed[0:n // m, 0:cols], B)
    return global_view


def _shared_reinterpret(shape, dtype, new_shape, new_dtype, swizzled):
    """Written through a shared buffer (TMA, with its swizzle), read through its view."""
    import tilecute.layout as TL

    @T.prim_func
    def shared_reinterpret(A: T.Tensor(shape, dtype), B: T.Tensor(new_shape, new_dtype)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared(shape, dtype)
            viewed = T.view(A_shared, new_shape, dtype=new_dtype)
            if swizzled:
                T.annotate_layout({A_shared: TL.make_swizzled_layout(A_shared)})
            T.copy(A, A_shared)
            T.copy(viewed, B)
    return shared_reinterpret


def _local_bits():
    """A local float32 buffer's halves read back as float16 pairs."""
    @T.prim_func
    def local_bits(A: T.Tensor((128, 4), T.float32), B: T.Tensor((128, 8), T.float16)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            words = T.alloc_local((4,), T.float32)
            halves = T.view(words, (8,), dtype=T.float16)
            for i in T.serial(4):
                words[i] = A[tx, i]
            for i in T.serial(8):
                B[tx, i] = halves[i]
    return local_bits


def _conv(block_m=64, block_n=64, block_k=32):
    """TileLang's convolution idiom: the filter and the output as 2-D views of the 4-D
    parameters (T.Tensor(shape, dtype, buf.data)), with symbolic dims."""
    n, h, w, c, f = T.dynamic("N, H, W, C, F")

    @T.prim_func
    def conv(data: T.Tensor((n, h, w, c), T.float16), kernel: T.Tensor((3, 3, c, f), T.float16),
             out: T.Tensor((n, h, w, f), T.float16)):
        with T.Kernel(T.ceildiv(f, block_n), T.ceildiv(n * h * w, block_m), threads=128) as (bx, by):
            data_shared = T.alloc_shared((block_m, block_k), T.float16)
            kernel_shared = T.alloc_shared((block_k, block_n), T.float16)
            acc = T.alloc_fragment((block_m, block_n), T.float32)
            kernel_flat = T.Tensor((3 * 3 * c, f), T.float16, kernel.data)
            out_flat = T.Tensor((n * h * w, f), T.float16, out.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(9 * c, block_k), num_stages=2):
                T.im2col(data, data_shared, by, k, 3, 1, 1, 1)
                T.copy(kernel_flat[k * block_k, bx * block_n], kernel_shared)
                T.gemm(data_shared, kernel_shared, acc)
            T.copy(acc, out_flat[by * block_m, bx * block_n])
    return conv


def _stacked_operand():
    """Two (64, 64) tiles of a (2, 64, 64) shared buffer multiplied as one (128, 64) view:
    the view is the T.gemm operand, so its swizzle lays out the base."""
    @T.prim_func
    def stacked_operand(A: T.Tensor((2, 64, 64), T.float16), B: T.Tensor((64, 64), T.float16),
                        C: T.Tensor((128, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((2, 64, 64), T.float16)
            stacked = T.reshape(a, (128, 64))
            b = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((128, 64), T.float32)
            for s, i, j in T.Parallel(2, 64, 64):
                a[s, i, j] = A[s, i, j]
            T.copy(B, b)
            T.gemm(stacked, b, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C)
    return stacked_operand


# ---- IR: printed, parsed back, JSON --------------------------------------------------------
def test_views_print_parse_and_serialize():
    func = _every_scope()
    text = func.script()
    assert 'A2 = T.view(A, (32, 32), "float16")' in text
    assert 's8 = T.view(s, (32, 64), "int8")' in text
    assert 'loc2 = T.view(loc, (2, 4), "float32")' in text
    allocs = _allocs(func)
    assert {n: a.view_of for n, a in allocs.items() if a.view_of} == {
        "A2": "A", "s8": "s", "loc2": "loc", "fr2": "fr"}
    assert allocs["A2"].buffer.scope == "global" and allocs["s8"].buffer.scope == "shared"
    assert T.from_script(text) == func
    assert from_json(func.to_json()) == func
    lowered = run_passes(func, until="infer_layouts")  # (vectors and slots are not printed)
    assert T.from_script(lowered.script()) == lowered  # layouts printed on views too
    assert from_json(lowered.to_json()) == lowered


def test_view_of_a_view_views_the_base():
    f = T.from_script(textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64, 64), "float16")
                v = T.reshape(s, (4096,))
                w = T.view(v, (2048,), "float32")
                u = T.Tensor((4096,), "float16", w.data)
                T.copy(A, s)
    '''))
    assert {n: a.view_of for n, a in _allocs(f).items() if a.view_of} == {"v": "s", "w": "s", "u": "s"}


# ---- passes --------------------------------------------------------------------------------
def test_shared_view_takes_its_bases_slot_and_layout():
    func = run_passes(_shared_reinterpret((64, 64), "float32", (64, 128), "bfloat16", True))
    a = _allocs(func)
    base, view = a["A_shared"], a["viewed"]
    assert base.layout == N.Layout("tma_swizzled", swizzle=128)  # rows of 256 bytes both
    assert view.layout == base.layout and view.slot == base.slot
    assert func.kernels[0].shared_bytes < 2 * 64 * 64 * 4  # the view has no bytes of its own
    # the base was loaded by TMA (its swizzle is one the view shares); the view read after it
    text = func.script()
    assert "T.tma_copy(A, A_shared" in text
    assert text.index("T.mbarrier_wait_parity") < text.index("= viewed[")


def test_writes_through_a_view_are_ordered_before_reads_of_the_base():
    f = T.from_script(textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((128,), "float32"), B: T.Tensor((64, 2), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((128,), "float32")
                v = T.reshape(s, (64, 2))
                for i in T.Parallel(128):
                    s[i] = A[127 - i]
                T.copy(v, B)
    '''))
    text = run_passes(f).script()
    assert text.index("s[i] = A[") < text.index("T.sync_threads()") < text.index("= v[")


def test_fragment_view_shares_its_bases_layout():
    func = run_passes(_reduce_after_reshape(1024, 32, "float32"))
    a = _allocs(func)
    assert a["rows"].layout == a["A_frag"].layout and a["rows"].layout.kind == "blocked"


def test_fragment_views_are_replicated_together():
    f = T.from_script(textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                f = T.alloc_fragment((64,), "float32")
                g = T.reshape(f, (8, 8))
                T.copy(A, f)
                for i in T.Parallel(64):
                    B[i] = g[i % 8, i // 8]
    '''))
    a = _allocs(run_passes(f))
    assert a["f"].layout.kind == a["g"].layout.kind == "replicated"


def test_global_view_is_as_wide_and_aligned_as_it_needs():
    from tilecute.transform.pipeline import lower

    plan = lower(_global_view(1024, 32, "float32", "float16"))
    (a, b) = plan.abi.args
    assert a.align == 16  # the view's 16-byte vector loads read A's bytes


def test_global_views_keep_copies_off_tma():
    func = run_passes(_conv())
    text = func.script()
    assert "kernel_flat = T.view(kernel, (9 * C, F), \"float16\")" in text
    assert "T.tma_copy(kernel_flat" not in text and "= kernel_flat[" in text


def test_view_operand_lays_out_its_base():
    a = _allocs(run_passes(_stacked_operand()))
    assert a["a"].layout == a["stacked"].layout == N.Layout("tma_swizzled", swizzle=128)


# ---- cubins ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    _every_scope,
    lambda: _fragment_reshape(1024, 32, "float32"),
    lambda: _fragment_reshape(2048, 64, "float16"),
    lambda: _reduce_after_reshape(2048, 64, "float16"),
    _absmax_groups,
    lambda: _global_view(1024, 32, "float32", "float16"),
    lambda: _global_view(2048, 64, "float16", "float32"),
    lambda: _shared_reinterpret((64, 64), "float32", (64, 128), "bfloat16", False),
    lambda: _shared_reinterpret((64, 128), "bfloat16", (64, 64), "float32", True),
    _local_bits, _conv, _stacked_operand,
], ids=["every_scope", "frag_f32", "frag_f16", "reduce", "absmax3d", "global_narrow",
        "global_wide", "shared_linear", "shared_swizzled", "local_bits", "conv", "operand"])
def test_views_compile_to_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_generated_code_makes_views_over_the_same_storage(tmp_path):
    tilecute.build_cubin(_every_scope(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "A2 = cute.make_tensor(A_ptr, cute.make_layout((32, 32,), stride=(32, 1,)))" in src
    assert "s8 = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Int8)" in src
    assert "loc2 = loc  # T.view of loc" in src and "fr2 = fr  # T.view of fr" in src
    tilecute.build_cubin(_local_bits(), "sm_90a", out_dir=str(tmp_path / "b"))
    src = (tmp_path / "b" / "kernel_cute.py").read_text()
    assert "halves = cute.recast_tensor(words, cutlass.Float16)" in src


# ---- refusals: the form, the argument, the line --------------------------------------------
def _refused(body: str, error=FrontendError) -> str:
    text = textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
    ''') + textwrap.indent(textwrap.dedent(body), " " * 8)
    with pytest.raises(error) as e:
        run_passes(T.from_script(text))
    return str(e.value)


def test_view_must_keep_the_bits():
    msg = _refused('''
        s = T.alloc_shared((64, 64), "float16")
        v = T.view(s, (64, 64), "float32")
    ''')
    assert "<script>:9:" in msg and "T.view: 'v'" in msg
    assert "holds 131072 bits but 's' (64, 64) float16 holds 65536" in msg
    msg = _refused('''
        s = T.alloc_shared((64, 64), "float16")
        v = T.reshape(s, (64, 65))
    ''')
    assert "<script>:9:" in msg and "T.reshape: 'v'" in msg


def test_tensor_view_may_cover_fewer_bits_but_not_more():
    msg = _refused('''
        s = T.alloc_shared((64, 64), "float16")
        v = T.Tensor((64, 128), "float16", s.data)
    ''')
    assert "<script>:9:" in msg and "T.Tensor: 'v'" in msg and "holds" in msg
    f = T.from_script(textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                part = T.Tensor((32, 64), "float16", A.data)
                part[bx, 0] = T.float16(0)
    '''))
    assert _allocs(f)["part"].view_of == "A"


def test_fragment_view_of_another_dtype_is_refused():
    msg = _refused('''
        f = T.alloc_fragment((64, 64), "float16")
        g = T.view(f, (64, 32), "float32")
    ''')
    assert "<script>:9:" in msg and "T.view: 'g'" in msg and "fragment 'f'" in msg


def test_view_of_a_gemm_accumulator_other_than_a_split_is_refused():
    # a split of the rows and columns is honored (tests/test_accumulator_reshape.py); a flattening
    # of an MMA register layout is not
    from tilecute.transform.accumulator_views import AccumulatorViewError

    msg = _refused('''
        a = T.alloc_shared((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        accv = T.reshape(acc, (4096,))
        T.copy(A, a)
        T.gemm(a, a, acc, transpose_B=True, clear_accum=True)
        for i in T.Parallel(4096):
            accv[i] = accv[i] * 2
        T.copy(acc, B)
    ''', AccumulatorViewError)
    assert "<script>:10:" in msg and "'accv' (4096,)" in msg and "accumulator 'acc'" in msg \
        and "split of its rows and of its columns" in msg


@pytest.mark.parametrize("rows, value", [
    (32, "af[i, j] + acc[i, j]"),  # the view reads bytes the base wrote
    (16, "acc[i, j]"),  # the view's statements do not begin by writing all of it
], ids=["reads_base_bytes", "partial_write"])
def test_view_with_other_row_bytes_of_a_chunked_swizzled_operand_is_refused(rows, value):
    # 'a' has 256-byte rows: its 128-byte swizzle stores each row as two chunks, a layout
    # over its rows that a view with 512-byte rows cannot read
    text = textwrap.dedent(f'''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 128), "float16")
                af = T.view(a, (32, 128), "float32")
                acc = T.alloc_fragment((64, 64), "float32")
                T.copy(A, a)
                T.gemm(a, a, acc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel({rows}, 64):
                    af[i, j] = {value}
    ''')
    with pytest.raises(LayoutError) as e:
        run_passes(T.from_script(text))
    msg = str(e.value)
    assert "<script>:8:" in msg and "shared view 'af' of 'a'" in msg
    assert "rows have 512 bytes and the rows of 'a' 256" in msg
    assert "cuts its rows into 128-byte chunks" in msg
    assert "write all of the view before reading it" in msg


def _operand_bytes_view():
    """A float32 view with 256-byte rows of a GEMM operand's fp16 tile of 128-byte rows
    (one chunk of its 128-byte swizzle a row), read after the GEMM: the view's element
    (i, j) is the bytes 8 * (i * 64 + j) of the tile as loaded."""
    @T.prim_func
    def operand_bytes(A: T.Tensor((64, 64), "float16"), B: T.Tensor((32, 64), "float32"),
                      C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((64, 64), "float16")
            af = T.view(a, (32, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.gemm(a, a, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C)
            for i, j in T.Parallel(32, 64):
                B[i, j] = af[i, j]
    return operand_bytes


def _swizzled_reshape(n, m, dtype, shape):
    """TileLang's T.reshape of a shared tile it swizzles (``make_mma_swizzle_layout``: rows
    of one 128-byte chunk), copied out through the reshape."""
    from tilecute.cuda.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def swizzled_reshape(A: T.Tensor((n // m, m), dtype), B: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=32) as _:
            a_s = T.alloc_shared((n // m, m), dtype)
            T.annotate_layout({a_s: make_mma_swizzle_layout(a_s)})
            T.copy(A, a_s)
            r = T.reshape(a_s, shape)
            T.copy(r, B)
    return swizzled_reshape


def test_views_of_a_one_chunk_swizzled_tile_read_its_flat_offsets(tmp_path):
    # the base's rows fit one chunk, so its pattern is on its flat offset: a view with
    # other rows takes the same pattern on its own flat offset (flat=True)
    func = run_passes(_swizzled_reshape(1024, 32, "float32", (1024,)))
    a = _allocs(func)
    assert a["a_s"].layout == N.Layout("tma_swizzled", swizzle=128)
    assert a["r"].layout == N.Layout("tma_swizzled", swizzle=128, flat=True)
    assert 'T.Layout("tma_swizzled", swizzle=128, flat=True)' in func.script()
    src = tilecute.compile(_swizzled_reshape(1024, 32, "float32", (1024,))).get_kernel_source()
    # 16-byte vectors of the 1-D view at its flat index, XORed as the base's bytes
    assert "r.iterator + cute.assume((i1) ^ (((i1) >> 3) & 28), divby=4)" in src
    src = tilecute.compile(_swizzled_reshape(2048, 64, "float16", (16, 128))).get_kernel_source()
    assert "^ (((i1 * 128 + i2) >> 3) & 56)" in src
    func = run_passes(_operand_bytes_view())
    assert _allocs(func)["af"].layout == N.Layout("tma_swizzled", swizzle=128, flat=True)
    for make in (lambda: _swizzled_reshape(2048, 64, "float16", (2048,)), _operand_bytes_view):
        assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _scratch_view(k_tiles: int):
    """A float32 scratch view over a GEMM operand's swizzled fp16 tile (TileLang's idiom
    for reusing shared memory, as DeepSeek's sparse MLA backward does): each step loads
    the operand, multiplies, then stages the accumulator through the view, half at a
    time, for atomic adds; the view is written whole before it is read, the operand loaded whole before
    the GEMM reads it, so no value passes between them."""
    @T.prim_func
    def scratch_view(A: T.Tensor((k_tiles * 64, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((64, 64), "float16")
            af = T.view(a, (32, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            for ko in T.serial(k_tiles):
                T.copy(A[ko * 64:(ko + 1) * 64, :], a)
                T.gemm(a, a, acc, transpose_B=True, clear_accum=True)
                for h in range(2):
                    for i, j in T.Parallel(64, 64):
                        if i >= h * 32 and i < h * 32 + 32:
                            af[i - h * 32, j] = acc[i, j]
                    for i, j in T.Parallel(32, 64):
                        T.atomic_add(B[i + h * 32, j], af[i, j])
    return scratch_view


def test_scratch_view_of_a_swizzled_operand_shares_its_pattern(tmp_path):
    func = run_passes(_scratch_view(3))
    a = _allocs(func)
    base, view = a["a"], a["af"]
    # the operand's 128-byte rows are one chunk of its swizzle: the view reads the same
    # pattern on its flat offset (before, a row-major layout of its own)
    assert base.layout == N.Layout("tma_swizzled", swizzle=128)
    assert view.layout == N.Layout("tma_swizzled", swizzle=128, flat=True)
    assert view.slot == base.slot  # the same bytes
    text = func.script()  # the view's writes wait for the GEMM's reads of the operand
    assert text.index("T.gemm(") < text.index("T.sync_threads()", text.index("T.gemm(")) \
        < text.index("af[i")
    assert tilecute.build_cubin(_scratch_view(3), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_tensor_in_a_body_needs_data():
    msg = _refused('''
        g = T.Tensor((64, 64), "float16")
    ''')
    assert "<script>:8:" in msg and "needs data=buf.data" in msg
    msg = _refused('''
        g = T.Tensor((64, 64), "float16", 3)
    ''')
    assert "<script>:8:" in msg and "T.Tensor: data must be a buffer's storage" in msg


def test_view_outside_a_kernel_is_refused():
    with pytest.raises(FrontendError) as e:
        T.from_script(textwrap.dedent('''
            import tilecute.language as T

            @T.prim_func
            def k(A: T.Tensor((64, 64), "float16")):
                flat = T.reshape(A, (4096,))
                with T.Kernel(1, threads=128) as bx:
                    flat[bx] = T.float16(0)
        '''))
    assert "<script>:6:" in str(e.value) and "flat = T.reshape(A, (4096,))" in str(e.value)


# ---- GPU: against torch -----------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("n, m, dtype", [(1024, 32, "float32"), (2048, 64, "float16")])
def test_fragment_reshape_on_gpu(n, m, dtype):
    import torch

    a = torch.randn(n // m, m, device="cuda", dtype=getattr(torch, dtype))
    b = torch.empty(n, device="cuda", dtype=a.dtype)
    tilecute.compile(_fragment_reshape(n, m, dtype))(a, b)
    torch.testing.assert_close(b, a.reshape(n))


@pytest.mark.gpu
@pytest.mark.parametrize("n, m, dtype", [(1024, 32, "float32"), (2048, 64, "float16")])
def test_reduce_after_reshape_on_gpu(n, m, dtype):
    import torch

    a = torch.randn(n, device="cuda", dtype=getattr(torch, dtype))
    b = torch.empty(n // m, device="cuda", dtype=a.dtype)
    tilecute.compile(_reduce_after_reshape(n, m, dtype))(a, b)
    torch.testing.assert_close(b, a.reshape(n // m, m).max(dim=1).values)


@pytest.mark.gpu
def test_absmax_after_reshape_on_gpu():
    import torch

    a = torch.randint(-100, 100, (2, 384), device="cuda", dtype=torch.int64)
    b = torch.empty(2, 3, device="cuda", dtype=torch.int64)
    tilecute.compile(_absmax_groups())(a, b)
    torch.testing.assert_close(b, a.abs().reshape(2, 3, 128).max(dim=2).values)


@pytest.mark.gpu
@pytest.mark.parametrize("n, m, dtype, new", [(1024, 32, "float32", "float16"),
                                              (2048, 64, "float16", "float32"),
                                              (1024, 32, "float32", "float32")])
def test_global_view_on_gpu(n, m, dtype, new):
    import torch

    a = torch.randn(n, device="cuda", dtype=getattr(torch, dtype))
    ref = a.view(getattr(torch, new)).view(n // m, -1)
    b = torch.empty_like(ref)
    tilecute.compile(_global_view(n, m, dtype, new))(a, b)
    assert torch.equal(b.view(torch.int16), ref.view(torch.int16))


@pytest.mark.gpu
@pytest.mark.parametrize("swizzled", [False, True], ids=["linear", "swizzled"])
@pytest.mark.parametrize("shape, dtype, new_shape, new", [
    ((64, 64), "float32", (64, 128), "bfloat16"), ((64, 128), "bfloat16", (64, 64), "float32")],
    ids=["narrowing", "widening"])
def test_shared_view_on_gpu(shape, dtype, new_shape, new, swizzled):
    import torch

    lanes = torch.randn(shape[0], 128, device="cuda", dtype=torch.bfloat16)
    a = lanes.view(getattr(torch, dtype))
    b = torch.empty(new_shape, device="cuda", dtype=getattr(torch, new))
    tilecute.compile(_shared_reinterpret(shape, dtype, new_shape, new, swizzled))(a, b)
    assert torch.equal(b.view(torch.int16), a.view(getattr(torch, new)).view(torch.int16))


@pytest.mark.gpu
def test_scratch_view_on_gpu():
    import torch

    a = torch.randn(3 * 64, 64, device="cuda", dtype=torch.float16)
    b = torch.zeros(64, 64, device="cuda")
    tilecute.compile(_scratch_view(3))(a, b)
    tiles = a.float().view(3, 64, 64)
    ref = (tiles @ tiles.transpose(1, 2)).sum(0)
    torch.testing.assert_close(b, ref, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_local_view_on_gpu():
    import torch

    a = torch.randn(128, 4, device="cuda")
    b = torch.empty(128, 8, device="cuda", dtype=torch.float16)
    tilecute.compile(_local_bits())(a, b)
    assert torch.equal(b.view(torch.int16), a.view(torch.float16).view(torch.int16))


@pytest.mark.gpu
def test_every_scope_on_gpu():
    import torch

    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.empty(32, 64, device="cuda", dtype=torch.int8)
    c = torch.randn(1024, device="cuda")
    d = torch.empty(128, 8, device="cuda")
    c_in = c.clone()
    tilecute.compile(_every_scope())(a, b, c, d)
    assert torch.equal(b, a.view(torch.int8).view(32, 64))
    rows = torch.arange(32, device="cuda", dtype=torch.float32).repeat_interleave(32)
    torch.testing.assert_close(c, c_in * 2 + rows)
    tx = torch.arange(128, device="cuda", dtype=torch.float32)[:, None]
    i = torch.arange(8, device="cuda", dtype=torch.float32)[None, :]
    torch.testing.assert_close(d, (i + tx) * (i // 4 + 1))


@pytest.mark.gpu
def test_conv_through_views_on_gpu():
    import torch

    x = torch.randn(2, 16, 16, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(3, 3, 64, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(2, 16, 16, 64, device="cuda", dtype=torch.float16)
    tilecute.compile(_conv())(x, w, out)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(),
                                     padding=1).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_view_gemm_operand_on_gpu():
    import torch

    a = torch.randn(2, 64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 64, device="cuda")
    tilecute.compile(_stacked_operand())(a, b, c)
    torch.testing.assert_close(c, a.reshape(128, 64).float() @ b.float().T, atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("n, m, dtype, shape", [
    (1024, 32, "float32", (1024,)), (2048, 64, "float16", (2048,)), (2048, 64, "float16", (16, 128))])
def test_swizzled_reshape_on_gpu(n, m, dtype, shape):
    import torch

    a = torch.randn(n // m, m, device="cuda").to(getattr(torch, dtype))
    b = torch.empty(shape, device="cuda", dtype=a.dtype)
    tilecute.compile(_swizzled_reshape(n, m, dtype, shape))(a, b)
    assert torch.equal(b, a.reshape(shape))


@pytest.mark.gpu
def test_operand_bytes_view_on_gpu():
    import torch

    a = torch.randn(64, 64, device="cuda").half()
    b = torch.empty(32, 64, device="cuda")
    c = torch.empty(64, 64, device="cuda")
    tilecute.compile(_operand_bytes_view())(a, b, c)
    assert torch.equal(b.view(torch.int16), a.view(torch.int16).view(32, 128))
    torch.testing.assert_close(c, a.float() @ a.float().T, atol=1e-2, rtol=1e-3)
