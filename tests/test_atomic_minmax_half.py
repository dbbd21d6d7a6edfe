"""``T.atomic_max`` / ``T.atomic_min`` on float16 and bfloat16 elements, as statements and with
``return_prev=True``, in global and shared memory: TileLang's ``AtomicMax`` / ``AtomicMin``
(and ``...Ret``) run a 16-bit compare-and-swap loop (CUDA has no 16-bit float max/min atomic):
read the element, and while ``value > element`` (``<`` for min) swap it in with
``atomicCAS``; so a NaN value changes nothing, a NaN element stays NaN, and a zero of the
other sign does not replace a zero.  tilecute's ``tca._cas16`` is that loop in one
inline PTX block (``atom.cas.b16``).
CPU: sm_90a cubins for both dtypes, both spaces, both forms; the PTX of the helper for the
memory orders; IR printing.  GPU: results and old values against a torch reference, NaN and
signed zeros included."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_stmts

SLOTS, THREADS = 4, 128


def extremes(dtype, op):
    """Each of 128 threads folds A[tx] into slot tx % 4 of a global tensor G and of a shared
    copy of it, once as a statement and once keeping the old value (Old / OldS)."""
    fold = T.atomic_max if op == "max" else T.atomic_min

    @T.prim_func
    def main(A: T.Tensor((THREADS,), dtype), G: T.Tensor((SLOTS,), dtype),
             H: T.Tensor((SLOTS,), dtype), Old: T.Tensor((THREADS,), dtype),
             OldS: T.Tensor((THREADS,), dtype), S_out: T.Tensor((SLOTS,), dtype),
             S2_out: T.Tensor((SLOTS,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((SLOTS,), dtype)
            S2 = T.alloc_shared((SLOTS,), dtype)
            if tx < SLOTS:
                S[tx] = G[tx]
                S2[tx] = G[tx]
            T.sync_threads()
            fold(H[tx % SLOTS], A[tx])                               # global, statement
            Old[tx] = fold(G[tx % SLOTS], A[tx], return_prev=True)   # global, old value
            fold(S2[tx % SLOTS], A[tx])                              # shared, statement
            OldS[tx] = fold(S[tx % SLOTS], A[tx], return_prev=True)  # shared, old value
            T.sync_threads()
            if tx < SLOTS:
                S_out[tx] = S[tx]
                S2_out[tx] = S2[tx]

    return main


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_max_min_build_for_both_forms_and_spaces(dtype, op, cache_dir):
    f = extremes(dtype, op)
    stmts = [s for k in f.kernels for s in walk_stmts(k.body) if isinstance(s, N.AtomicAdd)]
    assert [(s.op, s.dst.buffer) for s in stmts] == [(op, "H"), (op, "S2")]
    text = print_func(f)
    assert f"T.atomic_{op}(G[tx % 4], A[tx], return_prev=True)" in text
    kernel = tilecute.compile(f, target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    source = kernel.get_kernel_source()
    assert source.count("tca.atomic_fetch(") == 2
    assert source.count(f"tca.atomic_{op}(") == 2


def test_half_max_tile_form_builds(cache_dir):
    """``T.atomic_max(dst_tile, src_tile)`` on float16: one CAS loop per element."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), M: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_fragment((64, 64), "float16")
            T.copy(A, tile)
            T.atomic_max(M, tile)

    kernel = tilecute.compile(main, target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")


def test_half_min_with_result_and_an_order_builds(cache_dir):
    """TileLang honors ``memory_order`` on an atomic that returns the old value: the CAS
    loop takes it (an acquiring read and ``atom.acquire.cas``)."""
    @T.prim_func
    def main(G: T.Tensor((4,), "bfloat16"), Old: T.Tensor((128,), "bfloat16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            Old[tx] = T.atomic_min(G[tx % 4], T.bfloat16(1), return_prev=True,
                                   memory_order="acquire")

    assert 'return_prev=True, memory_order="acquire"' in print_func(main)
    kernel = tilecute.compile(main, target="sm_90a")
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    assert '"min", order="acquire")' in kernel.get_kernel_source()


# ---- the helper's PTX --------------------------------------------------------------------
cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
from tilecute.runtime.cute import atomic as tca  # noqa: E402


@cute.kernel
def _cas_kernel(p: cute.Pointer, op: cutlass.Constexpr, order: cutlass.Constexpr):
    x = cute.make_tensor(p, cute.make_layout((64,), stride=(1,)))
    tx, _, _ = cute.arch.thread_idx()
    if cutlass.const_expr(op == "max"):
        tca.atomic_max(x, (tx // 2,), x[tx], order)
    else:
        tca.atomic_min(x, (tx // 2,), x[tx], order)


@cute.jit
def _cas_wrapper(p: cute.Pointer, op: cutlass.Constexpr, order: cutlass.Constexpr):
    _cas_kernel(p, op, order).launch(grid=(1, 1, 1), block=(64, 1, 1))


@pytest.mark.parametrize("op,order", [("max", "relaxed"), ("min", "release"),
                                      ("max", "acquire"), ("min", "seq_cst")])
@pytest.mark.parametrize("dtype", ["Float16", "BFloat16"])
def test_cas_loop_ptx(dtype, op, order, tmp_path, monkeypatch):
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptr = cute.runtime.make_ptr(getattr(cutlass, dtype), 0, cute.AddressSpace.gmem,
                                assumed_align=16)
    ptx = cute.compile(_cas_wrapper, ptr, op, order,
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    sem = {"seq_cst": "acquire"}.get(order, order)
    load = "acquire" if order in ("acquire", "seq_cst") else "relaxed"
    assert f"atom.{sem}.gpu.global.cas.b16" in ptx
    assert f"ld.{load}.gpu.global.b16" in ptx
    assert f"setp.{'gt' if op == 'max' else 'lt'}.f32 p, fv, fo;" in ptx
    assert ("fence.sc.gpu" in ptx) == (order == "seq_cst")
    widen = "cvt.f32.f16" if dtype == "Float16" else r"mov.b32 f[vo], \{zero,"
    assert re.search(widen, ptx)


# ---- GPU: against torch -------------------------------------------------------------------
def _reference(init, values, op):
    """TileLang's loop, sequentially: replace only where value > element (< for min)."""
    import torch

    out = init.float().clone()
    for j in range(SLOTS):
        for v in values[j::SLOTS].float():
            better = v > out[j] if op == "max" else v < out[j]
            if bool(better):
                out[j] = v
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_max_min_match_torch(dtype, op):
    import torch

    tdtype = getattr(torch, dtype)
    torch.manual_seed(0)
    a = (torch.randn(THREADS) * 8).to(tdtype)
    nan, inf = float("nan"), float("inf")
    # slot 0: random; slot 1: the element is NaN (stays); slot 2: +0 vs -0 values only;
    # slot 3: NaN values mixed in (ignored)
    a[1::SLOTS] = a[1::SLOTS].abs() * (1 if op == "max" else -1)
    a[2::SLOTS] = torch.tensor([0.0, -0.0] * (THREADS // SLOTS // 2), dtype=tdtype)
    a[3::SLOTS][::3] = nan
    init = torch.tensor([-inf if op == "max" else inf, nan,
                         -0.0 if op == "max" else 0.0, 0.0], dtype=tdtype)
    a, init = a.cuda(), init.cuda()
    g, h = init.clone(), init.clone()
    old, old_s, s_out, s2_out = (torch.empty(n, dtype=tdtype, device="cuda")
                                 for n in (THREADS, THREADS, SLOTS, SLOTS))
    kernel = tilecute.compile(extremes(dtype, op))
    kernel(a, g, h, old, old_s, s_out, s2_out)
    torch.cuda.synchronize()
    want = _reference(init.cpu(), a.cpu(), op)
    for got in (g, h, s_out, s2_out):
        got = got.float().cpu()
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.signbit(got[2]) == torch.signbit(want[2])  # the zero's sign is kept
    # every old value is the slot's start or a value folded into it, never past the result
    for prev in (old, old_s):
        prev = prev.float().cpu()
        for j in range(SLOTS):
            seen = set(a.cpu()[j::SLOTS].float().tolist()) | {float(init[j])}
            for v in prev[j::SLOTS].tolist():
                if v != v:
                    assert j in (1, 3) or any(x != x for x in seen)
                    continue
                assert v in seen
                assert (v <= want[j]) if op == "max" else (v >= want[j])


# ---- uint32 / uint64: an unsigned order (a uint buffer's tensor has signless elements) ----
def unsigned_extremes(dtype, op):
    fold = T.atomic_max if op == "max" else T.atomic_min

    @T.prim_func
    def main(A: T.Tensor((THREADS,), dtype), G: T.Tensor((SLOTS,), dtype),
             H: T.Tensor((SLOTS,), dtype), Old: T.Tensor((THREADS,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            fold(H[tx % SLOTS], A[tx])
            Old[tx] = fold(G[tx % SLOTS], A[tx], return_prev=True)

    return main


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_max_min_use_unsigned_atomics(dtype, op, cache_dir, tmp_path):
    """TileLang's ``cuda::atomic_ref<unsigned>::fetch_max`` orders the values as unsigned:
    ``red/atom .max.u32`` (a signed ``.s32`` would put 2**31 below 0)."""
    kernel = tilecute.compile(unsigned_extremes(dtype, op), target="sm_90a")
    source = kernel.get_kernel_source()
    assert source.count("unsigned=True") == 2
    assert kernel.ensure_cubin().endswith("kernel.cubin")
    ptx = cute.compile(_unsigned_wrapper, cute.runtime.make_ptr(
        cutlass.Int32 if dtype == "uint32" else cutlass.Int64, 0, cute.AddressSpace.gmem,
        assumed_align=16), op, options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    bits = dtype[-2:]
    assert re.search(rf"red(\.relaxed)?\.gpu\.global\.{op}\.u{bits}", ptx), ptx[-1500:]
    assert re.search(rf"atom(\.relaxed)?(\.gpu)?\.global\.{op}\.u{bits}", ptx), ptx[-1500:]
    assert f".{op}.s{bits}" not in ptx


@cute.kernel
def _unsigned_kernel(p: cute.Pointer, op: cutlass.Constexpr):
    x = cute.make_tensor(p, cute.make_layout((64,), stride=(1,)))
    tx, _, _ = cute.arch.thread_idx()
    if cutlass.const_expr(op == "max"):
        tca.atomic_max(x, (tx // 2,), x[tx], unsigned=True)
    else:
        tca.atomic_min(x, (tx // 2,), x[tx], unsigned=True)
    x[tx + 32] = tca.atomic_fetch(x, (tx // 4,), x[tx], op, unsigned=True)


@cute.jit
def _unsigned_wrapper(p: cute.Pointer, op: cutlass.Constexpr):
    _unsigned_kernel(p, op).launch(grid=(1, 1, 1), block=(32, 1, 1))


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_max_min_match_torch(dtype, op):
    import torch

    bits = int(dtype[-2:])
    signed = torch.int32 if bits == 32 else torch.int64
    g = torch.Generator().manual_seed(1)
    # values across the whole unsigned range: the upper half is negative as signed
    a = torch.randint(-2**(bits - 1), 2**(bits - 1) - 1, (THREADS,), generator=g, dtype=torch.int64)
    a = a.to(signed)
    start = torch.tensor([0, 2**(bits - 1) - 1, -1, 5], dtype=signed)  # -1: the largest
    if op == "min":
        start = torch.tensor([-1, -2**(bits - 1), 0, 5], dtype=signed)  # -2^(b-1): 2^(b-1) unsigned
    udt = getattr(torch, dtype)
    dev = lambda t: t.cuda().view(udt)  # noqa: E731
    A, G, H = dev(a), dev(start.clone()), dev(start.clone())
    old = torch.empty(THREADS, dtype=udt, device="cuda")
    tilecute.compile(unsigned_extremes(dtype, op))(A, G, H, old)
    torch.cuda.synchronize()
    as_u = (lambda t: t.view(signed).cpu().to(torch.int64) & 0xFFFFFFFF) if bits == 32 else \
        (lambda t: t.view(signed).cpu())
    if bits == 64:  # compare unsigned 64-bit values through their order-preserving flip
        as_u = lambda t: t.view(signed).cpu() ^ (-2**63)  # noqa: E731
    au, su = as_u(A), as_u(dev(start))
    want = []
    for j in range(SLOTS):
        vals = torch.cat([su[j:j + 1], au[j::SLOTS]])
        want.append(vals.max() if op == "max" else vals.min())
    want = torch.stack(want)
    assert torch.equal(as_u(G), want) and torch.equal(as_u(H), want)
    olds = as_u(old)
    for j in range(SLOTS):
        seen = set(au[j::SLOTS].tolist()) | {int(su[j])}
        assert all(v in seen for v in olds[j::SLOTS].tolist())
