"""An eighth set of programs in TileLang's idioms (tests/unseen_programs8.py), sweeping the
tile shapes and thread counts TileLang users write: flash-attention loops (block_M 64..256,
block_N 32..128, 128..384 threads, FullRow / Square, 1..3 stages, causal or not, dims 64 and
128), GEMMs with a register A operand at 64..384 rows per warpgroup on wgmma and mma.sync,
reductions / broadcasts / scans over accumulators, epilogues through swizzled shared tiles
and straight to global with ragged edges, blocks of 96 / 160 / 224 threads.  Each accepted
program builds to an sm_90a cubin on the CPU and, on a GPU, matches torch; the shapes
tilecute refuses are asserted to be refused with an error naming the form."""

import pytest

import tilecute

import rounds
import unseen_programs8 as P

WGMMA = {"wgmma": None, "mma.sync": {"disable_wgmma": True}}

# (block_M, block_N, threads, policy, stages, causal, dim)
FLASH = [
    (64, 64, 128, "FullRow", 2, False, 64), (64, 32, 128, "FullRow", 1, True, 128),
    (128, 64, 128, "FullRow", 2, False, 64), (128, 128, 128, "FullRow", 2, True, 64),
    (128, 64, 256, "FullRow", 2, True, 128), (128, 32, 256, "Square", 1, False, 64),
    (128, 128, 256, "Square", 2, False, 128), (192, 64, 384, "FullRow", 2, False, 64),
    (192, 32, 384, "FullRow", 3, True, 128), (192, 64, 128, "FullRow", 1, False, 64),
    (256, 64, 256, "FullRow", 2, True, 64), (256, 32, 256, "Square", 3, False, 64),
    (256, 32, 128, "FullRow", 1, True, 64), (64, 128, 256, "Square", 2, False, 64),
    (192, 128, 384, "Square", 2, True, 64), (128, 64, 256, "FullRow", 3, False, 64),
]
FLASH_IDS = [f"bm{c[0]}-bn{c[1]}-t{c[2]}-{c[3]}-s{c[4]}-{'causal' if c[5] else 'full'}-d{c[6]}"
             for c in FLASH]
SEQ = 768  # a multiple of every block_M and block_N above

# (M, threads): rows per warpgroup M / (threads / 128) = 64, 128, 192, 256, 128, 128
# (transpose_A of the first gemm, transpose_B of the register-A gemm)
TRANSPOSES = [(False, False), (False, True), (True, False)]
TRANSPOSE_IDS = ["NN", "NT", "TN"]
RS = [(64, 128), (128, 128), (192, 128), (256, 128), (256, 256), (384, 384), (128, 256)]

# (M, N, threads, policy, column sums, the cumsum's dim)
STATS = [(64, 64, 128, "FullRow", True, 1), (128, 64, 128, "FullRow", True, 1),
         (256, 64, 128, "FullRow", True, 1), (128, 128, 256, "Square", True, 1),
         (256, 64, 256, "FullRow", True, 1), (192, 64, 384, "FullRow", True, 1),
         (128, 128, 256, "FullCol", True, 1), (192, 64, 128, "FullRow", True, 1),
         (192, 32, 128, "FullRow", True, 1), (128, 64, 128, "FullRow", True, 0),
         (192, 64, 128, "FullRow", True, 0), (128, 128, 256, "Square", True, 0),
         (192, 64, 384, "FullRow", True, 0), (256, 128, 128, "FullRow", True, 1),
         (256, 128, 256, "FullCol", True, 1)]

# (bm, bn, threads, swizzle, out dtype)
EPI_SHARED = [(128, 64, 128, "default", "float16"), (64, 64, 128, "full_bank", "float16"),
              (128, 128, 256, "half_bank", "float16"), (192, 64, 384, "quarter_bank", "float32"),
              (256, 64, 256, "default", "float16"), (128, 64, 128, "none", "float32"),
              (64, 128, 128, "default", "bfloat16"), (128, 32, 128, "quarter_bank", "float16"),
              (192, 64, 128, "default", "float16")]
# (bm, bn, threads, stages, policy, out dtype)
EPI_DIRECT = [(128, 64, 128, 2, "FullRow", "float32"), (64, 64, 128, 1, "FullRow", "float16"),
              (192, 64, 384, 3, "FullRow", "float32"), (256, 128, 256, 2, "Square", "float32"),
              (128, 128, 256, 2, "FullCol", "float16"), (64, 32, 128, 2, "FullRow", "float32"),
              (192, 64, 128, 2, "FullRow", "float32")]

ODD_THREADS = [96, 160, 224]
ODD_BLOCKS = [(t, bm, bn) for t in ODD_THREADS for bm, bn in [(16, 64), (64, 32), (8, 128)]] \
    + [(96, 32, 96)]
# (threads, bn) whose rows of bn elements no whole group of threads covers: refused
ODD_REFUSED = [(96, 48), (160, 48), (224, 48), (160, 96), (224, 96)]
# mma.sync gemms in odd blocks: FullRow, 16 rows per warp
ODD_GEMMS = [(48, 96), (80, 160), (112, 224)]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _flash(cfg):
    bm, bn, th, pol, st, causal, d = cfg
    return P.flash_fwd(heads=2, seq=SEQ, dim=d, block_M=bm, block_N=bn, threads=th, policy=pol,
                       stages=st, causal=causal)


def _build(func, tmp_path, options=None):
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path), options=options)
    assert info.kernel_names and (tmp_path / "kernel.cubin").stat().st_size > 0


# ---- on the CPU: every accepted program builds -----------------------------------------------
@pytest.mark.parametrize("cfg", FLASH, ids=FLASH_IDS)
def test_flash_builds(cfg, tmp_path):
    _build(_flash(cfg), tmp_path)


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("transpose_A,transpose_B", TRANSPOSES, ids=TRANSPOSE_IDS)
@pytest.mark.parametrize("M,threads", RS)
def test_register_a_gemm_builds(M, threads, transpose_A, transpose_B, backend, tmp_path):
    _build(P.register_a_gemm(M=M, threads=threads, transpose_A=transpose_A,
                             transpose_B=transpose_B), tmp_path, WGMMA[backend])


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy,column_sums,scan_dim", STATS)
def test_accumulator_statistics_build(M, N, threads, policy, column_sums, scan_dim, backend,
                                      tmp_path):
    _build(P.accumulator_statistics(M=M, N=N, threads=threads, policy=policy,
                                    column_sums=column_sums, scan_dim=scan_dim), tmp_path,
           WGMMA[backend])


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("N", [32, 64])
def test_column_sums_of_192_rows_in_one_warpgroup_build(N, backend, tmp_path):
    """T.reduce_sum(acc, cs, dim=0) of a (192, N) accumulator held by 128 threads reduces
    in the accumulator's own layout, as TileLang's does (tcrow.reduce_cols; refused
    before, when the columns went through an (N, 192) fragment of the generic layout)."""
    _build(P.accumulator_statistics(M=192, N=N, threads=128), tmp_path, WGMMA[backend])


@pytest.mark.parametrize("bm,bn,threads,swizzle,out_dtype", EPI_SHARED)
def test_epilogue_through_shared_builds(bm, bn, threads, swizzle, out_dtype, tmp_path):
    _build(P.epilogue_through_shared(bm=bm, bn=bn, threads=threads, swizzle=swizzle,
                                     out_dtype=out_dtype), tmp_path)


@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("bm,bn,threads,stages,policy,out_dtype", EPI_DIRECT)
def test_epilogue_direct_builds(bm, bn, threads, stages, policy, out_dtype, backend, tmp_path):
    _build(P.epilogue_direct(bm=bm, bn=bn, threads=threads, stages=stages, policy=policy,
                             out_dtype=out_dtype), tmp_path, WGMMA[backend])


@pytest.mark.parametrize("threads,bm,bn", ODD_BLOCKS)
def test_odd_thread_block_builds(threads, bm, bn, tmp_path):
    _build(P.odd_thread_block(bm=bm, bn=bn, threads=threads), tmp_path)


@pytest.mark.parametrize("M,threads", ODD_GEMMS)
def test_odd_thread_gemm_builds_on_mma_sync(M, threads, tmp_path):
    _build(P.odd_thread_gemm(M=M, threads=threads, policy="FullRow"), tmp_path,
           {"disable_wgmma": True})


# ---- on the CPU: the shapes tilecute refuses, refused by name ---------------------------------
@pytest.mark.parametrize("threads", ODD_THREADS)
def test_odd_thread_gemm_refusals(threads, tmp_path):
    """wgmma needs whole warpgroups; on mma.sync 3 / 5 / 7 warps cannot tile 64 x 64 in
    16 x 16 steps (TileLang's 'No valid warp partition' too)."""
    with pytest.raises(Exception, match=rf"T\.gemm\(a_s, b_s, acc\).*warpgroups of 128 "
                                        rf"threads; the block has {threads}"):
        _build(P.odd_thread_gemm(threads=threads), tmp_path)
    with pytest.raises(Exception, match=r"T\.gemm\(a_s, b_s, acc\): No valid warp partition"):
        _build(P.odd_thread_gemm(threads=threads), tmp_path, {"disable_wgmma": True})


def test_flash_three_warpgroups_on_128_rows_refused(tmp_path):
    """128 rows cannot be split over 3 warpgroups of 64-row wgmma steps."""
    with pytest.raises(Exception, match=r"T\.gemm\(q_s, k_s, s\): No valid warp partition"):
        _build(_flash((128, 64, 384, "FullRow", 2, False, 64)), tmp_path)


@pytest.mark.parametrize("threads,bn", ODD_REFUSED)
def test_odd_block_row_reduce_refused(threads, bn, tmp_path):
    """A (32, bn) fragment in a block of 96 / 160 / 224 threads whose rows of bn elements no
    power-of-two group of threads (nor whole warps) covers: the row reduction is refused by
    name."""
    with pytest.raises(Exception, match=rf"T\.reduce_max: rows of 'f' have {bn} elements"):
        _build(P.odd_thread_block(bm=32, bn=bn, threads=threads), tmp_path)


# ---- on the GPU ------------------------------------------------------------------------------
def _kernel(func, options=None):
    return tilecute.compile(func, options=options) if options else tilecute.compile(func)


_close = rounds.close_on_cpu


def _seeded():
    import torch
    torch.manual_seed(0)
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", FLASH, ids=FLASH_IDS)
def test_flash_on_gpu(cfg):
    torch = _seeded()
    bm, bn, th, pol, st, causal, d = cfg
    q, k, v = (torch.randn(2, SEQ, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((2, SEQ), float("nan"), device="cuda")
    _kernel(_flash(cfg))(q, k, v, o, lse)
    s = (q.float() @ k.float().transpose(1, 2)) / d ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(SEQ, SEQ, device="cuda", dtype=torch.bool).triu(1),
                          float("-inf"))
    _close(o, torch.softmax(s, -1) @ v.float(), 4e-3, 4e-3)
    _close(lse, torch.logsumexp(s, -1), 1e-3, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("transpose_A,transpose_B", TRANSPOSES, ids=TRANSPOSE_IDS)
@pytest.mark.parametrize("M,threads", RS)
def test_register_a_gemm_on_gpu(M, threads, transpose_A, transpose_B, backend):
    torch = _seeded()
    N = K = 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16) / 4
    b = torch.randn(K, N, device="cuda", dtype=torch.float16) / 4
    c = torch.randn(N, N, device="cuda", dtype=torch.float16) / 4
    d = torch.full((M, N), float("nan"), device="cuda")
    _kernel(P.register_a_gemm(M=M, threads=threads, transpose_A=transpose_A,
                              transpose_B=transpose_B),
            WGMMA[backend])(a.t().contiguous() if transpose_A else a, b, c, d)
    frag = (a.float() @ b.float()).half().float()
    want = frag @ (c.float().t() if transpose_B else c.float())
    _close(d, want, 2e-2, 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("M,N,threads,policy,column_sums,scan_dim", STATS)
def test_accumulator_statistics_on_gpu(M, N, threads, policy, column_sums, scan_dim, backend):
    torch = _seeded()
    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, N, device="cuda", dtype=torch.float16)
    outs = [torch.full(shape, float("nan"), device="cuda")
            for shape in [(M,), (N,), (M, N), (M,), (M, N)]]
    _kernel(P.accumulator_statistics(M=M, N=N, threads=threads, policy=policy,
                                     column_sums=column_sums, scan_dim=scan_dim),
            WGMMA[backend])(a, b, *outs)
    acc = a.float() @ b.float()
    if not column_sums:
        assert outs[1].isnan().all()  # ColSum left alone
        outs[1] = acc.sum(0)
    mx = acc.max(1).values
    z = acc - mx[:, None]
    for got, want, tol in zip(outs, [mx, acc.sum(0), z, z.sum(1), z.cumsum(scan_dim)],
                              [1e-3, 1e-2, 1e-3, 1e-2, 1e-2]):
        _close(got, want, tol, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,threads,swizzle,out_dtype", EPI_SHARED)
def test_epilogue_through_shared_on_gpu(bm, bn, threads, swizzle, out_dtype):
    torch = _seeded()
    M, N, K = 200, 136, 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), 77.0, device="cuda", dtype=getattr(torch, out_dtype))
    _kernel(P.epilogue_through_shared(M=M, N=N, K=K, bm=bm, bn=bn, threads=threads,
                                      swizzle=swizzle, out_dtype=out_dtype))(a, b, c)
    tol = 3e-2 if out_dtype == "bfloat16" else 2e-3
    _close(c, (a.float() @ b.float()).to(c.dtype), tol * 8, tol)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(WGMMA))
@pytest.mark.parametrize("bm,bn,threads,stages,policy,out_dtype", EPI_DIRECT)
def test_epilogue_direct_on_gpu(bm, bn, threads, stages, policy, out_dtype, backend):
    torch = _seeded()
    M, N, K = 200, 136, 96
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), 77.0, device="cuda", dtype=getattr(torch, out_dtype))
    nb = -(-N // bn)
    s = torch.full((M, nb), 55.0, device="cuda")
    _kernel(P.epilogue_direct(M=M, N=N, K=K, bm=bm, bn=bn, threads=threads, stages=stages,
                              policy=policy, out_dtype=out_dtype), WGMMA[backend])(a, b, c, s)
    ref = a.float() @ b.float()
    _close(c, ref.to(c.dtype), 2e-2, 2e-3)
    padded = torch.zeros(M, nb * bn, device="cuda")
    padded[:, :N] = ref
    _close(s, padded.view(M, nb, bn).sum(-1), 2e-2, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("threads,bm,bn", ODD_BLOCKS)
def test_odd_thread_block_on_gpu(threads, bm, bn):
    torch = _seeded()
    M, N = 100, 80
    x = torch.randn(M, N, device="cuda")
    y = torch.full_like(x, 99.0)
    z = torch.full_like(x, 99.0)
    nbx, nby = -(-N // bn), -(-M // bm)
    rm = torch.full((M, nbx), 99.0, device="cuda")
    cs = torch.full((nby, N), 99.0, device="cuda")
    _kernel(P.odd_thread_block(M=M, N=N, bm=bm, bn=bn, threads=threads))(x, y, z, rm, cs)
    _close(z, -x, 0, 0)
    _close(y, x * 3 + 1, 1e-6, 1e-6)
    padded = torch.zeros(nby * bm, nbx * bn, device="cuda")
    padded[:M, :N] = x
    tiles = padded.view(nby, bm, nbx, bn)
    _close(rm, tiles.amax(3).reshape(nby * bm, nbx)[:M], 0, 0)
    _close(cs, tiles.sum(1).reshape(nby, nbx * bn)[:, :N], 1e-5, 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("M,threads", ODD_GEMMS)
def test_odd_thread_gemm_on_gpu(M, threads):
    torch = _seeded()
    a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    c = torch.full((M, 64), float("nan"), device="cuda")
    _kernel(P.odd_thread_gemm(M=M, threads=threads, policy="FullRow"),
            {"disable_wgmma": True})(a, b, c)
    _close(c, a.float() @ b.float(), 1e-2, 1e-3)
