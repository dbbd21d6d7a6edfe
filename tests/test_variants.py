"""Plain T.dynamic extents that decide a row stride's alignment: an aligned variant (TMA,
vector accesses) and the general one, picked per call (tilecute.variants; issue 17)."""

import sys
from pathlib import Path

import pytest

import tilecute
from tilecute.variants import AlignedOrGeneral, alignment_divisors

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dynamic_programs as D  # noqa: E402


class _Shape:
    def __init__(self, *shape):
        self.shape = shape


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


def test_aligned_variant_keeps_tma_and_the_call_picks_by_shape():
    f = D.copy2d()
    assert alignment_divisors(f) == {"K": 8}  # (M, K) float16: K * 2 bytes per row
    k = tilecute.compile(f)
    assert isinstance(k, AlignedOrGeneral) and k.checks == [(0, 1, 8)]
    kinds = lambda kern: [p.kind for p in kern.abi.kernels[0].params]  # noqa: E731
    assert "tma_desc" in kinds(k.aligned) and "tma_desc" not in kinds(k.general)
    assert k.pick((_Shape(128, 256), _Shape(128, 256))) is k.aligned
    assert k.pick((_Shape(128, 250), _Shape(128, 250))) is k.general
    assert k.abi is k.general.abi and k.name == "copy2d"
    assert Path(k.ensure_cubin()).exists() and Path(k.aligned.ensure_cubin()).exists()


def test_no_variant_where_alignment_does_not_depend_on_the_symbol():
    import tilecute.language as T

    M = T.dynamic("M")

    @T.prim_func
    def rows(A: T.Tensor((M, 64), "float16"), B: T.Tensor((M, 64), "float16")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            for i, j in T.Parallel(64, 64):
                B[bx * 64 + i, j] = A[bx * 64 + i, j]
    assert alignment_divisors(rows) == {}
    assert not isinstance(tilecute.compile(rows), AlignedOrGeneral)
    k = tilecute.compile(D.copy2d(), options={"disable_dynamic_variants": True})
    assert not isinstance(k, AlignedOrGeneral)


@pytest.mark.gpu
def test_both_variants_are_correct_on_the_gpu():
    import torch

    k = tilecute.compile(D.copy2d())
    for m, kk in ((128, 256), (100, 250), (64, 8), (7, 3)):
        a = torch.randn(m, kk, device="cuda", dtype=torch.float16)
        b = torch.empty_like(a)
        k(a, b)
        torch.testing.assert_close(b, a)
