"""TileLang's reductions over any dim and of any tile scope: ``T.reduce_sum(x, out, dim=0)``
of fragments, ``T.reduce_max(A_shared, m, dim=1)`` of shared buffers, shared and keepdim
``(X, 1, Y)`` destinations, ``clear=False`` (the result combined into the destination),
and local buffers reduced thread by thread.  The tile-op lowering brings each to a
fragment reduced over its last dim (tests/test_grouped_reductions.py has those)."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.validate import ValidationError
from tilecute.transform.lower_tile_ops import lower_tile_ops
from tilecute.transform.pipeline import run_passes

KINDS = ("sum", "max", "min", "abssum", "absmax")


def _reduce(shape, dim, kind, clear=True, src="fragment", dst="fragment", keepdim=False,
            dtype="float32", out_dtype="float32", threads=128):
    """X -> x (scope ``src``), y <- Y (scope ``dst``), T.reduce(x, y, kind, dim, clear), y -> Y."""
    out = list(shape)
    if keepdim:
        out[dim] = 1
    else:
        del out[dim]
    out = tuple(out) or (1,)

    @T.prim_func
    def reduce_dim(X: T.Tensor(shape, dtype), Y: T.Tensor(out, out_dtype)):
        with T.Kernel(1, threads=threads) as bx:
            if src == "shared":
                x = T.alloc_shared(shape, dtype)
            else:
                x = T.alloc_fragment(shape, dtype)
            if dst == "shared":
                y = T.alloc_shared(out, out_dtype)
            else:
                y = T.alloc_fragment(out, out_dtype)
            T.copy(X, x)
            T.copy(Y, y)
            T.reduce(x, y, kind, dim, clear)
            T.copy(y, Y)
    return reduce_dim


CASES = [  # shape, dim, kind, clear, src, dst, keepdim
    ((64, 64), 0, "sum", True, "fragment", "fragment", False),
    ((64, 32), 0, "max", False, "fragment", "fragment", False),
    ((32, 64), 0, "absmax", False, "fragment", "shared", False),
    ((16, 64), 0, "min", True, "fragment", "fragment", True),
    ((64, 64), 1, "max", True, "shared", "fragment", False),
    ((64, 64), 1, "abssum", True, "shared", "shared", False),
    ((64, 16), 0, "sum", False, "shared", "shared", True),
    ((4, 16, 32), 1, "sum", True, "fragment", "fragment", False),
    ((4, 16, 32), 0, "absmax", True, "shared", "fragment", False),
    ((32, 64), 1, "sum", False, "fragment", "shared", True),
]


MOVE_COLUMNS = {"disable_in_place_column_reduce": True}


def test_dim0_of_a_fragment_moves_the_dim_last_through_shared():
    # the tile-op lowering leaves the columns of a 2-D fragment in place; the layout pass
    # moves them last when the fragment has no T.gemm register layout and is not reduced
    # in place (option off here; tests/test_column_reduce_in_place.py has the default)
    assert "T.reduce_sum(x, y, dim=0, clear=True)" in lower_tile_ops(_reduce((64, 32), 0, "sum")).script()
    text = run_passes(_reduce((64, 32), 0, "sum"), options=MOVE_COLUMNS, until="infer_layouts").script()
    assert re.search(r'x_moved\d+ = T.alloc_shared\(\(32, 64\), "float32"', text)
    # the transposing copy walks x as it is laid out
    assert re.search(r"x_moved\d+\[(i\d+), (i\d+)\] = x\[\2, \1\]", text)
    assert re.search(r"T.reduce_sum\(x_frag\d+, y, dim=1, clear=True", text)


def test_shared_destination_and_clear_false_combine_after_the_reduction():
    text = lower_tile_ops(_reduce((64, 64), 1, "max", False, "shared", "shared")).script()
    assert re.search(r"T.reduce_max\(x_frag\d+, (y_frag\d+), dim=1, clear=True\)", text)
    assert re.search(r"y\[(i\d+)\] = T.max\(y\[\1\], y_frag\d+\[\1\]\)", text)


def _top(func):
    body = func.kernels[0].body
    return body, {s.buffer.name: s for s in body if isinstance(s, N.Allocate)}


@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[6], CASES[8]],
                         ids=lambda c: f"{c[0]}-dim{c[1]}-{c[4]}")
def test_scratch_on_the_bytes_of_the_tile_read_before_waits_for_its_readers(case):
    # the reduction's scratch takes the bytes of the shared tile the fragment was just
    # read from (its life ended there); the helper writes the scratch before its first
    # barrier, so threads still reading the tile need a barrier first (a column reduction
    # moved through a shared tile: option disable_in_place_column_reduce)
    body, allocs = _top(run_passes(_reduce(*case), options=MOVE_COLUMNS))
    at = next(i for i, s in enumerate(body) if isinstance(s, N.Reduce))
    scratch = allocs[body[at].scratch].slot
    read = [b for b in allocs if re.fullmatch(r"x|x_moved\d+", b)
            and allocs[b].buffer.scope == "shared"]
    assert allocs[read[0]].slot.offset == scratch.offset  # shares bytes with the scratch
    assert isinstance(body[at - 1], N.Barrier)


def test_a_scratch_of_its_own_needs_no_barrier():
    body, allocs = _top(run_passes(_reduce((64, 64), 1, "sum")))  # no other shared tile
    at = next(i for i, s in enumerate(body) if isinstance(s, N.Reduce))
    assert body[at].scratch and not any(isinstance(s, N.Barrier) for s in body[:at])


@pytest.mark.parametrize("case", [CASES[6], CASES[8]], ids=lambda c: f"{c[0]}-dim{c[1]}")
def test_a_shared_source_reduced_over_another_dim_is_not_loaded_by_tma(case):
    # the lowering reads it down columns (x_frag[j, i] = x[i, j]), which the layout pass
    # swizzles; TMA writes rows as they are, so the copy keeps the vector path
    func = run_passes(_reduce(*case))
    body, allocs = _top(func)
    assert allocs["x"].layout.kind == "swizzled"
    loads = [s for s in body if isinstance(s, N.TmaCopy)]
    assert all(s.dst.buffer != "x" for s in loads)
    text = func.script()
    assert re.search(r"x\[i\d+, i\d+\] = X\[i\d+, i\d+\]" if len(case[0]) == 2 else
                     r"x\[i\d+, i\d+, i\d+\] = X\[", text)


def test_keepdim_shared_destination_walks_the_global_rows():
    # Y (32, 1) to the shared y (32, 1) and back: Y[i, 0], every row (Y[0, i] copied one)
    text = run_passes(_reduce((32, 64), 1, "sum", False, "fragment", "shared", True),
                      until="lower_tile_ops").script()
    assert re.search(r"y\[(i\d+), 0\] = Y\[\1, 0\]", text)
    assert re.search(r"Y\[(i\d+), 0\] = y\[\1, 0\]", text)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-dim{c[1]}-{c[2]}-{c[4]}-{c[5]}")
def test_reductions_compile(case, tmp_path):
    shape, dim, kind, clear, src, dst, keepdim = case
    func = _reduce(shape, dim, kind, clear, src, dst, keepdim)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_half_source_float_destination_compiles(tmp_path):
    func = _reduce((64, 64), 0, "sum", dtype="float16")
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def _local_reduce(kind, clear):
    @T.prim_func
    def local_reduce(X: T.Tensor((128, 4, 8), "int32"), Y: T.Tensor((128, 8), "int32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_local((4, 8), "int32")
            y = T.alloc_local((1, 8), "int32")
            tx = T.get_thread_binding()
            for i, j in T.grid(4, 8):
                x[i, j] = X[tx, i, j]
            for j in T.serial(8):
                y[0, j] = Y[tx, j]
            T.reduce(x, y, kind, 0, clear)
            for j in T.serial(8):
                Y[tx, j] = y[0, j]
    return local_reduce


def test_local_reduction_runs_in_each_thread(tmp_path):
    func = _local_reduce("bitand", False)
    text = run_passes(func).script()
    assert "y[r1, r2] = y[r1, r2] & x[rv3, r2]" in text
    assert "T.sync_threads" not in text
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    cleared = run_passes(_local_reduce("max", True)).script()
    assert "y[r1, r2] = -2147483648" in cleared  # TileLang's identity of an int32 max


def test_local_into_fragment_is_refused_as_in_tilelang():
    with pytest.raises(ValidationError, match="invalid buffer scopes"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                x = T.alloc_local((8,), "float32")
                y = T.alloc_fragment((1,), "float32")
                T.reduce_sum(x, y)


def test_wrong_destination_shape_names_both_shapes():
    with pytest.raises(ValidationError, match=r"gives shape \(4,\) \(or \(1, 4\)\)"):
        @T.prim_func
        def bad(X: T.Tensor((8, 4), "float32")):
            with T.Kernel(1, threads=32) as bx:
                x = T.alloc_fragment((8, 4), "float32")
                y = T.alloc_fragment((8,), "float32")
                T.copy(X, x)
                T.reduce_sum(x, y, dim=0)


def _reference(torch, x, y, dim, kind, clear, keepdim):
    xf = x.float()
    r = {"sum": lambda: xf.sum(dim), "max": lambda: xf.amax(dim), "min": lambda: xf.amin(dim),
         "abssum": lambda: xf.abs().sum(dim), "absmax": lambda: xf.abs().amax(dim)}[kind]()
    if keepdim:
        r = r.unsqueeze(dim)
    r = r.reshape(y.shape)
    if not clear:
        r = {"sum": y + r, "abssum": y + r, "max": torch.maximum(y, r),
             "absmax": torch.maximum(y, r), "min": torch.minimum(y, r)}[kind]
    return r


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-dim{c[1]}-{c[2]}-{c[4]}-{c[5]}")
def test_reductions_match_torch(case):
    import torch

    shape, dim, kind, clear, src, dst, keepdim = case
    kernel = tilecute.compile(_reduce(shape, dim, kind, clear, src, dst, keepdim))
    x = torch.randn(shape, device="cuda")
    out = list(shape)
    if keepdim:
        out[dim] = 1
    else:
        del out[dim]
    y = torch.randn(out or [1], device="cuda")
    ref = _reference(torch, x, y.clone(), dim, kind, clear, keepdim)
    kernel(x, y)
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("kind,clear", [("bitand", False), ("max", True), ("sum", False),
                                        ("bitxor", True)])
def test_local_reductions_match_torch(kind, clear):
    import torch

    kernel = tilecute.compile(_local_reduce(kind, clear))
    x = torch.randint(-1000, 1000, (128, 4, 8), device="cuda", dtype=torch.int32)
    y = torch.randint(-1000, 1000, (128, 8), device="cuda", dtype=torch.int32)
    ref = y.clone() if not clear else {"bitand": torch.full_like(y, -1), "max": torch.full_like(
        y, -2**31), "sum": torch.zeros_like(y), "bitxor": torch.zeros_like(y)}[kind]
    for i in range(4):
        v = x[:, i]
        ref = {"bitand": ref & v, "max": torch.maximum(ref, v), "sum": ref + v,
               "bitxor": ref ^ v}[kind]
    kernel(x, y)
    torch.testing.assert_close(y, ref)
