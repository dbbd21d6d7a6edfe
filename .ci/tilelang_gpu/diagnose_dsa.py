"""Is tilecute computing one of TileLang's DSA training-example kernels wrong, or is dsa.py's
mismatch (kv.grad ratio 0.93, index_k.grad NaN on an H100) inherent to the example?

Run once on a GPU:  python3 .ci/tilelang_gpu/diagnose_dsa.py   (well under 90 s)

``TL_EXAMPLES`` (default /tmp/tlx/examples) is TileLang's examples folder; this cds into its
dsa_sparse_finetune/ and imports the kernel files there (``tilelang`` aliased to tilecute).

Part 1 -- each kernel alone, all fed the SAME inputs (dsa.py's test_kernel shapes and seed: S=2048
as two sequences of 1024, H=16, D=512+64, index_D=128, topk=64), in particular the kernel's own
topk_indices with their -1 entries, so top-k selection differences cannot enter.  Each output is
compared with an independent fp32 torch reference written from that kernel's own body:

* indexer_topk_reducesum -> index_score (softmax over the kernel's selected logits; also checks the
  selection itself: indices in [-1, t], no duplicates, and no unselected logit above the smallest
  selected one by more than bf16 noise);
* sparse_mla_fwd -> o, lse;
* sparse_mla_topk_reducesum -> attn_score (fed the kernel's lse);
* sparse_mla_bwd (preprocess + bwd + postprocess) -> dq, dkv (dkv = dK over all 576 columns
  plus dV over the first 512, scattered over the valid selected rows only);
* indexer_bwd -> dindex_q, dweights, dindex_k (fed the kernels' attn_score and index_score).

Each kernel runs three times, differing only in what the outputs' ``T.empty`` buffers hold when
the kernel starts (tilecute, like TileLang's adapters, allocates them with ``torch.empty``):
``empty`` (as dsa.py: whatever the caching allocator hands back), ``zeros`` and ``poison`` (7.0).
An output a kernel writes completely is the same in all three.  sparse_mla_bwd's dKV and
indexer_bwd's dIndexK are ``T.empty`` buffers the kernels only ``T.atomic_add`` into (and rows
no query selects are never touched): the program itself relies on zeroed memory, which neither
TileLang (torch.empty in its cython / tvm_ffi / nvrtc / cutedsl adapters) nor tilecute promises.
In the standalone files the freshly mapped memory happens to be zero; inside dsa.py the
allocator hands back freed blocks of earlier tensors -> garbage (kv.grad) / NaN bit patterns
(bf16 index_k.grad).  Expect ``zeros`` OK and ``poison`` off by exactly the poison there.

Part 2 -- dsa.py's own test_kernel (its source without the trailing call), run as-is and then
with ``torch.empty`` returning zeros during the kernels' calls: if the kv.grad / index_k.grad
mismatches vanish in the second run, they are the example's uninitialised accumulators, not a
tilecute wrong answer; the residual ratios (~0.01-0.05) are bf16 + top-k selection differences.

indexer_bwd's dIndexK is accumulated by bf16 atomics: its threshold is max(1e-2, 3 x the noise floor of
the same terms added in bf16), printed.

Per output: non-finite counts (got / ref), max|got-ref|, max|ref|, relative RMS err
(rms(got-ref)/rms(ref) over positions finite in both).  Final line: SUSPECT kernels (relative err
> 1e-2 or unexpected non-finite under ``zeros``), or none.
DIAG_DRY=1 (no GPU, S=256): the kernels are replaced by dense torch stand-ins written like
dsa.py's own reference (dry_dsa.py), to check this script's references; every line should be OK."""

import contextlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tlalias  # noqa: E402,F401
import torch  # noqa: E402

EXAMPLES = os.environ.get("TL_EXAMPLES", "/tmp/tlx/examples")
DSA = os.path.join(EXAMPLES, "dsa_sparse_finetune")
os.chdir(DSA)
sys.path.insert(0, DSA)

DRY = os.environ.get("DIAG_DRY") == "1"
DEV = "cpu" if DRY else "cuda"
if not DRY:
    from indexer_topk_reducesum import indexer_topk_reducesum_interface  # noqa: E402
    from indexer_bwd import indexer_bwd_interface  # noqa: E402
    from sparse_mla_fwd import sparse_mla_fwd_interface  # noqa: E402
    from sparse_mla_bwd import sparse_mla_bwd  # noqa: E402
    from sparse_mla_topk_reducesum import sparse_mla_topk_reducesum_interface  # noqa: E402
else:  # no GPU: the kernels are replaced by dense torch stand-ins (dsa.py's own formulation),
    # which checks this script's gather-based references against an independent formulation
    from dry_dsa import (indexer_topk_reducesum_interface, indexer_bwd_interface,
                         sparse_mla_fwd_interface, sparse_mla_bwd, sparse_mla_topk_reducesum_interface)

T0 = time.time()
SUSPECTS = []
_orig_empty = torch.empty


@contextlib.contextmanager
def empty_mode(mode):
    """'empty': torch.empty as is; 'zeros': zero-filled; 'poison': floats filled with 7.0."""
    if mode == "empty":
        yield
        return

    def fake(*a, **k):
        t = _orig_empty(*a, **k)
        if mode == "zeros":
            t.zero_()
        elif t.is_floating_point():
            t.fill_(7.0)
        return t

    torch.empty = fake
    try:
        yield
    finally:
        torch.empty = _orig_empty


def report(kernel, name, got, ref, mode, expect_finite=True, tol=1e-2):
    got = got.detach().float()
    ref = ref.detach().float()
    nf_got = int((~torch.isfinite(got)).sum())
    nf_ref = int((~torch.isfinite(ref)).sum())
    both = torch.isfinite(got) & torch.isfinite(ref)
    d = (got - ref)[both]
    r = ref[both]
    maxerr = d.abs().max().item() if d.numel() else float("nan")
    maxref = r.abs().max().item() if r.numel() else float("nan")
    rel = (d.square().mean().sqrt() / r.square().mean().sqrt().clamp_min(1e-30)).item() if d.numel() else float("nan")
    bad = rel > tol or (expect_finite and nf_got != nf_ref)
    verdict = "SUSPECT" if bad else "OK"
    print(f"  [{mode:6s}] {kernel:26s} {name:12s} nonfinite got/ref {nf_got:7d}/{nf_ref:<5d} "
          f"max|err| {maxerr:10.4g} max|ref| {maxref:10.4g} rel {rel:9.3g}  {verdict}", flush=True)
    if bad and mode == "zeros":
        SUSPECTS.append(f"{kernel}.{name} (rel {rel:.3g}, nonfinite {nf_got} vs ref {nf_ref})")
    return rel


def nonfinite(name, t):
    n = int((~torch.isfinite(t.float())).sum())
    print(f"  input {name:14s} shape {tuple(t.shape)} nonfinite {n}")


# ------------------------------------------------------------------ inputs (dsa.py test_kernel)
S, H, D, DT, ID, TOPK = int(os.environ.get("DIAG_S", 256 if DRY else 2048)), 16, 512, 64, 128, 64
torch.manual_seed(42)
q = torch.randn((S, H, D + DT)).to(DEV).bfloat16()
kv = torch.randn((S, D + DT)).to(DEV).bfloat16()
index_q = torch.randn((S, H, ID)).to(DEV).bfloat16()
weights = torch.randn((S, H)).to(DEV).bfloat16()
index_k = torch.randn((S, ID)).to(DEV).bfloat16()
do = torch.randn((S, H, D)).to(DEV).bfloat16()
offsets = torch.tensor([0, S // 2, S], dtype=torch.int32).to(DEV)
sm_scale = (D + DT) ** -0.5
isc = ID ** -0.5

bos = torch.repeat_interleave(offsets[:-1].long(), torch.diff(offsets).long())  # [S]
pos = torch.arange(S, device=DEV) - bos  # position inside its sequence


def selected(idx):
    """valid mask and global kv rows for topk indices [S, topk] (-1 = none)."""
    idx = idx.long()
    valid = (idx != -1) & (idx <= pos[:, None])
    rows = bos[:, None] + idx.clamp_min(0)
    return valid, rows


# -------------------------------------------------------------- 1. indexer_topk_reducesum
print("== indexer_topk_reducesum", flush=True)
try:
    with empty_mode("empty"):
        topk_idx, index_score = indexer_topk_reducesum_interface(index_q, weights, index_k, TOPK, offsets)
    valid, rows = selected(topk_idx)
    qs = (index_q.float() * isc).bfloat16().float()  # kernel stores q * sm_scale in bf16 shared
    kg = index_k.float()[rows]  # [S, topk, ID]
    lg = torch.einsum("shd,skd->skh", qs, kg).clamp_min(0)
    val = (lg * weights.float()[:, None, :]).sum(-1)
    val = torch.where(valid, val, float("-inf"))
    ref_score = torch.softmax(val, dim=-1)
    report("indexer_topk_reducesum", "index_score", index_score, ref_score, "empty")
    # the selection itself
    bad_range = int(((topk_idx < -1) | (topk_idx.long() > pos[:, None])).sum())
    srt = topk_idx.sort(-1).values
    dup = int(((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] != -1)).sum())
    nvalid = valid.sum(-1)
    want = torch.clamp(pos + 1, max=TOPK)
    short = int((nvalid != want).sum())
    # full logits per row (each sequence), kth-largest vs kernel's smallest selected
    worst = 0.0
    for b in range(offsets.numel() - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        full = torch.einsum("shd,td->sth", qs[lo:hi], index_k.float()[lo:hi]).clamp_min(0)
        full = (full * weights.float()[lo:hi, None, :]).sum(-1)
        n = hi - lo
        causal = torch.arange(n, device=DEV)[:, None] >= torch.arange(n, device=DEV)[None, :]
        full = torch.where(causal, full, float("-inf"))
        kth = full.topk(TOPK, -1).values[:, -1]
        sel = torch.where(valid[lo:hi], val[lo:hi], float("inf")).min(-1).values
        gap = (kth - sel)[torch.isfinite(kth) & torch.isfinite(sel)]
        worst = max(worst, gap.max().item() if gap.numel() else 0.0)
    print(f"  selection: out-of-range {bad_range}, duplicates {dup}, rows with wrong valid count {short}, "
          f"max(kth largest logit - smallest selected) {worst:.4g} (bf16 noise ~1e-2 of |logit|)")
    if bad_range or dup or short:
        SUSPECTS.append(f"indexer_topk_reducesum selection (range {bad_range}, dup {dup}, count {short})")
except Exception:
    traceback.print_exc()
    SUSPECTS.append("indexer_topk_reducesum (raised)")
    sys.exit(1)

valid, rows = selected(topk_idx)
print(f"  -1 entries: {int((topk_idx == -1).sum())} (rows with pos < topk); "
      f"rows of sequence 0 whose -1 slots load KV[0 + (-1)] (out of bounds): {int((topk_idx[:S // 2] == -1).any(-1).sum())}")

# fp32 reference attention over the kernel's own selection
kg = kv.float()[rows]  # [S, topk, 576]
qf = q.float()
logits = torch.einsum("shd,skd->shk", qf, kg) * sm_scale
logits = torch.where(valid[:, None, :], logits, float("-inf"))
ref_lse = torch.logsumexp(logits, -1)
ref_p = torch.softmax(logits, -1)
ref_o = torch.einsum("shk,skd->shd", ref_p, kg[..., :D])

# -------------------------------------------------------------- 2. sparse_mla_fwd
print("== sparse_mla_fwd", flush=True)
o = lse = None
for mode in ("empty", "zeros", "poison"):
    try:
        with empty_mode(mode):
            o_m, lse_m = sparse_mla_fwd_interface(q, kv.unsqueeze(-2), topk_idx.unsqueeze(-2), offsets,
                                                  sm_scale=None, d_v=D)
        report("sparse_mla_fwd", "o", o_m, ref_o, mode)
        report("sparse_mla_fwd", "lse", lse_m, ref_lse, mode)
        if mode == "empty":
            o, lse = o_m, lse_m
    except Exception:
        traceback.print_exc()
        SUSPECTS.append("sparse_mla_fwd (raised)")
if o is None:
    sys.exit(1)

# -------------------------------------------------------------- 3. sparse_mla_topk_reducesum
print("== sparse_mla_topk_reducesum (fed the kernel's lse)", flush=True)
p_k = torch.exp(torch.einsum("shd,skd->shk", qf, kg) * sm_scale - lse.float()[:, :, None])
p_k = torch.where(valid[:, None, :], p_k, 0.0).sum(1)
ref_attn = p_k / p_k.sum(-1, keepdim=True)
attn_score = None
for mode in ("empty", "zeros", "poison"):
    try:
        with empty_mode(mode):
            a = sparse_mla_topk_reducesum_interface(q, kv.unsqueeze(-2), topk_idx.unsqueeze(-2), lse, offsets,
                                                    dim_v=D).squeeze(-2)
        report("sparse_mla_topk_reducesum", "attn_score", a, ref_attn, mode)
        if mode == "empty":
            attn_score = a
    except Exception:
        traceback.print_exc()
        SUSPECTS.append("sparse_mla_topk_reducesum (raised)")
if attn_score is None:
    attn_score = ref_attn

# -------------------------------------------------------------- 4. sparse_mla_bwd
print("== sparse_mla_bwd (preprocess + bwd + postprocess; fed the kernel's o and lse)", flush=True)
P = torch.exp(torch.einsum("shd,skd->shk", qf, kg) * sm_scale - lse.float()[:, :, None])
P = torch.where(valid[:, None, :], P, 0.0)
dof = do.float()
dP = torch.einsum("shd,skd->shk", dof, kg[..., :D])
delta = (o.float() * dof).sum(-1)
dS = P * (dP - delta[:, :, None]) * sm_scale
ref_dq = torch.einsum("shk,skd->shd", dS, kg)
dk_rows = torch.einsum("shk,shd->skd", dS, qf)  # [S, topk, 576]
dk_rows[..., :D] += torch.einsum("shk,shd->skd", P, dof)
dk_rows = torch.where(valid[:, :, None], dk_rows, 0.0)
ref_dkv = torch.zeros(S, D + DT, device=DEV).index_add_(0, rows.reshape(-1), dk_rows.reshape(-1, D + DT))
untouched = torch.ones(S, dtype=torch.bool, device=DEV)
untouched[rows[valid]] = False
print(f"  kv rows no query selects (never written by bwd's atomics): {int(untouched.sum())}")
for mode in ("empty", "zeros", "poison"):
    try:
        with empty_mode(mode):
            dq, dkv = sparse_mla_bwd(q, kv.unsqueeze(-2), o, do, topk_idx.unsqueeze(-2), lse, offsets,
                                     sm_scale=None)
        report("sparse_mla_bwd", "dq", dq, ref_dq, mode)
        report("sparse_mla_bwd", "dkv", dkv.squeeze(-2), ref_dkv, mode)
        off = (dkv.squeeze(-2).float() - ref_dkv)
        print(f"           dkv - ref: mean over untouched rows {off[untouched].mean().item() if untouched.any() else 0:.4g}, "
              f"mean over selected rows {off[~untouched].mean().item():.4g}")
    except Exception:
        traceback.print_exc()
        SUSPECTS.append("sparse_mla_bwd (raised)")

# -------------------------------------------------------------- 5. indexer_bwd
print("== indexer_bwd (fed the kernels' attn_score, index_score, topk_indices)", flush=True)
for nm, t in (("index_q", index_q), ("weights", weights), ("index_k", index_k),
              ("attn_score", attn_score), ("index_score", index_score)):
    nonfinite(nm, t)
qs = (index_q.float() * isc).bfloat16().float()
kz = torch.where(valid[:, :, None], index_k.float()[rows], 0.0)  # [S, topk, ID]
lgt = torch.einsum("skd,shd->skh", kz, qs).clamp_min(0)
g = index_score.float() - attn_score.float()  # [S, topk]
ref_dw = (g[:, :, None] * lgt).sum(1)
dl = g[:, :, None] * (lgt > 0).float() * weights.float()[:, None, :]  # [S, topk, H]
ref_diq = torch.einsum("skh,skd->shd", dl, kz) * isc
dk_r = torch.einsum("skh,shd->skd", dl, qs)
dk_r = torch.where(valid[:, :, None], dk_r, 0.0)
ref_dik = torch.zeros(S, ID, device=DEV).index_add_(0, rows.reshape(-1), dk_r.reshape(-1, ID))
# dIndexK is accumulated by bf16 atomics (each add rounds to bf16; a key row gets up to S adds):
# the noise floor of that, the same fp32 terms added in bf16 in another order, sets its threshold
dik_bf = torch.zeros(S, ID, device=DEV, dtype=torch.bfloat16)
for kk in range(TOPK):
    for r in range(TOPK):  # one add per row at a time, so every add rounds as an atomic's does
        sel = pos % TOPK == r
        dik_bf.index_add_(0, rows[sel, kk], dk_r[sel, kk].bfloat16())
both = torch.isfinite(dik_bf.float())
floor = ((dik_bf.float() - ref_dik)[both].square().mean().sqrt() / ref_dik[both].square().mean().sqrt()).item()
print(f"  dindex_k bf16-accumulation noise floor (rel): {floor:.3g}; dindex_k is judged at max(1e-2, 3 x floor)")
for mode in ("empty", "zeros", "poison"):
    try:
        with empty_mode(mode):
            diq, dw, dik = indexer_bwd_interface(index_q, weights, index_k, attn_score, index_score, topk_idx, offsets)
        report("indexer_bwd", "dindex_q", diq, ref_diq, mode)
        report("indexer_bwd", "dweights", dw, ref_dw, mode)
        report("indexer_bwd", "dindex_k", dik, ref_dik, mode, tol=max(1e-2, 3 * floor))
        bad = ~torch.isfinite(dik.float())
        print(f"           dindex_k non-finite rows {int(bad.any(-1).sum())}, of them never selected "
              f"{int((bad.any(-1) & untouched).sum())}")
    except Exception:
        traceback.print_exc()
        SUSPECTS.append("indexer_bwd (raised)")

# -------------------------------------------------------------- 6. dsa.py itself, twice
print(f"== dsa.py test_kernel as-is, then with T.empty outputs zeroed ({time.time() - T0:.0f}s so far)", flush=True)
try:
    if DRY:
        raise SystemExit("DIAG_DRY: dsa.py itself needs the GPU; skipped")
    src = open(os.path.join(DSA, "dsa.py")).read()
    head, _, tail = src.rpartition("test_kernel()")
    assert tail.strip() == "", "dsa.py no longer ends with test_kernel()"
    ns = {"__name__": "dsa_diag"}
    exec(compile(head, os.path.join(DSA, "dsa.py"), "exec"), ns)
    print("  -- as-is (torch.empty):", flush=True)
    ns["test_kernel"]()
    print("  -- torch.empty -> zeros:", flush=True)
    with empty_mode("zeros"):
        ns["test_kernel"]()
except (Exception, SystemExit) as e:
    print(f"  {e}") if isinstance(e, SystemExit) else traceback.print_exc()

print(f"done in {time.time() - T0:.0f}s")
print("SUSPECT kernels (rel err > 1e-2 or unexpected non-finite with zeroed T.empty outputs): "
      + ("; ".join(SUSPECTS) if SUSPECTS else "none"))
