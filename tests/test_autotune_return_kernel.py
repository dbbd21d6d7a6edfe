"""TileLang's ``tuned(*args, __return_kernel=True)``: its autotuned object's ``__call__`` pops
the keyword and returns the tuned kernel itself (what ``tuned.compile(...)`` returns); it
was passed on to the kernel factory (a TypeError naming the factory)."""

import tilecute
import tilecute.language as T


@tilecute.autotune(configs=[{"block": 64}, {"block": 128}])
@tilecute.jit(out_idx=[-1])
def _double(n: int = 1024, block: int = 128):
    @T.prim_func
    def double(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 2.0

    return double


def test_return_kernel_keyword_is_taken_not_passed_on():
    # a call that gives the tuned parameter compiles it untuned (no GPU needed)
    kernel = _double(1024, block=64, __return_kernel=True)
    assert isinstance(kernel, tilecute.JITKernel)
    assert "double" in kernel.get_kernel_source()
    assert kernel.ensure_cubin()
