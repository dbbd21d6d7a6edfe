"""The absolute maximum of a whole tensor (an fp8 scaling factor): each block reduces its
rows with T.reduce_absmax, then folds each row's result into the global one with
T.atomic_max."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 0, 0
SM80 = True
MISSING = None


def program(M=512, N=512, blk_m=8, dtype="float32"):
    @T.prim_func
    def amax_atomic_max(X: T.Tensor((M, N), dtype), Amax: T.Tensor((1,), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), dtype)
            row_amax = T.alloc_fragment((blk_m,), dtype)
            T.copy(X[bx * blk_m, 0], x)
            T.reduce_absmax(x, row_amax, dim=1)
            for i in T.Parallel(blk_m):
                T.atomic_max(Amax[0], row_amax[i])

    return amax_atomic_max


def make_args(device):
    import torch

    return [torch.randn(512, 512, device=device), torch.zeros(1, device=device)]


def reference(x, amax):
    return (x.abs().amax().reshape(1),)
