"""tilecute.testing: TileLang's test marks and helpers, as tilelang.testing spells them."""

import pytest
import torch

import tilecute.testing as tt


def _skips(mark) -> bool:
    (m,) = mark.marks()
    assert m.name == "skipif"
    return bool(m.args[0])


def test_marks_for_other_backends_always_skip():
    for mark in (tt.requires_rocm, tt.requires_cdna, tt.requires_gfx950, tt.requires_metal,
                 tt.requires_llvm):
        assert _skips(mark), mark.reason


def test_requires_cuda_follows_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _skips(tt.requires_cuda) and _skips(tt.requires_cuda_or_cdna)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not _skips(tt.requires_cuda)


def test_requires_compute_version(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert not _skips(tt.requires_cuda_compute_version_ge(9, 0))
    assert _skips(tt.requires_cuda_compute_version_gt(9, 0))
    assert _skips(tt.requires_cuda_compute_version_eq(8, 0))
    assert not _skips(tt.requires_cuda_compute_version_lt(10))
    assert not _skips(tt.requires_cuda_compute_version(8, 6, mode="ge"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _skips(tt.requires_cuda_compute_version_ge(7, 0))
    with pytest.raises(ValueError, match="mode='ne'"):
        tt.requires_cuda_compute_version(9, 0, mode="ne")


def test_requires_package():
    assert not _skips(tt.requires_package("json", "torch"))
    assert _skips(tt.requires_package("json", "no_such_package_tilecute"))


def test_mark_decorates_a_test():
    @tt.requires_rocm
    def t():
        pass

    (m,) = t.pytestmark
    assert m.name == "skipif" and m.args[0] is True and "CUDA code only" in m.kwargs["reason"]
