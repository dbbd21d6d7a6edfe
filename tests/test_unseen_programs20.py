"""A twentieth set of programs in TileLang's idioms (tests/unseen_programs20.py), all from
training: normalisation backward (dX and dGamma / dBeta by atomics or a second-stage
reduction), softmax and cross-entropy backward (online log-sum-exp over vocabulary tiles),
gated-activation backward, attention backward pieces (delta, dK / dV by GEMMs on transposed
operands, dQ by float32 atomics, the dQ postprocess), embedding and rotary backward, the
two GEMMs of a linear layer's backward, AdamW / SGD steps, clipping by the global norm,
dropout from a counter-based hash, loss-scale unscaling with NaN / Inf checks, BCE and
batch-norm backward, FP8 delayed scaling.  CPU: each builds to an sm_90a and an sm_80
cubin, and what each means is checked in the generated source.  GPU: each matches a torch
reference."""

import re

import pytest

import tilecute

import rounds
import unseen_programs20 as P

PROGRAMS = ["rmsnorm_bwd_atomic_dw", "layernorm_bwd_partials", "layernorm_bwd_reduce_partials",
            "softmax_bwd_dynamic_rows", "cross_entropy_smoothed_zloss", "swiglu_bwd_packed", "geglu_tanh_bwd",
            "attn_bwd_delta_bshd", "attn_bwd_kv_major_gqa", "attn_bwd_dq_postprocess", "attn_bwd_register_p",
            "embedding_bwd_sorted_runs", "rope_bwd_neox_position_ids", "linear_bwd_grad_input",
            "linear_bwd_grad_weight_splitm", "adamw_step_master_weights", "sgd_nesterov_tiles",
            "clip_grad_global_norm", "dropout_hash_fwd", "dropout_hash_bwd", "amp_unscale_and_check",
            "amp_update_scale", "bce_logits_fwd_bwd_mean", "batchnorm_bwd_column_tiles", "cumsum_bwd_reverse",
            "fp8_delayed_scaling_update", "rmsnorm_bwd_dynamic_partials",
            "logsumexp_vocab_clear_false", "rope_interleaved_bwd_pairs"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


_body = rounds.kernel_body
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(PROGRAMS, rounds.tir_of(P), "sm_80")


# ---- refusals ----------------------------------------------------------------------------
def test_rows_of_1000_are_refused_as_tilelang_refuses_them():
    # TileLang 0.1.15's layout inference finds no fragment layout for a (2, 1000) row
    # reduction over 128 threads ("no available layout found"); tilecute names the form
    with pytest.raises(Exception) as err:
        P.softmax_bwd_dynamic_rows(N=1000).get_kernel_source()
    msg = str(err.value)
    assert "T.reduce_sum" in msg and "'yd'" in msg and "1000 elements" in msg
    assert "unseen_programs20.py" in msg
    with pytest.raises(Exception) as err:
        P.fp8_delayed_scaling_update(T_hist=10).get_kernel_source()
    assert "T.reduce_max" in str(err.value) and "10 elements" in str(err.value)


# ---- what the generated source says ------------------------------------------------------
def test_rmsnorm_backward_adds_column_sums_once_per_element():
    src = _body(_src("rmsnorm_bwd_atomic_dw"))
    # dW: 384 column sums, each added once: by the first thread of the two holding its
    # row of the transposed partials, 6 rounds of 64 rows
    before = src.split("tca.atomic_add(dW,", 1)[0]
    atomic = before.rsplit("for ", 1)[1]
    assert atomic.startswith("tc_c") and "range_constexpr(6)" in atomic
    assert before.rsplit("\n", 4)[-4].lstrip().startswith("if tc_tid % 2 == 0:")
    # (dy w - xhat c / N) rstd; a replicated row value read at the thread's row is a select
    # over its registers (tcr.pick) since helper U's change
    assert "/ cutlass.Float32(384.0)) * r[" in src or "/ cutlass.Float32(384.0)) * tcr.pick(r, " in src
    assert "bx * 8 + " in src and "< 100" in src  # the ragged row block


def test_layernorm_backward_two_stages():
    src = _body(_src("layernorm_bwd_partials"))
    assert "Stats[bx * 16 + " in src and ", 0]" in src and ", 1]" in src  # mean and rstd columns
    assert "PartG[bx, " in src and "PartB[bx, " in src
    assert "atomic" not in src
    src = _body(_src("layernorm_bwd_reduce_partials", G=7))
    # clear=False: the chunk's sums are combined with the running ones, not replacing them
    assert src.count('tcr.combine(ag[') + src.count('tcr.combine(ab[') >= 2 or "clear=False" in src
    # the ragged last chunk of the 7 partial rows: TMA boxes of 4 rows at row (k + 1) * 4,
    # the rows past the tensor zero-filled by the TMA unit
    assert "TMA load of a 4x64 box of PartG" in src and "(bx * 64, (k + 1) * 4)" in src


def test_cross_entropy_masks_the_vocab_tail_and_ignored_rows():
    src = _body(_src("cross_entropy_smoothed_zloss"))
    assert 'cutlass.Float32(float("-inf"))' in src and "< 5000" in src
    assert "lab == cutlass.Int64(-100)" in src
    assert "cutlass.Float32(0.0002) * m[" in src or "cutlass.Float32(0.0002) * tcr.pick(m, " in src  # 2 z lse
    assert "cutlass.Float32(2e-05)" in src  # eps / V
    # the second sweep reads m after the row loop replaced it by the log-sum-exp
    assert src.index("m[i_6_] = lse") < src.index("for t_1_ in cutlass.range(0, 10):")


def test_running_max_with_clear_false_keeps_the_old_maximum():
    src = _body(_src("logsumexp_vocab_clear_false"))
    assert 'tcr.combine(m[' in src and '"max")' in src.split("tcr.combine(m[", 1)[1].split("\n", 1)[0]
    # m_prev is copied before the reduction updates m
    assert src.index("mp[") < src.index("tcr.combine(m[")


def test_gated_backward_reads_both_halves():
    src = _body(_src("swiglu_bwd_packed"))
    assert "(320 + bx * 64, by * 32)" in src  # the up half's TMA box starts at column F
    assert "* 640 + 320 + bx * 64 + " in src  # dU stored into the second half
    src = _body(_src("geglu_tanh_bwd"))
    assert "cute.math.tanh(" in src and "if col < 200:" in src


def test_attention_backward_transposes_and_atomics():
    src = _body(_src("attn_bwd_kv_major_gqa"))
    assert "# T.gemm(k_s, q_s, st): st += k_s @ q_s^T" in src
    assert "# T.gemm(v_s, do_s, dpt): dpt += v_s @ do_s^T" in src
    assert "# T.gemm(dst_s, k_s, dq): dq += dst_s^T @ k_s" in src
    assert "# T.gemm(pt_s, do_s, dv): dv += pt_s @ do_s" in src
    assert "tca.atomic_add_view(cute.make_tensor(dQacc.iterator" in src
    assert "h = by * 2 + it // 2" in src  # the group's query heads
    assert "if qt * 64 + 64 > bx * 64:" in src  # causal tiles skipped
    assert "keep = bx * 64 + i <= qt * 64 + (j + " in src
    assert "* cutlass.Float32(0.125)" in src  # dK scaled by the softmax scale
    # every shared operand written by the threads is fenced and synced before its GEMM (the
    # compute warpgroups' named barrier: the loop has a producer warpgroup)
    for buf, gemm in [("pt_s", "T.gemm(pt_s"), ("dst_s", "T.gemm(dst_s, q_s")]:
        seg = src.split(f"cute.make_tensor({buf}.iterator", 1)[1].split(gemm, 1)[0]
        assert "cute.arch.barrier(barrier_id=1, number_of_threads=128)" in seg, buf
    src = _body(_src("attn_bwd_delta_bshd"))
    # (the ragged tile's rows: a vector path under the row test, no per-lane reads of O)
    assert "O.iterator + cute.assume(bz * 38400 + (bx * 64 + i1) * 192 + by * 64 + i2" in src
    assert "if bx * 64 + i1 < 200:" in src and "Delta[bz, by, bx * 64 + " in src
    src = _body(_src("attn_bwd_dq_postprocess"))
    assert "cutlass.Float32(0.125)" in src and "cutlass.Float16(" in src


def test_attention_backward_register_operands():
    src = _body(_src("attn_bwd_register_p"))
    # P^T and dS^T stay in registers as the A operand of the dV and dK GEMMs
    assert "# T.gemm(st_cast, do_s, dv): dv += st_cast @ do_s" in src
    assert "tcm.gemm(tc_mma1, tc_tid, dv, st_cast," in src and "a_regs=True" in src
    assert "tcm.gemm(tc_mma3, tc_tid, dk, dpt_cast," in src
    # clear_accum: the score, dP and dQ GEMMs overwrite their accumulators
    assert src.count("accumulate=False)") == 3
    assert "# T.gemm(ds_s, k_s, dq): dq = ds_s^T @ k_s" in src
    # dS^T is written to shared after the dK GEMM read its registers, and read after a
    # barrier (the compute warpgroups' named barrier: the loop has a producer warpgroup)
    seg = src.split("cute.make_tensor(ds_s.iterator", 1)[1].split("T.gemm(ds_s", 1)[0]
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=128)" in seg
    assert "tca.atomic_add_view(cute.make_tensor(dQacc.iterator" in src


def test_embedding_runs_flush_by_atomics():
    src = _body(_src("embedding_bwd_sorted_runs"))
    assert src.count("tca.atomic_add(dW, (cur[0], c), acc[0])") == 2
    assert "dY[Perm[p], c]" in src and "if idx != cur[0]:" in src


def test_rope_backward_rotates_back():
    src = _body(_src("rope_bwd_neox_position_ids"))
    assert "cutlass.min(bx * 16 + i, 49)" in src and "pos = Pos[bz, s]" in src
    assert "* tc_ld3 + cutlass.Float32(g[i * 64 + (j + tc_lane2) + 16])" in src  # dy1 c + dy2 s
    assert "- cutlass.Float32(g[i * 64 + (j + tc_lane2) - 16])" in src  # dy2 c - dy1 s
    # out_idx=[3] in the middle of the signature: Sin (after dX) is still an input
    params = P.rope_bwd_neox_position_ids.get_tir().params
    assert [p.name for p in params][3:] == ["dX", "Sin"]


def test_interleaved_rope_pairs_keep_their_strides():
    src = _body(_src("rope_interleaved_bwd_pairs"))
    # (g and o, 4 and 2 KiB read across threads, live in shared memory: the lanes' pairs)
    assert re.search(r"o\[i \* 64 \+ 2 \* \(j \+ (tc_lane\d+)\)\] = cutlass\.BFloat16\(g\[i \* 64 \+ "
                     r"2 \* \(j \+ \1\)\] \* c \+ g\[i \* 64 \+ 2 \* \(j \+ \1\) \+ 1\] \* s\)", src), src
    assert re.search(r"o\[i \* 64 \+ 2 \* \(j \+ (tc_lane\d+)\) \+ 1\] = cutlass\.BFloat16\(g\[i \* 64 \+ "
                     r"2 \* \(j \+ \1\) \+ 1\] \* c - g\[i \* 64 \+ 2 \* \(j \+ \1\)\] \* s\)", src), src


def test_linear_backward_gemms_transpose_their_operands():
    src = _body(_src("linear_bwd_grad_input"))
    assert "acc += dc_s @ b_s^T" in src and "n % 3" in src
    src = _body(_src("linear_bwd_grad_weight_splitm"))
    assert "acc += a_s^T @ c_s" in src
    assert "m0 = bz * 125 + s * 32" in src and "s * 32 + i < 125 and m0 + i < 500" in src
    assert "tca.atomic_add_view(cute.make_tensor(dB.iterator" in src


def test_optimizer_steps():
    src = _src("adamw_step_master_weights")
    assert "cute.math.pow(beta1, cutlass.Float32(step))" in src
    assert "lr: cutlass.Float32" in src and "step: cutlass.Int32" in src
    assert "Pbf[k] = cutlass.BFloat16(" in src and "if k < N:" in src
    src = _body(_src("sgd_nesterov_tiles"))
    assert "< 3000" in src and "cutlass.Float32(0.9)" in src


def test_clipping_runs_two_kernels_in_order():
    src = _src("clip_grad_global_norm")
    assert "def tilecute_clip_0" in src and "def tilecute_clip_1" in src
    launch = src.split("\n@cute.jit", 1)[1]
    assert launch.index("tilecute_clip_0(") < launch.index("tilecute_clip_1(")
    assert "if tc_tid == 0:\n        tca.atomic_add(Norm2, (0,), tot[0])" in src
    assert "cute.math.sqrt(Norm2[0])" in src


def test_dropout_hash_is_the_same_in_both_directions():
    import re
    fwd, bwd = _body(_src("dropout_hash_fwd")), _body(_src("dropout_hash_bwd"))
    consts = ["cutlass.Uint32(2654435761)", "cutlass.Uint32(2246822507)", "cutlass.Uint32(3266489909)",
              "cutlass.Uint32(seed)", ">> cutlass.Uint32(8)", "cutlass.Float32(5.960464477539063e-08)"]
    for c in consts:
        assert c in fwd and c in bwd, c
    assert re.search(r"idx = \(by \* 16 \+ i\) \* 192 \+ bx \* 64 \+ \(?j", fwd)
    assert "r = idx // 192" in bwd


def test_loss_scaling_checks_nan_and_inf():
    src = _body(_src("amp_unscale_and_check"))
    assert "cute.math.isnan(" in src and "cute.math.isinf(" in src
    assert "tca.atomic_max(FoundInf, (0,), flag[0])" in src
    assert "inv = cutlass.Float32(1.0) / Scale[0]" in src
    src = _body(_src("amp_update_scale"))
    assert "if n == 3:" in src and "Scale[0] * cutlass.Float32(0.5)" in src


def test_bce_mean_and_batchnorm_backward():
    src = _body(_src("bce_logits_fwd_bwd_mean"))
    assert "cute.math.log1p(" in src
    assert "if tc_tid == 0:\n        tca.atomic_add(Loss, (0,), s[0] / cutlass.Float32(3000.0))" in src
    src = _body(_src("batchnorm_bwd_column_tiles"))
    assert src.count("for r") >= 2 and "< 300" in src
    assert "dGamma[bx * 32 + " in src and "dBeta[bx * 32 + " in src


def test_reverse_cumsum_and_fp8_history_roll():
    src = _body(_src("cumsum_bwd_reverse"))
    assert "T.cumsum(s, s, dim=1, reverse=True)" in src and "255 - (" in src
    src = _body(_src("fp8_delayed_scaling_update"))
    assert "cute.math.isfinite(" in src
    # the history is read from the shared copy (h), never from Hist after it is overwritten
    assert "h[i * 16 + cutlass.max((j + " in src
    assert src.index("tct.wait(") < src.index("h[i * 16 +")


def test_ceildiv_of_a_symbol_in_a_shape():
    # TileLang takes T.ceildiv(M, block_M) in a T.Tensor shape (TVM's integer ceildiv);
    # tilecute refused it before ("a dimension must be an int ..."): now (M + 16 - 1) // 16
    func = P.rmsnorm_bwd_dynamic_partials.get_tir()
    assert "dWPart: T.Tensor(((M + 16 - 1) // 16, 256)" in func.script()
    src = _src("rmsnorm_bwd_dynamic_partials")
    assert "cute.make_layout(((M + 16 - 1) // 16, 256,)" in src
    k = P.rmsnorm_bwd_dynamic_partials()
    import os
    launcher = open(os.path.join(os.path.dirname(k.ensure_cubin()), "launcher.cpp")).read()
    # the launcher checks a passed workspace's rows against ceildiv(M, 16)
    assert "tc_floordiv(((sym_M + INT64_C(16)) - INT64_C(1)), INT64_C(16))" in launcher
    # nested in a larger expression, and still refusing what TVM's dims do not take here
    m = tilecute.language.dynamic("m")
    T = tilecute.language

    @T.prim_func
    def twice(A: T.Tensor((m,), T.float32), B: T.Tensor((T.ceildiv(m, 8) * 2, 4), T.float32)):
        with T.Kernel(1, threads=32):
            B[0, 0] = A[0]

    assert "B: T.Tensor(((m + 8 - 1) // 8 * 2, 4)" in twice.script()


# ---- GPU: against torch -------------------------------------------------------------------
def _close(got, want, tol):
    import torch
    torch.testing.assert_close(got.double(), want.double(), atol=tol, rtol=tol)


@pytest.mark.gpu
def test_norm_backward_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(100, 384, device="cuda").bfloat16()
    w = torch.randn(384, device="cuda")
    dy = torch.randn(100, 384, device="cuda").bfloat16()
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_()
    rstd = torch.rsqrt(xd.pow(2).mean(1, keepdim=True) + 1e-6)
    (xd * rstd * wd).backward(dy.double())
    dw = torch.zeros(384, device="cuda")
    dx = P.rmsnorm_bwd_atomic_dw()(x, w, dy, rstd.detach().squeeze(1).float(), dw)
    _close(dx, xd.grad, 3e-2)
    _close(dw, wd.grad, 1e-2)
    # LayerNorm, two stages
    x = torch.randn(120, 256, device="cuda").half()
    g = torch.randn(256, device="cuda").half()
    dy = torch.randn(120, 256, device="cuda").half()
    xd, gd, bd = x.double().requires_grad_(), g.double().requires_grad_(), torch.zeros(256, device="cuda",
                                                                                       dtype=torch.float64,
                                                                                       requires_grad=True)
    F.layer_norm(xd, (256,), gd, bd, 1e-5).backward(dy.double())
    mean = x.double().mean(1)
    rstd = torch.rsqrt(x.double().var(1, unbiased=False) + 1e-5)
    stats = torch.stack([mean, rstd], 1).float().contiguous()
    dx, pg, pb = P.layernorm_bwd_partials()(x, g, dy, stats)
    _close(dx, xd.grad, 2e-2)
    dg, db = P.layernorm_bwd_reduce_partials()(pg, pb)
    _close(dg, gd.grad, 2e-2)
    _close(db, bd.grad, 2e-2)
    dg7, db7 = P.layernorm_bwd_reduce_partials(G=7)(pg[:7].contiguous(), pb[:7].contiguous())
    _close(dg7, pg[:7].sum(0), 1e-4)
    # batch norm (training), columns
    x = torch.randn(300, 96, device="cuda")
    dy = torch.randn(300, 96, device="cuda")
    gam = torch.randn(96, device="cuda")
    xd, gd = x.double().requires_grad_(), gam.double().requires_grad_()
    bd = torch.zeros(96, device="cuda", dtype=torch.float64, requires_grad=True)
    F.batch_norm(xd, None, None, gd, bd, training=True, eps=1e-5).backward(dy.double())
    stat = torch.stack([x.double().mean(0), torch.rsqrt(x.double().var(0, unbiased=False) + 1e-5)]).float()
    dx, dgam, dbeta = P.batchnorm_bwd_column_tiles()(x, dy, stat.contiguous(), gam)
    _close(dx, xd.grad, 1e-3)
    _close(dgam, gd.grad, 1e-3)
    _close(dbeta, bd.grad, 1e-3)


@pytest.mark.gpu
def test_dynamic_rmsnorm_partials_on_gpu():
    import torch
    torch.manual_seed(9)
    for m in (37, 64):
        x = torch.randn(m, 256, device="cuda").half()
        w = torch.randn(256, device="cuda")
        dy = torch.randn(m, 256, device="cuda").half()
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        (xd * torch.rsqrt(xd.pow(2).mean(1, keepdim=True) + 1e-6) * wd).backward(dy.double())
        dx, part = P.rmsnorm_bwd_dynamic_partials()(x, w, dy)
        assert part.shape == ((m + 15) // 16, 256)
        _close(dx, xd.grad, 2e-2)
        _close(part.sum(0), wd.grad, 1e-2)


@pytest.mark.gpu
def test_softmax_and_cross_entropy_backward_on_gpu():
    import torch
    torch.manual_seed(1)
    y = torch.softmax(torch.randn(37, 1536, device="cuda"), 1).bfloat16()
    dy = torch.randn(37, 1536, device="cuda").bfloat16()
    yd, dyd = y.double(), dy.double()
    _close(P.softmax_bwd_dynamic_rows()(y, dy), yd * (dyd - (yd * dyd).sum(1, keepdim=True)), 1e-2)
    logits = (torch.randn(37, 5000, device="cuda") * 3).bfloat16()
    labels = torch.randint(0, 5000, (37,), device="cuda")
    labels[[3, 36]] = -100
    dloss = torch.rand(37, device="cuda")
    xd = logits.double().requires_grad_()
    lse = torch.logsumexp(xd, 1)
    keep = labels != -100
    picked = xd.gather(1, labels.clamp(min=0)[:, None])[:, 0]
    loss = lse - 0.9 * picked - 0.1 * xd.mean(1) + 1e-4 * lse * lse
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    (loss * dloss.double()).sum().backward()
    x = torch.randn(8, 1000, device="cuda") * 4
    _close(P.logsumexp_vocab_clear_false()(x), torch.logsumexp(x.double(), 1), 1e-5)
    got_loss, got_grad = P.cross_entropy_smoothed_zloss()(logits, labels, dloss)
    _close(got_loss, loss.detach(), 1e-3)
    _close(got_grad, xd.grad, 2e-3)


@pytest.mark.gpu
def test_gated_activation_backward_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(2)
    gu = torch.randn(77, 640, device="cuda").bfloat16()
    dh = torch.randn(77, 320, device="cuda").bfloat16()
    gd = gu.double().requires_grad_()
    (F.silu(gd[:, :320]) * gd[:, 320:]).backward(dh.double())
    _close(P.swiglu_bwd_packed()(gu, dh), gd.grad, 3e-2)
    a = torch.randn(64, 200, device="cuda").half()
    b = torch.randn(64, 200, device="cuda").half()
    dh = torch.randn(64, 200, device="cuda").half()
    ad, bd = a.double().requires_grad_(), b.double().requires_grad_()
    (F.gelu(ad, approximate="tanh") * bd).backward(dh.double())
    da, db = P.geglu_tanh_bwd()(a, b, dh)
    _close(da, ad.grad, 1e-2)
    _close(db, bd.grad, 1e-2)


@pytest.mark.gpu
def test_attention_backward_on_gpu():
    import torch
    torch.manual_seed(3)
    o = torch.randn(2, 200, 3, 64, device="cuda").bfloat16()
    do = torch.randn(2, 200, 3, 64, device="cuda").bfloat16()
    want = (o.double() * do.double()).sum(-1).permute(0, 2, 1)
    _close(P.attn_bwd_delta_bshd()(o, do), want, 1e-3)
    # the KV-major backward with GQA (4 query heads, 2 kv heads), causal
    S, D = 128, 64
    q = torch.randn(1, 4, S, D, device="cuda").half()
    k = torch.randn(1, 2, S, D, device="cuda").half()
    v = torch.randn(1, 2, S, D, device="cuda").half()
    dout = torch.randn(1, 4, S, D, device="cuda").half()
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    kr, vr = kd.repeat_interleave(2, 1), vd.repeat_interleave(2, 1)
    s = qd @ kr.transpose(-1, -2) * D ** -0.5
    s = s.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = torch.softmax(s, -1) @ vr
    out.backward(dout.double())
    delta = (out.detach() * dout.double()).sum(-1).float()
    lse2 = (lse.detach() * 1.4426950408889634).float()
    dq_acc = torch.zeros(1, 4, S, D, device="cuda")
    dk, dv = P.attn_bwd_kv_major_gqa()(q, k, v, dout, lse2, delta, dq_acc)
    _close(dv, vd.grad, 3e-2)
    _close(dk, kd.grad, 3e-2)
    _close(P.attn_bwd_dq_postprocess()(dq_acc), qd.grad, 3e-2)
    # register-operand backward, bfloat16, no mask
    q, k, v, dout = (torch.randn(1, 2, S, D, device="cuda").bfloat16() for _ in range(4))
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    s = qd @ kd.transpose(-1, -2) * D ** -0.5
    out = torch.softmax(s, -1) @ vd
    out.backward(dout.double())
    lse = torch.logsumexp(s.detach(), -1).float()
    delta = (out.detach() * dout.double()).sum(-1).float()
    dq_acc = torch.zeros(1, 2, S, D, device="cuda")
    dk, dv = P.attn_bwd_register_p()(q, k, v, dout, lse, delta, dq_acc)
    _close(dv, vd.grad, 5e-2)
    _close(dk, kd.grad, 5e-2)
    _close(dq_acc, qd.grad, 5e-2)


@pytest.mark.gpu
def test_embedding_and_rope_backward_on_gpu():
    import torch
    torch.manual_seed(4)
    ids = torch.randint(0, 64, (300,), device="cuda", dtype=torch.int32)
    ids[:20] = 0
    ids[100:160] = 7  # a run crossing chunk boundaries
    dy = torch.randn(300, 96, device="cuda")
    sorted_ids, perm = torch.sort(ids, stable=True)
    dw = torch.zeros(64, 96, device="cuda")
    P.embedding_bwd_sorted_runs()(sorted_ids.int().contiguous(), perm.int().contiguous(), dy, dw)
    want = torch.zeros(64, 96, device="cuda", dtype=torch.float64).index_add_(0, ids.long(), dy.double())
    want[0] = 0
    _close(dw, want, 1e-4)
    # rotary backward = autograd of the forward rotation
    B, S, H, D, rot = 2, 50, 4, 64, 32
    dout = torch.randn(B, S, H, D, device="cuda").bfloat16()
    pos = torch.randint(0, 128, (B, S), device="cuda", dtype=torch.int32)
    ang = torch.arange(128, device="cuda")[:, None] * (10000 ** (-torch.arange(16, device="cuda") / 16))[None]
    cos, sin = ang.cos().float().contiguous(), ang.sin().float().contiguous()
    x = torch.zeros(B, S, H, D, device="cuda", dtype=torch.float64, requires_grad=True)
    c, s = cos.double()[pos.long()][:, :, None], sin.double()[pos.long()][:, :, None]
    x1, x2, rest = x[..., :16], x[..., 16:32], x[..., 32:]
    torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], -1).backward(dout.double())
    _close(P.rope_bwd_neox_position_ids()(dout, cos, pos, sin), x.grad, 2e-2)
    g = torch.randn(64, 64, device="cuda").bfloat16()
    ang = torch.randn(64, 32, device="cuda")
    c, s = ang.cos(), ang.sin()
    x = torch.zeros(64, 32, 2, device="cuda", dtype=torch.float64, requires_grad=True)
    cd, sd = c.double(), s.double()
    torch.stack([x[..., 0] * cd - x[..., 1] * sd, x[..., 1] * cd + x[..., 0] * sd], -1).backward(
        g.double().view(64, 32, 2))
    _close(P.rope_interleaved_bwd_pairs()(g, c, s), x.grad.view(64, 64), 2e-2)


@pytest.mark.gpu
def test_linear_backward_gemms_on_gpu():
    import torch
    torch.manual_seed(5)
    dc = torch.randn(200, 256, device="cuda").bfloat16()
    b = torch.randn(192, 256, device="cuda").bfloat16()
    _close(P.linear_bwd_grad_input()(dc, b), dc.double() @ b.double().T, 5e-2)
    a = torch.randn(500, 128, device="cuda").half()
    dc = torch.randn(500, 192, device="cuda").half()
    db = torch.zeros(128, 192, device="cuda")
    P.linear_bwd_grad_weight_splitm()(a, dc, db)
    _close(db, a.double().T @ dc.double(), 5e-2)


@pytest.mark.gpu
def test_optimizer_steps_on_gpu():
    import torch
    torch.manual_seed(6)
    n = 1000
    p = torch.randn(n, device="cuda")
    g = torch.randn(n, device="cuda").bfloat16()
    m = torch.randn(n, device="cuda") * 0.1
    v = torch.rand(n, device="cuda") * 0.01
    pbf = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    lr, b1, b2, eps, wd, step = 1e-2, 0.9, 0.99, 1e-8, 0.1, 5
    gf = g.double()
    m2 = b1 * m.double() + (1 - b1) * gf
    v2 = b2 * v.double() + (1 - b2) * gf * gf
    p2 = p.double() * (1 - lr * wd)
    p2 = p2 - lr * (m2 / (1 - b1 ** step)) / ((v2 / (1 - b2 ** step)).sqrt() + eps)
    P.adamw_step_master_weights()(p, g, m, v, pbf, lr, b1, b2, eps, wd, step)
    _close(m, m2, 1e-5)
    _close(v, v2, 1e-5)
    _close(p, p2, 1e-4)
    _close(pbf, p2, 1e-2)
    p = torch.randn(3000, device="cuda")
    g = torch.randn(3000, device="cuda").half()
    buf = torch.randn(3000, device="cuda")
    gg = g.double() + 1e-4 * p.double()
    b2_ = 0.9 * buf.double() + gg
    want = p.double() - 0.05 * (gg + 0.9 * b2_)
    P.sgd_nesterov_tiles()(p, g, buf)
    _close(buf, b2_, 1e-5)
    _close(p, want, 1e-5)
    g = torch.randn(5000, device="cuda")
    norm2 = torch.zeros(1, device="cuda")
    n2 = g.double().pow(2).sum()
    want = g.double() * min(1.0, 1.0 / (n2.sqrt().item() + 1e-6))
    P.clip_grad_global_norm()(g, norm2)
    _close(norm2[0], n2, 1e-4)
    _close(g, want, 1e-5)


@pytest.mark.gpu
def test_dropout_and_loss_scaling_on_gpu():
    import torch
    torch.manual_seed(7)
    x = torch.randn(100, 192, device="cuda").half()
    y = P.dropout_hash_fwd()(x, 1234)
    kept = y != 0
    frac = kept.float().mean().item()
    assert 0.70 < frac < 0.80, frac
    _close(y[kept], x[kept].double() / 0.75, 2e-3)
    dx = P.dropout_hash_bwd()(torch.ones_like(x), 1234)
    assert torch.equal(dx != 0, kept)  # the backward regenerates the forward's mask
    assert not torch.equal(P.dropout_hash_fwd()(x, 99) != 0, kept)  # another seed, another mask
    # unscale + overflow check
    g = torch.randn(4000, device="cuda") * 1024
    scale = torch.tensor([1024.0], device="cuda")
    found = torch.zeros(1, device="cuda")
    want = g.double() / 1024
    P.amp_unscale_and_check()(g, scale, found)
    _close(g, want, 1e-6)
    assert found.item() == 0
    g[1234] = float("inf")
    g[3999] = float("nan")
    P.amp_unscale_and_check()(g, scale, found)
    assert found.item() == 1
    # scale update: overflow halves, three clean steps double
    s = torch.tensor([1024.0], device="cuda")
    tr = torch.zeros(1, device="cuda", dtype=torch.int32)
    upd = P.amp_update_scale()
    upd(s, tr, torch.ones(1, device="cuda"))
    assert s.item() == 512 and tr.item() == 0
    for _ in range(3):
        upd(s, tr, torch.zeros(1, device="cuda"))
    assert s.item() == 1024 and tr.item() == 0
    upd(s, tr, torch.zeros(1, device="cuda"))
    assert tr.item() == 1


@pytest.mark.gpu
def test_losses_scans_and_fp8_scaling_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(8)
    x = torch.randn(3000, device="cuda") * 3
    y = (torch.rand(3000, device="cuda") > 0.5).float()
    loss = torch.zeros(1, device="cuda")
    xd = x.double().requires_grad_()
    want = F.binary_cross_entropy_with_logits(xd, y.double(), pos_weight=torch.tensor(2.0, device="cuda",
                                                                                      dtype=torch.float64))
    want.backward()
    dx = P.bce_logits_fwd_bwd_mean()(x, y, loss)
    _close(loss[0], want.detach(), 1e-4)
    _close(dx, xd.grad, 1e-6)
    dy = torch.randn(40, 256, device="cuda")
    want = dy.double().flip(1).cumsum(1).flip(1)
    _close(P.cumsum_bwd_reverse()(dy), want, 1e-3)
    hist = torch.rand(16, 16, device="cuda") * 10
    hist[5] = 0
    amax = torch.rand(16, device="cuda") * 20
    amax[5] = 0
    scale = torch.full((16,), 7.0, device="cuda")
    sinv = torch.full((16,), 1 / 7.0, device="cuda")
    new_hist = torch.cat([amax[:, None], hist[:, :-1]], 1)
    mx = new_hist.max(1).values.double()
    want = torch.where(mx > 0, 448.0 / mx / 2, torch.full_like(mx, 7.0))
    P.fp8_delayed_scaling_update()(hist, amax, scale, sinv)
    _close(hist, new_hist, 0)
    _close(scale, want, 1e-6)
    _close(sinv, 1 / want, 1e-6)
