"""Tile-op examples on a GPU against torch (pytest -m gpu): row-wise kernels for row
widths 1024..32768 and ragged ones, fp16 and bf16; row sums, transpose, histogram and a
shared-memory round trip."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tile_ops as E  # noqa: E402
import tilecute  # noqa: E402

pytestmark = pytest.mark.gpu
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
WIDTHS = [1024, 2048, 4096, 8192, 16384, 32768, 1000, 3000]  # the last two are ragged
ROWS = 37  # not a multiple of anything


def _kernel(name, n, dtype):
    align = 8 if n % 8 == 0 else 1
    return tilecute.compile(E.ALL[name](dtype=dtype, align=align, **E.row_config(n)))


def _tol(dtype):
    return {"float16": 2e-3, "bfloat16": 1.6e-2}[dtype]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", WIDTHS + [3001])
def test_softmax(n, dtype):
    x = torch.randn(ROWS, n, device="cuda", dtype=DTYPES[dtype]) * 4
    y = torch.full_like(x, float("nan"))
    _kernel("softmax", n, dtype)(x, y)
    ref = torch.softmax(x.float(), dim=-1)
    torch.testing.assert_close(y.float(), ref, rtol=_tol(dtype), atol=_tol(dtype) / 10)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", WIDTHS)
def test_layernorm(n, dtype):
    t = DTYPES[dtype]
    x = torch.randn(ROWS, n, device="cuda", dtype=t) * 3 + 1
    w, b = torch.randn(n, device="cuda", dtype=t), torch.randn(n, device="cuda", dtype=t)
    y = torch.full_like(x, float("nan"))
    _kernel("layernorm", n, dtype)(x, w, b, y)
    ref = F.layer_norm(x.float(), (n,), w.float(), b.float(), eps=1e-5)
    torch.testing.assert_close(y.float(), ref, rtol=2 * _tol(dtype), atol=4 * _tol(dtype))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", WIDTHS)
def test_rmsnorm(n, dtype):
    t = DTYPES[dtype]
    x = torch.randn(ROWS, n, device="cuda", dtype=t)
    w = torch.randn(n, device="cuda", dtype=t)
    y = torch.full_like(x, float("nan"))
    _kernel("rmsnorm", n, dtype)(x, w, y)
    ref = F.rms_norm(x.float(), (n,), w.float(), eps=1e-6)
    torch.testing.assert_close(y.float(), ref, rtol=2 * _tol(dtype), atol=4 * _tol(dtype))


def test_misaligned_row_length_is_refused_by_the_launcher():
    k = _kernel("softmax", 4096, "float16")  # align=8
    x = torch.randn(4, 4092, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="divisible by 8"):
        k(x, torch.empty_like(x))


@pytest.mark.parametrize("m,n", [(1, 1024), (37, 5000), (1000, 4096)])
def test_row_sum(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    s = torch.full((m,), float("nan"), device="cuda")
    tilecute.compile(E.row_sum())(x, s)
    torch.testing.assert_close(s, x.float().sum(-1), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("m,n", [(4096, 4096), (256, 1024), (1000, 200)])
def test_transpose(m, n):
    a = torch.randn(m, n, device="cuda")
    b = torch.full((n, m), float("nan"), device="cuda")
    tilecute.compile(E.transpose(M=m, N=n))(a, b)
    assert torch.equal(b, a.t())


@pytest.mark.parametrize("n", [1, 4096, 1000003])
def test_histogram(n):
    x = torch.randint(0, 256, (n,), device="cuda", dtype=torch.int32)
    h = torch.zeros(256, device="cuda", dtype=torch.int32)
    tilecute.compile(E.histogram())(x, h)
    assert torch.equal(h, torch.bincount(x, minlength=256).to(torch.int32))


def test_tile_copy_round_trip_through_shared_and_registers():
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.full_like(a, float("nan"))
    tilecute.compile(E.tile_copy())(a, b)
    assert torch.equal(a, b)
