"""TVM's vector forms, honored lane by lane (``backend/language/lanes.py``): ``T.Ramp``
indices (loads and stores; a lane that may be negative wrapped at run time, as TileLang's
LegalizeNegativeIndex does for a Ramp), ``T.Broadcast``, stepped slices
(``B[0:8:2] = A[1:9:2]``), vector stores into slices (``A[0, 4:8] = b``), TileLang's packed
x2 math (``T.add2`` ...), ``T.extract_lane``, ``T.alloc_var(T.float16x2)`` and the vector
constructor ``T.float16x2(a, b)``.  CPU: the IR each writes, sm_90a cubins, refusals by
name; GPU: values against torch."""

import re
import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.language.negative_index import legalize_negative_indices


# ---- programs -------------------------------------------------------------------------------
def window(n=512, rows=4):
    """Row ``t`` of ``B`` is the 4 elements of ``A`` from ``t - 2``: the first rows' lanes
    before 0 count from ``A``'s end (TileLang's Ramp lanes of unknown sign)."""
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((rows, 4), T.float32)):
        with T.Kernel(1, threads=1) as _:
            for t in T.serial(rows):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]
    return main


def scatter(n=512, rows=4):
    """The reverse: row ``t`` of ``B`` stored at ``A[t - 2 : t + 2]``, wrapping."""
    @T.prim_func
    def main(B: T.Tensor((rows, 4), T.float32), A: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                A[i] = T.float32(-1)
            for t in T.serial(rows):
                A[T.Ramp(t - 2, 1, 4)] = B[t, T.Ramp(0, 1, 4)]
    return main


PAIRS = 64


def packed(op: str, dtype: str):
    """``Out[pair] = T.<op>(X[pair], Y[pair](, Z[pair]))``, one pair of lanes a thread."""
    form = getattr(T, op)

    @T.prim_func
    def main(X: T.Tensor((PAIRS * 2,), dtype), Y: T.Tensor((PAIRS * 2,), dtype),
             Z: T.Tensor((PAIRS * 2,), dtype), Out: T.Tensor((PAIRS * 2,), dtype)):
        with T.Kernel(1, threads=PAIRS) as _:
            tx = T.get_thread_binding()
            pair = T.Ramp(tx * 2, 1, 2)
            if op == "fma2":
                Out[pair] = form(X[pair], Y[pair], Z[pair])
            elif op == "abs2":
                Out[pair] = form(X[pair])
            else:
                Out[pair] = form(X[pair], Y[pair])
    return main


def lanes_of(dtype: str, vector):
    """A packed variable of two lanes, filled from ``A`` and read back swapped."""
    @T.prim_func
    def main(A: T.Tensor((2,), dtype), B: T.Tensor((2,), dtype)):
        with T.Kernel(1, threads=1):
            v = T.alloc_var(vector)
            v = vector(A[0], A[1])
            B[0] = T.extract_lane(v, 1)
            B[1] = T.extract_lane(v, 0)
    return main


@T.prim_func
def slices(A: T.Tensor((4, 16), T.float32), B: T.Tensor((4, 8), T.float32)):
    with T.Kernel(4, threads=1) as r:  # (one thread: the overlapping store has no race)
        b = A[r, 0:4]
        A[r, 4:8] = b                      # a let-bound vector load, stored
        A[r, 9:13] = A[r, 8:12]            # overlapping: every lane read first
        B[r, 0:8:2] = A[r, 1:9:2] * 2.0    # stepped slices
        B[r, 1:9:2] = T.Broadcast(T.float32(-1), 4) + A[r, T.Ramp(12, 1, 4)]


@T.prim_func
def ramp_atomic(Dst: T.Tensor((2,), T.float32), Val: T.Tensor((2,), T.float32),
                Prev: T.Tensor((2,), T.float32)):
    with T.Kernel(1, threads=1):
        Prev[0:2] = T.atomic_addx2(Dst[T.Ramp(0, 1, 2)], Val[T.Ramp(0, 1, 2)], return_prev=True)



# ---- CPU: the IR and cubins -----------------------------------------------------------------
def test_ramp_lanes_of_unknown_sign_wrap_at_run_time(tmp_path):
    text = window().script()
    # t - 2 and t - 1 may be negative (t in 0..3): wrapped where they are; t, t + 1 never
    assert "B[t, 0] = A[T.if_then_else(t - 2 < 0, t + 510, t - 2)]" in text, text
    assert "B[t, 1] = A[T.if_then_else(t - 1 < 0, t + 511, t - 1)]" in text, text
    assert "B[t, 2] = A[t]" in text and "B[t, 3] = A[t + 1]" in text, text
    text = scatter().script()
    assert "A[T.if_then_else(t - 2 < 0, t + 510, t - 2)] = B[t, 0]" in text, text
    for f in (window(), scatter()):
        tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path))


@T.prim_func
def shared_window(A: T.Tensor((16,), T.float32), B: T.Tensor((8, 2), T.float32)):
    with T.Kernel(1, threads=32) as _:
        s = T.alloc_shared((16,), T.float32)
        T.copy(A, s)
        for i in T.Parallel(8):
            B[i, T.Ramp(0, 1, 2)] = s[T.Ramp(i - 1, 1, 2)]


def test_ramp_lane_wraps_in_shared_memory_too(tmp_path):
    text = shared_window.script()
    assert "B[i, 0] = s[T.if_then_else(i - 1 < 0, i + 15, i - 1)]" in text, text
    assert "B[i, 1] = s[i]" in text, text
    tilecute.build_cubin(shared_window, "sm_90a", out_dir=str(tmp_path))


def test_ramp_lanes_known_negative_or_not_keep_no_select():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((2, 2), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            B[bx, T.Ramp(0, 1, 2)] = A[T.Ramp(bx - 3, 1, 2)]     # bx - 3, bx - 2: negative
            B[bx, T.Ramp(0, 1, 2)] = A[T.Ramp(bx + 3, -1, 2)]    # bx + 3, bx + 2: not
            B[bx, T.Ramp(0, 1, 2)] = A[T.Ramp(-2, 1, 2)]         # constants: -2, -1
    text = f.script()
    assert "if_then_else" not in text, text
    assert "B[bx, 0] = A[bx + 13]" in text and "B[bx, 1] = A[bx + 14]" in text, text
    assert "B[bx, 0] = A[bx + 3]" in text and "B[bx, 1] = A[bx + 2]" in text, text
    assert "B[bx, 0] = A[14]" in text and "B[bx, 1] = A[15]" in text, text


def test_negative_index_pass_keeps_the_branch_its_ranges_decide():
    t = N.Var("t", "int32")
    lane = N.Select(N.cmp("lt", t, N.Const(0, "int32")), N.binop("add", t, N.Const(8, "int32")),
                    t, "int32")
    buf = N.Buffer("A", "float32", (N.Const(8, "int32"),), "global")
    out = N.Buffer("B", "float32", (N.Const(8, "int32"),), "global")

    def func(start):
        loop = N.For(t, N.Const(start, "int32"), N.Const(4, "int32"), "serial",
                     (N.Store("B", (N.Const(0, "int32"),), N.Load("A", (lane,), "float32")),))
        kernel = N.KernelScope((N.Const(1, "int32"),), (1,), (N.Var("bx", "int32"),), (loop,))
        return N.PrimFunc("f", (buf, out), (kernel,))

    def index(f):
        return f.kernels[0].body[0].body[0].value.indices[0]

    assert index(legalize_negative_indices(func(0))) == t                     # t in 0..3
    assert index(legalize_negative_indices(func(-6))) == N.binop("add", t, N.Const(8, "int32"))
    assert index(legalize_negative_indices(func(-2))) == lane                 # -2..1: kept


@pytest.mark.parametrize("op", ["add2", "sub2", "mul2", "max2", "min2", "fma2", "abs2"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_packed_x2_math_is_each_lanes_scalar_op(op, dtype, tmp_path):
    f = packed(op, dtype)
    text = f.script()
    scalar = {"add2": "X[tx * 2] + Y[tx * 2]", "sub2": "X[tx * 2] - Y[tx * 2]",
              "mul2": "X[tx * 2] * Y[tx * 2]", "max2": "T.max(X[tx * 2], Y[tx * 2])",
              "min2": "T.min(X[tx * 2], Y[tx * 2])",
              "fma2": "T.fma(X[tx * 2], Y[tx * 2], Z[tx * 2])", "abs2": "T.abs(X[tx * 2])"}[op]
    assert f"Out[tx * 2] = {scalar}" in text, text
    assert f"Out[tx * 2 + 1] = {scalar.replace('[tx * 2]', '[tx * 2 + 1]')}" in text, text
    assert "if_then_else" not in text  # tx * 2 >= 0: no wrap
    tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path))


@pytest.mark.parametrize("dtype,vector", [("float16", T.float16x2), ("bfloat16", T.bfloat16x2),
                                          ("float32", T.float32x2)])
def test_vector_variable_and_extract_lane(dtype, vector, tmp_path):
    f = lanes_of(dtype, vector)
    text = f.script()
    assert f'v = T.alloc_local((2,), "{dtype}")' in text
    assert "v[0] = A[0]" in text and "v[1] = A[1]" in text, text
    assert "B[0] = v[1]" in text and "B[1] = v[0]" in text, text
    tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path))


def test_vector_annotated_assignment():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), H: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=1):
            v: T.float16x4 = A[0:4:1]        # TVMScript's typed vector let: lanes converted
            H[0:4] = v
            w: "float32x2" = A[4:6:1]        # assigned again: a vector variable
            w = w * 2.0
            H[4:6] = w
    text = f.script()
    assert 'v_0 = T.Cast("float16", A[0])' in text and "H[3] = v_3" in text, text
    assert 'w = T.alloc_local((2,), "float32")' in text, text
    assert 'H[5] = T.Cast("float16", w[1])' in text, text


@T.prim_func
def vector_buffer(A: T.Tensor((8,), T.float16), B: T.Tensor((8,), T.float16)):
    with T.Kernel(1, threads=1):
        packed = T.alloc_local((4,), T.float16x2)
        for i in T.serial(4):
            packed[i] = T.float16x2(A[2 * i], A[2 * i + 1])
        for i in T.serial(4):
            packed[i] += T.Broadcast(T.float16(1), 2)
        for i in T.serial(4):
            B[2 * i] = T.extract_lane(packed[3 - i], 1)
            B[2 * i + 1] = T.extract_lane(packed[3 - i], 0)


def test_local_buffer_of_vectors(tmp_path):
    text = vector_buffer.script()
    assert 'packed = T.alloc_local((4, 2), "float16")' in text, text
    assert "packed[i, 1] = A[2 * i + 1]" in text, text
    assert "B[2 * i_2] = packed[3 - i_2, 1]" in text, text
    tilecute.build_cubin(vector_buffer, "sm_90a", out_dir=str(tmp_path))


def test_int8x4_vector_variable_swaps_lanes_reading_all_first():
    @T.prim_func
    def f(A: T.Tensor((4,), T.int8), B: T.Tensor((4,), T.int8)):
        with T.Kernel(1, threads=1):
            v = T.alloc_var("int8x4")
            v = T.int8x4(A[0], A[1], A[2], A[3])
            v = T.int8x4(T.extract_lane(v, 3), T.extract_lane(v, 2), T.extract_lane(v, 1),
                         T.extract_lane(v, 0))
            B[T.Ramp(0, 1, 4)] = v
    text = f.script()
    # the swap reads every lane of v before it writes one (TVM's vector let)
    body = text[text.index("v[3] = A[3]"):]
    assert re.search(r"lane_0 = v\[3\]\s+lane_1 = v\[2\]\s+lane_2 = v\[1\]\s+lane_3 = v\[0\]\s+"
                     r"v\[0\] = lane_0", body), text


def test_slices_store_vectors_reading_every_lane_first(tmp_path):
    text = slices.script()
    # `b = A[r, 0:4]` then `A[r, 4:8] = b`: b's lanes are A's before the store
    assert re.search(r"b_0 = A\[r, 0\].*A\[r, 4\] = b_0", text, re.S), text
    # overlapping: A[r, 8:12] read before A[r, 9:13] is written
    m = re.search(r"(lane_0 = A\[r, 8\]\s+lane_1 = A\[r, 9\]\s+lane_2 = A\[r, 10\]\s+"
                  r"lane_3 = A\[r, 11\]\s+A\[r, 9\] = lane_0)", text)
    assert m, text
    assert "B[r, 0] = A[r, 1] * T.float32(2.0)" in text and "B[r, 6] = A[r, 7] * T.float32(2.0)" \
        in text, text
    assert "B[r, 1] = T.float32(-1.0) + A[r, 12]" in text, text
    assert "B[r, 7] = T.float32(-1.0) + A[r, 15]" in text, text
    tilecute.build_cubin(slices, "sm_90a", out_dir=str(tmp_path))


def test_chained_and_unpacked_vectors_are_read_before_any_store():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            A[0:2], B[0:2] = B[0:2:1], A[0:2:1]      # a swap: both read first
            A[4:6] = B[4:6] = A[5:7:1]               # read once, before A is written
    text = f.script()
    assert re.search(r"unpacked_0 = B\[0\]\s+unpacked_1 = B\[1\]\s+unpacked_0_1 = A\[0\]\s+"
                     r"unpacked_1_1 = A\[1\]\s+A\[0\] = unpacked_0", text), text
    assert re.search(r"chained_0 = A\[5\]\s+chained_1 = A\[6\]\s+A\[4\] = chained_0\s+"
                     r"A\[5\] = chained_1\s+B\[4\] = chained_0", text), text


def test_a_vector_read_through_a_view_of_the_stored_buffer_is_read_first():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            s = T.alloc_shared((16,), T.float32)
            v = T.view(s, (2, 8))
            T.copy(A, s)
            s[1:5] = v[0, 0:4:1]      # v is s's storage: every lane read before s is written
            T.copy(s, A)
    assert re.search(r"lane_3 = v\[0, 3\]\s+s\[1\] = lane_0", f.script()), f.script()


def test_atomic_addx2_takes_a_ramp_element_address(tmp_path):
    text = ramp_atomic.script()
    assert "Prev[0] = T.atomic_add(Dst[0], Val[0], return_prev=True)" in text, text
    assert "Prev[1] = T.atomic_add(Dst[1], Val[1], return_prev=True)" in text, text
    tilecute.build_cubin(ramp_atomic, "sm_90a", out_dir=str(tmp_path))


def test_vector_dtype_casts_and_names():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), H: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=1):
            v = A[0:4:1]
            H[0] = 1.0 if v.dtype == "float32x4" else 2.0     # TVM's dtype name
            H[4:8] = v.astype("float16x4")
            H[0:4] = T.Cast("float16", -v)
    text = f.script()
    assert "H[0] = T.float16(1.0)" in text, text
    assert 'H[4] = T.Cast("float16", v_0)' in text, text
    assert 'H[3] = T.Cast("float16", v_3 * T.float32(-1.0))' in text, text  # TVM's -x: x * -1


@T.prim_func
def parallel_pairs(A: T.Tensor((256,), T.float16), B: T.Tensor((256,), T.float16),
                   M: T.Tensor((256,), T.bool)):
    with T.Kernel(1, threads=128) as _:
        s = T.alloc_shared((256,), T.float16)
        T.copy(A, s)
        for i in T.Parallel(128):
            pair = s[T.Ramp(i * 2, 1, 2)]
            B[T.Ramp(i * 2, 1, 2)] = T.if_then_else(
                pair > T.float16(0), T.mul2(pair, T.Broadcast(T.float16(3), 2)),
                T.max(pair, T.float16(-1)))
            M[T.Ramp(i * 2, 1, 2)] = pair == T.Broadcast(T.float16(0), 2)


def test_vectors_in_a_parallel_loop_select_compare_and_max(tmp_path):
    text = parallel_pairs.script()
    assert "pair_0 = s[i * 2]" in text and "pair_1 = s[i * 2 + 1]" in text, text
    assert ("B[i * 2 + 1] = T.if_then_else(pair_1 > T.float16(0.0), pair_1 * T.float16(3.0), "
            "T.max(pair_1, T.float16(-1.0)))") in text, text
    assert "M[i * 2] = pair_0 == T.float16(0.0)" in text, text
    tilecute.build_cubin(parallel_pairs, "sm_90a", out_dir=str(tmp_path))


@T.prim_func
def wide_pairs(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32),
               Z: T.Tensor((32,), T.float32)):
    with T.Kernel(1, threads=32) as _:
        tx = T.get_thread_binding()
        v = T.reinterpret(T.ldg64(X[tx * 2:tx * 2 + 2]), T.float32x2)
        Y[tx * 2:tx * 2 + 2] = T.add2(v, v)
        Z[tx] = T.extract_lane(v, 1) + 1.0


def test_a_wide_load_is_a_vector_of_its_lanes(tmp_path):
    # T.ldg64's words reinterpreted as float32x2: TVM's vector, here the lanes of the words
    text = wide_pairs.script()
    assert ('Y[tx * 2 + 1] = T.reinterpret(ldg64_words[1], "float32") + '
            'T.reinterpret(ldg64_words[1], "float32")') in text, text
    assert 'Z[tx] = T.reinterpret(ldg64_words[1], "float32") + T.float32(1.0)' in text, text
    tilecute.build_cubin(wide_pairs, "sm_90a", out_dir=str(tmp_path))


def test_vector_dtype_of_one_value_converts_it_into_every_lane():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), H: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=1):
            H[0:2] = T.float16x2(A[0])         # TVM's cast to a vector dtype: a Broadcast
            H[2:4] = T.float16x2(A[2:4:1])     # of a vector: each lane
    text = f.script()
    assert 'H[1] = T.Cast("float16", A[0])' in text, text
    assert 'H[3] = T.Cast("float16", A[3])' in text, text


@T.prim_func
def repacked(H: T.Tensor((4,), T.float16), U: T.Tensor((2,), T.uint32), I: T.Tensor((4,), T.int8),
             G: T.Tensor((2,), T.float16)):
    with T.Kernel(1, threads=1):
        U[0] = T.reinterpret(H[0:2:1], "uint32")      # two halves into one word
        G[0:2] = T.reinterpret(U[1], T.float16x2)     # one word into two halves
        I[0:4] = T.reinterpret(U[1], T.int8x4)


def test_reinterpret_repacks_bits_between_lane_counts(tmp_path):
    text = repacked.script()
    assert ('U[0] = T.Cast("uint32", T.reinterpret(H[0], "uint16")) | '
            'T.Cast("uint32", T.reinterpret(H[1], "uint16")) << T.uint32(16)') in text, text
    assert 'G[1] = T.reinterpret(T.Cast("uint16", U[1] >> T.uint32(16) & T.uint32(65535)), ' \
        '"float16")' in text, text
    assert 'I[3] = T.reinterpret(T.Cast("uint8", U[1] >> T.uint32(24) & T.uint32(255)), "int8")' \
        in text, text
    tilecute.build_cubin(repacked, "sm_90a", out_dir=str(tmp_path))


def test_shuffle_picks_lanes():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            v = A[0:4:1]
            A[4:7] = T.Shuffle([v, A[7]], [4, 3, 0])   # lanes of v, then the scalar
            A[7] = T.Shuffle([v], [2])                 # one index: a scalar
    text = f.script()
    assert "lane_0 = A[7]" in text and "A[4] = lane_0" in text, text  # read before A is stored
    assert "A[5] = v_3" in text and "A[6] = v_0" in text, text
    assert "A[7] = v_2" in text, text


def test_reinterpret_of_a_vector_is_lane_by_lane():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.uint32)):
        with T.Kernel(1, threads=1):
            B[0:4] = T.reinterpret(A[0:4:1], "uint32x4")
    assert 'B[3] = T.reinterpret(A[3], "uint32")' in f.script(), f.script()


def test_printed_ir_reads_back_the_same():
    # the lanes are plain IR: the printed script parses back to the same function
    for f in (window(), scatter(), packed("fma2", "float16"), lanes_of("float16", T.float16x2),
              slices, ramp_atomic, parallel_pairs, shared_window, wide_pairs, vector_buffer):
        assert T.from_script(f.script()) == f, f.script()


# ---- CPU: refusals --------------------------------------------------------------------------
def _parse(body: str):
    text = textwrap.dedent('''\
        import tilecute.language as T


        @T.prim_func
        def bad(A: T.Tensor((16,), "float32"), B: T.Tensor((4, 8), "float16")):
            with T.Kernel(1, threads=32) as bx:
        ''') + textwrap.indent(textwrap.dedent(body), "        ")
    return T.from_script(text)


@pytest.mark.parametrize("body,message", [
    ("B[T.Ramp(0, 1, 2), 0] = A[0:2:1]", "only the last index of a buffer access may be a vector"),
    ("A[0:4] = A[1]", "storing one value into 4 elements of 'A'"),
    ("A[0] = A[0:8:2]", "a 4-lane vector stored into one element of 'A'"),
    ("A[0:5:2] = A[0:10:2]", "cannot store a 5-lane value into 3 elements of 'A'"),
    ("A[0:4:-1] = A[0:4:1]", "slice step `-1`: tilecute takes a positive int"),
    ("x = T.alloc_var(T.float16x2, init=1)", "T.alloc_var(T.float16x2) takes no init"),
    ("s = T.alloc_shared((4,), T.float16x2)", "a shared buffer of float16x2 vectors; tilecute "
                                             "takes a buffer of vectors in local memory only"),
    ("p = T.alloc_local((4,), T.float32x2)\nT.fill(p, 0.0)", "`p` holds 2-lane vectors"),
    ("p = T.alloc_local((4,), T.float32x2)\np[0] = 1.0", "`p[0]` is a 2-lane vector"),
    ("p = T.alloc_local((4,), T.float32x2)\np[0:2] = A[0:4:1]", "takes one scalar index per dim"),
    ("A[0] = T.extract_lane(A[0:4:1], 4)", "Lane index 4 is out of bounds for dtype float32x4"),
    ("A[0] = T.extract_lane(A[0:4:1], bx)", "extract_lane expects a compile-time integer lane"),
    ("A[0:4] = A[0:4:1] + A[0:8:4]", "vectors of [2, 4] lanes"),
    ("A[0] = T.exp(A[0:2:1])", "T.exp: cannot use LaneVector <a 2-lane float32 vector"),
    ("A[0:2] = T.add2(A[0:2:1], T.Cast('float16', A[2:4:1]))",
     "expected all packed x2 arguments to have the same dtype, got ['float32x2', 'float16x2']"),
    ("A[0:4] = T.add2(A[0:4:1], A[4:8:1])", "expected dtype in ['bfloat16x2', 'float16x2', "
                                            "'float32x2'], got 'float32x4'"),
    ("A[0] = T.add2(A[0], A[1])", "T.add2 takes float32x2 / float16x2 / bfloat16x2 vectors"),
    ("b = A[0:4]\nA[4] = 1.0\nA[8:12] = b", "'b' (a slice of 'A' bound at <script>:7) is read "
                                            "here as a vector"),
    ("b = A[0:4]\nfor i in T.serial(2):\n    A[8:12] = b", "TileLang loads its lanes where it is "
                                                          "bound"),
    ("A[0:2] = T.float32x2(A[1], B[0, 0])", "lanes of dtypes ['float32', 'float16']"),
    ("A[0:4] = A[4:8:1].astype('float16x2')", "cannot cast a float32x4 vector to float16x2"),
    ("v = T.alloc_var(T.float16x2)\nB[0, 0] = v[0]", "read a lane with T.extract_lane(v, k)"),
    ("v = T.alloc_var(T.float16x2)\nv = B[0, 0:4:1]", "'v' is a 2-lane float16 vector variable"),
    ("x = T.alloc_var('float32')\nx = A[0:2:1]", "cannot store LaneVector"),
    ("v: T.float32x4 = A[0:2:1]", "a float32x4 takes a 4-lane vector"),
    # a vector is no parse-time value: its truth and Python comparisons are errors
    ("A[0] = 1.0 if A[0:2:1] else 2.0", "a float32x2 vector has no truth value"),
    ("if A[0:2:1]:\n    A[0] = 1.0", "a float32x2 vector has no truth value"),
    ("if A[0:2:1] == 2:\n    A[0] = 1.0", "a boolx2 vector has no truth value"),
    ("T.print(A[0:2:1])", "cannot use LaneVector <a 2-lane float32 vector"),
    ("A[0:2] = T.reinterpret(A[0:2:1], 'int32')", "float32x2 (64 bits) cannot be reinterpreted "
                                                  "as int32 (32 bits)"),
    ("A[0:2] = T.reinterpret(B[0, 0:3:1], 'int8x6')", "in whole 32-bit words"),
    ("A[0:2] = T.Shuffle([A[0:2:1]], [0, 2])", "T.Shuffle: lane index 2 is not an int in 0..1"),
    ("A[0:2] = T.Shuffle([A[0], B[0, 0]], [0, 1])", "T.Shuffle: lanes of dtypes"),
    ("T.copy(A[T.Ramp(0, 2, 4)], A[T.Ramp(4, 1, 4)])", "a vector index is only as T.Ramp(start, "
                                                     "1, lanes)"),
    ("v = T.Ramp(0, 1, 4)\nT.copy(A[v:v + 4], A[4:8])", "expected an integer expression, got `v`"),
    ("for i in T.serial(T.Ramp(0, 1, 2)):\n    A[0] = 1.0", "expected an integer expression"),
])
def test_refused_by_name(body, message):
    with pytest.raises(FrontendError) as info:
        _parse(body)
    assert message in str(info.value), str(info.value)


# ---- GPU: values against torch --------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_ramp_window_and_scatter_wrap_like_tilelang():
    import torch

    a = torch.arange(512, device="cuda", dtype=torch.float32)
    b = torch.empty(4, 4, device="cuda", dtype=torch.float32)
    tilecute.compile(window())(a, b)
    idx = torch.tensor([[(t - 2 + k) % 512 for k in range(4)] for t in range(4)], device="cuda")
    torch.testing.assert_close(b, a[idx], rtol=0, atol=0)

    src = torch.arange(16, device="cuda", dtype=torch.float32).reshape(4, 4)
    out = torch.empty(512, device="cuda", dtype=torch.float32)
    tilecute.compile(scatter())(src, out)
    want = torch.full((512,), -1.0, device="cuda")
    for t in range(4):  # rows in order: a later row's lane overwrites an earlier one's
        for k in range(4):
            want[(t - 2 + k) % 512] = src[t, k]
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_ramp_lane_wraps_in_shared_memory():
    import torch

    a = torch.randn(16, device="cuda")
    b = torch.empty(8, 2, device="cuda")
    tilecute.compile(shared_window)(a, b)
    i = torch.arange(8, device="cuda")
    torch.testing.assert_close(b, torch.stack([a[(i - 1) % 16], a[i]], 1), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["add2", "sub2", "mul2", "max2", "min2", "fma2", "abs2"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gpu_packed_x2_math_matches_torch(op, dtype):
    import torch

    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(7)
    x, y, z = (torch.randn(PAIRS * 2, device="cuda", generator=gen).to(tdtype) for _ in range(3))
    out = torch.empty_like(x)
    tilecute.compile(packed(op, dtype))(x, y, z, out)
    xf, yf, zf = x.float(), y.float(), z.float()
    want = {"add2": xf + yf, "sub2": xf - yf, "mul2": xf * yf, "max2": torch.maximum(xf, yf),
            "min2": torch.minimum(xf, yf), "fma2": xf * yf + zf, "abs2": xf.abs()}[op]
    tol = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}[dtype]
    torch.testing.assert_close(out.float(), want.to(tdtype).float(), rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,vector", [("float16", T.float16x2), ("bfloat16", T.bfloat16x2)])
def test_gpu_vector_variable_lanes(dtype, vector):
    import torch

    a = torch.tensor([1.25, -2.5], dtype=getattr(torch, dtype), device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(lanes_of(dtype, vector))(a, b)
    torch.testing.assert_close(b, a.flip(0), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_slices():
    import torch

    a = torch.randn(4, 16, device="cuda")
    b = torch.empty(4, 8, device="cuda")
    want_a = a.clone()
    want_a[:, 4:8] = want_a[:, 0:4]
    want_a[:, 9:13] = want_a[:, 8:12].clone()
    want_b = torch.empty(4, 8, device="cuda")
    want_b[:, 0:8:2] = want_a[:, 1:9:2] * 2
    want_b[:, 1:9:2] = want_a[:, 12:16] - 1
    tilecute.compile(slices)(a, b)
    torch.testing.assert_close(a, want_a, rtol=0, atol=0)
    torch.testing.assert_close(b, want_b, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_atomic_addx2_at_a_ramp():
    import torch

    dst = torch.tensor([1.0, 2.0], device="cuda")
    val = torch.tensor([10.0, 20.0], device="cuda")
    prev = torch.empty(2, device="cuda")
    tilecute.compile(ramp_atomic)(dst, val, prev)
    torch.testing.assert_close(prev, torch.tensor([1.0, 2.0], device="cuda"))
    torch.testing.assert_close(dst, torch.tensor([11.0, 22.0], device="cuda"))


@pytest.mark.gpu
def test_gpu_vectors_in_a_parallel_loop():
    import torch

    a = torch.randn(256, device="cuda").to(torch.float16)
    a[::7] = 0
    b = torch.empty_like(a)
    m = torch.empty(256, dtype=torch.bool, device="cuda")
    tilecute.compile(parallel_pairs)(a, b, m)
    want = torch.where(a > 0, a * 3, torch.maximum(a, torch.tensor(-1.0, device="cuda").half()))
    torch.testing.assert_close(b, want, rtol=0, atol=0)
    assert torch.equal(m, a == 0)


@pytest.mark.gpu
def test_gpu_a_wide_load_is_a_vector_of_its_lanes():
    import torch

    x = torch.randn(64, device="cuda")
    y = torch.empty(64, device="cuda")
    z = torch.empty(32, device="cuda")
    tilecute.compile(wide_pairs)(x, y, z)
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    torch.testing.assert_close(z, x[1::2] + 1, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_reinterpret_repacks_bits():
    import torch

    h = torch.randn(4, device="cuda").half()
    u = torch.tensor([0, 0x3C00BC00], dtype=torch.int64).to(torch.uint32).cuda()  # 1.0, -1.0
    i = torch.empty(4, dtype=torch.int8, device="cuda")
    g = torch.empty(2, dtype=torch.float16, device="cuda")
    tilecute.compile(repacked)(h, u, i, g)
    assert u[0].item() == h[0:2].contiguous().view(torch.int32).item() & 0xFFFFFFFF
    torch.testing.assert_close(g.cpu(), torch.tensor([-1.0, 1.0], dtype=torch.float16))
    assert i.cpu().tolist() == [0, -68, 0, 60]   # 0x3C00BC00's bytes, lowest first


@pytest.mark.gpu
def test_gpu_local_buffer_of_vectors():
    import torch

    a = torch.randn(8, device="cuda").half()
    b = torch.empty_like(a)
    tilecute.compile(vector_buffer)(a, b)
    torch.testing.assert_close(b, (a + 1).flip(0), rtol=0, atol=0)
