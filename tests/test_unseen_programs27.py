"""A twenty-seventh set of programs in TileLang's idioms (tests/unseen_programs27.py): whole
kernels of medium size as TileLang's users write them -- GEMMs (both operands transposed
with a GELU epilogue under a column swizzle, a symbolic M with annotated swizzles, split-K
by tile atomics, int8 / fp8 / mixed fp8, a float16 accumulator with an explicit schedule,
batched 3-D origins, two dequantizing GEMMs), row kernels (RMSNorm, chunked LayerNorm,
online softmax, top-k, forward and reverse chunked scans, column sums), attention (causal
GQA at an odd length, a paged split-KV decode and its combine) and a vectorized fused add.
CPU: each builds to an sm_90a cubin and what matters is checked in the generated source.
GPU: each matches a torch reference."""

import math

import re

import pytest

import rounds
import unseen_programs27 as P

PROGRAMS = ["gemm_tt_bias_gelu", "gemm_symbolic_m_swizzled", "splitk_atomic_gemm", "int8_gemm_rowcol_scale",
            "fp8_gemm_scaled", "dequant_uint4_gemm", "rmsnorm_symbolic_rows", "layernorm_chunked_ragged",
            "online_softmax_pipelined", "topk_repeated_max", "chunked_cumsum_carry", "flash_gqa_causal_odd",
            "paged_decode_split", "decode_combine", "fused_add_sumsq_vectorized", "gemm_int8_nn",
            "gemm_fp8_tn_mixed", "gemm_fp16_accum_schedule", "batched_gemm_3d_origin", "dequant_local_fragments",
            "reverse_chunk_scan", "column_sum_atomic", "scalar_sized_2d_threads", "gqa_decode_padded_heads",
            "pipelined_start_stop", "gemm_scalar_bind_schedule", "flash_macros_overlap_schedule",
            "sliding_window_attn", "causal_conv_halo", "histogram_two_level", "atomic_row_region",
            "gemm_bias_colsum_transposed_store", "gemm_row_softmax_fullcol", "gemm_a_from_registers",
            "gemm_into_loaded_accumulator"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_kernel_is_listed(P, PROGRAMS)
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated source says ------------------------------------------------------
def test_gemm_forms():
    src = _body("gemm_tt_bias_gelu")
    assert "C_l += A_s^T @ B_s^T" in src  # both operands transposed
    # TileLang's rasterization2DColumn: odd column panels walk the rows from the far end
    assert "by_1_ = cutlass.Int32(cutlass.select_(panel_index - panel_index // 2 * 2 == 1, 3 - panel_offset" in src
    assert "if bx_1_ * 64 + (j + tc_lane6) < 136:\n                        tc_ld7 = bias[" in src  # bias past N not read
    assert "cute.math.tanh(" in src
    src = _body("gemm_symbolic_m_swizzled")
    assert "m: cutlass.Int32" in src and "cute.arch.fmax(C_l[" in src and "cutlass.BFloat16(C_l[" in src
    src = _body("splitk_atomic_gemm")
    # each split runs its own tiles: the last one 16 - 2 * 6 of them
    assert "for ko in cutlass.range(0, cutlass.min(6, 16 - bz * 6)):" in src and "kt = bz * 6 + ko" in src
    assert "tca.atomic_add_view(" in src
    src = _body("int8_gemm_rowcol_scale")
    assert 'tcm.tiled_mma("wgmma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in src
    assert "cutlass.Float16(cutlass.Float32(acc[" in src
    src = _body("fp8_gemm_scaled")
    assert "scale: cutlass.Float32" in src and "C_l[tc_r3 + tc_lane4] * scale" in src
    assert 'tcm.tiled_mma("wgmma", cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32' in src
    src = _body("dequant_uint4_gemm")
    # (byte >> 0 or 4) & 15 of the uint8 (a logical shift), minus 8, times the group's scale
    # (lanes a thread step: the group scale is one value a group of lanes)
    assert re.search(r"q = cutlass\.Int32\(cutlass\.Uint8\(Bq_s\[i \* 32 \+ \(j \+ (tc_lane\d+)\) // 2\]\)\) "
                     r">> \(j \+ \1\) % 2 \* 4 & 15", src)
    assert re.search(r"cutlass\.Float16\(q - 8\) \* S\[bx \* 128 \+ i, \(k \* 64 \+ \(j \+ tc_lane\d+\)\) // 128\]", src)
    src = _body("gemm_int8_nn")
    assert "tcm.gemm_simt(" in src and "cutlass.Int8" in src  # B not K-major: no int8 wgmma
    src = _body("gemm_fp8_tn_mixed")
    assert "tcm.gemm_simt(" in src and "cutlass.Float8E5M2" in src and "cutlass.Float8E4M3FN" in src
    src = _body("gemm_fp16_accum_schedule")
    assert 'tcm.accumulator("wgmma", (1, 1), (128, 128), cutlass.Float16' in src  # a float16 accumulator
    src = _body("batched_gemm_3d_origin")
    # the batch index is the box's outer coordinate, one batch deep
    assert "(tc_j0 * 32, by * 64, bz), 4096)  # TMA load of a 1x64x32 box of A" in src
    src = _body("dequant_local_fragments")
    assert "cutlass.Float16(Bq_l[tc_k7 * 16 + tc_lane9]) * Sc[bx * 64 + i]" in src


def test_row_kernel_forms():
    src = _body("rmsnorm_symbolic_rows")
    assert "M: cutlass.Int32" in src and "if bx * 2 + i5 < M:" in src  # the last block's rows past M
    src = _body("layernorm_chunked_ragged")
    assert 's[tc_c13] = tcr.combine(s[tc_c13], tc_rows12[tc_c13], "sum")' in src  # clear=False adds
    assert "if c * 512 + (i4 + tc_lane5) < 3000:" in src  # the ragged chunk reads zeros
    src = _body("online_softmax_pipelined")
    assert "cutlass.select_(c * 256 + (j + tc_lane2) < 1000, cutlass.Float32(tc_ld3), cutlass.Float32(float(\"-inf\")))" in src
    assert 'm[tc_c10] = tcr.combine(m[tc_c10], tc_rows9[tc_c10], "max")' in src
    src = _body("topk_repeated_max")
    assert re.search(r"cutlass\.select_\(x_f\[tc_lane16\] == tc_red\d+\[0\], \(j \+ tc_lane16\), 64\)", src), src
    # (each row's index stored by its warp's first thread from the round's register)
    assert re.search(r"I\[bx \* 4 \+ i_1_, t\] = tc_red\d+\[tc_c\d+\]", src), src
    assert "tcr.grouped_rows(" not in src
    src = _body("chunked_cumsum_carry")
    assert "Y[bx, c * 256 + j] = x_s[j] + carry[0]" in src and "carry[0] = carry[0] + x_s[255]" in src
    # the carry reads the scanned tile before the next chunk's copy overwrites it
    loop = src.split("for c in cutlass.range(0, 4):", 1)[1]
    assert loop.index("cute.arch.sync_threads()") < loop.index("tcc.copy_async(")
    src = _body("reverse_chunk_scan")
    assert "c = 5 + c_iter * -1" in src and "tc_pos13 = 127 - (tc_lane9 * 4 + tc_c11)" in src
    assert src.rindex("cute.arch.sync_threads()") < src.index("carry[0] = tail[0]")
    src = _body("column_sum_atomic")
    # each column sum added once, by the first thread of the 16 holding its row of the
    # transposed partials, from the round's register (not cs[j] at a run-time j)
    assert "db[j] = cutlass.Float32(0.0)" in src and "if tc_tid % 16 == 0:" in src
    assert re.search(r"tca.atomic_add\(db, \(j_1_,\), tc_red\d+\[tc_c\d+\]\)", src), src


def test_attention_forms():
    src = _body("flash_gqa_causal_odd")
    assert "loop_range = cutlass.min(4, ((bx + 1) * 64 + 64 - 1) // 64)" in src
    assert "(0, by // 2, tc_j0 * 64, bz)" in src  # query head by reads KV head by // 2
    assert "bx * 64 + i >= k * 64 + (j + tc_lane19) and k * 64 + (j + tc_lane19) < 200" in src
    src = _body("paged_decode_split")
    # the page a step loads is read from the block table when its TMA load is issued
    assert "(0, hk, 0, BT[b, start + (p + 1)])" in src
    assert "end = cutlass.min(start + 3, n_pages)" in src and "cutlass.max(end - start, 0)" in src
    assert "accumulate=False" in src  # clear_accum=True
    assert "cute.math.log2(lsum[tc_q28]) + m[tc_q28]" in src
    src = _body("decode_combine")
    assert 'lmax[0] = cutlass.Float32(float("-inf"))' in src
    assert "lmax[0] = cute.arch.fmax(lmax[0], Lse[b, h, s])" in src
    assert "total[0] = total[0] + cute.math.exp2(Lse[b, h, s_1_] - lmax[0])" in src


def test_elementwise_forms():
    src = _body("fused_add_sumsq_vectorized")
    assert "N: cutlass.Int32, n_valid: cutlass.Int32" in src
    # T.serial(tx * 4, N, 512): no iteration for a thread starting past N
    assert "for c_iter in cutlass.range(0, (N - tx * 4 + 512 - 1) // 512):" in src and "c = tx * 4 + c_iter * 512" in src
    assert "if c + v_3_ < n_valid:" in src and "hv = cutlass.Float32(xl[v_3_] + rl[v_3_])" in src
    src = _body("scalar_sized_2d_threads")
    assert "tc_tid = tc_tx + tc_ty * 32" in src and "g = bx * 64 + ty * 32 + tx" in src


def test_third_batch_forms():
    src = _body("gqa_decode_padded_heads")
    # a 16-head box from the group's first head (TMA fills the heads past Hq with zeros) ...
    assert "tct.load(Q_desc, tc_smem + 0, tc_bar0, (0, hid * 4, bid), 2048)" in src
    # ... and only the group's 4 rows written back, as a 4-row box
    assert "if i12 < 4:" in src and "# TMA store of a 1x4x64 box of O" in src
    src = _body("pipelined_start_stop")
    assert "for k in cutlass.range(bz * 4, bz * 4 + 4):" in src
    src = _body("gemm_scalar_bind_schedule")
    assert "base = ko * 32" in src
    src = _body("flash_macros_overlap_schedule")
    # the overlap: step k's first GEMM and step k - 1's second run during the softmax
    assert "for k in cutlass.range(1, 1 + (loop_range - 1)):" in src and "a_regs=True, wait=1)" in src
    src = _body("sliding_window_attn")
    assert "lo = cutlass.max(0, (bx * 64 - 100 + 1) // 64)" in src and "for tc_j0 in cutlass.range(0, hi - lo):" in src
    src = _body("causal_conv_halo")
    assert "(0, bx * 64 - 3, bz), 8576)" in src  # the halo's negative start: TMA reads zeros there
    src = _body("histogram_two_level")
    assert "tca.atomic_add(h_s, X[g] - X[g] // 64 * 64, 1)" in src and "tca.atomic_add(H, (b,), h_s[b])" in src
    src = _body("atomic_row_region")
    assert "tca.atomic_add(Out, (bx % 4, i3), cs[tc_k5])" in src


def test_accumulator_epilogue_forms():
    src = _body("gemm_bias_colsum_transposed_store")
    # the (bn,) bias fragment holds the accumulator's columns, the column sums meet across warps
    assert 'b_f, tc_b_f_j = tcrow.col_fragment("wgmma"' in src
    assert "C_l[tc_r6 + tc_lane7] + b_f[tcrow.col_of(C_l, tc_r6 + tc_lane7)]" in src
    assert "tcrow.reduce_cols(C_l, tc_C_l_ij, cs," in src
    assert "Ct[bx * 64 + (j_1_ + tc_lane9), by * 64 + i_1_] = C_l[tc_r8 + tc_lane9] - cs[(j_1_ + tc_lane9)]" in src
    src = _body("gemm_row_softmax_fullcol")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float32, False, False, (1, 2), 256)' in src
    assert src.count("tcrow.reduce_rows_across(C_l,") == 2  # max and sum meet across the two warpgroups
    src = _body("gemm_a_from_registers")
    assert "a_regs=True" in src and "A_f[tc_r6 + tc_lane7] * cutlass.Float16(2.0)" in src
    src = _body("gemm_into_loaded_accumulator")
    # the accumulator starts from Cin's tile, zeros past M and N, and the GEMM accumulates
    assert "if by * 64 + i1 < 100 and bx * 64 + (i2 + tc_lane4) < 72:" in src
    assert "accumulate=False" not in src


# ---- on a GPU ------------------------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    a = torch.randn(200, 200, device=dev).half()  # (K, M)
    b = torch.randn(136, 200, device=dev).half()  # (N, K)
    bias = torch.randn(136, device=dev).half()
    c = P.gemm_tt_bias_gelu()(a, b, bias)
    x = a.float().t() @ b.float().t() + bias.float()
    _close(c, torch.nn.functional.gelu(x, approximate="tanh"), 2e-2)

    a = torch.randn(300, 256, device=dev).bfloat16()
    b = torch.randn(256, 256, device=dev).bfloat16()
    c = P.gemm_symbolic_m_swizzled()(a, b)
    _close(c, torch.relu(a.float() @ b.float()), 5e-2)

    a = torch.randn(128, 1000, device=dev).half()
    b = torch.randn(1000, 192, device=dev).half()
    c = torch.zeros(128, 192, device=dev)
    P.splitk_atomic_gemm()(a, b, c)
    _close(c, a.float() @ b.float(), 2e-2)

    a = torch.randint(-128, 128, (256, 512), device=dev, dtype=torch.int8)
    b = torch.randint(-128, 128, (128, 512), device=dev, dtype=torch.int8)
    sa = torch.rand(256, device=dev) * 1e-3
    sb = torch.rand(128, device=dev) * 1e-3
    c = P.int8_gemm_rowcol_scale()(a, b, sa, sb)
    acc = (a.cpu().long() @ b.cpu().long().t()).float().to(dev)  # CUDA has no integer matmul
    _close(c, (acc * sa[:, None] * sb[None, :]).half(), 1e-2)

    a = torch.randn(128, 256, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(256, 256, device=dev).to(torch.float8_e4m3fn)
    c = P.fp8_gemm_scaled()(a, b, 0.25)
    _close(c, 0.25 * (a.float() @ b.float().t()), 5e-2)

    a = torch.randn(128, 512, device=dev).half()
    q = torch.randint(0, 16, (256, 512), device=dev, dtype=torch.int32)
    bq = (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)
    s = (torch.rand(256, 4, device=dev) * 0.1).half()
    c = P.dequant_uint4_gemm()(a, bq, s)
    w = (q - 8).float() * s.float().repeat_interleave(128, dim=1)
    _close(c, a.float() @ w.t(), 5e-2)

    a = torch.randint(-128, 128, (128, 256), device=dev, dtype=torch.int8)
    b = torch.randint(-128, 128, (256, 128), device=dev, dtype=torch.int8)
    assert torch.equal(P.gemm_int8_nn()(a, b).long().cpu(), a.cpu().long() @ b.cpu().long())

    a = torch.randn(256, 128, device=dev).to(torch.float8_e5m2)
    b = torch.randn(256, 128, device=dev).to(torch.float8_e4m3fn)
    _close(P.gemm_fp8_tn_mixed()(a, b), a.float().t() @ b.float(), 1e-3)

    a = (torch.randn(256, 512, device=dev) * 0.1).half()
    b = (torch.randn(512, 256, device=dev) * 0.1).half()
    _close(P.gemm_fp16_accum_schedule()(a, b), a.float() @ b.float(), 3e-2)

    a = torch.randn(3, 96, 128, device=dev).bfloat16()
    b = torch.randn(3, 80, 128, device=dev).bfloat16()
    _close(P.batched_gemm_3d_origin()(a, b), a.float() @ b.float().transpose(1, 2), 1e-2)

    a = torch.randn(128, 256, device=dev).half()
    bq = torch.randint(-128, 128, (128, 256), device=dev, dtype=torch.int8)
    sc = (torch.rand(128, device=dev) * 0.02).half()
    c = P.dequant_local_fragments()(a, bq, sc)
    w = (bq.float().half() * sc[:, None]).float()
    _close(c, a.float() @ w.t(), 3e-2)


@pytest.mark.gpu
def test_row_kernels_on_gpu():
    import torch
    torch.manual_seed(1)
    dev = "cuda"
    x = torch.randn(77, 1024, device=dev).bfloat16()
    w = torch.randn(1024, device=dev).bfloat16()
    y = P.rmsnorm_symbolic_rows()(x, w)
    xf = x.float()
    _close(y, xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float(), 2e-2)

    x = torch.randn(64, 3000, device=dev).half() + 0.5
    g = torch.randn(3000, device=dev)
    bb = torch.randn(3000, device=dev)
    y = P.layernorm_chunked_ragged()(x, g, bb)
    _close(y, torch.nn.functional.layer_norm(x.float(), (3000,), g, bb, 1e-5), 2e-2)

    x = (torch.randn(48, 1000, device=dev) * 3).half()
    _close(P.online_softmax_pipelined()(x), torch.softmax(x.float(), 1), 2e-3)

    x = torch.randn(102, 64, device=dev)
    v, i = P.topk_repeated_max()(x)
    tv, ti = torch.topk(x, 5, dim=1)
    assert torch.equal(v.cpu(), tv.cpu()) and torch.equal(i.long().cpu(), ti.cpu())

    x = torch.randn(8, 1000, device=dev)
    _close(P.chunked_cumsum_carry()(x), torch.cumsum(x, 1), 1e-3)
    x = torch.randn(6, 700, device=dev)
    _close(P.reverse_chunk_scan()(x), torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]), 1e-3)

    dy = torch.randn(1000, 96, device=dev).bfloat16()
    _close(P.column_sum_atomic()(dy), dy.float().sum(0), 1e-3)


@pytest.mark.gpu
def test_attention_on_gpu():
    import torch
    torch.manual_seed(2)
    dev = "cuda"
    B, S, Hq, Hkv, D = 2, 200, 4, 2, 64
    q = torch.randn(B, S, Hq, D, device=dev).half()
    k = torch.randn(B, S, Hkv, D, device=dev).half()
    v = torch.randn(B, S, Hkv, D, device=dev).half()
    o = P.flash_gqa_causal_odd()(q, k, v)
    kk = k.float().repeat_interleave(2, dim=2)
    vv = v.float().repeat_interleave(2, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kk) / math.sqrt(D)
    s = s.masked_fill(torch.ones(S, S, device=dev, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), vv)
    _close(o, ref, 2e-2)

    # paged decode, split over KV, then the combine
    batch, Hq, Hkv, D, page, pages_max, n_phys, splits = 3, 8, 2, 64, 32, 8, 24, 3
    q = torch.randn(batch, Hq, D, device=dev).half()
    kc = torch.randn(n_phys, page, Hkv, D, device=dev).half()
    vc = torch.randn(n_phys, page, Hkv, D, device=dev).half()
    lens = torch.tensor([200, 33, 90], device=dev, dtype=torch.int32)  # 7, 2 and 3 pages
    bt = torch.randperm(n_phys, device=dev)[:batch * pages_max].reshape(batch, pages_max).int()
    op, lse = P.paged_decode_split()(q, kc, vc, bt, lens)
    o = P.decode_combine()(op, lse)
    for bi in range(batch):
        L = int(lens[bi])
        pages = bt[bi, :(L + page - 1) // page].long()
        kb = kc[pages].reshape(-1, Hkv, D)[:L].float().repeat_interleave(4, dim=1)
        vb = vc[pages].reshape(-1, Hkv, D)[:L].float().repeat_interleave(4, dim=1)
        sc = torch.einsum("hd,khd->hk", q[bi].float(), kb) / math.sqrt(D)
        ref = torch.einsum("hk,khd->hd", torch.softmax(sc, -1), vb)
        _close(o[bi], ref, 2e-2)
    # sequence 1 has 2 pages: splits 1 and 2 hold none
    assert torch.isinf(lse[1, :, 1:]).all() and (op[1, :, 1:] == 0).all()


@pytest.mark.gpu
def test_elementwise_on_gpu():
    import torch
    torch.manual_seed(3)
    dev = "cuda"
    x = torch.randn(5, 1000, device=dev).half()
    r = torch.randn(5, 1000, device=dev).half()
    h, ss = P.fused_add_sumsq_vectorized()(x, r, 700)
    assert torch.equal(h.cpu(), (x + r).cpu())
    _close(ss, (x + r).float()[:, :700].pow(2).sum(1), 1e-3)

    x = torch.randn(300, device=dev)
    y = P.scalar_sized_2d_threads()(x, 250)
    want = x * 2 + torch.arange(300, device=dev).float()
    _close(y[:250], want[:250], 1e-6)


def _attention_ref(q, k, v, mask):
    """softmax(q k^T / sqrt(d) + mask) v over (B, H, S, D) float tensors."""
    import torch
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v


@pytest.mark.gpu
def test_third_batch_on_gpu():
    import torch
    torch.manual_seed(4)
    dev = "cuda"
    q = torch.randn(2, 8, 64, device=dev).half()
    k = torch.randn(2, 300, 2, 64, device=dev).half()
    v = torch.randn(2, 300, 2, 64, device=dev).half()
    o = P.gqa_decode_padded_heads()(q, k, v)
    kk = k.float().repeat_interleave(4, dim=2).permute(0, 2, 1, 3)  # (B, H, S, D)
    vv = v.float().repeat_interleave(4, dim=2).permute(0, 2, 1, 3)
    ref = _attention_ref(q.float()[:, :, None, :], kk, vv, torch.ones(1, 300, device=dev, dtype=torch.bool))
    _close(o, ref[:, :, 0, :], 2e-2)

    a = torch.randn(128, 512, device=dev).half()
    b = torch.randn(512, 128, device=dev).half()
    c = P.pipelined_start_stop()(a, b)
    _close(c, torch.stack([a[:, :256].float() @ b[:256].float(), a[:, 256:].float() @ b[256:].float()]), 2e-2)
    a = torch.randn(128, 256, device=dev).half()
    b = torch.randn(256, 128, device=dev).half()
    _close(P.gemm_scalar_bind_schedule()(a, b), a.float() @ b.float(), 2e-2)

    q, k, v = (torch.randn(1, 2, 200, 64, device=dev).bfloat16() for _ in range(3))
    causal = torch.ones(200, 200, device=dev, dtype=torch.bool).tril()
    _close(P.flash_macros_overlap_schedule()(q, k, v), _attention_ref(q.float(), k.float(), v.float(), causal), 3e-2)

    q, k, v = (torch.randn(1, 320, 2, 64, device=dev).half() for _ in range(3))
    i = torch.arange(320, device=dev)
    window = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 100)
    ref = _attention_ref(*(t.float().transpose(1, 2) for t in (q, k, v)), window).transpose(1, 2)
    _close(P.sliding_window_attn()(q, k, v), ref, 2e-2)

    x = torch.randn(2, 300, 64, device=dev).half()
    w = torch.randn(4, 64, device=dev)
    xp = torch.nn.functional.pad(x.float(), (0, 0, 3, 0))
    ref = sum(w[j] * xp[:, j:j + 300, :] for j in range(4))
    _close(P.causal_conv_halo()(x, w), ref, 1e-2)

    x = torch.randint(-1000, 1000, (10000,), device=dev, dtype=torch.int32)
    h = torch.zeros(64, device=dev, dtype=torch.int32)
    P.histogram_two_level()(x, h)
    assert torch.equal(h.long().cpu(), torch.bincount((x.long() % 64).cpu(), minlength=64))

    x = torch.randn(64, 256, device=dev)
    out = torch.zeros(4, 256, device=dev)
    P.atomic_row_region()(x, out)
    _close(out, x.reshape(4, 16, 256).sum(1), 1e-4)


@pytest.mark.gpu
def test_accumulator_epilogues_on_gpu():
    import torch
    torch.manual_seed(5)
    dev = "cuda"
    a = torch.randn(128, 128, device=dev).half()
    b = torch.randn(128, 192, device=dev).half()
    bias = torch.randn(192, device=dev)
    ct = P.gemm_bias_colsum_transposed_store()(a, b, bias)
    c = a.float() @ b.float() + bias
    c = c - c.reshape(2, 64, 192).mean(1, keepdim=True).repeat_interleave(64, dim=1).reshape(128, 192)
    _close(ct, c.t(), 2e-2)

    a = (torch.randn(128, 128, device=dev) * 0.3).half()
    b = (torch.randn(256, 128, device=dev) * 0.3).half()
    _close(P.gemm_row_softmax_fullcol()(a, b), torch.softmax(a.float() @ b.float().t(), 1), 2e-3)

    a = torch.randn(128, 256, device=dev).half()
    b = torch.randn(256, 128, device=dev).half()
    _close(P.gemm_a_from_registers()(a, b), (2 * a.float()) @ b.float(), 2e-2)

    a = torch.randn(100, 128, device=dev).half()
    b = torch.randn(128, 72, device=dev).half()
    cin = torch.randn(100, 72, device=dev)
    _close(P.gemm_into_loaded_accumulator()(a, b, cin), cin + a.float() @ b.float(), 2e-2)
