"""A sixteenth set of programs in TileLang's idioms (tests/unseen_programs16.py): the
memory-bound and small fused operators of LLM serving -- norms with a fused residual,
rotary embedding, gated activations, masked softmax, cross-entropy, argmax / top-k,
sampling helpers, reductions along either dim, transposes, fp8 / int8 quantization, MoE
routing, KV-cache appends, gathers.  CPU: each builds to an sm_90a cubin (sm_80 where it
has no float8), and what the program means is checked in the generated source or the
refusal.  GPU: each matches a float32 / float64 torch reference."""

import pytest

import tilecute

import rounds
import unseen_programs16 as P

PROGRAMS = ["add_rmsnorm_residual_out", "layernorm_chunked_scalar_eps", "qk_norm_per_head",
            "gated_group_rmsnorm", "rope_interleaved_gqa", "rope_neox_partial_inplace", "geglu",
            "swiglu_interleaved_clamped", "masked_softmax_key_padding", "cross_entropy_ignore_index",
            "argmax_vocab_chunks", "topk_small_k_rounds", "sample_temperature_gumbel",
            "repetition_penalty_inplace", "min_p_renorm", "lora_three_slices_sum",
            "tile_reductions_both_dims", "transpose_cast_scale_symbolic", "column_mean_shared_reduce",
            "popcount_clz_narrow", "embedding_gather_padding_idx", "fp8_weight_block_quant",
            "fp8_block_dequant", "act_quant_fp8_groups_colmajor_scales", "int8_smoothquant_per_token",
            "moe_route_one_block", "paged_kv_append_block_table", "kv_cache_fp8_slot_mapping",
            "adaln_gated_residual", "eos_lengths_and_last_hidden", "tensor_absmax_atomic",
            "tensor_fp8_quant_from_amax", "varlen_mean_pooling", "causal_conv1d_update",
            "selective_state_update", "paged_kv_gather_dequant", "column_argmax_five_rows",
            "rmsnorm_gemma_valid_rows", "layernorm_pipelined_chunks", "rope_inkernel_frequencies",
            "bias_add_two_dynamic_dims", "moe_combine_atomic", "moe_topk6_weighted_sum",
            "column_stats_96_rows"]
FP8 = {"fp8_weight_block_quant", "fp8_block_dequant", "act_quant_fp8_groups_colmajor_scales",
       "kv_cache_fp8_slot_mapping", "tensor_fp8_quant_from_amax", "paged_kv_gather_dequant"}


_arch = rounds.use_arch("TILECUTE_ARCH")


def _src(name, **kw):
    return getattr(P, name)(**kw).get_kernel_source()


test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))
test_program_builds_an_sm80_cubin = rounds.builds_cubin(
    [n for n in PROGRAMS if n not in FP8], rounds.tir_of(P), "sm_80")


def test_geglu_erf_builds_and_uses_erf():
    kern = P.geglu(approximate="none")
    assert kern.ensure_cubin()
    src = kern.get_kernel_source()
    assert "cute.math.erf(g * cutlass.Float32(0.7071067811865476))" in src and "tanh" not in src
    assert "cute.math.tanh(" in _src("geglu")


# ---- what the programs mean, in the generated source -----------------------------------------
def test_column_reduction_of_three_rows_folds_each_threads_column():
    """T.reduce_sum of a [3, 64] fragment along dim 0 (TileLang accepts it) over 64 threads:
    each thread holds one column (its 3 rows) and folds it, as TileLang lays the fragment
    out (the owner-thread layouts); at 128 threads the columns are not whole rounds of the
    threads and go through the padded transposed tile (next test)."""
    src = _src("lora_three_slices_sum")
    assert "f = cute.make_rmem_tensor((3,), cutlass.Float32)" in src, src
    assert "s[0] = s[0] + f[k" in src and "_moved" not in src


def test_moved_rows_take_each_reductions_identity():
    """The pad of a moved dim of 3 is the identity of each kind: -inf for max, +inf for
    min, 0 for absmax, all ones for an int32 bitand (and a 3-D fragment's middle dim)."""
    import tilecute.language as T

    def make(kind, dtype, shape, dim, threads=128):
        reduce = getattr(T, "reduce_" + kind)
        out = shape[:dim] + shape[dim + 1:]

        @T.prim_func
        def k(X: T.Tensor(shape, dtype), Y: T.Tensor(out, dtype)):
            with T.Kernel(1, threads=threads):  # (64 columns: not whole rounds of 128)
                f = T.alloc_fragment(shape, dtype)
                s = T.alloc_fragment(out, dtype)
                T.copy(X, f)
                reduce(f, s, dim=dim)
                T.copy(s, Y)
        return k
    for kind, dtype, pad in [("max", "float32", 'float("-inf")'), ("min", "float32", 'float("inf")'),
                             ("absmax", "float32", "cutlass.Float32(0.0)"), ("bitand", "int32", "-1")]:
        src = tilecute.compile(make(kind, dtype, (3, 64), 0)).get_kernel_source()
        assert "< 3" in src and pad in src, (kind, src)
    src = tilecute.compile(make("sum", "float32", (2, 3, 32), 1, threads=64)).get_kernel_source()
    assert "a row is 1 threads x 4 registers" in src, src


def test_moved_rows_of_96_and_6_are_padded():
    """[96, 64] columns at 128 threads (rows of 96: TileLang accepts them, each column's
    rows in its threads) pad to 128 with 0 / -inf when moved last (option
    disable_in_place_column_reduce; by default they reduce in place, 8 threads x 8
    registers a row, tests/test_column_reduce_in_place.py); the 6 experts of a [2, 6, 256]
    fragment pad to 8; 384 rows (a multiple of the threads) are not padded."""
    moved = {"disable_in_place_column_reduce": True}
    src = rounds.source(P.column_stats_96_rows.get_tir(), options=moved)
    assert "a row is 32 threads x 4 registers" in src, src
    assert "< 96, tc_ld" in src and 'cutlass.Float32(float("-inf"))' in src
    src = _src("column_stats_96_rows")
    assert "dim=0): a row is 8 threads x 8 registers, each thread folds 6 rows" in src, src
    assert "a row is 2 threads x 4 registers" in _src("moe_topk6_weighted_sum")
    import tilecute.language as T

    @T.prim_func
    def k(X: T.Tensor((384, 32), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((384, 32), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.copy(X, f)
            T.reduce_sum(f, s, dim=0)
            T.copy(s, Y)
    src = tilecute.compile(k, options=moved).get_kernel_source()
    assert "f_frag1 = cute.make_rmem_tensor((96,)" in src and "< 384" not in src, src


def test_a_row_of_1000_in_one_fragment_is_refused_by_name():
    """A [4, 1000] fragment row-reduced over 128 threads: TileLang 0.1.15 finds no layout
    ("no available layout found"); tilecute refuses it naming the reduction and the row
    length (the programs here pad the row to 1024 instead)."""
    import tilecute.language as T
    from tilecute.transform.layout_inference import LayoutError

    @T.prim_func
    def k(X: T.Tensor((4, 1000), "float32"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 1000), "float32")
            m = T.alloc_fragment((4,), "float32")
            T.copy(X, x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y)
    with pytest.raises(LayoutError, match=r"T.reduce_max: rows of 'x' have 1000 elements"):
        tilecute.compile(k).get_kernel_source()


def test_clz_of_a_narrow_int_is_refused_and_popcount_keeps_its_width():
    """TileLang refuses T.clz of a uint8 ("clz only supports 32 or 64 bit integer types");
    tilecute too.  T.popcount of a uint8 / uint16 / int8 counts the bits of the narrow
    value (tir's dtype: ctpop of i8 / i16; TileLang 0.1.15 has no CUDA rule for it)."""
    import tilecute.language as T
    from tilecute.language.parser import FrontendError

    with pytest.raises(FrontendError, match="T.clz takes a 32- or 64-bit integer, got uint8"):
        @T.prim_func
        def k(A: T.Tensor((32,), "uint8"), B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    B[i] = T.clz(A[i] + A[i])
    src = _src("popcount_clz_narrow")
    assert "s8 = a + cutlass.Uint8(200)" in src
    assert "Out[i, 0] = cutlass.Int32(cute.arch.popc(s8))" in src
    assert "Out[i, 5] = cutlass.Int32(cute.arch.clz(cutlass.Int32(neg8)))" in src


def test_scalar_eps_is_a_kernel_parameter():
    src = _src("layernorm_chunked_scalar_eps")
    assert "eps: cutlass.Float32" in src
    assert "- s1[i_1_] * s1[i_1_] + eps)" in src


def test_symbolic_rows_guard_the_tail_rows():
    """add_rmsnorm_residual_out: rows past num_tokens are neither loaded nor stored (the
    vector path and the scalar tail both test the row)."""
    src = _src("add_rmsnorm_residual_out")
    assert src.count("if bx * 2 + i < num_tokens:") >= 1
    # (rows past the end: no store at all, the vector store under the row test)
    at = src.index("ResOut.iterator + cute.assume((bx * 2 + i1) * 5120 + i2, divby=8)")
    assert "if bx * 2 + i1 < num_tokens:" in src[at - 600:at]
    assert "grid=[(num_tokens + 2 - 1) // 2, 1, 1]" in src


def test_the_repetition_penalty_gathers_before_it_scatters():
    """All the ids' logits are read into shared memory before any is written back."""
    src = _src("repetition_penalty_inplace")
    gather = src.index("g[j] = tc_ld2")
    sync = src.index("cute.arch.sync_threads()", gather)
    assert sync < src.index("Logits[b, Prev[b, j_1_]] = cutlass.select_(")


def test_the_moe_route_orders_count_scan_and_tickets():
    src = _src("moe_route_one_block")
    count = src.index("tca.atomic_add(cnt, TopkIds[p // 2, p % 2], 1)")
    scan = src.index("tcs.warp_inclusive_scan(")
    ticket = src.index('slot = tca.atomic_fetch(cursor, TopkIds[p_1_ // 2, p_1_ % 2], 1, "add")')
    assert count < scan < ticket
    assert src.count("cute.arch.sync_threads()", count, ticket) >= 3


def test_the_transpose_reads_the_padded_tile_by_columns():
    src = _src("transpose_cast_scale_symbolic")
    assert "tile[i * 33 + j] = " in src and "tile[i_1_ * 33 + j_1_]" in src
    assert src.index("cute.arch.sync_threads()") < src.index("Y[c_1_, r_1_] = ")


def test_int8_quant_rounds_ties_to_even():
    assert "cute.math.roundeven(x[" in _src("int8_smoothquant_per_token")


def test_the_eos_while_loop_runs_in_one_thread_and_shares_the_length():
    src = _src("eos_lengths_and_last_hidden")
    loop = src.index("while tc_more1:")
    # the row Hidden[b, n[0] - 1, :] moves in 8-byte vectors, n[0] read once a vector
    assert src.index("if tx == 0:") < loop < src.index("cute.arch.sync_threads()") < \
        src.index("Hidden.iterator + cute.assume(b * 51200 + (n[0] - 1) * 256 + d, divby=4)")


# ---- on the GPU -----------------------------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_norms_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(37, 5120, device=dev).bfloat16()
    r = torch.randn(37, 5120, device=dev).bfloat16()
    w = torch.randn(5120, device=dev).bfloat16()
    y, ro = P.add_rmsnorm_residual_out()(x, r, w)
    h = x.float() + r.float()
    _close(ro, h.bfloat16(), 0)
    _close(y, (h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).bfloat16(), 2e-2)

    x = torch.randn(300, 3000, device=dev).half() * 2 + 1
    w, b = torch.randn(3000, device=dev), torch.randn(3000, device=dev)
    y, mean, rstd = P.layernorm_chunked_scalar_eps()(x, w, b, 1e-5)
    xf = x.double()
    mu, var = xf.mean(1), xf.var(1, unbiased=False)
    _close(mean, mu.float(), 1e-4)
    _close(rstd, torch.rsqrt(var + 1e-5).float(), 1e-3)
    _close(y, ((xf - mu[:, None]) * torch.rsqrt(var + 1e-5)[:, None] * w.double() + b.double()).half(), 1e-2)

    q = torch.randn(9, 12, 128, device=dev).bfloat16()
    w = torch.randn(128, device=dev).bfloat16()
    out = P.qk_norm_per_head()(q, w)
    qf = q.float()
    _close(out, (qf * torch.rsqrt(qf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16(), 2e-2)

    x, z = torch.randn(200, 1024, device=dev).half(), torch.randn(200, 1024, device=dev).half()
    w = torch.randn(1024, device=dev).half()
    y = P.gated_group_rmsnorm()(x, z, w)
    g = (x.float() * torch.nn.functional.silu(z.float())).view(200, 4, 256)
    want = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-5)).view(200, 1024) * w.float()
    _close(y, want.half(), 1e-2)


@pytest.mark.gpu
def test_rotary_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    q, k = torch.randn(7, 8, 128, device=dev).bfloat16(), torch.randn(7, 2, 128, device=dev).bfloat16()
    pos = torch.randint(0, 4096, (7,), device=dev)
    ang = torch.randn(4096, 64, device=dev)
    cos, sin = ang.cos(), ang.sin()
    qo, ko = P.rope_interleaved_gqa()(q, k, pos, cos, sin)
    for x, o in ((q, qo), (k, ko)):
        c, s = cos[pos][:, None, :], sin[pos][:, None, :]
        x0, x1 = x.float()[..., 0::2], x.float()[..., 1::2]
        want = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], -1).flatten(-2)
        _close(o, want.bfloat16(), 2e-2)

    qkv = torch.randn(77, 24, 128, device=dev).half()
    pos = torch.randint(0, 2048, (77,), device=dev, dtype=torch.int32)
    half = torch.randn(2048, 32, device=dev)
    cos, sin = torch.cat([half.cos()] * 2, 1).half(), torch.cat([half.sin()] * 2, 1).half()
    before = qkv.clone()
    P.rope_neox_partial_inplace()(qkv, pos, cos, sin)
    c, s = cos[pos.long()].float()[:, None, :], sin[pos.long()].float()[:, None, :]
    a, b = before.float()[:, :20, :32], before.float()[:, :20, 32:64]
    want = before.clone()
    want[:, :20, :32] = (a * c[..., :32] - b * s[..., :32]).half()
    want[:, :20, 32:64] = (b * c[..., 32:] + a * s[..., 32:]).half()
    _close(qkv, want, 2e-3)
    assert torch.equal(qkv[:, 20:], before[:, 20:]) and torch.equal(qkv[:, :, 64:], before[:, :, 64:])


@pytest.mark.gpu
def test_gated_activations_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(333, 2000, device="cuda").bfloat16()
    for approx in ("tanh", "none"):
        y = P.geglu(approximate=approx)(x)
        want = F.gelu(x.float()[:, :1000], approximate=approx) * x.float()[:, 1000:]
        _close(y, want.bfloat16(), 2e-2)
    x = (torch.randn(257, 1408, device="cuda") * 4).bfloat16()
    y = P.swiglu_interleaved_clamped()(x)
    g, u = x.float()[:, 0::2].clamp(max=7.0), x.float()[:, 1::2].clamp(-7.0, 7.0)
    _close(y, (g * torch.sigmoid(1.702 * g) * (u + 1)).bfloat16(), 2e-2)


@pytest.mark.gpu
def test_softmax_loss_and_selection_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    dev = "cuda"
    sc = torch.randn(2, 3, 100, 1000, device=dev).half()
    keep = torch.rand(2, 1000, device=dev) < 0.7
    keep[1] = False  # batch 1: every key masked -> rows of zeros
    p = P.masked_softmax_key_padding()(sc, keep, 0.125)
    want = torch.softmax((sc.float() * 0.125).masked_fill(~keep[:, None, None, :], float("-inf")), -1)
    want = torch.nan_to_num(want, nan=0.0)
    _close(p, want.half(), 2e-3)

    logits = (torch.randn(50, 32003, device=dev) * 3).bfloat16()
    labels = torch.randint(0, 32003, (50,), device=dev)
    labels[[3, 17, 49]] = -100
    total = torch.zeros(2, device=dev)
    loss = P.cross_entropy_ignore_index()(logits, labels, total)
    want = F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="none")
    _close(loss, want, 1e-4)
    _close(total, torch.stack([want.sum(), torch.tensor(47.0, device=dev)]), 1e-3)

    logits = torch.randn(6, 50257, device=dev).half()
    logits[0, 100] = logits[0, 40000] = 30.0  # a tie: the first index wins
    logits[1, -1] = 30.0  # the last element (in the ragged chunk)
    val, idx = P.argmax_vocab_chunks()(logits)
    assert torch.equal(idx, logits.float().argmax(1)) and int(idx[0]) == 100
    _close(val, logits.float().max(1).values, 0)

    x = torch.randn(300, 1000, device=dev)
    vals, ids = P.topk_small_k_rounds()(x)
    tv, ti = x.topk(4, 1)
    assert torch.equal(vals, tv) and torch.equal(ids, ti.int())

    lg = torch.randn(5, 32000, device=dev) * 2
    g = -torch.log(-torch.log(torch.rand(5, 32000, device=dev).clamp_min(1e-20)))
    temp = torch.tensor([0.0, 0.7, 1.0, 0.0, 1.5], device=dev)
    tok = P.sample_temperature_gumbel()(lg, g, temp)
    inv = torch.where(temp == 0, torch.ones_like(temp), 1.0 / temp)
    want = torch.where((temp == 0)[:, None], lg, lg * inv[:, None] + g).argmax(1)
    assert torch.equal(tok, want)

    lg = torch.randn(4, 1000, device=dev)
    prev = torch.randint(0, 1000, (4, 50), device=dev, dtype=torch.int32)
    prev[:, 10] = prev[:, 0]  # repeats: penalised once
    want = lg.clone()
    gth = want.gather(1, prev.long())
    want.scatter_(1, prev.long(), torch.where(gth > 0, gth / 1.3, gth * 1.3))
    P.repetition_penalty_inplace()(lg, prev)
    _close(lg, want, 1e-6)

    lg = (torch.randn(100, 4000, device=dev) * 3).bfloat16()
    pr = P.min_p_renorm()(lg)
    e = torch.exp(lg.float() - lg.float().max(1, keepdim=True).values)  # p / p_max, as the kernel
    kept = torch.where(e >= 0.05, e, torch.zeros_like(e))
    _close(pr, kept / kept.sum(1, keepdim=True), 1e-5)


@pytest.mark.gpu
def test_reductions_and_transposes_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(3, 1000, 64, device=dev).half()
    _close(P.lora_three_slices_sum()(x), x.float().sum(0), 1e-5)

    x = torch.randn(300, 200, device=dev)
    rs, cs = torch.zeros(300, device=dev), torch.zeros(200, device=dev)
    cm, ca = torch.full((200,), float("-inf"), device=dev), torch.zeros(200, device=dev)
    P.tile_reductions_both_dims()(x, rs, cs, cm, ca)
    _close(rs, x.sum(1), 1e-4)
    _close(cs, x.sum(0), 1e-4)
    _close(cm, x.max(0).values, 0)
    _close(ca, x.abs().max(0).values, 0)

    x = torch.randn(100, 777, device=dev)
    _close(P.transpose_cast_scale_symbolic()(x), (x * 0.5).t().bfloat16(), 0)

    x = torch.randn(1000, 128, device=dev).half()
    _close(P.column_mean_shared_reduce()(x), x.double().mean(0).float(), 1e-5)

    a = torch.arange(256, device=dev, dtype=torch.uint8)
    out = P.popcount_clz_narrow()(a).cpu()
    for v in range(256):
        s8, w16, n8 = (v + 200) & 0xFF, (v * 300) & 0xFFFF, (-v) & 0xFF
        n8_signed = n8 - 256 if n8 >= 128 else n8
        want = [bin(s8).count("1"), 32 - s8.bit_length(), bin(w16).count("1"), 32 - w16.bit_length(),
                bin(n8).count("1"), 0 if n8_signed < 0 else 32 - n8_signed.bit_length()]
        assert out[v].tolist() == want, (v, out[v].tolist(), want)


@pytest.mark.gpu
def test_quantization_and_gathers_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    ids = torch.tensor([5, 0, 999, 1000, -3, 17, 0, 42, 7, 123, 456, 789, 1], device=dev)
    table = torch.randn(1000, 4096, device=dev).bfloat16()
    out = P.embedding_gather_padding_idx(V=1000)(ids, table)
    ok = (ids != 0) & (ids >= 0) & (ids < 1000)
    want = torch.where(ok[:, None], table[ids.clamp(0, 999)], torch.zeros_like(table[:1]))
    assert torch.equal(out, want)

    w = torch.randn(1000, 700, device=dev).bfloat16()
    q, s = P.fp8_weight_block_quant()(w)
    wp = torch.zeros(1024, 768, device=dev)
    wp[:1000, :700] = w.float()
    amax = wp.view(8, 128, 6, 128).abs().amax((1, 3))
    _close(s, amax.clamp_min(1e-4) / 448.0, 1e-6)
    sx = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:1000, :700]
    want = (w.float() / sx).clamp(-448, 448).to(torch.float8_e4m3fn)
    _close(q.float(), want.float(), 0.13)
    wd = P.fp8_block_dequant()(q, s)
    _close(wd, (q.float() * sx).bfloat16(), 1e-2)

    x = (torch.randn(37, 7168, device=dev) * 3).bfloat16()
    q, s = P.act_quant_fp8_groups_colmajor_scales()(x)
    am = x.float().view(37, 56, 128).abs().amax(-1).clamp_min(1e-10)
    want_s = torch.exp2(torch.ceil(torch.log2(am / 448.0))).t()
    assert (s == want_s).float().mean() > 0.99
    deq = q.float().view(37, 56, 128) * s.t()[:, :, None]
    _close(deq.view(37, 7168), x.float(), 0.07)

    x = torch.randn(300, 2048, device=dev).half()
    x[5] = 0
    smooth = torch.rand(2048, device=dev) + 0.5
    q, s = P.int8_smoothquant_per_token()(x, smooth)
    xs = x.float() * smooth
    am = xs.abs().amax(1)
    want_s = torch.where(am == 0, torch.ones_like(am), am / 127.0)
    _close(s, want_s, 1e-6)
    want_q = torch.round(xs / want_s[:, None]).clamp(-127, 127)
    assert (q.float() - want_q).abs().max() <= 1 and (q.float() == want_q).float().mean() > 0.999
    assert (q[5] == 0).all()

    E, n_tok = 16, 300
    topk = torch.stack([torch.randperm(E, device=dev)[:2] for _ in range(n_tok)]).int()
    off = torch.full((E + 1,), -1, device=dev, dtype=torch.int32)
    sid = torch.full((n_tok * 2,), -1, device=dev, dtype=torch.int32)
    pos = torch.full((n_tok, 2), -1, device=dev, dtype=torch.int32)
    P.moe_route_one_block()(topk, off, sid, pos)
    cnt = torch.bincount(topk.flatten().long(), minlength=E)
    assert torch.equal(off.long(), torch.cat([cnt.new_zeros(1), cnt.cumsum(0)]))
    assert torch.equal(sid.sort().values.long(), torch.arange(n_tok * 2, device=dev))
    flat = topk.flatten()
    for e in range(E):
        assert (flat[sid[off[e]:off[e + 1]].long()] == e).all()
    assert torch.equal(sid[pos.flatten().long()].long(), torch.arange(n_tok * 2, device=dev))


@pytest.mark.gpu
def test_caches_and_epilogues_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    k, v = torch.randn(4, 8, 128, device=dev).bfloat16(), torch.randn(4, 8, 128, device=dev).bfloat16()
    lens = torch.tensor([0, 17, 100, -1], device=dev, dtype=torch.int32)
    bt = torch.randperm(256, device=dev)[:256].view(4, 64).int()
    kc = torch.zeros(256, 16, 8, 128, device=dev).bfloat16()
    vc = torch.zeros_like(kc)
    P.paged_kv_append_block_table()(k, v, lens, bt, kc, vc)
    wk, wv = torch.zeros_like(kc), torch.zeros_like(vc)
    for b in range(3):
        p = int(lens[b])
        wk[bt[b, p // 16], p % 16] = k[b]
        wv[bt[b, p // 16], p % 16] = v[b]
    assert torch.equal(kc, wk) and torch.equal(vc, wv)

    k, v = torch.randn(10, 4, 128, device=dev).half() * 5, torch.randn(10, 4, 128, device=dev).half()
    slots = torch.tensor([3, -1, 4000, 17, 18, -1, 0, 999, 2048, 5], device=dev)
    ks, vs = torch.rand(4, device=dev) + 0.01, torch.rand(4, device=dev) + 0.5
    kc = torch.zeros(4096, 4, 128, device=dev).to(torch.float8_e4m3fn)
    vc = torch.zeros_like(kc)
    P.kv_cache_fp8_slot_mapping()(k, v, slots, ks, vs, kc, vc)
    wk, wv = torch.zeros(4096, 4, 128, device=dev), torch.zeros(4096, 4, 128, device=dev)
    kept = slots >= 0
    wk[slots[kept]] = (k.float() / ks[None, :, None]).clamp(-448, 448)[kept]
    wv[slots[kept]] = (v.float() / vs[None, :, None]).clamp(-448, 448)[kept]
    _close(kc.float(), wk.to(torch.float8_e4m3fn).float(), 0.13)
    _close(vc.float(), wv.to(torch.float8_e4m3fn).float(), 0.13)

    x, y = torch.randn(2, 300, 768, device=dev).bfloat16(), torch.randn(2, 300, 768, device=dev).bfloat16()
    gate, bias = torch.randn(2, 768, device=dev).bfloat16(), torch.randn(768, device=dev)
    out = P.adaln_gated_residual()(x, y, gate, bias)
    _close(out, (x.float() + gate.float()[:, None, :] * (y.float() + bias)).bfloat16(), 2e-2)

    toks = torch.randint(3, 100, (6, 200), device=dev, dtype=torch.int32)
    toks[0, 0] = 2
    toks[1, 57] = 2
    toks[1, 120] = 2
    toks[3, 199] = 2
    toks[4, 10] = 2  # row 2 and row 5: no EOS
    hidden = torch.randn(6, 200, 256, device=dev).half()
    lens, last = P.eos_lengths_and_last_hidden()(toks, hidden)
    want = torch.tensor([1, 58, 200, 200, 11, 200], device=dev, dtype=torch.int32)
    assert torch.equal(lens, want)
    assert torch.equal(last, hidden[torch.arange(6, device=dev), want.long() - 1])


@pytest.mark.gpu
def test_decode_state_updates_and_pooling_on_gpu():
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    dev = "cuda"
    x = (torch.randn(1000, 3000, device=dev) * 2).bfloat16()
    amax = torch.zeros(1, device=dev)
    P.tensor_absmax_atomic()(x, amax)
    assert float(amax) == float(x.float().abs().max())
    q, scale = P.tensor_fp8_quant_from_amax()(x, amax)
    _close(scale, amax / 448.0, 1e-6)
    _close(q.float(), (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float(), 0.13)

    lens = [0, 1, 31, 100, 33]
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), device=dev, dtype=torch.int32)
    hidden = torch.randn(int(cu[-1]), 256, device=dev).half()
    out = P.varlen_mean_pooling()(hidden, cu)
    for b in range(5):
        seg = hidden[int(cu[b]):int(cu[b + 1])].double()
        want = seg.mean(0).float() if lens[b] else torch.zeros(256, device=dev)
        _close(out[b], want, 1e-5)

    xb = torch.randn(3, 768, device=dev).half()
    state = torch.randn(3, 768, 3, device=dev).half()
    w, bias = torch.randn(768, 4, device=dev).half(), torch.randn(768, device=dev).half()
    before = state.clone()
    out = P.causal_conv1d_update()(xb, state, w, bias)
    window = torch.cat([before.float(), xb.float()[..., None]], -1)
    _close(out, F.silu((window * w.float()).sum(-1) + bias.float()).half(), 2e-3)
    assert torch.equal(state, torch.cat([before[..., 1:], xb[..., None]], -1))

    B, H, Pd, N = 2, 8, 64, 128
    st = torch.randn(B, H, Pd, N, device=dev)
    xs = torch.randn(B, H, Pd, device=dev).bfloat16()
    dt = torch.randn(B, H, device=dev).bfloat16()
    dt_bias, A = torch.randn(H, device=dev), -torch.rand(H, device=dev) * 4
    Bm, Cm = torch.randn(B, N, device=dev).bfloat16(), torch.randn(B, N, device=dev).bfloat16()
    Dskip, z = torch.randn(H, device=dev), torch.randn(B, H, Pd, device=dev).bfloat16()
    st0 = st.clone()
    y = P.selective_state_update()(st, xs, dt, dt_bias, A, Bm, Cm, Dskip, z)
    dtv = F.softplus(dt.float() + dt_bias)
    new = st0 * torch.exp(dtv * A)[..., None, None] + \
        (dtv[..., None, None] * Bm.float()[:, None, None, :] * xs.float()[..., None])
    _close(st, new, 1e-4)
    want = ((new * Cm.float()[:, None, None, :]).sum(-1) + Dskip[:, None] * xs.float()) * F.silu(z.float())
    _close(y, want.bfloat16(), 2e-2)

    kc = (torch.randn(128, 16, 2, 128, device=dev) * 10).to(torch.float8_e4m3fn)
    vc = (torch.randn(128, 16, 2, 128, device=dev) * 10).to(torch.float8_e4m3fn)
    bt = torch.randperm(128, device=dev)[:96].view(3, 32).int()
    lens = [5, 40, 17]
    cu = torch.tensor([0, 5, 45, 62], device=dev, dtype=torch.int32)
    k = torch.empty(62, 2, 128, device=dev).bfloat16()
    v = torch.empty_like(k)
    P.paged_kv_gather_dequant()(kc, vc, bt, cu, k, v, 0.5, 0.25)
    rows = []
    for b in range(3):
        for p in range(lens[b]):
            rows.append((int(bt[b, p // 16]), p % 16))
    idx_b = torch.tensor([r[0] for r in rows], device=dev)
    idx_r = torch.tensor([r[1] for r in rows], device=dev)
    assert torch.equal(k, (kc[idx_b, idx_r].float() * 0.5).bfloat16())
    assert torch.equal(v, (vc[idx_b, idx_r].float() * 0.25).bfloat16())

    xr = torch.randint(-3, 3, (5, 1000), device=dev).float()  # many ties: the first row wins
    mx, arg = P.column_argmax_five_rows()(xr)
    _close(mx, xr.max(0).values, 0)
    first = (xr == xr.max(0, keepdim=True).values).float().argmax(0)
    assert torch.equal(arg, first.int())


@pytest.mark.gpu
def test_scalars_pipelines_dynamic_dims_and_combine_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(500, 2304, device=dev).bfloat16()
    w = torch.randn(2304, device=dev).bfloat16()
    y = P.rmsnorm_gemma_valid_rows()(x, w, 321)
    xf = x.float()
    want = xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * (1 + w.float())
    want[321:] = 0
    _close(y, want.bfloat16(), 2e-2)
    assert (y[321:] == 0).all()

    x = torch.randn(128, 6000, device=dev).half() + 0.5
    w, b = torch.randn(6000, device=dev).half(), torch.randn(6000, device=dev).half()
    y = P.layernorm_pipelined_chunks()(x, w, b)
    _close(y, torch.nn.functional.layer_norm(x.float(), (6000,), w.float(), b.float(), 1e-5).half(), 1e-2)

    x = torch.randn(9, 4, 128, device=dev)
    pos = torch.tensor([0, 1, 7, 100, 1000, 4095, 8191, 20000, 30000], device=dev, dtype=torch.int32)
    out = P.rope_inkernel_frequencies()(x, pos)
    inv = torch.pow(torch.tensor(10000.0, device=dev), -2.0 * torch.arange(64, device=dev).float() / 128)
    ang = pos.float()[:, None] * inv[None, :]
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    a, bb = x[..., :64], x[..., 64:]
    _close(out, torch.cat([a * c - bb * s, bb * c + a * s], -1), 1e-2)

    x = torch.randn(3, 37, 1024, device=dev).half()
    bias, scale = torch.randn(1024, device=dev).half(), torch.rand(3, device=dev) + 0.5
    out = P.bias_add_two_dynamic_dims()(x, bias, scale)
    _close(out, ((x.float() + bias.float()) * scale[:, None, None]).half(), 2e-3)

    n_tok, k, D = 300, 4, 512
    yexp = torch.randn(n_tok * k, D, device=dev).half()
    src = torch.randperm(n_tok * k, device=dev).int()
    wts = torch.rand(n_tok, k, device=dev)
    out = torch.zeros(n_tok, D, device=dev)
    P.moe_combine_atomic()(yexp, src, wts, out)
    want = torch.zeros(n_tok, D, device=dev)
    want.index_add_(0, (src // k).long(), yexp.float() * wts.flatten()[src.long()][:, None])
    _close(out, want, 1e-5)


@pytest.mark.gpu
def test_padded_column_reductions_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    y = torch.randn(9, 6, 256, device=dev).bfloat16()
    w = torch.rand(9, 6, device=dev)
    out = P.moe_topk6_weighted_sum()(y, w)
    _close(out, (y.float() * w[..., None]).sum(1).bfloat16(), 2e-2)

    x = -torch.rand(96, 300, device=dev).half() - 0.5  # all negative: a 0 pad would be the max
    s, m = P.column_stats_96_rows()(x)
    _close(s, x.float().sum(0), 1e-4)
    _close(m, x.float().max(0).values, 0)
