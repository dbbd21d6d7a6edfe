"""A tenth set of programs in TileLang's idioms (tests/unseen_programs10.py): a whole
FlashAttention backward (preprocess, main kernel with dQ atomics, postprocess; also in
BSHD with TileLang's dQ index map and explicit wgmma waits), a GQA backward by tile atomics,
varlen attention over cu_seqlens, sliding-window + softcap, sinks, ALiBi, fp8 scores with
bf16 values, head dim 96, Mamba-2 chunk state / chunk scan, retention, block-sparse and
split-K GEMMs, global abs-max by atomics, per-token fp8 quantization, vector atomics,
``T.loop_break``, nested fragment conditions, ``T.dynamic`` with two outputs, stepped
per-thread loops, fragment reshapes, shared-tile reductions, a warp bitonic sort, legacy
reducers, shared and tile atomics.  Each builds to an sm_90a cubin on the CPU; on a GPU
each matches torch written to TileLang's meaning."""

import math

import pytest

import tilecute

import rounds
import unseen_programs10 as P

PROGRAMS = ["attn_bwd_all", "gqa_bwd_tile_atomics", "varlen_attn_fwd", "sliding_window_softcap",
            "attn_with_sinks", "alibi_attn", "mamba2_chunk_state", "mamba2_chunk_scan",
            "retention_parallel", "blocksparse_gemm_mask", "splitk_swizzle_tail",
            "global_absmax_atomic", "per_token_fp8_quant", "atomic_vector_scatter",
            "first_match_break", "fragment_conditions_nested", "two_outputs_dynamic_rows",
            "stepped_thread_loops", "reshape_fragment_groups", "attn_bwd_dq_layout_all",
            "fp8_qk_bf16_pv", "flash_fwd_d96", "gemm_k_subtiles", "gemm_scaled_a_schedule",
            "shared_reduce_and_colmax", "warp_bitonic_shfl", "reducer_softmax",
            "shared_atomic_buckets", "tile_atomic_max_min", "neg_dim_reduce_scan",
            "attn_bwd_wg_wait"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated code says -------------------------------------------------------------
def test_varlen_bounds_come_from_the_tensor():
    src = _src(P.varlen_attn_fwd())
    assert "start = cu_seqlens[bz]" in src and "seqlen = cu_seqlens[bz + 1] - start" in src
    assert "for k in cutlass.range(0, hi):" in src


def test_loop_break_leaves_the_walk():
    """The break becomes a flag the loop tests; the count after it is guarded."""
    src = _src(P.first_match_break())
    assert "while " in src and "visited[" in src


def test_dq_index_map_reaches_the_atomics():
    src = _src(P.attn_bwd_dq_layout())
    assert "tca.atomic_add(dQ_layout, (bz, (k * 64 + " in src


# ---- refusals ---------------------------------------------------------------------------------
def test_fragment_layout_over_half_the_block_runs_there():
    """Rows on threads i % 64 (threads 0..63 of 128, a row a thread step): was refused
    ('spreads it over threads 0..63 only'); the copies over it now run on those threads
    (tests/test_partial_thread_fragments.py)."""
    import tilecute.language as T
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts
    from tilecute.transform.pipeline import run_passes

    @T.prim_func
    def fl(X: T.Tensor((128, 128), T.float32), Y: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((128, 128), T.float32)
            T.annotate_layout({x: T.Fragment((128, 128), forward_thread_fn=lambda i, j: i % 64,
                                             forward_index_fn=lambda i, j: i // 64 * 128 + j)})
            T.copy(X, x)
            T.copy(x, Y)

    func = run_passes(fl, "sm_90a", until="infer_layouts")
    assert [s.span for s in walk_stmts(func.kernels[0].body)
            if isinstance(s, N.WarpGroups)] == [(0, 64)]
    lay = next(s.layout for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Allocate))
    assert lay == N.Layout("blocked", threads=64, vector=128)


# ---- on the GPU -------------------------------------------------------------------------------
_rel = rounds.max_error_within
_run = rounds.run
_r = rounds.randn


def _attn_ref(q, k, v, mask=None, scale=None, bias=None):
    """softmax(q k^T * scale + bias, masked) v over (..., S, D) float tensors; also the
    natural log-sum-exp of each row."""
    import torch
    s = q.float() @ k.float().transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.softmax(s, dim=-1) @ v.float(), lse


def _attn_grads(q, k, v, do, causal):
    """dQ, dK, dV, O and lse (natural) of softmax attention over (B, H, S, D)."""
    import torch
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    S = q.shape[-2]
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril() if causal else None
    o, lse = _attn_ref(qf, kf, vf, mask)
    o.backward(do.float())
    return qf.grad, kf.grad, vf.grad, o.detach(), lse.detach()


@pytest.mark.gpu
def test_attention_backward_bhsd_on_gpu():
    import torch
    torch.manual_seed(0)
    B, H, S, D = 1, 2, 256, 64
    q, k, v, do = (_r(B, H, S, D, dtype=torch.bfloat16) for _ in range(4))
    dq_ref, dk_ref, dv_ref, o, lse = _attn_grads(q, k, v, do, causal=True)
    prep, main, post = P.attn_bwd_all()
    Delta = torch.empty(B, H, S, device="cuda")
    ob = o.to(torch.bfloat16)
    _run(prep, ob, do, Delta)
    _rel(Delta, (ob.float() * do.float()).sum(-1), 1e-3)
    dQ = torch.zeros(B, H, S, D, device="cuda")
    dK = torch.empty(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    dV = torch.empty_like(dK)
    _run(main, q, k, v, do, (lse * 1.44269504).contiguous(), Delta, dQ, dK, dV)
    dQ16 = torch.empty_like(dK)
    _run(post, dQ, dQ16)
    _rel(dQ16, dq_ref, 3e-2)
    _rel(dK, dk_ref, 3e-2)
    _rel(dV, dv_ref, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("wg_wait", [None, (-1, 1)])
def test_attention_backward_bshd_dq_layout_on_gpu(wg_wait):
    import torch
    torch.manual_seed(1)
    B, S, H, D = 1, 128, 2, 64
    q, k, v, do = (_r(B, S, H, D, dtype=torch.float16) for _ in range(4))
    t = lambda x: x.transpose(1, 2)  # noqa: E731  (BSHD <-> BHSD)
    dq_ref, dk_ref, dv_ref, o, lse = _attn_grads(t(q), t(k), t(v), t(do), causal=True)
    delta = (o * t(do).float()).sum(-1).contiguous()
    main, post = P.attn_bwd_dq_layout_all(wg_wait)
    dQ = torch.zeros(B, S, H, D, device="cuda")
    dK = torch.empty(B, S, H, D, device="cuda", dtype=torch.float16)
    dV = torch.empty_like(dK)
    _run(main, q, k, v, do, (lse * 1.44269504).contiguous(), delta, dQ, dK, dV)
    dQ16 = torch.empty_like(dK)
    _run(post, dQ, dQ16)
    _rel(t(dQ16), dq_ref, 3e-2)
    _rel(t(dK), dk_ref, 3e-2)
    _rel(t(dV), dv_ref, 3e-2)


@pytest.mark.gpu
def test_gqa_backward_tile_atomics_on_gpu():
    import torch
    torch.manual_seed(2)
    B, HQ, HK, S, D = 1, 4, 2, 128, 64
    q, do = _r(B, S, HQ, D, dtype=torch.float16), _r(B, S, HQ, D, dtype=torch.float16)
    k, v = _r(B, S, HK, D, dtype=torch.float16), _r(B, S, HK, D, dtype=torch.float16)
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    rep = lambda x: x.repeat_interleave(HQ // HK, dim=1)  # noqa: E731
    qf, kf, vf = t(q).float().requires_grad_(), t(k).float().requires_grad_(), t(v).float().requires_grad_()
    o, lse = _attn_ref(qf, rep(kf), rep(vf))
    o.backward(t(do).float())
    delta = (o.detach() * t(do).float()).sum(-1).contiguous()
    dQ = torch.zeros(B, S, HQ, D, device="cuda")
    dK = torch.zeros(B, S, HK, D, device="cuda")
    dV = torch.zeros(B, S, HK, D, device="cuda")
    _run(P.gqa_bwd_tile_atomics(), q, k, v, do, (lse.detach() * 1.44269504).contiguous(), delta, dQ, dK, dV)
    _rel(t(dQ), qf.grad, 2e-2)
    _rel(t(dK), kf.grad, 2e-2)
    _rel(t(dV), vf.grad, 2e-2)


@pytest.mark.gpu
def test_varlen_attention_on_gpu():
    import torch
    torch.manual_seed(3)
    lens = [192, 70, 129]
    H, D = 2, 64
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = (_r(total, H, D, dtype=torch.float16) for _ in range(3))
    O = torch.zeros(total, H, D, device="cuda", dtype=torch.float16)
    _run(P.varlen_attn_fwd(), q, k, v, cu, O)
    for b, n in enumerate(lens):
        s0 = int(cu[b])
        sl = slice(s0, s0 + n)
        mask = torch.ones(n, n, dtype=torch.bool, device="cuda").tril()
        ref, _ = _attn_ref(q[sl].transpose(0, 1), k[sl].transpose(0, 1), v[sl].transpose(0, 1), mask)
        _rel(O[sl].transpose(0, 1), ref, 1e-2)


@pytest.mark.gpu
def test_attention_forward_variants_on_gpu():
    import torch
    torch.manual_seed(4)
    B, H, S, D = 1, 2, 256, 64
    # sliding window + softcap
    q, k, v = (_r(B, H, S, D, dtype=torch.bfloat16) for _ in range(3))
    O = torch.empty_like(q)
    _run(P.sliding_window_softcap(), q, k, v, O)
    s = q.float() @ k.float().transpose(-1, -2) * D ** -0.5
    s = 30.0 * torch.tanh(s / 30.0)
    i = torch.arange(S, device="cuda")
    band = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 96)
    ref = torch.softmax(s.masked_fill(~band, float("-inf")), -1) @ v.float()
    _rel(O, ref, 2e-2)
    # sinks
    H = 4
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    sinks = torch.randn(H, device="cuda")
    O = torch.empty_like(q)
    LSE = torch.empty(B, H, S, device="cuda")
    _run(P.attn_with_sinks(), q, k, v, sinks, O, LSE)
    s = q.float() @ k.float().transpose(-1, -2) * D ** -0.5
    full = torch.cat([s, sinks.view(1, H, 1, 1).expand(B, H, S, 1)], dim=-1)
    ref = torch.softmax(full, -1)[..., :S] @ v.float()
    _rel(O, ref, 1e-2)
    _rel(LSE, torch.logsumexp(full, -1), 1e-3)
    # ALiBi (BSHD)
    S = 192
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)], device="cuda")
    O = torch.empty_like(q)
    _run(P.alibi_attn(), q, k, v, slopes, O)
    i = torch.arange(S, device="cuda")
    bias = slopes.view(H, 1, 1) * (i[None, :] - i[:, None]).float()
    mask = torch.ones(S, S, dtype=torch.bool, device="cuda").tril()
    ref, _ = _attn_ref(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, bias=bias)
    _rel(O.transpose(1, 2), ref, 1e-2)
    # fp8 scores, bf16 values
    S, D = 256, 128
    qf, kf = _r(B, 2, S, D), _r(B, 2, S, D)
    qs, ks = qf.abs().amax((-1, -2)) / 448, kf.abs().amax((-1, -2)) / 448
    q8 = (qf / qs[..., None, None]).to(torch.float8_e4m3fn)
    k8 = (kf / ks[..., None, None]).to(torch.float8_e4m3fn)
    v = _r(B, 2, S, D, dtype=torch.bfloat16)
    O = torch.empty(B, 2, S, D, device="cuda", dtype=torch.bfloat16)
    _run(P.fp8_qk_bf16_pv(), q8, k8, v, qs.contiguous(), ks.contiguous(), O)
    ref, _ = _attn_ref(q8.float() * qs[..., None, None], k8.float() * ks[..., None, None], v)
    _rel(O, ref, 2e-2)
    # head dim 96
    q, k, v = (_r(1, 2, 256, 96, dtype=torch.float16) for _ in range(3))
    O = torch.empty_like(q)
    _run(P.flash_fwd_d96(), q, k, v, O)
    _rel(O, _attn_ref(q, k, v)[0], 1e-2)


@pytest.mark.gpu
def test_state_space_and_retention_on_gpu():
    import torch
    torch.manual_seed(5)
    # chunk state
    B, C, L, H, G, Pd, Nd = 1, 2, 128, 4, 2, 64, 64
    x = _r(B, C * L, H, Pd, dtype=torch.bfloat16)
    Bm = _r(B, C * L, G, Nd, dtype=torch.bfloat16)
    dt = torch.rand(B, H, C, L, device="cuda") * 0.1
    dA = torch.cumsum(-torch.rand(B, H, C, L, device="cuda") * 0.05, dim=-1)
    states = torch.empty(B, C, H, Pd, Nd, device="cuda")
    _run(P.mamba2_chunk_state(), x, Bm, dt, dA, states)
    w = torch.exp(dA[..., -1:] - dA) * dt  # (B, H, C, L)
    xc = x.float().view(B, C, L, H, Pd)
    bc = Bm.float().view(B, C, L, G, Nd).repeat_interleave(H // G, dim=3)  # (B, C, L, H, N)
    ref = torch.einsum("bclhp,bclhn,bhcl->bchpn", xc, bc, w)
    _rel(states, ref, 2e-2)
    # chunk scan
    B, C, L, H, G, Pd, Nd = 1, 2, 64, 2, 1, 64, 64
    x = _r(B, C * L, H, Pd, dtype=torch.float16)
    Cm = _r(B, C * L, G, Nd, dtype=torch.float16, scale=0.3)
    Bm = _r(B, C * L, G, Nd, dtype=torch.float16, scale=0.3)
    dt = torch.rand(B, H, C, L, device="cuda") * 0.1
    dA = torch.cumsum(-torch.rand(B, H, C, L, device="cuda") * 0.05, dim=-1)
    prev = _r(B, C, H, Pd, Nd, dtype=torch.float16, scale=0.3)
    Dskip = torch.rand(H, device="cuda")
    out = torch.empty(B, C * L, H, Pd, device="cuda")
    _run(P.mamba2_chunk_scan(), x, Cm, Bm, dt, dA, prev, Dskip, out)
    xc = x.float().view(B, C, L, H, Pd)
    cc = Cm.float().view(B, C, L, G, Nd).repeat_interleave(H // G, dim=3)
    bb = Bm.float().view(B, C, L, G, Nd).repeat_interleave(H // G, dim=3)
    dAc = dA.permute(0, 2, 3, 1)  # (B, C, L, H)
    y_prev = torch.einsum("bclhn,bchpn->bclhp", cc, prev.float()) * torch.exp(dAc)[..., None]
    cb = torch.einsum("bcihn,bcjhn->bchij", cc, bb)
    decay = torch.exp(dAc.permute(0, 1, 3, 2)[..., :, None] - dAc.permute(0, 1, 3, 2)[..., None, :])
    causal = torch.ones(L, L, dtype=torch.bool, device="cuda").tril()
    wts = (cb * decay * dt.permute(0, 2, 1, 3)[..., None, :]).masked_fill(~causal, 0)
    y = y_prev + torch.einsum("bchij,bcjhp->bcihp", wts, xc) + Dskip.view(1, 1, 1, H, 1) * xc
    _rel(out, y.reshape(B, C * L, H, Pd), 2e-2)
    # retention
    B, H, S, D = 1, 4, 256, 64
    q, k, v = (_r(B, H, S, D, dtype=torch.float16, scale=0.3) for _ in range(3))
    O = torch.empty(B, H, S, D, device="cuda")
    _run(P.retention_parallel(), q, k, v, O)
    i = torch.arange(S, device="cuda")
    gam = 1 - 2.0 ** (-5.0 - torch.arange(H, device="cuda").float())
    diff = (i[:, None] - i[None, :]).float()
    dm = torch.where(diff >= 0, gam.view(H, 1, 1) ** diff.clamp(min=0), torch.zeros(1, device="cuda"))
    s = (q.float() @ k.float().transpose(-1, -2)) * dm
    ref = (s @ v.float()) / s.sum(-1, keepdim=True).abs().clamp(min=1.0)
    _rel(O, ref, 2e-2)


@pytest.mark.gpu
def test_gemm_variants_on_gpu():
    import torch
    torch.manual_seed(6)
    A, B = _r(256, 512, dtype=torch.float16), _r(512, 256, dtype=torch.float16)
    mask = torch.rand(2, 2, 16, device="cuda") < 0.5
    C = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    _run(P.blocksparse_gemm_mask(), A, B, mask, C)
    ref = torch.zeros(256, 256, device="cuda")
    for m in range(2):
        for n in range(2):
            for kk in range(16):
                if mask[m, n, kk]:
                    ref[m * 128:(m + 1) * 128, n * 128:(n + 1) * 128] += \
                        A[m * 128:(m + 1) * 128, kk * 32:(kk + 1) * 32].float() @ \
                        B[kk * 32:(kk + 1) * 32, n * 128:(n + 1) * 128].float()
    _rel(C, ref, 1e-2)

    A, B = _r(256, 1000, dtype=torch.float16), _r(1000, 384, dtype=torch.float16)
    C = torch.zeros(256, 384, device="cuda")
    _run(P.splitk_swizzle_tail(), A, B, C)
    _rel(C, A.float() @ B.float(), 1e-2)

    A, B = _r(128, 256, dtype=torch.float16), _r(256, 128, dtype=torch.float16)
    C = torch.empty(128, 128, device="cuda")
    _run(P.gemm_k_subtiles(), A, B, C)
    _rel(C, A.float() @ B.float(), 1e-2)

    A, B = _r(128, 512, dtype=torch.float16), _r(512, 128, dtype=torch.float16)
    sc = (torch.rand(512, device="cuda") + 0.5).half()
    C = torch.empty(128, 128, device="cuda")
    _run(P.gemm_scaled_a_schedule(), A, B, sc, C)
    _rel(C, (A * sc).float() @ B.float(), 1e-2)


@pytest.mark.gpu
def test_reductions_and_quantization_on_gpu():
    import torch
    torch.manual_seed(7)
    X = _r(512, 384, dtype=torch.bfloat16)
    amax = torch.zeros(1, device="cuda")
    _run(P.global_absmax_atomic(), X, amax)
    assert amax.item() == X.float().abs().max().item()

    X = _r(256, 1024, dtype=torch.bfloat16, scale=3.0)
    Xq = torch.empty(256, 1024, device="cuda", dtype=torch.float8_e4m3fn)
    Sc = torch.empty(256, device="cuda")
    _run(P.per_token_fp8_quant(), X, Xq, Sc)
    # the reference divides by a tensor: torch multiplies by the reciprocal of a Python
    # scalar divisor (`t / 448.0`), one rounding more than the kernel's division
    sref = X.float().abs().amax(1).clamp(min=1e-4) / torch.full((256,), 448.0, device="cuda")
    assert torch.equal(Sc, sref)
    qref = (X.float() / sref[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    assert torch.equal(Xq.float(), qref.float())

    X = _r(128, 128)
    S = torch.empty(128, device="cuda")
    Mx = torch.full((128,), float("-inf"), device="cuda")
    _run(P.shared_reduce_and_colmax(), X, S, Mx)
    _rel(S, X.sum(1), 1e-5)
    assert torch.equal(Mx, X.amax(0))

    X = _r(64, 32)
    Y = torch.empty_like(X)
    _run(P.warp_bitonic_shfl(), X, Y)
    assert torch.equal(Y, X.sort(dim=1).values)

    X = _r(128, 256)
    Y = torch.empty_like(X)
    _run(P.reducer_softmax(), X, Y)
    _rel(Y, torch.softmax(X, 1), 1e-5)

    X, idx = _r(256, 64), torch.randint(0, 100, (256,), device="cuda", dtype=torch.int32)
    Out = torch.zeros(8, 64, device="cuda")
    _run(P.shared_atomic_buckets(), X, idx, Out)
    ref = torch.zeros(8, 64, device="cuda").index_add_(0, (idx % 8).long(), X)
    _rel(Out, ref, 1e-5)

    X = _r(128, 128)
    Mx = torch.full((32, 128), float("-inf"), device="cuda")
    Mn = torch.full((32, 128), 2 ** 30, device="cuda", dtype=torch.int32)
    _run(P.tile_atomic_max_min(), X, Mx, Mn)
    assert torch.equal(Mx, X.view(4, 32, 128).amax(0))
    assert torch.equal(Mn, (X * 100.0).to(torch.int32).view(4, 32, 128).amin(0))

    X = _r(64, 128)
    S, Cs = torch.empty(64, device="cuda"), torch.empty(64, 128, device="cuda")
    _run(P.neg_dim_reduce_scan(), X, S, Cs)
    _rel(S, X.sum(1), 1e-5)
    _rel(Cs, X.cumsum(1), 1e-5)


@pytest.mark.gpu
def test_forms_on_gpu():
    import torch
    torch.manual_seed(8)
    M, N, E = 256, 128, 64
    X, Y = _r(M, N, dtype=torch.float16), _r(M, N)
    idx = torch.randint(0, E, (M,), device="cuda", dtype=torch.int32)
    O16, O32 = torch.zeros(E, N, device="cuda", dtype=torch.float16), torch.zeros(E, N, device="cuda")
    _run(P.atomic_vector_scatter(), X, Y, idx, O16, O32)
    _rel(O16, torch.zeros(E, N, device="cuda").index_add_(0, idx.long(), X.float()), 1e-2)
    _rel(O32, torch.zeros(E, N, device="cuda").index_add_(0, idx.long(), Y), 1e-5)

    X, thr = _r(128, 500), _r(128) + 2.0
    pos, seen = torch.empty(128, device="cuda", dtype=torch.int32), torch.empty(128, device="cuda", dtype=torch.int32)
    _run(P.first_match_break(), X, thr, pos, seen)
    hit = X > thr[:, None]
    first = torch.where(hit.any(1), hit.int().argmax(1), torch.full_like(pos, 500))
    assert torch.equal(pos, first.int())
    assert torch.equal(seen, torch.where(hit.any(1), first + 1, first).int())

    X, lo = _r(128, 128), _r(128)
    Yo = torch.empty_like(X)
    _run(P.fragment_conditions_nested(), X, lo, Yo)
    i = torch.arange(128, device="cuda")
    j = i % 64
    band = (((i[:, None] % 64) + j[None, :]) % 4 == 0) & (j[None, :] < 56)
    sgn = torch.where(lo < 0, -1.0, 1.0)[:, None]
    ref = torch.where(band, torch.minimum(torch.maximum(X, lo[:, None]), lo[:, None] + 1.0),
                      torch.where(X > 0, X * sgn, -X))
    assert torch.equal(Yo, ref)

    k = tilecute.compile(P.two_outputs_dynamic_rows(), out_idx=[-2, -1])
    X = _r(100, 256)
    mean, Yc = k(X)
    _rel(mean, X.mean(1), 1e-5)
    _rel(Yc, X - X.mean(1, keepdim=True), 1e-5)

    X = _r(4096)
    Ys, Ss = torch.empty(4096, device="cuda"), torch.empty(4, device="cuda")
    _run(P.stepped_thread_loops(), X, Ys, Ss)
    _rel(Ss, X.view(4, 1024).sum(1), 1e-5)
    pair = X.view(-1, 2)
    lo_ = pair[:, 0] + pair[:, 1]
    _rel(Ys, torch.stack([lo_, lo_ * 2.0], 1).view(-1), 1e-6)

    X = _r(128, 256)
    Yg, Am = torch.empty_like(X), torch.empty(128, 8, device="cuda")
    _run(P.reshape_fragment_groups(), X, Yg, Am)
    am = X.view(128, 8, 32).abs().amax(2)
    assert torch.equal(Am, am)
    _rel(Yg, (X.view(128, 8, 32) / am.clamp(min=1e-6)[..., None]).view(128, 256), 1e-6)
