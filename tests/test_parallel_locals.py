"""A T.alloc_var (or T.alloc_local) declared inside a T.Parallel body is each iteration's
own scalar, as in TileLang (a ReLU's derivative in a backward kernel); it was refused
('allocate it before the loop')."""

import pytest

import tilecute
import tilecute.language as T


def _relu_grad(vector_rows=64):
    @T.prim_func
    def relu_grad(X: T.Tensor((vector_rows, 32), "float32"),
                  G: T.Tensor((vector_rows, 32), "float32"),
                  Y: T.Tensor((vector_rows, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((vector_rows, 32), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(vector_rows, 32):
                slope = T.alloc_var(T.float32)
                if x[i, j] > 0:
                    slope = 1.0
                else:
                    slope = 0.0
                Y[i, j] = G[i, j] * slope

    return relu_grad


def test_scalar_in_parallel_body_builds(tmp_path):
    assert tilecute.build_cubin(_relu_grad(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_fragment_in_parallel_body_still_refused(tmp_path):
    @T.prim_func
    def bad(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                f = T.alloc_fragment((64,), "float32")
                f[i] = X[i]
                X[i] = f[i]

    with pytest.raises(ValueError, match=r"fragment buffer 'f'.*allocated inside a T\.Parallel"):
        tilecute.build_cubin(bad, "sm_90a", out_dir=str(tmp_path))


@pytest.mark.gpu
def test_scalar_in_parallel_body_matches_torch():
    import torch

    kernel = tilecute.compile(_relu_grad(), out_idx=[-1])
    x = torch.randn(64, 32, device="cuda")
    g = torch.randn(64, 32, device="cuda")
    torch.testing.assert_close(kernel(x, g), g * (x > 0).float())
