"""TileLang's pass config ``tl.enable_async_copy`` (``PassConfigKey.TL_ENABLE_ASYNC_COPY``,
default True), tilecute's option ``disable_async_copy`` (= not the value).  False turns off
the cp.async TileLang's copy lowering and parallel-loop lowering choose on their own
(``copy.cc`` LowerCPAsync falls back to the plain copy, ``lower_tile_op.cc`` injects no
cp.async): a ``T.copy`` or ``T.Parallel`` global -> shared nest stays plain loads and
stores.  ``T.async_copy`` (explicit async semantics) keeps cp.async, and
``T.copy(..., prefer_instruction="cp_async")`` is refused as a conflict (copy_analysis.cc:
"conflicts with pass config tl.enable_async_copy=false").  It was refused by name.

CPU: the nests the passes mark, the option mapping, the conflict, sm_80 / sm_90a cubins;
GPU: a pipelined GEMM on the sync path against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.options import PassConfigKey, from_pass_configs
from tilecute.transform.pipeline import run_passes

OFF = {"disable_async_copy": True}


def staged_rows(n=128, cols=64):
    """Out[r, :] = 2 * A[r, :] + A[n - 1 - r, :] through shared: a T.copy of the tile and a
    T.Parallel load of its mirror (both global -> shared, cp.async by default)."""
    @T.prim_func
    def staged(A: T.Tensor((n, cols), T.float16), Out: T.Tensor((n, cols), T.float16)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((n, cols), T.float16)
            m = T.alloc_shared((n, cols), T.float16)
            T.copy(A, s)
            for i, j in T.Parallel(n, cols):
                m[i, j] = A[n - 1 - i, j]
            for i, j in T.Parallel(n, cols):
                Out[i, j] = s[i, j] * T.float16(2) + m[i, j]
    return staged


def pipelined_gemm(M=256, N=256, K=256, bm=64, bn=64, bk=32, stages=3):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], a_s)
                T.copy(B[ko * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return gemm


def explicit_async(prefer=False):
    @T.prim_func
    def explicit(A: T.Tensor((64, 64), T.float16), Out: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), T.float16)
            if prefer:
                T.copy(A, s, prefer_instruction="cp_async")
            else:
                T.async_copy(A, s)
                T.ptx_wait_group(0)
            T.copy(s, Out)
    return explicit


def _nests(func, arch, options=None):
    """The global -> shared parallel nests' innermost loops after the passes."""
    body = run_passes(func, arch, options).kernels[0].body
    return [s for s in walk_stmts(body) if isinstance(s, N.For) and s.kind == "parallel"
            and s.vectors and any(isinstance(t, N.Store) for t in s.body)
            and any(isinstance(t, N.Store) and isinstance(t.value, N.Load)
                    and t.value.buffer == "A" for t in s.body)]


def test_pass_config_maps_to_the_option():
    assert from_pass_configs({PassConfigKey.TL_ENABLE_ASYNC_COPY: False}) == OFF
    assert from_pass_configs({"tl.enable_async_copy": True}) == {"disable_async_copy": False}
    with pytest.raises(ValueError, match="tl.enable_async_copy"):
        from_pass_configs({PassConfigKey.TL_ENABLE_ASYNC_COPY: 0})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_implicit_cp_async_is_off(arch):
    on = _nests(staged_rows(), arch, {"disable_tma": True})
    off = _nests(staged_rows(), arch, {"disable_tma": True, **OFF})
    assert len(on) == len(off) == 2
    assert all(n.async_copy for n in on)  # the default: both become cp.async
    assert not any(n.async_copy for n in off)
    assert [n.vector_width for n in on] == [n.vector_width for n in off]  # still vectorized


def test_pipelined_copies_stay_synchronous():
    on = _nests(pipelined_gemm(), "sm_80")
    off = _nests(pipelined_gemm(), "sm_80", OFF)
    assert on and all(n.async_copy for n in on)
    assert off and not any(n.async_copy for n in off)


def test_async_copy_keeps_cp_async():
    (nest,) = _nests(explicit_async(), "sm_80", OFF)
    assert nest.async_copy and nest.copy_instruction == N.ASYNC_COPY


def test_prefer_cp_async_conflicts():
    with pytest.raises(Exception, match=r'prim_func \'explicit\': T.copy\(\.\.\., prefer_instruction='
                                        r'"cp_async"\) conflicts with pass config '
                                        r"tl.enable_async_copy=False"):
        run_passes(explicit_async(prefer=True), "sm_80", OFF)
    assert _nests(explicit_async(prefer=True), "sm_80")[0].async_copy  # allowed by default


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("make", [staged_rows, pipelined_gemm])
def test_cubin(make, arch, tmp_path):
    options = {**OFF, "disable_tma": True} if make is staged_rows else OFF
    info = tilecute.build_cubin(make(), arch, out_dir=str(tmp_path), options=options)
    assert info.kernel_names


def test_jit_pass_configs_reach_the_passes():
    kernel = tilecute.compile(staged_rows(), target="sm_80",
                              pass_configs={PassConfigKey.TL_ENABLE_ASYNC_COPY: False})
    source = kernel.get_kernel_source()
    assert "cp_async" not in source
    assert "cp_async" in tilecute.compile(staged_rows(), target="sm_80").get_kernel_source()


@pytest.mark.gpu
@pytest.mark.parametrize("options", [OFF, {**OFF, "disable_tma": True, "disable_wgmma": True}])
def test_gpu_pipelined_gemm_without_cp_async(options):
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda")
    tilecute.compile(pipelined_gemm(), options=options)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
def test_gpu_staged_rows_without_cp_async():
    import torch
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)
    tilecute.compile(staged_rows(), pass_configs={PassConfigKey.TL_ENABLE_ASYNC_COPY: False})(a, out)
    torch.testing.assert_close(out, a * 2 + a.flip(0), atol=1e-2, rtol=1e-3)


# ---- tl.enable_vectorize_planner_verbose (option vectorize_verbose) ---------------------------
def test_vectorize_verbose_prints_each_nest(capfd):
    """TileLang's tl.enable_vectorize_planner_verbose prints the vectorize planner's choices;
    tilecute's vectorization pass prints one line per nest (it was refused by name)."""
    assert from_pass_configs({PassConfigKey.TL_ENABLE_VECTORIZE_PLANNER_VERBOSE: True}) == \
        {"vectorize_verbose": True}
    run_passes(staged_rows(), "sm_80", {"disable_tma": True, "vectorize_verbose": True})
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("[tilecute vectorize]")]
    assert len(lines) == 3, lines  # the copy, the mirrored load, the output nest
    copy_line = next(ln for ln in lines if "s[" in ln)
    assert "prim_func 'staged': T.Parallel(128, 64): vector width 8" in copy_line
    assert "A[" in copy_line and "x8" in copy_line and copy_line.endswith(", cp.async")
    run_passes(staged_rows(), "sm_80", {"disable_tma": True})
    assert "[tilecute vectorize]" not in capfd.readouterr().err  # silent by default
