"""TileLang's ``apply_simplify`` / ``simplify_prim_func`` drop the tensor parameters a
body never touches (its Simplify pass with ``simplify_arguments=True``): a kernel built
with an optional operand switched off takes one argument fewer."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.transform import simplify_prim_func
from tilecute.transform.simplify import apply_simplify


def row_dot(n: int, k: int, with_bias: bool):
    """y[r] = sum_k x[r, k] * w[k] (+ bias[r]): Bias is a parameter either way."""

    @T.prim_func
    def dot(X: T.Tensor((n, k), "float32"), W: T.Tensor((k,), "float32"),
            Bias: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n, threads=32) as r:
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for j in T.serial(k):
                acc[0] += X[r, j] * W[j]
            if with_bias:
                Y[r] = acc[0] + Bias[r]
            else:
                Y[r] = acc[0]

    return dot


def _param_names(func):
    return [p.name for p in func.params]


def test_an_untouched_tensor_parameter_is_dropped_and_a_touched_one_kept(tmp_path):
    plain = apply_simplify(row_dot(8, 16, False))
    assert _param_names(plain) == ["X", "W", "Y"]
    biased = apply_simplify(row_dot(8, 16, True))
    assert _param_names(biased) == ["X", "W", "Bias", "Y"]
    # the decorator form does the same
    assert _param_names(simplify_prim_func(row_dot)(8, 16, False)) == ["X", "W", "Y"]
    # without apply_simplify the parameter stays, as in TileLang
    assert _param_names(row_dot(8, 16, False)) == ["X", "W", "Bias", "Y"]
    built = tilecute.build_cubin(plain, "sm_90a", out_dir=str(tmp_path))
    assert built.kernel_names


def test_scalars_outputs_and_shape_binding_tensors_stay():
    n = T.dynamic("n")

    @T.prim_func
    def fill(Unused: T.Tensor((4,), "float32"), Shape: T.Tensor((n,), "float32"),
             scale: T.float32, Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                # n is bound only by Shape's extent: Shape stays though it is never read
                Y[i] = T.Cast("float32", n) * 0 + scale

    assert _param_names(apply_simplify(fill)) == ["Shape", "scale", "Y"]

    @T.prim_func
    def make(A: T.Tensor((64,), "float32"), Skip: T.Tensor((64,), "float32")):
        out = T.empty((64,), "float32")
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                out[i] = A[i] * 2
        return out

    simple = apply_simplify(make)
    assert _param_names(simple)[:1] == ["A"] and "Skip" not in _param_names(simple)
    assert simple.out_idx == make.out_idx


def test_a_dropped_tensor_is_no_argument_of_the_kernel(cache_dir):
    kernel = tilecute.compile(apply_simplify(row_dot(4, 8, False)))
    assert [p.name for p in kernel.params] == ["X", "W", "Y"]
    assert "Bias" not in kernel.get_kernel_source()


@pytest.mark.gpu
def test_dropped_bias_kernel_runs_with_three_arguments(cache_dir):
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 64, device="cuda")
    w = torch.randn(64, device="cuda")
    bias = torch.randn(32, device="cuda")
    y = torch.empty(32, device="cuda")
    tilecute.compile(apply_simplify(row_dot(32, 64, False)))(x, w, y)
    torch.testing.assert_close(y, x @ w, rtol=1e-4, atol=1e-4)
    tilecute.compile(apply_simplify(row_dot(32, 64, True)))(x, w, bias, y)
    torch.testing.assert_close(y, x @ w + bias, rtol=1e-4, atol=1e-4)
