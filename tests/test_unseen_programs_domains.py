"""Programs from the domains TileLang's users write kernels in (tests/unseen_programs_domains.py):
chunked linear attention, MoE, sparse / paged / split-KV attention, implicit-GEMM
convolution, dequantizing and block-scaled GEMMs, normalization backward, cross-entropy,
rotary embedding, sampling helpers and radix counting.  Each builds to an sm_90a cubin on
the CPU and, on a GPU, matches torch.  The fix they led to has its focused test with its
subject (tests/test_tvm_tirx_dequant.py: `==` in a plain Python helper is TVM's EqualOp)."""

import math

import pytest

import tilecute

import rounds
import unseen_programs_domains as P

PROGRAMS = ["chunk_cumsum_gates", "chunk_gla_fwd", "chunk_delta_h", "chunk_kkt_beta",
            "wy_bwd_dk_dbeta",
            "moe_grouped_gemm", "moe_permute_gather", "moe_scatter_combine",
            "moe_gather_combine", "topk_gating_softmax", "moe_align_block_size",
            "block_sparse_attn", "block_index_attn", "paged_decode_gqa", "split_kv_decode",
            "conv2d_im2col", "conv2d_rect_gather", "dequant_uint4_zp_gemm",
            "dequant_fp4_mx_gemm", "fp8_blockscale_gemm", "layernorm_bwd", "rmsnorm_bwd",
            "cross_entropy_fwd", "rotary_embedding", "top_p_renorm", "topk_threshold_mask",
            "radix_digit_counts"]


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


def test_variants_build(tmp_path):
    for i, func in enumerate([P.chunk_cumsum_gates(reverse=True),
                              P.rotary_embedding(interleaved=True)]):
        out = tmp_path / str(i)
        assert tilecute.build_cubin(func, "sm_90a", out_dir=str(out)).kernel_names


def test_fp4_helper_selects_the_subnormals():
    """The e2m1 helper's `e == 0` / `mant == 1` are conditions in the kernel (they were
    Python's False, and the subnormal branch vanished)."""
    src = tilecute.compile(P.dequant_fp4_mx_gemm()).get_kernel_source()
    (line,) = [ln for ln in src.splitlines() if "tcmath.reinterpret(" in ln]
    assert line.count("cutlass.select_(") == 2 and "== cutlass.Uint16(0)" in line


def test_two_kernel_programs():
    for func, kernels in ((P.split_kv_decode(), 2), (P.rmsnorm_bwd(), 2),
                          (P.radix_digit_counts(), 2)):
        k = tilecute.compile(func)
        assert len(k.abi.kernels) == kernels, func.name


# ---- on the GPU ------------------------------------------------------------------------------
_randn = rounds.randn


def _close(got, want, atol=1e-2, rtol=1e-2):
    rounds.close_on_cpu(got, want, atol, rtol)


def _rel(got, want, tol):
    """The largest error relative to the reference's largest magnitude."""
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tol * want.float().abs().max().item(), (err, want.float().abs().max().item())


_run = rounds.run


@pytest.mark.gpu
def test_linear_attention_programs_on_gpu():
    import torch
    import torch.nn.functional as F
    B, S, H = 2, 256, 4
    g = _randn(B, S, H, dtype=torch.float16)
    for reverse in (False, True):
        gc = torch.empty(B, S, H, device="cuda")
        _run(P.chunk_cumsum_gates(B, S, H, reverse=reverse), g, gc)
        x = g.float().view(B, S // 64, 64, H)
        want = x.flip(2).cumsum(2).flip(2) if reverse else x.cumsum(2)
        _close(gc, want.reshape(B, S, H), atol=1e-3, rtol=1e-3)

    # gated linear attention against the token-by-token recurrence
    B, S, H, DK, DV = 2, 256, 2, 64, 64
    q, k, v = (_randn(B, S, H, d, dtype=torch.float16, scale=0.3) for d in (DK, DK, DV))
    gate = F.logsigmoid(_randn(B, S, H)) * 0.1
    o = torch.empty(B, S, H, DV, dtype=torch.float16, device="cuda")
    _run(P.chunk_gla_fwd(B, S, H, DK, DV), q, k, v, gate, o)
    h = torch.zeros(B, H, DK, DV, device="cuda")
    want = torch.empty(B, S, H, DV, device="cuda")
    for t in range(S):
        h = h * gate[:, t].exp()[..., None, None] + k[:, t].float()[..., None] * v[:, t].float()[:, :, None]
        want[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t].float(), h)
    _rel(o, want, 2e-2)

    # the delta rule's state pass, chunk by chunk
    B, S, H, DK, DV, BT = 1, 256, 2, 64, 128, 64
    kk, w = (_randn(B, S, H, DK, dtype=torch.float16, scale=0.1) for _ in range(2))
    u = _randn(B, S, H, DV, dtype=torch.float16)
    gc = (F.logsigmoid(_randn(B, S, H)) * 0.1).view(B, S // BT, BT, H).cumsum(2).view(B, S, H)
    hs = torch.empty(B, S // BT, H, DK, DV, dtype=torch.float16, device="cuda")
    vn = torch.empty(B, S, H, DV, dtype=torch.float16, device="cuda")
    _run(P.chunk_delta_h(B, S, H, DK, DV, BT), kk, w, u, gc, hs, vn)
    h = torch.zeros(B, H, DK, DV, device="cuda")
    want_h, want_v = torch.empty_like(hs, dtype=torch.float32), torch.empty_like(vn, dtype=torch.float32)
    for t in range(S // BT):
        sl = slice(t * BT, (t + 1) * BT)
        want_h[:, t] = h
        v_new = u[:, sl].float() - torch.einsum("bshk,bhkv->bshv", w[:, sl].float(), h.half().float())
        want_v[:, sl] = v_new
        last = gc[:, (t + 1) * BT - 1]
        decayed = v_new * (last[:, None] - gc[:, sl]).exp()[..., None]
        h = h * last.exp()[..., None, None] + torch.einsum("bshk,bshv->bhkv", kk[:, sl].float(), decayed)
    _rel(hs, want_h, 1e-2)
    _rel(vn, want_v, 1e-2)

    # beta-scaled, gated K K^T, strictly lower
    B, S, H, DK, BT = 2, 256, 2, 64, 64
    kb = _randn(B, S, H, DK, dtype=torch.bfloat16, scale=0.2)
    beta = torch.rand(B, S, H, device="cuda")
    gl = (F.logsigmoid(_randn(B, S, H)) * 0.1).view(B, S // BT, BT, H).cumsum(2).view(B, S, H)
    a = torch.empty(B, S, H, BT, device="cuda")
    _run(P.chunk_kkt_beta(B, S, H, DK, BT), kb, beta, gl, a)
    kc = kb.float().view(B, S // BT, BT, H, DK)
    gcc = gl.view(B, S // BT, BT, H)
    dots = torch.einsum("bcihd,bcjhd->bcihj", kc, kc)
    decay = (gcc[:, :, :, :, None] - gcc.permute(0, 1, 3, 2)[:, :, None]).exp()
    lower = torch.tril(torch.ones(BT, BT, device="cuda"), -1)[None, None, :, None, :]
    want = dots * decay * beta.view(B, S // BT, BT, H)[..., None] * lower
    _close(a, want.reshape(B, S, H, BT), atol=2e-2, rtol=2e-2)

    # the WY backward's dk and dbeta (row sums of a fragment laid out as an accumulator)
    B, S, H, DK, BT = 1, 256, 2, 128, 64
    kw, aw, dw = (_randn(B, S, H, d, dtype=torch.bfloat16, scale=0.3) for d in (DK, BT, DK))
    beta, gw = torch.rand(B, S, H, device="cuda"), F.logsigmoid(_randn(B, S, H))
    dk = torch.empty(B, S, H, DK, device="cuda")
    dbeta = torch.empty(B, S, H, device="cuda")
    _run(P.wy_bwd_dk_dbeta(B, S, H, DK, BT), kw, aw, dw, beta, gw, dk, dbeta)
    ac = aw.float().view(B, S // BT, BT, H, BT)
    dkb = torch.einsum("bcjhi,bcjhd->bcihd", ac, dw.float().view(B, S // BT, BT, H, DK))
    eg = gw.exp().view(B, S // BT, BT, H)[..., None]
    _close(dk, (dkb * beta.view(B, S // BT, BT, H)[..., None] * eg).reshape(B, S, H, DK),
           atol=1e-3, rtol=1e-3)
    _close(dbeta, (dkb * kw.float().view(B, S // BT, BT, H, DK) * eg).sum(-1).reshape(B, S, H),
           atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_moe_programs_on_gpu():
    import torch
    E, rows, K, N = 4, 600, 256, 256
    sizes = [150, 0, 300, 150]
    offsets = torch.tensor([0, 150, 150, 450, 600], dtype=torch.int32, device="cuda")
    a = _randn(rows, K, dtype=torch.float16)
    w = _randn(E, N, K, dtype=torch.float16, scale=0.1)
    c = torch.zeros(rows, N, dtype=torch.float16, device="cuda")
    _run(P.moe_grouped_gemm(E, rows, K, N), a, w, offsets, c)
    want = torch.cat([a[lo:lo + n].float() @ w[e].float().T
                      for e, (lo, n) in enumerate(zip(offsets.tolist(), sizes))])
    _close(c, want, atol=5e-2, rtol=1e-2)

    tokens, topk, D = 300, 2, 512
    x = _randn(tokens, D, dtype=torch.bfloat16)
    src = torch.randperm(tokens * topk, device="cuda").to(torch.int32)
    xp = torch.empty(tokens * topk, D, dtype=torch.bfloat16, device="cuda")
    _run(P.moe_permute_gather(tokens, topk, D), x, src, xp)
    assert torch.equal(xp, x[src.long() // topk])

    tokens, topk, D = 300, 2, 256
    y = _randn(tokens * topk, D, dtype=torch.float16)
    tok = (torch.arange(tokens * topk, device="cuda") // topk)[torch.randperm(tokens * topk, device="cuda")]
    wt = torch.rand(tokens * topk, device="cuda")
    out = torch.zeros(tokens, D, device="cuda")
    _run(P.moe_scatter_combine(tokens, topk, D), y, tok.to(torch.int32), wt, out)
    want = torch.zeros(tokens, D, device="cuda").index_add_(0, tok, wt[:, None] * y.float())
    _close(out, want, atol=1e-4, rtol=1e-4)

    tokens, topk, D = 256, 4, 256
    y = _randn(tokens * topk, D, dtype=torch.bfloat16)
    pos = torch.randperm(tokens * topk, device="cuda").view(tokens, topk).to(torch.int32)
    wt = torch.rand(tokens, topk, device="cuda")
    out = torch.empty(tokens, D, dtype=torch.bfloat16, device="cuda")
    _run(P.moe_gather_combine(tokens, topk, D), y, pos, wt, out)
    want = (wt[..., None] * y.float()[pos.long()]).sum(1)
    _close(out, want, atol=2e-2, rtol=1e-2)

    tokens, E, topk = 256, 64, 4
    logits = _randn(tokens, E)
    weights = torch.empty(tokens, topk, device="cuda")
    ids = torch.empty(tokens, topk, dtype=torch.int32, device="cuda")
    _run(P.topk_gating_softmax(tokens, E, topk), logits, weights, ids)
    vals, want_ids = torch.softmax(logits, -1).topk(topk, dim=-1)
    assert torch.equal(ids.long(), want_ids)
    _close(weights, vals / vals.sum(-1, keepdim=True), atol=1e-5, rtol=1e-5)

    n, E, block = 1000, 16, 64
    topk_ids = torch.randint(0, E, (n,), dtype=torch.int32, device="cuda")
    topk_ids[topk_ids == 5] = 6  # an expert without tokens
    max_padded = n + E * (block - 1)
    sorted_ids = torch.empty(max_padded, dtype=torch.int32, device="cuda")
    offs = torch.empty(E + 1, dtype=torch.int32, device="cuda")
    _run(P.moe_align_block_size(n, E, block), topk_ids, sorted_ids, offs)
    counts = torch.bincount(topk_ids.long(), minlength=E)
    padded = (counts + block - 1) // block * block
    assert offs.tolist() == [0] + padded.cumsum(0).tolist()
    for e in range(E):
        lo, cnt, pad = offs[e].item(), counts[e].item(), padded[e].item()
        got = sorted_ids[lo:lo + cnt].long().sort().values
        assert torch.equal(got, (topk_ids == e).nonzero().flatten()), e
        assert (sorted_ids[lo + cnt:lo + pad] == n).all(), e
    assert (sorted_ids[offs[-1].item():] == n).all()


def _attend(q, k, v, keep):
    """softmax(q k^T / sqrt(d)) v over the kept keys (fully masked rows give 0)."""
    import torch
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, -1), nan=0.0) @ v.float()


@pytest.mark.gpu
def test_sparse_paged_split_attention_on_gpu():
    import torch
    B, H, S, D, BM = 1, 2, 512, 64, 64
    NB = S // BM
    q, k, v = (_randn(B, H, S, D, dtype=torch.float16) for _ in range(3))
    mask = (torch.rand(B, H, NB, NB, device="cuda") < 0.5).to(torch.uint8)
    mask[0, 0, 3] = 0  # a query block that sees nothing
    o = torch.empty_like(q)
    _run(P.block_sparse_attn(B, H, S, D), q, k, v, mask, o)
    keep = mask.bool().repeat_interleave(BM, 2).repeat_interleave(BM, 3)
    _close(o, _attend(q, k, v, keep), atol=2e-2, rtol=2e-2)

    q, k, v = (_randn(B, H, S, D, dtype=torch.bfloat16) for _ in range(3))
    idx = torch.zeros(B, H, NB, 4, dtype=torch.int32, device="cuda")
    counts = torch.zeros(B, H, NB, dtype=torch.int32, device="cuda")
    keep_blocks = torch.zeros(B, H, NB, NB, dtype=torch.bool, device="cuda")
    for h in range(H):
        for qb in range(NB):
            earlier = torch.randperm(qb)[:3].tolist()
            chosen = earlier + [qb]
            counts[0, h, qb] = len(chosen)
            idx[0, h, qb, :len(chosen)] = torch.tensor(chosen[::-1] if qb % 2 else chosen)
            keep_blocks[0, h, qb, chosen] = True
    o = torch.empty_like(q)
    _run(P.block_index_attn(B, H, S, D), q, k, v, idx, counts, o)
    keep = keep_blocks.repeat_interleave(BM, 2).repeat_interleave(BM, 3)
    keep &= torch.ones(S, S, dtype=torch.bool, device="cuda").tril()
    _close(o, _attend(q, k, v, keep), atol=3e-2, rtol=3e-2)

    # paged decoding
    batch, heads, kvh, D, page, num_pages, max_pages = 3, 16, 2, 128, 64, 40, 8
    qd = _randn(batch, heads, D, dtype=torch.float16)
    kc, vc = (_randn(num_pages, page, kvh, D, dtype=torch.float16) for _ in range(2))
    table = torch.randperm(num_pages, device="cuda")[:batch * max_pages].view(batch, max_pages).to(torch.int32)
    seqlens = torch.tensor([1, 300, 512], dtype=torch.int32, device="cuda")
    o = torch.empty_like(qd)
    _run(P.paged_decode_gqa(batch, heads, kvh, D, page, num_pages, max_pages), qd, kc, vc, table, seqlens, o)
    for b in range(batch):
        n = seqlens[b].item()
        ks = kc[table[b].long()].reshape(-1, kvh, D)[:n].transpose(0, 1).repeat_interleave(heads // kvh, 0)
        vs = vc[table[b].long()].reshape(-1, kvh, D)[:n].transpose(0, 1).repeat_interleave(heads // kvh, 0)
        keep = torch.ones(heads, 1, n, dtype=torch.bool, device="cuda")
        _close(o[b], _attend(qd[b][:, None], ks, vs, keep)[:, 0], atol=2e-2, rtol=2e-2)

    # split-KV decoding with its combine kernel
    batch, heads, kvh, seqlen, D = 2, 16, 2, 4096, 128
    qd = _randn(batch, heads, D, dtype=torch.float16)
    kk, vv = (_randn(batch, seqlen, kvh, D, dtype=torch.float16) for _ in range(2))
    o = torch.empty_like(qd)
    _run(P.split_kv_decode(batch, heads, kvh, seqlen, D), qd, kk, vv, o)
    ks = kk.transpose(1, 2).repeat_interleave(heads // kvh, 1)
    vs = vv.transpose(1, 2).repeat_interleave(heads // kvh, 1)
    keep = torch.ones(1, 1, 1, seqlen, dtype=torch.bool, device="cuda")
    _close(o, _attend(qd[:, :, None], ks, vs, keep)[:, :, 0], atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_convolution_programs_on_gpu():
    import torch
    import torch.nn.functional as F
    N, H, W, C, Fo, KS, st, dil, pad = 2, 30, 30, 64, 128, 3, 2, 2, 2
    x = _randn(N, H, W, C, dtype=torch.float16)
    wt = _randn(KS, KS, C, Fo, dtype=torch.float16, scale=0.05)
    OH = (H + 2 * pad - dil * (KS - 1) - 1) // st + 1
    y = torch.empty(N, OH, OH, Fo, dtype=torch.float16, device="cuda")
    _run(P.conv2d_im2col(N, H, W, C, Fo, KS, st, dil, pad), x, wt, y)
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), wt.permute(3, 2, 0, 1).float(),
                    stride=st, padding=pad, dilation=dil).permute(0, 2, 3, 1)
    _close(y, want, atol=2e-2, rtol=2e-2)

    N, H, W, C, Fo, KH, KW = 2, 20, 33, 32, 64, 3, 5
    x = _randn(N, H, W, C, dtype=torch.bfloat16)
    wt = _randn(KH * KW * C, Fo, dtype=torch.bfloat16, scale=0.05)
    bias = _randn(Fo)
    OH = (H + 2 - 2 - 1) // 2 + 1
    OW = (W + 8 - 8 - 1) // 1 + 1
    y = torch.empty(N * OH * OW, Fo, dtype=torch.bfloat16, device="cuda")
    _run(P.conv2d_rect_gather(N, H, W, C, Fo, KH, KW), x, wt, bias, y)
    want = F.conv2d(x.permute(0, 3, 1, 2).float(), wt.view(KH, KW, C, Fo).permute(3, 2, 0, 1).float(),
                    bias, stride=(2, 1), padding=(1, 4), dilation=(1, 2)).permute(0, 2, 3, 1)
    _close(y.view(N, OH, OW, Fo), want, atol=3e-2, rtol=2e-2)


def _nibbles(packed):
    """(rows, K // 2) bytes -> (rows, K) nibbles, the low one first."""
    import torch
    return torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(packed.shape[0], -1).long()


@pytest.mark.gpu
def test_quantized_gemms_on_gpu():
    import torch
    M, N, K, group = 256, 256, 512, 128
    a = _randn(M, K, dtype=torch.float16)
    bq = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda")
    zq = torch.randint(0, 256, (N, K // group // 2), dtype=torch.uint8, device="cuda")
    s = (torch.rand(N, K // group, device="cuda") * 0.02 + 0.005).half()
    c = torch.empty(M, N, dtype=torch.float16, device="cuda")
    _run(P.dequant_uint4_zp_gemm(M, N, K, group=group), a, bq, zq, s, c)
    z = _nibbles(zq).repeat_interleave(group, 1)
    wdq = ((_nibbles(bq) - z).half() * s.repeat_interleave(group, 1)).float()
    _close(c, a.float() @ wdq.T, atol=5e-2, rtol=1e-2)

    a = _randn(M, K, dtype=torch.bfloat16)
    sc = torch.randint(122, 132, (N, K // 32), dtype=torch.uint8, device="cuda")
    c = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    _run(P.dequant_fp4_mx_gemm(M, N, K), a, bq, sc, c)
    nib = _nibbles(bq)
    table = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device="cuda")
    wv = torch.where(nib >= 8, -table[nib & 7], table[nib & 7])
    wv = wv * torch.exp2(sc.float() - 127.0).repeat_interleave(32, 1)
    _rel(c, a.float() @ wv.T, 1e-2)

    a32, b32 = _randn(M, K), _randn(N, K)
    a8, b8 = a32.to(torch.float8_e4m3fn), b32.to(torch.float8_e4m3fn)
    as_ = torch.rand(M, K // 128, device="cuda") + 0.5
    bs = torch.rand(N // 128, K // 128, device="cuda") + 0.5
    c = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    _run(P.fp8_blockscale_gemm(M, N, K), a8, b8, as_, bs, c)
    aw = a8.float() * as_.repeat_interleave(128, 1)
    bw = b8.float() * bs.repeat_interleave(128, 0).repeat_interleave(128, 1)
    _close(c, aw @ bw.T, atol=0.25, rtol=2e-2)


@pytest.mark.gpu
def test_norm_backward_and_losses_on_gpu():
    import torch
    import torch.nn.functional as F
    M, N = 256, 512
    x = _randn(M, N, dtype=torch.float16)
    dy = _randn(M, N, dtype=torch.float16)
    gamma = _randn(N)
    xf = x.float().requires_grad_()
    mean, var = xf.mean(1), xf.var(1, unbiased=False)
    rstd = torch.rsqrt(var + 1e-5)
    gf, bf = gamma.clone().requires_grad_(), torch.zeros(N, device="cuda", requires_grad=True)
    y = (xf - mean[:, None]) * rstd[:, None] * gf + bf
    y.backward(dy.float())
    dx = torch.empty_like(x)
    dg, db = torch.zeros(N, device="cuda"), torch.zeros(N, device="cuda")
    _run(P.layernorm_bwd(M, N), x, dy, gamma, mean.detach(), rstd.detach(), dx, dg, db)
    _close(dx, xf.grad, atol=2e-2, rtol=1e-2)
    _close(dg, gf.grad, atol=1e-2, rtol=1e-3)
    _close(db, bf.grad, atol=1e-2, rtol=1e-3)

    M, N = 512, 1024
    x = _randn(M, N, dtype=torch.bfloat16)
    dy = _randn(M, N, dtype=torch.bfloat16)
    w = _randn(N, dtype=torch.bfloat16)
    xf, wf = x.float().requires_grad_(), w.float().requires_grad_()
    y = xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * wf
    y.backward(dy.float())
    dx = torch.empty_like(x)
    dw = torch.empty(N, device="cuda")
    _run(P.rmsnorm_bwd(M, N), x, dy, w, dx, dw)
    _close(dx, xf.grad, atol=5e-2, rtol=2e-2)
    _close(dw, wf.grad, atol=1e-2, rtol=1e-3)

    M, V = 64, 5000
    logits = _randn(M, V, dtype=torch.bfloat16, scale=3.0)
    labels = torch.randint(0, V, (M,), device="cuda")
    labels[::7] = -100
    loss, lse = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    _run(P.cross_entropy_fwd(M, V), logits, labels, loss, lse)
    _close(lse, torch.logsumexp(logits.float(), 1), atol=1e-4, rtol=1e-5)
    _close(loss, F.cross_entropy(logits.float(), labels, reduction="none", ignore_index=-100),
           atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_rotary_embedding_on_gpu():
    import torch
    B, S, H, D = 2, 128, 8, 128
    half, max_pos = D // 2, 4 * S
    x = _randn(B, S, H, D, dtype=torch.float16)
    pos = torch.randint(0, max_pos, (B, S), dtype=torch.int32, device="cuda")
    freqs = torch.outer(torch.arange(max_pos, device="cuda").float(),
                        1.0 / 10000 ** (torch.arange(half, device="cuda").float() / half))
    cos, sin = freqs.cos(), freqs.sin()
    c, s = cos[pos.long()][:, :, None], sin[pos.long()][:, :, None]  # (B, S, 1, half)
    xf = x.float()
    for interleaved in (False, True):
        y = torch.empty_like(x)
        _run(P.rotary_embedding(B, S, H, D, interleaved=interleaved), x, pos, cos, sin, y)
        if interleaved:
            x1, x2 = xf[..., 0::2], xf[..., 1::2]
            want = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
        else:
            x1, x2 = xf[..., :half], xf[..., half:]
            want = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
        _close(y, want, atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_sampling_and_counting_on_gpu():
    import torch
    M, V, top_p = 32, 1024, 0.9
    probs, ids = torch.softmax(_randn(M, V, scale=3.0), -1).sort(-1, descending=True)
    ids = ids.to(torch.int32)
    out = torch.empty(M, V, device="cuda")
    _run(P.top_p_renorm(M, V, top_p), probs, ids, out)
    before = probs.cumsum(-1) - probs
    keep = before < top_p
    kept = probs * keep
    want = torch.zeros(M, V, device="cuda").scatter_(1, ids.long(), kept / kept.sum(-1, keepdim=True))
    near = ((before - top_p).abs() < 1e-5).any(-1)  # a row whose cut the rounding may move
    _close(out[~near], want[~near], atol=1e-6, rtol=1e-5)

    M, V, k = 64, 2048, 8
    logits = _randn(M, V)
    out = torch.empty_like(logits)
    _run(P.topk_threshold_mask(M, V, k), logits, out)
    kth = logits.topk(k, -1).values[:, -1:]
    assert torch.equal(out, torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf"))))

    N = 1 << 16
    keys = torch.randint(-2**31, 2**31 - 1, (N,), dtype=torch.int32, device="cuda")
    counts = torch.zeros(256, dtype=torch.int32, device="cuda")
    offsets = torch.empty(256, dtype=torch.int32, device="cuda")
    _run(P.radix_digit_counts(N), keys.view(torch.uint32), counts, offsets)
    digits = ((keys.long() & 0xFFFFFFFF) >> 8) & 255
    want = torch.bincount(digits, minlength=256)
    assert counts.long().tolist() == want.tolist()
    assert offsets.long().tolist() == (want.cumsum(0) - want).tolist()
