"""The features issue 17's corpus needed (tests/corpus/, the programs that were strict
xfails): a fragment walked by a nest with unit loops, a Let inside a vectorized
T.Parallel, T.cumsum / T.cummax (a scan tile op), ``while`` loops, T.alloc_reducer /
T.finalize_reducer, warp shuffles (T.shfl_xor ...) and T.im2col.  Each: the IR it parses
to (printed), what the passes and the code generator make of it, and an error case."""

import re
import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def _script(body: str, params: str, grid: str = "4", threads: int = 128) -> str:
    return (f"import tilecute.language as T\n\n\n@T.prim_func\n"
            f"def kern({params}):\n    with T.Kernel({grid}, threads={threads}) as bx:\n"
            + textwrap.indent(textwrap.dedent(body), "        "))


def _allocs(func) -> dict:
    return {s.buffer.name: s for k in func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate)}


def _source(func, arch: str = "sm_90a") -> str:
    return emit_cute(lower(func, arch))


def _error(text: str, needle: str = "") -> str:
    """The frontend's error for ``text``; with ``needle``, it names the line holding it."""
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    if needle:
        line = next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)
        assert f"<script>:{line}:" in str(e.value), str(e.value)
    return str(e.value)


# ---- layout inference: a fragment walked by a nest with unit loops -----------------------------
UNIT_NEST = _script("""
    x = T.alloc_fragment((1, 256), "float32")
    acc = T.alloc_fragment((256,), "float32")
    T.clear(acc)
    for i, j in T.Parallel(1, 256):
        x[i, j] = A[bx, j]
        acc[j] += x[i, j] * x[i, j]
    for j in T.Parallel(256):
        B[bx, j] = acc[j]
""", 'A: T.Tensor((4, 256), "float32"), B: T.Tensor((4, 256), "float32")')


def test_unit_loops_keep_a_lower_rank_fragment_blocked():
    """``acc[j]`` under ``T.Parallel(1, 256)``: iteration (0, j) and element j are the same
    flat index, so ``acc`` is distributed like ``x`` (it was taken as replicated, and the
    nest writing both was refused)."""
    func = run_passes(T.from_script(UNIT_NEST), "sm_90a", until="infer_layouts")
    allocs = _allocs(func)
    assert allocs["acc"].layout == allocs["x"].layout == N.Layout("blocked", threads=128, vector=4)


def test_a_fragment_read_at_another_loop_variable_stays_replicated():
    text = UNIT_NEST.replace("T.Parallel(1, 256)", "T.Parallel(2, 128)").replace(
        '"float32")\n    acc', '"float32")\n    acc').replace("(1, 256)", "(2, 128)").replace(
        "acc[j] +=", "acc[i] +=")
    with pytest.raises(ValueError, match="replicated fragment 'acc'"):
        run_passes(T.from_script(text), "sm_90a")


# ---- code generator: a Let inside a vectorized T.Parallel body ---------------------------------
LET_IN_VECTOR_NEST = _script("""
    for i, j in T.Parallel(4, 64):
        row = bx * 4 + i
        B[row, j] = A[row, j] * 2.0
""", 'A: T.Tensor((16, 64), "float16"), B: T.Tensor((16, 64), "float16")', threads=32)


def test_vector_accesses_read_the_lets_of_the_body(tmp_path):
    """The vector load/store run before the body's Lets are bound: they (and their bounds
    conditions) use the Let's value, and the body still binds it per lane.  (256 iterations
    over 32 threads: 8 lanes each, TileLang's partition.)"""
    func = T.from_script(LET_IN_VECTOR_NEST)
    (inner,) = [s for s in walk_stmts(run_passes(func, "sm_90a").kernels[0].body)
                if isinstance(s, N.For) and s.vectors]
    assert {(v.buffer, v.chunk) for v in inner.vectors} == {("A", 8), ("B", 8)}
    src = _source(func)
    assert "A.iterator + cute.assume((bx * 4 + i) * 64 + j, divby=8)" in src
    assert "B.iterator + cute.assume((bx * 4 + i) * 64 + j, divby=8)" in src
    assert src.index("row = bx * 4 + i") < src.index("B.iterator")
    assert "row >= 0" not in src  # bx < 4, i < 4: the rows are proved in bounds
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_let_that_varies_with_the_lane_is_not_a_vector_row():
    """``B[r, j]`` with ``r = j % 2`` changes row within a vector: asking for vectors there
    is refused (the Let was opaque to the vectorizer, which took ``r`` for a fixed row)."""
    text = _script("""
        for j in T.Parallel(64, vector_width=8):
            r = j % 2
            B[r, j] = A[r, j]
    """, 'A: T.Tensor((2, 64), "float16"), B: T.Tensor((2, 64), "float16")')
    with pytest.raises(ValueError, match="vector_width=8.* is not legal here"):
        run_passes(T.from_script(text), "sm_90a")


def _roundtrip(func):
    """The printer writes what the frontend reads back, and the JSON form holds it."""
    from tilecute.ir.serialize import from_json

    assert T.from_script(func.script()) == func
    assert from_json(func.to_json()) == func
    return func


# ---- T.cumsum / T.cummax ------------------------------------------------------------------------
SCAN = _script("""
    s = T.alloc_shared((4, 64), "float32")
    T.copy(A[bx * 4, 0], s)
    T.cumsum(s, dim=1, reverse=True)
    T.copy(s, B[bx * 4, 0])
""", 'A: T.Tensor((16, 64), "float32"), B: T.Tensor((16, 64), "float32")')


def test_cumsum_parses_to_a_scan_and_builds(tmp_path):
    func = _roundtrip(T.from_script(SCAN))
    assert "        T.cumsum(s, s, dim=1, reverse=True)\n" in func.script()
    src = _source(func)
    # one warp per line of 64 (4 lines, 4 warps), two positions per lane, from the end
    assert "in cutlass.range(tc_tid // 32, 4, 4):" in src
    assert "= 63 - (tc_lane" in src and 'tcs.warp_inclusive_scan(' in src
    def kinds(arch):
        body = run_passes(T.from_script(SCAN), arch).kernels[0].body
        return [type(s).__name__ for s in body if not isinstance(s, N.Allocate)]
    assert kinds("sm_80") == ["For", "Barrier", "Scan", "Barrier", "For"]  # ordered by barriers
    assert kinds("sm_90a") == ["TmaCopy", "MBarrierWait", "Scan", "TmaCopy", "TmaStoreWait"]  # (TMA's own)
    for arch in ("sm_90a", "sm_80"):
        assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path / arch)).kernel_names


SCAN_3D = _script("""
    s = T.alloc_shared((2, 8, 32), "float32")
    T.copy(A[bx * 2, 0, 0], s)
    T.cumsum(s, dim=0)
    T.cumsum(s, dim=1)
    T.cumsum(s, dim=2)
    T.copy(s, B[bx * 2, 0, 0])
""", 'A: T.Tensor((8, 8, 32), "float32"), B: T.Tensor((8, 8, 32), "float32")')


def test_scan_lines_index_each_dim_without_moot_divisions(tmp_path):
    """A line's index over the other dims is written plainly: no `// 1`, and no `% n` where
    the line number is already below n (an integral image's two scans read s[pos * W + line]
    and s[line * W + pos])."""
    src = _source(T.from_script(SCAN_3D), "sm_80")
    lines = re.findall(r"tc_scan\d+\[tc_c\d+\] = s\[(.*)\]", src)
    assert [re.sub(r"tc_(line|pos)\d+", r"\1", x) for x in lines] == [
        "pos * 256 + line // 32 * 32 + line % 32",  # dim 0: line runs over (8, 32)
        "line // 32 * 256 + pos * 32 + line % 32",  # dim 1: line = (outer, inner)
        "line // 8 * 256 + line % 8 * 32 + pos"]  # dim 2: line runs over (2, 8)
    assert "// 1" not in src
    tilecute.build_cubin(T.from_script(SCAN_3D), "sm_80", out_dir=str(tmp_path))


def test_cummax_of_a_fragment_goes_through_shared_memory(tmp_path):
    func = T.from_script(_script("""
        f = T.alloc_fragment((64, 32), "float32")
        T.copy(A[0, 0], f)
        T.cummax(f, dim=0)
        T.copy(f, B[0, 0])
    """, 'A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")'))
    lowered = run_passes(func, "sm_90a", until="lower_tile_ops")
    (scan,) = [s for s in walk_stmts(lowered.kernels[0].body) if isinstance(s, N.Scan)]
    assert (scan.kind, scan.dst, scan.dim) == ("max", scan.src, 0) and scan.src.startswith("f_scan")
    assert _allocs(lowered)[scan.src].buffer.scope == "shared"
    src = _source(func)
    assert "in cutlass.range(tc_tid // 32, 32, 4):" in src  # 32 columns, scanned down
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("call,message", [
    ("T.cumsum(s, dim=2)", "T.cumsum: dim=2 is out of range for 's'"),
    ("T.cumsum(A)", "'A' is a global buffer; T.cumsum scans shared or fragment buffers"),
    ("T.cumsum(f[0:2, :])", "T.cumsum takes a whole buffer or a part of a shared buffer"),
    ("T.cumsum(s[0:bx, :])", "T.cumsum: the extents of `s[0:bx, :]` must be known"),
    ("T.cumsum(s[0:2, :], t[0:2, :])", "'t' must have the shape and dtype of 's' (of the parts"),
    ("T.cummax(s, t)", "T.cummax: 't' must have the shape and dtype of 's'"),
    ("T.cumsum(s, annotations={'a': 1})", "annotations"),
])
def test_scan_errors_name_the_form_and_line(call, message):
    text = _script(f"""
        s = T.alloc_shared((4, 64), "float32")
        t = T.alloc_shared((4, 32), "float32")
        f = T.alloc_fragment((4, 64), "float32")
        {call}
    """, 'A: T.Tensor((16, 64), "float32")')
    assert message in _error(text, call)


# ---- while --------------------------------------------------------------------------------------
WHILE = _script("""
    i = T.alloc_var(T.int32)
    i = bx
    while i < 64:
        B[i] = A[i] * 2.0
        i += 4
""", 'A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")')


def test_while_parses_and_builds(tmp_path):
    func = _roundtrip(T.from_script(WHILE))
    assert "        while i[0] < 64:\n" in func.script()
    src = _source(func)
    assert "    while i[0] < 64:\n" in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_while_known_at_parse_time():
    never = T.from_script(WHILE.replace("while i < 64:", "while 1 > 2:"))  # no loop
    assert not [s for s in walk_stmts(never.kernels[0].body) if isinstance(s, N.While)]
    msg = _error(WHILE.replace("while i < 64:", "while True:"), "while True")
    assert "`while` with a condition that is true at parse time never ends" in msg
    msg = _error(WHILE.replace("            i += 4\n", "            i += 4\n        else:\n"
                                                       "            i = 0\n"), "while i")
    assert "while-else is not supported" in msg


def test_barriers_inside_a_while_body_see_the_next_iteration():
    """The body runs again: a shared buffer read at its end and written at its start
    needs a barrier before the write (as in a loop)."""
    func = T.from_script(_script("""
        s = T.alloc_shared((128,), "float32")
        i = T.alloc_var(T.int32)
        i = 0
        while i < 4:
            for j in T.Parallel(128):
                s[j] = A[i * 128 + j]
            for j in T.Parallel(128):
                B[i * 128 + j] = s[127 - j]
            i += 1
    """, 'A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")'))
    body = run_passes(func, "sm_90a").kernels[0].body
    (loop,) = [s for s in body if isinstance(s, N.While)]
    assert [type(s).__name__ for s in loop.body][:4] == ["Barrier", "For", "Barrier", "For"]


# ---- T.alloc_reducer / T.finalize_reducer ---------------------------------------------------------
REDUCER = _script("""
    r = T.alloc_reducer(16, "float32", replication="all")
    T.clear(r)
    for i, j in T.Parallel(16, 64):
        r[i] += A[i, j]
    T.finalize_reducer(r)
    for i in T.Parallel(16):
        B[i] = r[i]
""", 'A: T.Tensor((16, 64), "float32"), B: T.Tensor((16,), "float32")', grid="1")


def test_reducer_accumulates_distributed_and_finalizes(tmp_path):
    func = _roundtrip(T.from_script(REDUCER))
    assert '        r = T.alloc_reducer((16,), "float32", op="sum", replication="all")\n' in func.script()
    lowered = run_passes(func, "sm_90a")
    assert _allocs(lowered)["r"].layout == N.Layout("replicated")
    nests = [s for s in lowered.kernels[0].body if isinstance(s, N.For)]
    # the clear runs on every thread (each clears its copy); the accumulation once per
    # iteration, spread over the threads
    assert [n.replicated for n in nests] == [True, False, False]
    (fin,) = [s for s in lowered.kernels[0].body if isinstance(s, N.FinalizeReducer)]
    assert fin.scratch == "r_scratch" and _allocs(lowered)["r_scratch"].buffer.shape == (N.Const(64, "int32"),)
    src = _source(func)
    assert 'r[tc_r' in src and 'tcr.warp_allreduce(r[tc_r' in src
    assert 'tcr.block_allreduce(r, "sum", r_scratch, 4, 4)' in src
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("old,new,message", [
    ('replication="all"', 'replication="some"', "replication='some': TileLang's legacy reducer"),
    ('replication="all"', 'op="bitand", replication="all"',
     "bitwise reducer op 'bitand' requires an integer dtype, got float32"),
    ("T.finalize_reducer(r)", "T.finalize_reducer(r, B)", "dst=`B`: reducer 'r' has replication="),
    # TileLang's checks of batch (a hint: any valid batch gives the same code)
    ("T.finalize_reducer(r)", "T.finalize_reducer(r, batch=0)", "batch must be >= 1, got 0"),
    ("T.finalize_reducer(r)", "T.finalize_reducer(r, batch=32)",
     "batch (32) exceeds total output elements (16)"),
    ("T.finalize_reducer(r)", "T.finalize_reducer(r, batch=3)",
     "batch (3) must evenly divide total output elements (16)"),
    ("T.finalize_reducer(r)", "T.finalize_reducer(A)", "'A' is not a T.alloc_reducer buffer"),
])
def test_reducer_errors(old, new, message):
    msg = _error(REDUCER.replace(old, new), new or "alloc_reducer")
    assert message in msg and "prim_func 'kern'" in msg, msg


# ---- warp shuffles ------------------------------------------------------------------------------
SHUFFLE = _script("""
    v = T.alloc_local((1,), "float32")
    v[0] = A[bx * 32 + T.get_thread_binding(0)]
    v[0] = v[0] + T.shfl_xor(v[0], 16)
    v[0] = v[0] + T.shfl_down(v[0], 1, 8)
    v[0] = T.shfl_up(v[0], 2, width=16) + T.shfl_sync(v[0], 0, mask=0xFFFF)
    B[bx * 32 + T.get_thread_binding(0)] = v[0]
""", 'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")', threads=32)


def test_shuffles_print_and_build(tmp_path):
    func = _roundtrip(T.from_script(SHUFFLE))
    assert "T.shfl_xor(v[0], 16, 32, T.uint32(4294967295))" in func.script()
    src = _source(func)
    # CUDA's c operand: (32 - width) << 8, | 31 except for shfl.up
    assert "cute.arch.shuffle_sync_bfly(v[0], offset=16, mask_and_clamp=31)" in src
    assert "cute.arch.shuffle_sync_down(v[0], offset=1, mask_and_clamp=6175)" in src
    assert "cute.arch.shuffle_sync_up(v[0], offset=2, mask_and_clamp=4096)" in src
    assert "cute.arch.shuffle_sync(v[0], offset=0, mask_and_clamp=31, mask=65535)" in src
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("call,message", [
    ("T.shfl_xor(x, 1, 48)", "T.shfl_xor: width=48 must be a power of two from 1 to 32"),
    ("T.shfl_down(x, 1.5)", "T.shfl_down: delta must be an integer"),
    ("T.shfl_sync(x, 0, mask=0)", "T.shfl_sync: mask=0x0 must be a nonzero 32-bit lane mask"),
    ("T.shfl_up(x, 1, bogus=2)", "T.shfl_up"),
])
def test_shuffle_errors(call, message):
    msg = _error(_script(f"""
        x = T.float32(1.0)
        y = {call}
    """, 'A: T.Tensor((128,), "float32")'), call)
    assert message in msg, msg


TVM_SHUFFLE = SHUFFLE.replace("T.shfl_xor(v[0], 16)", "T.tvm_warp_shuffle(0xFFFFFFFF, v[0], "
                                "T.get_thread_binding(0) ^ 16, 32, 32)").replace(
    "T.shfl_down(v[0], 1, 8)", "T.tvm_warp_shuffle_down(0xFFFFFFFF, v[0], 1, 8, 32)").replace(
    "T.shfl_up(v[0], 2, width=16)", "T.tvm_warp_shuffle_up(0xFFFFFFFF, v[0], 2, 16, 32)")


def test_tvm_warp_shuffles_are_cudas_shuffles(tmp_path):
    """TVM's T.tvm_warp_shuffle(mask, value, lane, width, warp_size) (and _down / _up, with
    a delta), which TileLang exports and its Hadamard example uses: __shfl*_sync(mask,
    value, lane, width), tilecute's T.shfl_sync / shfl_down / shfl_up."""
    func = _roundtrip(T.from_script(TVM_SHUFFLE))
    text = func.script()
    assert "T.shfl_sync(v[0], T.get_thread_binding(0) ^ 16, 32, T.uint32(4294967295))" in text
    assert "T.shfl_down(v[0], 1, 8, T.uint32(4294967295))" in text
    assert "T.shfl_up(v[0], 2, 16, T.uint32(4294967295))" in text
    same = T.from_script(SHUFFLE.replace("T.shfl_xor(v[0], 16)", "T.shfl_sync(v[0], "
                                         "T.get_thread_binding(0) ^ 16)"))
    assert text == same.script()
    assert tilecute.build_cubin(func, "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("call,message", [
    ("T.tvm_warp_shuffle(0xFFFFFFFF, x, 1, 32, 64)",
     "T.tvm_warp_shuffle: warp_size=64; a CUDA warp has 32 lanes"),
    ("T.tvm_warp_shuffle_down(0xFFFFFFFF, x, 1, 48, 32)",
     "T.tvm_warp_shuffle_down: width=48 must be a power of two from 1 to 32"),
    ("T.tvm_warp_shuffle_up(0, x, 1, 32, 32)",
     "T.tvm_warp_shuffle_up: mask=0x0 must be a nonzero 32-bit lane mask"),
])
def test_tvm_warp_shuffle_errors(call, message):
    msg = _error(_script(f"""
        x = T.float32(1.0)
        y = {call}
    """, 'A: T.Tensor((128,), "float32")'), call)
    assert message in msg, msg


@pytest.mark.gpu
def test_tvm_warp_shuffle_butterfly_matches_torch():
    """A warp sum by xor butterflies written with TVM's shuffle, as TileLang's Hadamard
    example writes its exchanges."""
    import torch

    text = _script("""
        v = T.alloc_local((1,), "float32")
        tx = T.get_thread_binding(0)
        v[0] = A[bx * 32 + tx]
        for k in T.unroll(5):
            v[0] = v[0] + T.tvm_warp_shuffle(0xFFFFFFFF, v[0], tx ^ (1 << k), 32, 32)
        B[bx * 32 + tx] = v[0]
    """, 'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")', threads=32)
    kernel = tilecute.compile(T.from_script(text))
    a = torch.randn(128, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    want = a.view(4, 32).sum(dim=1, keepdim=True).expand(4, 32).reshape(128)
    torch.testing.assert_close(b, want, atol=1e-4, rtol=1e-4)


# ---- T.im2col -----------------------------------------------------------------------------------
IM2COL = _script("""
    tile = T.alloc_shared((64, 32), "float16")
    T.im2col(img, tile, bx, 1, 3, 2, 1, 1)
    T.copy(tile, col[bx * 64, 32])
""", 'img: T.Tensor((1, 16, 16, 16), "float16"), col: T.Tensor((64, 144), "float16")', grid="1")


def test_im2col_lowers_to_a_padded_gather(tmp_path):
    func = _roundtrip(T.from_script(IM2COL))
    assert "        T.im2col(img, tile, bx, 1, 3, 2, 1, 1)\n" in func.script()
    lowered = run_passes(func, "sm_90a", until="lower_tile_ops").script()
    lowered = re.sub(r"(im2col_[mkhw])\d+", r"\1", lowered)  # (fresh names' numbers)
    # OH = OW = (16 + 2 - 2 - 1) // 2 + 1 = 8; row m -> (m // 64, m % 64 // 8, m % 8);
    # column k -> (k // 48, k // 16 % 3, k % 16); h = oh * 2 + kh - 1
    assert re.search(r"im2col_m = bx \* 64 \+ i\d+\n", lowered)
    assert "im2col_h = im2col_m % 64 // 8 * 2 + im2col_k // 48 - 1" in lowered
    assert "im2col_w = im2col_m % 8 * 2 + im2col_k // 16 % 3 - 1" in lowered
    assert ("T.if_then_else(im2col_m < 64 and im2col_k < 144 and im2col_h >= 0 and "
            "im2col_h < 16 and im2col_w >= 0 and im2col_w < 16, img[im2col_m // 64, "
            "im2col_h, im2col_w, im2col_k % 16], T.float16(0.0))") in lowered
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("old,new,message", [
    ("T.im2col(img, tile, bx, 1, 3, 2, 1, 1)", "T.im2col(col, tile, bx, 1, 3, 2, 1, 1)",
     "'col' must be a 4-d (N, H, W, C) tensor parameter"),
    ("T.im2col(img, tile, bx, 1, 3, 2, 1, 1)", "T.im2col(img, tile, bx, 1, 3, 2, 1, 1, 'evict_first')",
     "eviction_policy='evict_first' is not supported"),
    ("T.im2col(img, tile, bx, 1, 3, 2, 1, 1)", "T.c2d_im2col(img, tile, bx, 1, 0, 2, 1, 1)",
     "kernel must be an int >= 1"),
])
def test_im2col_errors(old, new, message):
    msg = _error(IM2COL.replace(old, new), new)
    assert message in msg, msg


# ---- the scan helper's PTX ----------------------------------------------------------------------
cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
from tilecute.runtime.cute import scan as tcscan  # noqa: E402


@cute.kernel
def _scan_kernel(p: cute.Pointer, op: cutlass.Constexpr):
    x = cute.make_tensor(p, cute.make_layout((64,), stride=(1,)))
    tx, _, _ = cute.arch.thread_idx()
    lane = tx % 32
    vals = cute.make_rmem_tensor((2,), cutlass.Float32)
    for c in cutlass.range_constexpr(2):
        vals[c] = x[lane * 2 + c]
    tcscan.warp_inclusive_scan(vals, op, lane)
    for c in cutlass.range_constexpr(2):
        x[lane * 2 + c] = vals[c]


@cute.jit
def _scan_wrapper(p: cute.Pointer, op: cutlass.Constexpr):
    _scan_kernel(p, op).launch(grid=(1, 1, 1), block=(32, 1, 1))


@pytest.mark.parametrize("op,combine", [("sum", r"add\.f32"), ("max", r"max\.f32")])
def test_warp_inclusive_scan_ptx(op, combine, tmp_path, monkeypatch):
    """Five shuffles up for the lanes' totals and one for the carry into each lane (clamp
    word 0: a lane below the offset reads itself, and the select keeps its value); one
    combine within the lane's two registers, five across lanes, two for the carry."""
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptr = cute.runtime.make_ptr(cutlass.Float32, 0, cute.AddressSpace.gmem, assumed_align=16)
    compiled = cute.compile(_scan_wrapper, ptr, op,
                            options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    ptx = compiled.__ptx__
    assert len(re.findall(r"shfl\.sync\.up\.b32\s+%r\d+\|?%?p?\d*,\s*%r\d+,\s*(?:%r\d+|\d+),\s*0,\s*-1;", ptx)) == 6, ptx
    assert len(re.findall(combine, ptx)) == 8


def test_a_reducer_update_beside_a_replicated_write_is_refused():
    text = _script("""
        r = T.alloc_reducer(16, "float32", replication="all")
        m = T.alloc_fragment((16,), "float32")
        T.clear(r)
        T.clear(m)
        for i, j in T.Parallel(16, 64):
            r[i] += A[i, j]
            m[i] = A[i, j]
    """, 'A: T.Tensor((16, 64), "float32")', grid="1")
    with pytest.raises(ValueError, match="combines into the reducer 'r' and also writes 'm'"):
        run_passes(T.from_script(text), "sm_90a")
