"""TileLang programs of the kind TileLang's own issue tests guard, each written here in
TileLang's idioms: forms and Python idioms tilecute once refused although TileLang takes
them, and behaviours those issues are about.  CPU: the frontend and an sm_90a cubin; GPU
(``-m gpu``): results against torch."""

import pytest
import torch

import tilecute
import tilecute.language as T


def _cubin(func, tmp_path):
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert info.kernels
    return info


# ---- a helper's list of expressions bound to a name ---------------------------------------
def _round_to_bf16_bits(x):
    """The bfloat16 bits (low 16 of a uint32) of float32 ``x``, rounded to nearest even;
    an inf or NaN keeps its bits (a rounding bias would carry a NaN into inf)."""
    bits = T.reinterpret(x, T.uint32)
    biased = bits + (((bits >> T.uint32(16)) & T.uint32(1)) + T.uint32(0x7FFF))
    is_special = ((bits >> T.uint32(23)) & T.uint32(0xFF)) == T.uint32(0xFF)
    return T.if_then_else(is_special, bits, biased) >> T.uint32(16)


def _bf16_pair(word):
    """The two bfloat16 halves of ``word`` as float32 values: a generator, which a kernel
    turns into a list with ``list(...)`` (TileLang's dequantize helpers return them so)."""
    return (T.reinterpret(h << T.uint32(16), T.float32)
            for h in (word & T.uint32(0xFFFF), word >> T.uint32(16)))


def bf16_round_trip(n=8):
    """y = float32(bfloat16(x)) two values a thread, through one packed uint32."""

    @T.prim_func
    def main(x: T.Tensor((n,), T.float32), y: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 2, threads=1) as bx:
            word = _round_to_bf16_bits(x[bx * 2]) | (_round_to_bf16_bits(x[bx * 2 + 1]) << T.uint32(16))
            halves = list(_bf16_pair(word))
            y[bx * 2] = halves[0]
            y[bx * 2 + 1] = halves[1]

    return main


def test_list_of_expressions_binds_a_name(tmp_path):
    text = bf16_round_trip().script()
    # the list's elements are read where they are indexed
    assert "halves" not in text and text.count("T.reinterpret(") >= 4
    _cubin(bf16_round_trip(), tmp_path)


@pytest.mark.gpu
def test_gpu_bf16_round_trip_keeps_nan_and_inf():
    kernel = tilecute.compile(bf16_round_trip())
    bits = torch.tensor([0x7FFF8C22, 0x7FFFFFFF, 0x7F800000, 0xFF800000,
                         0x3F800000, 0x3F808000, 0x3F818000, 0xC0490FDB], dtype=torch.int64)
    x = bits.to(torch.int32).view(torch.float32).cuda()
    y = torch.empty_like(x)
    kernel(x, y)
    got = y.cpu()
    assert torch.isnan(got[:2]).all()
    assert torch.isinf(got[2:4]).all() and got[2] > 0 and got[3] < 0
    want = x.cpu()[4:].to(torch.bfloat16).float()  # torch rounds to nearest even too
    assert torch.equal(got[4:], want)


# ---- float8 values in arithmetic and math -------------------------------------------------
def fp8_elementwise(dt, n=256):
    """C = round_away(A) * B - |A| and M = A > B on float8 values: each operation's value
    is a float8, computed in float32 and rounded back (CUTLASS's fp8 operators)."""

    @T.prim_func
    def main(A: T.Tensor((n,), dt), B: T.Tensor((n,), dt), C: T.Tensor((n,), dt),
             M: T.Tensor((n,), T.bool)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                a = A[bx * 128 + i]
                b = B[bx * 128 + i]
                C[bx * 128 + i] = T.round(a, "ties-away-from-zero") * b - T.abs(a)
                M[bx * 128 + i] = a > b

    return main


@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
def test_fp8_arithmetic_builds(dt, tmp_path):
    _cubin(fp8_elementwise(dt), tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["float8_e4m3", "float8_e5m2"])
def test_gpu_fp8_arithmetic(dt):
    tdt = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[dt]
    kernel = tilecute.compile(fp8_elementwise(dt))
    g = torch.Generator().manual_seed(0)
    a = (torch.randint(-12, 13, (256,), generator=g) * 0.5).to(tdt)  # halves: ties
    b = (torch.randint(-8, 9, (256,), generator=g) * 0.25).to(tdt)
    c = torch.empty(256, dtype=tdt)
    m = torch.empty(256, dtype=torch.bool)
    a_d, b_d, c_d, m_d = (t.cuda() for t in (a, b, c, m))
    kernel(a_d, b_d, c_d, m_d)
    af, bf = a.float(), b.float()
    r = (torch.sign(af) * torch.floor(af.abs() + 0.5)).to(tdt).float()
    prod = (r * bf).to(tdt).float()
    want = (prod - af.abs().to(tdt).float()).to(tdt)
    assert torch.equal(c_d.cpu().float(), want.float())
    assert torch.equal(m_d.cpu(), af > bf)


# ---- T.assume before the kernel -----------------------------------------------------------
def gather_rows_assumed():
    """out[r, :] = x[r, :] for rows of a strided matrix whose row stride the program
    promises even, with T.assume at the top of the body, before the kernel."""
    rows, cols, ld = T.dynamic("rows"), 256, T.dynamic("ld")

    @T.prim_func
    def main(x: T.StridedTensor((rows, cols), (ld, 1), T.float16),
             out: T.Tensor((rows, cols), T.float16)):
        T.assume(ld % 8 == 0)
        with T.Kernel(rows, threads=64) as r:
            for j in T.Parallel(cols):
                out[r, j] = x[r, j] * T.float16(2)

    return main


def test_top_level_assume_promises_a_divisor(tmp_path):
    text = gather_rows_assumed().script()
    assert 'T.symbolic("ld", multiple_of=8)' in text
    _cubin(gather_rows_assumed(), tmp_path)


def test_top_level_assume_broken_at_a_call_raises_tilelangs_error(cache_dir):
    """Broken at a call, the stride's divisor assume raises TileLang's RuntimeError before
    anything reads the tensor (a memory-less tensor on the CPU)."""
    from fake_cuda import FakeTensor, raises

    raises(RuntimeError, ["main: Assume: ld % 8 == 0"], tilecute.compile(gather_rows_assumed()),
           FakeTensor((10, 256), "float16", strides=(260, 1)), FakeTensor((10, 256), "float16"))


def test_top_level_assume_false_at_parse_time_is_refused():
    src = '''
import tilecute.language as T

@T.prim_func
def main(x: T.Tensor((64,), T.float32)):
    T.assume(64 % 3 == 0)
    with T.Kernel(1, threads=64) as bx:
        x[0] = 1.0
'''
    with pytest.raises(tilecute.language.FrontendError, match=r"<script>:6.*is false at compile time"):
        T.from_script(src)


@pytest.mark.gpu
def test_gpu_top_level_assume():
    kernel = tilecute.compile(gather_rows_assumed())
    base = torch.randn(10, 264, device="cuda").half()
    x = base[:, :256]  # a row stride of 264, a multiple of 8
    out = torch.empty(10, 256, device="cuda", dtype=torch.float16)
    kernel(x, out)
    assert torch.equal(out, x * 2)
    odd = torch.randn(10, 260, device="cuda").half()[:, :256]  # stride 260: breaks the promise
    with pytest.raises(RuntimeError, match="Assume: ld % 8 == 0"):  # TileLang's error
        kernel(odd, out)


# ---- T.named_barrier_arrive ---------------------------------------------------------------
ROUNDS = 4


def slot_handoff():
    """Warp 0 produces a 32-value slot per round, warp 1 consumes it rotated by one lane:
    the producer arrives on `full` (bar.arrive) and, from the second round, waits on
    `empty`; the consumer waits on `full` and arrives on `empty`."""

    @T.prim_func
    def main(inp: T.Tensor((ROUNDS, 32), T.float32), out: T.Tensor((ROUNDS, 32), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            slot = T.alloc_shared((32,), T.float32)
            full = 3
            empty = 4
            both_warps = 64  # (names bound in the kernel: Lets of constants)
            if tx < 32:
                for r in T.serial(ROUNDS):
                    if r > 0:
                        T.sync_threads(empty, both_warps)
                    slot[tx] = inp[r, tx] * 2.0
                    T.named_barrier_arrive(full, both_warps)
            else:
                for r in T.serial(ROUNDS):
                    T.sync_threads(full, 64)
                    out[r, tx - 32] = slot[(tx - 31) % 32]
                    if r < ROUNDS - 1:
                        T.named_barrier_arrive(empty, 64)

    return main


def test_named_barrier_arrive_ir_and_round_trip(tmp_path):
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts

    f = slot_handoff()
    arrives = [s for k in f.kernels for s in walk_stmts(k.body)
               if isinstance(s, N.NamedBarrier) and s.arrive]
    assert len(arrives) == 2 and all(s.program and s.threads == 64 for s in arrives)
    assert {int(s.barrier_id.value) for s in arrives} == {3, 4}  # the names' constants
    text = f.script()
    assert text.count("T.named_barrier_arrive(") == 2
    assert T.from_script(text).script() == text
    from tilecute.codegen.cute import emit_cute
    from tilecute.transform.pipeline import lower

    src = emit_cute(lower(f, "sm_90a"))
    assert src.count("cute.arch.barrier_arrive(barrier_id=") == 2
    _cubin(f, tmp_path)


@pytest.mark.parametrize("call,msg", [
    ("T.named_barrier_arrive(3, 48)", "thread_count=48: 48 threads: a named barrier counts whole warps"),
    ("T.named_barrier_arrive(16, 64)", "barrier_id=16"),
    ("T.named_barrier_arrive(3, n)", "thread_count must be an int"),
])
def test_named_barrier_arrive_refusals(call, msg):
    src = f'''
import tilecute.language as T

@T.prim_func
def main(x: T.Tensor((64,), T.float32), n: T.int32):
    with T.Kernel(1, threads=64) as bx:
        {call}
'''
    with pytest.raises(tilecute.language.FrontendError, match=msg) as e:
        T.from_script(src)
    assert "<script>:7" in str(e.value)


@pytest.mark.gpu
def test_gpu_named_barrier_arrive_handoff():
    kernel = tilecute.compile(slot_handoff())
    inp = torch.randn(ROUNDS, 32, device="cuda")
    out = torch.empty_like(inp)
    kernel(inp, out)
    assert torch.equal(out, torch.roll(inp, -1, dims=1) * 2)


# ---- Python's print while the kernel is built ---------------------------------------------
def print_while_building():
    @T.prim_func
    def main(x: T.Tensor((128,), T.float32)):
        print("building", x)
        with T.Kernel(4, threads=32) as (pid,):
            print(pid, pid * 32 + 1, sep=", ")
            for i in T.Parallel(32):
                x[pid * 32 + i] = T.Cast(T.float32, pid)

    return main


def test_print_runs_once_while_parsing_and_makes_no_statement(capsys, tmp_path):
    f = print_while_building()
    assert capsys.readouterr().out == "building x\npid, pid * 32 + 1\n"
    assert "print" not in f.script()
    _cubin(f, tmp_path)


@pytest.mark.gpu
def test_gpu_print_while_building():
    kernel = tilecute.compile(print_while_building())
    x = torch.empty(128, device="cuda")
    kernel(x)
    assert torch.equal(x.cpu(), torch.arange(4).repeat_interleave(32).float())


# ---- behaviours TileLang's issue tests guard ------------------------------------------------
def signed_subword_decode(nbit, count):
    """out[i] = the signed nbit-bit value i of uint32 words (lane 0 in the low bits),
    sign-extended by a left shift to the top of an int32 and an arithmetic right shift."""
    per_word = 32 // nbit
    words = (count + per_word - 1) // per_word

    @T.prim_func
    def main(w: T.Tensor((words,), T.uint32), out: T.Tensor((count,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(count):
                field = (w[i // per_word] >> T.Cast(T.uint32, (i % per_word) * nbit)) & \
                    T.uint32((1 << nbit) - 1)
                out[i] = T.Cast(T.float32, (T.Cast(T.int32, field) << (32 - nbit)) >> (32 - nbit))

    return main


def _pack_signed(values, nbit):
    per_word, mask = 32 // nbit, (1 << nbit) - 1
    words = []
    for s in range(0, len(values), per_word):
        word = 0
        for lane, v in enumerate(values[s:s + per_word]):
            word |= (v & mask) << (lane * nbit)
        words.append(word - (1 << 32) if word >= 1 << 31 else word)
    return torch.tensor(words, dtype=torch.int32)


@pytest.mark.parametrize("nbit", [2, 4, 8])
def test_signed_subword_decode_builds(nbit, tmp_path):
    _cubin(signed_subword_decode(nbit, 32), tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("nbit", [2, 4, 8])
def test_gpu_signed_subword_decode(nbit):
    lo, hi = -(1 << (nbit - 1)), (1 << (nbit - 1))
    values = [lo + (7 * i) % (hi - lo) for i in range(32)]
    kernel = tilecute.compile(signed_subword_decode(nbit, 32))
    w = _pack_signed(values, nbit).view(torch.uint32).cuda()
    out = torch.empty(32, device="cuda")
    kernel(w, out)
    assert out.cpu().tolist() == [float(v) for v in values]


def gemm_b_tile_by_threads(M=256, N=256, K=256, bm=128, bn=128, bk=32):
    """C = A @ B.T with a one-stage pipeline whose B tile the threads fill element by
    element (T.Parallel) while A's tile is a T.copy: the gemm of a step must see that
    step's B tile, and the next step's fill must wait for the gemm."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=1):
                T.copy(A[by * bm, ko * bk], A_s)
                for j, k in T.Parallel(bn, bk):
                    B_s[j, k] = B[bx * bn + j, ko * bk + k]
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def test_gemm_b_tile_by_threads_builds(tmp_path):
    _cubin(gemm_b_tile_by_threads(), tmp_path)


@pytest.mark.gpu
def test_gpu_gemm_b_tile_by_threads():
    kernel = tilecute.compile(gemm_b_tile_by_threads())
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, rtol=1e-2, atol=0.2)


# ---- a T.gemm no warp arrangement tiles: TileLang's words --------------------------------
def test_gemm_without_warp_partition_says_so_for_both_mma_families():
    from tilecute.transform.pipeline import lower
    from tilecute.transform.select_mma import GemmError

    def program(threads):
        @T.prim_func
        def main(A: T.Tensor((32, 64), T.float16), B: T.Tensor((64, 80), T.float16),
                 C: T.Tensor((32, 80), T.float32)):
            with T.Kernel(1, threads=threads):
                A_s = T.alloc_shared((32, 64), T.float16)
                B_s = T.alloc_shared((64, 80), T.float16)
                acc = T.alloc_fragment((32, 80), T.float32)
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, acc, clear_accum=True)
                T.copy(acc, C)
        return main

    # 5 warps: no warpgroup, but 1 x 5 warps of 32 x 16 cover the tile (TileLang's rule,
    # issue 2537: every warp used, warp tiles of 16 x 8 steps) -- mma.sync takes it
    lower(program(160), "sm_90a")
    # 7 warps: no arrangement covers 32 x 80
    with pytest.raises(GemmError, match=r"No valid warp partition.*wgmma runs on warpgroups of "
                                        r"128 threads; the block has 224; and on mma.sync no "
                                        r"arrangement of 7 warps tiles 32 x 80"):
        lower(program(224), "sm_90a")


def test_serial_walk_of_a_gemm_accumulator_points_to_reduce_sum():
    """A T.serial loop over the columns of a T.gemm accumulator (each thread holds only the
    MMA's part of it) is refused, naming the fragment and the reduction to use."""
    from tilecute.transform.pipeline import lower

    @T.prim_func
    def main(Q: T.Tensor((64, 64), T.float16), K: T.Tensor((64, 64), T.float16),
             rowsum: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((64, 64), T.float16)
            K_s = T.alloc_shared((64, 64), T.float16)
            S = T.alloc_fragment((64, 64), T.float32)
            total = T.alloc_fragment((64,), T.float32)
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            T.clear(total)
            for i in T.Parallel(64):
                for j in T.serial(64):
                    total[i] += S[i, j]
            T.copy(total, rowsum)

    with pytest.raises(Exception, match=r"fragment 'S' has a T.gemm register layout.*T.reduce_sum"):
        lower(main, "sm_90a")
