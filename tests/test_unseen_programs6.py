"""A sixth set of programs in TileLang's idioms (tests/unseen_programs6.py), aimed at memory
movement and control flow: copies past a tensor's end (either side) and below its start,
unit-dim and 1-D slices, fragment slices, reshapes and views, a shared tile reused by two
phases, carried scalars, stepped / reversed / unrolled / vectorized loops, while loops,
per-block branches and idle blocks, short and non-TMA pipelines, atomics returning the old
value, barriers in block-uniform branches, an annotated swizzle, fills of slices.  Each
builds to an sm_90a cubin on the CPU, and on a GPU matches torch written to TileLang's
meaning (an out-of-bounds source element of a T.copy reads 0, an out-of-bounds destination
element is skipped)."""

import pytest

import tilecute

import rounds
import unseen_programs6 as P

PROGRAMS = ["ragged_copy_roundtrip", "halo_negative_start", "ragged_store_from_shared",
            "unit_dim_slices", "row_and_column_1d", "fragment_slice_copies",
            "reshape_view_shared", "reshape_fragment", "shared_two_phases", "carried_scalars",
            "stepped_loops", "vectorized_tail", "parallel_with_serial", "while_first_above",
            "block_branches", "early_out_gemm", "pipelined_short", "pipelined_short_symbolic",
            "pipelined_gather", "atomic_old_values", "sync_in_uniform_branch",
            "annotated_swizzle_transposed", "fill_clear_slices", "window_sum_zero_padding"]
STAGED = ["pipelined_short", "pipelined_short_symbolic", "pipelined_gather", "early_out_gemm"]


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("stages", [1, 3, 4])
@pytest.mark.parametrize("name", STAGED)
def test_staged_program_builds(name, stages, tmp_path):
    assert tilecute.build_cubin(getattr(P, name)(stages=stages), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


def test_short_pipeline_prologue_loads_only_existing_steps():
    """With 3 stages the prologue's loads of steps 0 and 1 are each under `if s < steps`
    (a loop of 0 or 1 steps loads nothing past its end)."""
    # (the threads' own pipeline: its one block would get a producer warpgroup by default)
    src = tilecute.compile(P.pipelined_short(stages=3),
                           options={"disable_warp_specialize": True}).get_kernel_source()
    assert "if 0 < steps:" in src and "if 1 < steps:" in src, src


def test_ragged_copy_reads_zero_into_the_prefilled_fragment():
    """The copy into the fragment filled with 7 stores a value at every element: 0 where
    the source is out of bounds (never a skipped store that would keep the 7)."""
    import re
    src = tilecute.compile(P.ragged_copy_roundtrip()).get_kernel_source()
    assert re.search(r"\n( +)(tc_ld\d+) = cutlass.Float32\(0\)\n\1if .*:\n\1    \2 = A\[.*\]\n"
                     r"\1g\[[^]]*\] = \2\n", src), src


# ---- on the GPU ------------------------------------------------------------------------------
_run = rounds.run


def _close(got, want, atol=1e-5, rtol=1e-5):
    rounds.close_on_cpu(got, want, atol, rtol)


_eq = rounds.equal_on_cpu


def _eq_mul_add(got, a, m, c):
    """``got`` is float32 ``a * m + c`` as TileLang's CUDA C computes it: nvcc contracts
    ``x * m + c`` into one fma by default (--fmad=true; tilecute's CuTe DSL emits
    fma.rn.f32 too), C allows either, so each element is the fused value (one rounding:
    float64 then float32, exact for these magnitudes) or the unfused one (two)."""
    a = a.float().cpu()
    fused = (a.double() * m + c).float()
    product = a * m
    unfused = product + c
    got = got.float().cpu()
    bad = (got != fused) & (got != unfused)
    assert not bad.any(), (f"{int(bad.sum())} elements neither fused nor unfused, first at "
                           f"{bad.nonzero()[0].tolist()}: {got[bad][0]} vs {fused[bad][0]} / "
                           f"{unfused[bad][0]}")


@pytest.mark.gpu
def test_ragged_copies_on_gpu():
    import torch
    M, N = 100, 72
    a = torch.randn(M, N, device="cuda")
    b = torch.full((M, N), 123.0, device="cuda")
    s1, s2 = torch.full((M, 3), 9.0, device="cuda"), torch.full((M, 3), 9.0, device="cuda")
    _run(P.ragged_copy_roundtrip(), a, b, s1, s2)
    pad = torch.zeros(M, 96, device="cuda")
    pad[:, :N] = a
    sums = pad.view(M, 3, 32).sum(-1)
    _close(s1, sums)
    _close(s2, sums)  # the 7s of the padding were overwritten with 0
    _close(b, a * 2 + 1, 0, 0)  # nothing written past column N into the next row
    a = torch.randn(256, 64, device="cuda")
    b = torch.empty_like(a)
    _run(P.halo_negative_start(), a, b)
    z = torch.nn.functional.pad(a, (0, 0, 2, 2))
    _close(b, z[:-4] + 2 * z[2:-2] + z[4:])
    c = torch.full((70, 40), -1.0, device="cuda")
    _run(P.ragged_store_from_shared(), c)
    r = torch.arange(70, device="cuda")[:, None]
    k = torch.arange(40, device="cuda")[None, :]
    want = (r % 32) * 1000 + k % 32 + ((r // 32) * 16 + k // 32) * 100000
    _eq(c, want.float())


@pytest.mark.gpu
def test_slices_on_gpu():
    import torch
    x = torch.randn(2, 64, 3, 32, device="cuda")
    y, y2 = torch.empty(2, 3, 64, 32, device="cuda"), torch.empty(2, 3, 64, 32, device="cuda")
    col, row = torch.empty(2, 3, 64, device="cuda"), torch.empty(2, 3, 32, device="cuda")
    _run(P.unit_dim_slices(), x, y, y2, col, row)
    _eq(y, x.permute(0, 2, 1, 3))
    _eq(y2, 2 * x.permute(0, 2, 1, 3))
    _eq(col, x[:, :, :, 5].permute(0, 2, 1))
    _eq(row, x[:, 7] + 1)
    a = torch.randn(64, 96, device="cuda").half()
    at, r = torch.empty(96, 64, device="cuda").half(), torch.empty(96, 96, device="cuda").half()
    _run(P.row_and_column_1d(), a, at, r)
    _eq(at, a.t() * 2)
    _eq(r, a[torch.arange(96, device="cuda") % 64])
    a = torch.randn(128, 128, device="cuda")
    b = torch.empty_like(a)
    c, d = torch.empty(64, 64, device="cuda"), torch.empty(2, 128, device="cuda")
    _run(P.fragment_slice_copies(), a, b, c, d)
    t = (a * 3).view(2, 64, 2, 64)  # (by, i, bx, j)
    want_b = t.clone()
    want_b[:, 32:] += 1
    _eq(b, want_b.view(128, 128))
    _eq(c, t[:, 32:, :, :32].reshape(64, 64))
    _eq(d, t[:, :, :, 5].permute(2, 0, 1).reshape(2, 128))  # D[bx, by * 64 + i]


@pytest.mark.gpu
def test_reshape_and_view_on_gpu():
    import torch
    a = torch.randn(64, 64, device="cuda")
    b2, rev = torch.empty(32, 128, device="cuda"), torch.empty(4096, device="cuda")
    bits = torch.empty(64, 64, device="cuda", dtype=torch.int32)
    _run(P.reshape_view_shared(), a, b2, rev, bits)
    _eq(b2, a.reshape(32, 128))
    _eq(rev, a.flatten().flip(0))
    _eq(bits, a.view(torch.int32))
    a = torch.randn(32, 64, device="cuda")
    b = torch.empty(64, 32, device="cuda")
    _run(P.reshape_fragment(), a, b)
    _eq(b, (a + 1).reshape(64, 32))


@pytest.mark.gpu
def test_phases_and_scalars_on_gpu():
    import torch
    a, bt = torch.randn(128, 64, device="cuda"), torch.randn(128, 64, device="cuda")
    o = torch.empty_like(a)
    _run(P.shared_two_phases(), a, bt, o)
    cs = a.view(4, 32, 64).sum(1, keepdim=True)
    _close(o, (bt.view(4, 32, 64) + cs).view(128, 64))
    a = torch.randn(128, 50, device="cuda")
    p, mx = torch.empty_like(a), torch.empty(128, device="cuda")
    arg = torch.empty(128, device="cuda", dtype=torch.int32)
    _run(P.carried_scalars(), a, p, mx, arg)
    _close(p, a.cumsum(1), 1e-4, 1e-5)
    _eq(mx, a.amax(1))
    _eq(arg, a.argmax(1).int())


@pytest.mark.gpu
def test_loops_on_gpu():
    import torch
    a = torch.randn(64, 22, device="cuda")
    suf, o = torch.empty_like(a), torch.empty(64, 4, device="cuda")
    _run(P.stepped_loops(), a, suf, o)
    _close(suf, a.flip(1).cumsum(1).flip(1))
    _close(o[:, 0], a[:, 3::4].sum(1))
    _close(o[:, 1], a[:, [20, 17, 14, 11, 8, 5, 2]].sum(1))
    _close(o[:, 2], a[:, 0::5].sum(1))
    _close(o[:, 3], a[:, :7].sum(1))
    b = torch.empty_like(a)
    _run(P.vectorized_tail(), a, b)
    _eq_mul_add(b, a, 3.0, -1.0)
    a, bb = torch.randn(128, 48, device="cuda"), torch.randn(48, 64, device="cuda")
    c, rm = torch.empty(128, 64, device="cuda"), torch.empty(2, 128, device="cuda")
    _run(P.parallel_with_serial(), a, bb, c, rm)
    want = a.double() @ bb.double()
    _close(c, want, 1e-4, 1e-4)
    _close(rm, want.view(128, 2, 32).amax(-1).t(), 1e-4, 1e-4)


@pytest.mark.gpu
def test_while_loops_on_gpu():
    import torch
    a, th = torch.rand(128, 100, device="cuda"), torch.full((128,), 0.97, device="cuda")
    th[5] = 2.0  # no column exceeds it: the loop stops at N
    first = torch.empty(128, device="cuda", dtype=torch.int32)
    lim = torch.tensor([0, 3], device="cuda", dtype=torch.int32)
    x = torch.randn(128, 8, device="cuda")
    want_x = x.clone()
    for _ in range(3):
        want_x[64:] = want_x[64:] * 0.5 + 1.0
    _run(P.while_first_above(), a, th, first, lim, x)
    above = a > th[:, None]
    want = torch.where(above.any(1), above.int().argmax(1), torch.tensor(100, device="cuda"))
    _eq(first, want.int())
    _close(x, want_x)


@pytest.mark.gpu
def test_block_branches_on_gpu():
    import torch
    a = torch.randn(256, 64, device="cuda")
    b = torch.full((256, 64), 77.0, device="cuda")
    cs = torch.empty(64, device="cuda")
    _run(P.block_branches(), a, b, cs)
    _close(cs, a.sum(0), 1e-4, 1e-5)
    _eq(b[:32], torch.full((32, 64), 77.0, device="cuda"))  # block 0 writes no rows
    _eq(b[32:128], a[32:128] * 2)
    _eq(b[128:], torch.full((128, 64), -1.0, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_early_out_on_gpu(stages):
    import torch
    a, bb = torch.randn(256, 128, device="cuda").half(), torch.randn(128, 128, device="cuda").half()
    c = torch.full((256, 128), 5.0, device="cuda")
    _run(P.early_out_gemm(stages=stages), a, bb, torch.tensor([130], device="cuda", dtype=torch.int32), c)
    _close(c[:192], a[:192].float() @ bb.float(), 1e-2, 1e-3)
    _eq(c[192:], torch.full((64, 128), 5.0, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_short_pipelines_on_gpu(stages):
    import torch
    a, bb = torch.randn(128, 128, device="cuda").half(), torch.randn(128, 64, device="cuda").half()
    kernel = tilecute.compile(P.pipelined_short(stages=stages))
    for steps in (0, 1, 2, 3, 4):
        c = torch.full((128, 64), 9.0, device="cuda")
        kernel(a, bb, c, steps)
        k = steps * 32
        _close(c, a[:, :k].float() @ bb[:k].float(), 1e-2, 1e-3)
    kernel = tilecute.compile(P.pipelined_short_symbolic(stages=stages))
    for K in (16, 32, 48, 64, 200):
        a, bb = torch.randn(128, K, device="cuda").half(), torch.randn(K, 64, device="cuda").half()
        c, rs = torch.empty(128, 64, device="cuda"), torch.empty(128, device="cuda")
        kernel(a, bb, c, rs)
        _close(c, a.float() @ bb.float(), 1e-2, 1e-3)
        _close(rs, a.float().sum(1), 1e-2, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_pipelined_gather_on_gpu(stages):
    import torch
    a, bb = torch.randn(256, 128, device="cuda").half(), torch.randn(128, 64, device="cuda").half()
    idx = torch.randperm(256, device="cuda")[:128].int()
    c = torch.empty(128, 64, device="cuda")
    _run(P.pipelined_gather(stages=stages), a, idx, bb, c)
    _close(c, a[idx.long()].float() @ bb.float(), 1e-2, 1e-3)


@pytest.mark.gpu
def test_atomic_old_values_on_gpu():
    import torch
    n = 512
    v = torch.randn(n, device="cuda")
    cnt = torch.zeros(1, device="cuda", dtype=torch.int32)
    slots = torch.full((n,), -1, device="cuda", dtype=torch.int32)
    mx0, mn0, ad0 = (torch.randn(n, device="cuda") for _ in range(3))
    mx, mn, ad = mx0.clone(), mn0.clone(), ad0.clone()
    old = torch.empty(3, n, device="cuda")
    _run(P.atomic_old_values(), v, cnt, slots, mx, mn, ad, old)
    _eq(cnt, torch.tensor([n], device="cuda", dtype=torch.int32))
    _eq(slots.sort().values, torch.arange(n, device="cuda", dtype=torch.int32))
    _eq(old, torch.stack([mx0, mn0, ad0]))
    _eq(mx, torch.maximum(mx0, v))
    _eq(mn, torch.minimum(mn0, v))
    _eq(ad, ad0 + v)


@pytest.mark.gpu
def test_barrier_layout_fill_programs_on_gpu():
    import torch
    x = torch.randn(4, 128, device="cuda")
    y = torch.empty_like(x)
    _run(P.sync_in_uniform_branch(), x, y)
    _eq(y[0::2], x[0::2].flip(1))
    _eq(y[1::2], 2 * x[1::2].roll(-1, 1))
    a = torch.randn(128, 128, device="cuda").half()
    at = torch.empty_like(a)
    _run(P.annotated_swizzle_transposed(), a, at)
    _eq(at, a.t())
    a = torch.randn(64, 64, device="cuda")
    f, s = torch.empty_like(a), torch.empty_like(a)
    b2 = torch.full((64, 64), 8.0, device="cuda")
    _run(P.fill_clear_slices(), a, f, s, b2)
    want_f = torch.ones(64, 64, device="cuda")
    want_f[0:8] = 2
    want_f[8:16, 16:48] = 0
    _eq(f, want_f)
    want_s = a.clone()
    want_s[0:2] = 0
    want_s[4:12, 8:16] = 3
    _eq(s, want_s)
    want_b2 = torch.full((64, 64), 8.0, device="cuda")
    want_b2[10:20] = -5
    _eq(b2, want_b2)


def _window_reference(a, W):
    import torch
    z = torch.nn.functional.pad(a, (0, W - 1))
    return sum(z[:, w:w + a.shape[1]] for w in range(W))


@pytest.mark.gpu
def test_window_in_parallel_nest_reads_zero_past_the_row_on_gpu():
    import torch
    a = torch.randn(65, 40, device="cuda")[:64]  # (reads past row 63 stay in the allocation)
    out = torch.empty_like(a)
    _run(P.window_sum_zero_padding(parallel=True), a, out)
    _close(out, _window_reference(a, 5))


@pytest.mark.gpu
def test_window_in_serial_loops_reads_zero_past_the_row_on_gpu():
    """Outside T.Parallel too (TileLang's LegalizeSafeMemoryAccess covers the whole
    function): the serial loop's reads past a row's end read 0, never the next row."""
    import torch
    a = torch.randn(65, 40, device="cuda")[:64]  # (reads past row 63 stay in the allocation)
    out = torch.empty_like(a)
    _run(P.window_sum_zero_padding(parallel=False), a, out)
    _close(out, _window_reference(a, 5))
