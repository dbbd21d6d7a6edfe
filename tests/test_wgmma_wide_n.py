"""A warpgroup's part of a T.gemm wider than one wgmma instruction (N > 256 columns, as a
64 x 512 attention output accumulated by one warpgroup) runs on wgmma, as TileLang's does:
several instructions of up to 256 columns along N.  It stayed on mma.sync before, which
left the row statistics that a wgmma accumulator of the same kernel shares with it (the
softmax's m_i, alpha) between two register layouts, and the kernel refused."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import wgmma_warps


def test_wide_warpgroup_arrangements():
    assert wgmma_warps(64, 512, 1, "FullRow") == (1, 1)  # two 256-column instructions
    assert wgmma_warps(128, 512, 2, "FullRow") == (1, 2)  # 256 each where a split gives it
    assert wgmma_warps(128, 768, 2, "FullRow") == (2, 1)  # 384 each: 2 x 192
    assert wgmma_warps(64, 512, 2, "Square") == (1, 2)  # 256 each still preferred
    assert wgmma_warps(64, 512, 4, "FullRow") == (1, 4)
    assert wgmma_warps(64, 516, 1, "FullRow") is None  # not a multiple of 8


def _decode(heads, dim, block, threads=128):
    """One block of heads of attention over a run of keys: S = Q K^T (heads x block), the
    online softmax, O += P V (heads x dim, dim > 256)."""
    @T.prim_func
    def attend(Q: T.Tensor((heads, dim), "float16"), K: T.Tensor((1024, dim), "float16"),
               V: T.Tensor((1024, dim), "float16"), O: T.Tensor((heads, dim), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            q = T.alloc_shared((heads, dim), "float16")
            k = T.alloc_shared((block, dim), "float16")
            v = T.alloc_shared((block, dim), "float16")
            p = T.alloc_shared((heads, block), "float16")
            s = T.alloc_fragment((heads, block), "float32")
            o = T.alloc_fragment((heads, dim), "float32")
            m = T.alloc_fragment((heads,), "float32")
            m_prev = T.alloc_fragment((heads,), "float32")
            scale = T.alloc_fragment((heads,), "float32")
            total = T.alloc_fragment((heads,), "float32")
            part = T.alloc_fragment((heads,), "float32")
            T.copy(Q, q)
            T.fill(o, 0)
            T.fill(total, 0)
            T.fill(m, -T.infinity("float32"))
            for t in T.Pipelined(1024 // block, num_stages=1):
                T.copy(K[t * block, 0], k)
                T.copy(V[t * block, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(heads):
                    scale[i] = T.exp(m_prev[i] - m[i])
                for i, j in T.Parallel(heads, block):
                    s[i, j] = T.exp(s[i, j] - m[i])
                T.reduce_sum(s, part, dim=1)
                for i in T.Parallel(heads):
                    total[i] = total[i] * scale[i] + part[i]
                for i, j in T.Parallel(heads, dim):
                    o[i, j] *= scale[i]
                T.copy(s, p)
                T.gemm(p, v, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(heads, dim):
                o[i, j] /= total[i]
            T.copy(o, O)

    return attend


def _families(func):
    stmts = [s for k in lower(func, "sm_90a").func.kernels for s in walk_stmts(k.body)]
    return ({s.c: s.family for s in stmts if isinstance(s, N.Gemm)},
            {s.buffer.name: tuple(s.layout.warps) for s in stmts
             if isinstance(s, N.Allocate) and s.buffer.name in ("s", "o")})


def test_wide_accumulator_runs_on_wgmma(tmp_path):
    func = _decode(64, 512, 32)
    families, warps = _families(func)
    assert families == {"s": "wgmma", "o": "wgmma"}
    assert warps == {"s": (1, 1), "o": (1, 1)}
    art = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert art.kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("heads,dim,block", [(64, 512, 32), (64, 384, 64)])
def test_wide_accumulator_matches_torch(heads, dim, block):
    import torch

    kernel = tilecute.compile(_decode(heads, dim, block), out_idx=[-1])
    q = torch.randn(heads, dim, dtype=torch.float16, device="cuda") / dim ** 0.5
    k = torch.randn(1024, dim, dtype=torch.float16, device="cuda")
    v = torch.randn(1024, dim, dtype=torch.float16, device="cuda")
    ref = torch.softmax(q.float() @ k.float().T, dim=-1) @ v.float()
    torch.testing.assert_close(kernel(q, k, v).float(), ref, atol=2e-2, rtol=2e-2)
