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
                         "v[0] = cutlass.select_(t - t // 2 * 2 == 0, v[0], cutlass.Float32(0.0) - v[0])"],
    "p_warp_lane": ["W[t] = tc_tx // 32", "L[t] = tc_tx % 32", "G[t] = tc_tx // 128"],
    "p_reinterpret": ["tcmath.reinterpret(A[t], cutlass.Uint32) >> cutlass.Uint32(23)"],
    "p_bool_arg": ["B[t] = cutlass.Float32(0.0) - A[t]"],
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
}

# documented forms tilecute refuses: program -> words the error must hold
REFUSED = {
    # the doc's own `i = 0; while i < N:` binds a Python int: TileLang 0.1.15 also refuses a
    # while whose condition is constant at parse time (control_flow.md: "TileLang will error")
    "p_while_plain": ["`while` with a condition that is true at parse time never ends"],
    "p_for_list": ["loop over T.Parallel(...)", "for c in [1.0, 2.0]"],
    "p_copy_args": ["T.copy: coalesced_width=4 is not supported"],
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


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_doc_form_refused(name, cache_dir):
    with pytest.raises(FrontendError) as err:
        _kernel(name)
    for want in REFUSED[name]:
        assert want in str(err.value), (name, str(err.value))
