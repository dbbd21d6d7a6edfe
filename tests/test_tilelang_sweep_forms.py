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
