"""The plain memory-bound programs of tests/unseen_programs22.py (elementwise with broadcast,
row softmax, RMSNorm, LayerNorm, a shared-memory transpose, row / column reductions, a
cumsum, gathers / scatters, GEMV, a batched small GEMM, fp8 quantisation with per-row and
per-group scales, GEMM epilogues, concat / split copies), compared statically with
TileLang 0.1.15's code for them (/work/notes/helperU_static.md).

CPU: each builds to sm_90a and sm_80 cubins; the PTX of the ones whose memory
instructions were behind TileLang's shows the fix (16-byte vectors for gathers / scatters
and for epilogues reading a row statistic, a broadcast row read once per thread, no local
memory for a row statistic read at the thread's row).  GPU: each matches torch."""

import glob
import re

import pytest

import tilecute

import rounds
import unseen_programs22 as P

PROGRAMS = ["bias_add_broadcast", "scale_rows_cols_3d", "swiglu_halves", "row_softmax",
            "rmsnorm_shared", "layernorm_fragment", "transpose_shared_tile", "row_sum_fp16",
            "col_max_fp32", "cumsum_rows_fp32", "gather_rows", "scatter_rows_copy",
            "gemv_fragment_reduce", "gemv_thread_per_row_split", "batched_small_gemm",
            "gemm_bias_gelu_epilogue", "fp8_quant_per_row", "fp8_quant_per_group",
            "concat_last_dim", "split_heads_parallel", "cast_fp32_to_bf16_tiles",
            "residual_add_rmsnorm", "add_dynamic_rows", "causal_mask_fill",
            "int8_dequant_per_channel", "gelu_1d", "rmsnorm_chunked_pipelined", "col_sum_atomic",
            "bias_add_dynamic_rows", "row_scale_global", "add_via_shared_tiles", "row_argmax"]


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


def _ptx(name, tmp_path, monkeypatch, **kw) -> str:
    """The sm_90a PTX of program ``name`` (CuTe DSL's --keep-ptx)."""
    import cutlass.cute as cute
    from tilecute.codegen.cute import emit_cute
    from tilecute.runtime.cubingen import import_source
    from tilecute.transform.pipeline import lower

    func = getattr(P, name).get_tir(**kw)
    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, "sm_90a")))
    module = import_source(str(path), f"tilecute_up22_{name}_{abs(hash(str(tmp_path))):x}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__


def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, re.sub(r"//[^\n]*", "", ptx)))


test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


FP8 = ["fp8_quant_per_row", "fp8_quant_per_group"]


test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    [n for n in PROGRAMS if n not in FP8], rounds.tir_of(P), "sm_80")


@pytest.mark.parametrize("name", FP8)
def test_fp8_casts_are_refused_on_sm80_by_name(name, tmp_path):
    """float -> fp8 converts with cvt ...e4m3x2, sm_89+ (as TileLang's __nv_fp8 casts)."""
    from tilecute.codegen.source import CodegenError
    with pytest.raises(CodegenError, match="a cast from float32 to float8_e4m3: float8 values "
                                           "convert only on sm_89"):
        tilecute.build_cubin(getattr(P, name).get_tir(), "sm_80", out_dir=str(tmp_path))


# ---- gathers and scatters: 16-byte rows, the index read once a vector ---------------------
def test_gather_rows_moves_16_byte_vectors(tmp_path, monkeypatch):
    """E[idx[r], j]: TileLang reads idx[r] once and moves the row 16 bytes a thread step;
    tilecute moved it one bf16 at a time (16 ld.global.b16 + 16 st.global.b16 a thread)."""
    src = _src("gather_rows")
    assert "cute.make_tensor(E.iterator + cute.assume(Idx[bx * 4 + i] * 512 + j, divby=8), " \
           "cute.make_layout(8)).load()" in src, src
    # the index is still checked (TileLang's guard): out of range, the row reads zeros
    assert "if Idx[bx * 4 + i] >= 0 and Idx[bx * 4 + i] < 4096:" in src
    ptx = _ptx("gather_rows", tmp_path, monkeypatch)
    assert _count(ptx, r"ld\.global\.v4\.b32") == 2 and _count(ptx, r"st\.global\.v4\.b32") == 2, ptx


def test_scatter_rows_stores_16_byte_vectors(tmp_path, monkeypatch):
    ptx = _ptx("scatter_rows_copy", tmp_path, monkeypatch)
    assert _count(ptx, r"st\.global\.v4\.b32") == 4 and _count(ptx, r"st\.global\.b32") == 0, ptx
    assert _count(ptx, r"ld\.shared\.v4\.b32") == 4, ptx


def test_index_written_in_the_nest_is_not_read_once():
    """An index buffer the nest itself writes is read per lane (no vector)."""
    import tilecute.language as T

    @T.prim_func
    def k(E: T.Tensor((64, 64), "float16"), Idx: T.Tensor((8,), "int32"), Y: T.Tensor((8, 64), "float16")):
        with T.Kernel(1, threads=64):
            for i, j in T.Parallel(8, 64):
                Y[i, j] = E[Idx[i], j]
                Idx[i] = 0
    from tilecute.transform.pipeline import lower
    from tilecute.codegen.cute import emit_cute
    src = emit_cute(lower(k, "sm_90a"))
    assert "E.iterator" not in src, src


def test_per_row_scale_from_global_keeps_16_byte_vectors(tmp_path, monkeypatch):
    """Y[i, j] = X[i, j] * s[i]: s[i] is one value for every lane of a row, so it no longer
    caps the nest at one lane a step (it was 8 ld.global.b16 + 8 st.global.b16 + 8 scalar s
    loads a thread; now 2 + 2 vectors, as TileLang)."""
    ptx = _ptx("row_scale_global", tmp_path, monkeypatch)
    assert _count(ptx, r"(?:ld|st)\.global\.b16") == 0, ptx
    assert _count(ptx, r"ld\.global\.v4\.b32") == 4 and _count(ptx, r"st\.global\.v4\.b32") == 4, ptx


# ---- a row statistic read after its reduction ----------------------------------------------
def test_epilogue_reading_a_row_statistic_is_vectorized(tmp_path, monkeypatch):
    """y[j] = h[j] * rsqrt(ss[0] / N): ss is every thread's whole (a reduction's result);
    the nest ran one element a thread step (8 st.global.b16 and 8 ld.shared.f32 a
    thread), now 8 lanes (one st.global.v4, two ld.shared.v4)."""
    ptx = _ptx("residual_add_rmsnorm", tmp_path, monkeypatch)
    assert _count(ptx, r"st\.global\.b16") == 0 and _count(ptx, r"st\.global\.v4\.b32") == 1, ptx


@pytest.mark.parametrize("name", ["row_sum_fp16", "gemv_fragment_reduce", "fp8_quant_per_group",
                                  "row_argmax"])
def test_row_statistic_at_the_threads_row_has_no_local_memory(name, tmp_path, monkeypatch):
    """s[i] read in a nest whose i is the thread's (T.copy(s, Y[...]), x / amax[i]): the
    register index was known only at run time, so ptxas put s in local memory
    (st.local / ld.local); it is a select over the registers now (tcr.pick), or, where
    only nests over the rows read s, the reduction round's own register (no pick)."""
    src = _src(name)
    if name in ("row_sum_fp16", "fp8_quant_per_group"):
        assert "tcr.pick(" not in src and "its rows stay in tc_red" in src, src
    else:
        assert "tcr.pick(" in src
    ptx = _ptx(name, tmp_path, monkeypatch)
    assert _count(ptx, r"\b(?:ld|st)\.local") == 0, ptx


@pytest.mark.parametrize("dtype", ["float8_e4m3", "bool", "int8", "float16"])
def test_pick_builds_for_narrow_register_types(dtype, tmp_path):
    """tcr.pick selects among registers of any element type a fragment holds (a bool, an
    fp8, an int8 fragment every thread filled whole, read at the thread's element)."""
    import tilecute.language as T
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    @T.prim_func
    def k(X: T.Tensor((8,), dtype), Y: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=128):
            t = T.alloc_fragment((8,), dtype)
            for i in T.serial(8):
                t[i] = X[i]
            for i in T.Parallel(8):
                Y[i] = t[i]
    assert "tcr.pick(t, i_1_, 8)" in emit_cute(lower(k, "sm_90a"))
    assert tilecute.build_cubin(k, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- a broadcast row under a tile of rows ---------------------------------------------------
def test_broadcast_bias_is_read_once_per_thread(tmp_path, monkeypatch):
    """Y[i, j] = X[i, j] + b[j] over 32 x 128 tiles, 8 lanes a step: a thread's 4 steps
    have the same j, so b's 16 bytes are read at the first only (5 vector loads a thread,
    as TileLang; it was 8: the stores to Y between them kept LLVM from reusing them)."""
    src = _src("bias_add_broadcast")
    assert "if cutlass.const_expr(tc_k1 == 0):" in src, src
    ptx = _ptx("bias_add_broadcast", tmp_path, monkeypatch)
    assert _count(ptx, r"ld\.global\.v4\.b32") == 5, ptx


def test_broadcast_bias_is_read_once_before_a_row_bounds_check(tmp_path, monkeypatch):
    """The same with M symbolic: the row tail is checked per step, the bias row, in bounds
    whatever M is, is read at the first step before the check (5 vector loads; TileLang,
    loading it under the row guard, has 8)."""
    src = _src("bias_add_dynamic_rows")
    pre = src.index("if cutlass.const_expr(tc_k1 == 0):")
    assert pre < src.index("B.iterator") < src.index("if by * 32 + i < M:"), src
    # the out-of-bounds rows have no path: they would only fill staged registers that the
    # store, which does not run there, reads back (Store.feeds)
    assert "else:" not in src and "out of bounds" not in src, src
    ptx = _ptx("bias_add_dynamic_rows", tmp_path, monkeypatch)
    assert _count(ptx, r"ld\.global\.v4\.b32") == 5, ptx


def test_row_dependent_vector_loads_stay_per_step():
    """A load whose index moves with the step (X[i, j]) is read at every step."""
    lines = _src("bias_add_broadcast").splitlines()
    (at,) = [n for n, ln in enumerate(lines) if "X.iterator" in ln]
    assert "const_expr" not in lines[at - 1] and "const_expr" in lines[at + 1] and \
        "B.iterator" in lines[at + 3], lines[at - 1:at + 4]


# ---- GPU: each program against torch ---------------------------------------------------------
def _close(a, b, atol=1e-2, rtol=1e-2):
    import torch
    torch.testing.assert_close(a.float(), b.float(), atol=atol, rtol=rtol)


@pytest.mark.gpu
def test_gpu_elementwise_and_copies():
    import torch
    d = "cuda"
    x = torch.randn(1024, 1024, device=d, dtype=torch.float16)
    b = torch.randn(1024, device=d, dtype=torch.float16)
    _close(P.bias_add_broadcast()(x, b), x + b)
    x3 = torch.randn(4, 256, 512, device=d, dtype=torch.bfloat16)
    s = torch.randn(4, 512, device=d)
    _close(P.scale_rows_cols_3d()(x3, s), x3.float() * s[:, None, :], 1e-4, 1e-4)
    xg = torch.randn(512, 2048, device=d, dtype=torch.float16)
    g, u = xg[:, :1024].float(), xg[:, 1024:].float()
    _close(P.swiglu_halves()(xg), torch.nn.functional.silu(g) * u)
    x4 = torch.randn(1024, 256, device=d, dtype=torch.float16)
    y4 = torch.randn(1024, 128, device=d, dtype=torch.float16)
    _close(P.concat_last_dim()(x4, y4), torch.cat([x4, y4], dim=1), 0, 0)
    xs = torch.randn(1024, 384, device=d, dtype=torch.bfloat16)
    a, bb = P.split_heads_parallel()(xs)
    _close(a, xs[:, :256], 0, 0)
    _close(bb, xs[:, 256:], 0, 0)
    xc = torch.randn(2048, 2048, device=d)
    _close(P.cast_fp32_to_bf16_tiles()(xc), xc.to(torch.bfloat16), 0, 0)
    xt = torch.randn(1024, 2048, device=d)
    _close(P.transpose_shared_tile()(xt), xt.t(), 0, 0)


@pytest.mark.gpu
def test_gpu_row_normalisations():
    import torch
    d = "cuda"
    x = torch.randn(256, 1024, device=d, dtype=torch.float16)
    _close(P.row_softmax()(x), torch.softmax(x.float(), dim=1), 1e-3, 1e-2)
    xr = torch.randn(512, 2048, device=d, dtype=torch.bfloat16)
    w = torch.randn(2048, device=d, dtype=torch.bfloat16)
    ref = xr.float() * torch.rsqrt(xr.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    _close(P.rmsnorm_shared()(xr, w), ref, 3e-2, 2e-2)
    xl = torch.randn(256, 1024, device=d, dtype=torch.float16)
    wl = torch.randn(1024, device=d, dtype=torch.float16)
    bl = torch.randn(1024, device=d, dtype=torch.float16)
    ref = torch.nn.functional.layer_norm(xl.float(), (1024,), wl.float(), bl.float(), 1e-5)
    _close(P.layernorm_fragment()(xl, wl, bl), ref, 2e-2, 2e-2)
    xa = torch.randn(512, 1024, device=d, dtype=torch.float16)
    ra = torch.randn(512, 1024, device=d, dtype=torch.float16)
    h = xa.float() + ra.float()
    _close(P.residual_add_rmsnorm()(xa, ra), h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6),
           2e-2, 2e-2)


@pytest.mark.gpu
def test_gpu_reductions_and_scans():
    import torch
    d = "cuda"
    x = torch.randn(4096, 512, device=d, dtype=torch.float16)
    _close(P.row_sum_fp16()(x), x.float().sum(1), 2e-2, 1e-3)
    xc = torch.randn(4096, 1024, device=d)
    _close(P.col_max_fp32()(xc), xc.amax(0), 0, 0)
    xs = torch.randn(1024, 256, device=d)
    _close(P.cumsum_rows_fp32()(xs), xs.cumsum(1), 1e-3, 1e-3)


@pytest.mark.gpu
def test_gpu_gather_scatter():
    import torch
    d = "cuda"
    e = torch.randn(4096, 512, device=d, dtype=torch.bfloat16)
    idx = torch.randint(0, 4096, (1024,), device=d, dtype=torch.int32)
    idx[7] = -1  # out of range: TileLang's guard reads zeros
    idx[100] = 4096
    ref = e[idx.clamp(0, 4095).long()].clone()
    ref[7] = 0
    ref[100] = 0
    _close(P.gather_rows()(e, idx), ref, 0, 0)
    xs = torch.randn(1024, 256, device=d)
    perm = torch.randperm(2048, device=d)[:1024].to(torch.int32)
    y = P.scatter_rows_copy()(xs, perm)
    _close(y[perm.long()], xs, 0, 0)


@pytest.mark.gpu
def test_gpu_gemv_and_gemms():
    import torch
    d = "cuda"
    a = torch.randn(4096, 4096, device=d, dtype=torch.float16)
    x = torch.randn(4096, device=d, dtype=torch.float16)
    _close(P.gemv_fragment_reduce()(a, x), a.float() @ x.float(), 5e-2, 1e-2)
    a2 = torch.randn(2048, 1024, device=d, dtype=torch.float16)
    x2 = torch.randn(1024, device=d, dtype=torch.float16)
    _close(P.gemv_thread_per_row_split()(a2, x2), a2.float() @ x2.float(), 5e-2, 1e-2)
    ab = torch.randn(64, 64, 64, device=d, dtype=torch.float16)
    bb = torch.randn(64, 64, 64, device=d, dtype=torch.float16)
    _close(P.batched_small_gemm()(ab, bb), torch.bmm(ab.float(), bb.float()), 5e-2, 1e-2)
    ag = torch.randn(512, 512, device=d, dtype=torch.float16)
    bg = torch.randn(512, 512, device=d, dtype=torch.float16)
    bias = torch.randn(512, device=d, dtype=torch.float16)
    ref = torch.nn.functional.gelu(ag.float() @ bg.float() + bias.float(), approximate="tanh")
    _close(P.gemm_bias_gelu_epilogue()(ag, bg, bias), ref, 1e-1, 1e-2)


@pytest.mark.gpu
def test_gpu_fp8_quantisation():
    import torch
    d = "cuda"
    x = torch.randn(1024, 2048, device=d, dtype=torch.bfloat16)
    q, s = P.fp8_quant_per_row()(x)
    amax = x.float().abs().amax(1).clamp_min(1e-4) / 448.0
    _close(s, amax, 0, 1e-6)
    _close(q.float() * s[:, None], x.float(), 1e-3, 7e-2)
    xg = torch.randn(512, 4096, device=d, dtype=torch.float16)
    qg, sg = P.fp8_quant_per_group()(xg)
    amax = xg.float().view(512, 32, 128).abs().amax(2).clamp_min(1e-4) / 448.0
    _close(sg, amax, 0, 1e-6)
    _close((qg.float().view(512, 32, 128) * sg[:, :, None]).view(512, 4096), xg.float(), 1e-3, 7e-2)


@pytest.mark.gpu
def test_gpu_more_first_programs():
    import torch
    d = "cuda"
    x = torch.randn(1000, 768, device=d, dtype=torch.float16)  # 1000 rows: a tail block of 8
    y = torch.randn(1000, 768, device=d, dtype=torch.float16)
    _close(P.add_dynamic_rows()(x, y), x + y, 1e-3, 1e-3)
    xs = torch.randn(1024, 1024, device=d)
    ref = xs.masked_fill(torch.ones(1024, 1024, device=d, dtype=torch.bool).triu(1), float("-inf"))
    _close(P.causal_mask_fill()(xs), ref, 0, 0)
    q = torch.randint(-128, 128, (1024, 4096), device=d, dtype=torch.int8)
    sc = torch.rand(4096, device=d)
    _close(P.int8_dequant_per_channel()(q, sc), (q.float() * sc).to(torch.bfloat16), 0, 0)
    xg = torch.randn(1 << 20, device=d, dtype=torch.bfloat16)
    _close(P.gelu_1d()(xg), torch.nn.functional.gelu(xg.float()), 1e-2, 1e-2)
    xr = torch.randn(256, 8192, device=d, dtype=torch.float16)
    w = torch.randn(8192, device=d, dtype=torch.float16)
    ref = xr.float() * torch.rsqrt(xr.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    _close(P.rmsnorm_chunked_pipelined()(xr, w), ref, 2e-2, 2e-2)
    xb = torch.randn(1000, 1024, device=d, dtype=torch.float16)  # a tail of 8 rows
    bb = torch.randn(1024, device=d, dtype=torch.float16)
    _close(P.bias_add_dynamic_rows()(xb, bb), xb + bb, 1e-3, 1e-3)
    xr2 = torch.randn(2048, 2048, device=d, dtype=torch.bfloat16)
    sr = torch.rand(2048, device=d) + 0.5
    _close(P.row_scale_global()(xr2, sr), (xr2.float() * sr[:, None]).to(torch.bfloat16), 0, 0)
    a = torch.randn(1024, 1024, device=d)
    b = torch.randn(1024, 1024, device=d)
    _close(P.add_via_shared_tiles()(a, b), a + b, 0, 0)
    xa = torch.randn(1024, 512, device=d)
    assert torch.equal(P.row_argmax()(xa).long(), xa.argmax(1))
    xc = torch.randn(4096, 1024, device=d)
    out = torch.zeros(1024, device=d)
    P.col_sum_atomic()(xc, out)
    _close(out, xc.sum(0), 1e-3, 1e-4)
