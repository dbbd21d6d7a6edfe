"""TileLang's documentation, form by form (helperAG).  Every T.* form, argument and Python
idiom that /tmp/tl/docs (programming_guides: control_flow, python_compatibility,
language_basics, type_system, instructions, cluster_tma) shows as working gets a short program
of our own in tests/doc_form_programs.py.  CPU: each builds its sm_90a cubin and its generated
CuTe DSL has what the form means (or the refusal names the form); GPU: the programs whose
numbers depend on the form's meaning against torch."""

import pytest
import torch

import tilecute
from tilecute.language import FrontendError

import doc_form_programs as P

# program -> substrings the kernel source must hold (the form's meaning, read off the DSL)
HONORED = {
    "p_range_step": ["i = tx + i_iter * 32", "(256 - tx + 32 - 1) // 32"],
    "p_neg_index": ["B[0] = A[255]", "B[1] = s[254]"],
    "p_ternary": ["cutlass.select_(x > cutlass.Float32(0.0), x, x * cutlass.Float32(0.5))"],
    "p_elif": ["B[t] = -1", "if A[t] == 0:", "if A[t] < 10:", "B[t] = 2"],
    "p_allof": ["if gi < 50 and gj < 70:", "if gi == 0 or gj == 0:"],
    "p_while_break": ["while i[0] < 256 and broke[0] == 0:", "broke[0] = 1"],
    "p_continue": ["skipped[0] = 1", "if skipped[0] == 0:"],
    "p_unroll_break": ["first[0] = k", "broke[0] = 1"],
    "p_chain_assign": ["x = chained", "y = chained"],
    "p_print_assert": ["Device assert failed: tid out of range", "cute.printf(\"msg='first:'"],
    "p_dtype_forms": ["if (M[t] != 0):", "cutlass.Float32(A[t]) * cutlass.Float32(3.0)"],
    "p_dyn_bracket": ["if bx * 128 + i < K:"],
    "p_dynamic_default": ["cutlass.range(0, L)"],
    "p_unroll_step": ["cutlass.range_constexpr(0, 5)", "k = 1 + k_iter * 3"],
    "p_serial_step": ["cutlass.range(0, 8)", "k = 0 + k_iter * 2"],
    "p_async_copy": ["tcc.copy_async(", "cute.arch.cp_async_wait_group(0)",
                     "s[i * 64 + 63 - (j + tc_lane6)]"],
    "p_cumsum_cummax": ["T.cumsum(a, a, dim=1, reverse=True)", "tc_pos5 = 63 - (",
                        'warp_inclusive_scan(tc_scan4, "sum"', 'warp_inclusive_scan(tc_scan9, "max"'],
    "p_view_reshape": ["flat = cute.make_tensor("],
    "p_view_dtype": ["si = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Int32)",
                     "B[t] = si[t] & 2147483647"],
    "p_math": ["cute.math.rsqrt(", 'tcmath.ieee_add(x, cutlass.Float32(1.0), "rz")',
               "cute.arch.fmin(cute.arch.fmax(x, cutlass.Float32(-1.0)), cutlass.Float32(0.5))"],
    "p_loop_break": ["if tc_ld1 < 0:\n            broke[0] = 1", "if broke[0] == 0:\n            c[0]"],
    "p_empty": ["B[t] = A[t] + cutlass.Float32(1.0)"],
    "p_kernel_3d": ["bx, by, bz = cute.arch.block_idx()", "grid=[8, 6, 4]",
                    "B[bz, by, bx] = A[bz, by, bx] * cutlass.Float32(bz + 1)"],
    "p_kernel_threads_tuple": ["block=[32, 16, 1]", "ty = tc_ty", "B[tx, ty] = A[ty, tx]"],
    "p_ifthenelse_var": ["v[0] = A[t] * cutlass.Float32(2.0)",
                         "v[0] = cutlass.select_(t - t // 2 * 2 == 0, v[0], v[0] * cutlass.Float32(-1.0))"],
    "p_warp_lane": ["W[t] = tc_tx // 32", "L[t] = tc_tx % 32", "G[t] = tc_tx // 128"],
    "p_reinterpret": ["tcmath.reinterpret(A[t], cutlass.Uint32) >> cutlass.Uint32(23)"],
    "p_bool_arg": ["B[t] = A[t] * cutlass.Float32(-1.0)"],
    "p_assume": ["B[t] = A[t] / cutlass.Float32(n)"],
    "p_l2_hit": ["B[t] = A[t] + cutlass.Float32(1.0)"],
    "p_macro_ret": ["B[t] = A[t] * A[t] + cutlass.Float32(1.0)"],
    "p_cluster_rank": ["cute.arch.block_idx_in_cluster()", "cluster_arrive_relaxed()",
                       "cluster_wait()", "cluster=[2, 1, 1]"],
    "p_cluster_simt": ["tct.remote_base(dst, 1)", "tct.remote_store(", "tct.cluster_sync()"],
    "p_swizzle": ["panel_rows", "bx_1_ ="],
    "p_alloc_var_typed": ["acc[0] = 7", "acc[0] = acc[0] + cutlass.Int32(A[i])"],
    "p_range_neg_step": ["cutlass.range(0, 16)", "k = 15 + k_iter * -1"],
    "p_while_and": ["tc_more1 = i[0] < 16 and tc_ld2 > 0", "while tc_more1:"],
    "p_mod_div_neg": ["B[t, 0] = A[t] - A[t] // 3 * 3", "B[t, 1] = A[t] // 4"],
    "p_aug_buf": ["B[t] = B[t] * 3", "B[t] = B[t] << 1", "B[t] = B[t] // 5",
                  "B[t] = B[t] - B[t] // 7 * 7"],
    "p_ternary_mixed": ["cutlass.Float16(0.0))"],
    "p_bool_var": ["seen = cute.make_rmem_tensor((1,), cutlass.Boolean)", "seen[0] = True",
                   "cutlass.select_(seen[0], 1, 0)"],
    "p_slice_tail": ["(96,)"],
    "p_dyn_range": ["(L - t + 64 - 1) // 64", "i = t + i_iter * 64"],
    "p_scalar_bool_param": ["if flag:"],
    "p_unroll_no_explicit": ["cutlass.range_constexpr(0, 8)"],
    "p_vectorized": ["cutlass.range_constexpr(0, 8, 4)", "A[t, 7 - (k + tc_lane2)]"],
    "p_allreduce_max": ['tcr.warp_allreduce(tc_ar1, "max", 8)', "red[0] = tc_ar1"],
    "p_shared_scalar_atomic": ["tca.atomic_add(acc, 0, loc[0])"],
    "p_vectorized_local": ["cutlass.range_constexpr(0, 4, 4)", "tca.atomic_add(C, (bn,), s[0])"],
    "p_swizzle_enable": ["(by * 64 + i) * 256 + bx * 64 + j"],
    "p_gemm_tb": ["# T.gemm(As, Bs, Cf): Cf += As @ Bs^T", "tiled_mma(\"wgmma\""],
    "p_reduce_noclear": ["r[tc_c11] = tcr.combine(r[tc_c11], tc_rows10[tc_c11], \"sum\")"],
    "p_copy_loop_layout_parallel": ["cutlass.Float32(i"],
    "p_pipelined_bind": ["(0, Ids[ko + 1])", "idx = Ids[ko]", "# the stage this iteration reads"],
    "p_pipelined_bind_gemm": ["tc_origin0 = Ids[tc_j0]", "(tc_origin0 * 64, 0)", "kb = Ids[ko] * 64"],
    "p_parallel_continue": ["if A[i, j] < cutlass.Float32(0.0):\n            pass\n        else:\n"
                            "            B[i, j] = A[i, j] * cutlass.Float32(2.0)"],
    "p_parallel_continue_frag": ["if i == (j + tc_lane7):\n                    pass\n                else:"],
    "p_serial_neg_step": ["cutlass.range(0, 8)", "k = 15 + k_iter * -2"],
    "p_unroll_factor": ["cutlass.range(0, 16, unroll=4)"],
    "p_nested_break": ["for r in cutlass.range(0, 4):", "while k_it[0] < 8 and broke[0] == 0:"],
    "p_while_continue": ["while i[0] < 16:", "skipped[0] = 1"],
    "p_bool_bind": ["pos = A[t] > cutlass.Float32(0.0)", "pos and not big"],
    "p_neg_index_2d": ["B[0] = A[7, 14]", "B[1] = A[0, 0]"],
    "p_parallel_coalesced": ["tc_f2 = (tc_k1 * 128 + tc_tid) * 2"],
    "p_f64_u64": ["cute.math.sqrt(A[t] * A[t] + cutlass.Float64(1.0))",
                  "(cutlass.Uint64(U[t]) << cutlass.Uint64(3)) + cutlass.Uint64(1)"],
    "p_int16_uint8": ["cutlass.Int16(cutlass.Uint8(A[t])) * cutlass.Int16(300)"],
    "p_warp_intrinsics": ['tcr.warp_allreduce(x, "sum", 32)', "vote_ballot_sync(",
                          "tcvote.syncthreads_count("],
    "p_shfl_xor_tree": ["shuffle_sync_bfly(v[0], offset=1 << o, mask_and_clamp=31)"],
    "p_shape_attr": ["for i in cutlass.range(0, L):", "A[i, t] * cutlass.Float32(4.0)"],
    # (bm is a Python int in the generated code: its float value made at run time, rounded)
    "p_host_print": ["B[t] = A[t] + tcmath.as_float(bm, cutlass.Float32)"],
    "p_print_buffer": ["msg='smem:'", "buffer=s, index=%d", "msg='frag:'", "buffer=f, index=%d"],
    # a loop over a Python list: TileLang 0.1.15's builder expands it while tracing (it was
    # refused here); the second store wins
    "p_for_list": ["B[t] = A[t] * cutlass.Float32(1.0)\n    B[t] = A[t] * cutlass.Float32(2.0)"],
}

# documented forms tilecute refuses: program -> words the error must hold
REFUSED = {
    # the doc's own `i = 0; while i < N:` binds a Python int: TileLang 0.1.15 also refuses a
    # while whose condition is constant at parse time (control_flow.md: "TileLang will error")
    "p_while_plain": ["`while` with a condition that is true at parse time never ends"],
    # (coalesced_width=4 of its first copy is honored; its second's eviction policy is not)
    "p_copy_args": ["T.copy: eviction_policy='evict_first' is not supported"],
    "p_evict": ["T.copy: eviction_policy='evict_first' is not supported"],
}


def _kernel(name):
    f = getattr(P, name)()
    return f if hasattr(f, "ensure_cubin") else tilecute.compile(f, target="sm_90a")


def test_every_program_classified():
    names = {n for n in dir(P) if n.startswith("p_")}
    assert names == set(HONORED) | set(REFUSED)


@pytest.mark.parametrize("name", sorted(HONORED))
def test_doc_form_honored(name, cache_dir):
    kernel = _kernel(name)
    src = kernel.get_kernel_source()
    for want in HONORED[name]:
        assert want in src, (name, want)
    assert kernel.ensure_cubin().endswith("kernel.cubin")


def test_host_print_shows_python_values(capsys):
    """python_compatibility.md: ``print`` works for Python expressions, run while the kernel
    is built; a name bound to a number inside the kernel (``bm = 32``) prints the number, as
    in TileLang (it printed the name)."""
    P.p_host_print()
    assert capsys.readouterr().out == "tile 32\n"


@pytest.mark.parametrize("name", ["p_async_copy", "p_pipelined_bind", "p_gemm_tb",
                                  "p_parallel_continue_frag", "p_cumsum_cummax",
                                  "p_allreduce_max", "p_warp_intrinsics"])
def test_doc_form_sm80_cubin(name, cache_dir):
    """The same programs build for sm_80 (cp.async / mma.sync in place of TMA / wgmma)."""
    kernel = tilecute.compile(getattr(P, name)(), target="sm_80")
    assert kernel.ensure_cubin().endswith("kernel.cubin")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_doc_form_refused(name, cache_dir):
    with pytest.raises(FrontendError) as err:
        _kernel(name)
    for want in REFUSED[name]:
        assert want in str(err.value), (name, str(err.value))


# --- GPU: the programs whose numbers depend on the form's meaning, against torch ---------------

DEV = "cuda"


def _dev(t):
    return t.to(DEV)


def _case_inputs(name):
    """(arguments, check(arguments, result)) for one program; torch references in fp32/int."""
    g = torch.Generator().manual_seed(7)
    f32 = lambda *s: _dev(torch.randn(*s, generator=g))
    i32 = lambda lo, hi, *s: _dev(torch.randint(lo, hi, s, generator=g, dtype=torch.int32))
    z = lambda *s, dt=torch.float32: _dev(torch.zeros(*s, dtype=dt))
    if name == "p_range_step":
        a = f32(256)
        return (a, z(256)), lambda r: [(r[1], 2 * a)]
    if name == "p_neg_index":
        a = f32(256)
        return (a, z(4)), lambda r: [(r[1][:2], torch.stack([a[255], a[254]]))]
    if name == "p_elif":
        a = i32(-5, 15, 256)
        want = torch.where(a < 0, -1, torch.where(a == 0, 0, torch.where(a < 10, 1, 2)))
        return (a, z(256, dt=torch.int32)), lambda r: [(r[1], want.int())]
    if name == "p_allof":
        a = f32(50, 70)
        want = a + 1
        want[0, :] = 0
        want[:, 0] = 0
        return (a, z(50, 70)), lambda r: [(r[1], want)]
    if name == "p_while_break":
        a = i32(1, 9, 256)
        a[100] = -3
        return (a, z(1, dt=torch.int32)), lambda r: [(r[1][0].item(), 100)]
    if name == "p_continue":
        a = f32(256)
        return (a, z(1)), lambda r: [(r[1][0], a.clamp(min=0).sum())]
    if name in ("p_unroll_break",):
        a = i32(0, 2, 32, 8) * i32(0, 2, 32, 8)
        a[3] = 0
        nz = a != 0
        want = torch.where(nz.any(1), nz.int().argmax(1).int(), -1)
        return (a, z(32, dt=torch.int32)), lambda r: [(r[1], want.int())]
    if name == "p_unroll_step":
        a = f32(32, 16)
        return (a, z(32)), lambda r: [(r[1], a[:, 1::3].sum(1))]
    if name == "p_serial_step":
        a = f32(32, 16)
        return (a, z(32)), lambda r: [(r[1], (a[:, 0::2] - a[:, 1::2]).sum(1))]
    if name == "p_async_copy":
        a = f32(64, 64).half()
        return (a, z(64, 64, dt=torch.float16)), lambda r: [(r[1], a.flip(1))]
    if name in ("p_cumsum_cummax",):
        a = f32(4, 64)
        return (a, z(4, 64), z(4, 64)), lambda r: [(r[1], a.flip(1).cumsum(1).flip(1)),
                                                  (r[2], a.cummax(1).values)]
    if name == "p_view_dtype":
        a = f32(64)
        return (a, z(64, dt=torch.int32)), lambda r: [(r[1], a.view(torch.int32) & 0x7FFFFFFF)]
    if name in ("p_loop_break", "p_while_and"):
        a = i32(-1, 6, 32, 16)
        a[5] = 1
        lead = torch.cumprod((a > (0 if name == "p_while_and" else -1)).int(), 1).sum(1)
        return (a, z(32, dt=torch.int32)), lambda r: [(r[1], lead.int())]
    if name == "p_kernel_3d":
        a = f32(4, 6, 8)
        return (a, z(4, 6, 8)), lambda r: [(r[1], a * torch.arange(1, 5, device=DEV).view(4, 1, 1))]
    if name == "p_kernel_threads_tuple":
        a = f32(16, 32)
        return (a, z(32, 16)), lambda r: [(r[1], a.t())]
    if name == "p_ifthenelse_var":
        a = f32(256)
        sign = 1 - 2 * (torch.arange(256, device=DEV) % 2)
        return (a, z(256)), lambda r: [(r[1], 2 * a * sign)]
    if name == "p_warp_lane":
        t = torch.arange(256, device=DEV, dtype=torch.int32)
        return tuple(z(256, dt=torch.int32) for _ in range(3)), \
            lambda r: [(r[0], t // 32), (r[1], t % 32), (r[2], t // 128)]
    if name == "p_reinterpret":
        a = f32(256)
        return (a, z(256, dt=torch.uint32)), \
            lambda r: [(r[1].view(torch.int32), (a.view(torch.int32) >> 23) & 0x1FF)]
    if name == "p_cluster_simt":
        a = f32(64)
        return (a, z(2, 64)), lambda r: [(r[1][0], torch.full_like(a, -1.0)), (r[1][1], 3 * a)]
    if name == "p_cluster_rank":
        a = f32(8, 64)
        return (a, z(8, 64)), lambda r: [(r[1], a + (torch.arange(8, device=DEV) % 2).view(8, 1))]
    if name == "p_swizzle":
        a = f32(512, 512)
        return (a, z(512, 512)), lambda r: [(r[1], a)]
    if name == "p_range_neg_step":
        a = f32(32, 16)
        return (a, z(32, 16)), lambda r: [(r[1], a.flip(1).cumsum(1).flip(1))]
    if name == "p_mod_div_neg":
        a = i32(-50, 50, 256)
        return (a, z(256, 2, dt=torch.int32)), \
            lambda r: [(r[1][:, 0], torch.remainder(a, 3)), (r[1][:, 1], torch.div(a, 4, rounding_mode="floor"))]
    if name == "p_aug_buf":
        a = i32(-1000, 1000, 256)
        b = torch.div((a * 3) << 1, 5, rounding_mode="floor")
        return (a, z(256, dt=torch.int32)), lambda r: [(r[1], torch.remainder(b, 7))]
    if name == "p_bool_var":
        a = f32(32, 8).abs()
        a[::3, 5] = -1.0
        return (a, z(32, dt=torch.int32)), lambda r: [(r[1], (a < 0).any(1).int())]
    if name == "p_dyn_range":
        a = f32(1000)
        return (a, z(1000)), lambda r: [(r[1], 0.5 * a)]
    if name == "p_dyn_bracket":
        a = f32(300)
        return (a, z(300)), lambda r: [(r[1], a + 1)]
    if name == "p_dynamic_default":
        a = f32(777)
        return (a, z(1)), lambda r: [(r[1][0], a.sum())]
    if name == "p_alloc_var_typed":
        a = i32(-128, 128, 256).to(torch.int8)
        return (a, z(1, dt=torch.int32)), lambda r: [(r[1][0].item(), 7 + int(a.int().sum()))]
    if name == "p_ternary_mixed":
        a = f32(256).half()
        return (a, z(256, dt=torch.float16)), lambda r: [(r[1], a.clamp(min=0))]
    if name == "p_dtype_forms":
        a = f32(256).half()
        m = _dev(torch.rand(256, generator=g) < 0.5)
        return (a, z(256), m), lambda r: [(r[1], torch.where(m, a.float() * 3, -1.0))]
    if name == "p_view_reshape":
        a = f32(16, 16)
        return (a, z(256)), lambda r: [(r[1], 2 * a.flatten())]
    if name == "p_math":
        a = f32(256) * 2
        return (a, z(256, 4)), lambda r: [(r[1][:, 0], a.clamp(-1.0, 0.5)),
                                         (r[1][:, 1], torch.rsqrt(a.abs() + 1)),
                                         (r[1][:, 2], torch.sigmoid(a)), (r[1][:, 3], a + 1)]
    if name == "p_allreduce_max":
        a = f32(16, 64)
        return (a, z(16)), lambda r: [(r[1], a.amax(1))]
    if name == "p_shared_scalar_atomic":
        a = f32(8, 128)
        return (a, z(8)), lambda r: [(r[1], (a * a).sum(1))]
    if name == "p_vectorized_local":
        a, x = f32(64, 32).half(), f32(32).half()
        return (a, x, z(64)), lambda r: [(r[2], a.float() @ x.float())]
    if name == "p_swizzle_enable":
        a = f32(256, 256)
        return (a, z(256, 256)), lambda r: [(r[1], 2 * a)]
    if name == "p_gemm_tb":
        a, b = f32(128, 64).half(), f32(96, 64).half()
        return (a, b, z(128, 96)), lambda r: [(r[2], a.float() @ b.float().t())]
    if name == "p_reduce_noclear":
        a = f32(64, 128)
        return (a, z(64)), lambda r: [(r[1], a.sum(1) + 10)]
    if name == "p_copy_loop_layout_parallel":
        a = f32(64, 64)
        i = torch.arange(64, device=DEV, dtype=torch.float32)
        return (a, z(64, 64)), lambda r: [(r[1], a * (i.view(64, 1) + 1) - i.view(1, 64))]
    if name == "p_pipelined_bind":
        ids = _dev(torch.randperm(32, generator=g)[:8].int())
        a = f32(32, 64).half()
        def check(r):
            want = torch.zeros_like(a)
            want[ids.long()] = a[ids.long()] * 2
            return [(r[2], want)]
        return (ids, a, z(32, 64, dt=torch.float16)), check
    if name == "p_pipelined_bind_gemm":
        ids = _dev(torch.tensor([2, 0, 3, 1], dtype=torch.int32))
        a, b = f32(64, 256).half(), f32(256, 64).half()
        return (ids, a, b, z(64, 64)), lambda r: [(r[3], a.float() @ b.float())]
    if name == "p_parallel_continue":
        a = f32(64, 64)
        return (a, _dev(torch.full((64, 64), 5.0))), \
            lambda r: [(r[1], torch.where(a < 0, torch.full_like(a, 5.0), 2 * a))]
    if name == "p_parallel_continue_frag":
        a = f32(64, 64) * 2
        eye = torch.eye(64, device=DEV, dtype=torch.bool)
        t = a * 3 + 1
        want = torch.where(a < -1, torch.full_like(a, -1.0),
                           torch.where(eye, a, torch.where(t > 4, t, t - 0.5)))
        return (a, z(64, 64)), lambda r: [(r[1], want)]
    if name == "p_serial_neg_step":
        a = f32(32, 16)
        want = torch.zeros(32, device=DEV)
        for k in range(15, 0, -2):
            want = want * 0.5 + a[:, k]
        return (a, z(32)), lambda r: [(r[1], want)]
    if name == "p_unroll_factor":
        a = f32(32, 16)
        want = torch.zeros(32, device=DEV)
        for k in range(16):
            want = want * 0.5 + a[:, k]
        return (a, z(32)), lambda r: [(r[1], want)]
    if name == "p_nested_break":
        a = i32(0, 4, 32, 4, 8)
        lead = torch.cumprod((a != 0).int(), 2).sum((1, 2))
        return (a, z(32, dt=torch.int32)), lambda r: [(r[1], lead.int())]
    if name == "p_while_continue":
        a = i32(-9, 9, 32, 16)
        return (a, z(32, dt=torch.int32)), lambda r: [(r[1], (a * (a % 2 != 0)).sum(1).int())]
    if name == "p_bool_bind":
        a = f32(256) * 1.5
        return (a, z(256)), lambda r: [(r[1], torch.where((a > 0) & (a.abs() <= 1), a, 0.0))]
    if name == "p_neg_index_2d":
        a = f32(8, 16)
        return (a, z(2)), lambda r: [(r[1], torch.stack([a[7, 14], a[0, 0]]))]
    if name == "p_f64_u64":
        a = f32(64).double()
        u = _dev(torch.randint(0, 2 ** 62, (64,), generator=g, dtype=torch.int64))
        args = (a, u.view(torch.uint64), z(64, dt=torch.float64), z(64, dt=torch.uint64))
        return args, lambda r: [(r[2], torch.sqrt(a * a + 1)),
                                (r[3].view(torch.int64), (u << 3) + 1)]
    if name == "p_int16_uint8":
        a = _dev(torch.randint(0, 256, (64,), generator=g, dtype=torch.int32))
        want = ((a * 300 - 20000 + 32768) % 65536 - 32768).to(torch.int16)
        return (a.to(torch.uint8), z(64, dt=torch.int16)), lambda r: [(r[1], want)]
    if name == "p_warp_intrinsics":
        a = f32(128)
        pos = (a > 0).view(4, 32).long()
        bits = (pos << torch.arange(32, device=DEV)).sum(1)
        bits = ((bits + 2 ** 31) % 2 ** 32 - 2 ** 31).int()
        sums = a.view(4, 32).sum(1)
        return (a, z(128), z(128, dt=torch.uint32), z(128, dt=torch.int32)), \
            lambda r: [(r[1], sums.repeat_interleave(32)), (r[2].view(torch.int32), bits.repeat_interleave(32)),
                       (r[3], torch.full((128,), int(pos.sum()), device=DEV, dtype=torch.int32))]
    if name == "p_shfl_xor_tree":
        a = f32(64)
        return (a, z(64)), lambda r: [(r[1], a.view(8, 8).amax(1).repeat_interleave(8))]
    if name == "p_shape_attr":
        a = f32(37, 4)
        return (a, z(4)), lambda r: [(r[1], 4 * a.sum(0))]
    raise KeyError(name)


GPU_CASES = ["p_range_step", "p_neg_index", "p_elif", "p_allof", "p_while_break", "p_continue",
             "p_unroll_break", "p_unroll_step", "p_serial_step", "p_async_copy", "p_cumsum_cummax",
             "p_view_dtype", "p_loop_break", "p_while_and", "p_kernel_3d",
             "p_kernel_threads_tuple", "p_ifthenelse_var", "p_warp_lane", "p_reinterpret",
             "p_cluster_simt", "p_cluster_rank", "p_swizzle", "p_range_neg_step",
             "p_mod_div_neg", "p_aug_buf", "p_bool_var", "p_dyn_range", "p_dyn_bracket",
             "p_dynamic_default", "p_alloc_var_typed", "p_ternary_mixed", "p_dtype_forms",
             "p_view_reshape", "p_math", "p_allreduce_max", "p_shared_scalar_atomic",
             "p_vectorized_local", "p_swizzle_enable", "p_gemm_tb", "p_reduce_noclear",
             "p_copy_loop_layout_parallel", "p_pipelined_bind", "p_pipelined_bind_gemm",
             "p_parallel_continue", "p_parallel_continue_frag", "p_serial_neg_step",
             "p_unroll_factor", "p_nested_break", "p_while_continue", "p_bool_bind",
             "p_neg_index_2d", "p_f64_u64", "p_int16_uint8",
             "p_warp_intrinsics", "p_shfl_xor_tree", "p_shape_attr"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_CASES)
def test_doc_form_matches_torch(name):
    args, check = _case_inputs(name)
    _kernel(name)(*args)
    torch.cuda.synchronize()
    for got, want in check(args):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want.to(got.dtype), rtol=1e-4, atol=1e-4)
        else:
            assert abs(float(got) - float(want)) <= 1e-3 * max(1.0, abs(float(want))), (got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("flag", [True, False])
def test_doc_scalar_bool_param_and_jit_forms(flag):
    a = torch.randn(256, device=DEV)
    b = torch.full_like(a, 9.0)
    _kernel("p_scalar_bool_param")(a, b, flag)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a if flag else torch.zeros_like(a))
    out = P.p_empty()(a[:128].contiguous())          # T.empty output, returned
    torch.testing.assert_close(out, a[:128] + 1)
    b.zero_()
    P.p_bool_arg()(a, b)                              # a bool jit argument folds the branch
    torch.testing.assert_close(b, -a)
