"""A twenty-ninth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): how kernels are built on the Python side in real repositories.

Factories with keyword-only parameters and defaults; dtypes given as strings, as ``T.float16``
and as torch dtypes; shapes computed in Python (tuples, ``math.prod``, ``//``, ``max``,
conditional expressions); tunables read from a dict of configs; ``pass_configs``.  Trace-time
Python: ``for`` over Python lists and tuples (unrolled), ``if`` on Python bools (the dead
branch never traced), list comprehensions producing shapes, ``zip`` / ``enumerate``, buffers
held in Python lists, tuples and dicts.  ``T.macro`` with defaults, keyword arguments,
buffers as arguments, macros calling macros, macros returning values, macros closing over
factory parameters.  prim_funcs built by helper functions; parameters whose shapes mix
``T.dynamic`` / ``T.symbolic`` / ``T.var`` with constants; ``threads=`` as a tuple or list;
``T.annotate_layout`` from a dict comprehension; ``T.use_swizzle``.  Ports of Triton kernels:
flat 1-D storage with manual index math, masks through ``T.if_then_else``, ``T.max(x, 0)``,
``T.clamp``, flat storage reinterpreted with ``T.view`` / ``T.reshape``.

``tests/test_unseen_programs29.py`` builds each to a cubin on the CPU, checks what matters in
the generated source, and on a GPU compares it with a torch reference."""

import math

import torch

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- factories: keyword-only parameters, dtype spellings, Python-computed shapes -------------
@tilecute.jit(out_idx=[-1])
def bias_act_rows(M=256, N=512, *, dtype="float16", act="relu", block_M=32, block_N=128, with_bias=True):
    """y = act(x + b) over (M, N) tiles; the activation picked by a Python string, the bias
    dropped by a Python bool (the prim_func's signature changes with it)."""
    accum = "float32"

    def activate(v):
        if act == "relu":
            return T.max(v, 0)
        elif act == "silu":
            return v / (1.0 + T.exp(-v))
        return v

    if with_bias:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), B: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                for i, j in T.Parallel(block_M, block_N):
                    v = T.cast(X[by * block_M + i, bx * block_N + j], accum) + T.cast(B[bx * block_N + j], accum)
                    Y[by * block_M + i, bx * block_N + j] = T.cast(activate(v), dtype)
    else:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                for i, j in T.Parallel(block_M, block_N):
                    v = T.cast(X[by * block_M + i, bx * block_N + j], accum)
                    Y[by * block_M + i, bx * block_N + j] = T.cast(activate(v), dtype)

    return main


_GEMM_CONFIGS = {
    "small": {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 2, "threads": 128},
    "large": {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3, "threads": 256},
}


@tilecute.jit(out_idx=[-1], pass_configs={"tl.disable_warp_specialized": True})
def gemm_from_config(M=256, N=256, K=256, *, config="small", in_dtype=T.float16, out_dtype=T.float16, swizzle_panel=4):
    """C = A @ B with the tile sizes taken from a dict of named configs, T.use_swizzle's panel
    from a keyword and the output dtype a T.* dtype object."""
    cfg = _GEMM_CONFIGS[config]
    bm, bn, bk = cfg["block_M"], cfg["block_N"], cfg["block_K"]

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=cfg["threads"]) as (bx, by):
            A_s = T.alloc_shared((bm, bk), in_dtype)
            B_s = T.alloc_shared((bk, bn), in_dtype)
            C_f = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(swizzle_panel, "column")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=cfg["num_stages"]):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[-1])
def torch_dtype_rmsnorm(M=64, N=1024, *, dtype=torch.bfloat16, eps=1e-6, rows_per_block=None):
    """RMSNorm with the dtype given as a torch dtype, the rows per block derived in Python
    (max(1, 4096 // N) unless given) and the weight held in float32."""
    rb = rows_per_block if rows_per_block is not None else max(1, 4096 // N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rb), threads=128) as bx:
            x_f = T.alloc_fragment((rb, N), T.float32)
            sq = T.alloc_fragment((rb, N), T.float32)
            ss = T.alloc_fragment((rb,), T.float32)
            T.copy(X[bx * rb, 0], x_f)
            for i, j in T.Parallel(rb, N):
                sq[i, j] = x_f[i, j] * x_f[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(rb):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(rb, N):
                x_f[i, j] = x_f[i, j] * ss[i] * W[j]
            T.copy(x_f, Y[bx * rb, 0])

    return main


@tilecute.jit(out_idx=[1])
def prod_flatten_scale(shape=(4, 6, 32, 16), *, block=256, scale=0.5, dtype="float32"):
    """An N-D tensor handled as one flat run: the length is math.prod(shape), the parameter
    reshaped inside the kernel with T.reshape."""
    total = math.prod(shape)
    grid = (total + block - 1) // block

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(grid, threads=block) as bx:
            xf = T.reshape(X, [total])
            yf = T.reshape(Y, [total])
            for i in T.Parallel(block):
                g = bx * block + i
                if g < total:
                    yf[g] = xf[g] * scale + T.cast(g % shape[-1], dtype)

    return main


@tilecute.jit(out_idx=[-1])
def conditional_tiles_colsum(M=256, N=1024, *, dtype="float16"):
    """Column sums with tile sizes chosen by conditional expressions (block_N from N, rows
    per step from M) and a grid computed in Python."""
    block_N = 128 if N >= 1024 else 64
    block_M = min(M, 64)
    steps = M // block_M
    grid = N // block_N

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((N,), T.float32)):
        with T.Kernel(grid, threads=128) as bx:
            x_f = T.alloc_fragment((block_M, block_N), T.float32)
            part = T.alloc_fragment((block_N,), T.float32)
            acc = T.alloc_fragment((block_N,), T.float32)
            T.clear(acc)
            for k in T.serial(steps):
                T.copy(X[k * block_M, bx * block_N], x_f)
                T.reduce_sum(x_f, part, dim=0)
                for j in T.Parallel(block_N):
                    acc[j] += part[j]
            T.copy(acc, S[bx * block_N])

    return main


# ---- trace-time Python control flow ---------------------------------------------------------
@tilecute.jit(out_idx=[1])
def stencil_python_taps(N=4096, *, taps=(0.25, 0.5, 0.25), block=128):
    """y[i] = sum_t taps[t] * x[i + t - r] with zero padding; the taps a Python tuple walked
    by enumerate (unrolled), the edges masked with T.if_then_else."""
    r = len(taps) // 2

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                g = bx * block + i
                acc = T.alloc_var(T.float32, init=0.0)
                for t, w in enumerate(taps):
                    src = g + (t - r)
                    acc += w * T.if_then_else((src >= 0) & (src < N), X[src], T.float32(0))
                Y[g] = acc

    return main


@tilecute.jit(out_idx=[3])
def concat_widths_zip(M=128, *, widths=(64, 32, 96), block_M=32, dtype="float16"):
    """out = cat([x0, x1, x2], dim=1): the three inputs held in a tuple and zipped with their
    widths and column offsets computed by a list comprehension."""
    offsets = [sum(widths[:i]) for i in range(len(widths))]
    total = sum(widths)

    @T.prim_func
    def main(X0: T.Tensor((M, widths[0]), dtype), X1: T.Tensor((M, widths[1]), dtype),
             X2: T.Tensor((M, widths[2]), dtype), Y: T.Tensor((M, total), dtype)):
        with T.Kernel(M // block_M, threads=128) as bx:
            srcs = (X0, X1, X2)
            tiles = [T.alloc_shared((block_M, w), dtype) for w in widths]
            for src, tile, w, off in zip(srcs, tiles, widths, offsets):
                T.copy(src[bx * block_M, 0], tile)
                for i, j in T.Parallel(block_M, w):
                    Y[bx * block_M + i, off + j] = tile[i, j]

    return main


@tilecute.jit(out_idx=[2])
def multi_head_accumulators(M=128, D=64, *, heads=2, block_M=64):
    """Two small GEMMs Y[:, h*D:(h+1)*D] = X_h @ W_h whose accumulators are kept in a Python
    list and indexed by the Python head number; the head loops (enumerate(zip(...)) and a
    Python list) unroll at trace time (a bare range(heads) would be T.serial, as in TileLang)."""

    @T.prim_func
    def main(X: T.Tensor((M, heads * D), T.float16), W: T.Tensor((heads, D, D), T.float16),
             Y: T.Tensor((M, heads * D), T.float16)):
        with T.Kernel(M // block_M, threads=128) as bx:
            xs = [T.alloc_shared((block_M, D), T.float16) for _ in range(heads)]
            ws = [T.alloc_shared((D, D), T.float16) for _ in range(heads)]
            accs = [T.alloc_fragment((block_M, D), T.float32) for _ in range(heads)]
            for h, (x_s, w_s) in enumerate(zip(xs, ws)):
                T.copy(X[bx * block_M, h * D], x_s)
                T.copy(W[h, 0, 0], w_s)
                T.gemm(x_s, w_s, accs[h], clear_accum=True)
            for h in list(range(heads)):
                T.copy(accs[h], Y[bx * block_M, h * D])

    return main


@tilecute.jit(out_idx=[1])
def dict_buffers_layernorm(M=256, N=512, *, rows=4, eps=1e-5, affine=False):
    """LayerNorm without affine parameters (a Python bool drops them): the per-row
    statistics kept in a dict of fragments keyed by name."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // rows, threads=128) as bx:
            x = T.alloc_fragment((rows, N), T.float32)
            tmp = T.alloc_fragment((rows, N), T.float32)
            stats = {name: T.alloc_fragment((rows,), T.float32) for name in ("mean", "var")}
            T.copy(X[bx * rows, 0], x)
            T.reduce_sum(x, stats["mean"], dim=1)
            for i in T.Parallel(rows):
                stats["mean"][i] = stats["mean"][i] / N
            for i, j in T.Parallel(rows, N):
                tmp[i, j] = (x[i, j] - stats["mean"][i]) * (x[i, j] - stats["mean"][i])
            T.reduce_sum(tmp, stats["var"], dim=1)
            for i, j in T.Parallel(rows, N):
                y = (x[i, j] - stats["mean"][i]) * T.rsqrt(stats["var"][i] / N + eps)
                if affine:
                    y = y * 2.0
                x[i, j] = y
            T.copy(x, Y[bx * rows, 0])

    return main


@tilecute.jit(out_idx=[1])
def python_loop_over_list_of_scales(N=2048, *, scales=[1.0, -2.0, 0.5, 3.0], block=128):
    """y = sum_s relu(s * x) for every s of a Python list (unrolled); an s of zero would be
    skipped by a Python if."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block, threads=block) as bx:
            x_f = T.alloc_fragment((block,), T.float32)
            y_f = T.alloc_fragment((block,), T.float32)
            T.copy(X[bx * block], x_f)
            T.clear(y_f)
            for s in scales:
                if s != 0.0:
                    for i in T.Parallel(block):
                        y_f[i] += T.max(x_f[i] * s, 0.0)
            T.copy(y_f, Y[bx * block])

    return main


# ---- macros ----------------------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def macro_defaults_and_keywords(M=128, N=256, *, block_M=16):
    """Softmax along rows written with macros: one with a default argument called with and
    without it, one called with keywords, one calling the others; the row max of a macro
    returned to its caller."""

    @T.macro
    def row_reduce(src, dst, kind="max"):
        if kind == "max":
            T.reduce_max(src, dst, dim=1)
        else:
            T.reduce_sum(src, dst, dim=1)

    @T.macro
    def exp_shift(buf, shift, scale=1.0):
        for i, j in T.Parallel(block_M, N):
            buf[i, j] = T.exp((buf[i, j] - shift[i]) * scale)

    @T.macro
    def softmax_tile(buf, m, s):
        row_reduce(buf, m)
        exp_shift(buf=buf, shift=m)
        row_reduce(buf, s, kind="sum")
        for i, j in T.Parallel(block_M, N):
            buf[i, j] = buf[i, j] / s[i]

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // block_M, threads=128) as bx:
            buf = T.alloc_fragment((block_M, N), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            s = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], buf)
            softmax_tile(buf, m, s)
            T.copy(buf, Y[bx * block_M, 0])

    return main


def _make_quant_macros(group, qmax):
    """Macros built in a helper: they close over the helper's group size and range."""

    @T.macro
    def absmax_scale(x, g):
        amax = T.alloc_var(T.float32, init=1e-8)
        for t in T.serial(group):
            amax = T.max(amax, T.abs(x[g * group + t]))
        return amax / qmax

    @T.macro
    def quant_group(x, q, s, g):
        sc = absmax_scale(x, g)
        s[g] = sc
        for t in T.serial(group):
            q[g * group + t] = T.cast(T.clamp(T.round(x[g * group + t] / sc), -qmax, qmax), T.int8)

    return quant_group


@tilecute.jit(out_idx=[1, 2])
def macro_closure_group_quant(N=8192, *, group=32, bits=8, block=128):
    """Symmetric int8 group quantization: each thread quantizes one group through macros
    made in a helper that closes over the factory's group size and range; the scale is a
    value returned by a macro."""
    qmax = float(2 ** (bits - 1) - 1)
    quant_group = _make_quant_macros(group, qmax)
    groups = N // group

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Q: T.Tensor((N,), T.int8), S: T.Tensor((groups,), T.float32)):
        with T.Kernel(T.ceildiv(groups, block), threads=block) as bx:
            tx = T.get_thread_binding()
            g = bx * block + tx
            if g < groups:
                quant_group(X, Q, S, g)

    return main


# ---- prim_funcs composed, symbolic shapes ----------------------------------------------------
def _rowscale_func(M, N, dtype, block_M):
    """A helper returning a prim_func: Y = X * s[:, None]."""

    @T.prim_func
    def rowscale(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), T.float32), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = T.cast(T.cast(X[bx * block_M + i, j], T.float32) * S[bx * block_M + i], dtype)

    return rowscale


@tilecute.jit(out_idx=[-1])
def composed_rowscale(N=256, *, dtype="float16", block_M=8):
    """A factory calling a helper that builds the prim_func, with a T.dynamic row count."""
    M = T.dynamic("M")
    return _rowscale_func(M, N, dtype, block_M)


@tilecute.jit(out_idx=[-1])
def mixed_symbolic_batched_add(D=128, *, block=64):
    """Y[b, t, :] = X[b, t, :] + P[t, :]: the batch a T.symbolic, the sequence a T.var and
    the feature width a constant, all in one tensor's shape."""
    B = T.symbolic("B")
    L = T.var("int32", "L")

    @T.prim_func
    def main(X: T.Tensor((B, L, D), T.float32), P: T.Tensor((L, D), T.float32), Y: T.Tensor((B, L, D), T.float32)):
        with T.Kernel(T.ceildiv(L, block), B, threads=128) as (bx, bz):
            for i, j in T.Parallel(block, D):
                t = bx * block + i
                if t < L:
                    Y[bz, t, j] = X[bz, t, j] + P[t, j]

    return main


# ---- T.Kernel forms, layouts -----------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def transpose_threads_tuple(M=256, N=512, *, tile=32, threads=(32, 8)):
    """Y = X^T through a padded shared tile, with threads=(32, 8) (a tuple) and each thread's
    (tx, ty) from T.get_thread_bindings; rows walked by a Python-computed stride."""
    tx_n, ty_n = threads
    per = tile // ty_n

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((N, M), T.float32)):
        with T.Kernel(N // tile, M // tile, threads=threads) as (bx, by):
            tx, ty, _ = T.get_thread_bindings()
            s = T.alloc_shared((tile, tile + 1), T.float32)
            for r in T.unroll(per):
                s[ty + r * ty_n, tx] = X[by * tile + ty + r * ty_n, bx * tile + tx]
            T.sync_threads()
            for r in T.unroll(per):
                Y[bx * tile + ty + r * ty_n, by * tile + tx] = s[tx, ty + r * ty_n]

    return main


@tilecute.jit(out_idx=[1])
def threads_list_rowmax(M=64, N=256, *, threads=[64, 2]):
    """Row maxima with threads=[64, 2] (a list): ty picks one of two rows, tx strides the
    columns; the two warps' partials meet in shared memory."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), R: T.Tensor((M,), T.float32)):
        with T.Kernel(M // threads[1], threads=threads) as bx:
            tx, ty, _ = T.get_thread_bindings()
            part = T.alloc_shared((threads[1], threads[0]), T.float32)
            m = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            for c in T.serial(N // threads[0]):
                m = T.max(m, X[bx * threads[1] + ty, c * threads[0] + tx])
            part[ty, tx] = m
            T.sync_threads()
            if tx == 0:
                best = T.alloc_var(T.float32, init=part[ty, 0])
                for k in T.serial(1, threads[0]):
                    best = T.max(best, part[ty, k])
                R[bx * threads[1] + ty] = best

    return main


@tilecute.jit(out_idx=[2])
def gemm_layout_dict(M=256, N=256, K=256, *, blocks=(128, 128, 64), stages=2):
    """C = A @ B whose shared tiles get swizzled layouts from a dict comprehension passed to
    T.annotate_layout; the block sizes unpacked from a tuple."""
    bm, bn, bk = blocks

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_f = T.alloc_fragment((bm, bn), T.float32)
            T.annotate_layout({buf: make_swizzled_layout(buf) for buf in (A_s, B_s)})
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


# ---- Triton-style ports ----------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def triton_softmax_flat(n_rows=100, n_cols=781, *, BLOCK_SIZE=None, num_warps=4):
    """Triton's fused softmax: one block a row, the row read from flat storage at
    row * stride + col, columns past n_cols masked to -inf, BLOCK_SIZE the next power of two."""
    BLOCK = BLOCK_SIZE or 1 << (n_cols - 1).bit_length()
    stride = n_cols

    @T.prim_func
    def main(X: T.Tensor((n_rows * stride,), T.float32), Y: T.Tensor((n_rows * stride,), T.float32)):
        with T.Kernel(n_rows, threads=num_warps * 32) as pid:
            row = T.alloc_fragment((BLOCK,), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            sm = T.alloc_fragment((1,), T.float32)
            for c in T.Parallel(BLOCK):
                row[c] = T.if_then_else(c < n_cols, X[pid * stride + c], -T.infinity(T.float32))
            T.reduce_max(row, mx, dim=0)
            for c in T.Parallel(BLOCK):
                row[c] = T.exp(row[c] - mx[0])
            T.reduce_sum(row, sm, dim=0)
            for c in T.Parallel(BLOCK):
                if c < n_cols:
                    Y[pid * stride + c] = row[c] / sm[0]

    return main


@tilecute.jit(out_idx=[1])
def triton_clamp_relu_flat(n_elements=10000, *, BLOCK_SIZE=1024, lo=-1.5, hi=2.0):
    """Triton elementwise port: offsets = pid * BLOCK + arange, mask = offsets < n;
    y = clamp(x, lo, hi) + relu(x) with T.clamp and T.max(x, 0)."""

    @T.prim_func
    def main(X: T.Tensor((n_elements,), T.float16), Y: T.Tensor((n_elements,), T.float16)):
        with T.Kernel(T.ceildiv(n_elements, BLOCK_SIZE), threads=256) as pid:
            for off in T.Parallel(BLOCK_SIZE):
                offs = pid * BLOCK_SIZE + off
                if offs < n_elements:
                    x = X[offs]
                    Y[offs] = T.clamp(x, T.float16(lo), T.float16(hi)) + T.max(x, 0)

    return main


@tilecute.jit(out_idx=[1])
def triton_layernorm_view(M=64, N=384, *, BLOCK_N=128, eps=1e-5):
    """Triton's layer norm in two loops over BLOCK_N chunks of a row (mean, then variance and
    output), with the flat input reinterpreted as (M, N) by T.view inside the kernel."""
    chunks = (N + BLOCK_N - 1) // BLOCK_N

    @T.prim_func
    def main(Xf: T.Tensor((M * N,), T.float16), Yf: T.Tensor((M * N,), T.float16)):
        with T.Kernel(M, threads=128) as row:
            X = T.view(Xf, (M, N))
            Y = T.view(Yf, (M, N))
            acc = T.alloc_fragment((BLOCK_N,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            mean = T.alloc_var(T.float32, init=0.0)
            T.clear(acc)
            for c in T.serial(chunks):
                for j in T.Parallel(BLOCK_N):
                    col = c * BLOCK_N + j
                    acc[j] += T.if_then_else(col < N, T.cast(X[row, col], T.float32), 0.0)
            T.reduce_sum(acc, tot, dim=0)
            mean = tot[0] / N
            T.clear(acc)
            for c in T.serial(chunks):
                for j in T.Parallel(BLOCK_N):
                    col = c * BLOCK_N + j
                    d = T.if_then_else(col < N, T.cast(X[row, col], T.float32) - mean, 0.0)
                    acc[j] += d * d
            T.reduce_sum(acc, tot, dim=0)
            rstd = T.rsqrt(tot[0] / N + eps)
            for c in T.serial(chunks):
                for j in T.Parallel(BLOCK_N):
                    col = c * BLOCK_N + j
                    if col < N:
                        Y[row, col] = T.cast((T.cast(X[row, col], T.float32) - mean) * rstd, T.float16)

    return main


@tilecute.jit(out_idx=[1])
def triton_strided_batch_transpose(B=4, R=48, C=80, *, BLOCK_R=16, BLOCK_C=32):
    """Y[b, c, r] = X[b, r, c] on flat storage: strides computed in Python (stride_b = R * C,
    stride_r = C) and the pointer arithmetic written out, both edges masked."""
    sxb, sxr = R * C, C
    syb, syc = C * R, R

    @T.prim_func
    def main(X: T.Tensor((B * R * C,), T.float32), Y: T.Tensor((B * C * R,), T.float32)):
        with T.Kernel(T.ceildiv(C, BLOCK_C), T.ceildiv(R, BLOCK_R), B, threads=128) as (pc, pr, pb):
            for i, j in T.Parallel(BLOCK_R, BLOCK_C):
                r = pr * BLOCK_R + i
                c = pc * BLOCK_C + j
                if (r < R) & (c < C):
                    Y[pb * syb + c * syc + r] = X[pb * sxb + r * sxr + c]

    return main


@tilecute.jit(out_idx=[2])
def triton_fused_add_gelu_reshape(shape=(8, 16, 96), *, BLOCK=512):
    """y = gelu_tanh(x + r) over a 3-D tensor handled as flat blocks: both parameters
    reshaped to 1-D with T.reshape(len = math.prod), the tail masked with T.if_then_else on
    a load and an if on the store."""
    n = math.prod(shape)
    k0 = math.sqrt(2.0 / math.pi)

    @T.prim_func
    def main(X: T.Tensor(shape, T.float32), Rr: T.Tensor(shape, T.float32), Y: T.Tensor(shape, T.float32)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=128) as pid:
            x1 = T.reshape(X, [n])
            r1 = T.reshape(Rr, [n])
            y1 = T.reshape(Y, [n])
            for i in T.Parallel(BLOCK):
                o = pid * BLOCK + i
                v = T.if_then_else(o < n, x1[o] + r1[o], 0.0)
                g = 0.5 * v * (1.0 + T.tanh(k0 * (v + 0.044715 * v * v * v)))
                if o < n:
                    y1[o] = g

    return main


@tilecute.jit(out_idx=[-1])
def gemm_epilogue_pipeline(M=256, N=256, K=128, *, epilogue=("scale", "bias", "relu"), alpha=0.5,
                           block_M=64, block_N=64, block_K=32):
    """C = epilogue(A @ B) where the epilogue is a Python tuple of stage names applied in
    order at trace time (each a T.Parallel over the accumulator)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), Bias: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for stage in epilogue:
                if stage == "scale":
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] * alpha
                elif stage == "bias":
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] + Bias[bx * block_N + j]
                elif stage == "relu":
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = T.max(acc[i, j], 0)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def _relu_sq_func(N=5000, block=128):
    """A helper prim_func factory used directly through tilecute.jit(...)(helper) below."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            g = bx * block + tx
            if g < N:
                r = T.max(X[g], 0)
                Y[g] = r * r

    return main


relu_squared_wrapped = tilecute.jit(out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})(_relu_sq_func)
relu_squared_wrapped.__doc__ = "relu(x) ** 2 via tilecute.jit(...) applied as a call to a helper factory."


def _softmax_row_per_thread(M, N, dtype):
    """Narrow rows: one thread a row, the row walked serially."""

    @T.prim_func
    def narrow(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            tx = T.get_thread_binding()
            r = bx * 128 + tx
            if r < M:
                mx = T.alloc_var(T.float32, init=-T.infinity(T.float32))
                sm = T.alloc_var(T.float32, init=0.0)
                for j in T.serial(N):
                    mx = T.max(mx, T.cast(X[r, j], T.float32))
                for j in T.serial(N):
                    sm += T.exp(T.cast(X[r, j], T.float32) - mx)
                for j in T.serial(N):
                    Y[r, j] = T.cast(T.exp(T.cast(X[r, j], T.float32) - mx) / sm, dtype)

    return narrow


def _softmax_row_per_block(M, N, dtype):
    """Wide rows: one block a row, tile reductions."""

    @T.prim_func
    def wide(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=256) as bx:
            x = T.alloc_fragment((N,), T.float32)
            m = T.alloc_fragment((1,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx, 0:N], x)
            T.reduce_max(x, m, dim=0)
            for j in T.Parallel(N):
                x[j] = T.exp(x[j] - m[0])
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(N):
                x[j] = x[j] / s[0]
            T.copy(x, Y[bx, 0:N])

    return wide


@tilecute.jit(out_idx=[-1])
def softmax_dispatch_by_width(M=300, N=16, *, dtype="float16", narrow_limit=64):
    """A factory choosing between two helper prim_func builders by a Python condition on
    the row width (the pattern of libraries that dispatch on shape)."""
    build = _softmax_row_per_thread if N <= narrow_limit else _softmax_row_per_block
    return build(M, N, dtype)


@tilecute.jit(out_idx=[2])
def triton_matmul_masked_flat(M=200, N=136, K=72, *, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=None):
    """Triton's matmul tutorial shape in TileLang: A and B passed as flat storage with
    Python-computed strides, tiles gathered into shared memory with masked loads
    (T.if_then_else(..., 0)) on every edge, T.gemm on the tiles, a masked store; the
    grid padded up with T.ceildiv and GROUP_M (unused when None) a Python conditional."""
    stride_am, stride_ak = K, 1
    stride_bk, stride_bn = N, 1
    k_tiles = (K + BLOCK_K - 1) // BLOCK_K
    threads = 128 if GROUP_M is None else 256

    @T.prim_func
    def main(A: T.Tensor((M * K,), T.float16), B: T.Tensor((K * N,), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=threads) as (pid_n, pid_m):
            a_s = T.alloc_shared((BLOCK_M, BLOCK_K), T.float16)
            b_s = T.alloc_shared((BLOCK_K, BLOCK_N), T.float16)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), T.float32)
            T.clear(acc)
            for kt in T.serial(k_tiles):
                for i, k in T.Parallel(BLOCK_M, BLOCK_K):
                    rm = pid_m * BLOCK_M + i
                    rk = kt * BLOCK_K + k
                    a_s[i, k] = T.if_then_else((rm < M) & (rk < K), A[rm * stride_am + rk * stride_ak], T.float16(0))
                for k, j in T.Parallel(BLOCK_K, BLOCK_N):
                    rk = kt * BLOCK_K + k
                    rn = pid_n * BLOCK_N + j
                    b_s[k, j] = T.if_then_else((rk < K) & (rn < N), B[rk * stride_bk + rn * stride_bn], T.float16(0))
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                if (pid_m * BLOCK_M + i < M) & (pid_n * BLOCK_N + j < N):
                    C[pid_m * BLOCK_M + i, pid_n * BLOCK_N + j] = acc[i, j]

    return main


@tilecute.jit(out_idx=[2])
def qkv_split_running_offset(M=128, *, dims=(64, 32, 32), scales=(0.125, 1.0, 1.0), block_M=16):
    """A fused QKV row split into its parts: fragments collected with list.append in a loop
    over the part widths, the column offset a Python int advanced with `off += d`; Q is
    scaled and biased, K and V copied, and the parts written back into one packed output in the order
    V, K, Q (a reversed Python list)."""
    total = sum(dims)

    @T.prim_func
    def main(QKV: T.Tensor((M, total), T.float16), Bq: T.Tensor((dims[0],), T.float16),
             Out: T.Tensor((M, total), T.float16)):
        with T.Kernel(M // block_M, threads=128) as bx:
            parts = []
            offsets = []
            off = 0
            for d, sc in zip(dims, scales):
                frag = T.alloc_fragment((block_M, d), T.float32)
                for i, j in T.Parallel(block_M, d):
                    frag[i, j] = T.cast(QKV[bx * block_M + i, off + j], T.float32) * sc
                parts.append(frag)
                offsets.append(off)
                off += d
            for i, j in T.Parallel(block_M, dims[0]):
                parts[0][i, j] = parts[0][i, j] + T.cast(Bq[j], T.float32)
            out_off = 0
            for p, d in reversed(list(zip(parts, dims))):
                for i, j in T.Parallel(block_M, d):
                    Out[bx * block_M + i, out_off + j] = T.cast(p[i, j], T.float16)
                out_off += d

    return main


@tilecute.jit(out_idx=[1])
def numpy_shape_flatten_rows(shape=(4, 6, 128), *, block_rows=8, dtype=torch.float16):
    """Rows of an N-D tensor scaled by their index within the block and cast: the row count
    and width come from NumPy (np.prod over the leading dims, an np.int64 width), as
    repositories that compute shapes with NumPy pass them; `dtype == torch.float16` picks the
    output rounding at trace time."""
    import numpy as np
    rows = np.prod(shape[:-1])
    width = np.int64(shape[-1])
    half = dtype == torch.float16

    @T.prim_func
    def main(X: T.Tensor((rows, width), dtype), Y: T.Tensor((rows, width), dtype)):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
            for r, c in T.Parallel(block_rows, width):
                if bx * block_rows + r < rows:
                    v = T.cast(X[bx * block_rows + r, c], T.float32) * (r + 1)
                    if half:
                        Y[bx * block_rows + r, c] = T.cast(v, dtype)
                    else:
                        Y[bx * block_rows + r, c] = T.cast(T.round(v), dtype)

    return main


@tilecute.jit(out_idx=[2, 3])
def macro_optional_out_residual(N=4096, *, block=256, cfg=None):
    """h = x + r kept (written to H) and y = relu(h * scale + bias) through one macro with an
    optional output buffer: `if out is None: return ...` (a branch decided while tracing)
    returns the value, else it stores into `out` and returns what it stored; the affine
    parameters passed as **cfg, the per-element taps summed by sum() over a generator."""
    cfg = cfg or {"scale": 0.5, "bias": -0.25}

    @T.macro
    def affine(x, out=None, *, scale=1.0, bias=0.0):
        if out is None:
            return x * scale + bias
        out[0] = x * scale + bias
        return out[0]

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), R: T.Tensor((N,), T.float32), H: T.Tensor((N,), T.float32),
             Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            g = bx * block + tx
            keep = T.alloc_local((1,), T.float32)
            h = sum(v for v in (X[g], R[g]))
            stored = affine(h, keep)  # scale 1, bias 0: h itself, kept in a local
            H[g] = stored
            Y[g] = T.max(affine(keep[0], **cfg), 0)

    return main


@tilecute.jit(out_idx=[1])
def vector_width_from_dtype_bytes(N=1 << 16, *, dtype="bfloat16", threads=256):
    """y = x * 2 with each thread's run of elements sized to 16 bytes from the dtype's byte
    width (T.dtype(dtype).bytes, TileLang's property), the block's tile from that."""
    vec = 16 // T.dtype(dtype).bytes
    tile = threads * vec

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, tile), threads=threads) as bx:
            for t, v in T.Parallel(threads, vec):
                g = bx * tile + t * vec + v
                Y[g] = X[g] * T.cast(2, dtype)

    return main


@tilecute.jit(out_idx=[2])
def triton_grouped_pid_matmul(M=384, N=512, K=128, *, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=4):
    """Triton's grouped ordering on a 1-D grid: pid -> (pid_m, pid_n) with the group formula
    (num_pid_in_group = GROUP_M * num_pid_n, the last group's size by T.min), then a plain
    tiled GEMM on the pair; the grid a Python product of ceil-divisions."""
    num_pid_m = -(-M // BLOCK_M)
    num_pid_n = -(-N // BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(num_pid_m * num_pid_n, threads=128) as pid:
            group_id = pid // num_pid_in_group
            first_pid_m = group_id * GROUP_M
            group_size_m = T.min(num_pid_m - first_pid_m, GROUP_M)
            pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
            pid_n = (pid % num_pid_in_group) // group_size_m
            a_s = T.alloc_shared((BLOCK_M, BLOCK_K), T.float16)
            b_s = T.alloc_shared((BLOCK_K, BLOCK_N), T.float16)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=2):
                T.copy(A[pid_m * BLOCK_M, k * BLOCK_K], a_s)
                T.copy(B[k * BLOCK_K, pid_n * BLOCK_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[pid_m * BLOCK_M, pid_n * BLOCK_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_macro_zipped_loads(M=256, N=256, K=256, *, tiles=(64, 64, 32), stages=2):
    """C = A @ B with both operand loads done by one macro that zips Python lists of
    sources, destinations and (row, col) offsets given as a keyword; the shared tiles made by
    a comprehension unpacked into two names; inside T.Pipelined."""
    bm, bn, bk = tiles

    @T.macro
    def load_all(srcs, dsts, offsets):
        for s, d, (r, c) in zip(srcs, dsts, offsets):
            T.copy(s[r, c], d)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s, B_s = [T.alloc_shared(shape, T.float16) for shape in ((bm, bk), (bk, bn))]
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                load_all((A, B), [A_s, B_s], offsets=[(by * bm, k * bk), (k * bk, bx * bn)])
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main
