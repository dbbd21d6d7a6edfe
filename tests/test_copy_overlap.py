"""Memory traffic of TileLang's chunked linear-attention programs (its ``linear_attention``
forward and retention examples): per chunk, ``q`` is loaded and scaled by a T.Parallel
loop, then ``k`` and ``v`` are T.copy'd (cp.async), GEMMs run, and the output is added
atomically from a shared tile.

- ``start_async_copies_early``: a cp.async copy moves up past the independent nests before
  it, so its loads fly with theirs (one memory latency a chunk instead of two);
- the barrier pass: two buffers that each share bytes with a third, dead one (``q`` and
  ``k`` on the bytes of the fp32 ``o_shared``) do not conflict with each other (a barrier
  was put between the write of ``q`` and the copy into ``k``);
- the vectorizer: a relaxed float atomic add into global memory runs as vector ``red``
  (TileLang's ``AtomicAddx4``: ``red.global.add.v4.f32`` on sm_90), and a nest touching
  only shared memory runs 16 bytes a thread step (``v[i, j] = v[i, j] * d[i]`` in place).

CPU: the IR order, barriers, vector accesses, generated source, cubins; GPU: values
against torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.analysis import parallel_nest
from tilecute.transform.pipeline import lower, run_passes


def chunked_linear_attention(B=1, S=256, H=2, D=64, chunk=64, decay=False):
    """TileLang's fused-chunk linear attention forward (retention with ``decay``): O +=
    per chunk (causal(q k^T) v + q h), h += k^T v; O accumulated atomically (O zeroed
    by the caller)."""
    scale = D ** -0.5
    NT = S // chunk

    @T.prim_func
    def lin(Q: T.Tensor((B, S, H, D), "float16"), K: T.Tensor((B, S, H, D), "float16"),
            V: T.Tensor((B, S, H, D), "float16"), O: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(1, 1, B * H, threads=128) as (i_v, i_k, i_bh):
            i_b = i_bh // H
            i_h = i_bh % H
            q = T.alloc_shared((chunk, D), "float16")
            k = T.alloc_shared((chunk, D), "float16")
            v = T.alloc_shared((chunk, D), "float16")
            h = T.alloc_fragment((D, D), "float32")
            h_shared = T.alloc_shared((D, D), "float16")
            s = T.alloc_fragment((chunk, chunk), "float32")
            s_shared = T.alloc_shared((chunk, chunk), "float16")
            o = T.alloc_fragment((chunk, D), "float32")
            o_shared = T.alloc_shared((chunk, D), "float32")
            T.clear(h)
            for i in T.Pipelined(0, NT):
                for row, col in T.Parallel(chunk, D):
                    q[row, col] = Q[i_b, i * chunk + row, i_h, col] * scale
                T.copy(K[i_b, i * chunk:(i + 1) * chunk, i_h, :], k)
                T.copy(V[i_b, i * chunk:(i + 1) * chunk, i_h, :], v)
                T.gemm(q, k, s, clear_accum=True, transpose_B=True)
                for row, col in T.Parallel(chunk, chunk):
                    s_shared[row, col] = T.if_then_else(row >= col, s[row, col], 0)
                T.gemm(s_shared, v, o, clear_accum=True)
                T.copy(h, h_shared)
                if decay:
                    for row, col in T.Parallel(chunk, D):
                        v[row, col] = v[row, col] * T.exp2((chunk - row - 1) * -0.5)
                T.gemm(k, v, h, transpose_A=True)
                T.gemm(q, h_shared, o)
                T.copy(o, o_shared)
                T.atomic_add(O[i_b, i * chunk:(i + 1) * chunk, i_h, :], o_shared)
    return lin


def _loop(func):
    (loop,) = [s for s in walk_stmts(func.kernels[0].body)
               if isinstance(s, N.For) and s.kind in ("pipelined", "serial")]
    return loop.body


def _inner_nests(func) -> list:
    """The innermost loop of every T.Parallel nest, once each."""
    out = {}
    for s in walk_stmts(func.kernels[0].body):
        if isinstance(s, N.For) and s.kind == "parallel":
            inner = parallel_nest(s)[-1]
            out[id(inner)] = inner
    return list(out.values())


def _what(s) -> str:
    if isinstance(s, N.Barrier):
        return "barrier"
    if isinstance(s, N.For) and s.kind == "parallel":
        inner = parallel_nest(s)[-1]
        wrote = [t.buffer for t in inner.body if isinstance(t, N.Store)]
        if inner.async_copy:
            return f"cp.async {wrote[0]}"
        return f"nest {','.join(wrote) or type(inner.body[0]).__name__}"
    return type(s).__name__


def test_copies_start_before_the_scaled_load_with_no_barrier_between():
    func = run_passes(chunked_linear_attention(), "sm_90a", until="start_async_copies_early")
    order = [_what(s) for s in _loop(func)]
    assert order[:5] == ["barrier", "cp.async k", "cp.async v", "nest q", "barrier"], order
    # without the move (just after the barrier pass) the copies came after the nest; and
    # no barrier stood between the nest and the first copy
    before = run_passes(chunked_linear_attention(), "sm_90a", until="insert_barriers")
    assert [_what(s) for s in _loop(before)][:5] == \
        ["barrier", "nest q", "cp.async k", "cp.async v", "barrier"]


def test_the_buffers_share_bytes_as_before():
    """(The barrier test above needs q and k on o_shared's bytes.)"""
    func = run_passes(chunked_linear_attention(), "sm_90a", until="assign_shared_memory")
    slots = {a.buffer.name: a.slot.offset for a in walk_stmts(func.kernels[0].body)
             if isinstance(a, N.Allocate) and a.slot is not None}
    assert slots["o_shared"] == 0 and {slots["q"], slots["k"]} == {0, 8192}


def _independent_and_not():
    """A copy into ``b`` after a nest that does not touch it (it moves up), and a copy
    into ``c`` whose rows are a Let's, bound just before it (it stays after the Let)."""
    @T.prim_func
    def mixed(A: T.Tensor((64, 64), "float16"), X: T.Tensor((128, 64), "float16"),
              C: T.Tensor((128, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            a2 = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            c = T.alloc_shared((64, 64), "float16")
            for i, j in T.Parallel(64, 64):
                a[i, j] = A[i, j] * 2.0
            T.copy(X[0:64, :], b)
            for i, j in T.Parallel(64, 64):
                a2[i, j] = A[i, j] + 1.0
            base = bx * 64
            T.copy(X[base:base + 64, :], c)
            for i, j in T.Parallel(64, 64):
                C[bx * 64 + i, j] = b[i, j] + a[i, j] + c[i, j] + a2[i, j]
    return mixed


def test_a_copy_moves_only_past_what_it_does_not_depend_on():
    # (sm_80: on sm_90a the copies are TMA loads)
    func = run_passes(_independent_and_not(), "sm_80", until="start_async_copies_early")
    order = [_what(s) if not isinstance(s, N.Let) else f"let {s.var.name}"
             for s in func.kernels[0].body if not isinstance(s, N.Allocate)]
    assert order.index("cp.async b") < order.index("nest a") < order.index("nest a2")
    assert order.index("cp.async c") == order.index("let base") + 1, order


def test_atomic_output_is_vector_red_and_shared_update_is_vectorized(tmp_path):
    func = lower(chunked_linear_attention(decay=True), "sm_90a").func
    nests = _inner_nests(func)
    (atomic,) = [n for n in nests if any(isinstance(t, N.AtomicAdd) for t in n.body)]
    assert atomic.vector_width == 4
    assert {(v.buffer, v.chunk) for v in atomic.vectors} == {("O", 4), ("o_shared", 4)}
    (update,) = [n for n in nests if any(isinstance(t, N.Store) and t.buffer == "v"
                                         and not n.async_copy for t in n.body)]
    assert update.vector_width == 8 and {(v.buffer, v.chunk) for v in update.vectors} == {("v", 8)}
    info = tilecute.build_cubin(chunked_linear_attention(decay=True), "sm_90a",
                                out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert re.search(r"tca\.atomic_add_view\(cute\.make_tensor\(O\.iterator \+ [^\n]*"
                     r"cute\.make_layout\(4\)\), tc_vec\d+\)", src)
    assert info.kernel_names


def test_sm_80_keeps_float32_atomics_scalar():
    """sm_80 has no vector red for f32 (f16x2 only): the atomic nest stays one lane a step."""
    func = lower(chunked_linear_attention(), "sm_80").func
    (atomic,) = [n for n in _inner_nests(func) if any(isinstance(t, N.AtomicAdd) for t in n.body)]
    assert not any(v.buffer == "O" for v in atomic.vectors)


def half_atomics(n=256, arch_threads=128):
    @T.prim_func
    def halves(A: T.Tensor((n,), "float16"), Out: T.Tensor((n,), "float16")):
        with T.Kernel(1, threads=arch_threads) as _:
            for i in T.Parallel(n):
                T.atomic_add(Out[i], A[i] * 2.0)
    return halves


def test_half_atomics_vectorize_by_arch(tmp_path):
    """1024 halves over 128 threads: 8 a thread step (one .v8.f16 on sm_90, f16x2 pairs on
    sm_80, where the nest's lanes are 2)."""
    for arch, chunk in (("sm_90a", 8), ("sm_80", 2)):
        func = lower(half_atomics(1024), arch).func
        (inner,) = _inner_nests(func)
        assert ("Out", chunk) in {(v.buffer, v.chunk) for v in inner.vectors}, arch
        assert tilecute.build_cubin(half_atomics(1024), arch, out_dir=str(tmp_path / arch)).kernel_names


def test_ordered_atomics_stay_scalar():
    @T.prim_func
    def ordered(A: T.Tensor((256,), "float32"), Out: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(256):
                T.atomic_add(Out[i], A[i], memory_order="release")
    func = lower(ordered, "sm_90a").func
    (inner,) = _inner_nests(func)
    assert not any(v.buffer == "Out" for v in inner.vectors)
    assert "atomic_add_view" not in emit_cute(lower(ordered, "sm_90a"))


# ---- on the GPU -------------------------------------------------------------------------------
def _reference(q, k, v, chunk, decay):
    import torch
    B, S, H, D = q.shape
    qf, kf, vf = (x.float().permute(0, 2, 1, 3) for x in (q, k, v))  # B H S D
    o = torch.zeros_like(qf)
    h = torch.zeros(B, H, D, D, device=q.device)
    mask = torch.tril(torch.ones(chunk, chunk, device=q.device, dtype=torch.bool))
    w = torch.exp2((chunk - torch.arange(chunk, device=q.device) - 1) * -0.5)[:, None]
    for t in range(S // chunk):
        sl = slice(t * chunk, (t + 1) * chunk)
        qs = (qf[:, :, sl] * D ** -0.5).half().float()
        s = (qs @ kf[:, :, sl].transpose(-1, -2)).masked_fill(~mask, 0).half().float()
        o[:, :, sl] = s @ vf[:, :, sl] + qs @ h.half().float()
        vs = (vf[:, :, sl] * w).half().float() if decay else vf[:, :, sl]
        h = h + kf[:, :, sl].transpose(-1, -2) @ vs
    return o.permute(0, 2, 1, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("decay", [False, True])
def test_chunked_linear_attention_on_gpu(decay):
    import torch
    torch.manual_seed(0)
    B, S, H, D = 2, 256, 2, 64
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(3))
    o = torch.zeros(B, S, H, D, device="cuda")
    tilecute.compile(chunked_linear_attention(B, S, H, D, decay=decay))(q, k, v, o)
    torch.testing.assert_close(o, _reference(q, k, v, 64, decay), atol=5e-2, rtol=2e-2)


@pytest.mark.gpu
def test_independent_and_dependent_copies_on_gpu():
    import torch
    torch.manual_seed(0)
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    x = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 64, device="cuda", dtype=torch.float16)
    tilecute.compile(_independent_and_not(), options={"disable_tma": True})(a, x, c)
    for bx in range(2):
        want = x[:64].float() + (a * 2).float() + x[bx * 64:(bx + 1) * 64].float() + \
            (a + 1).float()
        torch.testing.assert_close(c[bx * 64:(bx + 1) * 64].float(), want, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("n,threads", [(256, 128), (1024, 128), (4096, 128), (100, 64)])
def test_half_atomics_on_gpu(n, threads):
    import torch
    torch.manual_seed(0)
    a = torch.randn(n, device="cuda", dtype=torch.float16)
    out = torch.randn(n, device="cuda", dtype=torch.float16)
    want = (out.float() + (a * 2.0).float()).half()
    tilecute.compile(half_atomics(n, threads))(a, out)
    torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-2)
