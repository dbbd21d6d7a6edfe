"""TileLang forms met in its issue tests: T.view / T.reshape written inside a tile op's
argument, several T.alloc_var in one tuple assignment, a prim_func with no T.Kernel (parses,
compiling it is refused) and a static zero-size dimension (refused by name)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.validate import ValidationError
from tilecute.language.parser import FrontendError


def _walk(stmts):
    for s in stmts:
        yield s
        for field in ("body", "then", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, tuple):
                yield from _walk(inner)


def row_scan(n=128):
    @T.prim_func
    def scan(x: T.Tensor((4, n), T.float32), y: T.Tensor((4, n), T.float32)):
        with T.Kernel(4, threads=128) as row:
            line = T.alloc_shared((n,), T.float32)
            T.copy(x[row, :], line)
            T.cumsum(T.view(line, (1, n)), dim=1)  # the view is an argument, unnamed
            T.copy(line, y[row, :])

    return scan


def window_fill():
    @T.prim_func
    def fill(x: T.Tensor((64,), T.int32), lo_in: T.int32, hi_in: T.int32):
        with T.Kernel(1, threads=32):
            lo, hi = T.alloc_var(T.int32), T.alloc_var(T.int32, 0)
            lo = lo_in
            hi = hi_in
            T.fill(x[lo:hi], 7)

    return fill


def test_view_in_an_argument_is_an_unnamed_view_before_the_statement():
    f = row_scan()
    allocs = [s for s in _walk(f.kernels[0].body) if isinstance(s, N.Allocate)]
    views = [s for s in allocs if s.view_of]
    assert len(views) == 1 and views[0].view_of == "line"
    view = views[0].buffer
    assert [d.value for d in view.shape] == [1, 128] and view.scope == "shared"
    body = list(f.kernels[0].body)
    scan = next(i for i, s in enumerate(body) if isinstance(s, N.Scan))
    assert body.index(views[0]) < scan  # allocated before the scan reads it
    assert view.name == "view_of_line" and view.name in repr(body[scan])
    # the printed program names the view; it binds no name of the program's
    assert T.from_script(f.script()).script() == f.script()


def test_view_in_an_argument_does_not_take_a_program_name():
    @T.prim_func
    def scan(x: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            line = T.alloc_shared((128,), T.float32)
            T.copy(x, line)
            T.cumsum(T.view(line, (1, 128)), dim=1)
            view_of_line = T.alloc_shared((4,), T.float32)  # noqa: F841 (its own buffer)
            T.copy(line[0:4], view_of_line)
            T.copy(view_of_line, x[0:4])

    names = [s.buffer.name for s in _walk(scan.kernels[0].body) if isinstance(s, N.Allocate)]
    assert len(names) == len(set(names)) == 3


def test_view_in_an_argument_keeps_the_views_checks():
    with pytest.raises(FrontendError, match=r"holds"):
        @T.prim_func
        def bad(x: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                line = T.alloc_shared((128,), T.float32)
                T.copy(x, line)
                T.cumsum(T.view(line, (2, 128)), dim=1)


def test_tuple_of_alloc_vars():
    f = window_fill()
    locals_ = [s.buffer for s in _walk(f.kernels[0].body)
               if isinstance(s, N.Allocate) and s.buffer.scope == "local"]
    assert [b.dtype for b in locals_] == ["int32", "int32"]
    assert [tuple(d.value for d in b.shape) for b in locals_] == [(1,), (1,)]


def test_tuple_with_alloc_var_reads_the_other_values_first():
    @T.prim_func
    def f(x: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=32):
            n = T.alloc_var(T.int32, 3)
            n, m = T.alloc_var(T.int32, 5), n + 1  # m is the old n + 1
            x[0] = n + m

    text = f.script()
    assert "n_1[0] = 5" in text and "m = n[0] + 1" in text and "x[0] = n_1[0] + m" in text


def test_cubins(tmp_path):
    for i, f in enumerate((row_scan(), window_fill())):
        info = tilecute.build_cubin(f, "sm_90a", out_dir=tmp_path / str(i))
        assert info.kernels


def test_prim_func_without_a_kernel_parses_and_is_refused_when_compiled():
    @T.prim_func
    def nothing(x: T.Buffer((32,), T.int32)):
        pass

    assert nothing.kernels == () and [p.name for p in nothing.params] == ["x"]
    assert nothing.script().rstrip().endswith("pass")
    assert T.from_script(nothing.script()).script() == nothing.script()
    with pytest.raises(ValidationError, match=r"no `with T\.Kernel\(\.\.\.\)` block.*"
                                              r"TileLang compiles it to a host function"):
        tilecute.compile(nothing)


def test_static_zero_dimension_is_refused_with_its_reason():
    with pytest.raises(FrontendError, match=r"'A': dimension 0 must be positive \(a static 0 is "
                                            r"refused: CuTe DSL"):
        @T.prim_func
        def empty(A: T.Tensor((16, 0), T.float16)):
            with T.Kernel(1, threads=32):
                T.clear(A)


@pytest.mark.gpu
def test_gpu_view_argument_scan_and_var_window():
    import torch
    x = torch.randn(4, 128, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(row_scan())(x, y)
    torch.testing.assert_close(y, torch.cumsum(x, dim=1), rtol=1e-4, atol=1e-4)
    kernel = tilecute.compile(window_fill())
    buf = torch.zeros(64, dtype=torch.int32, device="cuda")
    kernel(buf, 5, 19)
    expect = torch.zeros(64, dtype=torch.int32)
    expect[5:19] = 7
    assert torch.equal(buf.cpu(), expect)
    kernel(buf, 30, 30)  # an empty window writes nothing
    assert torch.equal(buf.cpu(), expect)


def test_l2_hit_ratio_is_honored():  # (the window itself: test_l2_hit_ratio.py)
    @T.prim_func
    def hinted(A: T.Tensor((1,), T.float16)):  # TileLang's issue 1810: a float16 tensor
        with T.Kernel(1, threads=32):
            T.annotate_l2_hit_ratio({A: 0.9})
            T.evaluate(0)

    assert hinted.kernels[0].l2_hit_ratios == (("A", 0.9),)
