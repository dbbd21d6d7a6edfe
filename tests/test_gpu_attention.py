"""On the GPU: examples/attention.py against a float32 torch reference (MHA and GQA, causal
and not, head dims 64/128/256, fp16 and bf16, ragged sequence lengths), and the T.gemm warp
policies and row reductions it relies on.  CPU: every variant builds (tests below
without the gpu mark)."""

import pytest

import attention as A
import tilecute
import tilecute.language as T

VARIANTS = [  # heads, kv_heads, dim, causal, dtype, schedule
    (4, 4, 128, False, "float16", {}),
    (4, 4, 128, True, "float16", {}),
    (8, 2, 64, False, "bfloat16", {}),
    (8, 2, 64, True, "float16", {}),
    (2, 1, 256, True, "bfloat16", {}),
    (4, 4, 128, True, "float16", {"block_N": 128, "warp_specialize": True}),
    (4, 2, 128, False, "bfloat16", {"block_N": 128}),
    (4, 4, 64, False, "float16", {"warp_specialize": True}),
    (4, 4, 64, True, "float16", {"block_M": 128, "threads": 256}),  # two warpgroups, no producer
    (4, 4, 128, False, "float16", {"regs": (40, 232), "lpt": True}),
    # causal persistent walks (groups of pairs, longest first, snake): few blocks, so every
    # block takes many tiles and a partial last group
    (4, 4, 64, True, "bfloat16", {"sms": 7}),
    (3, 3, 128, True, "float16", {"persistent": True, "sms": 5}),
    # the earlier head-dim-128 default: 176-key steps, persistent (few blocks)
    (4, 4, 128, False, "float16", {"block_N": 176, "persistent": True, "sms": 7}),
]
IDS = [f"H{h}-KV{kv}-D{d}-{'causal' if c else 'full'}-{dt}"
       + "".join(f"-{k}{v}" for k, v in kw.items()) for h, kv, d, c, dt, kw in VARIANTS]


@pytest.mark.parametrize("heads,kv_heads,dim,causal,dtype,kw", VARIANTS, ids=IDS)
def test_attention_variant_builds(heads, kv_heads, dim, causal, dtype, kw, tmp_path):
    func = A.flash_attention(heads, dim, kv_heads, causal, dtype, **kw)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_pingpong_hands_over_the_turn_before_waiting(cache_dir):
    """The two compute warpgroups' turns (head dim 128): a warpgroup issues both GEMMs,
    hands the turn over, and only then waits for its first GEMM (FA3's order)."""
    script = A.flash_attention_kernel(4, 128, 4, False, "float16").get_source("script")
    loop = script[script.index("for k in T.Pipelined(1"):].splitlines()
    order = [next(i for i, line in enumerate(loop) if text in line) for text in (
        "T.named_barrier_sync(2 + ", "T.gemm(Q_s, K_s, S", "T.wgmma_gemm(P, V_s, acc_o",
        "T.named_barrier_arrive(3 - ", "T.wait_wgmma(1)", "T.reduce_max(S, m")]
    assert order == sorted(order)


def test_wait_for_pv_is_anchored_after_the_row_statistics_up_to_128(cache_dir):
    """The steady step's wait for P V (step k - 1's) stays after the row statistics that
    come before the exponentials where O is at most 128 wide (the exponentials then feed
    their conversions into P, FA4's schedule), after the row sums at 256, and after the
    row sums at any width with ``late_wait_anchor``."""
    def anchors(dim, **options):
        func = A.flash_attention(4, dim, 4, False, "float16")
        kernel = tilecute.compile(func, out_idx=[3, 4], target="sm_90a",
                                  options={**A.OPTIONS, **options})
        script = kernel.get_source("script")
        return {line.strip() for line in script.splitlines() if "T.wait_wgmma(0)  #" in line}

    assert anchors(128) == {"T.wait_wgmma(0)  # after the writes of alpha"}
    assert anchors(64) == {"T.wait_wgmma(0)  # after the writes of alpha"}
    assert anchors(256) == {"T.wait_wgmma(0)  # after the writes of l"}
    assert anchors(128, late_wait_anchor=True) == {"T.wait_wgmma(0)  # after the writes of l"}


def test_three_warpgroups_take_turns(cache_dir):
    """Head dim 64 (192 rows over three compute warpgroups): the turns go round the three
    (FA4's order there); the last warpgroup opens the first turn once, before the loop
    over tiles, and every step hands over (the turns run on from tile to tile; the last
    step's P V is issued out of turn)."""
    script = A.flash_attention_kernel(4, 64, 4, False, "float16").get_source("script")
    opens = script.index("if T.get_thread_binding(0) // 128 == 2:\n")
    # (persistent: once per kernel, before the compute warpgroups' loop over tiles)
    assert "for w in T.serial(" in script[opens:script.index("T.Pipelined(")]
    assert script.count("T.named_barrier_sync(2 + T.get_thread_binding(0) // 128, 256)") == 2
    assert "if T.get_thread_binding(0) // 128 < 2 or" not in script
    assert script.count(
        "T.named_barrier_arrive(2 + (T.get_thread_binding(0) // 128 + 1) % 3, 256)") == 2


def test_attention_op_shapes_under_fake_tensors(cache_dir):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = A.attention_op(8, 64, 2, True, "float16", block_N=64)
    with FakeTensorMode():
        q = torch.empty(2, 77, 8, 64, dtype=torch.float16)
        k = torch.empty(2, 77, 2, 64, dtype=torch.float16)
        o, lse = op(q, k, k)
        assert tuple(o.shape) == (2, 77, 8, 64) and o.dtype == torch.float16
        assert tuple(lse.shape) == (2, 8, 77) and lse.dtype == torch.float32


@pytest.mark.gpu
def test_attention_op_under_torch_compile():
    import torch

    op = A.attention_op(4, 128, 4, False, "float16")
    q, k, v = (torch.randn(1, 300, 4, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    o, _ = torch.compile(lambda q, k, v: op(q, k, v), fullgraph=True)(q, k, v)
    ro, _ = A.reference(q, k, v, False)
    torch.testing.assert_close(o.float(), ro, atol=4e-3, rtol=4e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [1, 127, 1000, 4097])
@pytest.mark.parametrize("heads,kv_heads,dim,causal,dtype,kw", VARIANTS, ids=IDS)
def test_attention_matches_torch(heads, kv_heads, dim, causal, dtype, kw, seq):
    import torch

    kernel = A.flash_attention_kernel(heads, dim, kv_heads, causal, dtype, **kw)
    tdt = getattr(torch, dtype)
    torch.manual_seed(seq)
    q = torch.randn(2, seq, heads, dim, device="cuda", dtype=tdt)
    k = torch.randn(2, seq, kv_heads, dim, device="cuda", dtype=tdt)
    v = torch.randn(2, seq, kv_heads, dim, device="cuda", dtype=tdt)
    o, lse = kernel(q, k, v)
    ro, rlse = A.reference(q, k, v, causal)
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    torch.testing.assert_close(o.float(), ro, atol=tol, rtol=tol)
    torch.testing.assert_close(lse, rlse, atol=1e-3, rtol=1e-3)


def _policy_gemm(m, n, threads, policy):
    @T.prim_func
    def policy_gemm(A_: T.Tensor((m, 64), "float16"), B_: T.Tensor((64, n), "float16"),
                    C_: T.Tensor((m, n), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            As = T.alloc_shared((m, 64), "float16")
            Bs = T.alloc_shared((64, n), "float16")
            acc = T.alloc_fragment((m, n), "float32")
            T.copy(A_[0, 0], As)
            T.copy(B_[0, 0], Bs)
            T.gemm(As, Bs, acc, clear_accum=True, policy=policy)
            T.copy(acc, C_[0, 0])
            r = T.alloc_fragment((m,), "float32")  # warps along N: partials meet in shared
            T.reduce_sum(acc, r, dim=1)
            T.copy(r, R[0])
    return policy_gemm


@pytest.mark.gpu
@pytest.mark.parametrize("options", [None, {"disable_tma": True, "disable_wgmma": True}],
                         ids=["wgmma", "mma.sync"])
@pytest.mark.parametrize("m,n,threads,policy", [
    (64, 128, 256, T.GemmWarpPolicy.Square),    # wgmma: M = 64 split along N
    (128, 128, 256, T.GemmWarpPolicy.FullCol),
    (128, 64, 256, T.GemmWarpPolicy.FullRow),
    (64, 64, 128, T.GemmWarpPolicy.FullRow),
])
def test_gemm_warp_policies_on_gpu(m, n, threads, policy, options):
    import torch

    kernel = tilecute.compile(_policy_gemm(m, n, threads, policy), options=options)
    a = torch.randn(m, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, n, device="cuda", dtype=torch.float16)
    c = torch.zeros(m, n, device="cuda")
    r = torch.zeros(m, device="cuda")
    kernel(a, b, c, r)
    ref = a.float() @ b.float()
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(r, ref.sum(1), atol=5e-2, rtol=1e-3)
