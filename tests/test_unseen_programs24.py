"""A twenty-fourth set of programs in TileLang's idioms (tests/unseen_programs24.py): sparse
(CSR / COO / ELL SpMV, CSR SpMM, SDDMM, a block-sparse GEMM by index list), sort / scan
(bitonic top-k, argmin with ties, segmented scan, run-length encoding, compaction, masked
scatter, a radix split, a merge) and stencil / window workloads (sliding max, halo
convolutions, heat steps on a ping-pong buffer, bilinear resize).  CPU: each builds to an
sm_90a and an sm_80 cubin, and what each means is checked in the generated source.  GPU: each
matches a torch reference."""

import re

import pytest

import tilecute

import rounds
import unseen_programs24 as P

PROGRAMS = ["csr_spmv_warp_per_row", "csr_spmv_group_fragment", "coo_spmv_atomic", "ell_spmv_colmajor",
            "csr_spmm_shared_b", "sddmm_tile_skip", "bsr_weight_gemm_index_list", "bitonic_topk_rows",
            "argmin_first_index_ties", "segmented_scan_head_flags", "rle_sorted_counts", "compact_blocks_ticket",
            "masked_scatter_carry", "split_by_bit_stable", "coo_rows_to_csr_rowptr", "sliding_window_max_causal",
            "depthwise_conv1d_copy_halo", "separable_blur_5tap", "heat1d_pingpong_steps",
            "bilinear_resize_half_pixel", "gather_rows_skip_oob", "warp_ballot_compaction",
            "merge_sorted_binary_search", "csr_row_softmax_warp", "radix_sort_block_bits", "coo_to_csc_cursor",
            "drawdown_cummax", "warp_segmented_scan_shfl", "warp_argmax_ballot_ffs", "stencil5_steps_two_buffers",
            "segment_scale_shared_cursor", "csr_row_sums_shared_bounds"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(PROGRAMS, rounds.tir_of(P), "sm_80")


# ---- refusals ----------------------------------------------------------------------------
def test_window_of_7_rows_is_refused_as_tilelang_refuses_it():
    # TileLang 0.1.15 finds no fragment layout for a (128, 7) T.reduce_max over 128 threads
    # ("no available layout found"); tilecute names the form, the buffer and the line
    with pytest.raises(Exception) as err:
        P.sliding_window_max_causal(W=7).get_kernel_source()
    msg = str(err.value)
    assert "T.reduce_max" in msg and "'win'" in msg and "7 elements" in msg
    assert "unseen_programs24.py" in msg


# ---- what the generated source says ------------------------------------------------------
def test_sparse_matrix_vector_forms():
    src = _body("csr_spmv_warp_per_row")
    # lane-strided walk from the run-time row bounds, then the warp's sum
    assert "k = start[0] + lane + k_iter * 32" in src
    assert "(end[0] - (start[0] + lane) + 32 - 1) // 32" in src
    assert 'warp_allreduce(acc[0], "sum", 32)' in src
    assert src.index("warp_allreduce") < src.index("if row < 200 and lane == 0")
    src = _body("csr_spmv_group_fragment")
    assert "(e - s + 8 - 1) // 8" in src and "idx = s + k * 8 + g" in src
    assert '"sum", 8)' in src  # the 8 threads of a row's group
    src = _body("coo_spmv_atomic")
    assert "tca.atomic_add(Y, (Row[k],), Val[k] * X[Col[k]])" in src
    src = _body("ell_spmv_colmajor")
    assert "c = EllCol[w, row]" in src and "if c >= 0:" in src and "EllVal[w, row] *" in src


def test_sparse_matrix_matrix_forms():
    src = _body("csr_spmm_shared_b")
    assert "cutlass.range(RowPtr[row], " in src
    assert "b_s[tc_ld" in src and " * 64 + (j + " in src  # B panel row from the column index
    assert "bx * 64 + (i2 + tc_lane" in src and "< 96" in src  # ragged N on the store
    src = _body("sddmm_tile_skip")
    skip = src.index("if TileNnz[by, bx] > 0:")
    assert src.index("tcm.gemm(") > skip
    assert src.index("S.iterator + cute.assume((by * 64 + i) * 128 + bx * 64 + j") > src.index("tcm.gemm(")  # S after the skip
    src = _body("bsr_weight_gemm_index_list")
    assert src.count("cutlass.range(0, KCnt[bx])") == 2  # producer and consumer walk the list
    assert "KIdx[bx, tc_j0]" in src and "(tc_origin0 * 64, by * 64)" in src and "(tc_origin0 * 64, bx * 64)" in src


def test_bitonic_compare_exchange_is_fenced_by_barriers():
    src = _body("bitonic_topk_rows")
    loop = src.split("for t in cutlass.range(0, s + 1 - 0):", 1)[1].split("cute.arch.sync_threads()\n    tc_f", 1)[0]
    assert loop.count("cute.arch.sync_threads()") == 2
    assert "stride = 1 << s - t" in loop and "down = i_1_ >> s + 1 & 1 == 0" in loop
    assert "ka == kb and ia < ib" in loop  # ties keep the smaller index first
    # 1000 elements padded to 1024: the pairs spread over 4 steps of the 128 threads
    src = _body("bitonic_topk_rows", N=1000)
    assert "for s in cutlass.range(0, 10)" in src and "range_constexpr(4)" in src


def test_argmin_takes_the_first_index_of_the_minimum():
    src = _body("argmin_first_index_ties")
    assert src.count('"min", 32)') == 2  # the chunk minimum, then the first column holding it
    # (the chunk minimum read at the thread's row: the reduction round's own register)
    assert re.search(r"== tc_red\d+\[tc_k\d+\] and c \* 128 \+ \(j_1_ \+ tc_lane22\) < 300", src), src
    assert "if tcr.pick(cmin, (i_2_ + tc_lane33), 8) < best[tc_lane33]:" in src  # strictly smaller: earlier chunk wins


def test_scans_read_and_write_the_right_halves():
    src = _body("segmented_scan_head_flags")
    assert "v[src * 256 + i_1_ - d]" in src and "f[(1 - src) * 256 + i_1_] = f[src * 256 + i_1_] | f[src * 256 + i_1_ - d]" in src
    assert "Y[bx, i_2_] = v[0 * 256 + i_2_]" in src  # 8 steps end in half 0
    src = _body("rle_sorted_counts")
    loop = src.split("for t in cutlass.range(0, (n + 128 - 1) // 128):", 1)[1]
    # the next tile's heads are written only after every thread has read the carry
    assert loop.lstrip().startswith("cute.arch.sync_threads()")
    assert "carry[0] = carry[0] + head[127]" in loop
    assert "tca.atomic_add(Counts, (run,), 1)" in loop and "tca.atomic_add(Sums, (run,), Wt[g_1_])" in loop
    src = _body("masked_scatter_carry")
    assert "Src[carry[0] + tc_ld9 - 1]" in src and "carry[0] = carry[0] + c[127]" in src
    src = _body("split_by_bit_stable")
    assert "Out[z[1023] + i_1_ - z[i_1_]] = K[i_1_]" in src and "Out[z[i_1_] - 1] = K[i_1_]" in src
    src = _body("coo_rows_to_csr_rowptr")
    assert "tca.atomic_add(cnt, Row[k], 1)" in src and "cnt[r - 1]" in src


def test_compaction_reserves_slots_between_barriers():
    src = _body("compact_blocks_ticket")
    at = src.index('tca.atomic_fetch(Count, (0,), keep[255], "add")')
    assert src[:at].rstrip().endswith("if tx == 0:\n        base[0] =")
    assert src[:at].rsplit("tc_scan", 1)[1].count("cute.arch.sync_threads()") == 1  # scan landed
    assert "cute.arch.sync_threads()" in src[at:].split("Out[", 1)[0]  # base visible to all
    src = _body("warp_ballot_compaction")
    assert "vote_ballot_sync(keep)" in src and "cute.arch.popc(below)" in src
    assert "(cutlass.Uint64(1) << cutlass.Uint64(lane)) - cutlass.Uint64(1)" in src
    assert "shuffle_sync(base[0], offset=0, mask_and_clamp=31)" in src


def test_halo_copies_read_zero_outside():
    src = _body("depthwise_conv1d_copy_halo")
    assert "bx * 128 - 3 + i1 >= 0 and bx * 128 - 3 + i1 < 500" in src
    src = _body("separable_blur_5tap")
    # a box starting 2 floats off 16 bytes is no TMA load (on an H100 one stopped the kernel
    # with an illegal instruction): cp.async pieces, each element guarded (zero outside)
    assert "tct.load" not in src and "tcc.copy_async" in src
    assert "X[by * 16 - 2 + i1, bx * 32 - 2 + (i2 + tc_lane3)]" in src
    src = _body("heat1d_pingpong_steps")
    assert "(bx * 128 - 4,)" in src and "buf[(1 - src) * 136 + i]" in src
    assert "V[bx * 128 + i1] = buf[0 * 136 + 4 + i1]" in src
    src = _body("sliding_window_max_causal")
    assert "g = bx * 128 + i - 15" in src and 'float("-inf")' in src and '"max", 4)' in src


def test_gathers_and_merges():
    src = _body("bilinear_resize_half_pixel")
    assert "cute.math.floor(fy)" in src and "cutlass.min(y0 + 1, 19)" in src and "cutlass.min(x0 + 1, 29)" in src
    src = _body("gather_rows_skip_oob")
    assert "if r >= cutlass.Int64(0) and r < cutlass.Int64(50):" in src and "row[i2] = cutlass.Float16(0.0)" in src
    src = _body("merge_sorted_binary_search")
    assert src.count("while lo[0] < hi[0]:") == 2 and "<= key[0]" in src and "< key[0]" in src
    src = _body("csr_row_softmax_warp")
    assert 'warp_allreduce(mx[0], "max", 32)' in src and 'warp_allreduce(sm[0], "sum", 32)' in src


def test_radix_passes_and_cursors():
    src = _body("radix_sort_block_bits")
    loop = src.split("for b in cutlass.range(0, 8):", 1)[1]
    # each pass: flags written, scanned, scattered into the other half, fenced at the top
    assert loop.lstrip().startswith("cute.arch.sync_threads()")
    assert loop.count("cute.arch.sync_threads()") == 4  # top, before the scan, after it, after the loop
    assert "keys[(1 - b % 2) * 512 + z[511] + i_2_ - z[i_2_]] = kv" in loop
    assert "Out[i_3_] = keys[0 * 512 + i_3_]" in src  # 8 passes end in half 0
    src = _body("coo_to_csc_cursor")
    assert 'slot = tca.atomic_fetch(cursor, Col[k_1_], 1, "add")' in src
    second = src.split("for t_1_ in cutlass.range(", 1)[1]
    assert second.split("\n", 1)[1].lstrip().startswith("cute.arch.sync_threads()")  # cursors set


def test_cummax_and_warp_scans():
    src = _body("drawdown_cummax")
    assert src.count('tcs.warp_inclusive_scan(') == 2 and src.count('"max"') == 2
    assert "tc_pos10 = 255 - (tc_lane6 * 8 + tc_c8)" in src  # the reverse scan
    src = _body("warp_segmented_scan_shfl")
    assert "shuffle_sync_up(v[0], offset=1 << s, mask_and_clamp=0)" in src
    assert "shuffle_sync_up(f[0], offset=1 << s, mask_and_clamp=0)" in src
    assert "range_constexpr(0, 5)" in src
    src = _body("warp_argmax_ballot_ffs")
    assert "tcmath.ffs(" in src and "vote_ballot_sync(best[0] == m)" in src
    assert "shuffle_sync(bidx[0], offset=winner, mask_and_clamp=31)" in src
    src = _body("stencil5_steps_two_buffers")
    # each sweep starts after the previous one has landed
    assert src.count("if t % 2 == 0:\n            cute.arch.sync_threads()") == 1
    assert src.count("else:\n            cute.arch.sync_threads()") == 1
    assert "Y[by * 16 + i5, bx * 32 + (i6 + tc_lane14)] = b[(3 + i5) * 38 + 3 + (i6 + tc_lane14)]" in src


def test_while_condition_on_a_shared_cursor_is_fenced_at_the_body_end():
    # thread 0 advances head[0] at the end of the body; every thread tests it again before
    # the body's first barrier: without a barrier at the end the test raced the write (and
    # a thread that read the old value waited at a barrier the others had left)
    src = _body("segment_scale_shared_cursor")
    body = src.split("while head[0] < end:", 1)[1]
    advance = body.index("head[0] = head[0] + 128")
    assert body[advance:].split("\n", 2)[1].strip() == "cute.arch.sync_threads()"


def test_loop_range_read_from_shared_memory_follows_a_barrier():
    # thread 0 writes bounds[]; every thread reads them in the loop's range, once, before
    # the loop: the barrier goes between (there was none: the range raced the write)
    src = _body("csr_row_sums_shared_bounds")
    before = src.split("for k in cutlass.range(0, (bounds[1] - bounds[0] + 128 - 1) // 128):", 1)[0]
    assert before.rstrip().endswith("bounds[1] = RowPtr[row + 1]\n    cute.arch.sync_threads()")


# ---- T.alloc_var without init inside a loop (TileLang: zeroed once, at the kernel's top) ----
import tilecute.language as T  # noqa: E402


@tilecute.jit(out_idx=[1])
def _row_totals_carried(R=8, C=16, init=None, threads=32):
    """Y[r] = the sum of rows 0..r when the var has no init (TileLang declares it at the
    kernel's top, zeroed once; the loop body stores nothing), the sum of row r with init=0."""

    @T.prim_func
    def k(X: T.Tensor((R, C), "float32"), Y: T.Tensor((R,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            for r in T.serial(R):
                if init is None:
                    s = T.alloc_var("float32")
                else:
                    s = T.alloc_var("float32", init=init)
                for c in T.serial(C):
                    s += X[r, c]
                if tx == 0:
                    Y[r] = s
    return k


@tilecute.jit(out_idx=[1])
def _parallel_var_read_first(N=256, threads=128):
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            for i in T.Parallel(N):
                d = T.alloc_var("float32")
                d += X[i]
                Y[i] = d
    return k


@tilecute.jit(out_idx=[1])
def _parallel_var_written_first(N=256, threads=128):
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            for i in T.Parallel(N):
                d = T.alloc_var("float32")
                if X[i] > 0:
                    d = X[i]
                else:
                    d = -X[i]
                Y[i] = d * 2.0
    return k


@tilecute.jit(out_idx=[1])
def _parallel_var_written_in_a_loop(N=256, threads=128):
    @T.prim_func
    def k(X: T.Tensor((N, 4), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            for i in T.Parallel(N):
                d = T.alloc_var("float32")
                for q in T.serial(4):
                    d = X[i, q]
                Y[i] = d
    return k


_kernel_text = rounds.kernel_body


def test_alloc_var_without_init_in_a_loop_is_zeroed_once():
    src = _kernel_text(_row_totals_carried())
    loop = src.index("for r in cutlass.range(0, 8):")
    assert src.index("s[0] = cutlass.Float32(0.0)") < loop  # before the loop, once
    assert "s[0] = cutlass.Float32(0.0)" not in src[loop:]
    src = _kernel_text(_row_totals_carried(init=0.0))
    loop = src.index("for r in cutlass.range(0, 8):")
    assert "s[0] = cutlass.Float32(0.0)" in src[loop:]  # init: a store each iteration
    assert _row_totals_carried().ensure_cubin()


def test_parallel_var_read_before_written_is_refused():
    with pytest.raises(Exception) as err:
        _parallel_var_read_first().get_kernel_source()
    msg = str(err.value)
    assert "'d'" in msg and "without init in a T.Parallel body is read before it is written" in msg
    assert "test_unseen_programs24.py" in msg
    src = _kernel_text(_parallel_var_written_first())  # written on every path first: fine
    assert "* cutlass.Float32(2.0)" in src
    src = _kernel_text(_parallel_var_written_in_a_loop())  # written by a loop that runs
    assert "d[0] = X[i, q]" in src


# ---- GPU ---------------------------------------------------------------------------------
def _close(got, want, tol):
    import torch
    torch.testing.assert_close(got.double(), want.double(), atol=tol, rtol=tol)


def _csr(M, N, density, seed, long_row=None):
    """A random CSR matrix (float32 values) with some empty rows and one long row."""
    import torch
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(M, N, generator=g) * (torch.rand(M, N, generator=g) < density)
    dense[3] = 0.0
    if long_row is not None:
        dense[long_row] = torch.randn(N, generator=g)
    sp = dense.to_sparse_csr()
    return (dense.cuda(), sp.crow_indices().int().cuda(), sp.col_indices().int().cuda(),
            sp.values().float().cuda())


@pytest.mark.gpu
def test_sparse_matrix_vector_on_gpu():
    import torch
    dense, rp, col, val = _csr(200, 300, 0.08, 1, long_row=7)
    x = torch.randn(300, device="cuda")
    _close(P.csr_spmv_warp_per_row()(rp, col, val, x), dense @ x, 1e-4)
    dense, rp, col, val = _csr(100, 64, 0.2, 2, long_row=99)
    x = torch.randn(64, device="cuda")
    _close(P.csr_spmv_group_fragment()(rp, col, val, x), dense @ x, 1e-4)
    # COO, shuffled
    dense = torch.randn(90, 70, device="cuda") * (torch.rand(90, 70, device="cuda") < 0.1)
    r, c = dense.nonzero(as_tuple=True)
    perm = torch.randperm(r.numel(), device="cuda")
    r, c = r[perm], c[perm]
    x = torch.randn(70, device="cuda")
    y = torch.zeros(90, device="cuda")
    P.coo_spmv_atomic()(r.int(), c.int(), dense[r, c].contiguous(), x, y)
    _close(y, dense @ x, 1e-4)
    # ELL, column-major, -1 padding
    M, N, W = 150, 80, 6
    ell_col = torch.randint(0, N, (W, M), device="cuda", dtype=torch.int32)
    ell_col[torch.rand(W, M, device="cuda") < 0.3] = -1
    ell_val = torch.randn(W, M, device="cuda")
    x = torch.randn(N, device="cuda")
    want = (torch.where(ell_col >= 0, ell_val * x[ell_col.clamp(min=0).long()], 0.0)).sum(0)
    _close(P.ell_spmv_colmajor()(ell_col, ell_val, x), want, 1e-4)


@pytest.mark.gpu
def test_sparse_matrix_matrix_on_gpu():
    import torch
    dense, rp, col, val = _csr(50, 64, 0.15, 3, long_row=10)
    b = torch.randn(64, 96, device="cuda")
    _close(P.csr_spmm_shared_b()(rp, col, val, b), dense @ b, 1e-4)
    # SDDMM with two empty tiles
    a = torch.randn(192, 128, device="cuda").half()
    bm = torch.randn(128, 128, device="cuda").half()
    s = (torch.rand(192, 128, device="cuda") < 0.2).float()
    s[0:64, 64:128] = 0
    s[128:192, 0:64] = 0
    tile_nnz = s.reshape(3, 64, 2, 64).sum((1, 3)).int().contiguous()
    c = P.sddmm_tile_skip()(a, bm, s, tile_nnz)
    _close(c, s * (a.float() @ bm.float().T), 2e-2)
    # block-sparse weight: each column block lists its K blocks (unsorted, varying counts, one empty)
    A = torch.randn(128, 256, device="cuda").half()
    Wd = torch.randn(192, 256, device="cuda").half()
    lists = [[3, 0], [1, 2, 0, 3], []]
    kidx = torch.zeros(3, 4, dtype=torch.int32)
    mask = torch.zeros(192, 256)
    for j, blocks in enumerate(lists):
        for t, kb in enumerate(blocks):
            kidx[j, t] = kb
            mask[j * 64:(j + 1) * 64, kb * 64:(kb + 1) * 64] = 1
    kcnt = torch.tensor([len(x) for x in lists], dtype=torch.int32)
    c = P.bsr_weight_gemm_index_list()(A, Wd, kidx.cuda(), kcnt.cuda())
    _close(c, A.float() @ (Wd.float() * mask.cuda()).T, 5e-2)


@pytest.mark.gpu
def test_sort_topk_argmin_merge_on_gpu():
    import torch
    torch.manual_seed(4)
    for N in (200, 1000):
        x = torch.randn(6, N, device="cuda")
        vals, idx = P.bitonic_topk_rows(N=N)(x)
        want_v, want_i = torch.topk(x, 10, dim=1)
        assert torch.equal(vals, want_v) and torch.equal(idx.long(), want_i)
    x = torch.randint(-3, 4, (40, 300), device="cuda", dtype=torch.int32)
    x[5, 200:] = -9  # the minimum only in the last chunk
    x[6, 0] = -9
    x[6, 290] = -9  # a tie: the first wins
    v, i = P.argmin_first_index_ties()(x)
    assert torch.equal(v, x.min(1).values)
    first = (x == x.min(1, keepdim=True).values).int().argmax(1)
    assert torch.equal(i.long(), first) and int(i[5]) == 200 and int(i[6]) == 0
    keys = torch.randint(0, 1 << 10, (1000,), device="cuda", dtype=torch.int32)
    out = P.split_by_bit_stable()(keys)
    zero = ((keys >> 3) & 1) == 0
    assert torch.equal(out, torch.cat([keys[zero], keys[~zero]]))
    a = torch.randint(0, 50, (300,), device="cuda").float().sort().values
    b = torch.randint(0, 50, (250,), device="cuda").float().sort().values
    assert torch.equal(P.merge_sorted_binary_search()(a, b), torch.cat([a, b]).sort().values)


@pytest.mark.gpu
def test_scans_rle_masked_scatter_on_gpu():
    import torch
    torch.manual_seed(5)
    for N in (256, 512):
        x = torch.randn(5, N, device="cuda")
        flags = (torch.rand(5, N, device="cuda") < 0.1).int()
        seg = torch.cumsum(flags.clone().index_fill_(1, torch.tensor([0], device="cuda"), 1), 1)
        want = torch.zeros_like(x, dtype=torch.float64)
        for r in range(5):
            for sid in seg[r].unique():
                m = seg[r] == sid
                want[r, m] = torch.cumsum(x[r, m].double(), 0)
        _close(P.segmented_scan_head_flags(N=N)(x, flags), want, 1e-4)
    xs = torch.randint(0, 40, (1000,), device="cuda", dtype=torch.int32).sort().values
    wt = torch.randn(1000, device="cuda")
    values = torch.zeros(1000, device="cuda", dtype=torch.int32)
    counts = torch.zeros(1000, device="cuda", dtype=torch.int32)
    sums = torch.zeros(1000, device="cuda")
    nruns = torch.zeros(1, device="cuda", dtype=torch.int32)
    P.rle_sorted_counts()(xs, wt, values, counts, sums, nruns)
    u, cnt = torch.unique_consecutive(xs, return_counts=True)
    k = u.numel()
    assert int(nruns) == k and torch.equal(values[:k], u) and torch.equal(counts[:k], cnt.int())
    _close(sums[:k], torch.zeros(k, device="cuda").index_add_(0, torch.repeat_interleave(
        torch.arange(k, device="cuda"), cnt), wt), 1e-4)
    inp = torch.randn(777, device="cuda")
    mask = torch.rand(777, device="cuda") < 0.4
    src = torch.randn(int(mask.sum()) + 5, device="cuda")
    out = P.masked_scatter_carry()(inp, mask.to(torch.int8), src)
    assert torch.equal(out, inp.masked_scatter(mask, src))
    rows = torch.randint(0, 200, (3000,), device="cuda", dtype=torch.int32)
    rows[rows == 17] = 18  # an empty row
    want = torch.zeros(201, device="cuda", dtype=torch.int64)
    want[1:] = torch.cumsum(torch.bincount(rows.long(), minlength=200), 0)
    assert torch.equal(P.coo_rows_to_csr_rowptr()(rows).long(), want)


@pytest.mark.gpu
def test_compactions_on_gpu():
    import torch
    torch.manual_seed(6)
    x = torch.randn(5000, device="cuda")
    out = torch.zeros_like(x)
    pos = torch.zeros(5000, device="cuda", dtype=torch.int32)
    count = torch.zeros(1, device="cuda", dtype=torch.int32)
    P.compact_blocks_ticket()(x, out, pos, count)
    keep = x > 0.25
    n = int(count)
    assert n == int(keep.sum())
    order = pos[:n].long().sort()
    assert torch.equal(order.values, keep.nonzero().squeeze(1))
    assert torch.equal(out[:n][order.indices], x[keep])
    out = torch.zeros(3001, device="cuda")
    count = torch.zeros(1, device="cuda", dtype=torch.int32)
    x = torch.randn(3001, device="cuda")
    P.warp_ballot_compaction()(x, out, count)
    n = int(count)
    assert n == int((x > 0).sum())
    assert torch.equal(out[:n].sort().values, x[x > 0].sort().values)


@pytest.mark.gpu
def test_stencils_and_windows_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(7)
    x = torch.randn(1000, device="cuda")
    want = F.max_pool1d(F.pad(x[None, None], (15, 0), value=float("-inf")), 16, 1)[0, 0]
    assert torch.equal(P.sliding_window_max_causal()(x), want)
    for B, threads in ((128, 128), (256, 64)):
        x = torch.randn(4, 500, device="cuda")
        w = torch.randn(4, 7, device="cuda")
        want = F.conv1d(x[None].double(), w[:, None].double(), padding=3, groups=4)[0]
        _close(P.depthwise_conv1d_copy_halo(B=B, threads=threads)(x, w), want, 1e-4)
    k1 = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], dtype=torch.float64, device="cuda") / 16
    for H, W in ((70, 100), (10, 12)):  # (10, 12): the halo box larger than the image
        x = torch.randn(H, W, device="cuda")
        want = F.conv2d(x[None, None].double(), (k1[:, None] * k1[None, :])[None, None], padding=2)[0, 0]
        _close(P.separable_blur_5tap(H=H, W=W)(x), want, 1e-5)
    for B in (128, 256):
        u = torch.randn(900, device="cuda")
        ref = u.double()
        for _ in range(4):
            p = F.pad(ref, (1, 1))
            ref = ref + 0.2 * (p[:-2] - 2 * ref + p[2:])
        _close(P.heat1d_pingpong_steps(B=B)(u), ref, 1e-5)
    x = torch.randn(3, 20, 30, device="cuda")
    want = F.interpolate(x[None], size=(45, 17), mode="bilinear", align_corners=False)[0]
    _close(P.bilinear_resize_half_pixel()(x), want, 1e-5)


@pytest.mark.gpu
def test_gather_and_row_softmax_on_gpu():
    import torch
    torch.manual_seed(8)
    src = torch.randn(50, 96, device="cuda").half()
    idx = torch.randint(-10, 60, (40,), device="cuda")
    want = torch.where(((idx >= 0) & (idx < 50))[:, None], src[idx.clamp(0, 49)], 0.0)
    assert torch.equal(P.gather_rows_skip_oob()(src, idx), want)
    dense, rp, col, val = _csr(100, 80, 0.1, 9, long_row=42)
    out = P.csr_row_softmax_warp()(rp, val)
    for r in (0, 3, 42, 99):
        a, b = int(rp[r]), int(rp[r + 1])
        if b > a:
            _close(out[a:b], torch.softmax(val[a:b].double(), 0), 1e-5)
    rows = torch.repeat_interleave(torch.arange(100, device="cuda"), (rp[1:] - rp[:-1]).long())
    sums = torch.zeros(100, device="cuda", dtype=torch.float64).index_add_(0, rows, out.double())
    nonempty = rp[1:] > rp[:-1]
    _close(sums[nonempty], torch.ones(int(nonempty.sum()), device="cuda"), 1e-5)


@pytest.mark.gpu
def test_radix_csc_cummax_warp_forms_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(10)
    keys = torch.randint(0, 255, (500,), device="cuda", dtype=torch.int32)
    assert torch.equal(P.radix_sort_block_bits()(keys), keys.sort().values)
    dense = torch.randn(70, 96, device="cuda") * (torch.rand(70, 96, device="cuda") < 0.1)
    dense[:, 5] = 0  # an empty column
    r, c = dense.nonzero(as_tuple=True)
    perm = torch.randperm(r.numel(), device="cuda")
    r, c = r[perm].int(), c[perm].int()
    nnz = r.numel()
    colptr = torch.zeros(97, device="cuda", dtype=torch.int32)
    rowidx = torch.zeros(nnz, device="cuda", dtype=torch.int32)
    valt = torch.zeros(nnz, device="cuda")
    P.coo_to_csc_cursor()(r, c, dense[r.long(), c.long()].contiguous(), colptr, rowidx, valt)
    want = dense.T.contiguous().to_sparse_csr()
    assert torch.equal(colptr.long(), want.crow_indices())
    for col in range(96):
        a, b = int(colptr[col]), int(colptr[col + 1])
        order = rowidx[a:b].long().sort()
        assert torch.equal(order.values, want.col_indices()[a:b])
        assert torch.equal(valt[a:b][order.indices], want.values()[a:b])
    x = torch.rand(4, 256, device="cuda") + 0.5
    draw, fut = P.drawdown_cummax()(x)
    _close(draw, x / torch.cummax(x, 1).values - 1, 1e-6)
    assert torch.equal(fut, torch.cummax(x.flip(1), 1).values.flip(1))
    x = torch.randn(1000, device="cuda")
    head = (torch.rand(1000, device="cuda") < 0.15).int()
    y = P.warp_segmented_scan_shfl()(x, head)
    h = head.clone()
    h[::32] = 1
    seg = torch.cumsum(h, 0)
    want = torch.zeros(1000, dtype=torch.float64, device="cuda")
    for sid in seg.unique():
        m = seg == sid
        want[m] = torch.cumsum(x[m].double(), 0)
    _close(y, want, 1e-4)
    x = torch.randint(-5, 6, (50, 256), device="cuda").float()
    v, i = P.warp_argmax_ballot_ffs()(x)
    assert torch.equal(v, x.max(1).values)
    assert torch.equal(i.long(), (x == x.max(1, keepdim=True).values).int().argmax(1))
    for H, W in ((50, 70), (10, 12)):
        x = torch.randn(H, W, device="cuda")
        ref = x.double()
        for _ in range(3):
            p = F.pad(ref, (1, 1, 1, 1))
            ref = 0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
        _close(P.stencil5_steps_two_buffers(H=H, W=W)(x), ref, 1e-5)


@pytest.mark.gpu
def test_alloc_var_without_init_carries_across_iterations_on_gpu():
    import torch
    x = torch.randn(8, 16, device="cuda")
    _close(_row_totals_carried()(x), torch.cumsum(x.double().sum(1), 0), 1e-4)
    _close(_row_totals_carried(init=0.0)(x), x.double().sum(1), 1e-4)


@pytest.mark.gpu
def test_segment_walk_with_a_shared_cursor_on_gpu():
    import torch
    off = torch.tensor([0, 0, 300, 301, 700, 1000, 1111], dtype=torch.int32, device="cuda")
    x = torch.randn(1111, device="cuda")
    y = P.segment_scale_shared_cursor()(x, off)
    scale = torch.repeat_interleave(torch.arange(1, 7, device="cuda"), (off[1:] - off[:-1]).long())
    assert torch.equal(y, x * scale)


@pytest.mark.gpu
def test_row_sums_with_shared_bounds_on_gpu():
    import torch
    dense, rp, col, val = _csr(64, 700, 0.3, 11, long_row=5)
    scale = torch.randn(64, device="cuda")
    _close(P.csr_row_sums_shared_bounds()(rp, val, scale), dense.double().sum(1) * scale.double(), 1e-4)
