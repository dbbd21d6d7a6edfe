"""A fourth set of programs in TileLang's idioms (tests/unseen_programs4.py), aimed at kernel
structure and layout forms: macros, several kernels sharing a workspace, symbolic shapes,
loops around T.Pipelined, T.gemm operand placements and epilogues, layouts and
rasterization.  Each builds to an sm_90a cubin on the CPU, and on a GPU matches torch
written to TileLang's meaning.  The fixes they led to have their focused tests next to the
code (tests/test_accumulator_windows.py: a window of an accumulator copied or read at an
offset, constant or a loop's / block's index)."""

import pytest

import tilecute

import rounds
import unseen_programs4 as P

T = P.T
W = T.GemmWarpPolicy

PROGRAMS = ["macro_composed", "macro_second_kernel", "two_kernels_workspace",
            "symbolic_tied_gemm", "symbolic_batched_rows", "heads_loop_pipelined",
            "two_pipelined_shared", "pipelined_if_on_k", "gemm_two_into_one",
            "gemm_big_tile_384", "gemm_256x128", "gemm_tf32", "gemm_fp8_e5m2",
            "annotated_swizzle_epilogue", "accumulator_relayout", "int8_gemm_colreduce",
            "macro_pipelined_twice", "gemm_accumulate_onto", "swizzle_ragged_grid",
            "accumulator_colsum_steps", "symbolic_segments", "splitk_workspace_tma",
            "symbolic_transpose_tied", "pipelined_conditional_load", "manual_double_buffer",
            "chunked_epilogue", "swizzle_before_after", "heads_loop_tma_odd",
            "symbolic_workspace", "symbolic_gated_gemm", "transposed_epilogue",
            "macro_allocates_twice"]

# T.gemm operand placements: (shared | fragment) x transposes, policies and thread counts,
# dtypes (gemm_placement's keyword arguments)
PLACEMENTS = [dict(trans_A=ta, trans_B=tb, a_frag=af, b_frag=bf)
              for ta in (False, True) for tb in (False, True)
              for af in (False, True) for bf in (False, True)]
PLACEMENTS += [dict(policy=pol, threads=thr, block_M=bm, block_N=bn, M=384, N=256)
               for pol in (W.FullRow, W.FullCol, W.Square)
               for thr, bm, bn in ((128, 64, 64), (256, 128, 128), (256, 64, 128),
                                   (256, 128, 64), (384, 192, 128), (128, 16, 128),
                                   (128, 32, 32), (64, 16, 64))]
PLACEMENTS += [dict(in_dtype=T.bfloat16), dict(in_dtype=T.bfloat16, a_frag=True, trans_B=True),
               dict(in_dtype=T.float8_e4m3, trans_B=True, block_K=64),
               dict(in_dtype=T.float8_e4m3, block_K=64),
               dict(in_dtype=T.float8_e4m3, trans_B=True, block_K=64, a_frag=True),
               dict(in_dtype=T.tfloat32, trans_B=True), dict(in_dtype=T.tfloat32),
               dict(in_dtype=T.tfloat32, trans_A=True),
               dict(acc_dtype=T.float16, out_dtype=T.float16),
               dict(in_dtype=T.float32, trans_B=True),
               dict(block_M=16, block_N=64, a_frag=True, b_frag=True, trans_A=True)]


def _pid(v):
    return "-".join(f"{k}={getattr(x, 'name', x)}" for k, x in v.items())


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("kw", PLACEMENTS, ids=_pid)
def test_gemm_placement_builds(kw, tmp_path):
    assert tilecute.build_cubin(P.gemm_placement(**kw), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("order", ["row", "column"])
def test_swizzle_orders_build(order, tmp_path):
    for panel in (1, 2, 3, 4):
        assert tilecute.build_cubin(P.swizzle_ragged_grid(panel=panel, order=order), "sm_90a",
                                    out_dir=str(tmp_path / f"{panel}")).kernel_names
    assert tilecute.build_cubin(P.annotated_swizzle_epilogue(order=order), "sm_90a",
                                out_dir=str(tmp_path / "a")).kernel_names


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_conditional_load_keeps_one_b_tile(stages):
    """B_s, loaded only on even steps, is one buffer (odd steps read what the even step
    loaded), whatever the stage count; A_s, loaded every step, is multi-buffered."""
    src = tilecute.compile(P.pipelined_conditional_load(stages=stages)).get_kernel_source()
    assert "    B_s = cute.make_tensor(cute.recast_ptr(tc_smem + " in src, src
    assert "B_s: " not in src, src  # (no "B_s: N stages" comment)


def test_two_kernels_share_the_workspace():
    k = tilecute.compile(P.two_kernels_workspace())
    src = k.get_kernel_source()
    assert src.count("ws = cute.make_tensor(ws_ptr") == 3, src
    assert [a.name for a in k.abi.args if a.workspace] == ["ws"] and k.workspace_idx == [3]


# ---- on the GPU ------------------------------------------------------------------------------
_run = rounds.run


def _close(got, want, atol=1e-3, rtol=1e-3):
    rounds.close_on_cpu(got, want, atol, rtol)


_eq = rounds.equal_on_cpu


def _h(*shape, dtype=None):
    import torch
    return torch.randn(*shape, device="cuda").to(dtype or torch.float16)


@pytest.mark.gpu
def test_macro_programs_on_gpu():
    import torch
    a = torch.randn(128, 128, device="cuda")
    b = torch.empty_like(a)
    mx, sm = torch.empty(128, 2, device="cuda"), torch.empty(128, 2, device="cuda")
    _run(P.macro_composed(), a, b, mx, sm)
    f = (a * 3).view(128, 2, 64)
    _close(mx, f.amax(-1), 0, 0)
    _close(sm, f.sum(-1), 1e-4, 1e-5)
    _close(b, a * 3 * 0.5 + 1, 1e-6, 1e-6)
    a = _h(64, 256)
    b = torch.empty_like(a)
    mx, sm = torch.empty(64, 2, device="cuda"), torch.empty(64, 2, device="cuda")
    _run(P.macro_second_kernel(), a, b, mx, sm)
    f = (a.float() * -2).view(64, 2, 128)
    _close(mx, f.amax(-1), 0, 0)
    _close(sm, f.sum(-1), 1e-3, 1e-5)
    _eq(b, (a.float() * -2).half())
    a = torch.randn(64, 64, device="cuda")
    r = torch.empty(2, 32, device="cuda")
    _run(P.macro_allocates_twice(), a, r)
    _close(r, torch.stack([a[:32].sum(1), 2 * a[32:].sum(1)]), 1e-5, 1e-5)
    a, a2, bb = _h(128, 128), _h(128, 128), _h(128, 128)
    c, d = torch.empty(128, 128, device="cuda"), torch.empty(128, 128, device="cuda")
    _run(P.macro_pipelined_twice(), a, a2, bb, c, d)
    _close(c, a.float() @ bb.float() + a2.float() @ bb.float(), 1e-2, 1e-3)
    _close(d, 2 * (a2.float() @ bb.float()), 1e-2, 1e-3)


@pytest.mark.gpu
def test_workspace_programs_on_gpu():
    import torch
    a = torch.rand(256, 512, device="cuda") + 0.1
    b, s = torch.empty_like(a), torch.empty(256, device="cuda")
    _run(P.two_kernels_workspace(), a, b, s)
    _close(s, a.sum(1), 1e-3, 1e-5)
    _close(b, a / a.sum(1, keepdim=True), 1e-6, 1e-5)
    a, bb = _h(128, 256), _h(256, 128)
    c = torch.empty(128, 128, device="cuda")
    _run(P.splitk_workspace_tma(), a, bb, c)
    _close(c, a.float() @ bb.float(), 1e-2, 1e-3)
    for m in (1, 100, 300):
        a, s = torch.randn(m, 256, device="cuda"), torch.empty(m, device="cuda")
        _run(P.symbolic_workspace(), a, s)
        _close(s, a.sum(1), 1e-4, 1e-5)


@pytest.mark.gpu
def test_symbolic_programs_on_gpu():
    import torch
    for m, n, k in ((200, 150, 100), (64, 64, 32), (65, 1, 7)):
        a, bb = _h(m, k), _h(k, n)
        bias = torch.randn(m, device="cuda")
        c = torch.full((m, n), 3.0, device="cuda")
        _run(P.symbolic_tied_gemm(), a, bb, bias, c)
        _close(c, a.float() @ bb.float() + bias[:, None], 1e-2, 1e-3)
    for m, n in ((200, 96), (64, 64), (3, 8)):
        a, w = _h(m, 128), _h(128, 2 * n)
        c = torch.full((m, n), 5.0, device="cuda")
        _run(P.symbolic_gated_gemm(), a, w, c)
        _close(c, (a.float() @ w[:, :n].float()) * (a.float() @ w[:, n:].float()), 5e-1, 5e-3)
    x = torch.randn(3, 100, 128, device="cuda")
    y, cnt = torch.empty_like(x), torch.zeros(3, dtype=torch.int32, device="cuda")
    _run(P.symbolic_batched_rows(), x, y, cnt)
    _close(y, x - x.mean(-1, keepdim=True), 1e-5, 1e-5)
    _eq(cnt, torch.full((3,), 100, dtype=torch.int32, device="cuda"))
    x = torch.randn(300, 64, device="cuda")
    off = torch.tensor([0, 0, 5, 70, 200, 200, 300], dtype=torch.int32, device="cuda")
    y, z = torch.empty(6, 64, device="cuda"), torch.empty_like(x)
    _run(P.symbolic_segments(), x, off, y, z)
    want = torch.stack([x[off[g]:off[g + 1]].sum(0) for g in range(6)])
    _close(y, want, 1e-4, 1e-5)
    _eq(z, x * 2)
    for m, n in ((100, 70), (32, 33), (1, 64)):
        a, bias = torch.randn(m, n, device="cuda"), torch.randn(n, device="cuda")
        bt, tiles = torch.empty(n, m, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
        _run(P.symbolic_transpose_tied(), a, bias, bt, tiles)
        _eq(bt, a.T + bias[:, None])
        assert int(tiles) == ((m + 31) // 32) * ((n + 31) // 32)


@pytest.mark.gpu
def test_pipelined_structure_programs_on_gpu():
    import torch
    a, bb = _h(4, 128, 256), _h(4, 256, 64)
    c, tot = torch.empty(4, 128, 64, device="cuda"), torch.empty(128, 64, device="cuda")
    _run(P.heads_loop_pipelined(), a, bb, c, tot)
    want = torch.bmm(a.float(), bb.float())
    _close(c, want, 1e-2, 1e-3)
    _close(tot, want.sum(0), 2e-2, 1e-3)
    for stages in (1, 2, 3):
        a, bb = _h(3 * 128, 192), _h(3 * 192, 64)
        c = torch.empty(3 * 128, 64, device="cuda")
        _run(P.heads_loop_tma_odd(stages=stages), a, bb, c)
        want = torch.bmm(a.float().view(3, 128, 192), bb.float().view(3, 192, 64))
        _close(c, want.reshape(384, 64), 2e-2, 1e-3)
    a1, b1, a2, b2 = _h(128, 128), _h(128, 128), _h(128, 192), _h(192, 128)
    c, d = torch.empty(128, 128, device="cuda"), torch.empty(128, 128, device="cuda")
    _run(P.two_pipelined_shared(), a1, b1, a2, b2, c, d)
    _close(c, a1.float() @ b1.float() + a2.float() @ b2.float(), 2e-2, 1e-3)
    _close(d, a2.float() @ b2.float(), 1e-2, 1e-3)
    a, bb = _h(128, 512), _h(512, 64)
    c, r = torch.empty(128, 64, device="cuda"), torch.empty(128, device="cuda")
    _run(P.pipelined_if_on_k(), a, bb, c, r)
    sign = torch.tensor([1.0, -1.0], device="cuda").repeat_interleave(64).repeat(4)
    want = a.float() @ (bb.float() * sign[:, None])
    _close(c, want, 2e-2, 1e-3)
    _close(r, want.sum(1), 5e-2, 1e-3)
    for stages in (1, 2, 3, 4):
        c = torch.empty(128, 64, device="cuda")
        _run(P.pipelined_conditional_load(stages=stages), a, bb, c)
        b_used = bb.float().view(4, 2, 64, 64)[:, 0:1].expand(4, 2, 64, 64).reshape(512, 64)
        _close(c, a.float() @ b_used, 2e-2, 1e-3)
    a, bb = _h(128, 256), _h(256, 128)
    c = torch.empty(128, 128, device="cuda")
    _run(P.manual_double_buffer(), a, bb, c)
    _close(c, a.float() @ bb.float(), 1e-2, 1e-3)


def _placement_inputs(kw):
    import torch
    M, N, K = kw.get("M", 128), kw.get("N", 128), kw.get("K", 128)
    dt = kw.get("in_dtype", T.float16)
    tdt = {T.float16: torch.float16, T.bfloat16: torch.bfloat16, T.float8_e4m3: torch.float8_e4m3fn,
           T.tfloat32: torch.float32, T.float32: torch.float32}[dt]
    a = torch.randn(*((K, M) if kw.get("trans_A") else (M, K)), device="cuda").to(tdt)
    b = torch.randn(*((N, K) if kw.get("trans_B") else (K, N)), device="cuda").to(tdt)
    at = a.float().T if kw.get("trans_A") else a.float()
    bt = b.float().T if kw.get("trans_B") else b.float()
    out = torch.float16 if kw.get("out_dtype") == T.float16 else torch.float32
    return a, b, torch.empty(M, N, dtype=out, device="cuda"), 0.5 * (at @ bt), dt


@pytest.mark.gpu
@pytest.mark.parametrize("kw", PLACEMENTS, ids=_pid)
def test_gemm_placement_on_gpu(kw):
    a, b, c, want, dt = _placement_inputs(kw)
    _run(P.gemm_placement(**kw), a, b, c)
    tol = {T.tfloat32: (5e-2, 1e-2)}.get(dt, (2e-2, 2e-3))
    if kw.get("acc_dtype") == T.float16:
        tol = (1e-1, 1e-2)
    _close(c, want, *tol)


@pytest.mark.gpu
def test_gemm_programs_on_gpu():
    import torch
    a, bb = _h(128, 128, dtype=torch.bfloat16), _h(128, 128, dtype=torch.bfloat16)
    a2, b2 = _h(128, 128, dtype=torch.bfloat16), _h(128, 128, dtype=torch.bfloat16)
    cb, c = torch.randn(128, device="cuda"), torch.empty(128, 128, dtype=torch.bfloat16, device="cuda")
    _run(P.gemm_two_into_one(), a, bb, a2, b2, cb, c)
    _close(c, a.float() @ bb.float() + a2.float() @ b2.float().T - cb, 1e-1, 1e-2)
    a, bb = _h(256, 128), _h(128, 256)
    c = torch.full((256, 256), 9.0, dtype=torch.float16, device="cuda")
    _run(P.gemm_big_tile_384(), a, bb, c)
    _close(c, (a.float() @ bb.float()).half(), 2e-2, 2e-3)
    a, bb = _h(512, 256), _h(256, 256)
    for pol in (None, W.FullRow, W.FullCol):
        c = torch.empty(512, 256, device="cuda")
        rmax, csum = torch.empty(512, 2, device="cuda"), torch.empty(2, 256, device="cuda")
        _run(P.gemm_256x128(policy=pol), a, bb, c, rmax, csum)
        want = a.float() @ bb.float().T
        _close(c, want, 2e-2, 1e-3)
        _close(rmax, want.view(512, 2, 128).amax(-1), 2e-2, 1e-3)
        _close(csum, want.view(2, 256, 256).sum(1), 2e-1, 1e-3)
    a, bb = torch.randn(128, 128, device="cuda"), torch.randn(128, 128, device="cuda")
    c = torch.empty(128, 128, device="cuda")
    _run(P.gemm_tf32(), a, bb, c)
    _close(c, a @ bb.T, 5e-2, 1e-2)
    a = torch.randn(128, 256, device="cuda").to(torch.float8_e5m2)
    bb = torch.randn(128, 256, device="cuda").to(torch.float8_e5m2)
    c, d = torch.full((128, 128), 4.0, device="cuda"), torch.empty(128, 128, device="cuda")
    _run(P.gemm_fp8_e5m2(), a, bb, c, d)
    want = a.float() @ bb.float().T
    # (Hopper's fp8 wgmma accumulates with reduced precision: ~7e-4 relative seen on the H100)
    _close(d, want, 5e-2, 2e-3)
    keep = torch.zeros(128, dtype=torch.bool, device="cuda")
    keep[16:48] = keep[80:112] = True
    _close(c, torch.where(keep[:, None], want, torch.full_like(want, 4.0)), 5e-2, 2e-3)
    a, bb = torch.randint(-128, 128, (128, 256), dtype=torch.int8, device="cuda"), \
        torch.randint(-128, 128, (128, 256), dtype=torch.int8, device="cuda")
    c, cs = torch.empty(128, 128, dtype=torch.int32, device="cuda"), \
        torch.empty(2, 128, dtype=torch.int32, device="cuda")
    rm = torch.empty(128, dtype=torch.int32, device="cuda")
    _run(P.int8_gemm_colreduce(), a, bb, c, cs, rm)
    want = (a.cpu().long() @ bb.cpu().long().T).cuda()  # (CUDA has no int64 matmul)
    _eq(c, want.int())
    _eq(cs, want.view(2, 64, 128).sum(1).int())
    _eq(rm, want.amax(1).int())


@pytest.mark.gpu
def test_accumulator_programs_on_gpu():
    import torch
    a, bb = _h(128, 64), _h(64, 128)
    c = torch.empty(128, 128, device="cuda")
    cm, rs = torch.empty(2, 128, device="cuda"), torch.empty(128, 2, device="cuda")
    _run(P.accumulator_relayout(), a, bb, c, cm, rs)
    full = a.float() @ bb.float()
    rows = torch.arange(128, device="cuda").float().remainder(64)[:, None]
    blk = full * 2 - rows
    _close(c, blk, 1e-2, 1e-3)
    _close(cm, blk.view(2, 64, 128).amax(1), 1e-2, 1e-3)
    _close(rs, full.view(128, 2, 64).sum(-1), 5e-2, 1e-3)
    a, bb = _h(128, 128), _h(128, 128)
    cin, r = torch.randn(128, 128, device="cuda"), torch.randn(128, 128, device="cuda")
    c, e = torch.empty(128, 128, device="cuda"), torch.empty(128, 128, device="cuda")
    _run(P.gemm_accumulate_onto(), a, bb, cin, r, c, e)
    _close(c, cin + a.float() @ bb.float(), 1e-2, 1e-3)
    _close(e, r + a.float() @ bb.float(), 1e-2, 1e-3)
    a, bb, bias = _h(256, 128), _h(128, 128), torch.randn(128, device="cuda")
    ct = torch.empty(128, 256, dtype=torch.float16, device="cuda")
    rmx = torch.empty(2, 256, device="cuda")
    _run(P.transposed_epilogue(), a, bb, bias, ct, rmx)
    full = a.float() @ bb.float()
    _close(ct, (full + bias).T.half(), 2e-2, 2e-3)
    _close(rmx, full.view(256, 2, 64).amax(-1).T, 1e-2, 1e-3)
    a, bb = _h(256, 128), _h(128, 512)
    bias, c = torch.randn(256, device="cuda"), torch.empty(256, 512, dtype=torch.float16, device="cuda")
    _run(P.chunked_epilogue(), a, bb, bias, c)
    _close(c, (a.float() @ bb.float() + bias[:, None]).half(), 2e-2, 2e-3)
    a, bb = _h(128, 256), _h(256, 64)
    cs, rm = torch.empty(64, device="cuda"), torch.empty(128, device="cuda")
    _run(P.accumulator_colsum_steps(), a, bb, cs, rm)
    steps = torch.stack([a[:, k * 64:(k + 1) * 64].float() @ bb[k * 64:(k + 1) * 64].float()
                         for k in range(4)])
    _close(cs, steps.sum(0).sum(0), 1e-1, 1e-3)
    _close(rm, steps.amax(-1).amax(0), 1e-2, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["row", "column"])
def test_layout_and_swizzle_programs_on_gpu(order):
    import torch
    a, bb = _h(256, 256), _h(256, 256)
    c = torch.empty(256, 256, dtype=torch.float16, device="cuda")
    _run(P.annotated_swizzle_epilogue(order=order), a, bb, c)
    full = (a.float() @ bb.float()).view(2, 128, 2, 128).permute(0, 2, 1, 3)
    want = full + full.half().float().transpose(-1, -2)
    _close(c, want.permute(0, 2, 1, 3).reshape(256, 256).half(), 5e-2, 2e-3)
    a, bb = _h(224, 64), _h(64, 160)
    for panel in (1, 2, 3, 4):
        c = torch.empty(224, 160, device="cuda")
        who = torch.full((7, 5), -1, dtype=torch.int32, device="cuda")
        _run(P.swizzle_ragged_grid(panel=panel, order=order), a, bb, c, who)
        _close(c, a.float() @ bb.float(), 1e-2, 1e-3)
        r, cc = torch.meshgrid(torch.arange(7, device="cuda"), torch.arange(5, device="cuda"),
                               indexing="ij")
        _eq(who, (r * 1000 + cc).int())


def _raster(gx, gy, panel, order):
    """TileLang's rasterization2DRow / 2DColumn: launch block (x, y) -> the (x, y) it
    computes (written from the map's definition)."""
    out = {}
    across, along = (gx, gy) if order == "row" else (gy, gx)
    for y in range(gy):
        for x in range(gx):
            flat, size = x + y * gx, panel * across
            idx, off = flat // size, flat % size
            total = (gx * gy + size - 1) // size
            stride = panel if idx + 1 < total else (gx * gy - idx * size) // across
            a = across - 1 - off // stride if idx & 1 else off // stride
            b = off % stride + idx * panel
            out[(x, y)] = (a, b) if order == "row" else (b, a)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["row", "column"])
@pytest.mark.parametrize("panel", [1, 2, 3, 8])
def test_swizzle_before_after_on_gpu(order, panel):
    import torch
    a = torch.randn(7 * 16, 5 * 16, device="cuda")
    b = torch.empty_like(a)
    before = torch.full((7, 5), -1, dtype=torch.int32, device="cuda")
    after = torch.full((7, 5), -1, dtype=torch.int32, device="cuda")
    _run(P.swizzle_before_after(panel=panel, order=order), a, b, before, after)
    _eq(b, a)
    _eq(before, torch.arange(35, dtype=torch.int32, device="cuda").view(7, 5))
    want = torch.full((7, 5), -1, dtype=torch.int32)
    for (x, y), (nx, ny) in _raster(5, 7, panel, order).items():
        want[ny, nx] = y * 5 + x  # the swizzled block (nx, ny) was launched as (x, y)
    _eq(after, want)
