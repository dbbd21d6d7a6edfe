"""The corpus of TileLang-style programs (tests/corpus/, issue 17's "What must show"):
every program builds to an sm_90a cubin, and to an sm_80 one where the program allows;
on a GPU each runs on random inputs and matches its torch reference.

A program that needs a feature tilecute lacks keeps its TileLang form and is a strict
xfail naming the feature (its module's ``MISSING``), so that the day the feature lands
the test says so."""

import sys
from pathlib import Path

import pytest

import tilecute

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

MODULES = {name: corpus.load(name) for name in corpus.NAMES}


def _param(name, *rest):
    missing = MODULES[name].MISSING
    marks = [pytest.mark.xfail(strict=True, reason=missing)] if missing else []
    return pytest.param(name, *rest, marks=marks, id="-".join([name, *rest]))


BUILDS = [_param(n, "sm_90a") for n in corpus.NAMES] + \
    [_param(n, "sm_80") for n in corpus.NAMES if MODULES[n].SM80]


def test_corpus_covers_issue_17():
    """At least 30 programs, and the kinds issue 17 lists."""
    assert len(corpus.NAMES) >= 30
    for kind in ("elementwise", "gemm_splitk", "gemm_streamk", "gemm_persistent", "gemm_fp8",
                 "gemm_dequant_int4", "gemv", "rms_norm", "rms_norm_bwd", "layer_norm_fwd",
                 "layer_norm_bwd", "softmax", "topk", "cumsum", "conv2d_im2col", "hadamard",
                 "blocksparse_gemm", "linear_attention"):
        assert any(n.startswith(kind) for n in corpus.NAMES), kind
    for name, m in MODULES.items():
        assert callable(m.program) and callable(m.make_args) and callable(m.reference), name
        assert m.MISSING is None or (isinstance(m.MISSING, str) and m.MISSING), name


@pytest.mark.parametrize("name, arch", BUILDS)
def test_builds(name, arch, tmp_path):
    info = tilecute.build_cubin(MODULES[name].program(), arch, out_dir=str(tmp_path))
    assert info.kernel_names


def _tolerance(value, i):
    return value[i] if isinstance(value, tuple) else value


@pytest.mark.gpu
@pytest.mark.parametrize("name", [_param(n) for n in corpus.NAMES])
def test_matches_torch(name):
    import torch

    m = MODULES[name]
    torch.manual_seed(0)
    kernel = tilecute.compile(m.program())
    args = m.make_args("cuda")
    expected = m.reference(*[a.clone() for a in args])
    kernel(*args)
    torch.cuda.synchronize()
    assert len(expected) == len(m.OUTPUTS)
    for i, (index, want) in enumerate(zip(m.OUTPUTS, expected)):
        got = args[index]
        assert got.dtype == want.dtype, (name, index, got.dtype, want.dtype)
        if not got.dtype.is_floating_point or got.dtype.itemsize == 1:
            got, want = got.double(), want.double()  # fp8 and integers compare by value
        torch.testing.assert_close(got, want.to(got.dtype), atol=_tolerance(m.ATOL, i),
                                   rtol=_tolerance(m.RTOL, i), msg=lambda s: f"{name} output "
                                   f"{index}: {s}")
