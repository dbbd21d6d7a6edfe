"""A twelfth set of programs in TileLang's idioms (tests/unseen_programs12.py): the forms
whose TileLang tests look for TileLang's CUDA text before checking a number (warp votes
and matches, shuffles, wide global loads and stores, vectorized / mixed / x2 / x4 /
return_prev / bitwise / tile / TMA atomics, alloc_var initializers, T.unroll's step and
factor, T.assume, T.sync_grid, PDL, named barriers, TMA stores and per-warp TMA leaders,
fast-math / IEEE / rounding intrinsics, fp8 casts, int8 broadcasts, negative indices,
reducers, NaN-propagating and batched reductions, fragment scans and Philox draws).
Each builds to an sm_90a cubin on the CPU; on a GPU each matches torch (or numpy)
written to TileLang's meaning."""

import math
from fractions import Fraction

import numpy as np
import pytest

import rounds
import unseen_programs12 as P

PROGRAMS = ["warp_votes_on_data", "warp_match_groups", "warp_fns_and_ballot_mask", "shuffle_family",
            "ldg_widths", "stg_widths", "ldg_readonly_gather", "atomic_add_slices_vectorized",
            "atomic_add_mixed_dtypes", "atomic_addx2_x4_grid", "atomic_addx4_scatter_rows",
            "atomic_return_prev_forms", "atomic_return_prev_tickets", "atomic_bitwise_and_orders",
            "atomic_tile_orders_and_exprs", "tma_atomic_add_reduce", "alloc_var_initializers",
            "unroll_forms", "assume_forms", "grid_sync_reverse", "grid_sync_inside_parallel", "pdl_two_kernels",
            "named_barrier_handoff", "gemm_tma_store", "gemm_tma_store_3_stages_plain",
            "tma_store_batched_rows", "tma_copy_per_warp_leader", "tan_halves", "fast_math_family",
            "rounding_and_fmod", "ieee_rounding_modes", "fp8_casts_saturating",
            "int8_broadcast_32_lanes", "negative_indices", "reducer_epochs", "reduce_batch_and_nan",
            "fragment_cumsums", "rng_statistics", "gemm_tma_store_ragged", "tma_atomic_add_layouts",
            "atomic_tile_ragged_orders", "shuffle_widths", "cumsum_more", "rng_default_sequence",
            "ieee_halves_and_fp16_fast", "alloc_var_positional_forms", "vectorized_casts",
            "shuffle_dtypes", "shared_memory_atomics", "ldg_packed_narrow",
            "reduce_shared_and_batched"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated code says -------------------------------------------------------------
def test_shuffle_widths_reach_the_clamp_operand():
    """``T.shfl_sync(x, 5, width=16)``: CUDA's c operand ((32 - width) << 8) | 31; shfl_up
    clamps at 0 (its segment's first lane), the others at 31."""
    src = _src(P.shuffle_family())
    assert "shuffle_sync(X[tx], offset=5, mask_and_clamp=4127)" in src
    assert "shuffle_sync_up(c[0], offset=1 << k_2_, mask_and_clamp=0)" in src
    assert "shuffle_sync_bfly(s[0], offset=1 << k, mask_and_clamp=31)" in src


def test_predicated_wide_loads_give_zeros_and_stores_skip():
    src = _src(P.ldg_widths())
    assert "ldg32_words_1_[0] = cutlass.Uint32(0)" in src
    src = _src(P.stg_widths())
    store = src[src.index("ldg128_words_1_ = "):]
    assert "if i < 16:" in store  # the predicated stg128 stores only where pred holds


def test_unroll_step_and_factor_keep_their_iterations():
    src = _src(P.unroll_forms())
    assert "i = 0 + i_iter * 4" in src and "cutlass.range_constexpr(0, 4)" in src
    assert "cutlass.range(0, 16, unroll=4)" in src
    assert "i_3_ = 2 + i_iter_1_ * 3" in src and "cutlass.range_constexpr(0, 3)" in src


def test_alloc_var_init_reads_the_var_at_that_point():
    src = _src(P.alloc_var_initializers())
    body = src[src.index("a[0] = 1"):src.index("e = ")]
    assert body.split() == "a[0] = 1 b = cute.make_rmem_tensor((1,), cutlass.Int32) b[0] = a[0] " \
                           "a[0] = 2 d = cute.make_rmem_tensor((1,), cutlass.Int32) d[0] = a[0]".split()


def test_barrier_in_a_parallel_body_with_a_reversed_read_runs_one_iteration_per_thread():
    """TileLang vectorizes a T.Parallel loop only over unit-stride accesses: with
    A[N - 1 - i] in the body it runs one iteration per thread, so T.sync_grid() in the body
    separates every block's reads from every block's writes.  tilecute's fragment layout
    took 4 iterations per thread there (the barrier then fell between one thread's
    iterations, racing with other blocks' writes): it now takes one."""
    src = _src(P.grid_sync_inside_parallel())
    assert "loc = cute.make_rmem_tensor((1,), cutlass.Float32)" in src, src
    body = src[src.index("A[1024 - base"):]
    assert "tc_lane" not in body[:body.index("set_name_prefix")]


def test_barrier_in_a_unit_stride_parallel_body_keeps_its_vectors():
    """With unit-stride accesses only TileLang vectorizes the loop (the barrier is met once
    per iteration of each thread's vector), and so does tilecute."""
    import tilecute.language as T

    @T.prim_func
    def k(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((256,), T.float32)
            for i in T.Parallel(256):
                f[i] = A[i]
                T.sync_threads()
                B[i] = f[i] * 2.0
    src = _src(k)
    assert "f = cute.make_rmem_tensor((4,), cutlass.Float32)" in src, src


def test_a_32_bit_load_reinterpreted_as_a_vector_dtype_unpacks():
    """``T.reinterpret(T.ldg32(x[i:i + 4]), T.int8x4)``: TileLang's uint32 read as four int8
    lanes (element 0 in the low byte); it was refused as an unknown dtype."""
    src = _src(P.ldg_packed_narrow())
    assert "YI[i * 4 + 3] = tcmath.reinterpret(cutlass.Uint8(ldg32_words[0] >> cutlass.Uint32(24) & " \
           "cutlass.Uint32(255)), cutlass.Int8)" in src, src


def test_negative_constant_and_affine_indices_count_from_the_end():
    src = _src(P.negative_indices())
    assert "B[0] = A[15]" in src and "B[1 + i] = A[0 - i + 15]" in src


def test_fp8_casts_saturate_in_the_ptx(tmp_path):
    """TileLang's float -> fp8 conversions are __NV_SATFINITE ones; the build's PTX
    converts with cvt.rn.satfinite (no non-saturating form)."""
    import glob
    import importlib.util

    import cutlass.cute as cute
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    path = tmp_path / "k.py"
    path.write_text(emit_cute(lower(P.fp8_casts_saturating(), "sm_90a")))
    spec = importlib.util.spec_from_file_location("tilecute_cast8_ptx", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cute.compile(module.cast8, *module.placeholder_args(),
                 options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    (ptx,) = glob.glob(str(tmp_path / "*.ptx"))
    text = open(ptx).read()
    assert "cvt.rn.satfinite.e4m3x2.f32" in text and "cvt.rn.satfinite.e5m2x2.f32" in text
    assert "cvt.rn.satfinite.e4m3x2.f16x2" in text


# ---- refusals ---------------------------------------------------------------------------------
def test_reserved_cast_rounding_modes_are_refused_by_name():
    """TileLang accepts round='rz'/'rp'/'rm' as reserved PTX hints; tilecute refuses them
    (and 'rs', stochastic rounding) naming the argument rather than round to nearest."""
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    for mode in ("rz", "rp", "rm"):
        with pytest.raises((FrontendError, ValueError), match=rf"round='{mode}' is not supported"):
            @T.prim_func
            def k(X: T.Tensor((32,), T.float32), Y: T.Tensor((32,), T.float8_e4m3fn)):
                with T.Kernel(1, threads=32):
                    for i in T.Parallel(32):
                        Y[i] = T.cast(X[i], T.float8_e4m3fn, round=mode)


def test_other_rng_generators_are_refused_by_name():
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match="curandStateXORWOW_t"):
        @T.prim_func
        def k(A: T.Tensor((32,), T.uint32)):
            with T.Kernel(1, threads=32):
                T.rng_init(1, 0, 0, generator="curandStateXORWOW_t")
                A[T.get_thread_binding()] = T.rng_rand()


# ---- on the GPU -------------------------------------------------------------------------------
_run = rounds.run
_close = rounds.exact


def _mask_bits(bits):
    """A bool tensor (..., k) (k <= 32 lanes from lane 0) -> the uint32 masks as int64."""
    import torch
    k = bits.shape[-1]
    w = (torch.ones(k, dtype=torch.int64, device=bits.device) << torch.arange(k, device=bits.device))
    return (bits.long() * w).sum(-1)


def _ffs(m):
    return [(int(x) & -int(x)).bit_length() for x in m]


def _fns(mask, base, off):
    count = off - 1
    for pos in range(base, 32):
        if (mask >> pos) & 1:
            if count == 0:
                return pos
            count -= 1
    return 0xFFFFFFFF


@pytest.mark.gpu
def test_warp_votes_matches_and_shuffles_1_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 256
    X = torch.randn(n, device="cuda")
    X[64:96] = -X[64:96].abs() - 0.1  # a warp with an empty ballot (ffs 0)
    X[96:128] = X[96:128].abs() + 0.1  # a warp with a full one
    O = torch.full((n, 8), -7, dtype=torch.int64, device="cuda")
    _run(P.warp_votes_on_data(), X, O)
    w = X.view(-1, 32)
    ballot = _mask_bits(w > 0)
    ref = torch.stack([
        (w > 2.0).any(1).long(), (w > -3.0).all(1).long(), ballot,
        torch.tensor(_ffs(ballot.tolist()), device="cuda"), (w > 0).sum(1)], 1).repeat_interleave(32, 0)
    assert torch.equal(O[:, :5], ref)
    assert torch.equal(O[:, 5], torch.full_like(O[:, 5], int((X > -0.5).sum())))
    assert torch.equal(O[:, 6] != 0, torch.full_like(O[:, 6], bool((X > -4.5).all()), dtype=torch.bool))
    assert torch.equal(O[:, 7] != 0, torch.full_like(O[:, 7], bool((X > 2.5).any()), dtype=torch.bool))


@pytest.mark.gpu
def test_warp_votes_matches_and_shuffles_2_on_gpu():
    import torch
    torch.manual_seed(0)
    # match_any / match_all
    n = 128
    K = torch.randint(0, 4, (n,), device="cuda", dtype=torch.int32)
    K[32:64] = 7
    O = torch.full((n, 4), -7, dtype=torch.int64, device="cuda")
    _run(P.warp_match_groups(), K, O)
    kw = K.view(-1, 32)
    peers = _mask_bits(kw[:, :, None] == kw[:, None, :]).view(-1)
    lane = torch.arange(n, device="cuda") % 32
    low = torch.tensor(_ffs(peers.tolist()), device="cuda") - 1
    full = 0xFFFFFFFF
    same = (kw == kw[:, :1]).all(1).repeat_interleave(32)
    assert torch.equal(O[:, 0], peers)
    assert torch.equal(O[:, 1], (low == lane).long())
    assert torch.equal(O[:, 2], torch.full_like(O[:, 2], full))
    assert torch.equal(O[:, 3], torch.where(same, full, 0))


@pytest.mark.gpu
def test_warp_votes_matches_and_shuffles_3_on_gpu():
    import torch
    torch.manual_seed(0)
    # __fns, a half-warp ballot under its mask, activemask
    n = 64
    Xi = torch.randint(-10, 11, (n,), device="cuda", dtype=torch.int32)
    O = torch.full((n, 4), -7, dtype=torch.int64, device="cuda")
    _run(P.warp_fns_and_ballot_mask(), Xi, O)
    m = _mask_bits((Xi.view(-1, 32) % 3) == 0).tolist()
    half = _mask_bits((Xi.view(-1, 32)[:, :16] > 0)).tolist()
    for t in range(n):
        wi, ln = divmod(t, 32)
        assert int(O[t, 0]) == _fns(m[wi], 0, 1), t
        assert int(O[t, 1]) == _fns(m[wi], ln, 2), t
        assert int(O[t, 2]) == 0xFFFFFFFF
        assert int(O[t, 3]) == (half[wi] if ln < 16 else -1), t


@pytest.mark.gpu
def test_warp_votes_matches_and_shuffles_4_on_gpu():
    import torch
    torch.manual_seed(0)
    # shuffles
    n = 128
    X = torch.randn(n, device="cuda")
    I = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    O = torch.empty(n, 4, device="cuda")
    R = torch.empty(n, dtype=torch.int32, device="cuda")
    _run(P.shuffle_family(), X, I, O, R)
    w = X.view(-1, 32)
    lane = torch.arange(n, device="cuda") % 32
    _close(O[:, 0], w.sum(1).repeat_interleave(32), atol=1e-5, rtol=1e-5)
    _close(O[:, 1], torch.where(lane == 0, w.sum(1).repeat_interleave(32), 0.0), atol=1e-5, rtol=1e-5)
    _close(O[:, 2], w.cumsum(1).view(-1), atol=1e-5, rtol=1e-5)
    assert torch.equal(O[:, 3], X.view(-1, 16)[:, 5].repeat_interleave(16))
    assert torch.equal(R, I.view(-1, 32)[:, (torch.arange(32, device="cuda") + 3) % 32].reshape(-1))


@pytest.mark.gpu
def test_wide_global_loads_and_stores_1_on_gpu():
    import torch
    torch.manual_seed(1)
    n = 256
    X = torch.randn(n, device="cuda")
    outs = [torch.full((n,), float("nan"), device="cuda") for _ in range(6)]
    _run(P.ldg_widths(), X, *outs)
    y32, y64, y128, y256, p32, p128 = outs
    for y in (y32, y64, y128, y256):
        assert torch.equal(y, X)
    assert torch.equal(p32, torch.where(torch.arange(n, device="cuda") < n // 2, X, 0.0))
    assert torch.equal(p128, torch.where(torch.arange(n, device="cuda") < n // 2, X, 0.0))


@pytest.mark.gpu
def test_wide_global_loads_and_stores_2_on_gpu():
    import torch
    torch.manual_seed(1)
    n = 256
    X = torch.randn(n, device="cuda")
    outs = [torch.full((n,), float("nan"), device="cuda") for _ in range(5)]
    _run(P.stg_widths(), X, *outs)
    for y in outs[:4]:
        assert torch.equal(y, X)
    assert torch.equal(outs[4][:64], X[:64]) and bool(outs[4][64:].isnan().all())


@pytest.mark.gpu
def test_wide_global_loads_and_stores_3_on_gpu():
    import torch
    torch.manual_seed(1)
    table = torch.randn(300, device="cuda")
    idx = torch.randint(0, 300, (1000,), device="cuda", dtype=torch.int32)
    out = torch.empty(1000, device="cuda")
    _run(P.ldg_readonly_gather(), table, idx, out)
    _close(out, table[idx.long()] * 2 + table[idx.long() // 2], atol=1e-6, rtol=1e-6)


def _ints(*shape, lo=-4, hi=5, dtype=None):
    import torch
    t = torch.randint(lo, hi, shape, device="cuda").float()
    return t if dtype is None else t.to(dtype)


@pytest.mark.gpu
def test_element_atomics_1_on_gpu():
    import torch
    torch.manual_seed(2)
    K, M, N = 4, 128, 128
    A = torch.randn(K, M, N, device="cuda")
    B0, C0 = torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")
    B, C = B0.clone(), C0.clone()
    _run(P.atomic_add_slices_vectorized(), A, B, C)
    _close(B, B0 + A.sum(0), atol=1e-5, rtol=1e-5)
    _close(C, C0 + (2 * A - 1).sum(0), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_element_atomics_2_on_gpu():
    import torch
    torch.manual_seed(2)
    n = 256
    Src = torch.randn(n, device="cuda")
    H = torch.randn(n, device="cuda").half()
    O1 = torch.randn(n, device="cuda").half()
    O2 = torch.randn(n, device="cuda").bfloat16()
    O3 = torch.randn(n, device="cuda")
    r1 = (O1.double() + Src.half().double()).half()  # the value converted to the destination's type
    r2 = (O2.double() + Src.bfloat16().double()).bfloat16()
    r3 = O3 + H.float()
    _run(P.atomic_add_mixed_dtypes(), Src, H, O1, O2, O3)
    assert torch.equal(O1, r1) and torch.equal(O2, r2)
    _close(O3, r3, atol=1e-6, rtol=1e-6)


@pytest.mark.gpu
def test_element_atomics_3_on_gpu():
    import torch
    torch.manual_seed(2)
    M, N = 64, 128
    Ah, Af = _ints(M, N, dtype=torch.float16), _ints(M, N)
    Bh0, Bf0, Bm0 = _ints(M, N, dtype=torch.float16), _ints(M, N), _ints(M, N, dtype=torch.float16)
    Bh, Bf, Bm = Bh0.clone(), Bf0.clone(), Bm0.clone()
    _run(P.atomic_addx2_x4_grid(), Ah, Bh, Af, Bf, Bm)
    assert torch.equal(Bh, Bh0 + 3 * Ah)
    assert torch.equal(Bf, Bf0 + 3 * Af)
    assert torch.equal(Bm, Bm0 + 3 * Af.half())


@pytest.mark.gpu
def test_element_atomics_4_on_gpu():
    import torch
    torch.manual_seed(2)
    n, m = 96, 10
    idx = torch.randint(0, m, (n,), device="cuda", dtype=torch.int32)
    val = _ints(n, 4)
    dst0 = _ints(m, 4)
    dst = dst0.clone()
    Ah = torch.zeros(16, device="cuda", dtype=torch.float16)
    Ab = torch.zeros(16, device="cuda", dtype=torch.bfloat16)
    Ah[4:8] = torch.tensor([1, 2, 3, 4.0])
    Ab[8:12] = torch.tensor([1, 2, 3, 4.0])
    Bh0 = torch.zeros(16, device="cuda", dtype=torch.float16)
    Bb0 = torch.zeros(16, device="cuda", dtype=torch.bfloat16)
    Bh0[4:8] = torch.tensor([10, 20, 30, 40.0])
    Bb0[8:12] = torch.tensor([10, 20, 30, 40.0])
    Bh, Bb = Bh0.clone(), Bb0.clone()
    _run(P.atomic_addx4_scatter_rows(), idx, val, dst, Ah, Bh, Ab, Bb)
    assert torch.equal(dst, dst0.index_add(0, idx.long(), val))
    assert torch.equal(Bh.float(), Bh0.float() + 64 * Ah.float())
    assert torch.equal(Bb.float(), Bb0.float() + 64 * Ab.float())


@pytest.mark.gpu
def test_return_prev_and_bitwise_atomics_1_on_gpu():
    import torch
    torch.manual_seed(3)
    t = {}
    for name, shape, dt in [("Dst2", 2, torch.float32), ("Val2", 2, torch.float32), ("Prev2", 2, torch.float32),
                            ("Dh", 2, torch.float16), ("Vh", 2, torch.float16), ("Ph", 2, torch.float16),
                            ("Dst4", 4, torch.float32), ("Val4", 4, torch.float32), ("Prev4", 4, torch.float32),
                            ("Db", 4, torch.bfloat16), ("Vb", 4, torch.bfloat16), ("Pb", 4, torch.bfloat16)]:
        t[name] = _ints(shape, lo=1, hi=9, dtype=dt)
    t["S"] = torch.tensor([3.0, 3.0], device="cuda")
    t["SP"] = torch.zeros(2, device="cuda")
    init = {k: v.clone() for k, v in t.items()}
    _run(P.atomic_return_prev_forms(), *t.values())
    for d, v, p in [("Dst2", "Val2", "Prev2"), ("Dh", "Vh", "Ph"), ("Dst4", "Val4", "Prev4"), ("Db", "Vb", "Pb")]:
        assert torch.equal(t[p], init[d]), p
        assert torch.equal(t[d], init[d] + init[v]), d
    assert t["SP"].tolist() == [3.0, 3.0] and t["S"].tolist() == [5.0, 1.0]


@pytest.mark.gpu
def test_return_prev_and_bitwise_atomics_2_on_gpu():
    import torch
    torch.manual_seed(3)
    n = 512
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    A, B0 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    B, old = B0.clone(), torch.empty(n, device="cuda")
    _run(P.atomic_return_prev_tickets(), counter, out, A, B, old)
    assert int(counter) == n
    assert torch.equal(out.sort().values, torch.arange(n, device="cuda", dtype=torch.int32))
    assert torch.equal(old, B0) and torch.equal(B, B0 + A)


@pytest.mark.gpu
def test_return_prev_and_bitwise_atomics_3_on_gpu():
    import torch
    torch.manual_seed(3)
    n = 256
    X = torch.randn(n, device="cuda")
    Bits = torch.zeros(n // 32, dtype=torch.int32, device="cuda")
    Flag = torch.tensor([0x100], dtype=torch.int32, device="cuda")
    Mx, Mn, Sm = torch.full((1,), -100.0, device="cuda"), torch.full((1,), 100.0, device="cuda"), \
        torch.ones(1, device="cuda")
    _run(P.atomic_bitwise_and_orders(), X, Bits, Flag, Mx, Mn, Sm, 0x5)
    ref = _mask_bits(X.view(-1, 32) > 0)
    ref = torch.where(ref >= 2 ** 31, ref - 2 ** 32, ref)
    assert torch.equal(Bits.long(), ref)
    assert int(Flag) == 0x105
    assert float(Mx) == float(X.max()) and float(Mn) == float(X.min())
    _close(Sm, 1 + X.sum().reshape(1), atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_tile_and_tma_atomics_1_on_gpu():
    import torch
    torch.manual_seed(4)
    N, M = 256, 64
    X = _ints(N, dtype=torch.float16)
    Out0 = _ints(N, dtype=torch.float16)
    Out = Out0.clone()
    *tiles, exprs = P.atomic_tile_orders_and_exprs()
    for k in tiles:
        _run(k, X, Out)
    assert torch.equal(Out, Out0 + 3 * X)
    A0, C0 = torch.randn(M, M, device="cuda"), torch.randn(M, M, device="cuda")
    A, C = A0.clone(), C0.clone()
    S, Bs = torch.tensor([2.5], device="cuda"), torch.tensor([1.0], device="cuda")
    _run(exprs, A, C, S, Bs)
    assert torch.equal(A, A0 + 1) and torch.equal(C, torch.clamp(C0, min=0.5))
    assert float(Bs) == 1.0 + 8 * (2.5 + 1)  # 4 x 2 blocks, one thread each adds


@pytest.mark.gpu
def test_tile_and_tma_atomics_2_on_gpu():
    import torch
    torch.manual_seed(4)
    reps, tiles2 = P.tma_atomic_add_reduce()
    out0 = torch.randn(16, 16, device="cuda")
    out = out0.clone()
    _run(reps, out)
    _close(out, out0 + 16, atol=1e-5, rtol=0)
    A = torch.randn(4, 64, 64, device="cuda")
    D0 = torch.randn(64, 64, device="cuda")
    D = D0.clone()
    _run(tiles2, A, D)
    _close(D, D0 + A.sum(0), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_1_on_gpu():
    import torch
    torch.manual_seed(5)
    n = 128
    X = torch.randn(n, device="cuda")
    I = torch.empty(n, 4, dtype=torch.int32, device="cuda")
    F = torch.empty(n, 2, dtype=torch.float64, device="cuda")
    _run(P.alloc_var_initializers(), X, I, F)
    tx = torch.arange(n, device="cuda", dtype=torch.int32)
    assert torch.equal(I[:, 0], torch.ones_like(tx)) and torch.equal(I[:, 1], 2 * torch.ones_like(tx))
    assert torch.equal(I[:, 2], 3 * tx + 3) and torch.equal(I[:, 3], 5 * torch.ones_like(tx))
    _close(F[:, 0], torch.full_like(F[:, 0], 1e10), rtol=1e-12)
    x = X.clone()
    for _ in range(3):
        x = x * 0.5 + 1.0
    assert torch.equal(F[:, 1], x.double())


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_2_on_gpu():
    import torch
    torch.manual_seed(5)
    n = 512
    A0, B0 = torch.randn(16, 16, device="cuda"), torch.randn(16, 16, device="cuda")
    A, B = A0.clone(), B0.clone()
    Cnt = torch.empty(n, dtype=torch.int32, device="cuda")
    S = torch.empty(n, dtype=torch.int32, device="cuda")
    _run(P.unroll_forms(), A, B, Cnt, S)
    ref = A0.clone()
    ref[:, 0::4] += 1
    assert torch.equal(A, ref) and torch.equal(B, 2 * B0)
    k = torch.arange(n, device="cuda", dtype=torch.int32) % 32
    assert torch.equal(Cnt, k * (k - 1) // 2)
    assert torch.equal(S, 258 + torch.arange(n, device="cuda", dtype=torch.int32))


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_3_on_gpu():
    import torch
    torch.manual_seed(5)
    N = 2000
    A = torch.randn(N, device="cuda")
    B = torch.full((N,), 9.0, device="cuda")
    _run(P.assume_forms(), A, B, torch.tensor([1, 3], dtype=torch.int32, device="cuda"))
    ref = 3 * A
    ref[1:4] = -1
    ref[1] = -2
    assert torch.equal(B, ref)


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_4_on_gpu():
    import torch
    torch.manual_seed(5)
    A = torch.zeros(1024, device="cuda")
    Pp = torch.zeros(8, device="cuda")
    Ss = torch.zeros(1, device="cuda")
    _run(P.grid_sync_reverse(), A, Pp, Ss)
    assert torch.equal(A, torch.full_like(A, 1023.0))
    ref = torch.tensor([sum(1024 - b * 128 - i - 1 for i in range(128)) for b in range(8)], device="cuda",
                       dtype=torch.float32)
    assert torch.equal(Pp, ref) and float(Ss) == 1023 * 1024 / 2


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_5_on_gpu():
    import torch
    torch.manual_seed(5)
    A = torch.rand(1024, device="cuda")
    _run(P.grid_sync_inside_parallel(), A)
    assert torch.equal(A, torch.full_like(A, 1023.0))


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_6_on_gpu():
    import torch
    torch.manual_seed(5)
    N = 10000
    A = torch.randn(N, device="cuda")
    B, C, D = (torch.empty(N, device="cuda") for _ in range(3))
    _run(P.pdl_two_kernels(), A, B, C, D)
    assert torch.equal(B, A + 1) and torch.equal(C, (A + 1) * 2)
    x = A.clone()
    for _ in range(20):
        x = x * 0.5 + 0.25
    _close(D, x, atol=1e-6, rtol=1e-6)


@pytest.mark.gpu
def test_scalars_loops_and_grid_forms_7_on_gpu():
    import torch
    torch.manual_seed(5)
    out = torch.full((8,), -1, dtype=torch.int32, device="cuda")
    _run(P.named_barrier_handoff(), torch.tensor([41], dtype=torch.int32, device="cuda"), out)
    assert out.tolist() == [41 + r * r for r in range(8)]


@pytest.mark.gpu
def test_tma_stores_and_leaders_1_on_gpu():
    import torch
    torch.manual_seed(6)
    A = torch.randn(512, 512, device="cuda").half()
    B = torch.randn(512, 512, device="cuda").half()
    ref = (A.float() @ B.float())
    for f in (P.gemm_tma_store(), P.gemm_tma_store_3_stages_plain()):
        C = torch.full((512, 512), float("nan"), device="cuda").half()
        _run(f, A, B, C)
        _close(C.float(), ref, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_tma_stores_and_leaders_2_on_gpu():
    import torch
    torch.manual_seed(6)
    M, N = 256, 128
    X = torch.randn(M, N, device="cuda")
    Y, Z = torch.empty_like(X), torch.empty_like(X)
    V, W = torch.randn(N, device="cuda"), torch.empty(N, device="cuda")
    _run(P.tma_store_batched_rows(), X, Y, Z, V, W)
    assert torch.equal(Y, 2 * X) and torch.equal(Z, X + 1) and torch.equal(W, V * V)


@pytest.mark.gpu
def test_tma_stores_and_leaders_3_on_gpu():
    import torch
    torch.manual_seed(6)
    per_warp, block = P.tma_copy_per_warp_leader()
    A = torch.randn(64, 512, device="cuda")
    Bs = torch.empty(64, device="cuda")
    _run(per_warp, A, Bs)
    _close(Bs, A.sum(1), atol=1e-4, rtol=1e-5)
    E = torch.empty(64, 2, device="cuda")
    _run(block, A, E)
    assert torch.equal(E, A[:, [0, 511]])


@pytest.mark.gpu
def test_fast_math_and_rounding_1_on_gpu():
    import torch
    torch.manual_seed(7)
    n = 1024
    H = (torch.rand(n, device="cuda") * 2.4 - 1.2).half()
    Bb = (torch.rand(n, device="cuda") * 2.4 - 1.2).bfloat16()
    OH, OB = torch.empty(n, 2, device="cuda").half(), torch.empty(n, 2, device="cuda").bfloat16()
    _run(P.tan_halves(), H, Bb, OH, OB)
    # tan at float32, rounded to the element's type (one ulp of slack for the rounding)
    _close(OH[:, 0].float(), torch.tan(H.float()), atol=1e-3, rtol=1e-3)
    _close(OB[:, 0].float(), torch.tan(Bb.float()), atol=8e-3, rtol=8e-3)
    _close(OH[:, 1].float(), torch.tan(H.float()), atol=2e-3, rtol=2e-3)
    _close(OB[:, 1].float(), torch.tan(Bb.float()), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_fast_math_and_rounding_2_on_gpu():
    import torch
    torch.manual_seed(7)
    n = 1024
    X = torch.rand(n, device="cuda") * 2.8 - 1.4
    Pp = torch.rand(n, device="cuda") * 10 + 0.1
    O = torch.empty(n, 11, device="cuda")
    _run(P.fast_math_family(), X, Pp, O)
    xd, pd = X.double(), Pp.double()
    refs = [xd.exp(), 10 ** xd, pd.log(), pd.log2(), pd.log10(), xd.tan(), xd.cos(), xd.sin(), 1 / pd,
            10 ** xd, pd.log10()]
    tols = [2e-6, 2e-6, 1e-6, 1e-6, 1e-6, 2e-5, 1e-6, 1e-6, 1e-7, 1e-6, 1e-6]
    for c, (r, tol) in enumerate(zip(refs, tols)):
        _close(O[:, c].double(), r, atol=tol, rtol=tol * 4)


@pytest.mark.gpu
def test_fast_math_and_rounding_3_on_gpu():
    import torch
    torch.manual_seed(7)
    n = 1024
    X = torch.randn(n, device="cuda") * 10
    X[:64] = torch.arange(-32, 32, device="cuda") + 0.5  # ties
    Y = torch.randn(n, device="cuda") * 3
    Y[Y.abs() < 0.1] = 0.5
    Hh = (torch.randn(n, device="cuda") * 10).half()
    Hh[:64] = (torch.arange(-32, 32, device="cuda") + 0.5).half()
    I = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    O = torch.empty(n, 8, device="cuda")
    OH = torch.empty(n, 3, device="cuda").half()
    OI = torch.empty(n, dtype=torch.int32, device="cuda")
    _run(P.rounding_and_fmod(), X, Y, Hh, I, O, OH, OI)
    away = lambda t: (t.double().sign() * (t.double().abs() + 0.5).floor()).to(t.dtype)  # noqa: E731
    assert torch.equal(O[:, 0], torch.fmod(X, Y))
    assert torch.equal(O[:, 1], X.abs())
    assert torch.equal(O[:, 2], torch.round(X)) and torch.equal(O[:, 3], torch.round(X))
    assert torch.equal(O[:, 4], away(X))
    assert torch.equal(O[:, 5], X.floor()) and torch.equal(O[:, 6], X.ceil()) and torch.equal(O[:, 7], X.trunc())
    assert torch.equal(OH[:, 0], torch.round(Hh.float()).half())
    assert torch.equal(OH[:, 1], away(Hh.float()).half())
    assert torch.equal(OH[:, 2], Hh.abs()) and torch.equal(OI, I.abs())


def _f32_neighbours(x):
    f = np.float32(x)
    return [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]


def _directed(exact_cmp, approx, mode):
    """The float32 that ``mode`` rounds to, among the neighbours of ``approx``; exact_cmp(c)
    compares c with the exact result (-1, 0, 1)."""
    cands = sorted(set(float(c) for c in _f32_neighbours(approx)))
    below = [c for c in cands if exact_cmp(c) <= 0]
    above = [c for c in cands if exact_cmp(c) >= 0]
    lo, hi = max(below), min(above)
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    return lo if exact_cmp(0.0) <= 0 else hi  # rz: toward zero (0 <= exact: down)


def _cmp_sqrt(v, x):
    """v compared with sqrt(x) (x >= 0), exactly."""
    if v < 0:
        return -1
    sq = Fraction(v) ** 2
    return (sq > x) - (sq < x)


def _cmp(c, q):
    c = Fraction(c)
    return (c > q) - (c < q)


@pytest.mark.gpu
def test_ieee_rounding_modes_on_gpu():
    import torch
    torch.manual_seed(8)
    n = 1024
    A, B, C = torch.randn(n, device="cuda"), torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    O = torch.full((n, 4, 6), float("nan"), device="cuda")
    R = torch.empty(n, device="cuda")
    for k in P.ieee_rounding_modes():
        _run(k, A, B, C, O, R)
    # round to nearest: what torch's float32 arithmetic gives
    assert torch.equal(O[:, 0, 0], A + B) and torch.equal(O[:, 0, 1], A * B)
    assert torch.equal(O[:, 0, 3], A / B) and torch.equal(O[:, 0, 4], 1 / B)
    assert torch.equal(O[:, 0, 5], A.abs().sqrt())
    assert torch.equal(O[:, 0, 2], (A.double() * B.double() + C.double()).float())  # one rounding
    _close(R, B.abs().double().rsqrt().float(), atol=0, rtol=1.2e-7)
    a, b, c, o = A.cpu().numpy(), B.cpu().numpy(), C.cpu().numpy(), O.cpu().numpy()
    for i in range(0, n, 7):
        fa, fb, fc = Fraction(float(a[i])), Fraction(float(b[i])), Fraction(float(c[i]))
        exact = [fa + fb, fa * fb, fa * fb + fc, fa / fb, 1 / fb]
        for m, mode in ((1, "rz"), (2, "ru"), (3, "rd")):
            for op, q in enumerate(exact):
                want = _directed(lambda v, q=q: _cmp(v, q), float(q), mode)
                assert float(o[i, m, op]) == want, (i, mode, op)
            x = abs(fa)  # sqrt: compare squares
            want = _directed(lambda v, x=x: _cmp_sqrt(v, x), math.sqrt(float(x)), mode)
            assert float(o[i, m, 5]) == want, (i, mode, "sqrt")


@pytest.mark.gpu
def test_casts_broadcasts_and_indices_1_on_gpu():
    import torch
    torch.manual_seed(9)
    n = 1024
    X = torch.randn(n, device="cuda") * 100
    X[:8] = torch.tensor([1000.0, -1000.0, 460.0, -470.0, 1e5, -1e5, 6e4, 0.0], device="cuda")
    H = (torch.randn(n, device="cuda") * 200).half()
    E4, E4r, EH = (torch.empty(n, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    E5 = torch.empty(n, device="cuda").to(torch.float8_e5m2)
    BH, BF = torch.empty(n, device="cuda").half(), torch.empty(n, device="cuda")
    Z = torch.ones(8, device="cuda").to(torch.float8_e4m3fn)
    _run(P.fp8_casts_saturating(), X, H, E4, E5, E4r, EH, BH, BF, Z)
    sat4 = X.clamp(-448, 448).to(torch.float8_e4m3fn)
    bits = lambda t: t.view(torch.uint8)  # noqa: E731
    assert torch.equal(bits(E4), bits(sat4)) and torch.equal(bits(E4r), bits(sat4))
    assert torch.equal(bits(E5), bits(X.clamp(-57344, 57344).to(torch.float8_e5m2)))
    assert torch.equal(bits(EH), bits(H.float().clamp(-448, 448).to(torch.float8_e4m3fn)))
    assert torch.equal(BH, sat4.half()) and torch.equal(BF, sat4.float())
    assert torch.equal(bits(Z), torch.zeros(8, dtype=torch.uint8, device="cuda"))


@pytest.mark.gpu
def test_casts_broadcasts_and_indices_2_on_gpu():
    import torch
    torch.manual_seed(9)
    for k, (dt, v, c) in zip(P.int8_broadcast_32_lanes(), [(torch.int8, 91, -37), (torch.uint8, 200, 213)]):
        out, out2 = torch.zeros(32, dtype=dt, device="cuda"), torch.zeros(32, dtype=dt, device="cuda")
        _run(k, torch.tensor([v], dtype=dt, device="cuda"), out, out2)
        assert torch.equal(out, torch.full_like(out, v)) and torch.equal(out2, torch.full_like(out2, c))


@pytest.mark.gpu
def test_casts_broadcasts_and_indices_3_on_gpu():
    import torch
    torch.manual_seed(9)
    A = torch.randn(16, device="cuda")
    Bn, Cn = torch.empty(5, device="cuda"), torch.empty(8, device="cuda")
    _run(P.negative_indices(), A, Bn, Cn, 5)
    assert torch.equal(Bn, torch.stack([A[15], A[15], A[14], A[13], A[12]]))
    assert torch.equal(Cn, A[5:13])


@pytest.mark.gpu
def test_reducers_reductions_and_scans_1_on_gpu():
    import torch
    torch.manual_seed(10)
    M, K = 32, 512
    A = torch.randn(M, K, device="cuda")
    S, Mx = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    Tr, Cnt, Tot = torch.empty(16, M, device="cuda"), torch.empty(M, dtype=torch.int32, device="cuda"), \
        torch.empty(1, device="cuda")
    _run(P.reducer_epochs(), A, S, Mx, Tr, Cnt, Tot)
    _close(S, A.sum(1), atol=1e-4, rtol=1e-5)
    assert torch.equal(Mx, A.max(1).values) and torch.equal(Cnt, (A > 0).sum(1).int())
    assert torch.equal(Tr, A[:, :16].t())
    _close(Tot, (A[0, :16].sum() + A[1, :16].sum()).reshape(1), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_reducers_reductions_and_scans_2_on_gpu():
    import torch
    torch.manual_seed(10)
    M, N = 64, 128
    A = torch.randn(M, N, device="cuda")
    H = torch.randn(M, N, device="cuda").half()
    Bf = torch.randn(M, N, device="cuda").bfloat16()
    H[3, 17] = float("nan")
    H[10, 127] = float("nan")
    Bf[5, 0] = float("nan")
    A[7, 3] = float("nan")
    S, Mx = torch.empty(M, device="cuda"), torch.empty(M, device="cuda")
    HN, BN = torch.empty(M, 3, device="cuda").half(), torch.empty(M, 2, device="cuda").bfloat16()
    _run(P.reduce_batch_and_nan(), A, H, Bf, S, Mx, HN, BN)
    _close(S, A.sum(1), atol=1e-4, rtol=1e-5)  # row 7: NaN
    # the default max / min are NaN-quiet (TileLang's fmaxf / __hmax / __hmin): a NaN is skipped
    assert torch.equal(Mx, A.nan_to_num(nan=-float("inf")).max(1).values)
    assert float(BN[5, 1]) == float(Bf[5, 1:].min())
    # torch's max / min / amax propagate NaN, as nan_propagate=True asks
    _close(HN[:, 0], H.max(1).values)
    _close(HN[:, 1], H.min(1).values)
    _close(HN[:, 2], H.abs().max(1).values)
    _close(BN[:, 0], Bf.max(1).values)
    assert torch.equal(BN[:, 1], Bf.nan_to_num(nan=float("inf")).min(1).values)


@pytest.mark.gpu
def test_reducers_reductions_and_scans_3_on_gpu():
    import torch
    torch.manual_seed(10)
    M, N = 32, 64
    A = torch.randn(M, N, device="cuda")
    V = torch.randn(N, device="cuda")
    R, C, VO = torch.empty_like(A), torch.empty_like(A), torch.empty_like(V)
    _run(P.fragment_cumsums(), A, R, C, V, VO)
    _close(R, A.cumsum(1), atol=1e-5, rtol=1e-5)
    _close(C, A.flip(0).cumsum(0).flip(0), atol=1e-5, rtol=1e-5)
    _close(VO, V.cumsum(0), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_philox_draws_on_gpu():
    import torch
    from test_rng import draws, uniform, uniform_double, _MASK
    M, seed, per = 8192, 42, 64
    outs = [torch.empty(M, dtype=t, device="cuda") for t in
            (torch.uint32, torch.float32, torch.float64, torch.float32, torch.float64)]
    _run(P.rng_statistics(), *outs)
    a, b, c, d, e = (o.cpu() for o in outs)
    for g in (0, 1, 31, 32, 127):  # threads of several blocks
        base = g * per
        r = draws(seed, 0, base, per * 4)
        assert [int(x) & _MASK for x in a[base:base + 8]] == r[:8], g
        assert [float(x) for x in b[base:base + 8]] == [uniform(x) for x in r[per:per + 8]], g
        assert [float(x) for x in c[base:base + 4]] == \
            [uniform_double(r[2 * per + 2 * i], r[2 * per + 2 * i + 1]) for i in range(4)], g
    assert 0 < float(b.min()) and float(b.max()) <= 1 and abs(float(b.mean()) - 0.5) < 0.01
    assert abs(float(b.var()) - 1 / 12) < 0.005
    assert 0 < float(c.min()) and float(c.max()) <= 1 and abs(float(c.mean()) - 0.5) < 0.01
    for normal in (d.double(), e):
        assert abs(float(normal.mean())) < 0.05 and abs(float(normal.std()) - 1) < 0.05
    hist = torch.histc(b, bins=16, min=0, max=1)
    assert bool((hist > M / 16 * 0.85).all()), hist


@pytest.mark.gpu
def test_more_edges_1_on_gpu():
    import torch
    torch.manual_seed(11)
    M, N, K = 500, 456, 256
    A = torch.randn(M, K, device="cuda").bfloat16()
    B = torch.randn(K, N, device="cuda").bfloat16()
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_tma_store_ragged(), A, B, C)
    _close(C, A.float() @ B.float(), atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_more_edges_2_on_gpu():
    import torch
    torch.manual_seed(11)
    for k, (shape, dt, reps) in zip(P.tma_atomic_add_layouts(),
                                    [((64, 64), torch.float32, 2), ((16, 24), torch.float32, 3),
                                     ((16, 16), torch.int32, 4), ((16, 16), torch.uint64, 4),
                                     ((32, 64), torch.bfloat16, 2)]):
        S = torch.randint(0, 50, shape, device="cuda").to(dt)
        D0 = torch.randint(0, 50, shape, device="cuda").to(dt)
        D = D0.clone()
        _run(k, S, D)
        if dt == torch.uint64:
            assert torch.equal(D.view(torch.int64), D0.view(torch.int64) + reps * S.view(torch.int64))
        else:
            assert torch.equal(D, D0 + reps * S), (shape, dt)


@pytest.mark.gpu
def test_more_edges_3_on_gpu():
    import torch
    torch.manual_seed(11)
    n = 200
    X, O0 = _ints(n, dtype=torch.float16), _ints(n, dtype=torch.float16)
    Y, P0 = _ints(n, dtype=torch.bfloat16), _ints(n, dtype=torch.bfloat16)
    Z, Q0 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    O, Pp, Q = O0.clone(), P0.clone(), Q0.clone()
    _run(P.atomic_tile_ragged_orders(), X, O, Y, Pp, Z, Q)
    assert torch.equal(O, O0 + 2 * X) and torch.equal(Pp, P0 + 2 * Y)
    assert torch.equal(Q[:3], Q0[:3]) and torch.equal(Q[3:], torch.maximum(Q0[3:], Z[3:]))


@pytest.mark.gpu
def test_more_edges_4_on_gpu():
    import torch
    torch.manual_seed(11)
    n = 64
    X = torch.randn(n, device="cuda")
    O = torch.empty(n, 4, device="cuda")
    _run(P.shuffle_widths(), X, O)
    x = X.tolist()
    for t in range(n):
        seg8, l8 = t - t % 8, t % 8
        assert float(O[t, 0]) == (x[t + 3] if l8 + 3 < 8 else x[t]), t
        assert float(O[t, 1]) == (x[t - 2] if l8 >= 2 else x[t]), t
        assert float(O[t, 2]) == x[t ^ 2], t
        assert float(O[t, 3]) == (x[seg8 + 3] if t % 32 < 16 else -1.0), t


@pytest.mark.gpu
def test_more_edges_5_on_gpu():
    import torch
    torch.manual_seed(11)
    M, N = 16, 128
    A = torch.randn(M, N, device="cuda")
    I = torch.randint(-5, 6, (M, N), device="cuda", dtype=torch.int32)
    R, S, D, K = (torch.empty_like(A) for _ in range(4))
    IS = torch.empty_like(I)
    _run(P.cumsum_more(), A, I, R, S, D, K, IS)
    _close(D, A.cumsum(1), atol=1e-5, rtol=1e-5)
    assert torch.equal(K, A)
    _close(R, A.flip(1).cumsum(1).flip(1), atol=1e-5, rtol=1e-5)
    _close(S, A.cumsum(0), atol=1e-5, rtol=1e-5)
    assert torch.equal(IS, I.cumsum(1).int())


@pytest.mark.gpu
def test_more_edges_6_on_gpu():
    import torch
    torch.manual_seed(11)
    from test_rng import draws, uniform, _MASK
    M = 4096
    Ar = torch.empty(M, dtype=torch.uint32, device="cuda")
    U = torch.empty(M, device="cuda")
    _run(P.rng_default_sequence(), Ar, U)
    a, u = Ar.cpu(), U.cpu()
    for g in (0, 1, 127, 128, 2047):  # the subsequence is threadIdx.x + blockIdx.x * blockDim.x
        r = draws(7, g, 0, 4)
        assert [int(x) & _MASK for x in a[2 * g:2 * g + 2]] == r[:2], g
        assert [float(x) for x in u[2 * g:2 * g + 2]] == [uniform(x) for x in r[2:]], g


@pytest.mark.gpu
def test_more_edges_7_on_gpu():
    import torch
    torch.manual_seed(11)
    n = 512
    H, G = torch.randn(n, device="cuda").half(), (torch.randn(n, device="cuda") + 3).half()
    Bb, Cb = torch.randn(n, device="cuda").bfloat16(), (torch.randn(n, device="cuda") + 3).bfloat16()
    OH, OB = torch.empty(n, 7, device="cuda").half(), torch.empty(n, 4, device="cuda").bfloat16()
    _run(P.ieee_halves_and_fp16_fast(), H, G, Bb, Cb, OH, OB)
    for o, a, b in ((OH, H, G), (OB, Bb, Cb)):
        ad, bd = a.double(), b.double()
        assert torch.equal(o[:, 0], (ad + bd).to(a.dtype))
        assert torch.equal(o[:, 1], (ad * bd).to(a.dtype))
        assert torch.equal(o[:, 2], (ad * bd + ad).to(a.dtype))
        ulp = 2.0 ** -10 if a.dtype == torch.float16 else 2.0 ** -7
        _close(o[:, 3].double(), ad / bd, atol=1e-6, rtol=ulp)  # CUDA's __hdiv: within an ulp
    hd = H.double()
    _close(OH[:, 4].double(), hd.exp(), atol=1e-3, rtol=2e-3)
    _close(OH[:, 5].double(), G.double().abs().log(), atol=2e-3, rtol=2e-3)
    _close(OH[:, 6].double(), hd.sin(), atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
def test_alloc_var_spellings_and_vectorized_casts_1_on_gpu():
    import torch
    torch.manual_seed(12)
    O = torch.full((6,), -9, dtype=torch.int32, device="cuda")
    F = torch.empty(2, device="cuda")
    _run(P.alloc_var_positional_forms(), O, F)
    assert O.tolist() == [3, 3, 4, 5, 5, 12] and F.tolist() == [2.5, 3.0]


@pytest.mark.gpu
def test_alloc_var_spellings_and_vectorized_casts_2_on_gpu():
    import torch
    torch.manual_seed(12)
    n = 1024
    X = torch.randn(n, device="cuda") * 30
    H = (torch.randn(n, device="cuda") * 300).half()
    B = (torch.randn(n, device="cuda") * 300).bfloat16()
    E4 = (torch.randn(n, device="cuda") * 50).to(torch.float8_e4m3fn)
    E5 = (torch.randn(n, device="cuda") * 500).to(torch.float8_e5m2)
    XH, XB = torch.empty(n, device="cuda").half(), torch.empty(n, device="cuda").bfloat16()
    HX, BX = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    E4X, E5X = torch.empty(n, 3, device="cuda"), torch.empty(n, 3, device="cuda")
    HE, BE = (torch.empty(n, device="cuda").to(torch.float8_e4m3fn) for _ in range(2))
    _run(P.vectorized_casts(), X, H, B, E4, E5, XH, XB, HX, BX, E4X, E5X, HE, BE)
    assert torch.equal(XH, X.half()) and torch.equal(XB, X.bfloat16())
    assert torch.equal(HX, H.float()) and torch.equal(BX, B.float())
    for got, e in ((E4X, E4), (E5X, E5)):
        for c in range(3):
            assert torch.equal(got[:, c], e.float()), c
    bits = lambda t: t.view(torch.uint8)  # noqa: E731
    assert torch.equal(bits(HE), bits(H.float().clamp(-448, 448).to(torch.float8_e4m3fn)))
    assert torch.equal(bits(BE), bits(B.float().clamp(-448, 448).to(torch.float8_e4m3fn)))


@pytest.mark.gpu
def test_shuffle_dtypes_on_gpu():
    import torch
    torch.manual_seed(13)
    n = 64
    H, B = torch.randn(n, device="cuda").half(), torch.randn(n, device="cuda").bfloat16()
    L = torch.randint(-2 ** 62, 2 ** 62, (n,), device="cuda")
    D = torch.randn(n, device="cuda", dtype=torch.float64)
    OH, OB = torch.empty_like(H), torch.empty_like(B)
    OL, OD = torch.empty_like(L), torch.empty_like(D)
    OU = torch.empty(n, dtype=torch.uint8, device="cuda")
    _run(P.shuffle_dtypes(), H, B, L, D, OH, OB, OL, OD, OU)
    t = torch.arange(n, device="cuda")
    lane = t % 32
    assert torch.equal(OH, H[t ^ 1])
    assert torch.equal(OB, B[torch.where(lane < 31, t + 1, t)])
    assert torch.equal(OL, L[t - lane + 7])
    assert torch.equal(OD, D[torch.where(lane >= 1, t - 1, t)])
    assert torch.equal(OU, ((t ^ 3) * 5 % 256).to(torch.uint8))


@pytest.mark.gpu
def test_shared_memory_atomics_on_gpu():
    import torch
    torch.manual_seed(14)
    n, bins = 4096, 64
    keys = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    keys[keys == 5] = 6  # an empty bin
    vals = torch.randn(n, device="cuda")
    H = torch.full((bins,), -1, dtype=torch.int32, device="cuda")
    Mx, Sm = torch.empty(bins, device="cuda"), torch.empty(bins, device="cuda")
    Tk = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    Pair = torch.tensor([1.0, 2.0], device="cuda").half()
    _run(P.shared_memory_atomics(), keys, vals, H, Mx, Sm, Tk, Pair)
    kl = keys.long()
    assert torch.equal(H, torch.bincount(kl, minlength=bins).int())
    ref_mx = torch.full((bins,), -float("inf"), device="cuda").scatter_reduce(0, kl, vals, "amax")
    assert torch.equal(Mx, ref_mx)
    _close(Sm, torch.zeros(bins, device="cuda").index_add(0, kl, vals), atol=1e-4, rtol=1e-5)
    assert torch.equal(Tk.sort().values, torch.arange(256, device="cuda", dtype=torch.int32))
    assert Pair.tolist() == [100.0, 200.0]


@pytest.mark.gpu
def test_ldg_packed_narrow_on_gpu():
    import torch
    torch.manual_seed(15)
    n = 256
    H, B = torch.randn(n, device="cuda").half(), torch.randn(n, device="cuda").bfloat16()
    I = torch.randint(-128, 128, (n,), device="cuda", dtype=torch.int8)
    YH, YB, YI = torch.empty_like(H), torch.empty_like(B), torch.empty_like(I)
    _run(P.ldg_packed_narrow(), H, B, I, YH, YB, YI)
    assert torch.equal(YH, H) and torch.equal(YB, B) and torch.equal(YI, I)


@pytest.mark.gpu
def test_reduce_shared_and_batched_on_gpu():
    import torch
    torch.manual_seed(16)
    M, N = 128, 64
    A = torch.randn(M, N, device="cuda")
    Bf = torch.randn(M, N, device="cuda").bfloat16()
    H = torch.randn(M, N, device="cuda").half()
    O = torch.empty(M, 3, device="cuda")
    OB, OH = torch.empty(M, device="cuda").bfloat16(), torch.empty(M, device="cuda").half()
    _run(P.reduce_shared_and_batched(), A, Bf, H, O, OB, OH)
    _close(O[:, 0], A.sum(1), atol=1e-4, rtol=1e-5)
    _close(O[:, 1], A.abs().sum(1), atol=1e-4, rtol=1e-5)
    assert torch.equal(O[:, 2], A.abs().max(1).values)
    assert torch.equal(OB, Bf.min(1).values)
    _close(OH.float(), H.float().sum(1), atol=2e-2, rtol=1e-2)  # fp16 partial sums
