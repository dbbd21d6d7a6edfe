"""TileLang's ``T.async_copy(src, dst)`` (copy_op.py, tl.tileop.async_copy): a global ->
shared copy by cp.async whose copies form one commit group and which waits for nothing:
the program waits with ``T.ptx_wait_group(n)`` (its copy lowering: the cp.async loop and
``ptx_commit_group``, no wait; no cp.async possible is an error).  ``T.copy(...,
annotations={"is_async_copy": True})`` (or the older key ``force_cp_async``) is the same
copy.  It was refused as a TileLang form tilecute does not support.

The barrier pass treats its writes as the program's raw cp.async: the copy is ordered
after earlier reads and writes of its tile (a barrier before it where another thread
touched the tile), and the tile counts as written at the program's ``T.ptx_wait_group``
(a barrier after the wait before another thread's read: TileLang's sync pass puts one
after every wait_group); no block barrier waits for it and no wait is added before an
mbarrier arrive.  CPU: IR, printer, JSON, the generated waits and barriers, refusals,
sm_80 and sm_90a cubins; GPU: against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def ring_transpose_sum(steps=4, n=64):
    """Out = sum over k of A[k]^T (A of ``steps`` (n, n) fp16 slabs): slab k + 1 is copied
    into the other half of a double buffer while slab k is read transposed (elements other
    threads copied); ``T.ptx_wait_group(1)`` leaves the newest group in flight, an empty
    commit on the last step keeps the count."""
    @T.prim_func
    def ring(A: T.Tensor((steps * n, n), T.float16), Out: T.Tensor((n, n), T.float32)):
        with T.Kernel(1, threads=128):
            buf = T.alloc_shared((2, n, n), T.float16)
            acc = T.alloc_fragment((n, n), T.float32)
            T.clear(acc)
            T.async_copy(A[0:n, :], buf[0, :, :])
            for k in T.serial(steps):
                if k + 1 < steps:
                    T.async_copy(A[(k + 1) * n:(k + 2) * n, :], buf[(k + 1) % 2, :, :])
                else:
                    T.ptx_commit_group()
                T.ptx_wait_group(1)
                for i, j in T.Parallel(n, n):
                    acc[i, j] += T.Cast(T.float32, buf[k % 2, j, i])
            T.copy(acc, Out)
    return ring


def double_buffered_gemm(M=256, N=256, K=512, bm=64, bn=64, bk=32, threads=128,
                         annotated=False):
    """C = A @ B with the next K step's tiles loaded by T.async_copy (two groups per step)
    while the MMA runs on this step's; the waits are the program's.  ``annotated``: the
    copies written as T.copy(..., annotations={"is_async_copy": True})."""
    nk = K // bk

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((2, bm, bk), T.float16)
            b_s = T.alloc_shared((2, bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            if annotated:
                T.copy(A[by * bm, 0], a_s[0, :, :], annotations={"is_async_copy": True})
                T.copy(B[0, bx * bn], b_s[0, :, :], annotations={"is_async_copy": True})
            else:
                T.async_copy(A[by * bm, 0], a_s[0, :, :])
                T.async_copy(B[0, bx * bn], b_s[0, :, :])
            for ko in T.serial(nk):
                if ko + 1 < nk:
                    if annotated:
                        T.copy(A[by * bm, (ko + 1) * bk], a_s[(ko + 1) % 2, :, :],
                               annotations={"is_async_copy": True})
                        T.copy(B[(ko + 1) * bk, bx * bn], b_s[(ko + 1) % 2, :, :],
                               annotations={"is_async_copy": True})
                    else:
                        T.async_copy(A[by * bm, (ko + 1) * bk], a_s[(ko + 1) % 2, :, :])
                        T.async_copy(B[(ko + 1) * bk, bx * bn], b_s[(ko + 1) % 2, :, :])
                    T.ptx_wait_group(2)
                else:
                    T.ptx_wait_group(0)
                T.gemm(a_s[ko % 2, :, :], b_s[ko % 2, :, :], acc)
            T.copy(acc, C[by * bm, bx * bn])
    return gemm


def _kernel_body(func, arch="sm_80", options=None):
    return run_passes(func, arch, options).kernels[0].body


def _lines(func, arch="sm_80", options=None):
    return [ln.strip() for ln in emit_cute(lower(func, arch, options)).splitlines()]


# ---- IR, printer, JSON ----------------------------------------------------------------------
def test_ir_printer_and_json():
    f = ring_transpose_sum()
    copies = [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.Copy)
              and s.instruction == N.ASYNC_COPY]
    assert len(copies) == 2
    text = print_func(f)
    assert "T.async_copy(A[0:64, 0:64], buf[0:1, 0:64, 0:64])" in text
    assert from_json(to_json(f)) == f
    assert T.from_script(text).kernels == f.kernels  # the printed form reads back


def test_annotation_is_the_same_copy():
    def copies(f):
        return [(s.src, s.dst, s.instruction) for s in walk_stmts(f.kernels[0].body)
                if isinstance(s, N.Copy)]
    plain, annotated = double_buffered_gemm(), double_buffered_gemm(annotated=True)
    assert copies(plain) == copies(annotated)
    assert sum(c[2] == N.ASYNC_COPY for c in copies(plain)) == 4


def test_the_nest_is_cp_async_with_its_own_commit():
    nests = [s for s in walk_stmts(_kernel_body(ring_transpose_sum()))
             if isinstance(s, N.For) and s.copy_instruction == N.ASYNC_COPY]
    assert len(nests) == 2 and all(n.async_copy for n in nests)
    lines = _lines(ring_transpose_sum())
    assert lines.count("cute.arch.cp_async_commit_group()") == 3  # two copies, one empty
    assert lines.count("cute.arch.cp_async_wait_group(1)") == 1
    assert not any("cp_async_wait_group(0)" in ln for ln in lines)  # no wait of the passes'


def test_barriers_around_the_program_wait():
    """A barrier after the wait (the transposed read is of other threads' copies) and one
    before the next copy into the half read in the step before; none waits for cp.async."""
    body = _kernel_body(ring_transpose_sum())
    loop = next(s for s in body if isinstance(s, N.For) and s.kind == "serial")
    seq = [type(s).__name__ if not isinstance(s, N.Evaluate) else s.value.name for s in loop.body]
    assert seq[:4] == ["If", "ptx_wait_group", "Barrier", "For"], seq
    branch = loop.body[0]
    assert isinstance(branch.then[0], N.Barrier) and not branch.then[0].wait_async
    assert not any(isinstance(s, N.Barrier) and s.wait_async for s in walk_stmts(body))
    assert not any(isinstance(s, N.AsyncCopyWait) for s in walk_stmts(body))


def test_gemm_waits_are_the_programs():
    lines = _lines(double_buffered_gemm())
    assert lines.count("cute.arch.cp_async_wait_group(2)") == 1
    assert lines.count("cute.arch.cp_async_wait_group(0)") == 1
    assert lines.count("cute.arch.cp_async_commit_group()") == 4


# ---- refusals ---------------------------------------------------------------------------------
def _prog(body: str):
    import textwrap
    src = textwrap.dedent('''
        @T.prim_func
        def kern(A: T.Tensor((256, 64), T.float16), B: T.Tensor((256, 64), T.float32)):
            with T.Kernel(4, threads=128) as bx:
                s = T.alloc_shared((64, 64), T.float16)
                f = T.alloc_fragment((64, 64), T.float16)
    ''') + textwrap.indent(textwrap.dedent(body), " " * 8)
    return src


@pytest.mark.parametrize("body,message", [
    ("T.async_copy(A[bx * 64, 0], s, coalesced_width=2.5)",
     "T.async_copy: coalesced_width=2.5: coalesced_width must be an int >= 1"),
    ('T.async_copy(A[bx * 64, 0], s, annotations={"eviction_policy": 1})',
     "T.async_copy: annotations={'eviction_policy': 1} is not supported"),
    ('T.async_copy(A[bx * 64, 0], s, annotations={"no_implicit_async_commit_wait": True})',
     "T.async_copy: annotations={'no_implicit_async_commit_wait': True} is not supported: "
     "TileLang's pipeline pass"),
    ('T.copy(A[bx * 64, 0], s, annotations={"is_async_copy": 2})',
     "T.copy: annotations={'is_async_copy': 2}: True or False"),
])
def test_refused_at_parse_time(body, message):
    with pytest.raises(FrontendError) as e:
        T.from_script(_prog(body))
    assert message in str(e.value), str(e.value)
    assert ":7: in prim_func 'kern'" in str(e.value)  # (the line of the call)


@pytest.mark.parametrize("body,message", [
    ("T.async_copy(s, f)", "T.async_copy(s, f) could not be honored: cp.async copies global -> "
                           "shared memory; this copy is shared -> fragment"),
    ("T.async_copy(B[bx * 64, 0], s)", "could not be honored: cp.async copies bytes, and 'B' is "
                                       "float32 while 's' is float16"),
])
def test_refused_by_the_lowering(body, message):
    f = T.from_script(_prog(body + "\nT.ptx_wait_group(0)"))
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        lower(f, "sm_80")


def test_below_sm80_is_refused_naming_it():
    with pytest.raises(Exception, match=r"T.async_copy could not be honored: cp.async is sm_80\+"):
        lower(ring_transpose_sum(), "sm_75")


def test_not_cp_async_able_is_refused_naming_it():
    """A 3-element row (6 bytes) moves in no 4/8/16-byte piece: TileLang's "Explicit async
    copy semantics require cp.async lowering"."""
    @T.prim_func
    def odd(A: T.Tensor((64, 3), T.float16), B: T.Tensor((64, 3), T.float16)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64, 3), T.float16)
            T.async_copy(A, s)
            T.ptx_wait_group(0)
            T.copy(s, B)
    with pytest.raises(Exception, match=r"T.async_copy could not be honored"):
        lower(odd, "sm_80")


# ---- cubins -----------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("make", [ring_transpose_sum, double_buffered_gemm,
                                  lambda: double_buffered_gemm(annotated=True)])
def test_cubin(make, arch, tmp_path):
    assert tilecute.build_cubin(make(), arch, out_dir=str(tmp_path)).kernel_names


# ---- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_ring():
    import torch
    a = torch.randn(4 * 64, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(64, 64, device="cuda")
    tilecute.compile(ring_transpose_sum())(a, out)
    want = a.float().view(4, 64, 64).transpose(1, 2).sum(0)
    torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("annotated", [False, True])
@pytest.mark.parametrize("options", [None, {"disable_wgmma": True}])
def test_gpu_double_buffered_gemm(annotated, options):
    import torch
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(double_buffered_gemm(annotated=annotated), options=options)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=5e-2, rtol=1e-3)


def test_two_single_elements_are_one_store():
    """TileLang: ``T.async_copy(A[i], s[j])`` of two elements (no annotations) is the plain
    store ``s[j] = A[i]``."""
    f = T.from_script(_prog("T.async_copy(A[bx, 1], s[0, 1])"))
    (c,) = [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.Copy)]
    assert c.instruction == "" and c.src.extents == (N.Const(1, "int32"),) * 2
