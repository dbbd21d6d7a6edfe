"""``T.thread_return()`` inside a per-thread loop (TileLang's CUDA ``return;`` from inside
the loop): the thread leaves the kernel there.  tilecute lowers it with a per-thread
``returned`` flag that guards the rest of the loop body, the loop's later iterations (a
``while`` also stops on it) and everything after the loop; a collective statement (tile
op, barrier, T.Parallel loop) in that loop or after it is refused by name, as is a
return inside a T.Parallel / T.Pipelined loop."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def prefix_until_negative(rows=256, cols=16, threads=128):
    """One thread a row: the sum of the row's entries before its first negative one; a
    row with a negative entry stores that partial sum and returns from inside the loop,
    the others store twice their full sum after it."""

    @T.prim_func
    def prefix_until_negative(x: T.Tensor((rows, cols), "float32"), y: T.Tensor((rows,), "float32")):
        with T.Kernel(rows // threads, threads=threads) as b:
            row = b * threads + T.get_thread_binding()
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(cols):
                if x[row, k] < 0:
                    y[row] = acc[0]
                    T.thread_return()
                acc[0] += x[row, k]
            y[row] = acc[0] * 2.0
    return prefix_until_negative


def count_while_positive(rows=256, cols=16, threads=128):
    """The same walk as a per-thread ``while``: a row meeting a value above 2 stores -1
    and returns; the others store how many entries they walked."""

    @T.prim_func
    def count_while_positive(x: T.Tensor((rows, cols), "float32"), y: T.Tensor((rows,), "int32")):
        with T.Kernel(rows // threads, threads=threads) as b:
            row = b * threads + T.get_thread_binding()
            k = T.alloc_var("int32", init=0)
            while k < cols and x[row, k] > 0:
                if x[row, k] > 2.0:
                    y[row] = -1
                    T.thread_return()
                k += 1
            y[row] = k
    return count_while_positive


def halving_scan(threads=128):
    """Threads at or past ``n`` return at once; the others walk an 8 x 8 block of their
    row (an unrolled loop inside a serial one), returning from the inner loop with the
    negated running value at the first entry above 5, halving it after each inner loop."""

    @T.prim_func
    def halving_scan(x: T.Tensor((threads, 8, 8), "float32"), y: T.Tensor((threads,), "float32"),
                     n: T.int32):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            if tx >= n:
                T.thread_return()
            acc = T.alloc_var("float32", init=0.0)
            for a in T.serial(8):
                for c in T.unroll(8):
                    if x[tx, a, c] > 5.0:
                        y[tx] = -acc
                        T.thread_return()
                    acc += x[tx, a, c]
                acc *= 0.5
            y[tx] = acc
    return halving_scan


def test_return_in_nested_loops(tmp_path):
    func = halving_scan()
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert "    if tx >= n:\n        returned[0] = 1\n    if returned[0] == 0:" in src
    assert "for c in cutlass.range_constexpr(0, 8):\n                    if returned[0] == 0:" in src
    assert "                if returned[0] == 0:\n                    acc[0] = acc[0] * " in src
    assert "        if returned[0] == 0:\n            y[tx] = acc[0]" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def test_return_in_serial_loop(tmp_path):
    func = prefix_until_negative()
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    body = src[src.index("returned = cute.make_rmem_tensor((1,), cutlass.Int32)"):]
    assert "returned[0] = 0\n    for k in cutlass.range(0, 16):\n        if returned[0] == 0:" in body
    assert "y[row] = acc[0]\n                returned[0] = 1" in body
    assert "            if returned[0] == 0:\n                acc[0] = acc[0] + x[row, k]" in body
    assert "    if returned[0] == 0:\n        y[row] = acc[0] * cutlass.Float32(2.0)" in body
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def test_return_in_while_loop(tmp_path):
    func = count_while_positive()
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    # the loop stops on the flag (its condition is computed before the loop and at the
    # end of each iteration)
    assert re.search(r"(tc_more\d+) = k\[0\] < 16 and .* and returned\[0\] == 0\n    while \1:", src)
    assert "            y[row] = -1\n            returned[0] = 1\n        if returned[0] == 0:\n" \
           "            k[0] = k[0] + 1" in src
    assert "    if returned[0] == 0:\n        y[row] = k[0]" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).path.endswith(".cubin")


def _returning(where):
    @T.prim_func
    def returning(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128, 4), "float32")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            for k in T.serial(4):
                if A[tx, k] < 0 and where != "pipelined":
                    T.thread_return()
                if where == "barrier_in_loop":
                    T.sync_threads()
                B[tx, k] = A[tx, k]
            if where == "parallel_after":
                for i in T.Parallel(128):
                    s[i] = A[i, 0]
                T.copy(s, B[:, 0])
            if where == "pipelined":
                for k in T.Pipelined(4, num_stages=2):
                    if A[tx, k] < 0:
                        T.thread_return()
    return returning


def test_collectives_after_a_loop_return_refused():
    with pytest.raises(FrontendError, match=r"a statement after T\.thread_return\(\) needs every "
                                            r"thread of the block .*T\.thread_return\(\) at line"):
        _returning("parallel_after")
    with pytest.raises(FrontendError, match=r"a statement in the loop that holds a "
                                            r"T\.thread_return\(\) needs every thread"):
        _returning("barrier_in_loop")
    with pytest.raises(FrontendError, match=r"T\.thread_return\(\) inside a T\.Pipelined loop"):
        _returning("pipelined")


@pytest.mark.gpu
def test_return_in_serial_loop_matches_torch():
    import torch

    x = torch.randn(256, 16, device="cuda") + 1.0
    y = torch.empty(256, device="cuda")
    tilecute.compile(prefix_until_negative())(x, y)
    neg = x < 0
    first = torch.where(neg.any(1), neg.float().argmax(1), torch.full_like(y, 16, dtype=torch.long))
    cols = torch.arange(16, device="cuda")[None, :]
    partial = (x * (cols < first[:, None])).sum(1)
    want = torch.where(neg.any(1), partial, 2.0 * partial)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_return_in_while_loop_matches_torch():
    import torch

    x = torch.rand(256, 16, device="cuda") * 2.2 - 0.05
    y = torch.empty(256, device="cuda", dtype=torch.int32)
    tilecute.compile(count_while_positive())(x, y)
    want = []
    for r in x.tolist():
        k, out = 0, None
        while k < 16 and r[k] > 0:
            if r[k] > 2.0:
                out = -1
                break
            k += 1
        want.append(k if out is None else out)
    assert y.tolist() == want


@pytest.mark.gpu
def test_return_in_nested_loops_matches_torch():
    import torch

    x = torch.rand(128, 8, 8, device="cuda") * 5.5
    y = torch.full((128,), 7.0, device="cuda")
    tilecute.compile(halving_scan())(x, y, 100)
    want = []
    for t, block in enumerate(x.tolist()):
        if t >= 100:
            want.append(7.0)  # returned at once: untouched
            continue
        acc, done = 0.0, False
        for row in block:
            for v in row:
                if v > 5.0:
                    acc, done = -acc, True
                    break
                acc += v
            if done:
                break
            acc *= 0.5
        want.append(acc)
    torch.testing.assert_close(y, torch.tensor(want, device="cuda"), rtol=1e-5, atol=1e-4)
