"""TileLang's annotations and warp reductions in tilecute: ``T.annotate_layout`` with
``tilecute.layout``'s constructors (the layout each shared buffer gets, in the printed
IR), ``T.warp_reduce_*``, ``T.annotate_min_blocks_per_sm``; each compiled to an sm_90a
cubin on the CPU, its errors named at their line, and (``-m gpu``) compared with torch."""

import re
import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir.serialize import from_json
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower, run_passes

IMPORTS = ("import tilecute\nimport tilecute.language as T\n"
           "from tilecute.layout import (make_swizzled_layout, make_full_bank_swizzled_layout,\n"
           "    make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout,\n"
           "    make_linear_layout, make_wgmma_swizzled_layout)\n\n\n")


def gemm_program(annotation: str, block_k: int = 64) -> str:
    """A pipelined fp16 GEMM, 128 x 128 tiles, written as TileLang examples write it, with
    ``annotation`` (a T.annotate_layout call, or "") after the allocations."""
    return IMPORTS + textwrap.dedent(f"""\
        @T.prim_func
        def matmul(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
                   C: T.Tensor((256, 256), "float32")):
            with T.Kernel(2, 2, threads=128) as (bx, by):
                A_shared = T.alloc_shared((128, {block_k}), "float16")
                B_shared = T.alloc_shared(({block_k}, 128), "float16")
                C_local = T.alloc_fragment((128, 128), "float32")
                {annotation}
                T.clear(C_local)
                for ko in T.Pipelined(256 // {block_k}, num_stages=2):
                    T.copy(A[by * 128, ko * {block_k}], A_shared)
                    T.copy(B[ko * {block_k}, bx * 128], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * 128, bx * 128])
        """)


def transpose_program(layout: str) -> str:
    """A tile transpose through shared memory: the T.Parallel loop walks ``tile`` down its
    columns, which is what a swizzle is for."""
    return IMPORTS + textwrap.dedent(f"""\
        @T.prim_func
        def transpose(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16")):
            with T.Kernel(4, 4, threads=128) as (bx, by):
                tile = T.alloc_shared((64, 64), "float16")
                T.annotate_layout({{tile: {layout}(tile)}})
                T.copy(A[by * 64, bx * 64], tile)
                for i, j in T.Parallel(64, 64):
                    B[bx * 64 + i, by * 64 + j] = tile[j, i]
        """)


def parse(text: str):
    func = T.from_script(text)
    assert T.from_script(func.script()) == func  # the printer writes what the parser reads
    assert from_json(func.to_json()) == func
    return func


def shared_layouts(func) -> dict:
    """Each shared allocation's layout after the passes, as the printer writes it."""
    out = {}
    for line in run_passes(func, "sm_90a").script().splitlines():
        if "T.alloc_shared(" in line:
            m = re.search(r"layout=(T\.Layout\([^)]*\))", line)
            out[line.split("=")[0].strip()] = m.group(1) if m else None
    return out


def error(text: str, needle: str, env=None) -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script(text, env)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)
    assert f"<script>:{line}:" in str(e.value), str(e.value)
    return str(e.value)


# ---- T.annotate_layout ------------------------------------------------------------------------
def test_swizzled_layout_of_gemm_operands_is_the_widest_swizzle(tmp_path):
    func = parse(gemm_program("T.annotate_layout({A_shared: make_swizzled_layout(A_shared), "
                              "B_shared: make_swizzled_layout(B_shared)})"))
    # (128, 64) fp16: 128-byte rows -> TileLang's full bank swizzle; (64, 128): 256 bytes
    assert 'A_shared = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", ' \
           'swizzle=128))' in func.script()
    layouts = shared_layouts(func)
    assert layouts["A_shared"] == layouts["B_shared"] == 'T.Layout("tma_swizzled", swizzle=128)'
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_narrower_bank_swizzles_are_honored_by_tma_and_wgmma(tmp_path):
    func = parse(gemm_program("T.annotate_layout({A_shared: make_quarter_bank_swizzled_layout("
                              "A_shared), B_shared: make_half_bank_swizzled_layout(B_shared)})"))
    layouts = shared_layouts(func)
    assert layouts["A_shared"] == 'T.Layout("tma_swizzled", swizzle=32)'
    assert layouts["B_shared"] == 'T.Layout("tma_swizzled", swizzle=64)'
    plan = lower(func, "sm_90a")
    assert sorted(d.spec.swizzle for d in plan.func.kernels[0].tma_descriptors if d.spec.swizzle) == \
        [32, 64, 128]  # A, B, and the epilogue's C tile (tilecute's own)
    source = emit_cute(plan)
    assert "32, False" in source or "32, True" in source  # the wgmma operand view of A
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_tilelang_import_spelling():
    """``import tilecute as tilelang`` then ``tilelang.layout.make_swizzled_layout``."""
    text = gemm_program("T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout("
                        "A_shared)})").replace("import tilecute\n", "import tilecute as tilelang\n")
    assert shared_layouts(parse(text))["A_shared"] == 'T.Layout("tma_swizzled", swizzle=128)'
    assert tilecute.layout.make_wgmma_swizzled_layout.__name__ == "make_wgmma_swizzled_layout"


@pytest.mark.parametrize("layout,want", [
    ("make_linear_layout", 'T.Layout("row_major")'),
    ("make_full_bank_swizzled_layout", 'T.Layout("tma_swizzled", swizzle=128)'),
    ("make_half_bank_swizzled_layout", 'T.Layout("tma_swizzled", swizzle=64)'),
    ("make_quarter_bank_swizzled_layout", 'T.Layout("tma_swizzled", swizzle=32)'),
    ("make_swizzled_layout", 'T.Layout("tma_swizzled", swizzle=128)'),
    ("make_wgmma_swizzled_layout", 'T.Layout("tma_swizzled", swizzle=128)'),
])
def test_shared_tile_gets_the_annotated_layout(layout, want, tmp_path):
    """Without the annotation the layout pass would swizzle ``tile`` its own way (it is
    walked down columns); the annotation decides, a linear one included."""
    func = parse(transpose_program(layout))
    assert shared_layouts(func)["tile"] == want
    assert shared_layouts(parse(transpose_program("make_linear_layout").replace(
        "        T.annotate_layout({tile: make_linear_layout(tile)})\n", "")))["tile"] \
        == 'T.Layout("swizzled", swizzle=32)'
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_wgmma_layout_takes_k_major_and_checks_it():
    """TileLang's ``k_major`` picks among float64's layouts only; for 16-bit tiles both
    values give the widest swizzle, and a value that is not a bool is an error."""
    for k_major in ("True", "False"):
        func = parse(transpose_program("make_wgmma_swizzled_layout").replace(
            "make_wgmma_swizzled_layout(tile)", f"make_wgmma_swizzled_layout(tile, k_major={k_major})"))
        assert shared_layouts(func)["tile"] == 'T.Layout("tma_swizzled", swizzle=128)'
    with pytest.raises(FrontendError, match="k_major is True or False, got 'no'"):
        T.from_script(transpose_program("make_wgmma_swizzled_layout").replace(
            "make_wgmma_swizzled_layout(tile)", "make_wgmma_swizzled_layout(tile, k_major='no')"))


def test_swizzle_rules_follow_tilelang():
    """``make_swizzled_layout`` picks the widest swizzle dividing a row (64-byte rows: 64);
    ``allow_pad=False`` falls back to row-major where the rows are no 8-row period."""
    narrow = IMPORTS + textwrap.dedent("""\
        @T.prim_func
        def transpose(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16")):
            with T.Kernel(8, 4, threads=128) as (bx, by):
                tile = T.alloc_shared((64, 32), "float16")
                T.annotate_layout({tile: make_swizzled_layout(tile)})
                T.copy(A[by * 64, bx * 32], tile)
                for i, j in T.Parallel(32, 64):
                    B[bx * 32 + i, by * 64 + j] = tile[j, i]
        """)
    assert shared_layouts(parse(narrow))["tile"] == 'T.Layout("tma_swizzled", swizzle=64)'
    odd = IMPORTS + textwrap.dedent("""\
        @T.prim_func
        def k(A: T.Tensor((12, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((12, 64), "float16")
                T.annotate_layout({s: make_swizzled_layout(s, allow_pad=False)})
                T.copy(A[0, 0], s)
                T.copy(s, A[0, 0])
        """)
    assert shared_layouts(parse(odd))["s"] == 'T.Layout("row_major")'


@pytest.mark.parametrize("annotation,needle,message", [
    ("T.annotate_layout({A_shared: make_linear_layout(A_shared)})", "T.gemm",
     "has layout row_major from the program (T.annotate_layout or layout=), but T.gemm reads"),
])
def test_gemm_refuses_an_unswizzled_operand(annotation, needle, message):
    func = T.from_script(gemm_program(annotation))
    with pytest.raises(ValueError) as e:
        run_passes(func, "sm_90a")
    assert message in str(e.value) and "<script>:" in str(e.value)


BODY = """\
@T.prim_func
def k(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64, 64), "float16")
        t = T.alloc_shared((64, 64), "float16")
        odd = T.alloc_shared((64, 8), "float16")
        f = T.alloc_fragment((64,), "float32")
        {stmt}
        T.copy(A[0, 0], s)
"""


@pytest.mark.parametrize("stmt,message", [
    ("T.annotate_layout({f: make_linear_layout(f)})",
     "'f' is a fragment: its layout is a T.Fragment(shape, forward_fn, ...)"),
    ("T.annotate_layout({A: make_linear_layout(A)})",
     "'A' is a global tensor: tilecute reads and writes it at the strides"),
    ("T.annotate_layout({s: lambda i, j: (i, j % 32)})",
     "T.Layout on shared buffer `s` must be injective: elements (0, 0) and (0, 32) both map "
     "to physical coordinates (0, 0)"),
    ("T.annotate_layout({s: my_layout(s)})",
     "the layout of 's' is `my_layout(s)`; tilecute takes one of tilecute.layout's constructors"),
    ("T.annotate_layout({s: tilecute.layout.Fragment(s.shape, lambda i, j: (i, j))})",
     "'s' is shared; a T.Fragment lays out a fragment"),
    ("T.annotate_layout({f: T.Layout(f.shape, lambda i: i)})",
     "'f' is a fragment; its layout is a T.Fragment(shape, forward_fn, ...), got"),
    ("T.annotate_layout({s: tilecute.layout.make_volta_swizzled_layout(s)})",
     "make_volta_swizzled_layout is a TileLang layout that tilecute does not support"),
    ("T.annotate_layout({s: T.Layout(s.shape, lambda i, j: (j, i - 1))})",
     "output index 1 of the layout is negative for some element of 's'"),
    ("T.annotate_layout({s: tilecute.layout.Layout((64, 32), lambda i, j: (j, i))})",
     "the layout's shape (64, 32) is not the shape of 's' (64, 64)"),
    ("T.annotate_layout({s: make_swizzled_layout(s, bogus=1)})",
     "tilecute.layout.make_swizzled_layout: got an unexpected keyword argument 'bogus'"),
    ("T.annotate_layout({s: make_swizzled_layout(s, True, True, 3)})",
     "tilecute.layout.make_swizzled_layout: unexpected positional argument 4"),
    ("T.annotate_layout({s: make_swizzled_layout(C)})", "is a global tensor"),
    ("T.annotate_layout({s: make_swizzled_layout(t[0, 0])})", "expected a buffer"),
    ("T.annotate_layout({s: make_linear_layout(odd)})",
     "the layout of 's' was made for 'odd', whose last dims or dtype differ"),
    ("T.annotate_layout({odd: make_full_bank_swizzled_layout(odd)})",
     "rows of 'odd' are 8 float16 (16 bytes), not a multiple of the swizzle's 128 bytes"),
    ("T.annotate_layout({odd: make_swizzled_layout(odd)})",
     "TileLang picks a padded layout (no swizzle divides its rows), which tilecute does not have"),
    ("T.annotate_layout({s: make_swizzled_layout(s, k_major=2)})", "k_major and allow_pad are True or False"),
    ("T.annotate_layout([s])", "layout_map is a dict"),
    ("T.annotate_layout({1: make_linear_layout(s)})", "the keys are buffers"),
    ("T.annotate_layout({s: make_linear_layout(s), t: make_linear_layout(t)}, 2)",
     "T.annotate_layout: unexpected positional argument 2"),
    ("T.annotate_min_blocks_per_sm(0)", "n must be an int >= 1"),
    ("T.annotate_min_blocks_per_sm(bx)", "n must be an int >= 1"),
    ("T.warp_reduce_bitand(T.float32(1.0))", "T.warp_reduce_bitand takes an integer, got float32"),
    ("T.warp_reduce_sum(1.0, 2)", "T.warp_reduce_sum: unexpected positional argument 2"),
])
def test_errors_name_the_form_and_line(stmt, message):
    text = IMPORTS + BODY.format(stmt=stmt).replace("T.warp_reduce", "y = T.warp_reduce")
    msg = error(text, stmt.split("(")[0] + "(", {"my_layout": lambda buf: buf})
    assert message in msg, msg


def test_two_annotations_of_one_buffer_must_agree():
    text = IMPORTS + BODY.format(stmt="T.annotate_layout({s: make_linear_layout(s)})\n"
                                      "        T.annotate_layout({s: make_swizzled_layout(s)})")
    msg = error(text, "T.annotate_layout({s: make_swizzled_layout(s)})")
    assert "'s' is annotated twice" in msg
    same = IMPORTS + BODY.format(stmt="T.annotate_layout({s: make_linear_layout(s)})\n"
                                      "        T.annotate_layout({s: make_linear_layout(s)})")
    T.from_script(same)
    explicit = IMPORTS + BODY.format(stmt="T.annotate_layout({s: make_swizzled_layout(s)})").replace(
        's = T.alloc_shared((64, 64), "float16")',
        's = T.alloc_shared((64, 64), "float16", layout=T.Layout("row_major"))')
    assert "has layout=T.Layout(\"row_major\") at its allocation" in \
        error(explicit, "T.annotate_layout(")


def test_annotation_outside_a_kernel_is_an_error():
    text = IMPORTS + textwrap.dedent("""\
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            T.annotate_min_blocks_per_sm(2)
            with T.Kernel(1, threads=128) as bx:
                A[0] = 1.0
        """)
    assert "only `with T.Kernel(...)` blocks" in error(text, "T.annotate_min_blocks_per_sm(2)")


def test_layout_constructors_are_not_python_functions():
    with pytest.raises(RuntimeError, match="inside a @T.prim_func body"):
        tilecute.layout.make_swizzled_layout(None)
    # TileLang's index map is a value (T.annotate_layout honors it on global tensors)
    assert tilecute.layout.Layout((4, 4), lambda i, j: (j, i)).shape == (4, 4)
    with pytest.raises(ValueError, match="forward_fn must be a function of the indices"):
        tilecute.layout.Layout((4, 4), None)
    with pytest.raises(AttributeError):
        tilecute.layout.no_such_layout  # noqa: B018


# ---- an index-map layout (T.Layout(shape, forward_fn)) on a global tensor ------------------------
# A backward pass's atomic accumulator, laid out 8 x 8 interleaved (TileLang's idiom for dQ):
# one kernel adds tiles into it, another reads it back out in logical order.
def interleaved(buf):
    """The program's own layout helper, as TileLang programs write one (make_dq_layout)."""
    return T.Layout(buf.shape, lambda b, r, c: [b, r // 8, c // 8, c % 2, 4 * (r % 8) + (c % 8) // 2])


ACCUMULATE = IMPORTS + textwrap.dedent("""\
    @T.prim_func
    def accumulate(X: T.Tensor((2, 64, 64), "float32"), Acc: T.Tensor((2, 64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, bz):
            T.annotate_layout({Acc: interleaved(Acc)})
            x = T.alloc_fragment((32, 64), "float32")
            T.copy(X[bz, bx * 32:(bx + 1) * 32, :], x)
            T.atomic_add(Acc[bz, bx * 32:(bx + 1) * 32, :], x)
            T.sync_threads()  # the block's adds land before its threads read row 63 back
            if bx == 1:  # the block that adds row 63: no other block touches it
                Acc[bz, 63, 63] = Acc[bz, 63, 63] + 0.0
    """)
POST = IMPORTS + textwrap.dedent("""\
    @T.prim_func
    def post(Acc: T.Tensor((2, 64, 64), "float32"), Y: T.Tensor((2, 64, 64), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, bz):
            T.annotate_layout({Acc: T.Layout(Acc.shape, lambda b, r, c: [b, r // 8, c // 8, c % 2, 4 * (r % 8) + (c % 8) // 2])})
            T.copy(Acc[bz, bx * 32:(bx + 1) * 32, :], Y[bz, bx * 32:(bx + 1) * 32, :])
    """)


def interleaved_offset(b, r, c):
    """Where TileLang's remapped buffer keeps element (b, r, c): row-major over the map's
    output shape (2, 8, 8, 2, 32)."""
    return (((b * 8 + r // 8) * 8 + c // 8) * 2 + c % 2) * 32 + 4 * (r % 8) + (c % 8) // 2


def mapped_funcs():
    return T.from_script(ACCUMULATE, {"interleaved": interleaved}), T.from_script(POST)


def test_index_map_layout_of_a_global_tensor_reads_and_writes_through_the_map(tmp_path):
    accumulate, post = mapped_funcs()
    text = accumulate.script()
    # a row-major view of the map's output shape over Acc's storage, accessed element-wise
    assert 'Acc_layout = T.view(Acc, (2, 8, 8, 2, 32), "float32")' in text
    assert "T.atomic_add(Acc_layout[bz, (bx * 32 + i) // 8," in text
    assert "Acc_layout[bz, 7, 7, 1, 31] = Acc_layout[bz, 7, 7, 1, 31] + T.float32(0.0)" in text
    assert "Acc[" not in text.split("T.view(Acc")[1]
    assert "Y[bz, bx * 32 + i, i_1] = T.Cast(\"float16\", Acc_layout[bz, (bx * 32 + i) // 8" \
        in post.script()
    for f in (accumulate, post):
        assert T.from_script(f.script()) == f and from_json(f.to_json()) == f
        info = tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / f.name))
        assert info.kernels
    source = (tmp_path / "post" / "kernel_cute.py").read_text()
    assert "cute.make_layout((2, 8, 8, 2, 32,), stride=(4096, 512, 64, 32, 1,))" in source
    # the map's offsets are a permutation of the tensor's elements (the test's reference)
    offsets = {interleaved_offset(b, r, c) for b in range(2) for r in range(64) for c in range(64)}
    assert offsets == set(range(2 * 64 * 64))


MAPPED_BODY = IMPORTS + """\
@T.prim_func
def k(A: T.Tensor({shape}, "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64, 64), "float32")
        T.annotate_layout({{A: {layout}}})
        {stmt}
"""


@pytest.mark.parametrize("shape,layout,stmt,message", [
    ("(64, 64)", "T.Layout(A.shape, lambda i, j: [i, j - 1])", "T.copy(A, B)",
     "output index 1 of the layout ranges over [-1, 62]"),
    ("(64, 64)", "T.Layout(A.shape, lambda i, j: [i, j * 2])", "T.copy(A, B)",
     "the layout's output shape (64, 127) holds 8128 elements, more than 'A' has (4096)"),
    ("(64, 64)", "T.Layout((64, 32), lambda i, j: [i, j])", "T.copy(A, B)",
     "the layout's shape (64, 32) is not the shape of 'A' (64, 64)"),
    ("(T.symbolic('m'), 64)", "T.Layout(A.shape, lambda i, j: [i, j])", "T.copy(A[0:64, :], B)",
     "'A' has a symbolic dim"),
    ("(64, 64)", "T.Layout(A.shape, lambda i, j: [i, j // i])", "T.copy(A, B)",
     "output index 1 of the layout ranges over [None, None]"),
    ("(64, 64)", "T.Layout(A.shape, lambda i: [i])", "T.copy(A, B)",
     "takes 1 positional argument but 2 were given"),
    ("(64, 64)", "T.Layout(A.shape, lambda i, j: [i, j])", "T.copy(A[0:32, 0:64], s)",
     "the tiles of 'A' (32, 64) and 's' (64, 64) differ in their non-unit extents"),
    ("(64, 64)", "T.Layout(A.shape, lambda i, j: [i, j])", "T.reduce_sum(A, B, dim=1)",
     "tilecute reads and writes such a global tensor element by element"),
])
def test_index_map_layout_of_a_global_tensor_errors(shape, layout, stmt, message):
    text = MAPPED_BODY.format(shape=shape, layout=layout, stmt=stmt)
    with pytest.raises((FrontendError, ValueError)) as e:
        T.from_script(text)
    assert message in str(e.value), str(e.value)
    assert "<script>:" in str(e.value)


# ---- T.warp_reduce_* ----------------------------------------------------------------------------
def warp_program(dtype: str) -> str:
    kinds = ("sum", "max", "min", "bitand", "bitor") if dtype == "int32" else ("sum", "max", "min")
    stores = "\n".join(f"        R{i}[tid] = T.warp_reduce_{k}(A[tid])" for i, k in enumerate(kinds))
    params = ", ".join(f'R{i}: T.Tensor((256,), "{dtype}")' for i in range(len(kinds)))
    return IMPORTS + (f'@T.prim_func\ndef warp_reduce(A: T.Tensor((256,), "{dtype}"), {params}):\n'
                      "    with T.Kernel(1, threads=256) as bx:\n"
                      "        tid = T.get_thread_binding(0)\n" + stores + "\n")


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_warp_reductions_print_lower_and_build(dtype, tmp_path):
    func = parse(warp_program(dtype))
    assert "R0[tid] = T.warp_reduce_sum(A[tid])" in func.script()
    source = emit_cute(lower(func, "sm_90a"))
    assert 'tcr.warp_allreduce(' in source and '"max", 32)' in source, source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- T.annotate_min_blocks_per_sm ---------------------------------------------------------------
MIN_BLOCKS = IMPORTS + textwrap.dedent("""\
    @T.prim_func
    def scale(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "float32")):
        with T.Kernel(32, threads=128) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    """)


def test_min_blocks_per_sm_is_the_launch_bound(tmp_path):
    func = parse(MIN_BLOCKS)
    assert func.kernels[0].min_blocks_per_sm == 2
    assert "    T.annotate_min_blocks_per_sm(2)" in func.script()
    source = emit_cute(lower(func, "sm_90a"))
    assert "min_blocks_per_mp=2" in source, source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def ptx_of(func, tmp_path, monkeypatch) -> str:
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, "sm_90a")))
    module = import_source(str(path), f"tilecute_annotate_{func.name}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__


def test_min_blocks_per_sm_and_warp_reductions_in_ptx(tmp_path, monkeypatch):
    ptx = ptx_of(T.from_script(MIN_BLOCKS), tmp_path, monkeypatch)
    assert re.search(r"\.minnctapersm\s+2", ptx), ptx
    ptx = ptx_of(T.from_script(warp_program("float32")), tmp_path, monkeypatch)
    assert len(re.findall(r"shfl\.sync\.bfly\.b32", ptx)) == 15, ptx  # 3 reductions x 5 steps


def test_min_blocks_per_sm_keeps_a_gemm_off_warp_specialization(tmp_path):
    func = parse(gemm_program("T.annotate_min_blocks_per_sm(2)"))
    lowered = run_passes(func, "sm_90a")
    assert lowered.kernels[0].producer_threads == 0
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- on the GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("annotation", [
    "T.annotate_layout({A_shared: make_swizzled_layout(A_shared), "
    "B_shared: make_swizzled_layout(B_shared)})",
    "T.annotate_layout({A_shared: make_quarter_bank_swizzled_layout(A_shared), "
    "B_shared: make_half_bank_swizzled_layout(B_shared)})",
    "T.annotate_min_blocks_per_sm(2)",
])
def test_gemm_matches_torch(annotation):
    import torch

    kernel = tilecute.compile(T.from_script(gemm_program(annotation)))
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["make_linear_layout", "make_full_bank_swizzled_layout",
                                    "make_half_bank_swizzled_layout",
                                    "make_quarter_bank_swizzled_layout"])
def test_transpose_matches_torch(layout):
    import torch

    kernel = tilecute.compile(T.from_script(transpose_program(layout)))
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    kernel(a, b)
    assert torch.equal(b, a.t())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_warp_reductions_match_torch(dtype):
    import torch

    kernel = tilecute.compile(T.from_script(warp_program(dtype)))
    if dtype == "float32":
        a = torch.randn(256, device="cuda")
    else:
        a = torch.randint(-1000, 1000, (256,), device="cuda", dtype=torch.int32)
    outs = [torch.empty_like(a) for _ in range(5 if dtype == "int32" else 3)]
    kernel(a, *outs)
    warps = a.view(8, 32)
    want = [warps.sum(1), warps.amax(1), warps.amin(1)]
    if dtype == "int32":
        import functools
        import operator

        rows = warps.tolist()
        want += [torch.tensor([functools.reduce(operator.and_, r) for r in rows]),
                 torch.tensor([functools.reduce(operator.or_, r) for r in rows])]
    for got, w in zip(outs, want):
        w = w.to(a.device, a.dtype).repeat_interleave(32)
        if dtype == "float32":
            torch.testing.assert_close(got, w, atol=1e-4, rtol=1e-5)
        else:
            assert torch.equal(got, w)


@pytest.mark.gpu
def test_min_blocks_per_sm_matches_torch():
    import torch

    kernel = tilecute.compile(T.from_script(MIN_BLOCKS))
    a = torch.randn(4096, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    assert torch.equal(b, a * 2)


def test_a_program_chosen_xor_swizzle_keeps_its_copies_off_tma(tmp_path):
    """A shared buffer the program lays out ``T.Layout("swizzled")`` (an XOR swizzle TMA
    cannot write) is loaded and stored by threads, never by a TMA copy that would ignore the
    swizzle; a row-major or TMA-swizzled one still gets TMA."""
    def program(layout: str) -> str:
        return IMPORTS + textwrap.dedent(f"""\
            @T.prim_func
            def roundtrip(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16")):
                with T.Kernel(4, threads=128) as bx:
                    s = T.alloc_shared((64, 64), "float16", layout={layout})
                    T.copy(A[bx * 64, 0], s)
                    T.copy(s, B[bx * 64, 0])
            """)
    xor = run_passes(parse(program('T.Layout("swizzled", swizzle=8)')), "sm_90a").script()
    assert "T.tma_copy" not in xor and 'T.Layout("swizzled", swizzle=8)' in xor
    for layout in ('T.Layout("row_major")', 'T.Layout("tma_swizzled", swizzle=128)'):
        assert "T.tma_copy" in run_passes(parse(program(layout)), "sm_90a").script(), layout
    assert tilecute.build_cubin(parse(program('T.Layout("swizzled", swizzle=8)')), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


# ---- register budgets of warp-specialized kernels -------------------------------------------
@pytest.mark.parametrize("annotation,want", [
    ("", ["T.set_max_nreg(24, 0)", "T.set_max_nreg(256, 1)"]),  # one compute warpgroup
    ("T.annotate_producer_reg_dealloc(24)\n                T.annotate_consumer_reg_alloc(240)",
     ["T.set_max_nreg(24, 0)", "T.set_max_nreg(240, 1)"]),
    ("T.annotate_producer_reg_dealloc()", ["T.set_max_nreg(24, 0)", "T.set_max_nreg(256, 1)"]),
    ("T.no_set_max_nreg()", []),
    ("T.disable_warp_group_reg_alloc()", []),
])
def test_register_budgets_of_the_warp_specialized_roles(annotation, want, tmp_path):
    """TileLang's T.annotate_producer_reg_dealloc / T.annotate_consumer_reg_alloc set the
    roles' setmaxnreg counts (the compute warpgroups otherwise share what the producer
    leaves), T.no_set_max_nreg / T.disable_warp_group_reg_alloc drop setmaxnreg."""
    text = gemm_program(annotation).replace(
        "for ko in T.Pipelined(256 // 64, num_stages=2)",
        "for ko in T.Pipelined(256 // 64, num_stages=2, warp_specialize=True)")
    func = parse(text)
    script = run_passes(func, "sm_90a").script()
    assert [ln.strip() for ln in script.splitlines() if "T.set_max_nreg" in ln] == want
    assert "producer_threads=128" in script
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_register_budget_errors():
    over = gemm_program("T.annotate_consumer_reg_alloc(256)").replace(
        "num_stages=2)", "num_stages=2, warp_specialize=True)").replace("threads=128", "threads=256")
    with pytest.raises(ValueError, match="more than the 64512 the block is launched with"):
        run_passes(parse(over), "sm_90a")
    assert "setmaxnreg takes a multiple of 8" in str(pytest.raises(
        ValueError, lambda: T.from_script(gemm_program("T.annotate_producer_reg_dealloc(30)"))).value)
    twice = gemm_program("T.annotate_producer_reg_dealloc(24)\n                "
                         "T.annotate_producer_reg_dealloc(32)")
    assert "already set it to 24" in error(twice, "reg_dealloc(32)")


@pytest.mark.gpu
def test_index_map_layout_of_a_global_tensor_matches_torch():
    """The accumulator holds each element where TileLang's map puts it, and the read-back
    kernel returns the sum in logical order."""
    import torch

    accumulate, post = mapped_funcs()
    acc_kernel, post_kernel = tilecute.compile(accumulate), tilecute.compile(post)
    x1 = torch.randn(2, 64, 64, device="cuda")
    x2 = torch.randn(2, 64, 64, device="cuda")
    acc = torch.zeros(2, 64, 64, device="cuda")
    acc_kernel(x1, acc)
    acc_kernel(x2, acc)
    want = (x1 + x2).cpu()
    offsets = torch.tensor([[[interleaved_offset(b, r, c) for c in range(64)] for r in range(64)]
                            for b in range(2)])
    torch.testing.assert_close(acc.flatten().cpu()[offsets], want, atol=1e-5, rtol=1e-5)
    y = torch.empty(2, 64, 64, device="cuda", dtype=torch.float16)
    post_kernel(acc, y)
    torch.testing.assert_close(y.float().cpu(), want.half().float(), atol=1e-3, rtol=1e-3)
