"""Torch reference stand-in for ``flash_attn`` (FlashAttention 2's Python API), used only by
``.ci/tilelang_gpu/run_example.py`` when the real package is not installed, so that TileLang's
examples whose *reference* calls FlashAttention can run their own checks under tilecute.

Written from the functions' documented semantics, in plain torch with float32 math (slow, exact
to fp32).  What is here: ``flash_attn_varlen_func`` (packed sequences by ``cu_seqlens``, causal
aligned to the bottom-right as FlashAttention >= 2.1 does, sliding window, softcap, GQA/MQA) and
``flash_attn_with_kvcache`` (contiguous or paged cache with ``block_table``, ``cache_seqlens``,
``cache_batch_idx``, appending new ``k``/``v`` into the cache in place, GQA/MQA).  Arguments the
examples never use and that this stand-in does not model (dropout, ALiBi, rotary, left padding,
returned attention probabilities) raise ``NotImplementedError`` naming the argument rather than
being ignored."""

import math

import torch

__version__ = "2.7.0+tilecute.torch_reference"
__all__ = ["flash_attn_varlen_func", "flash_attn_with_kvcache"]


def _refuse(name, value, default):
    if value is not None and value != default:
        raise NotImplementedError(f"flash_attn torch reference: argument {name}={value!r} is not modelled")


def _attend(q, k, v, scale, causal, window, softcap, k_len=None):
    """q [B, Sq, Hq, D], k [B, Sk, Hk, D], v [B, Sk, Hk, Dv] -> (out [B, Sq, Hq, Dv] fp32,
    lse [B, Hq, Sq] fp32).  ``k_len`` [B] (optional): keys at or past it are absent.  Query row i
    of a batch with Sk_b keys sits at key position i + Sk_b - Sq (bottom-right alignment)."""
    B, Sq, Hq, _ = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    if Hq % Hk:
        raise ValueError(f"flash_attn torch reference: {Hq} query heads is not a multiple of {Hk} key/value heads")
    rep = Hq // Hk
    # query head h reads key/value head h // rep: group the query heads of one kv head
    qf = q.float().transpose(1, 2).reshape(B, Hk, rep * Sq, -1)
    kf = k.float().transpose(1, 2)  # B Hk Sk D
    vf = v.float().transpose(1, 2)
    s = torch.matmul(qf, kf.transpose(-1, -2)).view(B, Hq, Sq, Sk) * scale
    if softcap and softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    dev = q.device
    kpos = torch.arange(Sk, device=dev)
    klen = torch.full((B,), Sk, device=dev, dtype=torch.long) if k_len is None else k_len.to(dev).long()
    valid = kpos[None, :] < klen[:, None]  # B Sk
    valid = valid[:, None, None, :].expand(B, 1, Sq, Sk)
    qpos = torch.arange(Sq, device=dev)[None, :] + (klen[:, None] - Sq)  # B Sq: the key position of each query
    left, right = window
    if causal:
        right = 0
    if right >= 0:
        valid = valid & (kpos[None, None, None, :] <= qpos[:, None, :, None] + right)
    if left >= 0:
        valid = valid & (kpos[None, None, None, :] >= qpos[:, None, :, None] - left)
    s = s.masked_fill(~valid, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # B Hq Sq
    p = torch.exp(s - lse[..., None].masked_fill(torch.isinf(lse)[..., None], 0.0))
    p = p.masked_fill(~valid, 0.0)  # a row with no key gives 0, as FlashAttention does
    out = torch.matmul(p.view(B, Hk, rep * Sq, Sk), vf).view(B, Hq, Sq, -1).transpose(1, 2)  # B Sq Hq Dv
    return out, lse


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """q [total_q, Hq, D], k [total_k, Hk, D], v [total_k, Hk, Dv]; sequence b holds rows
    cu_seqlens_q[b]:cu_seqlens_q[b+1] of q and cu_seqlens_k[b]:cu_seqlens_k[b+1] of k and v.
    Returns out [total_q, Hq, Dv] in q's dtype."""
    _refuse("dropout_p", dropout_p, 0.0)
    _refuse("alibi_slopes", alibi_slopes, None)
    _refuse("block_table", block_table, None)
    if return_attn_probs:
        raise NotImplementedError("flash_attn torch reference: return_attn_probs=True is not modelled")
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    cq = cu_seqlens_q.tolist()
    ck = cu_seqlens_k.tolist()
    out = torch.empty(q.shape[0], q.shape[1], v.shape[-1], device=q.device, dtype=q.dtype)
    for b in range(len(cq) - 1):
        qs, qe, ks, ke = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if qe == qs:
            continue
        o, _ = _attend(q[None, qs:qe], k[None, ks:ke], v[None, ks:ke], scale, causal, tuple(window_size), softcap)
        out[qs:qe] = o[0].to(q.dtype)
    return out


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """q [B, Sq, Hq, D]; k_cache/v_cache [B_cache, S_cache, Hk, D(v)], or with ``block_table``
    [B, max_pages] the paged form [num_pages, page_size, Hk, D(v)].  Batch b attends over its
    first cache_seqlens[b] cached keys (all S_cache when None) plus the new k/v, which are first
    written into the cache at cache_seqlens[b] (in place).  Returns out [B, Sq, Hq, Dv] in q's
    dtype (and the log-sum-exp [B, Hq, Sq] in float32 with ``return_softmax_lse``)."""
    _refuse("rotary_cos", rotary_cos, None)
    _refuse("rotary_sin", rotary_sin, None)
    _refuse("cache_leftpad", cache_leftpad, None)
    _refuse("alibi_slopes", alibi_slopes, None)
    B = q.shape[0]
    dev = q.device
    paged = block_table is not None
    if paged and cache_batch_idx is not None:
        raise NotImplementedError("flash_attn torch reference: cache_batch_idx with block_table is not modelled")
    if paged:
        page = k_cache.shape[1]
        cap = block_table.shape[1] * page
    else:
        cap = k_cache.shape[1]
    if cache_seqlens is None:
        seqlens = torch.full((B,), cap if k is None else cap - k.shape[1], device=dev, dtype=torch.long)
    elif isinstance(cache_seqlens, int):
        seqlens = torch.full((B,), cache_seqlens, device=dev, dtype=torch.long)
    else:
        seqlens = cache_seqlens.to(dev).long()
    bidx = torch.arange(B, device=dev) if cache_batch_idx is None else cache_batch_idx.to(dev).long()

    def slot(b, pos):  # (cache row, position in it) of key position ``pos`` of batch b
        if paged:
            return int(block_table[b, pos // page]), pos % page
        return int(bidx[b]), pos

    if k is not None:
        if v is None:
            raise ValueError("flash_attn torch reference: k given without v")
        for b in range(B):
            start = int(seqlens[b])
            for t in range(k.shape[1]):
                r, p = slot(b, start + t)
                k_cache[r, p] = k[b, t]
                v_cache[r, p] = v[b, t]
        seqlens = seqlens + k.shape[1]
    if paged:
        kk = k_cache[block_table.long()].flatten(1, 2)  # B, pages*page, Hk, D
        vv = v_cache[block_table.long()].flatten(1, 2)
    else:
        kk = k_cache[bidx]
        vv = v_cache[bidx]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out, lse = _attend(q, kk, vv, scale, causal, tuple(window_size), softcap, k_len=seqlens)
    out = out.to(q.dtype)
    return (out, lse) if return_softmax_lse else out
