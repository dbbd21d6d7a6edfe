"""Element offsets past 2**31: a global tensor whose offsets may pass int32 (statically,
or because its shape multiplies symbols) is laid out with 64-bit strides and indexed with
64-bit offsets; coordinates stay 32-bit (each extent is below 2**31).  CPU: which tensors,
the generated layouts, and 64-bit address arithmetic in the PTX; GPU: a tensor of more
than 2**31 elements read and written at its far end."""

import glob
import importlib.util
import os
import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.transform.analysis import wide_offsets
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
def test_which_tensors_need_64_bit_offsets(shape, wide):
    assert wide_offsets(_buf(shape)) == wide


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


def test_symbolic_2d_tensor_builds(tmp_path):
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    func = add_one(M, N)
    assert "cutlass.Int64(N)" in emit_cute(lower(func, "sm_90a"))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_tensor_past_2_31_elements_on_gpu():
    import torch

    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)
    kernel = tilecute.compile(add_one(M, N))
    rows, cols = 65536 + 64, 32768  # 2**31 + 2**21 elements, 4 GiB of fp16 each
    a = torch.empty(rows, cols, device="cuda", dtype=torch.float16)
    a[:64].fill_(1.0)
    a[-64:].copy_(torch.arange(64 * cols, device="cuda").reshape(64, cols).remainder(1000).half())
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.testing.assert_close(b[-64:], a[-64:] + 1)  # past 2**31: was read and written out of bounds
    torch.testing.assert_close(b[:64], a[:64] + 1)
