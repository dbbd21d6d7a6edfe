"""Global -> global nests load a thread's elements before storing any (the
``stage_global_loads`` pass): which nests are split, the generated source and PTX order,
the option that turns it off, and (GPU) the results."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.transform.pipeline import lower, run_passes


def permuted_copy(batch=2, seq=256, heads=4, dim=64, blk=64):
    """TileLang's attention-backward dQ post-processing idiom: an fp32 tensor laid out by
    ``T.annotate_layout`` copied to fp16."""
    shape = (batch, seq, heads, dim)

    @T.prim_func
    def permuted_copy(dQ: T.Tensor(shape, "float32"), dQ_out: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq, blk), heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: T.Layout(
                shape, lambda b, l, h, d: [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])})
            T.copy(dQ[bz, bx * blk:(bx + 1) * blk, by, :], dQ_out[bz, bx * blk:(bx + 1) * blk, by, :])

    return permuted_copy


def scaled_sum(bm=32, bn=32, threads=128, dtype="float32"):
    M = T.symbolic("M")

    @T.prim_func
    def scaled_sum(a: T.Tensor((M, 256), dtype), b: T.Tensor((M, 256), dtype),
                   c: T.Tensor((M, 256), dtype)):
        with T.Kernel(256 // bn, T.ceildiv(M, bm), threads=threads) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                c[by * bm + i, bx * bn + j] = a[by * bm + i, bx * bn + j] * 2 + b[by * bm + i, bx * bn + j]

    return scaled_sum


def gather_rows(n=4096, block=512):
    @T.prim_func
    def gather_rows(x: T.Tensor((n,), "float32"), idx: T.Tensor((n,), "int32"),
                    out: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):
                out[bx * block + i] = x[idx[bx * block + i]]

    return gather_rows


def in_place(n=4096, block=1024):
    @T.prim_func
    def in_place(x: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):
                x[bx * block + i] = x[bx * block + i] * 2

    return in_place


def small_per_thread(n=4096, block=512):
    @T.prim_func
    def small_per_thread(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):  # 4 floats a thread: one 16-byte vector
                y[bx * block + i] = x[bx * block + i] + 1

    return small_per_thread


def through_fragment(n=4096, block=1024):
    @T.prim_func
    def through_fragment(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            s = T.alloc_fragment((block,), "float32")
            T.copy(x[bx * block], s)
            for i in T.Parallel(block):
                y[bx * block + i] = s[i] + x[bx * block + i]

    return through_fragment


def halves_copy(rows=64, cols=64):
    """A copy whose loop_layout runs it on both halves of the block (replicate=2: element f
    on threads f // 2 % 64 and 64 + f // 2 % 64), which tilecute runs on every thread."""
    def both_halves(i, j, rep):
        f = i * cols + j
        return f // 2 % 64 + rep * 64, f % 2 + f // 128 * 2

    layout = T.Fragment((rows, cols), forward_fn=both_halves, replicate=2)

    @T.prim_func
    def halves_copy(x: T.Tensor((rows, cols), "float32"), y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(rows, cols, loop_layout=layout):
                y[i, j] = x[i, j] * 3

    return halves_copy


def staged(func, options=None) -> bool:
    f = run_passes(func, "sm_90a", options or {})
    return any(n.endswith("_staged") for n in re.findall(r"\b(\w+) = T.alloc_fragment", f.script()))


@pytest.mark.parametrize("factory", [permuted_copy, scaled_sum, gather_rows])
def test_global_nests_are_staged(factory):
    func = factory()
    assert staged(func), func.script()
    assert not staged(func, {"disable_load_staging": True})
    assert tilecute.build_cubin(func, "sm_90a").kernel_names


@pytest.mark.parametrize("factory", [in_place, small_per_thread, through_fragment, halves_copy])
def test_nests_left_as_written(factory):
    """The store's tensor read in the nest, one vector a thread, a fragment read, a
    replicated loop_layout: no split."""
    assert not staged(factory())


def test_replicated_loop_layout_copy_builds():
    """A replicated loop_layout's nest stays one nest on every thread (staged, its fragment
    was not replicated: the layout pass refused the program naming that fragment)."""
    func = halves_copy()
    assert 'loop_layout=T.Layout("replicated")' in run_passes(func, "sm_90a", {}).script()
    src = tilecute.compile(func, target="sm_90a").get_kernel_source()
    assert "y[i, j] = x[i, j] * cutlass.Float32(3" in src, src


def test_permuted_copy_loads_before_stores(tmp_path, monkeypatch):
    """Every load of a thread comes before its first store in the PTX (32 scalar loads,
    then four 16-byte stores); unstaged, loads and stores alternate."""
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    def ptx(options):
        path = tmp_path / f"k{len(options)}.py"
        path.write_text(emit_cute(lower(permuted_copy(), "sm_90a", options)))
        module = import_source(str(path), f"tilecute_stage_{len(options)}")
        monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
        return cute.compile(module.permuted_copy, *module.placeholder_args(),
                            options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__

    order = re.findall(r"\b(ld|st)\.global", ptx({}))
    assert order == ["ld"] * 32 + ["st"] * 4, order
    assert "st.global.v4" in ptx({})
    order = re.findall(r"\b(ld|st)\.global", ptx({"disable_load_staging": True}))
    assert order[:4] == ["ld", "st", "ld", "st"], order


def test_guarded_rows_keep_their_guard():
    """A symbolic extent's tail: both halves keep the bounds test; the staged register
    file is the nest's thread layout (each thread reads back what it wrote)."""
    src = tilecute.compile(scaled_sum(), target="sm_90a").get_kernel_source()
    assert "c_staged = cute.make_rmem_tensor((8,), cutlass.Float32)" in src, src
    assert src.count("if by * 32 + i < M:") >= 2, src


def test_row_tail_fill_is_left_out_where_the_store_cannot_run():
    """Past the last row the loads read 0 and the store does not run: nothing reads the
    staged registers there, so the fill has no per-lane path (Store.feeds)."""
    src = tilecute.compile(scaled_sum(), target="sm_90a").get_kernel_source()
    assert src.count("if by * 32 + i < M:") == 2, src
    assert "else:" not in src and "out of bounds" not in src, src


def rows_into_more_rows(bm=32, bn=32, threads=128):
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def rows_into_more_rows(a: T.Tensor((M, 256), "float32"), c: T.Tensor((N, 256), "float32")):
        with T.Kernel(256 // bn, T.ceildiv(N, bm), threads=threads) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                c[by * bm + i, bx * bn + j] = a[by * bm + i, bx * bn + j] + 1

    return rows_into_more_rows


def test_fill_stays_where_the_loads_fail_but_the_store_runs():
    """a has M rows, c has N: rows M..N-1 of c get the out-of-bounds reads' 0 + 1, so the
    fill's per-lane path (loads past a's end) stays."""
    src = tilecute.compile(rows_into_more_rows(), target="sm_90a").get_kernel_source()
    fill = src.split("if by * 32 + i < M:", 1)[1].split("if by * 32 + i < N:", 1)[0]
    assert "else:" in fill and "out of bounds" in fill, src
    assert "c_staged[" in fill.split("else:", 1)[1], src


@pytest.mark.gpu
@pytest.mark.parametrize("factory", [permuted_copy, scaled_sum, gather_rows])
def test_staged_results_on_gpu(factory):
    import torch

    func = factory()
    k, plain = tilecute.compile(func), tilecute.compile(func, options={"disable_load_staging": True})
    if factory is permuted_copy:
        dq = torch.randn(2, 256, 4, 64, device="cuda")
        outs = [torch.empty(2, 256, 4, 64, device="cuda", dtype=torch.float16) for _ in range(2)]
        k(dq, outs[0])
        plain(dq, outs[1])
        # element (b, l, h, d) of the copy is the tensor's element at the layout's place
        flat = dq.reshape(2, 32, 4, 8, 2, 32)
        b, l, h, d = torch.meshgrid(*[torch.arange(s, device="cuda") for s in (2, 256, 4, 64)],
                                    indexing="ij")
        ref = flat[b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2].half()
    elif factory is scaled_sum:
        a, b = torch.randn(200, 256, device="cuda"), torch.randn(200, 256, device="cuda")
        outs = [torch.zeros(200, 256, device="cuda") for _ in range(2)]
        k(a, b, outs[0])
        plain(a, b, outs[1])
        ref = a * 2 + b
    else:
        x = torch.randn(4096, device="cuda")
        idx = torch.randperm(4096, device="cuda").to(torch.int32)
        outs = [torch.empty(4096, device="cuda") for _ in range(2)]
        k(x, idx, outs[0])
        plain(x, idx, outs[1])
        ref = x[idx.long()]
    torch.testing.assert_close(outs[0], ref)
    torch.testing.assert_close(outs[1], ref)


def test_a_view_of_the_stored_tensor_is_the_same_storage():
    """``y = T.view(x, ...)`` then ``y[i] = x[i] * 2``: one storage, so no split."""
    @T.prim_func
    def scale_view(x: T.Tensor((4096,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            y = T.view(x, (4096,), "float32")
            for i in T.Parallel(1024):
                y[bx * 1024 + i] = x[bx * 1024 + i] * 2

    assert not staged(scale_view)


@pytest.mark.gpu
def test_rows_past_the_loads_get_their_zero_reads_on_gpu():
    import torch

    a = torch.randn(100, 256, device="cuda")
    c = torch.full((200, 256), -7.0, device="cuda")
    tilecute.compile(rows_into_more_rows())(a, c)
    ref = torch.ones(200, 256, device="cuda")
    ref[:100] += a
    torch.testing.assert_close(c, ref)
