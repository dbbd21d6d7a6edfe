"""TileLang's cp.async groups, ``T.ptx_commit_group()`` and ``T.ptx_wait_group(n)``
(TVM's builtins: ``cp.async.commit_group`` / ``cp.async.wait_group n``), which TileLang's
``T.async_copy`` users, its raw ``T.ptx_cp_async`` tests and
examples/minference/example_vertical_slash_sparse_attn.py write (there after T.Parallel
nests annotated ``parallel_async_without_async_commit_wait``).  They were refused as
TileLang forms tilecute does not support.  TileLang's sync pass puts a barrier after every
wait_group; tilecute's barrier pass counts the wait as the landing of the program's raw
cp.async, so a read of another thread's copies gets a barrier after it.  CPU: IR, printer,
JSON round trip, the barrier's place, source, refusals, cubins; GPU: vs torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


def staged_transpose(rows=64, cols=64, steps=3):
    """Out[s] = In[s]^T for ``steps`` (rows, cols) fp16 slabs: each of 128 threads copies
    8-element row pieces of slab s+1 into the other half of a double buffer with raw
    cp.async and commits them as one group, waits with ``T.ptx_wait_group(1)`` for slab s
    (the newest group may stay in flight), and reads slab s transposed, elements other
    threads copied (a barrier must follow the wait)."""
    per = rows * cols // 8 // 128  # 16-byte pieces per thread per slab

    @T.prim_func
    def staged(In: T.Tensor((steps, rows, cols), "float16"),
               Out: T.Tensor((steps, cols, rows), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((2, rows, cols), "float16")
            t = T.get_thread_binding()
            for p in T.serial(per):
                piece = p * 128 + t
                T.ptx_cp_async(T.access_ptr(S[0, piece // (cols // 8), piece % (cols // 8) * 8], "w", 8),
                               T.access_ptr(In[0, piece // (cols // 8), piece % (cols // 8) * 8], "r", 8), 8)
            T.ptx_commit_group()
            for s in T.serial(steps):
                if s + 1 < steps:
                    for p in T.serial(per):
                        piece = p * 128 + t
                        T.ptx_cp_async(
                            T.access_ptr(S[(s + 1) % 2, piece // (cols // 8), piece % (cols // 8) * 8], "w", 8),
                            T.access_ptr(In[s + 1, piece // (cols // 8), piece % (cols // 8) * 8], "r", 8), 8)
                T.ptx_commit_group()
                T.ptx_wait_group(1)
                for i, j in T.Parallel(cols, rows):
                    Out[s, i, j] = S[s % 2, j, i]
    return staged


def one_shot(n=16):
    """TileLang's test idiom: raw cp.async into a 16-byte shared tile, commit, wait 0, and
    every thread reads the tile (thread 0's copy, read by all: a barrier after the wait)."""

    @T.prim_func
    def shot(x: T.Tensor((4 * n,), "uint8"), y: T.Tensor((4 * n,), "uint8")):
        with T.Kernel(1, threads=32) as bx:
            xs = T.alloc_shared((n,), "uint8")
            for ko in T.serial(4):
                T.ptx_cp_async(T.access_ptr(xs[0], "w", n), T.access_ptr(x[ko * n], "r", n), n)
                T.ptx_commit_group()
                T.ptx_wait_group(0)
                for i in T.Parallel(n):
                    y[ko * n + i] = xs[i]
    return shot


def annotated_nests(M=128, D=64, block=32):
    """T.Parallel nests with ``prefer_async`` and ``parallel_async_without_async_commit_wait``
    (TileLang: cp.async, no commit or wait of the nest's own), the program's commit and
    wait, then a reduction of the tile: out[r] = sum_j (X[r, j] + Y[r, j])."""

    @T.prim_func
    def nests(X: T.Tensor((M, D), "float16"), Y: T.Tensor((M, D), "float16"),
              out: T.Tensor((M,), "float32")):
        with T.Kernel(M // block, threads=128) as bx:
            xs = T.alloc_shared((block, D), "float16")
            ys = T.alloc_shared((block, D), "float16")
            acc = T.alloc_fragment((block, D), "float32")
            rs = T.alloc_fragment((block,), "float32")
            for i, j in T.Parallel(block, D, prefer_async=True,
                                   annotations={"parallel_async_without_async_commit_wait": True}):
                xs[i, j] = X[bx * block + i, j]
            for i, j in T.Parallel(block, D, prefer_async=True,
                                   annotations={"parallel_async_without_async_commit_wait": True}):
                ys[i, j] = Y[bx * block + i, j]
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            for i, j in T.Parallel(block, D):
                acc[i, j] = T.Cast("float32", xs[i, j]) + T.Cast("float32", ys[i, j])
            T.reduce_sum(acc, rs, dim=1)
            T.copy(rs, out[bx * block:(bx + 1) * block])
    return nests


def _calls(f, name):
    return [s for k in f.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and s.value.name == name]


def test_ir_printer_and_round_trip():
    f = staged_transpose()
    assert len(_calls(f, "ptx_commit_group")) == 2
    (wait,) = _calls(f, "ptx_wait_group")
    assert wait.value.args == (N.Const(1, "int32"),)
    text = print_func(f)
    assert "T.ptx_commit_group()" in text and "T.ptx_wait_group(1)" in text
    assert print_func(from_json(to_json(f))) == text


def test_a_barrier_follows_the_wait_before_other_threads_read():
    """The read of S (elements other threads copied) comes after the wait and a barrier;
    no barrier between the raw copies and the wait (they land by the wait)."""
    src = emit_cute(lower(staged_transpose(), "sm_90a"))
    lines = [ln.strip() for ln in src.splitlines()]
    w = lines.index("cute.arch.cp_async_wait_group(1)")
    assert lines[w - 1] == "cute.arch.cp_async_commit_group()"
    assert lines[w + 1].startswith("cute.arch.sync_threads()"), lines[w - 2:w + 4]
    assert lines.count("cute.arch.cp_async_commit_group()") == 2
    one = emit_cute(lower(one_shot(), "sm_90a"))
    ol = [ln.strip() for ln in one.splitlines()]
    w = ol.index("cute.arch.cp_async_wait_group(0)")
    assert ol[w + 1].startswith("cute.arch.sync_threads()")


def test_program_wait_with_tilecutes_own_nests():
    """tilecute's nests commit their own groups and the barrier before the tile's read
    waits for them; the program's commit and wait stay as written."""
    src = emit_cute(lower(annotated_nests(), "sm_90a"))
    assert "cute.arch.cp_async_wait_group(0)" in src
    assert src.count("cute.arch.cp_async_commit_group()") >= 1


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_cubins(arch, tmp_path):
    for i, f in enumerate((staged_transpose(), one_shot(), annotated_nests())):
        assert tilecute.build_cubin(f, arch, out_dir=str(tmp_path / str(i))).kernel_names


_ONE = '''
@T.prim_func
def one(G: T.Tensor((16, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((16, 64), "float16")
        n = T.alloc_var("int32")
        {stmt}
'''


@pytest.mark.parametrize("stmt,msg", [
    ("T.ptx_wait_group(n)", r"T.ptx_wait_group: num must be an int >= 0 known at parse time"),
    ("T.ptx_wait_group(-1)", r"T.ptx_wait_group: num must be an int >= 0 .* got -1"),
    ("T.ptx_wait_group(1.5)", r"T.ptx_wait_group: num must be an int"),
])
def test_refusals_name_the_form_and_line(stmt, msg):
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(_ONE.format(stmt=stmt))
    assert "<script>:7" in str(e.value)


@pytest.mark.parametrize("stmt", ["T.ptx_commit_group()", "T.ptx_wait_group(0)"])
def test_below_sm80_is_refused(stmt):
    with pytest.raises(Exception, match=r"T.ptx_(commit|wait)_group is cp.async's, sm_80\+; "
                                        r"the target is sm_75"):
        emit_cute(lower(T.from_script(_ONE.format(stmt=stmt)), "sm_75"))


@pytest.mark.gpu
def test_gpu_staged_transpose_and_one_shot():
    import torch

    x = torch.randn(3, 64, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(3, 64, 64, device="cuda", dtype=torch.float16)
    tilecute.compile(staged_transpose())(x, out)
    torch.testing.assert_close(out, x.transpose(1, 2), rtol=0, atol=0)
    b = torch.randint(0, 256, (64,), device="cuda", dtype=torch.uint8)
    y = torch.empty_like(b)
    tilecute.compile(one_shot())(b, y)
    assert torch.equal(y, b)
    X = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    Y = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    o = torch.empty(128, device="cuda")
    tilecute.compile(annotated_nests())(X, Y, o)
    torch.testing.assert_close(o, (X.float() + Y.float()).sum(1), rtol=1e-3, atol=1e-3)
