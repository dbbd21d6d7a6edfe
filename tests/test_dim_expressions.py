"""Tensor parameters whose dims are expressions of symbols, TileLang's
``A: T.Tensor((n * 4,), dtype)``: a symbol binds at launch from a dim that is the plain
symbol or, where none is, is solved from the first affine dim ``a * n + b`` it appears in;
every other expression dim is checked once its symbols are bound.  CPU: the IR, the ABI,
sm_90a cubins, the launcher's checks (they run before the CUDA-device check, so CPU tensors
reach them), output allocation; GPU: the kernels write what they should."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.language.parser import FrontendError
from tilecute.runtime.abi import (LaunchABI, SymbolSpec, affine_in, bind_dims, dim_text,
                                  eval_dim)
from tilecute.transform.launch_abi import LoweringError
from tilecute.transform.pipeline import lower


def _padded_rows():
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def padded_rows(Flags: T.Tensor((rows * 4,), T.int32),
                    Grid: T.Tensor((rows * 2 + 3, cols), T.float32),
                    Halo: T.Tensor((rows, cols + 1), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.serial(rows * 4):
                Flags[i] = i
            for i, j in T.Parallel(rows * 2 + 3, cols):
                Grid[i, j] = 2.0

    return padded_rows


def _solved_only():
    n = T.dynamic("n")

    @T.prim_func
    def solved_only(Out: T.Tensor((n * 3 + 1,), T.float16)):
        with T.Kernel(T.ceildiv(n * 3 + 1, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n * 3 + 1:
                    Out[bx * 128 + i] = T.float16(0)

    return solved_only


def test_dims_are_int32_expressions_of_the_symbols():
    f = _padded_rows()
    text = f.script()
    assert "Flags: T.Tensor((rows * 4,)" in text.replace("[", "(").replace("]", ")") or \
        "rows * 4" in text
    grid = f.params[1]
    assert grid.shape[0].op == "add" and grid.shape[1].name == "cols"


def test_abi_binds_plain_symbols_and_solves_affine_ones():
    abi = lower(_padded_rows(), "sm_90a").abi
    assert [a.shape for a in abi.args] == [(("mul", "rows", 4),),
                                          (("add", ("mul", "rows", 2), 3), "cols"),
                                          ("rows", ("add", "cols", 1))]
    # rows's plain dim is Halo's, which no kernel uses (the caller may pass None), so
    # Flags's rows * 4, the first dim naming it (as TileLang's binder solves it), solves
    # it; Grid's cols binds plainly
    assert [a.nullable for a in abi.args] == [False, False, True]
    assert {s.name: (s.arg, s.dim, s.scale, s.offset) for s in abi.symbols} == \
        {"rows": (0, 0, 4, 0), "cols": (1, 1, 1, 0)}
    solo = lower(_solved_only(), "sm_90a").abi
    assert solo.symbols == (SymbolSpec("n", 0, "shape", 0, 1, scale=3, offset=1),)
    assert LaunchABI.from_json(solo.to_json()) == solo  # the JSON round trip keeps both


def test_runtime_dim_helpers():
    d = ("add", ("mul", "n", 3), 1)
    assert affine_in(d, "n") == (3, 1) and affine_in(("mul", "n", "n"), "n") is None
    assert dim_text(("mul", ("add", "n", 1), 4)) == "(n + 1) * 4" and dim_text(d) == "n * 3 + 1"
    assert bind_dims([(d, 16)]) == {"n": 5} and bind_dims([(d, 17)]) == {}
    assert eval_dim(("floordiv", ("sub", "n", 1), 2), {"n": 9}) == 4


def test_a_symbol_no_dim_can_bind_is_refused_by_name():
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def product_only(A: T.Tensor((m * n,), T.float32)):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    with pytest.raises(LoweringError, match=r"symbols \['m', 'n'\].*A shape\[0\] = m \* n"):
        lower(product_only, "sm_90a")


def test_frontend_refuses_other_dim_expressions():
    n = T.dynamic("n")
    with pytest.raises(FrontendError, match=r"'A': a dimension expression may combine ints"):
        @T.prim_func
        def clamped(A: T.Tensor((T.max(n, 4),), T.float32)):
            with T.Kernel(1, threads=32):
                A[0] = 1.0


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    import os

    os.environ["TILECUTE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    kernel = tilecute.compile(_padded_rows(), target="cuda")
    kernel.ensure_cubin()  # sm_90a, built on the CPU
    return kernel


def test_launcher_checks_each_expression_dim(padded):
    flags = lambda n: torch.zeros(n, dtype=torch.int32)  # noqa: E731
    # rows = 4, cols = 5: every check passes and the call reaches the device check
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        padded(flags(16), torch.zeros(11, 5), torch.zeros(4, 6))
    # (rows is solved from Flags: Halo, unused, may be None)
    with pytest.raises(ValueError, match=r"'Flags': expected shape\[0\] == rows \* 4 for an integer "
                                         r"rows >= 0, got 17"):
        padded(flags(17), torch.zeros(11, 5), torch.zeros(4, 6))
    with pytest.raises(ValueError, match=r"'Halo': expected shape\[0\] == rows = 4 \(from argument "
                                         r"'Flags' shape\[0\]\), got 5"):
        padded(flags(16), torch.zeros(11, 5), torch.zeros(5, 6))
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        padded(flags(16), torch.zeros(11, 5), None)
    with pytest.raises(ValueError, match=r"'Grid': expected shape\[0\] == rows \* 2 \+ 3 = 11, got 12"):
        padded(flags(16), torch.zeros(12, 5), torch.zeros(4, 6))
    with pytest.raises(ValueError, match=r"'Halo': expected shape\[1\] == cols \+ 1 = 6, got 5"):
        padded(flags(16), torch.zeros(11, 5), torch.zeros(4, 5))


def test_output_shapes_are_evaluated_from_the_solved_symbols(padded):
    # the output Halo (rows, cols + 1): rows solved from Grid's rows * 2 + 3 = 11
    padded = tilecute.compile(_padded_rows(), out_idx=[2], target="cuda")
    (halo,) = padded.allocate_outputs([torch.zeros(16, dtype=torch.int32), torch.zeros(11, 5)])
    assert tuple(halo.shape) == (4, 6)
    with pytest.raises(ValueError, match=r"no integer rows >= 0 gives .*rows \* 2 \+ 3"):
        padded(torch.zeros(18, dtype=torch.int32), torch.zeros(12, 5))
    # solvable from Flags (rows = 4): the launcher then names Grid's disagreeing dim
    with pytest.raises(ValueError, match=r"'Grid': expected shape\[0\] == rows \* 2 \+ 3 = 11"):
        padded(torch.zeros(16, dtype=torch.int32), torch.zeros(12, 5))


def test_a_solved_symbol_refuses_extents_no_integer_gives(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_solved_only(), target="cuda")
    assert "tc_solve_symbol(t_Out->shape[0]" in kernel.get_source("launcher")
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        kernel(torch.zeros(16, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"'Out': expected shape\[0\] == n \* 3 \+ 1 for an "
                                         r"integer n >= 0, got 17"):
        kernel(torch.zeros(17, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"for an integer n >= 0, got 0"):
        kernel(torch.zeros(0, dtype=torch.float16))


@pytest.mark.gpu
def test_expression_dims_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_padded_rows(), out_idx=[2])
    flags = torch.full((12,), -1, dtype=torch.int32, device="cuda")
    grid = torch.zeros(9, 7, device="cuda")
    kernel(flags, grid)
    assert torch.equal(flags.cpu(), torch.arange(12, dtype=torch.int32))
    assert bool((grid == 2.0).all())
    out = torch.zeros(16, dtype=torch.float16, device="cuda") + 1
    tilecute.compile(_solved_only())(out)
    assert bool((out == 0).all())


def test_int64_constant_dims():
    """TileLang's ``T.Tensor((T.int64(4096), T.int64(64)), ...)``: int64 constant dims are
    the tensor's dims (they were refused as not an int); offsets widen by the index-width
    pass (a static shape past int32 indexes 64-bit); a dim past int32 is an int64 dim."""
    n, d = T.int64(4096), T.int64(64)

    @T.prim_func
    def gather64(table: T.Tensor((n, d), T.float16), ids: T.Tensor((T.int64(128),), T.int64),
                 out: T.Tensor((T.int64(128), d), T.float16)):
        with T.Kernel(T.ceildiv(T.int64(128), 16), threads=128) as bx:
            for i, j in T.Parallel(16, d):
                out[bx * 16 + i, j] = table[ids[bx * 16 + i], j]

    shapes = {p.name: p.shape for p in gather64.params}
    assert [c.value for c in shapes["table"]] == [4096, 64]
    assert all(c.dtype == "int32" for c in shapes["table"] + shapes["out"])
    assert lower(gather64, "sm_90a").func.wide_tensors == ()

    @T.prim_func  # a dim past int32 is an int64 dim (tests/test_int64_dims.py)
    def huge(big: T.Tensor((T.int64(3000000000),), T.float32)):
        with T.Kernel(1, threads=128):
            big[0] = 1.0

    (dim,) = huge.params[0].shape
    assert (dim.value, dim.dtype) == (3000000000, "int64")
