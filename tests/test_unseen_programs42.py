"""A forty-second set of programs in TileLang's idioms (tests/unseen_programs42.py): kernels in
the ways TileLang is used outside its own repository -- per-group fp8 quantization with
power-of-two scales from the float's bits, an im2col convolution through a flat view of the
weights (jit stacked on the prim_func), a direct convolution with Python range loops and
chained comparisons (tilelang.compile), warp-per-row L2 / group norms built per dtype, a GEMV
macro with a keyword-only output and a plain Python epilogue helper given a tensor, a
bitonic top-k in a T.SharedBuffer macro, Sinkhorn normalization of 4 x 4 fragments, sparse
attention over gathered KV rows with a sink, a split-KV combine by log-sum-exps, fp8 index
scores, e4m3 bytes in uint32 words decoded by bit arithmetic, an eager-form RMSNorm, split-K
with paired atomics, a tutorial row-per-thread GEMV with no threads=, a block-scaled fp8
GEMM, an in-place shared cumsum, and the gathered attention again warp-specialized (a
producer warpgroup filling two KV slots handed over on mbarriers, T.set_max_nreg, wg_wait=-1
with T.wait_wgmma, one macro per role given its buffers and a tuple of state).

CPU: each builds to an sm_90a cubin (and to sm_80 but the three on float8 operands, which
convert only on sm_89+ in tilecute as in TileLang, and the warp-specialized one, whose
setmaxnreg is sm_90a's), and what decides its result is read in the generated source.  All built as first written but the GEMV's epilogue: a plain Python
helper called in an expression with a tensor argument (`epilogue(acc[i], extra, idx)`,
TileLang runs it as Python on the buffer) was refused ("buffer 'extra' passed to ...");
tilecute now inlines such a helper as a T.macro (tests/test_python_helper_values.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs42.py``)."""

import math
import re

import pytest
import torch

import tilecute
import unseen_programs42 as P

FACTORIES = ["group_quant_pow2", "windowed_topk_softmax", "sigmoid_sinkhorn",
             "gathered_kv_attention", "combine_partials_lse", "fp8_index_scores",
             "packed_e4m3_rows_to_bf16", "fp8_block_scaled_gemm", "row_cumsum_shared",
             "gemv_relu_sq_residual", "producer_consumer_gathered_attention"]
BUILDERS = ["build_im2col_conv_gelu", "build_direct_conv_hardtanh", "build_split_k_gemm",
            "build_rowwise_gemv"]
PER_HEADS = ["l2norm_rows", "groupnorm_rows"]  # jit factories of the head count H
FLOAT8 = {"group_quant_pow2", "fp8_index_scores", "fp8_block_scaled_gemm"}
HOPPER = {"producer_consumer_gathered_attention"}  # T.set_max_nreg: setmaxnreg is sm_90a's


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def _kernel(name, **kw):
    if name in BUILDERS:
        return getattr(P, name)(**kw)
    if name in PER_HEADS:
        return getattr(P, name)(8, **kw)
    if name == "eager_rmsnorm":
        return P.eager_rmsnorm.compile(M=64, N=256)
    return getattr(P, name)(**kw)


def _body(name, **kw):
    """The @cute.kernel function's text (not the launch wrapper)."""
    src = _kernel(name, **kw).get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def test_every_program_is_listed():
    assert sorted(FACTORIES + PER_HEADS + ["eager_rmsnorm"]) == \
        sorted(n for n in dir(P) if hasattr(getattr(P, n), "get_tir"))
    assert sorted(BUILDERS) == sorted(n for n in dir(P) if n.startswith("build_") and
                                      n != "build_row_kernels")


@pytest.mark.parametrize("name", FACTORIES + BUILDERS + PER_HEADS + ["eager_rmsnorm"])
def test_program_builds_a_cubin(name):
    assert _kernel(name).ensure_cubin()


@pytest.mark.parametrize("name", [n for n in FACTORIES if n not in FLOAT8 | HOPPER])
def test_program_builds_an_sm80_cubin(name, tmp_path):
    assert tilecute.build_cubin(getattr(P, name).get_tir(), "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("name", BUILDERS)
def test_builder_builds_an_sm80_cubin(name):
    assert getattr(P, name)(target="sm_80").ensure_cubin()


@pytest.mark.parametrize("name", PER_HEADS)
def test_per_head_kernel_builds_an_sm80_cubin(name, tmp_path):
    assert tilecute.build_cubin(getattr(P, name).get_tir(8), "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("name", sorted(FLOAT8))
def test_float8_programs_are_refused_for_sm80_by_name(name, tmp_path):
    with pytest.raises(Exception, match=r"float8 values convert only on sm_89\+.*sm_80"):
        tilecute.build_cubin(getattr(P, name).get_tir(), "sm_80", out_dir=str(tmp_path))


def test_setmaxnreg_program_is_refused_for_sm80_by_name(tmp_path):
    with pytest.raises(Exception, match=r"T\.set_max_nreg .* an sm_90a instruction; the target is sm_80"):
        tilecute.build_cubin(P.producer_consumer_gathered_attention.get_tir(), "sm_80",
                             out_dir=str(tmp_path))


def test_pow2_scale_from_the_bits():
    src = _body("group_quant_pow2")
    # ceil(log2(amax / 448)): exponent - 127 (+1 when a mantissa bit is set), then 2^e as bits
    assert ">> cutlass.Uint32(23) & cutlass.Uint32(255)) - cutlass.Uint32(127)" in src
    assert "& cutlass.Uint32(8388607) != cutlass.Uint32(0), 1, 0)" in src
    assert re.search(r"tcmath\.reinterpret\(cutlass\.Int32\(.*\) \+ 127 << 23, cutlass\.Float32\)", src)
    assert "cute.arch.fmin(cute.arch.fmax(cutlass.Float32(x_f[tc_lane21]) / tc_rows19[0], " \
           "cutlass.Float32(-448.0)), cutlass.Float32(448.0))" in src
    plain = _body("group_quant_pow2", pow2_scale=False)
    assert "reinterpret" not in plain and "* cutlass.Float32(0.002232142857142857)" in plain


def test_im2col_reads_the_flat_weight_view():
    src = _body("build_im2col_conv_gelu")
    assert "w_flat = cute.make_tensor(w_ptr, cute.make_layout((144, 48,), stride=(48, 1,)))" in src
    assert "inside = p < 112 and r < 144" in src
    assert "tc_ld9 = x[n, oh + kh, ow + kw, r - r // 16 * 16]" in src
    assert "cute.math.erf(v * cutlass.Float32(0.7071067811865475))" in src


def test_direct_conv_range_loops_and_chained_bounds():
    src = _body("build_direct_conv_hardtanh")
    assert "for ic in cutlass.range(0, 3):" in src and "for kw in cutlass.range(0, 3):" in src
    assert "if 0 <= hi and hi < 12 and 0 <= wi and wi < 11:" in src
    assert "acc[0] = cutlass.Float32(B[oc])" in src
    assert "cute.arch.fmin(cute.arch.fmax(acc[0], cutlass.Float32(-1.0)), cutlass.Float32(1.0))" in src


def test_warp_rows_reduce_across_the_warp():
    src = _body("l2norm_rows")
    assert "lane = tc_tx" in src and "total = tcr.warp_allreduce(part[0], \"sum\", 32)" in src
    assert "den = cute.arch.fmax(cute.math.sqrt(total), cutlass.Float32(1e-12))" in src
    gn = _body("groupnorm_rows")
    assert 'mean = tcr.warp_allreduce(s[0], "sum", 32) / cutlass.Float32(128.0)' in gn
    assert "cutlass.Float32(1e-05)" in gn


def test_gemv_epilogue_helper_reads_the_extra_tensor():
    src = _body("gemv_relu_sq_residual")
    assert "r_1_ = cute.arch.fmax(acc[tc_lane9], cutlass.Float32(0.0))" in src
    assert "val = r_1_ * r_1_ + cutlass.Float32(tc_vec7[tc_lane9])" in src
    assert "tc_vec7.store(cute.make_tensor(r.iterator" in src  # the residual, 8 at a time


def test_topk_sort_swaps_pairs_and_keeps_the_head():
    src = _body("windowed_topk_softmax")
    assert "up = i_1_ & 1 << s1 + 1 != 0" in src and "j = i_1_ ^ 1 << s1 - s2" in src
    assert "if i_1_ < j and (up and val_s[i_1_] > tc_ld6 or not up and val_s[i_1_] < tc_ld6):" in src
    assert "lo = Bounds[bx, 0]" in src and "hi = Bounds[bx, 1]" in src
    assert 'T.reduce_max(p, best)' in src and 'T.reduce_sum(p, total)' in src


def test_sinkhorn_reduces_rows_then_columns():
    src = _body("sigmoid_sinkhorn")
    assert "cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(cutlass.Float32(0.0) - " \
           "(tc_vec3[tc_lane5] * scale[0] + tc_vec4[tc_lane5]))) + cutlass.Float32(1e-06)" in src
    rounds = src.split("for u__ in cutlass.range(0, 6):", 1)[1]  # `for _ in T.serial(iters)`
    assert rounds.index("T.reduce_sum(m, row)") < rounds.index("T.reduce_sum(m_frag1, col)")


def test_gathered_rows_masked_and_sink_added():
    src = _body("gathered_kv_attention")
    assert "cutlass.max(Indices[b_i, s_i, r_1_], 0) * 64 + d" in src  # the gathered row
    assert 'cutlass.select_(mask[tcrow.col_of(acc_s, tc_r19 + tc_lane20)], cutlass.Float32(0.0), ' \
           'cutlass.Float32(float("-inf")))' in src
    assert "cutlass.Float32(-1073741824.0)" in src  # -(2**30), not -inf
    assert "cute.math.exp2(Sink[" in src and "cutlass.Float32(1.44269504)" in src


def test_producer_and_consumer_hand_slots_over_on_mbarriers():
    src = _body("producer_consumer_gathered_attention")
    consumer, producer = src.split("if tc_tid < 128:", 1)[1].split("if tc_tid >= 128:", 1)
    assert "cute.arch.setmaxregister_increase(240)" in consumer
    assert "cute.arch.setmaxregister_decrease(80)" in producer
    # the consumer waits for each slot, its QK^T is waited for by T.wait_wgmma, it frees the slot
    assert consumer.index("tct.wait(ready0, i & 1)") < consumer.index("wait=None)") < \
        consumer.index("tcm.wait_batches(0)") < consumer.index("tct.arrive(free0)") < \
        consumer.index("tct.wait(ready1, i & 1)") < consumer.index("tct.arrive(free1)")
    # the producer waits for a free slot (first pass: the phase before), fills it, arrives
    assert producer.index("tct.wait(free0, i_1_ & 1 ^ 1)") < \
        producer.index("cute.arch.cp_async_mbarrier_arrive_noinc(ready0)") < \
        producer.index("tct.wait(free1, i_1_ & 1 ^ 1)") < \
        producer.index("cute.arch.cp_async_mbarrier_arrive_noinc(ready1)")
    assert "ok0[row] = cutlass.Uint8(idx_now[0] >= 0)" in producer
    # the output is staged in Q's tile (O_s = Q_s), after the last QK^T has read it
    assert "cute.make_tensor(Q_s.iterator + cute.assume((i13 * 64 + i14)" in consumer


def test_combine_weights_by_lse():
    src = _body("combine_partials_lse")
    assert "tc_ld2 = Partial_Lse[s_i, k, H0 + i1]" in src
    assert "cute.math.exp2(lse_s[k_3_ * 8 + h_2_] - lse_max[h_2_] - cute.math.log2(lse_sum[h_2_]))" in src


def test_fp8_index_gemm_and_clear_forms():
    src = _body("fp8_index_scores")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32' in src
    assert "k_s_frag" in src and "logits" in src
    kept = _body("fp8_index_scores", clear_accum=False)
    fill = kept.index("logits[tc_r17 + tc_lane18] = cutlass.Float32(0.0)")
    assert fill < kept.index("# T.gemm(k_smem, q_smem, logits): logits += k_smem @ q_smem^T")


def test_packed_bytes_decode_by_bits():
    src = _body("packed_e4m3_rows_to_bf16")
    assert "limit = Count[0]" in src and "live[r_1_] = row < n and row < limit" in src
    assert "tcmath.reinterpret(cutlass.Uint16(bits), cutlass.BFloat16)" in src
    assert "RowExp[cutlass.min(bx * 32 + r_2_, n - 1)]" in src


def test_eager_rmsnorm_binds_consts():
    src = _body("eager_rmsnorm")
    assert "X = cute.make_tensor(X_ptr, cute.make_layout((64, 256,), stride=(256, 1,)))" in src
    assert "cute.math.rsqrt(tcr.pick(ssum, i_1_, 16) / cutlass.Float32(256.0) + " \
           "cutlass.Float32(1e-06))" in src


def test_split_k_adds_pairs_atomically():
    src = _body("build_split_k_gemm")
    assert "tca.atomic_add(C, (m, n), C_s[i * 64 + j * 2])" in src
    assert "tca.atomic_add(C, (m, n + 1), C_s[i * 64 + j * 2 + 1])" in src
    assert "panel_rows" in src  # T.use_swizzle(10)


def test_rowwise_gemv_default_threads():
    src = _body("build_rowwise_gemv")
    assert "A_s[tm * 64 + tk] = A[bm * 128 + tm, bk * 64 + tk]" in src
    assert "y[bm * 128 + tm] = cutlass.Float16(c[0])" in src


def test_block_scaled_fp8_gemm_scales_each_group():
    src = _body("fp8_block_scaled_gemm")
    assert "b_scale = sb[bx_1_ * 128 // 128, k]" in src
    assert "row_scale[i] = tc_ld32 * b_scale" in src


def test_cumsum_in_place():
    src = _body("row_cumsum_shared")
    assert "# T.cumsum(row, row, dim=0)" in src and "tcs.warp_inclusive_scan" in src


# ---- GPU -------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_group_quant_pow2_on_gpu():
    X = (torch.randn(200, 512, device="cuda") * 3).bfloat16()
    for pow2 in (True, False):
        Y = torch.empty(200, 512, device="cuda", dtype=torch.float8_e4m3fn)
        S = torch.empty(200, 4, device="cuda")
        P.group_quant_pow2(pow2_scale=pow2)(X, Y, S)
        amax = X.float().view(200, 4, 128).abs().amax(-1).clamp_min(1e-4)
        s = torch.pow(2.0, torch.ceil(torch.log2(amax / 448.0))) if pow2 else amax / 448.0
        torch.testing.assert_close(S, s)
        ref = (X.float().view(200, 4, 128) / s[..., None]).clamp(-448, 448).view(200, 512)
        torch.testing.assert_close(Y.float(), ref.to(torch.float8_e4m3fn).float())


@pytest.mark.gpu
def test_im2col_conv_gelu_on_gpu():
    x = torch.randn(2, 10, 9, 16, device="cuda").half()
    w = torch.randn(3, 3, 16, 48, device="cuda").half() * 0.1
    b = torch.randn(48, device="cuda").half()
    out = P.build_im2col_conv_gelu()(x, w, b)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(),
                                     b.float())
    ref = torch.nn.functional.gelu(ref).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_direct_conv_hardtanh_on_gpu():
    X = torch.randn(2, 3, 12, 11, device="cuda").half()
    Wt = torch.randn(5, 3, 3, 3, device="cuda").half() * 0.3
    B = torch.randn(5, device="cuda").half() * 0.1
    Y = P.build_direct_conv_hardtanh()(X, Wt, B)
    ref = torch.nn.functional.conv2d(X.float(), Wt.float(), B.float(), padding=1).clamp(-1, 1)
    torch.testing.assert_close(Y.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_warp_row_norms_on_gpu():
    x = torch.randn(8, 128, device="cuda").half()
    ref = x.float() / x.float().norm(dim=1, keepdim=True).clamp_min(1e-12)
    torch.testing.assert_close(P.l2norm_rows(8)(x).float(), ref, rtol=1e-3, atol=1e-3)
    g, be = torch.randn(8 * 128, device="cuda").half(), torch.randn(8 * 128, device="cuda").half()
    y = P.groupnorm_rows(8)(x, g, be)
    ref = torch.nn.functional.group_norm(x.float().reshape(1, -1), 8, g.float(), be.float(), 1e-5)
    torch.testing.assert_close(y.float(), ref.reshape(-1), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gemv_relu_sq_residual_on_gpu():
    x = torch.randn(96, device="cuda").half()
    W = torch.randn(96, 256, device="cuda").half() * 0.1
    r = torch.randn(256, device="cuda").half()
    out = P.gemv_relu_sq_residual()(x, W, r)
    v = x.float() @ W.float()
    torch.testing.assert_close(out.float(), v.clamp_min(0) ** 2 + r.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_windowed_topk_softmax_on_gpu():
    rows = 5
    S = torch.randn(rows, 256, device="cuda")
    bounds = torch.tensor([[0, 256], [10, 200], [100, 120], [0, 40], [250, 256]],
                          device="cuda", dtype=torch.int32)
    idx, prob = P.windowed_topk_softmax()(S, bounds)
    for r in range(rows):
        lo, hi = bounds[r].tolist()
        k = min(32, hi - lo)
        vals, ref_idx = torch.topk(S[r, lo:hi], k)
        assert set(idx[r, :k].tolist()) == set((ref_idx + lo).tolist())
        assert (idx[r, k:] == -1).all()
        torch.testing.assert_close(prob[r, :k], torch.softmax(vals, 0))
        assert (prob[r, k:] == 0).all()


@pytest.mark.gpu
def test_sigmoid_sinkhorn_on_gpu():
    n = 37
    lg, sc, bi = torch.randn(n, 16, device="cuda"), torch.rand(1, device="cuda"), torch.randn(16, device="cuda")
    out = P.sigmoid_sinkhorn()(lg, sc, bi)
    m = torch.sigmoid(lg * sc + bi).view(n, 4, 4) + 1e-6
    for _ in range(6):
        m = m / (m.sum(2, keepdim=True) + 1e-6)
        m = m / (m.sum(1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out, m)


@pytest.mark.gpu
def test_gathered_kv_attention_on_gpu():
    B, S, SKV, H, D, K = 2, 3, 300, 16, 64, 128
    Q = torch.randn(B, S, H, D, device="cuda").bfloat16()
    KV = torch.randn(B, SKV, D, device="cuda").bfloat16()
    ind = torch.randint(0, SKV, (B, S, K), device="cuda", dtype=torch.int32)
    ind[..., 100:] = -1
    sink = torch.randn(H, device="cuda")
    out = P.gathered_kv_attention()(Q, KV, ind, sink)
    kv = torch.stack([KV[b][ind[b].clamp_min(0).long()] for b in range(B)]).float()  # B S K D
    s = torch.einsum("bshd,bskd->bshk", Q.float(), kv) / math.sqrt(D)
    s = s.masked_fill((ind < 0)[:, :, None, :], float("-inf"))
    mx = s.amax(-1, keepdim=True)
    p = torch.exp(s - mx)
    den = p.sum(-1, keepdim=True) + torch.exp(sink[None, None, :, None] - mx)
    ref = torch.einsum("bshk,bskd->bshd", p / den, kv)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_producer_consumer_gathered_attention_on_gpu():
    S, SKV, H, D, K = 5, 1000, 64, 64, 256
    Q = torch.randn(S, H, D, device="cuda").bfloat16()
    KV = torch.randn(SKV, D, device="cuda").bfloat16()
    ind = torch.randint(0, SKV, (S, K), device="cuda", dtype=torch.int32)
    ind[:, 200:] = -1
    ind[1, 5:70] = -1  # a whole slot but for a few rows
    out = P.producer_consumer_gathered_attention()(Q, KV, ind)
    kv = KV[ind.clamp_min(0).long()].float()  # S K D
    s = torch.einsum("shd,skd->shk", Q.float(), kv) / math.sqrt(D)
    s = s.masked_fill((ind < 0)[:, None, :], float("-inf"))
    ref = torch.einsum("shk,skd->shd", torch.softmax(s, -1), kv)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_combine_partials_lse_on_gpu():
    S = 7
    O = torch.randn(S, 4, 16, 128, device="cuda").bfloat16()
    L = torch.randn(S, 4, 16, device="cuda") * 3
    out = P.combine_partials_lse()(O, L)
    w = torch.softmax(L * math.log(2), dim=1)  # 2^lse_k / sum 2^lse
    ref = (w[..., None] * O.float()).sum(1)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_fp8_index_scores_on_gpu():
    b, m, n, h, d = 2, 3, 300, 16, 64
    q = torch.randn(b, m, h, d, device="cuda").to(torch.float8_e4m3fn)
    k = torch.randn(b, n, d, device="cuda").to(torch.float8_e4m3fn)
    q_s, k_s = torch.rand(b, m, h, device="cuda"), torch.rand(b, n, device="cuda")
    ref = (torch.einsum("bmhd,bnd->bmnh", q.float(), k.float()).clamp_min(0)
           * q_s[:, :, None, :]).sum(-1) * k_s[:, None, :]
    for clear in (True, False):
        o = P.fp8_index_scores(clear_accum=clear)(q, q_s, k, k_s)
        torch.testing.assert_close(o, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_packed_e4m3_rows_to_bf16_on_gpu():
    n = 70
    vals = torch.randn(n, 128, device="cuda").to(torch.float8_e4m3fn)
    bytes_ = vals.view(torch.uint8)
    bytes_ = torch.where((bytes_ & 0x78) == 0, bytes_ | 0x08, bytes_)  # normal values only
    vals = bytes_.view(torch.float8_e4m3fn)
    row_exp = torch.randint(120, 131, (n,), device="cuda", dtype=torch.int32)
    packed = bytes_.view(torch.int32)  # four bytes a word, the first in the low byte
    count = torch.tensor([61], device="cuda", dtype=torch.int32)
    out = P.packed_e4m3_rows_to_bf16()(packed.view(torch.uint32) if hasattr(torch, "uint32") else packed,
                                       row_exp.view(torch.uint32) if hasattr(torch, "uint32") else row_exp,
                                       count)
    ref = vals.float() * torch.pow(2.0, row_exp.float() - 127)[:, None]
    ref[61:] = 0
    torch.testing.assert_close(out.float(), ref.bfloat16().float())


@pytest.mark.gpu
def test_eager_rmsnorm_on_gpu():
    X = torch.randn(64, 256, device="cuda").half()
    w = torch.randn(256, device="cuda").half()
    O = P.eager_rmsnorm(X, w)
    ref = X.float() * torch.rsqrt(X.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(O.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_split_k_gemm_on_gpu():
    A = torch.randn(256, 512, device="cuda").half() * 0.1
    B = torch.randn(512, 192, device="cuda").half() * 0.1
    C = torch.zeros(256, 192, device="cuda").half()
    P.build_split_k_gemm()(A, B, C)
    torch.testing.assert_close(C.float(), A.float() @ B.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_rowwise_gemv_on_gpu():
    A = torch.randn(512, 384, device="cuda").half()
    x = torch.randn(384, device="cuda").half()
    y = P.build_rowwise_gemv()(A, x)
    torch.testing.assert_close(y.float(), A.float() @ x.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.gpu
def test_fp8_block_scaled_gemm_on_gpu():
    M, N, K = 100, 256, 512
    A = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    B = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    sa, sb = torch.rand(M, 4, device="cuda"), torch.rand(2, 4, device="cuda")
    C = torch.empty(M, N, device="cuda").bfloat16()
    P.fp8_block_scaled_gemm()(A, B, C, sa, sb)
    a = A.float().view(M, 4, 128) * sa[:, :, None]
    b = B.float().view(N, 4, 128) * sb.repeat_interleave(128, 0)[:, :, None]
    ref = torch.einsum("mgk,ngk->mn", a, b)
    torch.testing.assert_close(C.float(), ref, rtol=2e-2, atol=2e-1)


@pytest.mark.gpu
def test_row_cumsum_shared_on_gpu():
    X = torch.randn(16, 512, device="cuda")
    torch.testing.assert_close(P.row_cumsum_shared()(X), torch.cumsum(X, 1), rtol=1e-4, atol=1e-3)
