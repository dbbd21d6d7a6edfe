"""The peer written directly in CuTe DSL: the same vector add (fp16, 1024 elements per
block, 128 threads), compiled through CuTe DSL's own path with --enable-tvm-ffi and the
TVM FFI environment stream.  A module of its own: CuTe DSL reads kernel source from files
and evaluates annotations, so it cannot live in a string or under `from __future__ import
annotations`."""

import cutlass
import cutlass.cute as cute


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    bx, _, _ = cute.arch.block_idx()
    tx, _, _ = cute.arch.thread_idx()
    for k in cutlass.range_constexpr(8):
        i = bx * 1024 + k * 128 + tx
        if i < a.shape[0]:
            c[i] = a[i] + b[i]


@cute.jit
def add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream):
    add_kernel(a, b, c).launch(grid=((a.shape[0] + 1023) // 1024, 1, 1), block=(128, 1, 1),
                               stream=stream)


def build_add():
    """Compile `add` for torch tensors of any length; returns the TVM FFI function."""
    n = cute.sym_int()
    fake = [cute.runtime.make_fake_compact_tensor(cutlass.Float16, (n,)) for _ in range(3)]
    stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(add, *fake, stream, options="--enable-tvm-ffi")
