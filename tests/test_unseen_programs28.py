"""A twenty-eighth set of programs in TileLang's idioms (tests/unseen_programs28.py): TileLang's
newest surface (T.unroll(explicit=True), a reduction's enable_fadd2 annotation, T.pow with an
integer exponent <= 0, T.__exp, alloc_var initializers, a scalar T.copy across dtypes, a
scalar atomic_max returning the previous value) and feature mixes (a T.macro loading one
stage of a 3-D shared buffer inside T.Pipelined, T.Parallel in T.serial in T.Pipelined, two
T.Kernel launches in one prim_func, a T.symbolic length in the grid and a tail loop, one
accumulator fed by two GEMMs of different K, a float32 -> float16 shared-to-shared copy
before a GEMM, a reduction into a (1,) fragment broadcast back, a T.dynamic out_idx output).
CPU: each builds to an sm_90a cubin and what matters is checked in the generated source.
GPU: each matches a torch reference."""

import pytest

import rounds
import unseen_programs28 as P

PROGRAMS = ["explicit_unroll_poly", "rowsum_scalar_fadd", "pow_negative_exp", "var_init_dtype_cast_copy",
            "atomic_max_prev", "gemm_macro_stage_slices", "parallel_in_serial_in_pipelined",
            "two_launch_normalize", "symbolic_grid_and_tail_loop", "two_gemms_one_accumulator",
            "gemm_f32_shared_to_f16", "reduce_to_scalar_broadcast", "dynamic_rows_output",
            "local_softmax_per_thread", "local_colmin_per_thread", "bit_intrinsics_mix", "lds64_sts64_reverse",
            "row_lse_reducer_epochs", "legacy_reducer_rowdot", "gemm_symbolic_k_swz_copy",
            "reverse_serial_suffix", "pow_integer_forms", "atomic_tile_release", "atomic_addx2_prev_pairs",
            "atomic_addx2_prev_named", "gemm_order_stage_scaled", "negate_reciprocal",
            "slice_name_arithmetic"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_kernel_is_listed(P, PROGRAMS)
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated source says ------------------------------------------------------
def test_newest_surface_forms():
    src = _body("explicit_unroll_poly")
    assert "for d in cutlass.range_constexpr(0, 4):" in src  # explicit: unrolled at compile time
    assert "acc[0] = acc[0] * x + tcmath.as_float(4 - d, cutlass.Float32)" in src
    src = _body("pow_negative_exp")
    # x ** -2 stays a true power (TileLang once returned x); x ** 0 is one; __exp is e ** x
    assert "cute.math.pow(x, cutlass.Float32(-2.0))" in src
    assert "+ cutlass.Float32(1.0) +" in src
    assert "cute.math.exp2(x * cutlass.Float32(1.4426950408889634)" in src
    src = _body("var_init_dtype_cast_copy")
    assert "base = cute.make_rmem_tensor((1,), cutlass.Int32)" in src and "base[0] = 3" in src
    assert "h[i1] = cutlass.Float16(X[bx * 128 + tx + i1])" in src  # scalar copy casts to h's dtype
    src = _body("atomic_max_prev")
    assert 'prev = tca.atomic_fetch(M, (0,), X[bx * 128 + tx], "max")' in src


def test_mixes():
    src = _body("gemm_macro_stage_slices")
    # the macro's copies land in stage k % 2 of the 3-D buffers; the GEMM reads the same stage
    assert "k % 2 * 2048 + i3 * 32 + i4" in src and "k % 2 * 2048 + i5 * 64 + i6" in src
    assert "tc_smem + cute.assume(0 + (k % 2) * 4096, divby=1024)" in src
    assert "tc_smem + cute.assume(8192 + (k % 2) * 4096, divby=1024)" in src
    src = _body("two_launch_normalize")
    assert "def tilecute_main_1(" in src  # the second launch is its own kernel
    assert "W[bx * 8 + i3] = tcr.pick(m_f, i3, 8)" in src and "Y[row, j_1_] = X[row, j_1_] / W[row]" in src
    src = _body("symbolic_grid_and_tail_loop")
    assert "L: cutlass.Int32" in src and "if g < L:" in src and "if g + t * 37 < L:" in src
    src = _body("gemm_f32_shared_to_f16")
    # the float32 stage is read, converted and stored into the swizzled float16 tile
    assert "A32 = cute.make_tensor(cute.recast_ptr(tc_smem + cute.assume(0 + (k % 2) * 8192" in src
    assert "cute.make_tensor(A16.iterator + cute.assume((i3 * 32 + i4) ^" in src
    src = _body("dynamic_rows_output")
    assert "M: cutlass.Int32" in src and "if bx * 32 + i1 < M:" in src


def test_local_reductions_and_intrinsics():
    src = _body("local_softmax_per_thread")
    # per-thread reductions: no warp or block allreduce, the max seeded with -inf
    assert "warp_allreduce" not in src and "block_allreduce" not in src
    assert 'mx[r1] = cutlass.Float32(float("-inf"))' in src and "mx[r1] = cute.arch.fmax(mx[r1], src[rv2])" in src
    assert "sm[r3] = sm[r3] + src[rv4]" in src and "/ sm[0]" in src
    src = _body("local_colmin_per_thread")
    assert 'dst[r1] = cutlass.Float16(float("inf"))' in src and "src[rv2, r1]" in src  # along dim 0
    src = _body("bit_intrinsics_mix")
    assert 'tca.atomic_or(O, (0,), cutlass.Uint32(X[g]), "relaxed")' in src
    assert "cute.arch.rcp_approx(F[g])" in src and "tcmath.fns(cutlass.Uint32(X[g]), 0, 1)" in src
    assert "(g + 16 - 1) // 16 * 16" in src
    src = _body("lds64_sts64_reverse")
    assert "lds64_words[1] = cutlass.Uint32(s[tx * 2 + 1])" in src and "t[(127 - tx) * 2 + 1] = lds64_words[1]" in src


def test_reducers():
    src = _body("row_lse_reducer_epochs")
    # each tile's epochs start from the identity inside the loop and end in a block allreduce
    assert 'mr[i3] = cutlass.Float32(float("-inf"))' in src and 'sr[i4] = cutlass.Float32(0.0)' in src
    assert 'tcr.block_allreduce(mr, "max", mr_scratch, 4, 4)' in src
    assert 'tcr.block_allreduce(sr, "sum", sr_scratch, 4, 4)' in src
    assert src.index("for k in cutlass.range(0, 8):") < src.index("mr[i3] = ")
    src = _body("legacy_reducer_rowdot")
    assert "r[i] = r[i] + g[tc_lane8] * y[tc_lane8]" in src and 'tcr.block_allreduce(r, "sum", r_scratch' in src


def test_symbolic_k_and_reverse_loop():
    src = _body("gemm_symbolic_k_swz_copy")
    assert "for k in cutlass.range(0, (K + 32 - 1) // 32):" in src
    assert "if k * 32 + i4 < K:" in src  # A's K tail reads zeros
    # the plain tile is read as it is and written swizzled
    assert "A_in.iterator + cute.assume(i5 * 32 + i6, divby=8)" in src
    assert "A_s.iterator + cute.assume((i5 * 32 + i6) ^ (((i5 * 32 + i6) >> 3) & 24), divby=8)" in src
    src = _body("reverse_serial_suffix")
    assert "i = 7 + i_iter * -1" in src


def test_integer_pow_and_atomics():
    src = _body("pow_integer_forms")
    assert "Y[tx] = X[tx] * X[tx] * X[tx] + 1" in src  # int ** 3 by products, ** 0 an int one
    assert "H[tx] * H[tx] + cutlass.Float16(cute.math.pow(" in src
    src = _body("atomic_tile_release")
    assert 'tca.atomic_add(S, (i3, (i4 + tc_lane7)), t[tc_k5 * 4 + tc_lane7], "release")' in src
    src = _body("atomic_addx2_prev_named")  # each lane's atomic once, into a let
    assert src.count("tca.atomic_fetch(") == 2 and 'old_1_ = tca.atomic_fetch(A, (1,), X[tx * 2 + 1], "add")' in src


def test_macro_scaling_inside_pipeline():
    src = _body("gemm_order_stage_scaled")
    # the macro's rows of the swizzled stage are scaled in place after its load is waited on
    assert src.index("tct.wait(tc_bar0 + k % 2") < src.index("for r in cutlass.range(0, 4):")
    assert "tc_vec4[tc_lane5] = tc_vec4[tc_lane5] * cutlass.Float16(0.5)" in src
    assert src.index("for r in cutlass.range(0, 4):") < src.index("tcm.gemm(tc_mma0")


def test_float_negation_is_times_minus_one():
    src = _body("negate_reciprocal")
    assert "X[base] * cutlass.Float32(-1.0)" in src and "X[base + 1] * cutlass.Float32(-1.0)" in src
    assert "Float32(0.0) - X" not in src


def test_slice_name_in_arithmetic():
    # `-v` and `v * 2.0` of a slice-bound name were a leaked Python TypeError ("bad operand
    # type for unary -: '_RegionRef'"); TileLang binds the slice's vector
    src = _body("slice_name_arithmetic")
    assert ("Y[base + 1] = cutlass.Float32(1.0) / (X[base + 1] * cutlass.Float32(-1.0)) + "
            "X[base + 1] * cutlass.Float32(2.0)") in src
    import tilecute.language as T
    from tilecute.language import FrontendError
    text = """import tilecute.language as T


@T.prim_func
def late(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=1) as bx:
        v = X[0:2]
        X[0] = 0.0
        Y[0:2] = -v
"""
    with pytest.raises(FrontendError, match="'v' \\(a slice of 'X' bound at"):  # read after a store: named
        T.from_script(text)


# ---- GPU: against torch --------------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_newest_surface_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.rand(4096, device=dev) * 2 - 1
    _close(P.explicit_unroll_poly()(x), 1 + 2 * x + 3 * x ** 2 + 4 * x ** 3, 1e-4)

    x = torch.randn(128, 512, device=dev)
    _close(P.rowsum_scalar_fadd()(x), x.sum(1), 1e-3)

    x = torch.rand(2048, device=dev) * 3 + 0.25
    x[::2] = -x[::2]  # a negative base with an integer exponent is a real power
    _close(P.pow_negative_exp()(x), x ** -2 + 1 + torch.exp(x) * 0.5, 1e-3)

    x = torch.randn(1024, device=dev) * 10
    _close(P.var_init_dtype_cast_copy()(x), x.half().float() + 3, 1e-2)

    x = torch.randint(-1000, 1000, (1024,), device=dev, dtype=torch.int32)
    m = torch.full((1,), -5000, device=dev, dtype=torch.int32)
    prev = P.atomic_max_prev()(x, m)
    assert int(m[0]) == int(x.max())
    assert bool((prev <= m[0]).all()) and bool((prev >= -5000).all())
    # exactly one thread saw the starting value
    assert int((prev == -5000).sum()) == 1


@pytest.mark.gpu
def test_mixes_on_gpu():
    import torch
    torch.manual_seed(1)
    dev = "cuda"
    a = torch.randn(256, 512, device=dev).half()
    b = torch.randn(512, 256, device=dev).half()
    _close(P.gemm_macro_stage_slices()(a, b), a.float() @ b.float(), 5e-2)

    x = torch.randn(64, 1024, device=dev)
    _close(P.parallel_in_serial_in_pipelined()(x), (x * x).sum(1), 1e-2)

    x = torch.randn(96, 384, device=dev)
    w = torch.empty(96, device=dev)
    y = P.two_launch_normalize()(x, w)
    _close(w, x.abs().amax(1), 0)
    _close(y, x / x.abs().amax(1, keepdim=True), 1e-5)

    for n in (1, 300, 1000):
        x = torch.randn(n, device=dev)
        want = torch.zeros(n, device=dev)
        for t in range(4):
            want[: max(n - t * 37, 0)] += x[t * 37:]
        _close(P.symbolic_grid_and_tail_loop()(x), want, 1e-5)

    a1 = torch.randn(128, 64, device=dev).half()
    b1 = torch.randn(64, 128, device=dev).half()
    a2 = torch.randn(128, 96, device=dev).half()
    b2 = torch.randn(96, 128, device=dev).half()
    _close(P.two_gemms_one_accumulator()(a1, b1, a2, b2), a1.float() @ b1.float() + a2.float() @ b2.float(), 5e-2)

    a = torch.randn(128, 128, device=dev)
    b = torch.randn(128, 128, device=dev).half()
    _close(P.gemm_f32_shared_to_f16()(a, b), a.half().float() @ b.float(), 5e-2)

    x = torch.randn(8, 1024, device=dev) * 4
    _close(P.reduce_to_scalar_broadcast()(x), torch.softmax(x, 1), 1e-5)

    for m in (32, 77, 200):
        x = torch.randn(m, 256, device=dev).half()
        y = P.dynamic_rows_output()(x)
        assert y.shape == (m, 256)
        _close(y, x.float() * 2 + 1, 1e-2)


@pytest.mark.gpu
def test_local_reductions_and_intrinsics_on_gpu():
    import torch
    torch.manual_seed(2)
    dev = "cuda"
    x = torch.randn(8192, device=dev) * 3
    _close(P.local_softmax_per_thread()(x), torch.softmax(x.view(-1, 8), 1).view(-1), 1e-5)

    x = torch.randn(256, 8, 4, device=dev).half()
    _close(P.local_colmin_per_thread()(x), x.amin(1), 0)

    xs = torch.randint(1, 2 ** 31 - 1, (256,), device=dev, dtype=torch.int64)
    xs[7] = 0  # no set bit: __fns answers 0xffffffff
    x = xs.to(torch.int32).view(torch.uint32) if hasattr(torch, "uint32") else None
    if x is None:
        pytest.skip("torch without uint32")
    f = torch.rand(256, device=dev) + 0.5
    o, r = P.bit_intrinsics_mix()(x, f)
    want_o = 0
    for v in xs.tolist():
        want_o |= v
    assert int(o.view(torch.int32)[0]) == want_o
    low = torch.tensor([(v & -v).bit_length() - 1 if v else 0xFFFFFFFF for v in xs.tolist()], device=dev,
                       dtype=torch.float64)
    g = torch.arange(256, device=dev, dtype=torch.float64)
    want = 1 / f.double() + low + torch.div(g + 15, 16, rounding_mode="floor") * 16
    _close(r.double(), want.float().double(), 1e-3)

    xs = torch.randint(0, 2 ** 31 - 1, (1024,), device=dev, dtype=torch.int32)
    y = P.lds64_sts64_reverse()(xs.view(torch.uint32))
    want = xs.view(4, 128, 2).flip(1).reshape(-1)
    assert torch.equal(y.view(torch.int32), want)


@pytest.mark.gpu
def test_reducers_on_gpu():
    import torch
    torch.manual_seed(3)
    dev = "cuda"
    x = torch.randn(64, 1000, device=dev) * 3
    _close(P.row_lse_reducer_epochs()(x), torch.logsumexp(x, 1), 1e-4)
    g = torch.randn(64, 8, device=dev)
    y = torch.randn(64, 8, device=dev)
    _close(P.legacy_reducer_rowdot()(g, y), g - (g * y).sum(1, keepdim=True), 1e-4)


@pytest.mark.gpu
def test_symbolic_k_and_reverse_loop_on_gpu():
    import torch
    torch.manual_seed(4)
    dev = "cuda"
    for k in (200, 64, 7):
        a = torch.randn(128, k, device=dev).half()
        b = torch.randn(k, 128, device=dev).half()
        _close(P.gemm_symbolic_k_swz_copy()(a, b), a.float() @ b.float(), 5e-2)
    x = torch.randn(1024, device=dev)
    _close(P.reverse_serial_suffix()(x), x.view(-1, 8).flip(1).cumsum(1).flip(1).reshape(-1), 1e-5)


@pytest.mark.gpu
def test_integer_pow_and_atomics_on_gpu():
    import torch
    torch.manual_seed(5)
    dev = "cuda"
    x = torch.randint(-20, 20, (256,), device=dev, dtype=torch.int32)
    h = (torch.rand(256, device=dev) * 3 + 0.5).half()
    h[::3] = -h[::3]
    y, z = P.pow_integer_forms()(x, h)
    assert torch.equal(y, x ** 3 + 1)
    _close(z, h.float() ** 2 + 1 / h.float(), 1e-2)

    x = torch.randn(128, 128, device=dev)
    s = torch.ones(32, 128, device=dev)
    P.atomic_tile_release()(x, s)
    _close(s, 1 + x.view(4, 32, 128).sum(0), 1e-4)

    x = torch.ones(512, device=dev).half()
    a = torch.zeros(2, device=dev).half()
    p = P.atomic_addx2_prev_pairs()(x, a)
    assert a.tolist() == [256.0, 256.0]
    # the previous values are every count 0 .. 255 once in each lane
    assert sorted(p[0::2].tolist()) == [float(i) for i in range(256)]
    assert sorted(p[1::2].tolist()) == [float(i) for i in range(256)]

    p = P.atomic_addx2_prev_named()(x, torch.zeros(2, device=dev).half())
    assert sorted(p[0::2].tolist()) == [float(i) for i in range(256)]
    assert sorted((p[1::2] - p[0::2]).tolist()) == [float(i) for i in range(256)]


@pytest.mark.gpu
def test_macro_scaling_inside_pipeline_on_gpu():
    import torch
    torch.manual_seed(6)
    a = torch.randn(128, 256, device="cuda").half()
    b = torch.randn(256, 128, device="cuda").half()
    _close(P.gemm_order_stage_scaled()(a, b), a.float() @ (b.float() * 0.5), 5e-2)


@pytest.mark.gpu
def test_float_negation_on_gpu():
    import torch
    x = torch.randn(256, device="cuda")
    x[:64] = 0.0
    y = P.negate_reciprocal()(x)
    assert torch.equal(torch.isneginf(y[:64]), torch.ones(64, dtype=torch.bool, device="cuda"))
    _close(y, 1.0 / -x, 1e-6)


@pytest.mark.gpu
def test_slice_name_arithmetic_on_gpu():
    import torch
    x = torch.rand(256, device="cuda") + 0.5
    _close(P.slice_name_arithmetic()(x), 1.0 / -x + 2 * x, 1e-6)
