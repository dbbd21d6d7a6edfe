"""A shared buffer each step of a loop touches at its own slice (``T.copy(row_max,
S[:, k])``: a decode kernel keeping every step's row maxima for a second pass) needs no
barrier per step for what the step before did there: no two steps touch one element.
Where a step reads the slice of another (``S[:, k - 1]``), or a buffer on the same bytes is
touched, the barrier stays."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def step_maxima(steps=8, rows=64, cols=64, previous=False):
    """Row maxima of each step's tile kept in shared memory, normalised after the loop;
    ``previous``: each step also reads the last step's column (a real carry)."""

    @T.prim_func
    def kept(X: T.Tensor((steps, rows, cols), "float32"), O: T.Tensor((rows, steps), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_fragment((rows, cols), "float32")
            m = T.alloc_fragment((rows,), "float32")
            top = T.alloc_fragment((rows,), "float32")
            S = T.alloc_shared((rows, steps), "float32")
            T.fill(top, -T.infinity("float32"))
            for k in T.serial(steps):
                T.copy(X[k, :, :], tile)
                T.reduce_max(tile, m, dim=1)
                if previous:
                    for i in T.Parallel(rows):
                        m[i] = m[i] + T.if_then_else(k > 0, S[i, T.max(k - 1, 0)], 0.0)
                T.copy(m, S[:, k])
                for i in T.Parallel(rows):
                    top[i] = T.max(top[i], m[i])
            for i, j in T.Parallel(rows, steps):
                O[i, j] = S[i, j] - top[i]

    return kept


def _loop_body(func, head="for k in T.serial("):
    """The lines of the first loop starting with ``head`` after the barrier pass."""
    lines = print_func(run_passes(func, "sm_90a", until="insert_barriers")).splitlines()
    at = next(n for n, line in enumerate(lines) if head in line)
    depth = len(lines[at]) - len(lines[at].lstrip())
    body = []
    for line in lines[at + 1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line)
    return "\n".join(body)


def test_no_barrier_per_step_for_each_steps_own_column():
    assert "T.sync_threads(" not in _loop_body(step_maxima())


def test_a_step_reading_the_last_steps_column_keeps_its_barrier():
    assert "T.sync_threads(" in _loop_body(step_maxima(previous=True))


def test_builds():
    kernel = tilecute.compile(step_maxima(), out_idx=[1])
    assert kernel.ensure_cubin().endswith(".cubin")


@pytest.mark.gpu
@pytest.mark.parametrize("previous", [False, True])
def test_step_maxima_on_gpu(previous):
    torch.manual_seed(0)
    steps, rows, cols = 8, 64, 64
    x = torch.randn(steps, rows, cols, device="cuda")
    out = tilecute.compile(step_maxima(steps, rows, cols, previous), out_idx=[1])(x)
    m = x.amax(dim=2).T.contiguous()  # (rows, steps)
    if previous:
        for k in range(1, steps):
            m[:, k] += m[:, k - 1]
    torch.testing.assert_close(out, m - m.amax(dim=1, keepdim=True), rtol=0, atol=0)


def chunk_refills(steps=4, rows=64, chunks=4, width=64):
    """Every thread sums a (rows, chunks * width) tile per step; the next step's tile is
    TMA-loaded chunk by chunk (``T.tma_copy`` per chunk on its own mbarrier, all threads
    arriving), as flash-MLA kernels refill their key tiles: the threads' reads of the tile
    must be fenced and finished before the first chunk's load -- one barrier before the
    chunk loop, not one per chunk."""
    cols = chunks * width

    @T.prim_func
    def refill(X: T.Tensor((steps * rows, cols), "float16"), O: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_shared((chunks, rows, width), "float16")
            acc = T.alloc_fragment((rows, cols), "float32")
            ready = T.alloc_barrier([128] * chunks)
            T.clear(acc)
            for j in T.unroll(chunks):
                T.tma_copy(X[0:rows, j * width:(j + 1) * width], tile[j, :, :], barrier=ready[j])
                T.barrier_arrive(ready[j])
            for k in T.serial(steps):
                for j in T.unroll(chunks):
                    T.barrier_wait(ready[j], k % 2)
                for i, c in T.Parallel(rows, cols):
                    acc[i, c] += T.cast(tile[c // width, i, c % width], "float32")
                if k < steps - 1:
                    for j in T.unroll(chunks):
                        T.tma_copy(X[(k + 1) * rows:(k + 2) * rows, j * width:(j + 1) * width],
                                   tile[j, :, :], barrier=ready[j])
                        T.barrier_arrive(ready[j])
            T.copy(acc, O)

    return refill


def test_one_fenced_barrier_before_a_chunked_tma_refill():
    body = _loop_body(chunk_refills())
    assert body.count("T.sync_threads(") == 1
    refill = body[body.index("if k < "):]
    assert refill.index("T.sync_threads(") < refill.index("for j")  # before the chunk loop
    assert refill.count("T.sync_threads(") == 1


@pytest.mark.gpu
def test_chunked_tma_refill_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(4 * 64, 256, device="cuda", dtype=torch.float16)
    out = tilecute.compile(chunk_refills(), out_idx=[1])(x)
    torch.testing.assert_close(out, x.float().view(4, 64, 256).sum(0), rtol=1e-5, atol=1e-4)


def shared_row_stats(steps=4, bm=64, bn=64, dim=64, mma_rows=True):
    """Online row maxima of S = Q K_k^T kept in a shared vector between steps (as
    hand-scheduled flash kernels share them between warpgroups): read into a row fragment
    at the step's start, written back at its end.  The accesses of each element are made
    by the quad of one warp that holds its row of the accumulator in both nests, so a warp
    barrier orders them; ``mma_rows=False`` reads the vector in a nest of its own (spread
    over the threads) and writes it there too: a block barrier."""

    @T.prim_func
    def stats(Q: T.Tensor((bm, dim), "float16"), K: T.Tensor((steps * bn, dim), "float16"),
              M: T.Tensor((bm,), "float32"), D: T.Tensor((bm,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((bm, dim), "float16")
            K_s = T.alloc_shared((bn, dim), "float16")
            S = T.alloc_fragment((bm, bn), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_shared = T.alloc_shared((bm,), "float32")
            d_shared = T.alloc_shared((bm,), "float32")
            T.copy(Q, Q_s)
            for i in T.Parallel(bm):
                m_shared[i] = -T.infinity("float32")
                d_shared[i] = 0.0
            for k in T.serial(steps):
                T.copy(K[k * bn:(k + 1) * bn, :], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                T.copy(m_shared, m)
                T.reduce_max(S, m, dim=1, clear=False)
                if mma_rows:
                    for i in T.Parallel(bm):
                        d_shared[i] += m[i] - m_shared[i]
                else:  # (a nest with no fragment: its iterations spread over the threads)
                    for i in T.Parallel(bm):
                        d_shared[i] = d_shared[i] + 1.0
                        m_shared[i] = T.max(m_shared[i], -3.0e38)
                T.copy(m, m_shared)
            T.copy(m_shared, M)
            T.copy(d_shared, D)

    return stats


def test_a_warp_barrier_orders_row_statistics_kept_in_shared():
    body = _loop_body(shared_row_stats())
    assert "T.sync_threads(" not in body.split("T.gemm(")[-1]  # (after the step's GEMM)
    assert "T.sync_warp()" in body


def test_a_nest_spread_over_the_threads_keeps_the_block_barrier():
    body = _loop_body(shared_row_stats(mma_rows=False))
    assert "T.sync_threads(" in body.split("T.gemm(")[-1]


@pytest.mark.gpu
@pytest.mark.parametrize("mma_rows", [True, False])
def test_shared_row_statistics_on_gpu(mma_rows):
    torch.manual_seed(0)
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(4 * 64, 64, device="cuda", dtype=torch.float16)
    m, d = tilecute.compile(shared_row_stats(mma_rows=mma_rows), out_idx=[2, 3])(q, k)
    s = (q.float() @ k.float().T).view(64, 4, 64).amax(dim=2)  # (rows, steps)
    running = s.cummax(dim=1).values
    torch.testing.assert_close(m, running[:, -1], rtol=1e-3, atol=1e-3)
    if mma_rows:  # each step adds its rise of the running maximum (from -inf: inf)
        rise = (running[:, 1:] - running[:, :-1]).sum(dim=1)
        torch.testing.assert_close(d, torch.full_like(d, float("inf")) + rise, rtol=0, atol=0)
    else:
        torch.testing.assert_close(d, torch.full_like(d, 4.0), rtol=0, atol=0)


def thread_transpose(M=128, N=256, tile=32, rows=8, read_back=False):
    """Y = X^T written at thread level (threads=(32, 8)): each thread stores ``tile / rows``
    elements of a padded shared tile in an unrolled loop, one barrier, then reads the
    transposed ones.  The store loop's steps store at one same index expression (TVM's
    sync pass: the same thread's elements), so no barrier between them; ``read_back``: the
    loop also reads the tile (another thread's element), which keeps one per step."""

    @T.prim_func
    def transpose(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "float32")):
        with T.Kernel(N // tile, M // tile, threads=(tile, rows)) as (bx, by):
            tx, ty, _ = T.get_thread_bindings()
            s = T.alloc_shared((tile, tile + 1), "float32")
            for r in T.unroll(tile // rows):
                if read_back:
                    s[ty + r * rows, tx] = X[by * tile + ty + r * rows, bx * tile + tx] + \
                        s[tx, (ty + r * rows + 1) % tile] * 0.0
                else:
                    s[ty + r * rows, tx] = X[by * tile + ty + r * rows, bx * tile + tx]
            T.sync_threads()
            for r in T.unroll(tile // rows):
                Y[bx * tile + ty + r * rows, by * tile + tx] = s[tx, ty + r * rows]

    return transpose


def test_a_store_loop_at_one_index_needs_no_barrier_per_step():
    assert "T.sync_threads(" not in _loop_body(thread_transpose(), "for r in T.unroll(")
    assert "T.sync_threads(" in _loop_body(thread_transpose(read_back=True), "for r in T.unroll(")


@pytest.mark.gpu
def test_thread_transpose_on_gpu():
    torch.manual_seed(0)
    x = torch.randn(128, 256, device="cuda")
    y = torch.empty(256, 128, device="cuda")
    tilecute.compile(thread_transpose())(x, y)
    assert torch.equal(y, x.T)
