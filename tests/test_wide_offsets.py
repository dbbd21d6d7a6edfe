"""Element offsets past 2**31.  A global tensor whose static shape has offsets past int32
is laid out with 64-bit strides and indexed with 64-bit offsets (coordinates stay 32-bit:
each extent is below 2**31); so is every tensor whose symbolic shape could pass int32 under
the option ``wide_offsets``.  Without it such a tensor keeps 32-bit offsets (64-bit ones
cost up to 1.8x on memory-bound kernels) and the launcher refuses one whose largest offset
passes int32, naming the option.  CPU: which tensors, the generated layouts, 64-bit
arithmetic in the PTX, the launcher's refusal; GPU: a tensor of more than 2**31 elements
read and written at its far end."""

import glob
import importlib.util
import os
import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.transform.analysis import may_pass_int32
from tilecute.transform.pipeline import lower


def _buf(shape, dtype="float16"):
    dims = tuple(N.Const(d, "int32") if isinstance(d, int) else N.Var(d) for d in shape)
    return N.Buffer("A", dtype, dims)


@pytest.mark.parametrize("shape,wide", [
    (("N",), False),              # one symbol: fewer than 2**31 elements
    ((1024, 1024), False),
    ((65536, 32768), False),      # 2**31 elements: the last offset is 2**31 - 1
    ((65536, 65536), True),       # a 32-bit shift would wrap
    (("M", 64), True),            # M * 64 may pass 2**31
    (("M", "N"), True),
])
def test_which_tensors_may_pass_int32(shape, wide):
    assert may_pass_int32(_buf(shape)) == wide


def add_one(M, N, block=(32, 256)):
    bm, bn = block

    @T.prim_func
    def add_one(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + T.float16(1)
    return add_one


def _ptx(func, tmp_path, monkeypatch):
    import cutlass.cute as cute

    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    src = tmp_path / "kernel_cute.py"
    src.write_text(emit_cute(lower(func, "sm_90a")))
    spec = importlib.util.spec_from_file_location("wide_kernel", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dump = tmp_path / "dump"
    dump.mkdir()
    compiled = cute.compile(getattr(mod, func.name), *mod.placeholder_args(),
                            options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {dump}")
    return compiled.__ptx__


def test_static_tensor_past_int32_uses_64_bit_offsets(tmp_path, monkeypatch):
    func = add_one(65536, 65536)
    src = emit_cute(lower(func, "sm_90a"))
    assert "stride=(cutlass.Int64(65536), 1,)" in src
    assert "cutlass.Int64(by * 32 + i) * 65536" in src  # the vector accesses' offsets
    ptx = _ptx(func, tmp_path, monkeypatch)
    assert re.search(r"mul\.wide\.[su]32|mad\.wide\.[su]32|mul\.lo\.s64|shl\.b64", ptx)


def test_small_static_tensor_keeps_32_bit_offsets():
    src = emit_cute(lower(add_one(1024, 1024), "sm_90a"))
    assert "Int64" not in src


def test_symbolic_2d_tensor_keeps_32_bit_offsets_and_the_launcher_checks():
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    plan = lower(add_one(M, N), "sm_90a")
    assert "Int64" not in emit_cute(plan)
    assert all(a.offsets_int32 for a in plan.abi.args)


def test_wide_offsets_option_makes_symbolic_tensors_64_bit(tmp_path):
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    func = add_one(M, N)
    plan = lower(func, "sm_90a", {"wide_offsets": True})
    assert plan.func.wide_tensors == ("A", "B")
    assert "stride=(cutlass.Int64(N), 1,)" in emit_cute(plan)
    assert not any(a.offsets_int32 for a in plan.abi.args)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path),
                                options={"wide_offsets": True}).kernel_names


def test_launcher_refuses_a_tensor_past_int32_without_the_option(cache_dir):
    from fake_cuda import FakeTensor

    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    kernel = tilecute.compile(add_one(M, N))
    big = FakeTensor((65536 + 64, 32768), "float16", device="cpu")
    small = FakeTensor((64, 32768), "float16", device="cpu")
    with pytest.raises(ValueError, match=r"add_one: argument 'A': its largest element offset is "
                                         r"2149580799, past int32.*wide_offsets"):
        kernel(big, big)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):  # passes the new check
        kernel(small, small)


@pytest.mark.gpu
def test_tensor_past_2_31_elements_on_gpu():
    import torch

    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    kernel = tilecute.compile(add_one(M, N), options={"wide_offsets": True})
    rows, cols = 65536 + 64, 32768  # 2**31 + 2**21 elements, 4 GiB of fp16 each
    a = torch.empty(rows, cols, device="cuda", dtype=torch.float16)
    a[:64].fill_(1.0)
    a[-64:].copy_(torch.arange(64 * cols, device="cuda").reshape(64, cols).remainder(1000).half())
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.testing.assert_close(b[-64:], a[-64:] + 1)  # past 2**31: was read and written out of bounds
    torch.testing.assert_close(b[:64], a[:64] + 1)
