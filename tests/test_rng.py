"""TileLang's T.rng_init / T.rng_rand / T.rng_rand_float: a per-thread Philox4x32-10
generator with cuRAND's seeding (runtime/cute/rng.py).  The GPU tests compare the
kernel's draws with the pure-Python Philox4x32-10 below, for the same seed,
subsequence and offset."""

import math
import struct

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.source import CodegenError
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError

# ---- a reference Philox4x32-10 with cuRAND's curand_init/curand semantics ---------------
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF


def philox(counter, key):
    c, (k0, k1) = list(counter), key
    for _ in range(10):
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & _MASK, (p0 >> 32) ^ c[3] ^ k1, p0 & _MASK]
        k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return c


def draws(seed, subsequence, offset, n):
    """The first ``n`` 32-bit draws of ``curand_init(seed, subsequence, offset)``."""
    key = (seed & _MASK, (seed >> 32) & _MASK)
    ctr = (subsequence << 64) + (offset // 4)  # the 128-bit counter, word 0 lowest
    skip = offset % 4
    out = []
    while len(out) < n + skip:
        out += philox([(ctr >> (32 * i)) & _MASK for i in range(4)], key)
        ctr = (ctr + 1) % (1 << 128)
    return out[skip:skip + n]


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def uniform(x):
    """cuRAND's float of one draw: x * 2^-32 + 2^-33, rounded to float32."""
    return _f32(_f32(float(x)) * 2.0 ** -32 + 2.0 ** -33)


def uniform_double(x, y):
    z = x ^ ((y << 21) & ((1 << 64) - 1))
    return z * 2.0 ** -53 + 2.0 ** -54


def test_reference_matches_the_random123_answers():
    # Random123's known-answer vectors for philox4x32_10
    assert philox([0] * 4, (0, 0)) == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    assert philox([_MASK] * 4, (_MASK, _MASK)) == [0x408f276d, 0x41c83b0e, 0xa20bc7c6,
                                                    0x6d5451fd]
    assert philox([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                  (0xa4093822, 0x299f31d0)) == [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    # an offset skips draws of the same stream
    assert draws(7, 3, 6, 5) == draws(7, 3, 0, 11)[6:]


# ---- kernels ------------------------------------------------------------------------------
N_THREADS, PER_THREAD = 64, 8


def draw_kernel(seed=1234, offset=5):
    """Each thread draws PER_THREAD uint32s, float32s, float64s, float32 and float64
    normals from its own generator at subsequence ``tx + bx * 64`` (rng_init's default)."""
    n = 2 * N_THREADS * PER_THREAD

    @T.prim_func
    def draw(A: T.Tensor((n,), "uint32"), B: T.Tensor((n,), "float32"),
             C: T.Tensor((n,), "float64"), D: T.Tensor((n,), "float32"),
             E: T.Tensor((n,), "float64")):
        with T.Kernel(2, threads=N_THREADS) as bx:
            tx = T.get_thread_binding()
            base = (bx * N_THREADS + tx) * PER_THREAD
            T.rng_init(seed, off=offset)
            for j in T.serial(PER_THREAD):
                A[base + j] = T.rng_rand()
            for j in T.serial(PER_THREAD):
                B[base + j] = T.rng_rand_float()
            for j in T.serial(PER_THREAD):
                C[base + j] = T.rng_rand_float(bit=64)
            for j in T.serial(PER_THREAD):
                D[base + j] = T.rng_rand_float(dist="normal")
            for j in T.serial(PER_THREAD):
                E[base + j] = T.rng_rand_float(64, "normal")
    return draw


def parallel_kernel(M=1024, seed=9):
    """TileLang's idiom: one thread, a T.Parallel loop of draws guarded by the size."""
    @T.prim_func
    def fill(A: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 128), threads=1) as bx:
            T.rng_init(seed, 0, bx * 128)
            for i, j in T.Parallel(1, 128):
                if bx * 128 + j < M:
                    A[bx * 128 + j] = T.rng_rand_float()
    return fill


def test_forms_in_the_ir_and_the_printer():
    f = draw_kernel()
    init = next(s for s in walk_stmts(f.kernels) if isinstance(s, N.Evaluate))
    assert init.value.name == "rng_init" and [a.dtype for a in init.value.args] == ["int64"] * 3
    text = f.script()
    for form in ("T.rng_init(T.int64(1234), ", "T.rng_rand()", "T.rng_rand_float()",
                 "T.rng_rand_float(bit=64)", 'T.rng_rand_float(dist="normal")',
                 'T.rng_rand_float(bit=64, dist="normal")'):
        assert form in text, (form, text)
    assert T.from_script(text).script() == text  # the printed forms parse back


def test_source_and_cubin(tmp_path):
    info = tilecute.build_cubin(draw_kernel(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "from tilecute.runtime.cute import rng as tcrng" in src
    assert src.count("tc_rng = cute.make_rmem_tensor((tcrng.WORDS,), cutlass.Uint32)") == 1
    for call in ("tcrng.init(tc_rng, ", "tcrng.rand(tc_rng)", "tcrng.uniform(tc_rng)",
                 "tcrng.uniform_double(tc_rng)", "tcrng.normal(tc_rng)",
                 "tcrng.normal_double(tc_rng)"):
        assert call in src, call
    assert info.kernels
    tilecute.build_cubin(parallel_kernel(), "sm_90a", out_dir=str(tmp_path / "parallel"))


@pytest.mark.parametrize("generator", ["curandStateMRG32k3a_t", "curandStateXORWOW_t"])
def test_other_generators_are_refused_by_name(generator):
    src = f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    with T.Kernel(1, threads=32):
        T.rng_init(1, generator="{generator}")
        A[T.get_thread_binding()] = T.rng_rand()
'''
    with pytest.raises(FrontendError, match=rf":7: .*T.rng_init: generator='{generator}' "
                                            "is not supported"):
        T.from_script(src)


@pytest.mark.parametrize("call, message", [
    ("T.rng_rand_float(bit=16)", "bit must be 32 or 64"),
    ('T.rng_rand_float(dist="poisson")', "dist must be"),
])
def test_bad_float_arguments(call, message):
    src = f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32):
        T.rng_init(1)
        A[T.get_thread_binding()] = {call}
'''
    with pytest.raises(FrontendError, match=rf":8: .*{message}"):
        T.from_script(src)


def test_a_draw_without_rng_init_is_refused(tmp_path):
    @T.prim_func
    def k(A: T.Tensor((32,), "uint32")):
        with T.Kernel(1, threads=32):
            A[T.get_thread_binding()] = T.rng_rand()
    with pytest.raises(CodegenError, match=r"test_rng.py:\d+: .*T.rng_rand\(\) draws .* never "
                                           r"calls T.rng_init"):
        tilecute.build_cubin(k, "sm_90a", out_dir=str(tmp_path))


# ---- on a GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_draws_match_the_reference():
    torch = pytest.importorskip("torch")
    seed, offset = 1234, 5
    k = tilecute.compile(draw_kernel(seed, offset))
    n = 2 * N_THREADS * PER_THREAD
    outs = [torch.empty(n, dtype=t, device="cuda") for t in
            (torch.uint32, torch.float32, torch.float64, torch.float32, torch.float64)]
    k(*outs)
    torch.cuda.synchronize()
    a, b, c, d, e = (o.cpu() for o in outs)
    for t in (0, 1, 63, 64, 127):  # threads of both blocks
        r = draws(seed, t, offset, 8 + 8 + 16 + 8 + 16)
        base = t * PER_THREAD
        assert [int(x) & _MASK for x in a[base:base + 8]] == r[:8], t
        assert [float(x) for x in b[base:base + 8]] == [uniform(x) for x in r[8:16]], t
        assert [float(x) for x in c[base:base + 8]] == \
            [uniform_double(r[16 + 2 * i], r[17 + 2 * i]) for i in range(8)], t
        normals = []
        for i in range(4):  # Box-Muller: two values per pair of draws
            x, y = r[32 + 2 * i], r[33 + 2 * i]
            u = uniform(x)
            v = _f32(_f32(float(y)) * _f32(_f32(2.3283064e-10) * _f32(6.2831855)))
            rad = math.sqrt(-2 * math.log(u))
            normals += [rad * math.sin(v), rad * math.cos(v)]
        assert torch.allclose(d[base:base + 8].double(), torch.tensor(normals, dtype=torch.float64),
                              rtol=1e-4, atol=1e-5), t
    # every thread's stream differs, and the statistics are the distributions'
    assert len(set(int(x) for x in a)) == n
    assert 0 < float(b.min()) and float(b.max()) <= 1 and abs(float(b.mean()) - 0.5) < 0.03
    assert 0 < float(c.min()) and float(c.max()) <= 1 and abs(float(c.mean()) - 0.5) < 0.03
    for normal in (d.double(), e):
        assert abs(float(normal.mean())) < 0.1 and abs(float(normal.std()) - 1) < 0.1


@pytest.mark.gpu
def test_parallel_fill_is_uniform_and_reproducible():
    torch = pytest.importorskip("torch")
    k = tilecute.compile(parallel_kernel(1000, 9))
    a, b = (torch.zeros(1000, dtype=torch.float32, device="cuda") for _ in range(2))
    k(a)
    k(b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    ref = [uniform(x) for blk in range(8) for x in draws(9, 0, blk * 128, 128)][:1000]
    assert [float(x) for x in a.cpu()] == ref  # one thread draws j = 0, 1, ... in order
    assert bool((a > 0).all()) and bool((a <= 1).all())
    hist = torch.histc(a, bins=10, min=0, max=1)
    assert bool((hist > 60).all()), hist  # 100 expected per bin
