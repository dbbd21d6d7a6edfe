"""A thirty-sixth set of programs in TileLang's idioms (tests/unseen_programs36.py): a 192x96
three-warpgroup TT GEMM, k-means assignment, RWKV-6, Hamming nearest neighbours, grid_sample,
survival cumsums, a 3-D convolution, segment boxes by atomics, a hand warp-specialized
softmax with two consumer warpgroups, nested macros over stepped loops, a while / break CDF
search, a reshaped shared tile, an NN GEMM split along N over warpgroups, fp8 KV
quantization, a custom-layout transpose, half-warp shuffles, a sparse MQA with sinks and
an eager fp8 / fp4 quantizer.

CPU: each builds to an sm_90a and (but the fp8 one) an sm_80 cubin, and what decides its
result is read in the generated source.  Two fixes came from these programs: a T.gemm whose
B is stored (K, N) and whose warpgroups sit side by side along N in parts that a 64- or
128-byte swizzle chunk does not tile (a 64 x 96 tile on two warpgroups: 48 columns each)
failed in CuTe DSL ("failed to partition ... with tiled_mma"); the operand now takes the
widest swizzle whose chunks tile each warpgroup's part (32 bytes there), and where none does
(24 columns) the T.gemm runs on mma.sync; a shared tile two T.gemms read, one of them in
such parts (the sparse MQA's KV tile: K-major for Q K^T, N-major in 32-column parts for
P @ V), takes the narrower swizzle for both (it was refused: two layouts).  A tile op after other statements in a T.Parallel
body (``T.atomic_add(dst[s, 0:4], v[0:4])``) is refused naming the op and TileLang's
elementwise-only rule, not as a "T.Parallel loop inside a T.Parallel body".
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs36.py``)."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.codegen.source import CodegenError
from tilecute.language.parser import FrontendError
import rounds
import unseen_programs36 as P

NAMES = ["gemm_192x96_three_warpgroups", "kmeans_assign", "rwkv6_recurrent", "hamming_nearest",
         "grid_sample_bilinear", "survival_and_colmax", "conv3d_ndhwc_implicit_gemm",
         "segment_boxes_atomic", "ws_softmax_two_consumers", "macro_nested_stepped",
         "cdf_search_while_break", "shared_reshape_group_absmax", "gemm_nn_split_n_warpgroups",
         "kv_quant_e4m3_e5m2", "transpose_custom_layout", "halfwarp_scan_broadcast",
         "sparse_mqa_gather_sink", "eager_pow2_fp8_fp4_quant", "rownorm_thread_return"]
NO_SM80 = {"kv_quant_e4m3_e5m2", "eager_pow2_fp8_fp4_quant"}  # float8 conversions need sm_89+
# eager kernels are built from the tensors they are called with (CPU tensors give the shapes)
EAGER = {"eager_pow2_fp8_fp4_quant": lambda: P.eager_pow2_fp8_fp4_quant.compile(
    torch.zeros(100, 256, dtype=torch.bfloat16))}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P, EAGER)
_body = rounds.body_of(_kernel)
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    sorted(set(NAMES) - NO_SM80), rounds.tir_of(P), "sm_80")


def test_fp8_quant_is_refused_on_sm80(tmp_path):
    with pytest.raises(Exception, match="float8 values convert only on sm_89"):
        tilecute.build_cubin(P.kv_quant_e4m3_e5m2.get_tir(), "sm_80", out_dir=str(tmp_path))


def test_three_warpgroups_tt_gemm():
    src = _body("gemm_192x96_three_warpgroups")
    # three consumer warpgroups along M (FullRow), both operands transposed, a TMA producer
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, True, False, (3, 1), 96)' in src
    assert "TMA load of 3 64x64 boxes of A" in src and "if tc_tx >= 384:" in src
    # three stages of A and B, the GEMM one batch behind (stage=[0, 0, 2])
    assert "# A_s: 3 stages" in src and "wait=1)" in src
    assert "cutlass.BFloat16(acc[tc_r3 + tc_lane5])" in src


def test_kmeans_argmin_from_the_accumulator():
    src = _body("kmeans_assign")
    assert 'tcrow.reduce_rows(acc, best, "min", clear=True)' in src
    assert "cutlass.select_(acc[tc_r4 + tc_lane5] == best[tcrow.row_of(cand, tc_r4)], (j_1_ + tc_lane5), 256)" in src
    assert 'tcrow.reduce_rows(cand, arg, "min", clear=True)' in src
    # the ragged last tile's rows are not stored
    assert "if bx * 64 + i_2_ < NP:" in src


def test_rwkv6_reduces_dim0_of_the_state_product():
    src = _body("rwkv6_recurrent")
    assert "w_s[i] = cute.math.exp(cute.math.exp(W[h, t, i]) * cutlass.Float32(-1.0))" in src
    assert "S[tc_k8 * 8 + tc_lane11] = S[tc_k8 * 8 + tc_lane11] * w_s[i_1_] + kv" in src
    # the dim-0 sum in the tile's own layout (tests/test_column_reduce_in_place.py): each
    # thread folds its 4 rows of its 8 columns, lanes 8 apart and then the warps meet
    assert "_moved" not in src and 'tcr.warp_allreduce(tc_acc19, "sum", 4, 8)' in src
    assert 'tcr.block_allreduce(tc_red16, "sum", o_cols_scratch, 4, 4, lanes=8)' in src
    # the state is read before it is updated in the same iteration
    body = src[src.index("kv = k_s[i_1_]"):]
    assert body.index("u_s[i_1_] * kv + S[") < body.index("S[tc_k8 * 8 + tc_lane11] = ")


def test_hamming_popcount_clz_and_bool_mask():
    src = _body("hamming_nearest")
    assert "cute.arch.popc(cutlass.Uint32(q_s[i * 8 + w]) ^ cutlass.Uint32(d_s[" in src
    assert "cutlass.select_((Valid[c * 128 + (j + tc_lane10)] != 0), acc[0], 1073741824)" in src
    assert "cute.arch.clz(cutlass.Uint32(Q[q, 0]) ^ tc_ld38)" in src


def test_grid_sample_guards_each_tap():
    src = _body("grid_sample_bilinear")
    assert "bx, oy, n = cute.arch.block_idx()" in src
    assert "x0 = cutlass.Int32(cute.math.floor(fx))" in src
    # a tap outside the image is never read
    assert "if cutlass.and_(x0 + 1 >= 0, x0 + 1 < 48, y0 + 1 >= 0, y0 + 1 < 32" in src
    assert src.count("cutlass.Float16(0)") == 4


def test_survival_reverse_cumsum_and_column_max():
    src = _body("survival_and_colmax")
    assert "p32[tc_k3] = cutlass.Float32(p16[tc_k3])" in src
    assert "mx[0] = cute.arch.fmax(mx[0], p32[k2])" in src
    assert "T.cumsum(p32_scan_5, p32_scan_5, dim=0, reverse=True)" in src
    assert "tc_pos12 = 63 - (tc_lane8 * 2 + tc_c10)" in src


def test_conv3d_gathers_with_zero_padding():
    src = _body("conv3d_ndhwc_implicit_gemm")
    # the voxel's depth plus the tap's, less the padding; a tap outside the volume is not read
    assert "zd = m // 256 - m // 256 // 8 * 8 + tap // 9 - 1" in src
    assert "inside = cutlass.and_(zd >= 0, zd < 8, zh >= 0, zh < 16, zw >= 0, zw < 16)" in src
    assert "tc_ld5 = X[m // 2048, zd, zh, zw, kk - kk // 32 * 32]" in src
    assert "cutlass.select_(inside, tc_ld5, cutlass.Float16(0.0))" in src
    # the output stored through the (voxels, F) view of Y
    assert "Yf = cute.make_tensor(Y_ptr, cute.make_layout((4096, 64,), stride=(64, 1,)))  # T.view of Y" in src
    assert "tcm.gemm(" in src


def test_segment_boxes_float_min_max_and_x4_add():
    src = _body("segment_boxes_atomic")
    assert "tca.atomic_min(Lo, (s, c_1_), v[c_1_])" in src
    assert "tca.atomic_max(Hi, (s, c_1_), v[c_1_])" in src
    assert all(f"tca.atomic_add(Sums, (s, {c}), v[{c}])" in src for c in range(4))


def test_region_atomic_inside_parallel_is_refused_by_name():
    @T.prim_func
    def f(A: T.Tensor((256, 4), "float32"), B: T.Tensor((256, 4), "float32")):
        with T.Kernel(1, threads=128) as _:
            for p in T.Parallel(256):
                v = T.alloc_local((4,), "float32")
                for c in T.vectorized(4):
                    v[c] = A[p, c] * 2.0
                T.atomic_add(B[p, 0:4], v[0:4])

    with pytest.raises(CodegenError, match=r"T\.atomic_add\(B\[p:p \+ 1, 0:4\], v\[0:4\]\) inside a "
                                           r"T\.Parallel loop: only elementwise operations"):
        tilecute.compile(f, target="sm_90a")


def test_ws_two_consumer_groups_phases():
    src = _body("ws_softmax_two_consumers")
    assert "tct.init_barriers(full, 2, 128)" in src and "tct.init_barriers(empty, 2, 256)" in src
    assert "if tc_tid >= 256:  # T.ws(2): threads 256..383" in src
    assert "tct.wait(empty + slot, it // 2 & 1 ^ 1)" in src
    assert "if tc_tid < 256:  # T.ws(0, 1): threads 0..255" in src
    assert "tct.wait(full + slot_1_, it_1_ // 2 & 1)" in src
    # the consumers' row reductions span their 256 threads only
    assert 'tcr.block_allreduce(tc_red12, "max", mx_scratch, 8, 4, 256, 3)' in src
    # the slot is released only after it is read
    assert src.index("tct.arrive(empty + slot_1_)") > src.index("ring.iterator + cute.assume(slot_1_ * 8192")


def test_nested_macros_and_stepped_loop():
    src = _body("macro_nested_stepped")
    assert "for j_iter in cutlass.range(0, (Cn + 2 - 1) // 2):" in src
    assert "j = 0 + j_iter * 2" in src
    assert "Y[row, j] = Y[row, j] + a * X[row, j]" in src
    assert "if j + 1 < Cn:\n                    Y[row, j + 1] = Y[row, j + 1] + b * X[row, j + 1]" in src


def test_cdf_search_break():
    src = _body("cdf_search_while_break")
    assert "while k[0] < 1000 and broke[0] == 0:" in src
    assert "pick[0] = k[0]\n                broke[0] = 1" in src
    assert "if broke[0] == 0:\n                k[0] = k[0] + 1" in src


def test_reshape_and_view_alias_the_tile():
    src = _body("shared_reshape_group_absmax")
    assert "grp = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float16)" in src
    assert "bits = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Uint16)" in src
    assert "cute.math.absf(grp[g * 4 + 3])" in src
    assert "cutlass.Uint16(bits[i * 128 + j]) >> cutlass.Uint16(15)" in src


def test_nn_gemm_split_along_n_takes_a_chunk_each_part_holds():
    # 64 x 96 on two warpgroups: 48 columns of B each; 64-byte chunks would be cut in halves
    src = _body("gemm_nn_split_n_warpgroups")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, True, (1, 2), 96)' in src
    assert "cutlass.Float16, 32, 96, 32, True, \"wgmma\")" in src
    # one warpgroup (no split): the widest chunk of a 96-column row, 64 bytes
    src = _body("gemm_nn_split_n_warpgroups", threads=128)
    assert "cutlass.Float16, 32, 96, 64, True, \"wgmma\")" in src
    # 24 columns a warpgroup (48 bytes): no chunk tiles them, mma.sync takes the T.gemm
    src = _body("gemm_nn_split_n_warpgroups", block_M=192, block_N=48, M=384, N=384)
    assert 'tcm.tiled_mma("mma", cutlass.Float16' in src


def test_split_part_without_chunks_on_wgmma_only_is_refused():
    from tilecute.transform.select_mma import GemmError

    @T.prim_func
    def f(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 48), "float16"),
          C: T.Tensor((64, 48), "float32")):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 48), "float16")
            acc = T.alloc_fragment((64, 48), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s, B_s, acc, clear_accum=True)
            T.copy(acc, C)

    # (T.gemm would run it on mma.sync; T.wgmma_gemm does not fall back)
    with pytest.raises(GemmError, match=r"T\.wgmma_gemm runs on wgmma only: its 2 warpgroups along "
                                        r"N \(policy Square\) take 24 columns each of B, stored "
                                        r"\(K, N\): 48 bytes"):
        tilecute.compile(f, target="sm_90a")


def test_rows_of_two_families_run_on_mma_sync_together():
    """P @ V with V stored (keys, 80): two warpgroups of a 64-row tile would take 40 columns
    each (80 bytes, no swizzle chunk tiles them), so P @ V runs on mma.sync; Q K^T, which
    wgmma could take, shares its row statistics (mx) and joins it on mma.sync in one warp
    partition (was: refused, "fragment 'mx' holds row statistics of two T.gemm accumulators
    ... (wgmma, 1 x 2 warpgroups and mma.sync, 4 x 2 warps)").  More forms:
    tests/test_linked_gemm_families.py."""

    @T.prim_func
    def attn(Q: T.Tensor((128, 80), "float16"), K: T.Tensor((128, 80), "float16"),
             V: T.Tensor((128, 80), "float16"), O: T.Tensor((128, 80), "float32")):
        with T.Kernel(2, threads=256) as bx:
            Q_s = T.alloc_shared((64, 80), "float16")
            K_s = T.alloc_shared((128, 80), "float16")
            V_s = T.alloc_shared((128, 80), "float16")
            s = T.alloc_fragment((64, 128), "float32")
            p = T.alloc_fragment((64, 128), "float16")
            o = T.alloc_fragment((64, 80), "float32")
            mx = T.alloc_fragment((64,), "float32")
            T.copy(Q[bx * 64, 0], Q_s)
            T.copy(K, K_s)
            T.copy(V, V_s)
            T.gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
            T.reduce_max(s, mx, dim=1)
            for i, j in T.Parallel(64, 128):
                p[i, j] = T.exp(s[i, j] - mx[i])
            T.gemm(p, V_s, o, clear_accum=True)
            for i, j in T.Parallel(64, 80):
                o[i, j] = o[i, j] * mx[i]
            T.copy(o, O[bx * 64, 0])

    kernel = tilecute.compile(attn, target="sm_90a")
    src = kernel.get_kernel_source()
    assert 'tcm.tiled_mma("mma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, ' \
           'False, (4, 2), 128)  # T.gemm(Q_s, K_s, s)' in src
    assert '(4, 2), 80)  # T.gemm(p_shared, V_s, o)' in src
    assert "wgmma" not in src
    assert kernel.ensure_cubin()


def test_sparse_mqa_one_swizzle_for_both_reads_of_the_kv_tile():
    src = _body("sparse_mqa_gather_sink")
    # KV_s is B of Q K^T (K-major) and of P @ V (N-major, two warpgroups of 32 columns):
    # one 64-byte swizzle serves both (128 bytes for the first alone failed: two layouts)
    assert "tcm.operand(tc_smem + 8192, cutlass.BFloat16, 64, 64, 64, False, \"wgmma\")" in src
    assert "tcm.operand(tc_smem + 8192, cutlass.BFloat16, 64, 64, 64, True, \"wgmma\")" in src
    # the bool mask, a column fragment of the score tile, initialises the scores
    assert "valid, tc_valid_j = tcrow.col_fragment(\"wgmma\", (1, 2), 64, cutlass.Boolean, tc_tid)" in src
    assert "cutlass.select_(valid[tcrow.col_of(s, tc_r15 + tc_lane16)], cutlass.Float32(0.0), cutlass.Float32(float(\"-inf\")))" in src
    # the sink joins the combined denominators
    assert src.index("tcrow.combine_rows(l, tc_l_i, \"sum\"") < src.index("cute.math.exp2(Sink[h_5_]")


def test_eager_pow2_scales_from_bits_and_fp4_nibbles():
    src = _body("eager_pow2_fp8_fp4_quant")
    # ceil(log2(amax / 448)) from the exponent bits and a nonzero mantissa; 2**e from bits
    assert "tcmath.reinterpret(a * cutlass.Float32(0.002232142857142857), cutlass.Uint32) >> cutlass.Uint32(23) & cutlass.Uint32(255)" in src
    assert "<< 23, cutlass.Float32)" in src
    # disable_tma: the ragged row tile arrives by cp.async, rows past M zero-filled
    assert "tcc.copy_async(" in src and "TMA load" not in src
    # each fp4 value is stored as its nibble; values clamped (NaN kept) before the casts
    assert "tcfp4.store(q4, (r, by * 32 + (j + tc_lane20) >> 1), by * 32 + (j + tc_lane20), tcfp4.encode(" in src
    assert "q8[r, by * 32 + (j + tc_lane20)] = cutlass.Float8E4M3FN(cutlass.select_(cutlass.Boolean(cute.math.isnan(" in src


def test_thread_return_runs_the_rest_in_the_other_branch():
    src = _body("rownorm_thread_return")
    assert "if r >= 1000:\n        pass\n    else:" in src
    body = src[src.index("    else:"):]
    assert "if n <= 0:" in body and "Y[r] = cutlass.Float32(0.0)\n        else:" in body
    assert "Y[r] = cute.math.sqrt(acc[0])" in body.split("else:", 2)[2]
    assert "tca.atomic_add(Total, (0,), acc[0])" in body.split("else:", 2)[2]


def _returning(after):
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((128,), "float32")
            if after == "loop":
                for k in T.Parallel(128):
                    if A[k] < 0:
                        T.thread_return()
                    B[k] = A[k]
            else:
                if T.get_thread_binding() >= 100:
                    T.thread_return()
                T.copy(A, s)
                T.copy(s, B)
    return f


def test_thread_return_refusals_name_the_rule():
    with pytest.raises(FrontendError, match=r"T\.thread_return\(\) inside a T\.Parallel loop"):
        _returning("loop")
    with pytest.raises(FrontendError, match=r"a statement after T\.thread_return\(\) needs every "
                                            r"thread of the block .*T\.thread_return\(\) at line"):
        _returning("copy")


def test_fp8_quant_converts_register_tiles():
    src = _body("kv_quant_e4m3_e5m2")
    assert "k8 = cute.make_rmem_tensor((32,), cutlass.Float8E4M3FN)" in src
    assert "v8[tc_k33 * 16 + tc_lane35] = cutlass.Float8E5M2(v[tc_k33 * 16 + tc_lane35])" in src
    assert "cute.math.absf(k[tc_c15 * 16])" in src
    assert "(cutlass.Float32(57344.0) / cute.arch.fmax(tc_red22[tc_k27], cutlass.Float32(1e-06)))" in src


def test_custom_layout_function_places_both_sides():
    src = _body("transpose_custom_layout")
    assert "s[i_1_ * 64 + ((i_2_ + tc_lane4) ^ i_1_ % 32)] = tc_vec3[tc_lane4]" in src
    assert "tc_vec7[tc_lane8] = s[(i + tc_lane8) * 64 + (j ^ (i + tc_lane8) % 32)]" in src


def test_halfwarp_shuffles_keep_width_16():
    src = _body("halfwarp_scan_broadcast")
    # (32 - width) << 8 in the clamp: 16-lane segments; up: no upper clamp, bfly/idx: 31
    assert "cute.arch.shuffle_sync_up(x[0], offset=1 << o, mask_and_clamp=4096)" in src
    assert "cute.arch.shuffle_sync_bfly(m[0], offset=8 >> o_1_, mask_and_clamp=4127)" in src
    assert "total = cute.arch.shuffle_sync(x[0], offset=15, mask_and_clamp=4127)" in src


# ---- GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gemm_192x96_gpu():
    torch.manual_seed(0)
    a = torch.randn(512, 576, device="cuda").half()   # (K, M)
    b = torch.randn(288, 512, device="cuda").half()   # (N, K)
    c = P.gemm_192x96_three_warpgroups()(a, b)
    torch.testing.assert_close(c.float(), (a.float().T @ b.float().T), atol=0.5, rtol=2e-2)


@pytest.mark.gpu
def test_kmeans_assign_gpu():
    torch.manual_seed(0)
    x = torch.randn(1000, 64, device="cuda").half()
    cen = torch.randn(256, 64, device="cuda").half()
    csq = (cen.float() ** 2).sum(1)
    label, dist = P.kmeans_assign()(x, cen, csq)
    d = (x.float()[:, None, :] - cen.float()[None]).pow(2).sum(-1)
    ref_d, ref_l = d.min(1)
    torch.testing.assert_close(dist, ref_d, atol=5e-2, rtol=1e-3)
    # the chosen centroid is (within rounding) as near as the best one
    picked = d.gather(1, label.long()[:, None])[:, 0]
    torch.testing.assert_close(picked, ref_d, atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_rwkv6_gpu():
    torch.manual_seed(0)
    BH, L, K, V = 8, 64, 64, 64
    r = torch.randn(BH, L, K, device="cuda").bfloat16()
    k = (torch.randn(BH, L, K, device="cuda") * 0.3).bfloat16()
    v = torch.randn(BH, L, V, device="cuda").bfloat16()
    w = torch.randn(BH, L, K, device="cuda") * 0.5 - 1
    u = torch.randn(BH, K, device="cuda") * 0.5
    o = P.rwkv6_recurrent()(r, k, v, w, u)
    S = torch.zeros(BH, K, V, device="cuda")
    ref = torch.empty(BH, L, V, device="cuda")
    for t in range(L):
        kv = k[:, t].float()[:, :, None] * v[:, t].float()[:, None, :]
        ref[:, t] = (r[:, t].float()[:, :, None] * (u[:, :, None] * kv + S)).sum(1)
        S = S * torch.exp(-torch.exp(w[:, t]))[:, :, None] + kv
    torch.testing.assert_close(o.float(), ref, atol=5e-2, rtol=2e-2)


@pytest.mark.gpu
def test_hamming_gpu():
    torch.manual_seed(0)
    q = torch.randint(0, 2 ** 32, (256, 8), device="cuda", dtype=torch.int64).to(torch.uint32)
    db = torch.randint(0, 2 ** 32, (2048, 8), device="cuda", dtype=torch.int64).to(torch.uint32)
    db[100] = q[3]  # an exact match
    valid = torch.rand(2048, device="cuda") > 0.1
    valid[100] = True
    idx, dist, lead = P.hamming_nearest()(q, db, valid)
    qb = q.to(torch.int64) & 0xFFFFFFFF
    dbb = db.to(torch.int64) & 0xFFFFFFFF
    x = qb[:, None, :] ^ dbb[None, :, :]
    pc = torch.zeros_like(x)
    for bit in range(32):
        pc += (x >> bit) & 1
    d = pc.sum(-1)
    d[:, ~valid] = 1 << 30
    ref_d = d.min(1).values
    ref_i = (d == ref_d[:, None]).int().argmax(1)  # the lowest index reaching the minimum
    assert torch.equal(dist, ref_d.int()) and torch.equal(idx, ref_i.int())
    assert dist[3].item() == 0 and lead[3].item() == 32
    x0 = (qb[:, 0] ^ dbb[ref_i, 0])
    ref_lead = torch.where(x0 == 0, 32, 31 - torch.floor(torch.log2(x0.double().clamp(min=1))).long())
    assert torch.equal(lead.long(), ref_lead)


@pytest.mark.gpu
def test_grid_sample_gpu():
    torch.manual_seed(0)
    x = torch.randn(2, 32, 48, 64, device="cuda").half()
    g = torch.rand(2, 40, 40, 2, device="cuda") * 2.4 - 1.2  # some taps outside
    y = P.grid_sample_bilinear()(x, g)
    ref = torch.nn.functional.grid_sample(x.float().permute(0, 3, 1, 2), g, mode="bilinear",
                                          padding_mode="zeros", align_corners=False)
    torch.testing.assert_close(y.float(), ref.permute(0, 2, 3, 1), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_survival_gpu():
    torch.manual_seed(0)
    p = torch.rand(64, 1024, device="cuda").bfloat16()
    s, mx = P.survival_and_colmax()(p)
    torch.testing.assert_close(s, p.float().flip(0).cumsum(0).flip(0), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(mx, p.float().max(0).values)


@pytest.mark.gpu
def test_conv3d_gpu():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16, 16, 32, device="cuda").half()
    w = torch.randn(3, 3, 3, 32, 64, device="cuda").half() * 0.1
    y = P.conv3d_ndhwc_implicit_gemm()(x, w.reshape(27 * 32, 64))
    ref = torch.nn.functional.conv3d(x.float().permute(0, 4, 1, 2, 3), w.float().permute(4, 3, 0, 1, 2),
                                     padding=1)
    torch.testing.assert_close(y.float(), ref.permute(0, 2, 3, 4, 1), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_segment_boxes_gpu():
    torch.manual_seed(0)
    pts = torch.randn(4096, 4, device="cuda") * 3
    seg = torch.randint(-1, 32, (4096,), device="cuda", dtype=torch.int32)
    lo = torch.full((32, 3), float("inf"), device="cuda")
    hi = torch.full((32, 3), float("-inf"), device="cuda")
    sums = torch.zeros(32, 4, device="cuda")
    P.segment_boxes_atomic()(pts, seg, lo, hi, sums)
    for s in range(32):
        sel = pts[seg == s]
        torch.testing.assert_close(lo[s], sel[:, :3].min(0).values)
        torch.testing.assert_close(hi[s], sel[:, :3].max(0).values)
        torch.testing.assert_close(sums[s, :3], sel[:, :3].sum(0), atol=1e-3, rtol=1e-4)
        assert sums[s, 3].item() == sel.shape[0]


@pytest.mark.gpu
def test_ws_softmax_gpu():
    torch.manual_seed(0)
    x = torch.randn(1024, 512, device="cuda") * 3
    torch.testing.assert_close(P.ws_softmax_two_consumers()(x), torch.softmax(x, 1), atol=1e-5, rtol=1e-4)


@pytest.mark.gpu
def test_macro_nested_stepped_gpu():
    torch.manual_seed(0)
    for rows, cols in ((200, 33), (64, 8)):
        x = torch.randn(rows, cols, device="cuda")
        y = P.macro_nested_stepped()(x, 1.5, -0.5)
        ref = x.clone()
        ref[:, 0::2] *= 1.5
        ref[:, 1::2] *= -0.5
        torch.testing.assert_close(y, ref)


@pytest.mark.gpu
def test_cdf_search_gpu():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(512, 1000, device="cuda"), 1)
    u = torch.rand(512, device="cuda")
    u[0] = 2.0  # never passed: the last index
    out = P.cdf_search_while_break()(p, u)
    c = torch.zeros(512, device="cuda")
    ref = torch.full((512,), 999, device="cuda", dtype=torch.int32)
    done = torch.zeros(512, dtype=torch.bool, device="cuda")
    for k in range(1000):  # the same float32 order of sums as the kernel
        c = c + p[:, k]
        hit = (c > u) & ~done
        ref[hit] = k
        done |= hit
    assert torch.equal(out, ref)


@pytest.mark.gpu
def test_shared_reshape_gpu():
    torch.manual_seed(0)
    x = torch.randn(256, 1024, device="cuda").half()
    amax, neg = P.shared_reshape_group_absmax()(x)
    torch.testing.assert_close(amax, x.abs().reshape(256, 256, 4).max(-1).values)
    assert torch.equal(neg, (x.view(torch.int16) < 0).reshape(256, 8, 128).sum(-1).int())


@pytest.mark.gpu
def test_gemm_nn_split_n_gpu():
    torch.manual_seed(0)
    a = torch.randn(256, 512, device="cuda").half()
    b = torch.randn(512, 384, device="cuda").half()
    torch.testing.assert_close(P.gemm_nn_split_n_warpgroups()(a, b), a.float() @ b.float(), atol=0.1, rtol=1e-2)
    a = torch.randn(384, 512, device="cuda").half()
    c = P.gemm_nn_split_n_warpgroups(M=384, block_M=192, block_N=48)(a, b)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=0.1, rtol=1e-2)


@pytest.mark.gpu
def test_kv_quant_gpu():
    torch.manual_seed(0)
    k = torch.randn(512, 128, device="cuda").bfloat16()
    v = torch.randn(512, 128, device="cuda").bfloat16() * 10
    kq, vq, ks, vs = P.kv_quant_e4m3_e5m2()(k, v)
    ka = k.float().abs().amax(1).clamp(min=1e-6)
    va = v.float().abs().amax(1).clamp(min=1e-6)
    torch.testing.assert_close(ks, ka / 448.0)
    torch.testing.assert_close(vs, va / 57344.0)
    # (torch's `448.0 / ka` is `ka.reciprocal() * 448.0`, rounded twice; the kernel divides
    # once, as CUDA's `448.0f / x`: values on an fp8 rounding boundary would differ)
    ref_k = (k.float() * (torch.full_like(ka, 448.0) / ka)[:, None]).to(torch.float8_e4m3fn)
    ref_v = (v.float() * (torch.full_like(va, 57344.0) / va)[:, None]).to(torch.float8_e5m2)
    assert torch.equal(kq.view(torch.uint8), ref_k.view(torch.uint8))
    assert torch.equal(vq.view(torch.uint8), ref_v.view(torch.uint8))


@pytest.mark.gpu
def test_transpose_custom_layout_gpu():
    x = torch.randn(512, 256, device="cuda")
    assert torch.equal(P.transpose_custom_layout()(x), x.T.contiguous())


@pytest.mark.gpu
def test_halfwarp_shuffles_gpu():
    torch.manual_seed(0)
    x = torch.randn(256, 16, device="cuda")
    scan, stat = P.halfwarp_scan_broadcast()(x)
    torch.testing.assert_close(scan, x.cumsum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stat[:, 0], x.sum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stat[:, 1], x.max(1).values)


@pytest.mark.gpu
def test_sparse_mqa_gather_sink_gpu():
    torch.manual_seed(0)
    q = torch.randn(1, 128, 64, 64, device="cuda").bfloat16()
    kv = torch.randn(1, 512, 64, device="cuda").bfloat16()
    idx = torch.randint(0, 512, (1, 128, 128), device="cuda", dtype=torch.int32)
    idx[:, :, 100:] = -1  # padding
    sink = torch.randn(64, device="cuda")
    out = P.sparse_mqa_gather_sink()(q, kv, idx, sink)
    g = kv[0][idx[0].clamp(min=0).long()].float()  # (S, topk, D)
    sc = torch.einsum("shd,std->sht", q[0].float(), g) / 8.0
    sc = sc.masked_fill((idx[0] < 0)[:, None, :], float("-inf"))
    full = torch.cat([sc, sink[None, :, None].expand(128, 64, 1)], -1)
    p = torch.softmax(full, -1)[..., :-1]
    ref = torch.einsum("sht,std->shd", p, g)
    torch.testing.assert_close(out[0].float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_eager_pow2_fp8_fp4_quant_gpu():
    torch.manual_seed(0)
    x = (torch.randn(100, 256, device="cuda") * 3).bfloat16()
    q8, q4, s8, s4 = P.eager_pow2_fp8_fp4_quant(x)
    g = x.float().reshape(100, 8, 32)
    amax = g.abs().amax(-1).clamp(min=1e-4)
    ref_s8 = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    torch.testing.assert_close(s8, ref_s8)
    torch.testing.assert_close(s4, amax / 6.0)
    ref8 = (g / ref_s8[..., None]).clamp(-448, 448).reshape(100, 256).to(torch.float8_e4m3fn)
    assert torch.equal(q8.view(torch.uint8), ref8.view(torch.uint8))
    # fp4 codes decoded: within half a step of e2m1's grid of the scaled values
    grid = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], device="cuda")
    codes = q4.view(torch.uint8)
    lo, hi = codes & 15, codes >> 4
    nib = torch.stack([lo, hi], -1).reshape(100, 256).long()
    val = grid[nib & 7] * torch.where(nib >= 8, -1.0, 1.0)
    scaled = (g / (amax / 6.0)[..., None]).clamp(-6, 6).reshape(100, 256)
    assert ((val - scaled).abs() <= 1.0 + 1e-6).all()


@pytest.mark.gpu
def test_rownorm_thread_return_gpu():
    torch.manual_seed(0)
    x = torch.randn(1000, 64, device="cuda")
    n = torch.randint(-2, 80, (1000,), device="cuda", dtype=torch.int32)
    y = torch.full((1000,), -1.0, device="cuda")
    total = torch.zeros(1, device="cuda")
    P.rownorm_thread_return()(x, n, y, total)
    mask = torch.arange(64, device="cuda")[None, :] < n[:, None]
    sq = (x * x * mask).sum(1)
    ref = torch.where(n > 0, sq.sqrt(), torch.zeros(1000, device="cuda"))
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(total[0], sq[n > 0].sum(), atol=1e-2, rtol=1e-5)
