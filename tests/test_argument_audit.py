"""The argument audit of TileLang's ``T.*`` forms (notes: docs/ir.md, "TileLang's forms"):
each test is a form or argument that tilecute read with another meaning than TileLang's,
now honored with TileLang's meaning (the IR shows it; on a GPU, the numbers against
torch) or refused by name."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError


def _stmts(func, kind):
    out = []

    def walk(body):
        for s in body:
            if isinstance(s, kind):
                out.append(s)
            for field in ("body", "then", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, tuple):
                    walk(inner)
    for k in func.kernels:
        walk(k.body)
    return out


def _one(n):
    return tuple(N.Const(1, "int32") for _ in range(n))


# ---- T.fill / T.clear of `buf[i, j]`: the one element (TileLang's BufferLoad region) ---------
# (was: an element at the origin of a shared / fragment buffer read as the whole buffer, one
# elsewhere refused for want of extents)
def _element_fills():
    @T.prim_func
    def element_fills(A: T.Tensor((64,), T.float32), B: T.Tensor((8, 8), T.float32)):
        with T.Kernel(1, threads=64) as _:
            s = T.alloc_shared((64,), T.float32)
            fr = T.alloc_fragment((8, 8), T.float32)
            T.copy(A, s)
            T.fill(s[0], 7.0)       # one element, not all of s
            T.fill(s[3], 5.0)
            T.clear(s[5])
            T.copy(B, fr)
            T.clear(fr[0, 0])       # one element, not all of fr
            T.fill(fr[1, 1], 2.0)
            T.copy(fr, B)
            T.copy(s, A)
    return element_fills


def test_fill_and_clear_of_an_element_are_that_element():
    fills = _stmts(_element_fills(), N.Fill)
    assert [(f.dst.buffer, f.dst.starts, f.dst.extents) for f in fills] == [
        ("s", (N.Const(0, "int32"),), _one(1)),
        ("s", (N.Const(3, "int32"),), _one(1)),
        ("s", (N.Const(5, "int32"),), _one(1)),
        ("fr", (N.Const(0, "int32"),) * 2, _one(2)),
        ("fr", (N.Const(1, "int32"),) * 2, _one(2))]
    assert not _stmts(_element_fills(), N.Clear)


def test_element_fills_build(tmp_path):
    assert tilecute.build_cubin(_element_fills(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_element_fills_on_gpu():
    import torch

    a = torch.arange(64, dtype=torch.float32, device="cuda")
    b = torch.arange(64, dtype=torch.float32, device="cuda").reshape(8, 8)
    want_a, want_b = a.clone(), b.clone()
    want_a[0], want_a[3], want_a[5] = 7.0, 5.0, 0.0
    want_b[0, 0], want_b[1, 1] = 0.0, 2.0
    tilecute.compile(_element_fills())(a, b)
    torch.testing.assert_close(a, want_a)
    torch.testing.assert_close(b, want_b)


# ---- T.cumsum / T.cummax of one element: TileLang's ValueError, not a scan of the buffer -----
def test_scan_of_an_element_is_refused():
    with pytest.raises(FrontendError, match=r"T.cumsum.*`s\[0\]` is one element"):
        @T.prim_func
        def scan_element(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as _:
                s = T.alloc_shared((64,), T.float32)
                T.copy(A, s)
                T.cumsum(s[0])
                T.copy(s, A)


# ---- a tile op's `S[0, 0]` of a shared / fragment buffer: the origin of the other side's tile --
# (was: read as the whole buffer, so a bigger S was an error "the shapes ... differ")
def _origin_copies():
    @T.prim_func
    def origin_copies(A: T.Tensor((64, 32), T.float32), B: T.Tensor((64, 32), T.float32),
                      C: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float32)
            P = T.alloc_shared((128, 64), T.float32)
            fr = T.alloc_fragment((64, 32), T.float32)
            T.fill(S, 0.0)
            T.fill(P, 1.0)
            T.copy(A, fr)
            T.copy(fr, S[0, 0])        # S[0:64, 0:32]
            T.copy(S[0, 0], B)         # the same tile out
            T.atomic_add(P[0, 0], fr)  # P[0:64, 0:32] += fr
            T.copy(P[0:64, 0:32], C)
    return origin_copies


def test_tile_origin_of_a_bigger_shared_buffer():
    f = _origin_copies()
    copies = _stmts(f, N.Copy)
    tile = (N.Const(64, "int32"), N.Const(32, "int32"))
    assert [c.dst.extents for c in copies[1:2]] == [tile]
    assert [c.src.extents for c in copies[2:3]] == [tile]
    (atomic,) = _stmts(f, N.AtomicAdd)
    assert atomic.dst.extents == tile
    assert "T.copy(fr, S[0:64, 0:32])" in f.script()


def test_tile_origin_copies_build(tmp_path):
    assert tilecute.build_cubin(_origin_copies(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_tile_origin_copies_on_gpu():
    import torch

    a = torch.randn(64, 32, device="cuda")
    b = torch.zeros(64, 32, device="cuda")
    c = torch.zeros(64, 32, device="cuda")
    tilecute.compile(_origin_copies())(a, b, c)
    torch.testing.assert_close(b, a)
    torch.testing.assert_close(c, a + 1.0)


# ---- return_prev=True on a tile atomic: TileLang's NotImplementedError, by name ------------
# (was: accepted, the flag dropped)
@pytest.mark.parametrize("stmt", ["T.atomic_add(C[0:64], x, return_prev=True)",
                                  "T.atomic_max(C, x, return_prev=True)",
                                  "T.atomic_min(C[0:4], 1.0, return_prev=True)"])
def test_return_prev_on_a_tile_atomic_is_refused(stmt):
    text = ('import tilecute.language as T\n\n'
            '@T.prim_func\n'
            'def tile_prev(C: T.Tensor((64,), T.float32)):\n'
            '    with T.Kernel(1, threads=64) as _:\n'
            '        x = T.alloc_fragment((64,), T.float32)\n'
            '        T.fill(x, 1.0)\n'
            f'        {stmt}\n')
    with pytest.raises(FrontendError, match=r"return_prev=True is not supported for "
                                            r"tile-region-based atomic operations"):
        T.from_script(text)
    # one element keeps it (a statement: the old value unused)
    one = text.replace(stmt, stmt.split("(")[0] + "(C[3], 2.0, return_prev=True)")
    (atomic,) = _stmts(T.from_script(one), N.AtomicAdd)
    assert atomic.dst.extents is None


# ---- TileLang's exported names tilecute lacked: refused by name, not "has no attribute" ------
@pytest.mark.parametrize("name", ["has_let_value", "get_let_value", "KernelLaunchFrame",
                                  "BaseTileScheduler"])
def test_remaining_tilelang_exports_are_refused_by_name(name):
    with pytest.raises(NotImplementedError, match=rf"T.{name} is a TileLang form that tilecute "
                                                  r"does not support \(.+\)"):
        getattr(T, name)()


# ---- T.tma_copy's `S[0, 0]`: the origin of the global region's tile, as T.copy's -------------
# (was: the whole of S, refused by the TMA pass when S is bigger than the box)
def _tma_origin():
    @T.prim_func
    def tma_origin(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float32)
            bar = T.alloc_barrier(128)
            T.fill(S, 0.0)
            T.tma_copy(A[0:64, 0:64], S[0, 0], barrier=bar[0])
            T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            T.copy(S[0:64, 0:64], B)
    return tma_origin


def test_tma_copy_origin_of_a_bigger_shared_buffer(tmp_path):
    f = _tma_origin()
    (tma,) = _stmts(f, N.TmaCopy)
    assert tma.dst.extents == (N.Const(64, "int32"), N.Const(64, "int32"))
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_tma_copy_origin_on_gpu():
    import torch

    a = torch.randn(64, 64, device="cuda")
    b = torch.zeros(64, 64, device="cuda")
    tilecute.compile(_tma_origin())(a, b)
    torch.testing.assert_close(b, a)


# ---- a row of a global tensor into `S[r, 0]`: the row at r (r = 0 too, where S[0, 0] was S) ---
def _row_origins():
    @T.prim_func
    def row_origins(G: T.Tensor((128, 64), T.float32), H: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=32) as _:
            S = T.alloc_shared((64, 32), T.float32)
            T.fill(S, 0.0)
            T.copy(G[8, 4:36], S[3, 0])
            T.copy(G[9, 4:36], S[0, 0])
            T.copy(S, H)
    return row_origins


def test_row_into_an_element_origin(tmp_path):
    f = _row_origins()
    assert "T.copy(G[9:10, 4:36], S[0:1, 0:32])" in f.script()
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_row_into_an_element_origin_on_gpu():
    import torch

    g = torch.randn(128, 64, device="cuda")
    h = torch.full((64, 32), 5.0, device="cuda")
    tilecute.compile(_row_origins())(g, h)
    want = torch.zeros(64, 32, device="cuda")
    want[3], want[0] = g[8, 4:36], g[9, 4:36]
    torch.testing.assert_close(h, want)
