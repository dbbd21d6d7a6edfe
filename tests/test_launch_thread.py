"""TVM's ``T.launch_thread(tag, extent)``, which TileLang programs write inside a T.Kernel
(``tx = T.launch_thread("threadIdx.x", 256)``) and which is how TileLang prints a T.Kernel
(``bx = T.launch_thread("blockIdx.x", 32)``, ``tx = T.launch_thread("threadIdx.x", 128)``,
... at the top of the body): inside a kernel the index of that dim, its extent the
kernel's; at the top, that T.Kernel.  Other extents and tags are refused by name."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


def partial_barriers():
    """Four groups of 64 threads, each meeting at its own named barrier (TileLang's
    sync_threads test idiom), then each thread writes its group."""

    @T.prim_func
    def groups(Out: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=256) as (bx,):
            tx = T.launch_thread("threadIdx.x", 256)
            group = tx // 64
            T.sync_threads(group + 1, 64)
            Out[tx] = group + bx

    return groups


def printed_kernel(rows: int = 64, cols: int = 128):
    """A T.Kernel as TileLang prints it: the launch frames, then the body."""

    @T.prim_func
    def doubled(A: T.Tensor((rows, cols), T.float32), B: T.Tensor((rows, cols), T.float32)):
        bx = T.launch_thread("blockIdx.x", 1)
        by = T.launch_thread("blockIdx.y", rows)
        tx = T.launch_thread("threadIdx.x", cols)
        ty = T.launch_thread("threadIdx.y", 1)
        tz = T.launch_thread("threadIdx.z", 1)
        B[by + bx, tx + ty + tz] = A[by, tx] * 2.0

    return doubled


def test_inside_a_kernel_it_is_the_thread_index():
    text = partial_barriers().script()
    assert "tx = T.get_thread_binding(0)" in text and "T.launch_thread" not in text, text


def test_block_tag_inside_a_kernel_is_the_block_variable():
    m = T.dynamic("m")

    @T.prim_func
    def rows(A: T.Tensor((m,), T.float32)):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            b = T.launch_thread("blockIdx.x", T.ceildiv(m, 128))
            tx = T.launch_thread("threadIdx.x", 128)
            if b * 128 + tx < m:
                A[b * 128 + tx] = 0.0

    assert "b = bx" in rows.script(), rows.script()


def test_printed_kernel_frames_are_that_kernel():
    text = printed_kernel().script()
    assert "with T.Kernel(1, 64, threads=(128, 1, 1)) as (bx, by):" in text, text
    assert "tx = T.get_thread_binding(0)" in text
    assert "ty = T.get_thread_binding(1)" in text


@pytest.mark.parametrize("make", [partial_barriers, printed_kernel], ids=["barriers", "printed"])
def test_builds_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _parse(body: str, kernel: bool = True):
    head = "    with T.Kernel(4, threads=128) as bx:\n" if kernel else ""
    text = f'''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((512,), T.float32)):
{head}{body}
'''
    return T.from_script(text)


@pytest.mark.parametrize("body,kernel,match", [
    ("        tx = T.launch_thread(\"threadIdx.x\", 64)\n        A[tx] = 0.0", True,
     "the extent must be the T.Kernel's threads along x, 128"),
    ("        b = T.launch_thread(\"blockIdx.x\", 8)\n        A[b] = 0.0", True,
     "the extent must be the T.Kernel's grid extent along x"),
    ("        v = T.launch_thread(\"vthread\", 2)\n        A[v] = 0.0", True,
     "thread='vthread' is not supported"),
    ("    tx = T.launch_thread(\"threadIdx.x\", 128)\n    tx2 = T.launch_thread(\"threadIdx.x\", 128)\n"
     "    A[tx] = 0.0", False, "threadIdx.x is launched twice"),
    ("    w = T.launch_thread(\"warp.x\", 4)\n    A[w] = 0.0", False,
     "thread='warp.x'; tilecute launches blockIdx"),
])
def test_refusals_name_the_rule(body, kernel, match):
    with pytest.raises(FrontendError, match=match):
        _parse(body, kernel)


@pytest.mark.gpu
def test_gpu_partial_barriers_match_torch():
    import torch

    out = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    tilecute.compile(partial_barriers())(out)
    torch.testing.assert_close(out.cpu(), torch.arange(256, dtype=torch.int32) // 64)


@pytest.mark.gpu
def test_gpu_printed_kernel_matches_torch():
    import torch

    a = torch.randn(64, 128, device="cuda")
    b = torch.zeros_like(a)
    tilecute.compile(printed_kernel())(a, b)
    torch.testing.assert_close(b, a * 2)


def test_eager_body_may_be_a_printed_kernel():
    @tilecute.jit
    def halve(A):
        n = T.const("n")
        A: T.Tensor((n,), T.float32)
        bx = T.launch_thread("blockIdx.x", n // 128)
        tx = T.launch_thread("threadIdx.x", 128)
        A[bx * 128 + tx] = A[bx * 128 + tx] * 0.5

    text = halve.get_tir(n=512).script()
    assert "with T.Kernel(4, threads=128) as bx:" in text, text
