"""T.gemms whose register layouts meet (row statistics shared between accumulators, an
accumulator copied into another T.gemm's A fragment) where one of them cannot run on
wgmma: the group runs on mma.sync together, in one warp partition
(``select_mma._Kernel.shared_partitions``).

Flash attention with 64 query rows on 256 threads (two warpgroups side by side along N) at
head dim 80: P @ V would give each warpgroup 40 columns of V, stored (keys, 80), 80 bytes,
which no swizzle chunk tiles, so it runs on mma.sync (4 x 2 warps); Q K^T alone stays on
wgmma (1 x 2 warpgroups), and the row max / sum both use met two register layouts: the
program was refused ("fragment 'alpha' holds row statistics of two T.gemm accumulators with
different register layouts (wgmma, 1 x 2 warpgroups and mma.sync, 4 x 2 warps)").  Now
both run on mma.sync in 4 x 2 warps (P through shared memory: with warps along N no warp
holds a whole row of P).  Head dims 48 and 112 alike (24- and 56-column parts); groups whose
T.gemms all take wgmma keep it, and a member that cannot leave wgmma (T.wgmma_gemm) keeps
the refusal.  TileLang 0.1.15 refuses these programs itself: it puts both on wgmma, and its
layout inference finds the copy of S into a register P a conflict (or, P in shared memory,
its wgmma descriptor asserts "Not a canonical GMMA_MN layout").

CPU: plans, generated source and sm_90a cubins.  GPU (``pytest -m gpu``): against torch's
scaled_dot_product_attention at head dims 80 and 96."""

import pytest

import attention as A
import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def scores_then_values(dim=80, rows=64, keys=128, threads=256, wgmma_scores=False):
    """One block of ``rows`` queries against ``keys`` keys: S = Q K^T, its row max, P =
    exp(S - max) in a register fragment, O = P V, O scaled by the row max.
    ``wgmma_scores``: Q K^T by T.wgmma_gemm (wgmma or an error, TileLang's rule)."""
    gemm = T.wgmma_gemm if wgmma_scores else T.gemm

    @T.prim_func
    def attn(Q: T.Tensor((2 * rows, dim), "float16"), K: T.Tensor((keys, dim), "float16"),
             V: T.Tensor((keys, dim), "float16"), O: T.Tensor((2 * rows, dim), "float32")):
        with T.Kernel(2, threads=threads) as bx:
            q_s = T.alloc_shared((rows, dim), "float16")
            k_s = T.alloc_shared((keys, dim), "float16")
            v_s = T.alloc_shared((keys, dim), "float16")
            s = T.alloc_fragment((rows, keys), "float32")
            p = T.alloc_fragment((rows, keys), "float16")
            o = T.alloc_fragment((rows, dim), "float32")
            top = T.alloc_fragment((rows,), "float32")
            T.copy(Q[bx * rows, 0], q_s)
            T.copy(K, k_s)
            T.copy(V, v_s)
            gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
            T.reduce_max(s, top, dim=1)
            for i, j in T.Parallel(rows, keys):
                p[i, j] = T.exp(s[i, j] - top[i])
            T.gemm(p, v_s, o, clear_accum=True)
            for i, j in T.Parallel(rows, dim):
                o[i, j] = o[i, j] * top[i]
            T.copy(o, O[bx * rows, 0])

    return attn


def _plan(func, options=None):
    plan = lower(func, "sm_90a", options)
    body = plan.func.kernels[0].body
    gemms = {s.c: s for s in walk_stmts(body) if isinstance(s, N.Gemm)}
    layouts = {s.buffer.name: s.layout for s in walk_stmts(body)
               if isinstance(s, N.Allocate) and s.layout is not None}
    return gemms, layouts


def _mma_lines(src):
    return [line.strip() for line in src.splitlines() if "tcm.tiled_mma(" in line]


@pytest.mark.parametrize("dim", [48, 80, 112])
def test_scores_join_values_on_mma_sync(dim, tmp_path):
    """wgmma cannot read V's 24-, 40- or 56-column parts: P @ V is on mma.sync, and Q K^T,
    which shares its row maximum, joins it in the same 4 x 2 warps; P goes through shared
    memory."""
    func = scores_then_values(dim)
    gemms, layouts = _plan(func)
    assert gemms["s"].family == gemms["o"].family == "mma"
    assert gemms["o"].a == "p_shared"
    assert layouts["s"].warps == layouts["o"].warps == layouts["top"].warps == (4, 2)
    assert layouts["top"].kind == "mma_rows" and layouts["top"].mma == "mma"
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    lines = _mma_lines(src)
    assert len(lines) == 2 and all('tiled_mma("mma", ' in x and "(4, 2)" in x for x in lines)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("dim,threads", [(64, 256), (96, 256), (80, 128)])
def test_groups_wgmma_can_take_stay_on_wgmma(dim, threads):
    """Head dim 96 on two warpgroups (48 columns each: 32-byte chunks), 64 on two, 80 on
    one warpgroup: every T.gemm of the group takes wgmma, as before."""
    gemms, layouts = _plan(scores_then_values(dim, threads=threads))
    assert gemms["s"].family == gemms["o"].family == "wgmma"
    assert layouts["s"].warps == layouts["o"].warps == (1, threads // 128)


def test_a_member_bound_to_wgmma_keeps_the_refusal():
    """T.wgmma_gemm never leaves wgmma (TileLang's rule), so the group cannot move to
    mma.sync: the row maximum's two layouts are refused by name."""
    from tilecute.transform.layout_inference import LayoutError

    with pytest.raises(LayoutError, match=r"fragment 'top' holds row statistics of two T\.gemm "
                                          r"accumulators with different register layouts "
                                          r"\(wgmma, 1 x 2 warpgroups and mma\.sync, 4 x 2 "
                                          r"warps\)"):
        tilecute.compile(scores_then_values(80, wgmma_scores=True), target="sm_90a")


def test_unlinked_gemms_keep_their_families():
    """A wgmma T.gemm and an mma.sync one that share no rows keep their own families."""
    @T.prim_func
    def two(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 80), "float16"),
            C: T.Tensor((64, 64), "float32"), D: T.Tensor((64, 80), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 80), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            d = T.alloc_fragment((64, 80), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, a_s, c, transpose_B=True, clear_accum=True)
            T.gemm(a_s, b_s, d, clear_accum=True)
            T.copy(c, C)
            T.copy(d, D)

    gemms, _ = _plan(two)
    assert gemms["c"].family == "wgmma" and gemms["d"].family == "mma"


def test_whole_tiles_of_two_families_stay_as_planned():
    """A wgmma accumulator added into a tf32 one (mma.sync) in one T.Parallel nest shares
    no row statistics: the layout pass stages the wgmma tile through shared memory, and
    both keep their families (only row statistics move a group to mma.sync)."""
    @T.prim_func
    def two(A: T.Tensor((64, 64), "float16"), X: T.Tensor((64, 32), "float32"),
            C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            x_s = T.alloc_shared((64, 32), "float32")
            c1 = T.alloc_fragment((64, 64), "float32")
            c2 = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.copy(X, x_s)
            T.gemm(a_s, a_s, c1, transpose_B=True, clear_accum=True)
            T.gemm(x_s, x_s, c2, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                c2[i, j] += c1[i, j]
            T.copy(c2, C)

    gemms, _ = _plan(two)
    assert gemms["c1"].family == "wgmma" and gemms["c2"].family == "mma"


# (dim, block_M, block_N, threads): the mixed groups of examples/attention.py's kernel
MIXED = [(80, 64, 64, 256), (80, 64, 128, 256), (80, 64, 176, 256), (48, 64, 128, 256),
         (112, 64, 64, 256), (96, 64, 64, 512)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim,bm,bn,threads", MIXED)
def test_flash_attention_odd_head_dims_build(dim, bm, bn, threads, causal, tmp_path):
    """examples/attention.py's kernel (FullRow, online softmax, P from T.copy(S, P)) on
    mma.sync for both T.gemms where P @ V cannot take wgmma (head dim 96 on four
    warpgroups: 24 columns each)."""
    func = A.flash_attention(4, dim, causal=causal, block_M=bm, block_N=bn, threads=threads,
                             warp_specialize=False, persistent=False)
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    lines = _mma_lines(src)
    warps = "(4, 2)" if threads == 256 else "(4, 4)"
    assert len(lines) == 2 and all('tiled_mma("mma", ' in x and warps in x for x in lines)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_warp_specialized_pipeline_needs_wgmma_by_name():
    """warp_specialize=True asks for a producer warpgroup feeding wgmma T.gemms; once the
    group is on mma.sync it is refused naming that rule."""
    from tilecute.transform.warp_specialize import WarpSpecializeError

    func = A.flash_attention(4, 80, block_M=64, block_N=64, threads=256, warp_specialize=True,
                             persistent=False)
    with pytest.raises(WarpSpecializeError, match=r"warp_specialize=True\) needs sm_90a and a "
                                                  r"body .* ends with a wgmma T\.gemm on the "
                                                  r"loaded tiles"):
        tilecute.compile(func, target="sm_90a")


# ---- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim,bm,bn,threads", [(80, 64, 64, 256), (80, 64, 128, 256),
                                               (96, 64, 64, 512), (96, 64, 128, 256)])
def test_gpu_odd_head_dims_match_sdpa(dim, bm, bn, threads, causal):
    """Against torch's scaled_dot_product_attention, ragged sequence length (head dim 96
    on 256 threads stays on wgmma: the control)."""
    import torch
    import torch.nn.functional as F

    kernel = A.flash_attention_kernel(4, dim, causal=causal, block_M=bm, block_N=bn,
                                      threads=threads, warp_specialize=False, persistent=False)
    torch.manual_seed(dim + bn)
    q, k, v = (torch.randn(2, 333, 4, dim, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o, lse = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)),
                                         is_causal=causal).transpose(1, 2)
    torch.testing.assert_close(o.float(), ref.float(), atol=4e-3, rtol=4e-3)
    torch.testing.assert_close(lse, A.reference(q, k, v, causal)[1], atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [48, 80, 112])
def test_gpu_scores_then_values(dim):
    import torch

    torch.manual_seed(dim)
    q, k, v = (torch.randn(n, dim, device="cuda", dtype=torch.float16) for n in (128, 128, 128))
    o = torch.empty(128, dim, device="cuda", dtype=torch.float32)
    tilecute.compile(scores_then_values(dim), target="sm_90a")(q, k, v, o)
    s = q.float() @ k.float().T
    top = s.max(-1, keepdim=True).values
    ref = (torch.exp(s - top).half().float() @ v.float()) * top
    torch.testing.assert_close(o, ref, atol=2e-2, rtol=2e-3)
