"""T.copy forms of TileLang's language tests: two single elements
(``T.copy(A[i], B[j])``: TileLang's scalar-BufferLoad case, the one element is stored),
the region aliases of TileLang's buffer-region bindings (``X = A_shared[:M, :K]`` then
used as a buffer) and a 1-D fragment written at an affine combination of a 2-D loop's
variables (``b[i * N + j] = a[i, j]``)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import run_passes


def _one_element(N_=256, block_N=64):
    @T.prim_func
    def one_element(A: T.Tensor((N_,), "int32"), B: T.Tensor((N_,), "int32")):
        with T.Kernel(T.ceildiv(N_, block_N), threads=block_N) as bx:
            T.copy(A[bx * block_N], B[bx * block_N + 1])
    return one_element


def test_copy_of_two_elements_copies_one_element():
    func = run_passes(_one_element(), "sm_90a", until="lower_tile_ops")
    stores = [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Store)]
    assert len(stores) == 1
    text = print_func(func)
    # one element: a nest of extent 1 storing A[bx * 64] at B[bx * 64 + 1]
    assert "T.Parallel(1)" in text, text
    assert "B[bx * 64 + 1 + i1] = A[bx * 64 + i1]" in text, text


def test_copy_of_two_elements_builds(tmp_path):
    info = tilecute.build_cubin(_one_element(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_one_element_0"]


@pytest.mark.gpu
def test_copy_of_two_elements_on_gpu():
    import torch
    kernel = tilecute.compile(_one_element())
    a = torch.arange(256, dtype=torch.int32, device="cuda")
    b = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    kernel(a, b)
    want = torch.full((256,), -1, dtype=torch.int32)
    for bx in range(4):
        want[bx * 64 + 1] = bx * 64
    assert torch.equal(b.cpu(), want)


def _aliased_gemm(M=256, N_=256, K=256, bM=128, bN=128, bK=32):
    """A GEMM whose A tile and a corner of the accumulator go by aliases: ``X_s`` covers
    all of ``A_s`` (the buffer itself), ``X_c`` the first ``bK`` columns of ``C_l``
    (a region: T.clear / T.fill / T.copy take it)."""
    @T.prim_func
    def aliased_gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N_, K), "float16"),
                     C: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bN, bK), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            X_s = A_s[:bM, :bK]
            X_c = C_l[:bM, :bK]
            T.fill(C_l, 1)
            T.clear(X_c)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK], X_s)
                T.copy(B[bx * bN, ko * bK], B_s[:bN, :bK])
                T.gemm(X_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bM, bx * bN])
    return aliased_gemm


def test_region_aliases_are_the_buffer_or_the_region():
    text = print_func(run_passes(_aliased_gemm(), "sm_90a", until="lower_tile_ops"))
    # X_s is A_s itself (the copy and the gemm name A_s); X_c is C_l's first 32 columns,
    # cleared by a 128 x 32 nest
    assert "X_s" not in text and "X_c" not in text, text
    assert "T.gemm(A_s, B_s, C_l" in text, text
    assert "for i3 in T.Parallel(128):\n            for i4 in T.Parallel(32):\n" \
           "                C_l[i3, i4] = T.float32(0)" in text, text


def test_region_alias_builds(tmp_path):
    info = tilecute.build_cubin(_aliased_gemm(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_aliased_gemm_0"]


def test_region_alias_where_a_buffer_is_needed_is_refused():
    def bad(A: T.Tensor((128, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((128, 64), "float32")
            X_l = C_l[0:64, 0:64]
            T.gemm(A_s, B_s, X_l)
    with pytest.raises(FrontendError, match=r"T.gemm: C=X_l \(= .*:\d+\) is a region of 'C_l'"):
        T.prim_func(bad)


@pytest.mark.gpu
def test_region_alias_gemm_on_gpu():
    import torch
    kernel = tilecute.compile(_aliased_gemm())
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    c = torch.empty(256, 256, dtype=torch.float32, device="cuda")
    kernel(a, b, c)
    want = a.float() @ b.float().T
    # C_l starts at 1 except its first 32 columns of every 128 x 128 block, cleared
    bias = torch.ones(256, 256, device="cuda")
    for bx in range(2):
        bias[:, bx * 128:bx * 128 + 32] = 0
    torch.testing.assert_close(c, want + bias, rtol=1e-2, atol=1e-2)


def test_region_alias_of_a_global_fills_and_adds_its_region():
    @T.prim_func
    def corner(Y: T.Tensor((64, 64), "float32"), Z: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((4, 8), "float32")
            Yc = Y[0:4, 8:16]
            Zc = Z[4:8, 0:8]
            T.fill(Yc, 3)
            T.copy(Yc, f)
            T.atomic_add(Zc, f)
    text = print_func(run_passes(corner, "sm_90a", until="lower_tile_ops"))
    assert "Y[i1, 8 + i2] = T.float32(3)" in text, text
    assert "f[i3, i4] = Y[i3, 8 + i4]" in text, text
    assert "T.atomic_add(Z[4 + i5, i6], f[i5, i6])" in text, text


def _flattened(M=256, N_=256, bM=64, bN=64, dtype="float16"):
    """A tile copied into a 1-D fragment written at ``i * bN + j`` by a 2-D loop, then
    read back at ``i`` by a 1-D loop (TileLang's composable-index idiom)."""
    @T.prim_func
    def flattened(A: T.Tensor((M, N_), dtype), B: T.Tensor((M * N_,), dtype)):
        with T.Kernel(T.ceildiv(N_, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            a = T.alloc_fragment((bM, bN), dtype)
            b = T.alloc_fragment((bM * bN,), dtype)
            T.copy(A[by * bM, bx * bN], a)
            for i, j in T.Parallel(bM, bN):
                b[i * bN + j] = a[i, j] * 2
            for i in T.Parallel(bM * bN):
                B[(by * bM + i // bN) * N_ + bx * bN + i % bN] = b[i]
    return flattened


def test_fragment_written_at_a_linear_index_takes_the_loops_layout():
    func = run_passes(_flattened(), "sm_90a", until="layout_inference")
    layouts = {s.buffer.name: s.layout for s in walk_stmts(func.kernels[0].body)
               if isinstance(s, N.Allocate)}
    # both fragments blocked with one vector width: b[i * 64 + j] is element (i, j)'s
    # register, as in TileLang, where b's layout comes from the loop's
    assert layouts["a"] == layouts["b"] and layouts["a"].kind == "blocked", layouts
    text = print_func(func)
    assert "replicated" not in text, text


@pytest.mark.parametrize("shape", [(64, 64), (32, 96)])
def test_fragment_at_a_linear_index_builds(shape, tmp_path):
    info = tilecute.build_cubin(_flattened(bM=shape[0], bN=shape[1], N_=192 if shape[1] == 96 else 256),
                                "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_flattened_0"]


def test_fragment_at_a_non_bijective_index_stays_replicated():
    @T.prim_func
    def transposed(A: T.Tensor((64, 64), "float32"), B: T.Tensor((4096,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((64, 64), "float32")
            b = T.alloc_fragment((4096,), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(64, 64):
                b[j * 64 + i] = a[i, j]  # not the loop's order: no blocked layout
            T.copy(b, B)
    with pytest.raises(Exception, match="replicated fragment 'b'"):
        run_passes(transposed, "sm_90a", until="layout_inference")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 64), (32, 96)])
def test_fragment_at_a_linear_index_on_gpu(shape):
    import torch
    M, N_ = 256, (192 if shape[1] == 96 else 256)
    kernel = tilecute.compile(_flattened(M=M, N_=N_, bM=shape[0], bN=shape[1]))
    a = torch.randn(M, N_, dtype=torch.float16, device="cuda")
    b = torch.empty(M * N_, dtype=torch.float16, device="cuda")
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2).flatten(), rtol=0, atol=0)


def _dynamic_span(max_len=512, threads=128):
    @T.prim_func
    def dynamic_span(A: T.Tensor((max_len,), "float32"), B: T.Tensor((max_len,), "float32"),
                     n: T.int32):
        with T.Kernel(1, threads=threads) as _:
            span = T.min(n, max_len)
            for i in T.Parallel(span):
                B[i] = A[i] + 1.0
    return dynamic_span


def test_parallel_with_a_run_time_extent_spreads_over_the_threads(tmp_path):
    tilecute.build_cubin(_dynamic_span(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    # iteration f of span = min(n, 512) on thread f % 128, guarded by the run-time extent
    assert "for tc_k1 in cutlass.range(((span) + 127) // 128):\n" \
           "        tc_f2 = tc_k1 * 128 + tc_tid\n" \
           "        if tc_f2 < (span):\n" \
           "            i = tc_f2\n" in src, src


def test_parallel_with_a_run_time_extent_over_a_fragment_walks_the_fragment():
    # TileLang: the fragment's layout, its 128 elements, each iteration guarded by i < n
    # (tests/test_fragment_loop_bounds.py)
    @T.prim_func
    def head(A: T.Tensor((128,), "float32"), n: T.int32):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((128,), "float32")
            T.copy(A, f)
            for i in T.Parallel(n):
                A[i] = f[i]
    text = run_passes(head, "sm_90a").script()
    assert "for i in T.Parallel(128" in text and "if i < n:" in text, text


def test_parallel_with_a_run_time_extent_writing_locals_is_refused(tmp_path):
    # a local indexed by the T.Parallel variable: TileLang's semantic check (its ValueError),
    # at @T.prim_func, before codegen's refusal of run-time extents over locals
    with pytest.raises(ValueError, match=r"test_copy_forms.py:\d+: .*Local buffer `x` is "
                                         r"indexed by T.Parallel loop variable `i`"):
        @T.prim_func
        def into_local(A: T.Tensor((128,), "float32"), n: T.int32):
            with T.Kernel(1, threads=128) as _:
                x = T.alloc_local((128,), "float32")
                for i in T.Parallel(n):
                    x[i] = A[i]
                A[0] = x[0]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 13, 200, 600])
def test_parallel_with_a_run_time_extent_on_gpu(n):
    import torch
    kernel = tilecute.compile(_dynamic_span())
    a = torch.randn(512, device="cuda")
    b = torch.full((512,), 7.0, device="cuda")
    kernel(a, b, n)
    want = torch.full((512,), 7.0, device="cuda")
    m = min(n, 512)
    want[:m] = a[:m] + 1
    torch.testing.assert_close(b, want)


def _clear_slices():
    """``T.clear(f[8:16, 16:48])`` and ``T.clear(s[0:2, :])``: TileLang's T.clear of a
    region is T.fill(region, 0) (its clear passes the BufferRegion on to fill)."""
    @T.prim_func
    def clear_slices(A: T.Tensor((32, 64), "float32"), F: T.Tensor((32, 64), "float32"),
                     S: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((32, 64), "float32")
            s = T.alloc_shared((32, 64), "float32")
            T.fill(f, 1.0)
            T.clear(f[8:16, 16:48])
            T.copy(f, F)
            T.copy(A, s)
            T.clear(s[0:2, :])
            T.copy(s, S)
    return clear_slices


def test_clear_of_a_slice_fills_the_region_with_zero():
    text = print_func(run_passes(_clear_slices(), "sm_90a", until="lower_tile_ops"))
    import re
    assert re.search(r"for (i\d+) in T.Parallel\(8\):\n +for (i\d+) in T.Parallel\(32\):\n"
                     r" +f\[8 \+ \1, 16 \+ \2\] = T.float32\(0\)", text), text
    assert re.search(r"for (i\d+) in T.Parallel\(2\):\n +for (i\d+) in T.Parallel\(64\):\n"
                     r" +s\[\1, \2\] = T.float32\(0\)", text), text


@pytest.mark.gpu
def test_clear_of_a_slice_on_gpu():
    import torch
    a = torch.randn(32, 64, device="cuda")
    f, s = torch.empty_like(a), torch.empty_like(a)
    tilecute.compile(_clear_slices())(a, f, s)
    want_f = torch.ones(32, 64)
    want_f[8:16, 16:48] = 0
    want_s = a.cpu().clone()
    want_s[0:2] = 0
    assert torch.equal(f.cpu(), want_f) and torch.equal(s.cpu(), want_s)
