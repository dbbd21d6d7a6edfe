"""C = A + B over 2-D tiles: each block owns a (block_M, block_N) tile and every thread
adds its share of it (TileLang's elementwise example)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-5, 1e-5
SM80 = True
MISSING = None


def program(M=512, N=384, block_M=32, block_N=128, threads=128, dtype="float32"):
    @T.prim_func
    def elementwise_add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
                        C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for local_y, local_x in T.Parallel(block_M, block_N):
                y = by * block_M + local_y
                x = bx * block_N + local_x
                C[y, x] = A[y, x] + B[y, x]

    return elementwise_add


def make_args(device):
    import torch

    a = torch.randn(512, 384, device=device)
    b = torch.randn(512, 384, device=device)
    return [a, b, torch.empty_like(a)]


def reference(a, b, c):
    return (a + b,)
