"""Programs in the idioms TileLang users write in their issues and in the kernels they ship
(written for tilecute, not taken from any of them): a ``T.Pipelined`` loop skipping tiles by
bounds loaded from a buffer (``(lo <= t) & (t < hi)``), a row gather by a loaded index inside
``T.Pipelined``, a shared tile read after its pipelined loop, a read-then-reload of one
shared row across the loop's back edge, a fragment whose width is no multiple of the
threads, reassigned ``T.alloc_var``s (``i = 1`` after the declaration, ``init=`` another
var), ``T.StridedTensor`` with scalar parameters before it, stepped and negative
``T.serial`` steps, ``break`` / ``continue`` / ``T.loop_break`` in ``T.unroll(explicit=True)``,
an ``out_idx`` output whose symbolic dim comes from a later input, ``T.view`` of a bfloat16
tile as float32, ``T.reshape`` with a tuple shape, an activation quantizer with
dtype-first ``T.reinterpret("uint32", x)`` power-of-two scales, a head-weighted score kernel
(a fragment declared inside ``T.Pipelined``, a ``T.Parallel`` writing ``logits[j, h]`` in
swapped order, a 1-D fragment copied into a 3-D tensor at an element start), tuple swaps
(``S[i], S[j] = S[j], S[i]``; ``a, c = c, a + c``), a ``T.Var`` macro parameter written
through, ``T.Tensor[1, "int32"]`` shapes, a partial fragment write and a fragment slice
copy, ``threads=(32, 4)``, a column ``T.reduce_max(dim=0)``, a bfloat16 atomic histogram,
``T.Pipelined(order=, stage=)``, the eager style (``T.const``, ``T.empty``), ``T.print``
with ``msg=``, ``B[j % K]`` tables and negative floor / trunc division, a top-k gate by
repeated ``T.reduce_max`` / ``T.reduce_min`` over a padded fragment, ``T.alloc_reducer`` with
``T.finalize_reducer``, and a block-masked GEMM whose ``T.gemm`` sits under an ``if`` in a
``T.Pipelined`` loop (with and without an ``else`` branch of element-wise work), a 4-D
global slice with a sliced middle dim into a fragment, ``T.gemm(transpose_A=True)``, and
``T.Pipelined(lo[q], hi[q])`` over a range read from buffers.

``tests/test_user_idioms.py`` builds each to a cubin on the CPU, checks what each means in
the generated source, and on a GPU compares it with a torch reference."""

import tilecute as tilelang
import tilecute.language as T




@tilelang.jit(out_idx=[-1])
def kv_tiles_skip_by_ranges(nq=4, bq=64, bkv=64, d=64, nkv=4):
    """O[kv] = sum over q tiles whose [start, end) covers kv tile of Q_tile^T K ..."""
    @T.prim_func
    def main(Q: T.Tensor((nq * bq, d), T.float16), K: T.Tensor((nkv * bkv, d), T.float16),
             starts: T.Tensor((nq,), T.int32), ends: T.Tensor((nq,), T.int32),
             O: T.Tensor((nkv * bkv, d), T.float32)):
        with T.Kernel(nkv, threads=128) as kv:
            Qs = T.alloc_shared((bq, d), T.float16)
            Ks = T.alloc_shared((bkv, d), T.float16)
            acc = T.alloc_fragment((bkv, d), T.float32)
            S = T.alloc_fragment((bkv, bq), T.float32)
            S16 = T.alloc_shared((bkv, bq), T.float16)
            T.copy(K[kv * bkv, 0], Ks)
            T.clear(acc)
            for qt in T.Pipelined(nq, num_stages=2):
                q_start = starts[qt]
                q_end = ends[qt]
                if (q_start <= kv) & (kv < q_end):
                    T.copy(Q[qt * bq:(qt + 1) * bq, :], Qs)
                    T.gemm(Ks, Qs, S, transpose_B=True, clear_accum=True)
                    T.copy(S, S16)
                    T.gemm(S16, Qs, acc)
            T.copy(acc, O[kv * bkv, 0])
    return main


@tilelang.jit(out_idx=[-1])
def pipelined_row_gather_sum(M=64, N=128, R=8):
    @T.prim_func
    def main(KV: T.Tensor((M, N), T.bfloat16), ids: T.Tensor((R,), T.int32),
             out: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            A = T.alloc_shared([N], T.bfloat16)
            acc = T.alloc_fragment([N], T.float32)
            T.clear(acc)
            for i in T.Pipelined(R, num_stages=2):
                rid = ids[i]
                T.copy(KV[rid, :], A)
                for j in T.Parallel(N):
                    acc[j] += A[j]
            T.copy(acc, out)
    return main


@tilelang.jit(out_idx=[-1])
def pipelined_last_tile_after_loop(M=256, N=32, bm=64):
    """out = sum of all row tiles (via fragment) + last tile read from shared after loop."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), out: T.Tensor((bm, N), T.float32)):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((bm, N), T.float32)
            acc = T.alloc_fragment((bm, N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(M // bm, num_stages=3):
                T.copy(A[k * bm, 0], As)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] += As[i, j]
            for i, j in T.Parallel(bm, N):
                out[i, j] = acc[i, j] * 2.0 + As[i, j]
    return main


@tilelang.jit(out_idx=[-1])
def fragment_width_not_multiple(N=192, threads=128):
    @T.prim_func
    def main(X: T.Tensor((4, N), T.float32), Y: T.Tensor((4, N), T.float32)):
        with T.Kernel(4, threads=threads) as bx:
            xf = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx, :], xf)
            for i in T.Parallel(N):
                xf[i] = xf[i] * xf[i] + 1.0
            T.copy(xf, Y[bx, :])
    return main


@tilelang.jit(out_idx=[-1])
def vars_reassigned_absmax(rows=64, cols=4):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), T.float32), out: T.Tensor((rows, 2), T.float32)):
        with T.Kernel(rows, 1, threads=1) as (pid_y, pid_x):
            i = T.alloc_var(T.int32)
            i = 1
            tmp_row = T.alloc_local((cols,), T.float32)
            amax = T.alloc_var(T.float32)
            for c in T.serial(cols):
                tmp_row[c] = T.abs(X[pid_y, c])
            for j in T.serial(cols):
                amax = T.max(amax, tmp_row[j])
            i = i + 2
            out[pid_y, 0] = amax
            out[pid_y, 1] = T.cast(i, T.float32)
    return main


@tilelang.jit(out_idx=-1)
def var_init_from_var():
    @T.prim_func
    def main(A: T.Tensor((3,), T.int32)):
        with T.Kernel(1) as _:
            a = T.alloc_var(T.int32, init=1)
            b = T.alloc_var(T.int32, init=a)
            a = 2
            d = T.alloc_var(T.int32, init=a)
            a = 7
            A[0] = b
            A[1] = d
            A[2] = a
    return main


@tilelang.jit(out_idx=[-1])
def strided_scalar_args(threads=128):
    s0, s1 = T.symbolic("s0"), T.symbolic("s1")
    st0, st1 = T.symbolic("st0"), T.symbolic("st1")

    @T.prim_func
    def main(x: T.uint32, num_blocks: T.int32,
             t: T.StridedTensor[(s0, s1), (st0, st1), T.uint32],
             out: T.Tensor((s0, s1), T.uint32)):
        with T.Kernel(num_blocks, threads=threads) as bid:
            n = s0 * s1
            for k in T.serial(T.ceildiv(n, num_blocks * threads)):
                e = (k * num_blocks + bid) * threads + T.get_thread_binding()
                if e < n:
                    r = e // s1
                    c = e % s1
                    out[r, c] = t[r, c] ^ x
    return main


@tilelang.jit(out_idx=[-1])
def serial_step_neg(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                run = T.alloc_var(T.float32, init=0.0)
                for i in T.serial(N - 1, -1, -1):
                    run = run + A[i]
                    B[i] = run
                for i in T.serial(0, N, 4):
                    B[i] = B[i] * 2.0
    return main


@tilelang.jit(out_idx=[-1])
def first_negative_break(M=32, N=100):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), idx: T.Tensor((M,), T.int32)):
        with T.Kernel(M, threads=1) as bx:
            pos = T.alloc_var(T.int32, init=-1)
            for j in T.serial(N):
                if A[bx, j] < 0:
                    pos = j
                    break
            idx[bx] = pos
    return main


@tilelang.jit(out_idx=[-1])
def unroll_explicit_break(N=16):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), Out: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(N):
                Out[i] = -99
            for i in T.unroll(N, explicit=True):
                if A[i] == 0:
                    T.loop_break()
                Out[i] = A[i] + 1
    return main


@tilelang.jit(out_idx=[0])
def out_first_dynamic(B=64):
    n = T.dynamic("n")

    @T.prim_func
    def main(Y: T.Tensor((n,), T.float32), X: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, B), threads=B) as bx:
            for i in T.Parallel(B):
                if bx * B + i < n:
                    Y[bx * B + i] = X[bx * B + i] * 3.0
    return main


@tilelang.jit(out_idx=[-1])
def view_bf16_as_f32(N=128):
    @T.prim_func
    def main(A: T.Tensor((2 * N,), T.bfloat16), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((2 * N,), T.bfloat16)
            T.copy(A, S)
            Sf = T.view(S, (N,), T.float32)
            for i in T.Parallel(N):
                B[i] = Sf[i]
    return main


@tilelang.jit(out_idx=[-1])
def reshape_shared_tuple(N=256, M=16):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float16), B: T.Tensor((N // M, M), T.float16)):
        with T.Kernel(1, threads=64) as _:
            A_shared = T.alloc_shared((N,), T.float16)
            T.copy(A, A_shared)
            R = T.reshape(A_shared, (N // M, M))
            for i, j in T.Parallel(N // M, M):
                B[i, j] = R[i, j] * 2.0
    return main


PC = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
      tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}


def _log2_ceil(x):
    bits = T.reinterpret("uint32", x)
    e = (bits >> 23) & 0xFF
    man = bits & ((1 << 23) - 1)
    return T.Cast("int32", e - 127 + T.if_then_else(man != 0, 1, 0))


def _pow2(e):
    return T.reinterpret("float32", (e + 127) << 23)


@tilelang.jit(pass_configs=PC)
def group_quant_pow2(N=256, group=64, pow2_scale=True):
    M = T.symbolic("M")
    blk_m = 16
    qmax = 448.0

    @T.prim_func
    def quant(X: T.Tensor[(M, N), "bfloat16"], Y: T.Tensor[(M, N), "float8_e4m3"],
              S: T.Tensor[(M, T.ceildiv(N, group)), "float32"]):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=128) as (pm, pn):
            xs = T.alloc_shared((blk_m, group), "bfloat16")
            xl = T.alloc_fragment((blk_m, group), "bfloat16")
            amax = T.alloc_fragment((blk_m,), "float32")
            sc = T.alloc_fragment((blk_m,), "float32")
            yl = T.alloc_fragment((blk_m, group), "float8_e4m3")
            for _ in T.Pipelined(1, num_stages=0 if pow2_scale else 2):
                T.copy(X[pm * blk_m, pn * group], xs)
                T.copy(xs, xl)
                T.reduce_absmax(xl, amax, dim=1)
                for i in T.Parallel(blk_m):
                    amax[i] = T.max(amax[i], 1e-4)
                    if pow2_scale:
                        sc[i] = _pow2(_log2_ceil(amax[i] * (1.0 / qmax)))
                    else:
                        sc[i] = amax[i] / qmax
                for i, j in T.Parallel(blk_m, group):
                    yl[i, j] = T.clamp(xl[i, j] / sc[i], -qmax, qmax)
                for i in T.Parallel(blk_m):
                    S[pm * blk_m + i, pn] = sc[i]
                T.copy(yl, Y[pm * blk_m, pn * group])

    return quant


@tilelang.jit(out_idx=[4], pass_configs=PC)
def head_weighted_scores(h=16, d=64):
    b, m, n = T.symbolic("b"), T.symbolic("m"), T.symbolic("n")
    blk1, blk2 = 256, 64

    @T.prim_func
    def score(q: T.Tensor[(b, m, h, d), "float16"], w: T.Tensor[(b, m, h), "float32"],
              k: T.Tensor[(b, n, d), "float16"], ks: T.Tensor[(b, n), "float32"],
              o: T.Tensor[(b, m, n), "float32"]) -> None:
        with T.Kernel(b, m, T.ceildiv(n, blk1)) as (ib, im, in1):
            qs = T.alloc_shared((h, d), "float16")
            T.copy(q[ib, im, 0, 0], qs)
            wf = T.alloc_fragment(h, "float32")
            T.copy(w[ib, im, 0], wf)
            for in2 in T.Pipelined(blk1 // blk2, num_stages=2):
                ksm = T.alloc_shared((blk2, d), "float16")
                T.copy(k[ib, in1 * blk1 + in2 * blk2, 0], ksm)
                ksf = T.alloc_fragment(blk2, "float32")
                T.copy(ks[ib, in1 * blk1 + in2 * blk2], ksf)
                logits = T.alloc_fragment((blk2, h), "float32")
                T.gemm(ksm, qs, logits, transpose_A=False, transpose_B=True, clear_accum=True)
                for ih, jn in T.Parallel(h, blk2):
                    logits[jn, ih] = T.max(logits[jn, ih], 0) * wf[ih]
                tot = T.alloc_fragment(blk2, "float32")
                T.reduce_sum(logits, tot, dim=1)
                for jn in T.Parallel(blk2):
                    tot[jn] *= ksf[jn]
                T.copy(tot, o[ib, im, in1 * blk1 + in2 * blk2])

    return score


@tilelang.jit(out_idx=[-1])
def swap_halves(N=256):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((N,), T.float32)
            T.copy(A, S)
            for i in T.Parallel(N // 2):
                S[i], S[i + N // 2] = S[i + N // 2], S[i]
            for i in T.Parallel(N):
                C[i] = S[i] + B[i] * 0.0
    return main


@tilelang.jit(out_idx=[-1])
def fib_swap_vars(M=32, steps=10):
    @T.prim_func
    def main(X: T.Tensor((M, 2), T.int32), Y: T.Tensor((M,), T.int32)):
        with T.Kernel(M, threads=1) as bx:
            a = T.alloc_var(T.int32, init=X[bx, 0])
            c = T.alloc_var(T.int32, init=X[bx, 1])
            for _ in T.serial(steps):
                a, c = c, a + c
            Y[bx] = a
    return main


@tilelang.jit(out_idx=[-1])
def sum_skip_negative(M=16, N=100):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=32) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            for j in T.serial(tx, N, 32):
                if A[bx, j] < 0:
                    continue
                acc += A[bx, j]
            acc = T.warp_reduce_sum(acc)
            if tx == 0:
                S[bx] = acc
    return main


@tilelang.jit
def counter_int_shape():
    @T.prim_func
    def main(cnt: T.Tensor[1, "int32"], X: T.Tensor[128, "float32"]):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            if X[tx] > 0:
                T.atomic_add(cnt[0], 1)
    return main


@T.macro
def bump(v: T.Var, by):
    v = v + by


@tilelang.jit(out_idx=[-1])
def macro_var_ref(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), B: T.Tensor((N,), T.int32)):
        with T.Kernel(N, threads=1) as bx:
            x = T.alloc_var(T.int32, init=A[bx])
            bump(x, 5)
            bump(x, bx)
            B[bx] = x
    return main



@tilelang.jit(out_idx=[-1])
def pipelined_consume_then_reload(K=6, N=128):
    """out[k] = A[k] through one shared row: each iteration reads the row, then reloads it
    with the next row (write-after-read across the back edge)."""
    @T.prim_func
    def main(A: T.Tensor((K + 1, N), T.float32), out: T.Tensor((K, N), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((N,), T.float32)
            T.copy(A[0, :], S)
            for k in T.Pipelined(K, num_stages=2):
                for j in T.Parallel(N):
                    out[k, j] = S[j] * 2.0
                T.copy(A[k + 1, :], S)
    return main


@tilelang.jit(out_idx=[-1])
def fragment_partial_rows(N=64):
    """F rows 3..10 from A, other rows from 100 + B."""
    @T.prim_func
    def main(A: T.Tensor((8, N), T.float32), B: T.Tensor((16, N), T.float32), C: T.Tensor((16, N), T.float32)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((16, N), T.float32)
            for i, j in T.Parallel(16, N):
                F[i, j] = B[i, j] + 100.0
            for i, j in T.Parallel(8, N):
                F[i + 3, j] = A[i, j]
            T.copy(F, C)
    return main


@tilelang.jit(out_idx=[-1])
def fragment_slice_copy(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((128,), T.float32)
            T.fill(F, -1.0)
            T.copy(A[0:8], F[3:11])
            T.copy(F, C)
    return main


@tilelang.jit(out_idx=[-1])
def threads_2d_tile(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((N, M), T.float32)):
        with T.Kernel(M // 16, N // 32, threads=(32, 4)) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            for r in T.serial(4):
                B[by * 32 + tx, bx * 16 + ty * 4 + r] = A[bx * 16 + ty * 4 + r, by * 32 + tx]
    return main


@tilelang.jit(out_idx=[-1])
def col_max_dim0(M=64, N=96):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), out: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M, N), T.float32)
            r = T.alloc_fragment((N,), T.float32)
            T.copy(A, F)
            T.reduce_max(F, r, dim=0)
            T.copy(r, out)
    return main


@tilelang.jit
def bf16_atomic_hist(N=1024, bins=64):
    @T.prim_func
    def main(idx: T.Tensor((N,), T.int32), w: T.Tensor((N,), T.bfloat16), H: T.Tensor((bins,), T.bfloat16)):
        with T.Kernel(N // 256, threads=256) as bx:
            for i in T.Parallel(256):
                T.atomic_add(H[idx[bx * 256 + i] % bins], w[bx * 256 + i])
    return main


@tilelang.jit(out_idx=[-1])
def pipelined_order_stage(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), T.float16)
            Bs = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2, order=[0, 1, 2], stage=[0, 0, 1]):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilelang.jit
def eager_scale_rows(X, scale: float = 2.0, block: int = 32):
    M, N = T.const("M N")
    X: T.Tensor[[M, N], T.float32]
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                Y[bx * block + i, j] = X[bx * block + i, j] * scale
    return Y


@tilelang.jit(out_idx=[-1])
def print_debug_value(N=32):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            v = A[tx] * 2.0
            if tx == 0:
                T.print(v, msg="v0")
            B[tx] = v
    return main



@tilelang.jit(out_idx=[-1])
def mod_table_2d(M=16, N=96, K=7):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((K,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j] + B[j % K] * T.cast(j // K, T.float32)
    return main


@tilelang.jit(out_idx=[-1])
def neg_floor_div_mod(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), C: T.Tensor((N, 4), T.int32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(N):
                v = A[i] - 32
                C[i, 0] = v // 5
                C[i, 1] = v % 5
                C[i, 2] = T.truncdiv(v, 5)
                C[i, 3] = T.truncmod(v, 5)
    return main


@tilelang.jit(out_idx=[-1])
def shifted_window_idx(N=128, W=5):
    """out[i] = sum_{t < W} x[(i - t) mod N] (negative wrap through %)."""
    @T.prim_func
    def main(x: T.Tensor((N,), T.float32), out: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            xs = T.alloc_shared((N,), T.float32)
            T.copy(x, xs)
            acc = T.alloc_fragment((N,), T.float32)
            T.clear(acc)
            for t in T.serial(W):
                for i in T.Parallel(N):
                    acc[i] += xs[(i - t) % N]
            T.copy(acc, out)
    return main



@tilelang.jit(out_idx=[1, 2])
def topk_gate_argmax(E=48, K=4, threads=32):
    tokens = T.dynamic("tokens")
    Ea = (E + threads - 1) // threads * threads

    @T.prim_func
    def gate(logits: T.Tensor((tokens, E), T.float32), w: T.Tensor((tokens, K), T.float32),
             ids: T.Tensor((tokens, K), T.int32)):
        with T.Kernel(tokens, threads=threads) as t:
            s = T.alloc_fragment((Ea,), T.float32)
            cand = T.alloc_fragment((Ea,), T.int32)
            best = T.alloc_fragment((1,), T.float32)
            pick = T.alloc_fragment((1,), T.int32)
            for e in T.Parallel(Ea):
                s[e] = T.if_then_else(e < E, logits[t, e], -T.infinity(T.float32))
            for k in T.serial(K):
                T.reduce_max(s, best, dim=0)
                for e in T.Parallel(Ea):
                    cand[e] = T.if_then_else(s[e] == best[0], e, Ea)
                T.reduce_min(cand, pick, dim=0)
                w[t, k] = best[0]
                ids[t, k] = pick[0]
                for e in T.Parallel(Ea):
                    if e == pick[0]:
                        s[e] = -T.infinity(T.float32)
    return gate


@tilelang.jit(out_idx=[-1])
def reducer_col_sums(M=256, N=64, bm=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), out: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer((N,), T.float32, op="sum", replication="all")
            T.fill(r, 0)
            for k in T.serial(M // bm):
                for i, j in T.Parallel(bm, N):
                    r[j] += A[k * bm + i, j]
            T.finalize_reducer(r)
            T.copy(r, out)
    return main



@tilelang.jit(out_idx=[-1])
def masked_tile_gemm(M=128, N=128, K=512, bm=64, bn=64, bk=64, stages=3):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             mask: T.Tensor((M // bm, K // bk), T.int32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), T.float16)
            Bs = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                if mask[by, k] != 0:
                    T.gemm(As, Bs, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[-1])
def masked_tile_gemm_elementwise(M=128, N=128, K=512, bm=64, bn=64, bk=64, stages=2):
    """as above, but the skipped tiles add a row-scaled A tile sum through T.Parallel"""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             mask: T.Tensor((K // bk,), T.int32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), T.float16)
            Bs = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                if mask[k] > 0:
                    T.gemm(As, Bs, acc)
                else:
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] += T.cast(As[i, j % bk], T.float32) * 0.5
            T.copy(acc, C[by * bm, bx * bn])
    return main



@tilelang.jit(out_idx=[-1])
def head_slice_copy(B=2, S=128, H=4, D=64):
    """Y[b, s, h, :] = X[b, s, h, :] * (h + 1) through a (64, D) fragment per (b, tile, h):
    a 4-D global read with a sliced middle dim."""
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), T.float16), Y: T.Tensor((B, S, H, D), T.float16)):
        with T.Kernel(S // 64, H, B, threads=128) as (bs, h, b):
            f = T.alloc_fragment((64, D), T.float32)
            T.copy(X[b, bs * 64:(bs + 1) * 64, h, :], f)
            for i, j in T.Parallel(64, D):
                f[i, j] = f[i, j] * T.cast(h + 1, T.float32)
            T.copy(f, Y[b, bs * 64:(bs + 1) * 64, h, :])
    return main


@tilelang.jit(out_idx=[-1])
def gemm_transpose_a(M=128, N=64, K=128, bk=32):
    """C = A^T B with A stored (K, M)."""
    @T.prim_func
    def main(A: T.Tensor((K, M), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, M // 64, threads=128) as (bx, by):
            As = T.alloc_shared((bk, 64), T.float16)
            Bs = T.alloc_shared((bk, N), T.float16)
            acc = T.alloc_fragment((64, N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[k * bk, by * 64], As)
                T.copy(B[k * bk, 0], Bs)
                T.gemm(As, Bs, acc, transpose_A=True)
            T.copy(acc, C[by * 64, 0])
    return main


@tilelang.jit(out_idx=[-1])
def pipelined_range_from_buffer(T_=512, D=64, bk=64):
    """out[q] = sum of rows lo[q] * bk .. hi[q] * bk of X (tiles from a range read from buffers)"""
    @T.prim_func
    def main(X: T.Tensor((T_, D), T.float32), lo: T.Tensor((4,), T.int32), hi: T.Tensor((4,), T.int32),
             out: T.Tensor((4, D), T.float32)):
        with T.Kernel(4, threads=128) as q:
            Xs = T.alloc_shared((bk, D), T.float32)
            acc = T.alloc_fragment((D,), T.float32)
            part = T.alloc_fragment((bk, D), T.float32)
            T.clear(acc)
            for k in T.Pipelined(lo[q], hi[q], num_stages=2):
                T.copy(X[k * bk, 0], Xs)
                T.copy(Xs, part)
                red = T.alloc_fragment((D,), T.float32)
                T.reduce_sum(part, red, dim=0)
                for j in T.Parallel(D):
                    acc[j] += red[j]
            T.copy(acc, out[q, :])
    return main
