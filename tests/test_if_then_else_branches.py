"""``T.if_then_else(cond, a, b)`` is TVM's ``if_then_else``: only the branch taken is
evaluated, and TileLang programs guard reads that would leave a buffer with it (a stencil's
``s[i, j - 1]`` at ``j == 0``, ``X[g]`` past the tensor's end).  CuTe's ``select_``
evaluates both sides, so the code generator reads a shared or global element inside a
branch into a temporary under the branch's condition (codegen/bounds.py); a read that
also happens outside any branch stays as it is."""

import re

import pytest

import tilecute
import tilecute.language as T


def stencil(n=1000, rows=64, cols=64):
    @T.prim_func
    def shifts(A: T.Tensor((rows, cols), T.float32), X: T.Tensor((n,), T.float32),
               B: T.Tensor((rows, cols), T.float32), Y: T.Tensor((1024,), T.float32)):
        with T.Kernel(8, threads=128) as bx:
            s = T.alloc_shared((rows, cols), T.float32)
            T.copy(A, s)
            for i, j in T.Parallel(rows, cols):
                B[i, j] = T.if_then_else(j > 0, s[i, j - 1], 0.0) \
                    + T.if_then_else(j < cols - 1, s[i, j + 1], 0.0) \
                    + T.if_then_else(i < rows - 1, s[i + 1, j], s[i, j]) * 0.5 + s[i, j]
            g = bx * 128 + T.get_thread_binding()
            Y[g] = T.if_then_else(g < n, X[g] * 2.0, -1.0)
    return shifts


def masked_by_table(rows=32, n=6):
    """A shared (n, n) table read only where ``i < n and j < n`` let C's ``&&`` reach it
    (a tree-attention ancestor mask over a (rows, 64) score tile)."""
    @T.prim_func
    def mask(A: T.Tensor((rows, 64), T.float32), M: T.Tensor((n, n), T.int32),
             B: T.Tensor((rows, 64), T.float32)):
        with T.Kernel(1, threads=128) as _:
            t = T.alloc_shared((n, n), T.int32)
            T.copy(M, t)
            for i, j in T.Parallel(rows, 64):
                B[i, j] = T.if_then_else(i < n and j < n and t[i, j] == 1, A[i, j], -1.0)
    return mask


def test_a_read_after_and_happens_where_the_and_reaches_it():
    """The table's element past its rows or columns is never read (the vectorizer took it
    as read whatever the ``and``'s first operands: a two-lane vector load before them)."""
    body = _body(tilecute.compile(masked_by_table()).get_kernel_source())
    j = r"\(j \+ tc_lane\d+\)"
    assert re.search(rf"if i < 6 and {j} < 6:\n\s+tc_ld\d+ = t\[i \* 6 \+ {j}\]", body), body
    assert "t.iterator" not in body, body


def _body(src):
    return src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]


def test_branch_reads_happen_under_their_condition():
    body = _body(tilecute.compile(stencil()).get_kernel_source())
    j = r"\(j \+ tc_lane\d+\)"  # (the nest runs 4 lanes a thread step)
    # each shifted read of s sits in a temporary filled only where its branch is taken
    for cond, index in ((rf"{j} > 0", rf"i \* 64 \+ {j} - 1"), (rf"{j} < 63", rf"i \* 64 \+ {j} \+ 1"),
                        (r"i < 63", rf"\(i \+ 1\) \* 64 \+ {j}")):
        assert re.search(rf"if {cond}:\n\s+tc_ld\d+ = s\[{index}\]", body), body
    # none is read as a vector (that read would run for every lane, the last row's past s);
    # s[i, j], read outside any branch too, still is
    assert body.count("s.iterator") == 1 and "s.iterator + cute.assume(i * 64 + j," in body, body
    # outside a parallel nest: the branch condition alone (it proves g < 1000, the bounds)
    assert re.search(r"if g < 1000:\n\s+tc_ld\d+ = X\[g\]", body), body


@pytest.mark.parametrize("program", [stencil, masked_by_table])
def test_builds_a_cubin(program, tmp_path):
    assert tilecute.build_cubin(program(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_branch_reads_on_gpu():
    import torch
    a = torch.randn(64, 64, device="cuda")
    x = torch.randn(1000, device="cuda")
    b = torch.empty_like(a)
    y = torch.empty(1024, device="cuda")
    tilecute.compile(stencil())(a, x, b, y)
    left = torch.nn.functional.pad(a, (1, 0))[:, :-1]
    right = torch.nn.functional.pad(a, (0, 1))[:, 1:]
    down = torch.cat([a[1:], a[-1:]], dim=0)
    torch.testing.assert_close(b, left + right + down * 0.5 + a)
    want = torch.full((1024,), -1.0, device="cuda")
    want[:1000] = x * 2
    torch.testing.assert_close(y, want)


@pytest.mark.gpu
def test_read_after_and_on_gpu():
    import torch
    a = torch.randn(32, 64, device="cuda")
    m = (torch.rand(6, 6, device="cuda") > 0.5).to(torch.int32)
    b = torch.empty_like(a)
    tilecute.compile(masked_by_table())(a, m, b)
    want = torch.full_like(a, -1.0)
    want[:6, :6] = torch.where(m == 1, a[:6, :6], -1.0)
    torch.testing.assert_close(b, want)


def test_a_branch_with_an_effect_is_refused_by_name():
    """TVM's if_then_else runs an atomic in a branch only where the branch is taken;
    tilecute's Select would run it either way, so it is refused (T.Select keeps TVM's
    both-sides meaning and takes it)."""
    def program(form):
        @T.prim_func
        def effects(C: T.Tensor((1,), T.int32), Y: T.Tensor((128,), T.int32)):
            with T.Kernel(1, threads=128) as _:
                tx = T.get_thread_binding()
                Y[tx] = form(tx % 2 == 0, T.atomic_add(C[0], 1, return_prev=True), -1)
        return effects
    with pytest.raises(Exception, match="T.if_then_else: a branch calls atomic_add_ret"):
        program(T.if_then_else)
    assert tilecute.compile(program(T.Select)).get_kernel_source()
