"""The fifty-seventh set of programs in TileLang's idioms (tests/unseen_programs57.py): a 3-d
7-point stencil marching in z with registers, CSR SpMM with a warp per row, a bfloat16 CSR
SpMV reduced by T.shfl_down, a stable block-local radix pass ranked by T.cumsum over a
one-hot shared matrix, and a segmented scan chained across blocks (tickets, acquire
polling, release stores).
CPU: each builds to an sm_90a and an sm_80 cubin, and what decides its result is read in
the generated source.  All built and read right as first written.
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs57.py``)."""

import re

import pytest
import torch

import rounds
import unseen_programs57 as P

NAMES = ["chained_segmented_scan", "csr_spmm_warp_per_row", "csr_spmv_warp_shfl",
         "radix_pass_onehot_cumsum", "stencil3d_7pt_zmarch"]

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
