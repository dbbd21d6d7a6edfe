"""A forty-first set of programs in TileLang's idioms (tests/unseen_programs41.py): classic GPU
algorithms in TileLang's lower-level forms -- a shared-memory tree reduction then shuffles,
Kogge-Stone and Blelloch block scans, a two-pass multi-block scan, a single-pass scan with
decoupled look-back (a ticket, acquire / release flags in global memory, a spin loop), a
privatized histogram, warp-per-row CSR SpMV over a T.dynamic nnz, a radix digit pass
(counts, then a stable ballot-ranked scatter), a bitonic sort of 1024 key / value pairs, a
register-blocked SGEMM on CUDA cores, a padded-tile transpose, a separable blur with a halo,
n-body forces over shared tiles, a Julia set by a capped while loop, grid-stride loops over a
T.dynamic length, a warp argmax with ties broken low, a persistent work queue on an atomic
ticket, label propagation until a round changes nothing, and a producer warp handing rows to
a consumer warp through shared flags.

CPU: each builds to an sm_90a and an sm_80 cubin, and what decides its result is read in the
generated source.  All built as first written but the bitonic sort's first form, which swapped
the pair inside ``if (a > b) == up:`` (``ks[lo] = b; ks[hi] = a; va = vs[lo]; ...``): the
barrier pass cannot prove two threads' ``lo`` / ``hi`` apart and refuses to split that
divergent branch (TileLang's sync pass sees the same write-after-write conflict); the program
now reads both elements and writes both through selects.  Two fixes came from this family:
``T.atomic_store`` / ``T.atomic_load`` on a shared flag (TileLang's atomic_ref takes any
address) were refused (tests/test_atomic_memory_orders.py); and in the warp handoff the
consumer branch's ``v = T.alloc_var(...)`` (no init, in its serial loop) was hoisted with its
zero store to before the branch, where that store split the two side-by-side branches and the
barrier pass put a block barrier between them -- a hang, warp 0 waiting for a slot warp 1
frees only after that barrier (tests/test_thread_branches.py).
GPU: each matches a torch reference (``pytest -q -m gpu tests/test_unseen_programs41.py``)."""

import re

import pytest
import torch

import rounds
import unseen_programs41 as P

NAMES = ["tree_reduce_then_shuffle", "kogge_stone_block_scan", "scan_add_block_offsets",
         "blelloch_exclusive_scan", "decoupled_lookback_scan", "histogram_shared_private",
         "csr_spmv_warp_per_row", "radix_digit_counts_pass", "radix_digit_scatter_pass",
         "bitonic_sort_pairs_1024", "sgemm_register_blocked", "transpose_padded_tile",
         "gaussian_blur_separable", "nbody_forces_shared_tiles", "julia_escape_counts",
         "grid_stride_axpy_and_norm", "warp_argmax_ties_low", "persistent_ticket_queue",
         "label_propagation_until_stable", "warp_handoff_shared_flags"]


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(NAMES, rounds.tir_of(P), "sm_80")


def test_tree_reduction_halves_with_barriers_then_shuffles():
    src = _body("tree_reduce_then_shuffle")
    loop = src.split("while s[0] >= 32:", 1)[1].split("if tc_tid < 32", 1)[0]
    assert "part[tx] = part[tx] + part[tx + s[0]]" in loop
    assert loop.count("cute.arch.sync_threads()") >= 1 and "s[0] = s[0] >> 1" in loop
    assert "cute.arch.shuffle_sync_down(v[0], offset=off[0], mask_and_clamp=31)" in src
    assert "tca.atomic_add(Out, (0,), v[0])" in src


def test_kogge_stone_reads_the_other_buffer_each_step():
    src = _body("kogge_stone_block_scan")
    assert "for d in cutlass.range(0, 9)" in src  # log2(512) steps
    step = src.split("for d in cutlass.range(0, 9)", 1)[1].split("Y[", 1)[0]
    assert "cute.arch.sync_threads()" in step
    assert re.search(r"buf\[\(1 - src\) \* 512 \+ tx\] = buf\[src \* 512 \+ tx\] \+ buf\[src \* 512 \+ tx - off\]", step)
    assert "Sums[bx] = buf[" in src


def test_multi_block_second_pass_sums_earlier_blocks():
    src = _body("scan_add_block_offsets")
    assert re.search(r"for b in cutlass\.range\(0, bx\):\s+run\[0\] = run\[0\] \+ Sums\[b\]", src)
    assert "base[0] = run[0]" in src


def test_blelloch_clears_the_root_and_swaps_down():
    src = _body("blelloch_exclusive_scan")
    assert "s[bi] = s[bi] + s[ai]" in src
    assert "s[1023] = cutlass.Float32(0.0)" in src
    down = src.split("s[1023]", 1)[1]
    assert ">> lv_1_ + 1" in down  # n >> (lv + 1)
    # the swap keeps its order: the saved left value is added after the left is overwritten
    assert down.index("t[0] = s[ai_1_]") < down.index("s[ai_1_] = s[bi_1_]") < \
        down.index("s[bi_1_] = s[bi_1_] + t[0]")


def test_lookback_ticket_flags_and_spin():
    src = _body("decoupled_lookback_scan")
    assert 'tile_s[0] = tca.atomic_fetch(Ticket, (0,), 1, "add")' in src
    assert 'tca.atomic_store(State, (tile, 0), 1, "release")' in src
    assert 'tca.atomic_store(State, (tile, 0), 2, "release")' in src
    spin = src.split("while f[0] == 0:", 1)[1].split("run[0] = run[0]", 1)[0]
    assert 'tca.atomic_load(State, (p[0], 0), "acquire")' in spin
    assert "Y[tile * 256 + tx] = buf[tx] + excl_s[0]" in src


def test_histogram_privatized_then_merged():
    src = _body("histogram_shared_private")
    assert ", n: cutlass.Int32" in src
    assert "(n - (bx * 512 + tx) + 8192 - 1) // 8192" in src  # the grid stride, blocks * threads
    assert "tca.atomic_add(h, cutlass.Int32(cutlass.Uint8(X[i])), 1)" in src
    assert re.search(r"if h\[b_1_\] != 0:\s+tca\.atomic_add\(H, \(b_1_,\), h\[b_1_\]\)", src)


def test_spmv_lanes_stride_and_butterfly():
    src = _body("csr_spmv_warp_per_row")
    assert ", nnz: cutlass.Int32" in src
    assert "e = start + lane + e_iter * 32" in src
    assert "shuffle_sync_bfly(acc[0], offset=16 >> s, mask_and_clamp=31)" in src
    assert "if row < 1000 and lane == 0:" in src


def test_radix_counts_and_stable_scatter():
    counts = _body("radix_digit_counts_pass")
    assert "cutlass.Uint32(4) & cutlass.Uint32(15)" in counts and "tca.atomic_add(c, d, 1)" in counts
    assert "Counts[tx, bx] = c[tx]" in counts
    src = _body("radix_digit_scatter_pass")
    assert src.count("cute.arch.vote_ballot_sync(bit == 1)") == 1  # in an unrolled loop of 4
    assert "cutlass.Uint32(votes) ^ cutlass.Uint32(4294967295)" in src  # ~votes for a 0 bit
    assert "rank = cute.arch.popc(below)" in src
    assert "before[0] = before[0] + wc[v * 16 + d]" in src


def test_bitonic_pairs_select_after_a_barrier():
    src = _body("bitonic_sort_pairs_1024")
    assert "while k[0] <= 1024:" in src and "while j[0] > 0:" in src
    step = src.split("while j[0] > 0:", 1)[1]
    reads, writes = step.split("swap = (a > b) == up", 1)
    assert "a = ks[lo]" in reads and "vb = vs[hi]" in reads
    assert writes.lstrip().startswith("cute.arch.sync_threads()")  # every read before a write
    assert "ks[lo] = cutlass.select_(swap, b, a)" in writes
    assert "ks[hi] = cutlass.select_(swap, a, b)" in writes


def test_sgemm_register_blocks():
    src = _body("sgemm_register_blocked")
    assert "c = cute.make_rmem_tensor((4, 4,), cutlass.Float32)" in src
    assert "c[i_2_, j_2_] = c[i_2_, j_2_] + a[i_2_] * b[j_2_]" in src
    assert "for k_2_ in cutlass.range_constexpr(0, 8)" in src  # T.unroll(BK)
    assert "cute.make_layout(4)).store(tc_vec" in src  # the 4-wide row of C stored at once


def test_transpose_pad_column():
    src = _body("transpose_padded_tile")
    assert "tile[(r + ty) * 33 + tx] = A[y, x]" in src
    assert "B[y_1_, x_1_] = tile[tx * 33 + r_1_ + ty]" in src


def test_blur_clamps_and_reads_halo():
    src = _body("gaussian_blur_separable")
    assert "cutlass.min(cutlass.max(by * 16 + i - 3, 0), 199)" in src
    assert "win[i_1_ * 38 + j_1_ + t_1_]" in src
    assert "rows[(i_2_ + t_2_) * 32 + j_2_]" in src


def test_nbody_rsqrt_and_unroll_factor():
    src = _body("nbody_forces_shared_tiles")
    assert "for j in cutlass.range(0, 128, unroll=4)" in src
    assert "cute.math.rsqrt(dx * dx + dy * dy + dz * dz + cutlass.Float32(0.01))" in src


def test_julia_while_joins_cap_and_escape():
    src = _body("julia_escape_counts")
    assert "while it[0] < 256 and zr[0] * zr[0] + zi[0] * zi[0] <= cutlass.Float32(4.0):" in src


def test_grid_stride_while_and_stepped_serial():
    src = _body("grid_stride_axpy_and_norm")
    assert "while i[0] < n:" in src and "i[0] = i[0] + 1024" in src
    assert "g = bx * 128 + tx + g_iter * 1024" in src
    assert "shuffle_sync_down(part[0], offset=16 >> s, mask_and_clamp=31)" in src


def test_argmax_ties_low():
    src = _body("warp_argmax_ties_low")
    assert "if ov > bv[0] or ov == bv[0] and oi < bi[0]:" in src
    assert "shuffle_sync_bfly(bi[0], offset=off[0], mask_and_clamp=31)" in src


def test_ticket_queue_loops_on_a_flag():
    src = _body("persistent_ticket_queue")
    assert "while go[0] == 1:" in src
    assert 'start[0] = tca.atomic_fetch(Ctr, (0,), 128, "add")' in src
    assert re.search(r"if b >= 10000:\s+go\[0\] = 0\s+else:", src)


def test_label_propagation_rounds_until_unchanged():
    src = _body("label_propagation_until_stable")
    loop = src.split("while go[0] != 0:", 1)[1]
    assert "m[0] = cutlass.min(m[0], lab[nb[k_1_]])" in loop
    # the round reads every label before any is written, and the flag after every write
    reads, writes = loop.split("if m[0] < lab[tx]:", 1)
    assert reads.rstrip().endswith("cute.arch.sync_threads()")
    assert re.search(r"changed\[0\] = 1\s+cute\.arch\.sync_threads\(\)\s+go\[0\] = changed\[0\]", writes)


def test_handoff_regions_side_by_side_with_shared_flags():
    src = _body("warp_handoff_shared_flags")
    regions = src[src.index("# thread region: threads 0..31"):]
    assert "sync_threads()" not in regions  # no block barrier between producer and consumer
    producer, consumer = regions.split("# thread region: threads 32..63", 1)
    assert 'while tca.atomic_load(done, (s,), "acquire") != c - 2 + 1:' in producer
    assert 'tca.atomic_store(full, s, c + 1, "release")' in producer
    assert 'while tca.atomic_load(full, (s_1_,), "acquire") != c_1_ + 1:' in consumer
    assert 'tca.atomic_store(done, s_1_, c_1_ + 1, "release")' in consumer
    assert "v = cute.make_rmem_tensor((1,), cutlass.Float32)" in consumer


# ---- GPU ---------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_tree_reduce_then_shuffle_on_gpu():
    X = torch.randn(100_003, device="cuda")
    out = torch.zeros(1, device="cuda")
    P.tree_reduce_then_shuffle()(X, out)
    torch.testing.assert_close(out[0].double(), X.double().sum(), rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
def test_two_pass_block_scan_on_gpu():
    X = torch.randint(-50, 50, (4096,), device="cuda", dtype=torch.int32)
    Y, sums = P.kogge_stone_block_scan()(X)
    Z = P.scan_add_block_offsets()(Y, sums)
    assert torch.equal(Z, torch.cumsum(X, 0).int())


@pytest.mark.gpu
def test_blelloch_exclusive_scan_on_gpu():
    X = torch.randint(-8, 8, (8, 1024), device="cuda").float()
    ref = torch.cumsum(X, 1) - X
    torch.testing.assert_close(P.blelloch_exclusive_scan()(X), ref)


@pytest.mark.gpu
def test_decoupled_lookback_scan_on_gpu():
    X = torch.randint(-100, 100, (8192,), device="cuda", dtype=torch.int32)
    for _ in range(3):
        state = torch.zeros(32, 3, device="cuda", dtype=torch.int32)
        ticket = torch.zeros(1, device="cuda", dtype=torch.int32)
        Y = P.decoupled_lookback_scan()(X, state, ticket)
        assert torch.equal(Y, torch.cumsum(X, 0).int())


@pytest.mark.gpu
def test_histogram_shared_private_on_gpu():
    X = torch.randint(0, 256, (123_457,), device="cuda", dtype=torch.uint8)
    H = torch.zeros(256, device="cuda", dtype=torch.int32)
    P.histogram_shared_private()(X, H)
    assert torch.equal(H, torch.bincount(X.long(), minlength=256).int())


@pytest.mark.gpu
def test_csr_spmv_warp_per_row_on_gpu():
    A = torch.rand(1000, 777, device="cuda")
    A[A < 0.95] = 0
    A[::97] = 0  # empty rows
    csr = A.to_sparse_csr()
    x = torch.randn(777, device="cuda")
    y = P.csr_spmv_warp_per_row()(csr.crow_indices().int(), csr.col_indices().int(), csr.values(), x)
    torch.testing.assert_close(y, A @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_radix_digit_pass_on_gpu():
    K = torch.randint(0, 2**31 - 1, (4096,), device="cuda", dtype=torch.int64).to(torch.int32)
    Ku = K.view(torch.uint32) if hasattr(torch, "uint32") else K
    counts = P.radix_digit_counts_pass()(Ku)
    flat = counts.flatten()
    offsets = (torch.cumsum(flat, 0) - flat).view(16, 16).int()
    out = P.radix_digit_scatter_pass()(Ku, offsets)
    digit = (K.long() >> 4) & 15
    ref = K[torch.sort(digit, stable=True).indices]
    assert torch.equal(out.view(torch.int32), ref)


@pytest.mark.gpu
def test_bitonic_sort_pairs_on_gpu():
    Kin = torch.randn(4, 1024, device="cuda")
    Vin = torch.arange(1024, device="cuda", dtype=torch.int32).repeat(4, 1)
    K, V = P.bitonic_sort_pairs_1024()(Kin, Vin)
    ref = torch.sort(Kin, 1)
    assert torch.equal(K, ref.values)
    assert torch.equal(torch.gather(Kin, 1, V.long()), ref.values)


@pytest.mark.gpu
def test_sgemm_register_blocked_on_gpu():
    A = torch.randn(256, 256, device="cuda")
    B = torch.randn(256, 256, device="cuda")
    torch.testing.assert_close(P.sgemm_register_blocked()(A, B), (A.double() @ B.double()).float(),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_transpose_padded_tile_on_gpu():
    A = torch.randn(1000, 700, device="cuda").half()
    assert torch.equal(P.transpose_padded_tile()(A), A.T)


@pytest.mark.gpu
def test_gaussian_blur_separable_on_gpu():
    img = torch.randn(200, 300, device="cuda")
    w = torch.exp(-torch.arange(-3, 4, device="cuda").float() ** 2 / 4)
    w = w / w.sum()
    pad = torch.nn.functional.pad(img[None, None], (3, 3, 3, 3), mode="replicate")
    ref = torch.nn.functional.conv2d(pad, (w[:, None] * w[None, :])[None, None])[0, 0]
    torch.testing.assert_close(P.gaussian_blur_separable()(img, w), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_nbody_forces_on_gpu():
    pos = torch.randn(1024, 4, device="cuda")
    pos[:, 3] = torch.rand(1024, device="cuda")
    acc = P.nbody_forces_shared_tiles()(pos)
    p = pos.double()
    d = p[None, :, :3] - p[:, None, :3]
    inv = (d.pow(2).sum(-1) + 1e-2).rsqrt()
    ref = (d * (p[None, :, 3] * inv ** 3)[..., None]).sum(1)
    torch.testing.assert_close(acc.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_julia_escape_counts_on_gpu():
    cnt = P.julia_escape_counts()()
    y, x = torch.meshgrid(torch.arange(300, device="cuda"), torch.arange(400, device="cuda"),
                          indexing="ij")
    zr = -1.6 + 3.2 * x.float() / 399
    zi = -1.2 + 2.4 * y.float() / 299
    it = torch.zeros_like(cnt)
    for _ in range(256):
        live = zr * zr + zi * zi <= 4.0
        t = zr * zr - zi * zi - 0.8
        zi = torch.where(live, 2.0 * zr * zi + 0.156, zi)
        zr = torch.where(live, t, zr)
        it += live.int()
    # chaotic orbits: float contraction may move a few boundary pixels by an iteration or more
    assert (cnt == it).float().mean() > 0.97
    assert cnt.max() <= 256 and cnt.min() >= 0 and cnt.float().std() > 0


@pytest.mark.gpu
def test_grid_stride_axpy_and_norm_on_gpu():
    X = torch.randn(50_001, device="cuda")
    Y2 = torch.randn(50_001, device="cuda")
    norm2 = torch.zeros(1, device="cuda")
    Y = P.grid_stride_axpy_and_norm()(X, Y2, norm2)
    ref = 2.5 * X + Y2
    torch.testing.assert_close(Y, ref)
    torch.testing.assert_close(norm2[0], ref.pow(2).sum(), rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
def test_warp_argmax_ties_low_on_gpu():
    X = torch.randint(0, 20, (64, 1000), device="cuda").float()  # many ties
    mx, ix = P.warp_argmax_ties_low()(X)
    assert torch.equal(mx, X.max(1).values)
    first = (X == X.max(1, keepdim=True).values).int().argmax(1)
    assert torch.equal(ix.long(), first)


@pytest.mark.gpu
def test_persistent_ticket_queue_on_gpu():
    X = torch.randn(10000, device="cuda")
    ctr = torch.zeros(1, device="cuda", dtype=torch.int32)
    Y = P.persistent_ticket_queue()(X, ctr)
    torch.testing.assert_close(Y, X * 2.0 + 1.0)


@pytest.mark.gpu
def test_label_propagation_on_gpu():
    g = torch.Generator().manual_seed(0)
    n = 512
    nbr = torch.full((n, 4), -1, dtype=torch.int32)
    deg = torch.zeros(n, dtype=torch.int64)
    for _ in range(300):  # random undirected edges, at most 4 per vertex
        a, b = torch.randint(0, n, (2,), generator=g).tolist()
        if a != b and deg[a] < 4 and deg[b] < 4 and b not in nbr[a].tolist():
            nbr[a, deg[a]], nbr[b, deg[b]] = b, a
            deg[a] += 1
            deg[b] += 1
    ref = torch.arange(n)
    while True:  # the same rounds on the CPU
        m = ref.clone()
        for k in range(4):
            ok = nbr[:, k] >= 0
            m[ok] = torch.minimum(m[ok], ref[nbr[ok, k].long()])
        if torch.equal(m, ref):
            break
        ref = m
    L = P.label_propagation_until_stable()(torch.arange(n, dtype=torch.int32).cuda(), nbr.cuda())
    assert torch.equal(L.cpu().long(), ref)


@pytest.mark.gpu
def test_warp_handoff_shared_flags_on_gpu():
    X = torch.randn(16, 32, device="cuda")
    torch.testing.assert_close(P.warp_handoff_shared_flags()(X), X.sum(1), rtol=1e-5, atol=1e-5)
