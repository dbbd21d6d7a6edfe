"""TVMScript's while frame, ``with T.While(cond): body``, is the ``while cond: body`` loop
(TileLang's own tests write it around a fragment-held state)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func


def halvings(n=256):
    """Each thread counts how often its value halves before it drops below 1."""

    @T.prim_func
    def count(X: T.Tensor((n,), "float32"), Steps: T.Tensor((n,), "int32")):
        with T.Kernel(n // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("float32")
            k = T.alloc_var("int32")
            v = X[bx * 128 + tx]
            k = 0
            with T.While(v >= 1.0):
                v = v * 0.5
                k = k + 1
            Steps[bx * 128 + tx] = k

    return count


def test_while_frame_is_the_while_loop(tmp_path):
    func = halvings()
    text = print_func(func)
    assert "while v[0] >= T.float32(1.0):" in text, text
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_frames_take_the_condition_by_keyword_too():
    """TileLang's ``While(condition)`` / ``If(condition)``: ``condition=`` as well."""
    @T.prim_func
    def kw(A: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            k = T.alloc_var("int32")
            k = 0
            with T.While(condition=k < 3):
                k = k + 1
            with T.If(condition=k == 3), T.Then():
                A[0] = k

    text = print_func(kw)
    assert "while k[0] < 3:" in text and "if k[0] == 3:" in text, text
    with pytest.raises(T.FrontendError, match=r"T.While takes one argument.*\(got unroll=\)"):
        @T.prim_func
        def extra(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                with T.While(A[0] < 3, unroll=2):
                    A[0] = A[0] + 1


def test_while_frame_takes_one_condition():
    with pytest.raises(T.FrontendError, match=r"T.While takes one argument"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                with T.While():
                    A[0] = 1


@pytest.mark.gpu
def test_while_frame_on_gpu():
    import torch

    x = torch.rand(256, device="cuda") * 1000
    steps = torch.empty(256, device="cuda", dtype=torch.int32)
    tilecute.compile(halvings())(x, steps)
    ref = torch.where(x >= 1, torch.floor(torch.log2(x)).int() + 1, torch.zeros_like(steps))
    assert torch.equal(steps, ref)
