"""Fast Walsh-Hadamard transform inside one warp: each lane holds n/32 values, does the
butterflies among them in registers, then exchanges with lane ``tx ^ 2^r`` through
``T.shfl_xor`` for the five cross-lane rounds (TileLang's Hadamard example, n <= 512)."""

import tilecute.language as T

OUTPUTS = (1,)
ATOL, RTOL = 1e-3, 1e-4
SM80 = True
MISSING = None


def program(b=64, n=256, dtype="float32"):
    elem = n // 32
    thread_round = elem.bit_length() - 1

    @T.prim_func
    def hadamard_warp_shuffle(A: T.Tensor((b, n), dtype), B: T.Tensor((b, n), dtype)):
        with T.Kernel(b, threads=32) as bx:
            local = T.alloc_local((elem,), dtype)
            tx = T.get_thread_binding(0)
            for i in T.vectorized(elem):
                local[i] = A[bx, tx * elem + i]
            for r in T.unroll(thread_round):
                half = 1 << r
                for j in T.unroll(elem // 2):
                    lo = (j // half) * (2 * half) + j % half
                    u = local[lo]
                    v = local[lo + half]
                    local[lo] = u + v
                    local[lo + half] = u - v
            for r in T.unroll(5):
                for j in T.unroll(elem):
                    other = T.shfl_xor(local[j], 1 << r)
                    local[j] = T.if_then_else((tx >> r) & 1 == 0, local[j] + other, other - local[j])
            for i in T.vectorized(elem):
                B[bx, tx * elem + i] = local[i]

    return hadamard_warp_shuffle


def make_args(device):
    import torch

    a = torch.randn(64, 256, device=device)
    return [a, torch.empty_like(a)]


def reference(a, b):
    from .hadamard import hadamard_matrix

    return ((a.double() @ hadamard_matrix(256, a.device).double()).float(),)
