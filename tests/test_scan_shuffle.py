"""The features issue 17's corpus needed (tests/corpus/, the programs that were strict
xfails): a fragment walked by a nest with unit loops, a Let inside a vectorized
T.Parallel, T.cumsum / T.cummax (a scan tile op), ``while`` loops, T.alloc_reducer /
T.finalize_reducer, warp shuffles (T.shfl_xor ...) and T.im2col.  Each: the IR it parses
to (printed), what the passes and the code generator make of it, and an error case."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def _script(body: str, params: str, grid: str = "4", threads: int = 128) -> str:
    return (f"import tilecute.language as T\n\n\n@T.prim_func\n"
            f"def kern({params}):\n    with T.Kernel({grid}, threads={threads}) as bx:\n"
            + textwrap.indent(textwrap.dedent(body), "        "))


def _allocs(func) -> dict:
    return {s.buffer.name: s for k in func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate)}


def _source(func, arch: str = "sm_90a") -> str:
    return emit_cute(lower(func, arch))


def _error(text: str) -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    return str(e.value)


# ---- layout inference: a fragment walked by a nest with unit loops -----------------------------
UNIT_NEST = _script("""
    x = T.alloc_fragment((1, 256), "float32")
    acc = T.alloc_fragment((256,), "float32")
    T.clear(acc)
    for i, j in T.Parallel(1, 256):
        x[i, j] = A[bx, j]
        acc[j] += x[i, j] * x[i, j]
    for j in T.Parallel(256):
        B[bx, j] = acc[j]
""", 'A: T.Tensor((4, 256), "float32"), B: T.Tensor((4, 256), "float32")')


def test_unit_loops_keep_a_lower_rank_fragment_blocked():
    """``acc[j]`` under ``T.Parallel(1, 256)``: iteration (0, j) and element j are the same
    flat index, so ``acc`` is distributed like ``x`` (it was taken as replicated, and the
    nest writing both was refused)."""
    func = run_passes(T.from_script(UNIT_NEST), "sm_90a", until="infer_layouts")
    allocs = _allocs(func)
    assert allocs["acc"].layout == allocs["x"].layout == N.Layout("blocked", threads=128, vector=4)


def test_a_fragment_read_at_another_loop_variable_stays_replicated():
    text = UNIT_NEST.replace("T.Parallel(1, 256)", "T.Parallel(2, 128)").replace(
        '"float32")\n    acc', '"float32")\n    acc').replace("(1, 256)", "(2, 128)").replace(
        "acc[j] +=", "acc[i] +=")
    with pytest.raises(ValueError, match="replicated fragment 'acc'"):
        run_passes(T.from_script(text), "sm_90a")


# ---- code generator: a Let inside a vectorized T.Parallel body ---------------------------------
LET_IN_VECTOR_NEST = _script("""
    for i, j in T.Parallel(4, 64):
        row = bx * 4 + i
        B[row, j] = A[row, j] * 2.0
""", 'A: T.Tensor((16, 64), "float16"), B: T.Tensor((16, 64), "float16")')


def test_vector_accesses_read_the_lets_of_the_body(tmp_path):
    """The vector load/store run before the body's Lets are bound: they (and their bounds
    conditions) use the Let's value, and the body still binds it per lane."""
    func = T.from_script(LET_IN_VECTOR_NEST)
    (inner,) = [s for s in walk_stmts(run_passes(func, "sm_90a").kernels[0].body)
                if isinstance(s, N.For) and s.vectors]
    assert {(v.buffer, v.chunk) for v in inner.vectors} == {("A", 8), ("B", 8)}
    src = _source(func)
    assert "A.iterator + cute.assume((bx * 4 + i) * 64 + j, divby=8)" in src
    assert "B.iterator + cute.assume((bx * 4 + i) * 64 + j, divby=8)" in src
    assert src.index("row = bx * 4 + i") < src.index("B.iterator")
    assert "row >= 0" not in src  # bx < 4, i < 4: the rows are proved in bounds
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_let_that_varies_with_the_lane_is_not_a_vector_row():
    """``B[r, j]`` with ``r = j % 2`` changes row within a vector: asking for vectors there
    is refused (the Let was opaque to the vectorizer, which took ``r`` for a fixed row)."""
    text = _script("""
        for j in T.Parallel(64, vector_width=8):
            r = j % 2
            B[r, j] = A[r, j]
    """, 'A: T.Tensor((2, 64), "float16"), B: T.Tensor((2, 64), "float16")')
    with pytest.raises(ValueError, match="vector_width=8.* is not legal here"):
        run_passes(T.from_script(text), "sm_90a")
