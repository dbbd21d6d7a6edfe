"""Four TileLang forms tilecute refused or could misread, honored with TileLang 0.1.15's
meaning (or refused by name where it cannot be):

1. ``T.Pipelined(n, num_stages=S, order=..., stage=...)`` with ``S != max(stage) + 1``:
   TileLang's ``num_stages`` annotation is the depth override (its sm_90 lowering keeps S
   buffers and barrier pairs whatever the stage list says, ``stage=[0, 0, 0]`` included;
   sm_80's keeps ``max(stage) + 1``: the same values); tilecute builds an S-deep pipeline.
2. ``old = T.atomic_add(x[i], v, return_prev=True)`` in a nest over an MMA row / column
   fragment: one atomic per logical element, its old value seen by every thread holding
   the row (column).
3. ``float8_e8m0fnu``: MX scale factors, a storage dtype (buffers, copies, casts to and
   from float32: 2^(e - 127), 0xFF NaN).
4. ``T.mbarrier_wait_parity`` / ``T.barrier_wait`` on sm_80 (``mbarrier.test_wait`` spins).

CPU: each builds a cubin and the generated source shows the meaning; GPU: torch references."""

import pytest
import torch

import tilecute
import tilecute as tilelang
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


# ---- 1. num_stages beside stage= ---------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def staged_gemm(M=256, N=192, K=512, bm=64, bn=64, bk=32, ns=3, stage=(0, 0, 1)):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bk, bn), T.float16)
            c = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c)
            for k in T.Pipelined(K // bk, num_stages=ns, order=[0, 1, 2], stage=list(stage)):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[-1])
def staged_scale_rows(M=512, N=128, bm=32, ns=4):
    """A copy-only pipeline: the load in stage 0, the scaled store in stage 1, four buffers
    deep (num_stages=4 overrides max(stage) + 1 = 2)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128):
            xs = T.alloc_shared((bm, N), T.float32)
            for r in T.Pipelined(T.ceildiv(M, bm), num_stages=ns, stage=[0, 1]):
                T.copy(X[r * bm, 0], xs)
                for i, j in T.Parallel(bm, N):
                    Y[r * bm + i, j] = xs[i, j] * 3.0 + r
    return main


@pytest.mark.parametrize("ns, stage, depth", [(3, (0, 0, 1), 3), (4, (0, 0, 1), 4),
                                              (3, (0, 0, 0), 3), (0, (0, 0, 1), 2),
                                              (2, (0, 0, 2), 2)])
def test_num_stages_is_the_depth_beside_stage(ns, stage, depth):
    """TileLang 0.1.15 on sm_90a: num_stages=S keeps S buffers (S mbarrier pairs) for
    stage=[0, 0, 1] and [0, 0, 0] alike; without num_stages (0: no annotation) the depth is
    max(stage) + 1.  tilecute refused S != max(stage) + 1."""
    kern = staged_gemm(ns=ns, stage=stage)
    src = kern.get_kernel_source()
    assert f"# a: {depth} stages of 2048 float16" in src
    assert f"# b: {depth} stages of 2048 float16" in src
    assert kern.ensure_cubin()


def test_num_stages_depth_on_sm80_cp_async():
    kern = tilecute.compile(staged_gemm.func.get_tir(ns=3, stage=(0, 0, 1)), target="sm_80")
    src = kern.get_kernel_source()
    assert "# a: 3 stages" in src and "wgmma" not in src
    assert kern.ensure_cubin()


def test_num_stages_depth_copy_pipeline():
    kern = staged_scale_rows()
    assert "4 stages" in kern.get_kernel_source()
    assert kern.ensure_cubin()


def test_one_stage_with_late_copies_is_refused_by_name():
    from tilecute.language.parser import FrontendError
    with pytest.raises(FrontendError, match=r"num_stages=1 with order=\(2, 0, 1\): the order "
                                            r"issues copies after the step's other statements"):
        @T.prim_func
        def k(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float16"),
              C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                a_s = T.alloc_shared((64, 64), "float16")
                b_s = T.alloc_shared((64, 64), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                T.clear(acc)
                T.copy(B, b_s)
                for k in T.Pipelined(4, num_stages=1, order=[2, 0, 1], stage=[0, 2, 2]):
                    T.copy(A[k * 64, 0], a_s)
                    T.gemm(a_s, b_s, acc)
                    T.copy(acc, C)


@pytest.mark.gpu
@pytest.mark.parametrize("ns, stage", [(3, (0, 0, 1)), (4, (0, 0, 0)), (1, (0, 0, 1))])
def test_staged_gemm_gpu(ns, stage):
    torch.manual_seed(0)
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 192, device="cuda", dtype=torch.float16)
    c = staged_gemm(ns=ns, stage=stage)(a, b)
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, atol=2e-2, rtol=2e-3)


@pytest.mark.gpu
def test_staged_scale_rows_gpu():
    x = torch.randn(512, 128, device="cuda")
    y = staged_scale_rows()(x)
    r = torch.arange(512, device="cuda").div(32, rounding_mode="floor")[:, None].float()
    torch.testing.assert_close(y, x * 3.0 + r)


# ---- 3. float8_e8m0fnu: MX scale factors, a storage dtype ---------------------------------------
@tilelang.jit(out_idx=[1, 2])
def e8m0_roundtrip(M=64, N=96, bm=32):
    """Each float32 cast to e8m0 in registers, stored through shared memory to global, and
    read back from shared memory as float32."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), S: T.Tensor((M, N), T.float8_e8m0fnu),
             D: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            a_s = T.alloc_shared((bm, N), T.float32)
            s_f = T.alloc_fragment((bm, N), T.float8_e8m0fnu)
            s_s = T.alloc_shared((bm, N), T.float8_e8m0fnu)
            T.copy(A[bx * bm, 0], a_s)
            for i, j in T.Parallel(bm, N):
                s_f[i, j] = T.cast(a_s[i, j], T.float8_e8m0fnu)
            T.copy(s_f, s_s)
            T.copy(s_s, S[bx * bm, 0])
            for i, j in T.Parallel(bm, N):
                D[bx * bm + i, j] = T.cast(s_s[i, j], T.float32)
    return main


@tilelang.jit(out_idx=[-1])
def mx_dequant(M=128, K=256, bm=64, group=32):
    """MX-style dequantization: Y = X * 2^(S - 127), one e8m0 scale for each group of 32
    elements of a row, the scales' tile copied into shared memory."""
    G = K // group

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), S: T.Tensor((M, G), T.float8_e8m0fnu),
             Y: T.Tensor((M, K), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            s_s = T.alloc_shared((bm, G), T.float8_e8m0fnu)
            x_f = T.alloc_fragment((bm, K), T.float16)
            T.copy(S[bx * bm, 0], s_s)
            T.copy(X[bx * bm, 0], x_f)
            for i, k in T.Parallel(bm, K):
                Y[bx * bm + i, k] = T.cast(x_f[i, k], T.float32) * T.cast(s_s[i, k // group], T.float32)
    return main


@tilelang.jit(out_idx=[-1])
def mx_scales_of(M=64, K=128, group=32):
    """The e8m0 scale of each 32-element group of a row: its largest magnitude rounded up
    to a power of two (a float64 and an int32 cast beside it: 2^j for column j)."""
    G = K // group

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float32), S: T.Tensor((M, G + 2), T.float8_e8m0fnu)):
        with T.Kernel(1, threads=128):
            x_f = T.alloc_fragment((M, G, group), T.float32)
            amax = T.alloc_fragment((M, G), T.float32)
            for i, g, e in T.Parallel(M, G, group):
                x_f[i, g, e] = T.abs(X[i, g * group + e])
            T.reduce_max(x_f, amax, dim=2)
            for i, g in T.Parallel(M, G):
                S[i, g] = T.cast(amax[i, g], T.float8_e8m0fnu)
            for i in T.Parallel(M):
                S[i, G] = T.cast(T.cast(i, T.float64) * 0.5, T.float8_e8m0fnu)
                S[i, G + 1] = T.cast(i, T.float8_e8m0fnu)
    return main


def test_e8m0_roundtrip_builds_and_casts_in_software():
    kern = e8m0_roundtrip()
    src = kern.get_kernel_source()
    assert "tce8m0.encode(" in src and "tce8m0.decode(" in src
    assert "Float8E8M0" not in src  # (its bytes: no CuTe fp8 conversion)
    assert kern.ensure_cubin()
    k80 = tilecute.compile(e8m0_roundtrip.func.get_tir(), target="sm_80")
    assert k80.ensure_cubin()


@pytest.mark.parametrize("M", [128, 100])
def test_e8m0_dequant_builds_sm90_and_sm80(M):
    """(M=100: the tail's scale loads are bounds-checked, their fallback a Uint8 code as the
    load is: an e8m0 element is read as its Uint8, as an unsigned one is)"""
    kern = mx_dequant(M=M)
    src = kern.get_kernel_source()
    assert "tce8m0.decode(" in src
    assert kern.ensure_cubin()
    assert tilecute.compile(mx_dequant.func.get_tir(M=M), target="sm_80").ensure_cubin()


def test_e8m0_scales_from_float64_and_int_round_from_float64():
    kern = mx_scales_of()
    src = kern.get_kernel_source()
    assert "tce8m0.encode(cutlass.Float64(" in src  # (the int32 through Float64: exact)
    assert kern.ensure_cubin()


def test_e8m0_code_matches_cuda_rounding():
    from tilecute.runtime.dtypes import e8m0_code, e8m0_value
    assert [e8m0_code(x) for x in (1.0, 1.5, 2.0, 0.75, -3.0, 0.0, 2.0 ** -127, 1e-40)] == \
        [127, 128, 128, 127, 129, 0, 0, 0]
    assert e8m0_code(2.0 ** -127 * 1.5) == 1 and e8m0_code(float("inf")) == 254
    assert e8m0_code(float("nan")) == 255 and e8m0_code(2.0 ** 128) == 254
    assert e8m0_value(127) == 1.0 and e8m0_value(0) == 2.0 ** -127
    assert e8m0_value(255) != e8m0_value(255)


@pytest.mark.parametrize("body, what", [
    ("S[1] = S[0] + S[1]", "add of float8_e8m0fnu values: float8_e8m0fnu values are loaded, stored, selected and cast"),
    ("T.reduce_max(s_f, r, dim=0)", "T.reduce: cast float8_e8m0fnu values to float32, then reduce"),
    ("S[1] = T.max(S[0], S[1])", "max of float8_e8m0fnu values"),
])
def test_e8m0_arithmetic_is_refused_by_name(body, what):
    src = f'''
@T.prim_func
def k(S: T.Tensor((64,), T.float8_e8m0fnu)):
    with T.Kernel(1, threads=64):
        s_f = T.alloc_fragment((64,), T.float8_e8m0fnu)
        r = T.alloc_fragment((1,), T.float8_e8m0fnu)
        T.copy(S, s_f)
        {body}
'''
    import re
    with pytest.raises(Exception, match=re.escape(what)):
        tilecute.compile(T.from_script(src)).get_kernel_source()


def test_e8m0_times_a_python_float_computes_in_float32():
    """TVM types a Python float float32: ``S[0] * 2.0`` of an e8m0 ``S`` is a float32
    product (TileLang's CUDA: ``(float)S[0] * 2.0f``, then the e8m0 constructor)."""
    func = T.from_script('''
@T.prim_func
def k(S: T.Tensor((64,), T.float8_e8m0fnu)):
    with T.Kernel(1, threads=32):
        S[0] = S[0] * 2.0
''')
    assert 'T.Cast("float8_e8m0fnu", T.Cast("float32", S[0]) * T.float32(2.0))' in func.script()
    kern = tilecute.compile(func)
    assert "tce8m0.encode(tce8m0.decode(cutlass.Uint8(S[" in kern.get_kernel_source()
    assert kern.ensure_cubin()


def _e8m0_torch(x):
    """Reference of CUDA's __nv_fp8_e8m0(float): the codes as uint8."""
    from tilecute.runtime.dtypes import e8m0_code
    return torch.tensor([e8m0_code(v) for v in x.flatten().tolist()],
                        dtype=torch.uint8).reshape(x.shape)


def _e8m0_decode(codes):
    c = codes.to(torch.int32).double()
    v = torch.pow(2.0, c - 127)
    return torch.where(codes == 255, torch.full_like(v, float("nan")), v)


@pytest.mark.gpu
def test_e8m0_roundtrip_gpu():
    torch.manual_seed(0)
    a = torch.randn(64, 96) * torch.pow(2.0, torch.randint(-20, 20, (64, 96)).float())
    special = torch.tensor([0.0, -0.0, 1.0, 1.5, 2.0, -4.0, 0.75, float("inf"), float("-inf"),
                            float("nan"), 2.0 ** -127, 3e-39, 1e-40, 2.0 ** 127, 3e38, 1e-45])
    a.view(-1)[:special.numel()] = special
    s, d = e8m0_roundtrip()(a.cuda())
    s2, _ = e8m0_roundtrip(M=50)(a[:50].cuda())  # (a tail block)
    assert torch.equal(s2.view(torch.uint8).cpu(), _e8m0_torch(a[:50]))
    codes = s.view(torch.uint8).cpu()
    assert torch.equal(codes, _e8m0_torch(a))
    torch.testing.assert_close(d.cpu().double(), _e8m0_decode(codes), equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("M", [128, 100])
def test_mx_dequant_gpu(M):
    torch.manual_seed(1)
    x = torch.randn(M, 256, dtype=torch.float16)
    codes = torch.randint(100, 150, (M, 8), dtype=torch.uint8)
    codes[0, 0], codes[1, 1] = 255, 0
    y = mx_dequant(M=M)(x.cuda(), codes.view(torch.float8_e8m0fnu).cuda()).cpu()
    ref = x.double() * _e8m0_decode(codes).repeat_interleave(32, dim=1)
    # (code 0 scales into float32 subnormals: rounded there, or flushed to zero under ftz)
    torch.testing.assert_close(y.double(), ref, equal_nan=True, rtol=1e-6, atol=1e-37)


@pytest.mark.gpu
def test_mx_scales_of_gpu():
    torch.manual_seed(2)
    x = torch.randn(64, 128) * 37.0
    s = mx_scales_of()(x.cuda()).view(torch.uint8).cpu()
    amax = x.abs().reshape(64, 4, 32).amax(dim=2)
    assert torch.equal(s[:, :4], _e8m0_torch(amax))
    i = torch.arange(64).double()
    assert torch.equal(s[:, 4], _e8m0_torch(i * 0.5)) and torch.equal(s[:, 5], _e8m0_torch(i))


# ---- 4. mbarrier phase waits on sm_80 ---------------------------------------------------------
def ring_scale(rows=256, D=64, R=32):
    """Threads 64..127 load R-row tiles of X with cp.async (8 halves a thread a copy) and
    signal `ready` through cp.async.mbarrier.arrive.noinc; threads 0..63 wait on `ready`'s
    phase, write 2 * tile + step to Y and release the tile on `free`: TileLang's explicit
    producer / consumer pipeline over one shared tile."""
    steps = rows // R
    per_round = 64 * 8 // D  # rows the 64 producer threads cover a round

    @T.prim_func
    def main(X: T.Tensor((rows, D), "float16"), Y: T.Tensor((rows, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_shared((R, D), "float16")
            ready = T.alloc_barrier(arrive_count=64)
            free = T.alloc_barrier(arrive_count=64)
            tx = T.get_thread_binding()
            if tx < 64:
                for s in T.serial(steps):
                    T.barrier_wait(ready, s % 2)
                    for r in T.serial(R):
                        Y[s * R + r, tx] = T.cast(tile[r, tx], "float32") * 2.0 + s
                    T.barrier_arrive(free)
            else:
                p = tx - 64
                for s in T.serial(steps):
                    T.barrier_wait(free, (s + 1) % 2)
                    for r in T.serial(R // per_round):
                        row = r * per_round + p // (D // 8)
                        col = p % (D // 8) * 8
                        T.ptx_cp_async(T.access_ptr(tile[row, col], "w", 8),
                                       T.access_ptr(X[s * R + row, col], "r", 8), 8)
                    T.cp_async_barrier_noinc(ready)

    return main


def test_mbarrier_waits_on_sm80_spin_on_test_wait(tmp_path):
    """sm_80 has no mbarrier.try_wait (sm_90+, what CuTe DSL's wait emits): the wait spins
    on mbarrier.test_wait.parity (sm_80+, TileLang's mbarrier_test_wait form), and
    cp.async.mbarrier.arrive.noinc (sm_80+; CuTe DSL checks it for sm_90) is inline PTX;
    the barriers' init has no fence.mbarrier_init (sm_90+).  Both were refused on sm_80."""
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower
    src = emit_cute(lower(ring_scale(), "sm_80"))
    assert src.count("tct.wait_test(") == 2 and "tct.wait(" not in src
    assert "tct.cp_async_arrive_noinc(ready)" in src
    assert "fence=False" in src
    kern = tilecute.compile(ring_scale(), target="sm_80")
    assert kern.ensure_cubin()
    ptx = _ptx_of(ring_scale(), "sm_80", tmp_path)
    assert ptx is not None and ".target sm_80" in ptx
    assert "mbarrier.test_wait.parity.shared::cta.b64" in ptx and "nanosleep" in ptx
    assert "mbarrier.try_wait" not in ptx and "fence.mbarrier_init" not in ptx
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in ptx
    assert "mbarrier.arrive.shared::cta.b64" in ptx and "mbarrier.arrive.release" not in ptx


def test_mbarrier_waits_on_sm90_unchanged():
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower
    src = emit_cute(lower(ring_scale(), "sm_90a"))
    assert src.count("tct.wait(") == 2 and "wait_test" not in src
    assert "cute.arch.cp_async_mbarrier_arrive_noinc(ready)" in src and "fence=False" not in src
    assert tilecute.compile(ring_scale()).ensure_cubin()


def _ptx_of(func, arch, tmp_path):
    """The PTX CuTe DSL compiles ``func``'s kernel to for ``arch`` (cute.compile's
    --keep-ptx, in a child process: CUTE_DSL_ARCH is read at CUTLASS's first import), or
    None where this CuTe DSL leaves none."""
    import glob
    import os
    import subprocess
    import sys
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower
    source = tmp_path / "kernel_cute.py"
    source.write_text(emit_cute(lower(func, arch)))
    dump = tmp_path / "dump"
    dump.mkdir()
    code = ("import cutlass.cute as cute\n"
            "from tilecute.runtime.cubingen import import_source\n"
            f"m = import_source({str(source)!r}, 'leftover_ptx')\n"
            f"cute.compile(m.main, *m.placeholder_args(), options='--keep-ptx --gpu-arch {arch} "
            f"--dump-dir {dump}')\n")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, CUTE_DSL_ARCH=arch),
                   check=True, cwd=str(tmp_path))
    found = glob.glob(str(dump / "*.ptx"))
    return open(found[0]).read() if found else None


@pytest.mark.gpu
def test_ring_scale_gpu():
    x = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    y = torch.empty(256, 64, device="cuda", dtype=torch.float32)
    tilecute.compile(ring_scale())(x, y)
    steps = torch.arange(256, device="cuda").div(32, rounding_mode="floor")[:, None].float()
    torch.testing.assert_close(y, x.float() * 2.0 + steps)


# ---- 2. atomics with a result in a nest over an MMA row / column fragment ------------------------
@tilelang.jit(out_idx=[-1])
def row_ticket(M=128, N=192, K=64, bm=64, bn=64, bk=32, threads=128,
               policy=T.GemmWarpPolicy.Square):
    """Each column block of a row block takes a ticket per row (``old[i] = T.atomic_add(
    Cnt[row], 1, return_prev=True)`` over the rows of the accumulator's row fragment) and
    adds it to the row's centred scores."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Cnt: T.Tensor((M,), T.int32), Out: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bk, bn), T.float16)
            c = T.alloc_fragment((bm, bn), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            old = T.alloc_fragment((bm,), T.int32)
            T.clear(c)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[k * bk, bx * bn], b)
                T.gemm(a, b, c, policy=policy)
            T.reduce_max(c, mx, dim=1)
            for i in T.Parallel(bm):
                old[i] = T.atomic_add(Cnt[by * bm + i], 1, return_prev=True)
            for i, j in T.Parallel(bm, bn):
                Out[by * bm + i, bx * bn + j] = c[i, j] - mx[i] + old[i]
    return main


def test_row_ticket_runs_once_per_row_and_shuffles_the_old_value():
    """TileLang 0.1.15 runs the AtomicAddRet in each of the quad's 4 threads (4 tickets a
    row); tilecute runs it in the row's owner and shuffles the value to the quad."""
    kern = row_ticket()
    src = kern.get_kernel_source()
    line = [ln for ln in src.splitlines() if "atomic_fetch" in ln][0]
    assert "tca.atomic_fetch_once(Cnt, (by * 64 + i,), 1, \"add\", tcrow.row_owner(" in line
    assert "(cute.arch.lane_idx() & 28), cutlass.Uint32(15) << (cute.arch.lane_idx() & 28)" in line
    assert kern.ensure_cubin()
    big = row_ticket(bm=128, threads=256)  # (two warpgroups along M)
    assert "tca.atomic_fetch_once(" in big.get_kernel_source() and big.ensure_cubin()
    k80 = tilecute.compile(row_ticket.func.get_tir(policy=T.GemmWarpPolicy.FullRow), target="sm_80")
    assert "tca.atomic_fetch_once(" in k80.get_kernel_source()
    assert k80.ensure_cubin()


def test_row_ticket_with_warps_along_n_is_refused_by_name():
    from tilecute.language.parser import FrontendError  # noqa: F401
    with pytest.raises(Exception, match=r"in a nest over the MMA fragment 'old': its rows are "
                                        r"held by lanes of several warps"):
        tilecute.compile(row_ticket.func.get_tir(), target="sm_80").get_kernel_source()


@pytest.mark.gpu
@pytest.mark.parametrize("M", [128, 100])
def test_row_ticket_gpu(M):
    torch.manual_seed(3)
    a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 192, device="cuda", dtype=torch.float16)
    cnt = torch.zeros(M, device="cuda", dtype=torch.int32)
    out = row_ticket(M=M)(a, b, cnt)
    assert torch.equal(cnt.cpu(), torch.full((M,), 3, dtype=torch.int32))  # one ticket a block
    c = (a.float() @ b.float()).reshape(M, 3, 64)
    got = (out.reshape(M, 3, 64) - (c - c.amax(dim=2, keepdim=True))).round()
    assert torch.equal(got, got[:, :, :1].expand_as(got))  # every holder of a row saw one value
    assert torch.equal(got[:, :, 0].sort(dim=1).values.cpu(),
                       torch.arange(3.0).expand(M, 3))  # tickets 0, 1, 2 per row


@pytest.mark.gpu
def test_row_ticket_two_warpgroups_gpu():
    """Two warpgroups along M (bm=128, 256 threads): still one ticket a row a block."""
    torch.manual_seed(4)
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 192, device="cuda", dtype=torch.float16)
    cnt = torch.full((128,), 5, device="cuda", dtype=torch.int32)
    row_ticket(bm=128, threads=256)(a, b, cnt)
    assert torch.equal(cnt.cpu(), torch.full((128,), 8, dtype=torch.int32))
