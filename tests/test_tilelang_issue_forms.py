"""TileLang programs of the kind TileLang's own issue tests guard, each written here in
TileLang's idioms: forms and Python idioms tilecute once refused although TileLang takes
them, and behaviours those issues are about.  CPU: the frontend and an sm_90a cubin; GPU
(``-m gpu``): results against torch."""

import pytest
import torch

import tilecute
import tilecute.language as T


def _cubin(func, tmp_path):
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert info.kernels
    return info


# ---- a helper's list of expressions bound to a name ---------------------------------------
def _round_to_bf16_bits(x):
    """The bfloat16 bits (low 16 of a uint32) of float32 ``x``, rounded to nearest even;
    an inf or NaN keeps its bits (a rounding bias would carry a NaN into inf)."""
    bits = T.reinterpret(x, T.uint32)
    biased = bits + (((bits >> T.uint32(16)) & T.uint32(1)) + T.uint32(0x7FFF))
    is_special = ((bits >> T.uint32(23)) & T.uint32(0xFF)) == T.uint32(0xFF)
    return T.if_then_else(is_special, bits, biased) >> T.uint32(16)


def _bf16_pair(word):
    """The two bfloat16 halves of ``word`` as float32 values: a generator, which a kernel
    turns into a list with ``list(...)`` (TileLang's dequantize helpers return them so)."""
    return (T.reinterpret(h << T.uint32(16), T.float32)
            for h in (word & T.uint32(0xFFFF), word >> T.uint32(16)))


def bf16_round_trip(n=8):
    """y = float32(bfloat16(x)) two values a thread, through one packed uint32."""

    @T.prim_func
    def main(x: T.Tensor((n,), T.float32), y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 2, threads=1) as bx:
            word = _round_to_bf16_bits(x[bx * 2]) | (_round_to_bf16_bits(x[bx * 2 + 1]) << T.uint32(16))
            halves = list(_bf16_pair(word))
            y[bx * 2] = halves[0]
            y[bx * 2 + 1] = halves[1]

    return main


def test_list_of_expressions_binds_a_name(tmp_path):
    text = bf16_round_trip().script()
    # the list's elements are read where they are indexed
    assert "halves" not in text and text.count("T.reinterpret(") >= 4
    _cubin(bf16_round_trip(), tmp_path)


@pytest.mark.gpu
def test_gpu_bf16_round_trip_keeps_nan_and_inf():
    kernel = tilecute.compile(bf16_round_trip())
    bits = torch.tensor([0x7FFF8C22, 0x7FFFFFFF, 0x7F800000, 0xFF800000,
                         0x3F800000, 0x3F808000, 0x3F818000, 0xC0490FDB], dtype=torch.int64)
    x = bits.to(torch.int32).view(torch.float32).cuda()
    y = torch.empty_like(x)
    kernel(x, y)
    got = y.cpu()
    assert torch.isnan(got[:2]).all()
    assert torch.isinf(got[2:4]).all() and got[2] > 0 and got[3] < 0
    want = x.cpu()[4:].to(torch.bfloat16).float()  # torch rounds to nearest even too
    assert torch.equal(got[4:], want)
