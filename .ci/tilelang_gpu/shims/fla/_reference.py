"""The math of the fla stand-in: chunked gated-delta-rule pieces, chunk-local cumsum, linear
attention and L2 norm, in plain torch with float32 arithmetic.

Layout is fla's: tokens ``[B, T, H, ...]``; chunk states ``[B, NT, H, K, V]``; a chunk-local
matrix ``[B, T, H, BT]`` (row = token, column = position inside its chunk).  Internally every
per-token tensor is cut into chunks ``[B, H, NT, BT, ...]`` (the tail zero-padded) so that the
per-chunk products are batched matmuls.  ``g`` is always the *chunk-local cumulative* log decay,
and ``safe_exp(x)`` is ``exp(x)`` for ``x <= 0`` and 0 above, as in fla."""

import torch


def refuse_varlen(fn, cu_seqlens):
    if cu_seqlens is not None:
        raise NotImplementedError(f"fla torch reference: {fn}(cu_seqlens=...) (variable-length batches) is not modelled")


def safe_exp(x):
    return torch.where(x <= 0, torch.exp(torch.clamp(x, max=0.0)), torch.zeros_like(x))


def chunk(x, BT):
    """[B, T, H, *rest] -> [B, H, NT, BT, *rest] float32, the tail padded with zeros."""
    B, T, H = x.shape[:3]
    NT = -(-T // BT)
    x = x.float()
    if NT * BT != T:
        pad = torch.zeros(B, NT * BT - T, *x.shape[2:], device=x.device, dtype=x.dtype)
        x = torch.cat([x, pad], dim=1)
    x = x.reshape(B, NT, BT, H, *x.shape[3:])
    return x.movedim(3, 1)


def unchunk(x, T, dtype):
    """[B, H, NT, BT, *rest] -> [B, T, H, *rest] in ``dtype``."""
    B, H, NT, BT = x.shape[:4]
    x = x.movedim(1, 3).reshape(B, NT * BT, H, *x.shape[4:])
    return x[:, :T].to(dtype).contiguous()


def chunk_last(g, T, BT):
    """g [B, T, H] -> the value at each chunk's last valid position, [B, H, NT]."""
    NT = -(-T // BT)
    idx = torch.clamp(torch.arange(1, NT + 1, device=g.device) * BT, max=T) - 1
    return g.float()[:, idx].transpose(1, 2)


def last_valid_mask(T, BT, device):
    """[NT, BT] bool: the last valid position of each chunk."""
    NT = -(-T // BT)
    pos = torch.arange(NT * BT, device=device).reshape(NT, BT)
    last = torch.clamp(torch.arange(1, NT + 1, device=device) * BT, max=T) - 1
    return pos == last[:, None]


def tril(BT, device, strict):
    i = torch.arange(BT, device=device)
    return (i[:, None] > i[None, :]) if strict else (i[:, None] >= i[None, :])


def next_pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


# -- chunk-local cumulative sums ------------------------------------------------------------

def local_cumsum(g, chunk_size, reverse, cu_seqlens, head_first, output_dtype, scale=None):
    """Cumulative sum of g along time inside each chunk of ``chunk_size`` tokens (from the end
    of the chunk with ``reverse``); g is [B, T, H] or [B, T, H, S] ([B, H, T, ...] with
    ``head_first``).  With ``cu_seqlens`` (B == 1) chunks restart at every sequence start."""
    out_dtype = output_dtype or g.dtype
    if head_first:
        g = g.transpose(1, 2)
    if cu_seqlens is not None:
        if g.shape[0] != 1:
            raise ValueError("fla torch reference: cu_seqlens needs batch size 1")
        bounds = cu_seqlens.tolist()
        parts = [local_cumsum(g[:, s:e], chunk_size, reverse, None, False, torch.float32, scale)
                 for s, e in zip(bounds[:-1], bounds[1:])]
        out = torch.cat(parts, dim=1)
    else:
        T = g.shape[1]
        c = chunk(g, chunk_size)  # B H NT BT [S]
        c = c.flip(3).cumsum(3).flip(3) if reverse else c.cumsum(3)
        if scale is not None:
            c = c * scale
        out = unchunk(c, T, torch.float32)
    out = out.to(out_dtype)
    return out.transpose(1, 2).contiguous() if head_first else out


# -- gated delta rule pieces ----------------------------------------------------------------

def scaled_dot_kkt(k, beta, g, BT, output_dtype):
    """A[t, j] = beta_t (k_t . k_j) safe_exp(g_t - g_j) for j before t in t's chunk, else 0."""
    T = k.shape[1]
    kc, bc = chunk(k, BT), chunk(beta, BT)
    A = torch.matmul(kc * bc[..., None], kc.transpose(-1, -2))
    if g is not None:
        gc = chunk(g, BT)
        A = A * safe_exp(gc[..., :, None] - gc[..., None, :])
    A = A * tril(BT, k.device, strict=True)
    return unchunk(A, T, output_dtype)


def recompute_w_u(k, v, beta, g, A):
    """w = A (k * beta * exp(g)), u = A (v * beta), chunk by chunk (BT = A.shape[-1])."""
    T, BT = k.shape[1], A.shape[-1]
    Ac, bc = chunk(A, BT), chunk(beta, BT)[..., None]
    kb = chunk(k, BT) * bc
    if g is not None:
        kb = kb * torch.exp(chunk(g, BT))[..., None]
    u = torch.matmul(Ac, chunk(v, BT) * bc)
    w = torch.matmul(Ac, kb)
    return unchunk(w, T, k.dtype), unchunk(u, T, v.dtype)


def wy_repr_bwd(k, v, g, beta, A, dw, du, BT):
    """Gradients of w = A (k beta e^g), u = A (v beta) with A = (I + L)^-1 and
    L = strictly-lower(beta_t (k_t . k_j) safe_exp(g_t - g_j)), A taken as given: returns
    dk, dv, dbeta, dg (dg with respect to the chunk-local cumulative g)."""
    T = k.shape[1]
    kc, vc, Ac = chunk(k, BT), chunk(v, BT), chunk(A, BT)
    bc = chunk(beta, BT)
    gc = chunk(g, BT) if g is not None else torch.zeros_like(bc)
    eg = torch.exp(gc)
    dwc, duc = chunk(dw, BT), chunk(du, BT)
    At = Ac.transpose(-1, -2)
    # through w and u with A fixed
    dkbg = torch.matmul(At, dwc)  # d(k beta e^g)
    dvb = torch.matmul(At, duc)  # d(v beta)
    dk = dkbg * (bc * eg)[..., None]
    dv = dvb * bc[..., None]
    dbeta = (dkbg * kc * eg[..., None]).sum(-1) + (dvb * vc).sum(-1)
    dg = (dkbg * kc * (bc * eg)[..., None]).sum(-1)
    # through A = (I + L)^-1: dL = -A^T dA A^T on the strictly lower part
    strict = tril(BT, k.device, strict=True)
    dA = (torch.matmul(dwc, (kc * (bc * eg)[..., None]).transpose(-1, -2))
          + torch.matmul(duc, (vc * bc[..., None]).transpose(-1, -2))) * strict
    dL = -torch.matmul(At, torch.matmul(dA, At)) * strict
    dL = dL * safe_exp(gc[..., :, None] - gc[..., None, :])  # gradient of beta_t (k_t . k_j)
    kk = torch.matmul(kc, kc.transpose(-1, -2))
    dk = dk + torch.matmul(dL, kc) * bc[..., None] + torch.matmul(dL.transpose(-1, -2), kc * bc[..., None])
    dbeta = dbeta + (dL * kk).sum(-1)
    dLL = dL * kk * bc[..., None]
    dg = dg + dLL.sum(-1) - dLL.sum(-2)
    return (unchunk(dk, T, k.dtype), unchunk(dv, T, v.dtype), unchunk(dbeta, T, beta.dtype),
            unchunk(dg, T, g.dtype if g is not None else torch.float32))


def delta_rule_fwd_h(k, w, u, g, h0, output_final_state, BT, save_new_value):
    """The chunked state recurrence: h[0] = h0 (or 0); chunk t stores h[t] (its start state),
    v_new = u - w h[t], then h <- h * exp(g_last) + k^T (v_new * safe_exp(g_last - g)).
    Returns h [B, NT, H, K, V] (k's dtype), v_new (u's dtype, before the decay), final state
    [B, H, K, V] float32."""
    B, T, H, K = k.shape
    V = u.shape[-1]
    kc, wc, uc = chunk(k, BT), chunk(w, BT), chunk(u, BT)
    NT = kc.shape[2]
    if g is not None:
        gc, gl = chunk(g, BT), chunk_last(g, T, BT)
    h = h0.float().clone() if h0 is not None else torch.zeros(B, H, K, V, device=k.device)
    hs = torch.empty(B, H, NT, K, V, device=k.device)
    vn = torch.empty_like(uc)
    for t in range(NT):
        hs[:, :, t] = h
        v_new = uc[:, :, t] - torch.matmul(wc[:, :, t], h)
        vn[:, :, t] = v_new
        if g is not None:
            v_new = v_new * safe_exp(gl[:, :, t, None] - gc[:, :, t])[..., None]
            h = h * torch.exp(gl[:, :, t])[..., None, None]
        h = h + torch.matmul(kc[:, :, t].transpose(-1, -2), v_new)
    h_out = hs.transpose(1, 2).to(k.dtype).contiguous()
    v_out = unchunk(vn, T, u.dtype) if save_new_value else None
    return h_out, v_out, (h if output_final_state else None)


def delta_rule_bwd_dhu(q, k, w, g, h0, dht, do, dv, scale, BT):
    """Backward of the state recurrence, from the last chunk to the first: chunk t stores
    dh[t] (the gradient of the state at its end), dv2 = k dh[t] * safe_exp(g_last - g) + dv,
    then dh <- dh * exp(g_last) + (q e^g scale)^T do - w^T dv2.  As fla's kernel does, the state
    (in k dh), q e^g scale and dv2 (in w^T dv2) are rounded to q's dtype where they enter a
    product: with bf16 inputs over hundreds of chunks that rounding is what fla's (and TileLang's
    example kernel's) answer carries.  Returns dh [B, NT, H, K, V]
    (q's dtype), dh0 (float32, when h0 is given), dv2 (dv's dtype)."""
    B, T, H, K = q.shape
    V = do.shape[-1]
    qc, kc, wc, doc, dvc = chunk(q, BT), chunk(k, BT), chunk(w, BT), chunk(do, BT), chunk(dv, BT)
    NT = qc.shape[2]
    if g is not None:
        gc, gl = chunk(g, BT), chunk_last(g, T, BT)
    dh = dht.float().clone() if dht is not None else torch.zeros(B, H, K, V, device=q.device)
    dhs = torch.empty(B, H, NT, K, V, device=q.device)
    dv2 = torch.empty_like(dvc)
    rd = lambda x: x.to(q.dtype).float()  # noqa: E731  (fla's kernel: an operand of tl.dot in q's dtype)
    for t in range(NT - 1, -1, -1):
        dhs[:, :, t] = dh
        d = torch.matmul(kc[:, :, t], rd(dh))
        qs = qc[:, :, t] * scale
        if g is not None:
            d = d * safe_exp(gl[:, :, t, None] - gc[:, :, t])[..., None]
            qs = qs * torch.exp(gc[:, :, t])[..., None]
            dh = dh * torch.exp(gl[:, :, t])[..., None, None]
        d = d + dvc[:, :, t]
        dv2[:, :, t] = d
        dh = dh + torch.matmul(rd(qs).transpose(-1, -2), doc[:, :, t]) - torch.matmul(wc[:, :, t].transpose(-1, -2), rd(d))
    dh_out = dhs.transpose(1, 2).to(q.dtype).contiguous()
    return dh_out, (dh if h0 is not None else None), unchunk(dv2, T, dv.dtype)


def chunk_o(q, k, v, h, g, scale, BT):
    """o = scale * ((q h[t]) e^g + causal(q k^T * safe_exp(g_t - g_j)) v) per chunk t
    (the diagonal included)."""
    T = q.shape[1]
    qc, kc, vc = chunk(q, BT), chunk(k, BT), chunk(v, BT)
    hc = h.float().transpose(1, 2)  # B H NT K V
    o = torch.matmul(qc, hc)
    A = torch.matmul(qc, kc.transpose(-1, -2))
    if g is not None:
        gc = chunk(g, BT)
        o = o * torch.exp(gc)[..., None]
        A = A * safe_exp(gc[..., :, None] - gc[..., None, :])
    A = A * tril(BT, q.device, strict=False)
    o = (o + torch.matmul(A, vc)) * scale
    return unchunk(o, T, v.dtype)


def chunk_bwd_dqkwg(q, k, v, g, do, h, dh, dv, w, scale, BT):
    """Per chunk t: dq, dk through the output (q h[t], the causal intra-chunk term) and the
    state update (k^T v into dh[t]); dw = -dv h[t]^T when w is given; dg (with g) is the
    gradient with respect to the chunk-local cumulative g, the state-decay term
    (sum(h[t] dh[t]) e^g_last + sum(dk k)) added at each chunk's last position, as fla does."""
    T = q.shape[1]
    qc, kc, vc, doc = chunk(q, BT), chunk(k, BT), chunk(v, BT), chunk(do, BT)
    hc, dhc = h.float().transpose(1, 2), dh.float().transpose(1, 2)  # B H NT K V
    ds = torch.matmul(doc, vc.transpose(-1, -2))
    dq = torch.matmul(doc, hc.transpose(-1, -2))
    dk = torch.matmul(vc, dhc.transpose(-1, -2))
    dw = None
    if w is not None:
        dw = unchunk(-torch.matmul(chunk(dv, BT), hc.transpose(-1, -2)), T, w.dtype)
    causal = tril(BT, q.device, strict=False)
    dg = None
    if g is not None:
        gc, gl = chunk(g, BT), chunk_last(g, T, BT)  # gl: B H NT
        dg_last = (hc * dhc).sum((-1, -2)) * torch.exp(gl)
        dq = dq * torch.exp(gc)[..., None] * scale
        dgc = (dq * qc).sum(-1)
        dk = dk * safe_exp(gl[..., None] - gc)[..., None]
        dgc = dgc - (kc * dk).sum(-1)
        dg_last = dg_last + (dk * kc).sum((-1, -2))
        ds = ds * safe_exp(gc[..., :, None] - gc[..., None, :]) * causal * scale
        ds2 = ds * torch.matmul(qc, kc.transpose(-1, -2))
        dgc = dgc + ds2.sum(-1) - ds2.sum(-2)
        dq = dq + torch.matmul(ds, kc)
        dk = dk + torch.matmul(ds.transpose(-1, -2), qc)
        dgc = dgc + last_valid_mask(T, BT, q.device) * dg_last[..., None]
        dg = unchunk(dgc, T, torch.float32)
    else:
        ds = ds * causal
        dq = (dq + torch.matmul(ds, kc)) * scale
        dk = dk + torch.matmul(ds.transpose(-1, -2), qc) * scale
    return unchunk(dq, T, q.dtype), unchunk(dk, T, k.dtype), dw, dg


# -- linear attention, l2 norm --------------------------------------------------------------

def linear_attn(q, k, v, scale, initial_state, output_final_state, normalize):
    """o_t = scale * q_t . sum_{s<=t} k_s v_s^T (plus q_t . S0), in plain differentiable torch;
    with ``normalize`` o_t is divided by scale * q_t . (z0 + sum_{s<=t} k_s) + 1e-10.
    Returns o (v's dtype) and the final state (float32 [B, H, K, V]; with ``normalize`` the
    pair (state, z [B, 1, H, K]))."""
    if normalize and isinstance(initial_state, tuple):
        s0, z0 = initial_state
    else:
        s0, z0 = initial_state, None
    qf, kf, vf = q.float(), k.float(), v.float()
    T = q.shape[1]
    scores = torch.einsum("bthk,bshk->bhts", qf, kf) * scale
    scores = scores * tril(T, q.device, strict=False)
    o = torch.einsum("bhts,bshv->bthv", scores, vf)
    if s0 is not None:
        o = o + torch.einsum("bthk,bhkv->bthv", qf, s0.float()) * scale
    final = None
    if output_final_state:
        final = torch.einsum("bshk,bshv->bhkv", kf, vf)
        if s0 is not None:
            final = final + s0.float()
    if normalize:
        kcum = kf.cumsum(1)
        if z0 is not None:
            kcum = kcum + z0.float()
        denom = (qf * scale * kcum).sum(-1, keepdim=True) + 1e-10
        o = o / denom
        final = (final, kcum[:, -1:].to(k.dtype))
    return o.to(v.dtype), final


def l2norm(x, eps, output_dtype):
    """y = x / sqrt(sum(x^2) + eps) over the last dimension; also returns 1/sqrt(...) (fp32)."""
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).sum(-1) + eps)
    y = (xf * rstd[..., None]).to(output_dtype or x.dtype)
    return y, rstd
