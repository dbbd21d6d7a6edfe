"""A twenty-sixth set of programs in TileLang's idioms (tests/unseen_programs26.py), each a
small semantic trap where a compiler could be silently wrong: integer floor / truncating
division, shifts, 8-bit wrap and promotion, int64 products, mixed-dtype promotion, narrowing
and saturating conversions, conversions to bool, ragged extents and tiles, reductions (dims,
clear=False, abs / bitwise kinds, widening outputs), cumsum (reverse, default dim, regions),
slice fills, converting fragment copies, alloc_var inits, stepped / negative-step / run-time
bounded loops, while loops, break / continue, atomics' returned values (int, float16, float32
of either sign), guarded reads, rounding modes, unaligned copy windows, unsigned values past
the sign bit, a ragged pipelined GEMM, converting shared-to-global copies, byte-sharing views
and unit-dim regions.  CPU: each builds to an sm_90a cubin and what each means is checked
in the generated source.  GPU: each matches a torch reference."""

import pytest

import rounds
import unseen_programs26 as P

PROGRAMS = ["int_div_mod_signs", "const_div_mod_negative", "shifts_signed_unsigned", "int8_wrap_and_promote",
            "int64_offsets", "int32_product_wraps", "half_times_python_float", "narrowing_casts",
            "bool_arith_counts", "mixed_max_int_float", "rounding_modes", "abs_int_min",
            "parallel_ragged_extent", "ragged_copy_tiles", "guarded_shift_read", "reduce_shared_both_dims",
            "reduce_accumulate_no_clear", "reduce_abs_and_max_clear_false", "reduce_bitwise_cols",
            "reduce_min_int_keepdim", "cumsum_fragment_rows_reverse", "fill_and_clear_slices",
            "fragment_copy_converts", "int_to_float_copy", "serial_step_loops", "unroll_runtime_bound",
            "while_collatz_steps", "parallel_if_else_branches", "alloc_var_init_forms", "atomic_ticket_order",
            "atomic_max_min_int_shared", "atomic_add_half_hist", "reduce_widening_dst", "fp8_saturating_casts",
            "copy_runtime_offset", "copy_odd_constant_offset", "symbolic_odd_row_stride", "casts_to_bool",
            "uint8_difference_promotes", "shared_reuse_across_serial", "cumsum_defaults_and_regions",
            "unsigned_past_sign_bit", "uint8_to_float_and_back", "float_to_uint32_large", "ragged_gemm_pipelined",
            "atomic_tile_ragged", "short_circuit_guard", "roll_by_negative_mod", "break_and_continue",
            "converting_shared_copies", "views_reinterpret_bits", "atomic_float_minmax_negative",
            "unit_dims_swapped_copy"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_kernel_is_listed(P, PROGRAMS)
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated source says ------------------------------------------------------
def test_integer_division_and_shifts():
    src = _body("int_div_mod_signs")
    # // and % floor (CuTe DSL's // floors; % is a - a // b * b for operands of any sign)
    assert "Q[bx * 128 + i] = a // b" in src and "R[bx * 128 + i] = a - a // b * b" in src
    assert "tcmath.truncdiv(a, b)" in src and "tcmath.truncmod(a, b)" in src
    src = _body("const_div_mod_negative")
    assert "R[bx * 128 + i, 0] = v - v // 8 * 8" in src  # v may be negative: no plain %
    # % -8: r = v % 8 (floor, of the positive divisor), then r - 8 where r != 0 (no 0 - v,
    # which wraps at INT32_MIN)
    assert "R[bx * 128 + i, 1] = cutlass.Int32(cutlass.select_(v - v // 8 * 8 != 0, v - v // 8 * 8 - 8, 0))" in src
    src = _body("shifts_signed_unsigned")
    assert "S[bx * 128 + i, 0] = A[bx * 128 + i] >> 3" in src  # arithmetic on int32
    assert "cutlass.Uint32(B[bx * 128 + i]) >> cutlass.Uint32(3)" in src  # logical on uint32
    src = _body("int8_wrap_and_promote")
    assert "W[bx * 128 + i] = a + b" in src  # int8 + int8 stored as int8: wraps
    assert "cutlass.Int32(cutlass.Int32(a) * cutlass.Int32(b))" in src  # the whole product
    assert "cutlass.Int8(cutlass.Int32(a) + cutlass.Int32(b) >> 1)" in src  # the int sum halved
    src = _body("int64_offsets")
    assert "cutlass.Int64(A[g]) * cutlass.Int64(3000000007) + cutlass.Int64(g)" in src
    src = _body("int32_product_wraps")
    assert "O[bx * 128 + i] = A[bx * 128 + i] * 65536" in src and "Int64" not in src


def test_promotions_and_conversions():
    src = _body("half_times_python_float")
    # a Python float beside float16 is float32 (TileLang's), rounded to float16 once
    assert ("cutlass.Float16(cutlass.Float32(X[bx * 128 + i]) * cutlass.Float32(0.1) + cutlass.Float32(1.0))"
            in src)
    assert "cutlass.Float32(X[bx * 128 + i]) + F[bx * 128 + i]" in src
    src = _body("narrowing_casts")
    assert "cutlass.Float16(x_f[" in src and "cutlass.BFloat16(x_f[" in src and "cutlass.Int32(x_f[" in src
    src = _body("mixed_max_int_float")
    # T.max(int32, float16) is float16 (TVM's promotion), then + 0.5 in float32
    assert "cutlass.Float32(cutlass.Float16(cute.arch.fmax(cutlass.Float32(cutlass.Float16(I[" in src
    assert "+ cutlass.Float32(0.5)" in src
    src = _body("rounding_modes")
    assert src.count("cute.math.roundeven(x)") == 2  # T.round and T.nearbyint: ties to even
    assert "cute.math.trunc(x)" in src and "cute.math.floor(x)" in src and "cute.math.ceil(x)" in src
    src = _body("abs_int_min")
    assert "cutlass.Int32(abs(cutlass.Int32(cutlass.Int8(X[" in src  # |int8| computed in int
    src = _body("bool_arith_counts")
    assert "acc[0] = 0" in src  # T.alloc_var(init=0)
    assert "cutlass.Int32(A[bx * 128 + i, 0] == B[bx * 128 + i, 0]) * 10" in src
    src = _body("casts_to_bool")
    assert "cutlass.Int32(cutlass.Boolean(F[g]))" in src  # x != 0, not a truncation
    src = _body("uint8_difference_promotes")
    assert "cutlass.Int32(cutlass.Uint8(A[g])) - cutlass.Int32(cutlass.Uint8(B[g]))" in src
    src = _body("fp8_saturating_casts")
    assert "cutlass.Float8E4M3FN(X[" in src and "cutlass.Float8E5M2(X[" in src


def test_ragged_and_guarded_reads():
    src = _body("parallel_ragged_extent")
    assert "if tc_f4 < 1000:" in src  # the last step of T.Parallel(1000) runs on part of the block
    src = _body("ragged_copy_tiles")
    assert "if by * 64 + i1 < 100 and bx * 32 + (i2 + 1) < 70:" in src  # rows and columns clamped
    src = _body("guarded_shift_read")
    # each read past an end is taken only under its branch's condition
    assert "if g + 1 < 1000:\n            tc_ld2 = X[g + 1]" in src
    assert "if g >= 1:\n            tc_ld3 = X[g - 1]" in src
    src = _body("copy_odd_constant_offset")
    # a window one element past the block's start is not a 16-byte vector: elementwise, clamped
    assert "if bx * 128 + 1 + (i1 + tc_lane2) < 1024:" in src
    assert "X.iterator + cute.assume(bx * 128 + 1" not in src
    src = _body("symbolic_odd_row_stride")
    assert "cute.assume" not in src.split("cute.arch.sync_threads()", 1)[0]  # rows of n elements: no vector
    src = _body("copy_runtime_offset")
    # a start read from memory may be off 16 bytes, which TMA's innermost coordinate cannot be
    # (an odd offset stopped the H200 with an illegal instruction): a guarded element copy
    assert "tct.load(" not in src and "if Off[bx] + i1 >= 0 and Off[bx] + i1 < 4096:" in src
    src = _body("short_circuit_guard")
    # Idx[g] read only where g < N, X[Idx[g]] only where the index is in range
    assert "if g < 1000:\n        tc_ld2 = Idx[g]" in src
    assert "if tc_ld2 >= 0 and tc_ld2 < 1000:\n        tc_ld3 = X[tc_ld2]" in src
    assert "cutlass.select_(X[g] < cutlass.Float32(-1.0), X[g], cutlass.Float32(0.5))" in src
    src = _body("roll_by_negative_mod")
    assert "s[(i - 3) - (i - 3) // 64 * 64]" in src and "Q[i] = (i - 3) // 8" in src
    src = _body("ragged_gemm_pipelined")
    assert "if by * 64 + i3 < 100 and (k + 2) * 32 + (i4 + 3) < 100:" in src  # K's last tile clamped
    src = _body("atomic_tile_ragged")
    assert "tca.atomic_add_view(" in src and "if bx * 32 + i3 < 100:" in src


def test_break_continue_and_converting_copies():
    src = _body("break_and_continue")
    # break / continue become flags: the loop stops after a break, the rest of the body is skipped
    assert "while k_it[0] < 32 and broke[0] == 0:" in src and "skipped[0] = 1" in src
    assert "while k_iter_it[0] < 32 and broke_1_[0] == 0:" in src and "k_1_ = 31 + k_iter * -1" in src
    src = _body("converting_shared_copies")
    assert "tct.store" not in src  # a tile of another dtype is not stored byte for byte
    assert "cutlass.BFloat16(tc_vec13[tc_lane14])" in src and "cutlass.Float8E4M3FN(tc_vec18[tc_lane19])" in src


def test_unit_dims_pair_in_order():
    src = _body("unit_dims_swapped_copy")
    assert "r_s[0 * 64 + i1] = X[i1, bx]" in src  # column element i is row element i
    assert "tct.store(O_desc, tc_smem + 0, (0, bx)" in src


def test_views_share_bytes():
    src = _body("views_reinterpret_bits")
    assert "bits = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Int32)" in src
    assert "halves = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float16)" in src
    assert "xb = cute.make_tensor(cute.recast_ptr(X_ptr, dtype=cutlass.Int32)" in src
    assert "s = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float32), cute.make_layout(1024))" in src
    assert ">> 23" in src and "& 8388607" in src


def test_unsigned_forms():
    src = _body("unsigned_past_sign_bit")
    assert "cutlass.Uint32(U[g]) // cutlass.Uint32(7)" in src
    assert "F[g] = cutlass.Float32(cutlass.Uint32(U[g]))" in src
    assert "cutlass.Uint32(U[g]) > cutlass.Uint32(2147483648)" in src
    src = _body("uint8_to_float_and_back")
    assert "cutlass.Float32(cutlass.Uint8(B[g]))" in src and "B2[g] = cutlass.Uint8(" in src
    src = _body("float_to_uint32_large")
    assert "cutlass.Uint32(X[bx * 128 + i])" in src


def test_reduction_forms():
    src = _body("reduce_accumulate_no_clear")
    assert 'acc[tc_c11] = tcr.combine(acc[tc_c11], tc_rows10[tc_c11], "sum")' in src  # clear=False adds
    assert "acc[i1] = cutlass.Float32(1.0)" in src
    src = _body("reduce_abs_and_max_clear_false")
    assert 'tcr.combine(tc_acc13, cute.math.absf(x_f[tc_c11 * 4 + tc_q12]), "max")' in src
    assert 'tcr.combine(tc_acc22, cute.math.absf(x_f[tc_c20 * 4 + tc_q21]), "sum")' in src
    assert 'mx[tc_c29] = tcr.combine(mx[tc_c29], tc_rows28[tc_c29], "max")' in src
    src = _body("reduce_bitwise_cols")
    for kind in ("bitand", "bitor", "bitxor"):
        assert f'tcr.warp_allreduce(' in src and f'"{kind}")' in src
    src = _body("reduce_widening_dst")
    # each element converted to the output's dtype before it is combined (TileLang's MakeReduce)
    assert 'tcr.combine(tc_acc16, cutlass.Float32(x_f[tc_c14 * 16 + tc_q15]), "sum")' in src
    assert "abs(cutlass.Int32(q_f[tc_c23 * 16]))" in src
    src = _body("cumsum_fragment_rows_reverse")
    assert "tc_pos10 = 63 - (tc_lane6 * 2 + tc_c8)" in src  # reverse=True scans from the end
    src = _body("cumsum_defaults_and_regions")
    assert "T.cumsum(x_f_scan_3, x_f_scan_3, dim=0)" in src  # the default dim is 0
    assert "T.cumsum(r_s, r_s, dim=1)" in src  # dim=-1 of a 2-D tile
    assert "v_s_part[i10] = v_s[16 + i10]" in src and "v_s[16 + i11] = v_s_part[i11]" in src


def test_fills_loops_and_atomics():
    src = _body("fill_and_clear_slices")
    assert "s.iterator + cute.assume((8 + i3) * 64 + i4" in src  # rows 8..15
    assert "s.iterator + cute.assume((40 + i5) * 64 + 32 + i6" in src  # rows 40..47, columns 32..63
    src = _body("serial_step_loops")
    assert "for k_iter in cutlass.range(0, 13):" in src and "k = 0 + k_iter * 3" in src
    assert "for k_iter_1_ in cutlass.range(0, 19):" in src and "k_1_ = 36 + k_iter_1_ * -2" in src
    assert "for k_iter_2_ in cutlass.range(0, 0):" in src
    assert "cutlass.range(0, (E[r] - S[r] + 4 - 1) // 4)" in src  # floor: no iteration when E <= S
    src = _body("unroll_runtime_bound")
    assert "for k in cutlass.range(0, Cnt[r], unroll_full=True):" in src
    src = _body("while_collatz_steps")
    assert "while v[0] != 1:" in src and "v[0] = X[bx * 128 + tx]" in src
    src = _body("alloc_var_init_forms")
    assert "k[0] = 3" in src and "e[0] = cutlass.Float32(bx * 10)" in src and "f[0] = cutlass.Float32(0.5)" in src
    src = _body("atomic_ticket_order")
    assert 't = tca.atomic_fetch(Counter, (0,), 1, "add")' in src
    src = _body("atomic_max_min_int_shared")
    assert "tca.atomic_max(m_s, 0, X[" in src and "tca.atomic_min(m_s, 1, X[" in src
    src = _body("atomic_float_minmax_negative")
    assert "tca.atomic_max(M, (0,), X[" in src and 'P[bx * 128 + i] = tca.atomic_fetch(M, (1,), X[bx * 128 + i], "min")' in src
    src = _body("shared_reuse_across_serial")
    loop = src.split("for k in cutlass.range(0, 8):", 1)[1]
    # a barrier before this iteration's writes (last iteration's reads) and before the reads
    assert loop.index("cute.arch.sync_threads()") < loop.index("s[i] = X[k, i]")
    assert loop.index("s[i] = X[k, i]") < loop.rindex("cute.arch.sync_threads()") < loop.index("O[k, i_1_]")


# ---- on a GPU ------------------------------------------------------------------------------
def _eq(got, want):
    import torch
    assert torch.equal(got.cpu(), want.cpu()), (got, want)


def _as_uint32(v):
    """int64 values in [0, 2^32) as a uint32 tensor (through int32's bits)."""
    import torch
    return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32).view(torch.uint32)


_close = rounds.close


@pytest.mark.gpu
def test_integer_semantics_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    a = torch.randint(-1000, 1000, (256,), device=dev, dtype=torch.int32)
    b = torch.randint(1, 18, (256,), device=dev, dtype=torch.int32) * (torch.randint(0, 2, (256,), device=dev) * 2 - 1).int()
    q, r, tq, tr = P.int_div_mod_signs()(a, b)
    al, bl = a.long(), b.long()
    _eq(q.long(), torch.div(al, bl, rounding_mode="floor"))
    _eq(r.long(), torch.remainder(al, bl))
    _eq(tq.long(), torch.div(al, bl, rounding_mode="trunc"))
    _eq(tr.long(), torch.fmod(al, bl))
    q, r = P.const_div_mod_negative()(a)
    v = al - 100
    _eq(q.long(), torch.stack([torch.div(v, 8, rounding_mode="floor"), torch.div(v, -8, rounding_mode="floor")], 1))
    _eq(r.long(), torch.stack([torch.remainder(v, 8), torch.remainder(v, -8)], 1))
    # shifts: int32 arithmetic, uint32 logical; << 1 wraps at 32 bits
    s32 = torch.randint(-2**31, 2**31, (256,), device=dev, dtype=torch.int64)
    u32 = torch.randint(0, 2**32, (256,), device=dev, dtype=torch.int64)
    S, U = P.shifts_signed_unsigned()(s32.int(), _as_uint32(u32))
    wrap_s = ((s32 << 1) & 0xFFFFFFFF)
    wrap_s = torch.where(wrap_s >= 2**31, wrap_s - 2**32, wrap_s)
    _eq(S.long(), torch.stack([s32 >> 3, wrap_s >> 1], 1))
    _eq(U.view(torch.int32).long() & 0xFFFFFFFF, torch.stack([u32 >> 3, ((u32 << 1) & 0xFFFFFFFF) >> 1], 1))
    # int8: wrap when stored, whole values when converted or shifted
    x = torch.randint(-128, 128, (256,), device=dev, dtype=torch.int8)
    y = torch.randint(-128, 128, (256,), device=dev, dtype=torch.int8)
    w, p, h = P.int8_wrap_and_promote()(x, y)
    s = x.long() + y.long()
    _eq(w.long(), ((s + 128) % 256) - 128)
    _eq(p.long(), x.long() * y.long())
    _eq(h.long(), (((s >> 1) + 128) % 256) - 128)
    # int64 offsets past 2^31; int32 product wraps
    o = P.int64_offsets()(a)
    _eq(o, al * 3000000007 + torch.arange(256, device=dev))
    o = P.int32_product_wraps()(a)
    wr = (al * 65536) & 0xFFFFFFFF
    _eq(o.long(), torch.where(wr >= 2**31, wr - 2**32, wr))
    # |INT_MIN| stays INT_MIN in int32; |-128| of an int8 is 128
    xs = torch.tensor([-2**31, -5, 7, -128, 384, 0] * 43, device=dev, dtype=torch.int64)[:256]
    A_, B_ = P.abs_int_min()(xs.int())
    _eq(A_.long(), torch.where(xs == -2**31, xs, xs.abs()))
    i8 = ((xs + 128) % 256) - 128
    _eq(B_.long(), i8.abs())
    # uint8 difference promotes to int
    ua = torch.randint(0, 256, (256,), device=dev, dtype=torch.uint8)
    ub = torch.randint(0, 256, (256,), device=dev, dtype=torch.uint8)
    d = P.uint8_difference_promotes()(ua, ub)
    diff = ua.long() - ub.long()
    _eq(d.long(), torch.stack([diff, (diff < 0).long()], 1))
    # Collatz
    xs = torch.randint(1, 1000, (256,), device=dev, dtype=torch.int32)
    steps = P.while_collatz_steps()(xs)
    want = []
    for v in xs.tolist():
        n = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            n += 1
        want.append(n)
    _eq(steps.long(), torch.tensor(want))


@pytest.mark.gpu
def test_float_conversions_on_gpu():
    import torch
    torch.manual_seed(1)
    dev = "cuda"
    x16 = torch.randn(1024, device=dev).half() * 100
    f = torch.randn(1024, device=dev)
    y, z = P.half_times_python_float()(x16, f)
    _close(y, (x16.float() * 0.1 + 1).half(), 1e-3)  # float32 math, rounded to float16 once
    _eq(z, x16.float() + f)
    x = torch.cat([torch.randn(512, device=dev) * 1e5, torch.randn(512, device=dev) * 3])
    h, bf, i = P.narrowing_casts()(x)
    _eq(h, x.half())  # past 65504: inf
    _eq(bf, x.bfloat16())  # round to nearest even
    _eq(i, x.to(torch.int32))  # toward zero
    iv = torch.randint(-300, 300, (256,), device=dev, dtype=torch.int32)
    hv = (torch.randn(256, device=dev) * 200).half()
    o = P.mixed_max_int_float()(iv, hv)
    _eq(o, torch.maximum(iv.half(), hv).float() + 0.5)
    halves = torch.arange(-8, 8, 0.5, device=dev)
    xr = torch.cat([halves.repeat(16), torch.randn(1024 - 32 * 16, device=dev) * 10])
    r, nb, tr, fl, ce = P.rounding_modes()(xr)
    _eq(r, torch.round(xr))  # torch.round is half to even
    _eq(nb, torch.round(xr))
    _eq(tr, torch.trunc(xr))
    _eq(fl, torch.floor(xr))
    _eq(ce, torch.ceil(xr))
    big = torch.tensor([500.0, -1000.0, 448.0, 70000.0, -1e9, 0.3, 1e-9, 57344.0] * 128, device=dev)
    e4, e5 = P.fp8_saturating_casts()(big)
    # CUDA's fp8 conversions saturate to the largest finite value
    _eq(e4, big.clamp(-448, 448).to(torch.float8_e4m3fn).float())
    _eq(e5, big.clamp(-57344, 57344).to(torch.float8_e5m2).float())
    fb = torch.tensor([0.0, 0.5, -0.25, -0.0, 3.0, 1e-30, 0.0, 2.0] * 32, device=dev)
    ib = torch.tensor([0, 2, -4, 256, 1, 512, 255, -1] * 32, device=dev, dtype=torch.int32)
    o = P.casts_to_bool()(fb, ib)
    _eq(o.long(), torch.stack([(fb != 0).long(), (ib != 0).long(), ((ib.long() & 255) != 0).long()], 1))
    a = torch.randn(256, 16, device=dev)
    b = torch.randn(256, 16, device=dev)
    b[::3, 0] = a[::3, 0]
    c = P.bool_arith_counts()(a, b)
    _eq(c.long(), (a > b).sum(1) + (a[:, 0] == b[:, 0]).long() * 10)


@pytest.mark.gpu
def test_ragged_tiles_and_guarded_reads_on_gpu():
    import torch
    torch.manual_seed(2)
    dev = "cuda"
    x = torch.randn(1000, device=dev)
    _close(P.parallel_ragged_extent()(x), 2 * x + 1, 1e-6)
    xm = torch.randn(100, 70, device=dev)
    _close(P.ragged_copy_tiles()(xm), xm.T * 3, 1e-6)
    o = P.guarded_shift_read()(x)
    want = torch.zeros_like(x)
    want[:-1] += x[1:]
    want[1:] -= x[:-1]
    _close(o, want, 1e-6)
    xs = torch.randn(4096, device=dev)
    off = torch.tensor([0, 1, 3, 5, 1000, 4095 - 127, 4000, 7], device=dev, dtype=torch.int32)
    o = P.copy_runtime_offset()(xs, off)
    want = torch.zeros(8, 128, device=dev)
    for b_, s in enumerate(off.tolist()):
        seg = xs[s:s + 128]
        want[b_, :seg.numel()] = seg * 2  # TMA fills past the end with zeros
    _close(o, want, 1e-6)
    xh = torch.randn(1024, device=dev).half()
    o = P.copy_odd_constant_offset()(xh)
    padded = torch.cat([xh, torch.zeros(1, device=dev).half()])
    _close(o, (padded[1:1025] + 1).reshape(8, 128), 0)
    for n in (131, 64, 97):
        xo = torch.randn(64, n, device=dev).half()
        o = P.symbolic_odd_row_stride()(xo)
        want = xo[:, :64].float().reshape(4, 16, 64).sum(1)
        _close(o, want, 1e-3)


@pytest.mark.gpu
def test_reductions_and_scans_on_gpu():
    import torch
    torch.manual_seed(3)
    dev = "cuda"
    x = torch.randn(64, 128, device=dev)
    r, c = P.reduce_shared_both_dims()(x)
    _close(r, x.sum(1), 1e-4)
    _eq(c, x.max(0).values)
    x = torch.randn(64, 256, device=dev)
    _close(P.reduce_accumulate_no_clear()(x), 1 + x.sum(1), 1e-4)
    x = torch.randn(64, 64, device=dev) - 1.0
    am, asum, mx = P.reduce_abs_and_max_clear_false()(x)
    _eq(am, x.abs().max(1).values)
    _close(asum, x.abs().sum(1), 1e-4)
    _eq(mx, x.max(1).values.clamp(min=0.5))
    xi = torch.randint(-2**31, 2**31, (32, 64), device=dev, dtype=torch.int64).int()
    ba, bo, bx = P.reduce_bitwise_cols()(xi)
    l = xi.long()
    wa, wo, wx = l[0].clone(), l[0].clone(), l[0].clone()
    for k in range(1, 32):
        wa &= l[k]
        wo |= l[k]
        wx ^= l[k]
    _eq(ba.long(), wa)
    _eq(bo.long(), wo)
    _eq(bx.long(), wx)
    xi = torch.randint(-1000, 1000, (64, 64), device=dev, dtype=torch.int32)
    rm, cm = P.reduce_min_int_keepdim()(xi)
    _eq(rm, xi.min(1, keepdim=True).values)
    _eq(cm, xi.min(0, keepdim=True).values)
    # float16 row sums accumulated in float32: 2048 then 127 ones
    xh = torch.ones(64, 128, device=dev).half()
    xh[:, 0] = 2048
    xh[1::2, 5] = -129.0
    s, a = P.reduce_widening_dst()(xh)
    _close(s, xh.float().sum(1), 0)
    _eq(a.long(), xh.float().clamp(-128, 127).to(torch.int8).long().abs().max(1).values)
    x = torch.randn(32, 64, device=dev)
    f, rv = P.cumsum_fragment_rows_reverse()(x)
    _close(f, x.cumsum(1), 1e-4)
    _close(rv, x.flip(1).cumsum(1).flip(1), 1e-4)
    d, rw, sg = P.cumsum_defaults_and_regions()(x)
    _close(d, x.cumsum(0), 1e-4)
    _close(rw, x.cumsum(1), 1e-4)
    want = x[0].clone()
    want[16:48] = x[0, 16:48].cumsum(0)
    _close(sg, want, 1e-4)


@pytest.mark.gpu
def test_fills_copies_loops_on_gpu():
    import torch
    torch.manual_seed(4)
    dev = "cuda"
    o = P.fill_and_clear_slices()()
    want = torch.full((64, 64), 7.0, device=dev)
    want[8:16] = 0
    want[40:48, 32:] = -1
    _eq(o, want)
    x = torch.randn(64, 64, device=dev) * 1000
    h, b = P.fragment_copy_converts()(x)
    _eq(h, x.half())
    _eq(b, x.bfloat16())
    xi = torch.randint(-2**24, 2**24, (256,), device=dev, dtype=torch.int32)
    _eq(P.int_to_float_copy()(xi), xi.float() + 0.25)
    X = torch.randn(128, 37, device=dev)
    S = torch.randint(-2, 37, (128,), device=dev, dtype=torch.int32).clamp(min=0)
    E = torch.randint(0, 38, (128,), device=dev, dtype=torch.int32)
    o = P.serial_step_loops()(X, S, E)
    w = torch.arange(1, 20, device=dev, dtype=torch.float32)
    _close(o[:, 0], X[:, 0::3].sum(1), 1e-4)
    _close(o[:, 1], (X[:, list(range(36, -1, -2))] * w).sum(1), 1e-3)
    _eq(o[:, 2], torch.zeros(128, device=dev))
    d_want = torch.stack([X[r, s:e:4].sum() if e > s else torch.zeros((), device=dev)
                          for r, (s, e) in enumerate(zip(S.tolist(), E.tolist()))])
    u_want = torch.stack([X[r, s:e:2].sum() if e > s else torch.zeros((), device=dev)
                          for r, (s, e) in enumerate(zip(S.tolist(), E.tolist()))])
    _close(o[:, 3], d_want, 1e-4)
    _close(o[:, 4], u_want, 1e-4)
    cnt = torch.randint(0, 17, (128,), device=dev, dtype=torch.int32)
    X = torch.randn(128, 16, device=dev)
    o = P.unroll_runtime_bound()(X, cnt)
    mask = torch.arange(16, device=dev)[None, :] < cnt[:, None]
    _close(o, (X * mask).sum(1), 1e-4)
    x = torch.randn(64, 64, device=dev)
    o = P.parallel_if_else_branches()(x)
    want = torch.where(x < 0, -1.0, torch.where(torch.eye(64, device=dev, dtype=torch.bool), 100.0, x * 2))
    _eq(o, want)
    x = torch.randn(256, device=dev)
    o = P.alloc_var_init_forms()(x)
    _close(o, 3.5 * x + (torch.arange(256, device=dev) // 128).float() * 10, 1e-5)
    X = torch.randn(8, 128, device=dev)
    o = P.shared_reuse_across_serial()(X)
    k = torch.arange(1, 9, device=dev, dtype=torch.float32)[:, None]
    _eq(o, (X * k).roll(-1, 1))


@pytest.mark.gpu
def test_unsigned_ragged_gemm_and_guards_on_gpu():
    import torch
    torch.manual_seed(6)
    dev = "cuda"
    u = torch.cat([torch.randint(0, 2**32, (250,), dtype=torch.int64),
                   torch.tensor([0, 2**31, 2**31 + 1, 2**32 - 1, 2**31 - 1, 7])]).to(dev)
    qr, f, c = P.unsigned_past_sign_bit()(_as_uint32(u))
    _eq(qr.view(torch.int32).long() & 0xFFFFFFFF, torch.stack([u // 7, u % 7], 1))
    _eq(f, u.float())  # rounded to nearest from the unsigned value
    _eq(c.long(), (u > 2**31).long())
    b = torch.randint(0, 256, (256,), device=dev, dtype=torch.uint8)
    f, b2 = P.uint8_to_float_and_back()(b)
    _eq(f, torch.stack([b.float(), b.half().float() / 2], 1))
    _eq(b2, (b.float() + 0.5).to(torch.uint8))
    x = torch.cat([torch.rand(128, device=dev) * 4e9, torch.rand(128, device=dev) * 100])
    o = P.float_to_uint32_large()(x)
    _eq(o.view(torch.int32).long() & 0xFFFFFFFF, x.double().trunc().long())
    a = torch.randn(100, 100, device=dev).half()
    bm = torch.randn(100, 72, device=dev).half()
    _close(P.ragged_gemm_pipelined()(a, bm), a.float() @ bm.float(), 5e-2)
    xm = torch.randn(100, 64, device=dev)
    o = torch.ones(100, 64, device=dev)
    P.atomic_tile_ragged()(xm, o)
    _close(o, 1 + 2 * xm, 1e-6)
    x = torch.randn(1000, device=dev)
    idx = torch.randint(0, 1000, (1000,), device=dev, dtype=torch.int32)
    o = P.short_circuit_guard()(x, idx)
    _eq(o, torch.where(x[idx.long()] > 0, 1.0, torch.where(x < -1.0, x, 0.5)))
    x = torch.randn(64, device=dev)
    o, q = P.roll_by_negative_mod()(x)
    _eq(o, x.roll(3))
    _eq(q.long(), torch.div(torch.arange(64, device=dev) - 3, 8, rounding_mode="floor"))


@pytest.mark.gpu
def test_break_continue_and_converting_copies_on_gpu():
    import torch
    torch.manual_seed(7)
    dev = "cuda"
    x = torch.randn(128, 32, device=dev) * 1.5
    o = P.break_and_continue()(x)
    acc, pos = [], []
    for row in x.tolist():
        a = 0.0
        for v in row:
            if v > 2.0:
                break
            if v < 0:
                continue
            a += v
        acc.append(a)
        hits = [k for k, v in enumerate(row) if v > 1.0]
        pos.append(float(hits[-1]) if hits else 0.0)
    _close(o[:, 0], torch.tensor(acc, device=dev), 1e-4)
    _eq(o[:, 1], torch.tensor(pos, device=dev))
    xh = (torch.randn(64, 64, device=dev) * 100).half()
    y, z = P.converting_shared_copies()(xh)
    _eq(y, (xh.float() * 3).bfloat16())
    _eq(z.float(), (xh.float() * 3).clamp(-448, 448).to(torch.float8_e4m3fn).float())


@pytest.mark.gpu
def test_views_on_gpu():
    import torch
    torch.manual_seed(8)
    x = torch.randn(16, 64, device="cuda") * 1e3
    r, b, h, g = P.views_reinterpret_bits()(x)
    flat = x.reshape(-1)
    _eq(r, flat[(torch.arange(1024, device="cuda") * 7) % 1024])
    bits = x.view(torch.int32)
    _eq(b, bits >> 23)
    _eq(h.view(torch.int16), x.view(torch.int16).reshape(16, 128))  # the same bytes (NaN-safe compare)
    _eq(g, bits & 0x7FFFFF)
    x = torch.randn(64, 8, device="cuda")
    _eq(P.unit_dims_swapped_copy()(x), x.T)


@pytest.mark.gpu
def test_atomics_on_gpu():
    import torch
    torch.manual_seed(5)
    dev = "cuda"
    counter = torch.zeros(1, device=dev, dtype=torch.int32)
    slot = P.atomic_ticket_order()(counter)
    _eq(counter, torch.tensor([256], dtype=torch.int32))
    _eq(slot, torch.ones(256, device=dev, dtype=torch.int32))
    x = torch.randint(-2**31, 2**31, (1024,), device=dev, dtype=torch.int64).int()
    mx, mn = P.atomic_max_min_int_shared()(x)
    _eq(mx, x.reshape(8, 128).max(1).values)
    _eq(mn, x.reshape(8, 128).min(1).values)
    idx = torch.randint(0, 64, (4096,), device=dev, dtype=torch.int32)
    w = (torch.randint(-4, 5, (4096,), device=dev).float() / 4).half()  # sums stay exact in float16
    xf = torch.randn(1024, device=dev) - 2.0  # mostly negative
    m = torch.tensor([-1e30, 1e30], device=dev)
    p = torch.empty(1024, device=dev)
    P.atomic_float_minmax_negative()(xf, m, p)
    _eq(m, torch.stack([xf.max(), xf.min()]))
    assert int((p == 1e30).sum()) == 1  # exactly one update saw the initial value
    seen = torch.cat([xf, torch.tensor([1e30], device=dev)])
    assert bool(torch.isin(p, seen).all()) and bool((p >= xf.min()).all())
    hist = torch.zeros(64, device=dev, dtype=torch.float16)
    P.atomic_add_half_hist()(idx, w, hist)
    want = torch.zeros(64, device=dev).index_add_(0, idx.long(), w.float())
    _close(hist, want, 0)
