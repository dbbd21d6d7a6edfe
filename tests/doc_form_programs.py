"""Programs for tests/test_doc_forms.py: one short program per form that TileLang's own
documentation (docs/programming_guides, deeplearning_operators) shows as working, written in
TileLang's idioms with our own shapes and operations.  Each factory returns a prim_func or a
jitted kernel; ``REFUSED`` lists the documented forms tilecute refuses by name."""

import torch

import tilecute as tilelang
import tilecute.language as T

N = 256
K = T.dyn['K']



def p_range_step():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            for i in range(tx, N, 32):
                B[i] = A[i] * 2.0
    return main

def p_neg_index():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((N,), "float32")
            T.copy(A, s)
            if T.get_thread_binding() == 0:
                B[0] = A[-1]
                B[1] = s[-2]
    return main

def p_ternary():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                x = A[bx * 128 + i]
                B[bx * 128 + i] = x if x > 0 else x * 0.5
    return main

def p_elif():
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            if A[t] < 0:
                B[t] = -1
            elif A[t] == 0:
                B[t] = 0
            elif A[t] < 10:
                B[t] = 1
            else:
                B[t] = 2
    return main

def p_allof():
    @T.prim_func
    def main(A: T.Tensor((50, 70), "float32"), B: T.Tensor((50, 70), "float32")):
        with T.Kernel(T.ceildiv(70, 32), T.ceildiv(50, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                gi = by * 32 + i
                gj = bx * 32 + j
                if T.all_of(gi < 50, gj < 70):
                    B[gi, gj] = A[gi, gj] + 1.0
                if T.any_of(gi == 0, gj == 0):
                    B[gi, gj] = 0.0
    return main

def p_while_break():
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            i = T.alloc_var("int32", init=0)
            while i < N:
                if A[i] < 0:
                    break
                i += 1
            B[0] = i
    return main

def p_while_plain():
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            i = 0
            acc = T.alloc_var("int32", init=0)
            while i < N:
                acc += A[i]
                i += 4
            B[0] = acc
    return main

def p_continue():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var("float32", init=0.0)
            for i in T.serial(N):
                if A[i] < 0:
                    continue
                acc += A[i]
            B[0] = acc
    return main

def p_unroll_break():
    @T.prim_func
    def main(A: T.Tensor((32, 8), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            first = T.alloc_var("int32", init=-1)
            for k in T.unroll(8):
                if A[t, k] != 0:
                    first = k
                    break
            B[t] = first
    return main

def p_chain_assign():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            x = y = A[t]
            B[t] = x + y
    return main

def p_for_list():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            for c in [1.0, 2.0]:
                B[t] = A[t] * c
    return main

def p_print_assert():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            T.device_assert(t < N, "tid out of range")
            if t == 0:
                T.print(A[0], msg="first:")
            B[t] = A[t]
    return main



def p_dtype_forms():
    @T.prim_func
    def main(A: T.Tensor((N,), T.float16), B: T.Tensor((N,), torch.float32), M: T.Tensor((N,), "bool")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            if M[t]:
                B[t] = T.Cast(T.float32, A[t]) * 3.0
            else:
                B[t] = -1.0
    return main

def p_dyn_bracket():
    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((K,), "float32")):
        with T.Kernel(T.ceildiv(K, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < K:
                    B[bx * 128 + i] = A[bx * 128 + i] + 1.0
    return main

def p_dynamic_default():
    L = T.dynamic('L')
    @T.prim_func
    def main(A: T.Tensor((L,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            s = T.alloc_var("float32", init=0.0)
            for i in T.serial(L):
                s += A[i]
            B[0] = s
    return main

def p_unroll_step():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=0.0)
            for k in T.unroll(1, 16, 3):
                s += A[t, k]
            B[t] = s
    return main

def p_serial_step():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=0.0)
            for k in T.serial(0, 16, 2):
                s += A[t, k] - A[t, k + 1]
            B[t] = s
    return main

def p_async_copy():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((32, 64), "float16")
            T.async_copy(A[bx * 32, 0], s)
            T.ptx_wait_group(0)
            T.tvm_storage_sync("shared")
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = s[i, 63 - j]
    return main

def p_cumsum_cummax():
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), S: T.Tensor((4, 64), "float32"), Mx: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((4, 64), "float32")
            b = T.alloc_shared((4, 64), "float32")
            T.copy(A, a)
            T.copy(A, b)
            T.cumsum(a, dim=1, reverse=True)
            T.cummax(b, dim=1)
            T.copy(a, S)
            T.copy(b, Mx)
    return main

def p_view_reshape():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((16, 16), "float32")
            T.copy(A, s)
            flat = T.reshape(s, (256,))
            for i in T.Parallel(256):
                B[i] = flat[i] * 2.0
    return main

def p_view_dtype():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            T.copy(A, s)
            si = T.view(s, dtype="int32")
            t = T.get_thread_binding()
            B[t] = si[t] & 0x7FFFFFFF
    return main

def p_math():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N, 4), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            x = A[t]
            B[t, 0] = T.clamp(x, -1.0, 0.5)
            B[t, 1] = T.rsqrt(T.abs(x) + 1.0)
            B[t, 2] = T.sigmoid(x)
            B[t, 3] = T.ieee_add(x, 1.0, "rz")
    return main

def p_loop_break():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            c = T.alloc_var("int32", init=0)
            for k in T.serial(16):
                if A[t, k] < 0:
                    T.loop_break()
                c += 1
            B[t] = c
    return main

def p_empty():
    @tilelang.jit
    def f(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            B = T.empty((n,), "float32")
            with T.Kernel(1, threads=n) as bx:
                t = T.get_thread_binding()
                B[t] = A[t] + 1.0
            return B
        return main
    return f(128)

def p_copy_args():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A, s, disable_tma=True, coalesced_width=4)
            T.copy(s, B, eviction_policy="evict_first")
    return main



def p_kernel_3d():
    @T.prim_func
    def main(A: T.Tensor((4, 6, 8), "float32"), B: T.Tensor((4, 6, 8), "float32")):
        with T.Kernel(8, 6, 4, threads=32) as (bx, by, bz):
            t = T.get_thread_binding()
            if t == 0:
                B[bz, by, bx] = A[bz, by, bx] * (bz + 1)
    return main

def p_kernel_threads_tuple():
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float32"), B: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=(32, 16)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            B[tx, ty] = A[ty, tx]
    return main

def p_ifthenelse_var():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            v = T.alloc_var("float32", init=A[t] * 2.0)
            v = T.if_then_else(t % 2 == 0, v, -v)
            B[t] = v
    return main

def p_warp_lane():
    @T.prim_func
    def main(W: T.Tensor((256,), "int32"), L: T.Tensor((256,), "int32"), G: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256) as bx:
            t = T.get_thread_binding()
            W[t] = T.get_warp_idx()
            L[t] = T.get_lane_idx()
            G[t] = T.get_warp_group_idx()
    return main

def p_reinterpret():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "uint32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            B[t] = T.reinterpret("uint32", A[t]) >> 23
    return main

def p_bool_arg():
    @tilelang.jit
    def f(neg: bool):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N) as bx:
                t = T.get_thread_binding()
                if neg:
                    B[t] = -A[t]
                else:
                    B[t] = A[t]
        return main
    return f(True)

def p_assume():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            T.assume(n > 0)
            B[t] = A[t] / T.Cast("float32", n)
    return main

def p_l2_hit():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            T.annotate_l2_hit_ratio({A: 0.75})
            t = T.get_thread_binding()
            B[t] = A[t] + 1.0
    return main

def p_macro_ret():
    @T.macro
    def sq(x):
        return x * x
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            B[t] = sq(A[t]) + 1.0
    return main

def p_cluster_rank():
    @T.prim_func
    def main(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
        with T.ClusterKernel(8, threads=64, cluster_dims=(2, 1, 1)) as bx:
            r = T.block_rank_in_cluster()
            t = T.get_thread_binding()
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            B[bx, t] = A[bx, t] + r
    return main

def p_cluster_simt():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((2, 64), "float32")):
        with T.ClusterKernel(2, threads=64, cluster_dims=(2, 1, 1)) as pid:
            src = T.alloc_shared((64,), "float32")
            dst = T.alloc_shared((64,), "float32")
            T.fill(dst, -1.0)
            T.cluster_sync()
            if pid == 0:
                for i in T.Parallel(64):
                    src[i] = A[i] * 3.0
                T.copy_cluster(src, dst, dst_block=1)
            T.cluster_sync()
            T.copy(dst, B[pid, :])
    return main

def p_swizzle():
    @T.prim_func
    def main(A: T.Tensor((512, 512), "float32"), B: T.Tensor((512, 512), "float32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            T.use_swizzle(panel_size=4, order="column")
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = A[by * 64 + i, bx * 64 + j]
    return main

def p_alloc_var_typed():
    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var(T.int32, 7)
            for i in T.serial(N):
                acc += T.Cast("int32", A[i])
            B[0] = acc
    return main



def p_range_neg_step():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            run = T.alloc_var("float32", init=0.0)
            for k in range(15, -1, -1):
                run += A[t, k]
                B[t, k] = run
    return main

def p_while_and():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            i = T.alloc_var("int32", init=0)
            while i < 16 and A[t, T.min(i, 15)] > 0:
                i += 1
            B[t] = i
    return main

def p_mod_div_neg():
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N, 2), "int32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            B[t, 0] = A[t] % 3
            B[t, 1] = A[t] // 4
    return main

def p_aug_buf():
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            B[t] = A[t]
            B[t] *= 3
            B[t] <<= 1
            B[t] //= 5
            B[t] %= 7
    return main

def p_ternary_mixed():
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] if A[i] > 0 else 0
    return main

def p_bool_var():
    @T.prim_func
    def main(A: T.Tensor((32, 8), "float32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            seen = T.alloc_var("bool", init=False)
            for k in T.serial(8):
                if A[t, k] < 0:
                    seen = True
            B[t] = T.if_then_else(seen, 1, 0)
    return main

def p_slice_tail():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((32,), "float32")
            T.copy(A[96:128], s)
            for i in T.Parallel(32):
                B[i] = s[i] + 1.0
    return main

def p_dyn_range():
    L = T.dynamic('L')
    @T.prim_func
    def main(A: T.Tensor((L,), "float32"), B: T.Tensor((L,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            t = T.get_thread_binding()
            for i in range(t, L, 64):
                B[i] = A[i] * 0.5
    return main

def p_scalar_bool_param():
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), flag: T.bool):
        with T.Kernel(1, threads=N) as bx:
            t = T.get_thread_binding()
            if flag:
                B[t] = A[t]
            else:
                B[t] = 0.0
    return main

def p_evict():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A, s, disable_tma=True)
            T.copy(s, B, eviction_policy="evict_first")
    return main

def p_unroll_no_explicit():
    @T.prim_func
    def main(A: T.Tensor((32, 8), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=1.0)
            for k in T.unroll(8, explicit=False):
                s *= A[t, k]
            B[t] = s
    return main

def p_vectorized():
    @T.prim_func
    def main(A: T.Tensor((32, 8), "float32"), B: T.Tensor((32, 8), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            for k in T.vectorized(8):
                B[t, k] = A[t, 7 - k]
    return main



# deeplearning_operators (gemv, elementwise, matmul): allreduce, scalar atomics, vectorized
# locals, use_swizzle(enable=False), gemm transpose_B, reduce clear=False
def p_allreduce_max():
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(16, threads=(8, 4)) as bn:
            tk = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            part = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            part[0] = -T.infinity("float32")
            for k in T.serial(8):
                part[0] = T.max(part[0], A[bn, tk * 8 + k])
            with T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [-T.infinity("float32")]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, red[0], tk, dtype="handle"))
            if tn == 0:
                B[bn] = red[0]
    return main


def p_shared_scalar_atomic():
    @T.prim_func
    def main(A: T.Tensor((8, 128), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            t = T.get_thread_binding()
            acc = T.alloc_shared((1,), "float32")
            loc = T.alloc_local((1,), "float32")
            if t == 0:
                acc[0] = 0.0
            T.sync_threads()
            loc[0] = A[bx, t] * A[bx, t]
            T.atomic_add(acc[0], loc[0])
            T.sync_threads()
            if t == 0:
                B[bx] = acc[0]
    return main


def p_vectorized_local():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), x: T.Tensor((32,), "float16"), C: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=8) as bn:
            tk = T.get_thread_binding()
            a_l = T.alloc_local((4,), "float16")
            x_l = T.alloc_local((4,), "float16")
            s = T.alloc_local((1,), "float32")
            s[0] = 0.0
            for v in T.vectorized(4):
                a_l[v] = A[bn, tk * 4 + v]
                x_l[v] = x[tk * 4 + v]
            for k in T.serial(4):
                s[0] += a_l[k].astype("float32") * x_l[k].astype("float32")
            T.atomic_add(C[bn], s[0])
    return main


def p_swizzle_enable():
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float32"), B: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            T.use_swizzle(panel_size=3, enable=False)
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = A[by * 64 + i, bx * 64 + j] * 2.0
    return main


def p_gemm_tb():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((96, 64), "float16"), C: T.Tensor((128, 96), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((96, 64), "float16")
            Cf = T.alloc_fragment((128, 96), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(Cf)
            T.gemm(As, Bs, Cf, transpose_B=True)
            T.copy(Cf, C)
    return main


def p_reduce_noclear():
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 128), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            T.fill(r, 10.0)
            T.reduce_sum(f, r, dim=1, clear=False)
            T.copy(r, B)
    return main


def p_copy_loop_layout_parallel():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):
                f[i, j] = f[i, j] * (i + 1) - j
            T.copy(f, B)
    return main



# software_pipeline.md: a scalar bind (`idx: T.int32 = Ids[ko]`) in a pipelined body is
# replayed at each consumer's iteration; debug_tools: T.print of a shared / fragment buffer
def p_pipelined_bind():
    @T.prim_func
    def main(Ids: T.Tensor((8,), "int32"), A: T.Tensor((32, 64), "float16"), B: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((1, 64), "float16")
            for ko in T.Pipelined(8, num_stages=2):
                idx: T.int32 = Ids[ko]
                T.copy(A[idx, 0:64], As)
                for j in T.Parallel(64):
                    B[idx, j] = As[0, j] * 2.0
    return main


def p_pipelined_bind_gemm():
    @T.prim_func
    def main(Ids: T.Tensor((4,), "int32"), A: T.Tensor((64, 256), "float16"), Bm: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            Cf = T.alloc_fragment((64, 64), "float32")
            T.clear(Cf)
            for ko in T.Pipelined(4, num_stages=2):
                kb: T.int32 = Ids[ko] * 64
                T.copy(A[0:64, kb:kb + 64], As)
                T.copy(Bm[kb:kb + 64, 0:64], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C)
    return main


def p_print_buffer():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((8, 8), "float32")
            f = T.alloc_fragment((8, 8), "float32")
            T.copy(A, s)
            T.print(s, msg="smem:")
            T.copy(s, f)
            T.print(f, msg="frag:")
            T.copy(f, B)
    return main


# control_flow.md: `continue` inside T.Parallel skips the rest of that element's body
# (TileLang 0.1.15 emits `continue` in the thread's element loop; tilecute folds it into else)
def p_parallel_continue():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(64, 64):
                if A[i, j] < 0:
                    continue
                B[i, j] = A[i, j] * 2.0
    return main


def p_parallel_continue_frag():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):
                if f[i, j] < -1.0:
                    f[i, j] = -1.0
                    continue
                elif i == j:
                    continue
                f[i, j] = f[i, j] * 3.0 + 1.0
                if f[i, j] > 4.0:
                    continue
                f[i, j] = f[i, j] - 0.5
            T.copy(f, B)
    return main



# loops with negative steps, unroll_factor, nested break, while + continue, bool binds,
# 2-d negative indices, T.Parallel coalesced_width
def p_serial_neg_step():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=0.0)
            for k in T.serial(15, 0, -2):
                s = s * 0.5 + A[t, k]
            B[t] = s
    return main


def p_unroll_factor():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=0.0)
            for k in T.unroll(16, unroll_factor=4):
                s = s * 0.5 + A[t, k]
            B[t] = s
    return main


def p_nested_break():
    @T.prim_func
    def main(A: T.Tensor((32, 4, 8), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            c = T.alloc_var("int32", init=0)
            for r in T.serial(4):
                for k in T.serial(8):
                    if A[t, r, k] == 0:
                        break
                    c += 1
            B[t] = c
    return main


def p_while_continue():
    @T.prim_func
    def main(A: T.Tensor((32, 16), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.get_thread_binding()
            i = T.alloc_var("int32", init=0)
            c = T.alloc_var("int32", init=0)
            while i < 16:
                i += 1
                if A[t, i - 1] % 2 == 0:
                    continue
                c += A[t, i - 1]
            B[t] = c
    return main


def p_bool_bind():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            t = T.get_thread_binding()
            pos: T.bool = A[t] > 0
            big: T.bool = T.abs(A[t]) > 1.0
            B[t] = T.if_then_else(pos and not big, A[t], 0.0)
    return main


def p_neg_index_2d():
    @T.prim_func
    def main(A: T.Tensor((8, 16), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            if T.get_thread_binding() == 0:
                B[0] = A[-1, -2]
                B[1] = A[-8, -16]
    return main


def p_parallel_coalesced():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(64, 64, coalesced_width=2):
                B[i, j] = A[i, j] + 1.0
    return main



# type_system.md: float64, uint64, uint8 -> int16 arithmetic
def p_f64_u64():
    @T.prim_func
    def main(A: T.Tensor((64,), "float64"), U: T.Tensor((64,), "uint64"), B: T.Tensor((64,), "float64"), V: T.Tensor((64,), "uint64")):
        with T.Kernel(1, threads=64) as bx:
            t = T.get_thread_binding()
            B[t] = T.sqrt(A[t] * A[t] + 1.0)
            V[t] = (U[t] << 3) + T.uint64(1)
    return main


def p_int16_uint8():
    @T.prim_func
    def main(A: T.Tensor((64,), "uint8"), B: T.Tensor((64,), "int16")):
        with T.Kernel(1, threads=64) as bx:
            t = T.get_thread_binding()
            B[t] = T.Cast("int16", A[t]) * 300 - 20000
    return main



# instructions.md: warp_reduce_sum, ballot, syncthreads_count, shfl_xor
def p_warp_intrinsics():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), S: T.Tensor((128,), "float32"), Bal: T.Tensor((128,), "uint32"), Cnt: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.get_thread_binding()
            x = A[t]
            S[t] = T.warp_reduce_sum(x)
            Bal[t] = T.ballot(x > 0)
            Cnt[t] = T.syncthreads_count(x > 0)
    return main


def p_shfl_xor_tree():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), M: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            t = T.get_thread_binding()
            v = T.alloc_var("float32", init=A[t])
            for o in T.unroll(3):
                v = T.max(v, T.shfl_xor(v, 1 << o))
            M[t] = v
    return main



# python_compatibility.md: buffer.shape[dim] in place of len(); print() of Python values
def p_shape_attr():
    L = T.dynamic("L")
    @T.prim_func
    def main(A: T.Tensor((L, 4), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4) as bx:
            t = T.get_thread_binding()
            s = T.alloc_var("float32", init=0.0)
            for i in T.serial(A.shape[0]):
                s += A[i, t] * A.shape[1]
            B[t] = s
    return main


def p_host_print():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            bm = 32
            print("tile", bm)
            t = T.get_thread_binding()
            B[t] = A[t] + bm
    return main
