"""TileLang's flash-attention idiom that starts the scores at their mask and lets the first
GEMM accumulate into them:

    for i, j in T.Parallel(bm, bn):
        scores[i, j] = T.if_then_else(k * bn + j >= seq, -T.infinity("float32"), 0)
    T.gemm(Q_s, K_s, scores, transpose_B=True)

is the GEMM from 0 followed by the mask (adding the products to 0 or to an infinity first
or last gives the same value), so the MMA overlap applies to it as to a cleared GEMM; the
mask runs only in the steps where some element of the tile can be masked."""

import math

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


def scores_masked_first(seq, heads=4, dim=128, bm=128, bn=128, causal=False, init="-inf",
                        threads=256, stages=2, named=False, shared_mask=False):
    """Attention over (B, S, H, D) in the way TileLang's examples write it, the mask
    written into the scores before the first GEMM (``init``: the masked value)."""
    scale = 1.0 / math.sqrt(dim) * 1.4426950408889634
    batch = T.dynamic("batch")
    shape = (batch, seq, heads, dim)
    masked = -T.infinity("float32") if init == "-inf" else float(init)

    @T.prim_func
    def attn(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
             V: T.Tensor(shape, "float16"), Out: T.Tensor(shape, "float16"),
             Keep: T.Tensor((seq,), "int32")):
        with T.Kernel(T.ceildiv(seq, bm), heads, batch, threads=threads) as (bx, by, bz):
            q_tile = T.alloc_shared((bm, dim), "float16")
            k_tile = T.alloc_shared((bn, dim), "float16")
            v_tile = T.alloc_shared((bn, dim), "float16")
            scores = T.alloc_fragment((bm, bn), "float32")
            probs = T.alloc_fragment((bm, bn), "float16")
            out = T.alloc_fragment((bm, dim), "float32")
            keep = T.alloc_shared((bn,), "int32")
            row_max = T.alloc_fragment((bm,), "float32")
            prev_max = T.alloc_fragment((bm,), "float32")
            rescale = T.alloc_fragment((bm,), "float32")
            step_sum = T.alloc_fragment((bm,), "float32")
            total = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bz, bx * bm:(bx + 1) * bm, by, :], q_tile)
            T.fill(out, 0)
            T.fill(total, 0)
            T.fill(row_max, -T.infinity("float32"))
            steps = T.min(T.ceildiv(seq, bn), T.ceildiv((bx + 1) * bm, bn)) if causal \
                else T.ceildiv(seq, bn)
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(K[bz, k * bn:(k + 1) * bn, by, :], k_tile)
                if shared_mask:  # the mask read from shared memory the step loads
                    T.copy(Keep[k * bn:(k + 1) * bn], keep)
                    for i, j in T.Parallel(bm, bn):
                        scores[i, j] = T.if_then_else(keep[j] != 0, 0, masked)
                elif causal and named:  # the positions named first, as some examples write
                    for i, j in T.Parallel(bm, bn):
                        row = bx * bm + i
                        col = k * bn + j
                        scores[i, j] = T.if_then_else(row >= col, 0, masked)
                elif causal:
                    for i, j in T.Parallel(bm, bn):
                        scores[i, j] = T.if_then_else(bx * bm + i >= k * bn + j, 0, masked)
                else:
                    for i, j in T.Parallel(bm, bn):
                        scores[i, j] = T.if_then_else(k * bn + j >= seq, masked, 0)
                T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, prev_max)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(bm):
                    rescale[i] = T.exp2((prev_max[i] - row_max[i]) * scale)
                for i, j in T.Parallel(bm, bn):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, step_sum, dim=1)
                for i in T.Parallel(bm):
                    total[i] = total[i] * rescale[i] + step_sum[i]
                T.copy(scores, probs)
                for i, j in T.Parallel(bm, dim):
                    out[i, j] *= rescale[i]
                T.copy(V[bz, k * bn:(k + 1) * bn, by, :], v_tile)
                T.gemm(probs, v_tile, out, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, dim):
                out[i, j] /= total[i]
            T.copy(out, Out[bz, bx * bm:(bx + 1) * bm, by, :])

    return attn


def lowered(func, **options):
    return print_func(run_passes(func, "sm_90a", options))


def test_the_mask_moves_after_a_gemm_from_zero_and_the_loop_overlaps():
    text = lowered(scores_masked_first(1000))
    assert "T.wait_wgmma(0)" in text  # the MMA overlap applies
    # the first GEMM starts from 0 and the mask is added to what it leaves
    assert "clear_accum=True, policy=T.GemmWarpPolicy.FullRow, wg_wait=1" in text
    assert ('scores[i, j] = scores[i, j] + T.if_then_else(k * 128 + j >= 1000, T.float32(0.0) '
            '- T.float32(float("inf")), T.float32(0.0))') in text
    # only in steps whose keys reach past the end: k * 128 + 127 >= 1000
    assert "if k * 128 - 1000 + 127 >= 0:" in text


def test_the_causal_mask_runs_on_the_diagonal_blocks_only():
    text = lowered(scores_masked_first(1024, causal=True))
    assert "T.wait_wgmma(0)" in text
    assert ('scores[i, j] = scores[i, j] + T.if_then_else(bx * 128 + i >= k * 128 + j, '
            'T.float32(0.0), T.float32(0.0) - T.float32(float("inf")))') in text
    # masked where bx * 128 + i < k * 128 + j for some i, j: bx * 128 - k * 128 - 127 < 0
    assert "if bx * 128 - k * 128 + -127 < 0:" in text


def test_names_bound_in_the_mask_loop_stand_for_their_values():
    text = lowered(scores_masked_first(1024, causal=True, named=True))
    assert "T.wait_wgmma(0)" in text and "if bx * 128 - k * 128 + -127 < 0:" in text


def test_a_mask_read_from_shared_memory_stays_before_the_gemm():
    """Moved after the GEMM it would read the step's shared tile after its release."""
    text = lowered(scores_masked_first(1024, shared_mask=True))
    assert "T.wait_wgmma(0)" not in text and "clear_accum=False" in text


def test_other_starting_values_stay_as_written():
    """A finite non-zero start (1.0) is not a mask: the GEMM keeps accumulating into it
    and the loop is not overlapped."""
    text = lowered(scores_masked_first(1000, init="1.0"))
    assert "T.wait_wgmma(0)" not in text and "clear_accum=False" in text


@pytest.mark.parametrize("causal", [False, True])
def test_mask_first_attention_builds(causal, tmp_path):
    info = tilecute.build_cubin(scores_masked_first(1000, causal=causal), "sm_90a",
                                out_dir=str(tmp_path))
    assert info.kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [1, 127, 1000, 4097])
@pytest.mark.parametrize("causal", [False, True, "named"])
@pytest.mark.parametrize("init", ["-inf", "1.0"])
def test_mask_first_attention_matches_torch(seq, causal, init):
    import torch

    kernel = tilecute.compile(scores_masked_first(seq, causal=bool(causal), init=init,
                                                  named=causal == "named"), out_idx=[3])
    keep = torch.ones(seq, device="cuda", dtype=torch.int32)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, seq, 4, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kernel(q, k, v, keep)
    # reference: the program's own math.  The kernel visits keys up to a multiple of 128
    # (zeros past the end: zero scores before the mask, zero values), causal ones up to
    # its query block's end; a visited score starts at 0 where kept, at `init` where masked
    pad = -(-seq // 128) * 128
    kp, vp = (torch.nn.functional.pad(x.float(), (0, 0, 0, 0, 0, pad - seq)) for x in (k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kp)
    i = torch.arange(seq, device="cuda")[:, None]
    j = torch.arange(pad, device="cuda")[None, :]
    fill = float("-inf") if init == "-inf" else float(init)
    keep = j <= i if causal else j < seq
    start = torch.where(keep, 0.0, fill)
    if causal:
        visited = j < torch.clamp((i // 128 + 1) * 128, max=pad)
        start = torch.where(visited, start, float("-inf"))
    s = (s + start) / math.sqrt(128)
    ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vp)
    assert torch.allclose(out.float(), ref, atol=2e-3, rtol=2e-3), (out.float() - ref).abs().max()


@pytest.mark.gpu
def test_a_masked_infinite_score_still_makes_nan():
    """The program adds its products to the mask's -inf: a +inf product at a masked place
    gives NaN there, and the row's softmax NaN, as the program says (a select of -inf
    would hide it)."""
    import torch

    seq = 256
    kernel = tilecute.compile(scores_masked_first(seq, causal=True), out_idx=[3])
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, seq, 4, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    k[0, 100, 0, :] = float("inf")  # key 100, masked for query 0 (causal): +inf . q
    q[0, 0, 0, :] = 1.0
    out = kernel(q, k, v, torch.ones(seq, device="cuda", dtype=torch.int32))
    assert torch.isnan(out[0, 0, 0]).all()  # query 0 saw +inf - inf at a masked key
    assert torch.isfinite(out[0, 0, 1:]).all()  # the other heads are untouched
