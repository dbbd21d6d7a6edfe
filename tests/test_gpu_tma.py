"""TMA on a GPU (sm_90, pytest -m gpu): tiled load/store round trips for ranks 1-5 and
fp16/bf16/fp32/fp8 with sizes that are not multiples of the box, a strided view, the
pipelined copy with 1-4 stages, fresh descriptors for every launch, and the launcher's
launch-time TMA checks."""

import pytest

torch = pytest.importorskip("torch")

import tilecute  # noqa: E402
import tma_ops as E  # noqa: E402

pytestmark = pytest.mark.gpu

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "float8_e4m3": torch.float8_e4m3fn}


def _rand(shape, dtype):
    x = torch.randn(*shape, device="cuda")
    return x.to(TORCH[dtype])


def _same(a, b):
    if a.dtype == torch.float8_e4m3fn:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


@pytest.mark.parametrize("box,shape", [
    ((256,), (1000,)),
    ((64, 64), (1000, 200)),
    ((8, 16, 64), (13, 72, 136)),  # all but the first dim: multiples of 8 (16 bytes)
    ((2, 4, 8, 64), (3, 16, 24, 72)),
    ((1, 2, 4, 8, 32), (3, 8, 8, 24, 40)),
])
def test_round_trip_ranks(box, shape):
    kernel = tilecute.compile(E.tma_copy(box))
    a = _rand(shape, "float16")
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    assert _same(a, b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float8_e4m3"])
def test_round_trip_dtypes(dtype):
    kernel = tilecute.compile(E.tma_copy((32, 64), dtype=dtype))
    a = _rand((333, 208), dtype)
    b = torch.zeros_like(a)
    kernel(a, b)
    assert _same(a, b)


def test_strided_view():
    kernel = tilecute.compile(E.strided_copy())
    base = _rand((300, 264), "float16")
    a = base[:, 8:208]  # rows 264 elements apart, 16-byte aligned start
    b = torch.zeros(300, 200, device="cuda", dtype=torch.float16)
    kernel(a, b)
    assert torch.equal(a, b)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("rows", [1000, 64, 7])
def test_pipelined_copy(stages, rows, splits):
    kernel = tilecute.compile(E.pipelined_copy(stages=stages, splits=splits))
    a = _rand((rows, 520), "float16")
    b = torch.zeros_like(a)
    kernel(a, b)
    assert torch.equal(b, a + 1)


def test_explicit_forms():
    kernel = tilecute.compile(E.explicit_copy())
    a = _rand((130, 72), "float16")
    b = torch.zeros_like(a)
    kernel(a, b)
    assert torch.equal(a, b)


def test_fresh_descriptors_per_launch():
    """One kernel, tensors of different shapes and addresses in a row: each launch encodes
    its own descriptors, so every result is right."""
    kernel = tilecute.compile(E.tma_copy((64, 64)))
    for shape in [(1000, 200), (64, 64), (300, 1000), (1000, 200)]:
        a = _rand(shape, "float16")
        b = torch.zeros_like(a)
        kernel(a, b)
        assert torch.equal(a, b), shape


def test_launch_time_checks():
    kernel = tilecute.compile(E.strided_copy())
    base = _rand((300, 264), "float16")
    with pytest.raises(ValueError, match="A"):
        kernel(base[:, 1:201], torch.zeros(300, 200, device="cuda", dtype=torch.float16))
    flat = torch.zeros(300 * 200 + 1, device="cuda", dtype=torch.float16)
    copy = tilecute.compile(E.tma_copy((64, 64)))
    with pytest.raises(ValueError, match="A"):
        copy(flat[1:].view(300, 200), torch.zeros(300, 200, device="cuda", dtype=torch.float16))
