"""A thirty-second set of programs in TileLang's idioms (tests/unseen_programs32.py):
numerics and index widths.

CPU: each builds to an sm_90a cubin, and what decides its numerics is read in the generated
source (64-bit index arithmetic over tensors past 2^31 elements, NaN-quiet fmax, floor vs
truncating division, the accumulator dtypes).
GPU: each runnable program matches a torch reference computed as TileLang's CUDA C computes
it (run: ``pytest -q -m gpu tests/test_unseen_programs32.py``); the tensors past 2^31
elements are compile-only."""

import types

import pytest

import tilecute
import rounds
import unseen_programs32 as P

NAMES = sorted(n for n, f in vars(P).items() if isinstance(f, types.FunctionType))


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")


def _body(name, **kw):
    return rounds.kernel_body(rounds.source(getattr(P, name)(**kw)))


test_program_builds_a_cubin = rounds.builds_cubin(NAMES, rounds.kernel_of(P), "sm_90a")


# ---- index widths --------------------------------------------------------------------------
def test_flat_index_past_int32_is_64_bit():
    # TileLang's IndexLegalizer: an index whose bounds reach past int32 is promoted to int64
    # before the product wraps (bx * 1024 for bx up to 2^22)
    src = _body("big_flat_axpy")
    assert "Y.iterator + cute.assume(cutlass.Int64(bx) * 1024 + cutlass.Int64(i), divby=4)" in src
    assert "bx * 1024 + i" not in src
    src = _body("big_flat_even_gather")
    assert "X[(cutlass.Int64(bx) * 256 + cutlass.Int64(i)) * 2]" in src
    assert "X[(cutlass.Int64(bx) * 256 + cutlass.Int64(i)) * 2 + 1]" in src
    assert "Y[cutlass.Int64(bx) * 256 + cutlass.Int64(i)]" in src
    src = _body("big_flat_atomic_add")  # the atomic helper's coordinate too
    assert ("tca.atomic_add(Y, (cutlass.Int64(bx) * 256 + cutlass.Int64(i),), "
            "X[cutlass.Int64(bx) * 256 + cutlass.Int64(i)])") in src


def test_index_inside_int32_stays_32_bit():
    # the same kernel over 2^20 elements: no index reaches 2^31, none is widened
    src = _body("big_flat_axpy", n=2**20)
    assert "cutlass.Int64" not in src and "cute.assume(bx * 1024 + i, divby=4)" in src


def test_rows_past_int32_use_64_bit_strides():
    src = _body("big_rows_scale")
    assert "stride=(cutlass.Int64(65536), 1,)" in src
    assert "B[by * 1 + i, bx * 256 + j] = A[by * 1 + i, bx * 256 + j]" in src
    src = _body("int64_shape_rows_copy")
    assert "A.iterator + cute.assume(cutlass.Int64(by * 4 + i1) * 4096 + i2, divby=8)" in src
    assert "B.iterator + cute.assume(cutlass.Int64(by * 4 + i3) * 4096 + i4, divby=8)" in src


def test_int64_serial_loop_variable():
    # TVM's loop variable has its given range's dtype: T.serial(T.int64(n)) counts in int64
    assert "for j in cutlass.range(cutlass.Int64(0), 512):" in _body("int64_serial_rowsum")
    src = _body("int64_page_offsets")
    assert "for p in cutlass.range(cutlass.Int64(0), 16):" in src
    assert "Offs[bx, p] = (cutlass.Int64(bx * 16) + p) * cutlass.Int64(4194304)" in src


def test_cast_int64_offset():
    assert "off = cutlass.Int64(bx) * cutlass.Int64(256) + cutlass.Int64(tx)" in _body("cast_int64_flat_copy")


# ---- float special values ------------------------------------------------------------------
def test_float_specials_in_source():
    src = _body("masked_softmax_neg_inf")
    assert 'cutlass.Float32(float("-inf"))' in src and 'tcr.warp_allreduce(tc_acc6, "max", 32)' in src
    src = _body("max_min_with_nan")  # fmaxf / fminf: NaN-quiet
    assert "cute.arch.fmax(A[bx * 128 + i], B[bx * 128 + i])" in src
    assert "cute.arch.fmin(A[bx * 128 + i], B[bx * 128 + i])" in src
    src = _body("nan_count_and_clean")
    assert "cute.math.isnan(" in src and "cute.math.isinf(" in src
    src = _body("fp16_overflow_cast")
    assert "cutlass.Float16(X[bx * 256 + i])" in src and "cutlass.BFloat16(X[bx * 256 + i])" in src
    src = _body("fp8_saturating_quant")  # T.clamp of a float: NaN passes, as TVM's max(min())
    assert "cutlass.Float8E4M3FN(cutlass.select_(cutlass.Boolean(cute.math.isnan(" in src


# ---- integer semantics ---------------------------------------------------------------------
def test_integer_semantics_in_source():
    src = _body("floor_vs_trunc_div")
    assert "D[bx * 128 + i, 0] = A[bx * 128 + i] // 7" in src
    assert "D[bx * 128 + i, 1] = A[bx * 128 + i] - A[bx * 128 + i] // 7 * 7" in src
    assert "tcmath.truncdiv(A[bx * 128 + i], 7)" in src and "tcmath.truncmod(A[bx * 128 + i], 7)" in src
    src = _body("uint32_hash_wraparound")
    assert "cutlass.Uint32(A[bx * 256 + i]) * cutlass.Uint32(2654435761)" in src
    assert "h ^ h >> cutlass.Uint32(16)" in src  # (Python: >> binds tighter than ^)
    src = _body("unsigned_compare_select")
    assert "cutlass.Uint32(A[bx * 128 + i]) > cutlass.Uint32(1)" in src
    src = _body("select_mixed_dtypes")
    assert "cutlass.Int32(cutlass.select_(A[k] > cutlass.Int8(0), cutlass.Int32(A[k]), 1000))" in src
    assert "cutlass.select_(H[k] > cutlass.Float16(0.0), cutlass.Float32(H[k]), cutlass.Float32(0.1))" in src
    src = _body("unsigned_underflow_compare")  # uint16 promoted to int, uint32 not
    assert "cutlass.select_(cutlass.Int32(cutlass.Uint16(U[k])) - 1 < 10, 1, 0)" in src
    assert "cutlass.select_(cutlass.Uint32(V[k]) - cutlass.Uint32(1) < cutlass.Uint32(10), 1, 0)" in src
    src = _body("int_clamp_quant")
    assert "cutlass.Int8(cutlass.min(cutlass.max(A[bx * 256 + i] * 3 >> 4, -128), 127))" in src


# ---- accumulation dtypes -------------------------------------------------------------------
def test_accumulator_dtypes_in_source():
    src = _body("gemm_fp16_accum")
    assert 'tcm.tiled_mma("wgmma", cutlass.Float16, cutlass.Float16, cutlass.Float16,' in src
    src = _body("half_fragment_accumulate")
    assert "acc = cute.make_rmem_tensor((64,), cutlass.Float16)" in src
    src = _body("bf16_reduce_sum_rows")
    assert "tc_red4 = cute.make_rmem_tensor((1,), cutlass.BFloat16)" in src
    src = _body("mixed_half_float_scale")  # TVM: half * float is float
    assert "Y[bx * 256 + i] = cutlass.Float32(A[bx * 256 + i]) * S[bx * 256 + i]" in src


# ---- GPU -----------------------------------------------------------------------------------
def _run(name, out_idx, *args, **kw):
    return tilecute.compile(getattr(P, name)(**kw), out_idx=out_idx, target="sm_90a")(*args)


def _eq(got, want):
    import torch
    assert torch.equal(got.cpu(), want.cpu()), (got, want)


def _close(got, want, tol, nan=False):
    import torch
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), atol=tol, rtol=tol, equal_nan=nan)


def _as_uint32(v):
    """int64 values in [0, 2^32) as a uint32 tensor (through int32's bits)."""
    import torch
    return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32).view(torch.uint32)


def _from_uint32(t):
    import torch
    v = t.view(torch.int32).to(torch.int64)
    return torch.where(v < 0, v + 2**32, v)


@pytest.mark.gpu
def test_index_widths_on_gpu():
    import torch
    torch.manual_seed(0)
    a = torch.randn(4096, device="cuda")
    _eq(_run("cast_int64_flat_copy", [1], a), a + 1.0)
    a = torch.randn(64, 512, device="cuda")
    _close(_run("int64_serial_rowsum", [1], a), a.sum(1), 1e-4)
    offs = _run("int64_page_offsets", [0])
    b = torch.arange(64, dtype=torch.int64)[:, None]
    p = torch.arange(16, dtype=torch.int64)[None, :]
    _eq(offs, (b * 16 + p) * 2**22)
    assert offs[63, 15].item() == 1023 * 2**22  # past 2^31


@pytest.mark.gpu
def test_float_specials_on_gpu():
    import torch
    torch.manual_seed(0)
    inf, nan = float("inf"), float("nan")
    # masked softmax: row 0 fully masked (max -inf, exp2(-inf - -inf) NaN), row 1 one live entry
    x = torch.randn(64, 128, device="cuda")
    mask = (torch.rand(64, 128, device="cuda") > 0.3).to(torch.int8)
    mask[0] = 0
    mask[1] = 0
    mask[1, 5] = 1
    s = torch.where(mask != 0, x, torch.full_like(x, -inf))
    e = torch.exp2((s - s.amax(1, keepdim=True)) * 1.44269504)
    want = e / e.sum(1, keepdim=True)
    got = _run("masked_softmax_neg_inf", [2], x, mask)
    assert torch.isnan(got[0]).all() and got[1, 5].item() == 1.0 and (got[1, :5] == 0).all()
    _close(got, want, 1e-5, nan=True)

    x = torch.randn(32, 256, device="cuda")
    x[0, :7] = nan
    x[1, 3:5] = inf
    x[1, 9] = -inf
    x[2, ::2] = nan
    x[2, 1::4] = -inf
    y, c = _run("nan_count_and_clean", [1, 2], x)
    _eq(c, torch.stack([torch.isnan(x).sum(1), torch.isinf(x).sum(1)], 1).int())
    _eq(y, torch.where(torch.isnan(x) | torch.isinf(x), torch.zeros_like(x), x))

    x = torch.randn(1024, device="cuda")
    x[:4] = torch.tensor([0.0, -0.0, -1.0, inf])
    lg, r, e = _run("log_div_specials", [1, 2, 3], x)
    assert lg[0].item() == -inf and lg[1].item() == -inf and torch.isnan(lg[2]) and lg[3].item() == inf
    assert r[0].item() == inf and r[1].item() == -inf and r[3].item() == 0.0
    assert e[0].item() == 0.0 and e[1].item() == 0.0 and e[3].item() == inf
    _close(lg, torch.log(x), 1e-5, nan=True)
    _close(r, 1.0 / x, 1e-6)
    _close(e, torch.exp2(torch.where(x == 0, torch.full_like(x, -inf), x)), 1e-5)

    x = torch.randn(1024, device="cuda") * 100
    x[:8] = torch.tensor([70000.0, -70000.0, 65504.0, 65519.0, 65520.0, 1e-8, nan, 3e38])
    h, b = _run("fp16_overflow_cast", [1, 2], x)  # round to nearest even: 65520 is inf
    assert h[0].item() == inf and h[1].item() == -inf and h[3].item() == 65504.0 and h[4].item() == inf
    assert b[0].item() != inf and b[7].item() != inf
    _close(h, x.half(), 0, nan=True)
    _close(b, x.bfloat16(), 0, nan=True)

    x = torch.randn(64, 128, device="cuda") * 3
    q, s = _run("fp8_saturating_quant", [1, 2], x)
    amax = x.abs().amax(1, keepdim=True)
    want = torch.clamp(x * (448.0 / amax) * 1.25, -448.0, 448.0).to(torch.float8_e4m3fn)
    assert q.float().abs().max().item() == 448.0  # saturated, not NaN
    _close(q, want, 0.125)
    _close(s, amax[:, 0] / 448.0, 1e-6)

    a = torch.randn(512, device="cuda")
    b = torch.randn(512, device="cuda")
    a[::5] = nan
    b[::7] = nan
    mx, mn = _run("max_min_with_nan", [2, 3], a, b)
    _eq(torch.isnan(mx), torch.isnan(a) & torch.isnan(b))
    _close(mx, torch.fmax(a, b), 0, nan=True)
    _close(mn, torch.fmin(a, b), 0, nan=True)


@pytest.mark.gpu
def test_integer_semantics_on_gpu():
    import numpy as np
    import torch
    torch.manual_seed(0)
    a = torch.randint(-1000, 1000, (256,), device="cuda", dtype=torch.int32)
    d = _run("floor_vs_trunc_div", [1], a)
    want = torch.stack([torch.div(a, 7, rounding_mode="floor"), torch.remainder(a, 7),
                        torch.div(a, 7, rounding_mode="trunc"), torch.fmod(a, 7)], 1)
    _eq(d, want)

    v = torch.randint(0, 2**32, (1024,), dtype=torch.int64)
    v[:3] = torch.tensor([0, 2**32 - 1, 2**31])
    h = _run("uint32_hash_wraparound", [1], _as_uint32(v).cuda())
    u = v.numpy().astype(np.uint32)
    hh = u * np.uint32(2654435761)
    hh = hh ^ (hh >> np.uint32(16))
    hh = hh * np.uint32(2246822519) + np.uint32(4294967295)
    _eq(_from_uint32(h), torch.from_numpy(hh.astype(np.int64)))

    a = torch.randint(-128, 128, (64, 256), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 256), device="cuda", dtype=torch.int8)
    a[0] = -128
    b[0] = -128  # 256 * 16384 = 2^22: no int8 or int16 wrap
    _eq(_run("int8_promoted_dot", [2], a, b), (a.int() * b.int()).sum(1).int())

    a = torch.randint(20000, 32767, (512,), device="cuda", dtype=torch.int16)
    b = torch.randint(-32768, 32767, (512,), device="cuda", dtype=torch.int16)
    s = a.int() + b.int()
    _eq(_run("int16_wrap_add", [2], a, b), ((s + 32768) % 65536 - 32768).to(torch.int16))

    a = torch.randint(-2000, 2000, (1024,), device="cuda", dtype=torch.int32)
    _eq(_run("int_clamp_quant", [1], a), torch.clamp((a * 3) >> 4, -128, 127).to(torch.int8))

    a = torch.randint(-128, 128, (512,), device="cuda", dtype=torch.int8)
    a[:3] = torch.tensor([-128, 127, 0])
    h = torch.randn(512, device="cuda").half()
    y, z, w = _run("select_mixed_dtypes", [2, 3, 4], a, h)
    ai = a.int()
    _eq(y, torch.where(a > 0, ai, torch.full_like(ai, 1000)))
    _eq(z, torch.where(h > 0, h.float(), torch.full_like(h.float(), 0.1)))
    _eq(w, torch.where(a > 0, ai * ai, ai - 100))
    assert w[1].item() == 16129 and w[0].item() == -228

    u = torch.randint(0, 2**16, (512,), dtype=torch.int64)
    v = torch.randint(0, 2**32, (512,), dtype=torch.int64)
    u[:4] = torch.tensor([0, 1, 10, 65535])
    v[:4] = torch.tensor([0, 1, 11, 2**32 - 1])
    y = _run("unsigned_underflow_compare", [2],
             u.to(torch.int32).to(torch.int16).view(torch.uint16).cuda(), _as_uint32(v).cuda())

    def as_int32(x):  # int64 values modulo 2^32 as int32 bits
        x = x % 2**32
        return torch.where(x >= 2**31, x - 2**32, x).to(torch.int32)
    want = torch.stack([((u - 1) < 10).int(), (((v - 1) % 2**32) < 10).int(),
                        as_int32(u * u), as_int32((v * v) % 2**32)], 1)
    _eq(y, want)
    assert y[0, 0].item() == 1 and y[0, 1].item() == 0 and y[3, 2].item() == -131071

    v = torch.randint(0, 2**32, (512,), dtype=torch.int64)
    v[:4] = torch.tensor([0, 1, 2, 2**32 - 1])
    x = torch.randn(512, device="cuda")
    y = _run("unsigned_compare_select", [2], _as_uint32(v).cuda(), x)
    _eq(y, torch.where(v.cuda() > 1, x, torch.full_like(x, -1.0)))


@pytest.mark.gpu
def test_accumulation_dtypes_on_gpu():
    import torch
    torch.manual_seed(0)
    a = (torch.randn(128, 256, device="cuda") * 0.1).half()
    b = (torch.randn(256, 128, device="cuda") * 0.1).half()
    _close(_run("gemm_fp16_accum", [2], a, b), a.float() @ b.float(), 2e-2)

    # values in {-1, 0, 1}: every partial sum is an integer of at most 256, exact in bfloat16
    x = torch.randint(-1, 2, (64, 256), device="cuda").bfloat16()
    _eq(_run("bf16_reduce_sum_rows", [1], x), x.float().sum(1).bfloat16())

    # multiples of 1/4 halved: every partial sum is exact in float16
    x = (torch.randint(-8, 9, (8, 64, 128), device="cuda").float() / 4).half()
    _eq(_run("half_fragment_accumulate", [1], x), (x.float() * 0.5).sum(0).half())

    a = torch.randn(1024, device="cuda").half()
    s = torch.randn(1024, device="cuda")
    _eq(_run("mixed_half_float_scale", [2], a, s), a.float() * s)
