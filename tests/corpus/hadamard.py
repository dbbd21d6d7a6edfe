"""Fast Walsh-Hadamard transform of each row (n a power of two): the row sits in shared
memory and log2(n) butterfly rounds run over it, each a T.Parallel loop over the n/2
pairs (a, a + stride) -> (x_a + x_b, x_a - x_b)."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-3, 1e-4
SM80 = True
MISSING = None


def program(b=64, n=512, dtype="float32"):
    log_n = n.bit_length() - 1
    assert 1 << log_n == n

    @T.prim_func
    def hadamard(A: T.Tensor((b, n), dtype), B: T.Tensor((b, n), dtype)):
        with T.Kernel(b, threads=n // 2) as bx:
            x = T.alloc_shared((n,), dtype)
            T.copy(A[bx, 0:n], x)
            for r in T.unroll(log_n):
                stride = 1 << r
                for i in T.Parallel(n // 2):
                    lo = (i // stride) * (2 * stride) + i % stride
                    u = x[lo]
                    v = x[lo + stride]
                    x[lo] = u + v
                    x[lo + stride] = u - v
            T.copy(x, B[bx, 0:n])

    return hadamard


def hadamard_matrix(n, device):
    import torch

    h = torch.ones(1, 1, device=device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def make_args(device):
    import torch

    a = torch.randn(64, 512, device=device)
    return [a, torch.empty_like(a)]


def reference(a, b):
    return ((a.double() @ hadamard_matrix(512, a.device).double()).float(),)
