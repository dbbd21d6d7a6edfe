"""TileLang's packed FP4 dtype ``T.float4_e2m1fn`` (E2M1, two values a byte; TileLang's
"subtype"): a tensor parameter of logical shape (m, n) binds a tensor of 8-bit elements
of shape (m, n / 2) (torch's float4_e2m1fn_x2, uint8, int8), its other strides doubled;
element j of a row is the low nibble of byte j // 2 when j is even, the high one when odd;
casts round to the nearest even code and saturate at 6.
CPU: the dtype table and the rounding reference, IR, generated source, PTX, cubins, the
launcher's checks on packed torch tensors, output allocation, eager ``@jit`` binding,
refusals naming the form; GPU: results against a torch reference of the E2M1 values."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir.validate import ValidationError
from tilecute.runtime.dtypes import DTYPES, E2M1_VALUES, e2m1_code, e2m1_value
from tilecute.transform.pipeline import lower

FP4 = "float4_e2m1fn"


# ---- programs --------------------------------------------------------------------------
def dequant(M=64, N=256, dtype="float16"):
    """A row of packed fp4 per block, widened to ``dtype``."""
    @T.prim_func
    def dequant(A: T.Tensor((M, N), T.float4_e2m1fn), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=8) as bx:  # 32 lanes a thread: 16-byte fp4 loads
            for j in T.Parallel(N):
                B[bx, j] = T.cast(A[bx, j], dtype)
    return dequant


def quant(M=64, N=256, dtype="float32"):
    @T.prim_func
    def quant(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(M, threads=64) as bx:
            for j in T.Parallel(N):
                B[bx, j] = T.cast(A[bx, j], T.float4_e2m1fn)
    return quant


def through_shared(M=128, N=256, bm=32, bn=128):
    """Global fp4 -> shared (cp.async) -> global fp4, and the tile widened to bfloat16."""
    @T.prim_func
    def through_shared(A: T.Tensor((M, N), T.float4_e2m1fn), B: T.Tensor((M, N), T.float4_e2m1fn),
                       C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bn), T.float4_e2m1fn)
            T.copy(A[by * bm, bx * bn], A_s)
            T.copy(A_s, B[by * bm, bx * bn])
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = T.cast(A_s[i, j], T.bfloat16)
    return through_shared


def fragment_round_trip(M=64, N=64):
    """float16 -> an fp4 fragment -> shared -> global, and both decoded and summed."""
    @T.prim_func
    def fragment_round_trip(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float4_e2m1fn),
                            C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            A_f = T.alloc_fragment((M, N), T.float16)
            Q = T.alloc_fragment((M, N), T.float4_e2m1fn)
            S = T.alloc_shared((M, N), T.float4_e2m1fn)
            T.copy(A, A_f)
            for i, j in T.Parallel(M, N):
                Q[i, j] = T.cast(A_f[i, j], T.float4_e2m1fn)
            T.copy(Q, S)
            T.copy(S, B)
            for i, j in T.Parallel(M, N):
                C[i, j] = T.cast(Q[i, j], T.float32) + T.cast(S[i, j], T.float32)
    return fragment_round_trip


def scatter_rows():
    """One thread per block moves a row's elements one by one to a permuted row (scalar
    nibble loads and stores, symbolic rows): TileLang's scalar-store idiom."""
    n = T.dynamic("n")

    @T.prim_func
    def scatter_rows(src: T.Tensor((n, 128), T.float4_e2m1fn), dst: T.Tensor((n, 128), T.float4_e2m1fn),
                     perm: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=32) as i:
            for k in T.serial(128):
                dst[perm[i], k] = src[i, k]
    return scatter_rows


def scatter_elements(N=1024):
    """Neighbouring threads store the two nibbles of one byte at once (an indexed store,
    one element a thread): each store keeps the other nibble."""
    @T.prim_func
    def scatter_elements(X: T.Tensor((N,), T.float32), idx: T.Tensor((N,), T.int32),
                         Y: T.Tensor((N,), T.float4_e2m1fn)):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                Y[idx[bx * 128 + i]] = T.cast(X[bx * 128 + i], T.float4_e2m1fn)
    return scatter_elements


def shared_reverse():
    """Each thread stores one element of a shared fp4 buffer (its neighbour the other
    nibble of the byte, at once), then reads another thread's."""
    @T.prim_func
    def shared_reverse(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), T.float4_e2m1fn)
            tx = T.get_thread_binding()
            S[63 - tx] = T.cast(A[tx], T.float4_e2m1fn)
            T.sync_threads()
            B[tx] = T.cast(S[tx], T.float32)
    return shared_reverse


def strided(block=8):
    """A StridedTensor of fp4 with symbolic strides (in elements, two a byte)."""
    nb, s0, s1 = T.dynamic("nb"), T.dynamic("s0"), T.dynamic("s1")

    @T.prim_func
    def strided(X: T.StridedTensor((nb, block, 128), (s0, s1, 1), T.float4_e2m1fn),
                Y: T.Tensor((nb, block, 128), T.float32)):
        with T.Kernel(nb, threads=128) as b:
            for r, k in T.Parallel(block, 128):
                Y[b, r, k] = T.cast(X[b, r, k], T.float32)
    return strided


def _src(func, arch="sm_90a"):
    return emit_cute(lower(func, arch))


# ---- the dtype ---------------------------------------------------------------------------
def test_dtype_table_and_torch_dtype():
    torch = pytest.importorskip("torch")
    assert T.float4_e2m1fn.bits == 4 and DTYPES[FP4].pack == 2 and DTYPES["uint8"].pack == 1
    assert T.float4_e2m1fn.as_torch() is torch.float4_e2m1fn_x2
    assert T.dtype("float4_e2m1fn") == FP4
    # the vector type stays TileLang's alone
    assert "a TileLang dtype tilecute does not have" in repr(T.float4_e2m1fnx2)


def test_rounding_reference():
    """Every code decodes to its E2M1 value and encodes back; midpoints go to the even
    code; past 6 saturates; NaN is +6; -0 keeps its sign."""
    for code in range(16):
        assert e2m1_code(e2m1_value(code)) == code
    assert [e2m1_value(c) for c in range(8)] == list(E2M1_VALUES)
    ties = {0.25: 0.0, 0.75: 1.0, 1.25: 1.0, 1.75: 2.0, 2.5: 2.0, 3.5: 4.0, 5.0: 4.0}
    for x, want in ties.items():
        assert e2m1_value(e2m1_code(x)) == want and e2m1_value(e2m1_code(-x)) == -want
    assert e2m1_value(e2m1_code(0.2500001)) == 0.5 and e2m1_value(e2m1_code(5.0001)) == 6.0
    assert e2m1_code(1e30) == 7 and e2m1_code(float("-inf")) == 15
    assert e2m1_code(float("nan")) == 7 and e2m1_code(-0.0) == 8 and e2m1_code(-0.1) == 8


# ---- IR and generated code -----------------------------------------------------------------
def test_printed_ir_round_trips():
    f = fragment_round_trip()
    text = f.script()
    assert 'B: T.Tensor((64, 64), "float4_e2m1fn")' in text
    assert 'Q = T.alloc_fragment((64, 64), "float4_e2m1fn")' in text
    assert T.from_script(text).script() == text
    k = T.from_script(textwrap.dedent('''\
        import tilecute.language as T

        @T.prim_func
        def consts(A: T.Tensor((8,), "float4_e2m1fn")):
            with T.Kernel(1, threads=32) as bx:
                A[0] = T.float4_e2m1fn(1.5)
                A[1] = T.cast(-7.0, "float4_e2m1fn")
        '''))
    src = _src(k)
    assert "cutlass.Uint8(3))" in src and "cutlass.Uint8(15))" in src  # 1.5; -7 -> -6


def test_generated_dequant_and_quant():
    src = _src(dequant())
    # the global tensor is its bytes: the last dim halved
    assert "A = cute.make_tensor(A_ptr, cute.make_layout((64, 128,), stride=(128, 1,)))" in src
    assert "tcfp4.unpack(cute.make_tensor(A.iterator + cute.assume((bx * 256 + j) // 2, " \
           "divby=16), cute.make_layout(16)), " in src
    assert "cutlass.Float16(tcfp4.decode(" in src
    src = _src(quant())
    assert "tcfp4.encode(" in src and "tcfp4.pack(" in src
    assert "tcfp4.store(" not in src  # whole bytes: no neighbour to keep


def test_generated_shared_and_scalar_forms():
    src = _src(through_shared())
    # 32 x 128 elements are 2048 bytes of shared memory; cp.async moves 16 bytes
    assert "A_s = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Uint8), " \
           "cute.make_layout(2048))" in src
    assert "tcc.copy_async(" in src and ", 128)" in src
    src = _src(scatter_rows())
    assert "tcfp4.store(dst, (perm[i], k >> 1), k, tcfp4.nibble(src[i, k >> 1], k))" in src
    src = _src(scatter_elements())
    assert "tcfp4.store(Y, (idx[bx * 128 + i] >> 1,), idx[bx * 128 + i], tcfp4.encode(" in src
    src = _src(strided())
    assert "stride=((s0) // 2, (s1) // 2, 1,)" in src
    src = _src(shared_reverse())  # 64 elements, 32 bytes; the element offset picks the nibble
    assert "tcfp4.store(S, ((63 - tx) >> 1,), (63 - tx), tcfp4.encode(A[tx]))" in src
    assert "tcfp4.decode(tcfp4.nibble(S[(tx) >> 1], tx))" in src


@pytest.mark.parametrize("make", [dequant, quant, through_shared, fragment_round_trip,
                                  scatter_rows, scatter_elements, strided, shared_reverse,
                                  lambda: dequant(dtype="bfloat16"), lambda: quant(dtype="float64")])
def test_cubins(make, tmp_path):
    pytest.importorskip("cutlass")
    f = make()
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_cubin_sm80(tmp_path):
    pytest.importorskip("cutlass")
    assert tilecute.build_cubin(fragment_round_trip(), "sm_80", out_dir=str(tmp_path)).kernel_names


def _ptx(func, tmp_path, monkeypatch) -> str:
    import cutlass.cute as cute

    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(_src(func))
    module = import_source(str(path), f"tilecute_fp4_{func.name}_{tmp_path.name}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__


def test_nibble_stores_are_word_reductions(tmp_path, monkeypatch):
    """A lone nibble is stored by red.and (clear) then red.or (set) on its aligned word."""
    pytest.importorskip("cutlass")
    ptx = _ptx(scatter_elements(), tmp_path, monkeypatch)
    assert "red.relaxed.gpu.global.and.b32" in ptx and "red.relaxed.gpu.global.or.b32" in ptx


# ---- the launcher on packed torch tensors ----------------------------------------------------
def _raises(kernel, *args) -> str:
    with pytest.raises((ValueError, TypeError)) as e:
        kernel(*args)
    return str(e.value)


def test_launcher_binds_packed_tensors():
    torch = pytest.importorskip("torch")
    k = tilecute.compile(dequant(64, 256))
    b = torch.empty(64, 256, dtype=torch.float16)
    ok = "expected a CUDA tensor"  # every check passed; the CPU tensor stops the launch
    for a in (torch.zeros(64, 128, dtype=torch.uint8), torch.zeros(64, 128, dtype=torch.int8),
              torch.zeros(64, 128, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)):
        assert ok in _raises(k, a, b)
    msg = _raises(k, torch.zeros(64, 256, dtype=torch.uint8), b)
    assert "expected shape[1] x 2 (float4_e2m1fn elements) == 256, got 512" in msg
    msg = _raises(k, torch.zeros(64, 128, dtype=torch.float16), b)
    assert "expected dtype float4_e2m1fn (2 to a byte" in msg and "got float16" in msg
    msg = _raises(k, torch.zeros(64, 256, dtype=torch.uint8)[:, ::2], b)
    assert "contiguous" in msg


def test_launcher_binds_symbols_and_strides():
    torch = pytest.importorskip("torch")
    k = tilecute.compile(strided(block=8))
    back = torch.zeros(10, 8 * 68, dtype=torch.uint8)
    x = back[:, :8 * 64].view(10, 8, 64)  # rows of 64 bytes, 68 apart
    y = torch.empty(10, 8, 128)
    assert "expected a CUDA tensor" in _raises(k, x, y)
    msg = _raises(k, x, torch.empty(10, 8, 64))
    assert "shape[2]" in msg and "128" in msg
    k = tilecute.compile(scatter_rows())
    src = torch.zeros(6, 64, dtype=torch.uint8)
    assert "expected a CUDA tensor" in _raises(k, src, src.clone(), torch.zeros(6, dtype=torch.int32))
    msg = _raises(k, src, torch.zeros(7, 64, dtype=torch.uint8), torch.zeros(6, dtype=torch.int32))
    assert "'dst'" in msg and "shape[0]" in msg


def test_outputs_are_allocated_packed():
    torch = pytest.importorskip("torch")
    k = tilecute.compile(quant(64, 256), out_idx=[1])
    (out,) = k.allocate_outputs([torch.zeros(64, 256)])
    assert out.dtype == torch.float4_e2m1fn_x2 and tuple(out.shape) == (64, 128)


def test_eager_jit_binds_packed_shapes():
    """TileLang's subtype idiom: a symbolic last dim is the tensor's times 2."""
    torch = pytest.importorskip("torch")

    @tilecute.jit
    def last_dim(x):
        n = T.dynamic("n")
        x: T.Tensor[(4, n), T.float4_e2m1fn]
        with T.Kernel(1, threads=32):
            x[0, 0] = x[0, n - 1]

    assert "expected a CUDA tensor" in _raises(last_dim, torch.zeros(4, 16, dtype=torch.uint8))

    @tilecute.jit
    def fixed(x):
        x: T.Tensor[(4, 16), T.float4_e2m1fn]
        with T.Kernel(1, threads=32):
            x[0, 0] = x[0, 1]

    assert "expected a CUDA tensor" in _raises(fixed, torch.zeros(4, 8, dtype=torch.uint8))
    msg = _raises(fixed, torch.zeros(4, 16, dtype=torch.uint8))
    assert "got a tensor of shape (4, 16), (4, 32) in float4_e2m1fn elements" in msg


# ---- refusals ------------------------------------------------------------------------------
def _refused(text: str, match: str):
    with pytest.raises(ValidationError, match=match) as e:  # (at parse time, naming the line)
        T.from_script(textwrap.dedent(text))
    return str(e.value)


def test_arithmetic_on_fp4_values_is_refused():
    msg = _refused('''\
        import tilecute.language as T

        @T.prim_func
        def add(A: T.Tensor((64,), "float4_e2m1fn"), B: T.Tensor((64,), "float4_e2m1fn")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    B[i] = A[i] + A[i]
        ''', "add of float4_e2m1fn values")
    assert "cast them to float32" in msg and "<script>:7:" in msg


def test_gemm_and_reduce_on_fp4_are_refused():
    _refused('''\
        import tilecute.language as T

        @T.prim_func
        def mm(A: T.Tensor((64, 64), "float4_e2m1fn"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 64), "float4_e2m1fn")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.copy(A, A_s)
                T.gemm(A_s, A_s, C_l)
                T.copy(C_l, C)
        ''', "T.gemm: sm_80/sm_90 have no FP4 MMA")
    _refused('''\
        import tilecute.language as T

        @T.prim_func
        def red(A: T.Tensor((64, 64), "float4_e2m1fn"), C: T.Tensor((64,), "float4_e2m1fn")):
            with T.Kernel(1, threads=128) as bx:
                A_f = T.alloc_fragment((64, 64), "float4_e2m1fn")
                C_f = T.alloc_fragment((64,), "float4_e2m1fn")
                T.copy(A, A_f)
                T.reduce_max(A_f, C_f, dim=1)
                T.copy(C_f, C)
        ''', "T.reduce: reduce float4_e2m1fn values after casting them to float32")


def test_packed_parameter_rules():
    _refused('''\
        import tilecute.language as T

        @T.prim_func
        def odd(A: T.Tensor((4, 15), "float4_e2m1fn")):
            with T.Kernel(1, threads=32) as bx:
                A[0, 0] = A[0, 1]
        ''', "last dim counts two elements a byte, so it is even; got 15")
    _refused('''\
        import tilecute.language as T

        @T.prim_func
        def cols(A: T.StridedTensor((4, 16), (1, 4), "float4_e2m1fn")):
            with T.Kernel(1, threads=32) as bx:
                A[0, 0] = A[0, 1]
        ''', "last stride is 1")


def test_register_views_of_fp4_are_refused():
    _refused('''\
        import tilecute.language as T

        @T.prim_func
        def v(A: T.Tensor((64,), "uint8")):
            with T.Kernel(1, threads=32) as bx:
                q = T.alloc_local((128,), "float4_e2m1fn")
                b = T.view(q, (64,), "uint8")
                A[0] = b[0]
        ''', "holds one value a register")


# ---- GPU ---------------------------------------------------------------------------------
def _values(codes):
    """The E2M1 values of a uint8 tensor of packed codes, unpacked along the last dim."""
    import torch

    table = torch.tensor([e2m1_value(c) for c in range(16)], device=codes.device)
    lo, hi = (codes & 0xF).long(), (codes >> 4).long()
    return torch.stack([table[lo], table[hi]], dim=-1).flatten(-2)


def _codes(x):
    """The reference codes of float tensor ``x``, packed two a byte."""
    import torch

    flat = [e2m1_code(v) for v in x.double().flatten().tolist()]
    c = torch.tensor(flat, dtype=torch.uint8).view(*x.shape[:-1], x.shape[-1] // 2, 2)
    return (c[..., 0] | (c[..., 1] << 4)).to(x.device)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_dequant_matches_torch(dtype):
    import torch

    k = tilecute.compile(dequant(64, 256, dtype))
    a = torch.randint(0, 256, (64, 128), dtype=torch.uint8, device="cuda")
    a[0] = torch.arange(128, dtype=torch.uint8, device="cuda") * 2 + 1  # odd and even codes
    a[1] = torch.arange(128, 256, dtype=torch.int32, device="cuda").to(torch.uint8)
    b = torch.empty(64, 256, dtype=getattr(torch, dtype), device="cuda")
    k(a.view(torch.float4_e2m1fn_x2), b)
    torch.testing.assert_close(b.float(), _values(a), atol=0, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_quant_matches_reference(dtype):
    import torch

    k = tilecute.compile(quant(64, 256, dtype))
    x = torch.randn(64, 256, dtype=torch.float64, device="cuda") * 4
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.5, 100.0, 0.0], dtype=torch.float64)
    x[0, :20] = torch.cat([ties, -ties]).to("cuda")
    x[1, 0] = -0.0
    x = x.to(getattr(torch, dtype))
    b = torch.zeros(64, 128, dtype=torch.uint8, device="cuda")
    k(x, b)
    assert torch.equal(b, _codes(x))


@pytest.mark.gpu
def test_copies_through_shared_and_fragments():
    import torch

    a = torch.randint(0, 256, (128, 128), dtype=torch.uint8, device="cuda")
    b = torch.zeros_like(a)
    c = torch.empty(128, 256, dtype=torch.bfloat16, device="cuda")
    tilecute.compile(through_shared())(a, b, c)
    assert torch.equal(a, b)
    torch.testing.assert_close(c.float(), _values(a), atol=0, rtol=0)
    x = (torch.randn(64, 64, device="cuda") * 3).half()
    q = torch.zeros(64, 32, dtype=torch.int8, device="cuda")
    s = torch.empty(64, 64, device="cuda")
    tilecute.compile(fragment_round_trip())(x, q, s)
    assert torch.equal(q.view(torch.uint8), _codes(x))
    torch.testing.assert_close(s, 2 * _values(_codes(x)), atol=0, rtol=0)


@pytest.mark.gpu
def test_scalar_nibble_stores():
    import torch

    n = 64
    src = torch.randint(0, 256, (n, 64), dtype=torch.uint8, device="cuda")
    dst = torch.zeros_like(src)
    perm = torch.randperm(n, dtype=torch.int32, device="cuda")
    tilecute.compile(scatter_rows())(src, dst, perm)
    inv = torch.empty_like(perm)
    inv[perm.long()] = torch.arange(n, dtype=torch.int32, device="cuda")
    assert torch.equal(dst, src[inv.long()])
    # neighbouring threads write the two nibbles of each byte at once
    x = torch.randn(1024, device="cuda") * 3
    idx = torch.randperm(1024, dtype=torch.int32, device="cuda")
    y = torch.full((512,), 0xFF, dtype=torch.uint8, device="cuda")
    tilecute.compile(scatter_elements())(x, idx, y)
    want = torch.empty(1024, device="cuda")
    want[idx.long()] = x
    assert torch.equal(y, _codes(want))


@pytest.mark.gpu
def test_shared_nibble_stores():
    import torch

    a = torch.randn(64, device="cuda") * 3
    b = torch.empty(64, device="cuda")
    tilecute.compile(shared_reverse())(a, b)
    want = torch.tensor([e2m1_value(e2m1_code(v)) for v in a.flip(0).tolist()], device="cuda")
    torch.testing.assert_close(b, want, atol=0, rtol=0)


@pytest.mark.gpu
def test_strided_tensor_matches_torch():
    import torch

    back = torch.randint(0, 256, (10, 8 * 68), dtype=torch.uint8, device="cuda")
    x = back[:, :8 * 64].view(10, 8, 64)
    y = torch.empty(10, 8, 128, device="cuda")
    tilecute.compile(strided(8))(x, y)
    torch.testing.assert_close(y, _values(x.contiguous()), atol=0, rtol=0)
