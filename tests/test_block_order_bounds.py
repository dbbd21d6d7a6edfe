"""A block index remapped by a block order (``T.use_swizzle``, or the rasterize pass's
default panel order of a GEMM grid) is below its grid extent, as the launch index is: the
order permutes the grid.  Its Let says so (``within``) and the bounds prover reads it, so a
global access that TileLang proves in bounds from ``blockIdx``'s range (its rasterization
happens in the generated code, after the proof) gets no guard in tilecute either.  Without
it, a fragment loop reading ``scales[by * 64 + i, k]`` (DeepGEMM's 2xAcc scale) was a
guarded load per register (64 per thread per step) that the compiler could not merge into
the two rows a thread holds; unguarded, it loads each row once."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.transform.pipeline import lower


def _kernel(func) -> str:
    src = emit_cute(lower(func, "sm_90a"))
    return src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]


def scaled_gemm(M=2048, N=512, K=1024, swizzle=True, row_shift=0):
    """C = (A @ B^T) * S[row + row_shift, 0] through a fragment loop after the GEMM (the
    scale read from global memory per element, as DeepGEMM's promotion reads its scales)."""
    ks = K // 128

    @T.prim_func
    def scaled(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
               S: T.Tensor((M, ks), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 64), threads=128) as (bx, by):
            As = T.alloc_shared((64, 64), T.float16)
            Bs = T.alloc_shared((128, 64), T.float16)
            acc = T.alloc_fragment((64, 128), T.float32)
            out = T.alloc_fragment((64, 128), T.float32)
            if swizzle:
                T.use_swizzle(panel_size=4)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 64, k * 64], As)
                T.copy(B[bx * 128, k * 64], Bs)
                T.gemm(As, Bs, acc, transpose_B=True)
            for i, j in T.Parallel(64, 128):
                out[i, j] = acc[i, j] * S[by * 64 + i + row_shift, 0]
            T.copy(out, C[by * 64, bx * 128])

    return scaled


def test_remapped_block_indices_carry_their_grid_extent():
    text = print_func(lower(scaled_gemm(), "sm_90a").func)
    assert re.search(r"bx\w* = .*  # below 4\n", text), text
    assert re.search(r"by\w* = .*  # below 32\n", text), text


@pytest.mark.parametrize("swizzle", [True, False])  # T.use_swizzle / the rasterize pass
def test_scale_read_through_a_remapped_block_index_is_unguarded(swizzle):
    src = _kernel(scaled_gemm(swizzle=swizzle))
    assert "S[" in src
    assert not re.search(r"if [^\n]*< 2048:\n\s+tc_ld\d+ = S\[", src), src
    # the output tile is in bounds too: one plain vector store per register pair
    assert "C[" not in src.replace("C.iterator", ""), src


def test_an_index_past_the_grid_is_still_guarded():
    # by * 64 + i + 1 reaches row 2048 in the last tile: the guard stays (TileLang's too)
    src = _kernel(scaled_gemm(row_shift=1))
    assert re.search(r"if [^\n]*< 2048:\n\s+tc_ld\d+ = S\[", src), src


def test_a_symbolic_grid_keeps_the_partial_tiles_guard():
    # M symbolic: by < ceildiv(M, 64) does not put by * 64 + i below M (a partial last tile)
    M = T.symbolic("M")
    src = _kernel(scaled_gemm(M=M))
    assert re.search(r"if [^\n]*< M:\n\s+tc_ld\d+ = S\[", src), src


def test_the_bound_survives_json():
    func = lower(scaled_gemm(), "sm_90a").func
    back = from_json(to_json(func))
    assert back == func
    lets = [s for k in back.kernels for s in k.body if isinstance(s, N.Let) and s.within is not None]
    assert len(lets) == 2


def test_scaled_gemm_builds(tmp_path):
    assert tilecute.build_cubin(scaled_gemm(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [True, False])
def test_scaled_gemm_on_gpu(swizzle):
    import torch

    M, N, K = 2048, 512, 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    s = torch.rand(M, K // 128, device="cuda", dtype=torch.float32)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    tilecute.compile(scaled_gemm(M, N, K, swizzle=swizzle))(a, b, s, c)
    want = (a.float() @ b.float().T) * s[:, :1]
    torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)
