"""TVM's expression builders in ``tvm.tirx`` / ``tvm.tir`` (``const``, ``reinterpret``,
``Select``, ``Cast``, ``Min``, ``PrimExpr``) over tilecute's IR, as TileLang's dequantizing
GEMMs call them from plain Python helpers inside a kernel, with ``>>`` ``<<`` ``&`` ``|``,
``.astype`` and ``.dtype`` on the expressions.  CPU: the helpers' IR evaluated bit for bit
(numpy, each op at its dtype's width) against torch references over every byte; the
kernels' CuTe DSL and sm_90a cubins; ``T.alloc_buffer`` (a top-level global one is a
workspace); a statement calling the macro a Python call returns.  GPU: a conversion
kernel and a dequantizing GEMM against torch."""

import numpy as np
import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import rebuild, walk_nodes
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower
from tvm import tir, tirx


# ---- helpers written as TileLang programs write them -----------------------------------------
def nibble_to_int8(val: tirx.PrimExpr, pos: tirx.PrimExpr):
    """The signed 4-bit value in nibble ``pos`` of the byte ``val``, as int8."""
    assert val.dtype == T.uint8
    nib = (val >> (pos.astype(T.uint8) * tirx.const(4, T.uint8))) & tirx.const(0xF, T.uint8)
    # to the top of the byte, read as signed, then back down: an arithmetic shift
    return tirx.reinterpret(T.int8, nib << tirx.const(4, T.uint8)) >> tirx.const(4, T.int8)


def e2m1_to_half_bits(val: tirx.PrimExpr, pos: tirx.PrimExpr):
    """fp4 (s1e2m1) in nibble ``pos`` as float16: exponent rebased by 14, zero mapped by
    a Select on the exponent field."""
    nib = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(0xF, T.uint16)
    sign = nib >> tirx.const(3, T.uint16)
    exp = (nib & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)
    man = nib & tirx.const(1, T.uint16)
    bits = (sign << tirx.const(15, T.uint16)) | ((exp + tirx.const(14, T.uint16)) << 10) | (man << 9)
    return tirx.reinterpret(T.float16, bits.astype(T.uint16))


def e2m1_to_bf16_scaled(val, pos, scale):
    """fp4 in nibble ``pos`` as bfloat16, its exponent raised by ``scale`` and clamped to
    8 bits (tirx.Min), through tirx.Cast to 32 bits and back."""
    nib = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(0xF, T.uint16)
    exp = tirx.Cast(T.uint32, (nib & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16))
    exp = tirx.Min(exp + tirx.const(126, T.uint32) + scale, tirx.const(255, T.uint32))
    bits = ((nib >> 3).astype(T.uint32) << 15) | (exp << 7) | ((nib & 1).astype(T.uint32) << 6)
    return tirx.reinterpret(T.bfloat16, tirx.Cast(T.uint16, bits))


# ---- a numpy evaluation of IR expressions, each op at its dtype's width ----------------------
_NP = {"uint8": np.uint8, "int8": np.int8, "uint16": np.uint16, "int16": np.int16,
       "uint32": np.uint32, "int32": np.int32, "float16": np.float16, "bfloat16": np.uint16,
       "float32": np.float32, "bool": np.bool_}
_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "bitand": np.bitwise_and,
        "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "shl": np.left_shift,
        "shr": np.right_shift, "min": np.minimum, "max": np.maximum}


def evaluate(e, env):
    """``e`` over numpy arrays ``env`` (a Var's name -> values); bfloat16 results are their
    bits (uint16)."""
    if isinstance(e, N.Var):
        return env[e.name].astype(_NP[e.dtype])
    if isinstance(e, N.Const):
        return np.array(e.value).astype(_NP[e.dtype])
    if isinstance(e, N.BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        assert a.dtype == b.dtype == _NP[e.dtype], (e.op, a.dtype, b.dtype, e.dtype)
        return _OPS[e.op](a, b).astype(_NP[e.dtype])
    if isinstance(e, N.Cmp):
        return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater,
                "le": np.less_equal, "ge": np.greater_equal}[e.op](
            evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, N.Select):
        return np.where(evaluate(e.cond, env), evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, N.Cast):
        return evaluate(e.value, env).astype(_NP[e.dtype])
    if isinstance(e, N.Call) and e.name == "bitwise_not":  # (at its width, as stored)
        return np.invert(evaluate(e.args[0], env))
    if isinstance(e, N.Call) and e.name == "reinterpret":
        return evaluate(e.args[0], env).view(_NP[e.dtype])
    raise NotImplementedError(type(e).__name__)


BYTES = np.repeat(np.arange(256), 2)
POS = np.tile(np.arange(2), 256)
VAL, P = N.Var("val", "uint8"), N.Var("pos", "int32")


def _nibbles():
    b = torch.arange(256, dtype=torch.int32).repeat_interleave(2)
    return (b >> (4 * torch.arange(2).repeat(256))) & 0xF


def test_nibble_to_int8_is_the_signed_nibble():
    e = nibble_to_int8(VAL, P)
    assert e.dtype == "int8"
    got = torch.from_numpy(evaluate(e, {"val": BYTES, "pos": POS}).astype(np.int32))
    nib = _nibbles()
    assert torch.equal(got, torch.where(nib >= 8, nib - 16, nib))
    # the right shift is of int8 (arithmetic), the left one of uint8 (logical)
    assert isinstance(e, N.BinOp) and e.op == "shr" and e.a.dtype == "int8"
    assert e.a.args[0].op == "shl" and e.a.args[0].dtype == "uint8"


def test_e2m1_to_half_bits_match_torch():
    e = e2m1_to_half_bits(VAL, P)
    assert e.dtype == "float16"
    got = torch.from_numpy(evaluate(e, {"val": BYTES, "pos": POS}))
    nib = _nibbles()
    ref = ((nib >> 3) << 15) | ((((nib >> 1) & 3) + 14) << 10) | ((nib & 1) << 9)
    assert torch.equal(got.view(torch.int16), ref.to(torch.int16))  # int16: the same bits


def test_e2m1_to_bf16_scaled_clamps_the_exponent():
    for scale in (0, 100, 200):
        e = e2m1_to_bf16_scaled(VAL, P, tirx.const(scale, T.uint32))
        assert e.dtype == "bfloat16"
        bits = torch.from_numpy(evaluate(e, {"val": BYTES, "pos": POS}).astype(np.int32))
        nib = _nibbles()
        exp = torch.clamp(((nib >> 1) & 3) + 126 + scale, max=255)
        ref = ((nib >> 3) << 15) | (exp << 7) | ((nib & 1) << 6)
        assert torch.equal(bits, ref), scale
    # scale 0: the fp4 values themselves (exponent bias 1 -> 127; zero exponent as normal)
    e = e2m1_to_bf16_scaled(VAL, P, 0)
    bits = torch.from_numpy(evaluate(e, {"val": BYTES, "pos": POS}).astype(np.int32))
    values = bits.to(torch.int16).view(torch.bfloat16).float()
    assert values[2 * 0x35].item() == 3.0 and values[2 * 0x35 + 1].item() == 1.5  # e2m1 0101, 0011


def test_select_on_a_bool_expression():
    x = N.Var("x", "uint16")
    e = tirx.Select(N.cmp("gt", x, 3), tirx.const(0, T.float16),
                    tirx.reinterpret(T.float16, x))
    got = evaluate(e, {"x": np.arange(8)})
    assert list(got[:4].view(np.uint16)) == [0, 1, 2, 3] and list(got[4:]) == [0.0] * 4


def radix_key(x):
    """A top-k selector's bucket of a float: its float16 bits made order-preserving (all
    flipped when negative, the sign set when not), top 8 bits; TVM builds ``x < 0`` and
    ``~bits`` on the expressions."""
    bits = tirx.reinterpret(T.uint16, x.astype(T.float16))
    bits = T.if_then_else(x < 0, ~bits & 0xFFFF, bits | 0x8000)
    return bits >> 8


def test_ordering_comparisons_and_invert_build_ir_in_helpers():
    """``x < 0``, ``0 > x``, ``<=``/``>=`` and ``~`` on a helper's expressions are TVM's
    ``LT`` ... and ``bitwise_not`` (they were a TypeError: tilecute's expressions had no
    ordering operators nor ``~``)."""
    x = N.Var("x", "float32")
    assert (x < 0) == N.Cmp("lt", x, N.Const(0.0, "float32"))
    assert (0 > x) == N.Cmp("lt", x, N.Const(0.0, "float32"))  # Python reflects it
    assert (x <= 1.5).op == "le" and (x >= 1.5).op == "ge" and (2 < x).op == "gt"
    u, i, b = N.Var("u", "uint16"), N.Var("i", "int32"), N.Var("b", "bool")
    # (a 16-bit unsigned ~ is the bitwise_not Call: C computes it in int, tests/test_narrow_int_promotion.py)
    assert ~u == N.Call("bitwise_not", (u,), "uint16")
    assert ~i == N.BinOp("bitxor", i, N.Const(-1, "int32"), "int32")
    assert ~b == N.Not(b)
    with pytest.raises(TypeError, match="~ on float32"):
        ~x
    values = np.array([-3.5, -1.0, -0.25, -0.0, 0.0, 0.125, 1.0, 2.0, 65504.0], np.float32)
    keys = evaluate(radix_key(x), {"x": values}).astype(np.int64)
    h = torch.from_numpy(values).half().view(torch.int16).int() & 0xFFFF
    want = torch.where(torch.from_numpy(values) < 0, ~h & 0xFFFF, h | 0x8000) >> 8
    assert keys.tolist() == want.tolist() and keys.tolist() == sorted(keys.tolist())


# ---- the module: served names, refused ones ---------------------------------------------------
def test_tirx_serves_the_expression_builders_and_refuses_the_rest():
    import tvm

    assert tvm.tirx.PrimExpr is N.Expr and tir.PrimExpr is N.Expr
    assert tirx.const(15, T.uint8) == N.Const(15, "uint8")
    assert tirx.const(3) == N.Const(3, "int32") and tirx.const(0.5).dtype == "float32"
    assert tir.Cast(T.float32, tirx.const(2, T.int8)) == N.Const(2.0, "float32")
    assert N.Var("v", "uint8").dtype == T.uint8
    assert N.Var("v", "int32").astype(T.uint8) == N.Cast("uint8", N.Var("v", "int32"))
    with pytest.raises(ValueError, match="outside uint8's range"):
        tirx.const(256, T.uint8)
    with pytest.raises(ValueError, match="outside int8's range"):
        tirx.const(-129, "int8")
    with pytest.raises(TypeError, match="mismatched types uint16 and uint32"):
        tirx.Min(N.Var("a", "uint16"), N.Var("b", "uint32"))
    with pytest.raises(TypeError, match="Python bool"):
        tirx.Select(N.Var("a", "uint16") == tirx.const(0, T.uint16), 1, 2)
    with pytest.raises(TypeError, match="widths must agree"):
        tirx.reinterpret(T.float16, tirx.const(1, T.uint8))
    with pytest.raises(NotImplementedError, match=r"tvm.tirx.IndexMap is not supported.*"
                                                  r"serves only const, reinterpret"):
        tirx.IndexMap(None)
    from tvm.tir import bijective_layout  # a TVM name imports; using it is the error

    with pytest.raises(NotImplementedError, match="tvm.tir.bijective_layout"):
        bijective_layout()
    with pytest.raises(TypeError, match=r"<< >> on expressions take integers"):
        N.Var("f", "float32") >> 1


def test_tvm_testing_serves_requires_package_only():
    import tvm.testing

    def check():
        return 1

    (mark,) = tvm.testing.requires_package("no_such_package_tilecute")(check).pytestmark
    assert mark.name == "skipif" and mark.args == (True,)
    assert "needs the package(s) no_such_package_tilecute" in mark.kwargs["reason"]

    def check_torch():
        return 1

    (mark,) = tvm.testing.requires_package("torch")(check_torch).pytestmark
    assert mark.args == (False,)
    with pytest.raises(NotImplementedError, match="tvm.testing.parameter is not supported"):
        tvm.testing.parameter(1, 2)


# ---- kernels ---------------------------------------------------------------------------------
def convert_int4(n, k, block_n=64, block_k=64):
    @T.prim_func
    def convert(B: T.Tensor((n, k // 2), T.uint8), C: T.Tensor((n, k), T.int8)):
        with T.Kernel(T.ceildiv(n, block_n), threads=128) as bx:
            B_local = T.alloc_fragment((block_n, block_k // 2), T.uint8)
            C_local = T.alloc_fragment((block_n, block_k), T.int8)
            for ko in T.serial(k // block_k):
                T.copy(B[bx * block_n, ko * block_k // 2], B_local)
                for i, j in T.Parallel(block_n, block_k):
                    C_local[i, j] = nibble_to_int8(B_local[i, j // 2], j % 2)
                T.copy(C_local, C[bx * block_n, ko * block_k])

    return convert


def dequant_gemm(m, n, k, block=64, block_k=64):
    """C = A @ dequant(B)^T, B's fp4 nibbles dequantized to float16 in shared memory by a
    macro a Python call returns, with a T.alloc_buffer'd fragment."""

    def dequantizer():
        @T.macro
        def dequant(B_shared, B_deq):
            B_frag = T.alloc_buffer((block, block_k), T.float16, scope="local.fragment")
            for i, j in T.Parallel(block, block_k):
                B_frag[i, j] = e2m1_to_half_bits(B_shared[i, j // 2], j % 2)
            T.copy(B_frag, B_deq)

        return dequant

    @T.prim_func
    def gemm(A: T.Tensor((m, k), T.float16), B: T.Tensor((n, k // 2), T.uint8),
             C: T.Tensor((m, n), T.float32)):
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), T.float16)
            B_shared = T.alloc_buffer((block, block_k // 2), T.uint8, scope="shared.dyn")
            B_deq = T.alloc_shared((block, block_k), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(k // block_k, num_stages=2):
                T.copy(A[by * block, ko * block_k], A_shared)
                T.copy(B[bx * block, ko * block_k // 2], B_shared)
                dequantizer()(B_shared, B_deq)
                T.gemm(A_shared, B_deq, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return gemm


def test_conversion_kernel_emits_typed_shifts_and_builds(tmp_path):
    func = convert_int4(128, 128)
    source = emit_cute(lower(func, "sm_90a"))
    # the uint8 shifts run in int (C's promotions: the nibble's << 4 on the widened value,
    # stored back as uint8), the int8 one typed
    assert ") << 4)" in source and "cutlass.Int8(4)" in source, source
    assert "tcmath.reinterpret(" in source and "cutlass.Int8)" in source, source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_dequant_gemm_builds(tmp_path):
    func = dequant_gemm(128, 128, 128)
    assert "T.alloc_buffer" not in func.script()  # the scopes' own allocations
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def e2m1_exact_to_bf16(val, pos):
    """fp4 e2m1 in nibble ``pos`` as bfloat16 with its subnormals: exponent 0 is 0 or 0.5,
    chosen with ``e == 0`` / ``man != 0`` in T.if_then_else and tirx.Select, which TVM
    builds as EqualOp / NotEqualOp; a Python ``if`` on ``==`` stays structural."""
    nib = (val >> (pos * 4)) & T.uint8(0xF)
    sign, e, man = (T.cast(x, T.uint16) for x in (nib >> 3, (nib >> 1) & T.uint8(3), nib & T.uint8(1)))
    normal = (sign << 15) | ((e + 126) << 7) | (man << 6)
    half = tirx.Select(man != 0, T.uint16(126 << 7), T.uint16(0))
    assert not (e == man) and (e == e)  # bool() of an EqualOp: structural
    return T.reinterpret(T.if_then_else(e == 0, (sign << 15) | half, normal), T.bfloat16)


def convert_e2m1(n):
    @T.prim_func
    def to_bf16(B: T.Tensor((n,), T.uint8), C: T.Tensor((n, 2), T.bfloat16)):
        with T.Kernel(1, threads=128):
            for i, p in T.Parallel(n, 2):
                C[i, p] = e2m1_exact_to_bf16(B[i], p)

    return to_bf16


def _e2m1_values():
    nib = _nibbles()
    mag = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])[nib & 7]
    return torch.where(nib >= 8, -mag, mag)


def test_equality_in_a_helper_builds_a_condition():
    """`e == 0` and `man != 0` in a helper a kernel calls are conditions (TVM's EqualOp /
    NotEqualOp), not Python's structural comparison: the subnormal e2m1 values were
    silently the normal formula's (T.if_then_else folded the Python False)."""
    func = convert_e2m1(256)
    (e,) = [n for n in walk_nodes(func.kernels) if isinstance(n, N.Call) and n.name == "reinterpret"]
    assert any(isinstance(n, N.Cmp) and n.op == "eq" for n in walk_nodes(e))
    assert any(isinstance(n, N.Cmp) and n.op == "ne" for n in walk_nodes(e))
    e = rebuild(e, lambda n: N.Var("val", "uint8") if isinstance(n, N.Load) else None)
    (p,) = {n.name for n in walk_nodes(e) if isinstance(n, N.Var)} - {"val"}  # the loop's p
    bits = torch.from_numpy(evaluate(e, {"val": BYTES, p: POS}).astype(np.int32))
    got = bits.to(torch.int16).view(torch.bfloat16).float()
    assert torch.equal(got, _e2m1_values())
    # outside a kernel's helper call == stays structural (the passes rely on it)
    x = N.Var("x", "int32")
    assert (x == N.Var("x", "int32")) is True and (x == 0) is False and (x != 0) is True


# ---- T.alloc_buffer ----------------------------------------------------------------------------
def test_top_level_global_alloc_buffer_is_a_workspace():
    @T.prim_func
    def split_sum(A: T.Tensor((4, 256), T.float32), C: T.Tensor((256,), T.float32)):
        part = T.alloc_buffer([4, 256], T.float32)  # TVM's default scope: "global"
        with T.Kernel(4, threads=128) as bz:
            for i in T.Parallel(256):
                part[bz, i] = A[bz, i] * 2.0
        with T.Kernel(1, threads=128):
            for i in T.Parallel(256):
                C[i] = part[0, i] + part[1, i] + part[2, i] + part[3, i]

    (ws,) = split_sum.workspaces
    b = split_sum.buffer(ws)
    assert (b.dtype, b.shape, b.scope) == ("float32", (N.Const(4, "int32"), N.Const(256, "int32")),
                                           "global")
    assert len(split_sum.kernels) == 2


@pytest.mark.parametrize("extra, arg", [("strides=[256, 1]", "strides"), ("align=64", "align"),
                                        ("scope='local.descriptor.wgmma'", "scope")])
def test_alloc_buffer_refuses_tvm_buffer_details(extra, arg):
    src = f"""
@T.prim_func
def f(A: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64):
        s = T.alloc_buffer((64,), T.float32, {extra})
        T.copy(A, s)
"""
    with pytest.raises(FrontendError, match=rf"T.alloc_buffer: 's': {arg}="):
        T.from_script(src)


# ---- GPU ---------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_conversion_matches_torch():
    n, k = 128, 256
    kernel = tilecute.compile(convert_int4(n, k), out_idx=[1])
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    lo, hi = (b & 0xF).to(torch.int8), (b >> 4).to(torch.int8)
    ref = torch.stack((lo, hi), dim=-1).reshape(n, k)
    ref = torch.where(ref >= 8, ref - 16, ref)
    assert torch.equal(kernel(b), ref)


@pytest.mark.gpu
def test_gpu_dequant_gemm_matches_torch():
    m, n, k = 128, 192, 256
    kernel = tilecute.compile(dequant_gemm(m, n, k), out_idx=[2])
    a = torch.randn(m, k, dtype=torch.float16, device="cuda")
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    nib = torch.stack((b & 0xF, b >> 4), dim=-1).reshape(n, k).to(torch.int32)
    bits = ((nib >> 3) << 15) | ((((nib >> 1) & 3) + 14) << 10) | ((nib & 1) << 9)
    w = bits.to(torch.int16).view(torch.float16)
    torch.testing.assert_close(kernel(a, b), a.float() @ w.float().T, rtol=1e-2, atol=1e-2)
