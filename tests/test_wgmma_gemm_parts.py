"""TileLang's explicit Hopper GEMM forms (its warp-specialized FlashMLA / MLA decode):
``T.wgmma_gemm`` (wgmma only, never waits: ``Gemm.wg_wait`` NO_WAIT, the batch in flight
until ``T.wait_wgmma``), operands that are a part of a shared matrix (``Q_s[:, :D // 2]``, a
K range: ``Gemm.a_part`` / ``b_part``, a pointer into the swizzled chunks), and ``*``
unpacking in tuples and subscripts.  CPU: IR, generated source, sm_90a cubins; GPU: vs torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower
from tilecute.transform.select_mma import GemmError
from tilecute.language.parser import FrontendError


# ---- programs (TileLang's idioms) ------------------------------------------------------------
def split_scores(H=64, BN=64, D=512, steps=4, stages=2, dtype="float16", explicit=True,
                 acc_dtype="float32"):
    """S = Q @ K^T, D split in two K halves read as column ranges of the shared tiles (the
    MLA decode's ``Q_shared[:, :dim // 2]`` / ``KV_shared[stage, :, dim // 2:]``), each
    block of BN keys one step; ``explicit``: T.wgmma_gemm and one T.wait_wgmma(0)."""
    tile = (BN, D)
    gemm = T.wgmma_gemm if explicit else T.gemm

    @T.prim_func
    def scores(Q: T.Tensor((H, D), dtype), K: T.Tensor((steps * BN, D), dtype),
               S: T.Tensor((H, steps * BN), acc_dtype)):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((H, D), dtype)
            K_s = T.alloc_shared((stages, *tile), dtype)
            acc = T.alloc_fragment((H, BN), acc_dtype)
            T.copy(Q, Q_s)
            for i in T.serial(steps):
                s = i % stages
                T.copy(K[i * BN:(i + 1) * BN, :], K_s[s, :, :])
                gemm(Q_s[:, :D // 2], K_s[s, :, :D // 2], acc, transpose_B=True, clear_accum=True)
                gemm(Q_s[:, D // 2:], K_s[s, :, D // 2:], acc, transpose_B=True)
                if explicit:
                    T.wait_wgmma(0)
                T.copy(acc, S[:, i * BN:(i + 1) * BN])

    return scores


def tiled_k(M=128, N_=128, K=256, bk=64, threads=128, rows=None, trans_B=False,
            dtype="float16", acc_dtype="float32", serial=False):
    """C = A @ B with A and B whole in shared memory, K walked in bk-wide ranges
    (A_s[:, k * bk:(k + 1) * bk]) by T.unroll, or with ``serial`` by T.serial (run-time
    range starts) with ``clear_accum=(k == 0)`` in place of T.clear; ``rows``: only the
    first ``rows`` rows of A (an M range) into a smaller accumulator; ``trans_B``: B is
    (N, K), ranges of its columns."""
    m = rows or M
    steps = T.serial if serial else T.unroll

    @T.prim_func
    def tk(A: T.Tensor((M, K), dtype), B: T.Tensor((N_, K) if trans_B else (K, N_), dtype),
           C: T.Tensor((m, N_), acc_dtype)):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((N_, K) if trans_B else (K, N_), dtype)
            acc = T.alloc_fragment((m, N_), acc_dtype)
            T.copy(A, A_s)
            T.copy(B, B_s)
            if not serial:
                T.clear(acc)
            for k in steps(K // bk):
                if trans_B:
                    T.gemm(A_s[0:m, k * bk:(k + 1) * bk], B_s[:, k * bk:(k + 1) * bk], acc,
                           transpose_B=True, clear_accum=serial and k == 0)
                else:
                    T.gemm(A_s[0:m, k * bk:(k + 1) * bk], B_s[k * bk:(k + 1) * bk, :], acc,
                           clear_accum=serial and k == 0)
            T.copy(acc, C)

    return tk


def chunked_loads(H=64, BN=64, D=256, kt=64, dtype="float16"):
    """S = Q @ K^T with K's tile filled by one T.tma_copy per kt-wide column range of it,
    each on its own mbarrier, and each range multiplied once its barrier completes (the
    FlashMLA example's hand-split loads and QK), T.wgmma_gemm with clear_accum=(j == 0)."""
    n = D // kt

    @T.prim_func
    def chunked(Q: T.Tensor((H, D), dtype), K: T.Tensor((BN, D), dtype),
                S: T.Tensor((H, BN), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((H, D), dtype)
            K_s = T.alloc_shared((BN, D), dtype)
            acc = T.alloc_fragment((H, BN), "float32")
            ready = T.alloc_barrier(arrive_count=[128] * n)
            T.copy(Q, Q_s)
            for j in T.unroll(n):
                T.tma_copy(K[:, j * kt:(j + 1) * kt], K_s[:, j * kt:(j + 1) * kt], barrier=ready[j])
                T.barrier_arrive(ready[j])
            for j in T.unroll(n):
                T.barrier_wait(ready[j], 0)
                T.wgmma_gemm(Q_s[:, j * kt:(j + 1) * kt], K_s[:, j * kt:(j + 1) * kt], acc,
                             transpose_B=True, clear_accum=(j == 0))
            T.wait_wgmma(0)
            T.copy(acc, S)

    return chunked


def one_gemm(a_range, extra="", b_range=None, M=64, N_=64, K=128, threads=128, dtype="float16", acc="float32"):
    """A T.wgmma_gemm whose A is ``A_s[a_range]`` of a (M, K) tile (for refusals)."""
    return f'''
@T.prim_func
def one(A: T.Tensor(({M}, {K}), "{dtype}"), B: T.Tensor(({N_}, {K}), "{dtype}"),
        C: T.Tensor((64, {N_}), "{acc}")):
    with T.Kernel(1, threads={threads}) as bx:
        A_s = T.alloc_shared(({M}, {K}), "{dtype}")
        B_s = T.alloc_shared(({N_}, {K}), "{dtype}")
        acc = T.alloc_fragment((64, {N_}), "{acc}")
        T.copy(A, A_s)
        T.copy(B, B_s)
        {extra}
        T.wgmma_gemm(A_s[{a_range}], B_s[{b_range or a_range}], acc, transpose_B=True)
        T.wait_wgmma(0)
        T.copy(acc, C)
'''


def _gemms(func):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]


def _layouts(plan):
    return {s.buffer.name: s.layout for k in plan.func.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.Allocate)}


# ---- the frontend ---------------------------------------------------------------------------
def test_wgmma_gemm_and_parts_in_the_ir():
    f = split_scores()
    g1, g2 = _gemms(f)
    assert g1.wg_wait == g2.wg_wait == N.NO_WAIT
    assert g1.a_part == ((N.as_expr(0), 64), (N.as_expr(0), 256)) and g1.a_index == ()
    assert g2.b_part[1] == (N.as_expr(256), 256) and len(g2.b_index) == 1
    text = print_func(f)
    assert "T.wgmma_gemm(Q_s[0:64, 256:512], K_s[s, 0:64, 256:512], acc" in text
    assert "K_s = T.alloc_shared((2, 64, 512)" in text  # (2, *tile)
    assert from_json(to_json(f)) == f
    assert print_func(T.from_script(text)) == text


def test_starred_unpacking_in_subscripts():
    idx = (1, 2)

    @T.prim_func
    def star(A: T.Tensor((4, 8, 8), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for j in T.Parallel(8):
                B[j] = A[*idx, j] + A[0, *idx]

    text = print_func(star)
    assert "A[1, 2, j] + A[0, 1, 2]" in text


def test_starred_unpacking_of_a_non_sequence_is_refused():
    with pytest.raises(FrontendError, match=r"`\*n` unpacks int, not a tuple or list"):
        T.from_script('''
@T.prim_func
def bad(A: T.Tensor((4, 8), "float32")):
    n = 8
    with T.Kernel(1, threads=32) as bx:
        s = T.alloc_shared((4, *n), "float32")
''')


# ---- planning -------------------------------------------------------------------------------
@pytest.mark.parametrize("a_range,b_range,M,match", [
    # columns from 8 (16 bytes): no swizzle chunk starts there
    ("0:64, 8:72", ":, 8:72", 64, "must start and end on 32-byte chunks"),
    # rows from 4: not on the swizzle pattern's 8-row period
    ("4:68, :", ":, :", 128, "starts and ends on a multiple of 8 rows"),
])
def test_parts_the_mma_cannot_read_are_refused(a_range, b_range, M, match):
    with pytest.raises(GemmError, match="T.wgmma_gemm") as e:
        lower(T.from_script(one_gemm(a_range, b_range=b_range, M=M)), "sm_90a")
    assert match in str(e.value)


def test_swizzle_narrows_to_the_ranges_gemm_reads():
    """Ranges 32 columns (64 bytes) wide: the 64-byte swizzle, whose chunks they are."""
    plan = lower(tiled_k(bk=32), "sm_90a")
    assert _layouts(plan)["A_s"] == N.Layout("tma_swizzled", swizzle=64)
    assert _layouts(plan)["B_s"] == N.Layout("tma_swizzled", swizzle=128)  # its rows are K
    src = emit_cute(plan)
    # A_s[0:128, k * 32:(k + 1) * 32]: chunk k of A_s (128 rows of 64 bytes); B_s[k * 32:
    # (k + 1) * 32, :] (MN-major): rows k * 32.. of each 128-byte chunk of 256 rows
    assert ("tcm.operand(tc_smem + cute.assume(0 + (k * 32 * 256), divby=1024), "
            "cutlass.Float16, 128, 32, 64, False, \"wgmma\")") in src
    assert ("tcm.operand(tc_smem + cute.assume(65536 + (k * 32 * 128), divby=1024), "
            "cutlass.Float16, 32, 128, 128, True, \"wgmma\", chunk_rows=256)") in src


def test_tma_copies_into_column_ranges():
    """T.tma_copy into K_s[:, j * 64:(j + 1) * 64] of a 128-byte-swizzled (64, 256) tile: one
    64 x 64 box at chunk j (j * 64 columns * 64 rows * 2 bytes in)."""
    src = emit_cute(lower(chunked_loads(), "sm_90a"))
    assert "tct.load(K_desc, tc_smem + cute.assume(32768 + (j * 64 * 128), divby=1024), " \
           "ready + j, (j * 64, 0), 8192" in src
    # clear_accum=(j == 0): wgmma's accumulate flag, the earlier ranges' batches kept in flight
    assert "accumulate=not j_1_ == 0, wait=None)" in src and "tcm.drain" not in src


def test_tma_copy_into_columns_off_the_chunks_is_refused():
    text = print_func(chunked_loads(kt=32)).replace("K_s[0:64, j * 32:j * 32 + 32], barrier",
                                                     "K_s[0:64, j * 16:j * 16 + 32], barrier")
    with pytest.raises(Exception, match="a range of its columns of whole swizzle chunks"):
        lower(T.from_script(text), "sm_90a")


@pytest.mark.parametrize("kw,why", [
    ({"arch": "sm_80"}, "wgmma needs sm_90a; the target is sm_80"),
    ({"options": {"disable_wgmma": True}}, "wgmma is disabled here"),
    ({"dtype": "float32"}, "no float32 operands (tf32 runs on mma.sync"),
    ({"threads": 64}, "wgmma cannot tile 64 x 64 with 64 threads"),
])
def test_wgmma_gemm_never_falls_back(kw, why):
    arch, options = kw.pop("arch", "sm_90a"), kw.pop("options", None)
    src = one_gemm(":, :", **kw)
    with pytest.raises(GemmError, match="T.wgmma_gemm") as e:
        lower(T.from_script(src), arch, options)
    assert why in str(e.value) and ":12" in str(e.value)


@pytest.mark.parametrize("cond", ["tx < 64", "tx >= 192", "t == 0", "tx < 128 or tx >= 192"])
def test_gemm_under_a_thread_index_condition_is_refused(cond):
    """A condition on the thread index that selects no run of whole warpgroups stays an
    `if` (those that do are warpgroup regions: tests/test_thread_branches.py), and a
    T.gemm under it is refused: tilecute would plan it for all 256 threads."""
    src = f'''
@T.prim_func
def branch(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"),
           S: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=256) as bx:
        Q_s = T.alloc_shared((64, 64), "float16")
        K_s = T.alloc_shared((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        tx = T.get_thread_binding()
        t = tx % 128
        T.copy(Q, Q_s)
        T.copy(K, K_s)
        if {cond}:
            T.wgmma_gemm(Q_s, K_s, acc, transpose_B=True, clear_accum=True)
            T.wait_wgmma(0)
        T.copy(acc, S)
'''
    # an if on whole warps is a thread region (4764c5d): the refusal names it and its line
    with pytest.raises(GemmError, match=r"T.wgmma_gemm\(Q_s, K_s, acc\): it runs (in the thread "
                       r"region of threads \d+\.\.\d+ \(<script>:13\), which is not whole "
                       r"warpgroups|under `if .*:` \(<script>:13\).*T.ws\(0\))") as e:
        lower(T.from_script(src), "sm_90a")
    assert str(e.value).startswith("<script>:14:")


# ---- code: no wait, and the waits where registers are read ---------------------------------
def test_no_wait_until_wait_wgmma():
    src = emit_cute(lower(split_scores(), "sm_90a"))
    gemms = [line for line in src.splitlines() if "tcm.gemm(" in line]
    assert len(gemms) == 2 and all(line.endswith("wait=None)") for line in gemms)
    assert "tc_smem + 32768, cutlass.Float16, 64, 256, 128, False" in gemms[1]  # Q_s[:, 256:]
    body = src[src.index("tcm.gemm("):]
    assert body.index("tcm.wait_batches(0)") < body.index("tcm.fence_registers(acc)")
    assert "tcm.drain(" not in body  # T.wait_wgmma(0) waited already


def test_16_bit_accumulators_do_not_stay_in_flight():
    """CuTe DSL repacks float16 accumulator registers around each wgmma, which is wrong
    while a batch runs: T.wgmma_gemm into one waits (only the timing differs)."""
    src = emit_cute(lower(split_scores(acc_dtype="float16"), "sm_90a"))
    gemms = [line for line in src.splitlines() if "tcm.gemm(" in line]
    assert len(gemms) == 2 and not any("wait=" in line for line in gemms)
    assert src.count("a 16-bit accumulator cannot stay in flight") == 2


def test_reading_an_accumulator_in_flight_still_waits():
    """Without T.wait_wgmma, the copy out of acc waits for the batches first; a T.gemm
    (which waits) in place of the second T.wgmma_gemm retires both."""
    text = re.sub(r"\n *T.wait_wgmma\(0\)", "", print_func(split_scores()))
    src = emit_cute(lower(T.from_script(text), "sm_90a"))
    body = src[src.index("tcm.gemm("):]
    assert "tcm.wait_batches" not in body
    assert body.index("tcm.drain(acc)") < body.index("tc_acc_ij[")


READ = "for tc_r3 in cutlass.range(0, cute.size(acc), 2, unroll_full=True):"  # a nest over acc


def _branchy(where):
    return f'''
@T.prim_func
def branchy(Q: T.Tensor((64, 128), "float16"), K: T.Tensor((64, 128), "float16"),
            S: T.Tensor((64, 64), "float32"), n: T.int32):
    with T.Kernel(1, threads=128) as bx:
        Q_s = T.alloc_shared((64, 128), "float16")
        K_s = T.alloc_shared((64, 128), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(Q, Q_s)
        T.copy(K, K_s)
        T.clear(acc)
        for i in T.serial(n):
{where}
        T.copy(acc, S)
'''


@pytest.mark.parametrize("where,expect", [
    # a batch one branch leaves in flight: the other branch's read waits
    ("""            if i % 2 == 0:
                T.wgmma_gemm(Q_s, K_s, acc, transpose_B=True)
            else:
                for r, c in T.Parallel(64, 64):
                    acc[r, c] = acc[r, c] * 0.5""", ["else:", "tcm.drain(acc)", READ]),
    # a batch a step leaves to the next: the next step's read (at the loop's top) waits
    ("""            for r, c in T.Parallel(64, 64):
                acc[r, c] = acc[r, c] * 0.5
            T.wgmma_gemm(Q_s, K_s, acc, transpose_B=True)""",
     ["for i in cutlass.range(0, n):", "tcm.drain(acc)", READ]),
])
def test_batches_in_flight_across_branches_and_steps(where, expect):
    src = emit_cute(lower(T.from_script(_branchy(where)), "sm_90a"))
    lines = [line.strip() for line in src.splitlines() if not line.strip().startswith("#")]
    at = lines.index(expect[0])
    assert [line.split("  #")[0] for line in lines[at:at + 3]] == expect


def handed_over(H=64, BN=64, D=64):
    """P = S @ V with S written into shared memory by threads, then read by wgmma: the
    program fences the async proxy itself (T.fence_proxy_async) before T.sync_threads, as
    TileLang's FlashMLA does before handing a tile to another warpgroup's T.wgmma_gemm."""
    @T.prim_func
    def hand(Sc: T.Tensor((H, BN), "float16"), V: T.Tensor((BN, D), "float16"),
             O: T.Tensor((H, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S_s = T.alloc_shared((H, BN), "float16")
            V_s = T.alloc_shared((BN, D), "float16")
            acc = T.alloc_fragment((H, D), "float32")
            T.copy(V, V_s)
            for i, j in T.Parallel(H, BN):
                S_s[i, j] = Sc[i, j] * 2
            T.fence_proxy_async()
            T.sync_threads()
            T.wgmma_gemm(S_s, V_s, acc, clear_accum=True)
            T.wait_wgmma(0)
            T.copy(acc, O)

    return hand


def test_fence_proxy_async():
    f = handed_over()
    assert "T.fence_proxy_async()" in print_func(f)
    assert print_func(T.from_script(print_func(f))) == print_func(f)
    src = emit_cute(lower(f, "sm_90a"))
    assert 'cute.arch.fence_proxy("async.shared", space="cta")' in src
    with pytest.raises(Exception, match="T.fence_proxy_async fences for the async proxy"):
        emit_cute(lower(T.from_script(print_func(f).replace("T.wgmma_gemm", "T.gemm")), "sm_80"))


# ---- cubins -----------------------------------------------------------------------------------
@pytest.mark.parametrize("make,options", [
    (lambda: split_scores(), None),
    (lambda: split_scores(explicit=False), None),
    (lambda: tiled_k(), None),
    (lambda: tiled_k(bk=32, rows=64, trans_B=True), None),
    (lambda: tiled_k(), {"disable_wgmma": True}),
    (lambda: tiled_k(bk=32, rows=64, trans_B=True), {"disable_wgmma": True}),
    (lambda: tiled_k(M=64, N_=64, K=64, bk=16, rows=32, dtype="float64", acc_dtype="float64"),
     None),
    (lambda: tiled_k(serial=True), None),
    (lambda: tiled_k(serial=True, trans_B=True), {"disable_wgmma": True}),
    (lambda: tiled_k(M=64, N_=64, K=64, bk=16, dtype="float64", acc_dtype="float64",
                     serial=True), None),
    (lambda: chunked_loads(), None),
    (lambda: handed_over(), None),
], ids=["wgmma_gemm", "gemm", "k_ranges", "m_and_k_ranges", "k_ranges_mma_sync",
        "m_and_k_ranges_mma_sync", "m_and_k_ranges_simt", "run_time_ranges_and_clear",
        "run_time_ranges_and_clear_mma_sync", "run_time_ranges_and_clear_simt",
        "tma_into_column_ranges", "fence_proxy_async"])
def test_cubins(tmp_path, make, options):
    built = tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path), options=options)
    assert built.kernels
    source = (tmp_path / "kernel_cute.py").read_text()
    assert ("tcm.gemm_warp(" in source) == bool(options)
    if "Float64" in source:  # SIMT: row-major A_s[0:32, k * 16:(k + 1) * 16]
        assert "cutlass.Float64, " in source and ", False, row_stride=64)" in source
    if "cutlass.range(0, " in source and "k == 0" in source:  # clear_accum=(k == 0)
        if "tcm.gemm(" in source:  # wgmma's run-time accumulate flag
            assert "accumulate=not k == 0)" in source
        else:  # zeroed where it holds
            assert "if k == 0:" in source and "acc.fill(0)" in source


# ---- GPU --------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("explicit,acc", [(True, "float32"), (False, "float32"),
                                          (True, "float16")])
def test_split_scores_match_torch(explicit, acc):
    import torch
    q = torch.randn(64, 512, dtype=torch.float16, device="cuda") / 4
    k = torch.randn(256, 512, dtype=torch.float16, device="cuda") / 4
    kernel = tilecute.compile(split_scores(explicit=explicit, acc_dtype=acc), out_idx=[-1])
    torch.testing.assert_close(kernel(q, k).float(), q.float() @ k.float().T, atol=5e-2,
                               rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"bk": 32, "rows": 64, "trans_B": True},
                                {"pass_configs": {"tl.disable_wgmma": True}},
                                {"bk": 32, "rows": 64, "trans_B": True,
                                 "pass_configs": {"tl.disable_wgmma": True}},
                                {"M": 64, "N_": 64, "K": 64, "bk": 16, "rows": 32,
                                 "dtype": "float64", "acc_dtype": "float64"},
                                {"serial": True}, {"serial": True, "trans_B": True,
                                                   "pass_configs": {"tl.disable_wgmma": True}},
                                {"M": 64, "N_": 64, "K": 64, "bk": 16, "serial": True,
                                 "dtype": "float64", "acc_dtype": "float64"}])
def test_k_ranges_match_torch(kw):
    import torch
    kw = dict(kw)
    configs = kw.pop("pass_configs", None)
    M, N_, K = kw.get("M", 128), kw.get("N_", 128), kw.get("K", 256)
    trans_B, rows = kw.get("trans_B", False), kw.get("rows") or M
    dtype = getattr(torch, kw.get("dtype", "float16"))
    a = torch.randn(M, K, dtype=dtype, device="cuda")
    b = torch.randn((N_, K) if trans_B else (K, N_), dtype=dtype, device="cuda")
    kernel = tilecute.compile(tiled_k(**kw), out_idx=[-1], pass_configs=configs)
    want = a[:rows].double() @ (b.double().T if trans_B else b.double())
    torch.testing.assert_close(kernel(a, b).double(), want, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("kt", [64, 128])
def test_chunked_loads_match_torch(kt):
    import torch
    q = torch.randn(64, 256, dtype=torch.float16, device="cuda")
    k = torch.randn(64, 256, dtype=torch.float16, device="cuda")
    kernel = tilecute.compile(chunked_loads(kt=kt), out_idx=[-1])
    torch.testing.assert_close(kernel(q, k), q.float() @ k.float().T, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_handed_over_matches_torch():
    import torch
    sc = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    v = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    kernel = tilecute.compile(handed_over(), out_idx=[-1])
    torch.testing.assert_close(kernel(sc, v), (sc * 2).float() @ v.float(), atol=5e-2, rtol=1e-2)
