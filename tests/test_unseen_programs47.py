"""A forty-seventh set of programs in TileLang's idioms (tests/unseen_programs47.py): chunked
linear-attention and state-space kernels -- Mamba-2's chunk state (T.cumsum of the log-decay
in a fragment, the chunk total a T.reduce_sum, a ragged last chunk of a T.dynamic length, B
shared by a group of heads), its state passing (a serial loop over T.dynamic chunks carrying
the state fragment), its chunk output (C @ state plus the masked scores from registers as the
second GEMM's A), RetNet's parallel retention (per-head gamma, the decay mask in a T.Parallel,
the |row sum| normaliser across a T.Pipelined key loop), GLA's intra-chunk output with log-space
gates, a causal linear attention with its running state in registers (GQA), DeltaNet's WY
representation (forward substitution in shared memory), a width-4 short convolution's decode
step and Mamba-2's selective-scan decode step (states updated in place).

CPU: each builds to an sm_90a and an sm_80 cubin, and what decides its result is read in the
generated source.  All built and read right on sm_90a as first written; on sm_80 the three
whose one accumulator takes a GEMM with A from shared memory and one with A from registers
(ssd_chunk_output_regs_a, gla_chunk_output_log_gates, linear_attn_running_state) were refused
("'acc' needs layout ... warps=(4, 1) here but has ... warps=(2, 2)"): select_mma now gives
those T.gemms one partition (tests/test_attention_warp_partitions.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs47.py``)."""

import re

import pytest
import torch
import torch.nn.functional as F

import tilecute
import rounds
import unseen_programs47 as P

f16 = torch.float16

NAMES = ["deltanet_wy_forward_subst", "gla_chunk_output_log_gates", "linear_attn_running_state",
         "retnet_gamma_mask_normalised", "selective_scan_decode_step", "short_conv_decode_step",
         "ssd_chunk_output_regs_a", "ssd_chunk_state_frag_cumsum", "ssd_state_passing_carry"]

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))

test_every_program_is_listed = rounds.every_public_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, lambda n: getattr(P, n)())
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


# ---- what decides each result, in the generated source -----------------------------------------
def test_ssd_chunk_state_scans_a_fragment_and_decays_from_the_total():
    src = _body("ssd_chunk_state_frag_cumsum")
    assert "tcs.warp_inclusive_scan(" in src and "T.reduce_sum(inc, tot)" in src
    # past the sequence end dt is 0, and the cumsum is only stored inside it
    assert re.search(r"cutlass\.select_\(c \* 64 \+ l < seqlen, \w+, cutlass\.Float32\(0\.0\)\)", src)
    assert re.search(r"if c \* 64 \+ \w+ < seqlen:\s+dA_cs\[b, h, c, \w+\] = cs_s\[\w+\]", src)
    assert re.search(r"cute\.math\.exp\(tot\[0\] - cs_s\[\w+\]\) \* dt_s\[\w+\]", src)
    assert "(0, h // 2, c * 64, b)" in src  # B of the head's group
    assert "T.gemm(x_s, b_s, st): st = x_s^T @ b_s" in src


def test_ssd_state_passing_stores_the_entering_state_then_updates():
    src = _body("ssd_state_passing_carry")
    loop = src.split("for c in cutlass.range(0, nchunks):", 1)[1]
    assert loop.index("prev") < loop.index("scale = cute.math.exp(dA_last[b, h, c])")
    assert re.search(r"st\[(\w+ \* 4 \+ \w+)\] = st\[\1\] \* scale \+ new\[\1\]", loop)
    # the final state after the loop (4 space indent: the kernel's top level)
    assert re.search(r"\n    for \w+ in cutlass\.range_constexpr\(2\):\n(        .*\n)+"
                     r"        cute\.make_tensor\(final\.iterator", loop)


def test_ssd_chunk_output_keeps_the_masked_scores_in_registers():
    src = _body("ssd_chunk_output_regs_a")
    assert "a_regs=True" in src and "# T.gemm(sc16, x_s, acc): acc += sc16 @ x_s" in src
    # the decay's loads are taken under the mask (if_then_else reads only its taken side)
    assert re.search(r"if (l\w*) >= \(s \+ (\w+)\):\s+(\w+) = cs_s\[\1\]\s+\w+ = cutlass\.Float32\(0\)\s+"
                     r"if \1 >= \(s \+ \2\):\s+(\w+) = cs_s\[\(s \+ \2\)\]\s+\w+ = cutlass\.Float32\(0\)\s+"
                     r"if \1 >= \(s \+ \2\):\s+(\w+) = dt_s\[\(s \+ \2\)\]\s+"
                     r"sc16\[\w+ \+ \2\] = cutlass\.Float16\(cutlass\.select_\(\1 >= \(s \+ \2\), "
                     r"sc\[\w+ \+ \2\] \* cute\.math\.exp\(\3 - \4\) \* \5, cutlass\.Float32\(0\.0\)\)\)", src)
    assert re.search(r"acc\[\w+ \+ \w+\] \* cute\.math\.exp\(cs_s\[l\]\)", src)
    assert "Dp[h] *" in src


def test_retnet_decays_by_the_heads_gamma_and_normalises_by_the_abs_row_sum():
    src = _body("retnet_gamma_mask_normalised")
    assert "lg = cute.math.log2(cutlass.Float32(1.0) - cute.math.exp2(cutlass.Float32(-5.0) - " \
           "cutlass.Float32(h)))" in src
    assert re.search(r"bx \* 64 \+ i >= kb \* 64 \+ \(j \+ \w+\) and kb \* 64 \+ \(j \+ \w+\) < seqlen", src)
    assert re.search(r"cute\.math\.exp2\(cutlass\.Float32\(bx \* 64 \+ i - kb \* 64 - \(j \+ \w+\)\) \* lg\)", src)
    assert "for kb in cutlass.range(0, ((bx + 1) * 64 + 64 - 1) // 64):" in src
    assert re.search(r"/ cute\.arch\.fmax\(cute\.math\.absf\(den\[", src)


def test_gla_scans_the_gates_and_rebases_q_and_k_on_the_first_row():
    src = _body("gla_chunk_output_log_gates")
    scan = src.index("tcs.warp_inclusive_scan(")
    assert scan < src.index("cute.math.exp(")
    assert re.search(r"cute\.math\.exp\((\w+)\[\w+\] - (\w+)\[\w+\]\)\)\s+(\w+)\[\w+\] = .*"
                     r"cute\.math\.exp\(\2\[\w+\] - \1\[\w+\]\)\)", src)
    assert re.search(r"cutlass\.select_\(\w+ >= \(j \+ \w+\), A\[\w+ \+ \w+\] \* cutlass\.Float32\(0\.125\)", src)
    assert "a_regs=True" in src


def test_linear_attention_carries_the_state_across_chunks():
    src = _body("linear_attn_running_state")
    loop = src.split("for c in cutlass.range(0, nchunks):", 1)[1]
    assert "hk = h // 2" in src and "(0, hk, " in loop
    # the state is cleared once, before the loop, and accumulated (not cleared) in it
    head = src.split("for c in cutlass.range(0, nchunks):", 1)[0]
    assert re.search(r"st\[\w+ \+ \w+\] = cutlass\.Float32\(0\.0\)", head)
    state_gemm = re.search(r"# T\.gemm\(k_s, v_s, st\): st \+= k_s\^T @ v_s\n\s+(tcm\.gemm\(.*\))", loop)
    assert state_gemm and "accumulate=False" not in state_gemm.group(1)
    assert loop.index("st_s.iterator") < loop.index("T.gemm(q_s, st_s, acc)")
    assert "a_regs=True" in src


def test_deltanet_substitutes_forward_row_by_row():
    src = _body("deltanet_wy_forward_subst")
    assert re.search(r"cutlass\.select_\(\w+ > \(j \+ \w+\), kk\[\w+ \+ \w+\] \* cutlass\.Float32\(-1\.0\)", src)
    loop = src.split("for i_3_ in cutlass.range(1, 32):", 1)[1]
    assert re.search(r"if m > (\w+) and m < i_3_:\s+row\[\1\] = row\[\1\] \+ A_s\[i_3_ \* 32 \+ m\] \* "
                     r"A_s\[m \* 32 \+ \1\]", loop)
    # the row is written back only after every thread read the rows above it
    assert re.search(r"cute\.arch\.sync_threads\(\)\s+\w+ = tc_tid\s+if \w+ < 32:\s+(\w+) = \w+\s+"
                     r"A_s\[i_3_ \* 32 \+ \1\] = row\[\1\]", loop)
    assert "cutlass.select_(i_4_ == (j_3_ + " in src  # + I


def test_short_conv_windows_state_and_x_and_shifts_the_state():
    src = _body("short_conv_decode_step")
    assert re.search(r"win\[\w+ \* 4 \+ \w+\] = cutlass\.select_\(\w+ < 3, \w+, \w+\)", src)
    assert re.search(r"state\[b, bd \* 128 \+ (\w+), (\w+)\] = win\[\1 \* 4 \+ \2 \+ 1\]", src)
    assert "cute.math.exp(cutlass.Float32(0.0) - acc[" in src  # silu


def test_selective_scan_decode_updates_the_state_before_reading_it_with_c():
    src = _body("selective_scan_decode_step")
    assert "cutlass.select_(t > cutlass.Float32(20.0), t, cute.math.log(cutlass.Float32(1.0) + " \
           "cute.math.exp(t)))" in src
    assert "dA[0] = cute.math.exp(dtv[0] * A[h])" in src
    update = src.index("* dA[0] + dtv[0] * ")
    store = src.index("cute.make_tensor(state.iterator", update)
    assert update < store < src.index("T.reduce_sum(st, yc)")


# ---- on the GPU ------------------------------------------------------------------------------
def _chunks(t, chunk):
    """(B, S, ...) -> (B, S // chunk, chunk, ...)."""
    return t.reshape(t.shape[0], t.shape[1] // chunk, chunk, *t.shape[2:])


@pytest.mark.gpu
def test_ssd_chunk_state_frag_cumsum_on_gpu():
    torch.manual_seed(0)
    B, S, H, G, Pd, N, C = 1, 200, 4, 2, 64, 64, 64
    x = torch.randn(B, S, H, Pd, device="cuda", dtype=f16)
    Bm = torch.randn(B, S, G, N, device="cuda", dtype=f16)
    dt = torch.rand(B, S, H, device="cuda") * 0.1
    A_log = torch.randn(H, device="cuda") * 0.5
    dA_cs, states = P.ssd_chunk_state_frag_cumsum()(x, Bm, dt, A_log)
    NC = (S + C - 1) // C
    pad = NC * C - S
    xp, bp = F.pad(x.float(), (0, 0, 0, 0, 0, pad)), F.pad(Bm.float(), (0, 0, 0, 0, 0, pad))
    dtp = F.pad(dt, (0, 0, 0, pad))
    cs = _chunks(dtp * -torch.exp(A_log), C).cumsum(2)  # (B, NC, C, H)
    decay = torch.exp(cs[:, :, -1:] - cs) * _chunks(dtp, C)
    bh = _chunks(bp, C).repeat_interleave(H // G, dim=3)  # (B, NC, C, H, N)
    ref = torch.einsum("bclhp,bclh,bclhn->bchpn", _chunks(xp, C), decay, bh)
    rounds.max_error_within(states, ref, 2e-2)
    got = dA_cs.permute(0, 2, 3, 1).reshape(B, NC * C, H)[:, :S]
    rounds.close(got, cs.reshape(B, NC * C, H)[:, :S], 1e-4)


@pytest.mark.gpu
def test_ssd_state_passing_carry_on_gpu():
    torch.manual_seed(1)
    B, NC, H, Pd, N = 2, 7, 3, 64, 32
    cst = torch.randn(B, NC, H, Pd, N, device="cuda")
    dA_last = -torch.rand(B, H, NC, device="cuda")
    init = torch.randn(B, H, Pd, N, device="cuda")
    prev, final = P.ssd_state_passing_carry()(cst, dA_last, init)
    st, want = init.clone(), []
    for c in range(NC):
        want.append(st.clone())
        st = st * torch.exp(dA_last[:, :, c])[..., None, None] + cst[:, c]
    rounds.close(prev, torch.stack(want, 1), 1e-4)
    rounds.close(final, st, 1e-4)


MMA_OUT = {"ssd_chunk_output_regs_a": [7], "gla_chunk_output_log_gates": [5],
           "linear_attn_running_state": [3, 4]}


def _kernel(name, mma):
    """The program as written (wgmma on sm_90a), or with warp mma.sync (option
    disable_wgmma: the sm_80 code path, whose one warp partition for the two GEMMs into one
    accumulator select_mma plans)."""
    if mma == "wgmma":
        return getattr(P, name)()
    return tilecute.compile(getattr(P, name).get_tir(), out_idx=MMA_OUT[name],
                            options={"disable_wgmma": True})


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["wgmma", "mma.sync"])
def test_ssd_chunk_output_regs_a_on_gpu(mma):
    torch.manual_seed(2)
    B, NC, C, H, G, Pd, N = 1, 3, 64, 4, 1, 64, 64
    S = NC * C
    x = torch.randn(B, S, H, Pd, device="cuda", dtype=f16)
    Cm = (torch.randn(B, S, G, N, device="cuda") * 0.3).to(f16)
    Bm = (torch.randn(B, S, G, N, device="cuda") * 0.3).to(f16)
    dt = torch.rand(B, H, S, device="cuda") * 0.1
    cs = _chunks((dt * -0.5).transpose(1, 2), C).cumsum(2).reshape(B, S, H).transpose(1, 2).contiguous()
    prev = (torch.randn(B, NC, H, Pd, N, device="cuda") * 0.3).to(f16)
    Dp = torch.randn(H, device="cuda")
    y = _kernel("ssd_chunk_output_regs_a", mma)(x, Cm, Bm, dt, cs, prev, Dp)
    cc, bc, xc = (_chunks(t.float(), C) for t in (Cm, Bm, x))  # (B, NC, C, ...)
    csc, dtc = _chunks(cs.transpose(1, 2), C), _chunks(dt.transpose(1, 2), C)  # (B, NC, C, H)
    inter = torch.einsum("bcln,bchpn->bclhp", cc[:, :, :, 0], prev.float()) * torch.exp(csc)[..., None]
    scores = torch.einsum("bcln,bcsn->bcls", cc[:, :, :, 0], bc[:, :, :, 0])[:, :, :, :, None]
    L = torch.exp(csc[:, :, :, None, :] - csc[:, :, None, :, :]) * dtc[:, :, None, :, :]
    L = L * torch.tril(torch.ones(C, C, device="cuda"))[None, None, :, :, None]
    intra = torch.einsum("bclsh,bcshp->bclhp", scores * L, xc)
    ref = (inter + intra).reshape(B, S, H, Pd) + Dp[:, None] * x.float()
    rounds.max_error_within(y, ref, 1e-2)


@pytest.mark.gpu
def test_retnet_gamma_mask_normalised_on_gpu():
    torch.manual_seed(3)
    B, H, S, D = 1, 4, 200, 64
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=f16) for _ in range(3))
    o = P.retnet_gamma_mask_normalised()(q, k, v)
    gamma = 1 - 2.0 ** (-5.0 - torch.arange(H, device="cuda", dtype=torch.float32))
    i = torch.arange(S, device="cuda")
    diff = (i[:, None] - i[None, :]).float()
    decay = torch.where(diff >= 0, gamma[:, None, None] ** diff.clamp(min=0), 0.0)
    sc = (q.float() @ k.float().transpose(-1, -2)) * D ** -0.5 * decay
    ref = (sc @ v.float()) / sc.sum(-1, keepdim=True).abs().clamp(min=1.0)
    rounds.max_error_within(o, ref, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["wgmma", "mma.sync"])
def test_gla_chunk_output_log_gates_on_gpu(mma):
    torch.manual_seed(4)
    B, NC, C, H, DK, DV = 1, 2, 64, 2, 64, 64
    S = NC * C
    q, k, v = (torch.randn(B, S, H, d, device="cuda", dtype=f16) for d in (DK, DK, DV))
    g = F.logsigmoid(torch.randn(B, S, H, DK, device="cuda")) / 16
    h0 = (torch.randn(B, NC, H, DK, DV, device="cuda") * 0.1).to(f16)
    o = _kernel("gla_chunk_output_log_gates", mma)(q, k, v, g, h0)
    scale = DK ** -0.5
    gc = _chunks(g, C).cumsum(2)  # (B, NC, C, H, DK)
    qc, kc, vc = (_chunks(t.float(), C) for t in (q, k, v))
    inter = torch.einsum("bclhk,bchkv->bclhv", qc * torch.exp(gc) * scale, h0.float())
    A = torch.einsum("bcihk,bcjhk,bcijhk->bcijh", qc, kc,
                     torch.exp(gc[:, :, :, None] - gc[:, :, None, :])) * scale
    A = A * torch.tril(torch.ones(C, C, device="cuda"))[None, None, :, :, None]
    ref = inter + torch.einsum("bcijh,bcjhv->bcihv", A, vc)
    rounds.max_error_within(o, ref.reshape(B, S, H, DV), 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["wgmma", "mma.sync"])
def test_linear_attn_running_state_on_gpu(mma):
    torch.manual_seed(5)
    B, S, H, HK, D = 1, 256, 2, 1, 64
    q = (torch.randn(B, S, H, D, device="cuda") * 0.1).to(f16)
    k = (torch.randn(B, S, HK, D, device="cuda") * 0.1).to(f16)
    v = (torch.randn(B, S, HK, D, device="cuda") * 0.1).to(f16)
    o, final = _kernel("linear_attn_running_state", mma)(q, k, v)
    kh, vh = (t.float().repeat_interleave(H // HK, dim=2) for t in (k, v))
    sc = torch.einsum("bihd,bjhd->bhij", q.float(), kh) * torch.tril(torch.ones(S, S, device="cuda"))
    ref = torch.einsum("bhij,bjhv->bihv", sc, vh)
    rounds.max_error_within(o, ref, 1e-2)
    rounds.max_error_within(final, torch.einsum("bshk,bshv->bhkv", kh, vh), 1e-3)


@pytest.mark.gpu
def test_deltanet_wy_forward_subst_on_gpu():
    torch.manual_seed(6)
    B, NC, C, H, DK, DV = 1, 3, 32, 2, 64, 64
    S = NC * C
    k = F.normalize(torch.randn(B, S, H, DK, device="cuda"), dim=-1).to(f16)
    v = torch.randn(B, S, H, DV, device="cuda", dtype=f16)
    beta = torch.rand(B, S, H, device="cuda")
    w, u = P.deltanet_wy_forward_subst()(k, v, beta)
    kc, vc, bc = _chunks(k.float(), C), _chunks(v.float(), C), _chunks(beta, C)
    kc, vc, bc = (t.transpose(2, 3) for t in (kc, vc, bc))  # (B, NC, H, C, ...)
    A = torch.tril(bc[..., None] * kc @ kc.transpose(-1, -2), -1)
    Tm = torch.linalg.inv(torch.eye(C, device="cuda") + A)
    rw = (Tm @ (kc * bc[..., None])).transpose(2, 3).reshape(B, S, H, DK)
    ru = (Tm @ (vc * bc[..., None])).transpose(2, 3).reshape(B, S, H, DV)
    rounds.max_error_within(w, rw, 1e-2)
    rounds.max_error_within(u, ru, 1e-2)


@pytest.mark.gpu
def test_short_conv_decode_step_on_gpu():
    torch.manual_seed(7)
    Bt, D, W = 5, 512, 4
    x = torch.randn(Bt, D, device="cuda", dtype=f16)
    state = torch.randn(Bt, D, W - 1, device="cuda", dtype=f16)
    weight = torch.randn(D, W, device="cuda", dtype=f16)
    bias = torch.randn(D, device="cuda", dtype=f16)
    win = torch.cat([state, x[..., None]], -1)
    y = P.short_conv_decode_step()(x, state, weight, bias)
    ref = F.silu((win.float() * weight.float()).sum(-1) + bias.float())
    rounds.close(y, ref, 2e-3)
    rounds.exact(state, win[..., 1:])


@pytest.mark.gpu
def test_selective_scan_decode_step_on_gpu():
    torch.manual_seed(8)
    Bt, H, G, Pd, N = 3, 8, 2, 64, 128
    state = torch.randn(Bt, H, Pd, N, device="cuda")
    x = torch.randn(Bt, H, Pd, device="cuda", dtype=f16)
    dt = torch.randn(Bt, H, device="cuda")
    dt[0, 0] = 25.0  # past softplus's threshold
    dt_bias = torch.randn(H, device="cuda") * 0.1
    A = -torch.rand(H, device="cuda")
    Bm, Cm = (torch.randn(Bt, G, N, device="cuda", dtype=f16) for _ in range(2))
    z = torch.randn(Bt, H, Pd, device="cuda", dtype=f16)
    Dp = torch.randn(H, device="cuda")
    before = state.clone()
    y = P.selective_scan_decode_step()(state, x, dt, dt_bias, A, Bm, Cm, z, Dp)
    d = F.softplus(dt + dt_bias, threshold=20.0)
    Bh, Ch = (t.float().repeat_interleave(H // G, dim=1) for t in (Bm, Cm))
    want = before * torch.exp(d * A)[..., None, None] + \
        (d[..., None] * x.float())[..., None] * Bh[:, :, None, :]
    rounds.close(state, want, 1e-4)
    ref = ((want * Ch[:, :, None, :]).sum(-1) + Dp[:, None] * x.float()) * F.silu(z.float())
    rounds.close(y, ref, 2e-3)
