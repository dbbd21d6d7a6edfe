"""Row statistics of T.gemm accumulators (the core of attention's online softmax): a
row reduction of an accumulator into an (M,) fragment, loops over M that update the
statistics, and loops over the accumulator that read its row's statistic.  CPU: the
layouts the pass chooses, the errors, and sm_90a cubins."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import lower, run_passes


def online_softmax_pv(bm=128, bn=64, d=64, threads=256, dtype="float16"):
    """O = softmax(Q K^T * scale) V for one (bm, d) block of queries, the KV sequence
    walked in bn steps with running row max and sum (FlashAttention's recurrence)."""
    S = T.symbolic("S")
    scale = 0.125 * 1.44269504  # log2(e) / sqrt(d)

    @T.prim_func
    def attention(Q: T.Tensor((S, d), dtype), K: T.Tensor((S, d), dtype),
                  V: T.Tensor((S, d), dtype), O: T.Tensor((S, d), dtype)):
        with T.Kernel(T.ceildiv(S, bm), threads=threads) as bx:
            Qs = T.alloc_shared((bm, d), dtype)
            Ks = T.alloc_shared((bn, d), dtype)
            Vs = T.alloc_shared((bn, d), dtype)
            s = T.alloc_fragment((bm, bn), "float32")
            p = T.alloc_fragment((bm, bn), dtype)
            o = T.alloc_fragment((bm, d), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            alpha = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            l_step = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bx * bm, 0], Qs)
            T.fill(o, 0.0)
            T.fill(l, 0.0)
            T.fill(m, -1e30)
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(K[k * bn, 0], Ks)
                T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):  # keys past the end do not count
                    s[i, j] = T.if_then_else(k * bn + j < S, s[i, j], -1e30)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * alpha[i] + l_step[i]
                for i, j in T.Parallel(bm, d):
                    o[i, j] *= alpha[i]
                T.copy(s, p)
                T.copy(V[k * bn, 0], Vs)
                T.gemm(p, Vs, o)
            for i, j in T.Parallel(bm, d):
                o[i, j] /= l[i]
            T.copy(o, O[bx * bm, 0])

    return attention


def _layouts(func):
    out = {}
    for k in func.kernels:
        for s in k.body:
            if isinstance(s, N.Allocate) and s.layout is not None:
                out[s.buffer.name] = s.layout
    return out


def test_row_statistics_get_the_accumulator_rows_layout():
    func = run_passes(online_softmax_pv(), "sm_90a", until="infer_layouts")
    layouts = _layouts(func)
    for name in ("m", "m_prev", "alpha", "l", "l_step"):
        assert layouts[name] == N.Layout("mma_rows", threads=256, mma="wgmma", warps=(2, 1)), name
    assert layouts["s"].kind == "mma" and layouts["p"].operand == "A"
    assert not any(name.endswith("_scratch") for name in layouts)  # quads, no shared exchange


def test_generated_code_reduces_in_quads_and_reads_rows_by_register():
    src = emit_cute(lower(online_softmax_pv(), "sm_90a"))
    assert 'tcrow.reduce_rows(s, m, "max", clear=False)' in src
    # (the running sum l stays a per-thread partial in the loop: deferred row sums)
    assert 'tcrow.reduce_rows(s, l_step, "sum", clear=True, partial=True)' in src
    assert 'tcrow.combine_rows(l, ' in src
    whole = emit_cute(lower(online_softmax_pv(), "sm_90a", {"disable_deferred_row_sums": True}))
    assert 'tcrow.reduce_rows(s, l_step, "sum", clear=True)' in whole
    assert "combine_rows" not in whole
    assert "alpha[tcrow.row_of(o, " in src and "m[tcrow.row_of(s, " in src
    assert re.search(r"for tc_q\d+ in cutlass.range_constexpr\(cute.size\(l\)\)", src)
    assert re.search(r"= \w*l_i\[tc_q\d+\]", src)  # T.Parallel(bm) over the rows held


@pytest.mark.parametrize("d,bn", [(64, 64), (128, 64)])
def test_online_softmax_builds_for_sm_90a(d, bn, tmp_path):
    info = tilecute.build_cubin(online_softmax_pv(d=d, bn=bn), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_attention_0"]


def test_writing_a_row_statistic_in_an_accumulator_loop_is_an_error():
    @T.prim_func
    def bad(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256) as bx:
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            s = T.alloc_fragment((128, 64), "float32")
            m = T.alloc_fragment((128,), "float32")
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As, Bs, s, clear_accum=True)
            T.reduce_max(s, m, dim=1)
            for i, j in T.Parallel(128, 64):
                m[i] = s[i, j]
    with pytest.raises(LayoutError, match=r"may read 'm\[i\]' but not write it"):
        lower(bad, "sm_90a")


def _gemm(m, n, threads, policy):
    @T.prim_func
    def gemm(A: T.Tensor((m, 64), "float16"), B: T.Tensor((64, n), "float16"),
             C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            As = T.alloc_shared((m, 64), "float16")
            Bs = T.alloc_shared((64, n), "float16")
            acc = T.alloc_fragment((m, n), "float32")
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As, Bs, acc, clear_accum=True, policy=policy)
            T.copy(acc, C[0, 0])
    return gemm


@pytest.mark.parametrize("arch,m,n,threads,policy,warps", [
    ("sm_80", 64, 64, 128, T.GemmWarpPolicy.Square, (2, 2)),
    ("sm_80", 64, 64, 128, T.GemmWarpPolicy.FullRow, (4, 1)),
    ("sm_80", 64, 64, 128, T.GemmWarpPolicy.FullCol, (1, 4)),
    ("sm_90a", 128, 128, 256, T.GemmWarpPolicy.Square, (2, 1)),
    ("sm_90a", 64, 128, 256, T.GemmWarpPolicy.Square, (1, 2)),  # M=64: split along N
    ("sm_90a", 128, 128, 256, T.GemmWarpPolicy.FullCol, (1, 2)),
])
def test_gemm_warp_policy_arranges_the_warps(arch, m, n, threads, policy, warps, tmp_path):
    func = _gemm(m, n, threads, policy)
    layouts = _layouts(run_passes(func, arch, until="select_mma"))
    assert layouts["acc"].warps == warps
    assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path)).kernel_names == ["tilecute_gemm_0"]


def test_gemm_warp_policy_that_cannot_tile_is_an_error():
    # (FullRow is TileLang's "as many along M as the tile allows": 64 x 128 on two
    # warpgroups puts them along N, tests/test_gemm_policies.py)
    with pytest.raises(ValueError, match=r"no arrangement of 4 warpgroup\(s\) tiles 64 x 48 with "
                                         r"policy FullRow"):
        lower(_gemm(64, 48, 512, T.GemmWarpPolicy.FullRow), "sm_90a")


def _row_max(policy):
    @T.prim_func
    def row_max(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
                M: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As, Bs, acc, clear_accum=True, policy=policy)
            T.reduce_max(acc, m, dim=1)
            T.copy(m, M[0])
    return row_max


@pytest.mark.parametrize("arch,policy,warps", [
    ("sm_80", T.GemmWarpPolicy.Square, (2, 2)),
    ("sm_80", T.GemmWarpPolicy.FullCol, (1, 4)),
    ("sm_80", T.GemmWarpPolicy.FullRow, (4, 1)),
    ("sm_90a", T.GemmWarpPolicy.FullRow, (1, 1)),
])
def test_row_reduction_with_warps_along_n_meets_in_shared(arch, policy, warps, tmp_path):
    """Rows spread over warps along N (FullCol, Square): each warp's quad reduces its
    columns, then the warps' partials combine through a shared scratch of M x warps_n."""
    func = _row_max(policy)
    lowered = lower(func, arch)
    source = emit_cute(lowered)
    assert _layouts(run_passes(func, arch, until="select_mma"))["acc"].warps == warps
    if warps[1] > 1:
        assert 'tcrow.reduce_rows_across(acc, m, tc_m_i, "max", True, m_rows_scratch, ' in source
        assert "m_rows_scratch = cute.make_tensor(" in source
    else:
        assert "tcrow.reduce_rows(acc, m" in source
    assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path)).kernel_names

@pytest.mark.parametrize("m,threads", [(64, 32), (64, 64), (96, 128)])
def test_gemm_without_a_whole_warpgroup_falls_back_to_mma_sync(m, threads, tmp_path):
    """On sm_90a a T.gemm whose block has no whole warpgroup (TileLang's 32- and 64-thread
    kernels: stream-K, NSA), or whose M is no multiple of 64, runs on warp mma.sync, as
    TileLang picks it, not an error."""
    func = _gemm(m, 64, threads, T.GemmWarpPolicy.Square)
    layouts = _layouts(run_passes(func, "sm_90a", until="select_mma"))
    assert layouts["acc"].mma == "mma" and layouts["acc"].threads == threads
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("m,threads", [(64, 32), (96, 128)])
def test_mma_sync_fallback_matches_torch(m, threads):
    import torch

    kernel = tilecute.compile(_gemm(m, 64, threads, T.GemmWarpPolicy.Square))
    a = torch.randn(m, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(m, 64, device="cuda", dtype=torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def _scaled_row_sums(clear):
    """dk = A^T W (a T.gemm), then the rows of dk * K (a fragment computed from the
    accumulator in a T.Parallel nest, as the delta rule's backward computes dbeta) and
    of 2 * dk summed into (64,) fragments; clear=False over a cleared one."""
    @T.prim_func
    def scaled_rows(A: T.Tensor((64, 64), "float16"), W: T.Tensor((64, 64), "float16"),
                    K: T.Tensor((64, 64), "float16"), D: T.Tensor((64,), "float32"),
                    D2: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            w_s = T.alloc_shared((64, 64), "float16")
            k_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            prod = T.alloc_fragment((64, 64), "float32")
            twice = T.alloc_fragment((64, 64), "float32")
            d = T.alloc_fragment((64,), "float32")
            d2 = T.alloc_fragment((64,), "float32")
            T.clear(d)
            T.copy(A, a_s)
            T.copy(W, w_s)
            T.copy(K, k_s)
            T.gemm(a_s, w_s, acc, clear_accum=True, transpose_A=True)
            for i, j in T.Parallel(64, 64):
                prod[i, j] = acc[i, j] * k_s[i, j]
            T.reduce_sum(prod, d, dim=1, clear=clear)
            for i, j in T.Parallel(64, 64):
                twice[i, j] = prod[i, j] * 2.0
            T.reduce_sum(twice, d2, dim=1)
            for i in T.Parallel(64):
                D[i] = d[i]
                D2[i] = d2[i]
    return scaled_rows


@pytest.mark.parametrize("clear", [True, False])
def test_rows_of_a_fragment_laid_out_as_an_accumulator_are_row_statistics(clear, tmp_path):
    """A fragment written at an accumulator's (i, j) takes its register layout, so the
    reduction of its rows gives row statistics (it was a LayoutError: 'T.reduce_sum of the
    T.gemm accumulator 'prod' reduces its rows (dim=1) into a fragment of shape (64,)'; TileLang's
    delta-rule backward kernels reduce such fragments)."""
    func = _scaled_row_sums(clear)
    layouts = _layouts(run_passes(func, "sm_90a", until="infer_layouts"))
    assert layouts["prod"].kind == layouts["twice"].kind == "mma"
    assert layouts["d"].kind == layouts["d2"].kind == "mma_rows"
    assert "tcrow.reduce_rows(prod, d" in emit_cute(lower(func, "sm_90a"))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_rows_of_a_fragment_laid_out_as_an_accumulator_match_torch():
    import torch

    a, w, k = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    d, d2 = torch.empty(64, device="cuda"), torch.empty(64, device="cuda")
    tilecute.compile(_scaled_row_sums(True))(a, w, k, d, d2)
    want = ((a.float().T @ w.float()) * k.float()).sum(1)
    torch.testing.assert_close(d, want, atol=2e-2, rtol=1e-3)
    torch.testing.assert_close(d2, 2 * want, atol=4e-2, rtol=1e-3)



def _scaled_scores_softmax(form):
    """Row softmax of int8 scores (an int32 accumulator) in a float32 fragment ``s`` that
    shares loops with the accumulator: ``scaled`` (SageAttention's idiom: ``s = cast(acc) *
    0.01`` in a T.Parallel nest, then ``s``'s rows reduced and read as ``s[i, j] - m[i]``),
    ``copied`` (``T.copy(acc, s)`` first) or ``exp_of_acc`` (the maximum taken over the
    accumulator, ``s = exp(acc * 0.01 - m[i])``, then ``s[i, j] / l[i]``)."""
    @T.prim_func
    def scaled_softmax(Q: T.Tensor((64, 64), "int8"), K: T.Tensor((64, 64), "int8"),
                       P: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((64, 64), "int8")
            k_s = T.alloc_shared((64, 64), "int8")
            si = T.alloc_fragment((64, 64), "int32")
            s = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            l = T.alloc_fragment((64,), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.gemm(q_s, k_s, si, transpose_B=True, clear_accum=True)
            if form == "exp_of_acc":
                for i, j in T.Parallel(64, 64):
                    s[i, j] = T.cast(si[i, j], "float32") * 0.01
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(64, 64):
                    s[i, j] = T.exp(T.cast(si[i, j], "float32") * 0.01 - m[i])
            else:
                if form == "copied":
                    T.copy(si, s)
                    for i, j in T.Parallel(64, 64):
                        s[i, j] = s[i, j] * 0.01
                else:
                    for i, j in T.Parallel(64, 64):
                        s[i, j] = T.cast(si[i, j], "float32") * 0.01
                T.reduce_max(s, m, dim=1)
                for i, j in T.Parallel(64, 64):
                    s[i, j] = T.exp(s[i, j] - m[i])
            T.reduce_sum(s, l, dim=1)
            for i, j in T.Parallel(64, 64):
                s[i, j] = s[i, j] / l[i]
            T.copy(s, P)
    return scaled_softmax


FORMS = ["scaled", "copied", "exp_of_acc"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_row_statistics_read_in_a_nest_over_a_fragment_laid_out_as_an_accumulator(arch, form, tmp_path):
    """A nest walking ``s``, which shares a nest with the accumulator and so takes its
    register layout, reads ``m[i]`` / ``l[i]`` as the row its register holds (it was a
    LayoutError: "walks fragment 's' and reads 'm', which holds one value per row of a
    T.gemm accumulator", the check asking for the accumulator itself)."""
    func = _scaled_scores_softmax(form)
    layouts = _layouts(run_passes(func, arch, until="infer_layouts"))
    assert layouts["s"].kind == layouts["si"].kind == "mma"
    assert layouts["m"].kind == layouts["l"].kind == "mma_rows"
    src = emit_cute(lower(func, arch))
    assert re.search(r"s\[(tc_r\d+ \+ tc_lane\d+)\] = s\[\1\] / l\[tcrow\.row_of\(s, tc_r\d+\)\]", src)
    assert tilecute.build_cubin(func, arch, out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("form", FORMS)
def test_row_statistics_of_a_scaled_accumulator_copy_match_torch(form):
    import torch

    q, k = (torch.randint(-8, 8, (64, 64), device="cuda", dtype=torch.int8) for _ in range(2))
    p = torch.empty(64, 64, device="cuda")
    tilecute.compile(_scaled_scores_softmax(form))(q, k, p)
    want = ((q.double() @ k.double().T) * 0.01).softmax(-1).float()
    torch.testing.assert_close(p, want, atol=1e-5, rtol=1e-4)
