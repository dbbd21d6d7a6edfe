"""The fifty-third set of programs in TileLang's idioms (tests/unseen_programs53.py): the mHC
pre block's fused tail (Sinkhorn on one warp, stream mixing on the others) and its tfloat32
GEMM with row sums of squares, the mHC post mix, a Sinkhorn backward over (tile, n, n)
fragments (T.reduce_sum along dim=-1 and dim=-2 into shared memory, in @T.macro), a fast
Walsh-Hadamard transform by warp shuffles, a block-causal attention forward and its
block-diffusion (noisy | clean halves) form over packed sequences, and an fp8 block mean
pooling.

CPU: each builds to an sm_90a cubin (the two prim_func programs an sm_80 one too), and what
decides its result is read in the generated source.  All built and read right
as first written.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs53.py``)."""

import re

import pytest
import torch

import rounds
import unseen_programs53 as P

bf16, f8 = torch.bfloat16, torch.float8_e4m3fn

NAMES = ["block_causal_fwd", "dllm_varlen_fwd", "fp8_block_mean_pool", "hadamard_shfl", "mhc_gemm_sqrsum_tf32",
         "mhc_post_mix", "mhc_pre_sinkhorn", "sinkhorn_bwd_richardson"]

# eager kernels are built from the arguments they are called with (CPU tensors give the shapes)
EAGER = {
    "mhc_pre_sinkhorn": lambda: P.mhc_pre_sinkhorn.compile(
        torch.zeros(4, 10, 24), torch.zeros(4, 10), torch.zeros(24),
        torch.zeros(10, 4, 512, dtype=bf16), torch.zeros(10, 4), torch.zeros(10, 16),
        torch.zeros(10, 512, dtype=bf16)),
    "mhc_gemm_sqrsum_tf32": lambda: P.mhc_gemm_sqrsum_tf32.compile(
        torch.zeros(100, 1024, dtype=bf16), torch.zeros(24, 1024), torch.zeros(100, 24),
        torch.zeros(100)),
    "mhc_post_mix": lambda: P.mhc_post_mix.compile(
        torch.zeros(10, 4, 4), torch.zeros(10, 4, 768, dtype=bf16), torch.zeros(10, 4),
        torch.zeros(10, 768, dtype=bf16), torch.zeros(10, 4, 768, dtype=bf16)),
    "sinkhorn_bwd_richardson": lambda: P.sinkhorn_bwd_richardson.compile(
        torch.zeros(100, 4, 4), torch.zeros(100, 4, 4)),
    "fp8_block_mean_pool": lambda: P.fp8_block_mean_pool.compile(
        torch.zeros(1000, 128, dtype=f8), torch.zeros(1000)),
}

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P, EAGER)
_body = rounds.body_of(_kernel)

test_every_kernel_is_listed = rounds.every_kernel_is_listed(P, NAMES, imports=("tilelang", "T"))
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
# the prim_func programs have no Hopper-only form (the attention GEMMs are wgmma on sm_90a and
# mma.sync on sm_80; both are built)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    ["hadamard_shfl", "block_causal_fwd", "dllm_varlen_fwd"], rounds.tir_of(P), "sm_80")


# ---- what decides each result, in the generated source -----------------------------------------
def test_mhc_pre_splits_the_block_into_two_thread_regions():
    src = _body("mhc_pre_sinkhorn")
    assert "cute.math.rsqrt(rms[0] / cutlass.Float32(2048.0) + cutlass.Float32(1e-06))" in src
    warp0, rest = src.split("if tc_tid < 32:  # thread region: threads 0..31", 1)[1].split(
        "if tc_tid >= 32:  # thread region: threads 32..95", 1)
    # Sinkhorn: the row softmax, then three rounds of column then row normalisation; the
    # column sums (dim=0) reach every thread of the warp, the warp syncs only itself
    assert re.search(r"cm\[(\w+)\] = cute\.math\.exp\(cm\[\1\] - tc_red\d+\[0\]\)", warp0)
    loop = warp0.split("in cutlass.range(0, 3):", 1)[1]
    assert "cute.arch.barrier(barrier_id=2, number_of_threads=32)" in loop
    assert "sync_threads" not in warp0
    assert re.search(r"cm\[(\w+)\] = cm\[\1\] / \(tcr\.pick\(csum, \(\w+ \+ \1\), 4\) \+ "
                     r"cutlass\.Float32\(0\.0001\)\)", loop)
    assert re.search(r"cm\[(\w+)\] = cm\[\1\] / \(tc_red\d+\[0\] \+ cutlass\.Float32\(0\.0001\)\)", loop)
    # the other 64 threads: pre weights in shared memory, the pipelined residual tiles synced
    # among themselves, the weighted sum of the hc streams
    assert "tc_wtid64 = tc_tid - 32" in rest
    assert "cute.arch.barrier(barrier_id=3, number_of_threads=64)" in rest
    assert "sync_threads" not in rest
    assert re.search(r"ol\[(\w+)\] = ol\[\1\] \+ w \* xl\[h \* 4 \+ \1\]", rest)


def test_mhc_gemm_runs_tf32_mma_and_keeps_the_padded_rows_out():
    src = _body("mhc_gemm_sqrsum_tf32")
    assert 'tcm.tiled_mma("mma", cutlass.TFloat32, cutlass.TFloat32, cutlass.Float32' in src
    # fn's 24 rows fill 32: rows 24.. are zeros, the accumulator's columns 24.. never stored
    assert "if i5 < 24:" in src and "cutlass.Float32(0)  # out of bounds" in src
    assert re.search(r"if \((\w+) \+ (\w+)\) < 24:\s+if bt \* 64 \+ \w+ < tokens:", src)
    # the 4 partial columns of the sum of squares, then a 2-lane reduction per row
    assert re.search(r"part\[(\w+)\] = part\[\1\] \+ cutlass\.Float32\((\w+)\[\1\] \* \2\[\1\]\)", src)
    assert re.search(r'tcr\.warp_allreduce\(\w+, "sum", 2\)', src)


def test_hadamard_shuffles_across_lanes_then_across_warps():
    src = _body("hadamard_shfl")
    assert src.count("cute.arch.shuffle_sync(") == 2 and src.count("mask_and_clamp=31") == 2
    assert re.search(r"low = tx\w* >> r\w* & 1 == 0", src)
    assert re.search(r"cutlass\.select_\(low\w*, vals\[(\w+)\] \+ other\[\1\], other\[\1\] - vals\[\1\]\)", src)
    assert "in cutlass.range(0, 5):" in src and "in cutlass.range(0, 2):" in src
    assert "peer = (tx - tx // 4 * 4) * 32 + tx // 4" in src
    assert "vals[a + half] = vals[a] - cutlass.Float32(2.0) * vals[a + half]" in src
    assert src.count("cute.arch.sync_threads()") == 3  # transpose, reuse, transpose back


def test_block_causal_masks_the_diagonal_tile_then_accumulates():
    src = _body("block_causal_fwd")
    assert "steps = cutlass.Int32(cutlass.select_(bx == 0, 1, bx + 1))" in src
    assert "for k in cutlass.range(0, steps):" in src
    diag = src.split("if diag:", 1)[1].split("else:", 1)[0]
    assert re.search(r"i // 16 >= \(j \+ \w+\) // 16", diag)
    assert "cutlass.Float32(0.0), cutlass.Float32(-1000000.0))" in diag
    gemm = re.search(r"tcm\.gemm\(tc_mma0, [^\n]*", src).group(0)
    assert "accumulate=False" not in gemm  # the scores add onto the mask


def test_dllm_varlen_takes_each_key_tile_from_its_half():
    src = _body("dllm_varlen_fwd")
    assert "max_seqlen: cutlass.Int32" in src  # the scalar argument (it sizes the grid)
    assert "n_tiles = (cu_seqlens[bz + 1] - start) // 2 // 64" in src and "if bx < 2 * n_tiles:" in src
    assert "steps = cutlass.Int32(cutlass.select_(q_noisy, bx + 2, bx - n_tiles + 1))" in src
    # the if / else at the `if`'s own indent (the copies' out-of-bounds branches are deeper)
    indent, rest = re.search(r"\n( *)if noisy_diag != 0:\n(.*)", src, re.S).groups()
    noisy, clean = rest.split(f"\n{indent}else:\n", 1)
    clean = clean.split(f"\n{indent}if ", 1)[0]
    assert "clean + k" not in noisy and "start + bx" not in clean
    assert "K.iterator + cute.assume((start + bx * 64 + i7) * 128 + by * 64" in noisy
    assert "V.iterator + cute.assume((start + bx * 64 + i9) * 128 + by * 64" in noisy
    assert "K.iterator + cute.assume((clean + k * 64 + i11) * 128 + by * 64" in clean
    assert "V.iterator + cute.assume((clean + k * 64 + i13) * 128 + by * 64" in clean
    mask = src.split("if noisy_diag + cutlass.Int32(cutlass.select_(k == last_clean, 1, 0)) != 0:", 1)[1]
    mask = mask.split("else:", 1)[0]
    assert re.search(r"select_\(noisy_diag == 1, cutlass\.Int32\(cutlass\.select_\(i // 16 == \(j \+ (\w+)\) // 16, "
                     r"1, 0\)\), cutlass\.Int32\(cutlass\.select_\(q_noisy, cutlass\.Int32\(cutlass\.select_\("
                     r"i // 16 > \(j \+ \1\) // 16, 1, 0\)\), cutlass\.Int32\(cutlass\.select_\(i // 16 >= "
                     r"\(j \+ \1\) // 16, 1, 0\)\)", mask)
    assert "tct.store(O_desc, tc_smem + 24576, (0, by, start + bx * 64)" in src
    assert "LSE[by, start + bx * 64 + i22] = l[" in src


def test_fp8_pooling_keeps_the_tail_out_of_the_mean():
    src = _body("fp8_block_mean_pool")
    assert "k1 = cutlass.min(k0 + 128, 1000)" in src
    assert "if r0 + i2 < 1000:" in src  # the copy's rows past the tensor read zeros
    assert re.search(r"if r0 \+ n_1_ >= k1:\s+rows\[[^\]]+\] = cutlass\.Float32\(0\.0\)", src)
    assert re.search(r'acc\[(\w+)\] = tcr\.combine\(acc\[\1\], tc_rows\d+\[\1\], "sum"\)', src)  # clear=False
    assert "cutlass.Float32(1.0) / cutlass.Float32(count)" in src
    assert "cute.arch.fmax(amax[0] * cutlass.Float32(0.002232142857142857), cutlass.Float32(1e-10))" in src
    assert "cutlass.Float8E4M3FN(acc[d_2_] / bs)" in src


def test_mhc_post_reads_the_mix_transposed():
    src = _body("mhc_post_mix")
    assert "c_l[i1 * 4 + i2] = comb[t, i1, i2]" in src  # (hc, hc) from the 3-d tensor's start
    assert "for hb in cutlass.range(0, 3):" in src  # gcd(768, 512) = 256 wide blocks
    assert re.search(r"o_l\[(\w+) \* 2 \+ (\w+)\] = tcr\.pick\(p_l, o, 4\) \* y_l\[\2\]", src)
    assert re.search(r"o_l\[(\w+) \* 2 \+ (\w+)\] = o_l\[\1 \* 2 \+ \2\] \+ tcr\.pick\(c_l, i \* 4 \+ o, 16\) "
                     r"\* r_l\[i \* 2 \+ \2\]", src)


def test_sinkhorn_bwd_reduces_rows_and_columns_of_each_matrix():
    src = _body("sinkhorn_bwd_richardson")
    # R v: buf[b, i, j] = R * v[b, j] (v read along j); R^T u: R * u[b, i]
    assert re.search(r"buf\[[^\]]+\] = R\[(\w+)\] \* tc_vec\d+\[\1\]", src)
    assert re.search(r"buf\[[^\]]+\] = R\[\w+\] \* x1\[b_2_ \* 4 \+ i_2_\]", src)
    # dim=-2: the column reduction reads buf transposed (j before i)
    assert re.search(r"buf_frag32\[(\w+)\] = buf\[\(i33\) \* 16 \+ \(i35 \+ \1\) \* 4 \+ \(i34 \^", src)
    assert "for u__ in cutlass.range(0, 8):" in src
    assert re.search(r"x1\[(\w+) \* 4 \+ (\w+)\] = x1\[\1 \* 4 \+ \2\] \+ cutlass\.Float32\(0\.25\) \* "
                     r"\(b1\[\1 \* 4 \+ \2\] - a1\[\1 \* 4 \+ \2\]\)", src)
    assert re.search(r"R\[(\w+)\] \* \(dR\[\1\] - x1\[b_5_ \* 4 \+ i_5_\] - tc_vec\d+\[\1\]\)", src)
    assert "tct.store(grad_desc, tc_smem + 0, (0, 0, bs * 16)" in src  # the tail tile clipped by TMA


# ---- on the GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
def test_mhc_pre_sinkhorn_on_gpu():
    tok, hc, hidden, ns = 37, 4, 512, 4
    pm = rounds.randn(ns, tok, hc * (2 + hc), scale=0.5)
    sq = torch.rand(ns, tok, device="cuda") * 500 + 100
    base = rounds.randn(hc * (2 + hc), scale=0.3)
    res = rounds.randn(tok, hc, hidden, dtype=bf16)
    post = torch.empty(tok, hc, device="cuda")
    comb = torch.empty(tok, hc * hc, device="cuda")
    li = torch.empty(tok, hidden, device="cuda", dtype=bf16)
    P.mhc_pre_sinkhorn(pm, sq, base, res, post, comb, li)
    rms = torch.rsqrt(sq.sum(0) / (hc * hidden) + 1e-6)
    mixes = pm.sum(0) * rms[:, None]
    rounds.close(post, torch.sigmoid(mixes[:, hc:2 * hc] + base[hc:2 * hc]) * 2.0, 1e-4)
    cm = torch.softmax((mixes[:, 2 * hc:] + base[2 * hc:]).view(tok, hc, hc), dim=2) + 1e-4
    for _ in range(3):
        cm = cm / (cm.sum(1, keepdim=True) + 1e-4)
        cm = cm / (cm.sum(2, keepdim=True) + 1e-4)
    rounds.close(comb, cm.reshape(tok, hc * hc), 1e-4)
    pre = torch.sigmoid(mixes[:, :hc] + base[:hc])
    rounds.close(li, (pre[:, :, None] * res.float()).sum(1), 2e-2)


@pytest.mark.gpu
def test_mhc_gemm_sqrsum_tf32_on_gpu():
    tok = 100
    x = rounds.randn(tok, 1024, dtype=bf16)
    fn = rounds.randn(24, 1024, scale=0.05)
    out = torch.empty(tok, 24, device="cuda")
    sq = torch.empty(tok, device="cuda")
    P.mhc_gemm_sqrsum_tf32(x, fn, out, sq)
    rounds.max_error_within(out, x.float() @ fn.T, 5e-3)  # tfloat32's 10-bit mantissa
    rounds.close(sq, (x.float() ** 2).sum(1), 1e-4)


@pytest.mark.gpu
def test_hadamard_shfl_on_gpu():
    H = torch.ones(1, 1, device="cuda")
    while H.shape[0] < 1024:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    A = rounds.randn(64, 1024)
    B = P.hadamard_shfl()(A)
    rounds.close(B, A @ H, 1e-3)


@pytest.mark.gpu
def test_block_causal_fwd_on_gpu():
    b, h, s, d = 2, 4, 512, 64
    Q, K, V = (rounds.randn(b, s, h, d, dtype=bf16) for _ in range(3))
    O, lse = P.block_causal_fwd()(Q, K, V)
    sc = torch.einsum("bshd,bthd->bhst", Q.float(), K.float()) * d ** -0.5
    blk = torch.arange(s, device="cuda") // 16
    sc = sc.masked_fill(blk[None, :] > blk[:, None], float("-inf"))
    want = torch.einsum("bhst,bthd->bshd", torch.softmax(sc, -1), V.float())
    rounds.close(O, want, 2e-2)
    rounds.close(lse, torch.logsumexp(sc, -1) / 0.6931471805599453, 1e-3)


@pytest.mark.gpu
def test_fp8_block_mean_pool_on_gpu():
    seq = 1000
    K = rounds.randn(seq, 128, scale=50.0).to(f8)
    ks = torch.rand(seq, device="cuda") + 0.5
    PK, PS = P.fp8_block_mean_pool(K, ks)
    want = torch.stack([(K[i:i + 128].float() * ks[i:i + 128, None]).mean(0)
                        for i in range(0, seq, 128)])
    bs = (want.abs().amax(1) / 448.0).clamp(min=1e-10)
    rounds.close(PS, bs, 1e-5)
    rounds.close(PK.float(), (want / bs[:, None]).to(f8).float(), 0.13)  # one e4m3 step


@pytest.mark.gpu
def test_mhc_post_mix_on_gpu():
    tok, hc, hidden = 37, 4, 768
    comb = torch.rand(tok, hc, hc, device="cuda")
    resid = rounds.randn(tok, hc, hidden, dtype=bf16)
    post = torch.rand(tok, hc, device="cuda") * 2
    y = rounds.randn(tok, hidden, dtype=bf16)
    out = torch.empty(tok, hc, hidden, device="cuda", dtype=bf16)
    P.mhc_post_mix(comb, resid, post, y, out)
    want = post[:, :, None] * y.float()[:, None, :] + torch.bmm(comb.mT, resid.float())
    rounds.close(out, want, 2e-2)


@pytest.mark.gpu
def test_sinkhorn_bwd_richardson_on_gpu():
    seq, n = 100, 4
    R = torch.softmax(rounds.randn(seq, n, n), -1)
    for _ in range(5):
        R = R / R.sum(1, keepdim=True)
        R = R / R.sum(2, keepdim=True)
    dR = rounds.randn(seq, n, n)
    got = P.sinkhorn_bwd_richardson(R, dR)
    b1, b2 = (R * dR).sum(2), (R * dR).sum(1)
    x1, x2 = torch.zeros_like(b1), torch.zeros_like(b2)
    for _ in range(8):
        a1 = x1 + (R * x2[:, None, :]).sum(2)
        a2 = x2 + (R * x1[:, :, None]).sum(1)
        x1, x2 = x1 + 0.25 * (b1 - a1), x2 + 0.25 * (b2 - a2)
    rounds.close(got, R * (dR - x1[:, :, None] - x2[:, None, :]), 1e-4)


@pytest.mark.gpu
def test_dllm_varlen_fwd_on_gpu():
    h, d, lens = 2, 64, [128, 384, 256]
    cu = torch.tensor([0, 128, 512, 768], device="cuda", dtype=torch.int32)
    Q, K, V = (rounds.randn(768, h, d, dtype=bf16) for _ in range(3))
    O, lse = P.dllm_varlen_fwd()(Q, K, V, cu, max(lens))
    for b, L in enumerate(lens):
        a, half = int(cu[b]), L // 2
        pos = torch.arange(L, device="cuda")
        noisy, blk = pos < half, (pos % half) // 16
        qn, kn = noisy[:, None], noisy[None, :]
        qb, kb = blk[:, None], blk[None, :]
        allowed = (qn & kn & (qb == kb)) | (qn & ~kn & (kb < qb)) | (~qn & ~kn & (kb <= qb))
        sc = torch.einsum("shd,thd->hst", Q[a:a + L].float(), K[a:a + L].float()) * d ** -0.5
        sc = sc.masked_fill(~allowed, float("-inf"))
        want = torch.einsum("hst,thd->shd", torch.softmax(sc, -1), V[a:a + L].float())
        rounds.close(O[a:a + L], want, 2e-2)
        rounds.close(lse[:, a:a + L], torch.logsumexp(sc, -1) / 0.6931471805599453, 1e-3)
