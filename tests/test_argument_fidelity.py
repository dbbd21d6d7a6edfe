"""TileLang's arguments read with TileLang's meaning, form by form: each test writes a small
program in TileLang's idioms, checks the IR (or the generated code) shows the meaning and,
on a GPU, the numbers against torch."""

import json
import os

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.language import FrontendError


def _stmts(func, kind):
    out = []

    def walk(body):
        for s in body:
            if isinstance(s, kind):
                out.append(s)
            for field in ("body", "then", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, tuple):
                    walk(inner)
    for k in func.kernels:
        walk(k.body)
    return out


# ---- stepped loops: a negative step counts down, as TileLang's range / T.serial ------------
def _count_down(n=10, unroll=False):
    loop = T.unroll if unroll else T.serial

    @T.prim_func
    def count_down(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=1) as _:
            for i in range(n, 0, -1):      # n, n-1, ..., 1
                A[n - i] = i
            for j in loop(n - 1, -1, -3):  # n-1, n-4, ... while > -1
                B[j] = j
    return count_down


def test_negative_step_counts_down():
    f = _count_down()
    first, second = _stmts(f, N.For)
    assert first.extent == N.Const(10, "int32") and second.extent == N.Const(4, "int32")
    let = first.body[0]
    assert isinstance(let, N.Let) and "10 + i_iter * -1" in f.script()
    assert "9 + j_iter * -3" in f.script()


def test_negative_step_unrolled_builds(tmp_path):
    assert tilecute.build_cubin(_count_down(unroll=True), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_zero_step_is_refused_by_name():
    with pytest.raises(FrontendError, match=r"T.serial: step=0: a stepped loop's step must be "
                                            r"non-zero"):
        @T.prim_func
        def zero(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(0, 4, 0):
                    A[i] = i


@pytest.mark.gpu
def test_negative_step_on_gpu():
    import torch

    a = torch.full((10,), -7, dtype=torch.int32, device="cuda")
    b = torch.full((10,), -7, dtype=torch.int32, device="cuda")
    tilecute.compile(_count_down())(a, b)
    assert a.tolist() == list(range(10, 0, -1))
    assert b.tolist() == [j if j in (9, 6, 3, 0) else -7 for j in range(10)]


# ---- unpacking assignments read every value first (Python's, and TileLang's, order) ------
def _swap():
    @T.prim_func
    def swap(A: T.Tensor((2,), T.float32), B: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_var(T.float32, A[0])
            b = T.alloc_var(T.float32, A[1])
            a, b = b, a
            A[0], A[1] = a, b
            B[0], B[1] = B[1], B[0]
    return swap


def test_unpacking_swaps_vars_and_elements():
    f = _swap()
    lets = _stmts(f, N.Let)
    # b's old value is read before a is assigned; B[0]'s before B[0] is stored
    assert [(let.var.dtype, type(let.value).__name__) for let in lets] == \
        [("float32", "Load"), ("float32", "Load")]
    text = f.script()
    assert text.index("unpacked = a[0]") < text.index("a[0] = b[0]") < \
        text.index("b[0] = unpacked")


@pytest.mark.gpu
def test_unpacking_swap_on_gpu():
    import torch

    a = torch.tensor([1.0, 2.0], device="cuda")
    b = torch.tensor([3.0, 4.0], device="cuda")
    tilecute.compile(_swap())(a, b)
    assert a.tolist() == [2.0, 1.0] and b.tolist() == [4.0, 3.0]


# ---- tilecute.compile takes TileLang's positional order ------------------------------------
def _add_one():
    @T.prim_func
    def add_one(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i] + 1.0
    return add_one


def test_compile_positional_order_is_tilelangs():
    import inspect

    names = list(inspect.signature(tilecute.compile).parameters)
    assert names[:8] == ["func", "out_idx", "execution_backend", "target", "target_host",
                         "verbose", "pass_configs", "compile_flags"]
    # the third positional is the execution backend, the fourth the target
    with pytest.raises(ValueError, match="execution_backend='torch' is not supported"):
        tilecute.compile(_add_one(), [1], "torch", "sm_90a")
    kernel = tilecute.compile(_add_one(), [1], "tvm_ffi", "sm_80", None, False,
                              {"tl.disable_tma_lower": True})
    manifest = json.load(open(os.path.join(kernel.path, "manifest.json")))
    assert manifest["arch"] == "sm_80" and manifest["options"] == {"disable_tma": True}
    assert kernel.out_idx == [1]


# ---- T.barrier_arrive / T.barrier_wait: TileLang's parameter names ------------------------
def test_barrier_sugar_takes_tilelangs_keywords():
    @T.prim_func
    def handoff(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            bar = T.alloc_barrier(128)
            T.barrier_arrive(mbarrier=bar[0])
            T.barrier_wait(mbarrier=bar[0], parity=0)
            A[0] = 1.0

    (arrive,) = _stmts(handoff, N.MBarrierArrive)
    (wait,) = _stmts(handoff, N.MBarrierWait)
    assert arrive.barrier == wait.barrier and wait.parity == N.Const(0, "int32")
    with pytest.raises(FrontendError, match=r"T.barrier_wait: missing a required argument: "
                                            r"'parity'"):
        @T.prim_func
        def no_parity(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                bar = T.alloc_barrier(128)
                T.barrier_wait(bar[0])


# ---- T.atomic_add / max / min: memory_order on each element's update -----------------------
def _ordered_atomics(n=256):
    @T.prim_func
    def ordered(A: T.Tensor((n,), T.float32), S: T.Tensor((4,), T.float32),
                M: T.Tensor((2,), T.int32), H: T.Tensor((n,), T.float16),
                P: T.Tensor((n,), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            part = T.alloc_shared((4,), T.float32)
            for i in T.Parallel(4):
                part[i] = 0.0
            for i in T.Parallel(128):
                k = bx * 128 + i
                T.atomic_add(S[k % 4], A[k], memory_order="release")
                T.atomic_max(M[0], k, memory_order="acquire")
                T.atomic_min(M[1], -k, memory_order="seq_cst")
                T.atomic_add(H[k], 1.0, memory_order="acq_rel")
                T.atomic_add(part[k % 4], A[k], memory_order="seq_cst")
                T.atomic_max(P[k], A[k], memory_order="consume")
            T.atomic_add(S[0:4], part[0:4], memory_order="release")
    return ordered


def test_memory_order_reaches_each_atomic():
    f = _ordered_atomics()
    orders = [(s.op, s.order) for s in _stmts(f, N.AtomicAdd)]
    assert orders == [("add", "release"), ("max", "acquire"), ("min", "seq_cst"),
                      ("add", "acq_rel"), ("add", "seq_cst"), ("max", "consume"),
                      ("add", "release")]
    from tilecute.transform.pipeline import lower
    from tilecute.codegen.cute import emit_cute

    src = emit_cute(lower(f, "sm_90a"))
    for call in ('tca.atomic_add(S, ', 'tca.atomic_max(M, ', 'tca.atomic_min(M, ',
                 'tca.atomic_add(H, ', 'tca.atomic_max(P, '):
        assert call in src
    for order in ('"release")', '"acquire")', '"seq_cst")', '"acq_rel")', '"consume")'):
        assert order in src
    # relaxed (TileLang's default) keeps the helpers' default: no order written
    assert '"relaxed"' not in src


def test_memory_order_atomics_build(tmp_path):
    assert tilecute.build_cubin(_ordered_atomics(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_memory_order_atomics_on_gpu():
    import torch

    n = 256
    a = torch.randn(n, device="cuda")
    s = torch.zeros(4, device="cuda")
    m = torch.tensor([-1, 1], dtype=torch.int32, device="cuda")
    h = torch.zeros(n, dtype=torch.float16, device="cuda")
    p = torch.zeros(n, device="cuda")
    tilecute.compile(_ordered_atomics(n))(a, s, m, h, p)
    # the per-block shared partials are added again into S: twice the plain sums
    torch.testing.assert_close(s, 2 * a.view(-1, 4).sum(0), rtol=1e-4, atol=1e-4)
    assert m.tolist() == [n - 1, -(n - 1)]
    assert h.eq(1).all()
    torch.testing.assert_close(p, a.clamp(min=0))
