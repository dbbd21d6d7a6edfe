"""The mistakes a TileLang user makes, one per program, and what tilecute says: an error
raised by the frontend or the pass that finds the mistake, naming the prim_func, the
form or buffer, and the source line (marked ``# <- here``), never a traceback from inside
CuTe DSL / MLIR and never a kernel that builds and does something else.  The programs
complement ``test_bad_programs.py``; each comment says what TileLang 0.1.15 does."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import ValidationError
from tilecute.language.parser import FrontendError
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.select_mma import GemmError
from tilecute.transform.shared_memory import SharedMemoryError
from test_bad_programs import told_where_and_what


# ---- copies and atomics of whole buffers ------------------------------------------------
def copy_between_shared_tiles_of_two_shapes():  # TileLang: ValueError (assert_structural_equal)
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            t = T.alloc_shared((32, 128), "float16")
            T.copy(A[0, 0], s)
            T.copy(s, t)  # <- here
            T.copy(t, B[0, 0])
    return k


def copy_tile_into_flat_fragment():  # same elements, another rank: TileLang asserts too
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((4096,), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            f = T.alloc_fragment((4096,), "float16")
            T.copy(A[0, 0], s)
            T.copy(s, f)  # <- here
            T.copy(f, B[0])
    return k


def atomic_add_of_a_narrower_fragment():  # TileLang: ValueError (assert_structural_equal)
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 32), "float32")
            T.copy(A[0:64, 0:32], f)
            T.atomic_add(B, f)  # <- here
    return k


def atomic_max_of_a_narrower_fragment():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((32, 64), "float32")
            T.copy(A[0:32, 0:64], f)
            T.atomic_max(B, f)  # <- here
    return k


# ---- gemm ---------------------------------------------------------------------------------
def _gemm_program(c_scope="fragment", threads=128, a_global=False):
    alloc_c = T.alloc_shared if c_scope == "shared" else T.alloc_fragment

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=threads):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            c = alloc_c((64, 64), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            if a_global:
                T.gemm(A, b, c, clear_accum=True)  # <- here
            else:
                T.gemm(a, b, c, clear_accum=True)  # <- here
            T.copy(c, C[0, 0])
    return k


def gemm_accumulator_in_shared():  # TileLang: C must be a fragment (ICHECK in its gemm op)
    return _gemm_program(c_scope="shared")


def gemm_operand_straight_from_global():
    return _gemm_program(a_global=True)


def gemm_wgmma_threads_1000():  # 1000 is not a whole number of warpgroups
    return _gemm_program(threads=1000)


# ---- launch shape, loops, allocations -----------------------------------------------------
def shared_memory_over_by_32_bytes():  # 227 KiB + 32 bytes on sm_90a
    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):  # <- here
            s = T.alloc_shared((227 * 256 + 8,), "float32")
            for i in T.Parallel(256):
                s[i] = A[i]
            for i in T.Parallel(256):
                B[i] = s[i]
    return k


def zero_threads():  # TileLang: ValueError "threads must be positive, got 0"
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=0):  # <- here
            for i in T.Parallel(128):
                A[i] = 0.0
    return k


def negative_grid_along_y():  # TileLang accepts it; the launch fails
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(2, -3, threads=128) as (bx, by):  # <- here
            for i in T.Parallel(128):
                A[i] = 0.0
    return k


def float_grid():  # 128 / 64 is 2.0 in Python; TileLang fails inside TVM
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(128 / 64, threads=128):  # <- here
            for i in T.Parallel(128):
                A[i] = 0.0
    return k


def float_parallel_extent():  # TileLang: TVM InternalError (a float32 loop var)
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128 / 2):  # <- here
                B[i] = A[i]
    return k


def float_tensor_dim():  # TileLang parses it and fails later
    n = 256 / 2

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((128,), "float32")):  # <- here
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]
    return k


def pipelined_order_too_long():
    @T.prim_func
    def k(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            f = T.alloc_fragment((64, 64), "float32")
            T.clear(f)
            for ko in T.Pipelined(4, num_stages=2, order=[0, 1, 2], stage=[0, 1, 1]):  # <- here
                T.copy(A[ko * 64, 0], s)
                for i, j in T.Parallel(64, 64):
                    f[i, j] += s[i, j]
            T.copy(f, B[0, 0])
    return k


def serial_step_zero():  # TileLang: ValueError "step must be non-zero"
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.serial(0, 128, 0):  # <- here
                A[i] = 0.0
    return k


def empty_shared_tile():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((0,), "float32")  # <- here
            for i in T.Parallel(128):
                A[i] = 0.0
    return k


def fragment_allocated_in_parallel():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                f = T.alloc_fragment((4,), "float32")  # <- here
                f[0] = A[i]
                B[i] = f[0]
    return k


# ---- reductions ---------------------------------------------------------------------------
def _reduce_program(r_shape, dim):
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor(r_shape, "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment(r_shape, "float32")
            T.copy(A[0, 0], f)
            T.reduce_sum(f, r, dim=dim)  # <- here
            T.copy(r, B)
    return k


def reduce_into_a_wider_dst():
    return _reduce_program((64, 2), 1)


def reduce_dim_minus_three():
    return _reduce_program((64,), -3)


# ---- Python in the body -------------------------------------------------------------------
@T.macro
def _add(frag, value):
    for i in T.Parallel(128):
        frag[i] = frag[i] + value


def macro_given_too_many_arguments():  # TileLang: TypeError "takes 2 positional arguments"
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            T.copy(A[0], f)
            _add(f, 1.0, 2.0)  # <- here
            T.copy(f, B[0])
    return k


def python_list_index_out_of_range():  # TileLang: IndexError
    offsets = [0, 32]

    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(32):
                B[i] = A[i + offsets[2]]  # <- here
    return k



def macro_given_an_unknown_keyword():  # Python (and TileLang): "unexpected keyword argument"
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            T.copy(A[0], f)
            _add(f, amount=1.0)  # <- here
            T.copy(f, B[0])
    return k


def shape_unpacked_into_too_few_names():  # Python (and TileLang): "too many values to unpack"
    @T.prim_func
    def k(A: T.Tensor((4, 64, 64), "float32")):
        M, N = A.shape  # <- here
        with T.Kernel(1, threads=128):
            for i in T.Parallel(M):
                A[0, i, 0] = 0.0
    return k

CASES = [
    (copy_between_shared_tiles_of_two_shapes, FrontendError,
     ["T.copy(s, t)", "'s' has shape (64, 64)", "'t' (32, 128)", "one shape"]),
    (copy_tile_into_flat_fragment, FrontendError, ["T.copy(s, f)", "(64, 64)", "'f' (4096,)"]),
    (atomic_add_of_a_narrower_fragment, FrontendError,
     ["T.atomic_add(B, f)", "'B' has shape (64, 64)", "'f' (64, 32)", "one shape"]),
    (atomic_max_of_a_narrower_fragment, FrontendError,
     ["T.atomic_max(B, f)", "'f' (32, 64)"]),
    (gemm_accumulator_in_shared, ValidationError, ["T.gemm", "accumulates into a fragment",
                                                   "'c' is shared"]),
    (gemm_operand_straight_from_global, GemmError, ["T.gemm(A, b, c)", "'A') is a global buffer"]),
    (gemm_wgmma_threads_1000, GemmError, ["warpgroups of 128 threads", "the block has 1000"]),
    (shared_memory_over_by_32_bytes, SharedMemoryError,
     ["needs 232480 bytes", "at most 232448 on sm_90a", "'s' (58120) float32"]),
    (zero_threads, FrontendError, ["threads must be positive", "(0,)"]),
    (negative_grid_along_y, ValidationError, ["grid extent -3 along y", "1..65535"]),
    (float_grid, FrontendError, ["T.Kernel: expected an integer expression", "`128 / 64`",
                                 "the Python float 2.0", "`//`"]),
    (float_parallel_extent, FrontendError, ["T.Parallel: expected an integer expression",
                                            "`128 / 2`", "float 64.0"]),
    (float_tensor_dim, FrontendError, ["'A': a dimension must be an int", "got 128.0"]),
    (pipelined_order_too_long, FrontendError, ["T.Pipelined", "=(0, 1, ", "has 3 entries",
                                               "2 scheduled statements"]),
    (serial_step_zero, FrontendError, ["T.serial", "step must be non-zero"]),
    (empty_shared_tile, FrontendError, ["T.alloc_shared", "'s'", "positive", "(0,)"]),
    (fragment_allocated_in_parallel, LayoutError, ["fragment buffer 'f'",
                                                   "inside a T.Parallel loop"]),
    (reduce_into_a_wider_dst, ValidationError, ["T.reduce_sum", "gives shape (64,)",
                                                "'r' has shape (64, 2)"]),
    (reduce_dim_minus_three, FrontendError, ["T.reduce_sum", "dim=-3 is out of range for 'f'"]),
    (macro_given_too_many_arguments, FrontendError, ["T.macro '_add'",
                                                     "too many positional arguments"]),
    (python_list_index_out_of_range, FrontendError, ["cannot evaluate `offsets[2]`",
                                                     "list index out of range"]),
    # before: "missing a required argument: 'value'" (inspect's bind checks that first)
    (macro_given_an_unknown_keyword, FrontendError,
     ["T.macro '_add'", "unexpected keyword argument 'amount'", "(its parameters: frag, value)"]),
    # before: "`M, N = A.shape` at the top level: only `with T.Kernel(...)` blocks, ..."
    (shape_unpacked_into_too_few_names, FrontendError, ["cannot unpack 3 values into 2 names"]),
]


@pytest.mark.parametrize("factory,error,words", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_mistake_is_told_where_and_what(factory, error, words):
    helper = {"gemm": _gemm_program, "reduce": _reduce_program}.get(factory.__name__.split("_")[0])
    message = told_where_and_what(factory, error, words, helper or factory)
    assert "prim_func 'k'" in message


# ---- what is not a mistake, and builds with TileLang's meaning -----------------------------
def _fragment_read_by_thread():
    """A fragment read outside T.Parallel at a thread-dependent index: TileLang reads element
    ``tx`` of the tile in each thread; tilecute keeps such a fragment replicated (every
    thread holds every element), so each thread reads element ``tx``."""

    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            T.copy(A[0], f)
            tx = T.get_thread_binding()
            B[tx] = f[tx]
    return k


def test_a_fragment_read_at_the_thread_index_builds_replicated():
    source = tilecute.compile(_fragment_read_by_thread(), target="sm_90a").get_kernel_source()
    assert "f = cute.make_rmem_tensor((128,), cutlass.Float32)  # replicated" in source
    assert "B[tx] = f[tx]" in source


# ---- mistakes found at call time, before any driver call (CPU tensors) ----------------------
def _scale_by_two():
    @T.prim_func
    def scale(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 64):
                B[i, j] = A[i, j] * 2.0
    return scale


def test_call_time_mistakes_name_the_kernel_and_argument():
    torch = pytest.importorskip("torch")
    kernel = tilecute.compile(_scale_by_two(), target="sm_90a")
    a = torch.zeros(64, 64)
    cases = [((a, a), "scale: argument 'A': expected a CUDA tensor, got cpu"),
             ((a.half(), a), "scale: argument 'A': expected dtype float32, got float16"),
             ((a.t(), a), "scale: argument 'A': expected a contiguous (row-major) tensor, got "
                          "shape [64, 64] with strides [1, 64]"),
             ((a[:, :32], a), "scale: argument 'A': expected shape[1] == 64, got 32")]
    for args, message in cases:
        with pytest.raises(ValueError) as info:
            kernel(*args)
        assert str(info.value).startswith(message), str(info.value)


def _symbol_only_in_the_output():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]
    return k


def test_an_output_sized_by_a_symbol_no_input_binds_is_named_at_call():
    # passed in, B binds m; allocated (out_idx), nothing does: the call names the output
    torch = pytest.importorskip("torch")
    kernel = tilecute.compile(_symbol_only_in_the_output(), out_idx=[1], target="sm_90a")
    with pytest.raises(ValueError, match="k: output 'B' has symbolic dim 'm' that no input binds"):
        kernel.allocate_outputs([torch.zeros(128)])
