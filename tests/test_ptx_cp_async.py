"""TileLang's raw cp.async, as its hand-warp-specialized MLA kernels load KV tiles: a
producer warpgroup's threads each issue ``T.ptx_cp_async(T.access_ptr(S[r, c], "w", 8),
T.access_ptr(G[r', c], "r", 8), 8)`` and then ``T.cp_async_barrier_noinc(bar)``, and the
consumer warpgroup waits on ``bar`` before its T.gemm.  CPU: IR, printer round trip,
refusals, generated source, launch alignment, sm_90a cubin; GPU: vs torch."""

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


def producer_loads(N_=128, D=64, steps=2):
    """O[:, s-th block] = Q @ K_s^T: warpgroup 1 loads each block of K rows with cp.async,
    16 bytes a thread a row piece, and signals `ready` as they land; warpgroup 0 waits,
    multiplies and frees the tile."""
    per_round = 128 * 8 // D  # rows a round of the 128 producer threads covers

    @T.prim_func
    def main(Q: T.Tensor((64, D), "float16"), K: T.Tensor((steps * N_, D), "float16"),
             O: T.Tensor((64, steps * N_), "float32")):
        with T.Kernel(1, threads=256) as bx:
            Q_s = T.alloc_shared((64, D), "float16")
            K_s = T.alloc_shared((N_, D), "float16")
            acc = T.alloc_fragment((64, N_), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            free = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(Q, Q_s)
            if tx < 128:
                for s in T.serial(steps):
                    T.barrier_wait(ready, s % 2)
                    T.gemm(Q_s, K_s, acc, transpose_B=True, clear_accum=True)
                    T.barrier_arrive(free)
                    T.copy(acc, O[:, s * N_:(s + 1) * N_])
            else:
                p = tx - 128
                for s in T.serial(steps):
                    T.barrier_wait(free, (s + 1) % 2)
                    for r in T.serial(N_ // per_round):
                        row = r * per_round + p // (D // 8)
                        col = p % (D // 8) * 8
                        T.ptx_cp_async(T.access_ptr(K_s[row, col], "w", 8),
                                       T.access_ptr(K[s * N_ + row, col], "r", 8), 8)
                    T.cp_async_barrier_noinc(ready)

    return main


def _one(src_stmt, *, shared="S[0, 0]", glob="G[0, 0]"):
    return f'''
@T.prim_func
def one(G: T.Tensor((16, 64), "float16"), H: T.Tensor((16, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((16, 64), "float16")
        F = T.alloc_shared((16, 64), "float32")
        bar = T.alloc_barrier(128)
        {src_stmt}
'''


def test_ir_and_round_trip():
    f = producer_loads()
    (ev,) = [s for k in f.kernels for s in walk_stmts(k.body)
             if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call)
             and s.value.name == "ptx_cp_async"]
    dst, src, n = ev.value.args
    assert (dst.buffer, src.buffer, n) == ("K_s", "K", N.Const(8, "int32"))
    (noinc,) = [s for k in f.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.MBarrierArrive) and s.cp_async]
    assert noinc.barrier.buffer == "ready"
    text = print_func(f)
    assert 'T.ptx_cp_async(T.access_ptr(K_s[' in text and '"w", 8), T.access_ptr(K[' in text
    assert "T.cp_async_barrier_noinc(ready)" in text
    assert print_func(T.from_script(text)) == text
    assert from_json(to_json(f)) == f


def test_source_alignment_and_cubin(tmp_path):
    plan = lower(producer_loads(), "sm_90a")
    src = emit_cute(plan)
    line = [ln for ln in src.splitlines() if "tcc.copy_async(" in ln][0]
    # from K's element, into K_s's TMA-swizzled element (the wgmma operand's layout), 128 bits
    assert line.strip().startswith("tcc.copy_async(cute.make_tensor(K.iterator")
    assert "K_s.iterator" in line and ">> 3) & 56" in line and line.split("#")[0].rstrip().endswith(", 128)")
    assert "cute.arch.cp_async_mbarrier_arrive_noinc(ready)" in src
    # no block barrier orders the raw cp.async (the program's mbarrier does)
    region = src[src.index("# T.ws(1)"):]
    assert "cute.arch.barrier(" not in region and "sync_threads" not in region
    assert plan.abi.arg("K").align == 16  # a 16-byte cp.async reads 16-byte aligned rows
    info = tilecute.build_cubin(producer_loads(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


@pytest.mark.parametrize("stmt,msg", [
    ('T.ptx_cp_async(T.access_ptr(S[0, 0], "w", 8), T.access_ptr(G[0, 0], "r", 8), 8, '
     'predicate=bx > 0)', "T.ptx_cp_async: predicate=.* is not supported"),
    ('T.ptx_cp_async(S[0, 0], T.access_ptr(G[0, 0], "r", 8), 8)',
     r"dst_access_ptr must be T.access_ptr\(buffer\[indices\], ...\)"),
    ('T.ptx_cp_async(T.access_ptr(S[0, 0:8], "w", 8), T.access_ptr(G[0, 0], "r", 8), 8)',
     "base must be one buffer element"),
    ('T.ptx_cp_async(T.access_ptr(S[0, 0], "w", 8, offset=8), T.access_ptr(G[0, 0], "r", 8), 8)',
     "T.access_ptr: offset=8 is not supported"),
    ('T.ptx_cp_async(T.access_ptr(S[0, 0], "r", 8), T.access_ptr(G[0, 0], "r", 8), 8)',
     "access_type='r': the dst of a cp.async is written"),
    ('T.ptx_cp_async(T.access_ptr(G[0, 0], "w", 8), T.access_ptr(S[0, 0], "r", 8), 8)',
     "'G' is global; cp.async copies from a global tensor"),
    ('T.ptx_cp_async(T.access_ptr(F[0, 0], "w", 4), T.access_ptr(G[0, 0], "r", 4), 4)',
     "'G' is float16 and 'F' float32"),
    ('T.ptx_cp_async(T.access_ptr(S[0, 0], "w", 16), T.access_ptr(G[0, 0], "r", 16), 16)',
     "16 float16 elements are 32 bytes; cp.async copies 4, 8 or 16"),
    ('T.cp_async_barrier_noinc(S[0, 0])', "T.cp_async_barrier_noinc takes one element of a "
                                          "T.alloc_barrier array"),
    ('T.evaluate(T.access_ptr(S[0, 0], "w", 8))', "access_ptr"),
])
def test_refusals_name_the_form_and_line(stmt, msg):
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(_one(stmt))
    assert "<script>:8" in str(e.value)


def test_noinc_on_sm80_is_inline_ptx():
    # (was refused: CuTe DSL checks its cp_async_mbarrier_arrive_noinc for sm_90; the PTX is
    # sm_80's; tests/test_leftover_forms.py builds and reads an sm_80 program's PTX)
    src = _one("T.cp_async_barrier_noinc(bar[0])")
    assert "tct.cp_async_arrive_noinc(bar)" in emit_cute(lower(T.from_script(src), "sm_80"))


def ragged_rows(pad=None, rows=100):
    """Each of 128 threads copies row t of G (``rows`` x 64) into S with 16-byte cp.async,
    then S is written out: rows past G's end are not read (TileLang's LegalizeSafeMemoryAccess
    predicates a cp.async by its source element) and read 0, or the safe value."""

    @T.prim_func
    def ragged(G: T.Tensor((rows, 64), "float16"), H: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((128, 64), "float16")
            bar = T.alloc_barrier(128)
            t = T.get_thread_binding()
            if pad is not None:
                T.annotate_safe_value({G: pad})
            for c in T.serial(8):
                T.ptx_cp_async(T.access_ptr(S[t, c * 8], "w", 8), T.access_ptr(G[t, c * 8], "r", 8), 8)
            T.cp_async_barrier_noinc(bar[0])
            T.barrier_wait(bar[0], 0)
            for i, j in T.Parallel(128, 64):
                H[i, j] = S[i, j]
    return ragged


@pytest.mark.parametrize("pad,fill", [(None, "cutlass.Float16(0)"), (-3, "cutlass.Float16(-3.0)")])
def test_out_of_bounds_source_is_not_read(pad, fill, tmp_path):
    src = emit_cute(lower(ragged_rows(pad), "sm_90a"))
    lines = [ln.strip() for ln in src.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("tcc.copy_async("))
    assert lines[at - 1].startswith("if t < 100:") and lines[at + 1] == "else:", src
    assert lines[at + 3] == f"{lines[at + 2].split(' = ')[0]}.fill({fill})"
    assert lines[at + 4].startswith("cute.make_tensor(S.iterator") and \
        lines[at + 4].endswith(f".store({lines[at + 2].split(' = ')[0]}.load())")
    assert "tc_ld" not in src  # (the copy's element is an address, not a read)
    # in bounds by its range: no check
    proved = emit_cute(lower(ragged_rows(rows=128), "sm_90a"))
    assert "if t < 128" not in proved and "else:" not in proved
    assert tilecute.build_cubin(ragged_rows(pad), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("pad", [None, -3])
def test_gpu_ragged_rows(pad):
    import torch

    g = torch.randn(100, 64, device="cuda", dtype=torch.float16)
    h = tilecute.compile(ragged_rows(pad), out_idx=[1])(g)
    want = torch.full((128, 64), 0.0 if pad is None else pad, device="cuda", dtype=torch.float16)
    want[:100] = g
    torch.testing.assert_close(h, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_producer_loads():
    import torch

    kernel = tilecute.compile(producer_loads(steps=3))
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(3 * 128, 64, device="cuda", dtype=torch.float16)
    o = torch.empty(64, 3 * 128, device="cuda", dtype=torch.float32)
    kernel(q, k, o)
    torch.testing.assert_close(o, q.float() @ k.float().T, rtol=1e-2, atol=1e-2)
