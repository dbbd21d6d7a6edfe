"""tilecute.torch: custom-op registration and fake-tensor shape inference (CPU torch)."""

import pytest

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import elementwise as E  # noqa: E402
import tilecute  # noqa: E402
import tilecute.torch as tt  # noqa: E402


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    import os

    os.environ["TILECUTE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return {
        "vadd": tilecute.compile(E.vector_add("float16"), out_idx=[2], target="sm_90a"),
        "add2d": tilecute.compile(E.add_2d(N=1024), out_idx=[-1], target="sm_90a"),
        "scaled": tilecute.compile(E.scaled_add(), target="sm_90a"),
    }


def test_schema_follows_the_abi(kernels):
    assert tt.schema(kernels["vadd"]) == "(Tensor A, Tensor B) -> Tensor"
    assert tt.schema(kernels["scaled"], ["out"]) == (
        "(Tensor x, Tensor y, Tensor(a2!) out, float alpha, float beta, int offset) -> ()")


def test_fake_impl_infers_output_shapes_from_symbols(kernels):
    op = tt.register(kernels["add2d"], "tilecute_test::add2d")
    with FakeTensorMode():
        x = torch.empty(333, 1024)
        y = op(x, x)
        assert tuple(y.shape) == (333, 1024) and y.dtype == torch.float32
    assert hasattr(torch.ops.tilecute_test, "add2d")


def test_mutating_op_returns_nothing_under_fake_tensors(kernels):
    op = tt.register(kernels["scaled"], "tilecute_test::scaled_add", mutates_args=["out"])
    with FakeTensorMode():
        x = torch.empty(10, dtype=torch.bfloat16)
        assert op(x, x, x, 1.0, 2.0, 3) is None


def test_registration_errors_name_the_kernel(kernels):
    with pytest.raises(ValueError, match="scaled_add: mutates_args \\['nope'\\]"):
        tt.register(kernels["scaled"], "tilecute_test::bad", mutates_args=["nope"])
    with pytest.raises(ValueError, match="compile with out_idx"):
        tt.register(kernels["scaled"], "tilecute_test::bad2")
