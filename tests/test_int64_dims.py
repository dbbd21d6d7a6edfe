"""int64 shapes and indices, as TileLang has them: ``T.dynamic("n", "int64")`` (also
``T.symbolic``) and static extents past int32 are int64 dims; a grid extent over them binds
an int64 block index, ``T.serial`` over an int64 count an int64 loop variable, and index
arithmetic that an int64 value enters is int64 (TVM's promotion), computed in 64 bits in
the generated code (``cutlass.Int64``).  Tensors with an int64 dim index with 64-bit offsets
and strides; TMA (32-bit coordinates) is not used for them.  The launcher binds an int64
symbol without the int32 check and passes it as an 8-byte parameter, and names the grid
dim past CUDA's limit.

CPU: the IR, the generated code and its PTX, sm_90a and sm_80 cubins of 1-D and 2-D
programs (elementwise, a reduction, a tiled copy, T.fill, a serial loop), the launcher's
checks and its parameters against the fake driver.  GPU: the same programs against torch,
three of them over more than 2**31 elements."""

import json
import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.transform.pipeline import lower


# ---- the programs (TileLang's idioms) --------------------------------------------------------------
def fill(n, value=1.0, dtype=T.bfloat16, block_n=512):
    @T.prim_func
    def fill(x: T.Tensor[n, dtype]):
        with T.Kernel(T.ceildiv(n, block_n), threads=128) as bx:
            for i in T.Parallel(block_n):
                x[bx * block_n + i] = value
    return fill


def add2d(M, N, block_M=64, block_N=128, dtype=T.float16):
    @T.prim_func
    def add2d(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
              C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = \
                    A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]
    return add2d


def row_sum(M, N, block_M=64, dtype=T.float32):
    @T.prim_func
    def row_sum(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            a = T.alloc_fragment((block_M, N), dtype)
            s = T.alloc_fragment((block_M,), dtype)
            T.copy(A[bx * block_M, 0], a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S[bx * block_M])
    return row_sum


def tiled_copy(M, N, block_M=64, block_N=64, dtype=T.float16):
    @T.prim_func
    def tiled_copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            s = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], s)
            T.copy(s, B[by * block_M, bx * block_N])
    return tiled_copy


def fill_region(n, block_n=512, dtype=T.float32):
    @T.prim_func
    def fill_region(x: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block_n), threads=128) as bx:
            T.fill(x[bx * block_n:(bx + 1) * block_n], 2.0)
    return fill_region


def strided_sum(n, step=1 << 28, dtype=T.float32):
    """out[0] = x[0] + x[step] + x[2 * step] + ...: k * step passes int32 for n > 2**31."""
    @T.prim_func
    def strided_sum(x: T.Tensor((n,), dtype), out: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=32) as _:
            acc = T.alloc_var(dtype)
            acc = 0.0
            for k in T.serial(T.ceildiv(n, step)):
                acc += x[k * step]
            out[0] = acc
    return strided_sum


def matmul(M, N, K, bm=128, bn=128, bk=32, swizzle=False, dtype=T.float16):
    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared((bk, bn), dtype)
            Cl = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(8, enable=swizzle)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bm, bx * bn])
    return matmul


def n64(name="n"):
    return T.dynamic(name, "int64")


# ---- frontend and IR ------------------------------------------------------------------------------
def test_int64_symbol_and_static_dims_are_int64():
    f = fill(n64())
    (x,) = f.params
    assert x.shape == (N.Var("n", "int64"),) and f.symbols == (N.Var("n", "int64"),)
    assert 'n = T.symbolic("n", "int64")' in f.script()
    k = f.kernels[0]
    assert k.grid[0].dtype == "int64" and k.block_vars[0].dtype == "int64"
    static = fill(2 ** 32)
    assert static.params[0].shape == (N.Const(2 ** 32, "int64"),)
    # T.ceildiv(2**32, 512) is TVM's int64 constant: the block index is int64 too
    assert static.kernels[0].grid == (N.Const(2 ** 23, "int64"),)
    assert static.kernels[0].block_vars[0].dtype == "int64"


def test_int32_programs_keep_int32():
    f = fill(T.dynamic("n"))
    assert f.symbols[0].dtype == "int32" and f.kernels[0].block_vars[0].dtype == "int32"
    assert "Int64" not in emit_cute(lower(f, "sm_90a"))


def test_index_arithmetic_follows_tvm_promotion():
    store = fill(n64()).kernels[0].body[0].body[0]  # x[bx * 512 + i] = 1.0
    (index,) = store.indices
    assert index.dtype == "int64"
    assert index == N.binop("add", N.binop("mul", N.Var(index.a.a.name, "int64"), 512),
                            N.Cast("int64", index.b.value))
    i = N.Var("i")
    assert N.binop("add", i, 2 ** 32).dtype == "int64"  # a literal past int32 is int64
    assert N.binop("add", i, 7).dtype == "int32"
    assert N.binop("mul", N.Var("m", "int64"), i).dtype == "int64"


@pytest.mark.parametrize("make,args", [
    (fill, (n64(),)), (fill, (2 ** 32,)), (add2d, (n64("M"), 4096)), (add2d, (4, 2 ** 31)),
    (row_sum, (n64("M"), 256)), (tiled_copy, (n64("M"), 4096)), (fill_region, (n64(),)),
    (strided_sum, (n64(),)), (matmul, (n64("M"), 1024, n64("K"))),
])
def test_printed_and_json_forms_round_trip(make, args):
    from tilecute.ir.serialize import from_json, to_json

    f = make(*args)
    assert T.from_script(f.script()) == f
    assert from_json(to_json(f)) == f


def test_dim_expression_with_an_int64_symbol_is_int64():
    n, m = n64(), T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((n * m,), T.float32), B: T.Tensor((n, m), T.float32)):
        with T.Kernel(1, threads=32) as _:
            A[0] = B[0, 0]

    (d,) = k.params[0].shape
    assert d.dtype == "int64" and d == N.BinOp("mul", n, N.Cast("int64", m), "int64")
    plan = lower(k, "sm_90a")
    assert plan.abi.args[0].shape == (("mul", "n", "m"),)


def test_refusals():
    with pytest.raises(Exception, match=r"'x': dimension 9223372036854775808 does not fit int64"):
        fill(2 ** 63)
    with pytest.raises(Exception, match=r"symbolic dimension n is int16; dims are int32 or int64"):
        fill(T.dynamic("n", "int16"))
    n = n64()
    with pytest.raises(Exception, match=r"T.Parallel: an int64 extent \(n\) is not supported"):
        @T.prim_func
        def par(x: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(n):
                    x[i] = 0.0


# ---- generated code -------------------------------------------------------------------------------
def test_generated_code_computes_indices_in_64_bits():
    src = emit_cute(lower(fill(n64()), "sm_90a"))
    assert "def tilecute_fill_0(x_ptr: cute.Pointer, n: cutlass.Int64):" in src
    assert "bx = cutlass.Int64(bx)" in src
    # vectorized: 512 over 128 threads, 4 lanes each (TileLang's partition)
    assert "cute.assume(bx * cutlass.Int64(512) + cutlass.Int64(i), divby=4)" in src
    src = emit_cute(lower(add2d(n64("M"), 4096), "sm_90a"))
    assert "stride=(cutlass.Int64(4096), 1,)" in src
    assert "(by * cutlass.Int64(64) + cutlass.Int64(i)) * 4096 + bx * 128 + j" in src
    # a static dim past int32 (the 2**31 columns of a (4, 2**31) tensor)
    src = emit_cute(lower(add2d(4, 2 ** 31), "sm_90a"))
    assert "cute.make_layout((4, cutlass.Int64(2147483648),), stride=(cutlass.Int64(2147483648), 1,))" in src


def test_ptx_addresses_in_64_bits(tmp_path, monkeypatch):
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(fill(n64()), "sm_90a")))
    module = import_source(str(path), "tilecute_test_int64_fill")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptx = cute.compile(module.fill, *module.placeholder_args(),
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    body = ptx[ptx.index(".entry tilecute_fill_0"):]
    assert ".param .u64 tilecute_fill_0_param_1" in body  # n
    assert re.search(r"mul\.wide\.u32\s+%rd\d+, %r\d+, 512", body)  # bx * 512 in 64 bits
    assert re.search(r"setp\.\w+\.s64", body)  # compared with n in 64 bits
    assert "st.global.v2.b32" in body  # the 4-wide vector store stays


CUBIN_PROGRAMS = {
    "fill_symbolic": lambda: fill(n64()),
    "fill_static": lambda: fill(2 ** 32),
    "add2d_symbolic": lambda: add2d(n64("M"), 4096),
    "add2d_static": lambda: add2d(4, 2 ** 31),
    "row_sum": lambda: row_sum(n64("M"), 256),
    "tiled_copy": lambda: tiled_copy(n64("M"), 4096),
    "fill_region": lambda: fill_region(n64()),
    "strided_sum": lambda: strided_sum(n64()),
    # int64 M and K: the rasterize pass's panel walk over an int64 grid, an int64 pipelined
    # loop, cp.async instead of TMA
    "matmul": lambda: matmul(n64("M"), 1024, n64("K")),
    "matmul_use_swizzle": lambda: matmul(n64("M"), 1024, 512, swizzle=True),
}


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(CUBIN_PROGRAMS))
def test_cubins_build_and_match_the_abi(name, arch, tmp_path):
    func = CUBIN_PROGRAMS[name]()
    info = tilecute.build_cubin(func, arch, out_dir=str(tmp_path))  # checks the ABI against it
    plan = lower(func, arch)
    (k,) = plan.abi.kernels
    (kernel,) = info.kernels.values()
    for p, (param, cubin) in enumerate(zip(k.params, kernel.params)):
        if p and param.from_symbol:
            assert param.dtype == "int64" and cubin.size == 8
    int64_tensors = {p.name for p in func.params if isinstance(p, N.Buffer)
                     and any(d.dtype == "int64" for d in p.shape)}
    assert not {p.source for p in k.params if p.kind == "tma_desc"} & int64_tensors


def test_tma_is_not_used_for_int64_tensors():
    plan = lower(tiled_copy(n64("M"), 4096), "sm_90a")
    assert not plan.abi.kernels[0].params[-1].kind == "tma_desc"
    assert "tcc.copy_async" in emit_cute(plan)  # cp.async instead
    small = lower(tiled_copy(T.dynamic("M"), 4096), "sm_90a")  # an int32 M keeps TMA
    assert [p.kind for p in small.abi.kernels[0].params][-2:] == ["tma_desc", "tma_desc"]


@pytest.mark.parametrize("copy", ["T.copy(A[by * 64, 0], s, prefer_instruction='tma')",
                                  "T.tma_copy(A[by * 64, 0], s, barrier=bar[0])"])
def test_tma_forms_on_int64_tensors_are_refused(copy):
    text = f'''
import tilecute.language as T
M = T.dynamic("M", "int64")

@T.prim_func
def k(A: T.Tensor((M, 64), T.float16), B: T.Tensor((M, 64), T.float16)):
    with T.Kernel(T.ceildiv(M, 64), threads=128) as by:
        s = T.alloc_shared((64, 64), T.float16)
        bar = T.alloc_barrier([128])
        {copy}
        T.copy(s, B[by * 64, 0])
'''
    with pytest.raises(Exception, match=r"'A' has an int64 dim \(shape\[0\]\); TMA coordinates "
                                        r"are 32-bit signed"):
        lower(T.from_script(text), "sm_90a")


def test_abi_records_int64_symbols_and_64_bit_tensors():
    from tilecute.runtime.abi import LaunchABI

    abi = lower(add2d(n64("M"), 4096), "sm_90a").abi
    (m,) = abi.symbols
    assert m.dtype == "int64"
    assert all(a.offsets_int64 and not a.offsets_int32 for a in abi.args)
    back = LaunchABI.from_json(abi.to_json())
    assert back == abi and json.loads(abi.to_json())["symbols"][0]["dtype"] == "int64"
    old = lower(add2d(T.dynamic("M"), 4096), "sm_90a").abi.to_dict()
    assert "dtype" not in old["symbols"][0] and "offsets_int64" not in old["args"][0]


# ---- the launcher's checks (CPU tensors reach every value check) -------------------------------------
def test_launcher_binds_int64_symbols(cache_dir):
    from fake_cuda import FakeTensor

    big = FakeTensor((2 ** 32 + 8,), "bfloat16", device="cpu")
    kernel = tilecute.compile(fill(n64()))
    with pytest.raises(ValueError, match="expected a CUDA tensor"):  # past the binding
        kernel(big)
    narrow = tilecute.compile(fill(T.dynamic("n")))
    with pytest.raises(ValueError, match=r"fill: argument 'x': expected shape\[0\] \(n\) to fit in "
                                         r"int32, got 4294967304"):
        narrow(big)
    static = tilecute.compile(fill(2 ** 32))
    with pytest.raises(ValueError, match=r"expected shape\[0\] == 4294967296, got 4294967304"):
        static(big)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        static(FakeTensor((2 ** 32,), "bfloat16", device="cpu"))


def test_launcher_leaves_64_bit_strides_unchecked(cache_dir):
    from fake_cuda import FakeTensor

    n = n64()
    kernel = tilecute.compile(add2d(4, n, block_M=4))
    wide = FakeTensor((4, 2 ** 31 + 128), "float16", device="cpu")  # strides[0] past int32
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        kernel(wide, wide, wide)


def test_launcher_names_the_grid_dim_past_cudas_limit(cache_dir):
    from fake_cuda import FakeTensor

    kernel = tilecute.compile(fill(n64()))
    huge = FakeTensor((2 ** 41,), "bfloat16")  # (no memory: a DLTensor only)
    with pytest.raises(ValueError, match=re.escape(
            "fill: kernel 'tilecute_fill_0': grid (4294967296, 1, 1) is outside the CUDA limits "
            "(grid.x = 4294967296 is above 2147483647: 1 <= x < 2^31, 1 <= y, z < 65536)")):
        kernel(huge)


DRIVE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tvm_ffi
from fake_cuda import FakeTensor, open_driver
paths = json.loads(sys.argv[2])
cuda = open_driver()
mod = tvm_ffi.load_module(paths["launcher"])
mod["__tilecute_set_cubin"](paths["cubin"])
mod["fill"](FakeTensor((2 ** 32 + 8,), "bfloat16", data=0x100000))
print(json.dumps(cuda.fake_log().decode().splitlines()))
"""


def test_launcher_passes_an_int64_symbol_as_8_bytes(tmp_path):
    pytest.importorskip("tvm_ffi")
    from fake_cuda import drive_launcher, parse_launch

    _, log = drive_launcher(lower(fill(n64()), "sm_90a").abi, tmp_path, DRIVE)
    (launch,) = [parse_launch(x) for x in log if x.startswith("launch")]
    assert launch["grid"] == f"{2 ** 23 + 1},1,1"
    assert launch["params"] == [(0x100000).to_bytes(8, "little").hex(),
                                (2 ** 32 + 8).to_bytes(8, "little").hex()]


# ---- on a GPU --------------------------------------------------------------------------------------
def _needs_gib(gib: float):
    import torch

    free, _ = torch.cuda.mem_get_info()
    if free < gib * 2 ** 30 * 1.1:
        pytest.skip(f"needs {gib} GiB of free GPU memory, {free / 2 ** 30:.1f} GiB free")


@pytest.mark.gpu
@pytest.mark.parametrize("symbolic", [True, False])
def test_gpu_fill_of_2_32_elements(symbolic):
    """TileLang's int64 test: 2**32 bf16 elements (8 GiB), symbolic and static n."""
    import torch

    n = 2 ** 32
    _needs_gib(8)
    x = torch.zeros(n, dtype=torch.bfloat16, device="cuda")
    tilecute.compile(fill(n64() if symbolic else n))(x)
    assert x.min().item() == 1.0 and x.max().item() == 1.0
    del x
    if symbolic:  # a ragged end past 2**32
        x = torch.zeros(n + 77, dtype=torch.bfloat16, device="cuda")
        tilecute.compile(fill(n64(), value=3.0))(x)
        assert x.min().item() == 3.0 and x.max().item() == 3.0


@pytest.mark.gpu
def test_gpu_add2d_past_2_31_elements():
    import torch

    rows, cols = 2 ** 19 + 70, 4096  # 2**31 + 286720 elements, 4 GiB of fp16 each
    _needs_gib(13)
    a = torch.empty(rows, cols, dtype=torch.float16, device="cuda")
    a[:64].fill_(1.0)
    a[-200:].copy_(torch.arange(200 * cols, device="cuda").reshape(200, cols).remainder(1000).half())
    b = torch.full_like(a, 0.5)
    c = torch.zeros_like(a)
    tilecute.compile(add2d(n64("M"), cols))(a, b, c)
    torch.testing.assert_close(c[-200:], a[-200:] + 0.5)  # past 2**31
    torch.testing.assert_close(c[:64], a[:64] + 0.5)


@pytest.mark.gpu
def test_gpu_strided_sum_reads_past_2_31():
    import torch

    n = 2 ** 31 + 5  # 8 GiB of float32; x[8 * 2**28] = x[2**31] is read
    _needs_gib(8.5)
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    x[::1 << 28] = torch.arange(1, 10, dtype=torch.float32, device="cuda")
    out = torch.zeros(1, dtype=torch.float32, device="cuda")
    tilecute.compile(strided_sum(n64()))(x, out)
    assert out.item() == 45.0


@pytest.mark.gpu
def test_gpu_fill_region_past_2_31():
    import torch

    n = 2 ** 31 + 1000  # float32, 8 GiB
    _needs_gib(8.5)
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    tilecute.compile(fill_region(n64()))(x)
    assert x.min().item() == 2.0 and x.max().item() == 2.0


@pytest.mark.gpu
def test_gpu_small_int64_programs_against_torch():
    import torch

    M, cols = 1000, 256
    a = torch.randn(M, cols, device="cuda")
    s = torch.zeros(M, device="cuda")
    tilecute.compile(row_sum(n64("M"), cols))(a, s)
    torch.testing.assert_close(s, a.sum(dim=1), rtol=1e-4, atol=1e-4)
    h = torch.randn(333, 4096, device="cuda").half()
    out = torch.zeros_like(h)
    tilecute.compile(tiled_copy(n64("M"), 4096))(h, out)
    assert torch.equal(out, h)
    for swizzle in (False, True):
        a = torch.randn(300, 512, device="cuda").half()
        b = torch.randn(512, 1024, device="cuda").half()
        c = torch.zeros(300, 1024, device="cuda")
        tilecute.compile(matmul(n64("M"), 1024, n64("K"), swizzle=swizzle))(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
