"""CPU stand-ins for diagnose_dsa.py's DIAG_DRY=1: dsa.py's five kernel interfaces computed the dense
way dsa.py's own reference does (full causal logits per sequence, masks by scatter, autograd for the
backward kernels), so the diagnosis's gather-based references are checked against another
formulation.  Same signatures and output shapes as the examples' interfaces."""

import torch
import torch.nn.functional as F


def _seqs(offsets):
    o = offsets.tolist()
    return [(o[i], o[i + 1]) for i in range(len(o) - 1)]


def _index_logits(q, w, k, lo, hi):
    n = hi - lo
    isc = q.shape[-1] ** -0.5
    qs = q[lo:hi].float() * isc  # the kernels round q * sm_scale to bf16 (shared); the ReLU's
    qs = qs + (qs.bfloat16().float() - qs).detach()  # kink makes that visible, so do the same
    lg = torch.einsum("shd,td->sht", qs, k[lo:hi].float()).relu()
    lg = (lg * w[lo:hi].float()[:, :, None]).sum(1)
    causal = torch.arange(n)[:, None] >= torch.arange(n)[None, :]
    return torch.where(causal, lg, float("-inf"))


def indexer_topk_reducesum_interface(q, w, k, topk, offsets):
    idx_all, score_all = [], []
    for lo, hi in _seqs(offsets):
        vals, idx = _index_logits(q, w, k, lo, hi).topk(topk, -1)
        idx = torch.where(torch.isfinite(vals), idx, -1)
        idx_all.append(idx)
        score_all.append(torch.softmax(vals, -1))
    return torch.cat(idx_all).int(), torch.cat(score_all)


def _mask(idx, n):
    m = torch.zeros(n, n + 1, dtype=torch.bool).scatter_(1, torch.where(idx < 0, n, idx).long(), True)[:, :n]
    return m & (torch.arange(n)[:, None] >= torch.arange(n)[None, :])


def _attn(q, kv, idx, lo, hi, d_v, sm_scale):
    n = hi - lo
    lg = torch.einsum("shd,td->sht", q[lo:hi].float(), kv[lo:hi].float()) * sm_scale
    return torch.where(_mask(idx[lo:hi], n)[:, None, :], lg, float("-inf"))


def sparse_mla_fwd_interface(q, kv, indices, offsets, sm_scale=None, d_v=512):
    sm_scale = sm_scale or q.shape[-1] ** -0.5
    kv, idx = kv.squeeze(-2), indices.squeeze(-2)
    os_, ls = [], []
    for lo, hi in _seqs(offsets):
        lg = _attn(q, kv, idx, lo, hi, d_v, sm_scale)
        ls.append(torch.logsumexp(lg, -1))
        os_.append(torch.einsum("sht,td->shd", torch.softmax(lg, -1), kv[lo:hi, :d_v].float()))
    return torch.cat(os_).bfloat16(), torch.cat(ls)


def sparse_mla_topk_reducesum_interface(q, kv, topk_indices, lse, offsets, dim_v):
    kv, idx = kv.squeeze(-2), topk_indices.squeeze(-2)
    out = []
    for lo, hi in _seqs(offsets):
        lg = _attn(q, kv, idx, lo, hi, dim_v, q.shape[-1] ** -0.5)
        p = torch.exp(lg - lse[lo:hi].float()[:, :, None]).sum(1)
        g = torch.gather(F.pad(p, (0, 1)), 1, torch.where(idx[lo:hi] < 0, hi - lo, idx[lo:hi]).long())
        out.append(g / g.sum(-1, keepdim=True))
    return torch.cat(out)[:, None, :]


def sparse_mla_bwd(q, kv, o, do, indices, lse, offsets, sm_scale=None):
    sm_scale = sm_scale or q.shape[-1] ** -0.5
    d_v = do.shape[-1]
    qf = q.float().requires_grad_()
    kvf = kv.squeeze(-2).float().requires_grad_()
    idx = indices.squeeze(-2)
    outs = []
    for lo, hi in _seqs(offsets):
        lg = _attn(qf, kvf, idx, lo, hi, d_v, sm_scale)
        outs.append(torch.einsum("sht,td->shd", torch.softmax(lg, -1), kvf[lo:hi, :d_v]))
    torch.cat(outs).backward(do.float())
    return qf.grad.bfloat16(), kvf.grad[:, None, :].bfloat16()


def indexer_bwd_interface(q, w, k, attn_score, index_score, topk_indices, offsets):
    qf, wf, kf = (t.float().requires_grad_() for t in (q, w, k))
    loss = 0
    for lo, hi in _seqs(offsets):
        idx = topk_indices[lo:hi].long()
        lg = _index_logits(qf, wf, kf, lo, hi)
        v = torch.gather(F.pad(lg, (0, 1), value=float("-inf")), 1, torch.where(idx < 0, hi - lo, idx))
        logp = torch.log_softmax(v, -1)
        ok = idx >= 0
        loss = loss - (attn_score[lo:hi].float() * torch.where(ok, logp, 0.0)).sum()
    loss.backward()
    return qf.grad.bfloat16(), wf.grad.bfloat16(), kf.grad.bfloat16()
