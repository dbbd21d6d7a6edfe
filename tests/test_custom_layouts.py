"""TileLang's user-defined layouts in tilecute: ``T.Fragment`` on fragments
(``T.annotate_layout``) and on ``T.Parallel`` loops (``loop_layout=``), and ``T.Layout``
index maps on shared buffers.  Each program is checked for the layout tilecute chose (in
the printed IR), compiled to an sm_90a cubin on the CPU, its refusals named at their line,
and (``-m gpu``) compared with torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func as script
from tilecute.language import FrontendError
from tilecute.language.custom_layouts import MapError
from tilecute.transform.fragment_thread_regions import RegionError
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import run_passes

ROWS, WIDTH, THREADS = 4, 512, 128


# ---- programs, in TileLang's idioms ----------------------------------------------------------
def row_normalize(vec: int = 4):
    """Each row of x divided by its sum: x laid out by the program, `vec` consecutive
    elements of a row per thread, the rows' sums on every thread (replicate = threads)."""
    def x_layout(i, j):
        return j // vec % THREADS, i * (WIDTH // THREADS) + j // (vec * THREADS) * vec + j % vec

    @T.prim_func
    def row_norm(x: T.Tensor((ROWS, WIDTH), "float32"), out: T.Tensor((ROWS, WIDTH), "float32")):
        with T.Kernel(1, threads=THREADS):
            x_frag = T.alloc_fragment((ROWS, WIDTH), "float32")
            sums = T.alloc_fragment((ROWS,), "float32")
            T.annotate_layout({
                x_frag: T.Fragment(x_frag.shape, forward_fn=x_layout),
                sums: T.Fragment(sums.shape, forward_fn=lambda i, rep: (rep, i), replicate=THREADS),
            })
            for i, j in T.Parallel(ROWS, WIDTH):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, sums, dim=1)
            for i, j in T.Parallel(ROWS, WIDTH):
                out[i, j] = x_frag[i, j] / sums[i]
    return row_norm


def row_max_thread_per_row():
    """A fragment whose rows each live on one thread (thread i holds row i): the row's max
    is a loop over the thread's own registers, TileLang's thread-local reduce."""
    @T.prim_func
    def row_max(x: T.Tensor((128, 16), "float16"), out: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((128, 16), "float16")
            mx = T.alloc_fragment((128,), "float16")
            T.annotate_layout({frag: T.Fragment((128, 16), forward_thread_fn=lambda i, j: i,
                                                forward_index_fn=lambda i, j: j)})
            T.copy(x, frag)
            T.reduce_max(frag, mx, dim=1)
            T.copy(mx, out)
    return row_max


def vec4_loop_layout():
    def loop_fn(i, j):
        e = i * 32 + j
        return e // 4 % 128, e % 4 + e // 512 * 4

    layout = T.Fragment((128, 32), forward_fn=loop_fn)

    @T.prim_func
    def copy_vec4(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 32, loop_layout=layout):
                B[i, j] = A[i, j] * 2.0
    return copy_vec4


def lane_owner_loop_layout():
    """Thread i runs row i of the loop (32 lanes each): what each iteration writes is the
    thread that ran it, observable in the output."""
    @T.prim_func
    def owner(B: T.Tensor((128, 32), "int32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 32, loop_layout=T.Fragment((128, 32), lambda i, j: (i, j))):
                B[i, j] = T.get_thread_binding()
    return owner


def shared_map(fwd, n: int = 128):
    @T.prim_func
    def roundtrip(A: T.Tensor((n,), "int32"), Out: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            s = T.alloc_shared((n,), "int32")
            T.annotate_layout({s: T.Layout((n,), fwd)})
            for i in T.Parallel(n):
                s[i] = A[i]
            for i in T.Parallel(n):
                Out[i] = s[n - 1 - i]
    return roundtrip


def xor_transpose():
    """A 64 x 64 half tile through shared memory with an XOR swizzle of the program's own
    (8-element groups of each row permuted by the row), read back transposed."""
    @T.prim_func
    def transpose(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16")):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({s: lambda i, j: (i, (j // 8 ^ i % 8) * 8 + j % 8)})
            T.copy(A[bx * 64, 0], s)
            for j, i in T.Parallel(64, 64):
                B[j, bx * 64 + i] = s[i, j]
    return transpose


def padded_rows():
    """Rows padded to 72 elements (TileLang's padded shared layout, by hand)."""
    @T.prim_func
    def padded(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((64, 64), "float32")
            T.annotate_layout({s: T.Layout(s.shape, lambda i, j: [i * 72 + j])})
            T.copy(A, s)
            for i, j in T.Parallel(64, 64):
                B[i, j] = s[j, i] + 1.0
    return padded


def lowered(func) -> str:
    return script(run_passes(func, "sm_90a"))


# ---- what tilecute makes of them ---------------------------------------------------------
def test_fragment_layouts_become_tilecutes_blocked_and_replicated(tmp_path):
    func = row_normalize()
    text = script(func)
    assert 'x_frag = T.alloc_fragment((4, 512), "float32", layout=T.Layout("blocked", threads=128, vector=4))' in text
    assert 'sums = T.alloc_fragment((4,), "float32", layout=T.Layout("replicated"))' in text
    low = lowered(func)
    assert "T.Parallel(512, vector_width=4)" in low  # the program's 4 elements per thread step
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_vector_of_two_is_kept_over_tilecutes_own_choice(tmp_path):
    func = row_normalize(vec=2)
    assert 'layout=T.Layout("blocked", threads=128, vector=2)' in script(func)
    assert "T.Parallel(512, vector_width=2)" in lowered(func)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_row_per_thread_fragment(tmp_path):
    func = row_max_thread_per_row()
    assert 'layout=T.Layout("blocked", threads=128, vector=16)' in script(func)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_loop_layout_sets_the_lanes(tmp_path):
    func = vec4_loop_layout()
    assert 'loop_layout=T.Layout("blocked", threads=128, vector=4)' in script(func)
    assert "vector_width=4" in lowered(func)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    owner = lane_owner_loop_layout()
    assert "vector_width=32" in lowered(owner)  # thread i: iterations 32 i .. 32 i + 31
    assert tilecute.build_cubin(owner, "sm_90a", out_dir=str(tmp_path / "o")).kernel_names


def test_loop_layout_annotation_key_and_replicated_loops():
    everywhere = T.Fragment((64,), forward_fn=lambda i, r: (r, i), replicate=64)

    @T.prim_func
    def rep(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64, annotations={"parallel_loop_layout": everywhere}):
                B[i] = A[i]
    assert 'loop_layout=T.Layout("replicated")' in script(rep)
    assert "replicated=True" in lowered(rep)  # every thread runs every iteration


def test_printed_layouts_read_back():
    for func in (row_normalize(), vec4_loop_layout()):
        again = T.from_script(script(func))
        assert script(again) == script(func)
        assert lowered(again) == lowered(func)


def test_shared_index_maps(tmp_path):
    assert 'T.alloc_shared((128,), "int32", layout=T.Layout("row_major"))' in script(shared_map(lambda i: i))
    xor = script(shared_map(lambda i: i ^ 1))
    assert "s[i ^ 1] = A[i]" in xor
    assert "T.alloc_shared((138,), " in script(shared_map(lambda i: i + 10))  # grows, as TileLang
    assert "T.alloc_shared((255,), " in script(shared_map(lambda i: i * 2))
    func = xor_transpose()
    text = lowered(func)
    assert "B[j, bx * 64 + i] = s[i, (j // 8 ^ i % 8) * 8 + j % 8]" in script(func)
    assert "T.tma_copy" not in text  # element by element, never TMA
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / "x")).kernel_names
    func = padded_rows()
    assert "T.alloc_shared((4600,), " in script(func)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / "p")).kernel_names


def test_fragment_methods():
    base = T.Fragment((64,), forward_fn=lambda i: (i % 32, i // 32))
    assert base.get_thread_size() == 32 and base.get_output_shape() == [2]
    two = base.replicate(4)  # threads t, t + 32, t + 64, t + 96
    assert two.replicate_extent == 4 and two.get_thread_size() == 128
    t, _ = two.table()
    assert sorted(t[5].tolist()) == [5, 37, 69, 101]
    assert two.condense_rep_var().is_equal(two)
    wide = T.Fragment((2, 64), forward_fn=lambda i, j: (j, i)).repeat([1, 2], repeat_on_thread=True)
    assert wide.shape == (2, 128)
    assert wide.is_equal(T.Fragment((2, 128), forward_fn=lambda i, j: (j, i)))
    regs = base.repeat(2)  # on registers: (128,), thread i % 32, register i // 32
    assert regs.is_equal(T.Fragment((128,), forward_fn=lambda i: (i % 32, i // 32)))
    with pytest.raises(NotImplementedError, match="T.Fragment.inverse is not supported"):
        base.inverse()
    with pytest.raises(NotImplementedError, match="T.Fragment.map_forward_thread"):
        base.map_forward_thread([0])


def test_index_map_layout_methods():
    """TileLang's Layout.is_equal / get_input_shape / get_output_shape on T.Layout's index
    map: the maps compared by their values at every index, not by their expressions."""
    rows = T.Layout([16, 8], lambda i, j: i * 8 + j)
    assert rows.get_input_shape() == [16, 8] and rows.get_output_shape() == [128]
    assert rows.is_equal(T.Layout([16, 8], lambda r, c: c + r * 8))  # same map, other names
    assert not rows.is_equal(T.Layout([16, 8], lambda i, j: j * 16 + i))  # transposed
    assert not rows.is_equal(T.Layout([8, 16], lambda i, j: i * 16 + j))  # other shape
    assert not rows.is_equal(T.Layout([16, 8], lambda i, j: [i, j]))  # two outputs
    pair = T.Layout([4, 6], lambda i, j: [j // 2, i * 2 + j % 2])
    assert pair.get_output_shape() == [3, 8]
    assert pair.is_equal(T.Layout([4, 6], lambda i, j: [j // 2, j % 2 + 2 * i]))
    assert not rows.is_equal(T.Fragment((16, 8), forward_fn=lambda i, j: (i, j)))
    with pytest.raises(MapError, match="the shape .* is not a tuple of ints"):
        T.Layout([T.dynamic("n"), 8], lambda i, j: i * 8 + j).get_output_shape()
    with pytest.raises(NotImplementedError, match="T.Layout.expand is not supported"):
        rows.expand([4])
    with pytest.raises(NotImplementedError, match="T.Layout.get_linearized_forward_index"):
        rows.get_linearized_forward_index()


# ---- refusals ------------------------------------------------------------------------------
def refusal(body: str, threads: int = 128, extra: str = "") -> str:
    text = f"""\
import tilecute.language as T
{extra}

@T.prim_func
def k(X: T.Tensor((4, 512), "float32"), Y: T.Tensor((4, 512), "float32"),
      G: T.Tensor((64, 64), "float16"), H: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads={threads}):
        x = T.alloc_fragment((4, 512), "float32")
        m = T.alloc_fragment((4,), "float32")
        s = T.alloc_shared((64, 64), "float16")
{body}
"""
    with pytest.raises((FrontendError, LayoutError, MapError, RegionError)) as e:
        run_passes(T.from_script(text), "sm_90a")
    return str(e.value)


@pytest.mark.parametrize("body,message", [
    # partial layouts (test_partial_thread_fragments.py runs those TileLang takes): a range
    # not of whole warps, not a power of two wide, not contiguous
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (16 + j // 8, i * 8 + j % 8))})",
     "T.Fragment of 'x': the T.Fragment spreads it over threads 16..79: not a warp-aligned "
     "participating thread range"),
    ("        T.annotate_layout({m: T.Fragment(m.shape, forward_fn=lambda i, rep: (rep, i), replicate=96)})",
     "holds its elements on threads 0..95: 96 threads, not a positive power of two"),
    ("        T.annotate_layout({m: T.Fragment(m.shape, forward_fn=lambda i, rep: (i % 2 * 64 + rep, i // 2), replicate=32)})",
     "holds its elements on threads 0..31, 64..95, which are not one contiguous thread range"),
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (i % 2 * 64 + j // 16, (i // 2) * 16 + j % 16))})",
     "spreads it over threads 0..31, 64..95, which are not one contiguous thread range"),
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (j // 8, i * 8 + j % 8)),\n"
     "                           m: T.Fragment(m.shape, forward_fn=lambda i, rep: (64 + rep, i), replicate=64)})\n"
     "        T.copy(X, x)\n"
     "        T.reduce_sum(x, m, dim=1)",
     "uses 'm' (threads 64..127), 'x' (threads 0..63) that T.Fragment layouts put on "
     "different threads"),
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (j % 128, 0))})",
     "puts two elements in register 0 of thread 0"),
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (j, i))})",
     "puts an element on thread 511, but the block has 128 threads"),
    ("        T.annotate_layout({x: T.Fragment((4, 256), forward_fn=lambda i, j: (j % 128, i))})",
     "the T.Fragment's shape (4, 256) is not (4, 512)"),
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (127 - j % 128, i * 4 + j // 128))})",
     "tilecute takes a map whose thread is (f // v) % 128"),
    # a blocked fragment read across threads (tilecute would need it on every thread)
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (j // 4, i * 4 + j % 4))})\n"
     "        T.copy(X, x)\n"
     "        for i, j in T.Parallel(4, 512):\n"
     "            Y[i, j] = x[i, 511 - j]",
     "a T.Fragment layout that spreads it over the threads"),
    # a T.Fragment whose vector does not divide the loops over it
    ("        f = T.alloc_fragment((4, 6), \"float32\")\n"
     "        T.annotate_layout({f: T.Fragment(f.shape, forward_fn=lambda i, j: ((i * 6 + j) // 4, (i * 6 + j) % 4))})\n"
     "        for i, j in T.Parallel(4, 6):\n"
     "            f[i, j] = X[i, j]\n"
     "        for i, j in T.Parallel(4, 6):\n"
     "            Y[i, j] = f[i, j]",
     "its innermost extent 6 is not a multiple of 4"),
    # a loop layout other than the fragment's it walks
    ("        T.annotate_layout({x: T.Fragment(x.shape, forward_fn=lambda i, j: (j // 4, i * 4 + j % 4))})\n"
     "        for i, j in T.Parallel(4, 512, loop_layout=T.Fragment((4, 512), lambda i, j: (j // 2 % 128, 0 * i + i * 4 + j // 256 * 2 + j % 2))):\n"
     "            x[i, j] = X[i, j]",
     "meet on fragments ['x']"),
    ("        for i, j in T.Parallel(4, 512, loop_layout=T.Fragment((4, 512), forward_fn=lambda i, j, r: (r, i * 512 + j), replicate=128)):\n"
     "            x[i, j] = X[i, j]\n"
     "        T.copy(x, Y)",
     "running every iteration on every thread, but it walks fragment 'x'"),
    ("        for i, j in T.Parallel(4, 512, loop_layout=T.Fragment((4, 256), lambda i, j: (j % 128, i))):\n"
     "            Y[i, j] = X[i, j]",
     "T.Parallel: loop_layout: the T.Fragment's shape (4, 256) is not (4, 512)"),
    ("        for i, j in T.Parallel(4, 512, loop_layout=T.Layout((4, 512), lambda i, j: i)):\n"
     "            Y[i, j] = X[i, j]",
     "loop_layout is a T.Fragment over the loop's extents"),
    # shared index maps: many-to-one (TileLang issue 2632), and statements that take the tile
    ("        T.annotate_layout({s: lambda i, j: (i % 32, j)})",
     "T.Layout on shared buffer `s` must be injective: elements (0, 0) and (32, 0) both map "
     "to physical coordinates (0, 0)"),
    ("        T.annotate_layout({s: lambda i, j: (i, j ^ 1)})\n"
     "        acc = T.alloc_fragment((64, 64), \"float32\")\n"
     "        T.copy(G, s)\n"
     "        T.gemm(s, s, acc)\n"
     "        T.copy(acc, H)",
     "tilecute reads and writes a shared buffer with an index map of the program's (T.Layout) "
     "element by element"),
    ("        T.annotate_layout({s: lambda i, j: (i, j if j < 32 else 95 - j)})",
     "it branches on an index in Python"),
    ("        T.annotate_layout({s: T.Fragment(s.shape, lambda i, j: (i, j))})",
     "'s' is shared; a T.Fragment lays out a fragment"),
    ("        T.annotate_layout({x: lambda i, j: (i, j)})",
     "'x' is a fragment; its layout is a T.Fragment(shape, forward_fn, ...)"),
])
def test_refusals_name_the_form_and_say_why(body, message):
    msg = refusal(body)
    assert message in msg, msg
    assert "<script>:" in msg


def test_the_validator_checks_loop_layouts():
    import dataclasses

    from tilecute.ir import nodes as N
    from tilecute.ir.validate import ValidationError, validate

    func = vec4_loop_layout()
    validate(func)

    def bad(layout):
        class _Set(__import__("tilecute.ir.visitor", fromlist=["StmtMutator"]).StmtMutator):
            def visit_for(self, s):
                s = self.generic(s)
                return dataclasses.replace(s, loop_layout=layout) if s.loop_layout else s
        k = func.kernels[0]
        return dataclasses.replace(func, kernels=(_Set().visit_kernel(k),))
    with pytest.raises(ValidationError, match="loop_layout is a T.Parallel loop's blocked"):
        validate(bad(N.Layout("row_major")))


# ---- on the GPU ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("vec", [4, 2])
def test_row_normalize_on_gpu(vec):
    import torch
    x = torch.rand(ROWS, WIDTH, device="cuda") + 0.5
    out = torch.empty_like(x)
    tilecute.compile(row_normalize(vec))(x, out)
    torch.testing.assert_close(out, x / x.sum(dim=1, keepdim=True), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_row_max_on_gpu():
    import torch
    x = torch.randn(128, 16, device="cuda").half()
    out = torch.empty(128, device="cuda", dtype=torch.float16)
    tilecute.compile(row_max_thread_per_row())(x, out)
    torch.testing.assert_close(out, x.max(dim=1).values)


@pytest.mark.gpu
def test_loop_layouts_on_gpu():
    import torch
    a = torch.randn(128, 32, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(vec4_loop_layout())(a, b)
    torch.testing.assert_close(b, a * 2)
    owner = torch.empty(128, 32, device="cuda", dtype=torch.int32)
    tilecute.compile(lane_owner_loop_layout())(owner)
    want = torch.arange(128, device="cuda", dtype=torch.int32)[:, None].expand(128, 32)
    assert torch.equal(owner, want)  # thread i ran row i, as the loop layout says


@pytest.mark.gpu
@pytest.mark.parametrize("fwd", [lambda i: i, lambda i: i ^ 1, lambda i: i * 2, lambda i: i + 10,
                                 lambda i: 127 - i], ids=["identity", "xor", "times2", "plus10", "reverse"])
def test_shared_index_maps_on_gpu(fwd):
    import torch
    a = torch.arange(128, device="cuda", dtype=torch.int32)
    out = torch.empty_like(a)
    tilecute.compile(shared_map(fwd))(a, out)
    assert torch.equal(out, a.flip(0))


@pytest.mark.gpu
def test_swizzled_and_padded_shared_maps_on_gpu():
    import torch
    a = torch.randn(128, 64, device="cuda").half()
    b = torch.empty(64, 128, device="cuda", dtype=torch.float16)
    tilecute.compile(xor_transpose())(a, b)
    assert torch.equal(b, a.t())
    a = torch.randn(64, 64, device="cuda")
    b = torch.empty_like(a)
    tilecute.compile(padded_rows())(a, b)
    torch.testing.assert_close(b, a.t() + 1)
