"""TMA copies and mbarriers for generated kernels (sm_90+).

The launcher encodes every descriptor on the host per launch (``cuTensorMapEncodeTiled``)
and passes it by value; a kernel declares it ``Desc`` (a ``__grid_constant__`` 128-byte
``CUtensorMap`` parameter) and only issues copies.  Usage in generated code::

    from tilecute.runtime.cute import tma as tct

    @cute.kernel
    def k(..., A_desc: tct.Desc):
        bar = cute.recast_ptr(tc_smem + 8192, dtype=cutlass.Int64)
        if tc_tid == 0:
            tct.init_barriers(bar, 1, 1)
        cute.arch.sync_threads()
        if tc_tid == 0:
            tct.load(A_desc, tc_smem + 0, bar + 0, (x, y), 8192)   # arrives, expects 8192 bytes
        tct.wait(bar + 0, 0)

    @cute.jit
    def f(A_ptr: cute.Pointer, ...):
        k(..., tct.placeholder(A_ptr, cutlass.Float16, (64, 64), 0)).launch(...)

Coordinates are in TMA order (the tensor's last axis first), in elements.  Helpers hold
no control flow on device values (only ``@cute.kernel`` bodies get the DSL's ``if``), so
the kernel wraps one-thread steps in ``if tc_tid == 0:`` itself.
"""

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import arith as _arith
from cutlass._mlir.dialects import llvm as _llvm
from cutlass._mlir.dialects import nvvm as _nvvm
from cutlass.base_dsl.typing import GridConstant
from cutlass.experimental import primitives as _prims
from cutlass.experimental.cuda.tensor_map import (
    TensorMap, TensorMapSwizzle, create_tensor_map_tiled,
)

Desc = GridConstant[TensorMap]  # the kernel parameter type of a descriptor

_SWIZZLES = {0: TensorMapSwizzle.none, 32: TensorMapSwizzle.s32b,
             64: TensorMapSwizzle.s64b, 128: TensorMapSwizzle.s128b}


def placeholder(ptr, dtype, box, swizzle: int):
    """A compile-time stand-in descriptor over ``ptr`` with box ``box`` (tensor axis
    order).  Only its type reaches the cubin (a 128-byte grid-constant parameter); the
    launcher passes the real descriptor, so the dims here are just the box's."""
    dims = [int(b) for b in reversed(box)]
    strides, step = [], dims[0] * dtype.width // 8
    for d in dims[1:]:
        strides.append(-(-step // 16))  # 16-byte units, as create_tensor_map_tiled takes
        step = -(-step // 16) * 16 * d
    return create_tensor_map_tiled(ptr.toint(), dtype, dims, strides, dims,
                                   swizzle=_SWIZZLES[swizzle])


def init_barriers(bar, num: int, count: int, fence: bool = True) -> None:
    """One thread: initialise ``num`` mbarriers from ``bar``, each expecting ``count``
    arrivals per phase; a block barrier after makes them visible (``fence``:
    ``fence.mbarrier_init`` first, sm_90+)."""
    for i in range(num):
        cute.arch.mbarrier_init(bar + i, count)
    if fence:
        cute.arch.mbarrier_init_fence()


def _shared_address(ptr):
    """The 32-bit shared-memory address of ``ptr`` (an mbarrier, a shared tensor's start)."""
    return cutlass.Int32(_llvm.ptrtoint(cutlass.Int32.mlir_type, ptr.to_llvm_ptr()))


def _on_barrier(bar, text: str, *operands) -> None:
    """An inline PTX statement on the mbarrier ``bar``: ``$0`` its shared address, ``$1``
    ... the Int32 ``operands``; it touches memory (``~{memory}``)."""
    args = [_shared_address(bar), *(cutlass.Int32(x) for x in operands)]
    _llvm.inline_asm(None, [a.ir_value() for a in args], text,
                     ",".join(["r"] * len(args) + ["~{memory}"]), has_side_effects=True,
                     is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT)


def wait_test(bar, parity) -> None:
    """sm_80's :func:`wait`: spin on ``mbarrier.test_wait.parity`` (sm_80+; ``try_wait``,
    which CuTe DSL's wait uses, is sm_90+), a short ``nanosleep`` between tests, as
    TileLang's ``mbarrier_test_wait`` does.  The test has acquire semantics at CTA scope:
    this thread then sees what the arrivals that completed the phase released."""
    _on_barrier(bar, "{\n.reg .pred P1;\nLAB_WAIT:\n"
                     "mbarrier.test_wait.parity.shared::cta.b64 P1, [$0], $1;\n"
                     "@P1 bra DONE;\nnanosleep.u32 5;\nbra LAB_WAIT;\nDONE:\n}", parity)


def arrive_cta(bar) -> None:
    """sm_80's :func:`arrive`: ``mbarrier.arrive.shared::cta.b64`` (sm_80+, release at CTA
    scope by default; CuTe DSL's arrive names ``.release.cta``, which is sm_90+), as
    TileLang's ``mbarrier_arrive``."""
    _on_barrier(bar, "mbarrier.arrive.shared::cta.b64 _, [$0];")


def cp_async_arrive_noinc(bar) -> None:
    """``cp.async.mbarrier.arrive.noinc.shared::cta.b64`` (sm_80+; CuTe DSL's is checked
    for sm_90): ``bar`` gets this thread's arrival once its earlier cp.async copies land,
    its pending count not raised for it (the count at init includes this thread)."""
    _on_barrier(bar, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];")


def _box(coords, c, step: int, chunk_bytes: int):
    """(byte offset in shared memory, coordinates) of box ``c`` of a tile moved as boxes
    side by side along the innermost axis, ``step`` elements apart."""
    return c * chunk_bytes, [coords[0] + c * step] + list(coords[1:])


def _chunks(coords, chunks: int, step: int, chunk_bytes: int):
    """:func:`_box` of each of the ``chunks`` boxes."""
    return [_box(coords, c, step, chunk_bytes) for c in range(chunks)]


def load(desc, smem, bar, coords, nbytes: int, chunks: int = 1, step: int = 0,
         chunk_bytes: int = 0, arrive: bool = True, cluster: int = 0) -> None:
    """One thread: arrive on ``bar`` expecting ``nbytes`` (the whole tile), and start
    the TMA load of the box at ``coords`` into ``smem`` (128-byte aligned; 1024 for a
    128-byte swizzle), or of ``chunks`` boxes along the innermost axis into consecutive
    ``chunk_bytes`` pieces of ``smem`` (a ``tma_swizzled`` tile wider than its swizzle).
    ``arrive=False``: expect the bytes without arriving (TileLang's ``T.tma_copy``: the
    program's threads arrive themselves).

    ``cluster=c`` (a kernel launched in clusters of ``c`` blocks, all loading this same
    tile): block ``r`` of the cluster copies boxes ``r, r + c, ...`` to every block of
    the cluster at once (``.multicast::cluster``: the data and the completed bytes land
    at the same shared offsets in each), and each block expects the whole tile on its own
    ``bar``."""
    if arrive:
        cute.arch.mbarrier_arrive_and_expect_tx(bar, nbytes)
    else:
        cute.arch.mbarrier_expect_tx(bar, nbytes)
    if cluster:
        rank = cute.arch.block_idx_in_cluster()
        mask = cutlass.Int16((1 << cluster) - 1)
        for t in range(chunks // cluster):
            off, where = _box(coords, rank + t * cluster, step, chunk_bytes)
            _prims.cp_async_bulk_tensor_shared_cluster_global(
                smem + off, desc.get_ptr(), where, bar, [], multicast_mask=mask)
        return
    for off, where in _chunks(coords, chunks, step, chunk_bytes):
        _prims.cp_async_bulk_tensor_shared_cta_global(smem + off, desc.get_ptr(), where, bar)


def store_fence() -> None:
    """Every thread, before a TMA store: make this thread's shared writes visible to TMA
    (then a block barrier)."""
    cute.arch.fence_proxy("async.shared", space="cta")


def store(desc, smem, coords, chunks: int = 1, step: int = 0, chunk_bytes: int = 0,
          wait: bool = True) -> None:
    """One thread: store the box at ``coords`` from ``smem`` (or ``chunks`` boxes, as in
    :func:`load`) and wait until TMA has read it (the shared tile may be rewritten after
    the next block barrier); ``wait=False``: the same thread calls :func:`store_wait`
    later, before that barrier."""
    for off, where in _chunks(coords, chunks, step, chunk_bytes):
        _prims.cp_async_bulk_tensor_global_shared_cta(desc.get_ptr(), smem + off, where)
    cute.arch.cp_async_bulk_commit_group()
    if wait:
        store_wait()


def store_add(desc, smem, coords, chunks: int = 1, step: int = 0, chunk_bytes: int = 0,
              wait: bool = True) -> None:
    """One thread: as :func:`store`, but add the box into global memory
    (``cp.reduce.async.bulk.tensor.<n>d.global.shared::cta.add``, TileLang's
    ``T.atomic_add(..., use_tma=True)``): each element's addition is atomic, relaxed at
    device scope, in the descriptor's element type; elements outside the tensor are
    skipped.  The waits are a store's: the tile has been read, not the sums made."""
    for off, where in _chunks(coords, chunks, step, chunk_bytes):
        _prims.cp_async_bulk_tensor_reduce(desc.get_ptr(), smem + off, _prims.TMARedux.ADD, where)
    cute.arch.cp_async_bulk_commit_group()
    if wait:
        store_wait()


def store_wait() -> None:
    """The thread that issued TMA stores: wait until TMA has read all their shared tiles
    (``cp.async.bulk.wait_group.read 0``)."""
    cute.arch.cp_async_bulk_wait_group(0, read=True)


def wait(bar, parity) -> None:
    """Wait until the phase of ``bar`` with this parity has completed."""
    cute.arch.mbarrier_wait(bar, parity)


def arrive(bar, block=None) -> None:
    """This thread arrives once on ``bar``; with ``block``, on ``bar`` (the same shared
    offset) in that block of its cluster."""
    if block is None:
        cute.arch.mbarrier_arrive(bar)
    else:
        cute.arch.mbarrier_arrive(bar, block)


def remote_base(tensor, block):
    """The address of shared tensor ``tensor`` as it lies in block ``block`` of this block's
    cluster (the same offset in that block's shared memory, ``mapa.shared::cluster``), for
    :func:`remote_store` (TileLang's ``T.copy_cluster(..., dst_block=)``)."""
    local = _shared_address(tensor.iterator)
    return cutlass.Int32(_llvm.inline_asm(
        cutlass.Int32.mlir_type, [local.ir_value(), cutlass.Int32(block).ir_value()],
        "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", has_side_effects=False,
        is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT))


_STORE_BITS = {8: (cutlass.Int8, "b8"), 16: (cutlass.Int16, "b16"), 32: (cutlass.Int32, "b32"),
               64: (cutlass.Int64, "b64")}


def remote_store(base, offset, value) -> None:
    """Store ``value`` at element ``offset`` from ``base`` (a :func:`remote_base`) in the
    other block's shared memory (``st.shared::cluster``)."""
    width = value.dtype.width
    kind, suffix = _STORE_BITS[width]
    bits = value if value.dtype is kind else kind(_arith.bitcast(kind.mlir_type, value.ir_value()))
    if width == 8:  # (PTX takes an 8-bit store's value from a 16-bit register)
        bits = cutlass.Int16(bits)
    reg = {8: "h", 16: "h", 32: "r", 64: "l"}[width]
    addr = base + offset * (width // 8)
    _llvm.inline_asm(None, [addr.ir_value(), bits.ir_value()],
                     f"st.shared::cluster.{suffix} [$0], $1;", f"r,{reg}",
                     has_side_effects=True, is_align_stack=False,
                     asm_dialect=_llvm.AsmDialect.AD_ATT)


def remote_arrive(bar, block) -> None:
    """One thread, after its block's stores into block ``block`` (and a barrier of the
    threads that made them): arrive on ``bar`` in that block with release at cluster scope
    (``fence.acq_rel.cluster``, ``mbarrier.arrive.release.cluster``), so a thread there that
    sees the phase complete sees the stores."""
    cute.arch.fence_acq_rel_cluster()
    cute.arch.mbarrier_arrive(bar, block, scope=_nvvm.MemScopeKind.CLUSTER)


def cluster_sync() -> None:
    """Every thread: arrive on the cluster's barrier and wait for all its blocks' threads
    (memory ordered cluster-wide: release, then acquire)."""
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()
