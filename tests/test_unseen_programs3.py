"""A third set of programs in TileLang's idioms (tests/unseen_programs3.py), aimed at what
the core tile forms mean: each builds to an sm_90a cubin on the CPU, and on a GPU matches
torch written to TileLang's meaning (zeros read past a tensor's edge, nothing written
there; floor division; C's integer promotions; only the taken branch of T.if_then_else
read).  The fixes they led to have focused tests next to their code
(tests/test_passes.py: loops threads run differently often; tests/test_if_then_else_branches.py;
tests/test_narrow_int_promotion.py)."""

import pytest

import tilecute

import rounds
import unseen_programs3 as P

PROGRAMS = ["copy_ragged_tiles", "copy_ragged_left_top", "copy_dtype_casts",
            "copy_slices_unit_dims", "reduce_dims_mixed", "reduce_accumulate_steps",
            "scans_reverse_dims", "int_floor_ops", "promote_and_cast",
            "pipelined_cp_async_rowsum", "symbolic_loops", "threads_3d", "atomics_conflicts",
            "while_per_thread", "parallel_thread_conditions", "scalar_loops",
            "if_then_else_guards", "pipelined_stage_counts", "int_reductions",
            "mixed_dtype_minmax", "int8_dot_rows", "fragment_copies", "threads_2d_tiles"]


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_stage_counts_build(stages, tmp_path):
    func = P.pipelined_stage_counts(stages=stages)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    func = P.pipelined_cp_async_rowsum(stages=stages)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / "cp")).kernel_names


def test_per_thread_while_has_no_barrier_inside():
    src = tilecute.compile(P.while_per_thread()).get_kernel_source()
    loop = src[src.index("    while "):src.index("    Steps[")]
    assert "sync_threads" not in loop, loop
    assert "cute.arch.sync_threads()\n    Nb[" in src, src  # (the neighbour's slot, after it)


# ---- on the GPU ------------------------------------------------------------------------------
_run = rounds.run
_eq = rounds.equal_on_cpu


def _close(got, want, atol=1e-5, rtol=1e-5):
    rounds.close_on_cpu(got, want, atol, rtol)


@pytest.mark.gpu
def test_copy_programs_on_gpu():
    import torch
    a = torch.randn(100, 70, device="cuda")
    pad = torch.full((128, 96), 5.0, device="cuda")
    b = torch.full((100, 70), 5.0, device="cuda")
    bt = torch.empty(70, 100, device="cuda")
    _run(P.copy_ragged_tiles(), a, pad, b, bt)
    want = torch.zeros(128, 96, device="cuda")
    want[:100, :70] = a
    _eq(pad, want)
    _eq(b, a * 2 + 1)
    _eq(bt, a.T)
    gm, gn = (100 + 16 + 31) // 32, (70 + 16 + 31) // 32
    out = torch.empty(gm * 32, gn * 32, device="cuda")
    back = torch.empty(100, 70, device="cuda")
    _run(P.copy_ragged_left_top(), a, out, back)
    want = torch.zeros(gm * 32, gn * 32, device="cuda")
    want[16:116, 16:86] = a
    _eq(out, want)
    _eq(back, a + 10)
    a = torch.randn(64, 96, device="cuda") * 3
    i = torch.randint(-1000, 1000, (64, 96), dtype=torch.int32, device="cuda")
    h = torch.empty(64, 96, dtype=torch.float16, device="cuda")
    bf = torch.empty(64, 96, dtype=torch.bfloat16, device="cuda")
    f = torch.empty(64, 96, device="cuda")
    z = torch.empty(64, 96, dtype=torch.int32, device="cuda")
    _run(P.copy_dtype_casts(), a, i, h, bf, f, z)
    _eq(h, a.half())
    _eq(bf, a.half().float().bfloat16())
    _eq(f, i.float())
    _eq(z, (a * 100).trunc().int())
    x = torch.randn(3, 48, 40, device="cuda")
    col, win = torch.empty(3, 16, device="cuda"), torch.empty(3, 16, device="cuda")
    row, sub = torch.empty(3, 40, device="cuda"), torch.empty(3, 16, 8, device="cuda")
    out = torch.empty(3, 48, 40, device="cuda")
    _run(P.copy_slices_unit_dims(), x, col, row, win, sub, out)
    _eq(col, x[:, 5:21, 7])
    _eq(row, x[:, 9, :])
    _eq(win, x[:, 2, 20:36])
    _eq(sub, x[:, 8:24, 30:38])
    want = torch.zeros_like(x)
    want[:, 10:26, 3] = x[:, 5:21, 7]
    _eq(out, want)
    a = torch.randn(32, 64, device="cuda")
    h = torch.empty(32, 64, dtype=torch.float16, device="cuda")
    half = torch.empty(32, 32, device="cuda")
    big = torch.empty(40, 80, device="cuda")
    _run(P.fragment_copies(), a, h, half, big)
    _eq(h, a.half())
    _eq(half, a[:, 32:])
    want = torch.zeros(40, 80, device="cuda")
    want[8:40, 16:80] = a
    want[0:8, 0:16] = a[0:8, 0:16]
    _eq(big, want)


@pytest.mark.gpu
def test_reduction_and_scan_programs_on_gpu():
    import torch
    a = torch.randn(32, 64, device="cuda")
    outs = [torch.empty(n, device="cuda") for n in (64, 32, 32, 64, 64)]
    _run(P.reduce_dims_mixed(), a, *outs)
    _close(outs[0], a.sum(0))
    _eq(outs[1], a.max(1).values)
    _eq(outs[2], a.min(-1).values)
    _eq(outs[3], a.abs().max(0).values)
    _close(outs[4], a.abs().sum(0))
    a = torch.randn(64, 512, device="cuda")
    s, mx, cs = torch.empty(64, device="cuda"), torch.empty(64, device="cuda"), torch.empty(64, device="cuda")
    _run(P.reduce_accumulate_steps(), a, s, mx, cs)
    _close(s, a.sum(1), atol=1e-4, rtol=1e-4)
    _eq(mx, a.max(1).values)
    _close(cs, a.reshape(64, 8, 64).sum(dim=(0, 1)), atol=1e-4, rtol=1e-4)
    a = torch.randn(16, 64, device="cuda")
    c1, c0r, x1r, x0 = (torch.empty(16, 64, device="cuda") for _ in range(4))
    _run(P.scans_reverse_dims(), a, c1, c0r, x1r, x0)
    _close(c1, a.cumsum(1))
    _close(c0r, a.flip(0).cumsum(0).flip(0))
    _eq(x1r, a.flip(1).cummax(1).values.flip(1))
    _eq(x0, a.cummax(0).values)
    a = torch.randint(-1000, 1000, (32, 64), dtype=torch.int32, device="cuda")
    out = torch.empty(6, 32, dtype=torch.int32, device="cuda")
    cmax, csum = (torch.empty(64, dtype=torch.int32, device="cuda") for _ in range(2))
    _run(P.int_reductions(), a, out, cmax, csum)
    ac = a.cpu()
    want = [ac.sum(1), ac.max(1).values, ac.min(1).values]
    for op in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y):
        r = ac[:, 0].clone()
        for j in range(1, 64):
            r = op(r, ac[:, j])
        want.append(r)
    _eq(out, torch.stack(want).int())
    _eq(cmax, ac.max(0).values)
    _eq(csum, ac.sum(0).int())


@pytest.mark.gpu
def test_integer_and_dtype_programs_on_gpu():
    import torch
    a = torch.randint(-500, 500, (256,), dtype=torch.int32, device="cuda")
    d = torch.randint(1, 9, (256,), dtype=torch.int32, device="cuda") * \
        (torch.randint(0, 2, (256,), device="cuda") * 2 - 1).int()
    if not hasattr(torch, "uint32"):
        pytest.skip("torch without uint32")
    u = torch.randint(0, 2**32, (256,), dtype=torch.int64).to(torch.uint32).cuda()
    out = torch.empty(12, 256, dtype=torch.int32, device="cuda")
    uo = torch.empty(3, 256, dtype=torch.uint32, device="cuda")
    _run(P.int_floor_ops(), a, d, u, out, uo)
    A, D = a.cpu().long(), d.cpu().long()
    U = u.cpu().long()
    want = [A // 7, A % 7, A // -3, A % -3, A // D, A % D,
            torch.div(A, D, rounding_mode="trunc"), torch.fmod(A, D), A >> 3,
            ((A << 2) ^ (A & 0xFF)) | (A & -16), ~A, (A * 37 + 5) % 16 - (A // 16) * 3]
    _eq(out, torch.stack(want).int())
    wu = [U >> 5, U // 3, ((U << 3) & 0xFFFFFFFF) | (U >> 29)]
    _eq(uo.cpu().long(), torch.stack(wu))
    n = 512
    a8 = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    b8 = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    h = torch.randn(n, device="cuda").half()
    f = torch.randn(n, device="cuda").clamp(-4, 4)
    i = torch.randint(-1000, 1000, (n,), dtype=torch.int32, device="cuda")
    p8, q8, l8 = (torch.empty(n, dtype=torch.int8, device="cuda") for _ in range(3))
    w = torch.empty(n, dtype=torch.int32, device="cuda")
    s = torch.empty(n, device="cuda")
    qu = torch.empty(n, dtype=torch.uint8, device="cuda")
    hf = torch.empty(n, dtype=torch.float16, device="cuda")
    _run(P.promote_and_cast(), a8, b8, h, f, i, p8, w, s, q8, qu, l8, hf)
    A8, B8 = a8.cpu().int(), b8.cpu().int()
    _eq(p8, (A8 * B8).to(torch.int8))
    _eq(w, A8 * B8 + A8)
    want = h.float() + f + i.float() * 0.5 + (f > 0).float() * 3 + \
        torch.where(i % 2 == 0, 1.0, -1.0)
    _close(s, want, atol=1e-4, rtol=1e-5)
    _eq(q8, (f * 40).clamp(-128, 127).trunc().to(torch.int8))
    _eq(qu, (f.abs() * 50).trunc().to(torch.uint8))
    _eq(l8, (i.cpu() & 0xFF).to(torch.uint8).view(torch.int8))
    _eq(hf, (f * 30000).half())
    h = (torch.randn(256, device="cuda")).half()
    f = torch.randn(256, device="cuda")
    i = torch.randint(-5, 5, (256,), dtype=torch.int32, device="cuda")
    c8 = torch.randint(-127, 128, (256,), dtype=torch.int8, device="cuda")
    oh = torch.empty(256, dtype=torch.float16, device="cuda")
    of, og = torch.empty(256, device="cuda"), torch.empty(256, device="cuda")
    o8 = torch.empty(256, dtype=torch.int32, device="cuda")
    _run(P.mixed_dtype_minmax(), h, f, i, c8, oh, of, og, o8)
    _eq(oh, h.clamp(-0.75, 0.5) + h.clamp(min=0.25))
    _eq(of, i.float().clamp(min=2.5) + i.float().clamp(max=-1.5))
    _eq(og, torch.maximum(h.float(), f) - torch.minimum((h * 2).float(), f))
    _eq(o8, c8.int().clamp(-100, 100) + c8.int().abs() * 1000)
    a = torch.randint(-128, 128, (64, 256), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    dd, big = (torch.empty(64, dtype=torch.int32, device="cuda") for _ in range(2))
    _run(P.int8_dot_rows(), a, b, dd, big)
    prod = a.cpu().int() * b.cpu().int()
    _eq(dd, prod.sum(1).int())
    _eq(big, (prod > 100).sum(1).int())


@pytest.mark.gpu
def test_loop_and_pipeline_programs_on_gpu():
    import torch
    a = torch.randn(128, 1000, device="cuda").half()
    bias = torch.randn(1000, device="cuda").half()
    for stages in (1, 2, 3, 4):
        s, mx = torch.empty(128, device="cuda"), torch.empty(128, device="cuda")
        _run(P.pipelined_cp_async_rowsum(stages=stages), a, bias, s, mx)
        prod = a.float() * bias.float()
        pad = torch.nn.functional.pad(prod, (0, 24))  # (the last tile: zeros past K)
        run = pad.reshape(128, 16, 64).cumsum(1)      # acc after each step
        _close(s, prod.sum(1), atol=1e-2, rtol=1e-4)
        _close(mx, run.max(dim=2).values.max(dim=1).values, atol=1e-3, rtol=1e-4)
    a = torch.randn(64, 768, device="cuda")
    steps = a.reshape(64, 12, 64) * torch.arange(1, 13, device="cuda").float()[None, :, None]
    run = steps.cumsum(1)
    for stages in (1, 2, 3, 4):
        s, p = torch.empty(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
        _run(P.pipelined_stage_counts(stages=stages), a, s, p)
        _close(s, run[:, -1], atol=1e-3, rtol=1e-5)
        _close(p, run.max(1).values, atol=1e-3, rtol=1e-5)
    n = 1000
    x = torch.randn(n, device="cuda")
    cnt = torch.empty(n, dtype=torch.int32, device="cuda")
    y = torch.empty(n, device="cuda")
    stats = torch.empty(8, 2, device="cuda")
    tilecute.compile(P.symbolic_loops())(x, cnt, y, stats)
    g = torch.arange(n)
    xc = x.cpu()
    want_c = torch.tensor([int((xc[int(k) % 5::7] > 0).sum()) for k in g], dtype=torch.int32)
    _eq(cnt, want_c)
    idx = torch.stack([(g + u) % n for u in range(3)])
    _eq(y, xc[idx].max(0).values)
    xp = torch.nn.functional.pad(xc, (0, 24)).reshape(8, 128)
    _close(stats[:, 0], xp.sum(1), atol=1e-4, rtol=1e-4)
    last = xc[896:].max()
    _eq(stats[:, 1], torch.cat([xp[:7].max(1).values, last.reshape(1)]))


@pytest.mark.gpu
def test_thread_and_scalar_programs_on_gpu():
    import torch
    a = torch.randn(64, 64, device="cuda")
    ids = torch.empty(2, 4, 16, dtype=torch.int32, device="cuda")
    rs, at = torch.empty(64, device="cuda"), torch.empty(64, 64, device="cuda")
    _run(P.threads_3d(), a, ids, rs, at)
    tz, ty, tx = torch.meshgrid(torch.arange(2), torch.arange(4), torch.arange(16), indexing="ij")
    _eq(ids, (tx + 16 * ty + 64 * tz + 1000 * (tz * 10 + ty)).int())
    _close(rs, a.sum(1))
    _eq(at, a.T)
    b, band = torch.empty(64, 64, device="cuda"), torch.empty(4, device="cuda")
    _run(P.threads_2d_tiles(), a, b, band)
    _eq(b, 2 * a + 2 * a.flip(0))
    _close(band, a.reshape(4, 16 * 64).sum(1), atol=1e-4, rtol=1e-4)
    x = torch.randint(1, 60, (256,), dtype=torch.int32, device="cuda")
    steps, nb = torch.empty_like(x), torch.empty_like(x)
    _run(P.while_per_thread(), x, steps, nb)

    def collatz(v):
        c = 0
        while v != 1 and c < 200:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            c += 1
        return c
    want = torch.tensor([collatz(int(v)) for v in x.cpu()], dtype=torch.int32)
    _eq(steps, want)
    _eq(nb, want.reshape(2, 128).roll(-1, dims=1).reshape(256))
    a = torch.randn(64, 64, device="cuda")
    thr = torch.randn(64, device="cuda") * 0.5
    out, odd = torch.empty(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
    cnt = torch.empty(128, dtype=torch.int32, device="cuda")
    _run(P.parallel_thread_conditions(), a, thr, out, odd, cnt)
    _eq(out, torch.where(a > thr[:, None], a - thr[:, None], torch.zeros_like(a)))
    _eq(odd, torch.where(a.T > 0, a.T, torch.full_like(a, -1.0)))
    want = torch.zeros(128, dtype=torch.int32)
    want[:64] = (a.cpu() > 0).sum(0).int()
    _eq(cnt, want)
    x = torch.randn(512, device="cuda")
    r, g = torch.empty(4, device="cuda"), torch.empty(4, 8, dtype=torch.int32, device="cuda")
    _run(P.scalar_loops(), x, r, g)
    resets, last = 0, -1
    xs = x.cpu().tolist()
    run_t = torch.zeros((), dtype=torch.float32)
    for i, v in enumerate(xs):
        if v < -1.5:
            continue
        run_t = run_t + torch.tensor(v, dtype=torch.float32)
        if float(run_t) > 3.0:
            run_t, resets, last = torch.zeros((), dtype=torch.float32), resets + 1, i
    first = next((i for i, v in enumerate(xs) if v > 2.0), -1)
    _eq(r, torch.tensor([float(run_t), resets, last, first], dtype=torch.float32))
    t, bb = torch.meshgrid(torch.arange(4), torch.arange(8), indexing="ij")
    _eq(g, (t * 10 + bb - (bb // 3) * (t % 2)).int())


@pytest.mark.gpu
def test_atomic_and_guard_programs_on_gpu():
    import torch
    n = 4096
    x = torch.randn(n, device="cuda")
    k = torch.randint(-1000, 1000, (n,), dtype=torch.int32, device="cuda")
    cnt = torch.zeros(8, dtype=torch.int32, device="cuda")
    sm = torch.zeros(8, device="cuda")
    ext = torch.tensor([-2**31, 2**31 - 1], dtype=torch.int32, device="cuda")
    hist = torch.zeros(8, dtype=torch.int32, device="cuda")
    tile = torch.zeros(4, 64, device="cuda")
    _run(P.atomics_conflicts(), x, k, cnt, sm, ext, hist, tile)
    kc = k.cpu().long()
    bins = torch.where(kc < 0, (-kc) % 8, kc % 8)
    _eq(cnt, torch.bincount(bins, minlength=8).int())
    _close(sm, torch.zeros(8).index_add_(0, bins, x.cpu()), atol=1e-3, rtol=1e-4)
    _eq(ext, torch.tensor([int(kc.max()), int(kc.min())], dtype=torch.int32))
    _eq(hist, torch.bincount(kc % 8, minlength=8).int())
    base = torch.arange(256).reshape(4, 64).float() * 0.5
    _eq(tile, base * 16 + sum(range(16)))
    a = torch.randn(64, 64, device="cuda")
    xx = torch.randn(1000, device="cuda")
    b, y = torch.empty(64, 64, device="cuda"), torch.empty(1024, device="cuda")
    _run(P.if_then_else_guards(), a, xx, b, y)
    left = torch.nn.functional.pad(a, (1, 0))[:, :-1]
    right = torch.nn.functional.pad(a, (0, 1))[:, 1:]
    mid = a.clone()
    mid[1:-1] = a[:-2] - a[2:]
    _close(b, left + right + mid)
    want = torch.full((1024,), -1.0, device="cuda")
    want[:1000] = xx * xx[torch.clamp(torch.arange(1000, device="cuda") + 1, max=999)]
    _close(y, want)
