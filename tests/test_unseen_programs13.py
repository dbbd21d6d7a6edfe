"""A thirteenth set of programs in TileLang's idioms (tests/unseen_programs13.py): warp
reductions, shared-memory words, ``T.ieee_sub`` modes, ``T.Unroll`` and a run-time
``T.serial`` step, negative floor-division / modulo index arithmetic, ragged
``T.Parallel`` extents and 1-D / 3-D / 4-D tails, odd thread counts, small-tile / int8 /
mixed-fp8 / stream-K / back-to-back / split-K-into-fp16 / batched GEMMs and fused
epilogues, normalizations and chunked reductions with ragged edges, reducers, macros with
scalar arguments, ``while`` walks, per-block roles, nested ``T.Pipelined``, cluster
launches over 3-D grids, shared -> shared copies, swizzle annotations, fills in every
scope, half / bf16 tile atomics, bit tricks, ``.astype``, promotion in min / max,
narrow integer arithmetic, fp8 e5m2 round trips, symbolic and strided arguments, scalars
bound inside the kernel.  The CPU checks also cover what this round fixed: a run-time or
constant-expression ``T.serial`` step, kernel names bound to ints / bools / floats / a
policy (TileLang's Python values: parse-time arguments, Python arithmetic).
Each builds to an sm_90a cubin on the CPU; on a GPU each matches torch (or numpy) written
to TileLang's meaning."""

import numpy as np
import pytest

import tilecute

import rounds
import unseen_programs13 as P

PROGRAMS = ['warp_reduce_family', 'warp_reduce_row_norms', 'shared_words', 'ieee_sub_modes',
            'unroll_alias_and_runtime_step', 'negative_index_arithmetic', 'parallel_extent_not_divisible',
            'elementwise_4d_tails', 'parallel_4d_loop', 'copy_3d_boundary', 'reduce_1d_tail_atomic',
            'softmax_single_warp_ragged', 'gemm_bm16_one_warp', 'gemm_bm32_transpose_a',
            'gemm_ragged_3_stages_swizzle', 'gemm_int8_both_transposed', 'gemm_int8_transpose_a_only',
            'gemm_fp8_mixed_formats', 'streamk_gemm', 'back_to_back_gemm', 'splitk_fp16_output_atomics',
            'batched_gemm_3d_grid_scaled', 'gemm_sigmoid_rowscale_bf16', 'layernorm_ragged_row',
            'rmsnorm_96_threads', 'column_stats_chunks_clear_false', 'reducer_ragged_rows',
            'shared_reduce_dim0_int', 'online_softmax_chunks', 'macro_scalar_args', 'collatz_while',
            'block_role_branches', 'nested_pipelined_heads', 'grid_3d_cluster', 'shared_to_shared_casts',
            'swizzled_transpose_annotated', 'fill_clear_every_scope', 'tile_atomics_half_bf16',
            'epilogue_fragment_shared_global_offset', 'float_bit_tricks', 'astype_and_casts',
            'nested_select_indices', 'mixed_minmax_promotion', 'int_ops_narrow_unsigned',
            'fp8_e5m2_roundtrip', 'dynamic_bias_tanh_gelu', 'strided_column_major_rowsum',
            'strided_row_slices', 'macro_results_and_ternaries', 'attention_two_warps',
            'gemm_two_warpgroups_fullcol', 'float64_histogram_atomics', 'uint32_hash_mix',
            'kernel_bound_scalars', 'macro_returns_buffers', 'gemm_strided_a_slice']


_arch = rounds.use_arch("TILECUTE_ARCH")
_src = rounds.source
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated code says -------------------------------------------------------------
def test_a_run_time_serial_step_takes_tileLangs_trip_count():
    """``T.serial(start, n, St[0])``: TileLang (with a warning) runs ceildiv(n - start, step)
    iterations start + v * step; tilecute refused the run-time step."""
    src = _src(P.unroll_alias_and_runtime_step())
    assert "step = St[0]" in src
    assert "cutlass.range(0, (96 - (St[1] + (tx - tx // 4 * 4)) + step - 1) // step)" in src, src
    assert "i_1_ = St[1] + (tx - tx // 4 * 4) + i_iter_1_ * step" in src, src


def test_a_run_time_step_must_be_an_integer():
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"`X\[0\]` has dtype float32, expected an integer"):
        @T.prim_func
        def k(X: T.Tensor((8,), T.float32), Y: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.serial(0, 8, X[0]):
                    Y[0] = X[i]


@pytest.mark.parametrize("step, text", [("T.int32(2)", "2"), ("s2 * 1", "2"), ("T.int64(4)", "4")])
def test_a_constant_step_expression_is_a_constant_step(step, text):
    """A step that is a constant expression (``T.int32(2)``, a name bound to an int in the
    kernel, times 1) is TileLang's constant step (an ``IntImm``); tilecute refused it as
    not known at parse time."""
    import tilecute.language as T
    k = T.from_script(f"""
@T.prim_func
def k(X: T.Tensor((64,), T.float32), Y: T.Tensor((32,), T.float32)):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        a = T.alloc_var(T.float32, init=0.0)
        s2 = 2
        for i in T.serial(tx, 64, {step}):
            a += X[i]
        Y[tx] = a
""")
    src = _src(k)
    assert f"cutlass.range(0, (64 - tx + {text} - 1) // {text})" in src, src
    assert f"i = tx + i_iter * {text}" in src, src


def test_a_kernel_name_bound_to_an_int_is_a_parse_time_int():
    """``stages = 2`` inside the kernel, then ``T.Pipelined(n, num_stages=stages)``:
    TileLang binds the name to the Python int; tilecute refused it as not known at parse
    time.  ``T.int32(3)`` (an IntImm) reads as 3 likewise."""
    import tilecute.language as T

    def prog(stages_text):
        return T.from_script(f"""
@T.prim_func
def k(X: T.Tensor((256, 64), T.float16), Y: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=128):
        stages = {stages_text}
        bm = 64
        s = T.alloc_shared((bm, 64), T.float16)
        f = T.alloc_fragment((bm, 64), T.float32)
        r = T.alloc_fragment((64,), T.float32)
        T.clear(r)
        for t in T.Pipelined(256 // bm, num_stages=stages):
            T.copy(X[t * bm, 0], s)
            T.copy(s, f)
            T.reduce_sum(f, r, dim=0, clear=False)
        T.copy(r, Y)
""")
    assert "num_stages=2" in prog("2").script()
    assert "num_stages=3" in prog("T.int32(3)").script()


def test_kernel_names_bound_to_a_policy_and_bools():
    """``pol = T.GemmWarpPolicy.FullRow``, ``tb = True``, ``keep = False`` inside the kernel
    (TileLang binds the Python values) used as ``policy=``, ``transpose_B=``, ``clear=``:
    they were refused as not a policy / not known at parse time."""
    import tilecute.language as T
    k = T.from_script("""
@T.prim_func
def k(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32),
      R: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=128):
        tb = True
        keep = False
        pol = T.GemmWarpPolicy.FullRow
        a_s = T.alloc_shared((64, 64), T.float16)
        b_s = T.alloc_shared((64, 64), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        r = T.alloc_fragment((64,), T.float32)
        T.copy(A, a_s)
        T.copy(B, b_s)
        T.gemm(a_s, b_s, acc, transpose_B=tb, clear_accum=True, policy=pol)
        T.fill(r, 1.0)
        T.reduce_sum(acc, r, dim=1, clear=keep)
        T.copy(acc, C)
        T.copy(r, R)
""")
    text = k.script()
    assert "transpose_B=True" in text and "policy=T.GemmWarpPolicy.FullRow" in text, text
    assert "T.reduce_sum(acc, r, dim=1, clear=False)" in text, text


def test_kernel_names_bound_to_dtypes_shapes_and_copy_flags():
    """A dtype, a shape tuple, an int and bools bound inside the kernel, used by
    allocations, ``T.copy(disable_tma=)``, ``T.cumsum(reverse=)`` and ``T.vectorized``."""
    import tilecute.language as T
    k = T.from_script("""
@T.prim_func
def k(A: T.Tensor((128, 64), T.float16), C: T.Tensor((128, 64), T.float32)):
    with T.Kernel(2, threads=128) as bx:
        dt = T.float16
        shape = (64, 64)
        n = 64
        no_tma = True
        rev = False
        a_s = T.alloc_shared(shape, dt)
        f = T.alloc_fragment(shape, "float32")
        T.copy(A[bx * n, 0], a_s, disable_tma=no_tma)
        T.copy(a_s, f)
        T.cumsum(f, dim=1, reverse=rev)
        T.copy(f, C[bx * n, 0])
""")
    text = k.script()
    assert "disable_tma=True" in text and "T.cumsum(f, f, dim=1, reverse=False)" in text, text
    assert "tct.load" not in _src(k)  # no TMA load of A


def test_true_division_of_kernel_bound_ints_is_pythons():
    """``bm = 64`` inside the kernel binds the Python int in TileLang, so ``bm / 3`` is
    21.33 and ``1 / bm`` is 0.015625; tilecute made ``bm`` an int32 Let and ``/`` of two
    integers floor division (21, 0): a silent wrong scale."""
    import tilecute.language as T
    k = T.from_script("""
@T.prim_func
def k(A: T.Tensor((64,), T.float32), C: T.Tensor((64, 3), T.float32), H: T.Tensor((64,), T.float16),
      D: T.Tensor((64,), T.float16), E: T.Tensor((64,), T.int64)):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        bm = 64
        half = bm / 2
        C[tx, 0] = A[tx] * (bm / 3)
        C[tx, 1] = A[tx] * (1 / bm)
        C[tx, 2] = A[tx] + half
        k3 = 3
        D[tx] = H[tx] * (k3 * 0.5)
        E[tx] = k3 * 7 << 40
""")
    text = k.script()
    assert "C[tx, 0] = A[tx] * T.float32(21.333333333333332)" in text, text
    assert "C[tx, 1] = A[tx] * T.float32(0.015625)" in text, text
    assert "C[tx, 2] = A[tx] + T.float32(32.0)" in text, text
    # k3 * 0.5: the Python float 1.5, float32 beside a float16 load (TileLang 0.1.15's TVM
    # types a Python float float32; test_expr_semantics_audit.py)
    assert 'D[tx] = T.Cast("float16", T.Cast("float32", H[tx]) * T.float32(1.5))' in text, text
    assert "E[tx] = T.int64(23089744183296)" in text, text  # k3 * 7 << 40: Python's int


def test_a_kernel_bound_python_float_is_a_python_float():
    """``s = 0.3`` inside the kernel is TileLang's Python float: ``H[i] * s`` of a float16
    H is ``H[i] * 0.3``, which TileLang 0.1.15 computes in float32 (its TVM types a Python
    float float32; its CUDA: ``(half_t)((float)H * 0.3f + (float)G)``).  A rebinding in a
    loop read after it is still TileLang's error."""
    import tilecute.language as T
    from tilecute.language.parser import FrontendError
    k = T.from_script("""
@T.prim_func
def k(H: T.Tensor((64,), T.float16), G: T.Tensor((64,), T.float16), C: T.Tensor((64,), T.float16)):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        s = 0.3
        C[tx] = H[tx] * s + G[tx]
""")
    want = 'C[tx] = T.Cast("float16", T.Cast("float32", H[tx]) * T.float32(0.3) + T.Cast("float32", G[tx]))'
    assert want in k.script(), k.script()
    with pytest.raises(FrontendError, match="'acc' is read after the loop/if body that rebinds it"):
        T.from_script("""
@T.prim_func
def k(A: T.Tensor((64,), T.float32), B: T.Tensor((1,), T.float32)):
    with T.Kernel(1, threads=1):
        acc = 0.0
        for i in T.serial(4):
            acc += A[i]
        B[0] = acc
""")


def test_an_if_on_kernel_int_comparisons_is_decided_while_parsing():
    """``bm = 64``, ``big = bm > 128``, ``if big:`` allocating a tile too large for shared
    memory: TileLang compares Python ints and never runs the branch; tilecute kept a
    run-time ``if`` (and the allocation, refused for its size)."""
    import tilecute.language as T
    k = T.from_script("""
@T.prim_func
def k(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
    with T.Kernel(1, threads=128):
        bm = 64
        big = bm > 128
        s = T.alloc_shared((bm, 64), T.float16)
        f = T.alloc_fragment((bm, 64), T.float32)
        T.copy(A, s)
        if big:
            g = T.alloc_shared((bm * 1000, 1000), T.float16)
            T.copy(A, g[0:64, 0:64])
        T.copy(s, f)
        if bm == 64 and not big:
            for i, j in T.Parallel(bm, 64):
                f[i, j] = f[i, j] * 2.0
        T.copy(f, C)
""")
    text = k.script()
    assert "big" not in text and "g = " not in text and "if " not in text, text
    assert "f[i, j] = f[i, j] * T.float32(2.0)" in text, text
    assert "cute.arch" in _src(k)


def test_negative_index_arithmetic_keeps_floor_semantics():
    """Indices that go negative before ``%`` / ``//``: the modulo is printed as
    a - a // b * b (floor division), never C's ``%``."""
    src = _src(P.negative_index_arithmetic())
    assert "X[(i - 3) - (i - 3) // 8 * 8]" in src
    assert "I[i, 1] = (i - 5) - (i - 5) // 4 * 4" in src
    assert "tcmath.truncdiv(i - 5, 4)" in src


# ---- on the GPU -------------------------------------------------------------------------------
_run = rounds.run
_close = rounds.exact


def _ints(*shape, lo=-3, hi=4, dtype=None):
    import torch
    t = torch.randint(lo, hi, shape, device="cuda").float()
    return t if dtype is None else t.to(dtype)


@pytest.mark.gpu
def test_warp_reduce_family_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 160
    X = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    F = torch.randn(n, device="cuda")
    O = torch.empty(n, 5, device="cuda", dtype=torch.int32)
    OF = torch.empty(n, 3, device="cuda")
    _run(P.warp_reduce_family(), X, F, O, OF)
    xw = X.view(-1, 32).cpu().numpy()
    ref = np.stack([xw.sum(1), xw.max(1), xw.min(1), np.bitwise_and.reduce(xw, 1),
                    np.bitwise_or.reduce(xw, 1)], 1).repeat(32, 0).astype(np.int32)
    assert np.array_equal(O.cpu().numpy(), ref)
    fw = F.view(-1, 32)
    _close(OF[:, 0], fw.max(1).values.repeat_interleave(32))
    _close(OF[:, 1], (fw * 2).min(1).values.repeat_interleave(32))
    _close(OF[:, 2], fw.sum(1).repeat_interleave(32), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_warp_reduce_row_norms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N = 37, 96
    X = torch.randn(M, N, device="cuda")
    Y = torch.empty_like(X)
    AM = torch.empty(M, device="cuda")
    _run(P.warp_reduce_row_norms(), X, Y, AM)
    _close(Y, X * torch.rsqrt((X * X).sum(1, keepdim=True) + 1e-6), atol=1e-5, rtol=1e-4)
    _close(AM, X.abs().max(1).values)


@pytest.mark.gpu
def test_shared_words_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 256
    X = torch.randn(n, device="cuda")
    outs = [torch.full((n,), float("nan"), device="cuda") for _ in range(3)]
    _run(P.shared_words(), X, *outs)
    assert torch.equal(outs[0], X.view(64, 4).roll(-1, 0).reshape(-1))
    assert torch.equal(outs[1], torch.cat([X[128:], X[:128]]))
    assert torch.equal(outs[2], X.flip(0))


def _directed_f32(d, mode):
    """float64 values d (exact differences) rounded to float32 in ``mode``."""
    f = d.astype(np.float32)
    if mode == "rn":
        return f
    up, down = np.float32(np.inf), np.float32(-np.inf)
    fd = f.astype(np.float64)
    if mode == "rz":
        return np.where(np.abs(fd) > np.abs(d), np.nextafter(f, np.float32(0)), f)
    if mode == "ru":
        return np.where(fd < d, np.nextafter(f, up), f)
    return np.where(fd > d, np.nextafter(f, down), f)


@pytest.mark.gpu
def test_ieee_sub_modes_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 256
    X = torch.randn(n, device="cuda")
    Z = torch.randn(n, device="cuda") * 1e-3
    Y = torch.empty(n, 4, device="cuda")
    _run(P.ieee_sub_modes(), X, Z, Y)
    d = X.cpu().double().numpy() - Z.cpu().double().numpy()  # exact: close exponents
    got = Y.cpu().numpy()
    for k, mode in enumerate(("rn", "rz", "ru", "rd")):
        assert np.array_equal(got[:, k], _directed_f32(d, mode)), mode
    assert (got[:, 2] != got[:, 3]).any()


@pytest.mark.gpu
def test_unroll_alias_and_runtime_step_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 96
    X = torch.randn(n, device="cuda", dtype=torch.float64).float()
    xs = X.cpu().double().numpy()
    for step, start0 in ((5, 3), (7, 94), (1, 0)):
        St = torch.tensor([step, start0], device="cuda", dtype=torch.int32)
        Y = torch.full((32, 2), float("nan"), device="cuda")
        _run(P.unroll_alias_and_runtime_step(), X, St, Y)
        for tx in range(32):
            a = sum(xs[i + tx] for i in range(0, 64, 16) if i + tx < 64)
            b = sum(xs[i] for i in range(start0 + tx % 4, n, step))
            assert abs(float(Y[tx, 0]) - a) < 1e-4, (tx, step)
            assert abs(float(Y[tx, 1]) - b) < 1e-4, (tx, step, start0)


@pytest.mark.gpu
def test_negative_index_arithmetic_on_gpu():
    import torch
    n = 200
    X = torch.arange(16, device="cuda", dtype=torch.float32) * 10
    O = torch.empty(n, 4, device="cuda")
    I = torch.empty(n, 4, device="cuda", dtype=torch.int32)
    _run(P.negative_index_arithmetic(), X, O, I)
    i = np.arange(n)
    tmod = np.fmod(i - 37, 8)
    ref_o = np.stack([(i - 3) % 8, (i - 37) // 32 + 8, tmod + 8, (7 - i) % 16], 1) * 10.0
    ref_i = np.stack([(i - 5) // 4, (i - 5) % 4, np.trunc((i - 5) / 4), 13 - 3 * i], 1)
    assert np.array_equal(O.cpu().numpy(), ref_o.astype(np.float32))
    assert np.array_equal(I.cpu().numpy(), ref_i.astype(np.int32))


@pytest.mark.gpu
def test_parallel_extent_not_divisible_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(6, 100, device="cuda")
    Y = torch.empty_like(X)
    S = torch.empty(2, device="cuda")
    _run(P.parallel_extent_not_divisible(), X, Y, S)
    f = X[2] * 2
    _close(Y, X + f[None, :])
    _close(S[0], f.sum(), atol=1e-4, rtol=1e-5)
    _close(S[1], f.max())


@pytest.mark.gpu
def test_tails_in_4d_and_3d_on_gpu():
    import torch
    torch.manual_seed(0)
    B, C, H, W = 3, 5, 7, 37
    X = torch.randn(B, C, H, W, device="cuda").half()
    scale, shift = torch.randn(C, device="cuda"), torch.randn(C, device="cuda")
    Y = torch.full_like(X, float("nan"))
    _run(P.elementwise_4d_tails(), X, scale, shift, Y)
    _close(Y, (X.float() * scale[None, :, None, None] + shift[None, :, None, None]).half(), atol=2e-3, rtol=2e-3)

    X4 = torch.randn(2, 3, 5, 9, device="cuda")
    Y4 = torch.empty(9, 5, 3, 2, device="cuda")
    _run(P.parallel_4d_loop(), X4, Y4)
    b, c, h, w = torch.meshgrid(*[torch.arange(s, device="cuda") for s in (2, 3, 5, 9)], indexing="ij")
    assert torch.equal(Y4, (X4 + (b * 1000 + c * 100 + h * 10 + w).float()).permute(3, 2, 1, 0))

    X3 = torch.randn(5, 70, 45, device="cuda")
    Y3 = torch.full((5, 45, 70), float("nan"), device="cuda")
    _run(P.copy_3d_boundary(), X3, Y3)
    assert torch.equal(Y3, X3.transpose(1, 2) + 0.5)


@pytest.mark.gpu
def test_reduce_1d_tail_and_single_warp_softmax_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(1000, device="cuda")
    Out = torch.zeros(2, device="cuda")
    _run(P.reduce_1d_tail_atomic(), X, Out)
    _close(Out[0], X.sum(), atol=1e-3, rtol=1e-5)
    _close(Out[1], X.abs().max())

    Xs = torch.randn(10, 200, device="cuda") * 3
    Ys = torch.empty_like(Xs)
    _run(P.softmax_single_warp_ragged(), Xs, Ys)
    _close(Ys, torch.softmax(Xs, 1), atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
def test_small_tile_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 50, 72, 88
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_bm16_one_warp(), A, B, C)
    _close(C, A.float() @ B.float(), atol=1e-3, rtol=1e-3)

    M, N, K = 96, 80, 72
    A, B = torch.randn(K, M, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_bm32_transpose_a(), A, B, C)
    _close(C, A.float().T @ B.float(), atol=1e-3, rtol=1e-3)

    M, N, K = 200, 136, 100
    A, B = torch.randn(M, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
    C = torch.full((M, N), float("nan"), device="cuda").bfloat16()
    _run(P.gemm_ragged_3_stages_swizzle(), A, B, C)
    _close(C.float(), (A.float() @ B.float()).bfloat16().float(), atol=0.1, rtol=1e-2)


@pytest.mark.gpu
def test_int8_and_mixed_fp8_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 128, 96, 128
    for name, ta, tb in (("gemm_int8_both_transposed", True, True), ("gemm_int8_transpose_a_only", True, False)):
        A = torch.randint(-128, 128, (K, M) if ta else (M, K), device="cuda", dtype=torch.int8)
        B = torch.randint(-128, 128, (N, K) if tb else (K, N), device="cuda", dtype=torch.int8)
        C = torch.full((M, N), -7, device="cuda", dtype=torch.int32)
        _run(getattr(P, name)(), A, B, C)
        a = A.double().T if ta else A.double()
        b = B.double().T if tb else B.double()
        assert torch.equal(C, (a @ b).int()), name

    M = N = K = 128
    A = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    B = torch.randn(N, K, device="cuda").to(torch.float8_e5m2)
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_fp8_mixed_formats(), A, B, C)
    # (Hopper's fp8 wgmma adds its products in fewer than float32's bits: ~1e-3 relative)
    _close(C, A.float() @ B.float().T, atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_streamk_b2b_splitk_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N, K = 128, 128, 256
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(N, K, device="cuda").half()
    C = torch.zeros(M, N, device="cuda")
    _run(P.streamk_gemm(), A, B, C)
    _close(C, A.float() @ B.float().T, atol=1e-3, rtol=1e-3)

    M, D, H = 128, 64, 96
    X = (torch.randn(M, D, device="cuda") * 0.5).half()
    W1 = (torch.randn(D, H, device="cuda") * 0.2).half()
    W2 = (torch.randn(H, D, device="cuda") * 0.2).half()
    Y = torch.empty(M, D, device="cuda")
    _run(P.back_to_back_gemm(), X, W1, W2, Y)
    h = torch.relu(X.float() @ W1.float()).half().float()
    _close(Y, h @ W2.float(), atol=2e-3, rtol=2e-3)

    M, N, K = 64, 128, 256
    A, B = _ints(M, K, lo=-2, hi=3, dtype=torch.float16), _ints(K, N, lo=-2, hi=3, dtype=torch.float16)
    C = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    _run(P.splitk_fp16_output_atomics(), A, B, C)
    assert torch.equal(C, (A.float() @ B.float()).half())


@pytest.mark.gpu
def test_batched_and_epilogue_gemms_on_gpu():
    import torch
    torch.manual_seed(0)
    Bt, M, N, K = 3, 64, 96, 64
    A, B = torch.randn(Bt, M, K, device="cuda").half(), torch.randn(Bt, N, K, device="cuda").half()
    scale, bias = torch.randn(Bt, device="cuda"), torch.randn(Bt, N, device="cuda")
    C = torch.full((Bt, M, N), float("nan"), device="cuda")
    _run(P.batched_gemm_3d_grid_scaled(), A, B, scale, bias, C)
    _close(C, scale[:, None, None] * (A.float() @ B.float().transpose(1, 2)) + bias[:, None, :],
           atol=2e-3, rtol=1e-3)

    M, N, K = 128, 128, 96
    A, B = torch.randn(M, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
    bias, rs = torch.randn(N, device="cuda"), torch.randn(M, device="cuda")
    C = torch.full((M, N), float("nan"), device="cuda")
    _run(P.gemm_sigmoid_rowscale_bf16(), A, B, bias, rs, C)
    _close(C, rs[:, None] * torch.sigmoid(A.float() @ B.float() + bias), atol=1e-4, rtol=1e-4)

    M, N, K = 100, 72, 64
    A, B = (torch.randn(M, K, device="cuda") * 0.5).half(), (torch.randn(K, N, device="cuda") * 0.5).half()
    C = torch.full((M, N), float("nan"), device="cuda").half()
    _run(P.epilogue_fragment_shared_global_offset(), A, B, C)
    r = (A.float() @ B.float()).half()
    want = r.clone()
    want[:, 32:64] = r[:, 32:64] * 2
    _close(C.float(), want.float(), atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_norms_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N = 40, 300
    X = (torch.randn(M, N, device="cuda") * 2 + 1).half()
    W, Bs = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    Y = torch.full_like(X, float("nan"))
    _run(P.layernorm_ragged_row(), X, W, Bs, Y)
    _close(Y.float(), torch.nn.functional.layer_norm(X.float(), (N,), W, Bs, eps=1e-5).half().float(),
           atol=1e-2, rtol=1e-2)

    M, N = 24, 192
    X = torch.randn(M, N, device="cuda").bfloat16()
    W = torch.randn(N, device="cuda").bfloat16()
    Y = torch.empty_like(X)
    _run(P.rmsnorm_96_threads(), X, W, Y)
    x = X.float()
    _close(Y.float(), (x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * W.float()).bfloat16().float(),
           atol=2e-2, rtol=2e-2)

    M, N = 16, 400
    X = torch.randn(M, N, device="cuda") * 4
    Y = torch.full_like(X, float("nan"))
    _run(P.online_softmax_chunks(), X, Y)
    _close(Y, torch.softmax(X, 1), atol=1e-6, rtol=1e-4)


@pytest.mark.gpu
def test_chunked_and_shared_reductions_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(100, 64, device="cuda")
    O = torch.empty(3, 64, device="cuda")
    _run(P.column_stats_chunks_clear_false(), X, O)
    _close(O[0], X.sum(0), atol=1e-4, rtol=1e-5)
    _close(O[1], X.max(0).values)
    _close(O[2], X.min(0).values)

    XI = torch.randint(-1000, 1000, (64, 32), device="cuda", dtype=torch.int32)
    OI = torch.empty(4, 32, device="cuda", dtype=torch.int32)
    _run(P.shared_reduce_dim0_int(), XI, OI)
    xi = XI.cpu().numpy()
    ref = np.stack([xi.sum(0), xi.max(0), np.bitwise_or.reduce(xi, 0), xi.min(0)]).astype(np.int32)
    assert np.array_equal(OI.cpu().numpy(), ref)


@pytest.mark.gpu
def test_reducer_ragged_rows_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N = 77, 48
    X = torch.randn(M, N, device="cuda")
    XI = torch.randint(0, 1 << 20, (M, N), device="cuda", dtype=torch.int32)
    S = torch.zeros(N, device="cuda")
    nb = (M + 31) // 32
    MN = torch.empty(nb, N, device="cuda")
    XR = torch.empty(nb, N, device="cuda", dtype=torch.int32)
    _run(P.reducer_ragged_rows(), X, XI, S, MN, XR)
    _close(S, X.sum(0), atol=1e-4, rtol=1e-5)
    xi = XI.cpu().numpy()
    for b in range(nb):
        rows = slice(b * 32, min(b * 32 + 32, M))
        _close(MN[b], X[rows].min(0).values)
        assert np.array_equal(XR[b].cpu().numpy(), np.bitwise_xor.reduce(xi[rows], 0)), b


@pytest.mark.gpu
def test_control_flow_programs_on_gpu():
    import torch
    torch.manual_seed(0)
    M = 40
    X = torch.randn(M, 32, device="cuda")
    Y = torch.full_like(X, float("nan"))
    R = torch.full((M,), float("nan"), device="cuda")
    _run(P.macro_scalar_args(), X, Y, R)
    assert torch.equal(Y, X * 0.5)
    assert torch.equal(R, (X * 0.5).max(1).values)

    n = 256
    X = torch.randint(1, 10000, (n,), device="cuda", dtype=torch.int64)
    X[:3] = torch.tensor([1, 2, 27], device="cuda")
    S = torch.empty(n, device="cuda", dtype=torch.int32)
    Pk = torch.empty(n, device="cuda", dtype=torch.int64)
    _run(P.collatz_while(), X, S, Pk)
    for k, x0 in enumerate(X.tolist()):
        x, steps, peak = x0, 0, x0
        while x != 1 and steps < 200:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            peak, steps = max(peak, x), steps + 1
        assert (int(S[k]), int(Pk[k])) == (steps, peak), (k, x0)

    n = 512
    X = torch.randn(n, device="cuda")
    Y0 = torch.randn(n, device="cuda")
    Y = Y0.clone()
    Ssum = torch.empty(1, device="cuda")
    _run(P.block_role_branches(), X, Y, Ssum)
    want = Y0.clone()
    want[:128] += torch.arange(128, device="cuda").float()
    idx = torch.arange(128, n, device="cuda")
    want[128:] = X[128:] * (idx // 128 + 1).float()
    assert torch.equal(Y, want)
    _close(Ssum[0], X.sum(), atol=1e-3, rtol=1e-5)


@pytest.mark.gpu
def test_nested_pipelined_and_cluster_grid_on_gpu():
    import torch
    torch.manual_seed(0)
    H, S, D = 3, 256, 64
    X = torch.randn(H, S, D, device="cuda").half()
    Sc = torch.randn(H, D, device="cuda")
    O = torch.empty(H, D, device="cuda")
    _run(P.nested_pipelined_heads(), X, Sc, O)
    _close(O, X.float().sum(1) * Sc, atol=1e-3, rtol=1e-4)

    X0, X1, X2, n = 4, 3, 2, 64
    A = torch.randn(X2, X1, X0 * n, device="cuda")
    B = torch.empty_like(A)
    ID = torch.empty(X2, X1, X0, device="cuda", dtype=torch.int32)
    _run(P.grid_3d_cluster(), A, B, ID)
    bz, by, bx = torch.meshgrid(torch.arange(X2), torch.arange(X1), torch.arange(X0), indexing="ij")
    off = (bz * 100 + by * 10 + bx).float().cuda().repeat_interleave(n, 2)
    assert torch.equal(B, A + off)
    assert torch.equal(ID.cpu(), ((bz * X1 + by) * X0 + bx + 1000 * (bx % 2)).int())


@pytest.mark.gpu
def test_memory_programs_on_gpu():
    import torch
    torch.manual_seed(0)
    X = torch.randn(64, 64, device="cuda")
    H = torch.empty(64, 64, device="cuda").half()
    W = torch.empty(32, 32, device="cuda")
    F = torch.empty(64, 64, device="cuda")
    _run(P.shared_to_shared_casts(), X, H, W, F)
    assert torch.equal(H, X.half())
    assert torch.equal(W, X[16:48, 8:40])
    assert torch.equal(F, X.half().bfloat16().float())

    X = torch.randn(128, 96, device="cuda").half()
    Y = torch.empty(96, 128, device="cuda").half()
    _run(P.swizzled_transpose_annotated(), X, Y)
    assert torch.equal(Y, X.T)

    n = 128
    G0 = torch.randn(4, n, device="cuda")
    G = G0.clone()
    O = torch.empty(3, n, device="cuda")
    _run(P.fill_clear_every_scope(), G, O)
    want_g = G0.clone()
    want_g[1, 32:96] = 7.0
    assert torch.equal(G, want_g)
    i = torch.arange(n, device="cuda")
    assert torch.equal(O[0], torch.where(i < 16, 0.0, 2.5) + torch.where(i >= n - 8, 0.0, -1.5))
    assert torch.equal(O[1], 0.5 + i.float())
    assert torch.equal(O[2], want_g[1])


@pytest.mark.gpu
def test_tile_atomics_half_bf16_on_gpu():
    import torch
    torch.manual_seed(0)
    K, M, N = 4, 64, 64
    A = _ints(K, M, N)
    H0, Bf0, H20 = _ints(M, N, dtype=torch.float16), _ints(M, N, dtype=torch.bfloat16), _ints(M, N, dtype=torch.float16)
    H, Bf, H2 = H0.clone(), Bf0.clone(), H20.clone()
    _run(P.tile_atomics_half_bf16(), A, H, Bf, H2)
    s = A.sum(0)
    assert torch.equal(H, (H0.float() + s).half())
    assert torch.equal(Bf, (Bf0.float() + s).bfloat16())
    assert torch.equal(H2, (H20.float() + s).half())


@pytest.mark.gpu
def test_bit_tricks_and_casts_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 256
    X = torch.randn(n, device="cuda") * 3
    X[0], X[1] = 0.0, -0.0
    I = torch.empty(n, 2, device="cuda", dtype=torch.int32)
    F = torch.empty(n, 3, device="cuda")
    _run(P.float_bit_tricks(), X, I, F)
    x = X.cpu().numpy()
    u = x.view(np.uint32)
    assert np.array_equal(I[:, 0].cpu().numpy(), (u >> 31).astype(np.int32))
    assert np.array_equal(I[:, 1].cpu().numpy(), ((u >> 23) & 0xFF).astype(np.int32) - 127)
    assert np.array_equal(F[:, 0].cpu().numpy(), np.abs(x))
    ax = (np.abs(x) + np.float32(1e-3)).astype(np.float32)
    g = (np.int32(0x5F3759DF) - (ax.view(np.int32) >> 1)).view(np.float32)
    nr = g * (np.float32(1.5) - np.float32(0.5) * ax * g * g)
    np.testing.assert_allclose(F[:, 1].cpu().numpy(), nr, rtol=1e-5)
    np.testing.assert_allclose(F[:, 1].cpu().numpy(), 1 / np.sqrt(ax), rtol=5e-3)
    assert np.array_equal(F[:, 2].cpu().numpy().view(np.uint32), u + np.uint32(1))

    X = torch.randn(n, device="cuda") * 5
    U = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8)
    I = torch.empty(n, 2, device="cuda", dtype=torch.int32)
    F = torch.empty(n, 3, device="cuda")
    D = torch.empty(n, device="cuda", dtype=torch.float64)
    _run(P.astype_and_casts(), X, U, I, F, D)
    i0 = (X * 10.0).to(torch.int32)
    assert torch.equal(I[:, 0], i0)
    assert torch.equal(I[:, 1], (X * 3.0).to(torch.int8).int())
    assert torch.equal(F[:, 0], X.half().float())
    assert torch.equal(F[:, 1], (X.bfloat16() * 3.0).float())
    assert torch.equal(F[:, 2], U.float() * 0.5)
    # (numpy divides; torch's CUDA division by a scalar multiplies by its reciprocal, which
    # the kernel's IEEE float64 division does not match to the last bit)
    assert np.array_equal(D.cpu().numpy(), (i0 * 7).cpu().numpy().astype(np.float64) / 3.0)


@pytest.mark.gpu
def test_selects_and_minmax_promotion_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 300
    X = torch.randn(n, device="cuda")
    Y = torch.empty(n, device="cuda")
    S = torch.empty(n, device="cuda", dtype=torch.int32)
    _run(P.nested_select_indices(), X, Y, S)
    x = X.cpu().double().numpy()
    want = np.zeros(n)
    for i in range(n):
        for d in range(5):
            j = i + d - 2
            r = -j if j < 0 else (2 * n - 2 - j if j >= n else j)
            want[i] += x[r] * (d + 1)
    np.testing.assert_allclose(Y.cpu().numpy(), want, atol=1e-5, rtol=1e-5)
    assert torch.equal(S, torch.where(X > 0.5, 1, torch.where(X < -0.5, -1, 0)).int())

    n = 128
    I = torch.randint(-5, 6, (n,), device="cuda", dtype=torch.int32)
    B = torch.randint(-100, 100, (n,), device="cuda", dtype=torch.int8)
    H = torch.randn(n, device="cuda").half()
    F = torch.randn(n, device="cuda") * 4
    O = torch.empty(n, 4, device="cuda")
    OI = torch.empty(n, device="cuda", dtype=torch.int32)
    _run(P.mixed_minmax_promotion(), I, B, H, F, O, OI)
    assert torch.equal(O[:, 0], torch.maximum(I.float(), F))
    assert torch.equal(O[:, 1], torch.minimum(H.float(), F))
    assert torch.equal(O[:, 2], I.float().clamp(-2.5, 2.5))
    assert torch.equal(O[:, 3], torch.maximum(H.float() * 2, B.float()))
    assert torch.equal(OI, torch.minimum(B.int(), I))


@pytest.mark.gpu
def test_int_ops_narrow_unsigned_on_gpu():
    import torch
    rng = np.random.default_rng(0)
    n = 256
    a = rng.integers(0, 65536, n).astype(np.uint16)
    b = rng.integers(-32768, 32768, n).astype(np.int16)
    c = rng.integers(0, 256, n).astype(np.uint8)
    A = torch.from_numpy(a.view(np.int16)).cuda().view(torch.uint16)
    B = torch.from_numpy(b).cuda()
    C = torch.from_numpy(c).cuda()
    O = torch.empty(n, 6, device="cuda", dtype=torch.int32)
    _run(P.int_ops_narrow_unsigned(), A, B, C, O)
    a32, b32, c32 = a.astype(np.int64), b.astype(np.int64), c.astype(np.int64)
    ref = np.stack([a32 + 40000,  # C's promotion: the uint16 sum in int
                    b32 >> 3, a32 >> 5,
                    ((c32 ^ 0x5A) & ((~c32 & 0xFF) | 0x0F)),
                    b32 // -7, b32 % -7], 1).astype(np.int32)
    assert np.array_equal(O.cpu().numpy(), ref)


@pytest.mark.gpu
def test_fp8_e5m2_roundtrip_on_gpu():
    import torch
    torch.manual_seed(0)
    M, N = 64, 128
    X = torch.randn(M, N, device="cuda")
    Q = torch.empty(M, N, device="cuda", dtype=torch.float8_e5m2)
    Y = torch.empty(M, N, device="cuda")
    _run(P.fp8_e5m2_roundtrip(), X, Q, Y)
    am = X.abs().amax(1, keepdim=True).clamp_min(1e-4)
    q = (X * (57344.0 / am)).to(torch.float8_e5m2)
    same = (Q.view(torch.uint8) == q.view(torch.uint8)).float().mean()
    assert same > 0.995, same
    _close(Q.float(), q.float(), atol=0, rtol=0.26)
    _close(Y, Q.float() * (am / 57344.0), atol=1e-7, rtol=1e-6)


@pytest.mark.gpu
def test_symbolic_and_strided_arguments_on_gpu():
    import torch
    torch.manual_seed(0)
    kern = tilecute.compile(P.dynamic_bias_tanh_gelu())
    for M, N in ((50, 100), (7, 300), (64, 64)):
        X = torch.randn(M, N, device="cuda")
        b = torch.randn(N, device="cuda")
        Y = torch.full_like(X, float("nan"))
        Pc = torch.full((M,), -1, device="cuda", dtype=torch.int32)
        kern(X, b, Y, Pc)
        _close(Y, torch.nn.functional.gelu(X + b, approximate="tanh"), atol=1e-5, rtol=1e-4)
        assert torch.equal(Pc, ((X + b) > 0).sum(1).int())

    kern = tilecute.compile(P.strided_column_major_rowsum())
    for M, N, pad in ((100, 20, 7), (64, 16, 0)):
        base = torch.randn(N, M + pad, device="cuda")
        X = base[:, :M].t()  # (M, N), strides (1, M + pad)
        S = torch.empty(M, device="cuda")
        Y = torch.full((M, 16), float("nan"), device="cuda")
        kern(X, S, Y)
        _close(S, X.sum(1), atol=1e-4, rtol=1e-5)
        assert torch.equal(Y, X[:, :16])

    kern = tilecute.compile(P.strided_row_slices())
    M, N = 9, 200
    Xb = torch.randn(M, 232, device="cuda").half()
    Yb = torch.zeros(M, 240, device="cuda").half()
    X, Y = Xb[:, 8:8 + N], Yb[:, 16:16 + N]
    kern(X, Y)
    assert torch.equal(Y, X * 2 + 1)
    assert torch.equal(Yb[:, :16], torch.zeros(M, 16, device="cuda").half())
    assert torch.equal(Yb[:, 16 + N:], torch.zeros(M, 240 - 16 - N, device="cuda").half())


@pytest.mark.gpu
def test_macro_results_and_ternaries_on_gpu():
    import math
    import torch
    torch.manual_seed(0)
    M, N = 48, 80
    X = torch.randn(M, N, device="cuda") * 1.5
    Y = torch.full_like(X, float("nan"))
    C = torch.full((M,), -1, device="cuda", dtype=torch.int32)
    _run(P.macro_results_and_ternaries(), X, Y, C)
    g = 0.5 * X * (1 + torch.erf(X / math.sqrt(2)))
    want = torch.where((X >= -1) & (X < 1), g, X * 3)
    want[:, N - 8:] = 0
    _close(Y, want, atol=1e-6, rtol=1e-5)
    assert torch.equal(C, ((X > 0) & (X <= 1)).sum(1).int())


@pytest.mark.gpu
def test_attention_two_warps_and_fullcol_gemm_on_gpu():
    import torch
    torch.manual_seed(0)
    S, D = 128, 64
    Q, K, V = (torch.randn(S, D, device="cuda").half() for _ in range(3))
    O = torch.full((S, D), float("nan"), device="cuda")
    _run(P.attention_two_warps(), Q, K, V, O)
    ref = torch.softmax((Q.float() @ K.float().T) / D ** 0.5, 1) @ V.float()
    _close(O, ref, atol=1e-2, rtol=1e-2)

    M, N, K = 128, 256, 128
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
    C = torch.full((M, N), float("nan"), device="cuda").half()
    _run(P.gemm_two_warpgroups_fullcol(), A, B, C)
    _close(C.float(), (A.float() @ B.float()).half().float(), atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_float64_histogram_atomics_on_gpu():
    import torch
    torch.manual_seed(0)
    n, bins = 4096, 32
    X = torch.randn(n, device="cuda") * 2
    W = torch.rand(n, device="cuda", dtype=torch.float64)
    H = torch.zeros(bins, device="cuda", dtype=torch.float64)
    SS = torch.empty(n // 256, device="cuda", dtype=torch.float64)
    _run(P.float64_histogram_atomics(), X, W, H, SS)
    b = ((X + 4.0) * 4.0).floor().to(torch.int32).clamp(0, bins - 1).long()
    _close(H, torch.bincount(b, weights=W, minlength=bins), atol=1e-10, rtol=1e-12)
    _close(SS, (W * W).view(-1, 256).sum(1), atol=1e-12, rtol=1e-12)


@pytest.mark.gpu
def test_uint32_hash_mix_on_gpu():
    import torch
    rng = np.random.default_rng(3)
    n = 512
    k = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    k[:3] = [0, 1, 0xFFFFFFFF]
    Kt = torch.from_numpy(k.view(np.int32)).cuda().view(torch.uint32)
    H = torch.zeros(n, 3, device="cuda", dtype=torch.int32).view(torch.uint32)
    _run(P.uint32_hash_mix(), Kt, H)
    got = H.view(torch.int32).cpu().numpy().view(np.uint32)
    with np.errstate(over="ignore"):
        h = k.copy()
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
        x = k | np.uint32(1)
        x ^= x << np.uint32(13)
        x ^= x >> np.uint32(17)
        x ^= x << np.uint32(5)
    hi = ((k.astype(np.uint64) * np.uint64(0x9E3779B9)) >> np.uint64(32)).astype(np.uint32)
    assert np.array_equal(got[:, 0], h)
    assert np.array_equal(got[:, 1], x)
    assert np.array_equal(got[:, 2], hi)


@pytest.mark.gpu
def test_kernel_bound_scalars_on_gpu():
    import torch
    torch.manual_seed(0)
    n, bm = 256, 64
    A = torch.randn(n, device="cuda")
    H = torch.randn(n, device="cuda").half()
    C = torch.empty(n, 2, device="cuda")
    D = torch.empty(n, device="cuda").half()
    S = torch.empty(n // bm, bm, device="cuda")
    _run(P.kernel_bound_scalars(), A, H, C, D, S)
    assert torch.equal(C[:, 0], A * 0.015625)
    _close(C[:, 1], A * (64 / 3), atol=0, rtol=1e-6)
    assert torch.equal(D, (H.float() * 0.3).half())  # a float32 product (TileLang 0.1.15)
    _close(S, A.view(-1, bm).flip(1).cumsum(1).flip(1), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_macro_returns_buffers_on_gpu():
    import torch
    torch.manual_seed(0)
    A = torch.randn(64, 64, device="cuda") * 3
    C = torch.empty_like(A)
    R = torch.empty(64, 2, device="cuda")
    _run(P.macro_returns_buffers(), A, C, R)
    silu = A / (1 + torch.exp(-A))
    _close(C, silu, atol=1e-6, rtol=1e-5)
    _close(R[:, 0], silu.max(1).values, atol=1e-6, rtol=1e-5)
    _close(R[:, 1], silu.sum(1), atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_gemm_strided_a_slice_on_gpu():
    import torch
    torch.manual_seed(0)
    kern = tilecute.compile(P.gemm_strided_a_slice())
    B = torch.randn(128, 128, device="cuda").half()
    for M in (200, 64):
        big = torch.randn(M, 3 * 128, device="cuda").half()
        A = big[:, 128:256]  # strides (384, 1), 256 bytes into each row
        C = torch.full((M, 128), float("nan"), device="cuda")
        kern(A, B, C)
        _close(C, A.float() @ B.float(), atol=1e-3, rtol=1e-3)
