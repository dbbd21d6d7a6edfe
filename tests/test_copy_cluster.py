"""TileLang's cluster copies (its programming guide's "Cluster TMA: Multicast and SM-to-SM
Copy"): ``T.copy_cluster(src, dst, cluster_mask=m)`` (the blocks of the mask get the tile
of its lowest rank), ``T.tma_copy(..., cluster_mask=m)`` (the same with the program's
barrier), and ``T.copy_cluster(src, dst, dst_block=b[, remote_barrier=bar])`` (a shared
region stored into another block's shared memory, ``N.ClusterCopy``)."""

import dataclasses

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.kernel import CodegenError
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def tile_multicast(M, N, bm, bn, mask, cluster=(4, 1, 1)):
    """Each block copies its (bm, bn) tile of A to B through shared memory; the blocks
    of ``mask`` read the tile of the mask's lowest rank instead."""
    @T.prim_func
    def mc(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.ClusterKernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128,
                             cluster_dims=cluster) as (bx, by):
            tile = T.alloc_shared((bm, bn), T.float16)
            T.copy_cluster(A[by * bm, bx * bn], tile, cluster_mask=mask)
            T.copy(tile, B[by * bm, bx * bn])
    return mc


def tma_multicast(M, N, bm, bn, mask):
    """The same with T.tma_copy and the program's own barrier (split phase)."""
    @T.prim_func
    def tmc(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.ClusterKernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128,
                             cluster_dims=(2, 1, 1)) as (bx, by):
            tile = T.alloc_shared((bm, bn), T.float32)
            full = T.alloc_barrier(128)
            col = bx * bn
            T.tma_copy(A[by * bm, col], tile, barrier=full, cluster_mask=mask)
            T.mbarrier_arrive(full)
            T.mbarrier_wait_parity(full, 0)
            for i, j in T.Parallel(bm, bn):
                B[by * bm + i, bx * bn + j] = tile[i, j] + 1.0
    return tmc


def split_k_rank_panels(M, N, K, bm=64, bn=64, bk=32):
    """The guide's split-K pattern in a cluster of 2 along x: each rank walks its own K
    panels (``k0 = (rank + 2 * ko) * bk``); with cluster_mask=0b11 both ranks get rank 0's
    A panel, so C = A[:, rank-0 panels] @ B[rank's panels] summed over the two ranks; rank
    1 pushes its partial into rank 0's shared slot, rank 0 adds and stores."""
    @T.prim_func
    def sk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
           C: T.Tensor((M, N), T.float32)):
        with T.ClusterKernel(2 * T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128,
                             cluster_dims=(2, 1, 1)) as (bx, by):
            rank = T.block_rank_in_cluster()
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            parts = T.alloc_shared((2, bm, bn), T.float32)
            done = T.alloc_cluster_barrier([1])
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk * 2), num_stages=2):
                k0 = (rank + ko * 2) * bk
                T.copy_cluster(A[by * bm, k0], A_s, cluster_mask=0b11)
                T.copy(B[k0, bx // 2 * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, parts[rank, :, :])
            T.cluster_sync()
            if rank == 1:
                T.copy_cluster(parts[1, :, :], parts[1, :, :], dst_block=0, remote_barrier=done[0])
            if rank == 0:
                T.mbarrier_wait_parity(done[0], 0)
                for i, j in T.Parallel(bm, bn):
                    C[by * bm + i, bx // 2 * bn + j] = parts[0, i, j] + parts[1, i, j]
    return sk


def cluster_gemm(M, N, K, bm=128, bn=128, bk=64):
    """A GEMM whose blocks along N, in clusters of 2, take their A tiles by multicast (the
    tile is the same for both: the origin needs no issuer's select, and the compiler's
    multicast pass may share it)."""
    @T.prim_func
    def cg(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
           C: T.Tensor((M, N), T.float16)):
        with T.ClusterKernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256,
                             cluster_dims=(2, 1, 1)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy_cluster(A[by * bm, ko * bk], A_s, cluster_mask=0b11)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return cg


def push(n, barrier=True, dtype=T.float32, dst_dtype=T.float32):
    """Block 0 of a cluster of 2 stores 2 * A into block 1's shared buffer; block 1 copies
    it to B (after the remote barrier's phase, or the cluster's barrier)."""
    @T.prim_func
    def pushed(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dst_dtype)):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as pid:
            mine = T.alloc_shared((n,), dtype)
            theirs = T.alloc_shared((n,), dst_dtype)
            arrived = T.alloc_cluster_barrier([1])
            T.fill(theirs, 0)
            T.cluster_sync()
            if pid == 0:
                for i in T.Parallel(n):
                    mine[i] = A[i] * 2
                if barrier:
                    T.copy_cluster(mine, theirs, dst_block=1, remote_barrier=arrived[0])
                else:
                    T.copy_cluster(mine, theirs, dst_block=1)
            if not barrier:
                T.cluster_sync()
            if pid == 1:
                if barrier:
                    T.mbarrier_wait_parity(arrived[0], 0)
                for i in T.Parallel(n):
                    B[i] = theirs[i]
    return pushed


def push_columns(M, wide, cols):
    """A (M, cols) slice of (M, wide) shared buffers pushed with a barrier (TileLang's
    non-contiguous region)."""
    @T.prim_func
    def cols_pushed(A: T.Tensor((M, cols), T.float32), B: T.Tensor((M, cols), T.float32)):
        with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as pid:
            src = T.alloc_shared((M, wide), T.float32)
            dst = T.alloc_shared((M, wide), T.float32)
            bar = T.alloc_cluster_barrier([1])
            T.fill(dst, -1.0)
            T.cluster_sync()
            if pid == 0:
                for i, j in T.Parallel(M, cols):
                    src[i, j] = A[i, j]
                T.copy_cluster(src[0:M, 0:cols], dst[0:M, 0:cols], dst_block=1,
                               remote_barrier=bar[0])
            if pid == 1:
                T.mbarrier_wait_parity(bar[0], 0)
                for i, j in T.Parallel(M, cols):
                    B[i, j] = dst[i, j]
    return cols_pushed


# ---- CPU: IR, source, cubins -------------------------------------------------------------
def test_multicast_origin_is_the_issuers_in_the_mask(tmp_path):
    func = tile_multicast(256, 512, 64, 64, 0b0110)
    copy = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Copy)
                and s.dst.buffer == "tile")
    col = copy.src.starts[1]
    assert isinstance(col, N.Select)  # rank 1 and 2 read rank 1's column, the others their own
    text = func.script()
    assert "6 >> bx % 4 & 1 != 0" in text and "(bx - bx % 4 + 1) * 64" in text
    assert T.from_script(text) == func
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_multicast_of_one_rank_or_none_is_a_plain_copy():
    for mask in (0b0100, 0):
        func = tile_multicast(128, 256, 64, 64, mask)
        copy = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Copy)
                    and s.dst.buffer == "tile")
        assert not any(isinstance(x, N.Select) for x in copy.src.starts)


def test_tma_copy_cluster_mask_builds(tmp_path):
    func = tma_multicast(128, 128, 32, 64, 0b11)
    tma = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.TmaCopy))
    assert isinstance(tma.src.starts[1], N.Select)  # col = bx * bn, followed through the name
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_split_k_panels_follow_the_rank_through_names(tmp_path):
    func = split_k_rank_panels(128, 128, 256)
    text = func.script()
    # k0 = (rank + ko * 2) * bk: the issuer's rank is 0
    assert "(0 + ko * 2) * 32" in text
    assert any(isinstance(s, N.ClusterCopy) for s in walk_stmts(func.kernels[0].body))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_cluster_gemm_multicast_of_a_shared_tile_builds(tmp_path):
    func = cluster_gemm(256, 512, 256)
    copies = [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Copy)
              and s.dst.buffer == "A_s"]
    assert not any(isinstance(x, N.Select) for x in copies[0].src.starts)  # the same tile
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("barrier", [True, False])
def test_push_source_and_cubin(tmp_path, barrier):
    func = push(256, barrier)
    cc = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.ClusterCopy))
    assert (cc.barrier is not None) == barrier and cc.block == N.Const(1, "int32")
    assert cc.src.extents == (N.Const(256, "int32"),)
    assert T.from_script(func.script()) == func
    assert from_json(to_json(func)) == func
    src = tilecute.compile(func).get_kernel_source()
    assert "tct.remote_base(theirs, 1)" in src and "tct.remote_store(" in src
    assert ("tct.remote_arrive(arrived, 1)" in src) == barrier
    if barrier:  # the barrier's init is seen cluster-wide before block 0 arrives on it
        assert src.index("tct.init_barriers(arrived") < src.index("tct.cluster_sync()")
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_push_casts_and_column_slices_build(tmp_path):
    assert tilecute.build_cubin(push(128, True, T.float16, T.float32), "sm_90a",
                                out_dir=str(tmp_path / "a")).kernel_names
    assert tilecute.build_cubin(push(128, True, T.int8, T.int8), "sm_90a",
                                out_dir=str(tmp_path / "b")).kernel_names
    func = push_columns(16, 64, 24)
    cc = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.ClusterCopy))
    assert [int(e.value) for e in cc.dst.extents] == [16, 24]
    src = tilecute.compile(func).get_kernel_source()
    assert "cutlass.range(tc_tid, 384, 128)" in src  # 16 * 24 elements over 128 threads
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / "c")).kernel_names


def test_annotation_keys_are_the_arguments():
    """TileLang folds the arguments into ``annotations`` (its values win): the keys
    ``dst_block`` and ``barrier`` give the same copy as the arguments."""
    by_args = _parse("T.copy_cluster(s, d, dst_block=1, remote_barrier=bar[0])")
    by_keys = _parse("T.copy_cluster(s, d, annotations={'dst_block': 1, 'barrier': bar[0]})")
    copies = [next(x for x in walk_stmts(f.kernels[0].body) if isinstance(x, N.ClusterCopy))
              for f in (by_args, by_keys)]
    assert copies[0] == dataclasses.replace(copies[1], loc=copies[0].loc)
    assert copies[1].barrier is not None and copies[1].block == N.Const(1, "int32")


def test_remote_destination_keeps_its_bytes():
    """Another block stores into 'theirs' whenever it runs: its bytes are its own the whole
    kernel (block 1's 'mine' is dead there by lifetime, and would otherwise share them)."""
    from tilecute.transform.shared_memory import place
    placed = place(push(256).kernels[0])
    slots = {s.buffer.name: s.slot for s in walk_stmts(placed.body) if isinstance(s, N.Allocate)
             and s.slot is not None}
    lo, hi = slots["theirs"].offset, slots["theirs"].offset + 1024
    assert not lo <= slots["mine"].offset < hi


# ---- refusals, by name -------------------------------------------------------------------
def _parse(body, cluster="(2, 1, 1)", extra=""):
    src = f'''
import tilecute.language as T

@T.prim_func
def bad(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
    with T.ClusterKernel(2, 1, threads=128, cluster_dims={cluster}) as (bx, by):
        s = T.alloc_shared((64, 64), T.float32)
        d = T.alloc_shared((64, 64), T.float32)
        bar = T.alloc_cluster_barrier([1])
        v = T.alloc_var(T.int32)
        v = bx
        {extra}
        {body}
'''
    return T.from_script(src)


@pytest.mark.parametrize("body, message", [
    ("T.copy_cluster(s, d, dst_block=1, cluster_mask=3)", "not both"),
    ("T.copy_cluster(A[0, 0], s, remote_barrier=bar[0])", "remote_barrier signals the end"),
    ("T.copy_cluster(s, d, cluster_mask=3)", "a multicast copy loads a global tile"),
    ("T.copy_cluster(A[0, 0], s, cluster_mask=0b111)", "ranks the kernel's cluster of 2"),
    ("T.copy_cluster(A[0, v * 0], s, cluster_mask=3)", "reads 'v'"),
    ("T.copy_cluster(A[0, 0], s, cluster_mask=1.5)", "a bitmask of ranks"),
    ("T.copy_cluster(A[0, 0], d, dst_block=1)", "copies a shared region to a shared region"),
    ("T.copy_cluster(s, d, dst_block=2)", "ranks 0..1"),
    ("T.copy_cluster(s, d, dst_block=1.0)", "an integer"),
    ("T.copy_cluster(s, d, dst_block=1, eviction_policy='evict_first')", "eviction_policy"),
    ("T.copy_cluster(s, d, dst_block=1, coalesced_width=4)", "coalesced_width"),
    ("T.copy_cluster(s, d, dst_block=1, annotations={'x': 1})", "'x'"),
    ("T.copy_cluster(s[0:8, 0:8], d[0:4, 0:8], dst_block=1)", "not the same elements"),
    ("T.tma_copy(s, B[0, 0], cluster_mask=3)", "a multicast is a load"),
])
def test_refusals_name_the_argument(body, message):
    with pytest.raises(FrontendError, match=message):
        _parse(body)


def test_dst_block_needs_a_cluster_and_sm90(tmp_path):
    func = _parse("T.copy_cluster(s, d, dst_block=0)", cluster="(1, 1, 1)")
    with pytest.raises(CodegenError, match="needs a kernel launched in clusters"):
        tilecute.compile(func)
    # on sm_80 the cluster launch itself is refused first (launch_abi), naming the form
    with pytest.raises(Exception, match=r"clusters of \d+ blocks .* sm_90\+; the target is sm_80"):
        tilecute.build_cubin(_parse("T.copy_cluster(s, d, dst_block=1)"), "sm_80",
                             out_dir=str(tmp_path))


# ---- GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
def test_multicast_on_gpu():
    import torch
    M, N, bm, bn = 256, 512, 64, 64
    for mask in (0b0011, 0b0110, 0b1111):
        k = tilecute.compile(tile_multicast(M, N, bm, bn, mask))
        a = torch.randn(M, N, device="cuda", dtype=torch.float16)
        b = torch.zeros_like(a)
        k(a, b)
        want = torch.empty_like(a)
        low = (mask & -mask).bit_length() - 1
        for bx in range(N // bn):
            rank = bx % 4
            src = bx - rank + low if mask >> rank & 1 else bx
            want[:, bx * bn:(bx + 1) * bn] = a[:, src * bn:(src + 1) * bn]
        torch.testing.assert_close(b, want, rtol=0, atol=0)
    k = tilecute.compile(tma_multicast(128, 256, 32, 64, 0b10))  # rank 1 alone: its own
    a = torch.randn(128, 256, device="cuda")
    b = torch.empty_like(a)
    k(a, b)
    torch.testing.assert_close(b, a + 1, rtol=0, atol=0)
    k = tilecute.compile(tma_multicast(128, 256, 32, 64, 0b11))  # both: rank 0's tile
    k(a, b)
    want = (a + 1).reshape(128, 2, 2, 64)[:, :, 0:1, :].expand(128, 2, 2, 64).reshape(128, 256)
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_split_k_panels_on_gpu():
    import torch
    M, N, K = 128, 192, 512
    k = tilecute.compile(split_k_rank_panels(M, N, K))
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda")
    k(a, b, c)
    bk = 32
    # panel ko of rank r: columns (r + 2 ko) * bk of B's rows; A's panel is rank 0's
    want = torch.zeros(M, N, device="cuda")
    for ko in range(K // (2 * bk)):
        a0 = a[:, 2 * ko * bk:(2 * ko + 1) * bk].float()
        for r in range(2):
            want += a0 @ b[(r + 2 * ko) * bk:(r + 2 * ko + 1) * bk].float()
    torch.testing.assert_close(c, want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_cluster_gemm_on_gpu():
    import torch
    M, N, K = 256, 512, 320
    k = tilecute.compile(cluster_gemm(M, N, K))
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    k(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.gpu
def test_push_on_gpu():
    import torch
    for barrier in (True, False):
        k = tilecute.compile(push(1000, barrier))
        a = torch.randn(1000, device="cuda")
        b = torch.empty_like(a)
        k(a, b)
        torch.testing.assert_close(b, a * 2, rtol=0, atol=0)
    k = tilecute.compile(push(256, True, T.float16, T.float32))
    a = torch.randn(256, device="cuda", dtype=torch.float16)
    b = torch.empty(256, device="cuda")
    k(a, b)
    torch.testing.assert_close(b, (a * 2).float(), rtol=0, atol=0)
    k = tilecute.compile(push_columns(16, 64, 24))
    a = torch.randn(16, 24, device="cuda")
    b = torch.empty_like(a)
    k(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
