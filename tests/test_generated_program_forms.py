"""Forms that generated TileLang programs (KernelBench-style `ModelNew` kernels an LLM
wrote for TileLang) use and tilecute once refused: each written here in TileLang's idioms.
CPU: the frontend, the IR and an sm_90a cubin; GPU (``-m gpu``): results against torch."""

import inspect

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.runtime.kernel import Kernel


def _cubin(func, tmp_path):
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert info.kernels
    return info


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# ---- @tilelang.jit(out_idx=...) over @T.prim_func (TileLang 0.1.x: compiled at once) ------
def relu_bias_jit(n=1000, block=128, dtype="float16", accum="float32"):
    @tilecute.jit(out_idx=-1)
    @T.prim_func
    def relu_bias(X: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype),
                  Y: T.Tensor((n,), dtype)):
        zero = T.Cast(accum, 0.0)  # a top-level expression: stands for itself below
        total = n * 1
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            tx = T.get_thread_binding(0)
            idx = bx * block + tx
            if idx < total:
                v = T.max(T.Cast(accum, X[idx]), zero)
                v = v + T.Cast(accum, B[idx])
                Y[idx] = T.Cast(dtype, v)

    return relu_bias


def test_jit_over_a_prim_func_is_the_compiled_kernel(tmp_path):
    kernel = relu_bias_jit()
    assert isinstance(kernel, Kernel)
    assert kernel.out_idx == [2]
    assert kernel.ensure_cubin()


def test_jit_over_a_prim_func_refuses_debug_root_path():
    @T.prim_func
    def f(X: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[T.get_thread_binding(0)] = 1.0

    with pytest.raises(TypeError, match="f: tilecute.jit applied to a prim_func.*debug_root_path"):
        tilecute.jit(f, debug_root_path="/tmp/x")


@pytest.mark.gpu
def test_gpu_jit_over_a_prim_func():
    kernel = relu_bias_jit()
    x = torch.randn(1000, dtype=torch.float16, device="cuda")
    b = torch.randn(1000, dtype=torch.float16, device="cuda")
    y = kernel(x, b)
    want = (torch.relu(x.float()) + b.float()).half()
    torch.testing.assert_close(y, want, rtol=1e-3, atol=1e-3)


# ---- top-level names bound to expressions of constants, symbols and scalars -------------
def test_top_level_expression_is_substituted():
    M = T.dynamic("M")

    @T.prim_func
    def f(X: T.Tensor((M, 64), "float16"), Y: T.Tensor((M, 64), "float16"), s: T.float32):
        neg = T.Cast("float32", -1.0) * s
        rows = T.ceildiv(M, 4)
        with T.Kernel(rows, threads=64) as bx:
            for i, j in T.Parallel(4, 64):
                if bx * 4 + i < M:
                    Y[bx * 4 + i, j] = T.Cast("float16", T.Cast("float32", X[bx * 4 + i, j]) * neg)

    (kernel,) = f.kernels
    assert kernel.grid[0] == N.Call("ceildiv", (f.symbols[0], N.Const(4, "int32")), "int32")
    stores = [s for s in walk_stmts(f.kernels) if isinstance(s, N.Store)]
    assert "s" in repr(stores[0].value) and "Const(value=-1.0" in repr(stores[0].value)
    assert not any(isinstance(s, N.Let) and s.var.name == "neg" for s in walk_stmts(f.kernels))


def test_top_level_expression_cubin(tmp_path):
    _cubin(_relu_bias_prim(), tmp_path)


def _relu_bias_prim():
    @T.prim_func
    def g(X: T.Tensor((256,), "float16"), Y: T.Tensor((256,), "float16")):
        one = T.Cast("float32", 1.0)
        half = one / 2
        with T.Kernel(2, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding(0)
            Y[i] = T.Cast("float16", T.Cast("float32", X[i]) * half + one)

    return g


def test_top_level_load_is_still_refused():
    def f(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        first = X[0]
        with T.Kernel(1, threads=32) as bx:
            Y[T.get_thread_binding(0)] = first

    with pytest.raises(FrontendError, match=r"`first = X\[0\]` at the top level") as e:
        T.prim_func(f)
    assert f":{_line_of(f, 'first = X[0]')}:" in str(e.value)


# ---- a name rebound inside an if/loop body (TileLang: a new value for that body) --------
def nchw_index_kernel(n=2, c=3, h=5, w=7, block=64):
    numel = n * c * h * w

    @T.prim_func
    def scale(X: T.Tensor((n, c, h, w), "float32"), S: T.Tensor((c,), "float32"),
              Y: T.Tensor((n, c, h, w), "float32")):
        with T.Kernel(T.ceildiv(numel, block), threads=block) as bx:
            idx = bx * block + T.get_thread_binding(0)
            if idx < numel:
                wi = idx % w
                idx = idx // w
                hi = idx % h
                idx = idx // h
                ci = idx % c
                ni = idx // c
                Y[ni, ci, hi, wi] = X[ni, ci, hi, wi] * S[ci]

    return scale


def test_rebinding_inside_an_if_body_is_a_new_value_there(tmp_path):
    f = nchw_index_kernel()
    lets = [s for s in walk_stmts(f.kernels) if isinstance(s, N.Let)]
    names = [s.var.name for s in lets]
    assert names[:1] == ["idx"] and "idx_1" in names and "idx_2" in names
    second = lets[names.index("idx_2")]
    assert second.value.a == lets[names.index("idx_1")].var  # reads the body's own binding
    _cubin(f, tmp_path)


def test_reading_the_name_after_the_if_body_is_refused():
    def f(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            v = X[T.get_thread_binding(0)]
            if v < 0:
                v = v * 0.5
            Y[T.get_thread_binding(0)] = v

    with pytest.raises(FrontendError) as e:
        T.prim_func(f)
    msg = str(e.value)
    assert "'v' is read after the loop/if body that rebinds it" in msg
    assert f"(line {_line_of(f, 'v = v * 0.5')})" in msg
    assert f":{_line_of(f, 'Y[T.get_thread_binding(0)] = v')}:" in msg


def test_rebinding_after_the_body_makes_the_name_readable_again(tmp_path):
    @T.prim_func
    def f(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            t = T.get_thread_binding(0)
            v = X[t]
            for k in T.serial(2):
                v = X[(t + k) % 64]  # a loop body's own value
                Y[(t + k) % 64] = v
            v = X[t] * 2.0
            Y[t] = v

    _cubin(f, tmp_path)


@pytest.mark.gpu
def test_gpu_rebinding_inside_an_if_body():
    kernel = tilecute.compile(nchw_index_kernel())
    x = torch.randn(2, 3, 5, 7, device="cuda")
    s = torch.randn(3, device="cuda")
    y = torch.zeros_like(x)
    kernel(x, s, y)
    torch.testing.assert_close(y, x * s.view(1, 3, 1, 1))


# ---- T.tvm_storage_sync("shared"): TVM's barrier statement ------------------------------
def block_sum_storage_sync(n=256):
    @T.prim_func
    def block_sum(X: T.Tensor((n,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=n) as bx:
            tx = T.get_thread_binding(0)
            buf = T.alloc_shared((n,), "float32")
            buf[tx] = X[tx]
            T.tvm_storage_sync("shared")
            T.tvm_storage_sync("warp")  # TileLang's codegen prints nothing for it
            if tx == 0:
                acc = T.alloc_var("float32")
                acc = 0.0
                for k in T.serial(n):
                    acc += buf[k]
                Y[0] = acc

    return block_sum


def test_tvm_storage_sync_is_the_block_barrier(tmp_path):
    f = block_sum_storage_sync()
    barriers = [s for s in walk_stmts(f.kernels) if isinstance(s, N.Barrier)]
    assert len(barriers) == 1
    _cubin(f, tmp_path)


def test_tvm_storage_sync_global_is_refused():
    def f(X: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.tvm_storage_sync("global")

    with pytest.raises(FrontendError, match=r"tvm_storage_sync: storage_scope='global'") as e:
        T.prim_func(f)
    line = _line_of(f, "T.tvm_storage_sync(")
    assert f":{line}:" in str(e.value)


@pytest.mark.gpu
def test_gpu_tvm_storage_sync():
    kernel = tilecute.compile(block_sum_storage_sync())
    x = torch.randn(256, device="cuda")
    y = torch.zeros(1, device="cuda")
    kernel(x, y)
    torch.testing.assert_close(y[0], x.sum(), rtol=1e-4, atol=1e-4)


# ---- a tensor named `pred` read in an `if` body -------------------------------------------
def kl_div_pred(b=8, n=256, block_m=4, block_n=64):
    """``pred`` is the condition parameter CuTe DSL's preprocessor gives the function it
    makes of an ``if`` body: printed as is, it would shadow the tensor there."""

    @T.prim_func
    def kl(pred: T.Tensor((b, n), "float32"), targ: T.Tensor((b, n), "float32"),
           out: T.Tensor((b, n), "float32")):
        with T.Kernel(T.ceildiv(b, block_m), T.ceildiv(n, block_n),
                      threads=block_m * block_n) as (bx, by):
            for i, j in T.Parallel(block_m, block_n):
                gi = bx * block_m + i
                gj = by * block_n + j
                if (gi < b) and (gj < n):
                    t = targ[gi, gj]
                    out[gi, gj] = t * (T.log(t) - T.log(pred[gi, gj]))

    return kl


def test_a_tensor_named_pred_is_respelled(tmp_path):
    kernel = tilecute.compile(kl_div_pred(), target="sm_90a")
    src = kernel.get_kernel_source()
    assert "pred_ = cute.make_tensor(pred_ptr" in src and "pred_[gi, gj]" in src
    _cubin(kl_div_pred(), tmp_path)


@pytest.mark.gpu
def test_gpu_a_tensor_named_pred():
    kernel = tilecute.compile(kl_div_pred())
    p = torch.rand(8, 256, device="cuda") + 0.1
    t = torch.rand(8, 256, device="cuda") + 0.1
    out = torch.empty_like(p)
    kernel(p, t, out)
    torch.testing.assert_close(out, t * (t.log() - p.log()), rtol=1e-5, atol=1e-5)


# ---- typed locals in a T.Parallel body and at the top level ------------------------------
def gelu_typed_locals(n=1000, block=128):
    @T.prim_func
    def gelu(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        numel: T.int32 = n * 1  # the top level: the value itself, as TileLang binds it
        with T.Kernel(T.ceildiv(numel, block), threads=block) as bx:
            for tx in T.Parallel(block):
                idx: T.int32 = bx * block + tx  # per element: TileLang's bind, a Let
                if idx < numel:
                    x: T.float32 = T.Cast("float32", X[idx])
                    y: T.float32 = 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
                    Y[idx] = T.Cast("float16", y)

    return gelu


def test_typed_locals_in_a_parallel_body_are_lets(tmp_path):
    f = gelu_typed_locals()
    stmts = list(walk_stmts(f.kernels))
    assert not any(isinstance(s, N.Allocate) for s in stmts)
    lets = {s.var.name: s for s in stmts if isinstance(s, N.Let)}
    assert lets["idx"].var.dtype == "int32" and lets["x"].var.dtype == "float32"
    _cubin(f, tmp_path)


@pytest.mark.gpu
def test_gpu_typed_locals_in_a_parallel_body():
    kernel = tilecute.compile(gelu_typed_locals())
    x = torch.randn(1000, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    kernel(x, y)
    torch.testing.assert_close(y, torch.nn.functional.gelu(x.float(), approximate="tanh").half(),
                               rtol=2e-3, atol=2e-3)


# ---- a name `tc` bound twice (its second IR name must not be the generator's tc_1) -------
def test_a_name_tc_bound_twice(tmp_path):
    @T.prim_func
    def f(X: T.Tensor((4, 16), "float32"), Y: T.Tensor((4, 16), "float32")):
        with T.Kernel(4, threads=32) as bx:
            acc = T.alloc_fragment((16,), "float32")
            for tc in T.Parallel(16):
                acc[tc] = X[bx, tc]
            for tc in T.Parallel(16):
                Y[bx, tc] = acc[tc] * 2.0

    names = [s.var.name for s in walk_stmts(f.kernels) if isinstance(s, N.For)]
    assert names == ["tc", "utc"]
    _cubin(f, tmp_path)


# ---- a 0-d tensor parameter: refused by name -------------------------------------------
def test_a_0d_tensor_parameter_is_refused_by_name():
    from tilecute.ir.validate import ValidationError

    with pytest.raises(ValidationError, match=r"parameter 'scale': a 0-d tensor \(shape \(\)\) "
                                              r"is not supported"):
        @T.prim_func
        def f(X: T.Tensor((32,), "float32"), scale: T.Tensor((), "float32")):
            with T.Kernel(1, threads=32) as bx:
                X[T.get_thread_binding(0)] = X[T.get_thread_binding(0)] * scale[()]


# ---- a view of a parameter's storage before the kernels ---------------------------------
def flat_matmul_views(b=2, i=4, j=8, l=32, k=64, bm=64, bn=64, bk=32):
    m = b * i * j

    @T.prim_func
    def flat_mm(A: T.Tensor((b, i, j, l), "float16"), B: T.Tensor((l, k), "float16"),
                C: T.Tensor((b, i, j, k), "float16")):
        A_flat = T.Tensor((m, l), "float16", A.data)  # TileLang: a function-level buffer
        C_flat = T.Tensor((m, k), "float16", C.data)
        with T.Kernel(T.ceildiv(k, bn), T.ceildiv(m, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(l, bk), num_stages=2):
                T.copy(A_flat[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_flat[by * bm, bx * bn])

    return flat_mm


def test_top_level_storage_views_stand_in_each_kernel(tmp_path):
    f = flat_matmul_views()
    views = [s.buffer for s in walk_stmts(f.kernels) if isinstance(s, N.Allocate)
             and s.buffer.scope == "global"]
    assert [(v.name, v.shape) for v in views] == [
        ("A_flat", (N.Const(64, "int32"), N.Const(32, "int32"))),
        ("C_flat", (N.Const(64, "int32"), N.Const(64, "int32")))]
    _cubin(f, tmp_path)


@pytest.mark.gpu
def test_gpu_top_level_storage_views():
    kernel = tilecute.compile(flat_matmul_views())
    a = torch.randn(2, 4, 8, 32, dtype=torch.float16, device="cuda")
    bm = torch.randn(32, 64, dtype=torch.float16, device="cuda")
    c = torch.empty(2, 4, 8, 64, dtype=torch.float16, device="cuda")
    kernel(a, bm, c)
    torch.testing.assert_close(c.float(), a.float() @ bm.float(), rtol=1e-2, atol=1e-2)


# ---- a top-level `if` on a parse-time value chooses the kernel ---------------------------
def cumulative_along(dim, rows=4, cols=32):
    @T.prim_func
    def cum(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        if dim == 1:  # TileLang's builder runs only the branch a Python value chooses
            with T.Kernel(rows, threads=32) as r:
                acc = T.alloc_var("float32")
                acc = 0.0
                for c in T.serial(cols):
                    acc += X[r, c]
                    Y[r, c] = acc
        else:
            with T.Kernel(cols, threads=32) as c:
                acc = T.alloc_var("float32")
                acc = 0.0
                for r in T.serial(rows):
                    acc += X[r, c]
                    Y[r, c] = acc

    return cum


@pytest.mark.parametrize("dim", [0, 1])
def test_top_level_if_on_a_parse_time_value(dim, tmp_path):
    f = cumulative_along(dim)
    (kernel,) = f.kernels
    assert kernel.grid[0] == N.Const(4 if dim == 1 else 32, "int32")
    _cubin(f, tmp_path)


def test_top_level_if_on_a_run_time_value_is_refused():
    def f(X: T.Tensor((32,), "float32"), n: T.int32):
        if n > 0:
            with T.Kernel(1, threads=32) as bx:
                X[T.get_thread_binding(0)] = 1.0

    with pytest.raises(FrontendError, match=r"`if n > 0:` at the top level of a prim_func: its "
                                            r"condition must be known at parse time"):
        T.prim_func(f)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [0, 1])
def test_gpu_top_level_if(dim):
    kernel = tilecute.compile(cumulative_along(dim))
    x = torch.randn(4, 32, device="cuda")
    y = torch.empty_like(x)
    kernel(x, y)
    torch.testing.assert_close(y, x.cumsum(dim), rtol=1e-5, atol=1e-5)
