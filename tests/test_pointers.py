"""TileLang's pointer forms: a pointer parameter ``a_ptr: T.ptr`` viewed with
``T.make_tensor(a_ptr, shape, dtype)``, and a table of addresses ``ptrs: T.Tensor([G],
T.ptr)`` (int64) whose entries ``T.make_tensor(ptrs[g], shape, dtype)`` views inside a
kernel.  The programs are written in TileLang's idioms (its ``test_tilelang_language_ptr``
and grouped-GEMM example); each is lowered, its launch ABI read and its cubin built for
sm_90a and sm_80 on the CPU (the cubin check compares the ABI with the cubin's parameter
table); the GPU tests compare results with torch, passing tensors and ``data_ptr()`` ints."""

import math

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.runtime.abi import PointerArg, TensorArg
from tilecute.transform.pipeline import lower
from tilecute.transform.tma_copies import TmaError


def _stmts(func, cls):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, cls)]


# ---- programs -------------------------------------------------------------------------------
def pointer_gemm(block_M=64, block_N=64, block_K=32, dtype=T.float16, accum=T.float32, stages=3):
    """C = A @ B.T over three pointer parameters, the shapes scalar parameters."""

    @T.prim_func
    def ptr_gemm(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), dtype)
        B = T.make_tensor(b_ptr, (n, k), dtype)
        C = T.make_tensor(c_ptr, (m, n), accum)
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return ptr_gemm


def table_copy(G, N, dtype=T.float16):
    """out[g, :] = the N elements at address srcs[g], one block per group."""

    @T.prim_func
    def gather_rows(srcs: T.Tensor([G], T.ptr), out: T.Tensor([G, N], dtype)):
        with T.Kernel(G, threads=128) as g:
            S = T.make_tensor(srcs[g], (N,), dtype)
            for i in T.Parallel(N):
                out[g, i] = S[i]

    return gather_rows


def table_scatter(G, rows, cols, dtype=T.float32):
    """Each group's (rows, cols) tensor at dsts[g] gets src[g] * 2, element by element, with
    a row stride of its own (``strides=``: a padded row)."""
    pitch = cols + 8

    @T.prim_func
    def scatter(src: T.Tensor([G, rows, cols], dtype), dsts: T.Tensor([G], T.ptr)):
        with T.Kernel(G, threads=128) as g:
            D = T.make_tensor(dsts[g], (rows, cols), dtype, strides=(pitch, 1))
            for i, j in T.Parallel(rows, cols):
                D[i, j] = src[g, i, j] * 2

    return scatter


def grouped_gemm(sizes, N, K, block_M=64, block_N=128, block_K=64, threads=128, stages=2,
                 dtype=T.float16, accum=T.float32):
    """TileLang's grouped GEMM over tables of addresses: group g's A (max_M, K) padded
    rows, B (K, N) and C (max_M, N) at a_ptrs[g], b_ptrs[g], c_ptrs[g]; the blocks of the
    first grid dim walk the groups' row tiles, ``first_tile[g]`` the first of group g."""
    G, max_M = len(sizes), max(sizes)
    tiles = sum(math.ceil(s / block_M) for s in sizes)

    @T.prim_func
    def grouped(a_ptrs: T.Tensor([G], T.ptr), b_ptrs: T.Tensor([G], T.ptr),
                c_ptrs: T.Tensor([G], T.ptr), first_tile: T.Tensor([G], T.int32)):
        with T.Kernel(tiles, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            group = T.alloc_var(T.int32)
            tile0 = T.alloc_var(T.int32)
            group = 0
            tile0 = 0
            for i in range(G):
                here = bx >= first_tile[i]
                group = T.if_then_else(here, i, group)
                tile0 = T.if_then_else(here, first_tile[i], tile0)
            row = (bx - tile0) * block_M
            A = T.make_tensor(a_ptrs[group], (max_M, K), dtype)
            B = T.make_tensor(b_ptrs[group], (K, N), dtype)
            C = T.make_tensor(c_ptrs[group], (max_M, N), dtype)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[row, ko * block_K], A_s)
                T.copy(B[ko * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[row, by * block_N])

    return grouped


# ---- the frontend and the IR ----------------------------------------------------------------
def test_pointer_parameters_and_their_tensors():
    f = pointer_gemm()
    assert f.pointers == ("a_ptr", "b_ptr", "c_ptr")
    assert [(p.name, p.dtype) for p in f.params[:3]] == [("a_ptr", "int64")] * 1 + \
        [("b_ptr", "int64"), ("c_ptr", "int64")]
    views = _stmts(f, N.Allocate)[:3]  # allocated at the start of the kernel
    assert [(a.buffer.name, a.address) for a in views] == [
        ("A", N.Var("a_ptr", "int64")), ("B", N.Var("b_ptr", "int64")),
        ("C", N.Var("c_ptr", "int64"))]
    assert views[0].buffer.shape == (N.Var("m"), N.Var("k")) and views[2].buffer.dtype == "float32"
    text = f.script()
    assert "def ptr_gemm(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32" in text
    assert 'A = T.make_tensor(a_ptr, (m, k), "float16")' in text
    assert T.from_script(text) == f  # the printed program parses back to the same IR
    assert from_json(to_json(f)) == f


def test_pointer_table_annotation_is_an_int64_tensor():
    """TileLang's _normalize_tensor_dtype: T.Tensor([G], T.ptr) is int64 storage."""
    f = table_copy(4, 256)
    assert f.params[0] == N.Buffer("srcs", "int64", (N.Const(4, "int32"),))
    (view,) = [a for a in _stmts(f, N.Allocate) if a.address is not None]
    assert view.address == N.Load("srcs", (f.kernels[0].block_vars[0],), "int64")
    assert 'S = T.make_tensor(srcs[g], (256,), "float16")' in f.script()
    assert T.from_script(f.script()) == f


def test_make_tensor_strides_and_from_addr():
    f = table_scatter(3, 16, 24)
    (view,) = [a for a in _stmts(f, N.Allocate) if a.address is not None]
    assert view.buffer.strides == (N.Const(32, "int32"), N.Const(1, "int32"))
    assert "strides=(32, 1)" in f.script() and T.from_script(f.script()) == f

    @T.prim_func
    def from_addr(addrs: T.Tensor([2], T.uint64), out: T.Tensor([2, 8], T.float32)):
        with T.Kernel(2, threads=32) as g:
            S = T.make_tensor_from_addr(addrs[g], (8,), T.float32)
            for i in T.Parallel(8):
                out[g, i] = S[i]
    (view,) = [a for a in _stmts(from_addr, N.Allocate) if a.address is not None]
    assert view.address.dtype == "int64"  # (a uint64 address, bit for bit)


def test_top_level_tensor_in_each_kernel():
    """A top-level T.make_tensor is allocated in every T.Kernel after it, under a name of
    its own in each (names are unique in a function)."""

    @T.prim_func
    def two(x_ptr: T.ptr, n: T.int32):
        X = T.make_tensor(x_ptr, (n,), T.float32)
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                X[bx * 128 + i] = 0.0
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                X[bx * 128 + i] = X[bx * 128 + i] + 1.0
    names = [[a.buffer.name for a in walk_stmts(k.body) if isinstance(a, N.Allocate)]
             for k in two.kernels]
    assert names == [["X"], ["X_1"]]
    plan = lower(two)
    # 128 iterations over 128 threads: one float each (TileLang's partition), so the
    # launcher checks the address is aligned to an element
    assert plan.abi.args[0] == PointerArg("x_ptr", "int64", 4)

    @T.prim_func
    def wide(x_ptr: T.ptr, n: T.int32):
        X = T.make_tensor(x_ptr, (n,), T.float32)
        with T.Kernel(T.ceildiv(n, 512), threads=128) as bx:
            for i in T.Parallel(512):
                X[bx * 512 + i] = 0.0
    # 512 over 128 threads: 4 lanes each, 16-byte vectors: the address is checked so
    assert lower(wide).abi.args[0] == PointerArg("x_ptr", "int64", 16)


def eager_pointer_gemm():
    """TileLang's eager jit style: pointer parameters in the signature, the shapes and dtypes
    specialization arguments, the tensors made at the top of the body."""

    @tilecute.jit
    def mm_ptr(A: T.ptr, B: T.ptr, C: T.ptr, M: int, N: int, K: int, dtype: T.dtype,
               out_dtype: T.dtype, block_M: int = 64, block_N: int = 64, block_K: int = 32):
        A = T.make_tensor(A, (M, K), dtype)
        B = T.make_tensor(B, (K, N), dtype)
        C = T.make_tensor(C, (M, N), out_dtype)
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bm, bn):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), out_dtype)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[bm * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bn * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[bm * block_M, bn * block_N])

    return mm_ptr


def test_eager_pointer_parameters(cache_dir):
    mm_ptr = eager_pointer_gemm()
    for dtype in (T.float16, T.bfloat16):
        kernel = mm_ptr.compile(A=T.ptr(), B=T.ptr(), C=T.ptr(), M=256, N=256, K=256,
                                dtype=dtype, out_dtype=T.float32)
        assert "mm_ptr(A: ptr, B: ptr, C: ptr)" in repr(kernel)
    f = mm_ptr.get_tir(A=T.ptr(), B=T.ptr(), C=T.ptr(), M=256, N=256, K=256, dtype=T.float16,
                       out_dtype=T.float32)
    assert f.pointers == ("A", "B", "C")
    # the tensors are named apart from the pointer parameters they view
    assert [a.buffer.name for a in _stmts(f, N.Allocate)][:3] == ["A_1", "B_1", "C_1"]


# ---- lowering: no TMA for tensors at an address ---------------------------------------------
def test_pointer_gemm_abi_and_cubins(tmp_path):
    f = pointer_gemm()
    plan = lower(f, "sm_90a")
    assert [type(a).__name__ for a in plan.abi.args] == ["PointerArg"] * 3 + ["ScalarArg"] * 3
    params = plan.abi.kernels[0].params
    assert [(p.name, p.kind, p.dtype, p.source) for p in params[:3]] == [
        (n, "scalar", "int64", n) for n in ("a_ptr", "b_ptr", "c_ptr")]
    assert not plan.func.kernels[0].tma_descriptors and not _stmts(plan.func, N.TmaCopy)
    for arch in ("sm_90a", "sm_80"):  # (build_cubin checks the ABI against the cubin)
        info = tilecute.build_cubin(f, arch, out_dir=str(tmp_path / arch))
        assert [p.size for p in info.kernels["tilecute_ptr_gemm_0"].params] == [8, 8, 8, 4, 4, 4]
        source = (tmp_path / arch / "kernel_cute.py").read_text()
        assert "A = cute.make_tensor(cute.make_ptr(cutlass.Float16, a_ptr, cute.AddressSpace.gmem, " \
               "assumed_align=2), cute.make_layout((m, k,), stride=(k, 1,)))" in source


def test_grouped_gemm_keeps_the_cp_async_path(tmp_path):
    """Copies of tensors at table addresses are cp.async loads and direct stores: no TMA
    load, no TMA-store epilogue through shared memory (descriptors are encoded on the host
    from tensor arguments); the addresses are assumed 16-byte aligned only where vectors
    need it (TileLang's vectorizer assumes as much of any buffer's base)."""
    f = grouped_gemm([64, 100, 200], 256, 128)
    plan = lower(f, "sm_90a")
    k = plan.func.kernels[0]
    assert not k.tma_descriptors and not _stmts(plan.func, N.TmaCopy)
    assert [a.buffer.name for a in _stmts(plan.func, N.Allocate) if a.buffer.scope == "shared"] \
        == ["A_s", "B_s"]  # (no epilogue tile)
    loads = [s for s in _stmts(plan.func, N.For) if s.async_copy]
    assert {s.body[0].value.buffer for s in loads} == {"A", "B"}
    assert dict(plan.address_align) == {"A": 16, "B": 16, "C": 4}
    assert all(isinstance(a, TensorArg) and a.dtype in ("int64", "int32") for a in plan.abi.args)
    for arch in ("sm_90a", "sm_80"):
        tilecute.build_cubin(f, arch, out_dir=str(tmp_path / arch))


def test_table_copy_cubins(tmp_path):
    for f in (table_copy(4, 256), table_scatter(3, 16, 24)):
        for arch in ("sm_90a", "sm_80"):
            tilecute.build_cubin(f, arch, out_dir=str(tmp_path / f"{f.name}_{arch}"))


def test_tma_copy_of_a_tensor_at_an_address_is_refused():
    @T.prim_func
    def by_tma(ptrs: T.Tensor([2], T.ptr), out: T.Tensor([2, 64, 64], T.float16)):
        with T.Kernel(2, threads=128) as g:
            S = T.make_tensor(ptrs[g], (64, 64), T.float16)
            S_s = T.alloc_shared((64, 64), T.float16)
            bar = T.alloc_barrier(128)
            T.tma_copy(S[0:64, 0:64], S_s, barrier=bar)
            T.mbarrier_wait_parity(bar, 0)
            T.copy(S_s, out[g, 0:64, 0:64])
    with pytest.raises(TmaError, match=r"prim_func 'by_tma': T.tma_copy of 'S', a tensor at an "
                                       r"address \(T.make_tensor\): a TMA descriptor is encoded "
                                       r"on the host"):
        lower(by_tma, "sm_90a")


# ---- errors ---------------------------------------------------------------------------------
def test_make_tensor_of_a_non_pointer_is_refused():
    with pytest.raises(FrontendError, match=r"test_pointers.py:\d+: .*T.make_tensor: 'V': ptr is "
                                            r"a pointer: a `T.ptr` parameter or a 64-bit integer "
                                            r"address .*got the global buffer 'A'"):
        @T.prim_func
        def not_a_pointer(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                V = T.make_tensor(A, (64,), T.float32)
                V[0] = 1.0
    with pytest.raises(FrontendError, match=r"in prim_func 'float_address'.*T.make_tensor: 'V': "
                                            r"ptr is a pointer.*got a float32 value"):
        @T.prim_func
        def float_address(x: T.float32, A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                V = T.make_tensor(x, (64,), T.float32)
                A[0] = V[0]


def test_a_table_of_another_dtype_is_refused():
    with pytest.raises(FrontendError, match=r"in prim_func 'int32_table'.*T.make_tensor: 'S': "
                                            r"ptr is a pointer.*\(an entry of a table "
                                            r"`T.Tensor\(\[n\], T.ptr\)`, which is int64\); got "
                                            r"a int32 value `ptrs\[g\]`"):
        @T.prim_func
        def int32_table(ptrs: T.Tensor([4], T.int32), out: T.Tensor([4, 8], T.float16)):
            with T.Kernel(4, threads=32) as g:
                S = T.make_tensor(ptrs[g], (8,), T.float16)
                for i in T.Parallel(8):
                    out[g, i] = S[i]


def test_pointer_arguments_refused_by_name():
    with pytest.raises(FrontendError, match=r"parameter 'p': T.ptr\(storage_scope='shared'\) is "
                                            r"not supported"):
        @T.prim_func
        def shared_ptr(p: T.ptr(T.float16, "shared"), n: T.int32):
            with T.Kernel(1, threads=32):
                pass
    with pytest.raises(FrontendError, match=r"T.make_tensor: 'X': at the top level of the body "
                                            r"the address is a pointer parameter"):
        @T.prim_func
        def table_on_host(ptrs: T.Tensor([4], T.ptr)):
            X = T.make_tensor(ptrs[0], (8,), T.float32)
            with T.Kernel(1, threads=32):
                X[0] = 1.0
    with pytest.raises(FrontendError, match=r"T.view: 'Y': 'X' is a tensor at an address"):
        @T.prim_func
        def view_of_address(ptrs: T.Tensor([4], T.ptr)):
            with T.Kernel(4, threads=32) as g:
                X = T.make_tensor(ptrs[g], (8,), T.float32)
                Y = T.view(X, (16,), T.float16)
                Y[0] = T.float16(0)


def test_call_checks_pointer_arguments(cache_dir):
    """At the call a T.ptr argument is a tensor (its data pointer, on the launch device, as
    a tensor argument's) or an int address; anything else is refused naming the function and
    the argument, before any driver call (so on a machine without a GPU too)."""
    torch = pytest.importorskip("torch")
    kernel = tilecute.compile(pointer_gemm())
    assert "ptr_gemm(a_ptr: ptr, b_ptr: ptr, c_ptr: ptr, m: int32" in repr(kernel)
    with pytest.raises(TypeError, match=r"ptr_gemm: argument 'a_ptr': expected a tensor \(its "
                                        r"data pointer\) or an int address, got float"):
        kernel(1.5, 0, 0, 64, 64, 64)
    with pytest.raises(ValueError, match=r"ptr_gemm: argument 'b_ptr': expected a device "
                                         r"address >= 0, got -8"):
        kernel(0, -8, 0, 64, 64, 64)
    with pytest.raises(ValueError, match=r"ptr_gemm: argument 'c_ptr': expected an address "
                                         r"aligned to 4 bytes"):
        kernel(0, 0, 6, 64, 64, 64)
    with pytest.raises(ValueError, match=r"ptr_gemm: argument 'a_ptr': expected a CUDA tensor, "
                                         r"got cpu"):
        kernel(torch.zeros(64, 64, dtype=torch.float16), 0, 0, 64, 64, 64)


# ---- on the GPU -----------------------------------------------------------------------------
@pytest.mark.gpu
def test_pointer_gemm_on_gpu():
    import torch

    kernel = tilecute.compile(pointer_gemm())
    M, N, K = 384, 320, 256
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float().T
    c = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    kernel(a, b, c, M, N, K)  # tensors: their data pointers (TileLang's tvm_ffi backend)
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-2)
    c2 = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    kernel(a.data_ptr(), b.data_ptr(), c2.data_ptr(), M, N, K)  # ints (its cython backend)
    torch.testing.assert_close(c2, c)
    # a ragged problem: the views' bounds are the scalar shapes, not the tensors'
    m, n, k = 100, 72, 40
    a3, b3 = a[:m, :k].contiguous(), b[:n, :k].contiguous()
    c3 = torch.zeros(m, n, device="cuda", dtype=torch.float32)
    kernel(a3, b3.data_ptr(), c3, m, n, k)
    torch.testing.assert_close(c3, a3.float() @ b3.float().T, atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_eager_pointer_gemm_on_gpu():
    import torch

    mm_ptr = eager_pointer_gemm()
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 384, device="cuda", dtype=torch.float32)
    mm_ptr(a, b, c, 512, 384, 256, torch.float16, torch.float32)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
    c2 = torch.empty_like(c)
    mm_ptr(a.data_ptr(), b.data_ptr(), c2.data_ptr(), 512, 384, 256, torch.float16, torch.float32)
    torch.testing.assert_close(c2, c)


@pytest.mark.gpu
def test_pointer_table_copy_on_gpu():
    import torch

    G, N = 5, 1024
    kernel = tilecute.compile(table_copy(G, N))
    srcs = [torch.randn(N, device="cuda", dtype=torch.float16) for _ in range(G)]
    table = torch.tensor([s.data_ptr() for s in srcs], device="cuda", dtype=torch.int64)
    out = torch.empty(G, N, device="cuda", dtype=torch.float16)
    kernel(table, out)
    torch.testing.assert_close(out, torch.stack(srcs))

    rows, cols = 16, 24
    scatter = tilecute.compile(table_scatter(3, rows, cols))
    src = torch.randn(3, rows, cols, device="cuda")
    dsts = [torch.zeros(rows, cols + 8, device="cuda") for _ in range(3)]
    scatter(src, torch.tensor([d.data_ptr() for d in dsts], device="cuda", dtype=torch.int64))
    for g, d in enumerate(dsts):
        torch.testing.assert_close(d[:, :cols], src[g] * 2)
        assert not d[:, cols:].any()  # the padding of each row is left alone


@pytest.mark.gpu
def test_grouped_gemm_on_gpu():
    import torch

    sizes, N, K, block_M = [64, 100, 200, 17], 256, 128, 64
    kernel = tilecute.compile(grouped_gemm(sizes, N, K, block_M=block_M))
    max_M = max(sizes)
    first = [0]
    for s in sizes[:-1]:
        first.append(first[-1] + math.ceil(s / block_M))
    a = [torch.zeros(max_M, K, device="cuda", dtype=torch.float16) for _ in sizes]
    for x, s in zip(a, sizes):
        x[:s].normal_()
    b = [torch.randn(K, N, device="cuda", dtype=torch.float16) for _ in sizes]
    c = [torch.zeros(max_M, N, device="cuda", dtype=torch.float16) for _ in sizes]

    def table(ts):
        return torch.tensor([t.data_ptr() for t in ts], device="cuda", dtype=torch.int64)

    kernel(table(a), table(b), table(c), torch.tensor(first, device="cuda", dtype=torch.int32))
    for g, s in enumerate(sizes):
        ref = (a[g][:s].float() @ b[g].float()).half()
        torch.testing.assert_close(c[g][:s], ref, atol=2e-2, rtol=2e-2)
