"""Kernel factories for tests/test_autotune.py (module level: a process pool can run them)."""

import time

import tilecute
import tilecute.language as T


def scale_program(n, block=256, threads=128, delay=0.0):
    """B = A * 2 over ``n`` elements, ``block`` per block; ``block`` must divide ``n`` and
    ``delay`` slows the build (a config that times out)."""
    if n % block:
        raise ValueError(f"block {block} does not divide n {n}")
    time.sleep(delay)

    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=threads) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    return scale


scale = tilecute.jit(out_idx=[-1])(scale_program)
