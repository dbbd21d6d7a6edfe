"""Each pass alone: a small program, the passes before it, then the pass; the test
reads what the pass changed as a diff of the printed IR (the form `tilecute show`
prints), and the decisions the printer does not show (descriptors, vector accesses,
shared-memory slots) from the nodes that record them."""

import dataclasses
import difflib
from pathlib import Path

import pytest

import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.validate import ValidationError
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import PASSES, run_passes
from tilecute.transform.shared_memory import SharedMemoryError

GEMM = """
@T.prim_func
def mm(A: T.Tensor((256, 128), "float16"), B: T.Tensor((128, 256), "float16"),
       C: T.Tensor((256, 256), "float16")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        As = T.alloc_shared((128, 64), "float16")
        Bs = T.alloc_shared((64, 128), "float16")
        acc = T.alloc_fragment((128, 128), "float32")
        T.clear(acc)
        for k in T.Pipelined(2, num_stages=4):
            T.copy(A[by * 128, k * 64], As)
            T.copy(B[k * 64, bx * 128], Bs)
            T.gemm(As, Bs, acc)
        T.copy(acc, C[by * 128, bx * 128])
"""
GEMM_SYM = """
M = T.symbolic("M")
N = T.symbolic("N", multiple_of=8)

@T.prim_func
def mm(A: T.Tensor((M, 128), "float16"), B: T.Tensor((128, N), "float16"),
       C: T.Tensor((M, N), "float16")):
    with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
        As = T.alloc_shared((128, 64), "float16")
        Bs = T.alloc_shared((64, 128), "float16")
        acc = T.alloc_fragment((128, 128), "float32")
        T.clear(acc)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[by * 128, k * 64], As)
            T.copy(B[k * 64, bx * 128], Bs)
            T.gemm(As, Bs, acc)
        T.copy(acc, C[by * 128, bx * 128])
"""
GEMM_WS = GEMM.replace("num_stages=4)", "num_stages=4, warp_specialize=True)")
GEMM_CLUSTER = GEMM_WS.replace("T.Kernel(2, 2, threads=128)",
                                "T.Kernel(2, 2, threads=128, cluster=(1, 2, 1))")
GEMM_NOWS = GEMM.replace("num_stages=4)", "num_stages=4, warp_specialize=False)")
TILE = """
@T.prim_func
def rowcopy(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64, 64), "float32")
        f = T.alloc_fragment((64, 64), "float32")
        T.copy(A[0, 0], s)
        T.copy(s, f)
        for i, j in T.Parallel(64, 64):
            f[i, j] = f[i, j] * 2.0
        T.copy(f, B[0, 0])
"""
ADD = """
@T.prim_func
def add(A: T.Tensor((1024,), "float16"), B: T.Tensor((1024,), "float16")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(1024):
            B[i] = A[i] + A[i]
"""
ATTN = """
@T.prim_func
def attn(Q: T.Tensor((128, 64), "float16"), K: T.Tensor((1024, 64), "float16"),
         V: T.Tensor((1024, 64), "float16"), O: T.Tensor((128, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        Q_s = T.alloc_shared((64, 64), "float16")
        K_s = T.alloc_shared((64, 64), "float16")
        V_s = T.alloc_shared((64, 64), "float16")
        S = T.alloc_fragment((64, 64), "float32")
        P = T.alloc_fragment((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(Q[bx * 64, 0], Q_s)
        T.clear(acc)
        for k in T.Pipelined(16, num_stages=3, warp_specialize=True):
            T.copy(K[k * 64, 0], K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                S[i, j] = T.exp2(S[i, j])
            for i, j in T.Parallel(64, 64):
                acc[i, j] *= 0.5
            T.copy(S, P)
            T.copy(V[k * 64, 0], V_s)
            T.gemm(P, V_s, acc)
        T.copy(acc, O[bx * 64, 0])
"""
# a running row sum of an accumulator whose two warpgroups split N (FullCol)
ROWSUM = """
@T.prim_func
def rowsum(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((1024, 64), "float16"),
           O: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        Q_s = T.alloc_shared((64, 64), "float16")
        K_s = T.alloc_shared((128, 64), "float16")
        S = T.alloc_fragment((64, 128), "float32")
        l = T.alloc_fragment((64,), "float32")
        l_step = T.alloc_fragment((64,), "float32")
        alpha = T.alloc_fragment((64,), "float32")
        T.copy(Q[0, 0], Q_s)
        T.fill(l, 0)
        for k in T.Pipelined(8, num_stages=2):
            T.copy(K[k * 128, 0], K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(S, alpha, dim=1)
            T.reduce_sum(S, l_step, dim=1)
            for i in T.Parallel(64):
                l[i] = l[i] * T.exp2(-alpha[i]) + l_step[i]
        for i in T.Parallel(64):
            O[i] = l[i]
"""
# an accumulator read as (rows, queries, heads): weighted per head, summed per query
HEADS = """
@T.prim_func
def heads(Q: T.Tensor((32, 64), "float16"), K: T.Tensor((64, 64), "float16"),
          W: T.Tensor((16,), "float32"), L: T.Tensor((64, 2), "float32")):
    with T.Kernel(1, threads=128) as bx:
        Q_s = T.alloc_shared((32, 64), "float16")
        K_s = T.alloc_shared((64, 64), "float16")
        S = T.alloc_fragment((64, 32), "float32")
        S3 = T.reshape(S, (64, 2, 16))
        w = T.alloc_fragment((16,), "float32")
        l = T.alloc_fragment((64, 2), "float32")
        T.copy(Q, Q_s)
        T.copy(K, K_s)
        T.copy(W, w)
        T.gemm(K_s, Q_s, S, transpose_B=True, clear_accum=True)
        for n, q, h in T.Parallel(64, 2, 16):
            S3[n, q, h] = T.max(S3[n, q, h], 0) * w[h]
        T.reduce_sum(S3, l, dim=2)
        T.copy(l, L)
"""
# a synchronous load-and-scale nest, then a copy that becomes cp.async (sm_80)
SCALED_SUM = """\
@T.prim_func
def scaled_sum(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        a_s = T.alloc_shared((64, 64), "float16")
        b_s = T.alloc_shared((64, 64), "float16")
        for i, j in T.Parallel(64, 64):
            a_s[i, j] = A[i, j] * T.float16(2.0)
        T.copy(B, b_s)
        for i, j in T.Parallel(64, 64):
            C[i, j] = a_s[i, j] + b_s[i, j]
"""
CHUNKED_SUM = """\
@T.prim_func
def chunked_sum(X: T.Tensor((4, 1024), "float32"), Y: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        x_s = T.alloc_shared((4, 64), "float32")
        acc = T.alloc_fragment((4, 64), "float32")
        T.clear(acc)
        for c in T.Pipelined(16, num_stages=2):
            T.copy(X[0, c * 64], x_s)
            for i, j in T.Parallel(4, 64):
                acc[i, j] += x_s[i, j]
        T.copy(acc, Y)
"""
NAMES = [p.name for p in PASSES]


def before_and_after(src: str, name: str, arch: str):
    """The program after the passes before ``name``, and after ``name`` too."""
    i = NAMES.index(name)
    func = T.from_script(src)
    before = run_passes(func, arch, until=NAMES[i - 1]) if i else func
    return before, PASSES[i].run(before, arch, {})


def changes(src: str, name: str, arch: str) -> str:
    before, after = before_and_after(src, name, arch)
    d = difflib.unified_diff(print_func(before).splitlines(), print_func(after).splitlines(),
                             lineterm="", n=0)
    return "\n".join(list(d)[2:]) + "\n"


# a scalar per iteration of a T.Parallel nest (a ReLU's derivative), declared in the body
RELU_GRAD = """\
@T.prim_func
def relu_grad(X: T.Tensor((64, 32), "float32"), G: T.Tensor((64, 32), "float32"), Y: T.Tensor((64, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i, j in T.Parallel(64, 32):
            slope = T.alloc_var("float32", 0.5)
            if X[i, j] > 0:
                slope = 1.0
            Y[i, j] = G[i, j] * slope
"""

# a fragment on threads 32..95 of 128 and its row sums on the same threads (TileLang's
# partial thread barrier reduction)
PARTIAL = """\
@T.prim_func
def normalize(X: T.Tensor((4, 512), "float32"), Y: T.Tensor((4, 512), "float32")):
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((4, 512), "float32")
        s = T.alloc_fragment((4,), "float32")
        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (32 + j // 8, i * 8 + j % 8)),
                           s: T.Fragment(s.shape, forward_fn=lambda i, rep: (32 + rep, i), replicate=64)})
        T.copy(X, x)
        T.reduce_sum(x, s, dim=1)
        for i, j in T.Parallel(4, 512):
            Y[i, j] = x[i, j] / s[i]
"""

# TileLang's warp-specialized GEMM written with its own regions and mbarriers, pipelined
WS_PIPELINE = """
@T.prim_func
def ws_gemm(A: T.Tensor((512, 256), "float16"), B: T.Tensor((256, 512), "float16"), C: T.Tensor((512, 512), "float16")):
    with T.Kernel(4, 4, threads=256) as (bx, by):
        A_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((64, 128), "float16")
        acc = T.alloc_fragment((128, 128), "float32")
        ready = T.alloc_barrier(arrive_count=128)
        done = T.alloc_barrier(arrive_count=128)
        with T.ws(0):
            T.clear(acc)
        for ko in T.Pipelined(4, num_stages=2):
            with T.ws(1):
                T.barrier_wait(done, (ko + 1) % 2)
                T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready)
                T.tma_copy(B[ko * 64, bx * 128], B_s, barrier=ready)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.barrier_wait(ready, ko % 2)
                T.gemm(A_s, B_s, acc)
                T.barrier_arrive(done)
        with T.ws(0):
            T.copy(acc, C[by * 128, bx * 128])
"""


CASES = [
    ("fragment_thread_regions", PARTIAL, "sm_90a", """\
@@ -8,8 +8,9 @@
-        s = T.alloc_fragment((4,), "float32", layout=T.Layout("replicated", threads=64, first_thread=32))
-        for i1 in T.Parallel(4):
-            for i2 in T.Parallel(512):
-                x[i1, i2] = X[i1, i2]
-        T.reduce_sum(x, s, dim=1, clear=True)
-        for i in T.Parallel(4):
-            for j in T.Parallel(512):
-                Y[i, j] = x[i, j] / s[i]
+        s = T.alloc_fragment((4,), "float32", layout=T.Layout("replicated"))
+        if 32 <= T.get_thread_binding() < 96:
+            for i1 in T.Parallel(4):
+                for i2 in T.Parallel(512):
+                    x[i1, i2] = X[i1, i2]
+            T.reduce_sum(x, s, dim=1, clear=True)
+            for i in T.Parallel(4):
+                for j in T.Parallel(512):
+                    Y[i, j] = x[i, j] / s[i]
"""),
    ("hoist_parallel_locals", RELU_GRAD, "sm_90a", """\
@@ -6,0 +7 @@
+        slope = T.alloc_local((1,), "float32")
@@ -9 +9,0 @@
-                slope = T.alloc_local((1,), "float32")
"""),
    ("rasterize", GEMM_SYM, "sm_90a", """\
@@ -9,0 +10,6 @@
+        block_flat = bx + by * T.ceildiv(N, 128)
+        panel_first = block_flat // (16 * T.ceildiv(N, 128)) * 16
+        panel_offset = block_flat % (16 * T.ceildiv(N, 128))
+        panel_rows = T.if_then_else(panel_first + 16 <= T.ceildiv(M, 128), 16, T.ceildiv(M, 128) - panel_first)
+        bx1 = panel_offset // panel_rows  # below T.ceildiv(N, 128)
+        by1 = panel_offset % panel_rows + panel_first  # below T.ceildiv(M, 128)
@@ -15,2 +21,2 @@
-            T.copy(A[by * 128, k * 64], As)
-            T.copy(B[k * 64, bx * 128], Bs)
+            T.copy(A[by1 * 128, k * 64], As)
+            T.copy(B[k * 64, bx1 * 128], Bs)
@@ -18 +24 @@
-        T.copy(acc, C[by * 128, bx * 128])
+        T.copy(acc, C[by1 * 128, bx1 * 128])
"""),
    ("version_pipelines", WS_PIPELINE, "sm_90a", """\
@@ -7,2 +7,2 @@
-        A_s = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
-        B_s = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+        A_s = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=2)
+        B_s = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=2)
@@ -10,2 +10,2 @@
-        ready = T.alloc_barrier(128)
-        done = T.alloc_barrier(128)
+        ready = T.alloc_barrier([128] * 2)
+        done = T.alloc_barrier([128] * 2)
@@ -16,4 +16,4 @@
-                T.mbarrier_wait_parity(done, (ko + 1) % 2)
-                T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready)
-                T.tma_copy(B[ko * 64, bx * 128], B_s, barrier=ready)
-                T.mbarrier_arrive(ready)
+                T.mbarrier_wait_parity(done[ko % 2], (ko // 2 + 1) % 2)
+                T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready[ko % 2])
+                T.tma_copy(B[ko * 64, bx * 128], B_s, barrier=ready[ko % 2])
+                T.mbarrier_arrive(ready[ko % 2])
@@ -21 +21 @@
-                T.mbarrier_wait_parity(ready, ko % 2)
+                T.mbarrier_wait_parity(ready[ko % 2], ko // 2 % 2)
@@ -23 +23 @@
-                T.mbarrier_arrive(done)
+                T.mbarrier_arrive(done[ko % 2])
"""),
    ("stage_epilogue", GEMM, "sm_90a", """\
@@ -15 +15,3 @@
-        T.copy(acc, C[by * 128, bx * 128])
+        acc_shared = T.alloc_shared((128, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+        T.copy(acc, acc_shared)
+        T.copy(acc_shared, C[by * 128, bx * 128])
"""),
    ("select_mma", GEMM, "sm_90a", """\
@@ -7,3 +7,3 @@
-        As = T.alloc_shared((128, 64), "float16")
-        Bs = T.alloc_shared((64, 128), "float16")
-        acc = T.alloc_fragment((128, 128), "float32")
+        As = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+        Bs = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+        acc = T.alloc_fragment((128, 128), "float32", layout=T.Layout("mma", threads=128, mma="wgmma", warps=(1, 1)))
"""),
    ("split_accumulator_views", HEADS, "sm_90a", """\
@@ -6,0 +7 @@
+        S3_runs = T.alloc_shared((128,), "float32")
@@ -10 +10,0 @@
-        S3 = T.view(S, (64, 2, 16), "float32")
@@ -18,4 +18,6 @@
-            for q in T.Parallel(2):
-                for h in T.Parallel(16):
-                    S3[n, q, h] = T.max(S3[n, q, h], T.float32(0.0)) * w[h]
-        T.reduce_sum(S3, l, dim=2, clear=True)
+            for q_h in T.Parallel(32):
+                S[n, q_h] = T.max(S[n, q_h], T.float32(0.0)) * w[q_h % 16]
+        T.reduce_segments(S, S3_runs, 'sum', width=16)
+        for S3_r0 in T.Parallel(64):
+            for S3_r1 in T.Parallel(2):
+                l[S3_r0, S3_r1] = S3_runs[S3_r0 * 2 + S3_r1]
"""),
    ("lower_copies_to_tma", GEMM, "sm_90a", """\
@@ -12,2 +12,2 @@
-            T.copy(A[by * 128, k * 64], As)
-            T.copy(B[k * 64, bx * 128], Bs)
+            T.tma_copy(A[by * 128, k * 64], As)
+            T.tma_copy(B[k * 64, bx * 128], Bs)
@@ -17 +17 @@
-        T.copy(acc_shared, C[by * 128, bx * 128])
+        T.tma_copy(acc_shared, C[by * 128, bx * 128])
"""),
    ("warp_specialize", GEMM_WS, "sm_90a", """\
@@ -6,3 +6,3 @@
-    with T.Kernel(2, 2, threads=128) as (bx, by):
-        As = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
-        Bs = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+    with T.Kernel(2, 2, threads=128, producer_threads=128) as (bx, by):
+        As = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=4)
+        Bs = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=4)
@@ -9,0 +10,2 @@
+        tc_bar0 = T.alloc_barrier([2] * 4)
+        tc_bar1 = T.alloc_barrier([128] * 4)
@@ -10,0 +13,7 @@
+        if T.get_thread_binding(0) >= 128:
+            if T.get_thread_binding(0) == 128:
+                for tc_j0 in T.serial(2):
+                    if tc_j0 >= 4:
+                        T.mbarrier_wait_parity(tc_bar1[tc_j0 % 4], tc_j0 // 4 + 1 & 1)
+                    T.tma_copy(A[by * 128, tc_j0 * 64], As, barrier=tc_bar0[tc_j0 % 4], stage=tc_j0 % 4, arrive=True)
+                    T.tma_copy(B[tc_j0 * 64, bx * 128], Bs, barrier=tc_bar0[tc_j0 % 4], stage=tc_j0 % 4, arrive=True)
@@ -12,3 +21,4 @@
-            T.tma_copy(A[by * 128, k * 64], As)
-            T.tma_copy(B[k * 64, bx * 128], Bs)
-            T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False)
+            T.mbarrier_wait_parity(tc_bar0[k % 4], k // 4 & 1)
+            T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1)
+            if k > 0:
+                T.mbarrier_arrive(tc_bar1[(k + 3) % 4])
"""),
    ("pipeline_tma_loads", GEMM_NOWS, "sm_90a", """\
@@ -7,2 +7,2 @@
-        As = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
-        Bs = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
+        As = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=4)
+        Bs = T.alloc_shared((64, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128), stages=4)
@@ -9,0 +10,2 @@
+        tc_bar0 = T.alloc_barrier([2] * 4)
+        tc_bar1 = T.alloc_barrier([128] * 4)
@@ -10,0 +13,4 @@
+        T.tma_copy(A[by * 128, 0 * 64], As, barrier=tc_bar0, stage=0, arrive=True)
+        T.tma_copy(B[0 * 64, bx * 128], Bs, barrier=tc_bar0, stage=0, arrive=True)
+        T.tma_copy(A[by * 128, 1 * 64], As, barrier=tc_bar0[1], stage=1, arrive=True)
+        T.tma_copy(B[1 * 64, bx * 128], Bs, barrier=tc_bar0[1], stage=1, arrive=True)
@@ -12,3 +18,10 @@
-            T.tma_copy(A[by * 128, k * 64], As)
-            T.tma_copy(B[k * 64, bx * 128], Bs)
-            T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False)
+            T.mbarrier_wait_parity(tc_bar0[k % 4], k // 4 & 1)
+            T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1)
+            if k > 0:
+                T.mbarrier_arrive(tc_bar1[(k + 3) % 4])
+            if k + 3 < 2:
+                if T.get_thread_binding(0) == 0:
+                    if k > 0:
+                        T.mbarrier_wait_parity(tc_bar1[(k + 3) % 4], (k - 1) // 4 & 1)
+                    T.tma_copy(A[by * 128, (k + 3) * 64], As, barrier=tc_bar0[(k + 3) % 4], stage=(k + 3) % 4, arrive=True)
+                    T.tma_copy(B[(k + 3) * 64, bx * 128], Bs, barrier=tc_bar0[(k + 3) % 4], stage=(k + 3) % 4, arrive=True)
"""),
    ("lower_tile_ops", TILE, "sm_80", """\
@@ -9,2 +9,6 @@
-        T.copy(A, s)
-        T.copy(s, f)
+        for i1 in T.Parallel(64):
+            for i2 in T.Parallel(64):
+                s[i1, i2] = A[i1, i2]
+        for i3 in T.Parallel(64):
+            for i4 in T.Parallel(64):
+                f[i3, i4] = s[i3, i4]
@@ -14 +18,3 @@
-        T.copy(f, B)
+        for i5 in T.Parallel(64):
+            for i6 in T.Parallel(64):
+                B[i5, i6] = f[i5, i6]
"""),
    ("infer_layouts", TILE, "sm_80", """\
@@ -7,2 +7,2 @@
-        s = T.alloc_shared((64, 64), "float32")
-        f = T.alloc_fragment((64, 64), "float32")
+        s = T.alloc_shared((64, 64), "float32", layout=T.Layout("row_major"))
+        f = T.alloc_fragment((64, 64), "float32", layout=T.Layout("blocked", threads=128, vector=4))
@@ -12,2 +12,2 @@
-        for i3 in T.Parallel(64):
-            for i4 in T.Parallel(64):
+        for i3 in T.Parallel(64, vector_width=1):
+            for i4 in T.Parallel(64, vector_width=4):
@@ -15,2 +15,2 @@
-        for i in T.Parallel(64):
-            for j in T.Parallel(64):
+        for i in T.Parallel(64, vector_width=1):
+            for j in T.Parallel(64, vector_width=4):
@@ -18,2 +18,2 @@
-        for i5 in T.Parallel(64):
-            for i6 in T.Parallel(64):
+        for i5 in T.Parallel(64, vector_width=1):
+            for i6 in T.Parallel(64, vector_width=4):
"""),
    ("vectorize", TILE, "sm_80", """\
@@ -9,2 +9,2 @@
-        for i1 in T.Parallel(64):
-            for i2 in T.Parallel(64):
+        for i1 in T.Parallel(64, vector_width=1):
+            for i2 in T.Parallel(64, vector_width=4, async_copy=True):
"""),
    ("insert_barriers", TILE, "sm_80", """\
@@ -11,0 +12 @@
+        T.sync_threads(wait_async=True)
"""),
    # the pipelined loop's cp.async tile gets two stages: step 0 issued before the loop,
    # step c + 1 at the top of step c (an empty group past the end), then a wait for all
    # but the newest group (step c's landed)
    ("pipeline_async_copies", CHUNKED_SUM, "sm_80", """\
@@ -7 +7 @@
-        x_s = T.alloc_shared((4, 64), "float32", layout=T.Layout("row_major"))
+        x_s = T.alloc_shared((4, 64), "float32", layout=T.Layout("row_major"), stages=2)
@@ -11,0 +12,3 @@
+        for i3 in T.Parallel(4, vector_width=1, fill_stage=0):
+            for i4 in T.Parallel(64, vector_width=4, async_copy=True, copy_instruction="async"):
+                x_s[i3, i4] = X[i3, i4]
@@ -13,3 +16,7 @@
-            for i3 in T.Parallel(4, vector_width=1):
-                for i4 in T.Parallel(64, vector_width=4, async_copy=True):
-                    x_s[i3, i4] = X[i3, c * 64 + i4]
+            if c + 1 < 16:
+                for i3 in T.Parallel(4, vector_width=1, fill_stage=(c + 1) % 2):
+                    for i4 in T.Parallel(64, vector_width=4, async_copy=True, copy_instruction="async"):
+                        x_s[i3, i4] = X[i3, (c + 1) * 64 + i4]
+            else:
+                T.ptx_commit_group()
+            T.ptx_wait_group(1)
@@ -18,0 +26 @@
+        T.ptx_wait_group(0)
"""),
    # the cp.async copy starts before the independent nest before it (its loads in flight
    # with the nest's)
    ("start_async_copies_early", SCALED_SUM, "sm_80", """\
@@ -8,0 +9,3 @@
+        for i1 in T.Parallel(64, vector_width=1):
+            for i2 in T.Parallel(64, vector_width=8, async_copy=True):
+                b_s[i1, i2] = B[i1, i2]
@@ -12,3 +14,0 @@
-        for i1 in T.Parallel(64, vector_width=1):
-            for i2 in T.Parallel(64, vector_width=8, async_copy=True):
-                b_s[i1, i2] = B[i1, i2]
"""),
    # the two blocks of a cluster along M share B's tiles (2 boxes: one each), each warp
    # releases a stage in both blocks (4 warps x 2 blocks arrive), and the blocks leave
    # together
    ("multicast_tma_loads", GEMM_CLUSTER, "sm_90a", """\
@@ -10 +10 @@
-        tc_bar1 = T.alloc_barrier([128] * 4)
+        tc_bar1 = T.alloc_barrier([8] * 4)
@@ -19 +19 @@
-                    T.tma_copy(B[tc_j0 * 64, bx * 128], Bs, barrier=tc_bar0[tc_j0 % 4], stage=tc_j0 % 4, arrive=True)
+                    T.tma_copy(B[tc_j0 * 64, bx * 128], Bs, barrier=tc_bar0[tc_j0 % 4], stage=tc_j0 % 4, arrive=True, multicast=2)
@@ -30 +30 @@
-                    T.mbarrier_arrive(tc_bar1[(k + 3) % 4])
+                    T.mbarrier_arrive(tc_bar1[(k + 3) % 4], cluster=2)
@@ -36,0 +37 @@
+        T.cluster_sync()
"""),
    ("split_roles", GEMM_WS, "sm_90a", """\
@@ -9 +8,0 @@
-        acc = T.alloc_fragment((128, 128), "float32", layout=T.Layout("mma", threads=128, mma="wgmma", warps=(1, 1)))
@@ -12,3 +11 @@
-        for i1 in T.Parallel(128, vector_width=1):
-            for i2 in T.Parallel(128, vector_width=2):
-                acc[i1, i2] = T.float32(0.0)
+        acc_shared = T.alloc_shared((128, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
@@ -15,0 +13 @@
+            T.set_max_nreg(24, 0)
@@ -22,12 +20,17 @@
-        for k in T.Pipelined(2, num_stages=4, warp_specialize=True):
-            T.mbarrier_wait_parity(tc_bar0[k % 4], k // 4 & 1)
-            T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1)
-            if k > 0:
-                T.mbarrier_arrive(tc_bar1[(k + 3) % 4])
-        acc_shared = T.alloc_shared((128, 128), "float16", layout=T.Layout("tma_swizzled", swizzle=128))
-        T.sync_threads()
-        for i3 in T.Parallel(128, vector_width=1):
-            for i4 in T.Parallel(128, vector_width=2):
-                acc_shared[i3, i4] = T.Cast("float16", acc[i3, i4])
-        T.tma_copy(acc_shared, C[by * 128, bx * 128], wait_read=False)
-        T.tma_store_wait()
+        else:
+            T.set_max_nreg(256, 1)
+            acc = T.alloc_fragment((128, 128), "float32", layout=T.Layout("mma", threads=128, mma="wgmma", warps=(1, 1)))
+            for i1 in T.Parallel(128, vector_width=1):
+                for i2 in T.Parallel(128, vector_width=2):
+                    acc[i1, i2] = T.float32(0.0)
+            for k in T.Pipelined(2, num_stages=4, warp_specialize=True):
+                T.mbarrier_wait_parity(tc_bar0[k % 4], k // 4 & 1)
+                T.gemm(As, Bs, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1)
+                if k > 0:
+                    T.mbarrier_arrive(tc_bar1[(k + 3) % 4])
+            T.sync_threads()
+            for i3 in T.Parallel(128, vector_width=1):
+                for i4 in T.Parallel(128, vector_width=2):
+                    acc_shared[i3, i4] = T.Cast("float16", acc[i3, i4])
+            T.tma_copy(acc_shared, C[by * 128, bx * 128], wait_read=False)
+            T.tma_store_wait()
"""),

    # a 64-wide O: its rescale stays after the second GEMM is done (FlashAttention's rule)
    ("overlap_mma", ATTN, "sm_90a", """\
@@ -30 +30,11 @@
-        for k in T.Pipelined(16, num_stages=3, warp_specialize=True):
+        T.mbarrier_wait_parity(tc_bar0, 0)
+        T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True, stage=0)
+        T.mbarrier_arrive(tc_bar1)
+        for i in T.Parallel(64):
+            for j in T.Parallel(64):
+                S[i, j] = T.exp2(S[i, j])
+        for i_1 in T.Parallel(64):
+            for j_1 in T.Parallel(64):
+                acc[i_1, j_1] = acc[i_1, j_1] * T.float32(0.5)
+        T.copy(S, P)
+        for k in T.Pipelined(1, 16, num_stages=3, warp_specialize=True):
@@ -32 +42,3 @@
-            T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True)
+            T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True, wg_wait=1, stage=k % 3)
+            T.mbarrier_wait_parity(tc_bar2[(k - 1) % 3], (k - 1) // 3 & 1)
+            T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1, stage=(k - 1) % 3)
@@ -36,0 +49,2 @@
+            T.wait_wgmma(0)  # after the writes of S
+            T.mbarrier_arrive(tc_bar3[(k - 1) % 3])
@@ -41,3 +55,3 @@
-            T.mbarrier_wait_parity(tc_bar2[k % 3], k // 3 & 1)
-            T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False)
-            T.mbarrier_arrive(tc_bar3[k % 3])
+        T.mbarrier_wait_parity(tc_bar2, 1)
+        T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False, stage=0)
+        T.mbarrier_arrive(tc_bar3)
"""),
]


@pytest.mark.parametrize("name,src,arch,expected", CASES, ids=[c[0] for c in CASES])
def test_pass_changes(name, src, arch, expected):
    assert changes(src, name, arch) == expected


# rescale_before_gemm=True: the rescale of O waits for the next step and runs while its
# first GEMM does, before the second is issued (the default above 128 columns)
OVERLAP_RESCALE_EARLY = """\
@@ -30 +30,8 @@
-        for k in T.Pipelined(16, num_stages=3, warp_specialize=True):
+        T.mbarrier_wait_parity(tc_bar0, 0)
+        T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True, stage=0)
+        T.mbarrier_arrive(tc_bar1)
+        for i in T.Parallel(64):
+            for j in T.Parallel(64):
+                S[i, j] = T.exp2(S[i, j])
+        T.copy(S, P)
+        for k in T.Pipelined(1, 16, num_stages=3, warp_specialize=True):
@@ -32 +39,6 @@
-            T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True)
+            T.gemm(Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True, wg_wait=1, stage=k % 3)
+            for i_1 in T.Parallel(64):
+                for j_1 in T.Parallel(64):
+                    acc[i_1, j_1] = acc[i_1, j_1] * T.float32(0.5)
+            T.mbarrier_wait_parity(tc_bar2[(k - 1) % 3], (k - 1) // 3 & 1)
+            T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False, wg_wait=1, stage=(k - 1) % 3)
@@ -37,3 +49,2 @@
-            for i_1 in T.Parallel(64):
-                for j_1 in T.Parallel(64):
-                    acc[i_1, j_1] = acc[i_1, j_1] * T.float32(0.5)
+            T.wait_wgmma(0)  # after the writes of S
+            T.mbarrier_arrive(tc_bar3[(k - 1) % 3])
@@ -41,3 +52,6 @@
-            T.mbarrier_wait_parity(tc_bar2[k % 3], k // 3 & 1)
-            T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False)
-            T.mbarrier_arrive(tc_bar3[k % 3])
+        for i_1 in T.Parallel(64):
+            for j_1 in T.Parallel(64):
+                acc[i_1, j_1] = acc[i_1, j_1] * T.float32(0.5)
+        T.mbarrier_wait_parity(tc_bar2, 1)
+        T.gemm(P, V_s, acc, transpose_A=False, transpose_B=False, clear_accum=False, stage=0)
+        T.mbarrier_arrive(tc_bar3)
"""


def test_overlap_rescale_before_gemm_option():
    before, _ = before_and_after(ATTN, "overlap_mma", "sm_90a")
    after = PASSES[NAMES.index("overlap_mma")].run(before, "sm_90a", {"rescale_before_gemm": True})
    d = difflib.unified_diff(print_func(before).splitlines(), print_func(after).splitlines(),
                             lineterm="", n=0)
    assert "\n".join(list(d)[2:]) + "\n" == OVERLAP_RESCALE_EARLY


def test_rasterize_keeps_the_order_of_blocks_that_wait_for_each_other():
    """A GEMM whose blocks spin on a flag in global memory (a tile waits for the one
    launched before it) keeps its written block order; without the wait it is rasterized."""
    waits = GEMM_SYM.replace(
        "       C: T.Tensor((M, N), \"float16\")):",
        "       C: T.Tensor((M, N), \"float16\"), Flag: T.Tensor((4096,), \"int32\")):").replace(
        "        T.clear(acc)\n",
        "        T.clear(acc)\n"
        "        while Flag[by] < bx:\n"
        "            T.evaluate(0)\n")
    assert waits != GEMM_SYM and "while Flag" in waits
    plain = print_func(run_passes(T.from_script(GEMM_SYM), "sm_90a", until="rasterize"))
    spin = print_func(run_passes(T.from_script(waits), "sm_90a", until="rasterize"))
    assert "panel_first" in plain and "panel_first" not in spin


def test_deferred_row_sums_only_where_nothing_else_reads_the_sums():
    """The running sum stays whole when l starts at another value than 0, when the loop
    reads l otherwise, when l_step is read elsewhere, or with the option off."""
    def deferred(src, **options):
        text = print_func(run_passes(T.from_script(src), "sm_90a", options))
        return "partial=True" in text, "T.combine_rows(l" in text
    assert deferred(ROWSUM) == (True, True)
    assert deferred(ROWSUM.replace("T.fill(l, 0)", "T.fill(l, 1)")) == (False, False)
    reads_l = ROWSUM.replace("                l[i] = l[i] * T.exp2(-alpha[i]) + l_step[i]",
                             "                l[i] = l[i] * T.exp2(-alpha[i]) + l_step[i]\n"
                             "            for i in T.Parallel(64):\n"
                             "                alpha[i] = alpha[i] + l[i]")
    assert reads_l != ROWSUM and deferred(reads_l) == (False, False)
    reads_step = ROWSUM.replace("            O[i] = l[i]", "            O[i] = l[i] + l_step[i]")
    assert reads_step != ROWSUM and deferred(reads_step) == (False, False)
    assert deferred(ROWSUM, disable_deferred_row_sums=True) == (False, False)


def test_deferred_row_sums_build_and_combine_after_the_loop(tmp_path):
    import tilecute

    tilecute.build_cubin(T.from_script(ROWSUM), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert 'tcrow.reduce_rows(S, l_step, "sum", clear=True, partial=True)' in src
    loop_end = src.index("tcrow.combine_rows(l, tc_l_i, \"sum\", l_step_rows_scratch")
    assert src.rindex("partial=True", 0, loop_end) < loop_end


@pytest.mark.gpu
@pytest.mark.parametrize("deferred", [True, False])
def test_deferred_row_sums_on_gpu(deferred):
    import torch

    import tilecute

    torch.manual_seed(0)
    q = torch.randn(64, 64, device="cuda").half()
    k = torch.randn(1024, 64, device="cuda").half()
    out = torch.empty(64, device="cuda")
    tilecute.compile(T.from_script(ROWSUM),
                     options={"disable_deferred_row_sums": not deferred})(q, k, out)
    s = (q.float() @ k.float().t()).view(64, 8, 128)
    want = torch.zeros(64, device="cuda")
    for step in range(8):
        want = want * torch.exp2(-s[:, step].amax(1)) + s[:, step].sum(1)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-2)


def test_every_pass_has_a_test():
    tested = {c[0] for c in CASES} | {"validate", "assign_tma_descriptors", "vectorize",
                                       "defer_row_sums",
                                       "assign_shared_memory", "choose_index_width", "fast_math",
                                       "programmatic_launch", "scope_safe_values",
                                       "stage_global_loads",  # (tests/test_stage_loads.py)
                                       "fragment_loop_bounds",  # (tests/test_fragment_loop_bounds.py)
                                       "reuse_repeated_loads",  # (tests/test_repeated_loads.py)
                                       "check_hangs"}  # (tests/test_hang_hazards.py)
    assert tested == set(NAMES)


def test_check_hangs_passes_the_lowered_function_through():
    lowered = run_passes(T.from_script(ADD), "sm_90a", until=NAMES[-2])
    assert PASSES[-1].name == "check_hangs" and PASSES[-1].run(lowered, "sm_90a", {}) is lowered


def test_validate_refuses_and_passes_through():
    func = T.from_script(ADD)
    assert PASSES[0].run(func, "sm_90a", {}) is func
    kernel = dataclasses.replace(func.kernels[0], threads=(2048,))
    bad = dataclasses.replace(func, kernels=(kernel,))
    with pytest.raises(ValidationError, match="threads"):
        PASSES[0].run(bad, "sm_90a", {})


def test_choose_index_width_records_64_bit_tensors():
    wide = GEMM.replace("(256, 128)", "(65536, 65536)").replace("(128, 256)", "(65536, 128)")
    before, after = before_and_after(wide, "choose_index_width", "sm_90a")
    assert before.wide_tensors == () and after.wide_tensors == ("A",)  # static, past int32
    _, sym = before_and_after(GEMM_SYM, "choose_index_width", "sm_90a")
    assert sym.wide_tensors == ()  # symbolic: 32-bit unless the option asks
    func = T.from_script(GEMM_SYM)
    choose = PASSES[NAMES.index("choose_index_width")]
    assert choose.run(func, "sm_90a", {"wide_offsets": True}).wide_tensors == ("A", "B", "C")


SCOPED = '''
import tilecute.language as T

@T.prim_func
def scoped(A: T.Tensor((60,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        with T.sblock("pad"):
            T.annotate_safe_value({A: -1.0})
            for i in T.Parallel(64):
                B[i] = A[i]
'''


def test_scope_safe_values_turns_a_block_into_a_view():
    assert changes(SCOPED, "scope_safe_values", "sm_90a") == (
        "@@ -7,4 +7,4 @@\n"
        "-        with T.sblock(\"pad\"):\n"
        "-            T.annotate_safe_value({A: T.float32(-1.0)})\n"
        "-            for i in T.Parallel(64):\n"
        "-                B[i] = A[i]\n"
        "+        T.annotate_safe_value({A_pad: T.float32(-1.0)})\n"
        "+        A_pad = T.view(A, (60,), \"float32\")\n"
        "+        for i in T.Parallel(64):\n"
        "+            B[i] = A_pad[i]\n")


def test_lower_copies_to_tma_leaves_sm_80_alone():
    before, after = before_and_after(GEMM, "lower_copies_to_tma", "sm_80")
    assert after == before


def test_vectorize_records_the_vector_accesses():
    before, after = before_and_after(ADD, "vectorize", "sm_90a")
    (loop,) = [s for s in walk_stmts(after.kernels[0].body) if isinstance(s, N.For)]
    assert loop.vector_width == 8
    assert {(v.buffer, v.chunk) for v in loop.vectors} == {("A", 8), ("B", 8)}
    assert changes(ADD, "vectorize", "sm_90a") == (
        "@@ -7 +7 @@\n"
        "-        for i in T.Parallel(1024):\n"
        "+        for i in T.Parallel(1024, vector_width=8):\n")


def test_assign_tma_descriptors_names_one_per_tensor_and_box():
    before, after = before_and_after(GEMM, "assign_tma_descriptors", "sm_90a")
    assert print_func(after) == print_func(before)  # the printer does not show descriptors
    scope = after.kernels[0]
    assert [(d.name, d.tensor, d.spec.box, d.spec.swizzle) for d in scope.tma_descriptors] == [
        ("A_desc", "A", (128, 64), 128), ("B_desc", "B", (64, 64), 128),
        ("C_desc", "C", (128, 64), 128)]  # the epilogue's TMA store, in 64-column chunks
    copies = [s for s in walk_stmts(scope.body) if isinstance(s, N.TmaCopy)]
    assert {(c.src.buffer, c.dst.buffer, c.desc) for c in copies} == {
        ("A", "As", "A_desc"), ("B", "Bs", "B_desc"), ("acc_shared", "C", "C_desc")}


def test_insert_barriers_orders_buffers_that_share_bytes():
    # the epilogue tile reuses the stages' bytes: every warpgroup's MMAs must be done with
    # them before any thread writes it
    _, after = before_and_after(GEMM_NOWS, "insert_barriers", "sm_90a")
    body = after.kernels[0].body
    (loop,) = [i for i, s in enumerate(body) if isinstance(s, N.For) and s.kind == "pipelined"]
    after = [s for s in body[loop + 1:] if not isinstance(s, N.Allocate)]
    assert isinstance(after[0], N.Barrier)
    assert any(isinstance(s, N.Store) and s.buffer == "acc_shared" for s in walk_stmts(after[1:]))


THREAD_BRANCH = """
@T.prim_func
def k(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        s = T.alloc_shared((128,), "float32")
        tx = T.get_thread_binding()
        g = bx * 128 + tx
        for i in T.Parallel(128):
            s[i] = X[bx * 128 + i]
        if COND:
            Y[g] = s[127 - tx]
"""


@pytest.mark.parametrize("cond", ["g < 200", "tx < 100", "T.get_thread_binding() < 100"])
def test_a_branch_on_the_thread_index_is_ordered_before_it(cond):
    """A branch some threads skip reads what other threads wrote: its barrier goes before
    the ``if``, which every thread reaches.  It went inside (a __syncthreads only some
    threads reach) where the condition read a name bound to the thread index, and nowhere
    where it read the index itself."""
    _, after = before_and_after(THREAD_BRANCH.replace("COND", cond), "insert_barriers", "sm_90a")
    body = [s for s in after.kernels[0].body if not isinstance(s, (N.Allocate, N.Let))]
    assert [type(s).__name__ for s in body] == ["For", "Barrier", "If"], print_func(after)
    assert not any(isinstance(t, N.Barrier) for t in walk_stmts(body[2].then))


def test_a_branch_every_thread_takes_alike_keeps_its_barriers_inside():
    src = THREAD_BRANCH.replace("COND", "bx == 0")
    _, after = before_and_after(src, "insert_barriers", "sm_90a")
    body = [s for s in after.kernels[0].body if not isinstance(s, (N.Allocate, N.Let))]
    assert [type(s).__name__ for s in body] == ["For", "If"], print_func(after)
    assert isinstance(body[1].then[0], N.Barrier)


THREAD_LOOP = """
@T.prim_func
def k(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        s = T.alloc_shared((128,), "int32")
        n = T.alloc_var("int32")
        acc = T.alloc_var("int32")
        n = INIT
        acc = 0
        s[tx] = 0
        LOOP
            s[tx] = s[tx] + 1
            acc += s[(tx + 1) % 128]
            n -= 1
        B[tx] = acc
"""


@pytest.mark.parametrize("init, loop", [
    ("A[tx]", "while n > 0:"),                      # a local holding another value per thread
    ("A[0]", "for t in T.serial(tx, 100, 8):"),     # a range reading the thread index
    ("A[0]", "while n > tx:"),
    ("T.atomic_add(A[0], 1, return_prev=True)", "while n > 0:")])
def test_a_loop_threads_run_differently_often_is_ordered_before_it(init, loop):
    """Threads that leave a loop earlier would not reach a barrier inside it as often as
    the others (a hang): the loop counts as one statement, its barrier before it.  The
    condition of a ``while`` reading a ``T.alloc_var`` given ``A[tx]`` got its barriers
    inside."""
    src = THREAD_LOOP.replace("INIT", init).replace("LOOP", loop)
    _, after = before_and_after(src, "insert_barriers", "sm_90a")
    body = [s for s in after.kernels[0].body if not isinstance(s, (N.Allocate, N.Let))]
    (i,) = [i for i, s in enumerate(body) if isinstance(s, (N.While, N.For))]
    assert isinstance(body[i - 1], N.Barrier), print_func(after)
    assert not any(isinstance(t, N.Barrier) for t in walk_stmts(body[i].body))


def test_a_loop_every_thread_runs_alike_keeps_its_barriers_inside():
    src = THREAD_LOOP.replace("INIT", "A[0]").replace("LOOP", "while n > 0:")
    _, after = before_and_after(src, "insert_barriers", "sm_90a")
    (loop,) = [s for s in after.kernels[0].body if isinstance(s, N.While)]
    assert sum(isinstance(t, N.Barrier) for t in walk_stmts(loop.body)) == 2, print_func(after)


def test_a_branch_on_a_local_given_a_per_thread_value_is_ordered_before_it():
    src = THREAD_BRANCH.replace("COND", "m > 0").replace(
        "g = bx * 128 + tx", "g = bx * 128 + tx\n        m = T.alloc_var('float32')\n"
        "        m = X[g]")
    _, after = before_and_after(src, "insert_barriers", "sm_90a")
    body = [s for s in after.kernels[0].body if isinstance(s, (N.For, N.Barrier, N.If))]
    assert [type(s).__name__ for s in body] == ["For", "Barrier", "If"], print_func(after)


# TileLang's issue 1257: a barrier between an atomic on shared memory and a later read of
# the buffer by other threads (TileLang's test counts two __syncthreads in the CUDA source).
SHARED_ATOMIC = """
@T.prim_func
def k(out: T.Tensor((256,), "int32"), idx: T.Tensor((256,), "int32")):
    with T.Kernel(1, threads=256) as bx:
        hist = T.alloc_shared((256,), "int32")
        tx = T.get_thread_binding(0)
        hist[(tx + 3) % 256] = 0
        ATOMIC
        out[tx] = hist[(tx + 64) % 256]
"""


@pytest.mark.parametrize("atomic,kind", [
    ("T.atomic_add(hist[tx], 2)", "AtomicAdd"),
    ("T.atomic_max(hist[idx[tx] % 256], 2)", "AtomicAdd"),
    ("v = T.atomic_add(hist[tx], 2, return_prev=True)", "Let"),
    ("for i in T.Parallel(256):\n            T.atomic_add(hist[i], 2)", "For")])
def test_a_shared_atomic_is_ordered_before_other_threads_read(atomic, kind):
    """The atomic writes the buffer other threads read after it: a barrier between them
    (and one between the first writes and the atomic), as TileLang's sync pass puts."""
    before, after = before_and_after(SHARED_ATOMIC.replace("ATOMIC", atomic), "insert_barriers",
                                     "sm_90a")
    body = after.kernels[0].body
    init = next(i for i, s in enumerate(body) if isinstance(s, N.Store))  # hist[...] = 0
    kinds = [type(s).__name__ for s in body[init + 1:]]
    assert kinds == ["Barrier", kind, "Barrier", "Store"], print_func(after)
    assert not any(isinstance(s, N.Barrier) for s in walk_stmts(before.kernels[0].body))


def test_a_shared_atomic_in_a_loop_is_ordered_both_ways():
    """Reads of one iteration and atomics of the previous one, reads and atomics of one."""
    src = SHARED_ATOMIC.replace("ATOMIC", "for r in T.serial(4):\n"
                                "            out[tx] = hist[(tx + r) % 256]\n"
                                "            T.atomic_add(hist[idx[tx] % 256], 1)")
    _, after = before_and_after(src, "insert_barriers", "sm_90a")
    (loop,) = [s for s in after.kernels[0].body if isinstance(s, N.For)]
    assert [type(s).__name__ for s in loop.body] == ["Barrier", "Store", "Barrier", "AtomicAdd"], \
        print_func(after)


def test_a_shared_atomic_gets_block_barriers_in_the_generated_source():
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    src = emit_cute(lower(T.from_script(SHARED_ATOMIC.replace("ATOMIC", "T.atomic_add(hist[tx], 2)")),
                          "sm_90a"))
    body = src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]
    lines = [line.strip() for line in body.splitlines()]
    at = next(i for i, line in enumerate(lines) if line.startswith("tca.atomic_add(hist"))
    assert lines[at - 1] == lines[at + 1] == "cute.arch.sync_threads()", body
    assert body.count("cute.arch.sync_threads()") == 2


@pytest.mark.gpu
def test_a_shared_atomic_is_read_after_it_on_gpu():
    import torch

    import tilecute

    idx = torch.arange(256, dtype=torch.int32, device="cuda")
    for atomic in ("T.atomic_add(hist[tx], 2)",
                   "for i in T.Parallel(256):\n            T.atomic_add(hist[i], 2)"):
        out = torch.full((256,), -1, dtype=torch.int32, device="cuda")
        tilecute.compile(T.from_script(SHARED_ATOMIC.replace("ATOMIC", atomic)))(out, idx)
        assert out.tolist() == [2] * 256


def test_assign_shared_memory_places_stages_and_checks_the_arch_limit():
    _, after = before_and_after(GEMM, "assign_shared_memory", "sm_90a")
    scope = after.kernels[0]
    slots = {s.buffer.name: s.slot for s in scope.body if isinstance(s, N.Allocate) and s.slot}
    # four 16 KiB stages each for As and Bs (1024-aligned, swizzled); the epilogue's tile,
    # alive only after the main loop, on the bytes of As's stages; then the mbarriers,
    # alive throughout
    assert (slots["As"].offset, slots["As"].stride, slots["As"].align) == (0, 16384, 1024)
    assert (slots["Bs"].offset, slots["Bs"].stride) == (65536, 16384)
    assert (slots["acc_shared"].offset, slots["acc_shared"].stride) == (0, 32768)
    assert slots["tc_bar0"].offset == 131072 and slots["tc_bar0"].align == 128
    assert scope.shared_bytes == slots["tc_bar1"].offset + 32
    big = """
@T.prim_func
def big(A: T.Tensor((51200,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((51200,), "float32")
        T.copy(A[0], s)
        T.copy(s, A[0])
"""  # 200 KiB of shared memory: a Hopper block may have it, an sm_80 one may not
    assert run_passes(T.from_script(big), "sm_90a").kernels[0].shared_bytes == 204800
    with pytest.raises(SharedMemoryError, match=r"needs 204800 bytes .* at most 166912 on sm_80"):
        run_passes(T.from_script(big), "sm_80")


SIDE_BY_SIDE = """
@T.prim_func
def halves(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
           C: T.Tensor((128, 128), "float16")):
    with T.Kernel(1, threads=256) as bx:
        a_s = T.alloc_shared((128, 64), "float16")
        left = T.alloc_shared((64, 64), "float16")
        right = T.alloc_shared((64, 64), "float16")
        acc_l = T.alloc_fragment((128, 64), "float32")
        acc_r = T.alloc_fragment((128, 64), "float32")
        T.copy(A, a_s)
        FIRST
        SECOND
        with T.ws(0):
            T.copy(acc_l, C[0, 0])
        with T.ws(1):
            T.copy(acc_r, C[0, 64])
"""
_LEFT = """with T.ws(0):
            T.copy(B[0, 0], left)
            T.gemm(a_s, left, acc_l, clear_accum=True)"""
_RIGHT = """with T.ws(1):
            T.copy(B[0, 64], right)
            T.gemm(a_s, right, acc_r, clear_accum=True)"""


@pytest.mark.parametrize("first, second", [(_LEFT, _RIGHT), (_RIGHT, _LEFT)])
def test_buffers_of_side_by_side_ws_regions_never_share_bytes(first, second):
    """Two T.ws regions in a row run at the same time on their own warpgroups (no block
    barrier between them): 'left' and 'right', each used in one of them only, must not be
    placed on the same bytes (they were: sequential lifetimes, one half of C wrong)."""
    src = SIDE_BY_SIDE.replace("FIRST", first).replace("SECOND", second)
    _, after = before_and_after(src, "assign_shared_memory", "sm_90a")
    slots = {s.buffer.name: s.slot for s in after.kernels[0].body
             if isinstance(s, N.Allocate) and s.slot}
    spans = {b: (slots[b].offset, slots[b].offset + 64 * 64 * 2) for b in ("left", "right")}
    assert spans["left"][1] <= spans["right"][0] or spans["right"][1] <= spans["left"][0], spans


@pytest.mark.gpu
def test_side_by_side_ws_regions_compute_both_halves_on_gpu():
    import torch

    import tilecute

    func = T.from_script(SIDE_BY_SIDE.replace("FIRST", _LEFT).replace("SECOND", _RIGHT))
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    c = tilecute.compile(func, out_idx=[-1])(a, b)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), atol=5e-2, rtol=1e-2)


def test_buffers_of_ws_regions_in_sequence_may_share_bytes():
    """Two regions on the same warpgroup run one after the other (the barrier pass puts a
    block barrier before the second where it needs one), so their buffers may share bytes;
    the stores' regions (warpgroups 0 and 1) are the one side-by-side run."""
    from tilecute.transform.shared_memory import side_by_side_runs

    second = _LEFT.replace("left", "right").replace("B[0, 0]", "B[0, 64]")  # T.ws(0) again
    src = SIDE_BY_SIDE.replace("FIRST", _LEFT).replace("SECOND", second)
    _, after = before_and_after(src, "assign_shared_memory", "sm_90a")
    body = after.kernels[0].body
    regions = [i for i, s in enumerate(body) if isinstance(s, N.WarpGroups)]
    assert side_by_side_runs(body) == [(regions[2], regions[3])]
    slots = {s.buffer.name: s.slot for s in body if isinstance(s, N.Allocate) and s.slot}
    assert slots["left"].offset == slots["right"].offset


def test_overlap_mma_off_and_where_it_does_not_apply():
    """The option keeps the loop as written, and a loop
    where a statement free of the second GEMM's registers (S *= 2) must stay after one
    tied to them (P = S) is not split."""
    func = T.from_script(ATTN)
    before, after = before_and_after(ATTN, "overlap_mma", "sm_90a")
    off = PASSES[NAMES.index("overlap_mma")].run(before, "sm_90a", {"disable_mma_overlap": True})
    assert print_func(off) == print_func(before) != print_func(after)
    tangled = ATTN.replace("            T.copy(S, P)\n",
                           "            T.copy(S, P)\n            for i, j in T.Parallel(64, 64):\n"
                           "                S[i, j] = S[i, j] * 2.0\n")
    assert "T.wait_wgmma" not in print_func(run_passes(T.from_script(tangled), "sm_90a"))
    assert "T.wait_wgmma(0)" in print_func(after)


def test_overlapped_attention_builds(tmp_path):
    """The overlapped loop compiles to an sm_90a cubin (each GEMM names its stage)."""
    import tilecute
    info = tilecute.build_cubin(T.from_script(ATTN), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "tcm.wait_batches(0, after=S)" in src and "tcm.fence_registers(S)" in src
    assert info.kernel_names


def test_the_wait_for_the_second_gemm_is_anchored_after_the_softmax(tmp_path):
    """The steady step's wait for G2 names the float32 fragment the softmax writes last
    (the attention example's row sum l), so ptxas keeps it after the exponentials; the
    option ``disable_wait_anchor`` leaves it bare.  Both build (sm_90a)."""
    import tilecute
    from tilecute.runtime.cute.mma import ANCHOR_BARRIER

    func = T.from_script(ATTN)
    anchored = print_func(run_passes(func, "sm_90a"))
    bare = print_func(run_passes(func, "sm_90a", {"disable_wait_anchor": True}))
    assert "T.wait_wgmma(0)  # after the writes of S" in anchored
    assert "after the writes" not in bare and "T.wait_wgmma(0)" in bare
    for options, expect in (({}, "tcm.wait_batches(0, after=S)"),
                            ({"disable_wait_anchor": True}, "tcm.wait_batches(0)\n")):
        out = tmp_path / str(len(options))
        info = tilecute.build_cubin(func, "sm_90a", out_dir=str(out), options=options)
        assert info.kernel_names and expect in (out / "kernel_cute.py").read_text()
    assert ANCHOR_BARRIER == 15


def test_pingpong_where_the_second_gemm_is_narrow():
    """Two compute warpgroups take turns by default where the second GEMM's accumulator is
    at most 128 wide (here 64), not with disable_warpgroup_pingpong."""
    wide = ATTN.replace("threads=128", "threads=256").replace("Q: T.Tensor((128, 64)", "Q: T.Tensor((256, 64)")
    for name in ("Q_s", "S", "P", "acc"):
        wide = wide.replace(f"{name} = T.alloc_shared((64, 64)", f"{name} = T.alloc_shared((128, 64)") \
            .replace(f"{name} = T.alloc_fragment((64, 64)", f"{name} = T.alloc_fragment((128, 64)")
    wide = wide.replace("T.Parallel(64, 64)", "T.Parallel(128, 64)").replace("Q[bx * 64", "Q[bx * 128") \
        .replace("O[bx * 64", "O[bx * 128")
    plain = print_func(run_passes(T.from_script(wide), "sm_90a",
                                  {"disable_warpgroup_pingpong": True}))
    turns = print_func(run_passes(T.from_script(wide), "sm_90a"))
    assert turns == print_func(run_passes(T.from_script(wide), "sm_90a",
                                          {"warpgroup_pingpong": True}))
    assert "T.wait_wgmma(0)" in plain and "named_barrier" not in plain
    assert "T.named_barrier_sync(2 + T.get_thread_binding(0) // 128, 256)" in turns
    assert "T.named_barrier_arrive(3 - T.get_thread_binding(0) // 128, 256)" in turns


def test_one_stage_pipeline_issues_its_load_before_waiting():
    """T.Pipelined(num_stages=1) over TMA loads and a wgmma T.gemm: the step's own load
    is issued before the step waits for it (it was issued after the gemm, for a step that
    had already waited: the kernel hung on the GPU)."""
    src = GEMM_SYM.replace("num_stages=3", "num_stages=1").replace("num_stages=2", "num_stages=1")
    assert "num_stages=1" in src
    text = print_func(run_passes(T.from_script(src), "sm_90a"))
    loop = text[text.index("T.Pipelined("):]
    assert loop.index("T.tma_copy(") < loop.index("T.mbarrier_wait_parity(")
    assert "wg_wait=1" not in loop


PIPELINED_ATTN = """
@T.prim_func
def attn(Q: T.Tensor((128, 64), "float16"), K: T.Tensor((1024, 64), "float16"),
         V: T.Tensor((1024, 64), "float16"), O: T.Tensor((128, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        Q_s = T.alloc_shared((64, 64), "float16")
        K_s = T.alloc_shared((64, 64), "float16")
        V_s = T.alloc_shared((64, 64), "float16")
        S = T.alloc_fragment((64, 64), "float32")
        P = T.alloc_fragment((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(Q[bx * 64, 0], Q_s)
        T.clear(acc)
        for k in T.Pipelined(16, num_stages=2, order=ORDER, stage=STAGE,
                             group=[[0], [1], [2, 3], [4], [5], [6]]):
            T.copy(K[k * 64, 0], K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                S[i, j] = T.exp2(S[i, j])
            for i, j in T.Parallel(64, 64):
                acc[i, j] *= 0.5
            T.copy(S, P)
            T.copy(V[k * 64, 0], V_s)
            T.gemm(P, V_s, acc)
        T.copy(acc, O[bx * 64, 0])
"""


def test_tilelangs_pipelined_attention_schedule_is_the_mma_overlap():
    """TileLang's way of asking for the overlap (stage/order/group on T.Pipelined: the
    first GEMM in stage 0 and first, the cast and the second GEMM in stage 1 before the
    softmax) is honored with its 2 stages; another order is refused by name."""
    src = PIPELINED_ATTN.replace("ORDER", "[-1, 0, 3, 1, -1, 2]").replace("STAGE", "[-1, 0, 0, 1, -1, 1]")
    func = T.from_script(src)
    loop = [s for s in func.kernels[0].body if isinstance(s, N.For) and s.kind == "pipelined"][0]
    assert loop.overlap_mma and loop.num_stages == 2
    text = print_func(run_passes(func, "sm_90a"))
    assert "T.wait_wgmma(0)" in text and "stage=(k - 1) % 2" in text
    off = print_func(run_passes(func, "sm_90a", {"disable_mma_overlap": True}))
    assert "T.wait_wgmma(0)" in off  # the program's request wins over the default's switch
    bad = PIPELINED_ATTN.replace("ORDER", "[-1, 0, 1, 3, -1, 2]").replace("STAGE", "[-1, 0, 0, 1, -1, 1]")
    with pytest.raises(Exception, match=r"T.Pipelined: order=.*not supported"):
        T.from_script(bad)


def test_a_clear_before_the_first_gemm_is_its_clear_accum():
    """TileLang's attention writes ``T.clear(S); T.gemm(Q_s, K_s, S)`` (group [1, 2]);
    that is the first GEMM with clear_accum, so the overlap schedule is honored (it was an
    OverlapError: 'not of that form'), the clear folded into the GEMM."""
    src = PIPELINED_ATTN.replace("ORDER", "[-1, 0, 3, 1, -1, 2]").replace("STAGE", "[-1, 0, 0, 1, -1, 1]")
    src = src.replace("group=[[0], [1], [2, 3], [4], [5], [6]]", "group=[[0], [1, 2], [3, 4], [5], [6], [7]]")
    src = src.replace("T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)",
                      "T.clear(S)\n            T.gemm(Q_s, K_s, S, transpose_B=True)")
    assert "T.clear(S)" in src
    text = print_func(run_passes(T.from_script(src), "sm_90a"))
    assert "T.wait_wgmma(0)" in text and "stage=(k - 1) % 2" in text
    assert "T.clear(S)" not in text and "Q_s, K_s, S, transpose_A=False, transpose_B=True, clear_accum=True" in text


def test_overlap_mma_round_trips_through_the_printer():
    src = PIPELINED_ATTN.replace("ORDER", "[-1, 0, 3, 1, -1, 2]").replace("STAGE", "[-1, 0, 0, 1, -1, 1]")
    func = T.from_script(src)
    assert "overlap_mma=True" in print_func(func) and T.from_script(print_func(func)) == func


def test_fast_math_takes_the_approximate_intrinsics(tmp_path):
    """fast_math: exp2/exp/log2/log become their ftz approximations (what the code
    generator prints as cute.math.exp2(..., approx=True, ftz=True)); off, they stay."""
    import tilecute

    src = ADD.replace("B[i] = A[i] + A[i]", "B[i] = T.exp2(A[i]) + T.exp(A[i]) + T.log2(A[i]) + T.log(A[i])")
    func = T.from_script(src)
    on = print_func(run_passes(func, "sm_90a", {"fast_math": True}))
    assert "T.exp2_approx(" in on and "T.exp_approx(" in on and "T.log_approx(" in on
    assert "approx" not in print_func(run_passes(func, "sm_90a"))
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path), options={"fast_math": True})
    assert info.kernel_names
    assert "approx=True, ftz=True" in (tmp_path / "kernel_cute.py").read_text()


def test_fast_math_divides_by_the_approximate_reciprocal(tmp_path):
    """fast_math: float32 division is nvcc --use_fast_math's (__fdividef: x times
    rcp.approx.ftz of y); integer floordiv and float16 division stay; off, it stays."""
    import tilecute

    src = ADD.replace("B[i] = A[i] + A[i]", "B[i] = A[i] / (A[i] + T.float32(1))")
    half = T.from_script(src.replace("T.float32(1)", "T.float16(1)"))
    assert "div_approx" not in print_func(run_passes(half, "sm_90a", {"fast_math": True}))
    func = T.from_script(src.replace('"float16"', '"float32"'))
    on = print_func(run_passes(func, "sm_90a", {"fast_math": True}))
    assert "T.div_approx(A[i], A[i] + T.float32(1.0))" in on, on
    assert "div_approx" not in print_func(run_passes(func, "sm_90a"))
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path), options={"fast_math": True})
    assert info.kernel_names
    assert "] * cute.arch.rcp_approx(" in (tmp_path / "kernel_cute.py").read_text()


@pytest.mark.gpu
def test_fast_math_division_on_gpu():
    import torch

    import tilecute

    src = ADD.replace("B[i] = A[i] + A[i]", "B[i] = A[i] / (A[i] * A[i] + T.float32(0.5))")
    src = src.replace('"float16"', '"float32"')
    a = torch.randn(1024, device="cuda") * 100
    out = torch.empty_like(a)
    tilecute.compile(T.from_script(src), options={"fast_math": True})(a, out)
    torch.testing.assert_close(out, a / (a * a + 0.5), rtol=4e-7, atol=0)


def test_pdl_marks_kernels_and_reaches_the_launcher_and_the_kernel(tmp_path, monkeypatch):
    """Option pdl: KernelScope.pdl, the ABI's kernel `pdl`, the launcher's KernelInfo (and
    its programmatic-stream-serialization branch), griddepcontrol in the kernel; the
    launcher builds; sm_80 refuses it by name; without the option nothing changes."""
    import tilecute
    from tilecute.options import OptionError

    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    func = T.from_script(ADD)
    assert not any(k.pdl for k in run_passes(func, "sm_90a").kernels)
    k = tilecute.compile(func, target="sm_90a", options={"pdl": True})
    assert [kl.pdl for kl in k.abi.kernels] == [True]
    info = '{ "tilecute_add_0", { "1", "1", "1" }, { 128, 1, 1 }, { 0, 0, 0 }, 0, false, false, '  # KernelInfo
    assert info + "true, false }" in k.get_source("launcher")  # .pdl (then .cooperative)
    assert "cute.arch.griddepcontrol_wait()" in k.get_source("cute")
    assert Path(k.ensure_cubin()).stat().st_size > 0
    assert info + "false, false }" in tilecute.compile(func, target="sm_90a").get_source("launcher")
    with pytest.raises(OptionError, match="option pdl .* needs sm_90 or later; the target is sm_80"):
        tilecute.compile(func, target="sm_80", options={"pdl": True})


def test_separate_pipelines_let_two_stages_overlap():
    """K and V, first used by different GEMMs, get a pipeline each (FlashAttention's): the
    compute loop waits for V only before the second GEMM and releases K's stage as soon as
    the first is done, so the MMA overlap applies with 2 stages too; a GEMM's A and B, used
    by the same statement, keep one pipeline."""
    two = ATTN.replace("num_stages=3", "num_stages=2")
    script = print_func(run_passes(T.from_script(two), "sm_90a"))
    assert "T.wait_wgmma(0)" in script
    waits = [ln.strip() for ln in script.splitlines() if "mbarrier_wait_parity(tc_bar" in ln]
    assert any("tc_bar0[k % 2]" in w for w in waits) and any("tc_bar2[(k - 1) % 2]" in w for w in waits)
    gemm = print_func(run_passes(T.from_script(GEMM_SYM), "sm_90a"))
    assert "tc_bar2" not in gemm.replace("tc_bar2 = T.alloc_barrier(1)", "")


TWO_GEMMS = """
@T.prim_func
def two(A: T.Tensor((128, 512), "float16"), B: T.Tensor((128, 512), "float16"),
        A2: T.Tensor((128, 64), "float16"), B2: T.Tensor((128, 64), "float16"),
        C: T.Tensor((128, 128), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((128, 512), "float16")
        A2_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((128, 512), "float16")
        B2_s = T.alloc_shared((128, 64), "float16")
        S = T.alloc_fragment((128, 128), "float32")
        S2 = T.alloc_fragment((128, 128), "float32")
        T.copy(A[0, 0], A_s)
        T.copy(A2[0, 0], A2_s)
        T.clear(S2)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(B[0, 0], B_s)
            T.copy(B2[0, 0], B2_s)
            T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
            T.gemm(A2_s, B2_s, S, transpose_B=True)
            BETWEEN
            T.gemm(A_s, B_s, S2, transpose_B=True)  # (B_s's stage is released after it)
        T.copy(S, C[0, 0])
"""


def test_chain_batches_keeps_the_first_gemm_in_flight():
    # the wait for B2's tile stands between the two GEMMs into S: the first stays in flight
    _, after = before_and_after(TWO_GEMMS.replace("BETWEEN", "pass"), "overlap_mma", "sm_90a")
    gemms = [s for k in after.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
    assert [(g.c, g.wg_wait) for g in gemms] == [("S", 1), ("S", 0), ("S2", 0)]


def test_chain_batches_not_across_a_statement_between():
    src = TWO_GEMMS.replace("            T.gemm(A2_s", "            S[0, 0] = 1.0\n            T.gemm(A2_s") \
        .replace("BETWEEN", "pass")
    _, after = before_and_after(src, "overlap_mma", "sm_90a")
    gemms = [s for k in after.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
    assert [g.wg_wait for g in gemms] == [0, 0, 0]


ROWS_ACROSS = """
@T.prim_func
def rows(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 128), "float16"),
         M: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        A_s = T.alloc_shared((64, 128), "float16")
        B_s = T.alloc_shared((128, 128), "float16")
        S = T.alloc_fragment((64, 128), "float32")
        m = T.alloc_fragment((64,), "float32")
        l = T.alloc_fragment((64,), "float32")
        T.fill(m, -T.infinity("float32"))
        T.copy(A[0, 0], A_s)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(S, m, dim=1, clear=False)
            SECOND
        T.copy(m, M[0])
"""


def _reduces(src):
    f = run_passes(T.from_script(src), "sm_90a", until="insert_barriers")
    return [(s.dst, s.sync_after) for k in f.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Reduce)]


def test_row_exchange_keeps_its_second_barrier_when_nothing_else_syncs():
    # one exchange per step and no other barrier in the loop: it meets itself again
    assert _reduces(ROWS_ACROSS.replace("SECOND", "pass")) == [("m", True)]


def test_row_exchange_second_barrier_left_to_the_next_exchange():
    # the row sum's first barrier orders the row max's scratch reads, and the next step's
    # row max's first barrier the row sum's (each writes only its own scratch before it)
    got = _reduces(ROWS_ACROSS.replace("SECOND", "T.reduce_sum(S, l, dim=1)"))
    assert got == [("m", False), ("l", False)]


TRANSPOSED_NEST = """
@T.prim_func
def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
      s: T.Tensor((64,), "float32"), C: T.Tensor((64, 64), "float32"),
      X: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        x = T.alloc_fragment((64, 64), "float32")
        sc = T.alloc_fragment((64,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.gemm(A_s, B_s, acc, clear_accum=True)
        T.copy(s, sc)
        for j, i in T.Parallel(64, 64):
            acc[i, j] = acc[i, j] * sc[j]
        for j, i in T.Parallel(64, 64):
            x[i, j] = X[i, j] + 1.0
        T.copy(acc, C)
        T.copy(x, X)
"""


def test_a_parallel_nest_walks_its_fragments_in_their_dims_order():
    """``for j, i in T.Parallel(N, M): acc[i, j] ...``: TileLang lays the loop out by the
    fragment it walks, whatever its variables' order; the nest is reordered to (i, j).  It
    was a LayoutError for an accumulator ('read across threads') and made an ordinary
    fragment replicated (every thread holding all of it)."""
    text = print_func(run_passes(T.from_script(TRANSPOSED_NEST), "sm_90a", until="infer_layouts"))
    assert "for i in T.Parallel(64, vector_width=1):\n            for j in T.Parallel(64, vector_width=2):\n" \
        "                acc[i, j] = acc[i, j] * sc[j]" in text, text
    assert "for i_1 in T.Parallel(64, vector_width=1):\n            for j_1 in T.Parallel(64, vector_width=4):\n" \
        "                x[i_1, j_1] = X[i_1, j_1]" in text, text
    assert 'x = T.alloc_fragment((64, 64), "float32", layout=T.Layout("blocked"' in text, text


def test_an_allocation_inside_a_parallel_nest_is_refused_by_name():
    """A fragment allocated in a T.Parallel body (the block's buffer, not an iteration's)
    was a KeyError in the layout pass; it is refused, naming the buffer and line.  (A
    ``T.alloc_var`` there is each iteration's scalar: hoist_parallel_locals moves it before
    the nest.)"""
    from tilecute.transform.layout_inference import LayoutError
    src = """
@T.prim_func
def k(A: T.Tensor((128,), "int32"), W: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            acc = T.alloc_fragment((128,), "int32")
            acc[i] = A[i] * 2
            W[i] = acc[i] + 1
"""
    with pytest.raises(LayoutError, match=r":6: .*fragment buffer 'acc' \(T.alloc_\*\) allocated "
                                          r"inside a T.Parallel loop"):
        before_and_after(src, "infer_layouts", "sm_90a")
    local = src.replace('T.alloc_fragment((128,), "int32")', 'T.alloc_var("int32")') \
        .replace("acc[i]", "acc")
    assert before_and_after(local, "infer_layouts", "sm_90a")[1] is not None


@pytest.mark.parametrize("program", ["constant", "symbolic"])
def test_first_turn_opens_before_any_warpgroup_waits_for_it(program):
    """The warpgroups' turns (overlap_mma): the last warpgroup's opening arrive comes before
    the first wait for a turn in program order, wherever the first step stands (a constant
    extent splices the first step to the top level, before the steady loop; a symbolic
    one keeps it in an if); else warpgroup 0's first wait never ends (a hang on the GPU)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    if program == "constant":
        import unseen_programs2 as U
        func = U.flash_attn_overlap()
    else:
        import attention as A
        func = A.flash_attention(4, 128, 4, False, "float16", persistent=True, sms=8)
    body = run_passes(func, "sm_90a", {}).kernels[0].body
    named = [s for s in walk_stmts(body) if isinstance(s, N.NamedBarrier) and not s.program]
    opens = [i for i, s in enumerate(named) if s.arrive and isinstance(s.barrier_id, N.Const)]
    waits = [i for i, s in enumerate(named) if not s.arrive]
    assert len(opens) == 1 and waits and opens[0] < waits[0]


def test_fresh_name_skips_taken_names_in_each_spelling():
    from tilecute.transform.analysis import fresh_name

    taken = {"x", "x_1", "y", "tc_bar0", "z", "z_2"}
    assert fresh_name(taken, "x") == "x_2"  # stage_loads, scope_safe_values
    assert fresh_name(taken, "y", sep="") == "y1"  # accumulator_views, rasterize
    assert fresh_name(taken, "tc_bar", sep="", first=0, bare=False) == "tc_bar1"  # mbarriers
    assert fresh_name(taken, "z", first=2) == "z_3"  # tma_copies
    assert fresh_name(taken, "w") == "w"
    assert {"x_2", "y1", "tc_bar1", "z_3", "w"} <= taken  # each is taken from now on
    assert fresh_name(taken, "w") == "w_1"


def test_the_architecture_doc_lists_every_pass_in_order():
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| [0-9][0-9a-z]* \| `(\w+)` \|", doc, re.M)
    assert rows == NAMES
    assert f"PASSES ({len(NAMES)} passes)" in doc
