"""The KDA-style programs of tests/kda_programs.py (TileLang's ``examples/kda`` idioms):
each builds to an sm_90a cubin on the CPU; on a GPU each matches torch written to
TileLang's meaning."""

import pytest

import tilecute

import kda_programs as P

PROGRAMS = ["token_pair_sums", "gated_column_sums", "reverse_state_recurrence",
            "subchunk_neighbour_sums", "late_gradient_tiles"]


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


def test_late_tiles_reuse_the_dead_gate_tile_bytes():
    """The program of TileLang's kda/chunk_bwd_intra's shape: the dk / dg tiles copied in at
    the end are planned on the bytes of tiles dead by then (dg's over beta's and g's), both
    loaded by TMA on one barrier of two arrivals: the GPU test below checks Dg reads dg."""
    import re
    src = tilecute.compile(P.late_gradient_tiles(), target="sm_90a").get_kernel_source()
    off = {m[0]: int(m[1]) for m in re.findall(r"^\s*(\w+) = cute\.make_tensor\(cute\.recast_ptr\(tc_smem \+ (\d+),",
                                                src, re.M)}
    assert off["g_s"] < off["dg_s"] + 4096 and off["dg_s"] < off["g_s"] + 4096, off
    loads = re.findall(r"tct\.load\((dK|dG)_desc, tc_smem \+ \d+, (tc_bar\d+),", src)
    assert len(loads) == 2 and loads[0][1] == loads[1][1], loads
    assert f"tct.init_barriers({loads[0][1]}, 1, 2)" in src


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


@pytest.mark.gpu
def test_late_gradient_tiles_on_gpu():
    import torch
    S, H, D, R, bd = 128, 2, 128, 16, 64
    torch.manual_seed(0)
    Q, K, G, dK, dG = (torch.randn(S, H, D, device="cuda") for _ in range(5))
    Beta = torch.randn(S, H, device="cuda")
    A = torch.randn(S, H, R, device="cuda")
    Dk, Dg = (torch.empty(S, H, D, device="cuda") for _ in range(2))
    tilecute.compile(P.late_gradient_tiles(S, H, D, R, bd))(Q, K, G, Beta, A, dK, dG, Dk, Dg)
    q, k, g, dk, dg, beta, a = (x.double().reshape(S // R, R, H, -1) for x in (Q, K, G, dK, dG, Beta, A))
    r = torch.arange(R, device="cuda")
    e = torch.exp2(g[:, :, None] - g[:, None, :])  # [tile, r, j, H, D] = 2^(g_r - g_j)
    low = (r[:, None] >= r[None, :]).double()[None, :, :, None, None]  # j <= r
    acc = (low * a.permute(0, 1, 3, 2)[..., None] * k[:, None] * e).sum(2)
    qa = q * acc
    acc = acc * beta
    # acc_t[r] = sum_{j >= r} A[j, r] q[j] 2^(g_j - g_r): e[:, j, r] = 2^(g_j - g_r)
    acc_t = (low * a.permute(0, 1, 3, 2)[..., None] * q[:, :, None] * e).sum(1)
    want_k = (acc + dk + acc_t).reshape(S, H, D)
    want_g = (qa + (acc - acc_t) * k + dg).reshape(S, H, D)
    _close(Dk, want_k, 1e-4)
    _close(Dg, want_g, 1e-4)  # dg's tile read from its own bytes, not g's or beta's left there
