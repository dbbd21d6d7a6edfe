import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the round files' shared tests (tests/rounds.py) report their asserts as test files do
pytest.register_assert_rewrite("rounds")
sys.path.insert(0, str(ROOT / "examples"))

# cubins build without a GPU when the arch is given
os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
# a kernel the static hang check flags fails its test (users get a HangWarning by default)
os.environ.setdefault("TILECUTE_HANG_CHECK", "error")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU"))


_GPU = None


def _has_gpu() -> bool:
    global _GPU
    if _GPU is None:
        try:
            import torch

            _GPU = torch.cuda.is_available()
        except ImportError:
            _GPU = False
    return _GPU


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private, empty kernel cache for one test."""
    d = tmp_path / "cache"
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(d))
    return d
