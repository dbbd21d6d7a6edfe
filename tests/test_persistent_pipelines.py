"""A T.Pipelined loop inside a persistent kernel's loop over tiles (T.Persistent, or a
T.serial loop over waves with the tile's coordinates as Lets and a bounds check): TMA
loads and a producer warpgroup that replays the loops, Lets and ifs around the pipelined
loop, stage counters that run on from tile to tile, the last step's stage released
after each tile; a loop that gets no producer keeps its copies; sm_90a cubins."""

import dataclasses

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import expr_str, print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import run_passes


def _persistent(M=1000, N=1024, K=520, sms=8, ws=True, manual=False, stages=3):
    @T.prim_func
    def pgemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
              C: T.Tensor((M, N), "float16")):
        with T.Kernel(sms, threads=256) as block_id:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            if manual:  # the loop T.Persistent stands for, written out
                for w in T.serial(T.ceildiv(T.ceildiv(M, 128) * T.ceildiv(N, 128), sms)):
                    tile = w * sms + block_id
                    bx = tile % T.ceildiv(M, 128)
                    by = tile // T.ceildiv(M, 128)
                    if by < T.ceildiv(N, 128):
                        T.clear(acc)
                        for k in T.Pipelined(T.ceildiv(K, 64), num_stages=stages,
                                             warp_specialize=ws):
                            T.copy(A[bx * 128, k * 64], A_s)
                            T.copy(B[k * 64, by * 128], B_s)
                            T.gemm(A_s, B_s, acc)
                        T.copy(acc, C[bx * 128, by * 128])
            else:
                for bx, by in T.Persistent([T.ceildiv(M, 128), T.ceildiv(N, 128)], sms, block_id):
                    T.clear(acc)
                    for k in T.Pipelined(T.ceildiv(K, 64), num_stages=stages, warp_specialize=ws):
                        T.copy(A[bx * 128, k * 64], A_s)
                        T.copy(B[k * 64, by * 128], B_s)
                        T.gemm(A_s, B_s, acc)
                    T.copy(acc, C[bx * 128, by * 128])

    return pgemm


def _lowered(func, **options):
    return run_passes(func, "sm_90a", options)


@pytest.mark.parametrize("manual", [False, True])
def test_persistent_loop_gets_a_producer_and_counters(manual):
    f = _lowered(_persistent(manual=manual))
    k = f.kernels[0]
    assert k.producer_threads == 128
    text = print_func(f)
    loads = [s for s in walk_stmts(k.body) if isinstance(s, N.TmaCopy) and s.barrier is not None]
    assert {s.src.buffer for s in loads} == {"A", "B"}
    # the producer's stage count and the compute loop's run on across the tiles
    assert "tc_pbase0[0] = tc_pbase0[0] + 9" in text and "tc_cbase0[0] = tc_cbase0[0] + 9" in text
    assert "stage_base=tc_cbase0[0]" in text
    # the producer replays the tile loop and its bounds check
    (producer,) = [s for s in k.body if isinstance(s, N.If) and s.then
                   and isinstance(s.then[0], N.SetMaxNReg) and not s.then[0].increase]
    outer = [s for s in walk_stmts(producer.then) if isinstance(s, N.For) and s.kind == "serial"]
    assert len(outer) == 2  # the tile loop, the feed loop
    checks = [expr_str(s.cond) for s in walk_stmts(outer[0].body) if isinstance(s, N.If)]
    assert any(c.startswith("by") and "<" in c for c in checks), checks
    # each tile's last stage is released after its loop
    arrives = [s for s in walk_stmts(k.body) if isinstance(s, N.MBarrierArrive)]
    assert len(arrives) == 2


def test_persistent_loop_without_a_producer_keeps_its_copies():
    f = _lowered(_persistent(ws=False))
    assert f.kernels[0].producer_threads == 0
    assert not [s for s in walk_stmts(f.kernels[0].body)
                if isinstance(s, N.TmaCopy) and s.barrier is not None]
    assert not any(isinstance(s, N.For) and s.stage_base is not None
                   for s in walk_stmts(f.kernels[0].body))


@pytest.mark.parametrize("manual,stages", [(False, 3), (True, 2), (False, 4)])
def test_persistent_gemm_builds_sm90a_cubin(tmp_path, manual, stages):
    info = tilecute.build_cubin(_persistent(manual=manual, stages=stages), "sm_90a",
                                out_dir=str(tmp_path))
    assert info.kernel_names
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "setmaxregister_decrease" in src and "tc_cbase0" in src


def test_stage_base_is_not_an_input():
    import dataclasses
    from tilecute.ir.validate import ValidationError

    f = _persistent()
    k = f.kernels[0]

    def mark(stmts):
        out = []
        for s in stmts:
            if isinstance(s, N.For) and s.kind == "pipelined":
                s = dataclasses.replace(s, stage_base=N.Const(0, "int32"))
            elif isinstance(s, N.For):
                s = dataclasses.replace(s, body=mark(s.body))
            elif isinstance(s, N.If):
                s = dataclasses.replace(s, then=mark(s.then), orelse=mark(s.orelse))
            out.append(s)
        return tuple(out)
    f = dataclasses.replace(f, kernels=(dataclasses.replace(k, body=mark(k.body)),))
    with pytest.raises(ValidationError, match="stage_base is the warp-specialization pass's"):
        run_passes(f, "sm_90a", {}, until="validate")


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,sms,manual,stages", [
    (1000, 1024, 520, 8, False, 3),   # ragged M, ragged K, several tiles per block
    (512, 384, 1000, 5, True, 2),     # waves not a multiple of the blocks, 2 stages
    (256, 256, 64, 16, False, 3),     # one K step per tile; more blocks than tiles
])
def test_persistent_gemm_on_gpu(M, N, K, sms, manual, stages):
    import torch

    torch.manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    tilecute.compile(_persistent(M, N, K, sms, manual=manual, stages=stages))(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-3)


def _persistent_stored(M=1000, N=1024, K=520, sms=8):
    """A persistent GEMM whose tiles leave through a shared tile and a TMA store."""
    @T.prim_func
    def pgemm_store(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                    C: T.Tensor((M, N), "float16")):
        with T.Kernel(sms, threads=256) as block_id:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, 128), T.ceildiv(N, 128)], sms, block_id):
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                    T.copy(A[bx * 128, k * 64], A_s)
                    T.copy(B[k * 64, by * 128], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C_s)
                T.copy(C_s, C[bx * 128, by * 128])

    return pgemm_store


def test_tma_store_waits_for_its_read_before_the_next_barrier():
    """The thread that issues a tile's TMA store waits for TMA's read of C_s only before
    the barrier that precedes the next tile's writes to C_s (and at the kernel's end), so
    the read overlaps the next tile's main loop."""
    f = _lowered(_persistent_stored())
    k = f.kernels[0]
    (store,) = [s for s in walk_stmts(k.body) if isinstance(s, N.TmaCopy) and s.barrier is None]
    assert not store.wait_read
    (compute,) = [s.orelse for s in k.body if isinstance(s, N.If) and s.orelse]
    assert isinstance(compute[-1], N.TmaStoreWait)  # the kernel's end
    (tiles,) = [s for s in compute if isinstance(s, N.For)]
    body = [s for s in walk_stmts(tiles.body)]
    waits = [i for i, s in enumerate(body) if isinstance(s, N.TmaStoreWait)]
    assert len(waits) == 1
    # right before the barrier that orders the next tile's writes to C_s after the read
    after = body[waits[0] + 1]
    assert isinstance(after, N.Barrier)
    writes = [i for i, s in enumerate(body) if isinstance(s, N.For) and s.kind == "parallel"
              and "C_s" in print_func(dataclasses.replace(f, kernels=(dataclasses.replace(
                  k, body=(s,)),)))]
    assert writes and waits[0] < writes[0]
    assert "T.tma_store_wait()" in print_func(f) and "wait_read=False" in print_func(f)


def test_tma_store_wait_is_not_an_input():
    from tilecute.ir.validate import ValidationError

    f = _persistent_stored()
    k = f.kernels[0]
    f = dataclasses.replace(f, kernels=(dataclasses.replace(
        k, body=k.body + (N.TmaStoreWait(),)),))
    with pytest.raises(ValidationError, match="placed by the barrier pass"):
        run_passes(f, "sm_90a", {}, until="validate")


def test_deferred_tma_store_builds_sm90a_cubin(tmp_path):
    tilecute.build_cubin(_persistent_stored(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "wait=False" in src and "tct.store_wait()" in src


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,sms", [(1000, 1000, 520, 8), (512, 640, 128, 3)])
def test_deferred_tma_store_on_gpu(M, N, K, sms):
    import torch

    torch.manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    tilecute.compile(_persistent_stored(M, N, K, sms))(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-3)


def _attention(dim=128, causal=False, kv_heads=None):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import attention as A

    return A, A.flash_attention(8, dim, kv_heads, causal, persistent=True, sms=16)


def test_persistent_attention_loads_q_once_per_tile_by_the_producer():
    A, func = _attention()
    f = run_passes(func, "sm_90a", A.OPTIONS)
    k = f.kernels[0]
    assert k.producer_threads == 128 and k.grid[0].value == 16
    loads = [s for s in walk_stmts(k.body) if isinstance(s, N.TmaCopy) and s.barrier is not None]
    assert {s.src.buffer for s in loads} == {"Q", "K", "V"}
    text = print_func(f)
    # the producer waits for the last tile's Q to be free before it loads the next one
    assert "tc_prun0[0] = tc_prun0[0] + 1" in text and "tc_crun0[0] = tc_crun0[0] + 1" in text
    # the overlapped loop (softmax between the GEMMs) keeps its stages counted on
    assert "T.wgmma_gemm(P, V_s, acc_o" in text and "stage_base=tc_cbase0[0] + 1" in text


@pytest.mark.parametrize("dim,causal,kv_heads", [(128, False, None), (64, True, 2), (256, True, None)])
def test_persistent_attention_builds_sm90a_cubin(tmp_path, dim, causal, kv_heads):
    A, func = _attention(dim, causal, kv_heads)
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path), options=A.OPTIONS)
    assert info.kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("dim,causal,kv_heads,seqs", [
    (128, False, None, (1, 127, 1000)), (128, True, None, (4097,)), (64, True, 2, (1000,)),
    (256, False, None, (300,))])
def test_persistent_attention_on_gpu(dim, causal, kv_heads, seqs):
    import torch

    A, func = _attention(dim, causal, kv_heads)
    kernel = tilecute.compile(func, out_idx=[3, 4], options=A.OPTIONS)
    for s in seqs:
        torch.manual_seed(s)
        q = torch.randn(2, s, 8, dim, device="cuda", dtype=torch.float16)
        k = torch.randn(2, s, kv_heads or 8, dim, device="cuda", dtype=torch.float16)
        v = torch.randn(2, s, kv_heads or 8, dim, device="cuda", dtype=torch.float16)
        o, lse = kernel(q, k, v)
        rep = 8 // (kv_heads or 8)
        kk, vv = (t.repeat_interleave(rep, dim=2) for t in (k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), kk.transpose(1, 2).float(), vv.transpose(1, 2).float(),
            is_causal=causal).transpose(1, 2)
        torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)
        scores = (q.transpose(1, 2).float() @ kk.transpose(1, 2).float().transpose(-1, -2)) / dim ** 0.5
        if causal:
            scores = scores.masked_fill(torch.ones(s, s, device="cuda").triu(1).bool(), float("-inf"))
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1), atol=2e-2, rtol=2e-3)


def _grid_synced(M=1024):
    @T.prim_func
    def two_phase(A: T.Tensor((4, M, 64), "float16"), A2: T.Tensor((4, 64, 64), "float16"),
                  B: T.Tensor((4, 64, 64), "float32"), C: T.Tensor((4, 64, 64), "float32")):
        with T.Kernel(8, threads=256) as block_id:
            A_s = T.alloc_shared((64, 64), "float16")
            Q_s = T.alloc_shared((64, 64), "float16")
            Q2_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            for w in T.serial(T.ceildiv(4, 8)):
                tile = w * 8 + block_id
                if tile < 4:
                    T.copy(A[tile, 0:64, :], Q_s)
                    T.copy(A2[tile, :, :], Q2_s)
                    T.clear(acc)
                    for k in T.Pipelined(M // 64, num_stages=2):
                        T.copy(A[tile, k * 64:(k + 1) * 64, :], A_s)
                        T.gemm(Q_s, A_s, acc, transpose_B=True)
                        T.gemm(Q2_s, A_s, acc, transpose_B=True)
                    T.copy(acc, B[tile, :, :])
            T.sync_grid()
            for w in T.serial(T.ceildiv(4, 8)):
                tile = w * 8 + block_id
                if tile < 4:
                    for i, j in T.Parallel(64, 64):
                        C[tile, i, j] = B[tile, i, j] * 2.0

    return two_phase


def test_grid_synced_persistent_kernel_keeps_its_copies(tmp_path):
    # T.sync_grid keeps the producer off; the tile's own loads (two, before the loop) and
    # the loop's go back to copies (once lost track of the loop after the first two)
    f = _lowered(_grid_synced())
    assert f.kernels[0].producer_threads == 0
    assert not [s for s in walk_stmts(f.kernels[0].body)
                if isinstance(s, N.TmaCopy) and s.barrier is None and s.src.buffer in ("A", "A2")]
    assert tilecute.build_cubin(_grid_synced(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_counters_do_not_move_back_for_an_empty_run():
    # a run whose loop extent comes out negative runs no step: the stage counters stay
    @T.prim_func
    def shrinking(A: T.Tensor((1024, 512), "float16"), B: T.Tensor((512, 1024), "float16"),
                  C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(8, threads=256) as block_id:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            for w in T.serial(8):
                tile = w * 8 + block_id
                bx = tile % 8
                by = tile // 8
                T.clear(acc)
                for k in T.Pipelined(bx - 2, num_stages=3, warp_specialize=True):
                    T.copy(A[bx * 128, k * 64], A_s)
                    T.copy(B[k * 64, by * 128], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[bx * 128, by * 128])

    text = print_func(_lowered(shrinking))
    assert "tc_pbase0[0] = tc_pbase0[0] + T.max(bx - 2" in text
    assert "tc_cbase0[0] = tc_cbase0[0] + T.max(bx - 2" in text


def test_plan_tiles_covers_every_tile_once_and_balances():
    A, _ = _attention()
    for batch, heads, seq, dim, causal, bm in ((8, 32, 4096, 128, True, 128),
                                              (3, 5, 1000, 64, True, 192),
                                              (2, 8, 300, 256, False, 128)):
        plan = A.plan_tiles(batch, heads, seq, dim, causal, sms=132, block_M=bm)
        tiles = [t for row in plan for t in row if t >= 0]
        blocks_m = -(-seq // bm)
        assert sorted(tiles) == list(range(batch * heads * blocks_m))
        assert len(plan) == 132 and len({len(row) for row in plan}) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dim,causal,seq", [(128, True, 1000), (64, True, 4097), (128, False, 300)])
def test_planned_attention_on_gpu(dim, causal, seq):
    import torch

    A, _ = _attention()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    func = A.flash_attention(8, dim, None, causal, persistent=True, sms=sms, planned=True)
    kernel = tilecute.compile(func, out_idx=[3, 4], options=A.OPTIONS)
    block_M = 192 if dim == 64 else 128
    sched = torch.tensor(A.plan_tiles(2, 8, seq, dim, causal, sms, block_M=block_M),
                         dtype=torch.int32, device="cuda")
    torch.manual_seed(seq)
    q, k, v = (torch.randn(2, seq, 8, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    o, _ = kernel(q, k, v, sched)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2).float() for x in (q, k, v)), is_causal=causal).transpose(1, 2)
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)


def _row_tiles(M=512, K=256, sms=3, read_after=False):
    """A persistent kernel whose tiles load their own rows (Q-like, before the pipelined
    loop) and walk a number of K steps that depends on the tile (none for the first two):
    acc = Q_s @ B[k-th 64 columns]^T summed; with ``read_after`` the tile's rows are read
    again after the loop (added to the output)."""
    @T.prim_func
    def row_tiles(A: T.Tensor((M, 64), "float16"), B: T.Tensor((K, 64), "float16"),
                  C: T.Tensor((M, 64), "float32")):
        with T.Kernel(sms, threads=128) as block_id:
            Q_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            for w in T.serial(T.ceildiv(M // 64, sms)):
                tile = w * sms + block_id
                if tile < M // 64:
                    T.copy(A[tile * 64:(tile + 1) * 64, :], Q_s)
                    T.clear(acc)
                    for k in T.Pipelined(T.min(tile - 2, K // 64), num_stages=2,
                                         warp_specialize=True):
                        T.copy(B[k * 64:(k + 1) * 64, :], B_s)
                        T.gemm(Q_s, B_s, acc, transpose_B=True)
                    if read_after:
                        for i, j in T.Parallel(64, 64):
                            acc[i, j] += Q_s[i, j]
                    T.copy(acc, C[tile * 64:(tile + 1) * 64, :])

    return row_tiles


def test_tile_rows_are_released_after_their_last_read_in_the_loop():
    """Nothing after the loop reads the tile's rows: the compute warpgroups release them in
    the loop's last step, right after its GEMM (the producer loads the next tile's while
    this tile's epilogue runs), and after the loop only when it ran no step."""
    text = print_func(_lowered(_row_tiles()))
    body = text.split("T.Pipelined")[-1]
    assert "if k == T.min(tile - 2, 4) - 1:" in body
    assert "if T.min(tile - 2, 4) <= 0:" in text
    # with the rows read after the loop, they are released at the tile's end as before
    text = print_func(_lowered(_row_tiles(read_after=True)))
    assert "if k == " not in text.split("T.Pipelined")[-1]
    assert "<= 0:" not in text


@pytest.mark.parametrize("read_after", [False, True])
def test_tile_rows_release_builds_sm90a_cubin(tmp_path, read_after):
    assert tilecute.build_cubin(_row_tiles(read_after=read_after), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("read_after", [False, True])
def test_tile_rows_release_on_gpu(read_after):
    # tiles 0 and 1 run no step (their rows are released after the loop; a missed release
    # hangs the producer), the others 1 to 4 steps, 3 blocks walking 8 tiles
    import torch

    torch.manual_seed(3)
    a = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    c = torch.full((512, 64), float("nan"), device="cuda")
    tilecute.compile(_row_tiles(read_after=read_after))(a, b, c)
    want = torch.zeros(512, 64, device="cuda")
    for t in range(8):
        rows = a[t * 64:(t + 1) * 64].float()
        for k in range(max(min(t - 2, 4), 0)):
            want[t * 64:(t + 1) * 64] += rows @ b[k * 64:(k + 1) * 64].float().T
        if read_after:
            want[t * 64:(t + 1) * 64] += rows
    torch.testing.assert_close(c, want, atol=2e-2, rtol=2e-3)
