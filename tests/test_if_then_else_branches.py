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


def test_branch_reads_happen_under_their_condition():
    src = tilecute.compile(stencil()).get_kernel_source()
    body = src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]
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


def test_builds_a_cubin(tmp_path):
    assert tilecute.build_cubin(stencil(), "sm_90a", out_dir=str(tmp_path)).kernel_names


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
