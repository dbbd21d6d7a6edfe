"""Shared-memory placement where TileLang's shares more bytes than tilecute did.

- A buffer that one serial loop's body alone uses (``T.Pipelined(n, num_stages=0)`` or
  ``T.serial``) and whose first use there writes all of it is alive from that body
  statement to the last one that uses it: TileLang's allocation planner places it inside
  the body (the lowest common scope of its uses) and its shared-memory merge frees it after
  its last use there.  Two such buffers that disjoint statements use share bytes (tilecute
  kept each buffer of a loop alive through the whole loop).
- The placement is first fit in allocation order, or with the most aligned buffers first
  where that takes fewer bytes: a 1024-aligned TMA tile may not start where a 128-aligned
  buffer that died left its bytes.  (FLA's KDA ``wy_fast_bwd.py`` at ``block_DK=128,
  num_stages=0`` needed 246784 bytes, TileLang 213248; it now needs 213512, TileLang's
  plus the mbarriers TileLang keeps in static shared memory.)
- A buffer that carries its value from one iteration to the next, or whose first use in
  the body writes only part of it, keeps the whole loop.

CPU: placements, barriers, sm_90a cubins; GPU: results against torch."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.transform import shared_memory as sm
from tilecute.transform.pipeline import run_passes


def gated_sum(S=256, D=512, bd=256):
    """Y = exp2(G) * X + W, tile by tile along D: x_s and g_s are dead once e_s is made,
    before w_s is loaded.  Four (64, 256) float32 tiles are 256 KiB, past a block's
    227 KiB; with w_s on x_s's bytes they take 192 KiB."""

    @T.prim_func
    def gated_sum(X: T.Tensor((S, D), "float32"), G: T.Tensor((S, D), "float32"),
                  W: T.Tensor((S, D), "float32"), Y: T.Tensor((S, D), "float32")):
        with T.Kernel(S // 64, threads=128) as bs:
            x_s = T.alloc_shared((64, bd), "float32")
            g_s = T.alloc_shared((64, bd), "float32")
            e_s = T.alloc_shared((64, bd), "float32")
            w_s = T.alloc_shared((64, bd), "float32")
            acc = T.alloc_fragment((64, bd), "float32")
            for i in T.Pipelined(D // bd, num_stages=0):  # (TileLang: no pipeline, a serial loop)
                T.copy(X[bs * 64, i * bd], x_s)
                T.copy(G[bs * 64, i * bd], g_s)
                for r, c in T.Parallel(64, bd):
                    e_s[r, c] = T.exp2(g_s[r, c]) * x_s[r, c]
                T.copy(W[bs * 64, i * bd], w_s)
                for r, c in T.Parallel(64, bd):
                    acc[r, c] = e_s[r, c] + w_s[r, c]
                T.copy(acc, Y[bs * 64, i * bd])

    return gated_sum


def running_sum(S=256, D=256, bd=64):
    """Y[:, tile i] = X[:, tiles 0..i] summed, carried from one iteration to the next in
    h_s, whose first use in the body reads it: h_s keeps the whole loop and shares no
    bytes with the loop's other buffers."""

    @T.prim_func
    def running_sum(X: T.Tensor((S, D), "float32"), Y: T.Tensor((S, D), "float32")):
        with T.Kernel(S // 64, threads=128) as bs:
            h_s = T.alloc_shared((64, bd), "float32")
            x_s = T.alloc_shared((64, bd), "float32")
            y_s = T.alloc_shared((64, bd), "float32")
            T.fill(h_s, 0.0)
            for i in T.serial(D // bd):
                for r, c in T.Parallel(64, bd):
                    y_s[r, c] = h_s[r, c]
                T.copy(X[bs * 64, i * bd], x_s)
                for r, c in T.Parallel(64, bd):
                    h_s[r, c] = y_s[r, c] + x_s[r, c]
                T.copy(h_s, Y[bs * 64, i * bd])

    return running_sum


def half_written(S=256, D=256, bd=64):
    """p_s's first use in the body writes its first 32 rows only: it keeps the loop."""

    @T.prim_func
    def half_written(X: T.Tensor((S, D), "float32"), Y: T.Tensor((S, D), "float32")):
        with T.Kernel(S // 64, threads=128) as bs:
            p_s = T.alloc_shared((64, bd), "float32")
            q_s = T.alloc_shared((64, bd), "float32")
            T.fill(p_s, 0.0)
            for i in T.serial(D // bd):
                T.copy(X[bs * 64, i * bd], p_s[0:32, :])
                for r, c in T.Parallel(64, bd):
                    Y[bs * 64 + r, i * bd + c] = p_s[r, c]
                T.copy(X[bs * 64, i * bd], q_s)
                for r, c in T.Parallel(64, bd):
                    Y[bs * 64 + r, i * bd + c] = Y[bs * 64 + r, i * bd + c] + q_s[r, c]

    return half_written


def scaled_update(S=256):
    """Out = Wt @ (K * exp2(G) * B[:, None])^T for 64-row blocks: b_s (256 bytes) and g_s
    die before w_s, a 1024-aligned GEMM operand, is loaded."""

    @T.prim_func
    def scaled_update(K: T.Tensor((S, 64), "float16"), G: T.Tensor((S, 64), "float32"),
                      Wt: T.Tensor((S, 64), "float16"), B: T.Tensor((S,), "float32"),
                      Out: T.Tensor((S, 64), "float32")):
        with T.Kernel(S // 64, threads=128) as bs:
            b_s = T.alloc_shared((64,), "float32")
            k_s = T.alloc_shared((64, 64), "float16")
            g_s = T.alloc_shared((64, 64), "float32")
            kg_s = T.alloc_shared((64, 64), "float16")
            w_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(B[bs * 64], b_s)
            T.copy(K[bs * 64, 0], k_s)
            T.copy(G[bs * 64, 0], g_s)
            for r, c in T.Parallel(64, 64):
                kg_s[r, c] = k_s[r, c] * T.exp2(g_s[r, c]) * b_s[r]
            T.copy(Wt[bs * 64, 0], w_s)
            T.gemm(w_s, kg_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, Out[bs * 64, 0])

    return scaled_update


def _placed(func, until="assign_shared_memory"):
    k = run_passes(func, "sm_90a", until=until).kernels[0]
    return k, {a.buffer.name: (a.slot.offset, a.slot.offset + sm.stage_bytes(a.buffer))
               for a in sm.shared_allocs(k)}


def _share(spans, a, b):
    return spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]


def test_buffers_of_disjoint_body_statements_share_bytes():
    k, spans = _placed(gated_sum())
    assert k.shared_bytes == 3 * 64 * 256 * 4  # was 4 tiles, past the 232448 a block has
    assert _share(spans, "w_s", "x_s") or _share(spans, "w_s", "g_s")
    for a, b in (("x_s", "g_s"), ("x_s", "e_s"), ("g_s", "e_s"), ("e_s", "w_s")):
        assert not _share(spans, a, b), (a, b)  # alive together in the body


def test_a_barrier_orders_the_shared_bytes_inside_the_loop():
    """w_s's copy overwrites bytes other threads read in the statement before: a barrier
    comes between them, and one at the top of the body orders the next iteration's copies
    after this iteration's last reads."""
    text = run_passes(gated_sum(), "sm_90a", until="insert_barriers").script()
    body = text[text.index("for i in T.serial(2):"):]
    before_w = body[:body.index("w_s[")]
    assert before_w.rstrip().splitlines()[-3].strip().startswith("T.sync_threads(")
    assert body.splitlines()[1].strip().startswith("T.sync_threads(")


def test_a_value_carried_across_iterations_keeps_the_whole_loop():
    _, spans = _placed(running_sum())
    assert not any(_share(spans, "h_s", b) for b in ("x_s", "y_s"))


def test_a_first_use_writing_part_of_the_buffer_keeps_the_whole_loop():
    _, spans = _placed(half_written())
    assert not _share(spans, "p_s", "q_s")


def test_the_most_aligned_first_where_that_takes_fewer_bytes():
    k, spans = _placed(scaled_update())
    assert k.shared_bytes == 33160  # first fit in allocation order: 33792
    # w_s (loaded after k_s, g_s and b_s were last read) takes bytes of theirs
    assert any(_share(spans, "w_s", b) for b in ("b_s", "k_s", "g_s"))
    assert not _share(spans, "w_s", "kg_s")


def test_cubins_build(cache_dir):
    for func in (gated_sum(), running_sum(), scaled_update()):
        assert tilecute.compile(func).ensure_cubin().endswith("kernel.cubin")


@pytest.mark.gpu
def test_results_on_gpu():
    import torch

    torch.manual_seed(0)
    x, g, w = (torch.randn(256, 512, device="cuda") for _ in range(3))
    y = torch.empty_like(x)
    tilecute.compile(gated_sum())(x, g, w, y)
    torch.testing.assert_close(y, torch.exp2(g) * x + w, rtol=1e-5, atol=1e-5)

    x = torch.randn(256, 256, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(running_sum())(x, y)
    ref = x.view(256, 4, 64).cumsum(1).view(256, 256)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)

    k = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    gk = torch.randn(256, 64, device="cuda") * 0.1
    wt = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    b = torch.rand(256, device="cuda")
    out = torch.empty(256, 64, device="cuda")
    tilecute.compile(scaled_update())(k, gk, wt, b, out)
    kg = (k.float() * torch.exp2(gk) * b[:, None]).half().float()
    ref = torch.cat([wt[i:i + 64].float() @ kg[i:i + 64].T for i in range(0, 256, 64)])
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


def staged_scale(with_spare: bool, S=256, D=512):
    """Y = 2 * X through two (64, 256) float32 stages of a T.Pipelined loop (128 KiB), with a
    third (64, 256) float32 shared tile allocated and, where ``with_spare`` is false, never
    touched (TileLang's example_dequant_gemm_bf16_mxfp4_hopper allocates its Bias tile
    whether or not the kernel adds a bias); where it is true, the kernel copies X's first
    tile into it before the loop and back over Y's first tile after it, so its 64 KiB are
    its own through the loop."""

    @T.prim_func
    def staged_scale(X: T.Tensor((S, D), "float32"), Y: T.Tensor((S, D), "float32")):
        with T.Kernel(S // 64, threads=128) as bs:
            spare = T.alloc_shared((64, 256), "float32")
            tile = T.alloc_shared((64, 256), "float32")
            out = T.alloc_fragment((64, 256), "float32")
            if with_spare:
                T.copy(X[bs * 64, 0], spare)
            for k in T.Pipelined(D // 256, num_stages=2):
                T.copy(X[bs * 64, k * 256], tile)
                for i, j in T.Parallel(64, 256):
                    out[i, j] = tile[i, j] * 2.0
                T.copy(out, Y[bs * 64, k * 256])
            if with_spare:
                T.copy(spare, Y[bs * 64, 0])

    return staged_scale


def test_a_shared_buffer_never_used_takes_no_bytes():
    unused = run_passes(staged_scale(False), "sm_90a").kernels[0]
    used = run_passes(staged_scale(True), "sm_90a").kernels[0]
    assert unused.shared_bytes < 2 * 64 * 256 * 4 + 1024  # the two stages (and barriers) alone
    assert used.shared_bytes >= 3 * 64 * 256 * 4  # a used tile keeps its bytes


def test_a_never_used_buffer_larger_than_the_rest_adds_no_bytes():
    """The unused tile (64 KiB) is larger than all the used ones (the loop's 8 KiB stages):
    it still adds nothing to the kernel's total (it was placed at offset 0 and its end
    counted, so the kernel asked for 64 KiB)."""
    @T.prim_func
    def small_stages(X: T.Tensor((256, 512), "float32"), Y: T.Tensor((256, 512), "float32")):
        with T.Kernel(4, threads=128) as bs:
            spare = T.alloc_shared((64, 256), "float32")
            tile = T.alloc_shared((64, 32), "float32")
            out = T.alloc_fragment((64, 32), "float32")
            for k in T.Pipelined(16, num_stages=2):
                T.copy(X[bs * 64, k * 32], tile)
                for i, j in T.Parallel(64, 32):
                    out[i, j] = tile[i, j] * 2.0
                T.copy(out, Y[bs * 64, k * 32])

    k = run_passes(small_stages, "sm_90a").kernels[0]
    assert k.shared_bytes < 64 * 256 * 4 // 2  # the stages (and barriers) alone
    assert tilecute.compile(small_stages, target="sm_90a").ensure_cubin()


def test_a_never_used_buffer_keeps_its_bytes_without_reuse():
    k = run_passes(staged_scale(False), "sm_90a", {"disable_shared_memory_reuse": True}).kernels[0]
    assert k.shared_bytes >= 3 * 64 * 256 * 4


def test_never_used_buffer_builds_for_sm90a(cache_dir):
    assert tilecute.compile(staged_scale(False), target="sm_90a").ensure_cubin()


@pytest.mark.gpu
def test_never_used_buffer_matches_torch(cache_dir):
    import torch

    x = torch.randn(256, 512, device="cuda")
    y = torch.empty_like(x)
    tilecute.compile(staged_scale(False))(x, y)
    torch.testing.assert_close(y, 2 * x)
