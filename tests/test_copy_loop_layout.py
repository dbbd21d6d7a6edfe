"""TileLang's ``T.copy(..., loop_layout=T.Fragment(...))``: the map of the copy's SIMT loop
(over its non-unit extents) onto the threads, as ``T.Parallel(..., loop_layout=)`` gives a
loop's (TileLang attaches it to the copy's parallel loop; a TMA copy cannot take one).
tilecute lowers such a copy to a parallel nest carrying that layout, never TMA."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def pairs_layout(rows, cols, threads=128):
    """Two consecutive elements a thread, thread after thread (row-major)."""
    return T.Fragment((rows, cols), forward_fn=lambda i, j: (
        (i * cols + j) // 2 % threads, (i * cols + j) % 2 + (i * cols + j) // (2 * threads) * 2))


def staged_scale(rows=64, cols=64, use_annotation=False):
    """A tile loaded into shared memory with the pairs map (the TMA load tilecute would
    choose is not taken), scaled through a fragment and stored."""
    layout = pairs_layout(rows, cols)

    @T.prim_func
    def staged_scale(A: T.Tensor((256, cols), "float32"), B: T.Tensor((256, cols), "float32")):
        with T.Kernel(256 // rows, threads=128) as bx:
            s = T.alloc_shared((rows, cols), "float32")
            f = T.alloc_fragment((rows, cols), "float32")
            if use_annotation:
                T.copy(A[bx * rows, 0], s, annotations={"parallel_loop_layout": layout})
            else:
                T.copy(A[bx * rows, 0], s, loop_layout=layout)
            T.copy(s, f)
            for i, j in T.Parallel(rows, cols):
                f[i, j] = f[i, j] * 3.0 + i
            T.copy(f, B[bx * rows, 0])
    return staged_scale


def fragment_round_trip(n=512):
    """A 1-D fragment read from and written to global memory under one map: four elements a
    thread, the loop layout of both copies and so the fragment's."""
    layout = T.Fragment((n,), forward_fn=lambda i: (i // 4 % 128, i % 4 + i // 512 * 4))

    @T.prim_func
    def round_trip(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((n,), "float16")
            T.copy(X, x, loop_layout=layout)
            for i in T.Parallel(n):
                x[i] = x[i] + x[i]
            T.copy(x, Y, loop_layout=layout)
    return round_trip


def async_rows(rows=32, cols=128):
    """T.async_copy with a loop layout: cp.async (TileLang's other SIMT copy)."""
    layout = T.Fragment((rows, cols), forward_fn=lambda i, j: (
        (i * cols + j) // 4 % 128, (i * cols + j) % 4 + (i * cols + j) // 512 * 4))

    @T.prim_func
    def async_rows(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), "float32")
            T.async_copy(A, s, loop_layout=layout)
            T.ptx_wait_group(0)
            T.sync_threads()
            for i, j in T.Parallel(rows, cols):
                B[i, j] = s[i, j] - 1.0
    return async_rows


def _copies(func):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Copy)]


@pytest.mark.parametrize("use_annotation", [False, True])
def test_the_copy_carries_the_layout_and_is_not_tma(use_annotation):
    func = staged_scale(use_annotation=use_annotation)
    load = _copies(func)[0]
    assert load.loop_layout == N.Layout("blocked", threads=128, vector=2)
    assert load.loop_shape == (64, 64)
    from tilecute.ir.serialize import from_json, to_json
    assert from_json(to_json(func)) == func  # (the IR JSON keeps both fields)
    assert 'loop_layout=T.Layout("blocked", threads=128, vector=2)' in func.script()
    lowered = run_passes(func, "sm_90a").script()
    assert "T.tma_copy(A" not in lowered, lowered  # the load the threads run
    assert 'loop_layout=T.Layout("blocked", threads=128, vector=2)' in lowered, lowered
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    # two elements a thread step: thread t starts at element 2 t of each 256-element step
    assert "(tc_k1 * 128 + tc_tid) * 2" in src, src


def test_without_the_layout_the_load_is_tma():
    # the same program without loop_layout: tilecute's own choice, a TMA load
    func = staged_scale()
    plain = T.from_script(func.script().replace(
        ', loop_layout=T.Layout("blocked", threads=128, vector=2)', ""))
    assert "T.tma_copy(A" in run_passes(plain, "sm_90a").script()


def test_fragment_copies_take_the_fragment_layout(tmp_path):
    func = fragment_round_trip()
    lowered = run_passes(func, "sm_90a").script()
    assert lowered.count('loop_layout=T.Layout("blocked", threads=128, vector=4)') == 2, lowered
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_async_copy_with_a_layout_builds(tmp_path):
    func = async_rows()
    lowered = run_passes(func, "sm_90a").script()
    assert "async_copy=True" in lowered and \
        'loop_layout=T.Layout("blocked", threads=128, vector=4)' in lowered, lowered
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def _refusal(body: str) -> str:
    text = ("import tilecute.language as T\n\n"
            "L = T.Fragment((64, 64), forward_fn=lambda i, j: ((i * 64 + j) % 128, (i * 64 + j) // 128))\n\n"
            "@T.prim_func\n"
            "def f(A: T.Tensor((64, 64), \"float32\"), B: T.Tensor((64, 64), \"float32\")):\n"
            "    with T.Kernel(1, threads=128, cluster_dims=2):\n"
            "        s = T.alloc_shared((64, 64), \"float32\")\n"
            "        t = T.alloc_shared((64, 64), \"float32\")\n"
            + body + "\n")
    with pytest.raises(Exception) as err:
        func = T.from_script(text)
        tilecute.compile(func, target="sm_90a").get_kernel_source()
    return str(err.value)


@pytest.mark.parametrize("body, words", [
    ("        T.copy(A[0:32, 0:64], s[0:32, 0:64], loop_layout=L)",
     ["loop_layout is a T.Fragment of shape (64, 64), but the copy's loop runs over (32, 64)"]),
    ("        T.copy(A, s, loop_layout=L, prefer_instruction=\"tma\")",
     ["T.copy", "loop_layout and prefer_instruction='tma'", "not a TMA copy"]),
    ("        T.copy_cluster(s, t, dst_block=1, loop_layout=L)",
     ["T.copy_cluster", "loop_layout=", "is not supported"]),
    ("        T.copy(A, s, loop_layout=T.Fragment((64, 64), forward_fn=lambda i, j: (j * 7 % 64, i)))",
     ["T.copy: loop_layout: the T.Fragment puts element f (row-major) on threads"]),
])
def test_refusals_name_the_copy(body, words):
    msg = _refusal(body)
    assert all(w in msg for w in words), msg


@pytest.mark.gpu
def test_copy_loop_layouts_on_gpu():
    import torch

    a = torch.randn(256, 64, device="cuda")
    b = torch.empty_like(a)
    for use_annotation in (False, True):
        tilecute.compile(staged_scale(use_annotation=use_annotation))(a, b)
        rows = torch.arange(64, device="cuda", dtype=torch.float32).repeat(4).view(256, 1)
        torch.testing.assert_close(b, a * 3 + rows)
    x = torch.randn(512, device="cuda").half()
    y = torch.empty_like(x)
    tilecute.compile(fragment_round_trip())(x, y)
    torch.testing.assert_close(y, x + x)
    a = torch.randn(32, 128, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(async_rows())(a, b)
    torch.testing.assert_close(b, a - 1)
