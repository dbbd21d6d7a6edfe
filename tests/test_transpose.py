"""``T.transpose(src, dst)``, TileLang's tl.transpose: ``dst[..., j, i] = src[..., i, j]``
over ``src``'s region, the last two axes swapped, ``src``'s unit dims indexing ``dst`` at its
region's start, the value cast to ``dst``'s dtype.  The frontend writes it as a T.Parallel
nest.  CPU: the IR, sm_90a cubins, refusals by name; GPU: the kernels against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language.parser import FrontendError


def shared_tile(M=64, N=32, src_dtype=T.float32, dst_dtype=T.float16):
    """A (M, N) tile through shared memory, transposed into a (N, M) tile of another dtype."""

    @T.prim_func
    def shared_tile_k(A: T.Tensor((M, N), src_dtype), B: T.Tensor((N, M), dst_dtype)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), src_dtype)
            t = T.alloc_shared((N, M), dst_dtype)
            T.copy(A, s)
            T.transpose(s, t)
            T.copy(t, B)

    return shared_tile_k


def batched_regions(B=4, M=32, N=16):
    """Each block transposes one (M, N) matrix of a (B, M, N) tensor: a 3-D region with a
    unit leading dim on both sides (the destination's at its own start, block b of a
    (2 * B, N, M) shared buffer... read back from the global tensor's batch b)."""

    @T.prim_func
    def batched_k(A: T.Tensor((B, M, N), T.float32), Out: T.Tensor((B, N, M), T.float32)):
        with T.Kernel(B, threads=128) as b:
            s = T.alloc_shared((2, N, M), T.float32)
            T.transpose(A[b, 0:M, 0:N], s[1, 0:N, 0:M])
            T.copy(s[1, :, :], Out[b, :, :])

    return batched_k


def fragment_to_shared(M=64, N=64):
    """A fragment computed in registers, transposed into shared memory."""

    @T.prim_func
    def frag_k(A: T.Tensor((M, N), T.float16), Out: T.Tensor((N, M), T.float16)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), T.float32)
            t = T.alloc_shared((N, M), T.float16)
            T.copy(A, f)
            for i, j in T.Parallel(M, N):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.transpose(f, t)
            T.copy(t, Out)

    return frag_k


def _stores(stmt, out):
    if isinstance(stmt, N.Store):
        out.append(stmt)
    for child in N.children(stmt) if hasattr(N, "children") else ():
        _stores(child, out)
    return out


def test_the_frontend_writes_a_parallel_nest_with_the_axes_swapped():
    text = shared_tile().script()
    assert "T.transpose" not in text
    assert "T.Parallel" in text
    # t[j, i] = T.Cast("float16", s[i, j]) in the printed nest
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("t["))
    lhs, rhs = line.split("=", 1)
    li = lhs.strip()[2:-1].split(", ")
    assert "float16" in rhs and f"s[{li[1]}, {li[0]}]" in rhs.replace(" ", "").replace(",", ", ")


def test_unit_dims_index_the_destination_at_its_start():
    text = batched_regions().script()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("s["))
    assert line.strip().startswith("s[1, ") and "A[b, " in line


@pytest.mark.parametrize("make", [shared_tile, batched_regions, fragment_to_shared],
                         ids=["shared to shared, cast", "3-d regions", "fragment to shared"])
def test_transposes_compile_to_sm_90a_cubins(make, tmp_path):
    info = tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def _refused(body, match):
    src = f'''
@T.prim_func
def bad(A: T.Tensor((64, 32), T.float32), V: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((64, 32), T.float32)
        t = T.alloc_shared((32, 64), T.float32)
        u = T.alloc_shared((2, 32, 64), T.float32)
        {body}
'''
    with pytest.raises(FrontendError, match=match) as err:
        T.from_script(src, filename="bad_transpose.py")
    assert "bad_transpose.py:8" in str(err.value)


@pytest.mark.parametrize("body, match", [
    ("T.transpose(s[0, 0], t)", r"src must be a buffer or a region of one \(`s\[0:64, 0:32\]`\), not the single element `s\[0, 0\]`"),
    ("T.transpose(V, t)", r"src 'V' has 1 dim: the transpose swaps the last two axes"),
    ("T.transpose(s, u)", r"'u' has 3 dims and 's' 2"),
    ("T.transpose(s, s)", r"transposed is \(32, 64\), but the destination region is \(64, 32\)"),
    ("T.transpose(s, t, annotations={'x': 1})", r"annotations"),
])
def test_forms_tilelang_would_misread_are_refused_by_name(body, match):
    _refused(body, match)


# -- on a GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_transposes_on_gpu():
    import torch

    a = torch.randn(64, 32, device="cuda")
    out = tilecute.compile(shared_tile(), out_idx=[-1])(a)
    torch.testing.assert_close(out, a.t().half())

    a3 = torch.randn(4, 32, 16, device="cuda")
    out3 = tilecute.compile(batched_regions(), out_idx=[-1])(a3)
    torch.testing.assert_close(out3, a3.transpose(1, 2))

    h = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    outf = tilecute.compile(fragment_to_shared(), out_idx=[-1])(h)
    torch.testing.assert_close(outf, (h.float() * 2 + 1).t().half(), atol=1e-2, rtol=1e-3)
