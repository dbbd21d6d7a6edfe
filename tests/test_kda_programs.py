"""The KDA-style programs of tests/kda_programs.py (TileLang's ``examples/kda`` idioms):
each builds to an sm_90a cubin on the CPU; on a GPU each matches torch written to
TileLang's meaning."""

import pytest

import tilecute

import kda_programs as P

PROGRAMS = ["token_pair_sums", "gated_column_sums", "reverse_state_recurrence",
            "subchunk_neighbour_sums"]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name, tmp_path):
    info = tilecute.build_cubin(getattr(P, name)(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names and (tmp_path / "kernel.cubin").stat().st_size > 0


def test_second_subchunk_loop_starts_after_the_block_index():
    """``T.Pipelined(ii + 1, n)`` keeps its start: the loop runs from ii + 1, not 0."""
    src = tilecute.compile(P.subchunk_neighbour_sums(), target="sm_90a").get_kernel_source()
    assert "cutlass.range(ii + 1, " in src
    assert "cutlass.range(0, ii)" in src


# ---- on the GPU -------------------------------------------------------------------------------
def _close(got, want, tol):
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tol * max(want.float().abs().max().item(), 1e-6), err


@pytest.mark.gpu
def test_token_pair_sums_on_gpu():
    import torch
    B, S, H, D, C, SC = 1, 96, 4, 64, 32, 16
    torch.manual_seed(0)
    Q = torch.randn(B, S, H, D, device="cuda").bfloat16()
    K = torch.randn(B, S, H, D, device="cuda").bfloat16()
    G = -torch.rand(B, S, H, D, device="cuda").cumsum(1) * 0.05  # decaying gates
    beta = torch.rand(B, S, H, device="cuda").bfloat16()
    Aq = torch.full((B, S, H, C), 7.0, device="cuda")
    Ak = torch.full((B, S, H, SC), 7.0, device="cuda")
    tilecute.compile(P.token_pair_sums(B, S, H, D, C, SC))(Q, K, G, beta, Aq, Ak)
    want_q = torch.zeros_like(Aq)
    want_k = torch.zeros_like(Ak)
    kb = (K * beta[..., None]).float()  # a bfloat16 product, as TileLang computes it
    for t in range(S):
        ts = t // C * C + (t % C) // SC * SC
        for j in range(ts, t + 1):
            kj = K[:, j].float() * torch.exp2(G[:, t] - G[:, j])
            want_q[:, t, :, j % C] = (Q[:, t].float() * kj).sum(-1)
            if j < t:
                want_k[:, t, :, j - ts] = (kb[:, t] * kj).sum(-1)
    _close(Aq, want_q, 1e-3)
    _close(Ak, want_k, 1e-3)


@pytest.mark.gpu
def test_gated_column_sums_on_gpu():
    import torch
    S, D, bs = 200, 64, 64
    X, Y = torch.randn(S, D, device="cuda"), torch.randn(S, D, device="cuda")
    G = -torch.rand(S, D, device="cuda")
    Out = torch.empty(S, D, device="cuda")
    tilecute.compile(P.gated_column_sums(S, D, bs))(X, Y, G, Out)
    want = X - Y
    for t0 in range(0, S, bs):
        last = min(S, t0 + bs) - 1
        col = (X[t0:last + 1] * Y[t0:last + 1]).sum(0) + (Y[t0:last + 1] ** 2).sum(0)
        want[last] += col + torch.exp2(G[last])
    _close(Out, want, 1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_reverse_state_recurrence_on_gpu(stages):
    import torch
    S, DK, DV, bs, scale = 256, 64, 64, 64, 0.5
    NT = S // bs
    torch.manual_seed(1)
    Q = (torch.randn(S, DK, device="cuda") * 0.3).bfloat16()
    K = (torch.randn(S, DK, device="cuda") * 0.3).bfloat16()
    dO = (torch.randn(S, DV, device="cuda") * 0.3).bfloat16()
    G = -torch.rand(S, DK, device="cuda") * 0.5
    Hlast = torch.randn(DK, DV, device="cuda").bfloat16()
    Hs = torch.empty(NT, DK, DV, device="cuda", dtype=torch.bfloat16)
    V2 = torch.empty(S, DV, device="cuda")
    Hfin = torch.empty(DK, DV, device="cuda")
    tilecute.compile(P.reverse_state_recurrence(S, DK, DV, bs, scale=scale, stages=stages))(
        Q, K, dO, G, Hlast, Hs, V2, Hfin)
    h = Hlast.float()
    for r in reversed(range(NT)):
        hb = h.bfloat16()
        _close(Hs[r], hb, 1e-2)
        rows = slice(r * bs, (r + 1) * bs)
        _close(V2[rows], K[rows].float() @ hb.float(), 1e-2)
        h = h * torch.exp2(G[(r + 1) * bs - 1])[:, None] + scale * (Q[rows].float().T @ dO[rows].float())
    _close(Hfin, h, 1e-2)


@pytest.mark.gpu
def test_subchunk_neighbour_sums_on_gpu():
    import torch
    S, D, C, SC = 112, 32, 64, 16
    NC = C // SC
    A, X = torch.randn(S, C, device="cuda"), torch.randn(S, D, device="cuda")
    Out = torch.empty(S, D, device="cuda")
    tilecute.compile(P.subchunk_neighbour_sums(S, D, C, SC))(A, X, Out)
    pad = -(-S // C) * C
    Ap = torch.zeros(pad, C, device="cuda")
    Xp = torch.zeros(pad, D, device="cuda")
    Ap[:S], Xp[:S] = A, X
    want = torch.zeros(pad, D, device="cuda")
    for it in range(pad // C):
        n = min(NC, -(-(S - it * C) // SC))
        for ii in range(NC):
            r = slice(it * C + ii * SC, it * C + (ii + 1) * SC)
            for jj in range(ii):
                rj = slice(it * C + jj * SC, it * C + (jj + 1) * SC)
                want[r] += Ap[r, jj * SC:(jj + 1) * SC] @ Xp[rj]
            for jj in range(ii + 1, n):
                rj = slice(it * C + jj * SC, it * C + (jj + 1) * SC)
                want[r] += Ap[rj, ii * SC:(ii + 1) * SC].T @ Xp[rj]
    _close(Out, want[:S], 1e-2)  # float32 GEMMs may run as tf32 (TileLang's meaning)
