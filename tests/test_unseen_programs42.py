"""A forty-second set of programs in TileLang's idioms (tests/unseen_programs42.py): kernels in
the ways TileLang is used outside its own repository, in idioms earlier rounds and
tests/third_party_programs.py did not write -- an im2col convolution through a flat view of
the weights and a 1x1 convolution through flat views of input and output (builders holding
jit stacked on the prim_func, or tilelang.compile), a direct convolution with Python range
loops and chained comparisons, one-thread-a-block average pooling, a GEMM fused with
tanh-GELU and a row max (names rebound step by step), warp-per-row L2 / group norms built
per dtype and a recurrent state over a T.dynamic token count, a GEMV macro with a
keyword-only output and a plain Python epilogue helper given a tensor, a bitonic top-k in a
T.SharedBuffer macro, e4m3 bytes in uint32 words decoded by bit arithmetic, the eager form
(RMSNorm, grouped-query attention with a Python flag choosing the loop range, rotary
embedding on 4-D slices), split-K with paired atomics, a tutorial row-per-thread GEMV with no
threads=, an in-place shared cumsum, and sparse attention over gathered KV rows with a
producer and a consumer warpgroup on mbarriers (T.set_max_nreg, wg_wait=-1 with
T.wait_wgmma, one macro per role given its buffers and a tuple of state).

CPU: each builds to an sm_90a cubin (and to sm_80 but the warp-specialized one, whose
setmaxnreg is sm_90a's, refused by name), and what decides its result is read in the
generated source.  All built as first written but the GEMV's epilogue: a plain Python helper
called in an expression with a tensor argument (`epilogue(acc[i], extra, idx)`; TileLang runs
it as Python on the buffer) was refused ("buffer 'extra' passed to ..."); tilecute now
inlines such a helper as a T.macro (tests/test_python_helper_values.py).  A Python float
accumulated in a loop (`acc = 0.0`, then `acc += X[...]` inside `for ic in range(C)`, as one
generated solution writes it) is refused here; TileLang 0.1.15 misreads it (the loop body
becomes `T.evaluate(0)`, the store reads an unbound loop variable).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs42.py``)."""

import math
import re

import pytest
import torch

import tilecute
import tilecute.language as T
import rounds
import unseen_programs42 as P
from tilecute.language import FrontendError

FACTORIES = ["windowed_topk_softmax", "packed_e4m3_rows_to_bf16", "row_cumsum_shared",
             "gemv_relu_sq_residual", "producer_consumer_gathered_attention",
             "warp_state_recurrence"]
BUILDERS = ["build_im2col_conv_gelu", "build_direct_conv_hardtanh", "build_split_k_gemm",
            "build_rowwise_gemv", "build_global_avg_pool", "build_matmul_gelu_rowmax",
            "build_conv1x1_flat_views"]
PER_HEADS = ["l2norm_rows", "groupnorm_rows"]  # jit factories of the head count H
EAGER = {"eager_rmsnorm": dict(M=64, N=256),
         "eager_gqa_attention": dict(N=2, QH=8, H=2, S=100, D=64, is_causal=True),
         "eager_rope_halves": dict(N=2, S=40, H=3, D=64, offset=5)}
HOPPER = {"producer_consumer_gathered_attention"}  # T.set_max_nreg: setmaxnreg is sm_90a's


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _kernel(name, **kw):
    if name in BUILDERS:
        return getattr(P, name)(**kw)
    if name in PER_HEADS:
        return getattr(P, name)(8, **kw)
    if name in EAGER:
        return getattr(P, name).compile(**{**EAGER[name], **kw})
    return getattr(P, name)(**kw)


_body = rounds.body_of(_kernel)


def test_every_program_is_listed():
    assert sorted(FACTORIES + PER_HEADS + list(EAGER)) == \
        sorted(n for n in dir(P) if hasattr(getattr(P, n), "get_tir"))
    assert sorted(BUILDERS) == sorted(n for n in dir(P) if n.startswith("build_") and
                                      n != "build_row_kernels")


test_program_builds_a_cubin = rounds.builds_a_cubin(
    FACTORIES + BUILDERS + PER_HEADS + list(EAGER), _kernel)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    [n for n in FACTORIES if n not in HOPPER], rounds.tir_of(P), "sm_80")


@pytest.mark.parametrize("name", BUILDERS)
def test_builder_builds_an_sm80_cubin(name):
    assert getattr(P, name)(target="sm_80").ensure_cubin()


@pytest.mark.parametrize("name", PER_HEADS)
def test_per_head_kernel_builds_an_sm80_cubin(name, tmp_path):
    assert tilecute.build_cubin(getattr(P, name).get_tir(8), "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("name", list(EAGER))
def test_eager_kernel_builds_an_sm80_cubin(name, tmp_path):
    func = getattr(P, name).get_tir(**EAGER[name])
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


def test_setmaxnreg_program_is_refused_for_sm80_by_name(tmp_path):
    with pytest.raises(Exception, match=r"T\.set_max_nreg .* an sm_90a instruction; the target is sm_80"):
        tilecute.build_cubin(P.producer_consumer_gathered_attention.get_tir(), "sm_80",
                             out_dir=str(tmp_path))


def test_im2col_reads_the_flat_weight_view():
    src = _body("build_im2col_conv_gelu")
    assert "w_flat = cute.make_tensor(w_ptr, cute.make_layout((144, 48,), stride=(48, 1,)))" in src
    assert "inside = p < 112 and r < 144" in src
    assert "tc_ld9 = x[n, oh + kh, ow + kw, r - r // 16 * 16]" in src
    assert "cute.math.erf(v * cutlass.Float32(0.7071067811865475))" in src


def test_direct_conv_range_loops_and_chained_bounds():
    src = _body("build_direct_conv_hardtanh")
    assert "for ic in cutlass.range(0, 3):" in src and "for kw in cutlass.range(0, 3):" in src
    assert "if 0 <= hi and hi < 12 and 0 <= wi and wi < 11:" in src
    assert "acc[0] = cutlass.Float32(B[oc])" in src
    assert "cute.arch.fmin(cute.arch.fmax(acc[0], cutlass.Float32(-1.0)), cutlass.Float32(1.0))" in src


def test_warp_rows_reduce_across_the_warp():
    src = _body("l2norm_rows")
    assert "lane = tc_tx" in src and "total = tcr.warp_allreduce(part[0], \"sum\", 32)" in src
    assert "den = cute.arch.fmax(cute.math.sqrt(total), cutlass.Float32(1e-12))" in src
    gn = _body("groupnorm_rows")
    assert 'mean = tcr.warp_allreduce(s[0], "sum", 32) / cutlass.Float32(128.0)' in gn
    assert "cutlass.Float32(1e-05)" in gn


def test_one_thread_blocks_pool_by_range_loops():
    src = _body("build_global_avg_pool")
    assert "fx, nx, _ = cute.arch.block_idx()" in src
    assert re.search(r"for h in cutlass\.range\(0, 6\):\s+for w in cutlass\.range\(0, 7\):\s+"
                     r"acc\[0\] = acc\[0\] \+ cutlass\.Float32\(inp\[nx, h, w, fx\]\)", src)
    assert "out[nx, fx] = cutlass.Float16(acc[0] * cutlass.Float32(0.023809523809523808))" in src


def test_gelu_epilogue_rebinds_then_row_max_bounded():
    src = _body("build_matmul_gelu_rowmax")
    # `cube = v * v; cube = cube * v`: the second binding reads the first
    assert "cube = v * v" in src and "cube_1_ = cube * v" in src
    assert "u = v + cube_1_ * cutlass.Float32(0.044715)" in src
    assert "cute.math.tanh(cutlass.Float32(0.7978845608028654) * u)) * cutlass.Float32(1.7)" in src
    assert 'tcrow.reduce_rows(acc, row_max, "max", clear=True)' in src
    assert re.search(r"if row < 200:\s+Out\[row\] = row_max\[", src)


def test_conv1x1_moves_tiles_through_flat_views():
    src = _body("build_conv1x1_flat_views")
    assert "x_flat = cute.make_tensor(x_ptr, cute.make_layout((240, 64,), stride=(64, 1,)))" in src
    assert "out_flat = cute.make_tensor(out_ptr, cute.make_layout((240, 96,), stride=(96, 1,)))" in src
    assert "if by * 64 + i3 < 240:" in src and "if by * 64 + i5 < 240:" in src  # the last tile


def test_recurrent_state_per_token():
    src = _body("warp_state_recurrence")
    assert ", T_LEN: cutlass.Int32" in src and "for t in cutlass.range(0, T_LEN):" in src
    step = src.split("for t in cutlass.range(0, T_LEN):", 1)[1]
    assert step.index('sa = tcr.warp_allreduce(p_sa[0], "sum", 32)') < \
        step.index("S_out[h, v_n, c_1_] = s_new") < step.index('y_val = tcr.warp_allreduce(p_y[0]')
    assert "if lane == 0:\n            y[t, h, v_n] = cutlass.Float16(y_val)" in step


def test_eager_gqa_flag_picks_the_range():
    causal = _body("eager_gqa_attention")
    assert "loop_range = cutlass.min(7, ((pl + 1) * 16 + 16 - 1) // 16)" in causal
    assert "for k in cutlass.range(0, loop_range):" in causal
    assert 'tcrow.reduce_rows(s_acc, run_sum, "sum", clear=False)' in causal
    assert "a_regs=True" in causal  # P is the PV GEMM's register A operand
    full = _body("eager_gqa_attention", is_causal=False)
    assert "loop_range = 7" in full and "for k in cutlass.range(0, 7):" in full


def test_eager_rope_angles_and_halves():
    src = _body("eager_rope_halves")
    assert "cute.math.pow(cutlass.Float32(10000.0), cutlass.Float32(dim) * cutlass.Float32(-1.0) " \
           "/ cutlass.Float32(32.0))" in src
    assert "pos = 5 + ps * 16 + s" in src


def test_a_python_float_accumulated_in_a_loop_is_refused():
    # TileLang 0.1.15 misreads this (the loop body becomes T.evaluate(0)); tilecute refuses it
    src = """
@T.prim_func
def conv_sum(X: T.Tensor((64, 8), "float32"), Y: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            acc = 0.0
            for c in range(8):
                acc += X[i, c]
            Y[i] = acc
"""
    with pytest.raises(FrontendError, match=r"'acc' is read after the loop/if body that rebinds "
                                            r"it .* Use `acc = T.alloc_var\(dtype\)`"):
        T.from_script(src)


def test_gemv_epilogue_helper_reads_the_extra_tensor():
    src = _body("gemv_relu_sq_residual")
    assert "r_1_ = cute.arch.fmax(acc[tc_lane9], cutlass.Float32(0.0))" in src
    assert "val = r_1_ * r_1_ + cutlass.Float32(tc_vec7[tc_lane9])" in src
    assert "tc_vec7.store(cute.make_tensor(r.iterator" in src  # the residual, 8 at a time


def test_topk_sort_swaps_pairs_and_keeps_the_head():
    src = _body("windowed_topk_softmax")
    assert "up = i_1_ & 1 << s1 + 1 != 0" in src and "j = i_1_ ^ 1 << s1 - s2" in src
    assert "if i_1_ < j and (up and val_s[i_1_] > tc_ld6 or not up and val_s[i_1_] < tc_ld6):" in src
    assert "lo = Bounds[bx, 0]" in src and "hi = Bounds[bx, 1]" in src
    assert 'T.reduce_max(p, best)' in src and 'T.reduce_sum(p, total)' in src


def test_producer_and_consumer_hand_slots_over_on_mbarriers():
    src = _body("producer_consumer_gathered_attention")
    consumer, producer = src.split("if tc_tid < 128:", 1)[1].split("if tc_tid >= 128:", 1)
    assert "cute.arch.setmaxregister_increase(240)" in consumer
    assert "cute.arch.setmaxregister_decrease(80)" in producer
    # the consumer waits for each slot, its QK^T is waited for by T.wait_wgmma, it frees the slot
    assert consumer.index("tct.wait(ready0, i & 1)") < consumer.index("wait=None)") < \
        consumer.index("tcm.wait_batches(0)") < consumer.index("tct.arrive(free0)") < \
        consumer.index("tct.wait(ready1, i & 1)") < consumer.index("tct.arrive(free1)")
    # the producer waits for a free slot (first pass: the phase before), fills it, arrives
    assert producer.index("tct.wait(free0, i_1_ & 1 ^ 1)") < \
        producer.index("cute.arch.cp_async_mbarrier_arrive_noinc(ready0)") < \
        producer.index("tct.wait(free1, i_1_ & 1 ^ 1)") < \
        producer.index("cute.arch.cp_async_mbarrier_arrive_noinc(ready1)")
    assert "ok0[row] = cutlass.Uint8(idx_now[0] >= 0)" in producer
    # the output is staged in Q's tile (O_s = Q_s), after the last QK^T has read it
    assert "cute.make_tensor(Q_s.iterator + cute.assume((i13 * 64 + i14)" in consumer


def test_packed_bytes_decode_by_bits():
    src = _body("packed_e4m3_rows_to_bf16")
    assert "limit = Count[0]" in src and "live[r_1_] = row < n and row < limit" in src
    assert "tcmath.reinterpret(cutlass.Uint16(bits), cutlass.BFloat16)" in src
    assert "RowExp[cutlass.min(bx * 32 + r_2_, n - 1)]" in src


def test_eager_rmsnorm_binds_consts():
    src = _body("eager_rmsnorm")
    assert "X = cute.make_tensor(X_ptr, cute.make_layout((64, 256,), stride=(256, 1,)))" in src
    assert "cute.math.rsqrt(tcr.pick(ssum, i_1_, 16) / cutlass.Float32(256.0) + " \
           "cutlass.Float32(1e-06))" in src


def test_split_k_adds_pairs_atomically():
    src = _body("build_split_k_gemm")
    assert "tca.atomic_add(C, (m, n), C_s[i * 64 + j * 2])" in src
    assert "tca.atomic_add(C, (m, n + 1), C_s[i * 64 + j * 2 + 1])" in src
    assert "panel_rows" in src  # T.use_swizzle(10)


def test_rowwise_gemv_default_threads():
    src = _body("build_rowwise_gemv")
    assert "A_s[tm * 64 + tk] = A[bm * 128 + tm, bk * 64 + tk]" in src
    assert "y[bm * 128 + tm] = cutlass.Float16(c[0])" in src


def test_cumsum_in_place():
    src = _body("row_cumsum_shared")
    assert "# T.cumsum(row, row, dim=0)" in src and "tcs.warp_inclusive_scan" in src


# ---- GPU -------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_im2col_conv_gelu_on_gpu():
    x = torch.randn(2, 10, 9, 16, device="cuda").half()
    w = torch.randn(3, 3, 16, 48, device="cuda").half() * 0.1
    b = torch.randn(48, device="cuda").half()
    out = P.build_im2col_conv_gelu()(x, w, b)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(),
                                     b.float())
    ref = torch.nn.functional.gelu(ref).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_direct_conv_hardtanh_on_gpu():
    X = torch.randn(2, 3, 12, 11, device="cuda").half()
    Wt = torch.randn(5, 3, 3, 3, device="cuda").half() * 0.3
    B = torch.randn(5, device="cuda").half() * 0.1
    Y = P.build_direct_conv_hardtanh()(X, Wt, B)
    ref = torch.nn.functional.conv2d(X.float(), Wt.float(), B.float(), padding=1).clamp(-1, 1)
    torch.testing.assert_close(Y.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_warp_row_norms_on_gpu():
    x = torch.randn(8, 128, device="cuda").half()
    ref = x.float() / x.float().norm(dim=1, keepdim=True).clamp_min(1e-12)
    torch.testing.assert_close(P.l2norm_rows(8)(x).float(), ref, rtol=1e-3, atol=1e-3)
    g, be = torch.randn(8 * 128, device="cuda").half(), torch.randn(8 * 128, device="cuda").half()
    y = P.groupnorm_rows(8)(x, g, be)
    ref = torch.nn.functional.group_norm(x.float().reshape(1, -1), 8, g.float(), be.float(), 1e-5)
    torch.testing.assert_close(y.float(), ref.reshape(-1), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gemv_relu_sq_residual_on_gpu():
    x = torch.randn(96, device="cuda").half()
    W = torch.randn(96, 256, device="cuda").half() * 0.1
    r = torch.randn(256, device="cuda").half()
    out = P.gemv_relu_sq_residual()(x, W, r)
    v = x.float() @ W.float()
    torch.testing.assert_close(out.float(), v.clamp_min(0) ** 2 + r.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_windowed_topk_softmax_on_gpu():
    rows = 5
    S = torch.randn(rows, 256, device="cuda")
    bounds = torch.tensor([[0, 256], [10, 200], [100, 120], [0, 40], [250, 256]],
                          device="cuda", dtype=torch.int32)
    idx, prob = P.windowed_topk_softmax()(S, bounds)
    for r in range(rows):
        lo, hi = bounds[r].tolist()
        k = min(32, hi - lo)
        vals, ref_idx = torch.topk(S[r, lo:hi], k)
        assert set(idx[r, :k].tolist()) == set((ref_idx + lo).tolist())
        assert (idx[r, k:] == -1).all()
        torch.testing.assert_close(prob[r, :k], torch.softmax(vals, 0))
        assert (prob[r, k:] == 0).all()


@pytest.mark.gpu
def test_producer_consumer_gathered_attention_on_gpu():
    S, SKV, H, D, K = 5, 1000, 64, 64, 256
    Q = torch.randn(S, H, D, device="cuda").bfloat16()
    KV = torch.randn(SKV, D, device="cuda").bfloat16()
    ind = torch.randint(0, SKV, (S, K), device="cuda", dtype=torch.int32)
    ind[:, 200:] = -1
    ind[1, 5:70] = -1  # a whole slot but for a few rows
    out = P.producer_consumer_gathered_attention()(Q, KV, ind)
    kv = KV[ind.clamp_min(0).long()].float()  # S K D
    s = torch.einsum("shd,skd->shk", Q.float(), kv) / math.sqrt(D)
    s = s.masked_fill((ind < 0)[:, None, :], float("-inf"))
    ref = torch.einsum("shk,skd->shd", torch.softmax(s, -1), kv)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_packed_e4m3_rows_to_bf16_on_gpu():
    n = 70
    vals = torch.randn(n, 128, device="cuda").to(torch.float8_e4m3fn)
    bytes_ = vals.view(torch.uint8)
    bytes_ = torch.where((bytes_ & 0x78) == 0, bytes_ | 0x08, bytes_)  # normal values only
    vals = bytes_.view(torch.float8_e4m3fn)
    row_exp = torch.randint(120, 131, (n,), device="cuda", dtype=torch.int32)
    packed = bytes_.view(torch.int32)  # four bytes a word, the first in the low byte
    count = torch.tensor([61], device="cuda", dtype=torch.int32)
    out = P.packed_e4m3_rows_to_bf16()(packed.view(torch.uint32) if hasattr(torch, "uint32") else packed,
                                       row_exp.view(torch.uint32) if hasattr(torch, "uint32") else row_exp,
                                       count)
    ref = vals.float() * torch.pow(2.0, row_exp.float() - 127)[:, None]
    ref[61:] = 0
    torch.testing.assert_close(out.float(), ref.bfloat16().float())


@pytest.mark.gpu
def test_eager_rmsnorm_on_gpu():
    X = torch.randn(64, 256, device="cuda").half()
    w = torch.randn(256, device="cuda").half()
    O = P.eager_rmsnorm(X, w)
    ref = X.float() * torch.rsqrt(X.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(O.float(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_split_k_gemm_on_gpu():
    A = torch.randn(256, 512, device="cuda").half() * 0.1
    B = torch.randn(512, 192, device="cuda").half() * 0.1
    C = torch.zeros(256, 192, device="cuda").half()
    P.build_split_k_gemm()(A, B, C)
    torch.testing.assert_close(C.float(), A.float() @ B.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_rowwise_gemv_on_gpu():
    A = torch.randn(512, 384, device="cuda").half()
    x = torch.randn(384, device="cuda").half()
    y = P.build_rowwise_gemv()(A, x)
    torch.testing.assert_close(y.float(), A.float() @ x.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.gpu
def test_global_avg_pool_on_gpu():
    x = torch.randn(3, 6, 7, 40, device="cuda").half()
    out = P.build_global_avg_pool()(x)
    torch.testing.assert_close(out.float(), x.float().mean((1, 2)), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_matmul_gelu_rowmax_on_gpu():
    X = torch.randn(200, 256, device="cuda").half() * 0.2
    Wt = torch.randn(256, 64, device="cuda").half() * 0.2
    b = torch.randn(64, device="cuda").half()
    out = P.build_matmul_gelu_rowmax()(X, Wt, b)
    v = X.float() @ Wt.float() + b.float()
    ref = (torch.nn.functional.gelu(v, approximate="tanh") * 1.7).amax(1)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_conv1x1_flat_views_on_gpu():
    x = torch.randn(2, 12, 10, 64, device="cuda").half()
    Wt = torch.randn(64, 96, device="cuda").half() * 0.1
    out = P.build_conv1x1_flat_views()(x, Wt)
    torch.testing.assert_close(out.float(), x.float() @ Wt.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_warp_state_recurrence_on_gpu():
    H, N, TL = 4, 64, 9
    S0 = torch.randn(H, N, N, device="cuda") * 0.1
    R, Wd, A, B, V, K = (torch.randn(TL, H, N, device="cuda").half() * 0.3 for _ in range(6))
    S_out = torch.empty_like(S0)
    y = P.warp_state_recurrence()(S0, R, Wd, A, B, V, K, S_out)
    S = S0.clone()
    ref = []
    for t in range(TL):
        sa = torch.einsum("hvk,hk->hv", S, A[t].float())
        S = S * Wd[t].float()[:, None, :] + sa[:, :, None] * B[t].float()[:, None, :] \
            + V[t].float()[:, :, None] * K[t].float()[:, None, :]
        ref.append(torch.einsum("hvk,hk->hv", S, R[t].float()))
    torch.testing.assert_close(S_out, S, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(y.float(), torch.stack(ref), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_eager_gqa_attention_on_gpu():
    N, S, QH, H, D = 2, 100, 8, 2, 64
    Q = torch.randn(N, S, QH, D, device="cuda").half()
    K = torch.randn(N, S, H, D, device="cuda").half()
    V = torch.randn(N, S, H, D, device="cuda").half()
    for causal in (True, False):
        O = P.eager_gqa_attention(Q, K, V, is_causal=causal)
        q = Q.float().transpose(1, 2)
        k = K.float().transpose(1, 2).repeat_interleave(QH // H, 1)
        v = V.float().transpose(1, 2).repeat_interleave(QH // H, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(O.float(), ref.transpose(1, 2), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_eager_rope_halves_on_gpu():
    X = torch.randn(2, 40, 3, 64, device="cuda")
    O = P.eager_rope_halves(X, offset=5)
    pos = torch.arange(40, device="cuda").float() + 5
    freq = torch.pow(10000.0, -torch.arange(32, device="cuda").float() / 32)
    ang = pos[:, None] * freq[None, :]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = X[..., :32], X[..., 32:]
    ref = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    torch.testing.assert_close(O, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_row_cumsum_shared_on_gpu():
    X = torch.randn(16, 512, device="cuda")
    torch.testing.assert_close(P.row_cumsum_shared()(X), torch.cumsum(X, 1), rtol=1e-4, atol=1e-3)
