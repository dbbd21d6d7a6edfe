"""A twenty-sixth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), each a small semantic trap where a compiler could be silently wrong rather than
refuse: integer floor / truncating division and modulo of negative values, signed and
unsigned shifts, 8-bit wrap-around and C's integer promotions, int64 products past 2^31,
mixed-dtype promotion (Python floats beside float16, int beside float), conversions that
overflow float16 or round to bfloat16, bools as integers, ragged ``T.Parallel`` extents and
ragged ``T.copy`` tiles, reductions along either dim of shared and fragment tiles (negative
dims, ``clear=False``, absmax / abssum / bitand / bitor / bitxor), ``T.cumsum`` with
``reverse=``, ``T.fill`` / ``T.clear`` of a slice, ``T.copy`` between fragments of different
dtypes, ``T.alloc_var(init=)``, stepped and negative-step ``T.serial`` loops, ``T.unroll`` of a
run-time bound, ``while`` loops, atomics' returned values on global and shared memory,
``T.if_then_else`` guarding reads past a buffer's end, rounding modes (``T.round``,
``T.nearbyint``, ``T.trunc``, ``T.floor``), ``T.abs`` of INT_MIN and ``T.max`` of mixed dtypes;
then saturating fp8 and ``x != 0`` bool conversions, reductions converting to a wider output,
copy windows at odd and run-time offsets and over rows of a symbolic odd stride, uint32 values
past the sign bit (division, compares, conversions), a ragged pipelined GEMM, a ragged tile
``T.atomic_add``, a short-circuit ``and`` guarding reads, a roll by a negative floormod,
``break`` / ``continue``, float32 shared tiles copied to bfloat16 / fp8 globals, ``T.reshape``
/ ``T.view`` reinterpreting bytes, float atomic max / min over negative values with returned
previous values, and a column region copied into a row region.

``tests/test_unseen_programs26.py`` builds each to a cubin on the CPU, checks what each means
in the generated source, and on a GPU compares it with a torch reference."""

import tilecute
import tilecute.language as T


# ---- integer division, modulo, shifts, wrap-around ------------------------------------------
@tilecute.jit(out_idx=[2, 3, 4, 5])
def int_div_mod_signs(N=256, threads=128):
    """Q = A // B and R = A % B (TVM's floordiv / floormod: Python's signs), TQ / TR =
    T.truncdiv / T.truncmod (C's), for A and B of either sign (B never 0)."""

    @T.prim_func
    def divmod_(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), Q: T.Tensor((N,), "int32"),
                R: T.Tensor((N,), "int32"), TQ: T.Tensor((N,), "int32"), TR: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                a = A[bx * threads + i]
                b = B[bx * threads + i]
                Q[bx * threads + i] = a // b
                R[bx * threads + i] = a % b
                TQ[bx * threads + i] = T.truncdiv(a, b)
                TR[bx * threads + i] = T.truncmod(a, b)
    return divmod_


@tilecute.jit(out_idx=[1, 2])
def const_div_mod_negative(N=256, threads=128):
    """Division and modulo by constants of a value that goes negative: Q = (A - 100) // 8,
    R = (A - 100) % 8 and the same with a negative divisor (-8) stored after them."""

    @T.prim_func
    def cdm(A: T.Tensor((N,), "int32"), Q: T.Tensor((N, 2), "int32"), R: T.Tensor((N, 2), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                v = A[bx * threads + i] - 100
                Q[bx * threads + i, 0] = v // 8
                R[bx * threads + i, 0] = v % 8
                Q[bx * threads + i, 1] = v // -8
                R[bx * threads + i, 1] = v % -8
    return cdm


@tilecute.jit(out_idx=[2, 3])
def shifts_signed_unsigned(N=256, threads=128):
    """S = A >> 3 of a signed int32 (arithmetic: -9 >> 3 == -2), U = B >> 3 of a uint32
    (logical), and both shifted left by 1 first (int wraps)."""

    @T.prim_func
    def sh(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "uint32"), S: T.Tensor((N, 2), "int32"),
           U: T.Tensor((N, 2), "uint32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                S[bx * threads + i, 0] = A[bx * threads + i] >> 3
                S[bx * threads + i, 1] = (A[bx * threads + i] << 1) >> 1
                U[bx * threads + i, 0] = B[bx * threads + i] >> 3
                U[bx * threads + i, 1] = (B[bx * threads + i] << 1) >> 1
    return sh


@tilecute.jit(out_idx=[2, 3, 4])
def int8_wrap_and_promote(N=256, threads=128):
    """W = A + B stored as int8 (wraps), P = A * B converted to int32 (C's promotion: the
    whole product), H = (A + B) >> 1 as int8 (the int sum halved, then narrowed)."""

    @T.prim_func
    def wrap(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8"), W: T.Tensor((N,), "int8"),
             P: T.Tensor((N,), "int32"), H: T.Tensor((N,), "int8")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                a = A[bx * threads + i]
                b = B[bx * threads + i]
                W[bx * threads + i] = a + b
                P[bx * threads + i] = T.cast(a * b, "int32")
                H[bx * threads + i] = (a + b) >> 1
    return wrap


@tilecute.jit(out_idx=[1])
def int64_offsets(N=256, threads=128):
    """O[i] = int64(A[i]) * 3_000_000_007 + i: the product passes 2^31 and must be int64;
    a 32-bit product would wrap."""

    @T.prim_func
    def off(A: T.Tensor((N,), "int32"), O: T.Tensor((N,), "int64")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                O[g] = T.cast(A[g], "int64") * 3000000007 + g
    return off


@tilecute.jit(out_idx=[1])
def int32_product_wraps(N=256, threads=128):
    """O[i] = A[i] * 65536 in int32 (wraps, as C's int does) -- not widened silently."""

    @T.prim_func
    def w(A: T.Tensor((N,), "int32"), O: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                O[bx * threads + i] = A[bx * threads + i] * 65536
    return w


# ---- dtype promotion and conversions -------------------------------------------------------
@tilecute.jit(out_idx=[2, 3])
def half_times_python_float(N=1024, threads=128):
    """Y = X * 0.1 + 1 of float16 X: TileLang types 0.1 float32, so the product is float32,
    rounded to float16 once when stored; Z = X + F (float16 + float32 -> float32) stored
    float32."""

    @T.prim_func
    def hp(X: T.Tensor((N,), "float16"), F: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float16"),
           Z: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                Y[bx * threads + i] = X[bx * threads + i] * 0.1 + 1
                Z[bx * threads + i] = X[bx * threads + i] + F[bx * threads + i]
    return hp


@tilecute.jit(out_idx=[1, 2, 3])
def narrowing_casts(N=1024, threads=128):
    """H = fp16(X) (values past 65504 become inf), Bf = bf16(X) (round to nearest even),
    I = int32(X) (C's conversion: toward zero)."""

    @T.prim_func
    def nc(X: T.Tensor((N,), "float32"), H: T.Tensor((N,), "float16"), Bf: T.Tensor((N,), "bfloat16"),
           I: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            x_f = T.alloc_fragment((threads,), "float32")
            T.copy(X[bx * threads:(bx + 1) * threads], x_f)
            for i in T.Parallel(threads):
                H[bx * threads + i] = T.cast(x_f[i], "float16")
                Bf[bx * threads + i] = T.Cast("bfloat16", x_f[i])
                I[bx * threads + i] = T.cast(x_f[i], "int32")
    return nc


@tilecute.jit(out_idx=[2])
def bool_arith_counts(N=256, M=16, threads=128):
    """C[i] = number of j with A[i, j] > B[i, j] (a bool cast to int32 and summed serially),
    plus 10 * (A[i, 0] == B[i, 0])."""

    @T.prim_func
    def bc(A: T.Tensor((N, M), "float32"), B: T.Tensor((N, M), "float32"), C: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                acc = T.alloc_var("int32", init=0)
                for j in T.serial(M):
                    acc += T.cast(A[bx * threads + i, j] > B[bx * threads + i, j], "int32")
                C[bx * threads + i] = acc + (A[bx * threads + i, 0] == B[bx * threads + i, 0]) * 10
    return bc


@tilecute.jit(out_idx=[2])
def mixed_max_int_float(N=256, threads=128):
    """O = T.max(I, X) of an int32 and a float16 (TVM promotes to float16), then + 0.5 in
    float32 (a Python float beside float16)."""

    @T.prim_func
    def mm(I: T.Tensor((N,), "int32"), X: T.Tensor((N,), "float16"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                O[bx * threads + i] = T.max(I[bx * threads + i], X[bx * threads + i]) + 0.5
    return mm


@tilecute.jit(out_idx=[1, 2, 3, 4, 5])
def rounding_modes(N=1024, threads=128):
    """T.round (ties to even), T.nearbyint (the current mode: to nearest even), T.trunc,
    T.floor, T.ceil of float32 values including exact halves."""

    @T.prim_func
    def rm(X: T.Tensor((N,), "float32"), R: T.Tensor((N,), "float32"), NB: T.Tensor((N,), "float32"),
           Tr: T.Tensor((N,), "float32"), Fl: T.Tensor((N,), "float32"), Ce: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                x = X[bx * threads + i]
                R[bx * threads + i] = T.round(x)
                NB[bx * threads + i] = T.nearbyint(x)
                Tr[bx * threads + i] = T.trunc(x)
                Fl[bx * threads + i] = T.floor(x)
                Ce[bx * threads + i] = T.ceil(x)
    return rm


@tilecute.jit(out_idx=[1, 2])
def abs_int_min(N=256, threads=128):
    """A = T.abs(X) of int32 (INT_MIN stays INT_MIN, as C's wrap), B = T.abs of int8
    widened to int32 (|-128| is 128: C's promotion)."""

    @T.prim_func
    def ab(X: T.Tensor((N,), "int32"), A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                A[bx * threads + i] = T.abs(X[bx * threads + i])
                B[bx * threads + i] = T.cast(T.abs(T.cast(X[bx * threads + i], "int8")), "int32")
    return ab


# ---- ragged extents and tiles ----------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def parallel_ragged_extent(N=1000, threads=128):
    """One block: O[i] = 2 * X[i] + 1 over T.Parallel(N) with N = 1000, not a multiple of the
    128 threads (the last step runs on 104 of them)."""

    @T.prim_func
    def pr(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_s = T.alloc_shared((N,), "float32")
            T.copy(X, x_s)
            for i in T.Parallel(N):
                O[i] = 2.0 * x_s[i] + 1.0
    return pr


@tilecute.jit(out_idx=[1])
def ragged_copy_tiles(M=100, N=70, bm=64, bn=32, threads=128):
    """O = X^T * 3 over (64, 32) tiles of a (100, 70) matrix: T.copy of the tile clamps reads
    and writes past M and N; the transpose goes through shared memory."""

    @T.prim_func
    def rc(X: T.Tensor((M, N), "float32"), O: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            x_s = T.alloc_shared((bm, bn), "float32")
            t_s = T.alloc_shared((bn, bm), "float32")
            T.copy(X[by * bm, bx * bn], x_s)
            for j, i in T.Parallel(bn, bm):
                t_s[j, i] = x_s[i, j] * 3.0
            T.copy(t_s, O[bx * bn:(bx + 1) * bn, by * bm:(by + 1) * bm])
    return rc


@tilecute.jit(out_idx=[1])
def guarded_shift_read(N=1000, threads=128):
    """O[i] = X[i + 1] - X[i - 1] with T.if_then_else guarding both ends: the reads past the
    tensor's ends are not taken (0.0 instead)."""

    @T.prim_func
    def gs(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                if g < N:
                    O[g] = T.if_then_else(g + 1 < N, X[g + 1], 0.0) - T.if_then_else(g >= 1, X[g - 1], 0.0)
    return gs


# ---- reductions ------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1, 2])
def reduce_shared_both_dims(M=64, N=128, threads=128):
    """On a shared (64, 128) tile: R = row sums (dim=-1, TileLang's default), C = column
    maxima (dim=0)."""

    @T.prim_func
    def rs(X: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_s = T.alloc_shared((M, N), "float32")
            r_s = T.alloc_shared((M,), "float32")
            c_s = T.alloc_shared((N,), "float32")
            T.copy(X, x_s)
            T.reduce_sum(x_s, r_s, dim=-1)
            T.reduce_max(x_s, c_s, dim=0)
            T.copy(r_s, R)
            T.copy(c_s, C)
    return rs


@tilecute.jit(out_idx=[1])
def reduce_accumulate_no_clear(M=64, N=64, K=4, threads=128):
    """Acc[m] = sum over K tiles of the row sums: T.reduce_sum(..., clear=False) adds to the
    fragment's values, which start at 1.0 (so the answer is 1 + sum)."""

    @T.prim_func
    def ra(X: T.Tensor((M, K * N), "float32"), Acc: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((M,), "float32")
            T.fill(acc, 1.0)
            for k in T.serial(K):
                T.copy(X[0, k * N], x_f)
                T.reduce_sum(x_f, acc, dim=1, clear=False)
            T.copy(acc, Acc)
    return ra


@tilecute.jit(out_idx=[1, 2, 3])
def reduce_abs_and_max_clear_false(M=64, N=64, threads=128):
    """Per row: absmax, abssum, and T.reduce_max(clear=False) into a fragment preset to 0.5
    (so a row whose max is below 0.5 gives 0.5)."""

    @T.prim_func
    def rab(X: T.Tensor((M, N), "float32"), AM: T.Tensor((M,), "float32"), AS: T.Tensor((M,), "float32"),
            MX: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float32")
            am = T.alloc_fragment((M,), "float32")
            asum = T.alloc_fragment((M,), "float32")
            mx = T.alloc_fragment((M,), "float32")
            T.copy(X, x_f)
            T.reduce_absmax(x_f, am, dim=1)
            T.reduce_abssum(x_f, asum, dim=1)
            T.fill(mx, 0.5)
            T.reduce_max(x_f, mx, dim=1, clear=False)
            T.copy(am, AM)
            T.copy(asum, AS)
            T.copy(mx, MX)
    return rab


@tilecute.jit(out_idx=[1, 2, 3])
def reduce_bitwise_cols(M=32, N=64, threads=128):
    """Per column of an int32 (32, 64) tile: bitand, bitor and bitxor along dim 0."""

    @T.prim_func
    def rb(X: T.Tensor((M, N), "int32"), BA: T.Tensor((N,), "int32"), BO: T.Tensor((N,), "int32"),
           BX: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "int32")
            a_f = T.alloc_fragment((N,), "int32")
            o_f = T.alloc_fragment((N,), "int32")
            x2_f = T.alloc_fragment((N,), "int32")
            T.copy(X, x_f)
            T.reduce_bitand(x_f, a_f, dim=0)
            T.reduce_bitor(x_f, o_f, dim=0)
            T.reduce_bitxor(x_f, x2_f, dim=0)
            T.copy(a_f, BA)
            T.copy(o_f, BO)
            T.copy(x2_f, BX)
    return rb


@tilecute.jit(out_idx=[1, 2])
def reduce_min_int_keepdim(M=64, N=64, threads=128):
    """T.reduce_min of an int32 fragment along dim=-1 into a (64, 1) fragment (TileLang's
    kept dim), and along dim=-2 into (1, 64)."""

    @T.prim_func
    def rmk(X: T.Tensor((M, N), "int32"), RM: T.Tensor((M, 1), "int32"), CM: T.Tensor((1, N), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "int32")
            r_f = T.alloc_fragment((M, 1), "int32")
            c_f = T.alloc_fragment((1, N), "int32")
            T.copy(X, x_f)
            T.reduce_min(x_f, r_f, dim=-1)
            T.reduce_min(x_f, c_f, dim=-2)
            T.copy(r_f, RM)
            T.copy(c_f, CM)
    return rmk


@tilecute.jit(out_idx=[1, 2])
def cumsum_fragment_rows_reverse(M=32, N=64, threads=128):
    """Per row of a fragment: the inclusive prefix sum (F) and, on a second copy, the
    reverse (suffix) sum (Rv), both along dim=1."""

    @T.prim_func
    def cs(X: T.Tensor((M, N), "float32"), F: T.Tensor((M, N), "float32"), Rv: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            a_s = T.alloc_shared((M, N), "float32")
            b_s = T.alloc_shared((M, N), "float32")
            T.copy(X, a_s)
            T.copy(X, b_s)
            T.cumsum(a_s, dim=1)
            T.cumsum(b_s, dim=1, reverse=True)
            T.copy(a_s, F)
            T.copy(b_s, Rv)
    return cs


# ---- fills, conversions, vars ----------------------------------------------------------------
@tilecute.jit(out_idx=[0])
def fill_and_clear_slices(M=64, N=64, threads=128):
    """A shared (64, 64) tile filled with 7, rows 8..15 cleared, columns 32..63 of rows
    40..47 set to -1 (T.fill / T.clear of slices), then stored."""

    @T.prim_func
    def fc(O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((M, N), "float32")
            T.fill(s, 7.0)
            T.clear(s[8:16, :])
            T.fill(s[40:48, 32:64], -1.0)
            T.copy(s, O)
    return fc


@tilecute.jit(out_idx=[1, 2])
def fragment_copy_converts(M=64, N=64, threads=128):
    """T.copy of a float32 fragment into a float16 fragment and a bfloat16 fragment (each
    element converted, rounding to nearest even), then each stored."""

    @T.prim_func
    def fcv(X: T.Tensor((M, N), "float32"), H: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float32")
            h_f = T.alloc_fragment((M, N), "float16")
            b_f = T.alloc_fragment((M, N), "bfloat16")
            T.copy(X, x_f)
            T.copy(x_f, h_f)
            T.copy(x_f, b_f)
            T.copy(h_f, H)
            T.copy(b_f, B)
    return fcv


@tilecute.jit(out_idx=[1])
def int_to_float_copy(N=256, threads=128):
    """T.copy of an int32 global slice into a float32 shared tile (converted, not
    reinterpreted), then + 0.25."""

    @T.prim_func
    def itf(X: T.Tensor((N,), "int32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            s = T.alloc_shared((threads,), "float32")
            T.copy(X[bx * threads:(bx + 1) * threads], s)
            for i in T.Parallel(threads):
                O[bx * threads + i] = s[i] + 0.25
    return itf


# ---- loops -----------------------------------------------------------------------------------
@tilecute.jit(out_idx=[3])
def serial_step_loops(N=128, L=37, threads=128):
    """Per row of X (N, L): O[r, 0] = sum of X[r, 3 k] over T.serial(0, L, 3) (13 terms,
    the last at 36), O[r, 1] = sum over T.serial(L - 1, -1, -2) (36, 34, ..., 0: a negative
    step, 19 terms) weighted by their order, O[r, 2] = the count of iterations of
    T.serial(5, 5, 2) (none), O[r, 3] = the sum over T.serial(S[r], E[r], 4) of run-time
    bounds (no iteration where E[r] <= S[r]), O[r, 4] = the sum over T.unroll(S[r], E[r], 2)."""

    @T.prim_func
    def ss(X: T.Tensor((N, L), "float32"), S: T.Tensor((N,), "int32"), E: T.Tensor((N,), "int32"),
           O: T.Tensor((N, 5), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            r = bx * threads + tx
            a = T.alloc_var("float32", init=0.0)
            b = T.alloc_var("float32", init=0.0)
            w = T.alloc_var("float32", init=1.0)
            c = T.alloc_var("float32", init=0.0)
            for k in T.serial(0, L, 3):
                a += X[r, k]
            for k in T.serial(L - 1, -1, -2):
                b += X[r, k] * w
                w += 1.0
            for k in T.serial(5, 5, 2):
                c += 1.0
            d = T.alloc_var("float32", init=0.0)
            u = T.alloc_var("float32", init=0.0)
            for k in T.serial(S[r], E[r], 4):
                d += X[r, k]
            for k in T.unroll(S[r], E[r], 2):
                u += X[r, k]
            O[r, 0] = a
            O[r, 1] = b
            O[r, 2] = c
            O[r, 3] = d
            O[r, 4] = u
    return ss


@tilecute.jit(out_idx=[2])
def unroll_runtime_bound(N=128, L=16, threads=128):
    """O[r] = sum of X[r, 0..cnt[r]) with ``T.unroll(cnt[r])``: a bound known only at run
    time (0 <= cnt <= L)."""

    @T.prim_func
    def ur(X: T.Tensor((N, L), "float32"), Cnt: T.Tensor((N,), "int32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            r = bx * threads + tx
            acc = T.alloc_var("float32", init=0.0)
            for k in T.unroll(Cnt[r]):
                acc += X[r, k]
            O[r] = acc
    return ur


@tilecute.jit(out_idx=[1])
def while_collatz_steps(N=256, threads=128):
    """O[i] = the number of Collatz steps from X[i] (>= 1) to 1, with a ``while`` loop on a
    T.alloc_var (integer // and % of a positive value)."""

    @T.prim_func
    def wc(X: T.Tensor((N,), "int32"), O: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("int32", init=X[bx * threads + tx])
            steps = T.alloc_var("int32", init=0)
            while v != 1:
                if v % 2 == 0:
                    v = v // 2
                else:
                    v = 3 * v + 1
                steps += 1
            O[bx * threads + tx] = steps
    return wc


@tilecute.jit(out_idx=[1])
def parallel_if_else_branches(M=64, N=64, threads=128):
    """A nested T.Parallel with if / elif / else on the element's value and position:
    negative -> -1, on the diagonal -> 100, else x * 2 (a three-way branch per element)."""

    @T.prim_func
    def pib(X: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float32")
            T.copy(X, x_f)
            for i, j in T.Parallel(M, N):
                if x_f[i, j] < 0:
                    x_f[i, j] = -1.0
                elif i == j:
                    x_f[i, j] = 100.0
                else:
                    x_f[i, j] = x_f[i, j] * 2
            T.copy(x_f, O)
    return pib


@tilecute.jit(out_idx=[1])
def alloc_var_init_forms(N=256, threads=128):
    """T.alloc_var with init= of a float, an int, an expression and the positional init:
    O[i] = (f + k) * X[i] + e with f = 0.5, k = 3, e = bx * 10."""

    @T.prim_func
    def av(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            f = T.alloc_var("float32", init=0.5)
            k = T.alloc_var("int32", 3)
            e = T.alloc_var("float32", init=T.cast(bx * 10, "float32"))
            O[bx * threads + tx] = (f + k) * X[bx * threads + tx] + e
    return av


# ---- atomics -------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def atomic_ticket_order(N=256, threads=128):
    """Each thread takes a ticket with T.atomic_add(Counter[0], 1, return_prev=True); Slot[t]
    = 1 for each ticket t (so every slot 0..N-1 is hit exactly once)."""

    @T.prim_func
    def at(Counter: T.Tensor((1,), "int32"), Slot: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            t = T.atomic_add(Counter[0], 1, return_prev=True)
            Slot[t] = 1 + 0 * tx
    return at


@tilecute.jit(out_idx=[1, 2])
def atomic_max_min_int_shared(N=1024, threads=128):
    """Block-wide integer max and min through T.atomic_max / T.atomic_min on shared
    variables (initialised by thread 0, fenced), then stored by thread 0."""

    @T.prim_func
    def amm(X: T.Tensor((N,), "int32"), Mx: T.Tensor((N // threads,), "int32"), Mn: T.Tensor((N // threads,), "int32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            m_s = T.alloc_shared((2,), "int32")
            if tx == 0:
                m_s[0] = -2147483648
                m_s[1] = 2147483647
            T.sync_threads()
            T.atomic_max(m_s[0], X[bx * threads + tx])
            T.atomic_min(m_s[1], X[bx * threads + tx])
            T.sync_threads()
            if tx == 0:
                Mx[bx] = m_s[0]
                Mn[bx] = m_s[1]
    return amm


@tilecute.jit(out_idx=[])
def atomic_add_half_hist(N=4096, bins=64, threads=128):
    """A float16 histogram: Hist[Idx[i]] += W[i] with T.atomic_add on float16 elements
    (many threads hit one bin)."""

    @T.prim_func
    def ah(Idx: T.Tensor((N,), "int32"), W: T.Tensor((N,), "float16"), Hist: T.Tensor((bins,), "float16")):
        with T.Kernel(N // threads, threads=threads) as bx:
            for i in T.Parallel(threads):
                T.atomic_add(Hist[Idx[bx * threads + i]], W[bx * threads + i])
    return ah


@tilecute.jit(out_idx=[1, 2])
def reduce_widening_dst(M=64, N=128, threads=128):
    """TileLang's reduce converts each element to the output's dtype before combining: a
    float16 fragment's row sums into float32 (S, accumulated in float32: 2048 + 1 + 1 ...
    is not stuck at 2048), an int8 fragment's row absmax into int32 (A: |-128| = 128)."""

    @T.prim_func
    def rw(X: T.Tensor((M, N), "float16"), S: T.Tensor((M,), "float32"), A: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float16")
            q_f = T.alloc_fragment((M, N), "int8")
            s_f = T.alloc_fragment((M,), "float32")
            a_f = T.alloc_fragment((M,), "int32")
            T.copy(X, x_f)
            for i, j in T.Parallel(M, N):
                q_f[i, j] = T.cast(T.max(T.min(x_f[i, j], 127.0), -128.0), "int8")
            T.reduce_sum(x_f, s_f, dim=1)
            T.reduce_absmax(q_f, a_f, dim=1)
            T.copy(s_f, S)
            T.copy(a_f, A)
    return rw


@tilecute.jit(out_idx=[1, 2])
def fp8_saturating_casts(N=1024, threads=128):
    """float32 -> float8_e4m3 and float8_e5m2 of values past their ranges (TileLang's CUDA
    conversions saturate to the largest finite value: 448, 57344), read back as float32."""

    @T.prim_func
    def f8(X: T.Tensor((N,), "float32"), E4: T.Tensor((N,), "float32"), E5: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                E4[bx * threads + i] = T.cast(T.cast(X[bx * threads + i], "float8_e4m3fn"), "float32")
                E5[bx * threads + i] = T.cast(T.cast(X[bx * threads + i], "float8_e5m2"), "float32")
    return f8


# ---- alignment of copies at run-time and odd offsets ---------------------------------------
@tilecute.jit(out_idx=[2])
def copy_runtime_offset(N=4096, W=128, B=8, threads=128):
    """Block b copies the window X[Off[b] : Off[b] + 128] (any offset, odd ones included)
    into shared memory and stores it doubled: nothing may assume the window is aligned."""

    @T.prim_func
    def cro(X: T.Tensor((N,), "float32"), Off: T.Tensor((B,), "int32"), O: T.Tensor((B, W), "float32")):
        with T.Kernel(B, threads=threads) as bx:
            x_s = T.alloc_shared((W,), "float32")
            T.copy(X[Off[bx]:Off[bx] + W], x_s)
            for i in T.Parallel(W):
                O[bx, i] = x_s[i] * 2.0
    return cro


@tilecute.jit(out_idx=[1])
def copy_odd_constant_offset(N=1024, threads=128):
    """O[b, :] = X[b * 128 + 1 : b * 128 + 129] + 1 (a window one element past each block's
    start: not 16-byte aligned), through a fragment; the last block's window ends at N - 1
    + 1 = N, clamped (its last element reads nothing and stores 1)."""

    @T.prim_func
    def coo(X: T.Tensor((N,), "float16"), O: T.Tensor((N // threads, threads), "float16")):
        with T.Kernel(N // threads, threads=threads) as bx:
            x_f = T.alloc_fragment((threads,), "float16")
            T.copy(X[bx * threads + 1:bx * threads + 1 + threads], x_f)
            for i in T.Parallel(threads):
                x_f[i] = x_f[i] + 1
            T.copy(x_f, O[bx, :])
    return coo


@tilecute.jit(out_idx=[1])
def symbolic_odd_row_stride(M=64, threads=128):
    """X is (M, n) float16 with a symbolic n (odd at run time, e.g. 131): each block copies
    row tile X[bx * 16 : bx * 16 + 16, 0:64] into shared and stores its column sums of the
    tile into O[bx, :] -- rows start at odd element offsets."""
    n = T.symbolic("n")

    @T.prim_func
    def sor(X: T.Tensor((M, n), "float16"), O: T.Tensor((M // 16, 64), "float32")):
        with T.Kernel(M // 16, threads=threads) as bx:
            x_s = T.alloc_shared((16, 64), "float16")
            x_f = T.alloc_fragment((16, 64), "float32")
            c_f = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * 16:bx * 16 + 16, 0:64], x_s)
            T.copy(x_s, x_f)
            T.reduce_sum(x_f, c_f, dim=0)
            T.copy(c_f, O[bx, :])
    return sor


@tilecute.jit(out_idx=[2])
def casts_to_bool(N=256, threads=128):
    """C's conversion to bool is ``x != 0``: O[i, 0] = int32(bool(F[i])) of a float (0.5 and
    -0.25 are true), O[i, 1] = int32(bool(I[i])) of an int (2 and -4 are true), O[i, 2] =
    int32(bool(uint8(I[i]))) (256 wraps to 0: false)."""

    @T.prim_func
    def cb(F: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), O: T.Tensor((N, 3), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                O[g, 0] = T.cast(T.cast(F[g], "bool"), "int32")
                O[g, 1] = T.cast(T.cast(I[g], "bool"), "int32")
                O[g, 2] = T.cast(T.cast(T.cast(I[g], "uint8"), "bool"), "int32")
    return cb


@tilecute.jit(out_idx=[2])
def uint8_difference_promotes(N=256, threads=128):
    """D[i] = int32(A[i] - B[i]) of two uint8s: C promotes to int first, so 3 - 5 is -2 (not
    254); E[i] = (A[i] - B[i]) < 0 as an int32 (holds for A < B)."""

    @T.prim_func
    def ud(A: T.Tensor((N,), "uint8"), B: T.Tensor((N,), "uint8"), D: T.Tensor((N, 2), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                D[g, 0] = T.cast(A[g] - B[g], "int32")
                D[g, 1] = T.cast(A[g] - B[g] < 0, "int32")
    return ud


@tilecute.jit(out_idx=[1])
def shared_reuse_across_serial(K=8, N=128, threads=128):
    """Inside T.serial(K): every thread writes s[i] = X[k, i], then reads its neighbour's
    s[(i + 1) % N]: the next iteration's writes must wait for this one's reads (a barrier on
    the loop's back edge), and the reads for the writes."""

    @T.prim_func
    def sr(X: T.Tensor((K, N), "float32"), O: T.Tensor((K, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((N,), "float32")
            for k in T.serial(K):
                for i in T.Parallel(N):
                    s[i] = X[k, i] * (k + 1)
                for i in T.Parallel(N):
                    O[k, i] = s[(i + 1) % N]
    return sr


@tilecute.jit(out_idx=[1, 2, 3])
def cumsum_defaults_and_regions(M=32, N=64, threads=128):
    """T.cumsum's default dim is 0: on a fragment into a separate dst fragment (D, column
    prefix sums), in place on a shared tile with dim=-1 (Rw, row prefix sums), and on a region
    of a 1-D shared buffer, s[16:48] (Sg: only those 32 elements are scanned, the rest kept)."""

    @T.prim_func
    def cdr(X: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "float32"), Rw: T.Tensor((M, N), "float32"),
            Sg: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            x_f = T.alloc_fragment((M, N), "float32")
            d_f = T.alloc_fragment((M, N), "float32")
            r_s = T.alloc_shared((M, N), "float32")
            v_s = T.alloc_shared((N,), "float32")
            T.copy(X, x_f)
            T.cumsum(x_f, d_f)
            T.copy(d_f, D)
            T.copy(X, r_s)
            T.cumsum(r_s, dim=-1)
            T.copy(r_s, Rw)
            T.copy(X[0, :], v_s)
            T.cumsum(v_s[16:48])
            T.copy(v_s, Sg)
    return cdr


# ---- unsigned values past the signed range ---------------------------------------------------
@tilecute.jit(out_idx=[1, 2, 3])
def unsigned_past_sign_bit(N=256, threads=128):
    """uint32 values past 2^31: Q = U // 7 and R = U % 7 (unsigned division), F = float32(U)
    (an unsigned conversion: 3e9 stays positive), C = int32(U > 2^31) (an unsigned compare)."""

    @T.prim_func
    def upb(U: T.Tensor((N,), "uint32"), QR: T.Tensor((N, 2), "uint32"), F: T.Tensor((N,), "float32"),
            C: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                QR[g, 0] = U[g] // T.uint32(7)
                QR[g, 1] = U[g] % T.uint32(7)
                F[g] = T.cast(U[g], "float32")
                C[g] = T.cast(U[g] > T.uint32(2147483648), "int32")
    return upb


@tilecute.jit(out_idx=[1, 2])
def uint8_to_float_and_back(N=256, threads=128):
    """F = float32(B) of uint8 bytes (200 is 200.0, not -56.0), H = float16(B) / 2, and
    B2 = uint8(F + 0.5) (a float converted back to an unsigned byte)."""

    @T.prim_func
    def ufb(B: T.Tensor((N,), "uint8"), F: T.Tensor((N, 2), "float32"), B2: T.Tensor((N,), "uint8")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                F[g, 0] = T.cast(B[g], "float32")
                F[g, 1] = T.cast(T.cast(B[g], "float16") / T.float16(2), "float32")
                B2[g] = T.cast(T.cast(B[g], "float32") + 0.5, "uint8")
    return ufb


@tilecute.jit(out_idx=[1])
def float_to_uint32_large(N=256, threads=128):
    """O = uint32(X) of non-negative floats up to 4e9 (C's unsigned conversion: 3e9 is
    3000000000, not a wrapped or saturated signed value)."""

    @T.prim_func
    def ftu(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "uint32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                O[bx * threads + i] = T.cast(X[bx * threads + i], "uint32")
    return ftu


# ---- ragged tiles through tensor cores and atomics, guards and negative indices ------------
@tilecute.jit(out_idx=[2])
def ragged_gemm_pipelined(M=100, N=72, K=100, bm=64, bn=64, bk=32, threads=128):
    """C = A B with M, N and K none of them multiples of the (64, 64, 32) tiles, through a
    3-stage T.Pipelined loop: the last K tile's columns past K load as zeros (A's rows of 200
    bytes take cp.async, B's TMA), the rows / columns past M and N are not stored."""

    @T.prim_func
    def rg(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            c_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(c_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, c_f)
            T.copy(c_f, C[by * bm, bx * bn])
    return rg


@tilecute.jit(out_idx=[])
def atomic_tile_ragged(M=100, N=64, bm=32, threads=128):
    """O += 2 X by (32, 64) tiles of a 100-row matrix with the tile form
    T.atomic_add(O[rows, cols], fragment): the last tile's rows past 100 add nothing."""

    @T.prim_func
    def atr(X: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            x_f = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x_f)
            for i, j in T.Parallel(bm, N):
                x_f[i, j] = x_f[i, j] * 2.0
            T.atomic_add(O[bx * bm:(bx + 1) * bm, 0:N], x_f)
    return atr


@tilecute.jit(out_idx=[2])
def short_circuit_guard(N=1000, threads=128):
    """``if g < N and X[Idx[g]] > 0`` reads Idx[g] and X[...] only where g < N (C's &&);
    the elif takes a Python conditional expression (a select)."""

    @T.prim_func
    def scg(X: T.Tensor((N,), "float32"), Idx: T.Tensor((N,), "int32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                g = bx * threads + i
                if g < N and X[Idx[g]] > 0:
                    O[g] = 1.0
                elif g < N:
                    O[g] = X[g] if X[g] < -1.0 else 0.5
    return scg


@tilecute.jit(out_idx=[1, 2])
def roll_by_negative_mod(N=64, threads=128):
    """O[i] = s[(i - 3) % N] (a roll: i - 3 is negative for i < 3, floormod wraps it to the
    end) and Q[i] = (i - 3) // 8 (floor: -1 for i < 3)."""

    @T.prim_func
    def rnm(X: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), Q: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((N,), "float32")
            T.copy(X, s)
            for i in T.Parallel(N):
                O[i] = s[(i - 3) % N]
                Q[i] = (i - 3) // 8
    return rnm


@tilecute.jit(out_idx=[1])
def break_and_continue(N=128, L=32, threads=128):
    """Per row: O[r, 0] sums X[r, k] up to the first value above 2 (``break``), skipping
    negatives (``continue``); O[r, 1] is the last k with X[r, k] > 1, found by a Python
    ``range(L - 1, -1, -1)`` loop that breaks at the first hit (0 if none)."""

    @T.prim_func
    def bc(X: T.Tensor((N, L), "float32"), O: T.Tensor((N, 2), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32", init=0.0)
            pos = T.alloc_var("float32", init=0.0)
            for k in T.serial(L):
                if X[tx, k] > 2.0:
                    break
                if X[tx, k] < 0:
                    continue
                acc += X[tx, k]
            for k in range(L - 1, -1, -1):
                if X[tx, k] > 1.0:
                    pos = T.cast(k, "float32")
                    break
            O[tx, 0] = acc
            O[tx, 1] = pos
    return bc


@tilecute.jit(out_idx=[1, 2])
def converting_shared_copies(M=64, N=64, threads=128):
    """A float32 shared tile (from float16 X, tripled) copied to bfloat16 Y and float8_e4m3
    Z: each element converted (no byte-for-byte TMA store of a tile of another dtype; fp8
    saturating)."""

    @T.prim_func
    def csc(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "bfloat16"), Z: T.Tensor((M, N), "float8_e4m3")):
        with T.Kernel(1, threads=threads) as bx:
            s32 = T.alloc_shared((M, N), "float32")
            T.copy(X, s32)
            for i, j in T.Parallel(M, N):
                s32[i, j] = s32[i, j] * 3.0
            T.copy(s32, Y)
            T.copy(s32, Z)
    return csc


@tilecute.jit(out_idx=[1, 2, 3, 4])
def views_reinterpret_bits(M=16, N=64, threads=128):
    """T.reshape / T.view share the bytes (no conversion): R[i] = flat[(7 i) % 1024] of a
    reshaped shared tile, B = the float32 tile's bits as int32 >> 23 (sign and exponent),
    H = the same bytes as float16 pairs, and G = X's bits through a T.view of the global
    tensor, masked to the mantissa."""

    @T.prim_func
    def vrb(X: T.Tensor((M, N), "float32"), R: T.Tensor((M * N,), "float32"), B: T.Tensor((M, N), "int32"),
            H: T.Tensor((M, N * 2), "float16"), G: T.Tensor((M, N), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((M, N), "float32")
            T.copy(X, s)
            flat = T.reshape(s, (M * N,))
            bits = T.view(s, dtype="int32")
            halves = T.view(s, (M, N * 2), "float16")
            xb = T.view(X, dtype="int32")
            for i in T.Parallel(M * N):
                R[i] = flat[(i * 7) % (M * N)]
            for i, j in T.Parallel(M, N):
                B[i, j] = bits[i, j] >> 23
                G[i, j] = xb[i, j] & 0x7FFFFF
            for i, j in T.Parallel(M, N * 2):
                H[i, j] = halves[i, j]
    return vrb


@tilecute.jit(out_idx=[])
def atomic_float_minmax_negative(N=1024, threads=128):
    """Float32 T.atomic_max / T.atomic_min over values of both signs (mostly negative): M[0]
    ends as the maximum, M[1] as the minimum, and P[i] is the value M[1] held before thread
    i's update (``return_prev=True``)."""

    @T.prim_func
    def afm(X: T.Tensor((N,), "float32"), M: T.Tensor((2,), "float32"), P: T.Tensor((N,), "float32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            for i in T.Parallel(threads):
                T.atomic_max(M[0], X[bx * threads + i])
                P[bx * threads + i] = T.atomic_min(M[1], X[bx * threads + i], return_prev=True)
    return afm


@tilecute.jit(out_idx=[1])
def unit_dims_swapped_copy(threads=128):
    """T.copy of a (64, 1) column region X[0:64, b:b+1] into a (1, 64) row region of a
    shared tile: TileLang pairs the non-unit extents in order (a column becomes a row), then
    the row goes to O[b, :]."""

    @T.prim_func
    def uds(X: T.Tensor((64, 8), "float32"), O: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=threads) as bx:
            r_s = T.alloc_shared((1, 64), "float32")
            T.copy(X[0:64, bx:bx + 1], r_s[0:1, 0:64])
            T.copy(r_s, O[bx:bx + 1, 0:64])
    return uds
