"""Wrong programs in TileLang's idioms and what their author is told: an error raised by
tilecute itself (the frontend, the IR validator or a pass), naming the prim_func, the
buffer or argument, and the source line (marked ``# <- here`` below), never a traceback
from inside CuTe DSL, MLIR or the C++ compiler, and never a kernel that builds and does
something else.  The launcher's checks of call arguments (dtype, shape, rank, device,
strides, count) are in ``test_launcher.py`` and ``test_user_errors.py``."""

import inspect
from pathlib import Path

import pytest

import tilecute.language as T
from tilecute.ir import ValidationError
from tilecute.language.parser import FrontendError
from tilecute.transform.lower_tile_ops import TileOpError
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import GemmError
from tilecute.transform.shared_memory import SharedMemoryError


def told_where_and_what(factory, error, words, marked) -> str:
    """Build ``factory()``'s program and lower it: that raises ``error`` whose message holds each of ``words``, the
    prim_func's name and the source line of one ``# <- here`` mark in the function
    ``marked`` (the factory, or the helper holding the statement).  Also used by
    ``test_user_mistakes.py``."""
    with pytest.raises(error) as info:
        lower(factory(), "sm_90a")
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "prim_func '" in message
    lines, first = inspect.getsourcelines(marked)
    lines = [first + n for n, text in enumerate(lines) if text.rstrip().endswith("# <- here")]
    assert lines, f"{marked.__name__}: mark the line"
    where = [f"{Path(inspect.getsourcefile(marked)).name}:{line}" for line in lines]
    assert any(w in message for w in where), f"none of {where} in {message!r}"
    return message


def _gemm(shape_a, shape_b, shape_c, dtype_a="float16", dtype_b="float16", acc="float32",
          threads=128, **kw):
    @T.prim_func
    def gemm(A: T.Tensor(shape_a, dtype_a), B: T.Tensor(shape_b, dtype_b), C: T.Tensor(shape_c, acc)):
        with T.Kernel(1, threads=threads):
            a = T.alloc_shared(shape_a, dtype_a)
            b = T.alloc_shared(shape_b, dtype_b)
            c = T.alloc_fragment(shape_c, acc)
            T.clear(c)
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.gemm(a, b, c, **kw)  # <- here
            T.copy(c, C[0, 0])
    return gemm


# ---- copies -----------------------------------------------------------------------------
def copy_whole_shapes_differ():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            f = T.alloc_fragment((64, 32), "float16")
            T.copy(A[bx * 64, 0], s)
            T.copy(s, f)  # <- here
            T.copy(f, B[bx * 64, 0])
    return k


def copy_whole_global_into_smaller_tile():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A, s)  # <- here
            T.copy(s, B[0, 0])
    return k


def copy_region_past_shared():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A[0:64, 0:64], s[32:96, 0:64])  # <- here
            T.copy(s, B[0, 0])
    return k


def fill_region_past_shared():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            T.fill(s[32:96], 0.0)  # <- here
            T.copy(s, A[0])
    return k


def copy_rank_differs():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64, 2), "float16")
            T.copy(A[0, 0], s)  # <- here
            T.copy(s, B[0, 0])
    return k


# ---- indices past a buffer --------------------------------------------------------------
def fragment_constant_index_past_end():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            T.copy(A[0], f)
            f[130] = 1.0  # <- here
            T.copy(f, B[0])
    return k


def local_index_past_end_in_serial_loop():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            r = T.alloc_local((8,), "float32")
            for i in T.serial(9):
                r[i] = 0.0  # <- here
            A[T.get_thread_binding()] = r[0]
    return k


def parallel_extent_past_fragment():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], f)
            for i, j in T.Parallel(64, 128):
                f[i, j] = f[i, j] * 2.0  # <- here
            T.copy(f, B[0, 0])
    return k


def shared_read_before_start():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            T.copy(A[0], s)
            for i in T.Parallel(64):
                A[i] = s[i - 1]  # <- here
    return k


def thread_index_past_shared():
    @T.prim_func
    def k(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((128,), "float32")
            s[T.get_thread_binding()] = A[T.get_thread_binding()]  # <- here
            A[0] = s[0]
    return k


def block_index_past_shared():
    @T.prim_func
    def k(A: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=64) as bx:
            s = T.alloc_shared((4, 64), "float32")
            for i in T.Parallel(64):
                s[bx, i] = A[bx, i]  # <- here
            for i in T.Parallel(64):
                A[bx, i] = s[bx, i]
    return k


def global_constant_index_past_end():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            A[64] = 1.0  # <- here
    return k


def negative_index_before_start():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            A[-65] = 1.0  # <- here
    return k


def possibly_negative_shared_index():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((16,), "float32")
            for i in T.Parallel(8):
                A[i] = s[i - 4]  # <- here
    return k


def too_many_indices():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i, 0] = 1.0  # <- here
    return k


# ---- gemm -------------------------------------------------------------------------------
def gemm_k_differs():
    return _gemm((128, 64), (32, 128), (128, 128))


def gemm_fp16_by_bf16():
    return _gemm((64, 64), (64, 64), (64, 64), dtype_b="bfloat16")


def gemm_accumulator_shape():
    return _gemm((64, 64), (64, 64), (64, 32))


def gemm_transpose_flag_disagrees():
    return _gemm((128, 64), (64, 128), (128, 128), transpose_B=True)


def gemm_wgmma_threads_96():
    return _gemm((64, 64), (64, 64), (64, 64), threads=96)


def gemm_k_not_a_multiple_of_16():
    return _gemm((64, 24), (24, 64), (64, 64))


# ---- shared memory and launch shape -----------------------------------------------------
def shared_allocations_too_large():
    @T.prim_func
    def k(A: T.Tensor((512, 128), "float32"), B: T.Tensor((512, 128), "float32")):
        with T.Kernel(1, threads=128):  # <- here
            s0 = T.alloc_shared((128, 128), "float32")
            s1 = T.alloc_shared((128, 128), "float32")
            s2 = T.alloc_shared((128, 128), "float32")
            s3 = T.alloc_shared((128, 128), "float32")
            T.copy(A[0, 0], s0)
            T.copy(A[128, 0], s1)
            T.copy(A[256, 0], s2)
            T.copy(A[384, 0], s3)
            T.copy(s0, B[0, 0])
            T.copy(s1, B[128, 0])
            T.copy(s2, B[256, 0])
            T.copy(s3, B[384, 0])
    return k


def pipelined_stages_too_deep():
    @T.prim_func
    def k(A: T.Tensor((128, 512), "float16"), B: T.Tensor((512, 128), "float16"),
          C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):  # <- here
            a = T.alloc_shared((128, 64), "float16")
            b = T.alloc_shared((64, 128), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            for kk in T.Pipelined(8, num_stages=9):
                T.copy(A[0, kk * 64], a)
                T.copy(B[kk * 64, 0], b)
                T.gemm(a, b, c)
            T.copy(c, C[0, 0])
    return k


def threads_over_1024():
    @T.prim_func
    def k(A: T.Tensor((2048,), "float32")):
        with T.Kernel(1, threads=2048):  # <- here
            for i in T.Parallel(2048):
                A[i] = 1.0
    return k


def negative_grid():  # (0 compiles, as TileLang's; each call raises: tests/test_empty_grid.py)
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(-4, threads=64):  # <- here
            for i in T.Parallel(64):
                A[i] = 1.0
    return k


def pipelined_negative_stages():
    @T.prim_func
    def k(A: T.Tensor((64, 512), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float32")
            f = T.alloc_fragment((64, 64), "float32")
            T.clear(f)
            for kk in T.Pipelined(8, num_stages=-2):  # <- here
                T.copy(A[0, kk * 64], s)
                for i, j in T.Parallel(64, 64):
                    f[i, j] += s[i, j]
            T.copy(f, B[0, 0])
    return k


# ---- reductions -------------------------------------------------------------------------
def reduce_dim_out_of_range():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], f)
            T.reduce_max(f, r, dim=2)  # <- here
            T.copy(r, B[0])
    return k


def reduce_output_shape():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((32,), "float32")
            T.copy(A[0, 0], f)
            T.reduce_sum(f, r, dim=1)  # <- here
            T.copy(r, B[0])
    return k


# ---- names, dtypes, macros, Python ------------------------------------------------------
def symbol_bound_by_no_tensor():
    n, m = T.dynamic("n"), T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:  # <- here
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    A[bx * 128 + i] = 1.0
    return k


def unsupported_tensor_dtype():
    @T.prim_func
    def k(A: T.Tensor((64,), "complex64")):  # <- here
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = A[i]
    return k


@T.macro
def _scale(frag, factor):
    for i in T.Parallel(*frag.shape):
        frag[i] = frag[i] * factor


def macro_missing_argument():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "float32")
            T.copy(A[0], f)
            _scale(f)  # <- here
            T.copy(f, A[0])
    return k


def _explode(x):
    raise ValueError("the tile config has no entry for this shape")


def python_exception_in_body():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            block = _explode(64)  # <- here
            for i in T.Parallel(block):
                A[i] = 1.0
    return k


def undefined_name():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = undefined_tile[i]  # noqa: F821  # <- here
    return k


CASES = [
    # factory, error class, words the message must hold
    (copy_whole_shapes_differ, FrontendError, ["T.copy(s, f)", "(64, 64)", "(64, 32)", "one shape"]),
    (copy_whole_global_into_smaller_tile, FrontendError, ["'A' has shape (128, 128)", "'s' (64, 64)"]),
    (copy_region_past_shared, ValidationError, ["shared buffer 's'", "reaching index 95", "extent is 64"]),
    (fill_region_past_shared, ValidationError, ["T.fill", "shared buffer 's'", "reaching index 95"]),
    (copy_rank_differs, TileOpError, ["T.copy", "3 dims", "'A' only 2"]),
    (fragment_constant_index_past_end, ValidationError, ["fragment buffer 'f'", "130", "indices 0..127"]),
    (local_index_past_end_in_serial_loop, ValidationError, ["local buffer 'r'", "values 0..8",
                                                            "extent is 8"]),
    (parallel_extent_past_fragment, ValidationError, ["index `j`", "fragment buffer 'f'", "values 0..127",
                                                      "dim 1", "extent is 64"]),
    (shared_read_before_start, ValidationError, ["`i - 1`", "shared buffer 's'", "values -1..62"]),
    (thread_index_past_shared, ValidationError, ["get_thread_binding", "values 0..255", "extent is 128"]),
    (block_index_past_shared, ValidationError, ["index `bx`", "values 0..7", "extent is 4"]),
    (global_constant_index_past_end, ValidationError, ["global buffer 'A'", "value 64",
                                                       "not bounds-checked"]),
    # a negative index counts from the end (TileLang's LegalizeNegativeIndex): A[-65] of 64
    # is A[-1] counted from the end, still before the start
    (negative_index_before_start, ValidationError, ["'A' is negative", "the value -1",
                                                    "counts from the end", "before the dim's start"]),
    # TileLang rewrites only an index proved negative; s[i - 4] over i in 0..7 stays as
    # written, and takes -4..3
    (possibly_negative_shared_index, ValidationError, ["`i - 4`", "shared buffer 's'",
                                                       "values -4..3", "extent is 16"]),
    (too_many_indices, FrontendError, ["'A' has 1 dims", "indexed with 2"]),
    (gemm_k_differs, GemmError, ["T.gemm(a, b, c)", "do not chain", "(128, 64)", "(32, 128)"]),
    (gemm_fp16_by_bf16, GemmError, ["float16", "bfloat16", "one dtype"]),
    (gemm_accumulator_shape, GemmError, ["do not chain", "C is (64, 32)"]),
    (gemm_transpose_flag_disagrees, GemmError, ["do not chain", "B is N x K (64, 128)"]),
    (gemm_wgmma_threads_96, GemmError, ["warpgroups of 128 threads", "96"]),
    (gemm_k_not_a_multiple_of_16, GemmError, ["K = 24", "multiple of 16"]),
    (shared_allocations_too_large, SharedMemoryError, ["kernel 0 needs 262", "at most 232448",
                                                       "(128, 128) float32: 65536"]),
    (pipelined_stages_too_deep, SharedMemoryError, ["x 9 stages: 147456", "num_stages"]),
    (threads_over_1024, ValidationError, ["2048 threads per block", "at most 1024"]),
    (negative_grid, ValidationError, ["grid extent -4", "1..2147483647"]),
    (pipelined_negative_stages, FrontendError, ["T.Pipelined", "num_stages", "-2"]),
    (reduce_dim_out_of_range, ValidationError, ["T.reduce_max", "dim 2 of 'f'", "2 dims"]),
    (reduce_output_shape, ValidationError, ["T.reduce_sum", "(64,)", "'r' has shape (32,)"]),
    (symbol_bound_by_no_tensor, ValidationError, ["'m' is not defined", "T.dynamic symbol",
                                                  "tensor parameter's shape"]),
    (unsupported_tensor_dtype, FrontendError, ["parameter 'A'", "unknown dtype 'complex64'"]),
    (macro_missing_argument, FrontendError, ["T.macro '_scale'", "missing a required argument",
                                             "'factor'"]),
    (python_exception_in_body, FrontendError, ["cannot evaluate `_explode(64)`",
                                               "no entry for this shape"]),
    (undefined_name, FrontendError, ["name 'undefined_tile' is not defined"]),
]


@pytest.mark.parametrize("factory,error,words", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_wrong_program_is_told_where_and_what(factory, error, words):
    told_where_and_what(factory, error, words,
                        _gemm if factory.__name__.startswith("gemm_") else factory)


# ---- what must still build --------------------------------------------------------------
def _guarded_and_tail_accesses():
    """Accesses the bounds check must leave alone: a tail tile read past a global tensor
    (TileLang guards it; TMA zero-fills), an index past a shared tile under an ``if`` or in
    a select's branch, a mod that wraps, and an index the check cannot bound exactly."""

    @T.prim_func
    def k(A: T.Tensor((100, 64), "float32"), B: T.Tensor((100, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float32")
            t = T.alloc_shared((64,), "float32")
            T.copy(A[bx * 64, 0], s)
            for i in T.Parallel(128):
                if i < 64:
                    t[i] = s[i, 0]
            for i, j in T.Parallel(64, 64):
                B[bx * 64 + i, j] = s[(i + 1) % 64, j] + T.if_then_else(j > 0, s[i, j - 1], 0.0) \
                    + t[i - i + j]
    return k


def test_guarded_and_tail_accesses_still_lower():
    lower(_guarded_and_tail_accesses(), "sm_90a")


def test_whole_buffers_of_one_shape_still_copy():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A, s)
            T.copy(s, B)
    lower(k, "sm_90a")


# ---- negative indices: counted from the end, as TileLang's LegalizeNegativeIndex -------
def _negative_indices():
    """``B[0..3] = A[12 + i] + A[63]``, ``B[4..7] = 2 A[12 + i]``, ``B[15] = A[0]``."""

    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((16,), "float32")
            for i in T.Parallel(16):
                s[i] = A[i]
            for i in T.Parallel(4):
                B[i] = s[i - 4] + A[-1]
            for i in T.Parallel(8):
                if i < 4:  # the condition bounds i, as TileLang's analyzer binds it
                    B[i + 4] = s[i - 4] * 2.0
            B[-1] = A[-64]
    return k


def _negative_index_symbolic():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            B[0] = A[-1]
    return k


def test_negative_indices_count_from_the_end():
    from tilecute.ir.printer import print_func

    text = print_func(_negative_indices())
    assert "B[i_1] = s[i_1 + 12] + A[63]" in text
    assert "B[i_2 + 4] = s[i_2 + 12] * T.float32(2.0)" in text
    assert "B[15] = A[0]" in text
    assert "- 4]" not in text and "[-" not in text
    assert "B[0] = A[n - 1]" in print_func(_negative_index_symbolic())


def test_negative_indices_lower_and_build(tmp_path):
    import tilecute

    lower(_negative_indices(), "sm_90a")
    info = tilecute.build_cubin(_negative_indices(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names and (tmp_path / "kernel.cubin").stat().st_size > 0
    source = (tmp_path / "kernel_cute.py").read_text()
    assert "s[i_1_ + 12] + A[63]" in source and "B[15] = A[0]" in source


@pytest.mark.gpu
def test_negative_indices_on_gpu():
    import torch

    import tilecute

    a = torch.randn(64, device="cuda")
    b = torch.zeros(16, device="cuda")
    tilecute.compile(_negative_indices())(a, b)
    want = torch.zeros(16, device="cuda")
    want[0:4] = a[12:16] + a[63]
    want[4:8] = a[12:16] * 2.0
    want[15] = a[0]
    torch.testing.assert_close(b, want, atol=0, rtol=0)
    a = torch.randn(100, device="cuda")
    b = torch.zeros(1, device="cuda")
    tilecute.compile(_negative_index_symbolic())(a, b)
    assert b.item() == a[99].item()
