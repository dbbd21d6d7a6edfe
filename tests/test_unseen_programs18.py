"""An eighteenth set of programs in TileLang's idioms (tests/unseen_programs18.py), all
attention-family kernels as ``@tilecute.jit(out_idx=...)`` factories: causal masks on the
boundary tiles only, query / key tiles of different sizes, ``T.alloc_var`` loop bounds,
rows with no key (guarded as a user guards them), GQA soft-capping in BHSD, in-kernel ALiBi
slopes, varlen with padded element loads, paged prefill, MQA and split-KV decode with empty
splits, a user's overlap schedule through order / stage / group, a one-stage plain order,
look-ahead windows, two query tiles a block, packed GQA rows, heavy-first tiles under a
swizzle, transposed K, prefix-LM masks with Q in registers, and two backwards.  CPU: each
builds to an sm_90a cubin (several also at 128 x 128 tiles and for sm_80), and what the
passes make of them is checked in the generated source.  GPU: each matches a float32
torch reference at lengths that are not tile multiples."""

import itertools
import math

import pytest

import tilecute
import tilecute.language as T

import rounds
import unseen_programs18 as P

PROGRAMS = ["fa_causal_boundary_only", "fa_causal_wide_keys_bshd", "fa_window_alloc_var_bounds",
            "fa_prefix_causal_more_queries", "fa_additive_mask_rows_of_inf", "fa_softcap_gqa_bhsd",
            "fa_alibi_symmetric_cross", "varlen_padded_loads", "paged_prefill_block_table",
            "mqa_decode_head_group", "split_kv_decode_empty_splits", "split_kv_combine_local",
            "fa_user_overlap_groups", "fa_one_stage_plain_order", "bwd_delta_rowsum",
            "bwd_kv_blocks_atomic_dq", "fa_lookahead_window_empty_rows", "fa_causal_two_tiles_a_block",
            "fa_gqa_packed_group_rows", "fa_causal_heavy_first_swizzled", "fa_k_transposed_bhds",
            "fa_prefix_lm_q_registers", "bwd_causal_from_diagonal", "bwd_row_scores_fragment_stats",
            "fa_flex_macros", "fa_window_inplace_guard", "gqa_decode_no_gemm",
            "split_kv_combine_tile_reduce", "fa_causal_reverse_key_order"]

BIG_KW = dict(dim=128, block_M=128, block_N=128, threads=256)
# the forward programs again at FlashAttention-3's tile (two compute warpgroups, a producer
# warpgroup where the loads allow it)
BIG = {"fa_causal_boundary_only": dict(BIG_KW, num_stages=2),
       "fa_window_alloc_var_bounds": BIG_KW,
       "fa_prefix_causal_more_queries": BIG_KW,
       "fa_additive_mask_rows_of_inf": BIG_KW,
       "fa_softcap_gqa_bhsd": dict(block_M=128, block_N=128, threads=256),
       "fa_alibi_symmetric_cross": BIG_KW,
       "varlen_padded_loads": BIG_KW,
       "paged_prefill_block_table": dict(dim=128, page=128, block_M=128, threads=256),
       "fa_one_stage_plain_order": BIG_KW,
       "fa_lookahead_window_empty_rows": BIG_KW,
       "fa_causal_two_tiles_a_block": BIG_KW,
       "fa_gqa_packed_group_rows": dict(dim=128, rows=32, block_N=128, threads=256),
       "fa_causal_heavy_first_swizzled": BIG_KW,
       "fa_k_transposed_bhds": dict(BIG_KW, num_stages=2),
       "fa_prefix_lm_q_registers": BIG_KW,
       "fa_flex_macros": BIG_KW,
       "fa_window_inplace_guard": BIG_KW,
       "fa_causal_reverse_key_order": BIG_KW}


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


@pytest.mark.parametrize("name", sorted(BIG))
def test_big_tile_program_builds_a_cubin(name):
    assert getattr(P, name)(**BIG[name]).ensure_cubin()


# the other configurations the GPU tests run (built here too, so a carried cache has them)
EXTRA = [("fa_causal_wide_keys_bshd", dict(dim=128, block_M=64)),
         ("fa_prefix_causal_more_queries", dict(guard=False)),
         ("fa_prefix_causal_more_queries", dict(BIG_KW, guard=False)),
         ("fa_user_overlap_groups", dict(causal=True)),
         ("bwd_causal_from_diagonal", dict(seq_len=150)),
         ("fa_k_transposed_bhds", dict(seq_len=190)),
         ("fa_k_transposed_bhds", dict(BIG_KW, seq_len=190, num_stages=2)),
         ("bwd_row_scores_fragment_stats", dict(causal=False)),
         # one warpgroup over 128 rows (two wgmma M tiles a thread), 64-key tiles
         ("fa_causal_boundary_only", dict(block_M=128, block_N=64, threads=128)),
         ("fa_window_inplace_guard", dict(block_M=128, block_N=64, threads=128)),
         ("fa_flex_macros", dict(block_M=128, block_N=64, threads=128)),
         # two warpgroups splitting 64 rows' keys, three warpgroups over 192 rows, 32-key tiles
         ("fa_prefix_causal_more_queries", dict(block_M=64, block_N=64, threads=256)),
         ("fa_prefix_causal_more_queries", dict(block_M=192, block_N=64, threads=384)),
         ("fa_prefix_causal_more_queries", dict(block_M=128, block_N=32, threads=128)),
         # odd key tiles (16, 48 keys) and head dim 80 (160-byte rows: a 32-byte swizzle)
         ("fa_causal_boundary_only", dict(block_M=64, block_N=16, threads=128)),
         ("fa_causal_boundary_only", dict(block_M=64, block_N=48, threads=128)),
         ("fa_causal_boundary_only", dict(block_M=64, block_N=64, threads=128, dim=80)),
         ("fa_causal_boundary_only", dict(dynamic=True)),
         ("fa_causal_boundary_only", dict(BIG_KW, num_stages=2, dynamic=True))]


@pytest.mark.parametrize("name,kw", EXTRA, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXTRA)])
def test_other_configurations_build_a_cubin(name, kw):
    assert getattr(P, name)(**kw).ensure_cubin()


def _mma_kernel(name, out_idx, **kw):
    """The program with warp mma.sync instead of wgmma (option disable_wgmma): the sm_80
    code path, on an H100."""
    return tilecute.compile(getattr(P, name).func.get_tir(**kw), out_idx=out_idx,
                            options={"disable_wgmma": True})


MMA_CASES = [("fa_prefix_causal_more_queries", [3, 4], dict()),
             ("fa_prefix_causal_more_queries", [3, 4], dict(block_M=128, block_N=64, threads=256)),
             ("fa_k_transposed_bhds", [3], dict(seq_len=190, threads=256)),
             ("bwd_causal_from_diagonal", [7, 8], dict(seq_len=150))]


@pytest.mark.parametrize("case", MMA_CASES, ids=lambda c: c[0])
def test_mma_path_builds_a_cubin(case):
    name, out_idx, kw = case
    kern = _mma_kernel(name, out_idx, **kw)
    assert kern.ensure_cubin()
    src = kern.get_kernel_source()
    assert 'tiled_mma("mma"' in src and 'tiled_mma("wgmma"' not in src


@pytest.mark.parametrize("name", ["fa_causal_boundary_only", "fa_window_alloc_var_bounds",
                                  "fa_prefix_causal_more_queries", "varlen_padded_loads",
                                  "fa_one_stage_plain_order", "bwd_causal_from_diagonal",
                                  "split_kv_decode_empty_splits", "fa_gqa_packed_group_rows"])
def test_program_builds_an_sm80_cubin(name):
    kern = tilecute.compile(getattr(P, name).func.get_tir(), target="sm_80")
    assert kern.ensure_cubin()
    assert "wgmma" not in kern.get_kernel_source()


# ---- what the passes make of these programs ---------------------------------------------------
def test_the_boundary_mask_stays_under_its_runtime_if():
    """fa_causal_boundary_only (128 x 32, one stage): the mask runs only where the program's
    ``if`` on the tile index says, and reads the key bound under it."""
    src = P.fa_causal_boundary_only().get_kernel_source()
    at = src.index("if (k + 1) * 32 > bx * 128 or (k + 1) * 32 > 300:")
    mask = src.index("cutlass.select_(bx * 128 + i >= k * 32 + (j + tc_lane")
    assert at < mask < src.index('tcrow.reduce_rows(acc_s, m, "max", clear=False)')


def test_alloc_var_bounds_keep_the_loop_without_a_producer_warpgroup():
    """fa_window_alloc_var_bounds at 128 x 128: the loop's bounds are T.alloc_var locals,
    which a producer warpgroup's branch does not have, so the loop runs in the compute
    threads (it failed with KeyError 'hi' in code generation when a producer was added)."""
    src = P.fa_window_alloc_var_bounds(**BIG_KW).get_kernel_source()
    assert "setmaxregister" not in src
    assert "for k in cutlass.range(lo[0], lo[0] + (hi[0] - lo[0])):" in src


def test_a_producer_asked_for_over_alloc_var_bounds_is_refused_by_name():
    from tilecute.transform.warp_specialize import WarpSpecializeError

    @T.prim_func
    def ws(K: T.Tensor((256, 64), "float16"), O: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            k_s = T.alloc_shared((64, 64), "float16")
            q_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            lo = T.alloc_var("int32")
            hi = T.alloc_var("int32")
            lo = 1
            hi = 4
            T.clear(q_s)
            T.clear(acc)
            for k in T.Pipelined(lo, hi, num_stages=2, warp_specialize=True):
                T.copy(K[k * 64:(k + 1) * 64, :], k_s)
                T.gemm(q_s, k_s, acc, transpose_B=True)
            T.copy(acc, O)

    with pytest.raises(WarpSpecializeError, match=r"the loads use \['hi', 'lo'\], which the producer"):
        tilecute.compile(ws).get_kernel_source()


def test_one_stage_order_is_the_body_in_that_order():
    """fa_one_stage_plain_order: ``num_stages=1`` with every stage 0 is TileLang's plain
    order (max(stage) + 1 = 1 stage; it was refused as disagreeing): the output rescale and
    the V copy run before the exponentials, the copy between the other statements."""
    src = P.fa_one_stage_plain_order().get_kernel_source()
    loop = src[src.index("for k in cutlass.range("):]
    rescale = loop.index("acc_o[tc_r")
    v_copy = loop.index("V.iterator")
    exp = loop.index("acc_s[tc_r22 + tc_lane23] = cute.math.exp2(")
    assert rescale < v_copy < exp < loop.index('tcrow.reduce_rows(acc_s, r_sum, "sum"')


def test_a_one_stage_order_still_disagrees_with_two_stages():
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"num_stages=2 with every stage 0 and order=\(1, 0\): TileLang reads it as one stage"):
        @T.prim_func
        def k2(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16")):
            with T.Kernel(1, threads=128):
                a_s = T.alloc_shared((64, 64), "float16")
                for k in T.Pipelined(4, num_stages=2, stage=[0, 0], order=[1, 0]):
                    T.copy(A[k * 64:(k + 1) * 64, :], a_s)
                    T.copy(a_s, B[k * 64:(k + 1) * 64, :])


def test_keyless_rows_keep_the_programs_guards():
    """fa_prefix_causal_more_queries: the guarded max feeds both exponentials and the
    output / LSE guards read the combined row sums."""
    src = P.fa_prefix_causal_more_queries().get_kernel_source()
    assert 'cutlass.select_(m[tc_q' in src and '== cutlass.Float32(float("-inf")), cutlass.Float32(0.0), m[tc_q' in src
    assert "- m_safe[tcrow.row_of(acc_s, tc_r" in src
    combine = src.index('tcrow.combine_rows(l, tc_l_i, "sum"')
    assert combine < src.index("cutlass.select_(l[tcrow.row_of(acc_o, tc_r")
    assert 'cutlass.Float32(float("-inf")))' in src[combine:]


def test_empty_splits_write_minus_infinity():
    src = P.split_kv_decode_empty_splits().get_kernel_source()
    assert "n_keys = cutlass.max(0, cutlass.min(seqlen - start, 96))" in src
    assert "LSEpart[bz, by * 4 + h" in src and 'cutlass.Float32(float("-inf")))' in src


def test_padded_loads_never_read_past_the_packed_tensor():
    """varlen_padded_loads: the element loads' ``T.if_then_else`` padding is kept (select of
    0) and each global read is guarded by the packed tensor's bound as well."""
    src = P.varlen_padded_loads().get_kernel_source()
    assert "if q_start[0] + bx * 64 + i >= 0 and q_start[0] + bx * 64 + i < 190:" in src
    assert "if k_start[0] + k * 64 + j >= 0 and k_start[0] + k * 64 + j < 260:" in src
    assert "cutlass.select_(k_start[0] + k * 64 + j < k_end[0], tc_vec15[tc_lane" in src


def test_the_user_overlap_schedule_overlaps_the_gemms():
    """fa_user_overlap_groups (5 groups, the softmax in stage 0 with the rescale): the MMA
    overlap on sm_90a (the PV GEMM of the step before issued after the QK GEMM); refused by
    name on sm_80."""
    src = P.fa_user_overlap_groups().get_kernel_source()
    assert "setmaxregister_decrease" in src
    assert src.count("# T.gemm(acc_s_cast, v_s, acc_o)") >= 2  # in the loop and its drain


def test_an_overlap_schedule_over_an_alloc_var_extent_says_why():
    """The program's stage / order lists ask for the MMA overlap, which runs on a producer
    warpgroup; a step count kept in a T.alloc_var keeps that off, and the error says so
    (it said only that the loop was not of the overlap's form)."""
    from tilecute.transform.warp_specialize import WarpSpecializeError
    with pytest.raises(WarpSpecializeError, match=r"asks for overlapped GEMMs, which need a producer "
                                                  r"warpgroup, and this loop gets none: .*\['n_var'\]"):
        P.fa_user_overlap_groups(extent_var=True).get_kernel_source()


def test_the_user_overlap_schedule_runs_in_source_order_on_sm80():
    from tilecute.transform.pipeline import run_passes
    text = run_passes(P.fa_user_overlap_groups.func.get_tir(), "sm_80").script()
    assert "T.wait_wgmma" not in text and "overlap_mma" not in text, text


def test_tile_atomic_dq_is_guarded_at_the_tail():
    src = P.bwd_causal_from_diagonal(seq_len=150).get_kernel_source()
    assert "for t in cutlass.range(bx * 64 // 32, bx * 64 // 32 + (5 - bx * 64 // 32)):" in src
    at = src.index("tca.atomic_add_view(cute.make_tensor(dQ.iterator")
    assert "if t * 32 + i9 < 150:" in src[at - 400:at]


def test_two_tiles_a_block_release_q_between_tiles():
    """fa_causal_two_tiles_a_block at 128 x 128: the producer reloads q_s for the block's
    second tile only after the compute warpgroups release it."""
    src = P.fa_causal_two_tiles_a_block(**BIG_KW).get_kernel_source()
    prod = src[src.index("setmaxregister_decrease"):src.index("setmaxregister_increase")]
    release = prod.index("tct.wait(tc_bar5, tc_prun0[0] - 1 & 1)")
    assert release < prod.index("tct.load(Q_desc")


# ---- on the GPU -------------------------------------------------------------------------------
LOG2E = 1.0 / math.log(2.0)


_r = rounds.randn
_close = rounds.close


def _rel(got, want, tol):
    err = (got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12)
    assert err < tol, float(err)


def _attn(q, k, v, scale, mask=None, bias=None, softcap=None):
    """softmax(q k^T * scale (softcapped) (+ bias), masked) v and the natural-log LSE in
    float32; rows with no key give O 0 and LSE -inf (the programs' guards)."""
    import torch
    s = q.float() @ k.float().transpose(-1, -2) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.float()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v.float(), lse


def _bshd(x):
    return x.transpose(1, 2)


def _ij(sq, sk):
    import torch
    return torch.arange(sq, device="cuda")[:, None], torch.arange(sk, device="cuda")[None, :]


def _kw(big):
    return dict(BIG_KW) if big else {}


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_causal_boundary_and_wide_keys_on_gpu(big):
    import torch
    torch.manual_seed(0)
    D = 128 if big else 64
    B, H, S = 1, 2, 300
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    o, lse = P.fa_causal_boundary_only(**(dict(BIG_KW, num_stages=2) if big else {}))(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5, mask=j <= i)
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)
    B, S = 2, 201
    q, k, v = (_r(B, S, H, D, dtype=torch.bfloat16) for _ in range(3))
    i, j = _ij(S, S)
    kern = P.fa_causal_wide_keys_bshd(dim=D, block_M=64 if big else 32)
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i)
    _close(_bshd(kern(q, k, v)), want, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_windows_and_keyless_rows_on_gpu(big):
    import torch
    torch.manual_seed(1)
    D = 128 if big else 64
    B, H, S = 1, 2, 280
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    want, _ = _attn(q, k, v, D ** -0.5, mask=(j >= i - 50) & (j <= i + 20))
    _close(P.fa_window_alloc_var_bounds(**_kw(big))(q, k, v), want, 1e-2)
    # look-ahead: keys i + 1 .. i + 40; the last row has none
    S = 230
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    o, lse = P.fa_lookahead_window_empty_rows(**_kw(big))(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5, mask=(j > i) & (j <= i + 40))
    assert not torch.isnan(o).any()
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)
    assert (o[:, :, -1] == 0).all() and torch.isneginf(lse[:, :, -1]).all()
    # more queries than keys, bottom-right causal: the first 70 rows see nothing
    Sq, Sk = 200, 130
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    i, j = _ij(Sq, Sk)
    o, lse = P.fa_prefix_causal_more_queries(**_kw(big))(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i + Sk - Sq)
    assert not torch.isnan(o).any()
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)
    assert (o[:, :Sq - Sk] == 0).all() and torch.isneginf(lse[:, :, :Sq - Sk]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_additive_mask_with_rows_of_inf_on_gpu(big):
    import torch
    torch.manual_seed(2)
    D = 128 if big else 64
    B, H, Sq, Sk = 2, 2, 150, 190
    q = _r(B, H, Sq, D, dtype=torch.float16)
    k, v = _r(B, H, Sk, D, dtype=torch.float16), _r(B, H, Sk, D, dtype=torch.float16)
    mask = _r(B, 1, Sq, Sk)
    mask[torch.rand(B, 1, Sq, Sk, device="cuda") < 0.3] = float("-inf")
    mask[:, :, 5] = float("-inf")  # whole rows with no key
    mask[1, :, 140:] = float("-inf")
    o = P.fa_additive_mask_rows_of_inf(**_kw(big))(q, k, v, mask)
    want, _ = _attn(q, k, v, D ** -0.5, bias=mask)
    assert not torch.isnan(o).any()
    _close(o, want, 1e-2)
    assert (o[:, :, 5] == 0).all() and (o[1, :, 140:] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_softcap_gqa_and_alibi_cross_on_gpu(big):
    import torch
    torch.manual_seed(3)
    B, H, HK, S, D = 1, 8, 2, 257, 128
    q = _r(B, H, S, D, dtype=torch.bfloat16, scale=2.0)
    k, v = _r(B, HK, S, D, dtype=torch.bfloat16, scale=2.0), _r(B, HK, S, D, dtype=torch.bfloat16)
    kw = dict(block_M=128, block_N=128, threads=256) if big else {}
    o, lse = P.fa_softcap_gqa_bhsd(**kw)(q, k, v)
    want, wl = _attn(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), D ** -0.5, softcap=15.0)
    _close(o, want, 3e-2)
    _close(lse, wl * LOG2E, 5e-3)
    D = 128 if big else 64
    B, H, Sq, Sk = 1, 4, 100, 230
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    i, j = _ij(Sq, Sk)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")
    bias = -slopes[:, None, None] * (i - j).abs().float()[None]
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, bias=bias)
    _close(_bshd(P.fa_alibi_symmetric_cross(**_kw(big))(q, k, v)), want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_varlen_padded_and_paged_prefill_on_gpu(big):
    import torch
    torch.manual_seed(4)
    D = 128 if big else 64
    lq, lk, H = [1, 100, 89], [77, 1, 182], 2
    cq = torch.tensor([0] + list(itertools.accumulate(lq)), dtype=torch.int32, device="cuda")
    ck = torch.tensor([0] + list(itertools.accumulate(lk)), dtype=torch.int32, device="cuda")
    q = _r(sum(lq), H, D, dtype=torch.float16)
    k, v = _r(sum(lk), H, D, dtype=torch.float16), _r(sum(lk), H, D, dtype=torch.float16)
    o = P.varlen_padded_loads(**_kw(big))(q, k, v, cq, ck)
    for b in range(3):
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        want, _ = _attn(q[qs].transpose(0, 1), k[ks].transpose(0, 1), v[ks].transpose(0, 1), D ** -0.5)
        _close(o[qs].transpose(0, 1), want, 1e-2)
    # paged prefill: 70 new tokens at the end of each sequence's context, GQA 4 / 2
    page = 128 if big else 64
    kw = dict(dim=128, page=128, block_M=128, threads=256) if big else {}
    B, Sq, HQ, HK, npages, maxp = 2, 70, 4, 2, 16, 5
    ctx = [70, 300]
    q = _r(B, Sq, HQ, D, dtype=torch.float16)
    kc, vc = _r(npages, page, HK, D, dtype=torch.float16), _r(npages, page, HK, D, dtype=torch.float16)
    table = torch.randperm(npages, device="cuda")[:B * maxp].reshape(B, maxp).to(torch.int32).contiguous()
    lens = torch.tensor(ctx, dtype=torch.int32, device="cuda")
    o = P.paged_prefill_block_table(**kw)(q, kc, vc, table, lens)
    for b in range(B):
        n = ctx[b]
        kk = kc[table[b].long()].reshape(-1, HK, D)[:n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        vv = vc[table[b].long()].reshape(-1, HK, D)[:n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        i, j = _ij(Sq, n)
        want, _ = _attn(q[b].transpose(0, 1), kk, vv, D ** -0.5, mask=j <= i + n - Sq)
        _close(o[b].transpose(0, 1), want, 1e-2)


@pytest.mark.gpu
def test_mqa_and_split_kv_decode_on_gpu():
    import torch
    torch.manual_seed(5)
    B, H, L, D = 3, 12, 300, 128
    q = _r(B, H, D, dtype=torch.bfloat16)
    k, v = _r(B, L, D, dtype=torch.bfloat16), _r(B, L, D, dtype=torch.bfloat16)
    lens = torch.tensor([1, 65, 300], dtype=torch.int32, device="cuda")
    o = P.mqa_decode_head_group()(q, k, v, lens)
    for b in range(B):
        n = int(lens[b])
        want, _ = _attn(q[b], k[b, :n], v[b, :n], D ** -0.5)
        _close(o[b], want, 3e-2)
    # split-KV GQA 8 / 2 with empty splits (96-key splits of 300: lengths 1 and 100 leave some)
    B, HQ, HK, L, D = 3, 8, 2, 300, 64
    q = _r(B, HQ, D, dtype=torch.float16)
    kc, vc = _r(B, L, HK, D, dtype=torch.float16), _r(B, L, HK, D, dtype=torch.float16)
    lens = torch.tensor([1, 100, 300], dtype=torch.int32, device="cuda")
    op, lp = P.split_kv_decode_empty_splits()(q, kc, vc, lens)
    assert torch.isneginf(lp[0, :, 1:]).all() and (op[0, :, 1:] == 0).all()
    assert torch.isneginf(lp[1, :, 2:]).all()
    o = P.split_kv_combine_local()(op, lp)
    o2, lse2 = P.split_kv_combine_tile_reduce()(op, lp)
    for b in range(B):
        n = int(lens[b])
        kk = kc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        vv = vc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        want, wl = _attn(q[b][:, None, :], kk, vv, D ** -0.5)
        _close(o[b], want[:, 0], 1e-2)
        _close(o2[b], want[:, 0], 1e-2)
        _close(lse2[b], wl[:, 0] * LOG2E, 1e-3)
        for s in range(4):
            lo, hi = 96 * s, min(n, 96 * (s + 1))
            if lo < hi:
                _, ws = _attn(q[b][:, None, :], kk[:, lo:hi], vv[:, lo:hi], D ** -0.5)
                _close(lp[b, :, s], ws[:, 0] * LOG2E, 2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_user_schedules_on_gpu(causal):
    import torch
    torch.manual_seed(6)
    B, S, H, D = 1, 300, 2, 128
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=(j <= i) if causal else None)
    _close(_bshd(P.fa_user_overlap_groups(causal=causal)(q, k, v)), want, 1e-2)
    if not causal:
        S, D = 200, 64
        q, k, v = (_r(B, H, S, D, dtype=torch.bfloat16) for _ in range(3))
        want, _ = _attn(q, k, v, D ** -0.5)
        _close(P.fa_one_stage_plain_order()(q, k, v), want, 3e-2)


@pytest.mark.gpu
def test_backwards_on_gpu():
    import torch
    torch.manual_seed(7)
    # BHSD, non-causal, natural LSE
    B, H, S, D = 1, 2, 200, 64
    q, k, v, do = (_r(B, H, S, D, dtype=torch.float16) for _ in range(4))
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    of, lse = _attn(qf, kf, vf, D ** -0.5)
    of.backward(do.float())
    o = of.detach().half()
    delta = (o.float() * do.float()).sum(-1)
    dq = torch.zeros(B, H, S, D, device="cuda")
    dk, dv = P.bwd_kv_blocks_atomic_dq()(q, k, v, do, lse.detach().contiguous(), delta, dq)
    _rel(dq, qf.grad, 2e-2)
    _rel(dk, kf.grad, 2e-2)
    _rel(dv, vf.grad, 2e-2)
    # Delta of the BSHD layout
    B, S = 2, 300
    o, do = _r(B, S, H, D, dtype=torch.float16), _r(B, S, H, D, dtype=torch.float16)
    _close(P.bwd_delta_rowsum()(o, do), (o.float() * do.float()).sum(-1).transpose(1, 2), 1e-3)
    # BSHD causal from the diagonal, 32-row query tiles under 64-key tiles, log2 LSE
    B, S = 1, 150
    q, k, v, do = (_r(B, S, H, D, dtype=torch.float16) for _ in range(4))
    qf, kf, vf = (_bshd(x).float().requires_grad_() for x in (q, k, v))
    i, j = _ij(S, S)
    of, lse = _attn(qf, kf, vf, D ** -0.5, mask=j <= i)
    of.backward(_bshd(do).float())
    delta = (_bshd(of.detach()).half().float() * do.float()).sum(-1).transpose(1, 2).contiguous()
    dq = torch.zeros(B, S, H, D, device="cuda")
    dk, dv = P.bwd_causal_from_diagonal(seq_len=S)(q, k, v, do, (lse.detach() * LOG2E).contiguous(), delta, dq)
    _rel(_bshd(dq), qf.grad, 2e-2)
    _rel(_bshd(dk), kf.grad, 2e-2)
    _rel(_bshd(dv), vf.grad, 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_tile_orders_and_packed_rows_on_gpu(big):
    import torch
    torch.manual_seed(8)
    D = 128 if big else 64
    B, S, H = 1, 300, 2
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    want, _ = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i)
    _close(_bshd(P.fa_causal_two_tiles_a_block(**_kw(big))(q, k, v)), want, 1e-2)
    # key tiles from the diagonal back (masked tiles first)
    o, lse = P.fa_causal_reverse_key_order(**_kw(big))(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i)
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)
    # heavy tiles first under a swizzle, a per-key bias vector
    B, H, S = 2, 3, 260
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    kb = _r(B, S)
    i, j = _ij(S, S)
    want, _ = _attn(q, k, v, D ** -0.5, mask=j <= i, bias=kb[:, None, None, :])
    _close(P.fa_causal_heavy_first_swizzled(**_kw(big))(q, k, v, kb), want, 1e-2)
    # GQA 8 / 2 with the group's heads packed into the tile's rows
    B, S, HQ, HK = 1, 100, 8, 2
    q = _r(B, S, HQ, D, dtype=torch.bfloat16)
    k, v = _r(B, S, HK, D, dtype=torch.bfloat16), _r(B, S, HK, D, dtype=torch.bfloat16)
    kw = dict(dim=128, rows=32, block_N=128, threads=256) if big else {}
    i, j = _ij(S, S)
    want, _ = _attn(_bshd(q), _bshd(k).repeat_interleave(4, 1), _bshd(v).repeat_interleave(4, 1), D ** -0.5,
                    mask=j <= i)
    _close(_bshd(P.fa_gqa_packed_group_rows(**kw)(q, k, v)), want, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_transposed_keys_and_prefix_lm_on_gpu(big):
    import torch
    torch.manual_seed(9)
    D = 128 if big else 64
    B, H, S = 1, 2, 190
    q, v = _r(B, H, S, D, dtype=torch.float16), _r(B, H, S, D, dtype=torch.float16)
    k = _r(B, H, S, D, dtype=torch.float16)
    kern = P.fa_k_transposed_bhds(seq_len=S, **(dict(BIG_KW, num_stages=2) if big else {}))
    want, _ = _attn(q, k, v, D ** -0.5)
    _close(kern(q, k.transpose(-1, -2).contiguous(), v), want, 1e-2)
    B, S = 2, 190
    q, k, v = (_r(B, S, H, D, dtype=torch.bfloat16) for _ in range(3))
    plen = torch.tensor([0, 150], dtype=torch.int32, device="cuda")
    o = P.fa_prefix_lm_q_registers(**_kw(big))(q, k, v, plen)
    i, j = _ij(S, S)
    for b in range(B):
        want, _ = _attn(_bshd(q[b:b + 1]), _bshd(k[b:b + 1]), _bshd(v[b:b + 1]), D ** -0.5,
                        mask=(j <= i) | (j < int(plen[b])))
        _close(_bshd(o[b:b + 1]), want, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_backward_with_fragment_row_stats_on_gpu(causal):
    import torch
    torch.manual_seed(10)
    B, H, S, D = 1, 2, 180, 64
    q, k, v, do = (_r(B, H, S, D, dtype=torch.bfloat16) for _ in range(4))
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    i, j = _ij(S, S)
    of, lse = _attn(qf, kf, vf, D ** -0.5, mask=(j <= i) if causal else None)
    of.backward(do.float())
    delta = (of.detach().bfloat16().float() * do.float()).sum(-1)
    dq = torch.zeros(B, H, S, D, device="cuda")
    dk, dv = P.bwd_row_scores_fragment_stats(causal=causal)(q, k, v, do, lse.detach().contiguous(), delta, dq)
    _rel(dq, qf.grad, 3e-2)
    _rel(dk, kf.grad, 3e-2)
    _rel(dv, vf.grad, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_flex_macros_and_inplace_window_guard_on_gpu(big):
    import torch
    torch.manual_seed(11)
    D = 128 if big else 64
    B, S, H = 2, 220, 2
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    slopes = torch.tensor([0.05, -0.02], device="cuda")
    doc = torch.tensor([[0] * 100 + [1] * 120, [0] * 30 + [1] * 31 + [2] * 159], dtype=torch.int32,
                       device="cuda")
    i, j = _ij(S, S)
    o, lse = P.fa_flex_macros(**_kw(big))(q, k, v, slopes, doc)
    mask = (j <= i)[None, None] & (doc[:, None, :, None] == doc[:, None, None, :])
    bias = slopes[None, :, None, None] * (j - i).float()[None, None]
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=mask, bias=bias, softcap=20.0)
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)
    B, H, S = 1, 2, 260
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    o = P.fa_window_inplace_guard(**_kw(big))(q, k, v)
    want, _ = _attn(q, k, v, D ** -0.5, mask=(j <= i) & (j > i - 70))
    assert not torch.isnan(o).any()
    _close(o, want, 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_unguarded_keyless_rows_give_tilelangs_nan_on_gpu(big):
    """fa_prefix_causal_more_queries(guard=False): TileLang's arithmetic gives a keyless
    row NaN (2^(-inf - -inf) in a tile that ran; 0 / 0 where its block ran none, whose LSE
    is log2(0) + -inf = -inf); every other row is exact."""
    import torch
    torch.manual_seed(12)
    D = 128 if big else 64
    B, H, Sq, Sk = 1, 2, 200, 130
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    i, j = _ij(Sq, Sk)
    o, lse = P.fa_prefix_causal_more_queries(guard=False, **_kw(big))(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i + Sk - Sq)
    _close(_bshd(o)[:, :, 70:], want[:, :, 70:], 1e-2)
    _close(lse[:, :, 70:], wl[:, :, 70:], 1e-3)
    assert torch.isnan(o[:, :70]).all()
    no_tile = 0 if big else 64  # rows of blocks that run no key tile
    assert torch.isneginf(lse[:, :, :no_tile]).all()
    assert torch.isnan(lse[:, :, no_tile:70]).all()


@pytest.mark.gpu
def test_one_warpgroup_over_128_rows_on_gpu():
    import torch
    torch.manual_seed(13)
    kw = dict(block_M=128, block_N=64, threads=128)
    B, H, S, D = 1, 2, 300, 64
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    o, lse = P.fa_causal_boundary_only(**kw)(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5, mask=j <= i)
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)
    S = 260
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    want, _ = _attn(q, k, v, D ** -0.5, mask=(j <= i) & (j > i - 70))
    _close(P.fa_window_inplace_guard(**kw)(q, k, v), want, 1e-2)
    B, S = 2, 220
    q, k, v = (_r(B, S, H, D, dtype=torch.float16) for _ in range(3))
    slopes = torch.tensor([0.05, -0.02], device="cuda")
    doc = torch.zeros(B, S, dtype=torch.int32, device="cuda")
    doc[:, 77:] = 1
    i, j = _ij(S, S)
    o, lse = P.fa_flex_macros(**kw)(q, k, v, slopes, doc)
    mask = (j <= i)[None, None] & (doc[:, None, :, None] == doc[:, None, None, :])
    bias = slopes[None, :, None, None] * (j - i).float()[None, None]
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=mask, bias=bias, softcap=20.0)
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [(64, 64, 256), (192, 64, 384), (128, 32, 128)])
def test_keyless_rows_at_other_warp_layouts_on_gpu(tile):
    """fa_prefix_causal_more_queries (guarded) where two warpgroups split a 64-row tile's
    keys (the row max and sums meet through shared memory), three warpgroups take 192 rows,
    and one takes 128 rows over 32-key tiles."""
    import torch
    torch.manual_seed(14)
    bm, bn, threads = tile
    B, H, Sq, Sk, D = 1, 2, 200, 130, 64
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    i, j = _ij(Sq, Sk)
    o, lse = P.fa_prefix_causal_more_queries(block_M=bm, block_N=bn, threads=threads)(q, k, v)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i + Sk - Sq)
    assert not torch.isnan(o).any()
    _close(_bshd(o), want, 1e-2)
    _close(lse, wl, 1e-3)


@pytest.mark.gpu
def test_decode_without_a_gemm_on_gpu():
    import torch
    torch.manual_seed(15)
    B, HQ, HK, L, D = 2, 8, 2, 300, 128
    q = _r(B, HQ, D, dtype=torch.bfloat16)
    kc, vc = _r(B, L, HK, D, dtype=torch.bfloat16), _r(B, L, HK, D, dtype=torch.bfloat16)
    lens = torch.tensor([1, 300], dtype=torch.int32, device="cuda")
    o, lse = P.gqa_decode_no_gemm()(q, kc, vc, lens)
    for b in range(B):
        n = int(lens[b])
        kk = kc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        vv = vc[b, :n].transpose(0, 1).repeat_interleave(HQ // HK, 0)
        want, wl = _attn(q[b][:, None, :], kk, vv, D ** -0.5)
        _close(o[b], want[:, 0], 1e-3)
        _close(lse[b], wl[:, 0] * LOG2E, 1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("big", [False, True])
def test_dynamic_lengths_on_gpu(big):
    """fa_causal_boundary_only with T.dynamic batch and length: one kernel, several calls."""
    import torch
    torch.manual_seed(16)
    kern = P.fa_causal_boundary_only(dynamic=True, **(dict(BIG_KW, num_stages=2) if big else {}))
    D = 128 if big else 64
    for B, S in ((1, 300), (2, 77), (3, 1), (1, 129)):
        q, k, v = (_r(B, 2, S, D, dtype=torch.float16) for _ in range(3))
        i, j = _ij(S, S)
        o, lse = kern(q, k, v)
        want, wl = _attn(q, k, v, D ** -0.5, mask=j <= i)
        _close(o, want, 1e-2)
        _close(lse, wl, 1e-3)


@pytest.mark.gpu
def test_mma_path_on_gpu():
    """Keyless rows, transposed keys and the causal backward through warp mma.sync (the
    sm_80 code path) on the H100."""
    import torch
    torch.manual_seed(17)
    B, H, Sq, Sk, D = 1, 2, 200, 130, 64
    q = _r(B, Sq, H, D, dtype=torch.float16)
    k, v = _r(B, Sk, H, D, dtype=torch.float16), _r(B, Sk, H, D, dtype=torch.float16)
    i, j = _ij(Sq, Sk)
    want, wl = _attn(_bshd(q), _bshd(k), _bshd(v), D ** -0.5, mask=j <= i + Sk - Sq)
    for name, out_idx, kw in MMA_CASES[:2]:
        o, lse = _mma_kernel(name, out_idx, **kw)(q, k, v)
        assert not torch.isnan(o).any()
        _close(_bshd(o), want, 1e-2)
        _close(lse, wl, 1e-3)
    S = 190
    q, k, v = (_r(1, 2, S, D, dtype=torch.float16) for _ in range(3))
    want, _ = _attn(q, k, v, D ** -0.5)
    name, out_idx, kw = MMA_CASES[2]
    _close(_mma_kernel(name, out_idx, **kw)(q, k.transpose(-1, -2).contiguous(), v), want, 1e-2)
    B, S, H = 1, 150, 2
    q, k, v, do = (_r(B, S, H, D, dtype=torch.float16) for _ in range(4))
    qf, kf, vf = (_bshd(x).float().requires_grad_() for x in (q, k, v))
    i, j = _ij(S, S)
    of, lse = _attn(qf, kf, vf, D ** -0.5, mask=j <= i)
    of.backward(_bshd(do).float())
    delta = (_bshd(of.detach()).half().float() * do.float()).sum(-1).transpose(1, 2).contiguous()
    dq = torch.zeros(B, S, H, D, device="cuda")
    name, out_idx, kw = MMA_CASES[3]
    dk, dv = _mma_kernel(name, out_idx, **kw)(q, k, v, do, (lse.detach() * LOG2E).contiguous(), delta, dq)
    _rel(_bshd(dq), qf.grad, 2e-2)
    _rel(_bshd(dk), kf.grad, 2e-2)
    _rel(_bshd(dv), vf.grad, 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [(16, 64), (48, 64), (64, 80)])
def test_odd_key_tiles_and_head_dim_80_on_gpu(tile):
    import torch
    torch.manual_seed(18)
    bn, D = tile
    B, H, S = 1, 2, 300
    q, k, v = (_r(B, H, S, D, dtype=torch.float16) for _ in range(3))
    i, j = _ij(S, S)
    o, lse = P.fa_causal_boundary_only(block_M=64, block_N=bn, threads=128, dim=D)(q, k, v)
    want, wl = _attn(q, k, v, D ** -0.5, mask=j <= i)
    _close(o, want, 1e-2)
    _close(lse, wl, 1e-3)


def test_a_shared_gather_is_synchronised_before_the_warpgroup_turns():
    """The packed-GQA program gathers Q into shared memory with its threads, so its first
    wgmma needs a barrier of the compute threads (and a proxy fence) first; the MMA
    overlap's turn wait (named barrier 2 + warpgroup) stands before that GEMM too.  The
    barrier must come before the turn wait: after it, warpgroup 0 waited at it for
    warpgroup 1, which waited for warpgroup 0's turn to end (a hang on the H100)."""
    src = P.fa_gqa_packed_group_rows(dim=128, rows=32, block_N=128, threads=256).get_kernel_source()
    sync = src.index("cute.arch.barrier(barrier_id=1, number_of_threads=256)")
    turn = src.index("cute.arch.barrier(barrier_id=2 + tc_tx // 128, number_of_threads=256)")
    assert src.index('cute.arch.fence_proxy("async.shared"') < sync < turn, src
