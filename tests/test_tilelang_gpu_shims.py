"""The torch reference stand-ins for ``flash_attn`` and ``fla`` under .ci/tilelang_gpu/shims
(used when TileLang's examples run on the GPU without those packages) checked on the CPU against
independent forms: per-sequence dense attention, autograd of the forward they differentiate,
token-by-token loops."""

import importlib
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")

def close(got, ref):  # the stand-ins compute in float32; the autograd references in float64
    torch.testing.assert_close(got.double(), ref.double(), atol=1e-5, rtol=1e-4)


SHIMS = os.path.join(os.path.dirname(__file__), "..", ".ci", "tilelang_gpu", "shims")


@pytest.fixture(scope="module")
def shims():
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in ("fla", "flash_attn")}
    for n in saved:
        del sys.modules[n]
    sys.path.insert(0, os.path.abspath(SHIMS))
    try:
        fa = importlib.import_module("flash_attn")
        assert "torch_reference" in fa.__version__
        yield
    finally:
        sys.path.remove(os.path.abspath(SHIMS))
        for n in [n for n in sys.modules if n.split(".")[0] in ("fla", "flash_attn")]:
            del sys.modules[n]
        sys.modules.update(saved)


def _dense(q, k, v, causal, scale):  # q [Sq, H, D], k/v [Sk, H, D]; bottom-right causal
    s = torch.einsum("qhd,khd->hqk", q.double(), k.double()) * scale
    if causal:
        Sq, Sk = q.shape[0], k.shape[0]
        s = s.masked_fill(torch.arange(Sk)[None, :] > torch.arange(Sq)[:, None] + Sk - Sq, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v.double())


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_gqa_matches_dense_per_sequence(shims, causal):
    from flash_attn import flash_attn_varlen_func

    torch.manual_seed(0)
    lq, lk = [5, 17, 1], [9, 17, 30]
    cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32)
    ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32)
    q = torch.randn(sum(lq), 8, 16, dtype=torch.bfloat16)
    k = torch.randn(sum(lk), 2, 16, dtype=torch.bfloat16)
    v = torch.randn(sum(lk), 2, 16, dtype=torch.bfloat16)
    out = flash_attn_varlen_func(q, k, v, cq, ck, max(lq), max(lk), 0.0, causal=causal)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    for b in range(3):
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        ref = _dense(q[qs], k[ks].repeat_interleave(4, 1), v[ks].repeat_interleave(4, 1), causal, 0.25)
        torch.testing.assert_close(out[qs].double(), ref, atol=2e-2, rtol=2e-2)


def test_kvcache_paged_equals_contiguous_and_appends(shims):
    from flash_attn import flash_attn_with_kvcache

    torch.manual_seed(0)
    B, S, Hk, Hq, D, page = 3, 64, 2, 4, 16, 16
    kc, vc = torch.randn(B, S, Hk, D), torch.randn(B, S, Hk, D)
    seqlens = torch.tensor([5, 64, 33], dtype=torch.int32)
    q = torch.randn(B, 1, Hq, D)
    # the same cache laid out in shuffled pages
    perm = torch.randperm(B * S // page)
    table = perm.reshape(B, S // page).int()
    kp, vp = torch.empty(B * S // page, page, Hk, D), torch.empty(B * S // page, page, Hk, D)
    kp[perm] = kc.reshape(-1, page, Hk, D)
    vp[perm] = vc.reshape(-1, page, Hk, D)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens)
    paged = flash_attn_with_kvcache(q, kp, vp, cache_seqlens=seqlens, block_table=table)
    torch.testing.assert_close(out, paged)
    for b in range(B):
        L = int(seqlens[b])
        ref = _dense(q[b], kc[b, :L].repeat_interleave(2, 1), vc[b, :L].repeat_interleave(2, 1), False, D ** -0.5)
        torch.testing.assert_close(out[b].double(), ref, atol=1e-5, rtol=1e-5)
    # new keys are written into the cache at cache_seqlens and attended to
    kn, vn = torch.randn(B, 1, Hk, D), torch.randn(B, 1, Hk, D)
    short = torch.tensor([5, 10, 33], dtype=torch.int32)
    out2 = flash_attn_with_kvcache(q, kp, vp, k=kn, v=vn, cache_seqlens=short, block_table=table, causal=True)
    for b in range(B):
        L = int(short[b])
        keys = torch.cat([kc[b, :L], kn[b]]).repeat_interleave(2, 1)
        vals = torch.cat([vc[b, :L], vn[b]]).repeat_interleave(2, 1)
        torch.testing.assert_close(out2[b].double(), _dense(q[b], keys, vals, True, D ** -0.5), atol=1e-5, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="rotary_cos"):
        flash_attn_with_kvcache(q, kc, vc, rotary_cos=torch.ones(1))


def _gdn_inputs(B=2, T=100, H=3, K=16, V=8, seed=0):
    torch.manual_seed(seed)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, dtype=torch.float64), dim=-1)
    v = torch.randn(B, T, H, V, dtype=torch.float64)
    beta = torch.rand(B, T, H, dtype=torch.float64)
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, dtype=torch.float64))
    return k, v, beta, g


def test_cumsum_and_token_indices(shims):
    from fla.ops.utils import prepare_token_indices
    from fla.ops.utils.cumsum import chunk_local_cumsum, chunk_local_cumsum_scalar

    g = torch.randn(2, 100, 3)
    fwd = chunk_local_cumsum(g, 32)
    rev = chunk_local_cumsum_scalar(g=g, chunk_size=32, reverse=True, head_first=False, output_dtype=torch.float32)
    for s in range(0, 100, 32):
        c = g[:, s:s + 32]
        close(fwd[:, s:s + 32], c.cumsum(1))
        close(rev[:, s:s + 32], c.flip(1).cumsum(1).flip(1))
    hf = chunk_local_cumsum_scalar(g.transpose(1, 2).contiguous(), 32, head_first=True)
    close(hf.transpose(1, 2), fwd)
    cu = torch.tensor([0, 2, 6])
    assert prepare_token_indices(cu).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [1, 3]]


def test_kkt_and_wy_fast_against_autograd(shims):
    from fla.ops.common.chunk_scaled_dot_kkt import chunk_scaled_dot_kkt_fwd
    from fla.ops.gated_delta_rule.wy_fast import bwd_prepare_wy_repr, recompute_w_u_fwd

    k, v, beta, graw = _gdn_inputs(T=128)
    from fla.ops.utils.cumsum import chunk_local_cumsum

    g = chunk_local_cumsum(graw, 64, output_dtype=torch.float64)
    A = chunk_scaled_dot_kkt_fwd(k, beta, g, chunk_size=64, output_dtype=torch.float64)
    t, j = 70, 66  # both in the second chunk: A[t, j - 64]
    want = beta[0, t, 1] * (k[0, t, 1] @ k[0, j, 1]) * torch.exp(g[0, t, 1] - g[0, j, 1])
    close(A[0, t, 1, j - 64], want)
    assert A[0, 66, 1, 70 - 64] == 0 and A[0, 70, 1, 6] == 0

    # A = (I + L)^-1, w = A (k beta e^g), u = A (v beta); gradients through A as a function of k, beta, g
    kk, vv, bb, gg = (x.clone().requires_grad_(True) for x in (k, v, beta, g))
    L = chunk_scaled_dot_kkt_fwd(kk, bb, gg, chunk_size=64, output_dtype=torch.float64)
    Lc = L.reshape(2, 2, 64, 3, 64).permute(0, 1, 3, 2, 4)  # B NT H BT BT
    Ai = torch.linalg.inv(torch.eye(64, dtype=torch.float64) + Lc)
    Afull = Ai.permute(0, 1, 3, 2, 4).reshape(2, 128, 3, 64)
    w, u = recompute_w_u_fwd(kk, vv, bb, gg, Afull, None)
    dw, du = torch.randn_like(w), torch.randn_like(u)
    ((w * dw).sum() + (u * du).sum()).backward()
    dk, dv, dbeta, dg = bwd_prepare_wy_repr(k, v, g, beta, Afull.detach(), dw, du, cu_seqlens=None)
    for got, ref in ((dk, kk.grad), (dv, vv.grad), (dbeta, bb.grad), (dg, gg.grad)):
        close(got, ref)


def _chunks_fwd(k, w, u, g, h0, BT):  # differentiable state recurrence (list of states)
    T = k.shape[1]
    h, hs, vns = h0, [], []
    for s in range(0, T, BT):
        e = min(s + BT, T)
        hs.append(h)
        vn = u[:, s:e] - torch.einsum("bthk,bhkv->bthv", w[:, s:e], h)
        vns.append(vn)
        gl = g[:, e - 1]
        vd = vn * torch.exp(gl[:, None] - g[:, s:e])[..., None]
        h = h * torch.exp(gl)[..., None, None] + torch.einsum("bthk,bthv->bhkv", k[:, s:e], vd)
    return hs, vns, h


def test_delta_h_fwd_bwd_against_autograd(shims):
    from fla.ops.common.chunk_delta_h import chunk_gated_delta_rule_bwd_dhu, chunk_gated_delta_rule_fwd_h

    k, u, _, graw = _gdn_inputs(T=100)
    w = torch.randn_like(k) * 0.3
    q = torch.randn_like(k)
    g = torch.cat([graw[:, s:s + 32].cumsum(1) for s in range(0, 100, 32)], 1)
    h0 = torch.randn(2, 3, 16, 8, dtype=torch.float64)
    h, vnew, ht = chunk_gated_delta_rule_fwd_h(k=k, w=w, u=u, g=g, initial_state=h0, output_final_state=True, chunk_size=32)
    hs, vns, hfin = _chunks_fwd(k, w, u, g, h0, 32)
    close(h, torch.stack(hs, 1))
    close(vnew, torch.cat(vns, 1))
    close(ht, hfin.float())

    uu, hh0 = u.clone().requires_grad_(True), h0.clone().requires_grad_(True)
    hs, vns, hfin = _chunks_fwd(k, w, uu, g, hh0, 32)
    for x in hs[1:] + [hfin]:
        x.retain_grad()
    do, dv, dht = torch.randn_like(u), torch.randn_like(u), torch.randn_like(h0)
    scale = 0.3
    loss = (hfin * dht).sum() + (torch.cat(vns, 1) * dv).sum()
    for i, s in enumerate(range(0, 100, 32)):  # o_inter = scale * (q h) e^g
        o = torch.einsum("bthk,bhkv->bthv", q[:, s:s + 32], hs[i]) * torch.exp(g[:, s:s + 32])[..., None] * scale
        loss = loss + (o * do[:, s:s + 32]).sum()
    loss.backward()
    dh, dh0, dv2 = chunk_gated_delta_rule_bwd_dhu(q, k, w, g, h0, dht, do, dv, scale, chunk_size=32)
    close(dv2, uu.grad)
    close(dh0, hh0.grad.float())
    close(dh, torch.stack([x.grad for x in hs[1:] + [hfin]], 1))


@pytest.mark.parametrize("use_g", [True, False])
def test_chunk_o_and_dqkwg_against_autograd(shims, use_g):
    from fla.ops.common.chunk_o import chunk_bwd_dqkwg, chunk_fwd_o

    k, v, _, graw = _gdn_inputs(T=100)
    q = torch.randn_like(k)
    BT = 64
    g = torch.cat([graw[:, s:s + BT].cumsum(1) for s in range(0, 100, BT)], 1) if use_g else None
    h = torch.randn(2, 2, 3, 16, 8, dtype=torch.float64)
    dh = torch.randn_like(h)
    w, dv = torch.randn_like(k), torch.randn_like(v)
    qq, kk, ww = (x.clone().requires_grad_(True) for x in (q, k, w))
    gg = g.clone().requires_grad_(True) if use_g else None
    o = chunk_fwd_o(qq, kk, v, h, gg, scale=0.3, chunk_size=BT)
    ref = torch.zeros_like(v)
    gz = gg if use_g else torch.zeros(2, 100, 3, dtype=torch.float64)
    do = torch.randn_like(v)
    loss = (o * do).sum()
    for i, s in enumerate(range(0, 100, BT)):
        e = min(s + BT, 100)
        qs, ks, gs = qq[:, s:e], kk[:, s:e], gz[:, s:e]
        a = torch.einsum("bthk,bshk->bhts", qs, ks) * torch.exp(gs.transpose(1, 2)[..., :, None] - gs.transpose(1, 2)[..., None, :])
        a = a.tril()
        ref[:, s:e] = (torch.einsum("bthk,bhkv->bthv", qs, h[:, i]) * torch.exp(gs)[..., None]
                       + torch.einsum("bhts,bshv->bthv", a, v[:, s:e])).detach() * 0.3
        # the state update this chunk feeds (k^T v decayed to the chunk end) and v_new = u - w h
        gl = gz[:, e - 1]
        hn = h[:, i] * torch.exp(gl)[..., None, None] + torch.einsum("bthk,bthv->bhkv", ks, v[:, s:e] * torch.exp(gl[:, None] - gs)[..., None])
        loss = loss + (hn * dh[:, i]).sum() - (torch.einsum("bthk,bhkv->bthv", ww[:, s:e], h[:, i]) * dv[:, s:e]).sum()
    close(o, ref)
    loss.backward()
    dq, dk, dw, dg = chunk_bwd_dqkwg(q, k, v, g, do, h, dh, dv, w, chunk_size=BT, scale=0.3)
    close(dq, qq.grad)
    close(dk, kk.grad)
    close(dw, ww.grad)
    if use_g:
        close(dg, gg.grad.float())


def test_linear_attn_and_l2norm(shims):
    from fla.modules.l2norm import l2norm_fwd
    from fla.ops.linear_attn import fused_chunk_linear_attn

    torch.manual_seed(0)
    x = torch.randn(2, 50, 3, 16)
    y, rstd = l2norm_fwd(x)
    close(y, x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6))
    q, k, v = y, l2norm_fwd(torch.randn(2, 50, 3, 16))[0], torch.randn(2, 50, 3, 8)
    o, ht = fused_chunk_linear_attn(q, k, v, output_final_state=True, normalize=False)
    state = torch.zeros(2, 3, 16, 8)
    for t in range(50):  # token-by-token recurrence
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        close(o[:, t], torch.einsum("bhk,bhkv->bhv", q[:, t], state) / math.sqrt(16))
    close(ht, state)


def test_l2norm_fwd_output_is_a_leaf(shims):
    # linear_attention/example_linear_attn_bwd.py: q = l2norm_fwd(q)[0].requires_grad_(True),
    # then reads q.grad after a backward; fla's l2norm_fwd is a kernel call recording no graph,
    # so its output must be a leaf even when the input requires grad
    from fla.modules.l2norm import l2norm_fwd

    x = torch.randn(1, 8, 2, 16, requires_grad=True)
    y = l2norm_fwd(x)[0].requires_grad_(True)
    assert y.is_leaf
    (y * 2).sum().backward()
    assert y.grad is not None
    close(y.grad, torch.full_like(y, 2.0))
