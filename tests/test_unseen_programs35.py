"""A thirty-fifth set of programs in TileLang's idioms (tests/unseen_programs35.py): Welford
LayerNorm, BitNet int8 x ternary GEMV / GEMM, a unit-lower-triangular solve, 2:4 pruning,
LAMB, a radix-select threshold, a Jensen-Shannon loss, IoU masks + greedy NMS, a Stockham
FFT, the Mish backward and a 2-D RoPE.

CPU: each builds to an sm_90a and an sm_80 cubin, and what decides its result is read in the
generated source.  Two fixes came from these programs: an int32 fragment every thread holds,
read at a run-time index and converted to float (BitNet's row sums scaled to float32), failed
to compile (``tcr.pick``'s select chain came back signless); ``&`` / ``|`` of two conditions
inside a plain Python helper called from a kernel (2:4 pruning's rank test) were refused
("bitand on bool") where the kernel body itself takes them; a run-time value used as a
Python bool inside such a helper (``if a > 0:``, ``max(a, b)``, ``a if a > b else b``) took
one branch for every value (``max(A[i], 1.0)`` compiled to ``1.0``) and is now refused, as
TVM's ValueError refuses it in TileLang.  A part of a buffer given to ``T.reduce_*`` is
refused by name (TileLang drops the part's offset).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs35.py``)."""


import re

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.language.parser import FrontendError
import rounds
import unseen_programs35 as P

NAMES = ["welford_layernorm", "bitnet_int2_gemv", "bitnet_int2_prefill", "solve_unit_lower",
         "sparse24_prune", "lamb_update_norms", "lamb_apply", "topk_radix_threshold",
         "jsd_loss", "nms_iou_mask", "nms_greedy", "fft_rows_stockham", "mish_bwd",
         "rope_2d_vision", "lm_head_argmax", "flash_fwd_head_dim", "cholesky_blocks",
         "csr_spmm_pipelined"]


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


def test_welford_merges_chunk_statistics():
    src = _body("welford_layernorm")
    # each chunk: two block reductions (its sum, then its M2 about its own mean)
    assert src.count("tcr.block_allreduce(") == 2
    # Chan's merge of (count, mean, M2), in the program's order
    assert "delta = c_mean - mean[0]" in src
    assert "mean[0] = mean[0] + delta * cutlass.Float32(1024.0) / n_new" in src
    assert "m2[0] = m2[0] + c_m2[0] + delta * delta * cnt[0] * cutlass.Float32(1024.0) / n_new" in src
    assert "rstd = cute.math.rsqrt(m2[0] / cutlass.Float32(6144.0)" in src


def test_bitnet_gemv_decodes_two_bit_codes_and_scales_int_rows():
    src = _body("bitnet_int2_gemv")
    # the byte read unsigned, shifted by 2 * (k % 4), masked to two bits, minus one
    assert "cutlass.Int32(cutlass.Uint8(Wq[" in src and ">> 2 * ((k + tc_lane7) % 4) & 3" in src
    assert "* (code - 1)" in src
    # the int32 row sums stay in the reduction round's registers, stored by each lane group's
    # first thread and converted to float
    assert "cutlass.Float32(tc_red12[tc_c17]) * S[0]" in src and "tcr.pick" not in src
    # read at another thread's row (reversed), the sums every thread holds are picked at a
    # run-time index: the select chain is re-typed (it came back signless and failed to compile)
    src = _body("bitnet_int2_gemv", reverse=True)
    assert "cutlass.Float32(tcr.pick(row, 7 - i_1_, 8)) * S[0]" in src
    import inspect
    from tilecute.runtime.cute import reduce as tcr
    assert "frag.element_type(value)" in inspect.getsource(tcr.pick)


def test_bitnet_prefill_decodes_into_the_gemm_operand():
    src = _body("bitnet_int2_prefill")
    # the packed tile arrives by TMA, the decoded int8 tile is written by the threads and
    # read by an int8 wgmma into an int32 accumulator
    assert "TMA load of a 128x16 box of Wq" in src
    assert re.search(r"cutlass\.Int8\(cutlass\.Int32\(cutlass\.Uint8\(Wp_s\[n \* 16 \+ \(k \+ (tc_lane\d+)\) // 4\]\)\) "
                     r">> 2 \* \(\(k \+ \1\) % 4\) & 3\) - cutlass\.Int8\(1\)", src)
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    # the decoded tile is complete (and fenced for the async proxy) before the gemm reads it
    dec = src.index("W_s.iterator")  # (4 decoded int8 a store: one packed byte's lanes)
    gemm = src.index("tcm.gemm(")
    assert 'cute.arch.fence_proxy("async.shared", space="cta")' in src[dec:gemm]
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=128)" in src[dec:gemm]


def test_solve_rows_in_order_with_a_barrier_each():
    src = _body("solve_unit_lower")
    loop = src.index("for i_1_ in cutlass.range(1, 64)")
    # every row starts after the previous rows are written by all threads
    assert src.index("cute.arch.sync_threads()", loop) < src.index("for k in cutlass.range(0, i_1_)")
    assert "X_s[i_1_ * 64 + j_1_] = X_s[i_1_ * 64 + j_1_] - A_s[i_1_ * 64 + k] * X_s[k * 64 + j_1_]" in src
    # the identity start
    assert "cutlass.select_(i == (j + tc_lane4), cutlass.Float32(1.0), cutlass.Float32(0.0))" in src


def test_sparse24_rank_from_a_python_helper():
    src = _body("sparse24_prune")
    # `(o > me) | ((o == me) & (o_k < k))` from the helper is the logical or / and
    assert "cute.math.absf(x_s[i * 128 + base + 3]) > me or cute.math.absf(x_s[i * 128 + base + 3]) == me and base + 3 < (k + tc_lane6)" in src
    assert "cutlass.select_(rank < 2, tc_vec3[tc_lane6], cutlass.Float16(0.0))" in src
    # the mask byte is assembled after all of `keep` is written
    assert src.index("cute.arch.sync_threads()", src.index("keep.iterator")) < src.index("<< 3")


def test_bool_bit_operators_in_a_python_helper():
    def both(a, b):
        return T.if_then_else((a > 0) & (b > 0), 1, 0) + T.if_then_else((a > 0) ^ (b > 0), 2, 0) \
            + ((a > 1) | (b > 1)) * 4

    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                C[i] = both(A[i], B[i])

    src = tilecute.compile(f, target="sm_90a").get_kernel_source()
    assert "cutlass.select_(A[i] > cutlass.Float32(0.0) and B[i] > cutlass.Float32(0.0), 1, 0)" in src
    assert "cutlass.select_((A[i] > cutlass.Float32(0.0)) != (B[i] > cutlass.Float32(0.0)), 2, 0)" in src
    assert "cutlass.Int32(A[i] > cutlass.Float32(1.0) or B[i] > cutlass.Float32(1.0)) * 4" in src


def _abs_by_branch(a, _unused):
    if a > 0:  # a run-time value as a Python bool: TVM's ValueError in TileLang
        return a
    return -a


def _larger(a, b):
    return max(a, b)  # Python's max compares with `>` and takes its truth


def _larger_ternary(a, b):
    return a if a > b else b


@pytest.mark.parametrize("helper", [_abs_by_branch, _larger, _larger_ternary])
def test_python_bool_of_a_run_time_value_in_a_helper_is_refused(helper):
    # these compiled, every value taking one branch (`max(A[i], 1.0)` was 1.0)
    with pytest.raises(FrontendError, match=r"cannot evaluate `helper\(A\[i\], 1.0\)`: a run-time "
                                            r"value used as a Python bool .* TileLang refuses it too"):
        @T.prim_func
        def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(128):
                    B[i] = helper(A[i], 1.0)


def test_helper_equality_and_kernel_body_max_still_read():
    def same_or_neg(a, b):
        return a if a == b else -a  # `==` in a helper: structural equality, as TVM's EqualOp

    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = same_or_neg(A[i], 1.0) + max(A[i], 2.0)

    src = tilecute.compile(f, target="sm_90a").get_kernel_source()
    assert "B[i] = cutlass.Float32(0.0) - A[i] + cute.arch.fmax(A[i], cutlass.Float32(2.0))" in src


def test_reduce_into_a_part_of_a_buffer_is_refused():
    def program(second_out):
        def f(X: T.Tensor((64,), "float32"), Y: T.Tensor((2,), "float32")):
            with T.Kernel(1, threads=32) as _:
                a = T.alloc_fragment((64,), "float32")
                one = T.alloc_fragment((1,), "float32")
                part = T.alloc_fragment((2,), "float32")
                T.copy(X, a)
                T.reduce_sum(a, one[0:1], dim=0)  # a slice of the whole buffer: accepted
                part[0] = one[0]
                part[1] = one[0]
                if second_out:
                    T.reduce_max(a, part[1:2], dim=0)
                T.copy(part, Y)
        return f

    src = tilecute.compile(T.prim_func(program(False)), target="sm_90a").get_kernel_source()
    assert 'tcr.warp_allreduce(' in src
    with pytest.raises(FrontendError, match=r"T.reduce_max: out=part\[1:2\] is a part of 'part': "
                                            r"T.reduce_max takes whole buffers"):
        T.prim_func(program(True))


def test_lamb_one_atomic_per_block_and_trust_ratio():
    src = _body("lamb_update_norms")
    # thread 0 alone adds the block's sums (every thread holds them)
    assert "    if tc_tid == 0:\n        tca.atomic_add(Norms, (0,), w_sum[0])\n" \
           "        tca.atomic_add(Norms, (1,), u_sum[0])" in src
    assert "u = m / bc1 / (cute.math.sqrt(v / bc2) + eps)" in src
    src = _body("lamb_apply")
    assert "trust = cutlass.select_(wn > cutlass.Float32(0.0) and un > cutlass.Float32(0.0), wn / un, cutlass.Float32(1.0))" in src


def test_radix_keys_histogram_and_suffix_scan():
    src = _body("topk_radix_threshold")
    assert "tcmath.reinterpret(tc_vec4[tc_lane5], cutlass.Uint32)" in src
    assert "bits ^ cutlass.Uint32(4294967295), bits | cutlass.Uint32(2147483648)" in src
    assert "tca.atomic_add(hist, cutlass.Int32(key >> cutlass.Uint32(24)), 1)" in src
    # the reverse scan reads the histogram from its top bin
    assert "tc_pos10 = 255 - (tc_lane6 * 8 + tc_c8)" in src


def test_jsd_symbolic_rows_two_passes():
    src = _body("jsd_loss")
    assert src.count("for c") == 2 and src.count("tcr.block_allreduce(") == 5
    assert "lm = cute.math.log(cutlass.Float32(0.5) * (p + q) + cutlass.Float32(1e-30))" in src


def test_nms_mask_bits_and_greedy_barrier():
    src = _body("nms_iou_mask")
    assert "hit = j > gi and inter > cutlass.Float32(0.5) * (area_i + area_j - inter)" in src
    assert "| cutlass.Uint32(hit) << cutlass.Uint32(b)" in src
    src = _body("nms_greedy")
    loop = src.index("for i in cutlass.range(0, 1024)")
    # each step sees the previous step's suppressed set
    assert src.index("cute.arch.sync_threads()", loop) < src.index("if cutlass.Uint32(removed[i // 32])")
    assert "removed[w] = cutlass.Uint32(removed[w]) | cutlass.Uint32(Mask[i, w])" in src


def test_fft_stages_ping_pong_with_barriers():
    src = _body("fft_rows_stockham")
    stage = src.index("for st in cutlass.range(0, 8)")
    assert "s = 1 << st" in src and "n = 256 >> st" in src
    assert src.index("cute.arch.sync_threads()", stage) < src.index("a_r = buf_r[cur * 256")
    assert "ang = cutlass.Float32(-6.283185307179586) * cutlass.Float32(p) / cutlass.Float32(n)" in src
    assert "buf_r[nxt * 256 + q + s * (2 * p + 1)] = (a_r - b_r) * wr - (a_i - b_i) * wi" in src


def test_mish_softplus_threshold():
    src = _body("mish_bwd")
    assert "> cutlass.Float32(20.0)" in src and "cute.math.log1p(cute.math.exp(" in src
    assert "cute.math.tanh(sp)" in src


def test_rope_2d_partner_from_shared_and_ragged_tokens():
    src = _body("rope_2d_vision")
    assert "if bx * 32 + i1 < S:" in src  # the last token block is ragged
    assert "= xr[i * 32 + (j + tc_lane16) + 16]" in src  # the partner lane, from the shared tile
    assert "= xr[i * 32 + (j + tc_lane16) - 16]" in src
    assert "s = cutlass.min(bx * 32 + i, S - 1)" in src


def test_lm_head_running_argmax_over_accumulator_rows():
    src = _body("lm_head_argmax")
    # per vocabulary tile: the accumulator cleared, the row max and the first column at it
    tile = src.index("for n in cutlass.range(0, 32)", src.index("setmaxregister_increase"))
    assert src.index("acc[tc_r3 + tc_lane4] = cutlass.Float32(0.0)", tile) < src.index("tcm.gemm(", tile)
    assert 'tcrow.reduce_rows(acc, t_max, "max", clear=True)' in src
    assert "cutlass.select_(acc[tc_r5 + tc_lane6] == t_max[tcrow.row_of(col, tc_r5)], n * 128 + (j + tc_lane6), 4096)" in src
    assert 'tcrow.reduce_rows(col, t_idx, "min", clear=True)' in src
    # strictly greater: a tie keeps the earlier tile's index
    assert "if t_max[tc_q7] > best[tc_q7]:" in src


def test_flash_head_dims_80_and_256():
    src = _body("flash_fwd_head_dim")
    # D = 80: the P @ V wgmma is 80 wide, the loads five 16-column boxes (32-byte rows)
    assert "tcm.tiled_mma(\"wgmma\", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, True, (1, 1), 80, a_regs=True)" in src
    assert "TMA load of 5 1x64x1x16 boxes of K" in src
    assert "cute.math.exp2((m_prev[" in src
    src = _body("flash_fwd_head_dim", D=256)
    assert "(1, 1), 256, a_regs=True)" in src


def test_flash_head_dim_not_a_multiple_of_16_is_refused():
    # TileLang refuses it too ("block_K (40) must be a multiple of micro_size_k (16)")
    with pytest.raises(Exception, match=r"T.gemm\(Q_s, K_s, s\): K = 40 is not a multiple of 16"):
        P.flash_fwd_head_dim(D=40).get_kernel_source()


def test_cholesky_column_steps_are_separated_by_barriers():
    src = _body("cholesky_blocks")
    col = src.index("for k in cutlass.range(0, 64)")
    body = src[col:src.index("    cute.arch.sync_threads()\n    for tc_k8", col)]
    # pivot read / column scaled / trailing update / pivot written: each after a barrier
    assert body.count("cute.arch.sync_threads()") == 4
    order = [body.index(x) for x in ("piv[0] = cute.math.sqrt(", "/ piv[0]", "* a[j * 64 + (k ^ (j & 31))]",
                                     "if tc_tid == 0:")]
    assert order == sorted(order)
    # the shared tile's swizzle is the same for the load and every access
    assert "a[i1 * 64 + ((i2 + tc_lane4) ^ (i1 & 31))] = tc_vec3[tc_lane4]" in src


def test_spmm_gathers_rows_named_by_the_staged_indices():
    src = _body("csr_spmm_pipelined")
    # a trip count read from the row pointers
    assert "for c in cutlass.range(0, (end - start + 32 - 1) // 32)" in src
    # past the row's end: index 0 and value 0, the reads guarded
    assert "cols_s[z] = cutlass.Int32(cutlass.select_(idx < end, tc_ld4, 0))" in src
    assert "if idx < end and idx >= 0 and idx < 8192:" in src
    # the B rows gathered at the staged column indices, after those are written
    gather = src.index("B.iterator + cute.assume(cols_s[z_1_] * 256")
    assert src.rindex("cute.arch.sync_threads()", 0, gather) > src.index("vals_s[z] = ")
    assert "vals_s[z_2_] * cutlass.Float32(B_s[z_2_ * 128 + (j_1_ + tc_lane11)])" in src


# ---- GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_welford_layernorm_gpu():
    torch.manual_seed(0)
    x = (torch.randn(256, 6144, device="cuda") * 2 + 3).bfloat16()
    w = torch.randn(6144, device="cuda")
    b = torch.randn(6144, device="cuda")
    y = P.welford_layernorm()(x, w, b)
    ref = torch.nn.functional.layer_norm(x.float(), (6144,), w, b, eps=1e-5)
    torch.testing.assert_close(y.float(), ref, atol=3e-2, rtol=2e-2)


def _pack_ternary(w):
    codes = (w + 1).to(torch.uint8).reshape(w.shape[0], -1, 4)
    return (codes[..., 0] | (codes[..., 1] << 2) | (codes[..., 2] << 4) | (codes[..., 3] << 6)).contiguous()


@pytest.mark.gpu
def test_bitnet_gpu():
    torch.manual_seed(0)
    w = torch.randint(-1, 2, (2048, 4096), device="cuda", dtype=torch.int32)
    a = torch.randint(-128, 128, (4096,), device="cuda", dtype=torch.int8)
    s = torch.tensor([0.01], device="cuda")
    y = P.bitnet_int2_gemv()(a, _pack_ternary(w), s)
    torch.testing.assert_close(y, (w.double() @ a.double()).float() * 0.01, atol=1e-3, rtol=1e-5)
    w = torch.randint(-1, 2, (512, 1024), device="cuda", dtype=torch.int32)
    a = torch.randint(-128, 128, (256, 1024), device="cuda", dtype=torch.int8)
    c = P.bitnet_int2_prefill()(a, _pack_ternary(w), s)
    torch.testing.assert_close(c, (a.double() @ w.double().T).float() * 0.01, atol=1e-3, rtol=1e-5)


@pytest.mark.gpu
def test_solve_unit_lower_gpu():
    torch.manual_seed(0)
    a = torch.tril(torch.randn(37, 64, 64, device="cuda") * 0.1, diagonal=-1)
    x = P.solve_unit_lower()(a)
    ref = torch.linalg.inv(torch.eye(64, device="cuda", dtype=torch.float64) + a.double()).float()
    torch.testing.assert_close(x, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_sparse24_gpu():
    torch.manual_seed(0)
    x = torch.randn(512, 1024, device="cuda").half()
    x[0, :4] = torch.tensor([1.0, -1.0, 1.0, 0.5])  # a tie: lanes 0 and 1 kept
    y, mask = P.sparse24_prune()(x)
    g = x.float().abs().reshape(512, 256, 4)
    # rank = larger magnitudes + equal ones at a lower lane
    idx = torch.arange(4, device="cuda")
    rank = ((g[..., None, :] > g[..., :, None]) |
            ((g[..., None, :] == g[..., :, None]) & (idx[None, :] < idx[:, None]))).sum(-1)
    keep = rank < 2
    torch.testing.assert_close(y, torch.where(keep.reshape(512, 1024), x, torch.zeros_like(x)))
    bits = (keep.int() << idx).sum(-1).to(torch.uint8)
    assert torch.equal(mask, bits)


@pytest.mark.gpu
def test_lamb_gpu():
    torch.manual_seed(0)
    n = 1 << 20
    w = torch.randn(n, device="cuda")
    g = torch.randn(n, device="cuda")
    m = torch.randn(n, device="cuda") * 0.1
    v = torch.rand(n, device="cuda") * 0.1
    w0, m0, v0 = w.clone(), m.clone(), v.clone()
    u = torch.empty(n, device="cuda")
    norms = torch.zeros(2, device="cuda")
    b1, b2, eps, wd, lr, t = 0.9, 0.999, 1e-6, 0.01, 1e-3, 3
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    P.lamb_update_norms()(w, g, m, v, u, norms, b1, b2, eps, wd, bc1, bc2)
    P.lamb_apply()(w, u, norms, lr)
    m_ref = b1 * m0 + (1 - b1) * g
    v_ref = b2 * v0 + (1 - b2) * g * g
    u_ref = (m_ref / bc1) / ((v_ref / bc2).sqrt() + eps) + wd * w0
    torch.testing.assert_close(m, m_ref)
    torch.testing.assert_close(v, v_ref)
    torch.testing.assert_close(norms, torch.stack([(w0 * w0).sum(), (u_ref * u_ref).sum()]), rtol=1e-4, atol=0)
    trust = w0.norm() / u_ref.norm()
    torch.testing.assert_close(w, w0 - lr * trust * u_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_topk_radix_threshold_gpu():
    torch.manual_seed(0)
    x = torch.randn(64, 8192, device="cuda") * 10
    bins, above = P.topk_radix_threshold()(x)
    bits = x.view(torch.int32).long() & 0xFFFFFFFF
    key = torch.where(bits >> 31 == 1, bits ^ 0xFFFFFFFF, bits | 0x80000000)
    top = key >> 24
    kth = torch.topk(x, 100, dim=1).values[:, -1:]
    kth_bits = kth.view(torch.int32).long() & 0xFFFFFFFF
    kth_bin = (torch.where(kth_bits >> 31 == 1, kth_bits ^ 0xFFFFFFFF, kth_bits | 0x80000000) >> 24)
    assert torch.equal(bins.long(), kth_bin[:, 0])
    assert torch.equal(above.long(), (top > kth_bin).sum(1))


@pytest.mark.gpu
def test_jsd_gpu():
    torch.manual_seed(0)
    x = (torch.randn(100, 16384, device="cuda") * 2).half()
    y = (torch.randn(100, 16384, device="cuda") * 2).half()
    out = P.jsd_loss()(x, y)
    p, q = torch.softmax(x.double(), 1), torch.softmax(y.double(), 1)
    m = 0.5 * (p + q)
    ref = 0.5 * (p * (p.log() - m.log())).sum(1) + 0.5 * (q * (q.log() - m.log())).sum(1)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-3)


@pytest.mark.gpu
def test_nms_gpu():
    torch.manual_seed(0)
    n = 1024
    xy = torch.rand(n, 2, device="cuda") * 100
    wh = torch.rand(n, 2, device="cuda") * 20 + 1
    boxes = torch.cat([xy, xy + wh], 1).contiguous()
    mask = P.nms_iou_mask()(boxes)
    keep = P.nms_greedy()(mask)
    # reference: the same IoU rule; pairs within rounding of the threshold (the GPU may
    # contract a product and a sum into one FMA) are not compared
    x1 = torch.maximum(boxes[:, None, 0], boxes[None, :, 0])
    y1 = torch.maximum(boxes[:, None, 1], boxes[None, :, 1])
    x2 = torch.minimum(boxes[:, None, 2], boxes[None, :, 2])
    y2 = torch.minimum(boxes[:, None, 3], boxes[None, :, 3])
    inter = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union_half = 0.5 * (area[:, None] + area[None, :] - inter)
    later = torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1)
    hit = (inter > union_half) & later
    clear = (inter - union_half).abs() > 1e-4 * union_half
    got = ((mask.view(torch.int32).long() & 0xFFFFFFFF)[:, :, None] >> torch.arange(32, device="cuda")) & 1
    got = got.reshape(n, n).bool()
    assert torch.equal(got[clear], hit[clear])
    assert not (got & ~later).any()
    # the greedy walk over the kernel's own mask
    got, ref, removed = got.cpu(), torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.bool)
    for i in range(n):
        if not removed[i]:
            ref[i] = 1
            removed |= got[i]
    assert torch.equal(keep.cpu(), ref)


@pytest.mark.gpu
def test_fft_gpu():
    torch.manual_seed(0)
    xr = torch.randn(64, 256, device="cuda")
    xi = torch.randn(64, 256, device="cuda")
    yr, yi = P.fft_rows_stockham()(xr, xi)
    ref = torch.fft.fft(torch.complex(xr.double(), xi.double()), dim=1)
    torch.testing.assert_close(yr.double(), ref.real, atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(yi.double(), ref.imag, atol=2e-3, rtol=1e-4)


@pytest.mark.gpu
def test_mish_bwd_gpu():
    torch.manual_seed(0)
    x = (torch.randn(1024, 4096, device="cuda") * 8).bfloat16()
    dy = torch.randn(1024, 4096, device="cuda").bfloat16()
    dx = P.mish_bwd()(x, dy)
    xf = x.float().requires_grad_()
    torch.nn.functional.mish(xf).backward(dy.float())
    torch.testing.assert_close(dx.float(), xf.grad, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_rope_2d_vision_gpu():
    torch.manual_seed(0)
    S, H, D = 1000, 8, 64  # the last block of 32 tokens is ragged
    x = torch.randn(S, H, D, device="cuda").bfloat16()
    pos = torch.stack([torch.arange(S) // 32, torch.arange(S) % 32], 1).int().cuda()
    y = P.rope_2d_vision()(x, pos)
    half = D // 4
    inv = 10000.0 ** (-(2.0 * torch.arange(half, device="cuda") / (2 * half)))

    def rot(v, p):  # NeoX halves of width `half`
        ang = p[:, None, None].float() * inv
        c, s = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        a, b = v[..., :half], v[..., half:]
        return v * c + torch.cat([-b, a], -1) * s

    ref = torch.cat([rot(x.float()[..., :D // 2], pos[:, 0]), rot(x.float()[..., D // 2:], pos[:, 1])], -1)
    torch.testing.assert_close(y.float(), ref, atol=3e-2, rtol=2e-2)


@pytest.mark.gpu
def test_lm_head_argmax_gpu():
    torch.manual_seed(0)
    h = torch.randn(128, 512, device="cuda").bfloat16()
    w = torch.randn(4096, 512, device="cuda").bfloat16()
    w[1000] = w[3000]  # a tie across tiles: the first column wins
    h[5] = w[3000] * 4
    best, idx = P.lm_head_argmax()(h, w)
    logits = h.float() @ w.float().T
    ref_best, ref_idx = logits.max(1)
    torch.testing.assert_close(best, ref_best, atol=1e-2, rtol=1e-3)
    # where the top two logits are apart by more than the summation-order error, the index
    top2 = logits.topk(2, 1).values
    clear = (top2[:, 0] - top2[:, 1]) > 1e-2
    assert torch.equal(idx[clear].long(), ref_idx[clear])
    assert idx[5].item() == 1000


@pytest.mark.gpu
@pytest.mark.parametrize("d", [80, 256])
def test_flash_head_dim_gpu(d):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 512, 4, d, device="cuda").half() for _ in range(3))
    o = P.flash_fwd_head_dim(D=d)(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2).float() for x in (q, k, v))).transpose(1, 2)
    torch.testing.assert_close(o.float(), ref, atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_cholesky_gpu():
    torch.manual_seed(0)
    g = torch.randn(32, 64, 64, device="cuda")
    a = g @ g.transpose(1, 2) / 64 + torch.eye(64, device="cuda")
    out = P.cholesky_blocks()(a)
    torch.testing.assert_close(out, torch.linalg.cholesky(a), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_csr_spmm_pipelined_gpu():
    torch.manual_seed(0)
    M, K, N, nnz = 512, 1024, 256, 8192
    rows = torch.sort(torch.randint(0, M, (nnz,))).values
    rows[rows == 7] = 8  # an empty row
    cols = torch.randint(0, K, (nnz,))
    vals = torch.randn(nnz)
    rowptr = torch.zeros(M + 1, dtype=torch.int64)
    rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=M), 0)
    b = torch.randn(K, N, device="cuda").half()
    c = P.csr_spmm_pipelined()(rowptr.int().cuda(), cols.int().cuda(), vals.cuda(), b)
    dense = torch.zeros(M, K, dtype=torch.float64)
    dense.index_put_((rows, cols), vals.double(), accumulate=True)
    ref = (dense.cuda() @ b.double()).float()
    torch.testing.assert_close(c, ref, atol=1e-3, rtol=1e-3)
