"""The fifty-seventh set of programs in TileLang's idioms (tests/unseen_programs57.py): a 3-d
7-point stencil marching in z with registers, CSR SpMM with a warp per row, a bfloat16 CSR
SpMV reduced by T.shfl_down, a stable block-local radix pass ranked by T.cumsum over a
one-hot shared matrix, a segmented scan chained across blocks (tickets, acquire polling,
release stores), a decoupled look-back scan whose status (flag and value) is one int64
word, its form with a warp-wide look-back window (T.ballot, T.__ffs, T.shfl_xor), a 3-d
stencil that copies three haloed planes per step under T.Pipelined, a warp-aggregated
histogram (T.match_any_sync, T.__ffs, T.popcount), and a radix pass's digit counts and
scatter offsets in one launch (the last block by an acq_rel ticket scans them).
CPU: each builds to an sm_90a and an sm_80 cubin, and what decides its result is read in
the generated source.  All built and read right as first written, and each lowers in
TileLang 0.1.15 too.  Left as found: in a loop every thread runs alike, tilecute puts a
barrier before each atomic to a shared buffer (warp_aggregated_histogram,
radix_offsets_last_block) where TileLang puts none -- right, but a barrier per step that
atomics to one buffer do not need.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs57.py``)."""

import re

import pytest
import torch

import rounds
import unseen_programs57 as P

NAMES = ["chained_segmented_scan", "csr_spmm_warp_per_row", "csr_spmv_warp_shfl",
         "lookback_scan_packed_status", "radix_offsets_last_block", "radix_pass_onehot_cumsum",
         "stencil3d_7pt_zmarch",
         "stencil3d_pipelined_planes", "warp_aggregated_histogram", "warp_window_lookback_scan"]

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_kernel = rounds.kernel_of(P)
_body = rounds.body_of(_kernel)

test_every_kernel_is_listed = rounds.every_kernel_is_listed(P, NAMES, imports=("tilelang", "T"))
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, _kernel)
# none uses a Hopper-only form
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


# ---- what decides each result, in the generated source -----------------------------------------
def test_stencil3d_marches_registers_and_reads_the_haloed_plane():
    src = _body("stencil3d_7pt_zmarch")
    # the plane with its halo is filled in two passes, zero outside the volume
    assert "for e in cutlass.range(0, 2):" in src and "if idx < 340:" in src
    assert re.search(r"if gi >= 0 and gi < 40 and gj >= 0 and gj < 70:\s+plane\[[^\]]+\] = X\[k, gi, gj\]\s+"
                     r"else:\s+plane\[[^\]]+\] = cutlass\.Float32\(0\.0\)", src)
    # the next layer is loaded only inside the volume
    assert re.search(r"above\[0\] = cutlass\.Float32\(0\.0\)\s+if k \+ 1 < 12 and i < 40 and j < 70:\s+"
                     r"above\[0\] = X\[k \+ 1, i, j\]", src)
    # the four in-plane neighbours from shared memory, the two in z from registers
    assert ("Y[k, i, j] = cutlass.Float32(-6.0) * center[0] + cutlass.Float32(1.0) * (below[0] + above[0]"
            " + plane[r * 34 + c + 1] + plane[(r + 2) * 34 + c + 1] + plane[(r + 1) * 34 + c]"
            " + plane[(r + 1) * 34 + c + 2])") in src
    # the registers shift after the barrier that ends the plane's readers
    assert re.search(r"cute\.arch\.sync_threads\(\)\s+below\[0\] = center\[0\]\s+center\[0\] = above\[0\]", src)


def test_csr_spmm_walks_the_row_between_its_row_pointers():
    src = _body("csr_spmm_warp_per_row")
    assert "row = bx * 4 + tx // 32" in src and "if row < 300:" in src
    assert re.search(r"for p in cutlass\.range\(RowPtr\[row\], RowPtr\[row\] \+ \(RowPtr\[row \+ 1\] - RowPtr\[row\]\)\):", src)
    assert re.search(r"acc\[(\w+)\] = acc\[\1\] \+ v \* tc_ld\d+", src)
    assert re.search(r"tc_ld\d+ = B\[col, lane \+ 32 \* (\w+)\]", src)
    assert re.search(r"C\[row, lane \+ 32 \* (\w+)\] = acc\[\1\]", src)


def test_csr_spmv_loops_a_cursor_and_folds_by_shfl_down():
    src = _body("csr_spmv_warp_shfl")
    assert "row = cutlass.min(bx * 8 + tx // 32, 499)" in src
    assert re.search(r"p\[0\] = start \+ lane\s+while p\[0\] < end:", src)
    assert "s[0] = s[0] + cutlass.Float32(tc_ld1) * cutlass.Float32(tc_ld3)" in src
    assert "p[0] = p[0] + 32" in src
    # every lane shuffles (outside any row test), width 32; lane 0 of a real row writes
    assert re.search(r"for t in cutlass\.range_constexpr\(0, 5\):\s+s\[0\] = s\[0\] \+ "
                     r"cute\.arch\.shuffle_sync_down\(s\[0\], offset=16 >> t, mask_and_clamp=31\)\s+"
                     r"if lane == 0 and bx \* 8 \+ tx // 32 < 500:\s+Yv\[row\] = s\[0\]", src)


def test_radix_pass_ranks_by_cumsum_along_the_block():
    src = _body("radix_pass_onehot_cumsum")
    assert "d = key >> 4 & 15" in src
    assert "onehot[q * 256 + tx] = cutlass.Int32(cutlass.select_(q == d, 1, 0))" in src
    # T.cumsum(onehot, dim=1): each of the 16 digit lines scanned along the 256 keys
    assert "# T.cumsum(onehot, onehot, dim=1)" in src
    assert re.search(r"for tc_line\d+ in cutlass\.range\(tc_tid // 32, 16, 8\):", src)
    assert "tcs.warp_inclusive_scan(" in src and '"sum"' in src
    # the digit starts: an exclusive scan of the line totals
    assert re.search(r"start\[(\w+)\] = run\[0\]\s+Counts\[bx, \1\] = onehot\[\1 \* 256 \+ 255\]\s+"
                     r"run\[0\] = run\[0\] \+ onehot\[\1 \* 256 \+ 255\]", src)
    assert "Out[bx * 256 + start[d] + onehot[d * 256 + tx] - 1] = key" in src


def test_chained_scan_polls_with_acquire_and_publishes_with_release():
    src = _body("chained_segmented_scan")
    assert 'tile_s[0] = tca.atomic_fetch(Ticket, (0,), 1, "add")' in src
    # the segmented operator: add the left value only while no head has been met
    assert re.search(r"if tx >= off\[0\]:\s+if f\[0\] == 0:\s+v\[0\] = v\[0\] \+ val\[tx - off\[0\]\]\s+"
                     r"f\[0\] = f\[0\] \| flg\[tx - off\[0\]\]", src)
    # the values are written back only after every thread has read its neighbour
    assert re.search(r"cute\.arch\.sync_threads\(\)\s+val\[tx\] = v\[0\]\s+flg\[tx\] = f\[0\]", src)
    # the predecessor's flag is polled by acquire loads until set, then its value read
    poll = src.split("while ready[0] == 0:", 1)[1]
    assert re.search(r'tca\.atomic_load\(Flag, \(tile - 1,\), "acquire"\)\s+ready\[0\] = tc_at\d+', poll)
    assert poll.index('"acquire"') < poll.index("Last[tile - 1]")
    # the inclusive last value goes out before the release store of the flag
    last = src.index("Last[tile] = val[255] + cutlass.select_(flg[255] == 0, carry[0], cutlass.Float32(0.0))")
    assert last < src.index('tca.atomic_store(Flag, (tile,), 1, "release")')
    assert re.search(r"Y\[tile \* 256 \+ tx\] = val\[tx\] \+ cutlass\.select_\(flg\[tx\] == 0, tc_ld\d+, "
                     r"cutlass\.Float32\(0\.0\)\)", src)


def test_lookback_publishes_flag_and_value_in_one_int64_word():
    src = _body("lookback_scan_packed_status")
    assert "# T.cumsum(buf, buf, dim=0)" in src
    # excl_s lies on tile_s's bytes (its life begins after tile_s's last read): every
    # thread reads the tile before thread 0 writes its exclusive prefix there
    assert "excl_s = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Int32)" in src
    assert re.search(r"tile = tile_s\[0\]\s+word = [^\n]+\s+word\[0\] = cutlass\.Int64\(0\)\s+"
                     r"cute\.arch\.sync_threads\(\)\s+if tx == 0:", src)
    assert "low = cutlass.Int64(agg) & cutlass.Int64(4294967295)" in src
    assert 'tca.atomic_store(Status, (tile,), cutlass.Int64(2) << cutlass.Int64(32) | low, "release")' in src
    assert 'tca.atomic_store(Status, (tile,), cutlass.Int64(1) << cutlass.Int64(32) | low, "release")' in src
    walk = src.split("while going[0] == 1:", 1)[1].split("incl = ", 1)[0]
    assert re.search(r'tc_at\d+ = tca\.atomic_load\(Status, \(p\[0\],\), "acquire"\)\s+word\[0\] = tc_at\d+', walk)
    assert "word = cute.make_rmem_tensor((1,), cutlass.Int64)" in src
    assert "flag = cutlass.Int32(word[0] >> cutlass.Int64(32))" in walk
    assert re.search(r"if flag != 0:\s+excl\[0\] = excl\[0\] \+ cutlass\.Int32\(word\[0\] & cutlass\.Int64\(4294967295\)\)\s+"
                     r"if flag == 2:\s+going\[0\] = 0\s+else:\s+p\[0\] = p\[0\] - 1", walk)
    assert "incl = cutlass.Int64(excl[0] + agg) & cutlass.Int64(4294967295)" in src
    assert "Y[tile * 256 + tx] = buf[tx] + excl_s[0]" in src


def test_pipelined_stencil_copies_three_haloed_planes_per_step():
    src = _body("stencil3d_pipelined_planes")
    assert "planes = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float32), cute.make_layout(1836))" in src
    step = src.split("for k in cutlass.range(0, 16):", 1)[1]
    # a barrier before the copy overwrites the planes the last step read, and one after it
    assert step.lstrip().startswith("cute.arch.sync_threads()")
    assert "planes[i1 * 612 + i2 * 34 + i3] = X[k + i1, by * 16 + i2, bx * 32 + i3]" in step
    assert re.search(r"if tc_f2 < 1836:.*?cute\.arch\.sync_threads\(\)\s+tc_f3 = tc_tid \* 4", step, re.S)
    # the two z neighbours, the four in-plane ones (two as vector loads), minus six times the centre
    assert "planes[0 * 612 + (i + 1) * 34 + (j + tc_lane6) + 1] + planes[2 * 612 + (i + 1) * 34 + (j + tc_lane6) + 1]" in step
    assert "planes[1 * 612 + i * 34 + (j + tc_lane6) + 1] + planes[1 * 612 + (i + 2) * 34 + (j + tc_lane6) + 1]" in step
    assert "cute.assume(1 * 612 + (i + 1) * 34 + j, divby=2)" in step
    assert "cute.assume(1 * 612 + (i + 1) * 34 + j + 2, divby=2)" in step
    assert "- cutlass.Float32(6.0) * planes[1 * 612 + (i + 1) * 34 + (j + tc_lane6) + 1]" in step
    assert "cute.assume(k * 6144 + (by * 16 + i4) * 96 + bx * 32 + i5, divby=4)" in step


def test_warp_aggregated_histogram_lets_one_lane_per_bin_add():
    src = _body("warp_aggregated_histogram")
    assert re.search(r"b\[0\] = -1\s+if idx < 20000:\s+b\[0\] = cutlass\.min\(cutlass\.Int32\(X\[idx\] \* "
                     r"cutlass\.Float32\(64\.0\)\), 63\)\s+peers = tcmath\.match_sync\(b\[0\], "
                     r'cutlass\.Uint32\(4294967295\), "any"\)', src)
    # the match is outside the lane test (the whole warp takes part); the lowest peer adds
    assert re.search(r"if b\[0\] >= 0 and tcmath\.ffs\(peers\) - 1 == lane:\s+"
                     r"tca\.atomic_add\(hist, b\[0\], cutlass\.Int32\(cute\.arch\.popc\(peers\)\)\)", src)
    assert re.search(r"if hist\[0 \+ tx\] > 0:\s+tca\.atomic_add\(H, \(0 \+ tx,\), hist\[0 \+ tx\]\)", src)


def test_warp_window_lookback_votes_on_the_window():
    src = _body("warp_window_lookback_scan")
    walk = src.split("while going[0] == 1:", 1)[1].split("if tx == 0:\n            if tile >= 0", 1)[0]
    assert re.search(r"tile = tile_s\[0\]\s+cute\.arch\.sync_threads\(\)\s+if tc_tid < 32:", src)
    # before tile 0 reads as an inclusive 0; the others' words by acquire loads
    assert re.search(r"word\[0\] = cutlass\.Int64\(2\) << cutlass\.Int64\(32\)\s+if base\[0\] - tx >= 0:", walk)
    assert 'tca.atomic_load(Status, (base[0] - tx,), "acquire")' in walk
    # T.ballot is a uint64 mask in TileLang; T.__ffs of it is one-based
    assert "incl = cutlass.Uint64(cutlass.Uint32(cute.arch.vote_ballot_sync(flag == 2)))" in walk
    assert "unset = cutlass.Uint64(cutlass.Uint32(cute.arch.vote_ballot_sync(flag == 0)))" in walk
    assert "stop = tcmath.ffs(incl)" in walk
    assert ("upto = cutlass.Uint64(cutlass.select_(stop == 0, cutlass.Uint64(4294967295), "
            "(cutlass.Uint64(1) << cutlass.Uint64(stop)) - cutlass.Uint64(1)))") in walk
    # (Python's & binds tighter than ==, as the program means)
    assert "if unset & upto == cutlass.Uint64(0):" in walk
    assert re.search(r"if stop == 0 or tx < stop:\s+part\[0\] = cutlass\.Int32\(word\[0\] & cutlass\.Int64\(4294967295\)\)", walk)
    assert "part[0] = part[0] + cute.arch.shuffle_sync_bfly(part[0], offset=16 >> t, mask_and_clamp=31)" in walk
    assert re.search(r"if stop != 0:\s+going\[0\] = 0\s+else:\s+base\[0\] = base\[0\] - 32", walk)
    assert ('tca.atomic_store(Status, (tile,), cutlass.Int64(2) << cutlass.Int64(32) | '
            'cutlass.Int64(excl[0] + agg) & cutlass.Int64(4294967295), "release")') in src


def test_radix_offsets_are_scanned_by_the_block_that_takes_the_last_ticket():
    src = _body("radix_offsets_last_block")
    # (a barrier before each shared atomic is tilecute's, not needed: atomics to one buffer
    # need no ordering among themselves; TileLang puts none there)
    assert re.search(r"key = Keys\[bx \* 1024 \+ e \* 256 \+ tx\]\s+(cute\.arch\.sync_threads\(\)\s+)?"
                     r"tca\.atomic_add\(cnt, \(key >> 4 & 15\), 1\)", src)
    # the block's count stores, a barrier, then thread 0's acq_rel ticket
    assert re.search(r"Counts\[bx, tx\] = cnt\[tx\]\s+cute\.arch\.sync_threads\(\)\s+if tx == 0:\s+"
                     r'ticket = tca\.atomic_fetch\(Done, \(0,\), 1, "add", order="acq_rel"\)\s+'
                     r"last\[0\] = cutlass\.Int32\(cutlass\.select_\(ticket == 15, 1, 0\)\)", src)
    # a branch every thread of the block takes alike (a shared flag) keeps its barrier inside
    assert re.search(r"if last\[0\] == 1:\s+if tx < 16:.*?tot\[tx\] = run\[0\]\s+cute\.arch\.sync_threads\(\)\s+"
                     r"if tx < 16:", src, re.S)
    assert 'c = tca.atomic_load(Counts, (b, tx), "relaxed")' in src
    assert re.search(r"Offsets\[b, tx\] = run\[0\]\s+run\[0\] = run\[0\] \+ c", src)
    assert re.search(r"for d in cutlass\.range\(0, tx\):\s+below\[0\] = below\[0\] \+ tot\[d\]", src)
    assert re.search(r"Offsets\[(\w+), tx\] = Offsets\[\1, tx\] \+ below\[0\]", src)


# ---- on the GPU --------------------------------------------------------------------------------
def _random_csr(M, K, nnz, dtype=torch.float32):
    """A random (M, K) CSR matrix with exactly nnz entries (some rows empty), on the GPU."""
    pos = torch.randperm(M * K)[:nnz].sort().values
    rows, cols = pos // K, pos % K
    rowptr = torch.zeros(M + 1, dtype=torch.int64)
    rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=M), 0)
    vals = torch.randn(nnz).to(dtype)
    return (rowptr.int().cuda(), cols.int().cuda(), vals.cuda(),
            torch.sparse_csr_tensor(rowptr, cols, vals.float(), (M, K)).to_dense().cuda())


@pytest.mark.gpu
def test_stencil3d_7pt_zmarch_on_gpu():
    X = torch.randn(12, 40, 70, device="cuda")
    Y = P.stencil3d_7pt_zmarch()(X)
    Z = torch.nn.functional.pad(X, (1, 1, 1, 1, 1, 1))
    nb = (Z[:-2, 1:-1, 1:-1] + Z[2:, 1:-1, 1:-1] + Z[1:-1, :-2, 1:-1] + Z[1:-1, 2:, 1:-1]
          + Z[1:-1, 1:-1, :-2] + Z[1:-1, 1:-1, 2:])
    rounds.close(Y, -6.0 * X + nb, 1e-5)


@pytest.mark.gpu
def test_stencil3d_pipelined_planes_on_gpu():
    X = torch.randn(18, 66, 98, device="cuda")
    c = X[1:-1, 1:-1, 1:-1]
    want = (X[:-2, 1:-1, 1:-1] + X[2:, 1:-1, 1:-1] + X[1:-1, :-2, 1:-1] + X[1:-1, 2:, 1:-1]
            + X[1:-1, 1:-1, :-2] + X[1:-1, 1:-1, 2:] - 6.0 * c)
    rounds.close(P.stencil3d_pipelined_planes()(X), want, 1e-5)


@pytest.mark.gpu
def test_lookback_scan_packed_status_on_gpu():
    X = torch.randint(-1000, 1000, (8192,), device="cuda", dtype=torch.int32)
    for _ in range(3):
        status = torch.zeros(32, device="cuda", dtype=torch.int64)
        ticket = torch.zeros(1, device="cuda", dtype=torch.int32)
        Y = P.lookback_scan_packed_status()(X, status, ticket)
        assert torch.equal(Y, torch.cumsum(X, 0).int())
        assert torch.equal(status >> 32, torch.full_like(status, 2))


@pytest.mark.gpu
def test_warp_aggregated_histogram_on_gpu():
    X = torch.rand(20000, device="cuda")
    X[:3000] = 0.5  # long runs of one bin: whole warps match
    H = P.warp_aggregated_histogram()(X)
    want = torch.bincount((X * 64).int().clamp(max=63).long(), minlength=64).int()
    assert torch.equal(H, want)


@pytest.mark.gpu
def test_warp_window_lookback_scan_on_gpu():
    X = torch.randint(-1000, 1000, (16384,), device="cuda", dtype=torch.int32)
    for _ in range(3):
        status = torch.zeros(64, device="cuda", dtype=torch.int64)
        ticket = torch.zeros(1, device="cuda", dtype=torch.int32)
        Y = P.warp_window_lookback_scan()(X, status, ticket)
        assert torch.equal(Y, torch.cumsum(X, 0).int())


@pytest.mark.gpu
def test_radix_offsets_last_block_on_gpu():
    keys = torch.randint(0, 1 << 16, (16384,), device="cuda", dtype=torch.int32)
    for _ in range(3):
        done = torch.zeros(1, device="cuda", dtype=torch.int32)
        counts, offsets = P.radix_offsets_last_block()(keys, done)
        digit = ((keys >> 4) & 15).view(16, 1024).long()
        want = torch.stack([torch.bincount(d, minlength=16) for d in digit]).int()
        assert torch.equal(counts, want)
        below_d = torch.cumsum(want.sum(0), 0) - want.sum(0)
        below_b = torch.cumsum(want, 0) - want
        assert torch.equal(offsets, (below_d[None, :] + below_b).int())


@pytest.mark.gpu
def test_csr_spmm_warp_per_row_on_gpu():
    rowptr, col, val, A = _random_csr(300, 200, 2400)
    B = torch.randn(200, 64, device="cuda")
    rounds.close(P.csr_spmm_warp_per_row()(rowptr, col, val, B), A @ B, 1e-4)


@pytest.mark.gpu
def test_csr_spmv_warp_shfl_on_gpu():
    rowptr, col, val, A = _random_csr(500, 300, 6000, torch.bfloat16)
    x = torch.randn(300, device="cuda").bfloat16()
    rounds.close(P.csr_spmv_warp_shfl()(rowptr, col, val, x), A @ x.float(), 1e-3)


@pytest.mark.gpu
def test_radix_pass_onehot_cumsum_on_gpu():
    keys = torch.randint(0, 1 << 12, (1024,), device="cuda", dtype=torch.int32)
    out, counts = P.radix_pass_onehot_cumsum()(keys)
    kb = keys.view(4, 256)
    digit = (kb >> 4) & 15
    order = torch.sort(digit, dim=1, stable=True).indices
    assert torch.equal(out.view(4, 256), torch.gather(kb, 1, order))
    want = torch.stack([torch.bincount(d.long(), minlength=16) for d in digit]).int()
    assert torch.equal(counts, want)


@pytest.mark.gpu
def test_chained_segmented_scan_on_gpu():
    X = torch.randn(4096, device="cuda")
    Head = (torch.rand(4096, device="cuda") < 0.004).int()
    seg = torch.cumsum(Head, 0).cpu()
    want, run = torch.empty(4096, dtype=torch.float64), 0.0
    for t, (x, h) in enumerate(zip(X.double().cpu().tolist(), Head.cpu().tolist())):
        run = x if h else run + x
        want[t] = run
    assert seg[-1] > 1  # segments cross tile boundaries
    for _ in range(3):
        flag = torch.zeros(16, device="cuda", dtype=torch.int32)
        last = torch.zeros(16, device="cuda")
        ticket = torch.zeros(1, device="cuda", dtype=torch.int32)
        Y = P.chained_segmented_scan()(X, Head, flag, last, ticket)
        rounds.close_on_cpu(Y, want, atol=1e-3, rtol=1e-4)
