"""A fortieth set of programs in TileLang's idioms (tests/unseen_programs40.py), LLM serving and
training utilities: sampling (penalties from token-id lists, argmax with ties over a T.dynamic
vocab and across blocks by a 64-bit atomic max, min-p + Gumbel-max with a hash RNG or Philox,
top-p by pivot search or a chunked cumsum over sorted probabilities, a bool ban table),
speculative-decoding verification (while loops on T.alloc_var, a break in a T.serial loop
inside a T.Parallel, a reverse loop, parent-pointer walks, atomic tickets), KV-cache writes
(paged fp8 with scales per block, vLLM's x-split key layout, tile copies global to global,
per-block amax by atomic_max), fused optimizers (Lion over an offset table, Adam over a pointer
table, AdamW by grid-stride loops), grad-norm clipping in two kernels, embedding backward with
bf16 atomics, label-smoothed / dynamic-vocab cross-entropy, a haloed stencil, bilinear resize
forward and backward (align_corners both ways), LSTM / GRU cells fused with their gate GEMMs,
DeepSeek-style fp8 GEMMs (1x128 / 128x128 scales), split-K GEMVs over warps and layer-norm
backward (dgamma / dbeta partials reduced over dim 0, a second pass, tile atomics, a persistent
loop).

CPU: each builds to an sm_90a and (but the float8 ones) an sm_80 cubin, and what decides its
result is read in the generated source.  Two changes came from these programs: two block
reductions into the same destination (``T.reduce_sum(p, s)`` then ``T.reduce_sum(kept, s)``)
declared ``s_scratch`` twice, the first declaration's shared bytes left unused; they now share
one allocation.  An eager kernel's ``A: T.ptr`` with ``A = T.match_buffer(A, shape, dtype)``
(TileLang's eager-jit form for a tensor parameter) was refused; it is now the declaration
``A: T.Tensor(shape, dtype)`` (``T.StridedTensor`` with strides), as TileLang's eager jit makes
its annotations match_buffer's.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs40.py``)."""

import math

import pytest
import torch

import tilecute
import tilecute.language as T
import rounds
import unseen_programs40 as P
from tilecute.language.parser import FrontendError

NAMES = ["penalties_from_token_ids", "argmax_vocab_ties_dynamic", "min_p_gumbel_sample",
         "spec_verify_accept_while", "kv_append_paged_fp8", "lion_multi_tensor",
         "grad_sq_partials", "grad_clip_scale", "embedding_bwd_bf16_atomic", "resize_bilinear",
         "lstm_cell_fused", "fp8_gemm_deepseek_scales", "gemv_splitk_warps", "label_smoothed_ce",
         "stencil5_haloed_tile", "adam_pointer_table", "layernorm_bwd_partials_dim0",
         "partials_sum_dim0", "gru_cell_fused", "top_p_pivot_mask", "kv_cache_vllm_layout",
         "fp8_gemm_scales_shared", "spec_accept_parallel_break", "gemv_warp_fragment",
         "embedding_bwd_scalar_bf16", "kv_block_amax_scales", "adamw_grid_stride",
         "paged_kv_copy_tiles", "ln_bwd_weight_grads_atomic", "ce_dynamic_vocab_pipelined",
         "banned_tokens_bool_table", "argmax_u64_atomic", "spec_tree_path_length",
         "ln_bwd_persistent_partials", "gumbel_sample_philox", "lstm_cell_macro_gates",
         "resize_bilinear_bwd", "fp8_gemm_two_wg_fullrow", "top_p_sorted_cumsum",
         "spec_last_accept_reverse", "eager_capped_argmax", "eager_adam_ref_macro",
         "eager_kv_append_match_buffer"]
# float8 values convert only on sm_89+
NO_SM80 = {"kv_append_paged_fp8", "fp8_gemm_deepseek_scales", "fp8_gemm_scales_shared",
           "paged_kv_copy_tiles", "fp8_gemm_two_wg_fullrow"}


# eager kernels are built from the arguments they are called with (CPU tensors give the shapes)
EAGER = {"eager_capped_argmax": lambda: P.eager_capped_argmax.compile(torch.zeros(4, 3000), P.softcap30),
         "eager_adam_ref_macro": lambda: P.eager_adam_ref_macro.compile(*[torch.zeros(5000)] * 4),
         "eager_kv_append_match_buffer": lambda: P.eager_kv_append_match_buffer.compile(
             0, 0, torch.zeros(10, dtype=torch.int64), 10, 64)}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P, EAGER)
_body = rounds.body_of(_kernel)
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - NO_SM80 - set(EAGER)), rounds.tir_of(P), "sm_80")


@pytest.mark.parametrize("name", sorted(NO_SM80))
def test_float8_programs_are_refused_on_sm80(name, tmp_path):
    with pytest.raises(Exception, match="float8 values convert only on sm_89"):
        tilecute.build_cubin(getattr(P, name).get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- the fix: one scratch for reductions into one destination --------------------------------------
def test_reductions_into_one_dst_share_one_scratch():
    src = _body("top_p_pivot_mask")
    assert src.count("s_scratch = ") == 1  # reduce_sum(p, s) and reduce_sum(kept, s)
    assert "# 32 bytes" in src  # mx and s: 8 floats each, on the same bytes in turn (160 before)
    assert src.count('tcr.block_allreduce(') == 3 and src.count(', s_scratch, 8, 8)') == 2
    src = _body("min_p_gumbel_sample")
    assert src.count("cm_scratch = ") == 1 and "# 160 bytes" in src


# ---- the fix: T.match_buffer on a T.ptr parameter of an eager kernel ----------------------------------
def test_eager_match_buffer_binds_the_parameter():
    """TileLang's eager jit documents `A: T.ptr` + `A = T.match_buffer(A, shape, dtype)` (its
    body annotations become match_buffer's); tilecute refused it, now it is the declaration
    `A: T.Tensor(shape, dtype)`: the tensor passed for A is checked against that shape."""
    src = _body("eager_kv_append_match_buffer")
    assert "cache = cute.make_tensor(cache_ptr, cute.make_layout((64, 8, 64,), stride=(512, 64, 1,)))" in src
    assert "k_new = cute.make_tensor(k_new_ptr, cute.make_layout((10, 8, 64,)" in src
    kernel = P.eager_kv_append_match_buffer
    assert kernel.tensors == ["k_new", "cache", "slots"] and kernel.scalars == ["T_new", "num_slots", "H", "D"]


@tilecute.jit
def _strided_match(A: T.ptr, n: int = 64):
    A = T.match_buffer(A, (n, 32), T.float16, strides=("sa", 1), align=16)  # noqa: F841
    B = T.empty((n, 32), T.float16)
    with T.Kernel(1, threads=128) as _:
        for i, j in T.Parallel(n, 32):
            B[i, j] = A[i, j]
    return B


def test_eager_match_buffer_strides_and_refusals():
    src = _strided_match.compile(torch.zeros(64, 48, dtype=torch.float16)[:, :32]).get_kernel_source()
    assert "stride=(sa, 1,)" in src
    with pytest.raises(FrontendError, match=r"binds a parameter to a shape under its own name"):
        @tilecute.jit
        def renamed(A: T.ptr):
            X = T.match_buffer(A, (64,), T.float32)  # noqa: F841
            with T.Kernel(1, threads=64) as _:
                for i in T.Parallel(64):
                    X[i] = 0.0
    with pytest.raises(FrontendError, match=r"T.match_buffer\(..., data=B\) in an eager kernel"):
        @tilecute.jit
        def with_data(A: T.ptr, B: T.ptr):
            A = T.match_buffer(A, (64,), T.float32, data=B)  # noqa: F841
            with T.Kernel(1, threads=64) as _:
                for i in T.Parallel(64):
                    A[i] = 0.0


def test_eager_tensor_dim_of_a_runtime_scalar_is_refused_by_name():
    """TileLang's `M: T.int32` then `A: T.Tensor[[M, N], ...]` (it asserts A's dim equals
    the argument): an IR validation error ('M' bound twice) before, a refusal naming it now."""
    @tilecute.jit
    def twice(A, M, N):
        M: T.int32
        N: T.int32
        A: T.Tensor[[M, N], T.float16]
        B = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            for i, j in T.Parallel(32, N):
                if bx * 32 + i < M:
                    B[bx * 32 + i, j] = T.cast(A[bx * 32 + i, j], T.float32)
        return B
    with pytest.raises(FrontendError, match=r"'A': a dim is the scalar parameter 'M' \(M: "
                                            r"T.int32\); tilecute binds a tensor's dims"):
        twice.compile(torch.zeros(100, 64, dtype=torch.float16), 100, 64)


# ---- what decides each program's result ------------------------------------------------------------
def test_penalties_count_ids_in_shared_atomics():
    src = _body("penalties_from_token_ids")
    assert "tca.atomic_add(cnt, tok, 1)" in src and "if tok >= 0:" in src
    assert "cutlass.select_(l > cutlass.Float32(0.0), l / rep, l * rep)" in src
    assert "- freq * cutlass.Float32(c) - pres" in src


def test_argmax_dynamic_vocab_masks_the_ragged_chunk():
    src = _body("argmax_vocab_ties_dynamic")
    assert "V: cutlass.Int32" in src and "cutlass.range(0, (V + 1024 - 1) // 1024)" in src
    assert 'tcr.block_allreduce(tc_red13, "min", ci_scratch' in src  # first index of the max
    assert "2147483647))" in src and "if cm[0] > best[0]:" in src  # strict: earlier chunk wins


def test_min_p_hash_is_uint32_arithmetic():
    src = _body("min_p_gumbel_sample")
    assert "seed: cutlass.Uint32" in src
    assert "h_2_ = h_1_ * cutlass.Uint32(2246822507)" in src and "h_1_ = h ^ h >> cutlass.Uint32(16)" in src
    assert "cute.math.log(cute.math.log(u) * cutlass.Float32(-1.0))" in src
    assert "cut = lmax[0] + cute.math.log(MinP[b])" in src


def test_spec_verify_while_reads_inside_bounds():
    src = _body("spec_verify_accept_while")
    assert "while tc_more1:" in src and "tc_more1 = n[0] < 5 and tc_ld4 == tc_ld5" in src
    assert "Acc[r] = n[0] + 1" in src


def test_kv_append_saturates_before_the_fp8_cast():
    src = _body("kv_append_paged_fp8")
    assert "cutlass.Float8E4M3FN(cutlass.select_(" in src
    assert "cutlass.Float32(-448.0)), cutlass.Float32(448.0))" in src
    assert "blk = slot // cutlass.Int64(16)" in src and "if slot >= cutlass.Int64(0):" in src


def test_lion_reads_its_tensor_bounds_from_the_table():
    src = _body("lion_multi_tensor")
    assert "max_len: cutlass.Int32" in src and "hi = Off[ti + 1]" in src and "if start < hi:" in src
    assert "cutlass.select_(c > cutlass.Float32(0.0), cutlass.Float32(1.0), cutlass.select_(c < " in src
    assert "P16[k] = cutlass.BFloat16(p)" in src


def test_grad_clip_two_kernels():
    src = _body("grad_sq_partials")
    assert "tca.atomic_add(Total, (0,), s[0])" in src and 'tcr.block_allreduce(tc_red6, "sum"' in src
    src = _body("grad_clip_scale")
    assert "cute.arch.fmin(cutlass.Float32(1.0), cutlass.Float32(1.0) / (cute.math.sqrt(Total[0])" in src
    assert "j = 0 + j_iter * 256" in src


def test_embedding_bwd_adds_bf16_vectors():
    src = _body("embedding_bwd_bf16_atomic")
    assert "tca.atomic_add_view(cute.make_tensor(dW.iterator + cute.assume(idx * 256 + bd * 128 + i2, divby=8)" in src
    assert "if idx != 0:" in src
    src = _body("embedding_bwd_scalar_bf16")
    assert "tca.atomic_add(dW, (idx, d), cutlass.BFloat16(dY[t, d] * cutlass.Float32(0.5)))" in src


@pytest.mark.parametrize("ac", [True, False])
def test_resize_source_coordinates(ac):
    src = _body("resize_bilinear", align_corners=ac)
    if ac:  # (in - 1) / (out - 1)
        assert "fy = cutlass.Float32(oy) * cutlass.Float32(0.5714285714285714)" in src
    else:  # half-pixel, clamped at 0
        assert "fy = cute.arch.fmax((cutlass.Float32(oy) + cutlass.Float32(0.5)) * cutlass.Float32(0.578125)" in src
    assert "y1 = cutlass.min(y0 + 1, 36)" in src and "y0 = cutlass.Int32(cute.math.floor(fy))" in src


def test_lstm_runs_four_gate_gemms_and_the_cell_update():
    src = _body("lstm_cell_fused")
    assert src.count('tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32') == 4
    assert "if k < 4:" in src  # x's K steps, then h's
    assert "c = fg * Cp[r, col] + ig * gg" in src and "Hn[r, col] = cutlass.Float16(og * cute.math.tanh(c))" in src
    src = _body("lstm_cell_macro_gates")
    assert src.count("tcm.gemm(") == 4 and "tct.load(bias_desc" in src
    for q in range(4):
        assert f"(tc_j0 * 64, {q * 128} + n0)" in src  # gate q's rows of Wc


def test_gru_keeps_the_n_gate_products_apart():
    src = _body("gru_cell_fused")
    assert src.count("tcm.gemm(") == 6 and ", anx, " in src and ", anh, " in src
    assert "cute.math.tanh(anx[" in src and "* (anh[" in src


def test_fp8_gemms_promote_per_k_block():
    src = _body("fp8_gemm_deepseek_scales")
    assert "accumulate=False)" in src and "Sa = cute.make_tensor(Sa_ptr, cute.make_layout((8, M,), stride=(M, 1,)))" in src
    assert "+ part[tc_r3 + tc_lane4] * sa * sb" in src and "if r < M:" in src
    src = _body("fp8_gemm_scales_shared")
    assert "sa_s[i3] = tc_ld4" in src and "part[tc_r5 + tc_lane6] * sa_s[i] * sb" in src
    src = _body("fp8_gemm_two_wg_fullrow")
    assert 'cutlass.Float8E4M3FN, cutlass.Float32, False, False, (1, 2), 256)' in src  # FullRow
    assert "col = cutlass.min(bx * 256 + (j + tc_lane4), 383)" in src


def test_gemvs_reduce_lanes_then_warps():
    src = _body("gemv_splitk_warps")
    assert "cute.arch.shuffle_sync_bfly(v, offset=16, mask_and_clamp=31)" in src
    assert "T.reduce_sum(red_frag1, tot)" in src  # over the warps (dim 0 of red)
    src = _body("gemv_warp_fragment")
    assert 'tcr.warp_allreduce(tc_acc10, "sum", 32)' in src and "tcr.grouped_rows(" in src
    assert "tot[i1] = tot[i1] + per_warp[k2]" in src


def test_label_smoothed_ce_terms():
    src = _body("label_smoothed_ce")
    assert "if label == cutlass.Int64(-100):" in src
    assert "cutlass.Float32(0.9) * (lse - xy) + cutlass.Float32(0.1) * (lse - sx[0] / cutlass.Float32(3000.0))" in src
    assert "p - cutlass.Float32(3.3333333333333335e-05) - cutlass.select_(cutlass.Int64(col) == label" in src


def test_stencil_reads_the_halo_from_shared():
    src = _body("stencil5_haloed_tile")
    assert "cute.make_layout(612)" in src  # (16 + 2) x (32 + 2)
    assert "tile[(i_1_ + 1) * 34 + j_1_ + 1]" in src and "tile[(i_1_ + 2) * 34 + j_1_ + 1]" in src


def test_adam_pointer_table_views():
    src = _body("adam_pointer_table")
    assert "cute.make_ptr(cutlass.BFloat16, Grads[g], cute.AddressSpace.gmem, assumed_align=2), cute.make_layout((n,)" in src
    assert "cute.math.pow(cutlass.Float32(0.9), cutlass.Float32(step))" in src


def test_layernorm_bwd_partials_reduce_over_rows():
    src = _body("layernorm_bwd_partials_dim0")
    assert "dg[tc_k21] = dg[tc_k21] + t[k2 * 2 + tc_k21]" in src  # a thread's column, over 8 rows
    assert "dGp[bx, i1] = dg[tc_k25]" in src and "tcr.pick(c1, i_2_, 8)" in src
    src = _body("partials_sum_dim0")
    assert "if p * 8 + i2 < 25:" in src  # the ragged last step, zero-filled
    assert 'acc[tc_c16] = tcr.combine(acc[tc_c16], tc_rows15[tc_c16], "sum")' in src  # clear=False
    src = _body("ln_bwd_weight_grads_atomic")
    assert "tca.atomic_add(dG, (i1,), dg[tc_k7])" in src and "tct.load(X_desc" in src
    src = _body("ln_bwd_persistent_partials")
    assert "for g_iter in cutlass.range(0, (250 - bx + 16 - 1) // 16):" in src
    assert "dg[tc_k11] = dg[tc_k11] + t[k2 * 2 + tc_k11]" in src  # no clear inside the loop


def test_kv_layouts():
    src = _body("kv_cache_vllm_layout")
    assert "Kc[blk, h, d // 8, off, d % 8] = K[t, h, d]" in src and "Vc[blk, h, d, off] = V[t, h, d]" in src
    src = _body("paged_kv_copy_tiles")
    assert "tc_vec7[tc_lane9] = cutlass.Float8E4M3FN(tc_vec8[tc_lane9])" in src
    assert "slot // 8 * 4096 + (slot - slot // 8 * 8) * 512" in src
    src = _body("kv_block_amax_scales")
    assert "cute.math.absf(k[" in src and "tca.atomic_max(Amax, (slot // 16, h), a[0])" in src


def test_spec_decoding_loops():
    src = _body("spec_accept_parallel_break")
    assert "while j_it[0] < 4 and broke[0] == 0:" in src and "if broke[0] == 0:" in src
    src = _body("spec_tree_path_length")
    assert "while node[0] >= 0:" in src and "node[0] = tc_ld3" in src
    src = _body("spec_last_accept_reverse")
    assert "j = 5 + j_iter * -1" in src and "if 0 <= r and r < 40:" in src
    assert 'base = tca.atomic_fetch(Count, (0,), cutlass.Int32(n[0]), "add")' in src
    assert "n = cute.make_rmem_tensor((1,), cutlass.Int64)" in src


def test_adamw_grid_stride_bounds_from_tables():
    src = _body("adamw_grid_stride")
    assert "for k_iter in cutlass.range(0, (hi - (lo + bx * 128 + tx) + 1024 - 1) // 1024):" in src


def test_ce_dynamic_vocab_and_bool_table():
    src = _body("ce_dynamic_vocab_pipelined")
    assert "cutlass.range(0, (V + 2048 - 1) // 2048)" in src and "if c * 2048 + i1 < V:" in src
    assert "if y == -1:" in src
    src = _body("banned_tokens_bool_table")
    assert "dtype=cutlass.Uint8), cute.make_layout(2000))" in src and "if (seen[v_1_] != 0):" in src


def test_argmax_u64_key():
    src = _body("argmax_u64_atomic")
    assert "bits = tcmath.reinterpret(cm[0], cutlass.Uint32)" in src
    assert "bits ^ cutlass.Uint32(4294967295), bits | cutlass.Uint32(2147483648)" in src
    assert "tca.atomic_max(Key, (b,), key, unsigned=True)" in src


def test_philox_gumbel_and_sorted_top_p():
    src = _body("gumbel_sample_philox")
    assert "tcrng.init(tc_rng, cutlass.Int64(1234), cutlass.Int64(b * 128 + tx), cutlass.Int64(0))" in src
    assert "u = tcrng.uniform(tc_rng)" in src
    src = _body("top_p_sorted_cumsum")
    assert "tcs.warp_inclusive_scan(" in src and "carry[0] = carry[0] + cs[1023]" in src


def test_resize_bwd_four_atomics():
    src = _body("resize_bilinear_bwd")
    assert src.count("tca.atomic_add(dX, (n, c, ") == 4


# ---- GPU: each against torch -------------------------------------------------------------------------
def _cuda(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


@pytest.mark.gpu
def test_penalties_on_gpu():
    B, V, L = 4, 4000, 96
    logits = _cuda(B, V) * 3
    ids = torch.randint(-1, V, (B, L), device="cuda", dtype=torch.int32)
    ids[:, :10] = 7  # repeats
    pen = torch.tensor([[1.3, 0.2, 0.5]] * B, device="cuda")
    ref = logits.clone()
    for b in range(B):
        cnt = torch.bincount(ids[b][ids[b] >= 0].long(), minlength=V).float()
        l = ref[b]
        rep = torch.where(l > 0, l / pen[b, 0], l * pen[b, 0])
        ref[b] = torch.where(cnt > 0, rep - pen[b, 1] * cnt - pen[b, 2], l)
    P.penalties_from_token_ids()(logits, ids, pen)
    torch.testing.assert_close(logits, ref)


@pytest.mark.gpu
def test_argmax_dynamic_ties_on_gpu():
    for V in (5000, 2048, 777):
        x = _cuda(8, V).to(torch.bfloat16)
        x[:, 3] = 9.0
        x[:, V - 1] = 9.0  # a tie in the last (ragged) chunk: the first index wins
        x[1, 3] = 0.0
        tok = P.argmax_vocab_ties_dynamic()(x)
        ref = torch.tensor([3, V - 1] + [3] * 6, device="cuda", dtype=torch.int32)
        assert torch.equal(tok, ref)


def _hash_uniform(seed, b, cols):
    m = 0xFFFFFFFF
    h = (seed ^ ((b * 0x9E3779B9) & m) ^ cols) & m
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & m
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & m
    h = h ^ (h >> 16)
    return ((h >> 8).float() + 0.5) * (1.0 / 16777216.0)


@pytest.mark.gpu
def test_min_p_gumbel_on_gpu():
    B, V, seed = 4, 5000, 12345
    logits = _cuda(B, V) * 2
    temp = torch.tensor([0.7, 1.0, 1.5, 0.3], device="cuda")
    minp = torch.tensor([0.1, 0.05, 0.2, 0.5], device="cuda")
    tok = P.min_p_gumbel_sample()(logits, temp, minp, seed)
    cols = torch.arange(V, device="cuda", dtype=torch.int64)
    for b in range(B):
        l = logits[b] / temp[b]
        keep = l >= l.max() + torch.log(minp[b])
        score = torch.where(keep, l - torch.log(-torch.log(_hash_uniform(seed, b, cols))), -math.inf)
        t = int(tok[b])
        assert keep[t] and score[t] >= score.max() - 1e-4


@pytest.mark.gpu
def test_spec_verify_on_gpu():
    B, K = 100, 5
    target = torch.randint(0, 4, (B, K + 1), device="cuda")
    draft = target[:, :K].clone()
    flip = torch.rand(B, K, device="cuda") < 0.3
    draft[flip] += 1
    out, acc = P.spec_verify_accept_while()(draft, target)
    ok = (draft == target[:, :K]).int()
    n = torch.cumprod(ok, 1).sum(1)
    assert torch.equal(acc, (n + 1).int())
    for b in range(B):
        k = int(n[b])
        assert torch.equal(out[b, :k], draft[b, :k]) and out[b, k] == target[b, k]
        assert (out[b, k + 1:] == -1).all()


@pytest.mark.gpu
def test_kv_append_paged_fp8_on_gpu():
    Tn, H, D, NB, BS = 37, 8, 128, 16, 16
    k, v = _cuda(Tn, H, D, dtype=torch.bfloat16), _cuda(Tn, H, D, dtype=torch.bfloat16, seed=1) * 500
    slot = torch.randperm(NB * BS, device="cuda")[:Tn]
    slot[5] = -1
    kc = torch.zeros(NB, BS, H, D, device="cuda", dtype=torch.float8_e4m3fn)
    vc = torch.zeros_like(kc)
    ks = torch.rand(NB, H, device="cuda") + 0.5
    vs = torch.rand(NB, H, device="cuda") + 0.5
    P.kv_append_paged_fp8()(k, v, slot, kc, vc, ks, vs)
    for t in range(Tn):
        s = int(slot[t])
        if s < 0:
            continue
        blk, off = s // BS, s % BS
        for x, c, sc in ((k, kc, ks), (v, vc, vs)):
            ref = (x[t].float() * (1.0 / sc[blk])[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
            assert torch.equal(c[blk, off].float(), ref.float())


@pytest.mark.gpu
def test_lion_on_gpu():
    lens = [1000, 3000, 517]
    off = torch.tensor([0, 1000, 4000, 4517], device="cuda", dtype=torch.int32)
    N = 4517
    p32, m = _cuda(N), _cuda(N, seed=1) * 0.1
    g = _cuda(N, seed=2).to(torch.bfloat16)
    p16 = torch.empty(N, device="cuda", dtype=torch.bfloat16)
    lr = torch.tensor([1e-3, 2e-3, 5e-4], device="cuda")
    lrs = torch.repeat_interleave(lr, torch.tensor(lens, device="cuda"))
    gf = g.float()
    c = 0.9 * m + 0.1 * gf
    ref_p = p32 * (1 - lrs * 0.01) - lrs * torch.sign(c)
    ref_m = 0.99 * m + 0.01 * gf
    P.lion_multi_tensor()(p32, p16, g, m, off, lr, max(lens))
    torch.testing.assert_close(p32, ref_p)
    torch.testing.assert_close(m, ref_m)
    torch.testing.assert_close(p16, ref_p.to(torch.bfloat16))


@pytest.mark.gpu
def test_grad_clip_on_gpu():
    g = _cuda(10007, dtype=torch.bfloat16) * 0.1
    total = torch.zeros(1, device="cuda")
    P.grad_sq_partials()(g, total)
    norm = g.float().norm()
    torch.testing.assert_close(total[0], norm ** 2, rtol=1e-4, atol=1e-4)
    ref = (g.float() * min(1.0, 1.0 / (float(norm) + 1e-6))).to(torch.bfloat16)
    P.grad_clip_scale()(g, total)
    torch.testing.assert_close(g.float(), ref.float(), rtol=1e-2, atol=1e-3)


@pytest.mark.gpu
def test_embedding_bwd_on_gpu():
    ids = torch.randint(0, 1000, (300,), device="cuda", dtype=torch.int32)
    ids[::7] = 0  # padding
    dy = _cuda(300, 256, dtype=torch.bfloat16)
    dw = torch.zeros(1000, 256, device="cuda", dtype=torch.bfloat16)
    P.embedding_bwd_bf16_atomic()(ids, dy, dw)
    keep = ids != 0
    ref = torch.zeros(1000, 256, device="cuda").index_add_(0, ids[keep].long(), dy[keep].float())
    torch.testing.assert_close(dw.float(), ref, rtol=2e-2, atol=2e-2)
    ids64 = torch.randint(0, 500, (200,), device="cuda")
    dy32 = _cuda(200, 96)
    dw16 = torch.zeros(500, 96, device="cuda", dtype=torch.bfloat16)
    P.embedding_bwd_scalar_bf16()(ids64, dy32, dw16)
    ref = torch.zeros(500, 96, device="cuda").index_add_(0, ids64, dy32 * 0.5)
    torch.testing.assert_close(dw16.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("ac", [True, False])
def test_resize_on_gpu(ac):
    x = _cuda(2, 3, 37, 50)
    y = P.resize_bilinear(align_corners=ac)(x)
    ref = torch.nn.functional.interpolate(x, size=(64, 80), mode="bilinear", align_corners=ac)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("ac", [True, False])
def test_resize_bwd_on_gpu(ac):
    x = torch.zeros(2, 2, 20, 24, device="cuda", requires_grad=True)
    dy = _cuda(2, 2, 33, 47)
    torch.nn.functional.interpolate(x, size=(33, 47), mode="bilinear", align_corners=ac).backward(dy)
    dx = torch.zeros(2, 2, 20, 24, device="cuda")
    P.resize_bilinear_bwd(align_corners=ac)(dy, dx)
    torch.testing.assert_close(dx, x.grad, rtol=1e-4, atol=1e-4)


def _lstm_ref(x, h, W, U, c, b):
    gates = x.float() @ W.float().T + h.float() @ U.float().T + b.reshape(-1)
    i, f, g, o = gates.chunk(4, 1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


@pytest.mark.gpu
def test_lstm_on_gpu():
    Bt, I, H = 128, 256, 256
    x, h = _cuda(Bt, I, dtype=torch.float16), _cuda(Bt, H, dtype=torch.float16, seed=1)
    W, U = _cuda(4 * H, I, dtype=torch.float16, seed=2) * 0.05, _cuda(4 * H, H, dtype=torch.float16, seed=3) * 0.05
    c, b = _cuda(Bt, H, seed=4), _cuda(4 * H, seed=5) * 0.1
    hn, cn = P.lstm_cell_fused()(x, h, W, U, c, b)
    rh, rc = _lstm_ref(x, h, W, U, c, b)
    torch.testing.assert_close(cn, rc, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(hn.float(), rh, rtol=1e-2, atol=1e-2)
    Bt, I, H = 64, 128, 128
    x, h = _cuda(Bt, I, dtype=torch.bfloat16), _cuda(Bt, H, dtype=torch.bfloat16, seed=1)
    Wc = _cuda(4 * H, I + H, dtype=torch.bfloat16, seed=2) * 0.05
    c, b = _cuda(Bt, H, seed=4), _cuda(4, H, seed=5) * 0.1
    hn, cn = P.lstm_cell_macro_gates()(x, h, Wc, c, b)
    rh, rc = _lstm_ref(x, h, Wc[:, :I], Wc[:, I:], c, b)
    torch.testing.assert_close(cn, rc, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(hn.float(), rh, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gru_on_gpu():
    Bt, I, H = 96, 128, 128
    x, h = _cuda(Bt, I, dtype=torch.bfloat16), _cuda(Bt, H, dtype=torch.bfloat16, seed=1)
    Wih = _cuda(3 * H, I, dtype=torch.bfloat16, seed=2) * 0.05
    Whh = _cuda(3 * H, H, dtype=torch.bfloat16, seed=3) * 0.05
    bih, bhh = _cuda(3 * H, seed=4) * 0.1, _cuda(3 * H, seed=5) * 0.1
    hn = P.gru_cell_fused()(x, h, Wih, Whh, bih, bhh)
    cell = torch.nn.GRUCell(I, H).cuda()
    with torch.no_grad():
        cell.weight_ih.copy_(Wih.float())
        cell.weight_hh.copy_(Whh.float())
        cell.bias_ih.copy_(bih)
        cell.bias_hh.copy_(bhh)
        ref = cell(x.float(), h.float())
    torch.testing.assert_close(hn.float(), ref, rtol=2e-2, atol=2e-2)


def _fp8_blocks(M, N, K, sa_mk, seed=0):
    a = (_cuda(M, K, seed=seed) * 2).to(torch.float8_e4m3fn)
    b = (_cuda(N, K, seed=seed + 1) * 2).to(torch.float8_e4m3fn)
    sa = torch.rand(M, K // 128, device="cuda") + 0.5
    sb = torch.rand(N // 128, K // 128, device="cuda") + 0.5
    ref = torch.zeros(M, N, device="cuda", dtype=torch.float64)
    for kb in range(K // 128):
        part = a[:, kb * 128:(kb + 1) * 128].double() @ b[:, kb * 128:(kb + 1) * 128].double().T
        ref += part * sa[:, kb, None].double() * sb[:, kb].double().repeat_interleave(128)[None, :]
    return a, b, (sa if sa_mk else sa.T.contiguous()), sb, ref.float()


@pytest.mark.gpu
def test_fp8_deepseek_gemms_on_gpu():
    for M in (200, 64):
        a, b, sa, sb, ref = _fp8_blocks(M, 512, 1024, False)
        c = P.fp8_gemm_deepseek_scales()(a, b, sa, sb)
        torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=0.5)
        a, b, sa, sb, ref = _fp8_blocks(M, 256, 512, False, seed=3)
        c = P.fp8_gemm_scales_shared()(a, b, sa, sb)
        # (wgmma's fp8 accumulator is narrower than float32: 0.095 off on values ~200 on the H200)
        torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.5)
    a, b, sa, sb, ref = _fp8_blocks(192, 384, 768, True, seed=5)
    c = P.fp8_gemm_two_wg_fullrow()(a, b, sa, sb)
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=0.5)


@pytest.mark.gpu
def test_gemvs_on_gpu():
    W, x = _cuda(1000, 4096, dtype=torch.bfloat16), _cuda(4096, dtype=torch.bfloat16, seed=1)
    torch.testing.assert_close(P.gemv_splitk_warps()(W, x), W.float() @ x.float(), rtol=1e-3, atol=1e-2)
    W, x = _cuda(300, 2048, dtype=torch.float16), _cuda(2048, dtype=torch.float16, seed=1)
    torch.testing.assert_close(P.gemv_warp_fragment()(W, x).float(), W.float() @ x.float(), rtol=2e-3, atol=5e-2)


@pytest.mark.gpu
def test_label_smoothed_ce_on_gpu():
    R, V = 64, 3000
    x = (_cuda(R, V) * 3).to(torch.bfloat16).requires_grad_()
    y = torch.randint(0, V, (R,), device="cuda")
    y[[3, 40]] = -100
    loss, dx = P.label_smoothed_ce()(x.detach(), y)
    xf = x.float()
    ref = torch.nn.functional.cross_entropy(xf, y, ignore_index=-100, label_smoothing=0.1, reduction="none")
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-4)
    ref.sum().backward()
    torch.testing.assert_close(dx, x.grad.float(), rtol=1e-2, atol=1e-5)


@pytest.mark.gpu
def test_ce_dynamic_vocab_on_gpu():
    for V in (5000, 2048, 100):
        x = (_cuda(16, V) * 3).to(torch.float16)
        y = torch.randint(0, V, (16,), device="cuda", dtype=torch.int32)
        y[2] = -1
        loss = P.ce_dynamic_vocab_pipelined()(x, y)
        ref = torch.nn.functional.cross_entropy(x.float(), y.long(), ignore_index=-1, reduction="none")
        torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_stencil_on_gpu():
    x = _cuda(100, 130)
    xp = torch.nn.functional.pad(x, (1, 1, 1, 1))
    lap = xp[:-2, 1:-1] + xp[2:, 1:-1] + xp[1:-1, :-2] + xp[1:-1, 2:] - 4 * x
    torch.testing.assert_close(P.stencil5_haloed_tile()(x), x + 0.2 * lap)


def _adam_ref(p, g, m, v, lr, step, b1, b2, eps):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr / (1 - b1 ** step) * m / ((v / (1 - b2 ** step)).sqrt() + eps), m, v


@pytest.mark.gpu
def test_adam_pointer_table_on_gpu():
    sizes = [300, 1500, 64]
    ps = [_cuda(n, seed=i) for i, n in enumerate(sizes)]
    gs = [_cuda(n, dtype=torch.bfloat16, seed=10 + i) for i, n in enumerate(sizes)]
    ms = [_cuda(n, seed=20 + i) * 0.1 for i, n in enumerate(sizes)]
    vs = [_cuda(n, seed=30 + i).abs() * 0.01 for i, n in enumerate(sizes)]
    refs = [_adam_ref(p, g.float(), m, v, 1e-3, 5, 0.9, 0.999, 1e-8) for p, g, m, v in zip(ps, gs, ms, vs)]
    tab = [torch.tensor([t.data_ptr() for t in ts], device="cuda", dtype=torch.int64) for ts in (ps, gs, ms, vs)]
    P.adam_pointer_table()(*tab, torch.tensor(sizes, device="cuda", dtype=torch.int32), 1e-3, 5, max(sizes))
    for (rp, rm, rv), p, m, v in zip(refs, ps, ms, vs):
        torch.testing.assert_close(p, rp)
        torch.testing.assert_close(m, rm)
        torch.testing.assert_close(v, rv)


@pytest.mark.gpu
def test_adamw_grid_stride_on_gpu():
    off = torch.tensor([0, 100, 5000, 5100], device="cuda", dtype=torch.int32)
    ln = torch.tensor([100, 4900, 0, 2000], device="cuda", dtype=torch.int32)
    wd = torch.tensor([0.0, 0.1, 0.2, 0.01], device="cuda")
    N = 7100
    p, g, m, v = _cuda(N), _cuda(N, seed=1), _cuda(N, seed=2) * 0.1, _cuda(N, seed=3).abs() * 0.01
    lr, bc1, bc2 = 1e-3, 1 - 0.9 ** 3, 1 - 0.95 ** 3
    # segment g covers [off[g], off[g] + ln[g]); elements 5000..5099 are in none (unchanged)
    wds, inside = torch.zeros(N, device="cuda"), torch.zeros(N, device="cuda", dtype=torch.bool)
    for o, n, w in zip(off.tolist(), ln.tolist(), wd.tolist()):
        wds[o:o + n], inside[o:o + n] = w, True
    mr = torch.where(inside, 0.9 * m + 0.1 * g, m)
    vr = torch.where(inside, 0.95 * v + 0.05 * g * g, v)
    pr = torch.where(inside, p * (1 - lr * wds) - lr * (mr / bc1) / ((vr / bc2).sqrt() + 1e-8), p)
    P.adamw_grid_stride()(p, g, m, v, off, ln, wd, lr, bc1, bc2)
    torch.testing.assert_close(p, pr)
    torch.testing.assert_close(m, mr)


def _ln_parts(M, N, dtype, seed=0):
    x, dy = _cuda(M, N, dtype=dtype, seed=seed), _cuda(M, N, dtype=dtype, seed=seed + 1)
    mean = x.float().mean(1)
    rstd = (x.float().var(1, unbiased=False) + 1e-5).rsqrt()
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    return x, dy, mean, rstd, xhat


@pytest.mark.gpu
def test_layernorm_bwd_on_gpu():
    M, N = 200, 512
    x, dy, mean, rstd, xhat = _ln_parts(M, N, torch.float16)
    gamma = _cuda(N, seed=9)
    dx, dgp, dbp = P.layernorm_bwd_partials_dim0()(x, dy, gamma, mean, rstd)
    wdy = dy.float() * gamma
    ref = rstd[:, None] * (wdy - wdy.mean(1, keepdim=True) - xhat * (wdy * xhat).mean(1, keepdim=True))
    torch.testing.assert_close(dx.float(), ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(P.partials_sum_dim0()(dgp), (dy.float() * xhat).sum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(P.partials_sum_dim0()(dbp), dy.float().sum(0), rtol=1e-4, atol=1e-3)
    M, N = 300, 256
    x, dy, mean, rstd, xhat = _ln_parts(M, N, torch.bfloat16, seed=3)
    dg, db = torch.zeros(N, device="cuda"), torch.zeros(N, device="cuda")
    P.ln_bwd_weight_grads_atomic()(x, dy, mean, rstd, dg, db)
    torch.testing.assert_close(dg, (dy.float() * xhat).sum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(db, dy.float().sum(0), rtol=1e-4, atol=1e-3)
    M, N = 1000, 256
    x, dy, mean, rstd, xhat = _ln_parts(M, N, torch.float32, seed=5)
    dgp, dbp = P.ln_bwd_persistent_partials()(x, dy, mean, rstd)
    torch.testing.assert_close(dgp.sum(0), (dy * xhat).sum(0), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(dbp.sum(0), dy.sum(0), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_top_p_pivot_on_gpu():
    B, V = 4, 2048
    logits = _cuda(B, V) * 2
    top_p = torch.tensor([0.5, 0.9, 0.99, 0.1], device="cuda")
    out = P.top_p_pivot_mask()(logits, top_p)
    probs = logits.softmax(-1)
    for b in range(B):
        kept = out[b] > -math.inf
        assert torch.equal(out[b][kept], logits[b][kept])
        assert probs[b][kept].sum() >= top_p[b] - 1e-4  # enough mass
        assert probs[b][kept].min() >= probs[b][~kept].max()  # a threshold on probability
        # the smallest kept token is needed (within the bisection's resolution)
        assert probs[b][kept].sum() - probs[b][kept].min() < top_p[b] + 1e-4


@pytest.mark.gpu
def test_top_p_sorted_cumsum_on_gpu():
    B, V = 4, 3000
    logits = _cuda(B, V) * 3
    ps, ids = logits.softmax(-1).sort(-1, descending=True)
    top_p = torch.tensor([0.5, 0.9, 0.3, 0.999], device="cuda")
    out = logits.clone()
    P.top_p_sorted_cumsum()(ps, ids.int(), top_p, out)
    before = ps.cumsum(-1) - ps
    drop = before > top_p[:, None]
    drop[:, 0] = False
    ref = logits.clone().scatter_(1, ids, torch.where(drop, -math.inf, logits.gather(1, ids)))
    # the kernel's chunked sums round differently: compare away from the boundary
    near = (before - top_p[:, None]).abs() < 1e-5
    ok = ~torch.zeros_like(near).scatter_(1, ids, near)
    assert torch.equal(out[ok], ref[ok])


@pytest.mark.gpu
def test_kv_layouts_on_gpu():
    Tn, H, D, NB, BS, x = 50, 4, 128, 8, 16, 8
    k, v = _cuda(Tn, H, D, dtype=torch.float16), _cuda(Tn, H, D, dtype=torch.float16, seed=1)
    slot = torch.randperm(NB * BS, device="cuda")[:Tn]
    slot[::9] = -1
    kc = torch.zeros(NB, H, D // x, BS, x, device="cuda", dtype=torch.float16)
    vc = torch.zeros(NB, H, D, BS, device="cuda", dtype=torch.float16)
    P.kv_cache_vllm_layout()(k, v, kc, vc, slot)
    for t in range(Tn):
        s = int(slot[t])
        if s >= 0:
            assert torch.equal(kc[s // BS, :, :, s % BS, :].reshape(H, D), k[t])
            assert torch.equal(vc[s // BS, :, :, s % BS], v[t])
    Tn, H, D, NB, BS = 40, 8, 64, 10, 8
    k, v = _cuda(Tn, H, D, dtype=torch.float16), _cuda(Tn, H, D, dtype=torch.float16, seed=1)
    slot = torch.randperm(NB * BS, device="cuda", dtype=torch.int32)[:Tn]
    slot[3] = -1
    kc = torch.zeros(NB, BS, H, D, device="cuda", dtype=torch.float16)
    vc = torch.zeros(NB, BS, H, D, device="cuda", dtype=torch.float8_e4m3fn)
    P.paged_kv_copy_tiles()(k, v, slot, kc, vc)
    for t in range(Tn):
        s = int(slot[t])
        if s >= 0:
            assert torch.equal(kc[s // BS, s % BS], k[t])
            assert torch.equal(vc[s // BS, s % BS].float(), v[t].to(torch.float8_e4m3fn).float())


@pytest.mark.gpu
def test_kv_block_amax_on_gpu():
    Tn, H, D, NB, BS = 64, 4, 128, 8, 16
    k = _cuda(Tn, H, D, dtype=torch.bfloat16)
    slot = torch.randperm(NB * BS, device="cuda", dtype=torch.int32)[:Tn]
    slot[0] = -1
    amax = torch.zeros(NB, H, device="cuda")
    P.kv_block_amax_scales()(k, slot, amax)
    ref = torch.zeros(NB, H, device="cuda")
    for t in range(1, Tn):
        b = int(slot[t]) // BS
        ref[b] = torch.maximum(ref[b], k[t].float().abs().amax(-1))
    assert torch.equal(amax, ref)


@pytest.mark.gpu
def test_spec_forms_on_gpu():
    B, K = 48, 4
    pt, pd, u = torch.rand(B, K, device="cuda"), torch.rand(B, K, device="cuda"), torch.rand(B, K, device="cuda")
    pd[0, 0] = 0.0
    acc = P.spec_accept_parallel_break()(pt, pd, u)
    ratio = torch.where(pd > 0, pt / pd, torch.full_like(pd, math.inf))
    assert torch.equal(acc, torch.cumprod((u <= ratio).int(), 1).sum(1).int())
    B, Nn = 8, 16
    parent = torch.stack([torch.tensor([-1] + [torch.randint(0, i, (1,)).item() for i in range(1, Nn)])
                          for _ in range(B)]).int().cuda()
    ok = (torch.rand(B, Nn, device="cuda") < 0.8).to(torch.int8)
    depth = P.spec_tree_path_length()(parent, ok)
    for b in range(B):
        for i in range(Nn):
            d, n = 0, i
            while n >= 0:
                if ok[b, n]:
                    d, n = d + 1, int(parent[b, n])
                else:
                    d, n = -1, -1
            assert depth[b, i] == d
    B, K = 40, 6
    okm = (torch.rand(B, K, device="cuda") < 0.5).int()
    tok = torch.randint(0, 1000, (B, K), device="cuda")
    count = torch.zeros(1, device="cuda", dtype=torch.int32)
    flat = torch.full((B * K,), -7, device="cuda", dtype=torch.int64)
    where = torch.empty(B, device="cuda", dtype=torch.int32)
    last = P.spec_last_accept_reverse()(okm, tok, count, flat, where)
    idx = torch.arange(K, device="cuda").expand(B, K)
    assert torch.equal(last, torch.where(okm != 0, idx, -1).amax(1).int())
    assert int(count) == int(okm.sum())
    for b in range(B):
        n = int(okm[b].sum())
        assert torch.equal(flat[int(where[b]):int(where[b]) + n], tok[b][okm[b] != 0])


@pytest.mark.gpu
def test_banned_tokens_on_gpu():
    logits = _cuda(3, 2000, dtype=torch.float16)
    ban = torch.randint(-1, 2000, (3, 40), device="cuda", dtype=torch.int32)
    ref = logits.clone()
    for b in range(3):
        ref[b, ban[b][ban[b] >= 0].long()] = -math.inf
    P.banned_tokens_bool_table()(logits, ban)
    assert torch.equal(logits, ref)


@pytest.mark.gpu
def test_argmax_u64_on_gpu():
    B, V = 4, 50000
    x = _cuda(B, V)
    x[1, 49999] = 100.0
    x[2, 100] = -1e30  # a negative row: the ordered bits keep the order
    x[2] = -x[2].abs() - 1
    x[3, 4097] = x[3, 40000] = 50.0  # a tie across blocks: the lower index
    key = torch.zeros(B, device="cuda", dtype=torch.uint64)
    P.argmax_u64_atomic()(x, key)
    idx = 0xFFFFFFFF - (key.view(torch.int64) & 0xFFFFFFFF)
    assert torch.equal(idx, x.argmax(1))


@pytest.mark.gpu
def test_gumbel_philox_on_gpu():
    logits = torch.full((512, 3000), -math.inf, device="cuda")
    logits[:, 5], logits[:, 2999] = math.log(0.75), math.log(0.25)
    tok = P.gumbel_sample_philox(B=512)(logits)
    assert ((tok == 5) | (tok == 2999)).all()
    assert abs((tok == 5).float().mean().item() - 0.75) < 0.07
    sure = _cuda(4, 3000)
    sure[:, 1234] = 1e4
    assert (P.gumbel_sample_philox()(sure) == 1234).all()


def test_eager_programs_inline_their_macros():
    src = _body("eager_capped_argmax")
    assert "B: cutlass.Int32" in src and "cutlass.Float32(30.0) * cute.math.tanh(tc_vec2[tc_lane3] / cutlass.Float32(30.0))" in src
    src = _body("eager_adam_ref_macro")  # the T.Ref macro stores into the buffer element
    assert "m[k] = cutlass.Float32(0.9) * m[k] + cutlass.Float32(0.09999999999999998) * gk" in src
    assert "v[k] = cutlass.Float32(0.999) * v[k]" in src and "lr: cutlass.Float32, step: cutlass.Int32" in src


@pytest.mark.gpu
def test_eager_programs_on_gpu():
    x = _cuda(5, 3000) * 40
    x[2, 17] = x[2, 2999] = 1e3  # equal after the cap: the first wins
    tok = P.eager_capped_argmax(x, P.softcap30)
    assert torch.equal(tok.long(), (30 * torch.tanh(x / 30)).argmax(1))
    p, g, m, v = _cuda(5000), _cuda(5000, seed=1), _cuda(5000, seed=2) * 0.1, _cuda(5000, seed=3).abs() * 0.01
    rp, rm, rv = _adam_ref(p, g, m, v, 2e-3, 7, 0.9, 0.999, 1e-8)
    P.eager_adam_ref_macro(p, g, m, v, 2e-3, 7)
    torch.testing.assert_close(p, rp)
    torch.testing.assert_close(m, rm)
    torch.testing.assert_close(v, rv)
    k = _cuda(10, 8, 64, dtype=torch.bfloat16)
    cache = torch.zeros(64, 8, 64, device="cuda", dtype=torch.bfloat16)
    slots = torch.tensor([3, -1, 60, 0, 1, 2, 63, 10, 11, -1], device="cuda")
    P.eager_kv_append_match_buffer(k, cache, slots, 10, 64)
    ref = torch.zeros_like(cache)
    ref[slots[slots >= 0]] = k[slots >= 0]
    assert torch.equal(cache, ref)
