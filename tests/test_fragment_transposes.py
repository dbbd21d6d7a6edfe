"""A ``T.Parallel`` loop that writes one fragment at a permutation of the indices it reads
another with (``for i, j in T.Parallel(M, N): t[j, i] = acc[i, j]``, TileLang's gdn
backward kernels; ``T.transpose(f, g)`` of two fragments, which the frontend writes so).
TileLang lays such a loop out by one fragment and gives the other that layout permuted;
tilecute has no permuted register layout, so the layout pass routes the fragment at the
other order through a shared tile of its own (``<frag>_staged<n>``), with the barrier
between its writes and reads.  Fragments of a T.gemm keep their MMA layouts.  CPU: the IR
of the layout pass, barriers, cubins; GPU (pytest -m gpu): results against torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower, run_passes


def acc_transposed(M=64, N=64, K=32, threads=128):
    """The transposed GEMM tile, scaled, and the sums of its rows (the accumulator's
    columns): ``T.reduce_sum`` reduces only along the last dim, so the program transposes
    the accumulator into a fragment first, as TileLang's chunk_o_bwd does."""

    @T.prim_func
    def acc_transpose_k(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
              Out: T.Tensor((N, M), T.float32), Sums: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((N, K), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            acc_t = T.alloc_fragment((N, M), T.float32)
            sums = T.alloc_fragment((N,), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(M, N):
                acc_t[j, i] = acc[i, j] * 0.5
            T.reduce_sum(acc_t, sums, dim=1)
            T.copy(acc_t, Out)
            T.copy(sums, Sums)

    return acc_transpose_k


def plain_transposed(M=64, N=32, over_destination=False, threads=128):
    """``g = exp(f)^T`` between two plain fragments; ``over_destination``: the loop walks
    g's order (``for j, i in T.Parallel(N, M)``), so f is the one read through shared."""

    @T.prim_func
    def plain_t(X: T.Tensor((M, N), T.float32), Y: T.Tensor((N, M), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((N, M), T.float32)
            T.copy(X, f)
            if over_destination:
                for j, i in T.Parallel(N, M):
                    g[j, i] = T.exp(f[i, j]) + f[i, j]
            else:
                for i, j in T.Parallel(M, N):
                    g[j, i] = T.exp(f[i, j]) + f[i, j]
            T.copy(g, Y)

    return plain_t


def transposed_a_operand(S=64, DK=64, DV=64, threads=128):
    """``(Q * scale)^T @ dO``: Q's chunk is scaled in a fragment, transposed into a
    fragment in registers and that fragment is T.gemm's A operand (TileLang's
    chunk_delta_bwd, there to meet tf32's K-major rule)."""

    @T.prim_func
    def qt_gemm(Q: T.Tensor((S, DK), T.float16), dO: T.Tensor((S, DV), T.float16),
                Out: T.Tensor((DK, DV), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((S, DK), T.float16)
            dO_s = T.alloc_shared((S, DV), T.float16)
            Q_f = T.alloc_fragment((S, DK), T.float16)
            Q_t = T.alloc_fragment((DK, S), T.float16)
            acc = T.alloc_fragment((DK, DV), T.float32)
            T.copy(Q, Q_s)
            T.copy(dO, dO_s)
            T.copy(Q_s, Q_f)
            for s, k in T.Parallel(S, DK):
                Q_f[s, k] = Q_f[s, k] * 0.125
            for s, k in T.Parallel(S, DK):
                Q_t[k, s] = Q_f[s, k]
            T.clear(acc)
            T.gemm(Q_t, dO_s, acc)
            T.copy(acc, Out)

    return qt_gemm


def transpose_op(M=64, N=32, steps=1, threads=128):
    """``T.transpose(f, g)`` of two fragments, in a loop of ``steps`` tiles summed into a
    third: ``Out = sum_k (2 * X[k])^T`` (the shared tile is rewritten every step)."""

    @T.prim_func
    def tr(X: T.Tensor((steps, M, N), T.float32), Out: T.Tensor((N, M), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((N, M), T.float32)
            total = T.alloc_fragment((N, M), T.float32)
            T.clear(total)
            for k in T.serial(steps):
                T.copy(X[k, :, :], f)
                for i, j in T.Parallel(M, N):
                    f[i, j] = f[i, j] * 2.0
                T.transpose(f, g)
                for i, j in T.Parallel(N, M):
                    total[i, j] += g[i, j]
            T.copy(total, Out)

    return tr


def upper_transposed(M=64, threads=128):
    """``g[j, i] = f[i, j]`` only above the diagonal, g filled with -1 first: the elements
    the loop leaves alone keep their values (the tile is filled from g before the loop)."""

    @T.prim_func
    def upper(X: T.Tensor((M, M), T.float32), Y: T.Tensor((M, M), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, M), T.float32)
            g = T.alloc_fragment((M, M), T.float32)
            T.copy(X, f)
            T.fill(g, -1.0)
            for i, j in T.Parallel(M, M):
                if i < j:
                    g[j, i] = f[i, j]
            T.copy(g, Y)

    return upper


def _layouts(func) -> dict:
    return {a.buffer.name: a.layout for k in func.kernels for a in walk_stmts(k.body)
            if isinstance(a, N.Allocate)}


def _text(func) -> str:
    return print_func(func)


# -- the layout pass ----------------------------------------------------------------------------

def test_an_accumulator_is_written_transposed_through_a_shared_tile():
    func = run_passes(acc_transposed(), "sm_90a", until="infer_layouts")
    lay = _layouts(func)
    assert lay["acc"].kind == "mma"  # the T.gemm accumulator keeps its register layout
    assert lay["acc_t"].kind == "blocked"
    assert lay["acc_t_staged1"].kind == "swizzled"  # written down its columns
    text = _text(func)
    # the loop walks the accumulator in its own order and writes the tile transposed; a
    # nest then copies the tile into acc_t in acc_t's order
    assert "acc_t_staged1[j, i] = acc[i, j] * T.float32(0.5)" in text
    assert "acc_t[i" in text and "] = acc_t_staged1[i" in text
    assert "acc_t[j, i]" not in text


def test_a_transposed_plain_fragment_goes_through_shared_either_way():
    text = _text(run_passes(plain_transposed(), "sm_90a", until="infer_layouts"))
    assert "g_staged1[j, i] = T.exp(f[i, j]) + f[i, j]" in text
    assert 'f = T.alloc_fragment((64, 32), "float32", layout=T.Layout("blocked"' in text
    # over the destination's order: g is written in place, f read from a copy of it made
    # before the loop
    text = _text(run_passes(plain_transposed(over_destination=True), "sm_90a",
                            until="infer_layouts"))
    loop = text.index("g[j, i] = T.exp(f_staged1[i, j]) + f_staged1[i, j]")
    assert text.index("] = f[i") < loop
    assert "g_staged" not in text


TILE_WRITE = re.compile(r"g_staged1\[(\w+), (\w+)\] = f\[\2, \1\]")


def test_the_barrier_pass_orders_the_tile():
    text = _text(lower(transpose_op(), "sm_90a").func)
    # the loop writes the tile, a barrier, a nest reads it back into g
    write = TILE_WRITE.search(text).start()
    sync = text.index("T.sync_threads()", write)
    read = text.index("] = g_staged1[i", write)
    assert write < sync < read


def test_in_a_loop_the_next_write_waits_for_the_last_read():
    text = _text(lower(transpose_op(steps=4), "sm_90a").func)
    loop = text[text.index("for k in T.serial(4)"):]
    write = TILE_WRITE.search(loop).start()
    read = loop.index("] = g_staged1[i")
    # a barrier between the write and the read, and one before the write (after the
    # previous step's read) in the loop body
    assert "T.sync_threads()" in loop[write:read]
    assert "T.sync_threads()" in loop[:write]


def test_a_transposed_fragment_as_the_gemm_a_operand():
    func = run_passes(transposed_a_operand(), "sm_90a", until="infer_layouts")
    lay = _layouts(func)
    assert lay["Q_t"].kind == "mma" and lay["Q_t"].operand == "A"  # the MMA's A layout
    assert lay["Q_f"].kind == "blocked"
    text = _text(func)
    assert re.search(r"Q_t_staged1\[(k\w*), (s\w*)\] = Q_f\[\2, \1\]", text)
    assert "Q_t[i" in text and "] = Q_t_staged1[i" in text
    gemm = next(s for s in walk_stmts(func.kernels[0].body) if isinstance(s, N.Gemm))
    assert gemm.a == "Q_t"  # read from registers (wgmma's RS form)


def test_t_transpose_of_two_fragments():
    func = run_passes(transpose_op(), "sm_90a", until="infer_layouts")
    lay = _layouts(func)
    assert lay["f"].kind == lay["g"].kind == "blocked"
    assert lay["g_staged1"].kind == "swizzled"


def test_a_conditional_write_keeps_the_elements_it_leaves():
    text = _text(run_passes(upper_transposed(), "sm_90a", until="infer_layouts"))
    fill = text.index("] = g[i")  # g copied into the tile ...
    loop = text.index("g_staged1[j, i] = f[i, j]")  # ... before the loop writes some of it
    back = text.index("] = g_staged1[i")  # ... and copied back after
    assert fill < loop < back


def test_loops_that_walk_every_fragment_in_one_order_are_unchanged():
    # one order per loop (reordered to it by the layout pass where it is not the loop's):
    # nothing to stage
    @T.prim_func
    def one_order(X: T.Tensor((64, 32), T.float32), Y: T.Tensor((32, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 32), T.float32)
            T.copy(X, f)
            for j, i in T.Parallel(32, 64):
                f[i, j] = f[i, j] + 1.0
            for j, i in T.Parallel(32, 64):
                Y[j, i] = f[i, j]

    text = _text(run_passes(one_order, "sm_90a", until="infer_layouts"))
    assert "_staged" not in text and "T.alloc_shared" not in text


@pytest.mark.parametrize("make", [acc_transposed, plain_transposed,
                                  lambda: plain_transposed(over_destination=True),
                                  transposed_a_operand, lambda: transpose_op(steps=3),
                                  upper_transposed],
                         ids=["accumulator", "plain", "plain over dst", "gemm A operand",
                              "T.transpose in a loop", "conditional"])
def test_transposes_of_fragments_build_sm_90a_cubins(make, tmp_path):
    assert len(tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernels) == 1


@pytest.mark.parametrize("make", [acc_transposed, transposed_a_operand],
                         ids=["accumulator", "gemm A operand"])
def test_transposes_of_mma_fragments_build_sm_80_cubins(make, tmp_path):
    assert len(tilecute.build_cubin(make(), "sm_80", out_dir=str(tmp_path)).kernels) == 1


# -- on a GPU ------------------------------------------------------------------------------------

OPTIONS = [{}, {"disable_tma": True, "disable_wgmma": True}]
OPTION_IDS = ["wgmma", "mma.sync"]


@pytest.mark.gpu
@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_accumulator_transposed_on_gpu(options):
    import torch

    a = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    out = torch.empty(64, 64, device="cuda")
    sums = torch.empty(64, device="cuda")
    tilecute.compile(acc_transposed(), options=options)(a, b, out, sums)
    ref = (a.float() @ b.float().t()).t() * 0.5
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(sums, ref.sum(dim=1), atol=5e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("over", [False, True], ids=["over source", "over destination"])
def test_plain_fragment_transposed_on_gpu(over):
    import torch

    x = torch.randn(64, 32, device="cuda")
    y = torch.empty(32, 64, device="cuda")
    tilecute.compile(plain_transposed(over_destination=over))(x, y)
    torch.testing.assert_close(y, (torch.exp(x) + x).t())


@pytest.mark.gpu
@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_transposed_a_operand_on_gpu(options):
    import torch

    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    do = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    o = torch.empty(64, 64, device="cuda")
    tilecute.compile(transposed_a_operand(), options=options)(q, do, o)
    torch.testing.assert_close(o, (q.float() * 0.125).t() @ do.float(), atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_t_transpose_in_a_loop_and_a_conditional_write_on_gpu():
    import torch

    xs = torch.randn(3, 64, 32, device="cuda")
    ot = torch.empty(32, 64, device="cuda")
    tilecute.compile(transpose_op(steps=3))(xs, ot)
    torch.testing.assert_close(ot, (2 * xs).sum(0).t(), atol=1e-5, rtol=1e-5)

    xu = torch.randn(64, 64, device="cuda")
    yu = torch.empty(64, 64, device="cuda")
    tilecute.compile(upper_transposed())(xu, yu)
    below = torch.ones(64, 64, device="cuda").tril(-1).bool()  # g[j, i] for i < j
    torch.testing.assert_close(yu, torch.where(below, xu.t(), torch.full_like(xu, -1.0)))


def mixed_mma_layouts(M=64, N=64, K=32, threads=128):
    """``Out = A32 @ B32^T - A16 @ B16^T``: on sm_90a the float32 GEMM (tf32) runs on
    mma.sync and the float16 one on wgmma, so the loop combining the two accumulators
    walks two MMA register layouts (in TileLang both are wgmma's, one layout; TileLang's
    chunk_delta_bwd adds a tf32 and a bf16 GEMM so)."""

    @T.prim_func
    def mixed(A32: T.Tensor((M, K), T.float32), B32: T.Tensor((N, K), T.float32),
              A16: T.Tensor((M, K), T.float16), B16: T.Tensor((N, K), T.float16),
              Out: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            a32 = T.alloc_shared((M, K), T.float32)
            b32 = T.alloc_shared((N, K), T.float32)
            a16 = T.alloc_shared((M, K), T.float16)
            b16 = T.alloc_shared((N, K), T.float16)
            acc1 = T.alloc_fragment((M, N), T.float32)
            acc2 = T.alloc_fragment((M, N), T.float32)
            h = T.alloc_fragment((M, N), T.float32)
            T.copy(A32, a32)
            T.copy(B32, b32)
            T.copy(A16, a16)
            T.copy(B16, b16)
            T.gemm(a32, b32, acc1, transpose_B=True, clear_accum=True)
            T.gemm(a16, b16, acc2, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(M, N):
                h[i, j] = acc1[i, j] - acc2[i, j]
            T.copy(h, Out)

    return mixed


def test_accumulators_of_two_mma_layouts_meet_through_a_shared_tile(tmp_path):
    func = run_passes(mixed_mma_layouts(), "sm_90a", until="infer_layouts")
    lay = _layouts(func)
    assert lay["acc1"].mma == "mma" and lay["acc2"].mma == "wgmma"  # each GEMM's own
    assert lay["h"] == lay["acc1"]  # h walks acc1's registers
    text = _text(func)
    # acc2 goes through its tile (copied in its own layout) before the loop reads it
    assert "h[i, j] = acc1[i, j] - acc2_staged1[i, j]" in text
    assert text.index("] = acc2[i") < text.index("h[i, j] =")
    assert len(tilecute.build_cubin(mixed_mma_layouts(), "sm_90a",
                                    out_dir=str(tmp_path)).kernels) == 1


@pytest.mark.gpu
def test_accumulators_of_two_mma_layouts_on_gpu():
    import torch

    a32, b32 = torch.randn(64, 32, device="cuda"), torch.randn(64, 32, device="cuda")
    a16 = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    b16 = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    out = torch.empty(64, 64, device="cuda")
    tilecute.compile(mixed_mma_layouts())(a32, b32, a16, b16, out)
    ref = a32 @ b32.t() - a16.float() @ b16.float().t()
    torch.testing.assert_close(out, ref, atol=5e-2, rtol=1e-2)  # (tf32)
