"""Flash attention in TileLang's idiom on warp mma.sync (sm_80), with T.gemm's default
policy (GemmWarpPolicy.Square), FullRow and FullCol, over several block shapes and thread
counts, causal and not.

On mma.sync the P @ V T.gemm reads P from registers only with every warp along M, while
the score T.gemm Q @ K^T alone would take its policy's partition (Square: 2 x 2 warps
over a 64 x 64 tile); the row statistics (max, rescale, sum) then met two register
layouts and the program was refused ("fragment ... holds row statistics of two T.gemm
accumulators").  select_mma now gives the T.gemms whose rows meet one partition
(``_Kernel.shared_partitions``): every warp along M where that tiles them all (P stays in
registers), else the first one's (P through shared memory).  sm_90a (wgmma) is planned as
before: the generated-code digests of its kernels are unchanged.

CPU: the partitions chosen, sm_80 and sm_90a cubins.  GPU (pytest -m gpu): against torch
on the GPU at hand (sm_90a: wgmma), with ``disable_wgmma`` (the mma.sync partitions of
sm_80, compiled for sm_90a so a Hopper GPU runs them), and as sm_80 cubins on an sm_8x
GPU."""

import math

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower

LOG2E = 1.4426950408889634


def mha_fwd(batch=1, heads=2, seq=256, dim=64, block_M=64, block_N=64, threads=128,
            causal=False, policy=None, stages=1):
    """O = softmax(Q K^T / sqrt(dim)) V, Q/K/V/O of shape (batch, seq, heads, dim) fp16.
    ``policy=None`` leaves it out of both T.gemm calls (TileLang's default, Square).  The
    causal mask is written into the score tile before its T.gemm accumulates into it, and
    the key loop stops at the diagonal."""
    scale = LOG2E / math.sqrt(dim)
    shape = (batch, seq, heads, dim)
    pol = getattr(T.GemmWarpPolicy, policy or "Square")
    default = policy is None

    @T.prim_func
    def mha(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16),
            V: T.Tensor(shape, T.float16), Out: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_tile = T.alloc_shared((block_M, dim), T.float16)
            k_tile = T.alloc_shared((block_N, dim), T.float16)
            v_tile = T.alloc_shared((block_N, dim), T.float16)
            scores = T.alloc_fragment((block_M, block_N), T.float32)
            probs = T.alloc_fragment((block_M, block_N), T.float16)
            out = T.alloc_fragment((block_M, dim), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            row_max_old = T.alloc_fragment((block_M,), T.float32)
            rescale = T.alloc_fragment((block_M,), T.float32)
            step_sum = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_tile)
            T.fill(out, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(T.float32))
            n_blocks = T.min(T.ceildiv(seq, block_N), T.ceildiv((bx + 1) * block_M, block_N)) \
                if causal else T.ceildiv(seq, block_N)
            for kb in T.Pipelined(n_blocks, num_stages=stages):
                T.copy(K[bz, kb * block_N:(kb + 1) * block_N, by, :], k_tile)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        scores[i, j] = T.if_then_else(bx * block_M + i >= kb * block_N + j, 0,
                                                      -T.infinity(T.float32))
                else:
                    T.clear(scores)
                if default:
                    T.gemm(q_tile, k_tile, scores, transpose_B=True)
                else:
                    T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=pol)
                T.copy(row_max, row_max_old)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(row_max_old[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, step_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * rescale[i] + step_sum[i]
                T.copy(scores, probs)
                for i, d in T.Parallel(block_M, dim):
                    out[i, d] *= rescale[i]
                T.copy(V[bz, kb * block_N:(kb + 1) * block_N, by, :], v_tile)
                if default:
                    T.gemm(probs, v_tile, out)
                else:
                    T.gemm(probs, v_tile, out, policy=pol)
            for i, d in T.Parallel(block_M, dim):
                out[i, d] /= row_sum[i]
            T.copy(out, Out[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return mha


# (block_M, block_N, dim, threads)
SHAPES = [(64, 64, 64, 128), (128, 64, 64, 128), (64, 128, 128, 128), (128, 128, 128, 256),
          (128, 32, 64, 256), (64, 64, 64, 256), (64, 32, 64, 256)]
POLICIES = [None, "FullRow"]


def _plan(func, arch="sm_80", options=None):
    plan = lower(func, arch, options)
    body = plan.func.kernels[0].body
    gemms = {s.c: s for s in walk_stmts(body) if isinstance(s, N.Gemm)}
    layouts = {s.buffer.name: s.layout for s in walk_stmts(body)
               if isinstance(s, N.Allocate) and s.layout is not None}
    return gemms, layouts


@pytest.mark.parametrize("policy", [None, "FullRow", "FullCol"])
@pytest.mark.parametrize("bm,bn,dim,threads", [(64, 64, 64, 128), (128, 128, 128, 256)])
def test_every_warp_along_m_when_it_tiles(policy, bm, bn, dim, threads):
    """Square (2 x 2 for the score tile alone), FullRow and FullCol alike: S, P and O in
    one partition with every warp along M, P read from registers."""
    gemms, layouts = _plan(mha_fwd(block_M=bm, block_N=bn, dim=dim, threads=threads,
                                   policy=policy))
    warps = (threads // 32, 1)
    assert gemms["out"].a == "probs" and gemms["out"].family == "mma"
    for name in ("scores", "probs", "out"):
        assert layouts[name].kind == "mma" and layouts[name].warps == warps, name
    assert layouts["probs"].operand == "A"
    assert layouts["row_max"].kind == "mma_rows" and layouts["row_max"].warps == warps


def test_a_common_partition_with_warps_along_n_stages_p():
    """64 rows over 8 warps: no partition puts every warp along M; the score tile's own
    (FullRow: 4 x 2 over 64 x 32) tiles O too, so both take it and P goes through shared
    memory (was: O planned 2 x 4, the rows' statistics refused)."""
    gemms, layouts = _plan(mha_fwd(block_M=64, block_N=32, threads=256))
    assert gemms["out"].a == "probs_shared"
    assert layouts["scores"].warps == layouts["out"].warps == (4, 2)


def test_sm90a_plan_is_unchanged():
    """wgmma: one warpgroup per 64 rows along M for Square as before (no re-planning)."""
    gemms, layouts = _plan(mha_fwd(block_M=128, threads=256), "sm_90a")
    assert gemms["scores"].family == gemms["out"].family == "wgmma"
    assert layouts["scores"].warps == layouts["out"].warps == (2, 1)
    assert gemms["out"].a == "probs"


def test_disable_wgmma_plans_as_sm80():
    gemms, layouts = _plan(mha_fwd(), "sm_90a", {"disable_wgmma": True})
    assert gemms["out"].family == "mma" and layouts["scores"].warps == (4, 1)


def test_unrelated_gemms_keep_their_own_partitions():
    """Two T.gemms whose accumulators share no rows keep their policies' partitions."""
    @T.prim_func
    def two(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16),
            C: T.Tensor((64, 64), T.float32), D: T.Tensor((64, 32), T.float32)):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), T.float16)
            b_s = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            d = T.alloc_fragment((64, 32), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, c, clear_accum=True)
            T.gemm(a_s, b_s[:, 0:32], d, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(c, C)
            T.copy(d, D)
    _, layouts = _plan(two)
    assert layouts["c"].warps == (2, 2) and layouts["d"].warps == (4, 1)


def _state_plus_intra(policy_a=None, policy_b=None):
    """Chunked linear attention's output: O = Q @ S (A from shared memory) + tril(Q K^T) @ V
    (the masked scores from registers) into one accumulator ``o``."""
    pa = getattr(T.GemmWarpPolicy, policy_a or "Square")
    pb = getattr(T.GemmWarpPolicy, policy_b or "Square")

    @T.prim_func
    def main(Q: T.Tensor((64, 64), T.float16), K: T.Tensor((64, 64), T.float16),
             V: T.Tensor((64, 64), T.float16), S: T.Tensor((64, 64), T.float16),
             O: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 64), T.float16)
            k_s = T.alloc_shared((64, 64), T.float16)
            v_s = T.alloc_shared((64, 64), T.float16)
            s_s = T.alloc_shared((64, 64), T.float16)
            sc = T.alloc_fragment((64, 64), T.float32)
            p = T.alloc_fragment((64, 64), T.float16)
            o = T.alloc_fragment((64, 64), T.float32)
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.copy(V, v_s)
            T.copy(S, s_s)
            T.gemm(q_s, s_s, o, clear_accum=True, policy=pa)
            T.gemm(q_s, k_s, sc, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                p[i, j] = T.if_then_else(i >= j, sc[i, j], 0.0)
            T.gemm(p, v_s, o, policy=pb)
            T.copy(o, O)
    return main


def test_one_accumulator_of_a_shared_a_and_a_register_a_gemm(tmp_path):
    """O = Q @ S then O += P @ V with P in registers, default policy: both T.gemms into ``o``
    take every warp along M (was refused on sm_80: "'o' needs layout ... warps=(4, 1) here
    but has ... warps=(2, 2)"), and so do the scores P is made from."""
    gemms, layouts = _plan(_state_plus_intra())
    assert gemms["o"].a == "p" and gemms["o"].family == "mma"
    for name in ("sc", "p", "o"):
        assert layouts[name].warps == (4, 1), name
    assert tilecute.build_cubin(_state_plus_intra(), "sm_80", out_dir=str(tmp_path)).kernel_names


def test_one_accumulator_of_two_policies_is_still_refused():
    """Two T.gemms of different explicit policies into one accumulator: refused as before
    (TileLang's layouts conflict too)."""
    with pytest.raises(Exception, match=r"T\.gemm\(p, v_s, o\): 'o' needs layout .*warps=\(4, 1\).* "
                                        r"but has .*warps=\(1, 4\)"):
        _plan(_state_plus_intra("FullCol", "FullRow"))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("bm,bn,dim,threads", SHAPES)
def test_sm80_cubin(bm, bn, dim, threads, policy, causal, tmp_path):
    f = mha_fwd(block_M=bm, block_N=bn, dim=dim, threads=threads, policy=policy, causal=causal)
    assert tilecute.build_cubin(f, "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn,dim,threads", [(64, 64, 64, 128), (128, 128, 128, 256),
                                               (64, 32, 64, 256)])
def test_sm90a_cubin(bm, bn, dim, threads, causal, tmp_path):
    f = mha_fwd(block_M=bm, block_N=bn, dim=dim, threads=threads, causal=causal, stages=2)
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- on the GPU -------------------------------------------------------------------------------
def _reference(q, k, v, causal):
    import torch
    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # (b, h, s, d)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1),
                          float("-inf"))
    return (s.softmax(-1) @ vf).transpose(1, 2)


def _check(bm, bn, dim, threads, policy, causal, target=None, options=None, stages=1):
    import torch
    torch.manual_seed(0)
    batch, heads, seq = 2, 2, 256
    q, k, v = (torch.randn(batch, seq, heads, dim, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    kernel = tilecute.compile(mha_fwd(batch, heads, seq, dim, bm, bn, threads, causal, policy,
                                      stages), target=target, options=options)
    kernel(q, k, v, o)
    torch.testing.assert_close(o.float(), _reference(q, k, v, causal), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("bm,bn,dim,threads", SHAPES)
def test_gpu_mma_sync_partitions(bm, bn, dim, threads, policy, causal):
    """The mma.sync plan (sm_80's) on the GPU at hand: on Hopper through disable_wgmma."""
    import torch
    major = torch.cuda.get_device_capability()[0]
    if major < 8:
        pytest.skip("needs sm_80+")
    _check(bm, bn, dim, threads, policy, causal,
           options={"disable_wgmma": True} if major >= 9 else None)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn,dim,threads", [(64, 64, 64, 128), (128, 128, 128, 256),
                                               (64, 32, 64, 256)])
def test_gpu_default_arch(bm, bn, dim, threads, causal):
    """On the GPU's own arch (sm_90a on an H100: wgmma) with the default policy."""
    _check(bm, bn, dim, threads, None, causal, stages=2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_sm80_cubin(causal):
    """An sm_80 cubin runs only on an sm_8x GPU (SASS is compatible within one major)."""
    import torch
    if torch.cuda.get_device_capability()[0] != 8:
        pytest.skip("an sm_80 cubin needs an sm_8x GPU")
    _check(64, 64, 64, 128, None, causal, target="sm_80")


@pytest.mark.parametrize("m,n,threads,policy,warps", [(64, 96, 192, "FullCol", (1, 6)),
                                                      (64, 48, 96, "FullCol", (1, 3))])
def test_mma_sync_warps_along_n_other_than_a_power_of_two(m, n, threads, policy, warps, tmp_path):
    """3 or 6 warps along N (TileLang's partitions: each warp a multiple of 8 columns)
    take 16 x 8 steps and a B swizzle whose chunks hold whole warp tiles (CuTe DSL aborted
    the whole process in partition_B otherwise; tilecute refused them): they build
    (numerics: tests/test_gemm_covering_partitions.py, GPU)."""
    import tilecute.language as T
    from tilecute.transform.select_mma import mma_warps

    assert mma_warps(96, 64, 3, "FullRow") == (3, 1)  # (warps along M: any count)
    assert mma_warps(m, n, threads // 32, policy) == warps

    @T.prim_func
    def g(A: T.Tensor((m, 64), "float16"), B: T.Tensor((64, n), "float16"),
          C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((m, 64), "float16")
            B_s = T.alloc_shared((64, n), "float16")
            c = T.alloc_fragment((m, n), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, c, clear_accum=True, policy=getattr(T.GemmWarpPolicy, policy))
            T.copy(c, C)

    assert tilecute.build_cubin(g, "sm_80", out_dir=str(tmp_path)).kernel_names
