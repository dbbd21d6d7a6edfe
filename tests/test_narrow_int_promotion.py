"""8- and 16-bit integer arithmetic as TileLang's CUDA C computes it: C promotes both
operands to int, so ``W[i] = A[i] * B[i]`` of two int8s into an int32 tensor (TVM's
``Cast("int32", A[i] * B[i])``, printed ``(int)(A[i] * B[i])``) is the whole product,
``T.cast((U[i] & 15) - 8, "float16")`` of a uint8 nibble is negative below 8, and a
comparison of a sum does not wrap.  A value stored back at its own width wraps as before.
The code generator computes such arithmetic in Int32 where it is converted or compared
(codegen/expr.py, ``PROMOTED_OPS``)."""

import re

import pytest

import tilecute
import tilecute.language as T


def narrow(n=256):
    @T.prim_func
    def promote(A: T.Tensor((n,), T.int8), B: T.Tensor((n,), T.int8),
                U: T.Tensor((n,), T.uint8), W: T.Tensor((n,), T.int32),
                P: T.Tensor((n,), T.int8), H: T.Tensor((n,), T.float16),
                C: T.Tensor((n,), T.int32), S: T.Tensor((n,), T.int32)):
        # 32 threads over 128 iterations: 4 lanes each (TileLang's partition; with 128
        # threads each would run one, unvectorized)
        with T.Kernel(n // 128, threads=32) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                W[g] = A[g] * B[g] + 1
                P[g] = A[g] * B[g]
                H[g] = T.cast((U[g] & 15) - 8, T.float16)
                C[g] = T.if_then_else(A[g] + B[g] > 100, 1, 0)
                S[g] = T.cast(U[g] << 4, T.int32) + T.cast(U[g], T.int32)
    return promote


def test_widened_arithmetic_is_computed_in_int32():
    src = tilecute.compile(narrow()).get_kernel_source()
    assert "cutlass.Int32(cutlass.Int32(tc_vec" in src and ") * cutlass.Int32(tc_vec" in src, src
    assert "cutlass.Float16(cutlass.Int32(" in src and ") - 8)" in src, src
    assert "cutlass.select_(cutlass.Int32(" in src, src
    # stored at its own width: int8 arithmetic, wrapping as the store would
    assert re.search(r"\] = tc_vec\d+\[tc_lane\d+\] \* tc_vec\d+\[tc_lane\d+\]\n", src), src


def test_builds_a_cubin(tmp_path):
    assert tilecute.build_cubin(narrow(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_narrow_arithmetic_on_gpu():
    import torch
    a = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    u = torch.randint(0, 256, (256,), dtype=torch.uint8, device="cuda")
    w, c, s = (torch.empty(256, dtype=torch.int32, device="cuda") for _ in range(3))
    p = torch.empty(256, dtype=torch.int8, device="cuda")
    h = torch.empty(256, dtype=torch.float16, device="cuda")
    tilecute.compile(narrow())(a, b, u, w, p, h, c, s)
    ai, bi, ui = a.cpu().int(), b.cpu().int(), u.cpu().int()
    assert torch.equal(w.cpu(), ai * bi + 1)
    assert torch.equal(p.cpu(), (ai * bi).to(torch.int8))  # (wraps: int32 -> int8 keeps the low byte)
    assert torch.equal(h.cpu(), ((ui & 15) - 8).half())
    assert torch.equal(c.cpu(), (ai + bi > 100).int())
    assert torch.equal(s.cpu(), (ui << 4) + ui)


def unsigned_reads(n=256):
    """uint8 / uint16 / uint32 elements read from global and shared memory, converted to
    float32 and int32 and shifted right: CuTe DSL reads an unsigned memory element as its
    signless (signed) type, so a byte of 200 was -56 and >> shifted in ones."""
    @T.prim_func
    def unsigned(U: T.Tensor((n,), T.uint8), V: T.Tensor((n,), T.uint16),
                 X: T.Tensor((n,), T.uint32), F: T.Tensor((n,), T.float32),
                 I: T.Tensor((n,), T.int32), R: T.Tensor((n,), T.int32),
                 G: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            s = T.alloc_shared((128,), T.uint8)
            for i in T.Parallel(128):
                s[i] = U[bx * 128 + i]
            for i in T.Parallel(128):  # (permuted reads: one element at a time)
                g = bx * 128 + i
                p = bx * 128 + i * 5 % 128
                F[g] = T.cast(s[i * 5 % 128], T.float32) + T.cast(V[p], T.float32)
                I[g] = T.cast(U[p], T.int32) + T.cast(V[p] >> 8, T.int32)
                R[g] = T.cast(s[i * 5 % 128] >> 4, T.int32)
                G[g] = T.cast(X[p], T.float32)
    return unsigned


def test_unsigned_memory_reads_keep_their_type(tmp_path):
    info = tilecute.build_cubin(unsigned_reads(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names
    src = (tmp_path / "kernel_cute.py").read_text()
    assert re.search(r"cutlass\.Uint8\(s\[", src) and re.search(r"cutlass\.Uint16\(V\[", src)
    assert re.search(r"cutlass\.Uint32\(X\[", src)


@pytest.mark.gpu
def test_unsigned_memory_reads_on_gpu():
    import torch

    n = 256
    u = torch.arange(n, device="cuda", dtype=torch.int32).to(torch.uint8)
    v = (torch.arange(n, device="cuda", dtype=torch.int32) * 257).to(torch.uint16)
    x = (torch.arange(n, device="cuda", dtype=torch.int64) * 16777259).to(torch.uint32)
    f, i, r, g = (torch.empty(n, device="cuda", dtype=dt)
                  for dt in (torch.float32, torch.int32, torch.int32, torch.float32))
    tilecute.compile(unsigned_reads(n))(u, v, x, f, i, r, g)
    perm = torch.arange(n, device="cuda") // 128 * 128 + torch.arange(n, device="cuda") * 5 % 128
    u64, v64 = u.long()[perm], (v.to(torch.int32).long() & 0xFFFF)[perm]
    x64 = (x.to(torch.int64) & 0xFFFFFFFF)[perm]
    assert torch.equal(f, (u64 + v64).float())
    assert torch.equal(i.long(), u64 + (v64 >> 8))
    assert torch.equal(r.long(), u64 >> 4)
    torch.testing.assert_close(g, x64.double().float(), rtol=0, atol=0)


def width_sensitive(n=256):
    """A shift right, a division and a max over a promoted value: C's value is the one
    computed in int (``(a + b) >> 1`` of two uint8s 200 and 100 is 150)."""

    @T.prim_func
    def avg(A: T.Tensor((n,), T.uint8), B: T.Tensor((n,), T.uint8), O: T.Tensor((3, n), T.uint8),
            I: T.Tensor((n,), T.int8), Q: T.Tensor((n,), T.int32)):
        with T.Kernel(n // 128, threads=32) as bx:  # 4 lanes a thread
            for i in T.Parallel(128):
                g = bx * 128 + i
                O[0, g] = (A[g] + B[g]) >> 1
                O[1, g] = (A[g] * B[g]) // 7
                O[2, g] = T.max(A[g] + B[g], B[g]) & 255
                Q[g] = T.cast((I[g] * I[g]) % 10, T.int32)
    return avg


def test_width_sensitive_ops_over_promoted_values_compute_in_int32():
    src = tilecute.compile(width_sensitive()).get_kernel_source()
    lane = r"tc_vec\d+\[tc_lane\d+\]"
    # the whole expression in Int32, converted once to the stored width
    assert re.search(rf"= cutlass\.Uint8\(cutlass\.Int32\({lane}\) \+ cutlass\.Int32\({lane}\) >> 1\)", src), src
    # an unsigned // is TVM's C division of the promoted values
    assert re.search(rf"cutlass\.Uint8\(tcmath\.truncdiv\(cutlass\.Int32\({lane}\) \* cutlass\.Int32\({lane}\), 7\)\)", src), src
    assert re.search(rf"cutlass\.Uint8\(cutlass\.max\(cutlass\.Int32\({lane}\) \+ cutlass\.Int32\({lane}\), "
                     rf"cutlass\.Int32\({lane}\)\) & 255\)", src), src
    # a signed % floors, on the whole product
    assert re.search(rf"cutlass\.Int32\(cutlass\.Int32\({lane}\) \* cutlass\.Int32\({lane}\) - "
                     rf"cutlass\.Int32\({lane}\) \* cutlass\.Int32\({lane}\) // 10 \* 10\)", src), src


def test_width_sensitive_builds_a_cubin(tmp_path):
    assert tilecute.build_cubin(width_sensitive(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_width_sensitive_on_gpu():
    import torch
    a = torch.randint(0, 256, (256,), dtype=torch.uint8)
    b = torch.randint(0, 256, (256,), dtype=torch.uint8)
    a[0], b[0] = 200, 100
    i = torch.randint(-128, 128, (256,), dtype=torch.int8)
    o = torch.empty(3, 256, dtype=torch.uint8, device="cuda")
    q = torch.empty(256, dtype=torch.int32, device="cuda")
    tilecute.compile(width_sensitive())(a.cuda(), b.cuda(), o, i.cuda(), q)
    ai, bi, ii = a.long(), b.long(), i.long()
    want = torch.stack([(ai + bi) >> 1, (ai * bi) // 7, torch.maximum(ai + bi, bi) & 255])
    assert torch.equal(o.cpu().long(), want & 255)
    assert o[0, 0].item() == 150
    assert torch.equal(q.cpu().long(), torch.remainder(ii * ii, 10))


def selects_and_abs(n=256):
    """``T.if_then_else`` over narrow arithmetic (TVM prints it as C's ``c ? a : b``, whose
    operands C converts as arithmetic does: the int product of two uint8s is kept whole
    where the selection is converted or shifted), ``T.abs`` of int8 (TVM's ``x >= 0 ? x :
    0 - x``: |-128| is 128 in int, -128 stored back as int8; |a - b| of the whole
    difference), and an integer selection converted to float (a build error before)."""
    @T.prim_func
    def sel(A: T.Tensor((n,), T.int8), B: T.Tensor((n,), T.int8), U: T.Tensor((n,), T.uint8),
            W: T.Tensor((n, 6), T.int32), P: T.Tensor((n, 2), T.int8), F: T.Tensor((n, 3), T.float32)):
        with T.Kernel(n // 128, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            a = A[i]
            b = B[i]
            u = U[i]
            W[i, 0] = T.if_then_else(a > 0, u * u, u)
            W[i, 1] = T.if_then_else(a > 0, u + u, u) >> 1
            W[i, 2] = T.abs(a)
            W[i, 3] = T.abs(a - b)
            W[i, 4] = T.if_then_else(T.abs(a) > 127, 1, 0)
            W[i, 5] = T.max(T.if_then_else(a > 0, u * 2, u), 200)
            P[i, 0] = T.abs(a)
            P[i, 1] = T.abs(a - b)
            F[i, 0] = T.cast(T.if_then_else(a > 0, u * u, u), T.float32)
            F[i, 1] = T.cast(T.if_then_else(a > 0, a, b), T.float32)
            F[i, 2] = F[i, 2] * T.if_then_else(b > 0, 1, 0)
    return sel


def test_selects_and_abs_of_narrow_values_compute_as_c_does():
    src = tilecute.compile(selects_and_abs()).get_kernel_source()
    assert "W[i, 0] = cutlass.Int32(cutlass.select_(a > cutlass.Int8(0), cutlass.Int32(u) * cutlass.Int32(u), cutlass.Int32(u)))" in src, src
    # (u + u is printed u * 2: tests/test_self_sum_division.py)
    assert "W[i, 1] = cutlass.Int32(cutlass.select_(a > cutlass.Int8(0), cutlass.Int32(u) * 2, cutlass.Int32(u)) >> 1)" in src, src
    assert "W[i, 2] = cutlass.Int32(abs(cutlass.Int32(a)))" in src, src
    assert "W[i, 3] = cutlass.Int32(abs(cutlass.Int32(a) - cutlass.Int32(b)))" in src, src
    assert "cutlass.select_(abs(cutlass.Int32(a)) > 127, 1, 0)" in src, src
    assert "P[i, 0] = abs(a)" in src, src  # stored at its width: wraps alike
    assert "P[i, 1] = cutlass.Int8(abs(cutlass.Int32(a) - cutlass.Int32(b)))" in src, src
    # an integer select_ (a value without a sign) named before its float conversion
    assert "cutlass.Float32(cutlass.Int32(cutlass.select_(a > cutlass.Int8(0), cutlass.Int32(u)" in src, src
    assert "cutlass.Float32(cutlass.Int8(cutlass.select_(a > cutlass.Int8(0), a, b)))" in src, src
    assert "cutlass.Float32(cutlass.Int32(cutlass.select_(b > cutlass.Int8(0), 1, 0)))" in src, src


def test_selects_and_abs_build_a_cubin(tmp_path):
    assert tilecute.build_cubin(selects_and_abs(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_selects_and_abs_on_gpu():
    import torch
    torch.manual_seed(0)
    a = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    a[:4] = torch.tensor([-128, 127, 0, -1], dtype=torch.int8)
    b[:4] = torch.tensor([100, -128, -128, 5], dtype=torch.int8)
    u = torch.randint(0, 256, (256,), dtype=torch.uint8, device="cuda")
    w = torch.empty(256, 6, dtype=torch.int32, device="cuda")
    p = torch.empty(256, 2, dtype=torch.int8, device="cuda")
    f = torch.randn(256, 3, device="cuda")
    f2 = f[:, 2].clone()
    tilecute.compile(selects_and_abs())(a, b, u, w, p, f)
    ai, bi, ui = a.cpu().int(), b.cpu().int(), u.cpu().int()
    pos = ai > 0
    assert torch.equal(w[:, 0].cpu(), torch.where(pos, ui * ui, ui))
    assert torch.equal(w[:, 1].cpu(), torch.where(pos, ui + ui, ui) >> 1)
    assert torch.equal(w[:, 2].cpu(), ai.abs())
    assert torch.equal(w[:, 3].cpu(), (ai - bi).abs())
    assert torch.equal(w[:, 4].cpu(), (ai.abs() > 127).int())
    assert torch.equal(w[:, 5].cpu(), torch.where(pos, ui * 2, ui).clamp(min=200))
    assert torch.equal(p[:, 0].cpu(), ai.abs().to(torch.int8))
    assert torch.equal(p[:, 1].cpu(), (ai - bi).abs().to(torch.int8))
    assert torch.equal(f[:, 0].cpu(), torch.where(pos, ui * ui, ui).float())
    assert torch.equal(f[:, 1].cpu(), torch.where(pos, ai, bi).float())
    assert torch.equal(f[:, 2], f2 * (b > 0).float())


def bit_not(n=256):
    """``~x`` / ``T.bitwise_not(x)`` of 8- and 16-bit unsigned values: TVM's bitwise_not,
    printed ``~x``, which C computes on the value promoted to int (~200 of a uint8 is -201
    where converted or compared, so ``~u > 0`` never holds); stored back at its width it is
    ``x ^ 255``.  tilecute built ``x ^ 255``, whose int value is 55 (silently unlike)."""
    @T.prim_func
    def bnot(U: T.Tensor((n,), T.uint8), V: T.Tensor((n,), T.uint16), W: T.Tensor((n, 4), T.int32),
             P: T.Tensor((n, 2), T.uint8)):
        with T.Kernel(n // 128, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            u = U[i]
            W[i, 0] = ~u
            W[i, 1] = T.bitwise_not(V[i])
            W[i, 2] = T.if_then_else(~u > 0, 1, 0)
            W[i, 3] = (~(u + u)) >> 1
            P[i, 0] = ~u
            P[i, 1] = ~(u + u) >> 1
    return bnot


def test_bitwise_not_of_narrow_unsigned_is_cs_int():
    func = bit_not()
    assert "T.bitwise_not(u)" in func.script()
    src = tilecute.compile(func).get_kernel_source()
    assert "W[i, 0] = cutlass.Int32(cutlass.Int32(u) ^ -1)" in src, src
    assert "W[i, 1] = cutlass.Int32(cutlass.Int32(cutlass.Uint16(V[i])) ^ -1)" in src, src
    assert "cutlass.select_(cutlass.Int32(u) ^ -1 > 0, 1, 0)" in src, src
    assert "P[i, 0] = u ^ cutlass.Uint8(255)" in src, src
    assert "P[i, 1] = cutlass.Uint8((cutlass.Int32(u) * 2 ^ -1) >> 1)" in src, src


def test_bitwise_not_builds_a_cubin(tmp_path):
    assert tilecute.build_cubin(bit_not(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_bitwise_not_on_gpu():
    import torch
    u = torch.randint(0, 256, (256,), dtype=torch.uint8, device="cuda")
    v = torch.randint(0, 65536, (256,), dtype=torch.int32, device="cuda").to(torch.uint16)
    w = torch.empty(256, 4, dtype=torch.int32, device="cuda")
    p = torch.empty(256, 2, dtype=torch.uint8, device="cuda")
    tilecute.compile(bit_not())(u, v, w, p)
    ui, vi = u.cpu().int(), v.to(torch.int32).cpu() & 0xFFFF
    assert torch.equal(w[:, 0].cpu(), ~ui)
    assert torch.equal(w[:, 1].cpu(), ~vi)
    assert torch.equal(w[:, 2].cpu(), torch.zeros(256, dtype=torch.int32))
    assert torch.equal(w[:, 3].cpu(), (~(ui + ui)) >> 1)
    assert torch.equal(p[:, 0].cpu(), (~ui).to(torch.uint8))
    assert torch.equal(p[:, 1].cpu(), ((~(ui + ui)) >> 1).to(torch.uint8))


def trunc_divmod(n=256):
    """``T.truncdiv`` / ``T.truncmod`` (TVM's Div / Mod, C's ``/`` and ``%``) of narrow
    arithmetic: C divides the int sum / product (``truncdiv(a + b, 2)`` of int8s 100 and 100
    is 100), as the floor forms already did; tilecute divided the wrapped int8."""
    @T.prim_func
    def tdm(A: T.Tensor((n,), T.int8), B: T.Tensor((n,), T.int8), W: T.Tensor((n, 2), T.int32),
            P: T.Tensor((n,), T.int8)):
        with T.Kernel(n // 128, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            W[i, 0] = T.truncdiv(A[i] + B[i], 2)
            W[i, 1] = T.truncmod(A[i] * B[i], 7)
            P[i] = T.truncdiv(A[i] + B[i], 2)
    return tdm


def test_trunc_divmod_of_narrow_sums_divides_cs_int(tmp_path):
    src = tilecute.compile(trunc_divmod()).get_kernel_source()
    assert "W[i, 0] = cutlass.Int32(tcmath.truncdiv(cutlass.Int32(A[i]) + cutlass.Int32(B[i]), 2))" in src, src
    assert "W[i, 1] = cutlass.Int32(tcmath.truncmod(cutlass.Int32(A[i]) * cutlass.Int32(B[i]), 7))" in src, src
    assert "P[i] = cutlass.Int8(tcmath.truncdiv(cutlass.Int32(A[i]) + cutlass.Int32(B[i]), 2))" in src, src
    assert tilecute.build_cubin(trunc_divmod(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_trunc_divmod_on_gpu():
    import torch
    a = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (256,), dtype=torch.int8, device="cuda")
    w = torch.empty(256, 2, dtype=torch.int32, device="cuda")
    p = torch.empty(256, dtype=torch.int8, device="cuda")
    tilecute.compile(trunc_divmod())(a, b, w, p)
    ai, bi = a.cpu().int(), b.cpu().int()
    s, m = ai + bi, ai * bi
    assert torch.equal(w[:, 0].cpu(), torch.div(s, 2, rounding_mode="trunc"))
    assert torch.equal(w[:, 1].cpu(), torch.fmod(m, 7))
    assert torch.equal(p.cpu(), torch.div(s, 2, rounding_mode="trunc").to(torch.int8))
