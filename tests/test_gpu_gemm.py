"""T.gemm on a GPU (pytest -m gpu): examples/gemm.py against torch.matmul for every
dtype the GPU's tensor cores take, all four transpose forms, square, skinny (M = 16..128),
K not a multiple of the K tile, and ragged M and N; plus the fused bias+relu epilogue,
warp-specialized main loops, A read from registers (wgmma RS, the chained GEMM), and the
sm_80 code paths compiled for sm_90a (the disable_tma / disable_wgmma options)."""

import pytest

torch = pytest.importorskip("torch")

import tilecute  # noqa: E402
import gemm as G  # noqa: E402

pytestmark = pytest.mark.gpu

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def _hopper():
    return torch.cuda.get_device_capability()[0] >= 9


def _check(dtype, M, N, K, transpose_A=False, transpose_B=False, target=None, options=None,
           **schedule):
    torch.manual_seed(M * 7 + N * 3 + K)
    kernel = tilecute.compile(G.matmul(dtype=dtype, transpose_A=transpose_A,
                                       transpose_B=transpose_B, **schedule), target=target,
                              options=options)
    x = torch.randn(M, K, device="cuda").to(TORCH[dtype])
    w = torch.randn(K, N, device="cuda").to(TORCH[dtype])
    out = torch.float16 if dtype.startswith("float8") else TORCH[dtype]
    y = torch.full((M, N), float("nan"), device="cuda", dtype=out)
    kernel(x.t().contiguous() if transpose_A else x, w.t().contiguous() if transpose_B else w, y)
    if dtype == "float32":  # tf32 inputs: round like the tensor cores (truncate 13 bits)
        xr, wr = (t.view(torch.int32) & ~0x1FFF for t in (x, w))
        ref = xr.view(torch.float32).double() @ wr.view(torch.float32).double()
    else:
        ref = x.double() @ w.double()
    err = (y.double() - ref).abs().max().item()
    # fp32 accumulation of K products, then one rounding to the output dtype
    tol = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-3}.get(str(out).split(".")[-1], 1e-2)
    bound = tol * ref.abs().max().item() + 1e-2
    assert not torch.isnan(y).any(), f"{dtype} {M}x{N}x{K}: output left unwritten"
    assert err <= bound, f"{dtype} {M}x{N}x{K} tA={transpose_A} tB={transpose_B}: max err {err} > {bound}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("transpose_A,transpose_B", [(False, False), (False, True),
                                                     (True, False), (True, True)])
def test_transposes(dtype, transpose_A, transpose_B):
    _check(dtype, 1000, 776, 520, transpose_A, transpose_B)


@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (16, 4096, 1024), (64, 1024, 4096),
                                   (128, 384, 200), (1000, 1000, 136), (257, 136, 72)])
def test_shapes(M, N, K):
    _check("float16", M, N, K)


def test_row_length_not_a_multiple_of_16_bytes_is_a_clear_error():
    kernel = tilecute.compile(G.matmul())
    x = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 129, device="cuda", dtype=torch.float16)
    y = torch.empty(64, 129, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="W"):
        kernel(x, w, y)


@pytest.mark.parametrize("schedule", [dict(tm=128, tn=256, stages=4, panel=8), dict(tm=64, tn=64, threads=128),
                                      dict(tm=128, tn=128, tk=32, stages=2, threads=128)])
def test_schedules(schedule):
    _check("bfloat16", 777, 1024, 1000, **schedule)


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_float8(dtype):
    if not _hopper():
        pytest.skip("float8 tensor cores need sm_90")
    _check(dtype, 300, 512, 256, transpose_B=True, tk=128)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("transpose_A,transpose_B", [(False, False), (True, True)])
def test_sm80_mma_sync(dtype, transpose_A, transpose_B):
    """The sm_80 path (cp.async into swizzled tiles, ldmatrix, mma.sync); an sm_80 cubin
    runs only on an sm_8x GPU (SASS is compatible within one major version)."""
    if torch.cuda.get_device_capability()[0] != 8:
        pytest.skip("an sm_80 cubin needs an sm_8x GPU")
    _check(dtype, 300, 264, 200, transpose_A, transpose_B, target="sm_80", tk=32, threads=128)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("transpose_A,transpose_B", [(False, False), (False, True),
                                                     (True, False), (True, True)])
def test_sm80_code_paths_on_hopper(dtype, transpose_A, transpose_B):
    """The sm_80 path's cp.async, ldmatrix (.trans for MN-major operands) and mma.sync,
    compiled for sm_90a with the disable_tma and disable_wgmma options, so a Hopper GPU
    runs them."""
    if not _hopper():
        pytest.skip("compiled for sm_90a")
    _check(dtype, 300, 264, 200, transpose_A, transpose_B, tk=32, threads=128,
           options={"disable_tma": True, "disable_wgmma": True})


@pytest.mark.parametrize("schedule", [dict(epilogue="shared", tn=256, panel=4),
                                      dict(epilogue="shared", tm=64, tn=128, threads=128)])
def test_shared_epilogue(schedule):
    _check("bfloat16", 1000, 776, 520, **schedule)


def test_tf32():
    _check("float32", 300, 512, 264, transpose_B=True, tk=32)


@pytest.mark.parametrize("ws,K", [(False, 256), (True, 1024)])
def test_bias_relu_epilogue(ws, K):
    if ws and not _hopper():
        pytest.skip("warp specialization needs sm_90a")
    kernel = tilecute.compile(G.matmul_bias_relu(warp_specialize=ws))
    M, N = 500, 384
    x = torch.randn(M, K, device="cuda", dtype=torch.float16)
    w = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float16)
    y = torch.empty(M, N, device="cuda", dtype=torch.float16)
    kernel(x, w, bias, y)
    ref = torch.relu(x.float() @ w.float() + bias.float())
    torch.testing.assert_close(y.float(), ref, atol=5e-2, rtol=2e-3)


def test_jit_factory():
    x = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    w = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    y = G.matmul_kernel(tm=128, tn=64, threads=128)(x, w)
    torch.testing.assert_close(y.float(), x.float() @ w.float(), atol=5e-2, rtol=2e-3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("transpose_A,transpose_B", [(False, False), (False, True),
                                                     (True, False), (True, True)])
def test_warp_specialized_transposes(dtype, transpose_A, transpose_B):
    if not _hopper():
        pytest.skip("warp specialization needs sm_90a")
    _check(dtype, 1000, 776, 520, transpose_A, transpose_B, warp_specialize=True)


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_warp_specialized_float8(dtype):
    if not _hopper():
        pytest.skip("float8 tensor cores need sm_90")
    _check(dtype, 300, 512, 1024, transpose_B=True, tk=128, tn=256, warp_specialize=True)


@pytest.mark.parametrize("M,N,K,schedule", [
    (16, 4096, 1024, {}),  # skinny: one row of blocks, mostly rows past M
    (257, 136, 72, {}),  # K = 1 and a bit tiles; ragged M and N
    (1000, 776, 64, dict(stages=4)),  # one K step: the producer never waits
    (777, 1024, 1000, dict(tn=256, stages=3, panel=8, epilogue="shared")),
    (333, 520, 1000, dict(tm=64, tn=128, threads=128, stages=2)),  # one compute warpgroup
])
def test_warp_specialized_shapes(M, N, K, schedule):
    if not _hopper():
        pytest.skip("warp specialization needs sm_90a")
    _check("bfloat16", M, N, K, warp_specialize=True, **schedule)


@pytest.mark.parametrize("M,N,K,schedule", [
    # clusters of 2 blocks along M share W's tiles (TMA multicast); ragged K (zero fill
    # reaches both blocks), ragged M within the last cluster, the T.use_swizzle order
    (1000, 1024, 1000, dict(tn=256, stages=3, panel=8, epilogue="shared", cluster=(1, 2, 1))),
    (512, 776, 520, dict(tn=256, stages=2, cluster=(1, 2, 1))),  # 2 stages: per-step release
    (1024, 512, 2048, dict(tn=128, stages=4, panel=4, cluster=(1, 4, 1))),
    (256, 1024, 512, dict(tn=256, stages=3, transpose_B=True, cluster=(1, 2, 1))),
    (512, 1024, 512, dict(tn=256, stages=3, cluster=(2, 1, 1))),  # clusters, no multicast
])
def test_warp_specialized_clusters(M, N, K, schedule):
    if not _hopper():
        pytest.skip("clusters with TMA multicast need sm_90a")
    _check("float16", M, N, K, warp_specialize=True, **schedule)


def test_cluster_grid_not_a_multiple_is_a_clear_error():
    if not _hopper():
        pytest.skip("clusters need sm_90")
    kernel = tilecute.compile(G.matmul(tn=256, warp_specialize=True, cluster=(1, 2, 1)))
    x = torch.randn(300, 256, device="cuda", dtype=torch.float16)  # 3 rows of blocks
    w = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="not a multiple of the cluster"):
        kernel(x, w, torch.empty(300, 256, device="cuda", dtype=torch.float16))


@pytest.mark.parametrize("dtype,schedule", [("float16", {}), ("bfloat16", dict(warp_specialize=True)),
                                            ("float16", dict(tm=64, threads=128, warp_specialize=True))])
def test_a_in_registers(dtype, schedule):
    """wgmma's RS form: A's tile goes shared -> registers with its columns scaled."""
    if not _hopper():
        pytest.skip("A from registers is wgmma's form (sm_90a)")
    M, N, K = 1000, 776, 520
    x = torch.randn(M, K, device="cuda").to(TORCH[dtype])
    scale = (torch.rand(K, device="cuda") + 0.5).to(TORCH[dtype])
    w = torch.randn(K, N, device="cuda").to(TORCH[dtype])
    y = torch.full((M, N), float("nan"), device="cuda", dtype=TORCH[dtype])
    tilecute.compile(G.matmul_a_registers(dtype=dtype, **schedule))(x, scale, w, y)
    ref = (x * scale).double() @ w.double()  # the product rounds to dtype, as in registers
    err = (y.double() - ref).abs().max().item()
    assert err <= (2e-3 if dtype == "float16" else 1e-2) * ref.abs().max().item() + 1e-2, err


@pytest.mark.parametrize("options", [None, {"disable_wgmma": True}])
@pytest.mark.parametrize("schedule", [{}, dict(tm=128, threads=256, n1=128)])
def test_chained_gemm_through_registers(schedule, options):
    """(X @ W1) @ W2 with the intermediate cast to fp16 in registers, never stored; with
    disable_wgmma on mma.sync, where both T.gemms take one partition (every warp along M)
    and the intermediate moves register by register."""
    if not _hopper() and options is None:
        pytest.skip("A from registers is wgmma's form (sm_90a)")
    n1 = schedule.get("n1", 64)
    M, N, K = 300, 520, 1000
    x = torch.randn(M, K, device="cuda", dtype=torch.float16) / 8
    w1 = torch.randn(K, n1, device="cuda", dtype=torch.float16) / 8
    w2 = torch.randn(n1, N, device="cuda", dtype=torch.float16)
    y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    tilecute.compile(G.matmul_chain(**schedule), options=options)(x, w1, w2, y)
    ref = (x.float() @ w1.float()).half().double() @ w2.double()
    err = (y.double() - ref).abs().max().item()
    assert err <= 2e-3 * ref.abs().max().item() + 1e-2, err
