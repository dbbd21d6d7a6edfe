"""Kernel factories for tests/test_autotune.py (module level: a process pool can run them)."""

import dataclasses
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


def slowed_program(n, variant="scale", block=256):
    """``scale_program``'s kernel under a name per ``variant``, for the timeout tests
    (tests/test_autotune_timeout.py), which slow one step of one variant's build while
    the file ``$AUTOTUNE_SLOW`` exists: "slow_factory" sleeps here (this runs in the build
    process) after writing its pid to ``$AUTOTUNE_PIDS/slow_factory``; "slow_gxx" and
    "slow_cubin" name the kernel that the test's g++ and cubin worker stand-ins slow down;
    any other variant is "scale", built as usual."""
    import os

    slow = os.path.exists(os.environ.get("AUTOTUNE_SLOW", "/nonexistent"))
    if variant == "slow_factory" and slow:
        with open(os.path.join(os.environ["AUTOTUNE_PIDS"], "slow_factory"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)

    func = scale_program(n, block)  # the stand-ins find the slowed kernels by name
    return dataclasses.replace(func, name=variant) if variant in ("slow_gxx", "slow_cubin") \
        else func


slowed = tilecute.jit(out_idx=[-1])(slowed_program)
