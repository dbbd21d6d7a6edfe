"""A forty-sixth set of programs in TileLang's idioms (tests/unseen_programs46.py): training
kernels -- RMSNorm backward (dx per row, dgamma partials per block in a workspace, reduced by a
second kernel), an erf-GELU backward with the bias gradient by column atomics, dropout forward /
backward with a Philox-2x32 hash on uint32 (the mask recomputed in the backward), a fused Adam
step (AMSGrad, AMP unscale, bias corrections as float32 arguments) over a T.dynamic-length
buffer, dW = X^T dY (T.gemm transpose_A, split-K over tokens, a tile T.atomic_add, or a TMA
reduce-add of a shared tile), cross-entropy backward from a saved LSE (label smoothing,
ignore_index) and weight-norm backward; dropout by T.rng_init / T.rng_rand with the mask packed
32 bits to a uint32 word and its backward from the packed mask; LayerNorm backward with dgamma /
dbeta added by atomics of the block's column sums; and a global gradient norm in one launch, the
last block to bump a counter (T.atomic_add return_prev, acq_rel) reducing every block's partial; and
GroupNorm backward channels-last over (tokens, groups, channels) fragments.

CPU: each builds to an sm_90a and an sm_80 cubin (the TMA reduce-add variant only sm_90a: on
sm_80 it is refused naming use_tma=True), and what decides its result is read in the
generated source.  All built and read right as first written but weight_norm_bwd with rows
300 wide in a (4, 300) fragment over 128 threads, which tilecute refuses naming T.reduce_sum
and the buffer -- TileLang 0.1.15's layout inference refuses it too ("no available layout
found"); the program keeps rows of 384.  So too grad_norm_last_block with a number of partials
that is not a power of two (24 over 128 threads): both refuse the reduce (TileLang: its
logical_width must be a power of two).  groupnorm_bwd_channels_last was refused: its
(block_T, G, Cg) fragments read as x[i, j // Cg, j % Cg] in a (block_T, C) nest were taken
as read across threads (replicated), and the nest filling them also walks a distributed
fragment; layout inference now takes the adjacent [e // c, e % c] pair as one index over both
dims (tests/test_fragment_split_dims.py), and both nests walk them in registers.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs46.py``)."""

import re

import pytest
import torch

import tilecute
from tilecute.transform.layout_inference import LayoutError
import rounds
import unseen_programs46 as P

f16, bf16 = torch.float16, torch.bfloat16

NAMES = ["adam_amsgrad_unscale", "ce_bwd_saved_lse", "dropout_curand_packed_mask", "dropout_packed_mask_bwd",
         "dropout_philox_bwd", "dropout_philox_fwd", "gelu_erf_bwd_bias_grad", "gemm_dw_transpose_a_splitk",
         "grad_norm_last_block", "groupnorm_bwd_channels_last", "layernorm_bwd_atomic_dgamma_dbeta",
         "rmsnorm_bwd_dx_partials", "rmsnorm_dgamma_reduce", "weight_norm_bwd"]

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")

test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


def _body(name, **kw):
    return rounds.kernel_body(getattr(P, name)(**kw))


# ---- what decides each result, in the generated source -----------------------------------------
def test_rmsnorm_bwd_sums_dgamma_over_the_block_rows_and_masks_the_tail():
    src = _body("rmsnorm_bwd_dx_partials")
    # the saved rstd of a row past M reads as 0 (no read past the end), so the row adds nothing
    assert re.search(r"if r < 100:\s+(\w+) = Rstd\[r\]\s+"
                     r"rs = cutlass\.select_\(r < 100, \1, cutlass\.Float32\(0\.0\)\)",
                     src)
    # dim-0 sum: each thread adds its column over the 8 rows it holds, no exchange
    assert re.search(r"dg\[(\w+)\] = cutlass\.Float32\(0\.0\)\s+for (\w+) in cutlass\.range_constexpr\(0, 8\):\s+"
                     r"dg\[\1\] = dg\[\1\] \+ prod\[\2 \* 4 \+ \1\]", src)
    # the row sum of dy * gamma * x by a block all-reduce, divided by N in dx
    assert 'tcr.block_allreduce(' in src and "rs * rs * rs * tcr.pick(dot, i_1_, 8) / cutlass.Float32(512.0)" in src
    assert "DgPart[bx, i7] = dg[" in src


def test_dgamma_reduce_accumulates_every_chunk():
    src = _body("rmsnorm_dgamma_reduce")
    loop = src.split("for k in cutlass.range(0, 4):", 1)[1]
    # clear=False: the chunk's column sums are added to acc, which is zeroed once before the loop
    assert re.search(r"acc\[(\w+)\] = tcr\.combine\(acc\[\1\], \w+\[\1\], \"sum\"\)", loop)
    assert "acc[i1] = cutlass.Float32(0.0)" in src.split("for k in", 1)[0]
    assert "= cutlass.Float32(0.0)" not in loop.split("cute.arch.sync_threads()")[2]
    # the ragged last chunk (13 rows) reads zeros
    assert re.search(r"if k \* 4 \+ i2 < 13:", loop)


def test_gelu_bwd_uses_erf_and_adds_each_column_once():
    src = _body("gelu_erf_bwd_bias_grad")
    assert "cute.math.erf(h[" in src and "cutlass.Float32(0.3989422804014327)" in src
    assert re.search(r"cutlass\.select_\(by \* 64 \+ i < 300, g\[", src)
    # the column sums stay in g's layout (helper CE: 8 threads x 8 columns each), so the
    # first 8 threads add each of the 64 columns once, 4 at a time
    assert re.search(r"T\.reduce_sum\(g, col, dim=0\): a row is 8 threads x 8 registers", src)
    assert re.search(r"(tc_f\d+) = tc_tid \* 8\n\s+if \1 < 64:\n\s+(\w+) = \1\n(.*\n){3}"
                     r"\s+tca\.atomic_add_view\(cute\.make_tensor\(DB\.iterator \+ cute\.assume\(bx \* 64 \+ \2, ", src)
    assert src.count("tca.atomic_add_view(") == 2 and "warp_allreduce(" in src


@pytest.mark.parametrize("name", ["dropout_philox_fwd", "dropout_philox_bwd"])
def test_philox_rounds_wrap_in_uint32(name):
    src = _body(name)
    rounds_ = src.split("for _r in cutlass.range_constexpr(0, 7):", 1)[1]
    assert "prod = cutlass.Uint64(ctr0[0]) * cutlass.Uint64(3528905107)" in rounds_
    assert "hi = cutlass.Uint32(prod >> cutlass.Uint64(32))" in rounds_ and "lo = cutlass.Uint32(prod)" in rounds_
    assert "ctr0[0] = hi ^ key[0] ^ ctr1[0]" in rounds_
    assert "key[0] = key[0] + cutlass.Uint32(2654435769)" in rounds_
    assert ("u = tcmath.reinterpret(ctr0[0] >> cutlass.Uint32(9) | cutlass.Uint32(1065353216), cutlass.Float32)"
            " - cutlass.Float32(1.0)") in src
    assert "ctr0[0] = cutlass.Uint32(e)" in src and "ctr1[0] = offset" in src and "key[0] = seed" in src
    assert re.search(r"seed: cutlass\.Uint32, offset: cutlass\.Uint32", src)


def test_dropout_fwd_scales_kept_values_in_half():
    src = _body("dropout_philox_fwd")
    assert "keep = u >= cutlass.Float32(0.25)" in src
    assert "Keep[e // 192, e - e // 192 * 192] = cutlass.Uint8(keep)" in src
    assert "cutlass.Float16(1.3330078125)" in src   # 1 / (1 - p) as float16, as TileLang's T.float16(scale)


def test_adam_takes_scalars_and_keeps_the_running_max():
    src = _body("adam_amsgrad_unscale")
    assert re.search(r"N: cutlass\.Int32, lr: cutlass\.Float32, .*bc1: cutlass\.Float32, bc2: cutlass\.Float32, "
                     r"inv_scale: cutlass\.Float32\)", src)
    assert "g = cutlass.Float32(G[k]) * inv_scale" in src
    assert "vm = cute.arch.fmax(Vmax[k], v)" in src and "Vmax[k] = vm" in src
    assert "P[k] = P[k] - lr * (m / bc1) / (cute.math.sqrt(vm / bc2) + eps)" in src
    assert "if k < N:" in src


@pytest.mark.parametrize("arch,family", [("sm_90a", "wgmma"), ("sm_80", "mma")])
def test_dw_gemm_reads_x_transposed_and_adds_the_tile(arch, family):
    src = rounds.source(P.gemm_dw_transpose_a_splitk.get_tir(), arch)
    # A is xs^T: an MN-major (K-rows) operand; B (ds, K x N) MN-major too
    assert f'tcm.tiled_mma("{family}", cutlass.Float16, cutlass.Float16, cutlass.Float32, True, True,' in src
    assert "# T.gemm(xs, ds, acc): acc += xs^T @ ds" in src
    assert f'tcm.operand(tc_smem + 0, cutlass.Float16, 32, 64, 128, True, "{family}")' in src
    # each split's tokens: 125 of them, the last tile masked to the split and to the 500 tokens
    assert "t0 = bz * 125 + t * 32" in src and "ok = t * 32 + i < 125 and t0 + i < 500" in src
    assert re.search(r"tca\.atomic_add(_view)?\(", src.split("T.gemm(xs, ds, acc)", 1)[1])


def test_dw_gemm_tma_reduce_stages_the_tile_and_adds_it_in_bulk(tmp_path):
    src = rounds.kernel_body(P.gemm_dw_transpose_a_splitk(tma_reduce=True))
    epi = src.split("T.gemm(xs, ds, acc): acc", 1)[1]
    assert "acc_s.iterator" in epi and "atomic_add" not in epi
    assert re.search(r"tct\.store_fence\(\)  # TMA reduce-store \(add\) of a 64x64 box of DW\s+"
                     r"cute\.arch\.sync_threads\(\)\s+"
                     r"if tc_tid == 0:\s+tct\.store_add\(DW_desc, tc_smem \+ 0, \(bx \* 64, by \* 64\)", epi)
    assert "tct.store_wait()" in epi
    with pytest.raises(Exception, match=r"unseen_programs46\.py:\d+: prim_func 'main': T\.atomic_add: use_tma=True "
                                        r"needs TMA \(a reduce-store, sm_90 or newer\); the target is sm_80"):
        tilecute.build_cubin(P.gemm_dw_transpose_a_splitk.get_tir(tma_reduce=True), "sm_80", out_dir=str(tmp_path))


def test_ce_bwd_compares_int64_labels_and_smooths():
    src = _body("ce_bwd_saved_lse")
    assert "hit = cutlass.select_(cutlass.Int64(col) == lab, cutlass.Float32(0.9), cutlass.Float32(0.0))" in src
    assert re.search(r"grad = \(cute\.math\.exp\(x\[\w+\] - \w+\) - hit - cutlass\.Float32\(0\.0001\)\) \* \w+", src)
    assert "cutlass.select_(lab == cutlass.Int64(-100), cutlass.Float32(0.0), grad)" in src
    assert "c * 256 + (i4 + tc_lane14) < 1000" in src   # the ragged last chunk of V = 1000


def test_weight_norm_bwd_reduces_two_row_sums():
    src = _body("weight_norm_bwd")
    assert src.count("tcr.block_allreduce(") == 2
    assert "DG[bx * 4 + i_2_] = tcr.pick(dot, i_2_, 4) * cute.math.rsqrt(tcr.pick(ss, i_2_, 4))" in src
    assert ("Gt[bx * 4 + i_3_] * cute.math.rsqrt(tcr.pick(ss, i_3_, 4)) * (dw[tc_k18] - tcr.pick(dot, i_3_, 4) "
            "* v[tc_k18] / tcr.pick(ss, i_3_, 4))") in src


def test_curand_dropout_packs_one_bit_per_draw():
    src = _body("dropout_curand_packed_mask")
    assert "tcrng.init(tc_rng, seed, cutlass.Int64(w), offset)" in src
    assert "keep = tcrng.rand(tc_rng) >= cutlass.Uint32(429496729)" in src   # p * 2^32, truncated
    assert "bits[0] = bits[0] | cutlass.Uint32(keep) << cutlass.Uint32(b)" in src
    # the word is stored once, after its 32 draws; the tail word's missing elements draw nothing
    assert re.search(r"if e < 63000:\s+keep = ", src) and re.search(r"\n        Mask\[w\] = bits\[0\]", src)


def test_packed_mask_bwd_reads_the_bit():
    src = _body("dropout_packed_mask_bwd")
    # (the word's load is guarded by the mask's 1969 words: 63000 elements end inside the last)
    assert re.search(r"if e < 63000:\s+(\w+) = cutlass\.Uint32\(0\)\s+if e // 32 < 1969:\s+"
                     r"\1 = cutlass\.Uint32\(Mask\[e // 32\]\)\s+"
                     r"bit = \1 >> cutlass\.Uint32\(e - e // 32 \* 32\) & cutlass\.Uint32\(1\)", src)
    assert "cutlass.Float32(DY[e]) * cutlass.Float32(bit) *" in src


def test_layernorm_bwd_adds_column_sums_by_atomics():
    src = _body("layernorm_bwd_atomic_dgamma_dbeta")
    assert re.search(r"dg\[(\w+)\] = dg\[\1\] \+ t\[\w+ \* 2 \+ \1\]", src)
    assert re.search(r"db\[(\w+)\] = db\[\1\] \+ dy\[\w+ \* 2 \+ \1\]", src)
    assert re.search(r"tca\.atomic_add\(DGamma, \(\w+,\), dg\[\w+\]\)", src)
    assert re.search(r"tca\.atomic_add\(DBeta, \(\w+,\), db\[\w+\]\)", src)
    # the column sums need every row of the tile: the atomics come after both dim-0 sums, and
    # the rows past M were zeroed (xhat by the mask, dy by the guarded load)
    assert src.index("atomic_add(DGamma") > src.index("db[")
    assert re.search(r"cutlass\.select_\(ok, \(xh\[\w+\] - \w+\) \* \w+, cutlass\.Float32\(0\.0\)\)", src)


def test_last_block_reduces_the_partials():
    src = _body("grad_norm_last_block")
    assert re.search(r"if tx == 0:\s+Part\[bx\] = s\[0\]\s+last\[0\] = tca\.atomic_fetch\(Counter, \(0,\), 1, \"add\", "
                     r"order=\"acq_rel\"\)\s+cute\.arch\.sync_threads\(\)\s+if last\[0\] == 31:", src)
    tail = src.split("if last[0] == 31:", 1)[1]
    # inside the block-uniform branch: every partial read, reduced by the whole block
    assert "Part.iterator" in tail and "tcr.grouped_rows(" in tail
    assert ("Out[1] = cute.arch.fmin(cutlass.Float32(1.0), cutlass.Float32(1.0) / "
            "(norm + cutlass.Float32(1e-06)))") in tail
    assert "Counter[0] = 0" in tail


def test_groupnorm_bwd_reads_the_3d_fragments_as_channel_rows():
    src = _body("groupnorm_bwd_channels_last")
    # x[i, j // Cg, j % Cg] in the (block_T, C) nest: the iteration's own register, as
    # TileLang lays it out (this program was refused before: x, dy taken as replicated)
    assert "x = cute.make_rmem_tensor((16,), cutlass.Float32)  # blocked" in src
    assert "dy = cute.make_rmem_tensor((16,), cutlass.Float32)  # blocked" in src
    assert re.search(r"xc\[(\w+)\] = x\[\1\] \* dy\[\1\]\s+dyc\[\1\] = dy\[\1\]", src)
    # per-group sums accumulate over the chunks (clear=False), per-channel ones too
    # (part, replicated, folded by each thread over its 16 token rows: s1[g] += part[t, g])
    assert re.search(r"s1\[(\w+)\] = s1\[\1\] \+ part\[\w+ \* 8 \+ \1\]", src)
    assert re.search(r"s2\[(\w+)\] = s2\[\1\] \+ part\[\w+ \* 8 \+ \1\]", src)
    assert re.search(r"dg\[0\] = dg\[0\] \+ xc\[\w+\]", src) and re.search(r"db\[0\] = db\[0\] \+ dyc\[\w+\]", src)
    assert "tcr.pick(s1, g_2_, 8) / cutlass.Float32(1600.0)" in src


def test_weight_norm_rows_of_300_are_refused_naming_the_reduce(tmp_path):
    # TileLang 0.1.15 refuses this too (LayoutInference: "no available layout found")
    with pytest.raises(LayoutError, match=r"unseen_programs46\.py:\d+: prim_func 'main': T\.reduce_sum: rows of 'sq' "
                                          r"have 300 elements, neither a multiple of the block's 128 threads"):
        tilecute.build_cubin(P.weight_norm_bwd.get_tir(I=300), "sm_90a", out_dir=str(tmp_path))


def test_last_block_partials_not_a_power_of_two_are_refused_naming_the_reduce(tmp_path):
    # 6000 / 256 -> 24 partials over 128 threads; TileLang 0.1.15 refuses it too ("XOR-butterfly
    # AllReduce requires logical_width ... to be a positive power of two, got 24")
    with pytest.raises(LayoutError, match=r"unseen_programs46\.py:\d+: prim_func 'main': T\.reduce_sum: rows of "
                                          r"'parts' have 24 elements, .*logical_width"):
        tilecute.build_cubin(P.grad_norm_last_block.get_tir(Ntot=6000), "sm_90a", out_dir=str(tmp_path))


# ---- on the GPU ---------------------------------------------------------------------------------
def _norm_bwd_inputs(M, N, dtype):
    """x and dy (M, N) in dtype, a float32 gamma, and float32 leaves of x and gamma for autograd."""
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    dy = torch.randn(M, N, device="cuda", dtype=dtype)
    gamma = torch.randn(N, device="cuda")
    return x, dy, gamma, x.float().requires_grad_(), gamma.clone().requires_grad_()


@pytest.mark.gpu
def test_rmsnorm_bwd_on_gpu():
    torch.manual_seed(0)
    M, N, eps = 100, 512, 1e-6
    x, dy, gamma, xf, g = _norm_bwd_inputs(M, N, bf16)
    rstd = torch.rsqrt(xf.detach().pow(2).mean(-1) + eps)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * g
    y.backward(dy.float())
    dx, part = P.rmsnorm_bwd_dx_partials()(x, dy, gamma, rstd)
    rounds.close(dx, xf.grad, 2e-2)
    dg = P.rmsnorm_dgamma_reduce()(part)
    rounds.close(dg, g.grad, 1e-3)


@pytest.mark.gpu
def test_gelu_erf_bwd_bias_grad_on_gpu():
    torch.manual_seed(1)
    h = torch.randn(300, 256, device="cuda", dtype=f16)
    dy = torch.randn(300, 256, device="cuda", dtype=f16)
    db = torch.zeros(256, device="cuda")
    dh = P.gelu_erf_bwd_bias_grad()(h, dy, db)
    hf = h.float().requires_grad_()
    torch.nn.functional.gelu(hf).backward(dy.float())
    rounds.close(dh, hf.grad, 2e-3)
    rounds.close(db, hf.grad.sum(0), 1e-3)


def _philox_uniform(n, offset, seed):
    """The reference Philox-2x32 (7 rounds) of counters 0..n-1 in numpy uint64 (wrapping)
    arithmetic, u in [0, 1) from the top 23 bits of the first word."""
    import numpy as np

    m32 = np.uint64(0xFFFFFFFF)
    c0 = np.arange(n, dtype=np.uint64)
    c1 = np.full(n, offset, dtype=np.uint64)
    key = np.uint64(seed)
    for _ in range(7):
        prod = c0 * np.uint64(0xD256D193)
        c0, c1 = (prod >> np.uint64(32)) ^ key ^ c1, prod & m32
        key = (key + np.uint64(0x9E3779B9)) & m32
    return torch.from_numpy((c0 >> np.uint64(9)).astype(np.float64) / float(1 << 23)).float()


@pytest.mark.gpu
def test_dropout_philox_on_gpu():
    torch.manual_seed(2)
    M, N, p, seed, offset = 100, 192, 0.25, 0xC0FFEE, 7
    x = torch.randn(M, N, device="cuda", dtype=f16)
    y, keep = P.dropout_philox_fwd()(x, seed, offset)
    ref_keep = (_philox_uniform(M * N, offset, seed) >= p).view(M, N).cuda()
    rounds.equal_on_cpu(keep.bool(), ref_keep)
    scale = torch.tensor(1 / (1 - p), dtype=f16)
    rounds.equal_on_cpu(y, torch.where(ref_keep, x * scale.cuda(), torch.zeros_like(x)))
    assert 0.7 < ref_keep.float().mean().item() < 0.8
    dy = torch.randn(M, N, device="cuda", dtype=f16)
    dx = P.dropout_philox_bwd()(dy, seed, offset)
    rounds.equal_on_cpu(dx, torch.where(ref_keep, dy * scale.cuda(), torch.zeros_like(dy)))


@pytest.mark.gpu
def test_adam_amsgrad_unscale_on_gpu():
    torch.manual_seed(3)
    N, lr, b1, b2, eps, step, loss_scale = 5000, 1e-2, 0.9, 0.999, 1e-8, 3, 1024.0
    p = torch.randn(N, device="cuda")
    g = (torch.randn(N, device="cuda") * loss_scale).to(f16)
    m, v = torch.randn(N, device="cuda") * 0.1, torch.rand(N, device="cuda") * 0.01
    vmax = v + torch.rand(N, device="cuda") * 0.01 * (torch.rand(N, device="cuda") > 0.5)
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    gf = g.float() / loss_scale
    rm, rv = b1 * m + (1 - b1) * gf, b2 * v + (1 - b2) * gf * gf
    rvmax = torch.maximum(vmax, rv)
    rp = p - lr * (rm / bc1) / ((rvmax / bc2).sqrt() + eps)
    P.adam_amsgrad_unscale()(p, g, m, v, vmax, lr, b1, b2, eps, bc1, bc2, 1 / loss_scale)
    for got, want in ((m, rm), (v, rv), (vmax, rvmax), (p, rp)):
        rounds.close(got, want, 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("tma_reduce", [False, True])
def test_gemm_dw_transpose_a_splitk_on_gpu(tma_reduce):
    torch.manual_seed(4)
    x = torch.randn(500, 128, device="cuda", dtype=f16)
    dy = torch.randn(500, 192, device="cuda", dtype=f16)
    dw = torch.zeros(128, 192, device="cuda")
    P.gemm_dw_transpose_a_splitk(tma_reduce=tma_reduce)(x, dy, dw)
    rounds.close(dw, x.float().T @ dy.float(), 1e-2)


@pytest.mark.gpu
def test_ce_bwd_saved_lse_on_gpu():
    torch.manual_seed(5)
    M, V, s = 127, 1000, 0.1
    logits = torch.randn(M, V, device="cuda", dtype=bf16) * 3
    labels = torch.randint(0, V, (M,), device="cuda", dtype=torch.int64)
    labels[::7] = -100
    dloss = torch.rand(M, device="cuda")
    lse = torch.logsumexp(logits.float(), -1)
    dlogits = P.ce_bwd_saved_lse()(logits, lse, labels, dloss)
    lf = logits.float().requires_grad_()
    loss = torch.nn.functional.cross_entropy(lf, labels, ignore_index=-100, label_smoothing=s, reduction="none")
    loss.backward(dloss)
    rounds.close(dlogits, lf.grad, 1e-2)


@pytest.mark.gpu
def test_weight_norm_bwd_on_gpu():
    torch.manual_seed(6)
    O, I = 96, 384
    v = torch.randn(O, I, device="cuda").requires_grad_()
    g = (torch.rand(O, device="cuda") + 0.5).requires_grad_()
    dw = torch.randn(O, I, device="cuda")
    (g[:, None] * v / v.norm(dim=1, keepdim=True)).backward(dw)
    dg, dv = P.weight_norm_bwd()(dw, v.detach(), g.detach())
    rounds.close(dg, g.grad, 1e-4)
    rounds.close(dv, v.grad, 1e-4)


@pytest.mark.gpu
def test_dropout_curand_packed_mask_on_gpu():
    from test_rng import draws

    torch.manual_seed(7)
    M, N, p, seed, offset = 63, 1000, 0.1, 20261130, 12
    total, words = M * N, -(-M * N // 32)
    x = torch.randn(total, device="cuda", dtype=bf16)
    y, mask = P.dropout_curand_packed_mask()(x, seed, offset)
    thresh = int(p * 4294967296.0)
    keep = torch.tensor([[d >= thresh for d in draws(seed, w, offset, 32)] for w in range(words)]).view(-1)[:total]
    ref_mask = torch.zeros(words * 32, dtype=torch.int64)
    ref_mask[:total] = keep.long()
    ref_words = (ref_mask.view(words, 32) << torch.arange(32)).sum(1)
    rounds.equal_on_cpu(mask.view(torch.int32).long() & 0xFFFFFFFF, ref_words)
    keep = keep.cuda()
    rounds.equal_on_cpu(y, torch.where(keep, (x.float() * (1 / (1 - p))).to(bf16), torch.zeros_like(x)))
    dy = torch.randn(total, device="cuda", dtype=bf16)
    dx = P.dropout_packed_mask_bwd()(dy, mask)
    rounds.equal_on_cpu(dx, torch.where(keep, (dy.float() * (1 / (1 - p))).to(bf16), torch.zeros_like(dy)))


@pytest.mark.gpu
def test_layernorm_bwd_atomic_dgamma_dbeta_on_gpu():
    torch.manual_seed(8)
    M, N, eps = 200, 256, 1e-5
    x, dy, gamma, xf, g = _norm_bwd_inputs(M, N, f16)
    b = torch.zeros(N, device="cuda", requires_grad=True)
    torch.nn.functional.layer_norm(xf, (N,), g, b, eps).backward(dy.float())
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + eps)
    dgam, dbet = torch.zeros(N, device="cuda"), torch.zeros(N, device="cuda")
    dx = P.layernorm_bwd_atomic_dgamma_dbeta()(x, dy, gamma, mean, rstd, dgam, dbet)
    rounds.close(dx, xf.grad, 1e-2)
    rounds.close(dgam, g.grad, 1e-3)
    rounds.close(dbet, b.grad, 1e-3)


@pytest.mark.gpu
def test_grad_norm_last_block_on_gpu():
    torch.manual_seed(9)
    g = torch.randn(8000, device="cuda") * 0.05
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    kernel = P.grad_norm_last_block()
    for _ in range(2):  # the counter is reset for the next launch
        part, out = kernel(g, counter)
        norm = g.norm()
        rounds.close(out[0], norm, 1e-5)
        rounds.close(out[1], torch.clamp(1.0 / (norm + 1e-6), max=1.0), 1e-5)
        assert counter.item() == 0
        g = g * 10


@pytest.mark.gpu
def test_groupnorm_bwd_channels_last_on_gpu():
    torch.manual_seed(10)
    B, HW, G, Cg, eps = 2, 100, 8, 16, 1e-5
    C = G * Cg
    x = torch.randn(B, HW, C, device="cuda")
    dy = torch.randn(B, HW, C, device="cuda")
    gamma = torch.randn(C, device="cuda")
    xg = x.view(B, HW, G, Cg)
    mean = xg.mean(dim=(1, 3))
    rstd = torch.rsqrt(xg.var(dim=(1, 3), unbiased=False) + eps)
    xf = x.clone().requires_grad_()
    g = gamma.clone().requires_grad_()
    beta = torch.zeros(C, device="cuda", requires_grad=True)
    y = torch.nn.functional.group_norm(xf.permute(0, 2, 1), G, g, beta, eps)  # (B, C, HW)
    y.backward(dy.permute(0, 2, 1))
    dx, dgp, dbp = P.groupnorm_bwd_channels_last()(x, dy, gamma, mean, rstd)
    rounds.close(dx, xf.grad, 1e-4)
    rounds.close(dgp.sum(0), g.grad, 1e-4)
    rounds.close(dbp.sum(0), beta.grad, 1e-4)
