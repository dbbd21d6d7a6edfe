"""The CuTe DSL device helpers of tilecute.runtime.cute, compiled for sm_90a and sm_80
(no GPU needed): small kernels in this file call the helpers, and the tests check the
PTX that ``cute.compile`` produces (``--keep-ptx``; no nvdisasm here for SASS) and that a
cubin comes out.

The kernels must stay in this file: CuTe DSL reads kernel source through ``inspect``.
"""

import glob
import os
import re

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")

from tilecute.runtime.cubin import read_cubin  # noqa: E402
from tilecute.runtime.cute import atomic as tca  # noqa: E402
from tilecute.runtime.cute import copy as tcc  # noqa: E402
from tilecute.runtime.cute import reduce as tcr  # noqa: E402
from tilecute.runtime.cute import smem as tcs  # noqa: E402
from cutlass.memory import SmemAllocator  # noqa: E402

ARCHS = ["sm_90a", "sm_80"]
F32, F16, BF16, F64, I32, U32 = (cutlass.Float32, cutlass.Float16, cutlass.BFloat16,
                                 cutlass.Float64, cutlass.Int32, cutlass.Uint32)


def gptr(dtype=F32):
    """A placeholder global pointer, as tilecute's generated ``placeholder_args``."""
    return cute.runtime.make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=16)


def compile_ptx(wrapper, args, arch, dump, monkeypatch):
    """Compile ``wrapper(*args)`` for ``arch``; return the PTX, after checking that
    exactly one cubin holding one kernel was written."""
    monkeypatch.setenv("CUTE_DSL_ARCH", arch)
    dump.mkdir(exist_ok=True)
    compiled = cute.compile(wrapper, *args,
                            options=f"--keep-cubin --keep-ptx --gpu-arch {arch} --dump-dir {dump}")
    ptx = compiled.__ptx__
    assert ptx and f".target {arch}" in ptx
    cubins = glob.glob(os.path.join(dump, f"*.{arch}.cubin"))
    assert len(cubins) == 1, cubins
    assert len(read_cubin(cubins[0], arch).kernels) == 1
    return ptx


def count(ptx, pattern):
    return len(re.findall(pattern, ptx))


# ---- reduce ------------------------------------------------------------------------------
@cute.kernel
def reduce_kernel(p: cute.Pointer, q: cute.Pointer, op: cutlass.Constexpr):
    x = cute.make_tensor(p, cute.make_layout((256, 2), stride=(2, 1)))
    y = cute.make_tensor(q, cute.make_layout((256,), stride=(1,)))
    scratch = tcs.alloc(F32, 2 * 8)
    tx, _, _ = cute.arch.thread_idx()
    red = cute.make_rmem_tensor((2,), F32)
    for r in cutlass.range_constexpr(2):
        acc = tcr.combine(x[tx, 0], x[tx, 1], op)
        red[r] = tcr.warp_allreduce(acc, op, 32)
    tcr.block_allreduce(red, op, scratch, 8, 4)
    y[tx] = tcr.warp_allreduce(red[0] + red[1], op, 8)


@cute.jit
def reduce_wrapper(p: cute.Pointer, q: cute.Pointer, op: cutlass.Constexpr):
    reduce_kernel(p, q, op).launch(grid=(1, 1, 1), block=(256, 1, 1))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reduce(arch, op, tmp_path, monkeypatch):
    ptx = compile_ptx(reduce_wrapper, (gptr(), gptr(), op), arch, tmp_path, monkeypatch)
    # two rows x 5 butterfly steps (width 32) + 3 steps (width 8), offsets 16 .. 1
    assert count(ptx, r"shfl\.sync\.bfly\.b32") == 2 * 5 + 3
    for off in (16, 8, 4, 2, 1):
        assert re.search(rf"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, {off}, 31, -1;", ptx)
    inst = {"sum": "add.f32", "max": "max.f32", "min": "min.f32"}[op]
    assert inst in ptx
    # block exchange: lane 0 stores both rows, two barriers, the 4 partials of a group
    # are read back (vectorized into one 128-bit shared load per row)
    assert count(ptx, r"bar\.sync\s+0;") == 2
    assert count(ptx, r"st\.shared\.b32") == 2
    assert count(ptx, r"ld\.shared\.v4\.b32") == 2
    assert "%laneid" in ptx


@cute.kernel
def combine_kernel(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, d: cute.Pointer):
    ta = cute.make_tensor(a, cute.make_layout(64))
    tb = cute.make_tensor(b, cute.make_layout(64))
    tc = cute.make_tensor(c, cute.make_layout(64))
    td = cute.make_tensor(d, cute.make_layout(64))
    tx, _, _ = cute.arch.thread_idx()
    ta[tx] = tcr.combine(ta[tx], ta[tx + 1], "max")
    # elements of a Uint32 pointer load as Int32 (CuTe pointers are signless)
    tb[tx] = tcr.combine(U32(tb[tx]), U32(tb[tx + 1]), "min")
    tb[tx + 2] = tcr.combine(tb[tx], tb[tx + 1], "min")
    tc[tx] = tcr.combine(tc[tx], tc[tx + 1], "max")
    td[tx] = tcr.warp_allreduce(tcr.combine(td[tx], 1.0, "sum"), "sum", 4)
    # a group of one warp needs no exchange: no barrier, no shared memory
    red = cute.make_rmem_tensor((1,), F32)
    red[0] = F32(0.0)
    tcr.block_allreduce(red, "max", None, 4, 1)
    tcr.warp_allreduce(red[0], "max", 1)


@cute.jit
def combine_wrapper(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, d: cute.Pointer):
    combine_kernel(a, b, c, d).launch(grid=(1, 1, 1), block=(128, 1, 1))


@pytest.mark.parametrize("arch", ARCHS)
def test_combine_dtypes(arch, tmp_path, monkeypatch):
    ptx = compile_ptx(combine_wrapper, (gptr(I32), gptr(U32), gptr(F16), gptr(F64)),
                      arch, tmp_path, monkeypatch)
    assert "max.s32" in ptx
    assert "min.u32" in ptx and "min.s32" in ptx
    # f16 max goes through f32 fmax, which NVVM folds back into one max.f16
    assert re.search(r"max\.f16\s", ptx) and "setp.nan" not in ptx
    assert "add.f64" in ptx
    # f64 shuffles as two 32-bit halves: 2 steps (width 4) x 2
    assert count(ptx, r"shfl\.sync\.bfly\.b32") == 4
    assert "bar.sync" not in ptx and ".shared" not in ptx


def test_reduce_rejects_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        tcr.warp_allreduce(1.0, "sum", 12)
    with pytest.raises(ValueError, match="unknown op"):
        tcr.combine(1.0, 2.0, "prod")


# ---- atomic ------------------------------------------------------------------------------
@cute.kernel
def atomic_kernel(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, d: cute.Pointer,
                  e: cute.Pointer, f: cute.Pointer, i0: cutlass.Int32, bf16: cutlass.Constexpr):
    g2 = cute.make_tensor(a, cute.make_layout((8, 64), stride=(64, 1)))
    g1 = cute.make_tensor(a, cute.make_layout((512,), stride=(1,)))
    s1 = tcs.alloc(F32, 64)
    s2 = tcs.alloc(I32, (4, 16))
    tx, _, _ = cute.arch.thread_idx()
    tca.atomic_add(g2, (i0, tx), 1.0)               # 2-D global, Python float value
    tca.atomic_add(g1, (tx,), F32(2.0))             # 1-tuple on a (n,) layout
    tca.atomic_add(s1, (tx,), 1.0)                  # 1-tuple on a plain-int layout
    tca.atomic_add(s1, tx + 1, g2[i0, tx])          # linear index
    tca.atomic_add(s2, (i0 % 4, tx % 16), 3)
    tca.atomic_add(cute.make_tensor(b, cute.make_layout(64)), tx, 1.0)
    tca.atomic_add(cute.make_tensor(c, cute.make_layout(64)), tx, 1.0)
    tca.atomic_add(cute.make_tensor(d, cute.make_layout(64)), tx, tx)
    tca.atomic_add(cute.make_tensor(f, cute.make_layout(64)), tx, -1)
    if cutlass.const_expr(bf16):
        tca.atomic_add(cute.make_tensor(e, cute.make_layout(64)), tx, 1.0)
    cute.arch.sync_threads()
    g2[0, tx] = s1[tx] + F32(s2[0, tx % 16])


@cute.jit
def atomic_wrapper(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, d: cute.Pointer,
                   e: cute.Pointer, f: cute.Pointer, i0: cutlass.Int32, bf16: cutlass.Constexpr):
    atomic_kernel(a, b, c, d, e, f, i0, bf16).launch(grid=(1, 1, 1), block=(64, 1, 1))


ATOMIC_ARGS = (gptr(F32), gptr(F64), gptr(F16), gptr(I32), gptr(BF16), gptr(cutlass.Int64),
               cutlass.Int32(0))


@pytest.mark.parametrize("arch", ARCHS)
def test_atomic_add(arch, tmp_path, monkeypatch):
    bf16 = arch == "sm_90a"
    ptx = compile_ptx(atomic_wrapper, ATOMIC_ARGS + (bf16,), arch, tmp_path, monkeypatch)
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.f32") == 2
    assert count(ptx, r"red\.relaxed\.cta\.shared::cta\.add\.f32") == 2
    assert count(ptx, r"red\.relaxed\.cta\.shared::cta\.add\.s32") == 1
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.f64") == 1
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.noftz\.f16") == 1
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.s32") == 1
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.u64") == 1  # Int64: no red.add.s64
    assert count(ptx, r"red\.relaxed\.gpu\.global\.add\.noftz\.bf16") == int(bf16)
    assert "atom." not in ptx  # result unused: no atom, no CAS loop


def test_atomic_add_bf16_before_sm90_loops_on_cas(tmp_path, monkeypatch):
    # sm_80 has no red/atom .add.bf16: the add is a 16-bit compare-and-swap loop on the
    # element, the sum rounded to bfloat16 (as CUDA's atomicAdd(__nv_bfloat16*) there)
    ptx = compile_ptx(atomic_wrapper, ATOMIC_ARGS + (True,), "sm_80", tmp_path, monkeypatch)
    assert "add.noftz.bf16" not in ptx
    assert count(ptx, r"atom\.relaxed\.gpu\.global\.cas\.b16") == 1
    assert count(ptx, r"cvt\.rn\.bf16\.f32") >= 1 and count(ptx, r"add\.rn\.f32") >= 1


@cute.kernel
def atomic_vector_kernel(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer,
                         i0: cutlass.Int32, bf16: cutlass.Constexpr):
    f32 = cute.make_tensor(a, cute.make_layout((8, 64), stride=(64, 1)))
    f16 = cute.make_tensor(b, cute.make_layout((8, 64), stride=(64, 1)))
    b16 = cute.make_tensor(c, cute.make_layout((512,), stride=(1,)))
    s = tcs.alloc(F32, 64)
    tx, _, _ = cute.arch.thread_idx()
    r4 = cute.make_rmem_tensor((4,), F32)
    h8 = cute.make_rmem_tensor((8,), F16)
    for i in cutlass.range_constexpr(8):
        h8[i] = F16(i)
        if i < 4:
            r4[i] = F32(i)
    tca.atomic_add_vector(f32, (i0, tx * 4), r4, 4)           # register tensor
    tca.atomic_add_vector(f32, (i0, tx * 2), cute.make_tensor(r4.iterator, cute.make_layout(2)).load(), 2)
    tca.atomic_add_vector(f16, (i0, tx * 8), h8.load(), 8)    # TensorSSA
    tca.atomic_add_vector(f16, (i0, tx * 2), cute.make_tensor(h8.iterator, cute.make_layout(2)), 2)
    tca.atomic_add_vector(s, (tx * 4) % 64, r4, 4)            # shared: per element
    if cutlass.const_expr(bf16):
        v = cute.make_rmem_tensor((4,), BF16)
        v.store(r4.load().to(BF16))
        tca.atomic_add_vector(b16, (tx * 4,), v, 4)
    cute.arch.sync_threads()
    f32[0, tx] = s[tx]


@cute.jit
def atomic_vector_wrapper(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer,
                          i0: cutlass.Int32, bf16: cutlass.Constexpr):
    atomic_vector_kernel(a, b, c, i0, bf16).launch(grid=(1, 1, 1), block=(8, 1, 1))


@pytest.mark.parametrize("arch", ARCHS)
def test_atomic_add_vector(arch, tmp_path, monkeypatch):
    hopper = arch == "sm_90a"
    ptx = compile_ptx(atomic_vector_wrapper, (gptr(F32), gptr(F16), gptr(BF16), cutlass.Int32(0),
                                              hopper), arch, tmp_path, monkeypatch)
    red = r"red\.relaxed\.gpu\.global\.add\."
    if hopper:
        assert count(ptx, red + r"v4\.f32 \[%rd\d+\], \{%r\d+, %r\d+, %r\d+, %r\d+\}") == 1
        assert count(ptx, red + r"v2\.f32") == 1
        assert count(ptx, red + r"noftz\.v8\.f16") == 1
        assert count(ptx, red + r"noftz\.f16x2") == 1
        assert count(ptx, red + r"noftz\.v4\.bf16") == 1
        assert count(ptx, red + r"f32 ") == 0
    else:  # no vector red before sm_90: scalars, f16 in pairs
        assert count(ptx, red + r"(noftz\.)?v\d") == 0
        assert count(ptx, red + r"f32 ") == 4 + 2
        assert count(ptx, red + r"noftz\.f16x2") == 4 + 1
    # shared memory has no vector red: 4 scalar adds
    assert count(ptx, r"red\.relaxed\.cta\.shared::cta\.add\.f32") == 4


# ---- copy --------------------------------------------------------------------------------
@cute.kernel
def copy_kernel(p: cute.Pointer, i0: cutlass.Int32, bits: cutlass.Constexpr,
                use_view: cutlass.Constexpr):
    v = bits // p.dtype.width
    g = cute.make_tensor(p, cute.make_layout((64, 64), stride=(64, 1)))
    if cutlass.const_expr(use_view):  # tilecute codegen's layout of shared memory today
        base = cute.arch.get_dyn_smem(cutlass.Int8, alignment=16)
        s = tcs.view(base, 32, p.dtype, 64 * 64)
    else:
        s = tcs.alloc(p.dtype, 64 * 64)
    tx, _, _ = cute.arch.thread_idx()
    # the global view exactly as tilecute's vector_view() prints it
    src = cute.make_tensor(g.iterator + cute.assume(i0 * 64 + tx * v, divby=v), cute.make_layout(v))
    tcc.copy_async(src, tcc.vector(s, tx * v, v), bits)
    tcc.commit()
    tcc.copy_async(tcc.vector(g, (i0 + 1) * 64 + tx * v, v), tcc.vector(s, 64 + tx * v, v), bits)
    tcc.commit()
    tcc.wait(1)
    tcc.wait(0)
    cute.arch.sync_threads()
    # a vector view of unswizzled shared memory: one ld.shared of `bits` bits
    tcc.vector(g, i0 * 64 + tx * v, v).store(tcc.vector(s, 64 + ((tx + 1) % 8) * v, v).load())


@cute.jit
def copy_wrapper(p: cute.Pointer, i0: cutlass.Int32, bits: cutlass.Constexpr,
                 use_view: cutlass.Constexpr):
    copy_kernel(p, i0, bits, use_view).launch(grid=(1, 1, 1), block=(8, 1, 1), smem=32 + 64 * 64 * 4)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,bits,use_view", [(F32, 128, False), (F16, 128, True),
                                                 (F32, 64, True), (F16, 32, False)])
def test_copy_async(arch, dtype, bits, use_view, tmp_path, monkeypatch):
    ptx = compile_ptx(copy_wrapper, (gptr(dtype), cutlass.Int32(0), bits, use_view),
                      arch, tmp_path, monkeypatch)
    n = bits // 8
    mode = "cg" if bits == 128 else "ca"
    assert count(ptx, rf"cp\.async\.{mode}\.shared\.global \[%r\d+(\+\d+)?\], \[%rd\d+(\+\d+)?\], {n}, {n};") == 2
    assert count(ptx, r"cp\.async\.commit_group;") == 2
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx)
    assert re.search(r"cp\.async\.wait_group\s+0;", ptx)
    vec = {128: r"ld\.shared\.v4\.b32", 64: r"ld\.shared\.v2\.b32", 32: r"ld\.shared\.b32"}[bits]
    assert count(ptx, vec) == 1


def test_copy_async_checks_alignment(tmp_path, monkeypatch):
    misaligned = cute.runtime.make_ptr(F32, 0, cute.AddressSpace.gmem, assumed_align=4)
    with pytest.raises(Exception, match=r"src ptr alignment \(32 bits\) does not\s+meet requirement \(128 bits\)"):
        compile_ptx(copy_wrapper, (misaligned, cutlass.Int32(0), 128, False), "sm_90a",
                    tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="32, 64 or 128"):
        tcc.copy_async(None, None, 256)


# ---- smem --------------------------------------------------------------------------------
@cute.kernel
def smem_kernel(p: cute.Pointer, q: cute.Pointer, i0: cutlass.Int32, j0: cutlass.Int32,
                use_view: cutlass.Constexpr):
    g = cute.make_tensor(p, cute.make_layout((64, 64), stride=(64, 1)))
    o = cute.make_tensor(q, cute.make_layout((1,), stride=(1,)))
    if cutlass.const_expr(use_view):
        base = cute.arch.get_dyn_smem(cutlass.Int8, alignment=16)
        a = tcs.view(base, 0, F32, (64, 32), swizzle=(3, 2, 3))
        b = tcs.view(base, 8192, F16, (2, 4, 8))
        c = tcs.view(base, 8192 + 128, F32, 16)
    else:
        a = tcs.alloc(F32, (64, 32), swizzle=(3, 2, 3))
        b = tcs.alloc(F16, (2, 4, 8))
        c = tcs.alloc(F32, 16)
        o[0] = SmemAllocator().calculate_total_usage()
    tx, _, _ = cute.arch.thread_idx()
    a[tx, j0] = g[tx, j0]                       # swizzled store, dynamic coordinates
    b[i0 % 2, j0 % 4, tx % 8] = F16(g[tx, 0])
    c[tx % 16] = g[0, tx]
    cute.arch.sync_threads()
    g[i0, tx] = a[i0, tx] + F32(b[1, 2, 3]) + c[3]
    # vector view of a swizzled buffer: the (swizzled) offset from crd2idx
    off = cute.crd2idx((i0, j0 * 4), a.layout)
    tcc.vector(g, tx * 4, 4).store(tcc.vector(a, off, 4).load())


@cute.jit
def smem_wrapper(p: cute.Pointer, q: cute.Pointer, i0: cutlass.Int32, j0: cutlass.Int32,
                 use_view: cutlass.Constexpr):
    smem_kernel(p, q, i0, j0, use_view).launch(grid=(1, 1, 1), block=(64, 1, 1))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("use_view", [False, True])
def test_smem(arch, use_view, tmp_path, monkeypatch):
    ptx = compile_ptx(smem_wrapper, (gptr(), gptr(I32), cutlass.Int32(0), cutlass.Int32(0), use_view),
                      arch, tmp_path, monkeypatch)
    assert count(ptx, r"\.extern \.shared \.align \d+ \.b8 __dynamic_shmem__\d+\[\];") == 1
    assert re.search(r"\.shared \.align \d+ \.b8 \w+\[\d+\]", ptx) is None  # nothing static
    # Swizzle<3,2,3> on the element offset: ((x >> 3) & 0b11100) ^ x, for the store, the
    # scalar load and the vector load
    assert count(ptx, r"and\.b32\s+%r\d+, %r\d+, 28;") == 3
    assert count(ptx, r"xor\.b32") == 3
    # a: 64*32 f32 = 8192 bytes at 0; b: 2*4*8 f16 = 128 bytes at 8192; c at 8320
    assert re.search(r"st\.shared\.b16\s+\[%r\d+\+8192\]", ptx)
    assert re.search(r"ld\.shared\.b16\s+%rs\d+, \[[%\w]+\+8294\]", ptx)   # b[1, 2, 3]
    assert re.search(r"ld\.shared\.b32\s+%r\d+, \[[%\w]+\+8332\]", ptx)    # c[3]
    assert count(ptx, r"ld\.shared\.v4\.b32") == 1
    if not use_view:  # the allocator's total: c ends at 8320 + 64
        assert re.search(r"st\.global\.b32\s+\[%rd\d+\], 8384;", ptx)


@cute.kernel
def smem_order_kernel(q: cute.Pointer):
    o = cute.make_tensor(q, cute.make_layout((4,), stride=(1,)))
    a = tcs.alloc(cutlass.Int8, 3, align=1)
    b = tcs.alloc(F32, 4, align=128)
    c = tcs.alloc(F16, 5, align=1)
    tx, _, _ = cute.arch.thread_idx()
    a[tx % 3] = cutlass.Int8(1)
    b[tx % 4] = F32(2.0)
    c[tx % 5] = F16(3.0)
    cute.arch.sync_threads()
    o[0] = I32(a[0]) + I32(b[0]) + I32(c[0])
    o[1] = SmemAllocator().calculate_total_usage()


@cute.jit
def smem_order_wrapper(q: cute.Pointer):
    smem_order_kernel(q).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_smem_allocator_offsets(tmp_path, monkeypatch):
    """Bump allocation in program order, each buffer aligned to max(align, element
    bytes), no trailing padding: 0 (3 B), 128 (16 B), 144 (10 B) -> 154 bytes."""
    ptx = compile_ptx(smem_order_wrapper, (gptr(I32),), "sm_90a", tmp_path, monkeypatch)
    assert re.search(r"ld\.shared\.b32\s+%r\d+, \[[%\w]+\+128\]", ptx)
    assert re.search(r"ld\.shared\.b16\s+%rs\d+, \[[%\w]+\+144\]", ptx)
    assert re.search(r"st\.global\.v2\.b32\s+\[%rd\d+\], \{%r\d+, 154\};", ptx)  # o[0], o[1]
