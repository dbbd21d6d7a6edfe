"""Elementwise T.max / T.min / T.clamp on float8 values (TileLang's fp8 operand idiom): CuTe
DSL has no fp8 max/min, so they compute in float32 (exact: fp8 values are float32 values)
and round back; each builds an sm_90a cubin on the CPU and (-m gpu) matches torch."""

import textwrap

import pytest

import tilecute
import tilecute.language as T

OPS = {"max": "T.max(A[i], B[i])", "min": "T.min(A[i], B[i])",
       "clamp": 'T.clamp(A[i], T.cast(-1.0, "{dt}"), T.cast(1.0, "{dt}"))'}


def program(op: str, dt: str):
    return T.from_script(textwrap.dedent(f"""\
        import tilecute.language as T

        @T.prim_func
        def fp8_op(A: T.Tensor((512,), "{dt}"), B: T.Tensor((512,), "{dt}"),
                   C: T.Tensor((512,), "{dt}")):
            with T.Kernel(4, threads=128) as bx:
                for j in T.Parallel(128):
                    i = bx * 128 + j
                    C[i] = {OPS[op].format(dt=dt)}
        """))


@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_fp8_min_max_clamp_build(op, dt, tmp_path):
    func = program(op, dt)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names == \
        ["tilecute_fp8_op_0"]
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "cutlass.Float32(" in src  # computed in float32


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_fp8_min_max_clamp_match_torch(op, dt):
    import torch

    kernel = tilecute.compile(program(op, dt))
    tdt = getattr(torch, "float8_e4m3fn" if dt == "float8_e4m3" else dt)
    a = torch.randint(-4, 5, (512,), device="cuda").float()
    b = torch.randint(-4, 5, (512,), device="cuda").float()
    c = torch.empty(512, device="cuda", dtype=tdt)
    kernel(a.to(tdt), b.to(tdt), c)
    ref = {"max": torch.maximum(a, b), "min": torch.minimum(a, b), "clamp": a.clamp(-1, 1)}[op]
    torch.testing.assert_close(c.float(), ref, atol=0, rtol=0)


def _gemm_fp8(dt: str):
    return T.from_script(textwrap.dedent(f"""\
        import tilecute.language as T

        @T.prim_func
        def fp8_gemm(A: T.Tensor((64, 64), "{dt}"), B: T.Tensor((64, 64), "{dt}"),
                     C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 64), "{dt}")
                B_s = T.alloc_shared((64, 64), "{dt}")
                acc = T.alloc_fragment((64, 64), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
                T.copy(acc, C)
        """))


@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
def test_fp8_conversions_below_sm89_are_refused_by_statement(dt, tmp_path):
    """Below sm_89 CuTe DSL has no conversion of float8 values (libNVVM failed with
    "unsupported operation" and no line): the cast and the T.gemm are refused by name and
    line; sm_89 builds both."""
    with pytest.raises(Exception, match=rf"<script>:9: prim_func 'fp8_op': T.max on {dt} "
                                        r"values: float8 values convert only on sm_89\+ "
                                        r".*the target is sm_80"):
        tilecute.build_cubin(program("max", dt), "sm_80", out_dir=str(tmp_path / "a"))
    with pytest.raises(Exception, match=rf"<script>:12: prim_func 'fp8_gemm': T.gemm on {dt} "
                                        r"operands: float8 values convert only on sm_89\+"):
        tilecute.build_cubin(_gemm_fp8(dt), "sm_80", out_dir=str(tmp_path / "b"))
    for i, f in enumerate((program("max", dt), _gemm_fp8(dt))):
        assert tilecute.build_cubin(f, "sm_89", out_dir=str(tmp_path / f"c{i}")).kernel_names


def _int_fp8_casts(dt: str, it: str):
    """Integers and bools to fp8 and back (CUDA's __nv_fp8_e4m3(int) / (int)x: through float)."""
    return T.from_script(textwrap.dedent(f"""\
        import tilecute.language as T

        @T.prim_func
        def int_fp8(A: T.Tensor((512,), "{it}"), Q: T.Tensor((512,), T.int4),
                    B: T.Tensor((512,), "{dt}"), C: T.Tensor((512,), "int32"),
                    D: T.Tensor((512,), "{dt}"), E: T.Tensor((512,), "uint8"),
                    F: T.Tensor((512,), "bool"), G: T.Tensor((512,), "{dt}")):
            with T.Kernel(4, threads=128) as bx:
                for j in T.Parallel(128):
                    i = bx * 128 + j
                    B[i] = T.cast(A[i], "{dt}")
                    C[i] = T.cast(B[i], "int32")
                    D[i] = T.cast(Q[i], "{dt}")
                    E[i] = T.cast(T.abs(B[i]), "uint8")
                    F[i] = T.cast(B[i], "bool")
                    G[i] = T.cast(A[i] > 0, "{dt}")
        """))


@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("it", ["int32", "int8", "uint16"])
def test_integer_fp8_casts_build(dt, it, tmp_path):
    """CuTe DSL's Float8E4M3FN(Float32(i)) folds into an sitofp to the 8-bit float, which
    LLVM refuses, and Int32(fp8) has no lowering: both now pass through float32."""
    func = _int_fp8_casts(dt, it)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    src = (tmp_path / "kernel_cute.py").read_text()
    assert src.count("tcmath.fp8_from_int(") == 3
    assert "cutlass.Int32(cutlass.Float32(" in src and "cutlass.Uint8(cutlass.Float32(" in src
    assert "cutlass.Boolean(cutlass.Float32(" in src


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
def test_integer_fp8_casts_match_torch(dt):
    import torch
    tdt = getattr(torch, {"float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}[dt])
    A = torch.randint(-300, 300, (512,), dtype=torch.int32, device="cuda")
    q = torch.randint(-8, 8, (512,), device="cuda")
    Q = ((q[::2] & 0xF) | ((q[1::2] & 0xF) << 4)).to(torch.int8)
    B = torch.empty(512, dtype=tdt, device="cuda")
    C = torch.empty(512, dtype=torch.int32, device="cuda")
    D = torch.empty(512, dtype=tdt, device="cuda")
    E = torch.empty(512, dtype=torch.uint8, device="cuda")
    F = torch.empty(512, dtype=torch.bool, device="cuda")
    G = torch.empty(512, dtype=tdt, device="cuda")
    tilecute.compile(_int_fp8_casts(dt, "int32"))(A, Q, B, C, D, E, F, G)
    ref = A.float().to(tdt)
    assert torch.equal(B.view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(C, ref.float().to(torch.int32))
    assert torch.equal(D.float(), q.float())
    assert torch.equal(E, ref.float().abs().to(torch.uint8))
    assert torch.equal(F, ref.float() != 0)
    assert torch.equal(G.float(), (A > 0).float())
