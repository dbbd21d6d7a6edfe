"""The TMA peer written directly in CuTe DSL: a kernel that copies one (64, 64) fp16 box
per block with a TMA load and a TMA store, for 1 or 2 tensor pairs (2 or 4
descriptors).  The descriptors are built inside the ``@cute.jit`` function from the
tensors (CuTe DSL's own host path, ``cuTensorMapEncodeTiled`` in the compiled host code)
and the function is compiled with --enable-tvm-ffi, so torch tensors go straight in:
what tilecute's launcher does, done by CuTe DSL.  A module of its own: CuTe DSL reads
kernel source from files."""

import cutlass
import cutlass.cute as cute
from cutlass.base_dsl.typing import GridConstant
from cutlass.experimental import primitives as prims
from cutlass.experimental.cuda.tensor_map import TensorMap, create_tensor_map_tiled

BOX = 64
BYTES = BOX * BOX * 2


@cute.kernel
def copy_kernel(pairs: cutlass.Constexpr, a0: GridConstant[TensorMap], b0: GridConstant[TensorMap],
                a1: GridConstant[TensorMap], b1: GridConstant[TensorMap]):
    bx, by, _ = cute.arch.block_idx()
    tx, _, _ = cute.arch.thread_idx()
    smem = cute.arch.get_dyn_smem(cutlass.Int8, alignment=128)
    bar = cute.recast_ptr(smem + 2 * BYTES, dtype=cutlass.Int64)
    if tx == 0:
        cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    if tx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(bar, BYTES * pairs)
        prims.cp_async_bulk_tensor_shared_cta_global(smem, a0.get_ptr(), [bx * BOX, by * BOX], bar)
        if pairs == 2:
            prims.cp_async_bulk_tensor_shared_cta_global(smem + BYTES, a1.get_ptr(),
                                                         [bx * BOX, by * BOX], bar)
    cute.arch.mbarrier_wait(bar, 0)
    if tx == 0:
        prims.cp_async_bulk_tensor_global_shared_cta(b0.get_ptr(), smem, [bx * BOX, by * BOX])
        if pairs == 2:
            prims.cp_async_bulk_tensor_global_shared_cta(b1.get_ptr(), smem + BYTES,
                                                         [bx * BOX, by * BOX])
        cute.arch.cp_async_bulk_commit_group()
        cute.arch.cp_async_bulk_wait_group(0, read=True)


def _desc(t: cute.Tensor):
    m, n = t.shape
    return create_tensor_map_tiled(t.iterator.toint(), cutlass.Float16, [n, m],
                                   [t.stride[0] * 2 // 16], [BOX, BOX])


@cute.jit
def copy1(a: cute.Tensor, b: cute.Tensor, stream):
    da, db = _desc(a), _desc(b)
    m, n = a.shape
    copy_kernel(1, da, db, da, db).launch(grid=((n + BOX - 1) // BOX, (m + BOX - 1) // BOX, 1),
                                          block=(128, 1, 1), smem=2 * BYTES + 8, stream=stream)


@cute.jit
def copy2(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, d: cute.Tensor, stream):
    m, n = a.shape
    copy_kernel(2, _desc(a), _desc(b), _desc(c), _desc(d)).launch(
        grid=((n + BOX - 1) // BOX, (m + BOX - 1) // BOX, 1), block=(128, 1, 1),
        smem=2 * BYTES + 8, stream=stream)


def build(pairs: int):
    """Compile the 1-pair (2 descriptors) or 2-pair (4 descriptors) copy for fp16 (M, N)
    torch tensors, N a multiple of 8; returns the TVM FFI function."""
    m, n = cute.sym_int(), cute.sym_int(divisibility=8)
    fake = [cute.runtime.make_fake_compact_tensor(cutlass.Float16, (m, n), stride_order=(1, 0),
                                                  assumed_align=16)
            for _ in range(2 * pairs)]
    stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(copy1 if pairs == 1 else copy2, *fake, stream, options="--enable-tvm-ffi")
