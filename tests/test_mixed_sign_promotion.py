"""Operands of two dtypes take one dtype as TVM's BinaryOpMatchTypes gives it (TileLang's
``a + b``, ``a < b``, ``T.max``, ``//``, ``T.if_then_else`` all go through it): at equal
widths the unsigned integer wins on either side (``S[i] < U[i]`` of an int32 and a uint32
compares unsigned: -1 is not below 5), an IEEE float beats bfloat16 on either side
(``bfloat16 + float16`` is float16), and two fp8 formats have no common dtype.  tilecute
kept the left operand's dtype at equal widths, so ``S < U``, ``T.max(S, U)`` and ``S // U``
were signed where TileLang's are unsigned."""

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N


@pytest.mark.parametrize("a, b, want", [
    ("int32", "uint32", "uint32"), ("uint32", "int32", "uint32"), ("int8", "uint8", "uint8"),
    ("uint16", "int16", "uint16"), ("int8", "uint16", "uint16"), ("uint8", "int32", "int32"),
    ("int64", "uint32", "int64"), ("uint64", "int64", "uint64"), ("bool", "uint8", "uint8"),
    ("bfloat16", "float16", "float16"), ("float16", "bfloat16", "float16"),
    ("bfloat16", "float32", "float32"), ("float8_e4m3", "bfloat16", "bfloat16"),
    ("float8_e5m2", "float16", "float16"), ("int32", "float16", "float16"),
    ("float4_e2m1fn", "float8_e4m3", "float8_e4m3"), ("int64", "bfloat16", "bfloat16"),
])
def test_promote_is_tvms_binary_op_match_types(a, b, want):
    assert N.promote(a, b) == want


def test_two_fp8_formats_have_no_common_dtype():
    with pytest.raises(TypeError, match="float8_e4m3 and float8_e5m2"):
        N.promote("float8_e4m3", "float8_e5m2")


def mixed(n=128):
    @T.prim_func
    def mix(S: T.Tensor((n,), T.int32), U: T.Tensor((n,), T.uint32), S8: T.Tensor((n,), T.int8),
            U8: T.Tensor((n,), T.uint8), O: T.Tensor((n, 5), T.int32)):
        with T.Kernel(1, threads=n):
            i = T.get_thread_binding()
            O[i, 0] = T.if_then_else(S[i] < U[i], 1, 0)
            O[i, 1] = T.cast(T.max(S[i], U[i]), T.int32)
            O[i, 2] = T.cast(S[i] // U[i], T.int32)
            O[i, 3] = T.if_then_else(S8[i] < U8[i], 1, 0)
            O[i, 4] = T.cast(S[i] + U[i], T.int32)
    return mix


def test_equal_width_mixes_are_unsigned():
    func = mixed()
    text = func.script()
    assert 'T.Cast("uint32", S[i]) < U[i]' in text, text
    assert 'T.max(T.Cast("uint32", S[i]), U[i])' in text, text
    assert 'T.Cast("uint32", S[i]) // U[i]' in text, text
    assert 'T.Cast("uint8", S8[i]) < U8[i]' in text, text
    src = tilecute.compile(func).get_kernel_source()
    assert "cutlass.Uint32(S[i]) < cutlass.Uint32(U[i])" in src, src


def test_builds_a_cubin(tmp_path):
    assert tilecute.build_cubin(mixed(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_equal_width_mixes_on_gpu():
    import torch
    torch.manual_seed(0)
    n = 128
    S = torch.randint(-1000, 1000, (n,), dtype=torch.int32, device="cuda")
    U = torch.randint(1, 2000, (n,), dtype=torch.int32, device="cuda")
    S8 = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    U8 = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    O = torch.empty(n, 5, dtype=torch.int32, device="cuda")
    tilecute.compile(mixed())(S, U.view(torch.uint32), S8, U8, O)
    s = S.cpu().numpy().astype(np.int64) & 0xFFFFFFFF  # as uint32
    u = U.cpu().numpy().astype(np.int64)
    s8 = S8.cpu().numpy().astype(np.int64) & 0xFF
    u8 = U8.cpu().numpy().astype(np.int64)
    want = np.stack([(s < u), np.maximum(s, u), s // u, (s8 < u8), (s + u) & 0xFFFFFFFF], 1)
    assert np.array_equal(O.cpu().numpy(), want.astype(np.int64).astype(np.uint32).view(np.int32).reshape(n, 5))
