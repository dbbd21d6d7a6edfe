"""TileLang's hand warp specialization: ``tx = T.get_thread_binding()`` and ``if tx < 128:
... elif tx < 256: ... else: ...`` split the block's threads, and TileLang plans the tile
ops of each branch for the threads its condition selects.  tilecute makes such a branch
(one selecting a run of whole warpgroups) the warpgroup region ``with T.ws(g):`` makes
(``N.WarpGroups``), and one selecting a run of whole warps (``if tx < 32:`` in a block of
96) a region of those warps (``N.WarpGroups.span``); tile ops spread over the threads
under a branch selecting part of a warp are refused.  CPU: IR, layouts, barriers,
refusals, generated source, sm_90a cubins; GPU: results vs torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.layout_inference import LayoutError
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import GemmError


def _stmts(func, cls):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, cls)]


def _regions(func):
    return [s.groups for s in _stmts(func, N.WarpGroups)]


# ---- programs (TileLang's idioms) ------------------------------------------------------------
def two_consumers(M=256, N_=128, K=256, bk=64):
    """C = A @ B^T and each row's max: warpgroup 0 multiplies rows 0..127, warpgroup 1
    rows 128..255, each into its own accumulator; warpgroup 2 (the producer) loads the K
    tiles with TMA; `full` / `empty` mbarriers hand the tiles over."""
    half = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N_, K), "float16"),
             C: T.Tensor((M, N_), "float32"), R: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=384) as bx:
            A0 = T.alloc_shared((half, bk), "float16")
            A1 = T.alloc_shared((half, bk), "float16")
            B_s = T.alloc_shared((N_, bk), "float16")
            C0 = T.alloc_fragment((half, N_), "float32")
            C1 = T.alloc_fragment((half, N_), "float32")
            r0 = T.alloc_fragment((half,), "float32")
            r1 = T.alloc_fragment((half,), "float32")
            full = T.alloc_barrier(arrive_count=128)
            empty = T.alloc_barrier(arrive_count=256)
            tx = T.get_thread_binding()
            if tx < 128:
                T.clear(C0)
                for k in T.serial(K // bk):
                    T.barrier_wait(full, k % 2)
                    T.gemm(A0, B_s, C0, transpose_B=True)
                    T.barrier_arrive(empty)
                T.reduce_max(C0, r0, dim=1)
                T.copy(C0, C[0:half, :])
                T.copy(r0, R[0:half])
            elif tx < 256:
                T.clear(C1)
                for k in T.serial(K // bk):
                    T.barrier_wait(full, k % 2)
                    T.gemm(A1, B_s, C1, transpose_B=True)
                    T.barrier_arrive(empty)
                T.reduce_max(C1, r1, dim=1)
                T.copy(C1, C[half:M, :])
                T.copy(r1, R[half:M])
            else:
                for k in T.serial(K // bk):
                    T.barrier_wait(empty, (k + 1) % 2)
                    T.tma_copy(A[0:half, k * bk:(k + 1) * bk], A0, barrier=full)
                    T.tma_copy(A[half:M, k * bk:(k + 1) * bk], A1, barrier=full)
                    T.tma_copy(B[:, k * bk:(k + 1) * bk], B_s, barrier=full)
                    T.barrier_arrive(full)

    return main


def handoff(H=64, BN=128, D=64):
    """Warpgroup 0 computes P = exp2(S - rowmax(S)) for S = Q @ K^T, writes it to shared
    and signals; warpgroups 1..2 (`tx >= 128`, one MMA of 256 threads, warps along N)
    wait, compute O = P @ V and each row's sum of O (the rows meet across the two
    warpgroups through shared memory)."""

    @T.prim_func
    def main(Q: T.Tensor((H, D), "float16"), K: T.Tensor((BN, D), "float16"),
             V: T.Tensor((BN, BN), "float16"), O: T.Tensor((H, BN), "float32"),
             L: T.Tensor((H,), "float32")):
        with T.Kernel(1, threads=384) as bx:
            Q_s = T.alloc_shared((H, D), "float16")
            K_s = T.alloc_shared((BN, D), "float16")
            V_s = T.alloc_shared((BN, BN), "float16")
            P_s = T.alloc_shared((H, BN), "float16")
            S = T.alloc_fragment((H, BN), "float32")
            m = T.alloc_fragment((H,), "float32")
            acc = T.alloc_fragment((H, BN), "float32")
            l = T.alloc_fragment((H,), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            T.copy(Q, Q_s, disable_tma=True)  # (by every thread: a block barrier after)
            T.copy(K, K_s, disable_tma=True)
            T.copy(V, V_s, disable_tma=True)
            tx = T.get_thread_binding()
            if tx < 128:
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
                T.reduce_max(S, m, dim=1)
                for i, j in T.Parallel(H, BN):
                    S[i, j] = T.exp2(S[i, j] - m[i])
                T.copy(S, P_s)
                T.fence_proxy_async()
                T.barrier_arrive(ready)
            else:
                T.barrier_wait(ready, 0)
                T.gemm(P_s, V_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
                T.reduce_sum(acc, l, dim=1)
                T.copy(acc, O)
                T.copy(l, L)

    return main


def branch_program(cond, threads=256, orelse=True):
    """Each warpgroup's T.gemm of its own 64 rows, under `cond` / its else."""
    src = f'''
@T.prim_func
def branch(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 64), "float16"),
           C: T.Tensor((128, 64), "float32")):
    with T.Kernel(1, threads={threads}) as bx:
        A_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((64, 64), "float16")
        c0 = T.alloc_fragment((64, 64), "float32")
        c1 = T.alloc_fragment((64, 64), "float32")
        tx = T.get_thread_binding()
        ty = T.thread_binding(0, {threads}, "threadIdx.x")
        T.copy(A, A_s)
        T.copy(B, B_s)
        if {cond}:
            T.gemm(A_s[0:64, :], B_s, c0, clear_accum=True)
            T.copy(c0, C[0:64, :])
''' + ('''        else:
            T.gemm(A_s[64:128, :], B_s, c1, clear_accum=True)
            T.copy(c1, C[64:128, :])
''' if orelse else '')
    return T.from_script(src)


# ---- the frontend: which conditions make regions ----------------------------------------------
@pytest.mark.parametrize("cond,threads,groups", [
    ("tx < 128", 256, [(0,), (1,)]),
    ("tx >= 128", 256, [(1,), (0,)]),
    ("128 > tx", 256, [(0,), (1,)]),
    ("T.get_thread_binding(0) < 128", 256, [(0,), (1,)]),
    ("ty < 128", 256, [(0,), (1,)]),
    ("tx <= 255", 384, [(0, 1), (2,)]),
    ("tx > 127", 384, [(1, 2), (0,)]),
    ("tx >= 128 and tx < 384", 384, [(1, 2), (0,)]),
    ("0 <= tx < 256", 384, [(0, 1), (2,)]),
])
def test_conditions_over_whole_warpgroups_make_regions(cond, threads, groups):
    f = branch_program(cond, threads)
    assert _regions(f) == groups
    assert not [s for s in _stmts(f, N.If)]
    text = print_func(f)
    assert print_func(T.from_script(text)) == text  # printed as `with T.ws(...)`
    plan = lower(f, "sm_90a")
    layouts = {a.buffer.name: a.layout for a in _stmts(plan.func, N.Allocate)}
    first = {g: 128 * r[0] for g, r in zip(("c0", "c1"), groups)}
    for c in ("c0", "c1"):
        assert layouts[c].kind == "mma" and layouts[c].first_thread == first[c]
        assert layouts[c].threads == 128 * len(groups[0 if c == "c0" else 1])


def test_elif_chain_takes_the_rest_of_the_threads():
    f = two_consumers()
    assert _regions(f) == [(0,), (1,), (2,)]
    # `elif tx < 256:` within the threads `tx < 128` left: warpgroup 1 alone
    src = '''
@T.prim_func
def chain(A: T.Tensor((384,), "float32")):
    with T.Kernel(1, threads=384) as bx:
        tx = T.get_thread_binding()
        if tx >= 256:
            A[tx] = 2.0
        elif tx >= 128:
            A[tx] = 1.0
        elif tx < 64:
            A[tx] = 0.0
'''
    f = T.from_script(src)
    (r2, r1, r0) = _stmts(f, N.WarpGroups)
    assert (r2.groups, r1.groups) == ((2,), (1,))
    # tx < 64 within warpgroup 0: a region of its first two warps, the rest no branch's
    assert (r0.groups, r0.span, r0.first_thread, r0.num_threads) == ((), (0, 64), 0, 64)
    assert isinstance(r0.body[0], N.Store)


@pytest.mark.parametrize("cond,threads,orelse,span", [
    ("tx < 64", 256, True, (0, 64)),      # half a warpgroup
    ("tx >= 192", 256, False, (192, 256)),
    ("tx >= 32 and tx < 96", 256, False, (32, 96)),
])
def test_whole_warps_make_regions_and_gemm_there_is_refused(cond, threads, orelse, span):
    """TileLang plans the branch for the warps it selects: a region of whole warps (its
    else the rest), where no T.gemm runs (an MMA takes whole warpgroups)."""
    f = branch_program(cond, threads, orelse)
    regions = _stmts(f, N.WarpGroups)
    assert regions[0].span == span and not regions[0].groups and not _stmts(f, N.If)
    if orelse:
        assert regions[1].span == (span[1], threads)
    text = print_func(f)
    assert f"if {span[0]} <= T.get_thread_binding() < {span[1]}:" in text
    assert print_func(T.from_script(text)) == text
    with pytest.raises(GemmError, match=rf"thread region of threads {span[0]}..{span[1] - 1} "
                                        r"\(<script>:14\), which is not whole warpgroups"):
        lower(f, "sm_90a")


@pytest.mark.parametrize("cond,threads,orelse", [
    ("tx < 16", 256, False),              # part of a warp
    ("tx < 128 or tx >= 256", 384, False),  # not one run
    ("tx >= 128 and tx < 256", 384, True),  # its else is warpgroups 0 and 2
    ("tx == 0", 256, False),
    ("tx % 128 < 64", 256, False),
])
def test_other_thread_conditions_stay_ifs_and_gemm_is_refused(cond, threads, orelse):
    f = branch_program(cond, threads, orelse)
    assert not _regions(f) and _stmts(f, N.If)
    with pytest.raises(GemmError, match=r"runs under `if .*:` \(<script>:14\)"):
        lower(f, "sm_90a")


def test_thread_condition_inside_a_region_stays_an_if():
    src = '''
@T.prim_func
def nested(A: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        tx = T.get_thread_binding()
        with T.ws(1):
            if tx < 128:
                A[tx] = 1.0
        if tx < 128:
            if tx < 128:
                A[tx] = 2.0
'''
    f = T.from_script(src)
    outer, inner = _stmts(f, N.WarpGroups)
    assert (outer.groups, inner.groups) == ((1,), (0,))
    assert isinstance(outer.body[0], N.If) and isinstance(inner.body[0], N.If)


# ---- barriers: side-by-side regions ------------------------------------------------------------
def test_no_block_barrier_between_the_branches():
    """Warpgroup 0 writes P_s and the others read it after the `ready` mbarrier: a block
    barrier between the regions would wait for warpgroup 0's end; the block barrier the
    top-level copies need goes before the first branch."""
    plan = lower(handoff(), "sm_90a")
    body = plan.func.kernels[0].body
    top = [type(s).__name__ for s in body if not isinstance(s, (N.Allocate, N.Let))]
    assert top[-3:] == ["Barrier", "WarpGroups", "WarpGroups"]
    src = emit_cute(plan)
    first, second = src.index("# T.ws(0)"), src.index("# T.ws(1, 2)")
    assert "sync_threads()" not in src[first:]


def flag_handoff_loop_var(chunks=8):
    """Warp 0 writes rows into a shared slot and raises a shared flag; warp 1 spins on it and
    sums each row into a ``T.alloc_var`` declared without init inside its serial loop
    (TileLang declares it once, zeroed, so it is hoisted out of the loop)."""

    @T.prim_func
    def main(X: T.Tensor((chunks, 32), "float32"), S: T.Tensor((chunks,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            ring = T.alloc_shared((32,), "float32")
            full = T.alloc_shared((1,), "int32")
            done = T.alloc_shared((1,), "int32")
            if tx == 0:
                full[0] = 0
                done[0] = 0
            T.sync_threads()
            if tx < 32:
                for c in T.serial(chunks):
                    while T.atomic_load(done[0], memory_order="acquire") != c:
                        pass
                    ring[tx] = X[c, tx]
                    T.sync_warp()
                    if tx == 0:
                        T.atomic_store(full[0], c + 1, memory_order="release")
            else:
                for c in T.serial(chunks):
                    while T.atomic_load(full[0], memory_order="acquire") != c + 1:
                        pass
                    v = T.alloc_var("float32")
                    v = ring[tx - 32]
                    for o in T.unroll(5):
                        v += T.shfl_xor(v, 16 >> o)
                    T.sync_warp()
                    if tx == 32:
                        S[c] = v
                        T.atomic_store(done[0], c + 1, memory_order="release")
    return main


def test_loop_var_of_a_branch_is_declared_inside_its_region():
    """The hoisted declaration (and its zero) of the consumer's loop variable stays in its
    region: before the region, every thread's zero store stood between the two branches and
    the barrier pass ordered them by a block barrier, which warp 0 reached only after all its
    chunks -- waiting on warp 1, which waited at the barrier (a hang)."""
    f = flag_handoff_loop_var()
    body = f.kernels[0].body
    assert [type(s).__name__ for s in body[-2:]] == ["WarpGroups", "WarpGroups"]
    second = body[-1].body
    assert isinstance(second[0], N.Allocate) and second[0].buffer.name == "v"
    assert isinstance(second[1], N.Store) and second[1].buffer == "v"
    src = emit_cute(lower(f, "sm_90a"))
    regions = src[src.index("# thread region: threads 0..31"):]
    assert "sync_threads()" not in regions
    consumer = regions[regions.index("# thread region: threads 32..63"):]
    assert consumer.index("v = cute.make_rmem_tensor((1,), cutlass.Float32)") < \
        consumer.index("for c_1_ in cutlass.range(0, 8)")


@pytest.mark.gpu
def test_loop_var_of_a_branch_on_gpu():
    import torch
    X = torch.randn(8, 32, device="cuda")
    S = torch.zeros(8, device="cuda")
    tilecute.compile(flag_handoff_loop_var())(X, S)
    torch.testing.assert_close(S, X.sum(1), rtol=1e-5, atol=1e-5)


def test_accumulator_rows_reduce_in_regions():
    src = emit_cute(lower(handoff(), "sm_90a"))
    region = src[src.index("# T.ws(1, 2)"):]
    # warpgroup 0: the rows within the quads; warpgroups 1..2: FullCol (warps along N),
    # partials through shared on the region's named barrier, its threads numbered from 0
    assert "tcrow.reduce_rows(S, m" in src
    call = [ln for ln in region.splitlines() if "reduce_rows_across(acc, l" in ln][0]
    wtid = [ln for ln in region.splitlines() if "= tc_tid - 128" in ln][0].split("=")[0].strip()
    # (named barriers 0 and 1 are the block's and a producer kernel's; regions take 2..)
    assert re.search(rf"\(1, 2\), 64, {wtid}, 256, ([2-9]|1[0-5])\)", call), call


def row_sums_in_upper_warpgroup(rows=128, cols=128, whole=False):
    """Warpgroup 1 reduces the rows of a rows x cols fragment it loads: a reduction inside a
    region, its warps meeting on the region's named barrier.  ``whole``: the sums are
    stored reversed (each thread reads rows other than its own)."""
    src = '''
@T.prim_func
def red(A: T.Tensor((ROWS, COLS), "float32"), R: T.Tensor((ROWS,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        a = T.alloc_fragment((ROWS, COLS), "float32")
        r = T.alloc_fragment((ROWS,), "float32")
        tx = T.get_thread_binding()
        if tx >= 128:
            T.copy(A, a)
            T.reduce_sum(a, r, dim=1)
            STORE
'''
    store = "for i in T.Parallel(ROWS):\n                R[i] = r[ROWS - 1 - i]" if whole \
        else "T.copy(r, R)"
    return T.from_script(src.replace("STORE", store).replace("ROWS", str(rows))
                         .replace("COLS", str(cols)))


def test_reduce_in_a_region_syncs_the_region():
    # rows of 512 over the region's 128 threads x 4 registers: the rows' 4 warps meet in
    # shared on the region's barrier (128 threads, id 2..15), numbering the warps from the
    # region's first (block warp 4)
    src = emit_cute(lower(row_sums_in_upper_warpgroup(16, 512), "sm_90a"))
    region = src[src.index("# T.ws(1)"):]
    wtid = [ln for ln in region.splitlines() if "= tc_tid - 128" in ln][0].split("=")[0].strip()
    call = [ln for ln in region.splitlines() if "tcr.block_allreduce(" in ln][0]
    assert re.search(r", 4, 4, 128, ([2-9]|1[0-5]), 4\)$", call), call
    assert "sync_threads()" not in region and wtid
    # rows of 128: a warp each (32 threads x 4 registers), the rows shared out through
    # shared memory on the region's barrier, its threads numbered from 0
    src = emit_cute(lower(row_sums_in_upper_warpgroup(whole=True), "sm_90a"))
    region = src[src.index("# T.ws(1)"):]
    wtid = [ln for ln in region.splitlines() if "= tc_tid - 128" in ln][0].split("=")[0].strip()
    call = [ln for ln in region.splitlines() if "tcr.grouped_rows(" in ln][0]
    assert re.search(rf", 4, 32, {wtid}, 128, ([2-9]|1[0-5])\)$", call), call
    assert "sync_threads()" not in region
    # stored as T.copy(r, R): each warp's first thread stores its rows, the region's
    # thread index numbering the rows
    src = emit_cute(lower(row_sums_in_upper_warpgroup(), "sm_90a"))
    region = src[src.index("# T.ws(1)"):]
    wtid = [ln for ln in region.splitlines() if "= tc_tid - 128" in ln][0].split("=")[0].strip()
    assert "tcr.grouped_rows(" not in region and f"if {wtid} % 32 == 0:" in region
    assert re.search(rf"= tc_c\d+ \* 4 \+ {wtid} // 32$", region, re.M), region


def mix_rows(n=4, c=256):
    """TileLang's split of a 96-thread block by warps: warp 0 normalises an n x n matrix
    (exponentials less their row's max, each column divided by its sum: reductions over a
    fragment of n * n < 32 x 4 elements, which its first threads hold), warps 1..2 mix
    the rows of X by weights the whole block staged in shared."""
    @T.prim_func
    def mix(S: T.Tensor((n, n), "float32"), X: T.Tensor((n, c), "float32"),
            P: T.Tensor((n, n), "float32"), Y: T.Tensor((c,), "float32")):
        with T.Kernel(1, threads=96) as bx:
            tx = T.get_thread_binding()
            w = T.alloc_shared((n,), "float32")
            for j in T.Parallel(n):
                w[j] = S[0, j]
            if tx < 32:
                m = T.alloc_fragment((n, n), "float32")
                rmax = T.alloc_fragment((n,), "float32")
                csum = T.alloc_fragment((n,), "float32")
                T.copy(S, m)
                T.reduce_max(m, rmax, dim=1)
                for i, j in T.Parallel(n, n):
                    m[i, j] = T.exp(m[i, j] - rmax[i])
                T.reduce_sum(m, csum, dim=0)
                for i, j in T.Parallel(n, n):
                    P[i, j] = m[i, j] / csum[j]
            else:
                xs = T.alloc_shared((n, c), "float32")
                acc = T.alloc_fragment((c,), "float32")
                T.copy(X, xs)
                T.clear(acc)
                for k in T.serial(n):
                    for j in T.Parallel(c):
                        acc[j] += w[k] * xs[k, j]
                T.copy(acc, Y)
    return mix


def test_warp_regions_plan_their_tile_ops_for_their_threads(tmp_path):
    f = mix_rows()
    assert [r.span for r in _stmts(f, N.WarpGroups)] == [(0, 32), (32, 96)]
    plan = lower(f, "sm_90a")
    layouts = {a.buffer.name: a.layout for a in _stmts(plan.func, N.Allocate)}
    assert (layouts["m"].threads, layouts["m"].vector) == (32, 4)
    assert (layouts["acc"].threads, layouts["acc"].first_thread) == (64, 32)
    src = emit_cute(plan)
    first, second = src.index("# thread region: threads 0..31"), \
        src.index("# thread region: threads 32..95")
    # one thread holds each row of 4: no shuffle across threads; the 4 rows meet in shared
    # on the region's named barrier (32 threads), past the 4th row no thread writes
    assert "a row is 1 threads x 4 registers" in src[first:second]
    assert re.search(r"tcr.grouped_rows\(.*, 32, 1, tc_tid, 32, ([2-9]|1[0-5])\)", src[first:second])
    # each region's copies are spread over its own threads; the top-level staging of w is
    # ordered before both regions, and nothing orders one region after the other
    assert "for tc_k" in src[second:] and "tc_tid - 32" in src[second:]
    assert "sync_threads()" in src[:first] and "sync_threads()" not in src[first:]
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


def gated_rows(B=64, n=4, c=128, steps=4):
    """The branches of `if tx < 32:` in a 96-thread block run at the same time: warp 0
    turns each row of an n x n score tile into its softmax (row max and row sum: reductions
    over a fragment smaller than one round of the warp, their rows meeting in a shared
    scratch), warps 1..2 stage gates (sigmoid of the first n scores, + 1) in a small shared
    buffer of their own and apply them to `steps` tiles of X.  Neither region's shared
    buffers may sit on the other's bytes (they did before a3e44a5: the gates and the row
    maxima's scratch were one 16-byte slot, so warps 1..2 weighted X by the row maxima
    warp 0 had written meanwhile; TileLang's deepseek_mhc pre kernel had 99.9% of its
    layer_input wrong on an H100 that way)."""
    @T.prim_func
    def gated(S: T.Tensor((B, n * n), "float32"), X: T.Tensor((B, n, steps * c), "float32"),
              P: T.Tensor((B, n * n), "float32"), Y: T.Tensor((B, steps * c), "float32")):
        with T.Kernel(B, threads=96) as b:
            s_sh = T.alloc_shared((n * n,), "float32")
            T.copy(S[b, 0], s_sh)
            tx = T.get_thread_binding()
            if tx < 32:
                m = T.alloc_fragment((n, n), "float32")
                rmax = T.alloc_fragment((n,), "float32")
                rsum = T.alloc_fragment((n,), "float32")
                for i, j in T.Parallel(n, n):
                    m[i, j] = s_sh[i * n + j]
                T.reduce_max(m, rmax, dim=1)
                for i, j in T.Parallel(n, n):
                    m[i, j] = T.exp(m[i, j] - rmax[i])
                T.reduce_sum(m, rsum, dim=1)
                for i, j in T.Parallel(n, n):
                    P[b, i * n + j] = m[i, j] / rsum[i]
            else:
                g = T.alloc_shared((n,), "float32")
                for j in T.Parallel(n):
                    g[j] = T.sigmoid(s_sh[j]) + 1.0
                for h in T.serial(steps):
                    xs = T.alloc_shared((n, c), "float32")
                    acc = T.alloc_fragment((c,), "float32")
                    T.copy(X[b, 0, h * c], xs)
                    T.clear(acc)
                    for k in T.serial(n):
                        for j in T.Parallel(c):
                            acc[j] += g[k] * xs[k, j]
                    T.copy(acc, Y[b, h * c])
    return gated


def test_branches_never_share_shared_bytes():
    """Each shared buffer only one branch uses (the reductions' scratch in warp 0's, g and
    xs in warps 1..2's) has bytes of its own: the branches are one side-by-side run."""
    from tilecute.transform.analysis import buffers_used
    from tilecute.transform.shared_memory import side_by_side_runs

    plan = lower(gated_rows(), "sm_90a")
    body = plan.func.kernels[0].body
    regions = [i for i, s in enumerate(body) if isinstance(s, N.WarpGroups)]
    assert [body[i].span for i in regions] == [(0, 32), (32, 96)]
    assert side_by_side_runs(body) == [(regions[0], regions[1])]
    slots = {a.buffer.name: (a.slot.offset, a.slot.offset + a.slot.stride)
             for a in _stmts(plan.func, N.Allocate) if a.slot is not None}
    first, second = (buffers_used(body[i]) & set(slots) for i in regions)
    first, second = first - second, second - first
    assert {"rmax_scratch", "rsum_scratch"} <= first and {"g", "xs"} <= second, (first, second)
    for a in first:
        for b in second:
            (s1, e1), (s2, e2) = slots[a], slots[b]
            assert e1 <= s2 or e2 <= s1, (a, slots[a], b, slots[b])
    src = emit_cute(plan)
    # ... and the generated kernel puts the gates after the scratch, not on it
    offset = {name: int(off) for name, off in
              re.findall(r"(\w+) = cute.make_tensor\(cute.recast_ptr\(tc_smem \+ (\d+),", src)}
    assert offset["g"] != offset["rmax_scratch"] and offset["g"] != offset["rsum_scratch"]


@pytest.mark.parametrize("cond", ["tx < 16", "tx == 0", "tx >= 16 and tx < 48", "8 > tx"])
@pytest.mark.parametrize("op", ["T.copy(A, B)", "for i in T.Parallel(128):\n                B[i] = A[i]",
                                "T.reduce_sum(f, s, dim=0)"])
def test_tile_ops_under_part_of_a_warp_are_refused(cond, op):
    """TileLang plans them for the threads the branch selects; tilecute makes regions of
    whole warps only, and spreading them over the block's threads would leave the others'
    part undone: refused with the branch's condition and line."""
    src = f'''
@T.prim_func
def part(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"),
         S: T.Tensor((1,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        f = T.alloc_fragment((128,), "float32")
        s = T.alloc_fragment((1,), "float32")
        T.copy(A, f)
        if {cond}:
            {op}
        T.copy(s, S)
'''
    with pytest.raises(LayoutError, match=rf"<script>:1[01]: .*runs under `if .*:` "
                                          r"\(<script>:10\), which selects some of the block's "
                                          r"threads"):
        lower(T.from_script(src), "sm_90a")


def test_serial_work_under_one_thread_stays():
    """What each selected thread runs whole (a T.serial loop, a replicated fragment's
    T.Parallel) is the same on the threads TileLang would plan it for."""
    src = '''
@T.prim_func
def one(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        if tx == 0:
            for i in T.serial(128):
                B[i] = A[i] * 2.0
        if tx < 16:
            r = T.alloc_fragment((4,), "float32")
            for i in T.Parallel(4):
                r[i] = A[tx * 4 + i]
            for i in T.serial(4):
                B[tx * 4 + i] = r[i]
'''
    assert emit_cute(lower(T.from_script(src), "sm_90a"))


# ---- cubins -------------------------------------------------------------------------------------
@pytest.mark.parametrize("prog", [two_consumers, handoff, gated_rows])
def test_cubins(prog, tmp_path):
    info = tilecute.build_cubin(prog(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_two_consumers_source():
    src = emit_cute(lower(two_consumers(), "sm_90a"))
    assert "if tc_tid < 128:  # T.ws(0)" in src
    assert "if tc_tid >= 128 and tc_tid < 256:  # T.ws(1)" in src
    assert "if tc_tid >= 256:  # T.ws(2)" in src
    assert src.count("tcrow.reduce_rows(") == 2


# ---- GPU ------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_warp_regions():
    import torch

    kernel = tilecute.compile(mix_rows())
    s = torch.randn(4, 4, device="cuda")
    x = torch.randn(4, 256, device="cuda")
    p = torch.empty(4, 4, device="cuda")
    y = torch.empty(256, device="cuda")
    kernel(s, x, p, y)
    e = torch.exp(s - s.amax(dim=1, keepdim=True))
    torch.testing.assert_close(p, e / e.sum(dim=0, keepdim=True), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y, s[0] @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_branches_own_their_shared_bytes():
    import torch

    kernel = tilecute.compile(gated_rows())
    s = torch.randn(64, 16, device="cuda")
    x = torch.randn(64, 4, 512, device="cuda")
    p = torch.empty(64, 16, device="cuda")
    y = torch.empty(64, 512, device="cuda")
    kernel(s, x, p, y)
    torch.testing.assert_close(p, s.view(64, 4, 4).softmax(-1).view(64, 16), rtol=1e-4,
                               atol=1e-5)
    gates = torch.sigmoid(s[:, :4]) + 1.0
    torch.testing.assert_close(y, (gates.unsqueeze(-1) * x).sum(1), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols", [(128, 128), (16, 512)])
def test_gpu_reduce_in_a_region(rows, cols):
    import torch

    kernel = tilecute.compile(row_sums_in_upper_warpgroup(rows, cols))
    a = torch.randn(rows, cols, device="cuda")
    r = torch.empty(rows, device="cuda")
    kernel(a, r)
    torch.testing.assert_close(r, a.sum(dim=1), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_two_consumers():
    import torch

    kernel = tilecute.compile(two_consumers())
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 128, device="cuda", dtype=torch.float32)
    r = torch.empty(256, device="cuda", dtype=torch.float32)
    kernel(a, b, c, r)
    ref = a.float() @ b.float().T
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(r, ref.max(dim=1).values, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gpu_handoff():
    import torch

    kernel = tilecute.compile(handoff())
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16) / 4
    k = torch.randn(128, 64, device="cuda", dtype=torch.float16) / 4
    v = torch.randn(128, 128, device="cuda", dtype=torch.float16)
    o = torch.empty(64, 128, device="cuda", dtype=torch.float32)
    lsum = torch.empty(64, device="cuda", dtype=torch.float32)
    kernel(q, k, v, o, lsum)
    s = q.float() @ k.float().T
    p = torch.exp2(s - s.max(dim=1, keepdim=True).values).half().float()
    ref = p @ v.float()
    torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lsum, ref.sum(dim=1), rtol=2e-2, atol=5e-2)


def test_no_region_inside_a_branch_some_threads_take():
    """TileLang's warp-role chains (`if tx < 32: ... elif tx < 64: ... elif tx < 128:`):
    the `elif tx < 128:` runs on threads 64..127 only, so it is no warpgroup region; nor
    is a thread branch inside an `if` on a value read from memory, or in a T.Parallel."""
    src = '''
@T.prim_func
def roles(A: T.Tensor((256,), "float32"), F: T.Tensor((1,), "int32")):
    with T.Kernel(1, threads=256) as bx:
        tx = T.get_thread_binding()
        t2 = tx + 0
        if t2 < 32:
            A[tx] = 0.0
        elif tx < 64:
            A[tx] = 1.0
        elif tx < 128:
            A[tx] = 2.0
        else:
            A[tx] = 3.0
        if F[0] > 0:
            if tx < 128:
                A[tx] = 4.0
        for i in T.Parallel(2):
            if tx < 128:
                A[tx + i] = 5.0
'''
    f = T.from_script(src)
    assert not _regions(f)
    # the block-uniform condition keeps them: a branch inside `if bx == 0:`
    f = T.from_script(src.replace("if F[0] > 0:", "if bx == 0:"))
    assert _regions(f) == [(0,)]
